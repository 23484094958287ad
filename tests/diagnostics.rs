//! The texts of the messages that help a newcomer (docs/cli.md, "Errors and
//! exit status"; docs/language.md and docs/ir.md, the error tables): each case
//! runs `irad` on a small file or a bad option value and compares the first
//! line of stderr with the expected text exactly, and the exit status (1 for
//! a user error, 2 for bad usage).
//!
//! Covered: "did you mean" suggestions for misspelled names in both front ends
//! (and in schedules), hints for an integer literal or an i64 where an f64 is
//! expected, option values that name the option, the value and what is
//! expected, a missing bracket of `--known` at its column, why an array
//! primitive is no function value, a byte-order mark, `emit -o DIR`, run-time
//! errors of derived functions named for the user, and the activity header
//! under `--wrt`.

use std::path::PathBuf;
use std::process::{Command, Output};

fn irad(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(args)
        .output()
        .expect("irad starts")
}

/// Writes `text` to `name` in this test file's scratch directory.
fn file(name: &str, text: &[u8]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("diagnostics");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("temp file");
    path
}

/// The first line of stderr of `irad args`, after checking the exit status;
/// paths of the scratch directory are shortened to the file name.
fn first_error(args: &[&str], status: i32) -> String {
    let o = irad(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(status), "{args:?}\n{err}");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("diagnostics");
    let prefix = format!("{}/", dir.display());
    err.lines().next().unwrap_or("").replace(&prefix, "")
}

/// `irad check` on a file with `text`: the first error line (exit 1).
fn check(name: &str, text: &str) -> String {
    let path = file(name, text.as_bytes());
    first_error(&["check", path.to_str().expect("utf-8 path")], 1)
}

#[test]
fn misspelled_names_get_a_suggestion() {
    let cases = [
        (
            "fn f(x: f64) -> f64 {\n    let y = sinn(x);\n    y\n}\n",
            "sinn.irad:2:13: error: unknown function `sinn`; did you mean `sin`? (in @f)",
        ),
        (
            "fn square(x: f64) -> f64 { x * x }\nfn f(x: f64) -> f64 { sqaure(x) }\n",
            "sinn.irad:2:23: error: unknown function `sqaure`; did you mean `square`? (in @f)",
        ),
        (
            "fn f(total: f64) -> f64 {\n    totl * 2.0\n}\n",
            "sinn.irad:2:5: error: unknown name `totl`; did you mean `total`? (in @f)",
        ),
        (
            "fn f(x: f64) -> f64 {\n    let mut acc = 0.0;\n    acx = x;\n    acc\n}\n",
            "sinn.irad:3:5: error: unknown name `acx`; did you mean `acc`? (in @f)",
        ),
        // Nothing close: no suggestion.
        (
            "fn f(x: f64) -> f64 {\n    frobnicate(x)\n}\n",
            "sinn.irad:2:5: error: unknown function `frobnicate` (in @f)",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(check("sinn.irad", text), want, "{text}");
    }
}

#[test]
fn misspelled_names_in_ir_text_get_a_suggestion() {
    let cases = [
        (
            "func @f(%x: f64) -> f64 {\n#1:\n  %y = call sinn(%x) :: f64\n  return %y\n}\n",
            "n.ir:3:13: error: unknown primitive `sinn`; did you mean `sin`? \
             (in @f, block #1, statement 1)",
        ),
        (
            "func @square(%x: f64) -> f64 {\n#1:\n  %y = call mul(%x, %x) :: f64\n  return %y\n}\n\
             func @f(%x: f64) -> f64 {\n#1:\n  %y = invoke @sqaure(%x) :: f64\n  return %y\n}\n",
            "n.ir:8:15: error: unknown function @sqaure; did you mean `@square`? \
             (in @f, block #1, statement 1)",
        ),
        (
            "func @f(%xs: f64) -> f64 {\n#1:\n  %y = call sin(%sx) :: f64\n  return %y\n}\n",
            "n.ir:3:17: error: undefined value %sx; did you mean `%xs`? \
             (in @f, block #1, statement 1)",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(check("n.ir", text), want, "{text}");
    }
}

#[test]
fn an_integer_where_an_f64_is_expected_gets_a_hint() {
    let cases = [
        (
            "fn f(x: f64) -> f64 {\n    let y = x * 2;\n    y\n}\n",
            "h.irad:2:15: error: operator `*` needs two f64 or two i64 operands, found f64 and \
             i64; write `2.0` for an f64 literal (in @f)",
        ),
        (
            "fn f(x: f64) -> f64 {\n    -3 + x\n}\n",
            "h.irad:2:8: error: operator `+` needs two f64 or two i64 operands, found i64 and \
             f64; write `-3.0` for an f64 literal (in @f)",
        ),
        (
            "fn f(x: f64, n: i64) -> f64 {\n    if x < n { x } else { 1.0 }\n}\n",
            "h.irad:2:10: error: operator `<` needs two f64 or two i64 operands, found f64 and \
             i64; convert with `f64(n)` (in @f)",
        ),
        (
            "fn g(a: f64) -> f64 { a }\nfn f(x: f64) -> f64 {\n    g(2) + x\n}\n",
            "h.irad:3:7: error: mismatched types: expected f64, found i64; write `2.0` for an \
             f64 literal (in @f)",
        ),
        (
            "fn f(x: f64) -> f64 {\n    pow(x, 2)\n}\n",
            "h.irad:2:5: error: argument 2 of `pow` must be f64, found i64; write `2.0` for an \
             f64 literal (in @f)",
        ),
        (
            "fn f(x: f64) -> f64 {\n    let y: f64 = 3;\n    y * x\n}\n",
            "h.irad:2:18: error: mismatched types: expected f64, found i64; write `3.0` for an \
             f64 literal (in @f)",
        ),
        // No hint where the fix is not a literal or a conversion.
        (
            "fn f(x: f64, b: bool) -> f64 {\n    x + b\n}\n",
            "h.irad:2:7: error: operator `+` needs two f64 or two i64 operands, found f64 and \
             bool (in @f)",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(check("h.irad", text), want, "{text}");
    }
}

#[test]
fn array_primitives_say_why_they_are_not_values() {
    let value = |prim: &str| {
        format!("func @f(%x: f64) -> f64 {{\n#1:\n  %g = call tuple(@{prim})\n  return %x\n}}\n")
    };
    let cases = [
        (
            "zeros",
            "v.ir:3:19: error: primitive `zeros` cannot be used as a value: only primitives on \
             scalars (such as `sin`) are function values, and it works on arrays (call it, or \
             wrap the call in a function) (in @f, block #1, statement 1)",
        ),
        (
            "length",
            "v.ir:3:19: error: primitive `length` cannot be used as a value: it is generic over \
             the array's element type, so it has no single function type (call it, or wrap the \
             call in a function) (in @f, block #1, statement 1)",
        ),
        (
            "alloc",
            "v.ir:3:19: error: primitive `alloc` cannot be used as a value: its element type \
             comes from the `:: [T]` annotation of a call (call it, or wrap the call in a \
             function) (in @f, block #1, statement 1)",
        ),
        (
            "lt",
            "v.ir:3:19: error: primitive `lt` is overloaded and cannot be used as a value \
             (in @f, block #1, statement 1)",
        ),
    ];
    for (prim, want) in cases {
        assert_eq!(check("v.ir", &value(prim)), want, "{prim}");
    }
    assert_eq!(
        check(
            "v.irad",
            "fn f(a: [f64]) -> i64 {\n    let n = copy;\n    0\n}\n"
        ),
        "v.irad:2:13: error: primitive `copy` cannot be used as a value: it is generic over the \
         array's element type, so it has no single function type (call it, or wrap the call in a \
         function) (in @f)"
    );
}

#[test]
fn a_byte_order_mark_is_skipped_at_the_start_and_named_elsewhere() {
    let path = file("bom.irad", b"\xef\xbb\xbffn f(x: f64) -> f64 { x }\n");
    let o = irad(&["check", path.to_str().expect("utf-8 path")]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).ends_with("bom.irad: ok (1 function)\n"));
    assert_eq!(
        check("bom2.irad", "fn f(x: f64) -> f64 {\n    \u{feff}x\n}\n"),
        "bom2.irad:2:5: error: unexpected character U+FEFF, a byte-order mark (allowed only at \
         the start of a file) (in @f)"
    );
}

#[test]
fn bad_option_values_name_the_option_the_value_and_what_is_expected() {
    let f = file(
        "opt.irad",
        b"fn f(x: f64, a: [f64], n: i64) -> f64 {\n    x * a[0]\n}\n",
    );
    let f = f.to_str().expect("utf-8 path");
    let grad = |extra: &[&str], status: i32| {
        let mut args = vec!["grad", f, "-f", "f", "--args", "1.0, [2.0], 3"];
        args.extend_from_slice(extra);
        first_error(&args, status)
    };
    assert_eq!(
        grad(&["--wrt", "0,a"], 2),
        "error: invalid value 'a' for '--wrt <LIST>': `a` is not an argument position \
         (expected a list like 0,2, positions from 0)"
    );
    assert_eq!(
        grad(&["--mode", "fwd", "--batch", "x"], 2),
        "error: invalid value 'x' for '--batch <N>': `x` is not a number of tangents \
         (expected an integer from 1 to 256)"
    );
    assert_eq!(
        grad(&["--mode", "fwd", "--batch", "0"], 2),
        "error: invalid value '0' for '--batch <N>': `0` is not a number of tangents \
         (expected an integer from 1 to 256)"
    );
    assert_eq!(
        grad(&["--schedule", "fold; dcee"], 1)
            .rsplit(')')
            .next()
            .unwrap_or(""),
        "; did you mean `dce`?"
    );
    assert_eq!(
        first_error(&["dump", f, "-f", "f", "--known", "_[3, _"], 1),
        "<known>:1:7: error: expected `]` to close the `[` at column 2, found the end of the text"
    );
    assert_eq!(
        first_error(&["dump", f, "-f", "f", "--known", "_, (1.0], _"], 1),
        "<known>:1:8: error: expected `)` to close the `(` at column 4, found `]`"
    );
    assert_eq!(
        first_error(&["dump", f, "--activity", "--wrt", "x"], 2),
        "error: invalid value 'x' for '--wrt <LIST>': `x` is not an argument position \
         (expected a list like 0,2, positions from 0)"
    );
    assert_eq!(
        first_error(&["test-rules", "--samples", "many"], 2),
        "error: invalid value 'many' for '--samples <N>': `many` is not a count \
         (expected a non-negative integer)"
    );
}

#[test]
fn emit_into_a_directory_says_what_o_must_name() {
    let f = file("emit.irad", b"fn f(x: f64) -> f64 { x }\n");
    let f = f.to_str().expect("utf-8 path");
    assert_eq!(
        first_error(&["emit", f, "-f", "f", "-o", "."], 2),
        "error: -o must name an object file path such as `out.o` (the header goes beside it \
         as `out.h`), but `.` is a directory"
    );
    assert_eq!(
        first_error(&["emit", f, "-f", "f", "-o", "f.h"], 2),
        "error: -o `f.h` would be overwritten by the header: give the object file a `.o` name"
    );
}

#[test]
fn run_time_errors_in_derived_code_name_what_the_user_wrote() {
    let f = file(
        "lse.irad",
        b"fn logsumexp(a: [f64], n: i64) -> f64 {\n    let mut s = 0.0;\n    \
          for i in 0..n {\n        s = s + exp(a[i]);\n    }\n    log(s)\n}\n",
    );
    let f = f.to_str().expect("utf-8 path");
    let run = |extra: &[&str]| {
        let mut args = vec!["grad", f, "-f", "logsumexp", "--args", "[1.0, 2.0], 3"];
        args.extend_from_slice(extra);
        first_error(&args, 1)
    };
    let rev = "lse.irad:4:21: error: index 2 out of bounds for array of length 2 (in the \
               gradient of `logsumexp` (@logsumexp.rev.fwd), block #3, statement 1)";
    assert_eq!(run(&[]), rev);
    assert_eq!(run(&["--backend", "interp"]), rev);
    assert_eq!(
        run(&["--mode", "fwd"]),
        "lse.irad:4:21: error: index 2 out of bounds for array of length 2 (in the \
         forward-mode derivative of `logsumexp` (@logsumexp.fwd2), block #3, statement 1)"
    );
    // The primal keeps its own name.
    let o = irad(&["run", f, "-f", "logsumexp", "--args", "[1.0, 2.0], 3"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("(in @logsumexp, block #3, statement 1)"),
        "{err}"
    );
}

#[test]
fn the_activity_header_lists_only_the_parameters_of_wrt() {
    let f = file(
        "act.irad",
        b"fn f(x: [f64], a: f64) -> f64 {\n    a * x[0]\n}\n",
    );
    let f = f.to_str().expect("utf-8 path");
    let header = |wrt: &[&str]| {
        let mut args = vec!["dump", f, "--activity"];
        args.extend_from_slice(wrt);
        let o = irad(&args);
        assert_eq!(o.status.code(), Some(0));
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        text.lines().nth(1).unwrap_or("").to_string()
    };
    assert_eq!(header(&[]), "# active parameters: 0, 1");
    assert_eq!(header(&["--wrt", "1"]), "# active parameters: 1");
    assert_eq!(header(&["--wrt", "0"]), "# active parameters: 0");
    assert_eq!(
        first_error(&["dump", f, "--activity", "--format", "dot"], 2),
        "error: `--activity` annotates the IR text: it cannot be combined with `--format dot` \
         (use `--format text`, the default)"
    );
}

/// `-f NAME` naming no function: the module's names (the first 20 and how
/// many more) and the closest one.
#[test]
fn a_misspelled_function_name_on_the_command_line_gets_a_suggestion() {
    let path = file(
        "names.irad",
        b"fn square(x: f64) -> f64 { x * x }\nfn cube(x: f64) -> f64 { x * x * x }\n",
    );
    let path = path.to_str().expect("utf-8 path");
    assert_eq!(
        first_error(&["run", path, "-f", "sqaure", "--args", "2.0"], 1),
        "names.irad:1:1: error: no function @sqaure in the module (it has @square, @cube); did you mean `@square`?"
    );
    assert_eq!(
        first_error(&["run", path, "-f", "nothing", "--args", "2.0"], 1),
        "names.irad:1:1: error: no function @nothing in the module (it has @square, @cube)"
    );
    let many: String = (0..25)
        .map(|k| format!("fn f{k}(x: f64) -> f64 {{ x }}\n"))
        .collect();
    let path = file("many.irad", many.as_bytes());
    let path = path.to_str().expect("utf-8 path");
    let err = first_error(&["run", path, "-f", "g0", "--args", "2.0"], 1);
    assert!(
        err.contains("@f19, and 5 more); did you mean `@f0`?"),
        "{err}"
    );
}

/// A run-time error under `--json` carries its call trace as `notes`, the
/// text form's `note:` lines, innermost first, on both backends; a deep
/// trace's elided middle is one note without a place.
#[test]
fn json_run_errors_carry_the_call_trace() {
    let path = file(
        "trace.irad",
        b"fn f(n: i64, a: [f64]) -> f64 {\n    if n == 0 { a[5] } else { g(n - 1, a) }\n}\nfn g(n: i64, a: [f64]) -> f64 { f(n, a) * 2.0 }\n",
    );
    let path = path.to_str().expect("utf-8 path");
    for backend in ["jit", "interp"] {
        let o = irad(&[
            "run",
            path,
            "-f",
            "f",
            "--args",
            "2, [1.0]",
            "--json",
            "--backend",
            backend,
        ]);
        assert_eq!(o.status.code(), Some(1));
        let e: serde_json::Value =
            serde_json::from_slice(&o.stderr).expect("one JSON object on stderr");
        let notes = e["error"]["notes"].as_array().expect("notes");
        let got: Vec<(u64, u64, &str)> = notes
            .iter()
            .map(|n| {
                (
                    n["line"].as_u64().unwrap_or(0),
                    n["column"].as_u64().unwrap_or(0),
                    n["message"].as_str().unwrap_or(""),
                )
            })
            .collect();
        let g = (4, 33, "called in @g, block #1, statement 1");
        let f = (2, 31, "called in @f, block #3, statement 2");
        assert_eq!(got, [g, f, g, f], "{backend}");
        assert!(notes.iter().all(|n| n["file"] == path), "{backend}");
        // The text form has the same notes.
        let t = irad(&[
            "run",
            path,
            "-f",
            "f",
            "--args",
            "2, [1.0]",
            "--backend",
            backend,
        ]);
        let text = String::from_utf8_lossy(&t.stderr);
        assert_eq!(text.matches("note: called in").count(), 4, "{text}");
    }
    // Deep: 8 innermost, the elided middle, 2 outermost.
    let o = irad(&["run", path, "-f", "f", "--args", "100, [1.0]", "--json"]);
    let e: serde_json::Value = serde_json::from_slice(&o.stderr).expect("JSON");
    let notes = e["error"]["notes"].as_array().expect("notes");
    assert_eq!(notes.len(), 11);
    assert_eq!(notes[8]["message"], "... 190 more calls ...");
    assert!(notes[8]["line"].is_null() && notes[8]["file"].is_null());
}
