//! Issue 22's bulk-kernel benchmark: the machine's peak f64 FLOP rate, and
//! the GFLOP/s of irad's bulk kernels (`irad_kernels::bulk`, which the
//! interpreter and compiled code both call) as a fraction of it.
//!
//! - Peak, one core: a loop of independent multiply-adds on registers only,
//!   `acc = acc * m + c` with enough accumulators to cover the latency of
//!   both FMA ports (16 for AVX-512, 12 for AVX2 and SSE2): AVX-512 FMA when
//!   the CPU has `avx512f`, else AVX2 with FMA, else SSE2 multiplies and
//!   adds (two instructions per multiply-add; on other architectures, scalar
//!   code). The output says which, and gives the narrower instruction sets'
//!   peaks too for reference. The figure is the median of several timed runs
//!   after a warm-up, each run long enough (about 50 ms; `--quick` 5 ms) for
//!   the timer not to matter; the best run is printed beside it (on a shared
//!   machine the median can fall well below what the core does alone).
//! - Peak, all cores: the same loop on every core at once
//!   (`available_parallelism` threads started together at a barrier), the
//!   total FLOPs over the span from the first thread's start to the last
//!   one's end, each thread reading its own clock.
//! - Kernels: `matmul` and `gemm` at 256 x 256 x 256 and at the MLP's shapes
//!   (benches/programs/mlp_bulk.irad at batch 64, 784 -> 128 -> 10: the two
//!   forward matmuls and the pullback's transposed gemms), and `dot` and
//!   `sum` over 100 000 elements. Each is called through its public
//!   function only (`matmul(a, b, k, n, c)`, `gemm(ta, tb, a, b, m, k, n,
//!   c)`, `dot(a, b)`, `sum(a)`), so the bench measures whatever kernels
//!   `irad_kernels::bulk` has. An m x k x n product counts 2 m k n FLOPs,
//!   `dot` 2 n and `sum` n. Each time is the median over repetitions of a
//!   batch of calls (sized to about 20 ms; `--quick` 2 ms) after a warm-up,
//!   and its percentages are of the median peaks; the best repetition is
//!   printed too, as a percentage of the best one-core peak.
//!
//! Before timing, each kernel's result is checked against a naive loop
//! computed here: every element within twice the forward error bound of a
//! sum of k products in any order, `(k + 1) eps (|c_ij| + sum_p |a_ip
//! b_pj|)`, so a kernel that reorders or fuses is accepted and one given
//! the wrong shapes or transposes is not. A failed check makes the binary
//! exit with status 1.
//!
//! The data are uniform in [-1, 1) (xorshift64*, seed 22). The machine is
//! shared, so the load average is printed at the start and the end.
//!
//! Run: `cargo bench --bench kernels` (or the binary with `--bench`);
//! `--quick` for a smoke run. Without either flag (as `cargo test
//! --all-targets` runs it) the binary prints one line and exits 0.

use irad::ir::bulk;
use std::hint::black_box;
use std::process::ExitCode;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Elements of `dot` and `sum`.
const N_VEC: usize = 100_000;

/// The timing budgets of a run.
#[derive(Clone, Copy)]
struct Budget {
    /// Length of one timed run of the peak loop.
    peak_run: Duration,
    /// Length of one timed repetition of a kernel (a batch of calls).
    kernel_rep: Duration,
    /// Timed repetitions (after one untimed one).
    reps: usize,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    if !quick && !args.iter().any(|a| a == "--bench") {
        println!(
            "kernels: a benchmark; run it with `cargo bench --bench kernels` (or pass --bench)"
        );
        return ExitCode::SUCCESS;
    }
    let budget = if quick {
        Budget {
            peak_run: Duration::from_millis(5),
            kernel_rep: Duration::from_millis(2),
            reps: 5,
        }
    } else {
        Budget {
            peak_run: Duration::from_millis(50),
            kernel_rep: Duration::from_millis(20),
            reps: 11,
        }
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("machine: {} ({cores} cpus)", cpu_model());
    println!(
        "load average at start {}{}",
        load_average(),
        if quick { ", --quick" } else { "" }
    );

    let isas = peak::available();
    println!(
        "\n== peak f64 FLOP rate, GFLOP/s (median of {} runs; in brackets the best run)",
        budget.reps
    );
    // The widest instruction set's peaks (the first).
    let mut peaks: Option<(Rate, Rate)> = None;
    for &isa in &isas {
        let one = peak_one_core(isa, budget);
        let all = peak_all_cores(isa, cores, budget);
        println!(
            "  {:<28} one core {:>6.1} ({:>6.1}), {cores} cores {:>6.1} ({:>6.1}){}",
            isa.name(),
            one.median / 1e9,
            one.best / 1e9,
            all.median / 1e9,
            all.best / 1e9,
            if peaks.is_none() {
                "  <- the peak below"
            } else {
                ""
            }
        );
        peaks.get_or_insert((one, all));
    }
    let nan = Rate {
        median: f64::NAN,
        best: f64::NAN,
    };
    let (one, all) = peaks.unwrap_or((nan, nan));
    println!(
        "  peak used below: {} ({:.1} GFLOP/s one core, {:.1} all cores; medians)",
        isas.first().map_or("none", |isa| isa.name()),
        one.median / 1e9,
        all.median / 1e9
    );

    println!(
        "\n== irad_kernels::bulk (m x k x n; time, GFLOP/s, GB/s and the first two % are \
         medians of {} repetitions against the median peaks; \"best\" is the fastest \
         repetition, and its % is against the best one-core peak)",
        budget.reps
    );
    println!(
        "  {:<34} {:>10} {:>8} {:>7} {:>9} {:>8} {:>7} {:>7}",
        "kernel", "time", "GFLOP/s", "GB/s", "% 1 core", "% all", "best", "best %"
    );
    let mut rng = Rng::new(22);
    let mut failures = Vec::new();
    for case in cases() {
        match case.measure(&mut rng, budget) {
            Ok(m) => m.print(&case, one, all),
            Err(e) => {
                println!("  {:<34} check FAILED: {e}", case.label());
                failures.push(format!("{}: {e}", case.label()));
            }
        }
    }
    println!("\nload average at end {}", load_average());
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("\n{} check(s) failed:", failures.len());
        for f in &failures {
            eprintln!("  {f}");
        }
        ExitCode::FAILURE
    }
}

/// A rate in FLOP/s: the median of the timed runs and the best one.
#[derive(Clone, Copy)]
struct Rate {
    median: f64,
    best: f64,
}

impl Rate {
    /// The median and the largest of `rates` (reordered); NaN when empty.
    fn of(rates: &mut [f64]) -> Rate {
        rates.sort_by(f64::total_cmp);
        Rate {
            median: rates.get(rates.len() / 2).copied().unwrap_or(f64::NAN),
            best: rates.last().copied().unwrap_or(f64::NAN),
        }
    }
}

/// The FLOP/s of the peak loop of `isa` on one core, over `budget.reps`
/// runs after a warm-up that also sizes the runs.
fn peak_one_core(isa: peak::Isa, budget: Budget) -> Rate {
    let iters = peak_iters(isa, budget.peak_run);
    let mut rates: Vec<f64> = (0..budget.reps)
        .map(|_| {
            let t = Instant::now();
            black_box(isa.run(black_box(iters)));
            isa.flops(iters) / t.elapsed().as_secs_f64()
        })
        .collect();
    Rate::of(&mut rates)
}

/// The FLOP/s of the peak loop of `isa` on `cores` threads started together:
/// the total FLOPs over the wall time until the last one ends, over
/// `budget.reps` runs.
fn peak_all_cores(isa: peak::Isa, cores: usize, budget: Budget) -> Rate {
    let iters = peak_iters(isa, budget.peak_run);
    let mut rates: Vec<f64> = (0..budget.reps)
        .map(|_| {
            // Each thread times itself from the barrier; the run lasts from
            // the first start to the last end (the main thread's own clock
            // could be read late, if it is descheduled at the barrier).
            let barrier = Barrier::new(cores);
            let spans: Vec<(Instant, Instant)> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..cores)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            let t = Instant::now();
                            black_box(isa.run(black_box(iters)));
                            (t, Instant::now())
                        })
                    })
                    .collect();
                // The peak loop cannot panic; a thread that did is left out.
                handles.into_iter().filter_map(|h| h.join().ok()).collect()
            });
            let start = spans.iter().map(|s| s.0).min();
            let end = spans.iter().map(|s| s.1).max();
            match (start, end) {
                (Some(start), Some(end)) if spans.len() == cores => end - start,
                _ => Duration::MAX,
            }
        })
        .map(|d| cores as f64 * isa.flops(iters) / d.as_secs_f64())
        .collect();
    Rate::of(&mut rates)
}

/// Iterations of `isa`'s peak loop that take about `run` (after a warm-up).
fn peak_iters(isa: peak::Isa, run: Duration) -> u64 {
    let mut iters = 1 << 16;
    loop {
        let t = Instant::now();
        black_box(isa.run(black_box(iters)));
        let e = t.elapsed();
        if e >= run / 4 || iters >= 1 << 40 {
            let scale = run.as_secs_f64() / e.as_secs_f64().max(1e-9);
            return ((iters as f64 * scale) as u64).max(1);
        }
        iters *= 4;
    }
}

/// The peak loops: independent multiply-adds on registers.
mod peak {
    /// An instruction set the peak loop can use.
    #[derive(Clone, Copy, Debug)]
    pub enum Isa {
        /// 512-bit FMA, 16 accumulators.
        #[cfg(target_arch = "x86_64")]
        Avx512,
        /// 256-bit FMA, 12 accumulators.
        #[cfg(target_arch = "x86_64")]
        Avx2Fma,
        /// 128-bit multiply then add, 12 accumulators.
        #[cfg(target_arch = "x86_64")]
        Sse2,
        /// Scalar multiply then add, 12 accumulators (other architectures).
        #[cfg(not(target_arch = "x86_64"))]
        Scalar,
    }

    /// The instruction sets this CPU has, widest first.
    pub fn available() -> Vec<Isa> {
        #[cfg(target_arch = "x86_64")]
        {
            let mut v = Vec::new();
            if std::arch::is_x86_feature_detected!("avx512f") {
                v.push(Isa::Avx512);
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                v.push(Isa::Avx2Fma);
            }
            // SSE2 is part of x86-64.
            v.push(Isa::Sse2);
            v
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            vec![Isa::Scalar]
        }
    }

    impl Isa {
        /// What the output calls it.
        pub fn name(self) -> &'static str {
            match self {
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => "AVX-512 FMA (16 x 8 lanes)",
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2Fma => "AVX2 FMA (12 x 4 lanes)",
                #[cfg(target_arch = "x86_64")]
                Isa::Sse2 => "SSE2 mul+add (12 x 2 lanes)",
                #[cfg(not(target_arch = "x86_64"))]
                Isa::Scalar => "scalar mul+add (12 accumulators)",
            }
        }

        /// FLOPs of `iters` iterations (a multiply-add is two).
        pub fn flops(self, iters: u64) -> f64 {
            let per_iter = match self {
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => 16 * 8 * 2,
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2Fma => 12 * 4 * 2,
                #[cfg(target_arch = "x86_64")]
                Isa::Sse2 => 12 * 2 * 2,
                #[cfg(not(target_arch = "x86_64"))]
                Isa::Scalar => 12 * 2,
            };
            iters as f64 * f64::from(per_iter)
        }

        /// Runs `iters` iterations; returns a sum of the accumulators (to be
        /// black-boxed).
        pub fn run(self, iters: u64) -> f64 {
            match self {
                // SAFETY: `available` offers Avx512 only when the CPU has avx512f.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx512 => unsafe { x86::fma512(iters) },
                // SAFETY: `available` offers Avx2Fma only when the CPU has avx2 and fma.
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2Fma => unsafe { x86::fma256(iters) },
                // SAFETY: SSE2 is part of x86-64.
                #[cfg(target_arch = "x86_64")]
                Isa::Sse2 => unsafe { x86::muladd128(iters) },
                #[cfg(not(target_arch = "x86_64"))]
                Isa::Scalar => scalar(iters),
            }
        }
    }

    /// The multiplier and addend of every step: `acc -> acc m + c` converges
    /// to 1 from any start, so nothing overflows or goes subnormal.
    const M: f64 = 0.999_999_9;
    const C: f64 = 1e-7;

    /// Accumulator `k`'s start, hidden from the optimiser: a start it could
    /// see might be a fixed point of the step (1.0 is, after rounding), and
    /// that chain would be folded away.
    fn start(k: usize) -> f64 {
        std::hint::black_box(2.0) + k as f64
    }

    #[cfg(target_arch = "x86_64")]
    mod x86 {
        use super::{C, M, start};
        use std::arch::x86_64::*;
        use std::hint::black_box;

        #[target_feature(enable = "avx512f")]
        pub fn fma512(iters: u64) -> f64 {
            let (m, c) = (_mm512_set1_pd(black_box(M)), _mm512_set1_pd(black_box(C)));
            let mut acc: [__m512d; 16] = std::array::from_fn(|k| _mm512_set1_pd(start(k)));
            for _ in 0..iters {
                for a in &mut acc {
                    *a = _mm512_fmadd_pd(*a, m, c);
                }
            }
            let s = acc
                .iter()
                .fold(_mm512_setzero_pd(), |s, &a| _mm512_add_pd(s, a));
            _mm512_reduce_add_pd(s)
        }

        #[target_feature(enable = "avx2,fma")]
        pub fn fma256(iters: u64) -> f64 {
            let (m, c) = (_mm256_set1_pd(black_box(M)), _mm256_set1_pd(black_box(C)));
            let mut acc: [__m256d; 12] = std::array::from_fn(|k| _mm256_set1_pd(start(k)));
            for _ in 0..iters {
                for a in &mut acc {
                    *a = _mm256_fmadd_pd(*a, m, c);
                }
            }
            let s = acc
                .iter()
                .fold(_mm256_setzero_pd(), |s, &a| _mm256_add_pd(s, a));
            let mut out = [0.0; 4];
            // SAFETY: `out` has room for four f64s; the store is unaligned.
            unsafe { _mm256_storeu_pd(out.as_mut_ptr(), s) };
            out.iter().sum()
        }

        #[target_feature(enable = "sse2")]
        pub fn muladd128(iters: u64) -> f64 {
            let (m, c) = (_mm_set1_pd(black_box(M)), _mm_set1_pd(black_box(C)));
            let mut acc: [__m128d; 12] = std::array::from_fn(|k| _mm_set1_pd(start(k)));
            for _ in 0..iters {
                for a in &mut acc {
                    *a = _mm_add_pd(_mm_mul_pd(*a, m), c);
                }
            }
            let s = acc.iter().fold(_mm_setzero_pd(), |s, &a| _mm_add_pd(s, a));
            let mut out = [0.0; 2];
            // SAFETY: `out` has room for two f64s; the store is unaligned.
            unsafe { _mm_storeu_pd(out.as_mut_ptr(), s) };
            out[0] + out[1]
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn scalar(iters: u64) -> f64 {
        use std::hint::black_box;
        let (m, c) = (black_box(M), black_box(C));
        let mut acc: [f64; 12] = std::array::from_fn(start);
        for _ in 0..iters {
            for a in &mut acc {
                *a = *a * m + c;
            }
        }
        acc.iter().sum()
    }
}

/// One benchmarked kernel call.
#[derive(Clone, Copy)]
enum Case {
    /// `matmul(a, b, k, n, c)`, a m x k, b k x n, c m x n.
    Matmul { m: usize, k: usize, n: usize },
    /// `gemm(ta, tb, a, b, m, k, n, c)`: c += op(a) op(b).
    Gemm {
        ta: bool,
        tb: bool,
        m: usize,
        k: usize,
        n: usize,
        /// What the shape is in the MLP, or "".
        role: &'static str,
    },
    /// `dot(a, b)` over n elements.
    Dot { n: usize },
    /// `sum(a)` over n elements.
    Sum { n: usize },
}

/// The cases, in the order they are reported.
fn cases() -> Vec<Case> {
    let g = |ta, tb, m, k, n, role| Case::Gemm {
        ta,
        tb,
        m,
        k,
        n,
        role,
    };
    vec![
        Case::Matmul {
            m: 256,
            k: 256,
            n: 256,
        },
        g(false, false, 256, 256, 256, ""),
        g(true, false, 256, 256, 256, ""),
        g(false, true, 256, 256, 256, ""),
        Case::Matmul {
            m: 64,
            k: 784,
            n: 128,
        },
        g(true, false, 784, 64, 128, "dW1 = x^T da"),
        g(false, true, 64, 128, 784, "dx = da W1^T"),
        Case::Matmul {
            m: 64,
            k: 128,
            n: 10,
        },
        g(true, false, 128, 64, 10, "dW2 = h^T dz"),
        g(false, true, 64, 10, 128, "dh = dz W2^T"),
        Case::Dot { n: N_VEC },
        Case::Sum { n: N_VEC },
    ]
}

/// A kernel's calls per second (median and best repetition) and what one call does.
struct Measured {
    calls: Rate,
    flops: f64,
    bytes: f64,
}

impl Case {
    fn label(&self) -> String {
        let t = |b: bool| if b { "t" } else { "n" };
        match *self {
            Case::Matmul { m, k, n } => {
                let role = match (m, k, n) {
                    (64, 784, 128) => "  (mlp layer 1)",
                    (64, 128, 10) => "  (mlp layer 2)",
                    _ => "",
                };
                format!("matmul {m}x{k}x{n}{role}")
            }
            Case::Gemm {
                ta,
                tb,
                m,
                k,
                n,
                role,
            } => {
                let role = if role.is_empty() {
                    String::new()
                } else {
                    format!("  ({role})")
                };
                format!("gemm {}{} {m}x{k}x{n}{role}", t(ta), t(tb))
            }
            Case::Dot { n } => format!("dot n = {n}"),
            Case::Sum { n } => format!("sum n = {n}"),
        }
    }

    /// Checks the kernel against the naive loop, then times it.
    fn measure(&self, rng: &mut Rng, budget: Budget) -> Result<Measured, String> {
        match *self {
            Case::Matmul { m, k, n } => {
                let (a, b) = (rng.uniform(m * k), rng.uniform(k * n));
                let mut c = vec![0.0; m * n];
                bulk::matmul(&a, &b, k, n, &mut c);
                let zero = vec![0.0; m * n];
                check_product(&c, &zero, &a, &b, (false, false), (m, k, n))?;
                let calls = time_calls(budget, || {
                    bulk::matmul(black_box(&a), black_box(&b), k, n, black_box(&mut c));
                });
                Ok(Measured::product(calls, m, k, n))
            }
            Case::Gemm {
                ta, tb, m, k, n, ..
            } => {
                let (a, b) = (rng.uniform(m * k), rng.uniform(k * n));
                let c0 = rng.uniform(m * n);
                let mut c = c0.clone();
                bulk::gemm(ta, tb, &a, &b, m, k, n, &mut c);
                check_product(&c, &c0, &a, &b, (ta, tb), (m, k, n))?;
                // The timed calls keep adding into c: the same work each time.
                let calls = time_calls(budget, || {
                    bulk::gemm(
                        ta,
                        tb,
                        black_box(&a),
                        black_box(&b),
                        m,
                        k,
                        n,
                        black_box(&mut c),
                    );
                });
                Ok(Measured::product(calls, m, k, n))
            }
            Case::Dot { n } => {
                let (a, b) = (rng.uniform(n), rng.uniform(n));
                let got = bulk::dot(&a, &b);
                let terms: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x * y).collect();
                check_sum("dot", got, &terms)?;
                let calls = time_calls(budget, || {
                    black_box(bulk::dot(black_box(&a), black_box(&b)));
                });
                Ok(Measured {
                    calls,
                    flops: 2.0 * n as f64,
                    bytes: 16.0 * n as f64,
                })
            }
            Case::Sum { n } => {
                let a = rng.uniform(n);
                check_sum("sum", bulk::sum(&a), &a)?;
                let calls = time_calls(budget, || {
                    black_box(bulk::sum(black_box(&a)));
                });
                Ok(Measured {
                    calls,
                    flops: n as f64,
                    bytes: 8.0 * n as f64,
                })
            }
        }
    }
}

impl Measured {
    /// An m x k x n product: 2 m k n FLOPs; the bytes of a, b and c once.
    fn product(calls: Rate, m: usize, k: usize, n: usize) -> Measured {
        Measured {
            calls,
            flops: 2.0 * (m * k * n) as f64,
            bytes: 8.0 * (m * k + k * n + m * n) as f64,
        }
    }

    fn print(&self, case: &Case, peak_one: Rate, peak_all: Rate) {
        let rate = self.flops * self.calls.median;
        let best = self.flops * self.calls.best;
        let gbs = if matches!(case, Case::Dot { .. } | Case::Sum { .. }) {
            format!("{:.1}", self.bytes * self.calls.median / 1e9)
        } else {
            "-".into()
        };
        println!(
            "  {:<34} {:>10} {:>8.2} {:>7} {:>8.1}% {:>7.1}% {:>7.2} {:>6.1}%",
            case.label(),
            fmt_time(1.0 / self.calls.median),
            rate / 1e9,
            gbs,
            100.0 * rate / peak_one.median,
            100.0 * rate / peak_all.median,
            best / 1e9,
            100.0 * best / peak_one.best,
        );
    }
}

/// Checks `c = c0 + op(a) op(b)` (m x k x n) entry by entry against the
/// naive loop, within `2 (k + 1) eps (|c0_ij| + sum_p |op(a)_ip op(b)_pj|)`:
/// twice a bound on the rounding of either sum, in any order, fused or not.
fn check_product(
    c: &[f64],
    c0: &[f64],
    a: &[f64],
    b: &[f64],
    (ta, tb): (bool, bool),
    (m, k, n): (usize, usize, usize),
) -> Result<(), String> {
    let at = |i: usize, p: usize| if ta { a[p * m + i] } else { a[i * k + p] };
    let bt = |p: usize, j: usize| if tb { b[j * k + p] } else { b[p * n + j] };
    let eps = f64::EPSILON;
    for i in 0..m {
        for j in 0..n {
            let (mut want, mut mag) = (c0[i * n + j], c0[i * n + j].abs());
            for p in 0..k {
                let t = at(i, p) * bt(p, j);
                want += t;
                mag += t.abs();
            }
            let got = c[i * n + j];
            // Written so that a NaN fails.
            let within = (got - want).abs() <= 2.0 * (k as f64 + 1.0) * eps * mag;
            if !within {
                return Err(format!("c[{i}, {j}] is {got:e}, want {want:e}"));
            }
        }
    }
    Ok(())
}

/// Checks a reduction's result against the naive sum of `terms`.
fn check_sum(what: &str, got: f64, terms: &[f64]) -> Result<(), String> {
    let want: f64 = terms.iter().sum();
    let mag: f64 = terms.iter().map(|t| t.abs()).sum();
    if (got - want).abs() <= 2.0 * terms.len() as f64 * f64::EPSILON * mag {
        Ok(())
    } else {
        Err(format!("{what} is {got:e}, want {want:e}"))
    }
}

/// Calls of `f` per second: calls in batches sized to about
/// `budget.kernel_rep`, one untimed batch, then `budget.reps` timed ones.
fn time_calls(budget: Budget, mut f: impl FnMut()) -> Rate {
    let t = Instant::now();
    f();
    let once = t.elapsed().max(Duration::from_nanos(1));
    let batch = (budget.kernel_rep.as_secs_f64() / once.as_secs_f64()).ceil() as u32;
    let batch = batch.clamp(1, 1_000_000);
    let mut run = || {
        let t = Instant::now();
        for _ in 0..batch {
            f();
        }
        f64::from(batch) / t.elapsed().as_secs_f64()
    };
    run();
    let mut rates: Vec<f64> = (0..budget.reps).map(|_| run()).collect();
    Rate::of(&mut rates)
}

/// A time in seconds for people: `12.3 us`, `4.56 ms`.
fn fmt_time(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.1} us", s * 1e6)
    } else {
        format!("{:.2} ms", s * 1e3)
    }
}

/// xorshift64*, as benches/common/handwritten.rs has it.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next_f64(&mut self) -> f64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `n` draws uniform in [-1, 1).
    fn uniform(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| 2.0 * self.next_f64() - 1.0).collect()
    }
}

/// The CPU's model name, from /proc/cpuinfo.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name")?.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// The 1, 5 and 15 minute load averages, as /proc/loadavg has them.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
