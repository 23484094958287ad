//! Loop fusion: two adjacent counted loops over the same range become one
//! loop whose body is the first loop's body followed by the second's, and
//! a load in the second body of what the first just stored, at the same
//! index, becomes the stored value (docs/codegen.md, "Loop fusion"). The
//! mixture objective's `diff[j] = ...` loop and its `q = q + diff[j] *
//! diff[j]` loop are the case in point.
//!
//! Works on the copy of the function that lowering compiles (an
//! [`Inlined`]; made here, with every statement's own place, when nothing
//! was inlined), never on the module: the interpreter and `irad dump` see
//! nothing of it. Runs before loop versioning (`version.rs`), which then
//! versions the fused loop as one.
//!
//! Loops. `L1` and `L2` are innermost loops of the shape `version.rs`
//! recognises ([`version::shape`]: one way in from the preheader, one way
//! out from the header to an exit whose only predecessor is the header),
//! both *counting up* (`i = [p => k0, latch => iadd(i, 1)]`, `gotoifnot
//! lt(i, B), exit`), with the same constant `k0` and the same bound `B`:
//! one SSA value or constant, or `length` of one array value in both (an
//! array's length never changes), defined outside both loops. `L1`'s
//! exit `e1` is `L2`'s preheader and ends in `goto h2`; `L2`'s header `h2`
//! holds only phis and its test `lt(j, B)`, used by nothing else; both
//! latches end in `goto` their header.
//!
//! What lies between. `e1`'s statements are calls of pure primitives
//! (`rules::is_pure`: no effect, cannot fail) whose operands are not
//! defined in `L1`; `L2`'s phi entries from `e1` (its initial values, such
//! as `q = 0.0`) are not defined in `L1` either. So `e1`'s statements can
//! run before `L1` (at the end of its preheader `p1`, which dominates
//! them: every strict dominator of `h1` dominates `p1`), where they compute
//! the same values; running them on another path out of `p1` too is
//! harmless.
//!
//! The fused loop: `h1` takes `L2`'s phis (other than `j`), entered from
//! `p1` with their initial values and from `L2`'s latch with their steps;
//! `L1`'s latch jumps to `L2`'s first body block instead of `h1`; `L2`'s
//! latch jumps to `h1`, whose phis are now entered from it; `h1` leaves to
//! `L2`'s exit `e2`, whose phis name `h1` for `h2`; `j` is replaced by `i`
//! everywhere (both run `k0, k0 + 1, ...` below the same `B`, `h1` testing
//! `L1`'s operand, whose value is `L2`'s; and after the loops both equal
//! the value that failed the test); `e1` and `h2` leave the layout. `i`
//! counts one iteration of both bodies.
//!
//! Legality. Before, the run is `L1(k0), ..., L1(B-1), L2(k0), ...,
//! L2(B-1)`; after, `L1(k0), L2(k0), L1(k0+1), ...`. Each body's own
//! operations keep their order and operands (so every f64 operation,
//! every accumulator chain, computes the same bits); what moves is
//! `L2(t)` before `L1(u)` for `u > t`. This is the same computation when:
//! - *Values*: nothing of `L2` (statements, phi steps, terminators) uses a
//!   value defined in `L1` (whose values there would be those of an
//!   unfinished `L1`); after the fused loop `L1`'s header values are
//!   final, as before.
//! - *Effects*: every statement of both loops is a pure primitive, a phi,
//!   an `arrayref` or an `arrayset` (no call, invoke, push, pop, alloc,
//!   bulk primitive), and no terminator is a `switch`.
//! - *Memory*: an array value is *fresh* when it is the result of
//!   `alloc`, `zeros` or `copy` in this function, and *local* when fresh
//!   and used nowhere but as the array operand of `arrayref`, `arrayset`
//!   and `length`, or by `return` (no other value of the function can then
//!   hold it). Two array values *may alias* unless they differ and one is
//!   local, or both are fresh (two allocations are two arrays), or one is
//!   fresh and the other a parameter (which names an array made before
//!   the call). `L2` writes no array that may alias one `L1` reads or
//!   writes (so no `L1(u)` reads or overwrites what `L2(t)` wrote). Each
//!   `L2` read of an array that may alias one `L1` writes is at index `j`
//!   itself, and every `L1` write to an array that may alias it is at
//!   index `i` itself: `L1(u)` writes element `u` only, so `L2(t)` reads
//!   element `t` after `L1(t)` wrote it and before any later `L1(u)` could
//!   touch it (none does), as before.
//!
//! Errors. Each body is *safe* when none of its statements can fail: a
//! pure primitive, or an `arrayref`/`arrayset` proven in range by
//! `bounds.rs` on the function before fusion (its proofs use the loop's
//! own counter and bound, which fusion keeps). Fusion requires one body to
//! be safe; if the other fails first at iteration `t`, before it was
//! after `L1(k0..t)` (or `L1` entire and `L2(k0..t)`), now after both
//! bodies' iterations `k0..t` (and `L2(t)` too when `L1` is safe): the same
//! first error at the same statement, since the safe body cannot fail. The
//! safe body's iterations that ran (or did not run) where they did not
//! before must leave nothing the caller can see, so when the other body is
//! not safe too, the safe one writes only local arrays (which die with the
//! failed call: it returns nothing, and nothing else holds them).
//! Iterations of the failing body before `t` are unchanged.
//!
//! Forwarding. In the fused body, an `arrayref(a, i)` of `L2` (same array
//! value `a`) after an `arrayset(a, i, v)` of `L1` in a block that
//! dominates `L1`'s latch (it runs in every iteration that reaches `L2`'s
//! body), when that store is the only `L1` write to any array that may
//! alias `a` (and `L2` writes none, by the memory rule), reads `v`: its
//! uses take `v` and the load is dropped. It could not fail (the store at
//! the same index just succeeded). The store stays: the array is
//! observable after the loop.
//!
//! Assumes a function that verifies. Guarantees: the result verifies and
//! computes the same values, errors and side effects, bit for bit.

use super::version;
use irad_ir::flow::{ControlFlowGraph, DominatorTree, LoopAnalysis};
use irad_ir::{Block, Func, Inst, InstKind, Operand, Prim, Terminator, Value, ValueDef};
use irad_passes::optimise::rules::is_pure;
use irad_passes::pe::Inlined;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// At most this many fusions in one function.
const MAX_FUSIONS: usize = 64;
/// Nor in a function of more statements than this.
const MAX_FUNC_INSTS: usize = 20_000;

/// `func` (or its inlined copy `inl`) with its adjacent counted loops
/// fused (module header), and how many fusions were made; `inl` unchanged
/// and 0 when no pair qualifies.
pub(super) fn fuse(func: &Func, inl: Option<Inlined>) -> (Option<Inlined>, usize) {
    let mut work = inl;
    let mut n = 0;
    for _ in 0..MAX_FUSIONS {
        let f = work.as_ref().map_or(func, |i| &i.func);
        if f.insts.len() > MAX_FUNC_INSTS {
            break;
        }
        let Some(pair) = find(f, work.as_ref()) else {
            break;
        };
        let w = work.get_or_insert_with(|| Inlined::identity(func));
        apply(&mut w.func, &pair);
        n += 1;
    }
    (work, n)
}

/// How many fusions `func` gets (for tests and diagnostics).
pub(crate) fn count(func: &Func) -> usize {
    fuse(func, None).1
}

/// One counting-up loop (module header).
#[derive(Clone)]
struct Counted {
    header: Block,
    pre: Block,
    latch: Block,
    exit: Block,
    /// The blocks of the loop, in layout order.
    blocks: Vec<Block>,
    in_loop: HashSet<Block>,
    k0: i64,
    bound: Operand,
    /// The counter `i`.
    iv: Value,
}

/// Two loops to fuse, and the loads to forward: (load, stored operand).
struct Pair {
    l1: Counted,
    l2: Counted,
    forward: Vec<(Inst, Operand)>,
}

/// The innermost counting-up loops of `func`, by header.
fn counted_loops(func: &Func, cfg: &ControlFlowGraph, la: &LoopAnalysis) -> Vec<Counted> {
    let mut out = Vec::new();
    // Loops that hold another, found once (not by a search of every loop
    // for each: quadratic in the loops of a function).
    let outer: HashSet<irad_ir::flow::Loop> = la.loops().filter_map(|o| la.parent(o)).collect();
    let block_of = version::BlockOf::of(func);
    for lp in la.loops() {
        if outer.contains(&lp) {
            continue;
        }
        let h = la.header(lp);
        let in_loop: HashSet<Block> = la.blocks(lp).iter().copied().collect();
        let Some(plan) = version::shape(func, cfg, h, in_loop, &block_of) else {
            continue;
        };
        if plan.bound_nonneg {
            continue; // counting down
        }
        let Some(&(iv, 0)) = plan.ivs.first() else {
            continue;
        };
        let Some(&latch) = cfg.preds(h).iter().find(|p| plan.in_loop.contains(p)) else {
            continue;
        };
        if func.blocks[latch].term != Some(Terminator::Goto(h)) {
            continue;
        }
        out.push(Counted {
            header: h,
            pre: plan.pre,
            latch,
            exit: plan.exit,
            blocks: plan.blocks,
            in_loop: plan.in_loop,
            k0: plan.k0,
            bound: plan.bound,
            iv,
        });
    }
    out
}

/// The operands a statement or terminator reads.
fn inst_operands(kind: &InstKind) -> Vec<Operand> {
    match kind {
        InstKind::Prim { args, .. } | InstKind::Invoke { args, .. } => args.to_vec(),
        InstKind::CallValue { callee, args } => std::iter::once(Operand::Value(*callee))
            .chain(args.iter().copied())
            .collect(),
        InstKind::Phi { entries } => entries.iter().map(|(_, o)| *o).collect(),
    }
}

/// The operand of a terminator, if any.
fn term_operand(t: &Terminator) -> Option<Operand> {
    match t {
        Terminator::GotoIfNot { cond: o, .. }
        | Terminator::Switch { index: o, .. }
        | Terminator::Return(o) => Some(*o),
        Terminator::Goto(_) => None,
    }
}

/// What the legality checks need to know of the function.
struct Facts<'a> {
    func: &'a Func,
    block_of: HashMap<Inst, Block>,
    /// Accesses proven in range (`bounds.rs`).
    proven: HashSet<Inst>,
    /// Fresh arrays (module header).
    fresh: HashSet<Value>,
    /// Local arrays (module header).
    local: HashSet<Value>,
}

impl Facts<'_> {
    /// Whether `v` is defined by a statement of `lp`.
    fn defined_in(&self, v: Value, lp: &Counted) -> bool {
        match self.func.values.get(v).map(|d| d.def) {
            Some(ValueDef::Inst(i)) => self
                .block_of
                .get(&i)
                .is_some_and(|b| lp.in_loop.contains(b)),
            _ => false,
        }
    }

    /// Whether `v` is a parameter of the function.
    fn param(&self, v: Value) -> bool {
        matches!(
            self.func.values.get(v).map(|d| d.def),
            Some(ValueDef::Param(_))
        )
    }

    /// Whether array values `a` and `b` may be one array (module header).
    fn may_alias(&self, a: Value, b: Value) -> bool {
        let fresh = |v: Value| self.fresh.contains(&v);
        let distinct = self.local.contains(&a)
            || self.local.contains(&b)
            || (fresh(a) && (fresh(b) || self.param(b)))
            || (fresh(b) && self.param(a));
        a == b || !distinct
    }
}

/// The fresh arrays of `func`, and those of them that are local (module
/// header).
fn local_arrays(func: &Func) -> (HashSet<Value>, HashSet<Value>) {
    let mut fresh: HashSet<Value> = HashSet::default();
    for &b in &func.layout {
        for &i in &func.blocks[b].insts {
            if let (
                InstKind::Prim {
                    prim: Prim::Alloc | Prim::Zeros | Prim::Copy,
                    ..
                },
                Some(r),
            ) = (&func.insts[i].kind, func.insts[i].result)
            {
                fresh.insert(r);
            }
        }
    }
    let all = fresh.clone();
    let escaped = |op: &Operand, fresh: &mut HashSet<Value>| {
        if let Operand::Value(v) = op {
            fresh.remove(v);
        }
    };
    for &b in &func.layout {
        for &i in &func.blocks[b].insts {
            let kind = &func.insts[i].kind;
            let skip_first = matches!(
                kind,
                InstKind::Prim {
                    prim: Prim::Arrayref | Prim::Arrayset | Prim::Length,
                    ..
                }
            );
            for (k, op) in inst_operands(kind).iter().enumerate() {
                if !(skip_first && k == 0) {
                    escaped(op, &mut fresh);
                }
            }
        }
        // Returned is not escaped: a failed call returns nothing, and
        // nothing runs in this function after its return.
        match &func.blocks[b].term {
            Some(Terminator::Return(_)) | None => {}
            Some(t) => {
                if let Some(op) = term_operand(t) {
                    escaped(&op, &mut fresh);
                }
            }
        }
    }
    (all, fresh)
}

/// An access of a loop body: (statement, array, index).
type Access = (Inst, Value, Operand);

/// What a loop body does (module header), or `None` when it has an effect
/// fusion may not reorder.
struct Body {
    reads: Vec<Access>,
    writes: Vec<Access>,
    /// None of its statements can fail.
    safe: bool,
}

/// The accesses of `lp`'s blocks and whether none of its statements can
/// fail (module header, "Errors"); `None` when it has an effect.
fn body(fx: &Facts, lp: &Counted) -> Option<Body> {
    let func = fx.func;
    let mut out = Body {
        reads: Vec::new(),
        writes: Vec::new(),
        safe: true,
    };
    for &b in &lp.blocks {
        if matches!(func.blocks[b].term, Some(Terminator::Switch { .. })) {
            out.safe = false;
        }
        for &i in &func.blocks[b].insts {
            match &func.insts[i].kind {
                InstKind::Phi { .. } => {}
                InstKind::Prim { prim, args } => match prim {
                    Prim::Arrayref | Prim::Arrayset => {
                        let (Some(&Operand::Value(a)), Some(&x)) = (args.first(), args.get(1))
                        else {
                            return None;
                        };
                        if !fx.proven.contains(&i) {
                            out.safe = false;
                        }
                        if *prim == Prim::Arrayref {
                            out.reads.push((i, a, x));
                        } else {
                            out.writes.push((i, a, x));
                        }
                    }
                    p if is_pure(*p) => {}
                    _ => return None,
                },
                InstKind::Invoke { .. } | InstKind::CallValue { .. } => return None,
            }
        }
    }
    Some(out)
}

/// Whether every operand of `lp`'s statements and terminators, other than
/// `lp`'s own counter phi's entries, avoids values defined in `other`.
fn independent_of(fx: &Facts, lp: &Counted, other: &Counted) -> bool {
    let func = fx.func;
    let ok = |op: &Operand| !matches!(op, Operand::Value(v) if fx.defined_in(*v, other));
    lp.blocks.iter().all(|&b| {
        func.blocks[b]
            .insts
            .iter()
            .all(|&i| inst_operands(&func.insts[i].kind).iter().all(ok))
            && func.blocks[b]
                .term
                .as_ref()
                .and_then(term_operand)
                .is_none_or(|o| ok(&o))
    })
}

/// Whether `v` is used anywhere but by `h`'s terminator.
fn used_elsewhere(func: &Func, v: Value, h: Block) -> bool {
    let is_v = |op: &Operand| *op == Operand::Value(v);
    func.layout.iter().any(|&b| {
        func.blocks[b]
            .insts
            .iter()
            .any(|&i| inst_operands(&func.insts[i].kind).iter().any(is_v))
            || (b != h
                && func.blocks[b]
                    .term
                    .as_ref()
                    .and_then(term_operand)
                    .is_some_and(|o| is_v(&o)))
    })
}

/// The first pair of loops of `func` that qualifies (module header).
fn find(func: &Func, inl: Option<&Inlined>) -> Option<Pair> {
    let cfg = ControlFlowGraph::with_function(func);
    let dom = DominatorTree::with_cfg(&cfg);
    let la = LoopAnalysis::compute(&cfg, &dom);
    if la.is_empty() {
        return None;
    }
    let loops = counted_loops(func, &cfg, &la);
    if loops.len() < 2 {
        return None;
    }
    let (fresh, local) = local_arrays(func);
    let fx = Facts {
        func,
        block_of: func
            .layout
            .iter()
            .flat_map(|&b| func.blocks[b].insts.iter().map(move |&i| (i, b)))
            .collect(),
        proven: super::bounds::in_range(func),
        fresh,
        local,
    };
    for l1 in &loops {
        let Some(Terminator::Goto(h2)) = func.blocks[l1.exit].term else {
            continue;
        };
        let Some(l2) = loops.iter().find(|l| l.header == h2 && l.pre == l1.exit) else {
            continue;
        };
        if let Some(forward) = check(&fx, &dom, inl, l1, l2) {
            let (l1, l2) = (l1.clone(), l2.clone());
            return Some(Pair { l1, l2, forward });
        }
    }
    None
}

/// Whether bounds `a` and `b` are one value: one operand, or `length` of
/// one array value twice (an array's length never changes).
fn same_bound(func: &Func, a: Operand, b: Operand) -> bool {
    let length_of = |o: Operand| match o {
        Operand::Value(v) => match func.def_kind(v) {
            Some(InstKind::Prim {
                prim: Prim::Length,
                args,
            }) => match args.as_slice() {
                [Operand::Value(x)] => Some(*x),
                _ => None,
            },
            _ => None,
        },
        Operand::Const(_) => None,
    };
    a == b || length_of(a).is_some_and(|x| length_of(b) == Some(x))
}

/// The loads to forward when `l1` and `l2` may be fused (module header).
fn check(
    fx: &Facts,
    dom: &DominatorTree,
    inl: Option<&Inlined>,
    l1: &Counted,
    l2: &Counted,
) -> Option<Vec<(Inst, Operand)>> {
    let func = fx.func;
    let (e1, h2) = (l1.exit, l2.header);
    if l1.k0 != l2.k0 || !same_bound(func, l1.bound, l2.bound) {
        return None;
    }
    for bound in [l1.bound, l2.bound] {
        if let Operand::Value(b) = bound
            && (fx.defined_in(b, l1) || fx.defined_in(b, l2))
        {
            return None;
        }
    }
    // Every block involved belongs to the same inlined body, and none is
    // where an inlined callee began.
    if let Some(inl) = inl {
        let frame = inl.frames[l1.pre];
        let blocks = l1.blocks.iter().chain(&l2.blocks).chain([&e1]);
        for &b in blocks {
            if inl.frames[b] != frame || inl.entries.contains(b) {
                return None;
            }
        }
    }
    if func.blocks[l2.latch].term != Some(Terminator::Goto(h2)) {
        return None;
    }
    // `h2`: phis, and its test used by nothing else.
    let Some(Terminator::GotoIfNot {
        cond: Operand::Value(c2),
        ..
    }) = func.blocks[h2].term
    else {
        return None;
    };
    for &i in &func.blocks[h2].insts {
        match &func.insts[i].kind {
            InstKind::Phi { entries } => {
                let init = entries.iter().find(|(from, _)| *from == e1);
                if init
                    .is_some_and(|(_, o)| matches!(o, Operand::Value(v) if fx.defined_in(*v, l1)))
                {
                    return None;
                }
            }
            _ if func.insts[i].result == Some(c2) => {}
            _ => return None,
        }
    }
    if used_elsewhere(func, c2, h2) {
        return None;
    }
    // What lies between: pure statements independent of `l1`.
    for &i in &func.blocks[e1].insts {
        match &func.insts[i].kind {
            InstKind::Prim { prim, args } if is_pure(*prim) => {
                if args
                    .iter()
                    .any(|o| matches!(o, Operand::Value(v) if fx.defined_in(*v, l1)))
                {
                    return None;
                }
            }
            _ => return None,
        }
    }
    if !independent_of(fx, l2, l1) {
        return None;
    }
    let b1 = body(fx, l1)?;
    let b2 = body(fx, l2)?;
    // Errors: one body safe; the other's failure may leave only local
    // arrays written differently.
    if !b1.safe && !b2.safe {
        return None;
    }
    let only_local = |b: &Body| b.writes.iter().all(|(_, a, _)| fx.local.contains(a));
    if (!b1.safe && !only_local(&b2)) || (!b2.safe && !only_local(&b1)) {
        return None;
    }
    // Memory.
    let touched1 = b1.reads.iter().chain(&b1.writes);
    for (_, w2, _) in &b2.writes {
        if touched1.clone().any(|(_, a, _)| fx.may_alias(*w2, *a)) {
            return None;
        }
    }
    let at = |x: &Operand, iv: Value| *x == Operand::Value(iv);
    for (_, r2, x2) in &b2.reads {
        let mut writers = b1.writes.iter().filter(|(_, a, _)| fx.may_alias(*r2, *a));
        let mut any = false;
        for (_, _, x1) in writers.by_ref() {
            any = true;
            if !at(x1, l1.iv) {
                return None;
            }
        }
        if any && !at(x2, l2.iv) {
            return None;
        }
    }
    // Forwarding.
    let mut forward = Vec::new();
    for (load, r2, x2) in &b2.reads {
        if !at(x2, l2.iv) {
            continue;
        }
        let writers: Vec<&Access> = b1
            .writes
            .iter()
            .filter(|(_, a, _)| fx.may_alias(*r2, *a))
            .collect();
        let [(store, a, x1)] = writers.as_slice() else {
            continue;
        };
        if a != r2 || !at(x1, l1.iv) {
            continue;
        }
        let Some(&sb) = fx.block_of.get(store) else {
            continue;
        };
        if !dom.dominates(sb, l1.latch) {
            continue;
        }
        let InstKind::Prim { args, .. } = &func.insts[*store].kind else {
            continue;
        };
        if let Some(&v) = args.get(2) {
            forward.push((*load, v));
        }
    }
    Some(forward)
}

/// Fuses `pair.l2` into `pair.l1` (module header).
fn apply(func: &mut Func, pair: &Pair) {
    let Pair { l1, l2, forward } = pair;
    let (p1, h1, e1, h2, e2) = (l1.pre, l1.header, l1.exit, l2.header, l2.exit);
    // What lay between goes before `l1`.
    let between = std::mem::take(&mut func.blocks[e1].insts);
    func.blocks[p1].insts.extend(between);
    // `l2`'s phis, but its counter, join `h1`'s; its test goes.
    let mut moved = Vec::new();
    for i in std::mem::take(&mut func.blocks[h2].insts) {
        if func.insts[i].result == Some(l2.iv) {
            continue;
        }
        if let InstKind::Phi { entries } = &mut func.insts[i].kind {
            for (from, _) in entries.iter_mut() {
                if *from == e1 {
                    *from = p1;
                }
            }
            moved.push(i);
        }
    }
    let nphis = func.blocks[h1]
        .insts
        .iter()
        .take_while(|&&i| matches!(func.insts[i].kind, InstKind::Phi { .. }))
        .count();
    for &i in &func.blocks[h1].insts[..nphis] {
        if let InstKind::Phi { entries } = &mut func.insts[i].kind {
            for (from, _) in entries.iter_mut() {
                if *from == l1.latch {
                    *from = l2.latch;
                }
            }
        }
    }
    func.blocks[h1].insts.splice(nphis..nphis, moved);
    // The edges.
    let b2 = func.next_in_layout(h2);
    if let (Some(t), Some(b2)) = (&mut func.blocks[l1.latch].term, b2) {
        version::retarget(t, h1, b2);
    }
    if let Some(t) = &mut func.blocks[l2.latch].term {
        version::retarget(t, h2, h1);
    }
    if let Some(t) = &mut func.blocks[h1].term {
        version::retarget(t, e1, e2);
    }
    for &i in &func.blocks[e2].insts {
        if let InstKind::Phi { entries } = &mut func.insts[i].kind {
            for (from, _) in entries.iter_mut() {
                if *from == h2 {
                    *from = h1;
                }
            }
        }
    }
    func.layout.retain(|&b| b != e1 && b != h2);
    func.blocks[h2].term = Some(Terminator::Goto(h1));
    // `j` is `i`; forwarded loads read the stored values.
    let mut subst: HashMap<Value, Operand> = HashMap::default();
    subst.insert(l2.iv, Operand::Value(l1.iv));
    let dropped: HashSet<Inst> = forward.iter().map(|(i, _)| *i).collect();
    for (load, v) in forward {
        if let Some(r) = func.insts[*load].result {
            subst.insert(r, *v);
        }
    }
    let layout = func.layout.clone();
    for b in layout {
        func.blocks[b].insts.retain(|i| !dropped.contains(i));
        for k in 0..func.blocks[b].insts.len() {
            let i = func.blocks[b].insts[k];
            substitute(&mut func.insts[i].kind, &subst);
        }
        if let Some(
            Terminator::GotoIfNot { cond: o, .. }
            | Terminator::Switch { index: o, .. }
            | Terminator::Return(o),
        ) = &mut func.blocks[b].term
            && let Operand::Value(v) = o
            && let Some(r) = subst.get(v)
        {
            *o = *r;
        }
    }
}

/// Replaces the operands of `kind` that `subst` maps.
fn substitute(kind: &mut InstKind, subst: &HashMap<Value, Operand>) {
    let sub = |op: &mut Operand| {
        if let Operand::Value(v) = op
            && let Some(r) = subst.get(v)
        {
            *op = *r;
        }
    };
    match kind {
        InstKind::Phi { entries } => entries.iter_mut().for_each(|(_, o)| sub(o)),
        InstKind::Prim { args, .. } | InstKind::Invoke { args, .. } => {
            args.iter_mut().for_each(sub)
        }
        InstKind::CallValue { callee, args } => {
            if let Some(Operand::Value(r)) = subst.get(callee) {
                *callee = *r;
            }
            args.iter_mut().for_each(sub);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use irad_ir::Module;
    use irad_ir::interp::{RunOptions, Val, run};

    /// Loops that fuse, and near misses that must not.
    const SURFACE: &str = r#"
fn map_sum(a: [f64]) -> f64 {
    let n = len(a);
    let c: [f64] = alloc(n);
    for i in 0..n {
        c[i] = a[i] * 2.0 - 1.0;
    }
    let mut s = 0.5;
    for j in 0..n {
        s = s + c[j] * c[j];
    }
    s
}
fn unproven(a: [f64], b: [f64]) -> f64 {
    let n = len(a);
    let c: [f64] = alloc(n);
    for i in 0..n {
        c[i] = a[i] * b[i];
    }
    let mut s = 0.0;
    for j in 0..n {
        s = s + c[j];
    }
    s
}
fn lens(a: [f64]) -> f64 {
    let c: [f64] = alloc(len(a));
    for i in 0..len(a) {
        c[i] = a[i] * 3.0;
    }
    let mut s = 0.0;
    for j in 0..len(a) {
        s = s + c[j];
    }
    s
}
fn lens_differ(a: [f64], b: [f64]) -> f64 {
    let c: [f64] = alloc(len(a));
    for i in 0..len(a) {
        c[i] = a[i] * 3.0;
    }
    let mut s = 0.0;
    for j in 0..len(b) {
        s = s + b[j];
    }
    s
}
fn cond_store(a: [f64]) -> f64 {
    let n = len(a);
    let c = zeros(n);
    for i in 0..n {
        if a[i] > 0.0 {
            c[i] = a[i] * 0.5;
        }
    }
    let mut s = 0.25;
    for j in 0..n {
        s = s + c[j];
    }
    s
}
fn three(a: [f64]) -> f64 {
    let n = len(a);
    let c: [f64] = alloc(n);
    for i in 0..n {
        c[i] = a[i] + 1.0;
    }
    let mut s = 0.0;
    for j in 0..n {
        s = s + c[j];
    }
    let mut t = 1.0;
    for k in 0..n {
        t = t * a[k];
    }
    s + t
}
fn bounds_differ(a: [f64]) -> f64 {
    let n = len(a);
    let c: [f64] = alloc(n);
    for i in 0..n {
        c[i] = a[i] * 2.0;
    }
    let mut s = 0.0;
    for j in 0..n - 1 {
        s = s + c[j];
    }
    s
}
fn ahead(a: [f64]) -> f64 {
    let n = len(a);
    let c: [f64] = alloc(n + 1);
    for i in 0..n {
        c[i] = a[i] * 2.0;
    }
    let mut s = 0.0;
    for j in 0..n {
        s = s + c[j + 1];
    }
    s
}
fn uses_first(a: [f64]) -> f64 {
    let n = len(a);
    let mut m = 0.0;
    for i in 0..n {
        m = max(m, a[i]);
    }
    let mut t = 0.0;
    for j in 0..n {
        t = t + a[j] - m;
    }
    t
}
fn both_fail(a: [f64], b: [f64]) -> f64 {
    let n = len(a);
    let mut s = 0.0;
    for i in 0..n {
        s = s + b[i];
    }
    let mut t = 0.0;
    for j in 0..n {
        t = t + b[j + 1];
    }
    s + t
}
fn writes_param(a: [f64], b: [f64]) -> f64 {
    let n = len(a);
    let mut s = 0.0;
    for i in 0..n {
        s = s + b[i];
    }
    for j in 0..n {
        a[j] = a[j] + 1.0;
    }
    s
}
fn may_alias(a: [f64], b: [f64]) -> f64 {
    let n = len(a);
    for i in 0..n {
        a[i] = a[i] + 1.0;
    }
    let mut s = 0.0;
    for j in 0..n {
        b[j] = b[j] * 2.0;
    }
    s
}
"#;

    /// The number of fusions of each function of [`SURFACE`].
    const FUSED: &[(&str, usize)] = &[
        ("map_sum", 1),
        ("unproven", 1),
        ("three", 2),
        ("lens", 1),
        ("cond_store", 1),
        ("lens_differ", 0),
        ("bounds_differ", 0),
        ("ahead", 0),
        ("uses_first", 0),
        ("both_fail", 0),
        ("writes_param", 0),
        ("may_alias", 0),
    ];

    fn module() -> Module {
        irad_ir::surface::compile(SURFACE).expect("the program compiles")
    }

    /// `@name` of `m` fused: the module with it replaced, asserting that it
    /// verifies, and the number of fusions.
    fn fused(m: &Module, name: &str) -> (Module, usize) {
        let fid = m.by_name(name).expect("the function");
        let (out, n) = fuse(&m[fid], None);
        let mut m2 = m.clone();
        if let Some(inl) = out {
            m2[fid] = inl.func;
        }
        if let Err(e) = irad_ir::verify::verify_func(&m2, fid) {
            panic!(
                "@{name} fused does not verify: {e:?}\n{}",
                irad_ir::text::print_func(&m2, fid)
            );
        }
        (m2, n)
    }

    fn loads(func: &Func) -> usize {
        func.layout
            .iter()
            .flat_map(|&b| &func.blocks[b].insts)
            .filter(|&&i| {
                matches!(
                    func.insts[i].kind,
                    InstKind::Prim {
                        prim: Prim::Arrayref,
                        ..
                    }
                )
            })
            .count()
    }

    #[test]
    fn the_loops_meant_to_fuse_do_and_near_misses_do_not() {
        let m = module();
        for &(name, want) in FUSED {
            assert_eq!(fused(&m, name).1, want, "@{name}");
            let fid = m.by_name(name).expect("the function");
            assert_eq!(count(&m[fid]), want, "@{name}");
        }
    }

    /// Loads forwarded: both of `map_sum`'s `c[j]`; none of `cond_store`'s,
    /// whose store runs only on some iterations; `three`'s `c[j]` (its
    /// third loop reads `a` only, which no loop writes).
    #[test]
    fn only_loads_after_a_store_on_every_iteration_are_forwarded() {
        let m = module();
        for (name, want) in [("map_sum", 2), ("cond_store", 0), ("three", 1)] {
            let fid = m.by_name(name).expect("the function");
            let (m2, _) = fused(&m, name);
            assert_eq!(loads(&m[fid]) - loads(&m2[fid]), want, "@{name}");
        }
    }

    #[test]
    fn the_mixture_objectives_inner_loops_fuse_and_forward() {
        let text = include_str!("../../../benches/programs/gmm.irad");
        let m = irad_ir::surface::compile(text).expect("the program compiles");
        let (m2, n) = fused(&m, "gmm");
        assert_eq!(n, 1);
        let fid = m.by_name("gmm").expect("gmm");
        // diff[j] * diff[j] reads the stored value twice.
        assert_eq!(loads(&m[fid]) - loads(&m2[fid]), 2);
        // One innermost loop fewer.
        let inner = |f: &Func| {
            let cfg = ControlFlowGraph::with_function(f);
            let dom = DominatorTree::with_cfg(&cfg);
            let la = LoopAnalysis::compute(&cfg, &dom);
            counted_loops(f, &cfg, &la).len()
        };
        assert_eq!(inner(&m[fid]) - inner(&m2[fid]), 1);
        // logsumexp's second loop uses the first's maximum.
        assert_eq!(fused(&m, "logsumexp").1, 0);
        // And the fused loop is versioned as one.
        let (inl, unchecked) = version::version(&m2[fid], None);
        assert!(inl.is_some());
        // invs[c * d + j] of the logdet loop and of the fused loop: both
        // loops versioned, as the logdet loop and the diff loop were.
        assert_eq!(unchecked.len(), 2);
    }

    fn arr(xs: &[f64]) -> Val {
        Val::f64_array(xs.to_vec())
    }

    fn floats(v: &Val) -> Vec<f64> {
        match v {
            Val::Array(a) => match &*a.0.borrow() {
                irad_ir::interp::value::ArrayData::F64(xs) => xs.clone(),
                _ => Vec::new(),
            },
            _ => Vec::new(),
        }
    }

    /// The fused functions, run by the interpreter, give the same values
    /// bit for bit, fail where the originals fail, and leave the same
    /// arrays, on every length from 0 to 6 and with `b` shorter than `a`.
    #[test]
    fn fused_functions_compute_the_same() {
        let m = module();
        let opts = RunOptions::default();
        let mut runs = 0;
        for &(name, _) in FUSED {
            let (m2, _) = fused(&m, name);
            let fid = m.by_name(name).expect("the function");
            for n in 0..7usize {
                for short in [0, 1] {
                    let a: Vec<f64> = (0..n).map(|k| 0.3 * k as f64 - 0.7).collect();
                    let b: Vec<f64> = (0..n + 1 - short).map(|k| 1.1 - 0.2 * k as f64).collect();
                    let args = |_: ()| -> Vec<Val> {
                        m[fid]
                            .param_types()
                            .iter()
                            .enumerate()
                            .map(|(k, _)| if k == 0 { arr(&a) } else { arr(&b) })
                            .collect()
                    };
                    let (a1, a2) = (args(()), args(()));
                    let want = run(&m, fid, &a1, &opts);
                    let got = run(&m2, fid, &a2, &opts);
                    match (&want, &got) {
                        (Ok(w), Ok(g)) => assert!(w.same(g), "@{name} n={n}: {w:?} {g:?}"),
                        (Err(w), Err(g)) => assert_eq!(
                            w.msg.split(':').next(),
                            g.msg.split(':').next(),
                            "@{name} n={n}"
                        ),
                        _ => panic!("@{name} n={n}: {want:?} against {got:?}"),
                    }
                    for (x, y) in a1.iter().zip(&a2) {
                        let (x, y) = (floats(x), floats(y));
                        assert!(
                            x.iter().zip(&y).all(|(p, q)| p.to_bits() == q.to_bits()),
                            "@{name} n={n}: {x:?} {y:?}"
                        );
                    }
                    runs += 1;
                }
            }
        }
        assert_eq!(runs, FUSED.len() * 14);
    }
}
