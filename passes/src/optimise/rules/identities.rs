//! Algebraic identities, one rule each. The group `identities` holds the
//! exact ones: for every operand value (IEEE f64 with its signed zeros,
//! infinities and NaNs; wrapping i64) the rewritten statement gives a result
//! bit-identical to the original (any NaN equal to any NaN). The group
//! `fast-identities` holds the ones that are wrong for some values, which no
//! default schedule uses (docs/optimise.md lists the values).
//!
//! Assumes a verified function (operand types as the primitive table says).
//! Guarantees: each rule replaces a statement by one of its operands, an
//! operand of the statement defining one of them, or a constant of the
//! result's type.

use super::{StmtCtx, prim_args};
use irad_ir::{Const, Inst, Operand, Prim};

/// The exact identities, in the order the group tries them.
pub const IDENTITIES: &[&str] = &[
    "mul-one",
    "div-one",
    "sub-zero",
    "add-neg-zero",
    "neg-neg",
    "select-same",
    "iadd-zero",
    "isub-zero",
    "imul-one",
    "imul-zero",
    "idiv-one",
    "ineg-ineg",
    "not-not",
    "and-true",
    "and-false",
    "or-false",
    "or-true",
];

/// The identities that are wrong for some IEEE values.
pub const FAST_IDENTITIES: &[&str] = &["add-zero", "mul-zero", "sub-self"];

fn is_f64(op: &Operand, bits: u64) -> bool {
    matches!(op, Operand::Const(Const::F64(x)) if x.to_bits() == bits)
}

fn is_const(op: &Operand, c: Const) -> bool {
    matches!(op, Operand::Const(k) if *k == c)
}

/// For a binary `prim` at `inst` with one operand satisfying `unit`: the
/// other operand (either side when `commutes`, else only the first).
fn other_of(
    cx: &StmtCtx<'_>,
    inst: Inst,
    prim: Prim,
    commutes: bool,
    unit: impl Fn(&Operand) -> bool,
) -> Option<Operand> {
    match prim_args(cx, inst, prim)? {
        [a, b] if unit(b) => Some(*a),
        [a, b] if commutes && unit(a) => Some(*b),
        _ => None,
    }
}

/// The operand of `inv(inv(x))`: `x`.
fn involution(cx: &StmtCtx<'_>, inst: Inst, prim: Prim) -> Option<Operand> {
    let [a] = prim_args(cx, inst, prim)? else {
        return None;
    };
    match cx.def(*a)? {
        (p, args) if p == prim => args.first().copied(),
        _ => None,
    }
}

const ONE: u64 = 0x3ff0_0000_0000_0000;
const ZERO: u64 = 0;
const NEG_ZERO: u64 = 0x8000_0000_0000_0000;

/// `mul(x, 1.0)`, `mul(1.0, x)` -> `x`: exact (IEEE multiplication by one
/// returns x, -0.0 and NaN included).
pub fn mul_one(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    other_of(cx, inst, Prim::Mul, true, |o| is_f64(o, ONE))
}

/// `div(x, 1.0)` -> `x`: exact.
pub fn div_one(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    other_of(cx, inst, Prim::Div, false, |o| is_f64(o, ONE))
}

/// `sub(x, 0.0)` -> `x`: exact (`-0.0 - 0.0` is `-0.0`).
pub fn sub_zero(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    other_of(cx, inst, Prim::Sub, false, |o| is_f64(o, ZERO))
}

/// `add(x, -0.0)`, `add(-0.0, x)` -> `x`: exact (`0.0 + -0.0` is `0.0`).
pub fn add_neg_zero(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    other_of(cx, inst, Prim::Add, true, |o| is_f64(o, NEG_ZERO))
}

/// `neg(neg(x))` -> `x`: exact.
pub fn neg_neg(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    involution(cx, inst, Prim::Neg)
}

/// `select(c, a, a)` -> `a`.
pub fn select_same(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    match prim_args(cx, inst, Prim::Select)? {
        [_, a, b] if a == b => Some(*a),
        _ => None,
    }
}

/// `iadd(x, 0)`, `iadd(0, x)` -> `x`.
pub fn iadd_zero(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    other_of(cx, inst, Prim::Iadd, true, |o| is_const(o, Const::I64(0)))
}

/// `isub(x, 0)` -> `x`.
pub fn isub_zero(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    other_of(cx, inst, Prim::Isub, false, |o| is_const(o, Const::I64(0)))
}

/// `imul(x, 1)`, `imul(1, x)` -> `x`.
pub fn imul_one(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    other_of(cx, inst, Prim::Imul, true, |o| is_const(o, Const::I64(1)))
}

/// `imul(x, 0)`, `imul(0, x)` -> `0`: exact for wrapping i64.
pub fn imul_zero(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    other_of(cx, inst, Prim::Imul, true, |o| is_const(o, Const::I64(0)))
        .map(|_| Operand::Const(Const::I64(0)))
}

/// `idiv(x, 1)` -> `x` (never an error: only a zero divisor or
/// `idiv(i64::MIN, -1)` fail).
pub fn idiv_one(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    other_of(cx, inst, Prim::Idiv, false, |o| is_const(o, Const::I64(1)))
}

/// `ineg(ineg(x))` -> `x`: exact for wrapping i64 (`i64::MIN` included).
pub fn ineg_ineg(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    involution(cx, inst, Prim::Ineg)
}

/// `not(not(b))` -> `b`.
pub fn not_not(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    involution(cx, inst, Prim::Not)
}

/// `and(b, true)`, `and(true, b)` -> `b`.
pub fn and_true(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    other_of(cx, inst, Prim::And, true, |o| {
        is_const(o, Const::Bool(true))
    })
}

/// `and(b, false)`, `and(false, b)` -> `false` (both operands are already
/// evaluated: `and` does not short-circuit in the IR).
pub fn and_false(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    other_of(cx, inst, Prim::And, true, |o| {
        is_const(o, Const::Bool(false))
    })
    .map(|_| Operand::Const(Const::Bool(false)))
}

/// `or(b, false)`, `or(false, b)` -> `b`.
pub fn or_false(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    other_of(cx, inst, Prim::Or, true, |o| {
        is_const(o, Const::Bool(false))
    })
}

/// `or(b, true)`, `or(true, b)` -> `true`.
pub fn or_true(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    other_of(cx, inst, Prim::Or, true, |o| is_const(o, Const::Bool(true)))
        .map(|_| Operand::Const(Const::Bool(true)))
}

/// Fast: `add(x, 0.0)`, `add(0.0, x)` -> `x`. Wrong for `x = -0.0`, where
/// the sum is `0.0`.
pub fn add_zero(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    other_of(cx, inst, Prim::Add, true, |o| is_f64(o, ZERO))
}

/// Fast: `mul(x, 0.0)`, `mul(0.0, x)` -> `0.0`. Wrong for NaN and infinite
/// `x` (the product is NaN) and for negative `x` (the product is `-0.0`).
pub fn mul_zero(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    other_of(cx, inst, Prim::Mul, true, |o| is_f64(o, ZERO)).map(|_| Operand::from(0.0))
}

/// Fast: `sub(x, x)` -> `0.0`. Wrong for NaN and infinite `x` (NaN).
pub fn sub_self(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    match prim_args(cx, inst, Prim::Sub)? {
        [a, b] if a == b => Some(Operand::from(0.0)),
        _ => None,
    }
}
