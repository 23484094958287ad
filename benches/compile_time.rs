//! Compile latency of a gradient, from `.irad` text to the gradient's value
//! (issue 25; docs/performance.md, "Compile latency"): the whole pipeline
//! `irad grad` runs (parse, check, SSA, normalise, reverse mode, the default
//! schedule, codegen, Cranelift, run), timed per stage by
//! `irad::timings`, on
//! - the chain `y = sin(y) * 1.0001 + 0.5 * y` of N steps in one function
//!   (four IR statements per step), N = 1e3, 1e4, 1e5;
//! - `many`: 2 000 functions of five steps (20 statements) each, each
//!   calling the one before (the gradient of the last).
//!
//! Each run is a fresh process (this binary started again with `--child`),
//! so that its peak memory is its own: per stage, the peak resident set
//! while the stage ran (`VmHWM` of /proc/self/status, reset at the end of
//! each stage through /proc/self/clear_refs; Linux only, `-` elsewhere).
//! Prints per program the median time of each stage over the runs, the
//! total, the peak memory per stage and overall, and the exponent of the
//! total time fitted over the chain's sizes (least squares on log-log; 1.0
//! is linear) and from 1e4 to 1e5 alone.
//!
//! Run: `cargo bench --bench compile_time` (`-- --quick`: one run per size;
//! `-- --steps=N`: only the chain of N steps).

use irad::timings::{Stage, snapshot};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let program = args.get(i + 1).map_or("chain:1000", String::as_str);
        child(program);
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let only: Option<usize> = args
        .iter()
        .find_map(|a| a.strip_prefix("--steps=")?.parse().ok());
    let mut programs: Vec<(String, usize)> = match only {
        Some(n) => vec![(format!("chain:{n}"), n * 4)],
        None => [1_000, 10_000, 100_000]
            .iter()
            .map(|&n| (format!("chain:{n}"), n * 4))
            .collect(),
    };
    if only.is_none() {
        programs.push(("many:2000".into(), 2_000 * 20));
    }
    println!("times in ms (medians), memory in MB of resident set");
    println!(
        "{:<12} {:>9} {}  {:>9} {:>9} {:>8} {:>8}",
        "program",
        "stmts",
        Stage::ALL
            .iter()
            .map(|s| format!("{:>10}", s.name()))
            .collect::<String>(),
        "total",
        "wall",
        "peak MB",
        "KB/stmt"
    );
    let mut fit = Vec::new();
    for (program, stmts) in &programs {
        let runs = if quick || *stmts >= 400_000 { 1 } else { 5 };
        let mut samples: Vec<Sample> = (0..runs).filter_map(|_| spawn(program)).collect();
        if samples.is_empty() {
            println!("{program:<12} failed");
            continue;
        }
        samples.sort_by(|a, b| a.total().total_cmp(&b.total()));
        let med = &samples[samples.len() / 2];
        let peak = med.peak_kb.iter().copied().max().unwrap_or(0);
        println!(
            "{:<12} {:>9} {}  {:>9} {:>9} {:>8} {:>8}",
            program,
            stmts,
            med.secs
                .iter()
                .map(|s| format!("{:>10}", ms(*s)))
                .collect::<String>(),
            ms(med.total()),
            ms(med.wall),
            mb(peak),
            if peak > 0 {
                format!("{:.2}", peak as f64 / *stmts as f64)
            } else {
                "-".into()
            }
        );
        println!(
            "{:<12} {:>9} {}  (peak resident MB per stage)",
            "",
            "",
            med.peak_kb
                .iter()
                .map(|&k| format!("{:>10}", mb(k)))
                .collect::<String>()
        );
        if program.starts_with("chain:") {
            fit.push((*stmts as f64, med.total()));
        }
    }
    if fit.len() >= 2 {
        println!(
            "fitted exponent of the total over the chain sizes: {:.2}",
            exponent(&fit)
        );
        let last = &fit[fit.len() - 2..];
        println!(
            "exponent from {} to {} statements: {:.2}",
            last[0].0,
            last[1].0,
            exponent(last)
        );
    }
}

/// One run: seconds per stage, wall seconds from text to gradient, and the
/// peak resident KB per stage (0: not measured).
struct Sample {
    secs: [f64; 9],
    wall: f64,
    peak_kb: [u64; 9],
}

impl Sample {
    fn total(&self) -> f64 {
        self.secs.iter().sum()
    }
}

/// Runs `program` in a child process and reads its one line of output.
fn spawn(program: &str) -> Option<Sample> {
    let exe = std::env::current_exe().ok()?;
    let out = Command::new(exe).args(["--child", program]).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find_map(|l| l.strip_prefix("sample "))?;
    let nums: Vec<f64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    if nums.len() != 19 {
        eprintln!("{program}: {text} {}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    let mut s = Sample {
        secs: [0.0; 9],
        wall: nums[9],
        peak_kb: [0; 9],
    };
    s.secs.copy_from_slice(&nums[..9]);
    for (k, x) in s.peak_kb.iter_mut().zip(&nums[10..]) {
        *k = *x as u64;
    }
    Some(s)
}

/// The child: builds the text of `program`, runs `irad grad`'s pipeline on
/// it with the recorder on, prints `sample` and 9 stage times (s), the wall
/// time (s) and 9 peaks (KB).
fn child(program: &str) {
    let (name, n) = program.split_once(':').unwrap_or(("chain", "1000"));
    let n: usize = n.parse().unwrap_or(1000);
    let (text, func) = if name == "many" {
        (many(n), format!("f{}", n - 1))
    } else {
        (chain(n), "chain".to_string())
    };
    let src = irad::Source::new(format!("{name}.irad"), text);
    irad::timings::enable(true);
    irad::ir::timings::on_stage_end(sample_peak);
    reset_peak();
    let t0 = Instant::now();
    let m = irad::load(&src).expect("the program loads");
    let f = irad::find_function(&src, &m, &func).expect("declared");
    let args = [irad::Val::F64(0.3)];
    let registry = irad::rules::Registry::new();
    // As `irad grad` runs it: the JIT, the default schedule.
    let req = irad::GradRequest {
        opts: irad::GradOptions {
            exec: irad::Backend::Jit.exec(),
            ..irad::GradOptions::default()
        },
        ..irad::GradRequest::new(f, &args)
    };
    let (g, _) = irad::grad(&src, &m, &registry, &req).expect("differentiates");
    let wall = t0.elapsed().as_secs_f64();
    assert!(g.gradient[0].is_some(), "a gradient");
    let t = snapshot();
    let mut line = String::from("sample");
    for s in Stage::ALL {
        line.push_str(&format!(" {:e}", t.get(s).as_secs_f64()));
    }
    line.push_str(&format!(" {wall:e}"));
    for p in &PEAK_KB {
        line.push_str(&format!(" {}", p.load(Ordering::Relaxed)));
    }
    println!("{line}");
}

/// The chain of `steps` steps, as `.irad` text.
fn chain(steps: usize) -> String {
    let mut t = String::from("fn chain(x: f64) -> f64 {\n    let mut y = x;\n");
    for _ in 0..steps {
        t.push_str("    y = sin(y) * 1.0001 + 0.5 * y;\n");
    }
    t.push_str("    y\n}\n");
    t
}

/// `n` functions `f0` .. `f{n-1}` of five chain steps each, each but `f0`
/// starting from a call of the one before.
fn many(n: usize) -> String {
    let mut t = String::new();
    for k in 0..n {
        let start = if k == 0 {
            "x".to_string()
        } else {
            format!("f{}(x)", k - 1)
        };
        t.push_str(&format!(
            "fn f{k}(x: f64) -> f64 {{\n    let mut y = {start};\n"
        ));
        for _ in 0..5 {
            t.push_str("    y = sin(y) * 1.0001 + 0.5 * y;\n");
        }
        t.push_str("    y\n}\n");
    }
    t
}

/// The peak resident KB of each stage so far.
static PEAK_KB: [AtomicU64; 9] = [const { AtomicU64::new(0) }; 9];

/// At the end of a stage: its peak (the high-water mark since the last
/// reset), then a reset.
fn sample_peak(stage: Stage) {
    if let Some(kb) = high_water_kb() {
        let i = Stage::ALL.iter().position(|&s| s == stage).unwrap_or(0);
        PEAK_KB[i].fetch_max(kb, Ordering::Relaxed);
    }
    reset_peak();
}

fn high_water_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn reset_peak() {
    // "5" resets the high-water mark to the current resident set.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The least-squares slope of log(time) against log(size).
fn exponent(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let xs: Vec<f64> = points.iter().map(|p| p.0.ln()).collect();
    let ys: Vec<f64> = points.iter().map(|p| p.1.ln()).collect();
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let num: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let den: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
    num / den
}

fn ms(s: f64) -> String {
    format!("{:.1}", s * 1e3)
}

fn mb(kb: u64) -> String {
    if kb == 0 {
        "-".into()
    } else {
        format!("{:.0}", kb as f64 / 1024.0)
    }
}
