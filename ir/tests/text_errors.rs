//! Parse errors: one test per kind of error, asserting the exact position,
//! message and IR place.

use irad_ir::text::parse_module;

/// Parses `src`, expecting an error; returns "line:col: message (place)".
fn err(src: &str) -> String {
    match parse_module(src) {
        Ok(_) => "parsed without error".to_string(),
        Err(e) => {
            let pos = e.loc.pos.map_or("?".to_string(), |p| p.to_string());
            format!("{pos}: {e}")
        }
    }
}

#[test]
fn unexpected_character() {
    assert_eq!(
        err("func @f() -> f64 {\n#1:\n  %x = call add(1.0, $) :: f64\n  return %x\n}\n"),
        "3:22: unexpected character `$` (in @f, block #1, statement 1)"
    );
    // Columns count characters, not bytes.
    assert_eq!(
        err("# héllo\nfunc @f() -> f64 {\n#1:\n  return é\n}\n"),
        "4:10: unexpected character `é` (in @f, block #1, statement 1)"
    );
}

#[test]
fn unexpected_token() {
    assert_eq!(
        err("fun @f() -> f64 {}\n"),
        "1:1: expected `func`, found `fun`"
    );
    assert_eq!(
        err("func @f() -> f64 {\n#1:\n  %x = call add(1.0 2.0)\n  return %x\n}\n"),
        "3:21: expected `,` or `)`, found `2.0` (in @f, block #1, statement 1)"
    );
    assert_eq!(
        err("func @f(%x: f64) -> f64 {\n#1:\n  %y = neg(%x)\n  return %y\n}\n"),
        "3:8: expected `call`, `invoke` or `phi`, found `neg` (in @f, block #1, statement 1)"
    );
}

#[test]
fn unterminated_function() {
    assert_eq!(
        err("func @f() -> f64 {\n#1:\n  return 1.0\n"),
        "4:1: unterminated function @f: expected `}`, found end of file (in @f)"
    );
    assert_eq!(
        err("func @f() -> f64 {\n#1:\n  return 1.0\n\nfunc @g() -> f64 {\n#1:\n  return 1.0\n}\n"),
        "5:1: unterminated function @f: expected `}`, found `func` (in @f)"
    );
}

#[test]
fn duplicate_function() {
    assert_eq!(
        err("func @f() -> f64 {\n#1:\n  return 1.0\n}\nfunc @f() -> f64 {\n#1:\n  return 1.0\n}\n"),
        "5:6: duplicate function @f (in @f)"
    );
}

#[test]
fn duplicate_block_label() {
    assert_eq!(
        err("func @f() -> f64 {\n#1:\n  goto #1\n#1:\n  return 1.0\n}\n"),
        "4:1: duplicate block label #1 (in @f, block #1)"
    );
}

#[test]
fn duplicate_value_definition() {
    assert_eq!(
        err("func @f(%x: f64) -> f64 {\n#1:\n  %x = call neg(%x)\n  return %x\n}\n"),
        "3:3: duplicate value definition %x (in @f, block #1, statement 1)"
    );
    assert_eq!(
        err("func @f(%x: f64, %x: f64) -> f64 {\n#1:\n  return %x\n}\n"),
        "1:18: duplicate value definition %x (in @f)"
    );
}

#[test]
fn undefined_value() {
    assert_eq!(
        err("func @f() -> f64 {\n#1:\n  %y = call neg(%z)\n  return %y\n}\n"),
        "3:17: undefined value %z (in @f, block #1, statement 1)"
    );
}

#[test]
fn unknown_block_label() {
    assert_eq!(
        err("func @f() -> f64 {\n#1:\n  goto #7\n}\n"),
        "3:8: unknown block label #7 (in @f, block #1, statement 1)"
    );
}

#[test]
fn unknown_primitive() {
    assert_eq!(
        err("func @f() -> f64 {\n#1:\n  %y = call frob(1.0)\n  return %y\n}\n"),
        "3:13: unknown primitive `frob` (in @f, block #1, statement 1)"
    );
}

#[test]
fn unknown_function() {
    assert_eq!(
        err("func @f() -> f64 {\n#1:\n  %y = invoke @nope(1.0)\n  return %y\n}\n"),
        "3:15: unknown function @nope (in @f, block #1, statement 1)"
    );
}

#[test]
fn overloaded_primitive_as_value() {
    assert_eq!(
        err(
            "func @f(%g: fn(fn(f64, f64) -> bool) -> bool) -> bool {\n#1:\n  %y = call %g(@lt) :: bool\n  return %y\n}\n"
        ),
        "3:16: primitive `lt` is overloaded and cannot be used as a value (in @f, block #1, statement 1)"
    );
}

#[test]
fn statement_after_terminator() {
    assert_eq!(
        err("func @f() -> f64 {\n#1:\n  return 1.0\n  %y = call neg(1.0)\n}\n"),
        "4:3: expected a block label or `}` after the terminator of block #1, found `%y` (in @f, block #1, statement 2)"
    );
}

#[test]
fn block_without_terminator() {
    assert_eq!(
        err("func @f() -> f64 {\n#1:\n  %y = call neg(1.0)\n#2:\n  return 1.0\n}\n"),
        "4:1: expected a terminator at the end of block #1, found `#2` (in @f, block #1)"
    );
    assert_eq!(
        err("func @f() -> f64 {\n#1:\n  %y = call neg(1.0)\n}\n"),
        "4:1: expected a terminator at the end of block #1, found `}` (in @f, block #1)"
    );
}

#[test]
fn statement_before_any_label() {
    assert_eq!(
        err("func @f() -> f64 {\n  %y = call neg(1.0)\n}\n"),
        "2:3: expected a block label `#N:`, found `%y` (in @f)"
    );
}

#[test]
fn function_without_blocks() {
    assert_eq!(
        err("func @f() -> f64 {\n}\n"),
        "1:1: function @f has no blocks (in @f)"
    );
}

#[test]
fn phi_after_statement_is_left_to_the_verifier() {
    let src = "func @f() -> f64 {\n#1:\n  %y = call neg(1.0) :: f64\n  %z = phi [#1 => 1.0] :: f64\n  return %z\n}\n";
    assert!(parse_module(src).is_ok());
}

#[test]
fn integer_out_of_range() {
    assert_eq!(
        err("func @f() -> i64 {\n#1:\n  return 9223372036854775808\n}\n"),
        "3:10: integer literal 9223372036854775808 out of range for i64 (in @f, block #1, statement 1)"
    );
    assert_eq!(
        err("func @f() -> i64 {\n#1:\n  return -9223372036854775809\n}\n"),
        "3:11: integer literal -9223372036854775809 out of range for i64 (in @f, block #1, statement 1)"
    );
    assert!(parse_module("func @f() -> i64 {\n#1:\n  return -9223372036854775808\n}\n").is_ok());
}

#[test]
fn label_out_of_range() {
    assert_eq!(
        err("func @f() -> f64 {\n#4294967296:\n  return 1.0\n}\n"),
        "2:1: label #4294967296 out of range (at most 4294967295) (in @f)"
    );
}

#[test]
fn alloc_needs_annotation() {
    assert_eq!(
        err("func @f() -> [f64] {\n#1:\n  %a = call alloc(3)\n  return %a\n}\n"),
        "3:3: `alloc` needs a type annotation `:: [T]` naming its element type (in @f, block #1, statement 1)"
    );
}

#[test]
fn type_cannot_be_inferred() {
    assert_eq!(
        err(
            "func @f(%x: f64) -> f64 {\n#1:\n  goto #2\n#2:\n  %p = phi [#1 => %q, #2 => %p]\n  %q = phi [#2 => %p]\n  goto #2\n}\n"
        ),
        "5:3: cannot infer the type of %p; add an annotation `:: T` (in @f, block #2, statement 1)"
    );
    assert_eq!(
        err("func @f(%x: f64) -> f64 {\n#1:\n  %y = call add(%x, true)\n  return %y\n}\n"),
        "3:3: cannot infer the type of %y: argument 2 of `add` must be f64, found bool (in @f, block #1, statement 1)"
    );
}

#[test]
fn type_nesting_limit() {
    let deep = "(".repeat(100_000);
    let src = format!("func @f(%x: {deep}f64) -> f64 {{\n#1:\n  return 1.0\n}}\n");
    assert_eq!(
        err(&src),
        "1:269: type nested deeper than 256 levels (in @f)"
    );
    let deep = "fn(".repeat(100_000);
    let src = format!("func @f(%x: {deep}) -> f64 {{\n#1:\n  return 1.0\n}}\n");
    assert!(err(&src).contains("type nested deeper than 256 levels"));
}

#[test]
fn lexical_error_in_a_later_body_is_reported_in_context() {
    let src = "func @f() -> f64 {\n#1:\n  %y = invoke @g()\n  return %y\n}\nfunc @g() -> f64 {\n#1:\n  %a = call neg(1.0)\n  return ~\n}\n";
    assert_eq!(
        err(src),
        "9:10: unexpected character `~` (in @g, block #1, statement 2)"
    );
}

#[test]
fn malformed_numbers_labels_and_names_are_reported_whole() {
    assert_eq!(
        err("func @f() -> f64 {\n#1:\n  return 1.5e+\n}\n"),
        "3:10: invalid number `1.5e+` (in @f, block #1, statement 1)"
    );
    assert_eq!(
        err("func @f() -> f64 {\n#1:\n  return 12ab\n}\n"),
        "3:10: invalid number `12ab` (in @f, block #1, statement 1)"
    );
    assert_eq!(
        err("func @f() -> f64 {\n#1x:\n  return 1.0\n}\n"),
        "2:1: invalid label `#1x` (in @f)"
    );
    assert_eq!(
        err("func @f() -> f64 {\n#1:\n  return %2b\n}\n"),
        "3:10: invalid value name `%2b` (in @f, block #1, statement 1)"
    );
}

#[test]
fn malformed_switch() {
    let f = |term: &str| {
        err(&format!(
            "func @f(%i: i64) -> i64 {{\n#1:\n  {term}\n#2:\n  return %i\n}}\n"
        ))
    };
    assert_eq!(
        f("switch %i [#2]"),
        "3:13: expected `,`, found `[` (in @f, block #1, statement 1)"
    );
    assert_eq!(
        f("switch %i, #2"),
        "3:14: expected `[`, found `#2` (in @f, block #1, statement 1)"
    );
    assert_eq!(
        f("switch %i, [#2 #2]"),
        "3:18: expected `,` or `]`, found `#2` (in @f, block #1, statement 1)"
    );
    assert_eq!(
        f("switch %i, [#2, %i]"),
        "3:19: expected a block label `#N`, found `%i` (in @f, block #1, statement 1)"
    );
    assert_eq!(
        f("switch %i, [#2, #9]"),
        "3:19: unknown block label #9 (in @f, block #1, statement 1)"
    );
    // Empty and repeated target lists parse; the verifier refuses them.
    assert_eq!(f("switch %i, []"), "parsed without error");
    assert_eq!(f("switch %i, [#2, #2]"), "parsed without error");
}

#[test]
fn pop_needs_annotation() {
    assert_eq!(
        err("func @f() -> f64 {\n#1:\n  %x = call pop()\n  return %x\n}\n"),
        "3:3: `pop` needs a type annotation `:: T` naming the tape it pops (in @f, block #1, statement 1)"
    );
}

/// A sparse dual needs a type whose f64s can take handles: none of a handle
/// (sparse mode is not nested), while a dense dual of a handle is the type
/// of forward mode over a sparse rule and parses.
#[test]
fn sparse_dual_of_a_handle() {
    assert_eq!(
        err("func @f(%x: dual<sparse, sparse>) -> f64 {\n#1:\n  return 1.0\n}\n"),
        "1:13: `dual<sparse, sparse>` needs a type without duals or sparse handles (sparse mode is not nested) (in @f)"
    );
    assert_eq!(
        err("func @f(%x: dual<sparse, 2>) -> dual<sparse, 2> {\n#1:\n  return %x\n}\n"),
        "parsed without error"
    );
}
