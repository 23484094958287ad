//! A loop checkpointed inside another checkpointed loop (docs/reverse.md,
//! "Nested loops"): the outer loop's replay function holds a copy of the
//! inner loop's recording blocks, which are rewritten there into the loop
//! that does not record and takes the inner loop's snapshots, exactly as
//! `primal.rs` rewrites an outermost loop in the forward sweep. The inner
//! loop's own replay is made from the recording forward sweep like any
//! other (`replay.rs`), and the pullback treats it like any other.
//!
//! Nesting goes to any depth, one level at a time: the outer loop may be
//! checkpointed inside the replay of a loop around it in turn. Its own
//! replay is still a copy of the recording sweep, so the inner loop is
//! rewritten there as above; in the replay of the loop around it, where
//! the outer loop's blocks were rewritten not to record, the inner loop's
//! blocks among them run without recording and push nothing of it.
//!
//! Assumes the outer loop's replay was copied from the recording forward
//! sweep with the blocks' labels kept, and that the inner loop's blocks and
//! everything they read are in it. Guarantees: the outer replay pushes, for
//! each run of the inner loop, the inner loop's snapshots and, at its exit,
//! the inner loop's inputs (the values of the recording sweep's pushes
//! there, copied), so that the tape holds what the inner loop's reverse
//! pops when it runs inside the outer loop's.

use super::super::ReverseError;
use super::super::ctx::{Derivation, internal};
use super::{CkLoop, direct, primal};
use irad_ir::entity::SecondaryMap;
use irad_ir::{Block, FuncId, Module, Operand, Value};
use rustc_hash::FxHashMap as HashMap;

/// Rewrites inner loop `ck` in the replay function of `outer` (built from
/// forward sweep `fwd_id`, whose block of each primal block is `fblock` and
/// operand of each primal value `fval`, as they were while it recorded).
/// Returns the new value in the outer replay of each of its values the
/// rewrite renamed (the values pushed at the inner loop's exit), and the one
/// a block an exit edge leads to has of its own (by primal block).
pub(in crate::reverse) fn rewrite(
    cx: &Derivation<'_>,
    module: &mut Module,
    fwd_id: FuncId,
    (fblock, fval): (&[Block], &SecondaryMap<Value, Option<Operand>>),
    (outer, ck, inner): (&CkLoop, &mut CkLoop, &[direct::Inner]),
) -> Result<(HashMap<Value, Value>, primal::ExitShown), ReverseError> {
    let rid = outer
        .replay
        .ok_or_else(|| internal(&cx.floc, "a checkpointed loop without replay"))?;
    let fwd = module
        .get(fwd_id)
        .ok_or_else(|| internal(&cx.floc, "no forward sweep"))?;
    let replay = module
        .get(rid)
        .ok_or_else(|| internal(&cx.floc, "no replay function"))?;
    // The replay's copy of each block of the outer loop keeps its label.
    let by_label: HashMap<u32, Block> = replay
        .layout
        .iter()
        .map(|&b| (replay.blocks[b].label, b))
        .collect();
    let rblock: Vec<Block> = fblock
        .iter()
        .map(|&b| by_label.get(&fwd.blocks[b].label).copied().unwrap_or(b))
        .collect();
    let in_replay = |op: Operand| -> Option<Operand> {
        match op {
            // Through the renamings of loops rewritten there before.
            Operand::Value(v) => outer
                .replayed
                .get(&v)
                .map(|&r| Operand::Value(outer.replay_renamed.get(&r).copied().unwrap_or(r))),
            c => Some(c),
        }
    };
    let mut rval: SecondaryMap<Value, Option<Operand>> = SecondaryMap::new();
    for v in cx.src.values.keys() {
        rval.set(v, fval[v].and_then(in_replay));
    }
    // The inner loop's own values of the forward sweep, as the replay has
    // them.
    let missing = || {
        internal(
            &cx.floc,
            "an inner loop reads a value its outer replay lacks",
        )
    };
    let mut local = ck.clone();
    for v in &mut local.inputs {
        match in_replay(Operand::Value(*v)) {
            Some(Operand::Value(r)) => *v = r,
            _ => return Err(missing()),
        }
    }
    for v in local.sized.iter_mut().flat_map(|s| s.outside.iter_mut()) {
        match in_replay(Operand::Value(*v)) {
            Some(Operand::Value(r)) => *v = r,
            _ => return Err(missing()),
        }
    }
    for (sphi, _) in local.carried.iter_mut().filter_map(|c| c.shadow.as_mut()) {
        if let Some(Operand::Value(r)) = in_replay(Operand::Value(*sphi)) {
            *sphi = r;
        }
    }
    for x in &mut local.left {
        let chosen = x.chosen.as_mut().map(|c| &mut c.entry);
        for v in x.shadow.iter_mut().chain(chosen) {
            if let Some(Operand::Value(r)) = in_replay(Operand::Value(*v)) {
                *v = r;
            }
        }
    }
    for (old, kept) in &mut local.kept_left {
        for v in [old, kept] {
            if let Some(Operand::Value(r)) = in_replay(Operand::Value(*v)) {
                *v = r;
            }
        }
    }
    for kept in local.carried.iter_mut().filter_map(|c| c.kept.as_mut()) {
        kept.entry = in_replay(kept.entry).ok_or_else(missing)?;
        for (_, op) in &mut kept.latches {
            // A kept phi's shadow phi is renamed by `primal.rs` itself.
            if let Some(r) = in_replay(*op) {
                *op = r;
            }
        }
        if let Some(Operand::Value(p)) = in_replay(Operand::Value(kept.phi)) {
            kept.phi = p;
        }
    }
    // The same for the shadows of the kept phis inside it.
    for kept in &mut local.inner_kept {
        for (_, op) in &mut kept.entries {
            if let Some(r) = in_replay(*op) {
                *op = r;
            }
        }
        if let Some(Operand::Value(p)) = in_replay(Operand::Value(kept.phi)) {
            kept.phi = p;
        }
    }
    // The flag the inner loop's exit block pushes (a copy of the recording
    // sweep's phi, without entries yet), and the direct path deciding on
    // each entry whether this run is short enough to record.
    if let Some(flag) = local.flag {
        match in_replay(Operand::Value(flag)) {
            Some(Operand::Value(r)) => local.flag = Some(r),
            _ => return Err(missing()),
        }
    }
    // The same for the number of stretches a thinned loop's exit pushes.
    for (_, count) in &mut local.counts {
        match in_replay(Operand::Value(*count)) {
            Some(Operand::Value(r)) => *count = r,
            _ => return Err(missing()),
        }
    }
    local.run_stretch = Some(super::sized::stretch_at(
        module,
        rid,
        rblock[local.pre],
        &local,
        &cx.floc,
    )?);
    // The loops inside it its direct path records in full, with their
    // flags and counts as the outer replay has them.
    let mut here = Vec::with_capacity(inner.len());
    for i in inner {
        let flag = match in_replay(Operand::Value(i.flag)) {
            Some(Operand::Value(r)) => r,
            _ => return Err(missing()),
        };
        let mut counts = Vec::with_capacity(i.counts.len());
        for &(e, count) in &i.counts {
            match in_replay(Operand::Value(count)) {
                Some(Operand::Value(r)) => counts.push((e, r)),
                _ => return Err(missing()),
            }
        }
        here.push(direct::Inner {
            k: i.k,
            pre: i.pre,
            flag,
            counts,
            direct: i.direct.clone(),
        });
    }
    let path = match &local.direct {
        Some(d) => Some(direct::build(
            cx,
            module,
            rid,
            (&rblock, &rval),
            (&local, d, &here),
        )?),
        None => None,
    };
    let mut shown = HashMap::default();
    let mut shown_at = primal::ExitShown::default();
    primal::rewrite(
        cx,
        module,
        rid,
        (&rblock, &mut rval),
        (&mut local, path.as_ref()),
        (&mut shown, &mut shown_at),
    )?;
    ck.state = local.state;
    Ok((shown, shown_at))
}
