//! Full unrolling of loops whose trip count is known at compile time.
//!
//! Input: a verified function. A loop is unrolled when it is a natural loop
//! (header `H` dominating its one latch `L`, the back edge `L -> H`) with one
//! predecessor `P` outside it, whose only exit is `H`'s `gotoifnot`, and whose
//! header tests an induction variable against a constant: `H` holds
//! `%c = call CMP(%i, K)` (or `CMP(K, %i)`; `CMP` one of `lt le gt ge eq ne`)
//! and ends in `gotoifnot %c, ...`, where `%i = phi [P => START, L => %next]`
//! is a phi of `H`, `START` and `K` are i64 constants, and `%next` is
//! `iadd(%i, STEP)`, `iadd(STEP, %i)` or `isub(%i, STEP)` computed in the
//! loop. The body may have any number of blocks, branches and inner loops.
//! The trip count is found by running the test and the step on constants
//! with the interpreter's own evaluation (so wrapping and every comparison
//! are exactly the run-time ones), at most [`Limits::unroll_trip`] steps; the
//! unrolled size (trip count × loop size) must stay within
//! [`Limits::unroll_size`] and the function within [`Limits::max_func_size`].
//! Loops with `break` (a second exit), `continue` to the header from two
//! places (two latches), an unknown bound or a bound over the limits are left
//! alone. Among candidates, the smallest loop goes first (inner loops first);
//! an unrolled outer loop whose copies make an inner loop's bound constant
//! lets that inner loop be unrolled next.
//!
//! Output: the loop's blocks replaced by N copies of the whole loop (fresh
//! labels and values; each header's phis replaced by the values of the
//! previous copy's latch, or by the entry values in the first copy; each
//! header's test replaced by `goto` into the body) and a last copy of the
//! header alone, which goes to the exit; the exit's phi entries and every
//! use of the header's values after the loop name that last copy. The same
//! statements run in the same order, so the result computes exactly the same
//! values and errors. The copies keep the statements' source positions.

use super::{Labels, Limits, func_size, map_kind, map_targets, map_term, rename_phi_pred};
use irad_ir::entity::EntitySet;
use irad_ir::flow::{ControlFlowGraph, DominatorTree, LoopAnalysis};
use irad_ir::interp::fold_prim;
use irad_ir::{
    Block, BlockData, Const, Func, InstData, InstKind, Module, Operand, Prim, Terminator, Value,
    ValueData, ValueDef,
};
use rustc_hash::FxHashMap as HashMap;

/// Unrolls the loops of every function of `module` with the default
/// [`Limits`]; returns whether any loop was unrolled.
pub fn unroll(module: &mut Module) -> bool {
    unroll_with(module, &Limits::default())
}

/// [`unroll`] with explicit limits.
pub fn unroll_with(module: &mut Module, limits: &Limits) -> bool {
    let ids: Vec<_> = module.func_ids().collect();
    let mut changed = false;
    for id in ids {
        changed |= unroll_func(&mut module[id], limits);
    }
    changed
}

/// Unrolls every loop of `func` it can, within `limits` (including loops that
/// unrolling makes unrollable); returns whether any was.
pub fn unroll_func(func: &mut Func, limits: &Limits) -> bool {
    let mut changed = false;
    // Each unroll removes a loop and keeps the function within its size
    // limit, which bounds how many loops there can be; this is a second guard.
    for _ in 0..limits.max_func_size {
        let Some(lp) = find_loop(func, limits) else {
            break;
        };
        unroll_loop(func, &lp);
        changed = true;
    }
    changed
}

/// A loop that can be unrolled.
struct Loop {
    header: Block,
    preheader: Block,
    /// The loop's blocks in layout order, rotated to start at the header.
    blocks: Vec<Block>,
    /// The header's successor inside the loop.
    inside: Block,
    /// The header's successor outside the loop.
    exit: Block,
    /// How many times the body runs.
    trip: u64,
}

/// The smallest loop of `func` that can be unrolled within `limits`.
fn find_loop(func: &Func, limits: &Limits) -> Option<Loop> {
    let cfg = ControlFlowGraph::with_function(func);
    let dom = DominatorTree::with_cfg(&cfg);
    let loops = LoopAnalysis::compute(&cfg, &dom);
    let size = func_size(func);
    let mut best: Option<(usize, Loop)> = None;
    // Headers in reverse postorder: among loops of one size, the first wins.
    for &h in dom.reverse_postorder() {
        let Some(lp) = loops.loop_headed_by(h) else {
            continue;
        };
        let latches = loops.latches(lp);
        let mut outside = cfg.preds(h).iter().filter(|p| !latches.contains(p));
        let ([latch], Some(&pre), None) = (latches, outside.next(), outside.next()) else {
            continue;
        };
        // The natural loop of the one back edge.
        let blocks = loops.blocks(lp);
        let exits_only_at_header = blocks
            .iter()
            .filter(|&&b| b != h)
            .all(|&b| cfg.succs(b).iter().all(|&s| loops.contains(lp, s)));
        if !exits_only_at_header {
            continue;
        }
        let loop_size: usize = blocks.iter().map(|&b| func.blocks[b].insts.len() + 1).sum();
        if best.as_ref().is_some_and(|(s, _)| *s <= loop_size) {
            continue;
        }
        let in_loop: EntitySet<Block> = blocks.iter().copied().collect();
        let Some((inside, exit, trip)) = header_test(func, h, pre, *latch, &in_loop, limits) else {
            continue;
        };
        let unrolled = usize::try_from(trip)
            .ok()
            .and_then(|t| t.checked_mul(loop_size))
            .and_then(|s| s.checked_add(loop_size));
        let fits =
            unrolled.is_some_and(|s| s <= limits.unroll_size && size + s <= limits.max_func_size);
        if !fits {
            continue;
        }
        let mut blocks = blocks.to_vec();
        let at = blocks.iter().position(|&b| b == h).unwrap_or(0);
        blocks.rotate_left(at);
        best = Some((
            loop_size,
            Loop {
                header: h,
                preheader: pre,
                blocks,
                inside,
                exit,
                trip,
            },
        ));
    }
    best.map(|(_, lp)| lp)
}

/// The header's successors inside and outside the loop and the trip count,
/// when the header tests an induction variable against a constant and the
/// trip count is within `limits`.
fn header_test(
    func: &Func,
    header: Block,
    pre: Block,
    latch: Block,
    in_loop: &EntitySet<Block>,
    limits: &Limits,
) -> Option<(Block, Block, u64)> {
    let Some(Terminator::GotoIfNot {
        cond: Operand::Value(c),
        target,
    }) = &func.blocks[header].term
    else {
        return None;
    };
    let fall = func.next_in_layout(header)?;
    let (inside, exit, stay_when) = match (in_loop.contains(fall), in_loop.contains(*target)) {
        (true, false) => (fall, *target, true),
        (false, true) => (*target, fall, false),
        _ => return None,
    };
    let ValueDef::Inst(test) = func.values[*c].def else {
        return None;
    };
    if !func.blocks[header].insts.contains(&test) {
        return None;
    }
    let InstKind::Prim { prim: cmp, args } = &func.insts[test].kind else {
        return None;
    };
    if !matches!(
        cmp,
        Prim::Lt | Prim::Le | Prim::Gt | Prim::Ge | Prim::Eq | Prim::Ne
    ) {
        return None;
    }
    let (i, cmp_args) = match args.as_slice() {
        [Operand::Value(i), k @ Operand::Const(Const::I64(_))] => (*i, [None, Some(*k)]),
        [k @ Operand::Const(Const::I64(_)), Operand::Value(i)] => (*i, [Some(*k), None]),
        _ => return None,
    };
    let (start, next) = induction_phi(func, header, i, pre, latch)?;
    let (step_prim, step_args) = step(func, next, i, in_loop)?;
    let with_i = |slots: &[Option<Operand>], iv: i64| -> Option<Vec<Const>> {
        slots
            .iter()
            .map(|s| match s {
                None => Some(Const::I64(iv)),
                Some(Operand::Const(c)) => Some(*c),
                Some(Operand::Value(_)) => None,
            })
            .collect()
    };
    let mut iv = start;
    let mut trip = 0u64;
    loop {
        let Some(Const::Bool(c)) = fold_prim(*cmp, &with_i(&cmp_args, iv)?) else {
            return None;
        };
        if c != stay_when {
            return Some((inside, exit, trip));
        }
        trip += 1;
        if trip > limits.unroll_trip {
            return None;
        }
        let Some(Const::I64(next_iv)) = fold_prim(step_prim, &with_i(&step_args, iv)?) else {
            return None;
        };
        iv = next_iv;
    }
}

/// `%i = phi [pre => START, latch => %next]` in `header`: (START, %next).
fn induction_phi(
    func: &Func,
    header: Block,
    i: Value,
    pre: Block,
    latch: Block,
) -> Option<(i64, Value)> {
    let ValueDef::Inst(phi) = func.values[i].def else {
        return None;
    };
    if !func.blocks[header].insts.contains(&phi) {
        return None;
    }
    let InstKind::Phi { entries } = &func.insts[phi].kind else {
        return None;
    };
    let mut start = None;
    let mut next = None;
    for (b, op) in entries {
        match op {
            Operand::Const(Const::I64(s)) if *b == pre => start = Some(*s),
            Operand::Value(v) if *b == latch => next = Some(*v),
            _ => return None,
        }
    }
    Some((start?, next?))
}

/// `%next = iadd(%i, STEP)`, `iadd(STEP, %i)` or `isub(%i, STEP)` in the
/// loop: the primitive and its operands with `%i` left as a hole.
fn step(
    func: &Func,
    next: Value,
    i: Value,
    in_loop: &EntitySet<Block>,
) -> Option<(Prim, [Option<Operand>; 2])> {
    let ValueDef::Inst(inst) = func.values[next].def else {
        return None;
    };
    let defined_in_loop = in_loop.iter().any(|b| func.blocks[b].insts.contains(&inst));
    if !defined_in_loop {
        return None;
    }
    let InstKind::Prim { prim, args } = &func.insts[inst].kind else {
        return None;
    };
    let hole = Operand::Value(i);
    match (prim, args.as_slice()) {
        (Prim::Iadd | Prim::Isub, [a, s @ Operand::Const(Const::I64(_))]) if *a == hole => {
            Some((*prim, [None, Some(*s)]))
        }
        (Prim::Iadd, [s @ Operand::Const(Const::I64(_)), a]) if *a == hole => {
            Some((*prim, [Some(*s), None]))
        }
        _ => None,
    }
}

/// Replaces `lp` by `lp.trip` copies of its blocks and a last copy of its
/// header.
fn unroll_loop(func: &mut Func, lp: &Loop) {
    let header = lp.header;
    let trip = usize::try_from(lp.trip).unwrap_or(0);
    let mut labels = Labels::new(func);
    let header_insts = func.blocks[header].insts.clone();
    // (phi result, entry operand, latch operand) of the header's phis.
    let mut header_phis: Vec<(Value, Operand, Operand)> = Vec::new();
    let mut header_values: EntitySet<Value> = EntitySet::new();
    for &inst in &header_insts {
        let data = &func.insts[inst];
        if let Some(r) = data.result {
            header_values.insert(r);
        }
        if let (InstKind::Phi { entries }, Some(r)) = (&data.kind, data.result) {
            let entry = entries.iter().find(|(b, _)| *b == lp.preheader);
            let back = entries.iter().find(|(b, _)| *b != lp.preheader);
            if let (Some(&(_, e)), Some(&(_, l))) = (entry, back) {
                header_phis.push((r, e, l));
            }
        }
    }

    // The blocks of every copy, made first so that jumps can name them.
    let mut copies: Vec<HashMap<Block, Block>> = Vec::with_capacity(trip + 1);
    for k in 0..=trip {
        let originals: &[Block] = if k < trip { &lp.blocks } else { &[header] };
        let mut map = HashMap::default();
        for &b in originals {
            let data = &func.blocks[b];
            let (pos, term_pos) = (data.pos, data.term_pos);
            let new = func.blocks.push(BlockData {
                label: labels.fresh(),
                insts: Vec::new(),
                term: None,
                pos,
                term_pos,
            });
            map.insert(b, new);
        }
        copies.push(map);
    }
    let last_header = copies[trip][&header];
    let next_header = |k: usize| -> Block {
        if k + 1 < trip {
            copies[k + 1][&header]
        } else {
            last_header
        }
    };

    let mut seq: Vec<Block> = Vec::new();
    let mut prev: HashMap<Value, Operand> = HashMap::default();
    for (k, blocks) in copies.iter().enumerate() {
        let originals: &[Block] = if k < trip { &lp.blocks } else { &[header] };
        let through = |map: &HashMap<Value, Operand>, op: Operand| match op {
            Operand::Value(v) => map.get(&v).copied().unwrap_or(op),
            Operand::Const(_) => op,
        };
        let mut vmap: HashMap<Value, Operand> = HashMap::default();
        for &(phi, entry, back) in &header_phis {
            let op = if k == 0 { entry } else { through(&prev, back) };
            vmap.insert(phi, op);
        }
        let mut made = Vec::new();
        for &b in originals {
            for j in 0..func.blocks[b].insts.len() {
                let inst = func.blocks[b].insts[j];
                let data = &func.insts[inst];
                if b == header && matches!(data.kind, InstKind::Phi { .. }) {
                    continue;
                }
                let (kind, pos, result) = (data.kind.clone(), data.pos, data.result);
                let new_inst = func.insts.push(InstData {
                    kind,
                    result: None,
                    pos,
                });
                if let Some(r) = result {
                    let v = func.values.push(ValueData {
                        ty: func.values[r].ty.clone(),
                        def: ValueDef::Inst(new_inst),
                        // Every copy would have the name: the printer numbers them.
                        name: None,
                    });
                    func.insts[new_inst].result = Some(v);
                    vmap.insert(r, Operand::Value(v));
                }
                made.push((b, new_inst));
            }
        }
        let map_op = |op: Operand| through(&vmap, op);
        let map_block = |t: Block| {
            if t == header {
                next_header(k)
            } else {
                blocks.get(&t).copied().unwrap_or(t)
            }
        };
        for (b, new_inst) in made {
            let kind = &mut func.insts[new_inst].kind;
            map_kind(kind, &map_op);
            if let InstKind::Phi { entries } = kind {
                // Phis of the body: their predecessors are in this copy.
                for (pred, _) in entries.iter_mut() {
                    *pred = blocks.get(pred).copied().unwrap_or(*pred);
                }
            }
            func.blocks[blocks[&b]].insts.push(new_inst);
        }
        for &b in originals {
            let term = if b == header {
                Terminator::Goto(if k < trip {
                    map_block(lp.inside)
                } else {
                    lp.exit
                })
            } else {
                let mut term = func.blocks[b].term.clone().unwrap_or(Terminator::Goto(b));
                map_term(&mut term, &map_op);
                map_targets(&mut term, &map_block);
                term
            };
            func.blocks[blocks[&b]].term = Some(term);
            seq.push(blocks[&b]);
        }
        prev = vmap;
    }

    // The exit is entered from the last header copy; the header's values
    // after the loop are that copy's.
    rename_phi_pred(func, lp.exit, header, last_header);
    let first_header = copies.first().map_or(last_header, |c| c[&header]);
    if let Some(term) = &mut func.blocks[lp.preheader].term {
        map_targets(term, &|t| if t == header { first_header } else { t });
    }
    let in_loop: EntitySet<Block> = lp.blocks.iter().copied().collect();
    let at = func.layout.iter().position(|&b| b == header).unwrap_or(0);
    let mut layout: Vec<Block> = Vec::with_capacity(func.layout.len() + seq.len());
    for (i, &b) in func.layout.iter().enumerate() {
        if i == at {
            layout.extend(seq.iter().copied());
        }
        if !in_loop.contains(b) {
            layout.push(b);
        }
    }
    func.layout = layout;
    let after: HashMap<Value, Operand> = prev
        .into_iter()
        .filter(|(v, _)| header_values.contains(*v))
        .collect();
    super::substitute(func, &after);
}
