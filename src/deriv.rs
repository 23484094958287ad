//! Directional and seeded derivatives in the facade (docs/forward.md,
//! "Directional derivatives and Jacobians"): [`jvp`] (the value and the
//! derivative along a tangent, one pass of `@f.fwd`), [`vjp`] (reverse mode
//! with an output seed of the result's type: a vector-Jacobian product) and
//! [`jacobian`] (the full Jacobian, by forward mode, one tangent per column
//! in batches of lanes, or by reverse mode, one seed per row). The command
//! line's `irad jvp`, `irad grad --seed` and `irad jacobian` call them;
//! [`parse_tangent`] and [`parse_seed`] read their direction text.
//!
//! Assumes a module that verifies (as [`crate::load`] gives) and requests
//! like [`crate::grad`]'s ([`GradRequest`]: the function, its arguments, the
//! executor of `opts.exec`, the schedule). Guarantees: the derived functions
//! are built and optimised by one pipeline of the pass manager and run on
//! fresh copies of the arguments; any result type with f64 entries (tuples,
//! arrays) is accepted; every mismatch between a direction and the
//! arguments or the result is an [`Error`] naming the argument (never a
//! panic); the order of a Jacobian's rows and columns is the depth-first
//! order of the f64 entries (array elements in order), the same in both
//! modes.

use crate::strong::{any_nan, has_nan, or_strong, slice_has_nan};
use crate::{Error, GradRequest, Mode, Source, grad_error, internal, rules, run_stages};
use irad_ir::interp::value::{ArrayData, Val};
use irad_ir::interp::{Executor, RuleProvider};
use irad_ir::text::ParseError;
use irad_ir::{
    BuildError, FnType, FuncBuilder, FuncId, Lanes, Location, Module, Operand, Pos, Prim, Scalar,
    Type,
};
use irad_passes::Step;
use irad_passes::forward::Forward;
use irad_passes::forward::grad::{GradError, Gradient};
pub(crate) use irad_passes::grad::deep_copy;
use irad_passes::manager::{PassError, PassId, PipelineOptions, Snapshot, Stage};
use irad_passes::optimise::{Strategy, default_schedule};
use irad_passes::reverse::Reverse;
pub(crate) use irad_passes::reverse::grad::{assemble, zero_shadows};
use irad_passes::stages::{OptimiseStage, Scope};
use irad_rules::{RuleError, emit};
use std::num::NonZeroU32;

/// The name the errors about a tangent give its text when the caller has
/// none of its own: `<tangent>` (what `irad jvp --tangent` reads).
pub const TANGENT_SOURCE: &str = "<tangent>";

/// The name the errors about an output seed give its text: `<seed>` (what
/// `irad grad --seed` reads).
pub const SEED_SOURCE: &str = "<seed>";

/// A value and its derivative along one direction ([`jvp`]).
#[derive(Clone, Debug)]
pub struct Jvp {
    /// The function's value.
    pub value: Val,
    /// The directional derivative: a value of the result's tangent type (the
    /// result's shape, `()` where the result has no f64).
    pub jvp: Val,
}

/// A value and its Jacobian ([`jacobian`]).
#[derive(Clone, Debug)]
pub struct Jacobian {
    /// The function's value.
    pub value: Val,
    /// One row per f64 entry of the result (depth-first, array elements in
    /// order), each with one entry per f64 of the arguments (in argument
    /// order, depth-first).
    pub rows: Vec<Vec<f64>>,
    /// The label of each row: `value` for an f64 result, otherwise its path,
    /// e.g. `value.0`, `value.1[2]`.
    pub outputs: Vec<String>,
    /// The label of each column: the parameter's name and the path, e.g.
    /// `%x`, `%y[0]`, `%p.1`.
    pub inputs: Vec<String>,
    /// Passes run: of `@f.fwd` (forward mode, one per batch of columns) or of
    /// the forward sweep and pullback (reverse mode, one per row and one for
    /// the value).
    pub passes: usize,
}

/// Reads tangent text (`irad jvp --tangent`) for `func` at `args`: written
/// like `--args`, one value per argument, of the argument's type and shape
/// (the entries of i64 and bool arguments are read but not used). Errors are
/// located in the text, or, for a shape that differs from the argument's,
/// name the argument.
///
/// ```
/// use irad::Source;
///
/// let src = Source::new("f.irad", "fn f(x: f64, y: [f64], n: i64) -> f64 { x * y[n] }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let args = irad::parse_args(&Source::new("<args>", "1.0, [2.0, 3.0], 1"), &m, f)?;
/// let t = irad::parse_tangent(&Source::new("<tangent>", "1.0, [0.0, 1.0], 0"), &m, f, &args)?;
/// assert_eq!(t.len(), 3);
/// let err = irad::parse_tangent(&Source::new("<tangent>", "1.0, [0.0], 0"), &m, f, &args);
/// assert_eq!(
///     err.unwrap_err().render(&[]),
///     "<tangent>:1:1: error: tangent for argument 2 has 1 entry, argument has 2\n"
/// );
/// # Ok::<(), irad::Error>(())
/// ```
pub fn parse_tangent(
    tangent: &Source,
    module: &Module,
    func: FuncId,
    args: &[Val],
) -> Result<Vec<Val>, Error> {
    let t = crate::parse_args(tangent, module, func)?;
    check_tangent(&tangent.name, module, func, args, &t)?;
    Ok(t)
}

/// Reads an output seed (`irad grad --seed`): one value of `func`'s result
/// type, written like `--args` (a tuple as `(1.0, [0.0, 1.0])`). Errors are
/// located in the text.
///
/// ```
/// use irad::Source;
///
/// let src = Source::new("f.irad", "fn f(x: f64) -> (f64, f64) { (x, x * x) }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let s = irad::parse_seed(&Source::new("<seed>", "(1.0, 0.5)"), &m, f)?;
/// assert_eq!(s.display(&m), "(1.0, 0.5)");
/// assert!(irad::parse_seed(&Source::new("<seed>", "1.0"), &m, f).is_err());
/// # Ok::<(), irad::Error>(())
/// ```
pub fn parse_seed(seed: &Source, module: &Module, func: FuncId) -> Result<Val, Error> {
    let ret = module
        .get(func)
        .map(|f| f.ret.clone())
        .ok_or_else(|| internal(seed, "invalid function handle"))?;
    let vals = irad_ir::text::parse_args(&seed.text, std::slice::from_ref(&ret), module).map_err(
        |err| Error::Parse {
            file: seed.name.clone(),
            err: Box::new(err),
        },
    )?;
    vals.into_iter()
        .next()
        .ok_or_else(|| internal(seed, "a seed parsed to nothing"))
}

/// Whether reverse mode of `func` can run without an output seed: `Ok` when
/// it returns one f64; otherwise the located error `irad grad` prints when
/// `--seed` is missing (or, for a result without f64 entries, that there is
/// nothing to differentiate).
///
/// ```
/// use irad::Source;
///
/// let src = Source::new("v.irad", "fn vec2(x: f64) -> (f64, f64) { (x, x) }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "vec2")?;
/// let err = irad::require_seed(&src, &m, f).unwrap_err().to_string();
/// assert!(err.contains("@vec2 returns (f64, f64): reverse mode needs an output seed"), "{err}");
/// # Ok::<(), irad::Error>(())
/// ```
pub fn require_seed(src: &Source, module: &Module, func: FuncId) -> Result<(), Error> {
    let (floc, f) = func_loc(src, module, func)?;
    result_has_f64(src, module, func)?;
    if f.ret == Type::F64 {
        return Ok(());
    }
    Err(invalid(
        src,
        floc,
        format!(
            "@{} returns {}: reverse mode needs an output seed of that type \
             (`--seed`, written like `--args`): the gradient of the seed-weighted sum",
            f.name, f.ret
        ),
    ))
}

/// The value of `func` at `req.args` and its derivative along `tangent` (one
/// value per argument, of the argument's type and shape; the entries of
/// arguments without a tangent are not used): one pass of `@f.fwd` with the
/// tangent as the dual parts, run by `req.opts.exec` after `req`'s schedule.
/// `req.opts.wrt` (checked as for [`crate::grad`]) keeps the direction to
/// those arguments: the tangent entries of the others count as zero, and
/// the rule is the variant that does no tangent work for them
/// (`@f.fwd.wrt0_2`). `req.mode` and `req.opts.lanes` are not used. Also
/// returns the module with the derived functions.
///
/// ```
/// use irad::{GradRequest, Source, Val};
///
/// let src = Source::new("f.irad", "fn f(x: f64, y: f64) -> (f64, f64) { (x * y, sin(x)) }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let args = irad::parse_args(&Source::new("<args>", "2.0, 3.0"), &m, f)?;
/// let registry = irad::rules::Registry::new();
/// let t = [Val::F64(1.0), Val::F64(0.0)];
/// let (d, m2) = irad::jvp(&src, &m, &registry, &GradRequest::new(f, &args), &t)?;
/// assert_eq!(d.value.display(&m2), format!("(6.0, {:?})", 2.0f64.sin()));
/// assert_eq!(d.jvp.display(&m2), format!("(3.0, {:?})", 2.0f64.cos()));
/// // A tangent of the wrong shape names the argument.
/// let err = irad::jvp(&src, &m, &registry, &GradRequest::new(f, &args), &t[..1]).unwrap_err();
/// assert_eq!(err.render(&[]), "<tangent>:1:1: error: @f takes 2 arguments, the tangent has 1\n");
/// # Ok::<(), irad::Error>(())
/// ```
pub fn jvp(
    src: &Source,
    module: &Module,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
    tangent: &[Val],
) -> Result<(Jvp, Module), Error> {
    or_strong(
        module,
        |m| jvp_once(src, m, registry, req, tangent),
        |(d, _)| has_nan(&d.jvp),
    )
}

/// [`jvp`] without the strong fallback.
fn jvp_once(
    src: &Source,
    module: &Module,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
    tangent: &[Val],
) -> Result<(Jvp, Module), Error> {
    let params = check_call(src, module, req.func, req.args)?;
    check_tangent(TANGENT_SOURCE, module, req.func, req.args, tangent)?;
    let wrt = check_wrt(src, module, req.func, req.opts.wrt.as_deref())?;
    let tangent = masked_tangent(tangent, &params, &wrt);
    let (mut m, mut fwd, rule) = forward_rule_of(
        src,
        module.clone(),
        registry,
        req,
        req.func,
        Lanes::ONE,
        Some(&wrt),
    )?;
    let dual_args: Vec<Val> = req
        .args
        .iter()
        .zip(&tangent)
        .zip(&params)
        .map(|((a, t), ty)| {
            if ty.has_tangent() {
                Val::Dual(vec![deep_copy(a), as_tangent(t, ty)].into())
            } else {
                deep_copy(a)
            }
        })
        .collect();
    let out = {
        let mut exec = executor(src, req, module.len(), &mut m, &mut fwd)?;
        run_on(src, &mut *exec, rule, &dual_args, req)?
    };
    let Val::Dual(parts) = out else {
        return Err(internal(src, "the forward rule did not return a dual"));
    };
    match &parts[..] {
        [value, t] => Ok((
            Jvp {
                value: value.clone(),
                jvp: t.clone(),
            },
            m,
        )),
        _ => Err(internal(src, "the forward rule returned the wrong lanes")),
    }
}

/// The value of `func` at `req.args` and the gradient of the seed-weighted
/// sum of its result's f64 entries (a vector-Jacobian product): reverse mode
/// with `seed`, a value of the result's type, as the output cotangent (its
/// i64 and bool entries are not used; its arrays have the result's
/// lengths). For an f64 result, `seed` scales the gradient. `req.opts.wrt`
/// chooses the arguments as in [`crate::grad`]; `req.mode` and
/// `req.opts.lanes` are not used. Also returns the module with the derived
/// functions (`@f.rev.fwd`, `@f.rev.back` and `@f.vjp`, which adds the
/// seeds of result arrays into their shadows and runs both pieces).
///
/// ```
/// use irad::{GradRequest, Source, Val};
///
/// let src = Source::new("v.irad", "fn vec2(x: f64, y: f64) -> (f64, f64) { (x * y, x + y) }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "vec2")?;
/// let args = irad::parse_args(&Source::new("<args>", "2.0, 3.0"), &m, f)?;
/// let seed = irad::parse_seed(&Source::new("<seed>", "(1.0, 10.0)"), &m, f)?;
/// let registry = irad::rules::Registry::new();
/// let (g, m2) = irad::vjp(&src, &m, &registry, &GradRequest::new(f, &args), &seed)?;
/// assert_eq!(g.value.display(&m2), "(6.0, 5.0)");
/// let grads: Vec<String> = g.gradient.iter().flatten().map(|d| d.display(&m2)).collect();
/// assert_eq!(grads, ["13.0", "12.0"]); // (y + 10, x + 10)
/// # Ok::<(), irad::Error>(())
/// ```
pub fn vjp(
    src: &Source,
    module: &Module,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
    seed: &Val,
) -> Result<(Gradient, Module), Error> {
    or_strong(
        module,
        |m| vjp_once(src, m, registry, req, seed),
        |(g, _)| any_nan(&g.gradient),
    )
}

/// [`vjp`] without the strong fallback.
fn vjp_once(
    src: &Source,
    module: &Module,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
    seed: &Val,
) -> Result<(Gradient, Module), Error> {
    let params = check_call(src, module, req.func, req.args)?;
    let ret = module[req.func].ret.clone();
    if !seed.has_type(&ret, module) {
        return Err(request_error(
            SEED_SOURCE,
            format!(
                "the seed must be of the result's type {ret}, found {}",
                seed.type_text(module)
            ),
        ));
    }
    let wrt = check_wrt(src, module, req.func, req.opts.wrt.as_deref())?;
    let mut rev = ReverseRun::limited(src, module.clone(), registry, req, &wrt)?;
    let mut exec = executor(src, req, module.len(), &mut rev.m, &mut rev.cache)?;
    let mut primal = None;
    if ret.shadow_leaves() > 0 {
        let value = run_on(src, &mut *exec, req.func, &copies(req.args), req)?;
        check_seed_shape(&value, seed)?;
        primal = Some(value);
    }
    let (value, gradient) = rev
        .wrapper
        .run(src, &mut *exec, req, req.args, &params, &wrt, seed)?;
    // The pullback restores the arrays the forward sweep wrote, the result's
    // among them: an array result is the primal run's.
    let value = primal.unwrap_or(value);
    drop(exec);
    Ok((
        Gradient {
            value,
            gradient,
            passes: 1,
            unbounded_loops: rev.cache.unbounded_loops().to_vec(),
        },
        rev.m,
    ))
}

/// The value of `func` at `req.args` and its Jacobian with respect to every
/// f64 of the arguments: by forward mode (`req.mode` [`Mode::Forward`]: one
/// tangent per column, `req.opts.lanes` columns per pass of `@f.fwd`; sparse
/// lanes count as one) or reverse mode (one seed per row). Rows are the f64
/// entries of the result, columns the f64 entries of the arguments (see
/// [`Jacobian`]). `req.opts.wrt` is not used. Also returns the module with
/// the derived functions.
///
/// ```
/// use irad::{GradRequest, Mode, Source};
///
/// let src = Source::new("f.irad", "fn f(x: f64, y: [f64]) -> (f64, f64) { (x * y[0], y[1]) }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let args = irad::parse_args(&Source::new("<args>", "2.0, [3.0, 4.0]"), &m, f)?;
/// let registry = irad::rules::Registry::new();
/// for mode in [Mode::Forward, Mode::Reverse] {
///     let req = GradRequest { mode, ..GradRequest::new(f, &args) };
///     let (j, _) = irad::jacobian(&src, &m, &registry, &req)?;
///     assert_eq!(j.rows, [[3.0, 2.0, 0.0], [0.0, 0.0, 1.0]]);
///     assert_eq!(j.inputs, ["%x", "%y[0]", "%y[1]"]);
///     assert_eq!(j.outputs, ["value.0", "value.1"]);
/// }
/// # Ok::<(), irad::Error>(())
/// ```
pub fn jacobian(
    src: &Source,
    module: &Module,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
) -> Result<(Jacobian, Module), Error> {
    or_strong(
        module,
        |m| jacobian_once(src, m, registry, req),
        |(j, _)| j.rows.iter().any(|r| slice_has_nan(r)),
    )
}

/// [`jacobian`] without the strong fallback.
fn jacobian_once(
    src: &Source,
    module: &Module,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
) -> Result<(Jacobian, Module), Error> {
    let params = check_call(src, module, req.func, req.args)?;
    let inputs = input_labels(module, req.func, req.args, &params, None);
    let (value, rows, passes, m) = match req.mode {
        Mode::Forward => jacobian_forward(src, module, registry, req, &params, inputs.len())?,
        Mode::Reverse => jacobian_reverse(src, module, registry, req, &params)?,
    };
    let ret = m[req.func].ret.clone();
    let mut outputs = Vec::new();
    leaf_labels(&value, &ret, "value".to_string(), &mut outputs);
    Ok((
        Jacobian {
            value,
            rows,
            outputs,
            inputs,
            passes,
        },
        m,
    ))
}

/// What a Jacobian's modes return: the value, the rows, the passes run, and
/// the module with the derived functions.
type Accumulated = (Val, Vec<Vec<f64>>, usize, Module);

/// The forward-mode Jacobian: the columns in batches of lanes, transposed.
fn jacobian_forward(
    src: &Source,
    module: &Module,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
    params: &[Type],
    ncols: usize,
) -> Result<Accumulated, Error> {
    let batch = match req.opts.lanes {
        Lanes::Dense(n) => n,
        Lanes::Sparse => NonZeroU32::MIN,
    };
    let cols = u32::try_from(ncols).unwrap_or(u32::MAX);
    let width = NonZeroU32::new(cols).map_or(NonZeroU32::MIN, |n| batch.min(n));
    let (mut m, mut fwd, rule) = forward_rule_of(
        src,
        module.clone(),
        registry,
        req,
        req.func,
        Lanes::Dense(width),
        None,
    )?;
    let w = width.get() as usize;
    let mut columns: Vec<Vec<f64>> = Vec::with_capacity(ncols);
    let mut value = None;
    let mut passes = 0;
    {
        let mut exec = executor(src, req, module.len(), &mut m, &mut fwd)?;
        let mut start = 0;
        loop {
            let dual_args = lane_args(req.args, params, start, w);
            let out = run_on(src, &mut *exec, rule, &dual_args, req)?;
            passes += 1;
            let Val::Dual(parts) = out else {
                return Err(internal(src, "the forward rule did not return a dual"));
            };
            if parts.len() != w + 1 {
                return Err(internal(src, "the forward rule returned the wrong lanes"));
            }
            value.get_or_insert_with(|| parts[0].clone());
            for t in parts.iter().skip(1).take(ncols.saturating_sub(start)) {
                let mut col = Vec::new();
                f64_leaves(t, &mut col);
                columns.push(col);
            }
            start += w;
            if start >= ncols {
                break;
            }
        }
    }
    let value = value.ok_or_else(|| internal(src, "no pass of the forward rule ran"))?;
    let nrows = {
        let mut v = Vec::new();
        f64_leaves(&value, &mut v);
        v.len()
    };
    let rows = (0..nrows)
        .map(|r| {
            columns
                .iter()
                .map(|c| c.get(r).copied().unwrap_or(0.0))
                .collect()
        })
        .collect();
    Ok((value, rows, passes, m))
}

/// The reverse-mode Jacobian: the value (a zero seed), then one unit seed per
/// f64 entry of the result.
fn jacobian_reverse(
    src: &Source,
    module: &Module,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
    params: &[Type],
) -> Result<Accumulated, Error> {
    let ret = module[req.func].ret.clone();
    let wrt: Vec<usize> = (0..params.len())
        .filter(|&i| params[i].has_cotangent())
        .collect();
    let mut rev = ReverseRun::limited(src, module.clone(), registry, req, &wrt)?;
    let mut rows = Vec::new();
    let mut passes = 0;
    let value = {
        let mut exec = executor(src, req, module.len(), &mut rev.m, &mut rev.cache)?;
        let value = run_on(src, &mut *exec, req.func, &copies(req.args), req)?;
        passes += 1;
        let mut entries = Vec::new();
        f64_leaves(&value, &mut entries);
        for r in 0..entries.len() {
            let mut k = 0;
            let seed = like_with(&value, &ret, &mut || {
                k += 1;
                if k - 1 == r { 1.0 } else { 0.0 }
            });
            let (_, grads) = rev
                .wrapper
                .run(src, &mut *exec, req, req.args, params, &wrt, &seed)?;
            passes += 1;
            let mut row = Vec::new();
            for g in grads.iter().flatten() {
                f64_leaves(g, &mut row);
            }
            rows.push(row);
        }
        value
    };
    Ok((value, rows, passes, rev.m))
}

/// The forward rule's dual arguments for the columns `start..start + w`:
/// lane k of argument i is the unit tangent of column `start + k` when that
/// column is one of argument i's f64s, zero otherwise.
fn lane_args(args: &[Val], params: &[Type], start: usize, w: usize) -> Vec<Val> {
    let mut offset = 0;
    let mut out = Vec::with_capacity(args.len());
    for (a, ty) in args.iter().zip(params) {
        if !ty.has_tangent() {
            out.push(deep_copy(a));
            continue;
        }
        let mut n = Vec::new();
        f64_leaves(a, &mut n);
        let mut parts = vec![deep_copy(a)];
        for k in 0..w {
            let col = start + k;
            let mut j = offset;
            parts.push(tangent_with(a, ty, &mut || {
                j += 1;
                if j - 1 == col { 1.0 } else { 0.0 }
            }));
        }
        offset += n.len();
        out.push(Val::Dual(parts.into()));
    }
    out
}

/// The direction `tangent` (one value per argument, of types `params`) with
/// the entries of the arguments outside `wrt` zero.
pub(crate) fn masked_tangent(tangent: &[Val], params: &[Type], wrt: &[usize]) -> Vec<Val> {
    tangent
        .iter()
        .zip(params)
        .enumerate()
        .map(|(i, (t, ty))| {
            if wrt.contains(&i) || !ty.has_tangent() {
                deep_copy(t)
            } else {
                like_with(t, ty, &mut || 0.0)
            }
        })
        .collect()
}

/// `m` with the forward rule of `func` at `width` derived and optimised by
/// `req`'s schedule (activity as `req` says), the rule cache, and the rule;
/// with `wrt`, the variant for those parameters ([`Forward::rule_wrt`]: the
/// tangents of the others must be zero). Also `hvp.rs`'s rule of the
/// wrapper `@f.vjp` and the rule reverse over forward differentiates.
pub(crate) fn forward_rule_of<'r>(
    src: &Source,
    m: Module,
    registry: &'r rules::Registry,
    req: &GradRequest<'_>,
    func: FuncId,
    width: Lanes,
    wrt: Option<&[usize]>,
) -> Result<(Module, Forward<'r>, FuncId), Error> {
    let mut fwd = Forward::new(registry);
    fwd.set_activity(req.opts.activity);
    forward_rule_with(src, m, fwd, req, func, width, wrt)
}

/// [`forward_rule_of`] with the rule cache `fwd` (which keeps what it built
/// before: `irad emit` shares one cache among its exports).
pub(crate) fn forward_rule_with<'r>(
    src: &Source,
    mut m: Module,
    fwd: Forward<'r>,
    req: &GradRequest<'_>,
    func: FuncId,
    width: Lanes,
    wrt: Option<&[usize]>,
) -> Result<(Module, Forward<'r>, FuncId), Error> {
    let mut stage = FwdRuleStage {
        fwd,
        func,
        width,
        wrt: wrt.map(<[usize]>::to_vec),
        rule: None,
    };
    let schedule = req.schedule.clone().unwrap_or_else(default_schedule);
    let mut opt = OptimiseStage::new(&schedule, Scope::From(m.len()));
    run_stages(
        src,
        &mut m,
        &mut [Step::Stage(&mut stage), Step::Stage(&mut opt)],
    )?;
    let rule = stage
        .rule
        .ok_or_else(|| internal(src, "the forward stage made no rule"))?;
    Ok((m, stage.fwd, rule))
}

/// A reverse-mode run being prepared: the module with the pieces and the
/// wrapper, and the rule cache the executor needs.
pub(crate) struct ReverseRun<'r> {
    pub(crate) m: Module,
    pub(crate) cache: Reverse<'r>,
    pub(crate) wrapper: VjpWrapper,
}

impl<'r> ReverseRun<'r> {
    /// Derives the pieces of `func` (in `m`) for `wrt`, optimises them by
    /// `req`'s schedule (activity as `req` says), and builds `@f.vjp`
    /// around them.
    pub(crate) fn new(
        src: &Source,
        m: Module,
        registry: &'r rules::Registry,
        req: &GradRequest<'_>,
        func: FuncId,
        wrt: &[usize],
    ) -> Result<ReverseRun<'r>, Error> {
        let mut rev = Reverse::new(registry);
        rev.set_activity(req.opts.activity);
        ReverseRun::with_cache(src, m, rev, req, func, wrt)
    }

    /// [`ReverseRun::new`] under `req`'s tape limit and checkpoint
    /// schedule (`irad grad --seed`, `jacobian --mode rev`: reverse mode of
    /// the function itself; a review found them ignored, session 40).
    pub(crate) fn limited(
        src: &Source,
        m: Module,
        registry: &'r rules::Registry,
        req: &GradRequest<'_>,
        wrt: &[usize],
    ) -> Result<ReverseRun<'r>, Error> {
        let mut rev = Reverse::new(registry);
        rev.set_activity(req.opts.activity);
        rev.set_tape_limit(req.opts.tape_limit);
        rev.set_checkpoint_schedule(req.opts.checkpoints.clone());
        rev.set_on_unbounded(req.opts.on_unbounded.clone());
        ReverseRun::with_cache(src, m, rev, req, req.func, wrt)
    }

    /// [`ReverseRun::new`] with the rule cache `rev` (which keeps what it
    /// built before: `irad emit` shares one cache among its exports).
    pub(crate) fn with_cache(
        src: &Source,
        mut m: Module,
        rev: Reverse<'r>,
        req: &GradRequest<'_>,
        func: FuncId,
        wrt: &[usize],
    ) -> Result<ReverseRun<'r>, Error> {
        let mut stage = RevPiecesStage {
            rev,
            func,
            wrt: wrt.to_vec(),
            pieces: None,
        };
        let schedule: Strategy = req.schedule.clone().unwrap_or_else(default_schedule);
        let mut opt = OptimiseStage::new(&schedule, Scope::From(m.len()));
        run_stages(
            src,
            &mut m,
            &mut [Step::Stage(&mut stage), Step::Stage(&mut opt)],
        )?;
        let (fwd, back) = stage
            .pieces
            .ok_or_else(|| internal(src, "the reverse stage made no pieces"))?;
        let id = vjp_wrapper(&mut m, func, fwd, back)
            .map_err(|e| internal(src, &format!("building the vjp wrapper: {e}")))?;
        Ok(ReverseRun {
            m,
            cache: stage.rev,
            wrapper: VjpWrapper { id },
        })
    }
}

/// `@f.vjp` in a module: see [`vjp_wrapper`].
pub(crate) struct VjpWrapper {
    pub(crate) id: FuncId,
}

impl VjpWrapper {
    /// The value and the gradient (per argument, `None` outside `wrt` and for
    /// arguments without a tangent) at `args` (of the wrapped function) for
    /// `seed`, whose array lengths are the result's; `req` gives the run
    /// options.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run(
        &self,
        src: &Source,
        exec: &mut dyn Executor,
        req: &GradRequest<'_>,
        args: &[Val],
        params: &[Type],
        wrt: &[usize],
        seed: &Val,
    ) -> Result<(Val, Vec<Option<Val>>), Error> {
        let mut call = copies(args);
        let mut shadows = Vec::new();
        for a in args {
            zero_shadows(a, &mut shadows);
        }
        call.extend(shadows.iter().cloned());
        let (mut scalars, mut arrays) = (Vec::new(), Vec::new());
        split_seed(seed, &mut scalars, &mut arrays);
        call.extend(scalars.into_iter().map(Val::F64));
        call.extend(arrays.into_iter().map(Val::f64_array));
        let out = run_on(src, exec, self.id, &call, req)?;
        let Val::Tuple(parts) = out else {
            return Err(internal(src, "the vjp wrapper did not return a tuple"));
        };
        let [value, cots] = &parts[..] else {
            return Err(internal(src, "the vjp wrapper returned the wrong shape"));
        };
        let total: usize = params.iter().map(Type::cotangent_leaves).sum();
        let mut leaves: std::collections::VecDeque<f64> = match (total, cots) {
            (0, _) => Default::default(),
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
        let mut shadows: std::collections::VecDeque<Val> = shadows.into();
        let gradient = args
            .iter()
            .zip(params)
            .enumerate()
            .map(|(i, (a, ty))| {
                let g = assemble(a, ty, &mut leaves, &mut shadows);
                if wrt.contains(&i) { g } else { None }
            })
            .collect();
        Ok((value.clone(), gradient))
    }
}

/// Builds `@f.vjp(params of f, shadows of the arguments' arrays, one f64 per
/// f64 of the result outside arrays, one [f64] per array of the result) ->
/// (R, cotangents)`: runs the forward sweep, adds each seed array into the
/// shadow of the result's array (the lengths must agree: the caller checks),
/// runs the pullback with the scalar seeds, and returns the value and what
/// the pullback returns. One run, so compiled code keeps its shadows.
fn vjp_wrapper(m: &mut Module, f: FuncId, fwd: FuncId, back: FuncId) -> Result<FuncId, String> {
    let func = m.get(f).ok_or("invalid function handle")?;
    let sig: FnType = func.fn_type();
    let base = func.name.clone();
    let arg_shadows: usize = sig.params.iter().map(Type::shadow_leaves).sum();
    let nscalar = sig.ret.cotangent_leaves();
    let narrays = sig.ret.shadow_leaves();
    let back_ret = Type::rev_back_fn(&sig).ret;
    let mut params: Vec<(Option<String>, Type)> =
        sig.params.iter().map(|t| (None, t.clone())).collect();
    let f64s = Type::Array(Scalar::F64);
    params.extend(std::iter::repeat_n((None, f64s.clone()), arg_shadows));
    params.extend(std::iter::repeat_n((None, Type::F64), nscalar));
    params.extend(std::iter::repeat_n((None, f64s), narrays));
    let mut name = format!("{base}.vjp");
    let mut k = 1;
    while m.by_name(&name).is_some() {
        k += 1;
        name = format!("{base}.vjp{k}");
    }
    let ret = Type::tuple(vec![sig.ret.clone(), back_ret]);
    let id = m
        .declare_func(&name, params, ret)
        .map_err(|e| e.to_string())?;
    let build = |e: BuildError| e.to_string();
    let rule = |e: RuleError| e.to_string();
    let mut b = FuncBuilder::new(m, id).map_err(build)?;
    let entry = b.create_block();
    b.switch_to_block(entry).map_err(build)?;
    let p = |b: &FuncBuilder<'_>, i: usize| b.param(i).map(Operand::Value).map_err(build);
    let nparams = sig.params.len();
    let fwd_args: Vec<Operand> = (0..nparams + arg_shadows)
        .map(|i| p(&b, i))
        .collect::<Result<_, _>>()?;
    let r = b
        .invoke(fwd, &fwd_args)
        .map_err(build)?
        .map(Operand::Value)
        .ok_or("the forward sweep has no result")?;
    let value = if narrays == 0 {
        r
    } else {
        for k in 0..narrays {
            let field = i64::try_from(k + 1).map_err(|e| e.to_string())?;
            let shadow =
                emit::value(&mut b, Prim::Getfield, &[r, Operand::from(field)]).map_err(rule)?;
            let seed = p(&b, nparams + arg_shadows + nscalar + k)?;
            let n = emit::value(&mut b, Prim::Length, &[shadow]).map_err(rule)?;
            emit::for_range(&mut b, n, |b, i| {
                let s = emit::value(b, Prim::Arrayref, &[shadow, i])?;
                let d = emit::value(b, Prim::Arrayref, &[seed, i])?;
                let sum = emit::value(b, Prim::Add, &[s, d])?;
                emit::effect(b, Prim::Arrayset, &[shadow, i, sum])
            })
            .map_err(rule)?;
        }
        emit::value(&mut b, Prim::Getfield, &[r, Operand::from(0i64)]).map_err(rule)?
    };
    let seeds: Vec<Operand> = (0..nscalar)
        .map(|k| p(&b, nparams + arg_shadows + k))
        .collect::<Result<_, _>>()?;
    let c = match b.invoke(back, &seeds).map_err(build)? {
        Some(v) => Operand::Value(v),
        None => emit::unit(),
    };
    let out = emit::value(&mut b, Prim::Tuple, &[value, c]).map_err(rule)?;
    b.ret(out).map_err(build)?;
    Ok(id)
}

/// `forward` for one function at one width, for the parameters in `wrt`
/// (all: `None`); the rule kept for the caller.
struct FwdRuleStage<'r> {
    fwd: Forward<'r>,
    func: FuncId,
    width: Lanes,
    wrt: Option<Vec<usize>>,
    rule: Option<FuncId>,
}

impl Stage for FwdRuleStage<'_> {
    fn id(&self) -> PassId {
        PassId::Forward
    }

    fn required(&self) -> bool {
        true
    }

    fn run(
        &mut self,
        m: &mut Module,
        _: &PipelineOptions,
    ) -> Result<Option<Vec<Snapshot>>, PassError> {
        self.rule = Some(match &self.wrt {
            Some(wrt) => self.fwd.rule_wrt(m, self.func, self.width, wrt)?,
            None => self.fwd.rule(m, self.func, self.width)?,
        });
        Ok(None)
    }
}

/// `reverse` for one function: its pieces for `wrt` (kept for the caller).
struct RevPiecesStage<'r> {
    rev: Reverse<'r>,
    func: FuncId,
    wrt: Vec<usize>,
    pieces: Option<(FuncId, FuncId)>,
}

impl Stage for RevPiecesStage<'_> {
    fn id(&self) -> PassId {
        PassId::Reverse
    }

    fn required(&self) -> bool {
        true
    }

    fn needs_normalised(&self) -> bool {
        true
    }

    fn run(
        &mut self,
        m: &mut Module,
        _: &PipelineOptions,
    ) -> Result<Option<Vec<Snapshot>>, PassError> {
        self.pieces = Some(self.rev.rule_wrt(m, self.func, &self.wrt)?);
        Ok(None)
    }
}

/// The executor `req.opts.exec` makes of `m`, with `provider`'s rules.
/// The huge blocks of the functions from number `first` on (those the
/// derivations added to the user's module of `first` functions) are split
/// first, as `irad grad` does (`crate::split_derived`).
pub(crate) fn executor<'m>(
    src: &Source,
    req: &GradRequest<'_>,
    first: usize,
    m: &'m mut Module,
    provider: &'m mut dyn RuleProvider,
) -> Result<Box<dyn Executor + 'm>, Error> {
    crate::split_derived(src, m, first, req.opts.split_limit)?;
    (req.opts.exec)(m, provider).map_err(|err| Error::Run {
        file: src.name.clone(),
        err: Box::new(err),
    })
}

/// Runs `f` on `args` with `req`'s run options; a run-time error is the
/// program's.
pub(crate) fn run_on(
    src: &Source,
    exec: &mut dyn Executor,
    f: FuncId,
    args: &[Val],
    req: &GradRequest<'_>,
) -> Result<Val, Error> {
    exec.run(f, args, &req.opts.run)
        .map_err(|err| grad_error(src, GradError::Run(err)))
}

/// Where `func` is, and the function; an error for a stale handle.
pub(crate) fn func_loc<'m>(
    src: &Source,
    module: &'m Module,
    func: FuncId,
) -> Result<(Location, &'m irad_ir::Func), Error> {
    let f = module
        .get(func)
        .ok_or_else(|| internal(src, "invalid function handle"))?;
    let loc = Location {
        func: Some(f.name.as_str().into()),
        pos: f.pos,
        ..Location::default()
    };
    Ok((loc, f))
}

/// A request that does not fit the function, located at the function.
pub(crate) fn invalid(src: &Source, loc: Location, msg: String) -> Error {
    grad_error(src, GradError::Invalid { loc, msg })
}

/// An error about a direction (tangent or seed) named `file`, at its start.
fn request_error(file: &str, msg: String) -> Error {
    Error::Parse {
        file: file.to_string(),
        err: Box::new(ParseError {
            loc: Location::at(Pos::new(1, 1)),
            msg,
        }),
    }
}

/// `Ok` when `func`'s result has an f64 entry (outside or inside arrays).
fn result_has_f64(src: &Source, module: &Module, func: FuncId) -> Result<(), Error> {
    let (floc, f) = func_loc(src, module, func)?;
    if f.ret.cotangent_leaves() + f.ret.shadow_leaves() > 0 {
        return Ok(());
    }
    Err(invalid(
        src,
        floc,
        format!(
            "@{} returns {}, which has no f64 entries: there is nothing to differentiate",
            f.name, f.ret
        ),
    ))
}

/// Checks that `args` fit `func` and that its result has f64 entries; the
/// parameter types.
pub(crate) fn check_call(
    src: &Source,
    module: &Module,
    func: FuncId,
    args: &[Val],
) -> Result<Vec<Type>, Error> {
    let (floc, f) = func_loc(src, module, func)?;
    result_has_f64(src, module, func)?;
    let params = f.param_types();
    if params.len() != args.len() {
        return Err(invalid(
            src,
            floc,
            format!(
                "@{} takes {} argument{}, found {}",
                f.name,
                params.len(),
                plural(params.len()),
                args.len()
            ),
        ));
    }
    for (i, (ty, a)) in params.iter().zip(args).enumerate() {
        if !a.has_type(ty, module) {
            return Err(invalid(
                src,
                floc,
                format!(
                    "argument {} of @{} must be {ty}, found {}",
                    i + 1,
                    f.name,
                    a.type_text(module)
                ),
            ));
        }
    }
    Ok(params)
}

/// The `wrt` positions (sorted, distinct; all with a tangent by default),
/// checked as `irad grad --wrt` checks them.
pub(crate) fn check_wrt(
    src: &Source,
    module: &Module,
    func: FuncId,
    wrt: Option<&[usize]>,
) -> Result<Vec<usize>, Error> {
    let (floc, f) = func_loc(src, module, func)?;
    let params = f.param_types();
    let Some(list) = wrt else {
        return Ok((0..params.len())
            .filter(|&i| params[i].has_cotangent())
            .collect());
    };
    for &i in list {
        let msg = match params.get(i) {
            None => format!(
                "--wrt {i}: @{} has {} argument{} (positions from 0)",
                f.name,
                params.len(),
                plural(params.len())
            ),
            Some(ty) if !ty.has_cotangent() => format!(
                "--wrt {i}: argument {i} of @{} has type {ty}, which has no tangent",
                f.name
            ),
            Some(_) => continue,
        };
        return Err(invalid(src, floc, msg));
    }
    let mut list = list.to_vec();
    list.sort_unstable();
    list.dedup();
    Ok(list)
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Checks a tangent against the arguments: one value per argument, of the
/// argument's type, arrays of the argument's lengths. Errors name `file`.
pub(crate) fn check_tangent(
    file: &str,
    module: &Module,
    func: FuncId,
    args: &[Val],
    tangent: &[Val],
) -> Result<(), Error> {
    let f = module
        .get(func)
        .ok_or_else(|| request_error(file, "invalid function handle".into()))?;
    if tangent.len() != args.len() {
        return Err(request_error(
            file,
            format!(
                "@{} takes {} argument{}, the tangent has {}",
                f.name,
                args.len(),
                plural(args.len()),
                tangent.len()
            ),
        ));
    }
    for (i, ((a, t), ty)) in args.iter().zip(tangent).zip(f.param_types()).enumerate() {
        let what = format!("tangent for argument {}", i + 1);
        if !t.has_type(&ty, module) {
            return Err(request_error(
                file,
                format!("{what} must be {ty}, found {}", t.type_text(module)),
            ));
        }
        same_shape(a, t, &what, "argument").map_err(|msg| request_error(file, msg))?;
    }
    Ok(())
}

/// Checks that the seed's arrays have the lengths of the value's.
fn check_seed_shape(value: &Val, seed: &Val) -> Result<(), Error> {
    same_shape(value, seed, "the seed", "the result").map_err(|msg| request_error(SEED_SOURCE, msg))
}

/// `Err` naming the first array of `t` whose length differs from the one at
/// the same place in `a` (values of one type): `"{what} (component 1) has 3
/// entries, {whose} has 4"`.
fn same_shape(a: &Val, t: &Val, what: &str, whose: &str) -> Result<(), String> {
    fn walk(a: &Val, t: &Val, path: &mut Vec<usize>) -> Option<(Vec<usize>, usize, usize)> {
        match (a, t) {
            (Val::Array(x), Val::Array(y)) => {
                let (n, m) = (x.0.borrow().len(), y.0.borrow().len());
                (n != m).then(|| (path.clone(), m, n))
            }
            (Val::Tuple(xs), Val::Tuple(ys)) | (Val::Dual(xs), Val::Dual(ys)) => xs
                .iter()
                .zip(ys.iter())
                .enumerate()
                .find_map(|(k, (x, y))| {
                    path.push(k);
                    let r = walk(x, y, path);
                    path.pop();
                    r
                }),
            _ => None,
        }
    }
    match walk(a, t, &mut Vec::new()) {
        None => Ok(()),
        Some((path, m, n)) => {
            let at = if path.is_empty() {
                String::new()
            } else {
                let p: Vec<String> = path.iter().map(usize::to_string).collect();
                format!(" (component {})", p.join("."))
            };
            let entries = |k: usize| if k == 1 { "entry" } else { "entries" };
            Err(format!(
                "{what}{at} has {m} {}, {whose} has {n}",
                entries(m)
            ))
        }
    }
}

/// A tangent written like the argument (of type `ty`, which has a tangent)
/// as the forward rule takes it: `()` for components without a tangent.
pub(crate) fn as_tangent(t: &Val, ty: &Type) -> Val {
    match (t, ty) {
        (Val::Tuple(vals), Type::Tuple(tys)) => Val::Tuple(
            vals.iter()
                .zip(tys.iter())
                .map(|(v, t)| {
                    if t.has_tangent() {
                        as_tangent(v, t)
                    } else {
                        Val::Unit
                    }
                })
                .collect(),
        ),
        (v, _) => deep_copy(v),
    }
}

/// A value of `val`'s tangent type (`ty` has one) whose f64 entries are
/// `next()` in order.
pub(crate) fn tangent_with(val: &Val, ty: &Type, next: &mut dyn FnMut() -> f64) -> Val {
    match (val, ty) {
        (Val::Tuple(vals), Type::Tuple(tys)) => Val::Tuple(
            vals.iter()
                .zip(tys.iter())
                .map(|(v, t)| {
                    if t.has_tangent() {
                        tangent_with(v, t, next)
                    } else {
                        Val::Unit
                    }
                })
                .collect(),
        ),
        _ => like_with(val, ty, next),
    }
}

/// A value of `val`'s type whose f64 entries are `next()` in order (other
/// entries copied).
pub(crate) fn like_with(val: &Val, ty: &Type, next: &mut dyn FnMut() -> f64) -> Val {
    match (val, ty) {
        (Val::F64(_), _) => Val::F64(next()),
        (Val::Array(a), Type::Array(Scalar::F64)) => {
            let n = a.0.borrow().len();
            Val::f64_array((0..n).map(|_| next()).collect())
        }
        (Val::Tuple(vals), Type::Tuple(tys)) => Val::Tuple(
            vals.iter()
                .zip(tys.iter())
                .map(|(v, t)| like_with(v, t, next))
                .collect(),
        ),
        (Val::Dual(parts), _) => match ty.dual_parts() {
            Some((inner, tangent, _)) => Val::Dual(
                parts
                    .iter()
                    .enumerate()
                    .map(|(k, v)| like_with(v, if k == 0 { inner } else { &tangent }, next))
                    .collect(),
            ),
            None => deep_copy(val),
        },
        (v, _) => deep_copy(v),
    }
}

/// The f64 entries of `val` in depth-first order, array elements in order.
pub(crate) fn f64_leaves(val: &Val, out: &mut Vec<f64>) {
    match val {
        Val::F64(x) => out.push(*x),
        Val::Array(a) => {
            if let ArrayData::F64(xs) = &*a.0.borrow() {
                out.extend_from_slice(xs);
            }
        }
        Val::Tuple(vals) | Val::Dual(vals) => vals.iter().for_each(|v| f64_leaves(v, out)),
        _ => {}
    }
}

/// The labels of the f64 entries of `val` (of type `ty`), in the order of
/// [`f64_leaves`], each `prefix` followed by its path.
fn leaf_labels(val: &Val, ty: &Type, prefix: String, out: &mut Vec<String>) {
    match (val, ty) {
        (Val::F64(_), _) => out.push(prefix),
        (Val::Array(a), Type::Array(Scalar::F64)) => {
            let n = a.0.borrow().len();
            out.extend((0..n).map(|i| format!("{prefix}[{i}]")));
        }
        (Val::Tuple(vals), Type::Tuple(tys)) => {
            for (k, (v, t)) in vals.iter().zip(tys.iter()).enumerate() {
                leaf_labels(v, t, format!("{prefix}.{k}"), out);
            }
        }
        (Val::Dual(parts), _) => {
            if let Some((inner, tangent, _)) = ty.dual_parts() {
                for (k, v) in parts.iter().enumerate() {
                    match k {
                        0 => leaf_labels(v, inner, format!("{prefix}.p"), out),
                        _ => leaf_labels(v, &tangent, format!("{prefix}.t{}", k - 1), out),
                    }
                }
            }
        }
        _ => {}
    }
}

/// The labels of the Jacobian's columns: every f64 of the arguments (of
/// those in `wrt` only, when given).
pub(crate) fn input_labels(
    module: &Module,
    func: FuncId,
    args: &[Val],
    params: &[Type],
    wrt: Option<&[usize]>,
) -> Vec<String> {
    let f = &module[func];
    let mut out = Vec::new();
    for (i, (a, ty)) in args.iter().zip(params).enumerate() {
        if wrt.is_some_and(|w| !w.contains(&i)) {
            continue;
        }
        let name = f
            .params
            .get(i)
            .and_then(|&v| f.values[v].name.as_deref())
            .map_or(format!("arg{i}"), |n| format!("%{n}"));
        leaf_labels(a, ty, name, &mut out);
    }
    out
}

/// The seed's f64 entries outside arrays (the pullback's parameters) and
/// its f64 arrays (added into the result's shadows), depth-first.
fn split_seed(seed: &Val, scalars: &mut Vec<f64>, arrays: &mut Vec<Vec<f64>>) {
    match seed {
        Val::F64(x) => scalars.push(*x),
        Val::Array(a) => {
            if let ArrayData::F64(xs) = &*a.0.borrow() {
                arrays.push(xs.clone());
            }
        }
        Val::Tuple(vals) | Val::Dual(vals) => {
            vals.iter().for_each(|v| split_seed(v, scalars, arrays))
        }
        _ => {}
    }
}

/// Fresh copies of the arguments (arrays get new buffers).
pub(crate) fn copies(args: &[Val]) -> Vec<Val> {
    args.iter().map(deep_copy).collect()
}
