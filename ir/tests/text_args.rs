//! The `--args` literal syntax (SYNTAX.md §3): values typed against a
//! signature, and located errors for wrong counts, wrong types, bad literals
//! and too deep nesting.

use irad_ir::interp::value::Val;
use irad_ir::text::{parse_args, parse_module, parse_value};
use irad_ir::{Module, Scalar, Type};
use proptest::prelude::*;

fn module() -> Module {
    parse_module(
        "func @g(%x: f64) -> f64 {\n#1:\n  return %x\n}\nfunc @h(%k: i64) -> i64 {\n#1:\n  return %k\n}\n",
    )
    .expect("parses")
}

fn show(vals: &[Val], m: &Module) -> String {
    let parts: Vec<String> = vals.iter().map(|v| v.display(m)).collect();
    parts.join(", ")
}

fn err(src: &str, params: &[Type]) -> String {
    match parse_args(src, params, &module()) {
        Ok(v) => format!("ok: {}", show(&v, &module())),
        Err(e) => format!("{}: {}", e.loc.pos.map_or("?".into(), |p| p.to_string()), e),
    }
}

fn f64_fn() -> Type {
    Type::func(vec![Type::F64], Type::F64)
}

#[test]
fn reads_every_kind_of_value() {
    let m = module();
    let params = [
        Type::F64,
        Type::Array(Scalar::F64),
        Type::I64,
        Type::tuple(vec![Type::F64, Type::I64]),
        Type::Bool,
        Type::Unit,
        f64_fn(),
        f64_fn(),
        Type::Array(Scalar::I64),
        Type::tuple(vec![Type::Bool]),
    ];
    let vals = parse_args(
        "-0.8, [1.0, -2.5e-3, inf, -inf, nan, 3], 10, (1.0, -2), true, (), @g, @sin, [], (false,)",
        &params,
        &m,
    )
    .expect("parses");
    assert_eq!(
        show(&vals, &m),
        "-0.8, [1.0, -0.0025, inf, -inf, nan, 3.0], 10, (1.0, -2), true, (), @g, @sin, [], (false,)"
    );
    assert!(parse_args("", &[], &m).expect("empty").is_empty());
    let v = parse_value("-9223372036854775808", &Type::I64, &m).expect("min");
    assert!(v.same(&Val::I64(i64::MIN)));
    let v = parse_value("-0.0", &Type::F64, &m).expect("-0");
    assert!(v.same(&Val::F64(-0.0)));
}

#[test]
fn wrong_count() {
    assert_eq!(
        err("1.0, 2.0", &[Type::F64]),
        "1:6: expected 1 argument, found more"
    );
    assert_eq!(
        err("1.0", &[Type::F64, Type::I64]),
        "1:4: expected 2 arguments, found 1"
    );
    assert_eq!(
        err("", &[Type::F64]),
        "1:1: expected 1 argument, found no value"
    );
}

#[test]
fn wrong_type() {
    assert_eq!(err("1.5", &[Type::I64]), "1:1: expected i64, found `1.5`");
    assert_eq!(
        err("1.0, [1.0, true]", &[Type::F64, Type::Array(Scalar::F64)]),
        "1:12: expected f64, found `true`"
    );
    assert_eq!(
        err("@h", &[f64_fn()]),
        "1:1: expected fn(f64) -> f64, found @h of type fn(i64) -> i64"
    );
    assert_eq!(
        err("@lt", &[f64_fn()]),
        "1:1: primitive `lt` is overloaded and cannot be used as a value"
    );
    assert_eq!(
        err(
            "(1.0, 2)",
            &[Type::tuple(vec![Type::F64, Type::F64, Type::F64])]
        ),
        "1:8: expected `,` (a tuple of type (f64, f64, f64)), found `)`"
    );
}

#[test]
fn integers_where_f64_is_expected() {
    let m = module();
    let v = parse_value("9007199254740992", &Type::F64, &m).expect("2^53");
    assert!(v.same(&Val::F64(9007199254740992.0)));
    assert_eq!(
        err("9007199254740993", &[Type::F64]),
        "1:1: expected f64, found 9007199254740993, which f64 cannot hold exactly"
    );
}

#[test]
fn bad_literals() {
    assert_eq!(
        err("99999999999999999999", &[Type::I64]),
        "1:1: integer literal 99999999999999999999 out of range for i64"
    );
    assert_eq!(err("1.0 $", &[Type::F64]), "1:5: unexpected character `$`");
    assert_eq!(err("-nan", &[Type::F64]), "1:2: expected f64, found `nan`");
}

#[test]
fn nesting_limit() {
    // A 100 000-deep nested array literal is a located error, not a stack overflow.
    let deep = "[".repeat(100_000);
    assert_eq!(
        err(&deep, &[Type::Array(Scalar::F64)]),
        "1:2: expected f64, found `[`"
    );
    // Deep tuples (through a type deeper than the text limit allows) stop at the limit.
    let mut ty = Type::F64;
    for _ in 0..300 {
        ty = Type::tuple(vec![ty]);
    }
    let text = "(".repeat(300);
    assert_eq!(
        err(&text, &[ty]),
        "1:257: value nested deeper than 256 levels"
    );
}

proptest! {
    #[test]
    fn garbage_args_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let text = String::from_utf8_lossy(&bytes);
        let params = [Type::F64, Type::Array(Scalar::F64), Type::tuple(vec![Type::I64, Type::Bool]), f64_fn()];
        let _ = parse_args(&text, &params, &module());
    }
}
