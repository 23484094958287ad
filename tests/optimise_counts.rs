//! The default schedule shrinks derived code: statement counts (statements
//! of layout blocks, phis included, terminators not) of the functions forward
//! and reverse mode derive for a few programs, before and after the default
//! schedule, asserted exactly so that a change in either shows up here (and
//! in docs/optimise.md, which quotes them).
//!
//! Assumes the programs load and differentiate.

use irad::ir::{FuncId, Module};
use irad::passes::optimise::{OptOptions, default_schedule, optimise};
use std::path::Path;

fn count(m: &Module, funcs: &[FuncId]) -> usize {
    funcs
        .iter()
        .map(|&f| {
            let func = &m[f];
            func.layout
                .iter()
                .map(|&b| func.blocks[b].insts.len())
                .sum::<usize>()
        })
        .sum()
}

/// (before, after) for the derived functions of `func` in `file`.
fn counts(file: &str, func: &str, rev: bool) -> (usize, usize) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let src = irad::read_source(&path).expect("reads");
    let module = irad::load(&src).expect("loads");
    let f = irad::find_function(&src, &module, func).expect("has the function");
    let registry = irad::rules::Registry::new();
    let (mut m, added) = if rev {
        let (m, added, _) = irad::reverse_module(&src, &module, &[f], &registry).expect("rev");
        (m, added)
    } else {
        irad::forward_module(&src, &module, &[f], irad::ir::Lanes::ONE, &registry).expect("fwd")
    };
    let before = count(&m, &added);
    optimise(
        &mut m,
        &default_schedule(),
        Some(&added),
        &OptOptions::default(),
    )
    .expect("optimises");
    (before, count(&m, &added))
}

#[test]
fn the_default_schedule_shrinks_derived_code() {
    let cases = [
        ("examples/rosenbrock.irad", "rosenbrock", true),
        ("examples/rosenbrock.irad", "rosenbrock", false),
        ("tests/corpus/tuples.irad", "tuples", true),
        ("tests/corpus/tuples.irad", "tuples", false),
        ("tests/corpus/branchy.irad", "branchy", true),
        ("tests/corpus/static_calls.irad", "chain", true),
    ];
    let mut got = Vec::new();
    for (file, func, rev) in cases {
        let (before, after) = counts(file, func, rev);
        assert!(after < before, "{file} {func}: {before} -> {after}");
        got.push(format!(
            "{file} {} {func}: {before} -> {after}",
            if rev { "rev" } else { "fwd" }
        ));
    }
    let got = got.join("\n");
    let want = "\
examples/rosenbrock.irad rev rosenbrock: 63 -> 53
examples/rosenbrock.irad fwd rosenbrock: 43 -> 38
tests/corpus/tuples.irad rev tuples: 179 -> 152
tests/corpus/tuples.irad fwd tuples: 141 -> 111
tests/corpus/branchy.irad rev branchy: 93 -> 89
tests/corpus/static_calls.irad rev chain: 87 -> 83";
    assert_eq!(got, want);
}
