//! The arrays compiled code allocates: zeroed buffers that the [`Arena`]
//! owns, each freed either by compiled code once it is provably dead
//! ([`irad_rt_free`], called where the code generator's analysis allows it,
//! docs/codegen.md "Freeing arrays") or, whatever is left, when the run ends
//! ([`Arena::release_all`]).
//!
//! Layout: every array is one heap block that starts with a header of
//! [`HEADER`] bytes, then the elements; compiled code only ever sees the
//! address of the first element. The header holds the block's index in the
//! arena's list, so freeing one array costs O(1) (a swap-remove that also
//! rewrites the moved block's header). Elements are 16-byte aligned.
//!
//! Poisoning (a debug mode): every array is a mapping of its own, and
//! freeing one makes its pages inaccessible (Linux: `mprotect(PROT_NONE)`
//! after giving the memory back; elsewhere the elements are overwritten
//! with `0xFF` bytes, a NaN for f64) and keeps its addresses from reuse
//! while the freed blocks kept hold at most [`POISON_KEEP`] bytes (older
//! ones are then unmapped), so a use after free crashes (or reads NaNs)
//! instead of passing silently. It is on in debug builds of this crate
//! (what `cargo test` runs: every test of compiled code checks so) and off
//! in release builds; the environment variable [`POISON_ENV`] set to `1`
//! or `0` when the first runtime is made turns it on or off.
//!
//! Tape references (docs/codegen.md, "Freeing arrays"). The header's
//! second word counts the references that tapes and pops hold to the array
//! (its low 63 bits) and says whether the function that made it has given
//! it up (its top bit); it is zero when the array is made. Compiled code
//! pushes an array it counts as its address with the low bit set (elements
//! are 16-byte aligned, so an address never has it), a *tagged* word,
//! calling [`irad_rt_hold`]; a pop that lets go of what it popped passes
//! the popped word to [`irad_rt_drop_popped`], which counts one down; the
//! maker calls [`irad_rt_release`]. Whichever comes last frees the array.
//! Untagged words (arrays pushed uncounted, or not this arena's at all)
//! are never looked at.
//!
//! Guarantees: [`Arena::alloc`] returns zeroed, 16-aligned memory for the
//! elements asked for (at least one byte, so never null on success);
//! [`Arena::free`] of an address it returned frees that block once, and of
//! null does nothing; every block not freed is freed by
//! [`Arena::release_all`] or when the arena is dropped.

use crate::Ctx;
use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::collections::VecDeque;
use std::sync::OnceLock;

/// Bytes before the first element of every array: its index in the list,
/// then its references (module header).
pub const HEADER: usize = 16;

/// The bit of the references word saying the maker gave the array up.
const RELEASED: u64 = 1 << 63;

/// The references word of the array whose first element is at `p`.
///
/// # Safety
/// `p` is a live array of an arena.
unsafe fn refs<'a>(p: usize) -> &'a mut u64 {
    // SAFETY: the header's second word, 8 bytes before the elements.
    unsafe { &mut *((p - 8) as *mut u64) }
}

/// The environment variable that turns poisoning of freed arrays on (`1`)
/// or off (`0`).
pub const POISON_ENV: &str = "IRAD_POISON_FREED";

/// The most bytes of freed arrays a poisoning arena keeps reserved.
pub const POISON_KEEP: usize = 64 << 20;

/// Whether freed arrays are poisoned: [`POISON_ENV`] when it is `0` or `1`,
/// else whether this crate is a debug build (read once per process).
pub fn poison_freed() -> bool {
    static POISON: OnceLock<bool> = OnceLock::new();
    *POISON.get_or_init(|| match std::env::var(POISON_ENV).as_deref() {
        Ok("1") => true,
        Ok("0") => false,
        _ => cfg!(debug_assertions),
    })
}

/// The arrays allocated by compiled code and not freed yet.
#[derive(Debug)]
pub struct Arena {
    /// Each live block: its start (the header) and its size in bytes.
    live: Vec<(*mut u8, usize)>,
    /// Poisoning mode (module header).
    poison: bool,
    /// Poisoning mode: the freed blocks kept reserved, oldest first.
    freed: VecDeque<(*mut u8, usize)>,
    /// The bytes of `freed`.
    freed_bytes: usize,
    /// Arrays freed by compiled code since the arena was made.
    frees: u64,
    /// The most arrays live at once since the arena was made.
    peak: usize,
}

impl Default for Arena {
    fn default() -> Arena {
        Arena {
            live: Vec::new(),
            poison: poison_freed(),
            freed: VecDeque::new(),
            freed_bytes: 0,
            frees: 0,
            peak: 0,
        }
    }
}

impl Arena {
    /// Allocates `len` zeroed elements of `elem_size` bytes; the address of
    /// the first element, or `None` when out of memory or too large.
    pub fn alloc(&mut self, len: usize, elem_size: usize) -> Option<*mut u8> {
        let bytes = len.checked_mul(elem_size)?.checked_add(HEADER)?;
        self.live.try_reserve(1).ok()?;
        let base = if self.poison {
            poison::map(bytes)?
        } else {
            let layout = Layout::from_size_align(bytes, 16).ok()?;
            // SAFETY: the layout's size is at least `HEADER`, not zero.
            let p = unsafe { alloc_zeroed(layout) };
            if p.is_null() {
                return None;
            }
            p
        };
        let index = self.live.len();
        self.live.push((base, bytes));
        self.peak = self.peak.max(self.live.len());
        // SAFETY: the block holds at least `HEADER` bytes, 16-aligned.
        unsafe { (base as *mut usize).write(index) };
        // SAFETY: within the block (the elements start after the header).
        Some(unsafe { base.add(HEADER) })
    }

    /// Frees the array whose first element is at `p` (null: nothing).
    ///
    /// # Safety
    /// `p` is null or was returned by this arena's [`Arena::alloc`] and not
    /// freed since; nothing uses the array afterwards.
    pub unsafe fn free(&mut self, p: *mut u8) {
        if p.is_null() {
            return;
        }
        // SAFETY: `p` came from `alloc`, so a header precedes it.
        let base = unsafe { p.sub(HEADER) };
        let index = unsafe { (base as *const usize).read() };
        // A header that names another block would be a code generator bug:
        // freeing nothing is then the safe answer.
        let bytes = match self.live.get(index) {
            Some(&(b, bytes)) if b == base => bytes,
            _ => return,
        };
        self.live.swap_remove(index);
        if let Some(&(moved, _)) = self.live.get(index) {
            // SAFETY: a live block's header is writable.
            unsafe { (moved as *mut usize).write(index) };
        }
        self.frees += 1;
        if self.poison {
            // SAFETY: a block of `bytes` bytes that nothing uses any more.
            unsafe { poison::poison(base, bytes) };
            self.freed.push_back((base, bytes));
            self.freed_bytes += bytes;
            while self.freed_bytes > POISON_KEEP
                && let Some((old, n)) = self.freed.pop_front()
            {
                self.freed_bytes -= n;
                // SAFETY: mapped by `poison::map` with this size, unmapped once.
                unsafe { poison::unmap(old, n) };
            }
        } else {
            // SAFETY: allocated by `alloc_zeroed` with this layout, freed once.
            unsafe { dealloc(base, Layout::from_size_align_unchecked(bytes, 16)) };
        }
    }

    /// Counts one more reference to the array of a tagged word `w` (module
    /// header); an untagged word: nothing.
    ///
    /// # Safety
    /// A tagged `w` is the address of an array of this arena, not freed,
    /// with the low bit set.
    pub unsafe fn hold(&mut self, w: usize) {
        if w & 1 == 1 {
            // SAFETY: a live array of this arena (contract): its header.
            unsafe { *refs(w & !1) += 1 };
        }
    }

    /// The maker of the array at `p` gives it up: frees it when no
    /// reference is counted, else marks it to be freed when the last is
    /// dropped (null: nothing).
    ///
    /// # Safety
    /// As [`Arena::free`], except that tapes and pops may still hold `p`,
    /// each reference counted by [`Arena::hold`].
    pub unsafe fn release(&mut self, p: *mut u8) {
        if p.is_null() {
            return;
        }
        // SAFETY: a live array of this arena (contract): its header.
        let r = unsafe { refs(p as usize) };
        if *r & !RELEASED == 0 {
            // SAFETY: nothing else holds `p` (contract).
            unsafe { self.free(p) };
        } else {
            *r |= RELEASED;
        }
    }

    /// Drops the reference of a tagged word `w`, popped and now unused by
    /// the function that popped it; frees the array when that was the
    /// last and its maker gave it up. Untagged words: nothing.
    ///
    /// # Safety
    /// A tagged `w` was pushed with a reference [`Arena::hold`] counted,
    /// popped once for this drop, and nothing uses the array through it
    /// again.
    pub unsafe fn drop_popped(&mut self, w: usize) {
        if w & 1 == 0 {
            return;
        }
        let p = w & !1;
        // SAFETY: the counted reference keeps the array alive (contract).
        let r = unsafe { refs(p) };
        *r -= 1;
        if *r == RELEASED {
            // SAFETY: its maker gave it up and no reference is counted.
            unsafe { self.free(p as *mut u8) };
        }
    }

    /// Frees every array. Any (pointer, length) pair still held anywhere
    /// dangles afterwards.
    pub fn release_all(&mut self) {
        self.freed_bytes = 0;
        for (base, bytes) in self.live.drain(..).chain(self.freed.drain(..)) {
            if self.poison {
                // SAFETY: mapped by `poison::map` with this size, unmapped once.
                unsafe { poison::unmap(base, bytes) };
            } else {
                // SAFETY: allocated by `alloc_zeroed` with this layout, freed once.
                unsafe { dealloc(base, Layout::from_size_align_unchecked(bytes, 16)) };
            }
        }
    }

    /// How many arrays are allocated and not freed.
    pub fn live(&self) -> usize {
        self.live.len()
    }

    /// Bytes the live arrays hold, headers included.
    pub fn live_bytes(&self) -> u64 {
        self.live.iter().map(|&(_, b)| b as u64).sum()
    }

    /// How many arrays compiled code has freed since the arena was made.
    pub fn frees(&self) -> u64 {
        self.frees
    }

    /// The most arrays live at once since the arena was made.
    pub fn peak(&self) -> usize {
        self.peak
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        self.release_all();
    }
}

/// `free(p)` for compiled code: frees the array whose first element is at
/// `p`, allocated by this run (null: nothing). The code generator calls it
/// only for an array no value can reach any more.
///
/// # Safety
/// `ctx` is a valid context whose `rt` points at a live runtime; `p` is null
/// or an array of that runtime's arena not freed yet, unused afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_free(ctx: *mut Ctx, p: *mut u8) {
    // SAFETY: the caller passes a valid context with a live runtime.
    let rt = unsafe { &mut *(*ctx).rt };
    // SAFETY: `p` is this arena's (contract).
    unsafe { rt.arena.free(p) };
}

/// `hold(w)` for compiled code: a counted push of a tagged word
/// ([`Arena::hold`]).
///
/// # Safety
/// `ctx` is a valid context whose `rt` points at a live runtime; `w` as
/// [`Arena::hold`] asks.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_hold(ctx: *mut Ctx, w: usize) {
    // SAFETY: the caller passes a valid context with a live runtime.
    let rt = unsafe { &mut *(*ctx).rt };
    // SAFETY: as the contract says.
    unsafe { rt.arena.hold(w) };
}

/// `release(p)` for compiled code: the statement that made the array at
/// `p` gives it up ([`Arena::release`]).
///
/// # Safety
/// `ctx` is a valid context whose `rt` points at a live runtime; `p` as
/// [`Arena::release`] asks.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_release(ctx: *mut Ctx, p: *mut u8) {
    // SAFETY: the caller passes a valid context with a live runtime.
    let rt = unsafe { &mut *(*ctx).rt };
    // SAFETY: `p` is this arena's (contract).
    unsafe { rt.arena.release(p) };
}

/// `drop(w)` for compiled code: the word of a popped array the popping
/// function no longer uses ([`Arena::drop_popped`]).
///
/// # Safety
/// `ctx` is a valid context whose `rt` points at a live runtime; `p` as
/// [`Arena::drop_popped`] asks.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn irad_rt_drop_popped(ctx: *mut Ctx, w: usize) {
    // SAFETY: the caller passes a valid context with a live runtime.
    let rt = unsafe { &mut *(*ctx).rt };
    // SAFETY: as the contract says.
    unsafe { rt.arena.drop_popped(w) };
}

#[cfg(target_os = "linux")]
mod poison {
    //! Poisoning on Linux: one private mapping per array; a freed one keeps
    //! its addresses but loses its pages and every access right.

    /// A zeroed mapping of at least `bytes` bytes, or `None`.
    pub fn map(bytes: usize) -> Option<*mut u8> {
        // SAFETY: an anonymous private mapping; the kernel picks the address.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        (p != libc::MAP_FAILED).then_some(p as *mut u8)
    }

    /// Gives the pages back and forbids every access to them.
    ///
    /// # Safety
    /// `base` is a mapping of `bytes` bytes made by [`map`].
    pub unsafe fn poison(base: *mut u8, bytes: usize) {
        // SAFETY: the whole mapping (contract). Failure leaves it readable,
        // which only weakens the check.
        unsafe {
            libc::madvise(base as *mut libc::c_void, bytes, libc::MADV_DONTNEED);
            libc::mprotect(base as *mut libc::c_void, bytes, libc::PROT_NONE);
        }
    }

    /// Unmaps a mapping made by [`map`].
    ///
    /// # Safety
    /// As [`poison`]; nothing uses the memory afterwards.
    pub unsafe fn unmap(base: *mut u8, bytes: usize) {
        // SAFETY: the whole mapping (contract).
        unsafe { libc::munmap(base as *mut libc::c_void, bytes) };
    }
}

#[cfg(not(target_os = "linux"))]
mod poison {
    //! Poisoning elsewhere: ordinary blocks, overwritten with `0xFF` bytes
    //! when freed and kept until released.

    use std::alloc::{Layout, alloc_zeroed, dealloc};

    /// A zeroed block of `bytes` bytes, or `None`.
    pub fn map(bytes: usize) -> Option<*mut u8> {
        let layout = Layout::from_size_align(bytes, 16).ok()?;
        // SAFETY: non-zero size.
        let p = unsafe { alloc_zeroed(layout) };
        (!p.is_null()).then_some(p)
    }

    /// Overwrites the elements with `0xFF` bytes (the header too).
    ///
    /// # Safety
    /// `base` is a block of `bytes` bytes made by [`map`].
    pub unsafe fn poison(base: *mut u8, bytes: usize) {
        // SAFETY: the whole block (contract).
        unsafe { std::ptr::write_bytes(base, 0xFF, bytes) };
    }

    /// Frees a block made by [`map`].
    ///
    /// # Safety
    /// As [`poison`]; nothing uses the memory afterwards.
    pub unsafe fn unmap(base: *mut u8, bytes: usize) {
        // SAFETY: allocated with this layout (contract).
        unsafe { dealloc(base, Layout::from_size_align_unchecked(bytes, 16)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freeing_in_any_order_keeps_the_others() {
        let mut a = Arena::default();
        let ps: Vec<*mut u8> = (0..6).map(|k| a.alloc(k + 1, 8).expect("alloc")).collect();
        for (k, &p) in ps.iter().enumerate() {
            // SAFETY: k + 1 f64s each.
            unsafe { (p as *mut f64).add(k).write(k as f64) };
            assert_eq!(p as usize % 16, 0);
        }
        // SAFETY: each freed once, never used again.
        unsafe {
            a.free(ps[1]);
            a.free(ps[5]);
            a.free(ps[0]);
            a.free(std::ptr::null_mut());
        }
        assert_eq!((a.live(), a.frees()), (3, 3));
        for k in [2, 3, 4] {
            // SAFETY: still live.
            assert_eq!(unsafe { (ps[k] as *const f64).add(k).read() }, k as f64);
        }
        // SAFETY: the remaining ones, once each.
        unsafe {
            a.free(ps[3]);
            a.free(ps[2]);
        }
        assert_eq!(a.live(), 1);
        a.release_all();
        assert_eq!(a.live(), 0);
    }

    #[test]
    fn an_array_on_tapes_is_freed_by_whichever_lets_go_last() {
        let mut a = Arena::default();
        let (p, q) = (a.alloc(2, 8).expect("alloc"), a.alloc(2, 8).expect("alloc"));
        let (wp, wq) = (p as usize | 1, q as usize | 1);
        // SAFETY: tagged words of live arrays; each drop follows a counted
        // push; nothing uses an array after its free.
        unsafe {
            // `p`: pushed twice, given up by its maker, then popped twice.
            a.hold(wp);
            a.hold(wp);
            a.release(p);
            assert_eq!(a.frees(), 0);
            a.drop_popped(wp);
            assert_eq!(a.frees(), 0);
            // Untagged words are never counted.
            a.hold(p as usize);
            a.drop_popped(p as usize);
            assert_eq!(a.frees(), 0);
            a.drop_popped(wp);
            assert_eq!((a.frees(), a.live()), (1, 1));
            // `q`: pushed and popped before its maker gives it up.
            a.hold(wq);
            a.drop_popped(wq);
            assert_eq!(a.frees(), 1);
            a.release(q);
        }
        assert_eq!((a.frees(), a.live()), (2, 0));
    }

    #[test]
    fn poisoned_arenas_allocate_zeroed_memory_and_free_it() {
        let mut a = Arena::default();
        a.poison = true;
        let p = a.alloc(1000, 8).expect("alloc");
        // SAFETY: 1000 f64s.
        let xs = unsafe { std::slice::from_raw_parts_mut(p as *mut f64, 1000) };
        assert!(xs.iter().all(|&x| x == 0.0));
        xs[999] = 1.0;
        let q = a.alloc(3, 1).expect("alloc");
        // SAFETY: freed once; not read afterwards (it would fault).
        unsafe { a.free(p) };
        assert_eq!((a.live(), a.freed.len()), (1, 1));
        // SAFETY: `q` is live.
        unsafe { q.write(1) };
        // Freed blocks beyond `POISON_KEEP` bytes are given back, oldest
        // first.
        for _ in 0..10 {
            let p = a.alloc(1 << 20, 8).expect("alloc");
            // SAFETY: freed once, never used again.
            unsafe { a.free(p) };
        }
        assert!(a.freed_bytes <= POISON_KEEP && a.freed.len() == 7);
        a.release_all();
        assert_eq!((a.live(), a.freed.len(), a.freed_bytes), (0, 0, 0));
    }
}
