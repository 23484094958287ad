//! The dominator tree of a function's CFG: immediate dominators, the tree's
//! children, reverse postorder and reachability, keyed by [`Block`].
//!
//! Assumes a [`ControlFlowGraph`] (of any function: edges into the entry are
//! allowed and ignored as the verifier reports them). Guarantees: a block is
//! reachable when a path from the entry leads to it; the reverse postorder is
//! [`ControlFlowGraph::reverse_postorder`]; every reachable block but the
//! entry has an immediate dominator, the entry and unreachable blocks none;
//! children are listed in reverse postorder; [`DominatorTree::dominates`]
//! answers in constant time from preorder and postorder numbers of the tree.
//! Nothing recurses.

use super::cfg::ControlFlowGraph;
use super::graph;
use crate::entity::SecondaryMap;
use crate::func::Block;
use smallvec::SmallVec;

/// Dominators of one function's blocks.
#[derive(Clone, Debug, Default)]
pub struct DominatorTree {
    rpo: Vec<Block>,
    /// 1 + the position in `rpo`; 0 for unreachable blocks.
    rpo_num: SecondaryMap<Block, u32>,
    idom: SecondaryMap<Block, Option<Block>>,
    children: SecondaryMap<Block, SmallVec<[Block; 2]>>,
    /// Preorder and postorder numbers in the tree, for reachable blocks.
    pre: SecondaryMap<Block, u32>,
    post: SecondaryMap<Block, u32>,
}

impl DominatorTree {
    /// The dominator tree of `cfg`.
    pub fn with_cfg(cfg: &ControlFlowGraph) -> DominatorTree {
        let rpo = cfg.reverse_postorder();
        let idom = graph::immediate_dominators(&rpo, |b| cfg.preds(b).iter().copied());
        let mut dt = DominatorTree {
            rpo,
            idom,
            ..DominatorTree::default()
        };
        for (i, &b) in dt.rpo.iter().enumerate() {
            dt.rpo_num.set(b, u32::try_from(i + 1).unwrap_or(u32::MAX));
            if let Some(p) = dt.idom[b] {
                dt.children.get_mut(p).push(b);
            }
        }
        dt.number_tree();
        dt
    }

    /// The reachable blocks in reverse postorder, the entry first.
    pub fn reverse_postorder(&self) -> &[Block] {
        &self.rpo
    }

    /// The position of `block` in the reverse postorder, if it is reachable.
    pub fn rpo_index(&self, block: Block) -> Option<usize> {
        self.rpo_num.get(block).checked_sub(1).map(|i| i as usize)
    }

    /// Whether a path from the entry leads to `block`.
    pub fn is_reachable(&self, block: Block) -> bool {
        *self.rpo_num.get(block) != 0
    }

    /// The immediate dominator of `block`; `None` for the entry and for
    /// unreachable blocks.
    pub fn idom(&self, block: Block) -> Option<Block> {
        *self.idom.get(block)
    }

    /// The blocks `block` immediately dominates, in reverse postorder.
    pub fn children(&self, block: Block) -> &[Block] {
        self.children.get(block)
    }

    /// Whether `a` dominates `b`: every path from the entry to `b` passes
    /// through `a`. A block dominates itself; otherwise both must be
    /// reachable (false when either is not).
    pub fn dominates(&self, a: Block, b: Block) -> bool {
        if a == b {
            return true;
        }
        if !self.is_reachable(a) || !self.is_reachable(b) {
            return false;
        }
        self.pre[a] <= self.pre[b] && self.post[b] <= self.post[a]
    }

    /// Numbers the tree in preorder and postorder (an explicit stack).
    fn number_tree(&mut self) {
        let Some(&entry) = self.rpo.first() else {
            return;
        };
        let (mut pre_n, mut post_n) = (0u32, 0u32);
        // (block, index of the next child to visit)
        let mut stack: Vec<(Block, usize)> = vec![(entry, 0)];
        self.pre.set(entry, pre_n);
        pre_n += 1;
        while let Some(top) = stack.last_mut() {
            let (b, next) = *top;
            match self.children[b].get(next) {
                Some(&c) => {
                    top.1 += 1;
                    self.pre.set(c, pre_n);
                    pre_n += 1;
                    stack.push((c, 0));
                }
                None => {
                    self.post.set(b, post_n);
                    post_n += 1;
                    stack.pop();
                }
            }
        }
    }
}
