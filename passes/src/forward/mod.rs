//! Forward mode (DESIGN.md, Forward mode): `make_fwds_ad_stmts` rewrites each
//! statement of a function into the statements of its forward rule, giving
//! `@f.fwd` (SYNTAX.md, "Derived functions").
//!
//! - [`Forward`] is the derived-rule cache: it builds the forward rule of a
//!   function on first request, keyed by (function, [`Lanes`]), and
//!   remembers it. A rule's callees are requested while it is built (the
//!   callee's rule is declared at once and its body queued), so recursion and
//!   mutual recursion meet a declared rule and terminate.
//! - [`Forward`] is also the interpreter's [`RuleProvider`]: `frule(f, N)`, the
//!   forward rule of a function value met at run time, goes through the same
//!   cache (the run-time rule cache); for a primitive used as a value it
//!   builds a small function around the primitive's frule.
//! - [`grad`] evaluates forward rules to get value and gradient.
//!
//! Assumes verified modules (dense forward rules and sparse rules are
//! differentiated again in dense lanes: forward over forward, forward over
//! sparse; sparse lanes refuse both with a located error).
//! Guarantees: every rule it adds verifies; control flow (blocks, labels,
//! layout, branches) is that of the primal, unreachable blocks excepted (they
//! are dropped); a function marked primitive by a registered rule is never
//! derived. After an error the module may hold a partly built rule: discard
//! both the module and the `Forward`.

pub mod grad;
pub(crate) mod split;
pub(crate) mod transform;

use irad_ir::interp::{RuleProvider, RuleProviderError};
use irad_ir::{FuncBuilder, FuncId, FuncRef, Lanes, Location, Module, Operand, Type};
use irad_rules::{Callee, Registry};

pub use crate::rule_cache::CacheStats;
use crate::rule_cache::RuleCache;
pub use split::tuples_for_codegen;

ad_error!(
    /// A forward-mode failure: what and where (in the primal).
    ForwardError
);

/// The derived-rule cache: forward rules by (function, batch width).
pub struct Forward<'r> {
    registry: &'r Registry,
    /// Rules by (callee, width); variants by (callee, width, activity of
    /// each parameter); queued bodies: (primal, rule, width, which
    /// parameters are active; `None`: all).
    cache: RuleCache<(FuncRef, Lanes), FuncId, Job>,
    /// Whether rules are derived with activity analysis.
    activity: bool,
}

/// A declared rule whose body is still to be built: (primal, rule, width,
/// which parameters are active; `None`: all).
type Job = (FuncId, FuncId, Lanes, Option<Vec<bool>>);

impl<'r> Forward<'r> {
    /// An empty cache whose rules come from `registry`.
    pub fn new(registry: &'r Registry) -> Forward<'r> {
        Forward {
            registry,
            cache: RuleCache::new(),
            activity: true,
        }
    }

    /// Turns activity analysis ([`crate::activity`]) on (the default) or off
    /// for the rules derived from now on. Off, every value of a tangent type
    /// gets tangents, as if every value depended on every input.
    pub fn set_activity(&mut self, on: bool) {
        self.activity = on;
    }

    /// The forward rule of `f` at batch width `width` for a gradient with
    /// respect to the parameters in `wrt` only: the rule of [`Forward::rule`]
    /// when `wrt` holds every parameter with a tangent type (or activity
    /// analysis is off), otherwise a variant (`@f.fwd.wrt0_2`, same type)
    /// that treats the tangents of the other parameters as zero and so does
    /// no tangent work for values that depend on them only. Callers must pass
    /// zero tangents for those parameters.
    pub fn rule_wrt(
        &mut self,
        module: &mut Module,
        f: FuncId,
        width: Lanes,
        wrt: &[usize],
    ) -> Result<FuncId, ForwardError> {
        let func = module
            .get(f)
            .ok_or_else(|| ForwardError::new(Location::default(), "invalid function handle"))?;
        let mask = crate::activity::wrt_mask(func, wrt);
        let marked = self
            .registry
            .function_frule_in(module, &func.name)
            .is_some();
        if !self.activity || marked || mask.iter().all(|&a| a) {
            return self.rule(module, f, width);
        }
        let key = (FuncRef::User(f), width);
        if let Some(id) = self.cache.get_variant(key, mask.clone()) {
            return Ok(id);
        }
        // The callees' rules first: checks the width and builds them.
        self.rule(module, f, width)?;
        let func = module
            .get(f)
            .ok_or_else(|| ForwardError::new(Location::default(), "invalid function handle"))?;
        let loc = Location {
            func: Some(func.name.as_str().into()),
            pos: func.pos,
            ..Location::default()
        };
        let sig = func.fn_type();
        let fwd = Type::forward_fn(&sig, width);
        let params = func
            .params
            .iter()
            .zip(fwd.params)
            .map(|(&v, ty)| (func.values[v].name.as_deref().map(String::from), ty))
            .collect();
        let active: Vec<String> = wrt.iter().map(usize::to_string).collect();
        let suffix = format!("{}.wrt{}", rule_suffix(width), active.join("_"));
        let rule_name = fresh_derived_name(module, &func.name, &suffix);
        let pos = func.pos;
        let id = module
            .declare_func(&rule_name, params, fwd.ret)
            .map_err(|e| ForwardError::new(loc, e.to_string()))?;
        module[id].pos = pos;
        self.cache.queue((f, id, width, Some(mask.clone())));
        self.cache.insert_variant(key, mask, id);
        self.drain(module)?;
        Ok(id)
    }

    /// The registry the rules come from.
    pub fn registry(&self) -> &'r Registry {
        self.registry
    }

    /// Whether activity analysis is on.
    pub fn activity(&self) -> bool {
        self.activity
    }

    /// The forward rule of `f` at batch width `width` (dense lanes 1 to
    /// [`irad_ir::MAX_WIDTH`], or [`Lanes::Sparse`] for the sparse rule
    /// `@f.fwds`), derived with every rule it calls on first
    /// request and added to `module`; later requests return the same function.
    pub fn rule(
        &mut self,
        module: &mut Module,
        f: FuncId,
        width: Lanes,
    ) -> Result<FuncId, ForwardError> {
        self.rule_of(module, FuncRef::User(f), width)
    }

    /// Like [`Forward::rule`] for any function value: a module function or a
    /// primitive with one signature (`@sin`).
    pub fn rule_of(
        &mut self,
        module: &mut Module,
        callee: FuncRef,
        width: Lanes,
    ) -> Result<FuncId, ForwardError> {
        if let Lanes::Dense(n) = width
            && n.get() > irad_ir::MAX_WIDTH
        {
            return Err(ForwardError::new(
                Location::default(),
                format!("batch width {n} out of range (1 to {})", irad_ir::MAX_WIDTH),
            ));
        }
        let id = self.request(module, callee, width)?;
        self.drain(module)?;
        Ok(id)
    }

    /// The rule of `callee` at `width` if it was built already.
    pub fn cached(&self, callee: FuncRef, width: Lanes) -> Option<FuncId> {
        self.cache.peek(&(callee, width))
    }

    /// How the cache has been used so far.
    pub fn stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// Finds or declares the rule of `callee`; a declared body is queued.
    pub(crate) fn request(
        &mut self,
        module: &mut Module,
        callee: FuncRef,
        width: Lanes,
    ) -> Result<FuncId, ForwardError> {
        if let Some(id) = self.cache.get(&(callee, width)) {
            return Ok(id);
        }
        let id = match callee {
            FuncRef::User(f) => {
                let func = module.get(f).ok_or_else(|| {
                    ForwardError::new(Location::default(), "invalid function handle")
                })?;
                let loc = Location {
                    func: Some(func.name.as_str().into()),
                    pos: func.pos,
                    ..Location::default()
                };
                let sig = func.fn_type();
                let name = func.name.clone();
                if self.registry.function_frule_in(module, &name).is_some() {
                    self.cache.count_wrapped();
                    wrap(self.registry, module, Callee::Func(&name), &sig, width, loc)?
                } else {
                    transform::check_nestable(func, &loc, width)?;
                    let fwd = Type::forward_fn(&sig, width);
                    let params = func
                        .params
                        .iter()
                        .zip(fwd.params)
                        .map(|(&v, ty)| (func.values[v].name.as_deref().map(String::from), ty))
                        .collect();
                    let rule_name = fresh_name(module, &name, width);
                    let id = module
                        .declare_func(&rule_name, params, fwd.ret)
                        .map_err(|e| ForwardError::new(loc, e.to_string()))?;
                    if let Some(pos) = module.get(f).and_then(|f| f.pos) {
                        module[id].pos = Some(pos);
                    }
                    self.cache.queue((f, id, width, None));
                    id
                }
            }
            FuncRef::Prim(p) => {
                let Some(sig) = p.fn_type() else {
                    return Err(ForwardError::new(
                        Location::default(),
                        format!("primitive `{p}` is overloaded and has no function value"),
                    ));
                };
                let Type::Func(sig) = sig else {
                    return Err(ForwardError::internal(
                        Location::default(),
                        "a primitive's function type",
                    ));
                };
                self.cache.count_wrapped();
                wrap(
                    self.registry,
                    module,
                    Callee::Prim(p),
                    &sig,
                    width,
                    Location::default(),
                )?
            }
        };
        self.cache.insert((callee, width), id);
        Ok(id)
    }

    /// Builds the bodies of every queued rule (which may queue more).
    fn drain(&mut self, module: &mut Module) -> Result<(), ForwardError> {
        while let Some((primal, rule, width, mask)) = self.cache.next_job() {
            transform::derive(self, module, primal, rule, width, mask.as_deref())?;
        }
        crate::ad_error::verify_derived(module, "a forward rule").map_err(|msg| ForwardError {
            kind: crate::AdErrorKind::Internal,
            ..ForwardError::new(Location::default(), msg)
        })
    }
}

impl RuleProvider for Forward<'_> {
    fn forward_rule(
        &mut self,
        module: &mut Module,
        callee: FuncRef,
        width: Lanes,
    ) -> Result<FuncId, RuleProviderError> {
        self.rule_of(module, callee, width).map_err(Into::into)
    }
}

/// `base.fwd` (`base.fwdN` for width N > 1, `base.fwds` for sparse mode), or
/// with `.1`, `.2`, ... appended if a function of that name exists.
fn fresh_name(module: &Module, base: &str, width: Lanes) -> String {
    fresh_derived_name(module, base, &rule_suffix(width))
}

/// The suffix of the rule at `width`: `fwd`, `fwdN`, or `fwds` (sparse).
fn rule_suffix(width: Lanes) -> String {
    match width {
        Lanes::ONE => "fwd".to_string(),
        Lanes::Sparse => "fwds".to_string(),
        Lanes::Dense(n) => format!("fwd{n}"),
    }
}

/// `base.suffix`, or with `.1`, `.2`, ... appended if a function of that name
/// exists: the names of derived functions.
pub(crate) fn fresh_derived_name(module: &Module, base: &str, suffix: &str) -> String {
    let stem = format!("{base}.{suffix}");
    if module.by_name(&stem).is_none() {
        return stem;
    }
    (1u64..)
        .map(|k| format!("{stem}.{k}"))
        .find(|name| module.by_name(name).is_none())
        .unwrap_or(stem)
}

/// A function around a registered frule, so that a primitive (or a function
/// marked primitive) can be called through `frule` as a function value.
fn wrap(
    registry: &Registry,
    module: &mut Module,
    callee: Callee<'_>,
    sig: &irad_ir::FnType,
    width: Lanes,
    loc: Location,
) -> Result<FuncId, ForwardError> {
    let base = match callee {
        Callee::Prim(p) => p.name().to_string(),
        Callee::Func(name) => name.to_string(),
    };
    let fwd = Type::forward_fn(sig, width);
    let params = fwd.params.iter().map(|t| (None, t.clone())).collect();
    let name = fresh_name(module, &base, width);
    let id = module
        .declare_func(&name, params, fwd.ret.clone())
        .map_err(|e| ForwardError::new(loc.clone(), e.to_string()))?;
    let mut b =
        FuncBuilder::new(module, id).map_err(|e| ForwardError::new(loc.clone(), e.to_string()))?;
    let entry = b.create_block();
    let build = |e: irad_ir::BuildError| ForwardError::new(loc.clone(), e.to_string());
    b.switch_to_block(entry).map_err(build)?;
    let mut args = Vec::with_capacity(sig.params.len());
    for (i, ty) in sig.params.iter().enumerate() {
        let v = b.param(i).map_err(build)?;
        args.push(transform::unpack(&mut b, Operand::Value(v), ty, width).map_err(build)?);
    }
    let rule = match callee {
        Callee::Prim(p) => {
            let types: Vec<Type> = sig.params.clone();
            registry.frule(p, &types)
        }
        Callee::Func(name) => registry.function_frule_in(b.module(), name),
    }
    .ok_or_else(|| ForwardError::new(loc.clone(), format!("no forward rule for `{callee}`")))?;
    let call = irad_rules::FruleCall {
        callee,
        args: &args,
        result: &sig.ret,
        lanes: width,
    };
    let out = transform::emit_checked(&mut b, &*rule, &call, &loc)?;
    let ret = transform::pack(
        &mut b,
        &out.primal,
        out.tangents.as_deref(),
        &sig.ret,
        width,
    )
    .map_err(|e| ForwardError::internal(loc.clone(), e))?;
    b.ret(ret).map_err(build)?;
    Ok(id)
}
