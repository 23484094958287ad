//! irad-rules: the rule registry (DESIGN.md, Rules).
//!
//! - [`Frule`]: a forward rule, an emitter that writes the statements of a
//!   primitive's (or a user function's) forward rule through the builder;
//! - [`Registry`]: frules keyed by primitive and argument types, plus rules
//!   users register for their own primitives or for functions they mark
//!   primitive;
//! - `frules` (private): the hand-written frule of every primitive of the table;
//! - [`emit`]: helpers for writing rules (zero tangents of any type, lane
//!   loops, the primal statement of a call), shared with the forward transform.
//!
//! The forward transform (`irad-passes`) calls a rule with the primal operands
//! of a statement and their tangents already projected out of the duals
//! ([`FwdArg`]), and packs what the rule returns ([`FwdOut`]) back into a dual.
//! So a rule sees plain f64/array operands and never builds or takes apart a
//! `dual<T>` itself.
//!
//! Assumes the builder is positioned in the block where the primal statement
//! was. Guarantees of every built-in rule: the primal result and every primal
//! array after the emitted statements are exactly those of the primitive; the
//! tangents are the primitive's directional derivatives, lane by lane, with
//! the conventions of `docs/rules.md` at kinks.
//!
//! [`check`] is the finite-difference rule checker over the test table
//! ([`table`]) that `irad test-rules` runs.
//!
//! # Registering a rule
//!
//! A rule is a function (or closure) from the builder and the call to the
//! primal result and its tangents. Register it for a primitive (for exact
//! argument types, or all of them) with [`Registry::register_frule`], or mark
//! a user function primitive with [`Registry::register_function_frule`]; the
//! newest registration wins. `docs/rules.md` refers to this example.
//!
//! ```
//! use irad_ir::interp::{run, RunOptions, Val};
//! use irad_ir::{FuncBuilder, Operand, Prim, Type};
//! use irad_rules::check::{check_signature, CheckOptions, Verdict};
//! use irad_rules::{emit, FruleCall, FwdOut, Registry, RuleError};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // 1. A rule for the primitive `exp` on f64: y = exp(x), tangent y * t per lane.
//! fn exp_rule(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
//!     let [x] = call.args else {
//!         return Err(RuleError::Unsupported("exp takes one argument".into()));
//!     };
//!     let y = emit::value(b, Prim::Exp, &[x.primal])?;
//!     let tangents = match &x.tangents {
//!         Some(ts) => Some(emit::scale(b, y, ts)?), // no tangents: no tangent work
//!         None => None,
//!     };
//!     Ok(FwdOut { primal: y, tangents })
//! }
//! let mut reg = Registry::new();
//! reg.register_frule(Prim::Exp, Some(vec![Type::F64]), exp_rule);
//! // The checker tests it like a built-in rule.
//! let sig = irad_rules::table::signatures()
//!     .into_iter()
//!     .find(|s| s.to_string() == "exp(f64)")
//!     .ok_or("exp(f64) is in the table")?;
//! let report = check_signature(&reg, &sig, &CheckOptions::default());
//! assert_eq!(report.verdict, Verdict::Pass);
//!
//! // 2. A user function marked primitive: softplus(x) = log1p(exp(x)), whose
//! // derivative is the logistic function 1 / (1 + exp(-x)).
//! reg.register_function_frule("softplus", |b: &mut FuncBuilder<'_>, call: &FruleCall<'_>| {
//!     let [x] = call.args else {
//!         return Err(RuleError::Unsupported("softplus takes one argument".into()));
//!     };
//!     let missing = || RuleError::Unsupported("no @softplus".into());
//!     let f = b.module().by_name("softplus").ok_or_else(missing)?;
//!     let y = b.invoke(f, &[x.primal])?.map(Operand::Value).ok_or_else(missing)?;
//!     let Some(ts) = &x.tangents else {
//!         return Ok(FwdOut { primal: y, tangents: None });
//!     };
//!     let m = emit::value(b, Prim::Neg, &[x.primal])?;
//!     let e = emit::value(b, Prim::Exp, &[m])?;
//!     let d = emit::value(b, Prim::Add, &[emit::f64c(1.0), e])?;
//!     let s = emit::value(b, Prim::Div, &[emit::f64c(1.0), d])?;
//!     Ok(FwdOut { primal: y, tangents: Some(emit::scale(b, s, ts)?) })
//! });
//!
//! // Forward mode calls the rule where it meets `invoke @softplus`; here we
//! // call it by hand in a function `@softplus.fwd(dual<f64>) -> dual<f64>`.
//! let mut m = irad_ir::text::parse_module(
//!     "func @softplus(%x: f64) -> f64 {\n#1:\n  %e = call exp(%x) :: f64\n  %y = call log1p(%e) :: f64\n  return %y\n}\n",
//! )?;
//! let dual = Type::dual(Type::F64);
//! let fwd = m.declare_func("softplus.fwd", vec![(None, dual.clone())], dual)?;
//! let mut b = FuncBuilder::new(&mut m, fwd)?;
//! let entry = b.create_block();
//! b.switch_to_block(entry)?;
//! let d = Operand::Value(b.param(0)?);
//! let primal = emit::value(&mut b, Prim::Primal, &[d])?;
//! let tangent = emit::value(&mut b, Prim::Tangent, &[d, Operand::from(0i64)])?;
//! let tangents = Some([tangent].into_iter().collect());
//! let arg = irad_rules::FwdArg { primal, ty: Type::F64, tangents };
//! let call = FruleCall {
//!     callee: irad_rules::Callee::Func("softplus"),
//!     args: std::slice::from_ref(&arg),
//!     result: &Type::F64,
//!     lanes: irad_ir::Lanes::ONE,
//! };
//! let rule = reg.function_frule("softplus").ok_or("softplus is marked primitive")?;
//! let out = rule.emit(&mut b, &call)?;
//! let tangents = out.tangents.ok_or("softplus has a tangent")?;
//! let packed = emit::value(&mut b, Prim::Dual, &[out.primal, tangents[0]])?;
//! b.ret(packed)?;
//! irad_ir::verify::verify_module(&m).map_err(|e| format!("{e:?}"))?;
//!
//! let x = Val::Dual(vec![Val::F64(0.5), Val::F64(2.0)].into());
//! let Val::Dual(r) = run(&m, fwd, &[x], &RunOptions::default())? else {
//!     return Err("a dual result".into());
//! };
//! let (Val::F64(y), Val::F64(t)) = (&r[0], &r[1]) else {
//!     return Err("f64 parts".into());
//! };
//! assert!((y - 0.5f64.exp().ln_1p()).abs() < 1e-15);
//! assert!((t - 2.0 / (1.0 + (-0.5f64).exp())).abs() < 1e-15);
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod bulk;
mod bulk_sparse;
pub mod check;
mod dual;
pub mod emit;
mod frules;
mod lang;
mod rrules;
mod sparse_fwd;
pub mod table;
mod tape;

use irad_ir::{BuildError, FuncBuilder, Lanes, Module, Operand, Prim, Type};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// What went wrong while emitting a rule.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RuleError {
    /// The builder refused a statement (a rule typed its IR wrongly).
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The rule cannot handle this call (argument types, a missing tangent).
    #[error("{0}")]
    Unsupported(String),
}

/// What a rule is the rule of.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Callee<'a> {
    /// A primitive of the table.
    Prim(Prim),
    /// A user function of this name, marked primitive by a registered rule.
    Func(&'a str),
}

impl fmt::Display for Callee<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Callee::Prim(p) => write!(f, "{p}"),
            Callee::Func(name) => write!(f, "@{name}"),
        }
    }
}

/// One argument of a rule call: the primal operand and its tangents.
#[derive(Clone, Debug, PartialEq)]
pub struct FwdArg {
    /// The primal operand: a value of type `ty` or a constant.
    pub primal: Operand,
    /// The primal type.
    pub ty: Type,
    /// One tangent operand per lane, each of type `ty.tangent()`; `None` when
    /// the tangent is zero in every lane (a constant) or `ty` has no tangent.
    pub tangents: Option<SmallVec<[Operand; 1]>>,
}

impl FwdArg {
    /// The tangent in lane `k`, if not known to be zero.
    pub fn tangent(&self, k: usize) -> Option<Operand> {
        self.tangents.as_ref().and_then(|t| t.get(k).copied())
    }
}

/// A call of a rule: the statement being differentiated.
#[derive(Clone, Debug)]
pub struct FruleCall<'a> {
    /// The primitive or function.
    pub callee: Callee<'a>,
    /// The arguments, in order.
    pub args: &'a [FwdArg],
    /// The primal result type (for `alloc`, the annotated array type).
    pub result: &'a Type,
    /// The lanes: for [`Lanes::Dense`] N (the batch width), every `tangents`
    /// present has N entries and the rule returns N tangents;
    /// [`Lanes::Sparse`] is sparse mode, one lane whose f64 tangents are
    /// `sparse` handles (`[sparse]` for arrays). Rules that do their lane
    /// work through `emit`'s helpers work in both.
    pub lanes: Lanes,
}

/// What a rule produced: the primal result and its tangents.
#[derive(Clone, Debug, PartialEq)]
pub struct FwdOut {
    /// The primal result (`Operand::Const(Const::Unit)` for `()`).
    pub primal: Operand,
    /// One tangent per lane, each of type `result.tangent()`; `None` when the
    /// result has no tangent type, or when every lane's tangent is zero and
    /// the result type holds no array (a zero array needs its length, so a
    /// rule returning an array-containing type always returns its tangents).
    pub tangents: Option<SmallVec<[Operand; 1]>>,
}

/// A forward rule: writes the statements that compute a call's primal result
/// and tangents. Closures of the right shape are rules.
pub trait Frule: Send + Sync {
    /// Emits the rule of `call` at the builder's current position.
    fn emit(&self, b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError>;
}

impl<F> Frule for F
where
    F: Fn(&mut FuncBuilder<'_>, &FruleCall<'_>) -> Result<FwdOut, RuleError> + Send + Sync,
{
    fn emit(&self, b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
        self(b, call)
    }
}

/// One argument of a reverse rule's forward part: the primal operand and the
/// shadows of the arrays it holds.
#[derive(Clone, Debug, PartialEq)]
pub struct RevArg {
    /// The primal operand: a value of type `ty` or a constant.
    pub primal: Operand,
    /// The primal type.
    pub ty: Type,
    /// One shadow array (`[f64]`, the cotangent buffer) per `[f64]` array in
    /// `ty`, depth-first through tuples ([`Type::shadow_leaves`] of them).
    pub shadows: SmallVec<[Operand; 1]>,
    /// Whether the argument's cotangent is wanted: false for a constant and
    /// for a value that activity analysis found inactive, so that the rule
    /// may save nothing for it (its pullback gets
    /// [`PullbackCall::arg_inactive`] true and its cotangent is dropped).
    /// For a `[f64]` array it is false when activity analysis found that
    /// nothing added into its shadow can reach an active parameter (its
    /// array class is not both varied and useful); the shadow is still
    /// there, and a rule may skip adding into it.
    pub active: bool,
}

/// A call of a reverse rule's forward part: the statement being differentiated.
#[derive(Clone, Debug)]
pub struct RevCall<'a> {
    /// The primitive or function.
    pub callee: Callee<'a>,
    /// The arguments, in order.
    pub args: &'a [RevArg],
    /// The primal result type (for `alloc`, the annotated array type).
    pub result: &'a Type,
}

/// What a reverse rule's forward part produced.
#[derive(Clone, Debug, PartialEq)]
pub struct RevFwdOut {
    /// The primal result (`()` as a constant for a unit result).
    pub primal: Operand,
    /// The shadows of the result's `[f64]` arrays, depth-first (a fresh zero
    /// array for a new array, the argument's shadow for an array passed on).
    pub shadows: SmallVec<[Operand; 1]>,
    /// Operands of the forward part the pullback needs, in the order it wants
    /// them. The reverse transform carries each to the pullback (on a tape,
    /// or as itself for a constant) and hands them back in this order.
    pub saved: SmallVec<[Operand; 4]>,
}

/// A call of a reverse rule's pullback: written into the pullback function,
/// a different function from the forward part's.
#[derive(Clone, Debug)]
pub struct PullbackCall<'a> {
    /// The primitive or function.
    pub callee: Callee<'a>,
    /// The argument types of the primal call.
    pub arg_types: &'a [Type],
    /// Whether each primal argument was a constant or an inactive value
    /// ([`RevArg::active`] false): its cotangent is dropped, so a rule may
    /// skip computing it.
    pub arg_inactive: &'a [bool],
    /// The primal result type.
    pub result: &'a Type,
    /// [`RevFwdOut::saved`], as operands of the pullback function.
    pub saved: &'a [Operand],
    /// The cotangent of the result: one f64 per f64 of the result outside
    /// arrays, depth-first ([`Type::cotangent_leaves`] of them); `None` where
    /// it is known to be zero.
    pub dy: &'a [Option<Operand>],
}

/// What a pullback produced: per primal argument, one cotangent contribution
/// per f64 of its type outside arrays (depth-first), `None` for a zero one.
/// Array cotangents are not returned: pullbacks add them into the shadows.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct PullbackOut {
    /// Per argument, its cotangent contributions (inline for up to three
    /// arguments: a pullback is written for every primal statement, and its
    /// list was an allocation each time).
    pub cotangents: SmallVec<[Cotangents; 3]>,
}

/// One argument's cotangent contributions in a [`PullbackOut`]: one per f64
/// of its type outside arrays, depth-first; inline for up to two (an f64,
/// or a pair's two: the pullback of `getfield` lists the whole tuple's).
pub type Cotangents = SmallVec<[Option<Operand>; 2]>;

/// A reverse rule (rrule): a forward part, straight-line statements that
/// compute the primal result, the result's shadows and what the pullback needs;
/// and a pullback, statements that add the call's cotangents into its
/// arguments' and restore what the forward part overwrote. The two parts run
/// in different functions (the forward sweep and the pullback), and between
/// them every later statement has been run forward and undone.
pub trait Rrule: Send + Sync {
    /// Emits the forward part of `call` at the builder's current position,
    /// without creating blocks.
    fn forward(&self, b: &mut FuncBuilder<'_>, call: &RevCall<'_>) -> Result<RevFwdOut, RuleError>;
    /// Emits the pullback of `call` at the builder's current position; it may
    /// create blocks (a loop) and leave the builder in another block.
    fn pullback(
        &self,
        b: &mut FuncBuilder<'_>,
        call: &PullbackCall<'_>,
    ) -> Result<PullbackOut, RuleError>;
}

/// The signature of a rule's forward part as a plain function or closure.
pub type RevForwardFn =
    dyn Fn(&mut FuncBuilder<'_>, &RevCall<'_>) -> Result<RevFwdOut, RuleError> + Send + Sync;
/// The signature of a rule's pullback as a plain function or closure.
pub type PullbackFn =
    dyn Fn(&mut FuncBuilder<'_>, &PullbackCall<'_>) -> Result<PullbackOut, RuleError> + Send + Sync;

/// An [`Rrule`] made of two functions or closures.
pub struct RruleFns {
    /// The forward part.
    pub forward: Box<RevForwardFn>,
    /// The pullback.
    pub pullback: Box<PullbackFn>,
}

impl RruleFns {
    /// An rrule from its two parts.
    pub fn new(
        forward: impl Fn(&mut FuncBuilder<'_>, &RevCall<'_>) -> Result<RevFwdOut, RuleError>
        + Send
        + Sync
        + 'static,
        pullback: impl Fn(&mut FuncBuilder<'_>, &PullbackCall<'_>) -> Result<PullbackOut, RuleError>
        + Send
        + Sync
        + 'static,
    ) -> RruleFns {
        RruleFns {
            forward: Box::new(forward),
            pullback: Box::new(pullback),
        }
    }
}

impl Rrule for RruleFns {
    fn forward(&self, b: &mut FuncBuilder<'_>, call: &RevCall<'_>) -> Result<RevFwdOut, RuleError> {
        (self.forward)(b, call)
    }
    fn pullback(
        &self,
        b: &mut FuncBuilder<'_>,
        call: &PullbackCall<'_>,
    ) -> Result<PullbackOut, RuleError> {
        (self.pullback)(b, call)
    }
}

/// A registered frule for one primitive, optionally only for exact argument
/// types.
struct PrimEntry<R: ?Sized> {
    types: Option<Vec<Type>>,
    rule: Arc<R>,
}

impl<R: ?Sized> Clone for PrimEntry<R> {
    fn clone(&self) -> Self {
        PrimEntry {
            types: self.types.clone(),
            rule: Arc::clone(&self.rule),
        }
    }
}

/// The newest entry of `entries` whose types match `types`.
fn newest<R: ?Sized>(entries: Option<&Vec<PrimEntry<R>>>, types: &[Type]) -> Option<Arc<R>> {
    entries.and_then(|entries| {
        entries
            .iter()
            .rev()
            .find(|e| e.types.as_deref().is_none_or(|t| t == types))
            .map(|e| Arc::clone(&e.rule))
    })
}

/// Frules by primitive and argument types, and by user function name.
///
/// [`Registry::new`] holds the built-in rule of every primitive. Rules
/// registered later take precedence: for a primitive, the newest entry whose
/// argument types match (an entry without types matches any) wins.
#[derive(Clone)]
pub struct Registry {
    prims: HashMap<Prim, Vec<PrimEntry<dyn Frule>>>,
    funcs: HashMap<String, Arc<dyn Frule>>,
    rprims: HashMap<Prim, Vec<PrimEntry<dyn Rrule>>>,
    rfuncs: HashMap<String, Arc<dyn Rrule>>,
}

impl Default for Registry {
    fn default() -> Registry {
        Registry::new()
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut prims: Vec<_> = self.prims.keys().map(|p| p.name()).collect();
        prims.sort_unstable();
        let mut funcs: Vec<_> = self.funcs.keys().collect();
        funcs.sort_unstable();
        let mut rprims: Vec<_> = self.rprims.keys().map(|p| p.name()).collect();
        rprims.sort_unstable();
        let mut rfuncs: Vec<_> = self.rfuncs.keys().collect();
        rfuncs.sort_unstable();
        f.debug_struct("Registry")
            .field("prims", &prims)
            .field("funcs", &funcs)
            .field("rprims", &rprims)
            .field("rfuncs", &rfuncs)
            .finish()
    }
}

impl Registry {
    /// A registry holding the built-in frule and rrule of every primitive.
    pub fn new() -> Registry {
        let mut reg = Registry::empty();
        frules::install(&mut reg);
        rrules::install(&mut reg);
        bulk::install(&mut reg);
        tape::install(&mut reg);
        dual::install(&mut reg);
        sparse_fwd::install(&mut reg);
        reg
    }

    /// A registry without any rule.
    pub fn empty() -> Registry {
        Registry {
            prims: HashMap::new(),
            funcs: HashMap::new(),
            rprims: HashMap::new(),
            rfuncs: HashMap::new(),
        }
    }

    /// Registers `rule` as the frule of `prim`: for calls whose argument types
    /// are exactly `types`, or for every call when `types` is `None`. It takes
    /// precedence over every rule registered before it.
    pub fn register_frule(
        &mut self,
        prim: Prim,
        types: Option<Vec<Type>>,
        rule: impl Frule + 'static,
    ) {
        self.prims.entry(prim).or_default().push(PrimEntry {
            types,
            rule: Arc::new(rule),
        });
    }

    /// Marks the user function `name` as a primitive whose frule is `rule`:
    /// forward mode calls the rule instead of deriving the function's body.
    pub fn register_function_frule(&mut self, name: &str, rule: impl Frule + 'static) {
        self.funcs.insert(name.to_string(), Arc::new(rule));
    }

    /// The frule of `prim` called with arguments of types `types`.
    pub fn frule(&self, prim: Prim, types: &[Type]) -> Option<Arc<dyn Frule>> {
        newest(self.prims.get(&prim), types)
    }

    /// Registers `rule` as the rrule of `prim`, for calls whose argument
    /// types are exactly `types` (every call when `None`); it takes precedence
    /// over every rrule registered before it.
    pub fn register_rrule(
        &mut self,
        prim: Prim,
        types: Option<Vec<Type>>,
        rule: impl Rrule + 'static,
    ) {
        self.rprims.entry(prim).or_default().push(PrimEntry {
            types,
            rule: Arc::new(rule),
        });
    }

    /// Marks the user function `name` as a primitive whose rrule is `rule`:
    /// reverse mode calls the rule instead of deriving the function's body.
    pub fn register_function_rrule(&mut self, name: &str, rule: impl Rrule + 'static) {
        self.rfuncs.insert(name.to_string(), Arc::new(rule));
    }

    /// The rrule of `prim` called with arguments of types `types`.
    pub fn rrule(&self, prim: Prim, types: &[Type]) -> Option<Arc<dyn Rrule>> {
        newest(self.rprims.get(&prim), types)
    }

    /// The registered rrule of user function `name`, if it is marked primitive.
    pub fn function_rrule(&self, name: &str) -> Option<Arc<dyn Rrule>> {
        self.rfuncs.get(name).cloned()
    }

    /// The primitives of the table without an rrule, the AD primitives left
    /// out as for [`Registry::missing_prims`].
    pub fn missing_rrules(&self) -> Vec<Prim> {
        irad_ir::prim::PRIMS
            .iter()
            .map(|row| row.prim)
            .filter(|p| !is_ad_prim(*p))
            .filter(|p| !self.rprims.contains_key(p))
            .collect()
    }

    /// The registered frule of user function `name`, if it is marked primitive.
    pub fn function_frule(&self, name: &str) -> Option<Arc<dyn Frule>> {
        self.funcs.get(name).cloned()
    }

    /// The frule of user function `name` of `module`: the registered one
    /// ([`Registry::register_function_frule`]), else the one its header
    /// declares (`jvp @g`; docs/rules.md, "Rules written in the language").
    pub fn function_frule_in(&self, module: &Module, name: &str) -> Option<Arc<dyn Frule>> {
        self.function_frule(name).or_else(|| {
            let f = module.by_name(name)?;
            let jvp = module.declared_rules(f).jvp?;
            Some(Arc::new(lang::JvpRule { jvp }) as Arc<dyn Frule>)
        })
    }

    /// The rrule of user function `name` of `module`: the registered one
    /// ([`Registry::register_function_rrule`]), else the one its header
    /// declares (`vjp @h`).
    pub fn function_rrule_in(&self, module: &Module, name: &str) -> Option<Arc<dyn Rrule>> {
        self.function_rrule(name).or_else(|| {
            let f = module.by_name(name)?;
            let vjp = module.declared_rules(f).vjp?;
            Some(Arc::new(lang::VjpRule { vjp }) as Arc<dyn Rrule>)
        })
    }

    /// The primitives of the table without a rule (the AD primitives are
    /// left out: `dual`, `primal`, `tangent`, `frule`, the tapes and the
    /// lookups have their rules in `dual.rs` and `tape.rs`, the sparse
    /// builder its dense frules in `sparse_fwd.rs`).
    pub fn missing_prims(&self) -> Vec<Prim> {
        irad_ir::prim::PRIMS
            .iter()
            .map(|row| row.prim)
            .filter(|p| !is_ad_prim(*p))
            .filter(|p| !self.prims.contains_key(p))
            .collect()
    }
}

/// The primitives the AD transforms introduce, which are not differentiated
/// by the ordinary rules (see [`reverses_over_forward`] and the frules of
/// the tape primitives for those that are).
pub fn is_ad_prim(p: Prim) -> bool {
    p.is_ad()
}

/// The AD primitives of a dense forward rule that have rrules, so that
/// reverse mode applies to `@f.fwd` (reverse over forward): `dual`,
/// `primal`, `tangent`, `frule`, and `gemm` (which the frules of `matvec`
/// and `matmul` write).
pub fn reverses_over_forward(p: Prim) -> bool {
    matches!(
        p,
        Prim::Dual | Prim::Primal | Prim::Tangent | Prim::Frule | Prim::Gemm
    )
}
