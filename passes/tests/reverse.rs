//! Reverse mode through the library: tape memory linear in the loop count,
//! a sparse reverse sweep whose work does not depend on the array length,
//! arrays restored after the pullback and left post-primal after the forward
//! sweep alone, recursion, functions marked primitive by a registered rrule,
//! user rrules replacing built-in ones, `@f.rev`'s calling convention, and
//! agreement with forward mode.

use irad_ir::interp::{ArrayData, ArrayRef, Interpreter, RunOptions, Val};
use irad_ir::surface::compile;
use irad_ir::text::parse_module;
use irad_ir::verify::verify_module;
use irad_ir::{FuncId, Module, Prim};
use irad_passes::forward::Forward;
use irad_passes::forward::grad::{GradOptions, gradient as fwd_gradient};
use irad_passes::reverse::Reverse;
use irad_passes::reverse::grad::gradient as rev_gradient;
use irad_rules::emit::{f64c, value};
use irad_rules::{PullbackOut, Registry, RevFwdOut, RruleFns};
use smallvec::smallvec;

fn surface(src: &str) -> Module {
    let mut m = compile(src).expect("test program compiles");
    irad_passes::normalise(&mut m).expect("normalises");
    m
}

fn ir(text: &str) -> Module {
    let mut m = parse_module(text).expect("test IR parses");
    verify_module(&m).expect("test IR verifies");
    irad_passes::normalise(&mut m).expect("normalises");
    m
}

fn f64s(xs: &[f64]) -> Val {
    Val::Array(ArrayRef::new(ArrayData::F64(xs.to_vec())))
}

fn array(v: &Val) -> Vec<f64> {
    match v {
        Val::Array(a) => match &*a.0.borrow() {
            ArrayData::F64(xs) => xs.clone(),
            _ => panic!("not an f64 array"),
        },
        _ => panic!("not an array"),
    }
}

fn num(v: &Val) -> f64 {
    match v {
        Val::F64(x) => *x,
        _ => panic!("not an f64: {v:?}"),
    }
}

/// Runs the forward sweep of `f` on `args` (plus zero shadows for its f64
/// array arguments) and then the pullback with seed 1 in one interpreter;
/// returns (tape bytes pushed by the forward sweep, statements run by the
/// pullback, tape bytes left at the end).
fn sweep_costs(m: &mut Module, f: FuncId, args: Vec<Val>) -> (u64, u64, u64) {
    let reg = Registry::new();
    let mut rev = Reverse::new(&reg);
    let (fwd, back) = rev.rule(m, f).expect("reverse rule");
    let mut call = args.clone();
    for a in &args {
        if let Val::Array(x) = a {
            let n = x.0.borrow().len();
            call.push(f64s(&vec![0.0; n]));
        }
    }
    let mut interp = Interpreter::with_rules(m, &mut rev);
    let opts = RunOptions::default();
    interp.run(fwd, &call, &opts).expect("forward sweep runs");
    let after_fwd = interp.stats();
    interp
        .run(back, &[Val::F64(1.0)], &opts)
        .expect("pullback runs");
    let after_back = interp.stats();
    (
        after_fwd.pushed_bytes,
        after_back.statements - after_fwd.statements,
        after_back.tape_bytes,
    )
}

const CHAIN: &str = "fn chain(x: f64, n: i64) -> f64 {
    let mut y = x;
    for i in 0..n { y = sin(y) * 1.0001 + 0.5 * y; }
    y
}";

#[test]
fn tape_memory_grows_linearly_with_the_loop_count() {
    let mut m = surface(CHAIN);
    let f = m.by_name("chain").expect("chain");
    let mut bytes = Vec::new();
    for n in [1_000i64, 10_000, 100_000] {
        let (pushed, _, left) = sweep_costs(&mut m, f, vec![Val::F64(0.3), Val::I64(n)]);
        assert_eq!(
            left, 0,
            "the pullback pops everything the forward sweep pushed"
        );
        bytes.push(pushed);
    }
    // Exactly affine in n: the same bytes per iteration at every size.
    let per_iter = (bytes[1] - bytes[0]) / 9_000;
    assert_eq!(bytes[1] - bytes[0], per_iter * 9_000, "{bytes:?}");
    assert_eq!(bytes[2] - bytes[1], per_iter * 90_000, "{bytes:?}");
    // One f64 partial (cos y) per iteration: the loop is counted, so its
    // reverse counts back instead of popping a predecessor index, and the
    // constant partials 1.0001 and 0.5 cost no tape.
    assert_eq!(per_iter, 8, "{bytes:?}");
}

const ONE_ELEMENT: &str = "fn pick(x: [f64], k: i64) -> f64 {
    let mut s = 0.0;
    for i in 0..10 { s = s + x[k] * x[k] + f64(i); }
    s
}";

#[test]
fn reading_one_element_costs_the_same_whatever_the_array_length() {
    let mut m = surface(ONE_ELEMENT);
    let f = m.by_name("pick").expect("pick");
    let mut counts = Vec::new();
    for n in [10usize, 1_000, 1_000_000] {
        let x: Vec<f64> = (0..n).map(|i| i as f64 * 0.5).collect();
        let (_, stmts, _) = sweep_costs(&mut m, f, vec![f64s(&x), Val::I64(3)]);
        counts.push(stmts);
    }
    assert!(counts[0] > 0);
    assert_eq!(counts[0], counts[1], "{counts:?}");
    assert_eq!(counts[1], counts[2], "{counts:?}");
}

#[test]
fn arrays_are_post_primal_after_the_forward_sweep_and_restored_after_the_pullback() {
    let mut m = surface(
        "fn scale(x: [f64], c: f64) -> f64 {
            let mut s = 0.0;
            for i in 0..len(x) { x[i] = x[i] * c; s = s + x[i] * x[i]; }
            s
        }",
    );
    let f = m.by_name("scale").expect("scale");
    let reg = Registry::new();
    let mut rev = Reverse::new(&reg);
    let (fwd, back) = rev.rule(&mut m, f).expect("rule");
    let x = f64s(&[1.0, 2.0, 3.0]);
    let shadow = f64s(&[0.0; 3]);
    let mut interp = Interpreter::with_rules(&mut m, &mut rev);
    let opts = RunOptions::default();
    let v = interp
        .run(fwd, &[x.clone(), Val::F64(2.0), shadow.clone()], &opts)
        .expect("forward sweep");
    assert_eq!(num(&v), 4.0 + 16.0 + 36.0);
    assert_eq!(
        array(&x),
        [2.0, 4.0, 6.0],
        "post-primal after the forward sweep"
    );
    let dc = interp.run(back, &[Val::F64(1.0)], &opts).expect("pullback");
    assert_eq!(array(&x), [1.0, 2.0, 3.0], "entry state after the pullback");
    // s = c^2 sum x^2: ds/dx_i = 2 c^2 x_i, ds/dc = 2 c sum x^2.
    assert_eq!(array(&shadow), [8.0, 16.0, 24.0]);
    assert_eq!(num(&dc), 2.0 * 2.0 * 14.0);
}

#[test]
fn rev_follows_the_gradient_convention() {
    let mut m = surface("fn f(x: [f64], a: f64, k: i64) -> f64 { x[0] = a * x[k]; x[0] * a }");
    let f = m.by_name("f").expect("f");
    let reg = Registry::new();
    let mut rev = Reverse::new(&reg);
    let r = rev.rev(&mut m, f).expect("@f.rev");
    assert_eq!(m[r].name, "f.rev");
    verify_module(&m).expect("verifies");
    let x = f64s(&[5.0, 7.0]);
    let shadow = f64s(&[0.0, 0.0]);
    let mut interp = Interpreter::with_rules(&mut m, &mut rev);
    let out = interp
        .run(
            r,
            &[
                x.clone(),
                Val::F64(3.0),
                Val::I64(1),
                shadow.clone(),
                Val::F64(2.0),
            ],
            &RunOptions::default(),
        )
        .expect("@f.rev runs");
    let Val::Tuple(parts) = out else {
        panic!("a tuple")
    };
    // f = a^2 x[1] = 63; seed 2: da = 2 * 2 a x[1] = 84, dx[1] = 2 a^2 = 18.
    assert_eq!(num(&parts[0]), 63.0);
    assert_eq!(num(&parts[1]), 84.0);
    assert_eq!(parts.len(), 2, "one gradient: the f64 argument a");
    assert_eq!(array(&shadow), [0.0, 18.0]);
    assert_eq!(
        array(&x),
        [5.0, 7.0],
        "argument arrays back in their entry state"
    );
}

/// Reverse and forward mode agree on `name` at `args`.
fn agree(m: &mut Module, name: &str, args: Vec<Val>) -> Vec<Option<Val>> {
    let reg = Registry::new();
    let f = m.by_name(name).expect("function");
    let opts = GradOptions::default();
    let mut fwd = Forward::new(&reg);
    let gf = fwd_gradient(m, &mut fwd, f, &args, &opts).expect("forward gradient");
    let mut rev = Reverse::new(&reg);
    let gr = rev_gradient(m, &mut rev, f, &args, &opts).expect("reverse gradient");
    assert_eq!(num(&gf.value).to_bits(), num(&gr.value).to_bits());
    assert_eq!(gf.gradient.len(), gr.gradient.len());
    for (a, b) in gf.gradient.iter().zip(&gr.gradient) {
        let (sa, sb) = (format!("{a:?}"), format!("{b:?}"));
        match (a, b) {
            (Some(Val::F64(x)), Some(Val::F64(y))) => {
                assert!((x - y).abs() <= 1e-12 * (1.0 + x.abs()), "{sa} vs {sb}");
            }
            (Some(Val::Array(_)), Some(Val::Array(_))) => {
                let (xs, ys) = (array(a.as_ref().unwrap()), array(b.as_ref().unwrap()));
                for (x, y) in xs.iter().zip(&ys) {
                    assert!((x - y).abs() <= 1e-12 * (1.0 + x.abs()), "{sa} vs {sb}");
                }
            }
            _ => assert_eq!(sa, sb),
        }
    }
    gr.gradient
}

#[test]
fn recursion_and_mutual_recursion_agree_with_forward_mode() {
    let mut m = surface(
        "fn p(x: f64, n: i64) -> f64 { if n == 0 { 1.0 } else { x * q(x, n - 1) } }
         fn q(x: f64, n: i64) -> f64 { if n == 0 { 1.0 } else { sin(x) + p(x, n - 1) } }",
    );
    let g = agree(&mut m, "p", vec![Val::F64(0.7), Val::I64(7)]);
    assert!(matches!(g[0], Some(Val::F64(d)) if d != 0.0));
}

#[test]
fn dynamic_calls_use_the_run_time_rule_cache() {
    let mut m = surface(
        "fn apply(f: fn(f64) -> f64, x: f64) -> f64 { f(x) * f(x + 1.0) }
         fn sq(x: f64) -> f64 { x * x }
         fn main_like(x: f64) -> f64 { apply(sin, x) + apply(sq, x) }",
    );
    agree(&mut m, "main_like", vec![Val::F64(0.4)]);
}

#[test]
fn tuples_and_array_aliases_share_shadows() {
    let mut m = surface(
        "fn g(x: [f64], c: bool) -> f64 {
            let t = (x, 2.0);
            let y = if c { t.0 } else { x };
            y[0] = y[0] * t.1;
            x[0] * x[1]
        }",
    );
    agree(&mut m, "g", vec![f64s(&[3.0, 4.0]), Val::Bool(true)]);
}

#[test]
fn a_function_marked_primitive_uses_its_rrule() {
    let text = "func @twice(%x: f64) -> f64 {\n#1:\n  %y = call mul(%x, 2.0) :: f64\n  return %y\n}\n\
                func @f(%x: f64) -> f64 {\n#1:\n  %y = invoke @twice(%x) :: f64\n  return %y\n}\n";
    let mut m = ir(text);
    let mut reg = Registry::new();
    // A deliberately different derivative (3 instead of 2), to see it used.
    reg.register_function_rrule(
        "twice",
        RruleFns::new(
            |b, call| {
                let f = b.module().by_name("twice").expect("twice");
                let x = call.args[0].primal;
                let y = b
                    .invoke(f, &[x])?
                    .map(irad_ir::Operand::Value)
                    .expect("value");
                Ok(RevFwdOut {
                    primal: y,
                    shadows: smallvec![],
                    saved: smallvec![],
                })
            },
            |b, call| {
                let d = call.dy[0]
                    .map(|d| value(b, Prim::Mul, &[d, f64c(3.0)]))
                    .transpose()?;
                Ok(PullbackOut {
                    cotangents: smallvec![smallvec![d]],
                })
            },
        ),
    );
    let f = m.by_name("f").expect("f");
    let mut rev = Reverse::new(&reg);
    let g = rev_gradient(
        &mut m,
        &mut rev,
        f,
        &[Val::F64(1.5)],
        &GradOptions::default(),
    )
    .expect("gradient");
    assert_eq!(num(&g.value), 3.0);
    assert!(matches!(g.gradient[0], Some(Val::F64(d)) if d == 3.0));
}

#[test]
fn the_cache_builds_each_piece_once() {
    let mut m = surface(
        "fn h(x: f64) -> f64 { x * x }
         fn f(x: f64) -> f64 { h(x) + h(2.0 * x) }",
    );
    let reg = Registry::new();
    let mut rev = Reverse::new(&reg);
    let f = m.by_name("f").expect("f");
    let a = rev.rule(&mut m, f).expect("rule");
    let b = rev.rule(&mut m, f).expect("rule again");
    assert_eq!(a, b);
    let s = rev.stats();
    assert_eq!(s.derived, 2, "f and h, h once: {s:?}");
    assert!(s.hits >= 1, "{s:?}");
}

/// Reverse mode differentiates functions holding dense duals (reverse over
/// forward): `primal(x) * tangent(x)` has the cotangent `dual(t, p)` in
/// the dual argument, and a function building a dual gives each part the
/// slice of the result's cotangent. Sparse duals and tapes are refused,
/// located at the function.
#[test]
fn reverse_mode_differentiates_duals_and_refuses_sparse_ones_and_tapes() {
    let text = "func @f(%x: dual<f64>) -> f64 {\n#1:\n  %p = call primal(%x) :: f64\n  \
                %t = call tangent(%x, 0) :: f64\n  %y = call mul(%p, %t) :: f64\n  return %y\n}\n\
                func @g(%a: f64, %b: f64) -> dual<f64, 2> {\n#1:\n  %s = call sin(%a) :: f64\n  \
                %d = call dual(%s, %b, 2.0) :: dual<f64, 2>\n  return %d\n}\n";
    let mut m = parse_module(text).expect("parses");
    let reg = Registry::new();
    let mut rev = Reverse::new(&reg);
    let f = m.by_name("f").expect("f");
    let g = rev_gradient(
        &mut m,
        &mut rev,
        f,
        &[Val::Dual(vec![Val::F64(3.0), Val::F64(5.0)].into())],
        &GradOptions::default(),
    )
    .expect("gradient of a function of a dual");
    assert_eq!(num(&g.value), 15.0);
    let Some(Val::Dual(parts)) = &g.gradient[0] else {
        panic!("a dual cotangent: {:?}", g.gradient);
    };
    assert_eq!((num(&parts[0]), num(&parts[1])), (5.0, 3.0));
    // @g: the cotangent (1, 10, 100) of dual(sin a, b, 2) is (cos a, 10).
    let gid = m.by_name("g").expect("g");
    let (fwd, back) = rev.rule(&mut m, gid).expect("pieces of @g");
    let mut it = Interpreter::new(&m);
    let v = it
        .run(fwd, &[Val::F64(0.5), Val::F64(7.0)], &RunOptions::default())
        .expect("sweep");
    assert!(matches!(&v, Val::Dual(p) if p.len() == 3), "{v:?}");
    let c = it
        .run(
            back,
            &[Val::F64(1.0), Val::F64(10.0), Val::F64(100.0)],
            &RunOptions::default(),
        )
        .expect("pullback");
    let Val::Tuple(cs) = c else {
        panic!("two cotangents: {c:?}");
    };
    assert_eq!((num(&cs[0]), num(&cs[1])), (0.5f64.cos(), 10.0));

    for (text, what) in [
        (
            "func @s(%x: dual<f64, sparse>) -> f64 {\n#1:\n  %p = call primal(%x) :: f64\n  return %p\n}\n",
            "sparse tangents",
        ),
        (
            "func @s(%x: f64) -> f64 {\n#1:\n  call push(%x)\n  return %x\n}\n",
            "the AD primitive `push`",
        ),
    ] {
        let mut m = parse_module(text).expect("parses");
        let mut rev = Reverse::new(&reg);
        let s = m.by_name("s").expect("s");
        let e = rev.rule(&mut m, s).expect_err("refused");
        assert!(e.msg.contains(what), "{e}");
        assert_eq!(e.loc.func.as_deref(), Some("s"));
    }
}

/// The pieces of every function `top` calls, derived with bodies of at
/// least `min` statements apart on threads (`usize::MAX`: none), under a
/// tape limit or not, with the strong products or not: the module printed.
fn derived_text(src: &str, min: usize, limit: Option<u64>, strong: bool) -> String {
    let mut m = surface(src);
    m.set_strong_products(strong);
    let reg = Registry::new();
    let mut rev = Reverse::new(&reg);
    rev.set_parallel_min_stmts(min);
    rev.set_tape_limit(limit);
    let top = m.by_name("top").expect("declared");
    rev.rule(&mut m, top).expect("reverse rule");
    irad_ir::text::print_module(&m)
}

#[test]
fn pieces_derived_in_parallel_are_those_derived_in_turn() {
    // Self-contained callees (straight-line, an array written in place, a
    // loop, which a tiny tape limit checkpoints into replay functions: then
    // it is derived in turn after all) and one that calls another (never
    // apart): every piece is the same text whichever way it was derived.
    let mut src = String::from("fn top(x: f64, a: [f64]) -> f64 {\n");
    src.push_str("  let y = p0(x) + p1(x) + w(a, x) + l(x) + c(x);\n  y\n}\n");
    for k in 0..2 {
        src.push_str(&format!("fn p{k}(x: f64) -> f64 {{\n  let mut y = x;\n"));
        for j in 0..40 {
            src.push_str(&format!(
                "  y = sin(y) * {}.5 + exp(0.01 * y) * x;\n",
                j + k
            ));
        }
        src.push_str("  y\n}\n");
    }
    src.push_str(
        "fn w(a: [f64], x: f64) -> f64 {\n  a[0] = a[0] * x;\n  a[1] = a[0] * a[1];\n  \
         a[1] + cos(a[0])\n}\n\
         fn l(x: f64) -> f64 {\n  let mut y = x;\n  let mut i = 0;\n  \
         while i < 10 {\n    y = sin(y) * x;\n    i = i + 1;\n  }\n  y\n}\n\
         fn c(x: f64) -> f64 { p0(x * 2.0) }\n",
    );
    for limit in [None, Some(1)] {
        for strong in [false, true] {
            let apart = derived_text(&src, 1, limit, strong);
            let in_turn = derived_text(&src, usize::MAX, limit, strong);
            assert_eq!(apart, in_turn, "limit {limit:?}, strong {strong}");
            if let Some(1) = limit {
                assert!(apart.contains("replay"), "the loop is not checkpointed");
            }
        }
    }
}
