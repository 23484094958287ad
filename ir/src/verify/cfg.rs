//! Layout, statement placement and terminators, checked; the CFG and its
//! dominator tree, from `crate::flow`.
//!
//! Assumes nothing about the function. Guarantees, once `build_cfg` has run,
//! that `Cfg::layout` lists valid blocks once each (the first is the entry)
//! and equals `flow.blocks()`, `slot_of` gives the one place of every listed
//! statement, the successor and predecessor lists of `flow` hold only layout
//! blocks (predecessors sorted by layout order, without repeats) and
//! `dominates` answers in constant time.

use super::{Ctx, Slot};
use crate::entity::{EntitySet, SecondaryMap};
use crate::flow::{ControlFlowGraph, DominatorTree};
use crate::func::{Block, Inst, Terminator};
use rustc_hash::FxHashSet as HashSet;

/// The verified shape of a function: its layout, placements and CFG.
#[derive(Default)]
pub(crate) struct Cfg {
    /// The layout without invalid or repeated entries.
    pub layout: Vec<Block>,
    /// 1 + the layout index of each block; 0 for a block not in the layout.
    order: SecondaryMap<Block, u32>,
    /// Where each listed statement is (its first listing).
    slots: SecondaryMap<Inst, Option<Slot>>,
    /// The edges between the blocks of `layout` (the same list), as the
    /// terminators checked here give them.
    pub flow: ControlFlowGraph,
    /// Reachability and dominance over `flow`.
    pub dom: DominatorTree,
}

impl Cfg {
    /// The layout index of `block`, if the layout lists it.
    pub fn index_of(&self, block: Block) -> Option<u32> {
        self.order.get(block).checked_sub(1)
    }

    /// Where statement `inst` is listed, if any block lists it.
    pub fn slot_of(&self, inst: Inst) -> Option<Slot> {
        *self.slots.get(inst)
    }

    /// Whether the block at layout index `bi` is reachable from the entry.
    pub fn reachable(&self, bi: u32) -> bool {
        self.dom.is_reachable(self.layout[bi as usize])
    }

    /// Whether the block at layout index `a` dominates the one at `b`; both
    /// must be reachable.
    pub fn dominates(&self, a: u32, b: u32) -> bool {
        self.dom
            .dominates(self.layout[a as usize], self.layout[b as usize])
    }
}

/// Checks the layout and fills `Cfg::layout`; false when there is no valid
/// block, so that nothing else can be checked.
pub(crate) fn check_layout(ctx: &mut Ctx) -> bool {
    if ctx.f.layout.is_empty() {
        ctx.err_func("function has no blocks: expected at least an entry block".into());
        return false;
    }
    let mut repeated = Vec::new();
    for &block in &ctx.f.layout {
        if !ctx.f.blocks.is_valid(block) {
            let msg = format!("layout lists invalid block handle {}", block.as_u32());
            ctx.err_func(msg);
        } else if ctx.cfg.index_of(block).is_some() {
            repeated.push(block);
        } else {
            ctx.cfg.layout.push(block);
            let n = ctx.cfg.layout.len() as u32;
            ctx.cfg.order.set(block, n);
        }
    }
    for block in repeated {
        if let Some(bi) = ctx.cfg.index_of(block) {
            let msg = format!(
                "block {} is listed more than once in the layout",
                ctx.block_name(block)
            );
            ctx.err_block(bi, msg);
        }
    }
    if ctx.cfg.layout.is_empty() {
        ctx.err_func("function has no valid blocks: expected at least an entry block".into());
        return false;
    }
    true
}

/// Checks labels and statement listings, and places every listed statement.
pub(crate) fn check_blocks(ctx: &mut Ctx) {
    let mut labels: HashSet<u32> = HashSet::default();
    for bi in 0..ctx.cfg.layout.len() as u32 {
        let block = ctx.cfg.layout[bi as usize];
        let Some(data) = ctx.f.blocks.get(block) else {
            continue;
        };
        if !labels.insert(data.label) {
            let msg = format!(
                "label #{} is used by an earlier block too: labels must be unique in a function",
                data.label
            );
            ctx.err_block(bi, msg);
        }
        for (k, &inst) in data.insts.iter().enumerate() {
            let slot = Slot {
                block: bi,
                index: k as u32,
            };
            if !ctx.f.insts.is_valid(inst) {
                let msg = format!("invalid statement handle {}", inst.as_u32());
                ctx.err_entry(slot, msg);
            } else if let Some(first) = ctx.cfg.slot_of(inst) {
                let first_block = ctx.cfg.layout[first.block as usize];
                let msg = format!(
                    "statement is listed more than once: it is already statement {} of {}",
                    first.index + 1,
                    ctx.block_name(first_block)
                );
                ctx.err_entry(slot, msg);
            } else {
                ctx.cfg.slots.set(inst, Some(slot));
            }
        }
    }
}

/// Checks terminators, then builds the CFG and its dominator tree.
pub(crate) fn build_cfg(ctx: &mut Ctx) {
    for bi in 0..ctx.cfg.layout.len() as u32 {
        check_targets(ctx, bi);
    }
    // The graph has the edges the checks accept: targets in the layout, the
    // fall-through block of `gotoifnot` when there is one, each target once.
    ctx.cfg.flow = ControlFlowGraph::with_function(ctx.f);
    debug_assert_eq!(ctx.cfg.flow.blocks(), ctx.cfg.layout.as_slice());
    ctx.cfg.dom = DominatorTree::with_cfg(&ctx.cfg.flow);
}

/// Reports bad terminators of the block at layout index `bi`.
fn check_targets(ctx: &mut Ctx, bi: u32) {
    let block = ctx.cfg.layout[bi as usize];
    let Some(data) = ctx.f.blocks.get(block) else {
        return;
    };
    match &data.term {
        None => ctx.err_term(
            bi,
            "block has no terminator: expected goto, gotoifnot, switch or return".into(),
        ),
        Some(Terminator::Return(_)) => {}
        Some(Terminator::Goto(target)) => {
            jump_target(ctx, bi, *target);
        }
        Some(Terminator::GotoIfNot { target, .. }) => {
            let next = bi + 1;
            if next as usize >= ctx.cfg.layout.len() {
                let msg =
                    "gotoifnot has no next block to fall through to: it ends the layout".into();
                ctx.err_term(bi, msg);
            }
            if jump_target(ctx, bi, *target) == Some(next) {
                let name = ctx.block_name(*target);
                let msg = format!(
                    "gotoifnot jumps to {name} and falls through to {name}: expected two different successors"
                );
                ctx.err_term(bi, msg);
            }
        }
        Some(Terminator::Switch { targets, .. }) => {
            if targets.is_empty() {
                ctx.err_term(bi, "switch has no targets: expected at least one".into());
            }
            // A set rather than a scan, so a switch of many targets stays linear.
            let mut seen = EntitySet::new();
            for &target in targets {
                let Some(t) = jump_target(ctx, bi, target) else {
                    continue;
                };
                if !seen.insert(ctx.cfg.layout[t as usize]) {
                    let msg = format!(
                        "switch lists {} more than once: each target is one edge, and phi entries are per predecessor",
                        ctx.block_name(target)
                    );
                    ctx.err_term(bi, msg);
                }
            }
        }
    }
}

/// The layout index of a jump target, reporting targets outside the layout and
/// jumps to the entry block.
fn jump_target(ctx: &mut Ctx, bi: u32, target: Block) -> Option<u32> {
    if !ctx.f.blocks.is_valid(target) {
        let msg = format!("jump target is invalid block handle {}", target.as_u32());
        ctx.err_term(bi, msg);
        return None;
    }
    let Some(t) = ctx.cfg.index_of(target) else {
        let msg = format!(
            "jump target {} is not in the layout",
            ctx.block_name(target)
        );
        ctx.err_term(bi, msg);
        return None;
    };
    if t == 0 {
        let msg = format!(
            "jump to the entry block {}: the entry block must have no predecessors",
            ctx.block_name(target)
        );
        ctx.err_term(bi, msg);
    }
    Some(t)
}
