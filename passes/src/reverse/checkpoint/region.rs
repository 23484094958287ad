//! What a checkpointed loop's recording code needs from outside the loop:
//! its *inputs* (the values of the forward sweep, defined before the loop,
//! that the loop's blocks read: in their forward parts, their pushes, their
//! terminators and the phi entries from inside the loop), which the replay
//! takes as parameters; and the arrays each snapshot copies (the array
//! leaves of inputs that the loop writes, or that a statement without a
//! restoring pullback writes anywhere, so that they may differ when the
//! pullback replays the loop).
//!
//! Assumes the forward parts of the statements have been emitted and the
//! tape plan made, but no push, terminator or phi entry written yet (those
//! are read from the plan and the primal). Guarantees: the inputs are in a
//! deterministic order (blocks by position, operands in order of
//! appearance), each once; shadows are never copied (forward parts do not
//! write them).

use super::super::ctx::{Derivation, args_of, shadows_of};
use super::super::plan::{TapePlan, def_blocks};
use super::{ArrayLeaf, SweepView};
use irad_ir::{InstKind, Operand, Type, Value};
use irad_rules::emit::contains_array;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// The inputs of loop `k` (see the module header).
pub(in crate::reverse) fn inputs(
    cx: &Derivation<'_>,
    view: &SweepView<'_>,
    plan: &TapePlan,
    k: usize,
) -> Vec<Value> {
    let shape = &cx.shape;
    let l = shape.loops.of(k);
    let fdef = def_blocks(view.fwd, view.fblock);
    let mut out = Vec::new();
    let mut seen = HashSet::default();
    let mut add = |op: &Operand| {
        if let Operand::Value(v) = op
            && fdef[*v].is_none_or(|d| !l.contains(d))
            && seen.insert(*v)
        {
            out.push(*v);
        }
    };
    let mapped = |op: &Operand| match op {
        Operand::Value(v) => view.fval[*v],
        c => Some(*c),
    };
    let index = shape.bb.index();
    for i in l.members.iter().copied() {
        for &inst in &view.fwd.blocks[view.fblock[i]].insts {
            match &view.fwd.insts[inst].kind {
                InstKind::CallValue { callee, args } => {
                    add(&Operand::Value(*callee));
                    args.iter().for_each(&mut add);
                }
                InstKind::Phi { .. } => {}
                kind => args_of(kind).iter().for_each(&mut add),
            }
        }
        let block = &shape.bb.blocks[i];
        for save in plan.at_block_end(block.id) {
            add(&Operand::Value(save.value));
        }
        for &inst in &block.stmts {
            for save in plan.after_stmt(inst) {
                add(&Operand::Value(save.value));
            }
            let InstKind::Phi { entries } = &cx.src.insts[inst].kind else {
                continue;
            };
            for (p, op) in entries {
                // The entry from outside is the snapshot's.
                let from_inside = index[*p].is_some_and(|p| l.contains(p));
                if i == l.header && !from_inside {
                    continue;
                }
                if let Some(op) = mapped(op) {
                    add(&op);
                }
                shadows_of(view.fshadow, op).iter().for_each(&mut add);
            }
        }
        match &block.term {
            super::super::bbcode::BTerm::Br { cond: op, .. }
            | super::super::bbcode::BTerm::Switch { index: op, .. } => {
                if let Some(op) = mapped(op) {
                    add(&op);
                }
            }
            _ => {}
        }
    }
    out
}

/// The arrays each snapshot of loop `k`, of inputs `inputs`, copies: the
/// array leaves of the inputs that are not shadows and either have no
/// primal value behind them or one whose class the loop writes or that
/// `unsafe_classes` holds.
pub(in crate::reverse) fn arrays(
    cx: &Derivation<'_>,
    view: &SweepView<'_>,
    inputs: &[Value],
    k: usize,
    unsafe_classes: &HashSet<u32>,
) -> Vec<ArrayLeaf> {
    let shape = &cx.shape;
    let l = shape.loops.of(k);
    let mut written: HashSet<u32> = unsafe_classes.clone();
    for (_, b) in shape
        .bb
        .blocks
        .iter()
        .enumerate()
        .filter(|(i, _)| l.contains(*i))
    {
        for &inst in &b.stmts {
            written.extend(cx.classes.writes(&cx.src, inst));
        }
    }
    let mut primal_of: HashMap<Value, Value> = HashMap::default();
    let mut shadows: HashSet<Value> = HashSet::default();
    for v in cx.src.values.keys() {
        if let Some(Operand::Value(f)) = view.fval[v] {
            primal_of.entry(f).or_insert(v);
        }
        for s in view.fshadow[v].iter() {
            if let Operand::Value(s) = s {
                shadows.insert(*s);
            }
        }
    }
    let mut out = Vec::new();
    for (j, &v) in inputs.iter().enumerate() {
        let ty = &view.fwd.values[v].ty;
        if shadows.contains(&v) || !contains_array(ty) {
            continue;
        }
        if let Some(&p) = primal_of.get(&v)
            && !written.contains(&cx.classes.class(p))
        {
            continue;
        }
        for (path, ty) in array_leaves(ty) {
            out.push(ArrayLeaf { input: j, path, ty });
        }
    }
    out
}

/// The arrays inside a value of type `ty`: the `getfield` path to each and
/// its type, depth-first (an array is its own leaf, with an empty path).
fn array_leaves(ty: &Type) -> Vec<(Vec<i64>, Type)> {
    let mut out = Vec::new();
    let mut work = vec![(Vec::new(), ty)];
    while let Some((path, ty)) = work.pop() {
        match ty {
            Type::Array(_) => out.push((path, ty.clone())),
            Type::Tuple(elems) => {
                // Reversed, so that the stack pops them in order.
                for (k, e) in elems.iter().enumerate().rev() {
                    let mut p = path.clone();
                    p.push(k as i64);
                    work.push((p, e));
                }
            }
            _ => {}
        }
    }
    out
}
