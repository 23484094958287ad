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
use irad_ir::entity::SecondaryMap;
use irad_ir::flow::ControlFlowGraph;
use irad_ir::{Block, Func, Terminator};

/// Inserts an empty block on every critical edge; returns whether there were
/// any.
pub fn split_critical_edges(func: &mut Func) -> bool {
    let cfg = ControlFlowGraph::with_function(func);
    // New blocks to place after / before each block, applied at the end.
    let mut after: SecondaryMap<Block, Vec<Block>> = SecondaryMap::new();
    let mut before: SecondaryMap<Block, Vec<Block>> = SecondaryMap::new();
    let mut labels = Labels::new(func);
    let mut changed = false;
    for &block in cfg.blocks() {
        if let Some(Terminator::Switch { index, targets }) = func.blocks[block].term.clone() {
            if cfg.succs(block).len() < 2 {
                continue;
            }
            let mut new_targets = targets.clone();
            for (k, &target) in cfg.succs(block).iter().enumerate() {
                // `succs` of a verified switch are its targets, in order.
                if cfg.preds(target).len() < 2 || new_targets.get(k) != Some(&target) {
                    continue;
                }
                let split = new_block(func, labels.fresh(), Terminator::Goto(target));
                rename_phi_pred(func, target, block, split);
                new_targets[k] = split;
                before.get_mut(target).push(split);
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
        let &[fall, jump] = cfg.succs(block) else {
            continue;
        };
        if cfg.preds(fall).len() > 1 {
            let split = new_block(func, labels.fresh(), Terminator::Goto(fall));
            rename_phi_pred(func, fall, block, split);
            after.get_mut(block).push(split);
            changed = true;
        }
        if cfg.preds(jump).len() > 1 {
            let split = new_block(func, labels.fresh(), Terminator::Goto(jump));
            rename_phi_pred(func, jump, block, split);
            func.blocks[block].term = Some(Terminator::GotoIfNot {
                cond,
                target: split,
            });
            before.get_mut(jump).push(split);
            changed = true;
        }
    }
    if !changed {
        return false;
    }
    let n = cfg.blocks().len();
    let mut layout = Vec::with_capacity(3 * n);
    for &block in cfg.blocks() {
        layout.extend(before[block].iter().copied());
        layout.push(block);
        layout.extend(after[block].iter().copied());
    }
    func.layout = layout;
    true
}
