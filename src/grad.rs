//! Gradients in the facade: [`grad`] computes a value and its gradient as a
//! [`GradRequest`] asks (the function, its arguments, the mode, the options
//! of [`GradOptions`], the optimiser schedule), [`grad_forward`] and
//! [`grad_reverse`] are the one-mode shorthands with the default schedule,
//! and [`grad_error`] turns the passes' [`GradError`] into an [`Error`].
//!
//! Assumes a module that verifies (as [`crate::load`] gives). Guarantees: the
//! module is normalised, the derived functions added and optimised by one
//! pipeline of the pass manager, then run by `opts.exec`; every failure is
//! an [`Error`] naming the source.

use crate::strong::{any_nan, strong_copy};
use crate::{Error, Mode, Source, internal, rules, run_stages};
use irad_ir::interp::value::Val;
use irad_ir::{FuncId, Module};
use irad_passes::Step;
use irad_passes::forward::grad::{GradError, GradOptions, Gradient};
use irad_passes::forward::{Forward, ForwardError};
use irad_passes::optimise::{Strategy, default_schedule};
use irad_passes::reverse::Reverse;
use irad_passes::stages::{GradMode, GradStage, OptimiseStage, Scope};

/// What [`grad`] computes: the value and gradient of `func` at `args`.
/// [`GradRequest::new`] gives the defaults: reverse mode, the default
/// [`GradOptions`] (every argument with a tangent, width 1, the interpreter),
/// the default schedule.
///
/// ```
/// use irad::{GradRequest, Mode, Source};
///
/// let src = Source::new("f.irad", "fn f(x: f64, y: f64) -> f64 { x * x * y }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let args = irad::parse_args(&Source::new("<args>", "3.0, 2.0"), &m, f)?;
/// let registry = irad::rules::Registry::new();
/// // Forward mode, without optimisation (`id`); the gradient is the same.
/// let req = GradRequest {
///     mode: Mode::Forward,
///     schedule: Some(irad::read_schedule(Some("id"))?),
///     ..GradRequest::new(f, &args)
/// };
/// let (g, m2) = irad::grad(&src, &m, &registry, &req)?;
/// assert_eq!(g.gradient[1].as_ref().map(|d| d.display(&m2)).as_deref(), Some("9.0"));
/// // Reverse mode with a schedule of one's own.
/// let req = GradRequest {
///     schedule: Some(irad::read_schedule(Some("normalise(fold <+ identities); try(dce)"))?),
///     ..GradRequest::new(f, &args)
/// };
/// let (g, m2) = irad::grad(&src, &m, &registry, &req)?;
/// assert_eq!(g.gradient[0].as_ref().map(|d| d.display(&m2)).as_deref(), Some("12.0"));
/// # Ok::<(), irad::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct GradRequest<'a> {
    /// The function; it returns f64.
    pub func: FuncId,
    /// Its arguments.
    pub args: &'a [Val],
    /// Reverse mode (the default) or forward mode.
    pub mode: Mode,
    /// The arguments to differentiate (`wrt`), the batch width (forward
    /// mode), the call-depth limit, the executor, activity analysis.
    pub opts: GradOptions,
    /// The optimiser schedule run over the derived functions before they
    /// run; `None`: the default schedule (`irad grad --schedule`).
    pub schedule: Option<Strategy>,
}

impl<'a> GradRequest<'a> {
    /// The gradient of `func` at `args` with every other field at its default.
    pub fn new(func: FuncId, args: &'a [Val]) -> GradRequest<'a> {
        GradRequest {
            func,
            args,
            mode: Mode::Reverse,
            opts: GradOptions::default(),
            schedule: None,
        }
    }

    /// The schedule to run: the one asked for, or the default.
    pub(crate) fn schedule(&self) -> Strategy {
        self.schedule.clone().unwrap_or_else(default_schedule)
    }
}

/// Value and gradient as `req` asks: the module is normalised, the derived
/// functions of `req.func` built in `req.mode` with the rules of `registry`
/// and optimised by the schedule, then run by `req.opts.exec`. Also returns
/// the module with the derived functions, which the values may refer to
/// (function values). See [`GradRequest`] for an example.
pub fn grad(
    src: &Source,
    module: &Module,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
) -> Result<(Gradient, Module), Error> {
    let (mut runs, m) = grad_runs(
        src,
        module.clone(),
        Some(module),
        registry,
        req,
        &[req.opts.exec],
    )?;
    match runs.pop() {
        Some(g) => Ok((g?, m)),
        None => Err(internal(src, "a gradient ran on no executor")),
    }
}

/// As [`grad`], taking the module rather than a copy of it: for a caller
/// that needs only the module returned (the command line), the program's
/// functions are then in memory once.
///
/// ```
/// use irad::{GradRequest, Source};
///
/// let src = Source::new("f.irad", "fn f(x: f64) -> f64 { x * x }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let args = [irad::Val::F64(3.0)];
/// let registry = irad::rules::Registry::new();
/// let (g, m) = irad::grad_owned(&src, m, &registry, &GradRequest::new(f, &args))?;
/// assert_eq!(g.gradient[0].as_ref().map(|d| d.display(&m)).as_deref(), Some("6.0"));
/// # Ok::<(), irad::Error>(())
/// ```
pub fn grad_owned(
    src: &Source,
    module: Module,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
) -> Result<(Gradient, Module), Error> {
    // The strong fallback (crate::strong) derives from the module as given,
    // rebuilt from the functions it had: no copy kept on the common path.
    let (mut runs, m) = grad_runs(src, module, None, registry, req, &[req.opts.exec])?;
    match runs.pop() {
        Some(g) => Ok((g?, m)),
        None => Err(internal(src, "a gradient ran on no executor")),
    }
}

/// [`grad`] derived once and run by each of `execs` in turn (in place of
/// `req.opts.exec`), each on its own copy of the arguments: one derivation
/// and one optimisation for several backends, which a comparison of
/// backends needs (the fuzzer's `interp_vs_jit` target) and which costs
/// half of deriving for each. An error of the derivation is the `Err`; the
/// result of each run is one entry of the list, in the order of `execs`.
/// Rules of function values that one run derives are in the rule cache
/// for the runs after it. Also returns the module with the derived
/// functions (and those rules).
///
/// ```
/// use irad::{Backend, GradRequest, Source};
///
/// let src = Source::new("f.irad", "fn f(x: f64, y: f64) -> f64 { x * x * y }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let args = irad::parse_args(&Source::new("<args>", "3.0, 2.0"), &m, f)?;
/// let registry = irad::rules::Registry::new();
/// let execs = [Backend::Interp.exec(), Backend::Jit.exec()];
/// let (runs, m) = irad::grad_each(&src, &m, &registry, &GradRequest::new(f, &args), &execs)?;
/// for g in runs {
///     let g = g?;
///     let grads: Vec<String> = g.gradient.iter().flatten().map(|d| d.display(&m)).collect();
///     assert_eq!(grads, ["12.0", "9.0"]);
/// }
/// # Ok::<(), irad::Error>(())
/// ```
pub fn grad_each(
    src: &Source,
    module: &Module,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
    execs: &[irad_ir::interp::MakeExecutor],
) -> Result<(Vec<Result<Gradient, Error>>, Module), Error> {
    grad_runs(src, module.clone(), Some(module), registry, req, execs)
}

/// [`grad_each`] on the module itself (not a copy), `original` being the
/// module as given (`None`: the functions `module` has now, which the
/// derivation only normalises and appends to): a run whose gradient has a
/// NaN is replaced by the run of the strong derivative, derived from the
/// original only then (`crate::strong`; docs/rules.md, "Infinities and
/// NaN").
fn grad_runs(
    src: &Source,
    module: Module,
    original: Option<&Module>,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
    execs: &[irad_ir::interp::MakeExecutor],
) -> Result<(Vec<Result<Gradient, Error>>, Module), Error> {
    let nan = |r: &Result<Gradient, Error>| r.as_ref().is_ok_and(|g| any_nan(&g.gradient));
    let (mut runs, m, first) = grad_runs_in(src, module, registry, req, execs)?;
    let strong_already = original.map_or(m.strong_products(), Module::strong_products);
    if runs.iter().any(nan) && !strong_already {
        let strong = match original {
            Some(original) => strong_copy(original),
            None => {
                let mut prefix = m.prefix(first);
                prefix.set_strong_products(true);
                prefix
            }
        };
        let (strong, _, _) = grad_runs_in(src, strong, registry, req, execs)?;
        for (run, s) in runs.iter_mut().zip(strong) {
            if nan(run) {
                *run = s;
            }
        }
    }
    Ok((runs, m))
}

/// The runs of a gradient, the module with what was derived, and how many
/// functions it had before the derivation appended its own.
type Derived = (Vec<Result<Gradient, Error>>, Module, usize);

/// [`grad_runs`] without the fallback; also returns how many functions
/// the module had before the derivation appended its own (the user's,
/// and the parts [`split_primal`] made of them).
fn grad_runs_in(
    src: &Source,
    mut module: Module,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
    execs: &[irad_ir::interp::MakeExecutor],
) -> Result<Derived, Error> {
    split_primal(src, &mut module, req.opts.primal_split_limit)?;
    let first = module.len();
    let schedule = req.schedule();
    let (runs, m) = match req.mode {
        Mode::Forward => grad_in(src, module, Forward::new(registry), req, &schedule, execs)?,
        Mode::Reverse => grad_in(src, module, Reverse::new(registry), req, &schedule, execs)?,
    };
    Ok((runs, m, first))
}

/// Value and gradient of `func` at `args` by forward mode: the module is
/// normalised, the forward rule of `func` derived with the rules of
/// `registry`, and run in the interpreter (see
/// [`irad_passes::forward::grad::gradient`]). Also returns the module with the
/// rules, which the values may refer to (function values).
/// [`GradOptions`] chooses the arguments (`wrt`), the batch width, the
/// backend that runs the rules and the call-depth limit.
///
/// ```
/// use irad::{GradOptions, Source};
///
/// let src = Source::new("f.irad", "fn f(x: f64, y: f64) -> f64 { x * x * y }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let args = irad::parse_args(&Source::new("<args>", "3.0, 2.0"), &m, f)?;
/// let registry = irad::rules::Registry::new();
/// let lanes = irad::ir::Lanes::dense(2).expect("2 is not 0");
/// let opts = GradOptions { lanes, ..GradOptions::default() };
/// let (g, m) = irad::grad_forward(&src, &m, f, &args, &registry, &opts)?;
/// assert_eq!(g.value.display(&m), "18.0");
/// let grads: Vec<String> = g.gradient.iter().flatten().map(|d| d.display(&m)).collect();
/// assert_eq!(grads, ["12.0", "9.0"]);
/// assert_eq!(g.passes, 1); // both tangents in one pass of @f.fwd2
///
/// // Only with respect to y: x has no gradient.
/// let opts = GradOptions { wrt: Some(vec![1]), ..GradOptions::default() };
/// let (g, _) = irad::grad_forward(&src, &m, f, &args, &registry, &opts)?;
/// assert!(g.gradient[0].is_none());
/// # Ok::<(), irad::Error>(())
/// ```
pub fn grad_forward(
    src: &Source,
    module: &Module,
    func: FuncId,
    args: &[Val],
    registry: &rules::Registry,
    opts: &GradOptions,
) -> Result<(Gradient, Module), Error> {
    let req = GradRequest {
        mode: Mode::Forward,
        opts: opts.clone(),
        ..GradRequest::new(func, args)
    };
    grad(src, module, registry, &req)
}

/// `req`'s gradient in the mode of `cache` (forward or reverse), with the
/// schedule given: one pipeline (normalisation, the gradient stage, the
/// schedule over what it derived), then the plan run by each of `execs`.
fn grad_in<C: GradMode>(
    src: &Source,
    mut m: Module,
    cache: C,
    req: &GradRequest<'_>,
    schedule: &irad_passes::optimise::Strategy,
    execs: &[irad_ir::interp::MakeExecutor],
) -> Result<(Vec<Result<Gradient, Error>>, Module), Error> {
    let (opts, args) = (&req.opts, req.args);
    let mut stage = GradStage::new(cache, req.func, args, opts);
    let first = m.len();
    let mut opt = OptimiseStage::new(schedule, Scope::From(first));
    run_stages(
        src,
        &mut m,
        &mut [Step::Stage(&mut stage), Step::Stage(&mut opt)],
    )?;
    crate::split_derived(src, &mut m, first, opts.split_limit)?;
    let Some(plan) = stage.plan else {
        return Err(internal(
            src,
            &format!("the {} stage made no plan", C::PASS),
        ));
    };
    let runs = execs
        .iter()
        .map(|exec| {
            irad_ir::timings::time(irad_ir::timings::Stage::Run, || {
                let mut exec = exec(&mut m, &mut stage.cache).map_err(|err| Error::Run {
                    file: src.name.clone(),
                    err: Box::new(err),
                })?;
                C::run_plan(&plan, &mut *exec, args, &opts.run).map_err(|e| grad_error(src, e))
            })
        })
        .collect();
    Ok((runs, m))
}

/// Splits the blocks of more than `limit` statements of `m`'s functions
/// (the user's, before a derivation) into functions of their own after
/// normalising `m` (`irad_passes::split`): the derivation and the
/// optimiser then work part by part (the same operations in the same
/// order). A module with no function of more than `limit` statements is
/// left as it is, not even normalised (the pipeline after does that).
fn split_primal(src: &Source, m: &mut Module, limit: usize) -> Result<(), Error> {
    if m.funcs().all(|(_, f)| f.insts.len() <= limit) {
        return Ok(());
    }
    run_stages(src, m, &mut [])?;
    crate::split_derived(src, m, 0, limit)
}

/// The error of a gradient request, in the facade's terms: what turns the
/// [`GradError`] of [`crate::jit_gradient`], [`crate::CompiledGradient::run`] or [`crate::bench()`]
/// into an [`Error`] that renders with `src`'s name and lines.
///
/// ```
/// use irad::{GradOptions, GradRequest, Source};
///
/// let src = Source::new("f.irad", "fn f(x: f64) -> f64 { x }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let args = irad::parse_args(&Source::new("<args>", "1.0"), &m, f)?;
/// let registry = irad::rules::Registry::new();
/// let opts = GradOptions { wrt: Some(vec![3]), ..GradOptions::default() };
/// let req = GradRequest { opts, ..GradRequest::new(f, &args) };
/// let Err(e) = irad::jit_gradient(&m, &registry, &req) else {
///     panic!("there is no argument 3");
/// };
/// let err = irad::grad_error(&src, e);
/// assert!(err.render(&[&src]).starts_with("f.irad:"), "{}", err.render(&[&src]));
/// # Ok::<(), irad::Error>(())
/// ```
pub fn grad_error(src: &Source, e: GradError) -> Error {
    let file = src.name.clone();
    match e {
        GradError::Forward(err) => Error::Forward {
            file,
            err: Box::new(err),
        },
        GradError::Reverse(err) => Error::Reverse {
            file,
            err: Box::new(err),
        },
        GradError::Run(err) => Error::Run {
            file,
            err: Box::new(err),
        },
        GradError::Invalid { loc, msg } => Error::Forward {
            file,
            err: Box::new(ForwardError::new(loc, msg)),
        },
    }
}

/// Value and gradient of `func` at `args` by reverse mode: the module is
/// normalised, the rule pieces of `func` derived with the rrules of
/// `registry`, and run once each in the interpreter (see
/// [`irad_passes::reverse::grad::gradient`]; `opts.lanes` is not used). Also
/// returns the module with the pieces.
///
/// ```
/// use irad::{GradOptions, Source};
///
/// let src = Source::new("f.irad", "fn f(x: f64, y: f64) -> f64 { x * x * y }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let args = irad::parse_args(&Source::new("<args>", "3.0, 2.0"), &m, f)?;
/// let registry = irad::rules::Registry::new();
/// let (g, m) = irad::grad_reverse(&src, &m, f, &args, &registry, &GradOptions::default())?;
/// assert_eq!(g.value.display(&m), "18.0");
/// let grads: Vec<String> = g.gradient.iter().flatten().map(|d| d.display(&m)).collect();
/// assert_eq!(grads, ["12.0", "9.0"]);
/// // The derived pieces are in the module returned.
/// assert!(m.by_name("f.rev.back").is_some());
/// # Ok::<(), irad::Error>(())
/// ```
pub fn grad_reverse(
    src: &Source,
    module: &Module,
    func: FuncId,
    args: &[Val],
    registry: &rules::Registry,
    opts: &GradOptions,
) -> Result<(Gradient, Module), Error> {
    let req = GradRequest {
        mode: Mode::Reverse,
        opts: opts.clone(),
        ..GradRequest::new(func, args)
    };
    grad(src, module, registry, &req)
}
