//! Reverse mode (DESIGN.md, Reverse mode): the forward sweep and pullback of
//! a function, written at block level from its BBCode (see
//! `docs/reverse.md`), and `@f.rev`, value and gradient in one call
//! (SYNTAX.md, "Derived functions and the gradient convention").
//!
//! - [`Reverse`] is the derived-rule cache: the rule pieces `@f.rev.fwd` and
//!   `@f.rev.back` of a function are declared on first request and their
//!   bodies queued, so recursion meets declared pieces and terminates; later
//!   requests return the same pieces. It is also the interpreter's
//!   [`RuleProvider`] for `revfwd`/`revback` of function values met at run
//!   time, building small pieces around the registered rrule of a primitive
//!   or of a function marked primitive.
//! - [`bbcode`]: the block form the transform reads.
//! - [`plan`]: the tape plan, what the forward sweep saves for the pullback
//!   and where it is pushed and popped; [`tape_plan`] returns it for one
//!   function. The transform itself is private: `transform.rs` runs the
//!   steps over a shared context (`ctx.rs`), the forward sweep (`sweep.rs`)
//!   and the pullback (`pullback.rs`).
//! - [`grad`]: value and gradient by running the pieces.
//!
//! The pieces of `f: fn(A...) -> R`:
//! - `@f.rev.fwd(A..., shadows...)`: one `[f64]` shadow per `[f64]` array in
//!   the arguments (depth-first); runs the primal, leaves every array in its
//!   post-primal state, pushes what the pullback needs on the tapes, returns
//!   the result (and, when R holds `[f64]` arrays, their shadows after it in
//!   a tuple);
//! - `@f.rev.back(dy...)`: one f64 per f64 of R outside arrays; pops what the
//!   forward sweep pushed, adds array cotangents into the shadows, restores
//!   every array written, and returns the cotangents of the arguments' f64s
//!   outside arrays (`()` for none, an f64 for one, a tuple otherwise).
//!
//! Assumes verified, normalised modules (the pipeline of `manager`) without
//! dual values. After an error the module may hold partly built pieces:
//! discard both the module and the [`Reverse`].

mod analysis;
pub mod bbcode;
mod checkpoint;
mod choose;
mod ctx;
mod fresh;
mod fresh_fields;
pub mod grad;
mod loops;
mod memory;
mod parallel;
pub mod plan;
mod pullback;
mod sweep;
mod transform;

pub use checkpoint::schedule::{
    CheckpointRule, CheckpointSchedule, LoopChoice, LoopTarget, header_line, header_pos,
};
pub use checkpoint::{CALL_BYTES, INNER_TRIPS, StretchSource};
pub use parallel::PARALLEL_MIN_STMTS;
pub use plan::{
    SkippedLoop, TapePlan, UnboundedHook, UnboundedLoop, tape_plan, tape_plan_limited,
    tape_plan_scheduled,
};

use crate::forward::fresh_derived_name as fresh_name;
use crate::rule_cache::{CacheStats, RuleCache};
use irad_ir::interp::{RuleProvider, RuleProviderError};
use irad_ir::{
    BuildError, FnType, FuncBuilder, FuncId, FuncRef, Location, Module, Operand, Prim, Scalar,
    Type, Value,
};
use irad_rules::{Callee, PullbackCall, Registry, RevArg, RevCall};
use rustc_hash::FxHashMap as HashMap;

ad_error!(
    /// A reverse-mode failure: what and where (in the primal).
    ReverseError
);

/// The types of the rule pieces of a function of type `sig`: forward sweep,
/// pullback ([`Type::rev_fwd_fn`], [`Type::rev_back_fn`]).
pub fn piece_types(sig: &FnType) -> (FnType, FnType) {
    (Type::rev_fwd_fn(sig), Type::rev_back_fn(sig))
}

/// The derived-rule cache of reverse mode.
pub struct Reverse<'r> {
    registry: &'r Registry,
    /// Pieces by callee; variants by (callee, activity of each parameter);
    /// queued bodies: (primal, forward sweep, pullback, which parameters are
    /// active; `None`: all).
    cache: RuleCache<FuncRef, (FuncId, FuncId), Job>,
    /// `@f.rev` functions, by their pieces.
    revs: HashMap<(FuncId, FuncId), FuncId>,
    /// Whether pieces are derived with activity analysis.
    activity: bool,
    /// The tape limit loops are checkpointed under, in bytes.
    tape_limit: Option<u64>,
    /// Per-loop overrides of checkpointing.
    checkpoints: CheckpointSchedule,
    /// The fewest statements of a self-contained primal whose body is
    /// derived on a thread (`parallel.rs`).
    parallel_min_stmts: usize,
    /// What checkpointing knows of the functions primals call, decided once
    /// each (`fresh.rs`).
    call_facts: fresh::CallFacts,
    /// The loops of the bodies derived so far whose records grow with
    /// their iterations against the tape limit or schedule.
    unbounded: Vec<UnboundedLoop>,
    /// Told of each of `unbounded` as it is added.
    on_unbounded: Option<UnboundedHook>,
}

/// A declared pair of pieces whose bodies are still to be built: (primal,
/// forward sweep, pullback, which parameters are active; `None`: all).
type Job = (FuncId, FuncId, FuncId, Option<Vec<bool>>);

impl<'r> Reverse<'r> {
    /// An empty cache whose rules come from `registry`.
    pub fn new(registry: &'r Registry) -> Reverse<'r> {
        Reverse {
            registry,
            cache: RuleCache::new(),
            revs: HashMap::default(),
            activity: true,
            tape_limit: None,
            checkpoints: CheckpointSchedule::default(),
            parallel_min_stmts: PARALLEL_MIN_STMTS,
            call_facts: fresh::CallFacts::default(),
            unbounded: Vec::new(),
            on_unbounded: None,
        }
    }

    /// An empty cache of this one's registry and settings, deriving nothing
    /// on threads of its own (`parallel.rs` derives each body apart in one).
    fn emptied(&self) -> Reverse<'r> {
        Reverse {
            registry: self.registry,
            cache: RuleCache::new(),
            revs: HashMap::default(),
            activity: self.activity,
            tape_limit: self.tape_limit,
            checkpoints: self.checkpoints.clone(),
            parallel_min_stmts: usize::MAX,
            call_facts: self.call_facts.clone(),
            unbounded: Vec::new(),
            on_unbounded: None,
        }
    }

    /// Sets the fewest statements a self-contained primal (only primitives
    /// and phis, naming no function) must have for its pieces to be derived
    /// on a thread when several such bodies are queued together (default
    /// [`PARALLEL_MIN_STMTS`]; `usize::MAX`: never). The pieces are the same
    /// either way (docs/reverse.md, "Pieces derived in parallel").
    pub fn set_parallel_min_stmts(&mut self, n: usize) {
        self.parallel_min_stmts = n;
    }

    /// Sets the tape limit (bytes) for the pieces derived from now on: their
    /// long loops are checkpointed so that one stretch of records takes at
    /// most half of it (docs/reverse.md, "Checkpointing"); `None` (the
    /// default): only loops with a `checkpoint` statement are.
    pub fn set_tape_limit(&mut self, limit: Option<u64>) {
        self.tape_limit = limit;
    }

    /// The tape limit, if any.
    pub fn tape_limit(&self) -> Option<u64> {
        self.tape_limit
    }

    /// Sets the per-loop overrides of checkpointing for the pieces derived
    /// from now on (docs/schedules.md): each loop a rule names is
    /// checkpointed with the rule's stretch, or recorded in full, as a
    /// `checkpoint(n)` statement in it would ask (the rule holds over one).
    pub fn set_checkpoint_schedule(&mut self, schedule: CheckpointSchedule) {
        self.checkpoints = schedule;
    }

    /// The per-loop overrides of checkpointing.
    pub fn checkpoint_schedule(&self) -> &CheckpointSchedule {
        &self.checkpoints
    }

    /// Turns activity analysis ([`crate::activity`]) on (the default) or off
    /// for the pieces derived from now on. Off, every value of a tangent type
    /// gets cotangent work.
    pub fn set_activity(&mut self, on: bool) {
        self.activity = on;
    }

    /// Whether activity analysis is on.
    pub fn activity(&self) -> bool {
        self.activity
    }

    /// The pieces of `f` for a gradient with respect to the parameters in
    /// `wrt` only: those of [`Reverse::rule`] when `wrt` holds every
    /// parameter with a tangent type (or activity analysis is off, or `f` has
    /// a registered rule), otherwise a variant (`@f.rev.fwd.wrt0_2`,
    /// `@f.rev.back.wrt0_2`, same types) that does no cotangent work for
    /// values depending on the other parameters only and returns zero
    /// cotangents for those parameters.
    pub fn rule_wrt(
        &mut self,
        module: &mut Module,
        f: FuncId,
        wrt: &[usize],
    ) -> Result<(FuncId, FuncId), ReverseError> {
        let func = module
            .get(f)
            .ok_or_else(|| ReverseError::new(Location::default(), "invalid function handle"))?;
        let mask = crate::activity::wrt_mask(func, wrt);
        let marked = self
            .registry
            .function_rrule_in(module, &func.name)
            .is_some();
        if !self.activity || marked || mask.iter().all(|&a| a) {
            return self.rule(module, f);
        }
        if let Some(ids) = self.cache.get_variant(FuncRef::User(f), mask.clone()) {
            return Ok(ids);
        }
        let active: Vec<String> = wrt.iter().map(usize::to_string).collect();
        let wrt_suffix = format!("wrt{}", active.join("_"));
        let ids = self.declare_pieces(module, f, Some(mask.clone()), &wrt_suffix)?;
        self.cache.insert_variant(FuncRef::User(f), mask, ids);
        self.drain(module)?;
        Ok(ids)
    }

    /// The registry the rules come from.
    pub fn registry(&self) -> &'r Registry {
        self.registry
    }

    /// How the cache has been used so far.
    pub fn stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// The rule pieces (forward sweep, pullback) of `f`, derived with every
    /// piece they call on first request and added to `module`.
    pub fn rule(
        &mut self,
        module: &mut Module,
        f: FuncId,
    ) -> Result<(FuncId, FuncId), ReverseError> {
        self.rule_of(module, FuncRef::User(f))
    }

    /// Like [`Reverse::rule`] for any function value: a module function or a
    /// primitive with one signature.
    pub fn rule_of(
        &mut self,
        module: &mut Module,
        callee: FuncRef,
    ) -> Result<(FuncId, FuncId), ReverseError> {
        let ids = self.request(module, callee)?;
        self.drain(module)?;
        Ok(ids)
    }

    /// Builds every queued body, then (in debug builds and tests) verifies.
    /// Self-contained bodies queued together are built on threads
    /// (`parallel.rs`).
    fn drain(&mut self, module: &mut Module) -> Result<(), ReverseError> {
        loop {
            let min = self.parallel_min_stmts;
            let apart = |job: &Job| {
                module
                    .get(job.0)
                    .is_some_and(|f| f.insts.len() >= min && parallel::self_contained(f))
            };
            let mut batch = Vec::new();
            while let Some(job) = self.cache.next_job_if(apart) {
                batch.push(job);
            }
            if batch.len() >= 2 {
                parallel::derive_apart(self, module, batch)?;
                continue;
            }
            let Some((primal, fwd, back, mask)) = batch.pop().or_else(|| self.cache.next_job())
            else {
                break;
            };
            transform::derive(self, module, primal, fwd, back, mask.as_deref())?;
        }
        crate::ad_error::verify_derived(module, "a reverse rule").map_err(|msg| ReverseError {
            kind: crate::AdErrorKind::Internal,
            ..ReverseError::new(Location::default(), msg)
        })
    }

    /// The loops of the bodies derived so far that a tape limit or the
    /// checkpoint schedule asked to checkpoint but that are not
    /// checkpointed and record something per iteration, in the order they
    /// were derived, each once: their tape grows with their iterations
    /// (docs/reverse.md, "Which loops"). Rules derived at run time for
    /// calls through function values add theirs as they are derived.
    pub fn unbounded_loops(&self) -> &[UnboundedLoop] {
        &self.unbounded
    }

    /// Takes in the loops of `plan` (the derivation of `primal`) whose
    /// records grow against the request, each once.
    fn note_unbounded(&mut self, primal: &str, skipped: &[SkippedLoop]) {
        for s in skipped.iter().filter(|s| s.grows) {
            self.add_unbounded(UnboundedLoop {
                func: primal.to_string(),
                skipped: s.clone(),
            });
        }
    }

    /// Adds `u` to [`Reverse::unbounded_loops`] unless it is there, and
    /// tells the hook of it.
    fn add_unbounded(&mut self, u: UnboundedLoop) {
        if !self.unbounded.contains(&u) {
            if let Some(hook) = &self.on_unbounded {
                (hook.0)(&u);
            }
            self.unbounded.push(u);
        }
    }

    /// Tells `hook` of each loop [`Reverse::unbounded_loops`] gains from
    /// now on, as it gains it (a cache emptied for a thread of
    /// `parallel.rs` has none: its loops are told when they are merged).
    pub fn set_on_unbounded(&mut self, hook: Option<UnboundedHook>) {
        self.on_unbounded = hook;
    }

    /// The pieces of `callee` if they were built already.
    pub fn cached(&self, callee: FuncRef) -> Option<(FuncId, FuncId)> {
        self.cache.peek(&callee)
    }

    /// `@f.rev`: value and gradient in one call, with SYNTAX.md's gradient
    /// convention. Parameters: the primal's, then one `[f64]` shadow per
    /// `[f64]` array in them (depth-first), then one seed per f64 of the
    /// result outside arrays (one for an f64 result). Result: the tuple of the
    /// value and the cotangents of the arguments' f64s outside arrays, in
    /// order; array gradients are added into the shadows, and every argument
    /// array is back in its entry state.
    pub fn rev(&mut self, module: &mut Module, f: FuncId) -> Result<FuncId, ReverseError> {
        let all: Vec<usize> = (0..module.get(f).map_or(0, |func| func.params.len())).collect();
        self.rev_wrt(module, f, &all)
    }

    /// [`Reverse::rev`] for a gradient with respect to the parameters in
    /// `wrt` only, around the pieces of [`Reverse::rule_wrt`] (`@f.rev` when
    /// those are the pieces of every parameter, `@f.rev.wrt0_2` otherwise);
    /// the cotangents of the other parameters are zero.
    pub fn rev_wrt(
        &mut self,
        module: &mut Module,
        f: FuncId,
        wrt: &[usize],
    ) -> Result<FuncId, ReverseError> {
        let (fwd, back) = self.rule_wrt(module, f, wrt)?;
        if let Some(&id) = self.revs.get(&(fwd, back)) {
            self.cache.count_hit();
            return Ok(id);
        }
        let variant = self.cache.peek(&FuncRef::User(f)) != Some((fwd, back));
        let func = module
            .get(f)
            .ok_or_else(|| ReverseError::new(Location::default(), "invalid function handle"))?;
        let loc = Location {
            func: Some(func.name.as_str().into()),
            pos: func.pos,
            ..Location::default()
        };
        let sig = func.fn_type();
        let mut params: Vec<(Option<String>, Type)> = func
            .params
            .iter()
            .map(|&v| {
                (
                    func.values[v].name.as_deref().map(String::from),
                    func.values[v].ty.clone(),
                )
            })
            .collect();
        let nsh: usize = sig.params.iter().map(Type::shadow_leaves).sum();
        params.extend((0..nsh).map(|_| (None, Type::Array(Scalar::F64))));
        let nseed = Type::cotangent_leaves(&sig.ret);
        params.extend((0..nseed).map(|_| (None, Type::F64)));
        let ncot: usize = sig.params.iter().map(Type::cotangent_leaves).sum();
        let mut ret = vec![sig.ret.clone()];
        ret.extend(std::iter::repeat_n(Type::F64, ncot));
        let name = if variant {
            let active: Vec<String> = wrt.iter().map(usize::to_string).collect();
            fresh_name(module, &func.name, &format!("rev.wrt{}", active.join("_")))
        } else {
            fresh_name(module, &func.name, "rev")
        };
        let pos = func.pos;
        let build = |e: BuildError| ReverseError::new(loc.clone(), e.to_string());
        let id = module
            .declare_func(&name, params, Type::tuple(ret))
            .map_err(build)?;
        module[id].pos = pos;
        let mut b = FuncBuilder::new(module, id).map_err(build)?;
        let entry = b.create_block();
        b.switch_to_block(entry).map_err(build)?;
        let np = sig.params.len();
        let fargs: Vec<Operand> = (0..np + nsh)
            .map(|i| b.param(i).map(Operand::Value))
            .collect::<Result<_, _>>()
            .map_err(build)?;
        let seeds: Vec<Operand> = (np + nsh..np + nsh + nseed)
            .map(|i| b.param(i).map(Operand::Value))
            .collect::<Result<_, _>>()
            .map_err(build)?;
        let r = b.invoke(fwd, &fargs).map_err(build)?;
        let r = r
            .map(Operand::Value)
            .unwrap_or(Operand::Const(irad_ir::Const::Unit));
        let value = if Type::shadow_leaves(&sig.ret) > 0 {
            value_of(&mut b, Prim::Getfield, &[r, Operand::from(0i64)]).map_err(build)?
        } else {
            r
        };
        let g = b.invoke(back, &seeds).map_err(build)?;
        let mut parts = vec![value];
        match (ncot, g) {
            (0, _) => {}
            (1, Some(g)) => parts.push(Operand::Value(g)),
            (_, Some(g)) => {
                for j in 0..ncot {
                    parts.push(
                        value_of(
                            &mut b,
                            Prim::Getfield,
                            &[Operand::Value(g), Operand::from(j as i64)],
                        )
                        .map_err(build)?,
                    );
                }
            }
            (_, None) => {
                return Err(ReverseError::internal(loc, "a pullback without result"));
            }
        }
        let t = value_of(&mut b, Prim::Tuple, &parts).map_err(build)?;
        b.ret(t).map_err(build)?;
        self.revs.insert((fwd, back), id);
        Ok(id)
    }

    /// Declares the pieces of user function `f` (`@f.rev.fwd`, `@f.rev.back`,
    /// with `.suffix` when `suffix` is not empty) and queues their bodies,
    /// derived with the parameters of `mask` active (`None`: all).
    fn declare_pieces(
        &mut self,
        module: &mut Module,
        f: FuncId,
        mask: Option<Vec<bool>>,
        suffix: &str,
    ) -> Result<(FuncId, FuncId), ReverseError> {
        let func = module
            .get(f)
            .ok_or_else(|| ReverseError::new(Location::default(), "invalid function handle"))?;
        let loc = Location {
            func: Some(func.name.as_str().into()),
            pos: func.pos,
            ..Location::default()
        };
        transform::check_supported(func, &loc)?;
        let sig = func.fn_type();
        let name = func.name.clone();
        let pos = func.pos;
        let names: Vec<Option<String>> = func
            .params
            .iter()
            .map(|&v| func.values[v].name.as_deref().map(String::from))
            .collect();
        let (ft, bt) = piece_types(&sig);
        let fparams = ft
            .params
            .iter()
            .enumerate()
            .map(|(i, t)| (names.get(i).cloned().flatten(), t.clone()))
            .collect();
        let bparams = bt.params.iter().map(|t| (None, t.clone())).collect();
        let build = |e: BuildError| ReverseError::new(loc.clone(), e.to_string());
        let piece = |part: &str| {
            if suffix.is_empty() {
                format!("rev.{part}")
            } else {
                format!("rev.{part}.{suffix}")
            }
        };
        let fname = fresh_name(module, &name, &piece("fwd"));
        let fwd = module
            .declare_func(&fname, fparams, ft.ret)
            .map_err(build)?;
        let bname = fresh_name(module, &name, &piece("back"));
        let back = module
            .declare_func(&bname, bparams, bt.ret)
            .map_err(build)?;
        module[fwd].pos = pos;
        module[back].pos = pos;
        self.cache.queue((f, fwd, back, mask));
        Ok((fwd, back))
    }

    /// Finds or declares the pieces of `callee`; a declared body is queued.
    pub(crate) fn request(
        &mut self,
        module: &mut Module,
        callee: FuncRef,
    ) -> Result<(FuncId, FuncId), ReverseError> {
        if let Some(ids) = self.cache.get(&callee) {
            return Ok(ids);
        }
        let ids = match callee {
            FuncRef::User(f) => {
                let func = module.get(f).ok_or_else(|| {
                    ReverseError::new(Location::default(), "invalid function handle")
                })?;
                let loc = Location {
                    func: Some(func.name.as_str().into()),
                    pos: func.pos,
                    ..Location::default()
                };
                let sig = func.fn_type();
                let name = func.name.clone();
                if self.registry.function_rrule_in(module, &name).is_some() {
                    self.cache.count_wrapped();
                    wrap(self.registry, module, Callee::Func(&name), &sig, loc)?
                } else {
                    self.declare_pieces(module, f, None, "")?
                }
            }
            FuncRef::Prim(p) => {
                let Some(Type::Func(sig)) = p.fn_type() else {
                    return Err(ReverseError::new(
                        Location::default(),
                        format!("primitive `{p}` is overloaded and has no function value"),
                    ));
                };
                self.cache.count_wrapped();
                wrap(
                    self.registry,
                    module,
                    Callee::Prim(p),
                    &sig,
                    Location::default(),
                )?
            }
        };
        self.cache.insert(callee, ids);
        Ok(ids)
    }
}

impl RuleProvider for Reverse<'_> {
    fn forward_rule(
        &mut self,
        _module: &mut Module,
        callee: FuncRef,
        _width: irad_ir::Lanes,
    ) -> Result<FuncId, RuleProviderError> {
        Err(RuleProviderError::Unavailable(format!(
            "forward rules are not available while running reverse-mode code (for {callee:?})"
        )))
    }

    fn reverse_rule(
        &mut self,
        module: &mut Module,
        callee: FuncRef,
    ) -> Result<(FuncId, FuncId), RuleProviderError> {
        self.rule_of(module, callee).map_err(Into::into)
    }
}

fn value_of(b: &mut FuncBuilder<'_>, prim: Prim, args: &[Operand]) -> Result<Operand, BuildError> {
    Ok(b.prim(prim, args)?
        .map(Operand::Value)
        .unwrap_or(Operand::Const(irad_ir::Const::Unit)))
}

/// Pieces around a registered rrule, so that a primitive (or a function
/// marked primitive) can be called through `revfwd`/`revback` as a value:
/// the forward piece pushes every saved value, the pullback pops them.
fn wrap(
    registry: &Registry,
    module: &mut Module,
    callee: Callee<'_>,
    sig: &FnType,
    loc: Location,
) -> Result<(FuncId, FuncId), ReverseError> {
    let base = match callee {
        Callee::Prim(p) => p.name().to_string(),
        Callee::Func(name) => name.to_string(),
    };
    let rule = match callee {
        Callee::Prim(p) => registry.rrule(p, &sig.params),
        Callee::Func(name) => registry.function_rrule_in(module, name),
    }
    .ok_or_else(|| ReverseError::new(loc.clone(), format!("no reverse rule for `{callee}`")))?;
    let (ft, bt) = piece_types(sig);
    let build = |e: BuildError| ReverseError::new(loc.clone(), e.to_string());
    let fail = |e: irad_rules::RuleError| {
        ReverseError::new(loc.clone(), format!("reverse rule of `{callee}`: {e}"))
    };
    let fname = fresh_name(module, &base, "rev.fwd");
    let fwd = module
        .declare_func(
            &fname,
            ft.params.iter().map(|t| (None, t.clone())).collect(),
            ft.ret.clone(),
        )
        .map_err(build)?;
    let bname = fresh_name(module, &base, "rev.back");
    let back = module
        .declare_func(
            &bname,
            bt.params.iter().map(|t| (None, t.clone())).collect(),
            bt.ret.clone(),
        )
        .map_err(build)?;

    // Forward piece.
    let mut b = FuncBuilder::new(module, fwd).map_err(build)?;
    let entry = b.create_block();
    b.switch_to_block(entry).map_err(build)?;
    let np = sig.params.len();
    let mut next = np;
    let mut args = Vec::with_capacity(np);
    for (i, ty) in sig.params.iter().enumerate() {
        let primal = Operand::Value(b.param(i).map_err(build)?);
        let mut shadows = smallvec::SmallVec::new();
        for _ in 0..Type::shadow_leaves(ty) {
            shadows.push(Operand::Value(b.param(next).map_err(build)?));
            next += 1;
        }
        args.push(RevArg {
            primal,
            ty: ty.clone(),
            shadows,
            active: true,
        });
    }
    let call = RevCall {
        callee,
        args: &args,
        result: &sig.ret,
    };
    let out = rule.forward(&mut b, &call).map_err(fail)?;
    let mut saved_types = Vec::new();
    for op in &out.saved {
        if let Operand::Value(v) = op {
            saved_types.push((*v, b.func().values[*v].ty.clone()));
            b.prim(Prim::Push, &[*op]).map_err(build)?;
        }
    }
    let ret = if out.shadows.is_empty() {
        out.primal
    } else {
        let mut parts = vec![out.primal];
        parts.extend(out.shadows.iter().copied());
        value_of(&mut b, Prim::Tuple, &parts).map_err(build)?
    };
    b.ret(ret).map_err(build)?;

    // Pullback piece.
    let mut b = FuncBuilder::new(module, back).map_err(build)?;
    let entry = b.create_block();
    b.switch_to_block(entry).map_err(build)?;
    let mut popped: HashMap<Value, Operand> = HashMap::default();
    for (v, ty) in saved_types.iter().rev() {
        let x = b.pop(ty.clone()).map_err(build)?;
        popped.insert(*v, Operand::Value(x));
    }
    let saved: Vec<Operand> = out
        .saved
        .iter()
        .map(|op| match op {
            Operand::Value(v) => popped.get(v).copied().unwrap_or(*op),
            c => *c,
        })
        .collect();
    let dy: Vec<Option<Operand>> = (0..bt.params.len())
        .map(|k| b.param(k).map(|v| Some(Operand::Value(v))))
        .collect::<Result<_, _>>()
        .map_err(build)?;
    let consts = vec![false; np];
    let pcall = PullbackCall {
        callee,
        arg_types: &sig.params,
        arg_inactive: &consts,
        result: &sig.ret,
        saved: &saved,
        dy: &dy,
    };
    let cots = rule.pullback(&mut b, &pcall).map_err(fail)?;
    let mut leaves = Vec::new();
    for (ty, cs) in sig.params.iter().zip(&cots.cotangents) {
        if cs.len() != Type::cotangent_leaves(ty) {
            return Err(ReverseError::new(
                loc,
                format!("reverse rule of `{callee}`: cotangents do not match the argument types"),
            ));
        }
        leaves.extend(cs.iter().map(|c| c.unwrap_or(irad_rules::emit::f64c(0.0))));
    }
    let ret = match leaves.len() {
        0 => Operand::Const(irad_ir::Const::Unit),
        1 => leaves[0],
        _ => value_of(&mut b, Prim::Tuple, &leaves).map_err(build)?,
    };
    b.ret(ret).map_err(build)?;
    Ok((fwd, back))
}
