//! The loop of the forward sweep that does not record: a checkpointed
//! loop's blocks of `@f.rev.fwd`, emptied of their recording code (whose
//! copy is the replay function's) and filled again with the primal
//! statements alone, plus the snapshots.
//!
//! The header keeps its block and label and gets, after its phis, a
//! countdown to the next snapshot (`%c`, 0 on entry) and a flag saying
//! whether a snapshot was taken before in this run of the loop (`%st`).
//! When the countdown is 0, the new block `SNAP` pushes the flag, the header
//! phis' values, a copy of each array the loop may write and one of each
//! array it carries through its header phis, and the
//! countdown restarts at `stretch - 1`; then the new block `REST` (the header's
//! statements and terminator) goes on. Values of the loop used after it
//! (the header's) are renamed there to their new definitions.
//!
//! Assumes the forward sweep is complete (pushes, terminators, phi entries),
//! the replay already copied from it, and a loop that `choose` accepted (one
//! entering block, the arrays of its header phis made afresh in it, no array
//! used after it).
//! Guarantees: the loop computes the primal values as the primal does, with
//! the same primitives in the same order, and pushes exactly one snapshot
//! per `stretch` visits of its header, the first at the first visit; the
//! layout keeps every `gotoifnot` falling through to the block it fell
//! through to (`SNAP` and `REST` come right after the header).

use super::super::ReverseError;
use super::super::bbcode::BTerm;
use super::super::ctx::{Derivation, build_err, emit_value, err, internal, map_op};
use super::CkLoop;
use super::direct::DirectPath;
use super::replay::header_phis;
use irad_ir::entity::SecondaryMap;
use irad_ir::{
    Block, FuncBuilder, FuncId, Inst, InstKind, Module, Operand, Prim, Terminator, Type, Value,
};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// Rewrites checkpointed loop `ck` of forward sweep `fwd_id` (whose block of
/// each primal block is `fblock`, and operand of each primal value `fval`)
/// into the loop that does not record, records its header phis in
/// `ck.state`, and updates `fval` to the loop's new values (noting in
/// `shown` the new value of each old one).
pub(in crate::reverse) fn rewrite(
    cx: &Derivation<'_>,
    module: &mut Module,
    fwd_id: FuncId,
    (fblock, fval): (&[Block], &mut SecondaryMap<Value, Option<Operand>>),
    (ck, direct): (&mut CkLoop, Option<&DirectPath>),
    shown: &mut HashMap<Value, Value>,
) -> Result<(), ReverseError> {
    let l = &cx.shape.loops.of(ck.k);
    let member_blocks: HashSet<Block> = l.members.iter().copied().map(|i| fblock[i]).collect();
    let recording = clear_blocks(module, fwd_id, &member_blocks, &cx.floc)?;
    let mut fb = FuncBuilder::new(module, fwd_id).map_err(build_err(&cx.floc))?;
    let snap = fb.create_block();
    let rest = fb.create_block();
    let mut p = PLoop {
        cx,
        fb,
        fblock,
        pmap: fval.clone(),
        kshadow: HashMap::default(),
        snap,
        rest,
    };
    let countdown = p.blocks(ck)?;
    p.phi_entries(ck, countdown)?;
    let PLoop { pmap, kshadow, .. } = p;
    ck.state = header_phis(cx, l.header)
        .iter()
        .filter_map(|&(_, r)| match pmap[r] {
            Some(Operand::Value(v)) => Some(v),
            _ => None,
        })
        .collect();
    let head = fblock[l.header];
    let mut renamed: HashMap<Value, Operand> = HashMap::default();
    for i in l.members.iter().copied() {
        for &inst in &cx.shape.bb.blocks[i].stmts {
            if let Some(v) = cx.src.insts[inst].result
                && let (Some(Operand::Value(old)), Some(new)) = (fval[v], pmap[v])
            {
                renamed.insert(old, new);
            }
        }
    }
    if let Some(path) = direct {
        // Only the header's values reach the exit (the others do not
        // dominate it).
        let header: Vec<Value> = cx.shape.bb.blocks[l.header]
            .stmts
            .iter()
            .filter_map(|&inst| match fval[cx.src.insts[inst].result?] {
                Some(Operand::Value(old)) => Some(old),
                _ => None,
            })
            .collect();
        merge_at_exit(
            cx,
            module,
            fwd_id,
            (fblock[l.exit], &header),
            (path, rest),
            (ck, &mut renamed),
        )?;
    }
    let f = module
        .get_mut(fwd_id)
        .ok_or_else(|| internal(&cx.floc, "no forward sweep"))?;
    for (&old, &new) in &kshadow {
        renamed.insert(old, Operand::Value(new));
        shown.insert(old, new);
    }
    for (old, new) in exit_shadows(f, fblock[l.exit], ck, &pmap, countdown.1)
        .map_err(|what| internal(&cx.floc, what))?
    {
        renamed.insert(old, Operand::Value(new));
        shown.insert(old, new);
    }
    f.layout.retain(|&b| b != snap && b != rest);
    let at = f
        .layout
        .iter()
        .position(|&b| b == head)
        .map_or(f.layout.len(), |p| p + 1);
    f.layout.splice(at..at, [snap, rest]);
    // Uses after the loop of the loop's values: the new definitions.
    rename_outside(f, &member_blocks, (snap, rest), &recording, &renamed, head)
        .map_err(|what| internal(&cx.floc, what))?;
    for i in l.members.iter().copied() {
        for &inst in &cx.shape.bb.blocks[i].stmts {
            if let Some(v) = cx.src.insts[inst].result
                && let Some(Operand::Value(old)) = fval[v]
                && let Some(&new) = renamed.get(&old)
            {
                fval.set(v, Some(new));
                if let Operand::Value(new) = new {
                    shown.insert(old, new);
                }
            }
        }
    }
    Ok(())
}

/// With a direct path, the exit block `exit` of forward sweep `fwd_id` is
/// entered from the copy (`path`) and from `rest`: each value of the
/// loop's header (`header`, whose new value in the loop that does not record
/// `renamed` gives) gets a phi there, which it is renamed to (the optimiser
/// removes those not used after the loop), and `ck`'s flag phi says whether
/// the loop was checkpointed.
fn merge_at_exit(
    cx: &Derivation<'_>,
    module: &mut Module,
    fwd_id: FuncId,
    (exit, header): (Block, &[Value]),
    (path, rest): (&DirectPath, Block),
    (ck, renamed): (&CkLoop, &mut HashMap<Value, Operand>),
) -> Result<(), ReverseError> {
    let build = build_err(&cx.floc);
    let mut fb = FuncBuilder::new(module, fwd_id).map_err(&build)?;
    let from = path.exit_from;
    if let Some(flag) = ck.flag {
        fb.add_phi_entry(flag, from, Operand::from(false))
            .map_err(&build)?;
        fb.add_phi_entry(flag, rest, Operand::from(true))
            .map_err(&build)?;
    }
    let mut merged = Vec::with_capacity(header.len());
    for &old in header {
        let Some(&new) = renamed.get(&old) else {
            continue;
        };
        let ty = fb.func().values[old].ty.clone();
        let copied = path
            .values
            .get(&old)
            .copied()
            .ok_or_else(|| internal(&cx.floc, "a value of the loop not in its copy"))?;
        let phi = fb.insert_phi(exit, ty).map_err(&build)?;
        fb.add_phi_entry(phi, from, Operand::Value(copied))
            .map_err(&build)?;
        fb.add_phi_entry(phi, rest, new).map_err(&build)?;
        merged.push((old, phi));
    }
    for (old, phi) in merged {
        renamed.insert(old, Operand::Value(phi));
    }
    Ok(())
}

/// Empties the blocks `members` of function `fwd_id` (statements and
/// terminators); returns the values their statements defined.
fn clear_blocks(
    module: &mut Module,
    fwd_id: FuncId,
    members: &HashSet<Block>,
    floc: &irad_ir::Location,
) -> Result<HashSet<Value>, ReverseError> {
    let f = module
        .get_mut(fwd_id)
        .ok_or_else(|| internal(floc, "no forward sweep"))?;
    let mut defined = HashSet::default();
    for &b in members {
        for inst in std::mem::take(&mut f.blocks[b].insts) {
            if let Some(r) = f.insts[inst].result {
                defined.insert(r);
            }
        }
        f.blocks[b].term = None;
    }
    Ok(defined)
}

/// The loop being rebuilt in the forward sweep.
struct PLoop<'a, 'r, 'm> {
    cx: &'a Derivation<'r>,
    fb: FuncBuilder<'m>,
    fblock: &'a [Block],
    /// The forward sweep's operand of each primal value: the new one for the
    /// loop's values, the recording sweep's for the others.
    pmap: SecondaryMap<Value, Option<Operand>>,
    /// The new shadow phi of each kept carried array, by its old one.
    kshadow: HashMap<Value, Value>,
    snap: Block,
    rest: Block,
}

/// The countdown phi, the flag phi and the countdown's next value.
type Countdown = (Value, Value, Operand);

impl PLoop<'_, '_, '_> {
    /// The loop's blocks in reverse postorder: phis, the primal statements
    /// and the terminators; the header's snapshot code. Returns the
    /// countdown.
    fn blocks(&mut self, ck: &CkLoop) -> Result<Countdown, ReverseError> {
        let cx = self.cx;
        let l = &cx.shape.loops.of(ck.k);
        let build = build_err(&cx.floc);
        let mut countdown = None;
        for &i in cx.shape.order.iter().filter(|&&i| l.contains(i)) {
            let at = self.fblock[i];
            self.fb.switch_to_block(at).map_err(&build)?;
            self.fb.set_pos(cx.src.blocks[cx.shape.bb.blocks[i].id].pos);
            for &inst in &cx.shape.bb.blocks[i].stmts {
                let data = &cx.src.insts[inst];
                if let (InstKind::Phi { .. }, Some(r)) = (&data.kind, data.result) {
                    let ty = cx.src.values[r].ty.clone();
                    let v = self.fb.insert_phi(at, ty).map_err(&build)?;
                    self.pmap.set(r, Some(Operand::Value(v)));
                }
            }
            if i == l.header {
                for kept in ck.carried.iter().filter_map(|c| c.kept.as_ref()) {
                    let v = self
                        .fb
                        .insert_phi(at, Type::Array(irad_ir::Scalar::F64))
                        .map_err(&build)?;
                    self.kshadow.insert(kept.phi, v);
                }
                countdown = Some(self.snapshot(at, ck)?);
            }
            for &inst in &cx.shape.bb.blocks[i].stmts {
                if !matches!(cx.src.insts[inst].kind, InstKind::Phi { .. }) {
                    self.statement(inst)?;
                }
            }
            self.terminator(i)?;
        }
        countdown.ok_or_else(|| internal(&cx.floc, "a loop without its header"))
    }

    /// The countdown and the snapshot, after the header `head`'s phis; leaves
    /// the builder in `REST`.
    fn snapshot(&mut self, head: Block, ck: &CkLoop) -> Result<Countdown, ReverseError> {
        let cx = self.cx;
        let l = &cx.shape.loops.of(ck.k);
        let build = build_err(&cx.floc);
        let e = |r: Result<Operand, String>| r.map_err(|m| err(&cx.floc, m));
        let c = self.fb.insert_phi(head, Type::I64).map_err(&build)?;
        let st = self.fb.insert_phi(head, Type::Bool).map_err(&build)?;
        let take = e(emit_value(
            &mut self.fb,
            Prim::Eq,
            &[Operand::Value(c), Operand::from(0i64)],
        ))?;
        let down = e(emit_value(
            &mut self.fb,
            Prim::Isub,
            &[Operand::Value(c), Operand::from(1i64)],
        ))?;
        let restart = i64::try_from(ck.stretch.saturating_sub(1)).unwrap_or(i64::MAX);
        let next = e(emit_value(
            &mut self.fb,
            Prim::Select,
            &[take, Operand::from(restart), down],
        ))?;
        self.fb.gotoifnot(take, self.rest).map_err(&build)?;
        self.fb.switch_to_block(self.snap).map_err(&build)?;
        self.push(Operand::Value(st))?;
        for (_, r) in header_phis(cx, l.header) {
            let v = map_op(&self.pmap, &Operand::Value(r), &cx.floc)?;
            self.push(v)?;
        }
        for leaf in &ck.arrays {
            let mut a = Operand::Value(ck.inputs[leaf.input]);
            for &k in &leaf.path {
                a = e(emit_value(
                    &mut self.fb,
                    Prim::Getfield,
                    &[a, Operand::from(k)],
                ))?;
            }
            let copy = e(emit_value(&mut self.fb, Prim::Copy, &[a]))?;
            self.push(copy)?;
        }
        let phis = header_phis(cx, l.header);
        for c in &ck.carried {
            let (_, r) = phis
                .get(c.phi)
                .copied()
                .ok_or_else(|| internal(&cx.floc, "a carried array without its phi"))?;
            let a = map_op(&self.pmap, &Operand::Value(r), &cx.floc)?;
            let copy = e(emit_value(&mut self.fb, Prim::Copy, &[a]))?;
            self.push(copy)?;
        }
        for kept in ck.carried.iter().filter_map(|c| c.kept.as_ref()) {
            let v = self
                .kshadow
                .get(&kept.phi)
                .copied()
                .ok_or_else(|| internal(&cx.floc, "a kept shadow without its phi"))?;
            self.push(Operand::Value(v))?;
        }
        self.fb.goto(self.rest).map_err(&build)?;
        self.fb.switch_to_block(self.rest).map_err(&build)?;
        Ok((c, st, next))
    }

    /// `push(op)` at the current position.
    fn push(&mut self, op: Operand) -> Result<(), ReverseError> {
        self.fb
            .prim(Prim::Push, &[op])
            .map_err(build_err(&self.cx.floc))?;
        Ok(())
    }

    /// The primal statement `inst` (not a phi).
    fn statement(&mut self, inst: Inst) -> Result<(), ReverseError> {
        let cx = self.cx;
        let data = &cx.src.insts[inst];
        let loc = cx.loc_of(inst);
        self.fb.set_pos(data.pos);
        let res_ty = cx.result_type(inst);
        let r =
            super::super::sweep::primal_stmt(&mut self.fb, &data.kind, &res_ty, &self.pmap, &loc)?;
        if let Some(v) = data.result {
            self.pmap.set(v, Some(r));
        }
        Ok(())
    }

    /// The terminator of primal block `i` (the header's ends `REST`).
    fn terminator(&mut self, i: usize) -> Result<(), ReverseError> {
        let cx = self.cx;
        let build = build_err(&cx.floc);
        let tloc = cx.block_loc(i);
        self.fb
            .set_pos(cx.src.blocks[cx.shape.bb.blocks[i].id].term_pos);
        let index = cx.shape.bb.index();
        let to = |b: &Block| -> Result<Block, ReverseError> {
            index[*b]
                .map(|p| self.fblock[p])
                .ok_or_else(|| internal(&tloc, "a branch out of the function"))
        };
        match &cx.shape.bb.blocks[i].term {
            BTerm::Goto(t) => {
                let t = to(t)?;
                self.fb.goto(t).map_err(&build)?;
            }
            BTerm::Br { cond, else_, .. } => {
                let c = map_op(&self.pmap, cond, &tloc)?;
                let e = to(else_)?;
                self.fb.gotoifnot(c, e).map_err(&build)?;
            }
            BTerm::Switch { index: op, targets } => {
                let c = map_op(&self.pmap, op, &tloc)?;
                let ts = targets.iter().map(to).collect::<Result<Vec<_>, _>>()?;
                self.fb.switch(c, &ts).map_err(&build)?;
            }
            BTerm::Return(_) => return Err(internal(&tloc, "a return inside a loop")),
        }
        Ok(())
    }

    /// The entries of the loop's phis and of the countdown's.
    fn phi_entries(&mut self, ck: &CkLoop, (c, st, next): Countdown) -> Result<(), ReverseError> {
        let cx = self.cx;
        let l = &cx.shape.loops.of(ck.k);
        let build = build_err(&cx.floc);
        let index = cx.shape.bb.index();
        let head = self.fblock[l.header];
        for i in l.members.iter().copied() {
            for &inst in &cx.shape.bb.blocks[i].stmts {
                let data = &cx.src.insts[inst];
                let (InstKind::Phi { entries }, Some(r)) = (&data.kind, data.result) else {
                    continue;
                };
                let Some(Operand::Value(phi)) = self.pmap[r] else {
                    continue;
                };
                let loc = cx.loc_of(inst);
                for (p, op) in entries {
                    let Some(pi) = index[*p].filter(|&pi| cx.shape.reachable[pi]) else {
                        continue;
                    };
                    // The header's edges now leave from `REST`.
                    let from = if self.fblock[pi] == head {
                        self.rest
                    } else {
                        self.fblock[pi]
                    };
                    let v = map_op(&self.pmap, op, &loc)?;
                    self.fb.add_phi_entry(phi, from, v).map_err(&build)?;
                }
            }
        }
        let pre = self.fblock[ck.pre];
        for kept in ck.carried.iter().filter_map(|c| c.kept.as_ref()) {
            let phi = self
                .kshadow
                .get(&kept.phi)
                .copied()
                .ok_or_else(|| internal(&cx.floc, "a kept shadow without its phi"))?;
            self.fb
                .add_phi_entry(phi, pre, kept.entry)
                .map_err(&build)?;
            for &(p, op) in &kept.latches {
                let Some(pi) = index[p] else { continue };
                let from = if self.fblock[pi] == head {
                    self.rest
                } else {
                    self.fblock[pi]
                };
                let v = match op {
                    Operand::Value(v) => self.kshadow.get(&v).copied().map_or(op, Operand::Value),
                    op => op,
                };
                self.fb.add_phi_entry(phi, from, v).map_err(&build)?;
            }
        }
        self.fb
            .add_phi_entry(c, pre, Operand::from(0i64))
            .map_err(&build)?;
        self.fb
            .add_phi_entry(st, pre, Operand::from(false))
            .map_err(&build)?;
        for &latch in &ck.latches {
            let lb = self.fblock[latch];
            self.fb.add_phi_entry(c, lb, next).map_err(&build)?;
            self.fb
                .add_phi_entry(st, lb, Operand::from(true))
                .map_err(&build)?;
        }
        Ok(())
    }
}

/// For each carried array of `ck` used after the loop, the shadow it leaves
/// with (the old shadow phi of the recording sweep, the new value), made at
/// the start of the exit block `exit` of `f` (after its phis): a fresh zero
/// array as long as the array (its value in the loop that does not record,
/// by `pmap`) when the loop ran an iteration (`ran`, the header's flag),
/// else the shadow it entered with, which is then its shadow as without a
/// limit.
fn exit_shadows(
    f: &mut irad_ir::Func,
    exit: Block,
    ck: &CkLoop,
    pmap: &SecondaryMap<Value, Option<Operand>>,
    ran: Value,
) -> Result<Vec<(Value, Value)>, String> {
    let mut out = Vec::new();
    let mut made = Vec::new();
    for c in ck.carried.iter().filter(|c| c.escapes) {
        let Some((sphi, entry)) = c.shadow else {
            continue;
        };
        let a = pmap[c.value].ok_or("a carried array without its new value")?;
        let mut value = |f: &mut irad_ir::Func, prim: Prim, args: &[Operand], ty: Type| {
            let kind = InstKind::Prim {
                prim,
                args: args.into(),
            };
            let (inst, r) = f.push_inst(exit, kind, Some(ty), None);
            made.push(inst);
            r.ok_or("a statement without its result")
        };
        let n = value(f, Prim::Length, &[a], Type::I64)?;
        let fresh = value(f, Prim::Zeros, &[Operand::Value(n)], c.ty.clone())?;
        let entered = Operand::Value(ck.inputs[entry]);
        let s = value(
            f,
            Prim::Select,
            &[Operand::Value(ran), Operand::Value(fresh), entered],
            c.ty.clone(),
        )?;
        out.push((sphi, s));
    }
    let insts = &mut f.blocks[exit].insts;
    insts.retain(|i| !made.contains(i));
    let phis = insts
        .iter()
        .take_while(|&&i| matches!(f.insts[i].kind, InstKind::Phi { .. }))
        .count();
    insts.splice(phis..phis, made);
    Ok(out)
}

/// Renames, in the blocks of `f` outside the loop (`members` and the new
/// `snap`/`rest`), the loop's values `renamed` says (edges from the header
/// `head` now leave from `rest`); fails when such a block reads a value the
/// loop's recording statements defined (`recording`) that has no new name.
fn rename_outside(
    f: &mut irad_ir::Func,
    members: &HashSet<Block>,
    (snap, rest): (Block, Block),
    recording: &HashSet<Value>,
    renamed: &HashMap<Value, Operand>,
    head: Block,
) -> Result<(), String> {
    let map = |op: &mut Operand| -> Result<(), String> {
        if let Operand::Value(v) = op
            && recording.contains(v)
        {
            *op = *renamed.get(v).ok_or_else(|| {
                format!(
                    "value {} of a checkpointed loop is used after it",
                    v.as_u32()
                )
            })?;
        }
        Ok(())
    };
    let outside: Vec<Block> = f
        .layout
        .iter()
        .copied()
        .filter(|b| !members.contains(b) && *b != snap && *b != rest)
        .collect();
    for b in outside {
        for inst in f.blocks[b].insts.clone() {
            match &mut f.insts[inst].kind {
                InstKind::Prim { args, .. } | InstKind::Invoke { args, .. } => {
                    args.iter_mut().try_for_each(map)?;
                }
                InstKind::CallValue { callee, args } => {
                    let mut c = Operand::Value(*callee);
                    map(&mut c)?;
                    if let Operand::Value(c) = c {
                        *callee = c;
                    }
                    args.iter_mut().try_for_each(map)?;
                }
                InstKind::Phi { entries } => {
                    for (from, op) in entries.iter_mut() {
                        if *from == head {
                            *from = rest;
                        }
                        map(op)?;
                    }
                }
            }
        }
        match &mut f.blocks[b].term {
            Some(Terminator::GotoIfNot { cond: op, .. })
            | Some(Terminator::Switch { index: op, .. })
            | Some(Terminator::Return(op)) => map(op)?,
            _ => {}
        }
    }
    Ok(())
}
