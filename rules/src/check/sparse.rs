//! The sparse-mode part of the frule checker: `@rs`, a function with the
//! width-1 rule's signature (`@r1`'s: dual arguments of one lane, a dual
//! result) that runs the rule in sparse forward mode (`Lanes::Sparse`) along
//! one direction. It makes each f64 tangent `t` the sparse handle
//! `t * onehot(0)` (the zero handle when `t` is 0, as a dense lane's zero is
//! strong), each `[f64]` tangent array a `[sparse]` array of them, emits the
//! registry's rule, and materialises every handle back (`sdense(h, 1)[0]`)
//! into the dense tangent arrays passed in and the result's tangent. So its
//! outcome compares with `@r1`'s on the same point and direction.
//!
//! Assumes a signature whose non-constant arguments and result are `f64`,
//! `[f64]` or types without a tangent (every scalar and bulk primitive of
//! the table); for other types (tuples, duals) no `@rs` is built. Guarantees
//! nothing about the values: the checker compares them.

use super::{Domain, Signature};
use crate::emit::{self, f64c, value};
use crate::{Callee, FruleCall, FwdArg, Registry, RuleError};
use irad_ir::{FuncBuilder, FuncId, Lanes, Module, Operand, Prim, Scalar, Type};
use smallvec::{SmallVec, smallvec};

/// Whether `@rs` can carry values of type `ty` in and out.
fn convertible(ty: &Type) -> bool {
    matches!(ty, Type::F64 | Type::Array(Scalar::F64)) || !ty.has_tangent()
}

/// The sparse handle of dense tangent `t`: zero when `t` is 0.
fn to_sparse(
    b: &mut FuncBuilder<'_>,
    t: Operand,
    e0: Operand,
    zero: Operand,
) -> Result<Operand, RuleError> {
    let is_zero = value(b, Prim::Eq, &[t, f64c(0.0)])?;
    let h = value(b, Prim::Sscale, &[t, e0])?;
    value(b, Prim::Select, &[is_zero, zero, h])
}

/// Direction 0's coefficient of handle `h`.
fn to_dense(b: &mut FuncBuilder<'_>, h: Operand) -> Result<Operand, RuleError> {
    let d = value(b, Prim::Sdense, &[h, Operand::from(1i64)])?;
    value(b, Prim::Arrayref, &[d, Operand::from(0i64)])
}

/// `dst[i] = to_dense(src[i])` for each i of `src` (of length `n`).
fn dense_array(
    b: &mut FuncBuilder<'_>,
    src: Operand,
    dst: Operand,
    n: Operand,
) -> Result<(), RuleError> {
    emit::for_range(b, n, |b, i| {
        let h = value(b, Prim::Arrayref, &[src, i])?;
        let v = to_dense(b, h)?;
        emit::effect(b, Prim::Arrayset, &[dst, i, v])
    })
}

/// Builds `@name` in `module`, or `None` for a signature whose types it
/// does not convert (see the module header).
pub(super) fn sparse_rule_function(
    module: &mut Module,
    name: &str,
    reg: &Registry,
    sig: &Signature,
) -> Result<Option<FuncId>, RuleError> {
    let result = sig.result().map_err(RuleError::Unsupported)?;
    let live: Vec<&Type> = sig
        .args
        .iter()
        .filter(|a| !matches!(a.domain, Domain::Const(_)))
        .map(|a| &a.ty)
        .collect();
    if !convertible(&result) || !live.iter().all(|t| convertible(t)) {
        return Ok(None);
    }
    let params = live.iter().map(|t| (None, t.forward(Lanes::ONE))).collect();
    let f = module.declare_func(name, params, result.forward(Lanes::ONE))?;
    let mut b = FuncBuilder::new(module, f)?;
    let entry = b.create_block();
    b.switch_to_block(entry)?;
    let e0 = value(&mut b, Prim::Sonehot, &[Operand::from(0i64)])?;
    let zero = value(&mut b, Prim::Szero, &[])?;
    let mut args = Vec::with_capacity(sig.args.len());
    // (dense tangent array, sparse tangent array, length) to write back.
    let mut arrays = Vec::new();
    let mut next = 0;
    for arg in &sig.args {
        if let Domain::Const(c) = arg.domain {
            args.push(FwdArg {
                primal: Operand::Const(c),
                ty: arg.ty.clone(),
                tangents: None,
            });
            continue;
        }
        let p = Operand::Value(b.param(next)?);
        next += 1;
        if !arg.ty.has_tangent() {
            args.push(FwdArg {
                primal: p,
                ty: arg.ty.clone(),
                tangents: None,
            });
            continue;
        }
        let primal = value(&mut b, Prim::Primal, &[p])?;
        let t = value(&mut b, Prim::Tangent, &[p, Operand::from(0i64)])?;
        let ts = if arg.ty == Type::F64 {
            to_sparse(&mut b, t, e0, zero)?
        } else {
            let n = value(&mut b, Prim::Length, &[t])?;
            let ts = Operand::Value(b.alloc(Scalar::Sparse, n)?);
            emit::for_range(&mut b, n, |b, i| {
                let d = value(b, Prim::Arrayref, &[t, i])?;
                let h = to_sparse(b, d, e0, zero)?;
                emit::effect(b, Prim::Arrayset, &[ts, i, h])
            })?;
            arrays.push((t, ts, n));
            ts
        };
        args.push(FwdArg {
            primal,
            ty: arg.ty.clone(),
            tangents: Some(smallvec![ts]),
        });
    }
    let rule = reg
        .frule(sig.prim, &sig.types())
        .ok_or_else(|| RuleError::Unsupported(format!("no frule registered for {sig}")))?;
    let call = FruleCall {
        callee: Callee::Prim(sig.prim),
        args: &args,
        result: &result,
        lanes: Lanes::Sparse,
    };
    let out = rule.emit(&mut b, &call)?;
    for (t, ts, n) in arrays {
        dense_array(&mut b, ts, t, n)?;
    }
    let ret = if result.has_tangent() {
        let t = out.tangents.as_ref().and_then(|t| t.first().copied());
        let dense = match (&result, t) {
            (Type::F64, Some(h)) => to_dense(&mut b, h)?,
            (Type::F64, None) => f64c(0.0),
            (_, Some(ts)) => {
                let n = value(&mut b, Prim::Length, &[ts])?;
                let d = value(&mut b, Prim::Zeros, &[n])?;
                dense_array(&mut b, ts, d, n)?;
                d
            }
            (_, None) => {
                return Err(RuleError::Unsupported(format!(
                    "the sparse rule returned no tangent for a result of type {result}"
                )));
            }
        };
        let ops: SmallVec<[Operand; 2]> = smallvec![out.primal, dense];
        value(&mut b, Prim::Dual, &ops)?
    } else {
        out.primal
    };
    b.ret(ret)?;
    Ok(Some(f))
}
