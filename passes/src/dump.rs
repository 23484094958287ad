//! The pipeline `irad dump` runs: one pipeline of the pass manager from a
//! [`DumpRequest`] (normalisation up to a pass, forward or reverse mode, an
//! optimiser schedule), and the sections it prints: the module after each
//! pass with `--all-passes`, else after the last one.
//!
//! Assumes a module that verifies. Guarantees: verification after every pass
//! in every build; the sections are those of the manager's snapshots, the
//! input first (a bisect limit that skips a pass leaves no section for it);
//! with `--mode rev`, the reverse section carries the BBCode of the functions
//! differentiated. Rendering (IR text or DOT) is the caller's.

use crate::forward::Forward;
use crate::manager::{self, NORMALISE, OptStep, PassError, PassId, PassRun, PipelineOptions, Step};
use crate::optimise::Strategy;
use crate::reverse::Reverse;
use crate::stages::{ForwardStage, OptimiseStage, ReverseStage, Scope};
use irad_ir::{FuncId, Lanes, Module};
use irad_rules::Registry;

/// The derivation a dump adds.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum DumpMode {
    /// Forward rules of width 1 (`--mode fwd`).
    Forward,
    /// `@f.rev` and its pieces, with the BBCode (`--mode rev`).
    Reverse,
}

/// What `irad dump` asks for.
#[derive(Clone, Debug, Default)]
pub struct DumpRequest<'a> {
    /// The functions to show (and derive): every function when empty.
    pub funcs: Vec<FuncId>,
    /// The derivation to add, if any.
    pub mode: Option<DumpMode>,
    /// Stop after this pass: one of [`NORMALISE`], or `forward` / `reverse`
    /// (the pass of `mode`).
    pub after: Option<PassId>,
    /// Every section, not only the last.
    pub all_passes: bool,
    /// An optimiser schedule run last (over the derived functions when there
    /// are some, else over every function).
    pub schedule: Option<&'a Strategy>,
    /// Run only the passes numbered 1 to N (see
    /// [`PipelineOptions::bisect_limit`]).
    pub bisect_limit: Option<usize>,
    /// Called for every numbered pass (see [`PipelineOptions::on_pass`]).
    pub on_pass: Option<fn(&PassRun)>,
}

/// What a section is the module after.
#[derive(Clone, Debug)]
pub enum Label {
    /// The module as read.
    Input,
    /// A pass.
    Pass(PassId),
    /// A top-level step of the optimiser's schedule.
    Step(OptStep),
}

/// One module to print.
#[derive(Clone, Debug)]
pub struct Section {
    /// What it is the module after.
    pub label: Label,
    /// The module.
    pub module: Module,
}

/// What a dump prints.
#[derive(Clone, Debug)]
pub struct Dump {
    /// The sections, in order: every one with `all_passes`, else the last.
    pub sections: Vec<Section>,
    /// The functions to print of each section (all when empty): with `-f`
    /// and a derivation, the functions it added.
    pub funcs: Vec<FuncId>,
    /// With [`DumpMode::Reverse`], the BBCode of the functions
    /// differentiated, printed before the `reverse` section.
    pub bbcode: String,
}

impl Section {
    /// The comment line(s) heading the section with `--all-passes`:
    /// `# input`, `# after PASS`, or for a step of the schedule
    /// `# after STEP` and `# rewrites: RULE N, ...` (or `none`).
    pub fn heading(&self) -> String {
        match &self.label {
            Label::Input => "# input\n".to_string(),
            Label::Pass(pass) => format!("# after {pass}\n"),
            Label::Step(step) => {
                let rewrites: Vec<String> = step
                    .rewrites
                    .iter()
                    .map(|(name, n)| format!("{name} {n}"))
                    .collect();
                let rewrites = if rewrites.is_empty() {
                    "none".to_string()
                } else {
                    rewrites.join(", ")
                };
                format!("# after {}\n# rewrites: {rewrites}\n", step.step)
            }
        }
    }
}

/// Runs the pipeline `req` asks for over a copy of `module` and returns the
/// sections to print. Without a mode, `after`, `all_passes`, a schedule or a
/// bisect limit, the one section is the input.
pub fn dump(
    module: &Module,
    req: &DumpRequest<'_>,
    registry: &Registry,
) -> Result<Dump, PassError> {
    let input = Section {
        label: Label::Input,
        module: module.clone(),
    };
    let plain = req.after.is_none() && !req.all_passes && req.mode.is_none();
    if plain && req.schedule.is_none() && req.bisect_limit.is_none() {
        return Ok(Dump {
            sections: vec![input],
            funcs: req.funcs.clone(),
            bbcode: String::new(),
        });
    }
    let normalise = match req.after {
        Some(pass) if NORMALISE.contains(&pass) => manager::normalise_until(pass)?,
        _ => manager::normalise_pipeline(),
    };
    let derive = |mode| req.mode == Some(mode) && req.after.is_none_or(|p| !NORMALISE.contains(&p));
    let mut fwd = derive(DumpMode::Forward)
        .then(|| ForwardStage::new(Forward::new(registry), req.funcs.clone(), Lanes::ONE));
    let mut rev = derive(DumpMode::Reverse)
        .then(|| ReverseStage::new(Reverse::new(registry), req.funcs.clone(), None).with_bbcode());
    let scope = if fwd.is_some() || rev.is_some() {
        Scope::From(module.len())
    } else {
        Scope::All
    };
    let mut opt = req.schedule.map(|s| OptimiseStage::new(s, scope));
    let opts = PipelineOptions {
        verify: true,
        record: true,
        bisect_limit: req.bisect_limit,
        on_pass: req.on_pass,
    };
    let mut m = module.clone();
    let mut pipeline = manager::steps(&normalise);
    pipeline.extend(fwd.as_mut().map(|s| Step::Stage(s)));
    pipeline.extend(rev.as_mut().map(|s| Step::Stage(s)));
    pipeline.extend(opt.as_mut().map(|s| Step::Stage(s)));
    let report = manager::run_pipeline(&mut m, &mut pipeline, &opts)?;
    drop(pipeline);
    let mut sections = vec![input];
    sections.extend(report.snapshots.into_iter().map(|s| Section {
        label: match s.step {
            Some(step) => Label::Step(step),
            None => Label::Pass(s.pass),
        },
        module: s.module,
    }));
    if !req.all_passes {
        sections.drain(..sections.len() - 1);
    }
    let added = fwd
        .as_ref()
        .map(|s| &s.added)
        .or(rev.as_ref().map(|s| &s.added));
    let funcs = match added {
        Some(added) if !req.funcs.is_empty() => added.clone(),
        _ => req.funcs.clone(),
    };
    Ok(Dump {
        sections,
        funcs,
        bbcode: rev.map(|s| s.bbcode).unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "func @sq(%x: f64) -> f64 {\n#1:\n  %2 = call mul(%x, %x) :: f64\n  gotoifnot true, #3\n#2:\n  return %2\n#3:\n  return 1.0\n}\n";

    fn labels(dump: &Dump) -> Vec<String> {
        dump.sections
            .iter()
            .map(|s| s.heading().trim_end().to_string())
            .collect()
    }

    fn run(req: &DumpRequest<'_>) -> Result<Dump, String> {
        let m = irad_ir::text::parse_module(SRC).map_err(|e| e.to_string())?;
        dump(&m, req, &Registry::new()).map_err(|e| e.to_string())
    }

    #[test]
    fn all_passes_with_reverse_and_a_schedule_shows_every_stage() {
        let schedule = crate::optimise::parse_schedule("try(dce)").ok();
        let req = DumpRequest {
            mode: Some(DumpMode::Reverse),
            all_passes: true,
            schedule: schedule.as_ref(),
            ..DumpRequest::default()
        };
        let dump = run(&req);
        let names: Vec<String> = dump.iter().flat_map(labels).collect();
        assert_eq!(names.first().map(String::as_str), Some("# input"));
        assert!(
            names.contains(&"# after single_return".to_string()),
            "{names:?}"
        );
        let reverse = names.iter().position(|n| n == "# after reverse");
        let step = names
            .iter()
            .position(|n| n.starts_with("# after try(dce)\n# rewrites: "));
        assert!(reverse.is_some() && step > reverse, "{names:?}");
        let bbcode = dump.as_ref().map(|d| d.bbcode.contains("sq"));
        assert_eq!(bbcode, Ok(true));
    }

    #[test]
    fn after_a_pass_shows_one_section_and_forward_adds_its_rules() {
        let req = DumpRequest {
            after: Some(PassId::FoldConstantBranches),
            ..DumpRequest::default()
        };
        let dump = run(&req);
        assert_eq!(
            dump.iter().flat_map(labels).collect::<Vec<_>>(),
            ["# after fold_constant_branches"]
        );
        let req = DumpRequest {
            mode: Some(DumpMode::Forward),
            ..DumpRequest::default()
        };
        let dump = run(&req);
        let names: Vec<String> = dump
            .iter()
            .flat_map(|d| &d.sections)
            .flat_map(|s| s.module.funcs().map(|(_, f)| f.name.clone()))
            .collect();
        assert_eq!(names, ["sq", "sq.fwd"]);
    }

    /// With nothing asked for, the input is the one section; a bisect limit
    /// of 0 runs no pass but still derives what `--mode` asks for.
    #[test]
    fn the_bisect_limit_skips_passes_but_not_the_derivation() {
        let dump = run(&DumpRequest::default());
        assert_eq!(
            dump.iter().flat_map(labels).collect::<Vec<_>>(),
            ["# input"]
        );
        let req = DumpRequest {
            mode: Some(DumpMode::Forward),
            all_passes: true,
            bisect_limit: Some(0),
            ..DumpRequest::default()
        };
        let dump = run(&req);
        assert_eq!(
            dump.iter().flat_map(labels).collect::<Vec<_>>(),
            ["# input", "# after forward"]
        );
    }

    /// Reverse mode needs a normalised input (one return block, and `SRC`
    /// has two), so a bisect limit of 0 still runs the normalisation passes
    /// before it rather than hand it an input it rejects.
    #[test]
    fn a_bisect_limit_keeps_the_normalisation_reverse_mode_needs() {
        let req = DumpRequest {
            mode: Some(DumpMode::Reverse),
            all_passes: true,
            bisect_limit: Some(0),
            ..DumpRequest::default()
        };
        let names: Vec<String> = run(&req).iter().flat_map(labels).collect();
        assert!(
            names.contains(&"# after single_return".to_string()),
            "{names:?}"
        );
        assert_eq!(names.last().map(String::as_str), Some("# after reverse"));
    }
}
