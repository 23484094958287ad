//! Normalisation is idempotent on every program of the workspace: each `NAME.ir`
//! and `NAME.irad` under `tests/filetests/programs`, `tests/filetests/surface`,
//! `tests/corpus` and `examples`. Each file is loaded (IR text parsed, surface
//! compiled) and verified, then normalised twice. Checked: the second run
//! leaves the module structurally equal (`irad_ir::eq`) to the first; every
//! one-function pass of the pipeline, run again, reports no change; the
//! result verifies; and every call the file names (its `# run:` and
//! `# run-error:` lines, or for the corpus the argument sets of its
//! `NAME.json`) gives the same value, or the same error at the same place,
//! before and after normalisation.
//!
//! Assumes the files are programs that load and verify (a file that does not
//! is a failure) and that corpus argument strings hold no `"`. Fails when it
//! finds no file, or no call in a corpus file.

use irad_ir::eq::structural_eq;
use irad_ir::interp::value::Val;
use irad_ir::interp::{RunOptions, run};
use irad_ir::text::{parse_args, parse_module};
use irad_ir::verify::verify_module;
use irad_ir::{Module, surface};
use irad_passes::manager::Run;
use irad_passes::{NORMALISE, find, normalise};
use std::path::{Path, PathBuf};

#[test]
fn normalise_is_idempotent_on_every_program() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest.parent().unwrap_or(manifest);
    let dirs = [
        "tests/filetests/programs",
        "tests/filetests/surface",
        "tests/corpus",
        "examples",
    ];
    let mut files = Vec::new();
    for dir in dirs {
        program_files(&root.join(dir), &mut files);
    }
    files.sort();
    assert!(
        files.len() >= 100,
        "found only {} programs under {dirs:?} of {}",
        files.len(),
        root.display()
    );
    let failures: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let shown = path.strip_prefix(root).unwrap_or(path).display();
            check(path).err().map(|e| format!("{shown}: {e}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} programs failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n\n")
    );
}

/// One file: load, normalise twice, compare, run.
fn check(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let is_surface = path.extension().is_some_and(|e| e == "irad");
    let input = load(&text, is_surface)?;
    let calls = calls(path, &text, is_surface)?;
    let mut once = input.clone();
    normalise(&mut once).map_err(|e| format!("normalise: {e}"))?;
    verify_module(&once).map_err(|errs| format!("normalised module does not verify: {errs:?}"))?;
    let mut twice = once.clone();
    normalise(&mut twice).map_err(|e| format!("normalise again: {e}"))?;
    structural_eq(&once, &twice).map_err(|e| format!("normalise is not idempotent: {e}"))?;
    no_pass_reports_a_change(&once)?;
    for call in &calls {
        let before = outcome(&input, call)?;
        let after = outcome(&once, call)?;
        if !same(&before, &after) {
            return Err(format!(
                "@{}({}) gave {} before normalisation and {} after",
                call.func,
                call.args,
                show(&before, &input),
                show(&after, &once)
            ));
        }
    }
    Ok(())
}

/// Every one-function pass of the pipeline, run on a normalised module,
/// reports that it changed nothing (so the fixpoint's change test is honest).
fn no_pass_reports_a_change(m: &Module) -> Result<(), String> {
    for name in NORMALISE {
        let Run::Func(run) = find(*name).run else {
            continue;
        };
        for (_, func) in m.funcs() {
            let mut func = func.clone();
            if run(&mut func) {
                return Err(format!("{name} changed normalised @{}", func.name));
            }
        }
    }
    Ok(())
}

/// Collects `NAME.ir` and `NAME.irad` files (one dot: expected outputs such
/// as `NAME.dump.ir` are not programs) under `dir`, recursively.
fn program_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            program_files(&path, out);
        } else if name.matches('.').count() == 1
            && (name.ends_with(".ir") || name.ends_with(".irad"))
        {
            out.push(path);
        }
    }
}

/// Parses (IR text) or compiles (surface) and verifies.
fn load(text: &str, is_surface: bool) -> Result<Module, String> {
    let module = if is_surface {
        surface::compile(text).map_err(|errs| {
            let msgs: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
            format!("does not compile: {}", msgs.join("; "))
        })?
    } else {
        parse_module(text).map_err(|e| format!("does not parse: {e}"))?
    };
    verify_module(&module).map_err(|errs| format!("does not verify: {errs:?}"))?;
    Ok(module)
}

/// A call of a function of the file: its name and its `--args` text.
struct Call {
    func: String,
    args: String,
}

/// The calls a file names: its `run:` and `run-error:` directives, and for a
/// corpus file the argument sets of its `NAME.json`.
fn calls(path: &Path, text: &str, is_surface: bool) -> Result<Vec<Call>, String> {
    let comment = if is_surface { "//" } else { "#" };
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim_start();
        let Some(rest) = line.strip_prefix(comment) else {
            continue;
        };
        let rest = rest.trim_start();
        if let Some(call) = rest
            .strip_prefix("run:")
            .or_else(|| rest.strip_prefix("run-error:"))
        {
            out.push(parse_call(call).ok_or_else(|| format!("bad directive `{line}`"))?);
        }
    }
    let json = path.with_extension("json");
    if path.parent().is_some_and(|d| d.ends_with("corpus")) && json.is_file() {
        let text = std::fs::read_to_string(&json).map_err(|e| e.to_string())?;
        let func = strings_after(&text, "\"function\": \"")
            .next()
            .ok_or_else(|| format!("{}: no function", json.display()))?;
        let before = out.len();
        for args in strings_after(&text, "\"args\": \"") {
            out.push(Call {
                func: func.to_string(),
                args: args.to_string(),
            });
        }
        if out.len() == before {
            return Err(format!("{}: no argument sets", json.display()));
        }
    }
    Ok(out)
}

/// The JSON string values that follow each `key` (which ends with the opening
/// quote); the corpus strings hold no escaped quotes.
fn strings_after<'t>(text: &'t str, key: &'t str) -> impl Iterator<Item = &'t str> {
    text.match_indices(key).filter_map(move |(i, _)| {
        let rest = &text[i + key.len()..];
        rest.find('"').map(|end| &rest[..end])
    })
}

/// ` @f(ARGS) ...` to the call, matching brackets.
fn parse_call(s: &str) -> Option<Call> {
    let s = s.trim_start().strip_prefix('@')?;
    let open = s.find('(')?;
    let mut depth = 0usize;
    for (i, c) in s[open..].char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(Call {
                        func: s[..open].trim().to_string(),
                        args: s[open + 1..open + i].to_string(),
                    });
                }
            }
            _ => {}
        }
    }
    None
}

/// What a call gives: a value, or an error message and the line and column
/// of the failing statement.
enum Outcome {
    Value(Val),
    Error(String, Option<(u32, u32)>),
}

/// Runs `call` on `m`; arguments are parsed afresh, since a run may write to
/// its array arguments.
fn outcome(m: &Module, call: &Call) -> Result<Outcome, String> {
    let id = m
        .by_name(&call.func)
        .ok_or_else(|| format!("no function @{}", call.func))?;
    let args = parse_args(&call.args, &m[id].param_types(), m)
        .map_err(|e| format!("bad arguments `{}`: {e}", call.args))?;
    Ok(match run(m, id, &args, &RunOptions::default()) {
        Ok(value) => Outcome::Value(value),
        Err(e) => Outcome::Error(e.msg, e.loc.pos.map(|p| (p.line, p.col))),
    })
}

fn same(a: &Outcome, b: &Outcome) -> bool {
    match (a, b) {
        (Outcome::Value(x), Outcome::Value(y)) => x.same(y),
        (Outcome::Error(x, at_x), Outcome::Error(y, at_y)) => x == y && at_x == at_y,
        _ => false,
    }
}

fn show(o: &Outcome, m: &Module) -> String {
    match o {
        Outcome::Value(v) => v.display(m),
        Outcome::Error(msg, at) => format!("error {msg:?} at {at:?}"),
    }
}
