//! Sharing webs (module header of `release.rs`, "Sharing webs"): header
//! phis of one loop that may hold one array between them, as a best
//! iterate kept by reference does (`r = step(r); if better { keep = r; }`:
//! the step's new array enters both `r` and `keep`), owned together and let
//! go of by comparing addresses on the edges into the header.

use super::{ArrayPhis, Leaving, Owner, Walk, Web, any_repeats, loop_body, unrepeated};
use irad_ir::flow::{ControlFlowGraph, DominatorTree};
use irad_ir::types::Type;
use irad_ir::{Block, Func, Inst, InstKind, Operand, Terminator, Value};
use rustc_hash::FxHashMap as HashMap;
use rustc_hash::FxHashSet as HashSet;

/// At most this many phis and sites in one web: each edge into the header
/// compares every pair of them.
const MAX_WEB: usize = 8;

/// Headers with more `[T]` phis than this are not searched (the search
/// joins phis pairwise).
const MAX_CANDIDATES: usize = 64;

/// What one header phi's latch entries bring, through phis of the body.
pub(super) struct Brings {
    /// The web's phis (statement, value, block) met on the way.
    pub(super) phis: Vec<(Inst, Value, Block)>,
    /// The sites met.
    pub(super) sites: Vec<Value>,
    /// The header's phis met (the phi itself included).
    headers: Vec<Value>,
}

/// The sharing webs of header `h` among its `[T]` phis not in `owned`: sets
/// of at least two phis whose latches bring, through phis of the loop's
/// body, only phis of the set and arrays sites of the body make, and that
/// share a site, a phi of the body or each other's arrays. Each is an
/// owner of its first phi, the others in its [`Web::others`].
pub(super) fn sharing(
    func: &Func,
    (cfg, dom): (&ControlFlowGraph, &DominatorTree),
    walk: &mut Walk<'_>,
    (makers, phis): (&HashMap<Value, Block>, &ArrayPhis),
    h: Block,
    owned: &HashSet<Value>,
) -> Vec<Owner> {
    let mut out = Vec::new();
    // The header is entered from one block outside its loop, and by `goto`
    // edges only, each an entry of every phi (the lowering lets go on
    // those edges).
    let preds = cfg.preds(h);
    let outside: Vec<Block> = preds
        .iter()
        .copied()
        .filter(|&b| dom.is_reachable(b) && !dom.dominates(h, b))
        .collect();
    let [pre] = outside.as_slice() else {
        return out;
    };
    if preds
        .iter()
        .any(|&b| func.blocks[b].term != Some(Terminator::Goto(h)))
    {
        return out;
    }
    let body = loop_body(cfg, dom, h);
    // Candidates: every `[T]` phi of the header not owned, with an entry
    // per edge, entered from outside with a value.
    let mut cands: Vec<(Inst, Value, Vec<Operand>)> = Vec::new();
    for &inst in &func.blocks[h].insts {
        let data = &func.insts[inst];
        let (InstKind::Phi { entries }, Some(p)) = (&data.kind, data.result) else {
            continue;
        };
        if owned.contains(&p) || !matches!(func.values.get(p).map(|d| &d.ty), Some(Type::Array(_)))
        {
            continue;
        }
        let whole = entries.len() == preds.len()
            && preds.iter().all(|b| entries.iter().any(|(e, _)| e == b));
        let entry = entries.iter().find(|(b, _)| b == pre).map(|(_, op)| *op);
        if !whole || !matches!(entry, Some(Operand::Value(_))) {
            continue;
        }
        let latches: Vec<Operand> = entries
            .iter()
            .filter(|(b, _)| b != pre && dom.is_reachable(*b))
            .map(|(_, op)| *op)
            .collect();
        if !latches.is_empty() {
            cands.push((inst, p, latches));
        }
    }
    if cands.is_empty() || cands.len() > MAX_CANDIDATES {
        return out;
    }
    let header_phis: HashSet<Value> = cands.iter().map(|&(_, p, _)| p).collect();
    let mut brings: HashMap<Value, Brings> = HashMap::default();
    for (_, p, latches) in &cands {
        if let Some(b) = brought(func, dom, (makers, phis), (h, &body), &header_phis, latches) {
            brings.insert(*p, b);
        }
    }
    // A phi whose latch brings another header phi goes with it: drop those
    // bringing one that is out, until none is.
    loop {
        let out_now: Vec<Value> = brings
            .iter()
            .filter(|(_, b)| b.headers.iter().any(|q| !brings.contains_key(q)))
            .map(|(&p, _)| p)
            .collect();
        if out_now.is_empty() {
            break;
        }
        for p in out_now {
            brings.remove(&p);
        }
    }
    // The sets: phis joined by a header phi, a site or a phi of the body
    // they share.
    let order: Vec<Value> = cands
        .iter()
        .map(|&(_, p, _)| p)
        .filter(|p| brings.contains_key(p))
        .collect();
    let mut group: HashMap<Value, usize> = order.iter().enumerate().map(|(k, &p)| (p, k)).collect();
    let mut changed = true;
    while changed {
        changed = false;
        for &p in &order {
            let b = &brings[&p];
            for &q in &order {
                let c = &brings[&q];
                let joined = b.headers.contains(&q)
                    || b.sites.iter().any(|s| c.sites.contains(s))
                    || b.phis
                        .iter()
                        .any(|(_, v, _)| c.phis.iter().any(|(_, w, _)| w == v));
                let (gp, gq) = (group[&p], group[&q]);
                if joined && gp != gq {
                    let g = gp.min(gq);
                    group.insert(p, g);
                    group.insert(q, g);
                    changed = true;
                }
            }
        }
    }
    let mut sets: Vec<Vec<Value>> = Vec::new();
    for k in 0..order.len() {
        let set: Vec<Value> = order.iter().copied().filter(|p| group[p] == k).collect();
        // One phi alone is a web when its latch brings a phi of the body
        // (a choosing phi whose body phis are pushed, which `choosing`
        // refuses).
        let alone = |p: &Value| !brings[p].phis.is_empty();
        if set.len() >= 2 || set.first().is_some_and(alone) {
            sets.push(set);
        }
    }
    for set in sets {
        out.extend(web_of(
            (cfg, dom),
            walk,
            makers,
            (h, *pre, &body),
            &set,
            &brings,
            &cands,
        ));
    }
    out
}

/// What `latches` bring through phis of the loop's body (`body` of header
/// `h`): `None` when anything but such phis, phis of `header_phis` and
/// sites of the body made in blocks `h` strictly dominates.
pub(super) fn brought(
    func: &Func,
    dom: &DominatorTree,
    (makers, phis): (&HashMap<Value, Block>, &ArrayPhis),
    (h, body): (Block, &HashSet<Block>),
    header_phis: &HashSet<Value>,
    latches: &[Operand],
) -> Option<Brings> {
    let mut b = Brings {
        phis: Vec::new(),
        sites: Vec::new(),
        headers: Vec::new(),
    };
    let inside = |x: Block| x != h && dom.dominates(h, x) && body.contains(&x);
    let mut work: Vec<Operand> = latches.to_vec();
    while let Some(op) = work.pop() {
        let Operand::Value(v) = op else {
            return None;
        };
        if header_phis.contains(&v) {
            if !b.headers.contains(&v) {
                b.headers.push(v);
            }
            continue;
        }
        if let Some(&x) = makers.get(&v) {
            if !inside(x) {
                return None;
            }
            if !b.sites.contains(&v) {
                b.sites.push(v);
            }
            continue;
        }
        let &(i, x) = phis.get(&v)?;
        if !inside(x) {
            return None;
        }
        if b.phis.iter().any(|&(_, w, _)| w == v) {
            continue;
        }
        b.phis.push((i, v, x));
        let InstKind::Phi { entries } = &func.insts[i].kind else {
            return None;
        };
        work.extend(
            entries
                .iter()
                .filter(|(e, _)| dom.is_reachable(*e))
                .map(|(_, op)| *op),
        );
    }
    Some(b)
}

/// The set `set` of header `h` (entered from `pre`) as a sharing web, if
/// its values stay inside as a choosing phi's do ("Sharing webs").
fn web_of(
    (cfg, dom): (&ControlFlowGraph, &DominatorTree),
    walk: &mut Walk<'_>,
    makers: &HashMap<Value, Block>,
    (h, pre, body): (Block, Block, &HashSet<Block>),
    set: &[Value],
    brings: &HashMap<Value, Brings>,
    cands: &[(Inst, Value, Vec<Operand>)],
) -> Option<Owner> {
    let mut web: Vec<(Inst, Value, Block)> = Vec::new();
    let mut sites: Vec<Value> = Vec::new();
    for p in set {
        let b = &brings[p];
        for &w in &b.phis {
            if !web.iter().any(|&(_, v, _)| v == w.1) {
                web.push(w);
            }
        }
        for &s in &b.sites {
            if !sites.contains(&s) {
                sites.push(s);
            }
        }
    }
    // Each runs at most once between two entries of the header.
    if sites.is_empty()
        || set.len() + sites.len() > MAX_WEB
        || any_repeats(cfg, h, (&web, &sites), makers)
    {
        return None;
    }
    let heads: Vec<Inst> = set
        .iter()
        .filter_map(|p| cands.iter().find(|(_, q, _)| q == p).map(|&(i, _, _)| i))
        .collect();
    let insts: Vec<Inst> = web
        .iter()
        .map(|&(i, _, _)| i)
        .chain(heads.iter().copied())
        .collect();
    let none: HashSet<Block> = HashSet::default();
    let mut leaves = Leaving::default();
    let mut pushed = false;
    for &p in set {
        pushed |= walk.reach(
            p,
            Some((h, dom)),
            Some((&insts, &none, &[])),
            Some((&mut leaves, body)),
        )?;
    }
    // A phi of the body pushed as it is: its pushes are worded as the
    // header phis' are ("Pushed body phis").
    for &(_, q, _) in &web {
        pushed |= walk.reach(
            q,
            Some((h, dom)),
            Some((&insts, &none, &[])),
            Some((&mut leaves, body)),
        )?;
    }
    for &s in &sites {
        let b = makers[&s];
        let after = unrepeated(cfg, h, b);
        pushed |= walk.reach(
            s,
            Some((b, dom)),
            Some((&insts, &after, &[])),
            Some((&mut leaves, body)),
        )?;
    }
    let (&first, others) = set.split_first()?;
    let inst = heads[0];
    Some(Owner {
        phi: first,
        letgo: if pushed {
            super::Letgo::Release
        } else {
            super::Letgo::Free
        },
        from: Vec::new(),
        latch: None,
        // The phis after the loop its phis enter as they are, when that is
        // the only way its arrays leave ("Webs leaving into a phi never
        // pushed").
        into: if leaves.left {
            Vec::new()
        } else {
            leaves.into.iter().map(|&(q, _)| q).collect()
        },
        chain: None,
        in_chain: false,
        either: None,
        quiet: false,
        web: Some(Web {
            phi: first,
            inst,
            header: h,
            outside: pre,
            sites,
            others: others
                .iter()
                .zip(&heads[1..])
                .map(|(&p, &i)| (p, i))
                .collect(),
            body: web.iter().map(|&(_, q, _)| q).collect(),
            leaves: leaves.any(),
            shared: true,
        }),
    })
}
