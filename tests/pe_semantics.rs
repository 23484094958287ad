//! Partial evaluation keeps meaning: for every program of
//! `tests/filetests/programs`, `tests/filetests/pe`, `tests/filetests/surface`
//! and `tests/corpus`, and every call the file names (its `# run:` and
//! `# run-error:` lines, or a corpus program's JSON argument sets), the
//! function specialised on each argument alone (a known value, or for an array
//! its length) and on all arguments together gives the same value (bit for
//! bit, any NaN equal to any NaN), the same argument arrays afterwards, or the
//! same run-time error at the same place, as the original in the interpreter.
//! Where the original's gradient exists, the specialisation's forward and
//! reverse gradients with respect to the unknown arguments equal it within
//! 1e-12 relative (partial evaluation keeps the order of floating-point
//! operations, but reverse mode may sum an inlined callee's cotangents in
//! another order); the number that are bit-equal is printed.
//!
//! Assumes the files load and verify. Fails when it finds no file or a call
//! that cannot be read.

use irad::Known;
use irad::ir::interp::value::{ArrayRef, Val};
use irad::ir::interp::{RunOptions, run};
use irad::ir::text::parse_args;
use irad::ir::{FuncId, Module, Type};
use irad::passes::forward::grad::GradOptions;
use std::path::{Path, PathBuf};

#[test]
fn specialisation_keeps_values_errors_and_gradients() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dirs = [
        "tests/filetests/programs",
        "tests/filetests/pe",
        "tests/filetests/surface",
        "tests/corpus",
    ];
    let mut files = Vec::new();
    for dir in dirs {
        program_files(&root.join(dir), &mut files);
    }
    files.sort();
    assert!(files.len() >= 50, "found only {} programs", files.len());
    let mut stats = Stats::default();
    let failures: Vec<String> = files
        .iter()
        .filter_map(|path| {
            let shown = path.strip_prefix(root).unwrap_or(path).display();
            check_file(path, &mut stats)
                .err()
                .map(|e| format!("{shown}: {e}"))
        })
        .collect();
    println!(
        "{} specialisations checked, {} gradients compared ({} bit-equal)",
        stats.specs, stats.grads, stats.grads_bit_equal
    );
    assert!(
        failures.is_empty(),
        "{} of {} programs failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n\n")
    );
    assert!(stats.specs > 100, "only {} specialisations", stats.specs);
}

#[derive(Default)]
struct Stats {
    specs: usize,
    grads: usize,
    grads_bit_equal: usize,
}

fn check_file(path: &Path, stats: &mut Stats) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let src = irad::Source {
        name: path.display().to_string(),
        text: text.clone(),
    };
    let module = irad::load(&src).map_err(|e| e.render(&[&src]))?;
    let is_surface = path.extension().is_some_and(|e| e == "irad");
    for call in calls(path, &text, is_surface)? {
        let f = module
            .by_name(&call.func)
            .ok_or_else(|| format!("no function @{}", call.func))?;
        let args = parse_args(&call.args, &module[f].param_types(), &module)
            .map_err(|e| format!("bad arguments `{}`: {e}", call.args))?;
        let mut variants: Vec<Vec<Known>> = (0..args.len())
            .map(|i| {
                (0..args.len())
                    .map(|j| {
                        if i == j {
                            known(&args[j])
                        } else {
                            Known::Unknown
                        }
                    })
                    .collect()
            })
            .collect();
        if args.len() > 1 {
            variants.push(args.iter().map(known).collect());
        }
        for known in variants {
            let (m, spec) = irad::specialise(&src, &module, f, &known)
                .map_err(|e| format!("@{} on {known:?}: {}", call.func, e.render(&[&src])))?;
            stats.specs += 1;
            compare_runs(&m, f, spec, &args)
                .map_err(|e| format!("@{}({}) known {known:?}: {e}", call.func, call.args))?;
            compare_gradients(&src, &m, f, spec, &args, &known, stats)
                .map_err(|e| format!("@{}({}) known {known:?}: {e}", call.func, call.args))?;
        }
    }
    Ok(())
}

/// What a known argument is: its value, or for an array its length.
fn known(v: &Val) -> Known {
    match v {
        Val::Array(a) => Known::Length(a.0.borrow().len() as u64),
        other => Known::Value(other.clone()),
    }
}

/// The original and the specialisation give the same outcome and leave the
/// argument arrays alike.
fn compare_runs(m: &Module, f: FuncId, spec: FuncId, args: &[Val]) -> Result<(), String> {
    let (a1, a2) = (copies(args), copies(args));
    let want = run(m, f, &a1, &RunOptions::default());
    let got = run(m, spec, &a2, &RunOptions::default());
    let same = match (&want, &got) {
        (Ok(a), Ok(b)) => a.same(b),
        (Err(a), Err(b)) => a.msg == b.msg && a.loc.pos == b.loc.pos,
        _ => false,
    };
    if !same {
        return Err(format!(
            "original {}, specialised {}\n{}",
            show(&want, m),
            show(&got, m),
            irad::ir::text::print_func(m, spec)
        ));
    }
    if !a1.iter().zip(&a2).all(|(x, y)| x.same(y)) {
        return Err("the argument arrays differ after the runs".into());
    }
    Ok(())
}

fn show(r: &Result<Val, irad::ir::interp::RunError>, m: &Module) -> String {
    match r {
        Ok(v) => v.display(m),
        Err(e) => format!("error {:?} at {:?}", e.msg, e.loc.pos),
    }
}

/// Forward and reverse gradients of the specialisation with respect to the
/// unknown arguments that have tangents equal the original's.
fn compare_gradients(
    src: &irad::Source,
    m: &Module,
    f: FuncId,
    spec: FuncId,
    args: &[Val],
    known: &[Known],
    stats: &mut Stats,
) -> Result<(), String> {
    if m[f].ret != Type::F64 {
        return Ok(());
    }
    let params = m[f].param_types();
    let wrt: Vec<usize> = (0..args.len())
        .filter(|&i| matches!(known[i], Known::Unknown | Known::Length(_)))
        .filter(|&i| params[i].tangent().is_some())
        .collect();
    if wrt.is_empty() {
        return Ok(());
    }
    let opts = GradOptions {
        tape_limit: None,
        checkpoints: Default::default(),
        lanes: irad::ir::Lanes::ONE,
        wrt: Some(wrt),
        run: RunOptions::default(),
        exec: irad::Backend::Interp.exec(),
        activity: true,
        ..GradOptions::default()
    };
    let registry = irad::rules::Registry::new();
    type GradFn = fn(
        &irad::Source,
        &Module,
        FuncId,
        &[Val],
        &irad::rules::Registry,
        &GradOptions,
    ) -> Result<(irad::passes::forward::grad::Gradient, Module), irad::Error>;
    let modes: [(&str, GradFn); 2] = [
        ("forward", irad::grad_forward),
        ("reverse", irad::grad_reverse),
    ];
    for (mode, grad) in modes {
        let Ok((want, _)) = grad(src, m, f, &copies(args), &registry, &opts) else {
            // The original has no gradient here (a run-time error, or a
            // function AD does not take): nothing to compare.
            continue;
        };
        let (got, _) = grad(src, m, spec, &copies(args), &registry, &opts)
            .map_err(|e| format!("{mode} gradient of the specialisation: {e}"))?;
        stats.grads += 1;
        let bit_equal = want.value.same(&got.value)
            && want
                .gradient
                .iter()
                .zip(&got.gradient)
                .all(|(a, b)| match (a, b) {
                    (Some(a), Some(b)) => a.same(b),
                    (None, None) => true,
                    _ => false,
                });
        if bit_equal {
            stats.grads_bit_equal += 1;
            continue;
        }
        let close = want.value.same(&got.value)
            && want
                .gradient
                .iter()
                .zip(&got.gradient)
                .all(|(a, b)| match (a, b) {
                    (Some(a), Some(b)) => near(a, b),
                    (None, None) => true,
                    _ => false,
                });
        if !close {
            return Err(format!(
                "{mode} gradients differ: original {:?}, specialised {:?}",
                want.gradient, got.gradient
            ));
        }
    }
    Ok(())
}

fn near(a: &Val, b: &Val) -> bool {
    fn near_f(x: f64, y: f64) -> bool {
        (x.is_nan() && y.is_nan())
            || x == y
            || (x - y).abs() <= 1e-14 + 1e-12 * x.abs().max(y.abs())
    }
    match (a, b) {
        (Val::F64(x), Val::F64(y)) => near_f(*x, *y),
        (Val::Tuple(xs), Val::Tuple(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys.iter()).all(|(x, y)| near(x, y))
        }
        (Val::Array(x), Val::Array(y)) => match (&*x.0.borrow(), &*y.0.borrow()) {
            (irad::ir::interp::ArrayData::F64(xs), irad::ir::interp::ArrayData::F64(ys)) => {
                xs.len() == ys.len() && xs.iter().zip(ys).all(|(p, q)| near_f(*p, *q))
            }
            (xs, ys) => xs == ys,
        },
        _ => a.same(b),
    }
}

/// Fresh copies of argument values (arrays get new buffers).
fn copies(args: &[Val]) -> Vec<Val> {
    fn copy(v: &Val) -> Val {
        match v {
            Val::Array(a) => Val::Array(ArrayRef::new(a.0.borrow().clone())),
            Val::Tuple(vs) => Val::Tuple(vs.iter().map(copy).collect()),
            other => other.clone(),
        }
    }
    args.iter().map(copy).collect()
}

/// `NAME.ir` and `NAME.irad` files (one dot) under `dir`, recursively.
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

struct Call {
    func: String,
    args: String,
}

/// The `run:` / `run-error:` calls of a file, and a corpus file's JSON
/// argument sets.
fn calls(path: &Path, text: &str, is_surface: bool) -> Result<Vec<Call>, String> {
    let comment = if is_surface { "//" } else { "#" };
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.trim_start().strip_prefix(comment) else {
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
        for args in strings_after(&text, "\"args\": \"") {
            out.push(Call {
                func: func.to_string(),
                args: args.to_string(),
            });
        }
    }
    Ok(out)
}

fn strings_after<'t>(text: &'t str, key: &'t str) -> impl Iterator<Item = &'t str> {
    text.match_indices(key).filter_map(move |(i, _)| {
        let rest = &text[i + key.len()..];
        rest.find('"').map(|end| &rest[..end])
    })
}

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
