//! Data-driven filetests: every `tests/filetests/**/NAME.ir` or `NAME.irad` is
//! one test, and adding a test means adding a file. Directives are comments
//! (`#` in IR text, `//` in the surface language; written with `#` below), so
//! each file stays a valid program. A surface file is compiled to IR, which
//! is then verified, round-tripped and run like IR text:
//!
//! - `# run: @f(ARGS) == VALUE`: running `@f` on ARGS (the `--args` syntax)
//!   gives exactly VALUE (f64 by bits, any NaN equal to any NaN).
//! - `# run: @f(ARGS) ~= VALUE`: the same within 1e-12 relative, 1e-14 absolute.
//! - `# run-error: @f(ARGS) at LINE:COL: TEXT`: the run fails at the statement
//!   at LINE:COL with a message containing TEXT.
//! - `... # error: TEXT` at the end of a line: the file must be rejected (parse
//!   or verification) with an error on that line whose message contains TEXT,
//!   and every error reported must be on such a line. The `irad check` binary
//!   must also exit with status 1 and print `FILE:LINE:COL: error: ` for it.
//! - `# test: dump`: the canonical print of the file is compared with the
//!   sibling `NAME.dump.ir` (`IRAD_BLESS=1` rewrites it), which must itself
//!   verify and pass the same `# run:` lines.
//!
//! - `# test: pass NAME`: the file is run through the one registered pass NAME
//!   and the printed result compared with the sibling `NAME_OF_FILE.NAME.ir`
//!   (`IRAD_BLESS=1` writes it); `# test: normalise` does the same for the whole
//!   normalisation pipeline, with the sibling `NAME_OF_FILE.normalise.ir`. The
//!   output must verify, round-trip, pass the file's `# run:` lines, and not
//!   change when the pass (or pipeline) runs again.
//!
//! - `# test: forward`: the file is normalised and the forward rule (width 1)
//!   of every function built with `irad::forward_module`; the printed module
//!   (the normalised primal and the rules) is compared with the sibling
//!   `NAME_OF_FILE.forward.ir` (`IRAD_BLESS=1` writes it). The output must
//!   verify and round-trip, and the expected file must parse, verify and pass
//!   the file's `# run:` lines, which run on the primal functions.
//!
//! - `# test: reverse`: likewise with `irad::reverse_module`: `@f.rev` and the
//!   pieces it calls for every function, compared with the sibling
//!   `NAME_OF_FILE.reverse.ir` (the BBCode of each function first, as `#`
//!   comments). Also, for each `# run:` line of a function returning f64,
//!   `@f.rev` (seed 1, zero shadows) must give the primal's value bit for bit
//!   and the argument arrays must be back in their entry state.
//!
//! - `# test: pe NAME`: the module through the partial-evaluation transform
//!   NAME (`inline`, `unroll`, `devirtualise`), compared with the sibling
//!   `NAME_OF_FILE.NAME.ir`; it must verify, round-trip and pass the `# run:`
//!   lines. `# test: specialise @f(KNOWN)`: `@f` specialised on KNOWN (the
//!   `irad dump --known` syntax), the module compared with
//!   `NAME_OF_FILE.specialise.ir`; besides the same checks, every `# run:` or
//!   `# run-error:` call of `@f` whose arguments agree with KNOWN must give the
//!   same value (or error, at the same place) through `@f.spec`.
//! - `# test: schedule S`: the optimiser schedule S (docs/optimise.md) runs
//!   over every function of the file (verifying after each step); the result,
//!   headed by comments giving the schedule, whether it succeeded and the
//!   rewrites made by rule, is compared with the sibling `NAME_OF_FILE.opt.ir`
//!   (`IRAD_BLESS=1` writes it). It must round-trip and pass the file's
//!   `# run:` and `# run-error:` lines, as the expected file must. The suite
//!   is `tests/filetests/optimise/`.
//!
//! Every file that is not an error test is also normalised: the result must
//! verify, round-trip, be a fixed point of the pipeline, and pass the file's
//! `# run:` and `# run-error:` lines. Every file that is not an error test is
//! also a round trip:
//! parse(print(m)) equals m structurally, and printing again gives the same text.
//! The corpus programs under `tests/corpus/*.ir` get the round trip and the
//! normalisation check too, and the
//! bundled `examples/*.ir` and the benchmark programs
//! (`benches/programs/*.irad`) are filetests like the others.
//!
//! `docs/ir.md` is checked too: every fenced block marked `ir` is a filetest
//! (error blocks are checked without the command line), and every row of its
//! error table names a file of `tests/filetests/errors/` that exists, while every
//! file there is named in the table.

use datatest_stable::Utf8Path;
use irad::ir::interp::value::{ArrayData, Val};
use irad::ir::interp::{RunOptions, run};
use irad::ir::surface::compile;
use irad::ir::text::{parse_args, parse_module, parse_value, print_module};
use irad::ir::{Diagnostic, Module, eq::structural_eq, verify::verify_module};
use irad::passes::manager::Run;
use irad::passes::{PassId, PipelineOptions, normalise_pipeline, run_passes};
use std::process::Command;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

datatest_stable::harness! {
    { test = filetest, root = "tests/filetests", pattern = r"^[^.]+\.(ir|irad)$" },
    { test = corpus_round_trip, root = "tests/corpus", pattern = r"^[^.]+\.(ir|irad)$" },
    { test = filetest, root = "examples", pattern = r"^[^.]+\.(ir|irad)$" },
    { test = filetest, root = "benches", pattern = r"^programs/[^.]+\.(ir|irad)$" },
    { test = doc_examples, root = "docs", pattern = r"^(ir|language)\.md$" },
}

/// The language of a file: IR text (`#` comments) or the surface language
/// (`.irad`, `//` comments). Directives are the same in both, after the
/// language's comment marker.
#[derive(Copy, Clone, PartialEq)]
enum Lang {
    Ir,
    Surface,
}

impl Lang {
    fn of(path: &Utf8Path) -> Lang {
        if path.extension() == Some("irad") {
            Lang::Surface
        } else {
            Lang::Ir
        }
    }

    fn comment(self) -> &'static str {
        match self {
            Lang::Ir => "#",
            Lang::Surface => "//",
        }
    }
}

/// One directive of a file, with its 1-based line.
#[derive(Clone)]
enum Directive {
    Run {
        line: usize,
        call: Call,
        expect: String,
        approx: bool,
    },
    RunError {
        line: usize,
        call: Call,
        at: (u32, u32),
        text: String,
    },
    Error {
        line: usize,
        text: String,
    },
    Dump,
    /// `# test: pass NAME`
    Pass(PassId),
    /// `# test: normalise`
    Normalise,
    /// `# test: forward`
    Forward,
    /// `# test: reverse`
    Reverse,
    /// `# test: pe NAME`: one partial-evaluation transform over the module
    Pe(PassId),
    /// `# test: specialise @f(KNOWN)`
    Specialise(Call),
    /// `# test: schedule S`
    Schedule(String),
}

#[derive(Clone)]
struct Call {
    func: String,
    args: String,
}

fn filetest(path: &Utf8Path, text: String) -> datatest_stable::Result<()> {
    let lang = Lang::of(path);
    let directives = directives(&text, lang)?;
    let errors = error_lines(&directives);
    if !errors.is_empty() {
        expect_errors(&text, lang, &errors)?;
        return check_cli(path, &errors);
    }
    let module = load(&text, lang)?;
    round_trip(&module)?;
    run_directives(&module, &directives)?;
    run_errors_through_cli(path, &directives)?;
    if directives.iter().any(|d| matches!(d, Directive::Dump)) {
        let expected_path = path.with_extension("dump.ir");
        let printed = print_module(&module);
        if std::env::var_os("IRAD_BLESS").is_some() {
            std::fs::write(&expected_path, &printed)?;
        }
        let expected = std::fs::read_to_string(&expected_path)
            .map_err(|e| format!("{expected_path}: {e} (IRAD_BLESS=1 writes it)"))?;
        if printed != expected {
            return Err(format!("dump differs from {expected_path}:\n{printed}").into());
        }
        let expected_module = load(&expected, Lang::Ir)?;
        run_directives(&expected_module, &directives)?;
    }
    check_pipeline(&module, &normalise_pipeline(), &directives)?;
    for d in &directives {
        let (suffix, pipeline) = match d {
            Directive::Pass(pass) => (pass.name(), vec![*pass]),
            Directive::Normalise => ("normalise", normalise_pipeline()),
            _ => continue,
        };
        let printed = check_pipeline(&module, &pipeline, &directives)?;
        compare_with_sibling(path, suffix, &printed, &directives)?;
    }
    for d in &directives {
        match d {
            // The expected file has positions of its own, so its run-time
            // errors are checked on the transformed module only.
            Directive::Pe(name) => {
                let printed = check_pe(&module, *name, &directives)?;
                let runs = without_run_errors(&directives);
                compare_with_sibling(path, name.name(), &printed, &runs)?;
            }
            Directive::Specialise(call) => {
                let printed = check_specialise(path, &text, &module, call, &directives)?;
                let runs = without_run_errors(&directives);
                compare_with_sibling(path, "specialise", &printed, &runs)?;
            }
            _ => {}
        }
    }
    if directives.iter().any(|d| matches!(d, Directive::Forward)) {
        let printed = check_forward(path, &text, &module)?;
        compare_with_sibling(path, "forward", &printed, &directives)?;
    }
    if directives.iter().any(|d| matches!(d, Directive::Reverse)) {
        let printed = check_reverse(path, &text, &module, &directives)?;
        compare_with_sibling(path, "reverse", &printed, &directives)?;
    }
    for d in &directives {
        if let Directive::Schedule(schedule) = d {
            let printed = check_schedule(&module, schedule, &directives)?;
            compare_with_sibling_at(path, "opt", &printed, &directives, false)?;
        }
    }
    Ok(())
}

/// Runs the schedule over a copy of `module` (verifying after each step);
/// the result must round-trip and pass the `# run:` and `# run-error:`
/// lines. Returns the printed result, with the rewrites made as a leading
/// comment.
fn check_schedule(module: &Module, schedule: &str, directives: &[Directive]) -> Result<String> {
    use irad::passes::optimise::{OptOptions, optimise, parse_schedule};
    let s = parse_schedule(schedule).map_err(|e| format!("{e}"))?;
    let mut m = module.clone();
    let opts = OptOptions {
        verify: true,
        ..OptOptions::default()
    };
    let report = optimise(&mut m, &s, None, &opts).map_err(|e| format!("{s}: {e}: {e:?}"))?;
    round_trip(&m).map_err(|e| format!("after {s}: {e}"))?;
    run_directives(&m, directives).map_err(|e| format!("after {s}: {e}"))?;
    let rewrites: Vec<String> = report
        .rewrites
        .iter()
        .map(|(name, n)| format!("{name} {n}"))
        .collect();
    let mut printed = format!(
        "# schedule: {s}\n# {}: {}\n",
        if report.ok { "succeeded" } else { "failed" },
        if rewrites.is_empty() {
            "no rewrites".to_string()
        } else {
            rewrites.join(", ")
        }
    );
    printed.push_str(&print_module(&m));
    Ok(printed)
}

/// The module with `@f.rev` of every function, printed after the BBCode
/// comments; it must verify and round-trip, and each `@f.rev` must give the
/// value of the `# run:` lines and restore the argument arrays.
fn check_reverse(
    path: &Utf8Path,
    text: &str,
    module: &Module,
    directives: &[Directive],
) -> Result<String> {
    let src = irad::Source {
        name: path.to_string(),
        text: text.to_string(),
    };
    let registry = irad::rules::Registry::new();
    let (m, _, bbcode) = irad::reverse_module(&src, module, &[], &registry)
        .map_err(|e| format!("reverse mode failed:\n{}", e.render(&[&src])))?;
    if let Err(errs) = verify_module(&m) {
        let msgs: Vec<String> = errs.iter().map(ToString::to_string).collect();
        return Err(format!(
            "the reverse pieces do not verify:\n{}\n{}",
            msgs.join("\n"),
            print_module(&m)
        )
        .into());
    }
    round_trip(&m).map_err(|e| format!("reverse pieces: {e}"))?;
    for d in directives {
        let Directive::Run { call, .. } = d else {
            continue;
        };
        let Some(f) = m.by_name(&call.func) else {
            continue;
        };
        if m[f].ret != irad::ir::Type::F64 {
            continue;
        }
        let Some(rev) = m.by_name(&format!("{}.rev", call.func)) else {
            return Err(format!("no @{}.rev", call.func).into());
        };
        let args = irad::ir::text::parse_args(&call.args, &m[f].param_types(), &m)
            .map_err(|e| format!("run args: {e:?}"))?;
        let entry: Vec<String> = args.iter().map(|a| a.display(&m).to_string()).collect();
        let want = irad::ir::interp::run(&m, f, &copies(&args), &Default::default())
            .map_err(|e| format!("primal run: {e}"))?;
        let mut rev_args = args.clone();
        for a in &args {
            if let irad::ir::interp::Val::Array(arr) = a
                && let irad::ir::interp::ArrayData::F64(xs) = &*arr.0.borrow()
            {
                rev_args.push(irad::ir::interp::Val::Array(
                    irad::ir::interp::ArrayRef::new(irad::ir::interp::ArrayData::F64(vec![
                        0.0;
                        xs.len()
                    ])),
                ));
            }
        }
        rev_args.push(irad::ir::interp::Val::F64(1.0));
        let mut run_m = m.clone();
        let mut provider = irad::passes::reverse::Reverse::new(&registry);
        let got = irad::ir::interp::Interpreter::with_rules(&mut run_m, &mut provider)
            .run(rev, &rev_args, &Default::default())
            .map_err(|e| format!("@{}.rev({}): {e}", call.func, call.args))?;
        let irad::ir::interp::Val::Tuple(parts) = &got else {
            return Err(format!("@{}.rev did not return a tuple", call.func).into());
        };
        let same = match (parts.first(), &want) {
            (Some(irad::ir::interp::Val::F64(a)), irad::ir::interp::Val::F64(b)) => {
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
            }
            _ => false,
        };
        if !same {
            return Err(format!(
                "@{}.rev({}) gives the value {}, the primal {}",
                call.func,
                call.args,
                got.display(&m),
                want.display(&m)
            )
            .into());
        }
        let after: Vec<String> = args.iter().map(|a| a.display(&m).to_string()).collect();
        if after != entry {
            return Err(format!(
                "@{}.rev({}) left the arguments {after:?}, not {entry:?}",
                call.func, call.args
            )
            .into());
        }
    }
    let mut out = irad::passes::annotate::comment_lines(&bbcode);
    out.push_str(&print_module(&m));
    Ok(out)
}

/// The directives without `# run-error:` lines.
fn without_run_errors(directives: &[Directive]) -> Vec<Directive> {
    directives
        .iter()
        .filter(|d| !matches!(d, Directive::RunError { .. }))
        .cloned()
        .collect()
}

/// The module through the partial-evaluation transform `name` (`inline`,
/// `unroll`, `devirtualise`); it must verify, round-trip and pass the `# run:`
/// lines. Returns the printed result.
fn check_pe(module: &Module, name: PassId, directives: &[Directive]) -> Result<String> {
    let mut m = module.clone();
    let opts = PipelineOptions {
        verify: true,
        ..PipelineOptions::default()
    };
    run_passes(&mut m, &[name], &opts).map_err(|e| format!("{name}: {e}: {e:?}"))?;
    if let Err(errs) = verify_module(&m) {
        let msgs: Vec<String> = errs.iter().map(ToString::to_string).collect();
        return Err(format!(
            "{name} output does not verify:\n{}\n{}",
            msgs.join("\n"),
            print_module(&m)
        )
        .into());
    }
    round_trip(&m).map_err(|e| format!("after {name}: {e}"))?;
    run_directives(&m, directives).map_err(|e| format!("after {name}: {e}"))?;
    Ok(print_module(&m))
}

/// The module with `@f` specialised on the known text of `call`; it must
/// verify, round-trip and pass the `# run:` lines, and every `# run:` or
/// `# run-error:` call of `@f` whose arguments agree with what is known gives
/// the same value, or the same error at the same place, through `@f.spec`.
fn check_specialise(
    path: &Utf8Path,
    text: &str,
    module: &Module,
    call: &Call,
    directives: &[Directive],
) -> Result<String> {
    let src = irad::Source {
        name: path.to_string(),
        text: text.to_string(),
    };
    let known_src = irad::Source {
        name: "<known>".into(),
        text: call.args.clone(),
    };
    let f = irad::find_function(&src, module, &call.func).map_err(|e| e.render(&[&src]))?;
    let known = irad::parse_known(&known_src, module, f).map_err(|e| e.render(&[&known_src]))?;
    let (m, spec) = irad::specialise(&src, module, f, &known)
        .map_err(|e| format!("specialise failed:\n{}", e.render(&[&src])))?;
    round_trip(&m).map_err(|e| format!("after specialise: {e}"))?;
    run_directives(&m, directives).map_err(|e| format!("after specialise: {e}"))?;
    let mut compared = 0;
    for d in directives {
        let c = match d {
            Directive::Run { call: c, .. } | Directive::RunError { call: c, .. } => c,
            _ => continue,
        };
        if c.func != call.func {
            continue;
        }
        let params = m[f].param_types();
        let args = parse_args(&c.args, &params, &m)?;
        let args_src = irad::Source {
            name: "<args>".into(),
            text: c.args.clone(),
        };
        if irad::check_args_known(&args_src, &m, &args, &known).is_err() {
            continue;
        }
        let want = run(&m, f, &copies(&args), &RunOptions::default());
        let got = run(&m, spec, &copies(&args), &RunOptions::default());
        let same = match (&want, &got) {
            (Ok(a), Ok(b)) => a.same(b),
            (Err(a), Err(b)) => a.msg == b.msg && a.loc.pos == b.loc.pos,
            _ => false,
        };
        if !same {
            return Err(format!(
                "@{}({}): the original gives {want:?}, the specialisation {got:?}",
                c.func, c.args
            )
            .into());
        }
        compared += 1;
    }
    let _ = compared;
    Ok(print_module(&m))
}

/// Fresh copies of argument values (arrays get new buffers).
fn copies(args: &[irad::ir::interp::Val]) -> Vec<irad::ir::interp::Val> {
    use irad::ir::interp::{ArrayRef, Val};
    fn copy(v: &Val) -> Val {
        match v {
            Val::Array(a) => Val::Array(ArrayRef::new(a.0.borrow().clone())),
            Val::Tuple(vs) => Val::Tuple(vs.iter().map(copy).collect()),
            other => other.clone(),
        }
    }
    args.iter().map(copy).collect()
}

/// The module with the forward rule (width 1) of every function, printed;
/// it must verify and round-trip.
fn check_forward(path: &Utf8Path, text: &str, module: &Module) -> Result<String> {
    let src = irad::Source {
        name: path.to_string(),
        text: text.to_string(),
    };
    let registry = irad::rules::Registry::new();
    let (m, _) = irad::forward_module(&src, module, &[], irad::ir::Lanes::ONE, &registry)
        .map_err(|e| format!("forward mode failed:\n{}", e.render(&[&src])))?;
    if let Err(errs) = verify_module(&m) {
        let msgs: Vec<String> = errs.iter().map(ToString::to_string).collect();
        return Err(format!(
            "the forward rules do not verify:\n{}\n{}",
            msgs.join("\n"),
            print_module(&m)
        )
        .into());
    }
    round_trip(&m).map_err(|e| format!("forward rules: {e}"))?;
    Ok(print_module(&m))
}

/// Runs `pipeline` over a copy of `module` (the manager verifies after each
/// pass); the result must round-trip, pass the `# run:` lines and be a fixed
/// point of the pipeline. Returns the printed result.
fn check_pipeline(
    module: &Module,
    pipeline: &[PassId],
    directives: &[Directive],
) -> Result<String> {
    let names: Vec<&str> = pipeline.iter().map(|p| p.name()).collect();
    let opts = PipelineOptions {
        verify: true,
        ..PipelineOptions::default()
    };
    let mut m = module.clone();
    run_passes(&mut m, pipeline, &opts).map_err(|e| format!("{names:?}: {e}: {e:?}"))?;
    round_trip(&m).map_err(|e| format!("after {names:?}: {e}"))?;
    run_directives(&m, directives).map_err(|e| format!("after {names:?}: {e}"))?;
    let printed = print_module(&m);
    run_passes(&mut m, pipeline, &opts).map_err(|e| format!("{names:?} again: {e}"))?;
    let again = print_module(&m);
    if again != printed {
        return Err(format!(
            "{names:?} is not idempotent:\n{printed}\n--- after again ---\n{again}"
        )
        .into());
    }
    Ok(printed)
}

/// Compares `printed` with the sibling `FILE.SUFFIX.ir` (`IRAD_BLESS=1` writes
/// it), which must itself verify and pass the `# run:` lines.
fn compare_with_sibling(
    path: &Utf8Path,
    suffix: &str,
    printed: &str,
    directives: &[Directive],
) -> Result<()> {
    compare_with_sibling_at(path, suffix, printed, directives, true)
}

/// [`compare_with_sibling`]; `check_pos` as in [`run_directives_at`].
fn compare_with_sibling_at(
    path: &Utf8Path,
    suffix: &str,
    printed: &str,
    directives: &[Directive],
    check_pos: bool,
) -> Result<()> {
    let expected_path = path.with_extension(format!("{suffix}.ir"));
    if std::env::var_os("IRAD_BLESS").is_some() {
        std::fs::write(&expected_path, printed)?;
    }
    let expected = std::fs::read_to_string(&expected_path)
        .map_err(|e| format!("{expected_path}: {e} (IRAD_BLESS=1 writes it)"))?;
    if printed != expected {
        return Err(format!("{suffix} output differs from {expected_path}:\n{printed}").into());
    }
    let expected_module = load(&expected, Lang::Ir)?;
    run_directives_at(&expected_module, directives, check_pos)
}

fn error_lines(directives: &[Directive]) -> Vec<(usize, &str)> {
    directives
        .iter()
        .filter_map(|d| match d {
            Directive::Error { line, text } => Some((*line, text.as_str())),
            _ => None,
        })
        .collect()
}

fn doc_examples(path: &Utf8Path, text: String) -> datatest_stable::Result<()> {
    // ir.md documents IR text and its errors, language.md the surface language.
    let (fence, lang, table_prefix, ext) = if path.file_name() == Some("ir.md") {
        ("```ir", Lang::Ir, "errors/", ".ir")
    } else {
        ("```irad", Lang::Surface, "surface_errors/", ".irad")
    };
    let mut blocks = 0;
    let mut lines = text.lines().enumerate();
    while let Some((start, line)) = lines.next() {
        if line.trim() != fence {
            continue;
        }
        let body: Vec<&str> = lines
            .by_ref()
            .map(|(_, l)| l)
            .take_while(|l| l.trim() != "```")
            .collect();
        let block = body.join("\n") + "\n";
        check_block(&block, lang)
            .map_err(|e| format!("{path}: the example at line {}: {e}", start + 1))?;
        blocks += 1;
    }
    if blocks == 0 {
        return Err(format!("{path} has no examples").into());
    }
    // The error table: `| kind | ... | `errors/NAME.ir` |` rows.
    let errors_dir = Utf8Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/filetests")
        .join(table_prefix.trim_end_matches('/'));
    let mut named = Vec::new();
    for line in text.lines().filter(|l| l.starts_with('|')) {
        for cell in line.split('|') {
            let cell = cell.trim().trim_matches('`');
            if let Some(name) = cell.strip_prefix(table_prefix) {
                if !errors_dir.join(name).is_file() {
                    return Err(format!(
                        "{path}: the error table names {cell}, which does not exist"
                    )
                    .into());
                }
                named.push(name.to_string());
            }
        }
    }
    for entry in std::fs::read_dir(&errors_dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.ends_with(ext) && !named.contains(&name) {
            return Err(
                format!("{path}: {table_prefix}{name} is missing from the error table").into(),
            );
        }
    }
    Ok(())
}

fn check_block(text: &str, lang: Lang) -> Result<()> {
    let directives = directives(text, lang)?;
    let errors = error_lines(&directives);
    if !errors.is_empty() {
        return expect_errors(text, lang, &errors);
    }
    let module = load(text, lang)?;
    round_trip(&module)?;
    run_directives(&module, &directives)
}

fn corpus_round_trip(path: &Utf8Path, text: String) -> datatest_stable::Result<()> {
    let lang = Lang::of(path);
    let module = load(&text, lang)?;
    round_trip(&module)?;
    let directives = directives(&text, lang)?;
    check_pipeline(&module, &normalise_pipeline(), &directives)?;
    Ok(())
}

/// Parses (IR) or compiles (surface) and verifies.
fn load(text: &str, lang: Lang) -> Result<Module> {
    let module = match lang {
        Lang::Ir => {
            parse_module(text).map_err(|e| format!("parse error at {:?}: {e}", e.loc.pos))?
        }
        Lang::Surface => compile(text).map_err(|errs| {
            let msgs: Vec<String> = errs
                .iter()
                .map(|e| format!("{:?}: {e}", e.loc.pos))
                .collect();
            format!("front-end errors:\n{}", msgs.join("\n"))
        })?,
    };
    if let Err(errs) = verify_module(&module) {
        let msgs: Vec<String> = errs
            .iter()
            .map(|e| format!("{:?}: {e}", e.loc.pos))
            .collect();
        return Err(format!("verification failed:\n{}", msgs.join("\n")).into());
    }
    Ok(module)
}

fn round_trip(module: &Module) -> Result<()> {
    let printed = print_module(module);
    let reparsed = parse_module(&printed)
        .map_err(|e| format!("printed text does not parse: {e}\n{printed}"))?;
    structural_eq(module, &reparsed).map_err(|e| format!("parse(print(m)) != m: {e}"))?;
    let reprinted = print_module(&reparsed);
    if reprinted != printed {
        return Err(
            format!("print(parse(t)) != t for printed text:\n{printed}\n---\n{reprinted}").into(),
        );
    }
    Ok(())
}

/// Parses and verifies `text`, which must fail with exactly the expected errors.
fn expect_errors(text: &str, lang: Lang, expected: &[(usize, &str)]) -> Result<()> {
    let parsed = match lang {
        Lang::Ir => {
            parse_module(text).map_err(|e| vec![(e.loc.pos.map(|p| p.line), e.to_string())])
        }
        Lang::Surface => compile(text).map_err(|errs| {
            errs.iter()
                .map(|e| (e.loc.pos.map(|p| p.line), e.to_string()))
                .collect()
        }),
    };
    let found: Vec<(Option<u32>, String)> = match parsed {
        Err(found) => found,
        Ok(m) => match verify_module(&m) {
            Ok(()) => return Err("file has `error:` lines but parses and verifies".into()),
            Err(errs) => errs
                .iter()
                .map(|e| (e.location().pos.map(|p| p.line), e.to_string()))
                .collect(),
        },
    };
    for (line, want) in expected {
        let hit = found
            .iter()
            .any(|(l, msg)| *l == Some(*line as u32) && msg.contains(want));
        if !hit {
            return Err(
                format!("no error on line {line} containing {want:?}; found {found:?}").into(),
            );
        }
    }
    for (line, msg) in &found {
        let expected_here = expected.iter().any(|(l, _)| Some(*l as u32) == *line);
        if !expected_here {
            return Err(format!("unexpected error on line {line:?}: {msg}").into());
        }
    }
    Ok(())
}

/// `irad check` on the file exits with status 1 and prints the first error's place.
fn check_cli(path: &Utf8Path, expected: &[(usize, &str)]) -> Result<()> {
    let out = Command::new(env!("CARGO_BIN_EXE_irad"))
        .arg("check")
        .arg(path.as_str())
        .output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() != Some(1) {
        return Err(format!(
            "irad check exited with {:?}, want 1; stderr:\n{stderr}",
            out.status.code()
        )
        .into());
    }
    let (first_line, first_text) = expected[0];
    let prefix = format!("{path}:{first_line}:");
    let shown = stderr
        .lines()
        .any(|l| l.starts_with(&prefix) && l.contains(": error: ") && l.contains(first_text));
    if !shown {
        return Err(format!(
            "irad check did not print `{prefix}COL: error: ...{first_text}`:\n{stderr}"
        )
        .into());
    }
    Ok(())
}

/// `irad run` on each `# run-error:` call exits with status 1 and prints the place.
fn run_errors_through_cli(path: &Utf8Path, directives: &[Directive]) -> Result<()> {
    for d in directives {
        let Directive::RunError {
            line,
            call,
            at,
            text,
        } = d
        else {
            continue;
        };
        let out = Command::new(env!("CARGO_BIN_EXE_irad"))
            .args(["run", path.as_str(), "-f", &call.func, "--args", &call.args])
            .output()?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let want = format!("{path}:{}:{}: error: ", at.0, at.1);
        if out.status.code() != Some(1)
            || !stderr.starts_with(&want)
            || !stderr.contains(text.as_str())
        {
            return Err(format!(
                "line {line}: irad run exited with {:?}; want 1 and `{want}...{text}`; stderr:\n{stderr}",
                out.status.code()
            )
            .into());
        }
    }
    Ok(())
}

fn run_directives(module: &Module, directives: &[Directive]) -> Result<()> {
    run_directives_at(module, directives, true)
}

/// [`run_directives`], checking the position of `# run-error:` failures
/// only when `check_pos` (a printed module has its own line numbers).
fn run_directives_at(module: &Module, directives: &[Directive], check_pos: bool) -> Result<()> {
    for d in directives {
        match d {
            Directive::Run {
                line,
                call,
                expect,
                approx,
            } => {
                let (value, ret) =
                    run_call(module, call).map_err(|e| format!("line {line}: {e}"))?;
                let want = parse_value(expect, &ret, module)
                    .map_err(|e| format!("line {line}: expected value: {e}"))?;
                let ok = if *approx {
                    close(&value, &want)
                } else {
                    value.same(&want)
                };
                if !ok {
                    return Err(format!(
                        "line {line}: @{}({}) gave {}, want {}",
                        call.func,
                        call.args,
                        value.display(module),
                        want.display(module)
                    )
                    .into());
                }
            }
            Directive::RunError {
                line,
                call,
                at,
                text,
            } => match run_call(module, call) {
                Ok((v, _)) => {
                    return Err(format!(
                        "line {line}: run succeeded with {}, want an error",
                        v.display(module)
                    )
                    .into());
                }
                Err(RunFailure::Run(e)) => {
                    let pos = e.loc.pos.map(|p| (p.line, p.col));
                    if (check_pos && pos != Some(*at)) || !e.msg.contains(text.as_str()) {
                        return Err(format!(
                            "line {line}: error at {pos:?}: {e}; want at {at:?} containing {text:?}"
                        )
                        .into());
                    }
                }
                Err(e) => return Err(format!("line {line}: {e}").into()),
            },
            Directive::Error { .. }
            | Directive::Dump
            | Directive::Pass(_)
            | Directive::Normalise
            | Directive::Forward
            | Directive::Reverse
            | Directive::Pe(_)
            | Directive::Specialise(_)
            | Directive::Schedule(_) => {}
        }
    }
    Ok(())
}

enum RunFailure {
    Setup(String),
    Run(irad::ir::interp::RunError),
}

impl std::fmt::Display for RunFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunFailure::Setup(s) => f.write_str(s),
            RunFailure::Run(e) => write!(f, "run-time error at {:?}: {e}", e.loc.pos),
        }
    }
}

fn run_call(
    module: &Module,
    call: &Call,
) -> std::result::Result<(Val, irad::ir::Type), RunFailure> {
    let id = module
        .by_name(&call.func)
        .ok_or_else(|| RunFailure::Setup(format!("no function @{}", call.func)))?;
    let func = &module[id];
    let args = parse_args(&call.args, &func.param_types(), module)
        .map_err(|e| RunFailure::Setup(format!("bad arguments: {e}")))?;
    let value = run(module, id, &args, &RunOptions::default()).map_err(RunFailure::Run)?;
    Ok((value, func.ret.clone()))
}

fn close(a: &Val, b: &Val) -> bool {
    fn near(x: f64, y: f64) -> bool {
        (x.is_nan() && y.is_nan())
            || x == y
            || (x - y).abs() <= 1e-14 + 1e-12 * x.abs().max(y.abs())
    }
    match (a, b) {
        (Val::F64(x), Val::F64(y)) => near(*x, *y),
        (Val::Tuple(xs), Val::Tuple(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys.iter()).all(|(x, y)| close(x, y))
        }
        (Val::Array(x), Val::Array(y)) => match (&*x.0.borrow(), &*y.0.borrow()) {
            (ArrayData::F64(xs), ArrayData::F64(ys)) => {
                xs.len() == ys.len() && xs.iter().zip(ys).all(|(p, q)| near(*p, *q))
            }
            (xs, ys) => xs == ys,
        },
        _ => a.same(b),
    }
}

/// Reads every directive of a file.
fn directives(text: &str, lang: Lang) -> Result<Vec<Directive>> {
    let c = lang.comment();
    let (run, run_error, test, error) = (
        format!("{c} run:"),
        format!("{c} run-error:"),
        format!("{c} test:"),
        format!("{c} error:"),
    );
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim_start();
        if let Some(rest) = trimmed.strip_prefix(run.as_str()) {
            let (call, rest) = parse_call(rest).map_err(|e| format!("line {line}: {e}"))?;
            let rest = rest.trim();
            let (approx, expect) = if let Some(v) = rest.strip_prefix("==") {
                (false, v)
            } else if let Some(v) = rest.strip_prefix("~=") {
                (true, v)
            } else {
                return Err(
                    format!("line {line}: want `== VALUE` or `~= VALUE` after the call").into(),
                );
            };
            out.push(Directive::Run {
                line,
                call,
                expect: expect.trim().to_string(),
                approx,
            });
        } else if let Some(rest) = trimmed.strip_prefix(run_error.as_str()) {
            let (call, rest) = parse_call(rest).map_err(|e| format!("line {line}: {e}"))?;
            let bad = || format!("line {line}: want `at LINE:COL: TEXT` after the call");
            let rest = rest.trim().strip_prefix("at ").ok_or_else(bad)?;
            let (l, rest) = rest.split_once(':').ok_or_else(bad)?;
            let (c, text) = rest.split_once(':').ok_or_else(bad)?;
            let at = (l.trim().parse()?, c.trim().parse()?);
            out.push(Directive::RunError {
                line,
                call,
                at,
                text: text.trim().to_string(),
            });
        } else if let Some(kind) = trimmed.strip_prefix(test.as_str()) {
            match kind.trim() {
                "dump" => out.push(Directive::Dump),
                "normalise" => out.push(Directive::Normalise),
                "forward" => out.push(Directive::Forward),
                "reverse" => out.push(Directive::Reverse),
                other if other.starts_with("schedule ") => {
                    out.push(Directive::Schedule(
                        other["schedule ".len()..].trim().to_string(),
                    ));
                }
                other if other.starts_with("pass ") => {
                    let name = other["pass ".len()..].trim();
                    let pass = PassId::from_name(name)
                        .filter(|p| {
                            matches!(irad::passes::find(*p).run, Run::Func(_) | Run::Fixpoint(_))
                        })
                        .ok_or_else(|| format!("no pass named {name:?}"))?;
                    out.push(Directive::Pass(pass));
                }
                other if other.starts_with("pe ") => {
                    let name = other["pe ".len()..].trim();
                    let pass = PassId::from_name(name)
                        .filter(|p| {
                            matches!(p, PassId::Inline | PassId::Unroll | PassId::Devirtualise)
                        })
                        .ok_or_else(|| format!("no partial-evaluation transform {name:?}"))?;
                    out.push(Directive::Pe(pass));
                }
                other if other.starts_with("specialise ") => {
                    let (call, _) = parse_call(&other["specialise ".len()..])
                        .map_err(|e| format!("line {line}: {e}"))?;
                    out.push(Directive::Specialise(call));
                }
                other => return Err(format!("line {line}: unknown test kind {other:?}").into()),
            }
        } else if let Some(idx) = raw.find(error.as_str()) {
            out.push(Directive::Error {
                line,
                text: raw[idx + error.len()..].trim().to_string(),
            });
        }
    }
    Ok(out)
}

/// Splits ` @f(ARGS) rest` into the call and the rest, matching brackets.
fn parse_call(s: &str) -> Result<(Call, &str)> {
    let s = s.trim_start();
    let s = s.strip_prefix('@').ok_or("want `@f(ARGS)`")?;
    let open = s.find('(').ok_or("want `(` after the function name")?;
    let func = s[..open].trim().to_string();
    let mut depth = 0usize;
    for (i, c) in s[open..].char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => {
                depth = depth.checked_sub(1).ok_or("unbalanced brackets")?;
                if depth == 0 {
                    let args = s[open + 1..open + i].to_string();
                    return Ok((Call { func, args }, &s[open + i + 1..]));
                }
            }
            _ => {}
        }
    }
    Err("unclosed `(` in the call".into())
}
