//! irad-fuzzgen: what irad's fuzzing is made of, shared by the cargo-fuzz
//! targets (`fuzz/`, run with cargo-fuzz) and by ordinary seeded tests
//! (`fuzzgen/tests/seeded.rs`, run by `cargo test`).
//!
//! - [`generate`]: a generator of valid, terminating surface-language programs
//!   with arguments, from fuzzer bytes;
//! - [`check`]: the properties checked on one input (parsers, verifier,
//!   interpreter, interpreter against JIT, forward against reverse against
//!   finite differences);
//! - [`coverage`]: what a run's programs held (features, primitives), as a
//!   table;
//! - `emit` (on Unix): the runner's `emit` target, object code called
//!   through the C ABI against the JIT;
//! - [`seeded`]: deterministic bytes for a seed, so the same generator runs
//!   without a fuzzer.
//!
//! Assumes nothing of its inputs. Guarantees: the generator never panics and
//! always returns a program (running out of bytes picks the simplest
//! options); checks return `Err` with a description instead of panicking.

#![warn(missing_docs)]

pub mod check;
pub mod coverage;
#[cfg(unix)]
pub mod emit;
pub mod generate;

/// `len` pseudo-random bytes from `seed` (splitmix64): the input a seeded
/// test feeds the generator in place of a fuzzer's.
pub fn seeded(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        out.extend_from_slice(&z.to_le_bytes());
    }
    out.truncate(len);
    out
}
