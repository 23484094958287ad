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
//! The way may also take another header phi's array, one whose every latch
//! brings a new array (`if better { keep = r; } r = step(r);`, since
//! session 34): that array is one the loop made after the first iteration
//! only, and in the first it is the one that phi entered with. Two `bool`
//! header phis beside that phi (an iteration ran; none did) give the flags
//! their entries there, and a third flag beside the phi and each phi on its
//! way says whether it holds the array the other phi entered with.
//!
//! Assumes a verified, normalised primal and its shape. Guarantees: adds
//! `bool` phis only (one to three per marked phi and per phi on its way,
//! two beside a phi whose array it takes, each after its block's phis);
//! the primal computes what it did.

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
    /// For a phi that takes, on some paths, the array another header phi
    /// holds (`if better { keep = r; } r = step(r);`, since session 34):
    /// that phi, whose every latch brings an array the loop made, and the
    /// `bool` header phi beside this one saying whether it holds the array
    /// that phi entered the loop with (taken in the first iteration),
    /// whose shadow is that phi's entering shadow. Its flag says "replaced"
    /// only when it holds an array the loop made.
    pub held: Option<(Value, Value)>,
}

/// A test of a value.
type ValueTest<'a> = dyn Fn(Value) -> bool + 'a;

/// The flags of a web's phis: the replaced flag of each, and beside a phi
/// on the way the flag saying it holds an array made in the iteration.
type WebFlags = HashMap<Value, (Value, Option<Value>)>;

/// One phi found: its web (phis on the way, arrays made, the other header
/// phi it takes the array of) and whether it needs a flag.
struct Web {
    phi: Value,
    phis: Vec<Value>,
    made: Vec<Value>,
    foreign: Option<Value>,
    /// The blocks of the loop that jump to its header.
    latches: Vec<Block>,
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
            // Another `[f64]` header phi every latch of which brings an
            // array made in the loop (`r = step(r)`): a phi may take its
            // array on some paths.
            let afresh = |v: Value| {
                let ValueDef::Inst(d) = src.values[v].def else {
                    return false;
                };
                let InstKind::Phi { entries } = &src.insts[d].kind else {
                    return false;
                };
                v != r
                    && src.values[v].ty == Type::Array(Scalar::F64)
                    && in_header(v)
                    && entries
                        .iter()
                        .filter(|(p, _)| index[*p].is_some_and(|p| l.contains(p)))
                        .all(|&(_, op)| match op {
                            Operand::Value(m) => {
                                inside(m)
                                    && matches!(src.values[m].def, ValueDef::Inst(md)
                                        if super::makes_array(src, fresh, md))
                            }
                            Operand::Const(_) => false,
                        })
            };
            let within: [&ValueTest; 3] = [&|v| inside(v), &in_header, &afresh];
            if let Some(mut web) = web_of(src, fresh, r, latches, within) {
                web.latches = entries
                    .iter()
                    .map(|&(p, _)| p)
                    .filter(|p| index[*p].is_some_and(|p| l.contains(p)))
                    .collect();
                found.push(web);
            }
        }
        // Two header phis sharing a phi, an array or the phi whose array
        // they take: neither is marked (checkpointing refuses the loop).
        let mut count: HashMap<Value, usize> = HashMap::default();
        for w in &found {
            for &v in w.phis.iter().chain(&w.made).chain(&w.foreign) {
                *count.entry(v).or_default() += 1;
            }
        }
        for w in found {
            let shared = w
                .phis
                .iter()
                .chain(&w.made)
                .chain(&w.foreign)
                .any(|v| count[v] > 1);
            if !shared {
                webs.push((head.id, w));
            }
        }
    }
    for (head, w) in webs {
        let (mut flags, held) = add_flags(src, head, &w);
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
                held: w.foreign.zip(held),
            },
        );
    }
    out
}

/// The web of header phi `r` entered from its latches with `latches`:
/// `None` unless every operand is, through phis inside the loop (`inside`)
/// but not in its header (`in_header`), an array made in the loop, `r`, or
/// one other header phi `afresh` accepts, and one phi or `r` is on the way
/// (else every latch brings an array made afresh, which needs no flag).
fn web_of(
    src: &Func,
    fresh: &crate::reverse::fresh::Fresh,
    r: Value,
    latches: Vec<Operand>,
    [inside, in_header, afresh]: [&ValueTest; 3],
) -> Option<Web> {
    let mut web = Web {
        phi: r,
        phis: Vec::new(),
        made: Vec::new(),
        foreign: None,
        latches: Vec::new(),
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
            InstKind::Phi { .. } if afresh(v) && web.foreign.is_none() => web.foreign = Some(v),
            _ => return None,
        }
    }
    (itself || !web.phis.is_empty()).then_some(web)
}

/// Adds the flags of web `w` (its header phi in block `head`): a `bool`
/// phi beside the header phi and beside each phi on the way, and a second
/// one beside each phi on the way (made in the current iteration). Returns
/// them, by the phi each is beside. Where the web takes another header
/// phi's array (`w.foreign`), that phi holds an array the loop made after
/// the first iteration only: two `bool` header phis beside it say so (an
/// iteration ran; none did), and a third flag beside the header phi and
/// each phi on the way says whether it holds the array the other phi
/// entered with; the header phi's is returned too.
fn add_flags(src: &mut Func, head: Block, w: &Web) -> (WebFlags, Option<Value>) {
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
    let mut held: HashMap<Value, Value> = HashMap::default();
    let at: Vec<(Value, Option<Block>)> = std::iter::once((w.phi, Some(head)))
        .chain(w.phis.iter().copied().zip(blocks))
        .collect();
    for &(p, block) in &at {
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
        if w.foreign.is_some()
            && let Some(h) = insert_phi(src, block)
        {
            held.insert(p, h);
        }
    }
    // The other phi's two flags: whether an iteration ran (its array is
    // one the loop made), and whether none did (its array is the one it
    // entered with).
    let foreign = match w.foreign {
        Some(q) => foreign_flags(src, head, q, &w.latches),
        None => None,
    };
    let made: HashSet<Value> = w.made.iter().copied().collect();
    // Each flag's entries: what a made array gives, what the other phi's
    // array gives, and whether `w.phi` means the array the iteration
    // started with (not made in it).
    struct Fill<'a> {
        of: &'a HashMap<Value, Value>,
        made: Operand,
        foreign: Operand,
        entered: bool,
    }
    let fill = |src: &mut Func, p: Value, flag: Value, how: &Fill| {
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
                    Operand::Value(v) if made.contains(&v) => how.made,
                    Operand::Value(v) if Some(v) == w.foreign => how.foreign,
                    Operand::Value(v) if v == w.phi && p != w.phi => match how.entered {
                        // Made in this iteration: not the array the
                        // iteration started with.
                        true => Operand::from(false),
                        false => how
                            .of
                            .get(&v)
                            .map_or(Operand::from(false), |&f| Operand::Value(f)),
                    },
                    Operand::Value(v) => match how.of.get(&v) {
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
    let (ran, first) = match foreign {
        Some((ran, first)) => (Operand::Value(ran), Operand::Value(first)),
        None => (Operand::from(false), Operand::from(false)),
    };
    let replaced = Fill {
        of: &flags,
        made: Operand::from(true),
        foreign: ran,
        entered: false,
    };
    for (&p, &flag) in &flags {
        fill(src, p, flag, &replaced);
    }
    // The other phi's array is the one the iteration started with.
    let current = Fill {
        of: &this,
        made: Operand::from(true),
        foreign: Operand::from(false),
        entered: true,
    };
    for (&p, &t) in &this {
        fill(src, p, t, &current);
    }
    let entering = Fill {
        of: &held,
        made: Operand::from(false),
        foreign: first,
        entered: false,
    };
    for (&p, &h) in &held {
        fill(src, p, h, &entering);
    }
    let out = flags
        .iter()
        .map(|(&p, &f)| (p, (f, this.get(&p).copied())))
        .collect();
    (out, held.get(&w.phi).copied())
}

/// Two `bool` phis beside header phi `q` in block `head`: whether an
/// iteration ran (`false` from outside the loop, `true` from its latches,
/// `latches`) and the opposite. `None` when `q` is no phi.
fn foreign_flags(
    src: &mut Func,
    head: Block,
    q: Value,
    latches: &[Block],
) -> Option<(Value, Value)> {
    let d = flag_inst(src, q)?;
    let InstKind::Phi { entries } = &src.insts[d].kind else {
        return None;
    };
    let preds: Vec<Block> = entries.iter().map(|&(p, _)| p).collect();
    let ran = insert_phi(src, head)?;
    let first = insert_phi(src, head)?;
    for (flag, inside) in [(ran, true), (first, false)] {
        let entries = preds
            .iter()
            .map(|p| (*p, Operand::from(latches.contains(p) == inside)))
            .collect();
        let fd = flag_inst(src, flag)?;
        src.insts[fd].kind = InstKind::Phi { entries };
    }
    Some((ran, first))
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
