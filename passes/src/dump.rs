//! The pipeline `irad dump` runs: one pipeline of the pass manager from a
//! [`DumpRequest`] (normalisation up to a pass, forward or reverse mode, an
//! optimiser schedule), and the sections it prints: the module after each
//! pass with `--all-passes`, else after the last one.
//!
//! Assumes a module that verifies. Guarantees: verification after every pass
//! in every build; the sections are those of the manager's snapshots, the
//! input first (a bisect limit that skips a pass leaves no section for it);
//! with `--mode rev`, the reverse section carries the BBCode of the functions
//! differentiated, and the dump the tape plan of each forward sweep derived
//! from a body ([`crate::reverse::tape_plan`], which names values as the
//! sweep prints right after the derivation), which [`Dump::tape_comments`]
//! prints for any later section by the names that section prints: the
//! optimiser edits statements in place, so a value and its `push`
//! statements keep their handles through a schedule. Which schedule runs
//! (`irad dump` runs the default one under `--mode`) is the caller's choice,
//! as is rendering (IR text or DOT).

use crate::forward::Forward;
use crate::manager::{
    self, NORMALISE, OptStep, PassError, PassId, PassRun, PipelineOptions, Snapshot, Stage, Step,
};
use crate::optimise::Strategy;
use crate::reverse::{Reverse, tape_plan_scheduled};
use crate::stages::{ForwardStage, OptimiseStage, ReverseStage, Scope};
use irad_ir::text::{Line, func_lines, printed_names};
use irad_ir::{FuncId, FuncRef, Inst, InstKind, Lanes, Module, Operand, Prim, Value};
use irad_rules::Registry;
use std::collections::{BTreeSet, HashMap};

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
    /// (the pass of `mode`), or `inline`: after everything else, the module
    /// as code generation compiles it, small callees inlined
    /// ([`crate::pe::inlined_as_compiled`]).
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
    /// With [`DumpMode::Reverse`]: the tape limit the pieces are derived
    /// under ([`Reverse::set_tape_limit`]), whose checkpointed loops the
    /// tape plans show.
    pub tape_limit: Option<u64>,
    /// With [`DumpMode::Reverse`]: the per-loop overrides of checkpointing
    /// ([`Reverse::set_checkpoint_schedule`], docs/schedules.md).
    pub checkpoints: Option<&'a crate::reverse::CheckpointSchedule>,
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
    /// With [`DumpMode::Reverse`], the tape plan of each forward sweep
    /// derived from a function body ([`Dump::tape_comments`] prints it).
    pub tapes: Vec<TapeListing>,
}

/// The tape plan of one forward sweep `@f.rev.fwd` of a reverse dump, kept
/// so that it can be printed with the value names of any later section.
#[derive(Clone, Debug)]
pub struct TapeListing {
    /// The forward sweep.
    pub fwd: FuncId,
    /// Its name.
    pub name: String,
    /// The plan's lines ([`crate::reverse::TapePlan`]'s `Display`), which
    /// name values as the forward sweep prints right after the derivation;
    /// or why there is no plan.
    text: Result<String, String>,
    /// The values of the forward sweep right after the derivation, by
    /// printed name.
    values: HashMap<String, Value>,
    /// The types of the tapes it pushes to right after the derivation.
    tapes: BTreeSet<String>,
    /// The `push` statements of each value it pushes right after the
    /// derivation (the optimiser edits statements in place, so these name
    /// the same pushes in later sections).
    pushes: HashMap<Value, Vec<Inst>>,
    /// Whether the plan's derivation (a scratch one, [`tape_plan`]) named
    /// each saved value as this sweep does; if not, names are left as the
    /// plan has them and a line says so.
    same_names: bool,
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
            tapes: Vec::new(),
        });
    }
    let normalise = match req.after {
        Some(pass) if NORMALISE.contains(&pass) => manager::normalise_until(pass)?,
        _ => manager::normalise_pipeline(),
    };
    let derive = |mode| req.mode == Some(mode) && req.after.is_none_or(|p| !NORMALISE.contains(&p));
    let mut fwd = derive(DumpMode::Forward)
        .then(|| ForwardStage::new(Forward::new(registry), req.funcs.clone(), Lanes::ONE));
    let mut rev = derive(DumpMode::Reverse).then(|| {
        let mut r = Reverse::new(registry);
        r.set_tape_limit(req.tape_limit);
        if let Some(c) = req.checkpoints {
            r.set_checkpoint_schedule(c.clone());
        }
        PlannedReverse {
            stage: ReverseStage::new(r, req.funcs.clone(), None).with_bbcode(),
            registry,
            tapes: Vec::new(),
        }
    });
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
    if req.after == Some(PassId::Inline) {
        // What code generation compiles: the last module, inlined.
        let last = sections.last().map_or(&m, |s| &s.module);
        let inlined = crate::pe::inlined_as_compiled(last);
        sections.push(Section {
            label: Label::Pass(PassId::Inline),
            module: inlined,
        });
    }
    if !req.all_passes {
        sections.drain(..sections.len() - 1);
    }
    let added = fwd
        .as_ref()
        .map(|s| &s.added)
        .or(rev.as_ref().map(|s| &s.stage.added));
    let funcs = match added {
        Some(added) if !req.funcs.is_empty() => added.clone(),
        _ => req.funcs.clone(),
    };
    let (bbcode, tapes) = rev.map_or_else(Default::default, |r| (r.stage.bbcode, r.tapes));
    Ok(Dump {
        sections,
        funcs,
        bbcode,
        tapes,
    })
}

impl Dump {
    /// The `#` comment lines printed after forward sweep `f` in a section of
    /// `module`: `# tape of @f.rev.fwd:` then one line per value saved and
    /// per predecessor index, as [`crate::reverse::TapePlan`] prints them,
    /// with each value pushed named by what the same `push` statements push
    /// in `module` (which the optimiser may have rewritten since the
    /// derivation: the value's new name, or the value or constant that
    /// replaced it; a value whose pushes it removed is said to be so), any
    /// other value by its name in `module`, and one line per tape the
    /// optimiser emptied of every push. A plan with nothing on it says `nothing
    /// recorded`. `None` when `f` is not a forward sweep of this dump (or
    /// `module` does not have it yet).
    pub fn tape_comments(&self, module: &Module, f: FuncId) -> Option<String> {
        let listing = self.tapes.iter().find(|t| t.fwd == f)?;
        let func = module.get(f).filter(|func| func.name == listing.name)?;
        let mut out = format!("# tape of @{}:", listing.name);
        let text = match &listing.text {
            Ok(text) => text,
            Err(why) => {
                out.push_str(&format!(" no plan ({why})\n"));
                return Some(out);
            }
        };
        if text.trim().is_empty() {
            out.push_str(" nothing recorded\n");
            return Some(out);
        }
        out.push('\n');
        let names = printed_names(module, f);
        let pushed = pushed_operands(module, f);
        let now = |name: &str| -> Option<String> {
            let v = listing.values.get(name)?;
            let pushes = listing.pushes.get(v).map_or(&[][..], Vec::as_slice);
            if pushes.is_empty() {
                // Not pushed (nothing this dump knows of saves it): its name.
                return Some(match names.get(v) {
                    Some(now) => format!("%{now}"),
                    None => format!("%{name} (replaced or removed by the optimiser)"),
                });
            }
            // What the same pushes push now: the value renamed, or what the
            // optimiser replaced it with.
            let mut ops: Vec<&str> = Vec::new();
            for op in pushes.iter().filter_map(|inst| pushed.get(inst)) {
                if !ops.contains(&op.as_str()) {
                    ops.push(op);
                }
            }
            Some(if ops.is_empty() {
                format!("%{name} (no longer pushed: the optimiser removed its pushes)")
            } else {
                ops.join(" or ")
            })
        };
        for line in text.lines() {
            out.push_str("#   ");
            if listing.same_names {
                out.push_str(&rename(line, &now));
            } else {
                out.push_str(line);
            }
            out.push('\n');
        }
        if !listing.same_names {
            out.push_str(&format!(
                "#   (values named as in a separate derivation, not as @{} prints them)\n",
                func.name
            ));
        }
        let now = pushed_types(module, f);
        for ty in listing.tapes.difference(&now) {
            out.push_str(&format!(
                "#   (the optimiser removed every push of {ty} from @{}: that tape is not recorded)\n",
                func.name
            ));
        }
        Some(out)
    }
}

/// The reverse stage of a dump, which also keeps the tape plan of every
/// forward sweep it derived from a function body.
struct PlannedReverse<'r> {
    stage: ReverseStage<'r>,
    registry: &'r Registry,
    tapes: Vec<TapeListing>,
}

impl Stage for PlannedReverse<'_> {
    fn id(&self) -> PassId {
        self.stage.id()
    }

    fn needs_normalised(&self) -> bool {
        self.stage.needs_normalised()
    }

    fn required(&self) -> bool {
        self.stage.required()
    }

    fn run(
        &mut self,
        m: &mut Module,
        opts: &PipelineOptions,
    ) -> Result<Option<Vec<Snapshot>>, PassError> {
        let before = m.clone();
        let out = self.stage.run(m, opts)?;
        self.tapes = listings(&before, m, &self.stage.rev, self.registry);
        Ok(out)
    }
}

/// The tape plan of each forward sweep `rev` derived into `after` from a
/// function body of `before` (functions with a registered rrule have
/// wrapped pieces and no plan), in the order of the forward sweeps; the
/// values pushed by the replay function of a checkpointed loop are listed
/// under that function.
fn listings(
    before: &Module,
    after: &Module,
    rev: &Reverse<'_>,
    registry: &Registry,
) -> Vec<TapeListing> {
    let mut out = Vec::new();
    for p in before.func_ids() {
        let Some((fwd, _)) = rev.cached(FuncRef::User(p)) else {
            continue;
        };
        let Some(func) = after.get(fwd) else { continue };
        if registry
            .function_rrule_in(before, &before[p].name)
            .is_some()
        {
            continue;
        }
        let plan = tape_plan_scheduled(
            before,
            registry,
            p,
            rev.tape_limit(),
            rev.checkpoint_schedule(),
        );
        let Ok(plan) = plan else {
            out.push(listing(
                after,
                fwd,
                func.name.clone(),
                Err(plan.err().map(|e| e.to_string()).unwrap_or_default()),
                |_, _| true,
            ));
            continue;
        };
        let lines = plan.lines();
        let fwd_text: String = lines
            .iter()
            .filter(|(by, _)| by.is_none())
            .map(|(_, line)| format!("{line}\n"))
            .collect();
        // The plan names values by a derivation of its own: check that each
        // name is the same value here.
        out.push(listing(
            after,
            fwd,
            func.name.clone(),
            Ok(fwd_text),
            |values, _| {
                plan.saves()
                    .iter()
                    .filter(|s| s.replay.is_none())
                    .all(|save| {
                        save.name
                            .as_ref()
                            .is_none_or(|name| values.get(name) == Some(&plan.shown_save(save)))
                    })
            },
        ));
        let mut replays: Vec<&str> = Vec::new();
        for (by, _) in &lines {
            if let Some(name) = by
                && !replays.contains(&name.as_str())
            {
                replays.push(name);
            }
        }
        for name in replays {
            let Some(id) = after.by_name(name) else {
                continue;
            };
            let text: String = lines
                .iter()
                .filter(|(by, _)| by.as_deref() == Some(name))
                .map(|(_, line)| format!("{line}\n"))
                .collect();
            out.push(listing(
                after,
                id,
                name.to_string(),
                Ok(text),
                |values, _| {
                    plan.saves()
                        .iter()
                        .filter_map(|s| s.replay.as_ref())
                        .filter(|r| r.name == name)
                        .all(|r| {
                            r.value_name
                                .as_ref()
                                .is_none_or(|n| values.get(n) == Some(&r.value))
                        })
                },
            ));
        }
    }
    out.sort_by_key(|t| t.fwd);
    out
}

/// The tape listing of function `id` (called `name`) of `after`, with the
/// plan's `text` and whether its names are `after`'s (`same_names`, given
/// the values of `after` by printed name).
fn listing(
    after: &Module,
    id: FuncId,
    name: String,
    text: Result<String, String>,
    same_names: impl Fn(&HashMap<String, Value>, &Module) -> bool,
) -> TapeListing {
    let values: HashMap<String, Value> = printed_names(after, id)
        .into_iter()
        .map(|(v, name)| (name, v))
        .collect();
    let same_names = text.is_ok() && same_names(&values, after);
    TapeListing {
        fwd: id,
        name,
        text,
        values,
        tapes: pushed_types(after, id),
        pushes: pushes_by_value(after, id),
        same_names,
    }
}

/// The `push` statements of function `f` of `m` (those of its layout), in
/// layout order, with the operand each pushes.
fn pushes(m: &Module, f: FuncId) -> Vec<(Inst, Operand)> {
    let Some(func) = m.get(f) else {
        return Vec::new();
    };
    func.layout
        .iter()
        .filter_map(|&b| func.blocks.get(b))
        .flat_map(|data| &data.insts)
        .filter_map(|&inst| match &func.insts.get(inst)?.kind {
            InstKind::Prim {
                prim: Prim::Push,
                args,
            } => Some((inst, *args.first()?)),
            _ => None,
        })
        .collect()
}

/// The types (printed) of the tapes function `f` of `m` pushes to.
fn pushed_types(m: &Module, f: FuncId) -> BTreeSet<String> {
    let Some(func) = m.get(f) else {
        return BTreeSet::new();
    };
    pushes(m, f)
        .iter()
        .filter_map(|(_, op)| func.operand_type(op, m))
        .map(|ty| ty.to_string())
        .collect()
}

/// The `push` statements of function `f` of `m` by the value they push.
fn pushes_by_value(m: &Module, f: FuncId) -> HashMap<Value, Vec<Inst>> {
    let mut out: HashMap<Value, Vec<Inst>> = HashMap::new();
    for (inst, op) in pushes(m, f) {
        if let Operand::Value(v) = op {
            out.entry(v).or_default().push(inst);
        }
    }
    out
}

/// The operand of each `push` statement of function `f` of `m`, as printed
/// (`%3`, `1.0`).
fn pushed_operands(m: &Module, f: FuncId) -> HashMap<Inst, String> {
    let live: BTreeSet<Inst> = pushes(m, f).into_iter().map(|(inst, _)| inst).collect();
    func_lines(m, f)
        .into_iter()
        .filter_map(|(line, text)| match line {
            Line::Inst(inst) if live.contains(&inst) => {
                let (_, arg) = text.split_once("push(")?;
                Some((inst, arg.strip_suffix(')')?.to_string()))
            }
            _ => None,
        })
        .collect()
}

/// `line` with every value `%NAME` that `now` knows replaced by what `now`
/// says; other text as is.
fn rename(line: &str, now: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(after.len());
        // A trailing `.` is the text's full stop unless the name has it.
        let token = &after[..len];
        let (name, new) = match now(token) {
            Some(new) => (token, Some(new)),
            None => {
                let name = token.trim_end_matches('.');
                (name, now(name))
            }
        };
        out.push_str(&new.unwrap_or_else(|| format!("%{name}")));
        rest = &after[name.len()..];
    }
    out.push_str(rest);
    out
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

    /// `d/dx powi(x, 2)` is saved: the default schedule folds it into
    /// another value, which the plan then names.
    const POWI: &str = "func @p(%x: f64, %y: f64) -> f64 {\n#1:\n  %1 = call powi(%x, 2) :: f64\n  %2 = call mul(%1, %y) :: f64\n  return %2\n}\n";

    /// The reverse dump of `POWI` under `schedule`: the dump and the id of
    /// `@p.rev.fwd`.
    fn powi(schedule: &str) -> Result<(Dump, FuncId), String> {
        let m = irad_ir::text::parse_module(POWI).map_err(|e| e.to_string())?;
        let schedule = crate::optimise::parse_schedule(schedule).map_err(|e| e.to_string())?;
        let req = DumpRequest {
            mode: Some(DumpMode::Reverse),
            schedule: Some(&schedule),
            ..DumpRequest::default()
        };
        let dump = dump(&m, &req, &Registry::new()).map_err(|e| e.to_string())?;
        let module = &dump.sections.last().ok_or("no section")?.module;
        let fwd = module.by_name("p.rev.fwd").ok_or("no @p.rev.fwd")?;
        Ok((dump, fwd))
    }

    /// Each value line of `comments` names a value `text` pushes.
    fn pushed_as_said(comments: &str, text: &str) -> bool {
        comments
            .lines()
            .skip(1)
            .filter_map(|l| l.strip_prefix("#   %")?.split_once(':'))
            .all(|(name, _)| text.contains(&format!("call push(%{name})")))
    }

    #[test]
    fn the_tape_comments_name_values_as_the_scheduled_code_does() -> Result<(), String> {
        let mut lines = Vec::new();
        for schedule in ["id", crate::optimise::DEFAULT_SCHEDULE] {
            let (dump, fwd) = powi(schedule)?;
            let module = &dump.sections.last().ok_or("no section")?.module;
            let comments = dump.tape_comments(module, fwd).ok_or("no comments")?;
            let text = irad_ir::text::print_func(module, fwd);
            assert!(
                comments.starts_with("# tape of @p.rev.fwd:\n"),
                "{comments}"
            );
            assert_eq!(comments.lines().count(), 4, "{comments}");
            assert!(pushed_as_said(&comments, &text), "{comments}\n{text}");
            assert!(!comments.contains("separate derivation"), "{comments}");
            lines.push(comments.clone());
            // Only forward sweeps have a tape.
            let back = module.by_name("p.rev.back").ok_or("no @p.rev.back")?;
            assert_eq!(dump.tape_comments(module, back), None);
        }
        // The schedule renamed a value saved.
        assert_ne!(lines[0], lines[1]);
        Ok(())
    }

    /// When the optimiser removes the pushes of a value (here by hand, as
    /// the `dce` of a dead tape would), its line says so, and so does a line
    /// per tape emptied of every push.
    #[test]
    fn the_tape_comments_say_when_pushes_are_gone() -> Result<(), String> {
        let (dump, fwd) = powi("id")?;
        let mut module = dump.sections.last().ok_or("no section")?.module.clone();
        let gone: Vec<Inst> = pushes(&module, fwd).into_iter().map(|(i, _)| i).collect();
        let func = &mut module[fwd];
        for b in func.layout.clone() {
            func.blocks[b].insts.retain(|i| !gone.contains(i));
        }
        let comments = dump.tape_comments(&module, fwd).ok_or("no comments")?;
        assert_eq!(
            comments
                .matches("(no longer pushed: the optimiser removed its pushes)")
                .count(),
            3,
            "{comments}"
        );
        assert!(
            comments.ends_with("#   (the optimiser removed every push of f64 from @p.rev.fwd: that tape is not recorded)\n"),
            "{comments}"
        );
        // A module without the forward sweep gets none.
        let input = irad_ir::text::parse_module(POWI).map_err(|e| e.to_string())?;
        assert_eq!(dump.tape_comments(&input, fwd), None);
        Ok(())
    }
}
