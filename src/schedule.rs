//! The optimiser in the facade: reading `--schedule` text, and running a
//! schedule over the functions a derivation added to a module (the forward
//! rules, `@f.rev` and its pieces), which is what `irad grad`, `emit`,
//! `bench` and `dump --schedule` do (docs/optimise.md).
//!
//! Assumes modules that verify. Guarantees: the primal functions are left as
//! they are (only the derived functions are in scope; the tape part of `dce`
//! may drop pushes and pops anywhere, which primal functions do not have);
//! errors are [`Error::Schedule`], located in the schedule text for a
//! malformed one.

use crate::{Error, Source};
use irad_ir::{FuncId, Module};
use irad_passes::optimise::{self, OptOptions, OptSnapshot, Strategy};

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
/// let text = irad::ir::text::print_module(&m);
/// assert!(!text.contains("mul"), "{text}");
/// # Ok::<(), irad::Error>(())
/// ```
pub fn optimise_from(
    src: &Source,
    m: &mut Module,
    first: Option<usize>,
    schedule: &Strategy,
    record: bool,
) -> Result<Vec<OptSnapshot>, Error> {
    if *schedule == Strategy::Id && !record {
        return Ok(Vec::new());
    }
    let scope: Option<Vec<FuncId>> = first.map(|n| m.func_ids().skip(n).collect());
    let opts = OptOptions {
        record,
        ..OptOptions::default()
    };
    optimise::optimise(m, schedule, scope.as_deref(), &opts)
        .map(|r| r.snapshots)
        .map_err(|err| Error::Schedule {
            file: src.name.clone(),
            err: Box::new(err),
        })
}
