//! Array accesses whose index is proven in range, so that lowering needs no
//! bounds check for them (docs/codegen.md, "Bounds checks").
//!
//! Facts. A *counted loop* is a loop whose header has two predecessors (one
//! outside, one latch inside), an `i64` phi `i` entered with a constant
//! `k0 >= 0` and stepped by `iadd(i, 1)` on the latch, and a header that
//! leaves the loop by `gotoifnot lt(i, B), #exit` (falling through into the
//! loop), `B` any value. In every block of the loop dominated by the
//! fall-through block, `0 <= i < B`: `i` starts at `k0 >= 0`, only grows by
//! one, and only after a check passed, so it cannot wrap.
//!
//! Lengths. A value `L` *is the length of* array `a` when it is `length(a)`,
//! or `a` is `alloc(L)` or `zeros(L)` (or of `N`, with `L` and `N` both
//! `length(b)` of one array `b`), or `a` is `copy(b)` and `L` is the
//! length of `b`. An array's length never changes.
//!
//! Proven, for `arrayref`/`arrayset` of array `a` at index `x` in a block
//! where the facts `0 <= i < B` (and `0 <= j < D`) hold:
//! 1. `x` is `i + d` with a constant `d >= 0`, and `B` is a length of `a`
//!    (then `d = 0`) or `isub(L, k)` with `L` a length of `a` and `d <= k`:
//!    `0 <= i + d < L`.
//! 2. `x` is `iadd(imul(i, D), j)` (either operand order in each), `j`'s
//!    bound is that same value `D`, and `i`'s bound `B` is `idiv(L, D)` or
//!    `D` is `idiv(L, B)`, with `L` a length of `a`. The loops ran, so
//!    `B >= 1` and `D >= 1`; with `L >= 0` the division is the floor, so
//!    `B * D <= L`, and `0 <= i * D + j <= (B - 1) * D + D - 1 < L`. Every
//!    intermediate value lies in `[0, L)`, so the wrapping `imul` and `iadd`
//!    do not wrap.
//!
//! `alloc(imul(B, D))` is not taken as a proof of `B * D <= L`: the product
//! wraps when `B * D >= 2^64`, which two long enough argument arrays allow.
//!
//! Assumes a verified function. Guarantees: every statement returned is an
//! `arrayref` or `arrayset` whose index is in range on every run; anything
//! not matching these patterns exactly is left checked.

use irad_ir::entity::SecondaryMap;
use irad_ir::flow::{ControlFlowGraph, DominatorTree, LoopAnalysis};
use irad_ir::{Const, Func, Inst, InstKind, Operand, Prim, Terminator, Value, ValueDef};
use rustc_hash::FxHashSet as HashSet;
use smallvec::SmallVec;

/// A counted loop's fact: in the blocks of `lp` that `body` dominates,
/// `0 <= iv < bound`.
pub(super) struct Counted {
    pub(super) iv: Value,
    pub(super) bound: Value,
    pub(super) body: irad_ir::Block,
    pub(super) lp: irad_ir::flow::Loop,
}

/// The accesses of `func` proven in range.
pub(super) fn in_range(func: &Func) -> HashSet<Inst> {
    let mut out = HashSet::default();
    let cfg = ControlFlowGraph::with_function(func);
    let dom = DominatorTree::with_cfg(&cfg);
    let la = LoopAnalysis::compute(&cfg, &dom);
    let ranges = Ranges::new(func, &cfg, &la);
    for (blk, _) in func.blocks.iter() {
        ranges.proven_in(func, (&dom, &la), blk, &mut out);
    }
    out
}

/// The counted loops of a function, by loop, for proofs block by block:
/// [`in_range`] of every block, or of the blocks of one loop (loop
/// versioning asks of the loops it considers only, with the control-flow
/// analyses it made itself).
pub(super) struct Ranges {
    counted: Vec<Counted>,
    /// A block's facts come from the loops that hold it (its innermost and
    /// their parents), not from a test of every counted loop at every block
    /// (quadratic in the loops of a function).
    by_loop: SecondaryMap<irad_ir::flow::Loop, Vec<usize>>,
}

impl Ranges {
    /// The counted loops of `func`, whose loops are `la`.
    pub(super) fn new(func: &Func, cfg: &ControlFlowGraph, la: &LoopAnalysis) -> Ranges {
        let counted = counted_loops(func, cfg, la);
        let mut by_loop: SecondaryMap<irad_ir::flow::Loop, Vec<usize>> = SecondaryMap::new();
        for (k, c) in counted.iter().enumerate() {
            by_loop.get_mut(c.lp).push(k);
        }
        Ranges { counted, by_loop }
    }

    /// Adds to `out` the accesses of block `blk` proven in range, with the
    /// dominator tree and loops of the function `self` was made for.
    pub(super) fn proven_in(
        &self,
        func: &Func,
        (dom, la): (&DominatorTree, &LoopAnalysis),
        blk: irad_ir::Block,
        out: &mut HashSet<Inst>,
    ) {
        if self.counted.is_empty() {
            return;
        }
        let counted = &self.counted;
        let mut found: SmallVec<[usize; 4]> = SmallVec::new();
        let mut lp = la.innermost(blk);
        while let Some(l) = lp {
            found.extend(
                self.by_loop[l]
                    .iter()
                    .copied()
                    .filter(|&k| dom.dominates(counted[k].body, blk)),
            );
            lp = la.parent(l);
        }
        // In the order of `counted`, as when every loop was tested.
        found.sort_unstable();
        let facts: SmallVec<[(Value, Value); 4]> = found
            .iter()
            .map(|&k| (counted[k].iv, counted[k].bound))
            .collect();
        if facts.is_empty() {
            return;
        }
        for &inst in &func.blocks[blk].insts {
            if let InstKind::Prim {
                prim: Prim::Arrayref | Prim::Arrayset,
                args,
            } = &func.insts[inst].kind
                && let (Some(Operand::Value(a)), Some(idx)) = (args.first(), args.get(1))
                && proven(func, &facts, *a, idx)
            {
                out.insert(inst);
            }
        }
    }
}

/// The counted loops of `func` (module header).
pub(super) fn counted_loops(
    func: &Func,
    cfg: &ControlFlowGraph,
    la: &LoopAnalysis,
) -> Vec<Counted> {
    let mut out = Vec::new();
    for lp in la.loops() {
        let h = la.header(lp);
        let [p0, p1] = cfg.preds(h) else { continue };
        let latch = match (la.contains(lp, *p0), la.contains(lp, *p1)) {
            (false, true) => *p1,
            (true, false) => *p0,
            _ => continue,
        };
        let Some(Terminator::GotoIfNot {
            cond: Operand::Value(c),
            target,
        }) = &func.blocks[h].term
        else {
            continue;
        };
        let Some(body) = cfg.next_in_layout(h) else {
            continue;
        };
        if la.contains(lp, *target) || !la.contains(lp, body) {
            continue;
        }
        let Some([iv, bound]) = prim_values(func, *c, Prim::Lt) else {
            continue;
        };
        if counts_up_from_nonnegative(func, h, iv, latch) {
            out.push(Counted {
                iv,
                bound,
                body,
                lp,
            });
        }
    }
    out
}

/// The two value operands of `v` when it is `prim(x, y)`.
fn prim_values(func: &Func, v: Value, prim: Prim) -> Option<[Value; 2]> {
    match func.def_kind(v)? {
        InstKind::Prim { prim: p, args } if *p == prim => match args.as_slice() {
            [Operand::Value(x), Operand::Value(y)] => Some([*x, *y]),
            _ => None,
        },
        _ => None,
    }
}

/// Whether `l` is a length of array `a` (module header).
fn is_length(func: &Func, l: Value, a: Value) -> bool {
    let mut a = a;
    // copy(copy(...)) chains are short; the bound keeps a malformed one finite.
    for _ in 0..16 {
        if let Some(InstKind::Prim {
            prim: Prim::Length,
            args,
        }) = func.def_kind(l)
            && args.as_slice() == [Operand::Value(a)]
        {
            return true;
        }
        match func.def_kind(a) {
            Some(InstKind::Prim {
                prim: Prim::Alloc | Prim::Zeros,
                args,
            }) => {
                return match args.as_slice() {
                    [Operand::Value(n)] => *n == l || same_length(func, *n, l),
                    _ => false,
                };
            }
            Some(InstKind::Prim {
                prim: Prim::Copy,
                args,
            }) => match args.as_slice() {
                [Operand::Value(b)] => a = *b,
                _ => return false,
            },
            _ => return false,
        }
    }
    false
}

/// Whether `x` and `y` are both `length(b)` of one array `b` (the front end
/// computes `len(a)` afresh at each use).
fn same_length(func: &Func, x: Value, y: Value) -> bool {
    let of = |v: Value| match func.def_kind(v) {
        Some(InstKind::Prim {
            prim: Prim::Length,
            args,
        }) => args.first().copied(),
        _ => None,
    };
    matches!((of(x), of(y)), (Some(p), Some(q)) if p == q)
}

/// Whether index `idx` of array `a` is in range under `facts` (pairs
/// `(i, B)`: `0 <= i < B`), by the rules of the module header.
fn proven(func: &Func, facts: &[(Value, Value)], a: Value, idx: &Operand) -> bool {
    let Operand::Value(x) = idx else {
        return false;
    };
    let bound = |v: Value| facts.iter().find(|f| f.0 == v).map(|f| f.1);
    // Rule 1: i + d under i < length(a) - k, d <= k.
    for &(iv, b) in facts {
        if let Some(d) = offset(func, idx, iv) {
            let covered = (d == 0 && is_length(func, b, a))
                || matches!(func.def_kind(b), Some(InstKind::Prim { prim: Prim::Isub, args })
                    if matches!(args.as_slice(), [Operand::Value(l), Operand::Const(Const::I64(k))]
                        if *k >= d && is_length(func, *l, a)));
            if covered {
                return true;
            }
        }
    }
    // Rule 2: i * D + j under i < B, j < D, B * D <= length(a).
    let Some([s, t]) = prim_values(func, *x, Prim::Iadd) else {
        return false;
    };
    for (p, j) in [(s, t), (t, s)] {
        let (Some([u, w]), Some(dj)) = (prim_values(func, p, Prim::Imul), bound(j)) else {
            continue;
        };
        for (i, d) in [(u, w), (w, u)] {
            if d != dj {
                continue;
            }
            let Some(b) = bound(i) else { continue };
            let floor_of_length = |q: Value, by: Value| {
                prim_values(func, q, Prim::Idiv)
                    .is_some_and(|[l, den]| den == by && is_length(func, l, a))
            };
            if floor_of_length(b, d) || floor_of_length(d, b) {
                return true;
            }
        }
    }
    false
}

/// Whether `iv` is a phi of header `h` entered with a constant `>= 0` from
/// outside and with `iadd(iv, 1)` from `latch`, and nothing else.
fn counts_up_from_nonnegative(
    func: &Func,
    h: irad_ir::Block,
    iv: Value,
    latch: irad_ir::Block,
) -> bool {
    let Some(ValueDef::Inst(inst)) = func.values.get(iv).map(|d| d.def) else {
        return false;
    };
    if !func.blocks[h].insts.contains(&inst) {
        return false;
    }
    let Some(InstKind::Phi { entries }) = func.insts.get(inst).map(|d| &d.kind) else {
        return false;
    };
    if entries.len() != 2 {
        return false;
    }
    entries.iter().all(|(from, op)| {
        if *from == latch {
            matches!(op, Operand::Value(n) if offset(func, &Operand::Value(*n), iv) == Some(1))
        } else {
            matches!(op, Operand::Const(Const::I64(k0)) if *k0 >= 0)
        }
    })
}

/// `d` when `idx` is `iv + d` with a constant `d >= 0`.
fn offset(func: &Func, idx: &Operand, iv: Value) -> Option<i64> {
    let Operand::Value(x) = idx else {
        return None;
    };
    func.const_offset(*x, iv).filter(|&d| d >= 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many accesses of `@name` in the surface program `text` are proven.
    fn proven(text: &str, name: &str) -> usize {
        let m = irad_ir::surface::compile(text).expect("the program compiles");
        let f = m.by_name(name).expect("the function");
        in_range(&m[f]).len()
    }

    /// The benchmark programs' accesses, counted on the front end's IR:
    /// all of the mixture objective's but the two reads of `invs` (whose
    /// length the loops do not bound), all of rosenbrock's and of the
    /// log-sum-exp helper's.
    #[test]
    fn the_benchmark_programs_accesses() {
        let cases = [
            ("gmm", "gmm", 9, 11),
            ("gmm", "logsumexp", 2, 2),
            ("rosenbrock", "rosenbrock", 4, 4),
        ];
        for (file, f, want, of) in cases {
            let path = format!(
                "{}/../benches/programs/{file}.irad",
                env!("CARGO_MANIFEST_DIR")
            );
            let text = std::fs::read_to_string(&path).expect("the benchmark program");
            let m = irad_ir::surface::compile(&text).expect("the program compiles");
            let func = &m[m.by_name(f).expect("the function")];
            let accesses = func
                .insts
                .iter()
                .filter(|(_, d)| {
                    matches!(
                        &d.kind,
                        InstKind::Prim {
                            prim: Prim::Arrayref | Prim::Arrayset,
                            ..
                        }
                    )
                })
                .count();
            assert_eq!(
                (in_range(func).len(), accesses),
                (want, of),
                "@{f} of {file}"
            );
        }
    }

    #[test]
    fn reads_covered_by_the_loop_bound_are_proven_and_near_misses_are_not() {
        let text = include_str!("../../../tests/filetests/surface/bounds_proven.irad");
        assert_eq!(proven(text, "pairs"), 2);
        // y[i] is proven, x[i] (another array) is not.
        assert_eq!(proven(text, "scaled"), 1);
        // x[i * d + j] under i < len(x) / d, j < d.
        assert_eq!(proven(text, "grid"), 1);
        // mu[d * c + j] with d = len(mu) / k, and t[j] read and written
        // twice (t = alloc(d)).
        assert_eq!(proven(text, "rows"), 4);
        for f in [
            "too_far",
            "from_minus_one",
            "after",
            "by_two",
            "swapped",
            "grid_plus_one",
            "product",
        ] {
            assert_eq!(proven(text, f), 0, "{f}");
        }
    }
}
