//! The pullback `@f.rev.back` of one derivation (docs/reverse.md).
//!
//! One reverse block per primal block that can reach the return block,
//! entered from the reverse of its successors, visited in reverse postorder
//! of the reversed control flow. Each pops what the [`TapePlan`] says its
//! primal block pushed, runs the pullbacks of the statements in reverse
//! order (one method per statement kind: an rrule, the pullback piece of an
//! invoked user function, `revback` of a saved function value), then leaves
//! to the reverse of its one predecessor, or pops the recorded predecessor
//! index and `switch`es on it; the reverse of the entry returns the
//! parameters' cotangents.
//!
//! Cotangents are SSA values: a map from (primal value, f64 leaf) to the
//! current cotangent, passed along reverse edges; where the reverse flow
//! joins (the reverse of a block with several successors) each active
//! cotangent live there gets a phi. A phi's cotangent goes to the incoming
//! value of the edge taken only.
//!
//! Assumes the forward sweep of the same [`Derivation`] has been built with
//! the same plan, and a declared, empty pullback function of the right type.
//! Guarantees: every value the plan pushes is popped once, in reverse order,
//! on every path through the pullback.

mod checkpoint;

use super::ReverseError;
use super::analysis::{has_cotangent, rpo};
use super::bbcode::BTerm;
use super::checkpoint::Checkpoints;
use super::ctx::{
    Cots, Derivation, How, Key, Stmt, accumulate, args_of, build_err, emit_value, err, internal,
};
use super::plan::TapePlan;
use irad_ir::entity::SecondaryMap;
use irad_ir::{
    Block, Const, FuncBuilder, FuncId, Inst, InstKind, Location, Module, Operand, Prim, Type, Value,
};
use irad_rules::emit::f64c;
use irad_rules::{Callee, PullbackCall, Rrule};
use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;
use std::collections::BTreeMap;

/// The cotangents arriving at a reverse block: the map of the block that
/// jumps there and the phi cotangents of that edge, still to add.
type Incoming = Option<(Cots, Vec<(Key, Operand)>)>;

/// The per-argument cotangents of a statement's pullback.
type ArgCots = SmallVec<[irad_rules::Cotangents; 3]>;

/// The state of the pullback being built.
pub(super) struct Pullback<'a, 'r, 'm> {
    cx: &'a Derivation<'r>,
    bk: FuncBuilder<'m>,
    plan: &'a TapePlan,
    stmts: &'a SecondaryMap<Inst, Option<Stmt>>,
    /// The reverse block of each primal block, by position.
    rblock: Vec<Option<Block>>,
    /// The blocks the reverse of each block leaves to.
    rev_succs: Vec<SmallVec<[usize; 2]>>,
    /// The cotangent phis of each reverse block where the reverse flow joins.
    joins: Vec<BTreeMap<Key, Value>>,
    /// What arrives at each reverse block without phis.
    incoming: Vec<Incoming>,
    /// The values pushed once per call, popped where the pullback starts.
    avail: HashMap<Value, Operand>,
    /// The position of the block whose reverse is being built.
    cur: usize,
    /// The values popped in the reverse of the current block.
    local: HashMap<Value, Operand>,
    /// The values popped where the reverse of each block starts (those of a
    /// loop's exit serve the whole reverse of the loop).
    popped_end: Vec<HashMap<Value, Operand>>,
    /// The values recomputed in the reverse of the current block.
    memo: HashMap<Value, Operand>,
    /// The recomputations of the current block by primitive and operands,
    /// so that one is not done twice (array reads only until a statement
    /// that writes arrays is passed).
    numbered: HashMap<(Prim, SmallVec<[OpKey; 3]>), Operand>,
    /// Per single-exit loop: the counter's phi in the reverse of a counted
    /// loop's header, and its value in the reverse of the loop's body.
    counters: Vec<Option<(Value, Option<Operand>)>>,
    /// The checkpointed loops.
    ck: &'a Checkpoints,
    /// Per single-exit loop that is checkpointed and counted: the phi of the
    /// current stretch's start (its counter's first value) in the reverse of
    /// the header, and the same in the reverse of its latch.
    starts: Vec<Option<(Value, Value)>>,
    /// Per single-exit loop that is checkpointed with a direct path: the flag
    /// popped where the reverse of its exit starts (whether it was
    /// checkpointed).
    flags: Vec<Option<Operand>>,
    /// For each thinned checkpointed loop, the number of stretches its run
    /// started, popped where the reverse of its exit starts.
    counts: Vec<Option<Operand>>,
}

/// An operand as a key of [`Pullback::numbered`]: a constant by its bits
/// (as `Const`'s equality compares them).
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
enum OpKey {
    Value(Value),
    F64(u64),
    I64(i64),
    Bool(bool),
    Unit,
    Func(irad_ir::FuncRef),
}

impl<'a, 'r, 'm> Pullback<'a, 'r, 'm> {
    /// Starts the body of `back_id`: its blocks and cotangent phis.
    pub fn new(
        cx: &'a Derivation<'r>,
        module: &'m mut Module,
        back_id: FuncId,
        (stmts, plan): (&'a SecondaryMap<Inst, Option<Stmt>>, &'a TapePlan),
        ck: &'a Checkpoints,
    ) -> Result<Pullback<'a, 'r, 'm>, ReverseError> {
        let shape = &cx.shape;
        let n = shape.n;
        let mut bk = FuncBuilder::new(module, back_id).map_err(|e| err(&cx.floc, e.to_string()))?;
        // Reverse blocks: the return block's first (the entry), then the others.
        let mut rblock: Vec<Option<Block>> = vec![None; n];
        rblock[shape.ret] = Some(bk.create_block());
        for i in (0..n).rev() {
            if i != shape.ret && shape.kept(i) {
                rblock[i] = Some(bk.create_block());
            }
        }
        let rev_succs: Vec<SmallVec<[usize; 2]>> = (0..n)
            .map(|i| {
                if rblock[i].is_some() {
                    shape.preds[i]
                        .iter()
                        .copied()
                        .filter(|&p| rblock[p].is_some())
                        .collect()
                } else {
                    SmallVec::new()
                }
            })
            .collect();
        let mut pb = Pullback {
            cx,
            bk,
            plan,
            stmts,
            rblock,
            rev_succs,
            joins: vec![BTreeMap::new(); n],
            incoming: vec![None; n],
            avail: HashMap::default(),
            cur: 0,
            local: HashMap::default(),
            popped_end: vec![HashMap::default(); n],
            memo: HashMap::default(),
            numbered: HashMap::default(),
            counters: vec![None; shape.loops.loops.len()],
            ck,
            starts: vec![None; shape.loops.count()],
            flags: vec![None; shape.loops.count()],
            counts: vec![None; shape.loops.count()],
        };
        pb.join_phis()?;
        pb.counter_phis()?;
        pb.start_phis()?;
        Ok(pb)
    }

    /// Cotangent phis where the reverse flow joins.
    fn join_phis(&mut self) -> Result<(), ReverseError> {
        let cx = self.cx;
        let build = build_err(&cx.floc);
        for i in 0..cx.shape.n {
            let Some(rb) = self.rblock[i] else { continue };
            let into = cx.shape.succs[i]
                .iter()
                .filter(|&&s| self.rblock[s].is_some())
                .count();
            if into < 2 {
                continue;
            }
            for &v in &cx.live[i] {
                for k in 0..Type::cotangent_leaves(&cx.src.values[v].ty) {
                    let phi = self.bk.insert_phi(rb, Type::F64).map_err(&build)?;
                    self.joins[i].insert((v, k as u32), phi);
                }
            }
        }
        Ok(())
    }

    /// The counter phi of the reverse of each counted loop's header.
    fn counter_phis(&mut self) -> Result<(), ReverseError> {
        let cx = self.cx;
        let build = build_err(&cx.floc);
        for (k, c) in self.plan.counted_slots().iter().enumerate() {
            if c.is_none() {
                continue;
            }
            let h = cx.shape.loops.loops[k].header;
            let rb = self.rblock[h].ok_or_else(|| internal(&cx.floc, "a counted loop's header"))?;
            let phi = self.bk.insert_phi(rb, Type::I64).map_err(&build)?;
            self.counters[k] = Some((phi, None));
        }
        Ok(())
    }

    /// Every reverse block, in reverse postorder of the reversed flow.
    pub fn blocks(&mut self) -> Result<(), ReverseError> {
        let cx = self.cx;
        let ret = cx.shape.ret;
        let rorder = rpo(&self.rev_succs, ret);
        let ret_op = match &cx.shape.bb.blocks[ret].term {
            BTerm::Return(op) => *op,
            _ => return Err(internal(&cx.floc, "the return block")),
        };
        for &i in &rorder {
            self.block(i, ret_op)?;
        }
        Ok(())
    }

    /// The reverse of block `i`.
    fn block(&mut self, i: usize, ret_op: Operand) -> Result<(), ReverseError> {
        let cx = self.cx;
        let Some(rb) = self.rblock[i] else {
            return Ok(());
        };
        let build = build_err(&cx.floc);
        self.bk.switch_to_block(rb).map_err(&build)?;
        let bloc = cx.block_loc(i);
        let mut m = self.entry_cots(i, ret_op, &bloc)?;
        let block = cx.shape.bb.blocks[i].id;
        self.cur = i;
        self.local.clear();
        self.memo.clear();
        self.numbered.clear();
        self.pop_flag(i)?;
        for save in self.plan.at_block_end(block).rev() {
            let x = self.bk.pop(save.ty.clone()).map_err(&build)?;
            self.local.insert(save.value, Operand::Value(x));
            self.popped_end[i].insert(save.value, Operand::Value(x));
        }
        // Statements in reverse order.
        let mut phi_insts = Vec::new();
        for &inst in cx.shape.bb.blocks[i].stmts.iter().rev() {
            self.bk.set_pos(cx.src.insts[inst].pos);
            let Some(st) = &self.stmts[inst] else {
                continue;
            };
            match st.how {
                How::Phi => phi_insts.push(inst),
                How::Primal => {}
                _ => self.statement(inst, st, &mut m)?,
            }
        }
        let phi_cots = self.phi_cots(&phi_insts, &mut m);
        self.exit(i, m, &phi_cots, &bloc)
    }

    /// The cotangents at the start of the reverse of block `i`: the seeds
    /// (after popping the values pushed once per call) for the return block,
    /// the join phis, or what the one reverse predecessor passed on.
    fn entry_cots(
        &mut self,
        i: usize,
        ret_op: Operand,
        bloc: &Location,
    ) -> Result<Cots, ReverseError> {
        let cx = self.cx;
        let build = build_err(&cx.floc);
        let mut m: Cots = BTreeMap::new();
        if i == cx.shape.ret {
            for save in self.plan.once().rev() {
                let x = self.bk.pop(save.ty.clone()).map_err(&build)?;
                self.avail.insert(save.value, Operand::Value(x));
            }
            if let Operand::Value(v) = ret_op {
                for k in 0..Type::cotangent_leaves(&cx.src.ret) {
                    let seed = self.bk.param(k).map_err(&build)?;
                    m.insert((v, k as u32), Operand::Value(seed));
                }
            }
        } else if !self.joins[i].is_empty() {
            for (key, phi) in &self.joins[i] {
                m.insert(*key, Operand::Value(*phi));
            }
        } else if let Some((cots, adds)) = self.incoming[i].take() {
            m = cots;
            for (key, c) in adds {
                accumulate(&mut self.bk, &mut m, key, c).map_err(|e| err(bloc, e))?;
            }
        }
        Ok(m)
    }

    /// The pullback of statement `inst` (neither a phi nor primal only):
    /// pops what the plan pushed right after it, takes its result's
    /// cotangent out of `m` and adds its arguments' cotangents in.
    fn statement(&mut self, inst: Inst, st: &Stmt, m: &mut Cots) -> Result<(), ReverseError> {
        let cx = self.cx;
        let data = &cx.src.insts[inst];
        let loc = cx.loc_of(inst);
        let build = build_err(&cx.floc);
        for save in self.plan.after_stmt(inst).rev() {
            let x = self.bk.pop(save.ty.clone()).map_err(&build)?;
            self.local.insert(save.value, Operand::Value(x));
        }
        if !cx.classes.writes(&cx.src, inst).is_empty() {
            // Its pullback restores arrays: reads from before it differ.
            self.numbered.retain(|(p, _), _| *p != Prim::Arrayref);
        }
        let res_ty = cx.result_type(inst);
        let dy: SmallVec<[Option<Operand>; 2]> = (0..Type::cotangent_leaves(&res_ty))
            .map(|k| data.result.and_then(|v| m.remove(&(v, k as u32))))
            .collect();
        let saved = self.saved(st, &loc)?;
        let args = args_of(&data.kind);
        let types: SmallVec<[Type; 3]> = args
            .iter()
            .map(|a| cx.optype(a, self.bk.module()))
            .collect::<Result<_, _>>()?;
        let cots = match &st.how {
            How::Rule(rule, fname) => {
                let callee = match (&data.kind, fname) {
                    (InstKind::Prim { prim, .. }, _) => Callee::Prim(*prim),
                    (_, Some(name)) => Callee::Func(name),
                    _ => return Err(internal(&loc, "a rule without callee")),
                };
                let call = Call {
                    args,
                    types: &types,
                    res_ty: &res_ty,
                    saved: &saved,
                    dy: &dy,
                };
                self.rule(&**rule, callee, &call, &loc)?
            }
            How::Invoke(gb) => self.invoke(*gb, &dy, &types, &loc)?,
            How::Dynamic => self.dynamic(&saved, &dy, &types, &loc)?,
            How::Phi | How::Primal => return Ok(()),
        };
        for (a, cs) in args.iter().zip(cots) {
            let Operand::Value(v) = a else { continue };
            if !cx.act.is_active(*v) {
                continue;
            }
            for (k, c) in cs.into_iter().enumerate() {
                if let Some(c) = c {
                    accumulate(&mut self.bk, m, (*v, k as u32), c).map_err(|e| err(&loc, e))?;
                }
            }
        }
        Ok(())
    }

    /// The saved operands of a statement, as the pullback reads them:
    /// popped, counted, recomputed, or constants.
    fn saved(&mut self, st: &Stmt, loc: &Location) -> Result<SmallVec<[Operand; 4]>, ReverseError> {
        st.saved.iter().map(|op| self.value(*op, loc)).collect()
    }

    /// Operand `op` of the forward sweep in the reverse of the current
    /// block, as the plan says: popped here or where the reverse of a loop
    /// around it starts, popped once per call, a counter, or recomputed
    /// (with what it needs recomputed first, without recursion: chains of
    /// recomputed values may be as long as the block).
    fn value(&mut self, op: Operand, loc: &Location) -> Result<Operand, ReverseError> {
        let Operand::Value(v) = op else {
            return Ok(op);
        };
        let v = self.plan.canonical(v);
        if let Some(x) = self.find(v) {
            return Ok(x);
        }
        let block = self.cx.shape.bb.blocks[self.cur].id;
        let plan = self.plan;
        let mut stack = vec![(v, false)];
        while let Some((v, ready)) = stack.pop() {
            let v = plan.canonical(v);
            if self.find(v).is_some() {
                continue;
            }
            let Some(r) = plan.recompute_at(block, v) else {
                return Err(internal(loc, "a saved value did not reach the pullback"));
            };
            if !ready {
                stack.push((v, true));
                for a in &r.args {
                    if let Operand::Value(u) = a
                        && self.find(*u).is_none()
                    {
                        stack.push((*u, false));
                    }
                }
                continue;
            }
            let mut ops: SmallVec<[Operand; 3]> = SmallVec::with_capacity(r.args.len());
            for a in &r.args {
                ops.push(match a {
                    Operand::Value(u) => self
                        .find(*u)
                        .ok_or_else(|| internal(loc, "a recomputation's operand"))?,
                    c => *c,
                });
            }
            let key = (r.prim, ops.iter().map(op_key).collect::<SmallVec<[_; 3]>>());
            let x = match self.numbered.get(&key) {
                Some(&x) => x,
                None => {
                    let x = emit_value(&mut self.bk, r.prim, &ops).map_err(|e| err(loc, e))?;
                    self.numbered.insert(key, x);
                    x
                }
            };
            self.memo.insert(v, x);
        }
        self.find(v)
            .ok_or_else(|| internal(loc, "a recomputed value"))
    }

    /// Value `v` of the forward sweep if the reverse of the current block
    /// has it without computing anything.
    fn find(&self, v: Value) -> Option<Operand> {
        let v = self.plan.canonical(v);
        let i = self.cur;
        if let Some(&x) = self.local.get(&v).or_else(|| self.memo.get(&v)) {
            return Some(x);
        }
        let loops = &self.cx.shape.loops;
        for &k in &loops.around[i] {
            if let (Some(c), Some((phi, body))) = (&self.plan.counted_slots()[k], self.counters[k])
                && c.iv == v
            {
                return if loops.loops[k].header == i {
                    Some(Operand::Value(phi))
                } else {
                    body
                };
            }
            if let Some(&x) = self.popped_end[loops.loops[k].exit].get(&v) {
                return Some(x);
            }
        }
        self.avail.get(&v).copied()
    }

    /// The pullback of an rrule, checked against the argument types.
    fn rule(
        &mut self,
        rule: &dyn Rrule,
        callee: Callee<'_>,
        call: &Call<'_>,
        loc: &Location,
    ) -> Result<ArgCots, ReverseError> {
        let inactive: SmallVec<[bool; 4]> = call
            .args
            .iter()
            .map(|a| !self.cx.act.wants_cotangent(a))
            .collect();
        let pcall = PullbackCall {
            callee,
            arg_types: call.types,
            arg_inactive: &inactive,
            result: call.res_ty,
            saved: call.saved,
            dy: call.dy,
        };
        let out = rule
            .pullback(&mut self.bk, &pcall)
            .map_err(|e| err(loc, format!("pullback of `{callee}`: {e}")))?;
        if out.cotangents.len() != call.args.len()
            || out
                .cotangents
                .iter()
                .zip(call.types)
                .any(|(c, t)| c.len() != Type::cotangent_leaves(t))
        {
            return Err(err(
                loc,
                format!("pullback of `{callee}`: cotangents do not match the argument types"),
            ));
        }
        Ok(out.cotangents)
    }

    /// `invoke @g.rev.back(dy...)`.
    fn invoke(
        &mut self,
        gb: FuncId,
        dy: &[Option<Operand>],
        types: &[Type],
        loc: &Location,
    ) -> Result<ArgCots, ReverseError> {
        let dys: SmallVec<[Operand; 4]> = dy.iter().map(|d| d.unwrap_or(f64c(0.0))).collect();
        let r = self.bk.invoke(gb, &dys).map_err(build_err(&self.cx.floc))?;
        unpack_cots(&mut self.bk, r, types, loc)
    }

    /// `call revback(%h)(dy...)` for the saved callee `%h` (the last saved
    /// operand).
    fn dynamic(
        &mut self,
        saved: &[Operand],
        dy: &[Option<Operand>],
        types: &[Type],
        loc: &Location,
    ) -> Result<ArgCots, ReverseError> {
        let fc = *saved
            .last()
            .ok_or_else(|| internal(loc, "no saved callee"))?;
        let g = emit_value(&mut self.bk, Prim::Revback, &[fc]).map_err(|e| err(loc, e))?;
        let Operand::Value(g) = g else {
            return Err(internal(loc, "revback gave a constant"));
        };
        let dys: SmallVec<[Operand; 4]> = dy.iter().map(|d| d.unwrap_or(f64c(0.0))).collect();
        let r = self
            .bk
            .call_value(g, &dys)
            .map_err(build_err(&self.cx.floc))?;
        unpack_cots(&mut self.bk, r, types, loc)
    }

    /// The cotangents of the phis of a block (taken out of `m`).
    fn phi_cots(&self, phi_insts: &[Inst], m: &mut Cots) -> Vec<(Inst, Vec<Option<Operand>>)> {
        let src = &self.cx.src;
        let mut phi_cots = Vec::new();
        for &inst in phi_insts {
            let Some(res) = src.insts[inst].result else {
                continue;
            };
            let cs = (0..Type::cotangent_leaves(&src.values[res].ty))
                .map(|k| m.remove(&(res, k as u32)))
                .collect();
            phi_cots.push((inst, cs));
        }
        phi_cots
    }

    /// The phi cotangents the edge from predecessor `p` carries: each goes
    /// to the phi's incoming value from `p`.
    fn edge_adds(
        &self,
        p: usize,
        phi_cots: &[(Inst, Vec<Option<Operand>>)],
    ) -> Vec<(Key, Operand)> {
        let cx = self.cx;
        let pid = cx.shape.bb.blocks[p].id;
        let mut adds = Vec::new();
        for (inst, cs) in phi_cots {
            let InstKind::Phi { entries } = &cx.src.insts[*inst].kind else {
                continue;
            };
            for (b, op) in entries {
                if *b != pid {
                    continue;
                }
                if let Operand::Value(v) = op
                    && has_cotangent(&cx.src, *v)
                    && cx.act.is_active(*v)
                {
                    for (k, c) in cs.iter().enumerate() {
                        if let Some(c) = c {
                            adds.push(((*v, k as u32), *c));
                        }
                    }
                }
            }
        }
        adds
    }

    /// Leaves the reverse of block `i`: the entry's returns the parameters'
    /// cotangents; one reverse successor gets the cotangents passed on (or
    /// its join phis' entries); several: pop the predecessor index and
    /// `switch`.
    fn exit(
        &mut self,
        i: usize,
        mut m: Cots,
        phi_cots: &[(Inst, Vec<Option<Operand>>)],
        bloc: &Location,
    ) -> Result<(), ReverseError> {
        let cx = self.cx;
        let build = build_err(&cx.floc);
        let rp: Vec<usize> = self.rev_succs[i].to_vec();
        if i == 0 {
            let mut leaves = Vec::new();
            for &p in &cx.src.params {
                for k in 0..Type::cotangent_leaves(&cx.src.values[p].ty) {
                    leaves.push(m.get(&(p, k as u32)).copied().unwrap_or(f64c(0.0)));
                }
            }
            let ret = match leaves.len() {
                0 => Operand::Const(Const::Unit),
                1 => leaves[0],
                _ => emit_value(&mut self.bk, Prim::Tuple, &leaves).map_err(|e| err(bloc, e))?,
            };
            self.bk.ret(ret).map_err(&build)?;
        } else if let [p] = rp.as_slice() {
            let p = *p;
            let target = self.rblock[p].ok_or_else(|| internal(bloc, "reverse target"))?;
            self.replay_entries(i, p, bloc)?;
            self.counter_entries(i, p, bloc)?;
            let adds = self.edge_adds(p, phi_cots);
            if self.joins[p].is_empty() {
                self.incoming[p] = Some((m, adds));
            } else {
                for (key, c) in adds {
                    accumulate(&mut self.bk, &mut m, key, c).map_err(|e| err(bloc, e))?;
                }
                let from = self
                    .bk
                    .current_block()
                    .ok_or_else(|| internal(bloc, "no block"))?;
                for (key, phi) in &self.joins[p] {
                    let c = m.get(key).copied().unwrap_or(f64c(0.0));
                    self.bk.add_phi_entry(*phi, from, c).map_err(&build)?;
                }
            }
            self.bk.goto(target).map_err(&build)?;
        } else {
            let id = match self.counted_here(i) {
                Some(k) => self.count_back(k, bloc)?,
                None => self.pop_index(i, bloc)?,
            };
            let mut targets = Vec::with_capacity(cx.shape.preds[i].len());
            for &p in &cx.shape.preds[i] {
                targets.push(self.rblock[p].ok_or_else(|| internal(bloc, "reverse target"))?);
                if !self.joins[p].is_empty() {
                    return Err(cx.need_normal("no critical edges"));
                }
                self.incoming[p] = Some((m.clone(), self.edge_adds(p, phi_cots)));
            }
            let step = self.stretch_target(i, &mut targets);
            self.bk.switch(id, &targets).map_err(&build)?;
            if let Some((k, step)) = step {
                self.stretch_step(k, step, &targets, bloc)?;
            }
        }
        Ok(())
    }

    /// Pops the index of the predecessor of block `i` the forward run came
    /// from: a bool between two predecessors, an i64 otherwise.
    fn pop_index(&mut self, i: usize, bloc: &Location) -> Result<Operand, ReverseError> {
        let build = build_err(&self.cx.floc);
        if self.cx.shape.preds[i].len() == 2 {
            let b = self.bk.pop(Type::Bool).map_err(&build)?;
            emit_value(
                &mut self.bk,
                Prim::Select,
                &[Operand::Value(b), Operand::from(1i64), Operand::from(0i64)],
            )
            .map_err(|e| err(bloc, e))
        } else {
            Ok(Operand::Value(self.bk.pop(Type::I64).map_err(&build)?))
        }
    }

    /// The counted loop headed by position `i`, if any.
    fn counted_here(&self, i: usize) -> Option<usize> {
        // A header heads one loop: looked up, not searched for among all
        // (quadratic in the loops of a function).
        let k = (*self.cx.shape.loops.headed.get(i)?)?;
        self.counters[k].is_some().then_some(k)
    }

    /// In the reverse of counted loop `k`'s header: the index of the
    /// predecessor the forward run came from (the one outside while the
    /// counter is not yet back at its start... the latch otherwise), and the
    /// counter's value for the reverse of the body it leads to.
    fn count_back(&mut self, k: usize, bloc: &Location) -> Result<Operand, ReverseError> {
        let cx = self.cx;
        let (Some(c), Some((phi, _))) = (self.plan.counted_slots()[k].clone(), self.counters[k])
        else {
            return Err(internal(bloc, "a counted loop without counter"));
        };
        let Some(info) = cx.shape.loops.loops[k].counted.as_ref() else {
            return Err(internal(bloc, "a counted loop without counter"));
        };
        let h = cx.shape.loops.loops[k].header;
        let pos = |b: usize| cx.shape.preds[h].iter().position(|&p| p == b).unwrap_or(0) as i64;
        let (pre, latch) = (pos(info.pre), pos(info.latch));
        // A checkpointed loop's reverse leaves at each stretch's start.
        let init = match self.starts[k] {
            Some((start, _)) => Operand::Value(start),
            None => self.value(c.init, bloc)?,
        };
        let e = |r: Result<Operand, String>| r.map_err(|e| err(bloc, e));
        let body = e(emit_value(
            &mut self.bk,
            Prim::Isub,
            &[Operand::Value(phi), Operand::from(c.step)],
        ))?;
        self.counters[k] = Some((phi, Some(body)));
        let first = e(emit_value(
            &mut self.bk,
            Prim::Eq,
            &[Operand::Value(phi), init],
        ))?;
        e(emit_value(
            &mut self.bk,
            Prim::Select,
            &[first, Operand::from(pre), Operand::from(latch)],
        ))
    }

    /// The entry of the counter phi of the reverse of block `p` on the edge
    /// from the reverse of block `i`, when `p` heads a counted loop: the
    /// counter's last value from the loop's exit, its body value from inside.
    fn counter_entries(&mut self, i: usize, p: usize, bloc: &Location) -> Result<(), ReverseError> {
        let Some(k) = self.counted_here(p) else {
            return Ok(());
        };
        let Some((phi, body)) = self.counters[k] else {
            return Ok(());
        };
        let l = &self.cx.shape.loops.loops[k];
        let x = if l.contains(i) {
            body.ok_or_else(|| internal(bloc, "a loop's body reversed before its header"))?
        } else {
            let Some(c) = self.plan.counted_slots()[k].clone() else {
                return Ok(());
            };
            self.value(Operand::Value(c.iv), bloc)?
        };
        let from = self
            .bk
            .current_block()
            .ok_or_else(|| internal(bloc, "no block"))?;
        self.bk
            .add_phi_entry(phi, from, x)
            .map_err(build_err(&self.cx.floc))?;
        Ok(())
    }
}

/// The key of an operand in [`Pullback::numbered`].
fn op_key(op: &Operand) -> OpKey {
    match op {
        Operand::Value(v) => OpKey::Value(*v),
        Operand::Const(Const::F64(x)) => OpKey::F64(x.to_bits()),
        Operand::Const(Const::I64(i)) => OpKey::I64(*i),
        Operand::Const(Const::Bool(b)) => OpKey::Bool(*b),
        Operand::Const(Const::Unit) => OpKey::Unit,
        Operand::Const(Const::Func(f)) => OpKey::Func(*f),
    }
}

/// A statement's call of a pullback: its arguments and their types, its
/// result type, what it saved and its result's cotangents.
struct Call<'c> {
    args: &'c [Operand],
    types: &'c [Type],
    res_ty: &'c Type,
    saved: &'c [Operand],
    dy: &'c [Option<Operand>],
}

/// The per-argument cotangents in the leaf pack a pullback piece returns
/// (the call at `loc`).
fn unpack_cots(
    b: &mut FuncBuilder<'_>,
    r: Option<Value>,
    types: &[Type],
    loc: &Location,
) -> Result<ArgCots, ReverseError> {
    let total: usize = types.iter().map(Type::cotangent_leaves).sum();
    let mut leaves: SmallVec<[Option<Operand>; 4]> = SmallVec::with_capacity(total);
    match (total, r) {
        (0, _) => {}
        (1, Some(v)) => leaves.push(Some(Operand::Value(v))),
        (_, Some(v)) => {
            for j in 0..total {
                leaves.push(Some(
                    emit_value(
                        b,
                        Prim::Getfield,
                        &[Operand::Value(v), Operand::from(j as i64)],
                    )
                    .map_err(|e| err(loc, e))?,
                ));
            }
        }
        (_, None) => return Err(internal(loc, "a pullback without result")),
    }
    let mut out = ArgCots::with_capacity(types.len());
    let mut it = leaves.into_iter();
    for t in types {
        out.push(
            (0..Type::cotangent_leaves(t))
                .map(|_| it.next().flatten())
                .collect(),
        );
    }
    Ok(out)
}
