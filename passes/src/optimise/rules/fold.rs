//! Constant folding: a primitive call whose operands are all constants
//! becomes its value, computed by the interpreter's own evaluation
//! (`irad_ir::interp::eval_prim`), so the folded constant is bit-identical to
//! what the program would compute.
//!
//! Assumes a verified function. Guarantees: only scalar primitives with a
//! scalar result (f64, i64, bool, or a function value for `select`) are
//! folded; a call that fails at run time (`idiv`/`irem` by zero,
//! `idiv(i64::MIN, -1)`, `fptosi` of NaN or out of range) is left alone, so
//! the error still happens; calls of arrays, tuples, duals, tapes and rules
//! are never folded.

use super::StmtCtx;
use irad_ir::interp::{Val, eval_prim};
use irad_ir::{Const, Inst, InstKind, Operand, Prim};
use smallvec::SmallVec;

/// Folds a call of a scalar primitive on constant operands (rule `fold`).
pub fn fold(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    let InstKind::Prim { prim, args } = cx.kind(inst)? else {
        return None;
    };
    if !foldable(*prim) {
        return None;
    }
    // Most calls have a value operand: nothing to fold, nothing gathered.
    if args.iter().any(|op| matches!(op, Operand::Value(_))) {
        return None;
    }
    let vals: Option<SmallVec<[Val; 3]>> = args
        .iter()
        .map(|op| match op {
            Operand::Const(c) => to_val(c),
            Operand::Value(_) => None,
        })
        .collect();
    let vals = vals?;
    let refs: SmallVec<[&Val; 3]> = vals.iter().collect();
    let out = eval_prim(*prim, &refs).ok()?;
    Some(Operand::Const(from_val(&out)?))
}

fn foldable(prim: Prim) -> bool {
    use Prim::*;
    matches!(
        prim,
        Add | Sub
            | Mul
            | Div
            | Neg
            | Pow
            | Powi
            | Abs
            | Min
            | Max
            | Copysign
            | Zmul
            | Sqrt
            | Exp
            | Log
            | Log1p
            | Expm1
            | Sin
            | Cos
            | Tan
            | Asin
            | Acos
            | Atan
            | Atan2
            | Sinh
            | Cosh
            | Tanh
            | Erf
            | Floor
            | Ceil
            | Round
            | Lt
            | Le
            | Gt
            | Ge
            | Eq
            | Ne
            | Select
            | Iadd
            | Isub
            | Imul
            | Idiv
            | Irem
            | Ineg
            | And
            | Or
            | Not
            | Sitofp
            | Fptosi
    )
}

fn to_val(c: &Const) -> Option<Val> {
    Some(match *c {
        Const::F64(x) => Val::F64(x),
        Const::I64(x) => Val::I64(x),
        Const::Bool(b) => Val::Bool(b),
        Const::Func(f) => Val::Func(f),
        Const::Unit => return None,
    })
}

fn from_val(v: &Val) -> Option<Const> {
    Some(match *v {
        Val::F64(x) => Const::F64(x),
        Val::I64(x) => Const::I64(x),
        Val::Bool(b) => Const::Bool(b),
        Val::Func(f) => Const::Func(f),
        _ => return None,
    })
}
