//! `irad test-rules` at the command line: it checks the built-in frule and
//! rrule of every primitive, names each one in its table with both verdicts,
//! exits 0 when all pass, is reproducible for a seed, and treats malformed
//! options as usage errors (exit 2), and the figures the docs quote of it
//! are current. The checkers' own behaviour on wrong
//! rules is tested in `rules/tests/check.rs` (frules) and
//! `rules/tests/check_rrules.rs` (rrules).

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
    let header: Vec<&str> = text
        .lines()
        .next()
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    assert_eq!(
        header,
        [
            "rule", "samples", "fd", "error", "frule", "adj", "error", "rrule"
        ],
        "{text}"
    );
    // Each row: the signature, the samples, then error and verdict of the
    // frule and of the rrule (the parts of duals `dual primal tangent` have
    // both: forward and reverse mode over forward; the sparse builder's
    // primitives an frule only, `-` for the rrule: forward over sparse).
    let builder = |r: &str| {
        [
            "sonehot(", "szero(", "sscale(", "sadd(", "sdense(", "ssum(", "sdot(", "sfill(",
            "sgemm",
        ]
        .iter()
        .any(|p| r.starts_with(p))
    };
    for row in &rows {
        let cols: Vec<&str> = row.split_whitespace().collect();
        let n = cols.len();
        let rrule = if builder(row) { ["-", "-"] } else { ["ok", ""] };
        assert!(
            n >= 6
                && cols[n - 5] == "20"
                && cols[n - 3] == "ok"
                && cols[n - 1] == rrule[0]
                && (rrule[1].is_empty() || cols[n - 2] == rrule[1]),
            "{row}"
        );
    }
    assert_eq!(
        rows.iter().filter(|r| builder(r)).count(),
        14,
        "the builder's primitives are checked:\n{text}"
    );
    assert!(
        ["dual(", "primal(", "tangent("]
            .iter()
            .all(|p| rows.iter().any(|r| r.starts_with(p))),
        "the parts of duals are checked"
    );
    let sigs = irad::rules::table::signatures();
    let n = sigs.len();
    let with_frule = n;
    let with_rrule = sigs
        .iter()
        .filter(|s| !s.prim.is_ad() || irad::rules::reverses_over_forward(s.prim))
        .count();
    assert_eq!(
        with_rrule,
        n - 14,
        "every signature of the table but the builder's has an rrule"
    );
    let seed = irad::rules::check::DEFAULT_SEED;
    for want in [
        format!("{n} signatures checked, 20 samples each, seed {seed}\n"),
        format!("\nfrules: {with_frule} passed, 0 failed; max finite-difference error "),
        format!("\nrrules: {with_rrule} passed, 0 failed; max adjoint error "),
    ] {
        assert!(text.contains(&want), "{want:?} not in\n{text}");
    }
    let sin = rows
        .iter()
        .find(|r| r.starts_with("sin(f64)"))
        .expect("a sin row");
    assert_eq!(sin.split_whitespace().count(), 6, "{sin}");
}

#[test]
fn a_seed_gives_the_same_table() {
    let a = irad(&["test-rules", "--samples", "5", "--seed", "12"]);
    let b = irad(&["test-rules", "--samples", "5", "--seed", "12"]);
    assert_eq!(a.status.code(), Some(0));
    assert_eq!(stdout(&a), stdout(&b));
    assert!(stdout(&a).contains(", seed 12\n"));
}

#[test]
fn malformed_options_are_usage_errors() {
    for args in [
        &["test-rules", "--samples", "many"][..],
        &["test-rules", "--seed", "-1"],
        &["test-rules", "a.irad", "b.irad"],
    ] {
        let o = irad(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
    }
    // One positional is a FILE whose declared rules are checked: a missing
    // one is a user error that names it.
    let o = irad(&["test-rules", "extra"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("extra: error: cannot read file"), "{err}");
}

#[test]
fn a_failed_check_renders_as_one_error_line() {
    let e = irad::Error::RulesFailed {
        failed: 1,
        total: 174,
    };
    assert_eq!(e.render(&[]), "error: 1 of 174 rule checks failed\n");
}

/// docs/cli.md quotes a run of `irad test-rules` and docs/rules.md how many
/// signatures of the bulk primitives it checks: the counts must be the
/// table's, so adding a signature without updating the docs fails here.
#[test]
fn the_docs_quote_the_current_number_of_signatures() {
    let sigs = irad::rules::table::signatures();
    let n = sigs.len();
    let with_rrule = sigs
        .iter()
        .filter(|s| !s.prim.is_ad() || irad::rules::reverses_over_forward(s.prim))
        .count();
    let root = env!("CARGO_MANIFEST_DIR");
    let cli = std::fs::read_to_string(format!("{root}/docs/cli.md")).expect("docs/cli.md");
    let mut quoted = 0;
    for line in cli.lines() {
        for (key, lead, want) in [
            (" signatures checked,", "", n),
            (" passed, 0 failed;", "frules: ", n),
            (" passed, 0 failed;", "rrules: ", with_rrule),
        ] {
            if let Some(at) = line.find(key)
                && line.starts_with(lead)
            {
                quoted += 1;
                // The frule checker checks every signature, the rrule
                // checker all but the sparse builder's.
                assert_eq!(
                    line[lead.len()..at].trim(),
                    want.to_string(),
                    "docs/cli.md: `{line}`, but test-rules checks {n} signatures"
                );
            }
        }
    }
    assert_eq!(
        quoted, 3,
        "docs/cli.md no longer quotes the summary of test-rules"
    );
    let bulk = sigs.iter().filter(|s| s.prim.bulk().is_some()).count();
    let rules = std::fs::read_to_string(format!("{root}/docs/rules.md")).expect("docs/rules.md");
    let want = format!("`irad test-rules` checks {bulk} signatures of them");
    assert!(
        rules.contains(&want),
        "docs/rules.md should say {want:?} (the bulk primitives' signatures)"
    );
}
