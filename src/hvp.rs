//! Hessian-vector products and Hessians (docs/reverse.md, "Forward over
//! reverse" and "Reverse over forward"), two ways ([`HvpMode`]):
//! - forward over reverse (the default): [`hvp`] derives the reverse-mode
//!   pieces of a function returning f64 and the wrapper `@f.vjp` that runs
//!   them (as [`crate::vjp`] does), then the forward rule `@f.vjp.fwd` of
//!   that wrapper (which derives `@f.rev.fwd.fwd` and `@f.rev.back.fwd`: the
//!   tape statements go through the frules of `push` and `pop`, so tangents
//!   travel on the tapes with their primals), and runs it once with the
//!   direction V as the arguments' tangents and zero tangents on the shadows
//!   and on the output seed 1.0. The primal parts of what it returns are the
//!   value and the gradient; their tangents are H·V;
//! - reverse over forward (`src/rof.rs`): the reverse-mode pieces of the
//!   forward rule `@f.fwd`, run once on the duals (x, V) with the output
//!   seed `dual(0.0, 1.0)`: the cotangents of the primal parts are H·V,
//!   those of the tangent parts the gradient;
//! - forward over forward (`src/fof.rs`): the forward rule of `@f.fwd`,
//!   V in the inner tangents and unit vectors of the inputs in the outer
//!   lanes, ceil(n / 8) runs per product;
//! - forward over sparse (`src/fos.rs`): the dense forward rule of the
//!   sparse gradient `@f.fwds.grad`, the directions in its lanes.
//!
//! [`hessian`] runs one product per f64 input along its unit vector (forward
//! over reverse batches them in lanes, 8 per run); [`hessian_via`] with
//! sparse lanes runs all of them at once in sparse forward mode over the
//! pieces (`src/sparse_hessian.rs`).
//!
//! Assumes a module that verifies (as [`crate::load`] gives) and a request
//! like [`crate::grad`]'s. Guarantees: the derived functions are optimised
//! by the pass manager's default (or the requested) schedule and run on
//! fresh copies of the arguments, on the executor of `req.opts.exec`
//! (interpreter or JIT), with a rule provider that gives both reverse pieces
//! and forward rules at run time (a call through a function value in the
//! pieces looks up the callee's pieces, then their forward rule, or the
//! other way round); `req.opts.wrt` restricts the gradient, the direction
//! and the Hessian to those arguments, as for [`crate::grad`]; every
//! mismatch of the direction with the arguments and every failure to
//! derive is an [`Error`] with a location, never a panic.

use crate::deriv::{
    ReverseRun, TANGENT_SOURCE, as_tangent, assemble, check_call, check_tangent, check_wrt, copies,
    deep_copy, executor, f64_leaves, func_loc, input_labels, invalid, like_with, masked_tangent,
    run_on, zero_shadows,
};
use crate::fof::FofShape;
use crate::fos::FosShape;
use crate::rof::RofShape;
use crate::strong::{any_nan, or_strong, slice_has_nan};
use crate::{Error, GradRequest, Source, internal, rules};
use irad_ir::interp::value::Val;
use irad_ir::interp::{Executor, RuleProvider, RuleProviderError};
use irad_ir::{FuncId, FuncRef, Lanes, Module, Type};
use irad_passes::forward::Forward;
use irad_passes::reverse::Reverse;
use std::collections::VecDeque;

/// A value, its gradient and a Hessian-vector product ([`hvp`]).
#[derive(Clone, Debug)]
pub struct Hvp {
    /// The function's value.
    pub value: Val,
    /// The gradient: one entry per argument, `None` for an argument without
    /// a tangent type or outside `wrt` (as [`crate::Gradient::gradient`]).
    pub gradient: Vec<Option<Val>>,
    /// H·V, shaped like `gradient` (entry i is row block i of the Hessian
    /// times the direction).
    pub hvp: Vec<Option<Val>>,
}

/// How a Hessian-vector product is computed ([`hvp_via`], [`hessian_via`];
/// `irad hvp --mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HvpMode {
    /// Forward mode over the reverse-mode pieces: one run of `@f.vjp.fwd`
    /// with the direction as the tangents (up to 8 directions per run in
    /// [`hessian`]). The default.
    #[default]
    ForwardOverReverse,
    /// Reverse mode over the forward rule: one forward sweep and pullback
    /// of `@f.fwd`, the direction in the duals, the seed `dual(0.0, 1.0)`
    /// on the result (one direction per run).
    ReverseOverForward,
    /// Forward mode over the forward rule: runs of `@f.fwd.fwdM`, the
    /// direction in the inner tangents, up to 8 inputs seeded in the outer
    /// lanes per run, so ceil(n / 8) runs per direction for n inputs.
    ForwardOverForward,
    /// Dense forward mode over sparse forward mode: runs of
    /// `@f.fwds.grad.fwdM`, the forward rule of the sparse gradient, one
    /// direction per lane (up to 8 per run in [`hessian`]).
    ForwardOverSparse,
}

/// The value of `func` (which returns f64) at `req.args`, its gradient, and
/// the product of its Hessian with the direction `tangent` (written like the
/// arguments: one value per argument, of its shape; entries of i64 and bool
/// arguments are not used), by one run of the forward rule of the
/// reverse-mode pieces (forward over reverse; [`hvp_via`] chooses).
/// `req.opts.wrt` (checked as for [`crate::grad`]) chooses the arguments
/// the function is differentiated in: the gradient's and the product's
/// entries of the others are `None` and their direction entries count as
/// zero. `req.mode` and `req.opts.lanes` are not used. Also returns the
/// module with the derived functions.
///
/// ```
/// use irad::{GradRequest, Source, Val};
///
/// let src = Source::new("f.irad", "fn f(x: f64, y: f64) -> f64 { x * x * y }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let args = [Val::F64(3.0), Val::F64(2.0)];
/// let registry = irad::rules::Registry::new();
/// let v = [Val::F64(1.0), Val::F64(0.0)];
/// let (h, m2) = irad::hvp(&src, &m, &registry, &GradRequest::new(f, &args), &v)?;
/// assert_eq!(h.value.display(&m2), "18.0");
/// let show = |g: &[Option<Val>]| -> Vec<String> {
///     g.iter().flatten().map(|d| d.display(&m2)).collect()
/// };
/// assert_eq!(show(&h.gradient), ["12.0", "9.0"]); // (2xy, x²)
/// assert_eq!(show(&h.hvp), ["4.0", "6.0"]); // H e₁ = (2y, 2x)
/// # Ok::<(), irad::Error>(())
/// ```
pub fn hvp(
    src: &Source,
    module: &Module,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
    tangent: &[Val],
) -> Result<(Hvp, Module), Error> {
    hvp_via(
        src,
        module,
        registry,
        req,
        tangent,
        HvpMode::ForwardOverReverse,
    )
}

/// [`hvp`] computed as `mode` says: forward over reverse, reverse over
/// forward (the reverse-mode pieces of `@f.fwd`) or forward over forward
/// (the forward rule of `@f.fwd`, ceil(n / 8) runs for n inputs); the three
/// agree to rounding.
///
/// ```
/// use irad::{GradRequest, HvpMode, Source, Val};
///
/// let src = Source::new("f.irad", "fn f(x: f64, y: f64) -> f64 { x * x * y }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let args = [Val::F64(3.0), Val::F64(2.0)];
/// let registry = irad::rules::Registry::new();
/// let v = [Val::F64(1.0), Val::F64(0.0)];
/// let req = GradRequest::new(f, &args);
/// let (h, m2) = irad::hvp_via(&src, &m, &registry, &req, &v, HvpMode::ReverseOverForward)?;
/// let show = |g: &[Option<Val>]| -> Vec<String> {
///     g.iter().flatten().map(|d| d.display(&m2)).collect()
/// };
/// assert_eq!(show(&h.gradient), ["12.0", "9.0"]);
/// assert_eq!(show(&h.hvp), ["4.0", "6.0"]);
/// let (h, m3) = irad::hvp_via(&src, &m, &registry, &req, &v, HvpMode::ForwardOverForward)?;
/// let show = |g: &[Option<Val>]| -> Vec<String> {
///     g.iter().flatten().map(|d| d.display(&m3)).collect()
/// };
/// assert_eq!(show(&h.gradient), ["12.0", "9.0"]);
/// assert_eq!(show(&h.hvp), ["4.0", "6.0"]);
/// # Ok::<(), irad::Error>(())
/// ```
pub fn hvp_via(
    src: &Source,
    module: &Module,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
    tangent: &[Val],
    mode: HvpMode,
) -> Result<(Hvp, Module), Error> {
    or_strong(
        module,
        |m| hvp_once(src, m, registry, req, tangent, mode),
        |(h, _)| any_nan(&h.gradient) || any_nan(&h.hvp),
    )
}

/// [`hvp_via`] without the strong fallback.
fn hvp_once(
    src: &Source,
    module: &Module,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
    tangent: &[Val],
    mode: HvpMode,
) -> Result<(Hvp, Module), Error> {
    check_call(src, module, req.func, req.args)?;
    check_tangent(TANGENT_SOURCE, module, req.func, req.args, tangent)?;
    let mut prep = Prepared::new(src, module, registry, req, Lanes::ONE, mode)?;
    let tangent = masked_tangent(tangent, &prep.params, &prep.wrt);
    let (value, gradient, mut hvps) = {
        let mut exec = executor(src, req, module.len(), &mut prep.m, &mut prep.rules)?;
        prep.shape.run(src, &mut *exec, req, &[tangent])?
    };
    let hvp = hvps
        .pop()
        .ok_or_else(|| internal(src, "the rule returned no lane"))?;
    Ok((
        Hvp {
            value,
            gradient,
            hvp,
        },
        prep.m,
    ))
}

/// A value, its gradient and its Hessian ([`hessian`]).
#[derive(Clone, Debug)]
pub struct Hessian {
    /// The function's value.
    pub value: Val,
    /// The gradient, as [`Hvp::gradient`].
    pub gradient: Vec<Option<Val>>,
    /// One row per f64 of the arguments in `wrt` (all with a tangent by
    /// default; in argument order, depth-first, array elements in order):
    /// row i is H eᵢ, with one entry per f64 of the gradient, the same
    /// inputs, so the matrix is square and symmetric.
    pub rows: Vec<Vec<f64>>,
    /// The label of each column (and row): the parameter's name and the
    /// path, e.g. `%x`, `%y[0]`, `%p.1`.
    pub inputs: Vec<String>,
}

/// The value of `func` (which returns f64) at `req.args`, its gradient and
/// its Hessian with respect to every f64 of the arguments in `req.opts.wrt`
/// (all by default): one Hessian-vector product ([`hvp`]) per f64 input
/// along its unit vector, batched in the lanes of the rule (up to 8 per
/// run: n inputs take ceil(n / 8) runs), which is derived and compiled once
/// for all of them. Symmetric within rounding. Also returns the module with
/// the derived functions.
///
/// ```
/// use irad::{GradRequest, Source, Val};
///
/// let src = Source::new("f.irad", "fn f(x: f64, y: [f64]) -> f64 { x * x * y[0] + y[0] * y[1] }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let args = [Val::F64(3.0), Val::f64_array(vec![2.0, 5.0])];
/// let registry = irad::rules::Registry::new();
/// let (h, _) = irad::hessian(&src, &m, &registry, &GradRequest::new(f, &args))?;
/// assert_eq!(h.inputs, ["%x", "%y[0]", "%y[1]"]);
/// assert_eq!(h.rows, [[4.0, 6.0, 0.0], [6.0, 0.0, 1.0], [0.0, 1.0, 0.0]]);
/// // With respect to y only.
/// let mut req = GradRequest::new(f, &args);
/// req.opts.wrt = Some(vec![1]);
/// let (h, _) = irad::hessian(&src, &m, &registry, &req)?;
/// assert_eq!(h.inputs, ["%y[0]", "%y[1]"]);
/// assert_eq!(h.rows, [[0.0, 1.0], [1.0, 0.0]]);
/// # Ok::<(), irad::Error>(())
/// ```
pub fn hessian(
    src: &Source,
    module: &Module,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
) -> Result<(Hessian, Module), Error> {
    hessian_via(src, module, registry, req, HvpMode::ForwardOverReverse)
}

/// [`hessian`] with its products computed as `mode` says (reverse over
/// forward runs one product per input, forward over reverse 8 per run,
/// forward over forward one product per input in ceil(n / 8) runs each);
/// with `req.opts.lanes` [`Lanes::Sparse`] (forward over reverse only), by
/// one run of sparse forward mode over the reverse pieces, each row
/// materialised from the sparse tangent of a gradient entry.
///
/// ```
/// use irad::{GradRequest, HvpMode, Source, Val};
///
/// let src = Source::new("f.irad", "fn f(x: f64, y: [f64]) -> f64 { x * x * y[0] + y[0] * y[1] }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let args = [Val::F64(3.0), Val::f64_array(vec![2.0, 5.0])];
/// let registry = irad::rules::Registry::new();
/// let mut req = GradRequest::new(f, &args);
/// req.opts.lanes = irad::ir::Lanes::Sparse;
/// let (h, _) = irad::hessian_via(&src, &m, &registry, &req, HvpMode::ForwardOverReverse)?;
/// assert_eq!(h.rows, [[4.0, 6.0, 0.0], [6.0, 0.0, 1.0], [0.0, 1.0, 0.0]]);
/// # Ok::<(), irad::Error>(())
/// ```
pub fn hessian_via(
    src: &Source,
    module: &Module,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
    mode: HvpMode,
) -> Result<(Hessian, Module), Error> {
    or_strong(
        module,
        |m| hessian_once(src, m, registry, req, mode),
        |(h, _)| any_nan(&h.gradient) || h.rows.iter().any(|r| slice_has_nan(r)),
    )
}

/// [`hessian_via`] without the strong fallback.
fn hessian_once(
    src: &Source,
    module: &Module,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
    mode: HvpMode,
) -> Result<(Hessian, Module), Error> {
    let params = check_call(src, module, req.func, req.args)?;
    scalar_result(src, module, req.func)?;
    let wrt = check_wrt(src, module, req.func, req.opts.wrt.as_deref())?;
    let inputs = input_labels(module, req.func, req.args, &params, Some(&wrt));
    let n = inputs.len();
    if req.opts.lanes.is_sparse() {
        if mode != HvpMode::ForwardOverReverse {
            let (floc, _) = func_loc(src, module, req.func)?;
            return Err(invalid(
                src,
                floc,
                "a sparse Hessian is computed by forward mode over reverse mode only".into(),
            ));
        }
        let (value, gradient, rows, m) =
            crate::sparse_hessian::hessian(src, module, registry, req, &params, &wrt, n)?;
        return Ok((
            Hessian {
                value,
                gradient,
                rows,
                inputs,
            },
            m,
        ));
    }
    let width = match mode {
        HvpMode::ForwardOverReverse | HvpMode::ForwardOverSparse => n.clamp(1, HESSIAN_LANES),
        HvpMode::ReverseOverForward | HvpMode::ForwardOverForward => 1,
    };
    let lanes = u32::try_from(width)
        .ok()
        .and_then(Lanes::dense)
        .ok_or_else(|| internal(src, "a Hessian's lane count"))?;
    let mut prep = Prepared::new(src, module, registry, req, lanes, mode)?;
    // The direction of input k: the unit vector over the inputs in `wrt`
    // (zero past the last input, for the unused lanes of the last batch).
    let unit = |k: usize| -> Vec<Val> {
        let mut i = 0;
        let mut next = || {
            i += 1;
            if i - 1 == k { 1.0 } else { 0.0 }
        };
        req.args
            .iter()
            .zip(&params)
            .enumerate()
            .map(|(j, (a, ty))| match (ty.has_tangent(), wrt.contains(&j)) {
                (true, true) => like_with(a, ty, &mut next),
                (true, false) => like_with(a, ty, &mut || 0.0),
                (false, _) => deep_copy(a),
            })
            .collect()
    };
    let mut rows = Vec::with_capacity(n);
    let mut first = None;
    {
        let mut exec = executor(src, req, module.len(), &mut prep.m, &mut prep.rules)?;
        let mut start = 0;
        loop {
            let batch: Vec<Vec<Val>> = (start..start + width).map(unit).collect();
            let (value, gradient, hvps) = prep.shape.run(src, &mut *exec, req, &batch)?;
            for h in hvps.iter().take(n.saturating_sub(start)) {
                let mut row = Vec::with_capacity(n);
                h.iter().flatten().for_each(|v| f64_leaves(v, &mut row));
                rows.push(row);
            }
            first.get_or_insert((value, gradient));
            start += width;
            if start >= n {
                break;
            }
        }
    }
    let (value, gradient) =
        first.ok_or_else(|| internal(src, "no Hessian-vector product was run"))?;
    Ok((
        Hessian {
            value,
            gradient,
            rows,
            inputs,
        },
        prep.m,
    ))
}

/// What one run of the rule gives: the value, the gradient (one entry per
/// argument) and, per lane, H·V shaped like the gradient.
pub(crate) type RunOut = (Val, Vec<Option<Val>>, Vec<Vec<Option<Val>>>);

/// The lanes of one run of [`hessian`]: this many Hessian-vector products
/// per run of the rule (fewer for fewer inputs).
const HESSIAN_LANES: usize = 8;

/// The module with the derived functions of one way to Hessian-vector
/// products, the rule cache the executor needs, and how to call them.
struct Prepared<'r> {
    m: Module,
    rules: Rules<'r>,
    shape: Shape,
    /// The parameter types of the function.
    params: Vec<Type>,
    /// The arguments differentiated (checked, sorted).
    wrt: Vec<usize>,
}

/// The rules a run may ask for: forward rules (`frule`, through function
/// values) and the pieces of reverse rules (`revfwd`, `revback`), which a
/// call through a function value in the pieces looks up first and then
/// differentiates forward (forward over reverse), or the other way round
/// (reverse over forward).
pub(crate) struct Rules<'r> {
    pub(crate) fwd: Forward<'r>,
    pub(crate) rev: Reverse<'r>,
}

impl<'r> Rules<'r> {
    /// The caches of a way that derives forward rules only: `fwd`, and a
    /// reverse cache that stays empty.
    pub(crate) fn forward_only(fwd: Forward<'r>, registry: &'r rules::Registry) -> Self {
        Rules {
            fwd,
            rev: Reverse::new(registry),
        }
    }
}

/// The forward rule of the request's function at `width` for `wrt`, derived
/// and optimised in a copy of `module`: the first step of reverse over
/// forward, forward over forward and forward over sparse.
pub(crate) fn request_rule<'r>(
    src: &Source,
    module: &Module,
    registry: &'r rules::Registry,
    req: &GradRequest<'_>,
    width: Lanes,
    wrt: &[usize],
) -> Result<(Module, Forward<'r>, FuncId), Error> {
    crate::deriv::forward_rule_of(
        src,
        module.clone(),
        registry,
        req,
        req.func,
        width,
        Some(wrt),
    )
}

/// How to run the derived functions of one way.
enum Shape {
    /// `@f.vjp.fwd` at some width.
    ForwardOverReverse(ForShape),
    /// The vjp wrapper of `@f.fwd`'s pieces.
    ReverseOverForward(RofShape),
    /// `@f.fwd.fwdM`.
    ForwardOverForward(FofShape),
    /// `@f.fwds.grad.fwdM`.
    ForwardOverSparse(FosShape),
}

impl Shape {
    /// One run per batch of directions: see [`ForShape::run`].
    fn run(
        &self,
        src: &Source,
        exec: &mut dyn Executor,
        req: &GradRequest<'_>,
        tangents: &[Vec<Val>],
    ) -> Result<RunOut, Error> {
        match self {
            Shape::ForwardOverReverse(s) => s.run(src, exec, req, tangents),
            Shape::ReverseOverForward(s) => s.run(src, exec, req, tangents),
            Shape::ForwardOverForward(s) => s.run(src, exec, req, tangents),
            Shape::ForwardOverSparse(s) => s.run(src, exec, req, tangents),
        }
    }
}

impl RuleProvider for Rules<'_> {
    fn forward_rule(
        &mut self,
        module: &mut Module,
        callee: FuncRef,
        lanes: Lanes,
    ) -> Result<FuncId, RuleProviderError> {
        self.fwd.forward_rule(module, callee, lanes)
    }

    fn reverse_rule(
        &mut self,
        module: &mut Module,
        callee: FuncRef,
    ) -> Result<(FuncId, FuncId), RuleProviderError> {
        self.rev.reverse_rule(module, callee)
    }
}

/// The rule `@f.vjp.fwd` and what its call and result look like.
struct ForShape {
    rule: FuncId,
    params: Vec<Type>,
    wrt: Vec<usize>,
}

impl<'r> Prepared<'r> {
    /// Checks the request (a function returning f64, arguments of its
    /// types, `wrt`) and derives the functions of `mode`: for forward over
    /// reverse the pieces, `@f.vjp` and its forward rule at `width`; for
    /// reverse over forward the forward rule at width 1, its pieces and
    /// their wrapper; for forward over forward the forward rule at width 1
    /// and its own forward rule (`width` is not used by the two).
    fn new(
        src: &Source,
        module: &Module,
        registry: &'r rules::Registry,
        req: &GradRequest<'_>,
        width: Lanes,
        mode: HvpMode,
    ) -> Result<Prepared<'r>, Error> {
        let params = check_call(src, module, req.func, req.args)?;
        scalar_result(src, module, req.func)?;
        let wrt = check_wrt(src, module, req.func, req.opts.wrt.as_deref())?;
        let over_forward = match mode {
            HvpMode::ReverseOverForward => {
                let (m, rules, s) =
                    crate::rof::prepare(src, module, registry, req, params.clone(), &wrt)?;
                Some((m, rules, Shape::ReverseOverForward(s)))
            }
            HvpMode::ForwardOverForward => {
                let (m, rules, s) =
                    crate::fof::prepare(src, module, registry, req, params.clone(), &wrt)?;
                Some((m, rules, Shape::ForwardOverForward(s)))
            }
            HvpMode::ForwardOverSparse => {
                let (m, rules, s) =
                    crate::fos::prepare(src, module, registry, req, params.clone(), &wrt, width)?;
                Some((m, rules, Shape::ForwardOverSparse(s)))
            }
            HvpMode::ForwardOverReverse => None,
        };
        if let Some((m, rules, shape)) = over_forward {
            return Ok(Prepared {
                m,
                rules,
                shape,
                params,
                wrt,
            });
        }
        let rev = ReverseRun::new(src, module.clone(), registry, req, req.func, &wrt)?;
        // `forward` of the wrapper `@f.vjp` at full width: every parameter gets a
        // tangent (zero ones for the shadows and the seed); a variant with
        // fewer active parameters would be the same function, since the
        // pieces run `push` and `pop` and are derived without activity.
        let (m, fwd, rule) =
            crate::deriv::forward_rule_of(src, rev.m, registry, req, rev.wrapper.id, width, None)?;
        Ok(Prepared {
            m,
            rules: Rules {
                fwd,
                rev: rev.cache,
            },
            shape: Shape::ForwardOverReverse(ForShape {
                rule,
                params: params.clone(),
                wrt: wrt.clone(),
            }),
            params,
            wrt,
        })
    }
}

/// `Ok` when `func` returns f64; otherwise the located error that a
/// Hessian-vector product needs one.
fn scalar_result(src: &Source, module: &Module, func: FuncId) -> Result<(), Error> {
    let (floc, f) = func_loc(src, module, func)?;
    if f.ret == Type::F64 {
        return Ok(());
    }
    Err(invalid(
        src,
        floc,
        format!(
            "@{} returns {}: a Hessian-vector product needs a function returning f64",
            f.name, f.ret
        ),
    ))
}

impl ForShape {
    /// One run of the rule with one direction per lane (`tangents`, each
    /// checked by the caller; as many as the rule's width): the value, the
    /// gradient, and H·V per lane.
    fn run(
        &self,
        src: &Source,
        exec: &mut dyn Executor,
        req: &GradRequest<'_>,
        tangents: &[Vec<Val>],
    ) -> Result<RunOut, Error> {
        let params = &self.params;
        let lanes = tangents.len();
        // The call: the arguments with the directions as tangents, the zero
        // shadows of their arrays with zero tangents, the seed 1.0 with zero
        // tangents.
        let mut call = dual_call(src, req.args, params, tangents)?;
        let mut shadows = Vec::new();
        for a in &copies(req.args) {
            zero_shadows(a, &mut shadows);
        }
        // Per lane, a zero tangent array for each shadow.
        let mut lane_shadows: Vec<Vec<Val>> = Vec::with_capacity(lanes);
        for _ in 0..lanes {
            let mut z = Vec::new();
            for s in &shadows {
                zero_shadows(s, &mut z);
            }
            lane_shadows.push(z);
        }
        for (j, s) in shadows.iter().enumerate() {
            let mut parts = vec![s.clone()];
            parts.extend(lane_shadows.iter().map(|z| z[j].clone()));
            call.push(Val::Dual(parts.into()));
        }
        let mut seed = vec![Val::F64(1.0)];
        seed.extend(std::iter::repeat_n(Val::F64(0.0), lanes));
        call.push(Val::Dual(seed.into()));
        let out = run_on(src, exec, self.rule, &call, req)?;

        let wrong = |what: &str| internal(src, &format!("the forward-over-reverse rule {what}"));
        let Val::Dual(parts) = out else {
            return Err(wrong("did not return a dual"));
        };
        if parts.len() != lanes + 1 {
            return Err(wrong("returned the wrong lanes"));
        }
        let pair = |v: &Val| match v {
            Val::Tuple(p) => match &p[..] {
                [a, b] => Ok((a.clone(), b.clone())),
                _ => Err(wrong("returned the wrong shape")),
            },
            _ => Err(wrong("returned no pair")),
        };
        let (value, cots) = pair(&parts[0])?;
        let total: usize = params.iter().map(Type::cotangent_leaves).sum();
        let wrt = &self.wrt;
        let gradient = per_argument(src, req.args, params, wrt, total, &cots, shadows)?;
        let mut hvps = Vec::with_capacity(lanes);
        for (k, z) in lane_shadows.into_iter().enumerate() {
            let (_, tcots) = pair(&parts[k + 1])?;
            hvps.push(per_argument(src, req.args, params, wrt, total, &tcots, z)?);
        }
        Ok((value, gradient, hvps))
    }
}

/// The arguments `args` (of types `params`) as duals with one direction per
/// lane of `tangents` (each one value per argument) as their tangents, fresh
/// copies; arguments without a tangent type as they are (copied).
pub(crate) fn dual_call(
    src: &Source,
    args: &[Val],
    params: &[Type],
    tangents: &[Vec<Val>],
) -> Result<Vec<Val>, Error> {
    let mut call = Vec::with_capacity(args.len() + 1);
    for (i, (a, ty)) in args.iter().zip(params).enumerate() {
        if !ty.has_tangent() {
            call.push(deep_copy(a));
            continue;
        }
        let mut parts = Vec::with_capacity(tangents.len() + 1);
        parts.push(deep_copy(a));
        for t in tangents {
            let ti = t
                .get(i)
                .ok_or_else(|| internal(src, "a direction without this argument"))?;
            parts.push(as_tangent(ti, ty));
        }
        call.push(Val::Dual(parts.into()));
    }
    Ok(call)
}

/// The gradient-shaped value (one entry per argument, `None` outside
/// `wrt`) from the pullback's `total` scalar cotangents `cots` (one f64, or
/// a tuple of them) and the shadows of the arguments' arrays.
pub(crate) fn per_argument(
    src: &Source,
    args: &[Val],
    params: &[Type],
    wrt: &[usize],
    total: usize,
    cots: &Val,
    shadows: Vec<Val>,
) -> Result<Vec<Option<Val>>, Error> {
    let mut leaves: VecDeque<f64> = match (total, cots) {
        (0, _) => VecDeque::new(),
        (1, Val::F64(x)) => [*x].into(),
        (_, Val::Tuple(xs)) => xs
            .iter()
            .map(|x| match x {
                Val::F64(x) => Ok(*x),
                _ => Err(internal(src, "a cotangent is not f64")),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err(internal(src, "the pullback returned the wrong shape")),
    };
    let mut shadows: VecDeque<Val> = shadows.into();
    Ok(args
        .iter()
        .zip(params)
        .enumerate()
        .map(|(i, (a, ty))| {
            let g = assemble(a, ty, &mut leaves, &mut shadows);
            if wrt.contains(&i) { g } else { None }
        })
        .collect())
}
