//! Value and gradient by forward mode: the forward rule of a function run once
//! per batch of tangent directions, each direction a unit vector on one f64 of
//! the differentiated arguments.
//!
//! Assumes a verified module. Guarantees: every pass starts from fresh copies
//! of the arguments' entry values (a function that writes into its argument
//! arrays sees the same input in every pass), so the gradient is with respect
//! to the values on entry (SYNTAX.md §3); ceil(n / width) passes for n
//! differentiated f64s (one pass when n is 0, for the value).
//!
//! Sparse mode ([`Lanes::Sparse`], `irad grad --sparse`): one
//! pass of the sparse rule `@f.fwds` through a wrapper `@f.fwds.grad` built in
//! IR, which seeds the k-th differentiated f64 with `sonehot(k)` (zero
//! handles elsewhere), calls the rule, and materialises the result's tangent
//! with `sdense`; the gradient has the dense layout. Its cost is the primal's
//! plus O(1) per tangent operation plus the materialisation (docs/forward.md,
//! "Sparse mode").

use super::{Forward, ForwardError};
pub use crate::grad::{GradError, GradOptions, Gradient};
use crate::grad::{Request, check_request, deep_copy};
use irad_ir::interp::{ArrayData, ArrayRef, Executor, RunOptions, Val};
use irad_ir::{Const, FuncBuilder, FuncId, Lanes, Location, Module, Operand, Prim, Scalar, Type};
use irad_rules::{RuleError, emit};
use std::num::NonZeroU32;
use std::rc::Rc;

/// One differentiated f64 of the arguments: argument, tuple path, array index.
#[derive(Clone, Debug)]
struct Slot {
    arg: usize,
    path: Vec<usize>,
    index: Option<usize>,
}

/// The value and gradient of `f` at `args` by forward mode, deriving the rule
/// through `fwd` (added to `module`) and running it in the interpreter.
pub fn gradient(
    module: &mut Module,
    fwd: &mut Forward<'_>,
    f: FuncId,
    args: &[Val],
    opts: &GradOptions,
) -> Result<Gradient, GradError> {
    let plan = plan(module, fwd, f, args, opts)?;
    let mut exec = (opts.exec)(module, fwd)?;
    plan.run(&mut *exec, args, &opts.run)
}

/// A forward-mode gradient ready to run: the checked request, the batch
/// width, and the rule of `f` at that width, derived into the module.
/// [`ForwardPlan::run`] needs only an executor of that module, so compiled
/// code can be kept and run many times.
#[derive(Clone, Debug)]
pub struct ForwardPlan {
    req: Request,
    /// The dense batch width of a pass (unused in sparse mode).
    width: NonZeroU32,
    rule: FuncId,
    /// Sparse mode: the wrapper `@f.fwds.grad` that seeds, runs the rule and
    /// materialises (its result is `(value, dense gradient)`).
    sparse: Option<FuncId>,
}

/// Checks the request, chooses the width (no more lanes than f64s to
/// differentiate) and derives the rule (see [`gradient`]).
pub fn plan(
    module: &mut Module,
    fwd: &mut Forward<'_>,
    f: FuncId,
    args: &[Val],
    opts: &GradOptions,
) -> Result<ForwardPlan, GradError> {
    let req = check_request(module, f, args, opts.wrt.as_deref())?;
    fwd.set_activity(opts.activity);
    let width = match opts.lanes {
        Lanes::Dense(n) => n,
        Lanes::Sparse => {
            let rule = fwd.rule_wrt(module, f, Lanes::Sparse, &req.wrt)?;
            let wrapper = sparse_wrapper(module, f, rule, &req)?;
            return Ok(ForwardPlan {
                req,
                width: NonZeroU32::MIN,
                rule,
                sparse: Some(wrapper),
            });
        }
    };
    let mut slots = Vec::new();
    for &i in &req.wrt {
        collect_slots(&args[i], &req.params[i], i, &mut Vec::new(), &mut slots);
    }
    // No more lanes than directions: extra lanes would carry zeros.
    let directions = u32::try_from(slots.len()).unwrap_or(u32::MAX);
    let width = NonZeroU32::new(directions).map_or(NonZeroU32::MIN, |n| width.min(n));
    let rule = fwd.rule_wrt(module, f, Lanes::Dense(width), &req.wrt)?;
    Ok(ForwardPlan {
        req,
        width,
        rule,
        sparse: None,
    })
}

impl ForwardPlan {
    /// The forward rule the plan runs.
    pub fn rule(&self) -> FuncId {
        self.rule
    }

    /// The function a run calls: the rule, or in sparse mode the wrapper
    /// around it.
    pub fn entry(&self) -> FuncId {
        self.sparse.unwrap_or(self.rule)
    }

    /// The value and gradient at `args` (of the types the plan was made
    /// for): ceil(n / width) passes of the rule on `exec`.
    pub fn run(
        &self,
        exec: &mut dyn Executor,
        args: &[Val],
        run: &RunOptions,
    ) -> Result<Gradient, GradError> {
        match self.sparse {
            Some(wrapper) => sparse_pass(&self.req, wrapper, exec, args, run),
            None => passes(&self.req, self.width, self.rule, exec, args, run),
        }
    }
}

/// The one pass of sparse mode: the wrapper on fresh copies of the
/// arguments, its dense gradient scattered into the arguments' layout.
fn sparse_pass(
    req: &Request,
    wrapper: FuncId,
    exec: &mut dyn Executor,
    args: &[Val],
    run: &RunOptions,
) -> Result<Gradient, GradError> {
    let Request { floc, params, wrt } = req;
    let mut slots = Vec::new();
    for &i in wrt {
        collect_slots(&args[i], &params[i], i, &mut Vec::new(), &mut slots);
    }
    let mut grads: Vec<Option<Val>> = (0..args.len())
        .map(|i| wrt.contains(&i).then(|| zero_tangent(&args[i], &params[i])))
        .collect();
    let copies: Vec<Val> = args.iter().map(deep_copy).collect();
    // The wrapper is irad's, not the user's: it is no call level.
    let run = RunOptions {
        driver_frames: run.driver_frames.saturating_add(1),
        ..run.clone()
    };
    let out = exec.run(wrapper, &copies, &run)?;
    let bad = || {
        internal(
            floc.clone(),
            "the sparse gradient wrapper returned something else",
        )
    };
    let Val::Tuple(parts) = out else {
        return Err(bad());
    };
    let (Some(value), Some(Val::Array(g))) = (parts.first(), parts.get(1)) else {
        return Err(bad());
    };
    let dense = match &*g.0.borrow() {
        ArrayData::F64(xs) if xs.len() == slots.len() => xs.clone(),
        _ => return Err(bad()),
    };
    for (slot, d) in slots.iter().zip(dense) {
        if let Some(Some(g)) = grads.get_mut(slot.arg) {
            set_slot(g, &slot.path, slot.index, d);
        }
    }
    Ok(Gradient {
        value: value.clone(),
        gradient: grads,
        passes: 1,
        unbounded_loops: Vec::new(),
    })
}

/// `@f.fwds.grad` for `req` ([`sparse_gradient_wrapper`]): every
/// differentiated f64 of the arguments (in the order of `collect_slots`)
/// seeded with `sonehot(k)`, the others with zero handles.
fn sparse_wrapper(
    module: &mut Module,
    f: FuncId,
    rule: FuncId,
    req: &Request,
) -> Result<FuncId, GradError> {
    sparse_gradient_wrapper(module, f, rule, &req.params, &req.wrt)
        .map_err(|e| internal(req.floc.clone(), e))
}

/// Builds `@f.fwds.grad(params) -> (f64, [f64])` (a fresh name) in
/// `module`: seeds the f64s of the arguments in `wrt` with `sonehot(0)`,
/// `sonehot(1)`, ... in the dense gradient's order ([`sparse_seed`]), the
/// others with zero handles, calls `rule` (the sparse rule of `f`, of
/// parameter types `params`) and returns the value and `sdense` of the
/// result's tangent. Also the function the facade differentiates again
/// for forward over sparse (`irad hvp --mode fwd-over-sparse`).
pub fn sparse_gradient_wrapper(
    module: &mut Module,
    f: FuncId,
    rule: FuncId,
    params: &[Type],
    wrt: &[usize],
) -> Result<FuncId, RuleError> {
    let name = module
        .get(f)
        .map(|func| func.name.clone())
        .unwrap_or_default();
    let name = super::fresh_derived_name(module, &name, "fwds.grad");
    let ps = params.iter().map(|t| (None, t.clone())).collect();
    let ret = Type::tuple(vec![Type::F64, Type::Array(Scalar::F64)]);
    let id = module.declare_func(&name, ps, ret)?;
    let mut b = FuncBuilder::new(module, id)?;
    let entry = b.create_block();
    b.switch_to_block(entry)?;
    let mut next = Operand::Const(Const::I64(0));
    let mut rule_args = Vec::with_capacity(params.len());
    for (i, ty) in params.iter().enumerate() {
        let p = Operand::Value(b.param(i)?);
        if !ty.has_tangent() {
            rule_args.push(p);
            continue;
        }
        let t = if wrt.contains(&i) {
            sparse_seed(&mut b, ty, p, &mut next)?
        } else {
            emit::zero_tangent_at(&mut b, ty, p, Lanes::Sparse)?
                .ok_or_else(|| RuleError::Unsupported(format!("no zero tangent of {ty}")))?
        };
        rule_args.push(emit::value(&mut b, Prim::Dual, &[p, t])?);
    }
    let r = b
        .invoke(rule, &rule_args)?
        .map(Operand::Value)
        .ok_or_else(|| RuleError::Unsupported("the rule has no result".into()))?;
    let v = emit::value(&mut b, Prim::Primal, &[r])?;
    let t = emit::value(&mut b, Prim::Tangent, &[r, Operand::from(0i64)])?;
    let g = emit::value(&mut b, Prim::Sdense, &[t, next])?;
    let out = emit::value(&mut b, Prim::Tuple, &[v, g])?;
    b.ret(out)?;
    Ok(id)
}

/// The sparse tangent of a value `p` of type `ty` whose f64s are the
/// directions `next`, `next + 1`, ... (depth-first, array elements in
/// order: `collect_slots` order), emitted at the builder's position;
/// advances `next` (an i64 operand) past them. Recursive over tuples, as
/// deep as the type (at most `MAX_NESTING`). Also the seeds of the sparse
/// Hessian (the facade's `src/sparse_hessian.rs`).
pub fn sparse_seed(
    b: &mut FuncBuilder<'_>,
    ty: &Type,
    p: Operand,
    next: &mut Operand,
) -> Result<Operand, RuleError> {
    match ty {
        Type::F64 => {
            let t = emit::value(b, Prim::Sonehot, &[*next])?;
            *next = emit::value(b, Prim::Iadd, &[*next, Operand::from(1i64)])?;
            Ok(t)
        }
        Type::Array(Scalar::F64) => {
            let n = emit::value(b, Prim::Length, &[p])?;
            let ts = Operand::Value(b.alloc(Scalar::Sparse, n)?);
            let base = *next;
            emit::for_range(b, n, |b, i| {
                let k = emit::value(b, Prim::Iadd, &[base, i])?;
                let h = emit::value(b, Prim::Sonehot, &[k])?;
                emit::effect(b, Prim::Arrayset, &[ts, i, h])
            })?;
            *next = emit::value(b, Prim::Iadd, &[base, n])?;
            Ok(ts)
        }
        Type::Tuple(elems) => {
            let mut parts = Vec::with_capacity(elems.len());
            for (k, elem) in elems.iter().enumerate() {
                if !elem.has_tangent() {
                    parts.push(emit::unit());
                    continue;
                }
                let k = i64::try_from(k)
                    .map_err(|_| RuleError::Unsupported("tuple too wide".into()))?;
                let c = emit::value(b, Prim::Getfield, &[p, Operand::from(k)])?;
                parts.push(sparse_seed(b, elem, c, next)?);
            }
            emit::value(b, Prim::Tuple, &parts)
        }
        // A dense dual (sparse over forward): its parts in order, the
        // primal's directions first, as `collect_slots` lists them.
        Type::Dual(_, Lanes::Dense(_)) => {
            let (inner, tan, n) = ty
                .dual_parts()
                .ok_or_else(|| RuleError::Unsupported(format!("no sparse seed for {ty}")))?;
            let mut parts = Vec::with_capacity(n + 1);
            let p0 = emit::value(b, Prim::Primal, &[p])?;
            parts.push(sparse_seed(b, inner, p0, next)?);
            for k in 0..n {
                let k = i64::try_from(k).map_err(|_| RuleError::Unsupported("lanes".into()))?;
                let pk = emit::value(b, Prim::Tangent, &[p, Operand::from(k)])?;
                parts.push(sparse_seed(b, &tan, pk, next)?);
            }
            emit::value(b, Prim::Dual, &parts)
        }
        _ => Err(RuleError::Unsupported(format!("no sparse seed for {ty}"))),
    }
}

fn passes(
    req: &Request,
    width: NonZeroU32,
    rule: FuncId,
    exec: &mut dyn Executor,
    args: &[Val],
    run: &RunOptions,
) -> Result<Gradient, GradError> {
    let Request { floc, params, wrt } = req.clone();
    let mut slots = Vec::new();
    for &i in &wrt {
        collect_slots(&args[i], &params[i], i, &mut Vec::new(), &mut slots);
    }
    let mut grads: Vec<Option<Val>> = (0..args.len())
        .map(|i| wrt.contains(&i).then(|| zero_tangent(&args[i], &params[i])))
        .collect();
    let mut value = None;
    let mut passes = 0;
    let chunks: Vec<&[Slot]> = if slots.is_empty() {
        vec![&[]]
    } else {
        slots.chunks(width.get() as usize).collect()
    };
    for chunk in chunks {
        let dual_args: Vec<Val> = args
            .iter()
            .zip(&params)
            .enumerate()
            .map(|(i, (arg, ty))| seeded(arg, ty, i, chunk, width))
            .collect();
        let out = exec.run(rule, &dual_args, run)?;
        passes += 1;
        let Val::Dual(parts) = out else {
            return Err(internal(floc, "the forward rule did not return a dual"));
        };
        if value.is_none() {
            value = parts.first().cloned();
        }
        for (k, slot) in chunk.iter().enumerate() {
            let d = match parts.get(k + 1) {
                Some(Val::F64(d)) => *d,
                _ => {
                    return Err(internal(floc, "a tangent of the result is not f64"));
                }
            };
            if let Some(Some(g)) = grads.get_mut(slot.arg) {
                set_slot(g, &slot.path, slot.index, d);
            }
        }
    }
    let value = value.ok_or_else(|| internal(floc, "no pass of the forward rule ran"))?;
    Ok(Gradient {
        value,
        gradient: grads,
        passes,
        unbounded_loops: Vec::new(),
    })
}

/// An internal error of forward mode (a bug, not a fault of the request)
/// about `loc`: the message `internal error: {what}`.
fn internal(loc: Location, what: impl std::fmt::Display) -> GradError {
    GradError::Forward(ForwardError::internal(loc, what))
}

/// Every f64 inside `val` (of type `ty`), as slots of argument `arg` (the
/// parts of a dual in order).
fn collect_slots(val: &Val, ty: &Type, arg: usize, path: &mut Vec<usize>, out: &mut Vec<Slot>) {
    match (val, ty) {
        (Val::F64(_), Type::F64) => out.push(Slot {
            arg,
            path: path.clone(),
            index: None,
        }),
        (Val::Array(a), Type::Array(Scalar::F64)) => {
            let n = a.0.borrow().len();
            out.extend((0..n).map(|i| Slot {
                arg,
                path: path.clone(),
                index: Some(i),
            }));
        }
        (Val::Tuple(vals), Type::Tuple(tys)) => {
            for (k, (v, t)) in vals.iter().zip(tys.iter()).enumerate() {
                if t.has_tangent() {
                    path.push(k);
                    collect_slots(v, t, arg, path, out);
                    path.pop();
                }
            }
        }
        // A dual argument (forward over forward): its parts in order, the
        // path's step the part's index.
        (Val::Dual(parts), _) => {
            if let Some((inner, tan, _)) = ty.dual_parts() {
                for (k, v) in parts.iter().enumerate() {
                    path.push(k);
                    collect_slots(v, if k == 0 { inner } else { &tan }, arg, path, out);
                    path.pop();
                }
            }
        }
        _ => {}
    }
}

/// The zero tangent of `val` (of type `ty`, which has a tangent).
fn zero_tangent(val: &Val, ty: &Type) -> Val {
    match (val, ty) {
        (Val::Array(a), Type::Array(Scalar::F64)) => {
            let n = a.0.borrow().len();
            Val::Array(ArrayRef::new(ArrayData::F64(vec![0.0; n])))
        }
        (Val::Tuple(vals), Type::Tuple(tys)) => Val::Tuple(
            vals.iter()
                .zip(tys.iter())
                .map(|(v, t)| {
                    if t.has_tangent() {
                        zero_tangent(v, t)
                    } else {
                        Val::Unit
                    }
                })
                .collect(),
        ),
        (Val::Dual(parts), _) => match ty.dual_parts() {
            Some((inner, tan, _)) => Val::Dual(
                parts
                    .iter()
                    .enumerate()
                    .map(|(k, v)| zero_tangent(v, if k == 0 { inner } else { &tan }))
                    .collect(),
            ),
            None => Val::F64(0.0),
        },
        _ => Val::F64(0.0),
    }
}

/// Writes `d` into the slot at `path`/`index` of tangent value `g`.
fn set_slot(g: &mut Val, path: &[usize], index: Option<usize>, d: f64) {
    match (path.split_first(), g) {
        (Some((&k, rest)), Val::Tuple(vals) | Val::Dual(vals)) => {
            let mut elems: Vec<Val> = vals.to_vec();
            if let Some(e) = elems.get_mut(k) {
                set_slot(e, rest, index, d);
            }
            *vals = Rc::from(elems);
        }
        (None, Val::Array(a)) => {
            if let (Some(i), ArrayData::F64(xs)) = (index, &mut *a.0.borrow_mut())
                && let Some(x) = xs.get_mut(i)
            {
                *x = d;
            }
        }
        (None, g @ Val::F64(_)) => *g = Val::F64(d),
        _ => {}
    }
}

/// Argument `i` as the rule takes it: a dual whose lane k is the unit
/// direction of `chunk[k]` (zero where that slot is in another argument).
fn seeded(arg: &Val, ty: &Type, i: usize, chunk: &[Slot], width: NonZeroU32) -> Val {
    let primal = deep_copy(arg);
    if !ty.has_tangent() {
        return primal;
    }
    let width = width.get() as usize;
    let mut parts = Vec::with_capacity(width + 1);
    parts.push(primal);
    for k in 0..width {
        let mut t = zero_tangent(arg, ty);
        if let Some(slot) = chunk.get(k).filter(|s| s.arg == i) {
            set_slot(&mut t, &slot.path, slot.index, 1.0);
        }
        parts.push(t);
    }
    Val::Dual(parts.into())
}
