//! Array accesses whose index is proven in range, so that lowering needs no
//! bounds check for them (docs/codegen.md, "Bounds checks").
//!
//! The one pattern proven: a loop whose header has two predecessors (one
//! outside, one latch inside), an `i64` phi `i` entered with a constant
//! `k0 >= 0` and stepped by `iadd(i, 1)` on the latch, and a header that
//! leaves the loop by `gotoifnot lt(i, B), #exit` (falling through into the
//! loop) where `B` is `length(a)` or `isub(length(a), k)` with a constant
//! `k >= 0`. In every block of the loop dominated by the fall-through block,
//! `arrayref`/`arrayset` of that same array value `a` at index `i` or
//! `iadd(i, k')` with `0 <= k' <= k` is in range: `0 <= k0 <= i` (it only
//! grows by one, and only after a check passed, so it cannot wrap) and
//! `i + k' <= i + k < length(a)`. An array's length never changes, and `a`,
//! used by the header, is the same value in the loop's blocks.
//!
//! Assumes a verified function. Guarantees: every statement returned is an
//! `arrayref` or `arrayset` whose index is in range on every run; anything
//! not matching the pattern exactly is left checked.

use irad_ir::flow::{ControlFlowGraph, DominatorTree, LoopAnalysis};
use irad_ir::{Const, Func, Inst, InstKind, Operand, Prim, Terminator, Value, ValueDef};
use std::collections::HashSet;

/// The accesses of `func` proven in range.
pub(super) fn in_range(func: &Func) -> HashSet<Inst> {
    let mut out = HashSet::new();
    let cfg = ControlFlowGraph::with_function(func);
    let dom = DominatorTree::with_cfg(&cfg);
    let la = LoopAnalysis::compute(&cfg, &dom);
    for lp in la.loops() {
        let h = la.header(lp);
        let preds = cfg.preds(h);
        let [p0, p1] = preds else { continue };
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
        let Some(body) = func.next_in_layout(h) else {
            continue;
        };
        if la.contains(lp, *target) || !la.contains(lp, body) {
            continue;
        }
        let Some((iv, a, k)) = guard(func, *c) else {
            continue;
        };
        if !counts_up_from_nonnegative(func, h, iv, latch) {
            continue;
        }
        for &blk in la.blocks(lp) {
            if !dom.dominates(body, blk) {
                continue;
            }
            for &inst in &func.blocks[blk].insts {
                if let InstKind::Prim {
                    prim: Prim::Arrayref | Prim::Arrayset,
                    args,
                } = &func.insts[inst].kind
                    && args.first() == Some(&Operand::Value(a))
                    && args
                        .get(1)
                        .is_some_and(|idx| offset(func, idx, iv).is_some_and(|d| d <= k))
                {
                    out.insert(inst);
                }
            }
        }
    }
    out
}

/// `c` is `lt(i, B)` with `B` `length(a)` or `isub(length(a), k)`, `k >= 0`:
/// `(i, a, k)`.
fn guard(func: &Func, c: Value) -> Option<(Value, Value, i64)> {
    let InstKind::Prim {
        prim: Prim::Lt,
        args,
    } = func.def_kind(c)?
    else {
        return None;
    };
    let [Operand::Value(i), Operand::Value(b)] = args.as_slice() else {
        return None;
    };
    let length_of = |v: Value| match func.def_kind(v)? {
        InstKind::Prim {
            prim: Prim::Length,
            args,
        } => match args.as_slice() {
            [Operand::Value(a)] => Some(*a),
            _ => None,
        },
        _ => None,
    };
    if let Some(a) = length_of(*b) {
        return Some((*i, a, 0));
    }
    match func.def_kind(*b)? {
        InstKind::Prim {
            prim: Prim::Isub,
            args,
        } => match args.as_slice() {
            [Operand::Value(l), Operand::Const(Const::I64(k))] if *k >= 0 => {
                Some((*i, length_of(*l)?, *k))
            }
            _ => None,
        },
        _ => None,
    }
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

    #[test]
    fn reads_covered_by_the_loop_bound_are_proven_and_near_misses_are_not() {
        let text = include_str!("../../../tests/filetests/surface/bounds_proven.irad");
        assert_eq!(proven(text, "pairs"), 2);
        // y[i] is proven, x[i] (another array) is not.
        assert_eq!(proven(text, "scaled"), 1);
        for f in ["too_far", "from_minus_one", "after", "by_two"] {
            assert_eq!(proven(text, f), 0, "{f}");
        }
    }
}
