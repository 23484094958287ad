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
use irad_ir::Func;
use irad_ir::flow::ControlFlowGraph;

/// Drops unreachable blocks from the layout and their phi entries; returns
/// whether there were any.
pub fn remove_unreachable_blocks(func: &mut Func) -> bool {
    let cfg = ControlFlowGraph::with_function(func);
    let reachable = cfg.reachable();
    if reachable.len() == cfg.blocks().len() {
        return false;
    }
    // Queue the phi fixes (edges from a dead block into a live one), then apply
    // them and the new layout once.
    let mut dead_edges = Vec::new();
    for &block in cfg.blocks() {
        if reachable.contains(block) {
            continue;
        }
        for &s in cfg.succs(block) {
            if reachable.contains(s) {
                dead_edges.push((s, block));
            }
        }
    }
    for (block, dead_pred) in dead_edges {
        remove_phi_entries(func, block, dead_pred);
    }
    func.layout = cfg
        .blocks()
        .iter()
        .copied()
        .filter(|&b| reachable.contains(b))
        .collect();
    true
}
