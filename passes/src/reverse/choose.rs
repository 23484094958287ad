//! What the forward sweep records and what the pullback recomputes: the
//! decisions behind a [`TapePlan`](super::plan::TapePlan) (docs/reverse.md,
//! "What is recorded").
//!
//! The rules name the values of the forward sweep each pullback reads. For
//! each block, each of those values is obtained in the reverse of that block
//! in the cheapest way that is sound:
//! - the counter of a loop run backwards by counting ([`super::loops`]) is
//!   counted back, not recorded;
//! - a value defined before a single-exit loop and read inside it is
//!   recorded once per run of the loop, at its exit (and so on outwards),
//!   and a parameter or a value of a block that runs once is recorded once
//!   per call;
//! - a value defined in the same block by a cheap pure primitive whose
//!   operands can all be had without recording anything more is recomputed
//!   (*cost model*: integer and float add, sub, mul, neg, abs, min, max,
//!   copysign, comparisons, `select`, logic, conversions, `getfield`,
//!   `length` and array reads count one each; a recomputation may cost at
//!   most [`BUDGET`] of them and nest at most [`DEPTH`] deep, counted from
//!   the value a pullback reads, so chains of recomputed values are cut by a
//!   record every [`DEPTH`] links; division, square roots and
//!   transcendental functions are never recomputed; a block of more than
//!   [`MAX_BLOCK`] statements records instead);
//! - an array read (`arrayref`) is recomputed, that is, read again, only
//!   when the array is in the same state when the pullback reads it: no
//!   statement from the read to the last reader in the block writes the
//!   array's class ([`super::memory`]) (for a read in an earlier block of the
//!   same iteration: no statement at all writes it), and every statement of the function
//!   that writes that class restores it in its pullback (the rules of the
//!   primitives and the pieces of user functions do; registered rules of
//!   user functions and calls through function values are not trusted to);
//! - everything else is recorded, once per block execution.
//!
//! Assumes the forward parts of the statements have been emitted (`fwd`)
//! with their end positions (`fend`). Guarantees: every value a pullback
//! reads is either recorded at a site the pullback can pop before that
//! read, recomputed from values that are, or a counter; the decisions are
//! deterministic (blocks in position order, values in order of appearance).

use super::ctx::{Derivation, How, Stmt};
use super::plan::{CountedLoop, Recompute, def_blocks};
use crate::optimise::rules::cse::{KeyOp, key_op};
use irad_ir::entity::SecondaryMap;
use irad_ir::{Block, Func, Inst, InstKind, Operand, Prim, Value};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use smallvec::SmallVec;
use std::collections::BinaryHeap;

/// The most primitives one recomputation may take.
pub const BUDGET: u32 = 8;
/// How deep a recomputation may nest.
pub const DEPTH: u32 = 6;
/// The longest block (primal statements) whose reverse recomputes: longer
/// ones record, because recomputing lengthens live ranges in one huge
/// function, which Cranelift's register allocator pays for more than
/// linearly, and a block that long gains little (it is rarely a loop body).
pub const MAX_BLOCK: usize = 1000;

/// What the forward sweep hands to the plan.
pub(super) struct PlanInput<'a> {
    /// How each statement was differentiated and what it saves.
    pub stmts: &'a SecondaryMap<Inst, Option<Stmt>>,
    /// Where each statement's forward part ends in its block, if it stayed.
    pub fend: &'a SecondaryMap<Inst, Option<usize>>,
    /// The forward-sweep operand of each primal value.
    pub fval: &'a SecondaryMap<Value, Option<Operand>>,
    /// The forward sweep so far.
    pub fwd: &'a Func,
    /// Its block of each primal block, by position.
    pub fblock: &'a [Block],
}

/// The decisions: the values recorded, each with the block that reads it
/// and its last reader there (`None`: the block's end), the values
/// recomputed, and the loops counted.
pub(super) struct Chosen {
    /// (block position, last reader, value), in order of appearance.
    pub reads: Vec<(usize, Option<Inst>, Value)>,
    /// The values recomputed, by block.
    pub recomputed: Vec<Recompute>,
    /// Per single-exit loop of the shape, how it counts when it does.
    pub counted: Vec<Option<CountedLoop>>,
    /// The position of the block of the forward sweep defining each value.
    pub fdef: SecondaryMap<Value, Option<usize>>,
    /// The earlier value of the same block each value repeats (the same
    /// cheap primitive of the same operands; for array reads, with no write
    /// to the array's class in between), if any.
    pub canon: HashMap<Value, Value>,
}

/// The decisions for derivation `cx`.
pub(super) fn choose(cx: &Derivation<'_>, input: &PlanInput<'_>) -> Chosen {
    let fdef = def_blocks(input.fwd, input.fblock);
    let mut ch = Chooser::new(cx, input, fdef);
    for i in (0..cx.shape.n).filter(|&i| cx.shape.kept(i)) {
        ch.block(i);
    }
    // The counters' last values and starts are read where their loops exit.
    for k in 0..ch.counted.len() {
        let Some(c) = ch.counted[k].clone() else {
            continue;
        };
        let exit = cx.shape.loops.loops[k].exit;
        ch.outside(exit, c.iv);
        if let Operand::Value(v) = c.init {
            ch.outside(exit, v);
        }
    }
    Chosen {
        reads: ch.reads,
        recomputed: ch.recomputed,
        counted: ch.counted,
        fdef: ch.fdef,
        canon: ch.canon,
    }
}

/// The state of the decisions.
struct Chooser<'a, 'r> {
    cx: &'a Derivation<'r>,
    input: &'a PlanInput<'a>,
    fdef: SecondaryMap<Value, Option<usize>>,
    /// For each value of the forward sweep: its position in its block and
    /// the index of the primal statement whose forward part defines it.
    fpos: SecondaryMap<Value, Option<(usize, usize)>>,
    /// The primal value behind each forward-sweep value that is one.
    primal_of: HashMap<Value, Value>,
    /// The array classes some statement writes without restoring them.
    unsafe_classes: HashSet<u32>,
    /// The array classes some statement writes.
    written: HashSet<u32>,
    /// What each statement writes, by block position and statement index.
    writes: Vec<Vec<SmallVec<[u32; 2]>>>,
    /// The earlier value of the same block each value repeats, if any.
    canon: HashMap<Value, Value>,
    /// The reverse-postorder rank of each block.
    rank: Vec<usize>,
    counted: Vec<Option<CountedLoop>>,
    reads: Vec<(usize, Option<Inst>, Value)>,
    recorded: HashSet<(usize, Value)>,
    recomputed: Vec<Recompute>,
}

impl<'a, 'r> Chooser<'a, 'r> {
    fn new(
        cx: &'a Derivation<'r>,
        input: &'a PlanInput<'a>,
        fdef: SecondaryMap<Value, Option<usize>>,
    ) -> Chooser<'a, 'r> {
        let shape = &cx.shape;
        let mut fpos = SecondaryMap::new();
        for i in 0..shape.n {
            let stmts = &shape.bb.blocks[i].stmts;
            let ends: Vec<(usize, usize)> = stmts
                .iter()
                .enumerate()
                .filter_map(|(k, &s)| input.fend[s].map(|e| (k, e)))
                .collect();
            let mut e = 0;
            for (p, &inst) in input.fwd.blocks[input.fblock[i]].insts.iter().enumerate() {
                while e < ends.len() && ends[e].1 <= p {
                    e += 1;
                }
                let owner = ends.get(e).map_or(stmts.len(), |&(k, _)| k);
                if let Some(v) = input.fwd.insts[inst].result {
                    fpos.set(v, Some((p, owner)));
                }
            }
        }
        let mut primal_of = HashMap::default();
        for (v, _) in cx.src.values.iter() {
            if let Some(Operand::Value(f)) = input.fval[v] {
                primal_of.insert(f, v);
            }
        }
        // What each statement writes, by block position and statement index.
        let writes: Vec<Vec<SmallVec<[u32; 2]>>> = shape
            .bb
            .blocks
            .iter()
            .map(|b| {
                b.stmts
                    .iter()
                    .map(|&s| cx.classes.writes(&cx.src, s))
                    .collect()
            })
            .collect();
        let mut unsafe_classes = HashSet::default();
        let mut written = HashSet::default();
        for (b, ws) in shape.bb.blocks.iter().zip(&writes) {
            for (&inst, w) in b.stmts.iter().zip(ws) {
                written.extend(w.iter().copied());
                if !restores(input.stmts[inst].as_ref()) {
                    unsafe_classes.extend(w.iter().copied());
                }
            }
        }
        let mut rank = vec![usize::MAX; shape.n];
        for (k, &i) in shape.order.iter().enumerate() {
            rank[i] = k;
        }
        let classes = &cx.classes;
        let primal_class = |a: &Operand| match a {
            Operand::Value(a) => primal_of.get(a).map(|&p| classes.class(p)),
            Operand::Const(_) => None,
        };
        let mut canon = HashMap::default();
        for i in (0..shape.n).filter(|&i| shape.kept(i)) {
            repeats(input, i, &writes[i], &fpos, &primal_class, &mut canon);
        }
        let counted = shape
            .loops
            .loops
            .iter()
            .map(|l| {
                let c = l.counted.as_ref()?;
                let kept = [l.header, l.exit, c.pre, c.latch]
                    .iter()
                    .all(|&b| shape.kept(b));
                let iv = match input.fval[c.iv] {
                    Some(Operand::Value(v)) => v,
                    _ => return None,
                };
                let init = match c.init {
                    Operand::Const(k) => Operand::Const(k),
                    Operand::Value(v) => input.fval[v]?,
                };
                kept.then(|| CountedLoop {
                    header: shape.bb.blocks[l.header].id,
                    label: cx.label(l.header),
                    iv,
                    name: None,
                    init,
                    step: c.step,
                })
            })
            .collect();
        Chooser {
            cx,
            input,
            fdef,
            fpos,
            primal_of,
            unsafe_classes,
            written,
            writes,
            canon,
            rank,
            counted,
            reads: Vec::new(),
            recorded: HashSet::default(),
            recomputed: Vec::new(),
        }
    }

    /// The decisions for the values the pullbacks of block `i` read.
    fn block(&mut self, i: usize) {
        let stmts = &self.cx.shape.bb.blocks[i].stmts;
        // Values defined in this block, latest first; each with its last
        // reader (statement index) and order of appearance.
        let mut needs = Needs::default();
        let mut outside: Vec<Value> = Vec::new();
        for (k, &inst) in stmts.iter().enumerate() {
            let Some(st) = &self.input.stmts[inst] else {
                continue;
            };
            for op in &st.saved {
                if let Operand::Value(v) = op {
                    self.need(i, *v, k, &mut needs, &mut outside);
                }
            }
        }
        for v in outside {
            self.outside(i, v);
        }
        // How deep in a recomputation each value is wanted: a chain of
        // recomputed values is cut (recorded) at `DEPTH`, so that the pullback
        // never rebuilds a long stretch of the block at once.
        let mut depth: HashMap<Value, u32> = HashMap::default();
        while let Some((v, r)) = needs.pop_last() {
            let mut seen = Vec::new();
            let d = depth.get(&v).copied().unwrap_or(0);
            // `cost` is `None` for anything without a recipe.
            let recipe = (stmts.len() <= MAX_BLOCK
                && self
                    .cost(i, v, r, d, &needs, &mut seen)
                    .is_some_and(|c| c >= 1))
            .then(|| self.recipe(v))
            .flatten();
            if let Some((prim, args)) = recipe {
                let mut outside = Vec::new();
                for a in &args {
                    if let Operand::Value(u) = a {
                        let u = self.canonical(*u);
                        let e = depth.entry(u).or_insert(0);
                        *e = (*e).max(d + 1);
                        self.need(i, u, r, &mut needs, &mut outside);
                    }
                }
                for u in outside {
                    self.outside(i, u);
                }
                let from = self.from(v);
                self.recomputed.push(Recompute {
                    value: v,
                    name: None,
                    from,
                    block: self.cx.shape.bb.blocks[i].id,
                    label: self.cx.label(i),
                    prim,
                    args,
                });
            } else {
                let reader = stmts.get(r).copied();
                self.record(i, reader, v);
            }
        }
    }

    /// Notes that block `i`'s reverse reads `v` by statement index `r` at
    /// the latest: into `needs` when this block defines it, else `outside`.
    fn need(&self, i: usize, v: Value, r: usize, needs: &mut Needs, outside: &mut Vec<Value>) {
        let v = self.canonical(v);
        if self.is_counter(i, v) {
            return;
        }
        match (self.fdef[v], self.fpos[v]) {
            (Some(d), Some((p, _))) if self.cx.shape.same_iteration(d, i) => {
                needs.add((self.rank[d], p), v, r);
            }
            _ => {
                if !outside.contains(&v) {
                    outside.push(v);
                }
            }
        }
    }

    /// Block `i`'s reverse reads `v`, which another block (or the
    /// parameters) defines: a counter, recorded once per call, hoisted to
    /// the exit of a loop around `i`, or recorded at the end of `i`.
    fn outside(&mut self, i: usize, v: Value) {
        let v = self.canonical(v);
        if self.is_counter(i, v) {
            return;
        }
        let shape = &self.cx.shape;
        let def = self.fdef[v];
        if def.is_none_or(|d| shape.once[d]) {
            self.record(i, None, v);
            return;
        }
        if let Some(e) = shape.loops.hoist(i, def)
            && shape.kept(e)
        {
            self.outside(e, v);
            return;
        }
        self.record(i, None, v);
    }

    /// Whether `v` is the counter of a counted loop around position `i`.
    fn is_counter(&self, i: usize, v: Value) -> bool {
        self.cx.shape.loops.around[i]
            .iter()
            .any(|&k| self.counted[k].as_ref().is_some_and(|c| c.iv == v))
    }

    /// Whether block `i`'s reverse has `v` (defined elsewhere) without a
    /// record per execution of `i`.
    fn free_outside(&self, i: usize, v: Value) -> bool {
        let v = self.canonical(v);
        let shape = &self.cx.shape;
        let def = self.fdef[v];
        self.is_counter(i, v)
            || def.is_none_or(|d| shape.once[d])
            || shape.loops.hoist(i, def).is_some_and(|e| shape.kept(e))
    }

    /// The earlier value of its block that `v` repeats, or `v`.
    fn canonical(&self, v: Value) -> Value {
        self.canon.get(&v).copied().unwrap_or(v)
    }

    /// The block label and statement number (from 1) of the primal
    /// statement whose forward part defines `v`.
    fn from(&self, v: Value) -> (u32, u32) {
        let (Some(d), Some((_, owner))) = (self.fdef[v], self.fpos[v]) else {
            return (0, 0);
        };
        let label = self.cx.label(d);
        let stmt = self.cx.shape.bb.blocks[d]
            .stmts
            .get(owner)
            .and_then(|&s| *self.cx.places.get(s))
            .map_or(0, |(_, n)| n);
        (label, stmt)
    }

    /// Records `v` for block `i` (read by `reader`, or at the block's end).
    fn record(&mut self, i: usize, reader: Option<Inst>, v: Value) {
        if self.recorded.insert((i, v)) {
            self.reads.push((i, reader, v));
        }
    }

    /// The primitive and operands of `v` when it is one the cost model may
    /// recompute.
    fn recipe(&self, v: Value) -> Option<(Prim, irad_ir::func::Args)> {
        let irad_ir::ValueDef::Inst(inst) = self.input.fwd.values[v].def else {
            return None;
        };
        let InstKind::Prim { prim, args } = &self.input.fwd.insts[inst].kind else {
            return None;
        };
        let canon = |op: &Operand| match op {
            Operand::Value(u) => Operand::Value(self.canonical(*u)),
            c => *c,
        };
        cheap(*prim).then(|| (*prim, args.iter().map(canon).collect()))
    }

    /// What recomputing `v` in the reverse of block `i` for readers up to
    /// statement `r` costs (primitives), or `None` when it would need a
    /// record, is not allowed or costs too much.
    fn cost(
        &self,
        i: usize,
        v: Value,
        r: usize,
        depth: u32,
        needs: &Needs,
        seen: &mut Vec<Value>,
    ) -> Option<u32> {
        let v = self.canonical(v);
        if seen.contains(&v) || self.is_counter(i, v) {
            return Some(0);
        }
        let (d, p) = match (self.fdef[v], self.fpos[v]) {
            (Some(d), Some((p, _))) if self.cx.shape.same_iteration(d, i) => (d, p),
            _ => return self.free_outside(i, v).then_some(0),
        };
        if !seen.is_empty() && needs.contains(&(self.rank[d], p)) {
            return Some(0);
        }
        if depth >= DEPTH {
            return None;
        }
        let (prim, args) = self.recipe(v)?;
        if prim == Prim::Arrayref && !self.reload_ok(v, &args, i, d == i, r) {
            return None;
        }
        seen.push(v);
        let mut total = 1;
        for a in &args {
            if let Operand::Value(u) = a {
                total += self.cost(i, *u, r, depth + 1, needs, seen)?;
            }
        }
        (total <= BUDGET).then_some(total)
    }

    /// Whether array read `v = arrayref(args)` can be read again in the
    /// pullback of statement `r` of the block that reads it: the same block
    /// (`here`), with no write of its class from the read to `r`, or a
    /// later block of the same iteration, when nothing writes the class.
    fn reload_ok(&self, v: Value, args: &[Operand], i: usize, here: bool, r: usize) -> bool {
        let writes = &self.writes[i];
        let Some(Operand::Value(a)) = args.first() else {
            return false;
        };
        let Some(&pa) = self.primal_of.get(a) else {
            return false;
        };
        let c = self.cx.classes.class(pa);
        if self.unsafe_classes.contains(&c) {
            return false;
        }
        if !here {
            return !self.written.contains(&c);
        }
        let Some((_, owner)) = self.fpos[v] else {
            return false;
        };
        let last = r.min(writes.len().saturating_sub(1));
        !(owner..=last).any(|k| writes.get(k).is_some_and(|w| w.contains(&c)))
    }
}

/// Whether the pullback of a statement restores the arrays it writes. The
/// rules of primitives restore what they overwrite (the `Rrule` contract,
/// checked by `irad test-rules`), and so do the pieces of user functions,
/// made of them. A rule a user registered for a function is not checked, and
/// a function value may be one: not trusted; a statement left without
/// derivative work has no pullback at all.
pub(super) fn restores(st: Option<&Stmt>) -> bool {
    match st.map(|s| &s.how) {
        Some(How::Rule(_, None) | How::Invoke(_) | How::Phi) => true,
        Some(How::Rule(_, Some(_)) | How::Dynamic | How::Primal) | None => false,
    }
}

/// Finds the values of block `i` of the forward sweep that repeat an
/// earlier one (`canon`): the same cheap primitive of the same operands, and
/// for an array read of an array of the primal, no statement writing its
/// class from the earlier read to this one (a read inside a statement that
/// writes its class repeats nothing).
fn repeats(
    input: &PlanInput<'_>,
    i: usize,
    writes: &[SmallVec<[u32; 2]>],
    fpos: &SecondaryMap<Value, Option<(usize, usize)>>,
    primal_class: &dyn Fn(&Operand) -> Option<u32>,
    canon: &mut HashMap<Value, Value>,
) {
    let mut epoch: HashMap<u32, u32> = HashMap::default();
    // The primitive, the operands (values by their canonical number), and
    // for an array read the count of writes of its class so far.
    type RepeatKey = (Prim, SmallVec<[KeyOp; 3]>, Option<u32>);
    let mut seen: HashMap<RepeatKey, Value> = HashMap::default();
    let mut passed = 0;
    let key = |op: &Operand, canon: &HashMap<Value, Value>| match op {
        Operand::Value(u) => KeyOp::Value(canon.get(u).copied().unwrap_or(*u).as_u32()),
        c => key_op(c),
    };
    for &inst in &input.fwd.blocks[input.fblock[i]].insts {
        let data = &input.fwd.insts[inst];
        let (InstKind::Prim { prim, args }, Some(v)) = (&data.kind, data.result) else {
            continue;
        };
        let Some((_, owner)) = fpos[v] else { continue };
        // Statements before the owner have written what they write.
        while passed < owner.min(writes.len()) {
            for &c in &writes[passed] {
                *epoch.entry(c).or_insert(0) += 1;
            }
            passed += 1;
        }
        if !cheap(*prim) {
            continue;
        }
        let ops = args.iter().map(|a| key(a, canon)).collect();
        let mut at = None;
        if *prim == Prim::Arrayref {
            let Some(c) = args.first().and_then(primal_class) else {
                continue;
            };
            if writes.get(owner).is_some_and(|w| w.contains(&c)) {
                continue;
            }
            at = Some(epoch.get(&c).copied().unwrap_or(0));
        }
        match seen.entry((*prim, ops, at)) {
            std::collections::hash_map::Entry::Occupied(first) => {
                canon.insert(v, *first.get());
            }
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(v);
            }
        }
    }
}

/// Whether the cost model may recompute `prim` (see the module header).
fn cheap(prim: Prim) -> bool {
    use Prim::*;
    matches!(
        prim,
        Add | Sub
            | Mul
            | Neg
            | Abs
            | Min
            | Max
            | Copysign
            | Zmul
            | Lt
            | Le
            | Gt
            | Ge
            | Eq
            | Ne
            | Select
            | Iadd
            | Isub
            | Imul
            | Ineg
            | And
            | Or
            | Not
            | Sitofp
            | Getfield
            | Length
            | Arrayref
    )
}

/// The values a block's reverse reads that the block defines, by (rank of
/// the defining block, position in it), each with its last reader: taken
/// latest key first. A hash map and a heap of its keys, where an ordered
/// map allocated a node per few entries of a long block.
#[derive(Default)]
struct Needs {
    entries: HashMap<(usize, usize), (Value, usize)>,
    order: BinaryHeap<(usize, usize)>,
}

impl Needs {
    /// Adds `v` at `key` read by statement `r`, or raises the last reader
    /// of what is there.
    fn add(&mut self, key: (usize, usize), v: Value, r: usize) {
        match self.entries.entry(key) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                let e = e.get_mut();
                e.1 = e.1.max(r);
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert((v, r));
                self.order.push(key);
            }
        }
    }

    fn contains(&self, key: &(usize, usize)) -> bool {
        self.entries.contains_key(key)
    }

    /// Removes and returns the entry of the largest key.
    fn pop_last(&mut self) -> Option<(Value, usize)> {
        let key = self.order.pop()?;
        self.entries.remove(&key)
    }
}
