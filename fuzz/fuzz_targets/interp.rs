//! Fuzz target `interp`: a program generated from the bytes
//! (`irad_fuzzgen::generate`) through `irad_fuzzgen::check::interpreter` (see
//! fuzz/README.md); the same check runs seeded in `fuzzgen/tests/seeded.rs`.
#![no_main]
use arbitrary::Unstructured;
use irad_fuzzgen::generate::{Config, program};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(p) = program(&mut u, &Config::default()) else {
        return;
    };
    if let Err(e) = irad_fuzzgen::check::interpreter(&p) {
        panic!("{e}");
    }
});
