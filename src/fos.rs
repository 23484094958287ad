//! Hessian-vector products by dense forward mode over sparse forward mode
//! (docs/forward.md, "Forward over sparse"; [`crate::hvp_via`] with
//! [`crate::HvpMode::ForwardOverSparse`]): the sparse rule `@f.fwds` of a
//! function returning f64 (the variant for `wrt` when it leaves arguments
//! out), the sparse gradient's wrapper `@f.fwds.grad(args) -> (f64, [f64])`
//! around it (the one `irad grad --sparse` runs), then the dense forward
//! rule of that wrapper at M lanes, `@f.fwds.grad.fwdM`. Its call is each
//! argument `dual(x, V_1, ..., V_M)`; it returns `dual((f, ∇f), (∇f·V_k,
//! H·V_k)...)`: the gradient comes from the sparse builder in one pass
//! whatever n, its tangents along the M directions are M Hessian-vector
//! products. A product costs one run (about the sparse gradient's work
//! times M + 1, no tapes); the Hessian takes ceil(n / 8) runs of 8 lanes.
//!
//! Assumes a request checked by `hvp.rs` (`Prepared::new`: a function
//! returning f64, arguments of its types, `wrt` checked, directions masked
//! outside `wrt`). Guarantees: the rules are optimised by the request's
//! schedule and share one rule cache, the run's rule provider (a call
//! through a function value asks for the callee's sparse rule, and the same
//! call in the outer rule for that rule's dense rule); every run is on
//! fresh copies of the arguments, and the handles live in that run's
//! builder only; a result of an unexpected shape is an internal error,
//! never a panic.

use crate::deriv::forward_rule_with;
use crate::hvp::{Rules, RunOut, request_rule};
use crate::{Error, GradRequest, Source, internal, rules};
use irad_ir::interp::Executor;
use irad_ir::interp::value::{ArrayData, Val};
use irad_ir::{FuncId, Lanes, Module, Type};
use irad_passes::forward::grad::sparse_gradient_wrapper;

/// The rule of the sparse gradient and what its call looks like.
pub(crate) struct FosShape {
    /// `@f.fwds.grad.fwdM`.
    rule: FuncId,
    /// The parameter types of `@f`.
    params: Vec<Type>,
    wrt: Vec<usize>,
}

/// Derives `@f.fwds` (for `wrt`), the wrapper `@f.fwds.grad` and its dense
/// forward rule at `width` lanes, optimised by `req`'s schedule: the
/// module, the rule caches the run needs (the reverse cache stays empty)
/// and the shape of the call.
pub(crate) fn prepare<'r>(
    src: &Source,
    module: &Module,
    registry: &'r rules::Registry,
    req: &GradRequest<'_>,
    params: Vec<Type>,
    wrt: &[usize],
    width: Lanes,
) -> Result<(Module, Rules<'r>, FosShape), Error> {
    let (mut m, fwd, sparse) = request_rule(src, module, registry, req, Lanes::Sparse, wrt)?;
    let wrapper = sparse_gradient_wrapper(&mut m, req.func, sparse, &params, wrt)
        .map_err(|e| internal(src, &format!("building the sparse gradient: {e}")))?;
    // Every parameter of the wrapper gets tangents (the directions are zero
    // outside `wrt`, which the caller masks).
    let (m, fwd, rule) = forward_rule_with(src, m, fwd, req, wrapper, width, None)?;
    Ok((
        m,
        Rules::forward_only(fwd, registry),
        FosShape {
            rule,
            params,
            wrt: wrt.to_vec(),
        },
    ))
}

impl FosShape {
    /// One run of the rule with one direction per lane (`tangents`, each
    /// checked and masked by the caller; as many as the rule's width): the
    /// value, the gradient, and H·V per lane, shaped like the gradient.
    pub(crate) fn run(
        &self,
        src: &Source,
        exec: &mut dyn Executor,
        req: &GradRequest<'_>,
        tangents: &[Vec<Val>],
    ) -> Result<RunOut, Error> {
        let lanes = tangents.len();
        let call = crate::hvp::dual_call(src, req.args, &self.params, tangents)?;
        let out = crate::deriv::run_on(src, exec, self.rule, &call, req)?;
        let wrong = |what: &str| internal(src, &format!("the forward-over-sparse rule {what}"));
        let parts = match &out {
            Val::Dual(parts) if parts.len() == lanes + 1 => parts,
            _ => return Err(wrong("returned the wrong shape")),
        };
        let pair = |v: &Val| -> Result<(Val, Vec<f64>), Error> {
            match v {
                Val::Tuple(p) => match &p[..] {
                    [a, Val::Array(g)] => match &*g.0.borrow() {
                        ArrayData::F64(xs) => Ok((a.clone(), xs.clone())),
                        _ => Err(wrong("returned a gradient that is not [f64]")),
                    },
                    _ => Err(wrong("returned no (value, gradient) pair")),
                },
                _ => Err(wrong("returned no tuple")),
            }
        };
        let (value, grad) = pair(&parts[0])?;
        let gradient = crate::fof::shaped(req.args, &self.params, &self.wrt, &grad);
        let mut hvps = Vec::with_capacity(lanes);
        for lane in &parts[1..] {
            let (_, hv) = pair(lane)?;
            hvps.push(crate::fof::shaped(req.args, &self.params, &self.wrt, &hv));
        }
        Ok((value, gradient, hvps))
    }
}
