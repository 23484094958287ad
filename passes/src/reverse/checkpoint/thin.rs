//! Thinned snapshots (docs/reverse.md, "Bounded snapshots"): the part of a
//! thinned checkpointed loop's replay function that splits a segment of
//! several stretches. Below, the binary counter's; a loop of binomial
//! schedule (`revolve.rs`) splits where that schedule says for the
//! segment's slots, which the snapshot holds after the stretch's index,
//! pushes the slots back with the first part's snapshot and goes on with
//! the second part with a slot fewer.
//!
//! The forward sweep of a thinned loop (`primal.rs`) keeps the snapshots of
//! a binary counter of the stretches: when `C` stretches have started, the
//! snapshots held start the runs of stretches that the binary digits of `C`
//! give (`C = 13`: stretches 0-7, 8-11 and 12), so at most `1 + log2 C` are
//! on the tape. Each snapshot also holds the index of its stretch. The
//! pullback hands each replay the end of its segment (the number of
//! stretches for the last one, then the index of the stretch just pulled
//! back). A replay whose segment has more than one stretch splits it: it
//! pushes the snapshot back as the snapshot of the segment's first half,
//! runs the first half forward without recording (the loop's primal
//! statements, as the forward sweep does), pushes a flag (`true`: a stretch
//! comes before), and goes on with the second half, until one stretch is
//! left, which it records as any replay does. Every part it pushes back
//! again starts a run of a power of two stretches that ends where the next
//! one starts, so the tape always holds at most `1 + log2 C` snapshots, and
//! each iteration runs forward at most `2 + log2 C` times.
//!
//! A loop carrying arrays through its header phis pushes back, besides,
//! copies of the carried arrays (restored by the replay before the split,
//! then advanced) and the kept arrays' shadows, which the advance carries;
//! when its carried arrays have shadows, its replay took the snapshot's
//! flag off the tape, and the split pushes it back first.
//!
//! Assumes the replay function was built with its split site
//! ([`SplitSite`], `replay.rs`).
//! Guarantees: the snapshot pushed back is the one popped (the same values
//! and copies of the same arrays, in the forward sweep's order); the advance
//! runs the primal statements in the same order as the forward sweep, so
//! the stretch recorded starts from the very values the forward sweep had
//! there.

use super::super::ReverseError;
use super::super::ctx::{Derivation, build_err, emit_value, err, internal};
use super::revolve::{self, Splitting};
use super::{CkLoop, primal};
use irad_ir::entity::SecondaryMap;
use irad_ir::{Block, FuncBuilder, FuncId, Module, Operand, Prim, Value};

/// Where a thinned loop's replay splits its segment: the block `JOIN`
/// holding the start of the part left (phis: its stretch's index and the
/// header values), the block `SPLIT` it goes to when that part has more
/// than one stretch, and the part's length.
#[derive(Clone, Debug, PartialEq)]
pub(in crate::reverse) struct SplitSite {
    /// The block holding the part's start.
    pub join: Block,
    /// The block splitting it (a placeholder jump until [`fill`]).
    pub split: Block,
    /// The phi of the part's first stretch's index.
    pub start: Value,
    /// The phis of the header values at its start.
    pub state: Vec<Value>,
    /// The part's number of stretches.
    pub length: Value,
    /// The phi of the part's flag (a stretch before it?), for a loop
    /// carrying arrays with shadows, whose replay takes the flag off the
    /// tape with the snapshot.
    pub flag: Option<Value>,
    /// The phi of the part's slots, for a loop of binomial schedule
    /// (`revolve.rs`), whose snapshots hold them.
    pub slots: Option<Value>,
    /// The phis of the kept carried arrays' shadows at its start, in the
    /// order of the loop's kept carried arrays.
    pub kept: Vec<Value>,
    /// The stretch, as the replay computed it at its entry, or popped
    /// with the snapshot when saved (`sized.rs`).
    pub stretch: Operand,
}

/// Fills the split of thinned loop `ck`'s replay: pushes the snapshot of
/// the part's first half (binomial: first part, with the part's slots)
/// back, advances over it without recording, pushes the flag and comes back
/// to `JOIN` with the rest (binomial: with a slot fewer). `fwd_id`
/// is the forward sweep, whose block of each primal block is `fblock`, and
/// `fval` its operand of each primal value as it was while it recorded.
pub(super) fn fill(
    cx: &Derivation<'_>,
    module: &mut Module,
    fwd_id: FuncId,
    (fblock, fval): (&[Block], &SecondaryMap<Value, Option<Operand>>),
    ck: &CkLoop,
) -> Result<(), ReverseError> {
    let (Some(site), Some(rid)) = (ck.split.as_ref(), ck.replay) else {
        return Err(internal(&cx.floc, "a thinned loop without its split"));
    };
    let build = build_err(&cx.floc);
    let e = |r: Result<Operand, String>| r.map_err(|m| err(&cx.floc, m));
    let l = &cx.shape.loops.of(ck.k);
    // The loop's blocks in the forward sweep's layout order, which keeps
    // every `gotoifnot` falling through to the block it did.
    let fwd = module
        .get(fwd_id)
        .ok_or_else(|| internal(&cx.floc, "no forward sweep"))?;
    let mut order: Vec<usize> = l.members.to_vec();
    order.sort_by_key(|&i| fwd.layout.iter().position(|&b| b == fblock[i]));
    // The replay's operand of each primal value defined before the loop.
    let mut pmap: SecondaryMap<Value, Option<Operand>> = SecondaryMap::new();
    for v in cx.src.values.keys() {
        let op = fval[v].and_then(|op| match op {
            Operand::Value(x) => ck
                .replayed
                .get(&x)
                .map(|&r| Operand::Value(ck.replay_renamed.get(&r).copied().unwrap_or(r))),
            c => Some(c),
        });
        pmap.set(v, op);
    }
    let f = module
        .get_mut(rid)
        .ok_or_else(|| internal(&cx.floc, "no replay function"))?;
    f.blocks[site.split].term = None;
    let params = f.params.clone();
    let mut fb = FuncBuilder::new(module, rid).map_err(&build)?;
    fb.switch_to_block(site.split).map_err(&build)?;
    let start = Operand::Value(site.start);
    let length = Operand::Value(site.length);
    // The first part: half of the part (binary counter), or where the
    // binomial schedule splits it with the part's slots.
    let (half, searched) = match site.slots {
        Some(s) => {
            let (m, blocks) =
                revolve::split(&mut fb, (length, Operand::Value(s)), Splitting::Replay)
                    .map_err(|m| err(&cx.floc, m))?;
            (m, blocks.to_vec())
        }
        None => (
            e(emit_value(
                &mut fb,
                Prim::Idiv,
                &[length, Operand::from(2i64)],
            ))?,
            Vec::new(),
        ),
    };
    // The snapshot of the first half, as the forward sweep pushed it (its
    // flag is still on the tape, under it, unless the replay took it off).
    if let Some(flag) = site.flag {
        fb.prim(Prim::Push, &[Operand::Value(flag)])
            .map_err(&build)?;
    }
    fb.prim(Prim::Push, &[start]).map_err(&build)?;
    // The first part keeps the part's slots.
    if let Some(s) = site.slots {
        fb.prim(Prim::Push, &[Operand::Value(s)]).map_err(&build)?;
    }
    if ck
        .sized
        .as_ref()
        .is_some_and(super::sized::RunStretch::saved)
    {
        fb.prim(Prim::Push, &[site.stretch]).map_err(&build)?;
    }
    for &v in &site.state {
        fb.prim(Prim::Push, &[Operand::Value(v)]).map_err(&build)?;
    }
    for leaf in &ck.arrays {
        let mut a = Operand::Value(params[leaf.input]);
        for &k in &leaf.path {
            a = e(emit_value(&mut fb, Prim::Getfield, &[a, Operand::from(k)]))?;
        }
        let copy = e(emit_value(&mut fb, Prim::Copy, &[a]))?;
        fb.prim(Prim::Push, &[copy]).map_err(&build)?;
    }
    // Copies of the carried arrays, restored before the first split and
    // advanced since, then the kept ones' shadows.
    for c in &ck.carried {
        let a = site
            .state
            .get(c.phi)
            .copied()
            .ok_or_else(|| internal(&cx.floc, "a carried array without its phi"))?;
        let copy = e(emit_value(&mut fb, Prim::Copy, &[Operand::Value(a)]))?;
        fb.prim(Prim::Push, &[copy]).map_err(&build)?;
    }
    for &k in &site.kept {
        fb.prim(Prim::Push, &[Operand::Value(k)]).map_err(&build)?;
    }
    let target = e(emit_value(&mut fb, Prim::Imul, &[half, site.stretch]))?;
    let from = fb
        .current_block()
        .ok_or_else(|| internal(&cx.floc, "no block to advance from"))?;
    let done = fb.create_block();
    drop(fb);
    let init = site.state.iter().map(|&v| Operand::Value(v)).collect();
    let advanced = advancing(cx, ck, site)?;
    let ((values, kept), blocks) = primal::advance(
        cx,
        module,
        (rid, &advanced),
        (pmap, &order),
        (from, done),
        (init, target),
    )?;
    let mut fb = FuncBuilder::new(module, rid).map_err(&build)?;
    fb.switch_to_block(done).map_err(&build)?;
    // The second half has a stretch before it.
    if site.flag.is_none() {
        fb.prim(Prim::Push, &[Operand::from(true)])
            .map_err(&build)?;
    }
    let next = e(emit_value(&mut fb, Prim::Iadd, &[start, half]))?;
    // The second part has a slot fewer: its start is not on the tape.
    let fewer = match site.slots {
        Some(s) => Some((
            s,
            e(emit_value(
                &mut fb,
                Prim::Isub,
                &[Operand::Value(s), Operand::from(1i64)],
            ))?,
        )),
        None => None,
    };
    // A carried array made afresh in every iteration goes on as a new copy
    // of the one the advance ends with, so that the part's phi owns what it
    // holds: the part has a stretch before it, so the array it starts with
    // is one an iteration made, whose identity does not matter; unless
    // another carried array may be it ([`super::Carried::alias`]), whose
    // identity does.
    let mut state = Vec::with_capacity(values.len());
    let ends = values.clone();
    for (j, v) in values.into_iter().enumerate() {
        let renew = |(i, c): (usize, &super::Carried)| {
            c.phi == j && c.afresh() && !super::shared(&ck.carried, i)
        };
        state.push(match ck.carried.iter().enumerate().any(renew) {
            true => e(emit_value(&mut fb, Prim::Copy, &[v]))?,
            false => v,
        });
    }
    let cascade = hand_on_shared(cx, &mut fb, (ck, site), &ends, &mut state)?;
    let last = fb
        .current_block()
        .ok_or_else(|| internal(&cx.floc, "no block to hand on from"))?;
    fb.goto(site.join).map_err(&build)?;
    if let Some(flag) = site.flag {
        fb.add_phi_entry(flag, last, Operand::from(true))
            .map_err(&build)?;
    }
    if let Some((s, fewer)) = fewer {
        fb.add_phi_entry(s, last, fewer).map_err(&build)?;
    }
    fb.add_phi_entry(site.start, last, next).map_err(&build)?;
    for (&phi, v) in site.state.iter().zip(state) {
        fb.add_phi_entry(phi, last, v).map_err(&build)?;
    }
    for (&phi, v) in site.kept.iter().zip(kept) {
        fb.add_phi_entry(phi, last, v).map_err(&build)?;
    }
    drop(fb);
    let f = module
        .get_mut(rid)
        .ok_or_else(|| internal(&cx.floc, "no replay function"))?;
    f.layout
        .retain(|b| !blocks.contains(b) && !searched.contains(b) && !cascade.contains(b));
    f.layout.extend(blocks);
    // The hand-on's tests right after `done`, each falling through to the
    // block taking its case.
    let at = f
        .layout
        .iter()
        .position(|&b| b == done)
        .map_or(f.layout.len(), |p| p + 1);
    f.layout.splice(at..at, cascade);
    // The search for the binomial split right after `SPLIT`: its header
    // falls through to its body.
    let at = f
        .layout
        .iter()
        .position(|&b| b == site.split)
        .map_or(f.layout.len(), |p| p + 1);
    f.layout.splice(at..at, searched);
    Ok(())
}

/// Hands on the carried arrays that may be another carried array
/// ([`super::shared`]) or are replaced on some iterations only, as copies
/// that keep how the arrays alias (docs/reverse.md, "Bounded snapshots"):
/// each array `v` the advance ends with (`ends`) goes on as the array
/// handed on for another carried array it is (`state`: a new copy of an
/// array made afresh, else that array as it is), else as the part's start
/// array it is (whose identity may matter: the array the loop entered
/// with), else as a new copy (an array the advance made, which no value
/// but the header phis refers to). So the part's phis own what they hold,
/// and the advance's arrays are only read after it (docs/codegen.md,
/// "Sharing webs"). The cases are tested with `same` and branches meeting
/// at a phi (not `select`, whose result compiled code takes for an
/// escape). Returns the blocks it made, in layout order after the current
/// one; leaves the builder in the last.
fn hand_on_shared(
    cx: &Derivation<'_>,
    fb: &mut FuncBuilder<'_>,
    (ck, site): (&CkLoop, &SplitSite),
    ends: &[Operand],
    state: &mut [Operand],
) -> Result<Vec<Block>, ReverseError> {
    let build = build_err(&cx.floc);
    let e = |r: Result<Operand, String>| r.map_err(|m| err(&cx.floc, m));
    let carried = &ck.carried;
    let member = |i: usize| {
        let c = &carried[i];
        c.shadow.is_some()
            && c.kept.is_none()
            && (super::shared(carried, i) || c.replaced.is_some())
    };
    let mut made = Vec::new();
    if !(0..carried.len()).any(member) {
        return Ok(made);
    }
    let at = |ops: &[Operand], c: &super::Carried| {
        ops.get(c.phi)
            .copied()
            .ok_or_else(|| internal(&cx.floc, "a carried array without its value"))
    };
    // What each carried array handed on so far ended with and goes on with.
    let mut done: Vec<(Operand, Operand)> = Vec::new();
    for (i, c) in carried.iter().enumerate() {
        if !member(i) {
            done.push((at(ends, c)?, at(state, c)?));
        }
    }
    let mut starts = Vec::with_capacity(carried.len());
    for c in carried {
        let start = site
            .state
            .get(c.phi)
            .ok_or_else(|| internal(&cx.floc, "a carried array without its phi"))?;
        starts.push(Operand::Value(*start));
    }
    for (i, c) in carried.iter().enumerate() {
        if !member(i) {
            continue;
        }
        let v = at(ends, c)?;
        let cases: Vec<(Operand, Operand)> = done
            .iter()
            .copied()
            .chain(starts.iter().map(|&s| (s, s)))
            .collect();
        let join = fb.create_block();
        let mut entries = Vec::with_capacity(cases.len() + 1);
        for (end, on) in cases {
            let same = e(emit_value(fb, Prim::Same, &[v, end]))?;
            let taken = fb.create_block();
            let next = fb.create_block();
            fb.gotoifnot(same, next).map_err(&build)?;
            fb.switch_to_block(taken).map_err(&build)?;
            fb.goto(join).map_err(&build)?;
            entries.push((taken, on));
            fb.switch_to_block(next).map_err(&build)?;
            made.extend([taken, next]);
        }
        let copy = e(emit_value(fb, Prim::Copy, &[v]))?;
        let from = fb
            .current_block()
            .ok_or_else(|| internal(&cx.floc, "no block to copy in"))?;
        fb.goto(join).map_err(&build)?;
        entries.push((from, copy));
        fb.switch_to_block(join).map_err(&build)?;
        made.push(join);
        let on = Operand::Value(fb.phi(c.ty.clone(), &entries).map_err(&build)?);
        state[c.phi] = on;
        done.push((v, on));
    }
    Ok(made)
}

/// Loop `ck` as the advance of its replay's split `site` sees it: each kept
/// carried array's shadow enters from the part's start (`site.kept`) and,
/// from a latch, is another kept array's shadow phi (which the advance
/// carries) or a value of the replay (its copy of the forward sweep's).
fn advancing(cx: &Derivation<'_>, ck: &CkLoop, site: &SplitSite) -> Result<CkLoop, ReverseError> {
    let mut out = ck.clone();
    let phis: Vec<Value> = ck
        .carried
        .iter()
        .filter_map(|c| c.kept.as_ref().map(|k| k.phi))
        .chain(ck.inner_kept.iter().map(|k| k.phi))
        .collect();
    let in_replay = |v: Value| {
        ck.replayed
            .get(&v)
            .map(|&r| Operand::Value(ck.replay_renamed.get(&r).copied().unwrap_or(r)))
            .ok_or_else(|| internal(&cx.floc, "a kept shadow the replay lacks"))
    };
    let kept = out.carried.iter_mut().filter_map(|c| c.kept.as_mut());
    for (k, &start) in kept.zip(&site.kept) {
        k.entry = Operand::Value(start);
        for (_, op) in &mut k.latches {
            if let Operand::Value(v) = *op
                && !phis.contains(&v)
            {
                *op = in_replay(v)?;
            }
        }
    }
    for k in &mut out.inner_kept {
        for (_, op) in &mut k.entries {
            if let Operand::Value(v) = *op
                && !phis.contains(&v)
            {
                *op = in_replay(v)?;
            }
        }
    }
    Ok(out)
}
