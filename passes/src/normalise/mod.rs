//! The normalisation passes (DESIGN.md, Normalisation): transforms that bring a
//! function to the canonical shape later passes rely on. One file per pass;
//! each pass is a free function over `&mut Func` that returns whether it
//! changed the function; each is idempotent, and its output verifies whenever
//! its input does. This module also holds the small edits they share (phi
//! entries, new blocks, fresh labels).
//!
//! Assumes verified functions. Guarantees of the shared helpers: they never
//! touch the layout (callers queue layout edits and apply them once).

pub(crate) mod fold_constant_branches;
pub(crate) mod remove_trivial_phis;
mod remove_unreachable_blocks;
mod single_return;
mod split_critical_edges;
mod uniform_constant_operands;

pub use fold_constant_branches::fold_constant_branches;
pub use remove_trivial_phis::remove_trivial_phis;
pub use remove_unreachable_blocks::remove_unreachable_blocks;
pub use single_return::single_return;
pub use split_critical_edges::split_critical_edges;
pub use uniform_constant_operands::uniform_constant_operands;

use irad_ir::{Block, BlockData, Func, Inst, InstKind, Terminator};

/// The phi statements at the start of `block`.
fn phis(func: &Func, block: Block) -> Vec<Inst> {
    func.blocks[block]
        .insts
        .iter()
        .copied()
        .take_while(|&inst| matches!(func.insts[inst].kind, InstKind::Phi { .. }))
        .collect()
}

/// Drops the entries for predecessor `pred` from the phis of `block`.
fn remove_phi_entries(func: &mut Func, block: Block, pred: Block) {
    for inst in phis(func, block) {
        if let InstKind::Phi { entries } = &mut func.insts[inst].kind {
            entries.retain(|(b, _)| *b != pred);
        }
    }
}

/// Renames predecessor `from` to `to` in the phi entries of `block`.
fn rename_phi_pred(func: &mut Func, block: Block, from: Block, to: Block) {
    for inst in phis(func, block) {
        if let InstKind::Phi { entries } = &mut func.insts[inst].kind {
            for (b, _) in entries.iter_mut() {
                if *b == from {
                    *b = to;
                }
            }
        }
    }
}

/// Fresh block labels: above every label in use, or, past `u32::MAX`, the
/// smallest free ones (a function has fewer than 2^32 blocks).
struct Labels {
    used: rustc_hash::FxHashSet<u32>,
    next: u32,
}

impl Labels {
    fn new(func: &Func) -> Labels {
        let used: rustc_hash::FxHashSet<u32> = func.blocks.values().map(|b| b.label).collect();
        let next = used.iter().max().map_or(1, |m| m.wrapping_add(1));
        Labels { used, next }
    }

    fn fresh(&mut self) -> u32 {
        let mut label = self.next;
        while self.used.contains(&label) {
            label = label.wrapping_add(1);
        }
        self.used.insert(label);
        self.next = label.wrapping_add(1);
        label
    }
}

/// A new block ending in `term`, labelled `label`, not yet in the layout.
fn new_block(func: &mut Func, label: u32, term: Terminator) -> Block {
    func.blocks.push(BlockData {
        label,
        insts: Vec::new(),
        term: Some(term),
        pos: None,
        term_pos: None,
    })
}
