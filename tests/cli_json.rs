//! `--json` output (docs/cli.md, "JSON output"): `check` and `test-rules`
//! print one JSON object; under `--json` every command prints its errors as
//! one JSON object on stderr, `{"error": E, "errors": [E, ...]}` with `E` =
//! `{"file", "line", "column", "message", "kind"}`, with the exit status of
//! the text form, and says in it what the text form's first line says.

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

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

fn scratch(name: &str, text: &str) -> String {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, text).expect("scratch file written");
    path.to_string_lossy().into_owned()
}

/// `E` has its five fields (and `notes`, an array, for a run-time error),
/// of the right types, and says what `line` says
/// (`file:line:column: error: message`, or `file: error: message`, or
/// `error: message`).
fn check_entry(e: &Value, line: &str) {
    let obj = e
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {e}"));
    let mut keys: Vec<&str> = obj
        .keys()
        .map(String::as_str)
        .filter(|&k| k != "notes")
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["column", "file", "kind", "line", "message"], "{e}");
    assert!(e.get("notes").is_none_or(Value::is_array), "{e}");
    assert!(
        matches!(e["kind"].as_str(), Some("user" | "internal" | "usage")),
        "{e}"
    );
    let message = e["message"].as_str().unwrap_or_else(|| panic!("{e}"));
    let expected = match (e["file"].as_str(), e["line"].as_u64(), e["column"].as_u64()) {
        (Some(f), Some(l), Some(c)) => format!("{f}:{l}:{c}: error: {message}"),
        (Some(f), None, None) => format!("{f}: error: {message}"),
        (None, None, None) => format!("error: {message}"),
        _ => panic!("line and column without a file, or only one of them: {e}"),
    };
    assert_eq!(line, expected);
}

/// Runs `args` with and without `--json`: the same exit status `code`, no
/// stdout, and a JSON error whose every entry is a header line of the text
/// form, in order. Returns the JSON.
fn json_error(args: &[&str], code: i32) -> Value {
    let (text_code, text_out, text) = irad(args);
    assert_eq!(text_code, Some(code), "{text}");
    assert_eq!(text_out, "");
    let mut with_json = args.to_vec();
    with_json.push("--json");
    let (json_code, json_out, json) = irad(&with_json);
    assert_eq!(json_code, Some(code), "{json}");
    assert_eq!(json_out, "", "{json}");
    assert_eq!(json.lines().count(), 1, "one line of JSON: {json}");
    let j: Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    let errors = j["errors"].as_array().unwrap_or_else(|| panic!("{j}"));
    assert!(!errors.is_empty(), "{j}");
    assert_eq!(j["error"], errors[0], "{j}");
    assert_eq!(j.as_object().map(|o| o.len()), Some(2), "{j}");
    // Each entry is a header line of the text form (`file:l:c: error: ...`),
    // in the text's order.
    let headers: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("error: ") && !l.starts_with(' '))
        .collect();
    assert_eq!(headers.len(), errors.len(), "{text}\n{j}");
    for (e, line) in errors.iter().zip(&headers) {
        check_entry(e, line);
    }
    j
}

#[test]
fn check_json_names_the_file_and_its_functions() {
    let (code, out, err) = irad(&["check", "examples/higher_order.irad", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(err, "");
    let j: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(j["file"], "examples/higher_order.irad");
    assert_eq!(j["ok"], true);
    let names = j["names"].as_array().expect("names");
    assert_eq!(j["functions"].as_u64(), Some(names.len() as u64), "{j}");
    // The text form counts the same functions.
    let (_, text, _) = irad(&["check", "examples/higher_order.irad"]);
    assert_eq!(
        text,
        format!(
            "examples/higher_order.irad: ok ({} functions)\n",
            names.len()
        )
    );
    assert!(names.len() > 1, "{j}");
    let src = std::fs::read_to_string("examples/higher_order.irad").expect("example");
    for n in names {
        let n = n.as_str().expect("a name");
        assert!(src.contains(&format!("fn {n}(")), "{n} not in the source");
    }
}

#[test]
fn check_json_errors_list_every_error_located() {
    let file = scratch(
        "json_two_errors.irad",
        "fn f(x: f64) -> f64 {\n    x * 2\n}\n\nfn g(y: f64) -> f64 {\n    sinn(y)\n}\n",
    );
    let j = json_error(&["check", &file], 1);
    let errors = j["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 2, "{j}");
    assert_eq!(errors[0]["file"], file.as_str());
    assert_eq!(errors[0]["line"], 2);
    assert_eq!(errors[1]["line"], 6);
    assert_eq!(errors[0]["kind"], "user");
    assert!(
        errors[1]["message"]
            .as_str()
            .is_some_and(|m| m.contains("sinn") && m.contains("did you mean `sin`")),
        "{j}"
    );
}

#[test]
fn unreadable_files_have_no_line_in_json() {
    let j = json_error(&["check", "no/such/file.irad"], 1);
    assert_eq!(j["error"]["file"], "no/such/file.irad");
    assert_eq!(j["error"]["line"], Value::Null);
    assert_eq!(j["error"]["column"], Value::Null);
    assert!(
        j["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("cannot read file: ")),
        "{j}"
    );
}

#[test]
fn every_json_command_reports_errors_as_json() {
    let oob = scratch(
        "json_oob.irad",
        "fn at(x: [f64]) -> f64 {\n    x[3] * 2.0\n}\n",
    );
    // A run-time error, in each command that runs the function.
    let runs: [&[&str]; 5] = [
        &["run", &oob, "-f", "at", "--args", "[1.0]"],
        &["grad", &oob, "-f", "at", "--args", "[1.0]"],
        &[
            "jvp",
            &oob,
            "-f",
            "at",
            "--args",
            "[1.0]",
            "--tangent",
            "[1.0]",
        ],
        &["jacobian", &oob, "-f", "at", "--args", "[1.0]"],
        &[
            "bench",
            &oob,
            "-f",
            "at",
            "--args",
            "[1.0]",
            "--min-time",
            "0",
        ],
    ];
    for args in runs {
        let j = json_error(args, 1);
        assert_eq!(j["error"]["file"], oob.as_str(), "{args:?}");
        assert_eq!(j["error"]["line"], 2, "{args:?}: {j}");
        assert!(
            j["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("index 3 out of bounds")),
            "{args:?}: {j}"
        );
    }
    // An error in the argument text is located there.
    let j = json_error(
        &[
            "run",
            "examples/rosenbrock.irad",
            "-f",
            "rosenbrock",
            "--args",
            "[1.0, oops]",
        ],
        1,
    );
    assert_eq!(j["error"]["file"], "<args>");
    assert_eq!(j["error"]["line"], 1);
    assert_eq!(j["error"]["column"], 7);
    // No such function.
    let j = json_error(
        &[
            "grad",
            "examples/rosenbrock.irad",
            "-f",
            "nope",
            "--args",
            "1.0",
        ],
        1,
    );
    assert_eq!(j["error"]["line"], 1);
    assert_eq!(j["error"]["kind"], "user");
}

#[test]
fn usage_errors_under_json_are_json_with_status_2() {
    // A malformed option value (clap's own error).
    let args = [
        "grad",
        "examples/rosenbrock.irad",
        "-f",
        "rosenbrock",
        "--args",
        "[1.0]",
        "--wrt",
        "a",
    ];
    let (code, _, text) = irad(&args);
    assert_eq!(code, Some(2));
    assert!(
        text.starts_with("error: invalid value 'a' for '--wrt <LIST>'"),
        "{text}"
    );
    let mut with_json = args.to_vec();
    with_json.push("--json");
    let (code, out, err) = irad(&with_json);
    assert_eq!(code, Some(2));
    assert_eq!(out, "");
    let j: Value = serde_json::from_str(&err).unwrap_or_else(|e| panic!("{e}: {err}"));
    check_entry(&j["error"], text.lines().next().unwrap_or_default());
    assert_eq!(j["error"]["kind"], "usage");
    // A usage error irad finds after parsing (`--sparse` with reverse mode).
    let (code, _, err) = irad(&[
        "grad",
        "examples/rosenbrock.irad",
        "-f",
        "rosenbrock",
        "--args",
        "[1.0]",
        "--sparse",
        "--json",
    ]);
    assert_eq!(code, Some(2));
    let j: Value = serde_json::from_str(&err).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(j["error"]["kind"], "usage");
    assert!(
        j["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("--sparse")),
        "{j}"
    );
    // A missing argument: the message keeps what is missing.
    let (code, _, err) = irad(&["check", "--json"]);
    assert_eq!(code, Some(2));
    let j: Value = serde_json::from_str(&err).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert!(
        j["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("<FILE>")),
        "{j}"
    );
}

#[test]
fn test_rules_json_has_every_signature_and_the_summary() {
    let (code, out, err) = irad(&["test-rules", "--samples", "2", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(err, "");
    let j: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(j["samples"], 2);
    assert_eq!(j["seed"], irad::rules::check::DEFAULT_SEED);
    assert_eq!(j["ok"], true);
    let sigs = j["signatures"].as_array().expect("signatures");
    // The text form checks the same signatures, in the same order.
    let (_, table, _) = irad(&["test-rules", "--samples", "2"]);
    let summary = format!("{} signatures checked, 2 samples each", sigs.len());
    assert!(table.contains(&summary), "{summary} not in\n{table}");
    let rows: Vec<&str> = table.lines().skip(1).take(sigs.len()).collect();
    for (sig, row) in sigs.iter().zip(&rows) {
        let name = sig["name"].as_str().expect("name");
        assert!(row.starts_with(&format!("{name} ")), "{name} / {row}");
        // Every signature has its frule checked, and its rrule (the parts
        // of duals too: reverse and forward mode over forward rules) but
        // the sparse builder's, which have frules only (forward over
        // sparse).
        let builder = irad::ir::Prim::from_name(name.split('(').next().unwrap_or(""))
            .is_some_and(|p| p.is_ad() && !irad::rules::reverses_over_forward(p));
        assert_eq!(sig["rrule"].is_null(), builder, "{sig}");
        assert!(!sig["frule"].is_null(), "{sig}");
        for kind in ["frule", "rrule"] {
            let r = &sig[kind];
            if r.is_null() {
                continue;
            }
            assert_eq!(r["ok"], true, "{sig}");
            assert_eq!(r["samples"], 2, "{sig}");
            assert!(r["max_error"].as_f64().is_some_and(|e| e >= 0.0), "{sig}");
            assert_eq!(r["message"], Value::Null, "{sig}");
        }
    }
    for kind in ["frule", "rrule"] {
        let s = &j["summary"][kind];
        let checked = sigs.iter().filter(|s| !s[kind].is_null()).count();
        assert_eq!(s["passed"].as_u64(), Some(checked as u64), "{j}");
        assert_eq!(s["failed"], 0);
        let worst = sigs
            .iter()
            .filter_map(|s| s[kind]["max_error"].as_f64())
            .fold(0.0, f64::max);
        assert_eq!(s["max_error"].as_f64(), Some(worst));
        assert!(s["tolerance"].as_f64().is_some_and(|t| t > 0.0));
    }
    assert_eq!(j["summary"]["signatures"].as_u64(), Some(sigs.len() as u64));
}

/// A failing check (made by hand: the built-in rules all pass) shows in the
/// JSON and in the verdict, whose JSON error has no file.
#[test]
fn test_rules_json_reports_failures() {
    use irad::rules::check::{CheckOptions, RuleKind, RuleReport, Verdict};
    let report = |kind, verdict, message: Option<&str>| RuleReport {
        name: "sin(f64)".into(),
        prim: irad::ir::Prim::Sin,
        kind,
        samples: 3,
        max_error: 0.5,
        verdict,
        message: message.map(String::from),
    };
    let checks = irad::RuleChecks {
        opts: CheckOptions::default(),
        reports: vec![
            report(RuleKind::Frule, Verdict::Fail, Some("tangent differs")),
            report(RuleKind::Rrule, Verdict::Pass, None),
        ],
    };
    let j = checks.to_json();
    assert_eq!(j["ok"], false);
    assert_eq!(j["signatures"][0]["frule"]["ok"], false);
    assert_eq!(j["signatures"][0]["frule"]["message"], "tangent differs");
    assert_eq!(j["signatures"][0]["rrule"]["ok"], true);
    assert_eq!(j["summary"]["frule"]["failed"], 1);
    assert_eq!(j["summary"]["rrule"]["passed"], 1);
    let err = checks.verdict().expect_err("a check failed");
    let e = err.to_json();
    check_entry(&e["error"], err.render(&[]).trim_end());
    assert_eq!(e["error"]["message"], "1 of 2 rule checks failed");
}
