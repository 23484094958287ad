//! Gradient checking of user functions (`irad check-grad`, `irad::check_grad`):
//! - every corpus case (tests/corpus, surface and IR files, any result type)
//!   and the benchmark programs pass on both backends, and the report's
//!   derivatives are the Jacobian's;
//! - a wrong derivative fails: a kink under the finite differences, a user
//!   rule that disagrees with the body (against finite differences) and a
//!   forward rule that disagrees with reverse mode (forward against reverse);
//! - the command's text, JSON and exit status, and its option errors.

use irad::{Backend, GradCheckOptions, GradOptions, GradRequest, Mode, Source, Val};
use std::path::Path;
use std::process::{Command, Output};

fn irad(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("irad runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn req(f: irad::ir::FuncId, args: &[Val], backend: Backend) -> GradRequest<'_> {
    GradRequest {
        opts: GradOptions {
            exec: backend.exec(),
            lanes: irad::ir::Lanes::dense(4).expect("4 is not 0"),
            ..GradOptions::default()
        },
        ..GradRequest::new(f, args)
    }
}

/// Checks `f` at `args` on both backends: every entry passes, and the
/// entries are the reverse-mode Jacobian's.
fn passes_everywhere(src: &Source, m: &irad::ir::Module, f: irad::ir::FuncId, args: &[Val]) {
    let registry = irad::rules::Registry::new();
    for backend in [Backend::Interp, Backend::Jit] {
        let what = format!("{} @{} ({backend:?})", src.name, m[f].name);
        let (check, dm) = irad::check_grad(
            src,
            m,
            &registry,
            &req(f, args, backend),
            &GradCheckOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{what}: {}", e.render(&[src])));
        assert_eq!(check.failed(), 0, "{what}:\n{}", check.table(&dm));
        let r = GradRequest {
            mode: Mode::Reverse,
            ..req(f, args, backend)
        };
        let (j, _) = irad::jacobian(src, m, &registry, &r).expect("the Jacobian");
        assert_eq!(
            check.entries.len(),
            j.rows.iter().map(Vec::len).sum::<usize>(),
            "{what}"
        );
        for e in &check.entries {
            assert_eq!(
                e.reverse.to_bits(),
                j.rows[e.output][e.input].to_bits(),
                "{what}"
            );
        }
        assert_eq!(check.inputs, j.inputs, "{what}");
        assert_eq!(check.outputs, j.outputs, "{what}");
    }
}

#[test]
fn every_corpus_case_passes_on_both_backends() {
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
            for case in reference["cases"].as_array().into_iter().flatten() {
                let text = case["args"].as_str().expect("args");
                let args = irad::parse_args(&Source::new("<args>", text), &m, f).expect("args");
                passes_everywhere(&src, &m, f, &args);
                checked += 1;
            }
        }
    }
    assert!(checked >= 28, "only {checked} corpus cases checked");
}

#[test]
fn benchmark_programs_pass() {
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
        ("examples/tutorial.irad", "f", "[1.0, 2.0], 0.5"),
    ];
    for (file, func, args) in cases {
        let src = irad::read_source(&root.join(file)).expect("file");
        let m = irad::load(&src).expect("loads");
        let f = irad::find_function(&src, &m, func).expect("function");
        let args = irad::parse_args(&Source::new("<args>", args), &m, f).expect("args");
        passes_everywhere(&src, &m, f, &args);
    }
}

/// `@clip`'s body has derivative 0 outside [-1, 1]; a "straight-through"
/// rule that says 1 is what the user asked for, and the checker says it is
/// not the function's derivative. A forward rule alone makes the modes
/// disagree.
#[test]
fn rules_that_disagree_with_the_function_fail() {
    use irad::ir::{FuncBuilder, Operand};
    use irad::rules::{FruleCall, FwdOut, PullbackCall, PullbackOut, RevCall, RevFwdOut};
    use irad::rules::{Registry, RruleFns, RuleError};

    let src = Source::new(
        "clip.irad",
        "fn clip(x: f64) -> f64 { min(max(x, -1.0), 1.0) }\n\
         fn f(x: f64) -> f64 { 3.0 * clip(x) }\n",
    );
    let m = irad::load(&src).expect("loads");
    let f = irad::find_function(&src, &m, "f").expect("f");
    fn call_clip(b: &mut FuncBuilder<'_>, x: Operand) -> Result<Operand, RuleError> {
        let missing = || RuleError::Unsupported("no @clip".into());
        let clip = b.module().by_name("clip").ok_or_else(missing)?;
        b.invoke(clip, &[x])?
            .map(Operand::Value)
            .ok_or_else(missing)
    }
    let frule = |b: &mut FuncBuilder<'_>, call: &FruleCall<'_>| {
        let [x] = call.args else {
            return Err(RuleError::Unsupported("one argument".into()));
        };
        Ok(FwdOut {
            primal: call_clip(b, x.primal)?,
            tangents: x.tangents.clone(),
        })
    };
    let args = [Val::F64(5.0)];

    // Both rules straight-through: the modes agree, finite differences not.
    let mut both = Registry::new();
    both.register_function_frule("clip", frule);
    both.register_function_rrule(
        "clip",
        RruleFns::new(
            |b: &mut FuncBuilder<'_>, call: &RevCall<'_>| {
                let [x] = call.args else {
                    return Err(RuleError::Unsupported("one argument".into()));
                };
                let primal = call_clip(b, x.primal)?;
                Ok(RevFwdOut {
                    primal,
                    shadows: Default::default(),
                    saved: Default::default(),
                })
            },
            |_b: &mut FuncBuilder<'_>, call: &PullbackCall<'_>| {
                Ok(PullbackOut {
                    cotangents: vec![call.dy.iter().copied().collect()].into(),
                })
            },
        ),
    );
    let opts = GradCheckOptions::default();
    let (check, _) =
        irad::check_grad(&src, &m, &both, &GradRequest::new(f, &args), &opts).expect("runs");
    let [e] = check.entries.as_slice() else {
        panic!("one entry: {:?}", check.entries)
    };
    assert_eq!((e.reverse, e.forward, e.fd), (3.0, 3.0, 0.0));
    assert_eq!((e.fd_error, e.mode_error, e.ok), (3.0, 0.0, false));
    let err = check.verdict("clip.irad", "f").expect_err("a failure");
    assert_eq!(
        err.render(&[]),
        "clip.irad:1:1: error: 1 of 1 gradient checks of `f` failed\n"
    );

    // The forward rule alone: forward says 3, reverse differentiates the
    // body (0), as the finite differences do.
    let mut fwd_only = Registry::new();
    fwd_only.register_function_frule("clip", frule);
    let (check, _) =
        irad::check_grad(&src, &m, &fwd_only, &GradRequest::new(f, &args), &opts).expect("runs");
    let [e] = check.entries.as_slice() else {
        panic!("one entry: {:?}", check.entries)
    };
    assert_eq!((e.reverse, e.forward, e.fd), (0.0, 3.0, 0.0));
    assert_eq!((e.fd_error, e.mode_error, e.ok), (0.0, 3.0, false));
}

const KINK: &str = "fn f(x: f64, y: f64) -> (f64, f64) {\n    let a = if x < 0.0 { 0.0 - x } else { x };\n    (a * y, y * y)\n}\n";

fn kink_file(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("irad-check-grad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, KINK).expect("written");
    path
}

#[test]
fn the_command_prints_a_table_and_fails_on_a_kink() {
    let ok = irad(&[
        "check-grad",
        "examples/rosenbrock.irad",
        "-f",
        "rosenbrock",
        "--args",
        "[1.5, 0.5, -0.3]",
    ]);
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    let out = text(&ok.stdout);
    assert!(out.starts_with("value: 337.0\n"), "{out}");
    assert!(out.contains("output  input"), "{out}");
    assert_eq!(
        out.lines().filter(|l| l.ends_with("  ok")).count(),
        3,
        "{out}"
    );
    assert!(out.ends_with("3 of 3 entries ok (finite differences: 4-point central, tolerance 1e-6; forward against reverse: tolerance 1e-9)\n"), "{out}");

    // At the kink x = 0 the differences see 0, the modes 1 (the else arm);
    // the other three entries are right.
    let path = kink_file("kink.irad");
    let path = path.to_str().expect("UTF-8 path");
    let bad = irad(&["check-grad", path, "-f", "f", "--args", "0.0, 2.0"]);
    assert_eq!(bad.status.code(), Some(1));
    let out = text(&bad.stdout);
    assert_eq!(
        out.lines().filter(|l| l.ends_with("FAIL")).count(),
        1,
        "{out}"
    );
    assert_eq!(
        out.lines().filter(|l| l.ends_with("  ok")).count(),
        3,
        "{out}"
    );
    assert!(out.contains("value.0  %x"), "{out}");
    assert_eq!(
        text(&bad.stderr),
        format!("{path}:1:1: error: 1 of 4 gradient checks of `f` failed\n")
    );
    // Away from the kink it passes.
    let good = irad(&["check-grad", path, "-f", "f", "--args", "-0.5, 2.0"]);
    assert!(good.status.success(), "{}", text(&good.stdout));
}

#[test]
fn the_command_prints_json() {
    let path = kink_file("kink_json.irad");
    let path = path.to_str().expect("UTF-8 path");
    let o = irad(&[
        "check-grad",
        path,
        "-f",
        "f",
        "--args",
        "0.0, 2.0",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let j: serde_json::Value = serde_json::from_str(&text(&o.stdout)).expect("JSON");
    assert_eq!(j["ok"], false);
    assert_eq!(j["summary"]["entries"], 4);
    assert_eq!(j["summary"]["failed"], 1);
    assert_eq!(j["inputs"], serde_json::json!(["%x", "%y"]));
    assert_eq!(j["outputs"], serde_json::json!(["value.0", "value.1"]));
    let entries = j["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 4);
    let first = &entries[0];
    for key in [
        "output",
        "input",
        "reverse",
        "forward",
        "fd",
        "fd_error",
        "mode_error",
        "ok",
    ] {
        assert!(first.get(key).is_some(), "{key} in {first}");
    }
    assert_eq!(first["ok"], false);
    assert_eq!(first["reverse"], 2.0);
    assert_eq!(j["tolerance"], 1e-6);
    // The error is JSON on stderr.
    let e: serde_json::Value = serde_json::from_str(&text(&o.stderr)).expect("JSON error");
    assert_eq!(
        e["error"]["message"],
        "1 of 4 gradient checks of `f` failed"
    );

    // The error at the kink is 2 (reverse 2, differences 0): a tolerance of 2 lets it pass.
    let o = irad(&[
        "check-grad",
        path,
        "-f",
        "f",
        "--args",
        "0.0, 2.0",
        "--json",
        "--tolerance",
        "0.5",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let o = irad(&[
        "check-grad",
        path,
        "-f",
        "f",
        "--args",
        "0.0, 2.0",
        "--json",
        "--tolerance",
        "2",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn bad_options_are_usage_errors() {
    for bad in ["-1", "nan", "inf", "x"] {
        let o = irad(&[
            "check-grad",
            "examples/rosenbrock.irad",
            "-f",
            "rosenbrock",
            "--args",
            "[1.5, 0.5]",
            "--tolerance",
            bad,
        ]);
        assert_eq!(o.status.code(), Some(2), "{bad}");
        assert!(text(&o.stderr).contains("is not a tolerance"), "{bad}");
    }
    // Errors of the program are located, as everywhere.
    let o = irad(&[
        "check-grad",
        "examples/rosenbrock.irad",
        "-f",
        "rosenbrok",
        "--args",
        "[1.5, 0.5]",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("rosenbrock"),
        "{}",
        text(&o.stderr)
    );
}
