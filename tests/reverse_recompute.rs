//! Reverse mode under the conditions its "what is recorded" decisions depend
//! on (docs/reverse.md): counted loops run backwards by counting, values
//! recorded once at a loop's exit, cheap values recomputed, array elements
//! re-read instead of recorded, repeated values merged, branch decisions
//! recorded as bools.
//!
//! The programs are `tests/reverse_recompute/*.irad` and `*.ir`; each
//! `// grad: @f(ARGS)` line (`# grad:` in IR text) is one point, ARGS in the
//! `--args` syntax. At every point, on the normalised module:
//! - reverse mode's value equals the primal's bit for bit, and the
//!   interpreter and the JIT give bit-identical values and gradients;
//! - every differentiated f64 (scalar arguments, `[f64]` elements) of
//!   reverse mode, with the derived functions optimised (the default
//!   schedule) and not (`id`), agrees with forward mode (width 1) within
//!   `FWD_RTOL`, and
//!   with a central finite difference within `RTOL` (absolute floor `ATOL`
//!   scaled by `max(1, |f(x)|)`), retrying with `h / 10` as
//!   `tests/forward_fd.rs` does; a point must not sit on a kink: a component
//!   both differences disagree on fails;
//! - reverse mode with respect to each single differentiable argument (and
//!   to all but the first) gives those arguments' gradients of the full run
//!   within `WRT_RTOL` and `None` for the others;
//! - running `@f.rev.fwd` then `@f.rev.back` in one interpreter leaves every
//!   argument array bit for bit as it was, and the tapes empty.
//!
//! `// plan: @f has TEXT` (or `lacks TEXT`) lines assert that the tape plan
//! of `@f` (`reverse::tape_plan`) shows the decision the program is about
//! (a counted loop, a re-read element, a branch recorded as a bool).
//!
//! Besides the files: `@rw.rev`'s pieces run on one array given as both
//! array parameters (with one shadow for both) agree with finite
//! differences; straight-line chains of thousands of cheap statements
//! (scalar, and array reads interleaved with writes) are differentiated and
//! checked in bounded time with a pullback of a few times the primal's
//! statements; an element read before a call with a registered rrule (not
//! trusted to restore) is recorded, not read again; and a counted loop may
//! start at a value merged with an earlier one (a bug this suite found at
//! 055a44f, fixed; `start_repeats.irad`).
//!
//! Assumes the facade's `grad_reverse`/`grad_forward` and the interpreter
//! are the reference. Guarantees: a wrong gradient, a JIT/interpreter
//! difference or an unrestored array fails with file, function, point and
//! component named.

use irad::Backend;
use irad::Source;
use irad::ir::Lanes;
use irad::ir::interp::{ArrayData, ArrayRef, Interpreter, RunOptions, Val};
use irad::ir::{FuncId, Module};
use irad::passes::forward::grad::{GradOptions, Gradient};
use irad::passes::reverse::Reverse;
use irad::rules::Registry;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Relative tolerance between reverse mode and a finite difference.
const RTOL: f64 = 1e-6;
/// Absolute floor of that, scaled by `max(1, |f(x)|)`.
const ATOL: f64 = 1e-7;
/// Relative tolerance (with an absolute floor of the same size, scaled by
/// the gradient's largest component) between reverse and forward mode.
const FWD_RTOL: f64 = 1e-9;
/// Between a `wrt` subset's gradient and the full one: activity skips whole
/// contributions, which may change the order of additions.
const WRT_RTOL: f64 = 1e-12;

/// One point: a function of a program at some arguments.
struct Point {
    src: Source,
    func: String,
    args: String,
}

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The points of every program under `tests/reverse_recompute`.
fn points() -> Vec<Point> {
    let dir = manifest_dir().join("tests/reverse_recompute");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/reverse_recompute exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("ir" | "irad")))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let src = irad::read_source(&path).expect("readable program");
        let marker = if path.extension().and_then(|e| e.to_str()) == Some("ir") {
            "# grad: @"
        } else {
            "// grad: @"
        };
        for line in src.text.lines() {
            let Some(rest) = line.trim().strip_prefix(marker) else {
                continue;
            };
            let open = rest.find('(').expect("`grad: @f(ARGS)`");
            let close = rest.rfind(')').expect("`grad: @f(ARGS)`");
            out.push(Point {
                src: src.clone(),
                func: rest[..open].trim().to_string(),
                args: rest[open + 1..close].to_string(),
            });
        }
    }
    out
}

/// A deep copy of a value (arrays are references).
fn fresh(v: &Val) -> Val {
    match v {
        Val::Array(a) => Val::Array(ArrayRef::new(a.0.borrow().clone())),
        Val::Tuple(vs) => Val::Tuple(vs.iter().map(fresh).collect()),
        other => other.clone(),
    }
}

fn copies(args: &[Val]) -> Vec<Val> {
    args.iter().map(fresh).collect()
}

/// Bit-equal values (any NaN equals any NaN).
fn same(a: &Val, b: &Val) -> bool {
    let f = |x: f64, y: f64| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan());
    match (a, b) {
        (Val::F64(x), Val::F64(y)) => f(*x, *y),
        (Val::Tuple(x), Val::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| same(p, q))
        }
        (Val::Array(x), Val::Array(y)) => match (&*x.0.borrow(), &*y.0.borrow()) {
            (ArrayData::F64(p), ArrayData::F64(q)) => {
                p.len() == q.len() && p.iter().zip(q).all(|(s, t)| f(*s, *t))
            }
            (p, q) => p == q,
        },
        _ => format!("{a:?}") == format!("{b:?}"),
    }
}

/// The primal's value at `args` (on copies), by the interpreter.
fn primal(m: &Module, f: FuncId, args: &[Val]) -> f64 {
    match irad::ir::interp::run(m, f, &copies(args), &RunOptions::default()) {
        Ok(Val::F64(x)) => x,
        other => panic!("the primal does not return an f64: {other:?}"),
    }
}

/// The gradient of `f` at `args` by reverse mode (or forward mode at width
/// 1) with `backend`, with respect to `wrt`; the rendered error otherwise.
fn grad(
    src: &Source,
    m: &Module,
    f: FuncId,
    args: &[Val],
    reverse: bool,
    backend: Backend,
    wrt: Option<Vec<usize>>,
) -> Result<Gradient, String> {
    let registry = Registry::new();
    let opts = GradOptions {
        exec: backend.exec(),
        lanes: Lanes::ONE,
        wrt,
        ..GradOptions::default()
    };
    let args = copies(args);
    let r = if reverse {
        irad::grad_reverse(src, m, f, &args, &registry, &opts)
    } else {
        irad::grad_forward(src, m, f, &args, &registry, &opts)
    };
    r.map(|(g, _)| g).map_err(|e| {
        format!(
            "{} mode: {}",
            if reverse { "reverse" } else { "forward" },
            e.render(&[src])
        )
    })
}

/// Reverse mode's gradient of `f` at `args` in the interpreter, the derived
/// functions not optimised (schedule `id`), so that the optimiser cannot
/// hide or cause a difference.
fn grad_unoptimised(src: &Source, m: &Module, f: FuncId, args: &[Val]) -> Result<Gradient, String> {
    let registry = Registry::new();
    let args = copies(args);
    let schedule = irad::read_schedule(Some("id")).map_err(|e| e.render(&[src]))?;
    let req = irad::GradRequest {
        opts: GradOptions {
            exec: Backend::Interp.exec(),
            ..GradOptions::default()
        },
        schedule: Some(schedule),
        ..irad::GradRequest::new(f, &args)
    };
    irad::grad(src, m, &registry, &req)
        .map(|(g, _)| g)
        .map_err(|e| format!("reverse mode (schedule id): {}", e.render(&[src])))
}

/// Where a differentiated f64 of the arguments is: argument `arg`, element
/// `elem` of an array (`None`: a scalar).
#[derive(Clone, Copy, Debug)]
struct Leaf {
    arg: usize,
    elem: Option<usize>,
}

/// The differentiated f64s of `args`: scalar f64s and `[f64]` elements.
fn leaves(args: &[Val]) -> Vec<Leaf> {
    let mut out = Vec::new();
    for (arg, a) in args.iter().enumerate() {
        match a {
            Val::F64(_) => out.push(Leaf { arg, elem: None }),
            Val::Array(x) => {
                if let ArrayData::F64(xs) = &*x.0.borrow() {
                    out.extend((0..xs.len()).map(|k| Leaf { arg, elem: Some(k) }));
                }
            }
            _ => {}
        }
    }
    out
}

/// The value of `leaf` in `vals` (arguments or a gradient; `None` entries
/// of a gradient read as `None`).
fn get(vals: &[Option<Val>], leaf: Leaf) -> Option<f64> {
    match (vals.get(leaf.arg)?.as_ref()?, leaf.elem) {
        (Val::F64(x), None) => Some(*x),
        (Val::Array(a), Some(k)) => match &*a.0.borrow() {
            ArrayData::F64(xs) => xs.get(k).copied(),
            _ => None,
        },
        _ => None,
    }
}

/// `args` with `leaf` moved by `h`.
fn moved(args: &[Val], leaf: Leaf, h: f64) -> Vec<Val> {
    let mut out = copies(args);
    match (&mut out[leaf.arg], leaf.elem) {
        (Val::F64(x), None) => *x += h,
        (Val::Array(a), Some(k)) => {
            if let ArrayData::F64(xs) = &mut *a.0.borrow_mut() {
                xs[k] += h;
            }
        }
        _ => unreachable!("leaves are f64s"),
    }
    out
}

/// A central difference of `f` along `leaf` with step `h`.
fn central(m: &Module, f: FuncId, args: &[Val], leaf: Leaf, h: f64) -> f64 {
    let up = primal(m, f, &moved(args, leaf, h));
    let down = primal(m, f, &moved(args, leaf, -h));
    (up - down) / (2.0 * h)
}

/// Whether `ad` agrees with the finite difference `fd` at value scale `fx`.
fn fd_close(ad: f64, fd: f64, fx: f64) -> bool {
    (ad - fd).abs() <= RTOL * ad.abs().max(fd.abs()) + ATOL * fx.abs().max(1.0)
}

/// Checks reverse mode against a central difference at every leaf of
/// `args`; returns the failures.
fn check_fd(what: &str, m: &Module, f: FuncId, args: &[Val], g: &Gradient) -> Vec<String> {
    let fx = primal(m, f, args);
    let mut fails = Vec::new();
    let vals: Vec<Option<Val>> = args.iter().cloned().map(Some).collect();
    for leaf in leaves(args) {
        let Some(ad) = get(&g.gradient, leaf) else {
            fails.push(format!("{what}: no gradient at {leaf:?}"));
            continue;
        };
        let x = get(&vals, leaf).unwrap_or(0.0);
        let h = 1e-6 * x.abs().max(1.0);
        let fd = central(m, f, args, leaf, h);
        if fd_close(ad, fd, fx) {
            continue;
        }
        let fd2 = central(m, f, args, leaf, h / 10.0);
        if !fd_close(ad, fd2, fx) {
            fails.push(format!(
                "{what}: component {leaf:?}: reverse {ad:e}, central differences {fd:e} (h = {h:e}) \
                 and {fd2:e} (h / 10)"
            ));
        }
    }
    fails
}

/// Checks one point (see the module header), the JIT against the
/// interpreter only when `jit`; returns the failures.
fn check_point(p: &Point, jit: bool) -> Vec<String> {
    let what = format!("{} @{}({})", p.src.name, p.func, p.args);
    let m =
        irad::load_normalised(&p.src).unwrap_or_else(|e| panic!("{what}: {}", e.render(&[&p.src])));
    let f = irad::find_function(&p.src, &m, &p.func).expect("the function exists");
    let args_src = Source {
        name: "<args>".into(),
        text: p.args.clone(),
    };
    let args = irad::parse_args(&args_src, &m, f).expect("the arguments parse");
    let mut fails = Vec::new();
    let value = primal(&m, f, &args);
    let (rev, fwd) = match (
        grad(&p.src, &m, f, &args, true, Backend::Interp, None),
        grad(&p.src, &m, f, &args, false, Backend::Interp, None),
    ) {
        (Ok(rev), Ok(fwd)) => (rev, fwd),
        (rev, fwd) => {
            return [rev.err(), fwd.err()]
                .into_iter()
                .flatten()
                .map(|e| format!("{what}: {e}"))
                .collect();
        }
    };
    if !same(&rev.value, &Val::F64(value)) {
        fails.push(format!("{what}: value {:?}, primal {value:e}", rev.value));
    }
    if jit {
        let jit = match grad(&p.src, &m, f, &args, true, Backend::Jit, None) {
            Ok(g) => g,
            Err(e) => return vec![format!("{what}: JIT: {e}")],
        };
        let jit_same = same(&rev.value, &jit.value)
            && rev.gradient.len() == jit.gradient.len()
            && rev
                .gradient
                .iter()
                .zip(&jit.gradient)
                .all(|(a, b)| match (a, b) {
                    (Some(a), Some(b)) => same(a, b),
                    (None, None) => true,
                    _ => false,
                });
        if !jit_same {
            fails.push(format!(
                "{what}: interpreter {:?} {:?}, JIT {:?} {:?}",
                rev.value, rev.gradient, jit.value, jit.gradient
            ));
        }
    }
    let all = leaves(&args);
    let scale = all
        .iter()
        .filter_map(|&l| get(&rev.gradient, l))
        .fold(1.0f64, |s, x| s.max(x.abs()));
    let raw = match grad_unoptimised(&p.src, &m, f, &args) {
        Ok(g) => g,
        Err(e) => return vec![format!("{what}: {e}")],
    };
    if !same(&raw.value, &Val::F64(value)) {
        fails.push(format!("{what}: value (schedule id) {:?}", raw.value));
    }
    for &leaf in &all {
        let w = get(&fwd.gradient, leaf);
        for (how, g) in [("reverse", &rev), ("reverse (schedule id)", &raw)] {
            let r = get(&g.gradient, leaf);
            let ok = match (r, w) {
                (Some(r), Some(w)) => (r - w).abs() <= FWD_RTOL * scale,
                _ => false,
            };
            if !ok {
                fails.push(format!(
                    "{what}: component {leaf:?}: {how} {r:?}, forward {w:?}"
                ));
            }
        }
    }
    fails.extend(check_fd(&what, &m, f, &args, &rev));
    fails.extend(check_wrt(&what, p, &m, f, &args, &rev));
    fails.extend(check_restored(&what, &m, f, &args));
    fails
}

/// Reverse mode with respect to subsets of the arguments against the full
/// gradient `full`.
fn check_wrt(
    what: &str,
    p: &Point,
    m: &Module,
    f: FuncId,
    args: &[Val],
    full: &Gradient,
) -> Vec<String> {
    let diff: Vec<usize> = leaves(args).iter().map(|l| l.arg).collect();
    let mut positions = diff.clone();
    positions.dedup();
    let mut subsets: Vec<Vec<usize>> = positions.iter().map(|&k| vec![k]).collect();
    if positions.len() > 2 {
        subsets.push(positions[1..].to_vec());
    }
    let mut fails = Vec::new();
    for wrt in subsets {
        let g = match grad(&p.src, m, f, args, true, Backend::Interp, Some(wrt.clone())) {
            Ok(g) => g,
            Err(e) => {
                fails.push(format!("{what} wrt {wrt:?}: {e}"));
                continue;
            }
        };
        if !same(&g.value, &full.value) {
            fails.push(format!("{what} wrt {wrt:?}: value {:?}", g.value));
        }
        for leaf in leaves(args) {
            let (a, b) = (get(&g.gradient, leaf), get(&full.gradient, leaf));
            let ok = match (wrt.contains(&leaf.arg), a, b) {
                (true, Some(a), Some(b)) => {
                    (a - b).abs() <= WRT_RTOL * a.abs().max(b.abs()).max(1.0)
                }
                (false, None, _) => true,
                _ => false,
            };
            if !ok {
                fails.push(format!(
                    "{what} wrt {wrt:?}: component {leaf:?}: {a:?}, full gradient {b:?}"
                ));
            }
        }
    }
    fails
}

/// Runs `@f.rev.fwd` and `@f.rev.back` (seed 1) in one interpreter on
/// copies of `args` with zero shadows; the arrays must be as before and the
/// tapes empty.
fn check_restored(what: &str, m: &Module, f: FuncId, args: &[Val]) -> Vec<String> {
    let mut m = m.clone();
    let registry = Registry::new();
    let mut rev = Reverse::new(&registry);
    let (fwd, back) = match rev.rule(&mut m, f) {
        Ok(pieces) => pieces,
        Err(e) => return vec![format!("{what}: reverse rule: {e}")],
    };
    let mut call = copies(args);
    for a in args {
        if let Val::Array(x) = a
            && let ArrayData::F64(xs) = &*x.0.borrow()
        {
            call.push(Val::Array(ArrayRef::new(ArrayData::F64(vec![
                0.0;
                xs.len()
            ]))));
        }
    }
    let mut interp = Interpreter::with_rules(&mut m, &mut rev);
    let opts = RunOptions::default();
    if let Err(e) = interp.run(fwd, &call, &opts) {
        return vec![format!("{what}: forward sweep: {e:?}")];
    }
    if let Err(e) = interp.run(back, &[Val::F64(1.0)], &opts) {
        return vec![format!("{what}: pullback: {e:?}")];
    }
    let mut fails = Vec::new();
    let left = interp.stats().tape_bytes;
    if left != 0 {
        fails.push(format!("{what}: {left} tape bytes left after the pullback"));
    }
    for (k, (a, b)) in args.iter().zip(&call).enumerate() {
        if !same(a, b) {
            fails.push(format!(
                "{what}: argument {k} after the pullback: {b:?}, before {a:?}"
            ));
        }
    }
    fails
}

/// Runs `body` on a thread with a large stack (deep recursion in the
/// interpreter and long straight-line functions).
fn on_big_stack(body: impl FnOnce() + Send + 'static) {
    let handle = std::thread::Builder::new()
        .stack_size(1 << 30)
        .spawn(body)
        .expect("a thread with a 1 GiB stack (reserved, not committed)");
    if let Err(panic) = handle.join() {
        std::panic::resume_unwind(panic);
    }
}

/// The `plan:` lines of every program: `@f has TEXT` or `@f lacks TEXT`.
/// Returns (program, function, whether TEXT must occur, TEXT).
fn plan_lines() -> Vec<(Source, String, bool, String)> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for p in points() {
        if !seen.insert(p.src.name.clone()) {
            continue;
        }
        for line in p.src.text.lines() {
            let line = line.trim();
            let Some(rest) = line
                .strip_prefix("// plan: @")
                .or_else(|| line.strip_prefix("# plan: @"))
            else {
                continue;
            };
            let (func, rest) = rest.split_once(' ').expect("`plan: @f has|lacks TEXT`");
            let (must, text) = match rest.split_once(' ') {
                Some(("has", t)) => (true, t),
                Some(("lacks", t)) => (false, t),
                _ => panic!("`plan: @f has|lacks TEXT`: {line}"),
            };
            out.push((p.src.clone(), func.to_string(), must, text.to_string()));
        }
    }
    out
}

/// The programs exercise the decisions they are about: each `plan:` line's
/// text occurs (or does not) in the tape plan of its function
/// (`reverse::tape_plan`, as `passes/tests/reverse_plan.rs` prints it).
/// `IRAD_SHOW_PLANS=1` prints every plan checked.
#[test]
fn the_programs_reach_the_decisions_they_stress() {
    let lines = plan_lines();
    assert!(lines.len() >= 10, "only {} plan lines", lines.len());
    let mut fails = Vec::new();
    for (src, func, must, text) in &lines {
        let m = irad::load_normalised(src).expect("the program loads");
        let f = irad::find_function(src, &m, func).expect("the function exists");
        let plan = irad::passes::reverse::tape_plan(&m, &Registry::new(), f)
            .expect("the plan builds")
            .to_string();
        if std::env::var_os("IRAD_SHOW_PLANS").is_some() {
            println!("{} @{func}:\n{plan}", src.name);
        }
        if plan.contains(text.as_str()) != *must {
            fails.push(format!(
                "{} @{func}: the plan {} `{text}`:\n{plan}",
                src.name,
                if *must { "lacks" } else { "has" }
            ));
        }
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

#[test]
fn reverse_mode_agrees_at_every_point_of_the_stress_programs() {
    on_big_stack(|| {
        let points = points();
        assert!(
            points.len() >= 90,
            "found only {} points under tests/reverse_recompute",
            points.len()
        );
        let mut fails = Vec::new();
        for p in &points {
            fails.extend(check_point(p, true));
        }
        assert!(
            fails.is_empty(),
            "{} failure(s) over {} points:\n{}",
            fails.len(),
            points.len(),
            fails.join("\n")
        );
    });
}

/// A straight-line function of `n` cheap statements (products, sums,
/// min/max, with a `sin` every sixth to break the recomputation chains) of
/// two scalars, each read again every few statements so that the gradient
/// stays of order one however long the chain.
fn scalar_chain(n: usize) -> String {
    let mut s =
        String::from("fn chain(x: f64, y: f64) -> f64 {\n    let v0 = x;\n    let v1 = y;\n");
    for k in 2..n {
        let p = |d: usize| format!("v{}", k.saturating_sub(d).min(k - 1));
        let rhs = match k % 6 {
            0 => format!("{} * y * 0.5 + 0.3", p(1)),
            1 => format!("{} - {} * 0.25 + x * 0.2", p(1), p(3)),
            2 => format!("max({}, {}) * 0.9 + {} * y * 0.05", p(1), p(2), p(1)),
            3 => format!("{} * {} * 0.1 + {} * 0.8 - x * 0.1", p(1), p(1), p(2)),
            4 => format!("sin({}) + {} * 0.1", p(1), p(4)),
            _ => format!("{} * 0.7 + {} * {} * 0.1 + x * y * 0.01", p(1), p(2), p(5)),
        };
        s.push_str(&format!("    let v{k} = {rhs};\n"));
    }
    s.push_str(&format!("    v{} + v{}\n}}\n", n - 1, n / 2));
    s
}

/// A straight-line function of `n` statements reading elements of `x` and
/// writing some back (every fifth statement), so that reads are re-read or
/// recorded depending on the writes between them.
fn array_chain(n: usize) -> String {
    let mut s =
        String::from("fn chain(x: [f64]) -> f64 {\n    let m = len(x);\n    let v0 = x[0];\n");
    for k in 1..n {
        s.push_str(&format!(
            "    let v{k} = x[{} % m] * v{} * 0.5 + x[{} % m] * 0.25 + 0.1;\n",
            k,
            k - 1,
            k + 3
        ));
        if k % 5 == 0 {
            s.push_str(&format!("    x[{} % m] = v{k} * 0.5 - 0.1;\n", k * 7));
        }
    }
    s.push_str(&format!("    v{} * x[1]\n}}\n", n - 1));
    s
}

/// Statements run by the primal, and by the forward sweep and the pullback
/// of reverse mode, of `f` at `args` in the interpreter.
fn statement_counts(m: &Module, f: FuncId, args: &[Val]) -> (u64, u64, u64) {
    let mut m = m.clone();
    let registry = Registry::new();
    let mut rev = Reverse::new(&registry);
    let (fwd, back) = rev.rule(&mut m, f).expect("reverse rule");
    let mut call = copies(args);
    for a in args {
        if let Val::Array(x) = a {
            let n = x.0.borrow().len();
            call.push(Val::Array(ArrayRef::new(ArrayData::F64(vec![0.0; n]))));
        }
    }
    let opts = RunOptions::default();
    let mut interp = Interpreter::with_rules(&mut m, &mut rev);
    interp
        .run(f, &copies(args), &opts)
        .expect("the primal runs");
    let primal = interp.stats().statements;
    interp
        .run(fwd, &call, &opts)
        .expect("the forward sweep runs");
    let after_fwd = interp.stats().statements;
    interp
        .run(back, &[Val::F64(1.0)], &opts)
        .expect("the pullback runs");
    let after_back = interp.stats().statements;
    (primal, after_fwd - primal, after_back - after_fwd)
}

/// Checks a long straight-line program at `args`: the point checks of the
/// files, in bounded time, and a pullback no longer than a few times the
/// primal (recomputation costs at most the block's own primal work).
fn check_chain(name: &str, text: String, args: &str, jit: bool) {
    let start = Instant::now();
    let p = Point {
        src: Source {
            name: format!("{name}.irad"),
            text,
        },
        func: "chain".into(),
        args: args.into(),
    };
    let fails = check_point(&p, jit);
    assert!(fails.is_empty(), "{}", fails.join("\n"));
    let m = irad::load_normalised(&p.src).expect("the chain loads");
    let f = irad::find_function(&p.src, &m, "chain").expect("@chain");
    let args_src = Source {
        name: "<args>".into(),
        text: args.into(),
    };
    let vals = irad::parse_args(&args_src, &m, f).expect("the arguments parse");
    let (primal, fwd, back) = statement_counts(&m, f, &vals);
    let elapsed = start.elapsed();
    println!(
        "{name}: primal {primal} statements, forward sweep {fwd}, pullback {back}; \
         checked in {elapsed:?}"
    );
    assert!(
        fwd <= 4 * primal && back <= 6 * primal,
        "{name}: primal {primal} statements, forward sweep {fwd}, pullback {back}"
    );
    assert!(
        elapsed < Duration::from_secs(60),
        "{name}: took {elapsed:?} to check"
    );
}

/// Chains of a few thousand statements in the interpreter, and of a few
/// hundred with the JIT too: compiling the reverse pieces of a long block
/// takes time superlinear in its length (`irad grad` of `scalar_chain(n)`
/// in a debug build: 2.2 s, 7.0 s and 39 s for n = 1 000, 2 000 and 4 000,
/// against 1.3 s, 3.7 s and 17 s at the commit before 055a44f; forward
/// mode's grows linearly), which is not what this test is about.
#[test]
fn long_straight_line_chains_of_cheap_statements() {
    on_big_stack(|| {
        check_chain("scalar_chain", scalar_chain(2000), "0.3, -0.45", false);
        check_chain("scalar_chain_jit", scalar_chain(300), "0.3, -0.45", true);
        let xs = "[0.3, -0.45, 0.8, 0.1, -0.6, 0.25, 0.9]";
        check_chain("array_chain", array_chain(1500), xs, false);
        check_chain("array_chain_jit", array_chain(300), xs, true);
    });
}

/// `rw(a, b, n)` reads `a` and writes `b`; its pieces run on one array
/// given as both (with one shadow for both, as a caller passing one array
/// twice does) must give the gradient of `x -> rw(x, x, len(x))`.
#[test]
fn pieces_run_on_one_array_given_twice() {
    let path = manifest_dir().join("tests/reverse_recompute/alias.irad");
    let src = irad::read_source(&path).expect("alias.irad");
    let m = irad::load_normalised(&src).expect("alias.irad loads");
    let rw = irad::find_function(&src, &m, "rw").expect("@rw");
    let top = irad::find_function(&src, &m, "top").expect("@top");
    for xs in [vec![0.7, -1.2, 0.4], vec![0.3], vec![-0.2, 0.9, 1.1, 0.5]] {
        let mut mm = m.clone();
        let registry = Registry::new();
        let mut rev = Reverse::new(&registry);
        let (fwd, back) = rev.rule(&mut mm, rw).expect("reverse rule of @rw");
        let x = ArrayRef::new(ArrayData::F64(xs.clone()));
        let sx = ArrayRef::new(ArrayData::F64(vec![0.0; xs.len()]));
        let call = vec![
            Val::Array(x.clone()),
            Val::Array(x.clone()),
            Val::I64(xs.len() as i64),
            Val::Array(sx.clone()),
            Val::Array(sx.clone()),
        ];
        let opts = RunOptions::default();
        let mut interp = Interpreter::with_rules(&mut mm, &mut rev);
        let value = interp.run(fwd, &call, &opts).expect("forward sweep");
        interp.run(back, &[Val::F64(1.0)], &opts).expect("pullback");
        let args = vec![Val::Array(ArrayRef::new(ArrayData::F64(xs.clone())))];
        assert!(
            same(&value, &Val::F64(primal(&m, top, &args))),
            "value {value:?} at {xs:?}"
        );
        assert!(
            same(&Val::Array(x.clone()), &args[0]),
            "the array is not restored at {xs:?}"
        );
        let fx = primal(&m, top, &args);
        let ArrayData::F64(g) = sx.0.borrow().clone() else {
            panic!("the shadow is an f64 array")
        };
        for (k, &ad) in g.iter().enumerate() {
            let leaf = Leaf {
                arg: 0,
                elem: Some(k),
            };
            let h = 1e-6 * xs[k].abs().max(1.0);
            let fd = central(&m, top, &args, leaf, h);
            assert!(
                fd_close(ad, fd, fx),
                "element {k} at {xs:?}: pieces on one array {ad:e}, central difference {fd:e}"
            );
        }
    }
}

/// A counted loop starting at a value that repeats an earlier cheap
/// statement of its block (`tests/reverse_recompute/start_repeats.irad`; at
/// 055a44f it failed with "a saved value did not reach the pullback").
/// Reverse mode succeeds and agrees with forward mode.
#[test]
fn a_counted_loop_may_start_at_a_value_merged_with_an_earlier_one() {
    let src = Source {
        name: "start_repeats.irad".into(),
        text: "fn g(x: f64, k: i64) -> f64 {
    let a = f64(k + 1) * x;
    let mut s = a;
    for i in (k + 1)..3 {
        s = s * x;
    }
    s
}"
        .into(),
    };
    let m = irad::load_normalised(&src).expect("the program loads");
    let f = irad::find_function(&src, &m, "g").expect("@g");
    let args = [Val::F64(1.5), Val::I64(0)];
    let fwd = grad(&src, &m, f, &args, false, Backend::Interp, None).expect("forward mode");
    let rev = grad(&src, &m, f, &args, true, Backend::Interp, None);
    let rev = rev.unwrap_or_else(|e| panic!("{e}"));
    let (Some(Some(Val::F64(r))), Some(Some(Val::F64(w)))) =
        (rev.gradient.first(), fwd.gradient.first())
    else {
        panic!("no gradient for x: {:?} {:?}", rev.gradient, fwd.gradient)
    };
    assert!(
        (r - w).abs() <= FWD_RTOL * w.abs().max(1.0),
        "reverse {r}, forward {w}"
    );
}

/// A registered rrule of a user function is not trusted to put back what
/// it writes: the caller must record the element it read before the call,
/// not read it again. `@bump` doubles `a[0]`; its rule runs it and gives it
/// no derivative, and (against the contract, which is why it is not
/// trusted) leaves `a[0]` doubled in the pullback. The caller's gradient is
/// then `d(t^3)/dx0 = 3 x0^2`, which re-reading the doubled `x[0]` would
/// make `12 x0^2`.
#[test]
fn a_registered_rule_of_a_user_function_is_not_trusted_to_restore() {
    use irad::rules::{PullbackOut, RevFwdOut, RruleFns};
    let src = Source {
        name: "untrusted.irad".into(),
        text: "fn bump(a: [f64]) -> f64 {
    a[0] = a[0] * 2.0;
    a[0]
}
fn f(x: [f64]) -> f64 {
    let t = x[0];
    let y = t * t * t;
    let r = bump(x);
    y + r * 0.0
}"
        .into(),
    };
    let m = irad::load_normalised(&src).expect("the program loads");
    let f = irad::find_function(&src, &m, "f").expect("@f");
    // Without the rule, @bump's pieces restore x, and x[0] is read again.
    let trusted = irad::passes::reverse::tape_plan(&m, &Registry::new(), f)
        .expect("the plan builds")
        .to_string();
    assert!(trusted.contains("`arrayref` of #"), "{trusted}");
    let mut reg = Registry::new();
    reg.register_function_rrule(
        "bump",
        RruleFns::new(
            |b, call| {
                let bump = b
                    .module()
                    .by_name("bump")
                    .ok_or_else(|| irad::rules::RuleError::Unsupported("no @bump".into()))?;
                let r = b.invoke(bump, &[call.args[0].primal])?.ok_or_else(|| {
                    irad::rules::RuleError::Unsupported("@bump gives no value".into())
                })?;
                Ok(RevFwdOut {
                    primal: irad::ir::Operand::Value(r),
                    shadows: Default::default(),
                    saved: Default::default(),
                })
            },
            |_, call| {
                Ok(PullbackOut {
                    cotangents: call.arg_types.iter().map(|_| Default::default()).collect(),
                })
            },
        ),
    );
    let plan = irad::passes::reverse::tape_plan(&m, &reg, f)
        .expect("the plan builds")
        .to_string();
    assert!(
        !plan.contains("`arrayref` of #"),
        "x[0] is read again although @bump's rule may leave it changed:\n{plan}"
    );
    for x0 in [0.7, -1.3] {
        let args = [Val::Array(ArrayRef::new(ArrayData::F64(vec![x0, 0.5])))];
        let opts = GradOptions {
            exec: Backend::Interp.exec(),
            ..GradOptions::default()
        };
        let (g, _) = irad::grad_reverse(&src, &m, f, &args, &reg, &opts)
            .unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
        let want = 3.0 * x0 * x0;
        let got = get(
            &g.gradient,
            Leaf {
                arg: 0,
                elem: Some(0),
            },
        );
        assert!(
            got.is_some_and(|d| (d - want).abs() <= 1e-12 * want.abs().max(1.0)),
            "x0 = {x0}: reverse {got:?}, 3 x0^2 = {want}"
        );
    }
}
