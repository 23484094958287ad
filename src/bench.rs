//! `irad bench`: compile a function and its gradient with the JIT, then time
//! both in one process, interleaved, and report the medians and their ratio.
//!
//! What is timed (docs/cli.md, "irad bench"):
//! - the primal: one compiled call of `f` on the arguments;
//! - reverse mode: one compiled call of `@f.rev` (SYNTAX.md's gradient
//!   convention: the arguments, a shadow per array argument, seed 1), which
//!   gives the value and the whole gradient; the shadows are made once and
//!   keep accumulating, which does not change the cost;
//! - forward mode: the whole gradient, ceil(n / width) passes of `@f.fwdW`
//!   with the argument copies and seeds they need.
//!
//! Compile time covers normalising, deriving, optimising (the schedule of
//! [`BenchOptions::schedule`]) and compiling the primal and the
//! gradient's functions. After one warm-up call of each, samples alternate
//! (primal, gradient, primal, ...), and each of the two stops on its own
//! once it has run for the requested time (its calls' times summed) and at
//! least [`MIN_RUNS`] times, or [`MAX_RUNS`] times: a gradient a thousand
//! times slower than its primal runs a thousandth as often, so sampling takes
//! about twice the requested time whatever their ratio (longer only when
//! [`MIN_RUNS`] calls take longer).

use crate::GradRequest;
use crate::compiled::{Mode, into_grad_error, jit_gradient, normalise_and};
use irad_codegen::Jit;
use irad_ir::interp::{ArrayData, ArrayRef, RunError, Val};
use irad_ir::{FuncId, Module, Scalar, Type};
use irad_passes::forward::grad::{GradError, GradOptions};
use irad_passes::manager::{PassError, PassId, PipelineOptions, Snapshot, Stage, Step};
use irad_passes::reverse::Reverse;
use irad_passes::stages::{OptimiseStage, ReverseGradStage, Scope};
use irad_rules::Registry;
use std::time::{Duration, Instant};

/// What [`bench()`] measured, in seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchReport {
    /// Normalising, deriving and compiling the primal and the gradient.
    pub compile_s: f64,
    /// Median time of one primal call.
    pub primal_s: f64,
    /// Median time of one gradient.
    pub grad_s: f64,
    /// `grad_s / primal_s`.
    pub ratio: f64,
    /// Timed primal calls.
    pub primal_runs: usize,
    /// Timed gradients.
    pub grad_runs: usize,
    /// In reverse mode, the loops a tape limit or the checkpoint schedule
    /// asked to checkpoint that are not checkpointed and whose records
    /// grow with their iterations ([`Reverse::unbounded_loops`]).
    pub unbounded_loops: Vec<irad_passes::reverse::UnboundedLoop>,
}

/// How long [`bench()`] samples each of primal and gradient at least, unless
/// told otherwise.
pub const MIN_SAMPLE_TIME: Duration = Duration::from_secs(1);

/// [`bench()`] times each of primal and gradient at least this many times.
pub const MIN_RUNS: usize = 5;

/// [`bench()`] times each of primal and gradient at most this many times,
/// even short of [`BenchOptions::min_time`], so that the samples of a
/// function of a few nanoseconds stay in bounds (16 MB).
pub const MAX_RUNS: usize = 1_000_000;

/// What [`bench()`] does.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// The gradient request (`wrt`, forward batch width, call-depth limit).
    pub grad: GradOptions,
    /// The AD mode.
    pub mode: Mode,
    /// How long each of primal and gradient is sampled (the times of its
    /// calls summed), each on its own.
    pub min_time: Duration,
    /// The optimiser schedule run over the gradient's derived functions
    /// before they are compiled (default: the default schedule).
    pub schedule: irad_passes::optimise::Strategy,
}

impl Default for BenchOptions {
    fn default() -> BenchOptions {
        BenchOptions {
            grad: GradOptions::default(),
            mode: Mode::Reverse,
            min_time: MIN_SAMPLE_TIME,
            schedule: irad_passes::optimise::default_schedule(),
        }
    }
}

enum Grad<'r> {
    Reverse {
        jit: Jit<'r>,
        rev: FuncId,
        call: Vec<Val>,
    },
    Forward(crate::compiled::CompiledGradient),
}

/// Times `f` of `module` and its gradient (see the module documentation);
/// `progress` is called about once a second with the seconds spent sampling
/// so far, for a progress indicator (never when sampling takes less than a
/// second). Timings vary from run to run; what is
/// fixed is the shape of the report.
///
/// ```
/// use irad::{BenchOptions, Source};
/// use std::time::Duration;
///
/// let src = Source::new("f.irad", "fn f(x: f64, y: f64) -> f64 { x * sin(y) }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let args = irad::parse_args(&Source::new("<args>", "1.5, 0.5"), &m, f)?;
/// let registry = irad::rules::Registry::new();
/// let opts = BenchOptions { min_time: Duration::from_millis(5), ..BenchOptions::default() };
/// let report = irad::bench(&m, f, &args, &registry, &opts, &mut |_secs| {})
///     .map_err(|e| irad::grad_error(&src, e))?;
/// assert!(report.primal_runs >= 5 && report.grad_runs >= 5);
/// assert!(report.compile_s > 0.0 && report.primal_s > 0.0 && report.grad_s > 0.0);
/// assert_eq!(report.ratio, report.grad_s / report.primal_s);
/// # Ok::<(), irad::Error>(())
/// ```
pub fn bench(
    module: &Module,
    f: FuncId,
    args: &[Val],
    registry: &Registry,
    bopts: &BenchOptions,
    progress: &mut dyn FnMut(f64),
) -> Result<BenchReport, GradError> {
    let (opts, min_time) = (&bopts.grad, bopts.min_time);
    let start = Instant::now();
    let mut unbounded_loops = Vec::new();
    let mut grad = match bopts.mode {
        Mode::Reverse => {
            // The request is checked as `irad grad` checks it.
            let mut m = module.clone();
            let mut stage = BenchReverse {
                grad: ReverseGradStage::new(Reverse::new(registry), f, args, opts),
                func: f,
                rev: None,
            };
            let mut opt = OptimiseStage::new(&bopts.schedule, Scope::From(m.len()));
            let mut stages = [Step::Stage(&mut stage), Step::Stage(&mut opt)];
            normalise_and(&mut m, &mut stages, opts.split_limit).map_err(into_grad_error)?;
            let Some(rev_id) = stage.rev else {
                return Err(GradError::Invalid {
                    loc: irad_ir::Location::default(),
                    msg: irad_ir::interp::internal_message("the reverse stage derived nothing"),
                });
            };
            let rev = stage.grad.cache;
            unbounded_loops = rev.unbounded_loops().to_vec();
            let params = m.get(f).map(|func| func.param_types()).unwrap_or_default();
            let mut call: Vec<Val> = args.to_vec();
            for (a, t) in args.iter().zip(&params) {
                shadows(a, t, &mut call);
            }
            call.push(Val::F64(1.0));
            let mut jit = Jit::owning(m, Some(Box::new(rev))).map_err(codegen)?;
            jit.compile(f).map_err(codegen)?;
            jit.compile(rev_id).map_err(codegen)?;
            Grad::Reverse {
                jit,
                rev: rev_id,
                call,
            }
        }
        Mode::Forward => {
            let req = GradRequest {
                func: f,
                args,
                mode: Mode::Forward,
                opts: opts.clone(),
                schedule: Some(bopts.schedule.clone()),
            };
            let g = jit_gradient(module, registry, &req)?;
            g.compile().map_err(codegen)?;
            Grad::Forward(g)
        }
    };
    let compile_s = start.elapsed().as_secs_f64();
    let run = &opts.run;
    let primal = |g: &mut Grad<'_>| -> Result<Duration, GradError> {
        let t = Instant::now();
        let r = match g {
            Grad::Reverse { jit, .. } => jit.run(f, args, run),
            Grad::Forward(c) => c.run_primal(args, run),
        };
        let d = t.elapsed();
        std::hint::black_box(r?);
        Ok(d)
    };
    let gradient = |g: &mut Grad<'_>| -> Result<Duration, GradError> {
        let t = Instant::now();
        match g {
            Grad::Reverse { jit, rev, call } => {
                let r = jit.run(*rev, call, run);
                let d = t.elapsed();
                std::hint::black_box(r?);
                Ok(d)
            }
            Grad::Forward(c) => {
                let r = c.run(args, run);
                let d = t.elapsed();
                std::hint::black_box(r?);
                Ok(d)
            }
        }
    };
    // Warm-up: compiles nothing more, touches the memory, reports errors.
    primal(&mut grad)?;
    gradient(&mut grad)?;
    // Each variant is sampled on its own budget: a gradient much slower than
    // its primal stops after `min_time` of its own, not after as many runs
    // as the primal needs.
    let (mut ps, mut gs) = (Samples::default(), Samples::default());
    let sampling = Instant::now();
    let mut next_report = 1.0;
    while !(ps.done(min_time) && gs.done(min_time)) {
        if !ps.done(min_time) {
            ps.push(primal(&mut grad)?);
        }
        if !gs.done(min_time) {
            gs.push(gradient(&mut grad)?);
        }
        let spent = sampling.elapsed().as_secs_f64();
        if spent >= next_report {
            progress(spent);
            next_report = spent.floor() + 1.0;
        }
    }
    let (primal_runs, grad_runs) = (ps.times.len(), gs.times.len());
    let primal_s = median(&mut ps.times);
    let grad_s = median(&mut gs.times);
    Ok(BenchReport {
        compile_s,
        primal_s,
        grad_s,
        ratio: grad_s / primal_s,
        primal_runs,
        grad_runs,
        unbounded_loops,
    })
}

/// The timed runs of one variant (primal or gradient).
#[derive(Default)]
struct Samples {
    times: Vec<Duration>,
    total: Duration,
}

impl Samples {
    fn push(&mut self, d: Duration) {
        self.times.push(d);
        self.total += d;
    }

    /// Whether this variant has run for `min_time` and [`MIN_RUNS`] times,
    /// or [`MAX_RUNS`] times.
    fn done(&self, min_time: Duration) -> bool {
        let n = self.times.len();
        (self.total >= min_time && n >= MIN_RUNS) || n >= MAX_RUNS
    }
}

fn codegen(e: irad_codegen::CodegenError) -> GradError {
    GradError::Run(RunError::new(e.loc, e.msg))
}

fn median(xs: &mut [Duration]) -> f64 {
    xs.sort_unstable();
    xs[xs.len() / 2].as_secs_f64()
}

/// A zero shadow for every `[f64]` in `val` (of type `ty`), depth-first, as
/// `@f.rev` takes them.
fn shadows(val: &Val, ty: &Type, out: &mut Vec<Val>) {
    match (val, ty) {
        (Val::Array(a), Type::Array(Scalar::F64)) => {
            let n = a.0.borrow().len();
            out.push(Val::Array(ArrayRef::new(ArrayData::F64(vec![0.0; n]))));
        }
        (Val::Tuple(vals), Type::Tuple(tys)) => {
            for (v, t) in vals.iter().zip(tys.iter()) {
                shadows(v, t, out);
            }
        }
        _ => {}
    }
}

/// `reverse` for `irad bench`: the gradient's plan (the request checked as
/// `irad grad` checks it), then `@f.rev` with respect to the plan's
/// arguments, which is what the benchmark calls.
struct BenchReverse<'r, 'a> {
    grad: ReverseGradStage<'r, 'a>,
    func: FuncId,
    /// After the run: `@f.rev` (or its `wrt` variant).
    rev: Option<FuncId>,
}

impl Stage for BenchReverse<'_, '_> {
    // The gradient stage it wraps says what the stage is.
    fn id(&self) -> PassId {
        self.grad.id()
    }

    fn needs_normalised(&self) -> bool {
        self.grad.needs_normalised()
    }

    fn required(&self) -> bool {
        self.grad.required()
    }

    fn run(
        &mut self,
        m: &mut Module,
        opts: &PipelineOptions,
    ) -> Result<Option<Vec<Snapshot>>, PassError> {
        self.grad.run(m, opts)?;
        let wrt: Vec<usize> = self
            .grad
            .plan
            .as_ref()
            .map(|plan| plan.wrt().to_vec())
            .unwrap_or_default();
        self.rev = Some(self.grad.cache.rev_wrt(m, self.func, &wrt)?);
        Ok(None)
    }
}
