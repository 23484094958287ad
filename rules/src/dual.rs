//! The reverse rules of the primitives a dense forward rule is made of,
//! beyond ordinary arithmetic: `dual(p, t1, ..., tN)`, `primal(d)`,
//! `tangent(d, k)` and `frule(f, N)`. With them reverse mode applies to
//! `@f.fwd` (reverse over forward: docs/reverse.md, "Reverse over
//! forward"); the tangent arithmetic a forward rule does is ordinary f64 and
//! array work on the projected parts, whose rrules are the usual ones.
//!
//! Reverse mode sees a dense `dual<T, N>` as the tuple of its parts `(T, T',
//! ..., T')` (`irad_ir::Type::dual_parts`): its cotangent leaves and shadows
//! are the primal's followed by each tangent's, in lane order
//! (`Type::cotangent_leaves`). So:
//! - `dual(p, t...)` passes the parts' shadows on in order and splits its
//!   cotangent among the parts, like `tuple`;
//! - `primal(d)` and `tangent(d, k)` take the part's slice of the shadows
//!   and give the dual the cotangent of that part (zero elsewhere), like
//!   `getfield`;
//! - `frule(f, N)` gives a function value, which has no cotangent: its rule
//!   is the primal statement (a call through the rule it gives is a call
//!   through a function value, whose pieces reverse mode looks up at run
//!   time).
//!
//! Their forward rules (forward over forward: docs/forward.md, "Forward over
//! forward") see a dense `dual<T, N>` the same way, as the tuple of its
//! parts, and pack the parts' tangents as a dual again: the tangent of a
//! `dual<T, N>` is a `dual<T', N>` (`irad_ir::Type::tangent`). The three are
//! linear, so each rule applies the primitive to the tangents:
//! - `dual(p, t...)` has the tangent `dual(p', t'...)` per outer lane (a zero
//!   of the part's tangent type for a part without a tangent);
//! - `primal(d)` has `primal(d')`, `tangent(d, k)` has `tangent(d', k)`;
//! - `frule(f, N)` gives a function value: the primal statement.
//!
//! Assumes calls shaped as the reverse transform makes them (argument types
//! as the primitive's signature says, one shadow per `[f64]` array of a
//! part). Guarantees: no statement is emitted except the primal (the parts
//! move, nothing is computed), nothing is saved but the constant lane
//! index; a call of another shape (a sparse dual, a lane that is not a
//! constant, sparse outer lanes) is a [`RuleError`], never a panic. `irad
//! test-rules` checks the frules with finite differences and the rrules
//! with the adjoint identity against them.

use crate::emit::{self, Tangents, value};
use crate::rrules::{arity, no_cotangents};
use crate::{
    FruleCall, FwdOut, PullbackCall, PullbackOut, Registry, RevCall, RevFwdOut, RruleFns, RuleError,
};
use irad_ir::{Const, FuncBuilder, Operand, Prim, Type};
use smallvec::{SmallVec, smallvec};

/// Registers the frules and rrules of `dual`, `primal`, `tangent` and
/// `frule`.
pub(crate) fn install(reg: &mut Registry) {
    reg.register_frule(Prim::Dual, None, dual_frule);
    for prim in [Prim::Primal, Prim::Tangent] {
        reg.register_frule(
            prim,
            None,
            move |b: &mut FuncBuilder<'_>, call: &FruleCall<'_>| part_frule(b, call, prim),
        );
    }
    reg.register_frule(
        Prim::Frule,
        None,
        |b: &mut FuncBuilder<'_>, call: &FruleCall<'_>| emit::primal_only(b, Prim::Frule, call),
    );
    reg.register_rrule(Prim::Dual, None, RruleFns::new(dual_fwd, dual_back));
    for prim in [Prim::Primal, Prim::Tangent] {
        reg.register_rrule(
            prim,
            None,
            RruleFns::new(
                move |b, call| part_fwd(b, call, prim),
                move |_, call| part_back(call, prim),
            ),
        );
    }
    reg.register_rrule(
        Prim::Frule,
        None,
        RruleFns::new(
            |b, call| {
                let args: SmallVec<[Operand; 2]> = call.args.iter().map(|a| a.primal).collect();
                let f = value(b, Prim::Frule, &args)?;
                Ok(RevFwdOut {
                    primal: f,
                    shadows: SmallVec::new(),
                    saved: SmallVec::new(),
                })
            },
            |_, call| Ok(no_cotangents(call)),
        ),
    );
}

/// Checks the outer lanes: any dense width, or sparse mode over a dense
/// dual (whose sparse tangent is a dual of handles, `dual<S, N>`); a sparse
/// dual in sparse mode (handles of handles) is refused.
fn dense_outer(call: &FruleCall<'_>) -> Result<(), RuleError> {
    if call.lanes.is_sparse() && call.args.iter().any(|a| a.ty.mentions_sparse()) {
        return Err(RuleError::Unsupported(format!(
            "`{}` of sparse tangents in sparse forward mode: forward mode over a sparse rule takes dense lanes",
            call.callee
        )));
    }
    emit::check_width(call)
}

/// `dual(p, t...)`: per outer lane, the dual of the parts' tangents (zero
/// ones for parts without a tangent); no tangents when no part has one and
/// the dual holds no array.
fn dual_frule(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    dense_outer(call)?;
    let args: SmallVec<[Operand; 4]> = call.args.iter().map(|a| a.primal).collect();
    let d = value(b, Prim::Dual, &args)?;
    if call.args.iter().all(|a| a.tangents.is_none()) && !emit::contains_array(call.result) {
        return Ok(FwdOut {
            primal: d,
            tangents: None,
        });
    }
    let mut tangents = Tangents::with_capacity(call.lanes.count());
    for k in emit::lanes(call) {
        let mut parts: SmallVec<[Operand; 4]> = SmallVec::with_capacity(call.args.len());
        for a in call.args {
            let t = emit::tangent_or_zero(b, a, k, call.lanes)?.ok_or_else(|| {
                RuleError::Unsupported(format!("a part of type {} has no tangent", a.ty))
            })?;
            parts.push(t);
        }
        tangents.push(value(b, Prim::Dual, &parts)?);
    }
    Ok(FwdOut {
        primal: d,
        tangents: Some(tangents),
    })
}

/// `primal(d)`, `tangent(d, k)`: the same projection of each outer lane's
/// tangent of `d` (itself a dual); no tangents when `d` has none and the
/// part holds no array, zero ones when it does.
fn part_frule(
    b: &mut FuncBuilder<'_>,
    call: &FruleCall<'_>,
    prim: Prim,
) -> Result<FwdOut, RuleError> {
    dense_outer(call)?;
    let args: SmallVec<[Operand; 2]> = call.args.iter().map(|a| a.primal).collect();
    part_of(prim, &args)?;
    let z = value(b, prim, &args)?;
    let d = call.args.first().ok_or_else(|| arity(prim))?;
    let tangents = match &d.tangents {
        Some(ts) => {
            let mut out = Tangents::with_capacity(ts.len());
            for &t in ts {
                let mut ops: SmallVec<[Operand; 2]> = smallvec![t];
                ops.extend(args.iter().skip(1).copied());
                out.push(value(b, prim, &ops)?);
            }
            Some(out)
        }
        None if emit::contains_array(call.result) => {
            emit::zero_tangents(b, call.result, z, call.lanes)?
        }
        None => None,
    };
    Ok(FwdOut {
        primal: z,
        tangents,
    })
}

/// Which part of a dual each leaf of the dual's type belongs to: where part
/// `part` (0 the primal, k + 1 the tangent of lane k) starts among the
/// dual's leaves counted by `count`, and how many it has.
fn dual_part_leaves(
    ty: &Type,
    part: usize,
    count: fn(&Type) -> usize,
) -> Result<(usize, usize), RuleError> {
    let (inner, _, lanes) = ty
        .dual_parts()
        .ok_or_else(|| RuleError::Unsupported(format!("reverse mode of a part of a {ty}")))?;
    if part > lanes {
        return Err(RuleError::Unsupported(format!(
            "part {part} of a {ty}, which has {lanes} lane(s)"
        )));
    }
    let n = count(inner);
    Ok((part * n, n))
}

/// `dual(p, t...)`: the parts' shadows in order.
fn dual_fwd(b: &mut FuncBuilder<'_>, call: &RevCall<'_>) -> Result<RevFwdOut, RuleError> {
    let args: SmallVec<[Operand; 4]> = call.args.iter().map(|a| a.primal).collect();
    let d = value(b, Prim::Dual, &args)?;
    let shadows = call
        .args
        .iter()
        .flat_map(|a| a.shadows.iter().copied())
        .collect();
    Ok(RevFwdOut {
        primal: d,
        shadows,
        saved: SmallVec::new(),
    })
}

/// Each part gets its slice of `dy`; no statements.
fn dual_back(_: &mut FuncBuilder<'_>, call: &PullbackCall<'_>) -> Result<PullbackOut, RuleError> {
    let mut rest = call.dy;
    let mut cotangents = SmallVec::with_capacity(call.arg_types.len());
    for ty in call.arg_types {
        let n = Type::cotangent_leaves(ty);
        let Some((mine, tail)) = rest.split_at_checked(n) else {
            return Err(short(Prim::Dual));
        };
        cotangents.push(mine.iter().copied().collect());
        rest = tail;
    }
    Ok(PullbackOut { cotangents })
}

/// The part a `primal` or `tangent` call takes: 0 for `primal(d)`, k + 1
/// for `tangent(d, k)` (k a constant).
fn part_of(prim: Prim, args: &[Operand]) -> Result<usize, RuleError> {
    match (prim, args) {
        (Prim::Primal, [_]) => Ok(0),
        (Prim::Tangent, [_, Operand::Const(Const::I64(k))]) => usize::try_from(*k)
            .ok()
            .and_then(|k| k.checked_add(1))
            .ok_or_else(|| RuleError::Unsupported(format!("tangent lane {k}"))),
        (Prim::Tangent, [_, _]) => Err(RuleError::Unsupported(
            "`tangent` needs a constant lane".into(),
        )),
        _ => Err(arity(prim)),
    }
}

/// `primal(d)`, `tangent(d, k)`: the part's slice of the dual's shadows.
fn part_fwd(
    b: &mut FuncBuilder<'_>,
    call: &RevCall<'_>,
    prim: Prim,
) -> Result<RevFwdOut, RuleError> {
    let args: SmallVec<[Operand; 2]> = call.args.iter().map(|a| a.primal).collect();
    let part = part_of(prim, &args)?;
    let d = call.args.first().ok_or_else(|| arity(prim))?;
    let (start, n) = dual_part_leaves(&d.ty, part, Type::shadow_leaves)?;
    let shadows = d
        .shadows
        .get(start..start + n)
        .ok_or_else(|| RuleError::Unsupported(format!("`{prim}`: too few shadows")))?
        .iter()
        .copied()
        .collect();
    let z = value(b, prim, &args)?;
    Ok(RevFwdOut {
        primal: z,
        shadows,
        saved: args.get(1).copied().into_iter().collect(),
    })
}

/// The dual's cotangent is `dy` in the part's slice, zero elsewhere.
fn part_back(call: &PullbackCall<'_>, prim: Prim) -> Result<PullbackOut, RuleError> {
    let ty = call.arg_types.first().ok_or_else(|| arity(prim))?;
    let mut args: SmallVec<[Operand; 2]> = smallvec![emit::unit()];
    args.extend(call.saved.iter().copied());
    let part = part_of(prim, &args)?;
    let (start, n) = dual_part_leaves(ty, part, Type::cotangent_leaves)?;
    if call.dy.len() != n {
        return Err(short(prim));
    }
    let mut dd: crate::Cotangents = smallvec![None; Type::cotangent_leaves(ty)];
    dd[start..start + n].copy_from_slice(call.dy);
    let mut cotangents: SmallVec<[_; 3]> = smallvec![dd];
    if prim == Prim::Tangent {
        cotangents.push(SmallVec::new());
    }
    Ok(PullbackOut { cotangents })
}

fn short(prim: Prim) -> RuleError {
    RuleError::Unsupported(format!(
        "the pullback of `{prim}` got fewer saved values or cotangents than its forward part gives"
    ))
}
