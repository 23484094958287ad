//! Folds branches on constant conditions.
//!
//! Input: a verified function. Output: no `gotoifnot` has a constant
//! condition: `gotoifnot true, #b` becomes `goto` of the fall-through block and
//! `gotoifnot false, #b` becomes `goto #b`. The successor no longer reached
//! from the branching block loses that block's phi entries. Blocks the fold
//! makes unreachable stay in the layout (still valid: a block without
//! predecessors may have phis with no entries); `remove_unreachable_blocks`,
//! which runs next in the normalisation pipeline, drops them. Idempotent.

use super::remove_phi_entries;
use irad_ir::{Const, Func, Operand, Terminator};

/// Turns every `gotoifnot` on a constant condition into a `goto`; returns
/// whether it folded any.
pub fn fold_constant_branches(func: &mut Func) -> bool {
    // Queue (block, taken, dropped) first: the fall-through successor depends
    // on the layout, which is read while the terminators are rewritten.
    let mut folds = Vec::new();
    for (i, &block) in func.layout.iter().enumerate() {
        let Some(Terminator::GotoIfNot {
            cond: Operand::Const(Const::Bool(cond)),
            target,
        }) = func.blocks[block].term
        else {
            continue;
        };
        let Some(&next) = func.layout.get(i + 1) else {
            continue;
        };
        let (taken, dropped) = if cond { (next, target) } else { (target, next) };
        folds.push((block, taken, dropped));
    }
    let changed = !folds.is_empty();
    for (block, taken, dropped) in folds {
        func.blocks[block].term = Some(Terminator::Goto(taken));
        remove_phi_entries(func, dropped, block);
    }
    changed
}
