//! Arrays a loop replaces on some iterations only (docs/reverse.md, "Arrays
//! replaced on some iterations"): a `[f64]` header phi whose entries from
//! inside the loop are, through phis inside the loop, arrays made in the
//! loop (`copy`, `zeros`, `alloc`) or the phi itself, as in `if better { a
//! = b; }`. Its array at a stretch's start may be the one that entered the
//! loop, whose shadow is the one that entered (which code after the loop
//! may already have given a cotangent), or one made in some iteration
//! before, whose shadow a stretch can start afresh. Which of the two is not
//! known before the run, so, when checkpointing may be asked for, each such
//! phi gets a `bool` phi beside it saying whether the loop has replaced the
//! array since it entered: `false` from outside, `true` where the array is
//! made, the phi's own from where the array is kept, with a `bool` phi
//! beside each phi on the way. Being a header phi, the flag is part of
//! every snapshot; a replay starts the array's shadow from the entering one
//! or a fresh zero array by it, and the forward sweep's exit blocks choose
//! the shadow the array leaves with by it.
//!
//! Assumes a verified, normalised primal and its shape. Guarantees: adds
//! phis only (one per marked phi and per phi on its way, each after its
//! block's phis); the primal computes what it did.

use super::super::ctx::Shape;
use irad_ir::{Block, Const, Func, Inst, InstKind, Operand, Scalar, Type, Value, ValueDef};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// A header phi of an array replaced on some iterations only.
#[derive(Clone, Debug)]
pub(in crate::reverse) struct Replaced {
    /// The `bool` header phi beside it: whether the loop has replaced the
    /// array since it entered.
    pub flag: Value,
    /// The statements making the arrays that may replace it.
    pub made: Vec<Value>,
    /// The phis on the way from those statements to the header phi, each
    /// with its own flag (whether the array it holds is one the loop made)
    /// and a second one (whether the array it holds was made in the current
    /// iteration, not the one the iteration started with).
    pub phis: HashMap<Value, (Value, Value)>,
}

/// One phi found: its web (phis on the way, arrays made) and whether it
/// needs a flag.
struct Web {
    phi: Value,
    phis: Vec<Value>,
    made: Vec<Value>,
}

/// Marks, in every loop of `shape` (the shape of `src`), the `[f64]` header
/// phis of arrays replaced on some iterations only, whose webs share
/// nothing with another header phi's of the same loop; returns them, each
/// with its flag (empty: `src` is unchanged).
pub(in crate::reverse) fn mark(
    src: &mut Func,
    shape: &Shape,
    fresh: &crate::reverse::fresh::Fresh,
) -> HashMap<Value, Replaced> {
    let mut out = HashMap::default();
    let index = shape.bb.index();
    let places = src.inst_places();
    let pos_of = |v: Value| match src.values[v].def {
        ValueDef::Inst(d) => (*places.get(d)).and_then(|(b, _)| index[b]),
        ValueDef::Param(_) => None,
    };
    let mut webs: Vec<(Block, Web)> = Vec::new();
    for k in 0..shape.loops.count() {
        let l = shape.loops.of(k);
        let head = &shape.bb.blocks[l.header];
        let inside = |v: Value| pos_of(v).is_some_and(|p| l.contains(p));
        let mut found: Vec<Web> = Vec::new();
        for &inst in &head.stmts {
            let data = &src.insts[inst];
            let (InstKind::Phi { entries }, Some(r)) = (&data.kind, data.result) else {
                continue;
            };
            if src.values[r].ty != Type::Array(Scalar::F64) {
                continue;
            }
            let latches: Vec<Operand> = entries
                .iter()
                .filter(|(p, _)| index[*p].is_some_and(|p| l.contains(p)))
                .map(|&(_, op)| op)
                .collect();
            let in_header = |v| pos_of(v) == Some(l.header);
            if let Some(web) = web_of(src, fresh, r, latches, (&|v| inside(v), &in_header)) {
                found.push(web);
            }
        }
        // Two header phis sharing a phi or an array: neither is marked
        // (checkpointing refuses the loop).
        let mut count: HashMap<Value, usize> = HashMap::default();
        for w in &found {
            for &v in w.phis.iter().chain(&w.made) {
                *count.entry(v).or_default() += 1;
            }
        }
        for w in found {
            let shared = w.phis.iter().chain(&w.made).any(|v| count[v] > 1);
            if !shared {
                webs.push((head.id, w));
            }
        }
    }
    for (head, w) in webs {
        let mut flags = add_flags(src, head, &w);
        let Some((flag, _)) = flags.remove(&w.phi) else {
            continue;
        };
        let phis = flags
            .into_iter()
            .filter_map(|(p, (f, t))| Some((p, (f, t?))))
            .collect();
        out.insert(
            w.phi,
            Replaced {
                flag,
                made: w.made,
                phis,
            },
        );
    }
    out
}

/// The web of header phi `r` entered from its latches with `latches`:
/// `None` unless every operand is, through phis inside the loop (`inside`)
/// but not in its header (`in_header`), an array made in the loop or `r`,
/// and one phi or `r` is on the way (else every latch brings an array made
/// afresh, which needs no flag).
fn web_of(
    src: &Func,
    fresh: &crate::reverse::fresh::Fresh,
    r: Value,
    latches: Vec<Operand>,
    (inside, in_header): (&dyn Fn(Value) -> bool, &dyn Fn(Value) -> bool),
) -> Option<Web> {
    let mut web = Web {
        phi: r,
        phis: Vec::new(),
        made: Vec::new(),
    };
    let mut itself = false;
    let mut seen: HashSet<Value> = HashSet::default();
    let mut work = latches;
    while let Some(op) = work.pop() {
        let Operand::Value(v) = op else { return None };
        if v == r {
            itself = true;
            continue;
        }
        if !seen.insert(v) {
            continue;
        }
        let ValueDef::Inst(d) = src.values[v].def else {
            return None;
        };
        if !inside(v) {
            return None;
        }
        match &src.insts[d].kind {
            _ if super::makes_array(src, fresh, d) => web.made.push(v),
            InstKind::Phi { entries } if !in_header(v) => {
                web.phis.push(v);
                work.extend(entries.iter().map(|&(_, op)| op));
            }
            _ => return None,
        }
    }
    (itself || !web.phis.is_empty()).then_some(web)
}

/// Adds the flags of web `w` (its header phi in block `head`): a `bool`
/// phi beside the header phi and beside each phi on the way, and a second
/// one beside each phi on the way (made in the current iteration). Returns
/// them, by the phi each is beside.
fn add_flags(src: &mut Func, head: Block, w: &Web) -> HashMap<Value, (Value, Option<Value>)> {
    let places = src.inst_places();
    let block_of = |v: Value| -> Option<Block> {
        let ValueDef::Inst(d) = src.values[v].def else {
            return None;
        };
        (*places.get(d)).map(|(b, _)| b)
    };
    let blocks: Vec<Option<Block>> = w.phis.iter().map(|&p| block_of(p)).collect();
    // Whether the loop has replaced the array since it entered (the header
    // phi's and each phi's on the way), and whether the array a phi on the
    // way holds was made in the current iteration.
    let mut flags: HashMap<Value, Value> = HashMap::default();
    let mut this: HashMap<Value, Value> = HashMap::default();
    let at = std::iter::once((w.phi, Some(head))).chain(w.phis.iter().copied().zip(blocks));
    for (p, block) in at {
        let Some(block) = block else { continue };
        let Some(flag) = insert_phi(src, block) else {
            continue;
        };
        flags.insert(p, flag);
        if p != w.phi
            && let Some(t) = insert_phi(src, block)
        {
            this.insert(p, t);
        }
    }
    let made: HashSet<Value> = w.made.iter().copied().collect();
    let fill = |src: &mut Func, p: Value, flag: Value, of: &HashMap<Value, Value>, entered| {
        let ValueDef::Inst(d) = src.values[p].def else {
            return;
        };
        let InstKind::Phi { entries } = &src.insts[d].kind else {
            return;
        };
        let entries = entries
            .iter()
            .map(|&(pred, op)| {
                let to = match op {
                    Operand::Value(v) if made.contains(&v) => Operand::from(true),
                    Operand::Value(v) if v == w.phi && p != w.phi => match entered {
                        // Made in this iteration: not the array the
                        // iteration started with.
                        true => Operand::from(false),
                        false => of
                            .get(&v)
                            .map_or(Operand::from(false), |&f| Operand::Value(f)),
                    },
                    Operand::Value(v) => match of.get(&v) {
                        Some(&f) => Operand::Value(f),
                        // An entry from outside the loop (only the header
                        // phi's): the array that entered.
                        None => Operand::from(false),
                    },
                    Operand::Const(_) => Operand::Const(Const::Bool(false)),
                };
                (pred, to)
            })
            .collect();
        if let Some(fd) = flag_inst(src, flag) {
            src.insts[fd].kind = InstKind::Phi { entries };
        }
    };
    for (&p, &flag) in &flags {
        fill(src, p, flag, &flags, false);
    }
    for (&p, &t) in &this {
        fill(src, p, t, &this, true);
    }
    flags
        .into_iter()
        .map(|(p, f)| (p, (f, this.get(&p).copied())))
        .collect()
}

/// A new `bool` phi without entries after the phis of `block`.
fn insert_phi(src: &mut Func, block: Block) -> Option<Value> {
    let kind = InstKind::Phi {
        entries: Default::default(),
    };
    let (inst, r) = src.push_inst(block, kind, Some(Type::Bool), None);
    let insts = &mut src.blocks[block].insts;
    insts.pop();
    let at = insts
        .iter()
        .take_while(|&&i| matches!(src.insts[i].kind, InstKind::Phi { .. }))
        .count();
    insts.insert(at, inst);
    r
}

/// The statement defining `v`.
fn flag_inst(src: &Func, v: Value) -> Option<Inst> {
    match src.values[v].def {
        ValueDef::Inst(d) => Some(d),
        ValueDef::Param(_) => None,
    }
}
