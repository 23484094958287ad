//! The rules of the bulk array primitives (`sum dot axpy scale matvec matmul
//! fill copyto`): whole-array work in both modes, never a statement per
//! element where a bulk primitive does the job (docs/rules.md, "Bulk array
//! primitives").
//!
//! Assumes calls shaped as the transforms make them: `[f64]` operands with
//! one tangent array per lane (forward) or one shadow (reverse). A call of
//! another shape is a [`RuleError`], never a panic.
//!
//! Guarantees:
//! - forward rules run the primal statement first (so shapes are checked and
//!   errors are the primitive's), then one or two bulk statements per lane
//!   on the tangent arrays, which have the primal arrays' lengths. `scale` is
//!   the exception: its lanes read the array before the primal scales it in
//!   place, so the primal comes last (`scale` never fails). In sparse
//!   forward mode the tangents are `[sparse]` arrays of handles and the
//!   rules are `crate::bulk_sparse`'s;
//! - reverse rules save array operands by reference (the reverse transform
//!   restores every array before the pullback of an earlier statement runs)
//!   and copy an output before overwriting it; the pullback adds the
//!   cotangents with bulk primitives (matmul's is two `gemm`s), clears the
//!   output's shadow where the output was overwritten, and copies the old
//!   contents back, so every array is as before the forward part, bit for
//!   bit. `sum`'s pullback is a loop adding `dy` to each element of the
//!   shadow;
//! - nothing is computed for an operand whose cotangent is not wanted
//!   ([`crate::RevArg::active`] false: a constant, an inactive value, or an
//!   array whose class activity analysis found not both varied and useful,
//!   such as input data that is not differentiated): a matrix product is
//!   skipped for it.

use crate::emit::{self, Tangents, f64c, value};
use crate::rrules::{arity, no_cotangents};
use crate::{
    FruleCall, FwdArg, FwdOut, PullbackCall, PullbackOut, Registry, RevCall, RevFwdOut, RruleFns,
    RuleError,
};
use emit::effect;
use irad_ir::{Const, FuncBuilder, Operand, Prim};
use smallvec::{SmallVec, smallvec};

/// The bulk primitives with both rules (`gemm` is the rules' own and has an
/// frule only).
const PRIMS: [Prim; 8] = [
    Prim::Sum,
    Prim::Dot,
    Prim::Axpy,
    Prim::Scale,
    Prim::Matvec,
    Prim::Matmul,
    Prim::Fill,
    Prim::Copyto,
];

/// Registers the frule and the rrule of each bulk primitive.
pub(crate) fn install(reg: &mut Registry) {
    for prim in PRIMS {
        reg.register_frule(
            prim,
            None,
            move |b: &mut FuncBuilder<'_>, call: &FruleCall<'_>| frule(b, call, prim),
        );
        reg.register_rrule(
            prim,
            None,
            RruleFns::new(
                move |b, call| forward(b, call, prim),
                move |b, call| pullback(b, call, prim),
            ),
        );
    }
    // `gemm` is the rules' own: its frule is for forward mode over the
    // pullbacks that use it (forward over reverse), its rrule for reverse
    // mode over the frules of `matvec` and `matmul` (reverse over forward).
    reg.register_frule(
        Prim::Gemm,
        None,
        |b: &mut FuncBuilder<'_>, call: &FruleCall<'_>| frule(b, call, Prim::Gemm),
    );
    reg.register_rrule(Prim::Gemm, None, RruleFns::new(gemm_forward, gemm_pullback));
}

// ---------------------------------------------------------------------------
// Forward mode.

/// The tangent arrays of array operand `a`, one per lane.
fn lanes_of(a: &FwdArg, prim: Prim) -> Result<&[Operand], RuleError> {
    a.tangents.as_deref().ok_or_else(|| {
        RuleError::Unsupported(format!(
            "the rule of `{prim}` found an array without tangent arrays"
        ))
    })
}

fn frule(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>, prim: Prim) -> Result<FwdOut, RuleError> {
    if call.lanes.is_sparse() {
        return crate::bulk_sparse::frule(b, call, prim);
    }
    let n = prim
        .bulk_params()
        .map(|(params, _)| params.len())
        .unwrap_or(0);
    let args = emit::args(call, prim, n)?;
    let primal: SmallVec<[Operand; 6]> = args.iter().map(|a| a.primal).collect();
    let lanes = emit::lanes(call);
    match (prim, args) {
        (Prim::Sum, [a]) => {
            let z = value(b, prim, &primal)?;
            let ta = lanes_of(a, prim)?;
            let t: Tangents = ta
                .iter()
                .map(|&t| value(b, Prim::Sum, &[t]))
                .collect::<Result<_, _>>()?;
            return Ok(FwdOut {
                primal: z,
                tangents: Some(t),
            });
        }
        (Prim::Dot, [x, y]) => {
            let z = value(b, prim, &primal)?;
            let (tx, ty) = (lanes_of(x, prim)?, lanes_of(y, prim)?);
            let mut t = Tangents::new();
            for k in lanes {
                let p = value(b, Prim::Dot, &[tx[k], y.primal])?;
                let q = value(b, Prim::Dot, &[x.primal, ty[k]])?;
                t.push(value(b, Prim::Add, &[p, q])?);
            }
            return Ok(FwdOut {
                primal: z,
                tangents: Some(t),
            });
        }
        (Prim::Axpy, [alpha, x, y]) => {
            effect(b, prim, &primal)?;
            let (tx, ty) = (lanes_of(x, prim)?, lanes_of(y, prim)?);
            for k in lanes {
                // ty += alpha tx + talpha x (x is not y: the primal checked).
                effect(b, Prim::Axpy, &[alpha.primal, tx[k], ty[k]])?;
                if let Some(ta) = alpha.tangent(k) {
                    effect(b, Prim::Axpy, &[ta, x.primal, ty[k]])?;
                }
            }
        }
        (Prim::Scale, [alpha, x]) => {
            // tx = alpha tx + talpha x, with x before the primal scales it.
            let tx = lanes_of(x, prim)?;
            for k in lanes {
                effect(b, Prim::Scale, &[alpha.primal, tx[k]])?;
                if let Some(ta) = alpha.tangent(k) {
                    effect(b, Prim::Axpy, &[ta, x.primal, tx[k]])?;
                }
            }
            effect(b, prim, &primal)?;
        }
        (Prim::Fill, [a, v]) => {
            effect(b, prim, &primal)?;
            let ta = lanes_of(a, prim)?;
            for k in lanes {
                let tv = v.tangent(k).unwrap_or(f64c(0.0));
                effect(b, Prim::Fill, &[ta[k], tv])?;
            }
        }
        (Prim::Copyto, [dst, src]) => {
            effect(b, prim, &primal)?;
            let (td, ts) = (lanes_of(dst, prim)?, lanes_of(src, prim)?);
            for k in lanes {
                effect(b, Prim::Copyto, &[td[k], ts[k]])?;
            }
        }
        (Prim::Matvec, [a, x, m, n, y]) => {
            // ty = tA x + A tx.
            effect(b, prim, &primal)?;
            let (ta, tx, ty) = (lanes_of(a, prim)?, lanes_of(x, prim)?, lanes_of(y, prim)?);
            for k in lanes {
                effect(
                    b,
                    Prim::Matvec,
                    &[ta[k], x.primal, m.primal, n.primal, ty[k]],
                )?;
                let ab = [
                    a.primal,
                    tx[k],
                    m.primal,
                    n.primal,
                    Operand::from(1i64),
                    ty[k],
                ];
                gemm(b, false, false, ab)?;
            }
        }
        (Prim::Gemm, [trans_a, trans_b, a, bm, m, kk, n, c]) => {
            // tC += op(tA) op(B) + op(A) op(tB): the pullbacks' own product,
            // differentiated when forward mode runs over them.
            effect(b, prim, &primal)?;
            let (ta, tb, tc) = (lanes_of(a, prim)?, lanes_of(bm, prim)?, lanes_of(c, prim)?);
            for k in lanes {
                let (flags, dims) = (
                    [trans_a.primal, trans_b.primal],
                    [m.primal, kk.primal, n.primal],
                );
                for (x, y) in [(ta[k], bm.primal), (a.primal, tb[k])] {
                    let ops = [flags[0], flags[1], x, y, dims[0], dims[1], dims[2], tc[k]];
                    effect(b, Prim::Gemm, &ops)?;
                }
            }
        }
        (Prim::Matmul, [a, bm, m, kk, n, c]) => {
            // tC = tA B + A tB.
            effect(b, prim, &primal)?;
            let (ta, tb, tc) = (lanes_of(a, prim)?, lanes_of(bm, prim)?, lanes_of(c, prim)?);
            for k in lanes {
                let dims = [m.primal, kk.primal, n.primal];
                effect(
                    b,
                    Prim::Matmul,
                    &[ta[k], bm.primal, dims[0], dims[1], dims[2], tc[k]],
                )?;
                let ab = [a.primal, tb[k], dims[0], dims[1], dims[2], tc[k]];
                gemm(b, false, false, ab)?;
            }
        }
        _ => {
            return Err(arity(prim));
        }
    };
    // The result is (): the tangents went into the arrays' tangents.
    Ok(FwdOut {
        primal: emit::unit(),
        tangents: None,
    })
}

/// `gemm(ta, tb, A, B, m, k, n, C)`: `C += op(A) op(B)`, from
/// `[A, B, m, k, n, C]`.
fn gemm(b: &mut FuncBuilder<'_>, ta: bool, tb: bool, ops: [Operand; 6]) -> Result<(), RuleError> {
    let [a, bm, m, k, n, c] = ops;
    let flag = |x: bool| Operand::Const(Const::Bool(x));
    emit::effect(b, Prim::Gemm, &[flag(ta), flag(tb), a, bm, m, k, n, c])
}

// ---------------------------------------------------------------------------
// Reverse mode.

/// A constant `gemm` flag (the rules write `gemm` with constant flags only).
fn const_flag(op: Operand) -> Result<bool, RuleError> {
    match op {
        Operand::Const(Const::Bool(x)) => Ok(x),
        _ => Err(RuleError::Unsupported(
            "reverse mode of `gemm` needs constant transpose flags".into(),
        )),
    }
}

/// `gemm(ta, tb, A, B, m, k, n, C)`: C kept (copied) before the product is
/// added into it; saves what the pullback's two products need.
fn gemm_forward(b: &mut FuncBuilder<'_>, call: &RevCall<'_>) -> Result<RevFwdOut, RuleError> {
    let prim = Prim::Gemm;
    let [ta, tb, a, bm, m, k, n, c] = call.args else {
        return Err(arity(prim));
    };
    const_flag(ta.primal)?;
    const_flag(tb.primal)?;
    let primal: SmallVec<[Operand; 8]> = call.args.iter().map(|a| a.primal).collect();
    let old = keep_then_run(b, prim, c.primal, &primal)?;
    Ok(RevFwdOut {
        primal: emit::unit(),
        shadows: SmallVec::new(),
        saved: smallvec![
            ta.primal,
            tb.primal,
            a.primal,
            bm.primal,
            m.primal,
            k.primal,
            n.primal,
            shadow(a, prim)?,
            shadow(bm, prim)?,
            shadow(c, prim)?,
            c.primal,
            old
        ],
    })
}

/// C = C + op(A) op(B), op(A) m×k, op(B) k×n: C's cotangent passes to the
/// old C unchanged; d op(A) = dC op(B)ᵀ and d op(B) = op(A)ᵀ dC, each added
/// into the stored matrix's shadow (transposed back when the operand was
/// stored transposed); then C is restored.
fn gemm_pullback(
    b: &mut FuncBuilder<'_>,
    call: &PullbackCall<'_>,
) -> Result<PullbackOut, RuleError> {
    let out = no_cotangents(call);
    let wanted = |i: usize| !call.arg_inactive.get(i).copied().unwrap_or(true);
    let [ta, tb, a, bm, m, k, n, sa, sb, sc, c, old] = call.saved else {
        return Err(RuleError::Unsupported(
            "the pullback of `gemm` got fewer saved values than its forward part gives".into(),
        ));
    };
    let (ta, tb) = (const_flag(*ta)?, const_flag(*tb)?);
    let (a, bm, m, k, n, sa, sb, sc) = (*a, *bm, *m, *k, *n, *sa, *sb, *sc);
    if wanted(2) {
        if ta {
            // A is stored k×m: sA += op(B) dCᵀ (k×n times n×m).
            gemm(b, tb, true, [bm, sc, k, n, m, sa])?;
        } else {
            // sA += dC op(B)ᵀ (m×n times n×k).
            gemm(b, false, !tb, [sc, bm, m, n, k, sa])?;
        }
    }
    if wanted(3) {
        if tb {
            // B is stored n×k: sB += dCᵀ op(A) (n×m times m×k).
            gemm(b, true, ta, [sc, a, n, m, k, sb])?;
        } else {
            // sB += op(A)ᵀ dC (k×m times m×n).
            gemm(b, !ta, false, [a, sc, k, m, n, sb])?;
        }
    }
    effect(b, Prim::Copyto, &[*c, *old])?;
    Ok(out)
}

/// The one shadow of array operand `a`.
fn shadow(a: &crate::RevArg, prim: Prim) -> Result<Operand, RuleError> {
    a.shadows.first().copied().ok_or_else(|| {
        RuleError::Unsupported(format!(
            "the rule of `{prim}` found an array without a shadow"
        ))
    })
}

/// `copy(out)` before the primal overwrites `out`, then the primal.
fn keep_then_run(
    b: &mut FuncBuilder<'_>,
    prim: Prim,
    out: Operand,
    primal: &[Operand],
) -> Result<Operand, RuleError> {
    let old = value(b, Prim::Copy, &[out])?;
    emit::effect(b, prim, primal)?;
    Ok(old)
}

fn forward(
    b: &mut FuncBuilder<'_>,
    call: &RevCall<'_>,
    prim: Prim,
) -> Result<RevFwdOut, RuleError> {
    let primal: SmallVec<[Operand; 6]> = call.args.iter().map(|a| a.primal).collect();
    let saved: SmallVec<[Operand; 4]> = match (prim, call.args) {
        (Prim::Sum, [a]) => {
            let z = value(b, prim, &primal)?;
            return Ok(RevFwdOut {
                primal: z,
                shadows: SmallVec::new(),
                saved: smallvec![shadow(a, prim)?],
            });
        }
        (Prim::Dot, [x, y]) => {
            let z = value(b, prim, &primal)?;
            return Ok(RevFwdOut {
                primal: z,
                shadows: SmallVec::new(),
                saved: smallvec![x.primal, y.primal, shadow(x, prim)?, shadow(y, prim)?],
            });
        }
        (Prim::Axpy, [alpha, x, y]) => {
            let old = keep_then_run(b, prim, y.primal, &primal)?;
            // x is needed only for alpha's cotangent.
            let xs = if alpha.active { x.primal } else { f64c(0.0) };
            smallvec![
                alpha.primal,
                xs,
                shadow(x, prim)?,
                shadow(y, prim)?,
                y.primal,
                old
            ]
        }
        (Prim::Scale, [alpha, x]) => {
            let old = keep_then_run(b, prim, x.primal, &primal)?;
            smallvec![alpha.primal, shadow(x, prim)?, x.primal, old]
        }
        (Prim::Fill, [a, _]) => {
            let old = keep_then_run(b, prim, a.primal, &primal)?;
            smallvec![shadow(a, prim)?, a.primal, old]
        }
        (Prim::Copyto, [dst, src]) => {
            let old = keep_then_run(b, prim, dst.primal, &primal)?;
            smallvec![shadow(dst, prim)?, shadow(src, prim)?, dst.primal, old]
        }
        (Prim::Matvec, [a, x, m, n, y]) => {
            let old = keep_then_run(b, prim, y.primal, &primal)?;
            smallvec![
                a.primal,
                x.primal,
                m.primal,
                n.primal,
                shadow(a, prim)?,
                shadow(x, prim)?,
                shadow(y, prim)?,
                y.primal,
                old
            ]
        }
        (Prim::Matmul, [a, bm, m, k, n, c]) => {
            let old = keep_then_run(b, prim, c.primal, &primal)?;
            smallvec![
                a.primal,
                bm.primal,
                m.primal,
                k.primal,
                n.primal,
                shadow(a, prim)?,
                shadow(bm, prim)?,
                shadow(c, prim)?,
                c.primal,
                old
            ]
        }
        _ => {
            return Err(arity(prim));
        }
    };
    Ok(RevFwdOut {
        primal: emit::unit(),
        shadows: SmallVec::new(),
        saved,
    })
}

fn pullback(
    b: &mut FuncBuilder<'_>,
    call: &PullbackCall<'_>,
    prim: Prim,
) -> Result<PullbackOut, RuleError> {
    let mut out = no_cotangents(call);
    let wanted = |i: usize| !call.arg_inactive.get(i).copied().unwrap_or(true);
    let dy = call.dy.first().copied().flatten();
    let mut give = |i: usize, g: Operand| {
        if let Some(slot) = out.cotangents.get_mut(i).and_then(|c| c.first_mut()) {
            *slot = Some(g);
        }
    };
    match (prim, call.saved) {
        (Prim::Sum, [s]) => {
            if let (Some(d), true) = (dy, wanted(0)) {
                let s = *s;
                let n = value(b, Prim::Length, &[s])?;
                emit::for_range(b, n, |b, i| {
                    let x = value(b, Prim::Arrayref, &[s, i])?;
                    let y = value(b, Prim::Add, &[x, d])?;
                    emit::effect(b, Prim::Arrayset, &[s, i, y])
                })?;
            }
        }
        (Prim::Dot, [x, y, sx, sy]) => {
            if let Some(d) = dy {
                if wanted(0) {
                    effect(b, Prim::Axpy, &[d, *y, *sx])?;
                }
                if wanted(1) {
                    effect(b, Prim::Axpy, &[d, *x, *sy])?;
                }
            }
        }
        (Prim::Axpy, [alpha, x, sx, sy, y, old]) => {
            // y_new = y + alpha x: dy passes to y unchanged.
            if wanted(0) {
                give(0, value(b, Prim::Dot, &[*x, *sy])?);
            }
            if wanted(1) {
                effect(b, Prim::Axpy, &[*alpha, *sy, *sx])?;
            }
            effect(b, Prim::Copyto, &[*y, *old])?;
        }
        (Prim::Scale, [alpha, sx, x, old]) => {
            effect(b, Prim::Copyto, &[*x, *old])?;
            if wanted(0) {
                give(0, value(b, Prim::Dot, &[*x, *sx])?);
            }
            effect(b, Prim::Scale, &[*alpha, *sx])?;
        }
        (Prim::Fill, [sa, a, old]) => {
            if wanted(1) {
                give(1, value(b, Prim::Sum, &[*sa])?);
            }
            effect(b, Prim::Fill, &[*sa, f64c(0.0)])?;
            effect(b, Prim::Copyto, &[*a, *old])?;
        }
        (Prim::Copyto, [sd, ss, dst, old]) => {
            if wanted(1) {
                effect(b, Prim::Axpy, &[f64c(1.0), *sd, *ss])?;
            }
            effect(b, Prim::Fill, &[*sd, f64c(0.0)])?;
            effect(b, Prim::Copyto, &[*dst, *old])?;
        }
        (Prim::Matvec, [a, x, m, n, sa, sx, sy, y, old]) => {
            let one = Operand::from(1i64);
            // sA += sy x^T (m×1 times 1×n); sx^T += sy^T A (1×m times m×n).
            if wanted(0) {
                gemm(b, false, false, [*sy, *x, *m, one, *n, *sa])?;
            }
            if wanted(1) {
                gemm(b, false, false, [*sy, *a, one, *m, *n, *sx])?;
            }
            effect(b, Prim::Fill, &[*sy, f64c(0.0)])?;
            effect(b, Prim::Copyto, &[*y, *old])?;
        }
        (Prim::Matmul, [a, bm, m, k, n, sa, sb, sc, c, old]) => {
            // sA += sC B^T; sB += A^T sC.
            if wanted(0) {
                gemm(b, false, true, [*sc, *bm, *m, *n, *k, *sa])?;
            }
            if wanted(1) {
                gemm(b, true, false, [*a, *sc, *k, *m, *n, *sb])?;
            }
            effect(b, Prim::Fill, &[*sc, f64c(0.0)])?;
            effect(b, Prim::Copyto, &[*c, *old])?;
        }
        _ => {
            return Err(RuleError::Unsupported(format!(
                "the pullback of `{prim}` got fewer saved values than its forward part gives"
            )));
        }
    }
    Ok(out)
}
