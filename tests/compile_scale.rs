//! Compile time linear in branches, blocks and parameters (issue 27,
//! findings 7 and 8), checked by measuring work, not time: the shape of
//! every function the JIT compiles ([`irad::codegen::Shape`]) as lowering
//! hands it to Cranelift.
//!
//! - Register allocation visits, at each block's start, every value live
//!   there (regalloc2's single-pass allocator, the one of huge functions):
//!   their sum over the blocks must stay within a few per block. It grew
//!   with the square of the branches while the cold blocks of failed checks
//!   came after all later code in Cranelift's block order (a gradient of
//!   10 000 sequential `if`s took 27 s in Cranelift, of 20 000 over 60 s;
//!   a 100 000-term `&&` chain, over 60 s to run).
//! - The backtracking allocator takes time quadratic in the values live at
//!   once: no function it compiles may have more than
//!   `WIDE_LIVE_VALUES` of them (a function of 35 000 f64 parameters took
//!   41 s to compile, and its trampoline as long).
//!
//! A count fails at any size once the layout or the choice of settings
//! goes wrong, where a timed test would need sizes that take seconds even
//! when all is well. The programs are small enough for a debug build; the
//! values are compared with the interpreter's.

use irad::Source;
use irad::codegen::{Jit, Shape};
use irad::ir::interp::{RunOptions, Val};
use irad::ir::{FuncId, Module};

/// `y` through `n` sequential `if`s, each with its own comparison.
fn branches(n: usize) -> String {
    let mut t = String::from("fn f(x: f64) -> f64 {\n    let mut y = x;\n");
    for i in 0..n {
        let c = 0.3 + (i % 7) as f64 * 0.1;
        t.push_str(&format!(
            "    if y > {c:?} {{ y = y * 0.999; }} else {{ y = y + 0.001; }}\n"
        ));
    }
    t.push_str("    y\n}\n");
    t
}

/// `x * x` behind an `&&` chain of `n` comparisons (each a branch).
fn and_chain(n: usize) -> String {
    let terms: Vec<String> = (0..n).map(|i| format!("x > -{}.0", i + 1)).collect();
    format!(
        "fn f(x: f64) -> f64 {{\n    if {} {{ x * x }} else {{ x }}\n}}\n",
        terms.join(" && ")
    )
}

/// The sum of `n` f64 parameters.
fn params(n: usize) -> String {
    let ps: Vec<String> = (0..n).map(|i| format!("x{i}: f64")).collect();
    let sum: Vec<String> = (0..n).map(|i| format!("x{i}")).collect();
    format!(
        "fn f({}) -> f64 {{\n    {}\n}}\n",
        ps.join(", "),
        sum.join(" + ")
    )
}

fn load(name: &str, text: String) -> (Source, Module, FuncId) {
    let src = Source::new(name, text);
    let m = irad::load(&src).expect("the program loads");
    let f = irad::find_function(&src, &m, "f").expect("@f");
    (src, m, f)
}

/// The module with `@f.rev` and its pieces, optimised by the default
/// schedule (as `irad grad` compiles them), and `@f.rev`.
fn reverse(src: &Source, m: &Module, f: FuncId) -> (Module, FuncId) {
    let registry = irad::rules::Registry::new();
    let first = m.len();
    let (mut rm, _, _) = irad::reverse_module(src, m, &[f], &registry).expect("derives");
    let schedule = irad::passes::optimise::default_schedule();
    irad::optimise_from(src, &mut rm, Some(first), &schedule, false).expect("optimises");
    let rev = rm.by_name("f.rev").expect("@f.rev");
    (rm, rev)
}

/// Runs `f` on `args` compiled (capturing the shapes of what is compiled)
/// and interpreted; asserts they agree and returns the shapes.
fn shapes_of_run(m: &Module, f: FuncId, args: &[Val]) -> Vec<Shape> {
    let mut jit = Jit::new(m).expect("a JIT");
    jit.capture_shapes();
    let got = jit.run(f, args, &RunOptions::default()).expect("runs");
    let want = irad::ir::interp::run(m, f, args, &RunOptions::default()).expect("interprets");
    assert!(got.same(&want), "JIT {got:?}, interpreter {want:?}");
    let shapes = jit.take_shapes();
    assert!(!shapes.is_empty(), "nothing was compiled");
    shapes
}

/// Every function keeps at most `per_block` values live at each block
/// start on average.
fn assert_linear(shapes: &[Shape], per_block: usize) {
    for s in shapes {
        assert!(
            s.live_at_block_starts <= per_block * s.blocks.max(1),
            "{} keeps {} values live over its {} block starts (at most {per_block} each): \
             quadratic register allocation\n{s:?}",
            s.name,
            s.live_at_block_starts,
            s.blocks
        );
    }
    assert_narrow(shapes);
}

/// The backtracking allocator never gets a function with
/// `WIDE_LIVE_VALUES` values live at once or more.
fn assert_narrow(shapes: &[Shape]) {
    for s in shapes {
        assert!(
            s.huge_settings || s.most_live < irad::codegen::WIDE_LIVE_VALUES,
            "{} has {} values live at once under the backtracking allocator\n{s:?}",
            s.name,
            s.most_live
        );
    }
}

#[test]
fn sequential_branches_keep_few_values_live_in_the_gradient() {
    let n = 1_000;
    let (src, m, f) = load("branches.irad", branches(n));
    let (rm, rev) = reverse(&src, &m, f);
    let shapes = shapes_of_run(&rm, rev, &[Val::F64(0.5), Val::F64(1.0)]);
    // The pullback branches on every recorded choice: a block per branch
    // and more (checks, their cold blocks).
    let pullback = shapes
        .iter()
        .find(|s| s.name == "@f.rev.back")
        .expect("the pullback was compiled");
    assert!(pullback.blocks >= 2 * n, "{pullback:?}");
    assert_linear(&shapes, 4);
    // The primal alone, too.
    assert_linear(&shapes_of_run(&m, f, &[Val::F64(0.5)]), 4);
}

#[test]
fn a_long_and_chain_keeps_few_values_live_in_the_primal_and_the_gradient() {
    let n = 1_000;
    let (src, m, f) = load("and_chain.irad", and_chain(n));
    assert_linear(&shapes_of_run(&m, f, &[Val::F64(0.5)]), 4);
    let (rm, rev) = reverse(&src, &m, f);
    let shapes = shapes_of_run(&rm, rev, &[Val::F64(0.5), Val::F64(1.0)]);
    assert!(
        shapes.iter().any(|s| s.blocks >= n),
        "a function with a block per term: {shapes:?}"
    );
    assert_linear(&shapes, 4);
}

#[test]
fn thousands_of_parameters_go_to_the_single_pass_allocator() {
    let n = 2_000;
    let (src, m, f) = load("params.irad", params(n));
    let args: Vec<Val> = (0..n).map(|i| Val::F64(i as f64 * 0.5)).collect();
    let shapes = shapes_of_run(&m, f, &args);
    // The function and the trampoline that loads its arguments each have
    // every parameter live at once: both must get the single-pass
    // allocator.
    for name in ["@f", "trampoline of @f"] {
        let s = shapes
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("{name} was compiled: {shapes:?}"));
        assert!(s.most_live >= n, "{s:?}");
        assert!(s.huge_settings, "{s:?}");
    }
    assert_narrow(&shapes);
    // And the gradient (every parameter's cotangent in the result).
    let (rm, rev) = reverse(&src, &m, f);
    let mut rev_args = args;
    rev_args.push(Val::F64(1.0));
    assert_narrow(&shapes_of_run(&rm, rev, &rev_args));
}

/// `y = y * 0.9999 + sin(y) * 0.0001` `n` times (a derivative near 1).
fn sin_chain(n: usize) -> String {
    let mut t = String::from("fn f(x: f64) -> f64 {\n    let mut y = x;\n");
    for _ in 0..n {
        t.push_str("    y = y * 0.9999 + sin(y) * 0.0001;\n");
    }
    t.push_str("    y\n}\n");
    t
}

#[test]
fn a_huge_sweep_is_split_into_parts_that_compute_the_same_gradient() {
    // 7 300 steps: the optimised forward sweep has 6 statements a step,
    // over `PART_STMTS`, so `irad grad` splits it (irad_passes::split); the
    // pullback (5 a step) stays whole. The primal itself (4 a step) is not
    // split first.
    let n = 7_300;
    assert!(6 * n > irad::passes::split::PART_STMTS && 5 * n < irad::passes::split::PART_STMTS);
    let (src, m, f) = load("chain.irad", sin_chain(n));
    let registry = irad::rules::Registry::new();
    let args = [Val::F64(0.3)];
    let execs = [irad::Backend::Interp.exec(), irad::Backend::Jit.exec()];
    let mut req = irad::GradRequest::new(f, &args);
    req.opts.primal_split_limit = usize::MAX;
    let (runs, rm) = irad::grad_each(&src, &m, &registry, &req, &execs).expect("derives");
    let parts: Vec<&str> = rm
        .funcs()
        .map(|(_, g)| g.name.as_str())
        .filter(|name| name.contains(".part"))
        .collect();
    assert_eq!(parts, ["f.rev.fwd.part0", "f.rev.fwd.part1"], "{parts:?}");
    let grads: Vec<f64> = runs
        .into_iter()
        .map(|r| match r.expect("runs").gradient[0].as_ref() {
            Some(Val::F64(d)) => *d,
            other => unreachable!("not an f64 gradient: {other:?}"),
        })
        .collect();
    assert_eq!(grads[0].to_bits(), grads[1].to_bits(), "{grads:?}");
    // The chain rule by hand, in f64.
    let (mut y, mut d) = (0.3f64, 1.0f64);
    for _ in 0..n {
        d *= 0.9999 + 0.0001 * y.cos();
        y = y * 0.9999 + y.sin() * 0.0001;
    }
    assert!(
        d != 0.0 && ((grads[0] - d) / d).abs() < 1e-9,
        "{grads:?} against {d}"
    );
}

/// The derivatives of `sin_chain(n)` at `x0` by hand, in f64: the value, the
/// first and the second derivative (`y' = y * 0.9999 + sin(y) * 0.0001`
/// step by step).
fn sin_chain_by_hand(n: usize, x0: f64) -> (f64, f64, f64) {
    let (mut y, mut d, mut h) = (x0, 1.0f64, 0.0f64);
    for _ in 0..n {
        let g = 0.9999 + 0.0001 * y.cos();
        h = h * g - 0.0001 * y.sin() * d * d;
        d *= g;
        y = y * 0.9999 + y.sin() * 0.0001;
    }
    (y, d, h)
}

fn f64_of(v: &Val) -> f64 {
    match v {
        Val::F64(d) => *d,
        other => unreachable!("not an f64: {other:?}"),
    }
}

fn parts_of(m: &Module) -> Vec<String> {
    m.funcs()
        .map(|(_, g)| g.name.clone())
        .filter(|name| name.contains(".part"))
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    b != 0.0 && ((a - b) / b).abs() < 1e-9
}

#[test]
fn every_derivative_path_splits_a_huge_function_and_agrees() {
    // 300 steps (about 2 000 statements in forward mode's rule and reverse
    // mode's forward sweep) split at 400 statements, where `PART_STMTS` would
    // need 3 500 steps (`a_huge_sweep_is_split_...` above) and minutes in a
    // debug build: each path that runs derived code splits them first.
    let n = 300;
    let split = 400;
    let (src, m, f) = load("chain.irad", sin_chain(n));
    let registry = irad::rules::Registry::new();
    let args = [Val::F64(0.3)];
    let (value, d, h) = sin_chain_by_hand(n, 0.3);
    let mut bits = Vec::new();
    for backend in [irad::Backend::Interp, irad::Backend::Jit] {
        let mut req = irad::GradRequest::new(f, &args);
        req.opts.exec = backend.exec();
        req.opts.split_limit = split;
        let (j, jm) = irad::jvp(&src, &m, &registry, &req, &[Val::F64(1.0)]).expect("jvp");
        assert!(!parts_of(&jm).is_empty(), "jvp did not split");
        let (g, gm) = irad::vjp(&src, &m, &registry, &req, &Val::F64(1.0)).expect("vjp");
        assert!(!parts_of(&gm).is_empty(), "vjp did not split");
        let (jac, jacm) = irad::jacobian(&src, &m, &registry, &req).expect("jacobian");
        assert!(!parts_of(&jacm).is_empty(), "jacobian did not split");
        let (hv, hm) = irad::hvp(&src, &m, &registry, &req, &[Val::F64(1.0)]).expect("hvp");
        assert!(!parts_of(&hm).is_empty(), "hvp did not split");
        let got = [
            f64_of(&j.jvp),
            f64_of(g.gradient[0].as_ref().expect("a gradient")),
            jac.rows[0][0],
            f64_of(hv.gradient[0].as_ref().expect("a gradient")),
        ];
        for x in got {
            assert!(close(x, d), "{got:?} against {d}");
        }
        let second = f64_of(hv.hvp[0].as_ref().expect("an hvp entry"));
        assert!(close(second, h), "{second} against {h}");
        assert!(close(f64_of(&j.value), value));
        bits.push((got.map(f64::to_bits), second.to_bits()));
    }
    assert_eq!(bits[0], bits[1], "the interpreter and the JIT differ");
    // The compiled gradient (the API `irad bench` uses), in both modes.
    for mode in [irad::Mode::Reverse, irad::Mode::Forward] {
        let mut req = irad::GradRequest::new(f, &args);
        req.mode = mode;
        req.opts.split_limit = split;
        let g = irad::jit_gradient(&m, &registry, &req).expect("compiles");
        assert!(!parts_of(g.module()).is_empty(), "{mode:?} did not split");
        let out = g.run(&args, &RunOptions::default()).expect("runs");
        let got = f64_of(out.gradient[0].as_ref().expect("a gradient"));
        // The same operations as `irad::vjp` (reverse) or `irad::jvp`
        // (forward) above: the same bits.
        let want = if mode == irad::Mode::Reverse {
            bits[0].0[1]
        } else {
            bits[0].0[0]
        };
        assert_eq!(got.to_bits(), want, "{mode:?}: {got}");
    }
}

#[test]
fn a_huge_user_function_is_derived_in_parts_with_the_same_results() {
    // `primal_split_limit` at 200 statements cuts the 300-step chain (about
    // 1 200 statements) into parts before the derivation (the default,
    // `PRIMAL_PART_STMTS`, would need 5 000 steps); each part is derived on
    // its own, and the gradient is the same bits as without the split, in
    // both modes and both backends. The second program overflows (`z *
    // exp(y)` at y = 1000), so its plain gradient has a NaN and the strong
    // fallback derives again, from the split module (`grad_owned` rebuilds
    // it from the functions before the derivation: the parts included).
    let n = 300;
    let overflow = sin_chain(n)
        .replace("fn f(x: f64)", "fn f(x: f64, w: f64)")
        .replace("    y\n}", "    y * exp(w)\n}");
    let cases = [
        (sin_chain(n), vec![Val::F64(0.3)]),
        (overflow, vec![Val::F64(0.3), Val::F64(1000.0)]),
    ];
    let registry = irad::rules::Registry::new();
    for (text, args) in &cases {
        let (src, m, f) = load("chain.irad", text.clone());
        for mode in [irad::Mode::Reverse, irad::Mode::Forward] {
            let mut bits = Vec::new();
            for (limit, backend) in [
                (usize::MAX, irad::Backend::Interp),
                (200, irad::Backend::Interp),
                (200, irad::Backend::Jit),
            ] {
                let mut req = irad::GradRequest::new(f, args);
                req.mode = mode;
                req.opts.exec = backend.exec();
                req.opts.primal_split_limit = limit;
                let (g, gm) =
                    irad::grad_owned(&src, m.clone(), &registry, &req).expect("a gradient");
                let primal_parts = parts_of(&gm)
                    .into_iter()
                    .filter(|name| name.starts_with("f.part"))
                    .count();
                assert_eq!(
                    primal_parts > 0,
                    limit == 200,
                    "{mode:?} {limit}: {primal_parts}"
                );
                let grads: Vec<u64> = g
                    .gradient
                    .iter()
                    .map(|d| f64_of(d.as_ref().expect("a gradient")).to_bits())
                    .collect();
                assert!(
                    grads.iter().all(|b| !f64::from_bits(*b).is_nan()),
                    "{mode:?} {limit}: {grads:?}"
                );
                bits.push((f64_of(&g.value).to_bits(), grads));
            }
            assert!(bits.windows(2).all(|w| w[0] == w[1]), "{mode:?}: {bits:?}");
        }
    }
}

#[test]
fn parts_derived_on_threads_give_the_gradient_of_the_whole_function() {
    // 2 400 steps (9 601 statements) split before deriving at 5 000: two
    // parts of about 4 800 statements, each at least `PARALLEL_MIN_STMTS`
    // and self-contained, so reverse mode derives them at once on threads
    // (docs/reverse.md, "Pieces derived in parallel"). The value and
    // gradient are the bits of the function derived whole, in both
    // backends.
    let (src, m, f) = load("chain.irad", sin_chain(2_400));
    let registry = irad::rules::Registry::new();
    let args = [Val::F64(0.3)];
    let mut bits = Vec::new();
    for (limit, backend) in [
        (usize::MAX, irad::Backend::Interp),
        (5_000, irad::Backend::Interp),
        (5_000, irad::Backend::Jit),
    ] {
        let mut req = irad::GradRequest::new(f, &args);
        req.opts.exec = backend.exec();
        req.opts.primal_split_limit = limit;
        let (g, gm) = irad::grad_owned(&src, m.clone(), &registry, &req).expect("a gradient");
        let parts: Vec<usize> = gm
            .funcs()
            .filter(|(_, g)| g.name.starts_with("f.part") && !g.name.contains(".rev"))
            .map(|(_, g)| g.insts.len())
            .collect();
        if limit == usize::MAX {
            assert!(parts.is_empty(), "{parts:?}");
        } else {
            assert_eq!(parts.len(), 2, "{parts:?}");
            assert!(
                parts
                    .iter()
                    .all(|&n| n >= irad::passes::reverse::PARALLEL_MIN_STMTS),
                "{parts:?}"
            );
        }
        let value = f64_of(&g.value);
        let grad = f64_of(g.gradient[0].as_ref().expect("a gradient"));
        bits.push((value.to_bits(), grad.to_bits()));
    }
    assert!(bits.iter().all(|b| *b == bits[0]), "{bits:?}");
}
