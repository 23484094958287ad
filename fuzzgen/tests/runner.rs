//! The fuzz runner (`irad-fuzz`, fuzzgen/src/bin/irad-fuzz.rs): each target
//! runs a fixed number of seeded programs and ends with its summary line,
//! and bad usage is exit status 2 with the usage text.

use std::process::Command;

fn fuzz(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_irad-fuzz"))
        .args(args)
        .output()
        .expect("irad-fuzz runs")
}

#[test]
fn every_target_runs_its_programs_and_reports() {
    for target in [
        "interp",
        "interp_vs_jit",
        "derivatives",
        "second_order",
        "emit",
    ] {
        let o = fuzz(&[target, "--programs", "12", "--seed", "31", "--jobs", "2"]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{target}: {out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            out.starts_with(&format!("{target}: 12 programs, 0 failures (")),
            "{out}"
        );
        assert!(out.contains("seeds 31..43)"), "{out}");
        // The CPU figure: a positive time per program, and the rate it makes
        // on two cores.
        let ms = out
            .split(" ms CPU per program, ")
            .next()
            .and_then(|head| head.rsplit(' ').next())
            .and_then(|x| x.parse::<f64>().ok());
        assert!(ms.is_some_and(|ms| ms > 0.0), "{out}");
        assert!(out.contains(" per second on 2 idle cores, 2 jobs"), "{out}");
    }
}

#[test]
fn show_prints_the_program_of_a_seed_and_runs_nothing() {
    let o = fuzz(&["interp_vs_jit", "--show", "--seed", "5000"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("fn "), "{out}");
    let run = out.lines().last().unwrap_or("");
    assert!(
        run.starts_with("// run: -f ") && run.contains(" --args '"),
        "{out}"
    );
    // The same seed gives the same program; another seed another one.
    let again = fuzz(&["interp_vs_jit", "--show", "--seed", "5000"]);
    assert_eq!(o.stdout, again.stdout);
    let other = fuzz(&["interp_vs_jit", "--show", "--seed", "5001"]);
    assert_ne!(o.stdout, other.stdout);
    // It prints no summary line: nothing ran.
    assert!(!out.contains("programs, 0 failures"), "{out}");
}

#[test]
fn bad_usage_is_exit_status_2() {
    for args in [
        &[][..],
        &["nope"],
        &["interp", "--programs", "0"],
        &["interp", "--seconds", "-1"],
        &["interp", "--programs", "3", "--seconds", "1"],
        &["interp", "--jobs", "0"],
        &["interp", "--seed"],
        &["interp", "interp"],
    ] {
        let o = fuzz(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("usage: irad-fuzz TARGET"), "{args:?}: {err}");
    }
}

#[test]
fn a_failure_is_saved_with_its_reproducer_and_exits_1() {
    let dir = std::env::temp_dir().join(format!("irad-fuzz-failures-{}", std::process::id()));
    let o = Command::new(env!("CARGO_BIN_EXE_irad-fuzz"))
        .args(["interp", "--programs", "5", "--seed", "100", "--jobs", "1"])
        .env("IRAD_FUZZ_INJECT_FAILURE", "102")
        .env("IRAD_FUZZ_FAILURES", &dir)
        .output()
        .expect("irad-fuzz runs");
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("interp: 5 programs, 1 failures ("), "{out}");
    let err = String::from_utf8_lossy(&o.stderr);
    let cmd = "cargo run --release -p irad-fuzzgen --bin irad-fuzz -- interp --seed 102 --programs 1 --jobs 1";
    assert!(err.contains(&format!("reproduce: {cmd}")), "{err}");
    let saved = std::fs::read_to_string(dir.join("interp-102.txt")).expect("saved");
    assert!(saved.starts_with(cmd), "{saved}");
    assert!(saved.contains("injected failure at seed 102"), "{saved}");
    let _ = std::fs::remove_dir_all(&dir);
}
