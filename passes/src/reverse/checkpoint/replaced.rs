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
//! A way may also take an array of another phi replaced on some iterations
//! only, or of a phi on that one's way (an accepted step, then `keep =
//! r`): that phi's flags give the entries there, and a `select` negating
//! its replaced flag the held flag's.
//!
//! Assumes a verified, normalised primal and its shape. Guarantees: adds
//! `bool` phis (one to three per marked phi and per phi on its way, two
//! beside a header phi every latch of which makes its array when a way
//! takes it, each after its block's phis) and, per way taking a phi
//! replaced on some iterations or one on its way, one `select` after the
//! phis of that phi's block; the primal computes what it did.

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
    /// only when it holds an array the loop made. Third, where the other
    /// phi is itself replaced on some iterations only (this takes it or a
    /// phi on its way: an accepted step, then `keep = r`), that phi: at
    /// the header this may hold the array it holds.
    pub held: Option<(Value, Value, Option<Value>)>,
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

/// What a web's `foreign` value is: a header phi every latch of which
/// brings an array made in the loop, a header phi replaced on some
/// iterations only (with a web of its own), or a phi on such a one's way.
#[derive(Clone, Copy)]
enum Source {
    Afresh(Value),
    Replaced(Value),
    OnWay(Value),
}

impl Source {
    /// The header phi whose entering array the value may hold.
    fn header(self) -> Value {
        match self {
            Source::Afresh(q) | Source::Replaced(q) | Source::OnWay(q) => q,
        }
    }
}

/// Marks, in every loop of `shape` (the shape of `src`), the `[f64]` header
/// phis of arrays replaced on some iterations only, whose webs share
/// nothing with another header phi's of the same loop; returns them, each
/// with its flag (empty: `src` is unchanged). The webs that take no other
/// header phi's array are found first; a web may then take (`foreign`) the
/// array of a header phi every latch of which brings a new array, or of
/// one of those webs' header phis or phis on their way (`keep = r`).
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
    // By loop: the webs taking no other phi's array, then those that do,
    // each with what it takes.
    type Taking = Vec<(Web, Source)>;
    let mut webs: Vec<(Block, Vec<Web>, Taking)> = Vec::new();
    for k in 0..shape.loops.count() {
        let l = shape.loops.of(k);
        let head = &shape.bb.blocks[l.header];
        let inside = |v: Value| pos_of(v).is_some_and(|p| l.contains(p));
        let in_header = |v| pos_of(v) == Some(l.header);
        let from_inside = |p: &Block| index[*p].is_some_and(|p| l.contains(p));
        let phis: Vec<(Value, Vec<(Block, Operand)>)> = head
            .stmts
            .iter()
            .filter_map(
                |&inst| match (&src.insts[inst].kind, src.insts[inst].result) {
                    (InstKind::Phi { entries }, Some(r))
                        if src.values[r].ty == Type::Array(Scalar::F64) =>
                    {
                        Some((r, entries.iter().copied().collect()))
                    }
                    _ => None,
                },
            )
            .collect();
        let find = |r: Value, entries: &[(Block, Operand)], foreign: &ValueTest| {
            let latches: Vec<Operand> = entries
                .iter()
                .filter(|(p, _)| from_inside(p))
                .map(|&(_, op)| op)
                .collect();
            let within: [&ValueTest; 3] = [&|v| inside(v), &in_header, foreign];
            let mut web = web_of(src, fresh, r, latches, within)?;
            web.latches = entries
                .iter()
                .map(|&(p, _)| p)
                .filter(|p| from_inside(p))
                .collect();
            Some(web)
        };
        let plain: Vec<Web> = phis
            .iter()
            .filter_map(|(r, entries)| find(*r, entries, &|_| false))
            .collect();
        let plain = unshared(plain, (&[], true), &|v| v);
        // What a web may take: header phis every latch of which brings a
        // new array, and the plain webs' header phis and phis on the way.
        let mut sources: HashMap<Value, Source> = HashMap::default();
        for (q, entries) in &phis {
            let afresh = entries
                .iter()
                .filter(|(p, _)| from_inside(p))
                .all(|&(_, op)| match op {
                    Operand::Value(m) => {
                        inside(m)
                            && matches!(src.values[m].def, ValueDef::Inst(md)
                                if super::makes_array(src, fresh, md))
                    }
                    Operand::Const(_) => false,
                });
            if afresh {
                sources.insert(*q, Source::Afresh(*q));
            }
        }
        for w in &plain {
            sources.insert(w.phi, Source::Replaced(w.phi));
            for &p in &w.phis {
                sources.insert(p, Source::OnWay(w.phi));
            }
        }
        let taking: Vec<Web> = phis
            .iter()
            .filter(|(r, _)| !plain.iter().any(|w| w.phi == *r))
            .filter_map(|(r, entries)| {
                let other = |v: Value| v != *r && sources.contains_key(&v);
                find(*r, entries, &other).filter(|w| w.foreign.is_some())
            })
            .collect();
        let header_of = |v: Value| sources.get(&v).map_or(v, |s| s.header());
        let taking = unshared(taking, (&plain, false), &header_of)
            .into_iter()
            .filter_map(|w| {
                let s = w.foreign.and_then(|f| sources.get(&f).copied())?;
                Some((w, s))
            })
            .collect();
        webs.push((head.id, plain, taking));
    }
    for (head, plain, taking) in webs {
        // The flags of the plain webs first: a web taking one of their
        // arrays takes its flag.
        let mut flag_of: HashMap<Value, (Value, Option<Value>)> = HashMap::default();
        for w in plain {
            let (flags, _) = add_flags(src, head, &w, None);
            flag_of.extend(flags.iter().map(|(&p, &f)| (p, f)));
            if let Some((r, rep)) = replaced_of(w, flags, None) {
                out.insert(r, rep);
            }
        }
        for (w, source) in taking {
            // The source's flags: whether it holds an array the loop made,
            // whether it holds the one its header phi entered with, and,
            // for a phi on another's way, whether it holds one made in the
            // current iteration (a header phi's array never is).
            let flags = match source {
                Source::Afresh(q) => {
                    foreign_flags(src, head, q, &w.latches).map(|(ran, first)| (ran, first, None))
                }
                Source::Replaced(q) | Source::OnWay(q) => w
                    .foreign
                    .and_then(|f| flag_of.get(&f).copied())
                    .filter(|_| out.contains_key(&q))
                    .and_then(|(ran, this)| negation(src, ran).map(|first| (ran, first, this))),
            };
            let Some(flags) = flags else { continue };
            let (flags, held) = add_flags(src, head, &w, Some(flags));
            let alias = match source {
                Source::Afresh(_) => None,
                Source::Replaced(q) | Source::OnWay(q) => Some(q),
            };
            let held = held.map(|h| (source.header(), h, alias));
            if let Some((r, rep)) = replaced_of(w, flags, held) {
                out.insert(r, rep);
            }
        }
    }
    out
}

/// `webs` without those sharing a phi or an array with another of them or
/// with one of `others`, or taking the array of the same header phi as
/// another of them (`header_of` their `foreign` values): two phis holding
/// one array would need to know of each other. With `pairs`, two webs may
/// make one array between them (`if ok { r = t; if best { keep = t; } }`,
/// since session 36): the second to take it then knows of the first
/// (`Keepers::replaced` in `mod.rs`, which refuses three).
fn unshared(
    webs: Vec<Web>,
    (others, pairs): (&[Web], bool),
    header_of: &dyn Fn(Value) -> Value,
) -> Vec<Web> {
    let mut count: HashMap<Value, usize> = HashMap::default();
    let mut makers: HashMap<Value, Vec<Value>> = HashMap::default();
    for w in webs.iter().chain(others) {
        for &v in w.phis.iter().chain(&w.made) {
            *count.entry(v).or_default() += 1;
        }
        for &v in &w.made {
            makers.entry(v).or_default().push(w.phi);
        }
    }
    // An array made that the web of the phi whose array this one takes
    // makes too (`if better { r = keep; keep = t; } else { r = t; }`).
    let with_source = |w: &Web, v: Value| {
        let source = w.foreign.map(header_of);
        makers[&v].len() == 2 && makers[&v].iter().all(|&p| p == w.phi || Some(p) == source)
    };
    let most_made = if pairs { 2 } else { 1 };
    let mut taken: HashMap<Value, usize> = HashMap::default();
    for w in &webs {
        if let Some(f) = w.foreign {
            *taken.entry(header_of(f)).or_default() += 1;
        }
    }
    webs.into_iter()
        .filter(|w| {
            !w.phis.iter().any(|v| count[v] > 1)
                && !w
                    .made
                    .iter()
                    .any(|&v| count[&v] > most_made && !with_source(w, v))
                && !w.foreign.iter().any(|&f| taken[&header_of(f)] > 1)
        })
        .collect()
}

/// The marked phi of web `w` with its `flags` ([`add_flags`]) and, for one
/// taking another header phi's array, that phi, the flag saying it holds
/// the array that phi entered with, and the phi it may then be.
fn replaced_of(
    w: Web,
    mut flags: WebFlags,
    held: Option<(Value, Value, Option<Value>)>,
) -> Option<(Value, Replaced)> {
    let (flag, _) = flags.remove(&w.phi)?;
    let phis = flags
        .into_iter()
        .filter_map(|(p, (f, t))| Some((p, (f, t?))))
        .collect();
    Some((
        w.phi,
        Replaced {
            flag,
            made: w.made,
            phis,
            held,
        },
    ))
}

/// `select(flag, false, true)`, a new statement right after the phis of
/// the block defining `flag`: whether the array beside which `flag` is is
/// not one the loop made.
fn negation(src: &mut Func, flag: Value) -> Option<Value> {
    let block = (*src.inst_places().get(flag_inst(src, flag)?)).map(|(b, _)| b)?;
    let kind = InstKind::Prim {
        prim: irad_ir::Prim::Select,
        args: [
            Operand::Value(flag),
            Operand::from(false),
            Operand::from(true),
        ]
        .into(),
    };
    after_phis(src, block, kind)
}

/// The web of header phi `r` entered from its latches with `latches`:
/// `None` unless every operand is, through phis inside the loop (`inside`)
/// but not in its header (`in_header`), an array made in the loop, `r`, or
/// one other phi `afresh` accepts (another header phi, or a phi on another
/// web's way: not followed), and one phi or `r` is on the way (else every
/// latch brings an array made afresh, which needs no flag).
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
            // Another header phi's array, or one on its way: taken as it
            // is, not followed.
            InstKind::Phi { .. } if afresh(v) => match web.foreign {
                None => web.foreign = Some(v),
                Some(_) => return None,
            },
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
/// them, by the phi each is beside. Where the web takes another phi's
/// array (`w.foreign`), `foreign` gives that phi's flags: whether it holds
/// an array the loop made (the entry of the first flag there), whether it
/// holds the array its header phi entered with (of the third flag, beside
/// the header phi and each phi on the way, saying so of them; the header
/// phi's is returned too), and, for a phi on another's way, whether it
/// holds one made in the current iteration (of the second flag; `false`
/// without it).
fn add_flags(
    src: &mut Func,
    head: Block,
    w: &Web,
    foreign: Option<(Value, Value, Option<Value>)>,
) -> (WebFlags, Option<Value>) {
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
    let (ran, first, now) = match foreign {
        Some((ran, first, now)) => (
            Operand::Value(ran),
            Operand::Value(first),
            now.map_or(Operand::from(false), Operand::Value),
        ),
        None => (
            Operand::from(false),
            Operand::from(false),
            Operand::from(false),
        ),
    };
    // The replaced flags; whether an array was made in this iteration (a
    // header phi's array is the one the iteration started with, a phi on
    // another's way says by its own flag); whether it is the array the
    // other phi entered with.
    let all = [
        (&flags, Operand::from(true), ran, false),
        (&this, Operand::from(true), now, true),
        (&held, Operand::from(false), first, false),
    ];
    for (of, made, foreign, entered) in all {
        let how = Fill {
            of,
            made,
            foreign,
            entered,
        };
        for (&p, &f) in of {
            fill(src, p, f, &how);
        }
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
    after_phis(src, block, kind)
}

/// A new statement `kind` of type `bool` in `block`, after its phis.
fn after_phis(src: &mut Func, block: Block, kind: InstKind) -> Option<Value> {
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
