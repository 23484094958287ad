//! The pass manager: every pass registered once by name, pipelines of passes
//! run over every function of a module, the verifier after each pass, and
//! snapshots of the module after each pass for `irad dump --after/--all-passes`.
//!
//! A registered pass is either a transform of one function or a group: other
//! registered passes run in rounds until a round changes no function (a
//! fixpoint). The normalisation pipeline has one group, `simplify`.
//!
//! Assumes the module given to [`run_pipeline`] verifies (it is checked first
//! when verification is on). Guarantees: passes run in the order given, each
//! over every function in module order (a group runs its passes in its order,
//! round after round); with verification on (the default in debug builds and
//! therefore in tests), a module that fails to verify after a pass stops the
//! pipeline with [`PassError::Verify`] naming that pass. A group's rounds are
//! capped, so a group whose passes undo each other cannot loop for ever (debug
//! builds fail an assertion at the cap).

use crate::normalise as passes_fn;
use irad_ir::verify::{VerifyError, verify_module};
use irad_ir::{Func, Module};

/// A transform registered by name.
#[derive(Debug)]
pub struct Pass {
    /// The name `irad dump --after` and filetests (`# test: pass NAME`) use.
    pub name: &'static str,
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
    Fixpoint(&'static [&'static str]),
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
        pass: &'static str,
        /// The verifier's errors.
        errors: Vec<VerifyError>,
    },
    /// No pass has this name.
    #[error("no pass named `{name}` (passes: {})", known.join(", "))]
    UnknownPass {
        /// The name asked for.
        name: String,
        /// Every registered name.
        known: Vec<&'static str>,
    },
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
}

impl Default for PipelineOptions {
    /// Verification on in debug builds (and so in tests), recording off.
    fn default() -> PipelineOptions {
        PipelineOptions {
            verify: cfg!(debug_assertions),
            record: false,
        }
    }
}

/// The module as it was after one pass.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// The pass that had just run.
    pub pass: &'static str,
    /// The module after it.
    pub module: Module,
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
pub const SIMPLIFY: &[&str] = &[
    "uniform_constant_operands",
    "fold_constant_branches",
    "remove_unreachable_blocks",
    "remove_trivial_phis",
];

/// Every name of the normalisation pipeline, which [`normalise_until`] and
/// `irad dump --after` accept, in pipeline order, each placed where its
/// output is: the passes of [`SIMPLIFY`] (the pipeline up to such a pass
/// stops after its first run, in the group's first round), then the group
/// `simplify` (its fixpoint), then the passes that run once after it.
pub const NORMALISE: &[&str] = &[
    "uniform_constant_operands",
    "fold_constant_branches",
    "remove_unreachable_blocks",
    "remove_trivial_phis",
    "simplify",
    "split_critical_edges",
    "single_return",
];

/// What [`normalise()`] runs, in order. `simplify` comes first: it folds
/// constant branches and drops the blocks this makes unreachable (and their
/// phi entries) before any edge is split. `single_return` comes last because
/// the block it appends must stay last and it creates no critical edge (its
/// new block's predecessors each end in `goto`).
const PIPELINE: &[&str] = &["simplify", "split_critical_edges", "single_return"];

static PASSES: &[Pass] = &[
    Pass {
        name: "uniform_constant_operands",
        run: Run::Func(passes_fn::uniform_constant_operands),
        doc: "a constant operand of an exchangeable binary primitive comes second",
    },
    Pass {
        name: "fold_constant_branches",
        run: Run::Func(passes_fn::fold_constant_branches),
        doc: "`gotoifnot true/false` becomes a `goto` of the taken successor",
    },
    Pass {
        name: "remove_unreachable_blocks",
        run: Run::Func(passes_fn::remove_unreachable_blocks),
        doc: "every block of the layout is reachable from the entry",
    },
    Pass {
        name: "remove_trivial_phis",
        run: Run::Func(passes_fn::remove_trivial_phis),
        doc: "no phi whose entries are all one operand (or the phi itself)",
    },
    Pass {
        name: "simplify",
        run: Run::Fixpoint(SIMPLIFY),
        doc: "the passes of SIMPLIFY, repeated until none changes anything",
    },
    Pass {
        name: "split_critical_edges",
        run: Run::Func(passes_fn::split_critical_edges),
        doc: "no edge joins a block with several successors to one with several predecessors",
    },
    Pass {
        name: "single_return",
        run: Run::Func(passes_fn::single_return),
        doc: "at most one `return`, in the last block of the layout",
    },
];

/// Every registered pass, each once.
pub fn passes() -> &'static [Pass] {
    PASSES
}

/// The pass called `name`.
pub fn find(name: &str) -> Option<&'static Pass> {
    PASSES.iter().find(|p| p.name == name)
}

/// The steps of the normalisation pipeline, in order: the group `simplify`,
/// then the passes that run once after it.
pub fn normalise_pipeline() -> Vec<&'static Pass> {
    PIPELINE.iter().filter_map(|name| find(name)).collect()
}

/// Runs `pipeline` over `m`: each pass over every function, then (when
/// `opts.verify`) the verifier; a group runs its passes so, round after round,
/// until a round changes no function. Returns the module after each pass when
/// `opts.record` (see [`PipelineOptions::record`]), else an empty list.
pub fn run_pipeline(
    m: &mut Module,
    pipeline: &[&Pass],
    opts: &PipelineOptions,
) -> Result<Vec<Snapshot>, PassError> {
    if opts.verify {
        verify_module(m).map_err(|errors| PassError::Input { errors })?;
    }
    let mut ctx = Ctx {
        opts,
        snapshots: Vec::new(),
    };
    for pass in pipeline {
        match pass.run {
            Run::Func(run) => {
                ctx.run_func(m, pass.name, run)?;
                ctx.record(m, pass.name);
            }
            Run::Fixpoint(group) => ctx.run_fixpoint(m, pass.name, group)?,
        }
    }
    Ok(ctx.snapshots)
}

/// Runs the normalisation pipeline over `m` with the default options.
pub fn normalise(m: &mut Module) -> Result<(), PassError> {
    run_pipeline(m, &normalise_pipeline(), &PipelineOptions::default()).map(|_| ())
}

/// The normalisation pipeline until the pass called `name` has run, for
/// `irad dump --after`: for a step of the pipeline (`simplify` included), the
/// pipeline up to and including it; for a pass of `simplify`, the group's
/// first round up to and including that pass, each pass run once (so the
/// module is the one `--all-passes` shows first under that name). `name` must
/// be one of [`NORMALISE`].
pub fn normalise_until(name: &str) -> Result<Vec<&'static Pass>, PassError> {
    let mut pipeline = Vec::new();
    for step in normalise_pipeline() {
        if step.name == name {
            pipeline.push(step);
            return Ok(pipeline);
        }
        if let Run::Fixpoint(group) = step.run
            && let Some(end) = group.iter().position(|&n| n == name)
        {
            pipeline.extend(group[..=end].iter().filter_map(|n| find(n)));
            return Ok(pipeline);
        }
        pipeline.push(step);
    }
    Err(PassError::UnknownPass {
        name: name.to_string(),
        known: NORMALISE.to_vec(),
    })
}

/// The state of one [`run_pipeline`] call.
struct Ctx<'o> {
    opts: &'o PipelineOptions,
    snapshots: Vec<Snapshot>,
}

impl Ctx<'_> {
    /// Runs `run` over every function of `m`, then the verifier; returns
    /// whether it changed any function.
    fn run_func(
        &self,
        m: &mut Module,
        name: &'static str,
        run: fn(&mut Func) -> bool,
    ) -> Result<bool, PassError> {
        let mut changed = false;
        for id in m.func_ids() {
            changed |= run(&mut m[id]);
        }
        if self.opts.verify {
            verify_module(m).map_err(|errors| PassError::Verify { pass: name, errors })?;
        }
        Ok(changed)
    }

    /// Runs the passes named by `group` in rounds until a round changes no
    /// function, or until the round cap.
    fn run_fixpoint(
        &mut self,
        m: &mut Module,
        name: &'static str,
        group: &[&'static str],
    ) -> Result<(), PassError> {
        let passes: Vec<&'static Pass> = group.iter().filter_map(|n| find(n)).collect();
        // The registry is ours: a unit test checks that every group names
        // only registered one-function passes.
        debug_assert_eq!(
            passes.len(),
            group.len(),
            "group `{name}` names unknown passes"
        );
        let cap = max_rounds(m);
        for round in 0..cap {
            let mut changed = false;
            let first_snapshot = self.snapshots.len();
            for pass in &passes {
                let Run::Func(run) = pass.run else {
                    debug_assert!(false, "group `{name}` names the group `{}`", pass.name);
                    continue;
                };
                changed |= self.run_func(m, pass.name, run)?;
                self.record(m, pass.name);
            }
            if !changed {
                if round > 0 {
                    // This round repeats the module of the one before.
                    self.snapshots.truncate(first_snapshot);
                }
                return Ok(());
            }
        }
        // Unreachable while the group keeps its contract (see `max_rounds`).
        // Stopping leaves a verified module that a later run may still change.
        debug_assert!(false, "group `{name}` did not settle in {cap} rounds");
        Ok(())
    }

    fn record(&mut self, m: &Module, pass: &'static str) {
        if self.opts.record {
            self.snapshots.push(Snapshot {
                pass,
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
    fn every_pipeline_name_is_registered_once() {
        for name in NORMALISE.iter().chain(PIPELINE).chain(SIMPLIFY) {
            assert!(find(name).is_some(), "{name} is not registered");
        }
        for (i, p) in PASSES.iter().enumerate() {
            assert!(
                PASSES[..i].iter().all(|q| q.name != p.name),
                "{} is registered twice",
                p.name
            );
        }
        assert_eq!(normalise_pipeline().len(), PIPELINE.len());
    }

    #[test]
    fn groups_name_only_one_function_passes() {
        for pass in PASSES {
            let Run::Fixpoint(group) = pass.run else {
                continue;
            };
            for name in group {
                assert!(
                    matches!(find(name).map(|p| p.run), Some(Run::Func(_))),
                    "group {} names {name}, which is not a one-function pass",
                    pass.name
                );
            }
        }
    }

    /// NORMALISE is the pipeline with each group preceded by its passes.
    #[test]
    fn normalise_lists_the_pipeline_and_its_groups() {
        let mut names = Vec::new();
        for step in normalise_pipeline() {
            if let Run::Fixpoint(group) = step.run {
                names.extend_from_slice(group);
            }
            names.push(step.name);
        }
        assert_eq!(names, NORMALISE);
        assert_eq!(NORMALISE[0], "uniform_constant_operands");
        for name in NORMALISE {
            let until = normalise_until(name).map_err(|e| e.to_string());
            assert!(until.is_ok(), "{until:?}");
        }
    }

    #[test]
    fn normalise_until_a_pass_of_a_group_stops_in_its_first_round() {
        let names = |name| -> Vec<&str> {
            normalise_until(name)
                .into_iter()
                .flatten()
                .map(|p| p.name)
                .collect()
        };
        assert_eq!(
            names("fold_constant_branches"),
            ["uniform_constant_operands", "fold_constant_branches"]
        );
        assert_eq!(names("simplify"), ["simplify"]);
        assert_eq!(
            names("single_return"),
            ["simplify", "split_critical_edges", "single_return"]
        );
    }

    const SRC: &str = "func @f(%x: f64) -> f64 {\n#1:\n  gotoifnot true, #3\n#2:\n  return %x\n#3:\n  return 1.0\n}\n";

    fn empty_layout(func: &mut Func) -> bool {
        func.layout.clear();
        true
    }

    fn parse(src: &str) -> Result<Module, String> {
        irad_ir::text::parse_module(src).map_err(|e| e.to_string())
    }

    fn recording() -> PipelineOptions {
        PipelineOptions {
            verify: true,
            record: true,
        }
    }

    #[test]
    fn a_pass_that_breaks_the_ir_is_named() {
        let broken = Pass {
            name: "empty_layout",
            run: Run::Func(empty_layout),
            doc: "a deliberately wrong pass",
        };
        let mut m = parse(SRC);
        let Ok(m) = m.as_mut() else {
            return assert!(m.is_ok(), "{m:?}");
        };
        let fold = find("fold_constant_branches")
            .into_iter()
            .collect::<Vec<_>>();
        let res = run_pipeline(m, &[fold[0], &broken], &recording());
        assert!(
            matches!(&res, Err(PassError::Verify { pass: "empty_layout", errors }) if !errors.is_empty()),
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
        let snaps = run_pipeline(m, &normalise_pipeline(), &recording()).map_err(|e| e.to_string());
        let names: Vec<&str> = snaps.iter().flatten().map(|s| s.pass).collect();
        let once: Vec<&str> = NORMALISE
            .iter()
            .copied()
            .filter(|&n| n != "simplify")
            .collect();
        assert_eq!(names, once);
        let text = irad_ir::text::print_module(m);
        assert_eq!(
            text,
            "func @f(%x: f64) -> f64 {\n#1:\n  goto #2\n#2:\n  return %x\n}\n"
        );
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
        let simplify: Vec<&Pass> = find("simplify").into_iter().collect();
        let snaps = run_pipeline(m, &simplify, &recording()).map_err(|e| e.to_string());
        let names: Vec<&str> = snaps.iter().flatten().map(|s| s.pass).collect();
        assert_eq!(names, [SIMPLIFY, SIMPLIFY, SIMPLIFY].concat());
        let text = irad_ir::text::print_module(m);
        assert!(!text.contains("phi"), "{text}");
        assert!(!text.contains("gotoifnot true"), "{text}");
        assert!(!text.contains("return %x"), "{text}");
    }

    #[test]
    fn unknown_pass_lists_the_pipeline() {
        let err = normalise_until("nope").err().map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| e.contains("single_return")),
            "{err:?}"
        );
    }
}
