//! The entry points compiled code calls for the sparse primitives on arrays
//! of handles (`ssum sdot sfill sgemma sgemmb`, the tangents of the bulk
//! array primitives in sparse forward mode): one `irad_rt_sparse_<name>`
//! each, taking the context, the operands in IR operand order (an array as
//! its pointer and length, a `[sparse]` array's elements being i64 handles,
//! a `bool` as an i64, 0 or 1) and the site.
//!
//! Each runs [`sparse::check_bulk`] and then the kernel of the run's
//! [`sparse::SparseArena`], the code the interpreter runs, in the
//! interpreter's order (an output of length 0 is checked, never written), so
//! both backends make the same nodes and agree bit for bit. A failed check
//! goes to [`Runtime::message`] with [`crate::TrapKind::Bulk`], a builder
//! error to its own kind, at the site.
//!
//! All return a negative number on failure (with the error in the context):
//! `ssum` and `sdot` a handle otherwise, the others 0. Two arrays are the
//! same when their elements overlap (compiled code only passes equal or
//! disjoint arrays; no C caller can pass sparse values).

use crate::{Ctx, Runtime, Trap, fail, sparse};
use sparse::SparseBulk;

/// An array operand as compiled code passes it.
#[derive(Copy, Clone)]
struct Arr<T> {
    ptr: *mut T,
    len: usize,
}

impl<T> Arr<T> {
    fn new(ptr: *mut T, len: i64) -> Arr<T> {
        Arr {
            ptr,
            len: usize::try_from(len).unwrap_or(0),
        }
    }

    /// The address range of the elements (empty for an empty array).
    fn span(self) -> (usize, usize) {
        let a = self.ptr as usize;
        (a, a.saturating_add(self.len.saturating_mul(8)))
    }

    /// The elements, read.
    ///
    /// # Safety
    /// `ptr` points at `len` elements that nothing writes while the slice lives.
    unsafe fn read<'a>(self) -> &'a [T] {
        if self.len == 0 {
            &[]
        } else {
            // SAFETY: the contract.
            unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
        }
    }

    /// The elements, written.
    ///
    /// # Safety
    /// `ptr` points at `len` elements that nothing else reads or writes
    /// while the slice lives.
    unsafe fn write<'a>(self) -> &'a mut [T] {
        if self.len == 0 {
            &mut []
        } else {
            // SAFETY: the contract.
            unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
        }
    }
}

/// Whether two arrays share elements (never when one is empty).
fn overlap(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 < a.1 && b.0 < b.1 && a.0 < b.1 && b.0 < a.1
}

/// The context and its runtime.
///
/// # Safety
/// `ctx` is a valid context whose `rt` points at a live [`Runtime`], and no
/// other reference to either lives meanwhile.
unsafe fn parts<'a>(ctx: *mut Ctx) -> (&'a mut Ctx, &'a mut Runtime) {
    // SAFETY: the contract.
    let ctx = unsafe { &mut *ctx };
    let rt = unsafe { &mut *ctx.rt };
    (ctx, rt)
}

/// Runs [`sparse::check_bulk`]; on failure records it at `site` and returns
/// false.
fn checked(
    ctx: &mut Ctx,
    rt: &mut Runtime,
    op: SparseBulk,
    spans: &[(usize, usize)],
    dims: &[i64],
    flags: [bool; 2],
    site: i64,
) -> bool {
    let lens: Vec<usize> = spans.iter().map(|&(a, b)| (b - a) / 8).collect();
    let same = |i: usize, j: usize| overlap(spans[i], spans[j]);
    match sparse::check_bulk(op, &lens, dims, flags, &same) {
        Ok(()) => true,
        Err(msg) => {
            rt.message = msg;
            fail(ctx, Trap::Bulk, site);
            false
        }
    }
}

/// A builder result as the entry points return it.
fn status(ctx: &mut Ctx, res: Result<i64, sparse::SparseError>, site: i64) -> i64 {
    match res {
        Ok(h) => h,
        Err(e) => {
            fail(ctx, e.trap(), site);
            -1
        }
    }
}

/// `ssum(a)`: a handle, or -1 with the error in `ctx` at `site`.
///
/// # Safety
/// `ctx` is a valid context whose `rt` points at a live [`Runtime`]; every
/// array pointer points at its length's elements (or is anything for length
/// 0), and no other thread uses them.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_sparse_sum(
    ctx: *mut Ctx,
    a: *mut i64,
    a_len: i64,
    site: i64,
) -> i64 {
    // SAFETY: the caller's contract.
    let (ctx, rt) = unsafe { parts(ctx) };
    let a = Arr::new(a, a_len);
    // SAFETY: only read.
    let res = rt.sparse.sum(unsafe { a.read() });
    status(ctx, res, site)
}

/// `sdot(w, a)`: a handle, or -1 with the error in `ctx` at `site`.
///
/// # Safety
/// As [`irad_rt_sparse_sum`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_sparse_dot(
    ctx: *mut Ctx,
    w: *mut f64,
    w_len: i64,
    a: *mut i64,
    a_len: i64,
    site: i64,
) -> i64 {
    // SAFETY: the caller's contract.
    let (ctx, rt) = unsafe { parts(ctx) };
    let (w, a) = (Arr::new(w, w_len), Arr::new(a, a_len));
    if !checked(
        ctx,
        rt,
        SparseBulk::Dot,
        &[w.span(), a.span()],
        &[],
        [false; 2],
        site,
    ) {
        return -1;
    }
    // SAFETY: only read.
    let res = rt.sparse.dot(unsafe { w.read() }, unsafe { a.read() });
    status(ctx, res, site)
}

/// `sfill(a, v)`: 0, or -1 with the error in `ctx` at `site`.
///
/// # Safety
/// As [`irad_rt_sparse_sum`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_sparse_fill(
    ctx: *mut Ctx,
    a: *mut i64,
    a_len: i64,
    v: i64,
    site: i64,
) -> i64 {
    // SAFETY: the caller's contract.
    let (ctx, rt) = unsafe { parts(ctx) };
    let a = Arr::new(a, a_len);
    // SAFETY: the only array.
    let res = rt.sparse.fill(unsafe { a.write() }, v).map(|()| 0);
    status(ctx, res, site)
}

/// `sgemma(ta, tb, A, B, m, k, n, C)`: `C += op(A) op(B)` with A of
/// handles; 0, or -1 with the error in `ctx` at `site`.
///
/// # Safety
/// As [`irad_rt_sparse_sum`].
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn irad_rt_sparse_gemma(
    ctx: *mut Ctx,
    ta: i64,
    tb: i64,
    a: *mut i64,
    a_len: i64,
    b: *mut f64,
    b_len: i64,
    m: i64,
    k: i64,
    n: i64,
    c: *mut i64,
    c_len: i64,
    site: i64,
) -> i64 {
    let (s, f, c) = (Arr::new(a, a_len), Arr::new(b, b_len), Arr::new(c, c_len));
    let spans = [s.span(), f.span(), c.span()];
    // SAFETY: the caller's contract.
    unsafe {
        gemm(
            ctx,
            SparseBulk::GemmA,
            [ta, tb],
            s,
            f,
            spans,
            [m, k, n],
            c,
            site,
        )
    }
}

/// `sgemmb(ta, tb, A, B, m, k, n, C)`: `C += op(A) op(B)` with B of
/// handles; 0, or -1 with the error in `ctx` at `site`.
///
/// # Safety
/// As [`irad_rt_sparse_sum`].
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn irad_rt_sparse_gemmb(
    ctx: *mut Ctx,
    ta: i64,
    tb: i64,
    a: *mut f64,
    a_len: i64,
    b: *mut i64,
    b_len: i64,
    m: i64,
    k: i64,
    n: i64,
    c: *mut i64,
    c_len: i64,
    site: i64,
) -> i64 {
    let (f, s, c) = (Arr::new(a, a_len), Arr::new(b, b_len), Arr::new(c, c_len));
    let spans = [f.span(), s.span(), c.span()];
    // SAFETY: the caller's contract.
    unsafe {
        gemm(
            ctx,
            SparseBulk::GemmB,
            [ta, tb],
            s,
            f,
            spans,
            [m, k, n],
            c,
            site,
        )
    }
}

/// The shared part of `sgemma` and `sgemmb`: checked, then the kernel
/// unless C is empty.
///
/// # Safety
/// As [`irad_rt_sparse_sum`].
#[allow(clippy::too_many_arguments)]
unsafe fn gemm(
    ctx: *mut Ctx,
    op: SparseBulk,
    flags: [i64; 2],
    s: Arr<i64>,
    f: Arr<f64>,
    spans: [(usize, usize); 3],
    dims: [i64; 3],
    c: Arr<i64>,
    site: i64,
) -> i64 {
    // SAFETY: the caller's contract.
    let (ctx, rt) = unsafe { parts(ctx) };
    let (ta, tb) = (flags[0] != 0, flags[1] != 0);
    if !checked(ctx, rt, op, &spans, &dims, [ta, tb], site) {
        return -1;
    }
    if c.len == 0 {
        return 0;
    }
    let dim = |d: i64| usize::try_from(d).unwrap_or(0);
    // SAFETY: the check refused a C that shares elements with the sparse
    // input (the other input holds f64s, a separate allocation).
    let res = rt.sparse.gemm(
        op == SparseBulk::GemmA,
        ta,
        tb,
        unsafe { s.read() },
        unsafe { f.read() },
        (dim(dims[0]), dim(dims[1]), dim(dims[2])),
        unsafe { c.write() },
    );
    status(ctx, res.map(|()| 0), site)
}
