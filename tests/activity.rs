//! Activity analysis (`irad_passes::activity`, docs/optimise.md): which
//! values it finds active, that it removes derivative work (statements of
//! the derived functions counted with the analysis on and off), that it
//! changes no gradient (every corpus case, every single `wrt` argument and
//! all of them, reverse mode and forward mode at widths 1 and 3 and sparse; the JIT
//! agrees with the interpreter on the derived variants), and what
//! `irad dump --activity` prints.

use irad::Source;
use irad::ir::interp::{ArrayData, Val};
use irad::ir::{FuncId, Lanes, Module};
use irad::passes::activity::Activity;
use irad::passes::forward::Forward;
use irad::passes::forward::grad::{self as fgrad, GradOptions};
use irad::passes::reverse::Reverse;
use irad::passes::reverse::grad as rgrad;
use irad::rules::Registry;
use serde_json::Value as J;
use std::path::PathBuf;
use std::process::Command;

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn source(name: &str, text: &str) -> Source {
    Source {
        name: name.into(),
        text: text.into(),
    }
}

/// The module of `text` (IR, or surface when `name` ends in `.irad`),
/// normalised.
fn normalised(name: &str, text: &str) -> Module {
    let src = source(name, text);
    let mut m = irad::load(&src).unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
    irad::passes::normalise(&mut m).expect("normalises");
    m
}

fn func_id(m: &Module, name: &str) -> FuncId {
    m.by_name(name).expect("function exists")
}

/// The names of `f`'s values that activity analysis (with the parameters in
/// `wrt` active) finds active and inactive, among the named values of a
/// tracked type.
fn split(m: &Module, f: &str, wrt: &[usize]) -> (Vec<String>, Vec<String>) {
    let func = m.get(func_id(m, f)).expect("function");
    let mask: Vec<bool> = (0..func.params.len()).map(|i| wrt.contains(&i)).collect();
    let act = Activity::of(func, &mask);
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for (v, data) in func.values.iter() {
        let Some(name) = data.name.as_deref() else {
            continue;
        };
        if !irad::passes::activity::tracked(&data.ty) {
            continue;
        }
        if act.is_active(v) {
            on.push(name.to_string());
        } else {
            off.push(name.to_string());
        }
    }
    on.sort();
    off.sort();
    (on, off)
}

const LOOP: &str = "
func @f(%x: f64, %n: i64, %c: f64) -> f64 {
#1:
  goto #2
#2:
  %i = phi [#1 => 0, #3 => %i1] :: i64
  %s = phi [#1 => 0.0, #3 => %s1] :: f64
  %k = phi [#1 => 0.0, #3 => %k1] :: f64
  %more = call lt(%i, %n) :: bool
  gotoifnot %more, #4
#3:
  %xk = call mul(%x, %k) :: f64
  %a = call add(%s, %xk) :: f64
  %s1 = call add(%a, %c) :: f64
  %k1 = call add(%k, 1.0) :: f64
  %unused = call sin(%x) :: f64
  %i1 = call iadd(%i, 1) :: i64
  goto #2
#4:
  return %s
}
";

#[test]
fn constants_counters_and_unused_values_are_inactive() {
    let m = normalised("loop.ir", LOOP);
    let (on, off) = split(&m, "f", &[0, 2]);
    assert_eq!(on, ["a", "c", "s", "s1", "x", "xk"]);
    // %k counts iterations in f64: it depends on no input. %unused reaches
    // no output.
    assert_eq!(off, ["k", "k1", "unused"]);
    // With respect to %x only, %c and what only adds it stay active (the
    // sum mixes them) but %c itself is inactive.
    let (on, off) = split(&m, "f", &[0]);
    assert_eq!(on, ["a", "s", "s1", "x", "xk"]);
    assert_eq!(off, ["c", "k", "k1", "unused"]);
    // With respect to %c only, the product with %x is inactive.
    let (on, off) = split(&m, "f", &[2]);
    assert_eq!(on, ["a", "c", "s", "s1"]);
    assert_eq!(off, ["k", "k1", "unused", "x", "xk"]);
}

const ARRAYS: &str = "
func @g(%x: [f64], %data: [f64], %w: f64) -> f64 {
#1:
  %n = call length(%x) :: i64
  %buf = call zeros(%n) :: [f64]
  goto #2
#2:
  %i = phi [#1 => 0, #3 => %i1] :: i64
  %acc = phi [#1 => 0.0, #3 => %acc1] :: f64
  %more = call lt(%i, %n) :: bool
  gotoifnot %more, #4
#3:
  %d = call arrayref(%data, %i) :: f64
  %d2 = call mul(%d, %d) :: f64
  %xi = call arrayref(%x, %i) :: f64
  %t = call mul(%xi, %d2) :: f64
  call arrayset(%buf, %i, %t)
  %b = call arrayref(%buf, %i) :: f64
  %wb = call mul(%w, %b) :: f64
  %acc1 = call add(%acc, %wb) :: f64
  %i1 = call iadd(%i, 1) :: i64
  goto #2
#4:
  return %acc
}
";

#[test]
fn reads_of_inactive_arrays_are_inactive_and_writes_carry_activity() {
    let m = normalised("arrays.ir", ARRAYS);
    // With respect to %x: the data array's elements are constants; %buf
    // receives a varied value, so what is read back from it is active.
    let (on, off) = split(&m, "g", &[0]);
    assert_eq!(on, ["acc", "acc1", "b", "t", "wb", "xi"]);
    assert_eq!(off, ["d", "d2", "w"]);
    // With respect to %w only: nothing written into %buf varies.
    let (on, off) = split(&m, "g", &[2]);
    assert_eq!(on, ["acc", "acc1", "w", "wb"]);
    assert_eq!(off, ["b", "d", "d2", "t", "xi"]);
}

const CALLS: &str = "
func @h(%x: f64, %p: f64) -> f64 {
#1:
  %q = invoke @sq(%p) :: f64
  %r = invoke @sq(%x) :: f64
  %y = call mul(%q, %r) :: f64
  return %y
}

func @sq(%z: f64) -> f64 {
#1:
  %zz = call mul(%z, %z) :: f64
  return %zz
}
";

#[test]
fn calls_on_inactive_arguments_are_inactive() {
    let m = normalised("calls.ir", CALLS);
    let (on, off) = split(&m, "h", &[0]);
    assert_eq!(on, ["r", "x", "y"]);
    assert_eq!(off, ["p", "q"]);
}

/// A tuple that holds a function value beside an f64 is not tracked (it is
/// always active), but what is read out of it is: its f64 field carries the
/// derivative of what was put in. Found by the fuzz runner's wider
/// generator (`irad-fuzz derivatives`, a function value and an argument
/// passed together in a tuple): the field was called constant, and the
/// gradient through it was 0 in both modes.
const FN_TUPLES: &str = "
func @ft(%x: f64, %y: f64) -> f64 {
#1:
  %t = call tuple(@sq, %x) :: (fn(f64) -> f64, f64)
  %u = call tuple(@sq, %y) :: (fn(f64) -> f64, f64)
  %a = call getfield(%t, 1) :: f64
  %b = call getfield(%u, 1) :: f64
  %g = call getfield(%t, 0) :: fn(f64) -> f64
  %c = call %g(%a) :: f64
  %r = call mul(%a, %c) :: f64
  return %r
}

func @sq(%z: f64) -> f64 {
#1:
  %zz = call mul(%z, %z) :: f64
  return %zz
}
";

#[test]
fn fields_of_tuples_holding_function_values_carry_activity() {
    let m = normalised("fn_tuples.ir", FN_TUPLES);
    // %b is read from a tuple of %y only, and reaches no output.
    let (on, off) = split(&m, "ft", &[0]);
    assert_eq!(on, ["a", "c", "r", "x"]);
    assert_eq!(off, ["b", "y"]);
    let (on, off) = split(&m, "ft", &[1]);
    assert_eq!(on, Vec::<String>::new());
    assert_eq!(off, ["a", "b", "c", "r", "x", "y"]);
    // The gradient through the fields, by both modes in both backends:
    // d/dx x * x^2 = 3 x^2, and the same through a helper taking the tuple.
    let text = "fn u1(p: f64) -> f64 { p * p }\n\
        fn applyt(t: (fn(f64) -> f64, f64)) -> f64 { let g = t.0; g(t.1) }\n\
        fn f(x: f64) -> f64 { let t = (u1, x); t.1 * t.0(t.1) }\n\
        fn h(x: f64) -> f64 { applyt((u1, x)) * x }\n";
    let src = source("fn_tuples.irad", text);
    let module = irad::load(&src).expect("loads");
    let registry = Registry::new();
    for name in ["f", "h"] {
        let f = irad::find_function(&src, &module, name).expect("function");
        let args = [Val::F64(3.0)];
        for exec in [irad::Backend::Interp.exec(), irad::Backend::Jit.exec()] {
            for lanes in [Lanes::ONE, Lanes::Sparse] {
                let opts = GradOptions {
                    exec,
                    lanes,
                    ..GradOptions::default()
                };
                let rev = irad::grad_reverse(&src, &module, f, &args, &registry, &opts);
                let fwd = irad::grad_forward(&src, &module, f, &args, &registry, &opts);
                for g in [rev, fwd] {
                    let (g, _) = g.unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
                    assert!(
                        matches!(g.gradient[0], Some(Val::F64(d)) if d == 27.0),
                        "{name}: {:?}",
                        g.gradient
                    );
                }
            }
        }
    }
}

/// Statements of the derived functions named `prefix...` of `m`.
fn statements(m: &Module, prefix: &str) -> usize {
    m.func_ids()
        .filter_map(|id| m.get(id))
        .filter(|f| f.name.starts_with(prefix))
        .map(|f| {
            f.layout
                .iter()
                .map(|&b| f.blocks[b].insts.len() + 1)
                .sum::<usize>()
        })
        .sum()
}

/// The module with the reverse pieces of `f` with respect to `wrt`, built
/// with activity analysis on or off, and their statement count.
fn reverse_size(m: &Module, f: &str, wrt: &[usize], on: bool) -> usize {
    let registry = Registry::new();
    let mut m = m.clone();
    let id = func_id(&m, f);
    let mut rev = Reverse::new(&registry);
    rev.set_activity(on);
    let (fwd, back) = rev.rule_wrt(&mut m, id, wrt).expect("differentiates");
    let names = [&m[fwd].name, &m[back].name];
    names.iter().map(|n| statements(&m, n)).sum()
}

fn forward_size(m: &Module, f: &str, wrt: &[usize], width: u32, on: bool) -> usize {
    let registry = Registry::new();
    let mut m = m.clone();
    let id = func_id(&m, f);
    let mut fwd = Forward::new(&registry);
    fwd.set_activity(on);
    let rule = fwd
        .rule_wrt(&mut m, id, Lanes::dense(width).expect("a dense width"), wrt)
        .expect("differentiates");
    statements(&m, &m[rule].name.clone())
}

#[test]
fn activity_removes_derivative_statements() {
    let lp = normalised("loop.ir", LOOP);
    let arrays = normalised("arrays.ir", ARRAYS);
    let calls = normalised("calls.ir", CALLS);
    // (module, function, wrt, reverse off/on, forward off/on, forward width
    // 3 off/on): statements of the derived functions, exact, so that a
    // change in what the analysis finds shows here.
    let table: [(&Module, &str, &[usize], [usize; 6]); 5] = [
        (&lp, "f", &[0, 2], [41, 33, 33, 25, 53, 37]),
        (&lp, "f", &[0], [41, 31, 33, 23, 53, 31]),
        (&arrays, "g", &[0], [72, 56, 43, 34, 81, 54]),
        (&arrays, "g", &[2], [72, 44, 43, 32, 81, 48]),
        (&calls, "h", &[0], [14, 10, 12, 9, 22, 13]),
    ];
    for (m, f, wrt, want) in table {
        let got = [
            reverse_size(m, f, wrt, false),
            reverse_size(m, f, wrt, true),
            forward_size(m, f, wrt, 1, false),
            forward_size(m, f, wrt, 1, true),
            forward_size(m, f, wrt, 3, false),
            forward_size(m, f, wrt, 3, true),
        ];
        assert_eq!(
            got, want,
            "@{f} wrt {wrt:?}: statements (off, on) x (rev, fwd, fwd3)"
        );
        for pair in got.chunks(2) {
            assert!(pair[1] < pair[0], "@{f} wrt {wrt:?}: no statement removed");
        }
    }
}

/// Bit-equal values (any NaN equals any NaN; -0.0 and 0.0 differ).
fn same(a: &Val, b: &Val) -> bool {
    let f = |x: f64, y: f64| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan());
    match (a, b) {
        (Val::F64(x), Val::F64(y)) => f(*x, *y),
        (Val::Tuple(x), Val::Tuple(y)) | (Val::Dual(x), Val::Dual(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| same(p, q))
        }
        (Val::Array(x), Val::Array(y)) => match (&*x.0.borrow(), &*y.0.borrow()) {
            (ArrayData::F64(p), ArrayData::F64(q)) => {
                p.len() == q.len() && p.iter().zip(q).all(|(s, t)| f(*s, *t))
            }
            (p, q) => p == q,
        },
        (Val::I64(x), Val::I64(y)) => x == y,
        (Val::Bool(x), Val::Bool(y)) => x == y,
        (Val::Unit, Val::Unit) => true,
        _ => format!("{a:?}") == format!("{b:?}"),
    }
}

/// Every case of the corpus: (what, module normalised, function, arguments).
fn corpus() -> Vec<(String, Module, FuncId, Vec<Val>)> {
    let dir = manifest_dir().join("tests/corpus");
    let mut jsons: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/corpus exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("json"))
        .collect();
    jsons.sort();
    let mut out = Vec::new();
    for json in jsons {
        let text = std::fs::read_to_string(&json).expect("readable corpus file");
        let reference: J = serde_json::from_str(&text).expect("corpus JSON parses");
        let name = reference["function"].as_str().expect("function named");
        for file in [reference["file"].as_str(), reference["ir_file"].as_str()]
            .into_iter()
            .flatten()
        {
            let src = irad::read_source(&dir.join(file)).expect("readable corpus program");
            let mut m = irad::load(&src).expect("corpus program loads");
            irad::passes::normalise(&mut m).expect("normalises");
            let f = irad::find_function(&src, &m, name).expect("corpus function exists");
            for case in reference["cases"].as_array().into_iter().flatten() {
                let text = case["args"].as_str().expect("args text");
                let args = irad::parse_args(&source("<args>", text), &m, f).expect("args parse");
                out.push((format!("{file} @{name}({text})"), m.clone(), f, args));
            }
        }
    }
    out
}

#[derive(Copy, Clone, Debug)]
enum Mode {
    Reverse,
    Forward(Lanes),
}

/// Forward mode at dense batch width `n` (not 0).
fn fwd(n: u32) -> Mode {
    Mode::Forward(Lanes::dense(n).expect("a dense width"))
}

/// The value and gradient of `f` with respect to `wrt`, activity on or off,
/// by the interpreter or the JIT.
fn gradient(
    m: &Module,
    f: FuncId,
    args: &[Val],
    wrt: &[usize],
    mode: Mode,
    on: bool,
    jit: bool,
) -> Vec<Val> {
    let registry = Registry::new();
    let mut m = m.clone();
    let mut opts = GradOptions {
        lanes: match mode {
            Mode::Forward(lanes) => lanes,
            Mode::Reverse => Lanes::ONE,
        },
        wrt: Some(wrt.to_vec()),
        activity: on,
        ..GradOptions::default()
    };
    if jit {
        opts.exec = irad::codegen::jit_with_rules;
    }
    let g = match mode {
        Mode::Reverse => {
            let mut rev = Reverse::new(&registry);
            rgrad::gradient(&mut m, &mut rev, f, args, &opts)
        }
        Mode::Forward(_) => {
            let mut fwd = Forward::new(&registry);
            fgrad::gradient(&mut m, &mut fwd, f, args, &opts)
        }
    };
    let g = g.unwrap_or_else(|e| panic!("gradient fails: {e}"));
    let mut out = vec![g.value];
    out.extend(g.gradient.into_iter().map(|x| x.unwrap_or(Val::Unit)));
    out
}

#[test]
fn activity_changes_no_gradient_of_the_corpus() {
    let mut checked = 0;
    for (what, m, f, args) in corpus() {
        let func = m.get(f).expect("function");
        let tangents: Vec<usize> = (0..func.params.len())
            .filter(|&i| func.values[func.params[i]].ty.has_tangent())
            .collect();
        let mut sets: Vec<Vec<usize>> = tangents.iter().map(|&i| vec![i]).collect();
        sets.push(tangents.clone());
        for wrt in &sets {
            for mode in [Mode::Reverse, fwd(1), fwd(3), Mode::Forward(Lanes::Sparse)] {
                let off = gradient(&m, f, &args, wrt, mode, false, false);
                let on = gradient(&m, f, &args, wrt, mode, true, false);
                assert!(
                    off.len() == on.len() && off.iter().zip(&on).all(|(a, b)| same(a, b)),
                    "{what} wrt {wrt:?} {mode:?}: activity changed the result\n off: {off:?}\n on:  {on:?}"
                );
                let jit = gradient(&m, f, &args, wrt, mode, true, true);
                assert!(
                    jit.len() == on.len() && jit.iter().zip(&on).all(|(a, b)| same(a, b)),
                    "{what} wrt {wrt:?} {mode:?}: the JIT differs\n interp: {on:?}\n jit:    {jit:?}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 150, "only {checked} gradients compared");
}

#[test]
fn dump_activity_prints_comments_that_still_parse() {
    let dir = std::env::temp_dir().join(format!("irad-activity-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("loop.ir");
    std::fs::write(&file, LOOP).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(["dump", "--activity", "-f", "f", "--wrt", "0"])
        .arg(&file)
        .output()
        .expect("irad runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    for line in [
        "# active parameters: 0",
        "  %k = phi [#1 => 0.0, #3 => %k1] :: f64  # const",
        "  %s = phi [#1 => 0.0, #3 => %s1] :: f64  # active",
        "  %xk = call mul(%x, %k) :: f64  # active",
        "  %unused = call sin(%x) :: f64  # const",
        "  %more = call lt(%i, %n) :: bool  # const",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no line {line:?} in\n{text}"
        );
    }
    // The annotated text is the normalised module.
    let back = irad::ir::text::parse_module(&text).expect("the dump parses");
    irad::ir::eq::structural_eq(&back, &normalised("loop.ir", LOOP)).expect("same module");
    // A position out of range is a located error, not a panic.
    let bad = Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(["dump", "--activity", "-f", "f", "--wrt", "0,7"])
        .arg(&file)
        .output()
        .expect("irad runs");
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.starts_with(&format!(
            "{}:1:1: error: --wrt 7: @f has 3 parameter(s)",
            file.display()
        )),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn the_fit_benchmark_loses_the_data_arrays_derivative_work() {
    // benches/programs/fit.irad with respect to the coefficients only: the
    // reads of the data arrays are inactive, so their pullbacks (scatters
    // into the data shadows) are gone, and the gradient is unchanged.
    let path = manifest_dir().join("benches/programs/fit.irad");
    let text = std::fs::read_to_string(&path).expect("the benchmark program exists");
    let m = normalised("fit.irad", &text);
    let (on, off) = split(&m, "fit", &[0]);
    assert!(off.contains(&"x".to_string()), "{on:?} / {off:?}");
    let (plain, active) = (
        reverse_size(&m, "fit", &[0], false),
        reverse_size(&m, "fit", &[0], true),
    );
    assert!(active < plain, "{plain} -> {active}");
    let f = func_id(&m, "fit");
    let args = irad::parse_args(
        &source(
            "<args>",
            "[0.5, -0.2, 0.1], [0.0, 0.5, 1.0], [0.1, 0.9, 0.2]",
        ),
        &m,
        f,
    )
    .expect("args parse");
    for mode in [Mode::Reverse, fwd(1), Mode::Forward(Lanes::Sparse)] {
        let a = gradient(&m, f, &args, &[0], mode, false, false);
        let b = gradient(&m, f, &args, &[0], mode, true, false);
        assert!(
            a.iter().zip(&b).all(|(x, y)| same(x, y)),
            "{mode:?}: {a:?} vs {b:?}"
        );
    }
}
