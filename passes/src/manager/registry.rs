//! The registry of the pass manager: one entry per pass (`PASSES`, in the
//! order of `PassId::ALL`), the normalisation pipeline and its group
//! `simplify`, and the prefixes of the pipeline `irad dump --after` runs.
//!
//! Assumes nothing. Guarantees: every `PassId` has exactly one entry, at its
//! own index (a unit test checks it), and a group names only one-function
//! passes.

use super::{Pass, PassError, PassId, Run};
use crate::normalise as passes_fn;
use crate::pe;

/// The passes of the group `simplify`, the first step of the normalisation
/// pipeline, in the order each round runs them. They are one group because
/// each can undo another's guarantee: removing a trivial phi can substitute a
/// constant into a `gotoifnot` (which then folds, making blocks unreachable,
/// whose removal drops phi entries and leaves more phis trivial) or into the
/// first operand of an `add` (which `uniform_constant_operands` then moves
/// second). The other passes cannot undo these guarantees: splitting edges and
/// merging returns add no statement but a non-trivial phi, no branch and no
/// unreachable block.
///
/// The group terminates: `fold_constant_branches`, `remove_unreachable_blocks`
/// and `remove_trivial_phis`, whenever they change a function, remove a
/// `gotoifnot`, a block or a statement from its layout and add none; after the
/// first round, `uniform_constant_operands` changes a function only where
/// `remove_trivial_phis` substituted a constant the round before.
pub const SIMPLIFY: &[PassId] = &[
    PassId::UniformConstantOperands,
    PassId::FoldConstantBranches,
    PassId::RemoveUnreachableBlocks,
    PassId::RemoveTrivialPhis,
];

/// Every pass of the normalisation pipeline, which [`normalise_until`] and
/// `irad dump --after` accept, in pipeline order, each placed where its
/// output is: the passes of [`SIMPLIFY`] (the pipeline up to such a pass
/// stops after its first run, in the group's first round), then the group
/// `simplify` (its fixpoint), then the passes that run once after it.
pub const NORMALISE: &[PassId] = &[
    PassId::UniformConstantOperands,
    PassId::FoldConstantBranches,
    PassId::RemoveUnreachableBlocks,
    PassId::RemoveTrivialPhis,
    PassId::Simplify,
    PassId::SplitCriticalEdges,
    PassId::SingleReturn,
];

/// What [`normalise()`] runs, in order. `simplify` comes first: it folds
/// constant branches and drops the blocks this makes unreachable (and their
/// phi entries) before any edge is split. `single_return` comes last because
/// the block it appends must stay last and it creates no critical edge (its
/// new block's predecessors each end in `goto`).
pub(super) const PIPELINE: &[PassId] = &[
    PassId::Simplify,
    PassId::SplitCriticalEdges,
    PassId::SingleReturn,
];

/// The registry, in the order of [`PassId::ALL`] (a unit test checks it).
pub(super) static PASSES: &[Pass] = &[
    Pass {
        id: PassId::UniformConstantOperands,
        run: Run::Func(passes_fn::uniform_constant_operands),
        doc: "a constant operand of an exchangeable binary primitive comes second",
    },
    Pass {
        id: PassId::FoldConstantBranches,
        run: Run::Func(passes_fn::fold_constant_branches),
        doc: "`gotoifnot true/false` becomes a `goto` of the taken successor",
    },
    Pass {
        id: PassId::RemoveUnreachableBlocks,
        run: Run::Func(passes_fn::remove_unreachable_blocks),
        doc: "every block of the layout is reachable from the entry",
    },
    Pass {
        id: PassId::RemoveTrivialPhis,
        run: Run::Func(passes_fn::remove_trivial_phis),
        doc: "no phi whose entries are all one operand (or the phi itself)",
    },
    Pass {
        id: PassId::Simplify,
        run: Run::Fixpoint(SIMPLIFY),
        doc: "the passes of SIMPLIFY, repeated until none changes anything",
    },
    Pass {
        id: PassId::SplitCriticalEdges,
        run: Run::Func(passes_fn::split_critical_edges),
        doc: "no edge joins a block with several successors to one with several predecessors",
    },
    Pass {
        id: PassId::SingleReturn,
        run: Run::Func(passes_fn::single_return),
        doc: "at most one `return`, in the last block of the layout",
    },
    Pass {
        id: PassId::Forward,
        run: Run::Stage,
        doc: "the forward rules (`@f.fwd`) of some functions and of what they call",
    },
    Pass {
        id: PassId::Reverse,
        run: Run::Stage,
        doc: "`@f.rev` and its pieces (forward sweep, pullback) for some functions",
    },
    Pass {
        id: PassId::Optimise,
        run: Run::Stage,
        doc: "an optimiser schedule over some functions (docs/optimise.md)",
    },
    Pass {
        id: PassId::Specialise,
        run: Run::Stage,
        doc: "`@f.spec`: a function specialised on known arguments (docs/pe.md)",
    },
    Pass {
        id: PassId::Inline,
        run: Run::Module(pe::inline),
        doc: "small direct calls replaced by the callee's body",
    },
    Pass {
        id: PassId::Unroll,
        run: Run::Module(pe::unroll),
        doc: "counted loops of known trip count unrolled",
    },
    Pass {
        id: PassId::Devirtualise,
        run: Run::Module(pe::devirtualise),
        doc: "calls of a known function value made direct",
    },
];

/// Every registered pass, each once, in the order of [`PassId::ALL`].
pub fn passes() -> &'static [Pass] {
    PASSES
}

/// The registered pass `id`.
pub fn find(id: PassId) -> &'static Pass {
    // The registry lists every pass in the order of `PassId::ALL`; a unit
    // test checks it.
    &PASSES[id as usize]
}

/// The steps of the normalisation pipeline, in order: the group `simplify`,
/// then the passes that run once after it.
pub fn normalise_pipeline() -> Vec<PassId> {
    PIPELINE.to_vec()
}

/// The normalisation pipeline until the pass `name` has run, for
/// `irad dump --after`: for a step of the pipeline (`simplify` included), the
/// pipeline up to and including it; for a pass of `simplify`, the group's
/// first round up to and including that pass, each pass run once (so the
/// module is the one `--all-passes` shows first under that name). `name`
/// must be one of [`NORMALISE`].
pub fn normalise_until(name: PassId) -> Result<Vec<PassId>, PassError> {
    let mut pipeline = Vec::new();
    for &step in PIPELINE {
        if step == name {
            pipeline.push(step);
            return Ok(pipeline);
        }
        if let Run::Fixpoint(group) = find(step).run
            && let Some(end) = group.iter().position(|&n| n == name)
        {
            pipeline.extend_from_slice(&group[..=end]);
            return Ok(pipeline);
        }
        pipeline.push(step);
    }
    Err(PassError::UnknownPass {
        name: name.to_string(),
        known: NORMALISE.iter().map(|p| p.name()).collect(),
    })
}
