//! Sparse operands in the frule checker: the builder's primitives (`sscale
//! sadd sdense ssum sdot sfill sgemma sgemmb ...`) take and give `sparse`
//! handles, which no run may take or return (docs/ir.md, "Sparse
//! tangents"). So the checker's functions carry each handle as its
//! *coefficients* over [`DIRECTIONS`] directions, a `[f64]`: a `sparse`
//! operand as `DIRECTIONS` f64s, a `[sparse]` of n handles as `n *
//! DIRECTIONS` (handle i's at `i * DIRECTIONS`). Inside a function a carried
//! handle is decoded (`sum_k x[k] sonehot(k)`, linear in `x`, so the
//! tangent of the decoded handle is the decoded tangent) and a handle
//! result is encoded back with `sdense`; a `[sparse]` argument written in
//! place (`sfill`, `sgemma`'s C) is encoded back into its carrier array, so
//! the checker's comparisons of results and final argument states apply
//! unchanged: the frule of a builder primitive is checked by finite
//! differences of these coefficients.
//!
//! Assumes the builder's semantics (handles of one run, `sdense` exact for a
//! sum of unit vectors). Guarantees: every type without `sparse` is carried
//! as itself, so signatures of other primitives are untouched.

use crate::RuleError;
use crate::emit::{self, effect, value};
use irad_ir::{FuncBuilder, Operand, Prim, Scalar, Type};

/// The directions a carried handle has coefficients for.
pub const DIRECTIONS: i64 = 2;

/// The type a value of type `ty` is carried as: `[f64]` for `sparse` and
/// `[sparse]`, `ty` itself otherwise.
pub(crate) fn carrier(ty: &Type) -> Type {
    match ty {
        Type::Sparse | Type::Array(Scalar::Sparse) => Type::Array(Scalar::F64),
        _ => ty.clone(),
    }
}

/// The handle whose coefficients are `x[at..at + DIRECTIONS]`.
fn decode_at(b: &mut FuncBuilder<'_>, x: Operand, at: Operand) -> Result<Operand, RuleError> {
    let mut h = value(b, Prim::Szero, &[])?;
    for k in 0..DIRECTIONS {
        let i = value(b, Prim::Iadd, &[at, Operand::from(k)])?;
        let c = value(b, Prim::Arrayref, &[x, i])?;
        let e = value(b, Prim::Sonehot, &[Operand::from(k)])?;
        let term = value(b, Prim::Sscale, &[c, e])?;
        h = value(b, Prim::Sadd, &[h, term])?;
    }
    Ok(h)
}

/// The value of type `ty` carried by `x` (see the module header): `x`
/// itself for a type without handles.
pub(crate) fn decode(b: &mut FuncBuilder<'_>, ty: &Type, x: Operand) -> Result<Operand, RuleError> {
    match ty {
        Type::Sparse => decode_at(b, x, Operand::from(0i64)),
        Type::Array(Scalar::Sparse) => {
            let len = value(b, Prim::Length, &[x])?;
            let n = value(b, Prim::Idiv, &[len, Operand::from(DIRECTIONS)])?;
            let a = Operand::Value(b.alloc(Scalar::Sparse, n)?);
            emit::for_range(b, n, |b, i| {
                let at = value(b, Prim::Imul, &[i, Operand::from(DIRECTIONS)])?;
                let h = decode_at(b, x, at)?;
                effect(b, Prim::Arrayset, &[a, i, h])
            })?;
            Ok(a)
        }
        _ => Ok(x),
    }
}

/// `v` (of type `ty`) as its carrier: `sdense(v, DIRECTIONS)` for a handle,
/// `v` itself otherwise (a `[sparse]` result does not occur: the builder's
/// array primitives write in place).
pub(crate) fn encode(b: &mut FuncBuilder<'_>, ty: &Type, v: Operand) -> Result<Operand, RuleError> {
    match ty {
        Type::Sparse => value(b, Prim::Sdense, &[v, Operand::from(DIRECTIONS)]),
        Type::Array(Scalar::Sparse) => Err(RuleError::Unsupported(
            "a [sparse] result cannot be carried".into(),
        )),
        _ => Ok(v),
    }
}

/// Writes the coefficients of the handles of `a` (a `[sparse]`) into its
/// carrier array `x`, in place.
pub(crate) fn write_back(b: &mut FuncBuilder<'_>, a: Operand, x: Operand) -> Result<(), RuleError> {
    let n = value(b, Prim::Length, &[a])?;
    emit::for_range(b, n, |b, i| {
        let h = value(b, Prim::Arrayref, &[a, i])?;
        let d = value(b, Prim::Sdense, &[h, Operand::from(DIRECTIONS)])?;
        let at = value(b, Prim::Imul, &[i, Operand::from(DIRECTIONS)])?;
        for k in 0..DIRECTIONS {
            let c = value(b, Prim::Arrayref, &[d, Operand::from(k)])?;
            let j = value(b, Prim::Iadd, &[at, Operand::from(k)])?;
            effect(b, Prim::Arrayset, &[x, j, c])?;
        }
        Ok(())
    })
}
