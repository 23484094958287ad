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
use crate::cfg::Cfg;
use irad_ir::{Func, InstKind, Terminator};

/// Merges every block into its single `goto` predecessor where it can;
/// returns whether any was merged.
pub fn merge_blocks(func: &mut Func) -> bool {
    let mut changed = false;
    // Each pass merges disjoint pairs, so a chain of k blocks takes about
    // log2 k passes; every pass that changes something removes a block.
    for _ in 0..=func.layout.len() {
        let cfg = Cfg::new(func);
        let n = cfg.layout.len();
        let mut used = vec![false; n];
        let mut merges = Vec::new();
        for a in 0..n {
            let Some(Terminator::Goto(target)) = func.blocks[cfg.layout[a]].term else {
                continue;
            };
            let Some(b) = cfg.layout.iter().position(|&x| x == target) else {
                continue;
            };
            let block_b = cfg.layout[b];
            let has_phi = func.blocks[block_b]
                .insts
                .first()
                .is_some_and(|&i| matches!(func.insts[i].kind, InstKind::Phi { .. }));
            let falls_through = matches!(
                func.blocks[block_b].term,
                Some(Terminator::GotoIfNot { .. })
            );
            if b == 0
                || b == a
                || cfg.preds[b] != [a]
                || has_phi
                || (falls_through && b != a + 1)
                || used[a]
                || used[b]
            {
                continue;
            }
            used[a] = true;
            used[b] = true;
            merges.push((cfg.layout[a], block_b, cfg.succs[b].clone()));
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
                rename_phi_pred(func, cfg.layout[s], b, a);
            }
            func.layout.retain(|&x| x != b);
        }
    }
    changed
}
