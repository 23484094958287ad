//! The sparse forward rules of the bulk array primitives (`sum dot axpy
//! scale matvec matmul fill copyto` and the rules' `gemm`): the tangent
//! arrays are `[sparse]` arrays of handles (docs/forward.md, "Sparse mode"),
//! updated in place by the sparse primitives on arrays (`ssum sdot sfill
//! sgemma sgemmb`, docs/ir.md "Sparse tangents"), a few statements per call
//! whatever the arrays' lengths.
//!
//! Assumes calls shaped as the transforms make them (one lane; `[f64]`
//! operands with one `[sparse]` tangent array each, of the primal array's
//! length); another shape is a [`RuleError`], never a panic.
//!
//! Guarantees:
//! - the primal statement runs first (shapes are checked and errors are the
//!   primitive's), except for `scale`, whose tangent reads the array before
//!   the primal scales it in place, as in dense mode;
//! - cost linear in the primitive's own work: `sum` and `dot` make one node
//!   of n (or 2n) terms, `axpy scale fill copyto` at most one node per
//!   element (`copyto` and `fill` none: they copy handles), `matvec` and
//!   `matmul` at most two nodes per output element of k + 1 terms each,
//!   O(m k n) terms for an m×k by k×n product; `axpy` and `scale` use
//!   `sgemm*` on a 1×1 matrix (`y += alpha x` is a 1×1 by 1×n product);
//! - the tangent stands for the same sums of products as the dense rule's
//!   lane (with its products in the same order), so the dense and sparse
//!   gradients agree to rounding of the materialisation.

use crate::emit::{self, Tangents, effect, f64c, value};
use crate::rrules::arity;
use crate::{FruleCall, FwdArg, FwdOut, RuleError};
use irad_ir::{Const, FuncBuilder, Operand, Prim, Scalar};
use smallvec::{SmallVec, smallvec};

/// The one `[sparse]` tangent array of array operand `a`.
fn tangent_array(a: &FwdArg, prim: Prim) -> Result<Operand, RuleError> {
    a.tangent(0).ok_or_else(|| {
        RuleError::Unsupported(format!(
            "the sparse rule of `{prim}` found an array without a tangent array"
        ))
    })
}

/// The sparse tangent of f64 operand `x`, the zero handle if it has none.
fn tangent_or_zero(b: &mut FuncBuilder<'_>, x: &FwdArg) -> Result<Operand, RuleError> {
    match x.tangent(0) {
        Some(t) => Ok(t),
        None => value(b, Prim::Szero, &[]),
    }
}

/// A new one-element array holding `x` (`[f64]`, or `[sparse]` when
/// `sparse`): a 1×1 matrix for `sgemma`/`sgemmb`.
fn one_element(b: &mut FuncBuilder<'_>, x: Operand, sparse: bool) -> Result<Operand, RuleError> {
    let one = Operand::from(1i64);
    let elem = if sparse { Scalar::Sparse } else { Scalar::F64 };
    let arr = Operand::Value(b.alloc(elem, one)?);
    effect(b, Prim::Arrayset, &[arr, Operand::from(0i64), x])?;
    Ok(arr)
}

/// `sgemma` (`sparse_a`) or `sgemmb`: `C += op(A) op(B)`, from flags and
/// `[A, B, m, k, n, C]`.
fn sgemm(
    b: &mut FuncBuilder<'_>,
    sparse_a: bool,
    flags: [Operand; 2],
    ops: [Operand; 6],
) -> Result<(), RuleError> {
    let [a, bm, m, k, n, c] = ops;
    let prim = if sparse_a { Prim::Sgemma } else { Prim::Sgemmb };
    effect(b, prim, &[flags[0], flags[1], a, bm, m, k, n, c])
}

/// `y += alpha x` on `[sparse]` arrays `x` and `y` of length `n`, for an
/// f64 `alpha`: a 1×1 by 1×n product.
fn axpy_handles(
    b: &mut FuncBuilder<'_>,
    alpha: Operand,
    x: Operand,
    y: Operand,
    n: Operand,
) -> Result<(), RuleError> {
    let a = one_element(b, alpha, false)?;
    let one = Operand::from(1i64);
    sgemm(b, false, NO_TRANSPOSE, [a, x, one, one, n, y])
}

/// `y += x t` for a `[sparse]` array `y`, an `[f64]` array `x` of length
/// `n` and a sparse handle `t`.
fn outer_handles(
    b: &mut FuncBuilder<'_>,
    t: Operand,
    x: Operand,
    y: Operand,
    n: Operand,
) -> Result<(), RuleError> {
    let a = one_element(b, t, true)?;
    let one = Operand::from(1i64);
    sgemm(b, true, NO_TRANSPOSE, [a, x, one, one, n, y])
}

const NO_TRANSPOSE: [Operand; 2] = [
    Operand::Const(Const::Bool(false)),
    Operand::Const(Const::Bool(false)),
];

/// The sparse forward rule of bulk primitive `prim` (`call.lanes` is
/// sparse).
pub(crate) fn frule(
    b: &mut FuncBuilder<'_>,
    call: &FruleCall<'_>,
    prim: Prim,
) -> Result<FwdOut, RuleError> {
    let n = prim
        .bulk_params()
        .map(|(params, _)| params.len())
        .unwrap_or(0);
    let args = emit::args(call, prim, n)?;
    let primal: SmallVec<[Operand; 8]> = args.iter().map(|a| a.primal).collect();
    let t = |a: &FwdArg| tangent_array(a, prim);
    match (prim, args) {
        (Prim::Sum, [a]) => {
            let z = value(b, prim, &primal)?;
            let ts = value(b, Prim::Ssum, &[t(a)?])?;
            return Ok(FwdOut {
                primal: z,
                tangents: Some(smallvec![ts]),
            });
        }
        (Prim::Dot, [x, y]) => {
            // t = y . tx + x . ty, in the dense rule's order.
            let z = value(b, prim, &primal)?;
            let p = value(b, Prim::Sdot, &[y.primal, t(x)?])?;
            let q = value(b, Prim::Sdot, &[x.primal, t(y)?])?;
            let ts: Tangents = smallvec![value(b, Prim::Sadd, &[p, q])?];
            return Ok(FwdOut {
                primal: z,
                tangents: Some(ts),
            });
        }
        (Prim::Axpy, [alpha, x, y]) => {
            // ty += alpha tx + talpha x (x is not y: the primal checked).
            effect(b, prim, &primal)?;
            let (tx, ty) = (t(x)?, t(y)?);
            let n = value(b, Prim::Length, &[ty])?;
            axpy_handles(b, alpha.primal, tx, ty, n)?;
            if let Some(ta) = alpha.tangent(0) {
                outer_handles(b, ta, x.primal, ty, n)?;
            }
        }
        (Prim::Scale, [alpha, x]) => {
            // tx = alpha tx + talpha x, with x before the primal scales it.
            let tx = t(x)?;
            let n = value(b, Prim::Length, &[tx])?;
            let old = value(b, Prim::Copy, &[tx])?;
            let zero = value(b, Prim::Szero, &[])?;
            effect(b, Prim::Sfill, &[tx, zero])?;
            axpy_handles(b, alpha.primal, old, tx, n)?;
            if let Some(ta) = alpha.tangent(0) {
                outer_handles(b, ta, x.primal, tx, n)?;
            }
            effect(b, prim, &primal)?;
        }
        (Prim::Fill, [a, v]) => {
            effect(b, prim, &primal)?;
            let tv = tangent_or_zero(b, v)?;
            effect(b, Prim::Sfill, &[t(a)?, tv])?;
        }
        (Prim::Copyto, [dst, src]) => {
            // The handles copied: 1 times each, which makes no node.
            effect(b, prim, &primal)?;
            let (td, ts) = (t(dst)?, t(src)?);
            let n = value(b, Prim::Length, &[td])?;
            let zero = value(b, Prim::Szero, &[])?;
            effect(b, Prim::Sfill, &[td, zero])?;
            axpy_handles(b, f64c(1.0), ts, td, n)?;
        }
        (Prim::Matvec, [a, x, m, n, y]) => {
            // ty = tA x + A tx.
            effect(b, prim, &primal)?;
            let ty = t(y)?;
            let zero = value(b, Prim::Szero, &[])?;
            effect(b, Prim::Sfill, &[ty, zero])?;
            let one = Operand::from(1i64);
            let dims = [m.primal, n.primal, one];
            let ops = [t(a)?, x.primal, dims[0], dims[1], dims[2], ty];
            sgemm(b, true, NO_TRANSPOSE, ops)?;
            let ops = [a.primal, t(x)?, dims[0], dims[1], dims[2], ty];
            sgemm(b, false, NO_TRANSPOSE, ops)?;
        }
        (Prim::Matmul, [a, bm, m, kk, n, c]) => {
            // tC = tA B + A tB.
            effect(b, prim, &primal)?;
            let tc = t(c)?;
            let zero = value(b, Prim::Szero, &[])?;
            effect(b, Prim::Sfill, &[tc, zero])?;
            let dims = [m.primal, kk.primal, n.primal];
            let ops = [t(a)?, bm.primal, dims[0], dims[1], dims[2], tc];
            sgemm(b, true, NO_TRANSPOSE, ops)?;
            let ops = [a.primal, t(bm)?, dims[0], dims[1], dims[2], tc];
            sgemm(b, false, NO_TRANSPOSE, ops)?;
        }
        (Prim::Gemm, [trans_a, trans_b, a, bm, m, kk, n, c]) => {
            // tC += op(tA) op(B) + op(A) op(tB) (forward over a pullback).
            effect(b, prim, &primal)?;
            let tc = t(c)?;
            let flags = [trans_a.primal, trans_b.primal];
            let dims = [m.primal, kk.primal, n.primal];
            let ops = [t(a)?, bm.primal, dims[0], dims[1], dims[2], tc];
            sgemm(b, true, flags, ops)?;
            let ops = [a.primal, t(bm)?, dims[0], dims[1], dims[2], tc];
            sgemm(b, false, flags, ops)?;
        }
        _ => return Err(arity(prim)),
    }
    Ok(FwdOut {
        primal: emit::unit(),
        tangents: None,
    })
}
