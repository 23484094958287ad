//! `irad test-rules` at the command line: it checks the built-in frule of
//! every primitive, names each one in its table, exits 0 when all pass, is
//! reproducible for a seed, and treats malformed options as usage errors
//! (exit 2). The checker's own behaviour on wrong rules is tested in
//! `rules/tests/check.rs`.

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

#[test]
fn every_rule_passes_and_is_named() {
    let o = irad(&["test-rules", "--samples", "20"]);
    let text = stdout(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let rows: Vec<&str> = text.lines().skip(1).take_while(|l| !l.is_empty()).collect();
    for row in irad::ir::prim::PRIMS {
        if row.prim.is_ad() {
            continue;
        }
        let prefix = format!("{}(", row.name);
        assert!(
            rows.iter().any(|r| r.starts_with(&prefix)),
            "`{}` is not in the table:\n{text}",
            row.name
        );
    }
    assert!(
        rows.iter()
            .all(|r| r.ends_with(" ok") && r.contains(" 20 ")),
        "{text}"
    );
    assert!(text.contains(" passed, 0 failed"), "{text}");
    let seed = irad::rules::check::DEFAULT_SEED;
    assert!(
        text.contains(&format!("20 samples each, seed {seed})")),
        "{text}"
    );
    let sin = rows
        .iter()
        .find(|r| r.starts_with("sin(f64)"))
        .expect("a sin row");
    assert_eq!(sin.split_whitespace().collect::<Vec<_>>().len(), 4, "{sin}");
}

#[test]
fn a_seed_gives_the_same_table() {
    let a = irad(&["test-rules", "--samples", "5", "--seed", "12"]);
    let b = irad(&["test-rules", "--samples", "5", "--seed", "12"]);
    assert_eq!(a.status.code(), Some(0));
    assert_eq!(stdout(&a), stdout(&b));
    assert!(stdout(&a).contains("seed 12)"));
}

#[test]
fn malformed_options_are_usage_errors() {
    for args in [
        &["test-rules", "--samples", "many"][..],
        &["test-rules", "--seed", "-1"],
        &["test-rules", "extra"],
    ] {
        let o = irad(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn a_failed_check_renders_as_one_error_line() {
    let e = irad::Error::RulesFailed {
        failed: 1,
        total: 87,
    };
    assert_eq!(e.render(&[]), "error: 1 of 87 rule checks failed\n");
}
