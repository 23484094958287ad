//! `irad bench`: the JSON it prints, its plain output, and its errors.

use std::process::Command;

fn irad(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("irad runs")
}

#[test]
fn bench_prints_compile_primal_gradient_and_their_ratio() {
    for mode in ["rev", "fwd"] {
        let out = irad(&[
            "bench",
            "examples/rosenbrock.irad",
            "-f",
            "rosenbrock",
            "--args",
            "[1.5, 0.5, -0.3, 0.8]",
            "--mode",
            mode,
            "--min-time",
            "0.05",
            "--json",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let get = |k: &str| j[k].as_f64().unwrap_or_else(|| panic!("{k} in {j}"));
        let (c, p, g, r) = (
            get("compile_s"),
            get("primal_s"),
            get("grad_s"),
            get("ratio"),
        );
        assert!(c > 0.0 && p > 0.0 && g > 0.0, "{j}");
        assert!((r - g / p).abs() <= 1e-12 * r, "{j}");
        for k in ["primal_runs", "grad_runs"] {
            assert!(j[k].as_u64().is_some_and(|n| n >= 5), "{k} in {j}");
        }
        // Forward mode adds the lanes it used (four inputs: dense).
        let fields = if mode == "fwd" {
            assert_eq!(j["forward"]["mode"], "dense", "{j}");
            7
        } else {
            6
        };
        assert_eq!(j.as_object().map(|o| o.len()), Some(fields), "{j}");
    }
    let out = irad(&[
        "bench",
        "tests/corpus/tuples.irad",
        "-f",
        "tuples",
        "--args",
        "(0.8, -0.4), 0.3, 3",
        "--wrt",
        "1",
        "--min-time",
        "0",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    for (line, head) in lines
        .iter()
        .zip(["compile:", "primal:", "gradient:", "ratio:"])
    {
        assert!(line.starts_with(head), "{text}");
    }
    assert!(lines[1].contains("(median of "), "{text}");
}

/// A gradient far slower than its primal (forward mode, one tangent per
/// pass, over 2 500 inputs: 2 500 passes) is sampled for `--min-time` of its
/// own, not as many times as the fast primal: its run count is bounded by
/// what fits in a few `--min-time`s at its median, however many runs the
/// primal takes. (Sampling both as often ran for minutes.)
#[test]
fn bench_samples_a_slow_gradient_on_its_own_budget() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join("bench_sum.irad");
    std::fs::write(
        &file,
        "fn total(x: [f64]) -> f64 {\n    let mut s = 0.0;\n    for i in 0..len(x) {\n        s = s + x[i];\n    }\n    s\n}\n",
    )
    .unwrap();
    let xs: Vec<String> = (0..2500).map(|i| format!("{}.5", i % 7)).collect();
    let args = format!("[{}]", xs.join(", "));
    let min_time = 0.05;
    let out = irad(&[
        "bench",
        file.to_str().unwrap(),
        "-f",
        "total",
        "--args",
        &args,
        "--mode",
        "fwd",
        "--batch",
        "1",
        "--min-time",
        &min_time.to_string(),
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stderr, "", "--json prints no progress");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let runs = |k: &str| j[k].as_u64().unwrap_or_else(|| panic!("{k} in {j}"));
    let (primal_runs, grad_runs) = (runs("primal_runs"), runs("grad_runs"));
    let (p, g) = (j["primal_s"].as_f64(), j["grad_s"].as_f64());
    let (Some(p), Some(g)) = (p, g) else {
        panic!("{j}")
    };
    assert!(g > 10.0 * p, "the gradient is not slow here: {j}");
    assert!(grad_runs >= 5 && primal_runs >= 5, "{j}");
    // The primal, far faster, needs far more runs for its own budget.
    assert!(primal_runs > 2 * grad_runs, "{j}");
    // The gradient stops once its own calls sum to `--min-time`: at its
    // median time, no more runs than fit in a few `--min-time`s.
    let bound = ((4.0 * min_time / g).ceil() as u64 + 1).max(5);
    assert!(
        grad_runs <= bound,
        "{grad_runs} gradient runs (bound {bound}): {j}"
    );
}

/// Sampling that lasts over a second reports progress only on a terminal;
/// a pipe (as here) gets nothing on stderr.
#[test]
fn bench_progress_is_silent_off_a_terminal() {
    let out = irad(&[
        "bench",
        "examples/rosenbrock.irad",
        "-f",
        "rosenbrock",
        "--args",
        "[1.5, 0.5, -0.3, 0.8]",
        "--min-time",
        "0.6",
    ]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 4);
}

#[test]
fn bench_reports_bad_requests_like_grad() {
    // A function that does not return f64.
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join("bench_int.irad");
    std::fs::write(&file, "fn k(x: f64) -> i64 {\n    i64(x)\n}\n").unwrap();
    let out = irad(&["bench", file.to_str().unwrap(), "-f", "k", "--args", "2.5"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("a gradient needs a function returning f64"),
        "{err}"
    );
    // A run-time error of the program, located at its statement.
    let file = dir.join("bench_oob.irad");
    std::fs::write(&file, "fn at(x: [f64]) -> f64 {\n    x[3] * 2.0\n}\n").unwrap();
    let out = irad(&[
        "bench",
        file.to_str().unwrap(),
        "-f",
        "at",
        "--args",
        "[1.0]",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(":2:") && err.contains("index 3 out of bounds for array of length 1"),
        "{err}"
    );
    // Bad usage.
    let out = irad(&[
        "bench",
        "examples/rosenbrock.irad",
        "-f",
        "rosenbrock",
        "--args",
        "[1.0]",
        "--min-time",
        "-1",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// `irad bench` runs on every corpus program (first case), in both modes.
#[test]
fn bench_runs_on_every_corpus_program() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut runs = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/corpus")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    entries.sort();
    for path in entries {
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let func = j["function"].as_str().unwrap();
        let args = j["cases"][0]["args"].as_str().unwrap();
        for file in [j["file"].as_str(), j["ir_file"].as_str()]
            .into_iter()
            .flatten()
        {
            for mode in ["rev", "fwd"] {
                let file = dir.join(file);
                let out = irad(&[
                    "bench",
                    file.to_str().unwrap(),
                    "-f",
                    func,
                    "--args",
                    args,
                    "--mode",
                    mode,
                    "--min-time",
                    "0",
                    "--json",
                ]);
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert!(out.status.success(), "{} {mode}: {stderr}", file.display());
                let o: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
                assert!(o["grad_s"].as_f64().is_some_and(|g| g > 0.0), "{o}");
                runs += 1;
            }
        }
    }
    assert!(runs >= 30, "only {runs} runs");
}
