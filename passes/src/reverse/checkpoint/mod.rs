//! Loop checkpointing in reverse mode (docs/reverse.md, "Checkpointing"):
//! which loops the forward sweep runs without recording, taking a snapshot of
//! their state every `stretch` iterations instead, and what the pullback needs
//! to replay them stretch by stretch.
//!
//! A loop is checkpointed under a tape limit ([`super::Reverse::set_tape_limit`])
//! or when a `checkpoint(n)` statement in it asks (`n` iterations per
//! stretch; `checkpoint(0)`: never) or a rule of the checkpoint schedule
//! names it (`schedule.rs`, which holds over the statement), when it
//! qualifies: one block outside it
//! enters it and it leaves (through one edge from its header, or through
//! several edges or one from another block: a loop of several exits, whose
//! replays push its inputs back for the pullback); the arrays that travel
//! from one iteration to the next through its header are made afresh in
//! each iteration or kept as they are (`carried_arrays`), and no other array
//! it makes is used after it (those it carries are, when the blocks its exit
//! edges lead to are one, or all jump to one: [`leave_shape`]); it records something per iteration; and no loop around it is
//! checkpointed already (the outermost qualifying loop is chosen, its
//! stretches hold the loops inside it in full), unless the budget needs the
//! loop inside checkpointed too (or it asks): then it is, inside the outer
//! loop's replay (`nested.rs`), at any depth: the loop inside may hold one
//! checkpointed inside its own replay in turn. Under a limit the budget needs it
//! when one outer iteration exceeds half the limit, and whenever the inner
//! loop's trip count is not a constant of at most [`INNER_TRIPS`] (a counted
//! one then records a run of at most that many iterations directly, as the
//! estimate assumed, or of at most its stretch when the loops around it
//! count its trips on entry, and checkpoints a longer one). Under a limit of B bytes the
//! schedule has two levels: stretches of `max(1, (B / 2) / r)` iterations,
//! `r` the tape bytes one iteration records as estimated from the plan
//! (an inner loop counted [`INNER_TRIPS`] times, a call [`CALL_BYTES`]), so
//! that one stretch's records take at most half the limit; a loop that
//! records arrays it makes shortens that on entry for the lengths of its
//! array inputs (`sized.rs`). Every
//! checkpointed loop has its snapshots thinned: a counted loop whose trip
//! count is known on entry places them by the binomial schedule
//! (`revolve.rs`), holding at most the room the limit gives or `2 +
//! log2(C) / 2` for `C` stretches; any other keeps those the limit has room
//! for and thins the rest online by a binary counter (`thin.rs`), holding
//! at most `1 + log2 C` more, for any trip count.
//!
//! This file decides ([`choose`]) and keeps the decisions ([`Checkpoints`]);
//! `region.rs` finds what a loop's recording blocks read from before the loop
//! and which arrays each snapshot copies; `primal.rs` turns the loop of the
//! forward sweep into one that does not record and takes the snapshots;
//! `replay.rs` builds the function the pullback calls to replay one stretch
//! from its snapshot. The pullback's side is `pullback.rs`'s.
//!
//! Assumes the forward parts of the statements and the tape plan of a
//! derivation, before any push is written. Guarantees: without a tape limit
//! and without `checkpoint` statements nothing is decided and the plan is
//! unchanged; the decisions are deterministic; a checkpointed loop's inputs
//! are pushed at the end of its exit block, where the plan says.

pub(super) mod copy;
pub(super) mod direct;
pub(super) mod nested;
pub(super) mod primal;
pub(super) mod region;
pub(super) mod replaced;
pub(super) mod replay;
pub(super) mod revolve;
pub(super) mod schedule;
pub(super) mod sized;
pub(super) mod thin;

use super::ReverseError;
use super::choose::restores;
use super::ctx::{Derivation, How, Shadows, Stmt, err};
use super::loops::RevLoop;
use super::plan::{CheckpointedLoop, SkippedLoop, TapePlan};
use irad_ir::entity::SecondaryMap;
use irad_ir::interp::tape_value_bytes;
use irad_ir::{Block, Const, Func, FuncId, Inst, InstKind, Operand, Prim, Value};
use irad_rules::emit::contains_array;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// How many times an inner loop is assumed to run per iteration of the loop
/// around it, when estimating the bytes one iteration records.
pub const INNER_TRIPS: u64 = 16;
/// The bytes one call of another function's forward sweep is assumed to
/// record, in the same estimate.
pub const CALL_BYTES: u64 = 64;
/// The most snapshots a thinned loop's binary counter holds (one more than
/// the bits of a trip count): the slots kept back from those the limit
/// allows before thinning starts.
pub const THIN_SLACK: u64 = 64;

/// Where a checkpointed loop's stretch length comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StretchSource {
    /// The tape limit, in bytes.
    Limit(u64),
    /// A `checkpoint(n)` statement in the loop.
    Program,
    /// A rule of the checkpoint schedule (docs/schedules.md), in canonical
    /// form.
    Schedule(String),
}

/// A loop's own request, from a `checkpoint(n)` statement in it or a rule of
/// the checkpoint schedule naming it (which holds over the statement).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Ask {
    /// Iterations per stretch; 0: never checkpointed.
    n: u64,
    /// The schedule's rule, in canonical form, when the request is one.
    rule: Option<String>,
}

impl Ask {
    /// Where a stretch of this request comes from.
    fn source(&self) -> StretchSource {
        match &self.rule {
            Some(r) => StretchSource::Schedule(r.clone()),
            None => StretchSource::Program,
        }
    }

    /// Why a loop this request keeps from checkpointing is not
    /// checkpointed.
    fn refusal(&self) -> String {
        match &self.rule {
            Some(r) => format!("`{r}` in the checkpoint schedule"),
            None => "`checkpoint(0)` in it".into(),
        }
    }
}

/// What the forward sweep's parts hand to the decisions: the forward sweep
/// so far and the maps from the primal to it.
pub(super) struct SweepView<'a> {
    /// The forward sweep so far.
    pub fwd: &'a Func,
    /// Its block of each primal block, by position.
    pub fblock: &'a [Block],
    /// The forward-sweep operand of each primal value.
    pub fval: &'a SecondaryMap<Value, Option<Operand>>,
    /// The shadows of each primal value.
    pub fshadow: &'a Shadows,
    /// How each statement was differentiated.
    pub stmts: &'a SecondaryMap<Inst, Option<Stmt>>,
}

/// Where a checkpointed loop's carried arrays used after it get the shadow
/// they leave with (`primal.rs`): a fresh zero array or the shadow they
/// entered with, made in each block an exit edge leads to (by position),
/// and, when there are several such blocks, merged by a phi in the one
/// block they all jump to and that nothing else enters (`join`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Leave {
    /// The blocks an exit edge leads to.
    pub exits: Vec<usize>,
    /// The block they all jump to, when there are several.
    pub join: Option<usize>,
    /// Whether the exits' paths meet only later ([`regions`]): each block
    /// an exit edge leads to gives its own shadows to the blocks it
    /// dominates, where every use after the loop is.
    pub regions: bool,
    /// With `regions`, the blocks that two or more of those blocks, and
    /// nothing else, jump to (a `break` and the header's test meeting
    /// after the loop, a `return` inside it elsewhere): each merges their
    /// shadows by phis and gives them to the blocks it dominates.
    pub joins: Vec<usize>,
}

impl Leave {
    /// The join (of [`Leave::joins`]) exit block `e` (a position) jumps
    /// to, if any.
    pub fn join_of(&self, cx: &Derivation<'_>, e: usize) -> Option<usize> {
        let super::bbcode::BTerm::Goto(to) = cx.shape.bb.blocks[e].term else {
            return None;
        };
        cx.shape.bb.index()[to].filter(|j| self.joins.contains(j))
    }
}

/// For loop `k` whose exits' paths meet only later (past an `if` or a loop
/// after it, or at the return), the exits as separate regions
/// ([`Leave::regions`]), when each use after the loop of each array it
/// makes that is used after it (`escaping`: carried arrays, among
/// `carried`, and arrays its last iteration makes) is in a block that one
/// block an exit edge of the array leads to dominates (the use of a phi
/// entry is at the end of the block it comes from) and no shadow of such
/// an array is pushed once per call (in the return block); `None`
/// otherwise, or when no array is used after it.
fn regions(
    cx: &Derivation<'_>,
    (view, plan): (&SweepView<'_>, &TapePlan),
    (k, carried): (usize, &[CarriedPhi]),
    escaping: &HashSet<Value>,
) -> Option<Leave> {
    if escaping.is_empty() {
        return None;
    }
    // A shadow of such an array pushed once per call is pushed in the
    // return block, where the exits' paths have met.
    let once: HashSet<Value> = plan.once().map(|s| s.value).collect();
    if escaping.iter().any(|v| {
        view.fshadow[*v]
            .iter()
            .any(|s| matches!(s, Operand::Value(s) if once.contains(s)))
    }) {
        return None;
    }
    let shape = &cx.shape;
    let l = shape.loops.of(k);
    let mut leave = Leave {
        exits: l.exits.iter().copied().filter(|&e| shape.kept(e)).collect(),
        join: None,
        regions: true,
        joins: Vec::new(),
    };
    leave.joins = region_joins(cx, k, &leave.exits);
    let mut from: HashMap<Value, Vec<usize>> = HashMap::default();
    for &v in escaping {
        let exits = match carried.iter().any(|c| c.1 == v) {
            true => leave.exits.clone(),
            false => left_array(cx, view, (k, carried, escaping), v, &leave)?.exits,
        };
        from.insert(v, exits);
    }
    let index = shape.bb.index();
    let mut used: Vec<usize> = Vec::new();
    for (p, b) in shape.bb.blocks.iter().enumerate() {
        if l.contains(p) {
            continue;
        }
        let mut uses: Vec<(usize, Value)> = Vec::new();
        for &inst in &b.stmts {
            let mut add = |at: usize, op: &Operand| {
                if let Operand::Value(v) = op
                    && from.contains_key(v)
                {
                    uses.push((at, *v));
                }
            };
            match &cx.src.insts[inst].kind {
                InstKind::Phi { entries } => {
                    for (pred, op) in entries {
                        add(index[*pred].unwrap_or(p), op);
                    }
                }
                InstKind::CallValue { callee, args } => {
                    add(p, &Operand::Value(*callee));
                    args.iter().for_each(|op| add(p, op));
                }
                kind => super::ctx::args_of(kind).iter().for_each(|op| add(p, op)),
            }
        }
        if let super::bbcode::BTerm::Return(op) = &b.term
            && let Operand::Value(v) = op
            && from.contains_key(v)
        {
            uses.push((p, *v));
        }
        // In a join's region only when all its exits are the array's.
        let joined = |at: usize, v: &Value| {
            leave.joins.iter().copied().find(|&j| {
                shape.dominated_by(at, &[j]) && shape.preds[j].iter().all(|e| from[v].contains(e))
            })
        };
        for (at, v) in &uses {
            if shape.dominated_by(*at, &from[v]) {
                continue;
            }
            used.push(joined(*at, v)?);
        }
    }
    // Only the joins some use needs (the others would merge shadows that
    // no block reads).
    leave.joins.retain(|j| used.contains(j));
    Some(leave)
}

/// The blocks outside loop `k`, none of `exits` (the blocks its exit edges
/// lead to), that two or more of `exits` jump to by `goto` and that
/// nothing else enters ([`Leave::joins`]).
fn region_joins(cx: &Derivation<'_>, k: usize, exits: &[usize]) -> Vec<usize> {
    let shape = &cx.shape;
    let l = shape.loops.of(k);
    let index = shape.bb.index();
    let mut joins: Vec<usize> = Vec::new();
    for &e in exits {
        let super::bbcode::BTerm::Goto(to) = shape.bb.blocks[e].term else {
            continue;
        };
        let Some(j) = index[to] else { continue };
        if joins.contains(&j) || l.contains(j) || exits.contains(&j) {
            continue;
        }
        let preds = &shape.preds[j];
        let all_exits = preds.iter().all(|p| {
            exits.contains(p)
                && matches!(shape.bb.blocks[*p].term, super::bbcode::BTerm::Goto(t) if index[t] == Some(j))
        });
        if preds.len() >= 2 && all_exits {
            joins.push(j);
        }
    }
    joins
}

/// Where loop `k` can give the carried arrays used after it the shadows
/// they leave with: one block an exit edge leads to (a loop that leaves
/// through one edge, from its header or not), or several that all jump to
/// one block nothing else enters (a `break`, or a `while` condition of
/// several parts, leaving to the code after the loop; a `return` inside it
/// when the code after the loop has no branch before the return); `None`
/// otherwise (the exits' paths meet only later).
fn leave_shape(cx: &Derivation<'_>, k: usize) -> Option<Leave> {
    let shape = &cx.shape;
    let l = shape.loops.of(k);
    let exits: Vec<usize> = l.exits.iter().copied().filter(|&e| shape.kept(e)).collect();
    if exits.len() <= 1 {
        return Some(Leave {
            exits: vec![exits.first().copied().unwrap_or(l.exit)],
            join: None,
            regions: false,
            joins: Vec::new(),
        });
    }
    let index = shape.bb.index();
    let mut join = None;
    for &e in &exits {
        let super::bbcode::BTerm::Goto(to) = shape.bb.blocks[e].term else {
            return None;
        };
        let to = index[to]?;
        if join.is_some_and(|j| j != to) {
            return None;
        }
        join = Some(to);
    }
    let join = join?;
    let mut preds: Vec<usize> = shape.preds[join].to_vec();
    preds.sort_unstable();
    let mut sorted = exits.clone();
    sorted.sort_unstable();
    (preds == sorted && !l.contains(join)).then_some(Leave {
        exits,
        join: Some(join),
        regions: false,
        joins: Vec::new(),
    })
}

/// How a counted loop's trip count is known on entry: it goes on while its
/// counter is below (`up`) or above a bound defined before the loop, strictly
/// (`lt`, `gt`) or not.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct EntryTest {
    /// The bound, a primal operand defined before the loop.
    pub bound: Operand,
    /// Whether the counter steps up to the bound (else down).
    pub up: bool,
    /// Whether the comparison is strict.
    pub strict: bool,
}

/// The binomial schedule of a checkpointed counted loop whose trip count is
/// known on entry (`revolve.rs`): each snapshot also holds its slots, after
/// the stretch's index; the first gets `max(least, 1 + ceil(b / 2))` of
/// them, `b` the binary digits of `n`, the stretches of the run, and each
/// next one one fewer.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Revolve {
    /// The header's test, which gives the iterations left at a snapshot.
    pub test: EntryTest,
    /// The snapshots the limit has room for, under a limit of B bytes with
    /// snapshots of s bytes (scalar state only), for a loop not inside
    /// another's replay: `(B / 2) / s`; 0 otherwise.
    pub least: u64,
    /// For a loop whose snapshots copy arrays, not inside another's replay,
    /// under a limit of B bytes: `(B / 2, s)`, `s` the bytes of a snapshot
    /// but its arrays' elements. The first snapshot then takes as many
    /// slots as `(B / 2) / (s + 8 n)` when that is more, `n` the elements
    /// of the arrays it copies, counted there (they are the loop's state on
    /// entry).
    pub room: Option<(u64, u64)>,
}

/// The direct path of a checkpointed counted loop: the test on entry and
/// the most iterations a run recorded directly may have.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Direct {
    /// How the trip count is known on entry.
    pub test: EntryTest,
    /// The most iterations a run recorded directly may have: the stretch
    /// for an outermost loop, and for a loop checkpointed inside another's
    /// replay whose trips every checkpointed loop around it counts on entry
    /// ([`counts_trips_of`]); for any other loop checkpointed inside
    /// another's replay, at most [`INNER_TRIPS`], the iterations per run
    /// the outer loop's stretch was estimated with (so that the inner runs
    /// the outer stretch records directly stay within its estimate).
    pub runs: u64,
}

/// An array a snapshot copies: an array leaf of one of the loop's inputs,
/// reached from it by `getfield` with the indices of `path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ArrayLeaf {
    /// The input (its index among the loop's inputs).
    pub input: usize,
    /// The `getfield` indices from the input to the array.
    pub path: Vec<i64>,
    /// The array's type.
    pub ty: irad_ir::Type,
}

/// An array a checkpointed loop carries from one iteration to the next
/// through a header phi. Each snapshot copies it; the replay of a stretch
/// restores it and starts from a shadow of its own (the shadow entering the
/// loop for the first stretch, a fresh zero array for the others), and
/// pushes the shadow the array has at the stretch's end, which the pullback
/// fills from the next stretch's start shadow before the stretch's reverse.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Carried {
    /// The header phi (its index among the header's phis).
    pub phi: usize,
    /// Its result, a primal value.
    pub value: Value,
    /// Whether it is used after the loop (whose exits [`CkLoop::leave`]
    /// says where they meet): the forward sweep then gives it a shadow in
    /// each block an exit edge leads to, which the pullback copies into the
    /// shadow the last stretch ends with.
    pub escapes: bool,
    /// The array's type.
    pub ty: irad_ir::Type,
    /// For an array made afresh in each iteration that has a shadow
    /// (`[f64]`): the header's shadow phi in the recording forward sweep,
    /// and the index among the loop's inputs of the shadow entering the
    /// loop.
    pub shadow: Option<(Value, usize)>,
    /// For an array kept as it is that has a shadow: its shadow, which the
    /// loop that does not record carries and each snapshot pushes.
    pub kept: Option<Kept>,
    /// For an array replaced on some iterations only (with a shadow): its
    /// flag, a header phi (its index among the header's phis, and the
    /// primal value) saying whether the loop has replaced the array since
    /// it entered (`replaced.rs`); it chooses the array's start shadow and
    /// the shadow it leaves with, where an array made afresh in every
    /// iteration has the snapshot's flag and the header's.
    pub replaced: Option<(usize, Value)>,
    /// For an array handed on from another header phi and used after the
    /// loop (`prev = cur; cur = next;`, `prev` read after it; depth `d` =
    /// its length + 1): the indices among the loop's inputs of the shadows
    /// entering the loop with the phis whose entering arrays it holds after
    /// 1, ..., d - 1 iterations (`cur`'s, for `prev`). A run of fewer
    /// iterations than `d` leaves it with such an array, and that shadow;
    /// else with one the loop made. Empty for every other array.
    pub held: Vec<usize>,
    /// Whether it is made afresh in every iteration ([`Carried::afresh`]).
    pub fresh: bool,
    /// Whether its identity does not matter: made afresh in every iteration
    /// ([`Carried::afresh`]) and entering
    /// the loop as an array made for it (`copy`, `zeros` or `alloc`) that
    /// nothing in the loop reads and nothing after it takes a reference
    /// to ([`renewed`]). Each replay then starts it from a new copy of the
    /// snapshot's, and each split's advance hands on a new copy of the
    /// array it ends with, so that compiled code's owning phis free them
    /// (docs/codegen.md, "Freeing arrays").
    pub renewed: bool,
    /// For an array handed on from another header phi that may hold the
    /// same array (`prev = cur; cur = either(cur)`: `prev` is `cur` after
    /// an iteration whose call handed its argument back), that phi's
    /// position among the loop's carried arrays. Both are restored into
    /// the run's arrays, so a replay's arrays are one where the run's were;
    /// where they are, a replay starts this one from that one's start
    /// shadow, and where not, from its own (docs/reverse.md, "Arrays one
    /// phi hands another"). Read after the loop, it leaves with the
    /// shadow of the phi up its chain it is, where that one leaves too
    /// (`primal::shared_exits`).
    pub alias: Option<usize>,
    /// For an array replaced on some iterations that may take another
    /// header phi's array (`if better { keep = r; } r = step(r);`, since
    /// session 34): its flag saying it holds the array that phi entered
    /// the loop with (a header phi: its index among the header's phis and
    /// the primal value), and the index among the loop's inputs of that
    /// phi's entering shadow, which it then starts and leaves with.
    pub held_entry: Option<((usize, Value), usize)>,
}

impl Carried {
    /// Whether it is made afresh in every iteration (not replaced on some
    /// iterations only; with a shadow, or, for an array without one such
    /// as an `[i64]`, taking from every latch an array the loop made that
    /// no other header phi takes): the array a stretch other than the
    /// first starts with is one an iteration made, which no value but the
    /// header phi refers to, so a split may hand on a new copy of the
    /// array its advance ends with.
    pub fn afresh(&self) -> bool {
        self.fresh
    }
}

/// Whether carried array `i` of `carried` may be another of them, or another
/// may be it ([`Carried::alias`]): its identity matters.
pub(super) fn shared(carried: &[Carried], i: usize) -> bool {
    carried.get(i).is_some_and(|c| c.alias.is_some()) || carried.iter().any(|c| c.alias == Some(i))
}

/// The carried arrays up the chain of carried array `i` of `carried`
/// ([`Carried::alias`]): the one it may be, the one that one may be, and so
/// on (bounded, so a cycle ends).
pub(super) fn alias_chain(carried: &[Carried], i: usize) -> impl Iterator<Item = usize> + '_ {
    std::iter::successors(carried[i].alias, |&j| carried[j].alias).take(carried.len())
}

/// The phi at the end of the alias chain of phi `i` among `n` phis whose
/// aliases `alias` gives (`i` itself when it has none): the phis sharing
/// it may hold one array.
pub(super) fn alias_root(alias: impl Fn(usize) -> Option<usize>, n: usize, i: usize) -> usize {
    std::iter::successors(alias(i), |&j| alias(j))
        .take(n)
        .last()
        .unwrap_or(i)
}

/// The carried arrays of `carried` that may be another ([`Carried::alias`])
/// and that `keep` picks, those with the shortest chains first: a phi's own
/// array is settled before a phi handed it looks at it.
pub(super) fn alias_order(carried: &[Carried], keep: impl Fn(&Carried) -> bool) -> Vec<usize> {
    let mut order: Vec<(usize, usize)> = (0..carried.len())
        .filter(|&i| carried[i].alias.is_some() && keep(&carried[i]))
        .map(|i| (alias_chain(carried, i).count(), i))
        .collect();
    order.sort_unstable();
    order.into_iter().map(|(_, i)| i).collect()
}

/// The shadow of an array a checkpointed loop carries as it is (an array
/// defined before the loop, or swapped with another such one): always one of
/// the shadows of arrays defined before the loop, which the loop that does
/// not record carries in a phi of its own, as the recording one does.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Kept {
    /// The header's shadow phi in the recording forward sweep.
    pub phi: Value,
    /// The shadow entering the loop (of the forward sweep).
    pub entry: Operand,
    /// What enters the phi from each block of the loop that jumps to the
    /// header (a primal block): the shadow phi (of the recording sweep) of
    /// another kept array, or a shadow defined before the loop.
    pub latches: Vec<(Block, Operand)>,
}

/// A phi of a checkpointed loop's blocks other than its header's that holds
/// a kept array (a double buffer swapped in a loop inside it, or on some
/// iterations only; [`kept_phis`]) and that a kept header phi takes its
/// array through: the loop that does not record carries its shadow in a
/// phi of its own, as the recording one does.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct InnerKept {
    /// The position of the phi's block.
    pub block: usize,
    /// Its shadow phi in the recording forward sweep.
    pub phi: Value,
    /// What enters it from each block (a primal block): the shadow phi (of
    /// the recording sweep) of another kept array, or a shadow defined
    /// before the loop.
    pub entries: Vec<(Block, Operand)>,
}

/// An array a checkpointed loop makes (`copy`, `zeros` or `alloc` in a
/// block whose innermost loop is this one, or a phi there choosing between
/// such an array and one replaced on some iterations only) and uses after
/// it other than through its header phis: it leaves through the exit edges
/// its statement dominates, made by the run's last iteration (or, for a
/// phi, by an earlier one or not at all), so the last stretch's replay makes
/// it again, with a fresh shadow nothing has touched yet (docs/reverse.md,
/// "Arrays made in the last iteration").
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Left {
    /// The statement's result, a primal value.
    pub value: Value,
    /// Its type.
    pub ty: irad_ir::Type,
    /// Its shadow in the recording forward sweep (`None`: an array without
    /// one, `[i64]` or `[bool]`). Each block an exit edge it leaves
    /// through leads to makes the shadow it leaves with, a fresh zero
    /// array, and pushes it with the loop's inputs; the last stretch's
    /// replay pushes the shadow it ends with on that edge, and the
    /// pullback copies the one into the other.
    pub shadow: Option<Value>,
    /// The positions of the blocks the exit edges it leaves through lead
    /// to (those its statement dominates).
    pub exits: Vec<usize>,
    /// For a phi choosing between an array the iteration made and the
    /// array of a header phi replaced on some iterations only (`if better {
    /// a = b; } if done { break; }`): its flags and that header phi.
    pub chosen: Option<Chosen>,
}

/// A phi choosing between an array the iteration made and the array of a
/// header phi replaced on some iterations only, read after the loop.
/// Where the phi holds the header's array, its shadow is the header's: the
/// one that entered while the loop has not replaced it, else the shadow the
/// header's array leaves with when that array is read after the loop too
/// (one object), else a fresh zero array.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Chosen {
    /// Its flag (a primal value): whether the array it holds is one the
    /// loop made.
    pub flag: Value,
    /// Its second flag (a primal value): whether the iteration made it.
    pub this: Value,
    /// The shadow entering the header phi (a value of the forward sweep,
    /// or of the outer loop's replay for a loop checkpointed inside
    /// another).
    pub entry: Value,
    /// The header phi (a primal value).
    pub header: Value,
    /// The one array the phi's web makes, when it is read after the loop
    /// too: where the iteration made the array the phi holds, they are one
    /// array, and an exit both leave through gives them one shadow.
    pub made: Option<Value>,
}

/// One checkpointed loop.
#[derive(Clone, Debug)]
pub(super) struct CkLoop {
    /// Its index among the derivation's loops ([`super::loops::RevLoops::of`]:
    /// the single-exit loops, then those of several exits).
    pub k: usize,
    /// The position of the one block outside it that enters it.
    pub pre: usize,
    /// The positions of its latches.
    pub latches: Vec<usize>,
    /// Iterations per stretch (at least 1, and at least `least`).
    pub stretch: u64,
    /// The fewest iterations a stretch may have: the deepest depth of an
    /// array handed on from one header phi to another (`prev = cur; cur =
    /// next;`: 2), so that every stretch but the first starts with arrays
    /// the loop made; 1 otherwise.
    pub least: u64,
    /// How many of its carried arrays are handed on from another header
    /// phi.
    pub handed: usize,
    /// Where `stretch` comes from.
    pub source: StretchSource,
    /// The estimated tape bytes of one iteration.
    pub bytes: u64,
    /// Under a limit, for a loop that records arrays it makes: how its
    /// stretch shortens on entry for the lengths of its array inputs
    /// (`sized.rs`).
    pub sized: Option<sized::RunStretch>,
    /// Set by [`rewrite`]: the stretch and the stretch less one in the
    /// sweep that runs the loop without recording (computed in its entering
    /// block when `sized`, constants otherwise).
    pub run_stretch: Option<(Operand, Operand)>,
    /// The values of the forward sweep, defined before the loop, that its
    /// recording blocks read: the replay's parameters.
    pub inputs: Vec<Value>,
    /// Their types.
    pub input_types: Vec<irad_ir::Type>,
    /// Whether each replay pushes the inputs back, before the stretch's
    /// records, for the pullback to pop when the stretch's reverse is done
    /// and hand to the replay of the stretch before: a loop of several exits,
    /// whose reverse no one exit's reverse dominates.
    pub repush: bool,
    /// The arrays each snapshot copies and each replay restores.
    pub arrays: Vec<ArrayLeaf>,
    /// The arrays it carries through its header phis (their snapshots copy
    /// them after `arrays`).
    pub carried: Vec<Carried>,
    /// The phis inside it through which kept header phis take their arrays.
    pub inner_kept: Vec<InnerKept>,
    /// The arrays made in one of its iterations and used after it other
    /// than through its header (`a = b; break;`): the run's last iteration
    /// made them.
    pub left: Vec<Left>,
    /// The values of the loop used after it that are always the array a
    /// carried array kept as it is holds (`let b = touch(a, ..); a = b;
    /// if done { break; }`, `b` read after the loop): each one's shadow in
    /// the recording sweep, and that kept array's shadow phi there, whose
    /// value the loop that does not record carries and the exits take.
    pub kept_left: Vec<(Value, Value)>,
    /// Where the shadows of carried arrays used after it ([`Carried::escapes`]
    /// with a shadow) are made: in each block an exit edge leads to, and
    /// for a loop of several exits, the block they all lead to, which
    /// merges them ([`leave_shape`]).
    pub leave: Leave,
    /// The checkpointed loop around it (its index among the derivation's
    /// loops), when it is checkpointed inside that loop's replay function:
    /// the loop that does not record and its snapshots are there, its own
    /// replay is made from the recording forward sweep as any other
    /// (`nested.rs`).
    pub within: Option<usize>,
    /// The predecessor index the entering block pushed for the pullback of
    /// a loop run back by popping indices, now pushed by every replay.
    pub entry_index: Option<Operand>,
    /// Whether the pullback runs it back by counting.
    pub counted: bool,
    /// How the forward sweep tells on entry that the loop runs at most
    /// `stretch` iterations, and then records it directly, when it can.
    pub direct: Option<Direct>,
    /// Set by the forward sweep for a loop with `direct`: the flag pushed at
    /// the end of its exit block, whether the loop was checkpointed (a phi
    /// whose entries [`rewrite`] adds).
    pub flag: Option<Value>,
    /// How many stretches keep their snapshots before the binary counter's
    /// thinning starts (0 for a loop of binomial schedule: [`Revolve`]);
    /// (`thin.rs`: each snapshot also holds the index of the stretch it
    /// starts, after the flag, every block an exit edge leads to pushes the
    /// number of stretches started, and the replay splits a segment of
    /// several stretches): under a limit of B bytes with snapshots of s
    /// bytes (scalar state only: no array copied or carried),
    /// `max(2, (B / 2) / s) - 64`, at least 0, so that the snapshots held
    /// stay within half the limit or 64; 0 otherwise.
    pub plain: u64,
    /// For a counted loop whose trip count is known on entry, its binomial
    /// schedule (`revolve.rs`), which replaces the binary counter.
    pub revolve: Option<Revolve>,
    /// Set by the forward sweep for a thinned loop: the number of stretches
    /// the run started, pushed at the end of each block an exit edge leads
    /// to (by position), after the flag: phis whose entries [`rewrite`]
    /// adds (0 from a direct path).
    pub counts: Vec<(usize, Value)>,
    /// Set by the replay's build for a thinned loop: where its segment
    /// splitting goes (filled by `thin.rs`).
    pub split: Option<thin::SplitSite>,
    /// Set by [`rewrite`]: the replay function.
    pub replay: Option<FuncId>,
    /// Set by [`rewrite`]: the header phis of the loop that does not record,
    /// whose values a snapshot holds (in push order).
    pub state: Vec<Value>,
    /// Set by [`rewrite`]: the replay's value of each value of the forward
    /// sweep its copied blocks read or define.
    pub replayed: HashMap<Value, Value>,
    /// Set by [`rewrite`] when a loop inside it is checkpointed inside its
    /// replay: the new value there of each replay value renamed by it.
    pub replay_renamed: HashMap<Value, Value>,
    /// Set with `replay_renamed`: the new value there that a block an exit
    /// edge of the inner loop leads to has of its own (by primal block), for
    /// the pushes at its end (`primal.rs`, the shadows a carried array leaves
    /// with).
    pub replay_renamed_at: primal::ExitShown,
}

/// The checkpointing decisions of one derivation.
#[derive(Clone, Debug, Default)]
pub(super) struct Checkpoints {
    /// The checkpointed loops, outermost first.
    pub loops: Vec<CkLoop>,
    /// The loops checkpointing was asked for that are not checkpointed.
    pub skipped: Vec<SkippedLoop>,
    /// The new value of each value of the forward sweep that a checkpointed
    /// loop defined and that is used after it.
    pub shown: HashMap<Value, Value>,
    /// The new value, in a block an exit edge of a checkpointed loop leads
    /// to (by primal block), of such a value that the block has a value of
    /// its own for (the shadow a carried array leaves with, `primal.rs`).
    pub shown_at: HashMap<(Block, Value), Value>,
}

impl Checkpoints {
    /// The checkpointed loop with index `k`, if it is one.
    pub fn of_loop(&self, k: usize) -> Option<&CkLoop> {
        self.loops.iter().find(|c| c.k == k)
    }

    /// The position among [`Checkpoints::loops`] of the checkpointed loop
    /// satisfying `which` that an exit edge leaves for position `i` (of
    /// `loops`), if any. At most one loop does: the loops of a block an
    /// exit edge leads to nest, and a loop leaving a checkpointed one too
    /// is not checkpointed.
    pub fn exited_at(
        &self,
        loops: &super::loops::RevLoops,
        i: usize,
        which: impl Fn(&CkLoop) -> bool,
    ) -> Option<usize> {
        self.loops
            .iter()
            .position(|c| which(c) && loops.of(c.k).exits.contains(&i))
    }

    /// Notes that the loop headed by block position `header` is not checkpointed, and
    /// why; `grows` says whether its records grow with its iterations
    /// against the request ([`SkippedLoop::grows`]).
    fn skip(&mut self, cx: &Derivation<'_>, header: usize, reason: impl Into<String>, grows: bool) {
        self.skipped.push(SkippedLoop {
            label: cx.label(header),
            reason: reason.into(),
            grows,
            pos: schedule::header_pos(&cx.src, cx.shape.bb.blocks[header].id),
        });
    }
}

/// The loops of derivation `cx` to checkpoint under `limit` (bytes) and the
/// `checkpoint` statements of the primal; for each, its inputs are added to
/// `plan` as values pushed at the end of its exit block, and the index its
/// entering block would push is taken out of the plan.
pub(super) fn choose(
    cx: &Derivation<'_>,
    view: &SweepView<'_>,
    plan: &mut TapePlan,
    (limit, schedule): (Option<u64>, &schedule::CheckpointSchedule),
) -> Result<Checkpoints, ReverseError> {
    let asked = requests(cx, schedule)?;
    let mut out = Checkpoints::default();
    if limit.is_none() && asked.is_empty() {
        return Ok(out);
    }
    let loops = &cx.shape.loops;
    let unsafe_classes = unsafe_classes(cx, view);
    // Outermost first: each list is sorted innermost first (by size).
    let mut order: Vec<usize> = (0..loops.loops.len())
        .rev()
        .chain((loops.loops.len()..loops.count()).rev())
        .collect();
    order.sort_by_key(|&k| std::cmp::Reverse(loops.of(k).members.len()));
    // The checkpointed loops decided so far that have no direct path.
    let mut replayed: HashSet<usize> = HashSet::default();
    for k in order {
        let l = loops.of(k);
        let ask = asked.get(&l.header);
        if limit.is_none() && ask.is_none() {
            continue;
        }
        // Whether a refusal leaves records growing with its iterations
        // against the request: not those of a counted loop of a short
        // constant trip count, whose run records as much each time (the
        // loops around it decide whether that grows).
        let grows = |plan: &TapePlan| {
            ask.is_none_or(|a| a.n != 0)
                && !short_constant(cx, k)
                && bytes_per_iteration(cx, view, plan, k) > 0
        };
        let mut within = None;
        // The innermost checkpointed loop around it (loops are considered
        // outermost first, so that is the smallest one containing it).
        let around = out
            .loops
            .iter()
            .filter(|c| loops.of(c.k).contains(l.header))
            .min_by_key(|c| loops.of(c.k).members.len());
        if let Some(outer) = around {
            match nested_decision(cx, outer, k, (limit, ask)) {
                Ok(()) => {
                    // Its runs may be long when every checkpointed loop
                    // around it counts them.
                    let counted = out
                        .loops
                        .iter()
                        .filter(|c| loops.of(c.k).contains(l.header))
                        .all(|c| counts_trips_of(c, k, &replayed));
                    within = Some((outer.k, counted));
                }
                Err((why, needed)) => {
                    out.skip(cx, l.header, why, needed && grows(plan));
                    continue;
                }
            }
        }
        match decide(cx, view, plan, k, (limit, ask, within), &unsafe_classes) {
            Ok(c) => {
                // `keep_direct_paths` only drops direct paths later, so a
                // loop without one now never has one.
                if c.direct.is_none() {
                    replayed.insert(c.k);
                }
                out.loops.push(c);
            }
            Err(why) => out.skip(cx, l.header, why, grows(plan)),
        }
    }
    keep_direct_paths(cx, &mut out.loops);
    // Tell each loop sized on entry which of the loops it counts take
    // snapshots, and from how many trips. A loop sized on entry itself
    // records directly only runs of the stretch it computes, which the
    // loops around it do not know: its snapshots always count.
    let direct: HashMap<usize, u64> = out
        .loops
        .iter()
        .map(|c| match (&c.direct, &c.sized) {
            (Some(d), None) => (c.k, d.runs),
            _ => (c.k, 0),
        })
        .collect();
    for c in &mut out.loops {
        if let Some(s) = c.sized.as_mut() {
            set_direct(&mut s.inner, &direct);
        }
    }
    for &h in &loops.others {
        if loops.multi.iter().any(|l| l.header == h) {
            continue;
        }
        if limit.is_some() || asked.contains_key(&h) {
            // It never reaches the return, so the pullback never runs.
            out.skip(cx, h, "it never leaves", false);
        }
    }
    Ok(out)
}

/// Sets the alias of each phi replaced on some iterations that may be
/// another header phi's array (`keeping`, [`Keepers`]): `alias` by
/// position among `carried`. Fails where one may be either of two. Returns,
/// by position, which may be another's only as a best iterate kept by
/// reference may be the array a phi takes afresh in every iteration
/// (`keep = r` after the step) or by a phi replaced on some iterations
/// only (since session 37): an array never one the loop entered with nor
/// one an either call handed back.
fn keepers_alias(
    carried: &[CarriedPhi],
    keeping: &[(Value, Value)],
    alias: &mut [Option<usize>],
) -> Result<Vec<bool>, String> {
    let handed: Vec<bool> = alias.iter().map(Option::is_some).collect();
    let mut kept_afresh = vec![false; carried.len()];
    for &(keep, taker) in keeping {
        let at = |v: Value| carried.iter().position(|c| c.1 == v);
        let (Some(i), Some(j)) = (at(keep), at(taker)) else {
            return Err("it carries an array a phi replaced on some iterations takes from a phi that is not carried".into());
        };
        if alias[i].is_some_and(|x| x != j) {
            return Err("it carries an array that may be either of two others".into());
        }
        // The taker may be replaced on some iterations only itself (an
        // accepted step, or a second phi taking its new array: since
        // session 37): its web makes arrays only (`replaced::mark`), never
        // an either call's, so the array it takes is never a header phi's
        // either. Where the two leave holding one array, `chosen_apart`
        // decides.
        kept_afresh[i] = !handed[i] && carried[j].3.is_some();
        alias[i] = Some(j);
    }
    Ok(kept_afresh)
}

/// Fails where the exits of a loop of `carried` arrays (with their
/// `alias`es) could give one array two shadows through the phis choosing
/// arrays on some iterations that leave it (`left`, [`Chosen`]). Such a
/// phi holding its header phi's array takes that phi's exit shadow, which
/// `primal::shared_exits` shares along the alias chains, where the header
/// phi is itself used after the loop (`escaping`); otherwise it takes the
/// exit shadow of the phi of those chains that leaves holding that array
/// (`primal::chain_exits`), or a fresh or entering one: then no phi of
/// another web of its chains may leave. One holding an array the
/// iteration made takes a fresh shadow of its own, or that array's where
/// it is its web's one made array and leaves through the same exits: two
/// such phis of webs sharing made arrays may hold one array only there.
/// (Session 36 checkpointed two best iterates kept by reference beside a
/// `while true` loop's breaks, neither header phi used after it, and got
/// their gradients wrong where the two held one array.)
fn chosen_apart(
    cx: &Derivation<'_>,
    (carried, alias): (&[CarriedPhi], &[Option<usize>]),
    left: &[Left],
    escaping: &HashSet<Value>,
) -> Result<(), String> {
    const ONE: &str = "it carries arrays that two of its phis replaced on some iterations may both hold where they leave it";
    // The phi at the end of each one's alias chain names its chains.
    let group = |v: Value| {
        let i = carried.iter().position(|c| c.1 == v)?;
        Some(alias_root(|j| alias[j], alias.len(), i))
    };
    let chosen: Vec<(&Left, &Chosen)> = left
        .iter()
        .filter_map(|x| x.chosen.as_ref().map(|ch| (x, ch)))
        .collect();
    for (a, (_, ch)) in chosen.iter().enumerate() {
        if escaping.contains(&ch.header) {
            continue;
        }
        let g = group(ch.header).ok_or(ONE)?;
        let web_leaves = chosen
            .iter()
            .enumerate()
            .any(|(b, (_, other))| b != a && group(other.header) == Some(g));
        if web_leaves {
            return Err(ONE.into());
        }
    }
    let made = |ch: &Chosen| cx.replaced.get(&ch.header).map_or(&[][..], |r| &r.made[..]);
    for (a, &(x, chx)) in chosen.iter().enumerate() {
        for &(y, chy) in &chosen[a + 1..] {
            if !made(chx).iter().any(|m| made(chy).contains(m)) {
                continue;
            }
            let one = chx.made.is_some()
                && chx.made == chy.made
                && left.iter().any(|m| {
                    Some(m.value) == chx.made
                        && m.shadow.is_some()
                        && x.exits.iter().chain(&y.exits).all(|e| m.exits.contains(e))
                });
            if !one {
                return Err(ONE.into());
            }
        }
    }
    Ok(())
}

/// Gives each carried array that may hold the array another entered with
/// ([`Found::held_entry`]) its flag and that one's entering shadow (added
/// to `inputs`), which it then starts and leaves with; the other is not
/// renewed (its first stretch's array and shadow must be the ones that
/// entered).
fn held_entries(
    cx: &Derivation<'_>,
    carried: &mut [Carried],
    held_entry: &[(Value, usize, Value, Value)],
    inputs: &mut Vec<Value>,
) {
    for &(keep, at, flag, entry) in held_entry {
        let entry = input_index(inputs, entry);
        let mut q = None;
        if let Some(c) = carried.iter_mut().find(|c| c.value == keep) {
            c.held_entry = Some(((at, flag), entry));
            q = cx.replaced.get(&keep).and_then(|r| r.held).map(|h| h.0);
        }
        if let Some(c) = carried.iter_mut().find(|c| Some(c.value) == q) {
            c.renewed = false;
        }
    }
}

/// Whether checkpointed loop `outer` counts the trips of loop `k` on entry
/// from its start and bound, and those of the loops inside `k`, at any
/// depth inside it ([`sized::InnerRuns::complete`]), and the runs of `k`
/// each iteration of `outer` makes: each loop between them counted too,
/// or one of `replayed`, checkpointed without a direct path (`outer`'s
/// stretch then holds its snapshots only, and its own estimate what its
/// stretch records; the checkpointed loops around `k` are each asked the
/// same). When every checkpointed loop around `k` does, `k`'s runs may be
/// recorded directly up to its own stretch ([`Direct::runs`]): each
/// estimate around it holds what such a run records, where one that took
/// `k`, a loop inside it or a loop around it as [`INNER_TRIPS`] trips
/// allowed that many only.
fn counts_trips_of(outer: &CkLoop, k: usize, replayed: &HashSet<usize>) -> bool {
    fn find(runs: &[sized::InnerRuns], k: usize, replayed: &HashSet<usize>) -> bool {
        runs.iter().any(|r| {
            (r.index == k && r.complete)
                || ((matches!(r.trips, sized::Trips::Counted { .. })
                    || replayed.contains(&r.index))
                    && find(&r.inner, k, replayed))
        })
    }
    outer
        .sized
        .as_ref()
        .is_some_and(|s| find(&s.inner, k, replayed))
}

/// Sets [`sized::InnerRuns::direct`] of `runs` and the loops inside them
/// from `direct`, the direct path's runs of each checkpointed loop (0
/// without one): `u64::MAX` for a loop not checkpointed.
fn set_direct(runs: &mut [sized::InnerRuns], direct: &HashMap<usize, u64>) {
    for r in runs {
        r.direct = direct.get(&r.index).copied().unwrap_or(u64::MAX);
        set_direct(&mut r.inner, direct);
    }
}

/// The decision for loop `k`, asked for by the limit or by a `checkpoint(n)`
/// in it (`ask`): the checkpointed loop, or why not. Changes `plan` only when
/// the loop is checkpointed. `within` is the innermost checkpointed loop
/// around it, and whether every checkpointed loop around it counts `k`'s
/// trips on entry ([`counts_trips_of`]).
fn decide(
    cx: &Derivation<'_>,
    view: &SweepView<'_>,
    plan: &mut TapePlan,
    k: usize,
    (limit, ask, within): (Option<u64>, Option<&Ask>, Option<(usize, bool)>),
    unsafe_classes: &HashSet<u32>,
) -> Result<CkLoop, String> {
    if let Some(a) = ask.filter(|a| a.n == 0) {
        return Err(a.refusal());
    }
    let pre = eligible(cx, k)?;
    let Found {
        carried,
        handed,
        keeping,
        held_entry,
        inner_kept,
    } = carried_arrays(cx, view, k)?;
    let escaping = escaping_arrays(cx, cx.shape.loops.of(k));
    let mut alias = aliases(cx, k, &carried, &handed)?;
    let kept_afresh = keepers_alias(&carried, &keeping, &mut alias)?;
    // An array handed on from another header phi holds, after fewer
    // iterations than its depth, an array that entered the loop through
    // another phi: where every latch hands it one phi, down to one made
    // afresh, the exits name that phi's entering shadow by the iterations
    // run ([`held_chain`]).
    let mut held_of: HashMap<Value, Vec<Value>> = HashMap::default();
    for &r in handed.keys().filter(|r| escaping.contains(r)) {
        let chain = held_chain(cx, k, r, (&carried, &handed)).ok_or(
            "it carries an array another of its arrays held the iteration before, and uses it after it",
        )?;
        held_of.insert(r, chain);
    }
    // Stretches at least as long as the deepest such phi's depth: each
    // stretch but the first then starts with arrays the loop made, which a
    // replay starts afresh, as for an array made in every iteration.
    let least = handed.values().copied().max().unwrap_or(1);
    let leave = leave_shape(cx, k).or_else(|| regions(cx, (view, plan), (k, &carried), &escaping));
    let mut left = Vec::new();
    let mut kept_left = Vec::new();
    if !escaping.iter().all(|v| {
        let is_carried = carried
            .iter()
            .any(|c| c.1 == *v && (leave.is_some() || c.4.is_some() || c.3.is_none()));
        is_carried
            || kept_leaving(cx, view, (k, &carried), *v).is_some_and(|x| {
                kept_left.push(x);
                true
            })
            || (!carried.iter().any(|c| c.1 == *v)
                && leave
                    .as_ref()
                    .and_then(|lv| left_array(cx, view, (k, &carried, &escaping), *v, lv))
                    .is_some_and(|x| {
                        left.push(x);
                        true
                    }))
    }) {
        // Only where the exits meet fails when every such array is carried.
        let carried_only = escaping.iter().all(|v| carried.iter().any(|c| c.1 == *v));
        return Err(match carried_only {
            true => "an array it makes is used after it, and its exits lead to different blocks",
            false => "an array it makes is used after it",
        }
        .into());
    }
    // A phi that may be another's array leaves with that one's shadow where
    // it is that one (`primal::shared_exits`), but not beside arrays the
    // last iteration made (an either call's, perhaps the array it was
    // given), whose shadows would be others again; but a best iterate kept
    // afresh (`keepers_alias`; since session 36; `Chosen::made`).
    if !left.is_empty()
        && carried
            .iter()
            .zip(&alias)
            .enumerate()
            .any(|(i, (c, a))| a.is_some() && escaping.contains(&c.1) && !kept_afresh[i])
    {
        return Err(
            "it carries an array that may be another it carries (an either call handed it back, or it took the other's), uses it after it and an array its last iteration made"
                .into(),
        );
    }
    chosen_apart(cx, (&carried, &alias), &left, &escaping)?;
    let bytes = bytes_per_iteration(cx, view, plan, k);
    let (stretch, source) = match (ask, limit) {
        (Some(a), _) => (a.n.max(least), a.source()),
        (None, Some(limit)) => {
            if bytes == 0 {
                return Err("it records nothing per iteration".into());
            }
            ((limit / 2 / bytes).max(least), StretchSource::Limit(limit))
        }
        (None, None) => return Err("no tape limit".into()),
    };
    let shape = &cx.shape;
    let l = shape.loops.of(k);
    let mut inputs = region::inputs(cx, view, plan, k);
    let arrays = region::arrays(cx, view, &inputs, k, unsafe_classes);
    // The shadows entering the loop with its carried arrays are inputs too.
    let mut carried = carried_of(cx, k, (carried, alias), (&escaping, &held_of), &mut inputs);
    held_entries(cx, &mut carried, &held_entry, &mut inputs);
    let counted = plan.counted_slots().get(k).is_some_and(Option::is_some);
    // The direct path replaces the entering block's jump by the test.
    let plain_entry = matches!(shape.bb.blocks[pre].term,
        super::bbcode::BTerm::Goto(h) if h == shape.bb.blocks[l.header].id);
    let direct = match source {
        StretchSource::Limit(_)
            if counted && plain_entry && carried.is_empty() && left.is_empty() =>
        {
            entry_test(cx, k).map(|test| Direct {
                test,
                runs: match within {
                    Some((_, false)) => stretch.min(INNER_TRIPS),
                    Some((_, true)) | None => stretch,
                },
            })
        }
        _ => None,
    };
    let entry_index = match counted {
        true => None,
        false => match plan.branch_from(shape.bb.blocks[pre].id) {
            Some(br) => Some(br.pushed()),
            None => return Err("its entering block records no index".into()),
        },
    };
    if entry_index.is_some() {
        plan.take_branch(shape.bb.blocks[pre].id);
    }
    for &e in &l.exits {
        let exit = shape.bb.blocks[e].id;
        for &v in &inputs {
            // A value pushed once per call is popped where the pullback starts.
            if !plan.once().any(|s| s.value == v) {
                plan.add_block_end_save(exit, cx.label(e), v, view.fwd.values[v].ty.clone());
            }
        }
        // The shadow a carried array leaves the loop with, for the pullback
        // to copy into the shadow the last stretch ends with.
        for c in carried.iter().filter(|c| c.escapes) {
            if let Some((sphi, _)) = c.shadow {
                plan.add_block_end_save(exit, cx.label(e), sphi, c.ty.clone());
            }
        }
        // And the shadow an array the last iteration made leaves with.
        for x in left.iter().filter(|x| x.exits.contains(&e)) {
            if let Some(s) = x.shadow {
                plan.add_block_end_save(exit, cx.label(e), s, x.ty.clone());
            }
        }
    }
    // Arrays made in the loop and recorded cost their elements: under a
    // limit the stretch shortens on entry for their lengths, where those
    // are known on entry, and for the longest array input otherwise.
    // For a loop carrying arrays through its header only when each is made
    // afresh in every iteration or replaced on some iterations only:
    // compiled code frees what their replays make (docs/codegen.md,
    // "Freeing arrays", "Choosing phis"), where the others' (kept as they
    // are) replays keep a few arrays each, and shorter stretches would
    // replay, and keep, more of them.
    let count_fresh = carried.iter().all(|c| c.afresh() || c.replaced.is_some());
    // And loops inside it that may run long count, on entry, the trips
    // their bounds give and the snapshots each of their runs keeps.
    let sized = match &source {
        StretchSource::Limit(limit) => {
            let lengths: Vec<usize> = inputs
                .iter()
                .enumerate()
                .filter(|&(_, &v)| matches!(view.fwd.values[v].ty, irad_ir::Type::Array(_)))
                .map(|(j, _)| j)
                .collect();
            let found = sized::inner_runs(
                cx,
                (view, plan),
                k,
                (&inputs, !lengths.is_empty(), count_fresh),
                unsafe_classes,
            );
            // What calls record counts by the arrays the loop enters with
            // too, when it has no array inputs.
            let entered = found.outside.len() > found.scalars.len();
            ((found.fresh > 0 && (!lengths.is_empty() || found.called > 0 && entered))
                || !found.known.is_empty()
                || !found.runs.is_empty())
            .then_some(sized::RunStretch {
                half: limit / 2,
                fresh: found.fresh,
                called: found.called,
                known: found.known,
                lengths,
                own: bytes.saturating_sub(found.bytes),
                inner: found.runs,
                range: found.range,
                outside: found.outside,
                scalars: found.scalars,
            })
        }
        _ => None,
    };
    let (plain, revolve) = thinning(
        cx,
        k,
        (limit, within.is_some()),
        (arrays.is_empty() && carried.is_empty(), sized.as_ref()),
    );
    Ok(CkLoop {
        k,
        pre,
        latches: shape.preds[l.header]
            .iter()
            .copied()
            .filter(|&p| l.contains(p))
            .collect(),
        stretch,
        least,
        handed: handed.len(),
        source,
        bytes,
        sized,
        run_stretch: None,
        input_types: inputs
            .iter()
            .map(|&v| view.fwd.values[v].ty.clone())
            .collect(),
        repush: k >= shape.loops.loops.len(),
        inputs,
        arrays,
        carried,
        inner_kept,
        left,
        kept_left,
        leave: leave.unwrap_or_default(),
        within: within.map(|(o, _)| o),
        entry_index,
        counted,
        direct,
        flag: None,
        plain,
        revolve,
        counts: Vec::new(),
        split: None,
        replay: None,
        state: Vec::new(),
        replayed: HashMap::default(),
        replay_renamed: HashMap::default(),
        replay_renamed_at: primal::ExitShown::default(),
    })
}

/// How checkpointed loop `k` thins its snapshots: the stretches that keep
/// theirs before the binary counter starts ([`CkLoop::plain`]), or, for a
/// counted loop whose header's test reads a bound from before it (its trip
/// count known on entry), the binomial schedule. Under `limit`, with
/// snapshots of scalars only (`scalar`; `sized` the stretch computed on
/// entry, pushed with each snapshot when saved), the room half the limit
/// gives counts; a loop inside another's replay (`inside`) keeps few
/// binomial snapshots whatever the limit, since the outer stretch's
/// estimate counts `1 + log2` of them.
fn thinning(
    cx: &Derivation<'_>,
    k: usize,
    (limit, inside): (Option<u64>, bool),
    (scalar, sized): (bool, Option<&sized::RunStretch>),
) -> (u64, Option<Revolve>) {
    let l = cx.shape.loops.of(k);
    let test = l.counted.as_ref().and_then(|_| entry_test(cx, k));
    // A flag, the stretch's index, its slots (binomial), the stretch when
    // saved, and the header phis' values.
    let saved = sized.is_some_and(sized::RunStretch::saved);
    let size: u64 = 9
        + 8 * u64::from(test.is_some())
        + 8 * u64::from(saved)
        + replay::header_phis(cx, l.header)
            .iter()
            .map(|&(_, r)| tape_value_bytes(&cx.src.values[r].ty))
            .sum::<u64>();
    let room = match (limit, scalar) {
        (Some(limit), true) => limit / 2 / size,
        _ => 0,
    };
    match test {
        Some(test) => (
            0,
            Some(Revolve {
                test,
                least: if inside { 0 } else { room },
                room: limit.filter(|_| !scalar && !inside).map(|b| (b / 2, size)),
            }),
        ),
        None => (room.max(2).saturating_sub(THIN_SLACK), None),
    }
}

/// A loop's direct path records the loops checkpointed inside it in full
/// (`direct.rs`): each of them must take its own direct path there, which
/// its reverse knows by the flag at its exit. So a loop keeps its direct
/// path only when every checkpointed loop inside it (at any depth) has one
/// too, arrays made in it do not size its stretch (its inner loops' trips
/// may), and its trip count is
/// known where the outer loop is entered (its start and bound defined
/// before that loop), so that the outer loop's test can tell whether the
/// inner runs are short enough as well. Dropping one loop's direct path can
/// drop those of the loops around it: repeated until none changes.
fn keep_direct_paths(cx: &Derivation<'_>, cks: &mut [CkLoop]) {
    let loops = &cx.shape.loops;
    loop {
        let mut dropped = false;
        for i in 0..cks.len() {
            if cks[i].direct.is_none() {
                continue;
            }
            let outer = loops.of(cks[i].k);
            let keeps = cks.iter().all(|d| {
                d.k == cks[i].k
                    || !outer.contains(loops.of(d.k).header)
                    || inner_direct(cx, d, cks[i].k).is_some()
            });
            if !keeps {
                cks[i].direct = None;
                dropped = true;
            }
        }
        if !dropped {
            break;
        }
    }
}

/// The direct path of checkpointed loop `d`, inside loop `outer`, when the
/// direct path of `outer` can record it in full ([`keep_direct_paths`]).
pub(super) fn inner_direct<'c>(
    cx: &Derivation<'_>,
    d: &'c CkLoop,
    outer: usize,
) -> Option<&'c Direct> {
    let direct = d.direct.as_ref()?;
    // Sized for the trips of its inner loops only, it records runs of at
    // most what the outer loop's estimate assumed (`Direct::runs`).
    if d.sized
        .as_ref()
        .is_some_and(sized::RunStretch::counts_arrays)
        || !d.carried.is_empty()
    {
        return None;
    }
    let counted = cx.shape.loops.of(d.k).counted.as_ref()?;
    let o = cx.shape.loops.of(outer);
    let before = |op: Operand| match op {
        Operand::Const(_) => true,
        Operand::Value(v) => match cx.src.values[v].def {
            irad_ir::ValueDef::Param(_) => true,
            irad_ir::ValueDef::Inst(i) => (*cx.places.get(i))
                .and_then(|(b, _)| cx.shape.bb.index()[b])
                .is_some_and(|p| !o.contains(p)),
        },
    };
    (before(direct.test.bound) && before(counted.init)).then_some(direct)
}

/// When counted loop `k` goes on while its counter compares below (or
/// above, stepping down) a bound defined before it, and leaves when the
/// comparison fails: how its trip count is known on entry.
fn entry_test(cx: &Derivation<'_>, k: usize) -> Option<EntryTest> {
    let shape = &cx.shape;
    let l = shape.loops.of(k);
    let c = l.counted.as_ref()?;
    let super::bbcode::BTerm::Br {
        cond: Operand::Value(cond),
        else_,
        ..
    } = &shape.bb.blocks[l.header].term
    else {
        return None;
    };
    if shape.bb.index()[*else_] != Some(l.exit) {
        return None;
    }
    let irad_ir::ValueDef::Inst(inst) = cx.src.values[*cond].def else {
        return None;
    };
    if !shape.bb.blocks[l.header].stmts.contains(&inst) {
        return None;
    }
    let InstKind::Prim { prim, args } = &cx.src.insts[inst].kind else {
        return None;
    };
    let iv = Operand::Value(c.iv);
    // (counter compared first, below-type comparison, strict)
    let (first, below, strict) = match prim {
        Prim::Lt => (true, true, true),
        Prim::Le => (true, true, false),
        Prim::Gt => (true, false, true),
        Prim::Ge => (true, false, false),
        _ => return None,
    };
    let (bound, below) = match args.as_slice() {
        [a, b] if *a == iv && first => (*b, below),
        [a, b] if *b == iv => (*a, !below),
        _ => return None,
    };
    // Counting up towards a bound above, or down towards one below.
    let up = c.step > 0;
    if up != below {
        return None;
    }
    let outside = match bound {
        Operand::Value(v) => match cx.src.values[v].def {
            irad_ir::ValueDef::Param(_) => true,
            irad_ir::ValueDef::Inst(d) => (*cx.places.get(d))
                .and_then(|(b, _)| shape.bb.index()[b])
                .is_some_and(|p| !l.contains(p)),
        },
        Operand::Const(_) => true,
    };
    outside.then_some(EntryTest { bound, up, strict })
}

/// Whether loop `k`, inside the checkpointed loop `outer`, is checkpointed
/// too (inside `outer`'s replay function), or why not: when it asks with a
/// `checkpoint(n)` of its own (n > 0), or under a limit when one iteration
/// of `outer` records more than half of it (its stretches are then single
/// iterations, which would still exceed the limit) or when its trip count
/// is not a constant of at most [`INNER_TRIPS`] (the estimate `outer`'s
/// stretch rests on counts it that many times; [`short_constant`]). `outer`
/// is the innermost checkpointed loop around `k`, at any depth: it may be
/// checkpointed inside another loop's replay itself, and `k` then inside
/// its replay. A refusal says whether `k` needed checkpointing: one that
/// did not records a short run within each of `outer`'s stretches, so its
/// records do not grow with the run ([`SkippedLoop::grows`]).
fn nested_decision(
    cx: &Derivation<'_>,
    outer: &CkLoop,
    k: usize,
    (limit, ask): (Option<u64>, Option<&Ask>),
) -> Result<(), (String, bool)> {
    let loops = &cx.shape.loops;
    let o = cx.label(loops.of(outer.k).header);
    let needed = match (ask, limit) {
        (Some(a), _) => a.n > 0,
        (None, Some(b)) => (outer.stretch == 1 && outer.bytes > b / 2) || !short_constant(cx, k),
        (None, None) => false,
    };
    if !needed {
        return Err((
            format!("it is inside loop #{o}, which is checkpointed"),
            false,
        ));
    }
    let outer_loop = loops.of(outer.k);
    if !loops.of(k).exits.iter().all(|&e| outer_loop.contains(e)) {
        return Err((
            format!("it leaves loop #{o} too, which is checkpointed"),
            true,
        ));
    }
    Ok(())
}

/// Whether loop `k` is a counted loop whose trip count is a constant of at
/// most [`INNER_TRIPS`] (its start and bound constants): the estimate of
/// the bytes an iteration of a loop around it records is then not too low
/// for it. Any other loop inside a checkpointed one may run longer than the
/// estimate assumed, so under a limit it is checkpointed too, inside the
/// outer loop's replay; a counted one records a run of at most
/// `INNER_TRIPS` iterations directly, or more when the loops around it
/// count its trips ([`Direct::runs`]).
fn short_constant(cx: &Derivation<'_>, k: usize) -> bool {
    let Some(c) = cx.shape.loops.of(k).counted.as_ref() else {
        return false;
    };
    let Some(EntryTest { bound, .. }) = entry_test(cx, k) else {
        return false;
    };
    let (Operand::Const(Const::I64(start)), Operand::Const(Const::I64(end))) = (c.init, bound)
    else {
        return false;
    };
    let span = i128::from(end) - i128::from(start);
    span.abs() <= i128::from(INNER_TRIPS) * i128::from(c.step).abs()
}

/// Whether loop `k` can be checkpointed: the position of the one block
/// outside it that enters it, or why not.
fn eligible(cx: &Derivation<'_>, k: usize) -> Result<usize, String> {
    let shape = &cx.shape;
    let l = shape.loops.of(k);
    if !shape.kept(l.header) || !l.exits.iter().all(|&e| shape.kept(e)) {
        return Err("it does not reach the return".into());
    }
    let outside: Vec<usize> = shape.preds[l.header]
        .iter()
        .copied()
        .filter(|&p| !l.contains(p))
        .collect();
    let [pre] = outside.as_slice() else {
        return Err("more than one block enters it".into());
    };
    Ok(*pre)
}

/// A carried array as [`carried_arrays`] finds it: the header phi's index
/// and result, the array's type, and for an array made afresh each
/// iteration that has a shadow, the header's shadow phi and the shadow
/// entering the loop (values of the forward sweep); for one kept as it is,
/// its [`Kept`] shadow.
/// What [`carried_arrays`] finds in a loop.
struct Found {
    /// The carried arrays, in the order of the header's phis.
    carried: Vec<CarriedPhi>,
    /// The phis handed another's array, by their depth (over 1).
    handed: HashMap<Value, u64>,
    /// Each phi replaced on some iterations by an array another header phi
    /// takes as made afresh in every iteration (`keep = r`, the best
    /// iterate), with that phi: at the header it may be that one's array.
    keeping: Vec<(Value, Value)>,
    /// Each phi replaced on some iterations that takes another header
    /// phi's array (`if better { keep = r; } r = step(r);`), with its flag
    /// saying it holds the array that phi entered with (its position among
    /// the header's phis) and that phi's entering shadow.
    held_entry: Vec<(Value, usize, Value, Value)>,
    /// The kept phis inside the loop that the header's kept phis take their
    /// arrays through ([`InnerKept`]).
    inner_kept: Vec<InnerKept>,
}

type CarriedPhi = (
    usize,
    Value,
    irad_ir::Type,
    Option<(Value, Value)>,
    Option<Kept>,
    Option<(usize, Value)>,
    bool,
);

/// Whether statement `d` of primal `src` makes a new array every time it
/// runs: `copy`, `zeros`, `alloc`, a call of a function of `fresh`
/// (`fresh.rs`: one that returns a new array, whose forward sweep returns a
/// new zero shadow with it), or a `getfield` of `fresh` taking such a field
/// of a call's tuple result (`fresh_fields.rs`).
pub(super) fn makes_array(src: &Func, fresh: &crate::reverse::fresh::Fresh, d: Inst) -> bool {
    match &src.insts[d].kind {
        InstKind::Prim {
            prim: Prim::Getfield,
            ..
        } => src.insts[d]
            .result
            .is_some_and(|r| fresh.values.contains(&r)),
        InstKind::Prim { prim, .. } => matches!(prim, Prim::Copy | Prim::Zeros | Prim::Alloc),
        InstKind::Invoke { func, .. } => fresh.returns(func),
        _ => false,
    }
}

/// `v`, or, when a call of a function that returns one of its parameters
/// (`fresh.rs`) gives it, the array passed there, through such calls; and
/// through phis, not a loop header's, all of whose entries are, so, one
/// value (or the phi itself: `if c { a = touch(a); }`, since session 28).
/// Seen from loop `k`, the header phis of the loops inside it are followed
/// so too (since session 33: `let mut b = a; for .. { b = touch(b); } a =
/// b;`): such a phi holds, on every visit, the one array it entered with.
fn passed_through(cx: &Derivation<'_>, v: Value, k: usize) -> Value {
    through(cx, v, &mut Vec::new(), (k, &|_| false))
}

/// [`passed_through`], stopping at the first value `stop` accepts.
fn passed_through_until(
    cx: &Derivation<'_>,
    v: Value,
    k: usize,
    stop: &dyn Fn(Value) -> bool,
) -> Value {
    through(cx, v, &mut Vec::new(), (k, stop))
}

/// The array a kept field of a call's tuple result is (`fresh.rs`,
/// `fresh_fields.rs`): `v` a `getfield` (or a chain of them) of a call's
/// result taking such a field, the argument the callee hands back there,
/// followed into it for a field of a tuple argument through `tuple`
/// statements, `getfield`s and other calls' kept fields (`ident(push(..))`).
/// `None` when `v` is no such field or the argument's part is not one value
/// of the caller.
pub(super) fn kept_field_source(cx: &Derivation<'_>, v: Value) -> Option<Value> {
    // The chain must start at a call; the loop below takes its kept field
    // first.
    let (mut w, mut part) = getfield_root(&cx.src, v)?;
    let irad_ir::ValueDef::Inst(d) = cx.src.values[w].def else {
        return None;
    };
    if !matches!(cx.src.insts[d].kind, InstKind::Invoke { .. }) {
        return None;
    }
    for _ in 0..cx.src.values.len() {
        let Some((&k, rest)) = part.split_first() else {
            return Some(w);
        };
        let irad_ir::ValueDef::Inst(d) = cx.src.values[w].def else {
            return None;
        };
        match &cx.src.insts[d].kind {
            InstKind::Prim {
                prim: irad_ir::Prim::Tuple,
                args,
            } => {
                let Operand::Value(x) = *args.get(k as usize)? else {
                    return None;
                };
                w = x;
                part = rest.to_vec();
            }
            InstKind::Prim {
                prim: irad_ir::Prim::Getfield,
                args,
            } => match args.as_slice() {
                [Operand::Value(t), Operand::Const(irad_ir::Const::I64(i))] => {
                    w = *t;
                    part.insert(0, u32::try_from(*i).ok()?);
                }
                _ => return None,
            },
            // Another call's result, whose kept field is the part.
            InstKind::Invoke { func, args } => {
                let (j, inner) = cx.kept_fields.get(&(*func, part.clone()))?;
                let Operand::Value(x) = *args.get(*j)? else {
                    return None;
                };
                w = x;
                part.clone_from(inner);
            }
            _ => return None,
        }
    }
    None
}

/// The value a chain of `getfield`s with constant indices ending in `v`
/// starts from, and the path they take, outermost first; `None` when `v`
/// is no `getfield` of that kind.
fn getfield_root(src: &Func, mut v: Value) -> Option<(Value, Vec<u32>)> {
    let mut path = Vec::new();
    for _ in 0..src.values.len() {
        let irad_ir::ValueDef::Inst(d) = src.values[v].def else {
            break;
        };
        match &src.insts[d].kind {
            InstKind::Prim {
                prim: irad_ir::Prim::Getfield,
                args,
            } => match args.as_slice() {
                [Operand::Value(t), Operand::Const(irad_ir::Const::I64(i))] => {
                    path.push(u32::try_from(*i).ok()?);
                    v = *t;
                }
                _ => return None,
            },
            _ => break,
        }
    }
    path.reverse();
    (!path.is_empty()).then_some((v, path))
}

/// The value a chain of constant `getfield`s ending in `v` starts from;
/// `v` itself when it is no such `getfield`.
fn getfield_base(src: &Func, v: Value) -> Value {
    getfield_root(src, v).map_or(v, |(t, _)| t)
}

/// Whether statement `d` is in a loop's header block.
fn heads_loop(cx: &Derivation<'_>, d: Inst) -> bool {
    let index = cx.shape.bb.index();
    (*cx.places.get(d))
        .and_then(|(b, _)| index[b])
        .is_none_or(|at| cx.shape.loops.inner[at] == Some(at))
}

/// Whether statement `d` is a phi of the header of a loop inside loop `k`
/// (not `k`'s own).
fn heads_inner_loop(cx: &Derivation<'_>, d: Inst, k: usize) -> bool {
    let l = cx.shape.loops.of(k);
    let index = cx.shape.bb.index();
    (*cx.places.get(d))
        .and_then(|(b, _)| index[b])
        .is_some_and(|at| at != l.header && l.contains(at) && cx.shape.loops.inner[at] == Some(at))
}

/// [`passed_through`], with the phis met (`seen`, at most 64): each being
/// followed stands for itself, each followed to the end for what it gave
/// (an inner loop's phi met again through the exit phi after it).
fn through(
    cx: &Derivation<'_>,
    mut v: Value,
    seen: &mut Vec<(Value, Option<Value>)>,
    (k, stop): (usize, &dyn Fn(Value) -> bool),
) -> Value {
    for _ in 0..cx.src.values.len() {
        if stop(v) {
            break;
        }
        let irad_ir::ValueDef::Inst(d) = cx.src.values[v].def else {
            break;
        };
        match &cx.src.insts[d].kind {
            InstKind::Invoke { func, args } => {
                match cx.passthrough.get(func).and_then(|&j| args.get(j)) {
                    Some(Operand::Value(w)) => v = *w,
                    _ => break,
                }
            }
            InstKind::Prim {
                prim: irad_ir::Prim::Getfield,
                ..
            } => match kept_field_source(cx, v) {
                Some(w) => v = w,
                None => break,
            },
            // Not loop `k`'s header phi (which the caller asks about), nor
            // that of a loop around it.
            InstKind::Phi { entries } if !heads_loop(cx, d) || heads_inner_loop(cx, d, k) => {
                match seen.iter().find(|(p, _)| *p == v) {
                    Some(&(_, Some(w))) if w != v => {
                        v = w;
                        continue;
                    }
                    Some(_) => break,
                    None if seen.len() >= 64 => break,
                    None => {}
                }
                seen.push((v, None));
                let mut one = None;
                for (_, e) in entries {
                    let Operand::Value(e) = e else { return v };
                    let w = through(cx, *e, seen, (k, stop));
                    match one {
                        _ if w == v => {}
                        None => one = Some(w),
                        Some(o) if o == w => {}
                        Some(_) => return v,
                    }
                }
                let at = seen.iter().position(|(p, _)| *p == v);
                if let (Some(at), Some(w)) = (at, one) {
                    seen[at].1 = Some(w);
                }
                match one {
                    Some(w) => v = w,
                    None => break,
                }
            }
            _ => break,
        }
    }
    v
}

/// A call, in loop `k`, of a function returning a fresh array or its
/// parameter (`either`), passed header phi `r` there or what another such
/// call gives (`a = either(either(a))`), as `op` (a latch's entry of `r`):
/// the array it gives is the one `r` holds or a new one.
/// Or a phi of the loop's own blocks choosing among such calls' results
/// and `r` (`let b = either(a, ..); if better { a = b; }`), and such phis
/// (the *web*). It is carried as one made afresh (`op`, returned) when no
/// value but `r` may hold the arrays `r` holds at the header: `r` enters
/// with an array made for it that nothing else uses (but primitives that
/// take no reference and run before the header: [`after_header`]), and in the loop the
/// calls' results and the web's phis go nowhere but into the web and back
/// into `r` (and element reads and writes), and `r` nowhere but into the
/// calls and the web's phis; or but header phis `r` hands its array to
/// ([`handers`], which may enter with `r`'s array too), whose snapshots
/// tell when they hold `r`'s ([`Carried::alias`]). A replay then starts from a copy of the
/// snapshot, as for an array made afresh; within a stretch the replay runs
/// the same statements, so the arrays alias as they did. After the loop
/// either may go anywhere (an exit phi, a call): the run's arrays are no
/// replay's, and a call's result leaves as an array the last iteration made
/// ([`left_array`]), one array whichever way the call went.
fn either_inside(cx: &Derivation<'_>, k: usize, op: &Operand, r: Value) -> Option<Value> {
    let shape = &cx.shape;
    let l = shape.loops.of(k);
    let index = shape.bb.index();
    let inside = |b: &Block| index[*b].is_some_and(|p| l.contains(p));
    let Operand::Value(v) = op else { return None };
    // The web from `op`: its values and their statements.
    let mut web: Vec<(Value, Inst)> = Vec::new();
    let mut calls = 0;
    let mut todo = vec![*v];
    while let Some(w) = todo.pop() {
        if w == r || web.iter().any(|&(x, _)| x == w) {
            continue;
        }
        if web.len() >= 64 {
            return None;
        }
        let irad_ir::ValueDef::Inst(d) = cx.src.values[w].def else {
            return None;
        };
        let at = (*cx.places.get(d)).and_then(|(b, _)| index[b])?;
        match &cx.src.insts[d].kind {
            // Passed `r`, or what another call or phi of the web gives
            // (`a = either(either(a))`): the array `r` holds or a new one
            // either way.
            InstKind::Invoke { func, args } if l.contains(at) => {
                let j = *cx.either.get(func)?;
                match args.get(j) {
                    Some(Operand::Value(a)) if *a == r => {}
                    Some(Operand::Value(a)) => todo.push(*a),
                    _ => return None,
                }
                calls += 1;
            }
            // A phi of the loop's own blocks (not its header, not an inner
            // loop's), choosing among the web and `r`.
            InstKind::Phi { entries }
                if at != l.header && shape.loops.inner[at] == Some(l.header) =>
            {
                for (_, e) in entries {
                    let Operand::Value(e) = e else { return None };
                    todo.push(*e);
                }
            }
            _ => return None,
        }
        web.push((w, d));
    }
    if calls == 0 {
        return None;
    }
    let irad_ir::ValueDef::Inst(phi) = cx.src.values[r].def else {
        return None;
    };
    let InstKind::Phi { entries } = &cx.src.insts[phi].kind else {
        return None;
    };
    // `r` may be handed on to other header phis (`prev = cur; cur =
    // either(cur)`): such a phi may then hold `r`'s array, which the
    // snapshots tell (`Carried::alias`); it may enter with `r`'s array too.
    let handers = handers(cx, k, r);
    let mut entered: Vec<Inst> = vec![phi];
    entered.extend(&handers);
    let made_for_it = |e: &Operand| match e {
        Operand::Value(e) => {
            let irad_ir::ValueDef::Inst(m) = cx.src.values[*e].def else {
                return false;
            };
            let Some(made_at) = (*cx.places.get(m)).and_then(|(b, _)| index[b]) else {
                return false;
            };
            // Element reads and writes before the loop (`a[0] = x;`) leave
            // the array to it: they run before its header, never after
            // (but on an array made again, in a loop around it).
            let after = after_header(&shape.succs, l.header, made_at);
            makes_array(&cx.src, &cx.fresh, m)
                && every_use_is(
                    cx,
                    (*e, &entered),
                    |_| true,
                    |i, prim| !after[i] && prim.keeps_no_reference(),
                )
        }
        Operand::Const(_) => false,
    };
    let reads = |_: usize, prim: Prim| prim.keeps_no_reference();
    let mut within: Vec<Inst> = web.iter().map(|&(_, d)| d).collect();
    within.push(phi);
    within.extend(handers);
    (entries
        .iter()
        .filter(|(p, _)| !inside(p))
        .all(|(_, e)| made_for_it(e))
        && every_use_is(cx, (r, &within), |i| l.contains(i), reads)
        && web
            .iter()
            .all(|&(w, _)| every_use_is(cx, (w, &within), |i| l.contains(i), reads)))
    .then_some(*v)
}

/// The blocks (by position) that run after `header` before block `made`
/// runs again: reachable from it on paths that do not pass `made`.
fn after_header(succs: &[smallvec::SmallVec<[usize; 2]>], header: usize, made: usize) -> Vec<bool> {
    let mut seen = vec![false; succs.len()];
    let mut todo = vec![header];
    while let Some(b) = todo.pop() {
        if b == made || std::mem::replace(&mut seen[b], true) {
            continue;
        }
        todo.extend(succs[b].iter().copied());
    }
    seen
}

/// Loop `k`'s carried arrays as [`carried_arrays`] finds them, with the
/// phis they may be (`alias`, by position), the arrays used after the loop
/// (`escaping`) and the entering shadows held ones may leave with
/// (`held_of`), the shadows entering the loop added to its `inputs`. An
/// array that may be another is restored into the run's array, as that
/// one is: neither is renewed.
fn carried_of(
    cx: &Derivation<'_>,
    k: usize,
    (carried, alias): (Vec<CarriedPhi>, Vec<Option<usize>>),
    (escaping, held_of): (&HashSet<Value>, &HashMap<Value, Vec<Value>>),
    inputs: &mut Vec<Value>,
) -> Vec<Carried> {
    let shared: Vec<bool> = (0..carried.len())
        .map(|i| alias[i].is_some() || alias.contains(&Some(i)))
        .collect();
    carried
        .into_iter()
        .zip(alias.into_iter().zip(shared))
        .map(
            |((phi, value, ty, shadow, kept, replaced, fresh), (alias, shared))| Carried {
                phi,
                value,
                alias,
                fresh,
                renewed: fresh && !shared && renewed(cx, k, value),
                replaced,
                escapes: escaping.contains(&value),
                ty,
                kept,
                shadow: shadow.map(|(sphi, entry)| (sphi, input_index(inputs, entry))),
                held: held_of
                    .get(&value)
                    .into_iter()
                    .flatten()
                    .map(|&e| input_index(inputs, e))
                    .collect(),
                held_entry: None,
            },
        )
        .collect()
}

/// The header phis of loop `k` that header phi `r` enters from a latch
/// (`prev = r`).
fn handers(cx: &Derivation<'_>, k: usize, r: Value) -> Vec<Inst> {
    let l = cx.shape.loops.of(k);
    let index = cx.shape.bb.index();
    replay::header_phis(cx, l.header)
        .into_iter()
        .filter(|&(inst, _)| match &cx.src.insts[inst].kind {
            InstKind::Phi { entries } => entries.iter().any(|(p, op)| {
                *op == Operand::Value(r) && index[*p].is_some_and(|p| l.contains(p))
            }),
            _ => false,
        })
        .map(|(inst, _)| inst)
        .collect()
}

/// Whether header phi `r` of loop `k` takes, from some latch, a call of an
/// either function passed `r` ([`either_inside`]): the array it holds may
/// be the one it held the iteration before.
fn handed_back(cx: &Derivation<'_>, k: usize, r: Value) -> bool {
    let l = cx.shape.loops.of(k);
    let index = cx.shape.bb.index();
    let irad_ir::ValueDef::Inst(phi) = cx.src.values[r].def else {
        return false;
    };
    let InstKind::Phi { entries } = &cx.src.insts[phi].kind else {
        return false;
    };
    entries.iter().any(|(p, op)| {
        index[*p].is_some_and(|p| l.contains(p)) && either_inside(cx, k, op, r).is_some()
    })
}

/// For each of loop `k`'s `carried` arrays (by position), the carried array
/// whose array it may be at the header ([`Carried::alias`]): a phi handed
/// the array of a phi that an either call may hand back its array
/// (`prev = cur; cur = either(cur)`: `prev` is `cur` when the call handed
/// it back), or of a phi that may itself be another's. Fails when such a
/// phi is handed other arrays too, by other latches.
fn aliases(
    cx: &Derivation<'_>,
    k: usize,
    carried: &[CarriedPhi],
    handed: &HashMap<Value, u64>,
) -> Result<Vec<Option<usize>>, String> {
    let l = cx.shape.loops.of(k);
    let index = cx.shape.bb.index();
    let mut alias = vec![None; carried.len()];
    // By depth: the phi handing its array is settled first.
    let mut order: Vec<(u64, usize)> = carried
        .iter()
        .enumerate()
        .filter_map(|(i, c)| handed.get(&c.1).map(|&d| (d, i)))
        .collect();
    order.sort_unstable();
    for (_, i) in order {
        let irad_ir::ValueDef::Inst(phi) = cx.src.values[carried[i].1].def else {
            continue;
        };
        let InstKind::Phi { entries } = &cx.src.insts[phi].kind else {
            continue;
        };
        let from: Vec<Value> = entries
            .iter()
            .filter(|(p, _)| index[*p].is_some_and(|p| l.contains(p)))
            .filter_map(|(_, op)| match op {
                Operand::Value(v) => Some(*v),
                Operand::Const(_) => None,
            })
            .collect();
        let may_share = |j: usize| alias[j].is_some() || handed_back(cx, k, carried[j].1);
        let sharing: Vec<usize> = from
            .iter()
            .filter_map(|v| carried.iter().position(|c| c.1 == *v))
            .filter(|&j| may_share(j))
            .collect();
        let Some(&j) = sharing.first() else { continue };
        if from.iter().any(|&v| v != carried[j].1) {
            return Err("it carries an array handed, by different latches, different arrays one of which an either call may hand back".into());
        }
        alias[i] = Some(j);
    }
    Ok(alias)
}

/// The phis of loop `k` holding an array kept as it is, by their result:
/// all array phis of its blocks (its header's, `phis`, those of the loops
/// inside it and of its branches' joins) whose entries (from inside the
/// loop, for the header's) are arrays defined before the loop (not
/// `defined_inside`) or such phis, as long as that holds (a fixpoint from
/// above). So a double buffer swapped inside a loop inside `k` (since
/// session 40: `for .. { for .. { b = f(a); t = a; a = b; b = t; } }`), or
/// swapped on some iterations only, is kept: each such phi holds, on every
/// visit, one of the arrays defined before the loop.
fn kept_phis(
    cx: &Derivation<'_>,
    k: usize,
    phis: &[(Inst, Value)],
    defined_inside: &dyn Fn(Value) -> bool,
) -> HashSet<Value> {
    let l = cx.shape.loops.of(k);
    let index = cx.shape.bb.index();
    let inside = |b: &Block| index[*b].is_some_and(|p| l.contains(p));
    let mut all: Vec<(Inst, Value, bool)> = phis.iter().map(|&(i, r)| (i, r, true)).collect();
    for &m in l.members.iter().filter(|&&m| m != l.header) {
        for &inst in &cx.shape.bb.blocks[m].stmts {
            if let (InstKind::Phi { .. }, Some(r)) =
                (&cx.src.insts[inst].kind, cx.src.insts[inst].result)
            {
                all.push((inst, r, false));
            }
        }
    }
    // Each array phi's statement, and whether it is the header's.
    let all: HashMap<Value, (Inst, bool)> = all
        .into_iter()
        .filter(|&(_, r, _)| contains_array(&cx.src.values[r].ty))
        .map(|(i, r, header)| (r, (i, header)))
        .collect();
    let mut kept: HashSet<Value> = all.keys().copied().collect();
    loop {
        let before = kept.len();
        let snapshot = kept.clone();
        kept.retain(|&r| {
            let Some(&(inst, header)) = all.get(&r) else {
                return false;
            };
            let InstKind::Phi { entries } = &cx.src.insts[inst].kind else {
                return false;
            };
            entries
                .iter()
                .filter(|(p, _)| !header || inside(p))
                .all(|(_, op)| match op {
                    Operand::Value(v) => {
                        let v = passed_through(cx, *v, k);
                        snapshot.contains(&v) || !defined_inside(v)
                    }
                    Operand::Const(_) => false,
                })
        });
        if kept.len() == before {
            return kept;
        }
    }
}

/// Why a loop is refused where two of its phis replaced on some
/// iterations may hold one array neither knows the other may hold.
const TWO: &str = "it carries an array two of its arrays replaced on some iterations may both take";

/// What [`carried_arrays`] learns of the phis replaced on some iterations
/// only that take other header phis' arrays (`keep = r`, the best iterate;
/// since session 34).
#[derive(Default)]
struct Keepers {
    /// The arrays made in the loop that a header phi takes, from every
    /// latch, as made afresh, by that phi.
    takers: HashMap<Value, Value>,
    /// Those a phi replaced on some iterations takes too.
    shared_made: HashSet<Value>,
    /// Each such phi with the header phi whose array it may be.
    keeping: Vec<(Value, Value)>,
    /// [`Found::held_entry`].
    held_entry: Vec<(Value, usize, Value, Value)>,
    /// The one phi replaced on some iterations that takes each header
    /// phi's array, before or after it is replaced: two (the lowest and
    /// the highest) may hold one array, and neither would know of the
    /// other.
    kept_by: HashMap<Value, Value>,
    /// The arrays made in the loop that a phi replaced on some iterations
    /// takes, by the first such phi: a second may take them too (`if ok {
    /// r = t; if best { keep = t; } }`, since session 36), and then may be
    /// the first's array.
    sometimes: HashMap<Value, Value>,
}

impl Keepers {
    /// Takes in the header phis `phis` of a loop (whose blocks `inside`
    /// says) that are replaced on some iterations only and carried with a
    /// shadow (not `kept`), adding the arrays they are replaced by to
    /// `seen`: those taking no other header phi's array first, so that a
    /// phi taking the array of one making the same arrays (`if better { r
    /// = keep; keep = t; } else { r = t; }`, since session 41) finds them
    /// that phi's.
    fn take_in_replaced(
        &mut self,
        cx: &Derivation<'_>,
        view: &SweepView<'_>,
        inside: &dyn Fn(&Block) -> bool,
        (phis, kept): (&[(Inst, Value)], &HashSet<Value>),
        seen: &mut HashSet<Value>,
    ) -> Result<(), String> {
        let one_shadow = |op: &Operand| match super::ctx::shadows_of(view.fshadow, op).as_slice() {
            [s] => Some(*s),
            _ => None,
        };
        // The shadow a header phi entered the loop with.
        let entering = |q: Value| {
            phis.iter()
                .find(|&&(_, x)| x == q)
                .and_then(|&(qi, _)| match &cx.src.insts[qi].kind {
                    InstKind::Phi { entries } => {
                        entries.iter().find(|(p, _)| !inside(p)).map(|&(_, op)| op)
                    }
                    _ => None,
                })
                .as_ref()
                .and_then(one_shadow)
        };
        let mut marked: Vec<Value> = phis
            .iter()
            .map(|&(_, r)| r)
            .filter(|&r| {
                cx.replaced.contains_key(&r)
                    && matches!(cx.src.values[r].ty, irad_ir::Type::Array(_))
                    && matches!(view.fshadow[r].as_slice(), [Operand::Value(_)])
                    && !kept.contains(&r)
            })
            .collect();
        marked.sort_by_key(|r| cx.replaced[r].held.is_some());
        for &r in &marked {
            self.replaced(r, &cx.replaced[&r], (phis, seen), &entering)?;
        }
        Ok(())
    }

    /// Fails where a phi replaced on some iterations that takes another's
    /// array, or that other, is among `handed`.
    fn not_handed(&self, handed: &HashSet<Value>) -> Result<(), String> {
        match self
            .kept_by
            .iter()
            .any(|(q, r)| handed.contains(q) || handed.contains(r))
        {
            true => Err(
                "it carries an array that a phi replaced on some iterations takes and another phi is handed"
                    .into(),
            ),
            false => Ok(()),
        }
    }

    /// Takes in `r`, the second phi replaced on some iterations only that
    /// keeps the new arrays of `t`, a phi taking one in every iteration
    /// (`if v < lo_v { lo = r; } if v > hi_v { hi = r; }`): the first,
    /// `q`, keeps `t`'s arrays only (as taker, no held entry), no third
    /// keeps them, and nothing keeps `q`. Then `r` may be `q`'s array or
    /// `t`'s: it is carried with `q` as the array it may be, and `q` with
    /// `t`, a chain the replays and exits follow (`alias_chain`).
    fn second_keeper(
        &mut self,
        r: Value,
        t: Value,
        rep: &replaced::Replaced,
    ) -> Result<(), String> {
        let q = self.kept_by.get(&t).copied().ok_or(TWO)?;
        let plain = |x: Value| {
            self.keeping.iter().filter(|&&(a, _)| a == x).count() == 1
                && self.keeping.contains(&(x, t))
                && !self.held_entry.iter().any(|e| e.0 == x)
        };
        if q == r
            || !plain(q)
            || rep.held.is_some()
            || self.kept_by.contains_key(&q)
            || self.keeping.iter().any(|&(_, b)| b == q)
        {
            return Err(TWO.into());
        }
        self.kept_by.insert(q, r);
        self.keeping.push((r, q));
        Ok(())
    }

    /// Takes in header phi `r`, replaced on some iterations only (`rep`):
    /// an array it may be replaced by is no other phi's (`seen`, which it
    /// adds to), or that of one phi taking it in every iteration, whose
    /// array it then may be (`keep = r` after the step); and it may take
    /// another header phi's array (`rep.held`, before the step), whose
    /// entering shadow `entering` gives. `phis` are the header's phis.
    fn replaced(
        &mut self,
        r: Value,
        rep: &replaced::Replaced,
        (phis, seen): (&[(Inst, Value)], &mut HashSet<Value>),
        entering: &dyn Fn(Value) -> Option<Operand>,
    ) -> Result<(), String> {
        const NEITHER: &str = "it carries an array from one iteration to the next that it neither made afresh in the iteration nor kept as it is";
        let mut taker = None;
        // The arrays a phi keeping the taker's array already took (a second
        // keeper of a phi taking a new array in every iteration: the
        // lowest and the highest, since session 36), and the others.
        let (mut again, mut first_taken) = (false, false);
        let own = rep.made.iter().all(|&v| {
            match self.takers.get(&v).or_else(|| self.sometimes.get(&v)) {
                // Taken by a phi in every iteration, or by one replaced on
                // some iterations only processed before, which must not
                // itself be another's (a chain the snapshots would not
                // tell apart).
                Some(&t) if !self.keeping.iter().any(|&(a, _)| a == t) => {
                    let fresh = self.shared_made.insert(v);
                    again |= !fresh;
                    first_taken |= fresh;
                    let ok =
                        taker.is_none_or(|x| x == t) && (fresh || self.takers.get(&v) == Some(&t));
                    taker = Some(t);
                    ok
                }
                Some(_) => false,
                None => {
                    self.sometimes.insert(v, r);
                    seen.insert(v)
                }
            }
        });
        if !own || (again && first_taken) {
            return Err(NEITHER.into());
        }
        match taker {
            Some(t) if again => self.second_keeper(r, t, rep)?,
            Some(t) => {
                if *self.kept_by.entry(t).or_insert(r) != r {
                    return Err(TWO.into());
                }
                self.keeping.push((r, t));
            }
            None => {}
        }
        // Taking another phi's array: that phi takes a new array in every
        // iteration, or is replaced on some iterations only (and this may
        // then be its array at the header); its entering shadow is the one
        // this holds while it holds the array that phi entered with.
        if let Some((q, hflag, may_be)) = rep.held {
            let at = phis.iter().position(|&(_, x)| x == hflag);
            let known = self.takers.values().any(|&t| t == q) || may_be.is_some();
            let (true, Some(at), Some(Operand::Value(e))) = (known, at, entering(q)) else {
                return Err(NEITHER.into());
            };
            if *self.kept_by.entry(q).or_insert(r) != r {
                return Err(TWO.into());
            }
            self.held_entry.push((r, at, hflag, e));
            if let Some(q) = may_be {
                self.keeping.push((r, q));
            }
        }
        Ok(())
    }
}

/// The arrays loop `k` carries from one iteration to the next through its
/// header phis, or why it cannot be checkpointed: each must be an array (not
/// a tuple holding one). An array without a shadow may come from anywhere;
/// one with a shadow must be, from every latch, either an array the loop
/// made afresh (`copy`, `zeros` or `alloc` in one of its blocks), a
/// different one for each phi, or, in every iteration, an array kept as it
/// is: defined before the loop or another such header phi's (the arrays a
/// double buffer swaps). A fresh array's shadow is a fresh zero array until
/// the reverse of the iterations after it runs, so that the pullback can
/// hand it its cotangent from the next stretch's start by copying; a kept
/// array's shadow is one of the shadows of arrays defined before the loop,
/// which the loop that does not record carries along (docs/reverse.md,
/// "Arrays carried through the header").
fn carried_arrays(cx: &Derivation<'_>, view: &SweepView<'_>, k: usize) -> Result<Found, String> {
    let shape = &cx.shape;
    let l = shape.loops.of(k);
    let index = shape.bb.index();
    let inside = |b: &Block| index[*b].is_some_and(|p| l.contains(p));
    let defined_inside = |v: Value| match cx.src.values[v].def {
        irad_ir::ValueDef::Inst(d) => (*cx.places.get(d))
            .and_then(|(b, _)| index[b])
            .is_some_and(|p| l.contains(p)),
        irad_ir::ValueDef::Param(_) => false,
    };
    // An array made in the loop, or handed back as it is by calls passed
    // one (`a = touch(copy(a))`, `a = push(copy(a), w).0`: since session
    // 33), which is then that array.
    let made_inside = |op: &Operand| -> Option<Value> {
        let Operand::Value(v) = op else { return None };
        let v = passed_through(cx, *v, k);
        let irad_ir::ValueDef::Inst(d) = cx.src.values[v].def else {
            return None;
        };
        (makes_array(&cx.src, &cx.fresh, d) && defined_inside(v)).then_some(v)
    };
    let phis = replay::header_phis(cx, l.header);
    let shadow_phi = |r: Value| match view.fshadow[r].as_slice() {
        [Operand::Value(s)] => Some(*s),
        _ => None,
    };
    let kept = kept_phis(cx, k, &phis, &defined_inside);
    // The shadow of what a kept phi takes through `op`. A call returning
    // the array it was given returns its shadow too. Followed back only as
    // far as the first value from before the loop (or a field of one, whose
    // shadow is the one the tuple's shadows hold there): the loop uses that
    // value, so its shadow is one a replay takes, and what it passes
    // through may be no such one (`let r = touch(b); for .. { b = r; }`, or
    // `b = touch(r)`; found in session 33). Also returns the kept phi
    // taken, if any.
    let kept_shadow_of = |op: &Operand| -> KeptShadow {
        let before = |v: Value| !defined_inside(getfield_base(&cx.src, v));
        let op = match op {
            Operand::Value(v) => Operand::Value(passed_through_until(cx, *v, k, &before)),
            op => *op,
        };
        let shadow = |op: &Operand| match super::ctx::shadows_of(view.fshadow, op).as_slice() {
            [s] => Some(*s),
            _ => None,
        };
        match op {
            Operand::Value(v) if kept.contains(&v) => {
                shadow_phi(v).map(|s| (Operand::Value(s), Some(v)))
            }
            op => shadow(&op).map(|s| (s, None)),
        }
        .ok_or_else(|| "it carries an array whose shadow is not one array".to_string())
    };
    let header_of: HashSet<Value> = phis.iter().map(|&(_, r)| r).collect();
    // The header phis of arrays made afresh, from every latch, in the loop
    // or in the iteration before, handed on by another such phi (`prev =
    // cur; cur = next;`), with their depth: the iterations after which
    // the array a phi holds is always one the loop made (1: made in every
    // iteration). A fixpoint from below, so a cycle of phis (a swap) is
    // never among them.
    let mut depth: HashMap<Value, u64> = HashMap::default();
    loop {
        let mut added = false;
        for &(inst, r) in &phis {
            if depth.contains_key(&r)
                || kept.contains(&r)
                || cx.replaced.contains_key(&r)
                || view.fshadow[r].is_empty()
            {
                continue;
            }
            let InstKind::Phi { entries } = &cx.src.insts[inst].kind else {
                continue;
            };
            let mut d = 1;
            let afresh = entries
                .iter()
                .filter(|(p, _)| inside(p))
                .all(|(_, op)| match op {
                    op if made_inside(op).is_some() || either_inside(cx, k, op, r).is_some() => {
                        true
                    }
                    Operand::Value(q) => depth.get(q).is_some_and(|&e| {
                        d = d.max(e + 1);
                        true
                    }),
                    Operand::Const(_) => false,
                });
            if afresh {
                depth.insert(r, d);
                added = true;
            }
        }
        if !added {
            break;
        }
    }
    let mut out = Vec::new();
    // The kept phis inside the loop the kept header phis take, to follow.
    let mut inner_todo: Vec<Value> = Vec::new();
    let mut seen: HashSet<Value> = HashSet::default();
    // The phis handed on, each to one phi only (two would hold one array).
    let mut handed: HashSet<Value> = HashSet::default();
    // The arrays made in the loop that a header phi takes, from every latch,
    // as made afresh (depth 1, no call that may hand back its argument), by
    // that phi: a phi replaced on some iterations only may take them too.
    let mut keepers = Keepers::default();
    for &(inst, r) in phis.iter().filter(|(_, r)| depth.get(r) == Some(&1)) {
        let InstKind::Phi { entries } = &cx.src.insts[inst].kind else {
            continue;
        };
        let made = entries.iter().filter(|(p, _)| inside(p));
        let made: Option<Vec<Value>> = made.map(|(_, op)| made_inside(op)).collect();
        keepers
            .takers
            .extend(made.into_iter().flatten().map(|v| (v, r)));
    }
    let one_shadow = |op: &Operand| match super::ctx::shadows_of(view.fshadow, op).as_slice() {
        [s] => Some(*s),
        _ => None,
    };
    keepers.take_in_replaced(cx, view, &inside, (&phis, &kept), &mut seen)?;
    let taken_by = taken_by(cx, &phis, &inside, &made_inside);
    for (j, &(inst, r)) in phis.iter().enumerate() {
        let ty = &cx.src.values[r].ty;
        if !contains_array(ty) {
            continue;
        }
        if !matches!(ty, irad_ir::Type::Array(_)) {
            return Err(
                "it carries a tuple holding an array from one iteration to the next".into(),
            );
        }
        let InstKind::Phi { entries } = &cx.src.insts[inst].kind else {
            continue;
        };
        let entry = entries.iter().find(|(p, _)| !inside(p)).map(|&(_, op)| op);
        let mut replaced = None;
        let mut afresh = false;
        let (fresh, kept_shadow) = match (shadow_phi(r), view.fshadow[r].is_empty()) {
            (_, true) => {
                // Without a shadow (an `[i64]`): made afresh when every
                // latch brings an array the loop made that no other
                // header phi takes (since session 45; its replays then
                // start from a copy, which compiled code frees).
                afresh = !kept.contains(&r)
                    && !cx.replaced.contains_key(&r)
                    && entries.iter().filter(|(p, _)| inside(p)).all(|(_, op)| {
                        made_inside(op).is_some_and(|v| taken_by.get(&v) == Some(&1))
                    });
                (None, None)
            }
            (Some(sphi), _) if kept.contains(&r) => {
                let entry = entry
                    .as_ref()
                    .and_then(one_shadow)
                    .ok_or("it carries an array whose shadow entering it is not one array")?;
                let mut latches = Vec::new();
                for (p, op) in entries.iter().filter(|(p, _)| inside(p)) {
                    let (from, taken) = kept_shadow_of(op)?;
                    if let Some(q) = taken.filter(|q| !header_of.contains(q)) {
                        inner_todo.push(q);
                    }
                    latches.push((*p, from));
                }
                (
                    None,
                    Some(Kept {
                        phi: sphi,
                        entry,
                        latches,
                    }),
                )
            }
            (Some(sphi), _) if cx.replaced.contains_key(&r) => {
                // Replaced on some iterations only: its flag is a header phi.
                let rep = &cx.replaced[&r];
                let at = phis
                    .iter()
                    .position(|&(_, x)| x == rep.flag)
                    .ok_or("it carries an array whose flag is not in its header")?;
                replaced = Some((at, rep.flag));
                match entry.as_ref().and_then(one_shadow) {
                    Some(Operand::Value(e)) => (Some((sphi, e)), None),
                    _ => {
                        return Err(
                            "it carries an array whose shadow entering it is not one array".into(),
                        );
                    }
                }
            }
            (Some(sphi), _) => {
                // Each array (or phi) this phi takes is no other phi's; it
                // may come from several latches (`continue`).
                let mut mine: HashSet<Value> = HashSet::default();
                let all_fresh = depth.contains_key(&r)
                    && entries.iter().filter(|(p, _)| inside(p)).all(|(_, op)| {
                        let Operand::Value(v) = op else { return false };
                        if mine.contains(v) {
                            return true;
                        }
                        mine.insert(*v);
                        match made_inside(op).or_else(|| either_inside(cx, k, op, r)) {
                            Some(v) => seen.insert(v),
                            None => handed.insert(*v),
                        }
                    });
                afresh = all_fresh;
                if !all_fresh {
                    return Err(
                        "it carries an array from one iteration to the next that it neither made afresh in the iteration nor kept as it is"
                            .into(),
                    );
                }
                match entry.as_ref().and_then(one_shadow) {
                    Some(Operand::Value(e)) => (Some((sphi, e)), None),
                    _ => {
                        return Err(
                            "it carries an array whose shadow entering it is not one array".into(),
                        );
                    }
                }
            }
            (None, false) => return Err("it carries an array whose shadow is not one array".into()),
        };
        out.push((j, r, ty.clone(), fresh, kept_shadow, replaced, afresh));
    }
    // A phi replaced on some iterations that takes another's array knows of
    // that one only: neither may be handed to a third (`prev = r`, a field
    // of a tuple), which could hold the same array unknown to them (a
    // review's finding, session 34).
    keepers.not_handed(&handed)?;
    // The depths of the phis handed another's array, for the stretch.
    depth.retain(|&r, &mut d| d > 1 && out.iter().any(|c| c.1 == r && c.3.is_some()));
    let inner_kept = inner_kept(cx, inner_todo, &shadow_phi, &|op| {
        let (from, next) = kept_shadow_of(op)?;
        Ok((from, next.filter(|n| !header_of.contains(n))))
    })?;
    Ok(Found {
        carried: out,
        handed: depth,
        keeping: keepers.keeping,
        held_entry: keepers.held_entry,
        inner_kept,
    })
}

/// How many of the header phis `phis` take each array the loop makes
/// (`made_inside` of an entry from inside it, `inside`), each phi counted
/// once: an array without a shadow is made afresh only when its phi is the
/// one taking what it takes.
fn taken_by(
    cx: &Derivation<'_>,
    phis: &[(irad_ir::Inst, Value)],
    inside: &dyn Fn(&Block) -> bool,
    made_inside: &dyn Fn(&Operand) -> Option<Value>,
) -> HashMap<Value, usize> {
    let mut taken: HashMap<Value, usize> = HashMap::default();
    for &(inst, _) in phis {
        let InstKind::Phi { entries } = &cx.src.insts[inst].kind else {
            continue;
        };
        let made: HashSet<Value> = entries
            .iter()
            .filter(|(p, _)| inside(p))
            .filter_map(|(_, op)| made_inside(op))
            .collect();
        for v in made {
            *taken.entry(v).or_default() += 1;
        }
    }
    taken
}

/// The shadow of what a kept phi takes through an entry, with the kept phi
/// inside the loop taken there, if any; or why the loop is refused.
type KeptShadow = Result<(Operand, Option<Value>), String>;

/// The kept phis inside a loop that its kept header phis take their arrays
/// through (`todo`), and those these take in turn: each phi's shadow phi
/// in the recording sweep (`shadow_phi`) and the shadow of what each entry
/// brings, with the kept phi inside the loop it is, if any (`shadow_of`).
fn inner_kept(
    cx: &Derivation<'_>,
    mut todo: Vec<Value>,
    shadow_phi: &dyn Fn(Value) -> Option<Value>,
    shadow_of: &dyn Fn(&Operand) -> KeptShadow,
) -> Result<Vec<InnerKept>, String> {
    const NOT_ONE: &str = "it carries an array whose shadow is not one array";
    let index = cx.shape.bb.index();
    let mut out: Vec<InnerKept> = Vec::new();
    let mut done: HashSet<Value> = HashSet::default();
    while let Some(q) = todo.pop() {
        if !done.insert(q) {
            continue;
        }
        let irad_ir::ValueDef::Inst(d) = cx.src.values[q].def else {
            return Err(NOT_ONE.into());
        };
        let (Some(block), InstKind::Phi { entries }) = (
            (*cx.places.get(d)).and_then(|(b, _)| index[b]),
            &cx.src.insts[d].kind,
        ) else {
            return Err(NOT_ONE.into());
        };
        let phi = shadow_phi(q).ok_or(NOT_ONE)?;
        let mut taken = Vec::new();
        for (p, op) in entries {
            let (from, next) = shadow_of(op)?;
            todo.extend(next);
            taken.push((*p, from));
        }
        out.push(InnerKept {
            block,
            phi,
            entries: taken,
        });
    }
    Ok(out)
}

/// Whether header phi `r` of loop `k` enters it with an array made for it
/// (`copy`, `zeros` or `alloc`) whose every other use is outside the loop
/// and takes no reference to it (element reads and writes, `length`, the
/// bulk primitives, a copy's source): then no value but the phi refers to
/// the array the loop starts with, and a replay may start from a new copy
/// of its contents ([`Carried::renewed`]).
fn renewed(cx: &Derivation<'_>, k: usize, r: Value) -> bool {
    let shape = &cx.shape;
    let l = shape.loops.of(k);
    let irad_ir::ValueDef::Inst(phi) = cx.src.values[r].def else {
        return false;
    };
    let InstKind::Phi { entries } = &cx.src.insts[phi].kind else {
        return false;
    };
    let index = shape.bb.index();
    let inside = |b: &Block| index[*b].is_some_and(|p| l.contains(p));
    let mut outside = entries.iter().filter(|(p, _)| !inside(p));
    let (Some((_, Operand::Value(e))), None) = (outside.next(), outside.next()) else {
        return false;
    };
    let e = *e;
    let made = matches!(cx.src.values[e].def, irad_ir::ValueDef::Inst(d)
    if makes_array(&cx.src, &cx.fresh, d));
    // A parameter enters as it is: renewed only when the loop never writes
    // the array its header phi holds (the first iteration's is the
    // caller's, which a replay starting from a copy would not write).
    let param = matches!(cx.src.values[e].def, irad_ir::ValueDef::Param(_));
    if !(made || param && only_read_in(cx, k, r) && no_other_parameter_in(cx, k, e)) {
        return false;
    }
    every_use_is(
        cx,
        (e, &[phi]),
        |_| true,
        |i, prim| !l.contains(i) && prim.keeps_no_reference(),
    )
}

/// Whether every use of `v` in the blocks `checked` says (by position),
/// but statement `skip`, is a primitive that `prim_ok` accepts (given the
/// use's block): no return of it, phi entry, call of it or with it.
fn every_use_is(
    cx: &Derivation<'_>,
    (v, skip): (Value, &[irad_ir::Inst]),
    checked: impl Fn(usize) -> bool,
    prim_ok: impl Fn(usize, Prim) -> bool,
) -> bool {
    let uses = |op: &Operand| *op == Operand::Value(v);
    cx.shape.bb.blocks.iter().enumerate().all(|(i, b)| {
        let term_ok = match &b.term {
            super::bbcode::BTerm::Return(op) => !uses(op),
            _ => true,
        };
        !checked(i)
            || term_ok
                && b.stmts.iter().all(|&inst| {
                    if skip.contains(&inst) {
                        return true;
                    }
                    match &cx.src.insts[inst].kind {
                        InstKind::Prim { prim, args } if args.iter().any(uses) => prim_ok(i, *prim),
                        InstKind::Prim { .. } => true,
                        InstKind::Phi { entries } => !entries.iter().any(|(_, op)| uses(op)),
                        InstKind::CallValue { callee, args } => {
                            *callee != v && !args.iter().any(uses)
                        }
                        kind => !super::ctx::args_of(kind).iter().any(uses),
                    }
                })
    })
}

/// Whether every use of `r` in loop `k` is a primitive that keeps no
/// reference to it and writes no array (an element read, `length`, a
/// copy's source, `sum`, `dot`, ...): the loop never writes the array `r`
/// holds, nor hands it to anything that might.
fn only_read_in(cx: &Derivation<'_>, k: usize, r: Value) -> bool {
    let l = cx.shape.loops.of(k);
    every_use_is(
        cx,
        (r, &[]),
        |i| l.contains(i),
        |_, prim| prim.keeps_no_reference() && !prim.writes_array(),
    )
}

/// Whether no parameter but `e` that may hold an array reaches a value
/// used in loop `k` (an entry of its header's phis included): a caller may
/// pass one array as two parameters, and a loop reading or writing it
/// under the other's name would then touch the array a renewed `e` starts
/// from, and its shadow, outside the replay's copies (a review found both).
/// A value reaches what `tuple`, `getfield`, `select`, a phi or a call make
/// of it (the results that may hold it); a copy or an element does not.
fn no_other_parameter_in(cx: &Derivation<'_>, k: usize, e: Value) -> bool {
    let shape = &cx.shape;
    let l = shape.loops.of(k);
    // Each value's uses: the statement, whether it is in the loop, and the
    // value it makes that may hold what it uses.
    let mut uses: HashMap<Value, Vec<(bool, Option<Value>)>> = HashMap::default();
    for (i, b) in shape.bb.blocks.iter().enumerate() {
        let inside = l.contains(i);
        for &inst in &b.stmts {
            let data = &cx.src.insts[inst];
            let ops: Vec<Operand> = match &data.kind {
                InstKind::Phi { entries } => entries.iter().map(|(_, op)| *op).collect(),
                kind => super::ctx::args_of(kind).to_vec(),
            };
            let keeps = match &data.kind {
                InstKind::Prim { prim, .. } => !prim.keeps_no_reference(),
                _ => true,
            };
            let made = data
                .result
                .filter(|&v| keeps && contains_array(&cx.src.values[v].ty));
            for op in ops {
                if let Operand::Value(v) = op {
                    uses.entry(v).or_default().push((inside, made));
                }
            }
        }
        if let super::bbcode::BTerm::Return(Operand::Value(v)) = &b.term {
            uses.entry(*v).or_default().push((inside, None));
        }
    }
    let mut seen: HashSet<Value> = HashSet::default();
    let mut work: Vec<Value> = cx
        .src
        .params
        .iter()
        .copied()
        .filter(|&p| p != e && contains_array(&cx.src.values[p].ty))
        .collect();
    while let Some(v) = work.pop() {
        if !seen.insert(v) {
            continue;
        }
        for &(inside, made) in uses.get(&v).map_or(&[][..], Vec::as_slice) {
            if inside {
                return false;
            }
            work.extend(made);
        }
    }
    true
}

/// Whether phi `v` of loop `k` (not of its header) may hold only arrays
/// made in the same iteration of `k`, and no other value leaving the loop
/// or carried to the next iteration may hold them: through phis of the
/// loop other than its header's (those of a loop inside it included),
/// every array it may hold is made by a statement of the loop
/// (`makes_array`), so it is one the iteration made, as a statement's own
/// array is (the loop phi of an inner loop carrying a buffer the iteration
/// made, read after a `return` from inside both). Those statements and
/// phis, but `v`, are not used after the loop (`escaping`), and in the
/// loop each is used only by those phis and by primitives that take no
/// reference; `v` only by such primitives. Otherwise another value (the
/// statement's own array read after the loop, another such phi, a header
/// phi handed the array) may be the same array where it leaves, and the
/// exit would give the one array two shadows (found by the session's
/// review: `alias_ret`, `two_phis`, `handed_and_phi` of
/// `tests/checkpoint/left.irad`, refused).
fn made_per_iteration(cx: &Derivation<'_>, k: usize, v: Value, escaping: &HashSet<Value>) -> bool {
    let shape = &cx.shape;
    let l = shape.loops.of(k);
    let index = shape.bb.index();
    let block_of = |v: Value| match cx.src.values[v].def {
        irad_ir::ValueDef::Inst(d) => (*cx.places.get(d)).and_then(|(b, _)| index[b]),
        irad_ir::ValueDef::Param(_) => None,
    };
    let mut work = vec![v];
    let mut seen: HashSet<Value> = HashSet::default();
    let mut phis: HashSet<Value> = HashSet::default();
    while let Some(w) = work.pop() {
        if !seen.insert(w) {
            continue;
        }
        if (w != v && escaping.contains(&w))
            || !block_of(w).is_some_and(|at| l.contains(at) && at != l.header)
        {
            return false;
        }
        let irad_ir::ValueDef::Inst(d) = cx.src.values[w].def else {
            return false;
        };
        match &cx.src.insts[d].kind {
            InstKind::Phi { entries } => {
                phis.insert(w);
                for (_, op) in entries {
                    let Operand::Value(e) = op else { return false };
                    work.push(*e);
                }
            }
            _ if makes_array(&cx.src, &cx.fresh, d) => {}
            _ => return false,
        }
    }
    // Their uses in the loop: phis of the web (for `v`: none), and
    // primitives that take no reference.
    let uses_ok = |inst: irad_ir::Inst| {
        let data = &cx.src.insts[inst];
        let held = |op: &Operand| matches!(op, Operand::Value(w) if seen.contains(w));
        match &data.kind {
            InstKind::Phi { entries } => {
                let takes_v = entries.iter().any(|(_, op)| *op == Operand::Value(v));
                !entries.iter().any(|(_, op)| held(op))
                    || data
                        .result
                        .is_some_and(|r| phis.contains(&r) && !(takes_v && r != v))
            }
            InstKind::Prim { prim, args } => !args.iter().any(held) || prim.keeps_no_reference(),
            InstKind::Invoke { args, .. } => !args.iter().any(held),
            InstKind::CallValue { callee, args } => {
                !held(&Operand::Value(*callee)) && !args.iter().any(held)
            }
        }
    };
    !phis.is_empty()
        && l.members.iter().all(|&i| {
            let b = &shape.bb.blocks[i];
            b.stmts.iter().all(|&inst| uses_ok(inst))
                && !matches!(&b.term, super::bbcode::BTerm::Return(Operand::Value(w)) if seen.contains(w))
        })
}

/// Array `v`, used after loop `k` (which leaves as `leave` says), as an
/// array made in the loop's last iteration ([`Left`]), or `None` when it is
/// not one: made by `copy`, `zeros` or `alloc` in a block whose innermost
/// loop is `k`, with one shadow or none, dominating at least one exit edge.
fn left_array(
    cx: &Derivation<'_>,
    view: &SweepView<'_>,
    (k, carried, escaping): (usize, &[CarriedPhi], &HashSet<Value>),
    v: Value,
    leave: &Leave,
) -> Option<Left> {
    let shape = &cx.shape;
    let l = shape.loops.of(k);
    let irad_ir::ValueDef::Inst(d) = cx.src.values[v].def else {
        return None;
    };
    // A phi choosing between an array the iteration made and the one a
    // header phi of arrays replaced on some iterations only holds: its
    // flag says which, and the header phi's entering shadow is its shadow
    // while the loop has not replaced the array.
    let chosen = carried.iter().find_map(|c| {
        let rep = cx.replaced.get(&c.1)?;
        let &(flag, this) = rep.phis.get(&v)?;
        // A phi on the way of one taking another header phi's array holds,
        // where it leaves, that phi's, its own or a new one: not handled.
        if rep.held.is_some() {
            return None;
        }
        let (_, entry) = c.3?;
        Some((
            rep,
            Chosen {
                flag,
                this,
                entry,
                header: c.1,
                made: match rep.made.as_slice() {
                    [m] if escaping.contains(m) => Some(*m),
                    _ => None,
                },
            },
        ))
    });
    // Another array of the same web read after the loop may be the same
    // array where it leaves: refused (their shadows would be one), but
    // for the web's one made array, whose shadow the phi then takes where
    // the iteration made the array it holds.
    if let Some((rep, ch)) = &chosen
        && ((ch.made.is_none() && rep.made.iter().any(|m| escaping.contains(m)))
            || rep.phis.keys().any(|q| *q != v && escaping.contains(q)))
    {
        return None;
    }
    let chosen = chosen.map(|(_, c)| c);
    // The result of a call handing back its argument or a new array, which
    // header phi `r` carries as made afresh ([`either_inside`]).
    let either = carried.iter().find_map(|c| {
        (c.3.is_some() && either_inside(cx, k, &Operand::Value(v), c.1) == Some(v)).then_some(c.1)
    });
    let made = makes_array(&cx.src, &cx.fresh, d)
        || (chosen.is_none() && (made_per_iteration(cx, k, v, escaping) || either.is_some()));
    if !made && chosen.is_none() {
        return None;
    }
    let (b, _) = (*cx.places.get(d))?;
    let at = shape.bb.index()[b]?;
    // Made in the loop itself; or, an array only, in a loop inside it
    // (`return` from inside both): the exit edges its statement dominates
    // then leave that loop too, which is therefore not checkpointed inside
    // this one's replay ([`nested_decision`]) but recorded there in full,
    // so the replay's copy of the statement makes the array the run left
    // with, the last it made.
    let own = shape.loops.inner[at] == Some(l.header);
    if !(own || (chosen.is_none() && l.contains(at))) {
        return None;
    }
    let shadow = match view.fshadow[v].as_slice() {
        [] => None,
        [Operand::Value(s)] => Some(*s),
        _ => return None,
    };
    let exits: Vec<usize> = leave
        .exits
        .iter()
        .copied()
        .filter(|&e| shape.dominated_by(e, &[at]))
        .collect();
    // Where the call handed back `r`'s array, the two are one array with
    // one shadow: `r` may leave the loop only through other exits.
    if let Some(r) = either
        && !leaves_only_apart(cx, l, r, &exits)
    {
        return None;
    }
    (!exits.is_empty()).then(|| Left {
        value: v,
        ty: cx.src.values[v].ty.clone(),
        shadow,
        exits,
        chosen,
    })
}

/// Array `v`, used after a loop of `carried` arrays, as always the array a
/// carried array kept as it is holds ([`passed_through`]): its shadow in
/// the recording sweep (one array, or none) and that kept array's shadow
/// phi there ([`CkLoop::kept_left`]).
fn kept_leaving(
    cx: &Derivation<'_>,
    view: &SweepView<'_>,
    (k, carried): (usize, &[CarriedPhi]),
    v: Value,
) -> Option<(Value, Value)> {
    let r = passed_through(cx, v, k);
    let kept = carried.iter().find(|c| c.1 == r)?.4.as_ref()?;
    match view.fshadow[v].as_slice() {
        [Operand::Value(s)] => Some((*s, kept.phi)),
        _ => None,
    }
}

/// The index of `v` among `inputs`, added last when it is not there.
fn input_index(inputs: &mut Vec<Value>, v: Value) -> usize {
    inputs.iter().position(|&x| x == v).unwrap_or_else(|| {
        inputs.push(v);
        inputs.len() - 1
    })
}

/// For header phi `r` of loop `k`, which holds the array another header
/// phi held the iteration before (among `handed`, by depth, of
/// `carried`): the entering shadows (forward-sweep values) of the phis
/// whose entering arrays `r` holds after 1, 2, ... iterations, one fewer
/// than its depth, when every latch hands it the same phi, and that one
/// likewise, down to a phi made afresh in every iteration; else `None`.
fn held_chain(
    cx: &Derivation<'_>,
    k: usize,
    r: Value,
    (carried, handed): (&[CarriedPhi], &HashMap<Value, u64>),
) -> Option<Vec<Value>> {
    let l = cx.shape.loops.of(k);
    let index = cx.shape.bb.index();
    let inside = |b: &Block| index[*b].is_some_and(|p| l.contains(p));
    let depth = *handed.get(&r)?;
    let mut chain = Vec::new();
    let mut cur = r;
    while handed.contains_key(&cur) {
        let irad_ir::ValueDef::Inst(phi) = cx.src.values[cur].def else {
            return None;
        };
        let InstKind::Phi { entries } = &cx.src.insts[phi].kind else {
            return None;
        };
        let mut from = entries.iter().filter(|(p, _)| inside(p)).map(|&(_, op)| op);
        let Some(Operand::Value(q)) = from.next() else {
            return None;
        };
        if from.any(|op| op != Operand::Value(q)) || chain.len() as u64 >= depth {
            return None;
        }
        let c = carried.iter().find(|c| c.1 == q)?;
        let (_, entry) = c.3?;
        if c.4.is_some() || c.5.is_some() {
            return None;
        }
        chain.push(entry);
        cur = q;
    }
    (chain.len() as u64 + 1 == depth).then_some(chain)
}

/// Whether every use of `r` outside loop `l` is the entry of a phi from an
/// exit block (a position) not among `exits`: `r` leaves the loop through
/// none of them.
fn leaves_only_apart(cx: &Derivation<'_>, l: &RevLoop, r: Value, exits: &[usize]) -> bool {
    let bb = &cx.shape.bb;
    let index = bb.index();
    let uses = |op: &Operand| *op == Operand::Value(r);
    bb.blocks
        .iter()
        .enumerate()
        .filter(|(i, _)| !l.contains(*i))
        .all(|(_, b)| {
            !matches!(&b.term, super::bbcode::BTerm::Return(op) if uses(op))
                && b.stmts.iter().all(|&inst| match &cx.src.insts[inst].kind {
                    InstKind::Phi { entries } => entries
                        .iter()
                        .all(|(p, op)| !uses(op) || index[*p].is_some_and(|e| !exits.contains(&e))),
                    InstKind::CallValue { callee, args } => *callee != r && !args.iter().any(uses),
                    kind => !super::ctx::args_of(kind).iter().any(uses),
                })
        })
}

/// The values holding an array, defined in a block of loop `l`, that a
/// block outside it uses.
fn escaping_arrays(cx: &Derivation<'_>, l: &RevLoop) -> HashSet<Value> {
    let bb = &cx.shape.bb;
    let mut inside: HashSet<Value> = HashSet::default();
    for (_, b) in bb.blocks.iter().enumerate().filter(|(i, _)| l.contains(*i)) {
        for &inst in &b.stmts {
            if let Some(r) = cx.src.insts[inst].result
                && contains_array(&cx.src.values[r].ty)
            {
                inside.insert(r);
            }
        }
    }
    let mut out: HashSet<Value> = HashSet::default();
    let mut add = |op: &Operand| {
        if let Operand::Value(v) = op
            && inside.contains(v)
        {
            out.insert(*v);
        }
    };
    for (_, b) in bb
        .blocks
        .iter()
        .enumerate()
        .filter(|(i, _)| !l.contains(*i))
    {
        for &inst in &b.stmts {
            match &cx.src.insts[inst].kind {
                InstKind::Phi { entries } => entries.iter().for_each(|(_, op)| add(op)),
                InstKind::CallValue { callee, args } => {
                    add(&Operand::Value(*callee));
                    args.iter().for_each(&mut add);
                }
                kind => super::ctx::args_of(kind).iter().for_each(&mut add),
            }
        }
        if let super::bbcode::BTerm::Return(op) = &b.term {
            add(op);
        }
    }
    out
}

/// The estimated tape bytes one iteration of loop `k` records: the values
/// and indices its blocks push, a block of a loop nested `d` deep inside it
/// counted `INNER_TRIPS^d` times, and [`CALL_BYTES`] per call of a piece.
fn bytes_per_iteration(
    cx: &Derivation<'_>,
    view: &SweepView<'_>,
    plan: &TapePlan,
    k: usize,
) -> u64 {
    let mut total = 0u64;
    for (i, times) in weighted_members(cx, k) {
        let here = block_bytes(cx, view, plan, i);
        total = total.saturating_add(here.saturating_mul(times));
    }
    total
}

/// The estimated tape bytes block `i` records each time it runs (see
/// [`bytes_per_iteration`]).
fn block_bytes(cx: &Derivation<'_>, view: &SweepView<'_>, plan: &TapePlan, i: usize) -> u64 {
    let shape = &cx.shape;
    let block = shape.bb.blocks[i].id;
    let mut here: u64 = plan
        .at_block_end(block)
        .map(|s| tape_value_bytes(&s.ty))
        .sum();
    for &inst in &shape.bb.blocks[i].stmts {
        here += plan
            .after_stmt(inst)
            .map(|s| tape_value_bytes(&s.ty))
            .sum::<u64>();
        if matches!(
            view.stmts[inst].as_ref().map(|s| &s.how),
            Some(How::Invoke(_) | How::Dynamic)
        ) {
            here += CALL_BYTES;
        }
    }
    if let Some(br) = plan.branch_from(block) {
        here += if br.two_way { 1 } else { 8 };
    }
    here
}

/// Whether block `i` calls another function's forward sweep, whose records
/// the estimate takes as [`CALL_BYTES`] whatever they are.
fn calls_in(cx: &Derivation<'_>, view: &SweepView<'_>, i: usize) -> bool {
    cx.shape.bb.blocks[i].stmts.iter().any(|&inst| {
        matches!(
            view.stmts[inst].as_ref().map(|s| &s.how),
            Some(How::Invoke(_) | How::Dynamic)
        )
    })
}

/// The kept blocks of loop `k` (positions), each with how many times one
/// iteration of `k` is assumed to run it: [`INNER_TRIPS`] to the power of
/// how deep it lies in loops inside `k`.
fn weighted_members<'c>(
    cx: &'c Derivation<'_>,
    k: usize,
) -> impl Iterator<Item = (usize, u64)> + 'c {
    let shape = &cx.shape;
    let l = shape.loops.of(k);
    l.members
        .iter()
        .copied()
        .filter(|&i| shape.kept(i))
        .map(move |i| {
            let depth = depth_in(&shape.loops, i, k);
            let times = INNER_TRIPS.saturating_pow(u32::try_from(depth).unwrap_or(u32::MAX));
            (i, times)
        })
}

/// Which values of the forward sweep loop `k` makes.
struct MadeIn<'a> {
    fdef: irad_ir::entity::SecondaryMap<Value, Option<usize>>,
    l: &'a super::loops::RevLoop,
}

impl<'a> MadeIn<'a> {
    fn new(cx: &'a Derivation<'_>, view: &SweepView<'_>, k: usize) -> Self {
        MadeIn {
            fdef: super::plan::def_blocks(view.fwd, view.fblock),
            l: cx.shape.loops.of(k),
        }
    }

    /// The values of the forward sweep holding arrays made in the loop
    /// that block `i` pushes each time it runs, with their types.
    fn pushed_values<'p>(
        &'p self,
        cx: &'p Derivation<'_>,
        plan: &'p TapePlan,
        i: usize,
    ) -> impl Iterator<Item = (Value, &'p irad_ir::Type)> + 'p {
        let block = cx.shape.bb.blocks[i].id;
        let stmts = cx.shape.bb.blocks[i].stmts.iter();
        plan.at_block_end(block)
            .chain(stmts.flat_map(|&inst| plan.after_stmt(inst)))
            .filter(|s| {
                contains_array(&s.ty) && self.fdef[s.value].is_some_and(|d| self.l.contains(d))
            })
            .map(|s| (s.value, &s.ty))
    }
}

/// How deep position `i` lies in loops nested inside loop `k` (0 in `k`'s
/// own blocks). For a single-exit `k`, the single-exit loops between them
/// (what the estimate always counted); for a loop of several exits, loops
/// of either kind.
fn depth_in(loops: &super::loops::RevLoops, i: usize, k: usize) -> usize {
    if k < loops.loops.len() {
        return loops.around[i].iter().position(|&x| x == k).unwrap_or(0);
    }
    let outer = loops.of(k);
    (0..loops.count())
        .filter(|&j| j != k)
        .map(|j| loops.of(j))
        .filter(|l| l.header != outer.header && outer.contains(l.header) && l.contains(i))
        .count()
}

/// The array classes some statement of the primal writes without restoring
/// them in its pullback (see `choose::restores`).
fn unsafe_classes(cx: &Derivation<'_>, view: &SweepView<'_>) -> HashSet<u32> {
    let mut out = HashSet::default();
    for b in &cx.shape.bb.blocks {
        for &inst in &b.stmts {
            if !restores(view.stmts[inst].as_ref()) {
                out.extend(cx.classes.writes(&cx.src, inst));
            }
        }
    }
    out
}

/// The loops' own requests, by header position: the `checkpoint(n)`
/// statements of the primal, each for the innermost loop around it
/// (statements outside loops are ignored), `n` iterations per stretch, 0 for
/// never; then the rules of `schedule`, each replacing what the loops it
/// names asked in the program. A non-constant or negative `n`, or two
/// different ones in one loop, is an error located at the statement.
fn requests(
    cx: &Derivation<'_>,
    schedule: &schedule::CheckpointSchedule,
) -> Result<HashMap<usize, Ask>, ReverseError> {
    let mut out: HashMap<usize, u64> = HashMap::default();
    for (i, b) in cx.shape.bb.blocks.iter().enumerate() {
        let Some(h) = cx.shape.loops.inner[i] else {
            continue;
        };
        for &inst in &b.stmts {
            let InstKind::Prim {
                prim: Prim::Checkpoint,
                args,
            } = &cx.src.insts[inst].kind
            else {
                continue;
            };
            let n = match args.first() {
                Some(Operand::Const(Const::I64(n))) => u64::try_from(*n).ok(),
                _ => None,
            };
            let Some(n) = n else {
                return Err(err(
                    &cx.loc_of(inst),
                    "`checkpoint` takes a constant, non-negative number of iterations",
                ));
            };
            if out.insert(h, n).is_some_and(|m| m != n) {
                return Err(err(
                    &cx.loc_of(inst),
                    format!(
                        "loop #{} has two `checkpoint` statements with different numbers",
                        cx.label(h)
                    ),
                ));
            }
        }
    }
    let mut asks: HashMap<usize, Ask> = out
        .into_iter()
        .map(|(h, n)| (h, Ask { n, rule: None }))
        .collect();
    if schedule.is_empty() {
        return Ok(asks);
    }
    let loops = &cx.shape.loops;
    let headers = (0..loops.count()).map(|k| loops.of(k).header);
    for h in headers.chain(loops.others.iter().copied()) {
        if let Some(r) = schedule.lookup(&cx.src, cx.shape.bb.blocks[h].id) {
            let n = match r.choice {
                schedule::LoopChoice::Every(n) => n,
                schedule::LoopChoice::Record => 0,
            };
            asks.insert(
                h,
                Ask {
                    n,
                    rule: Some(r.to_string()),
                },
            );
        }
    }
    Ok(asks)
}

/// Builds the replay function of each loop of `cks` from the forward sweep
/// `fwd_id` (complete, pushes in place; its block of each primal block is
/// `fblock`, its operand of each primal value `fval`), then rewrites the
/// loops there to run without recording.
pub(super) fn rewrite(
    cx: &Derivation<'_>,
    module: &mut irad_ir::Module,
    fwd_id: FuncId,
    (fblock, fval): (&[Block], &SecondaryMap<Value, Option<Operand>>),
    cks: &mut Checkpoints,
) -> Result<(), ReverseError> {
    // Replays push a stretch's arrays again and again: compiled code then
    // frees those it pops (docs/codegen.md, "Freeing arrays").
    if !cks.loops.is_empty() {
        module.set_counted_tapes(true);
    }
    // Every replay from the recording sweep first: rewriting one loop renames
    // its values where a later loop reads them.
    for ck in &mut cks.loops {
        let (id, values, site) = replay::build(cx, module, fwd_id, (fblock, fval), ck)?;
        ck.replay = Some(id);
        ck.replayed = values;
        ck.split = site;
    }
    let recording = fval;
    let mut fval = fval.clone();
    // The checkpointed loops inside each loop with a direct path, which
    // that path records in full.
    let inner = cks
        .loops
        .iter()
        .map(|c| match c.direct {
            Some(_) => inners(cx, &cks.loops, c.k),
            None => Ok(Vec::new()),
        })
        .collect::<Result<Vec<_>, _>>()?;
    for (ck, inner) in cks.loops.iter_mut().zip(&inner) {
        if ck.within.is_some() {
            continue;
        }
        // A loop before it may have renamed the values it reads (its own
        // values used after it, `primal.rs`): the forward sweep has the new
        // ones. The pullback still knows them by their recording names.
        let mut local = ck.clone();
        let pre = cx.shape.bb.blocks[local.pre].id;
        renamed_inputs(&mut local, (&cks.shown, &cks.shown_at, pre));
        local.run_stretch = Some(sized::stretch_at(
            module,
            fwd_id,
            fblock[local.pre],
            &local,
            &cx.floc,
        )?);
        let path = match &local.direct {
            Some(d) => Some(direct::build(
                cx,
                module,
                fwd_id,
                (fblock, &fval),
                (&local, d, inner),
            )?),
            None => None,
        };
        primal::rewrite(
            cx,
            module,
            fwd_id,
            (fblock, &mut fval),
            (&mut local, path.as_ref()),
            (&mut cks.shown, &mut cks.shown_at),
        )?;
        ck.state = local.state;
        ck.run_stretch = local.run_stretch;
    }
    for (j, inner) in inner.iter().enumerate() {
        let Some(outer) = cks.loops[j].within else {
            continue;
        };
        let outer = cks
            .of_loop(outer)
            .cloned()
            .ok_or_else(|| super::ctx::internal(&cx.floc, "a loop inside no checkpointed loop"))?;
        let (renamed, renamed_at) = nested::rewrite(
            cx,
            module,
            fwd_id,
            (fblock, recording),
            (&outer, &mut cks.loops[j], inner),
        )?;
        if let Some(o) = cks.loops.iter_mut().find(|c| c.k == outer.k) {
            o.replay_renamed.extend(renamed);
            o.replay_renamed_at.extend(renamed_at);
        }
    }
    for ck in &cks.loops {
        thin::fill(cx, module, fwd_id, (fblock, recording), ck)?;
    }
    Ok(())
}

/// Renames the values of the forward sweep that checkpointed loop `ck`
/// reads from before it (its inputs, the arrays whose lengths size its
/// stretch, the shadows its kept arrays enter and are handed) by `shown`, the new value of each value an earlier loop's
/// rewrite renamed (followed to the last).
fn renamed_inputs(
    ck: &mut CkLoop,
    (shown, shown_at, pre): (&HashMap<Value, Value>, &primal::ExitShown, Block),
) {
    // A loop before it whose exits' paths meet only later renamed them in
    // the region of each exit: the one its entering block is in.
    let last = |mut v: Value| {
        for _ in 0..=shown.len() + shown_at.len() {
            match shown_at.get(&(pre, v)).or_else(|| shown.get(&v)) {
                Some(&w) if w != v => v = w,
                _ => break,
            }
        }
        v
    };
    let op = |o: &mut Operand| {
        if let Operand::Value(v) = o {
            *v = last(*v);
        }
    };
    for v in &mut ck.inputs {
        *v = last(*v);
    }
    for v in ck.sized.iter_mut().flat_map(|s| s.outside.iter_mut()) {
        *v = last(*v);
    }
    for kept in ck.carried.iter_mut().filter_map(|c| c.kept.as_mut()) {
        op(&mut kept.entry);
        for (_, o) in &mut kept.latches {
            op(o);
        }
    }
    // The shadows the kept phis inside it take from before it (a review
    // found them left to an earlier loop's deleted phis, session 40).
    for kept in &mut ck.inner_kept {
        for (_, o) in &mut kept.entries {
            op(o);
        }
    }
    for ch in ck.left.iter_mut().filter_map(|x| x.chosen.as_mut()) {
        ch.entry = last(ch.entry);
    }
}

/// The checkpointed loops of `cks` inside loop `outer`, which has a direct
/// path ([`keep_direct_paths`] made sure each has one its path can take),
/// with their flags and counts as the recording forward sweep has them.
fn inners(
    cx: &Derivation<'_>,
    cks: &[CkLoop],
    outer: usize,
) -> Result<Vec<direct::Inner>, ReverseError> {
    let loops = &cx.shape.loops;
    let o = loops.of(outer);
    let mut out = Vec::new();
    for d in cks
        .iter()
        .filter(|d| d.k != outer && o.contains(loops.of(d.k).header))
    {
        let lost = || {
            super::ctx::internal(
                &cx.floc,
                "an inner loop its outer direct path cannot record",
            )
        };
        let direct = inner_direct(cx, d, outer).ok_or_else(lost)?;
        out.push(direct::Inner {
            k: d.k,
            pre: d.pre,
            flag: d.flag.ok_or_else(lost)?,
            counts: d.counts.clone(),
            direct: direct.clone(),
        });
    }
    Ok(out)
}

/// `runs` and the loops inside them, depth first, as the tape plan prints
/// them; `inside` is the label of the loop they were found in (`None`: the
/// sized loop itself).
fn inner_run_lines(
    runs: &[sized::InnerRuns],
    (k, inside, counted): (usize, Option<u32>, bool),
    out: &mut Vec<super::plan::InnerRun>,
) {
    for r in runs {
        out.push(super::plan::InnerRun {
            label: r.label,
            inside,
            bytes: r.bytes,
            fresh: if counted { r.fresh } else { 0 },
            called: if counted { r.called } else { 0 },
            known: r.known.iter().fold(0u64, |n, (w, _)| n.saturating_add(*w)),
            copies: r.copies.len() as u64,
            copies_made: r.copies.iter().filter(|c| c.is_none()).count() as u64,
            runs: r.runs,
            trips: match &r.trips {
                sized::Trips::Counted { start, bound, .. }
                    if start.reads_other(k) || bound.reads_other(k) =>
                {
                    super::plan::InnerTrips::Counters
                }
                sized::Trips::Counted { start, bound, .. } if start.counts() || bound.counts() => {
                    super::plan::InnerTrips::Counter
                }
                sized::Trips::Counted { .. } => super::plan::InnerTrips::Bounds,
                sized::Trips::Unknown => super::plan::InnerTrips::Estimate,
            },
        });
        inner_run_lines(&r.inner, (k, Some(r.label), counted), out);
    }
}

/// The checkpointed loops of `cks` as the tape plan prints them.
pub(super) fn summary(
    cx: &Derivation<'_>,
    module: &irad_ir::Module,
    cks: &Checkpoints,
) -> Vec<CheckpointedLoop> {
    cks.loops
        .iter()
        .map(|c| {
            let h = cx.shape.loops.of(c.k).header;
            CheckpointedLoop {
                header: cx.shape.bb.blocks[h].id,
                label: cx.label(h),
                stretch: c.stretch,
                source: c.source.clone(),
                bytes_per_iteration: c.bytes,
                fresh_arrays: c
                    .sized
                    .as_ref()
                    .filter(|s| s.has_longest())
                    .map_or(0, |s| s.fresh),
                called_arrays: c
                    .sized
                    .as_ref()
                    .filter(|s| s.has_longest())
                    .map_or(0, |s| s.called),
                uncounted_arrays: c.sized.as_ref().is_some_and(|s| {
                    fn any(runs: &[sized::InnerRuns]) -> bool {
                        runs.iter().any(|r| r.fresh > 0 || any(&r.inner))
                    }
                    !s.has_longest() && (s.fresh > 0 || any(&s.inner))
                }),
                known_arrays: c.sized.as_ref().map_or(0, |s| {
                    s.known.iter().fold(0u64, |n, (w, _)| n.saturating_add(*w))
                }),
                inner_runs: c.sized.as_ref().map_or_else(Vec::new, |s| {
                    let mut out = Vec::new();
                    inner_run_lines(&s.inner, (c.k, None, s.has_longest()), &mut out);
                    out
                }),
                own_bytes: c.sized.as_ref().map_or(c.bytes, |s| s.own),
                entered_lengths: c
                    .sized
                    .as_ref()
                    .map_or(0, |s| (s.outside.len() - s.scalars.len()) as u64),
                entered_values: c.sized.as_ref().map_or(0, |s| s.scalars.len() as u64),
                lengths_entered: c.sized.as_ref().is_some_and(|s| {
                    s.outside.len() > s.scalars.len()
                        || s.lengths.iter().any(|&j| {
                            c.carried
                                .iter()
                                .any(|a| a.shadow.is_some_and(|(_, i)| i == j))
                        })
                }),
                state: c.state.clone(),
                state_names: vec![None; c.state.len()],
                arrays: c.arrays.len() + c.carried.len(),
                carried: c.carried.len(),
                carried_after: c.carried.iter().filter(|c| c.escapes).count(),
                carried_replaced: c.carried.iter().filter(|c| c.replaced.is_some()).count(),
                carried_handed: c.handed,
                carried_shared: c.carried.iter().filter(|c| c.alias.is_some()).count(),
                carried_entered: c.carried.iter().filter(|c| c.held_entry.is_some()).count(),
                least: c.least,
                made_after: c.left.len(),
                within: c.within.map(|o| cx.label(cx.shape.loops.of(o).header)),
                replay: c
                    .replay
                    .and_then(|r| module.get(r))
                    .map(|f| f.name.clone())
                    .unwrap_or_default(),
                direct: c.direct.as_ref().map(|d| d.runs),
                direct_inner: match c.direct {
                    Some(_) => {
                        let o = cx.shape.loops.of(c.k);
                        cks.loops
                            .iter()
                            .filter(|d| d.k != c.k && o.contains(cx.shape.loops.of(d.k).header))
                            .map(|d| cx.label(cx.shape.loops.of(d.k).header))
                            .collect()
                    }
                    None => Vec::new(),
                },
                exits: c.repush.then(|| cx.shape.loops.of(c.k).exits.len()),
                exits_apart: c.leave.regions,
                exits_joined: c.leave.joins.iter().map(|&j| cx.label(j)).collect(),
                thinned_after: c.plain,
                binomial: c.revolve.as_ref().map(|r| r.least),
                binomial_room: c.revolve.as_ref().is_some_and(|r| r.room.is_some()),
            }
        })
        .collect()
}

/// Marks the saves and predecessor indices of `plan` pushed in the blocks of
/// a checkpointed loop of `cks` as pushed by its replay function (of
/// `module`).
pub(super) fn mark_replay_pushes(
    cx: &Derivation<'_>,
    module: &irad_ir::Module,
    cks: &Checkpoints,
    plan: &mut TapePlan,
) {
    let bb = &cx.shape.bb;
    for c in &cks.loops {
        let Some(func) = c.replay else { continue };
        let name = module.get(func).map(|f| f.name.clone()).unwrap_or_default();
        let l = &cx.shape.loops.of(c.k);
        let members: HashSet<Block> = l.members.iter().copied().map(|i| bb.blocks[i].id).collect();
        let (saves, branches) = plan.pushes_mut();
        for br in branches.iter_mut().filter(|b| members.contains(&b.from)) {
            br.replay = Some(name.clone());
        }
        for save in saves {
            let block = match &save.site {
                super::plan::Site::Stmt { block, .. }
                | super::plan::Site::BlockEnd { block, .. } => *block,
                super::plan::Site::Once => continue,
            };
            if let (true, Some(&value)) = (members.contains(&block), c.replayed.get(&save.value)) {
                let own = match save.site {
                    super::plan::Site::BlockEnd { .. } => c.replay_renamed_at.get(&(block, value)),
                    _ => None,
                };
                let value = own
                    .or_else(|| c.replay_renamed.get(&value))
                    .copied()
                    .unwrap_or(value);
                save.replay = Some(super::plan::ReplayPush {
                    func,
                    name: name.clone(),
                    value,
                    value_name: None,
                });
            }
        }
    }
}
