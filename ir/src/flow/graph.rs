//! Graph kernels over any kind of entity: depth-first postorder,
//! reachability, immediate dominators (Cooper, Harvey and Kennedy) and the
//! nodes that lie on cycles (Tarjan's strongly connected components).
//!
//! A graph is given by a start node (or a node list) and a function from a
//! node to its successors (or predecessors); the kernels never look at
//! anything else, so they serve the CFG of a function ([`super::cfg`]), the
//! reversed CFG, BBCode positions and the call graph alike. Assumes the
//! edge functions only name nodes of the graph. Guarantees: results depend
//! only on the edge functions and the order they list edges in (so they are
//! deterministic); nothing recurses, so deep graphs cannot overflow the
//! native stack; side data lives in [`SecondaryMap`]s and [`EntitySet`]s.

use crate::entity::{EntityRef, EntitySet, SecondaryMap};

/// The nodes reachable from `start`, in depth-first postorder: successors are
/// visited in the order `succs` lists them, a node is finished after all the
/// successors it discovered. `start` comes last. Reversed, this is the
/// reverse postorder, in which every node comes after each node that
/// dominates it.
pub fn postorder<K, I>(start: K, succs: impl Fn(K) -> I) -> Vec<K>
where
    K: EntityRef,
    I: IntoIterator<Item = K>,
{
    let mut order = Vec::new();
    let mut seen = EntitySet::new();
    seen.insert(start);
    let mut stack = vec![(start, succs(start).into_iter())];
    while let Some((node, next)) = stack.last_mut() {
        match next.next() {
            Some(s) => {
                if seen.insert(s) {
                    let it = succs(s).into_iter();
                    stack.push((s, it));
                }
            }
            None => {
                order.push(*node);
                stack.pop();
            }
        }
    }
    order
}

/// The reverse of [`postorder`]: `start` first.
pub fn reverse_postorder<K, I>(start: K, succs: impl Fn(K) -> I) -> Vec<K>
where
    K: EntityRef,
    I: IntoIterator<Item = K>,
{
    let mut order = postorder(start, succs);
    order.reverse();
    order
}

/// The nodes reachable from `start` along `edges` (`start` included); pass
/// predecessors to get the nodes from which `start` can be reached.
pub fn reachable<K, I>(start: K, edges: impl Fn(K) -> I) -> EntitySet<K>
where
    K: EntityRef,
    I: IntoIterator<Item = K>,
{
    let mut seen = EntitySet::new();
    seen.insert(start);
    let mut work = vec![start];
    while let Some(n) = work.pop() {
        for s in edges(n) {
            if seen.insert(s) {
                work.push(s);
            }
        }
    }
    seen
}

/// Immediate dominators by the iterative algorithm of Cooper, Harvey and
/// Kennedy, given the reverse postorder `rpo` of the nodes reachable from
/// its first node (the entry) and the predecessors of each. `None` for the
/// entry and for nodes not in `rpo`; predecessors not in `rpo` are ignored.
pub fn immediate_dominators<K, I>(rpo: &[K], preds: impl Fn(K) -> I) -> SecondaryMap<K, Option<K>>
where
    K: EntityRef,
    I: IntoIterator<Item = K>,
{
    // 1 + position in `rpo`; 0 for nodes outside it.
    let mut num: SecondaryMap<K, u32> = SecondaryMap::new();
    for (i, &n) in rpo.iter().enumerate() {
        num.set(n, u32::try_from(i + 1).unwrap_or(u32::MAX));
    }
    let mut idom: SecondaryMap<K, Option<K>> = SecondaryMap::new();
    let Some(&entry) = rpo.first() else {
        return idom;
    };
    // The entry is its own dominator while iterating, so that every
    // processed node has an idom and `intersect` ends at the entry.
    idom.set(entry, Some(entry));
    let intersect = |idom: &SecondaryMap<K, Option<K>>, mut a: K, mut b: K| {
        while a != b {
            while num[a] > num[b] {
                a = idom[a].unwrap_or(entry);
            }
            while num[b] > num[a] {
                b = idom[b].unwrap_or(entry);
            }
        }
        a
    };
    let mut changed = true;
    while changed {
        changed = false;
        for &n in rpo.iter().skip(1) {
            let mut new: Option<K> = None;
            for p in preds(n) {
                if idom[p].is_none() {
                    continue;
                }
                new = Some(match new {
                    None => p,
                    Some(cur) => intersect(&idom, p, cur),
                });
            }
            if new.is_some() && idom[n] != new {
                idom.set(n, new);
                changed = true;
            }
        }
    }
    idom.set(entry, None);
    idom
}

/// The nodes among `nodes` that lie on a cycle: in a strongly connected
/// component of more than one node, or with an edge to themselves. Tarjan's
/// algorithm with an explicit stack; `succs` may name only nodes of `nodes`.
pub fn cyclic<K, I>(nodes: impl IntoIterator<Item = K>, succs: impl Fn(K) -> I) -> EntitySet<K>
where
    K: EntityRef,
    I: IntoIterator<Item = K>,
{
    // 1 + discovery index; 0 for an undiscovered node.
    let mut index: SecondaryMap<K, usize> = SecondaryMap::new();
    let mut low: SecondaryMap<K, usize> = SecondaryMap::new();
    let mut on_stack = EntitySet::new();
    let mut stack: Vec<K> = Vec::new();
    let mut cyc = EntitySet::new();
    let mut next = 1usize;
    for root in nodes {
        if index[root] != 0 {
            continue;
        }
        let mut call = vec![(root, succs(root).into_iter())];
        index.set(root, next);
        low.set(root, next);
        next += 1;
        stack.push(root);
        on_stack.insert(root);
        while let Some((v, it)) = call.last_mut() {
            let v = *v;
            if let Some(w) = it.next() {
                if w == v {
                    cyc.insert(v);
                }
                if index[w] == 0 {
                    index.set(w, next);
                    low.set(w, next);
                    next += 1;
                    stack.push(w);
                    on_stack.insert(w);
                    call.push((w, succs(w).into_iter()));
                } else if on_stack.contains(w) {
                    low.set(v, low[v].min(index[w]));
                }
                continue;
            }
            call.pop();
            if let Some((u, _)) = call.last() {
                let u = *u;
                low.set(u, low[u].min(low[v]));
            }
            if low[v] == index[v] {
                let mut members = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack.remove(w);
                    members.push(w);
                    if w == v {
                        break;
                    }
                }
                if members.len() > 1 {
                    cyc.extend(members);
                }
            }
        }
    }
    cyc
}
