//! Running a pipeline: each step in order, the verifier after each pass,
//! snapshots, groups to a fixpoint under a round cap, and the numbering and
//! skipping of the bisect limit.
//!
//! Assumes the registry's contract (`super::registry`). Guarantees those of
//! the manager (`super`): order, verification after each pass, a capped
//! fixpoint, and required passes run whatever the limit.

use super::registry::PIPELINE;
use super::{
    NORMALISE, PassError, PassId, PassRun, PipelineOptions, Report, Run, Snapshot, Step, find,
};
use irad_ir::timings::Stage;
use irad_ir::verify::verify_module;
use irad_ir::{Func, Module};

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
        let id = match step {
            Step::Pass(id) => *id,
            Step::Stage(stage) => stage.id(),
        };
        irad_ir::timings::time(timed_stage(id), || self.step_untimed(m, step))
    }

    fn step_untimed(&mut self, m: &mut Module, step: &mut Step<'_>) -> Result<(), PassError> {
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

/// The stage of [`irad_ir::timings`] that pass `id`'s time counts in.
fn timed_stage(id: PassId) -> Stage {
    match id {
        PassId::Forward | PassId::Reverse => Stage::Derive,
        PassId::Optimise
        | PassId::Specialise
        | PassId::Inline
        | PassId::Unroll
        | PassId::Devirtualise => Stage::Optimise,
        PassId::UniformConstantOperands
        | PassId::FoldConstantBranches
        | PassId::RemoveUnreachableBlocks
        | PassId::RemoveTrivialPhis
        | PassId::Simplify
        | PassId::SplitCriticalEdges
        | PassId::SingleReturn => Stage::Normalise,
    }
}
