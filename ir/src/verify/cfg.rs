//! Layout, statement placement, terminators and the CFG with its dominator tree.
//!
//! Assumes nothing about the function. Guarantees, once `build_cfg` has run,
//! that `Cfg::layout` lists valid blocks once each (the first is the entry),
//! `slot_of` gives the one place of every listed statement, the successor and
//! predecessor lists hold only layout blocks (predecessors sorted by layout
//! order, without repeats) and `dominates` answers in constant time.

use super::{Ctx, Slot};
use crate::entity::SecondaryMap;
use crate::func::{Block, Inst, Terminator};
use petgraph::algo::dominators::simple_fast;
use petgraph::graph::{DiGraph, NodeIndex};
use smallvec::SmallVec;
use std::collections::HashSet;

/// The verified shape of a function: its layout, placements and CFG.
#[derive(Default)]
pub(crate) struct Cfg {
    /// The layout without invalid or repeated entries.
    pub layout: Vec<Block>,
    /// 1 + the layout index of each block; 0 for a block not in the layout.
    order: SecondaryMap<Block, u32>,
    /// Where each listed statement is (its first listing).
    slots: SecondaryMap<Inst, Option<Slot>>,
    /// Successors by layout index; for `gotoifnot`, the fall-through first;
    /// for `switch`, the targets in index order.
    pub succs: Vec<SmallVec<[u32; 2]>>,
    /// Predecessors by layout index, in layout order.
    pub preds: Vec<Vec<u32>>,
    /// Whether each block is reachable from the entry.
    pub reachable: Vec<bool>,
    /// Preorder and postorder numbers in the dominator tree, for reachable blocks.
    pre: Vec<u32>,
    post: Vec<u32>,
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

    /// Whether the block at layout index `a` dominates the one at `b`; both
    /// must be reachable.
    pub fn dominates(&self, a: u32, b: u32) -> bool {
        let (a, b) = (a as usize, b as usize);
        self.pre[a] <= self.pre[b] && self.post[b] <= self.post[a]
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
    let mut labels: HashSet<u32> = HashSet::new();
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

/// Checks terminators, builds successor and predecessor lists, and computes
/// reachability and the dominator tree.
pub(crate) fn build_cfg(ctx: &mut Ctx) {
    let n = ctx.cfg.layout.len();
    let mut succs = Vec::with_capacity(n);
    for bi in 0..n as u32 {
        succs.push(block_succs(ctx, bi));
    }
    let mut preds = vec![Vec::new(); n];
    for (bi, ss) in succs.iter().enumerate() {
        for &s in ss {
            preds[s as usize].push(bi as u32);
        }
    }
    ctx.cfg.succs = succs;
    ctx.cfg.preds = preds;
    compute_dominators(&mut ctx.cfg);
}

/// The successors of the block at layout index `bi`, reporting bad terminators.
fn block_succs(ctx: &mut Ctx, bi: u32) -> SmallVec<[u32; 2]> {
    let block = ctx.cfg.layout[bi as usize];
    let mut succs = SmallVec::new();
    let Some(data) = ctx.f.blocks.get(block) else {
        return succs;
    };
    match &data.term {
        None => ctx.err_term(
            bi,
            "block has no terminator: expected goto, gotoifnot, switch or return".into(),
        ),
        Some(Terminator::Return(_)) => {}
        Some(Terminator::Goto(target)) => {
            if let Some(t) = jump_target(ctx, bi, *target) {
                succs.push(t);
            }
        }
        Some(Terminator::GotoIfNot { target, .. }) => {
            let next = bi + 1;
            if next as usize >= ctx.cfg.layout.len() {
                let msg =
                    "gotoifnot has no next block to fall through to: it ends the layout".into();
                ctx.err_term(bi, msg);
            } else {
                succs.push(next);
            }
            if let Some(t) = jump_target(ctx, bi, *target) {
                if t == next {
                    let name = ctx.block_name(*target);
                    let msg = format!(
                        "gotoifnot jumps to {name} and falls through to {name}: expected two different successors"
                    );
                    ctx.err_term(bi, msg);
                } else {
                    succs.push(t);
                }
            }
        }
        Some(Terminator::Switch { targets, .. }) => {
            if targets.is_empty() {
                ctx.err_term(bi, "switch has no targets: expected at least one".into());
            }
            // A set rather than a scan of `succs`, so a switch of many targets
            // stays linear.
            let mut seen = HashSet::with_capacity(targets.len());
            for &target in targets {
                let Some(t) = jump_target(ctx, bi, target) else {
                    continue;
                };
                if !seen.insert(t) {
                    let msg = format!(
                        "switch lists {} more than once: each target is one edge, and phi entries are per predecessor",
                        ctx.block_name(target)
                    );
                    ctx.err_term(bi, msg);
                } else {
                    succs.push(t);
                }
            }
        }
    }
    succs
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

/// Fills `reachable`, `pre` and `post` from the immediate dominators that
/// `simple_fast` computes; the tree walk uses an explicit stack.
fn compute_dominators(cfg: &mut Cfg) {
    let n = cfg.layout.len();
    let mut graph: DiGraph<(), (), u32> = DiGraph::with_capacity(n, n * 2);
    for _ in 0..n {
        graph.add_node(());
    }
    for (bi, ss) in cfg.succs.iter().enumerate() {
        for &s in ss {
            graph.add_edge(NodeIndex::new(bi), NodeIndex::new(s as usize), ());
        }
    }
    let doms = simple_fast(&graph, NodeIndex::new(0));
    let mut reachable = vec![false; n];
    let mut children: Vec<Vec<u32>> = vec![Vec::new(); n];
    if let Some(r) = reachable.first_mut() {
        *r = true;
    }
    for (bi, r) in reachable.iter_mut().enumerate().skip(1) {
        if let Some(idom) = doms.immediate_dominator(NodeIndex::new(bi)) {
            *r = true;
            if let Some(c) = children.get_mut(idom.index()) {
                c.push(bi as u32);
            }
        }
    }
    let mut pre = vec![0u32; n];
    let mut post = vec![0u32; n];
    let (mut pre_n, mut post_n) = (0u32, 0u32);
    // (block, index of the next child to visit)
    let mut stack: Vec<(u32, usize)> = vec![(0, 0)];
    pre[0] = pre_n;
    pre_n += 1;
    while let Some(top) = stack.last_mut() {
        let (b, next) = *top;
        match children[b as usize].get(next) {
            Some(&c) => {
                top.1 += 1;
                pre[c as usize] = pre_n;
                pre_n += 1;
                stack.push((c, 0));
            }
            None => {
                post[b as usize] = post_n;
                post_n += 1;
                stack.pop();
            }
        }
    }
    cfg.reachable = reachable;
    cfg.pre = pre;
    cfg.post = post;
}
