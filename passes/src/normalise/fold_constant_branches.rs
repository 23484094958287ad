//! Folds branches on constant conditions and switches on constant indices.
//!
//! Input: a verified function. Output: no `gotoifnot` has a constant
//! condition: `gotoifnot true, #b` becomes `goto` of the fall-through block and
//! `gotoifnot false, #b` becomes `goto #b`; no `switch` has a constant index
//! in range: `switch k, [...]` becomes `goto` of target `k`. A switch on a
//! constant index out of range stays, since it must still fail at run time.
//! The successors no longer reached from the branching block lose that
//! block's phi entries. Blocks the fold makes unreachable stay in the layout
//! (still valid: a block without predecessors may have phis with no entries);
//! `remove_unreachable_blocks`, which runs next in the normalisation pipeline,
//! drops them. Idempotent.

use super::remove_phi_entries;
use irad_ir::{Block, Const, Func, Operand, Terminator};
use smallvec::SmallVec;

/// Turns every `gotoifnot` on a constant condition and every `switch` on a
/// constant index in range into a `goto`; returns whether it folded any.
pub fn fold_constant_branches(func: &mut Func) -> bool {
    // Queue (block, taken, dropped) first: the fall-through successor depends
    // on the layout, which is read while the terminators are rewritten.
    let mut folds: Vec<(Block, Block, SmallVec<[Block; 4]>)> = Vec::new();
    for (i, &block) in func.layout.iter().enumerate() {
        if let Some(fold) = plan(func, block, || func.layout.get(i + 1).copied()) {
            folds.push(fold);
        }
    }
    let changed = !folds.is_empty();
    for fold in folds {
        apply(func, fold);
    }
    changed
}

/// Folds the terminator of the one block `block` as
/// [`fold_constant_branches`] does; returns whether it did. For the
/// optimiser's `branch-fold`, which visits blocks one at a time.
pub(crate) fn fold_branch(func: &mut Func, block: Block) -> bool {
    match plan(func, block, || func.next_in_layout(block)) {
        Some(fold) => {
            apply(func, fold);
            true
        }
        None => false,
    }
}

/// The fold of `block`'s terminator, if it branches on a constant: (block,
/// successor taken, successors dropped). `next` gives the fall-through block.
fn plan(
    func: &Func,
    block: Block,
    next: impl Fn() -> Option<Block>,
) -> Option<(Block, Block, SmallVec<[Block; 4]>)> {
    match &func.blocks.get(block)?.term {
        Some(Terminator::GotoIfNot {
            cond: Operand::Const(Const::Bool(cond)),
            target,
        }) => {
            let next = next()?;
            let (taken, dropped) = if *cond {
                (next, *target)
            } else {
                (*target, next)
            };
            Some((block, taken, SmallVec::from_slice(&[dropped])))
        }
        Some(Terminator::Switch {
            index: Operand::Const(Const::I64(k)),
            targets,
        }) => {
            let taken = *usize::try_from(*k).ok().and_then(|k| targets.get(k))?;
            let dropped = targets.iter().copied().filter(|&t| t != taken).collect();
            Some((block, taken, dropped))
        }
        _ => None,
    }
}

fn apply(func: &mut Func, (block, taken, dropped): (Block, Block, SmallVec<[Block; 4]>)) {
    func.blocks[block].term = Some(Terminator::Goto(taken));
    for target in dropped {
        remove_phi_entries(func, target, block);
    }
}
