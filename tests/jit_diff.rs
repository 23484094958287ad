//! Differential tests: compiled code (`irad_codegen::Jit`) agrees with the
//! reference interpreter bit for bit (SYNTAX.md §1, "Semantics that every
//! backend shares"). Values are equal when f64s have the same bits (any NaN
//! equals any NaN), arrays are equal element by element, tuples and duals part
//! by part and function values by handle; argument arrays written in place
//! must be equal afterwards too, and run-time errors equal in location,
//! message and call trace.
//!
//! - Every corpus program (surface and IR twin) and case: the primal
//!   (`run_with`), reverse mode (`grad_reverse`) and forward mode at widths 1,
//!   3 and 8 and sparse (`grad_forward`), each with the interpreter and with
//!   the JIT.
//! - Every `# run:` and `# run-error:` line of the filetests and examples, on
//!   the module as written and normalised, and `@f.rev` of the `# test:
//!   reverse` files; on a thread with a 1 GiB stack, as some recurse to the
//!   default call-depth limit.
//! - A table of programs that raise every run-time error kind (also through
//!   the `irad run` binary with either backend).
//! - Semantic edge cases: min/max, rounding, pow, integer division and
//!   wrapping, conversions, bool and i64 arrays, copies, aliasing of results
//!   and arguments, function values, recursion to depth 10 000 on a test
//!   thread's stack.
//! - The bulk array primitives on many shapes, with one array as several
//!   operands, and every failed shape check.
//! - Vectorised map and reduction loops on every length, start, special
//!   value and aliasing of arguments, and which loops are vectorised.
//! - Fused loops on every length, with a failing access in either loop and
//!   arrays passed twice, fusion on and off, and which loops are fused.
//! - One JIT running the two sweeps of reverse mode as separate calls: the
//!   tape carries over between them and is empty after the pullback.

use irad::codegen::Jit;
use irad::ir::interp::{ArrayData, ArrayRef, Interpreter, RunError, RunOptions, Val};
use irad::ir::text::num::format_f64;
use irad::ir::text::{parse_args, parse_module, parse_value};
use irad::ir::{FuncId, FuncRef, Module, Prim, Type};
use irad::passes::forward::grad::{GradOptions, Gradient};
use irad::passes::reverse::Reverse;
use irad::{Backend, Error, Source};
use serde_json::Value as J;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;

#[path = "jit_diff/bulk.rs"]
mod bulk;
#[path = "jit_diff/corpus.rs"]
mod corpus;
#[path = "jit_diff/errors.rs"]
mod errors;
#[path = "jit_diff/filetests.rs"]
mod filetests;
#[path = "jit_diff/fuse.rs"]
mod fuse;
#[path = "jit_diff/semantics.rs"]
mod semantics;
#[path = "jit_diff/tape.rs"]
mod tape;
#[path = "jit_diff/vector.rs"]
mod vector;

// ---------------------------------------------------------------------------
// Comparing values and outcomes

/// Bit-for-bit equality of values (any NaN equals any NaN; `-0.0` differs
/// from `0.0`); arrays must also have the same element type.
fn identical(a: &Val, b: &Val) -> bool {
    fn bits(x: f64, y: f64) -> bool {
        x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
    }
    match (a, b) {
        (Val::F64(x), Val::F64(y)) => bits(*x, *y),
        (Val::I64(x), Val::I64(y)) => x == y,
        (Val::Bool(x), Val::Bool(y)) => x == y,
        (Val::Unit, Val::Unit) => true,
        (Val::Func(x), Val::Func(y)) => x == y,
        (Val::Tuple(xs), Val::Tuple(ys)) | (Val::Dual(xs), Val::Dual(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys.iter()).all(|(x, y)| identical(x, y))
        }
        (Val::Array(x), Val::Array(y)) => match (&*x.0.borrow(), &*y.0.borrow()) {
            (ArrayData::F64(p), ArrayData::F64(q)) => {
                p.len() == q.len() && p.iter().zip(q).all(|(x, y)| bits(*x, *y))
            }
            (ArrayData::I64(p), ArrayData::I64(q)) => p == q,
            (ArrayData::Bool(p), ArrayData::Bool(q)) => p == q,
            _ => false,
        },
        _ => false,
    }
}

/// A deep copy: arrays get new buffers.
fn fresh(v: &Val) -> Val {
    match v {
        Val::Array(a) => Val::Array(ArrayRef::new(a.0.borrow().clone())),
        Val::Tuple(vs) => Val::Tuple(vs.iter().map(fresh).collect()),
        Val::Dual(vs) => Val::Dual(vs.iter().map(fresh).collect()),
        other => other.clone(),
    }
}

/// Deep copies of arguments.
fn copies(args: &[Val]) -> Vec<Val> {
    args.iter().map(fresh).collect()
}

/// A value in IR literal syntax.
fn show(v: &Val, m: &Module) -> String {
    v.display(m)
}

/// A result, or an error with the length of its trace.
fn show_outcome(r: &Result<Val, RunError>, m: &Module) -> String {
    match r {
        Ok(v) => show(v, m),
        Err(e) => format!("error {e} (trace of {} calls)", e.trace.len()),
    }
}

/// Asserts that two run-time errors are equal, describing the first
/// difference (traces can hold 100 000 call sites).
fn assert_same_error(what: &str, want: &RunError, got: &RunError) {
    assert_eq!(want.msg, got.msg, "{what}: messages differ");
    assert_eq!(want.loc, got.loc, "{what}: locations differ ({})", want.msg);
    assert_eq!(
        want.trace.len(),
        got.trace.len(),
        "{what}: trace lengths differ ({})",
        want.msg
    );
    if let Some(i) = (0..want.trace.len()).find(|&i| want.trace[i] != got.trace[i]) {
        panic!(
            "{what}: call site {i} of the trace differs: interpreter {:?}, JIT {:?}",
            want.trace[i], got.trace[i]
        );
    }
}

/// Asserts that the interpreter's outcome `want` and the JIT's `got` agree.
fn assert_same_outcome(
    what: &str,
    m: &Module,
    want: &Result<Val, RunError>,
    got: &Result<Val, RunError>,
) {
    match (want, got) {
        (Ok(a), Ok(b)) => assert!(
            identical(a, b),
            "{what}: interpreter {}, JIT {}",
            show(a, m),
            show(b, m)
        ),
        (Err(a), Err(b)) => assert_same_error(what, a, b),
        _ => panic!(
            "{what}: interpreter {}, JIT {}",
            show_outcome(want, m),
            show_outcome(got, m)
        ),
    }
}

/// Asserts that the arguments the interpreter and the JIT ran on (fresh
/// copies of the same values) are equal afterwards.
fn assert_same_args(what: &str, m: &Module, want: &[Val], got: &[Val]) {
    assert_eq!(want.len(), got.len());
    for (i, (a, b)) in want.iter().zip(got).enumerate() {
        assert!(
            identical(a, b),
            "{what}: argument {i} afterwards: interpreter {}, JIT {}",
            show(a, m),
            show(b, m)
        );
    }
}

// ---------------------------------------------------------------------------
// Running with both backends

/// The source errors of hand-made modules name.
fn test_source() -> Source {
    Source {
        name: "jit_diff.ir".into(),
        text: String::new(),
    }
}

/// Runs `f` through the facade's `run_with` and unwraps the run-time error.
fn run_on(
    backend: Backend,
    m: &Module,
    f: FuncId,
    args: &[Val],
    opts: &RunOptions,
) -> Result<Val, RunError> {
    irad::run(
        &test_source(),
        m,
        &irad::RunRequest {
            opts: opts.clone(),
            backend,
            ..irad::RunRequest::new(f, args)
        },
    )
    .map_err(|e| match e {
        Error::Run { err, .. } => *err,
        other => panic!("{backend:?}: not a run-time error: {other}"),
    })
}

/// Runs `f` on fresh copies of `args` with each backend, asserts that the
/// results (or errors) and the arguments afterwards agree, and returns the
/// interpreter's outcome.
fn check_run(
    what: &str,
    m: &Module,
    f: FuncId,
    args: &[Val],
    opts: &RunOptions,
) -> Result<Val, RunError> {
    let interp_args = copies(args);
    let jit_args = copies(args);
    let want = run_on(Backend::Interp, m, f, &interp_args, opts);
    let got = run_on(Backend::Jit, m, f, &jit_args, opts);
    assert_same_outcome(what, m, &want, &got);
    assert_same_args(what, m, &interp_args, &jit_args);
    want
}

/// How a gradient is computed: reverse mode, or forward mode with some lanes
/// (a batch width, or sparse mode).
#[derive(Copy, Clone, Debug)]
enum Mode {
    Reverse,
    Forward(irad::ir::Lanes),
}

/// Forward mode at dense batch width `n` (not 0).
fn fwd(n: u32) -> Mode {
    Mode::Forward(irad::ir::Lanes::dense(n).expect("a dense width"))
}

/// Value and gradient through the facade with `backend`.
fn grad_on(
    backend: Backend,
    mode: Mode,
    src: &Source,
    m: &Module,
    f: FuncId,
    args: &[Val],
) -> Result<(Gradient, Module), Error> {
    let registry = irad::rules::Registry::new();
    let opts = GradOptions {
        tape_limit: None,
        checkpoints: Default::default(),
        exec: backend.exec(),
        lanes: match mode {
            Mode::Reverse => irad::ir::Lanes::ONE,
            Mode::Forward(lanes) => lanes,
        },
        wrt: None,
        run: RunOptions::default(),
        activity: true,
        ..GradOptions::default()
    };
    match mode {
        Mode::Reverse => irad::grad_reverse(src, m, f, args, &registry, &opts),
        Mode::Forward(_) => irad::grad_forward(src, m, f, args, &registry, &opts),
    }
}

/// Computes the gradient of `f` at `args` in `mode` with each backend and
/// asserts that values, gradients and errors agree and that the arguments
/// are untouched. Returns whether it succeeded.
fn check_grad(what: &str, mode: Mode, src: &Source, m: &Module, f: FuncId, args: &[Val]) -> bool {
    let what = format!("{what} {mode:?}");
    let interp_args = copies(args);
    let jit_args = copies(args);
    let want = grad_on(Backend::Interp, mode, src, m, f, &interp_args);
    let got = grad_on(Backend::Jit, mode, src, m, f, &jit_args);
    assert_same_args(&what, m, &interp_args, &jit_args);
    assert_same_args(&what, m, args, &jit_args);
    match (want, got) {
        (Ok((a, ma)), Ok((b, _))) => {
            assert!(
                identical(&a.value, &b.value),
                "{what}: value: interpreter {}, JIT {}",
                show(&a.value, &ma),
                show(&b.value, &ma)
            );
            assert_eq!(a.passes, b.passes, "{what}: passes");
            assert_eq!(
                a.gradient.len(),
                b.gradient.len(),
                "{what}: gradient length"
            );
            for (i, (x, y)) in a.gradient.iter().zip(&b.gradient).enumerate() {
                let same = match (x, y) {
                    (Some(x), Some(y)) => identical(x, y),
                    (None, None) => true,
                    _ => false,
                };
                let show_opt = |v: &Option<Val>| v.as_ref().map(|v| show(v, &ma));
                assert!(
                    same,
                    "{what}: gradient {i}: interpreter {:?}, JIT {:?}",
                    show_opt(x),
                    show_opt(y)
                );
            }
            true
        }
        (Err(Error::Run { err: a, .. }), Err(Error::Run { err: b, .. })) => {
            assert_same_error(&what, &a, &b);
            false
        }
        (Err(a), Err(b)) => {
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "{what}: errors differ");
            false
        }
        (a, b) => panic!(
            "{what}: interpreter {:?}, JIT {:?}",
            a.map(|(g, _)| g.value),
            b.map(|(g, _)| g.value)
        ),
    }
}

/// Runs `body` on a thread with a 1 GiB stack, on which the JIT's default
/// stack budget (256 MiB) fits, so compiled code runs in place rather than
/// on a stack of its own.
fn on_big_stack(body: impl FnOnce() + Send + 'static) {
    const STACK: usize = 1 << 30;
    let handle = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(body)
        .expect("a thread with a 1 GiB stack (reserved, not committed)");
    if let Err(panic) = handle.join() {
        std::panic::resume_unwind(panic);
    }
}

/// The root of the `irad` crate.
fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Parses and verifies test IR.
fn ir(text: &str) -> Module {
    let m = parse_module(text).unwrap_or_else(|e| panic!("test IR parses: {e}\n{text}"));
    if let Err(errs) = irad::ir::verify::verify_module(&m) {
        let msgs: Vec<String> = errs.iter().map(ToString::to_string).collect();
        panic!("test IR verifies:\n{}\n{text}", msgs.join("\n"));
    }
    m
}

/// The function called `name`.
fn func(m: &Module, name: &str) -> FuncId {
    m.by_name(name)
        .unwrap_or_else(|| panic!("no function @{name}"))
}

/// Arguments of `f` from `--args` text.
fn args_of(m: &Module, f: FuncId, text: &str) -> Vec<Val> {
    parse_args(text, &m[f].param_types(), m)
        .unwrap_or_else(|e| panic!("arguments `{text}` of @{}: {e}", m[f].name))
}

/// A new `[f64]` array.
fn f64s(xs: &[f64]) -> Val {
    Val::Array(ArrayRef::new(ArrayData::F64(xs.to_vec())))
}

/// Runs `f` in a fresh interpreter and a fresh JIT, on copies of `args`.
fn run_both_direct(
    m: &Module,
    f: FuncId,
    args: &[Val],
    opts: &RunOptions,
) -> (Result<Val, RunError>, Result<Val, RunError>) {
    let want = irad::ir::interp::run(m, f, &copies(args), opts);
    let got = Jit::new(m).expect("a JIT").run(f, &copies(args), opts);
    (want, got)
}

/// The array a value refers to.
fn array_ref(v: &Val) -> &ArrayRef {
    match v {
        Val::Array(a) => a,
        other => panic!("not an array: {other:?}"),
    }
}

/// Element `k` of a tuple.
fn field(v: &Val, k: usize) -> &Val {
    match v {
        Val::Tuple(vs) => &vs[k],
        other => panic!("not a tuple: {other:?}"),
    }
}
