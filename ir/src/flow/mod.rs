//! Control flow of one function, the one place the verifier, the passes and
//! codegen get it from: the [`ControlFlowGraph`] (successors, predecessors),
//! the [`DominatorTree`] (reverse postorder, reachability, immediate
//! dominators, dominance) and the [`LoopAnalysis`] (natural loops, back
//! edges, nesting), all keyed by [`Block`](crate::Block), plus the
//! [`graph`] kernels they are built from, which also serve graphs that are
//! not a function's CFG (the reversed CFG, the call graph).
//!
//! Assumes nothing of the function for the CFG (see [`cfg`](mod@cfg)); the
//! others assume the analyses they are computed from are current: any edit
//! of the layout or of a terminator makes them stale, and a pass that edits
//! the CFG computes them again. Guarantees: every order is deterministic
//! (layout order, terminator order, reverse postorder), and nothing
//! recurses.
//!
//! ```
//! use irad_ir::flow::{ControlFlowGraph, DominatorTree};
//! use irad_ir::text::parse_module;
//!
//! let m = parse_module(
//!     "func @f(%c: bool) -> f64 {\n#1:\n  gotoifnot %c, #3\n#2:\n  goto #3\n#3:\n  return 1.0\n}\n",
//! )
//! .unwrap();
//! let func = &m[m.by_name("f").unwrap()];
//! let cfg = ControlFlowGraph::with_function(func);
//! let dom = DominatorTree::with_cfg(&cfg);
//! let [b1, b2, b3] = func.layout[..] else { panic!() };
//! assert_eq!(cfg.succs(b1), &[b2, b3]);
//! assert_eq!(cfg.preds(b3), &[b1, b2]);
//! assert_eq!(dom.idom(b3), Some(b1));
//! ```

pub mod cfg;
pub mod dom;
pub mod graph;
pub mod loops;

pub use cfg::ControlFlowGraph;
pub use dom::DominatorTree;
pub use loops::{Loop, LoopAnalysis};
