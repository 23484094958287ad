//! The reverse transform of one function body: from its BBCode, the forward
//! sweep `@f.rev.fwd` and the pullback `@f.rev.back` (docs/reverse.md).
//!
//! Forward sweep: the primal's blocks, labels and layout; each statement
//! replaced by its rule's forward part (primal work, shadows, values to save);
//! at the end of each block, the saved values that block's pullback reads are
//! pushed on the tapes, then, when its one successor has several
//! predecessors, the index of this block among them. Values defined once per
//! call in a block that dominates the return block (parameters included) are
//! pushed once, at the end of the return block, and popped once when the
//! pullback starts. It returns the primal result (with the result's shadows).
//!
//! Pullback: one reverse block per primal block that can reach the return
//! block, entered from the reverse of its successors. It pops what its primal
//! block pushed, runs the pullbacks of the statements in reverse order, then
//! leaves to the reverse of its one predecessor, or pops the recorded
//! predecessor index and `switch`es on it. Cotangents are SSA values: a map
//! from (primal value, f64 leaf) to the current cotangent, passed along
//! reverse edges; where the reverse flow joins (the reverse of a block with
//! several successors) each cotangent live there gets a phi. A phi's
//! cotangent goes to the incoming value of the edge taken only.
//!
//! Assumes a verified, normalised primal (single return block, no critical
//! edges, entry without predecessors), which [`derive`] checks.

use super::analysis::{has_cotangent, idoms, live_out, on_cycle, reaches, rpo};
use super::bbcode::{BBCode, BTerm};
use super::{Reverse, ReverseError};
use crate::activity::Activity;
use crate::forward::transform::stmt_loc;
use irad_ir::{
    Block, Const, Func, FuncBuilder, FuncId, FuncRef, Inst, InstKind, Location, Module, Operand,
    Prim, Type, Value, ValueDef,
};
use irad_rules::emit::f64c;
use irad_rules::{Callee, PullbackCall, RevArg, RevCall, RevFwdOut, Rrule};
use smallvec::SmallVec;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

type Key = (Value, u32);
type Cots = BTreeMap<Key, Operand>;

/// How a statement is differentiated.
enum How {
    /// A registered rrule (primitive or marked function).
    Rule(Arc<dyn Rrule>, Option<String>),
    /// `invoke` of the derived rule pieces of a user function.
    Invoke(FuncId),
    /// A call through a function value: `revback` of the saved callee.
    Dynamic,
    /// A phi: handled at the edges.
    Phi,
    /// No derivative work (activity analysis): the primal statement alone.
    Primal,
}

/// The state of one statement between the sweeps.
struct Stmt {
    how: How,
    saved: SmallVec<[Operand; 4]>,
}

fn err(loc: &Location, msg: impl Into<String>) -> ReverseError {
    ReverseError::new(loc.clone(), msg)
}

/// Refuses what reverse mode cannot take: dual values and AD primitives.
pub(super) fn check_supported(func: &Func, loc: &Location) -> Result<(), ReverseError> {
    let dual = |t: &Type| {
        let mut stack = vec![t];
        while let Some(t) = stack.pop() {
            match t {
                Type::Dual(..) => return true,
                Type::Tuple(e) => stack.extend(e.iter()),
                Type::Func(f) => {
                    stack.extend(f.params.iter());
                    stack.push(&f.ret);
                }
                _ => {}
            }
        }
        false
    };
    if dual(&func.ret) || func.values.values().any(|v| dual(&v.ty)) {
        return Err(err(
            loc,
            format!(
                "reverse mode of @{} is not supported: it works on dual values",
                func.name
            ),
        ));
    }
    for data in func.insts.values() {
        if let InstKind::Prim { prim, .. } = data.kind
            && irad_rules::is_ad_prim(prim)
        {
            return Err(err(
                loc,
                format!(
                    "reverse mode of @{} is not supported: it calls the AD primitive `{prim}`",
                    func.name
                ),
            ));
        }
    }
    Ok(())
}

/// The argument operands of a statement.
fn args_of(kind: &InstKind) -> &[Operand] {
    match kind {
        InstKind::Prim { args, .. }
        | InstKind::Invoke { args, .. }
        | InstKind::CallValue { args, .. } => args,
        InstKind::Phi { .. } => &[],
    }
}

/// Derives the bodies of `fwd_id` and `back_id` (declared with the right
/// types) from the primal `primal`, with the parameters of `mask` active
/// (`None`: all).
pub(super) fn derive(
    rev: &mut Reverse<'_>,
    module: &mut Module,
    primal: FuncId,
    fwd_id: FuncId,
    back_id: FuncId,
    mask: Option<&[bool]>,
) -> Result<(), ReverseError> {
    let src = module
        .get(primal)
        .ok_or_else(|| ReverseError::new(Location::default(), "invalid function handle"))?
        .clone();
    let floc = Location {
        func: Some(src.name.clone()),
        pos: src.pos,
        ..Location::default()
    };
    check_supported(&src, &floc)?;
    let bb = BBCode::from_func(&src).map_err(|e| err(&floc, format!("internal error: {e}")))?;
    let n = bb.blocks.len();
    let preds = bb.preds();
    let succs = bb.succs();
    let rets: Vec<usize> = (0..n)
        .filter(|&i| matches!(bb.blocks[i].term, BTerm::Return(_)))
        .collect();
    let need_normal = |what: &str| {
        err(
            &floc,
            format!(
                "internal error: reverse mode needs a normalised function ({what}); run the normalisation passes first"
            ),
        )
    };
    let r = match rets.as_slice() {
        [r] => *r,
        [] => {
            return Err(err(
                &floc,
                format!(
                    "reverse mode of @{} is not possible: it never returns",
                    src.name
                ),
            ));
        }
        _ => return Err(need_normal("one return block")),
    };
    if n == 0 || !preds[0].is_empty() {
        return Err(need_normal("an entry block without predecessors"));
    }
    for ps in &preds {
        if ps.len() > 1 && ps.iter().any(|&p| succs[p].len() > 1) {
            return Err(need_normal("no critical edges"));
        }
    }
    let to_r = reaches(&preds, r);
    let order = rpo(&succs, 0);
    let idom = idoms(&preds, &order);
    let cyc = on_cycle(&succs);
    // Blocks that run at most once per call and dominate the return block.
    let mut once = vec![false; n];
    let mut d = Some(r);
    while let Some(b) = d {
        if !cyc[b] {
            once[b] = true;
        }
        d = idom[b];
    }
    if !cyc[0] {
        once[0] = true;
    }
    let act = if rev.activity() {
        Activity::of(&src, mask.unwrap_or(&[]))
    } else {
        Activity::all(&src)
    };
    let mut live = live_out(&bb, &succs);
    // Inactive values never get a cotangent: no join phis for them.
    for set in &mut live {
        set.retain(|v| act.is_active(*v));
    }
    let places = src.inst_places();
    let registry = rev.registry();

    // The rule pieces of every user function invoked, before the builder
    // borrows the module.
    let mut callees: HashMap<FuncId, (FuncId, FuncId)> = HashMap::new();
    for b in &bb.blocks {
        for &inst in &b.stmts {
            if act.primal_only(&src, inst) {
                continue;
            }
            if let InstKind::Invoke { func, .. } = &src.insts[inst].kind {
                let name = module
                    .get(*func)
                    .map(|f| f.name.clone())
                    .unwrap_or_default();
                if registry.function_rrule(&name).is_none() && !callees.contains_key(func) {
                    let pieces = rev.request(module, FuncRef::User(*func))?;
                    callees.insert(*func, pieces);
                }
            }
        }
    }
    let loc_of = |inst: Inst| match *places.get(inst) {
        Some((blk, stmt)) => stmt_loc(&src, blk, stmt, inst, &floc),
        None => floc.clone(),
    };
    let optype = |op: &Operand, m: &Module| -> Result<Type, ReverseError> {
        src.operand_type(op, m)
            .ok_or_else(|| err(&floc, "internal error: an operand without a type"))
    };

    // ---------------- forward sweep ----------------
    let mut fb = FuncBuilder::new(module, fwd_id).map_err(|e| err(&floc, e.to_string()))?;
    let build = |e: irad_ir::BuildError| err(&floc, format!("internal error: {e}"));
    let mut fval: HashMap<Value, Operand> = HashMap::new();
    let mut fshadow: Shadows = HashMap::new();
    let nparams = src.params.len();
    let mut next_shadow = nparams;
    for (i, &p) in src.params.iter().enumerate() {
        fval.insert(p, Operand::Value(fb.param(i).map_err(build)?));
        let k = Type::shadow_leaves(&src.values[p].ty);
        let mut sh = SmallVec::new();
        for _ in 0..k {
            sh.push(Operand::Value(fb.param(next_shadow).map_err(build)?));
            next_shadow += 1;
        }
        fshadow.insert(p, sh);
    }
    let fblock: Vec<Block> = bb
        .blocks
        .iter()
        .map(|b| fb.create_block_labeled(src.blocks[b.id].label))
        .collect::<Result<_, _>>()
        .map_err(build)?;
    let reachable: HashSet<usize> = order.iter().copied().collect();
    // Phis (and the phis of their shadows) first, entries at the end.
    let mut shadow_phis: HashMap<Value, SmallVec<[Value; 1]>> = HashMap::new();
    for &i in &order {
        for &inst in &bb.blocks[i].stmts {
            let data = &src.insts[inst];
            if let (InstKind::Phi { .. }, Some(res)) = (&data.kind, data.result) {
                let ty = src.values[res].ty.clone();
                let v = fb.insert_phi(fblock[i], ty.clone()).map_err(build)?;
                fval.insert(res, Operand::Value(v));
                let mut sh = SmallVec::new();
                let mut shv = SmallVec::new();
                for _ in 0..Type::shadow_leaves(&ty) {
                    let s = fb
                        .insert_phi(fblock[i], Type::Array(irad_ir::Scalar::F64))
                        .map_err(build)?;
                    sh.push(Operand::Value(s));
                    shv.push(s);
                }
                fshadow.insert(res, sh);
                shadow_phis.insert(res, shv);
            }
        }
    }
    let mut stmts: HashMap<Inst, Stmt> = HashMap::new();
    let mut fend: HashMap<Inst, usize> = HashMap::new();
    for &i in &order {
        fb.switch_to_block(fblock[i]).map_err(build)?;
        for &inst in &bb.blocks[i].stmts {
            let data = &src.insts[inst];
            let loc = loc_of(inst);
            fb.set_pos(data.pos);
            let res_ty = data
                .result
                .map(|r| src.values[r].ty.clone())
                .unwrap_or(Type::Unit);
            let (how, out) = match &data.kind {
                // No derivative work: the primal statement alone.
                kind @ (InstKind::Prim { .. }
                | InstKind::Invoke { .. }
                | InstKind::CallValue { .. })
                    if act.primal_only(&src, inst) =>
                {
                    let r = primal_stmt(&mut fb, kind, &fval, &loc)?;
                    let out = RevFwdOut {
                        primal: r,
                        shadows: SmallVec::new(),
                        saved: SmallVec::new(),
                    };
                    (How::Primal, out)
                }
                InstKind::Phi { .. } => {
                    stmts.insert(
                        inst,
                        Stmt {
                            how: How::Phi,
                            saved: SmallVec::new(),
                        },
                    );
                    continue;
                }
                InstKind::Prim { prim, args } => {
                    let types: Vec<Type> = args
                        .iter()
                        .map(|a| optype(a, fb.module()))
                        .collect::<Result<_, _>>()?;
                    let rule = registry
                        .rrule(*prim, &types)
                        .ok_or_else(|| err(&loc, format!("no reverse rule for `{prim}`")))?;
                    let out = forward_part(
                        &mut fb,
                        &*rule,
                        Callee::Prim(*prim),
                        args,
                        &types,
                        &res_ty,
                        (&fval, &fshadow, &act),
                        &loc,
                    )?;
                    (How::Rule(rule, None), out)
                }
                InstKind::Invoke { func, args } => {
                    let name = fb
                        .module()
                        .get(*func)
                        .map(|f| f.name.clone())
                        .unwrap_or_default();
                    let types: Vec<Type> = args
                        .iter()
                        .map(|a| optype(a, fb.module()))
                        .collect::<Result<_, _>>()?;
                    if let Some(rule) = registry.function_rrule(&name) {
                        let out = forward_part(
                            &mut fb,
                            &*rule,
                            Callee::Func(&name),
                            args,
                            &types,
                            &res_ty,
                            (&fval, &fshadow, &act),
                            &loc,
                        )?;
                        (How::Rule(rule, Some(name)), out)
                    } else {
                        let &(gf, gb) = callees
                            .get(func)
                            .ok_or_else(|| err(&loc, "internal error: a callee without rule"))?;
                        let mut ops: Vec<Operand> = Vec::new();
                        for a in args.iter() {
                            ops.push(map_op(&fval, a, &loc)?);
                        }
                        for a in args.iter() {
                            ops.extend(shadows_of(&fshadow, a));
                        }
                        let r = fb.invoke(gf, &ops).map_err(build)?;
                        let out = split_result(&mut fb, r, &res_ty).map_err(build)?;
                        (How::Invoke(gb), out)
                    }
                }
                InstKind::CallValue { callee, args } => {
                    let fc = map_op(&fval, &Operand::Value(*callee), &loc)?;
                    let mut ops: Vec<Operand> = Vec::new();
                    for a in args.iter() {
                        ops.push(map_op(&fval, a, &loc)?);
                    }
                    for a in args.iter() {
                        ops.extend(shadows_of(&fshadow, a));
                    }
                    let g = emit_value(&mut fb, Prim::Revfwd, &[fc]).map_err(|e| err(&loc, e))?;
                    let Operand::Value(g) = g else {
                        return Err(err(&loc, "internal error: revfwd gave a constant"));
                    };
                    let r = fb.call_value(g, &ops).map_err(build)?;
                    let mut out = split_result(&mut fb, r, &res_ty).map_err(build)?;
                    out.saved.push(fc);
                    (How::Dynamic, out)
                }
            };
            if let Some(res) = data.result {
                fval.insert(res, out.primal);
                fshadow.insert(res, out.shadows.clone());
            }
            // Where this statement's forward part ends in its block, if the
            // part stayed in the block (pushes may be moved there).
            if fb.current_block() == Some(fblock[i]) {
                fend.insert(inst, fb.func().blocks[fblock[i]].insts.len());
            }
            stmts.insert(
                inst,
                Stmt {
                    how,
                    saved: out.saved,
                },
            );
        }
    }

    // Which block of the forward sweep defines each of its values.
    let fdef = {
        let f = fb.func();
        let places = f.inst_places();
        let mut blockpos: HashMap<Block, usize> = HashMap::new();
        for (i, &b) in fblock.iter().enumerate() {
            blockpos.insert(b, i);
        }
        move |v: Value| -> Option<usize> {
            match f.values.get(v).map(|d| d.def) {
                Some(ValueDef::Param(_)) => None,
                Some(ValueDef::Inst(inst)) => {
                    (*places.get(inst)).and_then(|(b, _)| blockpos.get(&b).copied())
                }
                None => None,
            }
        }
    };
    // Saved values read only by statements of the block that defines them
    // are pushed right after the last of those statements and popped right
    // before its pullback: short live ranges on both sides, so a long block
    // does not keep every saved value alive to its end (code generation's
    // register allocation would pay for that).
    let mut readers: HashMap<Value, (bool, Inst)> = HashMap::new();
    let kept = |i: &usize| reachable.contains(i) && to_r[*i];
    for i in (0..n).filter(kept) {
        for &inst in &bb.blocks[i].stmts {
            let Some(st) = stmts.get(&inst) else { continue };
            for op in &st.saved {
                let Operand::Value(v) = op else { continue };
                let here = fdef(*v) == Some(i) && fend.contains_key(&inst);
                readers
                    .entry(*v)
                    .and_modify(|(ok, last)| {
                        *ok &= here;
                        *last = inst;
                    })
                    .or_insert((here, inst));
            }
        }
    }
    let mut moved: HashMap<Inst, Vec<Value>> = HashMap::new();
    let mut is_moved: HashSet<Value> = HashSet::new();
    for i in (0..n).filter(kept) {
        for &inst in &bb.blocks[i].stmts {
            let Some(st) = stmts.get(&inst) else { continue };
            for op in &st.saved {
                let Operand::Value(v) = op else { continue };
                if let Some(&(true, last)) = readers.get(v)
                    && is_moved.insert(*v)
                {
                    moved.entry(last).or_default().push(*v);
                }
            }
        }
    }
    // The other saved values per block: global (pushed once at the return)
    // or local (pushed at the block's end).
    let mut is_global: HashMap<Value, bool> = HashMap::new();
    let mut locals: Vec<Vec<Value>> = vec![Vec::new(); n];
    let mut globals: Vec<Value> = Vec::new();
    let mut seen_global: HashSet<Value> = HashSet::new();
    for i in 0..n {
        if !reachable.contains(&i) || !to_r[i] {
            continue;
        }
        let mut seen = HashSet::new();
        for &inst in &bb.blocks[i].stmts {
            let Some(st) = stmts.get(&inst) else { continue };
            for op in &st.saved {
                let Operand::Value(v) = op else { continue };
                if is_moved.contains(v) {
                    continue;
                }
                let g = *is_global
                    .entry(*v)
                    .or_insert_with(|| fdef(*v).is_none_or(|d| once[d]));
                if g {
                    if seen_global.insert(*v) {
                        globals.push(*v);
                    }
                } else if seen.insert(*v) {
                    locals[i].push(*v);
                }
            }
        }
    }
    drop(fdef);
    let mut ftypes: HashMap<Value, Type> = HashMap::new();
    for &v in locals.iter().flatten().chain(&globals).chain(&is_moved) {
        ftypes.insert(v, fb.func().values[v].ty.clone());
    }
    // Block ends: pushes, then the terminator. The pushes of moved values
    // come first and are moved into place below.
    let mut placed: Vec<(Block, Vec<(usize, Inst)>)> = Vec::new();
    for &i in &order {
        fb.switch_to_block(fblock[i]).map_err(build)?;
        let mut here = Vec::new();
        for &inst in &bb.blocks[i].stmts {
            for &v in moved.get(&inst).map_or(&[][..], Vec::as_slice) {
                fb.set_pos(src.insts[inst].pos);
                fb.prim(Prim::Push, &[Operand::Value(v)]).map_err(build)?;
                let pushed = fb.func().blocks[fblock[i]].insts.last().copied();
                let at = fend.get(&inst).copied();
                if let (Some(p), Some(at)) = (pushed, at) {
                    here.push((at, p));
                }
            }
        }
        if !here.is_empty() {
            placed.push((fblock[i], here));
        }
        let term_pos = src.blocks[bb.blocks[i].id].term_pos;
        fb.set_pos(term_pos);
        for &v in &locals[i] {
            fb.prim(Prim::Push, &[Operand::Value(v)]).map_err(build)?;
        }
        if i == r {
            for &v in &globals {
                fb.prim(Prim::Push, &[Operand::Value(v)]).map_err(build)?;
            }
        }
        if let [s] = succs[i].as_slice()
            && preds[*s].len() > 1
            && to_r[*s]
        {
            let j = preds[*s].iter().position(|&p| p == i).unwrap_or(0);
            fb.prim(Prim::Push, &[Operand::from(j as i64)])
                .map_err(build)?;
        }
        let tloc = Location {
            block: Some(src.blocks[bb.blocks[i].id].label),
            ..floc.clone()
        };
        match &bb.blocks[i].term {
            BTerm::Goto(t) => {
                fb.goto(fblock[bb.index()[t]]).map_err(build)?;
            }
            BTerm::Br { cond, else_, .. } => {
                let c = map_op(&fval, cond, &tloc)?;
                fb.gotoifnot(c, fblock[bb.index()[else_]]).map_err(build)?;
            }
            BTerm::Switch { index, targets } => {
                let c = map_op(&fval, index, &tloc)?;
                let idx = bb.index();
                let ts: Vec<Block> = targets.iter().map(|t| fblock[idx[t]]).collect();
                fb.switch(c, &ts).map_err(build)?;
            }
            BTerm::Return(op) => {
                let v = map_op(&fval, op, &tloc)?;
                let sh = shadows_of(&fshadow, op);
                let ret = if Type::shadow_leaves(&src.ret) > 0 {
                    let mut parts = vec![v];
                    parts.extend(sh);
                    emit_value(&mut fb, Prim::Tuple, &parts).map_err(|e| err(&tloc, e))?
                } else {
                    v
                };
                fb.ret(ret).map_err(build)?;
            }
        }
    }
    // Phi entries.
    for &i in &order {
        for &inst in &bb.blocks[i].stmts {
            let data = &src.insts[inst];
            let (InstKind::Phi { entries }, Some(res)) = (&data.kind, data.result) else {
                continue;
            };
            let Some(Operand::Value(phi)) = fval.get(&res).copied() else {
                continue;
            };
            let loc = loc_of(inst);
            let idx = bb.index();
            for (p, op) in entries {
                let Some(&pi) = idx.get(p) else { continue };
                if !reachable.contains(&pi) {
                    continue;
                }
                let mapped = map_op(&fval, op, &loc)?;
                fb.add_phi_entry(phi, fblock[pi], mapped).map_err(build)?;
                let shs = shadows_of(&fshadow, op);
                let phis = shadow_phis.get(&res).cloned().unwrap_or_default();
                if shs.len() != phis.len() {
                    return Err(err(&loc, "internal error: shadows of a phi entry"));
                }
                for (s, ph) in shs.iter().zip(phis) {
                    fb.add_phi_entry(ph, fblock[pi], *s).map_err(build)?;
                }
            }
        }
    }
    drop(fb);
    // Each moved push goes right after the forward part of its statement.
    if let Some(f) = module.get_mut(fwd_id) {
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

    // ---------------- pullback ----------------
    let mut bk = FuncBuilder::new(module, back_id).map_err(|e| err(&floc, e.to_string()))?;
    let build = |e: irad_ir::BuildError| err(&floc, format!("internal error: {e}"));
    // Reverse blocks: the return block's first (the entry), then the others.
    let mut rblock: Vec<Option<Block>> = vec![None; n];
    rblock[r] = Some(bk.create_block());
    for i in (0..n).rev() {
        if i != r && to_r[i] && reachable.contains(&i) {
            rblock[i] = Some(bk.create_block());
        }
    }
    let rev_succs: Vec<SmallVec<[usize; 2]>> = (0..n)
        .map(|i| {
            if rblock[i].is_some() {
                preds[i]
                    .iter()
                    .copied()
                    .filter(|&p| rblock[p].is_some())
                    .collect()
            } else {
                SmallVec::new()
            }
        })
        .collect();
    let rorder = rpo(&rev_succs, r);
    // Cotangent phis where the reverse flow joins.
    let mut joins: Vec<BTreeMap<Key, Value>> = vec![BTreeMap::new(); n];
    for i in 0..n {
        let Some(rb) = rblock[i] else { continue };
        let into = succs[i].iter().filter(|&&s| rblock[s].is_some()).count();
        if into < 2 {
            continue;
        }
        for &v in &live[i] {
            for k in 0..Type::cotangent_leaves(&src.values[v].ty) {
                let phi = bk.insert_phi(rb, Type::F64).map_err(build)?;
                joins[i].insert((v, k as u32), phi);
            }
        }
    }
    let mut incoming: Vec<Incoming> = vec![None; n];
    let mut avail: HashMap<Value, Operand> = HashMap::new();
    let ret_op = match &bb.blocks[r].term {
        BTerm::Return(op) => *op,
        _ => return Err(err(&floc, "internal error: the return block")),
    };
    for &i in &rorder {
        let Some(rb) = rblock[i] else { continue };
        bk.switch_to_block(rb).map_err(build)?;
        let blabel = src.blocks[bb.blocks[i].id].label;
        let bloc = Location {
            block: Some(blabel),
            ..floc.clone()
        };
        let mut m: Cots = BTreeMap::new();
        if i == r {
            for &v in globals.iter().rev() {
                let ty = ftypes[&v].clone();
                let x = bk.pop(ty).map_err(build)?;
                avail.insert(v, Operand::Value(x));
            }
            if let Operand::Value(v) = ret_op {
                for k in 0..Type::cotangent_leaves(&src.ret) {
                    let seed = bk.param(k).map_err(build)?;
                    m.insert((v, k as u32), Operand::Value(seed));
                }
            }
        } else if !joins[i].is_empty() {
            for (key, phi) in &joins[i] {
                m.insert(*key, Operand::Value(*phi));
            }
        } else if let Some((cots, adds)) = incoming[i].take() {
            m = cots;
            for (key, c) in adds {
                accumulate(&mut bk, &mut m, key, c).map_err(|e| err(&bloc, e))?;
            }
        }
        let mut local: HashMap<Value, Operand> = HashMap::new();
        for &v in locals[i].iter().rev() {
            let ty = ftypes[&v].clone();
            let x = bk.pop(ty).map_err(build)?;
            local.insert(v, Operand::Value(x));
        }
        // Statements in reverse order.
        let mut phi_insts = Vec::new();
        for &inst in bb.blocks[i].stmts.iter().rev() {
            let data = &src.insts[inst];
            let loc = loc_of(inst);
            bk.set_pos(data.pos);
            let Some(st) = stmts.get(&inst) else { continue };
            if let How::Phi = st.how {
                phi_insts.push(inst);
                continue;
            }
            if let How::Primal = st.how {
                continue;
            }
            for &v in moved.get(&inst).map_or(&[][..], Vec::as_slice).iter().rev() {
                let x = bk.pop(ftypes[&v].clone()).map_err(build)?;
                local.insert(v, Operand::Value(x));
            }
            let res_ty = data
                .result
                .map(|v| src.values[v].ty.clone())
                .unwrap_or(Type::Unit);
            let dy: Vec<Option<Operand>> = (0..Type::cotangent_leaves(&res_ty))
                .map(|k| data.result.and_then(|v| m.remove(&(v, k as u32))))
                .collect();
            let saved: Vec<Operand> =
                st.saved
                    .iter()
                    .map(|op| match op {
                        Operand::Const(c) => Ok(Operand::Const(*c)),
                        Operand::Value(v) => local
                            .get(v)
                            .or_else(|| avail.get(v))
                            .copied()
                            .ok_or_else(|| {
                                err(
                                    &loc,
                                    "internal error: a saved value did not reach the pullback",
                                )
                            }),
                    })
                    .collect::<Result<_, _>>()?;
            let args = args_of(&data.kind);
            let types: Vec<Type> = args
                .iter()
                .map(|a| optype(a, bk.module()))
                .collect::<Result<_, _>>()?;
            let cots: Vec<SmallVec<[Option<Operand>; 1]>> = match &st.how {
                How::Rule(rule, fname) => {
                    let callee = match (&data.kind, fname) {
                        (InstKind::Prim { prim, .. }, _) => Callee::Prim(*prim),
                        (_, Some(name)) => Callee::Func(name),
                        _ => return Err(err(&loc, "internal error: a rule without callee")),
                    };
                    let inactive: Vec<bool> =
                        args.iter().map(|a| !act.wants_cotangent(a)).collect();
                    let call = PullbackCall {
                        callee,
                        arg_types: &types,
                        arg_inactive: &inactive,
                        result: &res_ty,
                        saved: &saved,
                        dy: &dy,
                    };
                    let out = rule
                        .pullback(&mut bk, &call)
                        .map_err(|e| err(&loc, format!("pullback of `{callee}`: {e}")))?;
                    if out.cotangents.len() != args.len()
                        || out
                            .cotangents
                            .iter()
                            .zip(&types)
                            .any(|(c, t)| c.len() != Type::cotangent_leaves(t))
                    {
                        return Err(err(
                            &loc,
                            format!(
                                "pullback of `{callee}`: cotangents do not match the argument types"
                            ),
                        ));
                    }
                    out.cotangents
                }
                How::Invoke(gb) => {
                    let dys: Vec<Operand> = dy.iter().map(|d| d.unwrap_or(f64c(0.0))).collect();
                    let r = bk.invoke(*gb, &dys).map_err(build)?;
                    unpack_cots(&mut bk, r, &types).map_err(|e| err(&loc, e))?
                }
                How::Dynamic => {
                    let fc = *saved
                        .last()
                        .ok_or_else(|| err(&loc, "internal error: no saved callee"))?;
                    let g = emit_value(&mut bk, Prim::Revback, &[fc]).map_err(|e| err(&loc, e))?;
                    let Operand::Value(g) = g else {
                        return Err(err(&loc, "internal error: revback gave a constant"));
                    };
                    let dys: Vec<Operand> = dy.iter().map(|d| d.unwrap_or(f64c(0.0))).collect();
                    let r = bk.call_value(g, &dys).map_err(build)?;
                    unpack_cots(&mut bk, r, &types).map_err(|e| err(&loc, e))?
                }
                How::Phi | How::Primal => continue,
            };
            for (a, cs) in args.iter().zip(cots) {
                let Operand::Value(v) = a else { continue };
                if !act.is_active(*v) {
                    continue;
                }
                for (k, c) in cs.into_iter().enumerate() {
                    if let Some(c) = c {
                        accumulate(&mut bk, &mut m, (*v, k as u32), c).map_err(|e| err(&loc, e))?;
                    }
                }
            }
        }
        // Phi cotangents, per incoming edge.
        let mut phi_cots: Vec<(Inst, Vec<Option<Operand>>)> = Vec::new();
        for &inst in &phi_insts {
            let Some(res) = src.insts[inst].result else {
                continue;
            };
            let cs = (0..Type::cotangent_leaves(&src.values[res].ty))
                .map(|k| m.remove(&(res, k as u32)))
                .collect();
            phi_cots.push((inst, cs));
        }
        let edge_adds = |p: usize| -> Vec<(Key, Operand)> {
            let pid = bb.blocks[p].id;
            let mut adds = Vec::new();
            for (inst, cs) in &phi_cots {
                let InstKind::Phi { entries } = &src.insts[*inst].kind else {
                    continue;
                };
                for (b, op) in entries {
                    if *b != pid {
                        continue;
                    }
                    if let Operand::Value(v) = op
                        && has_cotangent(&src, *v)
                        && act.is_active(*v)
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
        };
        let rp: Vec<usize> = rev_succs[i].to_vec();
        if i == 0 {
            let mut leaves = Vec::new();
            for &p in &src.params {
                for k in 0..Type::cotangent_leaves(&src.values[p].ty) {
                    leaves.push(m.get(&(p, k as u32)).copied().unwrap_or(f64c(0.0)));
                }
            }
            let ret = match leaves.len() {
                0 => Operand::Const(Const::Unit),
                1 => leaves[0],
                _ => emit_value(&mut bk, Prim::Tuple, &leaves).map_err(|e| err(&bloc, e))?,
            };
            bk.ret(ret).map_err(build)?;
        } else if let [p] = rp.as_slice() {
            let p = *p;
            let target = rblock[p].ok_or_else(|| err(&bloc, "internal error: reverse target"))?;
            let adds = edge_adds(p);
            if joins[p].is_empty() {
                incoming[p] = Some((m, adds));
            } else {
                for (key, c) in adds {
                    accumulate(&mut bk, &mut m, key, c).map_err(|e| err(&bloc, e))?;
                }
                let from = bk
                    .current_block()
                    .ok_or_else(|| err(&bloc, "internal error: no block"))?;
                for (key, phi) in &joins[p] {
                    let c = m.get(key).copied().unwrap_or(f64c(0.0));
                    bk.add_phi_entry(*phi, from, c).map_err(build)?;
                }
            }
            bk.goto(target).map_err(build)?;
        } else {
            let id = bk.pop(Type::I64).map_err(build)?;
            let mut targets = Vec::with_capacity(preds[i].len());
            for &p in &preds[i] {
                targets
                    .push(rblock[p].ok_or_else(|| err(&bloc, "internal error: reverse target"))?);
                if !joins[p].is_empty() {
                    return Err(need_normal("no critical edges"));
                }
                incoming[p] = Some((m.clone(), edge_adds(p)));
            }
            bk.switch(Operand::Value(id), &targets).map_err(build)?;
        }
    }
    Ok(())
}

type Shadows = HashMap<Value, SmallVec<[Operand; 1]>>;
type Incoming = Option<(Cots, Vec<(Key, Operand)>)>;

/// The forward-sweep operand of a primal operand.
fn map_op(
    fval: &HashMap<Value, Operand>,
    op: &Operand,
    loc: &Location,
) -> Result<Operand, ReverseError> {
    match op {
        Operand::Const(c) => Ok(Operand::Const(*c)),
        Operand::Value(v) => fval.get(v).copied().ok_or_else(|| {
            err(
                loc,
                format!("internal error: value {v:?} used before its definition"),
            )
        }),
    }
}

/// The shadows of a primal operand (none for a constant).
fn shadows_of(fshadow: &Shadows, op: &Operand) -> SmallVec<[Operand; 1]> {
    match op {
        Operand::Value(v) => fshadow.get(v).cloned().unwrap_or_default(),
        Operand::Const(_) => SmallVec::new(),
    }
}

/// `m[key] += c` (or `= c` where absent).
fn accumulate(b: &mut FuncBuilder<'_>, m: &mut Cots, key: Key, c: Operand) -> Result<(), String> {
    let new = match m.get(&key) {
        Some(&old) => emit_value(b, Prim::Add, &[old, c])?,
        None => c,
    };
    m.insert(key, new);
    Ok(())
}

/// The primal statement of `kind` in the forward sweep, its result as an
/// operand (`()` for none).
fn primal_stmt(
    fb: &mut FuncBuilder<'_>,
    kind: &InstKind,
    fval: &HashMap<Value, Operand>,
    loc: &Location,
) -> Result<Operand, ReverseError> {
    let build = |e: irad_ir::BuildError| err(loc, format!("internal error: {e}"));
    let ops: Vec<Operand> = args_of(kind)
        .iter()
        .map(|a| map_op(fval, a, loc))
        .collect::<Result<_, _>>()?;
    let r = match kind {
        InstKind::Prim { prim, .. } => fb.prim(*prim, &ops).map_err(build)?,
        InstKind::Invoke { func, .. } => fb.invoke(*func, &ops).map_err(build)?,
        InstKind::CallValue { callee, .. } => {
            let Operand::Value(f) = map_op(fval, &Operand::Value(*callee), loc)? else {
                return Err(err(loc, "internal error: a call through a constant"));
            };
            fb.call_value(f, &ops).map_err(build)?
        }
        InstKind::Phi { .. } => return Err(err(loc, "internal error: a phi as a statement")),
    };
    Ok(r.map_or(Operand::Const(Const::Unit), Operand::Value))
}

/// What the forward sweep knows of the primal values: their operands, their
/// shadows, and which are active.
type Known<'a> = (
    &'a HashMap<Value, Operand>,
    &'a HashMap<Value, SmallVec<[Operand; 1]>>,
    &'a Activity,
);

/// Runs a rule's forward part and checks what it returned.
#[allow(clippy::too_many_arguments)]
fn forward_part(
    fb: &mut FuncBuilder<'_>,
    rule: &dyn Rrule,
    callee: Callee<'_>,
    args: &[Operand],
    types: &[Type],
    res_ty: &Type,
    (fval, fshadow, act): Known<'_>,
    loc: &Location,
) -> Result<RevFwdOut, ReverseError> {
    let mut rargs = Vec::with_capacity(args.len());
    for (a, t) in args.iter().zip(types) {
        rargs.push(RevArg {
            primal: map_op(fval, a, loc)?,
            ty: t.clone(),
            shadows: shadows_of(fshadow, a),
            active: act.wants_cotangent(a),
        });
    }
    let call = RevCall {
        callee,
        args: &rargs,
        result: res_ty,
    };
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

/// The per-argument cotangents in the leaf pack a pullback piece returns.
fn unpack_cots(
    b: &mut FuncBuilder<'_>,
    r: Option<Value>,
    types: &[Type],
) -> Result<Vec<SmallVec<[Option<Operand>; 1]>>, String> {
    let total: usize = types.iter().map(Type::cotangent_leaves).sum();
    let mut leaves: Vec<Option<Operand>> = Vec::with_capacity(total);
    match (total, r) {
        (0, _) => {}
        (1, Some(v)) => leaves.push(Some(Operand::Value(v))),
        (_, Some(v)) => {
            for j in 0..total {
                leaves.push(Some(emit_value(
                    b,
                    Prim::Getfield,
                    &[Operand::Value(v), Operand::from(j as i64)],
                )?));
            }
        }
        (_, None) => return Err("internal error: a pullback without result".into()),
    }
    let mut out = Vec::with_capacity(types.len());
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

fn emit_value(b: &mut FuncBuilder<'_>, prim: Prim, args: &[Operand]) -> Result<Operand, String> {
    irad_rules::emit::value(b, prim, args).map_err(|e| e.to_string())
}
