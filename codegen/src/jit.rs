//! The JIT: compiles functions of a module in process and calls them with the
//! interpreter's values, reporting the interpreter's errors.
//!
//! [`Jit::run`] compiles the function called and everything it can reach
//! (static callees, function constants, function values among the arguments)
//! on first use, then calls it through a trampoline of fixed signature.
//! Function values met at run time whose rules are not built yet
//! (`frule`, `revfwd`, `revback`) are derived by the [`RuleProvider`], compiled
//! and cached in the middle of the run (the rule function `irad_rule` calls back
//! into the JIT).
//!
//! Arrays passed in are shared with compiled code (in-place writes are seen by
//! the caller, as with the interpreter). Arrays compiled code allocates live
//! in the runtime's arena: results are copied out, and the arena is freed after
//! a call that leaves every tape empty (values left on tapes, as by a forward
//! sweep run alone, keep the arena and the argument arrays alive until a later
//! call empties the tapes).

use crate::CodegenError;
use crate::error::{Failure, run_error};
use crate::layout::{leaf_count, leaf_list};
use crate::lower::{Compiler, RULE_FN};
use cranelift_codegen::ir::{AbiParam, InstBuilder, MemFlagsData, Signature, types};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{ArenaMemoryProvider, JITBuilder, JITModule};
use cranelift_module::{Module as ClModule, default_libcall_names};
use irad_ir::func::{FuncId, FuncRef, Module};
use irad_ir::interp::{
    ArrayData, ArrayRef, Executor, RuleProvider, RunError, RunOptions, Val, internal_message,
};
use irad_ir::types::{FnType, Lanes, Scalar, Type};
use irad_runtime::{self as rt, Ctx, RuleKind, Runtime};
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;

/// How much native stack compiled code may use, unless set with
/// [`Jit::set_stack_budget`] or [`set_thread_stack_budget`]: 256 MiB, enough
/// for the default call-depth limit (100 000) with frames of 2.6 KiB, and for
/// depth 10 000 with frames of 26 KiB. When the calling thread has less
/// stack left (a spawned thread has 2 MiB), [`Jit::run`] runs compiled code
/// on a stack of its own (`stacker`); the memory is reserved, and only what
/// is used is committed.
pub const DEFAULT_STACK_BUDGET: usize = 256 << 20;

/// Stack kept free below the budget, for the frame of the callee of the last
/// checked call and for the runtime (rule derivation compiles code there).
const STACK_MARGIN: usize = 1 << 20;

thread_local! {
    static STACK_BUDGET: std::cell::Cell<usize> = const { std::cell::Cell::new(DEFAULT_STACK_BUDGET) };
}

/// Sets the stack budget of JITs made on this thread from now on.
pub fn set_thread_stack_budget(bytes: usize) {
    STACK_BUDGET.with(|b| b.set(bytes));
}

/// The [`irad_ir::interp::MakeExecutor`] of the JIT: compiled code for the
/// gradient functions of the AD passes.
pub fn jit_with_rules<'m>(
    module: &'m mut Module,
    provider: &'m mut dyn RuleProvider,
) -> Result<Box<dyn Executor + 'm>, RunError> {
    let jit = Jit::with_rules(module, provider).map_err(|e| RunError::new(e.loc, e.msg))?;
    Ok(Box::new(jit))
}

impl Executor for Jit<'_> {
    fn run(&mut self, f: FuncId, args: &[Val], opts: &RunOptions) -> Result<Val, RunError> {
        Jit::run(self, f, args, opts)
    }
}

enum ModuleRef<'m> {
    Shared(&'m Module),
    WithRules(&'m mut Module, &'m mut dyn RuleProvider),
    Owned(Box<Module>, Option<Box<dyn RuleProvider + 'm>>),
}

impl ModuleRef<'_> {
    fn get(&self) -> &Module {
        match self {
            ModuleRef::Shared(m) => m,
            ModuleRef::WithRules(m, _) => m,
            ModuleRef::Owned(m, _) => m,
        }
    }

    /// The module and the rule provider, when there is one.
    fn with_rules(&mut self) -> Option<(&mut Module, &mut dyn RuleProvider)> {
        match self {
            ModuleRef::Shared(_) | ModuleRef::Owned(_, None) => None,
            ModuleRef::WithRules(m, p) => Some((&mut **m, &mut **p)),
            ModuleRef::Owned(m, Some(p)) => Some((&mut **m, &mut **p)),
        }
    }
}

/// A JIT for one module; see the module documentation.
pub struct Jit<'m> {
    st: Box<State<'m>>,
}

struct State<'m> {
    module: ModuleRef<'m>,
    /// Taken out only by `Drop`, which frees the code memory.
    comp: std::mem::ManuallyDrop<Compiler<JITModule>>,
    /// Code addresses by handle.
    table: Vec<*const u8>,
    rt: Box<Runtime>,
    /// Rules met at run time: (kind, handle, width) to handle.
    rules: HashMap<(RuleKind, u32, i64), u32>,
    trampolines: HashMap<FuncId, *const u8>,
    /// Argument arrays kept alive while tapes hold values.
    pinned: Vec<ArrayRef>,
    stack_budget: usize,
    /// The JIT's own stack, mapped on first need and kept for later runs.
    own_stack: Option<OwnStack>,
}

/// A stack for compiled code when the caller's thread has too little: mapped
/// once (reserved, committed only as it is used), with an inaccessible page
/// below it, and reused by every run that needs it.
struct OwnStack {
    base: *mut u8,
    size: usize,
    guard: usize,
}

impl OwnStack {
    #[cfg(unix)]
    fn map(size: usize) -> Option<OwnStack> {
        let guard = 1 << 16;
        let total = size.checked_add(guard)?;
        // SAFETY: an anonymous private mapping, checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                total,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        // SAFETY: the first `guard` bytes of the mapping just made.
        if unsafe { libc::mprotect(p, guard, libc::PROT_NONE) } != 0 {
            // SAFETY: unmaps the mapping just made.
            unsafe { libc::munmap(p, total) };
            return None;
        }
        Some(OwnStack {
            base: p.cast(),
            size,
            guard,
        })
    }

    #[cfg(not(unix))]
    fn map(_size: usize) -> Option<OwnStack> {
        None
    }
}

impl Drop for State<'_> {
    fn drop(&mut self) {
        // SAFETY: `comp` is not used again. Nothing compiled runs any more
        // (running borrows the `Jit` mutably) and no code address leaves the
        // `Jit` (function values are handles), so the code can be freed.
        unsafe {
            let comp = std::mem::ManuallyDrop::take(&mut self.comp);
            comp.backend.free_memory();
        }
    }
}

impl Drop for OwnStack {
    fn drop(&mut self) {
        #[cfg(unix)]
        // SAFETY: the mapping made by `map`, unmapped once.
        unsafe {
            libc::munmap(self.base.cast(), self.size + self.guard);
        }
    }
}

/// Runs `call` on the JIT's own stack of at least `need` bytes (mapped
/// on first use; a new one when the budget grew), or on a stack from
/// `stacker` where none can be mapped.
fn on_own_stack(own: &mut Option<OwnStack>, need: usize, call: impl FnOnce() -> i8) -> i8 {
    if own.as_ref().is_none_or(|s| s.size < need) {
        *own = OwnStack::map(need);
    }
    match own {
        // SAFETY: `base + guard .. base + guard + size` is mapped
        // read-write and used by nothing else: `run` is not re-entered
        // while compiled code runs (rule derivation does not run code).
        Some(s) => unsafe { psm::on_stack(s.base.add(s.guard), s.size, call) },
        None => stacker::grow(need, call),
    }
}

/// Address space reserved for one JIT's compiled code (committed only as
/// used): less than the 2 GiB a direct call can span.
const CODE_RESERVE: usize = 1 << 30;

/// The trampoline's signature: `(ctx, args, results) -> status`.
type Trampoline = unsafe extern "C" fn(*mut Ctx, *const u64, *mut u64) -> i8;

impl<'m> Jit<'m> {
    /// A JIT for `module`, without rules for function values (`frule`,
    /// `revfwd` and `revback` fail as in the interpreter).
    pub fn new(module: &'m Module) -> Result<Jit<'m>, CodegenError> {
        Jit::make(ModuleRef::Shared(module))
    }

    /// A JIT for `module` that asks `provider` for the rules of function values
    /// met at run time, adds them to `module` and compiles them.
    pub fn with_rules(
        module: &'m mut Module,
        provider: &'m mut dyn RuleProvider,
    ) -> Result<Jit<'m>, CodegenError> {
        Jit::make(ModuleRef::WithRules(module, provider))
    }

    /// A JIT that owns `module` and, when given, the provider of the rules
    /// of function values: for callers that keep compiled code around (an
    /// embedding compiler), with no borrow to keep alive.
    pub fn owning(
        module: Module,
        provider: Option<Box<dyn RuleProvider + 'm>>,
    ) -> Result<Jit<'m>, CodegenError> {
        Jit::make(ModuleRef::Owned(Box::new(module), provider))
    }

    fn make(module: ModuleRef<'m>) -> Result<Jit<'m>, CodegenError> {
        let mut flags = settings::builder();
        let set = |f: &mut settings::Builder, k: &str, v: &str| {
            f.set(k, v).map_err(CodegenError::backend)
        };
        set(&mut flags, "opt_level", "speed")?;
        set(&mut flags, "enable_multi_ret_implicit_sret", "true")?;
        set(&mut flags, "is_pic", "false")?;
        // Frames larger than a page touch each page on entry, so a frame
        // that would jump past the end of a stack hits its guard page.
        set(&mut flags, "enable_probestack", "true")?;
        set(&mut flags, "probestack_strategy", "inline")?;
        set(
            &mut flags,
            "enable_verifier",
            if cfg!(debug_assertions) {
                "true"
            } else {
                "false"
            },
        )?;
        let isa = cranelift_native::builder()
            .map_err(|e| CodegenError::backend(format!("this machine is not supported: {e}")))?
            .finish(settings::Flags::new(flags))
            .map_err(CodegenError::backend)?;
        let mut builder = JITBuilder::with_isa(isa, default_libcall_names());
        for &sym in rt::RtSym::ALL {
            builder.symbol(sym.name(), sym.address());
        }
        builder.symbol(RULE_FN, jit_rule as *const u8);
        builder.symbol(
            rt::EXP_TABLE_SYMBOL,
            std::ptr::addr_of!(rt::irad_rt_exp_table).cast::<u8>(),
        );
        builder.symbol(
            rt::LOG_TABLE_SYMBOL,
            std::ptr::addr_of!(rt::irad_rt_log_table).cast::<u8>(),
        );
        // All code in one reserved region, so that the direct (32-bit
        // PC-relative) calls between compiled functions always reach: with
        // separately mapped segments two functions could land more than 2 GiB
        // apart, and Cranelift's relocation panicked (found by the
        // `interp_vs_jit` fuzz target, whose sanitizer spreads mappings).
        let arena = ArenaMemoryProvider::new_with_size(CODE_RESERVE).map_err(|e| {
            CodegenError::backend(format!("cannot reserve memory for compiled code: {e}"))
        })?;
        builder.memory_provider(Box::new(arena));
        Ok(Jit {
            st: Box::new(State {
                module,
                comp: std::mem::ManuallyDrop::new(Compiler::new(JITModule::new(builder))),
                table: Vec::new(),
                rt: {
                    let mut rt = Box::<Runtime>::default();
                    rt.reserve_all_tapes();
                    rt
                },
                rules: HashMap::new(),
                trampolines: HashMap::new(),
                pinned: Vec::new(),
                stack_budget: STACK_BUDGET.with(std::cell::Cell::get),
                own_stack: None,
            }),
        })
    }

    /// The module, with every rule added so far.
    pub fn module(&self) -> &Module {
        self.st.module.get()
    }

    /// Sets how much native stack compiled code may use (see
    /// [`DEFAULT_STACK_BUDGET`]); deeper calls fail with a "native stack
    /// exhausted" error instead of overflowing.
    pub fn set_stack_budget(&mut self, bytes: usize) {
        self.st.stack_budget = bytes;
    }

    /// Sets the limits within which functions compiled from now on get their
    /// small non-recursive callees inlined (docs/codegen.md, "Inlining");
    /// `None` turns inlining off. The default is `Some(Limits::default())`.
    /// Either way the results and errors are the same.
    pub fn set_inlining(&mut self, limits: Option<irad_passes::pe::Limits>) {
        self.st.comp.inline = limits;
    }

    /// Whether functions compiled from now on version loops whose array
    /// accesses cannot be proven in range (on by default), and which loops
    /// they run in vectors (docs/codegen.md, "Bounds checks" and
    /// "Vectorisation"). Either way the results and errors are the same:
    /// for measuring what each does, and for tests.
    pub fn set_loop_opts(&mut self, version: bool, vectors: crate::LoopVectors) {
        self.st.comp.version_loops = version;
        self.st.comp.vectorise = vectors;
    }

    /// Whether functions compiled from now on fuse adjacent counted loops
    /// over the same range (on by default; docs/codegen.md, "Loop
    /// fusion"). Either way the results and errors are the same: for
    /// measuring what it does, and for tests.
    pub fn set_loop_fusion(&mut self, on: bool) {
        self.st.comp.fuse_loops = on;
    }

    /// From now on, keeps the Cranelift IR of every function compiled, as
    /// Cranelift's optimiser leaves it (before register allocation), for
    /// [`Jit::take_clif`]: what `irad dump --format clif` prints.
    pub fn capture_clif(&mut self) {
        self.st.comp.clif.get_or_insert_with(Vec::new);
    }

    /// The Cranelift IR kept since [`Jit::capture_clif`] (or the last
    /// call), one `(name, text)` per function compiled, in the order they
    /// were compiled: `name` is the IR function's name (`gmm.rev.fwd`) or
    /// a primitive's wrapper's.
    pub fn take_clif(&mut self) -> Vec<(String, String)> {
        self.st
            .comp
            .clif
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
            .into_iter()
            .map(|(name, func)| (name, func.display().to_string()))
            .collect()
    }

    /// Compiles `f` and everything it can reach, if not done yet.
    pub fn compile(&mut self, f: FuncId) -> Result<(), CodegenError> {
        self.st.compile(FuncRef::User(f)).map(|_| ())
    }

    /// Bytes on all tapes now.
    pub fn tape_bytes(&self) -> u64 {
        self.st.rt.tape_bytes()
    }

    /// Runs `f` on `args` as [`irad_ir::interp::run`] does, in compiled code.
    /// Code generation failures are reported as run errors whose message
    /// starts with `code generation failed` or `cannot compile`.
    pub fn run(&mut self, f: FuncId, args: &[Val], opts: &RunOptions) -> Result<Val, RunError> {
        self.st.run(f, args, opts)
    }
}

impl State<'_> {
    /// Declares `f`, defines everything pending, and publishes the code.
    fn compile(&mut self, f: FuncRef) -> Result<u32, CodegenError> {
        let module = self.module.get();
        let h = self.comp.handle(module, f)?;
        self.finish()?;
        Ok(h)
    }

    fn finish(&mut self) -> Result<(), CodegenError> {
        let module = self.module.get();
        self.comp.define_pending(module)?;
        irad_ir::timings::time(irad_ir::timings::Stage::Cranelift, || {
            self.comp
                .backend
                .finalize_definitions()
                .map_err(CodegenError::backend)
        })?;
        while self.table.len() < self.comp.handles.len() {
            let fr = self.comp.handles[self.table.len()];
            let id = self.comp.funcs[&fr];
            self.table
                .push(self.comp.backend.get_finalized_function(id));
        }
        Ok(())
    }

    fn trampoline(&mut self, f: FuncId) -> Result<*const u8, CodegenError> {
        if let Some(&p) = self.trampolines.get(&f) {
            return Ok(p);
        }
        let module = self.module.get();
        let func = module
            .get(f)
            .ok_or_else(|| CodegenError::internal(format!("no function {f:?}")))?;
        let sig = func.fn_type();
        let callee = self.comp.declare(module, FuncRef::User(f))?;
        let cc = self.comp.call_conv();
        let mut tsig = Signature::new(cc);
        tsig.params.extend([AbiParam::new(types::I64); 3]);
        tsig.returns.push(AbiParam::new(types::I8));
        let id = self
            .comp
            .backend
            .declare_anonymous_function(&tsig)
            .map_err(CodegenError::backend)?;
        let mut ctx = self.comp.backend.make_context();
        ctx.func.signature = tsig;
        let mut fctx = FunctionBuilderContext::new();
        {
            let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
            let entry = b.create_block();
            b.append_block_params_for_function_params(entry);
            b.switch_to_block(entry);
            let p = b.block_params(entry).to_vec();
            let (cx, args, rets) = (p[0], p[1], p[2]);
            let mut call_args = vec![cx];
            let mut off = 0i32;
            for ty in &sig.params {
                for leaf in leaf_list(ty) {
                    let v = if leaf == types::I8 {
                        let w = b.ins().load(types::I64, MemFlagsData::trusted(), args, off);
                        b.ins().ireduce(types::I8, w)
                    } else {
                        b.ins().load(leaf, MemFlagsData::trusted(), args, off)
                    };
                    call_args.push(v);
                    off += 8;
                }
            }
            let r = self.comp.backend.declare_func_in_func(callee, b.func);
            let call = b.ins().call(r, &call_args);
            let res = b.inst_results(call).to_vec();
            let mut off = 0i32;
            for (&v, leaf) in res[1..].iter().zip(leaf_list(&sig.ret)) {
                let v = if leaf == types::I8 {
                    b.ins().uextend(types::I64, v)
                } else {
                    v
                };
                b.ins().store(MemFlagsData::trusted(), v, rets, off);
                off += 8;
            }
            b.ins().return_(&[res[0]]);
            b.seal_all_blocks();
            b.finalize(self.comp.backend.isa().frontend_config());
        }
        self.comp
            .backend
            .define_function(id, &mut ctx)
            .map_err(|e| CodegenError::backend_in(e, "a trampoline"))?;
        self.finish()?;
        let p = self.comp.backend.get_finalized_function(id);
        self.trampolines.insert(f, p);
        Ok(p)
    }

    fn run(&mut self, f: FuncId, args: &[Val], opts: &RunOptions) -> Result<Val, RunError> {
        let func_loc = irad_ir::interp::check_call(self.module.get(), f, args, opts)?;
        let module = self.module.get();
        let (params, ret) = match module.get(f) {
            Some(func) => (func.param_types(), func.ret.clone()),
            None => return Err(RunError::internal(func_loc, "no such function")),
        };
        let cg = |e: CodegenError| {
            let loc = if e.loc.has_ir_place() {
                e.loc.clone()
            } else {
                func_loc.clone()
            };
            RunError::new(loc, e.msg)
        };
        let mut words = Vec::new();
        let mut arrays = Vec::new();
        for (arg, ty) in args.iter().zip(&params) {
            self.flatten(arg, ty, &mut words, &mut arrays).map_err(cg)?;
        }
        self.comp
            .declare(self.module.get(), FuncRef::User(f))
            .map_err(cg)?;
        let tramp = self.trampoline(f).map_err(cg)?;
        // Function values among the arguments may be new since the
        // trampoline was made: compile them before anything calls them.
        if self.comp.has_pending() {
            self.finish().map_err(cg)?;
        }
        let mut rets = vec![0u64; leaf_count(&ret)];
        let mut ctx = Ctx {
            // A driver's frames are below depth 1 (`RunOptions::driver_frames`).
            depth: 1 - i64::try_from(opts.driver_frames).unwrap_or(0),
            max_depth: i64::try_from(opts.max_depth).unwrap_or(i64::MAX),
            stack_limit: 0,
            fn_table: self.table.as_ptr(),
            tapes: std::ptr::null_mut(),
            err_kind: rt::NO_TRAP,
            err_site: 0,
            err_a: 0,
            err_b: 0,
            rt: &mut *self.rt,
            host: std::ptr::null_mut(),
        };
        let ntapes = self.comp.tape_types.len();
        self.rt.ensure_tapes(ntapes, &mut ctx);
        self.rt.trace.clear();
        self.rt.message.clear();
        // Sparse handles live for one run, as in the interpreter.
        self.rt.sparse.clear();
        ctx.host = self as *mut State<'_> as *mut u8;
        let budget = self.stack_budget;
        let need = budget.saturating_add(STACK_MARGIN);
        let mut call = || {
            // The stack pointer itself, not the address of a local: under
            // AddressSanitizer locals can live on a fake stack in the heap
            // (found by the `interp_vs_jit` fuzz target).
            let sp = psm::stack_pointer() as u64;
            ctx.stack_limit = sp.saturating_sub(budget as u64);
            // SAFETY: the trampoline has this signature; `words` and `rets`
            // hold the leaves of the parameters and the result; the arrays
            // they point into are alive for the call (`args` borrows them).
            unsafe {
                let t: Trampoline = std::mem::transmute(tramp);
                t(&mut ctx, words.as_ptr(), rets.as_mut_ptr())
            }
        };
        let in_place = stacker::remaining_stack().is_some_and(|left| left >= need);
        let status = if in_place {
            call()
        } else {
            // Taken out of `self` while the code runs: the rule callback
            // reaches the rest of the state through `ctx.host`.
            let mut stack = self.own_stack.take();
            let status = on_own_stack(&mut stack, need, call);
            self.own_stack = stack;
            status
        };
        let result = if status != 0 {
            let failure = Failure {
                kind: ctx.err_kind,
                site: ctx.err_site,
                a: ctx.err_a,
                b: ctx.err_b,
                max_depth: ctx.max_depth,
                trace: &self.rt.trace,
                message: &self.rt.message,
            };
            Err(run_error(&failure, &self.comp.sites))
        } else {
            let mut it = rets.iter().copied();
            self.unflatten(&ret, &mut it, &arrays, &mut Vec::new())
                .map_err(|msg| RunError::internal(func_loc.clone(), msg))
        };
        if self.rt.tapes_empty() {
            self.rt.release_arrays();
            self.pinned.clear();
        } else {
            self.pinned.extend(arrays.into_iter().map(|(a, _)| a));
        }
        result
    }

    /// Appends the leaves of `v` (of type `ty`) to `out`; array arguments are
    /// recorded in `arrays` with their addresses.
    fn flatten(
        &mut self,
        v: &Val,
        ty: &Type,
        out: &mut Vec<u64>,
        arrays: &mut Vec<(ArrayRef, u64)>,
    ) -> Result<(), CodegenError> {
        match (v, ty) {
            (Val::F64(x), _) => out.push(x.to_bits()),
            (Val::I64(n), _) => out.push(*n as u64),
            (Val::Bool(b), _) => out.push(u64::from(*b)),
            (Val::Unit, _) => {}
            (Val::Tuple(vs), Type::Tuple(ts)) => {
                for (v, t) in vs.iter().zip(ts.iter()) {
                    self.flatten(v, t, out, arrays)?;
                }
            }
            (Val::Array(a), _) => {
                // SAFETY: no borrow of the cell is held while compiled code runs.
                let data = unsafe { &mut *a.0.as_ptr() };
                let (p, n) = match data {
                    ArrayData::F64(xs) => (xs.as_mut_ptr() as u64, xs.len()),
                    ArrayData::I64(xs) => (xs.as_mut_ptr() as u64, xs.len()),
                    ArrayData::Bool(xs) => (xs.as_mut_ptr() as u64, xs.len()),
                    ArrayData::Sparse(xs) => (xs.as_mut_ptr() as u64, xs.len()),
                };
                // Empty vectors share one dangling address; an empty array
                // passes its cell's instead (never read: it has no
                // elements), so that a result is matched with the right
                // argument in `unflatten`.
                let p = if n == 0 { Rc::as_ptr(&a.0) as u64 } else { p };
                out.extend([p, n as u64]);
                arrays.push((a.clone(), p));
            }
            (Val::Func(fr), _) => {
                let h = self.comp.handle(self.module.get(), *fr)?;
                out.push(u64::from(h));
            }
            (Val::Dual(vs), Type::Dual(inner, lanes)) => {
                let tan = inner.tangent_at(*lanes).unwrap_or(Type::Unit);
                for (i, v) in vs.iter().enumerate() {
                    self.flatten(v, if i == 0 { inner } else { &tan }, out, arrays)?;
                }
            }
            _ => {
                return Err(CodegenError::internal(format!(
                    "argument of kind {} for type {ty}",
                    v.kind()
                )));
            }
        }
        Ok(())
    }

    /// The value of type `ty` whose leaves come next in `it`. An array that
    /// is an argument (in `arrays`, with its address) is that argument; one
    /// that compiled code allocated is copied out once, and `made` keeps the
    /// copies of this result by address, so that an array met twice is one
    /// array, as in the interpreter.
    fn unflatten(
        &self,
        ty: &Type,
        it: &mut impl Iterator<Item = u64>,
        arrays: &[(ArrayRef, u64)],
        made: &mut Vec<(ArrayRef, u64)>,
    ) -> Result<Val, String> {
        let mut next = || it.next().ok_or_else(|| "too few result leaves".to_string());
        Ok(match ty {
            Type::F64 => Val::F64(f64::from_bits(next()?)),
            Type::I64 => Val::I64(next()? as i64),
            Type::Bool => Val::Bool(next()? & 1 != 0),
            Type::Unit => Val::Unit,
            // A handle of this run's builder: meaningless after the run, but
            // returned as it is, as the interpreter does.
            Type::Sparse => Val::Sparse(next()? as i64),
            Type::Func(_) => {
                let h = next()?;
                let fr = usize::try_from(h)
                    .ok()
                    .and_then(|h| self.comp.handles.get(h))
                    .ok_or("bad function handle")?;
                Val::Func(*fr)
            }
            Type::Array(elem) => {
                let (p, n) = (next()?, next()? as usize);
                if let Some((a, _)) = arrays.iter().chain(made.iter()).find(|(a, q)| {
                    *q == p
                        && a.0
                            .try_borrow()
                            .is_ok_and(|d| d.len() == n && same_elem(&d, *elem))
                }) {
                    return Ok(Val::Array(a.clone()));
                }
                // SAFETY: compiled code made this (pointer, length) pair from
                // an allocation of at least `n` elements that is still alive.
                let data = unsafe {
                    match elem {
                        Scalar::F64 => {
                            ArrayData::F64(std::slice::from_raw_parts(p as *const f64, n).to_vec())
                        }
                        Scalar::I64 => {
                            ArrayData::I64(std::slice::from_raw_parts(p as *const i64, n).to_vec())
                        }
                        Scalar::Bool => ArrayData::Bool(
                            std::slice::from_raw_parts(p as *const u8, n)
                                .iter()
                                .map(|&b| b != 0)
                                .collect(),
                        ),
                        Scalar::Sparse => ArrayData::Sparse(
                            std::slice::from_raw_parts(p as *const i64, n).to_vec(),
                        ),
                    }
                };
                let a = ArrayRef::new(data);
                made.push((a.clone(), p));
                Val::Array(a)
            }
            Type::Tuple(ts) => {
                let mut vs = Vec::with_capacity(ts.len());
                for t in ts.iter() {
                    vs.push(self.unflatten(t, it, arrays, made)?);
                }
                Val::Tuple(Rc::from(vs))
            }
            Type::Dual(inner, lanes) => {
                let tan = inner
                    .tangent_at(*lanes)
                    .ok_or("a dual without a tangent type")?;
                let mut vs = vec![self.unflatten(inner, it, arrays, made)?];
                for _ in 0..lanes.count() {
                    vs.push(self.unflatten(&tan, it, arrays, made)?);
                }
                Val::Dual(Rc::from(vs))
            }
        })
    }

    /// The handle of the rule of `kind` for function value `h` at `width`.
    fn rule(&mut self, kind: RuleKind, h: i64, width: i64) -> Result<u32, String> {
        let hu = u32::try_from(h)
            .map_err(|_| internal_message(format_args!("bad function handle {h}")))?;
        if let Some(&r) = self.rules.get(&(kind, hu, width)) {
            return Ok(r);
        }
        let callee = *self
            .comp
            .handles
            .get(hu as usize)
            .ok_or_else(|| internal_message(format_args!("bad function handle {h}")))?;
        let Some((module, provider)) = self.module.with_rules() else {
            return Err(if kind == RuleKind::Frule {
                "no rule provider for frule: run forward rules through the forward-mode API".into()
            } else {
                let prim = if kind == RuleKind::Revback {
                    "revback"
                } else {
                    "revfwd"
                };
                format!(
                    "no rule provider for {prim}: run reverse rules through the reverse-mode API"
                )
            });
        };
        let sig: FnType = match callee {
            FuncRef::User(id) => module.get(id).map(|f| f.fn_type()),
            FuncRef::Prim(p) => match p.fn_type() {
                Some(Type::Func(sig)) => Some((*sig).clone()),
                _ => None,
            },
        }
        .ok_or_else(|| internal_message("the rule of a function that does not exist"))?;
        let check = |module: &Module, id: FuncId, want: FnType, what: &str| {
            let want = Type::from_fn(want);
            let got = module.get(id).map(|f| Type::from_fn(f.fn_type()));
            if got.as_ref() == Some(&want) {
                Ok(())
            } else {
                Err(internal_message(format_args!(
                    "{what} has type {}, not {want}",
                    got.map_or("nothing".to_string(), |t| t.to_string())
                )))
            }
        };
        let id = if kind == RuleKind::Frule {
            let lanes = Lanes::from_code(width).ok_or_else(|| {
                internal_message(format_args!("batch width {width} out of range"))
            })?;
            let id = provider
                .forward_rule(module, callee, lanes)
                .map_err(|e| e.to_string())?;
            check(
                module,
                id,
                Type::forward_fn(&sig, lanes),
                "the forward rule",
            )?;
            id
        } else {
            let (fwd, back) = provider
                .reverse_rule(module, callee)
                .map_err(|e| e.to_string())?;
            check(
                module,
                fwd,
                Type::rev_fwd_fn(&sig),
                "the reverse rule's forward part",
            )?;
            check(
                module,
                back,
                Type::rev_back_fn(&sig),
                "the reverse rule's pullback part",
            )?;
            let hf = self
                .compile(FuncRef::User(fwd))
                .map_err(|e| e.to_string())?;
            let hb = self
                .compile(FuncRef::User(back))
                .map_err(|e| e.to_string())?;
            self.rules.insert((RuleKind::Revfwd, hu, 0), hf);
            self.rules.insert((RuleKind::Revback, hu, 0), hb);
            return Ok(if kind == RuleKind::Revback { hb } else { hf });
        };
        let r = self.compile(FuncRef::User(id)).map_err(|e| e.to_string())?;
        self.rules.insert((kind, hu, width), r);
        Ok(r)
    }
}

fn same_elem(d: &ArrayData, elem: Scalar) -> bool {
    matches!(
        (d, elem),
        (ArrayData::F64(_), Scalar::F64)
            | (ArrayData::I64(_), Scalar::I64)
            | (ArrayData::Bool(_), Scalar::Bool)
            | (ArrayData::Sparse(_), Scalar::Sparse)
    )
}

/// `irad_rule` in the JIT: finds or derives, compiles and caches a rule, then
/// points the context at the grown function table and tapes.
extern "C" fn jit_rule(ctx: *mut Ctx, kind: i64, h: i64, width: i64, site: i64) -> i64 {
    // SAFETY: compiled code passes the context `State::run` made, whose
    // `host` is the running JIT's state, not otherwise accessed during the call.
    let ctx = unsafe { &mut *ctx };
    let st = unsafe { &mut *(ctx.host as *mut State<'_>) };
    let res = match RuleKind::from_code(kind) {
        Some(kind) => catch_unwind(AssertUnwindSafe(|| st.rule(kind, h, width)))
            .unwrap_or_else(|_| Err(internal_message("rule derivation panicked"))),
        None => Err(internal_message(format_args!("unknown rule kind {kind}"))),
    };
    match res {
        Ok(r) => {
            ctx.fn_table = st.table.as_ptr();
            let n = st.comp.tape_types.len();
            st.rt.ensure_tapes(n, ctx);
            i64::from(r)
        }
        Err(msg) => {
            st.rt.message = msg;
            ctx.err_kind = rt::TrapKind::Message.code();
            ctx.err_site = site;
            -1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use irad_ir::prim::Prim;

    /// `@f` calls `@g`, which fails to lower at its `sin`: after the cold
    /// blocks of an `idiv`, in the middle of its second block.
    const CALLS_G: &str = r"
func @f(%x: f64, %k: i64) -> f64 {
#1:
  %y = invoke @g(%x, %k) :: f64
  %z = call mul(%y, 2.0) :: f64
  return %z
}

func @g(%x: f64, %k: i64) -> f64 {
#1:
  %q = call idiv(10, %k) :: i64
  %c = call lt(%q, 3) :: bool
  gotoifnot %c, #3
#2:
  %t = call mul(%x, %x) :: f64
  %s = call sin(%t) :: f64
  return %s
#3:
  return %x
}
";

    /// A sum over `a[i * d + j]`, `j` the inner loop: `i * d` is invariant
    /// in it.
    const ROWS: &str = r"
func @rows(%a: [f64], %n: i64, %d: i64) -> f64 {
#1:
  goto #2
#2:
  %i = phi [#1 => 0, #6 => %i1]
  %s = phi [#1 => 0.0, #6 => %s2]
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #7
#3:
  goto #4
#4:
  %j = phi [#3 => 0, #5 => %j1]
  %s2 = phi [#3 => %s, #5 => %t]
  %k = call lt(%j, %d) :: bool
  gotoifnot %k, #6
#5:
  %r = call imul(%i, %d) :: i64
  %x = call iadd(%r, %j) :: i64
  %v = call arrayref(%a, %x) :: f64
  %t = call add(%s2, %v) :: f64
  %j1 = call iadd(%j, 1) :: i64
  goto #4
#6:
  %i1 = call iadd(%i, 1) :: i64
  goto #2
#7:
  return %s
}
";

    #[test]
    fn error_returns_are_shared_by_few_checks() {
        // 40 checked reads: one shared error return would have 40
        // predecessors along a chain of 40 blocks, which made the dominator
        // computations quadratic in the function's length
        // (docs/codegen.md, "Errors").
        let mut text = String::from(
            "func @many(%a: [f64], %i: i64) -> f64 {\n#1:\n  %s0 = call add(0.0, 0.0) :: f64\n",
        );
        for k in 0..40 {
            text.push_str(&format!(
                "  %j{k} = call imul(%i, {}) :: i64\n  %x{k} = call arrayref(%a, %j{k}) :: f64\n  %s{} = call add(%s{k}, %x{k}) :: f64\n",
                k + 1,
                k + 1
            ));
        }
        text.push_str("  return %s40\n}\n");
        let module = irad_ir::text::parse_module(&text).expect("test IR parses");
        let f = module.by_name("many").expect("@many");
        let mut jit = Jit::new(&module).expect("a JIT");
        jit.capture_clif();
        jit.compile(f).expect("@many compiles");
        let funcs = jit.st.comp.clif.take().expect("captured");
        let (_, func) = funcs.first().expect("one function");
        let cfg = cranelift_codegen::flowgraph::ControlFlowGraph::with_function(func);
        let most = func
            .layout
            .blocks()
            .map(|b| cfg.pred_iter(b).count())
            .max()
            .unwrap_or(0);
        assert!(
            most <= 16,
            "a block with {most} predecessors:\n{}",
            func.display()
        );
        // The checks still fail as the interpreter does.
        let args = [Val::f64_array(vec![1.0, 2.0]), Val::I64(1)];
        let got = jit.run(f, &args, &RunOptions::default());
        let want = irad_ir::interp::run(&module, f, &args, &RunOptions::default());
        let (got, want) = (
            got.expect_err("out of range"),
            want.expect_err("out of range"),
        );
        assert_eq!(got, want);
        let args = [Val::f64_array(vec![1.0, 2.0]), Val::I64(0)];
        let got = jit.run(f, &args, &RunOptions::default()).expect("in range");
        assert!(got.same(&Val::F64(40.0)), "{got:?}");
    }

    #[test]
    fn loop_invariants_are_hoisted_out_of_inner_loops() {
        // Cranelift's optimiser hoists `i * d` out of the inner loop only
        // when the header's branch lists the body second (docs/codegen.md,
        // "Loops"): after it, the `imul` is in a block of loop depth 1.
        let module = irad_ir::text::parse_module(ROWS).expect("test IR parses");
        let f = module.by_name("rows").expect("@rows");
        let mut jit = Jit::new(&module).expect("a JIT");
        jit.capture_clif();
        jit.compile(f).expect("@rows compiles");
        let funcs = jit.st.comp.clif.take().expect("captured");
        let (name, func) = funcs.first().expect("one function");
        assert_eq!(name, "@rows");
        let cfg = cranelift_codegen::flowgraph::ControlFlowGraph::with_function(func);
        let dom = cranelift_codegen::dominator_tree::DominatorTree::with_function(func, &cfg);
        let mut loops = cranelift_codegen::loop_analysis::LoopAnalysis::new();
        loops.compute(func, &cfg, &dom);
        let depth = |op: cranelift_codegen::ir::Opcode| -> Vec<usize> {
            func.layout
                .blocks()
                .filter(|&b| {
                    func.layout
                        .block_insts(b)
                        .any(|i| func.dfg.insts[i].opcode() == op)
                })
                .map(|b| loops.loop_level(b).level())
                .collect()
        };
        assert_eq!(
            depth(cranelift_codegen::ir::Opcode::Imul),
            [1],
            "{}",
            func.display()
        );
        // The element load stays in the inner loop.
        assert_eq!(
            depth(cranelift_codegen::ir::Opcode::Load).iter().max(),
            Some(&2)
        );
        // And the result is the sum.
        let args = [
            Val::f64_array((0..6).map(f64::from).collect()),
            Val::I64(2),
            Val::I64(3),
        ];
        let got = jit
            .run(f, &args, &RunOptions::default())
            .expect("@rows runs");
        assert!(matches!(got, Val::F64(v) if v == 15.0), "{got:?}");
    }

    #[test]
    fn vector_loads_and_stores_are_not_marked_aligned() {
        // a[i], a[i + 1] is 16-byte aligned only for even i: an `aligned`
        // f64x2 load may become an SSE memory operand, which faults on a
        // machine without AVX (docs/codegen.md, "Vectorisation").
        let text = "fn from_one(a: [f64]) -> [f64] {
            let c = copy(a);
            for i in 1..len(a) {
                c[i] = c[i] * 3.0 - a[i];
            }
            c
        }";
        let module = irad_ir::surface::compile(text).expect("test program compiles");
        let f = module.by_name("from_one").expect("@from_one");
        let mut jit = Jit::new(&module).expect("a JIT");
        jit.capture_clif();
        jit.compile(f).expect("compiles");
        let clif = jit
            .take_clif()
            .into_iter()
            .map(|(_, t)| t)
            .collect::<String>();
        let pairs: Vec<&str> = clif
            .lines()
            .filter(|l| l.contains("load.f64x2") || (l.contains("store") && l.contains("f64x2")))
            .collect();
        assert!(!pairs.is_empty(), "the loop is vectorised:\n{clif}");
        for line in pairs {
            assert!(!line.contains("aligned"), "{line}");
        }
        let args = [Val::f64_array(vec![1.0, 2.0, 3.0, 4.0, 5.0])];
        let got = jit.run(f, &args, &RunOptions::default()).expect("runs");
        assert!(
            matches!(&got, Val::Array(a) if format!("{a:?}").contains("4.0, 6.0, 8.0, 10.0")),
            "{got:?}"
        );
    }

    #[test]
    fn a_failure_half_way_through_a_function_is_an_error_every_time() {
        // Once a panic in Cranelift's `finalize` (blocks without a
        // terminator), then one resolving `@f`'s call of the undefined `@g`.
        let module = irad_ir::text::parse_module(CALLS_G).expect("test IR parses");
        let f = module.by_name("f").expect("@f");
        let args = [Val::F64(0.5), Val::I64(5)];
        let opts = RunOptions::default();
        let mut jit = Jit::new(&module).expect("a JIT");
        jit.st.comp.fail_at = Some(Prim::Sin);
        for attempt in 0..2 {
            let err = jit.run(f, &args, &opts).expect_err("lowering fails");
            assert_eq!(
                err.msg, "internal error: `sin` fails for the test",
                "attempt {attempt}"
            );
        }
        // `@g` stayed pending and is compiled once it can be.
        jit.st.comp.fail_at = None;
        let want = irad_ir::interp::run(&module, f, &args, &opts).expect("the interpreter runs");
        let got = jit.run(f, &args, &opts).expect("compiled code runs");
        assert_eq!(format!("{got:?}"), format!("{want:?}"));
        assert!(
            matches!(got, Val::F64(y) if y == libm::sin(0.25) * 2.0),
            "{got:?}"
        );
    }
}
