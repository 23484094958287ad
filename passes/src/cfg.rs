//! CFG facts the passes share: successors, predecessors and reachability of the
//! blocks of a function's layout, computed from its terminators.
//!
//! Assumes every layout block has a terminator whose targets are layout blocks
//! (a verified function); a block that breaks this simply gets fewer edges.
//! Guarantees: `preds` lists each predecessor once, in layout order; `succs`
//! lists the fall-through successor of `gotoifnot` first and the targets of
//! `switch` in index order; [`idoms`] gives immediate dominators over any
//! successor/predecessor lists and [`on_cycle`] the nodes on cycles of any
//! graph (reverse mode and partial evaluation share them).
//! Nothing recurses.

use irad_ir::{Block, Func};
use smallvec::SmallVec;
use std::collections::HashMap;

/// Successors, predecessors and reachability of one function's layout blocks.
pub(crate) struct Cfg {
    /// The layout the facts are about.
    pub layout: Vec<Block>,
    /// Successors by layout index; for `gotoifnot`, the fall-through first;
    /// for `switch`, the targets in index order.
    pub succs: Vec<SmallVec<[usize; 2]>>,
    /// Predecessors by layout index, in layout order, without repeats.
    pub preds: Vec<Vec<usize>>,
}

impl Cfg {
    /// The CFG of `func`'s current layout.
    pub fn new(func: &Func) -> Cfg {
        let layout = func.layout.clone();
        let index: HashMap<Block, usize> =
            layout.iter().enumerate().map(|(i, &b)| (b, i)).collect();
        let mut succs = Vec::with_capacity(layout.len());
        let mut preds = vec![Vec::new(); layout.len()];
        for (i, &block) in layout.iter().enumerate() {
            let next = layout.get(i + 1).copied();
            let out: SmallVec<[usize; 2]> = func
                .successors(block, next)
                .iter()
                .filter_map(|s| index.get(s).copied())
                .collect();
            for &s in &out {
                // Blocks are visited in layout order, so `preds[s]` stays sorted;
                // a repeat would be the same block, last pushed.
                if preds[s].last() != Some(&i) {
                    preds[s].push(i);
                }
            }
            succs.push(out);
        }
        Cfg {
            layout,
            succs,
            preds,
        }
    }

    /// Whether each layout block is reachable from the entry (a worklist walk,
    /// no recursion).
    pub fn reachable(&self) -> Vec<bool> {
        let mut seen = vec![false; self.layout.len()];
        let mut work = Vec::new();
        if !self.layout.is_empty() {
            seen[0] = true;
            work.push(0);
        }
        while let Some(i) = work.pop() {
            for &s in &self.succs[i] {
                if !seen[s] {
                    seen[s] = true;
                    work.push(s);
                }
            }
        }
        seen
    }

    /// The reachable layout indices in reverse postorder: every block comes
    /// after each block that dominates it. Iterative depth-first search.
    pub fn reverse_postorder(&self) -> Vec<usize> {
        let n = self.layout.len();
        let mut order = Vec::with_capacity(n);
        if n == 0 {
            return order;
        }
        let mut seen = vec![false; n];
        // (block, index of the next successor to visit)
        let mut stack = vec![(0usize, 0usize)];
        seen[0] = true;
        while let Some(top) = stack.last_mut() {
            let (b, next) = *top;
            if let Some(&s) = self.succs[b].get(next) {
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
