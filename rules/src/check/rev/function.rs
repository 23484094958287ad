//! The test function of the rrule checker (see `check/rev.rs`): the rrule's
//! forward part and its pullback in one function, with the shadows' contents
//! and the cotangents returned for the checks.
//!
//! Assumes a signature of the test table. Guarantees: a rule that fails to
//! emit, or returns a result, shadows or cotangents of the wrong type or
//! number, is an error message naming the part at fault; the function itself
//! is well typed whenever the rule's statements are.

use super::is_const;
use crate::emit::{self, value};
use crate::table::{Domain, Signature};
use crate::{Callee, PullbackCall, Registry, RevArg, RevCall, RuleError};
use irad_ir::{FuncBuilder, FuncId, Module, Operand, Prim, Scalar, Type};

/// Builds `@name`, the test function of `reg`'s rrule for `sig` (see the
/// module comment): parameters are the live arguments, one zero shadow per
/// `[f64]` array of them, `dy` per f64 of the result outside arrays, and the
/// cotangent arrays for the argument shadows then the result shadows. It
/// returns the flat tuple (result, deep copy of the result after the forward
/// part, deep copy of each live argument after it, copies of every shadow
/// after it, the result shadows, copies of every shadow between the parts,
/// the f64 cotangents of the live arguments with `None` as 0). With
/// `zero_dy`, the pullback gets `None` for every `dy`.
pub(super) fn rrule_function(
    module: &mut Module,
    name: &str,
    reg: &Registry,
    sig: &Signature,
    zero_dy: bool,
) -> Result<FuncId, String> {
    let result = sig.result()?;
    let types = sig.types();
    let rule = reg
        .rrule(sig.prim, &types)
        .ok_or_else(|| format!("no rrule registered for {sig}"))?;
    let consts: Vec<bool> = sig.args.iter().map(|a| is_const(&a.domain)).collect();
    let live: Vec<&Type> = types
        .iter()
        .zip(&consts)
        .filter(|(_, c)| !**c)
        .map(|(t, _)| t)
        .collect();
    let n_live = live.len();
    let n_as: usize = live.iter().map(|t| Type::shadow_leaves(t)).sum();
    let n_rs = Type::shadow_leaves(&result);
    let n_dy = Type::cotangent_leaves(&result);
    let n_cot: usize = live.iter().map(|t| Type::cotangent_leaves(t)).sum();
    let f64s = Type::Array(Scalar::F64);
    let mut params: Vec<(Option<String>, Type)> = Vec::new();
    params.extend(live.iter().map(|t| (None, (*t).clone())));
    params.extend((0..n_as).map(|_| (None, f64s.clone())));
    params.extend((0..n_dy).map(|_| (None, Type::F64)));
    params.extend((0..n_as + n_rs).map(|_| (None, f64s.clone())));
    let mut rets = vec![result.clone(), result.clone()];
    rets.extend(live.iter().map(|t| (*t).clone()));
    rets.extend((0..2 * (n_as + n_rs) + n_rs).map(|_| f64s.clone()));
    rets.extend((0..n_cot).map(|_| Type::F64));
    let internal = |e: RuleError| format!("internal error building the rrule's test function: {e}");
    let f = module
        .declare_func(name, params, Type::tuple(rets))
        .map_err(|e| internal(e.into()))?;
    let mut b = FuncBuilder::new(module, f).map_err(|e| internal(e.into()))?;
    let entry = b.create_block();
    b.switch_to_block(entry).map_err(|e| internal(e.into()))?;
    let param = |b: &FuncBuilder<'_>, i: usize| -> Result<Operand, String> {
        b.param(i)
            .map(Operand::Value)
            .map_err(|e| internal(e.into()))
    };
    let mut args = Vec::with_capacity(sig.args.len());
    let (mut next_live, mut next_shadow) = (0, n_live);
    for spec in &sig.args {
        if let Domain::Const(c) = spec.domain {
            args.push(RevArg {
                primal: Operand::Const(c),
                ty: spec.ty.clone(),
                shadows: Default::default(),
                active: false,
            });
            continue;
        }
        let primal = param(&b, next_live)?;
        next_live += 1;
        let mut shadows = smallvec::SmallVec::new();
        for _ in 0..Type::shadow_leaves(&spec.ty) {
            shadows.push(param(&b, next_shadow)?);
            next_shadow += 1;
        }
        args.push(RevArg {
            primal,
            ty: spec.ty.clone(),
            shadows,
            active: true,
        });
    }
    let call = RevCall {
        callee: Callee::Prim(sig.prim),
        args: &args,
        result: &result,
    };
    let out = rule
        .forward(&mut b, &call)
        .map_err(|e| format!("the forward part failed to emit: {e}"))?;
    if b.current_block() != Some(entry) {
        return Err("the forward part created blocks: it must be straight-line code".into());
    }
    let got = b
        .operand_type(&out.primal)
        .map_err(|e| format!("the forward part returned a bad primal: {e}"))?;
    if got != result {
        return Err(format!("the forward part returned a {got} for a {result}"));
    }
    if out.shadows.len() != n_rs {
        return Err(format!(
            "the forward part returned {} shadow(s) for a {result}, which holds {n_rs} [f64] array(s)",
            out.shadows.len()
        ));
    }
    for s in &out.shadows {
        let t = b
            .operand_type(s)
            .map_err(|e| format!("the forward part returned a bad shadow: {e}"))?;
        if t != f64s {
            return Err(format!("the forward part returned a shadow of type {t}"));
        }
    }
    let mut ret = vec![
        out.primal,
        deep_copy(&mut b, out.primal, &result).map_err(internal)?,
    ];
    for (j, t) in live.iter().enumerate() {
        let a = param(&b, j)?;
        ret.push(deep_copy(&mut b, a, t).map_err(internal)?);
    }
    let mut shadows: Vec<Operand> = Vec::with_capacity(n_as + n_rs);
    for k in 0..n_as {
        shadows.push(param(&b, n_live + k)?);
    }
    shadows.extend(out.shadows.iter().copied());
    for &s in &shadows {
        ret.push(value(&mut b, Prim::Copy, &[s]).map_err(internal)?);
    }
    ret.extend(out.shadows.iter().copied());
    let dy_arrays = n_live + n_as + n_dy;
    for (k, &s) in shadows.iter().enumerate() {
        let d = param(&b, dy_arrays + k)?;
        copy_into(&mut b, s, d).map_err(internal)?;
    }
    for &s in &shadows {
        ret.push(value(&mut b, Prim::Copy, &[s]).map_err(internal)?);
    }
    let mut dy = Vec::with_capacity(n_dy);
    for k in 0..n_dy {
        dy.push(if zero_dy {
            None
        } else {
            Some(param(&b, n_live + n_as + k)?)
        });
    }
    let pcall = PullbackCall {
        callee: Callee::Prim(sig.prim),
        arg_types: &types,
        arg_inactive: &consts,
        result: &result,
        saved: &out.saved,
        dy: &dy,
    };
    let back = rule
        .pullback(&mut b, &pcall)
        .map_err(|e| format!("the pullback failed to emit: {e}"))?;
    if back.cotangents.len() != types.len() {
        return Err(format!(
            "the pullback returned cotangents for {} argument(s), the call has {}",
            back.cotangents.len(),
            types.len()
        ));
    }
    for (i, ((cs, t), c)) in back.cotangents.iter().zip(&types).zip(&consts).enumerate() {
        let n = Type::cotangent_leaves(t);
        if cs.len() != n {
            return Err(format!(
                "the pullback returned {} cotangent(s) for argument {} ({t}), which has {n} f64{} outside arrays",
                cs.len(),
                i + 1,
                if n == 1 { "" } else { "s" }
            ));
        }
        for op in cs.iter().flatten() {
            let got = b
                .operand_type(op)
                .map_err(|e| format!("the pullback returned a bad cotangent: {e}"))?;
            if got != Type::F64 {
                return Err(format!(
                    "the pullback returned a {got} as a cotangent of argument {}",
                    i + 1
                ));
            }
        }
        if !c {
            ret.extend(cs.iter().map(|op| op.unwrap_or(emit::f64c(0.0))));
        }
    }
    let after = |e: RuleError| format!("cannot continue after the pullback: {e}");
    let r = value(&mut b, Prim::Tuple, &ret).map_err(after)?;
    b.ret(r).map_err(|e| after(e.into()))?;
    Ok(f)
}

/// A copy of `op` (of type `ty`) that shares no array with it: arrays are
/// copied, tuples and duals holding arrays rebuilt, everything else is
/// itself.
fn deep_copy(b: &mut FuncBuilder<'_>, op: Operand, ty: &Type) -> Result<Operand, RuleError> {
    match ty {
        Type::Array(_) => value(b, Prim::Copy, &[op]),
        Type::Tuple(elems) if emit::contains_array(ty) => {
            let mut parts = Vec::with_capacity(elems.len());
            for (k, elem) in elems.iter().enumerate() {
                let k = i64::try_from(k)
                    .map_err(|_| RuleError::Unsupported("tuple too wide".into()))?;
                let field = value(b, Prim::Getfield, &[op, Operand::from(k)])?;
                parts.push(deep_copy(b, field, elem)?);
            }
            value(b, Prim::Tuple, &parts)
        }
        Type::Dual(..) if emit::contains_array(ty) => {
            let Some((inner, tangent, lanes)) = ty.dual_parts() else {
                return Ok(op);
            };
            let mut parts = Vec::with_capacity(lanes + 1);
            let p = value(b, Prim::Primal, &[op])?;
            parts.push(deep_copy(b, p, inner)?);
            for k in 0..lanes {
                let k = i64::try_from(k)
                    .map_err(|_| RuleError::Unsupported("too many lanes".into()))?;
                let t = value(b, Prim::Tangent, &[op, Operand::from(k)])?;
                parts.push(deep_copy(b, t, &tangent)?);
            }
            value(b, Prim::Dual, &parts)
        }
        _ => Ok(op),
    }
}

/// `for i in 0..min(length(dst), length(src)) { dst[i] = src[i] }`.
fn copy_into(b: &mut FuncBuilder<'_>, dst: Operand, src: Operand) -> Result<(), RuleError> {
    let ld = value(b, Prim::Length, &[dst])?;
    let ls = value(b, Prim::Length, &[src])?;
    let shorter = value(b, Prim::Lt, &[ld, ls])?;
    let n = value(b, Prim::Select, &[shorter, ld, ls])?;
    emit::for_range(b, n, |b, i| {
        let x = value(b, Prim::Arrayref, &[src, i])?;
        emit::effect(b, Prim::Arrayset, &[dst, i, x])
    })
}
