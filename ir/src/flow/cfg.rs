//! The control-flow graph of a function: successors and predecessors of its
//! layout blocks, keyed by [`Block`].
//!
//! Assumes nothing about the function: the layout may list invalid or
//! repeated handles, blocks may lack terminators, targets may be invalid or
//! outside the layout (the verifier builds the graph of functions it rejects).
//! Guarantees: [`ControlFlowGraph::blocks`] is the layout without invalid
//! handles and later repeats, the first being the entry; edges join only
//! those blocks; a block's successors are its terminator's targets in order
//! (for `gotoifnot`, the fall-through block, the next of `blocks`, first; for
//! `switch`, the targets in index order), without repeats; its predecessors
//! are in layout order, without repeats. Nothing recurses.

use super::graph;
use crate::entity::{EntitySet, SecondaryMap};
use crate::func::{Block, Func, Terminator};
use smallvec::SmallVec;

/// The edges between one function's layout blocks.
#[derive(Clone, Debug, Default)]
pub struct ControlFlowGraph {
    /// The valid layout blocks, each once, in layout order.
    blocks: Vec<Block>,
    /// 1 + the position of each block in `blocks`; 0 for blocks not there.
    order: SecondaryMap<Block, u32>,
    succs: SecondaryMap<Block, SmallVec<[Block; 2]>>,
    preds: SecondaryMap<Block, SmallVec<[Block; 2]>>,
}

impl ControlFlowGraph {
    /// The CFG of `func`'s current layout and terminators.
    pub fn with_function(func: &Func) -> ControlFlowGraph {
        let mut cfg = ControlFlowGraph::default();
        for &block in &func.layout {
            if func.blocks.is_valid(block) && !cfg.contains(block) {
                cfg.blocks.push(block);
                let n = u32::try_from(cfg.blocks.len()).unwrap_or(u32::MAX);
                cfg.order.set(block, n);
            }
        }
        for i in 0..cfg.blocks.len() {
            let block = cfg.blocks[i];
            let next = cfg.blocks.get(i + 1).copied();
            let targets: SmallVec<[Block; 2]> =
                match func.blocks.get(block).and_then(|d| d.term.as_ref()) {
                    Some(Terminator::Goto(t)) => SmallVec::from_slice(&[*t]),
                    Some(Terminator::GotoIfNot { target, .. }) => {
                        next.into_iter().chain([*target]).collect()
                    }
                    Some(Terminator::Switch { targets, .. }) => targets.iter().copied().collect(),
                    Some(Terminator::Return(_)) | None => SmallVec::new(),
                };
            let out = cfg.edges(targets);
            for &s in &out {
                // Blocks are visited in layout order and `out` has no
                // repeats, so each predecessor list stays sorted and unique.
                cfg.preds.get_mut(s).push(block);
            }
            cfg.succs.set(block, out);
        }
        cfg
    }

    /// The entry block: the first of [`ControlFlowGraph::blocks`].
    pub fn entry(&self) -> Option<Block> {
        self.blocks.first().copied()
    }

    /// The layout blocks the graph is about, in layout order, each once.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// Whether `block` is one of [`ControlFlowGraph::blocks`].
    pub fn contains(&self, block: Block) -> bool {
        *self.order.get(block) != 0
    }

    /// The position of `block` in [`ControlFlowGraph::blocks`].
    pub fn layout_index(&self, block: Block) -> Option<usize> {
        self.order.get(block).checked_sub(1).map(|i| i as usize)
    }

    /// The block after `block` in the layout (where `gotoifnot` falls through).
    pub fn next_in_layout(&self, block: Block) -> Option<Block> {
        self.blocks.get(self.layout_index(block)? + 1).copied()
    }

    /// The successors of `block` (none for blocks outside the graph).
    pub fn succs(&self, block: Block) -> &[Block] {
        self.succs.get(block)
    }

    /// The predecessors of `block`, in layout order.
    pub fn preds(&self, block: Block) -> &[Block] {
        self.preds.get(block)
    }

    /// The blocks reachable from the entry.
    pub fn reachable(&self) -> EntitySet<Block> {
        match self.entry() {
            Some(entry) => graph::reachable(entry, |b| self.succs(b).iter().copied()),
            None => EntitySet::new(),
        }
    }

    /// The blocks reachable from the entry in reverse postorder of a
    /// depth-first search that takes successors in order: the entry first,
    /// every block after each block that dominates it.
    pub fn reverse_postorder(&self) -> Vec<Block> {
        match self.entry() {
            Some(entry) => graph::reverse_postorder(entry, |b| self.succs(b).iter().copied()),
            None => Vec::new(),
        }
    }

    /// `targets` without blocks outside the graph and without repeats (a
    /// set for long lists, so a switch of many targets stays linear).
    fn edges(&self, targets: SmallVec<[Block; 2]>) -> SmallVec<[Block; 2]> {
        let mut out: SmallVec<[Block; 2]> = SmallVec::with_capacity(targets.len());
        let mut seen = EntitySet::new();
        for t in targets {
            let fresh = if targets_are_few(out.len()) {
                !out.contains(&t)
            } else {
                if seen.is_empty() {
                    seen.extend(out.iter().copied());
                }
                seen.insert(t)
            };
            if self.contains(t) && fresh {
                out.push(t);
            }
        }
        out
    }
}

/// Whether a successor list is short enough to search for repeats.
fn targets_are_few(n: usize) -> bool {
    n < 8
}
