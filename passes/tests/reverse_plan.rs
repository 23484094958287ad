//! The tape plan of reverse mode (`irad_passes::reverse::tape_plan`): what the
//! forward sweep saves for the pullback, where it pushes it and where the
//! pullback pops it, for small functions parsed from IR text. Snapshots of the
//! plan's text (`UPDATE_EXPECT=1` rewrites them).

use expect_test::{Expect, expect};
use irad_ir::text::parse_module;
use irad_ir::verify::verify_module;
use irad_passes::reverse::plan::Site;
use irad_passes::reverse::tape_plan;
use irad_rules::Registry;

/// Parses, verifies and normalises `text`, then checks the plan of `@name`.
fn check(text: &str, name: &str, expected: Expect) {
    let mut m = parse_module(text).expect("test IR parses");
    verify_module(&m).expect("test IR verifies");
    irad_passes::normalise(&mut m).expect("normalises");
    let f = m.by_name(name).expect("the function exists");
    let plan = tape_plan(&m, &Registry::new(), f).expect("the plan builds");
    expected.assert_eq(&plan.to_string());
}

#[test]
fn straight_line() {
    check(
        r#"
func @f(%x: f64, %y: f64) -> f64 {
#1:
  %s = call sin(%x) :: f64
  %p = call mul(%s, %y) :: f64
  %q = call mul(%p, %p) :: f64
  return %q
}
"#,
        "f",
        expect![[r#"
            %y: f64  pushed once at the end of #1, popped where the pullback starts
            %1: f64  pushed after #1 statement 1, popped before its pullback
            %0: f64  pushed after #1 statement 3, popped before its pullback
            `mul` of #1 statement 2: recomputed in the reverse of #1, not recorded
        "#]],
    );
}

#[test]
fn branch() {
    check(
        r#"
func @f(%x: f64, %s: f64) -> f64 {
#1:
  %neg = call lt(%x, 0.0) :: bool
  gotoifnot %neg, #3
#2:
  %a = call mul(%x, %s) :: f64
  goto #4
#3:
  %l = call log(%x) :: f64
  goto #4
#4:
  %r = phi [#2 => %a, #3 => %l] :: f64
  return %r
}
"#,
        "f",
        expect![[r#"
            %s: f64  pushed once at the end of #4, popped where the pullback starts
            %x: f64  pushed once at the end of #4, popped where the pullback starts
            %3: f64  pushed after #3 statement 1, popped before its pullback
            true: bool  pushed at the end of #3 (its index among the predecessors of #4), popped at the end of the reverse of #4
            false: bool  pushed at the end of #2 (its index among the predecessors of #4), popped at the end of the reverse of #4
        "#]],
    );
}

#[test]
fn loop_carried() {
    check(
        r#"
func @pow_loop(%x: f64, %n: i64) -> f64 {
#1:
  goto #2
#2:
  %i = phi [#1 => 0, #3 => %i1] :: i64
  %acc = phi [#1 => 1.0, #3 => %acc1] :: f64
  %more = call lt(%i, %n) :: bool
  gotoifnot %more, #4
#3:
  %acc1 = call mul(%acc, %x) :: f64
  %i1 = call iadd(%i, 1) :: i64
  goto #2
#4:
  return %acc
}
"#,
        "pow_loop",
        expect![[r#"
            %x: f64  pushed once at the end of #4, popped where the pullback starts
            %1: f64  pushed at the end of #3, popped where its reverse starts
            %0: i64  pushed at the end of #4, popped where its reverse starts
            %0: counts loop #2 (step 1); its reverse counts back, recording no index per iteration
        "#]],
    );
}

#[test]
fn array_write() {
    check(
        r#"
func @f(%a: [f64], %s: f64) -> f64 {
#1:
  %v = call arrayref(%a, 0) :: f64
  %w = call mul(%v, %s) :: f64
  call arrayset(%a, 0, %w)
  %r = call arrayref(%a, 1) :: f64
  return %r
}
"#,
        "f",
        expect![[r#"
            %0: [f64]  pushed once at the end of #1, popped where the pullback starts
            %s: f64  pushed once at the end of #1, popped where the pullback starts
            %a: [f64]  pushed once at the end of #1, popped where the pullback starts
            %3: f64  pushed after #1 statement 3, popped before its pullback
            `arrayref` of #1 statement 1: recomputed in the reverse of #1, not recorded
        "#]],
    );
}

#[test]
fn call_of_a_user_function() {
    check(
        r#"
func @sq(%x: f64) -> f64 {
#1:
  %y = call mul(%x, %x) :: f64
  return %y
}

func @f(%x: f64, %n: i64) -> f64 {
#1:
  goto #2
#2:
  %i = phi [#1 => 0, #3 => %i1] :: i64
  %acc = phi [#1 => %x, #3 => %acc1] :: f64
  %more = call lt(%i, %n) :: bool
  gotoifnot %more, #4
#3:
  %s = invoke @sq(%acc) :: f64
  %acc1 = call cos(%s) :: f64
  %i1 = call iadd(%i, 1) :: i64
  goto #2
#4:
  return %acc
}
"#,
        "f",
        expect![[r#"
            %6: f64  pushed after #3 statement 2, popped before its pullback
            %0: i64  pushed at the end of #4, popped where its reverse starts
            %0: counts loop #2 (step 1); its reverse counts back, recording no index per iteration
        "#]],
    );
}

#[test]
fn dynamic_call() {
    check(
        r#"
func @f(%h: fn(f64) -> f64, %x: f64) -> f64 {
#1:
  %y = call %h(%x) :: f64
  %z = call mul(%y, %x) :: f64
  return %z
}
"#,
        "f",
        expect![[r#"
            %h: fn(f64) -> f64  pushed once at the end of #1, popped where the pullback starts
            %x: f64  pushed once at the end of #1, popped where the pullback starts
            %1: f64  pushed after #1 statement 2, popped before its pullback
        "#]],
    );
}

#[test]
fn a_marked_function_has_no_plan() {
    let m = parse_module("func @g(%x: f64) -> f64 {\n#1:\n  return %x\n}\n").expect("parses");
    let mut reg = Registry::new();
    let rule = irad_rules::RruleFns::new(
        |_, _| Err(irad_rules::RuleError::Unsupported("unused".into())),
        |_, _| Err(irad_rules::RuleError::Unsupported("unused".into())),
    );
    reg.register_function_rrule("g", rule);
    let f = m.by_name("g").expect("exists");
    let e = tape_plan(&m, &reg, f).expect_err("no plan");
    expect!["@g has a registered reverse rule and no tape plan (in @g)"].assert_eq(&e.to_string());
}

/// The plan printed in docs/reverse.md ("Tapes") is the plan of the worked
/// example there (the loop of `loop_carried` above).
#[test]
fn the_plan_in_the_docs_is_what_tape_plan_prints() {
    let doc = include_str!("../../docs/reverse.md");
    let (_, rest) = doc
        .split_once("<!-- tape-plan: pow_loop -->\n```\n")
        .expect("the plan marker");
    let (block, _) = rest.split_once("```\n").expect("the code block ends");
    let text = include_str!("../../tests/filetests/reverse/loop_phi.ir");
    let mut m = parse_module(text).expect("parses");
    irad_passes::normalise(&mut m).expect("normalises");
    let f = m.by_name("pow_loop").expect("exists");
    let plan = tape_plan(&m, &Registry::new(), f).expect("the plan builds");
    assert_eq!(plan.to_string(), block);
}

/// The plan as data: in the loop of docs/reverse.md, the invariant `%x` is
/// saved once per call, the loop-carried `%acc` at the end of the body, the
/// counter's last value where the loop exits, and no predecessor index: the
/// loop is counted.
#[test]
fn the_plan_is_data_too() {
    let text = include_str!("../../tests/filetests/reverse/loop_phi.ir");
    let mut m = parse_module(text).expect("parses");
    irad_passes::normalise(&mut m).expect("normalises");
    let f = m.by_name("pow_loop").expect("exists");
    let plan = tape_plan(&m, &Registry::new(), f).expect("the plan builds");
    let sites: Vec<(Option<&str>, &Site)> = plan
        .saves()
        .iter()
        .map(|s| (s.name.as_deref(), &s.site))
        .collect();
    assert!(
        matches!(
            sites[..],
            [
                (Some("x"), Site::Once),
                (Some("1"), Site::BlockEnd { label: 3, .. }),
                (Some("0"), Site::BlockEnd { label: 4, .. })
            ]
        ),
        "{sites:?}"
    );
    assert_eq!(plan.ret_label(), 4);
    assert!(plan.branches().is_empty(), "{:?}", plan.branches());
    let counted: Vec<(u32, Option<&str>, i64)> = plan
        .counted()
        .map(|c| (c.label, c.name.as_deref(), c.step))
        .collect();
    assert_eq!(counted, [(2, Some("0"), 1)]);
    assert!(plan.recomputed().is_empty());
}
