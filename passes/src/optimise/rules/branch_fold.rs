//! Branch folding on known conditions, one block at a time: the block form
//! of `normalise::fold_constant_branches`, whose code it shares.
//!
//! Assumes a verified function whose terminator operands have been
//! substituted by the engine. Guarantees: a `gotoifnot` on a constant becomes
//! a `goto` of the successor taken, a `switch` on a constant index in range a
//! `goto` of that target (one out of range stays: it must fail at run time);
//! the successors no longer reached lose the block's phi entries. Blocks made
//! unreachable stay until `dce` removes them.

use crate::normalise::fold_constant_branches::fold_branch;
use irad_ir::{Block, Func};

/// Folds the terminator of `block` if it branches on a constant (rule
/// `branch-fold`); returns whether it did.
pub fn branch_fold(func: &mut Func, block: Block) -> bool {
    fold_branch(func, block)
}
