//! Sparse forward mode (`GradOptions::lanes` = `Lanes::Sparse`) against
//! reverse mode, on both backends:
//!
//! - every program of the reference corpus (`tests/corpus`, surface and IR
//!   twin) and every case: the sparse gradient within 1e-9 (relative, floor
//!   1e-9) of reverse mode's, the same value as the primal, with the
//!   interpreter and with the JIT, whose sparse gradients are equal bit for
//!   bit;
//! - every `run:` line of every file that calls a bulk array primitive
//!   (`tests/filetests`, `examples`), and a table of IR programs exercising
//!   each bulk primitive and `gemm` (the pullbacks' own, which forward over
//!   reverse meets): the same checks, against dense forward mode where
//!   reverse mode has no rule (`gemm`); the run lines also with each
//!   argument differentiated on its own (`wrt`).
//!
//! The counts are bounded below so that losing the corpus or the bulk files
//! fails the test.

use irad::ir::interp::{ArrayData, Val};
use irad::ir::{FuncId, InstKind, Lanes, Module};
use irad::passes::forward::grad::{GradOptions, Gradient};
use irad::{Backend, Source};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Deep copies of `args` (the gradients must not see each other's writes).
fn copies(args: &[Val]) -> Vec<Val> {
    fn copy(v: &Val) -> Val {
        match v {
            Val::Array(a) => Val::Array(irad::ir::interp::ArrayRef::new(a.0.borrow().clone())),
            Val::Tuple(vs) => Val::Tuple(vs.iter().map(copy).collect()),
            other => other.clone(),
        }
    }
    args.iter().map(copy).collect()
}

/// Every f64 of a gradient, in order (`None` arguments as nothing).
fn flat(g: &Gradient) -> Vec<f64> {
    fn go(v: &Val, out: &mut Vec<f64>) {
        match v {
            Val::F64(x) => out.push(*x),
            Val::Tuple(vs) => vs.iter().for_each(|v| go(v, out)),
            Val::Array(a) => {
                if let ArrayData::F64(xs) = &*a.0.borrow() {
                    out.extend(xs);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for v in g.gradient.iter().flatten() {
        go(v, &mut out);
    }
    out
}

/// The gradient of `f` at `args` in `lanes` (reverse mode when `None`).
fn gradient(
    src: &Source,
    m: &Module,
    f: FuncId,
    args: &[Val],
    lanes: Option<Lanes>,
    backend: Backend,
    wrt: Option<&[usize]>,
) -> Result<Gradient, String> {
    let registry = irad::rules::Registry::new();
    let opts = GradOptions {
        exec: backend.exec(),
        lanes: lanes.unwrap_or(Lanes::ONE),
        wrt: wrt.map(<[usize]>::to_vec),
        ..GradOptions::default()
    };
    let fresh = copies(args);
    let res = match lanes {
        None => irad::grad_reverse(src, m, f, &fresh, &registry, &opts),
        Some(_) => irad::grad_forward(src, m, f, &fresh, &registry, &opts),
    };
    res.map(|(g, _)| g).map_err(|e| e.render(&[src]))
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    a.to_bits() == b.to_bits()
        || (a.is_nan() && b.is_nan())
        || (a - b).abs() <= tol * a.abs().max(1.0)
}

/// Sparse mode at one point on both backends against `reference` (reverse
/// mode, or dense forward mode when `dense_reference`): one pass, values
/// equal, gradients within 1e-9 of the reference and bit for bit equal
/// across backends. Returns the number of components compared, or the
/// failure.
fn check_point(
    what: &str,
    src: &Source,
    m: &Module,
    f: FuncId,
    args: &[Val],
    dense_reference: bool,
    wrt: Option<&[usize]>,
) -> Result<usize, String> {
    let reference_lanes = dense_reference.then_some(Lanes::ONE);
    let want = gradient(src, m, f, args, reference_lanes, Backend::Interp, wrt)
        .map_err(|e| format!("{what}: the reference gradient failed: {e}"))?;
    let mut backends = Vec::new();
    for backend in [Backend::Interp, Backend::Jit] {
        let g = gradient(src, m, f, args, Some(Lanes::Sparse), backend, wrt)
            .map_err(|e| format!("{what}: sparse mode ({backend:?}) failed: {e}"))?;
        if g.passes != 1 || !g.value.same(&want.value) {
            return Err(format!(
                "{what} ({backend:?}): {} passes, value {:?} (reference {:?})",
                g.passes, g.value, want.value
            ));
        }
        let which = |g: &Gradient| g.gradient.iter().map(Option::is_some).collect::<Vec<_>>();
        if which(&g) != which(&want) {
            return Err(format!(
                "{what} ({backend:?}): other arguments differentiated"
            ));
        }
        let (a, b) = (flat(&want), flat(&g));
        if a.len() != b.len() {
            return Err(format!(
                "{what} ({backend:?}): {} components, reference {}",
                b.len(),
                a.len()
            ));
        }
        for (k, (x, y)) in a.iter().zip(&b).enumerate() {
            if !close(*x, *y, 1e-9) {
                return Err(format!(
                    "{what} ({backend:?}): component {k}: reference {x:?}, sparse {y:?}"
                ));
            }
        }
        backends.push(b);
    }
    let same = backends[0].len() == backends[1].len()
        && backends[0]
            .iter()
            .zip(&backends[1])
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()));
    if !same {
        return Err(format!(
            "{what}: interpreter {:?}, JIT {:?}",
            backends[0], backends[1]
        ));
    }
    Ok(backends[0].len())
}

fn parse(src: &Source, m: &Module, f: FuncId, args: &str) -> Vec<Val> {
    let text = Source {
        name: "<args>".into(),
        text: args.into(),
    };
    irad::parse_args(&text, m, f).unwrap_or_else(|e| panic!("{}", e.render(&[src])))
}

#[test]
fn corpus_sparse_gradients_match_reverse_mode_on_both_backends() {
    let dir = root().join("tests/corpus");
    let mut jsons: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/corpus exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("json"))
        .collect();
    jsons.sort();
    let (mut cases, mut components, mut failures) = (0, 0, Vec::new());
    for json in jsons {
        let text = std::fs::read_to_string(&json).expect("readable corpus file");
        let reference: serde_json::Value = serde_json::from_str(&text).expect("corpus JSON parses");
        let name = reference["function"].as_str().expect("function named");
        for file in [reference["file"].as_str(), reference["ir_file"].as_str()]
            .into_iter()
            .flatten()
        {
            let src = irad::read_source(&dir.join(file)).expect("readable corpus program");
            let m = irad::load(&src).unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
            let f = irad::find_function(&src, &m, name).expect("corpus function exists");
            for case in reference["cases"].as_array().into_iter().flatten() {
                let text = case["args"].as_str().expect("args text");
                let args = parse(&src, &m, f, text);
                let what = format!("{file} @{name}({text})");
                match check_point(&what, &src, &m, f, &args, false, None) {
                    Ok(n) => components += n,
                    Err(e) => failures.push(e),
                }
                cases += 1;
            }
        }
    }
    println!("sparse_forward: {cases} corpus cases, {components} components");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Eleven surface programs and four IR twins, two or three cases each.
    assert!(cases >= 30, "only {cases} corpus cases");
    // 174 today.
    assert!(components >= 140, "only {components} components");
}

/// Whether a module calls a bulk array primitive anywhere.
fn uses_bulk(module: &Module) -> bool {
    module.funcs().any(|(_, f)| {
        f.insts
            .values()
            .any(|d| matches!(&d.kind, InstKind::Prim { prim, .. } if prim.bulk().is_some()))
    })
}

/// The `.ir` and `.irad` files under `dir`, recursively, without expected
/// outputs (`NAME.PASS.ir`).
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("ir" | "irad"))
            && p.file_stem()
                .and_then(|s| s.to_str())
                .is_some_and(|s| !s.contains('.'))
        {
            out.push(p);
        }
    }
}

/// The `(function, args)` of each `run:` line (`# run: @f(args) == v`, or
/// `//` in the surface language).
fn run_lines(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim_start();
        let Some(rest) = line
            .strip_prefix("# run: @")
            .or_else(|| line.strip_prefix("// run: @"))
        else {
            continue;
        };
        let Some(open) = rest.find('(') else { continue };
        let Some(eq) = rest.rfind(" == ") else {
            continue;
        };
        let call = rest[..eq].trim_end();
        if let Some(args) = call[open + 1..].strip_suffix(')') {
            out.push((rest[..open].to_string(), args.to_string()));
        }
    }
    out
}

const BULK_IR: &str = "
func @all(%a: f64, %x: [f64], %y: [f64], %w: [f64]) -> f64 {
#1:
  %s = call sum(%x) :: f64
  %d = call dot(%x, %y) :: f64
  call axpy(%a, %x, %y)
  call scale(%d, %x)
  %z = call zeros(3) :: [f64]
  call copyto(%z, %y)
  call fill(%y, %s)
  %v = call zeros(2) :: [f64]
  call matvec(%w, %z, 2, 3, %v)
  %c = call zeros(4) :: [f64]
  call matmul(%w, %x, 2, 3, 1, %v)
  call matmul(%v, %v, 2, 1, 2, %c)
  %e = call dot(%c, %c) :: f64
  %f = call dot(%x, %y) :: f64
  %g = call add(%e, %f) :: f64
  return %g
}

func @gemm(%a: [f64], %b: [f64], %c: [f64]) -> f64 {
#1:
  call gemm(true, false, %a, %b, 2, 3, 2, %c)
  call gemm(false, true, %a, %b, 2, 3, 2, %c)
  %s = call dot(%c, %c) :: f64
  return %s
}
";

#[test]
fn bulk_primitives_sparse_gradients_match_on_both_backends() {
    let mut files = Vec::new();
    for dir in ["tests/filetests", "examples"] {
        sources(&root().join(dir), &mut files);
    }
    files.sort();
    let (mut points, mut wrt_points, mut failures) = (0, 0, Vec::new());
    for path in files {
        let Ok(src) = irad::read_source(&path) else {
            continue;
        };
        let Ok(m) = irad::load(&src) else { continue };
        if !uses_bulk(&m) {
            continue;
        }
        for (name, text) in run_lines(&src.text) {
            let Ok(f) = irad::find_function(&src, &m, &name) else {
                continue;
            };
            let has_tangent = m[f].param_types().iter().any(|t| t.has_tangent());
            if m[f].ret != irad::ir::Type::F64 || !has_tangent {
                continue;
            }
            let args = parse(&src, &m, f, &text);
            let what = format!("{} @{name}({text})", path.display());
            match check_point(&what, &src, &m, f, &args, false, None) {
                Ok(_) => points += 1,
                Err(e) => failures.push(e),
            }
            // Each argument with a tangent on its own (`--wrt i`): the
            // others' arrays have tangents that are never seeded.
            for (i, ty) in m[f].param_types().iter().enumerate() {
                if !ty.has_tangent() {
                    continue;
                }
                match check_point(
                    &format!("{what} wrt {i}"),
                    &src,
                    &m,
                    f,
                    &args,
                    false,
                    Some(&[i]),
                ) {
                    Ok(_) => wrt_points += 1,
                    Err(e) => failures.push(e),
                }
            }
        }
    }
    let src = Source {
        name: "bulk.ir".into(),
        text: BULK_IR.into(),
    };
    let m = irad::load(&src).unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
    let table = [
        (
            "all",
            "0.5, [1.0, -2.0, 0.25], [0.5, 1.5, -1.0], [0.1, 0.2, -0.3, 0.4, 0.5, -0.6]",
            false,
        ),
        (
            "gemm",
            "[0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [1.0, -1.0, 0.5, 2.0, -0.25, 0.125], [0.0, 1.0, 2.0, 3.0]",
            true,
        ),
    ];
    for (name, text, dense) in table {
        let f = irad::find_function(&src, &m, name).expect("table function");
        let args = parse(&src, &m, f, text);
        match check_point(&format!("@{name}({text})"), &src, &m, f, &args, dense, None) {
            Ok(_) => points += 1,
            Err(e) => failures.push(e),
        }
    }
    println!("sparse_forward: {points} points with bulk primitives, {wrt_points} with one wrt");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The run lines of the files with bulk primitives and the table: 24
    // today.
    assert!(points >= 20, "only {points} points");
    assert!(
        wrt_points >= points,
        "only {wrt_points} points with one wrt"
    );
}
