//! Loop versioning: an innermost counted loop whose array accesses cannot
//! be proven in range (`bounds.rs`) is run as an unchecked copy when one
//! test before the loop shows every iteration's accesses in range, and as
//! the original, checked loop otherwise (docs/codegen.md, "Bounds checks").
//!
//! Works on the copy of the function that lowering compiles (an
//! [`Inlined`]; made here, with every statement's own place, when nothing
//! was inlined), never on the module: the interpreter and `irad dump` see
//! nothing of it.
//!
//! Loops. A loop qualifies when it has no inner loop, its header `h` has
//! two predecessors, `p` outside and a latch inside, the only edge leaving
//! the loop is `h -> exit`, `exit` has `h` as its only predecessor, every
//! `gotoifnot` in the loop falls through to a block of the loop, and `h`
//! is one of two shapes (`k0`, `B`, `lo`, `n0` as named here):
//! - *counting up*: a phi `i = [p => k0, latch => iadd(i, 1)]` with a
//!   constant `k0 >= 0`, and `gotoifnot lt(i, B), exit` with `B`
//!   loop-invariant. The body runs with `i = k0, k0 + 1, ...` while
//!   `i < B`: when it runs at all, `B >= k0 + 1 >= 1`, and `i` takes values
//!   in `[k0, B)` only (no wrap: `i < B <= i64::MAX` before each step).
//! - *counting down* (reverse-mode sweeps): a phi `n = [p => n0, latch =>
//!   m]`, `m = isub(n, 1)` in `h`, and `switch select(eq(n, 0), 0, 1), [exit,
//!   body]`. When `n0 >= 0` the body runs with `m = n0 - 1, ..., 0`, so `m`
//!   takes values in `[0, n0)` (`k0 = 0`, `B = n0`) and `n = m + 1`. When
//!   `n0 < 0`, `n` would wrap through every value: the test fails then.
//!
//! Accesses. An `arrayref` or `arrayset` outside `h`, not proven by
//! `bounds.rs`, of an array defined outside the loop, whose index `x` is a
//! tree of `iadd`, `isub` and `ineg` over constants, loop-invariant values
//! and one occurrence of the counter (`i`; or `m`, or `n` as `m + 1`) with
//! sign `s = +1` or `-1`, or of `imul(i, S)` (either order, `S`
//! loop-invariant, added with sign `+1`: a stride). Loop-invariant: defined outside the loop, or
//! `iadd`, `isub`, `imul`, `ineg` or `length` of loop-invariant operands
//! (recomputed before the loop, where none of them can fail). Since `iadd`,
//! `isub`, `ineg` and `imul` wrap, `x = s * i + off` modulo 2^64, where
//! `off` is the wrapping sum of the invariant parts (`mod 2^64` is a ring
//! homomorphism), and so `x` *is* `s * i + off` whenever that integer lies
//! in `[0, L)`, `L = length(a) >= 0`.
//!
//! The test. In a new block `g` between `p` and `h`, for each access,
//! with `off` and `B` evaluated there (they are the values the loop sees)
//! and `L` the array's length:
//! - `s = +1`: the access is *bad* when `off < -k0` or `L - B < off`. If
//!   neither and the body runs (`1 <= B`, so `L - B` does not wrap;
//!   `-k0 >= -i64::MAX`), then for `i` in `[k0, B)`: `0 <= k0 + off <= i +
//!   off <= B - 1 + off <= L - 1`.
//! - `s = -1`: bad when `off < B - 1` or `L <= off - k0`. If neither and the
//!   body runs, `B - 1 >= 0` is exact, `off >= B - 1 >= 0` so `off - k0`
//!   does not wrap, and for `i` in `[k0, B)`: `0 <= off - (B - 1) <= off - i
//!   <= off - k0 <= L - 1`.
//! - *strided*: the index is `imul(i, S) + off` (`S` loop-invariant, `i`
//!   the counter itself, `k0 <= 2^31 - 1`): bad when `S` or `B - 1` lies
//!   outside `[0, 2^31)` or `off` outside `[-2^62, 2^62]` (then every
//!   product below is under 2^62 and every sum exact), or `k0 * S + off <
//!   0`, or `(B - 1) * S + off >= L`. Else, when the body runs, `S >= 0`
//!   makes `i * S + off` grow with `i`, from `k0 * S + off >= 0` to the
//!   last, `(B - 1) * S + off < L`. (Conservative: longer loops and larger
//!   strides run checked.)
//!
//! Counting down adds `n0 < 0` as bad. `g` ends in `gotoifnot bad, #h'`,
//! where `h'` heads a copy of the loop (same statements, same places for
//! errors, laid out after everything, in the original's order so that every
//! fall-through is kept), whose qualifying accesses are returned as needing
//! no check; `g` falls through to the original `h` otherwise. When the body
//! does not run, both copies only run their header, the same statements.
//! A wrapped value in a test that does not hold is harmless: nothing in `g`
//! can fail, and `bad` then only picks which of two equivalent loops runs.
//! So an out-of-range index fails in the checked original, exactly where
//! and as before, after the same side effects (the test has none).
//!
//! After the loop, only values of `h` can be used (`exit` is the only way
//! out and only `h` jumps to it): `exit` gets a phi `[h => v, h' => v']` for
//! each one used outside the loop, and its phis an entry for `h'`.
//!
//! Assumes a function that verifies. Guarantees: the result verifies and
//! computes the same values, errors and side effects; every statement
//! returned is an access of a copy whose index is in range on every run.

use irad_ir::entity::SecondaryMap;
use irad_ir::flow::{ControlFlowGraph, DominatorTree, LoopAnalysis};
use irad_ir::types::Type;
use irad_ir::{
    Block, BlockData, Const, Func, Inst, InstData, InstKind, Operand, Prim, Terminator, Value,
    ValueData, ValueDef,
};
use irad_passes::pe::{Inlined, Place};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use smallvec::SmallVec;
use std::sync::Arc;

/// At most this many loops are versioned in one function (each copy adds
/// the loop's size once more).
const MAX_LOOPS: usize = 64;
/// Nor in a function of more statements than this.
const MAX_FUNC_INSTS: usize = 20_000;
/// How deep an index or invariant expression is followed.
const MAX_DEPTH: u32 = 12;
/// The largest stride, counter start and `B - 1` of a strided access's test
/// (2^31 - 1, so that their products stay below 2^62).
const MAX_STRIDE: i64 = (1 << 31) - 1;
/// The largest offset magnitude of a strided access's test.
const MAX_OFFSET: i64 = 1 << 62;

/// `func` (or its inlined copy `inl`) with its qualifying loops versioned
/// (module header), and the accesses of the copies that need no check;
/// `inl` unchanged and an empty set when no loop qualifies.
pub(super) fn version(func: &Func, inl: Option<Inlined>) -> (Option<Inlined>, HashSet<Inst>) {
    let mut work = inl;
    let mut unchecked = HashSet::default();
    let mut done: HashSet<Block> = HashSet::default();
    for _ in 0..MAX_LOOPS {
        let f = work.as_ref().map_or(func, |i| &i.func);
        if f.insts.len() > MAX_FUNC_INSTS {
            break;
        }
        let Some(plan) = find(f, &done) else { break };
        let w = work.get_or_insert_with(|| Inlined::identity(func));
        done.insert(plan.header);
        let (copy_header, fast) = apply(w, &plan);
        done.insert(copy_header);
        unchecked.extend(fast);
    }
    (work, unchecked)
}

/// Gives every statement and terminator of `blocks` that has no place the
/// one an error there names now (the function, the block's label, the
/// statement's number), so that it stays when statements are added.
fn fill_places(out: &mut Inlined, blocks: &[Block]) {
    let name: Arc<str> = Arc::from(out.func.name.as_str());
    for &b in blocks {
        let data = &out.func.blocks[b];
        let place = |stmt: usize| Place {
            func: name.clone(),
            block: data.label,
            stmt: stmt as u32 + 1,
        };
        for (i, &inst) in data.insts.iter().enumerate() {
            if out.insts[inst].is_none() {
                out.insts.set(inst, Some(place(i)));
            }
        }
        if out.terms[b].is_none() {
            out.terms.set(b, Some(place(data.insts.len())));
        }
    }
}

/// Values that are the counter plus a constant in a loop's body: `(value,
/// d)` for `value = i + d`.
pub(super) type Counters = Vec<(Value, i64)>;

/// A loop to version and its accesses (module header). Loop fusion
/// (`fuse.rs`) recognises its loops with [`shape`] too.
pub(super) struct Plan {
    pub(super) header: Block,
    pub(super) pre: Block,
    pub(super) exit: Block,
    /// The loop's blocks, in layout order.
    pub(super) blocks: Vec<Block>,
    /// In the body, `k0 <= i < bound`.
    pub(super) k0: i64,
    pub(super) bound: Operand,
    /// Counting down: `bound < 0` is bad.
    pub(super) bound_nonneg: bool,
    /// The values that are the counter plus a constant in the body:
    /// `(value, d)` for `value = i + d`; the first is the counter itself
    /// (`i`, or `m` counting down).
    pub(super) ivs: Counters,
    /// The accesses: (statement, array, index's sign of `i`, its
    /// invariant terms, its constant).
    accesses: Vec<Access>,
    /// The loop's blocks as a set.
    pub(super) in_loop: HashSet<Block>,
}

/// An access of a [`Plan`]: its index is `sign * i + delta + sum(terms)`.
struct Access {
    inst: Inst,
    array: Value,
    /// The index (accesses with the same index share their lower test).
    index: Value,
    sign: i64,
    delta: i64,
    terms: Vec<(i64, Value)>,
    /// The index is `S * i + delta + sum(terms)` instead, `S` this.
    stride: Option<Operand>,
}

/// The first loop of `func` that qualifies and has a header not in `done`.
fn find(func: &Func, done: &HashSet<Block>) -> Option<Plan> {
    let cfg = ControlFlowGraph::with_function(func);
    let dom = DominatorTree::with_cfg(&cfg);
    let la = LoopAnalysis::compute(&cfg, &dom);
    if la.is_empty() {
        return None;
    }
    // The range proofs of the blocks of each loop considered, rather than
    // of the whole function: one loop is versioned per analysis, up to
    // `MAX_LOOPS` times.
    let ranges = super::bounds::Ranges::new(func, &cfg, &la);
    let block_of = BlockOf::of(func);
    // Loops that hold another (only innermost loops are versioned), found
    // once rather than by a search of every loop for each.
    let outer: HashSet<irad_ir::flow::Loop> = la.loops().filter_map(|o| la.parent(o)).collect();
    for lp in la.loops() {
        let h = la.header(lp);
        if done.contains(&h) || outer.contains(&lp) {
            continue;
        }
        let in_loop: HashSet<Block> = la.blocks(lp).iter().copied().collect();
        let Some(mut plan) = shape(func, &cfg, h, in_loop, &block_of) else {
            continue;
        };
        let mut proven = HashSet::default();
        for &b in &plan.blocks {
            if b != h {
                ranges.proven_in(func, (&dom, &la), b, &mut proven);
            }
        }
        let lc = LoopCtx {
            func,
            block_of: &block_of,
            in_loop: &plan.in_loop,
        };
        let ivs = plan.ivs.clone();
        for &b in &plan.blocks {
            if b == h {
                continue;
            }
            for &inst in &func.blocks[b].insts {
                if proven.contains(&inst) {
                    continue;
                }
                let InstKind::Prim {
                    prim: Prim::Arrayref | Prim::Arrayset,
                    args,
                } = &func.insts[inst].kind
                else {
                    continue;
                };
                let (Some(Operand::Value(a)), Some(&Operand::Value(index))) =
                    (args.first(), args.get(1))
                else {
                    continue;
                };
                if lc.defined_inside(*a) {
                    continue;
                }
                let Some(lin) = lc.linear(Operand::Value(index), &ivs, 0) else {
                    continue;
                };
                let strided = lin.stride.is_some() && plan.k0 <= MAX_STRIDE;
                if !strided && lin.coef != 1 && lin.coef != -1 {
                    continue;
                }
                plan.accesses.push(Access {
                    inst,
                    array: *a,
                    index,
                    sign: if strided { 1 } else { lin.coef },
                    delta: lin.delta,
                    terms: lin.terms,
                    stride: lin.stride.filter(|_| strided),
                });
            }
        }
        if !plan.accesses.is_empty() && !writes_with_a_stride(func, &lc, &plan) {
            return Some(plan);
        }
    }
    None
}

/// Whether a statement of the loop writes an array at an index that moves
/// by a stride (`imul(i, S)`): such a loop is not versioned. Measured on
/// the scalar MLP's pullback, `w1bar[p * nh + j] += ...` (1 KiB apart from
/// one iteration to the next), its unchecked copy ran 30% slower than the
/// checked loop although it had fewer instructions (docs/performance.md,
/// "Issue 22: loop versioning"); reads with a stride are versioned.
fn writes_with_a_stride(func: &Func, lc: &LoopCtx, plan: &Plan) -> bool {
    plan.blocks.iter().any(|&b| {
        func.blocks[b]
            .insts
            .iter()
            .any(|&i| match &func.insts[i].kind {
                InstKind::Prim {
                    prim: Prim::Arrayset,
                    args,
                } => args
                    .get(1)
                    .and_then(|x| lc.linear(*x, &plan.ivs, 0))
                    .is_some_and(|l| l.stride.is_some()),
                _ => false,
            })
    })
}

/// The structure of the loop headed by `h` with blocks `in_loop` when it
/// qualifies (module header), without its accesses.
pub(super) fn shape(
    func: &Func,
    cfg: &ControlFlowGraph,
    h: Block,
    in_loop: HashSet<Block>,
    block_of: &BlockOf,
) -> Option<Plan> {
    let [p0, p1] = cfg.preds(h) else { return None };
    let (pre, latch) = match (in_loop.contains(p0), in_loop.contains(p1)) {
        (false, true) => (*p0, *p1),
        (true, false) => (*p1, *p0),
        _ => return None,
    };
    // The test block goes just before `h`: a block falling through into
    // `h` from there must be `pre`.
    let idx = cfg.layout_index(h)?;
    if idx == 0 {
        return None;
    }
    let before = func.layout[idx - 1];
    if before != pre && matches!(func.blocks[before].term, Some(Terminator::GotoIfNot { .. })) {
        return None;
    }
    let mut exit = None;
    for &b in &in_loop {
        let next = cfg.next_in_layout(b);
        let term = func.blocks[b].term.as_ref()?;
        if matches!(term, Terminator::GotoIfNot { .. })
            && !next.is_some_and(|n| in_loop.contains(&n))
        {
            return None;
        }
        if matches!(term, Terminator::Return(_)) {
            return None;
        }
        for s in func.successors(b, next) {
            if in_loop.contains(&s) {
                continue;
            }
            if b != h || exit.is_some_and(|e| e != s) {
                return None;
            }
            exit = Some(s);
        }
    }
    let exit = exit?;
    if cfg.preds(exit) != [h] {
        return None;
    }
    // In layout order (sorted by place, not found by a walk of the whole
    // layout for each loop).
    let mut placed: Vec<(usize, Block)> = in_loop
        .iter()
        .filter_map(|&b| Some((cfg.layout_index(b)?, b)))
        .collect();
    placed.sort_unstable();
    let blocks: Vec<Block> = placed.into_iter().map(|(_, b)| b).collect();
    let (k0, bound, bound_nonneg, ivs) = counting_up(func, h, (pre, latch), &in_loop, block_of)
        .map(|(k0, b, ivs)| (k0, b, false, ivs))
        .or_else(|| counting_down(func, h, pre, latch, exit).map(|(n0, ivs)| (0, n0, true, ivs)))?;
    Some(Plan {
        header: h,
        pre,
        exit,
        blocks,
        k0,
        bound,
        bound_nonneg,
        ivs,
        accesses: Vec::new(),
        in_loop,
    })
}

/// The phi of `h` that is its counter, for a counting-up loop: `(k0, B)`.
fn counting_up(
    func: &Func,
    h: Block,
    (pre, latch): (Block, Block),
    in_loop: &HashSet<Block>,
    block_of: &BlockOf,
) -> Option<(i64, Operand, Counters)> {
    let Some(Terminator::GotoIfNot {
        cond: Operand::Value(c),
        ..
    }) = &func.blocks[h].term
    else {
        return None;
    };
    let InstKind::Prim {
        prim: Prim::Lt,
        args,
    } = func.def_kind(*c)?
    else {
        return None;
    };
    let [Operand::Value(iv), bound] = args.as_slice() else {
        return None;
    };
    let k0 = counter_start(func, h, *iv, pre, latch)?;
    // The bound must not change from one test to the next.
    if let Operand::Value(b) = bound {
        let lc = LoopCtx {
            func,
            block_of,
            in_loop,
        };
        if !lc.invariant(*b, 0) {
            return None;
        }
    }
    Some((k0, *bound, vec![(*iv, 0)]))
}

/// `k0` when `iv` is a phi of `h` entered with a constant `k0 >= 0` from
/// `pre` and with `iadd(iv, 1)` from `latch`.
fn counter_start(func: &Func, h: Block, iv: Value, pre: Block, latch: Block) -> Option<i64> {
    let ValueDef::Inst(inst) = func.values.get(iv)?.def else {
        return None;
    };
    if !func.blocks[h].insts.contains(&inst) {
        return None;
    }
    let InstKind::Phi { entries } = &func.insts[inst].kind else {
        return None;
    };
    let mut k0 = None;
    let mut stepped = false;
    for (from, op) in entries {
        match op {
            Operand::Const(Const::I64(k)) if *from == pre && *k >= 0 => k0 = Some(*k),
            Operand::Value(n) if *from == latch => {
                stepped = func.const_offset(*n, iv) == Some(1);
            }
            _ => return None,
        }
    }
    (entries.len() == 2 && stepped).then_some(k0?)
}

/// `n0` for a counting-down loop (module header), and its counters `m`
/// (`i`) and `n` (`i + 1`).
fn counting_down(
    func: &Func,
    h: Block,
    pre: Block,
    latch: Block,
    exit: Block,
) -> Option<(Operand, Counters)> {
    let Some(Terminator::Switch {
        index: Operand::Value(sel),
        targets,
    }) = &func.blocks[h].term
    else {
        return None;
    };
    if targets.len() != 2 || targets[0] != exit {
        return None;
    }
    let InstKind::Prim {
        prim: Prim::Select,
        args,
    } = func.def_kind(*sel)?
    else {
        return None;
    };
    let [
        Operand::Value(c),
        Operand::Const(Const::I64(0)),
        Operand::Const(Const::I64(1)),
    ] = args.as_slice()
    else {
        return None;
    };
    let InstKind::Prim {
        prim: Prim::Eq,
        args,
    } = func.def_kind(*c)?
    else {
        return None;
    };
    let n = match args.as_slice() {
        [Operand::Value(n), Operand::Const(Const::I64(0))]
        | [Operand::Const(Const::I64(0)), Operand::Value(n)] => *n,
        _ => return None,
    };
    let (m, n0) = down_counter(func, h, n, pre, latch)?;
    // `m = isub(n, 1)` must be in `h` (so the body sees it after the test).
    let ValueDef::Inst(mi) = func.values.get(m)?.def else {
        return None;
    };
    func.blocks[h]
        .insts
        .contains(&mi)
        .then(|| (n0, vec![(m, 0), (n, 1)]))
}

/// `(m, n0)` when `n` is a phi of `h` entered with `n0` from `pre` and
/// with `m = n - 1` from `latch`.
fn down_counter(
    func: &Func,
    h: Block,
    n: Value,
    pre: Block,
    latch: Block,
) -> Option<(Value, Operand)> {
    let ValueDef::Inst(inst) = func.values.get(n)?.def else {
        return None;
    };
    if !func.blocks[h].insts.contains(&inst) {
        return None;
    }
    let InstKind::Phi { entries } = &func.insts[inst].kind else {
        return None;
    };
    let [(f0, o0), (f1, o1)] = entries.as_slice() else {
        return None;
    };
    let (n0, step) = match (*f0 == pre && *f1 == latch, *f1 == pre && *f0 == latch) {
        (true, _) => (*o0, *o1),
        (_, true) => (*o1, *o0),
        _ => return None,
    };
    let Operand::Value(m) = step else { return None };
    (func.const_offset(m, n) == Some(-1)).then_some((m, n0))
}

/// The block of each statement of the layout.
/// The block of each statement of the layout ([`Func::inst_places`], a
/// dense map), made once per analysis of the function: a hash map of every
/// statement, made for each loop considered, was most of versioning's time
/// with many loops.
pub(super) struct BlockOf(SecondaryMap<Inst, Option<(Block, u32)>>);

impl BlockOf {
    pub(super) fn of(func: &Func) -> BlockOf {
        BlockOf(func.inst_places())
    }

    fn get(&self, i: &Inst) -> Option<&Block> {
        self.0.get(*i).as_ref().map(|(b, _)| b)
    }
}

/// What the analysis of one loop's expressions needs.
struct LoopCtx<'a> {
    func: &'a Func,
    block_of: &'a BlockOf,
    in_loop: &'a HashSet<Block>,
}

/// `coef * i + delta + sum(sign * term)`.
struct Lin {
    coef: i64,
    delta: i64,
    terms: Vec<(i64, Value)>,
    /// `imul(i, S)` with `S` invariant: `S * i` (then `coef` is 0).
    stride: Option<Operand>,
}

impl LoopCtx<'_> {
    /// Whether `v` is defined by a statement of the loop.
    fn defined_inside(&self, v: Value) -> bool {
        match self.func.values.get(v).map(|d| d.def) {
            Some(ValueDef::Inst(i)) => self
                .block_of
                .get(&i)
                .is_none_or(|b| self.in_loop.contains(b)),
            _ => false,
        }
    }

    /// Whether `v` is loop-invariant (module header).
    fn invariant(&self, v: Value, depth: u32) -> bool {
        if !self.defined_inside(v) {
            return true;
        }
        if depth > MAX_DEPTH {
            return false;
        }
        match self.func.def_kind(v) {
            Some(InstKind::Prim {
                prim: Prim::Iadd | Prim::Isub | Prim::Imul | Prim::Ineg | Prim::Length,
                args,
            }) => args.iter().all(|a| match a {
                Operand::Value(w) => self.invariant(*w, depth + 1),
                Operand::Const(Const::I64(_)) => true,
                Operand::Const(_) => false,
            }),
            _ => false,
        }
    }

    /// `op` as a linear form in the counter (`ivs`: values `i + d`).
    fn linear(&self, op: Operand, ivs: &[(Value, i64)], depth: u32) -> Option<Lin> {
        let v = match op {
            Operand::Const(Const::I64(c)) => {
                return Some(Lin {
                    coef: 0,
                    delta: c,
                    terms: Vec::new(),
                    stride: None,
                });
            }
            Operand::Const(_) => return None,
            Operand::Value(v) => v,
        };
        if let Some(&(_, d)) = ivs.iter().find(|(w, _)| *w == v) {
            return Some(Lin {
                coef: 1,
                delta: d,
                terms: Vec::new(),
                stride: None,
            });
        }
        if self.invariant(v, 0) {
            return Some(Lin {
                coef: 0,
                delta: 0,
                terms: vec![(1, v)],
                stride: None,
            });
        }
        if depth > MAX_DEPTH {
            return None;
        }
        let InstKind::Prim { prim, args } = self.func.def_kind(v)? else {
            return None;
        };
        match (prim, args.as_slice()) {
            (Prim::Iadd, [a, b]) => add(
                self.linear(*a, ivs, depth + 1)?,
                self.linear(*b, ivs, depth + 1)?,
                1,
            ),
            (Prim::Isub, [a, b]) => add(
                self.linear(*a, ivs, depth + 1)?,
                self.linear(*b, ivs, depth + 1)?,
                -1,
            ),
            (Prim::Ineg, [a]) => add(
                Lin {
                    coef: 0,
                    delta: 0,
                    terms: Vec::new(),
                    stride: None,
                },
                self.linear(*a, ivs, depth + 1)?,
                -1,
            ),
            (Prim::Imul, [a, b]) => {
                let counter = |o: &Operand| matches!(o, Operand::Value(w) if ivs.iter().any(|(x, d)| x == w && *d == 0));
                let inv = |o: &Operand| match o {
                    Operand::Const(Const::I64(_)) => true,
                    Operand::Value(w) => self.invariant(*w, 0),
                    Operand::Const(_) => false,
                };
                let stride = if counter(a) && inv(b) {
                    *b
                } else if counter(b) && inv(a) {
                    *a
                } else {
                    return None;
                };
                Some(Lin {
                    coef: 0,
                    delta: 0,
                    terms: Vec::new(),
                    stride: Some(stride),
                })
            }
            _ => None,
        }
    }
}

/// `a + sign * b`, `None` when a coefficient or the constant overflows,
/// or a stride would be negated, met twice or mixed with a coefficient.
fn add(a: Lin, b: Lin, sign: i64) -> Option<Lin> {
    let stride = match (a.stride, b.stride) {
        (Some(_), Some(_)) => return None,
        (None, Some(_)) if sign != 1 => return None,
        (s, None) | (None, s) => s,
    };
    let mut terms = a.terms;
    terms.extend(b.terms.into_iter().map(|(s, v)| (s * sign, v)));
    let coef = a.coef.checked_add(b.coef.checked_mul(sign)?)?;
    if stride.is_some() && coef != 0 {
        return None;
    }
    Some(Lin {
        coef,
        delta: a.delta.checked_add(b.delta.checked_mul(sign)?)?,
        terms,
        stride,
    })
}

/// Versions the loop of `plan` in `inl` (module header); returns the copy's
/// header and its accesses that need no check.
fn apply(inl: &mut Inlined, plan: &Plan) -> (Block, Vec<Inst>) {
    let mut places: Vec<Block> = plan.blocks.clone();
    places.push(plan.exit);
    fill_places(inl, &places);
    let (bmap, imap, vmap) = copy_loop(inl, plan);
    let h = plan.header;
    let h2 = bmap[&h];
    // The test block, just before `h`.
    let g = {
        let label = inl.func.fresh_label();
        let g = inl.func.blocks.push(BlockData {
            label,
            ..BlockData::default()
        });
        let at = inl.func.layout.iter().position(|&b| b == h).unwrap_or(0);
        inl.func.layout.insert(at, g);
        g
    };
    inl.frames.set(g, inl.frames[h]);
    let bad = guard(&mut inl.func, g, plan);
    inl.func.blocks[g].term = Some(Terminator::GotoIfNot {
        cond: bad,
        target: h2,
    });
    // `pre` now enters `g`, and both headers are entered from `g`.
    if let Some(t) = &mut inl.func.blocks[plan.pre].term {
        retarget(t, h, g);
    }
    for hb in [h, h2] {
        for i in inl.func.blocks[hb].insts.clone() {
            if let InstKind::Phi { entries } = &mut inl.func.insts[i].kind {
                for (from, _) in entries.iter_mut() {
                    if *from == plan.pre {
                        *from = g;
                    }
                }
            }
        }
    }
    let mut skip: HashSet<Block> = bmap.values().copied().collect();
    skip.insert(g);
    join(inl, plan, h2, &skip, &vmap);
    let fast = plan
        .accesses
        .iter()
        .filter_map(|a| imap.get(&a.inst).copied())
        .collect();
    (h2, fast)
}

/// Copies the loop's blocks after everything in the layout (in their
/// order), with fresh values; returns the maps of blocks, statements and
/// values to their copies.
#[allow(clippy::type_complexity)]
fn copy_loop(
    inl: &mut Inlined,
    plan: &Plan,
) -> (
    HashMap<Block, Block>,
    HashMap<Inst, Inst>,
    HashMap<Value, Value>,
) {
    let func = &mut inl.func;
    let mut bmap = HashMap::default();
    for &b in &plan.blocks {
        let label = func.fresh_label();
        let data = &func.blocks[b];
        let nb = func.blocks.push(BlockData {
            label,
            insts: Vec::new(),
            term: None,
            pos: data.pos,
            term_pos: data.term_pos,
        });
        func.layout.push(nb);
        bmap.insert(b, nb);
    }
    let mut imap = HashMap::default();
    let mut vmap = HashMap::default();
    for &b in &plan.blocks {
        for k in 0..func.blocks[b].insts.len() {
            let i = func.blocks[b].insts[k];
            let data = func.insts[i].clone();
            let ni = func.insts.push(InstData {
                kind: data.kind,
                result: None,
                pos: data.pos,
            });
            if let Some(r) = data.result {
                let nr = func.values.push(ValueData {
                    ty: func.values[r].ty.clone(),
                    def: ValueDef::Inst(ni),
                    name: None,
                });
                func.insts[ni].result = Some(nr);
                vmap.insert(r, nr);
            }
            func.blocks[bmap[&b]].insts.push(ni);
            imap.insert(i, ni);
        }
    }
    let val = |op: Operand| match op {
        Operand::Value(v) => Operand::Value(vmap.get(&v).copied().unwrap_or(v)),
        c => c,
    };
    let blk = |b: Block| bmap.get(&b).copied().unwrap_or(b);
    for &ni in imap.values() {
        match &mut func.insts[ni].kind {
            InstKind::Prim { args, .. } | InstKind::Invoke { args, .. } => {
                args.iter_mut().for_each(|a| *a = val(*a));
            }
            InstKind::CallValue { callee, args } => {
                *callee = vmap.get(callee).copied().unwrap_or(*callee);
                args.iter_mut().for_each(|a| *a = val(*a));
            }
            InstKind::Phi { entries } => {
                for (from, op) in entries.iter_mut() {
                    *from = blk(*from);
                    *op = val(*op);
                }
            }
        }
    }
    for &b in &plan.blocks {
        let mut term = func.blocks[b].term.clone();
        if let Some(t) = &mut term {
            match t {
                Terminator::Goto(x) => *x = blk(*x),
                Terminator::GotoIfNot { cond, target } => {
                    *cond = val(*cond);
                    *target = blk(*target);
                }
                Terminator::Switch { index, targets } => {
                    *index = val(*index);
                    targets.iter_mut().for_each(|x| *x = blk(*x));
                }
                Terminator::Return(op) => *op = val(*op),
            }
        }
        func.blocks[bmap[&b]].term = term;
    }
    for (&b, &nb) in &bmap {
        inl.terms.set(nb, inl.terms[b].clone());
        inl.frames.set(nb, inl.frames[b]);
        if inl.entries.contains(b) {
            inl.entries.insert(nb);
        }
    }
    for (&i, &ni) in &imap {
        inl.insts.set(ni, inl.insts[i].clone());
    }
    (bmap, imap, vmap)
}

/// Replaces target `from` of `t` by `to`.
pub(super) fn retarget(t: &mut Terminator, from: Block, to: Block) {
    match t {
        Terminator::Goto(x) | Terminator::GotoIfNot { target: x, .. } if *x == from => *x = to,
        Terminator::Switch { targets, .. } => {
            targets
                .iter_mut()
                .filter(|x| **x == from)
                .for_each(|x| *x = to);
        }
        _ => {}
    }
}

/// Emits the test of `plan` into `g`: a bool that is false only when every
/// access of every iteration is in range (module header).
fn guard(func: &mut Func, g: Block, plan: &Plan) -> Operand {
    let block_of = BlockOf::of(func);
    let mut e = Emit {
        func,
        g,
        block_of,
        in_loop: &plan.in_loop,
        memo: HashMap::default(),
    };
    let bound = e.hoist(plan.bound, 0);
    let k0 = plan.k0;
    let mut bads: Vec<Operand> = Vec::new();
    if plan.bound_nonneg {
        bads.push(e.op(
            Prim::Lt,
            &[bound, Operand::Const(Const::I64(0))],
            Type::Bool,
        ));
    }
    // Shared: the offset and lower test per (index, sign), `L - B` per
    // array, `B - 1` once.
    let mut offs: HashMap<(Value, i64), Operand> = HashMap::default();
    let mut upper: HashSet<(Value, Value, i64)> = HashSet::default();
    let mut room: HashMap<Value, Operand> = HashMap::default();
    let mut minus_one: Option<Operand> = None;
    for a in &plan.accesses {
        if let Some(stride) = a.stride {
            let bm1 = match minus_one {
                Some(m) => m,
                None => {
                    let one = Operand::Const(Const::I64(1));
                    let m = e.op(Prim::Isub, &[bound, one], Type::I64);
                    minus_one = Some(m);
                    m
                }
            };
            if upper.insert((a.array, a.index, 2)) {
                strided(&mut e, a, stride, bm1, k0, &mut bads);
            }
            continue;
        }
        let key = (a.index, a.sign);
        let off = match offs.get(&key) {
            Some(o) => *o,
            None => {
                let o = e.offset(a);
                offs.insert(key, o);
                let low = if a.sign > 0 {
                    // k0 >= 0, so -k0 is exact.
                    let neg_k0 = Operand::Const(Const::I64(-k0));
                    e.op(Prim::Lt, &[o, neg_k0], Type::Bool)
                } else {
                    let m1 = match minus_one {
                        Some(m) => m,
                        None => {
                            let one = Operand::Const(Const::I64(1));
                            let m = e.op(Prim::Isub, &[bound, one], Type::I64);
                            minus_one = Some(m);
                            m
                        }
                    };
                    e.op(Prim::Lt, &[o, m1], Type::Bool)
                };
                bads.push(low);
                o
            }
        };
        if !upper.insert((a.array, a.index, a.sign)) {
            continue;
        }
        let len = e.op(Prim::Length, &[Operand::Value(a.array)], Type::I64);
        if a.sign > 0 {
            let r = match room.get(&a.array) {
                Some(r) => *r,
                None => {
                    let r = e.op(Prim::Isub, &[len, bound], Type::I64);
                    room.insert(a.array, r);
                    r
                }
            };
            bads.push(e.op(Prim::Lt, &[r, off], Type::Bool));
        } else {
            let k = Operand::Const(Const::I64(k0));
            let top = e.op(Prim::Isub, &[off, k], Type::I64);
            bads.push(e.op(Prim::Le, &[len, top], Type::Bool));
        }
    }
    let mut bad = Operand::Const(Const::Bool(false));
    for &b in &bads {
        bad = e.op(Prim::Or, &[bad, b], Type::Bool);
    }
    bad
}

/// The bad cases of strided access `a` (module header): `S` or `B - 1`
/// outside `[0, 2^31)`, the offset outside `[-2^62, 2^62]`, `k0 * S + off <
/// 0` or `(B - 1) * S + off >= L`.
fn strided(
    e: &mut Emit,
    a: &Access,
    stride: Operand,
    bm1: Operand,
    k0: i64,
    bads: &mut Vec<Operand>,
) {
    let c = |x: i64| Operand::Const(Const::I64(x));
    let s = e.hoist(stride, 0);
    let off = e.offset(a);
    bads.push(e.op(Prim::Lt, &[s, c(0)], Type::Bool));
    bads.push(e.op(Prim::Lt, &[c(MAX_STRIDE), s], Type::Bool));
    bads.push(e.op(Prim::Lt, &[c(MAX_STRIDE), bm1], Type::Bool));
    bads.push(e.op(Prim::Lt, &[off, c(-MAX_OFFSET)], Type::Bool));
    bads.push(e.op(Prim::Lt, &[c(MAX_OFFSET), off], Type::Bool));
    let low = e.op(Prim::Imul, &[c(k0), s], Type::I64);
    let low = e.op(Prim::Iadd, &[low, off], Type::I64);
    bads.push(e.op(Prim::Lt, &[low, c(0)], Type::Bool));
    let high = e.op(Prim::Imul, &[bm1, s], Type::I64);
    let high = e.op(Prim::Iadd, &[high, off], Type::I64);
    let len = e.op(Prim::Length, &[Operand::Value(a.array)], Type::I64);
    bads.push(e.op(Prim::Le, &[len, high], Type::Bool));
}

/// Emits statements that cannot fail into the test block.
struct Emit<'a> {
    func: &'a mut Func,
    g: Block,
    block_of: BlockOf,
    in_loop: &'a HashSet<Block>,
    /// Loop statements recomputed in `g`: their values there.
    memo: HashMap<Value, Operand>,
}

impl Emit<'_> {
    /// Appends `prim(args)` of type `ty` to `g`, or its value when the
    /// constants give it (`lt`/`le` of two constants, `x - 0`, `x + 0`,
    /// `false or x`), as the interpreter computes it.
    fn op(&mut self, prim: Prim, args: &[Operand], ty: Type) -> Operand {
        let int = |o: &Operand| match o {
            Operand::Const(Const::I64(c)) => Some(*c),
            _ => None,
        };
        let fold = match (prim, args) {
            (Prim::Lt, [a, b]) => int(a)
                .zip(int(b))
                .map(|(a, b)| Operand::Const(Const::Bool(a < b))),
            (Prim::Le, [a, b]) => int(a)
                .zip(int(b))
                .map(|(a, b)| Operand::Const(Const::Bool(a <= b))),
            (Prim::Iadd | Prim::Isub, [a, b]) if int(b) == Some(0) => Some(*a),
            (Prim::Iadd, [a, b]) if int(a) == Some(0) => Some(*b),
            (Prim::Imul, [a, b]) if int(a) == Some(0) || int(b) == Some(0) => {
                Some(Operand::Const(Const::I64(0)))
            }
            (Prim::Or, [Operand::Const(Const::Bool(false)), b]) => Some(*b),
            (Prim::Or, [a, Operand::Const(Const::Bool(false))]) => Some(*a),
            _ => None,
        };
        if let Some(v) = fold {
            return v;
        }
        let (_, r) = self.func.push_inst(
            self.g,
            InstKind::Prim {
                prim,
                args: SmallVec::from_slice(args),
            },
            Some(ty),
            None,
        );
        r.map_or(Operand::Const(Const::Unit), Operand::Value)
    }

    /// `op`'s value in `g`: itself when defined outside the loop, else its
    /// (invariant, so pure and infallible) definition recomputed there.
    fn hoist(&mut self, op: Operand, depth: u32) -> Operand {
        let Operand::Value(v) = op else { return op };
        if let Some(o) = self.memo.get(&v) {
            return *o;
        }
        let inside = match self.func.values[v].def {
            ValueDef::Inst(i) => self
                .block_of
                .get(&i)
                .is_none_or(|b| self.in_loop.contains(b)),
            ValueDef::Param(_) => false,
        };
        if !inside || depth > MAX_DEPTH + 1 {
            return op;
        }
        let Some(InstKind::Prim { prim, args }) = self.func.def_kind(v).cloned() else {
            return op;
        };
        let args: Vec<Operand> = args.iter().map(|a| self.hoist(*a, depth + 1)).collect();
        let ty = self.func.values[v].ty.clone();
        let out = self.op(prim, &args, ty);
        self.memo.insert(v, out);
        out
    }

    /// The invariant part `delta + sum(terms)` of an access's index, in `g`.
    fn offset(&mut self, a: &Access) -> Operand {
        let mut acc: Option<Operand> = None;
        for &(sign, v) in &a.terms {
            let t = self.hoist(Operand::Value(v), 0);
            acc = Some(match (acc, sign > 0) {
                (None, true) => t,
                (None, false) => self.op(Prim::Ineg, &[t], Type::I64),
                (Some(x), true) => self.op(Prim::Iadd, &[x, t], Type::I64),
                (Some(x), false) => self.op(Prim::Isub, &[x, t], Type::I64),
            });
        }
        let d = Operand::Const(Const::I64(a.delta));
        match acc {
            None => d,
            Some(x) if a.delta == 0 => x,
            Some(x) => self.op(Prim::Iadd, &[x, d], Type::I64),
        }
    }
}

/// Merges the two copies at `exit`: each value of the header used outside
/// the loop is replaced there by a phi of it and its copy, and the phis of
/// `exit` get an entry for the copy's header `h2`.
fn join(
    inl: &mut Inlined,
    plan: &Plan,
    h2: Block,
    skip: &HashSet<Block>,
    vmap: &HashMap<Value, Value>,
) {
    let func = &mut inl.func;
    let h = plan.header;
    let exit = plan.exit;
    let header_vals: Vec<Value> = func.blocks[h]
        .insts
        .iter()
        .filter_map(|&i| func.insts[i].result)
        .collect();
    let copied = |op: Operand| match op {
        Operand::Value(v) => Operand::Value(vmap.get(&v).copied().unwrap_or(v)),
        c => c,
    };
    // The phis `exit` had: one entry, from `h`.
    for i in func.blocks[exit].insts.clone() {
        if let InstKind::Phi { entries } = &mut func.insts[i].kind {
            let from_h: Vec<Operand> = entries
                .iter()
                .filter(|(b, _)| *b == h)
                .map(|(_, o)| *o)
                .collect();
            for o in from_h {
                entries.push((h2, copied(o)));
            }
        }
    }
    // Uses outside both copies (and the test block, which uses none).
    let outside: Vec<Block> = func
        .layout
        .iter()
        .copied()
        .filter(|b| !plan.in_loop.contains(b) && !skip.contains(b))
        .collect();
    let mut subst: HashMap<Value, Value> = HashMap::default();
    let mut used: Vec<Value> = Vec::new();
    for &b in &outside {
        let mut visit = |op: &Operand| {
            if let Operand::Value(v) = op
                && header_vals.contains(v)
                && !used.contains(v)
            {
                used.push(*v);
            }
        };
        for &i in &func.blocks[b].insts {
            match &func.insts[i].kind {
                InstKind::Phi { entries } => entries
                    .iter()
                    .filter(|(from, _)| !(b == exit && (*from == h || *from == h2)))
                    .for_each(|(_, o)| visit(o)),
                InstKind::Prim { args, .. } | InstKind::Invoke { args, .. } => {
                    args.iter().for_each(&mut visit)
                }
                InstKind::CallValue { callee, args } => {
                    visit(&Operand::Value(*callee));
                    args.iter().for_each(&mut visit);
                }
            }
        }
        if let Some(t) = &func.blocks[b].term {
            match t {
                Terminator::GotoIfNot { cond: o, .. }
                | Terminator::Switch { index: o, .. }
                | Terminator::Return(o) => visit(o),
                Terminator::Goto(_) => {}
            }
        }
    }
    let mut new_phis = Vec::new();
    for &v in &used {
        let v2 = vmap.get(&v).copied().unwrap_or(v);
        let ni = func.insts.push(InstData {
            kind: InstKind::Phi {
                entries: SmallVec::from_slice(&[(h, Operand::Value(v)), (h2, Operand::Value(v2))]),
            },
            result: None,
            pos: None,
        });
        let r = func.values.push(ValueData {
            ty: func.values[v].ty.clone(),
            def: ValueDef::Inst(ni),
            name: None,
        });
        func.insts[ni].result = Some(r);
        subst.insert(v, r);
        new_phis.push(ni);
    }
    if subst.is_empty() {
        return;
    }
    let sub = |op: &mut Operand| {
        if let Operand::Value(v) = op
            && let Some(r) = subst.get(v)
        {
            *v = *r;
        }
    };
    for &b in &outside {
        for k in 0..func.blocks[b].insts.len() {
            let i = func.blocks[b].insts[k];
            match &mut func.insts[i].kind {
                InstKind::Phi { entries } => entries
                    .iter_mut()
                    .filter(|(from, _)| !(b == exit && (*from == h || *from == h2)))
                    .for_each(|(_, o)| sub(o)),
                InstKind::Prim { args, .. } | InstKind::Invoke { args, .. } => {
                    args.iter_mut().for_each(sub)
                }
                InstKind::CallValue { callee, args } => {
                    if let Some(r) = subst.get(callee) {
                        *callee = *r;
                    }
                    args.iter_mut().for_each(sub);
                }
            }
        }
        if let Some(t) = &mut func.blocks[b].term {
            match t {
                Terminator::GotoIfNot { cond: o, .. }
                | Terminator::Switch { index: o, .. }
                | Terminator::Return(o) => sub(o),
                Terminator::Goto(_) => {}
            }
        }
    }
    // The new phis go first in `exit`, before its statements (whose places
    // were filled in before, so their errors keep their numbers).
    let old = std::mem::take(&mut func.blocks[exit].insts);
    func.blocks[exit].insts = new_phis.into_iter().chain(old).collect();
}

#[cfg(test)]
mod tests {
    use super::*;
    use irad_ir::Module;

    /// What versioning made of `@name` of `m`: (accesses of the copies
    /// left unchecked, accesses of the copies still checked, loops
    /// versioned); asserts that the result verifies and that the
    /// originals keep every check they had.
    fn versioned(m: &Module, name: &str) -> (usize, usize, usize) {
        let fid = m.by_name(name).expect("the function");
        let func = &m[fid];
        let (out, unchecked) = version(func, None);
        let Some(inl) = out else {
            assert!(unchecked.is_empty());
            return (0, 0, 0);
        };
        let mut m2 = m.clone();
        m2[fid] = inl.func.clone();
        if let Err(e) = irad_ir::verify::verify_func(&m2, fid) {
            panic!(
                "@{name} versioned does not verify: {e:?}\n{}",
                irad_ir::text::print_func(&m2, fid)
            );
        }
        let new = &inl.func;
        let accesses = |f: &Func, blocks: &mut dyn Iterator<Item = Block>| -> Vec<Inst> {
            blocks
                .flat_map(|b| f.blocks[b].insts.clone())
                .filter(|&i| {
                    matches!(
                        f.insts[i].kind,
                        InstKind::Prim {
                            prim: Prim::Arrayref | Prim::Arrayset,
                            ..
                        }
                    )
                })
                .collect()
        };
        let old_blocks = func.blocks.len();
        let proven_before = super::super::bounds::in_range(func);
        let checked_before = accesses(func, &mut func.layout.iter().copied())
            .into_iter()
            .filter(|i| !proven_before.contains(i))
            .count();
        let proven_after = super::super::bounds::in_range(new);
        let is_copy = |b: &Block| b.index() >= old_blocks;
        let orig: Vec<Inst> =
            accesses(new, &mut new.layout.iter().copied().filter(|b| !is_copy(b)));
        let checked_orig = orig.iter().filter(|i| !proven_after.contains(i)).count();
        assert_eq!(
            checked_orig, checked_before,
            "@{name}: the originals keep their checks"
        );
        let copy: Vec<Inst> = accesses(new, &mut new.layout.iter().copied().filter(is_copy));
        assert!(unchecked.iter().all(|i| copy.contains(i)));
        let still = copy
            .iter()
            .filter(|i| !proven_after.contains(i) && !unchecked.contains(i))
            .count();
        // The tests: a jump into a copy, falling through to an original.
        let loops = new
            .layout
            .iter()
            .filter(|&&b| {
                matches!(&new.blocks[b].term, Some(Terminator::GotoIfNot { target, .. })
                    if is_copy(target))
                    && new.next_in_layout(b).is_some_and(|n| !is_copy(&n))
            })
            .count();
        (unchecked.len(), still, loops)
    }

    use irad_ir::entity::EntityRef;

    #[test]
    fn the_mixture_objectives_unproven_reads_lose_their_checks() {
        let text = include_str!("../../../benches/programs/gmm.irad");
        let m = irad_ir::surface::compile(text).expect("the program compiles");
        // The two innermost loops reading invs[c * d + j]; every other
        // access is proven (bounds.rs), and logsumexp has none unproven.
        assert_eq!(versioned(&m, "gmm"), (2, 0, 2));
        assert_eq!(versioned(&m, "logsumexp"), (0, 0, 0));
    }

    #[test]
    fn surface_loops_of_the_filetest() {
        let text = include_str!("../../../tests/filetests/surface/bounds_versioned.irad");
        let m = irad_ir::surface::compile(text).expect("the program compiles");
        assert_eq!(versioned(&m, "shifted"), (1, 0, 1));
        // b[i] and out[i] (written, read): a[i] is proven.
        assert_eq!(versioned(&m, "mul_into"), (3, 0, 1));
        assert_eq!(versioned(&m, "rows"), (1, 0, 1));
        assert_eq!(versioned(&m, "reversed"), (1, 0, 1));
        assert_eq!(versioned(&m, "from_two"), (2, 0, 1));
        assert_eq!(versioned(&m, "i2f"), (0, 0, 0));
        // x[j * d + c]: strided.
        assert_eq!(versioned(&m, "column"), (1, 0, 1));
        // out[j * d + c] written: not versioned.
        assert_eq!(versioned(&m, "scatter"), (0, 0, 0));
        // Already proven: nothing to version.
        let proven = include_str!("../../../tests/filetests/surface/bounds_proven.irad");
        let m = irad_ir::surface::compile(proven).expect("the program compiles");
        assert_eq!(versioned(&m, "pairs"), (0, 0, 0));
        assert_eq!(versioned(&m, "grid"), (0, 0, 0));
        // x[i] of another array's loop, and the near misses with an
        // invariant offset: versioned (the test fails at run time).
        assert_eq!(versioned(&m, "scaled"), (1, 0, 1));
        assert_eq!(versioned(&m, "too_far"), (1, 0, 1));
        // Not counted loops, or an index not linear in the counter.
        assert_eq!(versioned(&m, "from_minus_one"), (0, 0, 0));
        assert_eq!(versioned(&m, "by_two"), (0, 0, 0));
        assert_eq!(versioned(&m, "after"), (0, 0, 0));
        // x[j * d + i] along j: a stride.
        assert_eq!(versioned(&m, "swapped"), (1, 0, 1));
    }

    #[test]
    fn counting_down_loops_of_reverse_sweeps() {
        let text = include_str!("../../../tests/filetests/codegen/bounds_versioned_down.ir");
        let m = irad_ir::text::parse_module(text).expect("the program parses");
        // a[m], b[m], g[off + m] read and written.
        assert_eq!(versioned(&m, "acc"), (4, 0, 1));
        // a[top - m] (sign -1), out[m].
        assert_eq!(versioned(&m, "rev"), (2, 0, 1));
    }

    /// The reverse-mode pieces of the mixture objective (a snapshot of what
    /// reverse mode derives): every access of the reverse sweeps' innermost
    /// loops, over tape-popped arrays, loses its check in the copies.
    #[test]
    fn the_mixture_gradients_sweeps() {
        let text = include_str!("../../tests/data/gmm_rev.ir");
        let m = irad_ir::text::parse_module(text).expect("the snapshot parses");
        // The forward sweep: the two reads of invs, as in the primal.
        assert_eq!(versioned(&m, "gmm.rev.fwd"), (2, 0, 2));
        // The pullback: three innermost loops counting down, 17 accesses.
        assert_eq!(versioned(&m, "gmm.rev.back"), (17, 0, 3));
        assert_eq!(versioned(&m, "logsumexp.rev.back"), (4, 0, 2));
        assert_eq!(versioned(&m, "logsumexp.rev.fwd"), (0, 0, 0));
    }

    /// On the inlined copy lowering compiles: the helper's read, inlined
    /// into the loop, is versioned, and its copy keeps the helper's place.
    #[test]
    fn inlined_reads_keep_their_places() {
        let text = include_str!("../../../tests/filetests/surface/bounds_versioned.irad");
        let m = irad_ir::surface::compile(text).expect("the program compiles");
        let fid = m.by_name("via_helper").expect("the function");
        let rec = irad_passes::pe::recursive_functions(&m);
        let limits = irad_passes::pe::Limits::default();
        let inl = irad_passes::pe::inline_for_codegen(&m, fid, &rec, &limits, &|_| true);
        assert!(inl.is_some(), "@get is inlined");
        let (out, unchecked) = version(&m[fid], inl);
        let out = out.expect("versioned");
        assert_eq!(unchecked.len(), 1);
        for i in unchecked {
            let place = out.insts[i].as_ref().expect("a place");
            assert_eq!((&*place.func, place.block, place.stmt), ("get", 1, 1));
        }
        let mut m2 = m.clone();
        m2[fid] = out.func;
        assert!(irad_ir::verify::verify_func(&m2, fid).is_ok());
    }

    /// The versioned functions, run by the interpreter on many arguments
    /// (short arrays, counts and offsets from -3 to 8 and near the ends of
    /// i64), compute what the originals do, and every error they stop with
    /// is the original's, in an original block: an index out of range never
    /// reaches an unchecked copy, whose blocks have labels of their own. And
    /// when the original runs to a value, so does the function whose
    /// checked loop bodies fail: with every index in range, the copy runs.
    #[test]
    fn the_test_never_lets_an_index_out_of_range_into_the_copy() {
        use irad_ir::interp::{RunOptions, Val, run};
        let surface = include_str!("../../../tests/filetests/surface/bounds_versioned.irad");
        let down = include_str!("../../../tests/filetests/codegen/bounds_versioned_down.ir");
        let proven = include_str!("../../../tests/filetests/surface/bounds_proven.irad");
        let modules = [
            irad_ir::surface::compile(surface).expect("the program compiles"),
            irad_ir::text::parse_module(down).expect("the program parses"),
            irad_ir::surface::compile(proven).expect("the program compiles"),
        ];
        let ints = [
            -3,
            -2,
            -1,
            0,
            1,
            2,
            3,
            4,
            5,
            8,
            i64::MAX,
            i64::MAX - 1,
            i64::MIN,
            i64::MIN + 1,
        ];
        let mut seed: u64 = 22;
        let mut next = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let (mut oks, mut errors, mut fast_runs) = (0, 0, 0);
        for m in &modules {
            for (fid, func) in m.funcs() {
                let (Some(inl), _) = version(func, None) else {
                    continue;
                };
                let mut m2 = m.clone();
                let old_blocks = func.blocks.len();
                m2[fid] = inl.func;
                let m3 = slow_path_fails(&m2, fid, old_blocks);
                for _ in 0..400 {
                    let args: Vec<Val> = func
                        .param_types()
                        .iter()
                        .map(|t| match t {
                            Type::I64 => Val::I64(ints[next(ints.len())]),
                            _ => Val::f64_array((0..next(7)).map(|i| i as f64 + 0.5).collect()),
                        })
                        .collect();
                    let copies = |a: &[Val]| -> Vec<Val> {
                        a.iter()
                            .map(|v| match v {
                                Val::Array(_) => Val::f64_array(floats(v)),
                                v => v.clone(),
                            })
                            .collect()
                    };
                    let (a1, a2) = (copies(&args), copies(&args));
                    // A step limit ends the runs of loops that count to
                    // i64::MAX (the test adds steps: such runs are skipped).
                    let opts = RunOptions {
                        max_steps: 20_000,
                        ..RunOptions::default()
                    };
                    let want = run(m, fid, &a1, &opts);
                    let got = run(&m2, fid, &a2, &opts);
                    let what = format!("@{}{args:?}", func.name);
                    let limit = |r: &Result<Val, irad_ir::interp::RunError>| {
                        r.as_ref().is_err_and(|e| e.msg.starts_with("step limit"))
                    };
                    if limit(&want) || limit(&got) {
                        continue;
                    }
                    match (&want, &got) {
                        (Ok(w), Ok(g)) => {
                            assert!(w.same(g), "{what}: {w:?} against {g:?}");
                            // Every index in range: the copy ran, not the
                            // original (whose body fails in `m3`); except
                            // for a stride, whose test also fails for
                            // strides of 2^31 and more.
                            let a3 = copies(&args);
                            let fast = run(&m3, fid, &a3, &opts);
                            assert!(
                                ["column", "swapped"].contains(&func.name.as_str())
                                    || fast.as_ref().is_ok_and(|f| f.same(w)),
                                "{what}: the checked loop ran: {fast:?}"
                            );
                            fast_runs += usize::from(fast.is_ok());
                            oks += 1;
                        }
                        (Err(w), Err(g)) => {
                            assert_eq!(w.msg, g.msg, "{what}");
                            assert_eq!(w.loc.block, g.loc.block, "{what}: {}", g.msg);
                            errors += 1;
                        }
                        _ => panic!("{what}: {want:?} against {got:?}"),
                    }
                    let arrays = |a: &[Val]| -> Vec<Vec<f64>> {
                        a.iter()
                            .filter(|v| matches!(v, Val::Array(_)))
                            .map(floats)
                            .collect()
                    };
                    assert_eq!(arrays(&a1), arrays(&a2), "{what}: the writes");
                }
            }
        }
        // Today 2 353 values (all but 6, of huge strides, from the copies)
        // and 2 780 errors; runs that reach the step limit are not compared.
        assert!(
            oks >= 1000 && errors >= 1000,
            "{oks} values, {errors} errors"
        );
        assert!(fast_runs + 200 >= oks, "{fast_runs} of {oks} in the copies");
    }

    /// The f64 elements of an array value.
    fn floats(v: &irad_ir::interp::Val) -> Vec<f64> {
        match v {
            irad_ir::interp::Val::Array(a) => match &*a.0.borrow() {
                irad_ir::interp::value::ArrayData::F64(xs) => xs.clone(),
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    /// `m` with `idiv(1, 0)` first in the body of each original loop that
    /// versioning put a test before (the blocks of `@f` from `old_blocks`
    /// on are new): a run that enters such a body fails.
    fn slow_path_fails(m: &Module, f: irad_ir::FuncId, old_blocks: usize) -> Module {
        let mut m3 = m.clone();
        let func = &mut m3[f];
        let tests: Vec<Block> = func
            .layout
            .iter()
            .copied()
            .filter(|b| b.index() >= old_blocks)
            .filter(|&b| {
                matches!(&func.blocks[b].term, Some(Terminator::GotoIfNot { target, .. })
                    if target.index() >= old_blocks)
                    && func
                        .next_in_layout(b)
                        .is_some_and(|n| n.index() < old_blocks)
            })
            .collect();
        for g in tests {
            let Some(h) = func.next_in_layout(g) else {
                continue;
            };
            let body = match &func.blocks[h].term {
                Some(Terminator::Switch { targets, .. }) => targets[1],
                _ => func.next_in_layout(h).expect("a body"),
            };
            let (inst, _) = func.push_inst(
                body,
                InstKind::Prim {
                    prim: Prim::Idiv,
                    args: SmallVec::from_slice(&[
                        Operand::Const(Const::I64(1)),
                        Operand::Const(Const::I64(0)),
                    ]),
                },
                Some(Type::I64),
                None,
            );
            let insts = &mut func.blocks[body].insts;
            insts.pop();
            insts.insert(0, inst);
        }
        m3
    }
}
