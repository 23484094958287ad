//! irad-passes: the pass manager and the transforms that run under it.
//!
//! - [`manager`]: the registry of passes by name, [`run_pipeline`] (run passes
//!   over every function, verify after each, record snapshots for `irad dump`)
//!   and [`normalise()`];
//! - [`normalise`](mod@normalise): the normalisation passes of DESIGN.md, one
//!   file each;
//! - [`activity`]: which values carry derivatives that matter, so the AD
//!   transforms skip tangent and cotangent work for the others;
//! - [`pe`]: partial evaluation (specialisation, inlining, unrolling,
//!   devirtualisation);
//! - [`optimise`]: rewrite rules combined by strategies, the schedules
//!   `irad grad`, `emit`, `dump --schedule` run (docs/optimise.md).
//!
//! Control flow (successors, predecessors, dominators, loops) comes from
//! `irad_ir::flow`.
//!
//! Assumes its input modules verify. Guarantees that every pass run through the
//! manager leaves a module that verifies (checked in debug builds and tests) and
//! that no pass panics on a verified module.

#![warn(missing_docs)]

pub mod activity;
#[macro_use]
mod ad_error;
pub mod forward;
pub mod manager;
pub mod normalise;
pub mod optimise;
pub mod pe;
pub mod reverse;

pub use manager::{
    NORMALISE, Pass, PassError, PipelineOptions, Snapshot, find, normalise, normalise_pipeline,
    normalise_until, passes, run_pipeline,
};
