//! The optimiser's schedule language: located parse errors (the unknown
//! name lists the known ones), printing that parses back, fuel exhaustion
//! reported as an error naming the step, and a failing schedule that is not
//! an error.
//!
//! Assumes nothing beyond the crate's API. Each test is a table of inputs and
//! the exact message or result expected.

use irad_ir::text::{parse_module, print_module};
use irad_passes::optimise::{OptError, OptOptions, Strategy, optimise, parse_schedule};

fn parse_error(text: &str) -> String {
    match parse_schedule(text) {
        Ok(s) => format!("parsed as {s}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn parse_errors_are_located_in_the_schedule_text() {
    let cases = [
        (
            "normalise(fold <+ ",
            "<schedule>:1:19: error: expected a strategy, found the end of the schedule",
        ),
        (
            "normalise(fold",
            "<schedule>:1:15: error: expected `)` to close the `(` at column 10, found the end of the schedule",
        ),
        (
            "fold; ; dce",
            "<schedule>:1:7: error: expected a strategy, found `;`",
        ),
        (
            "try fold",
            "<schedule>:1:5: error: expected `(` after `try`, found `fold`",
        ),
        ("fold $", "<schedule>:1:6: error: unexpected character `$`"),
        (
            "fold dce",
            "<schedule>:1:6: error: expected `;`, `<+` or the end, found `dce`",
        ),
        (
            "fold;\n  dcee",
            "<schedule>:2:3: error: unknown rule `dcee`",
        ),
    ];
    for (text, want) in cases {
        let got = parse_error(text);
        assert!(got.starts_with(want), "{text:?}: {got}");
    }
    // The unknown name lists every known one.
    let got = parse_error("normalise(fold <+ frobnicate)");
    assert!(
        got.starts_with(
            "<schedule>:1:19: error: unknown rule `frobnicate` (known: id, fail, fold,"
        ),
        "{got}"
    );
    for name in ["mul-one", "dce", "cse", "licm", "copyprop", "branch-fold"] {
        assert!(got.contains(name), "{got} lacks {name}");
    }
    // Deep nesting is an error, not a stack overflow.
    let deep = format!("{}id{}", "try(".repeat(10_000), ")".repeat(10_000));
    assert!(parse_error(&deep).contains("nested deeper than 256"));
}

#[test]
fn printed_schedules_parse_back_to_the_same_schedule() {
    for text in [
        "id",
        "fail",
        "fold <+ identities; dce",
        "(fold; dce) <+ (cse; licm) <+ id",
        "normalise(fold <+ (identities; copyprop)); try(repeat(one(all(top_down(bottom_up(mul-one))))))",
        irad_passes::optimise::DEFAULT_SCHEDULE,
    ] {
        let s = parse_schedule(text).expect("parses");
        let printed = s.to_string();
        assert_eq!(parse_schedule(&printed).ok(), Some(s.clone()), "{text}");
        // `;` binds looser than `<+`.
        if text == "fold <+ identities; dce" {
            assert!(matches!(s, Strategy::Seq(ref items) if items.len() == 2));
        }
    }
}

const CHAIN: &str = "func @f(%x: f64) -> f64 {
#1:
  %a = call add(1.0, 2.0) :: f64
  %b = call add(%a, 1.0) :: f64
  %c = call add(%b, 1.0) :: f64
  %d = call add(%c, 1.0) :: f64
  %e = call add(%d, %x) :: f64
  return %e
}
";

#[test]
fn repeat_out_of_fuel_is_an_error_naming_the_step() {
    let m = parse_module(CHAIN).expect("parses");
    let opts = OptOptions {
        fuel: 3,
        ..OptOptions::default()
    };
    let s = parse_schedule("repeat(top_down(fold))").expect("parses");
    let err = optimise(&mut m.clone(), &s, None, &opts).expect_err("runs out of fuel");
    assert!(matches!(err, OptError::Fuel { fuel: 3, .. }));
    assert_eq!(
        err.to_string(),
        "schedule step `repeat(top_down(fold))` did not settle within its fuel of 3 iterations"
    );
    // With enough fuel the same schedule folds the whole chain, as
    // normalise does.
    let opts = OptOptions {
        fuel: 5,
        ..OptOptions::default()
    };
    let mut a = m.clone();
    optimise(&mut a, &s, None, &opts).expect("settles");
    let mut b = m.clone();
    let n = parse_schedule("normalise(fold)").expect("parses");
    optimise(&mut b, &n, None, &OptOptions::default()).expect("settles");
    assert_eq!(print_module(&a), print_module(&b));
    assert!(print_module(&a).contains("add(6.0, %x)"));
}

#[test]
fn a_failing_schedule_is_not_an_error_and_keeps_its_rewrites() {
    let m = parse_module(CHAIN).expect("parses");
    let s = parse_schedule("normalise(fold); fail; dce").expect("parses");
    let mut a = m.clone();
    let report = optimise(&mut a, &s, None, &OptOptions::default()).expect("runs");
    assert!(!report.ok);
    assert_eq!(report.rewrites, vec![("fold", 4)]);
    assert!(print_module(&a).contains("add(6.0, %x)"));
}
