//! `--schedule` on the command line: a malformed schedule is a user error
//! located in the schedule text; `grad` gives the same result with the
//! default schedule, with `id` and with a custom one, in both modes;
//! `dump --schedule --all-passes` adds one parseable section per top-level
//! step, and `dump` without `--schedule` is unchanged.
//!
//! Assumes the `irad` binary of this package and `examples/rosenbrock.irad`.

use std::process::{Command, Output};

fn irad(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("runs irad")
}

const FILE: &str = "examples/rosenbrock.irad";
const ARGS: &str = "[1.5, 0.5, -0.3]";

#[test]
fn malformed_schedules_are_located_user_errors() {
    for cmd in [
        vec!["grad", FILE, "-f", "rosenbrock", "--args", ARGS],
        vec!["bench", FILE, "-f", "rosenbrock", "--args", ARGS],
        vec!["dump", FILE, "--mode", "rev"],
        vec![
            "emit",
            FILE,
            "-f",
            "rosenbrock",
            "--grad",
            "-o",
            "/nonexistent/x.o",
        ],
    ] {
        let mut args = cmd.clone();
        args.extend(["--schedule", "normalise(fold <+ bogus)"]);
        let out = irad(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{cmd:?}: {err}");
        assert!(
            err.starts_with("<schedule>:1:19: error: unknown rule `bogus` (known: id, fail, fold,"),
            "{cmd:?}: {err}"
        );
    }
}

#[test]
fn grad_gives_the_same_result_under_any_schedule() {
    for mode in ["rev", "fwd"] {
        let mut outs = Vec::new();
        for schedule in [
            None,
            Some("id"),
            Some("normalise(fast-identities <+ identities <+ fold); try(cse); try(dce)"),
        ] {
            let mut args = vec![
                "grad",
                FILE,
                "-f",
                "rosenbrock",
                "--args",
                ARGS,
                "--json",
                "--mode",
                mode,
            ];
            if let Some(s) = schedule {
                args.extend(["--schedule", s]);
            }
            let out = irad(&args);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            outs.push(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        assert!(outs.iter().all(|o| *o == outs[0]), "{mode}: {outs:?}");
    }
}

#[test]
fn dump_shows_each_step_of_the_schedule() {
    let plain = irad(&["dump", FILE, "--mode", "rev", "--all-passes"]);
    let with = irad(&[
        "dump",
        FILE,
        "--mode",
        "rev",
        "--all-passes",
        "--schedule",
        "normalise(dce <+ fold <+ phi-simplify); try(cse); licm",
    ]);
    assert!(
        with.status.success(),
        "{}",
        String::from_utf8_lossy(&with.stderr)
    );
    let plain = String::from_utf8_lossy(&plain.stdout).into_owned();
    let with = String::from_utf8_lossy(&with.stdout).into_owned();
    // The usual sections come first, unchanged: without `--schedule`, the
    // default schedule's steps follow them instead.
    let usual = plain
        .find("\n# after normalise(")
        .map_or(&plain[..], |end| &plain[..=end]);
    assert!(usual.contains("# after reverse\n"), "{plain}");
    assert!(with.starts_with(usual), "dump without --schedule changed");
    let rest = &with[usual.len()..];
    let headers: Vec<&str> = rest.lines().filter(|l| l.starts_with("# after")).collect();
    assert_eq!(
        headers,
        [
            "# after normalise(dce <+ fold <+ phi-simplify)",
            "# after try(cse)",
            "# after licm"
        ]
    );
    assert!(rest.contains("# rewrites: cse 1"), "{rest}");
    // Each section parses on its own.
    for section in rest.split("\n\n# after").filter(|s| !s.trim().is_empty()) {
        let text = if section.starts_with("# after") {
            section.to_string()
        } else {
            format!("# after{section}")
        };
        irad::ir::text::parse_module(&text).expect("a section parses");
    }
    // Without --all-passes: only the module after the schedule.
    let last = irad(&["dump", FILE, "--mode", "rev", "--schedule", "try(cse)"]);
    let last = String::from_utf8_lossy(&last.stdout).into_owned();
    assert!(!last.contains("# after") && last.contains("func @rosenbrock.rev"));
}
