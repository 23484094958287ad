//! Hessian-vector products by forward mode over forward mode (docs/forward.md,
//! "Forward over forward"; [`crate::hvp_via`] with
//! [`crate::HvpMode::ForwardOverForward`]): the forward rule `@f.fwd` of a
//! function returning f64 (width 1; the variant for `wrt` when it leaves
//! arguments out), then the forward rule of that rule, `@f.fwd.fwdM`, at M
//! outer lanes (M = min(n, 8) for the n differentiated f64s). To forward mode
//! a dual is the tuple of its parts, so an argument of `@f.fwd.fwdM` is
//! `dual(dual(x, V), dual(e, 0), ...)`: the inner tangent is the direction
//! V, outer lane k seeds the primal part with the unit vector of one input
//! and the inner tangent part with zero. The result `dual(dual(f, ∇f·V),
//! dual(∂f/∂x_j, ∂(∇f·V)/∂x_j), ...)` gives per lane one entry of the
//! gradient and one of H·V, so a product takes ceil(n / M) runs of the
//! doubly dual rule (slower than forward over reverse's one run of the
//! pieces in every case measured: docs/performance.md, "Issue 23"; but it
//! keeps no tapes).
//!
//! Assumes a request checked by `hvp.rs` (`Prepared::new`: a function
//! returning f64, arguments of its types, `wrt` checked, directions masked
//! outside `wrt`). Guarantees: both rules are optimised by the request's
//! schedule and share one rule cache, which is the run's rule provider (a
//! call through a function value in `@f.fwd` asks for the callee's rule at
//! width 1, and the same call in `@f.fwd.fwdM` for that rule's rule at M);
//! every run is on fresh copies of the arguments; a result of an unexpected
//! shape is an internal error, never a panic.

use crate::deriv::{as_tangent, deep_copy, f64_leaves, forward_rule_with, tangent_with};
use crate::hvp::{Rules, RunOut, request_rule};
use crate::{Error, GradRequest, Source, internal, rules};
use irad_ir::interp::Executor;
use irad_ir::interp::value::Val;
use irad_ir::{FuncId, Lanes, Module, Type};

/// The most outer lanes of one run: this many gradient and H·V entries per
/// run (fewer for fewer inputs).
pub(crate) const FOF_LANES: usize = 8;

/// The doubly dual rule and what its call looks like.
pub(crate) struct FofShape {
    /// `@f.fwd.fwdM`.
    rule: FuncId,
    /// The outer lanes M.
    lanes: usize,
    /// The parameter types of `@f`.
    params: Vec<Type>,
    wrt: Vec<usize>,
}

/// Derives `@f.fwd` (for `wrt`) and its forward rule at M = min(n, 8) outer
/// lanes for the n f64s of the arguments in `wrt` (one lane when there are
/// none), optimised by `req`'s schedule: the module, the rule caches the run
/// needs (the reverse cache stays empty) and the shape of the call.
pub(crate) fn prepare<'r>(
    src: &Source,
    module: &Module,
    registry: &'r rules::Registry,
    req: &GradRequest<'_>,
    params: Vec<Type>,
    wrt: &[usize],
) -> Result<(Module, Rules<'r>, FofShape), Error> {
    let n = inputs(req.args, wrt);
    let lanes = n.clamp(1, FOF_LANES);
    let width = u32::try_from(lanes)
        .ok()
        .and_then(Lanes::dense)
        .ok_or_else(|| internal(src, "the outer lane count"))?;
    let (m, fwd, inner) = request_rule(src, module, registry, req, Lanes::ONE, wrt)?;
    let (m, fwd, rule) = forward_rule_with(src, m, fwd, req, inner, width, None)?;
    Ok((
        m,
        Rules::forward_only(fwd, registry),
        FofShape {
            rule,
            lanes,
            params,
            wrt: wrt.to_vec(),
        },
    ))
}

/// The number of f64s of the arguments in `wrt`.
fn inputs(args: &[Val], wrt: &[usize]) -> usize {
    let mut leaves = Vec::new();
    for &i in wrt {
        if let Some(a) = args.get(i) {
            f64_leaves(a, &mut leaves);
        }
    }
    leaves.len()
}

impl FofShape {
    /// Per direction in `tangents` (each checked and masked by the caller),
    /// ceil(n / M) runs of the rule, run j seeding inputs jM..jM+M in its
    /// outer lanes: the value and the gradient (of the first direction) and
    /// H·V per direction, shaped like the gradient.
    pub(crate) fn run(
        &self,
        src: &Source,
        exec: &mut dyn Executor,
        req: &GradRequest<'_>,
        tangents: &[Vec<Val>],
    ) -> Result<RunOut, Error> {
        let n = inputs(req.args, &self.wrt);
        let mut first = None;
        let mut hvps = Vec::with_capacity(tangents.len());
        for t in tangents {
            let mut value = None;
            let (mut grad, mut hv) = (Vec::with_capacity(n), Vec::with_capacity(n));
            let mut start = 0;
            loop {
                let call = self.call(src, req, t, start)?;
                let out = crate::deriv::run_on(src, exec, self.rule, &call, req)?;
                let parts = parts_of(src, &out, self.lanes + 1)?;
                let (v, _) = pair_of(src, &parts[0])?;
                value.get_or_insert(v);
                for lane in parts.iter().skip(1).take(n.saturating_sub(start)) {
                    let (g, h) = pair_of(src, lane)?;
                    grad.push(scalar(src, &g)?);
                    hv.push(scalar(src, &h)?);
                }
                start += self.lanes;
                if start >= n {
                    break;
                }
            }
            let value = value.ok_or_else(|| internal(src, "no run of the rule"))?;
            if first.is_none() {
                first = Some((value, self.shaped(req.args, &grad)));
            }
            hvps.push(self.shaped(req.args, &hv));
        }
        let (value, gradient) = first.ok_or_else(|| internal(src, "no direction was run"))?;
        Ok((value, gradient, hvps))
    }

    /// The arguments of one run along direction `t`, outer lane k seeding
    /// input `start + k` (no input past the last).
    fn call(
        &self,
        src: &Source,
        req: &GradRequest<'_>,
        t: &[Val],
        start: usize,
    ) -> Result<Vec<Val>, Error> {
        let mut call = Vec::with_capacity(req.args.len());
        // The index of the next input among the f64s of the `wrt` arguments.
        let mut offset = 0;
        for (i, (a, ty)) in req.args.iter().zip(&self.params).enumerate() {
            if !ty.has_tangent() {
                call.push(deep_copy(a));
                continue;
            }
            let ti = t
                .get(i)
                .ok_or_else(|| internal(src, "a direction without this argument"))?;
            let mut parts = Vec::with_capacity(self.lanes + 1);
            parts.push(Val::Dual(vec![deep_copy(a), as_tangent(ti, ty)].into()));
            let active = self.wrt.contains(&i);
            for k in 0..self.lanes {
                let seed = start + k;
                let mut j = offset;
                let unit = tangent_with(a, ty, &mut || {
                    j += 1;
                    if active && j - 1 == seed { 1.0 } else { 0.0 }
                });
                let zero = tangent_with(a, ty, &mut || 0.0);
                parts.push(Val::Dual(vec![unit, zero].into()));
            }
            if active {
                let mut leaves = Vec::new();
                f64_leaves(a, &mut leaves);
                offset += leaves.len();
            }
            call.push(Val::Dual(parts.into()));
        }
        Ok(call)
    }

    /// The gradient-shaped value (one entry per argument, `None` outside
    /// `wrt` and for arguments without a tangent type) whose f64s are
    /// `flat`, in input order.
    fn shaped(&self, args: &[Val], flat: &[f64]) -> Vec<Option<Val>> {
        shaped(args, &self.params, &self.wrt, flat)
    }
}

/// The gradient-shaped value (one entry per argument of types `params`,
/// `None` outside `wrt` and for arguments without a tangent type) whose
/// f64s are `flat`, in input order (also forward over sparse's,
/// `src/fos.rs`).
pub(crate) fn shaped(
    args: &[Val],
    params: &[Type],
    wrt: &[usize],
    flat: &[f64],
) -> Vec<Option<Val>> {
    let mut it = flat.iter().copied();
    args.iter()
        .zip(params)
        .enumerate()
        .map(|(i, (a, ty))| {
            if !ty.has_tangent() || !wrt.contains(&i) {
                return None;
            }
            Some(tangent_with(a, ty, &mut || it.next().unwrap_or(0.0)))
        })
        .collect()
}

/// The `n` parts of dual `v`; an internal error for anything else.
fn parts_of(src: &Source, v: &Val, n: usize) -> Result<Vec<Val>, Error> {
    match v {
        Val::Dual(parts) if parts.len() == n => Ok(parts.to_vec()),
        _ => Err(internal(
            src,
            "the forward-over-forward rule returned the wrong shape",
        )),
    }
}

/// The primal and the tangent of a dual of one lane.
fn pair_of(src: &Source, v: &Val) -> Result<(Val, Val), Error> {
    let mut p = parts_of(src, v, 2)?.into_iter();
    match (p.next(), p.next()) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(internal(src, "a dual without two parts")),
    }
}

/// The f64 `v`; an internal error otherwise.
fn scalar(src: &Source, v: &Val) -> Result<f64, Error> {
    match v {
        Val::F64(x) => Ok(*x),
        _ => Err(internal(
            src,
            "the forward-over-forward rule returned a non-f64 entry",
        )),
    }
}
