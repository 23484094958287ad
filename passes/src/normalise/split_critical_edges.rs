//! Splits critical edges.
//!
//! Input: a verified function. Output: no edge joins a block with several
//! successors (a `gotoifnot`, or a `switch` of several targets) to a block
//! with several predecessors; each such edge now passes through a new empty
//! block ending in `goto`, the branch (or that entry of the switch) names the
//! new block, and the phi entries of the old target name it too. Placement
//! keeps every fall-through intact: the block splitting a fall-through edge
//! comes right after the branching block, the blocks splitting jump edges
//! (and switch edges) come right before their target (if the block before the
//! target falls through to it, that edge is critical too and its split block
//! comes first). The last block of the layout stays last. Edges from
//! unreachable blocks are split too.
//! Idempotent: new blocks have one predecessor and one successor, and no
//! block's predecessor count changes.

use super::{Labels, new_block, rename_phi_pred};
use crate::cfg::Cfg;
use irad_ir::{Block, Func, Terminator};

/// Inserts an empty block on every critical edge; returns whether there were
/// any.
pub fn split_critical_edges(func: &mut Func) -> bool {
    let cfg = Cfg::new(func);
    let n = cfg.layout.len();
    // New blocks to place after / before each layout index, applied at the end.
    let mut after: Vec<Vec<Block>> = vec![Vec::new(); n];
    let mut before: Vec<Vec<Block>> = vec![Vec::new(); n];
    let mut labels = Labels::new(func);
    let mut changed = false;
    for (i, &block) in cfg.layout.iter().enumerate() {
        if let Some(Terminator::Switch { index, targets }) = func.blocks[block].term.clone() {
            if cfg.succs[i].len() < 2 {
                continue;
            }
            let mut new_targets = targets.clone();
            for (k, &succ) in cfg.succs[i].iter().enumerate() {
                // `succs` of a verified switch are its targets, in order.
                if cfg.preds[succ].len() < 2 || new_targets.get(k) != Some(&cfg.layout[succ]) {
                    continue;
                }
                let target = cfg.layout[succ];
                let split = new_block(func, labels.fresh(), Terminator::Goto(target));
                rename_phi_pred(func, target, block, split);
                new_targets[k] = split;
                before[succ].push(split);
                changed = true;
            }
            func.blocks[block].term = Some(Terminator::Switch {
                index,
                targets: new_targets,
            });
            continue;
        }
        let Some(Terminator::GotoIfNot { cond, .. }) = func.blocks[block].term.clone() else {
            continue;
        };
        // `succs` of a `gotoifnot`: the fall-through first, then the target.
        let &[fall, jump] = cfg.succs[i].as_slice() else {
            continue;
        };
        if cfg.preds[fall].len() > 1 {
            let target = cfg.layout[fall];
            let split = new_block(func, labels.fresh(), Terminator::Goto(target));
            rename_phi_pred(func, target, block, split);
            after[i].push(split);
            changed = true;
        }
        if cfg.preds[jump].len() > 1 {
            let target = cfg.layout[jump];
            let split = new_block(func, labels.fresh(), Terminator::Goto(target));
            rename_phi_pred(func, target, block, split);
            func.blocks[block].term = Some(Terminator::GotoIfNot {
                cond,
                target: split,
            });
            before[jump].push(split);
            changed = true;
        }
    }
    if !changed {
        return false;
    }
    let mut layout = Vec::with_capacity(n + 2 * n);
    for ((block, before), after) in cfg.layout.iter().zip(&before).zip(&after) {
        layout.extend(before.iter().copied());
        layout.push(*block);
        layout.extend(after.iter().copied());
    }
    func.layout = layout;
    true
}
