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

/// Immediate dominators by the iterative algorithm of Cooper, Harvey and
/// Kennedy over the reverse postorder `order` (entry first); `None` for the
/// entry and unreachable blocks.
pub(crate) fn idoms(preds: &[Vec<usize>], order: &[usize]) -> Vec<Option<usize>> {
    let n = preds.len();
    let mut num = vec![usize::MAX; n];
    for (k, &b) in order.iter().enumerate() {
        num[b] = k;
    }
    let mut idom: Vec<Option<usize>> = vec![None; n];
    let Some(&entry) = order.first() else {
        return idom;
    };
    idom[entry] = Some(entry);
    let mut changed = true;
    while changed {
        changed = false;
        for &b in order.iter().skip(1) {
            let mut new: Option<usize> = None;
            for &p in &preds[b] {
                if idom[p].is_none() {
                    continue;
                }
                new = Some(match new {
                    None => p,
                    Some(mut x) => {
                        let mut y = p;
                        while x != y {
                            while num[x] > num[y] {
                                x = idom[x].unwrap_or(entry);
                            }
                            while num[y] > num[x] {
                                y = idom[y].unwrap_or(entry);
                            }
                        }
                        x
                    }
                });
            }
            if new.is_some() && idom[b] != new {
                idom[b] = new;
                changed = true;
            }
        }
    }
    idom[entry] = None;
    idom
}

/// Whether each block lies on a cycle (an SCC with more than one block, or a
/// self loop): Tarjan's algorithm with an explicit stack.
pub(crate) fn on_cycle(succs: &[SmallVec<[usize; 2]>]) -> Vec<bool> {
    let n = succs.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut cyc = vec![false; n];
    let mut next = 0usize;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut call = vec![(root, 0usize)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut k)) = call.last_mut() {
            if let Some(&w) = succs[v].get(*k) {
                *k += 1;
                if w == v {
                    cyc[v] = true;
                }
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    call.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                call.pop();
                if let Some(&(u, _)) = call.last() {
                    low[u] = low[u].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut members = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        members.push(w);
                        if w == v {
                            break;
                        }
                    }
                    if members.len() > 1 {
                        for w in members {
                            cyc[w] = true;
                        }
                    }
                }
            }
        }
    }
    cyc
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
