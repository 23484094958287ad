//! The native stack compiled code runs on when the calling thread has less
//! left than the JIT's budget (a spawned thread has 2 MiB).
//!
//! Assumes: one [`OwnStack`] is used by one run at a time (each per-call
//! context owns its own, `super::code::Local`). Guarantees: the stack is
//! mapped once (reserved, committed only as used) with an inaccessible
//! region below it, reused by every later run of its context, and unmapped
//! when the context is dropped.

/// A stack for compiled code when the caller's thread has too little: mapped
/// once (reserved, committed only as it is used), with an inaccessible page
/// below it, and reused by every run that needs it.
pub(crate) struct OwnStack {
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

impl OwnStack {
    /// Runs `call` on this stack.
    pub(crate) fn run<R>(&self, call: impl FnOnce() -> R) -> R {
        // SAFETY: `base + guard .. base + guard + size` is mapped
        // read-write and used by nothing else: the stack belongs to one
        // per-call context, which one run uses at a time (rule derivation
        // does not run code).
        unsafe { psm::on_stack(self.base.add(self.guard), self.size, call) }
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

/// Runs `call` on the context's own stack of at least `need` bytes (mapped
/// on first use; a new one when the budget grew); `Err(call)`, not run,
/// when no such stack can be mapped (out of address space): the caller
/// then runs it in place with the stack it has (never `stacker`, which
/// panics when its own mapping fails).
pub(crate) fn on_own_stack<R, F: FnOnce() -> R>(
    own: &mut Option<OwnStack>,
    need: usize,
    call: F,
) -> Result<R, F> {
    ensure_own_stack(own, need);
    match own {
        Some(s) => Ok(s.run(call)),
        None => Err(call),
    }
}

/// Makes sure the context has its own stack of at least `need` bytes
/// (mapping one when it has none or a smaller one); whether it has.
pub(crate) fn ensure_own_stack(own: &mut Option<OwnStack>, need: usize) -> bool {
    if own.as_ref().is_none_or(|s| s.size < need) {
        // The old stack first, so that the new one fits where it did.
        *own = None;
        *own = OwnStack::map(need);
    }
    own.is_some()
}
