//! Tests of the surface type checker (`surface::check`): each error message
//! with its exact wording and line:column, that all errors are reported in
//! source order without cascades, and that well-typed programs pass.

use irad_ir::surface::{self, SurfaceError};

/// The errors of `src` as `line:col: message`, or a panic when it checks.
fn errors(src: &str) -> Vec<String> {
    let file = surface::parse(src).unwrap_or_else(|e| panic!("parse error: {e}\n{src}"));
    match surface::check(&file) {
        Ok(_) => panic!("expected type errors in\n{src}"),
        Err(errs) => errs.iter().map(show).collect(),
    }
}

fn show(e: &SurfaceError) -> String {
    let pos = e.loc.pos.map_or("?".to_string(), |p| p.to_string());
    format!("{pos}: {}", e.msg)
}

/// The single error of `src`.
fn error(src: &str) -> String {
    let errs = errors(src);
    assert_eq!(errs.len(), 1, "{errs:?}");
    errs[0].clone()
}

fn checks(src: &str) {
    let file = surface::parse(src).unwrap_or_else(|e| panic!("parse error: {e}\n{src}"));
    if let Err(errs) = surface::check(&file) {
        let msgs: Vec<String> = errs.iter().map(show).collect();
        panic!("{msgs:?}\n{src}");
    }
}

#[test]
fn unknown_name() {
    assert_eq!(
        error("fn f() -> f64 {\n    let y = 1.0;\n    x + y\n}"),
        "3:5: unknown name `x`"
    );
}

#[test]
fn unknown_function() {
    assert_eq!(
        error("fn f(x: f64) -> f64 {\n    g(x)\n}"),
        "2:5: unknown function `g`"
    );
}

#[test]
fn mismatched_types() {
    assert_eq!(
        error("fn f(n: i64) -> f64 {\n    let x: f64 = n;\n    x\n}"),
        "2:18: mismatched types: expected f64, found i64; convert with `f64(n)`"
    );
}

#[test]
fn wrong_arity() {
    assert_eq!(
        error("fn f(x: f64, y: f64) -> f64 { x + y }\nfn g() -> f64 { f(1.0) }"),
        "2:17: `f` takes 2 arguments, found 1"
    );
}

#[test]
fn assign_to_immutable() {
    assert_eq!(
        error("fn f() -> f64 {\n    let x = 1.0;\n    x = 2.0;\n    x\n}"),
        "3:5: cannot assign to immutable binding `x`"
    );
    assert_eq!(
        error("fn f(p: f64) { p = 2.0; }"),
        "1:16: cannot assign to immutable binding `p`"
    );
    assert_eq!(
        error("fn f() { for i in 0..3 { i = 1; } }"),
        "1:26: cannot assign to immutable binding `i`"
    );
}

#[test]
fn break_outside_loop() {
    assert_eq!(
        error("fn f() {\n    break;\n}"),
        "2:5: `break` outside a loop"
    );
}

#[test]
fn continue_outside_loop() {
    assert_eq!(
        error("fn f() {\n    if true { continue; }\n}"),
        "2:15: `continue` outside a loop"
    );
}

#[test]
fn missing_return_value() {
    assert_eq!(
        error("fn f(x: f64) -> f64 {\n    let y = x;\n}"),
        "1:4: missing return value: `f` returns f64 but its body has no value"
    );
}

#[test]
fn duplicate_function() {
    assert_eq!(
        error("fn f() {}\nfn f(x: f64) {}"),
        "2:4: duplicate function `f`"
    );
}

#[test]
fn duplicate_parameter() {
    assert_eq!(
        error("fn f(x: f64, x: i64) {}"),
        "1:14: duplicate parameter `x`"
    );
}

#[test]
fn cannot_index() {
    assert_eq!(
        error("fn f(x: f64) -> f64 {\n    x[0]\n}"),
        "2:5: cannot index a value of type f64"
    );
}

#[test]
fn no_such_field() {
    assert_eq!(
        error("fn f(t: (f64, i64)) -> f64 {\n    t.2\n}"),
        "2:5: no field 2 on a tuple of 2 elements"
    );
}

#[test]
fn called_value_not_a_function() {
    assert_eq!(
        error("fn f(x: f64) -> f64 {\n    x(1.0)\n}"),
        "2:5: called value has type f64, not a function type"
    );
}

#[test]
fn overloaded_primitive_as_value() {
    assert_eq!(
        error("fn f() {\n    let g = lt;\n}"),
        "2:13: primitive `lt` is overloaded and cannot be used as a value"
    );
}

#[test]
fn remainder_needs_i64() {
    assert_eq!(
        error("fn f(x: f64) -> f64 {\n    x % 2.0\n}"),
        "2:7: operator `%` needs i64 operands, found f64"
    );
}

#[test]
fn arithmetic_needs_matching_operands() {
    assert_eq!(
        error("fn f(x: f64, n: i64) -> f64 {\n    x + n\n}"),
        "2:7: operator `+` needs two f64 or two i64 operands, found f64 and i64; convert with `f64(n)`"
    );
}

#[test]
fn condition_must_be_bool() {
    assert_eq!(
        error("fn f(x: f64) {\n    while x { }\n}"),
        "2:11: condition must be bool, found f64"
    );
}

#[test]
fn if_without_else_must_be_unit() {
    assert_eq!(
        error("fn f(b: bool) {\n    if b { 1.0 }\n}"),
        "2:5: `if` without `else` must have type (), found f64"
    );
}

#[test]
fn alloc_needs_annotated_let() {
    assert_eq!(
        error("fn f(n: i64) {\n    let a = alloc(n);\n}"),
        "2:13: `alloc` needs a `let` with an array type annotation"
    );
}

#[test]
fn return_value_missing() {
    assert_eq!(
        error("fn f(x: f64) -> f64 {\n    if x > 0.0 { return; }\n    x\n}"),
        "2:18: return value missing: `f` returns f64"
    );
}

// ---------------------------------------------------------------- more rules

#[test]
fn all_errors_in_source_order_without_cascades() {
    let errs = errors(
        "fn g() -> i64 { h() }\n\
         fn f(x: f64) -> f64 {\n    let a = y + 1.0;\n    let b = a * 2.0 + x;\n    let c = b % 2;\n    x % 2\n}",
    );
    // `a`, `b` and `c` have unknown types: no error about them.
    assert_eq!(
        errs,
        [
            "1:17: unknown function `h`",
            "3:13: unknown name `y`",
            "6:7: operator `%` needs i64 operands, found f64 and i64",
        ]
    );
}

#[test]
fn diverging_blocks_fit_any_type() {
    checks(
        "fn f(x: f64) -> f64 {\n    let y = if x > 0.0 { x } else { return 0.0; };\n    while true { if y > 1.0 { break; } else { continue; } }\n    return y;\n}",
    );
    checks("fn g(x: f64) -> f64 { if x > 0.0 { return 1.0; } else { return 2.0; } }");
}

#[test]
fn if_branches_must_agree() {
    assert_eq!(
        error("fn f(b: bool) -> f64 {\n    if b { 1.0 } else { 2 }\n}"),
        "2:25: mismatched types: expected f64, found i64; write `2.0` for an f64 literal"
    );
}

#[test]
fn return_type_is_checked() {
    assert_eq!(
        error("fn f() -> f64 {\n    return 1;\n}"),
        "2:12: mismatched types: expected f64, found i64; write `1.0` for an f64 literal"
    );
    assert_eq!(
        error("fn f() -> i64 {\n    1.5\n}"),
        "2:5: mismatched types: expected i64, found f64"
    );
}

#[test]
fn argument_types_are_checked() {
    assert_eq!(
        error("fn f(x: f64) -> f64 { x }\nfn g() -> f64 { f(1) }"),
        "2:19: mismatched types: expected f64, found i64; write `1.0` for an f64 literal"
    );
    assert_eq!(
        error("fn g() -> f64 { sin(1) }"),
        "1:17: argument 1 of `sin` must be f64, found i64; write `1.0` for an f64 literal"
    );
}

#[test]
fn names_resolve_local_then_function_then_primitive() {
    // A local shadows a function, a function shadows a primitive.
    checks(
        "fn sin(x: i64) -> i64 { x }\nfn f(cos: i64) -> i64 { sin(cos) }\nfn g(x: f64) -> f64 { let sin = cos; sin(x) }",
    );
    checks("fn f(x: f64) -> f64 { let h = atan2; h(x, 1.0) + tanh(x) }");
    checks("fn f(a: [f64]) -> f64 { f64(len(a)) + f64(i64(a[0])) }");
}

#[test]
fn shadowing_let_and_scopes() {
    checks("fn f(x: f64) -> i64 { let x = 3; let x = x + 1; x }");
    assert_eq!(
        error("fn f() -> f64 {\n    { let z = 1.0; }\n    z\n}"),
        "3:5: unknown name `z`"
    );
}

#[test]
fn array_writes_need_no_mut() {
    checks("fn f(a: [f64]) { a[0] = 1.0; let b = a; b[1] = 2.0; }");
    assert_eq!(
        error("fn f(a: [i64]) {\n    a[0] = 1.0;\n}"),
        "2:12: mismatched types: expected i64, found f64"
    );
}

#[test]
fn operators_on_wrong_types() {
    assert_eq!(
        error("fn f(b: bool) -> bool {\n    b < true\n}"),
        "2:7: operator `<` needs two f64 or two i64 operands, found bool and bool"
    );
    assert_eq!(
        error("fn f(x: f64) -> bool {\n    x && true\n}"),
        "2:7: operator `&&` needs bool operands, found f64 and bool"
    );
    assert_eq!(
        error("fn f(x: f64) -> bool {\n    !x\n}"),
        "2:5: operator `!` needs a bool operand, found f64"
    );
    checks("fn f(a: bool, b: bool) -> bool { a == b && a != !b }");
}

#[test]
fn for_bounds_are_i64() {
    assert_eq!(
        error("fn f() {\n    for i in 0..2.0 { }\n}"),
        "2:17: mismatched types: expected i64, found f64"
    );
}

#[test]
fn errors_name_their_function() {
    let file = surface::parse("fn f() {}\nfn g() { break; }").expect("parses");
    let errs = surface::check(&file).expect_err("break outside a loop");
    assert_eq!(errs[0].loc.func.as_deref(), Some("g"));
}
