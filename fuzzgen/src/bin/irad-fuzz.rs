//! `irad-fuzz`: the differential fuzz runner without sanitizers, for CI and
//! by hand (fuzz/README.md):
//!
//! ```text
//! cargo run --release -p irad-fuzzgen --bin irad-fuzz -- TARGET [--seconds S | --programs N] [--seed K] [--jobs J]
//! ```
//!
//! TARGET is a generator target: `interp` (a program runs to a value or a
//! clean error), `interp_vs_jit` (the interpreter and the JIT agree, value
//! and reverse-mode gradient, bit for bit or with the same error) or
//! `derivatives` (forward mode against reverse mode against finite
//! differences, on smooth programs) or `second_order` (Hessian-vector
//! products: interpreter against JIT, against finite differences of the
//! gradient, forward over reverse against reverse over forward and forward
//! over forward, on smooth programs) or `checkpoint` (reverse mode under tape
//! limits of 1 byte and 4K against reverse mode without one, bit for bit, in
//! the interpreter and the JIT). Program number i is generated from seed
//! K + i (default K = 0), so a run is reproducible and runs add up: `--seed`
//! where the last one stopped continues it. J threads (default: the number
//! of CPUs) take seeds in turn.
//!
//! Prints progress to stderr (on a terminal, one line rewritten each
//! second; otherwise a line every 10 s), then one line on stdout:
//! `TARGET: N programs, F failures` (and the rate, wall-clock, and the CPU
//! time per program with the rate it makes on J idle cores: the figures a
//! shared machine's load does not change). On a failure the exit
//! status is 1, and each failing program (its seed, source, arguments and
//! the message) is written, as it is found, to `fuzz/failures/TARGET-SEED.txt` (the folder
//! `IRAD_FUZZ_FAILURES` names, if set) with the command that reproduces it;
//! 2 for bad usage. `IRAD_FUZZ_INJECT_FAILURE=SEED` makes the program of
//! that seed fail, to test this path (fuzzgen/tests/runner.rs).

use arbitrary::Unstructured;
use irad_fuzzgen::coverage::Coverage;
use irad_fuzzgen::generate::{Config, Program, program};
use irad_fuzzgen::{check, seeded};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The targets: name, and whether it generates smooth programs.
const TARGETS: [(&str, bool); 6] = [
    ("interp", false),
    ("interp_vs_jit", false),
    ("derivatives", true),
    ("second_order", true),
    ("emit", false),
    ("checkpoint", false),
];

/// Programs per batch of the emit target: one `cc` call and one shared
/// library per batch.
const EMIT_BATCH: u64 = 64;

/// The stack of each worker thread: the JIT's default budget and margin,
/// with room for the front end's walks (docs/codegen.md, "The JIT").
const WORKER_STACK: usize = 512 << 20;

/// Bytes of generator input per program.
const INPUT_BYTES: usize = 4096;

/// How long to run.
#[derive(Clone, Copy, Debug)]
enum Budget {
    Seconds(f64),
    Programs(u64),
}

#[derive(Debug)]
struct Options {
    target: &'static str,
    smooth: bool,
    budget: Budget,
    seed: u64,
    jobs: usize,
    /// Print the coverage table at the end.
    coverage: bool,
    /// Print the program of the first seed instead of running anything.
    show: bool,
}

const USAGE: &str =
    "usage: irad-fuzz TARGET [--seconds S | --programs N] [--seed K] [--jobs J] [--coverage]
       irad-fuzz TARGET --show [--seed K]   (print the program of seed K, run nothing)
  TARGET: interp, interp_vs_jit, derivatives, second_order, emit, checkpoint";

fn usage(msg: &str) -> ExitCode {
    eprintln!("irad-fuzz: {msg}\n{USAGE}");
    ExitCode::from(2)
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut target = None;
    let mut budget = None;
    let mut seed = 0u64;
    let mut coverage = false;
    let mut show = false;
    let mut jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match a.as_str() {
            "--seconds" | "--programs" if budget.is_some() => {
                return Err("give one of --seconds and --programs".into());
            }
            "--seconds" => {
                let v = value("--seconds")?;
                match v.parse::<f64>() {
                    Ok(s) if s > 0.0 && s.is_finite() => budget = Some(Budget::Seconds(s)),
                    _ => return Err(format!("--seconds `{v}` is not a positive number")),
                }
            }
            "--programs" => {
                let v = value("--programs")?;
                match v.parse::<u64>() {
                    Ok(n) if n > 0 => budget = Some(Budget::Programs(n)),
                    _ => return Err(format!("--programs `{v}` is not a positive integer")),
                }
            }
            "--seed" => {
                let v = value("--seed")?;
                seed = v
                    .parse()
                    .map_err(|_| format!("--seed `{v}` is not an integer from 0"))?;
            }
            "--jobs" => {
                let v = value("--jobs")?;
                jobs = match v.parse::<usize>() {
                    Ok(j) if (1..=256).contains(&j) => j,
                    _ => return Err(format!("--jobs `{v}` is not a number from 1 to 256")),
                };
            }
            "--coverage" => coverage = true,
            "--show" => show = true,
            "-h" | "--help" => return Err("help".into()),
            flag if flag.starts_with('-') => return Err(format!("unknown option `{flag}`")),
            name => {
                if target.is_some() {
                    return Err(format!("unexpected argument `{name}`"));
                }
                let Some(&(t, smooth)) = TARGETS.iter().find(|(t, _)| *t == name) else {
                    return Err(format!("unknown target `{name}`"));
                };
                target = Some((t, smooth));
            }
        }
    }
    let (target, smooth) = target.ok_or("no TARGET given")?;
    Ok(Options {
        target,
        smooth,
        budget: budget.unwrap_or(Budget::Seconds(10.0)),
        seed,
        jobs,
        coverage,
        show,
    })
}

/// A failing program: its seed and what [`save`] said.
struct Failure {
    seed: u64,
    note: String,
}

/// Writes a failing program to `dir/TARGET-SEED.txt` with the command that
/// reproduces it; returns the lines to print about it.
fn save(dir: &std::path::Path, target: &str, seed: u64, text: &str) -> String {
    let cmd = format!(
        "cargo run --release -p irad-fuzzgen --bin irad-fuzz -- {target} --seed {seed} --programs 1 --jobs 1"
    );
    let path = dir.join(format!("{target}-{seed}.txt"));
    let saved = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&path, format!("{cmd}\n\n{text}")));
    let first = text.lines().next().unwrap_or("");
    match saved {
        Ok(()) => format!(
            "seed {seed}: {first}\n  saved in {}\n  reproduce: {cmd}",
            path.display()
        ),
        Err(e) => format!("seed {seed}: {first}\n  (not saved: {e})\n  reproduce: {cmd}"),
    }
}

/// The program of `seed` (`Err` if the generator fails, which it should
/// never do).
fn generated(cfg: &Config, seed: u64) -> Result<Program, String> {
    let bytes = seeded(seed, INPUT_BYTES);
    let mut u = Unstructured::new(&bytes);
    program(&mut u, cfg).map_err(|e| format!("the generator failed: {e}"))
}

/// `--show`: prints the program of `opts.seed` for `opts.target` (its
/// source, then the function and arguments the target runs it with).
fn show(opts: &Options) -> ExitCode {
    match generated(&config(opts), opts.seed) {
        Ok(p) => {
            println!("{}", p.source);
            println!("// run: -f {} --args '{}'", p.func, p.args);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("irad-fuzz: seed {}: {e}", opts.seed);
            ExitCode::FAILURE
        }
    }
}

/// The generator's settings for the target of `opts`.
fn config(opts: &Options) -> Config {
    Config {
        smooth: opts.smooth,
        // Loops three deep, checkpointed inside one another.
        max_loop_depth: if opts.target == "checkpoint" { 3 } else { 2 },
        // Loops carrying arrays: checkpointed (`checkpoint`), and split
        // into a phi per part by forward mode (`derivatives`).
        carried_arrays: matches!(opts.target, "checkpoint" | "derivatives"),
        ..Config::default()
    }
}

/// `Err` for the seed `IRAD_FUZZ_INJECT_FAILURE` names.
fn injected(seed: u64, inject: Option<u64>) -> Result<(), String> {
    if inject == Some(seed) {
        return Err(format!(
            "injected failure at seed {seed} (IRAD_FUZZ_INJECT_FAILURE)"
        ));
    }
    Ok(())
}

/// Runs `target`'s check on the program of `seed`: `Err` with the program
/// and the message on a failure.
fn run_one(
    target: &str,
    cfg: &Config,
    seed: u64,
    inject: Option<u64>,
    cov: Option<&mut Coverage>,
) -> Result<(), String> {
    injected(seed, inject)?;
    let p = generated(cfg, seed)?;
    if let Some(c) = cov {
        c.add(&p);
    }
    let res = match target {
        "interp" => check::interpreter(&p).map(|_| ()),
        "interp_vs_jit" => check::interp_vs_jit(&p),
        "second_order" => check::second_order(&p).map(|_| ()),
        "checkpoint" => check::checkpoint(&p),
        _ => check::derivatives(&p).map(|_| ()),
    };
    res.map_err(|e| {
        format!(
            "{e}\n\n--- program ---\n{}\n--- args ---\n{}\n",
            p.source, p.args
        )
    })
}

/// The emit target on the programs of `seeds`, as one batch in a folder of
/// its own under `work`: one result per seed.
#[cfg(unix)]
fn run_batch(
    rt: &irad_fuzzgen::emit::Runtime,
    work: &std::path::Path,
    cfg: &Config,
    seeds: std::ops::Range<u64>,
    inject: Option<u64>,
    mut cov: Option<&mut Coverage>,
) -> Vec<(u64, Result<(), String>)> {
    let mut out = Vec::new();
    let mut programs = Vec::new();
    for seed in seeds.clone() {
        match injected(seed, inject).and_then(|()| generated(cfg, seed)) {
            Ok(p) => {
                if let Some(c) = cov.as_deref_mut() {
                    c.add(&p);
                }
                programs.push((seed, p));
            }
            Err(e) => out.push((seed, Err(e))),
        }
    }
    let dir = work.join(format!("batch{}", seeds.start));
    let results = irad_fuzzgen::emit::check_batch(rt, &dir, &programs);
    out.extend(
        programs
            .iter()
            .map(|(s, _)| *s)
            .zip(results.into_iter().map(|r| r.map(|_| ()))),
    );
    out
}

/// The emit target's runtime, made once per run in `work`.
#[cfg(unix)]
fn emit_runtime(work: &std::path::Path) -> Result<irad_fuzzgen::emit::Runtime, String> {
    let lib = irad_fuzzgen::emit::static_runtime()?;
    irad_fuzzgen::emit::Runtime::load(&lib, &work.join("runtime"))
}

/// What the workers share.
struct Shared<'a> {
    opts: &'a Options,
    cfg: Config,
    inject: Option<u64>,
    dir: PathBuf,
    /// The emit target's runtime and work folder.
    #[cfg(unix)]
    emit: Option<(irad_fuzzgen::emit::Runtime, PathBuf)>,
    next: AtomicU64,
    done: AtomicU64,
    failures: Mutex<Vec<Failure>>,
    /// The workers' coverage, merged as each ends (with `--coverage`).
    coverage: Mutex<Coverage>,
    deadline: Option<Instant>,
    limit: u64,
    workers_left: AtomicUsize,
}

impl Shared<'_> {
    /// How many seeds a worker takes at once: a batch for the emit target
    /// (one library linked per batch), one otherwise.
    fn batch(&self) -> u64 {
        if self.opts.target == "emit" {
            EMIT_BATCH
        } else {
            1
        }
    }

    /// Checks the programs of seeds `i..end` (indices from `--seed`),
    /// counting their coverage into `cov` (with `--coverage`).
    fn check(
        &self,
        i: u64,
        end: u64,
        cov: &mut Option<Coverage>,
    ) -> Vec<(u64, Result<(), String>)> {
        let seeds = self.opts.seed.wrapping_add(i)..self.opts.seed.wrapping_add(end);
        // A panic inside irad is a failure like any other.
        #[cfg(unix)]
        if let Some((rt, work)) = &self.emit {
            let all = || {
                run_batch(
                    rt,
                    work,
                    &self.cfg,
                    seeds.clone(),
                    self.inject,
                    cov.as_mut(),
                )
            };
            return match std::panic::catch_unwind(std::panic::AssertUnwindSafe(all)) {
                Ok(rs) => rs,
                Err(p) => {
                    let text = panic_text(&*p);
                    seeds
                        .map(|s| (s, Err(format!("panic in the batch of seed {s}: {text}"))))
                        .collect()
                }
            };
        }
        let mut out = Vec::new();
        for seed in seeds {
            let one = || run_one(self.opts.target, &self.cfg, seed, self.inject, cov.as_mut());
            let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(one))
                .unwrap_or_else(|p| Err(format!("panic at seed {seed}: {}", panic_text(&*p))));
            out.push((seed, res));
        }
        out
    }

    /// A worker: takes seeds until the budget is spent.
    fn work(&self) {
        let mut cov = self.opts.coverage.then(Coverage::default);
        loop {
            let i = self.next.fetch_add(self.batch(), Ordering::Relaxed);
            if i >= self.limit || self.deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            let end = i.saturating_add(self.batch()).min(self.limit);
            for (seed, res) in self.check(i, end, &mut cov) {
                if let Err(text) = res {
                    // Saved at once: a long run that is stopped keeps what
                    // it found.
                    let note = save(&self.dir, self.opts.target, seed, &text);
                    if let Ok(mut f) = self.failures.lock() {
                        f.push(Failure { seed, note });
                    }
                }
                self.done.fetch_add(1, Ordering::Relaxed);
            }
        }
        if let (Some(mine), Ok(mut all)) = (cov, self.coverage.lock()) {
            all.merge(&mine);
        }
        self.workers_left.fetch_sub(1, Ordering::Relaxed);
    }

    /// Progress on stderr until the workers are done.
    fn progress(&self, start: Instant) {
        let tty = std::io::stderr().is_terminal();
        let mut last_line = Instant::now();
        let mut width = 0;
        while self.workers_left.load(Ordering::Relaxed) > 0 {
            std::thread::sleep(Duration::from_millis(250));
            let n = self.done.load(Ordering::Relaxed);
            let f = self.failures.lock().map_or(0, |f| f.len());
            let secs = start.elapsed().as_secs_f64();
            let line = format!(
                "{}: {n} programs, {f} failures, {:.0}/s",
                self.opts.target,
                n as f64 / secs.max(1e-9)
            );
            if tty {
                eprint!("\r{line}   ");
                width = line.len() + 3;
            } else if last_line.elapsed() >= Duration::from_secs(10) {
                eprintln!("{line}");
                last_line = Instant::now();
            }
        }
        if tty && width > 0 {
            eprint!("\r{:width$}\r", "");
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match parse(&args) {
        Ok(o) => o,
        Err(e) if e == "help" => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => return usage(&e),
    };
    if opts.show {
        return show(&opts);
    }

    let start = Instant::now();
    let mut shared = Shared {
        opts: &opts,
        cfg: config(&opts),
        inject: std::env::var("IRAD_FUZZ_INJECT_FAILURE")
            .ok()
            .and_then(|s| s.parse().ok()),
        dir: std::env::var_os("IRAD_FUZZ_FAILURES").map_or_else(
            || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/failures"),
            PathBuf::from,
        ),
        #[cfg(unix)]
        emit: None,
        next: AtomicU64::new(0),
        done: AtomicU64::new(0),
        failures: Mutex::new(Vec::new()),
        coverage: Mutex::new(Coverage::default()),
        deadline: match opts.budget {
            Budget::Seconds(s) => Some(start + Duration::from_secs_f64(s)),
            Budget::Programs(_) => None,
        },
        limit: match opts.budget {
            Budget::Programs(n) => n,
            Budget::Seconds(_) => u64::MAX,
        },
        workers_left: AtomicUsize::new(opts.jobs),
    };
    if opts.target == "emit" {
        #[cfg(unix)]
        {
            let work = std::env::temp_dir().join(format!("irad-fuzz-emit-{}", std::process::id()));
            match emit_runtime(&work) {
                Ok(rt) => shared.emit = Some((rt, work)),
                Err(e) => {
                    eprintln!("irad-fuzz: the emit target cannot start: {e}");
                    return ExitCode::from(2);
                }
            }
        }
        #[cfg(not(unix))]
        {
            eprintln!("irad-fuzz: the emit target needs dlopen (Unix)");
            return ExitCode::from(2);
        }
    }
    let shared = shared;
    // CPU time from here on: the workers (and, for `emit`, their `cc`
    // children), not the start-up (the runtime's build for `emit`).
    let cpu_start = cpu_seconds();
    std::thread::scope(|s| {
        for _ in 0..opts.jobs {
            let work = || shared.work();
            // A stack as large as the JIT's budget, so compiled code runs
            // on the worker's own stack (reserved, not committed), and the
            // front end walks in place, not on threads made for every
            // program.
            let spawned = std::thread::Builder::new()
                .stack_size(WORKER_STACK)
                .spawn_scoped(s, work);
            if spawned.is_err() {
                s.spawn(work);
            }
        }
        s.spawn(|| shared.progress(start));
    });
    #[cfg(unix)]
    if let Some((_, work)) = &shared.emit {
        let _ = std::fs::remove_dir_all(work);
    }
    let cpu = cpu_seconds().zip(cpu_start).map(|(end, begin)| end - begin);
    report(&shared, start, cpu)
}

/// CPU seconds used so far, user and system, by this process's threads and
/// its children that have ended; `None` where it cannot be read.
fn cpu_seconds() -> Option<f64> {
    #[cfg(unix)]
    {
        let secs = |who| {
            // SAFETY: `getrusage` writes the struct it is given, which is
            // plain data and zeroed before.
            let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
            if unsafe { libc::getrusage(who, &mut ru) } != 0 {
                return None;
            }
            let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
            Some(t(ru.ru_utime) + t(ru.ru_stime))
        };
        Some(secs(libc::RUSAGE_SELF)? + secs(libc::RUSAGE_CHILDREN)?)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The summary's CPU figure: milliseconds of CPU per program, and the
/// programs per second that makes on `jobs` cores kept busy; empty without
/// programs or a measure.
fn cpu_text(cpu: Option<f64>, n: u64, jobs: usize) -> String {
    match cpu {
        Some(c) if n > 0 && c > 0.0 => format!(
            "{:.1} ms CPU per program, {:.0} per second on {jobs} idle core{}, ",
            c * 1e3 / n as f64,
            n as f64 * jobs as f64 / c,
            if jobs == 1 { "" } else { "s" }
        ),
        _ => String::new(),
    }
}

/// The summary line, and the failures; the exit status.
fn report(shared: &Shared<'_>, start: Instant, cpu: Option<f64>) -> ExitCode {
    let opts = shared.opts;
    let n = shared.done.load(Ordering::Relaxed);
    let secs = start.elapsed().as_secs_f64();
    let mut failures =
        std::mem::take(&mut *shared.failures.lock().unwrap_or_else(|e| e.into_inner()));
    failures.sort_by_key(|f| f.seed);
    if opts.coverage {
        let cov = shared.coverage.lock().unwrap_or_else(|e| e.into_inner());
        println!("{}", cov.table());
    }
    println!(
        "{}: {n} programs, {} failures ({:.0} programs per second, {}{} jobs, seeds {}..{})",
        opts.target,
        failures.len(),
        n as f64 / secs.max(1e-9),
        cpu_text(cpu, n, opts.jobs),
        opts.jobs,
        opts.seed,
        opts.seed.wrapping_add(n)
    );
    if failures.is_empty() {
        return ExitCode::SUCCESS;
    }
    for f in failures.iter().take(20) {
        eprintln!("{}", f.note);
    }
    if failures.len() > 20 {
        eprintln!(
            "... and {} more, saved in {}",
            failures.len() - 20,
            shared.dir.display()
        );
    }
    ExitCode::from(1)
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}
