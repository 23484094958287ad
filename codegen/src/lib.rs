//! irad's code generator: lowers IR functions, including the forward and
//! reverse functions the AD passes produce, to native code with Cranelift.
//!
//! - [`Jit`] compiles in process and runs functions on the interpreter's
//!   values ([`irad_ir::interp::Val`]), with the interpreter's results and
//!   errors: compiled code must agree with the interpreter bit for bit.
//!   [`SharedJit`] is the same, owning its module, for many threads at
//!   once (each call or [`JitSession`] with a runtime context of its own).
//! - `layout` fixes how each IR type is represented (docs/codegen.md);
//!   `lower` translates functions, shared by the JIT and the object backend;
//!   `shape` measures what the register allocators' time depends on
//!   ([`Shape`], for tests that keep compile time linear).
//! - [`emit_object`] writes an object file with a C ABI and its header
//!   (`irad emit`): exported functions per [`Export`], described in `cabi`.
//! - Run-time support (tapes, arrays, math functions) is the `irad-runtime`
//!   crate, linked into the process for the JIT and as a static library for
//!   object files.

#![warn(missing_docs)]

mod cabi;
mod error;
mod jit;
mod layout;
mod lower;
mod object;
mod shape;

pub use cabi::{Export, ExportKind};
pub use error::CodegenError;
/// The run-time library compiled code calls (status codes, context layout).
pub use irad_runtime as runtime;
pub use jit::{
    DEFAULT_STACK_BUDGET, Entry, Jit, JitSession, Scratch, SharedJit, jit_with_rules,
    set_thread_stack_budget,
};
pub use lower::{HUGE_FUNCTION_INSTS, WIDE_LIVE_VALUES};
pub use object::{
    DefinedExports, ObjectFile, ObjectOptions, StrongVersion, define_in_module, emit_object,
    native_isa_for_objects, runtime_symbols,
};
pub use shape::Shape;
/// The Cranelift crates an embedder's module comes from (the versions
/// irad is built with).
pub use {
    cranelift_codegen, cranelift_frontend, cranelift_jit, cranelift_module, cranelift_native,
    cranelift_object,
};

/// Which loops compiled code runs two iterations at a time in vectors
/// (docs/codegen.md, "Vectorisation"); the results are the same either way.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum LoopVectors {
    /// None.
    Off,
    /// Map loops (no accumulator): the default. These gain (an in-place
    /// map over 1e5 elements 48.6 -> 27.2 us).
    #[default]
    Maps,
    /// Map loops and reductions: the elementwise part in vectors, the
    /// accumulators updated lane after lane in scalar code (the sequential
    /// sum exactly). Measured no faster than the scalar loop, whose chain
    /// of dependent adds is the bound either way, and slower when the
    /// accumulator lives across a later call (rosenbrock's gradient 280 ->
    /// 356 us), so not the default (docs/performance.md).
    MapsAndReductions,
}

/// How many loops of `func` compiled code runs two iterations at a time
/// with vectors when `which` are (docs/codegen.md, "Vectorisation"),
/// counted on `func` as given (code generation first inlines small callees
/// into it, and versions loops, which may add loops). For tests and
/// diagnostics.
pub fn vectorised_loops(func: &irad_ir::Func, which: LoopVectors) -> usize {
    lower::vectorised_loops(func, which)
}

/// How many times code generation fuses two adjacent counted loops of
/// `func` into one (docs/codegen.md, "Loop fusion"), counted on `func` as
/// given (code generation first inlines small callees into it). For tests
/// and diagnostics.
pub fn fused_loops(func: &irad_ir::Func) -> usize {
    lower::fused_loops(func)
}
