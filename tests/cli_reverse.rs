//! Reverse mode through the `irad` binary (SYNTAX.md §3): `grad` defaults to
//! reverse mode and agrees with `--mode fwd`, `--wrt` leaves the other
//! arguments `null`, `dump --mode rev` prints BBCode comments and a module
//! that parses back (and DOT), `--after reverse` needs `--mode rev`, and a
//! run-time error in the derived code is reported at the primal's source
//! position, as forward mode reports it.

use std::path::PathBuf;
use std::process::{Command, Output};

fn irad(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(args)
        .output()
        .expect("irad starts")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts that `o` succeeded and returns its standard output.
fn succeeds(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(0), "{}", stderr(o));
    stdout(o)
}

/// Writes `text` to a fresh file named `name` in a per-test directory.
fn file(test: &str, name: &str, text: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("cli_reverse")
        .join(test);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("temp file");
    path
}

const ROSENBROCK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/rosenbrock.irad");

/// Three f64 arguments, each used differently, so a gradient entry put in
/// the wrong place shows.
const THREE: &str = "fn f(a: f64, b: f64, c: f64) -> f64 { a * b + sin(c) * b }\n";

/// An out-of-bounds read in a callee: line 3, column 9 is `x[k]`.
const OOB: &str = "fn get(x: [f64], k: i64) -> f64 {
    let y = x[0] * 2.0;
    y + x[k]
}
fn outer(x: [f64], k: i64) -> f64 { get(x, k) * x[1] }
";

/// `grad --json` for `func` of `path` at `args`, with `extra` flags, without
/// forward mode's `"forward"` (the lanes it used; reverse mode has none), so
/// the modes' outputs compare.
fn grad_json(path: &str, func: &str, args: &str, extra: &[&str]) -> serde_json::Value {
    let mut cmd = vec!["grad", path, "-f", func, "--args", args, "--json"];
    cmd.extend(extra);
    let text = succeeds(&irad(&cmd));
    let mut json: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    if let Some(fields) = json.as_object_mut() {
        fields.remove("forward");
    }
    json
}

/// Asserts that `a` and `b` are the same JSON up to a relative tolerance of
/// `1e-12` on numbers; `at` names the place in messages.
fn assert_close(a: &serde_json::Value, b: &serde_json::Value, at: &str) {
    use serde_json::Value as J;
    match (a, b) {
        (J::Number(x), J::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            let scale = x.abs().max(y.abs()).max(f64::MIN_POSITIVE);
            assert!((x - y).abs() <= 1e-12 * scale, "{at}: {x} against {y}");
        }
        (J::Array(xs), J::Array(ys)) => {
            assert_eq!(xs.len(), ys.len(), "{at}: lengths of {a} and {b}");
            for (i, (x, y)) in xs.iter().zip(ys).enumerate() {
                assert_close(x, y, &format!("{at}[{i}]"));
            }
        }
        (J::Object(xs), J::Object(ys)) => {
            let keys = |o: &serde_json::Map<String, J>| o.keys().cloned().collect::<Vec<_>>();
            assert_eq!(keys(xs), keys(ys), "{at}: keys of {a} and {b}");
            for (k, x) in xs {
                assert_close(x, &ys[k], &format!("{at}.{k}"));
            }
        }
        _ => assert_eq!(a, b, "{at}"),
    }
}

#[test]
fn grad_defaults_to_reverse_mode_and_agrees_with_forward_mode() {
    let args = "[1.5, 0.5, -0.3]";
    let rev = grad_json(ROSENBROCK, "rosenbrock", args, &[]);
    let explicit = grad_json(ROSENBROCK, "rosenbrock", args, &["--mode", "rev"]);
    let fwd = grad_json(ROSENBROCK, "rosenbrock", args, &["--mode", "fwd"]);
    assert_eq!(rev, explicit, "the default mode is rev");
    assert_close(&rev, &fwd, "rosenbrock");
    // The value of SYNTAX.md's example and the analytic gradient, so that the
    // two modes cannot agree on a wrong answer.
    let expected: serde_json::Value =
        serde_json::from_str(r#"{"value": 337.0, "gradient": [[1051.0, -241.0, -110.0]]}"#)
            .unwrap();
    assert_close(&rev, &expected, "rosenbrock against the analytic gradient");

    // Several scalar arguments: each entry in its place.
    let path = file("agree", "three.irad", THREE);
    let p = path.to_str().unwrap();
    let rev = grad_json(p, "f", "1.5, -2.0, 0.25", &[]);
    let fwd = grad_json(p, "f", "1.5, -2.0, 0.25", &["--mode", "fwd"]);
    assert_close(&rev, &fwd, "f");
    let (a, b, c) = (1.5f64, -2.0f64, 0.25f64);
    let expected = serde_json::json!({
        "value": a * b + c.sin() * b,
        "gradient": [b, a + c.sin(), c.cos() * b],
    });
    assert_close(&rev, &expected, "f against the analytic gradient");
}

#[test]
fn grad_plain_output_is_the_same_in_both_modes() {
    let base = [
        "grad",
        ROSENBROCK,
        "-f",
        "rosenbrock",
        "--args",
        "[1.0, 1.0, 1.0, 1.0]",
    ];
    let rev = succeeds(&irad(&base));
    let mut fwd = base.to_vec();
    fwd.extend(["--mode", "fwd"]);
    assert_eq!(rev, succeeds(&irad(&fwd)));
    // At the minimum every entry is exactly zero.
    assert!(rev.starts_with("value: 0.0\n"), "{rev}");
    assert!(rev.contains("[0.0, 0.0, 0.0, 0.0]"), "{rev}");
}

#[test]
fn wrt_in_reverse_mode_gives_null_for_the_other_arguments() {
    let path = file("wrt", "three.irad", THREE);
    let p = path.to_str().unwrap();
    let all = grad_json(p, "f", "1.5, -2.0, 0.25", &[]);
    let grads = all["gradient"].as_array().unwrap();
    for (wrt, nulls) in [("1", vec![0, 2]), ("0,2", vec![1]), ("2", vec![0, 1])] {
        let some = grad_json(p, "f", "1.5, -2.0, 0.25", &["--wrt", wrt]);
        let fwd = grad_json(p, "f", "1.5, -2.0, 0.25", &["--wrt", wrt, "--mode", "fwd"]);
        assert_close(&some, &fwd, &format!("--wrt {wrt}"));
        assert_close(&some["value"], &all["value"], "value");
        let entries = some["gradient"].as_array().unwrap();
        assert_eq!(entries.len(), 3, "{some}");
        for (i, g) in entries.iter().enumerate() {
            if nulls.contains(&i) {
                assert!(g.is_null(), "--wrt {wrt}: entry {i} is {g}");
            } else {
                assert_close(g, &grads[i], &format!("--wrt {wrt}: entry {i}"));
            }
        }
    }
    // Plain output shows `-` for the arguments left out.
    let o = irad(&[
        "grad",
        p,
        "-f",
        "f",
        "--args",
        "1.5, -2.0, 0.25",
        "--wrt",
        "1",
    ]);
    let text = succeeds(&o);
    assert!(text.contains("  %a: -\n"), "{text}");
    assert!(text.contains("  %c: -\n"), "{text}");
    assert!(!text.contains("  %b: -\n"), "{text}");
}

#[test]
fn dump_rev_prints_bbcode_comments_and_a_module_that_parses_back() {
    let o = irad(&["dump", ROSENBROCK, "--mode", "rev", "-f", "rosenbrock"]);
    let text = succeeds(&o);
    for needle in [
        "# bbcode @rosenbrock",
        "func @rosenbrock.rev(",
        "func @rosenbrock.rev.fwd(",
        "func @rosenbrock.rev.back(",
    ] {
        assert!(text.contains(needle), "no `{needle}` in:\n{text}");
    }
    // The loop condition is a two-way branch with both targets explicit in
    // the BBCode, and a gotoifnot in the module.
    let bbcode: Vec<&str> = text.lines().filter(|l| l.starts_with('#')).collect();
    assert!(
        bbcode
            .iter()
            .any(|l| l.trim_start_matches("# ").trim_start().starts_with("br ")),
        "no `br` line in:\n{}",
        bbcode.join("\n")
    );
    assert!(!bbcode.iter().any(|l| l.contains("gotoifnot")));
    // Only the functions asked for and their pieces: not the primal.
    assert!(!text.contains("func @rosenbrock("), "{text}");
    assert!(!text.contains("@apply"), "{text}");

    // The whole output, comments included, is IR that `check` accepts.
    let path = file("dump", "rosenbrock_rev.ir", &text);
    let o = irad(&["check", path.to_str().unwrap()]);
    assert_eq!(
        succeeds(&o),
        format!("{}: ok (3 functions)\n", path.display())
    );

    // And the printed `@rosenbrock.rev` (array, its shadow, the seed) still
    // computes the value.
    let o = irad(&[
        "run",
        path.to_str().unwrap(),
        "-f",
        "rosenbrock.rev",
        "--args",
        "[1.5, 0.5, -0.3], [0.0, 0.0, 0.0], 1.0",
    ]);
    assert_eq!(succeeds(&o), "(337.0,)\n");
}

#[test]
fn dump_rev_of_every_function_parses_back() {
    // Without `-f` the whole module is printed, so callees and function
    // values are all there.
    let o = irad(&["dump", ROSENBROCK, "--mode", "rev"]);
    let text = succeeds(&o);
    for name in ["rosenbrock", "apply", "main_like", "square"] {
        assert!(
            text.contains(&format!("# bbcode @{name}(")),
            "{name}:\n{text}"
        );
        assert!(text.contains(&format!("func @{name}.rev.fwd(")), "{name}");
        assert!(text.contains(&format!("func @{name}.rev.back(")), "{name}");
    }
    let path = file("dump_all", "all_rev.ir", &text);
    let o = irad(&["check", path.to_str().unwrap()]);
    assert!(succeeds(&o).contains(": ok ("), "{}", stderr(&o));
}

#[test]
fn dump_rev_as_dot() {
    let o = irad(&[
        "dump",
        ROSENBROCK,
        "--mode",
        "rev",
        "-f",
        "rosenbrock",
        "--format",
        "dot",
    ]);
    let text = succeeds(&o);
    assert!(text.starts_with("digraph"), "{text}");
    assert!(text.trim_end().ends_with('}'), "{text}");
    assert!(text.contains("@rosenbrock.rev.fwd"), "{text}");
    assert!(text.contains("@rosenbrock.rev.back"), "{text}");
    // The BBCode comments belong to the text format only.
    assert!(!text.contains("# bbcode"), "{text}");
    assert!(text.contains("->"), "no edges in:\n{text}");
}

#[test]
fn dump_after_reverse_needs_mode_rev() {
    for extra in [&[][..], &["--mode", "fwd"][..]] {
        let mut cmd = vec!["dump", ROSENBROCK, "--after", "reverse"];
        cmd.extend(extra);
        let o = irad(&cmd);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("--mode rev"), "{}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    }
    // With it, `--after reverse` stops before the default schedule: it is
    // the raw derivation of `--schedule id`, which the default schedule
    // changes (cse merges the two products of @square.rev.back).
    let with = irad(&[
        "dump", ROSENBROCK, "--mode", "rev", "--after", "reverse", "-f", "square",
    ]);
    let raw = irad(&[
        "dump",
        ROSENBROCK,
        "--mode",
        "rev",
        "--schedule",
        "id",
        "-f",
        "square",
    ]);
    let default = irad(&["dump", ROSENBROCK, "--mode", "rev", "-f", "square"]);
    assert_eq!(succeeds(&with), succeeds(&raw));
    assert_ne!(succeeds(&with), succeeds(&default));
}

#[test]
fn run_time_errors_in_reverse_mode_point_at_the_primal() {
    let path = file("errors", "oob.irad", OOB);
    let p = path.to_str().unwrap();
    let at = format!("{p}:3:9: error: index 5 out of bounds for array of length 2");
    for func in ["get", "outer"] {
        let mut firsts = Vec::new();
        for mode in ["rev", "fwd"] {
            let o = irad(&[
                "grad",
                p,
                "-f",
                func,
                "--args",
                "[1.0, 2.0], 5",
                "--mode",
                mode,
            ]);
            let err = stderr(&o);
            assert_eq!(o.status.code(), Some(1), "{func} {mode}: {err}");
            assert!(err.starts_with(&at), "{func} {mode}: {err}");
            // The source line with a caret follows.
            assert!(err.contains("y + x[k]"), "{func} {mode}: {err}");
            assert!(stdout(&o).is_empty(), "{}", stdout(&o));
            firsts.push(err.split(" (in ").next().unwrap_or_default().to_string());
        }
        // Same position and message in both modes (only the `in @...` part,
        // naming the derived function, differs).
        assert_eq!(firsts[0], firsts[1], "{func}");
    }
    // In range, both functions have a gradient.
    let g = grad_json(p, "outer", "[1.0, 2.0], 1", &[]);
    assert_close(
        &g,
        &serde_json::json!({"value": 8.0, "gradient": [[4.0, 6.0], null]}),
        "outer",
    );
}
