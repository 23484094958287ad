//! The pullback's side of loop checkpointing (docs/reverse.md,
//! "Checkpointing"): the reverse blocks of a checkpointed loop are the ones
//! it would have anyway; around them,
//! - on the reverse edge from the loop's exit into the reverse of its
//!   header (for a loop of several exits: from each block an exit edge
//!   leads to into the reverse of the block it leaves from), the last
//!   stretch is replayed (its replay function pops the last snapshot and
//!   pushes the stretch's records);
//! - where the reverse of the header would leave the loop (to the reverse of
//!   its entering block), a new block pops the flag the snapshot was pushed
//!   with: when an earlier stretch exists, that stretch is replayed and the
//!   reverse goes on into the reverse of the latch the replay ended with
//!   (popping the latch's index, or, for a counted loop, its one latch);
//!   otherwise it leaves the loop as before. For a loop of several exits it
//!   first pops the loop's inputs, which each replay pushed back (no exit's
//!   reverse dominates the loop's, so the values popped there are not at
//!   hand), and hands them to the replay of the stretch before.
//!
//! A thinned loop (docs/reverse.md, "Bounded snapshots") also hands each
//! replay the end of its segment: the number of stretches the block its
//! run left for pushed (popped where that block's reverse starts, before
//! the flag) for the last stretch, and the index of the stretch just pulled back (which
//! its replay pushed above the flag) for the stretch before.
//!
//! A loop carrying `[f64]` arrays made afresh in each iteration hands each
//! array's cotangent from stretch to stretch: the block at a stretch's start
//! pops the start shadows the replay pushed and, when it replays the stretch
//! before, copies each into the shadow that replay pushes last for the
//! array's end (still a fresh zero array; a renewed array's first start
//! shadow gives its elements back to the shadow entering the loop when the
//! reverse leaves the loop); on the edge from the exit, the shadow an
//! array left the loop with is copied into the last stretch's end shadow
//! when the run had an iteration (docs/reverse.md, "Arrays carried through
//! the header"); for an array replaced on some iterations only, by the
//! flags the replay pushed and returned instead ("Arrays replaced on some
//! iterations only"). On the edge from an exit that arrays made in the
//! last iteration leave through, it pops the shadows the replay pushed on
//! that edge and copies the shadows the arrays left with into them ("Arrays
//! made in the last iteration").
//!
//! A counted loop compares its counter with the current stretch's start (a
//! phi in the reverse of its header, entered from the replays and carried
//! through the reverse of its latch) instead of the loop's start. The
//! cotangents flow on unchanged: every value the reverse of the latch reads
//! is defined in the reverse of the header, which dominates the replay, so
//! the arithmetic is the same statements in the same order as without
//! checkpointing.
//!
//! Assumes the forward sweep was rewritten by `checkpoint::rewrite` (the
//! replay functions exist) and the loop's inputs are popped where the
//! reverse of its exit starts. Guarantees: every snapshot is popped once, by
//! the replay of its stretch, and every flag once, by the stretch's end.

use super::super::ReverseError;
use super::super::checkpoint::CkLoop;
use super::super::ctx::{build_err, emit_value, err, internal};
use super::Pullback;
use irad_ir::{Block, Location, Operand, Prim, Type};

/// What a replay returns when a carried array is used after the loop:
/// whether the run had an iteration by the stretch's end, and whether each
/// array replaced on some iterations only and used after the loop had been
/// replaced by then.
type Ran = (
    Operand,
    std::vec::IntoIter<Operand>,
    std::vec::IntoIter<Operand>,
);

impl Pullback<'_, '_, '_> {
    /// The stretch-start phis of each checkpointed counted loop, in the
    /// reverse of its header and of its latch.
    pub(super) fn start_phis(&mut self) -> Result<(), ReverseError> {
        let cx = self.cx;
        let build = build_err(&cx.floc);
        for c in self.ck.loops.iter().filter(|c| c.counted) {
            let l = &cx.shape.loops.of(c.k);
            let &[latch] = c.latches.as_slice() else {
                return Err(internal(&cx.floc, "a counted loop with several latches"));
            };
            let (Some(rh), Some(rl)) = (self.rblock[l.header], self.rblock[latch]) else {
                return Err(internal(&cx.floc, "a checkpointed loop without reverse"));
            };
            let start = self.bk.insert_phi(rh, Type::I64).map_err(&build)?;
            let again = self.bk.insert_phi(rl, Type::I64).map_err(&build)?;
            self.starts[c.k] = Some((start, again));
        }
        Ok(())
    }

    /// The checkpointed loop headed by position `h`, if any.
    fn checkpointed_at(&self, h: usize) -> Option<&CkLoop> {
        let loops = &self.cx.shape.loops;
        self.ck.loops.iter().find(|c| loops.of(c.k).header == h)
    }

    /// On the reverse edge from block `i` into the reverse of block `p`, the
    /// header of a checkpointed loop or, for a loop of several exits, any
    /// block of it: from an exit of the loop, replays the last stretch; from
    /// inside, carries the stretch's start on.
    pub(super) fn replay_entries(
        &mut self,
        i: usize,
        p: usize,
        bloc: &Location,
    ) -> Result<(), ReverseError> {
        let loops = &self.cx.shape.loops;
        let Some(c) = self.ck.loops.iter().find(|c| {
            let l = loops.of(c.k);
            l.header == p || (l.contains(p) && !l.contains(i))
        }) else {
            return Ok(());
        };
        let c = c.clone();
        let build = build_err(&self.cx.floc);
        let inside = loops.of(c.k).contains(i);
        let start = if inside {
            self.starts[c.k].map(|(_, again)| Operand::Value(again))
        } else {
            let mut args = self.exit_inputs(&c, i, bloc)?;
            // The last segment ends with the last stretch.
            args.push(
                self.counts[c.k]
                    .ok_or_else(|| internal(bloc, "a loop's count of stretches was not popped"))?,
            );
            match self.flags[c.k] {
                Some(flag) => Some(self.replay_if(&c, flag, &args, bloc)?),
                None => Some(self.replay_last(&c, &args, i, bloc)?),
            }
        };
        if let (Some((phi, _)), Some(start)) = (self.starts[c.k], start) {
            let from = self
                .bk
                .current_block()
                .ok_or_else(|| internal(bloc, "no block"))?;
            self.bk.add_phi_entry(phi, from, start).map_err(&build)?;
        }
        Ok(())
    }

    /// Where the reverse of block `i` starts, when an exit edge of a
    /// checkpointed loop with a direct path or a thinned one leads to `i`:
    /// pops the number of stretches (thinned) and the flag (direct path)
    /// the forward sweep pushed last at its end (before the values saved
    /// there are popped). The reverse edges out of `i` use them next.
    pub(super) fn pop_flag(&mut self, i: usize) -> Result<(), ReverseError> {
        let loops = &self.cx.shape.loops;
        let build = build_err(&self.cx.floc);
        let counted = self.ck.exited_at(loops, i, |_| true);
        let flagged = self.ck.exited_at(loops, i, |c| c.flag.is_some());
        if let Some(k) = counted.map(|j| self.ck.loops[j].k) {
            let count = self.bk.pop(Type::I64).map_err(&build)?;
            self.counts[k] = Some(Operand::Value(count));
        }
        if let Some(k) = flagged.map(|j| self.ck.loops[j].k) {
            let flag = self.bk.pop(Type::Bool).map_err(&build)?;
            self.flags[k] = Some(Operand::Value(flag));
        }
        Ok(())
    }

    /// The replay of the last stretch when `flag` says the loop was
    /// checkpointed; the stretch's start: the replay's, or the counter's
    /// first value when the loop ran directly (`()` for a loop not counted).
    fn replay_if(
        &mut self,
        c: &CkLoop,
        flag: Operand,
        args: &[Operand],
        bloc: &Location,
    ) -> Result<Operand, ReverseError> {
        let build = build_err(&self.cx.floc);
        let e = |r: Result<Operand, String>| r.map_err(|m| err(bloc, m));
        let index = e(emit_value(
            &mut self.bk,
            Prim::Select,
            &[flag, Operand::from(1i64), Operand::from(0i64)],
        ))?;
        let (skip, call, join) = (
            self.bk.create_block(),
            self.bk.create_block(),
            self.bk.create_block(),
        );
        self.bk.switch(index, &[skip, call]).map_err(&build)?;
        self.bk.switch_to_block(call).map_err(&build)?;
        let start = self.replay(c, args)?;
        self.bk.goto(join).map_err(&build)?;
        self.bk.switch_to_block(skip).map_err(&build)?;
        let first = match self.plan.counted_slots()[c.k].clone() {
            Some(counted) => self.value(counted.init, bloc)?,
            None => Operand::Const(irad_ir::Const::Unit),
        };
        self.bk.goto(join).map_err(&build)?;
        self.bk.switch_to_block(join).map_err(&build)?;
        if !c.counted {
            return Ok(start);
        }
        let phi = self
            .bk
            .phi(Type::I64, &[(call, start), (skip, first)])
            .map_err(&build)?;
        Ok(Operand::Value(phi))
    }

    /// When block `i` heads a checkpointed loop: its index and a new block
    /// that takes the place of the reverse of the loop's entering block among
    /// `targets`, the switch targets of the reverse of the header.
    pub(super) fn stretch_target(
        &mut self,
        i: usize,
        targets: &mut [Block],
    ) -> Option<(usize, Block)> {
        let c = self.checkpointed_at(i)?;
        let (k, pre) = (c.k, c.pre);
        let at = self.cx.shape.preds[i].iter().position(|&p| p == pre)?;
        let step = self.bk.create_block();
        targets[at] = step;
        Some((k, step))
    }

    /// The block `step` the reverse of checkpointed loop `k`'s header goes
    /// to at a stretch's start (just ended a `switch` over `targets`): pops
    /// the snapshot's flag; with an earlier stretch, replays it and goes on
    /// into the reverse of the latch it ended with; else leaves the loop.
    pub(super) fn stretch_step(
        &mut self,
        k: usize,
        step: Block,
        targets: &[Block],
        bloc: &Location,
    ) -> Result<(), ReverseError> {
        let cx = self.cx;
        let build = build_err(&cx.floc);
        let c = self
            .ck
            .of_loop(k)
            .cloned()
            .ok_or_else(|| internal(bloc, "a stretch of a loop not checkpointed"))?;
        let h = cx.shape.loops.of(k).header;
        if let Some((start, again)) = self.starts[k] {
            let from = self
                .bk
                .current_block()
                .ok_or_else(|| internal(bloc, "no block"))?;
            self.bk
                .add_phi_entry(again, from, Operand::Value(start))
                .map_err(&build)?;
        }
        let leave = self.rblock[c.pre].ok_or_else(|| internal(bloc, "reverse target"))?;
        self.bk.switch_to_block(step).map_err(&build)?;
        // A loop of several exits: the replay pushed its inputs back.
        let args = match c.repush {
            true => {
                let mut args = Vec::with_capacity(c.input_types.len());
                for ty in c.input_types.iter().rev() {
                    args.push(Operand::Value(self.bk.pop(ty.clone()).map_err(&build)?));
                }
                args.reverse();
                args
            }
            false => self.exit_inputs(&c, cx.shape.loops.of(k).exit, bloc)?,
        };
        // The flags of the arrays replaced on some iterations only, then
        // the start shadows of the carried arrays, pushed by the replay.
        let mut flags = Vec::new();
        for _ in super::super::checkpoint::replay::replaced_flags(&c) {
            flags.push(Operand::Value(self.bk.pop(Type::Bool).map_err(&build)?));
        }
        flags.reverse();
        let mut starts = Vec::new();
        for carried in c.carried.iter().rev().filter(|c| c.shadow.is_some()) {
            starts.push(Operand::Value(
                self.bk.pop(carried.ty.clone()).map_err(&build)?,
            ));
        }
        starts.reverse();
        // The replay pushed the index of the stretch it recorded: the end
        // of the segment before.
        let mut args = args;
        args.push(Operand::Value(self.bk.pop(Type::I64).map_err(&build)?));
        let more = self.bk.pop(Type::Bool).map_err(&build)?;
        let e = |r: Result<Operand, String>| r.map_err(|m| err(bloc, m));
        let index = e(emit_value(
            &mut self.bk,
            Prim::Select,
            &[
                Operand::Value(more),
                Operand::from(1i64),
                Operand::from(0i64),
            ],
        ))?;
        // A renewed array's first stretch started from a copy of the
        // shadow entering the loop: its elements go back.
        let first: Vec<(Operand, Operand)> = c
            .carried
            .iter()
            .filter(|c| c.shadow.is_some())
            .zip(&starts)
            .filter(|(carried, _)| carried.renewed)
            .map(|(carried, &start)| {
                let j = carried.shadow.map_or(usize::MAX, |(_, j)| j);
                args.get(j)
                    .map(|&entry| (entry, start))
                    .ok_or_else(|| internal(bloc, "a carried array's shadow not among the inputs"))
            })
            .collect::<Result<_, _>>()?;
        if !first.is_empty() {
            let not_more = e(emit_value(&mut self.bk, Prim::Not, &[Operand::Value(more)]))?;
            self.copies_when(
                first
                    .into_iter()
                    .map(|(entry, start)| (Some(not_more), entry, start))
                    .collect(),
                bloc,
            )?;
        }
        let replay = self.bk.create_block();
        self.bk.switch(index, &[leave, replay]).map_err(&build)?;
        self.bk.switch_to_block(replay).map_err(&build)?;
        let (start, ends, _) = self.replay_ends(&c, &args)?;
        // The shadow a carried array ends the stretch with is a fresh zero
        // array: it gets the cotangent the stretch after gathered. An array
        // replaced on some iterations only that the loop had not replaced
        // by the stretch's start has one shadow in both, the entering one.
        let mut flags = flags.into_iter();
        let mut copies = Vec::with_capacity(ends.len());
        for ((end, start), carried) in ends
            .into_iter()
            .zip(starts)
            .zip(c.carried.iter().filter(|c| c.shadow.is_some()))
        {
            let when = match carried.replaced {
                Some(_) => Some(
                    flags
                        .next()
                        .ok_or_else(|| internal(bloc, "a replaced array without its flag"))?,
                ),
                None => None,
            };
            copies.push((when, end, start));
        }
        self.copies_when(copies, bloc)?;
        let replay = self
            .bk
            .current_block()
            .ok_or_else(|| internal(bloc, "no block"))?;
        match self.starts[k] {
            Some((_, latch_start)) => {
                let &[latch] = c.latches.as_slice() else {
                    return Err(internal(bloc, "a counted loop with several latches"));
                };
                self.bk
                    .add_phi_entry(latch_start, replay, start)
                    .map_err(&build)?;
                let to = self.rblock[latch].ok_or_else(|| internal(bloc, "reverse target"))?;
                self.bk.goto(to).map_err(&build)?;
            }
            None => {
                // The replay ended with the latch's jump: its index is on top.
                let id = self.pop_index(h, bloc)?;
                self.bk.switch(id, targets).map_err(&build)?;
            }
        }
        Ok(())
    }

    /// Checkpointed loop `c`'s inputs as popped where the reverse of its
    /// exit at position `exit` starts (or once, where the pullback starts).
    fn exit_inputs(
        &self,
        c: &CkLoop,
        exit: usize,
        bloc: &Location,
    ) -> Result<Vec<Operand>, ReverseError> {
        let mut args = Vec::with_capacity(c.inputs.len());
        for v in &c.inputs {
            args.push(
                self.popped_end[exit]
                    .get(v)
                    .or_else(|| self.avail.get(v))
                    .copied()
                    .ok_or_else(|| internal(bloc, "a replay input was not popped"))?,
            );
        }
        Ok(args)
    }

    /// `invoke` of checkpointed loop `c`'s replay with its inputs `args`:
    /// the stretch's start for a counted loop, `()` otherwise.
    fn replay(&mut self, c: &CkLoop, args: &[Operand]) -> Result<Operand, ReverseError> {
        Ok(self.replay_ends(c, args)?.0)
    }

    /// The replay of checkpointed loop `c`'s last stretch, with its inputs
    /// `args`, on the reverse edge from its exit at position `exit`: when a
    /// carried array is used after the loop, the shadow it left with (popped
    /// where the reverse of the exit starts) is copied into the shadow the
    /// stretch ends with, a fresh zero array, unless the run had no
    /// iteration (the two are then one array, the one that entered).
    /// Returns the stretch's start.
    fn replay_last(
        &mut self,
        c: &CkLoop,
        args: &[Operand],
        exit: usize,
        bloc: &Location,
    ) -> Result<Operand, ReverseError> {
        let (start, ends, ran) = self.replay_ends(c, args)?;
        // The shadows the arrays made in the last iteration end the stretch
        // with, pushed by the replay on this exit's edge: fresh zero arrays,
        // which get the cotangent the code after the loop gave the shadows
        // they left with.
        let build = build_err(&self.cx.floc);
        let mut made = Vec::new();
        for x in c.left.iter().filter(|x| x.exits.contains(&exit)) {
            if let Some(s) = x.shadow {
                let left = self.popped_end[exit].get(&s).copied().ok_or_else(|| {
                    internal(
                        bloc,
                        "the shadow an array left the loop with was not popped",
                    )
                })?;
                made.push((x.ty.clone(), left, x.chosen.is_some()));
            }
        }
        // A phi choosing an array replaced on some iterations only: its
        // flag, pushed after the shadow, says whether the loop had replaced
        // the array (else both are the entering shadow).
        let mut copies = Vec::with_capacity(made.len());
        for (ty, left, chosen) in made.into_iter().rev() {
            let when = match chosen {
                true => Some(Operand::Value(self.bk.pop(Type::Bool).map_err(&build)?)),
                false => None,
            };
            let end = Operand::Value(self.bk.pop(ty).map_err(&build)?);
            copies.push((when, end, left));
        }
        // Those copies come after the carried arrays': an array a call
        // handed back as it was leaves where its header phi does not
        // (`left_array`), and when the call did hand it back, the shadow it
        // ends with is the header phi's, which gets the zeros that phi left
        // with here first.
        let made_copies = copies;
        let Some((ran, mut replaced, mut held)) = ran else {
            self.copies_when(made_copies, bloc)?;
            return Ok(start);
        };
        let mut copies = Vec::new();
        for (carried, end) in c.carried.iter().filter(|c| c.shadow.is_some()).zip(ends) {
            if let (true, Some((sphi, _))) = (carried.escapes, carried.shadow) {
                let left = self.popped_end[exit]
                    .get(&sphi)
                    .copied()
                    .ok_or_else(|| internal(bloc, "the shadow a loop left with was not popped"))?;
                // An array replaced on some iterations only: when the loop
                // replaced it (else both are the entering shadow).
                // An array handed on from another phi: when the run had
                // as many iterations as its depth (else it left with the
                // entering shadow of the array it holds, which the stretch
                // started with, and there is nothing to copy).
                let when = match (carried.replaced, carried.held.is_empty()) {
                    (Some(_), _) => replaced
                        .next()
                        .ok_or_else(|| internal(bloc, "a replaced array without its flag"))?,
                    (None, false) => held
                        .next()
                        .ok_or_else(|| internal(bloc, "a held array without its flag"))?,
                    (None, true) => ran,
                };
                copies.push((Some(when), end, left));
            }
        }
        self.copies_when(copies, bloc)?;
        self.copies_when(made_copies, bloc)?;
        Ok(start)
    }

    /// `copyto(end, start)` for each of `copies`, under its condition when
    /// it has one (copies under one condition share a block).
    fn copies_when(
        &mut self,
        copies: Vec<(Option<Operand>, Operand, Operand)>,
        bloc: &Location,
    ) -> Result<(), ReverseError> {
        let build = build_err(&self.cx.floc);
        let e = |r: Result<Operand, String>| r.map_err(|m| err(bloc, m));
        let mut conds: Vec<Option<Operand>> = Vec::new();
        for (when, _, _) in &copies {
            if !conds.contains(when) {
                conds.push(*when);
            }
        }
        for cond in conds {
            let these = copies.iter().filter(|(w, _, _)| *w == cond);
            let Some(cond) = cond else {
                for &(_, end, start) in these {
                    self.bk.prim(Prim::Copyto, &[end, start]).map_err(&build)?;
                }
                continue;
            };
            let index = e(emit_value(
                &mut self.bk,
                Prim::Select,
                &[cond, Operand::from(1i64), Operand::from(0i64)],
            ))?;
            let (skip, copy, join) = (
                self.bk.create_block(),
                self.bk.create_block(),
                self.bk.create_block(),
            );
            self.bk.switch(index, &[skip, copy]).map_err(&build)?;
            self.bk.switch_to_block(copy).map_err(&build)?;
            for &(_, end, start) in these {
                self.bk.prim(Prim::Copyto, &[end, start]).map_err(&build)?;
            }
            self.bk.goto(join).map_err(&build)?;
            self.bk.switch_to_block(skip).map_err(&build)?;
            self.bk.goto(join).map_err(&build)?;
            self.bk.switch_to_block(join).map_err(&build)?;
        }
        Ok(())
    }

    /// [`Pullback::replay`], the shadow each carried array has where the
    /// replayed stretch ends and, when a carried array is used after the
    /// loop, whether the run had an iteration by then.
    fn replay_ends(
        &mut self,
        c: &CkLoop,
        args: &[Operand],
    ) -> Result<(Operand, Vec<Operand>, Option<Ran>), ReverseError> {
        let bloc = &self.cx.floc;
        let f = c
            .replay
            .ok_or_else(|| internal(bloc, "a checkpointed loop without replay"))?;
        let build = build_err(&self.cx.floc);
        let r = self.bk.invoke(f, args).map_err(&build)?;
        let r = r.map_or(Operand::Const(irad_ir::Const::Unit), Operand::Value);
        let shadows = c.carried.iter().filter(|c| c.shadow.is_some()).count();
        if shadows == 0 {
            return Ok((r, Vec::new(), None));
        }
        let e = |r: Result<Operand, String>| r.map_err(|m| err(bloc, m));
        let field = |bk: &mut irad_ir::FuncBuilder<'_>, k: i64| {
            e(emit_value(bk, Prim::Getfield, &[r, Operand::from(k)]))
        };
        let start = match c.counted {
            true => field(&mut self.bk, 0)?,
            false => Operand::Const(irad_ir::Const::Unit),
        };
        // The shadows the stretch ends with, pushed last.
        let mut ends = Vec::with_capacity(shadows);
        for carried in c.carried.iter().rev().filter(|c| c.shadow.is_some()) {
            ends.push(Operand::Value(
                self.bk.pop(carried.ty.clone()).map_err(&build)?,
            ));
        }
        ends.reverse();
        let ran = match super::super::checkpoint::replay::escapes(c) {
            true => {
                let ran = field(&mut self.bk, 1)?;
                let n = super::super::checkpoint::replay::replaced_after(c);
                let mut replaced = Vec::with_capacity(n);
                for k in 0..n {
                    replaced.push(field(&mut self.bk, (2 + k) as i64)?);
                }
                let h = super::super::checkpoint::replay::held_after(c).count();
                let mut held = Vec::with_capacity(h);
                for k in 0..h {
                    held.push(field(&mut self.bk, (2 + n + k) as i64)?);
                }
                Some((ran, replaced.into_iter(), held.into_iter()))
            }
            false => None,
        };
        Ok((start, ends, ran))
    }
}
