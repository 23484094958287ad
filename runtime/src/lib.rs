//! The run-time support of irad's compiled code: the context every compiled
//! function receives, the tapes of reverse mode, array allocation, the math
//! functions, the bulk array primitives and the error slot.
//!
//! The JIT links this crate into the process and passes the addresses of its
//! `irad_rt_*` functions (the [`RtSym`] list) to Cranelift; object files
//! written by `irad emit` link the same functions from the static library
//! this crate also builds (`libirad_runtime.a`). Either way compiled code
//! computes what the interpreter computes: the math functions are the ones
//! the interpreter calls (`irad_kernels::math`'s `exp`, `log`, `tanh`,
//! `sin`, `cos`, `tan` and `pow`, the `libm` crate's others; compiled code
//! computes `exp` and `log` inline,
//! reading their tables, `irad_rt_exp_table` and `irad_rt_log_table`).
//!
//! Layout contract with the code generator (`irad-codegen`, docs/codegen.md):
//! [`Ctx`] and [`Tape`] are `repr(C)` and the generator reads and writes their
//! fields at the offsets given by the `OFF_*` constants; a test checks that the
//! constants match the structs. A tape is one growable buffer: `push` stores a
//! value's leaves at `top` and advances it, `pop` moves `top` back; compiled
//! code does both inline and calls [`irad_rt_tape_grow`] only when a buffer is
//! full. Arrays are (pointer, length) pairs; [`irad_rt_alloc`] and
//! [`irad_rt_copy`] allocate zeroed memory that the [`Runtime`]'s [`Arena`]
//! owns until compiled code frees it ([`irad_rt_free`], for arrays the code
//! generator proves dead) or [`Runtime::release_arrays`] (`arena.rs`).
//!
//! The bulk kernels, the sparse tangent builder and the error kinds with
//! their texts are `irad-kernels`', which the interpreter uses too; they are
//! re-exported here ([`bulk`], [`sparse`], [`TrapKind`], [`Trap`]).
//!
//! Errors: a failing operation stores an error kind (a [`TrapKind`] code),
//! the site (a number the code generator gave the failing statement) and up to
//! two operands in the context, then every compiled frame returns status 1;
//! callers record their call site with [`irad_rt_trace`] on the way out.
//!
//! Object files also call [`irad_rt_enter`] and [`irad_rt_leave`] around
//! each exported function, and C programs call [`irad_error_message`] and the
//! per-thread settings (the `capi` module, docs/codegen.md "The C ABI").

#![warn(missing_docs)]
#![allow(clippy::missing_safety_doc)] // every unsafe fn documents its contract in prose

use std::alloc::{Layout, alloc_zeroed, dealloc, realloc};
use std::ptr;

mod arena;
mod bulk_ffi;
mod capi;
mod sparse_ffi;
mod symbols;
pub use arena::{
    Arena, HEADER, POISON_ENV, irad_rt_drop_popped, irad_rt_free, irad_rt_hold, irad_rt_release,
    poison_freed,
};
pub use bulk_ffi::{
    irad_rt_bulk_axpy, irad_rt_bulk_copyto, irad_rt_bulk_dot, irad_rt_bulk_fill, irad_rt_bulk_gemm,
    irad_rt_bulk_matmul, irad_rt_bulk_matvec, irad_rt_bulk_scale, irad_rt_bulk_sum,
};
pub use capi::{
    DEFAULT_MAX_DEPTH, DEFAULT_STACK_BUDGET, SITE_INFO_SIZE, SiteInfo, error_text,
    irad_error_message, irad_rt_enter, irad_rt_has_nan, irad_rt_leave, irad_rt_restore,
    irad_rt_save, irad_rt_unsave, irad_set_max_depth, irad_set_stack_budget,
};
pub use irad_kernels::{bulk, math, sparse};
pub use sparse_ffi::{
    irad_rt_sparse_dot, irad_rt_sparse_fill, irad_rt_sparse_gemma, irad_rt_sparse_gemmb,
    irad_rt_sparse_sum,
};
pub use symbols::RtSym;

/// The largest array, in elements, compiled code allocates (the interpreter's
/// limit too).
pub use irad_kernels::MAX_ARRAY_LEN;
/// The run-time errors: kinds with their codes (what `Ctx::err_kind` holds)
/// and their texts, shared with the interpreter.
pub use irad_kernels::trap::{Host, NO_TRAP, RuleKind, Trap, TrapKind};

/// The most tapes (distinct pushed types) a JIT gives compiled code.
pub const MAX_TAPES: usize = 4096;

/// The site number of an error raised outside any statement (a primitive
/// called through a function value, or the call-depth check on entry to a
/// function): the caller's call site takes its place.
pub const SITE_NONE: i64 = -1;

/// One tape: a buffer of values of one type, last pushed at the top.
#[repr(C)]
#[derive(Debug)]
pub struct Tape {
    /// The first free byte.
    pub top: *mut u8,
    /// One past the last byte of the buffer.
    pub end: *mut u8,
    /// The first byte of the buffer.
    pub base: *mut u8,
}

impl Default for Tape {
    fn default() -> Tape {
        Tape {
            top: ptr::null_mut(),
            end: ptr::null_mut(),
            base: ptr::null_mut(),
        }
    }
}

/// The hidden first argument of every compiled function.
#[repr(C)]
#[derive(Debug)]
pub struct Ctx {
    /// Active compiled frames (the outermost call counts as one).
    pub depth: i64,
    /// The largest allowed `depth`; a call beyond it is [`TrapKind::Depth`].
    pub max_depth: i64,
    /// Calls fail with [`TrapKind::Stack`] when the stack pointer is below this.
    pub stack_limit: u64,
    /// Code addresses of the function values, indexed by handle.
    pub fn_table: *const *const u8,
    /// The tapes, indexed by tape number.
    pub tapes: *mut Tape,
    /// The error kind (a [`TrapKind`] code), [`NO_TRAP`] while all is well.
    pub err_kind: i64,
    /// The failing statement's site number.
    pub err_site: i64,
    /// First operand of the error message.
    pub err_a: i64,
    /// Second operand of the error message.
    pub err_b: i64,
    /// The run-time state: arrays, tapes, call trace.
    pub rt: *mut Runtime,
    /// Whatever the embedder needs in callbacks (the JIT's compiler state).
    pub host: *mut u8,
}

/// Byte offset of [`Ctx::depth`].
pub const OFF_DEPTH: i32 = 0;
/// Byte offset of [`Ctx::max_depth`].
pub const OFF_MAX_DEPTH: i32 = 8;
/// Byte offset of [`Ctx::stack_limit`].
pub const OFF_STACK_LIMIT: i32 = 16;
/// Byte offset of [`Ctx::fn_table`].
pub const OFF_FN_TABLE: i32 = 24;
/// Byte offset of [`Ctx::tapes`].
pub const OFF_TAPES: i32 = 32;
/// Byte offset of [`Ctx::err_kind`].
pub const OFF_ERR_KIND: i32 = 40;
/// Byte offset of [`Ctx::err_site`].
pub const OFF_ERR_SITE: i32 = 48;
/// Byte offset of [`Ctx::err_a`].
pub const OFF_ERR_A: i32 = 56;
/// Byte offset of [`Ctx::err_b`].
pub const OFF_ERR_B: i32 = 64;
/// Byte offset of [`Tape::top`].
pub const OFF_TAPE_TOP: i32 = 0;
/// Byte offset of [`Tape::end`].
pub const OFF_TAPE_END: i32 = 8;
/// Byte offset of [`Tape::base`].
pub const OFF_TAPE_BASE: i32 = 16;
/// Size of a [`Tape`].
pub const TAPE_SIZE: i64 = 24;

/// What compiled code owns while it runs: the arrays it allocated, the tapes,
/// the call sites of an error on its way out.
#[derive(Debug, Default)]
pub struct Runtime {
    /// The arrays compiled code allocated and has not freed.
    pub arena: Arena,
    /// The tapes; [`Ctx::tapes`] points at this buffer.
    pub tapes: Vec<Tape>,
    /// Call sites of the error being returned, innermost first.
    pub trace: Vec<i64>,
    /// The text of a [`TrapKind::Message`] or [`TrapKind::Bulk`] error.
    pub message: String,
    /// The sparse tangent builder of sparse forward mode; the JIT empties it
    /// when a run starts, an object's runtime lives for one exported call.
    pub sparse: sparse::SparseArena,
    /// Scratch of [`irad_rt_sparse_dense`].
    dense_scratch: Vec<f64>,
}

impl Runtime {
    /// Makes sure there are `n` tapes and points `ctx` at them.
    ///
    /// The tape records never move once the first call has made room for
    /// [`MAX_TAPES`] of them (the JIT's compiled code reads `ctx.tapes` as
    /// constant during a run); fewer than that keep their place too as long
    /// as no later call asks for more than the first.
    pub fn ensure_tapes(&mut self, n: usize, ctx: &mut Ctx) {
        if self.tapes.len() < n {
            self.tapes.resize_with(n, Tape::default);
        }
        ctx.tapes = self.tapes.as_mut_ptr();
    }

    /// Makes room for [`MAX_TAPES`] tape records at once, so that they never
    /// move afterwards (see [`Runtime::ensure_tapes`]).
    pub fn reserve_all_tapes(&mut self) {
        self.tapes
            .reserve_exact(MAX_TAPES.saturating_sub(self.tapes.len()));
    }

    /// Empties every tape, keeping its buffer for later pushes: for a
    /// context reused by another call, whatever the last one left.
    pub fn reset_tapes(&mut self) {
        for t in &mut self.tapes {
            t.top = t.base;
        }
    }

    /// Whether every tape is empty.
    pub fn tapes_empty(&self) -> bool {
        self.tapes.iter().all(|t| t.top == t.base)
    }

    /// Bytes the tapes' buffers hold (used or not).
    pub fn tape_capacity(&self) -> u64 {
        self.tapes
            .iter()
            .map(|t| (t.end as usize).wrapping_sub(t.base as usize) as u64)
            .sum()
    }

    /// Bytes on all tapes now.
    pub fn tape_bytes(&self) -> u64 {
        self.tapes
            .iter()
            .map(|t| (t.top as usize).wrapping_sub(t.base as usize) as u64)
            .sum()
    }

    /// Frees every array allocated by compiled code. Any (pointer, length)
    /// pair still held anywhere dangles afterwards: call it only when no
    /// tape holds an array and every result has been copied out.
    pub fn release_arrays(&mut self) {
        self.arena.release_all();
    }

    /// Empties every tape and frees their buffers.
    pub fn clear_tapes(&mut self) {
        for t in &mut self.tapes {
            free_tape(t);
        }
    }

    /// Allocates `len` zeroed elements of `elem_size` bytes; `None` when out
    /// of memory. The memory lives until compiled code frees it or
    /// [`Runtime::release_arrays`].
    fn alloc(&mut self, len: usize, elem_size: usize) -> Option<*mut u8> {
        self.arena.alloc(len, elem_size)
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.release_arrays();
        self.clear_tapes();
    }
}

fn free_tape(t: &mut Tape) {
    if !t.base.is_null() {
        let cap = t.end as usize - t.base as usize;
        // SAFETY: the buffer was allocated by `irad_rt_tape_grow` with this size.
        unsafe { dealloc(t.base, Layout::from_size_align_unchecked(cap, 8)) };
    }
    *t = Tape::default();
}

/// Records a sparse builder error in `ctx`; returns -1 (no handle).
fn sparse_fail(ctx: &mut Ctx, e: sparse::SparseError, site: i64) -> i64 {
    fail(ctx, e.trap(), site);
    -1
}

/// `sonehot(k)`: a new handle, or -1 with the error in `ctx` at `site`.
///
/// # Safety
/// `ctx` is a valid context whose `rt` points at a live [`Runtime`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_sparse_onehot(ctx: *mut Ctx, k: i64, site: i64) -> i64 {
    // SAFETY: the caller passes a valid context with a live runtime.
    let ctx = unsafe { &mut *ctx };
    let rt = unsafe { &mut *ctx.rt };
    match rt.sparse.onehot(k) {
        Ok(h) => h,
        Err(e) => sparse_fail(ctx, e, site),
    }
}

/// `sscale(c, a)`: a handle, or -1 with the error in `ctx` at `site`.
///
/// # Safety
/// As [`irad_rt_sparse_onehot`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_sparse_scale(ctx: *mut Ctx, c: f64, a: i64, site: i64) -> i64 {
    // SAFETY: the caller passes a valid context with a live runtime.
    let ctx = unsafe { &mut *ctx };
    let rt = unsafe { &mut *ctx.rt };
    match rt.sparse.scale(c, a) {
        Ok(h) => h,
        Err(e) => sparse_fail(ctx, e, site),
    }
}

/// `sadd(a, b)`: a handle, or -1 with the error in `ctx` at `site`.
///
/// # Safety
/// As [`irad_rt_sparse_onehot`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_sparse_add(ctx: *mut Ctx, a: i64, b: i64, site: i64) -> i64 {
    // SAFETY: the caller passes a valid context with a live runtime.
    let ctx = unsafe { &mut *ctx };
    let rt = unsafe { &mut *ctx.rt };
    match rt.sparse.add(a, b) {
        Ok(h) => h,
        Err(e) => sparse_fail(ctx, e, site),
    }
}

/// `sdense(a, n)`: a new `[f64]` array of `n` elements holding the tangent of
/// handle `a` (owned like [`irad_rt_alloc`]'s), or null with the error in
/// `ctx` at `site`.
///
/// # Safety
/// As [`irad_rt_sparse_onehot`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_sparse_dense(ctx: *mut Ctx, a: i64, n: i64, site: i64) -> *mut u8 {
    // SAFETY: the caller passes a valid context with a live runtime.
    let ctx = unsafe { &mut *ctx };
    let len = match checked_len(n) {
        Ok(len) => len,
        Err(trap) => {
            fail(ctx, trap, site);
            return ptr::null_mut();
        }
    };
    let rt = unsafe { &mut *ctx.rt };
    let mut out = std::mem::take(&mut rt.dense_scratch);
    let res = rt.sparse.dense(a, len, &mut out);
    let p = match res {
        Ok(()) => match rt.alloc(len, 8) {
            Some(p) => {
                // SAFETY: `p` holds `len` f64s (8-aligned), `out` has `len`.
                unsafe { ptr::copy_nonoverlapping(out.as_ptr(), p as *mut f64, len) };
                p
            }
            None => {
                fail(ctx, Trap::OomAlloc(n), site);
                ptr::null_mut()
            }
        },
        Err(e) => {
            sparse_fail(ctx, e, site);
            ptr::null_mut()
        }
    };
    rt.dense_scratch = out;
    p
}

/// Records `trap` at `site` in `ctx`.
fn fail(ctx: &mut Ctx, trap: Trap<'_>, site: i64) {
    let (a, b) = trap.operands();
    ctx.err_kind = trap.kind().code();
    ctx.err_site = site;
    ctx.err_a = a;
    ctx.err_b = b;
}

/// Checks an array length: the element count, or the error.
fn checked_len(n: i64) -> Result<usize, Trap<'static>> {
    if n < 0 {
        Err(Trap::NegLen(n))
    } else if n as u64 > MAX_ARRAY_LEN {
        Err(Trap::TooLong(n))
    } else {
        Ok(n as usize)
    }
}

/// `alloc(n)` / `zeros(n)`: a zeroed array of `n` elements of `elem_size`
/// bytes, or null with the error in `ctx` (negative length, too long, out of
/// memory) at `site`.
///
/// # Safety
/// `ctx` is a valid context whose `rt` points at a live [`Runtime`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_alloc(
    ctx: *mut Ctx,
    n: i64,
    elem_size: i64,
    site: i64,
) -> *mut u8 {
    // SAFETY: the caller passes a valid context.
    let ctx = unsafe { &mut *ctx };
    let len = match checked_len(n) {
        Ok(len) => len,
        Err(trap) => {
            fail(ctx, trap, site);
            return ptr::null_mut();
        }
    };
    // SAFETY: `rt` is live (contract).
    let rt = unsafe { &mut *ctx.rt };
    match rt.alloc(len, elem_size as usize) {
        Some(p) => p,
        None => {
            fail(ctx, Trap::OomAlloc(n), site);
            ptr::null_mut()
        }
    }
}

/// `copy(a)`: a new array holding the `len` elements of `elem_size` bytes at
/// `src`, or null with the error in `ctx`.
///
/// # Safety
/// As [`irad_rt_alloc`]; `src` points at `len * elem_size` readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_copy(
    ctx: *mut Ctx,
    src: *const u8,
    len: i64,
    elem_size: i64,
    site: i64,
) -> *mut u8 {
    // SAFETY: the caller passes a valid context.
    let ctx = unsafe { &mut *ctx };
    // SAFETY: `rt` is live (contract).
    let rt = unsafe { &mut *ctx.rt };
    let n = len.max(0) as usize;
    match rt.alloc(n, elem_size as usize) {
        Some(p) => {
            // SAFETY: both regions hold n * elem_size bytes and do not overlap.
            unsafe { ptr::copy_nonoverlapping(src, p, n * elem_size as usize) };
            p
        }
        None => {
            fail(ctx, Trap::OomCopy(len), site);
            ptr::null_mut()
        }
    }
}

/// Grows tape number `tape` so that `size` more bytes fit; returns 0, or 1
/// with [`TrapKind::OomTape`] in `ctx` at `site`.
///
/// # Safety
/// As [`irad_rt_alloc`]; `tape` is below the number of tapes `ctx` points at.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_tape_grow(ctx: *mut Ctx, tape: i64, size: i64, site: i64) -> i64 {
    // SAFETY: the caller passes a valid context and tape number.
    let ctx = unsafe { &mut *ctx };
    let t = unsafe { &mut *ctx.tapes.add(tape as usize) };
    let used = t.top as usize - t.base as usize;
    let cap = t.end as usize - t.base as usize;
    let want = used.saturating_add(size as usize);
    let new_cap = want.max(cap.saturating_mul(2)).max(4096);
    let Ok(new_layout) = Layout::from_size_align(new_cap, 8) else {
        fail(ctx, Trap::OomTape, site);
        return 1;
    };
    let p = if t.base.is_null() {
        // SAFETY: non-zero size.
        unsafe { alloc_zeroed(new_layout) }
    } else {
        // SAFETY: `base` was allocated here with capacity `cap` and alignment 8.
        unsafe { realloc(t.base, Layout::from_size_align_unchecked(cap, 8), new_cap) }
    };
    if p.is_null() {
        fail(ctx, Trap::OomTape, site);
        return 1;
    }
    t.base = p;
    // SAFETY: both offsets lie within the new buffer.
    t.top = unsafe { p.add(used) };
    t.end = unsafe { p.add(new_cap) };
    0
}

/// Records call site `site` on the way out of a failed call (or makes it the
/// error's site when the error has none).
///
/// # Safety
/// As [`irad_rt_alloc`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_trace(ctx: *mut Ctx, site: i64) {
    // SAFETY: the caller passes a valid context whose runtime is live.
    let ctx = unsafe { &mut *ctx };
    if ctx.err_site == SITE_NONE {
        // The callee failed outside its statements (a primitive called as a
        // value, or too deep a call): the call is the failing statement.
        ctx.err_site = site;
    } else {
        let rt = unsafe { &mut *ctx.rt };
        rt.trace.push(site);
    }
}

macro_rules! unary_math {
    ($($name:ident = $f:ident),* $(,)?) => {$(
        #[doc = concat!("`libm::", stringify!($f), "`, for compiled code.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn $name(x: f64) -> f64 {
            libm::$f(x)
        }
    )*};
}

/// The table of `irad_kernels::math::exp`, for compiled code that computes
/// exp inline (docs/codegen.md, "Statements"); its symbol name is
/// [`EXP_TABLE_SYMBOL`].
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static irad_rt_exp_table: [[f64; 2]; 128] = irad_kernels::math::EXP_TABLE;

/// The symbol of [`irad_rt_exp_table`].
pub const EXP_TABLE_SYMBOL: &str = "irad_rt_exp_table";

/// The table of `irad_kernels::math::log` (`[invc, logc_hi, logc_lo]` per
/// reduction interval), for compiled code that computes log inline
/// (docs/codegen.md, "Statements"); its symbol name is [`LOG_TABLE_SYMBOL`].
#[unsafe(no_mangle)]
#[allow(non_upper_case_globals)]
pub static irad_rt_log_table: [[f64; 3]; 256] = irad_kernels::math::LOG_TABLE;

/// The symbol of [`irad_rt_log_table`].
pub const LOG_TABLE_SYMBOL: &str = "irad_rt_log_table";

macro_rules! own_math {
    ($($name:ident = $f:ident),* $(,)?) => {$(
        #[doc = concat!("`irad_kernels::math::", stringify!($f), "` (irad's own, docs/ir.md \"Semantics\"), for compiled code.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn $name(x: f64) -> f64 {
            irad_kernels::math::$f(x)
        }
    )*};
}

own_math!(
    irad_rt_tanh = tanh,
    irad_rt_sin = sin,
    irad_rt_cos = cos,
    irad_rt_tan = tan,
);

unary_math!(
    irad_rt_log1p = log1p,
    irad_rt_expm1 = expm1,
    irad_rt_asin = asin,
    irad_rt_acos = acos,
    irad_rt_atan = atan,
    irad_rt_sinh = sinh,
    irad_rt_cosh = cosh,
    irad_rt_erf = erf,
    irad_rt_round = round,
);

/// `irad_kernels::math::pow` (irad's own), for compiled code; `powi(x, n)`
/// calls it with `n as f64`.
#[unsafe(no_mangle)]
pub extern "C" fn irad_rt_pow(x: f64, y: f64) -> f64 {
    irad_kernels::math::pow(x, y)
}

/// `libm::atan2`, for compiled code.
#[unsafe(no_mangle)]
pub extern "C" fn irad_rt_atan2(y: f64, x: f64) -> f64 {
    libm::atan2(y, x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn offsets_match_the_structs() {
        assert_eq!(offset_of!(Ctx, depth), OFF_DEPTH as usize);
        assert_eq!(offset_of!(Ctx, max_depth), OFF_MAX_DEPTH as usize);
        assert_eq!(offset_of!(Ctx, stack_limit), OFF_STACK_LIMIT as usize);
        assert_eq!(offset_of!(Ctx, fn_table), OFF_FN_TABLE as usize);
        assert_eq!(offset_of!(Ctx, tapes), OFF_TAPES as usize);
        assert_eq!(offset_of!(Ctx, err_kind), OFF_ERR_KIND as usize);
        assert_eq!(offset_of!(Ctx, err_site), OFF_ERR_SITE as usize);
        assert_eq!(offset_of!(Ctx, err_a), OFF_ERR_A as usize);
        assert_eq!(offset_of!(Ctx, err_b), OFF_ERR_B as usize);
        assert_eq!(offset_of!(Tape, top), OFF_TAPE_TOP as usize);
        assert_eq!(offset_of!(Tape, end), OFF_TAPE_END as usize);
        assert_eq!(offset_of!(Tape, base), OFF_TAPE_BASE as usize);
        assert_eq!(size_of::<Tape>(), TAPE_SIZE as usize);
    }

    pub(crate) fn ctx_with(rt: &mut Runtime) -> Ctx {
        Ctx {
            depth: 0,
            max_depth: 10,
            stack_limit: 0,
            fn_table: ptr::null(),
            tapes: ptr::null_mut(),
            err_kind: NO_TRAP,
            err_site: 0,
            err_a: 0,
            err_b: 0,
            rt,
            host: ptr::null_mut(),
        }
    }

    #[test]
    fn alloc_checks_lengths_and_zeroes() {
        let mut rt = Runtime::default();
        let mut ctx = ctx_with(&mut rt);
        let p = unsafe { irad_rt_alloc(&mut ctx, -3, 8, 7) };
        assert!(p.is_null());
        assert_eq!(
            (ctx.err_kind, ctx.err_site, ctx.err_a),
            (TrapKind::NegLen.code(), 7, -3)
        );
        let p = unsafe { irad_rt_alloc(&mut ctx, (MAX_ARRAY_LEN + 1) as i64, 8, 2) };
        assert!(p.is_null());
        assert_eq!(ctx.err_kind, TrapKind::TooLong.code());
        let p = unsafe { irad_rt_alloc(&mut ctx, 5, 8, 0) } as *mut f64;
        assert!(!p.is_null());
        let xs = unsafe { std::slice::from_raw_parts_mut(p, 5) };
        assert_eq!(xs, &[0.0; 5]);
        xs[2] = 4.0;
        let q = unsafe { irad_rt_copy(&mut ctx, p as *const u8, 5, 8, 0) } as *const f64;
        assert_eq!(
            unsafe { std::slice::from_raw_parts(q, 5) },
            &[0.0, 0.0, 4.0, 0.0, 0.0]
        );
    }

    #[test]
    fn tapes_grow_and_keep_their_contents() {
        let mut rt = Runtime::default();
        let mut ctx = ctx_with(&mut rt);
        unsafe { (*ctx.rt).ensure_tapes(2, &mut ctx) };
        for i in 0..10_000u64 {
            let t = unsafe { &mut *ctx.tapes.add(1) };
            if (t.end as usize) - (t.top as usize) < 8 {
                assert_eq!(unsafe { irad_rt_tape_grow(&mut ctx, 1, 8, 0) }, 0);
            }
            let t = unsafe { &mut *ctx.tapes.add(1) };
            unsafe { (t.top as *mut u64).write_unaligned(i) };
            t.top = unsafe { t.top.add(8) };
        }
        let rt = unsafe { &mut *ctx.rt };
        assert_eq!(rt.tape_bytes(), 80_000);
        for i in (0..10_000u64).rev() {
            let t = &mut rt.tapes[1];
            t.top = unsafe { t.top.sub(8) };
            assert_eq!(unsafe { (t.top as *const u64).read_unaligned() }, i);
        }
        assert!(rt.tapes_empty());
    }

    #[test]
    fn math_is_the_interpreters() {
        use irad_kernels::math;
        for x in [0.5, -3.7, 1e5, 1e300] {
            assert_eq!(irad_rt_sin(x).to_bits(), math::sin(x).to_bits());
            assert_eq!(irad_rt_cos(x).to_bits(), math::cos(x).to_bits());
            assert_eq!(irad_rt_tan(x).to_bits(), math::tan(x).to_bits());
            assert_eq!(irad_rt_tanh(x).to_bits(), math::tanh(x).to_bits());
            assert_eq!(
                irad_rt_pow(x.abs(), 1.7).to_bits(),
                math::pow(x.abs(), 1.7).to_bits()
            );
        }
        assert_eq!(irad_rt_round(2.5), 3.0);
        assert_eq!(irad_rt_round(-2.5), -3.0);
        assert_eq!(irad_rt_log_table, irad_kernels::math::LOG_TABLE);
    }
}
