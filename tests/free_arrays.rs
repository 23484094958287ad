//! Compiled code frees the arrays it provably drops (issue 27, finding 6;
//! docs/codegen.md, "Freeing arrays"), and never one that a value can still
//! reach.
//!
//! The programs of `tests/free_arrays/alias.irad` alias arrays through loop
//! phis, `select`, `if`, tuples, calls that keep an array and calls that do
//! not, function values, recursion and returns. Each runs in the JIT with
//! freed arrays poisoned (`IRAD_POISON_FREED=1`: their pages become
//! inaccessible, so a later access kills the process instead of passing
//! silently) and must print exactly what the interpreter prints: the value,
//! and the gradients by reverse mode, forward mode and sparse forward mode.
//! The JIT must also free what the analysis allows: the count of arrays
//! freed by each primal is checked against the sites the analysis frees
//! (`codegen/src/lower/release.rs` says why each is or is not).
//!
//! The memory bound itself (the loop under an address-space limit,
//! by every backend and mode) is in `tests/out_of_memory.rs` and, for
//! objects, `tests/emit.rs`.

use irad::Source;
use irad::ir::interp::RunOptions;
use std::process::Command;

const FILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/free_arrays/alias.irad");

/// Each program with its arguments.
const CASES: &[(&str, &str)] = &[
    ("carried", "1.5, 7"),
    ("chosen", "1.5, 7"),
    ("tupled", "1.5, 7"),
    ("called", "1.5, 7"),
    ("valued", "1.5, 7, @second"),
    ("deep", "1.5, 6"),
    ("merged", "[1.0, 2.0, 3.0], 1.5, 5"),
    ("returned", "1.5, 4"),
    ("picked", "1.5, 7, @pick"),
];

/// `irad ARGS` with freed arrays poisoned: its standard output, after
/// checking that it succeeded (a use after free would be a signal).
fn irad_poisoned(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(args)
        .env("IRAD_POISON_FREED", "1")
        .output()
        .expect("irad starts");
    assert!(
        o.status.success(),
        "irad {args:?}: {:?}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn aliased_arrays_survive_until_no_value_reaches_them_in_every_mode() {
    let modes: &[&[&str]] = &[
        &["run"],
        &["grad", "--mode", "rev"],
        &["grad", "--mode", "fwd"],
        &["grad", "--mode", "fwd", "--sparse"],
    ];
    for (func, args) in CASES {
        for mode in modes {
            let mut cmd: Vec<&str> = mode.to_vec();
            cmd.extend([FILE, "-f", func, "--args", args]);
            let jit = irad_poisoned(&cmd);
            cmd.extend(["--backend", "interp"]);
            let interp = irad_poisoned(&cmd);
            assert_eq!(jit, interp, "{mode:?} @{func}({args})");
        }
    }
}

#[test]
fn the_jit_frees_each_site_the_analysis_allows() {
    let src = irad::read_source(std::path::Path::new(FILE)).expect("readable");
    let module = irad::load(&src).expect("loads");
    // (program, arrays freed before the run ends), with why.
    let want: &[(&str, u64)] = &[
        // `prev` starts as an array made before the loop, freed at the
        // return (the loop phi's block is dominated by its own); each `cur`
        // is carried by that phi and never freed.
        ("carried", 1),
        // `a` and `b` of each of the 7 iterations.
        ("chosen", 14),
        // The tuple's first array, made before the loop.
        ("tupled", 1),
        // The first arrays of `last` and `held`, made before the loop; not
        // the `t`s, which `keep_rec` keeps (returns), nor `make`'s arrays,
        // which it returns.
        ("called", 2),
        // Passed through a function value, both `a` and its copy: kept.
        ("valued", 0),
        // One array per frame, freed at each frame's return: depth 6 + 1.
        ("deep", 7),
        // Each iteration's copy `w`, merged with the argument inside it.
        ("merged", 5),
        // `fresh`'s `b` at each of the 4 calls; `a` is returned.
        ("returned", 4),
        // `pick`'s arrays all reach its result.
        ("picked", 0),
    ];
    for &(name, frees) in want {
        let args = CASES
            .iter()
            .find(|(f, _)| *f == name)
            .map(|(_, a)| *a)
            .expect("a case");
        let f = irad::find_function(&src, &module, name).expect("function");
        // Fresh arguments for each run: `@merged` writes into its array.
        let vals = || irad::parse_args(&Source::new("<args>", args), &module, f).expect("args");
        let mut jit = irad::codegen::Jit::new(&module).expect("compiles");
        let got = jit.run(f, &vals(), &RunOptions::default()).expect("runs");
        let interp =
            irad::ir::interp::run(&module, f, &vals(), &RunOptions::default()).expect("interprets");
        assert!(got.same(&interp), "@{name}");
        assert_eq!(jit.arrays_freed(), frees, "arrays freed by @{name}");
    }
}
