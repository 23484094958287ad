//! `irad grad --timings` (docs/cli.md, `irad grad`): the stage timings on
//! stderr, one line per stage, or under `--json` as the field "timings" of
//! the JSON object, with every stage's name; the values are not checked
//! (they are times), only that they are there and add up.

use std::process::Command;

const STAGES: [&str; 9] = [
    "parse",
    "check",
    "ssa",
    "normalise",
    "derive",
    "optimise",
    "codegen",
    "cranelift",
    "run",
];

/// Runs irad at the repository's root: exit status, stdout, stderr.
fn irad(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("irad runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const GRAD: [&str; 6] = [
    "grad",
    "examples/rosenbrock.irad",
    "-f",
    "rosenbrock",
    "--args",
    "[1.5, 0.5, -0.3]",
];

#[test]
fn timings_print_every_stage_on_stderr() {
    let (code, plain, _) = irad(&GRAD);
    let (tcode, out, err) = irad(&[&GRAD[..], &["--timings"]].concat());
    assert_eq!((code, tcode), (Some(0), Some(0)), "{err}");
    // The result is unchanged; the timings go to stderr only.
    assert_eq!(out, plain);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.first(), Some(&"timings:"), "{err}");
    let names: Vec<&str> = lines[1..]
        .iter()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let mut expected = STAGES.to_vec();
    expected.push("total");
    assert_eq!(names, expected, "{err}");
    for l in &lines[1..] {
        let ms: Vec<&str> = l.split_whitespace().skip(1).collect();
        assert_eq!(ms.len(), 2, "{l}");
        assert_eq!(ms[1], "ms", "{l}");
        assert!(ms[0].parse::<f64>().is_ok_and(|t| t >= 0.0), "{l}");
    }
}

#[test]
fn timings_under_json_are_one_more_field() {
    let (code, out, err) = irad(&[&GRAD[..], &["--json", "--timings"]].concat());
    assert_eq!(code, Some(0), "{err}");
    assert!(err.is_empty(), "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).expect("one JSON object");
    // The version-1 fields are there as without `--timings`.
    let (_, plain, _) = irad(&[&GRAD[..], &["--json"]].concat());
    let p: serde_json::Value = serde_json::from_str(&plain).expect("one JSON object");
    assert_eq!(j["value"], p["value"]);
    assert_eq!(j["gradient"], p["gradient"]);
    assert!(p.get("timings").is_none(), "{p}");
    let t = j["timings"].as_object().expect("an object of timings");
    let mut keys: Vec<&str> = t.keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut expected = STAGES.to_vec();
    expected.push("total");
    expected.sort_unstable();
    assert_eq!(keys, expected, "{j}");
    let sum: f64 = STAGES.iter().filter_map(|s| t[*s].as_f64()).sum();
    let total = t["total"].as_f64().expect("a number");
    assert!((sum - total).abs() <= 1e-6 * total.max(1.0), "{j}");
    // A gradient by the JIT spends some time in these stages at least.
    for s in ["parse", "derive", "cranelift"] {
        assert!(t[s].as_f64().is_some_and(|x| x > 0.0), "{s}: {j}");
    }
}
