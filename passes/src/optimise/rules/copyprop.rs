//! Copy propagation: a value taken out of a construction that is visible in
//! the same function is replaced by the value put in.
//!
//! Assumes a verified function. Guarantees: each rule replaces a statement by
//! an operand of the statement that defines one of its operands (which
//! dominates that definition, hence the statement), or by one of its own
//! operands; the replacement has the result's type (the verifier's typing of
//! `tuple`, `dual`, `getfield`, `primal`, `tangent` and `select` gives it).

use super::{StmtCtx, prim_args};
use irad_ir::{Const, Inst, Operand, Prim};

/// The rules of the group `copyprop`, in the order it tries them.
pub const COPYPROP: &[&str] = &[
    "getfield-tuple",
    "primal-dual",
    "tangent-dual",
    "dual-eta",
    "select-const",
];

/// `getfield(tuple(a0, ..., an), k)` -> `ak`.
pub fn getfield_tuple(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    let [t, Operand::Const(Const::I64(k))] = prim_args(cx, inst, Prim::Getfield)? else {
        return None;
    };
    let (Prim::Tuple, elems) = cx.def(*t)? else {
        return None;
    };
    elems.get(usize::try_from(*k).ok()?).copied()
}

/// `primal(dual(p, t...))` -> `p`.
pub fn primal_dual(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    let [d] = prim_args(cx, inst, Prim::Primal)? else {
        return None;
    };
    let (Prim::Dual, parts) = cx.def(*d)? else {
        return None;
    };
    parts.first().copied()
}

/// `tangent(dual(p, t0, ..., tn), k)` -> `tk`.
pub fn tangent_dual(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    let [d, Operand::Const(Const::I64(k))] = prim_args(cx, inst, Prim::Tangent)? else {
        return None;
    };
    let (Prim::Dual, parts) = cx.def(*d)? else {
        return None;
    };
    parts
        .get(usize::try_from(*k).ok()?.checked_add(1)?)
        .copied()
}

/// `dual(primal(d), tangent(d, 0), ..., tangent(d, N-1))` -> `d`, when `d`
/// has exactly the type of the result (so it has N tangents).
pub fn dual_eta(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    let parts = prim_args(cx, inst, Prim::Dual)?;
    let (first, tangents) = parts.split_first()?;
    let (Prim::Primal, p) = cx.def(*first)? else {
        return None;
    };
    let d = *p.first()?;
    for (k, t) in tangents.iter().enumerate() {
        let (Prim::Tangent, targs) = cx.def(*t)? else {
            return None;
        };
        let want = Operand::Const(Const::I64(i64::try_from(k).ok()?));
        if targs.as_slice() != [d, want] {
            return None;
        }
    }
    let Operand::Value(dv) = d else {
        return None;
    };
    let result = cx.func.insts.get(inst)?.result?;
    (cx.func.values.get(dv)?.ty == cx.func.values.get(result)?.ty).then_some(d)
}

/// `select(true, a, b)` -> `a`; `select(false, a, b)` -> `b`.
pub fn select_const(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    match prim_args(cx, inst, Prim::Select)? {
        [Operand::Const(Const::Bool(true)), a, _] => Some(*a),
        [Operand::Const(Const::Bool(false)), _, b] => Some(*b),
        _ => None,
    }
}
