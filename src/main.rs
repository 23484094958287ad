//! The `irad` command line (SYNTAX.md §3): `run`, `check`, `dump` (with
//! `--after PASS` / `--all-passes` over the normalisation pipeline) and
//! `test-rules` (the frule checker; exit 1 when a rule fails).
//!
//! Exit status: 0 on success, 1 for a user error (parse, verification,
//! run-time, malformed arguments) with the message on stderr, 2 for bad usage
//! (clap's own errors). No input makes it panic: every failure is an
//! `irad::Error` rendered with its location.

use clap::builder::PossibleValuesParser;
use clap::{Args, Parser, Subcommand, ValueEnum};
use irad::ir::interp::{DEFAULT_MAX_DEPTH, RunOptions};
use irad::{Error, Source};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// A compiler middle-end that differentiates SSA programs.
#[derive(Parser)]
#[command(name = "irad", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate a function and print its value.
    Run(RunCmd),
    /// Parse and verify a file.
    Check {
        /// The source file (.ir).
        file: PathBuf,
    },
    /// Print a file's IR in canonical form, or its control-flow graph.
    Dump(DumpCmd),
    /// Check every primitive's forward rule against finite differences.
    TestRules(TestRulesCmd),
}

#[derive(Args)]
struct TestRulesCmd {
    /// Random points per test signature.
    #[arg(long, value_name = "N", default_value_t = irad::rules::check::DEFAULT_SAMPLES)]
    samples: usize,
    /// The seed of the random points and directions.
    #[arg(long, value_name = "S", default_value_t = irad::rules::check::DEFAULT_SEED)]
    seed: u64,
}

#[derive(Args)]
struct RunCmd {
    /// The source file (.ir).
    file: PathBuf,
    /// The function to run, with or without `@`.
    #[arg(short = 'f', value_name = "NAME")]
    func: String,
    #[command(flatten)]
    args: ArgsSource,
    /// Where to run it.
    #[arg(long, value_enum, default_value_t = Backend::Interp)]
    backend: Backend,
    /// Print one JSON object: {"value": V}.
    #[arg(long)]
    json: bool,
    /// The call-depth limit; deeper recursion is a run-time error.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_DEPTH)]
    max_depth: usize,
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
    /// The source file (.ir).
    file: PathBuf,
    /// Print only this function.
    #[arg(short = 'f', value_name = "NAME")]
    func: Option<String>,
    /// Text (IR) or dot (Graphviz control-flow graph).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Print the module after the normalisation pipeline up to and including PASS.
    #[arg(long, value_name = "PASS", conflicts_with = "all_passes",
          value_parser = PossibleValuesParser::new(irad::passes::NORMALISE))]
    after: Option<String>,
    /// Print the input, then the module after each normalisation pass, each
    /// section headed by a `# input` or `# after PASS` comment line.
    #[arg(long)]
    all_passes: bool,
}

#[derive(Copy, Clone, ValueEnum)]
enum Backend {
    /// The reference interpreter.
    Interp,
}

#[derive(Copy, Clone, ValueEnum)]
enum Format {
    Text,
    Dot,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // clap exits 0 for --help and --version and 2 for usage errors.
        Err(e) => e.exit(),
    };
    let mut sources = Vec::new();
    match execute(cli.command, &mut sources) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let refs: Vec<&Source> = sources.iter().collect();
            emit(&mut std::io::stderr(), &e.render(&refs));
            ExitCode::from(1)
        }
    }
}

/// Runs one command; every source read is pushed on `sources` so that errors
/// can show their lines.
fn execute(command: Command, sources: &mut Vec<Source>) -> Result<(), Error> {
    match command {
        Command::TestRules(cmd) => {
            let opts = irad::rules::check::CheckOptions {
                samples: cmd.samples,
                seed: cmd.seed,
            };
            let (table, verdict) = irad::test_rules(&opts);
            out(&table);
            verdict?;
        }
        Command::Check { file } => {
            let module = load(&file, sources)?;
            let n = module.len();
            let plural = if n == 1 { "" } else { "s" };
            out(&format!("{}: ok ({n} function{plural})\n", file.display()));
        }
        Command::Dump(cmd) => {
            let module = load(&cmd.file, sources)?;
            let funcs = match &cmd.func {
                Some(name) => vec![irad::find_function(&sources[0], &module, name)?],
                None => Vec::new(),
            };
            if cmd.after.is_none() && !cmd.all_passes {
                out(&render_module(&module, &funcs, cmd.format));
                return Ok(());
            }
            let snapshots = irad::pass_snapshots(&sources[0], &module, cmd.after.as_deref())?;
            let mut text = String::new();
            for (i, (pass, m)) in snapshots.iter().enumerate() {
                if cmd.all_passes {
                    if i > 0 {
                        text.push('\n');
                    }
                    match *pass {
                        "input" => text.push_str("# input\n"),
                        _ => text.push_str(&format!("# after {pass}\n")),
                    }
                }
                text.push_str(&render_module(m, &funcs, cmd.format));
            }
            out(&text);
        }
        Command::Run(cmd) => {
            let module = load(&cmd.file, sources)?;
            let func = irad::find_function(&sources[0], &module, &cmd.func)?;
            let args_src = match (cmd.args.args, cmd.args.args_file) {
                (Some(text), _) => Source {
                    name: "<args>".into(),
                    text,
                },
                (None, Some(path)) => irad::read_source(&path)?,
                // clap's group makes one of the two required.
                (None, None) => Source {
                    name: "<args>".into(),
                    text: String::new(),
                },
            };
            sources.push(args_src);
            let args = irad::parse_args(&sources[1], &module, func)?;
            let opts = RunOptions {
                max_depth: cmd.max_depth,
            };
            let Backend::Interp = cmd.backend;
            let value = irad::run(&sources[0], &module, func, &args, &opts)?;
            if cmd.json {
                let json = serde_json::json!({ "value": irad::value_to_json(&value, &module) });
                out(&format!("{json}\n"));
            } else {
                out(&format!("{}\n", value.display(&module)));
            }
        }
    }
    Ok(())
}

/// The module (or only `funcs`, when given) as IR text or DOT. Passes keep
/// function handles, so `funcs` names the same functions in every snapshot.
fn render_module(module: &irad::ir::Module, funcs: &[irad::ir::FuncId], format: Format) -> String {
    match format {
        Format::Text if funcs.is_empty() => irad::ir::text::print_module(module),
        Format::Text => funcs
            .iter()
            .map(|&f| irad::ir::text::print_func(module, f))
            .collect(),
        Format::Dot => irad::dot::module_to_dot(module, funcs),
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

fn load(path: &std::path::Path, sources: &mut Vec<Source>) -> Result<irad::ir::Module, Error> {
    sources.push(irad::read_source(path)?);
    irad::load(&sources[sources.len() - 1])
}
