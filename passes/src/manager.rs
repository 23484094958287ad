//! The pass manager: every stage of irad is a named pass ([`PassId`]) run by
//! one manager: the normalisation passes and their group `simplify`, forward
//! and reverse mode, the optimiser's schedule, and the partial-evaluation
//! transforms. The manager runs a pipeline of [`Step`]s over a module, runs
//! the verifier after each pass, records a copy of the module after each pass
//! for `irad dump --after/--all-passes`, and numbers every pass it runs so a
//! bisect limit (like LLVM's `-opt-bisect-limit`) can skip every pass after
//! the Nth and find the pass that breaks a program. A stage made of steps
//! can have each step numbered as a pass of its own ([`Stage::numbers_steps`]):
//! the optimiser's, one per top-level step of its schedule, so the limit
//! finds the rewrite step that breaks a program.
//!
//! A registered pass ([`Pass`], in [`passes()`]) is a transform of one
//! function, a transform of the whole module, a group (other registered
//! passes run in rounds until a round changes no function: a fixpoint; the
//! normalisation pipeline has one group, `simplify`), or a stage that takes
//! parameters and gives results of its own (forward and reverse mode, the
//! optimiser, specialisation): such a pass runs as a [`Stage`] value
//! (`crate::stages` wraps the entry points of those modules).
//!
//! Assumes the module given to [`run_pipeline`] verifies (it is checked first
//! when verification is on). Guarantees: steps run in the order given, each
//! function pass over every function in module order (a group runs its passes
//! in its order, round after round); with verification on (the default in
//! debug builds and therefore in tests), a module that fails to verify after a
//! pass stops the pipeline with [`PassError::Verify`] naming that pass. A
//! group's rounds are capped, so a group whose passes undo each other cannot
//! loop for ever (debug builds fail an assertion at the cap). With a bisect
//! limit N, the passes numbered 1 to N run and later ones are skipped, except
//! required stages (a derivation the request asks for), which always run.

use crate::forward::ForwardError;
use crate::forward::grad::GradError;
use crate::normalise as passes_fn;
use crate::optimise::OptError;
use crate::pe::{self, PeError};
use crate::reverse::ReverseError;
use irad_ir::interp::ErrorKind;
use irad_ir::verify::{VerifyError, verify_module};
use irad_ir::{Func, Module};
use std::fmt;

/// The name of every pass the manager runs: what `irad dump --after`, the
/// filetests (`# test: pass NAME`, `# test: pe NAME`) and the bisect log
/// print. Text names are parsed once, where they are read ([`PassId::from_name`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum PassId {
    /// `uniform_constant_operands`.
    UniformConstantOperands,
    /// `fold_constant_branches`.
    FoldConstantBranches,
    /// `remove_unreachable_blocks`.
    RemoveUnreachableBlocks,
    /// `remove_trivial_phis`.
    RemoveTrivialPhis,
    /// `simplify`, the group of [`SIMPLIFY`].
    Simplify,
    /// `split_critical_edges`.
    SplitCriticalEdges,
    /// `single_return`.
    SingleReturn,
    /// `forward`: forward-mode rules (a stage).
    Forward,
    /// `reverse`: reverse-mode pieces (a stage).
    Reverse,
    /// `optimise`: an optimiser schedule over some functions (a stage).
    Optimise,
    /// `specialise`: a function specialised on known arguments (a stage).
    Specialise,
    /// `inline`: partial evaluation's inliner.
    Inline,
    /// `unroll`: partial evaluation's loop unroller.
    Unroll,
    /// `devirtualise`: calls of known function values made direct.
    Devirtualise,
}

impl PassId {
    /// Every pass, in the order of [`passes()`].
    pub const ALL: [PassId; 14] = [
        PassId::UniformConstantOperands,
        PassId::FoldConstantBranches,
        PassId::RemoveUnreachableBlocks,
        PassId::RemoveTrivialPhis,
        PassId::Simplify,
        PassId::SplitCriticalEdges,
        PassId::SingleReturn,
        PassId::Forward,
        PassId::Reverse,
        PassId::Optimise,
        PassId::Specialise,
        PassId::Inline,
        PassId::Unroll,
        PassId::Devirtualise,
    ];

    /// The name users write and the manager prints.
    pub fn name(self) -> &'static str {
        match self {
            PassId::UniformConstantOperands => "uniform_constant_operands",
            PassId::FoldConstantBranches => "fold_constant_branches",
            PassId::RemoveUnreachableBlocks => "remove_unreachable_blocks",
            PassId::RemoveTrivialPhis => "remove_trivial_phis",
            PassId::Simplify => "simplify",
            PassId::SplitCriticalEdges => "split_critical_edges",
            PassId::SingleReturn => "single_return",
            PassId::Forward => "forward",
            PassId::Reverse => "reverse",
            PassId::Optimise => "optimise",
            PassId::Specialise => "specialise",
            PassId::Inline => "inline",
            PassId::Unroll => "unroll",
            PassId::Devirtualise => "devirtualise",
        }
    }

    /// The pass called `name`, if any.
    pub fn from_name(name: &str) -> Option<PassId> {
        PassId::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The pass of the normalisation pipeline called `name` (one of
    /// [`NORMALISE`]); the error lists those names.
    pub fn parse_normalise(name: &str) -> Result<PassId, PassError> {
        PassId::from_name(name)
            .filter(|p| NORMALISE.contains(p))
            .ok_or_else(|| PassError::UnknownPass {
                name: name.to_string(),
                known: NORMALISE.iter().map(|p| p.name()).collect(),
            })
    }
}

impl fmt::Display for PassId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A registered pass.
#[derive(Debug)]
pub struct Pass {
    /// Its name.
    pub id: PassId,
    /// What running the pass does.
    pub run: Run,
    /// One line on what the pass guarantees.
    pub doc: &'static str,
}

/// What running a registered pass does.
#[derive(Copy, Clone, Debug)]
pub enum Run {
    /// A transform of one function, in place; it returns whether it changed
    /// the function.
    Func(fn(&mut Func) -> bool),
    /// A group: these registered passes (each a [`Run::Func`]), in order, each
    /// over every function, repeated until a round changes no function. Every
    /// round that changes a function must bring it closer to a state no pass
    /// of the group changes, or the group stops at its round cap.
    Fixpoint(&'static [PassId]),
    /// A transform of the whole module, in place; it returns whether it
    /// changed the module.
    Module(fn(&mut Module) -> bool),
    /// A pass with parameters and results: it runs only as a [`Step::Stage`].
    Stage,
}

/// A pass with parameters (the functions to derive, a schedule, known
/// arguments) and results (the functions it added): forward and reverse
/// mode, the optimiser, specialisation. The caller keeps the value, runs it
/// in a pipeline as [`Step::Stage`], and reads its results afterwards.
pub trait Stage {
    /// The pass this stage is.
    fn id(&self) -> PassId;

    /// Whether the stage runs whatever the bisect limit: true for what the
    /// request itself asks for (a derivation, a specialisation), false for
    /// an optimisation.
    fn required(&self) -> bool {
        false
    }

    /// Runs the stage over `m`. With `opts.record`, it may return snapshots
    /// of its own steps (the optimiser: one per top-level step); `None` has
    /// the manager record the module after it.
    fn run(
        &mut self,
        m: &mut Module,
        opts: &PipelineOptions,
    ) -> Result<Option<Vec<Snapshot>>, PassError>;

    /// Whether the stage needs a normalised input (reverse mode: one return
    /// block, no critical edges). Then the normalisation passes of its
    /// pipeline are required too: a bisect limit cannot skip them and leave
    /// the stage an input it rejects. False by default.
    fn needs_normalised(&self) -> bool {
        false
    }

    /// Whether the bisect limit numbers the stage's steps, each as a pass of
    /// its own, rather than the stage as one pass: then the manager runs it
    /// by [`Stage::run_steps`]. False by default; true for the optimiser.
    /// Such a stage is never required.
    fn numbers_steps(&self) -> bool {
        false
    }

    /// Runs the stage as [`Stage::run`] does, but asks `admit` before each
    /// of its steps, passing the step's name: the manager numbers the step,
    /// logs it, and answers whether it runs under the bisect limit; a step
    /// refused must change nothing. Called only when
    /// [`Stage::numbers_steps`]; the default runs the whole stage unasked.
    fn run_steps(
        &mut self,
        m: &mut Module,
        opts: &PipelineOptions,
        admit: &mut dyn FnMut(&str) -> bool,
    ) -> Result<Option<Vec<Snapshot>>, PassError> {
        let _ = admit;
        self.run(m, opts)
    }
}

/// One step of a pipeline.
pub enum Step<'s> {
    /// A registered pass without parameters (a function pass, a group or a
    /// module pass).
    Pass(PassId),
    /// A stage, whose results its owner reads after the pipeline.
    Stage(&'s mut dyn Stage),
}

impl fmt::Debug for Step<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Pass(id) => write!(f, "Pass({id})"),
            Step::Stage(stage) => write!(f, "Stage({})", stage.id()),
        }
    }
}

/// The one error type of the passes crate.
#[derive(Debug, thiserror::Error)]
pub enum PassError {
    /// The module handed to the pipeline does not verify.
    #[error("the input does not verify ({} error(s)); passes need verified IR", errors.len())]
    Input {
        /// The verifier's errors.
        errors: Vec<VerifyError>,
    },
    /// A pass left a module that does not verify: a bug in that pass.
    #[error("pass `{pass}` produced IR that does not verify ({} error(s))", errors.len())]
    Verify {
        /// The pass that ran last.
        pass: PassId,
        /// The verifier's errors.
        errors: Vec<VerifyError>,
    },
    /// No pass has this name.
    #[error("no pass named `{name}` (passes: {})", known.join(", "))]
    UnknownPass {
        /// The name asked for.
        name: String,
        /// Every name that was expected.
        known: Vec<&'static str>,
    },
    /// The request does not fit the program (a `--wrt` position past a
    /// function's parameters).
    #[error("{message}")]
    Request {
        /// What is wrong.
        message: String,
    },
    /// A pass that takes parameters was named as a plain [`Step::Pass`].
    #[error("pass `{pass}` takes parameters: run it as a stage")]
    NeedsParameters {
        /// The pass.
        pass: PassId,
    },
    /// Forward mode could not derive a rule.
    #[error(transparent)]
    Forward(Box<ForwardError>),
    /// Reverse mode could not derive the pieces of a function.
    #[error(transparent)]
    Reverse(Box<ReverseError>),
    /// A gradient request does not fit its function, or its derivation failed.
    #[error(transparent)]
    Grad(Box<GradError>),
    /// The optimiser's schedule failed to run.
    #[error(transparent)]
    Optimise(Box<OptError>),
    /// A specialisation could not be made.
    #[error(transparent)]
    Pe(Box<PeError>),
}

impl PassError {
    /// Whose fault it is: [`ErrorKind::Internal`] for a pass that left IR
    /// that does not verify or a stage named as a plain pass (bugs of irad),
    /// the wrapped error's own kind for a derivation or specialisation, and
    /// [`ErrorKind::User`] for the rest (input, names, requests, a schedule
    /// out of fuel).
    pub fn kind(&self) -> ErrorKind {
        match self {
            PassError::Verify { .. } | PassError::NeedsParameters { .. } => ErrorKind::Internal,
            PassError::Forward(e) => e.kind,
            PassError::Reverse(e) => e.kind,
            PassError::Grad(e) => e.kind(),
            PassError::Pe(e) => e.kind(),
            PassError::Input { .. }
            | PassError::UnknownPass { .. }
            | PassError::Request { .. }
            | PassError::Optimise(_) => ErrorKind::User,
        }
    }
}

/// How [`run_pipeline`] runs.
#[derive(Clone, Debug)]
pub struct PipelineOptions {
    /// Verify the input and the module after every pass.
    pub verify: bool,
    /// Record a copy of the module after every pass: after each pass of a
    /// group in its first round and in every later round that changed the
    /// module (a round that changed nothing would repeat the one before).
    pub record: bool,
    /// Run only the passes numbered 1 to N (every pass run counts, each pass
    /// of a group in each round, each top-level step of an optimiser
    /// schedule; required stages run whatever the limit); `None`: run every
    /// pass. `irad dump --bisect-limit N`.
    pub bisect_limit: Option<usize>,
    /// Called for every numbered pass, run or skipped, as it comes (the
    /// bisect log `irad dump --bisect-limit` prints).
    pub on_pass: Option<fn(&PassRun)>,
}

impl Default for PipelineOptions {
    /// Verification on in debug builds (and so in tests), recording off, no
    /// bisect limit.
    fn default() -> PipelineOptions {
        PipelineOptions {
            verify: cfg!(debug_assertions),
            record: false,
            bisect_limit: None,
            on_pass: None,
        }
    }
}

/// One numbered pass of a pipeline run, for bisecting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassRun {
    /// Its number, from 1, in the order the passes came.
    pub number: usize,
    /// The pass.
    pub pass: PassId,
    /// For a stage that numbers its steps ([`Stage::numbers_steps`]), the
    /// step: for the optimiser, the top-level step of its schedule, printed.
    pub step: Option<String>,
    /// Whether it ran (false: skipped by the bisect limit).
    pub ran: bool,
    /// Whether it is a required stage (run whatever the limit).
    pub required: bool,
}

impl fmt::Display for PassRun {
    /// `BISECT: running pass (N) NAME`, `BISECT: NOT running pass (N) NAME`,
    /// with ` (required)` after a required stage, as LLVM prints them. NAME
    /// is the pass, or for a step of a stage `PASS: STEP` (`optimise:
    /// try(cse)`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let not = if self.ran { "" } else { "NOT " };
        write!(
            f,
            "BISECT: {not}running pass ({}) {}",
            self.number, self.pass
        )?;
        if let Some(step) = &self.step {
            write!(f, ": {step}")?;
        }
        if self.required {
            f.write_str(" (required)")?;
        }
        Ok(())
    }
}

/// The module as it was after one pass.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// The pass that had just run.
    pub pass: PassId,
    /// For the optimiser, the top-level step of its schedule that had just
    /// run, and the rewrites it made; `None` for other passes.
    pub step: Option<OptStep>,
    /// The module after it.
    pub module: Module,
}

/// A top-level step of an optimiser schedule, as a [`Snapshot`] names it.
#[derive(Clone, Debug)]
pub struct OptStep {
    /// The step, printed.
    pub step: String,
    /// The rewrites it made, by rule name.
    pub rewrites: Vec<(&'static str, usize)>,
}

/// What [`run_pipeline`] did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// With [`PipelineOptions::record`], the module after each pass.
    pub snapshots: Vec<Snapshot>,
    /// Every numbered pass, run or skipped.
    pub runs: Vec<PassRun>,
}

/// The passes of the group `simplify`, the first step of the normalisation
/// pipeline, in the order each round runs them. They are one group because
/// each can undo another's guarantee: removing a trivial phi can substitute a
/// constant into a `gotoifnot` (which then folds, making blocks unreachable,
/// whose removal drops phi entries and leaves more phis trivial) or into the
/// first operand of an `add` (which `uniform_constant_operands` then moves
/// second). The other passes cannot undo these guarantees: splitting edges and
/// merging returns add no statement but a non-trivial phi, no branch and no
/// unreachable block.
///
/// The group terminates: `fold_constant_branches`, `remove_unreachable_blocks`
/// and `remove_trivial_phis`, whenever they change a function, remove a
/// `gotoifnot`, a block or a statement from its layout and add none; after the
/// first round, `uniform_constant_operands` changes a function only where
/// `remove_trivial_phis` substituted a constant the round before.
pub const SIMPLIFY: &[PassId] = &[
    PassId::UniformConstantOperands,
    PassId::FoldConstantBranches,
    PassId::RemoveUnreachableBlocks,
    PassId::RemoveTrivialPhis,
];

/// Every pass of the normalisation pipeline, which [`normalise_until`] and
/// `irad dump --after` accept, in pipeline order, each placed where its
/// output is: the passes of [`SIMPLIFY`] (the pipeline up to such a pass
/// stops after its first run, in the group's first round), then the group
/// `simplify` (its fixpoint), then the passes that run once after it.
pub const NORMALISE: &[PassId] = &[
    PassId::UniformConstantOperands,
    PassId::FoldConstantBranches,
    PassId::RemoveUnreachableBlocks,
    PassId::RemoveTrivialPhis,
    PassId::Simplify,
    PassId::SplitCriticalEdges,
    PassId::SingleReturn,
];

/// What [`normalise()`] runs, in order. `simplify` comes first: it folds
/// constant branches and drops the blocks this makes unreachable (and their
/// phi entries) before any edge is split. `single_return` comes last because
/// the block it appends must stay last and it creates no critical edge (its
/// new block's predecessors each end in `goto`).
const PIPELINE: &[PassId] = &[
    PassId::Simplify,
    PassId::SplitCriticalEdges,
    PassId::SingleReturn,
];

/// The registry, in the order of [`PassId::ALL`] (a unit test checks it).
static PASSES: &[Pass] = &[
    Pass {
        id: PassId::UniformConstantOperands,
        run: Run::Func(passes_fn::uniform_constant_operands),
        doc: "a constant operand of an exchangeable binary primitive comes second",
    },
    Pass {
        id: PassId::FoldConstantBranches,
        run: Run::Func(passes_fn::fold_constant_branches),
        doc: "`gotoifnot true/false` becomes a `goto` of the taken successor",
    },
    Pass {
        id: PassId::RemoveUnreachableBlocks,
        run: Run::Func(passes_fn::remove_unreachable_blocks),
        doc: "every block of the layout is reachable from the entry",
    },
    Pass {
        id: PassId::RemoveTrivialPhis,
        run: Run::Func(passes_fn::remove_trivial_phis),
        doc: "no phi whose entries are all one operand (or the phi itself)",
    },
    Pass {
        id: PassId::Simplify,
        run: Run::Fixpoint(SIMPLIFY),
        doc: "the passes of SIMPLIFY, repeated until none changes anything",
    },
    Pass {
        id: PassId::SplitCriticalEdges,
        run: Run::Func(passes_fn::split_critical_edges),
        doc: "no edge joins a block with several successors to one with several predecessors",
    },
    Pass {
        id: PassId::SingleReturn,
        run: Run::Func(passes_fn::single_return),
        doc: "at most one `return`, in the last block of the layout",
    },
    Pass {
        id: PassId::Forward,
        run: Run::Stage,
        doc: "the forward rules (`@f.fwd`) of some functions and of what they call",
    },
    Pass {
        id: PassId::Reverse,
        run: Run::Stage,
        doc: "`@f.rev` and its pieces (forward sweep, pullback) for some functions",
    },
    Pass {
        id: PassId::Optimise,
        run: Run::Stage,
        doc: "an optimiser schedule over some functions (docs/optimise.md)",
    },
    Pass {
        id: PassId::Specialise,
        run: Run::Stage,
        doc: "`@f.spec`: a function specialised on known arguments (docs/pe.md)",
    },
    Pass {
        id: PassId::Inline,
        run: Run::Module(pe::inline),
        doc: "small direct calls replaced by the callee's body",
    },
    Pass {
        id: PassId::Unroll,
        run: Run::Module(pe::unroll),
        doc: "counted loops of known trip count unrolled",
    },
    Pass {
        id: PassId::Devirtualise,
        run: Run::Module(pe::devirtualise),
        doc: "calls of a known function value made direct",
    },
];

/// Every registered pass, each once, in the order of [`PassId::ALL`].
pub fn passes() -> &'static [Pass] {
    PASSES
}

/// The registered pass `id`.
pub fn find(id: PassId) -> &'static Pass {
    // The registry lists every pass in the order of `PassId::ALL`; a unit
    // test checks it.
    &PASSES[id as usize]
}

/// The steps of the normalisation pipeline, in order: the group `simplify`,
/// then the passes that run once after it.
pub fn normalise_pipeline() -> Vec<PassId> {
    PIPELINE.to_vec()
}

/// `passes` as pipeline steps.
pub fn steps<'s>(passes: &[PassId]) -> Vec<Step<'s>> {
    passes.iter().map(|&id| Step::Pass(id)).collect()
}

/// Runs `pipeline` over `m`: each step in order, then (when `opts.verify`)
/// the verifier; a group runs its passes so, round after round, until a
/// round changes no function. Passes past [`PipelineOptions::bisect_limit`]
/// are skipped (required stages excepted). Returns the module after each pass
/// when `opts.record` (see [`PipelineOptions::record`]), and every numbered
/// pass, run or skipped.
pub fn run_pipeline(
    m: &mut Module,
    pipeline: &mut [Step<'_>],
    opts: &PipelineOptions,
) -> Result<Report, PassError> {
    if opts.verify {
        verify_module(m).map_err(|errors| PassError::Input { errors })?;
    }
    let normalise_required = pipeline
        .iter()
        .any(|step| matches!(step, Step::Stage(stage) if stage.needs_normalised()));
    let mut ctx = Ctx {
        opts,
        report: Report::default(),
        normalise_required,
    };
    for step in pipeline {
        ctx.step(m, step)?;
    }
    Ok(ctx.report)
}

/// Runs the registered passes `passes` (no stages) over `m`, as
/// [`run_pipeline`] does.
pub fn run_passes(
    m: &mut Module,
    passes: &[PassId],
    opts: &PipelineOptions,
) -> Result<Report, PassError> {
    run_pipeline(m, &mut steps(passes), opts)
}

/// Runs the normalisation pipeline over `m` with the default options.
pub fn normalise(m: &mut Module) -> Result<(), PassError> {
    run_passes(m, PIPELINE, &PipelineOptions::default()).map(|_| ())
}

/// The normalisation pipeline until the pass `name` has run, for
/// `irad dump --after`: for a step of the pipeline (`simplify` included), the
/// pipeline up to and including it; for a pass of `simplify`, the group's
/// first round up to and including that pass, each pass run once (so the
/// module is the one `--all-passes` shows first under that name). `name`
/// must be one of [`NORMALISE`].
pub fn normalise_until(name: PassId) -> Result<Vec<PassId>, PassError> {
    let mut pipeline = Vec::new();
    for &step in PIPELINE {
        if step == name {
            pipeline.push(step);
            return Ok(pipeline);
        }
        if let Run::Fixpoint(group) = find(step).run
            && let Some(end) = group.iter().position(|&n| n == name)
        {
            pipeline.extend_from_slice(&group[..=end]);
            return Ok(pipeline);
        }
        pipeline.push(step);
    }
    Err(PassError::UnknownPass {
        name: name.to_string(),
        known: NORMALISE.iter().map(|p| p.name()).collect(),
    })
}

/// The state of one [`run_pipeline`] call.
struct Ctx<'o> {
    opts: &'o PipelineOptions,
    report: Report,
    /// A stage of the pipeline needs a normalised input, so the
    /// normalisation passes run whatever the bisect limit.
    normalise_required: bool,
}

impl Ctx<'_> {
    /// Runs one step of the pipeline.
    fn step(&mut self, m: &mut Module, step: &mut Step<'_>) -> Result<(), PassError> {
        match step {
            Step::Pass(id) => self.pass(m, *id),
            Step::Stage(stage) => {
                let id = stage.id();
                let opts = self.opts;
                let own = if stage.numbers_steps() {
                    let mut ran = false;
                    let own = stage.run_steps(m, opts, &mut |step| {
                        let admitted = self.admit(id, Some(step), false);
                        ran |= admitted;
                        admitted
                    })?;
                    if !ran {
                        // Every step was skipped: the module is unchanged.
                        return Ok(());
                    }
                    own
                } else {
                    if !self.admit(id, None, stage.required()) {
                        return Ok(());
                    }
                    stage.run(m, opts)?
                };
                self.verify(m, id)?;
                match own {
                    Some(snapshots) if self.opts.record => self.report.snapshots.extend(snapshots),
                    Some(_) => {}
                    None => self.record(m, id),
                }
                Ok(())
            }
        }
    }

    /// Runs the registered pass `id`.
    fn pass(&mut self, m: &mut Module, id: PassId) -> Result<(), PassError> {
        match find(id).run {
            Run::Func(run) => {
                if self.admit(id, None, self.required_pass(id)) {
                    self.run_func(m, id, run)?;
                    self.record(m, id);
                }
                Ok(())
            }
            Run::Module(run) => {
                if self.admit(id, None, self.required_pass(id)) {
                    run(m);
                    self.verify(m, id)?;
                    self.record(m, id);
                }
                Ok(())
            }
            Run::Fixpoint(group) => self.run_fixpoint(m, id, group),
            Run::Stage => Err(PassError::NeedsParameters { pass: id }),
        }
    }

    /// Whether registered pass `id` runs whatever the bisect limit: a
    /// normalisation pass when a stage of the pipeline needs its guarantee.
    fn required_pass(&self, id: PassId) -> bool {
        self.normalise_required && NORMALISE.contains(&id)
    }

    /// Numbers the next pass (`step` of stage `pass`, for a stage that
    /// numbers its steps) and tells whether it runs under the bisect limit;
    /// logs it.
    fn admit(&mut self, pass: PassId, step: Option<&str>, required: bool) -> bool {
        let number = self.report.runs.len() + 1;
        let ran = required || self.opts.bisect_limit.is_none_or(|n| number <= n);
        let run = PassRun {
            number,
            pass,
            step: step.map(str::to_string),
            ran,
            required,
        };
        if let Some(log) = self.opts.on_pass {
            log(&run);
        }
        self.report.runs.push(run);
        ran
    }

    /// Runs `run` over every function of `m`, then the verifier; returns
    /// whether it changed any function.
    fn run_func(
        &self,
        m: &mut Module,
        id: PassId,
        run: fn(&mut Func) -> bool,
    ) -> Result<bool, PassError> {
        let mut changed = false;
        for f in m.func_ids() {
            changed |= run(&mut m[f]);
        }
        self.verify(m, id)?;
        Ok(changed)
    }

    fn verify(&self, m: &Module, pass: PassId) -> Result<(), PassError> {
        if self.opts.verify {
            verify_module(m).map_err(|errors| PassError::Verify { pass, errors })?;
        }
        Ok(())
    }

    /// Runs the passes of `group` in rounds until a round changes no
    /// function, or until the round cap.
    fn run_fixpoint(
        &mut self,
        m: &mut Module,
        name: PassId,
        group: &[PassId],
    ) -> Result<(), PassError> {
        let cap = max_rounds(m);
        for round in 0..cap {
            let mut changed = false;
            let first_snapshot = self.report.snapshots.len();
            for &pass in group {
                // The registry is ours: a unit test checks that every group
                // names only one-function passes.
                let Run::Func(run) = find(pass).run else {
                    debug_assert!(false, "group `{name}` names `{pass}`");
                    continue;
                };
                if self.admit(pass, None, self.required_pass(pass)) {
                    changed |= self.run_func(m, pass, run)?;
                    self.record(m, pass);
                }
            }
            if !changed {
                if round > 0 {
                    // This round repeats the module of the one before.
                    self.report.snapshots.truncate(first_snapshot);
                }
                return Ok(());
            }
        }
        // Unreachable while the group keeps its contract (see `max_rounds`).
        // Stopping leaves a verified module that a later run may still change.
        debug_assert!(false, "group `{name}` did not settle in {cap} rounds");
        Ok(())
    }

    fn record(&mut self, m: &Module, pass: PassId) {
        if self.opts.record {
            self.report.snapshots.push(Snapshot {
                pass,
                step: None,
                module: m.clone(),
            });
        }
    }
}

/// The round cap of a group over `m`: twice what [`SIMPLIFY`] can need. By
/// the argument there, with `n` = layout blocks + statements + `gotoifnot`s
/// (at most 2 × blocks + statements) of one function, that function changes
/// in at most 1 + 2n rounds, so the module in at most the sum of those; one
/// more round finds that nothing changes.
fn max_rounds(m: &Module) -> usize {
    let per_func = |f: &Func| 1 + 2 * (2 * f.blocks.len() + f.insts.len());
    let rounds: usize = m.funcs().map(|(_, f)| per_func(f)).sum();
    2 * (rounds + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_lists_every_pass_once_in_order() {
        assert_eq!(PASSES.len(), PassId::ALL.len());
        for (i, (p, id)) in PASSES.iter().zip(PassId::ALL).enumerate() {
            assert_eq!(p.id, id, "registry entry {i}");
            assert_eq!(id as usize, i, "{id} is out of order");
            assert_eq!(PassId::from_name(id.name()), Some(id));
        }
        assert_eq!(normalise_pipeline().len(), PIPELINE.len());
    }

    #[test]
    fn groups_name_only_one_function_passes() {
        for pass in PASSES {
            let Run::Fixpoint(group) = pass.run else {
                continue;
            };
            for &id in group {
                assert!(
                    matches!(find(id).run, Run::Func(_)),
                    "group {} names {id}, which is not a one-function pass",
                    pass.id
                );
            }
        }
    }

    /// NORMALISE is the pipeline with each group preceded by its passes.
    #[test]
    fn normalise_lists_the_pipeline_and_its_groups() {
        let mut names = Vec::new();
        for step in normalise_pipeline() {
            if let Run::Fixpoint(group) = find(step).run {
                names.extend_from_slice(group);
            }
            names.push(step);
        }
        assert_eq!(names, NORMALISE);
        assert_eq!(NORMALISE[0], PassId::UniformConstantOperands);
        for &name in NORMALISE {
            let until = normalise_until(name).map_err(|e| e.to_string());
            assert!(until.is_ok(), "{until:?}");
        }
    }

    #[test]
    fn normalise_until_a_pass_of_a_group_stops_in_its_first_round() {
        let names = |name| -> Vec<PassId> { normalise_until(name).into_iter().flatten().collect() };
        assert_eq!(
            names(PassId::FoldConstantBranches),
            [
                PassId::UniformConstantOperands,
                PassId::FoldConstantBranches
            ]
        );
        assert_eq!(names(PassId::Simplify), [PassId::Simplify]);
        assert_eq!(names(PassId::SingleReturn), PIPELINE);
    }

    const SRC: &str = "func @f(%x: f64) -> f64 {\n#1:\n  gotoifnot true, #3\n#2:\n  return %x\n#3:\n  return 1.0\n}\n";

    /// A deliberately wrong stage: it empties every layout.
    struct EmptyLayout;

    impl Stage for EmptyLayout {
        fn id(&self) -> PassId {
            PassId::Inline
        }

        fn run(
            &mut self,
            m: &mut Module,
            _: &PipelineOptions,
        ) -> Result<Option<Vec<Snapshot>>, PassError> {
            for f in m.func_ids() {
                m[f].layout.clear();
            }
            Ok(None)
        }
    }

    fn parse(src: &str) -> Result<Module, String> {
        irad_ir::text::parse_module(src).map_err(|e| e.to_string())
    }

    fn recording() -> PipelineOptions {
        PipelineOptions {
            verify: true,
            record: true,
            ..PipelineOptions::default()
        }
    }

    #[test]
    fn a_pass_that_breaks_the_ir_is_named() {
        let mut m = parse(SRC);
        let Ok(m) = m.as_mut() else {
            return assert!(m.is_ok(), "{m:?}");
        };
        let mut broken = EmptyLayout;
        let mut pipeline = [
            Step::Pass(PassId::FoldConstantBranches),
            Step::Stage(&mut broken),
        ];
        let res = run_pipeline(m, &mut pipeline, &recording());
        assert!(
            matches!(&res, Err(PassError::Verify { pass: PassId::Inline, errors }) if !errors.is_empty()),
            "{res:?}"
        );
    }

    #[test]
    fn a_stage_is_not_a_plain_pass() {
        let mut m = parse(SRC);
        let Ok(m) = m.as_mut() else {
            return assert!(m.is_ok(), "{m:?}");
        };
        let res = run_passes(m, &[PassId::Forward], &recording());
        assert!(
            matches!(
                res,
                Err(PassError::NeedsParameters {
                    pass: PassId::Forward
                })
            ),
            "{res:?}"
        );
    }

    /// One round of `simplify` changes the module (the fold); the second,
    /// which changes nothing, is not recorded.
    #[test]
    fn normalise_records_one_snapshot_per_pass_run() {
        let mut m = parse(SRC);
        let Ok(m) = m.as_mut() else {
            return assert!(m.is_ok(), "{m:?}");
        };
        let report = run_passes(m, PIPELINE, &recording()).map_err(|e| e.to_string());
        let names: Vec<PassId> = report
            .iter()
            .flat_map(|r| &r.snapshots)
            .map(|s| s.pass)
            .collect();
        let once: Vec<PassId> = NORMALISE
            .iter()
            .copied()
            .filter(|&n| n != PassId::Simplify)
            .collect();
        assert_eq!(names, once);
        // Two rounds of the group's four passes, then two passes.
        let runs = report.as_ref().map(|r| r.runs.len());
        assert_eq!(runs, Ok(10));
        let text = irad_ir::text::print_module(m);
        assert_eq!(
            text,
            "func @f(%x: f64) -> f64 {\n#1:\n  goto #2\n#2:\n  return %x\n}\n"
        );
    }

    /// A bisect limit of 1 runs `uniform_constant_operands` only: the
    /// branch is not folded, and every later pass is logged as skipped.
    #[test]
    fn the_bisect_limit_skips_later_passes() {
        let mut m = parse(SRC);
        let Ok(m) = m.as_mut() else {
            return assert!(m.is_ok(), "{m:?}");
        };
        let opts = PipelineOptions {
            bisect_limit: Some(1),
            ..recording()
        };
        let report = run_passes(m, PIPELINE, &opts).map_err(|e| e.to_string());
        let log: Vec<String> = report
            .iter()
            .flat_map(|r| &r.runs)
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            log,
            [
                "BISECT: running pass (1) uniform_constant_operands",
                "BISECT: NOT running pass (2) fold_constant_branches",
                "BISECT: NOT running pass (3) remove_unreachable_blocks",
                "BISECT: NOT running pass (4) remove_trivial_phis",
                "BISECT: NOT running pass (5) split_critical_edges",
                "BISECT: NOT running pass (6) single_return",
            ]
        );
        assert_eq!(irad_ir::text::print_module(m), SRC);
    }

    /// A trivial phi of `true` feeds a branch; folding it drops a block and
    /// leaves a second phi trivial, whose `false` feeds another branch: three
    /// rounds change the module, and each is recorded.
    #[test]
    fn simplify_records_every_round_that_changed() {
        let src = "func @f(%x: f64, %c: bool) -> f64 {
#1:
  gotoifnot %c, #3
#2:
  goto #3
#3:
  %b = phi [#1 => true, #2 => true] :: bool
  gotoifnot %b, #5
#4:
  goto #6
#5:
  goto #6
#6:
  %k = phi [#4 => false, #5 => %c] :: bool
  gotoifnot %k, #8
#7:
  return %x
#8:
  return 1.0
}
";
        let mut m = parse(src);
        let Ok(m) = m.as_mut() else {
            return assert!(m.is_ok(), "{m:?}");
        };
        let report = run_passes(m, &[PassId::Simplify], &recording()).map_err(|e| e.to_string());
        let names: Vec<PassId> = report
            .iter()
            .flat_map(|r| &r.snapshots)
            .map(|s| s.pass)
            .collect();
        assert_eq!(names, [SIMPLIFY, SIMPLIFY, SIMPLIFY].concat());
        let text = irad_ir::text::print_module(m);
        assert!(!text.contains("phi"), "{text}");
        assert!(!text.contains("gotoifnot true"), "{text}");
        assert!(!text.contains("return %x"), "{text}");
    }

    /// Each top-level step of an optimiser schedule is a numbered pass: a
    /// limit of 1 runs `normalise(fold)` (the sum becomes 3.0) and skips
    /// `try(dce)` (the unused product stays); only the step that ran is
    /// recorded.
    #[test]
    fn the_bisect_limit_counts_each_step_of_a_schedule() {
        let src = "func @f(%x: f64) -> f64 {\n#1:\n  %2 = call add(1.0, 2.0) :: f64\n  %3 = call mul(%x, %x) :: f64\n  return %2\n}\n";
        let schedule = crate::optimise::parse_schedule("normalise(fold); try(dce)");
        let Ok(schedule) = schedule else {
            return assert!(schedule.is_ok(), "{schedule:?}");
        };
        let run = |limit: Option<usize>| -> Result<(Report, String), String> {
            let mut m = parse(src)?;
            let mut opt = crate::stages::OptimiseStage::new(&schedule, crate::stages::Scope::All);
            let opts = PipelineOptions {
                bisect_limit: limit,
                ..recording()
            };
            let report = run_pipeline(&mut m, &mut [Step::Stage(&mut opt)], &opts)
                .map_err(|e| e.to_string())?;
            Ok((report, irad_ir::text::print_module(&m)))
        };
        let log = |r: &Report| -> Vec<String> { r.runs.iter().map(ToString::to_string).collect() };
        let steps = |r: &Report| -> Vec<Option<String>> {
            r.snapshots
                .iter()
                .map(|s| s.step.as_ref().map(|st| st.step.clone()))
                .collect()
        };

        let one = run(Some(1));
        let Ok((report, text)) = &one else {
            return assert!(one.is_ok(), "{one:?}");
        };
        assert_eq!(
            log(report),
            [
                "BISECT: running pass (1) optimise: normalise(fold)",
                "BISECT: NOT running pass (2) optimise: try(dce)",
            ]
        );
        assert_eq!(steps(report), [Some("normalise(fold)".to_string())]);
        assert!(
            text.contains("return 3.0") && text.contains("mul"),
            "{text}"
        );

        // No limit: both steps run; a limit of 0 runs neither.
        let all = run(None);
        let Ok((report, text)) = &all else {
            return assert!(all.is_ok(), "{all:?}");
        };
        assert_eq!(report.runs.iter().filter(|r| r.ran).count(), 2);
        assert_eq!(steps(report).len(), 2);
        assert!(!text.contains("mul"), "{text}");
        let none = run(Some(0));
        let Ok((report, text)) = &none else {
            return assert!(none.is_ok(), "{none:?}");
        };
        assert!(report.runs.iter().all(|r| !r.ran) && report.snapshots.is_empty());
        assert_eq!(text, src);
    }

    #[test]
    fn unknown_pass_lists_the_pipeline() {
        let err = PassId::parse_normalise("nope").err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "no pass named `nope` (passes: uniform_constant_operands, fold_constant_branches, \
                 remove_unreachable_blocks, remove_trivial_phis, simplify, split_critical_edges, \
                 single_return)"
            )
        );
        // A pass outside the pipeline is not one of its names either.
        assert!(PassId::parse_normalise("forward").is_err());
        assert!(normalise_until(PassId::Forward).is_err());
    }
}
