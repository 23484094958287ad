//! The CFG facts the reverse transform needs about a BBCode function: which
//! blocks reach the return block, which run at most once per call and
//! dominate it, and which f64-carrying values are live out of each block.
//!
//! Everything is iterative (work lists, an explicit DFS stack), so deep or
//! long functions cannot overflow the native stack.

use super::bbcode::BBCode;
use irad_ir::{Func, InstKind, Operand, Type, Value};
use smallvec::SmallVec;
use std::collections::BTreeSet;

/// Dominators and cycles are shared with partial evaluation: they live in
/// `crate::cfg`.
pub(crate) use crate::cfg::{idoms, on_cycle};

/// Blocks (by position) from which block `r` can be reached.
pub(crate) fn reaches(preds: &[Vec<usize>], r: usize) -> Vec<bool> {
    let mut seen = vec![false; preds.len()];
    let mut work = vec![r];
    seen[r] = true;
    while let Some(b) = work.pop() {
        for &p in &preds[b] {
            if !seen[p] {
                seen[p] = true;
                work.push(p);
            }
        }
    }
    seen
}

/// Reverse postorder from `start` over `succs`.
pub(crate) fn rpo(succs: &[SmallVec<[usize; 2]>], start: usize) -> Vec<usize> {
    let n = succs.len();
    let mut order = Vec::with_capacity(n);
    let mut seen = vec![false; n];
    let mut stack = vec![(start, 0usize)];
    seen[start] = true;
    while let Some(top) = stack.last_mut() {
        let (b, next) = *top;
        if let Some(&s) = succs[b].get(next) {
            top.1 += 1;
            if !seen[s] {
                seen[s] = true;
                stack.push((s, 0));
            }
        } else {
            order.push(b);
            stack.pop();
        }
    }
    order.reverse();
    order
}

/// Whether a value carries a cotangent (an f64 outside arrays).
pub(crate) fn has_cotangent(func: &Func, v: Value) -> bool {
    Type::cotangent_leaves(&func.values[v].ty) > 0
}

/// The values with a cotangent live at the end of each block: used later by
/// a statement, terminator or phi entry of that edge. Iterated to a fixpoint
/// in postorder.
pub(crate) fn live_out(bb: &BBCode, succs: &[SmallVec<[usize; 2]>]) -> Vec<BTreeSet<Value>> {
    let func = &bb.func;
    let n = bb.blocks.len();
    let cot = |op: &Operand| match op {
        Operand::Value(v) if has_cotangent(func, *v) => Some(*v),
        _ => None,
    };
    let mut uses: Vec<BTreeSet<Value>> = vec![BTreeSet::new(); n];
    let mut defs: Vec<BTreeSet<Value>> = vec![BTreeSet::new(); n];
    // phi_uses[s]: (pred position, value) for each phi entry of s.
    let index = bb.index();
    let mut phi_uses: Vec<Vec<(usize, Value)>> = vec![Vec::new(); n];
    for (i, b) in bb.blocks.iter().enumerate() {
        for &inst in &b.stmts {
            let data = &func.insts[inst];
            if let Some(r) = data.result {
                defs[i].insert(r);
            }
            if let InstKind::Phi { entries } = &data.kind {
                for (p, op) in entries {
                    if let (Some(&pi), Some(v)) = (index.get(p), cot(op)) {
                        phi_uses[i].push((pi, v));
                    }
                }
            }
        }
    }
    // Operand uses not defined earlier in the same block.
    for (i, b) in bb.blocks.iter().enumerate() {
        let mut defined = BTreeSet::new();
        let mut u = BTreeSet::new();
        for &inst in &b.stmts {
            let data = &func.insts[inst];
            let args: &[Operand] = match &data.kind {
                InstKind::Prim { args, .. }
                | InstKind::Invoke { args, .. }
                | InstKind::CallValue { args, .. } => args,
                InstKind::Phi { .. } => &[],
            };
            for v in args.iter().filter_map(cot) {
                if !defined.contains(&v) {
                    u.insert(v);
                }
            }
            if let Some(r) = data.result {
                defined.insert(r);
            }
        }
        if let super::bbcode::BTerm::Return(op) = &b.term
            && let Some(v) = cot(op)
            && !defined.contains(&v)
        {
            u.insert(v);
        }
        uses[i] = u;
    }
    let order = {
        let mut o = rpo(succs, 0);
        o.reverse();
        o
    };
    let mut live_in: Vec<BTreeSet<Value>> = vec![BTreeSet::new(); n];
    let mut out: Vec<BTreeSet<Value>> = vec![BTreeSet::new(); n];
    let mut changed = true;
    while changed {
        changed = false;
        for &b in &order {
            let mut o = BTreeSet::new();
            for &s in &succs[b] {
                o.extend(live_in[s].iter().copied());
                o.extend(phi_uses[s].iter().filter(|(p, _)| *p == b).map(|(_, v)| *v));
            }
            let mut li: BTreeSet<Value> = o.difference(&defs[b]).copied().collect();
            li.extend(uses[b].iter().copied());
            if o != out[b] || li != live_in[b] {
                out[b] = o;
                live_in[b] = li;
                changed = true;
            }
        }
    }
    out
}
