//! The optimiser changes no result: for every corpus program (each argument
//! set of its JSON), every filetest program (each `# run:` / `# run-error:`
//! call) and every example, the default schedule, and each rule alone under
//! `normalise(...)`, run over
//! - the normalised primal functions (all of them),
//! - the forward rules (`@f.fwd`, widths 1 and 3, through
//!   `irad::grad_forward_with`),
//! - the reverse pieces (`@f.rev.fwd`, `@f.rev.back`, through
//!   `irad::grad_reverse_with`),
//!
//! give, in the interpreter, the same values and gradients bit for bit (any
//! NaN equal to any NaN) and the same errors (message and source position)
//! as without optimisation. The corpus is also run with the default schedule
//! through the JIT, which must agree with the unoptimised interpreter.
//!
//! Assumes the programs load; files that do not (error tests) are skipped.
//! Fails when it finds fewer calls than a floor, so it cannot pass vacuously.

use irad::ir::interp::Val;
use irad::ir::{FuncId, Module};
use irad::passes::forward::grad::GradOptions;
use irad::passes::optimise::{OptOptions, Strategy, default_schedule, optimise, parse_schedule};
use irad::{Error, Source};
use std::path::Path;

/// One call: a program, the function and the argument text.
struct Call {
    src: Source,
    module: Module,
    func: String,
    args: String,
}

fn schedules() -> Vec<Strategy> {
    let mut out = vec![default_schedule()];
    for rule in [
        "fold",
        "identities",
        "copyprop",
        "phi-simplify",
        "branch-fold",
        "dce",
        "cse",
        "memfwd",
        "licm",
        "inline",
        "unroll",
        "devirtualise",
        "merge-blocks",
    ] {
        out.push(parse_schedule(&format!("normalise({rule})")).expect("parses"));
    }
    out
}

fn load(path: &Path) -> Option<(Source, Module)> {
    let src = irad::read_source(path).ok()?;
    let module = irad::load(&src).ok()?;
    Some((src, module))
}

/// `@f(ARGS)` after a directive marker: the name and the argument text.
fn parse_call(s: &str) -> Option<(String, String)> {
    let s = s.trim_start().strip_prefix('@')?;
    let open = s.find('(')?;
    let mut depth = 0usize;
    for (i, c) in s[open..].char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some((
                        s[..open].trim().to_string(),
                        s[open + 1..open + i].to_string(),
                    ));
                }
            }
            _ => {}
        }
    }
    None
}

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name != "errors" && name != "surface_errors" {
                files(&p, out);
            }
        } else {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let stem_has_dot = name.matches('.').count() > 1;
            if !stem_has_dot && (name.ends_with(".ir") || name.ends_with(".irad")) {
                out.push(p);
            }
        }
    }
}

fn directive_calls() -> Vec<Call> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    files(&root.join("tests/filetests"), &mut paths);
    files(&root.join("examples"), &mut paths);
    let mut calls = Vec::new();
    for p in paths {
        let Some((src, module)) = load(&p) else {
            continue;
        };
        let marker = if p.extension().is_some_and(|e| e == "irad") {
            "//"
        } else {
            "#"
        };
        for line in src.text.lines() {
            let t = line.trim_start();
            let rest = t
                .strip_prefix(&format!("{marker} run:"))
                .or_else(|| t.strip_prefix(&format!("{marker} run-error:")));
            if let Some((func, args)) = rest.and_then(parse_call) {
                calls.push(Call {
                    src: src.clone(),
                    module: module.clone(),
                    func,
                    args,
                });
            }
        }
    }
    calls
}

fn corpus_calls() -> Vec<Call> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut calls = Vec::new();
    let mut jsons: Vec<_> = std::fs::read_dir(&root)
        .expect("corpus")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    jsons.sort();
    for j in jsons {
        let text = std::fs::read_to_string(&j).expect("reads");
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        let (Some(file), Some(func)) = (v["file"].as_str(), v["function"].as_str()) else {
            continue;
        };
        // The surface file, and its IR text twin where there is one.
        let mut programs = vec![root.join(file)];
        let twin = root.join(file).with_extension("ir");
        if twin.exists() {
            programs.push(twin);
        }
        for path in programs {
            let Some((src, module)) = load(&path) else {
                panic!("corpus file {} does not load", path.display());
            };
            for case in v["cases"].as_array().into_iter().flatten() {
                if let Some(args) = case["args"].as_str() {
                    calls.push(Call {
                        src: src.clone(),
                        module: module.clone(),
                        func: func.to_string(),
                        args: args.to_string(),
                    });
                }
            }
        }
    }
    calls
}

/// What a run gave, comparable across optimisations: values, or the error
/// message and source position (statement numbers change when statements go).
#[derive(Debug)]
enum Outcome {
    Value(Vec<Val>),
    Error(String),
}

fn error_key(e: &Error) -> String {
    match e {
        Error::Run { err, .. } => format!("{} at {:?}", err.msg, err.loc.pos),
        other => other.to_string(),
    }
}

fn same(a: &Outcome, b: &Outcome) -> bool {
    match (a, b) {
        (Outcome::Value(x), Outcome::Value(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.same(q))
        }
        (Outcome::Error(x), Outcome::Error(y)) => x == y,
        _ => false,
    }
}

fn args_of(c: &Call, m: &Module, f: FuncId) -> Option<Vec<Val>> {
    let a = Source {
        name: "<args>".into(),
        text: c.args.clone(),
    };
    irad::parse_args(&a, m, f).ok()
}

/// The primal: the normalised module optimised over every function.
fn run_primal(c: &Call, schedule: &Strategy) -> Option<Outcome> {
    let mut m = c.module.clone();
    irad::passes::normalise(&mut m).ok()?;
    let f = m.by_name(c.func.trim_start_matches('@'))?;
    optimise(&mut m, schedule, None, &OptOptions::default())
        .unwrap_or_else(|e| panic!("{}: {schedule}: {e}", c.src.name));
    let args = args_of(c, &m, f)?;
    Some(
        match irad::run(&c.src, &m, &irad::RunRequest::new(f, &args)) {
            Ok(v) => {
                // Argument arrays written by the function are part of the result.
                let mut vals = vec![v];
                vals.extend(args);
                Outcome::Value(vals)
            }
            Err(e) => Outcome::Error(error_key(&e)),
        },
    )
}

#[derive(Copy, Clone, Debug)]
enum Mode {
    Fwd(u32),
    Rev,
}

fn run_grad(c: &Call, mode: Mode, schedule: &Strategy, backend: irad::Backend) -> Option<Outcome> {
    let f = c.module.by_name(c.func.trim_start_matches('@'))?;
    let args = args_of(c, &c.module, f)?;
    let registry = irad::rules::Registry::new();
    let opts = GradOptions {
        lanes: match mode {
            Mode::Fwd(w) => irad::ir::Lanes::dense(w).expect("a dense width"),
            Mode::Rev => irad::ir::Lanes::ONE,
        },
        exec: backend.exec(),
        ..GradOptions::default()
    };
    let res = match mode {
        Mode::Fwd(_) => irad::grad(
            &c.src,
            &c.module,
            &registry,
            &irad::GradRequest {
                mode: irad::Mode::Forward,
                opts: opts.clone(),
                schedule: Some(schedule.clone()),
                ..irad::GradRequest::new(f, &args)
            },
        ),
        Mode::Rev => irad::grad(
            &c.src,
            &c.module,
            &registry,
            &irad::GradRequest {
                mode: irad::Mode::Reverse,
                opts: opts.clone(),
                schedule: Some(schedule.clone()),
                ..irad::GradRequest::new(f, &args)
            },
        ),
    };
    Some(match res {
        Ok((g, _)) => {
            let mut vals = vec![g.value];
            vals.extend(g.gradient.into_iter().map(|d| d.unwrap_or(Val::Unit)));
            Outcome::Value(vals)
        }
        Err(e) => Outcome::Error(error_key(&e)),
    })
}

fn check(calls: &[Call], jit: bool) -> usize {
    let schedules = schedules();
    let mut checked = 0;
    let mut failures = Vec::new();
    for c in calls {
        let what = format!("{} @{}({})", c.src.name, c.func, c.args);
        if let Some(base) = run_primal(c, &Strategy::Id) {
            for s in &schedules {
                if let Some(got) = run_primal(c, s)
                    && !same(&base, &got)
                {
                    failures.push(format!("{what}: primal, {s}: {got:?}, want {base:?}"));
                }
                checked += 1;
            }
        }
        for mode in [Mode::Fwd(1), Mode::Fwd(3), Mode::Rev] {
            let Some(base) = run_grad(c, mode, &Strategy::Id, irad::Backend::Interp) else {
                continue;
            };
            for s in &schedules {
                if let Some(got) = run_grad(c, mode, s, irad::Backend::Interp)
                    && !same(&base, &got)
                {
                    failures.push(format!("{what}: {mode:?}, {s}: {got:?}, want {base:?}"));
                }
                checked += 1;
            }
            if jit {
                let s = default_schedule();
                if let Some(got) = run_grad(c, mode, &s, irad::Backend::Jit)
                    && !same(&base, &got)
                {
                    failures.push(format!(
                        "{what}: {mode:?}, JIT, {s}: {got:?}, want {base:?}"
                    ));
                }
                checked += 1;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    checked
}

#[test]
fn the_optimiser_changes_no_result_on_the_corpus_interpreter_and_jit() {
    let calls = corpus_calls();
    assert!(calls.len() >= 30, "only {} corpus calls", calls.len());
    let n = check(&calls, true);
    assert!(n >= 800, "only {n} checks");
}

#[test]
fn the_optimiser_changes_no_result_on_the_filetests_and_examples() {
    let calls = directive_calls();
    assert!(calls.len() >= 200, "only {} calls", calls.len());
    let n = check(&calls, false);
    assert!(n >= 2000, "only {n} checks");
}
