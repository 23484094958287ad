//! The shared half of a JIT: the compiler, the rule provider and an
//! immutable, atomically published snapshot of what is compiled; and the
//! per-call half: a runtime context (tapes, arena, own stack).
//!
//! Assumes: compiled code is never freed or rewritten while the [`Code`]
//! lives (Cranelift's JIT only adds code), and finalizing new code does not
//! change the protection of pages holding older code (all code is in one
//! arena, allocated in page-aligned segments).
//!
//! Guarantees: everything that changes (the Cranelift module, the rule
//! provider, the IR module rules are derived into) is behind one mutex,
//! taken only to compile something new or to report a run-time error. A
//! call that needs nothing new reads a [`Snap`] (code addresses by handle,
//! trampolines, the rule cache, the IR module) through one atomic load; a
//! snapshot is never changed once published, and replaced snapshots stay
//! alive until the `Code` is dropped, so a run that started with one (or a
//! rule callback that moved it to a newer one) reads valid tables
//! throughout. Each run has its own [`Local`] (tapes, arena, stack): runs
//! on different contexts share nothing mutable.

use super::shared::Scratch;
use super::stack::{OwnStack, on_own_stack};
use super::{CODE_RESERVE, STACK_MARGIN};
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
    ArrayData, ArrayRef, RuleProvider, RunError, RunOptions, Val, internal_message,
};
use irad_ir::types::{FnType, Lanes, Scalar, Type};
use irad_runtime::{self as rt, Ctx, RuleKind, Runtime};
use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The trampoline's signature: `(ctx, args, results) -> status`.
type Trampoline = unsafe extern "C" fn(*mut Ctx, *const u64, *mut u64) -> i8;

/// Who provides the rules of function values met at run time.
pub(crate) enum Provider<'m> {
    /// Borrowed from the caller (`Jit::with_rules`).
    Borrowed(&'m mut dyn RuleProvider),
    /// Owned by the JIT.
    Owned(Box<dyn RuleProvider + 'm>),
}

impl Provider<'_> {
    fn get(&mut self) -> &mut dyn RuleProvider {
        match self {
            Provider::Borrowed(p) => &mut **p,
            Provider::Owned(p) => &mut **p,
        }
    }
}

/// The IR module of a snapshot: the caller's (never changed: a JIT without
/// rules) or one the JIT owns (replaced by a new one when rules are added).
#[derive(Clone)]
enum ModSnap<'m> {
    Borrowed(&'m Module),
    Owned(Arc<Module>),
}

/// What calls read without a lock; never changed once published.
#[derive(Clone)]
pub(crate) struct Snap<'m> {
    module: ModSnap<'m>,
    /// Code addresses by handle.
    table: Vec<*const u8>,
    /// How many tapes compiled code uses.
    ntapes: usize,
    trampolines: HashMap<FuncId, *const u8>,
    /// Rules met at run time: (kind, handle, width) to handle.
    rules: HashMap<(RuleKind, u32, i64), u32>,
    /// Function by handle, and handle by function.
    handles: Vec<FuncRef>,
    handle_of: rustc_hash::FxHashMap<FuncRef, u32>,
}

impl Snap<'_> {
    /// The IR module.
    pub(crate) fn module(&self) -> &Module {
        match &self.module {
            ModSnap::Borrowed(m) => m,
            ModSnap::Owned(m) => m,
        }
    }

    /// The trampoline of `f`, when made.
    pub(crate) fn trampoline(&self, f: FuncId) -> Option<*const u8> {
        self.trampolines.get(&f).copied()
    }
}

/// What changes, behind the mutex.
pub(crate) struct Inner<'m> {
    provider: Option<Provider<'m>>,
    /// The caller's module, given the final one when the JIT is dropped.
    write_back: Option<&'m mut Module>,
    /// Taken out only by `Drop`, which frees the code memory.
    pub(crate) comp: std::mem::ManuallyDrop<Compiler<JITModule>>,
    /// Snapshots replaced, kept until the `Code` is dropped; boxed, as
    /// readers hold references to them.
    #[allow(clippy::vec_box)]
    retired: Vec<Box<Snap<'m>>>,
}

/// The shared half of a JIT; see the module documentation.
pub(crate) struct Code<'m> {
    inner: Mutex<Inner<'m>>,
    snap: AtomicPtr<Snap<'m>>,
    /// How much native stack compiled code may use.
    pub(crate) stack_budget: usize,
}

/// The per-call half: the runtime compiled code runs with and the stack it
/// runs on when the caller's is too small.
pub(crate) struct Local {
    pub(crate) rt: Box<Runtime>,
    pub(crate) own_stack: Option<OwnStack>,
    /// Whether the thread runs on `own_stack` now (taken out meanwhile),
    /// within the budget: calls run in place.
    pub(crate) on_own: bool,
    /// When set, calls run in place with the thread's stack left, less the
    /// margin, as their budget when that is smaller than the JIT's: a first
    /// try, retried on the own stack if it runs out
    /// (`JitSession::try_in_place`).
    pub(crate) shallow: bool,
    /// The error kind of the last call that failed.
    pub(crate) last_trap: i64,
    /// Buffers of typed calls.
    pub(crate) scratch: Scratch,
}

// SAFETY: a `Local` owns its runtime (arena, tapes) and stack mapping
// exclusively; none of them is tied to a thread. The raw pointers inside are
// to memory it owns.
unsafe impl Send for Local {}

impl Local {
    pub(crate) fn new() -> Local {
        let mut rt = Box::<Runtime>::default();
        rt.reserve_all_tapes();
        Local {
            rt,
            own_stack: None,
            on_own: false,
            shallow: false,
            last_trap: rt::NO_TRAP,
            scratch: Scratch::default(),
        }
    }

    /// Whether the context is small enough to keep in a thread's spare
    /// slot (no own stack, buffers of at most 1 MiB): it lives as long as
    /// the thread.
    pub(crate) fn is_small(&self) -> bool {
        const SMALL: u64 = 1 << 20;
        let scratch = (self.scratch.words.capacity()
            + self.scratch.rets.capacity()
            + self.scratch.copies.capacity()) as u64
            * 8;
        self.own_stack.is_none() && self.rt.tape_capacity() + scratch <= SMALL
    }

    /// Back to the state of a fresh context, keeping the buffers: empty
    /// tapes, the arena freed.
    pub(crate) fn reset(&mut self) {
        // After a panic on the own stack these may still be set.
        self.on_own = false;
        self.shallow = false;
        self.rt.reset_tapes();
        self.rt.release_arrays();
        self.rt.sparse.clear();
    }
}

fn lock<'a, 'm>(m: &'a Mutex<Inner<'m>>) -> MutexGuard<'a, Inner<'m>> {
    // A panic while compiling (caught and reported as an error) leaves the
    // compiler as usable as an error does.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<'m> Code<'m> {
    /// A JIT's shared half for `module` (the caller's when borrowed), with
    /// `provider` for rules, writing the final module back to `write_back`.
    pub(crate) fn new(
        module: Result<&'m Module, Module>,
        provider: Option<Provider<'m>>,
        write_back: Option<&'m mut Module>,
        stack_budget: usize,
    ) -> Result<Code<'m>, CodegenError> {
        let comp = Code::compiler()?;
        Ok(Code::with_compiler(
            comp,
            module,
            provider,
            write_back,
            stack_budget,
        ))
    }

    /// A compiler for a JIT: the part of making one that can fail.
    pub(crate) fn compiler() -> Result<Compiler<JITModule>, CodegenError> {
        Ok(Compiler::new(JITModule::new(jit_builder()?)))
    }

    /// As [`Code::new`], with the compiler made.
    pub(crate) fn with_compiler(
        comp: Compiler<JITModule>,
        module: Result<&'m Module, Module>,
        provider: Option<Provider<'m>>,
        write_back: Option<&'m mut Module>,
        stack_budget: usize,
    ) -> Code<'m> {
        let module = match module {
            Ok(m) => ModSnap::Borrowed(m),
            Err(m) => ModSnap::Owned(Arc::new(m)),
        };
        let snap = Box::new(Snap {
            module,
            table: Vec::new(),
            ntapes: 0,
            trampolines: HashMap::new(),
            rules: HashMap::new(),
            handles: Vec::new(),
            handle_of: rustc_hash::FxHashMap::default(),
        });
        Code {
            inner: Mutex::new(Inner {
                provider,
                write_back,
                comp: std::mem::ManuallyDrop::new(comp),
                retired: Vec::new(),
            }),
            snap: AtomicPtr::new(Box::into_raw(snap)),
            stack_budget,
        }
    }

    /// The snapshot published last.
    pub(crate) fn snap(&self) -> &Snap<'m> {
        // SAFETY: published snapshots are boxes leaked by `publish` (or
        // `new`), never changed, and freed only by `Drop`, which has `self`
        // exclusively.
        unsafe { &*self.snap.load(Ordering::Acquire) }
    }

    /// The state behind the mutex.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner<'m>> {
        lock(&self.inner)
    }

    /// The state behind the mutex, without locking.
    pub(crate) fn inner_mut(&mut self) -> &mut Inner<'m> {
        self.inner.get_mut().unwrap_or_else(PoisonError::into_inner)
    }

    /// Publishes a snapshot with the functions compiled since the last
    /// one (when `compiled`: everything pending was defined), `module` if
    /// given, and whatever `edit` adds. Called with the lock held
    /// (`inner`), so there is one publisher at a time.
    fn publish(
        &self,
        inner: &mut Inner<'m>,
        compiled: bool,
        module: Option<Arc<Module>>,
        edit: impl FnOnce(&mut Snap<'m>),
    ) {
        let old = self.snap.load(Ordering::Acquire);
        // SAFETY: as in `snap`.
        let mut new = Box::new(unsafe { (*old).clone() });
        let comp = &inner.comp;
        while compiled && new.table.len() < comp.handles.len() {
            let fr = comp.handles[new.table.len()];
            let p = comp.funcs.get(&fr).map_or(std::ptr::null(), |&id| {
                comp.backend.get_finalized_function(id)
            });
            new.table.push(p);
        }
        if compiled {
            new.handles.clone_from(&comp.handles);
            new.handle_of.clone_from(&comp.handle_of);
            new.ntapes = comp.tape_types.len();
        }
        if let Some(m) = module {
            new.module = ModSnap::Owned(m);
        }
        edit(&mut new);
        self.snap.store(Box::into_raw(new), Ordering::Release);
        // SAFETY: `old` was leaked by `publish` or `new` and is freed only
        // by `Drop`; readers may still hold it.
        inner.retired.push(unsafe { Box::from_raw(old) });
    }

    /// Compiles `f` and everything it can reach, if not done yet, and
    /// returns its handle.
    pub(crate) fn compile(&self, f: FuncRef) -> Result<u32, CodegenError> {
        if let Some(&h) = self.snap().handle_of.get(&f)
            && self
                .snap()
                .table
                .get(h as usize)
                .is_some_and(|p| !p.is_null())
        {
            return Ok(h);
        }
        let mut inner = self.lock();
        let snap = self.snap();
        let h = inner.comp.handle(snap.module(), f)?;
        finish(&mut inner, snap.module())?;
        self.publish(&mut inner, true, None, |_| {});
        Ok(h)
    }

    /// Compiles what a call of `f` on `args` needs: `f`, its trampoline,
    /// the function values among `args`.
    fn prepare(&self, f: FuncId, args: &[Val]) -> Result<(), CodegenError> {
        let mut inner = self.lock();
        let snap = self.snap();
        let module = snap.module();
        inner.comp.declare(module, FuncRef::User(f))?;
        let mut funcs = Vec::new();
        for a in args {
            funcs_in(a, &mut funcs);
        }
        for fr in funcs {
            inner.comp.handle(module, fr)?;
        }
        let tramp = match snap.trampolines.get(&f) {
            Some(&p) => p,
            None => make_trampoline(&mut inner, module, f)?,
        };
        // Function values among the arguments may be new since the
        // trampoline was made.
        if inner.comp.has_pending() {
            finish(&mut inner, module)?;
        }
        self.publish(&mut inner, true, None, |s| {
            s.trampolines.insert(f, tramp);
        });
        Ok(())
    }

    /// The trampoline of `f`, compiling `f` first if needed.
    pub(crate) fn entry(&self, f: FuncId) -> Result<*const u8, CodegenError> {
        if let Some(p) = self.snap().trampoline(f) {
            return Ok(p);
        }
        self.prepare(f, &[])?;
        self.snap()
            .trampoline(f)
            .ok_or_else(|| CodegenError::internal("a trampoline was not published".into()))
    }

    /// Runs `f` on `args` as [`irad_ir::interp::run`] does, in compiled
    /// code, with the per-call state `local` (arrays kept alive while tapes
    /// hold values go to `pinned`).
    pub(crate) fn run(
        &self,
        local: &mut Local,
        pinned: &mut Vec<ArrayRef>,
        f: FuncId,
        args: &[Val],
        opts: &RunOptions,
    ) -> Result<Val, RunError> {
        let module = self.snap().module();
        let func_loc = irad_ir::interp::check_call(module, f, args, opts)?;
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
        let mut ready = self.snap().trampoline(f).is_some();
        if ready {
            let snap = self.snap();
            for (arg, ty) in args.iter().zip(&params) {
                if !flatten(snap, arg, ty, &mut words, &mut arrays).map_err(cg)? {
                    ready = false;
                    break;
                }
            }
        }
        if !ready {
            // Function values among the arguments may be new: compile them
            // before anything calls them.
            self.prepare(f, args).map_err(cg)?;
            words.clear();
            arrays.clear();
            let snap = self.snap();
            for (arg, ty) in args.iter().zip(&params) {
                if !flatten(snap, arg, ty, &mut words, &mut arrays).map_err(cg)? {
                    return Err(cg(CodegenError::internal(
                        "a function value has no handle".into(),
                    )));
                }
            }
        }
        let snap = self.snap();
        let tramp = snap
            .trampoline(f)
            .ok_or_else(|| cg(CodegenError::internal("no trampoline".into())))?;
        let mut rets = vec![0u64; leaf_count(&ret)];
        let depth = 1 - i64::try_from(opts.driver_frames).unwrap_or(0);
        let max_depth = i64::try_from(opts.max_depth).unwrap_or(i64::MAX);
        // SAFETY: `words` holds the leaves of `f`'s parameters, `rets` room
        // for its result's; the arrays they point into are alive for the
        // call (`args` borrows them).
        let status = unsafe { self.call(local, tramp, depth, max_depth, &words, &mut rets) };
        let result = match status {
            Err(e) => Err(e),
            Ok(()) => {
                let mut it = rets.iter().copied();
                unflatten(self.snap(), &ret, &mut it, &arrays, &mut Vec::new())
                    .map_err(|msg| RunError::internal(func_loc.clone(), msg))
            }
        };
        if local.rt.tapes_empty() {
            local.rt.release_arrays();
            pinned.clear();
        } else {
            pinned.extend(arrays.into_iter().map(|(a, _)| a));
        }
        result
    }

    /// Calls the trampoline `tramp` with `args` and `rets`, with `local`'s
    /// runtime, starting at call depth `depth`; a failure as a `RunError`.
    /// Leaves the arena and tapes as the call left them.
    ///
    /// # Safety
    /// `tramp` is a trampoline of this `Code`; `args` holds the leaves of
    /// its function's parameters (pointers to live arrays of the lengths
    /// given, writable if the function writes them) and `rets` has room
    /// for its result's leaves.
    pub(crate) unsafe fn call(
        &self,
        local: &mut Local,
        tramp: *const u8,
        depth: i64,
        max_depth: i64,
        args: &[u64],
        rets: &mut [u64],
    ) -> Result<(), RunError> {
        let snap = self.snap();
        let mut ctx = Ctx {
            depth,
            max_depth,
            stack_limit: 0,
            fn_table: snap.table.as_ptr(),
            tapes: std::ptr::null_mut(),
            err_kind: rt::NO_TRAP,
            err_site: 0,
            err_a: 0,
            err_b: 0,
            rt: &mut *local.rt,
            host: std::ptr::null_mut(),
        };
        local.rt.ensure_tapes(snap.ntapes, &mut ctx);
        local.rt.trace.clear();
        local.rt.message.clear();
        // Sparse handles live for one run, as in the interpreter.
        local.rt.sparse.clear();
        ctx.host = self as *const Code<'m> as *mut u8;
        let shallow = || {
            let left = stacker::remaining_stack().unwrap_or(0);
            left.saturating_sub(STACK_MARGIN).min(self.stack_budget)
        };
        let full = if local.shallow {
            shallow()
        } else {
            self.stack_budget
        };
        let need = full.saturating_add(STACK_MARGIN);
        let in_place = local.on_own
            || local.shallow
            || stacker::remaining_stack().is_some_and(|left| left >= need);
        let budget = std::cell::Cell::new(full);
        let mut call = || {
            // The stack pointer itself, not the address of a local: under
            // AddressSanitizer locals can live on a fake stack in the heap
            // (found by the `interp_vs_jit` fuzz target).
            let sp = psm::stack_pointer() as u64;
            ctx.stack_limit = sp.saturating_sub(budget.get() as u64);
            // SAFETY: the trampoline has this signature; the caller
            // guarantees the words.
            unsafe {
                let t: Trampoline = std::mem::transmute(tramp);
                t(&mut ctx, args.as_ptr(), rets.as_mut_ptr())
            }
        };
        let status = if in_place {
            call()
        } else {
            match on_own_stack(&mut local.own_stack, need, call) {
                Ok(status) => status,
                // No room for a stack of our own: run on this thread's,
                // within what it has left (a deep recursion then ends
                // with the stack error, never a crash).
                Err(mut call) => {
                    budget.set(shallow());
                    call()
                }
            }
        };
        if status == 0 {
            return Ok(());
        }
        local.last_trap = ctx.err_kind;
        let failure = Failure {
            kind: ctx.err_kind,
            site: ctx.err_site,
            a: ctx.err_a,
            b: ctx.err_b,
            max_depth: ctx.max_depth,
            trace: &local.rt.trace,
            message: &local.rt.message,
        };
        let inner = self.lock();
        Err(run_error(&failure, &inner.comp.sites))
    }

    /// The handle of the rule of `kind` for function value `h` at `width`:
    /// from the snapshot, or derived, compiled and published.
    fn rule(&self, kind: RuleKind, h: i64, width: i64) -> Result<u32, String> {
        let hu = u32::try_from(h)
            .map_err(|_| internal_message(format_args!("bad function handle {h}")))?;
        if let Some(&r) = self.snap().rules.get(&(kind, hu, width)) {
            return Ok(r);
        }
        let mut inner = self.lock();
        let snap = self.snap();
        // Another thread may have derived it meanwhile.
        if let Some(&r) = snap.rules.get(&(kind, hu, width)) {
            return Ok(r);
        }
        let callee = *snap
            .handles
            .get(hu as usize)
            .ok_or_else(|| internal_message(format_args!("bad function handle {h}")))?;
        let Some(provider) = inner.provider.as_mut() else {
            return Err(no_provider(kind));
        };
        // Rules are derived into a copy, published with the compiled code:
        // runs on other threads read the current module meanwhile. The copy
        // is published even when a later step fails, as the provider
        // remembers what it added.
        let mut m = snap.module().clone();
        let derived = derive(provider.get(), &mut m, kind, callee, width);
        let m = Arc::new(m);
        let mut compile = |ids: &[FuncId]| -> Result<Vec<u32>, String> {
            let mut hs = Vec::new();
            for &id in ids {
                hs.push(
                    inner
                        .comp
                        .handle(&m, FuncRef::User(id))
                        .map_err(|e| e.to_string())?,
                );
            }
            finish(&mut inner, &m).map_err(|e| e.to_string())?;
            Ok(hs)
        };
        let compiled = derived.and_then(|ids| compile(&ids));
        let mut added = Vec::new();
        let ok = compiled.is_ok();
        let result = match compiled {
            Ok(hs) if kind == RuleKind::Frule => {
                added.push(((kind, hu, width), hs[0]));
                Ok(hs[0])
            }
            Ok(hs) => {
                added.push(((RuleKind::Revfwd, hu, 0), hs[0]));
                added.push(((RuleKind::Revback, hu, 0), hs[1]));
                Ok(if kind == RuleKind::Revback {
                    hs[1]
                } else {
                    hs[0]
                })
            }
            Err(e) => Err(e),
        };
        self.publish(&mut inner, ok, Some(m), |s| s.rules.extend(added));
        result
    }
}

impl Drop for Code<'_> {
    fn drop(&mut self) {
        let snap = *self.snap.get_mut();
        // SAFETY: leaked by `publish` or `new`; nothing reads it any more.
        let snap = unsafe { Box::from_raw(snap) };
        let inner = self.inner_mut();
        // The snapshots replaced go first: then the last one holds the
        // only reference to the module, which moves to the caller.
        inner.retired.clear();
        if let Some(m) = inner.write_back.take() {
            *m = match snap.module {
                ModSnap::Owned(owned) => {
                    Arc::try_unwrap(owned).unwrap_or_else(|arc| (*arc).clone())
                }
                ModSnap::Borrowed(borrowed) => borrowed.clone(),
            };
        }
        // SAFETY: `comp` is not used again. Nothing compiled runs any more
        // (running borrows the `Code`) and no code address leaves it
        // (function values are handles), so the code can be freed.
        unsafe {
            let comp = std::mem::ManuallyDrop::take(&mut inner.comp);
            comp.backend.free_memory();
        }
    }
}

/// The error of a rule asked for without a provider.
fn no_provider(kind: RuleKind) -> String {
    if kind == RuleKind::Frule {
        "no rule provider for frule: run forward rules through the forward-mode API".into()
    } else {
        let prim = if kind == RuleKind::Revback {
            "revback"
        } else {
            "revfwd"
        };
        format!("no rule provider for {prim}: run reverse rules through the reverse-mode API")
    }
}

/// Derives the rule of `kind` for `callee` at `width` into `module` and
/// checks its type: the frule, or the reverse rule's two parts.
fn derive(
    provider: &mut dyn RuleProvider,
    module: &mut Module,
    kind: RuleKind,
    callee: FuncRef,
    width: i64,
) -> Result<Vec<FuncId>, String> {
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
    if kind == RuleKind::Frule {
        let lanes = Lanes::from_code(width)
            .ok_or_else(|| internal_message(format_args!("batch width {width} out of range")))?;
        let id = provider
            .forward_rule(module, callee, lanes)
            .map_err(|e| e.to_string())?;
        check(
            module,
            id,
            Type::forward_fn(&sig, lanes),
            "the forward rule",
        )?;
        Ok(vec![id])
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
        Ok(vec![fwd, back])
    }
}

/// The Cranelift JIT module's builder: settings, runtime symbols, one arena
/// for all code.
fn jit_builder() -> Result<JITBuilder, CodegenError> {
    let mut flags = settings::builder();
    let set =
        |f: &mut settings::Builder, k: &str, v: &str| f.set(k, v).map_err(CodegenError::backend);
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
    Ok(builder)
}

/// Defines everything pending and finalizes it.
fn finish(inner: &mut Inner<'_>, module: &Module) -> Result<(), CodegenError> {
    inner.comp.define_pending(module)?;
    irad_ir::timings::time(irad_ir::timings::Stage::Cranelift, || {
        inner
            .comp
            .backend
            .finalize_definitions()
            .map_err(CodegenError::backend)
    })
}

/// Makes (and finalizes) the trampoline of `f`, declaring `f`.
fn make_trampoline(
    inner: &mut Inner<'_>,
    module: &Module,
    f: FuncId,
) -> Result<*const u8, CodegenError> {
    let func = module
        .get(f)
        .ok_or_else(|| CodegenError::internal(format!("no function {f:?}")))?;
    let sig = func.fn_type();
    let comp = &mut *inner.comp;
    let callee = comp.declare(module, FuncRef::User(f))?;
    let cc = comp.call_conv();
    let mut tsig = Signature::new(cc);
    tsig.params.extend([AbiParam::new(types::I64); 3]);
    tsig.returns.push(AbiParam::new(types::I8));
    let id = comp
        .backend
        .declare_anonymous_function(&tsig)
        .map_err(CodegenError::backend)?;
    let mut ctx = comp.backend.make_context();
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
        let r = comp.backend.declare_func_in_func(callee, b.func);
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
        b.finalize(comp.backend.isa().frontend_config());
    }
    // A trampoline of a function of thousands of parameters loads them all
    // before its call: wide (`define_sized`).
    let name = format!("trampoline of @{}", func.name);
    comp.define_sized(&name, id, &mut ctx)
        .map_err(|e| CodegenError::backend_in(e, "a trampoline"))?;
    finish(inner, module)?;
    Ok(inner.comp.backend.get_finalized_function(id))
}

/// The function values in `v`, depth-first.
fn funcs_in(v: &Val, out: &mut Vec<FuncRef>) {
    match v {
        Val::Func(fr) => out.push(*fr),
        Val::Tuple(vs) | Val::Dual(vs) => vs.iter().for_each(|v| funcs_in(v, out)),
        _ => {}
    }
}

/// Appends the leaves of `v` (of type `ty`) to `out`; array arguments are
/// recorded in `arrays` with their addresses. `false` when a function value
/// has no handle in `snap` yet.
fn flatten(
    snap: &Snap<'_>,
    v: &Val,
    ty: &Type,
    out: &mut Vec<u64>,
    arrays: &mut Vec<(ArrayRef, u64)>,
) -> Result<bool, CodegenError> {
    match (v, ty) {
        (Val::F64(x), _) => out.push(x.to_bits()),
        (Val::I64(n), _) => out.push(*n as u64),
        (Val::Bool(b), _) => out.push(u64::from(*b)),
        (Val::Unit, _) => {}
        (Val::Tuple(vs), Type::Tuple(ts)) => {
            for (v, t) in vs.iter().zip(ts.iter()) {
                if !flatten(snap, v, t, out, arrays)? {
                    return Ok(false);
                }
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
        (Val::Func(fr), _) => match snap.handle_of.get(fr) {
            Some(&h) if snap.table.get(h as usize).is_some_and(|p| !p.is_null()) => {
                out.push(u64::from(h));
            }
            _ => return Ok(false),
        },
        (Val::Dual(vs), Type::Dual(inner, lanes)) => {
            let tan = inner.tangent_at(*lanes).unwrap_or(Type::Unit);
            for (i, v) in vs.iter().enumerate() {
                if !flatten(snap, v, if i == 0 { inner } else { &tan }, out, arrays)? {
                    return Ok(false);
                }
            }
        }
        _ => {
            return Err(CodegenError::internal(format!(
                "argument of kind {} for type {ty}",
                v.kind()
            )));
        }
    }
    Ok(true)
}

/// The value of type `ty` whose leaves come next in `it`. An array that
/// is an argument (in `arrays`, with its address) is that argument; one
/// that compiled code allocated is copied out once, and `made` keeps the
/// copies of this result by address, so that an array met twice is one
/// array, as in the interpreter.
fn unflatten(
    snap: &Snap<'_>,
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
                .and_then(|h| snap.handles.get(h))
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
                    Scalar::Sparse => {
                        ArrayData::Sparse(std::slice::from_raw_parts(p as *const i64, n).to_vec())
                    }
                }
            };
            let a = ArrayRef::new(data);
            made.push((a.clone(), p));
            Val::Array(a)
        }
        Type::Tuple(ts) => {
            let mut vs = Vec::with_capacity(ts.len());
            for t in ts.iter() {
                vs.push(unflatten(snap, t, it, arrays, made)?);
            }
            Val::Tuple(Rc::from(vs))
        }
        Type::Dual(inner, lanes) => {
            let tan = inner
                .tangent_at(*lanes)
                .ok_or("a dual without a tangent type")?;
            let mut vs = vec![unflatten(snap, inner, it, arrays, made)?];
            for _ in 0..lanes.count() {
                vs.push(unflatten(snap, &tan, it, arrays, made)?);
            }
            Val::Dual(Rc::from(vs))
        }
    })
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

/// `irad_rule` in the JIT: finds a rule in the snapshot, or derives,
/// compiles and publishes it, then points the context at the newest
/// function table and makes sure of its tapes.
extern "C" fn jit_rule(ctx: *mut Ctx, kind: i64, h: i64, width: i64, site: i64) -> i64 {
    // SAFETY: compiled code passes the context `Code::call` made, whose
    // `host` is the running JIT's shared half (alive for the call) and
    // whose `rt` is the call's own runtime, not otherwise accessed during
    // the callback.
    let ctx = unsafe { &mut *ctx };
    let code = unsafe { &*(ctx.host as *const Code<'_>) };
    let rt = unsafe { &mut *ctx.rt };
    let res = match RuleKind::from_code(kind) {
        Some(kind) => catch_unwind(AssertUnwindSafe(|| code.rule(kind, h, width)))
            .unwrap_or_else(|_| Err(internal_message("rule derivation panicked"))),
        None => Err(internal_message(format_args!("unknown rule kind {kind}"))),
    };
    match res {
        Ok(r) => {
            let snap = code.snap();
            ctx.fn_table = snap.table.as_ptr();
            rt.ensure_tapes(snap.ntapes, ctx);
            i64::from(r)
        }
        Err(msg) => {
            rt.message = msg;
            ctx.err_kind = rt::TrapKind::Message.code();
            ctx.err_site = site;
            -1
        }
    }
}
