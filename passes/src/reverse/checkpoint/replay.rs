//! The replay function of a checkpointed loop, `@f.rev.fwd.replayN` (N the
//! header's label): what the pullback calls to rebuild the records of one
//! stretch. It takes the loop's inputs; pops the stretch's snapshot (the
//! array copies, then the header phis' values), copies the arrays back,
//! pushes the index the loop's entering block would have pushed (for a loop
//! run back by popping indices: the stretch's first iteration is seen as
//! entered from outside), and then runs a copy of the loop's recording
//! blocks of the forward sweep, pushes included, from the snapshot's state:
//! for `stretch` visits of the header, or until the loop exits. It returns
//! the snapshot's value of a counted loop's counter (the stretch's start),
//! `()` for other loops.
//!
//! Assumes the forward sweep's loop blocks are still the recording ones
//! (built before `primal.rs` rewrites them), with their pushes in place.
//! Guarantees: the copied statements are the forward sweep's, in the same
//! order, so a replayed stretch pushes exactly what the forward sweep would
//! have pushed for those iterations; the copy keeps the blocks' labels, new
//! blocks get labels above them; a `gotoifnot` whose fall-through does not
//! come next in the copy goes through a new `goto` block.

use super::super::ReverseError;
use super::super::ctx::{Derivation, internal};
use super::CkLoop;
use crate::forward::fresh_derived_name;
use irad_ir::entity::SecondaryMap;
use irad_ir::{
    Block, Const, Func, FuncId, Inst, InstData, InstKind, Module, Operand, Prim, Scalar,
    Terminator, Type, Value,
};
use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;

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
) -> Result<(FuncId, HashMap<Value, Value>), ReverseError> {
    let fwd = module
        .get(fwd_id)
        .ok_or_else(|| internal(&cx.floc, "no forward sweep"))?
        .clone();
    let l = &cx.shape.loops.loops[ck.k];
    let name = fresh_derived_name(module, &fwd.name, &format!("replay{}", cx.label(l.header)));
    let params = ck
        .inputs
        .iter()
        .map(|&v| (None, fwd.values[v].ty.clone()))
        .collect();
    let ret = if ck.counted { Type::I64 } else { Type::Unit };
    let l = &cx.shape.loops.loops[ck.k];
    let pos = fblock
        .iter()
        .enumerate()
        .filter(|&(i, _)| l.member[i])
        .map(|(i, &b)| (b, i))
        .collect();
    let mut r = Replay {
        cx,
        ck,
        fwd: &fwd,
        fblock,
        fval,
        pos,
        f: Func::new(&name, params, ret),
        layout: Vec::new(),
        next_label: 0,
        vmap: HashMap::default(),
        target: HashMap::default(),
        source: HashMap::default(),
        tramp: HashMap::default(),
    };
    r.f.pos = fwd.pos;
    r.build()?;
    let Replay {
        mut f,
        layout,
        vmap,
        ..
    } = r;
    f.layout = layout;
    let values = vmap
        .into_iter()
        .filter_map(|(old, new)| match new {
            Operand::Value(new) => Some((old, new)),
            Operand::Const(_) => None,
        })
        .collect();
    let id = module.add_func(f).map_err(|e| internal(&cx.floc, e))?;
    Ok((id, values))
}

/// The state of one replay function being built.
struct Replay<'a, 'r> {
    cx: &'a Derivation<'r>,
    ck: &'a CkLoop,
    /// The forward sweep, its loop blocks still recording.
    fwd: &'a Func,
    fblock: &'a [Block],
    fval: &'a SecondaryMap<Value, Option<Operand>>,
    /// The primal position of each forward-sweep block of the loop.
    pos: HashMap<Block, usize>,
    /// The function being built and its layout.
    f: Func,
    layout: Vec<Block>,
    next_label: u32,
    /// The replay's operand of each value of the forward sweep it reads.
    vmap: HashMap<Value, Operand>,
    /// The copy a jump to each forward-sweep block goes to.
    target: HashMap<Block, Block>,
    /// The copy each forward-sweep block's edges leave from.
    source: HashMap<Block, Block>,
    /// `goto` blocks put between a copy and its fall-through target.
    tramp: HashMap<(Block, Block), Block>,
}

impl Replay<'_, '_> {
    /// The whole function: entry, header check, the copied blocks, exit.
    fn build(&mut self) -> Result<(), ReverseError> {
        let cx = self.cx;
        let l = &cx.shape.loops.loops[self.ck.k];
        let members: Vec<Block> = self
            .fwd
            .layout
            .iter()
            .copied()
            .filter(|b| self.member_pos(*b).is_some())
            .collect();
        self.next_label = members
            .iter()
            .map(|&b| self.fwd.blocks[b].label)
            .max()
            .unwrap_or(0)
            .saturating_add(1);
        for (j, &v) in self.ck.inputs.iter().enumerate() {
            self.vmap.insert(v, Operand::Value(self.f.params[j]));
        }
        let entry = self.new_block();
        let (entry_end, state) = self.entry(entry)?;
        let top = self.new_block();
        let out = self.new_block();
        for &b in &members {
            let copy = self.f.add_block(self.fwd.blocks[b].label);
            self.layout.push(copy);
            self.target.insert(b, copy);
            self.source.insert(b, copy);
        }
        let header = self.fblock[l.header];
        let head_copy = self.target[&header];
        self.target.insert(header, top);
        self.f.blocks[entry_end].term = Some(Terminator::Goto(top));
        let ret = match self.counter_index() {
            Some(j) => state[j],
            None => Operand::Const(Const::Unit),
        };
        self.f.blocks[out].term = Some(Terminator::Return(ret));
        // The visit counter first, then the header's phis, then the check.
        let (_, kk) = self.new_phi(top, Type::I64);
        self.copy_blocks(top, out)?;
        let kk1 = self.header_check(top, head_copy, kk);
        self.fill_phis(top, entry_end, &state, kk1)?;
        Ok(())
    }

    /// Pops the snapshot and restores its arrays in `entry`; pushes the
    /// entering block's index. Returns the block the entry ends in and the
    /// snapshot's header values.
    fn entry(&mut self, entry: Block) -> Result<(Block, Vec<Operand>), ReverseError> {
        let cx = self.cx;
        let l = &cx.shape.loops.loops[self.ck.k];
        let mut at = entry;
        let mut copies = Vec::with_capacity(self.ck.arrays.len());
        for leaf in self.ck.arrays.iter().rev() {
            copies.push(self.pop(at, leaf.ty.clone()));
        }
        copies.reverse();
        let types: Vec<Type> = header_phis(cx, l.header)
            .iter()
            .map(|&(_, r)| cx.src.values[r].ty.clone())
            .collect();
        let mut state = Vec::with_capacity(types.len());
        for ty in types.iter().rev() {
            state.push(self.pop(at, ty.clone()));
        }
        state.reverse();
        for (leaf, copy) in self.ck.arrays.iter().zip(copies) {
            let mut dst = Operand::Value(self.f.params[leaf.input]);
            let mut ty = self.f.values[self.f.params[leaf.input]].ty.clone();
            for &k in &leaf.path {
                let Type::Tuple(elems) = &ty else {
                    return Err(internal(&cx.floc, "an array path through a non-tuple"));
                };
                let elem = elems
                    .get(k as usize)
                    .cloned()
                    .ok_or_else(|| internal(&cx.floc, "an array path out of its tuple"))?;
                dst = self.value(at, Prim::Getfield, &[dst, Operand::from(k)], elem.clone());
                ty = elem;
            }
            at = self.restore(at, dst, copy, &leaf.ty);
        }
        if let Some(index) = self.ck.entry_index {
            self.effect(at, Prim::Push, &[index]);
        }
        Ok((at, state))
    }

    /// `dst` gets the elements of `src` (arrays of type `ty`, the same
    /// length): `copyto` for `[f64]`, a loop otherwise. Returns the block
    /// that follows.
    fn restore(&mut self, at: Block, dst: Operand, src: Operand, ty: &Type) -> Block {
        if *ty == Type::Array(Scalar::F64) {
            self.effect(at, Prim::Copyto, &[dst, src]);
            return at;
        }
        let elem = match ty {
            Type::Array(s) => s.ty(),
            _ => Type::Unit,
        };
        let n = self.value(at, Prim::Length, &[dst], Type::I64);
        let head = self.new_block();
        let body = self.new_block();
        let next = self.new_block();
        self.f.blocks[at].term = Some(Terminator::Goto(head));
        let (phi_inst, i) = self.new_phi(head, Type::I64);
        let more = self.value(head, Prim::Lt, &[i, n], Type::Bool);
        self.f.blocks[head].term = Some(Terminator::GotoIfNot {
            cond: more,
            target: next,
        });
        let x = self.value(body, Prim::Arrayref, &[src, i], elem);
        self.effect(body, Prim::Arrayset, &[dst, i, x]);
        let i1 = self.value(body, Prim::Iadd, &[i, Operand::from(1i64)], Type::I64);
        self.f.blocks[body].term = Some(Terminator::Goto(head));
        if let InstKind::Phi { entries } = &mut self.f.insts[phi_inst].kind {
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
        let stretch = i64::try_from(self.ck.stretch).unwrap_or(i64::MAX);
        let stop = self.value(top, Prim::Eq, &[kk, Operand::from(stretch)], Type::Bool);
        let kk1 = self.value(top, Prim::Iadd, &[kk, Operand::from(1i64)], Type::I64);
        self.f.blocks[top].term = Some(Terminator::GotoIfNot {
            cond: stop,
            target: head,
        });
        kk1
    }

    /// Copies the statements and terminators of the loop's blocks, blocks
    /// in reverse postorder, the header's phis into `top`.
    fn copy_blocks(&mut self, top: Block, out: Block) -> Result<(), ReverseError> {
        let cx = self.cx;
        let l = &cx.shape.loops.loops[self.ck.k];
        let order: Vec<usize> = cx
            .shape
            .order
            .iter()
            .copied()
            .filter(|&i| l.member[i])
            .collect();
        for &i in &order {
            let fb = self.fblock[i];
            let copy = self.source[&fb];
            let into_phis = if i == l.header { top } else { copy };
            for &inst in &self.fwd.blocks[fb].insts {
                let data = &self.fwd.insts[inst];
                let block = if matches!(data.kind, InstKind::Phi { .. }) {
                    into_phis
                } else {
                    copy
                };
                self.copy_inst(block, data)?;
            }
        }
        for &i in &order {
            let fb = self.fblock[i];
            self.copy_term(fb, out)?;
        }
        Ok(())
    }

    /// A copy of statement `data` at the end of `block`; phis get their
    /// entries later.
    fn copy_inst(&mut self, block: Block, data: &InstData) -> Result<(), ReverseError> {
        let kind = match &data.kind {
            InstKind::Phi { .. } => InstKind::Phi {
                entries: SmallVec::new(),
            },
            InstKind::Prim { prim, args } => InstKind::Prim {
                prim: *prim,
                args: self.ops(args)?,
            },
            InstKind::Invoke { func, args } => InstKind::Invoke {
                func: *func,
                args: self.ops(args)?,
            },
            InstKind::CallValue { callee, args } => {
                let Operand::Value(callee) = self.op(&Operand::Value(*callee))? else {
                    return Err(internal(&self.cx.floc, "a call through a constant"));
                };
                InstKind::CallValue {
                    callee,
                    args: self.ops(args)?,
                }
            }
        };
        let ty = data.result.map(|r| self.fwd.values[r].ty.clone());
        let (_, res) = self.f.push_inst(block, kind, ty, data.pos);
        if let (Some(old), Some(new)) = (data.result, res) {
            self.vmap.insert(old, Operand::Value(new));
        }
        Ok(())
    }

    /// The copy of forward-sweep block `fb`'s terminator; targets outside
    /// the loop go to `out`.
    fn copy_term(&mut self, fb: Block, out: Block) -> Result<(), ReverseError> {
        let copy = self.source[&fb];
        let loc = &self.cx.floc;
        let term = self.fwd.blocks[fb]
            .term
            .clone()
            .ok_or_else(|| internal(loc, "a loop block without terminator"))?;
        let to = |b: &Block| self.target.get(b).copied().unwrap_or(out);
        let mut fall = None;
        let new = match &term {
            Terminator::Goto(t) => Terminator::Goto(to(t)),
            Terminator::Switch { index, targets } => Terminator::Switch {
                index: self.op(index)?,
                targets: targets.iter().map(to).collect(),
            },
            Terminator::GotoIfNot { cond, target } => {
                let ft = self
                    .fwd
                    .next_in_layout(fb)
                    .ok_or_else(|| internal(loc, "a gotoifnot without fall-through"))?;
                let ft = to(&ft);
                let next = self
                    .layout
                    .iter()
                    .position(|&b| b == copy)
                    .and_then(|p| self.layout.get(p + 1))
                    .copied();
                if next != Some(ft) {
                    fall = Some(ft);
                }
                Terminator::GotoIfNot {
                    cond: self.op(cond)?,
                    target: to(target),
                }
            }
            Terminator::Return(_) => return Err(internal(loc, "a return inside a loop")),
        };
        self.f.blocks[copy].term = Some(new);
        if let Some(ft) = fall {
            self.trampoline(copy, ft);
        }
        Ok(())
    }

    /// A `goto ft` block placed right after `copy` in the layout.
    fn trampoline(&mut self, copy: Block, ft: Block) {
        let label = self.fresh_label();
        let jump = self.f.add_block(label);
        self.f.blocks[jump].term = Some(Terminator::Goto(ft));
        if let Some(p) = self.layout.iter().position(|&b| b == copy) {
            self.layout.insert(p + 1, jump);
        }
        self.tramp.insert((copy, ft), jump);
    }

    /// The entries of every copied phi: the header's from the entry (the
    /// snapshot's `state`) and from the latches, the visit counter's, and
    /// the other blocks' phis as in the forward sweep.
    fn fill_phis(
        &mut self,
        top: Block,
        entry_end: Block,
        state: &[Operand],
        kk1: Operand,
    ) -> Result<(), ReverseError> {
        let cx = self.cx;
        let l = &cx.shape.loops.loops[self.ck.k];
        let header = self.fblock[l.header];
        // The snapshot's value of each recording header phi.
        let mut from_state: HashMap<Value, Operand> = HashMap::default();
        for (j, &(_, r)) in header_phis(cx, l.header).iter().enumerate() {
            if let (Some(Operand::Value(fr)), Some(&s)) = (self.fval_of(r), state.get(j)) {
                from_state.insert(fr, s);
            }
        }
        let latches: Vec<Block> = self.ck.latches.iter().map(|&p| self.fblock[p]).collect();
        let top_insts = self.f.blocks[top].insts.clone();
        // The visit counter is the first phi of `top`.
        if let Some(&kk) = top_insts.first() {
            let mut entries: SmallVec<[(Block, Operand); 2]> = SmallVec::new();
            entries.push((entry_end, Operand::from(0i64)));
            for &lb in &latches {
                entries.push((self.edge_source(lb, header), kk1));
            }
            self.f.insts[kk].kind = InstKind::Phi { entries };
        }
        for i in (0..cx.shape.n).filter(|&i| l.member[i]) {
            let fb = self.fblock[i];
            for &inst in &self.fwd.blocks[fb].insts {
                let data = &self.fwd.insts[inst];
                let (InstKind::Phi { entries }, Some(r)) = (&data.kind, data.result) else {
                    continue;
                };
                let Some(Operand::Value(new)) = self.vmap.get(&r).copied() else {
                    return Err(internal(&cx.floc, "a phi not copied"));
                };
                let mut out: SmallVec<[(Block, Operand); 2]> = SmallVec::new();
                if fb == header {
                    let s = from_state
                        .get(&r)
                        .copied()
                        .ok_or_else(|| internal(&cx.floc, "a header phi outside the snapshot"))?;
                    out.push((entry_end, s));
                }
                for (b, op) in entries {
                    if self.member_pos(*b).is_none() {
                        continue;
                    }
                    out.push((self.edge_source(*b, fb), self.op(op)?));
                }
                let def = self.value_def(new);
                if let Some(pi) = def {
                    self.f.insts[pi].kind = InstKind::Phi { entries: out };
                }
            }
        }
        Ok(())
    }

    /// The copy the edge from forward-sweep block `from` to `to` leaves from
    /// (a trampoline when one was put in between).
    fn edge_source(&self, from: Block, to: Block) -> Block {
        let src = self.source[&from];
        let dst = self.target[&to];
        self.tramp.get(&(src, dst)).copied().unwrap_or(src)
    }

    /// The statement defining `v` in the function being built.
    fn value_def(&self, v: Value) -> Option<Inst> {
        match self.f.values[v].def {
            irad_ir::ValueDef::Inst(i) => Some(i),
            irad_ir::ValueDef::Param(_) => None,
        }
    }

    /// The position of the primal block whose forward-sweep block is `b`,
    /// when it belongs to the loop.
    fn member_pos(&self, b: Block) -> Option<usize> {
        self.pos.get(&b).copied()
    }

    /// Which header phi is a counted loop's counter, by its index among
    /// the header phis.
    fn counter_index(&self) -> Option<usize> {
        let cx = self.cx;
        let l = &cx.shape.loops.loops[self.ck.k];
        let iv = l.counted.as_ref()?.iv;
        if !self.ck.counted {
            return None;
        }
        header_phis(cx, l.header).iter().position(|&(_, r)| r == iv)
    }

    /// The forward-sweep operand of primal value `v`.
    fn fval_of(&self, v: Value) -> Option<Operand> {
        self.fval[v]
    }

    /// The replay's operand for a forward-sweep operand.
    fn op(&self, op: &Operand) -> Result<Operand, ReverseError> {
        match op {
            Operand::Const(c) => Ok(Operand::Const(*c)),
            Operand::Value(v) => self.vmap.get(v).copied().ok_or_else(|| {
                internal(
                    &self.cx.floc,
                    format!(
                        "the replay reads value {} from outside its inputs",
                        v.as_u32()
                    ),
                )
            }),
        }
    }

    /// The replay's operands for forward-sweep operands.
    fn ops(&self, args: &[Operand]) -> Result<irad_ir::func::Args, ReverseError> {
        args.iter().map(|a| self.op(a)).collect()
    }

    /// A new block, with a label above the copied ones, at the end of the
    /// layout.
    fn new_block(&mut self) -> Block {
        let label = self.fresh_label();
        let b = self.f.add_block(label);
        self.layout.push(b);
        b
    }

    /// A label above every label used so far.
    fn fresh_label(&mut self) -> u32 {
        let label = self.next_label;
        self.next_label = self.next_label.saturating_add(1);
        label
    }

    /// `%r = pop() :: ty` at the end of `at`.
    fn pop(&mut self, at: Block, ty: Type) -> Operand {
        let kind = InstKind::Prim {
            prim: Prim::Pop,
            args: SmallVec::new(),
        };
        let (_, r) = self.f.push_inst(at, kind, Some(ty), None);
        r.map_or(Operand::Const(Const::Unit), Operand::Value)
    }

    /// `%r = call prim(args) :: ty` at the end of `at`.
    fn value(&mut self, at: Block, prim: Prim, args: &[Operand], ty: Type) -> Operand {
        let kind = InstKind::Prim {
            prim,
            args: args.into(),
        };
        let (_, r) = self.f.push_inst(at, kind, Some(ty), None);
        r.map_or(Operand::Const(Const::Unit), Operand::Value)
    }

    /// A phi of type `ty` without entries at the end of `at`.
    fn new_phi(&mut self, at: Block, ty: Type) -> (Inst, Operand) {
        let kind = InstKind::Phi {
            entries: SmallVec::new(),
        };
        let (inst, r) = self.f.push_inst(at, kind, Some(ty), None);
        (inst, r.map_or(Operand::Const(Const::Unit), Operand::Value))
    }

    /// `call prim(args)` without result at the end of `at`.
    fn effect(&mut self, at: Block, prim: Prim, args: &[Operand]) {
        let kind = InstKind::Prim {
            prim,
            args: args.into(),
        };
        self.f.push_inst(at, kind, None, None);
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
