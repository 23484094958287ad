//! The per-call overhead of compiled code through the facade (issue 26's
//! target: a typed gradient call of a small function under 100 ns): f(x, y)
//! = x * y + sin(x) and its reverse-mode gradient, called through the boxed
//! path (`CompiledGradient::run_primal` / `run`, `Val`s in and out) and the
//! typed one (`value` / `gradient_into`, f64s in, the gradient written into
//! the caller's variables), beside the same function in Rust. Each figure
//! is the best of 50 batches of 20 000 calls (after a warm-up batch), in ns
//! per call; the typed gradient is also timed from 2 threads sharing the
//! gradient (the time per call per thread). Prints one line per figure;
//! the results are in docs/performance.md. Run: `cargo bench --bench
//! call_overhead` (the built binary takes `--bench`, or `typed` for the
//! typed gradient's figure alone, for a profiler; without either it does
//! nothing, as under `cargo test --all-targets`).

use irad::{ArgRef, GradOut, GradRequest, RunOptions, Val};
use std::hint::black_box;
use std::time::Instant;

const BATCH: u32 = 20_000;
const BATCHES: usize = 50;

/// The best time per call, in ns, of `BATCHES` batches of `call(i)`.
fn time(mut call: impl FnMut(u32) -> f64) -> f64 {
    let mut sink = 0.0;
    for i in 0..BATCH {
        sink += call(i);
    }
    let mut best = f64::INFINITY;
    for _ in 0..BATCHES {
        let t = Instant::now();
        for i in 0..BATCH {
            sink += call(i);
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    black_box(sink);
    best / f64::from(BATCH) * 1e9
}

/// The argument `x` of call `i`.
fn x_of(i: u32) -> f64 {
    0.5 + f64::from(i % 1000) * 1e-3
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // `cargo test --all-targets` runs bench binaries without `--bench`:
    // nothing to time in a debug build.
    let flags: Vec<String> = std::env::args().collect();
    if !flags.iter().any(|a| a == "--bench" || a == "typed") {
        return Ok(());
    }
    let src = irad::Source::new("f.irad", "fn f(x: f64, y: f64) -> f64 { x * y + sin(x) }");
    let m = irad::load(&src)?;
    let f = irad::find_function(&src, &m, "f")?;
    let registry = irad::rules::Registry::new();
    let args = [Val::F64(0.5), Val::F64(2.0)];
    let g = irad::jit_gradient(&m, &registry, &GradRequest::new(f, &args))
        .map_err(|e| irad::grad_error(&src, e))?;
    g.compile()?;
    let opts = RunOptions::default();
    let y = 2.0;

    let typed = |i: u32| {
        let (mut dx, mut dy) = (0.0, 0.0);
        let v = g
            .gradient_into(
                &[ArgRef::F64(x_of(i)), ArgRef::F64(y)],
                &mut [GradOut::F64(&mut dx), GradOut::F64(&mut dy)],
            )
            .unwrap_or(f64::NAN);
        v + dx + dy
    };
    // `call_overhead typed`: that figure alone (for a profiler).
    if flags.iter().any(|a| a == "typed") {
        let ns: f64 = (0..10).map(|_| time(typed)).fold(f64::INFINITY, f64::min);
        println!("gradient, typed (gradient_into) {ns:6.1}");
        return Ok(());
    }

    let rust = time(|i| {
        let x = black_box(x_of(i));
        x * black_box(y) + x.sin()
    });
    let boxed_primal = time(
        |i| match g.run_primal(&[Val::F64(x_of(i)), Val::F64(y)], &opts) {
            Ok(Val::F64(v)) => v,
            _ => f64::NAN,
        },
    );
    let typed_primal = time(|i| {
        g.value(&[ArgRef::F64(x_of(i)), ArgRef::F64(y)])
            .unwrap_or(f64::NAN)
    });
    let boxed_grad = time(|i| match g.run(&[Val::F64(x_of(i)), Val::F64(y)], &opts) {
        Ok(r) => match (&r.value, &r.gradient[0]) {
            (Val::F64(v), Some(Val::F64(d))) => v + d,
            _ => f64::NAN,
        },
        Err(_) => f64::NAN,
    });
    let typed_grad = time(typed);
    let threads = 2;
    let per_thread: Vec<f64> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads).map(|_| s.spawn(|| time(typed))).collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or(f64::NAN))
            .collect()
    });
    println!("f(x, y) = x * y + sin(x), ns per call (best of {BATCHES} x {BATCH} calls)");
    println!("rust                      {rust:8.1}");
    println!("primal, boxed (run_primal) {boxed_primal:7.1}");
    println!("primal, typed (value)      {typed_primal:7.1}");
    println!("gradient, boxed (run)      {boxed_grad:7.1}");
    println!("gradient, typed (gradient_into) {typed_grad:6.1}");
    for (t, ns) in per_thread.iter().enumerate() {
        println!("gradient, typed, thread {t} of {threads} {ns:6.1}");
    }
    Ok(())
}
