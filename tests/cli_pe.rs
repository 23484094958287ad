//! `irad dump --known` and `irad run --known` (docs/cli.md): the specialised
//! function printed or run; bad known text, a wrong number of entries, a type
//! mismatch and arguments that disagree with what is known are user errors
//! (exit 1) located in the `<known>` or `<args>` text as SYNTAX.md §3 says;
//! `--known` without `-f` is a usage error (exit 2).

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

const FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/filetests/pe/spec_loop_inline.ir"
);

#[test]
fn dump_known_prints_the_specialised_function() {
    let o = irad(&["dump", FILE, "-f", "f", "--known", "_, 3, _[3]"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.starts_with("func @f.spec(%x: f64, %n: i64, %a: [f64]) -> f64 {"),
        "{text}"
    );
    assert!(!text.contains("invoke") && !text.contains("phi"), "{text}");
    assert!(text.contains("call arrayref(%a, 2)"), "{text}");
}

#[test]
fn run_known_runs_the_specialised_function() {
    for backend in ["interp", "jit"] {
        let o = irad(&[
            "run",
            FILE,
            "-f",
            "f",
            "--known",
            "_, 3, _[3]",
            "--args",
            "2.0, 3, [1.0, 2.0, 3.0]",
            "--backend",
            backend,
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(stdout(&o), "84.0\n");
    }
    let o = irad(&[
        "run",
        FILE,
        "-f",
        "f",
        "--known",
        "_, 3, _[3]",
        "--args",
        "2.0, 4, [1.0, 2.0, 3.0]",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("<args>:1:1: error: argument 2 is 4, but `--known` fixes it to 3"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bad_known_text_is_a_located_user_error() {
    let cases = [
        ("_, 3", "<known>:1:5: error: expected 3 known arguments"),
        ("_, 3.5, _", "<known>:1:4: error: "),
        (
            "_, 3, [1.0]",
            "<known>:1:7: error: an array argument is `_` or `_[N]`",
        ),
        ("_[2], 3, _", "<known>:1:1: error: `_[N]` is for arrays"),
        ("_, 3, _[x]", "<known>:1:7: error: expected a length `_[N]`"),
        ("_, true, _", "<known>:1:4: error: "),
    ];
    for (known, want) in cases {
        let o = irad(&["dump", FILE, "-f", "f", "--known", known]);
        assert_eq!(o.status.code(), Some(1), "{known}: {}", stderr(&o));
        assert!(stderr(&o).starts_with(want), "{known}: {}", stderr(&o));
    }
    let o = irad(&["dump", FILE, "--known", "_, 3, _"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}
