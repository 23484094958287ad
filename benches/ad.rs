//! The gradient benchmarks of issue 8: for each case, in one process, irad's
//! compiled primal and reverse-mode gradient (Cranelift JIT) against a
//! hand-written Rust primal and a hand-derived Rust adjoint (rustc, release),
//! plus forward mode's scaling with n and the compile time of a long chain.
//!
//! - `rosenbrock` (n = 100 000), `lotka_volterra` (gradient with respect to
//!   the four parameters), `branchy` (n = 100 000), `logsumexp` (n = 100 000;
//!   issue 21), `gmm` (issue 21: a Gaussian-mixture objective over 1 000
//!   points of 12 dimensions and 8 components, with scratch arrays rewritten
//!   in place per point; gradient with respect to the means, log-weights and
//!   inverse standard deviations, `@gmm.rev.wrt0_1_2`, not the points, and
//!   the Rust adjoint checked against central differences on five entries of
//!   each array first; data: xorshift64*, seed 21): the variants run in
//!   interleaved rounds after a warm-up, for at least the time budget (1.5 s
//!   per case; `--quick` 0.15 s), and the medians are reported. "irad grad" is
//!   one call of the compiled `@f.rev` (zero-filled shadows made once; they
//!   accumulate between runs, which does not change the cost); "irad grad
//!   (run)" is `CompiledGradient::run`, which also copies the arguments, makes
//!   the shadows and assembles the result.
//! - `mlp` (issue 12): a two-layer MLP, batch 64, 784 -> 128 tanh -> 10,
//!   mean softmax cross-entropy, written once with the bulk primitives
//!   (`mlp_bulk.irad`: matmul for both layers) and once with scalar loops
//!   (`mlp_scalar.irad`); the gradient is with respect to W1, b1, W2 and b2
//!   only (`@loss.rev.wrt0_1_2_3`, derived with activity analysis; x and the
//!   labels are inactive). Both programs and the hand-written Rust run in one
//!   set of interleaved rounds (at least 15; 3 with `--quick`); one result
//!   row per program, sharing the Rust times. Checked first: the gradients of
//!   both programs and of the Rust adjoint agree within 1e-10 of the largest
//!   entry, the values within 1e-12 (bulk and scalar agree to rounding:
//!   `matmul` sums in its kernel's order; the run prints both if they differ), and the Rust adjoint
//!   agrees with central differences of the Rust primal on five entries of
//!   each array. Data: xorshift64*, seed 12 (benches/common/handwritten.rs).
//! - `forward_scaling`: the full gradient of `sum(x)` by forward mode (batch
//!   width 8, so n / 8 passes) for n from 2 500 to 40 000, and the exponent of
//!   a least-squares fit of log time against log n; beside it sparse forward
//!   mode (`--sparse`: one pass with sparse tangents) and its exponent.
//! - `compile_chain`: `y <- sin(y) * 1.0001 + 0.5 * y` repeated N times (four
//!   IR statements per step), built with the builder API, its gradient
//!   `@chain.rev` derived (normalisation and reverse mode) and compiled with
//!   its pieces; the primal's compile time is reported apart.
//!
//! Every gradient is checked before it is timed: irad's reverse mode against
//! the hand-written adjoint (each entry within 1e-12 of the largest entry,
//! or 1e-14, or for logsumexp n roundings of 1, see `abs_tol_logsumexp`;
//! the per-entry relative error is reported too) and
//! against irad's forward mode (at n = 256 for the array cases, where forward
//! mode is cheap; not for the MLP, whose 101 770 parameters would take 12 722
//! forward passes: tests/bench_programs.rs compares forward and reverse mode
//! on a small MLP). A failed check makes the binary exit with status 1.
//!
//! Prints a table and writes the figures as JSON to
//! `$CARGO_TARGET_DIR/bench/results.json` (default: `target/bench/`).
//!
//! Run: `cargo bench --bench ad`; `-- --quick` for a smoke run, `-- --case
//! NAME` for one case (to profile it; `--case a,b` for several, run in the
//! order above), `-- --only 'irad grad,rust grad'` to
//! time only the variants of those names (as the table prints them; the
//! MLP's are also named `mlp_bulk: irad grad` and so on, to pick one
//! program's), `-- --n N` to give the array cases (rosenbrock, branchy,
//! logsumexp) another size than 100 000. Run
//! without any of these flags or `--bench` (as `cargo test --all-targets`
//! does), the binary does nothing: the programs' correctness is
//! tests/bench_programs.rs's job.

#[path = "common/chain.rs"]
mod chain;
#[path = "common/handwritten.rs"]
mod handwritten;

use irad::codegen::Jit;
use irad::ir::interp::{ArrayData, ArrayRef, RunOptions, Val};
use irad::ir::{FuncId, Module};
use irad::passes::forward::grad::{GradOptions, Gradient};
use irad::passes::reverse::Reverse;
use irad::{CompiledGradient, Mode};
use serde_json::{Value as Json, json};
use std::hint::black_box;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The cases, in the order they run.
const CASES: [&str; 8] = [
    "rosenbrock",
    "lotka_volterra",
    "branchy",
    "logsumexp",
    "gmm",
    "mlp",
    "forward_scaling",
    "compile_chain",
];

const ROSENBROCK: &str = include_str!("programs/rosenbrock.irad");
const LOTKA_VOLTERRA: &str = include_str!("programs/lotka_volterra.irad");
const BRANCHY: &str = include_str!("programs/branchy.irad");
const LOGSUMEXP: &str = include_str!("programs/logsumexp.irad");
const GMM: &str = include_str!("programs/gmm.irad");
const SUM: &str = include_str!("programs/sum.irad");
const MLP_BULK: &str = include_str!("programs/mlp_bulk.irad");
const MLP_SCALAR: &str = include_str!("programs/mlp_scalar.irad");

/// Relative and absolute tolerance of the gradient checks.
const REL_TOL: f64 = 1e-12;
const ABS_TOL: f64 = 1e-14;

/// The targets of issue 8.
const TARGET_GRAD_OVER_PRIMAL: f64 = 3.0;
const TARGET_GRAD_OVER_RUST: f64 = 1.5;
const TARGET_CHAIN_COMPILE_S: f64 = 0.5;
const TARGET_FORWARD_EXPONENT: f64 = 1.2;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes `--bench`; `cargo test --benches` (or
    // `--all-targets`) runs this binary without it, possibly with libtest's
    // flags: then there is nothing to test here (tests/bench_programs.rs
    // checks the programs), unless one of this binary's own flags asks for a run.
    let ours = ["--bench", "--quick", "--case", "--only"];
    if !args.iter().any(|a| ours.contains(&a.as_str())) {
        println!("ad: a benchmark; run it with `cargo bench --bench ad` (or pass --bench)");
        return ExitCode::SUCCESS;
    }
    let cfg = match Config::from_args(args.into_iter()) {
        Ok(cfg) => cfg,
        Err(msg) => {
            eprintln!("error: {msg}");
            eprintln!("usage: ad [--quick] [--case NAME,...] [--only VARIANT,...] [--n N]");
            return ExitCode::from(2);
        }
    };
    let machine = Machine::now();
    println!(
        "machine: {} ({} cpus), load average at start {}{}",
        machine.model,
        machine.cpus,
        machine.load_start,
        if cfg.quick { ", --quick" } else { "" }
    );
    let mut report = Report::default();
    for case in CASES {
        if cfg
            .case
            .as_ref()
            .is_some_and(|cs| !cs.iter().any(|c| c == case))
        {
            continue;
        }
        match case {
            "rosenbrock" => {
                let x = handwritten::rosenbrock_point(cfg.n);
                let c = ArrayCase {
                    name: "rosenbrock",
                    text: ROSENBROCK,
                    primal: handwritten::rosenbrock,
                    adjoint: handwritten::rosenbrock_adjoint,
                    abs_tol: abs_tol_fixed,
                };
                report.cases.push(c.run(&x, &cfg, &mut report.failures));
            }
            "lotka_volterra" => {
                report
                    .cases
                    .push(lotka_volterra(&cfg, &mut report.failures));
            }
            "branchy" => {
                let x = handwritten::branchy_point(cfg.n);
                let c = ArrayCase {
                    name: "branchy",
                    text: BRANCHY,
                    primal: handwritten::branchy,
                    adjoint: handwritten::branchy_adjoint,
                    abs_tol: abs_tol_fixed,
                };
                report.cases.push(c.run(&x, &cfg, &mut report.failures));
            }
            "logsumexp" => {
                let x = handwritten::logsumexp_point(cfg.n);
                let c = ArrayCase {
                    name: "logsumexp",
                    text: LOGSUMEXP,
                    primal: handwritten::logsumexp,
                    adjoint: handwritten::logsumexp_adjoint,
                    abs_tol: abs_tol_logsumexp,
                };
                report.cases.push(c.run(&x, &cfg, &mut report.failures));
            }
            "gmm" => {
                report.cases.push(gmm(&cfg, &mut report.failures));
            }
            "mlp" => {
                let results = mlp(&cfg, &mut report.failures);
                report.cases.extend(results);
            }
            "forward_scaling" => {
                report.forward = Some(forward_scaling(&cfg, &mut report.failures));
            }
            "compile_chain" => {
                report.chain = Some(compile_chain(&cfg, &mut report.failures));
            }
            _ => unreachable!("every case is handled"),
        }
    }
    let machine = machine.finish();
    report.print(&machine);
    match report.write(&machine, &cfg) {
        Ok(path) => println!("\nwrote {path}"),
        Err(e) => {
            eprintln!("error: cannot write the results: {e}");
            return ExitCode::FAILURE;
        }
    }
    if report.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("\n{} check(s) failed:", report.failures.len());
        for f in &report.failures {
            eprintln!("  {f}");
        }
        ExitCode::FAILURE
    }
}

/// The command line.
struct Config {
    /// A short smoke run: small budgets, fewer sizes.
    quick: bool,
    /// Run only these cases (in `CASES`'s order).
    case: Option<Vec<String>>,
    /// Time only the variants named in this comma-separated list.
    only: Option<String>,
    /// Least time spent in the timed rounds of one case.
    budget: Duration,
    /// The size of the array cases (rosenbrock, branchy, logsumexp).
    n: usize,
}

impl Config {
    fn from_args(mut args: impl Iterator<Item = String>) -> Result<Config, String> {
        let mut cfg = Config {
            quick: false,
            case: None,
            only: None,
            budget: Duration::from_millis(1500),
            n: 100_000,
        };
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--quick" => {
                    cfg.quick = true;
                    cfg.budget = Duration::from_millis(150);
                }
                "--case" => {
                    let names = args.next().ok_or("--case needs a name")?;
                    let mut cases = Vec::new();
                    for name in names.split(',').map(str::trim) {
                        if !CASES.contains(&name) {
                            return Err(format!(
                                "unknown case `{name}` (cases: {})",
                                CASES.join(", ")
                            ));
                        }
                        cases.push(name.to_string());
                    }
                    cfg.case = Some(cases);
                }
                "--n" => {
                    let n = args.next().ok_or("--n needs a size")?;
                    cfg.n = n
                        .parse()
                        .ok()
                        .filter(|&n| n >= 2)
                        .ok_or(format!("--n {n}: want a size of at least 2"))?;
                }
                "--only" => cfg.only = Some(args.next().ok_or("--only needs variant names")?),
                // `cargo bench` passes `--bench` to every bench binary.
                "--bench" => {}
                other => return Err(format!("unknown argument `{other}`")),
            }
        }
        Ok(cfg)
    }

    /// Whether `--only` keeps `variant`: named in full, or, for a variant
    /// named `PROGRAM: NAME` (the MLP's), by NAME alone.
    fn wants(&self, variant: &str) -> bool {
        let short = variant.split_once(": ").map(|(_, name)| name);
        self.only.as_deref().is_none_or(|list| {
            list.split(',')
                .map(str::trim)
                .any(|name| name == variant || short == Some(name))
        })
    }
}

/// The machine, and how busy it was.
struct Machine {
    model: String,
    cpus: usize,
    load_start: String,
    load_end: String,
}

impl Machine {
    fn now() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name")?.split(':').nth(1))
            .map_or_else(|| "unknown".to_string(), |m| m.trim().to_string());
        Machine {
            model,
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            load_start: load_average(),
            load_end: String::new(),
        }
    }

    fn finish(self) -> Machine {
        Machine {
            load_end: load_average(),
            ..self
        }
    }
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` has them.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// One timed variant of a case: a name and what one run does.
struct Variant<'a> {
    name: &'static str,
    run: Box<dyn FnMut() + 'a>,
}

/// Medians of the variants (in their order) and the number of timed rounds.
struct Timings {
    medians: Vec<Option<Duration>>,
    rounds: usize,
}

/// Runs the variants in interleaved rounds, each round running each variant
/// once: two rounds of warm-up, then rounds until `budget` has passed (at
/// least `min_rounds`). Variants that `cfg` leaves out are not run.
fn measure(
    variants: &mut [Variant<'_>],
    cfg: &Config,
    budget: Duration,
    min_rounds: usize,
) -> Timings {
    let active: Vec<bool> = variants.iter().map(|v| cfg.wants(v.name)).collect();
    for _ in 0..2 {
        for (v, _) in variants.iter_mut().zip(&active).filter(|(_, a)| **a) {
            (v.run)();
        }
    }
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); variants.len()];
    let start = Instant::now();
    let mut rounds = 0;
    while rounds < min_rounds || start.elapsed() < budget {
        for (k, v) in variants.iter_mut().enumerate() {
            if active[k] {
                let t = Instant::now();
                (v.run)();
                samples[k].push(t.elapsed());
            }
        }
        rounds += 1;
    }
    Timings {
        medians: samples.into_iter().map(median).collect(),
        rounds,
    }
}

fn median(mut xs: Vec<Duration>) -> Option<Duration> {
    xs.sort();
    xs.get(xs.len() / 2).copied()
}

/// An array case: the program, its function's name, and the hand-written primal and adjoint.
struct ArrayCase {
    name: &'static str,
    text: &'static str,
    primal: fn(&[f64]) -> f64,
    adjoint: fn(&[f64], &mut [f64]) -> f64,
    /// The absolute tolerance of the gradient checks at size n.
    abs_tol: fn(usize) -> f64,
}

/// The absolute tolerance of a gradient check: [`ABS_TOL`], whatever the size.
fn abs_tol_fixed(_: usize) -> f64 {
    ABS_TOL
}

/// The absolute tolerance of logsumexp's gradient checks at size n: n
/// roundings of 1. Through `f = log(s) + m`, m's adjoint is `1 - sum_i
/// exp(x[i] - m) / s`, zero in exact arithmetic but the rounding of an
/// n-term sum of about 1 in floating point (a few 1e-15 at n = 100 000), and
/// it lands on the largest element's entry, while the entries themselves are
/// about 1 / n: what the program computes, not an error of the reverse
/// transform. The hand-written adjoint, `exp(x[i] - f)`, has no such term.
fn abs_tol_logsumexp(n: usize) -> f64 {
    n as f64 * f64::EPSILON
}

/// The result of one of the ratio cases (rosenbrock, lotka_volterra,
/// branchy, logsumexp, gmm, and one per MLP program).
struct CaseResult {
    name: &'static str,
    size: String,
    rounds: usize,
    /// irad primal, irad grad (`@f.rev`), irad grad (`run`), rust primal, rust
    /// grad, then the ablations of `run`: without activity analysis and
    /// optimiser, with activity analysis only.
    times: [Option<Duration>; 7],
    checks: Json,
}

const VARIANTS: [&str; 7] = [
    "irad primal",
    "irad grad",
    "irad grad (run)",
    "rust primal",
    "rust grad",
    "irad grad (run, no activity, no schedule)",
    "irad grad (run, activity, no schedule)",
];

/// irad's compiled versions of one case: the primal, `@f.rev` (or, for a
/// gradient with respect to some arguments only, `@f.rev.wrtI_J`), and the
/// gradient through `CompiledGradient::run`.
struct Irad<'r> {
    primal: irad::Compiled,
    pf: FuncId,
    /// What `irad::jit_reverse` makes, with `rev_wrt` in place of `rev`.
    rev: Jit<'r>,
    rf: FuncId,
    /// The forward sweep and the pullback that `rf` calls.
    pieces: (FuncId, FuncId),
    grad: CompiledGradient,
    /// `grad` derived without activity analysis and not optimised.
    plain: CompiledGradient,
    /// `grad` derived with activity analysis, not optimised.
    active: CompiledGradient,
}

impl<'r> Irad<'r> {
    /// Derives and compiles all three for `f` (named `name`) of `m`, with
    /// respect to the arguments in `wrt` (`None`: all).
    fn new(
        m: &Module,
        f: FuncId,
        name: &str,
        args: &[Val],
        wrt: Option<&[usize]>,
        registry: &'r irad::rules::Registry,
    ) -> Irad<'r> {
        let primal = irad::jit_primal(m).expect("the primal compiles");
        let pf = primal.func(name).expect("the function exists");
        primal.compile(pf).expect("the primal compiles");
        let all: Vec<usize> = (0..args.len()).collect();
        let wrt_list = wrt.unwrap_or(&all);
        let (mut rev, rf, pieces) = jit_reverse_wrt(m, f, wrt_list, registry);
        rev.compile(rf).expect("@f.rev compiles");
        let grad_opts = GradOptions {
            wrt: wrt.map(<[usize]>::to_vec),
            ..GradOptions::default()
        };
        let grad = irad::jit_gradient(
            m,
            registry,
            &irad::GradRequest {
                mode: Mode::Reverse,
                opts: grad_opts.clone(),
                ..irad::GradRequest::new(f, args)
            },
        )
        .expect("the gradient derives");
        grad.compile().expect("the gradient compiles");
        let unoptimised = |activity: bool| {
            let opts = GradOptions {
                activity,
                ..grad_opts.clone()
            };
            let g = irad::jit_gradient(
                m,
                registry,
                &irad::GradRequest {
                    mode: Mode::Reverse,
                    opts: opts.clone(),
                    schedule: Some(irad::passes::optimise::Strategy::Id),
                    ..irad::GradRequest::new(f, args)
                },
            )
            .expect("the gradient derives");
            g.compile().expect("the gradient compiles");
            g
        };
        Irad {
            primal,
            pf,
            rev,
            rf,
            pieces,
            grad,
            plain: unoptimised(false),
            active: unoptimised(true),
        }
    }

    /// The timed variants of irad: the first three of [`VARIANTS`], then its
    /// last two.
    fn variants<'a>(
        &'a mut self,
        args: &'a [Val],
        rev_args: &'a [Val],
        run: &'a RunOptions,
    ) -> [Variant<'a>; 5] {
        let Irad {
            primal,
            pf,
            rev,
            rf,
            grad,
            plain,
            active,
            ..
        } = self;
        let (pf, rf) = (*pf, *rf);
        [
            Variant {
                name: VARIANTS[0],
                run: Box::new(move || {
                    black_box(
                        primal
                            .call(pf, black_box(args), run)
                            .expect("the primal runs"),
                    );
                }),
            },
            Variant {
                name: VARIANTS[1],
                run: Box::new(move || {
                    black_box(rev.run(rf, black_box(rev_args), run).expect("@f.rev runs"));
                }),
            },
            Variant {
                name: VARIANTS[2],
                run: Box::new(move || {
                    black_box(grad.run(black_box(args), run).expect("the gradient runs"));
                }),
            },
            Variant {
                name: VARIANTS[5],
                run: Box::new(move || {
                    black_box(plain.run(black_box(args), run).expect("the gradient runs"));
                }),
            },
            Variant {
                name: VARIANTS[6],
                run: Box::new(move || {
                    black_box(active.run(black_box(args), run).expect("the gradient runs"));
                }),
            },
        ]
    }
}

impl ArrayCase {
    fn run(&self, x: &[f64], cfg: &Config, failures: &mut Vec<String>) -> CaseResult {
        let n = x.len();
        println!("\n== {} (n = {n})", self.name);
        let (m, f) = program(self.name, self.text);
        let registry = irad::rules::Registry::new();
        let run_opts = RunOptions::default();
        let xv = Val::f64_array(x.to_vec());
        let args = vec![xv.clone()];

        let mut irad = Irad::new(&m, f, self.name, &args, None, &registry);

        // Checks, before any timing.
        let want_value = (self.primal)(x);
        println!("  value {want_value:?} (rust primal)");
        let mut want_grad = vec![0.0; n];
        let want_adj_value = (self.adjoint)(x, &mut want_grad);
        let got_value = as_f64(
            &irad
                .primal
                .call(irad.pf, &args, &run_opts)
                .expect("the primal runs"),
        );
        let shadow = Val::f64_array(vec![0.0; n]);
        let rev_args = vec![xv.clone(), shadow.clone(), Val::F64(1.0)];
        let rev_out = irad
            .rev
            .run(irad.rf, &rev_args, &run_opts)
            .expect("@f.rev runs");
        let rev_value = floats(&rev_out)[0];
        let rev_grad = floats(&shadow);
        let run_out = irad.grad.run(&args, &run_opts).expect("the gradient runs");
        let run_grad = gradient_floats(&run_out);
        let mut checks = Checks::new(self.name, failures);
        checks.abs = (self.abs_tol)(n);
        checks.scalar("primal vs rust", got_value, want_value);
        checks.scalar(
            "rust adjoint value vs rust primal",
            want_adj_value,
            want_value,
        );
        checks.scalar("@f.rev value vs primal", rev_value, got_value);
        checks.vector("@f.rev gradient vs rust adjoint", &rev_grad, &want_grad);
        checks.vector("run gradient vs @f.rev", &run_grad, &rev_grad);
        checks.scalar("run value vs primal", as_f64(&run_out.value), got_value);
        // Forward mode is O(n^2) for a full gradient: compare on a prefix.
        let small = &x[..n.min(256)];
        let small_args = vec![Val::f64_array(small.to_vec())];
        let fwd_grad = jit_gradient_floats(&m, f, &small_args, &registry, Mode::Forward);
        let rev_small = jit_gradient_floats(&m, f, &small_args, &registry, Mode::Reverse);
        let mut want_small = vec![0.0; small.len()];
        (self.adjoint)(small, &mut want_small);
        checks.abs = (self.abs_tol)(small.len());
        checks.vector("forward vs reverse (n = 256)", &fwd_grad, &rev_small);
        checks.vector("forward vs rust adjoint (n = 256)", &fwd_grad, &want_small);
        let checks = checks.finish();

        // Timing: the shadow accumulates across runs; the cost is the same.
        let mut rust_grad = vec![0.0; n];
        let xs = x.to_vec();
        let timings = {
            let [a, b, c, d, e] = irad.variants(&args, &rev_args, &run_opts);
            let mut variants = [
                a,
                b,
                c,
                Variant {
                    name: VARIANTS[3],
                    run: Box::new(|| {
                        black_box((self.primal)(black_box(&xs)));
                    }),
                },
                Variant {
                    name: VARIANTS[4],
                    run: Box::new(|| {
                        black_box((self.adjoint)(black_box(&xs), black_box(&mut rust_grad)));
                    }),
                },
                d,
                e,
            ];
            measure(&mut variants, cfg, cfg.budget, 5)
        };
        print_split(&mut irad, &args, &run_opts, timings.rounds);
        let result = CaseResult {
            name: self.name,
            size: format!("n = {n}"),
            rounds: timings.rounds,
            times: medians7(&timings),
            checks,
        };
        result.print_row();
        result
    }
}

/// Lotka-Volterra: the gradient with respect to the four parameters.
fn lotka_volterra(cfg: &Config, failures: &mut Vec<String>) -> CaseResult {
    let name = "lotka_volterra";
    println!("\n== {name} ({} RK4 steps)", handwritten::LV_STEPS);
    let (m, f) = program(name, LOTKA_VOLTERRA);
    let registry = irad::rules::Registry::new();
    let run_opts = RunOptions::default();
    let p = handwritten::LV_PARAMS;
    let args: Vec<Val> = p.iter().map(|&v| Val::F64(v)).collect();
    let mut rev_args = args.clone();
    rev_args.push(Val::F64(1.0));

    let mut irad = Irad::new(&m, f, name, &args, None, &registry);

    let want_value = handwritten::lotka_volterra(&p);
    let (want_adj_value, want_grad) = handwritten::lotka_volterra_adjoint(&p);
    let got_value = as_f64(
        &irad
            .primal
            .call(irad.pf, &args, &run_opts)
            .expect("the primal runs"),
    );
    let rev_out = floats(
        &irad
            .rev
            .run(irad.rf, &rev_args, &run_opts)
            .expect("@f.rev runs"),
    );
    let run_out = irad.grad.run(&args, &run_opts).expect("the gradient runs");
    let fwd_grad = jit_gradient_floats(&m, f, &args, &registry, Mode::Forward);
    let mut checks = Checks::new(name, failures);
    checks.scalar("primal vs rust", got_value, want_value);
    checks.scalar(
        "rust adjoint value vs rust primal",
        want_adj_value,
        want_value,
    );
    checks.scalar("@f.rev value vs primal", rev_out[0], got_value);
    checks.vector("@f.rev gradient vs rust adjoint", &rev_out[1..], &want_grad);
    checks.vector(
        "run gradient vs @f.rev",
        &gradient_floats(&run_out),
        &rev_out[1..],
    );
    checks.vector("forward vs reverse", &fwd_grad, &rev_out[1..]);
    let checks = checks.finish();

    let timings = {
        let [a, b, c, d, e] = irad.variants(&args, &rev_args, &run_opts);
        let mut variants = [
            a,
            b,
            c,
            Variant {
                name: VARIANTS[3],
                run: Box::new(|| {
                    black_box(handwritten::lotka_volterra(black_box(&p)));
                }),
            },
            Variant {
                name: VARIANTS[4],
                run: Box::new(|| {
                    black_box(handwritten::lotka_volterra_adjoint(black_box(&p)));
                }),
            },
            d,
            e,
        ];
        measure(&mut variants, cfg, cfg.budget, 5)
    };
    let result = CaseResult {
        name,
        size: format!("{} steps", handwritten::LV_STEPS),
        rounds: timings.rounds,
        times: medians7(&timings),
        checks,
    };
    result.print_row();
    result
}

/// The Gaussian mixture's gradient is with respect to mu, logw and invs, not the points.
const GMM_WRT: [usize; 3] = [0, 1, 2];

/// The seed of the Gaussian mixture's data.
const GMM_SEED: u64 = 21;

/// The Gaussian mixture of issue 21 (1 000 points, 12 dimensions, 8
/// components; scratch arrays rewritten per point and per component),
/// gradient with respect to the parameters: irad against the hand-written
/// Rust, which is checked against central differences first.
fn gmm(cfg: &Config, failures: &mut Vec<String>) -> CaseResult {
    let name = "gmm";
    let dims = handwritten::GMM_DIMS;
    let handwritten::GmmDims { n, d, k } = dims;
    println!(
        "\n== {name} ({n} points, {d} dimensions, {k} components; \
         gradient with respect to mu, logw, invs)"
    );
    let (m, f) = program(name, GMM);
    let registry = irad::rules::Registry::new();
    let run_opts = RunOptions::default();
    let problem = handwritten::gmm_problem(dims, GMM_SEED);
    let mut args: Vec<Val> = problem
        .params
        .arrays()
        .into_iter()
        .map(|a| Val::f64_array(a.to_vec()))
        .collect();
    args.push(Val::f64_array(problem.x.clone()));

    let mut irad = Irad::new(&m, f, name, &args, Some(&GMM_WRT), &registry);

    let want_value = handwritten::gmm(&problem);
    println!("  value {want_value:?} (rust primal)");
    let mut want = handwritten::GmmParams::zeros(dims);
    let want_adj_value = handwritten::gmm_adjoint(&problem, &mut want);
    let want_grad = want.arrays().concat();
    let mut checks = Checks::new(name, failures);
    checks.scalar(
        "rust adjoint value vs rust primal",
        want_adj_value,
        want_value,
    );
    checks.scalar(
        "rust primal in the program's structure vs rust primal",
        handwritten::gmm_program_order(&problem),
        want_value,
    );
    for (a, (g, what)) in want
        .arrays()
        .into_iter()
        .zip(["mu", "logw", "invs"])
        .enumerate()
    {
        let len = g.len();
        let coords = [0, len / 3, len / 2, (7 * len) / 9, len - 1];
        let fd: Vec<f64> = coords
            .iter()
            .map(|&i| handwritten::gmm_central_difference(&problem, a, i))
            .collect();
        let adj: Vec<f64> = coords.iter().map(|&i| g[i]).collect();
        checks.vector_within(
            &format!("central differences vs rust adjoint ({what}, 5 entries)"),
            &fd,
            &adj,
            GMM_FD_TOL,
        );
    }
    let got_value = as_f64(
        &irad
            .primal
            .call(irad.pf, &args, &run_opts)
            .expect("the primal runs"),
    );
    checks.scalar("primal vs rust", got_value, want_value);
    // `@gmm.rev.wrt0_1_2`: the arguments, a shadow per f64 array (x too,
    // which it leaves alone), the seed.
    let shadows = || -> Vec<Val> {
        args.iter()
            .map(|a| Val::f64_array(vec![0.0; floats(a).len()]))
            .collect()
    };
    let check_shadows = shadows();
    let mut call = args.clone();
    call.extend(check_shadows.iter().cloned());
    call.push(Val::F64(1.0));
    let out = irad
        .rev
        .run(irad.rf, &call, &run_opts)
        .expect("@f.rev runs");
    let rev_grad: Vec<f64> = check_shadows[..3].iter().flat_map(floats).collect();
    checks.scalar("@f.rev value vs primal", floats(&out)[0], got_value);
    checks.vector("@f.rev gradient vs rust adjoint", &rev_grad, &want_grad);
    let run_out = irad.grad.run(&args, &run_opts).expect("the gradient runs");
    checks.vector(
        "run gradient vs @f.rev",
        &gradient_floats(&run_out),
        &rev_grad,
    );
    checks.scalar("run value vs primal", as_f64(&run_out.value), got_value);
    // Forward mode: (2 d + 1) k = 200 inputs, 25 passes of width 8.
    let opts = GradOptions {
        lanes: irad::ir::Lanes::dense(8).expect("8 is not 0"),
        wrt: Some(GMM_WRT.to_vec()),
        ..GradOptions::default()
    };
    let fwd = irad::jit_gradient(
        &m,
        &registry,
        &irad::GradRequest {
            mode: Mode::Forward,
            opts,
            ..irad::GradRequest::new(f, &args)
        },
    )
    .expect("the forward gradient derives");
    let fwd_out = fwd
        .run(&args, &run_opts)
        .expect("the forward gradient runs");
    checks.vector("forward vs reverse", &gradient_floats(&fwd_out), &rev_grad);
    let x_shadow_written = floats(&check_shadows[3]).iter().any(|&v| v != 0.0);
    println!(
        "  tape after the forward sweep {:.1} kB; the shadow of x {}",
        tape_after_forward_sweep(&mut irad, &args, &run_opts) as f64 / 1e3,
        if x_shadow_written {
            "was written (x's cotangent was computed, though x is inactive)"
        } else {
            "was left alone"
        }
    );
    let checks = checks.finish();

    // Fresh shadows for the timed runs; they accumulate, which does not
    // change the cost.
    let mut rev_args = args.clone();
    rev_args.extend(shadows());
    rev_args.push(Val::F64(1.0));
    let mut rust_grad = handwritten::GmmParams::zeros(dims);
    let timings = {
        let [a, b, c, d, e] = irad.variants(&args, &rev_args, &run_opts);
        let mut variants = [
            a,
            b,
            c,
            Variant {
                name: VARIANTS[3],
                run: Box::new(|| {
                    black_box(handwritten::gmm(black_box(&problem)));
                }),
            },
            Variant {
                name: VARIANTS[4],
                run: Box::new(|| {
                    black_box(handwritten::gmm_adjoint(
                        black_box(&problem),
                        black_box(&mut rust_grad),
                    ));
                }),
            },
            d,
            e,
            Variant {
                name: RUST_PROGRAM_ORDER,
                run: Box::new(|| {
                    black_box(handwritten::gmm_program_order(black_box(&problem)));
                }),
            },
        ];
        measure(&mut variants, cfg, cfg.budget, 5)
    };
    print_split(&mut irad, &args, &run_opts, timings.rounds);
    // Like the MLP's: rustc on the program's own structure (see
    // `handwritten::gmm_program_order`) beside the hand-fused primal.
    let same = timings.medians.get(7).copied().flatten();
    println!(
        "  {RUST_PROGRAM_ORDER} {}; irad primal / that {}",
        fmt_time(same),
        fmt_ratio(ratio(timings.medians.first().copied().flatten(), same)),
    );
    let result = CaseResult {
        name,
        size: format!("n = {n}, d = {d}, k = {k}"),
        rounds: timings.rounds,
        times: medians7(&timings),
        checks,
    };
    result.print_row();
    result
}

/// The MLP programs: one function, written with the bulk primitives and with
/// scalar loops.
const MLP_PROGRAMS: [(&str, &str); 2] = [("mlp_bulk", MLP_BULK), ("mlp_scalar", MLP_SCALAR)];

/// The extra variant of the MLP and gmm cases: the hand-written primal with
/// the program's own loop nests (`handwritten::mlp_program_order`,
/// `handwritten::gmm_program_order`).
const RUST_PROGRAM_ORDER: &str = "rust primal (program's loop order)";

/// The seed of the MLP's data.
const MLP_SEED: u64 = 12;

/// The MLP's gradient is with respect to W1, b1, W2 and b2, not x or the labels.
const MLP_WRT: [usize; 4] = [0, 1, 2, 3];

/// Relative tolerance of the MLP's gradient checks (issue 12).
const MLP_REL_TOL: f64 = 1e-10;

/// Relative tolerance of central differences against the adjoint.
const MLP_FD_TOL: f64 = 1e-6;

/// Relative tolerance of central differences against the Gaussian mixture's
/// adjoint (the differences' own error is of order 1e-8 here).
const GMM_FD_TOL: f64 = 1e-6;

/// The MLP of issue 12 (batch 64, 784 -> 128 tanh -> 10, softmax
/// cross-entropy), gradient with respect to the weights and biases: both
/// programs and the hand-written Rust, checked against each other and against
/// central differences, then timed in one interleaved run. One result per
/// program; the Rust times are the same in both.
fn mlp(cfg: &Config, failures: &mut Vec<String>) -> Vec<CaseResult> {
    let dims = handwritten::MLP_DIMS;
    let handwritten::MlpDims { nb, nin, nh, nout } = dims;
    println!(
        "\n== mlp (batch {nb}, {nin} -> {nh} tanh -> {nout}, softmax cross-entropy; \
         gradient with respect to W1, b1, W2, b2)"
    );
    let problem = handwritten::mlp_problem(dims, MLP_SEED);
    let args = mlp_args(&problem);
    let registry = irad::rules::Registry::new();
    let run_opts = RunOptions::default();

    let want_value = handwritten::mlp(&problem);
    let mut want = handwritten::MlpParams::zeros(dims);
    let want_adj_value = handwritten::mlp_adjoint(&problem, &mut want);
    let want_grad = want.arrays().concat();
    let mut checks = Checks::new("mlp", failures);
    checks.scalar(
        "rust adjoint value vs rust primal",
        want_adj_value,
        want_value,
    );
    checks.scalar(
        "rust primal in the program's loop order vs rust primal",
        handwritten::mlp_program_order(&problem),
        want_value,
    );
    // Central differences of the Rust primal on a few coordinates of each array.
    let names = ["w1", "b1", "w2", "b2"];
    for (k, g) in want.arrays().into_iter().enumerate() {
        let n = g.len();
        let coords = [0, n / 3, n / 2, (7 * n) / 9, n - 1];
        let fd: Vec<f64> = coords
            .iter()
            .map(|&i| handwritten::mlp_central_difference(&problem, k, i))
            .collect();
        let adj: Vec<f64> = coords.iter().map(|&i| g[i]).collect();
        checks.vector_within(
            &format!(
                "central differences vs rust adjoint ({}, 5 entries)",
                names[k]
            ),
            &fd,
            &adj,
            MLP_FD_TOL,
        );
    }

    let mut irads = Vec::new();
    let mut rev_args = Vec::new();
    let mut values = Vec::new();
    let mut grads = Vec::new();
    for (file, text) in MLP_PROGRAMS {
        let (m, f) = program_fn(file, "loss", text);
        let mut irad = Irad::new(&m, f, "loss", &args, Some(&MLP_WRT), &registry);
        let value = as_f64(
            &irad
                .primal
                .call(irad.pf, &args, &run_opts)
                .expect("the primal runs"),
        );
        checks.scalar(&format!("{file}: primal vs rust"), value, want_value);
        // `@loss.rev.wrt0_1_2_3`: the arguments, a shadow per f64 array (x
        // too, which it leaves alone), the seed.
        let shadows: Vec<Val> = args[..5]
            .iter()
            .map(|a| Val::f64_array(vec![0.0; floats(a).len()]))
            .collect();
        let mut call = args.clone();
        call.extend(shadows.iter().cloned());
        call.push(Val::F64(1.0));
        let out = irad
            .rev
            .run(irad.rf, &call, &run_opts)
            .expect("@f.rev runs");
        let grad: Vec<f64> = shadows[..4].iter().flat_map(floats).collect();
        checks.scalar(
            &format!("{file}: @f.rev value vs primal"),
            floats(&out)[0],
            value,
        );
        checks.vector_within(
            &format!("{file}: @f.rev gradient vs rust adjoint"),
            &grad,
            &want_grad,
            MLP_REL_TOL,
        );
        let run_out = irad.grad.run(&args, &run_opts).expect("the gradient runs");
        checks.vector(
            &format!("{file}: run gradient vs @f.rev"),
            &gradient_floats(&run_out),
            &grad,
        );
        // x is not differentiated; a pullback that still computes its
        // cotangent (into x's shadow) does work nobody asked for.
        let x_shadow_written = floats(&shadows[4]).iter().any(|&v| v != 0.0);
        println!(
            "  {file}: tape after the forward sweep {:.1} MB; the shadow of x {}",
            tape_after_forward_sweep(&mut irad, &args, &run_opts) as f64 / 1e6,
            if x_shadow_written {
                "was written (x's cotangent was computed, though x is inactive)"
            } else {
                "was left alone"
            }
        );
        values.push(value);
        grads.push(grad);
        irads.push(irad);
        // Fresh shadows for the timed runs; they accumulate, which does not
        // change the cost.
        let mut timed = args.clone();
        timed.extend(
            args[..5]
                .iter()
                .map(|a| Val::f64_array(vec![0.0; floats(a).len()])),
        );
        timed.push(Val::F64(1.0));
        rev_args.push(timed);
    }
    checks.scalar("bulk value vs scalar value", values[0], values[1]);
    checks.vector_within(
        "bulk gradient vs scalar gradient",
        &grads[0],
        &grads[1],
        MLP_REL_TOL,
    );
    println!(
        "  bulk and scalar values {}",
        if values[0].to_bits() == values[1].to_bits() {
            "agree bit for bit".to_string()
        } else {
            format!("differ: {:e} and {:e}", values[0], values[1])
        }
    );
    let checks = checks.finish();

    let mut rust_grad = handwritten::MlpParams::zeros(dims);
    let timings = {
        let [bulk, scalar] = &mut irads[..] else {
            unreachable!("two programs")
        };
        let [ba, bb, bc, bd, be] = named(
            MLP_PROGRAMS[0].0,
            bulk.variants(&args, &rev_args[0], &run_opts),
        );
        let [sa, sb, sc, sd, se] = named(
            MLP_PROGRAMS[1].0,
            scalar.variants(&args, &rev_args[1], &run_opts),
        );
        let mut variants = [
            ba,
            bb,
            bc,
            bd,
            be,
            sa,
            sb,
            sc,
            sd,
            se,
            Variant {
                name: VARIANTS[3],
                run: Box::new(|| {
                    black_box(handwritten::mlp(black_box(&problem)));
                }),
            },
            Variant {
                name: VARIANTS[4],
                run: Box::new(|| {
                    black_box(handwritten::mlp_adjoint(
                        black_box(&problem),
                        black_box(&mut rust_grad),
                    ));
                }),
            },
            Variant {
                name: RUST_PROGRAM_ORDER,
                run: Box::new(|| {
                    black_box(handwritten::mlp_program_order(black_box(&problem)));
                }),
            },
        ];
        // A round takes about a quarter of a second (the scalar program's
        // gradient dominates it): more rounds than the budget alone gives,
        // so that the bulk program's medians are not of five samples.
        measure(
            &mut variants,
            cfg,
            cfg.budget,
            if cfg.quick { 3 } else { 15 },
        )
    };
    let t = |k: usize| timings.medians.get(k).copied().flatten();
    let results: Vec<CaseResult> = MLP_PROGRAMS
        .iter()
        .enumerate()
        .map(|(p, (file, _))| {
            let o = 5 * p;
            CaseResult {
                name: file,
                size: format!("batch {nb}, {nin}-{nh}-{nout}"),
                rounds: timings.rounds,
                times: [t(o), t(o + 1), t(o + 2), t(10), t(11), t(o + 3), t(o + 4)],
                checks: checks.clone(),
            }
        })
        .collect();
    for r in &results {
        println!("  -- {}", r.name);
        r.print_row();
    }
    println!(
        "  bulk grad / scalar grad {}, bulk primal / scalar primal {}, rust grad / rust primal {}",
        fmt_ratio(ratio(results[0].times[1], results[1].times[1])),
        fmt_ratio(ratio(results[0].times[0], results[1].times[0])),
        fmt_ratio(ratio(t(11), t(10))),
    );
    // The hand-written primal runs its matrix products along rows; the
    // scalar program's loop nest, compiled by rustc, is the like-for-like
    // comparison of the code irad generates for that program.
    println!(
        "  {RUST_PROGRAM_ORDER} {}; mlp_scalar: irad primal / that {}",
        fmt_time(t(12)),
        fmt_ratio(ratio(results[1].times[0], t(12))),
    );
    results
}

/// The variants renamed `PROGRAM: NAME`, so that `--only` can pick one
/// program's (and still picks both by NAME alone).
fn named<'a, const N: usize>(program: &str, mut variants: [Variant<'a>; N]) -> [Variant<'a>; N] {
    for v in &mut variants {
        // A dozen short strings, once per run of the binary.
        v.name = Box::leak(format!("{program}: {}", v.name).into_boxed_str());
    }
    variants
}

/// The MLP programs' arguments: w1, b1, w2, b2, x, labels.
fn mlp_args(p: &handwritten::MlpProblem) -> Vec<Val> {
    let mut args: Vec<Val> = p
        .params
        .arrays()
        .into_iter()
        .map(|a| Val::f64_array(a.to_vec()))
        .collect();
    args.push(Val::f64_array(p.x.clone()));
    args.push(Val::Array(ArrayRef::new(ArrayData::I64(p.labels.clone()))));
    args
}

/// The bytes on irad's tapes between the forward sweep and the pullback of
/// `irad`'s gradient at `args` (the pullback then runs, emptying them).
/// Where a gradient's time goes: the medians of the forward sweep and of the
/// pullback, each timed alone over `rounds` runs of the pair (a profile, not
/// a target; printed under the case).
fn print_split(irad: &mut Irad<'_>, args: &[Val], run: &RunOptions, rounds: usize) {
    let (fwd, back) = irad.pieces;
    let mut call = args.to_vec();
    for a in args {
        if let Val::Array(arr) = a
            && let ArrayData::F64(xs) = &*arr.0.borrow()
        {
            call.push(Val::f64_array(vec![0.0; xs.len()]));
        }
    }
    let (mut tf, mut tb) = (Vec::new(), Vec::new());
    for _ in 0..rounds.clamp(5, 200) {
        let t0 = Instant::now();
        black_box(
            irad.rev
                .run(fwd, black_box(&call), run)
                .expect("the forward sweep runs"),
        );
        let t1 = Instant::now();
        black_box(
            irad.rev
                .run(back, black_box(&[Val::F64(1.0)]), run)
                .expect("the pullback runs"),
        );
        tb.push(t1.elapsed());
        tf.push(t1 - t0);
    }
    println!(
        "  split: forward sweep {}, pullback {} (medians, each timed alone)",
        fmt_time(median(tf)),
        fmt_time(median(tb))
    );
}

fn tape_after_forward_sweep(irad: &mut Irad<'_>, args: &[Val], run: &RunOptions) -> u64 {
    let (fwd, back) = irad.pieces;
    let mut call = args.to_vec();
    for a in args {
        if let Val::Array(arr) = a
            && let ArrayData::F64(xs) = &*arr.0.borrow()
        {
            call.push(Val::f64_array(vec![0.0; xs.len()]));
        }
    }
    irad.rev
        .run(fwd, &call, run)
        .expect("the forward sweep runs");
    let bytes = irad.rev.tape_bytes();
    irad.rev
        .run(back, &[Val::F64(1.0)], run)
        .expect("the pullback runs");
    bytes
}

/// One size of the forward-scaling case.
struct ScalingPoint {
    n: usize,
    passes: usize,
    fwd: Option<Duration>,
    /// Sparse forward mode (one pass).
    sparse: Option<Duration>,
    rev: Option<Duration>,
    primal: Option<Duration>,
    samples: usize,
}

/// Forward scaling: the full gradient of `sum(x)` by forward mode, width 8.
fn forward_scaling(cfg: &Config, failures: &mut Vec<String>) -> Vec<ScalingPoint> {
    let width = 8;
    println!("\n== forward_scaling (sum(x), forward mode, width {width})");
    println!(
        "{:>8} {:>8} {:>14} {:>14} {:>14} {:>14} {:>8}",
        "n", "passes", "fwd gradient", "per pass", "sparse fwd", "rev gradient", "samples"
    );
    let (m, f) = program("sum", SUM);
    let registry = irad::rules::Registry::new();
    let run_opts = RunOptions::default();
    let sizes: &[usize] = if cfg.quick {
        &[2500, 5000, 10000]
    } else {
        &[2500, 5000, 10000, 20000, 40000]
    };
    let mut points = Vec::new();
    for &n in sizes {
        let args = vec![Val::f64_array(vec![1.0; n])];
        let opts = GradOptions {
            lanes: irad::ir::Lanes::dense(width).expect("a dense width"),
            ..GradOptions::default()
        };
        let fwd = irad::jit_gradient(
            &m,
            &registry,
            &irad::GradRequest {
                mode: Mode::Forward,
                opts: opts.clone(),
                ..irad::GradRequest::new(f, &args)
            },
        )
        .expect("the forward gradient derives");
        fwd.compile().expect("the forward gradient compiles");
        let sparse_opts = GradOptions {
            lanes: irad::ir::Lanes::Sparse,
            ..GradOptions::default()
        };
        let sparse = irad::jit_gradient(
            &m,
            &registry,
            &irad::GradRequest {
                mode: Mode::Forward,
                opts: sparse_opts.clone(),
                ..irad::GradRequest::new(f, &args)
            },
        )
        .expect("the sparse forward gradient derives");
        sparse
            .compile()
            .expect("the sparse forward gradient compiles");
        let rev = irad::jit_gradient(
            &m,
            &registry,
            &irad::GradRequest {
                mode: Mode::Reverse,
                opts: opts.clone(),
                ..irad::GradRequest::new(f, &args)
            },
        )
        .expect("the reverse gradient derives");
        rev.compile().expect("the reverse gradient compiles");
        let primal = irad::jit_primal(&m).expect("the primal compiles");
        let pf = primal.func("sum").expect("the function exists");
        primal.compile(pf).expect("the primal compiles");
        let out = fwd
            .run(&args, &run_opts)
            .expect("the forward gradient runs");
        let mut checks = Checks::new("forward_scaling", failures);
        let want = handwritten::sum(&vec![1.0; n]);
        checks.scalar(&format!("n = {n}: value"), as_f64(&out.value), want);
        checks.vector(
            &format!("n = {n}: forward gradient"),
            &gradient_floats(&out),
            &vec![1.0; n],
        );
        let sparse_out = sparse
            .run(&args, &run_opts)
            .expect("the sparse forward gradient runs");
        checks.vector(
            &format!("n = {n}: sparse forward gradient"),
            &gradient_floats(&sparse_out),
            &vec![1.0; n],
        );
        let rev_out = rev
            .run(&args, &run_opts)
            .expect("the reverse gradient runs");
        checks.vector(
            &format!("n = {n}: reverse gradient"),
            &gradient_floats(&rev_out),
            &vec![1.0; n],
        );
        checks.finish();
        let timings = {
            let mut variants = [
                Variant {
                    name: "irad fwd grad",
                    run: Box::new(|| {
                        black_box(fwd.run(black_box(&args), &run_opts).expect("runs"));
                    }),
                },
                Variant {
                    name: "irad sparse fwd grad",
                    run: Box::new(|| {
                        black_box(sparse.run(black_box(&args), &run_opts).expect("runs"));
                    }),
                },
                Variant {
                    name: "irad rev grad (run)",
                    run: Box::new(|| {
                        black_box(rev.run(black_box(&args), &run_opts).expect("runs"));
                    }),
                },
                Variant {
                    name: "irad primal",
                    run: Box::new(|| {
                        black_box(primal.call(pf, black_box(&args), &run_opts).expect("runs"));
                    }),
                },
            ];
            // Each size gets a share of the budget, and at least three samples.
            measure(
                &mut variants,
                cfg,
                cfg.budget / 2,
                if cfg.quick { 1 } else { 3 },
            )
        };
        let point = ScalingPoint {
            n,
            passes: out.passes,
            fwd: timings.medians[0],
            sparse: timings.medians[1],
            rev: timings.medians[2],
            primal: timings.medians[3],
            samples: timings.rounds,
        };
        println!(
            "{:>8} {:>8} {:>14} {:>14} {:>14} {:>14} {:>8}",
            n,
            point.passes,
            fmt_time(point.fwd),
            fmt_time(point.fwd.map(|d| d / point.passes.max(1) as u32)),
            fmt_time(point.sparse),
            fmt_time(point.rev),
            point.samples
        );
        points.push(point);
    }
    points
}

/// One size of the compile-chain case: medians of each phase.
struct ChainPoint {
    steps: usize,
    build: Duration,
    derive: Duration,
    jit: Duration,
    total: Duration,
    /// Compiling the primal alone, for comparison (not part of the total).
    primal_jit: Duration,
    runs: usize,
}

/// Compile chain: build the chain, derive its gradient `@chain.rev` (with
/// normalisation) and compile it with its pieces, as benches/compile_time.rs
/// does; the primal's own compile time is measured apart.
fn compile_chain(cfg: &Config, failures: &mut Vec<String>) -> Vec<ChainPoint> {
    println!("\n== compile_chain (y <- sin(y) * 1.0001 + 0.5 * y; 4 IR statements per step)");
    println!(
        "{:>8} {:>11} {:>10} {:>10} {:>10} {:>10} {:>11} {:>6}",
        "steps", "statements", "build", "derive", "jit", "total", "primal jit", "runs"
    );
    let registry = irad::rules::Registry::new();
    let run_opts = RunOptions::default();
    let runs = if cfg.quick { 1 } else { 5 };
    let x0 = 0.3;
    let mut points = Vec::new();
    for steps in [1000, 2500, 10000] {
        let mut phases: [Vec<Duration>; 5] = Default::default();
        let mut last = None;
        for _ in 0..runs {
            let t0 = Instant::now();
            let (m, f) = chain::chain(steps);
            let t1 = Instant::now();
            let c = irad::jit_reverse(&m, &[f], &registry).expect("the chain derives");
            let t2 = Instant::now();
            let rev = c.func("chain.rev").expect("@chain.rev exists");
            c.compile(rev).expect("@chain.rev compiles");
            let t3 = Instant::now();
            let p = irad::jit_primal(&m).expect("the primal compiles");
            p.compile(f).expect("the primal compiles");
            let t4 = Instant::now();
            for (k, d) in [t1 - t0, t2 - t1, t3 - t2, t3 - t0, t4 - t3]
                .into_iter()
                .enumerate()
            {
                phases[k].push(d);
            }
            last = Some((c, rev));
        }
        if let Some((c, rev)) = last {
            let out = c
                .call(rev, &[Val::F64(x0), Val::F64(1.0)], &run_opts)
                .expect("the chain runs");
            let (want_value, want_grad) = chain_adjoint(x0, steps);
            let got = floats(&out);
            let mut checks = Checks::new("compile_chain", failures);
            checks.scalar(&format!("{steps} steps: value"), got[0], want_value);
            checks.vector(&format!("{steps} steps: gradient"), &got[1..], &[want_grad]);
            checks.finish();
        }
        let [build, derive, jit, total, primal_jit] = phases.map(|d| median(d).unwrap_or_default());
        let point = ChainPoint {
            steps,
            build,
            derive,
            jit,
            total,
            primal_jit,
            runs,
        };
        println!(
            "{:>8} {:>11} {:>10} {:>10} {:>10} {:>10} {:>11} {:>6}",
            steps,
            steps * 4,
            fmt_time(Some(point.build)),
            fmt_time(Some(point.derive)),
            fmt_time(Some(point.jit)),
            fmt_time(Some(point.total)),
            fmt_time(Some(point.primal_jit)),
            runs
        );
        points.push(point);
    }
    points
}

/// The chain's value and derivative by hand: `dy_{k+1}/dy_k = 1.0001 cos(y_k) + 0.5`.
fn chain_adjoint(x: f64, steps: usize) -> (f64, f64) {
    let mut ys = Vec::with_capacity(steps);
    let mut y = x;
    for _ in 0..steps {
        ys.push(y);
        y = y.sin() * 1.0001 + 0.5 * y;
    }
    let mut y_bar = 1.0;
    for &y in ys.iter().rev() {
        y_bar *= y.cos() * 1.0001 + 0.5;
    }
    (y, y_bar)
}

/// Loads `benches/programs/NAME.irad` (given as text) and finds `@NAME`.
fn program(name: &str, text: &str) -> (Module, FuncId) {
    program_fn(name, name, text)
}

/// Loads `benches/programs/FILE.irad` (given as text) and finds `@func`.
fn program_fn(file: &str, func: &str, text: &str) -> (Module, FuncId) {
    let src = irad::Source {
        name: format!("benches/programs/{file}.irad"),
        text: text.into(),
    };
    let m = match irad::load(&src) {
        Ok(m) => m,
        Err(e) => panic!("{}", e.render(&[&src])),
    };
    let f = m.by_name(func).expect("the program defines its function");
    (m, f)
}

/// What `irad::jit_reverse` makes for `f` of `m`, but with `@f.rev` for a
/// gradient with respect to the arguments in `wrt` only (`@f.rev.wrtI_J`,
/// derived with activity analysis; `@f.rev` itself when `wrt` holds every
/// argument): the JIT, that function, and the forward sweep and pullback it
/// calls.
fn jit_reverse_wrt<'r>(
    m: &Module,
    f: FuncId,
    wrt: &[usize],
    registry: &'r irad::rules::Registry,
) -> (Jit<'r>, FuncId, (FuncId, FuncId)) {
    let mut m = m.clone();
    irad::passes::normalise(&mut m).expect("the program normalises");
    let mut rev = Reverse::new(registry);
    let rf = rev.rev_wrt(&mut m, f, wrt).expect("reverse mode derives");
    // The pieces `rev_wrt` made (cached: nothing is derived again).
    let pieces = rev.rule_wrt(&mut m, f, wrt).expect("reverse mode derives");
    let jit = Jit::owning(m, Some(Box::new(rev))).expect("the module compiles");
    (jit, rf, pieces)
}

/// The gradient of `f` at `args` in `mode` (forward: width 8), compiled, as floats.
fn jit_gradient_floats(
    m: &Module,
    f: FuncId,
    args: &[Val],
    registry: &irad::rules::Registry,
    mode: Mode,
) -> Vec<f64> {
    let opts = GradOptions {
        lanes: irad::ir::Lanes::dense(8).expect("8 is not 0"),
        ..GradOptions::default()
    };
    let g: CompiledGradient = irad::jit_gradient(
        m,
        registry,
        &irad::GradRequest {
            mode,
            opts: opts.clone(),
            ..irad::GradRequest::new(f, args)
        },
    )
    .expect("the gradient derives");
    let out = g
        .run(args, &RunOptions::default())
        .expect("the gradient runs");
    gradient_floats(&out)
}

fn as_f64(v: &Val) -> f64 {
    match v {
        Val::F64(x) => *x,
        other => panic!("not an f64: {other:?}"),
    }
}

/// The f64s of a value, in order (arrays element by element).
fn floats(v: &Val) -> Vec<f64> {
    match v {
        Val::F64(x) => vec![*x],
        Val::Array(a) => match &*a.0.borrow() {
            ArrayData::F64(xs) => xs.clone(),
            other => panic!("not an f64 array: {other:?}"),
        },
        Val::Tuple(vs) | Val::Dual(vs) => vs.iter().flat_map(floats).collect(),
        other => panic!("not numeric: {other:?}"),
    }
}

/// Every gradient entry of a result, argument by argument.
fn gradient_floats(g: &Gradient) -> Vec<f64> {
    g.gradient.iter().flatten().flat_map(floats).collect()
}

/// Gradient checks of one case, which record what fails.
struct Checks<'a> {
    case: &'a str,
    failures: &'a mut Vec<String>,
    worst: Vec<(String, Worst)>,
    /// The absolute tolerance of the checks from here on ([`ABS_TOL`] unless set).
    abs: f64,
}

/// The largest errors of a passed check: relative to the largest entry, and
/// relative to each entry.
#[derive(Default)]
struct Worst {
    normwise: f64,
    entrywise: f64,
}

impl<'a> Checks<'a> {
    fn new(case: &'a str, failures: &'a mut Vec<String>) -> Checks<'a> {
        Checks {
            case,
            failures,
            worst: Vec::new(),
            abs: ABS_TOL,
        }
    }

    fn scalar(&mut self, what: &str, got: f64, want: f64) {
        self.vector(what, &[got], &[want]);
    }

    /// Every entry within `REL_TOL` of the largest entry of `want` (a
    /// norm-wise relative error; an entry that is the small difference of
    /// large terms, as in Rosenbrock's gradient, carries the rounding of the
    /// terms, which the order of accumulation changes), or the absolute
    /// tolerance `self.abs`.
    fn vector(&mut self, what: &str, got: &[f64], want: &[f64]) {
        self.vector_within(what, got, want, REL_TOL);
    }

    /// [`Checks::vector`] with the relative tolerance `rel`.
    fn vector_within(&mut self, what: &str, got: &[f64], want: &[f64], rel: f64) {
        if got.len() != want.len() {
            self.failures.push(format!(
                "{}: {what}: {} entries, want {}",
                self.case,
                got.len(),
                want.len()
            ));
            return;
        }
        let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
        let mut worst = Worst::default();
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            let err = (g - w).abs();
            // Written so that a NaN fails.
            let within = err <= rel * scale + self.abs;
            if !within {
                self.failures.push(format!(
                    "{}: {what}: entry {i} is {g:e}, want {w:e}",
                    self.case
                ));
                return;
            }
            if scale > 0.0 {
                worst.normwise = worst.normwise.max(err / scale);
            }
            if w != 0.0 {
                worst.entrywise = worst.entrywise.max(err / w.abs());
            }
        }
        self.worst.push((what.to_string(), worst));
    }

    /// The largest relative error of each passed check, printed and as JSON.
    fn finish(self) -> Json {
        let mut obj = serde_json::Map::new();
        for (what, w) in self.worst {
            println!(
                "  check {what}: ok (relative error {:.1e}; per entry at most {:.1e})",
                w.normwise, w.entrywise
            );
            obj.insert(
                what,
                json!({"normwise": w.normwise, "entrywise": w.entrywise}),
            );
        }
        Json::Object(obj)
    }
}

fn medians7(t: &Timings) -> [Option<Duration>; 7] {
    std::array::from_fn(|k| t.medians.get(k).copied().flatten())
}

/// A duration for people: `12.3 us`, `4.56 ms`, `1.23 s`.
fn fmt_time(d: Option<Duration>) -> String {
    let Some(d) = d else {
        return "-".into();
    };
    let s = d.as_secs_f64();
    if s < 1e-3 {
        format!("{:.1} us", s * 1e6)
    } else if s < 1.0 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

fn ratio(a: Option<Duration>, b: Option<Duration>) -> Option<f64> {
    Some(a?.as_secs_f64() / b?.as_secs_f64())
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "-".into(), |r| format!("{r:.2}"))
}

fn met(ok: Option<bool>) -> &'static str {
    match ok {
        Some(true) => "met",
        Some(false) => "MISSED",
        None => "-",
    }
}

/// The slope of the least-squares line through `(ln x, ln y)`.
fn loglog_slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let k = points.len() as f64;
    let (lx, ly): (Vec<f64>, Vec<f64>) = points.iter().map(|&(x, y)| (x.ln(), y.ln())).unzip();
    let mx = lx.iter().sum::<f64>() / k;
    let my = ly.iter().sum::<f64>() / k;
    let sxy: f64 = lx.iter().zip(&ly).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = lx.iter().map(|x| (x - mx) * (x - mx)).sum();
    Some(sxy / sxx)
}

impl CaseResult {
    fn grad_over_primal(&self) -> Option<f64> {
        ratio(self.times[1], self.times[0])
    }

    fn grad_over_rust(&self) -> Option<f64> {
        ratio(self.times[1], self.times[4])
    }

    fn print_row(&self) {
        for (name, t) in VARIANTS.iter().zip(&self.times) {
            println!("  {name:<42} {:>12}", fmt_time(*t));
        }
        println!(
            "  grad / primal {}, grad / rust grad {} ({} rounds)",
            fmt_ratio(self.grad_over_primal()),
            fmt_ratio(self.grad_over_rust()),
            self.rounds
        );
    }

    fn json(&self) -> Json {
        let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
        let gp = self.grad_over_primal();
        let gr = self.grad_over_rust();
        json!({
            "case": self.name,
            "size": self.size,
            "rounds": self.rounds,
            "median_s": {
                "irad_primal": secs(self.times[0]),
                "irad_grad": secs(self.times[1]),
                "irad_grad_run": secs(self.times[2]),
                "rust_primal": secs(self.times[3]),
                "rust_grad": secs(self.times[4]),
                "irad_grad_run_no_activity_no_schedule": secs(self.times[5]),
                "irad_grad_run_activity_no_schedule": secs(self.times[6]),
            },
            "ratios": {
                "irad_grad_over_irad_primal": gp,
                "irad_grad_over_rust_grad": gr,
                "irad_grad_run_over_irad_primal": ratio(self.times[2], self.times[0]),
                "irad_primal_over_rust_primal": ratio(self.times[0], self.times[3]),
                "rust_grad_over_rust_primal": ratio(self.times[4], self.times[3]),
            },
            "targets": {
                "grad_le_3x_primal": gp.map(|r| r <= TARGET_GRAD_OVER_PRIMAL),
                "grad_le_1_5x_rust_grad": gr.map(|r| r <= TARGET_GRAD_OVER_RUST),
            },
            "checks_relative_error": self.checks,
        })
    }
}

/// Everything measured in this run.
#[derive(Default)]
struct Report {
    cases: Vec<CaseResult>,
    forward: Option<Vec<ScalingPoint>>,
    chain: Option<Vec<ChainPoint>>,
    failures: Vec<String>,
}

impl Report {
    /// The fitted exponent of the times `time` picks from the scaling points.
    fn exponent(&self, time: fn(&ScalingPoint) -> Option<Duration>) -> Option<f64> {
        let pts: Vec<(f64, f64)> = self
            .forward
            .as_ref()?
            .iter()
            .filter_map(|p| Some((p.n as f64, time(p)?.as_secs_f64())))
            .collect();
        loglog_slope(&pts)
    }

    fn chain_10000(&self) -> Option<&ChainPoint> {
        self.chain.as_ref()?.iter().find(|p| p.steps == 10000)
    }

    fn print(&self, machine: &Machine) {
        println!(
            "\n== summary (medians; load average {} at start, {} at end)",
            machine.load_start, machine.load_end
        );
        if !self.cases.is_empty() {
            println!(
                "{:<15} {:>11} {:>11} {:>11} {:>11} {:>11} {:>13} {:>15}",
                "case",
                "irad primal",
                "irad grad",
                "grad (run)",
                "rust primal",
                "rust grad",
                "grad/primal",
                "grad/rust grad"
            );
            for c in &self.cases {
                let gp = c.grad_over_primal();
                let gr = c.grad_over_rust();
                println!(
                    "{:<15} {:>11} {:>11} {:>11} {:>11} {:>11} {:>6} {:>6} {:>7} {:>7}",
                    c.name,
                    fmt_time(c.times[0]),
                    fmt_time(c.times[1]),
                    fmt_time(c.times[2]),
                    fmt_time(c.times[3]),
                    fmt_time(c.times[4]),
                    fmt_ratio(gp),
                    met(gp.map(|r| r <= TARGET_GRAD_OVER_PRIMAL)),
                    fmt_ratio(gr),
                    met(gr.map(|r| r <= TARGET_GRAD_OVER_RUST)),
                );
            }
        }
        if let Some(e) = self.exponent(|p| p.fwd) {
            println!(
                "forward scaling exponent {e:.2} (target <= {TARGET_FORWARD_EXPONENT}): {}; reverse mode's {}",
                met(Some(e <= TARGET_FORWARD_EXPONENT)),
                fmt_ratio(self.exponent(|p| p.rev))
            );
        }
        if let Some(e) = self.exponent(|p| p.sparse) {
            println!(
                "sparse forward scaling exponent {e:.2} (target <= {TARGET_FORWARD_EXPONENT}): {}",
                met(Some(e <= TARGET_FORWARD_EXPONENT)),
            );
        }
        if let Some(p) = self
            .chain
            .as_ref()
            .and_then(|c| c.iter().find(|p| p.steps == 2500))
        {
            println!(
                "compile chain, 2 500 steps (10 000 statements): {}",
                fmt_time(Some(p.total)),
            );
        }
        if let Some(p) = self.chain_10000() {
            let s = p.total.as_secs_f64();
            println!(
                "compile chain, 10 000 steps (40 000 statements): {} (target < {TARGET_CHAIN_COMPILE_S} s): {}",
                fmt_time(Some(p.total)),
                met(Some(s < TARGET_CHAIN_COMPILE_S))
            );
        }
    }

    /// Writes the JSON report; returns its path.
    fn write(&self, machine: &Machine, cfg: &Config) -> std::io::Result<String> {
        let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
        let forward = self.forward.as_ref().map(|pts| {
            let e = self.exponent(|p| p.fwd);
            json!({
                "width": 8,
                "points": pts.iter().map(|p| json!({
                    "n": p.n,
                    "passes": p.passes,
                    "fwd_grad_s": secs(p.fwd),
                    "sparse_fwd_grad_s": secs(p.sparse),
                    "rev_grad_run_s": secs(p.rev),
                    "primal_s": secs(p.primal),
                    "samples": p.samples,
                })).collect::<Vec<_>>(),
                "exponent": e,
                "rev_exponent": self.exponent(|p| p.rev),
                "sparse_exponent": self.exponent(|p| p.sparse),
                "target_exponent_le_1_2": e.map(|e| e <= TARGET_FORWARD_EXPONENT),
            })
        });
        let chain = self.chain.as_ref().map(|pts| {
            json!({
                "points": pts.iter().map(|p| json!({
                    "steps": p.steps,
                    "statements": p.steps * 4,
                    "build_s": p.build.as_secs_f64(),
                    "derive_s": p.derive.as_secs_f64(),
                    "jit_s": p.jit.as_secs_f64(),
                    "total_s": p.total.as_secs_f64(),
                    "primal_jit_s": p.primal_jit.as_secs_f64(),
                    "runs": p.runs,
                })).collect::<Vec<_>>(),
                "target_10000_steps_lt_0_5_s": self
                    .chain_10000()
                    .map(|p| p.total.as_secs_f64() < TARGET_CHAIN_COMPILE_S),
            })
        });
        let report = json!({
            "machine": {
                "model": machine.model,
                "cpus": machine.cpus,
                "load_average_start": machine.load_start,
                "load_average_end": machine.load_end,
            },
            "quick": cfg.quick,
            "case_filter": cfg.case,
            "variant_filter": cfg.only,
            "budget_per_case_s": cfg.budget.as_secs_f64(),
            "cases": self.cases.iter().map(CaseResult::json).collect::<Vec<_>>(),
            "forward_scaling": forward,
            "compile_chain": chain,
            "failed_checks": self.failures,
        });
        let dir = std::env::var_os("CARGO_TARGET_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
            .join("bench");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("results.json");
        let text = serde_json::to_string_pretty(&report).map_err(std::io::Error::other)?;
        std::fs::write(&path, text + "\n")?;
        Ok(path.display().to_string())
    }
}
