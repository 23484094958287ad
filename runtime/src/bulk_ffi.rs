//! The entry points compiled code calls for the bulk array primitives (`sum
//! dot axpy scale matvec matmul fill copyto gemm`): one `irad_rt_bulk_<name>`
//! each, taking the context, the operands in IR operand order (an array as
//! its pointer and length, a `bool` as an i64, 0 or 1) and the site.
//!
//! Each runs [`bulk::check`] and then the kernel, both from `bulk.rs`, the
//! file the interpreter includes, in the interpreter's order: the check
//! first; an output of length 0 writes nothing and skips the kernel. So the
//! results agree bit for bit and a failed check has the interpreter's text,
//! which goes to [`Runtime::message`] with [`crate::TrapKind::Bulk`] at the site.
//!
//! Two operands are the same array when their pointers are equal, as two
//! arrays of a run are the same exactly when they share memory (two empty
//! ones may share a dangling pointer: the check only asks about an output
//! that is not empty). Arrays whose elements overlap without being equal,
//! which only a C caller can pass, count as the same array too, so that no
//! kernel ever writes memory it reads.
//!
//! `sum` and `dot` return their f64 and leave any failure in the context
//! (`ctx.err_kind` is not [`crate::NO_TRAP`] afterwards); the others return 0, or
//! 1 with the failure in the context.

use crate::bulk::{self, Op};
use crate::{Ctx, Runtime, Trap, fail};

/// `sum(a)`.
///
/// # Safety
/// `ctx` is a valid context whose `rt` points at a live [`Runtime`]; every
/// array pointer points at its length's elements (or is anything for length
/// 0), and no other thread uses them.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_bulk_sum(
    ctx: *mut Ctx,
    a: *mut f64,
    a_len: i64,
    site: i64,
) -> f64 {
    let arrays = [Arr::new(a, a_len)];
    // SAFETY: the caller's contract.
    unsafe { reduce(ctx, Op::Sum, &arrays, site) }
}

/// `dot(a, b)`.
///
/// # Safety
/// As [`irad_rt_bulk_sum`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_bulk_dot(
    ctx: *mut Ctx,
    a: *mut f64,
    a_len: i64,
    b: *mut f64,
    b_len: i64,
    site: i64,
) -> f64 {
    let arrays = [Arr::new(a, a_len), Arr::new(b, b_len)];
    // SAFETY: the caller's contract.
    unsafe { reduce(ctx, Op::Dot, &arrays, site) }
}

/// `axpy(alpha, x, y)`: `y += alpha * x`.
///
/// # Safety
/// As [`irad_rt_bulk_sum`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_bulk_axpy(
    ctx: *mut Ctx,
    alpha: f64,
    x: *mut f64,
    x_len: i64,
    y: *mut f64,
    y_len: i64,
    site: i64,
) -> i64 {
    let arrays = [Arr::new(x, x_len), Arr::new(y, y_len)];
    let call = Call {
        op: Op::Axpy,
        arrays: &arrays,
        dims: &[],
        flags: [false; 2],
    };
    // SAFETY: the caller's contract.
    unsafe { update(ctx, &call, site, |ins, out| bulk::axpy(alpha, ins[0], out)) }
}

/// `scale(alpha, x)`: `x *= alpha`.
///
/// # Safety
/// As [`irad_rt_bulk_sum`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_bulk_scale(
    ctx: *mut Ctx,
    alpha: f64,
    x: *mut f64,
    x_len: i64,
    site: i64,
) -> i64 {
    let arrays = [Arr::new(x, x_len)];
    let call = Call {
        op: Op::Scale,
        arrays: &arrays,
        dims: &[],
        flags: [false; 2],
    };
    // SAFETY: the caller's contract.
    unsafe { update(ctx, &call, site, |_, out| bulk::scale(alpha, out)) }
}

/// `fill(a, v)`.
///
/// # Safety
/// As [`irad_rt_bulk_sum`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_bulk_fill(
    ctx: *mut Ctx,
    a: *mut f64,
    a_len: i64,
    v: f64,
    site: i64,
) -> i64 {
    let arrays = [Arr::new(a, a_len)];
    let call = Call {
        op: Op::Fill,
        arrays: &arrays,
        dims: &[],
        flags: [false; 2],
    };
    // SAFETY: the caller's contract.
    unsafe { update(ctx, &call, site, |_, out| bulk::fill(out, v)) }
}

/// `copyto(dst, src)`.
///
/// # Safety
/// As [`irad_rt_bulk_sum`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_bulk_copyto(
    ctx: *mut Ctx,
    dst: *mut f64,
    dst_len: i64,
    src: *mut f64,
    src_len: i64,
    site: i64,
) -> i64 {
    let arrays = [Arr::new(dst, dst_len), Arr::new(src, src_len)];
    let call = Call {
        op: Op::Copyto,
        arrays: &arrays,
        dims: &[],
        flags: [false; 2],
    };
    // SAFETY: the caller's contract.
    unsafe { update(ctx, &call, site, |ins, out| bulk::copyto(out, ins[1])) }
}

/// `matvec(A, x, m, n, y)`: `y = A x`.
///
/// # Safety
/// As [`irad_rt_bulk_sum`].
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn irad_rt_bulk_matvec(
    ctx: *mut Ctx,
    a: *mut f64,
    a_len: i64,
    x: *mut f64,
    x_len: i64,
    m: i64,
    n: i64,
    y: *mut f64,
    y_len: i64,
    site: i64,
) -> i64 {
    let arrays = [Arr::new(a, a_len), Arr::new(x, x_len), Arr::new(y, y_len)];
    let call = Call {
        op: Op::Matvec,
        arrays: &arrays,
        dims: &[m, n],
        flags: [false; 2],
    };
    let n = dim(n);
    // SAFETY: the caller's contract.
    unsafe {
        update(ctx, &call, site, |ins, out| {
            bulk::matvec(ins[0], ins[1], n, out)
        })
    }
}

/// `matmul(A, B, m, k, n, C)`: `C = A B`.
///
/// # Safety
/// As [`irad_rt_bulk_sum`].
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn irad_rt_bulk_matmul(
    ctx: *mut Ctx,
    a: *mut f64,
    a_len: i64,
    b: *mut f64,
    b_len: i64,
    m: i64,
    k: i64,
    n: i64,
    c: *mut f64,
    c_len: i64,
    site: i64,
) -> i64 {
    let arrays = [Arr::new(a, a_len), Arr::new(b, b_len), Arr::new(c, c_len)];
    let call = Call {
        op: Op::Matmul,
        arrays: &arrays,
        dims: &[m, k, n],
        flags: [false; 2],
    };
    let (k, n) = (dim(k), dim(n));
    // SAFETY: the caller's contract.
    unsafe {
        update(ctx, &call, site, |ins, out| {
            bulk::matmul(ins[0], ins[1], k, n, out);
        })
    }
}

/// `gemm(ta, tb, A, B, m, k, n, C)`: `C += op(A) op(B)`; `ta` and `tb` are
/// 0 or 1.
///
/// # Safety
/// As [`irad_rt_bulk_sum`].
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn irad_rt_bulk_gemm(
    ctx: *mut Ctx,
    ta: i64,
    tb: i64,
    a: *mut f64,
    a_len: i64,
    b: *mut f64,
    b_len: i64,
    m: i64,
    k: i64,
    n: i64,
    c: *mut f64,
    c_len: i64,
    site: i64,
) -> i64 {
    let arrays = [Arr::new(a, a_len), Arr::new(b, b_len), Arr::new(c, c_len)];
    let (ta, tb) = (ta != 0, tb != 0);
    let call = Call {
        op: Op::Gemm,
        arrays: &arrays,
        dims: &[m, k, n],
        flags: [ta, tb],
    };
    let (m, k, n) = (dim(m), dim(k), dim(n));
    // SAFETY: the caller's contract.
    unsafe {
        update(ctx, &call, site, |ins, out| {
            bulk::gemm(ta, tb, ins[0], ins[1], m, k, n, out);
        })
    }
}

/// An array operand as compiled code passes it.
#[derive(Copy, Clone)]
struct Arr {
    ptr: *mut f64,
    len: usize,
}

/// The operands of one call, as [`bulk::check`] takes them.
struct Call<'a> {
    op: Op,
    arrays: &'a [Arr],
    dims: &'a [i64],
    flags: [bool; 2],
}

impl Arr {
    /// Lengths of IR arrays are never negative (allocation and the C ABI's
    /// entry refuse them).
    fn new(ptr: *mut f64, len: i64) -> Arr {
        Arr {
            ptr,
            len: usize::try_from(len).unwrap_or(0),
        }
    }

    /// Whether `self` and `other` share elements: the same array, or (only a
    /// C caller can pass these) overlapping ones. Empty arrays share nothing,
    /// whatever their addresses, as in the interpreter, where an empty array
    /// is never the same array as a non-empty one.
    fn same(self, other: Arr) -> bool {
        let (a, b) = (self.ptr as usize, other.ptr as usize);
        let end = |p: usize, len: usize| p.saturating_add(len.saturating_mul(8));
        self.len > 0 && other.len > 0 && a < end(b, other.len) && b < end(a, self.len)
    }

    /// The elements, read.
    ///
    /// # Safety
    /// `ptr` points at `len` elements that nothing writes while the slice lives.
    unsafe fn read<'a>(self) -> &'a [f64] {
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
    unsafe fn write<'a>(self) -> &'a mut [f64] {
        if self.len == 0 {
            &mut []
        } else {
            // SAFETY: the contract.
            unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
        }
    }
}

/// A dimension that passed [`bulk::check`] (so is not negative).
fn dim(d: i64) -> usize {
    usize::try_from(d).unwrap_or(0)
}

/// Runs [`bulk::check`] on `call`; on failure records [`crate::TrapKind::Bulk`] at
/// `site` with the message in the runtime.
///
/// # Safety
/// `ctx` is a valid context whose `rt` points at a live [`Runtime`].
unsafe fn checked(ctx: *mut Ctx, call: &Call<'_>, site: i64) -> bool {
    // No primitive has more than three arrays; no allocation per call.
    let mut lens = [0; 3];
    for (len, a) in lens.iter_mut().zip(call.arrays) {
        *len = a.len;
    }
    let lens = &lens[..call.arrays.len().min(3)];
    let same = |i: usize, j: usize| call.arrays[i].same(call.arrays[j]);
    match bulk::check(call.op, lens, call.dims, call.flags, &same) {
        Ok(()) => true,
        Err(msg) => {
            // SAFETY: the contract.
            let ctx = unsafe { &mut *ctx };
            let rt: &mut Runtime = unsafe { &mut *ctx.rt };
            rt.message = msg;
            fail(ctx, Trap::Bulk, site);
            false
        }
    }
}

/// `sum` or `dot` of `arrays`: checked, then the kernel; NaN with the
/// failure in the context when the check fails.
///
/// # Safety
/// As [`irad_rt_bulk_sum`].
unsafe fn reduce(ctx: *mut Ctx, op: Op, arrays: &[Arr], site: i64) -> f64 {
    let call = Call {
        op,
        arrays,
        dims: &[],
        flags: [false; 2],
    };
    // SAFETY: the caller's contract.
    if !unsafe { checked(ctx, &call, site) } {
        return f64::NAN;
    }
    // SAFETY: the arrays are only read.
    unsafe {
        match op {
            Op::Dot => bulk::dot(arrays[0].read(), arrays[1].read()),
            _ => bulk::sum(arrays[0].read()),
        }
    }
}

/// A primitive that writes its output array: checked, then `kernel` on the
/// inputs (every array operand read, in operand order, with the output's
/// place holding an empty slice) and the output. Returns 0, or 1 with the
/// failure in the context.
///
/// # Safety
/// As [`irad_rt_bulk_sum`].
unsafe fn update(
    ctx: *mut Ctx,
    call: &Call<'_>,
    site: i64,
    kernel: impl FnOnce(&[&[f64]], &mut [f64]),
) -> i64 {
    // SAFETY: the caller's contract.
    if !unsafe { checked(ctx, call, site) } {
        return 1;
    }
    let Some(out) = call.op.output() else {
        return 0;
    };
    let out_arr = call.arrays[out];
    if out_arr.len == 0 {
        // Nothing to write (and the output may be an input).
        return 0;
    }
    let mut inputs: [&[f64]; 3] = [&[]; 3];
    for (i, (input, a)) in inputs.iter_mut().zip(call.arrays).enumerate() {
        if i != out {
            // SAFETY: the check passed with a non-empty output, so no input
            // shares an element with it; inputs are only read.
            *input = unsafe { a.read() };
        }
    }
    // SAFETY: as above, the output slice is the only view of its memory.
    kernel(&inputs, unsafe { out_arr.write() });
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::ctx_with;
    use crate::{NO_TRAP, TrapKind};

    fn message(ctx: &Ctx) -> String {
        // SAFETY: the test's runtime is live.
        unsafe { (*ctx.rt).message.clone() }
    }

    #[test]
    fn entry_points_check_then_compute() {
        let mut rt = Runtime::default();
        let mut ctx = ctx_with(&mut rt);
        let mut a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let mut x = [1.0, 1.0, 1.0];
        let mut y = [9.0, 9.0];
        let p = |v: &mut [f64]| v.as_mut_ptr();
        let r = unsafe {
            irad_rt_bulk_matvec(&mut ctx, p(&mut a), 6, p(&mut x), 3, 2, 3, p(&mut y), 2, 4)
        };
        assert_eq!((r, ctx.err_kind), (0, NO_TRAP));
        assert_eq!(y, [6.0, 15.0]);
        let d = unsafe { irad_rt_bulk_dot(&mut ctx, p(&mut y), 2, p(&mut y), 2, 0) };
        assert_eq!(d, 36.0 + 225.0);
        // The output is the same array as an input.
        let r = unsafe { irad_rt_bulk_axpy(&mut ctx, 2.0, p(&mut y), 2, p(&mut y), 2, 7) };
        assert_eq!(r, 1);
        assert_eq!((ctx.err_kind, ctx.err_site), (TrapKind::Bulk.code(), 7));
        assert_eq!(
            message(&ctx),
            "`axpy`: the output y is the same array as the input x"
        );
        assert_eq!(y, [6.0, 15.0]);
        // Overlapping, not equal: refused too.
        ctx.err_kind = NO_TRAP;
        let r = unsafe { irad_rt_bulk_copyto(&mut ctx, p(&mut a), 3, p(&mut a[1..]), 3, 2) };
        assert_eq!((r, ctx.err_kind), (1, TrapKind::Bulk.code()));
        assert_eq!(a, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        // Shapes, with null pointers for empty arrays.
        ctx.err_kind = NO_TRAP;
        let null = std::ptr::null_mut();
        let r =
            unsafe { irad_rt_bulk_matmul(&mut ctx, p(&mut a), 5, null, 0, 2, 3, 0, null, 0, 3) };
        assert_eq!(r, 1);
        assert_eq!(
            message(&ctx),
            "`matmul`: A has 5 elements but m*k = 2*3 = 6"
        );
        ctx.err_kind = NO_TRAP;
        let r = unsafe { irad_rt_bulk_gemm(&mut ctx, 1, 0, null, 0, null, 0, 0, 0, 0, null, 0, 3) };
        assert_eq!((r, ctx.err_kind), (0, NO_TRAP));
        assert_eq!(unsafe { irad_rt_bulk_sum(&mut ctx, null, 0, 1) }, 0.0);
    }
}
