//! Merges straight-line chains of blocks, which inlining and unrolling leave
//! behind (`goto` into a block that has no other predecessor).
//!
//! Input: a verified function. A block `B` is merged into `A` when `A` ends
//! in `goto B`, `B` is not the entry, `A` is its only predecessor, `B` has no
//! phis, and `B` does not end in `gotoifnot` unless it directly follows `A` in
//! the layout (so its fall-through block stays the next one). `A` gets `B`'s
//! statements and terminator; `B`'s successors name `A` in their phis; `B`
//! leaves the layout. Output: no such pair is left; the statements run in the
//! same order, so values and errors are unchanged. It adds no critical edge
//! (the edges out of `A` are the edges that left `B`), but may leave the
//! return in a block that is no longer last: `single_return` puts it back.
//! Idempotent.

use super::rename_phi_pred;
use irad_ir::entity::EntitySet;
use irad_ir::flow::ControlFlowGraph;
use irad_ir::{Func, InstKind, Terminator};

/// Merges every block into its single `goto` predecessor where it can;
/// returns whether any was merged.
pub fn merge_blocks(func: &mut Func) -> bool {
    let mut changed = false;
    // Each pass merges disjoint pairs, so a chain of k blocks takes about
    // log2 k passes; every pass that changes something removes a block.
    for _ in 0..=func.layout.len() {
        let cfg = ControlFlowGraph::with_function(func);
        let mut used = EntitySet::new();
        let mut merges = Vec::new();
        for &a in cfg.blocks() {
            let Some(Terminator::Goto(b)) = func.blocks[a].term else {
                continue;
            };
            if !cfg.contains(b) {
                continue;
            }
            let has_phi = func.blocks[b]
                .insts
                .first()
                .is_some_and(|&i| matches!(func.insts[i].kind, InstKind::Phi { .. }));
            let falls_through = matches!(func.blocks[b].term, Some(Terminator::GotoIfNot { .. }));
            if cfg.entry() == Some(b)
                || b == a
                || cfg.preds(b) != [a]
                || has_phi
                || (falls_through && cfg.next_in_layout(a) != Some(b))
                || used.contains(a)
                || used.contains(b)
            {
                continue;
            }
            used.insert(a);
            used.insert(b);
            merges.push((a, b, cfg.succs(b).to_vec()));
        }
        if merges.is_empty() {
            break;
        }
        changed = true;
        for (a, b, succs) in merges {
            let insts = std::mem::take(&mut func.blocks[b].insts);
            func.blocks[a].insts.extend(insts);
            func.blocks[a].term = func.blocks[b].term.take();
            func.blocks[a].term_pos = func.blocks[b].term_pos;
            for s in succs {
                rename_phi_pred(func, s, b, a);
            }
            func.layout.retain(|&x| x != b);
        }
    }
    changed
}
