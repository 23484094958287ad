//! Hessian-vector products by forward over reverse (`irad hvp`, `irad::hvp`):
//! on every corpus program with an f64 result (tests/corpus, both the
//! surface and the IR files) and on the benchmark programs (rosenbrock,
//! Lotka-Volterra, the MLP with bulk primitives, whose pullback uses `gemm`,
//! the GMM), for two directions v and w and on both backends:
//! - the value and the gradient are `irad::grad`'s (to rounding);
//! - H·v matches central finite differences of the gradient along v (step
//!   h = 1e-5; tolerance 1e-6 · max(1, |entry|), which leaves room for the
//!   O(h²) truncation and the O(ε/h) rounding of the difference);
//! - symmetry: w·(H v) = v·(H w) within 1e-12 · (the sum of the magnitudes
//!   of the products);
//! - the interpreter and the JIT give the same bits.
//!
//! The full Hessian (`irad::hessian`, one HVP per f64 input) on the same
//! corpus cases: symmetric within 1e-10 relative, times v equal to the HVP
//! along v to 1e-12, the backends bit for bit.
//!
//! Tapes of duals (`push`/`pop` of forward mode) also run on both backends
//! at widths 1, 2 and 8, bit for bit.
//!
//! Calls through function values (the corpus's `higher_order`, rosenbrock's
//! `main_like`) are covered: their pieces are found at run time, then
//! differentiated forward at run time. Also: the JSON shapes, the text
//! output, and the errors of `irad hvp` and `irad hessian`.

use irad::{Backend, GradOptions, GradRequest, Source, Val};
use std::path::Path;
use std::process::{Command, Output};

#[path = "common/values.rs"]
mod values;
use values::{flat_all as flat, leaves, map_args};

fn req<'a>(f: irad::ir::FuncId, args: &'a [Val], backend: Backend) -> GradRequest<'a> {
    GradRequest {
        opts: GradOptions {
            exec: backend.exec(),
            ..GradOptions::default()
        },
        ..GradRequest::new(f, args)
    }
}

/// The f64 entries of a direction over the arguments that have a tangent
/// (those the gradient has entries for).
fn direction_leaves(t: &[Val], params: &[irad::ir::Type]) -> Vec<f64> {
    let mut out = Vec::new();
    for (v, ty) in t.iter().zip(params) {
        if ty.has_tangent() {
            leaves(v, &mut out);
        }
    }
    out
}

/// Bit-for-bit equality of two lists of f64 (NaN equal to NaN).
fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

fn dot(a: &[f64], b: &[f64]) -> (f64, f64) {
    let d = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let s = a.iter().zip(b).map(|(x, y)| (x * y).abs()).sum();
    (d, s)
}

/// The gradient's f64 entries at `args` (reverse mode, interpreter).
fn gradient(src: &Source, m: &irad::ir::Module, f: irad::ir::FuncId, args: &[Val]) -> Vec<f64> {
    let registry = irad::rules::Registry::new();
    let (g, _) = irad::grad(src, m, &registry, &req(f, args, Backend::Interp)).expect("grad");
    flat(&g.gradient)
}

/// Every check of the module header on `@f(args)`; `what` names the case.
fn check_case(src: &Source, m: &irad::ir::Module, f: irad::ir::FuncId, args: &[Val], what: &str) {
    let registry = irad::rules::Registry::new();
    let params = m[f].param_types();
    let v = map_args(args, &|_, i| ((i * 7 + 3) % 11) as f64 / 5.0 - 1.0);
    let w = map_args(args, &|_, i| ((i * 5 + 1) % 13) as f64 / 6.0 - 1.0);
    let (vl, wl) = (direction_leaves(&v, &params), direction_leaves(&w, &params));
    let mut by_backend = Vec::new();
    for backend in [Backend::Interp, Backend::Jit] {
        let r = req(f, args, backend);
        let (hv, _) = irad::hvp(src, m, &registry, &r, &v).expect("hvp along v");
        let (hw, _) = irad::hvp(src, m, &registry, &r, &w).expect("hvp along w");
        let (g, _) = irad::grad(src, m, &registry, &r).expect("grad");
        let gl = flat(&g.gradient);
        for h in [&hv, &hw] {
            assert!(h.value.same(&g.value), "{what} {backend:?}: value");
            let got = flat(&h.gradient);
            assert_eq!(got.len(), gl.len(), "{what}: gradient length");
            for (a, b) in got.iter().zip(&gl) {
                assert!(
                    (a - b).abs() <= 1e-12 * 1f64.max(b.abs()),
                    "{what} {backend:?}: gradient {got:?} vs {gl:?}"
                );
            }
            assert_eq!(
                h.hvp.iter().map(Option::is_some).collect::<Vec<_>>(),
                h.gradient.iter().map(Option::is_some).collect::<Vec<_>>(),
                "{what}: hvp shaped like the gradient"
            );
        }
        let (hvl, hwl) = (flat(&hv.hvp), flat(&hw.hvp));
        let (a, sa) = dot(&wl, &hvl);
        let (b, sb) = dot(&vl, &hwl);
        assert!(
            (a - b).abs() <= 1e-12 * sa.max(sb).max(1.0),
            "{what} {backend:?}: w.(Hv) = {a}, v.(Hw) = {b}"
        );
        by_backend.push((flat(&hv.gradient), hvl, hwl));
    }
    let (i, j) = (&by_backend[0], &by_backend[1]);
    assert!(
        same_bits(&i.0, &j.0),
        "{what}: gradients differ between backends"
    );
    assert!(
        same_bits(&i.1, &j.1),
        "{what}: H v differs between backends"
    );
    assert!(
        same_bits(&i.2, &j.2),
        "{what}: H w differs between backends"
    );
    // Central differences of the gradient along v.
    let h = 1e-5;
    let plus = map_args(args, &|x, k| x + h * ((k * 7 + 3) % 11) as f64 / 5.0 - h);
    let minus = map_args(args, &|x, k| x - h * ((k * 7 + 3) % 11) as f64 / 5.0 + h);
    let (gp, gm) = (gradient(src, m, f, &plus), gradient(src, m, f, &minus));
    let fd: Vec<f64> = gp
        .iter()
        .zip(&gm)
        .map(|(p, q)| (p - q) / (2.0 * h))
        .collect();
    assert_eq!(fd.len(), i.1.len(), "{what}: H v length");
    for (got, want) in i.1.iter().zip(&fd) {
        assert!(
            (got - want).abs() <= 1e-6 * 1f64.max(want.abs()),
            "{what}: H v {:?} vs differences {fd:?}",
            i.1
        );
    }
}

/// The Hessian (`irad::hessian`): symmetric within 1e-10 · max(1, |entry|),
/// H v equal to `irad::hvp` along v within 1e-12 · (the sum of the
/// magnitudes of the products), its gradient `irad::hvp`'s, the two
/// backends bit for bit.
fn check_hessian(
    src: &Source,
    m: &irad::ir::Module,
    f: irad::ir::FuncId,
    args: &[Val],
    what: &str,
) {
    let registry = irad::rules::Registry::new();
    let params = m[f].param_types();
    let v = map_args(args, &|_, i| ((i * 7 + 3) % 11) as f64 / 5.0 - 1.0);
    let vl = direction_leaves(&v, &params);
    let mut by_backend = Vec::new();
    for backend in [Backend::Interp, Backend::Jit] {
        let r = req(f, args, backend);
        let (h, _) = irad::hessian(src, m, &registry, &r).expect("hessian");
        let (hv, _) = irad::hvp(src, m, &registry, &r, &v).expect("hvp");
        let n = vl.len();
        assert_eq!(h.rows.len(), n, "{what}: rows");
        assert_eq!(h.inputs.len(), n, "{what}: labels");
        for (i, row) in h.rows.iter().enumerate() {
            assert_eq!(row.len(), n, "{what}: row {i}");
            for (j, x) in row.iter().enumerate() {
                let y = h.rows[j][i];
                assert!(
                    (x - y).abs() <= 1e-10 * 1f64.max(x.abs()).max(y.abs()),
                    "{what} {backend:?}: H[{i}][{j}] = {x}, H[{j}][{i}] = {y}"
                );
            }
        }
        let hvl = flat(&hv.hvp);
        for (i, row) in h.rows.iter().enumerate() {
            let (d, scale) = dot(row, &vl);
            assert!(
                (d - hvl[i]).abs() <= 1e-12 * scale.max(1.0),
                "{what} {backend:?}: (H v)[{i}] = {d}, hvp {}",
                hvl[i]
            );
        }
        assert!(same_bits(&flat(&h.gradient), &flat(&hv.gradient)), "{what}");
        by_backend.push(h.rows.concat());
    }
    assert!(
        same_bits(&by_backend[0], &by_backend[1]),
        "{what}: Hessians differ between backends"
    );
}

/// Every corpus case of a function with an f64 result is checked, or its
/// refusal is (a located error naming why).
#[test]
fn corpus_hvp_matches_differences_is_symmetric_and_backends_agree() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/corpus exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("json"))
        .collect();
    entries.sort();
    let mut checked = 0;
    for path in entries {
        let text = std::fs::read_to_string(&path).expect("readable");
        let reference: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let func = reference["function"].as_str().expect("function");
        let files = [reference["file"].as_str(), reference["ir_file"].as_str()];
        for file in files.into_iter().flatten() {
            let src = irad::read_source(&dir.join(file)).expect("corpus file");
            let m = irad::load(&src).expect("corpus loads");
            let f = irad::find_function(&src, &m, func).expect("function");
            if m[f].ret != irad::ir::Type::F64 {
                continue;
            }
            for case in reference["cases"].as_array().into_iter().flatten() {
                let text = case["args"].as_str().expect("args");
                let args = irad::parse_args(&Source::new("<args>", text), &m, f).expect("args");
                let what = format!("{file} @{func}({text})");
                check_case(&src, &m, f, &args, &what);
                check_hessian(&src, &m, f, &args, &what);
                checked += 1;
            }
        }
    }
    assert!(checked >= 28, "only {checked} corpus cases checked");
}

/// The benchmark programs: rosenbrock, Lotka-Volterra (RK4, 10 000 steps),
/// the MLP with bulk primitives (`gemm` in its pullback), the GMM.
#[test]
fn benchmark_programs_hvp_matches_differences() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cases = [
        (
            "examples/rosenbrock.irad",
            "rosenbrock",
            "[1.5, 0.5, -0.3, 0.8]",
        ),
        (
            "benches/programs/lotka_volterra.irad",
            "lotka_volterra",
            "1.5, 1.0, 3.0, 1.0",
        ),
        (
            "benches/programs/mlp_bulk.irad",
            "loss",
            "[0.5, -0.25], [0.1], [1.0, -1.0], [0.0, 0.5], [1.0, 2.0, -1.0, 0.5], [0, 1]",
        ),
        (
            "benches/programs/gmm.irad",
            "gmm",
            "[0.0, 0.5, 1.0, -0.5], [0.0, -0.5], [1.0, 0.5, 2.0, 1.5], [0.5, 0.25, -1.0, 1.0]",
        ),
    ];
    for (file, func, text) in cases {
        let src = irad::read_source(&root.join(file)).expect("program");
        let m = irad::load(&src).expect("loads");
        let f = irad::find_function(&src, &m, func).expect("function");
        let args = irad::parse_args(&Source::new("<args>", text), &m, f).expect("args");
        check_case(&src, &m, f, &args, &format!("{file} @{func}"));
    }
}

/// Rosenbrock's Hessian column by hand: H e₁ at x = (1.5, 0.5, -0.3) is
/// (1200 x₁² - 400 x₂ + 2, -400 x₁, 0) = (2502, -600, 0).
#[test]
fn rosenbrock_hessian_column_by_hand() {
    let src =
        irad::read_source(&Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/rosenbrock.irad"))
            .expect("program");
    let m = irad::load(&src).expect("loads");
    let f = irad::find_function(&src, &m, "rosenbrock").expect("function");
    let args = [Val::f64_array(vec![1.5, 0.5, -0.3])];
    let v = [Val::f64_array(vec![1.0, 0.0, 0.0])];
    let registry = irad::rules::Registry::new();
    for backend in [Backend::Interp, Backend::Jit] {
        let (h, _) = irad::hvp(&src, &m, &registry, &req(f, &args, backend), &v).expect("hvp");
        assert_eq!(flat(&h.hvp), [2502.0, -600.0, 0.0], "{backend:?}");
    }
}

fn irad_cmd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(args)
        .output()
        .expect("irad starts")
}

fn program_file(name: &str, text: &str) -> String {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli_hvp");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("temp file");
    path.to_string_lossy().into_owned()
}

const PROGRAM: &str = "
fn mixed(x: f64, y: [f64], n: i64) -> f64 { x * x * y[0] + y[n] * y[1] * f64(n) }
fn pair(x: f64) -> (f64, f64) { (x, x * x) }
";

#[test]
fn cli_json_and_text() {
    let file = program_file("mixed.irad", PROGRAM);
    let out = irad_cmd(&[
        "hvp",
        &file,
        "-f",
        "mixed",
        "--args",
        "2.0, [3.0, 5.0], 1",
        "--tangent",
        "1.0, [0.0, 1.0], 0",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    // f = x² y0 + y1² (n = 1): gradient (2 x y0, [x², 2 y1], null);
    // H (1, [0, 1]) = (2 y0, [2 x, 2], null).
    assert_eq!(j["value"], serde_json::json!(37.0), "{j}");
    assert_eq!(
        j["gradient"],
        serde_json::json!([12.0, [4.0, 10.0], null]),
        "{j}"
    );
    assert_eq!(j["hvp"], serde_json::json!([6.0, [4.0, 2.0], null]), "{j}");
    let out = irad_cmd(&[
        "hvp",
        &file,
        "-f",
        "mixed",
        "--args",
        "2.0, [3.0, 5.0], 1",
        "--tangent",
        "1.0, [0.0, 1.0], 0",
        "--backend",
        "interp",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "value: 37.0\ngradient:\n  %x: 12.0\n  %y: [4.0, 10.0]\n  %n: -\n\
         hvp:\n  %x: 6.0\n  %y: [4.0, 2.0]\n  %n: -\n"
    );
}

#[test]
fn cli_hessian_json_and_text() {
    let file = program_file("hessian.irad", PROGRAM);
    let out = irad_cmd(&[
        "hessian",
        &file,
        "-f",
        "mixed",
        "--args",
        "2.0, [3.0, 5.0], 1",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    // f = x² y0 + y1² (n = 1), inputs (x, y0, y1).
    assert_eq!(j["value"], serde_json::json!(37.0), "{j}");
    assert_eq!(
        j["gradient"],
        serde_json::json!([12.0, [4.0, 10.0], null]),
        "{j}"
    );
    assert_eq!(
        j["hessian"],
        serde_json::json!([[6.0, 4.0, 0.0], [4.0, 0.0, 0.0], [0.0, 0.0, 2.0]]),
        "{j}"
    );
    let out = irad_cmd(&[
        "hessian",
        &file,
        "-f",
        "mixed",
        "--args",
        "2.0, [3.0, 5.0], 1",
        "--backend",
        "interp",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "value: 37.0\ngradient:\n  %x: 12.0\n  %y: [4.0, 10.0]\n  %n: -\n\
         hessian: 3 x 3 (f64 inputs)\n  columns: %x, %y[0], %y[1]\n\
         \x20 %x: 6.0, 4.0, 0.0\n  %y[0]: 4.0, 0.0, 0.0\n  %y[1]: 0.0, 0.0, 2.0\n"
    );
}

#[test]
fn cli_errors_are_located() {
    let file = program_file("errors.irad", PROGRAM);
    // A result that is not one f64.
    let out = irad_cmd(&[
        "hvp",
        &file,
        "-f",
        "pair",
        "--args",
        "1.0",
        "--tangent",
        "1.0",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "@pair returns (f64, f64): a Hessian-vector product needs a function returning f64"
        ),
        "{err}"
    );
    // A tangent of the wrong shape.
    let out = irad_cmd(&[
        "hvp",
        &file,
        "-f",
        "mixed",
        "--args",
        "2.0, [3.0, 5.0], 1",
        "--tangent",
        "1.0, [0.0], 0",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("<tangent>"), "{err}");
    assert!(err.contains("has 1 entry, argument has 2"), "{err}");
    // A function that is not defined.
    let out = irad_cmd(&[
        "hvp",
        &file,
        "-f",
        "nope",
        "--args",
        "1.0",
        "--tangent",
        "1.0",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

/// Calls through function values: rosenbrock's `main_like(x) = apply(sin,
/// x) + apply(square, x)` = 2 sin x + 2 x², whose second derivative is
/// 4 - 2 sin x; the reverse pieces of `sin` and `@square` are found at run
/// time and differentiated forward at run time, on both backends.
#[test]
fn calls_through_function_values() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let file = root.join("examples/rosenbrock.irad");
    let x: f64 = 0.7;
    let mut outs = Vec::new();
    for backend in ["interp", "jit"] {
        let out = irad_cmd(&[
            "hvp",
            &file.to_string_lossy(),
            "-f",
            "main_like",
            "--args",
            "0.7",
            "--tangent",
            "1.0",
            "--json",
            "--backend",
            backend,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let h = j["hvp"][0].as_f64().expect("an f64");
        let want = 4.0 - 2.0 * x.sin();
        assert!((h - want).abs() <= 1e-14, "{backend}: {h} vs {want}");
        outs.push(out.stdout);
    }
    assert_eq!(outs[0], outs[1]);
}

/// Tapes of duals in compiled code: forward mode of functions that push
/// (f64s, a constant, an i64) and pop them back in another function, at
/// widths 1, 2 and 8, on both backends, bit for bit, against the derivative
/// by hand: both(x, y) = sin(7.5 (x² - y)).
#[test]
fn tapes_of_duals_run_on_both_backends_at_several_widths() {
    let text = "
func @put(%x: f64, %y: f64) -> () {
#1:
  %a = call mul(%x, %x)
  call push(%a)
  call push(%y)
  call push(2.5)
  call push(3)
  return ()
}
func @take() -> f64 {
#1:
  %k = call pop() :: i64
  %c = call pop() :: f64
  %b = call pop() :: f64
  %a = call pop() :: f64
  %kf = call sitofp(%k)
  %s = call sub(%a, %b)
  %t = call mul(%s, %kf)
  %u = call mul(%t, %c)
  %r = call sin(%u)
  return %r
}
func @both(%x: f64, %y: f64) -> f64 {
#1:
  invoke @put(%x, %y)
  %r = invoke @take()
  return %r
}
";
    let src = Source::new("tapes.ir", text);
    let m = irad::load(&src).expect("loads");
    let f = irad::find_function(&src, &m, "both").expect("function");
    let (x, y): (f64, f64) = (0.7, 0.2);
    let args = [Val::F64(x), Val::F64(y)];
    let u = 7.5 * (x * x - y);
    let want = [u.cos() * 15.0 * x, -u.cos() * 7.5];
    let registry = irad::rules::Registry::new();
    for width in [1, 2, 8] {
        let mut got = Vec::new();
        for backend in [Backend::Interp, Backend::Jit] {
            let r = GradRequest {
                mode: irad::Mode::Forward,
                opts: GradOptions {
                    exec: backend.exec(),
                    lanes: irad::ir::Lanes::dense(width).expect("a width"),
                    ..GradOptions::default()
                },
                ..GradRequest::new(f, &args)
            };
            let (g, _) = irad::grad(&src, &m, &registry, &r).expect("forward gradient");
            let d = flat(&g.gradient);
            for (a, b) in d.iter().zip(&want) {
                assert!(
                    (a - b).abs() <= 1e-12 * b.abs(),
                    "{backend:?} {width}: {d:?}"
                );
            }
            got.push(d);
        }
        assert!(same_bits(&got[0], &got[1]), "width {width}: {got:?}");
    }
}
