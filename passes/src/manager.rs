//! The pass manager: every pass registered once by name, pipelines of passes
//! run over every function of a module, the verifier after each pass, and
//! snapshots of the module after each pass for `irad dump --after/--all-passes`.
//!
//! Assumes the module given to [`run_pipeline`] verifies (it is checked first
//! when verification is on). Guarantees: passes run in the order given, each
//! over every function in module order; with verification on (the default in
//! debug builds and therefore in tests), a module that fails to verify after a
//! pass stops the pipeline with [`PassError::Verify`] naming that pass.

use crate::normalise as passes_fn;
use irad_ir::verify::{VerifyError, verify_module};
use irad_ir::{Func, Module};

/// A transform of one function, registered by name.
#[derive(Debug)]
pub struct Pass {
    /// The name `irad dump --after` and filetests (`# test: pass NAME`) use.
    pub name: &'static str,
    /// The transform: in place, over one function; it returns whether it
    /// changed the function.
    pub run: fn(&mut Func) -> bool,
    /// One line on what the pass guarantees.
    pub doc: &'static str,
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
    /// Record a copy of the module after every pass.
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

/// The normalisation pipeline, in its fixed order. Folding constant branches
/// comes first because it makes blocks unreachable; removing unreachable
/// blocks then drops them (and their phi entries) before any edge is split;
/// `single_return` comes last because the block it appends must stay last and
/// it creates no critical edge (its new block's predecessors each end in `goto`).
pub const NORMALISE: &[&str] = &[
    "fold_constant_branches",
    "remove_unreachable_blocks",
    "split_critical_edges",
    "single_return",
];

static PASSES: &[Pass] = &[
    Pass {
        name: "fold_constant_branches",
        run: passes_fn::fold_constant_branches,
        doc: "`gotoifnot true/false` becomes a `goto` of the taken successor",
    },
    Pass {
        name: "remove_unreachable_blocks",
        run: passes_fn::remove_unreachable_blocks,
        doc: "every block of the layout is reachable from the entry",
    },
    Pass {
        name: "split_critical_edges",
        run: passes_fn::split_critical_edges,
        doc: "no edge joins a block with several successors to one with several predecessors",
    },
    Pass {
        name: "single_return",
        run: passes_fn::single_return,
        doc: "at most one `return`, in the last block of the layout",
    },
    Pass {
        name: "remove_trivial_phis",
        run: passes_fn::remove_trivial_phis,
        doc: "no phi whose entries are all one operand (or the phi itself)",
    },
    Pass {
        name: "uniform_constant_operands",
        run: passes_fn::uniform_constant_operands,
        doc: "a constant operand of an exchangeable binary primitive comes second",
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

/// The passes of [`NORMALISE`], in order.
pub fn normalise_pipeline() -> Vec<&'static Pass> {
    NORMALISE.iter().filter_map(|name| find(name)).collect()
}

/// Runs `pipeline` over `m`: each pass over every function, then (when
/// `opts.verify`) the verifier. Returns the module after each pass when
/// `opts.record`, else an empty list.
pub fn run_pipeline(
    m: &mut Module,
    pipeline: &[&Pass],
    opts: &PipelineOptions,
) -> Result<Vec<Snapshot>, PassError> {
    if opts.verify {
        verify_module(m).map_err(|errors| PassError::Input { errors })?;
    }
    let mut snapshots = Vec::new();
    for pass in pipeline {
        for id in m.func_ids() {
            // Whether the pass changed anything does not matter here: every
            // pass runs once.
            (pass.run)(&mut m[id]);
        }
        if opts.verify {
            verify_module(m).map_err(|errors| PassError::Verify {
                pass: pass.name,
                errors,
            })?;
        }
        if opts.record {
            snapshots.push(Snapshot {
                pass: pass.name,
                module: m.clone(),
            });
        }
    }
    Ok(snapshots)
}

/// Runs the normalisation pipeline ([`NORMALISE`]) over `m` with the default
/// options.
pub fn normalise(m: &mut Module) -> Result<(), PassError> {
    run_pipeline(m, &normalise_pipeline(), &PipelineOptions::default()).map(|_| ())
}

/// The normalisation pipeline up to and including the pass called `name`.
pub fn normalise_until(name: &str) -> Result<Vec<&'static Pass>, PassError> {
    let end = NORMALISE
        .iter()
        .position(|&n| n == name)
        .ok_or_else(|| PassError::UnknownPass {
            name: name.to_string(),
            known: NORMALISE.to_vec(),
        })?;
    Ok(normalise_pipeline().into_iter().take(end + 1).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pipeline_name_is_registered_once() {
        for name in NORMALISE {
            assert!(find(name).is_some(), "{name} is not registered");
        }
        for (i, p) in PASSES.iter().enumerate() {
            assert!(
                PASSES[..i].iter().all(|q| q.name != p.name),
                "{} is registered twice",
                p.name
            );
        }
        assert_eq!(normalise_pipeline().len(), NORMALISE.len());
    }

    const SRC: &str = "func @f(%x: f64) -> f64 {\n#1:\n  gotoifnot true, #3\n#2:\n  return %x\n#3:\n  return 1.0\n}\n";

    fn empty_layout(func: &mut Func) -> bool {
        func.layout.clear();
        true
    }

    #[test]
    fn a_pass_that_breaks_the_ir_is_named() {
        let broken = Pass {
            name: "empty_layout",
            run: empty_layout,
            doc: "a deliberately wrong pass",
        };
        let mut m = irad_ir::text::parse_module(SRC).map_err(|e| e.to_string());
        let Ok(m) = m.as_mut() else {
            return assert!(m.is_ok(), "{m:?}");
        };
        let opts = PipelineOptions {
            verify: true,
            record: true,
        };
        let fold = find("fold_constant_branches")
            .into_iter()
            .collect::<Vec<_>>();
        let res = run_pipeline(m, &[fold[0], &broken], &opts);
        assert!(
            matches!(&res, Err(PassError::Verify { pass: "empty_layout", errors }) if !errors.is_empty()),
            "{res:?}"
        );
    }

    #[test]
    fn normalise_records_one_snapshot_per_pass() {
        let mut m = irad_ir::text::parse_module(SRC).map_err(|e| e.to_string());
        let Ok(m) = m.as_mut() else {
            return assert!(m.is_ok(), "{m:?}");
        };
        let opts = PipelineOptions {
            verify: true,
            record: true,
        };
        let snaps = run_pipeline(m, &normalise_pipeline(), &opts).map_err(|e| e.to_string());
        let names: Vec<&str> = snaps.iter().flatten().map(|s| s.pass).collect();
        assert_eq!(names, NORMALISE);
        let text = irad_ir::text::print_module(m);
        assert_eq!(
            text,
            "func @f(%x: f64) -> f64 {\n#1:\n  goto #2\n#2:\n  return %x\n}\n"
        );
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
