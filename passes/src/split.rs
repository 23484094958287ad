//! Splitting huge blocks: a block with more than [`PART_STMTS`] statements
//! (after its phis) becomes a sequence of calls of new functions, each
//! holding one stretch of its statements, so that the code generator
//! lowers, compiles and holds in memory one stretch at a time instead of the
//! whole block at once (docs/codegen.md, "Huge functions").
//!
//! The reverse sweeps of a long straight-line program are single blocks of
//! hundreds of thousands of statements; Cranelift's data for one function
//! is proportional to it, and the two sweeps compile at the same time, so
//! at 400 000 statements the compiler's share alone was ~300 MB.
//!
//! Input: a verified module and the functions to consider (the facade
//! passes the functions a derivation added). Output: the same module, each
//! function with a huge block rewritten: the block's stretches replaced by
//! `invoke @NAME.partK(ins)` (and a `getfield` per result when a stretch
//! returns several values), the new functions appended to the module.
//!
//! Guarantees: the same operations run in the same order on the same
//! values, so results are the same bits, errors the same messages at the
//! same source positions (statements keep their positions), tapes see the
//! same pushes and pops. A part's parameters are the values its stretch uses
//! from before it; its result, the values its statements define that later
//! statements, the terminator or other blocks use (one value directly,
//! several as a tuple). A stretch that would take or return more than
//! [`MAX_LIVE`] values, whose result tuple the type rules would refuse, or
//! that holds a `checkpoint` hint stays in its block. Every call of a part
//! is one call level more for the call-depth limit while it runs.
//! Functions without a huge block are untouched.

use irad_ir::entity::EntityRef;
use irad_ir::func::{Args, InstData};
use irad_ir::{
    Block, BuildError, Const, Func, FuncId, Inst, InstKind, Module, Operand, Prim, Terminator,
    Type, Value,
};

/// The most statements a block may hold (phis not counted) before it is
/// split; a split block's stretches hold at most this many each. Twice
/// [`PRIMAL_PART_STMTS`]: the sweeps derived from a part of a split user
/// function (about 1.8 times its statements for the forward sweep) stay
/// whole, where splitting them again cost a copy of each (at 100 000 steps
/// of the chain, 40 MB of peak memory and 5% of the time).
pub const PART_STMTS: usize = 40_000;

/// The most statements a block of a user's function may hold before the
/// facade splits it ahead of a derivation (`GradOptions::primal_split_limit`):
/// the derivation and the optimiser then work on parts of at most this many
/// statements, whose tables and scratch are freed part by part, and reverse
/// mode derives the parts on threads of their own (they are
/// self-contained: `reverse/parallel.rs`). A 10 000-step chain (40 000
/// statements) so derives as two parts, on both cores.
pub const PRIMAL_PART_STMTS: usize = 20_000;

/// The most values a part may take or return; a stretch that needs more
/// stays in its block.
pub const MAX_LIVE: usize = 64;

/// Splits the huge blocks of each of `funcs` (see the module header);
/// returns the functions added, in order. Fails only when a name cannot be
/// given to a part (the module's own error).
pub fn split_huge_blocks(m: &mut Module, funcs: &[FuncId]) -> Result<Vec<FuncId>, BuildError> {
    split_huge_blocks_at(m, funcs, PART_STMTS)
}

/// [`split_huge_blocks`] with `limit` statements in place of
/// [`PART_STMTS`] (at least 1): tests split small programs with it.
pub fn split_huge_blocks_at(
    m: &mut Module,
    funcs: &[FuncId],
    limit: usize,
) -> Result<Vec<FuncId>, BuildError> {
    let limit = limit.max(1);
    let mut added = Vec::new();
    for &f in funcs {
        let Some(func) = m.get(f) else { continue };
        if func.insts.len() <= limit {
            continue;
        }
        let plan = plan(func, limit);
        if plan.iter().all(|(_, s)| s.is_empty()) {
            continue;
        }
        // Taken out (a placeholder of the same name in its place) rather
        // than copied: the function may be hundreds of megabytes.
        let placeholder = Func::new(&func.name, Vec::new(), Type::Unit);
        let Some(slot) = m.get_mut(f) else { continue };
        let func = std::mem::replace(slot, placeholder);
        let mut ids = Vec::new();
        let stretches = plan
            .iter()
            .flat_map(|(b, s)| s.iter().map(move |s| (*b, s)));
        for (k, (block, stretch)) in stretches.enumerate() {
            let added = part(m, &func, block, stretch, k).and_then(|p| m.add_func(p));
            match added {
                Ok(id) => ids.push(id),
                Err(e) => {
                    // The function goes back as it was; parts added stay
                    // unused.
                    if let Some(slot) = m.get_mut(f) {
                        *slot = func;
                    }
                    return Err(e);
                }
            }
        }
        let caller = caller(&func, &plan, &ids);
        drop(func);
        if let Some(slot) = m.get_mut(f) {
            *slot = caller;
        }
        added.extend(ids);
    }
    Ok(added)
}

/// A run of statements of one block that becomes a part: the statements
/// `start..end` of the block's list, the values it takes and those it
/// returns (in order of definition), and the part's result type.
struct Stretch {
    start: usize,
    end: usize,
    ins: Vec<Value>,
    outs: Vec<Value>,
    ret: Type,
}

/// The stretches of each block of `func` that is huge, in layout order.
fn plan(func: &Func, limit: usize) -> Vec<(Block, Vec<Stretch>)> {
    let places = func.inst_places();
    let def_block = |v: Value| match func.values[v].def {
        irad_ir::ValueDef::Inst(i) => places[i].map(|(b, _)| b),
        irad_ir::ValueDef::Param(_) => None,
    };
    // The index of the last statement of its own block that uses each
    // value defined by a statement; `usize::MAX` when a phi, a terminator
    // or another block uses it.
    let mut last = vec![0usize; func.values.len()];
    for &b in &func.layout {
        let data = &func.blocks[b];
        for (i, &inst) in data.insts.iter().enumerate() {
            let phi = matches!(func.insts[inst].kind, InstKind::Phi { .. });
            for_each_value(&func.insts[inst].kind, |v| {
                let at = if phi || def_block(v) != Some(b) {
                    usize::MAX
                } else {
                    i
                };
                let l = &mut last[v.index()];
                *l = (*l).max(at);
            });
        }
        if let Some(v) = data.term.as_ref().and_then(term_value) {
            last[v.index()] = usize::MAX;
        }
    }
    let mut stamp = vec![usize::MAX; func.values.len()];
    let mut serial = 0usize;
    let mut plan = Vec::new();
    for &b in &func.layout {
        let insts = &func.blocks[b].insts;
        let phis = insts
            .iter()
            .take_while(|&&i| matches!(func.insts[i].kind, InstKind::Phi { .. }))
            .count();
        let n = insts.len() - phis;
        if n <= limit {
            continue;
        }
        let count = n.div_ceil(limit);
        let size = n.div_ceil(count);
        let mut stretches = Vec::new();
        let mut start = phis;
        while start < insts.len() {
            let end = (start + size).min(insts.len());
            serial += 1;
            if let Some(s) = stretch(func, &insts[start..end], start, &last, &mut stamp, serial) {
                stretches.push(s);
            }
            start = end;
        }
        plan.push((b, stretches));
    }
    plan
}

/// The stretch of the statements `stmts` (from index `start` of their
/// block), or `None` when it must stay in its block. `stamp` marks the
/// values seen in this stretch with `serial`.
fn stretch(
    func: &Func,
    stmts: &[Inst],
    start: usize,
    last: &[usize],
    stamp: &mut [usize],
    serial: usize,
) -> Option<Stretch> {
    let end = start + stmts.len();
    // Values defined inside first, so that their uses are not taken for
    // inputs.
    for &inst in stmts {
        if let Some(v) = func.insts[inst].result {
            stamp[v.index()] = serial;
        }
    }
    let mut ins = Vec::new();
    let mut ok = true;
    for &inst in stmts {
        let kind = &func.insts[inst].kind;
        if matches!(
            kind,
            InstKind::Prim {
                prim: Prim::Checkpoint,
                ..
            }
        ) || matches!(kind, InstKind::Phi { .. })
        {
            ok = false;
        }
        for_each_value(kind, |v| {
            if stamp[v.index()] != serial {
                stamp[v.index()] = serial;
                ins.push(v);
            }
        });
    }
    let outs: Vec<Value> = stmts
        .iter()
        .filter_map(|&i| func.insts[i].result)
        .filter(|v| last[v.index()] >= end)
        .collect();
    if !ok || ins.len() > MAX_LIVE || outs.len() > MAX_LIVE {
        return None;
    }
    let ret = match outs.as_slice() {
        [] => Type::Unit,
        [v] => func.values[*v].ty.clone(),
        _ => {
            let ty = Type::Tuple(outs.iter().map(|&v| func.values[v].ty.clone()).collect());
            if ty.depth() > irad_ir::MAX_NESTING || ty.size() > irad_ir::MAX_TYPE_SIZE {
                return None;
            }
            ty
        }
    };
    Some(Stretch {
        start,
        end,
        ins,
        outs,
        ret,
    })
}

/// The function of stretch number `k` of `func`: its statements, their
/// operands mapped to its parameters and its own values.
fn part(m: &Module, func: &Func, block: Block, s: &Stretch, k: usize) -> Result<Func, BuildError> {
    let name = part_name(m, &func.name, k);
    let (mut part, mut map) = with_params(func, &name, &s.ins, s.ret.clone());
    let entry = part.add_block(1);
    let stmts = &func.blocks[block].insts[s.start..s.end];
    let first_pos = stmts.first().and_then(|&i| func.insts[i].pos);
    part.blocks[entry].pos = first_pos;
    for &inst in stmts {
        let data = &func.insts[inst];
        let kind = map_kind(&data.kind, |v| map[v.index()].unwrap_or(v), |b| b);
        let ty = data.result.map(|v| func.values[v].ty.clone());
        let (_, new) = part.push_inst(entry, kind, ty, data.pos);
        if let (Some(old), Some(new)) = (data.result, new) {
            part.values[new].name.clone_from(&func.values[old].name);
            map[old.index()] = Some(new);
        }
    }
    let mapped = |v: &Value| Operand::Value(map[v.index()].unwrap_or(*v));
    let ret = match s.outs.as_slice() {
        [] => Operand::Const(Const::Unit),
        [v] => mapped(v),
        outs => {
            let args: Args = outs.iter().map(mapped).collect();
            let kind = InstKind::Prim {
                prim: Prim::Tuple,
                args,
            };
            let (_, t) = part.push_inst(entry, kind, Some(s.ret.clone()), first_pos);
            match t {
                Some(t) => Operand::Value(t),
                None => return Err(BuildError::BadHandle("value")),
            }
        }
    };
    part.blocks[entry].term = Some(Terminator::Return(ret));
    part.blocks[entry].term_pos = first_pos;
    Ok(part)
}

/// An empty function `name` of `func`'s position, whose parameters are
/// `params` (values of `func`, with their names and types) and which returns
/// `ret`; and the map from `func`'s values to its own, holding the
/// parameters.
fn with_params(func: &Func, name: &str, params: &[Value], ret: Type) -> (Func, Vec<Option<Value>>) {
    let list = params
        .iter()
        .map(|&v| {
            let data = &func.values[v];
            (data.name.as_deref().map(str::to_string), data.ty.clone())
        })
        .collect();
    let mut new = Func::new(name, list, ret);
    new.pos = func.pos;
    let mut map = vec![None; func.values.len()];
    for (&old, &v) in params.iter().zip(&new.params) {
        map[old.index()] = Some(v);
    }
    (new, map)
}

/// A name for part `k` of the function `name` that the module does not use.
fn part_name(m: &Module, name: &str, k: usize) -> String {
    let base = format!("{name}.part{k}");
    let mut candidate = base.clone();
    let mut n = 1usize;
    while m.by_name(&candidate).is_some() {
        candidate = format!("{base}_{n}");
        n += 1;
    }
    candidate
}

/// `func` rebuilt with each stretch of `plan` replaced by a call of its
/// part (`ids`, in the order of the stretches).
fn caller(func: &Func, plan: &[(Block, Vec<Stretch>)], ids: &[FuncId]) -> Func {
    let (mut new, mut map) = with_params(func, &func.name, &func.params, func.ret.clone());
    // Blocks first (terminators and phis name blocks), statements with the
    // old operands, then every operand mapped: a use may come before its
    // definition in the layout.
    let mut blocks: Vec<Option<Block>> = vec![None; func.blocks.len()];
    for &b in &func.layout {
        let data = &func.blocks[b];
        let nb = new.add_block(data.label);
        new.blocks[nb].pos = data.pos;
        new.blocks[nb].term_pos = data.term_pos;
        blocks[b.index()] = Some(nb);
    }
    let mut part_ids = ids.iter();
    let mut taken = Vec::new();
    for (&b, &nb) in func.layout.iter().zip(&new.layout.clone()) {
        let insts = &func.blocks[b].insts;
        let stretches = plan
            .iter()
            .find(|(pb, _)| *pb == b)
            .map_or(&[][..], |(_, s)| s.as_slice());
        let mut next = stretches.iter().peekable();
        let mut i = 0;
        while i < insts.len() {
            let due = next.next_if(|s| s.start == i);
            match due.and_then(|s| Some((s, *part_ids.next()?))) {
                Some((s, id)) => {
                    call_part(&mut new, nb, func, s, id, &mut map, insts, &mut taken);
                    i = s.end;
                }
                None => {
                    copy(&mut new, nb, func, &func.insts[insts[i]], &mut map);
                    i += 1;
                }
            }
        }
    }
    let remap = |v: Value| map[v.index()].unwrap_or(v);
    let reblock = |b: Block| blocks[b.index()].unwrap_or(b);
    for (&b, &nb) in func.layout.iter().zip(&new.layout) {
        for k in 0..new.blocks[nb].insts.len() {
            let inst = new.blocks[nb].insts[k];
            // A `getfield` of a part's result has its operand already.
            if !taken.get(inst.index()).copied().unwrap_or(false) {
                new.insts[inst].kind = map_kind(&new.insts[inst].kind, remap, reblock);
            }
        }
        let term = func.blocks[b].term.as_ref();
        new.blocks[nb].term = term.map(|t| map_term(t, remap, reblock));
    }
    new
}

/// Appends `data` (old operands) to block `nb` of `new`, mapping its
/// result.
fn copy(new: &mut Func, nb: Block, func: &Func, data: &InstData, map: &mut [Option<Value>]) {
    let ty = data.result.map(|v| func.values[v].ty.clone());
    let (_, r) = new.push_inst(nb, data.kind.clone(), ty, data.pos);
    if let (Some(old), Some(r)) = (data.result, r) {
        new.values[r].name.clone_from(&func.values[old].name);
        map[old.index()] = Some(r);
    }
}

/// Appends to block `nb` of `new` the call of the part `id` of stretch `s`
/// (old operands; mapped later) and the `getfield`s of its results (new
/// operands: marked in `taken`, by statement index), and maps each result
/// of the stretch to its value in `new`.
#[allow(clippy::too_many_arguments)]
fn call_part(
    new: &mut Func,
    nb: Block,
    func: &Func,
    s: &Stretch,
    id: FuncId,
    map: &mut [Option<Value>],
    insts: &[Inst],
    taken: &mut Vec<bool>,
) {
    let pos = func.insts[insts[s.start]].pos;
    let args: Args = s.ins.iter().map(|&v| Operand::Value(v)).collect();
    let ty = (s.ret != Type::Unit).then(|| s.ret.clone());
    let (_, r) = new.push_inst(nb, InstKind::Invoke { func: id, args }, ty, pos);
    let Some(r) = r else { return };
    if let [v] = s.outs.as_slice() {
        new.values[r].name.clone_from(&func.values[*v].name);
        map[v.index()] = Some(r);
        return;
    }
    for (k, &v) in s.outs.iter().enumerate() {
        let args: Args = [Operand::Value(r), Operand::Const(Const::I64(k as i64))]
            .into_iter()
            .collect();
        let kind = InstKind::Prim {
            prim: Prim::Getfield,
            args,
        };
        let ty = func.values[v].ty.clone();
        let (gi, g) = new.push_inst(nb, kind, Some(ty), pos);
        if taken.len() <= gi.index() {
            taken.resize(gi.index() + 1, false);
        }
        taken[gi.index()] = true;
        if let Some(g) = g {
            new.values[g].name.clone_from(&func.values[v].name);
            map[v.index()] = Some(g);
        }
    }
}

/// Calls `f` on each value among the operands of `kind`.
fn for_each_value(kind: &InstKind, mut f: impl FnMut(Value)) {
    let mut op = |o: &Operand| {
        if let Operand::Value(v) = o {
            f(*v);
        }
    };
    match kind {
        InstKind::Prim { args, .. } | InstKind::Invoke { args, .. } => args.iter().for_each(op),
        InstKind::CallValue { callee, args } => {
            op(&Operand::Value(*callee));
            args.iter().for_each(op);
        }
        InstKind::Phi { entries } => entries.iter().for_each(|(_, o)| op(o)),
    }
}

/// The value among the operands of `term`, if any.
fn term_value(term: &Terminator) -> Option<Value> {
    match term {
        Terminator::Goto(_) => None,
        Terminator::GotoIfNot { cond: o, .. }
        | Terminator::Return(o)
        | Terminator::Switch { index: o, .. } => match o {
            Operand::Value(v) => Some(*v),
            Operand::Const(_) => None,
        },
    }
}

/// `kind` with each value operand mapped by `f` and each block (of a phi)
/// by `blk`.
fn map_kind(kind: &InstKind, f: impl Fn(Value) -> Value, blk: impl Fn(Block) -> Block) -> InstKind {
    let op = |o: &Operand| match o {
        Operand::Value(v) => Operand::Value(f(*v)),
        Operand::Const(c) => Operand::Const(*c),
    };
    match kind {
        InstKind::Prim { prim, args } => InstKind::Prim {
            prim: *prim,
            args: args.iter().map(op).collect(),
        },
        InstKind::Invoke { func, args } => InstKind::Invoke {
            func: *func,
            args: args.iter().map(op).collect(),
        },
        InstKind::CallValue { callee, args } => InstKind::CallValue {
            callee: f(*callee),
            args: args.iter().map(op).collect(),
        },
        InstKind::Phi { entries } => InstKind::Phi {
            entries: entries.iter().map(|(b, o)| (blk(*b), op(o))).collect(),
        },
    }
}

/// `term` with its operand mapped by `f` and its blocks by `blk`.
fn map_term(
    term: &Terminator,
    f: impl Fn(Value) -> Value,
    blk: impl Fn(Block) -> Block,
) -> Terminator {
    let op = |o: &Operand| match o {
        Operand::Value(v) => Operand::Value(f(*v)),
        Operand::Const(c) => Operand::Const(*c),
    };
    match term {
        Terminator::Goto(b) => Terminator::Goto(blk(*b)),
        Terminator::GotoIfNot { cond, target } => Terminator::GotoIfNot {
            cond: op(cond),
            target: blk(*target),
        },
        Terminator::Return(o) => Terminator::Return(op(o)),
        Terminator::Switch { index, targets } => Terminator::Switch {
            index: op(index),
            targets: targets.iter().map(|b| blk(*b)).collect(),
        },
    }
}
