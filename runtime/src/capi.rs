//! The C side of the object files `irad emit` writes (docs/codegen.md, "The
//! C ABI"): what an exported function calls to set up and tear down its
//! context, the per-thread settings a C program may change, and the text of
//! the last error.
//!
//! An exported function keeps its [`Ctx`] in its own stack frame. It calls
//! [`irad_rt_enter`], which fills the context and gives it a fresh
//! [`Runtime`], runs the compiled code, and calls [`irad_rt_leave`], which
//! turns a failure into a status code and an error text (kept per thread for
//! [`irad_error_message`]) and frees every array and tape the call made. So
//! nothing outlives a call, and calls on different threads share nothing.
//!
//! Error texts are worded as the interpreter words them ([`error_text`]) and
//! located through the object's site table ([`SiteInfo`]), one entry per
//! site number, written by the code generator.

use crate::{Ctx, Host, NO_TRAP, Runtime, Trap, TrapKind};
use std::cell::{Cell, RefCell};
use std::ffi::{CStr, CString, c_char};
use std::ptr;

/// How much native stack compiled code may use below an exported function's
/// entry unless [`irad_set_stack_budget`] says otherwise, where the thread's
/// stack cannot be found (see [`irad_rt_enter`]): 1 MiB, which holds
/// recursion to depth 10 000 of small functions and fits in the stack of any
/// thread that C libraries create by default.
pub const DEFAULT_STACK_BUDGET: u64 = 1 << 20;

/// The stack left unused below the budget when it is measured from the
/// thread's stack: room for the runtime functions compiled code calls at
/// its deepest (math, bulk kernels, tape growth) and for the guard page;
/// a quarter of the stack on threads smaller than 1 MiB.
pub const STACK_MARGIN: u64 = 256 << 10;

/// The call-depth limit of exported functions unless [`irad_set_max_depth`]
/// says otherwise (the interpreter's default).
pub const DEFAULT_MAX_DEPTH: i64 = 100_000;

thread_local! {
    /// The budget `irad_set_stack_budget` set; `None`: measured per call.
    static STACK_BUDGET: Cell<Option<u64>> = const { Cell::new(None) };
    /// This thread's stack, `[low, high)`, once looked up (empty: not
    /// found).
    static STACK_RANGE: Cell<Option<(u64, u64)>> = const { Cell::new(None) };
    static MAX_DEPTH: Cell<i64> = const { Cell::new(DEFAULT_MAX_DEPTH) };
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// What a site number of an object stands for, as C strings the object
/// holds: the source position (`file:line:col`), the IR place (`in @f, block
/// #2, statement 3`, or empty) and, for a `pop`, the tape's type (or null).
#[repr(C)]
#[derive(Debug)]
pub struct SiteInfo {
    /// `file:line:col` of the statement.
    pub pos: *const c_char,
    /// The IR place of the statement, without parentheses.
    pub place: *const c_char,
    /// The type of a `pop`'s tape, null for other statements.
    pub tape: *const c_char,
}

/// The size of a [`SiteInfo`], for the code generator.
pub const SITE_INFO_SIZE: usize = 24;

/// How many innermost and outermost call sites an error text shows (as the
/// command line does).
const TRACE_HEAD: usize = 8;
const TRACE_TAIL: usize = 2;

/// Sets how much native stack compiled code may use below the entry of an
/// exported function called later on this thread; deeper calls fail with
/// [`TrapKind::Stack`] instead of overflowing. Raise it only on a thread
/// whose stack is that large. 0 restores the default: the stack the thread
/// has left (see [`irad_rt_enter`]).
#[unsafe(no_mangle)]
pub extern "C" fn irad_set_stack_budget(bytes: u64) {
    STACK_BUDGET.with(|b| b.set((bytes != 0).then_some(bytes)));
}

/// The stack budget of a call entered at stack pointer `sp`: the one set on
/// this thread, else what the thread's stack has left below `sp` less
/// [`STACK_MARGIN`], else [`DEFAULT_STACK_BUDGET`] (also when `sp` is not
/// on the thread's stack: a coroutine's or a signal handler's).
fn stack_budget(sp: u64) -> u64 {
    if let Some(bytes) = STACK_BUDGET.with(Cell::get) {
        return bytes;
    }
    let (low, high) = STACK_RANGE.with(|c| {
        c.get().unwrap_or_else(|| {
            let range = thread_stack().unwrap_or((0, 0));
            c.set(Some(range));
            range
        })
    });
    if low < sp && sp < high {
        let margin = STACK_MARGIN.min((high - low) / 4);
        (sp - low).saturating_sub(margin)
    } else {
        DEFAULT_STACK_BUDGET
    }
}

/// The calling thread's stack, `[low, high)` (Linux: from
/// `pthread_getattr_np`, which glibc and musl give for the main thread too).
#[cfg(target_os = "linux")]
fn thread_stack() -> Option<(u64, u64)> {
    // SAFETY: `attr` is initialised by `pthread_getattr_np` before it is
    // read and destroyed once; the out-pointers are valid locals.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = ptr::null_mut();
        let mut size: libc::size_t = 0;
        let ok = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        let low = addr as u64;
        (ok && low != 0 && size > 0).then(|| (low, low.saturating_add(size as u64)))
    }
}

/// Elsewhere the stack is not looked up: the fixed default applies.
#[cfg(not(target_os = "linux"))]
fn thread_stack() -> Option<(u64, u64)> {
    None
}

/// Sets the call-depth limit of exported functions called later on this
/// thread (at least 1; smaller values count as 1).
#[unsafe(no_mangle)]
pub extern "C" fn irad_set_max_depth(depth: i64) {
    MAX_DEPTH.with(|d| d.set(depth.max(1)));
}

/// The text of the error of the last exported function that returned on this
/// thread: `file:line:col: error: message (in @f, block #2, statement 3)`,
/// then one `note: called ... at file:line:col` line per call on the way
/// out; the empty string after a call that succeeded. The pointer is valid
/// until the next call of an exported function on this thread.
#[unsafe(no_mangle)]
pub extern "C" fn irad_error_message() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// Fills `ctx` for a call of compiled code from an exported function: depth
/// 1, the thread's depth limit and stack budget (measured from here), the
/// object's function table and a fresh [`Runtime`] with `ntapes` tapes.
///
/// # Safety
/// `ctx` points at writable memory for a [`Ctx`]; `fn_table` is the object's
/// function table. Every call is paired with one [`irad_rt_leave`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_enter(ctx: *mut Ctx, fn_table: *const *const u8, ntapes: i64) {
    let sp = stack_pointer();
    let budget = stack_budget(sp);
    let mut rt = Box::<Runtime>::default();
    let fresh = Ctx {
        depth: 1,
        max_depth: MAX_DEPTH.with(Cell::get),
        stack_limit: sp.saturating_sub(budget),
        fn_table,
        tapes: ptr::null_mut(),
        err_kind: NO_TRAP,
        err_site: 0,
        err_a: 0,
        err_b: 0,
        rt: ptr::null_mut(),
        host: ptr::null_mut(),
    };
    // SAFETY: `ctx` is writable (contract); `write` does not read the old contents.
    unsafe { ctx.write(fresh) };
    // SAFETY: just initialised.
    let ctx = unsafe { &mut *ctx };
    rt.ensure_tapes(usize::try_from(ntapes).unwrap_or(0), ctx);
    ctx.rt = Box::into_raw(rt);
}

/// Ends a call begun by [`irad_rt_enter`]: returns 0 when `status` is 0,
/// otherwise the error kind in `ctx` (a [`TrapKind`] code) with its text
/// stored for [`irad_error_message`]; frees the runtime (arrays and tapes)
/// either way.
///
/// # Safety
/// `ctx` was filled by [`irad_rt_enter`] and not left yet; `sites` points at
/// `nsites` entries whose strings are NUL-terminated (or null).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_leave(
    ctx: *mut Ctx,
    status: i64,
    sites: *const SiteInfo,
    nsites: i64,
) -> i32 {
    // SAFETY: filled by `irad_rt_enter` (contract).
    let ctx = unsafe { &mut *ctx };
    // SAFETY: `rt` came from `Box::into_raw` in `irad_rt_enter` and is
    // taken back once; compiled code has returned, so nothing else uses it.
    let rt = unsafe { Box::from_raw(ctx.rt) };
    ctx.rt = ptr::null_mut();
    ctx.tapes = ptr::null_mut();
    let sites: &[SiteInfo] = match usize::try_from(nsites) {
        // SAFETY: `sites` holds `nsites` entries (contract).
        Ok(n) if n > 0 && !sites.is_null() => unsafe { std::slice::from_raw_parts(sites, n) },
        _ => &[],
    };
    let (code, text) = if status == 0 {
        (NO_TRAP, String::new())
    } else {
        let kind = if ctx.err_kind == NO_TRAP {
            TrapKind::Message.code()
        } else {
            ctx.err_kind
        };
        (kind, failure_text(ctx, kind, &rt, sites))
    };
    drop(rt);
    // An error text holds no NUL: every piece comes from a C string or from
    // the messages here.
    let text = CString::new(text).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = text);
    i32::try_from(code).unwrap_or(i32::MAX)
}

/// Whether one of the `n` doubles at `p` is NaN (0 or 1): how an exported
/// derivative with a strong version scans its array outputs before it
/// decides to run that version (docs/rules.md, "Infinities and NaN").
///
/// # Safety
/// `p` points at `n` readable doubles (anything when `n <= 0`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_has_nan(p: *const f64, n: i64) -> i64 {
    let Ok(n) = usize::try_from(n) else {
        return 0;
    };
    if n == 0 || p.is_null() {
        return 0;
    }
    // SAFETY: `p` holds `n` doubles (contract).
    let xs = unsafe { std::slice::from_raw_parts(p, n) };
    // A fold without early exit over blocks of 64 vectorises.
    i64::from(
        xs.chunks(64)
            .any(|c| c.iter().fold(false, |nan, x| nan | x.is_nan())),
    )
}

/// What [`irad_rt_save`] returns for a buffer of no elements or whose
/// elements are all `+0.0` (the buffer a caller zeroes for a plain
/// gradient): nothing is copied, and [`irad_rt_restore`] zeroes instead.
fn zeros_mark() -> *mut f64 {
    ptr::NonNull::<f64>::dangling().as_ptr()
}

/// A copy of the `n` doubles at `src` in memory of its own, which
/// [`irad_rt_unsave`] frees: how an exported derivative saves the buffers
/// it adds into before its plain version runs. A buffer of `+0.0`s (or of
/// no elements) is not copied: the result is then a mark (non-null) that
/// [`irad_rt_restore`] reads as zeros. Null with [`TrapKind::OomCopy`] in
/// `ctx` at `site` when the memory for a copy cannot be had.
///
/// # Safety
/// `ctx` is a valid context; `src` points at `n` readable doubles (anything
/// when `n <= 0`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_save(
    ctx: *mut Ctx,
    src: *const f64,
    n: i64,
    site: i64,
) -> *mut f64 {
    let len = usize::try_from(n).unwrap_or(0);
    if len == 0 {
        return zeros_mark();
    }
    // Reserved first: a length no allocation can hold is refused before
    // anything is read.
    let mut copy: Vec<f64> = Vec::new();
    if copy.try_reserve_exact(len).is_err() {
        // SAFETY: the caller passes a valid context.
        crate::fail(unsafe { &mut *ctx }, Trap::OomCopy(n), site);
        return ptr::null_mut();
    }
    // SAFETY: `src` holds `len` doubles (contract), which fit in memory.
    let xs = unsafe { std::slice::from_raw_parts(src, len) };
    // Bits, not values: a -0.0 is copied. A fold over blocks of 64 vectorises.
    if xs
        .chunks(64)
        .all(|c| c.iter().fold(0u64, |acc, x| acc | x.to_bits()) == 0)
    {
        return zeros_mark();
    }
    copy.extend_from_slice(xs);
    Box::into_raw(copy.into_boxed_slice()).cast::<f64>()
}

/// Frees a copy [`irad_rt_save`] made of `n` doubles (null or the mark of
/// zeros: nothing).
///
/// # Safety
/// `p` is null or came from `irad_rt_save` with the same `n`, and is freed
/// once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_unsave(p: *mut f64, n: i64) {
    let len = usize::try_from(n).unwrap_or(0);
    if len == 0 || p.is_null() || p == zeros_mark() {
        return;
    }
    // SAFETY: a boxed slice of `len` doubles (contract).
    drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(p, len)) });
}

/// Copies `bytes` bytes from `src` back to `dst` (zeroes them when `src`
/// is [`irad_rt_save`]'s mark of zeros): how an exported derivative
/// restores the buffers it saved before running its strong version.
///
/// # Safety
/// `src` is the mark or holds `bytes` bytes, `dst` holds `bytes` bytes
/// (anything when `bytes <= 0`; null pointers copy nothing), and they do
/// not overlap.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_restore(dst: *mut u8, src: *const u8, bytes: i64) {
    if let Ok(n) = usize::try_from(bytes)
        && n > 0
        && !src.is_null()
        && !dst.is_null()
    {
        if src == zeros_mark().cast::<u8>().cast_const() {
            // SAFETY: `dst` holds `n` bytes (contract).
            unsafe { ptr::write_bytes(dst, 0, n) };
        } else {
            // SAFETY: both regions hold `n` bytes and are distinct (contract).
            unsafe { ptr::copy_nonoverlapping(src, dst, n) };
        }
    }
}

/// The message of an error kind (a [`TrapKind`] code) with operands `a`
/// and `b`, as objects print it: the interpreter's text ([`Trap`]'s), with
/// the C side's advice for [`TrapKind::Stack`]. `tape` is the type of the
/// tape of a [`TrapKind::EmptyTape`].
pub fn error_text(kind: i64, a: i64, b: i64, max_depth: i64, tape: Option<&str>) -> String {
    match TrapKind::from_code(kind) {
        Some(kind) => Trap::decode(kind, a, b, max_depth, tape, Host::Object).to_string(),
        None => format!("internal error: unknown error kind {kind}"),
    }
}

/// The full text of a failure: the located message (the runtime's for the
/// kinds that carry one), then the call sites.
fn failure_text(ctx: &Ctx, kind: i64, rt: &Runtime, sites: &[SiteInfo]) -> String {
    let trace = &rt.trace;
    let site = |s: i64| usize::try_from(s).ok().and_then(|s| sites.get(s));
    let here = site(ctx.err_site);
    // SAFETY (both closures): the site table's strings are NUL-terminated or
    // null (contract of `irad_rt_leave`).
    let text = |p: *const c_char| {
        if p.is_null() {
            None
        } else {
            Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        }
    };
    let tape = here.and_then(|s| text(s.tape));
    let carries_text = matches!(
        TrapKind::from_code(kind),
        Some(TrapKind::Message | TrapKind::Bulk)
    );
    let msg = if carries_text && !rt.message.is_empty() {
        rt.message.clone()
    } else {
        error_text(kind, ctx.err_a, ctx.err_b, ctx.max_depth, tape.as_deref())
    };
    let pos = here
        .and_then(|s| text(s.pos))
        .unwrap_or_else(|| "<unknown>".into());
    let place = here.and_then(|s| text(s.place)).unwrap_or_default();
    let mut out = if place.is_empty() {
        format!("{pos}: error: {msg}")
    } else {
        format!("{pos}: error: {msg} ({place})")
    };
    let n = trace.len();
    for (i, &call) in trace.iter().enumerate() {
        if i == TRACE_HEAD && n > TRACE_HEAD + TRACE_TAIL {
            let hidden = n - TRACE_HEAD - TRACE_TAIL;
            out.push_str(&format!("\nnote: ... {hidden} more calls ..."));
        }
        if i < TRACE_HEAD || i + TRACE_TAIL >= n {
            let s = site(call);
            let place = s.and_then(|s| text(s.place)).unwrap_or_default();
            let pos = s
                .and_then(|s| text(s.pos))
                .unwrap_or_else(|| "<unknown>".into());
            out.push_str(&format!("\nnote: called {place} at {pos}"));
        }
    }
    out
}

/// The current stack pointer: the register itself where irad knows how to
/// read it (x86_64, aarch64), the address of a local elsewhere. Not the
/// address of a local everywhere: under AddressSanitizer locals can live on
/// a fake stack in the heap, which made the stack check fire at once (found
/// by the `interp_vs_jit` fuzz target, in the JIT's twin of this code).
#[inline(always)]
fn stack_pointer() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let sp: u64;
        // SAFETY: reads a register; touches no memory.
        unsafe {
            std::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags))
        };
        sp
    }
    #[cfg(target_arch = "aarch64")]
    {
        let sp: u64;
        // SAFETY: reads a register; touches no memory.
        unsafe {
            std::arch::asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags))
        };
        sp
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let marker = 0u8;
        std::hint::black_box(&marker) as *const u8 as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    #[test]
    fn site_info_size_matches() {
        assert_eq!(size_of::<SiteInfo>(), SITE_INFO_SIZE);
    }

    #[test]
    fn enter_and_leave_report_located_errors() {
        let pos = c"f.irad:3:7";
        let place = c"in @f, block #2, statement 1";
        let call_pos = c"f.irad:9:2";
        let call_place = c"in @g, block #1, statement 4";
        let sites = [
            SiteInfo {
                pos: pos.as_ptr(),
                place: place.as_ptr(),
                tape: ptr::null(),
            },
            SiteInfo {
                pos: call_pos.as_ptr(),
                place: call_place.as_ptr(),
                tape: ptr::null(),
            },
        ];
        let mut ctx = std::mem::MaybeUninit::<Ctx>::uninit();
        unsafe { irad_rt_enter(ctx.as_mut_ptr(), ptr::null(), 3) };
        let ctx = unsafe { ctx.assume_init_mut() };
        assert_eq!(ctx.depth, 1);
        assert_eq!(ctx.max_depth, DEFAULT_MAX_DEPTH);
        assert!(!ctx.tapes.is_null());
        ctx.err_kind = TrapKind::Index.code();
        ctx.err_site = 0;
        ctx.err_a = 5;
        ctx.err_b = 3;
        unsafe { (*ctx.rt).trace.push(1) };
        let code = unsafe { irad_rt_leave(ctx, 1, sites.as_ptr(), 2) };
        assert_eq!(i64::from(code), TrapKind::Index.code());
        let text = unsafe { CStr::from_ptr(irad_error_message()) }.to_string_lossy();
        assert_eq!(
            text,
            "f.irad:3:7: error: index 5 out of bounds for array of length 3 \
             (in @f, block #2, statement 1)\n\
             note: called in @g, block #1, statement 4 at f.irad:9:2"
        );
        let mut ctx = std::mem::MaybeUninit::<Ctx>::uninit();
        unsafe { irad_rt_enter(ctx.as_mut_ptr(), ptr::null(), 0) };
        let code = unsafe { irad_rt_leave(ctx.as_mut_ptr(), 0, ptr::null(), 0) };
        assert_eq!(code, 0);
        let text = unsafe { CStr::from_ptr(irad_error_message()) };
        assert!(text.is_empty());
    }

    #[test]
    fn nan_scans_and_restores_cover_every_element() {
        for n in [0usize, 1, 63, 64, 65, 130] {
            let xs = vec![f64::INFINITY; n];
            assert_eq!(unsafe { irad_rt_has_nan(xs.as_ptr(), n as i64) }, 0);
            for k in 0..n {
                let mut ys = xs.clone();
                ys[k] = f64::NAN;
                assert_eq!(unsafe { irad_rt_has_nan(ys.as_ptr(), n as i64) }, 1);
                // Outside the length it is not looked at.
                assert_eq!(unsafe { irad_rt_has_nan(ys.as_ptr(), k as i64) }, 0);
            }
        }
        assert_eq!(unsafe { irad_rt_has_nan(ptr::null(), -3) }, 0);
        let src = [1.5f64, -0.0, f64::NAN];
        let mut dst = [0.0f64; 3];
        unsafe { irad_rt_restore(dst.as_mut_ptr().cast(), src.as_ptr().cast(), 16) };
        assert_eq!(dst.map(f64::to_bits)[..2], src.map(f64::to_bits)[..2]);
        assert_eq!(dst[2], 0.0);
        unsafe { irad_rt_restore(dst.as_mut_ptr().cast(), src.as_ptr().cast(), -8) };
        assert_eq!(dst[2], 0.0);
        let mut ctx = std::mem::MaybeUninit::<Ctx>::uninit();
        unsafe { irad_rt_enter(ctx.as_mut_ptr(), ptr::null(), 0) };
        // Saved and restored bit for bit: 0, 2 (a -0.0 is not a zero) and
        // 3 elements copied, and 130 +0.0s marked and restored as zeros.
        let mut zeros = vec![0.0f64; 130];
        for (xs, n) in [
            (&src[..], 0i64),
            (&[0.0, -0.0][..], 2),
            (&src[..], 3),
            (&zeros[..], 130),
        ] {
            let p = unsafe { irad_rt_save(ctx.as_mut_ptr(), xs.as_ptr(), n, 0) };
            assert!(!p.is_null());
            let mut back = vec![7.0f64; n as usize];
            unsafe { irad_rt_restore(back.as_mut_ptr().cast(), p.cast(), 8 * n) };
            let same = back.iter().zip(xs).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{n} elements");
            unsafe { irad_rt_unsave(p, n) };
        }
        zeros[129] = 1.0;
        let p = unsafe { irad_rt_save(ctx.as_mut_ptr(), zeros.as_ptr(), 130, 0) };
        assert_eq!(unsafe { *p.add(129) }, 1.0);
        unsafe { irad_rt_unsave(p, 130) };
        // Out of memory: null, and the error in the context.
        let p = unsafe { irad_rt_save(ctx.as_mut_ptr(), src.as_ptr(), i64::MAX, 7) };
        assert!(p.is_null());
        let c = unsafe { ctx.assume_init_mut() };
        assert_eq!((c.err_kind, c.err_site), (TrapKind::OomCopy.code(), 7));
        assert_eq!(
            unsafe { irad_rt_leave(c, 1, ptr::null(), 0) },
            TrapKind::OomCopy.code() as i32
        );
    }

    #[test]
    fn settings_are_per_thread() {
        std::thread::spawn(|| {
            irad_set_max_depth(7);
            irad_set_stack_budget(4096);
            let mut ctx = std::mem::MaybeUninit::<Ctx>::uninit();
            unsafe { irad_rt_enter(ctx.as_mut_ptr(), ptr::null(), 0) };
            let c = unsafe { ctx.assume_init_mut() };
            assert_eq!(c.max_depth, 7);
            assert!(c.stack_limit > 0);
            unsafe { irad_rt_leave(c, 0, ptr::null(), 0) };
        })
        .join()
        .expect("thread runs");
        let mut ctx = std::mem::MaybeUninit::<Ctx>::uninit();
        unsafe { irad_rt_enter(ctx.as_mut_ptr(), ptr::null(), 0) };
        let c = unsafe { ctx.assume_init_mut() };
        assert_eq!(c.max_depth, DEFAULT_MAX_DEPTH);
        unsafe { irad_rt_leave(c, 0, ptr::null(), 0) };
    }
}
