//! Issue 22's math-function benchmark: what each math primitive costs per
//! call in irad's runtime (the `irad_rt_*` functions compiled code calls:
//! the `libm` crate's, and irad's own `tanh`, `sin`, `cos`, `tan` and
//! `pow`; for `exp` and `log`, which compiled code computes inline,
//! `irad_kernels::math::exp` and `log` themselves) against the platform's
//! libm (Rust std's `f64` methods, which on Linux call glibc; `erf`, which
//! std does not have on stable, is glibc's `erf` declared here), and how far
//! apart their results are. The rows `log-libm`, `sin-libm`, `cos-libm`,
//! `tan-libm` and `pow-libm` are the `libm` crate's functions (what irad
//! used before its own) against glibc's, for comparison; `sin-1.5` and
//! `cos-1.5` (and their `-libm` rows) time arguments in [-1.5, 1.5] only.
//!
//! - Throughput: for each function, an array of 4 096 inputs spread over a
//!   typical domain for it (xorshift64*, seed 22), mapped through the
//!   function into an output array (a running sum would put a spill and
//!   reload around every call on the critical path); the two
//!   implementations run in interleaved rounds after a warm-up, for at
//!   least the time budget per function (0.2 s; `--quick` 0.02 s) and 31
//!   rounds (5), and the median round over 4 096 is the ns/call. Both sides are called the same way: through a `black_box`ed
//!   function pointer to a small Rust wrapper, which makes the direct call
//!   (compiled code calls `irad_rt_*` by address, one call); the `identity`
//!   row is that wrapper around nothing, the overhead both sides share.
//!   `sqrt`, `floor` and `ceil` are instructions in irad's compiled code
//!   (docs/codegen.md; the JIT targets the host, so `roundsd` on x86-64),
//!   so only the std method is timed ("inst" in the irad column); for
//!   `floor` and `ceil` that is a call of glibc's, since rustc's baseline
//!   x86-64 has no SSE4.1.
//! - Latency: for exp, log and sin (and identity), a dependent chain
//!   `y = f(x[i] + y * 0.0)` over the same inputs: each call waits for the
//!   previous one (the extra multiply-add is in the figure, and in the
//!   identity row).
//! - Accuracy: over 1 000 000 points of the typical domain and of each
//!   special region (tiny, huge, near multiples of pi/2, near 1, ...), the
//!   largest difference between the two results in units in the last place
//!   (the distance between their positions in the ordered f64 values; both
//!   NaN is no difference, one NaN counts as infinite) and the fraction of
//!   points where they differ at all. There is no higher-precision
//!   reference (no arbitrary-precision crate is available), so this says
//!   how far apart the two are, not which is right.
//!
//! Run: `cargo bench --bench math` (or the binary with `--bench`); `--quick`
//! for a smoke run. Without either flag (as `cargo test --all-targets` runs
//! it) the binary prints one line and exits 0.

use irad::codegen::runtime as rt;
use std::hint::black_box;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Inputs per timed round.
const N_TIME: usize = 4096;
/// Points per accuracy region.
const N_ACC: usize = 1_000_000;

unsafe extern "C" {
    /// glibc's `erf` (std has no stable `f64::erf`).
    #[link_name = "erf"]
    safe fn glibc_erf(x: f64) -> f64;
}

/// How a region's inputs are drawn.
#[derive(Clone, Copy)]
enum Dist {
    /// Uniform in [lo, hi].
    Uniform(f64, f64),
    /// Log-uniform in [lo, hi] (both positive), with a random sign when the flag is set.
    LogUniform(f64, f64, bool),
    /// `k * pi / 2 + d` for k uniform in [-K, K] and d uniform in [-eps, eps].
    NearHalfPi(f64, f64),
    /// `k + 0.5` for integer k uniform in [-K, K).
    Halves(f64),
    /// An integer uniform in [-K, K].
    Integers(f64),
}

/// A region of a function's inputs: its name and the distribution of each argument.
#[derive(Clone, Copy)]
struct Region {
    name: &'static str,
    x: Dist,
    /// The second argument of atan2 (x) and pow (y); ignored for unary functions.
    y: Dist,
}

/// A two-argument function (unary ones ignore the second).
type F2 = fn(f64, f64) -> f64;

/// A way of running a function over the inputs: [`map_through`] or [`chain_through`].
type Kernel = fn(F2, &[f64], &[f64], &mut [f64]) -> f64;

/// One benchmarked function.
struct Fun {
    name: &'static str,
    /// What irad's compiled code runs (`irad_rt_*`, or the instruction).
    irad: F2,
    /// Rust std (glibc).
    std: F2,
    /// True when irad emits an instruction rather than a call.
    inline: bool,
    /// Time a dependent chain too.
    latency: bool,
    /// The typical domain (timed, and the first accuracy region), then special regions.
    regions: Vec<Region>,
}

const ONE: Dist = Dist::Uniform(1.0, 1.0);

fn r(name: &'static str, x: Dist) -> Region {
    Region { name, x, y: ONE }
}

fn r2(name: &'static str, x: Dist, y: Dist) -> Region {
    Region { name, x, y }
}

/// Wrappers of both kinds, unary ones ignoring the second argument.
macro_rules! unary {
    ($($w_irad:ident $w_std:ident = $irad:expr, |$x:ident| $std:expr;)*) => {$(
        fn $w_irad(x: f64, _: f64) -> f64 {
            $irad(x)
        }
        fn $w_std($x: f64, _: f64) -> f64 {
            $std
        }
    )*};
}

unary! {
    irad_exp std_exp = rt::math::exp, |x| x.exp();
    irad_log std_log = rt::math::log, |x| x.ln();
    libm_log std_log2 = libm::log, |x| x.ln();
    libm_sin std_sin2 = libm::sin, |x| x.sin();
    libm_cos std_cos2 = libm::cos, |x| x.cos();
    libm_tan std_tan2 = libm::tan, |x| x.tan();
    irad_log1p std_log1p = rt::irad_rt_log1p, |x| x.ln_1p();
    irad_expm1 std_expm1 = rt::irad_rt_expm1, |x| x.exp_m1();
    irad_sin std_sin = rt::irad_rt_sin, |x| x.sin();
    irad_cos std_cos = rt::irad_rt_cos, |x| x.cos();
    irad_tan std_tan = rt::irad_rt_tan, |x| x.tan();
    irad_asin std_asin = rt::irad_rt_asin, |x| x.asin();
    irad_acos std_acos = rt::irad_rt_acos, |x| x.acos();
    irad_atan std_atan = rt::irad_rt_atan, |x| x.atan();
    irad_sinh std_sinh = rt::irad_rt_sinh, |x| x.sinh();
    irad_cosh std_cosh = rt::irad_rt_cosh, |x| x.cosh();
    irad_tanh std_tanh = rt::irad_rt_tanh, |x| x.tanh();
    irad_erf std_erf = rt::irad_rt_erf, |x| glibc_erf(x);
    irad_round std_round = rt::irad_rt_round, |x| x.round();
    std_sqrt std_sqrt2 = f64::sqrt, |x| x.sqrt();
    std_floor std_floor2 = f64::floor, |x| x.floor();
    std_ceil std_ceil2 = f64::ceil, |x| x.ceil();
    identity identity2 = std::convert::identity, |x| x;
}

fn irad_atan2(y: f64, x: f64) -> f64 {
    rt::irad_rt_atan2(y, x)
}
fn std_atan2(y: f64, x: f64) -> f64 {
    y.atan2(x)
}
fn irad_pow(x: f64, y: f64) -> f64 {
    rt::irad_rt_pow(x, y)
}
fn std_pow(x: f64, y: f64) -> f64 {
    x.powf(y)
}
fn libm_pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}

/// The functions, in the order they are reported.
fn functions() -> Vec<Fun> {
    use Dist::{LogUniform as L, NearHalfPi as P, Uniform as U};
    let f = |name, irad: F2, std: F2, latency, regions| Fun {
        name,
        irad,
        std,
        inline: false,
        latency,
        regions,
    };
    let tiny = |name| r(name, L(1e-300, 1e-8, true));
    let trig = |name, irad, std| {
        let regions = vec![
            r("[-10, 10]", U(-10.0, 10.0)),
            r("[-1.5, 1.5]", U(-1.5, 1.5)),
            tiny("tiny"),
            r("k pi/2 +- 1e-6, |k| <= 1e3", P(1e3, 1e-6)),
            r("k pi/2 +- 1e-12, |k| <= 1e6", P(1e6, 1e-12)),
            r("huge 1e3..1e300", L(1e3, 1e300, true)),
        ];
        f(name, irad, std, name.starts_with("sin"), regions)
    };
    // Arguments below 1.5, where irad's sin and cos take their grid and the
    // libm crate's mostly no reduction (branchy's sin is called on (0, 1]).
    let small = vec![r("[-1.5, 1.5]", U(-1.5, 1.5))];
    let pow_regions = || {
        vec![
            r2("x in [0.1, 10], y in [-5, 5]", U(0.1, 10.0), U(-5.0, 5.0)),
            r2(
                "x near 1, |y| up to 1e9",
                U(1.0 - 1e-6, 1.0 + 1e-6),
                L(1.0, 1e9, true),
            ),
            r2(
                "x log-uniform 1e-300..1e300, y in [-1, 1]",
                L(1e-300, 1e300, false),
                U(-1.0, 1.0),
            ),
            r2(
                "x in [-10, -0.1], integer y in [-20, 20]",
                U(-10.0, -0.1),
                Dist::Integers(20.0),
            ),
        ]
    };
    let inline = |name, irad: F2, std: F2, regions| Fun {
        inline: true,
        ..f(name, irad, std, false, regions)
    };
    vec![
        f(
            "identity",
            identity,
            identity2,
            true,
            vec![r("[-10, 10]", U(-10.0, 10.0))],
        ),
        f(
            "exp",
            irad_exp,
            std_exp,
            true,
            vec![
                r("[-20, 20]", U(-20.0, 20.0)),
                tiny("tiny"),
                r("large [700, 709.78]", U(700.0, 709.78)),
                r("subnormal results [-745, -708]", U(-745.0, -708.0)),
            ],
        ),
        f(
            "log",
            irad_log,
            std_log,
            true,
            vec![
                r("[1e-3, 1e3] log-uniform", L(1e-3, 1e3, false)),
                r("near 1 [1 - 1e-3, 1 + 1e-3]", U(1.0 - 1e-3, 1.0 + 1e-3)),
                r("near 1 [1 - 1e-9, 1 + 1e-9]", U(1.0 - 1e-9, 1.0 + 1e-9)),
                r("whole range 1e-300..1e300", L(1e-300, 1e300, false)),
                r("subnormal", L(5e-324, 2.2e-308, false)),
            ],
        ),
        f(
            "log-libm",
            libm_log,
            std_log2,
            true,
            vec![
                r("[1e-3, 1e3] log-uniform", L(1e-3, 1e3, false)),
                r("whole range 1e-300..1e300", L(1e-300, 1e300, false)),
                r("subnormal", L(5e-324, 2.2e-308, false)),
            ],
        ),
        f(
            "log1p",
            irad_log1p,
            std_log1p,
            false,
            vec![
                r("[-0.5, 10]", U(-0.5, 10.0)),
                tiny("tiny"),
                r("near -1 [-1, -0.999]", U(-1.0 + 1e-16, -0.999)),
                r("huge 1e10..1e300", L(1e10, 1e300, false)),
            ],
        ),
        f(
            "expm1",
            irad_expm1,
            std_expm1,
            false,
            vec![
                r("[-5, 5]", U(-5.0, 5.0)),
                tiny("tiny"),
                r("large [-40, -5] u [5, 709]", L(5.0, 709.0, true)),
            ],
        ),
        trig("sin", irad_sin, std_sin),
        trig("sin-libm", libm_sin, std_sin2),
        trig("cos", irad_cos, std_cos),
        trig("cos-libm", libm_cos, std_cos2),
        trig("tan", irad_tan, std_tan),
        trig("tan-libm", libm_tan, std_tan2),
        f("sin-1.5", irad_sin, std_sin, false, small.clone()),
        f("sin-1.5-libm", libm_sin, std_sin2, false, small.clone()),
        f("cos-1.5", irad_cos, std_cos, false, small.clone()),
        f("cos-1.5-libm", libm_cos, std_cos2, false, small),
        f(
            "asin",
            irad_asin,
            std_asin,
            false,
            vec![
                r("[-1, 1]", U(-1.0, 1.0)),
                tiny("tiny"),
                r("near 1 [0.999, 1]", U(0.999, 1.0)),
            ],
        ),
        f(
            "acos",
            irad_acos,
            std_acos,
            false,
            vec![
                r("[-1, 1]", U(-1.0, 1.0)),
                tiny("tiny"),
                r("near 1 [0.999, 1]", U(0.999, 1.0)),
            ],
        ),
        f(
            "atan",
            irad_atan,
            std_atan,
            false,
            vec![
                r("[-20, 20]", U(-20.0, 20.0)),
                tiny("tiny"),
                r("huge 1e3..1e300", L(1e3, 1e300, true)),
            ],
        ),
        f(
            "atan2",
            irad_atan2,
            std_atan2,
            false,
            vec![
                r2("y, x in [-10, 10]", U(-10.0, 10.0), U(-10.0, 10.0)),
                r2(
                    "y, x log-uniform 1e-300..1e300",
                    L(1e-300, 1e300, true),
                    L(1e-300, 1e300, true),
                ),
            ],
        ),
        f(
            "sinh",
            irad_sinh,
            std_sinh,
            false,
            vec![
                r("[-10, 10]", U(-10.0, 10.0)),
                tiny("tiny"),
                r("large 10..710", L(10.0, 710.0, true)),
            ],
        ),
        f(
            "cosh",
            irad_cosh,
            std_cosh,
            false,
            vec![
                r("[-10, 10]", U(-10.0, 10.0)),
                tiny("tiny"),
                r("large 10..710", L(10.0, 710.0, true)),
            ],
        ),
        f(
            "tanh",
            irad_tanh,
            std_tanh,
            false,
            vec![
                r("[-5, 5]", U(-5.0, 5.0)),
                tiny("tiny"),
                r("saturating 5..40", L(5.0, 40.0, true)),
            ],
        ),
        f(
            "erf",
            irad_erf,
            std_erf,
            false,
            vec![
                r("[-4, 4]", U(-4.0, 4.0)),
                tiny("tiny"),
                r("tail 4..30", L(4.0, 30.0, true)),
            ],
        ),
        f("pow", irad_pow, std_pow, false, pow_regions()),
        f("pow-libm", libm_pow, std_pow, false, pow_regions()),
        f(
            "round",
            irad_round,
            std_round,
            false,
            vec![
                r("[-1e6, 1e6]", U(-1e6, 1e6)),
                r("halves k + 0.5, |k| <= 1e3", Dist::Halves(1e3)),
            ],
        ),
        inline(
            "sqrt",
            std_sqrt,
            std_sqrt2,
            vec![r("[0, 1e6]", U(0.0, 1e6))],
        ),
        inline(
            "floor",
            std_floor,
            std_floor2,
            vec![r("[-1e6, 1e6]", U(-1e6, 1e6))],
        ),
        inline(
            "ceil",
            std_ceil,
            std_ceil2,
            vec![r("[-1e6, 1e6]", U(-1e6, 1e6))],
        ),
    ]
}

/// xorshift64*: a small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn draw(&mut self, d: Dist) -> f64 {
        match d {
            Dist::Uniform(lo, hi) => lo + (hi - lo) * self.unit(),
            Dist::LogUniform(lo, hi, signed) => {
                let v = (lo.ln() + (hi.ln() - lo.ln()) * self.unit()).exp();
                let v = v.clamp(lo, hi);
                if signed && self.next() & 1 == 1 {
                    -v
                } else {
                    v
                }
            }
            Dist::Halves(k_max) => (self.unit() * 2.0 * k_max - k_max).floor() + 0.5,
            Dist::Integers(k_max) => (self.unit() * 2.0 * k_max - k_max).round(),
            Dist::NearHalfPi(k_max, eps) => {
                let k = (self.unit() * 2.0 * k_max - k_max).round();
                k * std::f64::consts::FRAC_PI_2 + eps * (2.0 * self.unit() - 1.0)
            }
        }
    }

    fn inputs(&mut self, region: &Region, n: usize) -> (Vec<f64>, Vec<f64>) {
        (0..n)
            .map(|_| (self.draw(region.x), self.draw(region.y)))
            .unzip()
    }
}

/// `f` over the inputs, each result stored: independent calls
/// (throughput). Storing rather than summing keeps a running sum, which
/// the caller would have to spill around each call (no xmm register is
/// callee-saved), off the critical path.
#[inline(never)]
fn map_through(f: F2, xs: &[f64], ys: &[f64], out: &mut [f64]) -> f64 {
    for ((&x, &y), o) in xs.iter().zip(ys).zip(out.iter_mut()) {
        *o = f(x, y);
    }
    out.first().copied().unwrap_or(0.0)
}

/// A dependent chain through `f` (latency): each input waits for the last result.
#[inline(never)]
fn chain_through(f: F2, xs: &[f64], ys: &[f64], _: &mut [f64]) -> f64 {
    let mut acc = 0.0;
    for (&x, &y) in xs.iter().zip(ys) {
        acc = f(x + acc * 0.0, y);
    }
    acc
}

/// Median ns/call of each kernel run over the inputs, in interleaved rounds.
fn time_ns(
    kernels: &[(F2, Kernel)],
    xs: &[f64],
    ys: &[f64],
    budget: Duration,
    min_rounds: usize,
) -> Vec<f64> {
    let mut samples = vec![Vec::new(); kernels.len()];
    let mut out = vec![0.0; xs.len()];
    for &(f, k) in kernels {
        black_box(k(black_box(f), black_box(xs), black_box(ys), &mut out));
    }
    let start = Instant::now();
    let mut rounds = 0;
    while rounds < min_rounds || start.elapsed() < budget {
        for (s, &(f, k)) in samples.iter_mut().zip(kernels) {
            let t = Instant::now();
            black_box(k(black_box(f), black_box(xs), black_box(ys), &mut out));
            black_box(&mut out);
            s.push(t.elapsed().as_secs_f64() * 1e9 / xs.len() as f64);
        }
        rounds += 1;
    }
    samples
        .into_iter()
        .map(|mut s| {
            s.sort_by(f64::total_cmp);
            s[s.len() / 2]
        })
        .collect()
}

/// A position in the ordered f64 values: adjacent floats differ by 1, and
/// -0.0 and +0.0 are the same place.
fn ordered(x: f64) -> i128 {
    let i = x.to_bits() as i64;
    i128::from(if i < 0 { i64::MIN.wrapping_sub(i) } else { i })
}

/// The distance in ulps between two results; `None` when exactly one is NaN.
fn ulps(a: f64, b: f64) -> Option<u128> {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Some(0),
        (false, false) => Some((ordered(a) - ordered(b)).unsigned_abs()),
        _ => None,
    }
}

/// How far apart the two implementations are over one region.
struct Diff {
    max_ulps: Option<u128>,
    /// The input (x, y) with the largest difference.
    worst: (f64, f64),
    differing: usize,
    n: usize,
}

fn compare(fun: &Fun, region: &Region, rng: &mut Rng) -> Diff {
    let (xs, ys) = rng.inputs(region, N_ACC);
    let mut d = Diff {
        max_ulps: Some(0),
        worst: (f64::NAN, f64::NAN),
        differing: 0,
        n: N_ACC,
    };
    for (&x, &y) in xs.iter().zip(&ys) {
        let (a, b) = ((fun.irad)(x, y), (fun.std)(x, y));
        let u = ulps(a, b);
        if u != Some(0) {
            d.differing += 1;
        }
        let worse = match (u, d.max_ulps) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(u), Some(m)) => u > m,
        };
        if worse {
            d.max_ulps = u;
            d.worst = (x, y);
        }
    }
    d
}

fn fmt_ulps(u: Option<u128>) -> String {
    match u {
        None => "NaN".into(),
        Some(u) if u < 1_000_000 => u.to_string(),
        Some(u) => format!("{:.1e}", u as f64),
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split(':').nth(1))
        .map_or_else(|| "unknown".to_string(), |m| m.trim().to_string());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let glibc = std::process::Command::new("ldd")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into());
    format!("{model} ({cpus} cpus); {glibc}")
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    if !quick && !args.iter().any(|a| a == "--bench") {
        println!("math: a benchmark; run it with `cargo bench --bench math` (or pass --bench)");
        return ExitCode::SUCCESS;
    }
    let (budget, min_rounds) = if quick {
        (Duration::from_millis(20), 5)
    } else {
        (Duration::from_millis(200), 31)
    };
    println!("machine: {}", machine());
    println!(
        "load average at start {}{}",
        load_average(),
        if quick { ", --quick" } else { "" }
    );
    let funs = functions();
    let mut rng = Rng(22);
    println!(
        "\nper call (ns, median round of {N_TIME} calls); ulps over {N_ACC} points of each \
         region, % differing over the first (typical) one"
    );
    println!(
        "{:<9} {:>8} {:>8} {:>6} {:>9} {:>9} {:>8} {:>8}  worst region",
        "function", "irad", "std", "ratio", "max ulps", "% differ", "lat irad", "lat std"
    );
    let mut details = Vec::new();
    for fun in &funs {
        let (xs, ys) = rng.inputs(&fun.regions[0], N_TIME);
        let mut kernels: Vec<(F2, Kernel)> = vec![(fun.irad, map_through), (fun.std, map_through)];
        if fun.latency {
            kernels.push((fun.irad, chain_through));
            kernels.push((fun.std, chain_through));
        }
        let t = time_ns(&kernels, &xs, &ys, budget, min_rounds);
        let diffs: Vec<Diff> = fun
            .regions
            .iter()
            .map(|reg| compare(fun, reg, &mut rng))
            .collect();
        let worst = diffs
            .iter()
            .zip(&fun.regions)
            .rev() // the first region of the largest difference
            .max_by_key(|(d, _)| d.max_ulps.map_or(u128::MAX, |u| u))
            .map(|(d, reg)| (d.max_ulps, reg.name));
        let (max_ulps, worst_region) = worst.unwrap_or((Some(0), "-"));
        let typical = &diffs[0];
        let lat = |k: usize| t.get(k).map_or("-".into(), |v| format!("{v:.2}"));
        println!(
            "{:<9} {:>8} {:>8.2} {:>6} {:>9} {:>8.3}% {:>8} {:>8}  {}",
            fun.name,
            if fun.inline {
                "inst".to_string()
            } else {
                format!("{:.2}", t[0])
            },
            t[1],
            if fun.inline {
                "-".to_string()
            } else {
                format!("{:.2}", t[0] / t[1])
            },
            fmt_ulps(max_ulps),
            100.0 * typical.differing as f64 / typical.n as f64,
            lat(2),
            lat(3),
            worst_region,
        );
        for (d, reg) in diffs.iter().zip(&fun.regions) {
            details.push(format!(
                "{:<9} {:<45} {:>9} {:>8.3}%  {}{}",
                fun.name,
                reg.name,
                fmt_ulps(d.max_ulps),
                100.0 * d.differing as f64 / d.n as f64,
                if d.max_ulps == Some(0) {
                    String::new()
                } else {
                    format!("worst at x = {:e}", d.worst.0)
                },
                if d.max_ulps != Some(0) && (fun.name == "atan2" || fun.name.starts_with("pow")) {
                    format!(", second = {:e}", d.worst.1)
                } else {
                    String::new()
                }
            ));
        }
    }
    println!("\nby region: max ulps, % differing, the worst input");
    for line in details {
        println!("{line}");
    }
    println!("\nload average at end {}", load_average());
    ExitCode::SUCCESS
}
