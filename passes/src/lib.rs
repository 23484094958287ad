//! irad-passes: the pass manager and the transforms that run under it.
//!
//! - [`manager`]: the one pass manager: every stage a named pass
//!   ([`PassId`]), [`run_pipeline`] (run passes and stages, verify after each,
//!   record snapshots for `irad dump`, bisect) and [`normalise()`];
//! - [`stages`]: forward mode, reverse mode, the optimiser and specialisation
//!   wrapped as stages of the manager;
//! - [`dump`]: the pipeline `irad dump` runs and the sections it prints;
//! - [`aot_rules`]: the run-time rule provider of `irad emit`'s objects;
//! - [`annotate`]: IR printed with analysis results beside it (BBCode);
//! - [`normalise`](mod@normalise): the normalisation passes of DESIGN.md, one
//!   file each;
//! - [`grad`]: the gradient request and result both AD modes share;
//! - [`activity`]: which values carry derivatives that matter, so the AD
//!   transforms skip tangent and cotangent work for the others;
//! - [`pe`]: partial evaluation (specialisation, inlining, unrolling,
//!   devirtualisation);
//! - [`optimise`]: rewrite rules combined by strategies, the schedules
//!   `irad grad`, `emit`, `dump --schedule` run (docs/optimise.md);
//! - `rule_cache`: the derived-rule cache of both AD modes.
//!
//! Control flow (successors, predecessors, dominators, loops) comes from
//! `irad_ir::flow`.
//!
//! Assumes its input modules verify. Guarantees that every pass run through the
//! manager leaves a module that verifies (checked in debug builds and tests) and
//! that no pass panics on a verified module.

#![warn(missing_docs)]

pub mod activity;
pub mod annotate;
pub mod aot_rules;
#[macro_use]
mod ad_error;
pub mod dump;
pub mod forward;
pub mod grad;
pub mod manager;
pub mod normalise;
pub mod optimise;
pub mod pe;
pub mod reverse;
mod rule_cache;
pub mod split;
pub mod stages;

pub use ad_error::AdErrorKind;
pub use manager::{
    NORMALISE, OptStep, Pass, PassError, PassId, PassRun, PipelineOptions, Report, Snapshot, Stage,
    Step, find, normalise, normalise_pipeline, normalise_until, passes, run_passes, run_pipeline,
};
