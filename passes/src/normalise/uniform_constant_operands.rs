//! Puts constant operands second.
//!
//! Input: a verified function. Output: in every binary primitive call of a
//! layout block whose two operands can be exchanged without changing the
//! result bit for bit (IEEE arithmetic; any NaN counts as equal to any NaN),
//! a constant operand comes second whenever the other operand is a value.
//! `add mul iadd imul and or eq ne` get their operands exchanged; the order
//! comparisons are exchanged and mirrored: `lt(c, x)` becomes `gt(x, c)`, `gt`
//! becomes `lt`, `le` becomes `ge` and `ge` becomes `le`. Left alone: calls
//! whose operands are both constants (folding them is later work); `min` and
//! `max`, whose values commute but whose derivative at a tie goes to the first
//! operand, so exchanging the operands would change derivatives; and every
//! primitive that does not commute (`sub`, `div`, `pow`, `atan2`, `copysign`,
//! ...). Operand types and result types are unchanged (both
//! operands of these primitives have one type), so the output verifies.
//! Idempotent: an exchanged call has its value first.

use irad_ir::func::Args;
use irad_ir::{Func, InstKind, Operand, Prim};

/// Puts the constant operand of every exchangeable binary call second;
/// returns whether it changed any call.
pub fn uniform_constant_operands(func: &mut Func) -> bool {
    let mut changed = false;
    for &block in &func.layout {
        for &inst in &func.blocks[block].insts {
            match &mut func.insts[inst].kind {
                InstKind::Prim { prim, args } => changed |= uniform_prim(prim, args),
                InstKind::Invoke { .. } | InstKind::CallValue { .. } | InstKind::Phi { .. } => {}
            }
        }
    }
    changed
}

/// `prim(const, value)` becomes `mirrored(prim)(value, const)` when `prim` has
/// a mirror image; returns whether it did.
fn uniform_prim(prim: &mut Prim, args: &mut Args) -> bool {
    let Some(mirror) = mirrored(*prim) else {
        return false;
    };
    let [Operand::Const(_), Operand::Value(_)] = args.as_slice() else {
        return false;
    };
    args.swap(0, 1);
    *prim = mirror;
    true
}

/// The primitive `q` with `q(b, a) == prim(a, b)` for all operands, bit for bit
/// up to NaN payloads, if there is one.
fn mirrored(prim: Prim) -> Option<Prim> {
    match prim {
        Prim::Add
        | Prim::Mul
        | Prim::Zmul
        | Prim::Iadd
        | Prim::Imul
        | Prim::And
        | Prim::Or
        | Prim::Eq
        | Prim::Ne => Some(prim),
        Prim::Lt => Some(Prim::Gt),
        Prim::Gt => Some(Prim::Lt),
        Prim::Le => Some(Prim::Ge),
        Prim::Ge => Some(Prim::Le),
        // Every other primitive keeps its operand order: it does not commute,
        // or (`min`, `max`) exchanging the operands changes which one a tie
        // differentiates, or it is not binary. A wildcard, so a new primitive needs no
        // edit here (STYLE.md, Adding a primitive): not exchanging is safe.
        _ => None,
    }
}
