//! Huge functions compiled by Cranelift on threads of their own while the
//! next functions are lowered (`Compiler::define_pending`).
//!
//! A function that `needs_huge_settings` is compiled with `huge_isa` to
//! bytes and relocations, which needs nothing of the compiler's state: it
//! runs on a thread while the lowering goes on. Every function lowered after
//! one in flight waits, lowered, in a queue, and [`Compiler::flush`] defines
//! the queue in the backend in the order the functions were lowered: the
//! backend sees the same definitions in the same order as when each function
//! was compiled as soon as it was lowered, so objects and code are
//! unchanged.
//!
//! Assumes: `Compiler::define_pending` flushes before it returns, on success
//! and on failure. Guarantees: a failure defines the functions before the
//! one that failed, and leaves that function and every later one of the
//! queue pending, the failing one to be defined first (as a failure to
//! compile leaves it when compiled in place). The `cranelift` stage times
//! the lowering thread's waits for the compiling ones, so the stages still
//! add up to the wall time.

use super::{Compiler, ModuleError, huge_isa, needs_huge_settings};
use crate::CodegenError;
use cranelift_codegen::Context;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_module::{FuncId as ClFuncId, Module as ClModule, ModuleReloc};
use irad_ir::func::FuncRef;
use irad_ir::timings::{Stage, time};
use std::thread::JoinHandle;

/// The stack of a compiling thread: the main thread's usual 8 MiB (mapped,
/// not committed, until used).
const COMPILE_STACK: usize = 8 << 20;

/// A function lowered, waiting to be defined in the backend.
pub(super) struct Queued {
    f: FuncRef,
    id: ClFuncId,
    name: String,
    work: Work,
    /// Its shape, when [`Compiler::shapes`] is on and it is in flight
    /// (the others are measured by `define_sized` in turn).
    shape: Option<crate::Shape>,
}

/// What is left to do for a queued function.
enum Work {
    /// Compiling on a thread (a huge function).
    InFlight(JoinHandle<Result<Compiled, Box<ModuleError>>>),
    /// Compiled on a thread, waiting for its turn to be defined.
    Done(Result<Compiled, Box<ModuleError>>),
    /// Lowered into this context, to be compiled with the backend's own
    /// settings when its turn comes.
    Lowered(Box<Context>),
}

/// A huge function's machine code.
pub(super) struct Compiled {
    pub align: u64,
    pub bytes: Vec<u8>,
    pub relocs: Vec<ModuleReloc>,
}

impl<M: ClModule> Compiler<M> {
    /// Takes the lowered function `f` (Cranelift function `id`, in `ctx`)
    /// into the queue when it is huge or the queue is not empty, starting
    /// a huge function's compile on a thread; returns `ctx` when the
    /// function is to be compiled in place instead. Only with
    /// [`Compiler::clif`] off (its log wants each function as compiled, in
    /// order).
    pub(super) fn queue(
        &mut self,
        f: FuncRef,
        id: ClFuncId,
        name: &str,
        ctx: Context,
    ) -> Option<Context> {
        if self.clif.is_some() {
            return Some(ctx);
        }
        let huge = needs_huge_settings(&ctx.func);
        if !huge && self.queued.is_empty() {
            return Some(ctx);
        }
        let isa = if huge { self.huge_isa_made() } else { None };
        let (work, shape) = match isa {
            Some(isa) => {
                self.wait_for_a_thread();
                let shape = self
                    .shapes
                    .as_ref()
                    .map(|_| crate::shape::shape(name, &ctx.func, true));
                (spawn_compile(isa, id, ctx), shape)
            }
            None => (Work::Lowered(Box::new(ctx)), None),
        };
        self.queued.push(Queued {
            f,
            id,
            name: name.to_string(),
            work,
            shape,
        });
        None
    }

    /// Defines every queued function in the backend, in order, waiting for
    /// those compiling. On the first failure, that function and every later
    /// one go back to the pending list (the failing one on top) and its
    /// error is returned.
    pub(super) fn flush(&mut self) -> Result<(), CodegenError> {
        let queued = std::mem::take(&mut self.queued);
        let mut rest = queued.into_iter();
        while let Some(q) = rest.next() {
            let (f, name) = (q.f, q.name.clone());
            if let Err(e) = time(Stage::Cranelift, || self.define_queued(q)) {
                // Those after it first, so that it is defined first again.
                // Their threads are waited for, so none outlives the call.
                let later: Vec<Queued> = rest.collect();
                for l in later.into_iter().rev() {
                    if let Work::InFlight(handle) = l.work {
                        let _ = handle.join();
                    }
                    self.pending.push(l.f);
                }
                self.pending.push(f);
                return Err(CodegenError::backend_in(e, &name));
            }
            self.defined.push(f);
        }
        Ok(())
    }

    /// Waits, when [`MAX_THREADS`] functions are compiling, for the one
    /// started first: a huge function split into many parts
    /// (`irad_passes::split`) then holds that many parts' compiler data at
    /// once, not all of them.
    fn wait_for_a_thread(&mut self) {
        let in_flight = || {
            self.queued
                .iter()
                .filter(|q| matches!(q.work, Work::InFlight(_)))
        };
        if in_flight().count() < max_threads() {
            return;
        }
        let Some(q) = self
            .queued
            .iter_mut()
            .find(|q| matches!(q.work, Work::InFlight(_)))
        else {
            return;
        };
        let work = std::mem::replace(&mut q.work, Work::Done(Err(stopped())));
        if let Work::InFlight(handle) = work {
            q.work = Work::Done(time(Stage::Cranelift, || {
                handle.join().unwrap_or_else(|_| Err(stopped()))
            }));
        }
    }

    /// Defines one queued function.
    fn define_queued(&mut self, q: Queued) -> Result<(), Box<ModuleError>> {
        let done = match q.work {
            Work::Lowered(mut ctx) => return self.define_sized(&q.name, q.id, &mut ctx),
            Work::InFlight(handle) => handle.join().unwrap_or_else(|_| Err(stopped())),
            Work::Done(done) => done,
        };
        if let (Some(shapes), Some(shape)) = (&mut self.shapes, q.shape) {
            shapes.push(shape);
        }
        let code = done?;
        Ok(self
            .backend
            .define_function_bytes(q.id, code.align, &code.bytes, &code.relocs)?)
    }

    /// The ISA of huge functions, made on first need; `None` when the
    /// target has none.
    pub(super) fn huge_isa_made(&mut self) -> Option<OwnedTargetIsa> {
        if self.huge_isa.is_none() {
            self.huge_isa = Some(huge_isa(self.backend.isa()));
        }
        self.huge_isa.clone().flatten()
    }
}

/// Starts compiling `ctx` (the function `id`) with `isa` on a thread; the
/// context is kept to be compiled in place when no thread can be started.
fn spawn_compile(isa: OwnedTargetIsa, id: ClFuncId, ctx: Context) -> Work {
    let (tx, rx) = std::sync::mpsc::channel::<Context>();
    let spawned = std::thread::Builder::new()
        .name("irad-cranelift".into())
        .stack_size(COMPILE_STACK)
        .spawn(move || match rx.recv() {
            Ok(mut ctx) => compile(&isa, id, &mut ctx),
            Err(_) => Err(stopped()),
        });
    match spawned {
        Ok(handle) => match tx.send(ctx) {
            Ok(()) => Work::InFlight(handle),
            Err(std::sync::mpsc::SendError(ctx)) => {
                let _ = handle.join();
                Work::Lowered(Box::new(ctx))
            }
        },
        Err(_) => Work::Lowered(Box::new(ctx)),
    }
}

/// The most huge functions compiling on threads at once: the cores
/// available (at least 2; the lowering thread goes on beside them).
fn max_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().max(2))
}

/// The error of a compiling thread that stopped without its result.
fn stopped() -> Box<ModuleError> {
    Box::new(ModuleError::Compilation(
        cranelift_codegen::CodegenError::Unsupported("the compiling thread stopped".into()),
    ))
}

/// Compiles `ctx` (the function `id`) with `isa` to bytes and relocations
/// (for `define_function_bytes`), on a thread or in place
/// (`define_sized`).
pub(super) fn compile(
    isa: &OwnedTargetIsa,
    id: ClFuncId,
    ctx: &mut Context,
) -> Result<Compiled, Box<ModuleError>> {
    let mut ctrl = ControlPlane::default();
    ctx.compile(&**isa, &mut ctrl)
        .map_err(|e| ModuleError::Compilation(e.inner))?;
    let Some(code) = ctx.compiled_code() else {
        return Err(Box::new(ModuleError::Compilation(
            cranelift_codegen::CodegenError::Unsupported("no code after compiling".into()),
        )));
    };
    let relocs: Vec<ModuleReloc> = code
        .buffer
        .relocs()
        .iter()
        .map(|r| ModuleReloc::from_mach_reloc(r, &ctx.func, id))
        .collect();
    Ok(Compiled {
        align: u64::from(code.buffer.alignment),
        bytes: code.code_buffer().to_vec(),
        relocs,
    })
}
