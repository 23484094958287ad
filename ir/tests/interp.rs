//! Tests of the reference interpreter (`irad_ir::interp`): the value of every
//! primitive including its edge cases, every run-time error with its exact
//! message and location, control flow (phis, loops, early return), calls
//! (recursion, mutual recursion, function values, depth limits), tuples and
//! arrays, argument checking, robustness on unverified modules, and speed;
//! the reverse-mode extension (switch, tapes, reverse rules from a provider,
//! the counters).
//!
//! IR is built with the builder, except in the reverse-mode tests, which read
//! IR text for brevity.

use irad_ir::interp::{self, RuleProviderError, RunError, RunOptions, Val};
use irad_ir::{
    Block, Const, FuncBuilder, FuncId, FuncRef, InstKind, Lanes, Module, Operand, Pos, Prim,
    Scalar, Terminator, Type, Value,
};

// ---------------------------------------------------------------- helpers

type R<T> = Result<T, Box<dyn std::error::Error>>;

/// The IR type of a test value (scalars, arrays and tuples of them).
fn ty_of(v: &Val) -> Type {
    match v {
        Val::F64(_) => Type::F64,
        Val::I64(_) => Type::I64,
        Val::Bool(_) => Type::Bool,
        Val::Unit => Type::Unit,
        Val::Tuple(elems) => Type::tuple(elems.iter().map(ty_of).collect()),
        Val::Array(a) => match &*a.0.borrow() {
            interp::ArrayData::F64(_) => Type::Array(Scalar::F64),
            interp::ArrayData::I64(_) => Type::Array(Scalar::I64),
            interp::ArrayData::Bool(_) => Type::Array(Scalar::Bool),
            interp::ArrayData::Sparse(_) => Type::Array(Scalar::Sparse),
        },
        Val::Func(_) | Val::Dual(_) | Val::Sparse(_) => {
            panic!("test helper types only plain data values")
        }
    }
}

/// Runs `prim` on `args`, passed as parameters of a one-statement function.
fn prim(p: Prim, args: &[Val]) -> Result<Val, RunError> {
    let mut m = Module::new();
    let params = args.iter().map(|a| (None, ty_of(a))).collect();
    let types: Vec<Type> = args.iter().map(ty_of).collect();
    let ret = p.result_type(&types, None, None).expect("well-typed test");
    let f = m.declare_func("t", params, ret).unwrap();
    let mut b = FuncBuilder::new(&mut m, f).unwrap();
    let entry = b.create_block();
    b.switch_to_block(entry).unwrap();
    let ops: Vec<Operand> = (0..args.len())
        .map(|i| b.param(i).unwrap().into())
        .collect();
    let res = b.prim(p, &ops).unwrap();
    b.ret(res.map_or(Operand::Const(Const::Unit), Operand::Value))
        .unwrap();
    interp::run(&m, f, args, &RunOptions::default())
}

fn fv(x: f64) -> Val {
    Val::F64(x)
}
fn iv(x: i64) -> Val {
    Val::I64(x)
}
fn bv(x: bool) -> Val {
    Val::Bool(x)
}

/// Asserts an f64 result equal to `want` bit for bit (any NaN matches any NaN).
#[track_caller]
fn assert_f64(got: Result<Val, RunError>, want: f64) {
    match got {
        Ok(Val::F64(x)) => assert!(
            (x.is_nan() && want.is_nan()) || x.to_bits() == want.to_bits(),
            "got {x:?}, want {want:?}"
        ),
        other => panic!("got {other:?}, want {want:?}"),
    }
}

#[track_caller]
fn assert_i64(got: Result<Val, RunError>, want: i64) {
    match got {
        Ok(Val::I64(x)) => assert_eq!(x, want),
        other => panic!("got {other:?}, want {want}"),
    }
}

#[track_caller]
fn assert_bool(got: Result<Val, RunError>, want: bool) {
    match got {
        Ok(Val::Bool(x)) => assert_eq!(x, want),
        other => panic!("got {other:?}, want {want}"),
    }
}

#[track_caller]
fn assert_err(got: Result<Val, RunError>, msg: &str) -> RunError {
    match got {
        Err(e) => {
            assert_eq!(e.msg, msg);
            e
        }
        Ok(v) => panic!("got {v:?}, want error {msg:?}"),
    }
}

fn f64_array(xs: &[f64]) -> Val {
    Val::f64_array(xs.to_vec())
}

fn f64_elems(v: &Val) -> Vec<f64> {
    match v {
        Val::Array(a) => match &*a.0.borrow() {
            interp::ArrayData::F64(xs) => xs.clone(),
            other => panic!("not an f64 array: {other:?}"),
        },
        other => panic!("not an array: {other:?}"),
    }
}

fn prim_op(b: &mut FuncBuilder, p: Prim, args: &[Operand]) -> R<Value> {
    Ok(b.prim(p, args)?.ok_or("unit result")?)
}

// ---------------------------------------------------------------- f64 arithmetic

#[test]
fn f64_arithmetic_is_plain_ieee() {
    assert_f64(prim(Prim::Add, &[fv(1.5), fv(2.25)]), 3.75);
    assert_f64(prim(Prim::Add, &[fv(-0.0), fv(-0.0)]), -0.0);
    assert_f64(prim(Prim::Add, &[fv(-0.0), fv(0.0)]), 0.0);
    assert_f64(
        prim(Prim::Add, &[fv(f64::INFINITY), fv(-f64::INFINITY)]),
        f64::NAN,
    );
    assert_f64(prim(Prim::Add, &[fv(0.1), fv(0.2)]), 0.1 + 0.2);
    assert_f64(prim(Prim::Sub, &[fv(1.0), fv(3.5)]), -2.5);
    assert_f64(prim(Prim::Sub, &[fv(0.0), fv(0.0)]), 0.0);
    assert_f64(prim(Prim::Mul, &[fv(-2.0), fv(0.0)]), -0.0);
    assert_f64(prim(Prim::Mul, &[fv(1e200), fv(1e200)]), f64::INFINITY);
    assert_f64(prim(Prim::Mul, &[fv(0.0), fv(f64::INFINITY)]), f64::NAN);
    assert_f64(prim(Prim::Div, &[fv(1.0), fv(0.0)]), f64::INFINITY);
    assert_f64(prim(Prim::Div, &[fv(1.0), fv(-0.0)]), f64::NEG_INFINITY);
    assert_f64(prim(Prim::Div, &[fv(0.0), fv(0.0)]), f64::NAN);
    assert_f64(prim(Prim::Div, &[fv(1.0), fv(3.0)]), 1.0 / 3.0);
    assert_f64(prim(Prim::Neg, &[fv(0.0)]), -0.0);
    assert_f64(prim(Prim::Neg, &[fv(-0.0)]), 0.0);
    assert_f64(prim(Prim::Neg, &[fv(f64::INFINITY)]), f64::NEG_INFINITY);
    assert_f64(prim(Prim::Neg, &[fv(f64::NAN)]), f64::NAN);
}

#[test]
fn pow_and_powi_are_irads_pow() {
    for (x, y) in [
        (2.0, 10.0),
        (2.0, 0.5),
        (-8.0, 1.0 / 3.0),
        (0.0, -1.0),
        (1.1, 1e5),
    ] {
        assert_f64(
            prim(Prim::Pow, &[fv(x), fv(y)]),
            irad_kernels::math::pow(x, y),
        );
    }
    assert_f64(prim(Prim::Pow, &[fv(f64::NAN), fv(0.0)]), 1.0);
    assert_f64(prim(Prim::Pow, &[fv(1.0), fv(f64::NAN)]), 1.0);
    assert_f64(prim(Prim::Pow, &[fv(-1.0), fv(0.5)]), f64::NAN);
    assert_f64(prim(Prim::Pow, &[fv(-0.0), fv(-1.0)]), f64::NEG_INFINITY);
    assert_f64(prim(Prim::Powi, &[fv(2.0), iv(-2)]), 0.25);
    assert_f64(prim(Prim::Powi, &[fv(-3.0), iv(3)]), -27.0);
    assert_f64(prim(Prim::Powi, &[fv(f64::NAN), iv(0)]), 1.0);
    for (x, n) in [
        (1.0000001, 1_000_000),
        (0.7, 37),
        (-1.3, i64::MAX),
        (2.0, i64::MIN),
    ] {
        assert_f64(
            prim(Prim::Powi, &[fv(x), iv(n)]),
            irad_kernels::math::pow(x, n as f64),
        );
    }
}

#[test]
fn abs_and_copysign() {
    assert_f64(prim(Prim::Abs, &[fv(-2.5)]), 2.5);
    assert_f64(prim(Prim::Abs, &[fv(-0.0)]), 0.0);
    assert_f64(prim(Prim::Abs, &[fv(f64::NEG_INFINITY)]), f64::INFINITY);
    assert_f64(prim(Prim::Abs, &[fv(f64::NAN)]), f64::NAN);
    assert_f64(prim(Prim::Copysign, &[fv(3.0), fv(-0.0)]), -3.0);
    assert_f64(prim(Prim::Copysign, &[fv(-3.0), fv(0.0)]), 3.0);
    assert_f64(prim(Prim::Copysign, &[fv(0.0), fv(-1.0)]), -0.0);
    assert_f64(
        prim(Prim::Copysign, &[fv(f64::INFINITY), fv(-2.0)]),
        f64::NEG_INFINITY,
    );
}

#[test]
fn min_max_propagate_nan_and_order_signed_zeros() {
    let nan = f64::NAN;
    for (p, x, y, want) in [
        (Prim::Min, 1.0, 2.0, 1.0),
        (Prim::Min, 2.0, 1.0, 1.0),
        (Prim::Min, -0.0, 0.0, -0.0),
        (Prim::Min, 0.0, -0.0, -0.0),
        (Prim::Min, 0.0, 0.0, 0.0),
        (Prim::Min, -0.0, -0.0, -0.0),
        (Prim::Min, 3.0, 3.0, 3.0),
        (Prim::Min, nan, 1.0, nan),
        (Prim::Min, 1.0, nan, nan),
        (Prim::Min, f64::NEG_INFINITY, nan, nan),
        (Prim::Min, f64::INFINITY, 5.0, 5.0),
        (Prim::Max, 1.0, 2.0, 2.0),
        (Prim::Max, 2.0, 1.0, 2.0),
        (Prim::Max, -0.0, 0.0, 0.0),
        (Prim::Max, 0.0, -0.0, 0.0),
        (Prim::Max, -0.0, -0.0, -0.0),
        (Prim::Max, nan, 1.0, nan),
        (Prim::Max, 1.0, nan, nan),
        (Prim::Max, f64::INFINITY, nan, nan),
        (Prim::Max, f64::NEG_INFINITY, -5.0, -5.0),
    ] {
        let got = prim(p, &[fv(x), fv(y)]);
        match got {
            Ok(Val::F64(r)) => assert!(
                (r.is_nan() && want.is_nan()) || r.to_bits() == want.to_bits(),
                "{p}({x:?}, {y:?}) = {r:?}, want {want:?}"
            ),
            other => panic!("{p}({x:?}, {y:?}) = {other:?}"),
        }
    }
}

// ---------------------------------------------------------------- f64 functions

#[test]
fn f64_functions_are_the_documented_ones_bit_for_bit() {
    type Reference = fn(f64) -> f64;
    let unary: &[(Prim, Reference)] = &[
        (Prim::Sqrt, libm::sqrt),
        (Prim::Exp, irad_kernels::math::exp),
        (Prim::Log, irad_kernels::math::log),
        (Prim::Log1p, libm::log1p),
        (Prim::Expm1, libm::expm1),
        (Prim::Sin, irad_kernels::math::sin),
        (Prim::Cos, irad_kernels::math::cos),
        (Prim::Tan, irad_kernels::math::tan),
        (Prim::Asin, libm::asin),
        (Prim::Acos, libm::acos),
        (Prim::Atan, libm::atan),
        (Prim::Sinh, libm::sinh),
        (Prim::Cosh, libm::cosh),
        (Prim::Tanh, irad_kernels::math::tanh),
        (Prim::Erf, libm::erf),
        (Prim::Floor, libm::floor),
        (Prim::Ceil, libm::ceil),
        (Prim::Round, libm::round),
    ];
    let xs = [
        0.0,
        -0.0,
        0.3,
        -0.7,
        1.0,
        2.5,
        -2.5,
        10.0,
        1e-300,
        1e10,
        710.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
    ];
    for &(p, reference) in unary {
        for x in xs {
            assert_f64(prim(p, &[fv(x)]), reference(x));
        }
    }
    for (y, x) in [
        (1.0, 1.0),
        (1.0, -1.0),
        (-0.0, -1.0),
        (0.0, -0.0),
        (3.0, f64::NAN),
    ] {
        assert_f64(prim(Prim::Atan2, &[fv(y), fv(x)]), libm::atan2(y, x));
    }
}

#[test]
fn f64_functions_follow_ieee_outside_their_domain() {
    assert_f64(prim(Prim::Log, &[fv(-1.0)]), f64::NAN);
    assert_f64(prim(Prim::Log, &[fv(0.0)]), f64::NEG_INFINITY);
    assert_f64(prim(Prim::Sqrt, &[fv(-1.0)]), f64::NAN);
    assert_f64(prim(Prim::Sqrt, &[fv(-0.0)]), -0.0);
    assert_f64(prim(Prim::Asin, &[fv(2.0)]), f64::NAN);
    assert_f64(prim(Prim::Log1p, &[fv(-1.0)]), f64::NEG_INFINITY);
    assert_f64(prim(Prim::Exp, &[fv(1000.0)]), f64::INFINITY);
    assert_f64(prim(Prim::Tanh, &[fv(f64::INFINITY)]), 1.0);
    assert_f64(prim(Prim::Erf, &[fv(f64::NEG_INFINITY)]), -1.0);
    assert_f64(prim(Prim::Sin, &[fv(-0.0)]), -0.0);
}

#[test]
fn rounding_functions() {
    assert_f64(prim(Prim::Round, &[fv(0.5)]), 1.0);
    assert_f64(prim(Prim::Round, &[fv(1.5)]), 2.0);
    assert_f64(prim(Prim::Round, &[fv(2.5)]), 3.0);
    assert_f64(prim(Prim::Round, &[fv(-0.5)]), -1.0);
    assert_f64(prim(Prim::Round, &[fv(-2.5)]), -3.0);
    assert_f64(prim(Prim::Round, &[fv(-0.4)]), -0.0);
    assert_f64(prim(Prim::Round, &[fv(0.49999999999999994)]), 0.0);
    assert_f64(prim(Prim::Floor, &[fv(-0.5)]), -1.0);
    assert_f64(prim(Prim::Floor, &[fv(-0.0)]), -0.0);
    assert_f64(prim(Prim::Floor, &[fv(2.9)]), 2.0);
    assert_f64(prim(Prim::Ceil, &[fv(-0.5)]), -0.0);
    assert_f64(prim(Prim::Ceil, &[fv(2.1)]), 3.0);
    assert_f64(prim(Prim::Ceil, &[fv(f64::INFINITY)]), f64::INFINITY);
    assert_f64(prim(Prim::Round, &[fv(f64::NAN)]), f64::NAN);
}

// ---------------------------------------------------------------- comparisons

#[test]
fn f64_comparisons_are_ieee() {
    let nan = f64::NAN;
    let cases = [
        (1.0, 2.0, [true, true, false, false, false, true]),
        (2.0, 2.0, [false, true, false, true, true, false]),
        (3.0, 2.0, [false, false, true, true, false, true]),
        (-0.0, 0.0, [false, true, false, true, true, false]),
        (nan, 1.0, [false, false, false, false, false, true]),
        (1.0, nan, [false, false, false, false, false, true]),
        (nan, nan, [false, false, false, false, false, true]),
        (
            f64::NEG_INFINITY,
            f64::INFINITY,
            [true, true, false, false, false, true],
        ),
    ];
    let prims = [Prim::Lt, Prim::Le, Prim::Gt, Prim::Ge, Prim::Eq, Prim::Ne];
    for (x, y, wants) in cases {
        for (p, want) in prims.iter().zip(wants) {
            assert_bool(prim(*p, &[fv(x), fv(y)]), want);
        }
    }
}

#[test]
fn i64_and_bool_comparisons() {
    let prims = [Prim::Lt, Prim::Le, Prim::Gt, Prim::Ge, Prim::Eq, Prim::Ne];
    for (x, y, wants) in [
        (1, 2, [true, true, false, false, false, true]),
        (2, 2, [false, true, false, true, true, false]),
        (i64::MAX, i64::MIN, [false, false, true, true, false, true]),
    ] {
        for (p, want) in prims.iter().zip(wants) {
            assert_bool(prim(*p, &[iv(x), iv(y)]), want);
        }
    }
    assert_bool(prim(Prim::Eq, &[bv(true), bv(true)]), true);
    assert_bool(prim(Prim::Eq, &[bv(true), bv(false)]), false);
    assert_bool(prim(Prim::Ne, &[bv(false), bv(true)]), true);
    assert_bool(prim(Prim::Ne, &[bv(false), bv(false)]), false);
}

#[test]
fn select_returns_one_operand() {
    assert_f64(prim(Prim::Select, &[bv(true), fv(1.0), fv(2.0)]), 1.0);
    assert_f64(prim(Prim::Select, &[bv(false), fv(1.0), fv(-0.0)]), -0.0);
    assert_i64(prim(Prim::Select, &[bv(false), iv(1), iv(2)]), 2);
    let arr = f64_array(&[1.0]);
    let got = prim(Prim::Select, &[bv(true), arr.clone(), f64_array(&[2.0])]).unwrap();
    assert!(got.same(&arr));
}

// ---------------------------------------------------------------- i64 and bool

#[test]
fn i64_arithmetic_wraps_and_truncates() {
    assert_i64(prim(Prim::Iadd, &[iv(2), iv(3)]), 5);
    assert_i64(prim(Prim::Iadd, &[iv(i64::MAX), iv(1)]), i64::MIN);
    assert_i64(prim(Prim::Isub, &[iv(i64::MIN), iv(1)]), i64::MAX);
    assert_i64(prim(Prim::Isub, &[iv(3), iv(10)]), -7);
    assert_i64(prim(Prim::Imul, &[iv(-4), iv(6)]), -24);
    assert_i64(prim(Prim::Imul, &[iv(i64::MAX), iv(2)]), -2);
    assert_i64(prim(Prim::Ineg, &[iv(5)]), -5);
    assert_i64(prim(Prim::Ineg, &[iv(i64::MIN)]), i64::MIN);
    assert_i64(prim(Prim::Idiv, &[iv(7), iv(2)]), 3);
    assert_i64(prim(Prim::Idiv, &[iv(-7), iv(2)]), -3);
    assert_i64(prim(Prim::Idiv, &[iv(7), iv(-2)]), -3);
    assert_i64(prim(Prim::Idiv, &[iv(i64::MIN), iv(1)]), i64::MIN);
    assert_i64(prim(Prim::Irem, &[iv(7), iv(2)]), 1);
    assert_i64(prim(Prim::Irem, &[iv(-7), iv(2)]), -1);
    assert_i64(prim(Prim::Irem, &[iv(7), iv(-2)]), 1);
    assert_i64(prim(Prim::Irem, &[iv(i64::MIN), iv(-1)]), 0);
    assert_i64(prim(Prim::Irem, &[iv(i64::MIN), iv(3)]), i64::MIN % 3);
}

#[test]
fn i64_division_errors() {
    assert_err(prim(Prim::Idiv, &[iv(1), iv(0)]), "division by zero");
    assert_err(prim(Prim::Irem, &[iv(1), iv(0)]), "remainder by zero");
    assert_err(
        prim(Prim::Idiv, &[iv(i64::MIN), iv(-1)]),
        "integer overflow in idiv",
    );
}

#[test]
fn bool_operations() {
    for x in [false, true] {
        assert_bool(prim(Prim::Not, &[bv(x)]), !x);
        for y in [false, true] {
            assert_bool(prim(Prim::And, &[bv(x), bv(y)]), x && y);
            assert_bool(prim(Prim::Or, &[bv(x), bv(y)]), x || y);
        }
    }
}

// ---------------------------------------------------------------- conversions

#[test]
fn sitofp_rounds_like_as() {
    assert_f64(prim(Prim::Sitofp, &[iv(-3)]), -3.0);
    assert_f64(
        prim(Prim::Sitofp, &[iv(i64::MAX)]),
        9_223_372_036_854_775_808.0,
    );
    assert_f64(
        prim(Prim::Sitofp, &[iv(i64::MIN)]),
        -9_223_372_036_854_775_808.0,
    );
    let big = (1i64 << 53) + 1;
    assert_f64(prim(Prim::Sitofp, &[iv(big)]), big as f64);
}

#[test]
fn fptosi_truncates_and_checks_range() {
    assert_i64(prim(Prim::Fptosi, &[fv(2.9)]), 2);
    assert_i64(prim(Prim::Fptosi, &[fv(-2.9)]), -2);
    assert_i64(prim(Prim::Fptosi, &[fv(-0.0)]), 0);
    assert_i64(
        prim(Prim::Fptosi, &[fv(-9_223_372_036_854_775_808.0)]),
        i64::MIN,
    );
    let below = f64::from_bits(9_223_372_036_854_775_808.0f64.to_bits() - 1);
    assert_i64(prim(Prim::Fptosi, &[fv(below)]), below as i64);
    assert_err(
        prim(Prim::Fptosi, &[fv(9_223_372_036_854_775_808.0)]),
        "fptosi of 9.223372036854776e18 is out of the i64 range",
    );
    let e = prim(Prim::Fptosi, &[fv(1e19)]).unwrap_err();
    assert!(e.msg.starts_with("fptosi of ") && e.msg.ends_with(" is out of the i64 range"));
    let below_min = f64::from_bits((-9_223_372_036_854_775_808.0f64).to_bits() + 1);
    assert!(prim(Prim::Fptosi, &[fv(below_min)]).is_err());
    assert_err(
        prim(Prim::Fptosi, &[fv(f64::NAN)]),
        "fptosi of nan is out of the i64 range",
    );
    assert_err(
        prim(Prim::Fptosi, &[fv(f64::INFINITY)]),
        "fptosi of inf is out of the i64 range",
    );
    assert_err(
        prim(Prim::Fptosi, &[fv(f64::NEG_INFINITY)]),
        "fptosi of -inf is out of the i64 range",
    );
}

// ---------------------------------------------------------------- tuples

#[test]
fn tuples_build_and_project() -> R<()> {
    let mut m = Module::new();
    let pair = Type::tuple(vec![Type::F64, Type::I64]);
    let f = m.declare_func(
        "t",
        vec![(None, Type::F64), (None, Type::I64)],
        Type::tuple(vec![Type::I64, pair.clone(), Type::F64]),
    )?;
    let mut b = FuncBuilder::new(&mut m, f)?;
    let entry = b.create_block();
    b.switch_to_block(entry)?;
    let (x, n) = (b.param(0)?, b.param(1)?);
    let t = prim_op(&mut b, Prim::Tuple, &[x.into(), n.into()])?;
    let t0 = prim_op(&mut b, Prim::Getfield, &[t.into(), 0i64.into()])?;
    let t1 = prim_op(&mut b, Prim::Getfield, &[t.into(), 1i64.into()])?;
    let unit = b.prim(Prim::Tuple, &[])?;
    assert!(unit.is_none(), "the empty tuple is () and has no value");
    let out = prim_op(&mut b, Prim::Tuple, &[t1.into(), t.into(), t0.into()])?;
    b.ret(out.into())?;
    let got = interp::run(&m, f, &[fv(-0.0), iv(7)], &RunOptions::default())?;
    let want = Val::Tuple(vec![iv(7), Val::Tuple(vec![fv(-0.0), iv(7)].into()), fv(-0.0)].into());
    assert!(got.same(&want), "{got:?}");
    assert_eq!(got.display(&m), "(7, (-0.0, 7), -0.0)");
    Ok(())
}

#[test]
fn tuple_arguments_are_type_checked() -> R<()> {
    let mut m = Module::new();
    let pair = Type::tuple(vec![Type::F64, Type::I64]);
    let f = m.declare_func("t", vec![(None, pair)], Type::I64)?;
    let mut b = FuncBuilder::new(&mut m, f)?;
    let entry = b.create_block();
    b.switch_to_block(entry)?;
    let p = b.param(0)?;
    let k = prim_op(&mut b, Prim::Getfield, &[p.into(), 1i64.into()])?;
    b.ret(k.into())?;
    let good = Val::Tuple(vec![fv(1.0), iv(2)].into());
    assert_i64(interp::run(&m, f, &[good], &RunOptions::default()), 2);
    let bad = Val::Tuple(vec![fv(1.0), fv(2.0)].into());
    assert_err(
        interp::run(&m, f, &[bad], &RunOptions::default()),
        "argument 1 of @t must be (f64, i64), found (f64, f64)",
    );
    Ok(())
}

// ---------------------------------------------------------------- arrays

#[test]
fn alloc_fills_with_zero_of_the_element_type() -> R<()> {
    for (elem, want) in [
        (Scalar::F64, "[0.0, 0.0, 0.0]"),
        (Scalar::I64, "[0, 0, 0]"),
        (Scalar::Bool, "[false, false, false]"),
    ] {
        let mut m = Module::new();
        let f = m.declare_func("t", vec![(None, Type::I64)], Type::Array(elem))?;
        let mut b = FuncBuilder::new(&mut m, f)?;
        let entry = b.create_block();
        b.switch_to_block(entry)?;
        let n = b.param(0)?;
        let a = b.alloc(elem, n.into())?;
        b.ret(a.into())?;
        let got = interp::run(&m, f, &[iv(3)], &RunOptions::default())?;
        assert_eq!(got.display(&m), want);
        let empty = interp::run(&m, f, &[iv(0)], &RunOptions::default())?;
        assert_eq!(empty.display(&m), "[]");
    }
    Ok(())
}

#[test]
fn array_primitives() -> R<()> {
    // a = zeros(n); a[1] = x; c = copy(a); c[0] = 5; return (length(a), a[1], c, a)
    let mut m = Module::new();
    let arr = Type::Array(Scalar::F64);
    let ret = Type::tuple(vec![Type::I64, Type::F64, arr.clone(), arr.clone()]);
    let f = m.declare_func("t", vec![(None, Type::I64), (None, Type::F64)], ret)?;
    let mut b = FuncBuilder::new(&mut m, f)?;
    let entry = b.create_block();
    b.switch_to_block(entry)?;
    let (n, x) = (b.param(0)?, b.param(1)?);
    let a = prim_op(&mut b, Prim::Zeros, &[n.into()])?;
    assert!(
        b.prim(Prim::Arrayset, &[a.into(), 1i64.into(), x.into()])?
            .is_none()
    );
    let c = prim_op(&mut b, Prim::Copy, &[a.into()])?;
    b.prim(Prim::Arrayset, &[c.into(), 0i64.into(), 5.0.into()])?;
    let len = prim_op(&mut b, Prim::Length, &[a.into()])?;
    let a1 = prim_op(&mut b, Prim::Arrayref, &[a.into(), 1i64.into()])?;
    let out = prim_op(
        &mut b,
        Prim::Tuple,
        &[len.into(), a1.into(), c.into(), a.into()],
    )?;
    b.ret(out.into())?;
    let got = interp::run(&m, f, &[iv(3), fv(2.5)], &RunOptions::default())?;
    assert_eq!(
        got.display(&m),
        "(3, 2.5, [5.0, 2.5, 0.0], [0.0, 2.5, 0.0])"
    );
    Ok(())
}

#[test]
fn i64_and_bool_arrays_read_and_write() -> R<()> {
    let got = prim(Prim::Arrayref, &[Val::Array(i64_arr(&[4, 5, 6])), iv(2)]);
    assert_i64(got, 6);
    let arr = Val::Array(interp::ArrayRef::new(interp::ArrayData::Bool(vec![
        false, false,
    ])));
    assert!(matches!(
        prim(Prim::Arrayset, &[arr.clone(), iv(1), bv(true)]),
        Ok(Val::Unit)
    ));
    let mut m = Module::new();
    m.declare_func("unused", vec![], Type::Unit)?;
    assert_eq!(arr.display(&m), "[false, true]");
    Ok(())
}

fn i64_arr(xs: &[i64]) -> interp::ArrayRef {
    interp::ArrayRef::new(interp::ArrayData::I64(xs.to_vec()))
}

#[test]
fn array_errors() {
    let three = || f64_array(&[1.0, 2.0, 3.0]);
    assert_err(
        prim(Prim::Arrayref, &[three(), iv(5)]),
        "index 5 out of bounds for array of length 3",
    );
    assert_err(
        prim(Prim::Arrayref, &[three(), iv(3)]),
        "index 3 out of bounds for array of length 3",
    );
    assert_err(
        prim(Prim::Arrayref, &[three(), iv(-1)]),
        "index -1 out of bounds for array of length 3",
    );
    assert_err(
        prim(Prim::Arrayset, &[three(), iv(i64::MIN), fv(0.0)]),
        "index -9223372036854775808 out of bounds for array of length 3",
    );
    assert_err(
        prim(Prim::Arrayref, &[f64_array(&[]), iv(0)]),
        "index 0 out of bounds for array of length 0",
    );
    assert_err(prim(Prim::Zeros, &[iv(-3)]), "negative array length -3");
    assert_err(
        prim(Prim::Zeros, &[iv(i64::MAX)]),
        "array length 9223372036854775807 exceeds the limit of 268435456 elements",
    );
    assert_err(
        prim(Prim::Zeros, &[iv((1 << 28) + 1)]),
        "array length 268435457 exceeds the limit of 268435456 elements",
    );
}

#[test]
fn alloc_errors() -> R<()> {
    let mut m = Module::new();
    let f = m.declare_func("t", vec![(None, Type::I64)], Type::Array(Scalar::I64))?;
    let mut b = FuncBuilder::new(&mut m, f)?;
    let entry = b.create_block();
    b.switch_to_block(entry)?;
    let n = b.param(0)?;
    let a = b.alloc(Scalar::I64, n.into())?;
    b.ret(a.into())?;
    let run = |n| interp::run(&m, f, &[iv(n)], &RunOptions::default());
    assert_err(run(-1), "negative array length -1");
    assert_err(
        run(1 << 40),
        "array length 1099511627776 exceeds the limit of 268435456 elements",
    );
    Ok(())
}

#[test]
fn in_place_writes_are_visible_to_the_caller() -> R<()> {
    // @scale(a, s) doubles every element in place; @outer calls it on its argument.
    let mut m = Module::new();
    let arr = Type::Array(Scalar::F64);
    let scale = m.declare_func(
        "scale",
        vec![(None, arr.clone()), (None, Type::F64)],
        Type::Unit,
    )?;
    let outer = m.declare_func("outer", vec![(None, arr.clone())], Type::F64)?;
    {
        let mut b = FuncBuilder::new(&mut m, scale)?;
        let (a, s) = (b.param(0)?, b.param(1)?);
        let entry = b.create_block();
        let header = b.create_block();
        let body = b.create_block();
        let exit = b.create_block();
        b.switch_to_block(entry)?;
        let n = prim_op(&mut b, Prim::Length, &[a.into()])?;
        b.goto(header)?;
        b.switch_to_block(header)?;
        let k = b.phi(Type::I64, &[(entry, 0i64.into())])?;
        let more = prim_op(&mut b, Prim::Lt, &[k.into(), n.into()])?;
        b.gotoifnot(more.into(), exit)?;
        b.switch_to_block(body)?;
        let x = prim_op(&mut b, Prim::Arrayref, &[a.into(), k.into()])?;
        let y = prim_op(&mut b, Prim::Mul, &[x.into(), s.into()])?;
        b.prim(Prim::Arrayset, &[a.into(), k.into(), y.into()])?;
        let k1 = prim_op(&mut b, Prim::Iadd, &[k.into(), 1i64.into()])?;
        b.add_phi_entry(k, body, k1.into())?;
        b.goto(header)?;
        b.switch_to_block(exit)?;
        b.ret(Operand::Const(Const::Unit))?;
    }
    {
        let mut b = FuncBuilder::new(&mut m, outer)?;
        let a = b.param(0)?;
        let entry = b.create_block();
        b.switch_to_block(entry)?;
        b.invoke(scale, &[a.into(), 2.0.into()])?;
        let x = prim_op(&mut b, Prim::Arrayref, &[a.into(), 2i64.into()])?;
        b.ret(x.into())?;
    }
    let arg = f64_array(&[1.0, -0.5, 3.0]);
    assert_f64(
        interp::run(
            &m,
            outer,
            std::slice::from_ref(&arg),
            &RunOptions::default(),
        ),
        6.0,
    );
    assert_eq!(f64_elems(&arg), vec![2.0, -1.0, 6.0]);
    let unit = interp::run(&m, scale, &[arg.clone(), fv(0.5)], &RunOptions::default())?;
    assert!(matches!(unit, Val::Unit));
    assert_eq!(f64_elems(&arg), vec![1.0, -0.5, 3.0]);
    Ok(())
}

// ---------------------------------------------------------------- control flow

/// `@sum(n)`: the sum of 0..n with an i64 counter and an f64 accumulator.
fn sum_module() -> R<(Module, FuncId)> {
    let mut m = Module::new();
    let f = m.declare_func("sum", vec![(Some("n".into()), Type::I64)], Type::F64)?;
    let mut b = FuncBuilder::new(&mut m, f)?;
    let n = b.param(0)?;
    let entry = b.create_block();
    let header = b.create_block();
    let body = b.create_block();
    let exit = b.create_block();
    b.switch_to_block(entry)?;
    b.goto(header)?;
    b.switch_to_block(header)?;
    let k = b.phi(Type::I64, &[(entry, 0i64.into())])?;
    let acc = b.phi(Type::F64, &[(entry, 0.0.into())])?;
    let more = prim_op(&mut b, Prim::Lt, &[k.into(), n.into()])?;
    b.gotoifnot(more.into(), exit)?;
    b.switch_to_block(body)?;
    let x = prim_op(&mut b, Prim::Sitofp, &[k.into()])?;
    let acc1 = prim_op(&mut b, Prim::Add, &[acc.into(), x.into()])?;
    let k1 = prim_op(&mut b, Prim::Iadd, &[k.into(), 1i64.into()])?;
    b.add_phi_entry(k, body, k1.into())?;
    b.add_phi_entry(acc, body, acc1.into())?;
    b.goto(header)?;
    b.switch_to_block(exit)?;
    b.ret(acc.into())?;
    Ok((m, f))
}

#[test]
fn loop_with_carried_phis() -> R<()> {
    let (m, f) = sum_module()?;
    assert_f64(interp::run(&m, f, &[iv(0)], &RunOptions::default()), 0.0);
    assert_f64(interp::run(&m, f, &[iv(10)], &RunOptions::default()), 45.0);
    assert_f64(interp::run(&m, f, &[iv(-5)], &RunOptions::default()), 0.0);
    Ok(())
}

#[test]
fn phis_are_assigned_simultaneously() -> R<()> {
    // a, b = 1, 2; repeat n times: a, b = b, a; return a - b (fib-like swap).
    let mut m = Module::new();
    let f = m.declare_func("swap", vec![(None, Type::I64)], Type::F64)?;
    let mut b = FuncBuilder::new(&mut m, f)?;
    let n = b.param(0)?;
    let entry = b.create_block();
    let header = b.create_block();
    let body = b.create_block();
    let exit = b.create_block();
    b.switch_to_block(entry)?;
    b.goto(header)?;
    b.switch_to_block(header)?;
    let k = b.phi(Type::I64, &[(entry, 0i64.into())])?;
    let x = b.phi(Type::F64, &[(entry, 1.0.into())])?;
    let y = b.phi(Type::F64, &[(entry, 2.0.into())])?;
    let more = prim_op(&mut b, Prim::Lt, &[k.into(), n.into()])?;
    b.gotoifnot(more.into(), exit)?;
    b.switch_to_block(body)?;
    let k1 = prim_op(&mut b, Prim::Iadd, &[k.into(), 1i64.into()])?;
    b.add_phi_entry(k, body, k1.into())?;
    b.add_phi_entry(x, body, y.into())?;
    b.add_phi_entry(y, body, x.into())?;
    b.goto(header)?;
    b.switch_to_block(exit)?;
    let d = prim_op(&mut b, Prim::Sub, &[x.into(), y.into()])?;
    b.ret(d.into())?;
    assert_f64(interp::run(&m, f, &[iv(0)], &RunOptions::default()), -1.0);
    assert_f64(interp::run(&m, f, &[iv(1)], &RunOptions::default()), 1.0);
    assert_f64(interp::run(&m, f, &[iv(2)], &RunOptions::default()), -1.0);
    assert_f64(interp::run(&m, f, &[iv(7)], &RunOptions::default()), 1.0);
    Ok(())
}

#[test]
fn nested_loops() -> R<()> {
    // sum over i in 0..n, j in 0..i of (i * j), as i64.
    let mut m = Module::new();
    let f = m.declare_func("nest", vec![(None, Type::I64)], Type::I64)?;
    let mut b = FuncBuilder::new(&mut m, f)?;
    let n = b.param(0)?;
    let entry = b.create_block();
    let outer = b.create_block();
    let inner_pre = b.create_block();
    let inner = b.create_block();
    let inner_body = b.create_block();
    let outer_latch = b.create_block();
    let exit = b.create_block();
    b.switch_to_block(entry)?;
    b.goto(outer)?;
    b.switch_to_block(outer)?;
    let i_ = b.phi(Type::I64, &[(entry, 0i64.into())])?;
    let s = b.phi(Type::I64, &[(entry, 0i64.into())])?;
    let c = prim_op(&mut b, Prim::Lt, &[i_.into(), n.into()])?;
    b.gotoifnot(c.into(), exit)?;
    b.switch_to_block(inner_pre)?;
    b.goto(inner)?;
    b.switch_to_block(inner)?;
    let j = b.phi(Type::I64, &[(inner_pre, 0i64.into())])?;
    let t = b.phi(Type::I64, &[(inner_pre, s.into())])?;
    let c2 = prim_op(&mut b, Prim::Lt, &[j.into(), i_.into()])?;
    b.gotoifnot(c2.into(), outer_latch)?;
    b.switch_to_block(inner_body)?;
    let p = prim_op(&mut b, Prim::Imul, &[i_.into(), j.into()])?;
    let t1 = prim_op(&mut b, Prim::Iadd, &[t.into(), p.into()])?;
    let j1 = prim_op(&mut b, Prim::Iadd, &[j.into(), 1i64.into()])?;
    b.add_phi_entry(j, inner_body, j1.into())?;
    b.add_phi_entry(t, inner_body, t1.into())?;
    b.goto(inner)?;
    b.switch_to_block(outer_latch)?;
    let i1 = prim_op(&mut b, Prim::Iadd, &[i_.into(), 1i64.into()])?;
    b.add_phi_entry(i_, outer_latch, i1.into())?;
    b.add_phi_entry(s, outer_latch, t.into())?;
    b.goto(outer)?;
    b.switch_to_block(exit)?;
    b.ret(s.into())?;
    let want = |n: i64| -> i64 { (0..n).map(|i| (0..i).map(|j| i * j).sum::<i64>()).sum() };
    for n in [0, 1, 2, 5, 13] {
        assert_i64(
            interp::run(&m, f, &[iv(n)], &RunOptions::default()),
            want(n),
        );
    }
    Ok(())
}

#[test]
fn early_return() -> R<()> {
    // Returns the first index whose element is negative, or -1.
    let mut m = Module::new();
    let f = m.declare_func("find", vec![(None, Type::Array(Scalar::F64))], Type::I64)?;
    let mut b = FuncBuilder::new(&mut m, f)?;
    let a = b.param(0)?;
    let entry = b.create_block();
    let header = b.create_block();
    let body = b.create_block();
    let latch = b.create_block();
    let found = b.create_block();
    let exit = b.create_block();
    b.switch_to_block(entry)?;
    let n = prim_op(&mut b, Prim::Length, &[a.into()])?;
    b.goto(header)?;
    b.switch_to_block(header)?;
    let k = b.phi(Type::I64, &[(entry, 0i64.into())])?;
    let more = prim_op(&mut b, Prim::Lt, &[k.into(), n.into()])?;
    b.gotoifnot(more.into(), exit)?;
    b.switch_to_block(body)?;
    let x = prim_op(&mut b, Prim::Arrayref, &[a.into(), k.into()])?;
    let nonneg = prim_op(&mut b, Prim::Ge, &[x.into(), 0.0.into()])?;
    b.gotoifnot(nonneg.into(), found)?;
    b.switch_to_block(latch)?;
    let k1 = prim_op(&mut b, Prim::Iadd, &[k.into(), 1i64.into()])?;
    b.add_phi_entry(k, latch, k1.into())?;
    b.goto(header)?;
    b.switch_to_block(found)?;
    b.ret(k.into())?;
    b.switch_to_block(exit)?;
    b.ret((-1i64).into())?;
    let run = |xs: &[f64]| interp::run(&m, f, &[f64_array(xs)], &RunOptions::default());
    assert_i64(run(&[1.0, 2.0, -3.0, -4.0]), 2);
    assert_i64(run(&[1.0, 2.0]), -1);
    assert_i64(run(&[]), -1);
    Ok(())
}

// ---------------------------------------------------------------- calls

/// `@fact(n) = if n <= 1 { 1 } else { n * fact(n - 1) }` and
/// `@fib(n) = if n < 2 { n } else { fib(n - 1) + fib(n - 2) }`.
fn recursive_module() -> R<(Module, FuncId, FuncId)> {
    let mut m = Module::new();
    let fact = m.declare_func("fact", vec![(None, Type::I64)], Type::I64)?;
    let fib = m.declare_func("fib", vec![(None, Type::I64)], Type::I64)?;
    {
        let mut b = FuncBuilder::new(&mut m, fact)?;
        let n = b.param(0)?;
        let entry = b.create_block();
        let rec = b.create_block();
        let base = b.create_block();
        b.switch_to_block(entry)?;
        let small = prim_op(&mut b, Prim::Le, &[n.into(), 1i64.into()])?;
        let big = prim_op(&mut b, Prim::Not, &[small.into()])?;
        b.gotoifnot(big.into(), base)?;
        b.switch_to_block(rec)?;
        let n1 = prim_op(&mut b, Prim::Isub, &[n.into(), 1i64.into()])?;
        let r = b.invoke(fact, &[n1.into()])?.ok_or("unit")?;
        let p = prim_op(&mut b, Prim::Imul, &[n.into(), r.into()])?;
        b.ret(p.into())?;
        b.switch_to_block(base)?;
        b.ret(1i64.into())?;
    }
    {
        let mut b = FuncBuilder::new(&mut m, fib)?;
        let n = b.param(0)?;
        let entry = b.create_block();
        let rec = b.create_block();
        let base = b.create_block();
        b.switch_to_block(entry)?;
        let big = prim_op(&mut b, Prim::Ge, &[n.into(), 2i64.into()])?;
        b.gotoifnot(big.into(), base)?;
        b.switch_to_block(rec)?;
        let n1 = prim_op(&mut b, Prim::Isub, &[n.into(), 1i64.into()])?;
        let n2 = prim_op(&mut b, Prim::Isub, &[n.into(), 2i64.into()])?;
        let r1 = b.invoke(fib, &[n1.into()])?.ok_or("unit")?;
        let r2 = b.invoke(fib, &[n2.into()])?.ok_or("unit")?;
        let s = prim_op(&mut b, Prim::Iadd, &[r1.into(), r2.into()])?;
        b.ret(s.into())?;
        b.switch_to_block(base)?;
        b.ret(n.into())?;
    }
    Ok((m, fact, fib))
}

#[test]
fn recursion() -> R<()> {
    let (m, fact, fib) = recursive_module()?;
    let opts = RunOptions::default();
    assert_i64(interp::run(&m, fact, &[iv(0)], &opts), 1);
    assert_i64(interp::run(&m, fact, &[iv(10)], &opts), 3_628_800);
    assert_i64(
        interp::run(&m, fact, &[iv(20)], &opts),
        2_432_902_008_176_640_000,
    );
    // 21! wraps.
    assert_i64(
        interp::run(&m, fact, &[iv(21)], &opts),
        (1..=21i64).fold(1i64, |a, k| a.wrapping_mul(k)),
    );
    assert_i64(interp::run(&m, fib, &[iv(0)], &opts), 0);
    assert_i64(interp::run(&m, fib, &[iv(1)], &opts), 1);
    assert_i64(interp::run(&m, fib, &[iv(20)], &opts), 6765);
    // One interpreter reused across runs gives the same answers.
    let mut it = interp::Interpreter::new(&m);
    for (n, want) in [(10, 55), (15, 610), (10, 55)] {
        assert_i64(it.run(fib, &[iv(n)], &opts), want);
    }
    Ok(())
}

#[test]
fn mutual_recursion() -> R<()> {
    // @even(n) = n == 0 || odd(n - 1); @odd(n) = n != 0 && even(n - 1).
    let mut m = Module::new();
    let even = m.declare_func("even", vec![(None, Type::I64)], Type::Bool)?;
    let odd = m.declare_func("odd", vec![(None, Type::I64)], Type::Bool)?;
    for (me, other, at_zero) in [(even, odd, true), (odd, even, false)] {
        let mut b = FuncBuilder::new(&mut m, me)?;
        let n = b.param(0)?;
        let entry = b.create_block();
        let rec = b.create_block();
        let zero = b.create_block();
        b.switch_to_block(entry)?;
        let nz = prim_op(&mut b, Prim::Ne, &[n.into(), 0i64.into()])?;
        b.gotoifnot(nz.into(), zero)?;
        b.switch_to_block(rec)?;
        let n1 = prim_op(&mut b, Prim::Isub, &[n.into(), 1i64.into()])?;
        let r = b.invoke(other, &[n1.into()])?.ok_or("unit")?;
        b.ret(r.into())?;
        b.switch_to_block(zero)?;
        b.ret(at_zero.into())?;
    }
    let opts = RunOptions::default();
    for n in [0, 1, 2, 7, 1000, 5001] {
        assert_bool(interp::run(&m, even, &[iv(n)], &opts), n % 2 == 0);
        assert_bool(interp::run(&m, odd, &[iv(n)], &opts), n % 2 == 1);
    }
    Ok(())
}

#[test]
fn dynamic_calls_through_function_values() -> R<()> {
    // @apply(g, x) = g(x) * 2; @apply2(g, x, y) = g(x, y); @iapply(g, a, b) = g(a, b).
    let mut m = Module::new();
    let f1 = Type::func(vec![Type::F64], Type::F64);
    let f2 = Type::func(vec![Type::F64, Type::F64], Type::F64);
    let i2 = Type::func(vec![Type::I64, Type::I64], Type::I64);
    let apply = m.declare_func(
        "apply",
        vec![(None, f1.clone()), (None, Type::F64)],
        Type::F64,
    )?;
    let apply2 = m.declare_func(
        "apply2",
        vec![(None, f2), (None, Type::F64), (None, Type::F64)],
        Type::F64,
    )?;
    let iapply = m.declare_func(
        "iapply",
        vec![(None, i2), (None, Type::I64), (None, Type::I64)],
        Type::I64,
    )?;
    let square = m.declare_func("square", vec![(None, Type::F64)], Type::F64)?;
    let main = m.declare_func("main", vec![(None, Type::F64)], Type::F64)?;
    {
        let mut b = FuncBuilder::new(&mut m, apply)?;
        let (g, x) = (b.param(0)?, b.param(1)?);
        let entry = b.create_block();
        b.switch_to_block(entry)?;
        let y = b.call_value(g, &[x.into()])?.ok_or("unit")?;
        let z = prim_op(&mut b, Prim::Mul, &[y.into(), 2.0.into()])?;
        b.ret(z.into())?;
    }
    for fid in [apply2, iapply] {
        let mut b = FuncBuilder::new(&mut m, fid)?;
        let (g, x, y) = (b.param(0)?, b.param(1)?, b.param(2)?);
        let entry = b.create_block();
        b.switch_to_block(entry)?;
        let r = b.call_value(g, &[x.into(), y.into()])?.ok_or("unit")?;
        b.ret(r.into())?;
    }
    {
        let mut b = FuncBuilder::new(&mut m, square)?;
        let x = b.param(0)?;
        let entry = b.create_block();
        b.switch_to_block(entry)?;
        let y = prim_op(&mut b, Prim::Mul, &[x.into(), x.into()])?;
        b.ret(y.into())?;
    }
    {
        // main(x) = apply(@sin, x) + apply(@square, x)
        let mut b = FuncBuilder::new(&mut m, main)?;
        let x = b.param(0)?;
        let entry = b.create_block();
        b.switch_to_block(entry)?;
        let sin = Operand::Const(Const::Func(FuncRef::Prim(Prim::Sin)));
        let sq = Operand::Const(Const::Func(FuncRef::User(square)));
        let a = b.invoke(apply, &[sin, x.into()])?.ok_or("unit")?;
        let c = b.invoke(apply, &[sq, x.into()])?.ok_or("unit")?;
        let s = prim_op(&mut b, Prim::Add, &[a.into(), c.into()])?;
        b.ret(s.into())?;
    }
    let opts = RunOptions::default();
    let x = 0.7;
    assert_f64(
        interp::run(&m, main, &[fv(x)], &opts),
        irad_kernels::math::sin(x) * 2.0 + x * x * 2.0,
    );
    let sin = Val::Func(FuncRef::Prim(Prim::Sin));
    assert_f64(
        interp::run(&m, apply, &[sin, fv(x)], &opts),
        irad_kernels::math::sin(x) * 2.0,
    );
    let user = Val::Func(FuncRef::User(square));
    assert_f64(interp::run(&m, apply, &[user, fv(3.0)], &opts), 18.0);
    let atan2 = Val::Func(FuncRef::Prim(Prim::Atan2));
    assert_f64(
        interp::run(&m, apply2, &[atan2, fv(1.0), fv(-2.0)], &opts),
        libm::atan2(1.0, -2.0),
    );
    let iadd = Val::Func(FuncRef::Prim(Prim::Iadd));
    assert_i64(
        interp::run(&m, iapply, &[iadd, iv(i64::MAX), iv(1)], &opts),
        i64::MIN,
    );
    let idiv = Val::Func(FuncRef::Prim(Prim::Idiv));
    let e = assert_err(
        interp::run(&m, iapply, &[idiv, iv(1), iv(0)], &opts),
        "division by zero",
    );
    assert_eq!((e.loc.block, e.loc.stmt), (Some(1), Some(1)));
    // A function value of the wrong type is refused before running.
    let cos = Val::Func(FuncRef::Prim(Prim::Cos));
    assert_err(
        interp::run(&m, apply2, &[cos, fv(1.0), fv(2.0)], &opts),
        "argument 1 of @apply2 must be fn(f64, f64) -> f64, found fn(f64) -> f64",
    );
    Ok(())
}

// ---------------------------------------------------------------- call depth

/// `@depth(n) = if n <= 1 { 1 } else { depth(n - 1) + 1 }`: n active frames.
fn depth_module() -> R<(Module, FuncId)> {
    let mut m = Module::new();
    let f = m.declare_func("depth", vec![(None, Type::I64)], Type::I64)?;
    let mut b = FuncBuilder::new(&mut m, f)?;
    let n = b.param(0)?;
    let entry = b.create_block();
    let rec = b.create_block();
    let base = b.create_block();
    b.switch_to_block(entry)?;
    let big = prim_op(&mut b, Prim::Gt, &[n.into(), 1i64.into()])?;
    b.gotoifnot(big.into(), base)?;
    b.switch_to_block(rec)?;
    let n1 = prim_op(&mut b, Prim::Isub, &[n.into(), 1i64.into()])?;
    b.set_pos(Some(Pos::new(4, 9)));
    let r = b.invoke(f, &[n1.into()])?.ok_or("unit")?;
    b.set_pos(None);
    let s = prim_op(&mut b, Prim::Iadd, &[r.into(), 1i64.into()])?;
    b.ret(s.into())?;
    b.switch_to_block(base)?;
    b.ret(1i64.into())?;
    Ok((m, f))
}

#[test]
fn recursion_to_the_depth_limit() -> R<()> {
    let (m, f) = depth_module()?;
    let opts = RunOptions::default();
    assert_eq!(opts.max_depth, interp::DEFAULT_MAX_DEPTH);
    assert_eq!(interp::DEFAULT_MAX_DEPTH, 100_000);
    assert_i64(interp::run(&m, f, &[iv(10_000)], &opts), 10_000);
    assert_i64(interp::run(&m, f, &[iv(100_000)], &opts), 100_000);
    let e = assert_err(
        interp::run(&m, f, &[iv(100_001)], &opts),
        "call depth limit of 100000 exceeded",
    );
    assert_eq!(e.loc.func.as_deref(), Some("depth"));
    assert_eq!(e.loc.block, Some(2));
    assert_eq!(e.loc.stmt, Some(2));
    assert_eq!(e.loc.pos, Some(Pos::new(4, 9)));
    assert_eq!(e.call_sites(), 99_999);
    assert_eq!(e.trace.len(), 2 * interp::TRACE_KEPT);
    assert_eq!(e.trace[0], e.loc);
    assert_eq!(
        e.to_string(),
        "call depth limit of 100000 exceeded (in @depth, block #2, statement 2)"
    );
    Ok(())
}

#[test]
fn custom_depth_limit() -> R<()> {
    let (m, f) = depth_module()?;
    let opts = RunOptions {
        max_depth: 10,
        ..RunOptions::default()
    };
    assert_i64(interp::run(&m, f, &[iv(10)], &opts), 10);
    assert_err(
        interp::run(&m, f, &[iv(11)], &opts),
        "call depth limit of 10 exceeded",
    );
    let one = RunOptions {
        max_depth: 1,
        ..RunOptions::default()
    };
    assert_i64(interp::run(&m, f, &[iv(1)], &one), 1);
    assert_err(
        interp::run(&m, f, &[iv(2)], &one),
        "call depth limit of 1 exceeded",
    );
    let zero = RunOptions {
        max_depth: 0,
        ..RunOptions::default()
    };
    let e = assert_err(
        interp::run(&m, f, &[iv(1)], &zero),
        "call depth limit of 0 exceeded",
    );
    assert_eq!(e.loc.func.as_deref(), Some("depth"));
    Ok(())
}

// ---------------------------------------------------------------- errors and locations

#[test]
fn run_time_errors_are_located_with_a_call_trace() -> R<()> {
    // @inner(a, k) reads a[k] in block #2, statement 3; @outer calls it from #1, statement 2.
    let mut m = Module::new();
    let arr = Type::Array(Scalar::F64);
    let inner = m.declare_func(
        "inner",
        vec![(None, arr.clone()), (None, Type::I64)],
        Type::F64,
    )?;
    let outer = m.declare_func("outer", vec![(None, arr.clone())], Type::F64)?;
    {
        let mut b = FuncBuilder::new(&mut m, inner)?;
        let (a, k) = (b.param(0)?, b.param(1)?);
        let entry = b.create_block();
        let next = b.create_block();
        b.switch_to_block(entry)?;
        b.goto(next)?;
        b.switch_to_block(next)?;
        let k1 = prim_op(&mut b, Prim::Iadd, &[k.into(), 1i64.into()])?;
        let k2 = prim_op(&mut b, Prim::Imul, &[k1.into(), 2i64.into()])?;
        b.set_pos(Some(Pos::new(7, 3)));
        let x = prim_op(&mut b, Prim::Arrayref, &[a.into(), k2.into()])?;
        b.ret(x.into())?;
    }
    {
        let mut b = FuncBuilder::new(&mut m, outer)?;
        let a = b.param(0)?;
        let entry = b.create_block();
        b.switch_to_block(entry)?;
        let len = prim_op(&mut b, Prim::Length, &[a.into()])?;
        b.set_pos(Some(Pos::new(12, 5)));
        let r = b.invoke(inner, &[a.into(), len.into()])?.ok_or("unit")?;
        b.ret(r.into())?;
    }
    let e = assert_err(
        interp::run(&m, outer, &[f64_array(&[1.0, 2.0])], &RunOptions::default()),
        "index 6 out of bounds for array of length 2",
    );
    assert_eq!(e.loc.func.as_deref(), Some("inner"));
    assert_eq!(e.loc.block, Some(2));
    assert_eq!(e.loc.stmt, Some(3));
    assert_eq!(e.loc.pos, Some(Pos::new(7, 3)));
    assert_eq!(e.trace.len(), 1);
    assert_eq!(e.trace[0].func.as_deref(), Some("outer"));
    assert_eq!((e.trace[0].block, e.trace[0].stmt), (Some(1), Some(2)));
    assert_eq!(e.trace[0].pos, Some(Pos::new(12, 5)));
    assert_eq!(
        e.to_string(),
        "index 6 out of bounds for array of length 2 (in @inner, block #2, statement 3)"
    );
    let d: &dyn irad_ir::Diagnostic = &e;
    assert_eq!(d.message(), e.msg);
    assert_eq!(d.location(), &e.loc);
    Ok(())
}

/// A function `@t(x: i64, y: i64)` whose block #1 holds `k` harmless statements
/// and then `prim(x, y)`; checks the error's statement number.
#[test]
fn each_error_names_its_statement() -> R<()> {
    let cases: &[(Prim, Val, Val, &str)] = &[
        (Prim::Idiv, iv(3), iv(0), "division by zero"),
        (Prim::Irem, iv(3), iv(0), "remainder by zero"),
        (Prim::Idiv, iv(i64::MIN), iv(-1), "integer overflow in idiv"),
    ];
    for (p, x, y, msg) in cases {
        let mut m = Module::new();
        let f = m.declare_func("t", vec![(None, Type::I64), (None, Type::I64)], Type::I64)?;
        let mut b = FuncBuilder::new(&mut m, f)?;
        let (px, py) = (b.param(0)?, b.param(1)?);
        let entry = b.create_block();
        b.switch_to_block(entry)?;
        let z = prim_op(&mut b, Prim::Iadd, &[px.into(), 0i64.into()])?;
        b.set_pos(Some(Pos::new(3, 14)));
        let r = prim_op(&mut b, *p, &[z.into(), py.into()])?;
        b.ret(r.into())?;
        let e = assert_err(
            interp::run(&m, f, &[x.clone(), y.clone()], &RunOptions::default()),
            msg,
        );
        assert_eq!(e.loc.func.as_deref(), Some("t"));
        assert_eq!((e.loc.block, e.loc.stmt), (Some(1), Some(2)));
        assert_eq!(e.loc.pos, Some(Pos::new(3, 14)));
        assert!(e.trace.is_empty());
    }
    Ok(())
}

#[test]
fn fptosi_and_alloc_errors_are_located() -> R<()> {
    let mut m = Module::new();
    let f = m.declare_func("t", vec![(None, Type::F64)], Type::Array(Scalar::Bool))?;
    let mut b = FuncBuilder::new(&mut m, f)?;
    let x = b.param(0)?;
    let entry = b.create_block();
    let second = b.create_block_labeled(40)?;
    b.switch_to_block(entry)?;
    b.goto(second)?;
    b.switch_to_block(second)?;
    let n = prim_op(&mut b, Prim::Fptosi, &[x.into()])?;
    let a = b.alloc(Scalar::Bool, n.into())?;
    b.ret(a.into())?;
    let opts = RunOptions::default();
    let e = assert_err(
        interp::run(&m, f, &[fv(f64::NAN)], &opts),
        "fptosi of nan is out of the i64 range",
    );
    assert_eq!((e.loc.block, e.loc.stmt), (Some(40), Some(1)));
    let e = assert_err(
        interp::run(&m, f, &[fv(-2.5)], &opts),
        "negative array length -2",
    );
    assert_eq!((e.loc.block, e.loc.stmt), (Some(40), Some(2)));
    let ok = interp::run(&m, f, &[fv(2.5)], &opts)?;
    assert_eq!(ok.display(&m), "[false, false]");
    Ok(())
}

#[test]
fn argument_count_and_types_are_checked() -> R<()> {
    let (m, f) = sum_module()?;
    let opts = RunOptions::default();
    let e = assert_err(
        interp::run(&m, f, &[], &opts),
        "@sum takes 1 argument, found 0",
    );
    assert_eq!(e.loc.func.as_deref(), Some("sum"));
    assert_eq!(e.loc.block, None);
    assert_err(
        interp::run(&m, f, &[iv(1), iv(2)], &opts),
        "@sum takes 1 argument, found 2",
    );
    assert_err(
        interp::run(&m, f, &[fv(1.0)], &opts),
        "argument 1 of @sum must be i64, found f64",
    );
    assert_err(
        interp::run(&m, f, &[f64_array(&[1.0])], &opts),
        "argument 1 of @sum must be i64, found [f64]",
    );
    let mut m2 = Module::new();
    let g = m2.declare_func("g", vec![(None, Type::Array(Scalar::F64))], Type::Unit)?;
    let mut b = FuncBuilder::new(&mut m2, g)?;
    let entry = b.create_block();
    b.switch_to_block(entry)?;
    b.ret(Operand::Const(Const::Unit))?;
    assert_err(
        interp::run(&m2, g, &[Val::Array(i64_arr(&[1]))], &opts),
        "argument 1 of @g must be [f64], found [i64]",
    );
    assert!(matches!(
        interp::run(&m2, g, &[f64_array(&[])], &opts),
        Ok(Val::Unit)
    ));
    Ok(())
}

// ---------------------------------------------------------------- unverified modules

/// A one-block function `@t(x: f64) -> f64` returning `x`, for breaking.
/// `@pick(%i, %x)`: `switch %i, [#4, #2, #3]`, then `x`, `2x` or `-x`.
fn switch_module() -> R<(Module, FuncId)> {
    let mut m = Module::new();
    let f = m.declare_func(
        "pick",
        vec![(None, Type::I64), (None, Type::F64)],
        Type::F64,
    )?;
    let mut b = FuncBuilder::new(&mut m, f)?;
    let (i, x) = (b.param(0)?, b.param(1)?);
    let [b1, b2, b3, b4] = [1, 2, 3, 4].map(|l| b.create_block_labeled(l));
    let (b1, b2, b3, b4) = (b1?, b2?, b3?, b4?);
    b.switch_to_block(b1)?;
    b.set_pos(Some(Pos { line: 7, col: 3 }));
    b.switch(i.into(), &[b4, b2, b3])?;
    b.set_pos(None);
    b.switch_to_block(b2)?;
    let a = prim_op(&mut b, Prim::Mul, &[x.into(), 2.0.into()])?;
    b.goto(b4)?;
    b.switch_to_block(b3)?;
    let n = prim_op(&mut b, Prim::Neg, &[x.into()])?;
    b.goto(b4)?;
    b.switch_to_block(b4)?;
    let r = b.phi(Type::F64, &[(b1, x.into()), (b2, a.into()), (b3, n.into())])?;
    b.ret(r.into())?;
    Ok((m, f))
}

#[test]
fn switch_jumps_to_the_target_its_index_names() -> R<()> {
    let (m, f) = switch_module()?;
    irad_ir::verify::verify_module(&m).map_err(|e| format!("{e:?}"))?;
    let opts = RunOptions::default();
    assert_f64(interp::run(&m, f, &[iv(0), fv(1.5)], &opts), 1.5);
    assert_f64(interp::run(&m, f, &[iv(1), fv(1.5)], &opts), 3.0);
    assert_f64(interp::run(&m, f, &[iv(2), fv(1.5)], &opts), -1.5);
    for (i, msg) in [
        (3, "switch index 3 is out of range for 3 targets"),
        (-1, "switch index -1 is out of range for 3 targets"),
        (
            i64::MIN,
            "switch index -9223372036854775808 is out of range for 3 targets",
        ),
    ] {
        let e = assert_err(interp::run(&m, f, &[iv(i), fv(1.5)], &opts), msg);
        assert_eq!(e.loc.func.as_deref(), Some("pick"));
        assert_eq!((e.loc.block, e.loc.stmt), (Some(1), Some(1)));
        assert_eq!(e.loc.pos, Some(Pos { line: 7, col: 3 }));
    }
    Ok(())
}

fn simple() -> R<(Module, FuncId, Block)> {
    let mut m = Module::new();
    let f = m.declare_func("t", vec![(None, Type::F64)], Type::F64)?;
    let mut b = FuncBuilder::new(&mut m, f)?;
    let x = b.param(0)?;
    let entry = b.create_block();
    b.switch_to_block(entry)?;
    let y = prim_op(&mut b, Prim::Neg, &[x.into()])?;
    b.ret(y.into())?;
    Ok((m, f, entry))
}

#[test]
fn unverified_modules_give_internal_errors() -> R<()> {
    let opts = RunOptions::default();
    let internal = |r: Result<Val, RunError>| match r {
        Err(e) => {
            assert!(e.msg.starts_with("internal error: "), "{}", e.msg);
            assert_eq!(e.loc.func.as_deref(), Some("t"));
            e
        }
        Ok(v) => panic!("expected an internal error, got {v:?}"),
    };

    // A block without terminator.
    let (mut m, f, entry) = simple()?;
    m[f].blocks[entry].term = None;
    let e = internal(interp::run(&m, f, &[fv(1.0)], &opts));
    assert_eq!((e.loc.block, e.loc.stmt), (Some(1), Some(2)));

    // A function without blocks.
    let mut m = Module::new();
    let g = m.declare_func("t", vec![], Type::F64)?;
    internal(interp::run(&m, g, &[], &opts));

    // Type confusion: a primitive applied to the wrong kind of value.
    let (mut m, f, entry) = simple()?;
    let inst = m[f].blocks[entry].insts[0];
    m[f].insts[inst].kind = InstKind::Prim {
        prim: Prim::Iadd,
        args: [Operand::from(1.0), Operand::from(true)]
            .into_iter()
            .collect(),
    };
    let e = internal(interp::run(&m, f, &[fv(1.0)], &opts));
    assert_eq!((e.loc.block, e.loc.stmt), (Some(1), Some(1)));

    // A value handle out of range.
    let (mut m, f, entry) = simple()?;
    m[f].blocks[entry].term = Some(Terminator::Return(Value::from_u32(999).into()));
    internal(interp::run(&m, f, &[fv(1.0)], &opts));

    // A jump to a block that does not exist, and a gotoifnot with nothing after it.
    let (mut m, f, entry) = simple()?;
    m[f].blocks[entry].term = Some(Terminator::Goto(Block::from_u32(77)));
    internal(interp::run(&m, f, &[fv(1.0)], &opts));
    m[f].blocks[entry].term = Some(Terminator::GotoIfNot {
        cond: true.into(),
        target: entry,
    });
    internal(interp::run(&m, f, &[fv(1.0)], &opts));
    // A non-bool condition.
    m[f].blocks[entry].term = Some(Terminator::GotoIfNot {
        cond: 1.0.into(),
        target: entry,
    });
    internal(interp::run(&m, f, &[fv(1.0)], &opts));
    // A switch on a non-i64 index, and one to a block that does not exist.
    m[f].blocks[entry].term = Some(Terminator::Switch {
        index: 1.0.into(),
        targets: [entry].into_iter().collect(),
    });
    let e = internal(interp::run(&m, f, &[fv(1.0)], &opts));
    assert_eq!((e.loc.block, e.loc.stmt), (Some(1), Some(2)));
    m[f].blocks[entry].term = Some(Terminator::Switch {
        index: 0i64.into(),
        targets: [Block::from_u32(77)].into_iter().collect(),
    });
    internal(interp::run(&m, f, &[fv(1.0)], &opts));

    // Calls of a function that does not exist, with the wrong number of
    // arguments, and through a value that is not a function.
    let (mut m, f, entry) = simple()?;
    let inst = m[f].blocks[entry].insts[0];
    m[f].insts[inst].kind = InstKind::Invoke {
        func: FuncId::from_u32(5),
        args: Default::default(),
    };
    internal(interp::run(&m, f, &[fv(1.0)], &opts));
    m[f].insts[inst].kind = InstKind::Invoke {
        func: f,
        args: Default::default(),
    };
    internal(interp::run(&m, f, &[fv(1.0)], &opts));
    let x = m[f].params[0];
    m[f].insts[inst].kind = InstKind::CallValue {
        callee: x,
        args: Default::default(),
    };
    internal(interp::run(&m, f, &[fv(1.0)], &opts));

    // A phi with no entry for the edge taken, and a phi after a statement.
    let mut m = Module::new();
    let h = m.declare_func("t", vec![(None, Type::F64)], Type::F64)?;
    let mut b = FuncBuilder::new(&mut m, h)?;
    let x = b.param(0)?;
    let entry = b.create_block();
    let join = b.create_block();
    b.switch_to_block(entry)?;
    b.goto(join)?;
    b.switch_to_block(join)?;
    let p = b.phi(Type::F64, &[])?;
    b.ret(p.into())?;
    let e = internal(interp::run(&m, h, &[fv(1.0)], &opts));
    assert_eq!((e.loc.block, e.loc.stmt), (Some(1), Some(1)));
    // Entry added: the function now runs; then move the phi after a statement.
    let mut b = FuncBuilder::new(&mut m, h)?;
    b.add_phi_entry(p, entry, x.into())?;
    assert_f64(interp::run(&m, h, &[fv(1.0)], &opts), 1.0);
    let mut b = FuncBuilder::new(&mut m, h)?;
    let mid = b.create_block();
    b.switch_to_block(mid)?;
    let y = prim_op(&mut b, Prim::Neg, &[x.into()])?;
    b.ret(y.into())?;
    let neg_inst = m[h].blocks[mid].insts[0];
    m[h].blocks[join].insts.insert(0, neg_inst);
    let e = internal(interp::run(&m, h, &[fv(1.0)], &opts));
    assert_eq!((e.loc.block, e.loc.stmt), (Some(2), Some(2)));
    Ok(())
}

#[test]
fn type_confused_tuples_and_function_values_are_internal_errors() -> R<()> {
    let opts = RunOptions::default();
    // A loop that would nest a tuple one level deeper on every iteration if the
    // interpreter trusted the (broken) types: t = tuple(t) with t: (f64,).
    let mut m = Module::new();
    let one = Type::tuple(vec![Type::F64]);
    let f = m.declare_func("t", vec![(None, Type::I64)], one.clone())?;
    let mut b = FuncBuilder::new(&mut m, f)?;
    let n = b.param(0)?;
    let entry = b.create_block();
    let header = b.create_block();
    let body = b.create_block();
    let exit = b.create_block();
    b.switch_to_block(entry)?;
    let t0 = prim_op(&mut b, Prim::Tuple, &[1.0.into()])?;
    b.goto(header)?;
    b.switch_to_block(header)?;
    let k = b.phi(Type::I64, &[(entry, 0i64.into())])?;
    let t = b.phi(one.clone(), &[(entry, t0.into())])?;
    let more = prim_op(&mut b, Prim::Lt, &[k.into(), n.into()])?;
    b.gotoifnot(more.into(), exit)?;
    b.switch_to_block(body)?;
    let t1 = prim_op(&mut b, Prim::Tuple, &[t.into()])?;
    let k1 = prim_op(&mut b, Prim::Iadd, &[k.into(), 1i64.into()])?;
    b.add_phi_entry(k, body, k1.into())?;
    b.goto(header)?;
    b.switch_to_block(exit)?;
    b.ret(t.into())?;
    m[f].values[t1].ty = one;
    let mut b = FuncBuilder::new(&mut m, f)?;
    b.add_phi_entry(t, body, t1.into())?;
    let got = interp::run(&m, f, &[iv(0)], &opts)?;
    assert!(got.same(&Val::Tuple(vec![fv(1.0)].into())));
    let e = interp::run(&m, f, &[iv(1_000_000)], &opts).unwrap_err();
    assert_eq!(e.msg, "internal error: tuple does not have its type (f64,)");
    assert_eq!((e.loc.block, e.loc.stmt), (Some(3), Some(1)));

    // An overloaded primitive called as a value.
    let mut m = Module::new();
    let fty = Type::func(vec![Type::F64, Type::F64], Type::F64);
    let g = m.declare_func("t", vec![(None, fty)], Type::F64)?;
    let mut b = FuncBuilder::new(&mut m, g)?;
    let callee = b.param(0)?;
    let entry = b.create_block();
    b.switch_to_block(entry)?;
    let r = b
        .call_value(callee, &[1.0.into(), 2.0.into()])?
        .ok_or("unit")?;
    b.ret(r.into())?;
    let entry_inst = m[g].blocks[entry].insts[0];
    let lt = Operand::Const(Const::Func(FuncRef::Prim(Prim::Lt)));
    let (inst, v) = m[g].push_inst(
        entry,
        InstKind::Prim {
            prim: Prim::Select,
            args: [Operand::from(true), lt, lt].into_iter().collect(),
        },
        Some(Type::func(vec![Type::F64, Type::F64], Type::F64)),
        None,
    );
    // Call through the selected `@lt` instead of the parameter.
    m[g].blocks[entry].insts = vec![inst, entry_inst];
    m[g].insts[entry_inst].kind = InstKind::CallValue {
        callee: v.ok_or("no value")?,
        args: [Operand::from(1.0), Operand::from(2.0)]
            .into_iter()
            .collect(),
    };
    let e = interp::run(&m, g, &[Val::Func(FuncRef::Prim(Prim::Atan2))], &opts).unwrap_err();
    assert_eq!(e.msg, "internal error: primitive `lt` called as a value");
    assert_eq!((e.loc.block, e.loc.stmt), (Some(1), Some(2)));
    Ok(())
}

// ---------------------------------------------------------------- speed

/// A long scalar loop and a deep tree of recursive calls give exact results
/// (fewer iterations in debug builds). Speed is measured by benchmarks, not here.
#[test]
fn long_scalar_loop_and_recursion_are_exact() -> R<()> {
    let (m, f) = sum_module()?;
    let n: i64 = if cfg!(debug_assertions) {
        200_000
    } else {
        10_000_000
    };
    let got = interp::run(&m, f, &[iv(n)], &RunOptions::default());
    assert_f64(got, (n as f64) * (n as f64 - 1.0) / 2.0);
    let (m, _, fib) = recursive_module()?;
    let k = if cfg!(debug_assertions) { 18 } else { 27 };
    let got = interp::run(&m, fib, &[iv(k)], &RunOptions::default());
    let want = (0..k).fold((0i64, 1i64), |(a, b), _| (b, a + b)).0;
    assert!(
        matches!(got, Ok(Val::I64(v)) if v == want),
        "fib({k}) gave {got:?}, want {want}"
    );
    Ok(())
}

// ---------------------------------------------------------------- reverse-mode extension

fn parsed(text: &str) -> Module {
    let m = irad_ir::text::parse_module(text).expect("test IR parses");
    irad_ir::verify::verify_module(&m).expect("test IR verifies");
    m
}

const TAPE_LOOP: &str = "
func @push_upto(%n: i64) -> i64 {
#1:
  goto #2
#2:
  %i = phi [#1 => 0, #3 => %i1] :: i64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #4
#3:
  %i1 = call iadd(%i, 1) :: i64
  call push(%i)
  goto #2
#4:
  return %i
}

func @pop_sum(%n: i64) -> i64 {
#1:
  goto #2
#2:
  %k = phi [#1 => 0, #3 => %k1] :: i64
  %s = phi [#1 => 0, #3 => %s1] :: i64
  %c = call lt(%k, %n) :: bool
  gotoifnot %c, #4
#3:
  %v = call pop() :: i64
  %s10 = call imul(%s, 10) :: i64
  %s1 = call iadd(%s10, %v) :: i64
  %k1 = call iadd(%k, 1) :: i64
  goto #2
#4:
  return %s
}

func @both(%n: i64) -> i64 {
#1:
  %a = invoke @push_upto(%n) :: i64
  %b = invoke @pop_sum(%a) :: i64
  return %b
}
";

#[test]
fn tapes_are_lifo_per_type_and_shared_by_calls_and_runs() -> R<()> {
    let m = parsed(TAPE_LOOP);
    let opts = RunOptions::default();
    let f = |name: &str| m.by_name(name).expect("function exists");
    // Pushed 0, 1, 2, 3 by the callee; popped 3, 2, 1, 0 by the caller.
    assert_i64(interp::run(&m, f("both"), &[iv(4)], &opts), 3210);
    // One interpreter keeps its tapes between runs.
    let mut it = interp::Interpreter::new(&m);
    assert_i64(it.run(f("push_upto"), &[iv(3)], &opts), 3);
    assert_i64(it.run(f("push_upto"), &[iv(2)], &opts), 2);
    assert_i64(it.run(f("pop_sum"), &[iv(4)], &opts), 1021);
    assert_i64(it.run(f("pop_sum"), &[iv(1)], &opts), 0);
    let e = assert_err(
        it.run(f("pop_sum"), &[iv(1)], &opts),
        "pop from an empty tape of i64",
    );
    assert_eq!(e.loc.func.as_deref(), Some("pop_sum"));
    assert_eq!((e.loc.block, e.loc.stmt), (Some(3), Some(1)));
    // A fresh interpreter starts with empty tapes.
    assert_err(
        interp::run(&m, f("pop_sum"), &[iv(1)], &opts),
        "pop from an empty tape of i64",
    );
    Ok(())
}

#[test]
fn each_exact_type_has_its_own_tape() -> R<()> {
    let m = parsed(
        "
func @f(%x: f64, %a: [f64]) -> f64 {
#1:
  %t = call tuple(%x, 1) :: (f64, i64)
  call push(%t)
  call push(%x)
  call push(%a)
  call push(@f)
  call push(())
  %u = call pop() :: ()
  %g = call pop() :: fn(f64, [f64]) -> f64
  %b = call pop() :: [f64]
  call arrayset(%b, 0, 5.0)
  %y = call pop() :: f64
  %s = call pop() :: (f64, i64)
  %z = call getfield(%s, 0) :: f64
  %w = call add(%y, %z) :: f64
  return %w
}
",
    );
    let f = m.by_name("f").expect("function exists");
    let a = f64_array(&[1.0, 2.0]);
    let mut it = interp::Interpreter::new(&m);
    assert_f64(
        it.run(f, &[fv(1.5), a.clone()], &RunOptions::default()),
        3.0,
    );
    // The array went on its tape by reference.
    assert_eq!(f64_elems(&a), vec![5.0, 2.0]);
    // Tuple 16, f64 8, array 8, function 8, unit 0: 40 bytes, all popped.
    let stats = it.stats();
    assert_eq!(
        (
            stats.pushes,
            stats.pushed_bytes,
            stats.tape_bytes,
            stats.peak_tape_bytes
        ),
        (5, 40, 0, 40)
    );
    Ok(())
}

#[test]
fn counters_count_statements_terminators_phis_and_tape_bytes() -> R<()> {
    let m = parsed(TAPE_LOOP);
    let opts = RunOptions::default();
    let f = |name: &str| m.by_name(name).expect("function exists");
    let mut it = interp::Interpreter::new(&m);
    assert_eq!(it.stats(), interp::InterpStats::default());
    // n = 2: goto; #2 three times (phi, lt, gotoifnot); #3 twice (iadd,
    // push, goto); return.
    assert_i64(it.run(f("push_upto"), &[iv(2)], &opts), 2);
    assert_eq!(
        it.stats(),
        interp::InterpStats {
            statements: 1 + 3 * 3 + 2 * 3 + 1,
            pushes: 2,
            pushed_bytes: 16,
            tape_bytes: 16,
            peak_tape_bytes: 16,
            peak_held_bytes: 16,
            sparse_nodes: 0,
        }
    );
    assert_i64(it.run(f("push_upto"), &[iv(1)], &opts), 1);
    assert_eq!(it.stats().statements, 17 + 1 + 2 * 3 + 3 + 1);
    assert_eq!(it.stats().peak_tape_bytes, 24);
    // n = 3: goto; #2 four times (2 phis, lt, gotoifnot); #3 three times
    // (pop, imul, iadd, iadd, goto); return.
    assert_i64(it.run(f("pop_sum"), &[iv(3)], &opts), 10);
    let stats = it.stats();
    assert_eq!(stats.statements, 28 + 1 + 4 * 4 + 3 * 5 + 1);
    assert_eq!(
        (
            stats.pushes,
            stats.pushed_bytes,
            stats.tape_bytes,
            stats.peak_tape_bytes
        ),
        (3, 24, 0, 24)
    );
    // A call counts its invoke, its callee's statements and its return.
    let before = it.stats().statements;
    assert_i64(it.run(f("both"), &[iv(0)], &opts), 0);
    assert_eq!(
        it.stats().statements - before,
        3 + (1 + 3 + 1) + (1 + 4 + 1)
    );
    // A failing statement counts too.
    let before = it.stats().statements;
    assert_err(
        it.run(f("pop_sum"), &[iv(1)], &opts),
        "pop from an empty tape of i64",
    );
    assert_eq!(it.stats().statements - before, 1 + 4 + 1);
    Ok(())
}

const REVERSE_RULES: &str = "
func @sq(%x: f64) -> f64 {
#1:
  %y = call mul(%x, %x) :: f64
  return %y
}

func @sq_fwd(%x: f64) -> f64 {
#1:
  call push(%x)
  %y = call mul(%x, %x) :: f64
  return %y
}

func @sq_back(%dy: f64) -> f64 {
#1:
  %x = call pop() :: f64
  %t = call mul(%x, 2.0) :: f64
  %g = call mul(%t, %dy) :: f64
  return %g
}

func @norm(%v: [f64], %s: f64) -> f64 {
#1:
  %a = call arrayref(%v, 0) :: f64
  %r = call mul(%a, %s) :: f64
  return %r
}

func @value_and_grad(%f: fn(f64) -> f64, %x: f64) -> f64 {
#1:
  %fwd = call revfwd(%f) :: fn(f64) -> f64
  %back = call revback(%f) :: fn(f64) -> f64
  %y = call %fwd(%x) :: f64
  %g = call %back(1.0) :: f64
  %r = call add(%y, %g) :: f64
  return %r
}

func @norm_rule() -> () {
#1:
  %fwd = call revfwd(@norm) :: fn([f64], f64, [f64]) -> f64
  return ()
}
";

/// Answers with `@sq_fwd`/`@sq_back` for `@sq`, with `@norm` itself for
/// `@norm` (a rule of the wrong type), and with an error otherwise.
#[derive(Default)]
struct ReverseRules {
    asked: Vec<FuncRef>,
}

impl interp::RuleProvider for ReverseRules {
    fn forward_rule(
        &mut self,
        _: &mut Module,
        _: FuncRef,
        _: Lanes,
    ) -> Result<FuncId, RuleProviderError> {
        Err(RuleProviderError::Unavailable(
            "no forward rules here".into(),
        ))
    }

    fn reverse_rule(
        &mut self,
        module: &mut Module,
        callee: FuncRef,
    ) -> Result<(FuncId, FuncId), RuleProviderError> {
        self.asked.push(callee);
        let name = |id: FuncId| module.get(id).map(|f| f.name.as_str());
        let by_name =
            |n: &str| (module.by_name(n)).ok_or(RuleProviderError::Unavailable(format!("no @{n}")));
        match callee {
            FuncRef::User(id) if name(id) == Some("sq") => {
                Ok((by_name("sq_fwd")?, by_name("sq_back")?))
            }
            FuncRef::User(id) if name(id) == Some("norm") => Ok((id, id)),
            _ => Err(RuleProviderError::Unavailable(
                "no reverse rule for this callee".into(),
            )),
        }
    }
}

/// A provider of forward rules only: the trait's default `reverse_rule`.
struct ForwardOnly;

impl interp::RuleProvider for ForwardOnly {
    fn forward_rule(
        &mut self,
        _: &mut Module,
        _: FuncRef,
        _: Lanes,
    ) -> Result<FuncId, RuleProviderError> {
        Err(RuleProviderError::Unavailable(
            "no forward rules here".into(),
        ))
    }
}

#[test]
fn reverse_rules_come_from_the_provider_once_and_are_checked() -> R<()> {
    let opts = RunOptions::default();
    let mut m = parsed(REVERSE_RULES);
    let sq = Val::Func(FuncRef::User(m.by_name("sq").ok_or("sq")?));
    let vg = m.by_name("value_and_grad").ok_or("value_and_grad")?;
    let norm_rule = m.by_name("norm_rule").ok_or("norm_rule")?;
    let mut provider = ReverseRules::default();
    {
        let mut it = interp::Interpreter::with_rules(&mut m, &mut provider);
        // x^2 + 2x at 3, twice: the provider is asked once for both parts.
        assert_f64(it.run(vg, &[sq.clone(), fv(3.0)], &opts), 15.0);
        assert_f64(it.run(vg, &[sq.clone(), fv(-1.0)], &opts), -1.0);
        let stats = it.stats();
        assert_eq!((stats.pushes, stats.tape_bytes), (2, 0));
        // @sin has no rule: the provider's error, located at revfwd.
        let sin = Val::Func(FuncRef::Prim(Prim::Sin));
        let e = assert_err(
            it.run(vg, &[sin, fv(1.0)], &opts),
            "no reverse rule for this callee",
        );
        assert_eq!(
            (e.loc.func.as_deref(), e.loc.block, e.loc.stmt),
            (Some("value_and_grad"), Some(1), Some(1))
        );
        // A rule of the wrong type is an internal error.
        let e = it.run(norm_rule, &[], &opts).expect_err("wrong rule type");
        assert_eq!(
            e.msg,
            "internal error: the reverse rule's forward part has type fn([f64], f64) -> f64, not fn([f64], f64, [f64]) -> f64"
        );
    }
    assert_eq!(provider.asked.len(), 3, "{:?}", provider.asked);

    // Without a provider, and with one that has no reverse rules.
    let e = assert_err(
        interp::run(&m, vg, &[sq.clone(), fv(3.0)], &opts),
        "no rule provider for revfwd: run reverse rules through the reverse-mode API",
    );
    assert_eq!((e.loc.block, e.loc.stmt), (Some(1), Some(1)));
    let mut forward_only = ForwardOnly;
    let mut it = interp::Interpreter::with_rules(&mut m, &mut forward_only);
    assert_err(
        it.run(vg, &[sq, fv(3.0)], &opts),
        "this rule provider has no reverse rules",
    );
    Ok(())
}

#[test]
fn the_step_limit_stops_a_loop_at_its_terminator() {
    let m = irad_ir::text::parse_module(
        "func @spin(%n: i64) -> i64 {\n#1:\n  goto #2\n#2:\n  %i = phi [#1 => 0, #3 => %j] :: i64\n  %c = call lt(%i, %n) :: bool\n  gotoifnot %c, #4\n#3:\n  %j = call iadd(%i, 1) :: i64\n  goto #2\n#4:\n  return %i\n}\n",
    )
    .unwrap();
    let f = m.by_name("spin").unwrap();
    let limited = RunOptions {
        max_steps: 1000,
        ..RunOptions::default()
    };
    let err = interp::run(&m, f, &[Val::I64(i64::MAX)], &limited).unwrap_err();
    assert_eq!(err.msg, "step limit of 1000 exceeded");
    assert_eq!(err.loc.func.as_deref(), Some("spin"));
    assert!(err.loc.block.is_some() && err.loc.stmt.is_some(), "{err:?}");
    // Runs within the limit are unaffected, and the limit is per run: one
    // interpreter runs a 10-iteration loop far more than 1000 steps in all.
    let mut it = interp::Interpreter::new(&m);
    for _ in 0..50 {
        assert!(
            it.run(f, &[Val::I64(10)], &limited)
                .unwrap()
                .same(&Val::I64(10))
        );
    }
}
