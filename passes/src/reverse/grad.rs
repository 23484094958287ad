//! Value and gradient by reverse mode: the forward sweep once, then the
//! pullback once with seed 1, whatever the number of inputs.
//!
//! Assumes a verified, normalised module. Guarantees: the pieces run on fresh
//! copies of the arguments (the caller's arrays are not touched), so the
//! gradient is with respect to the values on entry (SYNTAX.md §3); array
//! gradients are the shadows the pullback added into, starting from zero.

use super::Reverse;
pub use crate::grad::{GradError, GradOptions, Gradient};
use crate::grad::{Request, check_request, deep_copy};
use irad_ir::interp::{ArrayData, ArrayRef, Executor, RunOptions, Val};
use irad_ir::{FuncId, Location, Module, Scalar, Type};
use std::collections::VecDeque;

/// The value and gradient of `f` at `args` by reverse mode, deriving the
/// pieces through `rev` (added to `module`) and running them in the
/// interpreter. `opts.lanes` is ignored (reverse mode has no batch width).
pub fn gradient(
    module: &mut Module,
    rev: &mut Reverse<'_>,
    f: FuncId,
    args: &[Val],
    opts: &GradOptions,
) -> Result<Gradient, GradError> {
    let plan = plan(module, rev, f, args, opts)?;
    let mut exec = (opts.exec)(module, rev)?;
    plan.run(&mut *exec, args, &opts.run)
}

/// A reverse-mode gradient ready to run: the checked request and the pieces
/// of `f`, derived into the module. [`ReversePlan::run`] needs only an
/// executor of that module, so compiled code can be kept and run many times.
#[derive(Clone, Debug)]
pub struct ReversePlan {
    req: Request,
    fwd: FuncId,
    back: FuncId,
    /// The cache's [`Reverse::unbounded_loops`] once the pieces were derived.
    unbounded: Vec<super::UnboundedLoop>,
}

/// Checks the request and derives the pieces of `f` (see [`gradient`]).
pub fn plan(
    module: &mut Module,
    rev: &mut Reverse<'_>,
    f: FuncId,
    args: &[Val],
    opts: &GradOptions,
) -> Result<ReversePlan, GradError> {
    let req = check_request(module, f, args, opts.wrt.as_deref())?;
    rev.set_activity(opts.activity);
    rev.set_tape_limit(opts.tape_limit);
    rev.set_checkpoint_schedule(opts.checkpoints.clone());
    rev.set_on_unbounded(opts.on_unbounded.clone());
    let (fwd, back) = rev.rule_wrt(module, f, &req.wrt)?;
    Ok(ReversePlan {
        req,
        fwd,
        back,
        unbounded: rev.unbounded_loops().to_vec(),
    })
}

impl ReversePlan {
    /// The argument positions the gradient is with respect to.
    pub fn wrt(&self) -> &[usize] {
        &self.req.wrt
    }

    /// The forward sweep and the pullback the plan runs.
    pub fn pieces(&self) -> (FuncId, FuncId) {
        (self.fwd, self.back)
    }

    /// The loops of the pieces whose records grow with their iterations
    /// though a tape limit or the checkpoint schedule asked for
    /// checkpointing ([`Reverse::unbounded_loops`] once the pieces were
    /// derived; not those of rules derived later, at run time).
    pub fn unbounded_loops(&self) -> &[super::UnboundedLoop] {
        &self.unbounded
    }

    /// The value and gradient at `args` (of the shapes the plan was made
    /// for): the forward sweep, then the pullback with seed 1, on `exec`.
    pub fn run(
        &self,
        exec: &mut dyn Executor,
        args: &[Val],
        run: &RunOptions,
    ) -> Result<Gradient, GradError> {
        let mut g = sweeps(&self.req, self.fwd, self.back, exec, args, run)?;
        g.unbounded_loops.clone_from(&self.unbounded);
        Ok(g)
    }
}

fn sweeps(
    req: &Request,
    fwd: FuncId,
    back: FuncId,
    exec: &mut dyn Executor,
    args: &[Val],
    run: &RunOptions,
) -> Result<Gradient, GradError> {
    let Request { floc, params, wrt } = req.clone();
    let mut call: Vec<Val> = args.iter().map(deep_copy).collect();
    let mut shadows = Vec::new();
    for a in args {
        zero_shadows(a, &mut shadows);
    }
    call.extend(shadows.iter().cloned());
    let value = exec.run(fwd, &call, run)?;
    let cots = exec.run(back, &[Val::F64(1.0)], run)?;
    let total: usize = params.iter().map(Type::cotangent_leaves).sum();
    let mut leaves: VecDeque<f64> = match (total, cots) {
        (0, _) => VecDeque::new(),
        (1, Val::F64(x)) => VecDeque::from([x]),
        (_, Val::Tuple(xs)) => xs
            .iter()
            .map(|x| match x {
                Val::F64(x) => Ok(*x),
                _ => Err(internal(floc.clone(), "a cotangent is not f64")),
            })
            .collect::<Result<_, _>>()?,
        _ => {
            return Err(internal(floc, "the pullback returned the wrong shape"));
        }
    };
    let mut shadows: VecDeque<Val> = shadows.into();
    let mut gradient = Vec::with_capacity(args.len());
    for (i, (a, t)) in args.iter().zip(&params).enumerate() {
        let g = assemble(a, t, &mut leaves, &mut shadows);
        gradient.push(if wrt.contains(&i) { g } else { None });
    }
    Ok(Gradient {
        value,
        gradient,
        passes: 1,
        unbounded_loops: Vec::new(),
    })
}

/// A fresh zero shadow for every `[f64]` array in `val`, depth-first through
/// tuples and the parts of duals: the shadows `@f.rev.fwd` takes after the
/// arguments ([`Type::rev_fwd_fn`]).
pub fn zero_shadows(val: &Val, out: &mut Vec<Val>) {
    match val {
        Val::Array(a) => {
            if let ArrayData::F64(xs) = &*a.0.borrow() {
                out.push(Val::Array(ArrayRef::new(ArrayData::F64(vec![
                    0.0;
                    xs.len()
                ]))));
            }
        }
        Val::Tuple(vals) | Val::Dual(vals) => vals.iter().for_each(|v| zero_shadows(v, out)),
        _ => {}
    }
}

/// The gradient of one argument `val` of type `ty` from the pullback's
/// cotangent leaves and the shadows, taken in order: a value of its tangent
/// type (`()` for tuple components without one; for a dual, the dual of the
/// cotangents of its parts), `None` when it has none.
pub fn assemble(
    val: &Val,
    ty: &Type,
    leaves: &mut VecDeque<f64>,
    shadows: &mut VecDeque<Val>,
) -> Option<Val> {
    match (val, ty) {
        (_, Type::F64) => Some(Val::F64(leaves.pop_front().unwrap_or(0.0))),
        (_, Type::Array(Scalar::F64)) => shadows.pop_front(),
        (Val::Tuple(vals), Type::Tuple(tys)) if ty.has_cotangent() => Some(Val::Tuple(
            vals.iter()
                .zip(tys.iter())
                .map(|(v, t)| assemble(v, t, leaves, shadows).unwrap_or(Val::Unit))
                .collect(),
        )),
        (Val::Dual(parts), _) => {
            let (inner, tangent, _) = ty.dual_parts()?;
            Some(Val::Dual(
                parts
                    .iter()
                    .enumerate()
                    .map(|(k, v)| {
                        let t = if k == 0 { inner } else { &tangent };
                        assemble(v, t, leaves, shadows).unwrap_or(Val::Unit)
                    })
                    .collect(),
            ))
        }
        _ => None,
    }
}

/// An internal error of reverse mode (a bug, not a fault of the request)
/// about `loc`: the message `internal error: {what}`.
fn internal(loc: Location, what: impl std::fmt::Display) -> GradError {
    GradError::Reverse(super::ReverseError::internal(loc, what))
}
