//! Natural loops of a function: headers, back edges, bodies and nesting.
//!
//! Assumes a [`ControlFlowGraph`] and its [`DominatorTree`]. A back edge is
//! an edge `n -> h` from a reachable block `n` that `h` dominates; the
//! natural loop of header `h` is `h` with every block that reaches one of its
//! back edges' sources without passing through `h`. (A block that no path
//! from the entry reaches can belong to a body when it jumps into it: every
//! block dominates it vacuously.) A cycle with no such edge (an irreducible
//! one, entered at two places) is no natural loop and is not reported.
//! Guarantees: loops are numbered in the order their first back edge is
//! found walking the reverse postorder, successors in order; latches are
//! listed in the header's predecessor order and bodies in layout order; the
//! parent of a loop is the smallest other loop whose body holds its header;
//! a block's innermost loop is the smallest loop holding it. Nothing recurses.

use super::cfg::ControlFlowGraph;
use super::dom::DominatorTree;
use crate::entity::{EntitySet, PrimaryMap, SecondaryMap};
use crate::func::Block;

crate::entity!(
    /// A natural loop of a [`LoopAnalysis`].
    Loop,
    "loop"
);

/// The natural loops of one function.
#[derive(Clone, Debug, Default)]
pub struct LoopAnalysis {
    loops: PrimaryMap<Loop, LoopData>,
    /// The loop each header heads.
    header_of: SecondaryMap<Block, Option<Loop>>,
    /// The innermost loop of each block.
    innermost: SecondaryMap<Block, Option<Loop>>,
}

/// What a [`LoopAnalysis`] knows about one loop.
#[derive(Clone, Debug)]
struct LoopData {
    header: Block,
    latches: Vec<Block>,
    /// Every block of the body, by handle (for `contains`): a sorted list
    /// rather than a set of bits, which would take room for every block of
    /// the function in every loop.
    body: Vec<Block>,
    /// The body's blocks of the layout, in layout order.
    blocks: Vec<Block>,
    parent: Option<Loop>,
    depth: u32,
}

impl LoopAnalysis {
    /// The natural loops of `cfg`, whose dominator tree is `dom`.
    pub fn compute(cfg: &ControlFlowGraph, dom: &DominatorTree) -> LoopAnalysis {
        let mut la = LoopAnalysis::default();
        for &b in dom.reverse_postorder() {
            for &h in cfg.succs(b) {
                if dom.dominates(h, b) && la.header_of[h].is_none() {
                    let lp = la.loops.push(LoopData {
                        header: h,
                        latches: Vec::new(),
                        body: Vec::new(),
                        blocks: Vec::new(),
                        parent: None,
                        depth: 1,
                    });
                    la.header_of.set(h, Some(lp));
                }
            }
        }
        // One set of marks for every loop, cleared through the body found:
        // the work is the sum of the bodies' sizes, not the loops times
        // the function's blocks (thousands of loops in a row).
        let mut marks = EntitySet::new();
        for data in la.loops.values_mut() {
            let h = data.header;
            data.latches = cfg
                .preds(h)
                .iter()
                .copied()
                .filter(|&p| dom.is_reachable(p) && dom.dominates(h, p))
                .collect();
            marks.insert(h);
            data.body.push(h);
            let mut work = data.latches.clone();
            while let Some(x) = work.pop() {
                if marks.insert(x) {
                    data.body.push(x);
                    work.extend(cfg.preds(x).iter().copied());
                }
            }
            for &b in &data.body {
                marks.remove(b);
            }
            let mut blocks: Vec<(usize, Block)> = data
                .body
                .iter()
                .filter_map(|&b| Some((cfg.layout_index(b)?, b)))
                .collect();
            blocks.sort_unstable();
            data.blocks = blocks.into_iter().map(|(_, b)| b).collect();
            data.body.sort_unstable();
        }
        la.nest();
        la
    }

    /// Every loop, in the order they were found.
    pub fn loops(&self) -> impl DoubleEndedIterator<Item = Loop> + ExactSizeIterator + use<> {
        self.loops.keys()
    }

    /// The number of loops.
    pub fn len(&self) -> usize {
        self.loops.len()
    }

    /// Whether there is no loop.
    pub fn is_empty(&self) -> bool {
        self.loops.is_empty()
    }

    /// The header of `lp`.
    pub fn header(&self, lp: Loop) -> Block {
        self.loops[lp].header
    }

    /// The sources of `lp`'s back edges, in the header's predecessor order.
    pub fn latches(&self, lp: Loop) -> &[Block] {
        &self.loops[lp].latches
    }

    /// The blocks of `lp`, header included, in layout order.
    pub fn blocks(&self, lp: Loop) -> &[Block] {
        &self.loops[lp].blocks
    }

    /// Whether `block` belongs to `lp` (or to a loop inside it).
    pub fn contains(&self, lp: Loop, block: Block) -> bool {
        self.loops[lp].body.binary_search(&block).is_ok()
    }

    /// The smallest loop other than `lp` that holds `lp`'s header.
    pub fn parent(&self, lp: Loop) -> Option<Loop> {
        self.loops[lp].parent
    }

    /// How many loops hold `lp`'s header, `lp` included (1 for an outermost loop).
    pub fn depth(&self, lp: Loop) -> u32 {
        self.loops[lp].depth
    }

    /// The loop `block` heads, if any.
    pub fn loop_headed_by(&self, block: Block) -> Option<Loop> {
        *self.header_of.get(block)
    }

    /// The innermost loop holding `block`.
    pub fn innermost(&self, block: Block) -> Option<Loop> {
        *self.innermost.get(block)
    }

    /// How many loops hold `block` (0 outside every loop).
    pub fn loop_depth(&self, block: Block) -> u32 {
        self.innermost(block).map_or(0, |l| self.depth(l))
    }

    /// Fills parents, depths and innermost loops: loops by increasing size,
    /// so the first loop found holding something is the smallest.
    fn nest(&mut self) {
        let mut by_size: Vec<Loop> = self.loops.keys().collect();
        by_size.sort_by_key(|&l| self.loops[l].blocks.len());
        // A loop's parent is the first loop after it in `by_size` whose body
        // holds its header: walking `by_size` in order, each loop becomes
        // the parent of the loops headed in its body that come before it
        // and have none yet (work: the sum of the bodies' sizes).
        let mut rank: SecondaryMap<Loop, usize> = SecondaryMap::new();
        for (k, &l) in by_size.iter().enumerate() {
            rank.set(l, k);
        }
        for &l in &by_size {
            for i in 0..self.loops[l].body.len() {
                let b = self.loops[l].body[i];
                if let Some(o) = self.header_of[b]
                    && rank[o] < rank[l]
                    && self.loops[o].parent.is_none()
                {
                    self.loops[o].parent = Some(l);
                }
            }
        }
        // Smallest first: a block keeps the first loop that claims it.
        for &l in &by_size {
            for &b in &self.loops[l].blocks {
                if self.innermost[b].is_none() {
                    self.innermost.set(b, Some(l));
                }
            }
        }
        // Parents are larger, so they come later in `by_size`: set depths
        // from the largest down.
        for &l in by_size.iter().rev() {
            let depth = self.loops[l].parent.map_or(1, |p| self.loops[p].depth + 1);
            self.loops[l].depth = depth;
        }
    }
}
