//! The Hessian by sparse forward mode over the reverse pieces (docs/reverse.md,
//! "Forward over reverse", sparse mode; `irad hessian --sparse`): instead of
//! one dense forward pass per batch of 8 inputs, one pass of the rule
//! `@f.vjp.fwds` (the forward rule of `@f.vjp` in sparse mode,
//! docs/forward.md "Sparse mode": its tangents are handles of the sparse
//! tangent builder, and the tapes carry `dual<T, sparse>`), the k-th input
//! seeded with `sonehot(k)`; the tangent of each gradient entry is then row
//! i of the Hessian, materialised with `sdense`. The handles live only
//! during one run, so the seeding, the rule and the materialisation are one
//! function, `@f.hessian` (built here in IR, run by the interpreter or
//! compiled like any function): `(params of f) -> (f64, [f64], [f64])`, the
//! value, the gradient over the inputs (flattened) and the Hessian (n × n,
//! row-major).
//!
//! Assumes a request checked by `hvp.rs` (a function returning f64,
//! arguments of its types, `wrt` checked). Guarantees: the derived
//! functions are optimised by the request's schedule and run once on fresh
//! copies of the arguments, with a provider of forward rules (sparse ones
//! included) and reverse pieces for calls through function values; the
//! rows and columns are the f64s of the `wrt` arguments in the order of
//! [`crate::hessian`]'s; the products are the dense ones' terms summed in
//! another order (to rounding); a result of an unexpected shape is an
//! internal error, never a panic.

use crate::deriv::{ReverseRun, copies, deep_copy, executor, forward_rule_of, like_with, run_on};
use crate::hvp::Rules;
use crate::hvp_export::{array_leaves, leaf as leaf_of};
use crate::{Error, GradRequest, Source, internal, rules};
use irad_ir::interp::value::{ArrayData, Val};
use irad_ir::{Const, FuncBuilder, FuncId, Lanes, Module, Operand, Prim, Scalar, Type};
use irad_passes::forward::grad::sparse_seed;
use irad_rules::{RuleError, emit};

/// The value, the gradient (one entry per argument, `None` outside `wrt`),
/// the rows of the Hessian, and the module with the derived functions.
pub(crate) type SparseHessian = (Val, Vec<Option<Val>>, Vec<Vec<f64>>, Module);

/// The Hessian of `req.func` (of parameter types `params`) over the f64s of
/// the arguments in `wrt` (`n` of them) by one run of `@f.hessian`.
pub(crate) fn hessian(
    src: &Source,
    module: &Module,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
    params: &[Type],
    wrt: &[usize],
    n: usize,
) -> Result<SparseHessian, Error> {
    let rev = ReverseRun::new(src, module.clone(), registry, req, req.func, wrt)?;
    let (mut m, fwd, rule) = forward_rule_of(
        src,
        rev.m,
        registry,
        req,
        rev.wrapper.id,
        Lanes::Sparse,
        None,
    )?;
    let wrapper = build(&mut m, req.func, rule, params, wrt)
        .map_err(|e| internal(src, &format!("building the sparse Hessian: {e}")))?;
    let mut rules = Rules {
        fwd,
        rev: rev.cache,
    };
    let out = {
        let mut exec = executor(src, req, module.len(), &mut m, &mut rules)?;
        run_on(src, &mut *exec, wrapper, &copies(req.args), req)?
    };
    let wrong = |what: &str| internal(src, &format!("the sparse Hessian {what}"));
    let Val::Tuple(parts) = out else {
        return Err(wrong("did not return a tuple"));
    };
    let [value, g, h] = &parts[..] else {
        return Err(wrong("returned the wrong shape"));
    };
    let (g, h) = (f64s(g), f64s(h));
    if g.len() != n || h.len() != n * n {
        return Err(wrong("returned arrays of the wrong lengths"));
    }
    let mut next = g.iter().copied();
    let gradient = req
        .args
        .iter()
        .zip(params)
        .enumerate()
        .map(|(i, (a, ty))| {
            if wrt.contains(&i) && ty.has_tangent() {
                Some(like_with(a, ty, &mut || next.next().unwrap_or(0.0)))
            } else {
                None
            }
        })
        .map(|g| g.map(|v| tangent_shape(&v)))
        .collect();
    let rows = h.chunks(n.max(1)).take(n).map(<[f64]>::to_vec).collect();
    Ok((value.clone(), gradient, rows, m))
}

/// A gradient entry as [`crate::grad`] shapes it: `()` for the tuple
/// components without f64 (which [`like_with`] copies from the argument).
fn tangent_shape(v: &Val) -> Val {
    match v {
        Val::I64(_) | Val::Bool(_) | Val::Func(_) => Val::Unit,
        Val::Array(a) if !matches!(&*a.0.borrow(), ArrayData::F64(_)) => Val::Unit,
        Val::Tuple(vs) => Val::Tuple(vs.iter().map(tangent_shape).collect()),
        other => deep_copy(other),
    }
}

/// The elements of an f64 array value (none for anything else).
fn f64s(v: &Val) -> Vec<f64> {
    match v {
        Val::Array(a) => match &*a.0.borrow() {
            ArrayData::F64(xs) => xs.clone(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// Builds `@f.hessian` (see the module comment) around `rule` =
/// `@f.vjp.fwds`.
fn build(
    m: &mut Module,
    f: FuncId,
    rule: FuncId,
    params: &[Type],
    wrt: &[usize],
) -> Result<FuncId, String> {
    let base = m
        .get(f)
        .map(|func| func.name.clone())
        .ok_or("no function")?;
    let mut name = format!("{base}.hessian");
    let mut k = 1;
    while m.by_name(&name).is_some() {
        k += 1;
        name = format!("{base}.hessian{k}");
    }
    let f64s = Type::Array(Scalar::F64);
    let ps = params.iter().map(|t| (None, t.clone())).collect();
    let ret = Type::tuple(vec![Type::F64, f64s.clone(), f64s]);
    let id = m.declare_func(&name, ps, ret).map_err(|e| e.to_string())?;
    let mut b = FuncBuilder::new(m, id).map_err(|e| e.to_string())?;
    let entry = b.create_block();
    b.switch_to_block(entry).map_err(|e| e.to_string())?;
    body(&mut b, rule, params, wrt).map_err(|e| e.to_string())?;
    Ok(id)
}

/// The statements of `@f.hessian`: seeds, shadows, the rule, then one
/// `sdense` per gradient entry into the rows of H.
fn body(
    b: &mut FuncBuilder<'_>,
    rule: FuncId,
    params: &[Type],
    wrt: &[usize],
) -> Result<(), RuleError> {
    let mut next = Operand::Const(Const::I64(0));
    let mut args = Vec::with_capacity(params.len() + 1);
    // Per argument, the (shadow, tangent of the shadow) of each of its
    // `[f64]` arrays.
    let mut shadows: Vec<Vec<(Operand, Operand)>> = Vec::with_capacity(params.len());
    for (i, ty) in params.iter().enumerate() {
        let p = Operand::Value(b.param(i)?);
        let mut mine = Vec::new();
        let mut arrays = Vec::new();
        array_leaves(b, p, ty, &mut arrays)?;
        for a in arrays {
            let len = emit::value(b, Prim::Length, &[a])?;
            let s = emit::value(b, Prim::Zeros, &[len])?;
            let ts = Operand::Value(b.alloc(Scalar::Sparse, len)?);
            mine.push((s, ts));
        }
        shadows.push(mine);
        if !ty.has_tangent() {
            args.push(p);
            continue;
        }
        let t = if wrt.contains(&i) {
            sparse_seed(b, ty, p, &mut next)?
        } else {
            emit::zero_tangent_at(b, ty, p, Lanes::Sparse)?.unwrap_or_else(emit::unit)
        };
        args.push(emit::value(b, Prim::Dual, &[p, t])?);
    }
    for &(s, ts) in shadows.iter().flatten() {
        args.push(emit::value(b, Prim::Dual, &[s, ts])?);
    }
    let zero = emit::value(b, Prim::Szero, &[])?;
    args.push(emit::value(b, Prim::Dual, &[emit::f64c(1.0), zero])?);
    let r = b
        .invoke(rule, &args)?
        .map(Operand::Value)
        .ok_or_else(|| RuleError::Unsupported("the rule has no result".into()))?;
    let pr = emit::value(b, Prim::Primal, &[r])?;
    let tr = emit::value(b, Prim::Tangent, &[r, Operand::from(0i64)])?;
    let value = emit::value(b, Prim::Getfield, &[pr, Operand::from(0i64)])?;
    let n = next;
    let g = emit::value(b, Prim::Zeros, &[n])?;
    let nn = emit::value(b, Prim::Imul, &[n, n])?;
    let h = emit::value(b, Prim::Zeros, &[nn])?;
    let total: usize = params.iter().map(Type::cotangent_leaves).sum();
    let cots = if total == 0 {
        None
    } else {
        Some((
            emit::value(b, Prim::Getfield, &[pr, Operand::from(1i64)])?,
            emit::value(b, Prim::Getfield, &[tr, Operand::from(1i64)])?,
        ))
    };
    let out = Out {
        n,
        g,
        h,
        total,
        cots,
    };
    let mut row = Operand::Const(Const::I64(0));
    let mut leaf = 0;
    for ((i, ty), arrays) in params.iter().enumerate().zip(&shadows) {
        let mut arrays = arrays.iter().copied();
        if wrt.contains(&i) {
            out.rows(b, ty, &mut row, &mut leaf, &mut arrays)?;
        } else {
            leaf += ty.cotangent_leaves();
        }
    }
    let t = emit::value(b, Prim::Tuple, &[value, g, h])?;
    b.ret(t)?;
    Ok(())
}

/// Where the rows go: `n` inputs, the gradient `g` and the Hessian `h`
/// arrays, and the pullback's `total` cotangents (primal and tangent
/// parts) when there are any.
struct Out {
    n: Operand,
    g: Operand,
    h: Operand,
    total: usize,
    cots: Option<(Operand, Operand)>,
}

impl Out {
    /// The rows of the gradient entries of an argument of type `ty`, from
    /// row `row` on: its f64s outside arrays are cotangent leaves `leaf`,
    /// `leaf + 1`, ...; its arrays are the next of `arrays`.
    fn rows(
        &self,
        b: &mut FuncBuilder<'_>,
        ty: &Type,
        row: &mut Operand,
        leaf: &mut usize,
        arrays: &mut dyn Iterator<Item = (Operand, Operand)>,
    ) -> Result<(), RuleError> {
        match ty {
            Type::F64 => {
                let (cp, ct) = self
                    .cots
                    .ok_or_else(|| RuleError::Unsupported("no cotangents".into()))?;
                let g = leaf_of(b, cp, *leaf, self.total)?;
                let t = leaf_of(b, ct, *leaf, self.total)?;
                *leaf += 1;
                self.row(b, *row, g, t)?;
                *row = emit::value(b, Prim::Iadd, &[*row, Operand::from(1i64)])?;
            }
            Type::Array(Scalar::F64) => {
                let (s, ts) = arrays
                    .next()
                    .ok_or_else(|| RuleError::Unsupported("too few shadows".into()))?;
                let len = emit::value(b, Prim::Length, &[s])?;
                let base = *row;
                emit::for_range(b, len, |b, e| {
                    let r = emit::value(b, Prim::Iadd, &[base, e])?;
                    let g = emit::value(b, Prim::Arrayref, &[s, e])?;
                    let t = emit::value(b, Prim::Arrayref, &[ts, e])?;
                    self.row(b, r, g, t)
                })?;
                *row = emit::value(b, Prim::Iadd, &[base, len])?;
            }
            Type::Tuple(elems) => {
                for e in elems.iter() {
                    self.rows(b, e, row, leaf, arrays)?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Gradient entry `r` is `g`; row `r` of H is `sdense(t, n)`.
    fn row(
        &self,
        b: &mut FuncBuilder<'_>,
        r: Operand,
        g: Operand,
        t: Operand,
    ) -> Result<(), RuleError> {
        emit::effect(b, Prim::Arrayset, &[self.g, r, g])?;
        let dense = emit::value(b, Prim::Sdense, &[t, self.n])?;
        let offset = emit::value(b, Prim::Imul, &[r, self.n])?;
        let h = self.h;
        emit::for_range(b, self.n, |b, j| {
            let x = emit::value(b, Prim::Arrayref, &[dense, j])?;
            let at = emit::value(b, Prim::Iadd, &[offset, j])?;
            emit::effect(b, Prim::Arrayset, &[h, at, x])
        })
    }
}
