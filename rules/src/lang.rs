//! Rules written in the language: a function whose header declares `jvp @g`
//! or `vjp @h` (docs/rules.md, "Rules written in the language") gets the
//! frule and rrule below, which call those functions where the AD passes
//! meet a call of it. The signatures are `irad_ir::verify::jvp_signature`
//! and `vjp_signature`.
//!
//! Assumes a verified module (the rules fit their function's signature).
//! Guarantees:
//! - forward: one `invoke @g(args, tangents)` per lane, zero tangents made
//!   for arguments without one; the primal result is lane 0's. For lanes
//!   after the first, each `[T]` argument is passed as a fresh `copy` taken
//!   before lane 0's call, so a jvp that writes its array arguments writes
//!   the caller's arrays once, as the primal would; a tuple argument holding
//!   arrays at more than one lane is refused with an error that says so;
//! - sparse forward mode, where the differentiable arguments are f64 and the
//!   result holds no array: one call per differentiable argument with a unit
//!   tangent (the jvp is linear in the tangents), each sparse tangent of the
//!   result their combination with the arguments' sparse tangents; other
//!   signatures are refused;
//! - reverse: the forward part is `invoke @f(args)` and saves the arguments,
//!   their shadows and the result's fresh zero shadows; the pullback builds
//!   the result's cotangent (its f64s from the transform's `dy`, its arrays
//!   from the shadows), calls `invoke @h(args, dy)` and returns the f64
//!   cotangents outside arrays, adding the array ones into the arguments'
//!   shadows with `axpy`. The arguments are the arrays as they are after
//!   the call (the transform restores every later write first).

use crate::emit::{self, f64c, unit, value};
use crate::{
    Callee, FruleCall, FwdOut, PullbackCall, PullbackOut, RevCall, RevFwdOut, Rrule, RuleError,
};
use crate::{Frule, emit::Tangents};
use irad_ir::{Const, FuncBuilder, FuncId, Operand, Prim, Scalar, Type};
use smallvec::{SmallVec, smallvec};

/// The frule of a function with a declared jvp.
pub(crate) struct JvpRule {
    /// The jvp.
    pub jvp: FuncId,
}

/// The rrule of a function with a declared vjp.
pub(crate) struct VjpRule {
    /// The vjp.
    pub vjp: FuncId,
}

/// The function a rule is for, by the name in `callee`.
fn primal_func(b: &FuncBuilder<'_>, callee: Callee<'_>) -> Result<FuncId, RuleError> {
    let Callee::Func(name) = callee else {
        return Err(RuleError::Unsupported(format!(
            "a rule written in the language is for a function, not {callee}"
        )));
    };
    b.module()
        .by_name(name)
        .ok_or_else(|| RuleError::Unsupported(format!("no function @{name}")))
}

/// `invoke @g(args)` and its result.
fn call(b: &mut FuncBuilder<'_>, g: FuncId, args: &[Operand]) -> Result<Operand, RuleError> {
    match b.invoke(g, args)? {
        Some(v) => Ok(Operand::Value(v)),
        None => Ok(unit()),
    }
}

/// `getfield(t, k)`.
fn field(b: &mut FuncBuilder<'_>, t: Operand, k: usize) -> Result<Operand, RuleError> {
    let k = i64::try_from(k).map_err(|_| RuleError::Unsupported("tuple too wide".into()))?;
    value(b, Prim::Getfield, &[t, Operand::Const(Const::I64(k))])
}

impl Frule for JvpRule {
    fn emit(&self, b: &mut FuncBuilder<'_>, call_: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
        let name = b
            .module()
            .get(self.jvp)
            .map(|g| g.name.clone())
            .unwrap_or_default();
        if call_.lanes.is_sparse() {
            return self.sparse(b, call_, &name);
        }
        let lanes = emit::lanes(call_);
        let mut primal = None;
        let mut tangents = Tangents::new();
        // Copies of the array arguments for the calls after the first, taken
        // before the first may write them.
        let copies = later_args(b, call_, lanes.len(), &name)?;
        for (k, mut args) in lanes.zip(copies) {
            for a in call_.args.iter().filter(|a| a.ty.has_tangent()) {
                let t = emit::tangent_or_zero(b, a, k, call_.lanes)?
                    .ok_or_else(|| RuleError::Unsupported("a tangent is missing".into()))?;
                args.push(t);
            }
            let out = call(b, self.jvp, &args)?;
            if k == 0 {
                primal = Some(field(b, out, 0)?);
            }
            tangents.push(field(b, out, 1)?);
        }
        let primal = primal.ok_or_else(|| RuleError::Unsupported("no lane".into()))?;
        Ok(FwdOut {
            primal,
            tangents: Some(tangents),
        })
    }
}

impl JvpRule {
    /// Sparse mode, for a function whose differentiable arguments are f64
    /// and whose result is f64 or a tuple of f64s: the jvp is linear in the
    /// tangents, so one call per differentiable argument with a unit tangent
    /// gives that argument's partial derivatives, and each sparse tangent of
    /// the result is their combination with the arguments' sparse tangents.
    fn sparse(
        &self,
        b: &mut FuncBuilder<'_>,
        call_: &FruleCall<'_>,
        name: &str,
    ) -> Result<FwdOut, RuleError> {
        let diff: Vec<usize> = (0..call_.args.len())
            .filter(|&i| call_.args[i].ty.has_tangent())
            .collect();
        if !scalar_leaves(call_.result) || diff.iter().any(|&i| call_.args[i].ty != Type::F64) {
            return Err(RuleError::Unsupported(format!(
                "{} has a jvp written in the language (@{name}), which sparse forward mode \
                 calls only where the differentiable arguments are f64 and the result holds \
                 no array: use dense lanes (--batch N) instead",
                call_.callee
            )));
        }
        let calls = diff.len().max(1);
        let copies = later_args(b, call_, calls, name)?;
        let mut primal = None;
        let mut acc: Vec<Option<Operand>> = vec![None; call_.result.cotangent_leaves()];
        for (j, mut args) in copies.into_iter().enumerate() {
            // A unit tangent for argument diff[j], zero for the others.
            for &i in &diff {
                args.push(f64c(if diff.get(j) == Some(&i) { 1.0 } else { 0.0 }));
            }
            let out = call(b, self.jvp, &args)?;
            if j == 0 {
                primal = Some(field(b, out, 0)?);
            }
            let Some(&i) = diff.get(j) else { continue };
            let Some(t) = call_.args[i].tangent(0) else {
                continue;
            };
            let d = field(b, out, 1)?;
            let mut partials = Leaves::default();
            split(b, call_.result, d, &mut partials)?;
            for (slot, &p) in acc.iter_mut().zip(&partials.scalars) {
                let term = emit::lane_mul(b, p, t)?;
                *slot = Some(match *slot {
                    Some(sum) => emit::lane_add(b, sum, term)?,
                    None => term,
                });
            }
        }
        let primal = primal.ok_or_else(|| RuleError::Unsupported("no call".into()))?;
        let mut leaves = Vec::with_capacity(acc.len());
        for slot in acc {
            leaves.push(Some(match slot {
                Some(t) => t,
                None => emit::lane_zero(b, call_.lanes)?,
            }));
        }
        let tangent = build(b, call_.result, &mut leaves.iter(), &mut [].iter())?;
        Ok(FwdOut {
            primal,
            tangents: Some(std::iter::once(tangent).collect()),
        })
    }
}

/// Whether `ty` has f64s and no array (f64, or tuples of f64 and
/// non-differentiable scalars).
fn scalar_leaves(ty: &Type) -> bool {
    ty.has_tangent() && !emit::contains_array(ty)
}

/// The primal arguments of `n` calls of a jvp: the arguments themselves for
/// the first, fresh `copy`s of the `[T]` arguments for each later one (taken
/// before the first call). A tuple holding arrays cannot be copied, so it is
/// refused when there is more than one call.
fn later_args(
    b: &mut FuncBuilder<'_>,
    call_: &FruleCall<'_>,
    n: usize,
    name: &str,
) -> Result<Vec<Vec<Operand>>, RuleError> {
    let first: Vec<Operand> = call_.args.iter().map(|a| a.primal).collect();
    let mut out = vec![first];
    for _ in 1..n {
        let mut args = Vec::with_capacity(call_.args.len());
        for a in call_.args {
            args.push(match &a.ty {
                Type::Array(_) => value(b, Prim::Copy, &[a.primal])?,
                ty if emit::contains_array(ty) => {
                    return Err(RuleError::Unsupported(format!(
                        "{}: a jvp written in the language (@{name}) takes a tuple holding \
                         arrays, which it can only be given at batch width 1",
                        call_.callee
                    )));
                }
                _ => a.primal,
            });
        }
        out.push(args);
    }
    Ok(out)
}

/// Where the leaves of a value of type `ty` go: f64s outside arrays in
/// order, and its `[f64]` arrays in order.
#[derive(Default)]
struct Leaves {
    scalars: Vec<Operand>,
    arrays: Vec<Operand>,
}

/// Splits `v` (a value of `ty`'s tangent type) into its leaves.
fn split(
    b: &mut FuncBuilder<'_>,
    ty: &Type,
    v: Operand,
    out: &mut Leaves,
) -> Result<(), RuleError> {
    match ty {
        Type::F64 => out.scalars.push(v),
        Type::Array(Scalar::F64) => out.arrays.push(v),
        Type::Tuple(elems) => {
            for (k, elem) in elems.iter().enumerate() {
                if elem.has_tangent() {
                    let part = field(b, v, k)?;
                    split(b, elem, part, out)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// A value of `ty`'s tangent type from its leaves, taken in order.
fn build(
    b: &mut FuncBuilder<'_>,
    ty: &Type,
    scalars: &mut std::slice::Iter<'_, Option<Operand>>,
    arrays: &mut std::slice::Iter<'_, Operand>,
) -> Result<Operand, RuleError> {
    let missing = || RuleError::Unsupported("the cotangent has too few leaves".into());
    match ty {
        Type::F64 => Ok(scalars.next().ok_or_else(missing)?.unwrap_or(f64c(0.0))),
        Type::Array(Scalar::F64) => arrays.next().copied().ok_or_else(missing),
        Type::Tuple(elems) => {
            let mut parts = SmallVec::<[Operand; 4]>::new();
            for elem in elems.iter() {
                parts.push(if elem.has_tangent() {
                    build(b, elem, scalars, arrays)?
                } else {
                    unit()
                });
            }
            value(b, Prim::Tuple, &parts)
        }
        _ => Ok(unit()),
    }
}

impl Rrule for VjpRule {
    fn forward(
        &self,
        b: &mut FuncBuilder<'_>,
        call_: &RevCall<'_>,
    ) -> Result<RevFwdOut, RuleError> {
        let f = primal_func(b, call_.callee)?;
        let args: Vec<Operand> = call_.args.iter().map(|a| a.primal).collect();
        let primal = call(b, f, &args)?;
        // Fresh zero shadows for the result's arrays.
        let mut zero = Leaves::default();
        if let Some(z) = emit::zero_tangent(b, call_.result, primal)? {
            split(b, call_.result, z, &mut zero)?;
        }
        let mut saved: SmallVec<[Operand; 4]> = args.iter().copied().collect();
        for a in call_.args {
            saved.extend(a.shadows.iter().copied());
        }
        saved.extend(zero.arrays.iter().copied());
        Ok(RevFwdOut {
            primal,
            shadows: zero.arrays.into_iter().collect(),
            saved,
        })
    }

    fn pullback(
        &self,
        b: &mut FuncBuilder<'_>,
        call_: &PullbackCall<'_>,
    ) -> Result<PullbackOut, RuleError> {
        let n = call_.arg_types.len();
        let short = || RuleError::Unsupported("the saved values are missing".into());
        let args = call_.saved.get(..n).ok_or_else(short)?;
        let mut rest = call_.saved.get(n..).ok_or_else(short)?.iter().copied();
        let mut arg_shadows: Vec<Vec<Operand>> = Vec::with_capacity(n);
        for ty in call_.arg_types {
            let k = ty.shadow_leaves();
            let mine: Vec<Operand> = rest.by_ref().take(k).collect();
            if mine.len() != k {
                return Err(short());
            }
            arg_shadows.push(mine);
        }
        let result_shadows: Vec<Operand> = rest.collect();
        // The result's cotangent: its f64s from `dy`, its arrays from the
        // shadows the forward part made.
        let dy = build(
            b,
            call_.result,
            &mut call_.dy.iter(),
            &mut result_shadows.iter(),
        )?;
        let mut vjp_args: Vec<Operand> = args.to_vec();
        vjp_args.push(dy);
        let ct = call(b, self.vjp, &vjp_args)?;
        let diff: Vec<usize> = (0..n)
            .filter(|&i| call_.arg_types[i].has_tangent())
            .collect();
        let mut cotangents: SmallVec<[_; 3]> = smallvec![SmallVec::new(); n];
        for (j, &i) in diff.iter().enumerate() {
            let c = if diff.len() == 1 {
                ct
            } else {
                field(b, ct, j)?
            };
            let mut leaves = Leaves::default();
            split(b, &call_.arg_types[i], c, &mut leaves)?;
            if leaves.arrays.len() != arg_shadows[i].len() {
                return Err(RuleError::Unsupported(
                    "a cotangent's arrays do not match the argument's".into(),
                ));
            }
            for (c_arr, &shadow) in leaves.arrays.iter().zip(&arg_shadows[i]) {
                if !call_.arg_inactive[i] {
                    emit::effect(b, Prim::Axpy, &[f64c(1.0), *c_arr, shadow])?;
                }
            }
            cotangents[i] = leaves.scalars.into_iter().map(Some).collect();
        }
        Ok(PullbackOut { cotangents })
    }
}
