//! Hessian-vector products by reverse mode over forward mode (docs/reverse.md,
//! "Reverse over forward"; [`crate::hvp_via`] with
//! [`crate::HvpMode::ReverseOverForward`]): the forward rule `@f.fwd` of a
//! function returning f64 (width 1; the variant for `wrt` when it leaves
//! arguments out), then its reverse-mode pieces `@f.fwd.rev.fwd` and
//! `@f.fwd.rev.back` (reverse mode sees each dual as the tuple of its
//! primal and tangent: rules/src/dual.rs) and the wrapper `@f.fwd.vjp`.
//! One run of the wrapper on the duals (x, V) with the output seed
//! `dual(0.0, 1.0)` (the cotangent of the result's tangent, the directional
//! derivative ∇f·V) gives, per argument, the cotangent of its primal part,
//! ∂(∇f·V)/∂x = H·V, and of its tangent part, ∂(∇f·V)/∂V = ∇f.
//!
//! Assumes a request checked by `hvp.rs` (`Prepared::new`: a function
//! returning f64, arguments of its types, `wrt` checked, directions masked
//! outside `wrt`). Guarantees: the derived functions are optimised by the
//! request's schedule; each direction is one run on fresh copies of the
//! arguments, on the executor of `req.opts.exec`, whose rule provider gives
//! forward rules (`frule` in `@f.fwd`) and reverse pieces (`revfwd` of
//! those rules in the pieces) at run time; a result of an unexpected shape
//! is an internal error, never a panic.

use crate::deriv::{ReverseRun, VjpWrapper, as_tangent, deep_copy};
use crate::hvp::{Rules, RunOut, request_rule};
use crate::{Error, GradRequest, Source, internal, rules};
use irad_ir::interp::Executor;
use irad_ir::interp::value::Val;
use irad_ir::{Lanes, Module, Type};

/// The wrapper of `@f.fwd`'s pieces and what its call looks like.
pub(crate) struct RofShape {
    wrapper: VjpWrapper,
    /// The parameter types of `@f`.
    params: Vec<Type>,
    /// The parameter types of `@f.fwd` (duals where `@f`'s have tangents).
    rule_params: Vec<Type>,
    wrt: Vec<usize>,
}

/// Derives `@f.fwd` (for `wrt`), its pieces for `wrt` and their wrapper,
/// optimised by `req`'s schedule: the module, the rule caches the run needs
/// and the shape of the call. `params` are `@f`'s parameter types.
pub(crate) fn prepare<'r>(
    src: &Source,
    module: &Module,
    registry: &'r rules::Registry,
    req: &GradRequest<'_>,
    params: Vec<Type>,
    wrt: &[usize],
) -> Result<(Module, Rules<'r>, RofShape), Error> {
    let (m, fwd, rule) = request_rule(src, module, registry, req, Lanes::ONE, wrt)?;
    let rule_params = m
        .get(rule)
        .map(|f| f.param_types())
        .ok_or_else(|| internal(src, "the forward rule is missing"))?;
    let rev = ReverseRun::new(src, m, registry, req, rule, wrt)?;
    Ok((
        rev.m,
        Rules {
            fwd,
            rev: rev.cache,
        },
        RofShape {
            wrapper: rev.wrapper,
            params,
            rule_params,
            wrt: wrt.to_vec(),
        },
    ))
}

impl RofShape {
    /// One run of the wrapper per direction in `tangents` (each checked and
    /// masked by the caller): the value and the gradient (of the first run)
    /// and H·V per direction, shaped like the gradient.
    pub(crate) fn run(
        &self,
        src: &Source,
        exec: &mut dyn Executor,
        req: &GradRequest<'_>,
        tangents: &[Vec<Val>],
    ) -> Result<RunOut, Error> {
        let seed = Val::Dual(vec![Val::F64(0.0), Val::F64(1.0)].into());
        let mut first = None;
        let mut hvps = Vec::with_capacity(tangents.len());
        for t in tangents {
            let mut args = Vec::with_capacity(req.args.len());
            for (i, (a, ty)) in req.args.iter().zip(&self.params).enumerate() {
                if !ty.has_tangent() {
                    args.push(deep_copy(a));
                    continue;
                }
                let ti = t
                    .get(i)
                    .ok_or_else(|| internal(src, "a direction without this argument"))?;
                args.push(Val::Dual(vec![deep_copy(a), as_tangent(ti, ty)].into()));
            }
            let (value, cots) =
                self.wrapper
                    .run(src, exec, req, &args, &self.rule_params, &self.wrt, &seed)?;
            let (mut gradient, mut hvp) = (Vec::new(), Vec::new());
            for c in cots {
                let (h, g) = match c {
                    None => (None, None),
                    Some(Val::Dual(parts)) => match &parts[..] {
                        [h, g] => (Some(h.clone()), Some(g.clone())),
                        _ => return Err(internal(src, "a dual cotangent of the wrong lanes")),
                    },
                    Some(_) => return Err(internal(src, "a cotangent of a dual is not a dual")),
                };
                gradient.push(g);
                hvp.push(h);
            }
            if first.is_none() {
                let Val::Dual(parts) = value else {
                    return Err(internal(src, "the forward rule did not return a dual"));
                };
                let v = parts
                    .first()
                    .cloned()
                    .ok_or_else(|| internal(src, "a dual without parts"))?;
                first = Some((v, gradient));
            }
            hvps.push(hvp);
        }
        let (value, gradient) = first.ok_or_else(|| internal(src, "no direction was run"))?;
        Ok((value, gradient, hvps))
    }
}
