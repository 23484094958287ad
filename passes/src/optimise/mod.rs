//! The optimiser: rewrite rules combined by strategies (docs/optimise.md).
//! A schedule is data ([`Strategy`], with a text form read by
//! [`parse_schedule`]); [`optimise`] runs one over the functions in scope of
//! a module, viewed as a tree: the module, its functions, their blocks (in
//! layout order), their statements (phis included, in order).
//!
//! Semantics (Visser's combinators as in ELEVATE, with two documented
//! choices): every step succeeds or fails at a position; a rule, group or
//! pass succeeds exactly when it rewrites something, so `repeat` and
//! `normalise` terminate; `id` succeeds without a change. Failure does not
//! undo what succeeded before it (every rewrite keeps the meaning, so keeping
//! it is safe): it only steers `<+`, `;`, `repeat` and the traversals.
//! `repeat(s)` also stops when an iteration succeeds without changing
//! anything. `normalise(s)` is computed by sweeps (see [`Strategy::Normalise`]
//! and docs/optimise.md) rather than by restarting at the root after every
//! rewrite, with the same guarantee at the end: no position where `s`
//! rewrites anything is left.
//!
//! Replacing a statement's result by an operand does not rescan the function:
//! the replacement goes into a per-function substitution ([`Subst`]) applied
//! to each statement's operands when a rule visits it, and to the whole
//! function once when a pass needs it, before verifying, and at the end.
//!
//! Assumes a verified module. Guarantees: the module verifies after every
//! top-level step (checked when [`OptOptions::verify`], the default in debug
//! builds and tests); only functions in scope are rewritten, except by the
//! whole-module tape part of `dce`; `repeat` and `normalise` report
//! [`OptError::Fuel`] rather than run for ever. Never panics on a verified
//! module or on any schedule text.

pub mod parse;
pub mod rules;
pub mod strategy;

pub use parse::parse_schedule;
pub use strategy::Strategy;

use irad_ir::entity::EntityRef;
use irad_ir::verify::{VerifyError, verify_module};
use irad_ir::{Block, Func, FuncId, Inst, InstKind, Module, Operand, Prim, Terminator, Value};
use rules::{RuleKind, StmtCtx};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::collections::BTreeMap;
use std::rc::Rc;

/// The schedule `irad grad`, `irad emit` and `irad bench` run on the derived
/// functions (docs/optimise.md, "The default schedule", says why each step is
/// there).
pub const DEFAULT_SCHEDULE: &str = "normalise(dce <+ fold <+ identities <+ copyprop <+ phi-simplify <+ branch-fold); try(memfwd); try(cse); try(licm)";

/// How many iterations one `repeat` (and how many sweeps one `normalise`)
/// may run before [`OptError::Fuel`], unless [`OptOptions::fuel`] says
/// otherwise.
pub const DEFAULT_FUEL: u64 = 100_000;

/// The default schedule, parsed.
pub fn default_schedule() -> Strategy {
    // A unit test checks that it parses.
    parse_schedule(DEFAULT_SCHEDULE).unwrap_or(Strategy::Id)
}

/// How [`optimise`] runs.
#[derive(Clone, Debug)]
pub struct OptOptions {
    /// Iterations one `repeat`, sweeps one `normalise`, may run.
    pub fuel: u64,
    /// Verify the input and the module after every top-level step.
    pub verify: bool,
    /// Keep a copy of the module after every top-level step.
    pub record: bool,
}

impl Default for OptOptions {
    /// [`DEFAULT_FUEL`], verification on in debug builds, recording off.
    fn default() -> OptOptions {
        OptOptions {
            fuel: DEFAULT_FUEL,
            verify: cfg!(debug_assertions),
            record: false,
        }
    }
}

/// Why a schedule could not be read or run.
#[derive(Debug, thiserror::Error)]
pub enum OptError {
    /// The schedule text is malformed; printed as an error of the pseudo-file
    /// `<schedule>`.
    #[error("<schedule>:{line}:{col}: error: {msg}")]
    Parse {
        /// The line (from 1).
        line: u32,
        /// The column (from 1, in characters).
        col: u32,
        /// What is wrong.
        msg: String,
    },
    /// A `repeat` or `normalise` used up its fuel.
    #[error("schedule step `{step}` did not settle within its fuel of {fuel} iterations")]
    Fuel {
        /// The step, printed.
        step: String,
        /// The fuel it had.
        fuel: u64,
    },
    /// The module handed to the optimiser does not verify.
    #[error("the input does not verify ({} error(s)); the optimiser needs verified IR", errors.len())]
    Input {
        /// The verifier's errors.
        errors: Vec<VerifyError>,
    },
    /// A step left a module that does not verify: a bug in one of its rules.
    #[error("schedule step `{step}` produced IR that does not verify ({} error(s))", errors.len())]
    Verify {
        /// The step, printed.
        step: String,
        /// The verifier's errors.
        errors: Vec<VerifyError>,
    },
}

/// The module after one top-level step, for `irad dump --schedule`.
#[derive(Clone, Debug)]
pub struct OptSnapshot {
    /// The step, printed.
    pub step: String,
    /// The rewrites it made, by rule name (passes count once per run that
    /// changed something).
    pub rewrites: Vec<(&'static str, usize)>,
    /// The module after it.
    pub module: Module,
}

/// What [`optimise`] did.
#[derive(Clone, Debug, Default)]
pub struct OptReport {
    /// Whether the schedule succeeded (its failure is not an error: the
    /// module keeps the rewrites made).
    pub ok: bool,
    /// The rewrites made, by rule name.
    pub rewrites: Vec<(&'static str, usize)>,
    /// With [`OptOptions::record`], the module after each top-level step.
    pub snapshots: Vec<OptSnapshot>,
}

/// Runs `schedule` over the functions `scope` of `m` (every function when
/// `None`), top-level step by step (the items of a top-level sequence); see
/// the module documentation.
pub fn optimise(
    m: &mut Module,
    schedule: &Strategy,
    scope: Option<&[FuncId]>,
    opts: &OptOptions,
) -> Result<OptReport, OptError> {
    optimise_gated(m, schedule, scope, opts, &mut |_| true)
}

/// [`optimise`], asking `admit` before each top-level step whether to run
/// it (how the pass manager's bisect limit numbers the steps one by one). A
/// step it refuses is skipped as `id` would be: nothing changes, nothing is
/// verified or recorded, and the schedule goes on with the next step. After
/// a step that fails no step is offered.
pub fn optimise_gated(
    m: &mut Module,
    schedule: &Strategy,
    scope: Option<&[FuncId]>,
    opts: &OptOptions,
    admit: &mut dyn FnMut(&Strategy) -> bool,
) -> Result<OptReport, OptError> {
    if opts.verify {
        verify_module(m).map_err(|errors| OptError::Input { errors })?;
    }
    let scope: Vec<FuncId> = match scope {
        Some(fs) => fs.iter().copied().filter(|&f| m.get(f).is_some()).collect(),
        None => m.func_ids().collect(),
    };
    let mut eng = Engine {
        m,
        choices: HashMap::default(),
        scope,
        states: Vec::new(),
        fuel: opts.fuel,
        counts: BTreeMap::new(),
        generation: 0,
        quiet: Vec::new(),
        quiet_at: 0,
        spare: Vec::new(),
    };
    let mut report = OptReport {
        ok: true,
        ..OptReport::default()
    };
    for step in schedule.steps() {
        if !admit(step) {
            continue;
        }
        let before = eng.counts.clone();
        let out = eng.apply(step, At::Module)?;
        eng.flush_all();
        if opts.verify {
            verify_module(eng.m).map_err(|errors| OptError::Verify {
                step: step.to_string(),
                errors,
            })?;
        }
        if opts.record {
            let rewrites = eng
                .counts
                .iter()
                .filter_map(|(&name, &n)| {
                    let d = n - before.get(name).copied().unwrap_or(0);
                    (d > 0).then_some((name, d))
                })
                .collect();
            report.snapshots.push(OptSnapshot {
                step: step.to_string(),
                rewrites,
                module: eng.m.clone(),
            });
        }
        if !out.ok {
            report.ok = false;
            break;
        }
    }
    report.rewrites = eng.counts.into_iter().collect();
    Ok(report)
}

/// Pending replacements of one function: `resolve` maps a replaced value to
/// what replaces it (following chains), anything else to itself.
#[derive(Clone, Debug, Default)]
pub struct Subst {
    map: Vec<Option<Operand>>,
    len: usize,
}

impl Subst {
    /// What `op` stands for now.
    pub fn resolve(&self, mut op: Operand) -> Operand {
        // Each step goes to a value defined earlier in a dominance order, so
        // chains end; the bound guards against our own bugs.
        for _ in 0..=self.map.len() {
            match op {
                Operand::Value(v) => match self.map.get(v.index()).copied().flatten() {
                    Some(next) => op = next,
                    None => return op,
                },
                Operand::Const(_) => return op,
            }
        }
        op
    }

    fn set(&mut self, v: Value, op: Operand) {
        let i = v.index();
        if i >= self.map.len() {
            self.map.resize(i + 1, None);
        }
        self.map[i] = Some(op);
        self.len += 1;
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Applies `f` to every operand of the layout's statements and terminators of
/// `func`, after dropping the statements in `removed` from their blocks.
/// A dynamic call's callee stays a value (a replacement by a constant is
/// refused before it is made).
pub(crate) fn apply_to_operands(
    func: &mut Func,
    removed: &HashSet<Inst>,
    mut f: impl FnMut(&mut Operand),
) {
    for bi in 0..func.layout.len() {
        let block = func.layout[bi];
        if !removed.is_empty() {
            func.blocks[block].insts.retain(|i| !removed.contains(i));
        }
        for ii in 0..func.blocks[block].insts.len() {
            let inst = func.blocks[block].insts[ii];
            operands_mut(&mut func.insts[inst].kind, &mut f);
        }
        match &mut func.blocks[block].term {
            Some(Terminator::GotoIfNot { cond: op, .. })
            | Some(Terminator::Switch { index: op, .. })
            | Some(Terminator::Return(op)) => f(op),
            Some(Terminator::Goto(_)) | None => {}
        }
    }
}

fn operands_mut(kind: &mut InstKind, f: &mut impl FnMut(&mut Operand)) {
    match kind {
        InstKind::Prim { args, .. } | InstKind::Invoke { args, .. } => args.iter_mut().for_each(f),
        InstKind::CallValue { callee, args } => {
            let mut op = Operand::Value(*callee);
            f(&mut op);
            if let Operand::Value(v) = op {
                *callee = v;
            }
            args.iter_mut().for_each(f);
        }
        InstKind::Phi { entries } => entries.iter_mut().for_each(|(_, op)| f(op)),
    }
}

/// A position of the module tree.
#[derive(Copy, Clone, Debug)]
enum At {
    Module,
    Func(FuncId),
    Block(FuncId, Block),
    Stmt(FuncId, Inst),
}

/// The outcome of a strategy at a position: whether it succeeded, and
/// whether anything changed (also when it failed: failure does not undo).
#[derive(Copy, Clone, Debug)]
struct Out {
    ok: bool,
    changed: bool,
}

impl Out {
    const FAIL: Out = Out {
        ok: false,
        changed: false,
    };
}

/// Per-function state of a run: pending replacements, statements removed
/// (still listed by their blocks until the next flush), and the values used
/// as callees of dynamic calls (which a constant cannot replace).
#[derive(Default)]
struct FuncState {
    subst: Subst,
    removed: HashSet<Inst>,
    callees: HashSet<Value>,
}

struct Engine<'m> {
    m: &'m mut Module,
    /// For each choice of rules met at a statement (by address: the
    /// schedule outlives the run), its statement rules in order.
    choices: HashMap<*const Strategy, Rc<StmtRules>>,
    scope: Vec<FuncId>,
    /// Per function (by index), its state once a rule has visited it.
    states: Vec<Option<FuncState>>,
    fuel: u64,
    counts: BTreeMap<&'static str, usize>,
    /// How many rewrites the run has made: the module is unchanged while
    /// this is.
    generation: u64,
    /// The passes that ran without changing anything at `generation`
    /// [`Engine::quiet_at`], by name, and where: `None` for the module
    /// position (which covers every function in scope). See
    /// [`Engine::is_quiet`].
    quiet: Vec<(&'static str, Option<FuncId>)>,
    /// The generation `quiet` holds for.
    quiet_at: u64,
    /// Lists of children no longer in use ([`Engine::children`]): a sweep
    /// lists the statements of every block it enters, and a new list each
    /// time was an allocation per block and sweep.
    spare: Vec<Vec<At>>,
}

impl Engine<'_> {
    fn apply(&mut self, s: &Strategy, at: At) -> Result<Out, OptError> {
        Ok(match s {
            Strategy::Id => Out {
                ok: true,
                changed: false,
            },
            Strategy::Fail => Out::FAIL,
            Strategy::Rule(rule) => self.rule(rule, at),
            Strategy::Seq(items) => {
                let mut changed = false;
                for item in items {
                    let out = self.apply(item, at)?;
                    changed |= out.changed;
                    if !out.ok {
                        return Ok(Out { ok: false, changed });
                    }
                }
                Out { ok: true, changed }
            }
            Strategy::Choice(items)
                if matches!(at, At::Stmt(..))
                    && items.iter().all(|i| matches!(i, Strategy::Rule(_))) =>
            {
                let At::Stmt(f, inst) = at else {
                    return Ok(Out::FAIL);
                };
                let key: *const Strategy = s;
                let list = match self.choices.get(&key) {
                    Some(list) => Rc::clone(list),
                    None => {
                        let list: Rc<StmtRules> = Rc::from(stmt_rules_of(items));
                        self.choices.insert(key, Rc::clone(&list));
                        list
                    }
                };
                self.stmt_rules(list.iter().copied(), f, inst)
            }
            Strategy::Choice(items) => {
                let mut changed = false;
                for item in items {
                    let out = self.apply(item, at)?;
                    changed |= out.changed;
                    if out.ok {
                        return Ok(Out { ok: true, changed });
                    }
                }
                Out { ok: false, changed }
            }
            Strategy::Try(inner) => {
                let out = self.apply(inner, at)?;
                Out {
                    ok: true,
                    changed: out.changed,
                }
            }
            Strategy::Repeat(inner) => {
                let mut changed = false;
                let mut n = 0u64;
                loop {
                    let out = self.apply(inner, at)?;
                    changed |= out.changed;
                    if !out.ok || !out.changed {
                        break Out { ok: true, changed };
                    }
                    n += 1;
                    if n >= self.fuel {
                        return Err(self.out_of_fuel(s));
                    }
                }
            }
            Strategy::One(inner) => {
                let (changed, stop) = self.each_child(at, |e, child| {
                    let out = e.apply(inner, child)?;
                    Ok((out.changed, out.ok))
                })?;
                Out { ok: stop, changed }
            }
            Strategy::All(inner) => {
                let (changed, stop) = self.each_child(at, |e, child| {
                    let out = e.apply(inner, child)?;
                    Ok((out.changed, !out.ok))
                })?;
                Out { ok: !stop, changed }
            }
            Strategy::TopDown(inner) => {
                let out = self.apply(inner, at)?;
                if out.ok {
                    return Ok(out);
                }
                let (changed, stop) = self.each_child(at, |e, child| {
                    let o = e.apply(s, child)?;
                    Ok((o.changed, o.ok))
                })?;
                Out {
                    ok: stop,
                    changed: out.changed | changed,
                }
            }
            Strategy::BottomUp(inner) => {
                let (changed, stop) = self.each_child(at, |e, child| {
                    let o = e.apply(s, child)?;
                    Ok((o.changed, o.ok))
                })?;
                if stop {
                    return Ok(Out { ok: true, changed });
                }
                let out = self.apply(inner, at)?;
                Out {
                    ok: out.ok,
                    changed: changed | out.changed,
                }
            }
            Strategy::Normalise(inner) => {
                let mut changed = false;
                let mut sweeps = 0u64;
                loop {
                    sweeps += 1;
                    if sweeps > self.fuel {
                        return Err(self.out_of_fuel(s));
                    }
                    let swept = self.sweep(inner, at)?;
                    changed |= swept;
                    if !swept {
                        break Out { ok: true, changed };
                    }
                }
            }
        })
    }

    fn out_of_fuel(&self, s: &Strategy) -> OptError {
        OptError::Fuel {
            step: s.to_string(),
            fuel: self.fuel,
        }
    }

    /// One sweep of `normalise(s)`: `s` once at `at`, then a sweep of each
    /// child (listed after `s` ran there), in pre-order. Returns whether
    /// anything changed.
    fn sweep(&mut self, s: &Strategy, at: At) -> Result<bool, OptError> {
        let changed = self.apply(s, at)?.changed;
        let (swept, _) = self.each_child(at, |e, child| Ok((e.sweep(s, child)?, false)))?;
        Ok(changed | swept)
    }

    /// Runs `f` on each child of `at` (listed when it starts) until `f`
    /// says stop: whether any call changed something, and whether one
    /// stopped. `f` returns (changed, stop).
    fn each_child(
        &mut self,
        at: At,
        mut f: impl FnMut(&mut Self, At) -> Result<(bool, bool), OptError>,
    ) -> Result<(bool, bool), OptError> {
        let kids = self.children(at);
        let mut changed = false;
        let mut stop = false;
        let mut res = Ok(());
        for &child in &kids {
            match f(self, child) {
                Ok((c, s)) => {
                    changed |= c;
                    if s {
                        stop = true;
                        break;
                    }
                }
                Err(e) => {
                    res = Err(e);
                    break;
                }
            }
        }
        self.spare.push(kids);
        res.map(|()| (changed, stop))
    }

    /// The children of a position, in order; statements already removed are
    /// not listed.
    /// The list is one of [`Engine::spare`]'s when there is one.
    fn children(&mut self, at: At) -> Vec<At> {
        let mut out = self.spare.pop().unwrap_or_default();
        out.clear();
        match at {
            At::Module => out.extend(self.scope.iter().map(|&f| At::Func(f))),
            At::Func(f) => out.extend(self.m[f].layout.iter().map(|&b| At::Block(f, b))),
            At::Block(f, b) => {
                let removed = self
                    .states
                    .get(f.index())
                    .and_then(|s| s.as_ref())
                    .map(|s| &s.removed);
                out.extend(
                    self.m[f].blocks[b]
                        .insts
                        .iter()
                        .filter(|i| removed.is_none_or(|r| !r.contains(i)))
                        .map(|&i| At::Stmt(f, i)),
                );
            }
            At::Stmt(..) => {}
        }
        out
    }

    /// Makes sure `f` has a state (read it from `self.states[f.index()]`).
    fn ensure_state(&mut self, f: FuncId) {
        let i = f.index();
        if self.states.len() <= i {
            self.states.resize_with(i + 1, || None);
        }
        let func = &self.m[f];
        if let Some(slot) = self.states.get_mut(i) {
            slot.get_or_insert_with(|| FuncState {
                callees: callees(func),
                ..FuncState::default()
            });
        }
    }

    /// The rule, group or pass `rule` at `at`.
    fn rule(&mut self, rule: &'static rules::Rule, at: At) -> Out {
        match rule.kind {
            RuleKind::Group(_) => match (rules::resolved(rule.name), at) {
                (Some((_, members)), At::Stmt(f, inst)) => self.stmt_group(members, f, inst),
                (Some((_, members)), _) => self.apply_rule(rule, members, at),
                (None, _) => Out::FAIL,
            },
            _ => self.apply_rule(rule, &[], at),
        }
    }

    /// `rule` (a group: the first of `members` that succeeds) at `at`.
    fn apply_rule(
        &mut self,
        rule: &'static rules::Rule,
        members: &[&'static rules::Rule],
        at: At,
    ) -> Out {
        let name = rule.name;
        match (rule.kind, at) {
            (RuleKind::Group(_), _) => {
                for m in members {
                    let out = self.apply_rule(m, &[], at);
                    if out.ok {
                        return out;
                    }
                }
                Out::FAIL
            }
            (RuleKind::Stmt(run), At::Stmt(f, inst)) => {
                self.stmt_rules(std::iter::once((name, run, rule.at)), f, inst)
            }
            (RuleKind::Block(run), At::Block(f, b)) => {
                self.ensure_state(f);
                let Some(Some(state)) = self.states.get(f.index()) else {
                    return Out::FAIL;
                };
                let func = &mut self.m[f];
                match &mut func.blocks[b].term {
                    Some(Terminator::GotoIfNot { cond: op, .. })
                    | Some(Terminator::Switch { index: op, .. })
                    | Some(Terminator::Return(op)) => *op = state.subst.resolve(*op),
                    Some(Terminator::Goto(_)) | None => {}
                }
                let changed = run(func, b);
                self.count(name, changed)
            }
            (RuleKind::Pass(run), At::Module) => {
                if self.is_quiet(name, None) {
                    return Out::FAIL;
                }
                self.flush_all();
                let scope = self.scope.clone();
                let changed = run(self.m, &scope, true);
                if changed {
                    self.states.clear();
                } else {
                    self.set_quiet(name, None);
                }
                self.count(name, changed)
            }
            (RuleKind::Pass(run), At::Func(f)) => {
                if self.is_quiet(name, Some(f)) {
                    return Out::FAIL;
                }
                self.flush(f);
                let changed = run(self.m, &[f], false);
                if changed && let Some(slot) = self.states.get_mut(f.index()) {
                    *slot = None;
                } else if !changed {
                    self.set_quiet(name, Some(f));
                }
                self.count(name, changed)
            }
            _ => Out::FAIL,
        }
    }

    /// Whether the pass `name` is known to change nothing at the function
    /// `at` (`None`: the module position) because it changed nothing there,
    /// or at the module position, and nothing was rewritten since. Sound
    /// because passes are deterministic and report every change, and one
    /// that changes nothing at the module position changes nothing at any
    /// function in scope: all but `dce` run the same function-by-function
    /// work at both positions, and `dce` at the module position removes a
    /// superset of what it removes at a function (more statements may go,
    /// so fewer are live). The sweeps of `normalise` meet a pass first at the
    /// module position, then at each function (function positions are
    /// those of the functions in scope): when the module is already
    /// clean, this saves a whole-function walk per function and sweep.
    fn is_quiet(&self, name: &'static str, at: Option<FuncId>) -> bool {
        self.quiet_at == self.generation
            && self
                .quiet
                .iter()
                .any(|&(n, w)| n == name && (w.is_none() || w == at))
    }

    /// Records that the pass `name` changed nothing at `at`.
    fn set_quiet(&mut self, name: &'static str, at: Option<FuncId>) {
        if self.quiet_at != self.generation {
            self.quiet.clear();
            self.quiet_at = self.generation;
        }
        self.quiet.push((name, at));
    }

    fn count(&mut self, name: &'static str, changed: bool) -> Out {
        if changed {
            *self.counts.entry(name).or_insert(0) += 1;
            self.generation += 1;
        }
        Out {
            ok: changed,
            changed,
        }
    }

    /// A group at a statement: its first statement rule that applies (a
    /// member of another kind fails there, as [`Engine::apply_rule`] would
    /// have it). The operands are resolved once for all members: the
    /// substitution changes only when a member succeeds, and then the group
    /// is done.
    fn stmt_group(&mut self, members: &[&'static rules::Rule], f: FuncId, inst: Inst) -> Out {
        self.stmt_rules(members.iter().filter_map(|m| tried(m)), f, inst)
    }

    /// The first of `rules` that rewrites the statement `inst` of `f` (a
    /// rule for calls of another primitive is not tried).
    fn stmt_rules(&mut self, mut rules: impl Iterator<Item = Tried>, f: FuncId, inst: Inst) -> Out {
        self.ensure_state(f);
        let Some(Some(state)) = self.states.get_mut(f.index()) else {
            return Out::FAIL;
        };
        if state.removed.contains(&inst) {
            return Out::FAIL;
        }
        let func = &mut self.m[f];
        let Some(result) = func.insts[inst].result else {
            return Out::FAIL;
        };
        let subst = &state.subst;
        operands_mut(&mut func.insts[inst].kind, &mut |op| {
            *op = subst.resolve(*op)
        });
        let prim = match &func.insts[inst].kind {
            InstKind::Prim { prim, .. } => Some(*prim),
            _ => None,
        };
        let cx = StmtCtx {
            func: &*func,
            subst,
        };
        let Some((name, new)) = rules.find_map(|(name, run, at)| {
            if at.is_some_and(|p| Some(p) != prim) {
                return None;
            }
            run(&cx, inst).and_then(|new| {
                let usable = new != Operand::Value(result)
                    // A dynamic call needs a value to call through.
                    && !(state.callees.contains(&result) && matches!(new, Operand::Const(_)));
                usable.then_some((name, new))
            })
        }) else {
            return Out::FAIL;
        };
        if state.callees.contains(&result)
            && let Operand::Value(v) = new
        {
            state.callees.insert(v);
        }
        debug_assert_eq!(
            func.operand_type(&new, &Module::new())
                .or_else(|| match new {
                    Operand::Const(_) => Some(func.values[result].ty.clone()),
                    Operand::Value(_) => None,
                }),
            Some(func.values[result].ty.clone()),
            "rule {name} changes a type"
        );
        state.subst.set(result, new);
        state.removed.insert(inst);
        self.count(name, true)
    }

    /// Writes the pending replacements of `f` into its statements and drops
    /// its removed statements.
    fn flush(&mut self, f: FuncId) {
        let Some(Some(state)) = self.states.get_mut(f.index()) else {
            return;
        };
        if state.subst.is_empty() && state.removed.is_empty() {
            return;
        }
        let subst = std::mem::take(&mut state.subst);
        let removed = std::mem::take(&mut state.removed);
        apply_to_operands(&mut self.m[f], &removed, |op| *op = subst.resolve(*op));
    }

    fn flush_all(&mut self) {
        for i in 0..self.states.len() {
            self.flush(FuncId::from_u32(u32::try_from(i).unwrap_or(u32::MAX)));
        }
    }
}

/// A statement rule as the engine tries it: its name, what it runs, and the
/// primitive it is limited to ([`rules::Rule::at`]).
type Tried = (&'static str, rules::StmtRule, Option<Prim>);

/// Statement rules, in the order they are tried.
type StmtRules = [Tried];

/// `rule` as the engine tries it, if it is a statement rule.
fn tried(rule: &'static rules::Rule) -> Option<Tried> {
    match rule.kind {
        RuleKind::Stmt(run) => Some((rule.name, run, rule.at)),
        _ => None,
    }
}

/// The statement rules of a choice of rules, in order (a group's members in
/// place): at a statement the others fail without effect, so the choice
/// there is the first of these that applies.
fn stmt_rules_of(items: &[Strategy]) -> Vec<Tried> {
    let mut list = Vec::new();
    for item in items {
        let Strategy::Rule(rule) = item else {
            continue;
        };
        match rule.kind {
            RuleKind::Stmt(_) => list.extend(tried(rule)),
            RuleKind::Group(_) => {
                if let Some((_, members)) = rules::resolved(rule.name) {
                    list.extend(members.iter().filter_map(|m| tried(m)));
                }
            }
            RuleKind::Block(_) | RuleKind::Pass(_) => {}
        }
    }
    list
}

/// The values called through by dynamic calls of `func`.
fn callees(func: &Func) -> HashSet<Value> {
    func.layout
        .iter()
        .flat_map(|&b| func.blocks[b].insts.iter())
        .filter_map(|&inst| match &func.insts[inst].kind {
            InstKind::CallValue { callee, .. } => Some(*callee),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_schedule_parses_and_prints_back() {
        let s = parse_schedule(DEFAULT_SCHEDULE);
        assert!(s.is_ok(), "{s:?}");
        assert_eq!(default_schedule().to_string(), DEFAULT_SCHEDULE);
    }
}
