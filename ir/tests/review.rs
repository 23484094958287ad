//! Regressions found in review: inputs that made the IR crate hang, run out of
//! memory or break its own invariants. Each test asserts today's intended
//! behaviour, not just "no panic".

use irad_ir::text::parse_module;
use irad_ir::{FuncBuilder, Module, Operand, Prim, Type};
use std::time::{Duration, Instant};

/// A function whose statements `%t1 = call tuple(%t0, %t0)`, ... double the
/// size of the inferred tuple type `n` times.
fn doubling_tuples(n: usize) -> String {
    let mut text = String::from("func @f(%x: f64) -> f64 {\n#1:\n  %t0 = call tuple(%x, %x)\n");
    for i in 1..n {
        text.push_str(&format!("  %t{i} = call tuple(%t{}, %t{})\n", i - 1, i - 1));
    }
    text.push_str("  return %x\n}\n");
    text
}

/// A function whose statements `%t1 = call tuple(%t0)`, ... nest the inferred
/// tuple type one level deeper each, `n` times.
fn nesting_tuples(n: usize) -> String {
    let mut text = String::from("func @f(%x: f64) -> f64 {\n#1:\n  %t0 = call tuple(%x)\n");
    for i in 1..n {
        text.push_str(&format!("  %t{i} = call tuple(%t{})\n", i - 1));
    }
    text.push_str("  return %x\n}\n");
    text
}

#[test]
fn inferred_tuple_types_cannot_grow_exponentially() {
    // Before the fix, 40 lines asked for a type of 2^41 nodes: the parser ran
    // out of memory and aborted.
    let start = Instant::now();
    let err = parse_module(&doubling_tuples(40)).map(|_| ()).unwrap_err();
    assert!(
        err.msg.starts_with("cannot infer the type of %t"),
        "{}",
        err.msg
    );
    assert!(err.msg.contains("tuple type has more than"), "{}", err.msg);
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn inferred_tuple_types_cannot_nest_past_the_limit() {
    // Before the fix, a long chain took quadratic time (each statement cloned a
    // type as deep as the chain) and built types far deeper than MAX_NESTING.
    let start = Instant::now();
    let err = parse_module(&nesting_tuples(20_000))
        .map(|_| ())
        .unwrap_err();
    assert_eq!(
        err.msg,
        "cannot infer the type of %t255: tuple type nested deeper than 256 levels"
    );
    assert_eq!(err.loc.stmt, Some(256));
    assert!(start.elapsed() < Duration::from_secs(5));
    // Up to the limit it parses.
    assert!(parse_module(&nesting_tuples(255)).is_ok());
}

#[test]
fn the_builder_refuses_tuples_past_the_nesting_limit() {
    let mut m = Module::new();
    let f = m
        .declare_func("f", vec![(None, Type::F64)], Type::F64)
        .unwrap();
    let mut b = FuncBuilder::new(&mut m, f).unwrap();
    let entry = b.create_block();
    b.switch_to_block(entry).unwrap();
    let mut prev = Operand::Value(b.param(0).unwrap());
    let mut made = 0;
    let mut refused = None;
    for _ in 0..1000 {
        match b.prim(Prim::Tuple, &[prev]) {
            Ok(Some(v)) => {
                prev = Operand::Value(v);
                made += 1;
            }
            other => {
                refused = Some(other);
                break;
            }
        }
    }
    assert_eq!(made, 255, "the 256th nested tuple is at the limit");
    let Some(Err(e)) = refused else {
        panic!("expected an error, got {refused:?}")
    };
    assert_eq!(e.to_string(), "tuple type nested deeper than 256 levels");
}

#[test]
fn fresh_labels_never_repeat_a_label() {
    let mut m = Module::new();
    let f = m.declare_func("f", vec![], Type::F64).unwrap();
    let mut b = FuncBuilder::new(&mut m, f).unwrap();
    b.create_block_labeled(u32::MAX).unwrap();
    let fresh = b.create_block();
    let labels: Vec<u32> = b
        .func()
        .layout
        .iter()
        .map(|&x| b.func().blocks[x].label)
        .collect();
    assert_ne!(b.func().blocks[fresh].label, u32::MAX, "{labels:?}");
}

/// A bad character in a body that calls a function defined later: the header
/// pass skips the character, so `@g` is known and the `$` is what is reported.
#[test]
fn a_lexical_error_after_a_forward_reference_is_reported_as_itself() {
    let text = "func @f() -> f64 {\n#1:\n  %r = invoke @g()\n  return $\n}\n\
                func @g() -> f64 {\n#1:\n  return 1.0\n}\n";
    let err = parse_module(text).map(|_| ()).unwrap_err();
    assert_eq!(err.msg, "unexpected character `$`");
    assert_eq!(err.loc.pos.map(|p| (p.line, p.col)), Some((4, 10)));
    assert_eq!(err.loc.block, Some(1));
    // Between functions, a bad character is reported where it is.
    let text =
        "func @f() -> f64 {\n#1:\n  return 1.0\n} $\nfunc @g() -> f64 {\n#1:\n  return 1.0\n}\n";
    let err = parse_module(text).map(|_| ()).unwrap_err();
    assert_eq!(err.msg, "unexpected character `$`");
    assert_eq!(err.loc.pos.map(|p| (p.line, p.col)), Some((4, 3)));
    // Two bad characters: the first in the text is reported.
    let text = "func @f() -> f64 {\n#1:\n  return ~\n}\nfunc @g() -> f64 {\n#1:\n  return $\n}\n";
    let err = parse_module(text).map(|_| ()).unwrap_err();
    assert_eq!(err.msg, "unexpected character `~`");
}

/// Renaming keeps names printable: the printer writes `@name` as is.
#[test]
fn rename_refuses_names_that_would_not_parse_back() {
    let mut m = irad_ir::Module::new();
    let f = m
        .declare_func("f", vec![], irad_ir::Type::F64)
        .expect("fresh name");
    assert_eq!(
        m.rename(f, "a b"),
        Err(irad_ir::BuildError::BadName("a b".to_string()))
    );
    assert_eq!(m.rename(f, "g.rev"), Ok(()));
    assert_eq!(m.by_name("g.rev"), Some(f));
    assert_eq!(m.by_name("f"), None);
}
