//! A JIT many threads call at once: [`SharedJit`] owns its module and rule
//! provider (and whatever the provider borrows), is `Send + Sync`, and runs
//! each call on a runtime context of its own, taken from a small lock-free
//! pool and given back when the call (or [`JitSession`]) ends.
//!
//! Assumes: the provider given is `Send` (it is only used under the
//! compiler's mutex); the host allows code to be compiled on one thread and
//! run on another (true of Linux and Windows; Apple's W^X toggling for
//! arm64 JITs is per thread, which Cranelift's JIT does not handle here).
//!
//! Guarantees: a call that needs nothing new takes no lock: it loads the
//! published snapshot (`super::code`) and swaps a context out of the pool;
//! compiling, deriving rules and reporting a run-time error take the
//! compiler's mutex. A context goes back to the pool empty (tapes emptied,
//! arena freed), so one call's failure leaves nothing behind for another.

use super::STACK_MARGIN as MARGIN;
use super::code::{Code, Local, Provider};
use super::stack::ensure_own_stack;
use super::thread_stack_budget;
use crate::CodegenError;
use irad_ir::func::{FuncId, FuncRef, Module};
use irad_ir::interp::{ArrayRef, Executor, RuleProvider, RunError, RunOptions, Val};
use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicPtr, Ordering};

/// Contexts kept for reuse: more threads than this at once still work, the
/// extra contexts are made and dropped per call.
const POOL: usize = 32;

thread_local! {
    /// A small context kept by the thread (any JIT's: a context does not
    /// depend on the code it runs), tried before the pool: no atomic
    /// operation on the common path of one thread calling again and again.
    static SPARE: std::cell::Cell<Option<Box<Local>>> = const { std::cell::Cell::new(None) };
}

/// A JIT that owns its module and rule provider and that many threads call
/// at once through `&self`; see the module documentation.
///
/// ```
/// use irad_codegen::SharedJit;
/// use irad_ir::interp::{RunOptions, Val};
///
/// let m = irad_ir::surface::compile("fn f(x: f64) -> f64 { x * sin(x) }").unwrap();
/// let f = m.by_name("f").unwrap();
/// let jit = SharedJit::new(m, None).unwrap();
/// let got: Vec<f64> = std::thread::scope(|s| {
///     let hs: Vec<_> = (0..4)
///         .map(|i| {
///             let jit = &jit;
///             s.spawn(move || match jit.run(f, &[Val::F64(f64::from(i))], &RunOptions::default()) {
///                 Ok(Val::F64(y)) => y,
///                 other => panic!("{other:?}"),
///             })
///         })
///         .collect();
///     hs.into_iter().map(|h| h.join().unwrap()).collect()
/// });
/// assert_eq!(got[2], 2.0 * 2.0f64.sin());
/// ```
pub struct SharedJit {
    /// Declared before `_owner`: the provider inside may borrow from it.
    /// Boxed: large, and entries name it by address.
    code: Box<Code<'static>>,
    pool: Pool,
    max_depth: i64,
    /// What the provider borrows (`SharedJit::with_owner`), dropped last.
    _owner: Option<Arc<dyn Any + Send + Sync>>,
}

// SAFETY: the `Code` of a `SharedJit` owns its module and a provider that
// was `Send` when given (the constructors require it); the compiler and the
// provider are used only under the `Code`'s mutex; the snapshots and code
// addresses are immutable once published and live until the `SharedJit` is
// dropped; the pool holds `Local`s, which are `Send`, through atomics. So
// moving it to another thread, or using `&SharedJit` from several, shares
// nothing that is mutated without synchronisation.
unsafe impl Send for SharedJit {}
// SAFETY: as above.
unsafe impl Sync for SharedJit {}

impl SharedJit {
    /// A JIT that owns `module` and, when given, the provider of the rules
    /// of function values met at run time.
    pub fn new(
        module: Module,
        provider: Option<Box<dyn RuleProvider + Send>>,
    ) -> Result<SharedJit, CodegenError> {
        SharedJit::make(module, provider.map(|p| p as Box<dyn RuleProvider>), None)
    }

    /// A JIT whose module and provider `make` builds from `owner`, which the
    /// provider may borrow (a rule registry the AD passes read): the
    /// `SharedJit` keeps `owner` alive for as long as the provider.
    pub fn with_owner<R, E>(
        owner: Arc<R>,
        make: impl for<'a> FnOnce(
            &'a R,
        )
            -> Result<(Module, Option<Box<dyn RuleProvider + Send + 'a>>), E>,
    ) -> Result<SharedJit, E>
    where
        R: Send + Sync + 'static,
        E: From<CodegenError>,
    {
        // SAFETY: `owner`'s contents do not move (it is behind an `Arc`)
        // and live as long as the `SharedJit`, which keeps a clone of the
        // `Arc` and drops it after the provider (field order). `make` is
        // generic over the reference's lifetime, so what it returns borrows
        // nothing else short-lived, and the `'static` lifetime given to the
        // provider never leaves the `SharedJit`.
        let r: &'static R = unsafe { &*Arc::as_ptr(&owner) };
        let (module, provider) = make(r)?;
        let owner: Arc<dyn Any + Send + Sync> = owner;
        Ok(SharedJit::make(
            module,
            provider.map(|p| p as Box<dyn RuleProvider>),
            Some(owner),
        )?)
    }

    fn make(
        module: Module,
        provider: Option<Box<dyn RuleProvider>>,
        owner: Option<Arc<dyn Any + Send + Sync>>,
    ) -> Result<SharedJit, CodegenError> {
        let code = Code::new(
            Err(module),
            provider.map(Provider::Owned),
            None,
            thread_stack_budget(),
        )?;
        Ok(SharedJit {
            code: Box::new(code),
            pool: Pool::default(),
            max_depth: i64::try_from(RunOptions::default().max_depth).unwrap_or(i64::MAX),
            _owner: owner,
        })
    }

    /// The module, with every rule added so far (a snapshot: rules added
    /// later by other threads are in later snapshots).
    pub fn module(&self) -> &Module {
        self.code.snap().module()
    }

    /// Sets how much native stack compiled code may use (see
    /// [`super::DEFAULT_STACK_BUDGET`]).
    pub fn set_stack_budget(&mut self, bytes: usize) {
        self.code.stack_budget = bytes;
    }

    /// Compiles `f` and everything it can reach, if not done yet.
    pub fn compile(&self, f: FuncId) -> Result<(), CodegenError> {
        self.code.compile(FuncRef::User(f)).map(|_| ())
    }

    /// Compiles `f` if needed and returns its entry, for
    /// [`JitSession::call`].
    pub fn entry(&self, f: FuncId) -> Result<Entry, CodegenError> {
        Ok(Entry {
            tramp: self.code.entry(f)?,
            owner: &*self.code as *const Code<'static> as usize,
        })
    }

    /// Runs `f` on `args` as [`irad_ir::interp::run`] does, in compiled
    /// code, on a context of its own (tapes start empty and are emptied
    /// after).
    pub fn run(&self, f: FuncId, args: &[Val], opts: &RunOptions) -> Result<Val, RunError> {
        self.session().run(f, args, opts)
    }

    /// A context for a sequence of runs that share tapes (reverse mode's
    /// forward sweep, then its pullback), given back when dropped.
    pub fn session(&self) -> JitSession<'_> {
        let local = SPARE
            .with(std::cell::Cell::take)
            .unwrap_or_else(|| self.pool.take());
        JitSession {
            jit: self,
            local: Some(local),
            pinned: Vec::new(),
        }
    }
}

/// A compiled function's entry point in one [`SharedJit`], for
/// [`JitSession::call`].
#[derive(Copy, Clone, Debug)]
pub struct Entry {
    tramp: *const u8,
    /// The `Code` it belongs to, by address.
    owner: usize,
}

// SAFETY: the address of immutable code, valid while its `SharedJit` lives
// (`JitSession::call` checks that it is the session's).
unsafe impl Send for Entry {}
// SAFETY: as above.
unsafe impl Sync for Entry {}

/// Buffers a caller reuses from call to call (the words of arguments and
/// results, copies of arrays), kept in the context so that typed calls
/// allocate nothing once warm.
#[derive(Debug, Default)]
pub struct Scratch {
    /// Argument leaves.
    pub words: Vec<u64>,
    /// Result leaves.
    pub rets: Vec<u64>,
    /// Copies of array arguments.
    pub copies: Vec<f64>,
}

/// One thread's use of a [`SharedJit`]: a runtime context (tapes, arena,
/// stack) for runs that share tapes; given back to the pool, emptied, when
/// dropped.
pub struct JitSession<'j> {
    jit: &'j SharedJit,
    /// `None` only while being dropped.
    local: Option<Box<Local>>,
    /// Argument arrays kept alive while tapes hold values.
    pinned: Vec<ArrayRef>,
}

impl JitSession<'_> {
    fn local(&mut self) -> &mut Local {
        self.local.get_or_insert_with(|| Box::new(Local::new()))
    }

    /// Runs `f` on `args` as [`SharedJit::run`] does, with the tapes that
    /// earlier runs of this session left.
    pub fn run(&mut self, f: FuncId, args: &[Val], opts: &RunOptions) -> Result<Val, RunError> {
        let jit = self.jit;
        let mut pinned = std::mem::take(&mut self.pinned);
        let res = jit.code.run(self.local(), &mut pinned, f, args, opts);
        self.pinned = pinned;
        res
    }

    /// Runs `f` with this session, on the session's own stack when the
    /// thread has less stack left than the JIT's budget: the runs and calls
    /// `f` makes then switch stacks no more (once per gradient rather than
    /// once per call).
    pub fn with_stack<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        let need = self.jit.code.stack_budget.saturating_add(MARGIN);
        let local = self.local();
        if local.on_own || stacker::remaining_stack().is_some_and(|left| left >= need) {
            return f(self);
        }
        ensure_own_stack(&mut local.own_stack, need);
        let Some(stack) = local.own_stack.take() else {
            // No room for a stack of its own: each run finds its way
            // (`Code::call`: in place, within the stack left).
            return f(self);
        };
        local.on_own = true;
        let out = stack.run(|| f(self));
        let local = self.local();
        local.own_stack = Some(stack);
        local.on_own = false;
        out
    }

    /// Runs `f` with this session in place on the thread's stack, with
    /// what is left of it (less a margin) as the stack budget when that is
    /// less than the JIT's; if the compiled code runs out of it, resets the
    /// session (tapes, arena) and runs `f` again on the session's own stack
    /// with the full budget ([`JitSession::with_stack`]). For calls that
    /// can be repeated from the start (typed calls copy their arguments):
    /// it saves the switch of stacks when the thread's stack suffices.
    pub fn try_in_place<R>(
        &mut self,
        mut f: impl FnMut(&mut Self) -> Result<R, RunError>,
    ) -> Result<R, RunError> {
        let budget = self.jit.code.stack_budget;
        let need = budget.saturating_add(MARGIN);
        let local = self.local();
        let left = stacker::remaining_stack().unwrap_or(0);
        if local.on_own || local.shallow || left >= need {
            return f(self);
        }
        // Less than 64 KiB besides the margin: not worth a try.
        if left > MARGIN + (1 << 16) {
            local.shallow = true;
            local.last_trap = irad_runtime::NO_TRAP;
            let res = f(self);
            let local = self.local();
            local.shallow = false;
            let out_of_stack = local.last_trap == irad_runtime::TrapKind::Stack.code();
            if res.is_ok() || !out_of_stack {
                return res;
            }
            local.reset();
            self.pinned.clear();
        }
        self.with_stack(f)
    }

    /// The session's reusable buffers.
    pub fn scratch(&mut self) -> &mut Scratch {
        &mut self.local().scratch
    }

    /// Whether every tape is empty.
    pub fn tapes_empty(&mut self) -> bool {
        self.local().rt.tapes_empty()
    }

    /// Calls `entry` with the argument leaves `args`, its result leaves
    /// written to `rets`, at call depth 1 with the default depth limit: no
    /// checks of the arguments, no conversion. Arrays the call allocates
    /// stay in the session's arena until the tapes are empty after a call.
    ///
    /// # Safety
    /// `args` holds the leaves of the parameters of `entry`'s function
    /// (docs/codegen.md, "The JIT": 8 bytes each, an array as its address
    /// and length, the array alive and writable if the function writes to
    /// it) and `rets` has room for the leaves of its result.
    pub unsafe fn call(
        &mut self,
        entry: Entry,
        args: &[u64],
        rets: &mut [u64],
    ) -> Result<(), RunError> {
        let jit = self.jit;
        if entry.owner != &*jit.code as *const Code<'static> as usize {
            return Err(RunError::internal(
                irad_ir::Location::default(),
                "an entry of another JIT",
            ));
        }
        let local = self.local();
        // SAFETY: `entry` is a trampoline of this JIT (checked); the caller
        // guarantees the words.
        let res = unsafe {
            jit.code
                .call(local, entry.tramp, 1, jit.max_depth, args, rets)
        };
        if local.rt.tapes_empty() {
            local.rt.release_arrays();
        }
        res
    }
}

impl Executor for JitSession<'_> {
    fn run(&mut self, f: FuncId, args: &[Val], opts: &RunOptions) -> Result<Val, RunError> {
        JitSession::run(self, f, args, opts)
    }
}

impl Drop for JitSession<'_> {
    fn drop(&mut self) {
        if let Some(mut local) = self.local.take() {
            local.reset();
            // After the reset: no tape points into these any more.
            self.pinned.clear();
            let local = if local.is_small() {
                SPARE.with(|s| match s.take() {
                    None => {
                        s.set(Some(local));
                        None
                    }
                    other => {
                        s.set(other);
                        Some(local)
                    }
                })
            } else {
                Some(local)
            };
            if let Some(local) = local {
                self.jit.pool.put(local);
            }
        }
    }
}

/// Runtime contexts for reuse, in slots taken and filled with atomic swaps.
struct Pool {
    slots: Box<[AtomicPtr<Local>]>,
}

impl Default for Pool {
    fn default() -> Pool {
        Pool {
            slots: (0..POOL)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
        }
    }
}

impl Pool {
    /// A context from the pool, or a new one.
    fn take(&self) -> Box<Local> {
        for s in self.slots.iter() {
            if s.load(Ordering::Relaxed).is_null() {
                continue;
            }
            let p = s.swap(std::ptr::null_mut(), Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: slots hold boxes leaked by `put`, each taken once
                // (the swap).
                return unsafe { Box::from_raw(p) };
            }
        }
        Box::new(Local::new())
    }

    /// Gives `local` back, or drops it when the pool is full.
    fn put(&self, local: Box<Local>) {
        let p = Box::into_raw(local);
        for s in self.slots.iter() {
            if s.compare_exchange(
                std::ptr::null_mut(),
                p,
                Ordering::Release,
                Ordering::Relaxed,
            )
            .is_ok()
            {
                return;
            }
        }
        // SAFETY: leaked just above and not stored anywhere.
        drop(unsafe { Box::from_raw(p) });
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        for s in self.slots.iter_mut() {
            let p = *s.get_mut();
            if !p.is_null() {
                // SAFETY: leaked by `put`, not taken.
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}
