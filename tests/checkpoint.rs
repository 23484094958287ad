//! Loop checkpointing (docs/reverse.md, "Checkpointing"): under a tape limit
//! the gradient is the gradient without one, bit for bit, in the
//! interpreter and in compiled code, and the pieces leave every argument
//! array as it was and the tapes empty.
//!
//! The points: every case of the reference corpus (`tests/corpus`), every
//! `grad:` line of `tests/reverse_recompute` and `tests/checkpoint` (the
//! programs written for this: nested loops, while loops, loops writing
//! arrays or carrying them from one iteration to the next, calls,
//! recursion, loops that are refused), and every `run:` line of
//! `tests/filetests/programs` and `benches/programs` whose function returns
//! f64. At each point, the reference is reverse mode without a limit in the
//! interpreter;
//! then, at limits from 1 byte (a snapshot every iteration: as many
//! recomputations as there can be) to 1M, in the interpreter and the JIT,
//! the value and the gradient must be the reference's bit for bit (any NaN
//! equals any NaN), and running `@f.rev.fwd` then `@f.rev.back` under the
//! smallest limit must restore the arguments' arrays and empty the tapes.
//! Points whose reference fails (a run-time error of the program) are
//! skipped; every file of `tests/checkpoint` must yield points.
//!
//! `plan: @f has TEXT` (or `lacks TEXT`) lines of `tests/checkpoint` assert
//! that the tape plan of `@f` under a 1-byte limit says TEXT (which loop is
//! checkpointed, and why another is not). Across all points, at least one
//! loop must be checkpointed at the smallest limit, so that the suite cannot
//! pass by checkpointing nothing.

use irad::Backend;
use irad::Source;
use irad::ir::interp::{ArrayData, ArrayRef, InterpStats, Interpreter, RunOptions, Val};
use irad::ir::{FuncId, Module, Type};
use irad::passes::forward::grad::{GradOptions, Gradient};
use irad::passes::reverse::{CheckpointSchedule, Reverse, tape_plan_limited, tape_plan_scheduled};
use irad::rules::Registry;
use std::path::{Path, PathBuf};

/// The limits the interpreter runs under (bytes).
const INTERP_LIMITS: [u64; 4] = [1, 64, 1000, 1 << 20];
/// The limits the JIT runs under.
const JIT_LIMITS: [u64; 2] = [1, 1000];

/// No per-loop overrides.
const NO_RULES: CheckpointSchedule = CheckpointSchedule { rules: Vec::new() };

/// One point: a function of a program at some arguments, with the
/// checkpoint schedule its file gives (a `checkpoint: RULES` line).
struct Point {
    src: Source,
    func: String,
    args: String,
    rules: CheckpointSchedule,
}

/// The checkpoint schedule of the `// checkpoint: RULES` line of `src`
/// (docs/schedules.md), or none.
fn file_rules(src: &Source) -> CheckpointSchedule {
    src.text
        .lines()
        .find_map(|l| l.trim().strip_prefix("// checkpoint: "))
        .map_or(NO_RULES, |text| {
            let m = irad::load(src).expect("the program loads");
            irad::read_checkpoints(Some(text), src, &m).expect("the schedule reads")
        })
}

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `.ir` and `.irad` files of `dir`, sorted.
fn programs(dir: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(manifest_dir().join(dir))
        .expect("the directory exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("ir" | "irad")))
        .collect();
    files.sort();
    files
}

/// The points of the lines of `path` starting `PREFIX @f(ARGS)` (`#` or
/// `//` then `prefix`, as the file's language comments).
fn marked_points(path: &Path, prefix: &str) -> Vec<Point> {
    let src = irad::read_source(path).expect("readable program");
    let comment = if path.extension().and_then(|e| e.to_str()) == Some("ir") {
        "#"
    } else {
        "//"
    };
    let marker = format!("{comment} {prefix} @");
    let rules = file_rules(&src);
    let mut out = Vec::new();
    for line in src.text.lines() {
        let Some(rest) = line.trim().strip_prefix(marker.as_str()) else {
            continue;
        };
        let (Some(open), Some(close)) = (rest.find('('), rest.rfind(')')) else {
            continue;
        };
        out.push(Point {
            src: src.clone(),
            func: rest[..open].trim().to_string(),
            args: rest[open + 1..close].to_string(),
            rules: rules.clone(),
        });
    }
    out
}

/// The cases of the reference corpus, surface file and IR twin.
fn corpus_points() -> Vec<Point> {
    let mut out = Vec::new();
    let dir = manifest_dir().join("tests/corpus");
    let mut jsons: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/corpus exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("json"))
        .collect();
    jsons.sort();
    for path in jsons {
        let text = std::fs::read_to_string(&path).expect("readable corpus file");
        let reference: serde_json::Value = serde_json::from_str(&text).expect("corpus JSON");
        let func = reference["function"].as_str().expect("function named");
        for file in [reference["file"].as_str(), reference["ir_file"].as_str()]
            .into_iter()
            .flatten()
        {
            let src = irad::read_source(&dir.join(file)).expect("readable corpus program");
            for case in reference["cases"].as_array().into_iter().flatten() {
                out.push(Point {
                    src: src.clone(),
                    func: func.to_string(),
                    args: case["args"].as_str().expect("args text").to_string(),
                    rules: NO_RULES,
                });
            }
        }
    }
    out
}

/// A deep copy of a value (arrays are references).
fn fresh(v: &Val) -> Val {
    match v {
        Val::Array(a) => Val::Array(ArrayRef::new(a.0.borrow().clone())),
        Val::Tuple(vs) => Val::Tuple(vs.iter().map(fresh).collect()),
        other => other.clone(),
    }
}

/// Bit-equal values (any NaN equals any NaN).
fn same(a: &Val, b: &Val) -> bool {
    let f = |x: f64, y: f64| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan());
    match (a, b) {
        (Val::F64(x), Val::F64(y)) => f(*x, *y),
        (Val::Tuple(x), Val::Tuple(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| same(p, q))
        }
        (Val::Array(x), Val::Array(y)) => match (&*x.0.borrow(), &*y.0.borrow()) {
            (ArrayData::F64(p), ArrayData::F64(q)) => {
                p.len() == q.len() && p.iter().zip(q).all(|(s, t)| f(*s, *t))
            }
            (p, q) => p == q,
        },
        _ => format!("{a:?}") == format!("{b:?}"),
    }
}

/// Whether two gradients are the same bit for bit.
fn same_gradient(a: &Gradient, b: &Gradient) -> bool {
    same(&a.value, &b.value)
        && a.gradient.len() == b.gradient.len()
        && a.gradient
            .iter()
            .zip(&b.gradient)
            .all(|(x, y)| match (x, y) {
                (Some(x), Some(y)) => same(x, y),
                (None, None) => true,
                _ => false,
            })
}

/// Reverse mode's value and gradient of `f` at `args` with `backend` under
/// `limit`.
fn grad(
    src: &Source,
    m: &Module,
    f: FuncId,
    args: &[Val],
    backend: Backend,
    limit: Option<u64>,
) -> Result<Gradient, String> {
    grad_ruled(src, m, f, args, (backend, limit, &NO_RULES))
}

/// [`grad`] with the checkpoint schedule `rules` too.
fn grad_ruled(
    src: &Source,
    m: &Module,
    f: FuncId,
    args: &[Val],
    (backend, limit, rules): (Backend, Option<u64>, &CheckpointSchedule),
) -> Result<Gradient, String> {
    let registry = Registry::new();
    let opts = GradOptions {
        exec: backend.exec(),
        tape_limit: limit,
        checkpoints: rules.clone(),
        ..GradOptions::default()
    };
    let args: Vec<Val> = args.iter().map(fresh).collect();
    irad::grad_reverse(src, m, f, &args, &registry, &opts)
        .map(|(g, _)| g)
        .map_err(|e| e.render(&[src]))
}

/// Runs `@f.rev.fwd` and `@f.rev.back` (seed 1) derived under `limit` and
/// `rules` in one interpreter on copies of `args` with zero shadows; the
/// arrays must be as before and the tapes empty.
fn check_restored(
    what: &str,
    (m, f, args): (&Module, FuncId, &[Val]),
    limit: Option<u64>,
    rules: &CheckpointSchedule,
) -> Vec<String> {
    let mut m = m.clone();
    let registry = Registry::new();
    let mut rev = Reverse::new(&registry);
    rev.set_tape_limit(limit);
    rev.set_checkpoint_schedule(rules.clone());
    let (fwd, back) = match rev.rule(&mut m, f) {
        Ok(pieces) => pieces,
        Err(e) => return vec![format!("{what}: reverse rule: {e}")],
    };
    let mut call: Vec<Val> = args.iter().map(fresh).collect();
    for (a, ty) in args.iter().zip(m[f].param_types()) {
        if let (Val::Array(x), Type::Array(irad::ir::Scalar::F64)) = (a, ty) {
            let n = x.0.borrow().len();
            call.push(Val::Array(ArrayRef::new(ArrayData::F64(vec![0.0; n]))));
        }
    }
    let mut interp = Interpreter::with_rules(&mut m, &mut rev);
    let opts = RunOptions::default();
    if let Err(e) = interp.run(fwd, &call, &opts) {
        return vec![format!("{what}: forward sweep: {e:?}")];
    }
    if let Err(e) = interp.run(back, &[Val::F64(1.0)], &opts) {
        return vec![format!("{what}: pullback: {e:?}")];
    }
    let mut fails = Vec::new();
    let left = interp.stats().tape_bytes;
    if left != 0 {
        fails.push(format!("{what}: {left} tape bytes left after the pullback"));
    }
    for (k, (a, b)) in args.iter().zip(&call).enumerate() {
        if !same(a, b) {
            fails.push(format!(
                "{what}: argument {k} after the pullback: {b:?}, before {a:?}"
            ));
        }
    }
    fails
}

/// What checking the points found: failures, points checked, and loops
/// checkpointed at the smallest limit.
#[derive(Default)]
struct Outcome {
    fails: Vec<String>,
    checked: usize,
    checkpointed: usize,
}

/// Checks `points` (see the module header).
fn check_points(points: &[Point]) -> Outcome {
    let mut out = Outcome::default();
    for p in points {
        let what = format!("{} @{}({})", p.src.name, p.func, p.args);
        let m = match irad::load(&p.src) {
            Ok(m) => m,
            Err(e) => {
                out.fails.push(format!("{what}: {}", e.render(&[&p.src])));
                continue;
            }
        };
        let Some(f) = m.by_name(&p.func) else {
            out.fails.push(format!("{what}: no such function"));
            continue;
        };
        if m[f].ret != Type::F64 {
            continue;
        }
        let Ok(args) = irad::parse_args(&Source::new("<args>", &p.args), &m, f) else {
            continue;
        };
        let Ok(reference) = grad(&p.src, &m, f, &args, Backend::Interp, None) else {
            continue;
        };
        out.checked += 1;
        // With a schedule, also without a limit: the rules alone decide.
        let free = match p.rules.is_empty() {
            true => vec![],
            false => vec![(Backend::Interp, None), (Backend::Jit, None)],
        };
        let runs = INTERP_LIMITS
            .iter()
            .map(|&l| (Backend::Interp, Some(l)))
            .chain(JIT_LIMITS.iter().map(|&l| (Backend::Jit, Some(l))))
            .chain(free);
        for (backend, limit) in runs {
            let under = match limit {
                Some(l) => format!("under {l} bytes"),
                None => "without a limit".into(),
            };
            match grad_ruled(&p.src, &m, f, &args, (backend, limit, &p.rules)) {
                Ok(g) if same_gradient(&g, &reference) => {}
                Ok(g) => out.fails.push(format!(
                    "{what}: {backend:?} {under}: {:?} {:?}, the reference {:?} {:?}",
                    g.value, g.gradient, reference.value, reference.gradient
                )),
                Err(e) => out.fails.push(format!("{what}: {backend:?} {under}: {e}")),
            }
        }
        match irad::load_normalised(&p.src) {
            Ok(n) => {
                let g = n.by_name(&p.func).unwrap_or(f);
                let point = (&n, g, args.as_slice());
                out.fails
                    .extend(check_restored(&what, point, Some(1), &p.rules));
                if !p.rules.is_empty() {
                    out.fails
                        .extend(check_restored(&what, point, None, &p.rules));
                }
                let plan = tape_plan_scheduled(&n, &Registry::new(), g, Some(1), &p.rules);
                if let Ok(plan) = plan {
                    out.checkpointed += plan.checkpointed().len();
                }
            }
            Err(e) => out.fails.push(format!("{what}: {}", e.render(&[&p.src]))),
        }
    }
    out
}

/// `@name` of `src` at `args` under each of `limits`, in both backends,
/// gives the gradient without a limit bit for bit.
fn same_under_limits(src: &Source, name: &str, args: &str, limits: &[u64]) {
    let loaded = irad::load(src).expect("loads");
    let g = loaded.by_name(name).expect("the function");
    let parsed = irad::parse_args(&Source::new("<args>", args), &loaded, g).expect("args");
    let reference = grad(src, &loaded, g, &parsed, Backend::Interp, None).expect("gradient");
    for backend in [Backend::Interp, Backend::Jit] {
        for &limit in limits {
            let got = grad(src, &loaded, g, &parsed, backend, Some(limit)).expect("gradient");
            assert!(
                same_gradient(&got, &reference),
                "@{name}({args}) {backend:?} under {limit}: {:?} {:?}, without a limit {:?} {:?}",
                got.value,
                got.gradient,
                reference.value,
                reference.gradient
            );
        }
    }
}

/// Fails with every failure listed, or when nothing was checked.
fn report(name: &str, out: Outcome) {
    assert!(
        out.fails.is_empty(),
        "{name}: {} failure(s):\n{}",
        out.fails.len(),
        out.fails.join("\n")
    );
    assert!(out.checked > 0, "{name}: no point was checked");
}

#[test]
fn the_corpus_under_tiny_limits() {
    let out = check_points(&corpus_points());
    assert!(out.checkpointed > 0, "no corpus loop was checkpointed");
    report("corpus", out);
}

#[test]
fn the_recompute_programs_under_tiny_limits() {
    let points: Vec<Point> = programs("tests/reverse_recompute")
        .iter()
        .flat_map(|p| marked_points(p, "grad:"))
        .collect();
    let out = check_points(&points);
    assert!(out.checkpointed > 0, "no loop was checkpointed");
    report("reverse_recompute", out);
}

#[test]
fn the_filetest_programs_under_tiny_limits() {
    let points: Vec<Point> = programs("tests/filetests/programs")
        .iter()
        .flat_map(|p| marked_points(p, "run:"))
        .collect();
    let out = check_points(&points);
    assert!(out.checkpointed > 0, "no loop was checkpointed");
    report("filetests/programs", out);
}

#[test]
fn the_bench_programs_under_tiny_limits() {
    let points: Vec<Point> = programs("benches/programs")
        .iter()
        .flat_map(|p| marked_points(p, "run:"))
        .collect();
    let out = check_points(&points);
    assert!(out.checkpointed > 0, "no loop was checkpointed");
    report("benches/programs", out);
}

#[test]
fn the_checkpoint_programs_under_tiny_limits() {
    let mut fails = Vec::new();
    for path in programs("tests/checkpoint") {
        let points = marked_points(&path, "grad:");
        let out = check_points(&points);
        if out.checked == 0 {
            fails.push(format!("{}: no point checked", path.display()));
        }
        fails.extend(out.fails);
        fails.extend(check_plans(&path));
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

/// The `plan: @f has TEXT` / `lacks TEXT` lines of `path`, against the plan
/// under a 1-byte limit (and the file's checkpoint schedule).
fn check_plans(path: &Path) -> Vec<String> {
    let src = irad::read_source(path).expect("readable program");
    let rules = file_rules(&src);
    let mut fails = Vec::new();
    for line in src.text.lines() {
        let Some(rest) = line.trim().strip_prefix("// plan: @") else {
            continue;
        };
        let (func, rest) = rest.split_once(' ').unwrap_or((rest, ""));
        let (has, text) = match (rest.strip_prefix("has "), rest.strip_prefix("lacks ")) {
            (Some(t), _) => (true, t),
            (_, Some(t)) => (false, t),
            _ => {
                fails.push(format!("{}: bad plan line `{line}`", path.display()));
                continue;
            }
        };
        let plan = irad::load_normalised(&src)
            .map_err(|e| e.render(&[&src]))
            .and_then(|n| {
                let f = n.by_name(func).ok_or("no such function")?;
                tape_plan_scheduled(&n, &Registry::new(), f, Some(1), &rules)
                    .map_err(|e| e.to_string())
            });
        match plan {
            Ok(plan) if plan.to_string().contains(text) == has => {}
            Ok(plan) => fails.push(format!(
                "{}: the plan of @{func} {} `{text}`:\n{plan}",
                path.display(),
                if has { "lacks" } else { "has" }
            )),
            Err(e) => fails.push(format!("{}: @{func}: {e}", path.display())),
        }
    }
    fails
}

/// `checkpoint(n)` takes a constant count: any other operand is a located
/// error of reverse mode (the primal and forward mode ignore the hint).
#[test]
fn a_checkpoint_count_that_is_not_a_constant_is_a_located_error() {
    let src = Source::new(
        "h.irad",
        "fn h(x: f64, n: i64) -> f64 {\n    let mut s = x;\n    for i in 0..n {\n        checkpoint(n);\n        s = sin(s);\n    }\n    s\n}\n",
    );
    let m = irad::load(&src).expect("the program loads");
    let f = m.by_name("h").expect("@h");
    let args = irad::parse_args(&Source::new("<args>", "0.5, 4"), &m, f).expect("args");
    let e = grad(&src, &m, f, &args, Backend::Interp, None).expect_err("refused");
    assert!(
        e.starts_with(
            "h.irad:4:9: error: `checkpoint` takes a constant, non-negative number of iterations"
        ),
        "{e}"
    );
    let fwd = irad::grad_forward(
        &src,
        &m,
        f,
        &args,
        &Registry::new(),
        &GradOptions::default(),
    );
    assert!(fwd.is_ok(), "forward mode ignores the hint");
}

/// Forward mode over the checkpointed pieces (`irad hvp`) gives the
/// Hessian-vector product of the pieces without checkpointing, bit for bit.
#[test]
fn forward_over_checkpointed_pieces_is_unchanged() {
    let text = std::fs::read_to_string(manifest_dir().join("tests/checkpoint/override.irad"))
        .expect("readable program");
    let with = Source::new("with.irad", &text);
    let without = Source::new("without.irad", text.replace("checkpoint(3);", ""));
    let mut outs = Vec::new();
    for src in [&with, &without] {
        let m = irad::load(src).expect("loads");
        let f = m.by_name("every3").expect("@every3");
        let args = irad::parse_args(&Source::new("<args>", "0.5, 10"), &m, f).expect("args");
        let v = irad::parse_args(&Source::new("<v>", "1.0, 0"), &m, f).expect("tangent");
        let req = irad::GradRequest::new(f, &args);
        let (h, _) = irad::hvp(src, &m, &Registry::new(), &req, &v).expect("hvp");
        outs.push(format!("{h:?}"));
    }
    assert_eq!(outs[0], outs[1]);
}

/// `irad ARGS` run in the repository's root, which must exit with `code`:
/// its standard output and error.
fn irad_exits(args: &[&str], code: i32) -> (String, String) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(args)
        .current_dir(manifest_dir())
        .output()
        .expect("irad starts");
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
    (out, err)
}

/// The plan `irad dump FILE -f FUNC --mode rev OPTIONS` prints, which must
/// say `says`.
fn rev_dump_says(file: &str, func: &str, options: &[&str], says: &str) {
    let (text, _) = irad_exits(
        &[&["dump", file, "-f", func, "--mode", "rev"][..], options].concat(),
        0,
    );
    assert!(text.contains(says), "{options:?}: {text}");
}

/// `--checkpoint RULES` on the command line (docs/schedules.md): `grad`
/// gives the gradient without it, `dump --mode rev` shows the rule on the
/// loop's plan line, `bench` runs; a malformed schedule or a rule that names
/// no loop is a user error (exit 1) located in the pseudo-file
/// `<checkpoint>`; the option where it means nothing is a usage error (exit
/// 2).
#[test]
fn the_checkpoint_option_on_the_command_line() {
    let file = "tests/checkpoint/schedule.irad";
    let grad = ["grad", file, "-f", "spin", "--args", "0.4, 1.1", "--json"];
    let (plain, _) = irad_exits(&grad, 0);
    for rules in ["line 60 = 1", "#2 = 3", "@spin#2 = record; line 60 = 2"] {
        for backend in ["jit", "interp"] {
            let options = ["--checkpoint", rules, "--backend", backend];
            let (out, _) = irad_exits(&[&grad[..], &options].concat(), 0);
            assert_eq!(out, plain, "{rules}");
        }
    }
    rev_dump_says(
        file,
        "spin",
        &["--checkpoint", "line 60 = 5"],
        "loop #2: checkpointed every 5 iterations (`line 60 = 5` in the checkpoint schedule)",
    );
    rev_dump_says(
        file,
        "spin",
        &["--checkpoint", "#2 = none"],
        "loop #2: not checkpointed: `#2 = record` in the checkpoint schedule",
    );
    let bench = ["bench", file, "-f", "spin", "--args", "0.4, 1.1"];
    irad_exits(
        &[
            &bench[..],
            &["--checkpoint", "line 60 = 1", "--min-time", "0.01"],
        ]
        .concat(),
        0,
    );
    for (rules, says) in [
        (
            "line 60 = often",
            "<checkpoint>:1:11: error: expected a number of iterations, `record` or `none`, found `often`",
        ),
        (
            "line 60 = 2;\nline 61 = 2",
            "<checkpoint>:2:1: error: no loop of the program has its header on line 61",
        ),
        (
            "@spin#7 = 2",
            "<checkpoint>:1:1: error: @spin has no loop headed by #7",
        ),
        (
            "#2 3",
            "<checkpoint>:1:4: error: expected `=` after the loop, found `3`",
        ),
    ] {
        // Without `--json`, errors are text.
        let (_, err) = irad_exits(&[&grad[..6], &["--checkpoint", rules]].concat(), 1);
        assert!(err.starts_with(says), "{rules}: {err}");
    }
    for (args, says) in [
        (
            [&grad[..], &["--checkpoint", "#2 = 1", "--mode", "fwd"]].concat(),
            "use it with --mode rev",
        ),
        (
            vec!["dump", file, "--checkpoint", "#2 = 1"],
            "use it with --mode rev",
        ),
        (
            vec![
                "emit",
                file,
                "-f",
                "spin",
                "--checkpoint",
                "#2 = 1",
                "-o",
                "s.o",
            ],
            "--grad",
        ),
    ] {
        let (_, err) = irad_exits(&args, 2);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// `--tape-limit SIZE` on the command line: sizes with suffixes work on
/// `grad`, `bench` and `dump --mode rev` and give the gradient without a
/// limit; a bad size, or the option where it means nothing (forward mode,
/// `dump` without `--mode rev`, `emit` without `--grad`), is a usage error
/// (exit 2) that names the option.
#[test]
fn the_tape_limit_option_on_the_command_line() {
    let file = "tests/corpus/horner.irad";
    let grad = [
        "grad",
        file,
        "-f",
        "horner",
        "--args",
        "[1.5, -0.7, 0.25], 1.3",
        "--json",
    ];
    let (plain, _) = irad_exits(&grad, 0);
    for size in ["1", "1K", "64m", "1G"] {
        let (out, _) = irad_exits(&[&grad[..], &["--tape-limit", size]].concat(), 0);
        assert_eq!(out, plain, "{size}");
    }
    let bench = ["bench", file, "-f", "horner", "--args", "[1.5, -0.7], 1.3"];
    irad_exits(
        &[&bench[..], &["--tape-limit", "1", "--min-time", "0.01"]].concat(),
        0,
    );
    rev_dump_says(
        file,
        "horner",
        &["--tape-limit", "1"],
        "loop #2: checkpointed every 1 iteration",
    );
    for (args, says) in [
        (
            &[&grad[..], &["--tape-limit", "1.5G"]].concat(),
            "`1.5G` is not a size",
        ),
        (
            &[&grad[..], &["--tape-limit", "0"]].concat(),
            "at least 1 byte",
        ),
        (
            &[&grad[..], &["--tape-limit", "64MB"]].concat(),
            "--tape-limit",
        ),
        (
            &[&grad[..], &["--tape-limit", "1M", "--mode", "fwd"]].concat(),
            "use it with --mode rev",
        ),
        (
            &vec!["dump", file, "--tape-limit", "1M"],
            "use it with --mode rev",
        ),
        (
            &vec![
                "emit",
                file,
                "-f",
                "horner",
                "--tape-limit",
                "1M",
                "-o",
                "h.o",
            ],
            "--grad",
        ),
    ] {
        let (_, err) = irad_exits(args, 2);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// The loop of a function reached through a function value, whose rules
/// are derived during the run, is warned of too, by `grad` and `bench`,
/// plain and under `--json` (before session 42, only `emit --grad` and
/// `grad --seed` did).
#[test]
fn a_loop_of_rules_derived_during_the_run_is_a_warning_too() {
    let file = "tests/checkpoint/refused.irad";
    let warning = format!(
        "{file}:29:5: warning: loop #2 of @held is not checkpointed: it carries an array from \
         one iteration to the next that it neither made afresh in the iteration nor kept as it \
         is; its records grow with its iterations"
    );
    let call = [
        "-f",
        "through_value",
        "--args",
        "0.5, 9",
        "--tape-limit",
        "1",
    ];
    for backend in ["interp", "jit"] {
        let grad = [&["grad", file, "--backend", backend][..], &call[..]].concat();
        let (_, err) = irad_exits(&grad, 0);
        assert_eq!(err, format!("{warning}\n"), "{backend}");
        let (json, err) = irad_exits(&[&grad[..], &["--json"]].concat(), 0);
        assert_eq!(err, "");
        let json: serde_json::Value = serde_json::from_str(&json).expect("JSON");
        assert_eq!(json["warnings"], serde_json::json!([warning]), "{backend}");
    }
    let bench = [&["bench", file, "--min-time", "0.01"][..], &call[..]].concat();
    let (_, err) = irad_exits(&bench, 0);
    assert!(err.starts_with(&format!("{warning}\n")), "{err}");
    let (json, _) = irad_exits(&[&bench[..], &["--json"]].concat(), 0);
    let json: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(json["warnings"], serde_json::json!([warning]));
}

/// A loop a tape limit asks to checkpoint that is not checkpointed and
/// records something per iteration is a located warning on stderr, from
/// `grad` (plain or `--json`), `bench` and `emit --grad`; the output is
/// the one without a limit. Nothing is printed without a limit, for a
/// loop that is checkpointed, one the program keeps from checkpointing
/// (`checkpoint(0)`) or one recording nothing per iteration.
#[test]
fn a_loop_left_unbounded_under_a_limit_is_a_warning() {
    let file = "tests/free_arrays/sharing.irad";
    let warning = format!(
        "{file}:211:5: warning: loop #2 of @best_kept is not checkpointed: it carries an array \
         from one iteration to the next that it neither made afresh in the iteration nor kept \
         as it is; its records grow with its iterations\n"
    );
    let args = ["-f", "best_kept", "--args", "[0.5, 0.2, 0.9], 7"];
    let grad = [&["grad", file][..], &args[..]].concat();
    let (plain, err) = irad_exits(&grad, 0);
    assert_eq!(err, "");
    let limited = [&grad[..], &["--tape-limit", "1"]].concat();
    let (out, err) = irad_exits(&limited, 0);
    assert_eq!(
        (out.as_str(), err.as_str()),
        (plain.as_str(), warning.as_str())
    );
    // With an output seed too: the limit holds there.
    let (_, err) = irad_exits(&[&limited[..], &["--seed", "1.0"]].concat(), 0);
    assert_eq!(err, warning);
    // Under `--json`, stderr carries errors only: the warning is a field.
    let (json, err) = irad_exits(&[&limited[..], &["--json"]].concat(), 0);
    assert_eq!(err, "");
    let json: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(json["warnings"], serde_json::json!([warning.trim_end()]));
    let (json, _) = irad_exits(&[&grad[..], &["--json"]].concat(), 0);
    assert!(!json.contains("warnings"), "{json}");
    let bench = [&["bench", file][..], &args[..], &["--tape-limit", "1M"]].concat();
    let (_, err) = irad_exits(&[&bench[..], &["--min-time", "0.01"]].concat(), 0);
    assert!(err.starts_with(&warning), "{err}");
    let (json, _) = irad_exits(&[&bench[..], &["--min-time", "0.01", "--json"]].concat(), 0);
    let json: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(json["warnings"], serde_json::json!([warning.trim_end()]));
    let out = std::env::temp_dir().join(format!("irad-unbounded-{}.o", std::process::id()));
    let out_s = out.to_string_lossy().into_owned();
    let emit = [
        "emit",
        file,
        "-f",
        "best_kept",
        "--grad",
        "--tape-limit",
        "64K",
        "-o",
        &out_s,
    ];
    let (_, err) = irad_exits(&emit, 0);
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(out.with_extension("h"));
    assert_eq!(err, warning);
    // Checkpointed (`says` empty); kept from it by `checkpoint(0)`;
    // recording nothing per iteration; a short constant loop inside a
    // checkpointed one, recorded in each of its stretches.
    let quiet = [
        (
            "tests/corpus/horner.irad",
            "horner",
            "[1.5, -0.7, 0.25], 1.3",
            "1",
            "",
        ),
        (
            "tests/checkpoint/override.irad",
            "inner_only",
            "[0.2, 0.4, -0.1], 3",
            "1",
            "`checkpoint(0)` in it",
        ),
        (
            "tests/corpus/rosenbrock.irad",
            "rosenbrock",
            "[1.5, -0.7, 0.25]",
            "1",
            "it records nothing per iteration",
        ),
        (
            "tests/checkpoint/inner.irad",
            "hidden",
            "[0.5, -1.5, 0.25], 5",
            "1M",
            "it is inside loop #2, which is checkpointed",
        ),
    ];
    for (file, func, args, limit, says) in quiet {
        rev_dump_says(file, func, &["--tape-limit", limit], says);
        let grad = [
            "grad",
            file,
            "-f",
            func,
            "--args",
            args,
            "--tape-limit",
            limit,
        ];
        let (_, err) = irad_exits(&grad, 0);
        assert_eq!(err, "", "{func}");
    }
}

/// The same loops through the library: the gradient's and the compiled
/// gradient's `unbounded_loops`, empty without a limit.
#[test]
fn the_unbounded_loops_are_in_the_gradient_and_the_compiled_gradient() {
    let src = Source::new(
        "kept.irad",
        "fn f(x: [f64], n: i64) -> f64 {
    let mut r = copy(x);
    let mut keep = copy(x);
    for i in 0..n {
        let t = copy(r);
        t[0] = t[0] * 0.5 + t[1];
        r = t;
        if t[0] < keep[0] { keep = ident(r, 2); }
    }
    keep[0] + r[0]
}
fn short(x: [f64]) -> f64 {
    let mut r = copy(x);
    let mut keep = copy(x);
    for i in 0..3 {
        let t = copy(r);
        t[0] = t[0] * 0.5 + t[1];
        r = t;
        if t[0] < keep[0] { keep = ident(r, 2); }
    }
    keep[0] + r[0]
}
fn ident(a: [f64], k: i64) -> [f64] {
    if k > 0 {
        return ident(a, k - 1);
    }
    a
}",
    );
    let m = irad::load(&src).expect("loads");
    let f = irad::find_function(&src, &m, "f").expect("has f");
    let args = irad::parse_args(&Source::new("<args>", "[1.0, 2.0], 5"), &m, f).expect("args");
    let registry = Registry::new();
    for limit in [None, Some(1), Some(1 << 20)] {
        let opts = GradOptions {
            tape_limit: limit,
            ..GradOptions::default()
        };
        let req = irad::GradRequest {
            opts,
            ..irad::GradRequest::new(f, &args)
        };
        let (g, _) = irad::grad(&src, &m, &registry, &req).expect("a gradient");
        let compiled = irad::jit_gradient(&m, &registry, &req).expect("compiles");
        assert_eq!(g.unbounded_loops, compiled.unbounded_loops(), "{limit:?}");
        // With an output seed (`grad --seed`), the same.
        let (v, _) = irad::vjp(&src, &m, &registry, &req, &Val::F64(1.0)).expect("a vjp");
        assert_eq!(g.unbounded_loops, v.unbounded_loops, "{limit:?}");
        match limit {
            None => assert!(g.unbounded_loops.is_empty()),
            Some(_) => {
                let [u] = &g.unbounded_loops[..] else {
                    panic!("{:?}", g.unbounded_loops);
                };
                assert_eq!((u.func.as_str(), u.skipped.label), ("f", 2));
                assert!(u.skipped.grows);
                assert_eq!(
                    irad::unbounded_warning(&src, u),
                    format!("kept.irad:4:5: warning: {u}")
                );
            }
        }
    }
    // The same loop run a constant 3 times: refused, but its records do
    // not grow with the run.
    let short = irad::find_function(&src, &m, "short").expect("has short");
    let args = irad::parse_args(&Source::new("<args>", "[1.0, 2.0]"), &m, short).expect("args");
    let mut req = irad::GradRequest::new(short, &args);
    req.opts.tape_limit = Some(1);
    let (g, _) = irad::grad(&src, &m, &registry, &req).expect("a gradient");
    assert!(g.unbounded_loops.is_empty(), "{:?}", g.unbounded_loops);
    let n = irad::load_normalised(&src).expect("normalises");
    let nf = n.by_name("short").expect("has short");
    let plan = tape_plan_limited(&n, &registry, nf, Some(1)).expect("a plan");
    assert!(
        matches!(plan.not_checkpointed(), [s] if !s.grows),
        "{:?}",
        plan.not_checkpointed()
    );
}

/// What the interpreter counts while `@f.rev.fwd` then `@f.rev.back` run on
/// `args`, derived under `limit`; the tapes must be empty at the end.
fn counts(m: &Module, f: FuncId, args: &[Val], limit: Option<u64>) -> InterpStats {
    let mut m = m.clone();
    let registry = Registry::new();
    let mut rev = Reverse::new(&registry);
    rev.set_tape_limit(limit);
    let (fwd, back) = rev.rule(&mut m, f).expect("the pieces");
    let mut interp = Interpreter::with_rules(&mut m, &mut rev);
    let opts = RunOptions::default();
    interp
        .run(fwd, args, &opts)
        .expect("the forward sweep runs");
    interp
        .run(back, &[Val::F64(1.0)], &opts)
        .expect("the pullback runs");
    assert_eq!(interp.stats().tape_bytes, 0, "tapes left");
    interp.stats()
}

/// Under a 64K limit the Lotka-Volterra loop (about 48 bytes per iteration
/// by the plan's estimate: stretches of 682 iterations) keeps its tapes
/// under the limit at 100 000 steps, against 4.8 MB without a limit, at the
/// price of running each iteration forward twice; a run of 500 steps, which
/// fits in one stretch, records directly: the bytes it pushes are those
/// without a limit and the flags, the stretch's index and count (the loop's
/// snapshots are thinned) and inputs pushed at the loop's exit, the
/// statements it runs those without a limit and the two phis per iteration
/// of the reverse that carry the stretch's start.
#[test]
fn a_long_loop_stays_under_the_limit_and_a_short_one_records_directly() {
    let src = irad::read_source(&manifest_dir().join("benches/programs/lotka_volterra_steps.irad"))
        .expect("readable");
    let m = irad::load_normalised(&src).expect("loads");
    let f = m.by_name("lotka_volterra_steps").expect("the function");
    let plan = tape_plan_limited(&m, &Registry::new(), f, Some(64 << 10)).expect("plan");
    let text = plan.to_string();
    assert!(text.contains("checkpointed every 682 iterations"), "{text}");
    assert!(text.contains("a run of at most 682 iterations is recorded as without a limit"));
    let args = |n: i64| {
        irad::parse_args(
            &Source::new("<args>", format!("1.5, 1.0, 3.0, 1.0, {n}")),
            &m,
            f,
        )
        .expect("args")
    };
    let (long, short) = (args(100_000), args(500));
    let free = counts(&m, f, &long, None);
    let limited = counts(&m, f, &long, Some(64 << 10));
    assert!(free.peak_tape_bytes > 4_000_000, "{free:?}");
    assert!(
        limited.peak_tape_bytes <= 64 << 10,
        "{limited:?} under a 64K limit"
    );
    assert!(
        limited.statements > free.statements * 5 / 4,
        "{limited:?} {free:?}"
    );
    let free = counts(&m, f, &short, None);
    let limited = counts(&m, f, &short, Some(64 << 10));
    assert!(
        limited.statements <= free.statements + 2 * 500 + 30,
        "{limited:?} {free:?}"
    );
    assert!(
        limited.pushed_bytes < free.pushed_bytes + 40,
        "{limited:?} {free:?}"
    );
}

/// A loop making an array of its argument's length in each iteration and
/// recording it (`temporary` of tests/checkpoint/made.irad): the plan's
/// estimate counts such an array as its reference (48 bytes per
/// iteration), so stretches sized from it alone would hold 682 iterations
/// of two 1 000-element arrays (11 MB) under a 64K limit. Sized on entry
/// by the argument's length, the tapes hold at most the limit, the arrays'
/// elements counted, against 32 MB without a limit.
#[test]
fn a_loop_making_arrays_keeps_their_elements_under_the_limit() {
    let src =
        irad::read_source(&manifest_dir().join("tests/checkpoint/made.irad")).expect("readable");
    let m = irad::load_normalised(&src).expect("loads");
    let f = m.by_name("temporary").expect("the function");
    let xs: Vec<String> = (0..1000)
        .map(|i| format!("{}", f64::from(i) * 1e-3))
        .collect();
    let mut args = irad::parse_args(
        &Source::new("<args>", format!("[{}], 2000", xs.join(", "))),
        &m,
        f,
    )
    .expect("args");
    // The forward sweep also takes the argument's shadow.
    args.push(Val::f64_array(vec![0.0; 1000]));
    let free = counts(&m, f, &args, None);
    let limited = counts(&m, f, &args, Some(64 << 10));
    assert!(free.peak_held_bytes > 30_000_000, "{free:?}");
    assert!(
        limited.peak_held_bytes <= 64 << 10,
        "{limited:?} under a 64K limit"
    );
    // Stretches of two iterations: each runs forward twice, about.
    assert!(
        limited.statements < free.statements * 3,
        "{limited:?} {free:?}"
    );
}

/// A loop writing an array in place over a loop inside it as long as the
/// array (`in_place` of tests/checkpoint/inner.irad): the static estimate
/// takes the inner loop to run 16 times per iteration (392 bytes), so under
/// a 256K limit the outer stretch would hold all 64 iterations, each with
/// the inner loop's snapshot of the 2 000-element array. Counting the inner
/// loop's trips on entry (as long as the array) and its snapshots shortens
/// the outer stretch to a few iterations, and the tapes stay under the
/// limit, the arrays' elements counted, against 3 MB without a limit.
#[test]
fn loops_inside_a_loop_count_their_trips_on_entry() {
    let src =
        irad::read_source(&manifest_dir().join("tests/checkpoint/inner.irad")).expect("readable");
    let m = irad::load_normalised(&src).expect("loads");
    let f = m.by_name("in_place").expect("the function");
    let limit = 256 << 10;
    let plan = tape_plan_limited(&m, &Registry::new(), f, Some(limit))
        .expect("plan")
        .to_string();
    assert!(
        plan.contains("checkpointed every 334 iterations at most"),
        "{plan}"
    );
    let xs: Vec<f64> = (0..2000).map(|i| f64::from(i) * 1e-3).collect();
    let mut args = vec![
        Val::f64_array(xs),
        Val::F64(0.9),
        Val::I64(64),
        Val::f64_array(vec![0.0; 2000]),
    ];
    let free = counts(&m, f, &args, None);
    let limited = counts(&m, f, &args, Some(limit));
    assert!(free.peak_held_bytes > 3_000_000, "{free:?}");
    assert!(
        limited.peak_held_bytes <= limit,
        "{limited:?} under a 256K limit"
    );
    // A `while` loop writing one element (`few_writes`): few records, but
    // each of its runs keeps a snapshot of the 2 000-element array (16 KB),
    // which the outer stretch counts too; counting its records alone, one
    // stretch would hold all 64 iterations and their snapshots.
    let f = m.by_name("few_writes").expect("the function");
    args.remove(1);
    let limited = counts(&m, f, &args, Some(limit));
    assert!(
        limited.peak_held_bytes <= limit,
        "{limited:?} under a 256K limit"
    );
}

/// Runs `func` of tests/checkpoint/`file` on `args` in the interpreter
/// without a limit and under `limit`, after checking that its plan under
/// that limit says each of `says`; returns what the interpreter counts for
/// each run.
fn free_and_limited(
    (file, func): (&str, &str),
    limit: u64,
    says: &[&str],
    args: &[Val],
) -> (InterpStats, InterpStats) {
    let path = manifest_dir().join("tests/checkpoint").join(file);
    let src = irad::read_source(&path).expect("readable");
    let m = irad::load_normalised(&src).expect("loads");
    let f = m.by_name(func).expect("the function");
    let plan = tape_plan_limited(&m, &Registry::new(), f, Some(limit))
        .expect("plan")
        .to_string();
    for s in says {
        assert!(plan.contains(s), "{s}: {plan}");
    }
    (counts(&m, f, args, None), counts(&m, f, args, Some(limit)))
}

/// An array of `n` elements `i * step` and its shadow, `n` zeros.
fn ramp(n: i32, step: f64) -> (Val, Val) {
    let xs: Vec<f64> = (0..n).map(|i| f64::from(i) * step).collect();
    let zeros = vec![0.0; xs.len()];
    (Val::f64_array(xs), Val::f64_array(zeros))
}

/// A double buffer whose inner loop runs over the length of one of its
/// buffers (`buffers` of tests/checkpoint/inner.irad): no input gives that
/// length, but the buffers are the arrays the header phis enter with, so
/// the forward sweep counts the trips from them and each snapshot pushes
/// the stretch for the replay. Without that, one stretch held all 64
/// iterations, each with the inner loop's records and snapshot (the tapes
/// then held as much as without a limit). The tapes' bytes stay under the
/// limit; counting the elements of every array each time it is on a tape,
/// they stay under twice the limit: each iteration of a stretch pushes the
/// same two buffers and their shadows for the inner loop's pullback (16 KB
/// each by that count, 8 bytes each in compiled code), and each of the
/// outer loop's snapshots, a logarithm of them, holds the buffers, their
/// copies and their shadows (96 KB).
#[test]
fn a_double_buffer_counts_its_inner_trips_from_the_buffers() {
    let limit = 2 << 20;
    let (xs, dx) = ramp(2000, 1e-3);
    let (free, limited) = free_and_limited(
        ("inner.irad", "buffers"),
        limit,
        &[
            "iterations at most",
            "the stretch (computed from the length of",
        ],
        &[xs, Val::I64(64), Val::F64(0.9), dx],
    );
    held_within(&free, &limited, limit);
}

/// A time loop over a grid, rows then the columns of each row (`grid` of
/// tests/checkpoint/grid.irad): the time loop counts the rows' trips and,
/// inside them, the columns', and since it counts all of them the row and
/// column loops, checkpointed inside its replay, record their runs
/// directly up to their own stretches. Counting the columns as 16 trips
/// and recording at most 16 directly, each run of the columns was
/// checkpointed and copied the whole grid into its snapshot: the tapes
/// stayed bounded, but the statements run were several times those
/// without a limit.
#[test]
fn loops_inside_inner_loops_count_their_trips_and_record_directly() {
    let limit = 256 << 10;
    let (xs, dx) = ramp(4000, 1e-4);
    let (free, limited) = free_and_limited(
        ("grid.irad", "grid"),
        limit,
        &[
            "loop #6 (inside loop #4)",
            "a run of at most 5461 iterations is recorded as without a limit",
        ],
        &[xs, Val::I64(16), Val::I64(20), Val::F64(0.9), dx],
    );
    assert!(free.peak_held_bytes > 4 * limit, "{free:?}");
    assert!(
        limited.peak_held_bytes <= limit,
        "{limited:?} under a 256K limit"
    );
    assert!(
        limited.statements < free.statements * 3,
        "{limited:?} {free:?}"
    );
}

/// A scratch array made in each iteration, `zeros(n)` (`scratch_only` of
/// tests/checkpoint/lengths.irad): the loop has no array input, so before
/// it kept its static stretch (hundreds of iterations for the few scalars
/// it records) and held every scratch array of it. It now counts each at
/// the length `n` gives on entry.
#[test]
fn a_scratch_array_counts_at_the_length_its_argument_gives() {
    let limit = 64 << 10;
    let (free, limited) = free_and_limited(
        ("lengths.irad", "scratch_only"),
        limit,
        &["8 per element of the 2 arrays of known length an iteration makes"],
        &[Val::I64(1000), Val::I64(2000), Val::F64(0.3)],
    );
    assert!(free.peak_held_bytes > 100 * limit, "{free:?}");
    assert!(
        limited.peak_held_bytes <= limit,
        "{limited:?} under a 64K limit"
    );
}

/// A simulation whose state a step function remakes (`simulate` of
/// tests/checkpoint/by_calls.irad): the step loops over the array, so one
/// call records in proportion to its length, where the static estimate
/// counts a call as 64 bytes whatever it records (stretches of 1 024
/// iterations under a 128K limit, the whole run of 200 here). Counting
/// the call's statements per element of the array the loop enters with,
/// the stretches shorten on entry (to one iteration) and the tapes stay
/// under the limit, against 5 MB without a limit; counting the elements of
/// every array on a tape, under twice the limit: the binomial schedule's
/// snapshots (5 for 200 stretches) each hold the array and its copy,
/// outside the limit (docs/reverse.md, "Binomial schedule"). Likewise a
/// step writing the array in place and handing it back (`relax`), which
/// was not checkpointed at all before.
#[test]
fn a_step_function_s_records_count_per_element_of_the_array() {
    let limit = 128 << 10;
    let (xs, dx) = ramp(1000, 1e-3);
    let (free, limited) = free_and_limited(
        ("by_calls.irad", "simulate"),
        limit,
        &[
            "iterations at most",
            "(all of them what its calls are taken to record)",
        ],
        &[xs, Val::I64(200), dx],
    );
    held_within(&free, &limited, limit);
    assert!(
        limited.statements < free.statements * 3,
        "{limited:?} {free:?}"
    );
    // The same step written in place and handed back (`relax`): the loop
    // keeps its array, and takes the length from the array it enters with.
    let (xs, dx) = ramp(1000, 1e-3);
    let (free, limited) = free_and_limited(
        ("by_calls.irad", "relax"),
        limit,
        &["iterations at most", "reads from or enters with"],
        &[xs, Val::I64(200), dx],
    );
    held_within(&free, &limited, limit);
}

/// An iterative solver carrying the array it remakes, which returns when
/// it diverges and breaks when it settles, reading the array after the
/// loop (`settle` of tests/checkpoint/joined.irad): the `break` and the
/// header's exit meet after the loop, the `return` elsewhere, so the block
/// after the loop merges their shadows by phis. It was recorded in full
/// under any limit before session 27 (`three_ways` of refused.irad). Over
/// 1 000 elements for 200 iterations the tapes stay within a 128K limit,
/// and the held bytes (every array on a tape counted) within twice it.
#[test]
fn a_solver_that_returns_or_breaks_reads_its_array_after_the_loop() {
    let limit = 128 << 10;
    let (xs, dx) = ramp(1000, 1e-3);
    let (free, limited) = free_and_limited(
        ("joined.irad", "settle"),
        limit,
        &[
            "loop #2: checkpointed",
            "that several exit blocks jump to merges theirs by phis",
        ],
        &[xs, Val::F64(0.01), Val::I64(200), dx],
    );
    held_within(&free, &limited, limit);
    assert!(
        limited.statements < free.statements * 3,
        "{limited:?} {free:?}"
    );
}

/// Checks that the run without a limit, `free`, held more than 4 MB on its
/// tapes, and the run under `limit`, `limited`, at most the limit on its
/// tapes and twice it counting every array on a tape.
fn held_within(free: &InterpStats, limited: &InterpStats, limit: u64) {
    assert!(free.peak_held_bytes > 4_000_000, "{free:?}");
    assert!(
        limited.peak_tape_bytes <= limit && limited.peak_held_bytes <= 2 * limit,
        "{limited:?} under a {limit}-byte limit"
    );
}

/// Checks a run under a 256K limit, `limited`, against the run without,
/// `free`: the tapes hold more than 4 times the limit without it, at most
/// the limit with it (at most twice, counting the outer loop's snapshots),
/// and the run with it takes fewer than `most` times the statements.
fn within_256k(free: &InterpStats, limited: &InterpStats, most: f64) {
    let limit = 256 << 10;
    assert!(free.peak_held_bytes > 4 * limit, "{free:?}");
    assert!(
        limited.peak_tape_bytes <= limit,
        "{limited:?} under a 256K limit"
    );
    assert!(
        limited.peak_held_bytes <= 2 * limit,
        "{limited:?} under a 256K limit"
    );
    assert!(
        (limited.statements as f64) < free.statements as f64 * most,
        "{limited:?} {free:?}"
    );
}

/// Rows made in an inner loop, each as long as a row (`inner_rows` of
/// tests/checkpoint/lengths.irad: `zeros(cols)`, `cols = len(x) / rows`):
/// the loops count each at the length `cols` gives on entry. Taken as long
/// as the whole grid, as before, the row loop's stretches were of one
/// iteration, and the run under the limit ran 4.6 times the statements of
/// the run without (3.1 now, the time loop and the row loop each replaying
/// their stretches). What the tapes hold also counts the time loop's
/// snapshots, each a copy of the grid, which the limit does not bound.
#[test]
fn arrays_of_known_length_count_at_their_length() {
    let (xs, dx) = ramp(4000, 1e-4);
    let (free, limited) = free_and_limited(
        ("lengths.irad", "inner_rows"),
        256 << 10,
        &["8 per element of the 3 arrays of known length an iteration makes"],
        &[xs, Val::I64(16), Val::I64(1000), dx],
    );
    within_256k(&free, &limited, 4.0);
}

/// Rows of growing length inside a time loop (`tri` of
/// tests/checkpoint/counters.irad: `for c in 0..r * cols / rows + 1`, `r`
/// the row loop's counter): the time loop counts the columns' trips at the
/// ends of the row counter's range. Taken as 16, each run of the columns
/// longer than that was checkpointed and copied the grid into its
/// snapshots: 704 KB held under a 256K limit, and 4.4 times the statements
/// of the run without a limit (now 480 KB and 3.1 times). What the tapes
/// hold also counts the time loop's own snapshots, each a copy of the
/// 64 KB grid, which the limit does not bound.
#[test]
fn a_bound_reading_the_counter_of_a_loop_between_counts_its_trips() {
    let (xs, dx) = ramp(8000, 1e-4);
    let (free, limited) = free_and_limited(
        ("counters.irad", "tri"),
        256 << 10,
        &["at the ends of the ranges of the counters they read"],
        &[xs, Val::I64(32), Val::I64(40), dx],
    );
    within_256k(&free, &limited, 3.5);
}

/// A countdown from an argument the loop reads only through its header phi
/// (`countdown` of tests/checkpoint/inner.irad, `while it > 0 { for i in
/// 0..it { ... } it = it - 1; }`): the forward sweep computes the stretch
/// from it on entry and pushes it with each snapshot, and the inner loop
/// counts its trips at either end of the countdown's range. Taken as 16,
/// each longer run of the inner loop was checkpointed and copied the array
/// into its snapshots: 576 KB held under a 256K limit, and 3.4 times the
/// statements of the run without a limit (now 320 KB and 2.2 times). What
/// the tapes hold also counts the countdown's own snapshots, each a copy of
/// the 64 KB array, which the limit does not bound.
#[test]
fn a_countdown_from_a_value_before_the_loop_counts_its_inner_trips() {
    let (xs, dx) = ramp(8000, 1e-4);
    let (free, limited) = free_and_limited(
        ("inner.irad", "countdown"),
        256 << 10,
        &["the stretch (computed from 1 value it enters with, which its replay lacks)"],
        &[xs, Val::I64(300), dx],
    );
    within_256k(&free, &limited, 3.0);
}

/// The plan of `f` under a 1-byte limit must say `says` (which scheme
/// thins its loop's snapshots, and more); returns what the interpreter counts for `args(2^8)` and
/// `args(2^14)` under that limit, and for `args(2^14)` without one, after
/// checking that the long run under the limit runs fewer than 16 times the
/// statements of the run without.
fn thinned_runs(
    m: &Module,
    f: FuncId,
    says: &[&str],
    args: impl Fn(i64) -> Vec<Val>,
) -> (InterpStats, InterpStats, InterpStats) {
    let plan = tape_plan_limited(m, &Registry::new(), f, Some(1))
        .expect("plan")
        .to_string();
    for s in says {
        assert!(plan.contains(s), "{s}: {plan}");
    }
    let long = args(1 << 14);
    let (small, large, free) = (
        counts(m, f, &args(1 << 8), Some(1)),
        counts(m, f, &long, Some(1)),
        counts(m, f, &long, None),
    );
    // Each iteration: one forward run without recording, at most 14 in
    // splits, one recording; the reverse as without a limit.
    assert!(
        large.statements < free.statements * 16,
        "{large:?} {free:?}"
    );
    (small, large, free)
}

/// Thinned snapshots (docs/reverse.md, "Bounded snapshots", "Binomial
/// schedule"): under a 1-byte limit every Lotka-Volterra step is a stretch,
/// and a snapshot takes 41 bytes (the flag, the stretch's index, its slots,
/// the step counter and the two populations). The two-level schedule kept
/// one per step (540 KB at 2^14 steps); by the binomial schedule (the trip
/// count is known on entry) the tapes hold at most `2 + log2(T) / 2` of
/// them besides one stretch's records and the loop's inputs, so 64 times
/// the steps adds at most 3 snapshots to the peak.
#[test]
fn thinned_snapshots_grow_with_the_logarithm_of_the_run() {
    let src = irad::read_source(&manifest_dir().join("benches/programs/lotka_volterra_steps.irad"))
        .expect("readable");
    let m = irad::load_normalised(&src).expect("loads");
    let f = m.by_name("lotka_volterra_steps").expect("the function");
    let (small, large, free) =
        thinned_runs(&m, f, &["snapshots placed by the binomial schedule"], |n| {
            irad::parse_args(
                &Source::new("<args>", format!("1.5, 1.0, 3.0, 1.0, {n}")),
                &m,
                f,
            )
            .expect("args")
        });
    assert!(
        large.peak_tape_bytes <= small.peak_tape_bytes + 3 * 41,
        "{small:?} {large:?}"
    );
    assert!(large.peak_tape_bytes < 2_000, "{large:?}");
    assert!(free.peak_tape_bytes > 500_000, "{free:?}");
}

/// A loop of several exits thins its snapshots too (docs/reverse.md,
/// "Bounded snapshots"): under a 1-byte limit every iteration of this loop,
/// left by a `break` at its bottom or by one in its middle, is a stretch,
/// and a snapshot takes 25 bytes (the flag, the stretch's index, `s` and
/// `k`). The two-level schedule kept one per iteration (400 KB at 2^14);
/// thinned, 64 times the iterations adds at most 7 snapshots to the peak,
/// whichever exit the run takes, and each iteration runs forward at most
/// `2 + log2 T` times.
#[test]
fn a_loop_of_several_exits_holds_a_logarithm_of_its_snapshots() {
    let src = Source::new(
        "exits.irad",
        "fn w(x: f64, n: i64, t: f64) -> f64 {\n    let mut s = x;\n    let mut k = 0;\n    while true {\n        s = s + 0.001 + 0.0001 * sin(s + f64(k) * 0.001);\n        if s > t {\n            break;\n        }\n        k = k + 1;\n        if k >= n {\n            break;\n        }\n    }\n    s * s\n}\n",
    );
    let m = irad::load_normalised(&src).expect("loads");
    let f = m.by_name("w").expect("the function");
    // The bottom exit (the bound), then the middle one (`s` passes 12 after
    // about 11 700 iterations of the long run).
    for t in [100.0, 12.0] {
        let (small, large, free) = thinned_runs(
            &m,
            f,
            &["snapshots thinned online", "it leaves through 2 edges"],
            |n| {
                irad::parse_args(&Source::new("<args>", format!("0.3, {n}, {t:?}")), &m, f)
                    .expect("args")
            },
        );
        assert!(
            large.peak_tape_bytes <= small.peak_tape_bytes + 7 * 25,
            "{t}: {small:?} {large:?}"
        );
        assert!(large.peak_tape_bytes < 2_000, "{t}: {large:?}");
        assert!(free.peak_tape_bytes > 50_000, "{t}: {free:?}");
    }
}

/// Loops carrying arrays through their header thin their snapshots too
/// (docs/reverse.md, "Bounded snapshots", "Binomial schedule"): an array
/// made afresh every iteration, and a double buffer swapped every
/// iteration. Under a 1-byte limit every iteration is a stretch whose
/// snapshot copies the arrays; the two-level schedule kept one per
/// iteration, by the binomial schedule the peak grows by a few snapshots
/// from 2^8 to 2^14 iterations, and stays far below the tape without a
/// limit.
#[test]
fn loops_carrying_arrays_hold_a_logarithm_of_their_snapshots() {
    let src = Source::new(
        "carried.irad",
        "fn fresh(x: [f64], n: i64) -> f64 {\n    let mut a = copy(x);\n    for i in 0..n {\n        let b = copy(a);\n        b[0] = b[0] * 0.5 + sin(a[1]);\n        a = b;\n    }\n    a[0]\n}\nfn buffers(x: [f64], n: i64) -> f64 {\n    let mut a = copy(x);\n    let mut b = zeros(2);\n    for i in 0..n {\n        b[0] = a[0] * 0.5 + sin(a[1]);\n        b[1] = a[1] * 0.5 + sin(a[0]);\n        let t = a;\n        a = b;\n        b = t;\n    }\n    a[0] * b[1]\n}\n",
    );
    let m = irad::load_normalised(&src).expect("loads");
    for name in ["fresh", "buffers"] {
        let f = m.by_name(name).expect("the function");
        // The arguments, then the shadow of `x` the forward sweep takes.
        let says = [
            "snapshots placed by the binomial schedule",
            "carried from one iteration",
        ];
        let (small, large, free) = thinned_runs(&m, f, &says, |n| {
            let mut a = irad::parse_args(&Source::new("<args>", format!("[0.3, 0.7], {n}")), &m, f)
                .expect("args");
            a.push(Val::Array(ArrayRef::new(ArrayData::F64(vec![0.0; 2]))));
            a
        });
        assert!(
            large.peak_tape_bytes * 10 < free.peak_tape_bytes,
            "{name}: {large:?} {free:?}"
        );
        assert!(
            large.peak_tape_bytes < small.peak_tape_bytes * 2,
            "{name}: {small:?} {large:?}"
        );
    }
}

/// Nested loops (docs/reverse.md, "Nested loops"): under any limit, an
/// inner loop whose trip count is not a small constant is checkpointed too,
/// inside the outer loop's replay, so the tapes of a long inner run stay far
/// below what recording it in full takes, also when one outer iteration fits
/// the limit by the plan's estimate (which counts the inner loop 16 times);
/// a run of at most the inner stretch is recorded directly (the outer loop
/// counts the inner trips on entry, so its stretch holds such runs). The
/// gradient is the same bit for bit in both backends either way.
#[test]
fn an_inner_loop_is_checkpointed_when_its_trip_count_is_not_a_small_constant() {
    let src = Source::new(
        "nest.irad",
        "fn nest(x: f64, n: i64, m: i64) -> f64 {\n    let mut s = x;\n    for i in 0..n {\n        let mut t = s * 0.5;\n        for j in 0..m {\n            t = sin(t) + 0.1 * f64(j) * s;\n        }\n        s = s + 0.25 * t * t / (1.0 + f64(i));\n    }\n    s\n}\n",
    );
    let m = irad::load_normalised(&src).expect("loads");
    let f = m.by_name("nest").expect("@nest");
    let plan = |limit: u64| {
        tape_plan_limited(&m, &Registry::new(), f, Some(limit))
            .expect("plan")
            .to_string()
    };
    // About 160 bytes per outer iteration by the estimate (the inner loop's
    // 8 bytes counted 16 times): 1K holds 3 outer iterations, 256 not one.
    let roomy = plan(1 << 10);
    assert!(
        roomy.contains("loop #2: checkpointed every 3 iterations")
            && roomy.contains(
                "loop #4: checkpointed every 64 iterations (tape limit 1K, about 8 bytes per iteration), inside loop #2's replay"
            )
            && roomy.contains("a run of at most 64 iterations is recorded as without a limit")
            && !roomy.contains("loop #2: not")
            && !roomy.contains("loop #4: not"),
        "{roomy}"
    );
    let tight = plan(256);
    assert!(
        tight.contains("loop #2: checkpointed every 1 iteration")
            && tight.contains(
                "loop #4: checkpointed every 16 iterations (tape limit 256, about 8 bytes per iteration), inside loop #2's replay"
            ),
        "{tight}"
    );
    let args = irad::parse_args(&Source::new("<args>", "0.7, 3, 20000"), &m, f).expect("args");
    let free = counts(&m, f, &args, None);
    let roomy = counts(&m, f, &args, Some(1 << 10));
    let tight = counts(&m, f, &args, Some(256));
    // 60 000 inner iterations of 8 bytes without nesting; with it, 1 250
    // snapshots of 17 bytes per outer iteration and one inner stretch at
    // 256 bytes, 313 snapshots and one stretch at 1K.
    assert!(free.peak_tape_bytes > 400_000, "{free:?}");
    assert!(roomy.peak_tape_bytes < 20_000, "{roomy:?}");
    assert!(tight.peak_tape_bytes < 40_000, "{tight:?}");
    // Runs of 10 inner iterations are recorded directly in the outer
    // replay: each inner iteration runs twice forward (the forward sweep,
    // the outer replay), not three times, and the tape holds their records
    // plus a flag per run.
    let args = irad::parse_args(&Source::new("<args>", "0.7, 30, 10"), &m, f).expect("args");
    let free = counts(&m, f, &args, None);
    let roomy = counts(&m, f, &args, Some(1 << 10));
    assert!(
        roomy.statements < free.statements * 5 / 2,
        "{roomy:?} {free:?}"
    );
    assert!(roomy.peak_tape_bytes <= 1 << 10, "{roomy:?}");
    same_under_limits(&src, "nest", "0.7, 3, 2000", &[256, 1 << 10, 1 << 20]);
}

/// Loops at every level of a nest (docs/reverse.md, "Nested loops"): the
/// innermost of three loops, with a long run, is checkpointed inside the
/// replay of the middle one, itself checkpointed inside the outer one's; so
/// the tapes stay within the limit, where recording the innermost run in
/// full (as when only one level was nested) kept 20 000 iterations of it
/// under any limit. The gradient is the same bit for bit in both backends.
#[test]
fn the_innermost_of_three_loops_is_checkpointed_too() {
    let text = "fn nest3(x: f64, n: i64, p: i64) -> f64 {\n    let mut s = x;\n    for i in 0..n {\n        let mut t = s * 0.5;\n        for j in 0..n {\n            let mut u = t + s;\n            for k in 0..p {\n                u = sin(u) + 0.1 * f64(k) * t;\n            }\n            t = t + 0.25 * u / (1.0 + f64(j));\n        }\n        s = s + t * t * 0.1;\n    }\n    s\n}\n";
    let src = Source::new("nest3.irad", text);
    let m = irad::load_normalised(&src).expect("loads");
    let f = m.by_name("nest3").expect("@nest3");
    let plan = tape_plan_limited(&m, &Registry::new(), f, Some(4 << 10))
        .expect("plan")
        .to_string();
    assert!(
        plan.contains("loop #2: checkpointed")
            && plan.contains("loop #4: checkpointed")
            && plan.contains("inside loop #2's replay")
            && plan.contains("loop #6: checkpointed")
            && plan.contains("inside loop #4's replay")
            && !plan.contains(": not checkpointed"),
        "{plan}"
    );
    let args = irad::parse_args(&Source::new("<args>", "0.7, 2, 20000"), &m, f).expect("args");
    let free = counts(&m, f, &args, None);
    let limited = counts(&m, f, &args, Some(4 << 10));
    // 80 000 innermost iterations of 8 bytes or more without a limit.
    assert!(free.peak_tape_bytes > 600_000, "{free:?}");
    assert!(limited.peak_tape_bytes <= 4 << 10, "{limited:?}");
    same_under_limits(&src, "nest3", "0.7, 3, 500", &[64, 1 << 10, 1 << 20]);
}

/// A loop holding checkpointed loops keeps its direct path (docs/reverse.md,
/// "Nested loops"): when its run and every inner run are short (the inner
/// trip counts known on entry), the forward sweep records the whole nest
/// directly, the inner loops as their own direct paths would, and nothing
/// is replayed; when an inner run is long, the outer loop is checkpointed
/// and the long inner run inside its replay, within the limit. The
/// gradient is the same bit for bit either way, in both backends.
#[test]
fn a_loop_holding_checkpointed_loops_keeps_its_direct_path() {
    let text = "fn mix(x: [f64], n: i64, d: i64) -> f64 {\n    let mut s = 0.0;\n    for i in 0..n {\n        let mut t = s;\n        for c in 0..n {\n            let mut u = t * 0.5;\n            for j in 0..d {\n                u = u + sin(x[j % len(x)] + u * 0.1);\n            }\n            t = t + 0.1 * u;\n        }\n        s = s + tanh(t);\n    }\n    s\n}\n";
    let src = Source::new("mix.irad", text);
    let m = irad::load_normalised(&src).expect("loads");
    let f = m.by_name("mix").expect("@mix");
    let plan = tape_plan_limited(&m, &Registry::new(), f, Some(1 << 20))
        .expect("plan")
        .to_string();
    for (l, within) in [("#2", None), ("#4", Some("#2")), ("#6", Some("#4"))] {
        let line = plan
            .lines()
            .find(|s| s.contains(&format!("loop {l}: checkpointed")))
            .unwrap_or_else(|| panic!("loop {l}: {plan}"));
        assert!(line.contains("is recorded as without a limit"), "{line}");
        if l == "#2" {
            assert!(line.contains("(with loops #4, #6 inside it,"), "{line}");
        }
        if let Some(o) = within {
            assert!(
                line.contains(&format!("inside loop {o}'s replay")),
                "{line}"
            );
        }
    }
    // The forward sweep also takes the array argument's shadow.
    let with_shadow = |text: &str| {
        let mut args = irad::parse_args(&Source::new("<args>", text), &m, f).expect("args");
        args.push(Val::f64_array(vec![0.0; 3]));
        args
    };
    let short = with_shadow("[0.5, -0.3, 0.8], 4, 8");
    let free = counts(&m, f, &short, None);
    let limited = counts(&m, f, &short, Some(1 << 20));
    // Recorded directly: each iteration runs once (a replay would run the
    // innermost iterations twice more), with a test, flags and counts per
    // inner run (about 1.14x here, with inner runs of 8 one-line iterations).
    assert!(
        limited.statements < free.statements * 5 / 4,
        "{limited:?} {free:?}"
    );
    let long = with_shadow("[0.5, -0.3, 0.8], 2, 30000");
    let free = counts(&m, f, &long, None);
    let limited = counts(&m, f, &long, Some(4 << 10));
    assert!(free.peak_tape_bytes > 500_000, "{free:?}");
    assert!(limited.peak_tape_bytes <= 4 << 10, "{limited:?}");
    for args in [
        "[0.5, -0.3, 0.8], 4, 8",
        "[0.5, -0.3, 0.8], 3, 40",
        "[0.2], 20, 2",
    ] {
        same_under_limits(&src, "mix", args, &[64, 1 << 10, 1 << 20]);
    }
}

/// The budget rule for nested loops under a roomy limit (docs/reverse.md,
/// "Nested loops"): an inner `while` loop, whose trip count is not known on
/// entry, is checkpointed inside the outer loop's replay (without a direct
/// path), and the tape of a long run of it stays small; a constant inner
/// loop of 8 iterations is not, and the outer loop around only it keeps its
/// direct path. Gradients bit for bit against no limit, both backends.
#[test]
fn the_budget_rule_sees_inner_loops_whose_trip_count_is_not_a_small_constant() {
    let src = Source::new(
        "nest.irad",
        "fn w(x: f64, n: i64, m: i64) -> f64 {\n    let mut s = x;\n    for i in 0..n {\n        let mut t = s * 0.5;\n        let mut r = f64(m);\n        while r > 0.5 {\n            t = cos(t) * 0.9 + 0.05 * r * s;\n            r = r - 1.0;\n        }\n        s = s + 0.25 * t;\n    }\n    s\n}\nfn c(x: f64, n: i64) -> f64 {\n    let mut s = x;\n    for i in 0..n {\n        let mut t = s;\n        for k in 0..8 {\n            t = t + sin(t * f64(k));\n        }\n        s = s * 0.5 + 0.1 * t;\n    }\n    s\n}\n",
    );
    let m = irad::load_normalised(&src).expect("loads");
    let plan = |name: &str| {
        let f = m.by_name(name).expect("function");
        tape_plan_limited(&m, &Registry::new(), f, Some(64 << 10))
            .expect("plan")
            .to_string()
    };
    let w = plan("w");
    assert!(
        w.contains("loop #4: checkpointed every ")
            && w.contains("inside loop #2's replay")
            && !w.contains("is recorded as without a limit"),
        "{w}"
    );
    let c = plan("c");
    assert!(
        c.contains("loop #4: not checkpointed: it is inside loop #2, which is checkpointed")
            && c.contains("is recorded as without a limit"),
        "{c}"
    );
    let f = m.by_name("w").expect("@w");
    let args = irad::parse_args(&Source::new("<args>", "0.7, 4, 50000"), &m, f).expect("args");
    let free = counts(&m, f, &args, None);
    let limited = counts(&m, f, &args, Some(64 << 10));
    assert!(free.peak_tape_bytes > 1_000_000, "{free:?}");
    assert!(limited.peak_tape_bytes <= 64 << 10, "{limited:?}");
    let loaded = irad::load(&src).expect("loads");
    for (name, text) in [("w", "0.7, 4, 3000"), ("w", "0.2, 3, 2"), ("c", "0.4, 5")] {
        let g = loaded.by_name(name).expect("function");
        let args = irad::parse_args(&Source::new("<args>", text), &loaded, g).expect("args");
        let reference = grad(&src, &loaded, g, &args, Backend::Interp, None).expect("gradient");
        for backend in [Backend::Interp, Backend::Jit] {
            for limit in [1 << 10, 64 << 10] {
                let got = grad(&src, &loaded, g, &args, backend, Some(limit)).expect("gradient");
                assert!(
                    same_gradient(&got, &reference),
                    "@{name}({text}) {backend:?} under {limit}: {:?} {:?}, without a limit {:?} {:?}",
                    got.value,
                    got.gradient,
                    reference.value,
                    reference.gradient
                );
            }
        }
    }
}

/// The binomial schedule (docs/reverse.md, "Binomial schedule"): a counted
/// loop whose trip count is known on entry places its snapshots by the
/// binomial schedule; the same loop with a bound that may change in the
/// loop (never here) keeps a binary counter. Where the limit has room for
/// more snapshots than the binary counter holds, the binomial schedule
/// fills it (at most half the limit) and runs each iteration forward fewer
/// times: 0.57 and 0.49 times the statements here. Under a 1-byte limit
/// (every iteration a stretch, far too little room) it holds fewer
/// snapshots than the binary counter at its peak (322 bytes against 480)
/// for 0.92 times the statements (the search for each split costs about as
/// much as a one-iteration stretch).
#[test]
fn a_loop_of_known_trip_count_follows_the_binomial_schedule() {
    let text = "fn counted(x: f64, n: i64) -> f64 {\n    let mut s = x;\n    for i in 0..n {\n        s = s + 0.01 * sin(s + 0.01 * f64(i));\n    }\n    s\n}\nfn unknown(x: f64, n: i64) -> f64 {\n    let mut s = x;\n    let mut i = 0;\n    let mut m = n;\n    while i < m {\n        s = s + 0.01 * sin(s + 0.01 * f64(i));\n        i = i + 1;\n        if s > 1000.0 {\n            m = i;\n        }\n    }\n    s\n}\n";
    let src = Source::new("binomial.irad", text);
    let m = irad::load_normalised(&src).expect("loads");
    let f = |name: &str| m.by_name(name).expect("the function");
    let says = |name: &str, what: &str| {
        let plan = tape_plan_limited(&m, &Registry::new(), f(name), Some(1000))
            .expect("plan")
            .to_string();
        assert!(plan.contains(what), "{name}: {plan}");
    };
    says(
        "counted",
        "snapshots placed by the binomial schedule of the stretches left (its trip count is known on entry): at most 15 (what half the limit holds)",
    );
    says("unknown", "snapshots thinned online (a binary counter");
    let run = |name: &str, n: i64, limit: Option<u64>| {
        let args = irad::parse_args(&Source::new("<args>", format!("0.3, {n}")), &m, f(name))
            .expect("args");
        counts(&m, f(name), &args, limit)
    };
    for (n, limit, most) in [(1 << 14, 1000, 0.65), (1 << 16, 4000, 0.55)] {
        let (binomial, binary) = (
            run("counted", n, Some(limit)),
            run("unknown", n, Some(limit)),
        );
        assert!(
            (binomial.statements as f64) < binary.statements as f64 * most,
            "{n}: {binomial:?} {binary:?}"
        );
        assert!(binomial.peak_tape_bytes <= limit, "{n}: {binomial:?}");
    }
    let (binomial, binary) = (
        run("counted", 1 << 14, Some(1)),
        run("unknown", 1 << 14, Some(1)),
    );
    assert!(
        binomial.peak_tape_bytes < binary.peak_tape_bytes,
        "{binomial:?} {binary:?}"
    );
    assert!(
        binomial.statements < binary.statements,
        "{binomial:?} {binary:?}"
    );
    for name in ["counted", "unknown"] {
        same_under_limits(&src, name, "0.3, 700", &[1, 64, 1 << 10, 1 << 20]);
    }
}
