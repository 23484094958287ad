//! The direct path of a checkpointed counted loop whose trip count is known
//! on entry: when it runs at most `runs` iterations (`Direct::runs`: the
//! stretch, so that one stretch holds the whole loop and checkpointing would
//! only add a replay; for a loop checkpointed inside another's replay at
//! most `INNER_TRIPS`, what the outer stretch's estimate assumed), the
//! sweep runs a copy of the loop's recording blocks (`copy.rs`) instead of
//! the loop that does not record. The sweep is the forward sweep, or the
//! replay function of the loop around it (`nested.rs`).
//!
//! The block entering the loop decides: with `d` the bound minus the
//! counter's start (the start minus the bound, counting down) and `s` the
//! `runs` times the step's magnitude, the loop runs at most `runs`
//! iterations when `d <= s` (`d < s` for `le`/`ge`). Then a new block pushes
//! `false` (no stretch before this one, which the pullback's stretch step
//! pops as after a first snapshot; for a thinned loop, then the stretch's
//! index 0) and enters the copy, whose exit joins the
//! loop's exit block; there the values of the loop used after it get phis
//! (`primal.rs`), and the flag the exit block pushes says which path ran.
//!
//! The checkpointed loops inside the loop (`Inner`; each has a direct path
//! of its own and a trip count known where the loop is entered) are
//! recorded in full by the copy, as their own direct paths would record
//! them: the test also requires each of their runs to be at most what such
//! a path records, the copy pushes what such a path pushes on entry, and
//! the flag and count phis of their exit blocks get the direct path's
//! values (`false`, 0) from the copy's edges.
//!
//! Assumes the forward sweep is complete, its loop blocks still recording,
//! and the loop's entering block ends with its jump to the header. A wrong
//! decision (the difference wraps for bounds near the ends of i64) only
//! chooses the other path: both give the same gradient. Guarantees: the
//! copy records exactly what the loop's blocks record.

use super::super::ReverseError;
use super::super::ctx::{Derivation, internal};
use super::copy::LoopCopy;
use super::{CkLoop, Direct};
use irad_ir::entity::SecondaryMap;
use irad_ir::{Block, FuncId, Module, Operand, Prim, Terminator, Type, Value};
use rustc_hash::FxHashMap as HashMap;

/// The copy the direct path runs, once made.
pub(in crate::reverse) struct DirectPath {
    /// The block of the copy whose edge enters the loop's exit block.
    pub exit_from: Block,
    /// The copy's value of each value of the forward sweep it reads or
    /// defines.
    pub values: HashMap<Value, Value>,
}

/// A checkpointed loop inside a loop with a direct path
/// (`keep_direct_paths`): the direct path's copy records it in full, as its
/// own direct path would, so the copy pushes what that path pushes on entry
/// (`false` and the stretch's index 0) and gives the phis its exit blocks
/// push the direct path's values (the flag `false`, 0 stretches counted);
/// the outer loop's test also requires its run to be at most `direct.runs`
/// iterations.
pub(in crate::reverse) struct Inner {
    /// Its index among the derivation's loops.
    pub k: usize,
    /// The position of the block entering it.
    pub pre: usize,
    /// Its flag phi in the sweep the copy is made in.
    pub flag: Value,
    /// Its phis of the stretches counted there (by exit block position).
    pub counts: Vec<(usize, Value)>,
    /// Its direct path.
    pub direct: Direct,
}

/// Adds the direct path of checkpointed loop `ck` (of `d`) to the forward
/// sweep `fwd_id` (its block of each primal block `fblock`, its operand of
/// each primal value `fval`), and the decision at the loop's entering block;
/// the copy records the checkpointed loops inside it, `inner`, in full.
pub(in crate::reverse) fn build(
    cx: &Derivation<'_>,
    module: &mut Module,
    fwd_id: FuncId,
    (fblock, fval): (&[Block], &SecondaryMap<Value, Option<Operand>>),
    (ck, d, inner): (&CkLoop, &Direct, &[Inner]),
) -> Result<DirectPath, ReverseError> {
    let floc = &cx.floc;
    let src = module
        .get(fwd_id)
        .ok_or_else(|| internal(floc, "no forward sweep"))?
        .clone();
    let l = &cx.shape.loops.of(ck.k);
    let c = l
        .counted
        .as_ref()
        .ok_or_else(|| internal(floc, "a direct path of a loop not counted"))?;
    let (pre, head, exit) = (fblock[ck.pre], fblock[l.header], fblock[l.exit]);
    let mut copy = LoopCopy::new(cx, ck.k, (&src, fblock), src.clone(), true);
    // The new entry block comes right after the entering block, its
    // fall-through.
    let entry = copy.new_block();
    copy.layout.retain(|&b| b != entry);
    let at = copy
        .layout
        .iter()
        .position(|&b| b == pre)
        .map_or(copy.layout.len(), |p| p + 1);
    copy.layout.insert(at, entry);
    let end = copy.layout.len();
    let head_copy = copy.add_copies(end, false);
    copy.copy_blocks(head_copy, exit)?;
    copy.fill_phis(entry, &|_, entries| {
        entries.iter().find(|(b, _)| *b == pre).map(|(_, op)| *op)
    })?;
    copy.effect(entry, Prim::Push, &[Operand::from(false)]);
    // The index of the (only) stretch, which the stretch step pops before
    // the flag.
    copy.effect(entry, Prim::Push, &[Operand::from(0i64)]);
    copy.f.blocks[entry].term = Some(Terminator::Goto(head_copy));
    for i in inner {
        record_inner(cx, &mut copy, fblock, i)?;
    }
    // The decision, at the end of the entering block.
    let mapped = |op: Operand| match op {
        Operand::Value(v) => fval[v].ok_or_else(|| internal(floc, "an unmapped bound")),
        c => Ok(c),
    };
    let short = |copy: &mut LoopCopy<'_, '_>,
                 (test, init, runs, step): (&super::EntryTest, Operand, Operand, i64)|
     -> Result<Operand, ReverseError> {
        let (bound, start) = (mapped(test.bound)?, mapped(init)?);
        let diff = match test.up {
            true => copy.value(pre, Prim::Isub, &[bound, start], Type::I64),
            false => copy.value(pre, Prim::Isub, &[start, bound], Type::I64),
        };
        let span = match runs {
            Operand::Const(irad_ir::Const::I64(r)) => Operand::from(r.saturating_mul(step)),
            run => copy.value(pre, Prim::Imul, &[run, Operand::from(step)], Type::I64),
        };
        let cmp = if test.strict { Prim::Le } else { Prim::Lt };
        Ok(copy.value(pre, cmp, &[diff, span], Type::Bool))
    };
    let runs = i64::try_from(d.runs).unwrap_or(i64::MAX);
    let step = c.step.saturating_abs();
    let most = match ck.run_stretch {
        // The stretch computed on entry (`sized.rs`), at most `runs`.
        Some((Operand::Value(run), _)) => {
            let run = Operand::Value(run);
            let less = copy.value(pre, Prim::Lt, &[run, Operand::from(runs)], Type::Bool);
            copy.value(
                pre,
                Prim::Select,
                &[less, run, Operand::from(runs)],
                Type::I64,
            )
        }
        _ => Operand::from(runs),
    };
    let mut small = short(&mut copy, (&d.test, c.init, most, step))?;
    // The loops inside it, recorded in full by the copy, run at most as
    // many iterations as their own direct paths record.
    for i in inner {
        let ic = cx
            .shape
            .loops
            .of(i.k)
            .counted
            .as_ref()
            .ok_or_else(|| internal(floc, "a direct path of a loop not counted"))?;
        let most = Operand::from(i64::try_from(i.direct.runs).unwrap_or(i64::MAX));
        let step = ic.step.saturating_abs();
        let also = short(&mut copy, (&i.direct.test, ic.init, most, step))?;
        small = copy.value(pre, Prim::And, &[small, also], Type::Bool);
    }
    match copy.f.blocks[pre].term {
        Some(Terminator::Goto(t)) if t == head => {}
        _ => return Err(internal(floc, "a loop entered by a block that does more")),
    }
    copy.f.blocks[pre].term = Some(Terminator::GotoIfNot {
        cond: small,
        target: head,
    });
    let exit_from = copy.edge_source(head, exit);
    let (f, values) = copy.finish();
    let slot = module
        .get_mut(fwd_id)
        .ok_or_else(|| internal(floc, "no forward sweep"))?;
    *slot = f;
    Ok(DirectPath { exit_from, values })
}

/// Makes the copy record checkpointed loop `i`, inside the copied loop, as
/// its own direct path does: `false` and the stretch's index 0 pushed at
/// the end of its entering block (after that block's own pushes, as the
/// direct path's entry block pushes them), and its exit blocks' flag and
/// count phis entered with `false` and 0 from the copy's edges out of it.
fn record_inner(
    cx: &Derivation<'_>,
    copy: &mut LoopCopy<'_, '_>,
    fblock: &[Block],
    i: &Inner,
) -> Result<(), ReverseError> {
    let floc = &cx.floc;
    let l = cx.shape.loops.of(i.k);
    let pre = copy
        .copy_of(fblock[i.pre])
        .ok_or_else(|| internal(floc, "an inner loop entered from outside the copy"))?;
    copy.effect(pre, Prim::Push, &[Operand::from(false)]);
    copy.effect(pre, Prim::Push, &[Operand::from(0i64)]);
    let phis = std::iter::once((l.exit, i.flag, Operand::from(false))).chain(
        i.counts
            .iter()
            .map(|&(e, count)| (e, count, Operand::from(0i64))),
    );
    for (e, phi, value) in phis {
        let Some(Operand::Value(new)) = copy.vmap.get(&phi).copied() else {
            return Err(internal(floc, "an inner loop's flag not copied"));
        };
        let mut entries = smallvec::SmallVec::new();
        for &q in &cx.shape.preds[e] {
            if !l.contains(q) || !cx.shape.reachable[q] {
                continue;
            }
            let from = copy.edge_source(fblock[q], fblock[e]);
            if !entries.iter().any(|&(b, _)| b == from) {
                entries.push((from, value));
            }
        }
        copy.set_phi_entries(new, entries);
    }
    Ok(())
}
