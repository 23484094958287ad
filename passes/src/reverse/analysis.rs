//! The CFG facts the reverse transform needs about a BBCode function: which
//! blocks reach the return block, which run at most once per call and
//! dominate it, and which f64-carrying values are live out of each block.
//!
//! The graph algorithms are `irad_ir::flow::graph`'s, over block positions
//! (BBCode blocks move, so the reverse transform numbers them by position);
//! everything is iterative, so deep or long functions cannot overflow the
//! native stack.

use super::bbcode::BBCode;
use irad_ir::entity::{EntityRef, SecondaryMap};
use irad_ir::flow::graph;
use irad_ir::{Func, InstKind, Operand, Type, Value};
use smallvec::SmallVec;

irad_ir::entity!(
    /// A block position of a BBCode function, as an entity for the kernels of
    /// `irad_ir::flow::graph`.
    Pos,
    "pos"
);

/// The positions `edges` lists for position `p`, as entities.
fn out(edges: &[impl AsRef<[usize]>], p: Pos) -> impl Iterator<Item = Pos> + '_ {
    edges[p.index()].as_ref().iter().map(|&q| Pos::new(q))
}

/// Blocks (by position) from which block `r` can be reached.
pub(crate) fn reaches(preds: &[Vec<usize>], r: usize) -> Vec<bool> {
    let set = graph::reachable(Pos::new(r), |p| out(preds, p));
    (0..preds.len())
        .map(|i| set.contains(Pos::new(i)))
        .collect()
}

/// Reverse postorder from `start` over `succs` (successors in order).
pub(crate) fn rpo(succs: &[SmallVec<[usize; 2]>], start: usize) -> Vec<usize> {
    graph::reverse_postorder(Pos::new(start), |p| out(succs, p))
        .into_iter()
        .map(Pos::index)
        .collect()
}

/// Immediate dominators over the reverse postorder `order` (entry first);
/// `None` for the entry and unreachable blocks.
pub(crate) fn idoms(preds: &[Vec<usize>], order: &[usize]) -> Vec<Option<usize>> {
    let order: Vec<Pos> = order.iter().map(|&i| Pos::new(i)).collect();
    let idom = graph::immediate_dominators(&order, |p| out(preds, p));
    (0..preds.len())
        .map(|i| idom[Pos::new(i)].map(Pos::index))
        .collect()
}

/// Whether each block lies on a cycle (an SCC of more than one block, or a
/// self loop).
pub(crate) fn on_cycle(succs: &[SmallVec<[usize; 2]>]) -> Vec<bool> {
    let cyc = graph::cyclic((0..succs.len()).map(Pos::new), |p| out(succs, p));
    (0..succs.len())
        .map(|i| cyc.contains(Pos::new(i)))
        .collect()
}

/// Whether a value carries a cotangent (an f64 outside arrays).
pub(crate) fn has_cotangent(func: &Func, v: Value) -> bool {
    Type::cotangent_leaves(&func.values[v].ty) > 0
}

/// The values with a cotangent live at the end of each block of `bb` (the
/// blocks of `func`): used later by a statement, terminator or phi entry of
/// that edge, each block's in ascending order. Iterated to a fixpoint in
/// postorder. The sets are sorted lists, rebuilt in two scratch lists and
/// copied into a block's only when they change: a set per block and
/// iteration (a `BTreeSet`, nodes of a few values each) was most of reverse
/// mode's allocations in code with many blocks.
pub(crate) fn live_out(
    bb: &BBCode,
    func: &Func,
    succs: &[SmallVec<[usize; 2]>],
) -> Vec<Vec<Value>> {
    let n = bb.blocks.len();
    let cot = |op: &Operand| match op {
        Operand::Value(v) if has_cotangent(func, *v) => Some(*v),
        _ => None,
    };
    let mut uses: Vec<Vec<Value>> = vec![Vec::new(); n];
    // def_block[v]: 1 + the position of the block defining v (0: none), a
    // dense map: a set per block cost an allocation per statement.
    let mut def_block: SecondaryMap<Value, u32> = SecondaryMap::new();
    // phi_uses[s]: (pred position, value) for each phi entry of s.
    let index = bb.index();
    let mut phi_uses: Vec<Vec<(usize, Value)>> = vec![Vec::new(); n];
    for (i, b) in bb.blocks.iter().enumerate() {
        for &inst in &b.stmts {
            let data = &func.insts[inst];
            if let Some(r) = data.result {
                def_block.set(r, i as u32 + 1);
            }
            if let InstKind::Phi { entries } = &data.kind {
                for (p, op) in entries {
                    if let (Some(pi), Some(v)) = (index[*p], cot(op)) {
                        phi_uses[i].push((pi, v));
                    }
                }
            }
        }
    }
    // Operand uses not defined earlier in the same block: `defined_at[v]`
    // is 1 + the block's position once the walk of that block has passed
    // v's definition.
    let mut defined_at: SecondaryMap<Value, u32> = SecondaryMap::new();
    for (i, b) in bb.blocks.iter().enumerate() {
        let stamp = i as u32 + 1;
        let mut u = Vec::new();
        for &inst in &b.stmts {
            let data = &func.insts[inst];
            let args: &[Operand] = match &data.kind {
                InstKind::Prim { args, .. }
                | InstKind::Invoke { args, .. }
                | InstKind::CallValue { args, .. } => args,
                InstKind::Phi { .. } => &[],
            };
            for v in args.iter().filter_map(cot) {
                if defined_at[v] != stamp {
                    u.push(v);
                }
            }
            if let Some(r) = data.result {
                defined_at.set(r, stamp);
            }
        }
        if let super::bbcode::BTerm::Return(op) = &b.term
            && let Some(v) = cot(op)
            && defined_at[v] != stamp
        {
            u.push(v);
        }
        u.sort_unstable();
        u.dedup();
        uses[i] = u;
    }
    let order = {
        let mut o = rpo(succs, 0);
        o.reverse();
        o
    };
    let mut live_in: Vec<Vec<Value>> = vec![Vec::new(); n];
    let mut out: Vec<Vec<Value>> = vec![Vec::new(); n];
    let (mut o, mut li) = (Vec::new(), Vec::new());
    let mut changed = true;
    while changed {
        changed = false;
        for &b in &order {
            o.clear();
            for &s in &succs[b] {
                o.extend(live_in[s].iter().copied());
                o.extend(phi_uses[s].iter().filter(|(p, _)| *p == b).map(|(_, v)| *v));
            }
            o.sort_unstable();
            o.dedup();
            let stamp = b as u32 + 1;
            li.clear();
            li.extend(o.iter().copied().filter(|&v| def_block[v] != stamp));
            li.extend(uses[b].iter().copied());
            li.sort_unstable();
            li.dedup();
            if o != out[b] || li != live_in[b] {
                out[b].clone_from(&o);
                live_in[b].clone_from(&li);
                changed = true;
            }
        }
    }
    out
}
