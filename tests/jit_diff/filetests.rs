//! Every filetest program and example with `run:` or `run-error:` lines:
//! each call with one interpreter and one JIT per module (as written and
//! normalised), equal results or equal errors; `@f.rev` of the `test:
//! reverse` files with a rule provider; and the gradient of the first call
//! of each f64 function in reverse and forward mode. On a thread with a
//! 1 GiB stack, as some calls recurse to the default call-depth limit.

use super::*;

/// `@f(ARGS)` at the start of `s`, with brackets matched.
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
                    let name = s[..open].trim().to_string();
                    return Some((name, s[open + 1..open + i].to_string()));
                }
            }
            _ => {}
        }
    }
    None
}

/// Every filetest program (`NAME.ir` or `NAME.irad`, not the expected
/// outputs beside them) under `dir`, recursively.
fn programs(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("readable test directory")
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            programs(&path, out);
        } else if name.split('.').count() == 2 && (name.ends_with(".ir") || name.ends_with(".irad"))
        {
            out.push(path);
        }
    }
}

/// A filetest program with runnable cases.
struct Filetest {
    /// The path from the crate root, for messages.
    file: String,
    src: Source,
    module: Module,
    /// The calls of its `run:` and `run-error:` lines: (function, arguments).
    calls: Vec<(String, String)>,
    /// Whether it is a `test: reverse` file.
    reverse: bool,
}

/// Every filetest program and example that is not an error test and has
/// `run:` or `run-error:` lines.
fn filetests() -> Vec<Filetest> {
    let mut files = Vec::new();
    programs(&manifest_dir().join("tests/filetests"), &mut files);
    programs(&manifest_dir().join("examples"), &mut files);
    files.iter().filter_map(|p| filetest(p)).collect()
}

/// The filetest at `path`, unless it is an error test or has nothing to run.
fn filetest(path: &Path) -> Option<Filetest> {
    let src = irad::read_source(path).expect("readable filetest");
    let c = if path.extension().and_then(|e| e.to_str()) == Some("irad") {
        "//"
    } else {
        "#"
    };
    let error_marker = format!("{c} error:");
    if src.text.lines().any(|l| l.contains(&error_marker)) {
        return None; // a file the front end or verifier rejects
    }
    let (run, run_error) = (format!("{c} run:"), format!("{c} run-error:"));
    let calls: Vec<(String, String)> = src
        .text
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let rest = l
                .strip_prefix(run.as_str())
                .or_else(|| l.strip_prefix(run_error.as_str()))?;
            parse_call(rest)
        })
        .collect();
    if calls.is_empty() {
        return None;
    }
    let module = irad::load(&src).unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
    let reverse = src
        .text
        .lines()
        .any(|l| l.trim() == format!("{c} test: reverse"));
    let file = path
        .strip_prefix(manifest_dir())
        .unwrap_or(path)
        .display()
        .to_string();
    Some(Filetest {
        file,
        src,
        module,
        calls,
        reverse,
    })
}

#[test]
fn filetest_runs_agree_on_both_backends() {
    on_big_stack(|| {
        let (mut runs, mut errors, mut rev_runs) = (0, 0, 0);
        for t in filetests() {
            let mut normalised = t.module.clone();
            irad::passes::normalise(&mut normalised).expect("filetests normalise");
            // One interpreter and one JIT per module, as a program embedding
            // irad would use them: both keep their tapes from run to run.
            let opts = RunOptions::default();
            for (stage, module) in [("", &t.module), (" normalised", &normalised)] {
                let mut interp = Interpreter::new(module);
                let mut jit = Jit::new(module).expect("a JIT");
                for (name, text) in &t.calls {
                    let f = func(module, name);
                    let args = args_of(module, f, text);
                    let what = format!("{}{stage}: @{name}({text})", t.file);
                    let (interp_args, jit_args) = (copies(&args), copies(&args));
                    let want = interp.run(f, &interp_args, &opts);
                    let got = jit.run(f, &jit_args, &opts);
                    assert_same_outcome(&what, module, &want, &got);
                    assert_same_args(&what, module, &interp_args, &jit_args);
                    runs += 1;
                    errors += usize::from(want.is_err());
                }
            }
            if t.reverse {
                rev_runs += reverse_pieces_agree(&t);
            }
        }
        // Today: 1096 runs (548 lines, each as written and normalised), 108
        // of them errors, and 15 reverse-mode calls; the minimums catch a
        // sweep that silently finds nothing.
        assert!(runs >= 1000, "only {runs} runs");
        assert!(errors >= 100, "only {errors} errors");
        assert!(rev_runs >= 15, "only {rev_runs} @f.rev runs");
    });
}

#[test]
fn filetest_gradients_agree_on_both_backends() {
    // On a big stack too: some gradients recurse to the call-depth limit.
    on_big_stack(|| {
        let mut grads = 0;
        for t in filetests() {
            // The first call of each f64 function with a tangent.
            let mut seen = Vec::new();
            for (name, text) in &t.calls {
                let m = &t.module;
                let f = func(m, name);
                let has_tangent = m[f].param_types().iter().any(Type::has_tangent);
                if m[f].ret != Type::F64 || !has_tangent || seen.contains(name) {
                    continue;
                }
                seen.push(name.clone());
                let args = args_of(m, f, text);
                let what = format!("{}: @{name}({text})", t.file);
                check_grad(&what, Mode::Reverse, &t.src, m, f, &args);
                check_grad(&what, fwd(2), &t.src, m, f, &args);
                check_grad(
                    &what,
                    Mode::Forward(irad::ir::Lanes::Sparse),
                    &t.src,
                    m,
                    f,
                    &args,
                );
                grads += 3;
            }
        }
        // Today: 266 (133 functions, two modes each).
        assert!(grads >= 250, "only {grads} gradients");
    });
}

/// The shadows of `[f64]` arrays in `v` (of type `ty`), depth first.
fn shadows(v: &Val, ty: &Type, out: &mut Vec<Val>) {
    match (v, ty) {
        (Val::Array(a), Type::Array(irad::ir::Scalar::F64)) => {
            out.push(f64s(&vec![0.0; a.0.borrow().len()]));
        }
        (Val::Tuple(vs), Type::Tuple(ts)) => {
            for (v, t) in vs.iter().zip(ts.iter()) {
                shadows(v, t, out);
            }
        }
        _ => {}
    }
}

/// `@f.rev` (seed 1, zero shadows) of each call to an f64 function, run
/// with a rule provider in the interpreter and in the JIT; returns how many.
fn reverse_pieces_agree(t: &Filetest) -> usize {
    let registry = irad::rules::Registry::new();
    let (m, _, _) = irad::reverse_module(&t.src, &t.module, &[], &registry)
        .unwrap_or_else(|e| panic!("{}", e.render(&[&t.src])));
    let mut n = 0;
    for (name, text) in &t.calls {
        let f = func(&m, name);
        if m[f].ret != Type::F64 {
            continue;
        }
        let rev = func(&m, &format!("{name}.rev"));
        let mut args = args_of(&m, f, text);
        let params = m[f].param_types();
        let mut extra = Vec::new();
        for (a, t) in args.iter().zip(&params) {
            shadows(a, t, &mut extra);
        }
        args.extend(extra);
        args.push(Val::F64(1.0));
        let what = format!("{}: @{name}.rev({text})", t.file);
        let interp_args = copies(&args);
        let jit_args = copies(&args);
        let (mut mi, mut mj) = (m.clone(), m.clone());
        let (mut ri, mut rj) = (Reverse::new(&registry), Reverse::new(&registry));
        let want = Interpreter::with_rules(&mut mi, &mut ri).run(
            rev,
            &interp_args,
            &RunOptions::default(),
        );
        let got = Jit::with_rules(&mut mj, &mut rj).expect("a JIT").run(
            rev,
            &jit_args,
            &RunOptions::default(),
        );
        assert_same_outcome(&what, &m, &want, &got);
        assert_same_args(&what, &m, &interp_args, &jit_args);
        n += 1;
    }
    n
}
