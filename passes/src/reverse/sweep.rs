//! The forward sweep `@f.rev.fwd` of one derivation (docs/reverse.md).
//!
//! It has the primal's blocks, labels and layout. Each statement is replaced
//! by its rule's forward part (primal work, shadows, values to save), one
//! method per statement kind: a phi ([`Sweep::phis`], entries added at the
//! end), a statement without derivative work, a primitive with its rrule, an
//! `invoke` (a function marked primitive, or the pieces of a user function),
//! a call through a function value. Then, following the [`TapePlan`], the
//! saved values are pushed: right after their last reader, at the end of a
//! block, or once at the end of the return block; then the predecessor index
//! of a block whose successor joins; then the terminator. The sweep returns
//! the primal result (with the result's shadows).
//!
//! Assumes a [`Derivation`] of a normalised primal and a declared, empty
//! forward-sweep function of the right type. Guarantees: blocks are filled
//! in reverse postorder (definitions before uses); a rule's forward part
//! creates no blocks (checked); the pushes the plan moves next to their
//! statement are emitted at the block's end and moved into place by
//! [`place_moved_pushes`] once the builder is gone.

use super::ReverseError;
use super::bbcode::BTerm;
use super::checkpoint::{Checkpoints, SweepView};
use super::choose::PlanInput;
use super::ctx::{
    Derivation, How, Shadows, Stmt, args_of, build_err, emit_value, err, internal, map_op,
    shadows_of,
};
use super::plan::TapePlan;
use irad_ir::entity::SecondaryMap;
use irad_ir::{
    Block, Const, FuncBuilder, FuncId, Inst, InstKind, Location, Module, Operand, Prim, Type, Value,
};
use irad_rules::{Callee, RevArg, RevCall, RevFwdOut, Rrule};
use rustc_hash::FxHashSet as HashSet;
use smallvec::SmallVec;

/// The state of the forward sweep being built.
pub(super) struct Sweep<'a, 'r, 'm> {
    cx: &'a Derivation<'r>,
    fb: FuncBuilder<'m>,
    /// The forward-sweep operand of each primal value.
    fval: SecondaryMap<Value, Option<Operand>>,
    /// The shadows of each primal value.
    fshadow: Shadows,
    /// The block of the forward sweep of each primal block, by position.
    fblock: Vec<Block>,
    /// The position of each primal block.
    index: SecondaryMap<Block, Option<usize>>,
    /// The phis of the shadows of each primal phi.
    shadow_phis: SecondaryMap<Value, SmallVec<[Value; 1]>>,
    /// How each statement was differentiated and what it saves.
    stmts: SecondaryMap<Inst, Option<Stmt>>,
    /// Where a statement's forward part ends in its block, if the part
    /// stayed in the block (pushes may be moved there).
    fend: SecondaryMap<Inst, Option<usize>>,
    /// Pushes to move: per block, (position, push statement).
    placed: Vec<(Block, Vec<(usize, Inst)>)>,
}

/// What the forward sweep hands on: the statements for the pullback and the
/// pushes still to move into place.
pub(super) struct Swept {
    /// How each statement was differentiated and what it saves.
    pub stmts: SecondaryMap<Inst, Option<Stmt>>,
    /// Pushes to move: per block, (position, push statement).
    pub placed: Vec<(Block, Vec<(usize, Inst)>)>,
    /// The forward-sweep operand of each primal value.
    pub fval: SecondaryMap<Value, Option<Operand>>,
    /// The block of the forward sweep of each primal block, by position.
    pub fblock: Vec<Block>,
}

impl<'a, 'r, 'm> Sweep<'a, 'r, 'm> {
    /// Starts the body of `fwd_id`: its parameters, blocks and phis.
    pub fn new(
        cx: &'a Derivation<'r>,
        module: &'m mut Module,
        fwd_id: FuncId,
    ) -> Result<Sweep<'a, 'r, 'm>, ReverseError> {
        let fb = FuncBuilder::new(module, fwd_id).map_err(|e| err(&cx.floc, e.to_string()))?;
        let mut sweep = Sweep {
            cx,
            fb,
            fval: SecondaryMap::new(),
            fshadow: SecondaryMap::new(),
            fblock: Vec::new(),
            index: cx.shape.bb.index(),
            shadow_phis: SecondaryMap::new(),
            stmts: SecondaryMap::new(),
            fend: SecondaryMap::new(),
            placed: Vec::new(),
        };
        sweep.params()?;
        let build = build_err(&cx.floc);
        sweep.fblock = cx
            .shape
            .bb
            .blocks
            .iter()
            .map(|b| sweep.fb.create_block_labeled(cx.src.blocks[b.id].label))
            .collect::<Result<_, _>>()
            .map_err(build)?;
        sweep.phis()?;
        Ok(sweep)
    }

    /// The parameters: the primal's, then one shadow per `[f64]` array in
    /// them.
    fn params(&mut self) -> Result<(), ReverseError> {
        let src = &self.cx.src;
        let build = build_err(&self.cx.floc);
        let mut next_shadow = src.params.len();
        for (i, &p) in src.params.iter().enumerate() {
            self.fval
                .set(p, Some(Operand::Value(self.fb.param(i).map_err(&build)?)));
            let mut sh = SmallVec::new();
            for _ in 0..Type::shadow_leaves(&src.values[p].ty) {
                sh.push(Operand::Value(self.fb.param(next_shadow).map_err(&build)?));
                next_shadow += 1;
            }
            self.fshadow.set(p, sh);
        }
        Ok(())
    }

    /// Phis (and the phis of their shadows) first, entries at the end.
    fn phis(&mut self) -> Result<(), ReverseError> {
        let cx = self.cx;
        let build = build_err(&cx.floc);
        for &i in &cx.shape.order {
            for &inst in &cx.shape.bb.blocks[i].stmts {
                let data = &cx.src.insts[inst];
                if let (InstKind::Phi { .. }, Some(res)) = (&data.kind, data.result) {
                    let ty = cx.src.values[res].ty.clone();
                    let v = self
                        .fb
                        .insert_phi(self.fblock[i], ty.clone())
                        .map_err(&build)?;
                    self.fval.set(res, Some(Operand::Value(v)));
                    let mut sh = SmallVec::new();
                    let mut shv = SmallVec::new();
                    for _ in 0..Type::shadow_leaves(&ty) {
                        let s = self
                            .fb
                            .insert_phi(self.fblock[i], Type::Array(irad_ir::Scalar::F64))
                            .map_err(&build)?;
                        sh.push(Operand::Value(s));
                        shv.push(s);
                    }
                    self.fshadow.set(res, sh);
                    self.shadow_phis.set(res, shv);
                }
            }
        }
        Ok(())
    }

    /// The forward part of every statement, blocks in reverse postorder.
    pub fn statements(&mut self) -> Result<(), ReverseError> {
        let cx = self.cx;
        let build = build_err(&cx.floc);
        for &i in &cx.shape.order {
            self.fb.switch_to_block(self.fblock[i]).map_err(&build)?;
            for &inst in &cx.shape.bb.blocks[i].stmts {
                self.statement(i, inst)?;
            }
        }
        Ok(())
    }

    /// The forward part of statement `inst` of block `i`.
    fn statement(&mut self, i: usize, inst: Inst) -> Result<(), ReverseError> {
        let cx = self.cx;
        let data = &cx.src.insts[inst];
        let loc = cx.loc_of(inst);
        self.fb.set_pos(data.pos);
        let res_ty = cx.result_type(inst);
        let (how, out) = match &data.kind {
            kind @ (InstKind::Prim { .. }
            | InstKind::Invoke { .. }
            | InstKind::CallValue { .. })
                if cx.act.primal_only(&cx.src, inst) =>
            {
                (How::Primal, self.primal(kind, &res_ty, &loc)?)
            }
            InstKind::Phi { .. } => {
                let saved = SmallVec::new();
                self.stmts.set(
                    inst,
                    Some(Stmt {
                        how: How::Phi,
                        saved,
                    }),
                );
                return Ok(());
            }
            InstKind::Prim { prim, args } => self.prim_rule(*prim, args, &res_ty, &loc)?,
            InstKind::Invoke { func, args } => self.invoke(*func, args, &res_ty, &loc)?,
            InstKind::CallValue { callee, args } => self.dynamic(*callee, args, &res_ty, &loc)?,
        };
        if let Some(res) = data.result {
            self.fval.set(res, Some(out.primal));
            self.fshadow.set(res, out.shadows.clone());
        }
        if self.fb.current_block() == Some(self.fblock[i]) {
            let end = self.fb.func().blocks[self.fblock[i]].insts.len();
            self.fend.set(inst, Some(end));
        }
        let saved = out.saved;
        self.stmts.set(inst, Some(Stmt { how, saved }));
        Ok(())
    }

    /// A statement without derivative work: the primal statement alone.
    fn primal(
        &mut self,
        kind: &InstKind,
        res_ty: &Type,
        loc: &Location,
    ) -> Result<RevFwdOut, ReverseError> {
        let r = primal_stmt(&mut self.fb, kind, res_ty, &self.fval, loc)?;
        Ok(RevFwdOut {
            primal: r,
            shadows: SmallVec::new(),
            saved: SmallVec::new(),
        })
    }

    /// `call P(args)`: the forward part of the rrule of P for those types.
    fn prim_rule(
        &mut self,
        prim: Prim,
        args: &[Operand],
        res_ty: &Type,
        loc: &Location,
    ) -> Result<(How, RevFwdOut), ReverseError> {
        let types = self.arg_types(args)?;
        let rule = self
            .cx
            .registry
            .rrule(prim, &types)
            .ok_or_else(|| err(loc, format!("no reverse rule for `{prim}`")))?;
        let callee = Callee::Prim(prim);
        let out = self.forward_part(&*rule, callee, args, &types, res_ty, loc)?;
        Ok((How::Rule(rule, None), out))
    }

    /// `invoke @g(args)`: the rrule registered for `@g`, or
    /// `invoke @g.rev.fwd(args, shadows)`.
    fn invoke(
        &mut self,
        func: FuncId,
        args: &[Operand],
        res_ty: &Type,
        loc: &Location,
    ) -> Result<(How, RevFwdOut), ReverseError> {
        // The callee's name is copied only for a rule (a call of a derived
        // function, the common case, needs none).
        let types = self.arg_types(args)?;
        let rule = {
            let m = self.fb.module();
            let name = m.get(func).map_or("", |f| f.name.as_str());
            self.cx.registry.function_rrule_in(m, name)
        };
        if let Some(rule) = rule {
            let name = self
                .fb
                .module()
                .get(func)
                .map(|f| f.name.clone())
                .unwrap_or_default();
            let out = self.forward_part(&*rule, Callee::Func(&name), args, &types, res_ty, loc)?;
            return Ok((How::Rule(rule, Some(name)), out));
        }
        let &(gf, gb) = self
            .cx
            .callees
            .get(&func)
            .ok_or_else(|| internal(loc, "a callee without rule"))?;
        let ops = self.args_and_shadows(args, loc)?;
        let build = build_err(&self.cx.floc);
        let r = self.fb.invoke(gf, &ops).map_err(&build)?;
        let out = split_result(&mut self.fb, r, res_ty).map_err(&build)?;
        Ok((How::Invoke(gb), out))
    }

    /// `call %h(args)`: `call revfwd(%h)(args, shadows)`, saving `%h`.
    fn dynamic(
        &mut self,
        callee: Value,
        args: &[Operand],
        res_ty: &Type,
        loc: &Location,
    ) -> Result<(How, RevFwdOut), ReverseError> {
        let fc = map_op(&self.fval, &Operand::Value(callee), loc)?;
        let ops = self.args_and_shadows(args, loc)?;
        let g = emit_value(&mut self.fb, Prim::Revfwd, &[fc]).map_err(|e| err(loc, e))?;
        let Operand::Value(g) = g else {
            return Err(internal(loc, "revfwd gave a constant"));
        };
        let build = build_err(&self.cx.floc);
        let r = self.fb.call_value(g, &ops).map_err(&build)?;
        let mut out = split_result(&mut self.fb, r, res_ty).map_err(&build)?;
        out.saved.push(fc);
        Ok((How::Dynamic, out))
    }

    /// The primal types of `args`.
    fn arg_types(&self, args: &[Operand]) -> Result<SmallVec<[Type; 3]>, ReverseError> {
        args.iter()
            .map(|a| self.cx.optype(a, self.fb.module()))
            .collect()
    }

    /// The mapped arguments, then the shadows of each: the arguments of a
    /// forward-sweep piece.
    fn args_and_shadows(
        &self,
        args: &[Operand],
        loc: &Location,
    ) -> Result<SmallVec<[Operand; 8]>, ReverseError> {
        let mut ops: SmallVec<[Operand; 8]> = SmallVec::new();
        for a in args {
            ops.push(map_op(&self.fval, a, loc)?);
        }
        for a in args {
            ops.extend(shadows_of(&self.fshadow, a));
        }
        Ok(ops)
    }

    /// Runs a rule's forward part and checks what it returned.
    fn forward_part(
        &mut self,
        rule: &dyn Rrule,
        callee: Callee<'_>,
        args: &[Operand],
        types: &[Type],
        res_ty: &Type,
        loc: &Location,
    ) -> Result<RevFwdOut, ReverseError> {
        let mut rargs: SmallVec<[RevArg; 3]> = SmallVec::with_capacity(args.len());
        for (a, t) in args.iter().zip(types) {
            rargs.push(RevArg {
                primal: map_op(&self.fval, a, loc)?,
                ty: t.clone(),
                shadows: shadows_of(&self.fshadow, a),
                active: self.cx.act.wants_cotangent(a),
            });
        }
        let call = RevCall {
            callee,
            args: &rargs,
            result: res_ty,
        };
        let fb = &mut self.fb;
        let before = fb.current_block();
        let fail = |msg: String| err(loc, format!("reverse rule of `{callee}`: {msg}"));
        let out = rule.forward(fb, &call).map_err(|e| fail(e.to_string()))?;
        if fb.current_block() != before {
            return Err(fail("its forward part created blocks".into()));
        }
        let got = fb
            .operand_type(&out.primal)
            .map_err(|e| fail(e.to_string()))?;
        if &got != res_ty {
            return Err(fail(format!("it returned a {got} for a {res_ty}")));
        }
        if out.shadows.len() != Type::shadow_leaves(res_ty) {
            return Err(fail(format!(
                "it returned {} shadow(s) for a {res_ty}",
                out.shadows.len()
            )));
        }
        Ok(out)
    }

    /// The tape plan, from what the statements save.
    pub fn plan(&self) -> TapePlan {
        let input = PlanInput {
            stmts: &self.stmts,
            fend: &self.fend,
            fval: &self.fval,
            fwd: self.fb.func(),
            fblock: &self.fblock,
        };
        TapePlan::build(self.cx, &input)
    }

    /// The end of every block: its pushes, then its terminator. The exit
    /// block of a checkpointed loop with a direct path (`ck`) also pushes
    /// the flag saying which path ran, after its saved values, and each
    /// block an exit edge of a thinned loop leads to the number of
    /// stretches the run started, after the flag: phis whose entries the
    /// checkpoint rewrite adds.
    pub fn block_ends(
        &mut self,
        plan: &TapePlan,
        ck: &mut Checkpoints,
    ) -> Result<(), ReverseError> {
        for &i in &self.cx.shape.order {
            let flagged = ck.exited_at(&self.cx.shape.loops, i, |c| c.direct.is_some());
            let counted = ck.exited_at(&self.cx.shape.loops, i, |_| true);
            let (flag, count) = self.block_end(i, plan, (flagged.is_some(), counted.is_some()))?;
            if let (Some(k), Some(flag)) = (flagged, flag) {
                ck.loops[k].flag = Some(flag);
            }
            if let (Some(k), Some(count)) = (counted, count) {
                ck.loops[k].counts.push((i, count));
            }
        }
        Ok(())
    }

    /// The pushes of block `i` and its terminator (and, when `flagged`, the
    /// flag phi it pushes, when `counted` the count phi, returned). The
    /// pushes of values the plan moves next to a statement come first and
    /// are recorded to be moved into place.
    fn block_end(
        &mut self,
        i: usize,
        plan: &TapePlan,
        (flagged, counted): (bool, bool),
    ) -> Result<(Option<Value>, Option<Value>), ReverseError> {
        let cx = self.cx;
        let shape = &cx.shape;
        let block = shape.bb.blocks[i].id;
        let build = build_err(&cx.floc);
        self.fb.switch_to_block(self.fblock[i]).map_err(&build)?;
        let mut here = Vec::new();
        for &inst in &shape.bb.blocks[i].stmts {
            for save in plan.after_stmt(inst) {
                self.fb.set_pos(cx.src.insts[inst].pos);
                self.push(Operand::Value(save.value))?;
                let pushed = self.fb.func().blocks[self.fblock[i]].insts.last().copied();
                let at = self.fend[inst];
                if let (Some(p), Some(at)) = (pushed, at) {
                    here.push((at, p));
                }
            }
        }
        if !here.is_empty() {
            self.placed.push((self.fblock[i], here));
        }
        self.fb.set_pos(cx.src.blocks[block].term_pos);
        for save in plan.at_block_end(block) {
            self.push(Operand::Value(save.value))?;
        }
        let flag = match flagged {
            true => Some(self.pushed_phi(i, Type::Bool)?),
            false => None,
        };
        let count = match counted {
            true => Some(self.pushed_phi(i, Type::I64)?),
            false => None,
        };
        if i == shape.ret {
            for save in plan.once() {
                self.push(Operand::Value(save.value))?;
            }
        }
        if let Some(br) = plan.branch_from(block) {
            self.push(br.pushed())?;
        }
        self.terminator(i)?;
        Ok((flag, count))
    }

    /// A phi of type `ty` in block `i`, without entries, pushed at the
    /// current position.
    fn pushed_phi(&mut self, i: usize, ty: Type) -> Result<Value, ReverseError> {
        let phi = self
            .fb
            .insert_phi(self.fblock[i], ty)
            .map_err(build_err(&self.cx.floc))?;
        self.push(Operand::Value(phi))?;
        // The phi goes before the statements: the positions where pushes
        // move to are one further.
        if let Some((b, moves)) = self.placed.last_mut()
            && *b == self.fblock[i]
        {
            moves.iter_mut().for_each(|(at, _)| *at += 1);
        }
        Ok(phi)
    }

    /// `push(op)` at the current position.
    fn push(&mut self, op: Operand) -> Result<(), ReverseError> {
        let build = build_err(&self.cx.floc);
        self.fb.prim(Prim::Push, &[op]).map_err(build)?;
        Ok(())
    }

    /// The terminator of block `i`, on the forward sweep's blocks; `return`
    /// also returns the result's shadows.
    fn terminator(&mut self, i: usize) -> Result<(), ReverseError> {
        let cx = self.cx;
        let build = build_err(&cx.floc);
        let tloc = cx.block_loc(i);
        match &cx.shape.bb.blocks[i].term {
            BTerm::Goto(t) => {
                let t = self.pos(*t, &tloc)?;
                self.fb.goto(self.fblock[t]).map_err(&build)?;
            }
            BTerm::Br { cond, else_, .. } => {
                let c = map_op(&self.fval, cond, &tloc)?;
                let e = self.pos(*else_, &tloc)?;
                self.fb.gotoifnot(c, self.fblock[e]).map_err(&build)?;
            }
            BTerm::Switch { index, targets } => {
                let c = map_op(&self.fval, index, &tloc)?;
                let ts: Vec<Block> = targets
                    .iter()
                    .map(|t| Ok(self.fblock[self.pos(*t, &tloc)?]))
                    .collect::<Result<_, ReverseError>>()?;
                self.fb.switch(c, &ts).map_err(&build)?;
            }
            BTerm::Return(op) => {
                let v = map_op(&self.fval, op, &tloc)?;
                let sh = shadows_of(&self.fshadow, op);
                let ret = if Type::shadow_leaves(&cx.src.ret) > 0 {
                    let mut parts = vec![v];
                    parts.extend(sh);
                    emit_value(&mut self.fb, Prim::Tuple, &parts).map_err(|e| err(&tloc, e))?
                } else {
                    v
                };
                self.fb.ret(ret).map_err(&build)?;
            }
        }
        Ok(())
    }

    /// The position of primal block `b` among the blocks of the shape.
    fn pos(&self, b: Block, loc: &Location) -> Result<usize, ReverseError> {
        self.index[b].ok_or_else(|| internal(loc, "a branch to a block outside the function"))
    }

    /// The entries of the phis (and of their shadows' phis), from reachable
    /// predecessors only.
    pub fn phi_entries(&mut self) -> Result<(), ReverseError> {
        let cx = self.cx;
        let build = build_err(&cx.floc);
        for &i in &cx.shape.order {
            for &inst in &cx.shape.bb.blocks[i].stmts {
                let data = &cx.src.insts[inst];
                let (InstKind::Phi { entries }, Some(res)) = (&data.kind, data.result) else {
                    continue;
                };
                let Some(Operand::Value(phi)) = self.fval[res] else {
                    continue;
                };
                let loc = cx.loc_of(inst);
                for (p, op) in entries {
                    let Some(pi) = self.index[*p] else {
                        continue;
                    };
                    if !cx.shape.reachable[pi] {
                        continue;
                    }
                    let mapped = map_op(&self.fval, op, &loc)?;
                    self.fb
                        .add_phi_entry(phi, self.fblock[pi], mapped)
                        .map_err(&build)?;
                    let shs = shadows_of(&self.fshadow, op);
                    let phis = self.shadow_phis[res].clone();
                    if shs.len() != phis.len() {
                        return Err(internal(&loc, "shadows of a phi entry"));
                    }
                    for (s, ph) in shs.iter().zip(phis) {
                        self.fb
                            .add_phi_entry(ph, self.fblock[pi], *s)
                            .map_err(&build)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Ends the sweep, releasing the module.
    pub fn finish(self) -> Swept {
        Swept {
            stmts: self.stmts,
            placed: self.placed,
            fval: self.fval,
            fblock: self.fblock,
        }
    }

    /// What the checkpointing decisions read of the sweep so far.
    pub fn view(&self) -> SweepView<'_> {
        SweepView {
            fwd: self.fb.func(),
            fblock: &self.fblock,
            fval: &self.fval,
            fshadow: &self.fshadow,
            stmts: &self.stmts,
        }
    }
}

/// Moves each recorded push right after the forward part of its statement.
pub(super) fn place_moved_pushes(
    module: &mut Module,
    fwd_id: FuncId,
    placed: Vec<(Block, Vec<(usize, Inst)>)>,
) {
    let Some(f) = module.get_mut(fwd_id) else {
        return;
    };
    for (b, pushes) in placed {
        let insts = std::mem::take(&mut f.blocks[b].insts);
        let movers: HashSet<Inst> = pushes.iter().map(|&(_, p)| p).collect();
        let mut out = Vec::with_capacity(insts.len());
        let mut k = 0;
        for (pos, inst) in insts.iter().enumerate() {
            while k < pushes.len() && pushes[k].0 == pos {
                out.push(pushes[k].1);
                k += 1;
            }
            if !movers.contains(inst) {
                out.push(*inst);
            }
        }
        out.extend(pushes[k..].iter().map(|&(_, p)| p));
        f.blocks[b].insts = out;
    }
}

/// The primal statement of `kind` (of result type `res_ty`) in the forward
/// sweep, its result as an operand (`()` for none).
pub(super) fn primal_stmt(
    fb: &mut FuncBuilder<'_>,
    kind: &InstKind,
    res_ty: &Type,
    fval: &SecondaryMap<Value, Option<Operand>>,
    loc: &Location,
) -> Result<Operand, ReverseError> {
    let build = build_err(loc);
    let ops: Vec<Operand> = args_of(kind)
        .iter()
        .map(|a| map_op(fval, a, loc))
        .collect::<Result<_, _>>()?;
    let r = match (kind, res_ty) {
        (
            InstKind::Prim {
                prim: Prim::Alloc, ..
            },
            Type::Array(elem),
        ) => {
            let n = ops.first().copied().unwrap_or(Operand::from(0i64));
            Some(fb.alloc(*elem, n).map_err(build)?)
        }
        (InstKind::Prim { prim, .. }, _) => fb.prim(*prim, &ops).map_err(build)?,
        (InstKind::Invoke { func, .. }, _) => fb.invoke(*func, &ops).map_err(build)?,
        (InstKind::CallValue { callee, .. }, _) => {
            let Operand::Value(f) = map_op(fval, &Operand::Value(*callee), loc)? else {
                return Err(internal(loc, "a call through a constant"));
            };
            fb.call_value(f, &ops).map_err(build)?
        }
        (InstKind::Phi { .. }, _) => return Err(internal(loc, "a phi as a statement")),
    };
    Ok(r.map_or(Operand::Const(Const::Unit), Operand::Value))
}

/// The primal result and shadows of a call of a forward part.
fn split_result(
    b: &mut FuncBuilder<'_>,
    r: Option<Value>,
    res_ty: &Type,
) -> Result<RevFwdOut, irad_ir::BuildError> {
    let k = Type::shadow_leaves(res_ty);
    let r = r.map(Operand::Value).unwrap_or(Operand::Const(Const::Unit));
    if k == 0 {
        return Ok(RevFwdOut {
            primal: r,
            shadows: SmallVec::new(),
            saved: SmallVec::new(),
        });
    }
    let field = |b: &mut FuncBuilder<'_>, j: usize| -> Result<Operand, irad_ir::BuildError> {
        let v = b.prim(Prim::Getfield, &[r, Operand::from(j as i64)])?;
        Ok(v.map(Operand::Value).unwrap_or(Operand::Const(Const::Unit)))
    };
    let primal = field(b, 0)?;
    let mut shadows = SmallVec::new();
    for j in 0..k {
        shadows.push(field(b, j + 1)?);
    }
    Ok(RevFwdOut {
        primal,
        shadows,
        saved: SmallVec::new(),
    })
}
