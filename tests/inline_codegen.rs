//! Inlining before code generation (docs/codegen.md, "Inlining"; issue 22):
//! `irad dump --after inline` shows which calls code generation inlines
//! (small non-recursive callees, in primal and derived functions alike;
//! never recursion, never a callee too big); errors raised inside inlined
//! code read the same from the interpreter, from the JIT with inlining and
//! from the JIT without it (location, message, call trace), and so does the
//! `irad run` binary's message with either backend.
//!
//! The programs are `tests/filetests/pe/inline_codegen.ir` (whose `run:` and
//! `run-error:` lines `tests/jit_diff.rs` also compares between the
//! backends) and `benches/programs/gmm.irad`.

use irad::codegen::Jit;
use irad::ir::interp::{RunError, RunOptions, Val};
use irad::ir::text::parse_args;
use irad::ir::{FuncId, Module};
use std::process::{Command, Output};

const FILE: &str = "tests/filetests/pe/inline_codegen.ir";

fn irad(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("irad starts")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The text of function `name` in a printed module.
fn func_text<'a>(module: &'a str, name: &str) -> &'a str {
    let head = format!("func @{name}(");
    let start = module
        .find(&head)
        .unwrap_or_else(|| panic!("no @{name} in\n{module}"));
    let rest = &module[start..];
    let end = rest.find("\n}\n").map_or(rest.len(), |e| e + 3);
    &rest[..end]
}

fn load() -> (irad::Source, Module) {
    let src = irad::read_source(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(FILE))
        .expect("the filetest reads");
    let m = irad::load(&src).expect("the filetest loads");
    (src, m)
}

#[test]
fn dump_after_inline_shows_small_callees_inlined_and_recursion_kept() {
    let out = irad(&["dump", FILE, "--after", "inline"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = stdout(&out);
    // The output is IR that verifies.
    let m = irad::ir::text::parse_module(&text).expect("the dump parses");
    irad::ir::verify::verify_module(&m).expect("the dump verifies");
    // Two levels of inlining: @outer -> @mid -> @quot, nothing left to call.
    let outer = func_text(&text, "outer");
    assert!(!outer.contains("invoke"), "{outer}");
    assert!(outer.contains("call idiv("), "{outer}");
    // Callees in a loop, one with several returns (a phi joins them).
    let sum_to = func_text(&text, "sum_to");
    assert!(!sum_to.contains("invoke"), "{sum_to}");
    assert!(sum_to.contains("switch"), "{sum_to}");
    // Recursion is not inlined; the helper it calls is.
    let down = func_text(&text, "down");
    assert!(down.contains("invoke @down("), "{down}");
    assert!(!down.contains("invoke @leaf("), "{down}");
    // @big (42 statements, over the limit of 40) stays a call; the small
    // @wrap around it is inlined.
    let calls_wrap = func_text(&text, "calls_wrap");
    assert!(calls_wrap.contains("invoke @big("), "{calls_wrap}");
    assert!(!calls_wrap.contains("invoke @wrap("), "{calls_wrap}");
    // The callees themselves are still there, unchanged.
    assert!(func_text(&text, "quot").contains("call idiv("));
}

#[test]
fn dump_after_inline_inlines_in_primal_and_derived_functions() {
    // Primal: the loop-free helper called in a loop is inlined, and so is
    // a callee with a loop of its own (its loop now in @norm2).
    let primal = stdout(&irad(&["dump", FILE, "--after", "inline"]));
    assert!(!func_text(&primal, "total").contains("invoke"), "{primal}");
    let norm2 = func_text(&primal, "norm2");
    assert!(!norm2.contains("invoke"), "{primal}");
    assert!(norm2.contains("phi"), "{primal}");
    // Reverse and forward mode: the derived functions call the helper's
    // derived pieces, which code generation inlines too.
    for (mode, caller, callees) in [
        ("rev", "total.rev.fwd", &["sqdiff.rev.fwd"][..]),
        ("rev", "total.rev.back", &["sqdiff.rev.back"][..]),
        ("fwd", "total.fwd", &["sqdiff.fwd"][..]),
    ] {
        let raw = stdout(&irad(&["dump", FILE, "--mode", mode, "-f", "total"]));
        let inlined = stdout(&irad(&[
            "dump", FILE, "--mode", mode, "-f", "total", "--after", "inline",
        ]));
        for callee in callees {
            let call = format!("invoke @{callee}(");
            assert!(func_text(&raw, caller).contains(&call), "{raw}");
            assert!(!func_text(&inlined, caller).contains(&call), "{inlined}");
        }
    }
    // `@total.rev` calls the forward sweep and the pullback: the pullback
    // is not inlined next to the pushes of the forward sweep.
    let rev = stdout(&irad(&[
        "dump", FILE, "--mode", "rev", "-f", "total", "--after", "inline",
    ]));
    assert!(
        func_text(&rev, "total.rev").contains("invoke @total.rev.back("),
        "{rev}"
    );
}

#[test]
fn gradients_through_inlined_pieces_agree_with_the_interpreter() {
    for mode in ["rev", "fwd"] {
        let grad = |backend: &str| {
            let out = irad(&[
                "grad",
                FILE,
                "-f",
                "total",
                "--args",
                "[1.0, 2.5, -4.0], 0.75",
                "--mode",
                mode,
                "--backend",
                backend,
                "--json",
            ]);
            assert_eq!(out.status.code(), Some(0), "{out:?}");
            stdout(&out)
        };
        let (interp, jit) = (grad("interp"), grad("jit"));
        assert_eq!(jit, interp, "{mode}");
        // d/dc sum (x_i - c)^2 = -2 sum (x_i - c) = -2 * (-0.5 - 2.25) = 5.5.
        assert!(interp.contains("5.5"), "{interp}");
    }
}

/// The outcome of `name(args)` of `m` run by the interpreter, the JIT with
/// inlining (the default) and the JIT without it.
fn three_ways(m: &Module, name: &str, args: &str) -> [Result<Val, RunError>; 3] {
    let f: FuncId = m.by_name(name).expect("the function exists");
    let args = parse_args(args, &m[f].param_types(), m).expect("the arguments parse");
    let opts = RunOptions::default();
    let interp = irad::ir::interp::run(m, f, &args, &opts);
    let inlined = Jit::new(m).expect("a JIT").run(f, &args, &opts);
    let mut plain = Jit::new(m).expect("a JIT");
    plain.set_inlining(None);
    let not_inlined = plain.run(f, &args, &opts);
    [interp, inlined, not_inlined]
}

#[test]
fn errors_in_inlined_code_read_as_without_inlining() {
    let (_, m) = load();
    let cases = [
        ("outer", "5, 0", "division by zero", 2),
        (
            "sum_to",
            "[1.0, 2.0, 3.0], 4, 0",
            "index 3 out of bounds",
            1,
        ),
        (
            "sum_to",
            "[1.0, 2.0, 3.0], 2, 2",
            "switch index 2 is out of range",
            1,
        ),
        ("calls_wrap", "2, 0", "remainder by zero", 2),
    ];
    for (name, args, text, trace) in cases {
        let [interp, inlined, plain] = three_ways(&m, name, args);
        let interp = interp.expect_err("the interpreter fails");
        let inlined = inlined.expect_err("the inlined JIT fails");
        let plain = plain.expect_err("the JIT without inlining fails");
        assert!(interp.msg.contains(text), "{name}: {}", interp.msg);
        assert_eq!(interp.trace.len(), trace, "{name}: {:?}", interp.trace);
        for jit in [&inlined, &plain] {
            assert_eq!(jit.loc, interp.loc, "{name}({args})");
            assert_eq!(jit.msg, interp.msg, "{name}({args})");
            assert_eq!(jit.trace, interp.trace, "{name}({args})");
        }
    }
    // The division by zero is located in the callee, two frames down.
    let [interp, ..] = three_ways(&m, "outer", "5, 0");
    let e = interp.expect_err("fails");
    assert_eq!(e.loc.func.as_deref(), Some("quot"));
    assert_eq!(
        e.trace
            .iter()
            .map(|l| l.func.as_deref().unwrap_or(""))
            .collect::<Vec<_>>(),
        ["mid", "outer"]
    );
}

#[test]
fn the_call_depth_limit_counts_inlined_frames() {
    let (_, m) = load();
    let [interp, inlined, plain] = three_ways(&m, "down", "99999");
    let interp = interp.expect_err("the interpreter fails");
    assert!(
        interp.msg.contains("call depth limit of 100000"),
        "{}",
        interp.msg
    );
    for jit in [inlined, plain] {
        let jit = jit.expect_err("the JIT fails");
        assert_eq!(jit.loc, interp.loc);
        assert_eq!(jit.msg, interp.msg);
        assert_eq!(jit.trace, interp.trace);
    }
    let [interp, inlined, _] = three_ways(&m, "down", "99998");
    assert!(matches!(
        (interp, inlined),
        (Ok(Val::I64(99998)), Ok(Val::I64(99998)))
    ));
}

#[test]
fn the_run_binary_prints_the_same_message_with_either_backend() {
    for (name, args) in [("outer", "5, 0"), ("sum_to", "[1.0, 2.0, 3.0], 4, 0")] {
        let run = |backend: &str| {
            irad(&[
                "run",
                FILE,
                "-f",
                name,
                "--args",
                args,
                "--backend",
                backend,
            ])
        };
        let (interp, jit) = (run("interp"), run("jit"));
        assert_eq!(interp.status.code(), Some(1));
        assert_eq!(jit.status.code(), Some(1));
        let msg = String::from_utf8_lossy(&jit.stderr).into_owned();
        assert_eq!(msg, String::from_utf8_lossy(&interp.stderr), "{name}");
        assert!(msg.contains("(in @"), "{msg}");
    }
    // The first line names the callee's statement.
    let out = irad(&[
        "run",
        FILE,
        "-f",
        "outer",
        "--args",
        "5, 0",
        "--backend",
        "jit",
    ]);
    let msg = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        msg.contains(":12:3: error: division by zero (in @quot, block #1, statement 1)"),
        "{msg}"
    );
}
