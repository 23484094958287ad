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

use crate::optimise::OptError;
use crate::pe::PeError;
use crate::reverse::ReverseError;
use irad_ir::interp::ErrorKind;
use irad_ir::verify::VerifyError;
use irad_ir::{Func, Module};
use std::fmt;

mod registry;
mod run;
#[cfg(test)]
mod tests;

pub use registry::{NORMALISE, SIMPLIFY, find, normalise_pipeline, normalise_until, passes};
pub use run::{normalise, run_passes, run_pipeline, steps};

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
