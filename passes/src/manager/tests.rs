//! Unit tests of the pass manager: the registry's shape, pipelines,
//! groups, snapshots, verification and the bisect limit.

use super::registry::{PASSES, PIPELINE};
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
        let report =
            run_pipeline(&mut m, &mut [Step::Stage(&mut opt)], &opts).map_err(|e| e.to_string())?;
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
