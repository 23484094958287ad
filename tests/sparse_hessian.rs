//! The Hessian by sparse forward mode over the reverse pieces (`irad hessian
//! --sparse`, `irad::hessian_via` with `opts.lanes` sparse): one run of
//! `@f.hessian`, which seeds every input with a one-hot sparse tangent, runs
//! `@f.vjp.fwds` and materialises each gradient entry's tangent as a row.
//!
//! On every corpus program (all return f64) and on the benchmark programs
//! (rosenbrock, Lotka-Volterra, the MLP with bulk primitives, whose pullback
//! writes `gemm` and so meets its sparse rule, the GMM), on both backends:
//! the labels, value and gradient are the dense Hessian's (forward over
//! reverse in batches of 8), every entry equals it within 1e-12 relative
//! (the sparse builder sums the same terms in another order; max(1, |h|)),
//! and the interpreter and the JIT agree bit for bit. Also `--wrt`, the
//! command line, and the usage error with `--mode rev-over-fwd`.

use irad::{Backend, GradOptions, GradRequest, HvpMode, Source, Val};
use std::path::Path;
use std::process::{Command, Output};

#[path = "common/values.rs"]
mod values;
use values::flat_all as flat;

fn req<'a>(
    f: irad::ir::FuncId,
    args: &'a [Val],
    backend: Backend,
    sparse: bool,
) -> GradRequest<'a> {
    let mut opts = GradOptions {
        exec: backend.exec(),
        ..GradOptions::default()
    };
    if sparse {
        opts.lanes = irad::ir::Lanes::Sparse;
    }
    GradRequest {
        opts,
        ..GradRequest::new(f, args)
    }
}

fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

/// The sparse Hessian against the dense one, on both backends.
fn check(src: &Source, m: &irad::ir::Module, f: irad::ir::FuncId, args: &[Val], what: &str) {
    let registry = irad::rules::Registry::new();
    let mut by_backend = Vec::new();
    for backend in [Backend::Interp, Backend::Jit] {
        let mode = HvpMode::ForwardOverReverse;
        let (d, _) = irad::hessian_via(src, m, &registry, &req(f, args, backend, false), mode)
            .expect("dense Hessian");
        let (s, _) = irad::hessian_via(src, m, &registry, &req(f, args, backend, true), mode)
            .expect("sparse Hessian");
        assert_eq!(s.inputs, d.inputs, "{what}: labels");
        assert!(s.value.same(&d.value), "{what} {backend:?}: value");
        assert_eq!(
            s.gradient.iter().map(Option::is_some).collect::<Vec<_>>(),
            d.gradient.iter().map(Option::is_some).collect::<Vec<_>>(),
            "{what}: gradient shape"
        );
        assert!(
            same_bits(&flat(&s.gradient), &flat(&d.gradient)),
            "{what} {backend:?}: gradient"
        );
        assert_eq!(s.rows.len(), d.rows.len(), "{what}: rows");
        for (i, (a, b)) in s.rows.iter().zip(&d.rows).enumerate() {
            assert_eq!(a.len(), b.len(), "{what}: row {i}");
            for (x, y) in a.iter().zip(b) {
                assert!(
                    (x - y).abs() <= 1e-12 * 1f64.max(x.abs()).max(y.abs()),
                    "{what} {backend:?}: sparse row {i} {a:?}, dense {b:?}"
                );
            }
        }
        by_backend.push((flat(&s.gradient), s.rows.concat()));
    }
    assert!(
        same_bits(&by_backend[0].1, &by_backend[1].1),
        "{what}: the backends' sparse Hessians differ"
    );
}

#[test]
fn sparse_hessians_equal_the_dense_ones_on_the_corpus_and_the_benchmarks() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("tests/corpus");
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
            for case in reference["cases"].as_array().into_iter().flatten() {
                let text = case["args"].as_str().expect("args");
                let args = irad::parse_args(&Source::new("<args>", text), &m, f).expect("args");
                check(&src, &m, f, &args, &format!("{file} @{func}({text})"));
                checked += 1;
            }
        }
    }
    assert!(checked >= 28, "only {checked} corpus cases checked");
    let cases = [
        (
            "examples/rosenbrock.irad",
            "rosenbrock",
            "[1.5, 0.5, -0.3, 0.8, 1.1, -0.7, 0.2, 0.9, 1.3, -1.2]",
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
        check(&src, &m, f, &args, &format!("{file} @{func}"));
    }
}

fn irad_cmd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(args)
        .output()
        .expect("irad starts")
}

/// `--sparse` on the command line: the dense command's JSON (here exactly),
/// with `--wrt`; a usage error with `--mode rev-over-fwd`.
#[test]
fn command_line() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sparse_hessian");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("f.irad");
    std::fs::write(
        &file,
        "fn f(x: f64, y: [f64], n: i64) -> f64 { x * x * y[0] + y[n] * y[1] * x }\n",
    )
    .expect("write");
    let file = file.to_string_lossy().into_owned();
    let base = [
        "hessian",
        &file,
        "-f",
        "f",
        "--args",
        "2.0, [3.0, 5.0], 1",
        "--json",
    ];
    let run = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        irad_cmd(&a)
    };
    let json = |o: Output| -> serde_json::Value {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).expect("JSON")
    };
    let dense = json(run(&[]));
    let sparse = json(run(&["--sparse"]));
    assert_eq!(dense, sparse);
    assert_eq!(
        sparse["hessian"],
        serde_json::json!([[6.0, 4.0, 10.0], [4.0, 0.0, 0.0], [10.0, 0.0, 4.0]]),
        "{sparse}"
    );
    let w = json(run(&["--sparse", "--wrt", "1", "--backend", "interp"]));
    assert_eq!(
        w["hessian"],
        serde_json::json!([[0.0, 0.0], [0.0, 4.0]]),
        "{w}"
    );
    let o = run(&["--sparse", "--mode", "rev-over-fwd"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--sparse is sparse forward mode"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
