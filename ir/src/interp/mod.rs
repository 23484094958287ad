//! The reference interpreter: it defines what a module means, and compiled code
//! must agree with it bit for bit (SYNTAX.md §1, "Semantics that every backend
//! shares").
//!
//! Assumes a verified module but never panics on an unverified one: type
//! confusion, invalid handles, missing terminators or phi entries become a
//! [`RunError`] whose message starts with `internal error:`. Guarantees:
//! - phis at the start of a block take their values simultaneously from the
//!   edge taken; `gotoifnot c, #b` goes to `#b` when `c` is false, otherwise to
//!   the next block of the layout; `switch i, [...]` goes to target number `i`;
//! - calls use an explicit frame stack, never native recursion, so any depth up
//!   to [`RunOptions::max_depth`] runs in constant native stack; one more frame
//!   is the error `call depth limit of N exceeded` at the call statement;
//! - arrays are shared by reference: a callee's writes into an argument array
//!   are seen by the caller, and by the caller of [`run`].
//!
//! The run-time errors, with their exact messages (compiled code reports the
//! same: both print [`irad_kernels::trap::Trap`]): `division by zero`,
//! `remainder by zero`, `integer overflow in idiv`,
//! `fptosi of X is out of the i64 range`, `negative array length N`,
//! `array length N exceeds the limit of 268435456 elements`,
//! `index I out of bounds for array of length L`,
//! `switch index I is out of range for N targets`,
//! `pop from an empty tape of T`,
//! `call depth limit of N exceeded`, the bulk array primitives' shape errors
//! (`crate::bulk::check`), and, when [`RunOptions::max_steps`] is set, `step
//! limit of N exceeded`. Each is located at the failing statement
//! (function, block label, statement number from 1 with the terminator last,
//! source position) and carries the chain of call sites.
//!
//! Each function is translated once, on first call, into a dense form (see
//! `compile`); a frame is a `Vec<Val>` indexed by value number.
//!
//! `frule(f, N)` (the forward rule of a function value met at run time) needs
//! a [`RuleProvider`]: an interpreter made by [`Interpreter::with_rules`] asks
//! it for the rule the first time it meets a (function, width) pair, lets it add
//! the rule to the module, and keeps the answer. Without a provider, `frule` is
//! the run-time error `no rule provider for frule: ...`. `revfwd(f)` and
//! `revback(f)` work alike, with one question per function value for both
//! parts of its reverse rule, whose types are checked against
//! [`Type::rev_fwd_fn`] and [`Type::rev_back_fn`] of the callee's.
//!
//! Each interpreter owns a sparse tangent builder ([`crate::sparse`]) for
//! `sonehot szero sscale sadd sdense` and the tangents of the bulk array
//! primitives `ssum sdot sfill sgemma sgemmb`, emptied when a top-level [`run`]
//! starts: a `sparse` value is valid only in the run that made it, and no
//! argument of a run may hold one (`sparse values cannot be passed into a
//! run`). Its errors: `invalid sparse handle H`, `negative sparse direction
//! K`, `sparse direction K out of range for a dense tangent of length N`.
//!
//! Each interpreter owns the tapes of `push` and `pop`, one last-in-first-out
//! stack per exact type, shared by all the calls and runs it makes; popping an
//! empty tape is the run-time error `pop from an empty tape of T`. It counts
//! what it does ([`Interpreter::stats`]): one increment per statement, edge
//! and tape operation.

mod compile;
mod eval;
mod rule_error;
mod sparse_bulk;
mod tape;
pub mod value;

pub use eval::{MAX_ARRAY_LEN, fold_prim};
pub use rule_error::RuleProviderError;
pub use tape::byte_size as tape_value_bytes;
pub use value::{ArrayData, ArrayRef, Val};

use crate::entity::EntityRef;
use crate::func::{FuncId, FuncRef, Module};
use crate::loc::{Location, Pos};
use crate::prim::{Prim, Sig};
use crate::types::{Lanes, Scalar, Type};
use compile::{CBlock, CFunc, Edge, Op, OpKind, Src, Term};
use irad_kernels::trap::Trap;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

/// Builds the rules of function values met at run time (DESIGN.md, "Function
/// values and dynamic rules"): implemented by the AD passes, which live in a
/// crate above this one.
pub trait RuleProvider {
    /// The forward rule of `callee` with `lanes` tangents: a function of
    /// `module` whose type is [`Type::forward_fn`] of the callee's, made and
    /// added to `module` on first request (with whatever it calls). The
    /// interpreter locates the error's text at the `frule` statement.
    fn forward_rule(
        &mut self,
        module: &mut Module,
        callee: FuncRef,
        lanes: Lanes,
    ) -> Result<FuncId, RuleProviderError>;

    /// The reverse rule of `callee`: (forward part, pullback part), functions of `module` of types
    /// `Type::rev_fwd_fn` / `Type::rev_back_fn` of the callee's type, made on first request.
    fn reverse_rule(
        &mut self,
        module: &mut Module,
        callee: FuncRef,
    ) -> Result<(FuncId, FuncId), RuleProviderError> {
        let _ = (module, callee);
        Err(RuleProviderError::Unavailable(
            "this rule provider has no reverse rules".into(),
        ))
    }
}

/// Something that runs functions of a module on [`Val`]s with the
/// interpreter's meaning: the [`Interpreter`] itself, or compiled code
/// (`irad-codegen`'s JIT), which must agree with it bit for bit.
pub trait Executor {
    /// Runs `f` on `args`; see [`run`].
    fn run(&mut self, f: FuncId, args: &[Val], opts: &RunOptions) -> Result<Val, RunError>;
}

impl Executor for Interpreter<'_> {
    fn run(&mut self, f: FuncId, args: &[Val], opts: &RunOptions) -> Result<Val, RunError> {
        Interpreter::run(self, f, args, opts)
    }
}

/// Makes the [`Executor`] that runs a module whose function values get their
/// rules from a [`RuleProvider`] (the AD passes' gradient functions take one,
/// so they run in the interpreter or in compiled code alike).
pub type MakeExecutor = for<'m> fn(
    &'m mut Module,
    &'m mut dyn RuleProvider,
) -> Result<Box<dyn Executor + 'm>, RunError>;

/// The [`MakeExecutor`] of the interpreter.
pub fn interpreter_with_rules<'m>(
    module: &'m mut Module,
    provider: &'m mut dyn RuleProvider,
) -> Result<Box<dyn Executor + 'm>, RunError> {
    Ok(Box::new(Interpreter::with_rules(module, provider)))
}

/// What an [`Interpreter`] has done so far, over all its runs: for tests and
/// measurements of reverse mode's tape.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct InterpStats {
    /// Statements and terminators executed, phis included (a statement that
    /// fails counts).
    pub statements: u64,
    /// Values pushed on tapes.
    pub pushes: u64,
    /// Bytes pushed on tapes (8 for `f64`, `i64`, an array reference or a
    /// function value, 1 for `bool`, 0 for `()`, the sum of the parts for a
    /// tuple or a dual).
    pub pushed_bytes: u64,
    /// Bytes on all tapes now.
    pub tape_bytes: u64,
    /// The most bytes that were on all tapes at once.
    pub peak_tape_bytes: u64,
    /// The most bytes the tapes held at once, the elements of the arrays on
    /// array tapes (`[T]`) counted as well: what a tape keeps alive (an
    /// array pushed twice counted twice).
    pub peak_held_bytes: u64,
    /// Nodes made by the sparse tangent builder (`sonehot`, and `sscale`,
    /// `sadd` and the combinations of `ssum sdot sgemma sgemmb` where they
    /// do not fold to an operand).
    pub sparse_nodes: u64,
}

/// The module an interpreter runs: borrowed, or borrowed mutably together with
/// the provider that may add rules to it.
enum ModuleRef<'m> {
    Shared(&'m Module),
    WithRules(&'m mut Module, &'m mut dyn RuleProvider),
}

impl ModuleRef<'_> {
    fn get(&self) -> &Module {
        match self {
            ModuleRef::Shared(m) => m,
            ModuleRef::WithRules(m, _) => m,
        }
    }
}

/// The default limit on the number of active call frames.
pub const DEFAULT_MAX_DEPTH: usize = 100_000;

/// How to run a function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunOptions {
    /// The largest number of active call frames (the called function counts as
    /// one); a call that would exceed it is a run-time error.
    pub max_depth: usize,
    /// The largest number of steps a run may take (statements, terminators
    /// and phi moves, as [`InterpStats::statements`] counts them); checked at each
    /// terminator, so a run that takes more is the run-time error `step
    /// limit of N exceeded` at the terminator where it is noticed. Unlimited
    /// (`u64::MAX`) by default; the fuzzers set one.
    pub max_steps: u64,
    /// Frames at the bottom of the stack, of a wrapper irad runs around
    /// the function the user asked for (sparse mode's `@f.fwds.grad`), that
    /// do not count toward `max_depth`: the user's function is at depth 1
    /// under any driver. 0 by default.
    pub driver_frames: usize,
}

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions {
            max_depth: DEFAULT_MAX_DEPTH,
            max_steps: u64::MAX,
            driver_frames: 0,
        }
    }
}

/// Whose fault an error is: the program's (or the request's), or a bug of the
/// tool that reports it. Shared by the interpreter's [`RunError`], code
/// generation's error and the passes' errors (the AD passes call it
/// `AdErrorKind`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The program or the request: a run-time error such as `division by
    /// zero`, arguments that do not fit, a limit exceeded.
    User,
    /// A bug: something the verifier or the tool's own invariants exclude
    /// (type confusion, an invalid handle). The message starts with
    /// [`INTERNAL_ERROR`].
    Internal,
}

/// How the message of every internal error starts; [`internal_message`]
/// makes one.
pub const INTERNAL_ERROR: &str = "internal error: ";

/// The message of an internal error: `internal error: {what}`.
pub fn internal_message(what: impl fmt::Display) -> String {
    format!("{INTERNAL_ERROR}{what}")
}

impl ErrorKind {
    /// The kind of an error with message `msg` (errors that carry no kind of
    /// their own, such as the interpreter's, whose primitives report errors
    /// as text): [`ErrorKind::Internal`] exactly when `msg` starts with
    /// [`INTERNAL_ERROR`], as [`internal_message`] makes it.
    pub fn of_message(msg: &str) -> ErrorKind {
        if msg.starts_with(INTERNAL_ERROR) {
            ErrorKind::Internal
        } else {
            ErrorKind::User
        }
    }
}

/// A run-time error: where it happened, what happened, and the call sites that
/// led there. Its [`RunError::kind`] says whose fault it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunError {
    /// The failing statement (or the function, for argument errors).
    pub loc: Location,
    /// The message, lowercase, without location; an internal error's starts
    /// with [`INTERNAL_ERROR`] ([`RunError::internal`] makes one).
    pub msg: String,
    /// The call sites, from the innermost caller outward. A deep stack
    /// keeps its innermost and outermost [`TRACE_KEPT`] call sites only.
    pub trace: Vec<Location>,
    /// How many call sites were left out of `trace`, between its first
    /// [`TRACE_KEPT`] and its last (zero when it holds them all).
    pub trace_elided: u64,
}

/// How many of the innermost, and of the outermost, call sites an error's
/// trace keeps when the stack is deeper than twice this: a trace of every
/// frame of a deep recursion would itself exhaust memory.
pub const TRACE_KEPT: usize = 64;

impl RunError {
    /// The error `msg` at `loc`, without call sites.
    pub fn new(loc: Location, msg: impl Into<String>) -> RunError {
        RunError {
            loc,
            msg: msg.into(),
            trace: Vec::new(),
            trace_elided: 0,
        }
    }

    /// `self` with `n` call sites, the `i`-th (innermost first) being
    /// `site(i)`: all of them, or the [`TRACE_KEPT`] innermost and outermost
    /// and the count of the others in `trace_elided`, so that the trace of a
    /// deep recursion stays small.
    pub fn with_call_sites(self, n: usize, site: impl Fn(usize) -> Location) -> RunError {
        let (trace, elided) = if n <= 2 * TRACE_KEPT {
            ((0..n).map(&site).collect(), 0)
        } else {
            let ends = (0..TRACE_KEPT).chain(n - TRACE_KEPT..n);
            (ends.map(&site).collect(), n - 2 * TRACE_KEPT)
        };
        RunError {
            trace,
            trace_elided: elided as u64,
            ..self
        }
    }

    /// How many call sites led to the error: those in `trace` and those
    /// left out of it.
    pub fn call_sites(&self) -> u64 {
        self.trace.len() as u64 + self.trace_elided
    }

    /// An internal error (a bug, not a fault of the program) at `loc`,
    /// without call sites: the message `internal error: {what}`.
    pub fn internal(loc: Location, what: impl fmt::Display) -> RunError {
        RunError::new(loc, internal_message(what))
    }

    /// `self` with call sites `trace`, innermost caller first.
    pub fn with_trace(self, trace: Vec<Location>) -> RunError {
        RunError {
            trace,
            trace_elided: 0,
            ..self
        }
    }

    /// Whose fault it is: [`ErrorKind::Internal`] for a bug of the
    /// interpreter, compiled code or a rule provider (the message starts with
    /// [`INTERNAL_ERROR`]), [`ErrorKind::User`] for a run-time error of the
    /// program or its arguments.
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::of_message(&self.msg)
    }
}

impl crate::Diagnostic for RunError {
    fn location(&self) -> &Location {
        &self.loc
    }
    fn message(&self) -> &str {
        &self.msg
    }
}

impl fmt::Display for RunError {
    /// The message and its place, a derived function named for the user
    /// ([`crate::loc::Location::user_place`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::loc::with_user_place(&self.msg, &self.loc))
    }
}

impl std::error::Error for RunError {}

/// Applies primitive `prim` to evaluated operands exactly as the interpreter
/// does (one definition of the semantics, shared with constant folding in
/// `irad-passes`). For the primitives that need the interpreter itself
/// (`frule`, `push`, `pop`, `revfwd`, `revback`) and for `alloc` (whose element
/// type comes from the statement) it returns an error message, as it does for
/// a run-time error (`division by zero`, ...).
pub fn eval_prim(prim: Prim, args: &[&Val]) -> Result<Val, String> {
    eval::eval(prim, args, None)
}

/// Runs function `f` of `m` on `args` and returns its result.
///
/// The arguments are checked against `f`'s signature first. Array arguments
/// are shared with the caller: in-place writes are visible afterwards.
pub fn run(m: &Module, f: FuncId, args: &[Val], opts: &RunOptions) -> Result<Val, RunError> {
    Interpreter::new(m).run(f, args, opts)
}

/// Checks a call of `f` on `args` as every backend does before running it:
/// the function exists, the arguments match its parameters in number and
/// type, the depth limit allows one frame. Returns the function's location
/// (where errors about the call are reported).
pub fn check_call(
    module: &Module,
    f: FuncId,
    args: &[Val],
    opts: &RunOptions,
) -> Result<Location, RunError> {
    let Some(func) = module.get(f) else {
        return Err(RunError::new(
            Location::default(),
            format!("no function {f:?} in the module"),
        ));
    };
    let func_loc = Location {
        func: Some(func.name.as_str().into()),
        pos: func.pos,
        ..Location::default()
    };
    let fail = |msg: String| RunError::new(func_loc.clone(), msg);
    let params = func.param_types();
    if params.len() != args.len() {
        return Err(fail(format!(
            "@{} takes {} argument{}, found {}",
            func.name,
            params.len(),
            if params.len() == 1 { "" } else { "s" },
            args.len()
        )));
    }
    for (i, (ty, arg)) in params.iter().zip(args).enumerate() {
        if ty.mentions_sparse() {
            return Err(fail(format!(
                "argument {} of @{}: sparse values cannot be passed into a run (type {ty})",
                i + 1,
                func.name
            )));
        }
        if !arg.has_type(ty, module) {
            return Err(fail(format!(
                "argument {} of @{} must be {ty}, found {}",
                i + 1,
                func.name,
                arg.type_text(module)
            )));
        }
    }
    if opts.max_depth == 0 {
        return Err(fail(Trap::Depth(0).to_string()));
    }
    Ok(func_loc)
}

/// An interpreter for one module that keeps its translated functions between
/// runs; use it to run the same module many times.
pub struct Interpreter<'m> {
    module: ModuleRef<'m>,
    /// The forward rules met by `frule`, by (function value, lanes).
    rules: HashMap<(FuncRef, Lanes), FuncId>,
    /// The reverse rules met by `revfwd` and `revback`: (forward part,
    /// pullback part) by function value.
    rev_rules: HashMap<FuncRef, (FuncId, FuncId)>,
    /// The tapes of `push` and `pop`, and their counters.
    tapes: tape::Tapes,
    /// Statements and terminators executed, phis included.
    statements: u64,
    /// The sparse tangent builder, emptied at the start of each run.
    sparse: crate::sparse::SparseArena,
    /// Sparse nodes made over all runs.
    sparse_nodes: u64,
    /// Scratch of `sdense`.
    dense_scratch: Vec<f64>,
    /// The translated functions, by `FuncId` index, made on first call.
    cache: Vec<Option<Rc<CFunc>>>,
    /// Frame slot vectors of returned calls, reused by later calls.
    pool: Vec<Vec<Val>>,
    /// Holds the incoming values of phi moves while they are performed.
    scratch: Vec<Val>,
    /// Memory set aside while a run executes and given back when making a
    /// frame fails for want of memory, so that the error (its message and
    /// trace) can still be made.
    ballast: Vec<u8>,
    /// [`RunOptions::driver_frames`] of the run under way.
    driver_frames: usize,
}

/// The size of [`Interpreter::ballast`]: far more than an error needs.
const BALLAST_BYTES: usize = 1 << 20;

/// Where a run goes on after a block's terminator.
enum Resume {
    /// In the same frame, at the start of the edge's target block.
    Block,
    /// In the caller's frame, which is now the current one.
    Caller,
    /// Nowhere: the outermost call returned this value.
    Done(Val),
}

/// An active call.
struct Frame {
    func: Rc<CFunc>,
    slots: Vec<Val>,
    /// The current block's index in `func.blocks`.
    block: u32,
    /// The next statement to run in the current block's `ops`.
    pc: u32,
    /// Where the caller wants the result.
    ret_dst: Option<u32>,
}

impl<'m> Interpreter<'m> {
    /// An interpreter for `module`.
    pub fn new(module: &'m Module) -> Interpreter<'m> {
        Interpreter {
            cache: vec![None; module.len()],
            module: ModuleRef::Shared(module),
            rules: HashMap::new(),
            rev_rules: HashMap::new(),
            tapes: tape::Tapes::default(),
            statements: 0,
            sparse: crate::sparse::SparseArena::default(),
            sparse_nodes: 0,
            dense_scratch: Vec::new(),
            pool: Vec::new(),
            scratch: Vec::new(),
            ballast: Vec::new(),
            driver_frames: 0,
        }
    }

    /// An interpreter for `module` that asks `provider` for the forward and
    /// reverse rules of function values (`frule`, `revfwd`, `revback`), which
    /// it adds to `module`.
    pub fn with_rules(
        module: &'m mut Module,
        provider: &'m mut dyn RuleProvider,
    ) -> Interpreter<'m> {
        Interpreter {
            cache: vec![None; module.len()],
            module: ModuleRef::WithRules(module, provider),
            rules: HashMap::new(),
            rev_rules: HashMap::new(),
            tapes: tape::Tapes::default(),
            statements: 0,
            sparse: crate::sparse::SparseArena::default(),
            sparse_nodes: 0,
            dense_scratch: Vec::new(),
            pool: Vec::new(),
            scratch: Vec::new(),
            ballast: Vec::new(),
            driver_frames: 0,
        }
    }

    /// The module, with every rule added so far.
    pub fn module(&self) -> &Module {
        self.module.get()
    }

    /// The counters of everything this interpreter has run so far.
    pub fn stats(&self) -> InterpStats {
        InterpStats {
            statements: self.statements,
            pushes: self.tapes.pushes,
            pushed_bytes: self.tapes.pushed_bytes,
            tape_bytes: self.tapes.bytes,
            peak_tape_bytes: self.tapes.peak_bytes,
            peak_held_bytes: self.tapes.peak_held_bytes,
            sparse_nodes: self.sparse_nodes,
        }
    }

    /// A sparse tangent builder statement: `prim` on `args`.
    fn sparse_op(&mut self, prim: Prim, args: &[&Val]) -> Result<Val, String> {
        let before = self.sparse.len();
        let res = match (prim, args) {
            (Prim::Szero, []) => Ok(Val::Sparse(0)),
            (Prim::Sonehot, [Val::I64(k)]) => self.sparse.onehot(*k).map(Val::Sparse),
            (Prim::Sscale, [Val::F64(c), Val::Sparse(a)]) => {
                self.sparse.scale(*c, *a).map(Val::Sparse)
            }
            (Prim::Sadd, [Val::Sparse(a), Val::Sparse(b)]) => {
                self.sparse.add(*a, *b).map(Val::Sparse)
            }
            (Prim::Sdense, [Val::Sparse(a), Val::I64(n)]) => {
                let len = eval::array_len(*n)?;
                let mut out = std::mem::take(&mut self.dense_scratch);
                let res = self.sparse.dense(*a, len, &mut out);
                let val = res.map(|()| Val::f64_array(out.clone()));
                self.dense_scratch = out;
                val
            }
            (Prim::Ssum | Prim::Sdot | Prim::Sfill | Prim::Sgemma | Prim::Sgemmb, _) => {
                let res = sparse_bulk::run(&mut self.sparse, prim, args);
                self.sparse_nodes += (self.sparse.len() - before) as u64;
                return res;
            }
            _ => {
                let kinds: Vec<&str> = args.iter().map(|v| v.kind()).collect();
                return Err(internal_message(format_args!(
                    "`{prim}` applied to ({})",
                    kinds.join(", ")
                )));
            }
        };
        self.sparse_nodes += (self.sparse.len() - before) as u64;
        res.map_err(|e| e.to_string())
    }

    /// The forward part (`back` false) or pullback part (`back` true) of the
    /// reverse rule of `callee`: from this interpreter's memo, else from the
    /// provider, whose answer is checked against the types the callee's type
    /// asks for.
    fn reverse_rule(&mut self, callee: FuncRef, back: bool) -> Result<Val, String> {
        let (fwd, pullback) = match self.rev_rules.get(&callee) {
            Some(&pair) => pair,
            None => {
                let ModuleRef::WithRules(module, provider) = &mut self.module else {
                    let prim = if back { "revback" } else { "revfwd" };
                    return Err(format!(
                        "no rule provider for {prim}: run reverse rules through the reverse-mode API"
                    ));
                };
                let sig = match callee {
                    FuncRef::User(id) => module.get(id).map(|f| f.fn_type()),
                    FuncRef::Prim(p) => match p.fn_type() {
                        Some(Type::Func(sig)) => Some((*sig).clone()),
                        _ => None,
                    },
                }
                .ok_or_else(|| {
                    internal_message("the reverse rule of a function that does not exist")
                })?;
                let pair = provider
                    .reverse_rule(module, callee)
                    .map_err(|e| e.to_string())?;
                let parts = [
                    (pair.0, Type::rev_fwd_fn(&sig), "forward part"),
                    (pair.1, Type::rev_back_fn(&sig), "pullback part"),
                ];
                for (id, want, what) in parts {
                    let want = Type::from_fn(want);
                    let got = module.get(id).map(|f| Type::from_fn(f.fn_type()));
                    if got.as_ref() != Some(&want) {
                        return Err(internal_message(format_args!(
                            "the reverse rule's {what} has type {}, not {want}",
                            got.map_or("nothing".to_string(), |t| t.to_string())
                        )));
                    }
                }
                if self.cache.len() < module.len() {
                    self.cache.resize(module.len(), None);
                }
                self.rev_rules.insert(callee, pair);
                pair
            }
        };
        Ok(Val::Func(FuncRef::User(if back { pullback } else { fwd })))
    }

    /// The forward rule of `callee` with `lanes`, of type `want`: from this
    /// interpreter's memo, else from the provider.
    fn forward_rule(&mut self, callee: FuncRef, lanes: Lanes, want: &Type) -> Result<Val, String> {
        let id = match self.rules.get(&(callee, lanes)) {
            Some(&id) => id,
            None => {
                let ModuleRef::WithRules(module, provider) = &mut self.module else {
                    return Err(
                        "no rule provider for frule: run forward rules through the forward-mode API"
                            .into(),
                    );
                };
                let id = provider
                    .forward_rule(module, callee, lanes)
                    .map_err(|e| e.to_string())?;
                let got = module.get(id).map(|f| Type::from_fn(f.fn_type()));
                if got.as_ref() != Some(want) {
                    return Err(internal_message(format_args!(
                        "the forward rule has type {}, not {want}",
                        got.map_or("nothing".to_string(), |t| t.to_string())
                    )));
                }
                if self.cache.len() < module.len() {
                    self.cache.resize(module.len(), None);
                }
                self.rules.insert((callee, lanes), id);
                id
            }
        };
        Ok(Val::Func(FuncRef::User(id)))
    }

    /// Runs function `f` on `args`; see [`run`].
    pub fn run(&mut self, f: FuncId, args: &[Val], opts: &RunOptions) -> Result<Val, RunError> {
        let func_loc = check_call(self.module.get(), f, args, opts)?;
        let fail = |msg: String| RunError::new(func_loc.clone(), msg);
        let cf = self.compiled(f).map_err(fail)?;
        self.sparse.clear();
        let frame = self.enter(cf, args.iter().cloned(), None).map_err(fail)?;
        let steps_end = self.statements.saturating_add(opts.max_steps);
        // The driver's frames are below the user's: they raise the limit
        // the stack is checked against, not the one messages name.
        self.driver_frames = opts.driver_frames;
        let limit = opts.max_depth.saturating_add(opts.driver_frames);
        self.execute(frame, limit, (opts.max_steps, steps_end))
    }

    /// The translated form of function `f`, made on first use.
    fn compiled(&mut self, f: FuncId) -> Result<Rc<CFunc>, String> {
        let slot = self
            .cache
            .get_mut(f.index())
            .ok_or_else(|| internal_message(format_args!("invalid function handle {f:?}")))?;
        if let Some(cf) = slot {
            return Ok(Rc::clone(cf));
        }
        let func = self
            .module
            .get()
            .get(f)
            .ok_or_else(|| internal_message(format_args!("invalid function handle {f:?}")))?;
        let cf = Rc::new(compile::compile(func, self.module.get(), &mut self.tapes));
        *slot = Some(Rc::clone(&cf));
        Ok(cf)
    }

    /// A new frame for `cf` with its parameters bound to `args`.
    fn enter(
        &mut self,
        cf: Rc<CFunc>,
        args: impl ExactSizeIterator<Item = Val>,
        ret_dst: Option<u32>,
    ) -> Result<Frame, String> {
        let entry = cf.entry.clone().map_err(String::from)?;
        if args.len() != cf.params.len() {
            return Err(internal_message(format_args!(
                "@{} takes {} arguments, found {}",
                cf.name,
                cf.params.len(),
                args.len()
            )));
        }
        let mut slots = self.pool.pop().unwrap_or_default();
        // A deep recursion (a large `max_depth`) can exhaust memory one
        // frame at a time: a located error then, never an abort.
        if slots
            .try_reserve(cf.n_slots.saturating_sub(slots.len()))
            .is_err()
        {
            self.ballast = Vec::new();
            return Err(format!("out of memory making a frame of @{}", cf.name));
        }
        slots.resize(cf.n_slots, Val::Unit);
        for (&param, arg) in cf.params.iter().zip(args) {
            // `compile` keeps only parameter slots below `n_slots`.
            if let Some(slot) = slots.get_mut(param as usize) {
                *slot = arg;
            }
        }
        Ok(Frame {
            func: cf,
            slots,
            block: entry,
            pc: 0,
            ret_dst,
        })
    }

    /// Runs `frame` and every call it makes to completion.
    /// `steps` is the step limit and the value of the statement counter
    /// where the run reaches it.
    fn execute(
        &mut self,
        mut cur: Frame,
        max_depth: usize,
        steps: (u64, u64),
    ) -> Result<Val, RunError> {
        let mut stack: Vec<Frame> = Vec::new();
        if self.ballast.capacity() == 0 {
            // Address space only: the pages are never touched.
            let _ = self.ballast.try_reserve_exact(BALLAST_BYTES);
        }
        'frame: loop {
            let cf = Rc::clone(&cur.func);
            loop {
                let Some(block) = cf.blocks.get(cur.block as usize) else {
                    let msg = internal_message("invalid block index");
                    return Err(error_in(&cf, None, None, msg, &stack));
                };
                while let Some(op) = block.ops.get(cur.pc as usize) {
                    cur.pc += 1;
                    self.statements += 1;
                    if let Some(callee) =
                        self.run_op(&cf, block, op, &mut cur, &stack, max_depth)?
                    {
                        if stack.len() == stack.capacity()
                            && stack.try_reserve(stack.len().max(16)).is_err()
                        {
                            self.ballast = Vec::new();
                            let depth = stack.len() + 1;
                            let msg = format!(
                                "out of memory growing the call stack at call depth {depth}"
                            );
                            return Err(error_in(
                                &cf,
                                Some(block),
                                Some((op.stmt, op.pos)),
                                msg,
                                &stack,
                            ));
                        }
                        stack.push(std::mem::replace(&mut cur, callee));
                        continue 'frame;
                    }
                }
                self.statements += 1;
                match self.run_term(&cf, block, &mut cur, &mut stack, steps)? {
                    Resume::Block => {}
                    Resume::Caller => continue 'frame,
                    Resume::Done(val) => return Ok(val),
                }
            }
        }
    }

    /// Runs statement `op` of `block` in frame `cur` (whose callers are
    /// `stack`). A call gives the callee's new frame, to run next.
    fn run_op(
        &mut self,
        cf: &CFunc,
        block: &CBlock,
        op: &Op,
        cur: &mut Frame,
        stack: &[Frame],
        max_depth: usize,
    ) -> Result<Option<Frame>, RunError> {
        let located = |msg: String, stack: &[Frame]| {
            error_in(cf, Some(block), Some((op.stmt, op.pos)), msg, stack)
        };
        match &op.kind {
            OpKind::Prim {
                prim,
                args,
                dst,
                elem,
            } => {
                if fast_prim(cf, &mut cur.slots, *prim, args, *dst) {
                    return Ok(None);
                }
                let res = apply_prim(cf, &cur.slots, *prim, args, *elem);
                let val = res.map_err(|msg| located(msg, stack))?;
                store(&mut cur.slots, *dst, val).map_err(|msg| located(msg, stack))?;
            }
            OpKind::Invoke { func, args, dst } => {
                if stack.len() + 2 > max_depth {
                    let shown = max_depth - self.driver_frames;
                    let msg = Trap::Depth(i64::try_from(shown).unwrap_or(i64::MAX)).to_string();
                    return Err(located(msg, stack));
                }
                let callee = self
                    .call_frame(cf, &cur.slots, *func, args, *dst)
                    .map_err(|msg| located(msg, stack))?;
                return Ok(Some(callee));
            }
            OpKind::Tuple { args, dst, ty } => {
                let res = apply_prim(cf, &cur.slots, Prim::Tuple, args, None);
                let val = res.map_err(|msg| located(msg, stack))?;
                if !has_shape(&val, ty) {
                    let msg = internal_message(format_args!("tuple does not have its type {ty}"));
                    return Err(located(msg, stack));
                }
                store(&mut cur.slots, Some(*dst), val).map_err(|msg| located(msg, stack))?;
            }
            OpKind::CallValue { callee, args, dst } => {
                let call = (*callee, args, dst);
                return self.call_value(cf, cur, stack, max_depth, call, &located);
            }
            OpKind::Frule { args, dst, ty } => {
                let res = match operands(cf, args).and_then(|srcs| match srcs {
                    [f, w] => Ok((read(&cur.slots, f)?, read(&cur.slots, w)?)),
                    _ => Err(internal_message("`frule` takes 2 operands")),
                }) {
                    Ok((Val::Func(callee), Val::I64(width))) => {
                        let callee = *callee;
                        match Lanes::from_code(*width) {
                            Some(lanes) => self.forward_rule(callee, lanes, ty),
                            None => Err(internal_message(format_args!(
                                "batch width {width} out of range"
                            ))),
                        }
                    }
                    Ok(_) => Err(internal_message("bad operands of `frule`")),
                    Err(msg) => Err(msg),
                };
                let val = res.map_err(|msg| located(msg, stack))?;
                store(&mut cur.slots, Some(*dst), val).map_err(|msg| located(msg, stack))?;
            }
            OpKind::Push { arg, tape } => {
                let val = read(&cur.slots, arg).map_err(|msg| located(msg, stack))?;
                self.tapes
                    .push(*tape, val.clone())
                    .map_err(|msg| located(msg, stack))?;
            }
            OpKind::Pop { dst, tape } => {
                let val = self.tapes.pop(*tape).map_err(|msg| located(msg, stack))?;
                store(&mut cur.slots, Some(*dst), val).map_err(|msg| located(msg, stack))?;
            }
            OpKind::RevRule { back, arg, dst } => {
                let res = match read(&cur.slots, arg) {
                    Ok(Val::Func(callee)) => self.reverse_rule(*callee, *back),
                    Ok(other) => Err(internal_message(format_args!(
                        "the reverse rule of a value of kind {}",
                        other.kind()
                    ))),
                    Err(msg) => Err(msg),
                };
                let val = res.map_err(|msg| located(msg, stack))?;
                store(&mut cur.slots, *dst, val).map_err(|msg| located(msg, stack))?;
            }
            OpKind::Sparse { prim, args, dst } => {
                let res = operands(cf, args).and_then(|srcs| {
                    let mut vals: SmallVec<[&Val; 2]> = SmallVec::new();
                    for src in srcs {
                        vals.push(read(&cur.slots, src)?);
                    }
                    self.sparse_op(*prim, &vals)
                });
                let val = res.map_err(|msg| located(msg, stack))?;
                store(&mut cur.slots, *dst, val).map_err(|msg| located(msg, stack))?;
            }
            OpKind::Bad(msg) => return Err(located(msg.to_string(), stack)),
        }
        Ok(None)
    }

    /// Runs a call of the function value in slot `call.0` with operands
    /// `call.1` into slot `call.2`: a user function gives its new frame, a
    /// primitive is applied at once.
    fn call_value(
        &mut self,
        cf: &CFunc,
        cur: &mut Frame,
        stack: &[Frame],
        max_depth: usize,
        (callee, args, dst): (u32, &std::ops::Range<u32>, &Option<u32>),
        located: &dyn Fn(String, &[Frame]) -> RunError,
    ) -> Result<Option<Frame>, RunError> {
        match cur.slots.get(callee as usize) {
            Some(Val::Func(FuncRef::User(func))) => {
                if stack.len() + 2 > max_depth {
                    let shown = max_depth - self.driver_frames;
                    let msg = Trap::Depth(i64::try_from(shown).unwrap_or(i64::MAX)).to_string();
                    return Err(located(msg, stack));
                }
                let func = *func;
                let callee = self
                    .call_frame(cf, &cur.slots, func, args, *dst)
                    .map_err(|msg| located(msg, stack))?;
                return Ok(Some(callee));
            }
            Some(Val::Func(FuncRef::Prim(prim))) => {
                // Only primitives of one fixed signature are values;
                // this also keeps `tuple` and `alloc` out of here.
                if !matches!(prim.info().sig, Sig::Fixed(..)) {
                    let msg =
                        internal_message(format_args!("primitive `{prim}` called as a value"));
                    return Err(located(msg, stack));
                }
                let res = apply_prim(cf, &cur.slots, *prim, args, None);
                let val = res.map_err(|msg| located(msg, stack))?;
                store(&mut cur.slots, *dst, val).map_err(|msg| located(msg, stack))?;
            }
            other => {
                let kind = other.map_or("nothing", Val::kind);
                let msg = internal_message(format_args!("called a value of kind {kind}"));
                return Err(located(msg, stack));
            }
        }
        Ok(None)
    }

    /// Runs the terminator of `block` in frame `cur` (whose callers are
    /// `stack`), counting the step and the phi moves against `steps`: takes
    /// an edge, or returns to the caller (or out of the run).
    fn run_term(
        &mut self,
        cf: &CFunc,
        block: &CBlock,
        cur: &mut Frame,
        stack: &mut Vec<Frame>,
        steps: (u64, u64),
    ) -> Result<Resume, RunError> {
        let at_term = |msg: String, stack: &[Frame]| {
            let place = Some((block.term_stmt, block.term_pos));
            error_in(cf, Some(block), place, msg, stack)
        };
        if self.statements > steps.1 {
            let msg = format!("step limit of {} exceeded", steps.0);
            return Err(at_term(msg, stack));
        }
        let edge = match &block.term {
            Term::Goto(edge) => edge,
            Term::GotoIfNot { cond, next, target } => match read(&cur.slots, cond) {
                Ok(Val::Bool(true)) => next,
                Ok(Val::Bool(false)) => target,
                Ok(other) => {
                    let msg = internal_message(format_args!(
                        "gotoifnot condition is {}, not bool",
                        other.kind()
                    ));
                    return Err(at_term(msg, stack));
                }
                Err(msg) => return Err(at_term(msg, stack)),
            },
            Term::Switch { index, targets } => match read(&cur.slots, index) {
                Ok(Val::I64(i)) => match usize::try_from(*i).ok().and_then(|k| targets.get(k)) {
                    Some(edge) => edge,
                    None => {
                        let msg = Trap::Switch {
                            index: *i,
                            targets: targets.len() as i64,
                        }
                        .to_string();
                        return Err(at_term(msg, stack));
                    }
                },
                Ok(other) => {
                    let msg =
                        internal_message(format_args!("switch index is {}, not i64", other.kind()));
                    return Err(at_term(msg, stack));
                }
                Err(msg) => return Err(at_term(msg, stack)),
            },
            Term::Return(src) => {
                let val = read(&cur.slots, src)
                    .map_err(|msg| at_term(msg, stack))?
                    .clone();
                let Some(caller) = stack.pop() else {
                    return Ok(Resume::Done(val));
                };
                let done = std::mem::replace(cur, caller);
                let mut slots = done.slots;
                slots.clear();
                self.pool.push(slots);
                if let Err(msg) = store(&mut cur.slots, done.ret_dst, val) {
                    // Locate the failure at the call statement of the caller.
                    return Err(call_site_error(cur, msg, stack));
                }
                return Ok(Resume::Caller);
            }
            Term::Bad(msg) => return Err(at_term(msg.to_string(), stack)),
        };
        let edge = edge
            .as_ref()
            .map_err(|msg| at_term(msg.to_string(), stack))?;
        self.statements += edge.moves.len() as u64;
        take_edge(&mut cur.slots, edge, &mut self.scratch).map_err(|msg| at_term(msg, stack))?;
        cur.block = edge.target;
        cur.pc = 0;
        Ok(Resume::Block)
    }

    /// The frame of a call of `func` from a statement of `cf` with operands `args`.
    fn call_frame(
        &mut self,
        cf: &CFunc,
        slots: &[Val],
        func: FuncId,
        args: &std::ops::Range<u32>,
        dst: Option<u32>,
    ) -> Result<Frame, String> {
        let callee = self.compiled(func)?;
        let srcs = operands(cf, args)?;
        let mut vals: SmallVec<[Val; 4]> = SmallVec::with_capacity(srcs.len());
        for src in srcs {
            vals.push(read(slots, src)?.clone());
        }
        self.enter(callee, vals.into_iter(), dst)
    }
}

/// Whether `val` has the tuple structure of `ty` (leaves are compared by kind
/// only). A verified module always passes; checking each new tuple against its
/// static type bounds the nesting of every tuple value by the module's types,
/// so type-confused IR cannot build a tuple deep enough to overflow the stack
/// when it is dropped. Costs O(size of `ty`).
fn has_shape(val: &Val, ty: &Type) -> bool {
    let mut work: SmallVec<[(&Val, &Type); 8]> = SmallVec::new();
    work.push((val, ty));
    while let Some((val, ty)) = work.pop() {
        let ok = match (val, ty) {
            (Val::Tuple(vals), Type::Tuple(tys)) => {
                work.extend(vals.iter().zip(tys.iter()));
                vals.len() == tys.len()
            }
            (Val::F64(_), Type::F64)
            | (Val::I64(_), Type::I64)
            | (Val::Bool(_), Type::Bool)
            | (Val::Unit, Type::Unit)
            | (Val::Array(_), Type::Array(_))
            | (Val::Sparse(_), Type::Sparse)
            | (Val::Func(_), Type::Func(_)) => true,
            // A dual in a tuple (reverse over forward returns the value of a
            // forward rule with its cotangents): its number of parts.
            (Val::Dual(vals), Type::Dual(inner, lanes)) => match inner.tangent_at(*lanes) {
                Some(tan) if vals.len() == lanes.count() + 1 => {
                    work.push((&vals[0], inner));
                    // The tangent type is owned here: check the tangents now
                    // (as deep as the type, which the verifier bounds).
                    vals[1..].iter().all(|t| has_shape(t, &tan))
                }
                _ => false,
            },
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// The operands of a statement of `cf`.
fn operands<'a>(cf: &'a CFunc, args: &std::ops::Range<u32>) -> Result<&'a [Src], String> {
    cf.operands
        .get(args.start as usize..args.end as usize)
        .ok_or_else(|| internal_message("invalid operand range"))
}

/// Tries `eval::fast` on the operands and stores the result in place; false
/// when the statement is not a fast case (or anything is amiss), in which case
/// nothing was written and the general path runs. Moving a `Val` through a
/// `Result` costs a store-forwarding stall per statement, which this avoids.
#[inline(always)]
fn fast_prim(
    cf: &CFunc,
    slots: &mut [Val],
    prim: Prim,
    args: &std::ops::Range<u32>,
    dst: Option<u32>,
) -> bool {
    let Some(dst) = dst else { return false };
    let Some(srcs) = cf.operands.get(args.start as usize..args.end as usize) else {
        return false;
    };
    let val = match srcs {
        [a] => match read(slots, a) {
            Ok(a) => eval::fast(prim, &[a]),
            Err(_) => None,
        },
        [a, b] => match (read(slots, a), read(slots, b)) {
            (Ok(a), Ok(b)) => eval::fast(prim, &[a, b]),
            _ => None,
        },
        _ => None,
    };
    match (val, slots.get_mut(dst as usize)) {
        (Some(val), Some(slot)) => {
            *slot = val;
            true
        }
        _ => false,
    }
}

/// Applies `prim` to the operands `args` read from `slots`.
fn apply_prim(
    cf: &CFunc,
    slots: &[Val],
    prim: Prim,
    args: &std::ops::Range<u32>,
    elem: Option<Scalar>,
) -> Result<Val, String> {
    // Most statements have one to three operands: gather those into a fixed
    // array, the rest into a small vector, to keep the hot path allocation-free.
    match operands(cf, args)? {
        [a] => eval::eval(prim, &[read(slots, a)?], elem),
        [a, b] => eval::eval(prim, &[read(slots, a)?, read(slots, b)?], elem),
        [a, b, c] => {
            let vals = [read(slots, a)?, read(slots, b)?, read(slots, c)?];
            eval::eval(prim, &vals, elem)
        }
        srcs => {
            let mut vals: SmallVec<[&Val; 8]> = SmallVec::with_capacity(srcs.len());
            for src in srcs {
                vals.push(read(slots, src)?);
            }
            eval::eval(prim, &vals, elem)
        }
    }
}

/// The value of operand `src` in a frame with `slots`.
#[inline(always)]
fn read<'a>(slots: &'a [Val], src: &'a Src) -> Result<&'a Val, String> {
    match src {
        Src::Slot(s) => slots
            .get(*s as usize)
            .ok_or_else(|| internal_message("invalid value slot")),
        Src::Const(v) => Ok(v),
    }
}

/// Stores a statement's result, if it has one.
#[inline(always)]
fn store(slots: &mut [Val], dst: Option<u32>, val: Val) -> Result<(), String> {
    if let Some(d) = dst {
        let slot = slots
            .get_mut(d as usize)
            .ok_or_else(|| internal_message("invalid value slot"))?;
        *slot = val;
    }
    Ok(())
}

/// Performs the phi moves of `edge` simultaneously: every incoming value is
/// read before any phi is written, so `a, b = b, a` swaps.
fn take_edge(slots: &mut [Val], edge: &Edge, scratch: &mut Vec<Val>) -> Result<(), String> {
    match &*edge.moves {
        [] => Ok(()),
        [(dst, src)] => {
            let val = read(slots, src)?.clone();
            store(slots, Some(*dst), val)
        }
        [(dst0, src0), (dst1, src1)] => {
            let val0 = read(slots, src0)?.clone();
            let val1 = read(slots, src1)?.clone();
            store(slots, Some(*dst0), val0)?;
            store(slots, Some(*dst1), val1)
        }
        moves => {
            scratch.clear();
            for (_, src) in moves {
                scratch.push(read(slots, src)?.clone());
            }
            for ((dst, _), val) in moves.iter().zip(scratch.drain(..)) {
                store(slots, Some(*dst), val)?;
            }
            Ok(())
        }
    }
}

/// A located error in function `cf`, block `block`, at statement `place`
/// (number and source position), with the call sites of `stack`.
fn error_in(
    cf: &CFunc,
    block: Option<&CBlock>,
    place: Option<(u32, Option<Pos>)>,
    msg: String,
    stack: &[Frame],
) -> RunError {
    let loc = Location {
        func: Some(cf.name.as_ref().into()),
        block: block.map(|b| b.label),
        stmt: place.map(|(stmt, _)| stmt),
        pos: place.and_then(|(_, pos)| pos),
    };
    with_stack(RunError::new(loc, msg), stack)
}

/// `err` with the call sites of `stack` (outermost first in `stack`,
/// innermost first in the trace).
fn with_stack(err: RunError, stack: &[Frame]) -> RunError {
    let n = stack.len();
    err.with_call_sites(n, |i| call_site(&stack[n - 1 - i]))
}

/// An error at the call statement `frame` is executing.
fn call_site_error(frame: &Frame, msg: String, stack: &[Frame]) -> RunError {
    with_stack(RunError::new(call_site(frame), msg), stack)
}

/// The location of the call statement a suspended frame is executing: the
/// statement before its `pc`.
fn call_site(frame: &Frame) -> Location {
    let block = frame.func.blocks.get(frame.block as usize);
    let op = block.and_then(|b| b.ops.get((frame.pc as usize).checked_sub(1)?));
    Location {
        func: Some(frame.func.name.as_ref().into()),
        block: block.map(|b| b.label),
        stmt: op.map(|op| op.stmt),
        pos: op.and_then(|op| op.pos),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_internal_error_has_its_kind_and_the_old_text() {
        let loc = Location {
            func: Some("f".into()),
            block: None,
            stmt: None,
            pos: Some(Pos::new(2, 3)),
        };
        let e = RunError::internal(loc.clone(), "invalid value slot");
        assert_eq!(e.kind(), ErrorKind::Internal);
        assert_eq!(e.msg, "internal error: invalid value slot");
        assert_eq!(
            e.to_string(),
            with_place_of("internal error: invalid value slot", &loc)
        );
        assert!(e.trace.is_empty());
        let traced = e.clone().with_trace(vec![loc.clone()]);
        assert_eq!(
            (traced.kind(), traced.trace.len()),
            (ErrorKind::Internal, 1)
        );
        // Messages made as text by the interpreter's primitives.
        let made = RunError::new(loc.clone(), internal_message(format_args!("x {}", 1)));
        assert_eq!(
            (made.kind(), made.msg.as_str()),
            (ErrorKind::Internal, "internal error: x 1")
        );
        let user = RunError::new(loc, "division by zero");
        assert_eq!(user.kind(), ErrorKind::User);
    }

    fn with_place_of(msg: &str, loc: &Location) -> String {
        crate::loc::with_place(msg, loc)
    }

    #[test]
    fn malformed_ir_is_an_internal_run_error() {
        // A function whose only block has no terminator.
        let mut m = Module::new();
        let mut func = crate::func::Func::new("f", Vec::new(), Type::F64);
        func.add_block(0);
        let f = m.add_func(func).expect("a new name");
        let e = run(&m, f, &[], &RunOptions::default()).expect_err("no terminator");
        assert_eq!(e.kind(), ErrorKind::Internal);
        assert!(e.msg.starts_with("internal error: block #"), "{}", e.msg);
    }
}
