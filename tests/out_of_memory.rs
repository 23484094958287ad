//! Running out of memory is a located run-time error in every backend, never
//! an abort (issue 27, findings 2 and 3): a reverse-mode tape that cannot
//! grow, a recursion under a huge `--max-depth` whose frames exhaust memory,
//! and the sparse tangent builder of a long loop, run under an address-space
//! limit (`ulimit -v`, so Linux only).
//!
//! Each case checks the exit status (1, a user error: an abort would be a
//! signal, a panic 101), that the message says what ran out, and that it
//! names the statement in the user's file.
//!
//! And memory that should not run out does not (finding 6): a loop making a
//! 10 000-element temporary per iteration runs in bounded memory in every
//! backend and mode, as compiled code frees each temporary once no value
//! can reach it (docs/codegen.md, "Freeing arrays"), and so does a loop
//! carrying a buffer remade every iteration through its phi.
#![cfg(target_os = "linux")]

use std::path::PathBuf;
use std::process::{Command, Output};

const PROGRAM: &str = "fn f(x: f64, n: i64) -> f64 {
    let mut y = x;
    for i in 0..n {
        y = sin(y) * 1.0001;
    }
    y
}
fn rec(x: f64) -> f64 { rec(x * 1.0) }
";

/// The program, written once per test process.
fn program() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("out_of_memory");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("long.irad");
    std::fs::write(&path, PROGRAM).expect("temp file");
    path
}

/// Runs irad with `args` under an address-space limit of `kib` KiB.
fn irad_limited(kib: u64, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_irad"))
        .args(args)
        .output()
        .expect("sh starts")
}

/// Asserts a clean user error whose message contains each of `texts`.
fn fails_cleanly(o: &Output, texts: &[&str]) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "status {:?}: {err}", o.status);
    for t in texts {
        assert!(err.contains(t), "missing {t:?} in: {err}");
    }
}

/// 300 MiB of address space: enough to start, far too little for the tape
/// of 10^9 iterations or for 10^8 frames.
const LIMIT_KIB: u64 = 300_000;

#[test]
fn a_tape_that_cannot_grow_is_a_located_error_in_the_interpreter() {
    let p = program();
    let path = p.to_str().expect("utf-8 path");
    let o = irad_limited(
        LIMIT_KIB,
        &[
            "grad",
            path,
            "-f",
            "f",
            "--args",
            "0.5, 1000000000",
            "--backend",
            "interp",
        ],
    );
    fails_cleanly(&o, &["out of memory growing a tape", "long.irad:4:13"]);
}

#[test]
fn a_recursion_that_exhausts_memory_is_a_located_error_in_the_interpreter() {
    let p = program();
    let path = p.to_str().expect("utf-8 path");
    for cmd in ["run", "grad"] {
        let o = irad_limited(
            LIMIT_KIB,
            &[
                cmd,
                path,
                "-f",
                "rec",
                "--args",
                "0.5",
                "--backend",
                "interp",
                "--max-depth",
                "100000000",
            ],
        );
        // Whichever allocation fails first: the call stack or a frame.
        fails_cleanly(
            &o,
            &["error: out of memory", "long.irad:8:25", "more calls"],
        );
    }
}

#[test]
fn a_deep_recursion_under_the_jit_keeps_a_short_trace() {
    // The JIT's stack budget stops the recursion; its error used to copy
    // every one of millions of call sites, which ran out of memory itself.
    let p = program();
    let path = p.to_str().expect("utf-8 path");
    let o = irad_limited(
        2_000_000,
        &[
            "grad",
            path,
            "-f",
            "rec",
            "--args",
            "0.5",
            "--max-depth",
            "100000000",
        ],
    );
    fails_cleanly(
        &o,
        &["native stack exhausted", "long.irad:8:25", "more calls"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.lines().count() < 40, "{err}");
}

#[test]
fn a_sparse_tangent_builder_that_cannot_grow_is_a_located_error_in_both_backends() {
    let p = program();
    let path = p.to_str().expect("utf-8 path");
    // The JIT reserves address space for its code up front: it needs more.
    for (backend, kib) in [("interp", LIMIT_KIB), ("jit", 2_000_000)] {
        let o = irad_limited(
            kib,
            &[
                "grad",
                path,
                "-f",
                "f",
                "--args",
                "0.5, 1000000000",
                "--mode",
                "fwd",
                "--sparse",
                "--backend",
                backend,
            ],
        );
        fails_cleanly(
            &o,
            &[
                "out of memory growing the sparse tangent builder",
                "long.irad:4:13",
            ],
        );
    }
}

/// A loop that a tape limit cannot checkpoint (a tuple made before it
/// holds the array it replaces by an either call's result): its tape grows
/// until memory runs out.
const HELD: &str = "fn either_way(a: [f64], c: bool) -> [f64] { if c { a } else { copy(a) } }
fn held(x: f64, n: i64) -> f64 {
    let mut a = zeros(2);
    a[0] = x;
    let t = (a, x);
    for k in 0..n {
        a = either_way(a, k % 2 == 0);
        a[1] = a[1] * 0.75 + sin(a[0]);
    }
    a[1] + t.0[1] * t.1
}
";

/// The warning that such a loop is not checkpointed comes before the run,
/// so a run that then runs out of memory still says why (before session 42
/// it was printed after the run, and lost with it), in both backends and
/// under `bench` too; under `--json` the error is all stderr carries.
#[test]
fn a_loop_left_unbounded_is_warned_of_before_its_run_runs_out_of_memory() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("out_of_memory");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("held.irad");
    std::fs::write(&path, HELD).expect("temp file");
    let path = path.to_str().expect("utf-8 path");
    let warning = format!(
        "{path}:6:5: warning: loop #2 of @held is not checkpointed: it carries an array from one \
         iteration to the next that it neither made afresh in the iteration nor kept as it is; its \
         records grow with its iterations\n"
    );
    let call = [
        "-f",
        "held",
        "--args",
        "0.5, 1000000000",
        "--tape-limit",
        "1K",
    ];
    for (backend, kib) in [("interp", LIMIT_KIB), ("jit", 2_000_000)] {
        let grad = [&["grad", path, "--backend", backend][..], &call[..]].concat();
        let o = irad_limited(kib, &grad);
        fails_cleanly(&o, &["out of memory", "held.irad:7:13"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.starts_with(&warning), "{backend}: {err}");
        assert_eq!(err.matches("warning:").count(), 1, "{backend}: {err}");
        let o = irad_limited(kib, &[&grad[..], &["--json"]].concat());
        fails_cleanly(&o, &["out of memory"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!err.contains("warning"), "{backend} --json: {err}");
    }
    // Fewer iterations: `bench` times the primal first.
    let mut bench = [&["bench", path, "--min-time", "0.1"][..], &call[..]].concat();
    bench[7] = "0.5, 100000000";
    let o = irad_limited(2_000_000, &bench);
    fails_cleanly(&o, &["out of memory"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with(&warning), "bench: {err}");
}

/// The loop of issue 27, finding 6 (`tests/c/temporaries.irad`, which
/// says what it computes; `tests/emit.rs` runs it as an object too).
const TEMPORARIES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/temporaries.irad");

/// 1.4 GB of address space: the JIT reserves 1 GiB for its code up front;
/// the 20 000 temporaries of one run add up to 1.6 GB (3.2 GB with forward
/// mode's tangents), which compiled code used to keep until the run ended.
const TEMPORARIES_KIB: u64 = 1_400_000;

/// Runs each mode on the temporaries' loop under [`TEMPORARIES_KIB`] with
/// `backend`, checking the exact output.
fn temporaries_in_bounded_memory(backend: &str) {
    let path = TEMPORARIES;
    let grad = |v: &str, d: &str| format!("value: {v}\ngradient:\n  %x: {d}\n  %n: -\n");
    let cases: [(&[&str], &str, String); 5] = [
        (&["run"], "f", "299985000.0\n".to_string()),
        (
            &["grad", "--mode", "fwd"],
            "f",
            grad("299985000.0", "199990000.0"),
        ),
        (
            &["grad", "--mode", "fwd", "--sparse"],
            "f",
            grad("299985000.0", "199990000.0"),
        ),
        (&["grad", "--mode", "rev"], "r", grad("30000.0", "20000.0")),
        (&["grad", "--mode", "fwd"], "r", grad("30000.0", "20000.0")),
    ];
    for (cmd, func, want) in cases {
        let mut args = cmd.to_vec();
        args.extend([
            path,
            "-f",
            func,
            "--args",
            "1.5, 20000",
            "--backend",
            backend,
        ]);
        assert_eq!(bounded_stdout(&args), want, "{args:?}");
    }
}

/// `irad ARGS` under [`TEMPORARIES_KIB`]: its standard output, after
/// checking that it succeeded.
fn bounded_stdout(args: &[&str]) -> String {
    let o = irad_limited(TEMPORARIES_KIB, args);
    assert!(
        o.status.success(),
        "{args:?}: {:?}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn temporaries_of_a_loop_run_in_bounded_memory_in_the_jit() {
    temporaries_in_bounded_memory("jit");
}

#[test]
fn temporaries_of_a_loop_run_in_bounded_memory_in_the_interpreter() {
    temporaries_in_bounded_memory("interp");
}

/// A buffer remade every iteration from the one before and carried to the
/// next through the loop's phi (`long` in `tests/free_arrays/loops.irad`):
/// 20 000 copies of 10 000 elements, 1.6 GB made, run under
/// [`TEMPORARIES_KIB`] in the JIT and the interpreter with the same value.
/// Compiled code frees each once the header's phi holds the next
/// (docs/codegen.md, "Freeing arrays"); before, the JIT ran out of memory.
#[test]
fn arrays_carried_through_a_loop_phi_run_in_bounded_memory() {
    long_runs_agree_bounded(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/free_arrays/loops.irad"
    ));
}

/// `long` of `path` on 20 000 and 10 000 runs under [`TEMPORARIES_KIB`] in
/// the JIT and the interpreter, with the same value.
fn long_runs_agree_bounded(path: &str) {
    let mut outs = Vec::new();
    for backend in ["jit", "interp"] {
        let args = [
            "run",
            path,
            "-f",
            "long",
            "--args",
            "20000, 10000",
            "--backend",
            backend,
        ];
        outs.push(bounded_stdout(&args));
    }
    assert_eq!(outs[0], outs[1]);
    assert!(!outs[0].trim().is_empty(), "a value");
}

/// A loop whose state is replaced by what a call returns (`long` in
/// `tests/free_arrays/calls.irad`, the call recursive so that it stays a
/// call): 20 000 copies of 10 000 elements, 1.6 GB made, run under
/// [`TEMPORARIES_KIB`] in the JIT and the interpreter with the same value.
/// The callee returns a fresh array, so the caller's call is a site whose
/// arrays the header's phi owns (docs/codegen.md, "Freeing arrays");
/// before, the JIT kept them all and ran out of memory.
#[test]
fn arrays_returned_by_calls_run_in_bounded_memory() {
    long_runs_agree_bounded(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/free_arrays/calls.irad"
    ));
}

/// The gradient of a loop keeping its best iterate by reference
/// (`best_long` of `tests/free_arrays/sharing.irad`: 10 000 elements, 4 000
/// steps) under `--tape-limit 1M`, in the JIT under [`TEMPORARIES_KIB`],
/// with the gradient it has under `64M`. Each checkpoint's replay used to keep the arrays its splits
/// handed on and the snapshot's arrays it popped (about 1.9 GB at 4 000
/// steps of 20 000 elements, docs/performance.md), and ran out of memory
/// here (session 38's build, in release: within 0.6 s); the splits now hand on copies their sharing webs own
/// (docs/codegen.md, "Sharing webs").
#[test]
fn replays_of_a_best_iterate_kept_by_reference_run_in_bounded_memory() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/free_arrays/sharing.irad"
    );
    let mut outs = Vec::new();
    for limit in ["1M", "64M"] {
        let args = [
            "grad",
            path,
            "-f",
            "best_long",
            "--args",
            "0.5, 10000, 4000",
            "--tape-limit",
            limit,
        ];
        let o = irad_limited(TEMPORARIES_KIB, &args);
        assert!(
            o.status.success(),
            "{args:?}: {:?}\n{}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
        outs.push(String::from_utf8_lossy(&o.stdout).into_owned());
    }
    assert_eq!(outs[0], outs[1]);
    assert!(outs[0].contains("%s: 979.43"), "{}", outs[0]);
}
