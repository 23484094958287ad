//! Schedules in the facade: reading `--checkpoint` text (per-loop overrides
//! of checkpointing, docs/schedules.md, checked against the program's
//! loops); and the optimiser: reading `--schedule` text, and running a
//! schedule over the functions a derivation added to a module (the forward
//! rules, `@f.rev` and its pieces), which is what `irad grad`, `emit`,
//! `bench` and `dump --schedule` do (docs/optimise.md).
//!
//! The schedule runs under the pass manager, as the `optimise` stage
//! ([`irad_passes::stages::OptimiseStage`]), like every other stage.
//!
//! Assumes modules that verify. Guarantees: the primal functions are left as
//! they are (only the derived functions are in scope; the tape part of `dce`
//! may drop pushes and pops anywhere, which primal functions do not have);
//! errors are [`Error::Schedule`], located in the schedule text for a
//! malformed one; a checkpoint schedule's are [`Error::Parse`] located in
//! its text, the pseudo-file `<checkpoint>`.

use crate::{Error, Source};
use irad_ir::text::ParseError;
use irad_ir::{Location, Module};
use irad_passes::manager::{PassError, PipelineOptions, Step};
use irad_passes::optimise::{self, OptError, OptSnapshot, Strategy};
use irad_passes::reverse::{CheckpointSchedule, LoopTarget};
use irad_passes::stages::{OptimiseStage, Scope};

/// The schedule `text` names (`--schedule`), or the default schedule
/// ([`optimise::DEFAULT_SCHEDULE`]) when there is none. A malformed schedule
/// is an error located in its text (the pseudo-file `<schedule>`).
///
/// ```
/// use irad::passes::optimise::{Strategy, default_schedule};
///
/// assert_eq!(irad::read_schedule(Some("id"))?, Strategy::Id);
/// assert_eq!(irad::read_schedule(None)?, default_schedule());
/// let err = irad::read_schedule(Some("fold <+")).unwrap_err();
/// assert_eq!(
///     err.render(&[]),
///     "<schedule>:1:8: error: expected a strategy, found the end of the schedule\n"
/// );
/// // The plain message names the place once.
/// assert_eq!(
///     err.to_string(),
///     "<schedule>:1:8: error: expected a strategy, found the end of the schedule"
/// );
/// # Ok::<(), irad::Error>(())
/// ```
pub fn read_schedule(text: Option<&str>) -> Result<Strategy, Error> {
    match text {
        Some(t) => optimise::parse_schedule(t).map_err(|err| Error::Schedule {
            file: "<schedule>".into(),
            err: Box::new(err),
        }),
        None => Ok(optimise::default_schedule()),
    }
}

/// Runs `schedule` over the functions of `m` from position `first` on (those
/// a derivation added), or over every function when `first` is `None`;
/// returns the module after each top-level step when `record`.
///
/// ```
/// use irad::Source;
///
/// let src = Source::new("f.ir", "func @f(%x: f64) -> f64 {\n#1:\n  %2 = call mul(%x, 1.0) :: f64\n  %3 = call add(%2, 0.0) :: f64\n  return %3\n}\n");
/// let mut m = irad::load(&src)?;
/// let schedule = irad::read_schedule(Some("normalise(fold <+ identities); try(dce)"))?;
/// let steps = irad::optimise_from(&src, &mut m, None, &schedule, true)?;
/// assert_eq!(steps.len(), 2); // one snapshot per top-level step
/// assert_eq!(steps[1].step, "try(dce)");
/// let text = irad::ir::text::print_module(&m);
/// assert!(!text.contains("mul"), "{text}");
///
/// // A module that does not verify (a block without a terminator) is refused
/// // with the optimiser's message, where verification is on (debug builds
/// // of the library: the doctest's own build may differ).
/// let mut bad = irad::ir::Module::new();
/// let g = bad.declare_func("g", vec![], irad::ir::Type::F64)?;
/// let mut b = irad::ir::FuncBuilder::new(&mut bad, g)?;
/// let entry = b.create_block();
/// b.switch_to_block(entry)?;
/// if irad::passes::manager::PipelineOptions::default().verify {
///     let err = irad::optimise_from(&src, &mut bad, None, &schedule, false).unwrap_err();
///     assert!(
///         err.to_string().starts_with("f.ir: the input does not verify (1 error(s)); the optimiser needs verified IR"),
///         "{err}"
///     );
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn optimise_from(
    src: &Source,
    m: &mut Module,
    first: Option<usize>,
    schedule: &Strategy,
    record: bool,
) -> Result<Vec<OptSnapshot>, Error> {
    // `id` changes nothing: unrecorded, it is not run (nor is the input
    // verified, as before this ran under the manager).
    if *schedule == Strategy::Id && !record {
        return Ok(Vec::new());
    }
    let scope = first.map_or(Scope::All, Scope::From);
    let mut stage = OptimiseStage::new(schedule, scope);
    let opts = PipelineOptions {
        record,
        ..PipelineOptions::default()
    };
    let report = irad_passes::run_pipeline(m, &mut [Step::Stage(&mut stage)], &opts).map_err(
        |err| match err {
            // The manager checks the input before the stage; the error keeps
            // the optimiser's own words for it, as when the optimiser
            // checked it itself.
            PassError::Input { errors } => Error::Schedule {
                file: src.name.clone(),
                err: Box::new(OptError::Input { errors }),
            },
            other => crate::pass_error(src, other),
        },
    )?;
    Ok(report
        .snapshots
        .into_iter()
        .filter_map(|s| {
            let step = s.step?;
            Some(OptSnapshot {
                step: step.step,
                rewrites: step.rewrites,
                module: s.module,
            })
        })
        .collect())
}

/// The name errors about a checkpoint schedule give its text.
pub const CHECKPOINT_SOURCE: &str = "<checkpoint>";

/// The checkpoint schedule `text` writes (`--checkpoint`, docs/schedules.md)
/// for the program `module` of `src`; the empty schedule when there is no
/// text. A malformed schedule, or a rule that names no loop of the program
/// (after normalisation, whose labels the dump shows), is an error located
/// in the text, the pseudo-file `<checkpoint>`.
///
/// ```
/// use irad::Source;
///
/// let src = Source::new("p.irad", "fn p(x: f64) -> f64 {\n    let mut s = x;\n    for i in 0..8 {\n        s = sin(s);\n    }\n    s\n}\n");
/// let m = irad::load(&src)?;
/// let s = irad::read_checkpoints(Some("line 3 = 2"), &src, &m)?;
/// assert_eq!(s.to_string(), "line 3 = 2");
/// let err = irad::read_checkpoints(Some("line 3 = 2; line 4 = record"), &src, &m).unwrap_err();
/// assert_eq!(
///     err.render(&[]),
///     "<checkpoint>:1:13: error: no loop of the program has its header on line 4\n"
/// );
/// # Ok::<(), irad::Error>(())
/// ```
pub fn read_checkpoints(
    text: Option<&str>,
    src: &Source,
    module: &Module,
) -> Result<CheckpointSchedule, Error> {
    let Some(text) = text else {
        return Ok(CheckpointSchedule::default());
    };
    let located = |err| Error::Parse {
        file: CHECKPOINT_SOURCE.into(),
        err: Box::new(err),
    };
    let schedule = CheckpointSchedule::parse(text).map_err(located)?;
    if schedule.is_empty() {
        return Ok(schedule);
    }
    let normalised = crate::normalise(src, module)?;
    if let Some(rule) = schedule.unmatched(&normalised).first() {
        let msg = match &rule.target {
            LoopTarget::Line(n) => format!("no loop of the program has its header on line {n}"),
            LoopTarget::Label {
                func: Some(g),
                label,
            } => format!("@{g} has no loop headed by #{label} (`irad dump --mode rev` names them)"),
            LoopTarget::Label { func: None, label } => format!(
                "no loop of the program is headed by #{label} (`irad dump --mode rev` names them)"
            ),
        };
        return Err(located(ParseError {
            loc: Location::at(rule.pos),
            msg,
        }));
    }
    Ok(schedule)
}
