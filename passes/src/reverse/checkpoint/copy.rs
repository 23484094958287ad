//! A copy of a checkpointed loop's recording blocks of the forward sweep,
//! pushes included, into a function being built: the replay function
//! (`replay.rs`), or the forward sweep itself (`direct.rs`: the path taken
//! when the whole loop fits in one stretch).
//!
//! The copy's statements are the forward sweep's, in the same order, with
//! fresh results; the values it reads from outside the loop are the replay's
//! parameters (`vmap`) or, in the forward sweep itself, the same values.
//! Jumps to the header may be sent elsewhere (the replay's header check),
//! exits go to one given block, the header's phis may go into another block
//! than its statements, and each copied phi gets its entries from the
//! copied predecessors plus one entry from outside given by the caller.
//!
//! Assumes the forward sweep is complete with its pushes in place, its loop
//! blocks still recording, and that its layout makes each `gotoifnot` fall
//! through to the next block. Guarantees: every block of the loop is copied
//! once, in the sweep's layout order, so that fall-throughs inside the loop
//! stay; a `gotoifnot` whose fall-through does not come next in the copy's
//! layout goes through a new `goto` block put right after it; the copy's
//! new blocks get labels above every label of the target.

use super::super::ReverseError;
use super::super::ctx::{Derivation, internal};
use irad_ir::{
    Block, Const, Func, Inst, InstData, InstKind, Operand, Prim, Terminator, Type, Value,
};
use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;

/// The operand a copied header phi (its result `r` in the forward sweep,
/// and the sweep's entries) takes from outside the copy.
pub(in crate::reverse) type EntryValue<'e> =
    dyn Fn(Value, &[(Block, Operand)]) -> Option<Operand> + 'e;

/// A loop's recording blocks being copied into the function `f`.
pub(in crate::reverse) struct LoopCopy<'a, 'r> {
    cx: &'a Derivation<'r>,
    /// The loop's index among the derivation's single-exit loops.
    k: usize,
    /// The forward sweep, its loop blocks still recording.
    fwd: &'a Func,
    /// The forward sweep's block of each primal block, by position.
    fblock: &'a [Block],
    /// The primal position of each forward-sweep block of the loop.
    pos: HashMap<Block, usize>,
    /// The function being built and its layout.
    pub f: Func,
    /// The layout of `f`, set into it at the end.
    pub layout: Vec<Block>,
    next_label: u32,
    /// The copy's operand of each value of the forward sweep it reads or
    /// defines.
    pub vmap: HashMap<Value, Operand>,
    /// Whether `f` is the forward sweep itself: values from outside the loop
    /// are read as they are.
    same_function: bool,
    /// The copy a jump to each forward-sweep block of the loop goes to.
    target: HashMap<Block, Block>,
    /// The copy each forward-sweep block's edges leave from.
    source: HashMap<Block, Block>,
    /// `goto` blocks put between a copy and its fall-through target.
    tramp: HashMap<(Block, Block), Block>,
    /// Where an exit edge to each forward-sweep block outside the loop goes
    /// instead of the one given block (the replay's own blocks for the
    /// exits arrays made in the last iteration leave through).
    pub exit_to: HashMap<Block, Block>,
}

impl<'a, 'r> LoopCopy<'a, 'r> {
    /// A copy of loop `k` of `cx` from the forward sweep `fwd` (its block of
    /// each primal block `fblock`) into `f` (the forward sweep itself when
    /// `same_function`), whose layout so far is `f.layout`.
    pub fn new(
        cx: &'a Derivation<'r>,
        k: usize,
        (fwd, fblock): (&'a Func, &'a [Block]),
        f: Func,
        same_function: bool,
    ) -> LoopCopy<'a, 'r> {
        let l = &cx.shape.loops.of(k);
        let pos: HashMap<Block, usize> = fblock
            .iter()
            .enumerate()
            .filter(|&(i, _)| l.contains(i))
            .map(|(i, &b)| (b, i))
            .collect();
        let next_label = f
            .blocks
            .values()
            .map(|b| b.label)
            .chain(pos.keys().map(|&b| fwd.blocks[b].label))
            .max()
            .unwrap_or(0)
            .saturating_add(1);
        LoopCopy {
            cx,
            k,
            fwd,
            fblock,
            pos,
            layout: f.layout.clone(),
            f,
            next_label,
            vmap: HashMap::default(),
            same_function,
            target: HashMap::default(),
            source: HashMap::default(),
            tramp: HashMap::default(),
            exit_to: HashMap::default(),
        }
    }

    /// Makes the copies of the loop's blocks, in the sweep's layout order, at
    /// position `at` of the layout; with `keep_labels` they keep the sweep's
    /// labels (in another function). Returns the copy of the header.
    pub fn add_copies(&mut self, at: usize, keep_labels: bool) -> Block {
        let members: Vec<Block> = self
            .fwd
            .layout
            .iter()
            .copied()
            .filter(|b| self.pos.contains_key(b))
            .collect();
        let start = at.min(self.layout.len());
        for (at, b) in (start..).zip(members) {
            let label = if keep_labels {
                self.fwd.blocks[b].label
            } else {
                self.fresh_label()
            };
            let copy = self.f.add_block(label);
            self.layout.insert(at, copy);
            self.target.insert(b, copy);
            self.source.insert(b, copy);
        }
        let header = self.fblock[self.loop_header()];
        self.target[&header]
    }

    /// Sends the jumps to the loop's header to `to` instead of its copy.
    pub fn retarget_header(&mut self, to: Block) {
        let header = self.fblock[self.loop_header()];
        self.target.insert(header, to);
    }

    /// The position of the loop's header among the primal's blocks.
    fn loop_header(&self) -> usize {
        self.cx.shape.loops.of(self.k).header
    }

    /// Copies the statements and terminators of the loop's blocks, blocks
    /// in reverse postorder, the header's phis into `header_phis`; jumps out
    /// of the loop go to `out`.
    pub fn copy_blocks(&mut self, header_phis: Block, out: Block) -> Result<(), ReverseError> {
        let cx = self.cx;
        let l = &cx.shape.loops.of(self.k);
        let order: Vec<usize> = cx
            .shape
            .order
            .iter()
            .copied()
            .filter(|&i| l.contains(i))
            .collect();
        for &i in &order {
            let fb = self.fblock[i];
            let copy = self.source[&fb];
            let into_phis = if i == l.header { header_phis } else { copy };
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
            self.copy_term(self.fblock[i], out)?;
        }
        Ok(())
    }

    /// A copy of statement `data` at the end of `block`; phis get their
    /// entries from [`LoopCopy::fill_phis`].
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
        let to = |b: &Block| {
            self.target
                .get(b)
                .or_else(|| self.exit_to.get(b))
                .copied()
                .unwrap_or(out)
        };
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

    /// The entries of every copied phi: from the copied predecessors as in
    /// the forward sweep, and for each header phi (of result `r` in the
    /// sweep, entered from outside with the sweep's `entries`) one from
    /// block `entry` with the operand `from_entry` gives.
    pub fn fill_phis(
        &mut self,
        entry: Block,
        from_entry: &EntryValue<'_>,
    ) -> Result<(), ReverseError> {
        let cx = self.cx;
        let l = &cx.shape.loops.of(self.k);
        let header = self.fblock[l.header];
        for i in l.members.iter().copied() {
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
                    let s = from_entry(r, entries).ok_or_else(|| {
                        internal(&cx.floc, "a header phi without its entry value")
                    })?;
                    out.push((entry, s));
                }
                for (b, op) in entries {
                    if !self.pos.contains_key(b) {
                        continue;
                    }
                    out.push((self.edge_source(*b, fb), self.op(op)?));
                }
                if let irad_ir::ValueDef::Inst(pi) = self.f.values[new].def {
                    self.f.insts[pi].kind = InstKind::Phi { entries: out };
                }
            }
        }
        Ok(())
    }

    /// The copy the edge from forward-sweep block `from` to `to` leaves from
    /// (a trampoline when one was put in between); `to` may be a block of
    /// the target outside the copy (the exit).
    pub fn edge_source(&self, from: Block, to: Block) -> Block {
        let src = self.source[&from];
        let dst = self.target.get(&to).copied().unwrap_or(to);
        self.tramp.get(&(src, dst)).copied().unwrap_or(src)
    }

    /// The copy of forward-sweep block `fb` of the loop.
    pub fn copy_of(&self, fb: Block) -> Option<Block> {
        self.source.get(&fb).copied()
    }

    /// Sets the entries of the copy's phi `phi`.
    pub fn set_phi_entries(&mut self, phi: Value, entries: SmallVec<[(Block, Operand); 2]>) {
        if let irad_ir::ValueDef::Inst(pi) = self.f.values[phi].def {
            self.f.insts[pi].kind = InstKind::Phi { entries };
        }
    }

    /// The copy's operand for a forward-sweep operand.
    pub fn op(&self, op: &Operand) -> Result<Operand, ReverseError> {
        match op {
            Operand::Const(c) => Ok(Operand::Const(*c)),
            Operand::Value(v) => match self.vmap.get(v) {
                Some(&x) => Ok(x),
                None if self.same_function => Ok(*op),
                None => Err(internal(
                    &self.cx.floc,
                    format!(
                        "the replay reads value {} from outside its inputs",
                        v.as_u32()
                    ),
                )),
            },
        }
    }

    /// The copy's operands for forward-sweep operands.
    fn ops(&self, args: &[Operand]) -> Result<irad_ir::func::Args, ReverseError> {
        args.iter().map(|a| self.op(a)).collect()
    }

    /// A new block, with a label above every other, at the end of the
    /// layout.
    pub fn new_block(&mut self) -> Block {
        let label = self.fresh_label();
        let b = self.f.add_block(label);
        self.layout.push(b);
        b
    }

    /// A label above every label used so far.
    pub fn fresh_label(&mut self) -> u32 {
        let label = self.next_label;
        self.next_label = self.next_label.saturating_add(1);
        label
    }

    /// `%r = pop() :: ty` at the end of `at`.
    pub fn pop(&mut self, at: Block, ty: Type) -> Operand {
        self.value(at, Prim::Pop, &[], ty)
    }

    /// `%r = call prim(args) :: ty` at the end of `at`.
    pub fn value(&mut self, at: Block, prim: Prim, args: &[Operand], ty: Type) -> Operand {
        let kind = InstKind::Prim {
            prim,
            args: args.into(),
        };
        let (_, r) = self.f.push_inst(at, kind, Some(ty), None);
        r.map_or(Operand::Const(Const::Unit), Operand::Value)
    }

    /// `call prim(args)` without result at the end of `at`.
    pub fn effect(&mut self, at: Block, prim: Prim, args: &[Operand]) {
        let kind = InstKind::Prim {
            prim,
            args: args.into(),
        };
        self.f.push_inst(at, kind, None, None);
    }

    /// A phi of type `ty` without entries at the end of `at`.
    pub fn new_phi(&mut self, at: Block, ty: Type) -> (Inst, Operand) {
        let kind = InstKind::Phi {
            entries: SmallVec::new(),
        };
        let (inst, r) = self.f.push_inst(at, kind, Some(ty), None);
        (inst, r.map_or(Operand::Const(Const::Unit), Operand::Value))
    }

    /// The function and its layout, and the copy's value of each value of
    /// the forward sweep it reads or defines.
    pub fn finish(self) -> (Func, HashMap<Value, Value>) {
        let LoopCopy {
            mut f,
            layout,
            vmap,
            ..
        } = self;
        f.layout = layout;
        let values = vmap
            .into_iter()
            .filter_map(|(old, new)| match new {
                Operand::Value(new) => Some((old, new)),
                Operand::Const(_) => None,
            })
            .collect();
        (f, values)
    }
}
