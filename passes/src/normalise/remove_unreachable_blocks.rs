//! Removes blocks that cannot be reached from the entry.
//!
//! Input: a verified function. Output: every block of the layout is reachable
//! from the entry; the layout keeps its relative order, so a `gotoifnot`
//! still falls through to the same block (a reachable block's fall-through
//! successor is reachable, and nothing between them is removed). Phi entries
//! for removed predecessors are dropped. A phi left with one entry, or with
//! entries that all carry one operand, stays: `remove_trivial_phis` removes
//! those. Removed blocks stay in the block table, unlisted (the verifier
//! ignores them). Idempotent.

use super::remove_phi_entries;
use crate::cfg::Cfg;
use irad_ir::Func;

/// Drops unreachable blocks from the layout and their phi entries; returns
/// whether there were any.
pub fn remove_unreachable_blocks(func: &mut Func) -> bool {
    let cfg = Cfg::new(func);
    let reachable = cfg.reachable();
    if reachable.iter().all(|&r| r) {
        return false;
    }
    // Queue the phi fixes (edges from a dead block into a live one), then apply
    // them and the new layout once.
    let mut dead_edges = Vec::new();
    for (i, succs) in cfg.succs.iter().enumerate() {
        if reachable[i] {
            continue;
        }
        for &s in succs {
            if reachable[s] {
                dead_edges.push((cfg.layout[s], cfg.layout[i]));
            }
        }
    }
    for (block, dead_pred) in dead_edges {
        remove_phi_entries(func, block, dead_pred);
    }
    func.layout = cfg
        .layout
        .iter()
        .zip(&reachable)
        .filter(|(_, r)| **r)
        .map(|(&b, _)| b)
        .collect();
    true
}
