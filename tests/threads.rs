//! Compiled code shared by threads: `Compiled`, `CompiledGradient` and the
//! codegen's `SharedJit` are `Send + Sync`, and one compiled gradient called
//! from 8 threads at once (several hundred calls each, with varying
//! arguments) gives every result bit for bit as the same calls made one
//! after the other do, including programs whose reverse sweep uses tapes
//! (a loop over an array), whose rules are derived at run time (function
//! values, first met by several threads at once), and calls that fail;
//! the same for a `Compiled` module. Typed calls match the boxed ones from
//! every thread, allocate nothing once warm, and are retried on a stack of
//! their own when the thread's runs out.

use irad::ir::interp::{ArrayData, RunOptions, Val};
use irad::{ArgRef, CompiledGradient, GradOut, GradRequest, Mode};

fn is_send_sync<T: Send + Sync>() {}

/// The global allocator, counting the allocations of each thread.
struct Counting;

thread_local! {
    static ALLOCATIONS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the count is a thread-local
// `Cell` without a destructor.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { std::alloc::System.alloc(layout) }
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: as above.
        unsafe { std::alloc::System.dealloc(p, layout) }
    }
    unsafe fn realloc(&self, p: *mut u8, layout: std::alloc::Layout, size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: as above.
        unsafe { std::alloc::System.realloc(p, layout, size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn allocations() -> usize {
    ALLOCATIONS.with(std::cell::Cell::get)
}

#[test]
fn compiled_code_is_send_and_sync() {
    is_send_sync::<irad::Compiled>();
    is_send_sync::<irad::CompiledGradient>();
    is_send_sync::<irad::codegen::SharedJit>();
    is_send_sync::<irad::codegen::Entry>();
}

const THREADS: usize = 8;
const CALLS: usize = 300;

/// A sum over an array in a loop: the reverse sweep pushes and pops tapes.
const LOOP: &str = "
fn loss(x: [f64], c: f64) -> f64 {
    let mut s = 0.0;
    for i in 0..len(x) {
        s = s + sin(x[i]) * x[i] * c;
    }
    s
}
";

/// Function values: the rules of `square` and `sin` are derived while the
/// code runs.
const DYNAMIC: &str = "
fn square(x: f64) -> f64 { x * x }
fn apply(g: fn(f64) -> f64, x: f64) -> f64 { g(x) + g(2.0 * x) }
fn top(x: f64, y: f64) -> f64 { apply(square, x) * y + apply(sin, y) }
";

/// An index that may be out of range.
const INDEX: &str = "fn at(x: [f64], i: i64) -> f64 { x[i] * x[0] + x[1] }";

/// The arguments of call `k` of thread `t`.
type MakeArgs = fn(usize, usize) -> Vec<Val>;

fn loop_args(t: usize, k: usize) -> Vec<Val> {
    let n = 1 + (t * 7 + k) % 9;
    let xs = (0..n)
        .map(|i| ((t * 31 + k * 17 + i * 5) % 97) as f64 / 13.0 - 3.0)
        .collect();
    vec![Val::f64_array(xs), Val::F64(0.5 + (k % 11) as f64 / 7.0)]
}

fn dynamic_args(t: usize, k: usize) -> Vec<Val> {
    vec![
        Val::F64((t as f64) * 0.37 - (k as f64) * 0.011),
        Val::F64(1.0 + (k % 13) as f64 * 0.25),
    ]
}

fn index_args(t: usize, k: usize) -> Vec<Val> {
    // Every fifth call reads past the end.
    let i = if (t + k).is_multiple_of(5) {
        3
    } else {
        (t + k) % 3
    };
    vec![
        Val::f64_array(vec![1.5 + t as f64, -0.25 * k as f64, 3.0]),
        Val::I64(i as i64),
    ]
}

/// A result as bits: the value and the flattened gradient, or the error.
fn outcome(g: &CompiledGradient, args: &[Val]) -> Result<Vec<u64>, String> {
    let r = g
        .run(args, &RunOptions::default())
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    flat(&r.value, &mut out);
    for d in r.gradient.iter().flatten() {
        flat(d, &mut out);
    }
    Ok(out)
}

fn flat(v: &Val, out: &mut Vec<u64>) {
    match v {
        Val::F64(x) => out.push(x.to_bits()),
        Val::Array(a) => match &*a.0.borrow() {
            ArrayData::F64(xs) => out.extend(xs.iter().map(|x| x.to_bits())),
            other => panic!("not an f64 array: {other:?}"),
        },
        Val::Tuple(vs) => vs.iter().for_each(|v| flat(v, out)),
        other => panic!("not numeric: {other:?}"),
    }
}

fn gradient(src: &str, name: &str, mode: Mode, args: &[Val]) -> CompiledGradient {
    let m = irad::ir::surface::compile(src).expect("the test program compiles");
    let f = m.by_name(name).expect("the function");
    let registry = irad::rules::Registry::new();
    let req = GradRequest {
        mode,
        ..GradRequest::new(f, args)
    };
    irad::jit_gradient(&m, &registry, &req).expect("the gradient derives")
}

/// Every call of every thread, made one after the other on a gradient of
/// its own, then all at once on one fresh gradient (nothing compiled
/// before the threads start, which start together): the same results, bit
/// for bit. Returns how many functions the shared gradient's module had
/// before and after.
fn agree_across_threads(src: &str, name: &str, mode: Mode, args: MakeArgs) -> (usize, usize) {
    let serial = gradient(src, name, mode, &args(0, 0));
    let want: Vec<Vec<Result<Vec<u64>, String>>> = (0..THREADS)
        .map(|t| (0..CALLS).map(|k| outcome(&serial, &args(t, k))).collect())
        .collect();
    let shared = gradient(src, name, mode, &args(0, 0));
    let before = shared.module().len();
    let start = std::sync::Barrier::new(THREADS);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (shared, want, start) = (&shared, &want[t], &start);
                s.spawn(move || {
                    start.wait();
                    for (k, want) in want.iter().enumerate() {
                        let got = outcome(shared, &args(t, k));
                        assert_eq!(&got, want, "thread {t}, call {k}");
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("a thread failed");
        }
    });
    (before, shared.module().len())
}

#[test]
fn a_loop_over_an_array_from_eight_threads() {
    agree_across_threads(LOOP, "loss", Mode::Reverse, loop_args);
}

#[test]
fn forward_mode_from_eight_threads() {
    agree_across_threads(DYNAMIC, "top", Mode::Forward, dynamic_args);
}

#[test]
fn rules_derived_at_run_time_from_eight_threads() {
    let (before, after) = agree_across_threads(DYNAMIC, "top", Mode::Reverse, dynamic_args);
    assert!(after > before, "no rule was derived at run time");
}

#[test]
fn errors_on_some_threads_leave_the_others_alone() {
    // Some calls fail (and leave tapes half full); the others, on the same
    // threads and on others, still get the serial results.
    let g = gradient(INDEX, "at", Mode::Reverse, &index_args(0, 1));
    let err = outcome(&g, &index_args(0, 0)).expect_err("index 3 of 3");
    assert!(err.contains("index 3 out of bounds"), "{err}");
    agree_across_threads(INDEX, "at", Mode::Reverse, index_args);
}

#[test]
fn typed_calls_from_eight_threads_match_the_boxed_ones() {
    let g = gradient(LOOP, "loss", Mode::Reverse, &loop_args(0, 0));
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let g = &g;
            s.spawn(move || {
                let mut dx = Vec::new();
                for k in 0..CALLS {
                    let args = loop_args(t, k);
                    let want = outcome(g, &args).expect("runs");
                    let (Val::Array(a), Val::F64(c)) = (&args[0], &args[1]) else {
                        unreachable!()
                    };
                    let ArrayData::F64(xs) = a.0.borrow().clone() else {
                        unreachable!()
                    };
                    dx.resize(xs.len(), f64::NAN);
                    let mut dc = f64::NAN;
                    let y = g
                        .gradient_into(
                            &[ArgRef::Slice(&xs), ArgRef::F64(*c)],
                            &mut [GradOut::Slice(&mut dx), GradOut::F64(&mut dc)],
                        )
                        .expect("runs");
                    let mut got = vec![y.to_bits()];
                    got.extend(dx.iter().map(|x| x.to_bits()));
                    got.push(dc.to_bits());
                    assert_eq!(got, want, "thread {t}, call {k}");
                }
            });
        }
    });
}

#[test]
fn typed_calls_allocate_nothing_once_warm() {
    // f(x, y) = x * y + sin(x), and a loop over an array (tapes).
    let f = gradient(
        "fn f(x: f64, y: f64) -> f64 { x * y + sin(x) }",
        "f",
        Mode::Reverse,
        &[Val::F64(0.0), Val::F64(0.0)],
    );
    let l = gradient(LOOP, "loss", Mode::Reverse, &loop_args(0, 0));
    let xs: Vec<f64> = (0..64).map(|i| f64::from(i) * 0.1).collect();
    let (mut dx, mut dy, mut dxs) = (0.0, 0.0, vec![0.0; xs.len()]);
    let mut calls = |k: f64| {
        let a = f
            .gradient_into(
                &[ArgRef::F64(k), ArgRef::F64(2.0)],
                &mut [GradOut::F64(&mut dx), GradOut::F64(&mut dy)],
            )
            .expect("runs");
        let b = l
            .gradient_into(
                &[ArgRef::Slice(&xs), ArgRef::F64(k)],
                &mut [GradOut::Slice(&mut dxs), GradOut::F64(&mut dy)],
            )
            .expect("runs");
        let c = f.value(&[ArgRef::F64(k), ArgRef::F64(2.0)]).expect("runs");
        a + b + c
    };
    calls(0.5);
    let before = allocations();
    let mut sum = 0.0;
    for k in 0..200 {
        sum += calls(f64::from(k) * 0.01);
    }
    assert_eq!(allocations() - before, 0, "typed calls allocated");
    assert!(sum.is_finite());
    // The boxed path does allocate: the counter counts.
    let before = allocations();
    f.run(&[Val::F64(1.0), Val::F64(2.0)], &RunOptions::default())
        .expect("runs");
    assert!(allocations() > before);
}

#[test]
fn typed_calls_that_outgrow_a_small_stack_are_retried_on_their_own() {
    // 20 000 nested calls do not fit in what is left of a 2 MiB thread
    // stack: the typed call first runs in place, runs out of stack, and is
    // run again on a stack of its own, with the boxed path's results.
    let src =
        "fn down(x: f64, n: i64) -> f64 { if n == 0 { x } else { sin(down(x, n - 1)) * 0.5 + x } }";
    let n = 20_000;
    let g = gradient(src, "down", Mode::Reverse, &[Val::F64(0.3), Val::I64(n)]);
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn_scoped_test(|| {
            let want = outcome(&g, &[Val::F64(0.3), Val::I64(n)]).expect("runs");
            for _ in 0..3 {
                let mut dx = f64::NAN;
                let y = g
                    .gradient_into(
                        &[ArgRef::F64(0.3), ArgRef::I64(n)],
                        &mut [GradOut::F64(&mut dx), GradOut::Skip],
                    )
                    .expect("runs");
                assert_eq!(vec![y.to_bits(), dx.to_bits()], want);
                let v = g.value(&[ArgRef::F64(0.3), ArgRef::I64(n)]).expect("runs");
                assert_eq!(v.to_bits(), want[0]);
            }
            // Deeper than the call-depth limit: the error, not a retry loop.
            let err = g
                .gradient_into(
                    &[ArgRef::F64(0.3), ArgRef::I64(200_000)],
                    &mut [GradOut::Skip, GradOut::Skip],
                )
                .expect_err("too deep");
            assert!(err.msg.contains("depth"), "{err}");
        });
}

/// Runs `f` on a thread built by `self` and waits for it.
trait SpawnScopedTest {
    fn spawn_scoped_test(self, f: impl FnOnce() + Send);
}

impl SpawnScopedTest for std::thread::Builder {
    fn spawn_scoped_test(self, f: impl FnOnce() + Send) {
        std::thread::scope(|s| {
            self.spawn_scoped(s, f)
                .expect("a thread")
                .join()
                .expect("the thread's checks pass");
        });
    }
}

#[test]
fn a_compiled_module_from_eight_threads() {
    // `Compiled::call` of `@top.rev` (rules of function values derived at
    // run time) from 8 threads at once, against the same calls in turn.
    let m = irad::ir::surface::compile(DYNAMIC).expect("compiles");
    let top = m.by_name("top").expect("@top");
    let registry = irad::rules::Registry::new();
    let call = |c: &irad::Compiled, t: usize, k: usize| -> Vec<u64> {
        let rev = c.func("top.rev").expect("@top.rev");
        let mut args = dynamic_args(t, k);
        args.push(Val::F64(1.0));
        let out = c.call(rev, &args, &RunOptions::default()).expect("runs");
        let mut bits = Vec::new();
        flat(&out, &mut bits);
        bits
    };
    let serial = irad::jit_reverse(&m, &[top], &registry).expect("derives");
    let want: Vec<Vec<Vec<u64>>> = (0..THREADS)
        .map(|t| (0..CALLS).map(|k| call(&serial, t, k)).collect())
        .collect();
    let shared = irad::jit_reverse(&m, &[top], &registry).expect("derives");
    std::thread::scope(|s| {
        for (t, want) in want.iter().enumerate() {
            let shared = &shared;
            s.spawn(move || {
                for (k, want) in want.iter().enumerate() {
                    assert_eq!(&call(shared, t, k), want, "thread {t}, call {k}");
                }
            });
        }
    });
}
