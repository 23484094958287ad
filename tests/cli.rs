//! The command line as SYNTAX.md §3 fixes it: exit statuses 0/1/2, `--args`
//! and `--args-file`, `--json`, error messages that start with
//! `file:line:column: error: ` and show the source line, and no panic on bad
//! input (a panic would exit with 101).

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

/// Asserts that `o` is a user error (exit 1) whose message contains `text`.
fn fails_with(o: &Output, text: &str) {
    assert_eq!(o.status.code(), Some(1), "{}", stderr(o));
    assert!(stderr(o).contains(text), "{}", stderr(o));
}

/// Writes `text` to a fresh file named `name` in a per-test directory.
fn file(test: &str, name: &str, text: &[u8]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("cli")
        .join(test);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("temp file");
    path
}

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/rosenbrock.ir");

const ARRAYS: &str = "func @f(%x: f64, %a: [f64], %k: i64) -> f64 {
#1:
  %i = call fptosi(%x) :: i64
  %e = call arrayref(%a, %i) :: f64
  %r = call mul(%e, %x) :: f64
  return %r
}

func @nums(%x: f64) -> (f64, f64, f64, f64) {
#1:
  %inf = call div(%x, 0.0) :: f64
  %ninf = call neg(%inf) :: f64
  %nan = call sub(%inf, %inf) :: f64
  %t = call tuple(%x, %inf, %ninf, %nan) :: (f64, f64, f64, f64)
  return %t
}
";

#[test]
fn run_prints_the_value() {
    let o = irad(&[
        "run",
        EXAMPLE,
        "-f",
        "rosenbrock",
        "--args",
        "[1.5, 0.5, -0.3]",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "337.0\n");
    let o = irad(&[
        "run",
        EXAMPLE,
        "-f",
        "@rosenbrock",
        "--args",
        "[1.5, 0.5, -0.3]",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "{\"value\":337.0}\n");
}

#[test]
fn json_writes_non_finite_floats_as_strings() {
    let path = file("json", "nums.ir", ARRAYS.as_bytes());
    let o = irad(&[
        "run",
        path.to_str().unwrap_or(""),
        "-f",
        "nums",
        "--args",
        "-2.0",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "{\"value\":[-2.0,\"-inf\",\"inf\",\"nan\"]}\n");
}

#[test]
fn args_may_start_with_a_minus_and_come_from_a_file() {
    let path = file("args", "f.ir", ARRAYS.as_bytes());
    let p = path.to_str().unwrap_or("");
    let o = irad(&["run", p, "-f", "f", "--args", "-0.0, [2.5, -1.0], -7"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "-0.0\n");
    let args = file("args", "args.txt", b"1.5, [2.5, -1.0], 3\n");
    let o = irad(&[
        "run",
        p,
        "-f",
        "f",
        "--args-file",
        args.to_str().unwrap_or(""),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "-1.5\n");
}

#[test]
fn run_time_errors_name_the_statement_and_show_the_line() {
    let path = file("runerr", "f.ir", ARRAYS.as_bytes());
    let p = path.to_str().unwrap_or("");
    let o = irad(&["run", p, "-f", "f", "--args", "5.0, [1.0], 0"]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    let first = err.lines().next().unwrap_or("");
    assert_eq!(
        first,
        format!(
            "{p}:4:3: error: index 5 out of bounds for array of length 1 (in @f, block #1, statement 2)"
        )
    );
    assert!(
        err.contains("4 │   %e = call arrayref(%a, %i) :: f64"),
        "{err}"
    );
}

#[test]
fn malformed_args_are_located_in_the_args_text() {
    let path = file("badargs", "f.ir", ARRAYS.as_bytes());
    let p = path.to_str().unwrap_or("");
    for args in [
        "1.0, [1.0, 2.0",
        "1.0, [1.0], 2.5",
        "1.0, [1.0]",
        "1.0, [1.0], 2, 3",
        "x",
    ] {
        let o = irad(&["run", p, "-f", "f", "--args", args]);
        assert_eq!(o.status.code(), Some(1), "{args}: {}", stderr(&o));
        assert!(
            stderr(&o).starts_with("<args>:1:"),
            "{args}: {}",
            stderr(&o)
        );
        assert!(stderr(&o).contains(": error: "), "{args}: {}", stderr(&o));
    }
    let args = file("badargs", "args.txt", b"1.0,\n[1.0,, 2.0], 3");
    let o = irad(&[
        "run",
        p,
        "-f",
        "f",
        "--args-file",
        args.to_str().unwrap_or(""),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with(&format!("{}:2:", args.display())),
        "{}",
        stderr(&o)
    );
}

#[test]
fn usage_errors_exit_with_2() {
    for args in [
        vec!["run", EXAMPLE, "--args", "[]"],
        vec!["run", EXAMPLE, "-f", "rosenbrock"],
        vec![
            "run",
            EXAMPLE,
            "-f",
            "rosenbrock",
            "--args",
            "[]",
            "--args-file",
            "x",
        ],
        vec![
            "run",
            EXAMPLE,
            "-f",
            "rosenbrock",
            "--args",
            "[]",
            "--backend",
            "gpu",
        ],
        vec!["check", EXAMPLE, "--frobnicate"],
        vec!["frobnicate"],
        vec![],
    ] {
        let o = irad(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
    assert_eq!(irad(&["--help"]).status.code(), Some(0));
}

#[test]
fn user_errors_exit_with_1_and_never_panic() {
    let missing = irad(&["check", "/nonexistent/x.ir"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).starts_with("/nonexistent/x.ir: error: cannot read file"));

    let not_utf8 = file(
        "user",
        "bad.ir",
        b"func @f() -> f64 {\n#1:\n  return \xff\n}\n",
    );
    let o = irad(&["check", not_utf8.to_str().unwrap_or("")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).starts_with(&format!(
        "{}:3:10: error: file is not valid UTF-8",
        not_utf8.display()
    )));

    let o = irad(&["run", EXAMPLE, "-f", "nope", "--args", "[]"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no function @nope in the module (it has @rosenbrock)"),
        "{}",
        stderr(&o)
    );

    let other = file("user", "f.txt", b"fn f(x: f64) -> f64 { x }\n");
    let o = irad(&["check", other.to_str().unwrap_or("")]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with(&format!(
            "{}:1:1: error: unknown file type",
            other.display()
        )),
        "{}",
        stderr(&o)
    );

    // Deep nesting and garbage: located errors, no crash.
    let deep = format!(
        "func @f(%x: {}f64{}) -> f64 {{\n}}\n",
        "(".repeat(100_000),
        ",)".repeat(100_000)
    );
    let deep = file("user", "deep.ir", deep.as_bytes());
    let o = irad(&["check", deep.to_str().unwrap_or("")]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with(&format!("{}:1:", deep.display())),
        "{}",
        stderr(&o)
    );
    let garbage = file(
        "user",
        "garbage.ir",
        b"}}}{{{ %%% @@@ func func ###1 \x01\x02",
    );
    let o = irad(&["check", garbage.to_str().unwrap_or("")]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}

#[test]
fn check_and_dump_print_the_module() {
    let o = irad(&["check", EXAMPLE]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), format!("{EXAMPLE}: ok (1 function)\n"));

    // The example is in canonical form but for its comments and directives.
    let text = std::fs::read_to_string(EXAMPLE).unwrap_or_default();
    let canonical: String = text
        .lines()
        .filter(|l| !l.starts_with("# "))
        .map(|l| format!("{l}\n"))
        .collect();
    let o = irad(&["dump", EXAMPLE]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), canonical);
    let o = irad(&["dump", EXAMPLE, "-f", "rosenbrock"]);
    assert_eq!(stdout(&o), canonical);

    let o = irad(&["dump", EXAMPLE, "--format", "dot"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let dot = stdout(&o);
    assert!(dot.starts_with("digraph irad {"), "{dot}");
    assert!(
        dot.contains("[label=\"true\"]") && dot.contains("[label=\"false\"]"),
        "{dot}"
    );
    let edges = dot
        .lines()
        .filter(|l| l.trim_start().starts_with("f0_b") && l.contains(" -> "));
    assert_eq!(edges.count(), 4, "{dot}");
}

#[test]
fn dump_format_clif_prints_the_compiled_functions() {
    // The primal: one Cranelift function, headed by its IR name.
    let o = irad(&["dump", EXAMPLE, "--format", "clif"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let clif = stdout(&o);
    assert!(clif.starts_with("; @rosenbrock\nfunction "), "{clif}");
    assert_eq!(clif.matches("\nfunction ").count(), 1, "{clif}");
    assert!(
        clif.contains(" = fmul ") && clif.contains("return"),
        "{clif}"
    );
    // The gradient: @rosenbrock.rev and the pieces it calls (inlined or not,
    // each compiled function once).
    let o = irad(&[
        "dump",
        EXAMPLE,
        "--mode",
        "rev",
        "-f",
        "rosenbrock",
        "--format",
        "clif",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let clif = stdout(&o);
    for name in [
        "; @rosenbrock.rev\n",
        "; @rosenbrock.rev.fwd\n",
        "; @rosenbrock.rev.back\n",
    ] {
        assert_eq!(clif.matches(name).count(), 1, "{name} in {clif}");
    }
    // One module only: not with the sections of --all-passes.
    let o = irad(&["dump", EXAMPLE, "--all-passes", "--format", "clif"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--format clif"), "{}", stderr(&o));
}

const TUPLES: &str = "func @f(%p: (f64, i64), %x: f64, %n: i64) -> f64 {
#1:
  %a = call getfield(%p, 0) :: f64
  %k = call getfield(%p, 1) :: i64
  %kf = call sitofp(%k) :: f64
  %b = call mul(%a, %x) :: f64
  %c = call mul(%b, %kf) :: f64
  return %c
}

func @pair(%x: f64) -> (f64, f64) {
#1:
  %t = call tuple(%x, %x) :: (f64, f64)
  return %t
}

func @bad(%a: [f64], %x: f64) -> f64 {
#1:
  %e = call arrayref(%a, 3) :: f64
  %r = call mul(%e, %x) :: f64
  return %r
}
";

#[test]
fn grad_prints_value_and_gradient() {
    let args = [
        "-f",
        "rosenbrock",
        "--args",
        "[1.5, 0.5, -0.3]",
        "--mode",
        "fwd",
    ];
    let mut cmd = vec!["grad", EXAMPLE];
    cmd.extend(args);
    let o = irad(&cmd);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "value: 337.0\ngradient:\n  %x: [1051.0, -241.0, -110.00000000000001]\n"
    );
    cmd.push("--json");
    let o = irad(&cmd);
    // Forward mode says which lanes it used: three inputs, dense, chosen.
    assert_eq!(
        stdout(&o),
        "{\"forward\":{\"auto\":true,\"batch\":3,\"directions\":3,\"mode\":\"dense\"},\
         \"gradient\":[[1051.0,-241.0,-110.00000000000001]],\"value\":337.0}\n"
    );
    // Tuples have null for components without a tangent, i64 arguments null,
    // and --wrt leaves the others null.
    let path = file("grad", "tuples.ir", TUPLES.as_bytes());
    let p = path.to_str().unwrap();
    let base = [
        "grad",
        p,
        "-f",
        "f",
        "--args",
        "(2.0, 3), 0.5, 7",
        "--mode",
        "fwd",
        "--json",
    ];
    let o = irad(&base);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "{\"forward\":{\"auto\":true,\"batch\":2,\"directions\":2,\"mode\":\"dense\"},\
         \"gradient\":[[1.5,null],6.0,null],\"value\":3.0}\n"
    );
    let mut wrt = base.to_vec();
    wrt.extend(["--wrt", "1"]);
    let o = irad(&wrt);
    assert_eq!(
        stdout(&o),
        "{\"forward\":{\"auto\":true,\"batch\":1,\"directions\":1,\"mode\":\"dense\"},\
         \"gradient\":[null,6.0,null],\"value\":3.0}\n"
    );
    // Batch widths give the same answer (and say so in `forward`).
    let mut batch = base.to_vec();
    batch.extend(["--batch", "1"]);
    let forced = "{\"forward\":{\"auto\":false,\"batch\":1,\"directions\":2,\"mode\":\"dense\"},";
    let chosen = "{\"forward\":{\"auto\":true,\"batch\":2,\"directions\":2,\"mode\":\"dense\"},";
    assert_eq!(
        stdout(&irad(&batch)).replacen(forced, "", 1),
        stdout(&irad(&base)).replacen(chosen, "", 1)
    );
}

#[test]
fn grad_rejects_what_it_cannot_differentiate() {
    let path = file("grad_errors", "tuples.ir", TUPLES.as_bytes());
    let p = path.to_str().unwrap();
    let case = |extra: &[&str], args: &str, f: &str| {
        let mut cmd = vec!["grad", p, "-f", f, "--args", args];
        cmd.extend(extra);
        irad(&cmd)
    };
    for mode in ["fwd", "rev"] {
        // --wrt out of range, or naming an argument without a tangent.
        fails_with(
            &case(&["--mode", mode, "--wrt", "5"], "(2.0, 3), 0.5, 7", "f"),
            "error: --wrt 5: @f has 3 arguments",
        );
        fails_with(
            &case(&["--mode", mode, "--wrt", "2"], "(2.0, 3), 0.5, 7", "f"),
            "argument 2 of @f has type i64, which has no tangent",
        );
        // Only f64 results have a gradient.
        fails_with(
            &case(&["--mode", mode], "1.0", "pair"),
            "@pair returns (f64, f64)",
        );
        // A run-time error inside the derived code points at the primal's line.
        fails_with(
            &case(&["--mode", mode], "[1.0], 2.0", "bad"),
            "tuples.ir:19:3: error: index 3 out of bounds",
        );
    }
    // Usage errors exit with 2.
    assert_eq!(
        case(&["--mode", "fwd", "--batch", "0"], "1.0", "pair")
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        case(&["--mode", "sideways"], "1.0", "pair").status.code(),
        Some(2)
    );
}

#[test]
fn dump_shows_forward_rules() {
    let o = irad(&["dump", EXAMPLE, "-f", "rosenbrock", "--mode", "fwd"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.starts_with("func @rosenbrock.fwd(%x: dual<[f64]>) -> dual<f64> {"),
        "{text}"
    );
    // What dump prints parses and verifies.
    let path = file("dump_fwd", "fwd.ir", text.as_bytes());
    let o = irad(&["check", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // --all-passes ends with the forward stage; --after forward needs --mode fwd.
    let o = irad(&["dump", EXAMPLE, "--mode", "fwd", "--all-passes"]);
    let text = stdout(&o);
    assert!(text.starts_with("# input\n"), "{text}");
    assert!(text.contains("\n# after forward\n"), "{text}");
    let o = irad(&["dump", EXAMPLE, "--after", "forward"]);
    assert_eq!(o.status.code(), Some(2));
    let o = irad(&[
        "dump", EXAMPLE, "--mode", "fwd", "--after", "forward", "--format", "dot",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("rosenbrock.fwd"));
}

/// `--sparse` (sparse forward mode): the same gradient layout as dense
/// forward mode, with both backends; with `--batch` or `--mode rev` it is a
/// usage error (exit 2).
#[test]
fn grad_sparse_gives_the_forward_gradient_in_one_pass() {
    let path = manifest_examples("rosenbrock.irad");
    let base = [
        "grad",
        path.as_str(),
        "-f",
        "rosenbrock",
        "--args",
        "[1.5, 0.5, -0.3]",
        "--json",
    ];
    let with = |extra: &[&str]| {
        let mut v = base.to_vec();
        v.extend_from_slice(extra);
        irad(&v)
    };
    // The same value and gradient; the `forward` field says which lanes.
    let without_lanes = |o: &std::process::Output| {
        let mut v: serde_json::Value =
            serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)));
        let lanes = v.as_object_mut().and_then(|m| m.remove("forward"));
        (v, lanes.map(|l| l["mode"].clone()))
    };
    let dense = with(&["--mode", "fwd"]);
    assert_eq!(dense.status.code(), Some(0), "{}", stderr(&dense));
    let (dense, mode) = without_lanes(&dense);
    assert_eq!(mode, Some(serde_json::json!("dense")));
    for backend in ["jit", "interp"] {
        let sparse = with(&["--mode", "fwd", "--sparse", "--backend", backend]);
        assert_eq!(sparse.status.code(), Some(0), "{}", stderr(&sparse));
        let (sparse, mode) = without_lanes(&sparse);
        assert_eq!(sparse, dense, "--backend {backend}");
        assert_eq!(mode, Some(serde_json::json!("sparse")));
    }
    let conflict = with(&["--mode", "fwd", "--sparse", "--batch", "2"]);
    assert_eq!(conflict.status.code(), Some(2), "{}", stderr(&conflict));
    let rev = with(&["--sparse"]);
    assert_eq!(rev.status.code(), Some(2), "{}", stderr(&rev));
    assert!(stderr(&rev).contains("--sparse is sparse forward mode"));
}

/// Sparse mode's driver `@f.fwds.grad` is irad's, not a call level of the
/// user's (issue 27, finding 5): the call-depth limit is reached where dense
/// forward mode, reverse mode and the primal reach it, in both backends.
#[test]
fn sparse_mode_counts_call_depth_as_the_other_modes_do() {
    let path = file(
        "sparse_depth",
        "rec.irad",
        b"fn r(x: f64, n: i64) -> f64 { if n == 0 { x } else { sin(r(x, n - 1)) } }\n",
    );
    let path = path.to_str().expect("utf-8 path");
    for backend in ["jit", "interp"] {
        for (depth, ok) in [("4", true), ("3", false)] {
            let run = |extra: &[&str]| {
                let mut v = vec![
                    "grad",
                    path,
                    "-f",
                    "r",
                    "--args",
                    "0.5, 3",
                    "--max-depth",
                    depth,
                    "--backend",
                    backend,
                ];
                v.extend_from_slice(extra);
                irad(&v)
            };
            let sparse = run(&["--mode", "fwd", "--sparse"]);
            for other in [run(&["--mode", "fwd"]), run(&[])] {
                assert_eq!(
                    sparse.status.code(),
                    other.status.code(),
                    "{}",
                    stderr(&sparse)
                );
                assert_eq!(stdout(&sparse), stdout(&other));
            }
            if ok {
                assert_eq!(sparse.status.code(), Some(0), "{}", stderr(&sparse));
            } else {
                fails_with(&sparse, "call depth limit of 3 exceeded");
                // Located in the user's recursion, not at the driver.
                assert!(
                    stderr(&sparse).contains("rec.irad:1:58"),
                    "{}",
                    stderr(&sparse)
                );
            }
        }
    }
}

fn manifest_examples(name: &str) -> String {
    format!("{}/examples/{name}", env!("CARGO_MANIFEST_DIR"))
}
