//! The `irad` command line (SYNTAX.md §3): `run`, `grad` (reverse mode by
//! default, forward mode with `--mode fwd`, an output seed with `--seed`),
//! `jvp` (the derivative along a tangent), `jacobian`, `hvp` (a Hessian-vector
//! product by forward over reverse), `hessian`, `check`, `dump` (with
//! `--after PASS` / `--all-passes` over the normalisation pipeline, `--mode
//! fwd` for the forward rules, `--mode rev` for BBCode and the reverse
//! pieces, `--schedule S` for the optimiser's steps), `emit` (an object
//! file with a C ABI and its header) and
//! `test-rules` (the frule and rrule checkers; exit 1 when a rule fails).
//!
//! Exit status: 0 on success, 1 for a user error (parse, verification,
//! run-time, malformed arguments) with the message on stderr, 2 for bad usage
//! (clap's own errors). No input makes it panic: every failure is an
//! `irad::Error` rendered with its location; under `--json` (every command
//! that prints results takes it) the error is one JSON object on stderr
//! instead, with the same exit status (docs/cli.md, "JSON output").

use clap::builder::PossibleValuesParser;
use clap::{Args, Parser, Subcommand, ValueEnum};
use irad::ir::interp::{DEFAULT_MAX_DEPTH, RunOptions};
use irad::passes::dump::Label;
use irad::passes::forward::grad::GradOptions;
use irad::passes::{PassId, PassRun};
use irad::{Error, Source};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

/// A compiler middle-end that differentiates SSA programs: reads a function
/// (`.irad` surface language or `.ir` IR text), and runs it, prints its
/// gradient by forward or reverse mode, shows the IR after each pass, times
/// it, or compiles it to an object file with a C header.
#[derive(Parser)]
#[command(
    name = "irad",
    version,
    after_help = "Examples:
  $ irad grad examples/rosenbrock.irad -f rosenbrock --args '[1.5, 0.5, -0.3]'
  $ irad dump examples/rosenbrock.irad --all-passes

`irad help COMMAND` explains a command; docs/tutorial.md walks through all of them."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate a function and print its value (compiled by the JIT, or by
    /// the reference interpreter with `--backend interp`).
    #[command(after_help = "Example:
  $ irad run examples/rosenbrock.irad -f rosenbrock --args '[1.5, 0.5, -0.3]'")]
    Run(RunCmd),
    /// Print a function's value and its gradient, by reverse mode (default)
    /// or forward mode.
    #[command(after_help = "Examples:
  $ irad grad examples/rosenbrock.irad -f rosenbrock --args '[1.5, 0.5, -0.3]'
  $ irad grad examples/rosenbrock.irad -f rosenbrock --args '[1.5, 0.5, -0.3]' --mode fwd --json")]
    Grad(GradCmd),
    /// Print a function's value and its derivative along a tangent (a
    /// Jacobian-vector product, one pass of forward mode), for any result
    /// with f64 entries.
    #[command(after_help = "Example:
  $ irad jvp examples/rosenbrock.irad -f rosenbrock --args '[1.5, 0.5, -0.3]' --tangent '[1.0, 0.0, 0.0]'")]
    Jvp(JvpCmd),
    /// Print a function's value and its full Jacobian: one row per f64 of the
    /// result, one column per f64 of the arguments, by reverse mode (one seed
    /// per row, the default) or forward mode (one tangent per column).
    #[command(after_help = "Example:
  $ irad jacobian examples/rosenbrock.irad -f rosenbrock --args '[1.5, 0.5, -0.3]' --mode fwd --json")]
    Jacobian(JacobianCmd),
    /// Print a function's value, its gradient and its Hessian times a
    /// direction (a Hessian-vector product, by forward mode over the
    /// reverse-mode pieces), for a function returning f64.
    #[command(after_help = "Example:
  $ irad hvp examples/rosenbrock.irad -f rosenbrock --args '[1.5, 0.5, -0.3]' --tangent '[1.0, 0.0, 0.0]'")]
    Hvp(HvpCmd),
    /// Print a function's value, its gradient and its full Hessian (one
    /// Hessian-vector product per f64 input, batched in lanes), for a
    /// function returning f64.
    #[command(after_help = "Example:
  $ irad hessian examples/rosenbrock.irad -f rosenbrock --args '[1.5, 0.5, -0.3]' --json")]
    Hessian(HessianCmd),
    /// Check a function's derivatives: every entry of its Jacobian by
    /// reverse mode and by forward mode, against finite differences of the
    /// function, with a pass/fail table (exit status 1 when one fails).
    #[command(after_help = "Example:
  $ irad check-grad examples/rosenbrock.irad -f rosenbrock --args '[1.5, 0.5, -0.3]'")]
    CheckGrad(CheckGradCmd),
    /// Time a function and its gradient, compiled by the JIT, in one process:
    /// compile time, median primal and gradient times, and their ratio.
    #[command(after_help = "Example:
  $ irad bench examples/rosenbrock.irad -f rosenbrock --args '[1.5, 0.5, -0.3]' --min-time 0.1")]
    Bench(BenchCmd),
    /// Parse, type-check and verify a file; print `FILE: ok (N functions)`
    /// or every error with its location.
    #[command(after_help = "Example:
  $ irad check examples/rosenbrock.irad")]
    Check(CheckCmd),
    /// Print a file's IR in canonical form (or its control-flow graph): as
    /// written, after each normalisation pass, with its derived functions
    /// (`--mode fwd|rev`), after an optimiser schedule, or with activity.
    #[command(after_help = "Examples:
  $ irad dump examples/branches.irad --all-passes
  $ irad dump examples/rosenbrock.irad --mode rev
  $ irad dump examples/rosenbrock.irad --activity")]
    Dump(DumpCmd),
    /// Write an object file exporting a function through the C ABI, and its
    /// C header (OUT with the extension `.h`); see docs/codegen.md and
    /// examples/c/.
    #[command(after_help = "Example (writes rosenbrock.o and rosenbrock.h):
  $ irad emit examples/rosenbrock.irad -f rosenbrock --grad -o rosenbrock.o")]
    Emit(EmitCmd),
    /// Check every primitive's forward rule against finite differences, and
    /// its reverse rule against the forward rule; exit 1 when one fails.
    #[command(after_help = "Example:
  $ irad test-rules --samples 4")]
    TestRules(TestRulesCmd),
}

#[derive(Args)]
#[command(group(clap::ArgGroup::new("derivative").args(["grad", "hvp"]).multiple(true)))]
struct EmitCmd {
    /// The source file (.irad or .ir).
    file: PathBuf,
    /// The function to export as `NAME` (`.` in its name becomes `_`).
    #[arg(short = 'f', value_name = "NAME")]
    func: String,
    /// Also export `NAME_grad`: value and gradient by reverse mode.
    #[arg(long)]
    grad: bool,
    /// Also export `NAME_hvp`: value, gradient and the Hessian times a
    /// direction the caller passes (forward over reverse; NAME returns f64).
    #[arg(long)]
    hvp: bool,
    /// The argument positions (from 0) `NAME_grad` and `NAME_hvp`
    /// differentiate, e.g. `0,2`; default: every argument whose type
    /// contains f64.
    #[arg(long, value_name = "LIST", value_delimiter = ',', requires = "derivative",
          value_parser = wrt_position)]
    wrt: Option<Vec<usize>>,
    /// The optimiser schedule run over `NAME_grad`'s derived functions, e.g.
    /// `normalise(fold <+ identities); try(dce)`; `id` turns optimisation
    /// off; default: the default schedule (docs/optimise.md).
    #[arg(long, value_name = "S")]
    schedule: Option<String>,
    /// The object file to write; the header goes beside it, with the
    /// extension replaced by `.h`.
    #[arg(short = 'o', value_name = "OUT.o")]
    out: PathBuf,
    /// `NAME_grad` keeps its tapes under about SIZE bytes (like 64M) by
    /// checkpointing long loops, as `irad grad --tape-limit` does.
    #[arg(long, value_name = "SIZE", requires = "grad", value_parser = tape_limit)]
    tape_limit: Option<u64>,
    /// Per-loop overrides of checkpointing for `NAME_grad`, as `irad grad
    /// --checkpoint` takes them (docs/schedules.md).
    #[arg(long, value_name = "RULES", requires = "grad")]
    checkpoint: Option<String>,
}

#[derive(Args)]
struct CheckCmd {
    /// The source file (.irad or .ir).
    file: PathBuf,
    /// Print one JSON object: {"file": F, "ok": true, "functions": N,
    /// "names": [...]}; errors as JSON on stderr.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct TestRulesCmd {
    /// A source file: check the rules it declares (`jvp`/`vjp` after a
    /// function's signature) instead of the built-in rules.
    file: Option<PathBuf>,
    /// Random points per test signature.
    #[arg(long, value_name = "N", default_value_t = irad::rules::check::DEFAULT_SAMPLES,
          value_parser = count)]
    samples: usize,
    /// The seed of the random points and directions.
    #[arg(long, value_name = "S", default_value_t = irad::rules::check::DEFAULT_SEED,
          value_parser = seed)]
    seed: u64,
    /// Print one JSON object: the options, one entry per signature (its
    /// frule and rrule checks) and a summary; errors as JSON on stderr.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct RunCmd {
    /// The source file (.irad or .ir).
    file: PathBuf,
    /// The function to run, with or without `@`.
    #[arg(short = 'f', value_name = "NAME")]
    func: String,
    #[command(flatten)]
    args: ArgsSource,
    /// Where to run it.
    #[arg(long, value_enum, default_value_t = Backend::Jit)]
    backend: Backend,
    /// Print one JSON object: {"value": V}.
    #[arg(long)]
    json: bool,
    /// The call-depth limit; deeper recursion is a run-time error.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_DEPTH, value_parser = count)]
    max_depth: usize,
    /// Run the function specialised on these known arguments (see `dump
    /// --known`); the arguments must agree with them.
    #[arg(long, value_name = "KNOWN", allow_hyphen_values = true)]
    known: Option<String>,
}

/// What `grad` and `bench` both take: the function, its arguments, and the
/// gradient request.
#[derive(Args)]
struct GradArgs {
    /// The source file (.irad or .ir).
    file: PathBuf,
    /// The function, with or without `@`; it returns f64 (with `grad --seed`,
    /// any type with f64 entries).
    #[arg(short = 'f', value_name = "NAME")]
    func: String,
    #[command(flatten)]
    args: ArgsSource,
    /// The AD mode: reverse (one forward sweep and one pullback) or forward.
    #[arg(long, value_enum, default_value_t = Mode::Rev)]
    mode: Mode,
    /// The argument positions (from 0) to differentiate, e.g. `0,2`; default:
    /// every argument whose type contains f64.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = wrt_position)]
    wrt: Option<Vec<usize>>,
    /// Dense forward mode with N tangents per pass (1 to 256; fewer when
    /// fewer f64s are differentiated). Without `--batch` or `--sparse`,
    /// forward mode is sparse from 32 differentiated f64s on, dense with 8
    /// tangents per pass below.
    #[arg(long, value_name = "N", value_parser = batch_width)]
    batch: Option<u32>,
    /// Sparse forward mode: the whole gradient in one pass with sparse
    /// tangents (needs `--mode fwd`; excludes `--batch`).
    #[arg(long, conflicts_with = "batch")]
    sparse: bool,
    /// The call-depth limit; deeper recursion is a run-time error.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_DEPTH, value_parser = count)]
    max_depth: usize,
    /// The optimiser schedule run over the derived functions, e.g.
    /// `normalise(fold <+ identities); try(dce)`; `id` turns optimisation
    /// off; default: the default schedule (docs/optimise.md).
    #[arg(long, value_name = "S")]
    schedule: Option<String>,
    /// Derive without activity analysis: every value gets tangent or
    /// cotangent work (for comparison; docs/activity.md).
    #[arg(long)]
    no_activity: bool,
    /// Reverse mode: keep the tapes under about SIZE bytes (like 64M, 1G,
    /// 65536) by checkpointing long loops: they run without recording and
    /// are replayed stretch by stretch in the pullback (docs/reverse.md,
    /// "Checkpointing"); the gradient is the same, bit for bit.
    #[arg(long, value_name = "SIZE", value_parser = tape_limit)]
    tape_limit: Option<u64>,
    /// Reverse mode: per-loop overrides of checkpointing, rules `LOOP =
    /// CHOICE` separated by `;`: LOOP is `line N` (the loops whose header is
    /// on source line N), `#N` or `@NAME#N` (as the dump labels them),
    /// CHOICE a number of iterations per stretch or `record` (docs/schedules.md).
    #[arg(long, value_name = "RULES")]
    checkpoint: Option<String>,
}

/// A gradient request read: the module, the function, its arguments and
/// the options (the sources are pushed on `sources`).
struct Request {
    module: irad::ir::Module,
    func: irad::ir::FuncId,
    args: Vec<irad::ir::interp::Val>,
    opts: GradOptions,
    mode: irad::Mode,
    schedule: irad::passes::optimise::Strategy,
    /// Forward mode: the lanes and whether irad chose them (`None` in
    /// reverse mode).
    forward: Option<irad::ForwardChoice>,
}

impl GradArgs {
    fn read(self, sources: &mut Vec<Source>, backend: irad::Backend) -> Result<Request, Error> {
        if self.sparse && self.mode == Mode::Rev {
            usage_error("--sparse is sparse forward mode: use it with --mode fwd");
        }
        if self.tape_limit.is_some() && self.mode == Mode::Fwd {
            usage_error("--tape-limit bounds the tapes of reverse mode: use it with --mode rev");
        }
        if self.checkpoint.is_some() && self.mode == Mode::Fwd {
            usage_error(
                "--checkpoint chooses how reverse mode records loops: use it with --mode rev",
            );
        }
        let schedule = irad::read_schedule(self.schedule.as_deref())?;
        let module = load(&self.file, sources)?;
        let func = irad::find_function(&sources[0], &module, &self.func)?;
        sources.push(args_source(self.args)?);
        let args = irad::parse_args(&sources[1], &module, func)?;
        let checkpoints = checkpoints(self.checkpoint, sources, &module)?;
        // `--batch N` or `--sparse` force the lanes; otherwise forward mode
        // picks sparse mode for many inputs (docs/forward.md, "Choosing
        // dense or sparse"). clap keeps `--batch` in 1..=256.
        let forced = match (self.sparse, self.batch) {
            (true, _) => Some(irad::ir::Lanes::Sparse),
            (false, Some(n)) => irad::ir::Lanes::dense(n),
            (false, None) => None,
        };
        let forward = (self.mode == Mode::Fwd).then(|| {
            let n = irad::forward_directions(&module, func, &args, self.wrt.as_deref());
            irad::choose_forward(n, forced, irad::sparse_capable(&module))
        });
        Ok(Request {
            module,
            func,
            args,
            forward,
            opts: GradOptions {
                tape_limit: self.tape_limit,
                checkpoints,
                lanes: match forward {
                    Some(choice) => choice.lanes,
                    None => {
                        irad::ir::Lanes::dense(irad::DEFAULT_BATCH).unwrap_or(irad::ir::Lanes::ONE)
                    }
                },
                wrt: self.wrt,
                run: RunOptions {
                    max_depth: self.max_depth,
                    ..RunOptions::default()
                },
                exec: backend.exec(),
                activity: !self.no_activity,
                ..GradOptions::default()
            },
            mode: match self.mode {
                Mode::Rev => irad::Mode::Reverse,
                Mode::Fwd => irad::Mode::Forward,
            },
            schedule,
        })
    }
}

#[derive(Args)]
struct GradCmd {
    #[command(flatten)]
    req: GradArgs,
    /// Where to run it.
    #[arg(long, value_enum, default_value_t = Backend::Jit)]
    backend: Backend,
    /// Print one JSON object: {"value": V, "gradient": [G0, G1, ...]}.
    #[arg(long)]
    json: bool,
    /// The output seed of reverse mode, a value of the result's type written
    /// like `--args` (`(1.0, 0.5)`): prints the gradient of the seed-weighted
    /// sum of the result's f64 entries (a vector-Jacobian product). Needed
    /// when the result is not one f64; on an f64 result it scales the
    /// gradient.
    #[arg(long, value_name = "S", allow_hyphen_values = true)]
    seed: Option<String>,
    /// Print the time of each stage (parse, check, ssa, normalise, derive,
    /// optimise, codegen, cranelift, run) on stderr; with `--json`, as the
    /// field "timings" of the JSON object instead (docs/cli.md).
    #[arg(long)]
    timings: bool,
}

/// What `jvp` and `jacobian` both take: the function, its arguments, where
/// to run, the output format.
#[derive(Args)]
struct DerivArgs {
    /// The source file (.irad or .ir).
    file: PathBuf,
    /// The function, with or without `@`; its result has f64 entries.
    #[arg(short = 'f', value_name = "NAME")]
    func: String,
    #[command(flatten)]
    args: ArgsSource,
    /// Where to run it.
    #[arg(long, value_enum, default_value_t = Backend::Jit)]
    backend: Backend,
    /// The call-depth limit; deeper recursion is a run-time error.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_DEPTH)]
    max_depth: usize,
    /// The optimiser schedule run over the derived functions; `id` turns
    /// optimisation off; default: the default schedule (docs/optimise.md).
    #[arg(long, value_name = "S")]
    schedule: Option<String>,
}

/// `--wrt` of `jvp`, `hvp` and `hessian`.
#[derive(Args)]
struct WrtArg {
    /// The argument positions (from 0) to differentiate, e.g. `0,2`, as for
    /// `grad`: the other arguments are held constant (their tangent entries
    /// count as zero); default: every argument whose type contains f64.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = wrt_position)]
    wrt: Option<Vec<usize>>,
}

/// How `hvp` and `hessian` compute a Hessian-vector product.
#[derive(Copy, Clone, PartialEq, Eq, ValueEnum)]
enum HvpMode {
    /// Forward mode over the reverse-mode pieces (one pass of `@f.vjp.fwd`).
    FwdOverRev,
    /// Reverse mode over the forward rule (the pieces of `@f.fwd`).
    RevOverFwd,
    /// Forward mode over the forward rule (`@f.fwd.fwdM`: ceil(n / 8) runs per product for n inputs).
    FwdOverFwd,
    /// Forward mode over the sparse gradient (`@f.fwds.grad.fwdM`: one direction per lane).
    FwdOverSparse,
}

impl HvpMode {
    fn lib(self) -> irad::HvpMode {
        match self {
            HvpMode::FwdOverRev => irad::HvpMode::ForwardOverReverse,
            HvpMode::RevOverFwd => irad::HvpMode::ReverseOverForward,
            HvpMode::FwdOverFwd => irad::HvpMode::ForwardOverForward,
            HvpMode::FwdOverSparse => irad::HvpMode::ForwardOverSparse,
        }
    }
}

#[derive(Args)]
struct JvpCmd {
    #[command(flatten)]
    req: DerivArgs,
    #[command(flatten)]
    wrt: WrtArg,
    #[command(flatten)]
    tangent: TangentSource,
    /// Print one JSON object: {"value": V, "jvp": T}.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct HvpCmd {
    #[command(flatten)]
    req: DerivArgs,
    #[command(flatten)]
    wrt: WrtArg,
    /// Forward over reverse (the default) or reverse over forward; the two
    /// agree to rounding.
    #[arg(long, value_enum, default_value_t = HvpMode::FwdOverRev)]
    mode: HvpMode,
    #[command(flatten)]
    tangent: TangentSource,
    /// Print one JSON object: {"value": V, "gradient": [...], "hvp": [...]},
    /// `hvp` shaped like `gradient` (null for arguments without f64).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct HessianCmd {
    #[command(flatten)]
    req: DerivArgs,
    #[command(flatten)]
    wrt: WrtArg,
    /// Forward over reverse (the default: 8 products per run) or reverse
    /// over forward (one product per run).
    #[arg(long, value_enum, default_value_t = HvpMode::FwdOverRev)]
    mode: HvpMode,
    /// Sparse forward mode over the reverse pieces: the whole Hessian in one
    /// run, each row materialised from a sparse tangent (forward over
    /// reverse only).
    #[arg(long)]
    sparse: bool,
    /// Print one JSON object: {"value": V, "gradient": [...], "hessian":
    /// [[row], ...]}, rows over the f64 inputs in argument order.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
#[group(required = true, multiple = false)]
struct TangentSource {
    /// The direction, written like `--args`: one value per argument, of the
    /// argument's shape (entries of i64 and bool arguments are not used).
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    tangent: Option<String>,
    /// A file holding the tangent text.
    #[arg(long, value_name = "F")]
    tangent_file: Option<PathBuf>,
}

#[derive(Args)]
struct JacobianCmd {
    #[command(flatten)]
    req: DerivArgs,
    /// Reverse mode (one seed per row of the result) or forward mode (one
    /// tangent per column, `--batch` of them per pass).
    #[arg(long, value_enum, default_value_t = Mode::Rev)]
    mode: Mode,
    /// Forward mode: tangents carried per pass (1 to 256); default: 8, or
    /// fewer when there are fewer columns.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    batch: Option<u32>,
    /// Print one JSON object: {"value": V, "jacobian": [[row], ...]}.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct CheckGradCmd {
    #[command(flatten)]
    req: DerivArgs,
    /// The largest error against finite differences, |rev - fd| / max(1,
    /// |fd|).
    #[arg(long, value_name = "T", default_value_t = irad::FD_TOLERANCE, value_parser = tolerance, allow_hyphen_values = true)]
    tolerance: f64,
    /// The largest error of forward mode against reverse mode, |fwd - rev| /
    /// max(1, |rev|).
    #[arg(long, value_name = "T", default_value_t = irad::MODE_TOLERANCE, value_parser = tolerance, allow_hyphen_values = true)]
    mode_tolerance: f64,
    /// Print one JSON object: {"value", "ok", "entries": [...], ...}
    /// (docs/cli.md).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct BenchCmd {
    #[command(flatten)]
    req: GradArgs,
    /// Seconds to sample each of primal and gradient (each on its own: a
    /// slow gradient runs fewer times than a fast primal).
    #[arg(long, value_name = "SECONDS", default_value_t = 1.0, value_parser = min_time)]
    min_time: f64,
    /// Print one JSON object: {"compile_s": C, "primal_s": P, "grad_s": G,
    /// "ratio": G/P, "primal_runs": NP, "grad_runs": NG}.
    #[arg(long)]
    json: bool,
}

/// One position of `--wrt LIST` (clap splits the list at commas); the error
/// names the value and what is expected, clap adds the option (exit 2).
fn wrt_position(text: &str) -> Result<usize, String> {
    text.trim().parse::<usize>().map_err(|_| {
        format!("`{text}` is not an argument position (expected a list like 0,2, positions from 0)")
    })
}

/// `--batch N`: tangents per forward pass, 1 to 256 (`irad::ir::MAX_WIDTH`).
fn batch_width(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(n) if (1..=irad::ir::MAX_WIDTH).contains(&n) => Ok(n),
        _ => Err(format!(
            "`{text}` is not a number of tangents (expected an integer from 1 to {})",
            irad::ir::MAX_WIDTH
        )),
    }
}

/// `--tape-limit SIZE`: bytes, with an optional K, M, G or T suffix.
fn tape_limit(text: &str) -> Result<u64, String> {
    irad::parse_size(text)
}

/// A count option (`--samples`, `--max-depth`, `--bisect-limit`).
fn count(text: &str) -> Result<usize, String> {
    text.trim()
        .parse::<usize>()
        .map_err(|_| format!("`{text}` is not a count (expected a non-negative integer)"))
}

/// `--seed S`.
fn seed(text: &str) -> Result<u64, String> {
    text.trim()
        .parse::<u64>()
        .map_err(|_| format!("`{text}` is not a seed (expected an integer from 0 to 2^64 - 1)"))
}

/// `--min-time`: a number of seconds from 0 to one hour.
fn min_time(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if (0.0..=3600.0).contains(&x) => Ok(x),
        _ => Err(format!(
            "`{text}` is not a number of seconds from 0 to 3600"
        )),
    }
}

/// A tolerance: a finite number, 0 (exact) or more.
fn tolerance(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if x >= 0.0 && x.is_finite() => Ok(x),
        _ => Err(format!(
            "`{text}` is not a tolerance: a finite number, 0 or more (e.g. 1e-6)"
        )),
    }
}

#[derive(Copy, Clone, PartialEq, Eq, ValueEnum)]
enum Mode {
    /// Reverse mode.
    Rev,
    /// Forward mode.
    Fwd,
}

#[derive(Args)]
#[group(required = true, multiple = false)]
struct ArgsSource {
    /// The arguments as IR literals: `1.5, [1.0, 2.0], (1.0, 2)`.
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    args: Option<String>,
    /// A file holding the argument text.
    #[arg(long, value_name = "F")]
    args_file: Option<PathBuf>,
}

#[derive(Args)]
struct DumpCmd {
    /// The source file (.irad or .ir).
    file: PathBuf,
    /// Print only this function (with `--mode fwd`: its forward rule and the
    /// rules it calls).
    #[arg(short = 'f', value_name = "NAME")]
    func: Option<String>,
    /// Add the forward rules (`@f.fwd`) after normalisation and print them;
    /// or, with `rev`, print the BBCode of each function (as `#` comments)
    /// and the module with `@f.rev` and its forward sweep and pullback, each
    /// forward sweep followed by its tape plan (`# tape of @f.rev.fwd:`).
    /// The derived functions are optimised as `irad grad` runs them: by the
    /// default schedule unless `--schedule` names another.
    #[arg(long, value_enum)]
    mode: Option<DumpMode>,
    /// Text (IR), dot (Graphviz control-flow graph), or clif: the Cranelift
    /// IR that code generation makes of the module printed (after inlining
    /// and Cranelift's optimiser, before register allocation).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Print the module after the normalisation pipeline up to and including
    /// PASS (`forward`, with `--mode fwd`: after the forward rules are built;
    /// `inline`: after everything else, the module as code generation
    /// compiles it, with small non-recursive callees inlined).
    #[arg(long, value_name = "PASS", conflicts_with = "all_passes",
          value_parser = PossibleValuesParser::new(after_names()))]
    after: Option<String>,
    /// Print the input, then the module after each normalisation pass, each
    /// section headed by a `# input` or `# after PASS` comment line.
    #[arg(long)]
    all_passes: bool,
    /// Print the normalised module with the result of activity analysis: the
    /// active parameters after each header, `# active` or `# const` after
    /// each statement with a result.
    #[arg(long, conflicts_with_all = ["mode", "after", "all_passes", "known"])]
    activity: bool,
    /// With `--activity`: the parameters (positions from 0) that are active,
    /// e.g. `0,2`; default: all.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        value_parser = wrt_position,
        requires = "activity"
    )]
    wrt: Option<Vec<usize>>,
    /// Print the function of `-f` specialised on known arguments: one entry
    /// per parameter, `_` for unknown, `_[N]` for an array of length N, or a
    /// literal as in `--args` (`--known '2.0, _, _[4]'`).
    #[arg(long, value_name = "KNOWN", allow_hyphen_values = true,
          requires = "func", conflicts_with_all = ["mode", "after", "all_passes"])]
    known: Option<String>,
    /// Run this optimiser schedule over the derived functions (over every
    /// function without `--mode`) after the last stage; with
    /// `--all-passes`, print the module after each of its top-level steps
    /// (`# after STEP`). Default: with `--mode` (and no `--after`), the
    /// default schedule `irad grad` runs; `id` shows the raw derivation;
    /// without `--mode`, none (docs/optimise.md).
    #[arg(long, value_name = "S")]
    schedule: Option<String>,
    /// Run only the first N passes (normalisation passes, the derivation,
    /// each step of the schedule) and skip the rest, printing on stderr
    /// which ran (`BISECT: running pass (1) uniform_constant_operands`); the derivation
    /// always runs, and with `--mode rev` the normalisation it needs.
    /// Lower N until the output is right to find the pass that breaks it.
    #[arg(long, value_name = "N", conflicts_with_all = ["activity", "known"],
          value_parser = count)]
    bisect_limit: Option<usize>,
    /// With `--mode rev`: derive under this tape limit (like 64M), as `irad
    /// grad --tape-limit` does; the tape plans say which loops are
    /// checkpointed and how, and which are not and why.
    #[arg(long, value_name = "SIZE", value_parser = tape_limit)]
    tape_limit: Option<u64>,
    /// With `--mode rev`: per-loop overrides of checkpointing, as `irad grad
    /// --checkpoint` takes them (docs/schedules.md); the tape plans show them.
    #[arg(long, value_name = "RULES")]
    checkpoint: Option<String>,
}

#[derive(Copy, Clone, PartialEq, Eq, ValueEnum)]
enum DumpMode {
    /// Forward mode.
    Fwd,
    /// Reverse mode.
    Rev,
}

/// The names `dump --after` takes: the normalisation passes, then `forward`
/// and `reverse`.
fn after_names() -> Vec<&'static str> {
    let mut names: Vec<&str> = irad::passes::NORMALISE.iter().map(|p| p.name()).collect();
    names.push(PassId::Forward.name());
    names.push(PassId::Reverse.name());
    names.push(PassId::Inline.name());
    names
}

/// Prints one line of the bisect log (`--bisect-limit`) on stderr.
fn log_pass(run: &PassRun) {
    emit(&mut std::io::stderr(), &format!("{run}\n"));
}

#[derive(Copy, Clone, ValueEnum)]
enum Backend {
    /// Native code from the Cranelift JIT.
    Jit,
    /// The reference interpreter.
    Interp,
}

impl Backend {
    fn lib(self) -> irad::Backend {
        match self {
            Backend::Jit => irad::Backend::Jit,
            Backend::Interp => irad::Backend::Interp,
        }
    }
}

#[derive(Copy, Clone, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Dot,
    Clif,
}

fn main() -> ExitCode {
    limit_malloc_arenas();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // clap exits 0 for --help and --version and 2 for usage errors; a
        // usage error of a command line asking for `--json` is JSON.
        Err(e) => {
            if e.use_stderr() && std::env::args_os().skip(1).any(|a| a == "--json") {
                JSON_ERRORS.store(true, Ordering::Relaxed);
                usage_exit(&e.render().to_string())
            }
            e.exit()
        }
    };
    JSON_ERRORS.store(cli.command.json(), Ordering::Relaxed);
    let mut sources = Vec::new();
    match execute(cli.command, &mut sources) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let text = if JSON_ERRORS.load(Ordering::Relaxed) {
                format!("{}\n", e.to_json())
            } else {
                let refs: Vec<&Source> = sources.iter().collect();
                e.render(&refs)
            };
            emit(&mut std::io::stderr(), &text);
            ExitCode::from(1)
        }
    }
}

/// Caps glibc's malloc arenas at two. The code generator compiles huge
/// functions (and the parts of split ones) on threads, and glibc gives each
/// thread an arena of its own whose freed memory stays mapped
/// (docs/performance.md, "Fifth round"). One arena would save more (643
/// against 509 MB on the 100 000-step chain) but made a run of compiled
/// code fail to allocate under a 1.4 GB address-space limit
/// (`tests/out_of_memory.rs`) where two arenas succeed. Only the command
/// line does this; a program embedding the library keeps its own
/// settings.
/// glibc's own `MALLOC_ARENA_MAX` in the environment takes precedence.
///
/// It also fixes glibc's mmap threshold at 4 MiB (unless
/// `MALLOC_MMAP_THRESHOLD_` is set): blocks of that size and more (the
/// statement tables of huge functions, a syntax tree's vectors) are mapped
/// on their own and unmapped when freed, instead of the threshold rising
/// after the first such free and later ones staying in an arena, mapped.
/// The 100 000-step chain's resident peak: 420 -> 361 MB, for about 0.4 s
/// of system time in page faults; no difference at 10 000 steps
/// (docs/performance.md, "Huge user functions derived in parts").
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn limit_malloc_arenas() {
    // SAFETY: `mallopt` only sets a parameter of the allocator; it runs
    // first in `main`, before any thread exists.
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 4 << 20);
        }
    }
}

/// Other targets keep their allocator's settings.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_malloc_arenas() {}

/// Whether errors are printed as JSON (`--json`: docs/cli.md, "JSON
/// output"); set once in `main`, read where usage errors are reported.
static JSON_ERRORS: AtomicBool = AtomicBool::new(false);

impl Command {
    /// Whether the command was asked for JSON output.
    fn json(&self) -> bool {
        match self {
            Command::Run(c) => c.json,
            Command::Grad(c) => c.json,
            Command::Jvp(c) => c.json,
            Command::Jacobian(c) => c.json,
            Command::Hvp(c) => c.json,
            Command::Hessian(c) => c.json,
            Command::CheckGrad(c) => c.json,
            Command::Bench(c) => c.json,
            Command::Check(c) => c.json,
            Command::TestRules(c) => c.json,
            Command::Dump(_) | Command::Emit(_) => false,
        }
    }
}

/// Runs one command; every source read is pushed on `sources` so that errors
/// can show their lines.
fn execute(command: Command, sources: &mut Vec<Source>) -> Result<(), Error> {
    match command {
        Command::TestRules(cmd) => test_rules(cmd, sources),
        Command::Emit(cmd) => emit_cmd(cmd, sources),
        Command::Check(cmd) => check(cmd, sources),
        Command::Dump(cmd) => dump(cmd, sources),
        Command::Grad(cmd) => grad(cmd, sources),
        Command::Jvp(cmd) => jvp(cmd, sources),
        Command::Jacobian(cmd) => jacobian(cmd, sources),
        Command::Hvp(cmd) => hvp(cmd, sources),
        Command::Hessian(cmd) => hessian(cmd, sources),
        Command::CheckGrad(cmd) => check_grad(cmd, sources),
        Command::Bench(cmd) => bench(cmd, sources),
        Command::Run(cmd) => run(cmd, sources),
    }
}

/// `irad test-rules`: the table of rule checks; an error when one failed.
fn test_rules(cmd: TestRulesCmd, sources: &mut Vec<Source>) -> Result<(), Error> {
    if let Some(file) = &cmd.file {
        let module = load(file, sources)?;
        let registry = irad::rules::Registry::new();
        let checks = irad::check_declared_rules(
            &sources[0],
            &module,
            &registry,
            cmd.samples,
            cmd.seed,
            &irad::GradCheckOptions::default(),
        );
        if cmd.json {
            out(&format!("{}\n", checks.to_json()));
        } else {
            out(&checks.table());
        }
        return checks.verdict();
    }
    let opts = irad::rules::check::CheckOptions {
        samples: cmd.samples,
        seed: cmd.seed,
    };
    let checks = irad::check_rules(&opts);
    if cmd.json {
        out(&format!("{}\n", checks.to_json()));
    } else {
        out(&checks.table());
    }
    checks.verdict()
}

/// The checkpoint schedule `text` writes (`--checkpoint`) for `module`, the
/// program of `sources[0]`; its text joins `sources` as `<checkpoint>`, so
/// that an error in it shows the line.
fn checkpoints(
    text: Option<String>,
    sources: &mut Vec<Source>,
    module: &irad::ir::Module,
) -> Result<irad::passes::reverse::CheckpointSchedule, Error> {
    let Some(text) = text else {
        return Ok(Default::default());
    };
    sources.push(Source::new(irad::CHECKPOINT_SOURCE, &text));
    irad::read_checkpoints(Some(&text), &sources[0], module)
}

/// `irad emit`: the object file and its C header.
fn emit_cmd(cmd: EmitCmd, sources: &mut Vec<Source>) -> Result<(), Error> {
    let schedule = irad::read_schedule(cmd.schedule.as_deref())?;
    let module = load(&cmd.file, sources)?;
    let func = irad::find_function(&sources[0], &module, &cmd.func)?;
    let is_dir = cmd.out.is_dir()
        || cmd.out.file_name().is_none()
        || cmd.out.as_os_str().to_string_lossy().ends_with(['/', '\\']);
    if is_dir {
        usage_error(&format!(
            "-o must name an object file path such as `out.o` (the header goes beside it \
             as `out.h`), but `{}` is a directory",
            cmd.out.display()
        ));
    }
    let header = cmd.out.with_extension("h");
    if header == cmd.out {
        usage_error(&format!(
            "-o `{}` would be overwritten by the header: give the object file a `.o` name",
            cmd.out.display()
        ));
    }
    let header_name = header
        .file_name()
        .map_or_else(|| "out.h".into(), |n| n.to_string_lossy().into_owned());
    let req = irad::EmitRequest {
        grad: cmd.grad,
        hvp: cmd.hvp,
        wrt: cmd.wrt,
        schedule: Some(schedule),
        tape_limit: cmd.tape_limit,
        checkpoints: checkpoints(cmd.checkpoint, sources, &module)?,
        ..irad::EmitRequest::new(func, &header_name)
    };
    let (obj, unbounded) = irad::emit_noting(&sources[0], &module, &req)?;
    warn_unbounded(&sources[0], &unbounded);
    write_file(&cmd.out, &obj.object)?;
    write_file(&header, obj.header.as_bytes())?;
    Ok(())
}

/// `irad check`: `FILE: ok (N functions)`, or its JSON.
fn check(cmd: CheckCmd, sources: &mut Vec<Source>) -> Result<(), Error> {
    let module = load(&cmd.file, sources)?;
    let n = module.len();
    if cmd.json {
        let names: Vec<&str> = module.func_ids().map(|f| module[f].name.as_str()).collect();
        let json = serde_json::json!({
            "file": cmd.file.display().to_string(),
            "ok": true,
            "functions": n,
            "names": names,
        });
        out(&format!("{json}\n"));
    } else {
        let plural = if n == 1 { "" } else { "s" };
        out(&format!(
            "{}: ok ({n} function{plural})\n",
            cmd.file.display()
        ));
    }
    Ok(())
}

/// `irad dump`: the module as read, after passes, with derived functions
/// (optimised as `irad grad` runs them, with the tape plans of reverse
/// mode), specialised, or annotated with activity.
fn dump(cmd: DumpCmd, sources: &mut Vec<Source>) -> Result<(), Error> {
    // With `--mode`, the derived functions are printed as `irad grad`
    // compiles them: optimised by the default schedule unless `--schedule`
    // names another (`id`: none); `--after` a pass stops before it.
    let schedule = match &cmd.schedule {
        Some(text) => Some(irad::read_schedule(Some(text))?),
        None if cmd.mode.is_some()
            && (cmd.after.is_none() || cmd.after.as_deref() == Some(PassId::Inline.name())) =>
        {
            Some(irad::read_schedule(None)?)
        }
        None => None,
    };
    if cmd.tape_limit.is_some() && cmd.mode != Some(DumpMode::Rev) {
        usage_error(
            "--tape-limit shows the checkpointed loops of reverse mode: use it with --mode rev",
        );
    }
    if cmd.checkpoint.is_some() && cmd.mode != Some(DumpMode::Rev) {
        usage_error(
            "--checkpoint shows the checkpointed loops of reverse mode: use it with --mode rev",
        );
    }
    if cmd.format == Format::Dot && cmd.activity {
        usage_error(
            "`--activity` annotates the IR text: it cannot be combined with `--format dot` \
             (use `--format text`, the default)",
        );
    }
    if cmd.format == Format::Clif && (cmd.all_passes || cmd.activity) {
        usage_error(
            "`--format clif` prints the code of one module: it cannot be combined \
             with `--all-passes` or `--activity`",
        );
    }
    let module = load(&cmd.file, sources)?;
    if let (Some(known), Some(name)) = (&cmd.known, &cmd.func) {
        let func = irad::find_function(&sources[0], &module, name)?;
        let (m, spec, _) = specialised(sources, &module, func, known)?;
        if cmd.format == Format::Clif {
            out(&render_clif(&sources[0], &m, &[spec])?);
        } else {
            out(&render_module(&m, &[spec], cmd.format));
        }
        return Ok(());
    }
    let funcs = match &cmd.func {
        Some(name) => vec![irad::find_function(&sources[0], &module, name)?],
        None => Vec::new(),
    };
    let checkpoints = checkpoints(cmd.checkpoint.clone(), sources, &module)?;
    if cmd.activity {
        out(&irad::activity_dump(
            &sources[0],
            &module,
            &funcs,
            cmd.wrt.as_deref(),
        )?);
        return Ok(());
    }
    // clap let through only the names of `after_names`.
    let after = cmd.after.as_deref().and_then(PassId::from_name);
    if after == Some(PassId::Forward) && cmd.mode != Some(DumpMode::Fwd) {
        usage_error("`--after forward` needs `--mode fwd`");
    }
    if after == Some(PassId::Reverse) && cmd.mode != Some(DumpMode::Rev) {
        usage_error("`--after reverse` needs `--mode rev`");
    }
    let req = irad::passes::dump::DumpRequest {
        funcs,
        mode: cmd.mode.map(|mode| match mode {
            DumpMode::Fwd => irad::passes::dump::DumpMode::Forward,
            DumpMode::Rev => irad::passes::dump::DumpMode::Reverse,
        }),
        after,
        all_passes: cmd.all_passes,
        schedule: schedule.as_ref(),
        bisect_limit: cmd.bisect_limit,
        on_pass: cmd.bisect_limit.map(|_| log_pass as fn(&PassRun)),
        tape_limit: cmd.tape_limit,
        checkpoints: Some(&checkpoints),
    };
    let registry = irad::rules::Registry::new();
    let dump = irad::passes::dump::dump(&module, &req, &registry)
        .map_err(|e| irad::pass_error(&sources[0], e))?;
    if cmd.format == Format::Clif {
        if let Some(last) = dump.sections.last() {
            out(&render_clif(&sources[0], &last.module, &dump.funcs)?);
        }
        return Ok(());
    }
    let mut text = String::new();
    for (i, section) in dump.sections.iter().enumerate() {
        if cmd.all_passes {
            if i > 0 {
                text.push('\n');
            }
            text.push_str(&section.heading());
        }
        // The BBCode heads the reverse section, or the one section printed.
        let reverse = matches!(section.label, Label::Pass(PassId::Reverse));
        let text_out = cmd.format == Format::Text;
        if text_out && (reverse || !cmd.all_passes) && !dump.bbcode.is_empty() {
            text.push_str(&irad::passes::annotate::comment_lines(&dump.bbcode));
        }
        if text_out {
            text.push_str(&render_with_tapes(&dump, &section.module));
        } else {
            text.push_str(&render_module(&section.module, &dump.funcs, cmd.format));
        }
    }
    out(&text);
    Ok(())
}

/// The functions of `dump` (all when it names none) of `module` as IR text,
/// each forward sweep `@f.rev.fwd` followed by its tape plan as `#` comment
/// lines (`# tape of @f.rev.fwd:`), named as `module` prints its values.
fn render_with_tapes(dump: &irad::passes::dump::Dump, module: &irad::ir::Module) -> String {
    let funcs: Vec<irad::ir::FuncId> = if dump.funcs.is_empty() {
        module.func_ids().collect()
    } else {
        dump.funcs.clone()
    };
    funcs
        .iter()
        .map(|&f| {
            let mut text = irad::ir::text::print_func(module, f);
            text.push_str(&dump.tape_comments(module, f).unwrap_or_default());
            text
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `irad grad`: value and gradient, as text or JSON; with `--seed`, the
/// gradient of the seed-weighted sum of the result's f64 entries.
fn grad(cmd: GradCmd, sources: &mut Vec<Source>) -> Result<(), Error> {
    if cmd.seed.is_some() && cmd.req.mode == Mode::Fwd {
        usage_error(
            "--seed is the output seed of reverse mode: it cannot be used with --mode fwd \
             (`irad jvp` gives forward mode along a tangent)",
        );
    }
    if cmd.timings {
        irad::timings::enable(true);
    }
    let Request {
        module,
        func,
        args,
        opts,
        mode,
        schedule,
        forward,
    } = cmd.req.read(sources, cmd.backend.lib())?;
    let registry = irad::rules::Registry::new();
    let warnings = Warnings::new(&sources[0], !cmd.json);
    let opts = irad::GradOptions {
        on_unbounded: Some(warnings.hook()),
        ..opts
    };
    let req = irad::GradRequest {
        func,
        args: &args,
        mode,
        opts,
        schedule: Some(schedule),
    };
    let (g, m) = match cmd.seed {
        Some(text) => {
            sources.push(Source {
                name: irad::SEED_SOURCE.into(),
                text,
            });
            let seed = irad::parse_seed(&sources[sources.len() - 1], &module, func)?;
            irad::vjp(&sources[0], &module, &registry, &req, &seed)?
        }
        None => {
            if mode == irad::Mode::Reverse {
                irad::require_seed(&sources[0], &module, func)?;
            }
            // The module read is not needed after: given, not copied.
            irad::grad_owned(&sources[0], module, &registry, &req)?
        }
    };
    if cmd.json {
        let grads: Vec<serde_json::Value> = g
            .gradient
            .iter()
            .map(|d| {
                d.as_ref()
                    .map_or(serde_json::Value::Null, |d| irad::value_to_json(d, &m))
            })
            .collect();
        let mut json = serde_json::json!({
            "value": irad::value_to_json(&g.value, &m),
            "gradient": grads,
        });
        if let Some(choice) = forward {
            json["forward"] = forward_json(&choice);
        }
        warnings.add_to(&mut json);
        if cmd.timings {
            json["timings"] = irad::timings::to_json(&irad::timings::snapshot());
        }
        out(&format!("{json}\n"));
    } else {
        if cmd.timings {
            emit(
                &mut std::io::stderr(),
                &irad::timings::to_text(&irad::timings::snapshot()),
            );
        }
        let f = &m[func];
        let mut text = format!("value: {}\ngradient:\n", g.value.display(&m));
        for (i, d) in g.gradient.iter().enumerate() {
            let shown = match d {
                Some(d) => d.display(&m).replace("()", "-"),
                None => "-".to_string(),
            };
            text.push_str(&format!("  {}: {shown}\n", param_name(f, i)));
        }
        out(&text);
    }
    Ok(())
}

/// The warnings of the loops whose tape grows though a tape limit or the
/// checkpoint schedule asked for checkpointing ([`irad::unbounded_warning`]),
/// gathered as the derivation notes them ([`Warnings::hook`]): before the
/// run, which such a loop may make fail for want of memory, and also from
/// rules derived during the run (calls through function values). Each
/// warning once, also when the gradient is derived again (the strong
/// fallback).
struct Warnings {
    src: Source,
    /// Print each on stderr as it comes (not under `--json`).
    print: bool,
    lines: std::sync::Mutex<Vec<String>>,
}

impl Warnings {
    fn new(src: &Source, print: bool) -> std::sync::Arc<Warnings> {
        std::sync::Arc::new(Warnings {
            src: src.clone(),
            print,
            lines: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// The hook the gradient options take.
    fn hook(self: &std::sync::Arc<Warnings>) -> irad::UnboundedHook {
        let w = self.clone();
        irad::UnboundedHook::new(move |u| {
            let line = irad::unbounded_warning(&w.src, u);
            let mut lines = w.lines.lock().unwrap_or_else(|e| e.into_inner());
            if !lines.contains(&line) {
                if w.print {
                    emit(&mut std::io::stderr(), &format!("{line}\n"));
                }
                lines.push(line);
            }
        })
    }

    /// Under `--json`, the warnings as the field `warnings` of the object
    /// printed, when there are any: stderr carries only errors under
    /// `--json`.
    fn add_to(&self, json: &mut serde_json::Value) {
        let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        if !lines.is_empty() {
            json["warnings"] = serde_json::Value::from(lines.clone());
        }
    }
}

/// Prints on stderr a warning per loop whose tape grows though a tape limit
/// or the checkpoint schedule asked for checkpointing
/// ([`irad::unbounded_warning`]).
fn warn_unbounded(src: &Source, loops: &[irad::UnboundedLoop]) {
    for u in loops {
        emit(
            &mut std::io::stderr(),
            &format!("{}\n", irad::unbounded_warning(src, u)),
        );
    }
}

/// `%name` of parameter `i` of `f`, or `argument i` when it has none.
fn param_name(f: &irad::ir::Func, i: usize) -> String {
    f.params
        .get(i)
        .and_then(|&v| f.values[v].name.as_deref())
        .map_or(format!("argument {i}"), |n| format!("%{n}"))
}

/// What `jvp` and `jacobian` read: the module, the function, its arguments,
/// and a gradient request with the options of `cmd` (sources pushed on
/// `sources`: the file, then the arguments).
fn read_deriv(
    cmd: DerivArgs,
    sources: &mut Vec<Source>,
) -> Result<
    (
        irad::ir::Module,
        irad::ir::FuncId,
        Vec<irad::Val>,
        GradOptions,
        irad::passes::optimise::Strategy,
    ),
    Error,
> {
    let schedule = irad::read_schedule(cmd.schedule.as_deref())?;
    let module = load(&cmd.file, sources)?;
    let func = irad::find_function(&sources[0], &module, &cmd.func)?;
    sources.push(args_source(cmd.args)?);
    let args = irad::parse_args(&sources[1], &module, func)?;
    let opts = GradOptions {
        run: RunOptions {
            max_depth: cmd.max_depth,
            ..RunOptions::default()
        },
        exec: cmd.backend.lib().exec(),
        ..GradOptions::default()
    };
    Ok((module, func, args, opts, schedule))
}

/// `irad jvp`: the value and the derivative along the tangent.
fn jvp(cmd: JvpCmd, sources: &mut Vec<Source>) -> Result<(), Error> {
    let (module, func, args, opts, schedule) = read_deriv(cmd.req, sources)?;
    let tangent = read_tangent(cmd.tangent, sources, &module, func, &args)?;
    let registry = irad::rules::Registry::new();
    let req = irad::GradRequest {
        opts: GradOptions {
            wrt: cmd.wrt.wrt,
            ..opts
        },
        schedule: Some(schedule),
        ..irad::GradRequest::new(func, &args)
    };
    let (d, m) = irad::jvp(&sources[0], &module, &registry, &req, &tangent)?;
    if cmd.json {
        let json = serde_json::json!({
            "value": irad::value_to_json(&d.value, &m),
            "jvp": irad::value_to_json(&d.jvp, &m),
        });
        out(&format!("{json}\n"));
    } else {
        out(&format!(
            "value: {}\njvp: {}\n",
            d.value.display(&m),
            d.jvp.display(&m).replace("()", "-")
        ));
    }
    Ok(())
}

/// The tangent of `--tangent` or `--tangent-file` (its source pushed on
/// `sources`), read for `func` at `args`.
fn read_tangent(
    src: TangentSource,
    sources: &mut Vec<Source>,
    module: &irad::ir::Module,
    func: irad::ir::FuncId,
    args: &[irad::Val],
) -> Result<Vec<irad::Val>, Error> {
    let tangent_src = match (src.tangent, src.tangent_file) {
        (Some(text), _) => Source {
            name: irad::TANGENT_SOURCE.into(),
            text,
        },
        (None, Some(path)) => irad::read_source(&path)?,
        // clap's group makes one of the two required.
        (None, None) => Source {
            name: irad::TANGENT_SOURCE.into(),
            text: String::new(),
        },
    };
    sources.push(tangent_src);
    irad::parse_tangent(&sources[sources.len() - 1], module, func, args)
}

/// `irad hvp`: the value, the gradient and H·V, as text or JSON.
fn hvp(cmd: HvpCmd, sources: &mut Vec<Source>) -> Result<(), Error> {
    let (module, func, args, opts, schedule) = read_deriv(cmd.req, sources)?;
    let tangent = read_tangent(cmd.tangent, sources, &module, func, &args)?;
    let registry = irad::rules::Registry::new();
    let req = irad::GradRequest {
        opts: GradOptions {
            wrt: cmd.wrt.wrt,
            ..opts
        },
        schedule: Some(schedule),
        ..irad::GradRequest::new(func, &args)
    };
    let (h, m) = irad::hvp_via(
        &sources[0],
        &module,
        &registry,
        &req,
        &tangent,
        cmd.mode.lib(),
    )?;
    let json_list = |g: &[Option<irad::Val>]| -> Vec<serde_json::Value> {
        g.iter()
            .map(|d| {
                d.as_ref()
                    .map_or(serde_json::Value::Null, |d| irad::value_to_json(d, &m))
            })
            .collect()
    };
    if cmd.json {
        let json = serde_json::json!({
            "value": irad::value_to_json(&h.value, &m),
            "gradient": json_list(&h.gradient),
            "hvp": json_list(&h.hvp),
        });
        out(&format!("{json}\n"));
    } else {
        let f = &m[func];
        let mut text = format!("value: {}\n", h.value.display(&m));
        for (title, list) in [("gradient", &h.gradient), ("hvp", &h.hvp)] {
            text.push_str(&format!("{title}:\n"));
            for (i, d) in list.iter().enumerate() {
                let shown = match d {
                    Some(d) => d.display(&m).replace("()", "-"),
                    None => "-".to_string(),
                };
                text.push_str(&format!("  {}: {shown}\n", param_name(f, i)));
            }
        }
        out(&text);
    }
    Ok(())
}

/// `irad hessian`: the value, the gradient and the Hessian, as text (the
/// gradient, a line of labels, then one labelled line per row) or JSON.
fn hessian(cmd: HessianCmd, sources: &mut Vec<Source>) -> Result<(), Error> {
    match (cmd.sparse, cmd.mode) {
        (true, HvpMode::RevOverFwd) => usage_error(
            "--sparse is sparse forward mode over the reverse pieces: it cannot be used with --mode rev-over-fwd",
        ),
        (true, HvpMode::FwdOverFwd) => usage_error(
            "--sparse is sparse forward mode over the reverse pieces: it cannot be used with --mode fwd-over-fwd",
        ),
        (true, HvpMode::FwdOverSparse) => usage_error(
            "--sparse is sparse forward mode over the reverse pieces: it cannot be used with --mode fwd-over-sparse",
        ),
        _ => {}
    }
    let (module, func, args, opts, schedule) = read_deriv(cmd.req, sources)?;
    let registry = irad::rules::Registry::new();
    let req = irad::GradRequest {
        opts: GradOptions {
            wrt: cmd.wrt.wrt,
            lanes: if cmd.sparse {
                irad::ir::Lanes::Sparse
            } else {
                opts.lanes
            },
            ..opts
        },
        schedule: Some(schedule),
        ..irad::GradRequest::new(func, &args)
    };
    let (h, m) = irad::hessian_via(&sources[0], &module, &registry, &req, cmd.mode.lib())?;
    let grads: Vec<serde_json::Value> = h
        .gradient
        .iter()
        .map(|d| {
            d.as_ref()
                .map_or(serde_json::Value::Null, |d| irad::value_to_json(d, &m))
        })
        .collect();
    if cmd.json {
        let rows: Vec<serde_json::Value> = h
            .rows
            .iter()
            .map(|r| {
                serde_json::Value::Array(
                    r.iter()
                        .map(|&x| irad::value_to_json(&irad::Val::F64(x), &m))
                        .collect(),
                )
            })
            .collect();
        let json = serde_json::json!({
            "value": irad::value_to_json(&h.value, &m),
            "gradient": grads,
            "hessian": rows,
        });
        out(&format!("{json}\n"));
    } else {
        let f = &m[func];
        let mut text = format!("value: {}\ngradient:\n", h.value.display(&m));
        for (i, d) in h.gradient.iter().enumerate() {
            let shown = match d {
                Some(d) => d.display(&m).replace("()", "-"),
                None => "-".to_string(),
            };
            text.push_str(&format!("  {}: {shown}\n", param_name(f, i)));
        }
        let n = h.inputs.len();
        text.push_str(&format!(
            "hessian: {n} x {n} (f64 inputs)\n  columns: {}\n",
            h.inputs.join(", ")
        ));
        for (label, row) in h.inputs.iter().zip(&h.rows) {
            let cells: Vec<String> = row
                .iter()
                .map(|&x| irad::ir::text::num::format_f64(x))
                .collect();
            text.push_str(&format!("  {label}: {}\n", cells.join(", ")));
        }
        out(&text);
    }
    Ok(())
}

/// `irad jacobian`: the value and the Jacobian, as text (a line of column
/// labels, then one labelled line per row) or JSON.
fn jacobian(cmd: JacobianCmd, sources: &mut Vec<Source>) -> Result<(), Error> {
    let (module, func, args, opts, schedule) = read_deriv(cmd.req, sources)?;
    let registry = irad::rules::Registry::new();
    let req = irad::GradRequest {
        mode: match cmd.mode {
            Mode::Rev => irad::Mode::Reverse,
            Mode::Fwd => irad::Mode::Forward,
        },
        opts: GradOptions {
            // clap keeps `--batch` in 1..=256.
            lanes: irad::ir::Lanes::dense(cmd.batch.unwrap_or(8)).unwrap_or(irad::ir::Lanes::ONE),
            ..opts
        },
        schedule: Some(schedule),
        ..irad::GradRequest::new(func, &args)
    };
    let (j, m) = irad::jacobian(&sources[0], &module, &registry, &req)?;
    let num = |x: f64| irad::Val::F64(x).display(&m);
    if cmd.json {
        let rows: Vec<serde_json::Value> = j
            .rows
            .iter()
            .map(|r| {
                r.iter()
                    .map(|&x| irad::value_to_json(&irad::Val::F64(x), &m))
                    .collect()
            })
            .collect();
        let json = serde_json::json!({
            "value": irad::value_to_json(&j.value, &m),
            "jacobian": rows,
        });
        out(&format!("{json}\n"));
    } else {
        let mut text = format!(
            "value: {}\njacobian: {} row(s) (result entries) x {} column(s) (f64 inputs)\n  columns: {}\n",
            j.value.display(&m),
            j.rows.len(),
            j.inputs.len(),
            if j.inputs.is_empty() {
                "(none)".to_string()
            } else {
                j.inputs.join(", ")
            }
        );
        for (label, row) in j.outputs.iter().zip(&j.rows) {
            let cells: Vec<String> = row.iter().map(|&x| num(x)).collect();
            let cells = if cells.is_empty() {
                "(none)".to_string()
            } else {
                cells.join(", ")
            };
            text.push_str(&format!("  {label}: {cells}\n"));
        }
        out(&text);
    }
    Ok(())
}

/// `irad check-grad`: the table (or JSON) of derivative checks; an error
/// when one failed.
fn check_grad(cmd: CheckGradCmd, sources: &mut Vec<Source>) -> Result<(), Error> {
    let (module, func, args, opts, schedule) = read_deriv(cmd.req, sources)?;
    let registry = irad::rules::Registry::new();
    let req = irad::GradRequest {
        opts: GradOptions {
            lanes: irad::ir::Lanes::dense(8).unwrap_or(irad::ir::Lanes::ONE),
            ..opts
        },
        schedule: Some(schedule),
        ..irad::GradRequest::new(func, &args)
    };
    let check_opts = irad::GradCheckOptions {
        tolerance: cmd.tolerance,
        mode_tolerance: cmd.mode_tolerance,
    };
    let (check, m) = irad::check_grad(&sources[0], &module, &registry, &req, &check_opts)?;
    if cmd.json {
        out(&format!("{}\n", check.to_json(&m)));
    } else {
        out(&check.table(&m));
    }
    check.verdict(&sources[0].name, &m[func].name)
}

/// `irad bench`: compile time, primal and gradient medians, their ratio.
fn bench(cmd: BenchCmd, sources: &mut Vec<Source>) -> Result<(), Error> {
    let Request {
        module,
        func,
        args,
        opts,
        mode,
        schedule,
        forward,
    } = cmd.req.read(sources, irad::Backend::Jit)?;
    let registry = irad::rules::Registry::new();
    let warnings = Warnings::new(&sources[0], !cmd.json);
    let opts = irad::BenchOptions {
        grad: irad::GradOptions {
            on_unbounded: Some(warnings.hook()),
            ..opts
        },
        mode,
        min_time: std::time::Duration::from_secs_f64(cmd.min_time),
        schedule,
    };
    // On a terminal, and not under `--json`, one line counts the seconds up
    // (`\r`) and is wiped when sampling ends; elsewhere nothing is shown.
    let mut progress = Progress {
        out: std::io::stderr(),
        on: !cmd.json && std::io::IsTerminal::is_terminal(&std::io::stderr()),
        width: 0,
    };
    let result = irad::bench(&module, func, &args, &registry, &opts, &mut |secs| {
        progress.show(&format!("bench: sampling, {secs:.0} s"));
    });
    progress.clear();
    let report = result.map_err(|e| irad::grad_error(&sources[0], e))?;
    if cmd.json {
        let mut json = serde_json::json!({
            "compile_s": report.compile_s,
            "primal_s": report.primal_s,
            "grad_s": report.grad_s,
            "ratio": report.ratio,
            "primal_runs": report.primal_runs,
            "grad_runs": report.grad_runs,
        });
        if let Some(choice) = forward {
            json["forward"] = forward_json(&choice);
        }
        warnings.add_to(&mut json);
        out(&format!("{json}\n"));
    } else {
        if let Some(choice) = forward {
            out(&format!("forward:  {}\n", forward_text(&choice)));
        }
        out(&format!(
            "compile:  {}\nprimal:   {} (median of {} runs)\ngradient: {} (median of {} runs)\nratio:    {:.2}\n",
            seconds(report.compile_s),
            seconds(report.primal_s),
            report.primal_runs,
            seconds(report.grad_s),
            report.grad_runs,
            report.ratio
        ));
    }
    Ok(())
}

/// Forward mode's lanes under `--json` (`grad`, `bench`): `{"mode":
/// "dense"|"sparse", "batch": N|null, "directions": n, "auto": B}`.
fn forward_json(choice: &irad::ForwardChoice) -> serde_json::Value {
    serde_json::json!({
        "mode": choice.mode_name(),
        "batch": choice.batch(),
        "directions": choice.directions,
        "auto": choice.auto,
    })
}

/// Forward mode's lanes as `bench` prints them: `sparse (chosen: 1000 f64
/// inputs, sparse from 32)`, `dense, batch 8 (--batch)`.
fn forward_text(choice: &irad::ForwardChoice) -> String {
    let what = match choice.batch() {
        Some(n) => format!("dense, batch {n}"),
        None => "sparse".to_string(),
    };
    let why = if choice.auto {
        format!(
            "chosen: {} f64 input{}, sparse from {}",
            choice.directions,
            if choice.directions == 1 { "" } else { "s" },
            irad::SPARSE_MIN_DIRECTIONS
        )
    } else if choice.lanes.is_sparse() {
        "--sparse".to_string()
    } else {
        "--batch".to_string()
    };
    format!("{what} ({why})")
}

/// A one-line progress indicator (on stderr), rewritten in place with `\r`
/// and wiped by [`Progress::clear`]; writes nothing when `on` is false.
struct Progress<W: Write> {
    out: W,
    on: bool,
    /// The characters on the line now (0: nothing shown).
    width: usize,
}

impl<W: Write> Progress<W> {
    /// Replaces the line by `text`.
    fn show(&mut self, text: &str) {
        if self.on {
            let n = text.chars().count();
            let pad = " ".repeat(self.width.saturating_sub(n));
            emit(&mut self.out, &format!("\r{text}{pad}"));
            self.width = self.width.max(n);
        }
    }

    /// Wipes the line, leaving the cursor at its start.
    fn clear(&mut self) {
        if self.on && self.width > 0 {
            emit(&mut self.out, &format!("\r{}\r", " ".repeat(self.width)));
            self.width = 0;
        }
    }
}

/// `irad run`: the value of a call, as text or JSON.
fn run(cmd: RunCmd, sources: &mut Vec<Source>) -> Result<(), Error> {
    let module = load(&cmd.file, sources)?;
    let func = irad::find_function(&sources[0], &module, &cmd.func)?;
    let (module, func, known) = match &cmd.known {
        Some(known) => specialised(sources, &module, func, known)?,
        None => (module, func, Vec::new()),
    };
    sources.push(args_source(cmd.args)?);
    let args_src = &sources[sources.len() - 1];
    let args = irad::parse_args(args_src, &module, func)?;
    irad::check_args_known(args_src, &module, &args, &known)?;
    let req = irad::RunRequest {
        func,
        args: &args,
        opts: RunOptions {
            max_depth: cmd.max_depth,
            ..RunOptions::default()
        },
        backend: cmd.backend.lib(),
    };
    let value = irad::run(&sources[0], &module, &req)?;
    if cmd.json {
        let json = serde_json::json!({ "value": irad::value_to_json(&value, &module) });
        out(&format!("{json}\n"));
    } else {
        out(&format!("{}\n", value.display(&module)));
    }
    Ok(())
}

/// The Cranelift IR of the functions `funcs` of `module` (all when empty)
/// and of everything they call, as the JIT compiles them (inlining
/// included), each after a `; @name` line.
fn render_clif(
    src: &Source,
    module: &irad::ir::Module,
    funcs: &[irad::ir::FuncId],
) -> Result<String, Error> {
    let codegen = |err| Error::Codegen {
        file: src.name.clone(),
        err: Box::new(err),
    };
    let mut jit = irad::codegen::Jit::new(module).map_err(codegen)?;
    jit.capture_clif();
    let all: Vec<irad::ir::FuncId> = if funcs.is_empty() {
        module.func_ids().collect()
    } else {
        funcs.to_vec()
    };
    for f in all {
        jit.compile(f).map_err(codegen)?;
    }
    Ok(jit
        .take_clif()
        .into_iter()
        .map(|(name, text)| format!("; {name}\n{text}"))
        .collect::<Vec<_>>()
        .join("\n"))
}

/// The module (or only `funcs`, when given) as IR text or DOT. Passes keep
/// function handles, so `funcs` names the same functions in every snapshot.
fn render_module(module: &irad::ir::Module, funcs: &[irad::ir::FuncId], format: Format) -> String {
    match format {
        Format::Text if funcs.is_empty() => irad::ir::text::print_module(module),
        Format::Text => funcs
            .iter()
            .map(|&f| irad::ir::text::print_func(module, f))
            .collect::<Vec<_>>()
            .join("\n"),
        Format::Dot => irad::dot::module_to_dot(module, funcs),
        // `dump` prints clif with `render_clif` before it gets here.
        Format::Clif => irad::ir::text::print_module(module),
    }
}

/// Writes `text` to standard output. A closed pipe (`irad dump f.ir | head`)
/// is not an error of the input: the rest of the output is dropped quietly,
/// where `print!` would panic.
fn out(text: &str) {
    emit(&mut std::io::stdout(), text);
}

fn emit(stream: &mut impl Write, text: &str) {
    let _ = stream
        .write_all(text.as_bytes())
        .and_then(|()| stream.flush());
}

/// The argument text: `--args` itself, or the contents of `--args-file`.
/// A duration for people: seconds, milliseconds, microseconds or nanoseconds.
fn seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else if s >= 1e-6 {
        format!("{:.3} us", s * 1e6)
    } else {
        format!("{:.1} ns", s * 1e9)
    }
}

fn args_source(args: ArgsSource) -> Result<Source, Error> {
    match (args.args, args.args_file) {
        (Some(text), _) => Ok(Source {
            name: "<args>".into(),
            text,
        }),
        (None, Some(path)) => irad::read_source(&path),
        // clap's group makes one of the two required.
        (None, None) => Ok(Source {
            name: "<args>".into(),
            text: String::new(),
        }),
    }
}

/// The module with `func` specialised on the `--known` text (pushed on
/// `sources` as `<known>`), the specialised function, and what is known.
fn specialised(
    sources: &mut Vec<Source>,
    module: &irad::ir::Module,
    func: irad::ir::FuncId,
    known: &str,
) -> Result<(irad::ir::Module, irad::ir::FuncId, Vec<irad::Known>), Error> {
    sources.push(Source {
        name: "<known>".into(),
        text: known.to_string(),
    });
    let known = irad::parse_known(&sources[sources.len() - 1], module, func)?;
    let (m, spec) = irad::specialise(&sources[0], module, func, &known)?;
    Ok((m, spec, known))
}

/// Reports bad command-line usage the way clap does (exit status 2), or
/// as JSON under `--json`.
fn usage_error(msg: &str) -> ! {
    let err = clap::Error::raw(clap::error::ErrorKind::ArgumentConflict, format!("{msg}\n"));
    if JSON_ERRORS.load(Ordering::Relaxed) {
        usage_exit(&err.render().to_string())
    }
    err.exit()
}

/// Prints a usage error (clap's text) as JSON on stderr and exits with
/// status 2: `{"error": E, "errors": [E]}` with `E` of kind `"usage"`, its
/// message clap's first paragraph on one line, without `error: ` and the
/// usage lines after it (docs/cli.md, "JSON output").
fn usage_exit(text: &str) -> ! {
    let first = text.split("\n\n").next().unwrap_or_default();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let message = first
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let e = serde_json::json!({
        "file": null,
        "line": null,
        "column": null,
        "message": message,
        "kind": "usage",
    });
    let json = serde_json::json!({ "error": e, "errors": [e] });
    emit(&mut std::io::stderr(), &format!("{json}\n"));
    std::process::exit(2)
}

fn write_file(path: &std::path::Path, bytes: &[u8]) -> Result<(), Error> {
    std::fs::write(path, bytes).map_err(|e| Error::Write {
        file: path.display().to_string(),
        message: e.to_string(),
    })
}

fn load(path: &std::path::Path, sources: &mut Vec<Source>) -> Result<irad::ir::Module, Error> {
    sources.push(irad::read_source(path)?);
    irad::load(&sources[sources.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::Progress;

    #[test]
    fn progress_rewrites_its_line_and_wipes_it() {
        let mut p = Progress {
            out: Vec::new(),
            on: true,
            width: 0,
        };
        p.show("bench: sampling, 9 s");
        p.show("bench: sampling, 10 s");
        p.show("short");
        p.clear();
        p.clear();
        let text = String::from_utf8(p.out).unwrap_or_default();
        let wipe = format!("\r{}\r", " ".repeat(21));
        assert_eq!(
            text,
            format!(
                "\rbench: sampling, 9 s\rbench: sampling, 10 s\rshort{}{wipe}",
                " ".repeat(16)
            )
        );
    }

    #[test]
    fn progress_that_is_off_writes_nothing() {
        let mut p = Progress {
            out: Vec::new(),
            on: false,
            width: 0,
        };
        p.show("bench: sampling, 1 s");
        p.clear();
        assert!(p.out.is_empty());
    }
}
