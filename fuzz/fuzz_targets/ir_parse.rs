//! Fuzz target `ir_parse`: arbitrary bytes through `irad_fuzzgen::check::ir_text`
//! (see fuzz/README.md); the same check runs seeded in
//! `fuzzgen/tests/seeded.rs`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = irad_fuzzgen::check::ir_text(data) {
        panic!("{e}");
    }
});
