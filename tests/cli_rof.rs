//! The second-order modes over forward rules, against forward over reverse:
//! reverse mode over forward mode (`irad hvp --mode rev-over-fwd`,
//! `irad::hvp_via` with `HvpMode::ReverseOverForward`: the reverse-mode
//! pieces of `@f.fwd`, run on the duals (x, V) with the seed `dual(0, 1)`)
//! forward mode over forward mode (`--mode fwd-over-fwd`,
//! `HvpMode::ForwardOverForward`: the forward rule of `@f.fwd`, V in the
//! inner tangents, unit vectors of the inputs in up to 8 outer lanes) and
//! dense forward mode over sparse forward mode (`--mode fwd-over-sparse`,
//! `HvpMode::ForwardOverSparse`: the dense rule of the sparse gradient
//! `@f.fwds.grad`, V in its lane; the gradient from the sparse builder).
//!
//! On every corpus program (all return f64; tests/corpus, both the surface
//! and the IR files) and on the benchmark programs (rosenbrock at n = 4 and
//! at n = 11, two runs of 8 outer lanes per product in forward over
//! forward, Lotka-Volterra, the MLP with bulk primitives, whose forward rule
//! writes `gemm` and so needs its rrule and its frule, the GMM), for two
//! directions, on both backends and in both modes:
//! - the mode equals forward over reverse: the value exactly, the gradient
//!   to 1e-12 relative, H·V within 1e-11 · (the sum of the magnitudes of its
//!   terms, taken as max(1, |H|·|V|) from the Hessian). The modes sum the
//!   same partial products in different orders (forward over reverse
//!   accumulates cotangents from the output back, forward over forward
//!   tangents from the inputs on, forward over sparse materialises the
//!   builder's nodes from the output back), so they agree to rounding, not bit for
//!   bit, and a bound relative to the terms' magnitudes holds where
//!   cancellation makes an entry itself small;
//! - the mode matches central differences of the gradient along V (step
//!   1e-5, tolerance 1e-6 · max(1, |entry|));
//! - the interpreter and the JIT give the same bits;
//! - the Hessian by the mode (one product per input) is symmetric within
//!   1e-10 relative and equals forward over reverse's within 1e-11
//!   relative.
//!
//! `--wrt` on `jvp`, `hvp` and `hessian` (all modes): the derivative with
//! the other arguments held constant, equal to the full one restricted (the
//! Hessian's submatrix, the product with the direction masked); bad
//! positions are located errors (exit 1), malformed ones usage errors
//! (exit 2); `--sparse` with a mode over forward rules or over the sparse
//! gradient is a usage error.
//! And `irad grad --seed` of a forward rule written in IR text (reverse over
//! forward), `irad jvp` and `irad dump --mode fwd` of one (forward over
//! forward).

use irad::{Backend, GradOptions, GradRequest, HvpMode, Source, Val};
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

/// Bit-for-bit equality of two lists of f64 (NaN equal to NaN).
fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

fn close(a: &[f64], b: &[f64], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths {a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!(
            (x - y).abs() <= tol * 1f64.max(x.abs()).max(y.abs()),
            "{what}: {a:?} vs {b:?}"
        );
    }
}

/// The gradient's f64 entries at `args` (reverse mode, interpreter).
fn gradient(src: &Source, m: &irad::ir::Module, f: irad::ir::FuncId, args: &[Val]) -> Vec<f64> {
    let registry = irad::rules::Registry::new();
    let (g, _) = irad::grad(src, m, &registry, &req(f, args, Backend::Interp)).expect("grad");
    flat(&g.gradient)
}

/// The modes checked against forward over reverse.
const MODES: [HvpMode; 3] = [
    HvpMode::ReverseOverForward,
    HvpMode::ForwardOverForward,
    HvpMode::ForwardOverSparse,
];

/// The checks of the module header on `@f(args)` in `mode`; `what` names
/// the case.
fn check_case(
    src: &Source,
    m: &irad::ir::Module,
    f: irad::ir::FuncId,
    args: &[Val],
    what: &str,
    mode: HvpMode,
) {
    let registry = irad::rules::Registry::new();
    let dirs = [
        map_args(args, &|_, i| ((i * 7 + 3) % 11) as f64 / 5.0 - 1.0),
        map_args(args, &|_, i| ((i * 5 + 1) % 13) as f64 / 6.0 - 1.0),
    ];
    // |H| from forward over reverse's Hessian, for the scale of H·V.
    let (full, _) = irad::hessian(src, m, &registry, &req(f, args, Backend::Interp))
        .expect("hessian by forward over reverse");
    let mut by_backend = Vec::new();
    for backend in [Backend::Interp, Backend::Jit] {
        let r = req(f, args, backend);
        let mut bits = Vec::new();
        for v in &dirs {
            let (a, _) = irad::hvp_via(src, m, &registry, &r, v, HvpMode::ForwardOverReverse)
                .expect("forward over reverse");
            let (b, _) = irad::hvp_via(src, m, &registry, &r, v, mode)
                .unwrap_or_else(|e| panic!("{what}: {mode:?}: {e}"));
            assert!(b.value.same(&a.value), "{what} {backend:?}: value");
            close(
                &flat(&b.gradient),
                &flat(&a.gradient),
                1e-12,
                &format!("{what} {backend:?}: gradient"),
            );
            assert_eq!(
                b.hvp.iter().map(Option::is_some).collect::<Vec<_>>(),
                a.hvp.iter().map(Option::is_some).collect::<Vec<_>>(),
                "{what}: hvp shaped like forward over reverse's"
            );
            let (ha, hb) = (flat(&a.hvp), flat(&b.hvp));
            let mut vl = Vec::new();
            for (x, ty) in v.iter().zip(m[f].param_types()) {
                if ty.has_tangent() {
                    leaves(x, &mut vl);
                }
            }
            for (i, (x, y)) in ha.iter().zip(&hb).enumerate() {
                let scale: f64 = full.rows[i]
                    .iter()
                    .zip(&vl)
                    .map(|(h, v)| (h * v).abs())
                    .sum();
                assert!(
                    (x - y).abs() <= 1e-11 * scale.max(1.0),
                    "{what} {backend:?}: H v by forward over reverse {ha:?}, by {mode:?} {hb:?}"
                );
            }
            bits.push(hb);
            bits.push(flat(&b.gradient));
        }
        by_backend.push(bits);
    }
    for (i, j) in by_backend[0].iter().zip(&by_backend[1]) {
        assert!(same_bits(i, j), "{what}: backends differ: {i:?} vs {j:?}");
    }
    // Central differences of the gradient along the first direction.
    let h = 1e-5;
    let plus = map_args(args, &|x, k| x + h * ((k * 7 + 3) % 11) as f64 / 5.0 - h);
    let minus = map_args(args, &|x, k| x - h * ((k * 7 + 3) % 11) as f64 / 5.0 + h);
    let (gp, gm) = (gradient(src, m, f, &plus), gradient(src, m, f, &minus));
    let fd: Vec<f64> = gp
        .iter()
        .zip(&gm)
        .map(|(p, q)| (p - q) / (2.0 * h))
        .collect();
    let hv = &by_backend[0][0];
    assert_eq!(fd.len(), hv.len(), "{what}: H v length");
    for (got, want) in hv.iter().zip(&fd) {
        assert!(
            (got - want).abs() <= 1e-6 * 1f64.max(want.abs()),
            "{what} {mode:?}: H v {hv:?} vs differences {fd:?}"
        );
    }
}

/// The Hessian by `mode`: symmetric, equal to forward over reverse's, the
/// backends bit for bit.
fn check_hessian(
    src: &Source,
    m: &irad::ir::Module,
    f: irad::ir::FuncId,
    args: &[Val],
    what: &str,
    mode: HvpMode,
) {
    let registry = irad::rules::Registry::new();
    let mut by_backend = Vec::new();
    for backend in [Backend::Interp, Backend::Jit] {
        let r = req(f, args, backend);
        let (a, _) = irad::hessian_via(src, m, &registry, &r, HvpMode::ForwardOverReverse)
            .expect("hessian by forward over reverse");
        let (b, _) = irad::hessian_via(src, m, &registry, &r, mode)
            .unwrap_or_else(|e| panic!("{what}: Hessian by {mode:?}: {e}"));
        assert_eq!(a.inputs, b.inputs, "{what}: labels");
        assert_eq!(b.rows.len(), b.inputs.len(), "{what}: square");
        for (i, row) in b.rows.iter().enumerate() {
            assert_eq!(row.len(), b.inputs.len(), "{what}: row {i}");
            for (j, x) in row.iter().enumerate() {
                let y = b.rows[j][i];
                assert!(
                    (x - y).abs() <= 1e-10 * 1f64.max(x.abs()).max(y.abs()),
                    "{what} {backend:?} {mode:?}: H[{i}][{j}] = {x}, H[{j}][{i}] = {y}"
                );
            }
            close(
                row,
                &a.rows[i],
                1e-11,
                &format!("{what} {backend:?} {mode:?}: row {i}"),
            );
        }
        by_backend.push(b.rows.concat());
    }
    assert!(
        same_bits(&by_backend[0], &by_backend[1]),
        "{what} {mode:?}: Hessians differ between backends"
    );
}

#[test]
fn corpus_modes_over_forward_equal_forward_over_reverse() {
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
            // Every corpus function returns f64 (and has f64 inputs).
            assert_eq!(m[f].ret, irad::ir::Type::F64, "{file}");
            for case in reference["cases"].as_array().into_iter().flatten() {
                let text = case["args"].as_str().expect("args");
                let args = irad::parse_args(&Source::new("<args>", text), &m, f).expect("args");
                let what = format!("{file} @{func}({text})");
                for mode in MODES {
                    check_case(&src, &m, f, &args, &what, mode);
                    check_hessian(&src, &m, f, &args, &what, mode);
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 28, "only {checked} corpus cases checked");
}

/// The benchmark programs: rosenbrock (n = 4 and n = 11), Lotka-Volterra
/// (RK4, 10 000 steps), the MLP with bulk primitives (its forward rule
/// writes `gemm`, whose rrule reverse over forward needs and whose frule
/// forward over forward needs), the GMM.
#[test]
fn benchmark_programs_modes_over_forward() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cases = [
        (
            "examples/rosenbrock.irad",
            "rosenbrock",
            "[1.5, 0.5, -0.3, 0.8]",
        ),
        (
            "examples/rosenbrock.irad",
            "rosenbrock",
            "[1.5, 0.5, -0.3, 0.8, 1.1, 0.9, -1.2, 0.4, 0.7, 2.0, -0.1]",
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
        for mode in MODES {
            check_case(&src, &m, f, &args, &format!("{file} @{func}"), mode);
        }
    }
}

const PROGRAM: &str = "
fn three(x: f64, y: [f64], n: i64, z: f64) -> f64 { x * x * y[0] + y[n] * y[1] * z + sin(x * z) }
fn polar(r: f64, t: f64) -> (f64, f64) { (r * cos(t), r * sin(t)) }
";

fn program() -> (Source, irad::ir::Module) {
    let src = Source::new("three.irad", PROGRAM);
    let m = irad::load(&src).expect("loads");
    (src, m)
}

/// `--wrt` in the Rust API: the Hessian with respect to some arguments is
/// the full one's submatrix; H·V with respect to them is the full product
/// with V zero outside them, restricted to them; the JVP is the full one
/// along the masked tangent. Every Hessian-vector mode, both backends.
#[test]
fn wrt_restricts_jvp_hvp_and_hessian() {
    let (src, m) = program();
    let f = irad::find_function(&src, &m, "three").expect("three");
    let args =
        irad::parse_args(&Source::new("<args>", "0.7, [1.5, -0.5], 1, 2.0"), &m, f).expect("args");
    let v = irad::parse_args(&Source::new("<t>", "0.3, [1.0, -2.0], 0, 0.5"), &m, f).expect("v");
    let masked =
        irad::parse_args(&Source::new("<t>", "0.0, [1.0, -2.0], 0, 0.5"), &m, f).expect("masked");
    let registry = irad::rules::Registry::new();
    for backend in [Backend::Interp, Backend::Jit] {
        for mode in [
            HvpMode::ForwardOverReverse,
            HvpMode::ReverseOverForward,
            HvpMode::ForwardOverForward,
            HvpMode::ForwardOverSparse,
        ] {
            let all = req(f, &args, backend);
            let mut some = req(f, &args, backend);
            some.opts.wrt = Some(vec![3, 1]);
            let (h, _) = irad::hessian_via(&src, &m, &registry, &all, mode).expect("hessian");
            let (hw, _) = irad::hessian_via(&src, &m, &registry, &some, mode).expect("wrt");
            assert_eq!(h.inputs, ["%x", "%y[0]", "%y[1]", "%z"]);
            assert_eq!(hw.inputs, ["%y[0]", "%y[1]", "%z"]);
            for (i, row) in hw.rows.iter().enumerate() {
                close(
                    row,
                    &h.rows[i + 1][1..],
                    1e-14,
                    &format!("{mode:?} {backend:?}: {:?} vs {:?}", hw.rows, h.rows),
                );
            }
            assert!(hw.gradient[0].is_none() && hw.gradient[2].is_none());
            let (p, _) = irad::hvp_via(&src, &m, &registry, &some, &v, mode).expect("hvp wrt");
            let (q, _) = irad::hvp_via(&src, &m, &registry, &all, &masked, mode).expect("hvp");
            assert!(p.hvp[0].is_none() && p.hvp[2].is_none(), "{:?}", p.hvp);
            let q_wrt: Vec<Option<Val>> = q
                .hvp
                .iter()
                .enumerate()
                .map(|(i, x)| if i == 1 || i == 3 { x.clone() } else { None })
                .collect();
            close(
                &flat(&p.hvp),
                &flat(&q_wrt),
                1e-14,
                &format!("{mode:?} hvp"),
            );
            close(
                &flat(&p.gradient),
                &flat(&q_wrt_grad(&q.gradient)),
                1e-14,
                &format!("{mode:?} gradient"),
            );
        }
        let mut some = req(f, &args, backend);
        some.opts.wrt = Some(vec![1, 3]);
        let (a, _) = irad::jvp(&src, &m, &registry, &some, &v).expect("jvp wrt");
        let (b, _) =
            irad::jvp(&src, &m, &registry, &req(f, &args, backend), &masked).expect("jvp masked");
        let (mut x, mut y) = (Vec::new(), Vec::new());
        leaves(&a.jvp, &mut x);
        leaves(&b.jvp, &mut y);
        close(&x, &y, 1e-15, "jvp");
    }
}

/// The gradient entries of arguments 1 and 3 only.
fn q_wrt_grad(g: &[Option<Val>]) -> Vec<Option<Val>> {
    g.iter()
        .enumerate()
        .map(|(i, x)| if i == 1 || i == 3 { x.clone() } else { None })
        .collect()
}

fn irad_cmd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(args)
        .output()
        .expect("irad starts")
}

fn program_file(name: &str, text: &str) -> String {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli_rof");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("temp file");
    path.to_string_lossy().into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("JSON")
}

/// The command line: `--mode rev-over-fwd` and `--mode fwd-over-fwd` print
/// what the default prints (here exactly: a polynomial), `--wrt` restricts,
/// and bad values are located (exit 1) or usage (exit 2) errors.
#[test]
fn command_line_modes_and_wrt() {
    let file = program_file(
        "cli.irad",
        "fn f(x: f64, y: [f64], n: i64) -> f64 { x * x * y[0] + y[n] * y[1] * x }\n",
    );
    let base = ["-f", "f", "--args", "2.0, [3.0, 5.0], 1", "--json"];
    let run = |cmd: &str, extra: &[&str]| {
        let mut a = vec![cmd, file.as_str()];
        a.extend_from_slice(&base);
        a.extend_from_slice(extra);
        irad_cmd(&a)
    };
    let t = ["--tangent", "1.0, [0.0, 1.0], 0"];
    let a = json(&run("hvp", &t));
    let b = json(&run("hvp", &[&t[..], &["--mode", "rev-over-fwd"]].concat()));
    assert_eq!(a, b);
    let fof = ["--mode", "fwd-over-fwd"];
    assert_eq!(a, json(&run("hvp", &[&t[..], &fof].concat())));
    let fos = ["--mode", "fwd-over-sparse"];
    assert_eq!(a, json(&run("hvp", &[&t[..], &fos].concat())));
    let h = json(&run("hessian", &fof));
    assert_eq!(h, json(&run("hessian", &[])));
    assert_eq!(h, json(&run("hessian", &fos)));
    assert_eq!(
        h["hessian"],
        serde_json::json!([[6.0, 4.0, 10.0], [4.0, 0.0, 0.0], [10.0, 0.0, 4.0]]),
        "{h}"
    );
    // f = x² y0 + x y1²: H (1, [0, 1]) = (2 y0 + 2 y1, [2 x, 2 x + 2 y1]) = (16, [4, 14]).
    assert_eq!(
        a["hvp"],
        serde_json::json!([16.0, [4.0, 14.0], null]),
        "{a}"
    );
    let w = json(&run("hvp", &[&t[..], &["--wrt", "1"]].concat()));
    assert_eq!(w["hvp"], serde_json::json!([null, [0.0, 4.0], null]), "{w}");
    assert_eq!(
        w["gradient"],
        serde_json::json!([null, [4.0, 20.0], null]),
        "{w}"
    );
    let hw = json(&run("hessian", &["--wrt", "0", "--mode", "rev-over-fwd"]));
    assert_eq!(hw["hessian"], serde_json::json!([[6.0]]), "{hw}");
    for mode in [&fof, &fos] {
        let w = json(&run("hvp", &[&t[..], mode, &["--wrt", "1"]].concat()));
        assert_eq!(w["hvp"], serde_json::json!([null, [0.0, 4.0], null]), "{w}");
    }
    let jw = json(&run("jvp", &[&t[..], &["--wrt", "0"]].concat()));
    // Along x only: df/dx = 2 x y0 + y1² = 37.
    assert_eq!(jw["jvp"], serde_json::json!(37.0), "{jw}");
    for (cmd, extra, code, text) in [
        (
            "hvp",
            vec!["--wrt", "2"],
            1,
            "--wrt 2: argument 2 of @f has type i64, which has no tangent",
        ),
        (
            "hessian",
            vec!["--wrt", "5"],
            1,
            "--wrt 5: @f has 3 arguments (positions from 0)",
        ),
        ("jvp", vec!["--wrt", "x"], 2, "--wrt"),
        ("hvp", vec!["--mode", "sideways"], 2, "--mode"),
        (
            "hessian",
            vec!["--sparse", "--mode", "fwd-over-fwd"],
            2,
            "cannot be used with --mode fwd-over-fwd",
        ),
        (
            "hessian",
            vec!["--sparse", "--mode", "fwd-over-sparse"],
            2,
            "cannot be used with --mode fwd-over-sparse",
        ),
    ] {
        let mut extra = extra;
        if cmd != "hessian" {
            extra.extend_from_slice(&t);
        }
        let o = run(cmd, &extra);
        assert_eq!(o.status.code(), Some(code), "{cmd} {extra:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(text), "{cmd} {extra:?}: {err}");
        if code == 1 {
            assert!(
                err.contains("cli.irad:1:1: error:") || err.contains("\"error\""),
                "{err}"
            );
        }
    }
}

/// A forward rule written in IR text is differentiated by `irad grad
/// --seed`: the seed `dual(0.0, 1.0)` gives, per dual argument, H·V in the
/// primal part and the gradient in the tangent part; `irad jacobian` (reverse
/// mode) gives its Jacobian over the duals' parts.
#[test]
fn grad_with_a_seed_of_a_forward_rule_in_ir_text() {
    let text = "func @sq.fwd(%x: dual<f64>, %y: dual<f64>) -> dual<f64> {
#1:
  %p = call primal(%x) :: f64
  %t = call tangent(%x, 0) :: f64
  %q = call primal(%y) :: f64
  %u = call tangent(%y, 0) :: f64
  %a = call mul(%p, %q) :: f64
  %b = call mul(%t, %q) :: f64
  %c = call mul(%p, %u) :: f64
  %d = call add(%b, %c) :: f64
  %r = call dual(%a, %d) :: dual<f64>
  return %r
}
";
    let file = program_file("sq_fwd.ir", text);
    let mut outs = Vec::new();
    for backend in ["jit", "interp"] {
        let o = irad_cmd(&[
            "grad",
            &file,
            "-f",
            "sq.fwd",
            "--args",
            "dual(3.0, 1.0), dual(2.0, 0.0)",
            "--seed",
            "dual(0.0, 1.0)",
            "--backend",
            backend,
            "--json",
        ]);
        let j = json(&o);
        // f = x y, V = (1, 0): H V = (0, 1), gradient (y, x) = (2, 3).
        assert_eq!(
            j["gradient"],
            serde_json::json!([
                {"primal": 0.0, "tangents": [2.0]},
                {"primal": 1.0, "tangents": [3.0]}
            ]),
            "{j}"
        );
        outs.push(o.stdout);
    }
    assert_eq!(outs[0], outs[1]);
    // The Jacobian by reverse mode: rows value.p and value.t0, columns the
    // parts of the duals (x.p, x.t0, y.p, y.t0).
    let o = irad_cmd(&[
        "jacobian",
        &file,
        "-f",
        "sq.fwd",
        "--args",
        "dual(3.0, 1.0), dual(2.0, 0.0)",
        "--json",
    ]);
    let j = json(&o);
    assert_eq!(
        j["jacobian"],
        serde_json::json!([[2.0, 0.0, 3.0, 0.0], [0.0, 2.0, 1.0, 3.0]]),
        "{j}"
    );
}

/// A forward rule written in IR text is differentiated forward again by
/// `irad jvp`: f = x³ as `@cube.fwd`, at x = 2 with the inner tangent 1;
/// along `dual(1, 0)` the derivative of (x³, 3x² t) is (3x², 6x t) = (12,
/// 12), on both backends alike; `irad dump --mode fwd` prints the doubly
/// dual rule.
#[test]
fn jvp_of_a_forward_rule_in_ir_text() {
    let text = "func @cube.fwd(%x: dual<f64>) -> dual<f64> {
#1:
  %p = call primal(%x) :: f64
  %t = call tangent(%x, 0) :: f64
  %y = call mul(%p, %p) :: f64
  %y3 = call mul(%y, %p) :: f64
  %a = call mul(%y, %t) :: f64
  %d = call mul(%a, 3.0) :: f64
  %r = call dual(%y3, %d) :: dual<f64>
  return %r
}
";
    let file = program_file("cube_fwd.ir", text);
    let mut outs = Vec::new();
    for backend in ["jit", "interp"] {
        let o = irad_cmd(&[
            "jvp",
            &file,
            "-f",
            "cube.fwd",
            "--args",
            "dual(2.0, 1.0)",
            "--tangent",
            "dual(1.0, 0.0)",
            "--backend",
            backend,
            "--json",
        ]);
        let j = json(&o);
        assert_eq!(
            j["jvp"],
            serde_json::json!({"primal": 12.0, "tangents": [12.0]}),
            "{j}"
        );
        assert_eq!(
            j["value"],
            serde_json::json!({"primal": 8.0, "tangents": [12.0]}),
            "{j}"
        );
        outs.push(o.stdout);
    }
    assert_eq!(outs[0], outs[1]);
    let o = irad_cmd(&["dump", &file, "-f", "cube.fwd", "--mode", "fwd"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        text.contains("func @cube.fwd.fwd(%x: dual<dual<f64>>) -> dual<dual<f64>>"),
        "{text}"
    );
}

/// `irad grad --mode fwd` of a function on duals (forward over forward):
/// the gradient of f(x) = dot(primal(x), tangent(x)) over 40 f64s (which
/// would choose sparse mode for a function without duals) is dense, the
/// dual of the parts' partials (t, p), and equals reverse mode's.
#[test]
fn forward_gradient_of_a_function_on_duals() {
    let text = "func @n2(%x: dual<[f64]>) -> f64 {
#1:
  %p = call primal(%x) :: [f64]
  %t = call tangent(%x, 0) :: [f64]
  %u = call dot(%p, %t) :: f64
  return %u
}
";
    let file = program_file("n2.ir", text);
    let p: Vec<String> = (0..20).map(|i| format!("{}.5", i % 7)).collect();
    let t: Vec<String> = (0..20).map(|i| format!("-{}.25", i % 5)).collect();
    let args = format!("dual([{}], [{}])", p.join(", "), t.join(", "));
    let fwd = json(&irad_cmd(&[
        "grad", &file, "-f", "n2", "--mode", "fwd", "--args", &args, "--json",
    ]));
    let rev = json(&irad_cmd(&[
        "grad", &file, "-f", "n2", "--args", &args, "--json",
    ]));
    assert_eq!(fwd["forward"]["mode"], "dense", "{fwd}");
    assert_eq!(fwd["forward"]["directions"], 40, "{fwd}");
    assert_eq!(fwd["gradient"], rev["gradient"]);
    let num = |s: &String| s.parse::<f64>().expect("number");
    assert_eq!(
        fwd["gradient"][0],
        serde_json::json!({
            "primal": t.iter().map(num).collect::<Vec<_>>(),
            "tangents": [p.iter().map(num).collect::<Vec<_>>()]
        }),
        "{fwd}"
    );
    // Sparse mode over the function on duals (sparse over forward): one
    // run, each part of the dual seeded with its own directions; the same
    // gradient (each entry one product here, so exactly), on both backends.
    for backend in ["jit", "interp"] {
        let sparse = json(&irad_cmd(&[
            "grad",
            &file,
            "-f",
            "n2",
            "--mode",
            "fwd",
            "--sparse",
            "--backend",
            backend,
            "--args",
            &args,
            "--json",
        ]));
        assert_eq!(sparse["forward"]["mode"], "sparse", "{sparse}");
        assert_eq!(sparse["gradient"], fwd["gradient"], "{sparse}");
    }
    // A dual of several lanes and of a tuple with an integer: every part's
    // f64s are directions, in the dense layout's order; sparse and dense
    // forward mode and reverse mode agree to rounding.
    let text = "func @m(%x: dual<[f64]>, %y: dual<(f64, i64), 2>) -> f64 {
#1:
  %p = call primal(%x) :: [f64]
  %t = call tangent(%x, 0) :: [f64]
  %u = call dot(%p, %t) :: f64
  %q = call primal(%y) :: (f64, i64)
  %q0 = call getfield(%q, 0) :: f64
  %r = call tangent(%y, 1) :: (f64, ())
  %r0 = call getfield(%r, 0) :: f64
  %s = call sin(%q0) :: f64
  %v = call mul(%s, %r0) :: f64
  %w = call mul(%u, %v) :: f64
  return %w
}
";
    let file = program_file("m.ir", text);
    let args = "dual([1.0, 2.0], [3.0, -1.0]), dual((0.5, 3), (2.0, ()), (1.5, ()))";
    let grad = |extra: &[&str]| {
        let mut a = vec!["grad", file.as_str(), "-f", "m", "--args", args, "--json"];
        a.extend_from_slice(extra);
        json(&irad_cmd(&a))
    };
    let rev = grad(&[]);
    let mut flat_rev = Vec::new();
    json_leaves(&rev["gradient"], &mut flat_rev);
    assert_eq!(flat_rev.len(), 7, "{rev}");
    for extra in [&["--mode", "fwd"][..], &["--mode", "fwd", "--sparse"]] {
        let g = grad(extra);
        let mut flat_g = Vec::new();
        json_leaves(&g["gradient"], &mut flat_g);
        close(
            &flat_g,
            &flat_rev,
            1e-12,
            &format!("{extra:?}: {g} vs {rev}"),
        );
    }
}

/// The numbers of a JSON value, depth first.
fn json_leaves(v: &serde_json::Value, out: &mut Vec<f64>) {
    match v {
        serde_json::Value::Number(n) => out.extend(n.as_f64()),
        serde_json::Value::Array(xs) => xs.iter().for_each(|x| json_leaves(x, out)),
        serde_json::Value::Object(m) => m.values().for_each(|x| json_leaves(x, out)),
        _ => {}
    }
}
