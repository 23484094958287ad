//! The stages of the pass manager: forward mode, reverse mode, the gradient
//! plans of both modes, the optimiser's schedule and specialisation, each a
//! [`Stage`] value that calls the public entry point of its module
//! (`crate::forward`, `crate::reverse`, `crate::optimise`, `crate::pe`) and
//! keeps what it built for its owner to read after the pipeline.
//!
//! Assumes the manager's contract: the module verifies, and for the AD
//! stages it is normalised (the normalisation steps come first in the
//! pipeline). Guarantees: a stage changes the module only through its entry
//! point; its errors are the entry point's, wrapped in [`PassError`]; the
//! derivations and the specialisation are required (a bisect limit never
//! skips what the request asks for), the optimiser is not.

use crate::forward::grad::{ForwardPlan, GradError, GradOptions, Gradient};
use crate::forward::{Forward, ForwardError};
use crate::manager::{OptStep, PassError, PassId, PipelineOptions, Snapshot, Stage};
use crate::optimise::{self, OptError, OptOptions, Strategy};
use crate::pe::{self, Known, PeError};
use crate::reverse::grad::ReversePlan;
use crate::reverse::{Reverse, ReverseError};
use irad_ir::interp::value::Val;
use irad_ir::interp::{Executor, RuleProvider, RunOptions};
use irad_ir::{FuncId, Lanes, Module};

impl From<ForwardError> for PassError {
    fn from(err: ForwardError) -> PassError {
        PassError::Forward(Box::new(err))
    }
}

impl From<ReverseError> for PassError {
    fn from(err: ReverseError) -> PassError {
        PassError::Reverse(Box::new(err))
    }
}

impl From<GradError> for PassError {
    fn from(err: GradError) -> PassError {
        PassError::Grad(Box::new(err))
    }
}

impl From<OptError> for PassError {
    fn from(err: OptError) -> PassError {
        PassError::Optimise(Box::new(err))
    }
}

impl From<PeError> for PassError {
    fn from(err: PeError) -> PassError {
        PassError::Pe(Box::new(err))
    }
}

/// `roots`, or every function of `m` when it is empty.
fn roots_or_all(m: &Module, roots: &[FuncId]) -> Vec<FuncId> {
    if roots.is_empty() {
        m.func_ids().collect()
    } else {
        roots.to_vec()
    }
}

/// `forward`: the forward rules with `width` lanes of some functions (and of
/// everything they call), as `irad dump --mode fwd` shows them.
pub struct ForwardStage<'r> {
    /// The rule cache, kept for whoever runs the rules afterwards.
    pub fwd: Forward<'r>,
    roots: Vec<FuncId>,
    width: Lanes,
    /// After the run: the functions added, in order.
    pub added: Vec<FuncId>,
}

impl<'r> ForwardStage<'r> {
    /// The rules with `width` lanes of `roots` (every function when empty).
    pub fn new(fwd: Forward<'r>, roots: Vec<FuncId>, width: Lanes) -> ForwardStage<'r> {
        ForwardStage {
            fwd,
            roots,
            width,
            added: Vec::new(),
        }
    }
}

impl Stage for ForwardStage<'_> {
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
        let before = m.len();
        for f in roots_or_all(m, &self.roots) {
            self.fwd.rule(m, f, self.width)?;
        }
        self.added = m.func_ids().skip(before).collect();
        Ok(None)
    }
}

/// `reverse`: `@f.rev` and the pieces it calls for some functions, and
/// optionally the BBCode of each (what `irad dump --mode rev` prints).
pub struct ReverseStage<'r> {
    /// The rule cache, kept for whoever derives or runs more pieces.
    pub rev: Reverse<'r>,
    roots: Vec<FuncId>,
    wrt: Option<Vec<usize>>,
    with_bbcode: bool,
    /// After the run: the functions added, in order.
    pub added: Vec<FuncId>,
    /// After the run: `@f.rev` (or its `wrt` variant) of each root, in order.
    pub revs: Vec<FuncId>,
    /// After the run, when asked for: the BBCode of each root, in order,
    /// separated by empty lines.
    pub bbcode: String,
}

impl<'r> ReverseStage<'r> {
    /// `@f.rev` of each of `roots` (every function when empty), with respect
    /// to the parameters `wrt` (all when `None`: [`Reverse::rev`]).
    pub fn new(rev: Reverse<'r>, roots: Vec<FuncId>, wrt: Option<Vec<usize>>) -> ReverseStage<'r> {
        ReverseStage {
            rev,
            roots,
            wrt,
            with_bbcode: false,
            added: Vec::new(),
            revs: Vec::new(),
            bbcode: String::new(),
        }
    }

    /// Also print the BBCode of each root, before deriving.
    pub fn with_bbcode(mut self) -> ReverseStage<'r> {
        self.with_bbcode = true;
        self
    }
}

impl Stage for ReverseStage<'_> {
    fn id(&self) -> PassId {
        PassId::Reverse
    }

    fn needs_normalised(&self) -> bool {
        true
    }

    fn required(&self) -> bool {
        true
    }

    fn run(
        &mut self,
        m: &mut Module,
        _: &PipelineOptions,
    ) -> Result<Option<Vec<Snapshot>>, PassError> {
        let before = m.len();
        let roots = roots_or_all(m, &self.roots);
        if self.with_bbcode {
            self.bbcode = crate::annotate::bbcode_text(m, &roots)?;
        }
        for f in roots {
            let id = match &self.wrt {
                Some(wrt) => self.rev.rev_wrt(m, f, wrt)?,
                None => self.rev.rev(m, f)?,
            };
            self.revs.push(id);
        }
        self.added = m.func_ids().skip(before).collect();
        Ok(None)
    }
}

/// An AD mode as a gradient stage uses it: the rule cache that derives (and,
/// as the run-time rule provider, later serves) its rules, and the plan of
/// one gradient it makes.
pub trait GradMode: RuleProvider {
    /// What the stage leaves: the checked request and the derived functions.
    type Plan;
    /// The pass the stage is (`forward` or `reverse`).
    const PASS: PassId;
    /// Whether the mode needs a normalised input ([`Stage::needs_normalised`]).
    const NEEDS_NORMALISED: bool;
    /// The plan of the gradient of `func` at `args` as `opts` asks for it,
    /// its functions derived into `m`.
    fn plan(
        &mut self,
        m: &mut Module,
        func: FuncId,
        args: &[Val],
        opts: &GradOptions,
    ) -> Result<Self::Plan, GradError>;
    /// Runs `plan` on `exec`: the value and the gradient.
    fn run_plan(
        plan: &Self::Plan,
        exec: &mut dyn Executor,
        args: &[Val],
        run: &RunOptions,
    ) -> Result<Gradient, GradError>;
}

impl GradMode for Forward<'_> {
    type Plan = ForwardPlan;
    const PASS: PassId = PassId::Forward;
    const NEEDS_NORMALISED: bool = false;

    fn plan(
        &mut self,
        m: &mut Module,
        func: FuncId,
        args: &[Val],
        opts: &GradOptions,
    ) -> Result<ForwardPlan, GradError> {
        crate::forward::grad::plan(m, self, func, args, opts)
    }

    fn run_plan(
        plan: &ForwardPlan,
        exec: &mut dyn Executor,
        args: &[Val],
        run: &RunOptions,
    ) -> Result<Gradient, GradError> {
        plan.run(exec, args, run)
    }
}

impl GradMode for Reverse<'_> {
    type Plan = ReversePlan;
    const PASS: PassId = PassId::Reverse;
    const NEEDS_NORMALISED: bool = true;

    fn plan(
        &mut self,
        m: &mut Module,
        func: FuncId,
        args: &[Val],
        opts: &GradOptions,
    ) -> Result<ReversePlan, GradError> {
        crate::reverse::grad::plan(m, self, func, args, opts)
    }

    fn run_plan(
        plan: &ReversePlan,
        exec: &mut dyn Executor,
        args: &[Val],
        run: &RunOptions,
    ) -> Result<Gradient, GradError> {
        plan.run(exec, args, run)
    }
}

/// `forward` or `reverse` for a gradient: the checked request and the
/// derived functions of one function ([`crate::forward::grad::plan`],
/// [`crate::reverse::grad::plan`]).
pub struct GradStage<'a, C: GradMode> {
    /// The rule cache, which the executor of the plan needs.
    pub cache: C,
    func: FuncId,
    args: &'a [Val],
    opts: &'a GradOptions,
    /// After the run: the plan.
    pub plan: Option<C::Plan>,
}

/// The forward-mode gradient stage.
pub type ForwardGradStage<'r, 'a> = GradStage<'a, Forward<'r>>;

/// The reverse-mode gradient stage.
pub type ReverseGradStage<'r, 'a> = GradStage<'a, Reverse<'r>>;

impl<'a, C: GradMode> GradStage<'a, C> {
    /// The gradient of `func` at `args` as `opts` asks for it, with the
    /// rules of `cache`.
    pub fn new(cache: C, func: FuncId, args: &'a [Val], opts: &'a GradOptions) -> Self {
        GradStage {
            cache,
            func,
            args,
            opts,
            plan: None,
        }
    }
}

impl<C: GradMode> Stage for GradStage<'_, C> {
    fn id(&self) -> PassId {
        C::PASS
    }

    fn needs_normalised(&self) -> bool {
        C::NEEDS_NORMALISED
    }

    fn required(&self) -> bool {
        true
    }

    fn run(
        &mut self,
        m: &mut Module,
        _: &PipelineOptions,
    ) -> Result<Option<Vec<Snapshot>>, PassError> {
        let plan = self.cache.plan(m, self.func, self.args, self.opts)?;
        self.plan = Some(plan);
        Ok(None)
    }
}

/// The functions an [`OptimiseStage`] rewrites.
#[derive(Clone, Debug)]
pub enum Scope {
    /// Every function.
    All,
    /// The functions from this position of the module on: those a
    /// derivation earlier in the pipeline added to a module of that many.
    From(usize),
}

/// `optimise`: an optimiser schedule over some functions. Each top-level step
/// of the schedule is a numbered pass of its own, which a bisect limit may
/// skip (logged `optimise: STEP`). With recording on, its snapshots are one
/// per top-level step that ran, each naming the step and its rewrites.
pub struct OptimiseStage<'s> {
    schedule: &'s Strategy,
    scope: Scope,
    /// After the run: whether the schedule succeeded (see
    /// [`optimise::OptReport::ok`]); true when it was skipped.
    pub ok: bool,
    /// After the run: the rewrites made, by rule name.
    pub rewrites: Vec<(&'static str, usize)>,
}

impl<'s> OptimiseStage<'s> {
    /// `schedule` over `scope`.
    pub fn new(schedule: &'s Strategy, scope: Scope) -> OptimiseStage<'s> {
        OptimiseStage {
            schedule,
            scope,
            ok: true,
            rewrites: Vec::new(),
        }
    }
}

impl Stage for OptimiseStage<'_> {
    fn id(&self) -> PassId {
        PassId::Optimise
    }

    fn run(
        &mut self,
        m: &mut Module,
        opts: &PipelineOptions,
    ) -> Result<Option<Vec<Snapshot>>, PassError> {
        self.run_steps(m, opts, &mut |_| true)
    }

    fn numbers_steps(&self) -> bool {
        true
    }

    fn run_steps(
        &mut self,
        m: &mut Module,
        opts: &PipelineOptions,
        admit: &mut dyn FnMut(&str) -> bool,
    ) -> Result<Option<Vec<Snapshot>>, PassError> {
        // `id` changes nothing; unrecorded, it is not worth a verification
        // (nor a number: no step is offered, so the manager verifies nothing).
        if *self.schedule == Strategy::Id && !opts.record {
            return Ok(Some(Vec::new()));
        }
        let scope: Option<Vec<FuncId>> = match self.scope {
            Scope::All => None,
            Scope::From(n) => Some(m.func_ids().skip(n).collect()),
        };
        let opt = OptOptions {
            record: opts.record,
            verify: opts.verify,
            ..OptOptions::default()
        };
        let report =
            optimise::optimise_gated(m, self.schedule, scope.as_deref(), &opt, &mut |step| {
                admit(&step.to_string())
            })?;
        self.ok = report.ok;
        self.rewrites = report.rewrites;
        let snapshots = report
            .snapshots
            .into_iter()
            .map(|s| Snapshot {
                pass: PassId::Optimise,
                step: Some(OptStep {
                    step: s.step,
                    rewrites: s.rewrites,
                }),
                module: s.module,
            })
            .collect();
        Ok(Some(snapshots))
    }
}

/// `specialise`: a function specialised on known arguments
/// ([`crate::pe::specialise`]), added as `@NAME.spec`.
pub struct SpecialiseStage<'k> {
    func: FuncId,
    known: &'k [Known],
    /// After the run: the specialised function.
    pub spec: Option<FuncId>,
}

impl<'k> SpecialiseStage<'k> {
    /// `func` specialised on `known`.
    pub fn new(func: FuncId, known: &'k [Known]) -> SpecialiseStage<'k> {
        SpecialiseStage {
            func,
            known,
            spec: None,
        }
    }
}

impl Stage for SpecialiseStage<'_> {
    fn id(&self) -> PassId {
        PassId::Specialise
    }

    fn required(&self) -> bool {
        true
    }

    fn run(
        &mut self,
        m: &mut Module,
        _: &PipelineOptions,
    ) -> Result<Option<Vec<Snapshot>>, PassError> {
        self.spec = Some(pe::specialise(m, self.func, self.known)?);
        Ok(None)
    }
}
