//! The replay function of a checkpointed loop, `@f.rev.fwd.replayN` (N the
//! header's label): what the pullback calls to rebuild the records of one
//! stretch. It takes the loop's inputs; pops the stretch's snapshot (the
//! array copies, then the header phis' values), copies the arrays back, for
//! a loop of several exits pushes its inputs back (for the pullback to hand
//! to the replay of the stretch before), pushes the index the loop's
//! entering block would have pushed (for a loop run back by popping indices:
//! the stretch's first iteration is seen as entered from outside), and then
//! runs a copy of the loop's recording blocks of the forward sweep
//! (`copy.rs`), pushes included, from the snapshot's state: for `stretch`
//! visits of the header, or until the loop exits (by any of its exit edges:
//! all go to the replay's end). It returns the snapshot's value of a counted
//! loop's counter (the stretch's start), `()` for other loops; for a loop
//! carrying `[f64]` arrays made afresh in each iteration, a tuple of that
//! counter (0 when not counted) and, when one is used after the loop,
//! whether the run had an iteration by then; it pushes the shadows those
//! arrays have at the stretch's end last, for the pullback to pop right
//! after the call (a tape's reference is counted, where a returned one is
//! not). Such a loop's replay pops the snapshot's flag to
//! choose the arrays' start shadows (the entering ones for the first
//! stretch, fresh zero arrays for the others), pushes it back and pushes the
//! start shadows for the pullback; the shadows of arrays kept as they are
//! come with the snapshot (docs/reverse.md, "Arrays carried through the
//! header"). A renewed array (`Carried::renewed`) starts from a new copy of
//! the snapshot's and from a fresh start shadow in every stretch, which
//! for the first one gets the entering shadow's elements ("Renewed
//! arrays"). An array replaced on some iterations only starts from the
//! entering shadow or a fresh one by its own flag (a header value), which
//! the replay pushes after the start shadows and, when the array is used
//! after the loop, also returns as it is at the stretch's end ("Arrays
//! replaced on some iterations only"). The exit edges that arrays made in
//! the last iteration leave through go through blocks of their own that
//! push the shadows the replay ends them with (and a chosen phi's
//! condition), for the pullback ("Arrays made in the last iteration").
//! A thinned loop's replay also takes the end of its segment,
//! pops the stretch's index with the snapshot (and the flag, when it
//! carries arrays with shadows; and the stretch itself, when it reads the
//! lengths of arrays the replay lacks: `sized.rs`; and its slots, for a
//! loop of binomial schedule: `revolve.rs`), restores the carried
//! arrays, splits a
//! segment of several stretches (`thin.rs`) and pushes the flag (when
//! taken off) and the index of the stretch it records.
//!
//! Assumes the forward sweep's loop blocks are still the recording ones
//! (built before `primal.rs` rewrites them), with their pushes in place.
//! Guarantees: a replayed stretch pushes exactly what the forward sweep
//! would have pushed for those iterations; the copy keeps the blocks'
//! labels, new blocks get labels above them.

use super::super::ReverseError;
use super::super::ctx::{Derivation, internal};
use super::CkLoop;
use super::copy::LoopCopy;
use super::thin::SplitSite;
use crate::forward::fresh_derived_name;
use irad_ir::entity::SecondaryMap;
use irad_ir::{
    Block, Const, Func, FuncId, Inst, InstKind, Module, Operand, Prim, Scalar, Terminator, Type,
    Value,
};
use rustc_hash::FxHashMap as HashMap;

/// Builds the replay function of checkpointed loop `ck` of derivation `cx`
/// from the forward sweep `fwd_id` (whose block of each primal block is
/// `fblock`, and operand of each primal value `fval`), adds it to `module`
/// and returns it, with the value there of each value of the forward sweep
/// the copied blocks read or define.
pub(in crate::reverse) fn build(
    cx: &Derivation<'_>,
    module: &mut Module,
    fwd_id: FuncId,
    (fblock, fval): (&[Block], &SecondaryMap<Value, Option<Operand>>),
    ck: &CkLoop,
) -> Result<Built, ReverseError> {
    let fwd = module
        .get(fwd_id)
        .ok_or_else(|| internal(&cx.floc, "no forward sweep"))?
        .clone();
    let l = &cx.shape.loops.of(ck.k);
    let name = fresh_derived_name(module, &fwd.name, &format!("replay{}", cx.label(l.header)));
    // A thinned loop's replay also takes the end of its segment: the index
    // of the stretch after it.
    let params = ck
        .inputs
        .iter()
        .map(|&v| (None, fwd.values[v].ty.clone()))
        .chain(std::iter::once((None, Type::I64)))
        .collect();
    let shadows = ck.carried.iter().filter(|c| c.shadow.is_some()).count();
    let ret = match (shadows, ck.counted) {
        (0, true) => Type::I64,
        (0, false) => Type::Unit,
        (_, _) => Type::Tuple(
            std::iter::once(Type::I64)
                .chain(escapes(ck).then_some(Type::Bool))
                .chain(std::iter::repeat_n(Type::Bool, replaced_after(ck)))
                .chain(std::iter::repeat_n(Type::Bool, held_after(ck).count()))
                .collect(),
        ),
    };
    let mut f = Func::new(&name, params, ret);
    f.pos = fwd.pos;
    let mut r = Replay {
        cx,
        ck,
        fval,
        copy: LoopCopy::new(cx, ck.k, (&fwd, fblock), f, false),
        kept: Vec::new(),
        site: None,
        stretch: Operand::from(0i64),
    };
    r.build(fblock)?;
    let site = r.site.take();
    let (f, values) = r.copy.finish();
    let id = module.add_func(f).map_err(|e| internal(&cx.floc, e))?;
    Ok((id, values, site))
}

/// A replay function built: its id, its value of each value of the forward
/// sweep its copied blocks read or define, and a thinned loop's split site.
type Built = (FuncId, HashMap<Value, Value>, Option<SplitSite>);

/// What the replay's entry hands on: the block it ends in, the snapshot's
/// header values, the start shadows of the carried arrays and the
/// snapshot's flag (`false` when no array has a shadow).
type EntryOut = (Block, Vec<Operand>, (Vec<Operand>, Operand));

/// Whether a carried array of `ck` with a shadow is used after the loop:
/// the replay then also returns whether the run had an iteration by the
/// stretch's end.
pub(in crate::reverse) fn escapes(ck: &CkLoop) -> bool {
    ck.carried.iter().any(|c| c.escapes && c.shadow.is_some())
}

/// The positions among the header's phis of the flags of `ck`'s arrays
/// replaced on some iterations only (in the order of its carried arrays),
/// which a replay pushes after the start shadows.
pub(in crate::reverse) fn replaced_flags(ck: &CkLoop) -> Vec<usize> {
    ck.carried
        .iter()
        .filter(|c| c.shadow.is_some())
        .filter_map(|c| c.replaced.map(|(j, _)| j))
        .collect()
}

/// How many of `ck`'s arrays replaced on some iterations only are used
/// after the loop: the replay also returns whether each has been replaced
/// by the stretch's end, after whether the run had an iteration.
pub(in crate::reverse) fn replaced_after(ck: &CkLoop) -> usize {
    ck.carried
        .iter()
        .filter(|c| c.escapes && c.shadow.is_some() && c.replaced.is_some())
        .count()
}

/// The depth of each array of `ck` handed on from another phi and used
/// after the loop ([`super::Carried::held`]), in the order of its carried
/// arrays: a replay returns, after the replaced arrays' flags, whether the
/// run has had that many iterations by the stretch's end.
pub(in crate::reverse) fn held_after(ck: &CkLoop) -> impl Iterator<Item = usize> + '_ {
    ck.carried
        .iter()
        .filter(|c| c.escapes && c.shadow.is_some() && !c.held.is_empty())
        .map(|c| c.held.len() + 1)
}

/// The state of one replay function being built.
struct Replay<'a, 'r> {
    cx: &'a Derivation<'r>,
    ck: &'a CkLoop,
    fval: &'a SecondaryMap<Value, Option<Operand>>,
    copy: LoopCopy<'a, 'r>,
    /// The snapshot's shadow of each kept carried array, by the recording
    /// sweep's shadow phi.
    kept: Vec<(Value, Operand)>,
    /// For a thinned loop, where its segment is split.
    site: Option<SplitSite>,
    /// The stretch, computed at the entry (`sized.rs`).
    stretch: Operand,
}

impl Replay<'_, '_> {
    /// The whole function: entry, header check, the copied blocks, exit.
    fn build(&mut self, fblock: &[Block]) -> Result<(), ReverseError> {
        let cx = self.cx;
        let l = &cx.shape.loops.of(self.ck.k);
        for (j, &v) in self.ck.inputs.iter().enumerate() {
            let p = self.copy.f.params[j];
            self.copy.vmap.insert(v, Operand::Value(p));
        }
        let entry = self.copy.new_block();
        // The stretch from the same inputs as the forward sweep's, first.
        let inputs: Vec<Operand> = (0..self.ck.inputs.len())
            .map(|j| Operand::Value(self.copy.f.params[j]))
            .collect();
        let copy = &mut self.copy;
        let saved = self
            .ck
            .sized
            .as_ref()
            .is_some_and(super::sized::RunStretch::saved);
        // Pushed with the snapshot when it reads values the replay lacks:
        // popped by `entry`.
        self.stretch = if saved {
            Operand::Const(Const::Unit)
        } else {
            super::sized::stretch(self.ck, (&inputs, &[]), &cx.floc, &mut |prim, args| {
                let types: Vec<Type> = args
                    .iter()
                    .map(|a| match a {
                        Operand::Value(v) => copy.f.values[*v].ty.clone(),
                        Operand::Const(Const::F64(_)) => Type::F64,
                        Operand::Const(Const::Bool(_)) => Type::Bool,
                        Operand::Const(_) => Type::I64,
                    })
                    .collect();
                let ty = prim
                    .result_type(&types, None, None)
                    .map_err(|e| internal(&cx.floc, format!("the stretch: {e}")))?;
                Ok(copy.value(entry, prim, args, ty))
            })?
        };
        let (entry_end, state, (starts, flag)) = self.entry(entry)?;
        let top = self.copy.new_block();
        let out = self.copy.new_block();
        let at = self.copy.layout.len();
        let head_copy = self.copy.add_copies(at, true);
        self.copy.retarget_header(top);
        self.copy.f.blocks[entry_end].term = Some(Terminator::Goto(top));
        let start = match self.counter_index() {
            Some(j) => state[j],
            None if starts.is_empty() => Operand::Const(Const::Unit),
            None => Operand::from(0i64),
        };
        // The exit edges arrays made in the last iteration leave through
        // go through a block of their own, which pushes the shadows the
        // stretch ends them with (for the pullback to copy the shadows they
        // left the loop with into).
        let mut pushes: Vec<(Block, Vec<Operand>)> = Vec::new();
        let mut exits: Vec<usize> = self.ck.left.iter().flat_map(|x| x.exits.clone()).collect();
        exits.sort_unstable();
        exits.dedup();
        for e in exits {
            // Each shadow, then a phi's flag.
            let mut shadows: Vec<Operand> = Vec::new();
            for x in self.ck.left.iter().filter(|x| x.exits.contains(&e)) {
                let Some(s) = x.shadow else { continue };
                shadows.push(Operand::Value(s));
                if let Some(ch) = x.chosen {
                    // Whether the pullback copies: when the phi holds the
                    // header's array and that array is read after the loop
                    // too, the header's copy serves both.
                    let header_escapes = self
                        .ck
                        .carried
                        .iter()
                        .any(|c| c.value == ch.header && c.escapes && c.shadow.is_some());
                    let flag = if header_escapes { ch.this } else { ch.flag };
                    shadows.push(
                        self.fval[flag]
                            .ok_or_else(|| internal(&cx.floc, "a flag without its value"))?,
                    );
                }
            }
            if shadows.is_empty() {
                continue;
            }
            let b = self.copy.new_block();
            self.copy.exit_to.insert(fblock[e], b);
            pushes.push((b, shadows));
        }
        // The visit counter first, then the header's phis, then the check.
        let (kk_inst, kk) = self.copy.new_phi(top, Type::I64);
        self.copy.copy_blocks(top, out)?;
        for (b, shadows) in pushes {
            for s in shadows {
                let x = self.copy.op(&s)?;
                self.copy.effect(b, Prim::Push, &[x]);
            }
            self.copy.f.blocks[b].term = Some(Terminator::Goto(out));
        }
        let kk1 = self.header_check(top, head_copy, kk);
        // The snapshot's value of each recording header phi, and the
        // stretch's own start shadow of each carried array.
        let mut from_state: HashMap<Value, Operand> = HashMap::default();
        for (j, &(_, r)) in header_phis(cx, l.header).iter().enumerate() {
            if let (Some(Operand::Value(fr)), Some(&s)) = (self.fval[r], state.get(j)) {
                from_state.insert(fr, s);
            }
        }
        for &(sphi, s) in &self.kept {
            from_state.insert(sphi, s);
        }
        let mut ret = vec![start];
        for (&(sphi, _), &x) in self
            .ck
            .carried
            .iter()
            .filter_map(|c| c.shadow.as_ref())
            .zip(&starts)
        {
            from_state.insert(sphi, x);
            // The shadow the array has where the replay ends, pushed (a
            // tape's reference is counted, where a returned one is not).
            let end = self.copy.op(&Operand::Value(sphi))?;
            self.copy.effect(out, Prim::Push, &[end]);
        }
        if escapes(self.ck) {
            // Whether the run has had an iteration by the stretch's end: a
            // stretch before it, or an iteration of its own.
            let own = self
                .copy
                .value(out, Prim::Ne, &[kk, Operand::from(0i64)], Type::Bool);
            let ran = self.copy.value(out, Prim::Or, &[flag, own], Type::Bool);
            ret.push(ran);
            // Whether each array replaced on some iterations only and used
            // after the loop has been replaced by the stretch's end.
            for c in self
                .ck
                .carried
                .iter()
                .filter(|c| c.escapes && c.shadow.is_some())
            {
                if let Some((_, rb)) = c.replaced {
                    let op = self.fval[rb]
                        .ok_or_else(|| internal(&cx.floc, "a flag without its value"))?;
                    ret.push(self.copy.op(&op)?);
                }
            }
            // Whether each array handed on and used after the loop holds
            // one the loop made: a stretch before it (as long as the
            // deepest depth), or that many iterations of its own.
            for d in held_after(self.ck).collect::<Vec<_>>() {
                let d = i64::try_from(d).unwrap_or(i64::MAX);
                let own = self
                    .copy
                    .value(out, Prim::Ge, &[kk, Operand::from(d)], Type::Bool);
                ret.push(self.copy.value(out, Prim::Or, &[flag, own], Type::Bool));
            }
        }
        let ret = match ret.as_slice() {
            [one] if starts.is_empty() => *one,
            _ => {
                let ty = self.copy.f.ret.clone();
                self.copy.value(out, Prim::Tuple, &ret, ty)
            }
        };
        self.copy.f.blocks[out].term = Some(Terminator::Return(ret));
        self.copy
            .fill_phis(entry_end, &|r, _| from_state.get(&r).copied())?;
        let header = fblock[l.header];
        let mut entries: smallvec::SmallVec<[(Block, Operand); 2]> = smallvec::SmallVec::new();
        entries.push((entry_end, Operand::from(0i64)));
        for &latch in &self.ck.latches {
            entries.push((self.copy.edge_source(fblock[latch], header), kk1));
        }
        self.copy.f.insts[kk_inst].kind = InstKind::Phi { entries };
        Ok(())
    }

    /// Pops the snapshot and restores its arrays in `entry`; chooses the
    /// start shadow of each carried array and pushes them; pushes the
    /// entering block's index. Returns the block the entry ends in, the
    /// snapshot's header values and the start shadows.
    fn entry(&mut self, entry: Block) -> Result<EntryOut, ReverseError> {
        let cx = self.cx;
        let l = &cx.shape.loops.of(self.ck.k);
        let mut at = entry;
        for kept in self.ck.carried.iter().rev().filter_map(|c| c.kept.as_ref()) {
            let s = self.copy.pop(at, Type::Array(Scalar::F64));
            self.kept.push((kept.phi, s));
        }
        let mut carried = Vec::with_capacity(self.ck.carried.len());
        for c in self.ck.carried.iter().rev() {
            carried.push(self.copy.pop(at, c.ty.clone()));
        }
        carried.reverse();
        let mut copies = Vec::with_capacity(self.ck.arrays.len());
        for leaf in self.ck.arrays.iter().rev() {
            copies.push(self.copy.pop(at, leaf.ty.clone()));
        }
        copies.reverse();
        let types: Vec<Type> = header_phis(cx, l.header)
            .iter()
            .map(|&(_, r)| cx.src.values[r].ty.clone())
            .collect();
        let mut state = Vec::with_capacity(types.len());
        for ty in types.iter().rev() {
            state.push(self.copy.pop(at, ty.clone()));
        }
        state.reverse();
        if self
            .ck
            .sized
            .as_ref()
            .is_some_and(super::sized::RunStretch::saved)
        {
            self.stretch = self.copy.pop(at, Type::I64);
        }
        // A loop of binomial schedule: the snapshot's slots.
        let slots = self
            .ck
            .revolve
            .is_some()
            .then(|| self.copy.pop(at, Type::I64));
        let index = self.copy.pop(at, Type::I64);
        // A loop carrying arrays with shadows takes the snapshot's flag off
        // too: a split pushes it back with the first half's snapshot, and
        // the part recorded has a stretch before it.
        let shadows = self.ck.carried.iter().any(|c| c.shadow.is_some());
        let flag = shadows.then(|| self.copy.pop(at, Type::Bool));
        for (leaf, saved) in self.ck.arrays.iter().zip(copies) {
            let param = self.copy.f.params[leaf.input];
            let mut dst = Operand::Value(param);
            let mut ty = self.copy.f.values[param].ty.clone();
            for &k in &leaf.path {
                let Type::Tuple(elems) = &ty else {
                    return Err(internal(&cx.floc, "an array path through a non-tuple"));
                };
                let elem = elems
                    .get(usize::try_from(k).unwrap_or(usize::MAX))
                    .cloned()
                    .ok_or_else(|| internal(&cx.floc, "an array path out of its tuple"))?;
                dst = self
                    .copy
                    .value(at, Prim::Getfield, &[dst, Operand::from(k)], elem.clone());
                ty = elem;
            }
            at = self.restore(at, dst, saved, &leaf.ty);
        }
        // The carried arrays get their contents back before a split, which
        // pushes copies of them and advances from them.
        at = self.restore_carried(at, &mut state, &carried)?;
        let part_flag;
        (at, state, part_flag) = self.split(at, (index, slots), &types, &state, flag)?;
        let (starts, flag);
        (at, starts, flag) = self.carried_starts(at, &state, part_flag)?;
        for &x in &starts {
            self.copy.effect(at, Prim::Push, &[x]);
        }
        // The flags of arrays replaced on some iterations only: whether the
        // pullback copies the start shadow into the stretch before's.
        for j in replaced_flags(self.ck) {
            let by = *state
                .get(j)
                .ok_or_else(|| internal(&cx.floc, "a carried array without its flag"))?;
            self.copy.effect(at, Prim::Push, &[by]);
        }
        if self.ck.repush {
            for j in 0..self.ck.inputs.len() {
                let p = Operand::Value(self.copy.f.params[j]);
                self.copy.effect(at, Prim::Push, &[p]);
            }
        }
        if let Some(index) = self.ck.entry_index {
            self.copy.effect(at, Prim::Push, &[index]);
        }
        Ok((at, state, (starts, flag)))
    }

    /// The segment of a thinned loop, from the snapshot at the end of `at`
    /// (its stretch's `index` and its `slots` for a loop of binomial
    /// schedule, its header values `state` of types `types`,
    /// its `flag` when the entry took it off, and the kept arrays' shadows
    /// of `self.kept`) to the stretch the replay's last parameter gives: the
    /// block `JOIN` holds the start of the segment's last part (phis,
    /// entered from `at` with the snapshot's), and goes on to the new block
    /// returned, which pushes that part's flag (when taken off) and index
    /// for the pullback, when the part is one stretch; else to `SPLIT`
    /// (filled by `thin.rs`, which advances over half the part and comes
    /// back). Returns that block, the phis of the header values and of the
    /// flag; `self.kept` gets the phis of the kept shadows.
    fn split(
        &mut self,
        at: Block,
        (index, slots): (Operand, Option<Operand>),
        types: &[Type],
        state: &[Operand],
        flag: Option<Operand>,
    ) -> Result<(Block, Vec<Operand>, Option<Operand>), ReverseError> {
        let c = &mut self.copy;
        let join = c.new_block();
        let split = c.new_block();
        let rec = c.new_block();
        c.f.blocks[at].term = Some(Terminator::Goto(join));
        let (index_phi, start) = c.new_phi(join, Type::I64);
        let mut phis = vec![(index_phi, index)];
        let mut values = Vec::with_capacity(state.len());
        for (ty, &x) in types.iter().zip(state) {
            let (phi, v) = c.new_phi(join, ty.clone());
            phis.push((phi, x));
            values.push(v);
        }
        let flag_phi = flag.map(|x| {
            let (phi, v) = c.new_phi(join, Type::Bool);
            phis.push((phi, x));
            v
        });
        let slots_phi = slots.map(|x| {
            let (phi, v) = c.new_phi(join, Type::I64);
            phis.push((phi, x));
            v
        });
        let mut kept = Vec::with_capacity(self.kept.len());
        for (_, s) in &mut self.kept {
            let (phi, v) = c.new_phi(join, Type::Array(Scalar::F64));
            phis.push((phi, *s));
            *s = v;
            kept.push(v);
        }
        for &(phi, x) in &phis {
            if let InstKind::Phi { entries } = &mut c.f.insts[phi].kind {
                entries.push((at, x));
            }
        }
        // `self.kept` is in pop order: the site's in push order.
        kept.reverse();
        let end = Operand::Value(c.f.params[self.ck.inputs.len()]);
        let n = c.value(join, Prim::Isub, &[end, start], Type::I64);
        let one = c.value(join, Prim::Le, &[n, Operand::from(1i64)], Type::Bool);
        c.f.blocks[join].term = Some(Terminator::GotoIfNot {
            cond: one,
            target: split,
        });
        // `SPLIT` comes next in the layout: the fall-through is `rec`'s.
        c.layout.retain(|&b| b != rec);
        let pos = c
            .layout
            .iter()
            .position(|&b| b == join)
            .map_or(0, |p| p + 1);
        c.layout.insert(pos, rec);
        c.f.blocks[split].term = Some(Terminator::Goto(rec));
        if let Some(f) = flag_phi {
            c.effect(rec, Prim::Push, &[f]);
        }
        c.effect(rec, Prim::Push, &[start]);
        let floc = &self.cx.floc;
        let as_value = |op: Operand| match op {
            Operand::Value(v) => Ok(v),
            Operand::Const(_) => Err(internal(floc, "a phi without its result")),
        };
        let site = super::thin::SplitSite {
            join,
            split,
            start: as_value(start)?,
            state: values
                .iter()
                .map(|&v| as_value(v))
                .collect::<Result<_, _>>()?,
            length: as_value(n)?,
            flag: flag_phi.map(as_value).transpose()?,
            slots: slots_phi.map(as_value).transpose()?,
            kept: kept.into_iter().map(as_value).collect::<Result<_, _>>()?,
            stretch: self.stretch,
        };
        self.site = Some(site);
        Ok((rec, values, flag_phi))
    }

    /// The start shadow of each carried array with a shadow, chosen at the
    /// end of `at` by the flag of the part recorded (`flag`, which the
    /// entry took off and `split` pushed back): a fresh zero array as long
    /// as the snapshot's array when a stretch came before (the pullback
    /// copies its cotangent into the shadow the stretch before ends with),
    /// else the shadow entering the loop. A renewed array
    /// ([`super::Carried::renewed`]) always starts from a fresh one, which
    /// gets the entering shadow's elements when no stretch came before
    /// (the pullback copies them back when the stretch is pulled back:
    /// nothing else touches that shadow meanwhile), so that the replay's
    /// start shadow is its own array. Returns the block that follows, the
    /// start shadows and the flag.
    fn carried_starts(
        &mut self,
        mut at: Block,
        state: &[Operand],
        flag: Option<Operand>,
    ) -> Result<(Block, Vec<Operand>, Operand), ReverseError> {
        if !self.ck.carried.iter().any(|c| c.shadow.is_some()) {
            return Ok((at, Vec::new(), Operand::from(false)));
        }
        let flag =
            flag.ok_or_else(|| internal(&self.cx.floc, "a carried shadow without its flag"))?;
        let mut starts = Vec::new();
        let mut first = Vec::new();
        // The position among `starts` of each carried array's start shadow.
        let mut at_start: Vec<Option<usize>> = vec![None; self.ck.carried.len()];
        for (i, c) in self.ck.carried.iter().enumerate() {
            let Some((_, entry)) = c.shadow else { continue };
            at_start[i] = Some(starts.len());
            let a = *state
                .get(c.phi)
                .ok_or_else(|| internal(&self.cx.floc, "a carried array without its phi"))?;
            let n = self.copy.value(at, Prim::Length, &[a], Type::I64);
            let fresh = self.copy.value(at, Prim::Zeros, &[n], c.ty.clone());
            let mut entry = Operand::Value(self.copy.f.params[entry]);
            // While it holds the array another phi entered with, that
            // one's entering shadow (`keep = r` in the first iteration).
            if let Some(((j, _), theirs)) = c.held_entry {
                let by = *state
                    .get(j)
                    .ok_or_else(|| internal(&self.cx.floc, "a carried array without its flag"))?;
                let theirs = Operand::Value(self.copy.f.params[theirs]);
                entry = self
                    .copy
                    .value(at, Prim::Select, &[by, theirs, entry], c.ty.clone());
            }
            if c.renewed {
                first.push((fresh, entry));
                starts.push(fresh);
                continue;
            }
            // An array replaced on some iterations only starts from the
            // entering shadow until the loop has replaced it.
            let by = match c.replaced {
                Some((j, _)) => *state
                    .get(j)
                    .ok_or_else(|| internal(&self.cx.floc, "a carried array without its flag"))?,
                None => flag,
            };
            starts.push(
                self.copy
                    .value(at, Prim::Select, &[by, fresh, entry], c.ty.clone()),
            );
        }
        self.shared_starts(at, state, &at_start, &mut starts)?;
        if !first.is_empty() {
            // The first stretch: the entering shadows' elements.
            let index = self.copy.value(
                at,
                Prim::Select,
                &[flag, Operand::from(0i64), Operand::from(1i64)],
                Type::I64,
            );
            let copy = self.copy.new_block();
            let next = self.copy.new_block();
            self.copy.f.blocks[at].term = Some(Terminator::Switch {
                index,
                targets: smallvec::smallvec![next, copy],
            });
            for (fresh, entry) in first {
                self.copy.effect(copy, Prim::Copyto, &[fresh, entry]);
            }
            self.copy.f.blocks[copy].term = Some(Terminator::Goto(next));
            at = next;
        }
        Ok((at, starts, flag))
    }

    /// Where a carried array is, at the snapshot, the array of the phi it
    /// may be ([`super::Carried::alias`]; `same` of their header values
    /// `state`), it starts from that one's start shadow, as in the run,
    /// where one array had one shadow. By depth: a phi's own is settled
    /// before a phi handed its array looks at it. `at_start` gives each
    /// carried array's position among `starts`.
    fn shared_starts(
        &mut self,
        at: Block,
        state: &[Operand],
        at_start: &[Option<usize>],
        starts: &mut [Operand],
    ) -> Result<(), ReverseError> {
        let carried = &self.ck.carried;
        for i in super::alias_order(carried, |_| true) {
            let c = &carried[i];
            let Some(si) = at_start[i] else { continue };
            // Up the chain: the second keeper of one array may be the
            // first's or the array both keep (since session 36); the last
            // that is one with it decides, each settled before.
            for j in super::alias_chain(carried, i) {
                let Some(sj) = at_start[j] else { continue };
                let (Some(&a), Some(&b)) = (state.get(c.phi), state.get(carried[j].phi)) else {
                    return Err(internal(&self.cx.floc, "a carried array without its phi"));
                };
                let one = self.copy.value(at, Prim::Same, &[a, b], Type::Bool);
                starts[si] = self.copy.value(
                    at,
                    Prim::Select,
                    &[one, starts[sj], starts[si]],
                    c.ty.clone(),
                );
            }
        }
        Ok(())
    }

    /// Copies each carried array's snapshot `copies` back into the array
    /// the snapshot's header values `state` hold; a renewed one
    /// ([`super::Carried::renewed`]) starts from a new copy instead, which
    /// takes its place in `state` (the popped array is let go of, and the
    /// copy is the replay's own). Returns the block that follows.
    fn restore_carried(
        &mut self,
        mut at: Block,
        state: &mut [Operand],
        copies: &[Operand],
    ) -> Result<Block, ReverseError> {
        for (c, &saved) in self.ck.carried.clone().iter().zip(copies) {
            let a = state
                .get_mut(c.phi)
                .ok_or_else(|| internal(&self.cx.floc, "a carried array without its phi"))?;
            if c.renewed {
                *a = self.copy.value(at, Prim::Copy, &[saved], c.ty.clone());
                continue;
            }
            let a = *a;
            at = self.restore(at, a, saved, &c.ty);
        }
        Ok(at)
    }

    /// `dst` gets the elements of `src` (arrays of type `ty`, the same
    /// length): `copyto` for `[f64]`, a loop otherwise. Returns the block
    /// that follows.
    fn restore(&mut self, at: Block, dst: Operand, src: Operand, ty: &Type) -> Block {
        if *ty == Type::Array(Scalar::F64) {
            self.copy.effect(at, Prim::Copyto, &[dst, src]);
            return at;
        }
        let elem = match ty {
            Type::Array(s) => s.ty(),
            _ => Type::Unit,
        };
        let c = &mut self.copy;
        let n = c.value(at, Prim::Length, &[dst], Type::I64);
        let head = c.new_block();
        let body = c.new_block();
        let next = c.new_block();
        c.f.blocks[at].term = Some(Terminator::Goto(head));
        let (phi_inst, i) = c.new_phi(head, Type::I64);
        let more = c.value(head, Prim::Lt, &[i, n], Type::Bool);
        c.f.blocks[head].term = Some(Terminator::GotoIfNot {
            cond: more,
            target: next,
        });
        let x = c.value(body, Prim::Arrayref, &[src, i], elem);
        c.effect(body, Prim::Arrayset, &[dst, i, x]);
        let i1 = c.value(body, Prim::Iadd, &[i, Operand::from(1i64)], Type::I64);
        c.f.blocks[body].term = Some(Terminator::Goto(head));
        if let InstKind::Phi { entries } = &mut c.f.insts[phi_inst].kind {
            entries.push((at, Operand::from(0i64)));
            entries.push((body, i1));
        }
        next
    }

    /// The header check at the end of `top`, after its phis: at `stretch`
    /// visits (counted by `kk` from 0) fall through to the exit block, which
    /// comes next in the layout, else go on to the header's copy `head`.
    /// Returns the counter's next value (for the latches' entries).
    fn header_check(&mut self, top: Block, head: Block, kk: Operand) -> Operand {
        let stretch = self.stretch;
        let c = &mut self.copy;
        let stop = c.value(top, Prim::Eq, &[kk, stretch], Type::Bool);
        let kk1 = c.value(top, Prim::Iadd, &[kk, Operand::from(1i64)], Type::I64);
        c.f.blocks[top].term = Some(Terminator::GotoIfNot {
            cond: stop,
            target: head,
        });
        kk1
    }

    /// Which header phi is a counted loop's counter, by its index among
    /// the header phis.
    fn counter_index(&self) -> Option<usize> {
        let cx = self.cx;
        let l = &cx.shape.loops.of(self.ck.k);
        let iv = l.counted.as_ref()?.iv;
        if !self.ck.counted {
            return None;
        }
        header_phis(cx, l.header).iter().position(|&(_, r)| r == iv)
    }
}

/// The phis of the primal header at position `h`: (statement, result).
pub(in crate::reverse) fn header_phis(cx: &Derivation<'_>, h: usize) -> Vec<(Inst, Value)> {
    cx.shape.bb.blocks[h]
        .stmts
        .iter()
        .filter_map(|&inst| {
            let data = &cx.src.insts[inst];
            match (&data.kind, data.result) {
                (InstKind::Phi { .. }, Some(r)) => Some((inst, r)),
                _ => None,
            }
        })
        .collect()
}
