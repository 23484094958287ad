//! Gives a function a single return, in the last block of the layout.
//!
//! Input: a verified function. Output: if the function has any `return`, it
//! has exactly one, and it ends the last block of the layout. When that is
//! not already so, a new block is appended: every old `return op` becomes
//! `goto` to it, and it returns the one operand they all returned, or a phi
//! (of the function's result type) over them when they differ. Appending is
//! safe: the old last block cannot end in `gotoifnot`. The new block's
//! predecessors each end in `goto`, so no critical edge appears. A function
//! with no `return` (it only loops) is left alone. Idempotent.

use super::{Labels, new_block};
use irad_ir::{Block, Func, InstKind, Operand, Terminator};
use smallvec::SmallVec;

/// Merges all returns into one, at the end of the layout; returns whether the
/// function changed.
pub fn single_return(func: &mut Func) -> bool {
    let returns: Vec<(Block, Operand)> = func
        .layout
        .iter()
        .filter_map(|&b| match func.blocks[b].term {
            Some(Terminator::Return(op)) => Some((b, op)),
            _ => None,
        })
        .collect();
    let Some(&(first_block, first_op)) = returns.first() else {
        return false;
    };
    if returns.len() == 1 && func.layout.last() == Some(&first_block) {
        return false;
    }
    let exit = new_block(
        func,
        Labels::new(func).fresh(),
        Terminator::Return(first_op),
    );
    for &(block, _) in &returns {
        func.blocks[block].term = Some(Terminator::Goto(exit));
    }
    if returns.iter().any(|&(_, op)| op != first_op) {
        let entries: SmallVec<[(Block, Operand); 2]> = returns.iter().copied().collect();
        let ty = func.ret.clone();
        let (_, value) = func.push_inst(exit, InstKind::Phi { entries }, Some(ty), None);
        if let Some(value) = value {
            func.blocks[exit].term = Some(Terminator::Return(Operand::Value(value)));
        }
    }
    func.layout.push(exit);
    true
}
