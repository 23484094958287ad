//! Stretches that shorten at run time for the arrays a loop makes in each
//! iteration and records (docs/reverse.md, "Arrays made in each
//! iteration").
//!
//! The stretch length under a limit of B bytes, `max(1, (B / 2) / r)`,
//! comes from the plan's estimate `r` of the bytes one iteration records,
//! where an array pushed counts as its reference. An array made in the
//! iteration (`copy`, `zeros`, a fresh shadow, ...) and pushed stays alive
//! on the tape with all its elements until the pullback pops it, so a loop
//! making an array of 100 000 elements per iteration would hold 800 KB per
//! iteration of a stretch sized for 48 bytes. The elements' number is not
//! known before the run; the lengths of the arrays entering the loop are,
//! on entry, and every replay sees the same ones (an array's length never
//! changes). So a loop under a limit that records `F` arrays made in its
//! iterations (weighted as the estimate weighs inner loops) and has array
//! inputs computes its stretch on entry as
//! `max(1, min(S, (B / 2) / (r + 8 F m)))`, `S` the static stretch and `m`
//! the longest of those arrays: each fresh array is assumed as long as the
//! longest array that enters the loop. A fresh array whose length is an
//! expression known on entry ([`Scope::made_length`]: `zeros(n)` of an
//! expression of the inputs, a copy of an input, either of such arrays)
//! counts at that length instead, `8 w n` for `w` of them of length `n`,
//! whether or not the loop has array inputs. The forward sweep computes it in the
//! block entering the loop (its countdown and, for a counted loop of a
//! known trip count, the direct path's test use it) and each replay
//! computes the same value from the same inputs at its entry (its header
//! check and, thinned, its splits use it), so the stretches replayed are
//! the stretches the forward sweep took, and the gradient is the same bit
//! for bit.
//!
//! Loops inside the loop (docs/reverse.md, "Loops inside a sized loop"):
//! the static estimate takes each to run [`INNER_TRIPS`] times per
//! iteration. Under a limit, each loop inside that may run longer
//! ([`inner_runs`]) counts on entry its trips, from its start and bound
//! when those are expressions of constants, inputs, their lengths, the
//! lengths of the arrays the loop's header phis enter with (a double
//! buffer's), the outer loop's counter and those of the counted loops
//! between them (at the ends of their ranges: [`Bound`], [`corners`]),
//! and the
//! snapshots each of its runs keeps, each copying its arrays taken as long
//! as the longest array input `m`: the stretch is `(B / 2) / (r' + 8 F m +
//! Σ runs (t (b + 8 f m) + 8 c m K))`, `r'` and `F` the estimate outside
//! those loops and `t`, `b`, `f`, `c`, `K` each one's trips, bytes and
//! fresh arrays per trip, arrays copied and snapshots per run (each fresh
//! array of a known length counted at it), computed in `f64`
//! ([`with_inner`]) and clamped as above.
//!
//! Assumes the loop's inputs are values defined before it (in the forward
//! sweep, or mapped into the outer replay of a nested loop), which a
//! replay takes as its first parameters in order. A replay lacks the
//! arrays the header phis enter with: a stretch that reads their lengths
//! ([`RunStretch::saved`]) is pushed with each snapshot and popped by the
//! replay instead of computed there. Guarantees: the value is
//! at least 1 and at most `S`; without fresh arrays of known length,
//! without fresh arrays or array inputs, and without inner loops counted
//! on entry, the stretch stays the constant `S` and nothing is emitted.

use super::super::ReverseError;
use super::super::ctx::Derivation;
use super::super::ctx::internal;
use super::super::plan::TapePlan;
use super::{
    CkLoop, INNER_TRIPS, MadeIn, SweepView, block_bytes, calls_in, depth_in, entry_test,
    short_constant,
};
use irad_ir::{Block, Const, FuncId, InstKind, Location, Module, Operand, Prim, Value};
use irad_rules::emit::contains_array;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// How a checkpointed loop under a limit computes its stretch on entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::reverse) struct RunStretch {
    /// Half the limit, in bytes.
    pub half: u64,
    /// The arrays made in the loop that one iteration pushes, weighted as
    /// the estimate of the bytes per iteration weighs blocks (outside the
    /// loops of `inner`), whose lengths are not known on entry: each is
    /// taken as long as the longest array.
    pub fresh: u64,
    /// Of `fresh`, the arrays' worth the loop's calls are taken to record
    /// ([`call_cost`]).
    pub called: u64,
    /// Those whose lengths are known on entry ([`Scope::made_length`]),
    /// each length with the weight of the arrays of that length.
    pub known: Vec<(u64, Bound)>,
    /// The loop's inputs that are arrays (indices among its inputs): the
    /// longest gives every fresh array's length.
    pub lengths: Vec<usize>,
    /// The loops directly inside it whose trips are counted on entry
    /// instead of taken as [`super::INNER_TRIPS`].
    pub inner: Vec<InnerRuns>,
    /// The estimated bytes of one iteration outside the loops of `inner`
    /// (the plan's estimate less what it counted for them).
    pub own: u64,
    /// For a counted loop whose start and bound are expressions of its
    /// inputs: those, the range of its counter ([`Bound::Counter`]).
    pub range: Option<(Bound, Bound)>,
    /// Values of the forward sweep defined before the loop, not among its
    /// inputs, whose lengths the trips read ([`Bound::Outside`]), or that
    /// give the longest array when it has no array inputs: the arrays its
    /// header phis enter with. A replay does not have them, so
    /// when there are any each snapshot pushes the stretch the forward
    /// sweep computed, and the replay pops it ([`RunStretch::saved`]).
    pub outside: Vec<Value>,
    /// The indices among `outside` of integers ([`Bound::Before`]), not
    /// arrays.
    pub scalars: Vec<usize>,
}

impl RunStretch {
    /// Whether arrays made in the loop (or in its inner loops) size it.
    pub fn counts_arrays(&self) -> bool {
        fn known(runs: &[InnerRuns]) -> bool {
            runs.iter().any(|r| !r.known.is_empty() || known(&r.inner))
        }
        ((!self.lengths.is_empty() || self.outside.len() > self.scalars.len())
            && (self.fresh > 0 || self.inner.iter().any(|r| r.fresh > 0)))
            || !self.known.is_empty()
            || known(&self.inner)
    }

    /// Whether an array gives the length of the arrays made in the loop of
    /// unknown length (an array input, or one the loop enters with):
    /// without one, those are not counted.
    pub fn has_longest(&self) -> bool {
        !self.lengths.is_empty() || self.outside.len() > self.scalars.len()
    }

    /// Whether each snapshot pushes the stretch, which a replay then pops
    /// rather than computes: it reads values a replay lacks.
    pub fn saved(&self) -> bool {
        !self.outside.is_empty()
    }
}

/// A loop inside a sized loop (directly, or inside counted loops of at
/// most [`INNER_TRIPS`] constant trips), which may run many more than
/// `INNER_TRIPS` iterations for each of the outer loop's, and which is
/// checkpointed inside the outer loop's replay, each of its runs keeping
/// snapshots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::reverse) struct InnerRuns {
    /// Its label (for the dump).
    pub label: u32,
    /// The bytes one of its iterations records (loops inside it weighed as
    /// the estimate weighs them).
    pub bytes: u64,
    /// The arrays made in it that one of its iterations pushes, weighed
    /// likewise, whose lengths are not known on entry.
    pub fresh: u64,
    /// Of `fresh`, the arrays' worth its calls are taken to record
    /// ([`call_cost`]).
    pub called: u64,
    /// Those whose lengths are, as [`RunStretch::known`].
    pub known: Vec<(u64, Bound)>,
    /// The arrays a snapshot of it copies: each the outer loop's input of
    /// that index, whose length it has, or (`None`) taken as long as the
    /// longest array input.
    pub copies: Vec<Option<usize>>,
    /// How many runs of it an iteration of the loop it is found in is
    /// taken to make: `INNER_TRIPS` for each short loop between them, as
    /// the estimate.
    pub runs: u64,
    /// How many iterations it is taken to run.
    pub trips: Trips,
    /// Its index among the derivation's loops.
    pub index: usize,
    /// The loops inside it counted the same way (their blocks are not in
    /// `bytes` and `fresh`).
    pub inner: Vec<InnerRuns>,
    /// The most iterations a run of it records directly, taking no
    /// snapshot: its direct path's runs when it is checkpointed
    /// ([`super::Direct::runs`]; 0 without one, and for a loop sized on
    /// entry itself, whose direct path takes the stretch it computes),
    /// every run when it is not (`u64::MAX`); set once every loop is
    /// decided ([`super::choose`]).
    pub direct: u64,
    /// Whether its trips are counted and so are those of every loop inside
    /// it but short constant ones, to any depth, and none of its blocks
    /// calls another function: the estimate then holds all it records,
    /// and a run of it may be recorded directly up to its own stretch
    /// ([`super::Direct::runs`]).
    pub complete: bool,
}

/// How many iterations an inner loop is taken to run for each iteration of
/// the loop around it, computed on entry to that loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::reverse) enum Trips {
    /// A counted loop whose start and bound are computed from constants,
    /// inputs of the outer loop and counters of loops around it
    /// ([`Bound::Counter`]): `max(0, bound - start) / step + 1` (`start -
    /// bound` counting down), the most it is at the corners of the
    /// counters' ranges.
    Counted {
        /// Its counter's start.
        start: Bound,
        /// The bound its counter is compared with.
        bound: Bound,
        /// The magnitude of its step (at least 1).
        step: u64,
        /// Whether it counts up.
        up: bool,
    },
    /// Any other: [`INNER_TRIPS`], as the static estimate.
    Unknown,
}

/// An operand of an inner loop's trip count: an expression of the outer
/// loop's inputs, evaluated in `f64` on entry (so that nothing traps: a
/// division by zero is infinite, and the stretch then its least).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::reverse) enum Bound {
    /// The outer loop's input of this index (an `i64`).
    Input(usize),
    /// A constant.
    Const(i64),
    /// The length of the outer loop's input of this index (an array).
    Length(usize),
    /// `iadd`, `isub`, `imul` or `idiv` of two, as `add`, `sub`, `mul`,
    /// `div`.
    Op(Prim, Box<Bound>, Box<Bound>),
    /// The counter of the loop of this index: the sized loop's, which
    /// runs over [`RunStretch::range`], or that of a counted loop around
    /// the inner loop inside the sized one, which runs over that loop's
    /// start and bound ([`Trips::Counted`]). The trips are the most the
    /// expressions give at the ends of those ranges ([`corners`]: `for j
    /// in 0..i` runs at most as many as the loop of `i`).
    Counter(usize),
    /// The length of [`RunStretch::outside`]'s array of this index.
    Outside(usize),
    /// [`RunStretch::outside`]'s integer of this index: a value defined
    /// before the loop that the loop reads only through its header phis
    /// (the start of a countdown, `let mut it = n; while it > 0 { ...; it
    /// = it - 1; }`).
    Before(usize),
    /// One of several, none holding the counter: the length of an array
    /// the loop carries, which is one of the arrays it may hold (`for i in
    /// 0..len(a)`, `a` one of a double buffer's phis). Evaluated as the
    /// largest where the span grows with it and the smallest where it
    /// shrinks ([`value`]), so that the trips are never fewer than a run
    /// makes; only where the sign of its effect is known ([`signed`]).
    OneOf(Vec<Bound>),
}

impl Bound {
    /// Its leaves (no `Op` nor `OneOf`), depth first.
    fn leaves(&self) -> Vec<&Bound> {
        match self {
            Bound::Op(_, x, y) => {
                let mut out = x.leaves();
                out.extend(y.leaves());
                out
            }
            Bound::OneOf(xs) => xs.iter().flat_map(Bound::leaves).collect(),
            leaf => vec![leaf],
        }
    }

    /// The loops whose counters are part of it.
    fn counters(&self) -> impl Iterator<Item = usize> + '_ {
        self.leaves().into_iter().filter_map(|b| match b {
            Bound::Counter(c) => Some(*c),
            _ => None,
        })
    }

    /// Whether a loop's counter is part of it.
    pub fn counts(&self) -> bool {
        self.counters().next().is_some()
    }

    /// Whether the counter of loop `j` is part of it.
    pub fn reads(&self, j: usize) -> bool {
        self.counters().any(|c| c == j)
    }

    /// Whether the counter of a loop other than loop `k` is part of it.
    pub fn reads_other(&self, k: usize) -> bool {
        self.counters().any(|c| c != k)
    }

    /// The least index among [`RunStretch::outside`] it reads.
    fn least_index(&self) -> Option<usize> {
        self.leaves()
            .into_iter()
            .filter_map(|b| match b {
                Bound::Outside(j) | Bound::Before(j) => Some(*j),
                _ => None,
            })
            .min()
    }

    /// Its indices among [`RunStretch::outside`] less `by`.
    fn shift(&mut self, by: usize) {
        match self {
            Bound::Outside(j) | Bound::Before(j) => *j -= by,
            Bound::Op(_, x, y) => {
                x.shift(by);
                y.shift(by);
            }
            Bound::OneOf(xs) => xs.iter_mut().for_each(|x| x.shift(by)),
            _ => {}
        }
    }

    /// It with the counter of loop `j` replaced by `with`.
    fn put(&self, j: usize, with: &Bound) -> Bound {
        match self {
            Bound::Counter(c) if *c == j => with.clone(),
            Bound::Op(p, x, y) => Bound::Op(*p, Box::new(x.put(j, with)), Box::new(y.put(j, with))),
            Bound::OneOf(xs) => Bound::OneOf(xs.iter().map(|x| x.put(j, with)).collect()),
            b => b.clone(),
        }
    }
}

/// A counter's loop (its index) with its start and bound.
pub(in crate::reverse) type Range = (usize, Bound, Bound);

/// At most this many corners ([`corners`]) per inner loop's trips.
const MOST_CORNERS: usize = 8;

/// The start and bound of a loop, `start` and `end`, at each corner of the
/// ranges of the counters they read, given by `chain` (outermost first,
/// each range's ends may read the counters before it): each counter
/// replaced by one end of its range, innermost first, so that the ends
/// read only counters further out, replaced in turn. A span linear in the
/// counters (no product of two terms holding one) is largest at one of
/// these: for each value of the counters further out, a counter's range is
/// an interval whose ends are linear in them. `None` when a counter read
/// is not in `chain`, or when there would be more than [`MOST_CORNERS`].
fn corners(start: &Bound, end: &Bound, chain: &[Range]) -> Option<Vec<(Bound, Bound)>> {
    let mut out = vec![(start.clone(), end.clone())];
    for (j, lo, hi) in chain.iter().rev() {
        if !out.iter().any(|(a, b)| a.reads(*j) || b.reads(*j)) {
            continue;
        }
        if out.len() * 2 > MOST_CORNERS {
            return None;
        }
        out = out
            .iter()
            .flat_map(|(a, b)| [lo, hi].map(|e| (a.put(*j, e), b.put(*j, e))))
            .collect();
    }
    out.iter()
        .all(|(a, b)| !a.counts() && !b.counts())
        .then_some(out)
}

/// How many values the search for the arrays a carried array may be
/// ([`Scope::length`]) visits at most.
const LENGTH_SOURCES: usize = 64;

/// How deep a bound's expression may be.
const BOUND_DEPTH: usize = 8;

/// The bytes assumed per element of a fresh array, and at most this many
/// fresh arrays are counted (so that `8 F m` stays far from `i64`'s end for
/// any length an array can have).
const ELEMENT_BYTES: u64 = 8;
const MAX_FRESH: u64 = 1 << 16;

/// Appends a primitive with its operands where the caller builds and
/// returns its result.
pub(in crate::reverse) type Emit<'a> =
    dyn FnMut(Prim, &[Operand]) -> Result<Operand, ReverseError> + 'a;

/// The stretch of loop `ck` as an operand computed with `emit` (a primitive
/// and its operands, appended where the caller builds, typed as the
/// primitive types them), from `inputs`, the caller's operand of each of the loop's
/// inputs, and `outside`, of each of [`RunStretch::outside`] (none in a
/// replay, which computes it only when not [`RunStretch::saved`]): the
/// constant stretch when the loop has no [`RunStretch`].
pub(in crate::reverse) fn stretch(
    ck: &CkLoop,
    (inputs, outside): (&[Operand], &[Operand]),
    loc: &Location,
    emit: &mut Emit<'_>,
) -> Result<Operand, ReverseError> {
    let fixed = i64::try_from(ck.stretch).unwrap_or(i64::MAX);
    let Some(s) = &ck.sized else {
        return Ok(Operand::from(fixed));
    };
    let mut arrays = Vec::with_capacity(s.lengths.len() + outside.len());
    for &j in &s.lengths {
        arrays.push(
            *inputs
                .get(j)
                .ok_or_else(|| internal(loc, "a sized loop's input out of range"))?,
        );
    }
    // The arrays the loop enters with count as its inputs.
    arrays.extend(
        outside
            .iter()
            .enumerate()
            .filter(|(j, _)| !s.scalars.contains(j))
            .map(|(_, a)| *a),
    );
    let mut longest: Option<Operand> = None;
    for a in arrays {
        let n = emit(Prim::Length, &[a])?;
        longest = Some(match longest {
            None => n,
            Some(m) => {
                let less = emit(Prim::Lt, &[m, n])?;
                emit(Prim::Select, &[less, n, m])?
            }
        });
    }
    if !s.inner.is_empty() || !s.known.is_empty() {
        return with_inner(ck, s, (inputs, outside, longest), loc, emit);
    }
    let Some(m) = longest else {
        return Ok(Operand::from(fixed));
    };
    let per = s.fresh.min(MAX_FRESH) * ELEMENT_BYTES;
    let per = i64::try_from(per).unwrap_or(i64::MAX);
    let bytes = i64::try_from(ck.bytes.max(1)).unwrap_or(i64::MAX);
    let half = i64::try_from(s.half).unwrap_or(i64::MAX);
    let elems = emit(Prim::Imul, &[m, Operand::from(per)])?;
    let r = emit(Prim::Iadd, &[elems, Operand::from(bytes)])?;
    let q = emit(Prim::Idiv, &[Operand::from(half), r])?;
    let least = i64::try_from(ck.least.max(1)).unwrap_or(i64::MAX);
    let small = emit(Prim::Lt, &[q, Operand::from(least)])?;
    let q = emit(Prim::Select, &[small, Operand::from(least), q])?;
    let long = emit(Prim::Lt, &[Operand::from(fixed), q])?;
    emit(Prim::Select, &[long, Operand::from(fixed), q])
}

/// The largest stretch [`with_inner`] computes in `f64` before converting
/// it (exact in `f64`, and far inside `i64`).
const MOST_EXACT: u64 = 1 << 52;

/// The stretch of a loop with inner loops counted on entry or fresh arrays
/// of known length: the estimate `r = own + 8 F m + 8 Σ w n + Σ t (b + 8 f
/// m + 8 Σ w n)` (`w` arrays of known length `n`, `t` an inner loop's
/// trips, `b` and `f` its bytes and fresh arrays per iteration), in `f64` so that no
/// product overflows, and the stretch `(B / 2) / r` clamped to `least`
/// and the static stretch before it converts back. `inputs` and `outside`
/// are the caller's operands of the loop's inputs and of
/// [`RunStretch::outside`], and `longest` the operand of the longest array
/// input's length, if any.
fn with_inner(
    ck: &CkLoop,
    s: &RunStretch,
    (inputs, outside, longest): (&[Operand], &[Operand], Option<Operand>),
    loc: &Location,
    emit: &mut Emit<'_>,
) -> Result<Operand, ReverseError> {
    let f = |x: u64| Operand::from(x as f64);
    let float = |op: Operand, emit: &mut Emit<'_>| match op {
        Operand::Const(irad_ir::Const::I64(c)) => Ok(Operand::from(c as f64)),
        op => emit(Prim::Sitofp, &[op]),
    };
    let m = match longest {
        Some(m) => Some(float(m, emit)?),
        None => None,
    };
    // Per element of the longest array, and per byte otherwise.
    let mut r = f(s.own.max(1));
    if let Some(m) = m {
        let per = s.fresh.min(MAX_FRESH) * ELEMENT_BYTES;
        if per > 0 {
            let elems = emit(Prim::Mul, &[m, f(per)])?;
            r = emit(Prim::Add, &[r, elems])?;
        }
    }
    r = add_known(r, &s.known, (inputs, outside), loc, emit)?;
    let chain: Vec<Range> = s
        .range
        .iter()
        .map(|(lo, hi)| (ck.k, lo.clone(), hi.clone()))
        .collect();
    for inner in &s.inner {
        let run = held(inner, s, (inputs, outside, m), &chain, loc, emit)?;
        r = emit(Prim::Add, &[r, run])?;
    }
    // Clamped by comparisons, which are false for a NaN (an infinite
    // bound less another): the stretch is then its least.
    let q = emit(Prim::Div, &[f(s.half), r])?;
    let least = ck.least.max(1);
    let most = ck.stretch.max(least).min(MOST_EXACT);
    let above = emit(Prim::Ge, &[q, f(least)])?;
    let q = emit(Prim::Select, &[above, q, f(least)])?;
    let below = emit(Prim::Le, &[q, f(most)])?;
    let q = emit(Prim::Select, &[below, q, f(most)])?;
    emit(Prim::Fptosi, &[q])
}

/// The bytes the runs of `inner` that one iteration of the loop it was
/// found in makes keep: per run `t (b + 8 f m + 8 Σ w n + Σ held(inner
/// loops))` for its records (`w` arrays of known length `n` per trip) and
/// `8 c m K` for its snapshots (none for a run of at most
/// its direct path's iterations, nor for a loop not checkpointed), `m` the
/// operand of the longest array's length, if any; `chain` the ranges of
/// the counters around it ([`corners`]).
fn held(
    inner: &InnerRuns,
    s: &RunStretch,
    (inputs, outside, m): (&[Operand], &[Operand], Option<Operand>),
    chain: &[Range],
    loc: &Location,
    emit: &mut Emit<'_>,
) -> Result<Operand, ReverseError> {
    let f = |x: u64| Operand::from(x as f64);
    let t = match &inner.trips {
        Trips::Counted {
            start,
            bound: end,
            step,
            up,
        } => {
            // The span at a corner, 0 for a loop that does not run.
            // The end it counts towards at its most, the start at its
            // least (counting down, the other way round).
            let span = |a: &Bound, b: &Bound, emit: &mut Emit<'_>| {
                let a = value(a, (inputs, outside), !up, loc, emit)?;
                let b = value(b, (inputs, outside), *up, loc, emit)?;
                let d = match up {
                    true => emit(Prim::Sub, &[b, a])?,
                    false => emit(Prim::Sub, &[a, b])?,
                };
                let runs = emit(Prim::Ge, &[d, f(0)])?;
                emit(Prim::Select, &[runs, d, f(0)])
            };
            let corners = corners(start, end, chain)
                .ok_or_else(|| internal(loc, "an inner bound's counter without its range"))?;
            let mut most: Option<Operand> = None;
            for (a, b) in &corners {
                let x = span(a, b, emit)?;
                most = Some(match most {
                    None => x,
                    Some(y) => {
                        let more = emit(Prim::Ge, &[y, x])?;
                        emit(Prim::Select, &[more, y, x])?
                    }
                });
            }
            let span = most.ok_or_else(|| internal(loc, "an inner loop of no corner"))?;
            let n = emit(Prim::Div, &[span, f((*step).max(1))])?;
            emit(Prim::Add, &[n, f(1)])?
        }
        Trips::Unknown => f(INNER_TRIPS),
    };
    // Its records per iteration, those of the loops inside it included.
    let mut recorded = f(inner.bytes);
    let mut around = chain.to_vec();
    if let Trips::Counted { start, bound, .. } = &inner.trips {
        around.push((inner.index, start.clone(), bound.clone()));
    }
    for c in &inner.inner {
        let run = held(c, s, (inputs, outside, m), &around, loc, emit)?;
        recorded = emit(Prim::Add, &[recorded, run])?;
    }
    let mut each = add_known(recorded, &inner.known, (inputs, outside), loc, emit)?;
    if let (Some(m), true) = (m, inner.fresh > 0) {
        let per = inner.fresh.min(MAX_FRESH) * ELEMENT_BYTES;
        let elems = emit(Prim::Mul, &[m, f(per)])?;
        each = emit(Prim::Add, &[each, elems])?;
    }
    let mut run = emit(Prim::Mul, &[t, each])?;
    // The elements its snapshots copy.
    let mut elems: Option<Operand> = None;
    for c in &inner.copies {
        let n = match (c, m) {
            (Some(j), _) => {
                let a = *inputs
                    .get(*j)
                    .ok_or_else(|| internal(loc, "a copied array out of range"))?;
                let n = emit(Prim::Length, &[a])?;
                emit(Prim::Sitofp, &[n])?
            }
            (None, Some(m)) => m,
            (None, None) => continue,
        };
        elems = Some(match elems {
            Some(e) => emit(Prim::Add, &[e, n])?,
            None => n,
        });
    }
    let snapshots = match inner.trips {
        // A run its direct path records takes none.
        Trips::Counted { .. } => inner.direct < u64::MAX,
        // Nor does a loop not checkpointed.
        Trips::Unknown => inner.direct != u64::MAX,
    };
    if let (Some(elems), true) = (elems, snapshots) {
        let mut kept = snapshots_of(t, recorded, s.half, emit)?;
        if matches!(inner.trips, Trips::Counted { .. }) {
            let long = emit(Prim::Lt, &[f(inner.direct), t])?;
            kept = emit(Prim::Select, &[long, kept, f(0)])?;
        }
        let bytes = emit(Prim::Mul, &[elems, f(ELEMENT_BYTES)])?;
        let copies = emit(Prim::Mul, &[kept, bytes])?;
        run = emit(Prim::Add, &[run, copies])?;
    }
    if inner.runs > 1 {
        run = emit(Prim::Mul, &[run, f(inner.runs)])?;
    }
    Ok(run)
}

/// `r` (an `f64` operand of bytes) and 8 bytes per element of the arrays
/// of `known` (weights and lengths, the most each length can be on entry).
fn add_known(
    mut r: Operand,
    known: &[(u64, Bound)],
    (inputs, outside): (&[Operand], &[Operand]),
    loc: &Location,
    emit: &mut Emit<'_>,
) -> Result<Operand, ReverseError> {
    for (w, b) in known {
        let n = value(b, (inputs, outside), true, loc, emit)?;
        // A length is never negative; an expression of lengths may be.
        let some = emit(Prim::Ge, &[n, Operand::from(0.0)])?;
        let n = emit(Prim::Select, &[some, n, Operand::from(0.0)])?;
        let per = (*w).min(MAX_FRESH) * ELEMENT_BYTES;
        let elems = emit(Prim::Mul, &[n, Operand::from(per as f64)])?;
        r = emit(Prim::Add, &[r, elems])?;
    }
    Ok(r)
}

/// How many snapshots a run of an inner loop of `t` iterations (an `f64`
/// operand) recording `bytes` each (an `f64` operand) keeps, at most: `1 +
/// log2(t bytes / half)` for its stretches sized from half the limit,
/// thinned as a binary counter (docs/reverse.md, "Bounded snapshots"), and
/// at least 1.
fn snapshots_of(
    t: Operand,
    bytes: Operand,
    half: u64,
    emit: &mut Emit<'_>,
) -> Result<Operand, ReverseError> {
    let f = |x: u64| Operand::from(x as f64);
    let all = emit(Prim::Mul, &[t, bytes])?;
    let stretches = emit(Prim::Div, &[all, f(half.max(1))])?;
    let ln = emit(Prim::Log, &[stretches])?;
    let log2 = emit(Prim::Div, &[ln, Operand::from(std::f64::consts::LN_2)])?;
    let some = emit(Prim::Ge, &[log2, f(0)])?;
    let log2 = emit(Prim::Select, &[some, log2, f(0)])?;
    emit(Prim::Add, &[log2, f(1)])
}

/// The `f64` value of `b` on entry, from `inputs` and `outside`, the
/// caller's operands of the loop's inputs and of [`RunStretch::outside`]
/// (its counters replaced by ends of their ranges: [`corners`]): the most
/// it can be when `up`, the least otherwise (a [`Bound::OneOf`] is then
/// the smallest of its lengths; the others have one value).
fn value(
    b: &Bound,
    (inputs, outside): (&[Operand], &[Operand]),
    up: bool,
    loc: &Location,
    emit: &mut Emit<'_>,
) -> Result<Operand, ReverseError> {
    let input = |j: usize| {
        inputs
            .get(j)
            .copied()
            .ok_or_else(|| internal(loc, "an inner loop's bound out of range"))
    };
    let scope = (inputs, outside);
    match b {
        Bound::Const(c) => Ok(Operand::from(*c as f64)),
        Bound::Input(j) => emit(Prim::Sitofp, &[input(*j)?]),
        Bound::Length(j) => {
            let n = emit(Prim::Length, &[input(*j)?])?;
            emit(Prim::Sitofp, &[n])
        }
        Bound::Counter(_) => Err(internal(loc, "an inner bound's counter without its range")),
        Bound::Outside(j) => {
            let a = outside
                .get(*j)
                .copied()
                .ok_or_else(|| internal(loc, "an inner loop's array out of range"))?;
            let n = emit(Prim::Length, &[a])?;
            emit(Prim::Sitofp, &[n])
        }
        Bound::Before(j) => {
            let n = outside
                .get(*j)
                .copied()
                .ok_or_else(|| internal(loc, "an inner loop's bound out of range"))?;
            emit(Prim::Sitofp, &[n])
        }
        Bound::OneOf(xs) => {
            let mut most: Option<Operand> = None;
            for x in xs {
                let x = value(x, scope, up, loc, emit)?;
                most = Some(match most {
                    None => x,
                    Some(m) => {
                        let keep = match up {
                            true => emit(Prim::Ge, &[m, x])?,
                            false => emit(Prim::Le, &[m, x])?,
                        };
                        emit(Prim::Select, &[keep, m, x])?
                    }
                });
            }
            most.ok_or_else(|| internal(loc, "a length of no array"))
        }
        Bound::Op(prim, x, y) => {
            // The sign each operand's effect has.
            let (ux, uy) = match (prim, x.as_ref(), y.as_ref()) {
                (Prim::Isub, _, _) => (up, !up),
                (Prim::Imul, Bound::Const(c), _) => (up, up == (*c >= 0)),
                (Prim::Imul | Prim::Idiv, _, Bound::Const(c)) => (up == (*c >= 0), up),
                _ => (up, up),
            };
            let x = value(x, scope, ux, loc, emit)?;
            let y = value(y, scope, uy, loc, emit)?;
            let prim = match prim {
                Prim::Iadd => Prim::Add,
                Prim::Isub => Prim::Sub,
                Prim::Imul => Prim::Mul,
                Prim::Idiv => Prim::Div,
                _ => return Err(internal(loc, "an inner loop's bound of another primitive")),
            };
            emit(prim, &[x, y])
        }
    }
}

/// The stretch of loop `ck` and the stretch less one, computed at the end
/// of block `at` of function `fid` (before its terminator) from
/// `ck.inputs` and [`RunStretch::outside`], values of that function: the
/// block entering the loop in the sweep that runs it without recording.
/// Constants without a [`RunStretch`].
pub(in crate::reverse) fn stretch_at(
    module: &mut Module,
    fid: FuncId,
    at: Block,
    ck: &CkLoop,
    loc: &Location,
) -> Result<(Operand, Operand), ReverseError> {
    if ck.sized.is_none() {
        let fixed = i64::try_from(ck.stretch).unwrap_or(i64::MAX);
        return Ok((Operand::from(fixed), Operand::from(fixed.saturating_sub(1))));
    }
    let func = module
        .get_mut(fid)
        .ok_or_else(|| internal(loc, "no function for the stretch"))?;
    let term = func.blocks[at].term.take();
    let term_pos = func.blocks[at].term_pos;
    let inputs: Vec<Operand> = ck.inputs.iter().map(|&v| Operand::Value(v)).collect();
    let outside: Vec<Operand> = ck
        .sized
        .iter()
        .flat_map(|s| s.outside.iter().map(|&v| Operand::Value(v)))
        .collect();
    let mut fb =
        irad_ir::FuncBuilder::new(module, fid).map_err(|e| internal(loc, e.to_string()))?;
    fb.switch_to_block(at)
        .map_err(|e| internal(loc, e.to_string()))?;
    let mut emit = |prim, args: &[Operand]| {
        super::super::ctx::emit_value(&mut fb, prim, args).map_err(|e| internal(loc, e))
    };
    let out = stretch(ck, (&inputs, &outside), loc, &mut emit)
        .and_then(|l| Ok((l, emit(Prim::Isub, &[l, Operand::from(1i64)])?)));
    drop(fb);
    let func = module
        .get_mut(fid)
        .ok_or_else(|| internal(loc, "no function for the stretch"))?;
    func.blocks[at].term = term;
    func.blocks[at].term_pos = term_pos;
    out
}

/// What [`inner_runs`] finds.
pub(in crate::reverse) struct InnerFound {
    /// The inner loops.
    pub runs: Vec<InnerRuns>,
    /// The bytes the static estimate counted for them.
    pub bytes: u64,
    /// The arrays made in the loop outside them that one iteration pushes
    /// ([`RunStretch::fresh`], [`RunStretch::called`] and
    /// [`RunStretch::known`]).
    pub fresh: u64,
    pub called: u64,
    pub known: Vec<(u64, Bound)>,
    /// The outer loop's range ([`RunStretch::range`]).
    pub range: Option<(Bound, Bound)>,
    /// The values before the loop whose lengths (or values) the trips
    /// read ([`RunStretch::outside`]), and which of them are integers.
    pub outside: Vec<Value>,
    pub scalars: Vec<usize>,
}

/// The loops inside loop `k` that may run more than [`INNER_TRIPS`]
/// iterations for each of its own: all but counted loops of a constant trip
/// count at most that, directly inside `k` or inside such short loops only,
/// and likewise inside each of those, to [`NEST_DEPTH`] levels. Each with
/// how many trips it is taken to make, given `k`'s inputs and counter and
/// the counters of the counted loops between them (see [`Trips`] and
/// [`corners`]), and how many arrays its snapshots copy (when `lengths`: `k` has
/// array inputs). A loop of unknown trips whose snapshots copy no array
/// and inside which no loop counts counts as the static estimate does and
/// is left out. Returns them, the bytes the static estimate counted for
/// the outermost of them, which the estimate on entry replaces, the arrays
/// made in `k`'s other blocks that an iteration pushes, and `k`'s
/// counter's range. `fresh` tells whether the loop's fresh arrays are
/// counted at all.
pub(in crate::reverse) fn inner_runs(
    cx: &Derivation<'_>,
    (view, plan): (&SweepView<'_>, &TapePlan),
    k: usize,
    (inputs, lengths, fresh): (&[Value], bool, bool),
    unsafe_classes: &HashSet<u32>,
) -> InnerFound {
    let loops = &cx.shape.loops;
    let outer = loops.of(k);
    // The outer loop's counter, over its start and bound.
    let mut scope = Scope {
        cx,
        view,
        inputs,
        counters: Vec::new(),
        k,
        fdef: super::super::plan::def_blocks(view.fwd, view.fblock),
        outside: Vec::new(),
        primal: None,
    };
    let mut range = outer
        .counted
        .as_ref()
        .zip(entry_test(cx, k))
        .and_then(|(c, t)| {
            let (lo, hi) = scope.bounds(c.init, t.bound)?;
            Some((lo, hi, c.iv))
        });
    // What the range added to `outside` (the first entries).
    let ranged = scope.outside.len();
    if let Some((lo, hi, iv)) = &range {
        scope.counters.push((*iv, (k, lo.clone(), hi.clone())));
    }
    // The trips of each first: they may read arrays before the loop, whose
    // lengths then also give the copies' of the arrays made in it.
    let mut found = nest(&mut scope, k, NEST_DEPTH);
    // A range no trips read is not needed, nor are the integers it added
    // when nothing else reads them: the stretch would be pushed with each
    // snapshot for nothing (a countdown's start). The arrays it added give
    // the longest length too, and stay.
    if !found.iter().any(|f| f.reads(k)) {
        range = None;
        scope.counters.clear();
        if ranged > 0
            && scope.scalars().iter().filter(|&&j| j < ranged).count() == ranged
            && found
                .iter()
                .all(|f| f.least_index().is_none_or(|j| j >= ranged))
        {
            scope.outside.drain(..ranged);
            for f in &mut found {
                f.shift(ranged);
            }
        }
    }
    // Without array inputs, the arrays the header phis enter with give
    // the longest length (the arrays a double buffer may hold), so that
    // the arrays its inner loops' snapshots copy count, and what its calls
    // record: the search for a header phi's length adds them to `outside`.
    let calls = outer.members.iter().any(|&i| {
        cx.shape.bb.blocks[i].stmts.iter().any(|&inst| {
            matches!(&cx.src.insts[inst].kind,
                    InstKind::Invoke { func, .. } if cx.call_elements.contains_key(func))
        })
    });
    if !lengths && !scope.has_arrays() && (!found.is_empty() || calls) {
        for (_, r) in super::replay::header_phis(cx, outer.header) {
            if matches!(cx.src.values[r].ty, irad_ir::Type::Array(_)) {
                let _ = scope.length(r, BOUND_DEPTH);
            }
        }
    }
    let mut weigh = Weigh {
        plan,
        lengths: lengths || scope.has_arrays(),
        made: fresh.then(|| MadeIn::new(cx, view, k)),
        unsafe_classes,
        scope,
    };
    let pow = |d: usize| INNER_TRIPS.saturating_pow(u32::try_from(d).unwrap_or(u32::MAX));
    let (mut out, mut bytes) = (Vec::new(), 0u64);
    for f in found {
        let Some(each) = weigh.runs(f, k) else {
            continue;
        };
        for &i in loops
            .of(each.index)
            .members
            .iter()
            .filter(|&&i| cx.shape.kept(i))
        {
            let d = depth_in(loops, i, k);
            bytes = bytes.saturating_add(block_bytes(cx, view, plan, i).saturating_mul(pow(d)));
        }
        out.push(each);
    }
    // The arrays made in the loop's other blocks.
    let mut made = Made::default();
    for &i in outer.members.iter().filter(|&&i| cx.shape.kept(i)) {
        if !out.iter().any(|r| loops.of(r.index).contains(i)) {
            weigh.made_in(i, pow(depth_in(loops, i, k)), &mut made);
        }
    }
    out.sort_by_key(|r| r.label);
    InnerFound {
        runs: out,
        bytes,
        // The sizing counts at most `MAX_FRESH`, and so does the dump.
        fresh: made.unknown.min(MAX_FRESH),
        called: made.calls.min(made.unknown.min(MAX_FRESH)),
        known: made.known,
        range: range.map(|(lo, hi, _)| (lo, hi)),
        scalars: weigh.scope.scalars(),
        outside: weigh.scope.outside,
    }
}

/// The arrays made in a loop that an iteration pushes, weighted: those of
/// unknown length and those of lengths known on entry.
#[derive(Default)]
struct Made {
    unknown: u64,
    known: Vec<(u64, Bound)>,
    /// Of `unknown`, the arrays' worth calls are taken to record.
    calls: u64,
}

impl Made {
    fn add(&mut self, times: u64, length: Option<Bound>) {
        match length {
            None => self.unknown = self.unknown.saturating_add(times),
            Some(b) => match self.known.iter_mut().find(|(_, x)| *x == b) {
                Some((w, _)) => *w = w.saturating_add(times),
                None => self.known.push((times, b)),
            },
        }
    }
}

/// How many levels of loops inside a sized loop count their trips.
const NEST_DEPTH: usize = 8;

/// A loop [`nest`] finds, with its trips and the loops it finds in it.
struct Found {
    j: usize,
    trips: Trips,
    inner: Vec<Found>,
}

impl Found {
    /// Its start and bound, and those of the loops inside it.
    fn bounds(&self) -> Vec<&Bound> {
        let mut out = Vec::new();
        if let Trips::Counted { start, bound, .. } = &self.trips {
            out.extend([start, bound]);
        }
        for f in &self.inner {
            out.extend(f.bounds());
        }
        out
    }

    /// Whether it or a loop inside it reads the counter of loop `k`.
    fn reads(&self, k: usize) -> bool {
        self.bounds().iter().any(|b| b.reads(k))
    }

    /// The least index among [`RunStretch::outside`] they read.
    fn least_index(&self) -> Option<usize> {
        self.bounds().iter().filter_map(|b| b.least_index()).min()
    }

    /// Their indices among [`RunStretch::outside`] less `by`, each at
    /// least `by`.
    fn shift(&mut self, by: usize) {
        if let Trips::Counted { start, bound, .. } = &mut self.trips {
            start.shift(by);
            bound.shift(by);
        }
        for f in &mut self.inner {
            f.shift(by);
        }
    }
}

/// The loops inside loop `parent` that may run long (see [`inner_runs`]),
/// with their trips and, to `depth` levels, the same inside each.
fn nest(scope: &mut Scope<'_, '_>, parent: usize, depth: usize) -> Vec<Found> {
    let cx = scope.cx;
    let loops = &cx.shape.loops;
    let p = loops.of(parent);
    let inside = |j: usize| {
        let l = loops.of(j);
        j != parent && l.header != p.header && p.contains(l.header)
    };
    let mut out = Vec::new();
    for j in (0..loops.count()).filter(|&j| inside(j)) {
        let l = loops.of(j);
        if short_constant(cx, j) {
            continue;
        }
        // Inside `parent` through short loops only.
        if (0..loops.count()).any(|o| {
            o != j
                && inside(o)
                && loops.of(o).header != l.header
                && loops.of(o).contains(l.header)
                && !short_constant(cx, o)
        }) {
            continue;
        }
        let trips = scope.trips(j);
        // Its counter, over its start and bound, for the loops inside it.
        let counter = match (&trips, &l.counted) {
            (Trips::Counted { start, bound, .. }, Some(c)) => {
                Some((c.iv, (j, start.clone(), bound.clone())))
            }
            _ => None,
        };
        let pushed = counter.is_some();
        scope.counters.extend(counter);
        let inner = match depth > 1 {
            true => nest(scope, j, depth - 1),
            false => Vec::new(),
        };
        if pushed {
            scope.counters.pop();
        }
        out.push(Found { j, trips, inner });
    }
    out
}

/// How many loops lie between loop `outer` and loop `j` inside it (the
/// short constant loops a loop is found through: each makes
/// [`INNER_TRIPS`] runs), loops of one exit and of several alike.
fn between(loops: &super::super::loops::RevLoops, outer: usize, j: usize) -> usize {
    let (o, l) = (loops.of(outer), loops.of(j));
    (0..loops.count())
        .filter(|&m| {
            let lm = loops.of(m);
            m != outer
                && m != j
                && lm.header != o.header
                && lm.header != l.header
                && o.contains(lm.header)
                && lm.contains(l.header)
        })
        .count()
}

/// What [`inner_runs`] weighs the loops it found with.
struct Weigh<'w, 'c> {
    plan: &'w TapePlan,
    /// Whether arrays of unknown length count (as long as the longest).
    lengths: bool,
    /// The loop's fresh arrays, when they count.
    made: Option<MadeIn<'w>>,
    unsafe_classes: &'w HashSet<u32>,
    /// The sized loop's inputs and counter, which lengths are found in.
    scope: Scope<'w, 'c>,
}

impl Weigh<'_, '_> {
    /// Adds to `out` the arrays made in the loop that block `i` pushes
    /// each time it runs, `times` times, when they count, and what its
    /// calls record per element, always.
    fn made_in(&mut self, i: usize, times: u64, out: &mut Made) {
        if let Some(made) = &self.made {
            let pushed: Vec<(Value, irad_ir::Type)> = made
                .pushed_values(self.scope.cx, self.plan, i)
                .map(|(v, ty)| (v, ty.clone()))
                .collect();
            for (v, ty) in pushed {
                out.add(times, self.scope.made_length(v, &ty));
            }
        }
        // What its calls record per element ([`call_cost`]): held on the
        // tape, not kept by replays, so counted whatever the loop carries.
        let cx = self.scope.cx;
        for &inst in &cx.shape.bb.blocks[i].stmts {
            let InstKind::Invoke { func, .. } = &cx.src.insts[inst].kind else {
                continue;
            };
            let derived = matches!(
                self.scope.view.stmts[inst].as_ref().map(|s| &s.how),
                Some(super::How::Invoke(_))
            );
            if let (true, Some(&c)) = (derived, cx.call_elements.get(func)) {
                let c = c.saturating_mul(times);
                out.unknown = out.unknown.saturating_add(c);
                out.calls = out.calls.saturating_add(c);
            }
        }
    }

    /// Loop `f` and the loops it found inside it, as [`InnerRuns`]: its
    /// blocks outside those weighed as the estimate weighs them, relative
    /// to its own depth; `parent` is the loop it was found in (the short
    /// loops between them make its runs). `None` for a loop of unknown
    /// trips whose snapshots copy no array, with no such loop inside.
    fn runs(&mut self, f: Found, parent: usize) -> Option<InnerRuns> {
        let (cx, view, k) = (self.scope.cx, self.scope.view, self.scope.k);
        let loops = &cx.shape.loops;
        let l = loops.of(f.j);
        let base = depth_in(loops, l.header, k);
        let inner: Vec<InnerRuns> = f
            .inner
            .into_iter()
            .filter_map(|c| self.runs(c, f.j))
            .collect();
        let mut copies = snapshot_arrays(
            cx,
            (view, self.plan),
            (f.j, self.scope.inputs),
            self.unsafe_classes,
        );
        if !self.lengths {
            copies.retain(Option::is_some);
        }
        if f.trips == Trips::Unknown && copies.is_empty() && inner.is_empty() {
            return None;
        }
        let pow = |d: usize| INNER_TRIPS.saturating_pow(u32::try_from(d).unwrap_or(u32::MAX));
        let mut each = InnerRuns {
            label: cx.label(l.header),
            index: f.j,
            bytes: 0,
            fresh: 0,
            called: 0,
            known: Vec::new(),
            copies,
            runs: pow(between(loops, parent, f.j)),
            trips: f.trips,
            inner,
            direct: INNER_TRIPS,
            complete: false,
        };
        // A call's records are not known (the estimate takes them as
        // `CALL_BYTES`), so a loop that calls is not complete.
        let mut made = Made::default();
        let mut complete = matches!(each.trips, Trips::Counted { .. })
            && each.inner.iter().all(|c| c.complete)
            && !l.members.iter().any(|&i| calls_in(cx, view, i));
        for &i in l.members.iter().filter(|&&i| cx.shape.kept(i)) {
            if each.inner.iter().any(|c| loops.of(c.index).contains(i)) {
                continue;
            }
            // A block of a loop inside it that is not counted (left out,
            // or deeper than the levels counted).
            complete = complete
                && !(0..loops.count()).any(|o| {
                    let lo = loops.of(o);
                    o != f.j
                        && lo.header != l.header
                        && l.contains(lo.header)
                        && lo.contains(i)
                        && !short_constant(cx, o)
                });
            let d = depth_in(loops, i, k);
            let times = pow(d - base.min(d));
            let b = block_bytes(cx, view, self.plan, i);
            each.bytes = each.bytes.saturating_add(b.saturating_mul(times));
            self.made_in(i, times, &mut made);
        }
        each.fresh = made.unknown.min(MAX_FRESH);
        each.called = made.calls.min(each.fresh);
        each.known = made.known;
        each.complete = complete;
        Some(each)
    }
}

/// The arrays a snapshot of loop `j` copies, were it checkpointed: those
/// of its inputs it writes (`region::arrays`), each the outer loop's input
/// of that index among `outer` when it is one, and those its header phis
/// carry (`None`).
fn snapshot_arrays(
    cx: &Derivation<'_>,
    (view, plan): (&SweepView<'_>, &TapePlan),
    (j, outer): (usize, &[Value]),
    unsafe_classes: &HashSet<u32>,
) -> Vec<Option<usize>> {
    let inputs = super::region::inputs(cx, view, plan, j);
    let written = super::region::arrays(cx, view, &inputs, j, unsafe_classes);
    let carried = super::replay::header_phis(cx, cx.shape.loops.of(j).header)
        .iter()
        .filter(|&&(_, r)| contains_array(&cx.src.values[r].ty))
        .count();
    written
        .iter()
        .map(|a| match a.path.is_empty() {
            true => outer.iter().position(|&v| Some(&v) == inputs.get(a.input)),
            false => None,
        })
        .chain(std::iter::repeat_n(None, carried))
        .collect()
}

/// What a bound may be made of: the outer loop's `inputs` (of the forward
/// sweep) and its counter, a primal value, when its range is known; the
/// lengths of arrays defined before it that it carries (`outside`, which
/// grows as bounds read them).
struct Scope<'s, 'c> {
    cx: &'s Derivation<'c>,
    view: &'s SweepView<'s>,
    inputs: &'s [Value],
    /// The counters a bound may read, outermost first, each with its
    /// loop's range: the sized loop's, when its range is known, and those
    /// of the counted loops around the loop whose trips are asked for.
    counters: Vec<(Value, Range)>,
    /// The outer loop.
    k: usize,
    /// The block position of each value of the forward sweep.
    fdef: irad_ir::entity::SecondaryMap<Value, Option<usize>>,
    /// See [`RunStretch::outside`].
    outside: Vec<Value>,
    /// The primal array of each value of the forward sweep that is one or
    /// its shadow, built when first asked ([`Scope::made_length`]).
    primal: Option<HashMap<Value, Value>>,
}

impl Scope<'_, '_> {
    /// Whether `outside` holds an array.
    fn has_arrays(&self) -> bool {
        self.outside.len() > self.scalars().len()
    }

    /// The indices among `outside` of integers.
    fn scalars(&self) -> Vec<usize> {
        (0..self.outside.len())
            .filter(|&j| {
                !matches!(
                    self.view.fwd.values[self.outside[j]].ty,
                    irad_ir::Type::Array(_)
                )
            })
            .collect()
    }

    /// The index among `outside` of value `f` of the forward sweep, added
    /// when it is not there.
    fn outside_index(&mut self, f: Value) -> usize {
        match self.outside.iter().position(|&x| x == f) {
            Some(j) => j,
            None => {
                self.outside.push(f);
                self.outside.len() - 1
            }
        }
    }
    /// The length on entry of array `v` of the forward sweep, of type
    /// `ty`, made in the loop: that of the primal array it is or is the
    /// shadow of ([`Scope::length`]), when that is an expression without
    /// the counter whose polarity is known ([`signed`]). `None` (and
    /// `outside` as it was) otherwise, and for a value holding arrays that
    /// is not one.
    fn made_length(&mut self, v: Value, ty: &irad_ir::Type) -> Option<Bound> {
        if !matches!(ty, irad_ir::Type::Array(_)) {
            return None;
        }
        let (cx, view) = (self.cx, self.view);
        let primal = self.primal.get_or_insert_with(|| {
            let mut map = HashMap::default();
            for (p, data) in cx.src.values.iter() {
                if !matches!(data.ty, irad_ir::Type::Array(_)) {
                    continue;
                }
                if let Some(Operand::Value(f)) = view.fval[p] {
                    map.entry(f).or_insert(p);
                }
                for s in &view.fshadow[p] {
                    if let Operand::Value(s) = s {
                        map.entry(*s).or_insert(p);
                    }
                }
            }
            map
        });
        let p = *primal.get(&v)?;
        let mark = self.outside.len();
        let b = self.length(p, BOUND_DEPTH)?;
        if b.counts() || !signed(&b) {
            self.outside.truncate(mark);
            return None;
        }
        Some(b)
    }

    /// How many trips inner loop `j` is taken to make (see
    /// [`inner_runs`]).
    fn trips(&mut self, j: usize) -> Trips {
        let l = self.cx.shape.loops.of(j);
        let (Some(c), Some(test)) = (l.counted.as_ref(), entry_test(self.cx, j)) else {
            return Trips::Unknown;
        };
        let step = c.step.unsigned_abs();
        let mark = self.outside.len();
        let chain: Vec<Range> = self.counters.iter().map(|(_, r)| r.clone()).collect();
        // One of several lengths only where the sign of its effect on the
        // span is known, at each corner of the counters' ranges.
        let known = |a: &Bound, b: &Bound| {
            signed(a)
                && signed(b)
                && corners(a, b, &chain)
                    .is_some_and(|cs| cs.iter().all(|(a, b)| signed(a) && signed(b)))
        };
        match self.bounds(c.init, test.bound) {
            Some((start, bound)) if known(&start, &bound) => Trips::Counted {
                start,
                bound,
                step,
                up: test.up,
            },
            _ => {
                self.outside.truncate(mark);
                Trips::Unknown
            }
        }
    }

    /// Both of a counted loop's start and bound as expressions, or
    /// neither (`outside` then as it was).
    fn bounds(&mut self, start: Operand, bound: Operand) -> Option<(Bound, Bound)> {
        let mark = self.outside.len();
        let both = self
            .bound(start, BOUND_DEPTH)
            .and_then(|a| Some((a, self.bound(bound, BOUND_DEPTH)?)));
        if both.is_none() {
            self.outside.truncate(mark);
        }
        both
    }

    /// The index among the outer loop's inputs of primal value `v`'s value
    /// in the forward sweep, if it is one.
    fn input(&self, v: Value) -> Option<usize> {
        match self.view.fval[v] {
            Some(Operand::Value(f)) => self.inputs.iter().position(|&x| x == f),
            _ => None,
        }
    }

    /// Primal operand `op` as an expression at most `depth` deep: a
    /// constant, an input, the length of an array input or of an array the
    /// loop carries, the counter, or `iadd`, `isub`, `imul` or `idiv` of
    /// such, linear in the counter.
    fn bound(&mut self, op: Operand, depth: usize) -> Option<Bound> {
        let v = match op {
            Operand::Const(Const::I64(c)) => return Some(Bound::Const(c)),
            Operand::Const(_) => return None,
            Operand::Value(v) => v,
        };
        if let Some((_, (j, _, _))) = self.counters.iter().find(|(c, _)| *c == v) {
            return Some(Bound::Counter(*j));
        }
        if let Some(Operand::Const(Const::I64(c))) = self.view.fval[v] {
            return Some(Bound::Const(c));
        }
        if let Some(j) = self.input(v) {
            return Some(Bound::Input(j));
        }
        // An integer defined before the loop that it reads only through
        // its header phis: the forward sweep has it where the loop is
        // entered, a replay does not.
        if let Some(Operand::Value(f)) = self.view.fval[v] {
            let outer = self.cx.shape.loops.of(self.k);
            if matches!(self.view.fwd.values[f].ty, irad_ir::Type::I64)
                && self.fdef[f].is_none_or(|d| !outer.contains(d))
            {
                return Some(Bound::Before(self.outside_index(f)));
            }
        }
        let irad_ir::ValueDef::Inst(inst) = self.cx.src.values[v].def else {
            return None;
        };
        let InstKind::Prim { prim, args } = &self.cx.src.insts[inst].kind else {
            return None;
        };
        let depth = depth.checked_sub(1)?;
        match (prim, args.as_slice()) {
            (Prim::Length, [Operand::Value(a)]) => self.length(*a, depth),
            (Prim::Iadd | Prim::Isub | Prim::Imul | Prim::Idiv, [x, y]) => {
                let (x, y) = (self.bound(*x, depth)?, self.bound(*y, depth)?);
                // Linear in the counter only, so that the span is largest
                // at an end of its range: no product of two terms holding
                // it (`i * (n - i)` is 0 at both), no division by one.
                let linear = match prim {
                    Prim::Imul => !(x.counts() && y.counts()),
                    Prim::Idiv => !y.counts(),
                    _ => true,
                };
                linear.then(|| Bound::Op(*prim, Box::new(x), Box::new(y)))
            }
            _ => None,
        }
    }

    /// The length of primal array `a`, read in the outer loop, as at most
    /// `depth` deep: an array input's, else the largest of those of the
    /// arrays it may be, found through phis (the outer loop's header phis
    /// included, so a double buffer's are the two it enters with),
    /// `select` and `copy`, each an array input, an array defined before
    /// the loop (its value in the forward sweep added to `outside`), or
    /// `zeros(n)` and `alloc(n)` with `n` such an expression without the
    /// counter. An array's length never changes, so the arrays the loop
    /// may hold, and their lengths, are those a search from `a` reaches.
    /// `None` (and `outside` as it was) for any other array, or when the
    /// search visits more than [`LENGTH_SOURCES`] values.
    fn length(&mut self, a: Value, depth: usize) -> Option<Bound> {
        if let Some(j) = self.input(a) {
            return Some(Bound::Length(j));
        }
        let mark = self.outside.len();
        let found = self.sources(a, depth);
        if found.is_none() {
            self.outside.truncate(mark);
        }
        found
    }

    /// The search of [`Scope::length`].
    fn sources(&mut self, a: Value, depth: usize) -> Option<Bound> {
        let outer = self.cx.shape.loops.of(self.k);
        let (mut seen, mut work, mut out) = (HashSet::default(), vec![a], Vec::<Bound>::new());
        let add = |out: &mut Vec<Bound>, b: Bound| {
            if !out.contains(&b) {
                out.push(b);
            }
        };
        while let Some(v) = work.pop() {
            if !seen.insert(v) {
                continue;
            }
            if seen.len() > LENGTH_SOURCES {
                return None;
            }
            if let Some(j) = self.input(v) {
                add(&mut out, Bound::Length(j));
                continue;
            }
            let Some(Operand::Value(f)) = self.view.fval[v] else {
                return None;
            };
            if !self.fdef[f].is_some_and(|d| outer.contains(d)) {
                // Defined before the loop: the forward sweep has it where
                // the loop is entered.
                let j = self.outside_index(f);
                add(&mut out, Bound::Outside(j));
                continue;
            }
            let irad_ir::ValueDef::Inst(inst) = self.cx.src.values[v].def else {
                return None;
            };
            match &self.cx.src.insts[inst].kind {
                InstKind::Phi { entries } => {
                    for (_, op) in entries {
                        work.push(value_of(*op)?);
                    }
                }
                // A call returning the array it was given (`fresh.rs`).
                InstKind::Invoke { func, args } => {
                    let j = self.cx.passthrough.get(func)?;
                    work.push(value_of(*args.get(*j)?)?);
                }
                // A kept field of a call's tuple result (`fresh.rs`).
                InstKind::Prim {
                    prim: Prim::Getfield,
                    ..
                } => work.push(super::kept_field_source(self.cx, v)?),
                InstKind::Prim { prim, args } => match (prim, args.as_slice()) {
                    (Prim::Copy, [Operand::Value(u)]) => work.push(*u),
                    (Prim::Select, [_, x, y]) => {
                        work.push(value_of(*x)?);
                        work.push(value_of(*y)?);
                    }
                    (Prim::Zeros | Prim::Alloc, [n]) => {
                        let n = self.bound(*n, depth.checked_sub(1)?)?;
                        if n.counts() {
                            return None;
                        }
                        add(&mut out, n);
                    }
                    _ => return None,
                },
                _ => return None,
            }
        }
        match out.len() {
            0 | 1 => out.pop(),
            _ => Some(Bound::OneOf(out)),
        }
    }
}

/// Whether every [`Bound::OneOf`] in `b` is where the sign of its effect
/// on `b` is known: not in a product or quotient but by a constant, nor in
/// a divisor.
fn signed(b: &Bound) -> bool {
    fn holds(b: &Bound) -> bool {
        match b {
            Bound::OneOf(_) => true,
            Bound::Op(_, x, y) => holds(x) || holds(y),
            _ => false,
        }
    }
    match b {
        Bound::OneOf(xs) => xs.iter().all(signed),
        Bound::Op(Prim::Iadd | Prim::Isub, x, y) => signed(x) && signed(y),
        Bound::Op(Prim::Imul, x, y) => match (x.as_ref(), y.as_ref()) {
            (Bound::Const(_), other) | (other, Bound::Const(_)) => signed(other),
            _ => !holds(x) && !holds(y),
        },
        Bound::Op(Prim::Idiv, x, y) => match y.as_ref() {
            Bound::Const(_) => signed(x),
            _ => !holds(x) && !holds(y),
        },
        Bound::Op(_, x, y) => !holds(x) && !holds(y),
        _ => true,
    }
}

/// The value of operand `op`, if it is not a constant.
fn value_of(op: Operand) -> Option<Value> {
    match op {
        Operand::Value(v) => Some(v),
        Operand::Const(_) => None,
    }
}

/// What one call of `f` is taken to record, per element of the longest
/// array the calling loop reads, in arrays' worth (8 bytes per element
/// each; docs/reverse.md, "Calls that record per element"), given what each
/// function it calls counts (`callee`): the static estimate counts a call as
/// [`super::CALL_BYTES`] whatever it records, and a step function looping
/// over its array records bytes in proportion to the array's length. Each
/// statement of `f` giving an `f64` or writing an element, in loops `d`
/// deep, counts `INNER_TRIPS^(d - 1)` times the values it is taken to
/// record ([`values_saved`]) (its outermost loop taken to run once
/// per element, those inside it `INNER_TRIPS` times, as the estimate takes
/// them); each array it makes (and its shadow) `2 INNER_TRIPS^d`; each call
/// it makes what that callee counts, times `INNER_TRIPS^d`. A statement
/// giving an `f64` outside loops counts nothing: the 64 bytes stand for
/// those. Loops of a constant trip count of at most `INNER_TRIPS` are left
/// out of `d` (their statements counted once). At most [`MAX_FRESH`].
/// (`fresh.rs` calls it for each function once, callees first.)
pub(in crate::reverse) fn call_cost(f: &irad_ir::Func, callee: impl Fn(FuncId) -> u64) -> u64 {
    let cfg = irad_ir::flow::cfg::ControlFlowGraph::with_function(f);
    let dom = irad_ir::flow::dom::DominatorTree::with_cfg(&cfg);
    let loops = irad_ir::flow::loops::LoopAnalysis::compute(&cfg, &dom);
    let pow = |e: u32| INNER_TRIPS.saturating_pow(e);
    let mut total: u64 = 0;
    for &b in &f.layout {
        // The loops around the block, short ones left out.
        let mut long = 0u32;
        let mut lp = loops.innermost(b);
        while let Some(l) = lp {
            long += u32::from(!short_constant_loop(f, &loops, l));
            lp = loops.parent(l);
        }
        for &inst in &f.blocks[b].insts {
            let d = &f.insts[inst];
            let here = match &d.kind {
                InstKind::Prim {
                    prim: Prim::Copy | Prim::Zeros | Prim::Alloc,
                    ..
                } => 2u64.saturating_mul(pow(long)),
                InstKind::Invoke { func, .. } => callee(*func).saturating_mul(pow(long)),
                _ if long == 0 => 0,
                InstKind::Prim { prim, args }
                    if *prim == Prim::Arrayset
                        || d.result
                            .is_some_and(|r| f.values[r].ty == irad_ir::Type::F64) =>
                {
                    pow(long - 1).saturating_mul(values_saved(*prim, args))
                }
                _ => 0,
            };
            total = total.saturating_add(here);
        }
    }
    total.min(MAX_FRESH)
}

/// How many values a statement of `prim` on `args` giving an `f64` (or
/// writing an element) is taken to record for its pullback: none for the
/// linear ones (`add`, `sub`, `neg`, a product or quotient by a constant,
/// an element read, which the pullback re-reads or needs not), the
/// element overwritten for `arrayset`, each operand that is not a constant
/// for the others (`mul` of two values, `pow`), and one for a function of
/// one value (`sin` keeps its argument or its cosine).
fn values_saved(prim: Prim, args: &[Operand]) -> u64 {
    let values = args
        .iter()
        .filter(|a| matches!(a, Operand::Value(_)))
        .count() as u64;
    match prim {
        Prim::Add | Prim::Sub | Prim::Neg | Prim::Arrayref | Prim::Sitofp => 0,
        Prim::Getfield | Prim::Select | Prim::Primal | Prim::Tangent => 0,
        Prim::Arrayset => 1,
        Prim::Mul | Prim::Div if values < 2 => {
            u64::from(prim == Prim::Div && matches!(args.first(), Some(Operand::Const(_))))
        }
        _ => values.max(1),
    }
}

/// Whether loop `l` of `f` runs a constant number of trips of at most
/// [`INNER_TRIPS`]: its header tests a counter against a constant, the
/// counter starting at a constant (as `short_constant` asks of a loop of
/// the derivation).
fn short_constant_loop(
    f: &irad_ir::Func,
    loops: &irad_ir::flow::loops::LoopAnalysis,
    l: irad_ir::flow::loops::Loop,
) -> bool {
    let h = loops.header(l);
    let Some(irad_ir::Terminator::GotoIfNot {
        cond: Operand::Value(c),
        ..
    }) = &f.blocks[h].term
    else {
        return false;
    };
    let irad_ir::ValueDef::Inst(t) = f.values[*c].def else {
        return false;
    };
    let InstKind::Prim {
        prim: Prim::Lt | Prim::Le | Prim::Gt | Prim::Ge,
        args,
    } = &f.insts[t].kind
    else {
        return false;
    };
    let [Operand::Value(iv), Operand::Const(Const::I64(end))] = args.as_slice() else {
        return false;
    };
    let irad_ir::ValueDef::Inst(p) = f.values[*iv].def else {
        return false;
    };
    let InstKind::Phi { entries } = &f.insts[p].kind else {
        return false;
    };
    entries.iter().any(|(b, op)| {
        !loops.contains(l, *b)
            && matches!(op, Operand::Const(Const::I64(start))
                if (i128::from(*end) - i128::from(*start)).abs() <= i128::from(INNER_TRIPS))
    })
}

#[cfg(test)]
mod tests {
    use crate::reverse::fresh::CallFacts;

    /// What one call of each function `caller` invokes counts, by name, for
    /// a surface program; `ruled` names one differentiated by a rule.
    fn elements(src: &str, ruled: Option<&str>) -> Vec<(String, u64)> {
        let m = irad_ir::surface::compile(src).expect("the program compiles");
        let caller = &m[m.by_name("caller").expect("@caller")];
        let ruled = ruled.and_then(|r| m.by_name(r));
        let mut facts = CallFacts::default();
        let known = facts.learn(&m, caller, |f| Some(f) == ruled);
        let mut out: Vec<(String, u64)> = known
            .elements
            .into_iter()
            .map(|(f, c)| (m[f].name.clone(), c))
            .collect();
        out.sort();
        out
    }
    const SRC: &str = "
        fn step(a: [f64]) -> [f64] {
            let b = copy(a);
            for i in 0..len(a) {
                b[i] = sin(a[i]) * 2.0;
            }
            b
        }
        fn short(a: [f64]) -> f64 {
            let mut s = 0.0;
            for i in 0..4 {
                s = s + sin(a[i]);
            }
            s
        }
        fn nested(a: [f64]) -> f64 {
            let mut s = 0.0;
            for i in 0..len(a) {
                for j in 0..len(a) {
                    s = s + a[i] * a[j];
                }
            }
            s
        }
        fn twice(a: [f64]) -> [f64] {
            step(step(a))
        }
        fn rec(a: [f64], n: i64) -> [f64] {
            if n == 0 { step(a) } else { rec(a, n - 1) }
        }
        fn caller(x: [f64], n: i64) -> f64 {
            let a = rec(twice(step(x)), n);
            short(a) + nested(a)
        }
    ";

    #[test]
    fn calls_count_what_their_loops_record_per_element() {
        let got = elements(SRC, None);
        // step: a copy (2) and, in its loop, the element written and sin
        // (1 each; the read and the product by a constant record nothing).
        let step = got.iter().find(|(n, _)| n == "step").map_or(0, |c| c.1);
        assert_eq!(step, 4, "{got:?}");
        let of = |name: &str| got.iter().find(|(n, _)| n == name).map(|c| c.1);
        // Twice step; the recursion counts its step once (the cycle 0).
        assert_eq!(of("twice"), Some(2 * step), "{got:?}");
        assert_eq!(of("rec"), Some(step), "{got:?}");
        // A loop of 4 constant trips counts nothing per element; a loop
        // inside a loop over the elements counts 16 times.
        assert_eq!(of("short"), None, "{got:?}");
        assert!(of("nested").is_some_and(|c| c >= 16), "{got:?}");
        // A function with a rule counts nothing, nor what calls it only
        // through it.
        let ruled = elements(SRC, Some("step"));
        assert!(
            ruled
                .iter()
                .all(|(n, _)| n != "step" && n != "twice" && n != "rec"),
            "{ruled:?}"
        );
    }
}
