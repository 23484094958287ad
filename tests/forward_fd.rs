//! Forward mode against central finite differences over the whole corpus.
//!
//! Every `.ir` and `.irad` file under `tests/filetests/programs`,
//! `tests/filetests/surface`, `tests/filetests/forward`, `tests/corpus` and
//! `examples` (recursively; not the expected outputs `NAME.PASS.ir`) is
//! loaded with `irad::load`. Its points are the arguments of each `# run:`
//! line (`// run:` in the surface language; `run-error:` lines are not
//! points), the argument sets of the reference corpus (`tests/corpus/*.json`)
//! for the files they name, and for each of these one deterministically
//! perturbed point: every finite f64 leaf `x` moved by `0.01 (1 + |x|) u`,
//! with `u` in [-1, 1] drawn from a generator seeded by the file and line
//! (or JSON case).
//! Functions that do not return f64 or have no argument with a tangent are
//! skipped, and so are points where the primal fails or is not finite.
//!
//! At each point, through the library (`irad::grad_forward` with
//! `Registry::new()`):
//! - every differentiated f64 (scalar arguments, tuple components, array
//!   elements) agrees with a central difference of step
//!   `h = 1e-6 max(1, |x|)`, each evaluation on fresh copies of the arguments
//!   (programs write into their arrays). The tolerance is relative with an
//!   absolute floor: `|ad - fd| <= RTOL max(|ad|, |fd|) + ATOL max(1, |f(x)|)`.
//!   On disagreement the difference is retried with `h / 10` (agreement then
//!   passes); the component counts as non-smooth (a kink or jump within the
//!   step) only if the two differences disagree with each other. When they
//!   agree with each other but not with forward mode, the point may sit
//!   exactly on a kink (`abs_branch(-0.0)`), where a central difference
//!   averages the two sides: it is skipped as a kink only if the one-sided
//!   differences disagree with each other and forward mode matches one of
//!   them (the derivative of the branch taken). Anything else fails, naming
//!   file, function, point, component and the values. Components whose input
//!   is not finite (NaN arguments) or whose differences are not finite are
//!   skipped and listed;
//! - the value equals the primal's, bit for bit;
//! - batch widths 1, 3 and 8 give bit-identical values and gradients, and
//!   `passes == ceil(n / min(width, n))` for n differentiated f64s (one pass
//!   when n is 0);
//! - `wrt` = one differentiated argument gives that argument's gradient of
//!   the full run, bit for bit, and `None` for every other argument.
//!
//! - sparse forward mode (`GradOptions::lanes` = `Lanes::Sparse`), on every
//!   program, bulk array primitives included, gives the primal's value bit
//!   for bit, one pass, every component within 1e-9 of reverse mode's and
//!   within `SPARSE_RTOL` of the dense gradient's (relative, with an absolute floor
//!   of `SPARSE_RTOL`, for components that are a cancellation of larger
//!   terms: `taylor_exp_error`'s -3e-6 differs by 4e-16): the sparse
//!   materialisation multiplies and adds the same partial derivatives in
//!   another order (reverse accumulation over the tangent DAG), so bit
//!   equality is not expected;
//! - reverse mode (`irad::grad_reverse`) gives the primal's value bit for
//!   bit and every component within 1e-9 of forward mode's, and each is
//!   checked against the differences like forward mode's.
//!
//! A second test checks `pow` and `powi` at a zero or negative base, where a
//! naive rule gives NaN for a finite derivative.
//!
//! The totals are printed (`cargo test --test forward_fd -- --nocapture`)
//! and bounded below, so that a corpus or loader change that silently drops
//! most of the work fails the test; non-smooth and kink skips are bounded
//! above.

use irad::Source;
use irad::ir::interp::value::{ArrayData, ArrayRef, Val};
use irad::ir::{FuncId, InstKind, Module};
use irad::passes::forward::grad::{GradOptions, Gradient};
use irad::rules::Registry;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Relative tolerance between forward mode and a finite difference.
const RTOL: f64 = 1e-6;
/// Absolute floor, scaled by `max(1, |f(x)|)`: the round-off of a central
/// difference grows with the size of the value over the step.
const ATOL: f64 = 1e-7;
/// Dense lanes of batch width `n` (not 0).
fn dense(n: u32) -> irad::ir::Lanes {
    irad::ir::Lanes::dense(n).expect("a dense width")
}

/// Relative tolerance between sparse and dense forward mode.
const SPARSE_RTOL: f64 = 1e-12;
/// Points of programs with bulk array primitives that sparse mode must
/// differentiate (about 80% of today's 18).
const MIN_SPARSE_BULK_POINTS: usize = 14;
/// Tolerance of one-sided differences (error O(h f'')) when deciding
/// whether a point sits exactly on a kink.
const ONE_SIDED_TOL: f64 = 1e-3;
/// The corpus holds at least this many `.ir`/`.irad` files (115 today).
const MIN_FILES: usize = 115;
/// Lower bounds on the work done: about 80% of today's counts (352 points,
/// 996 components), so that losing a directory or a kind of directive fails.
const MIN_POINTS: usize = 280;
const MIN_COMPONENTS: usize = 800;
/// Upper bound on components skipped as non-smooth within the step (12
/// today, 6 per mode: `piecewise` at its jump, `piece_sum` whose grid hits
/// the jumps).
const MAX_NON_SMOOTH: usize = 16;
/// Upper bound on components skipped because the point sits exactly on a
/// kink (4 today, 2 per mode: `abs_branch(-0.0)`, in IR and surface form).
const MAX_KINKS: usize = 6;

#[test]
fn forward_mode_matches_finite_differences_on_the_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = corpus_files(root);
    assert!(
        files.len() >= MIN_FILES,
        "found only {} corpus files under {}, expected at least {MIN_FILES}",
        files.len(),
        root.display()
    );
    let json_points = json_points(&root.join("tests/corpus"));
    let registry = Registry::new();
    let mut t = Totals::default();
    let mut failures = Vec::new();
    for path in &files {
        let rel = path
            .strip_prefix(root)
            .unwrap_or(path)
            .display()
            .to_string();
        let text = std::fs::read_to_string(path).expect("corpus file is readable");
        let src = Source {
            name: rel.clone(),
            text,
        };
        let module = irad::load(&src).unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
        t.files += 1;
        let mut calls = run_lines(&src.text, comment_of(path));
        let in_corpus = path.parent() == Some(root.join("tests/corpus").as_path());
        let base = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        calls.extend(
            json_points
                .iter()
                .filter(|p| in_corpus && p.file == base)
                .map(|p| (p.at.clone(), p.func.clone(), p.args.clone())),
        );
        for (at, func, args) in calls {
            let mut cx = Case {
                src: &src,
                module: &module,
                registry: &registry,
                at,
                totals: &mut t,
                failures: &mut failures,
            };
            cx.check_call(&func, &args);
        }
    }
    let report = format!(
        "forward_fd: {} files; {} calls skipped (result not f64, or no argument with a \
         tangent); {} points ({} skipped: primal failed or not finite); {} components \
         checked ({} on the retry with h/10; worst |ad - fd| / tolerance {:.3}); skipped: \
         {} non-smooth within the step, {} on a kink at the point, {} with a non-finite \
         input or difference; {} batch-width checks, {} wrt checks; {} components \
         of reverse mode compared with forward mode (and checked against the differences); \
         {} sparse-mode components compared with dense forward and reverse mode, \
         {} of the points with bulk array primitives",
        t.files,
        t.calls_skipped,
        t.points,
        t.points_skipped,
        t.components,
        t.retried,
        t.worst,
        t.non_smooth,
        t.kinks,
        t.non_finite,
        t.batch_checks,
        t.wrt_checks,
        t.reverse_checks,
        t.sparse_checks,
        t.sparse_bulk_points
    );
    println!("{report}");
    for n in &t.non_smooth_list {
        println!("  non-smooth: {n}");
    }
    for n in &t.kink_list {
        println!("  kink: {n}");
    }
    for n in &t.non_finite_list {
        println!("  non-finite: {n}");
    }
    assert!(
        failures.is_empty(),
        "{} failure(s):\n{}\n{report}",
        failures.len(),
        failures.join("\n")
    );
    assert!(t.points >= MIN_POINTS, "too few points: {report}");
    assert!(
        t.components >= MIN_COMPONENTS,
        "too few components: {report}"
    );
    assert!(
        t.reverse_checks >= MIN_COMPONENTS / 2,
        "too few reverse-mode components: {report}"
    );
    assert!(
        t.sparse_checks >= MIN_COMPONENTS / 2,
        "too few sparse-mode components ({}): {report}",
        t.sparse_checks
    );
    assert!(
        t.sparse_bulk_points >= MIN_SPARSE_BULK_POINTS,
        "too few points with bulk primitives in sparse mode: {report}"
    );
    assert!(
        t.non_smooth <= MAX_NON_SMOOTH,
        "more than {MAX_NON_SMOOTH} non-smooth skips: {report}"
    );
    assert!(
        t.kinks <= MAX_KINKS,
        "more than {MAX_KINKS} points on a kink: {report}"
    );
}

/// Derivatives that exist and are finite but come out NaN today, where a
/// rule multiplies a zero by an infinity or a NaN. Outside the corpus (no
/// program evaluates `pow` or `powi` there), so checked at fixed points.
#[test]
fn pow_and_powi_at_a_zero_or_negative_base() {
    let text = "\
func @pow2(%x: f64, %y: f64) -> f64 {
#1:
  %z = call pow(%x, %y) :: f64
  return %z
}

func @powi0(%x: f64) -> f64 {
#1:
  %z = call powi(%x, 0) :: f64
  return %z
}
";
    let src = Source {
        name: "pow.ir".into(),
        text: text.into(),
    };
    let module = irad::load(&src).expect("the probe loads");
    let registry = Registry::new();
    let d_dx = |func: &str, args: &[Val], wrt: Option<Vec<usize>>| {
        let f = irad::find_function(&src, &module, func).expect("function exists");
        let opts = GradOptions {
            wrt,
            ..GradOptions::default()
        };
        let (g, _) = irad::grad_forward(&src, &module, f, args, &registry, &opts)
            .expect("forward mode runs");
        match &g.gradient[0] {
            Some(Val::F64(d)) => *d,
            other => panic!("@{func}: gradient {other:?}"),
        }
    };
    // The derivative in x does not depend on the exponent's tangent: the
    // term ty * log(x) * pow(x, y), NaN (x < 0) or -inf * 0 (x = 0), must not
    // reach the x lane, also with `wrt` = [0] (arguments outside `wrt` still
    // carry zero tangents). docs/rules.md, "At the edges".
    for (x, want) in [(-2.0, -4.0), (0.0, 0.0)] {
        for wrt in [None, Some(vec![0])] {
            let got = d_dx("pow2", &[Val::F64(x), Val::F64(2.0)], wrt.clone());
            assert_eq!(got, want, "d/dx pow(x, 2) at {x}, wrt {wrt:?}");
        }
    }
    // d/dx powi(x, 0) is 0 everywhere, also at x = 0.
    assert_eq!(d_dx("powi0", &[Val::F64(1.5)], None), 0.0);
    assert_eq!(d_dx("powi0", &[Val::F64(0.0)], None), 0.0);
}

/// What the test did, for the printed report and the bounds.
#[derive(Default)]
struct Totals {
    files: usize,
    calls_skipped: usize,
    points: usize,
    points_skipped: usize,
    components: usize,
    retried: usize,
    non_smooth: usize,
    non_smooth_list: Vec<String>,
    non_finite: usize,
    non_finite_list: Vec<String>,
    kinks: usize,
    kink_list: Vec<String>,
    /// The largest |ad - fd| / tolerance among the components checked.
    worst: f64,
    batch_checks: usize,
    wrt_checks: usize,
    /// Components where reverse mode was compared with forward mode.
    reverse_checks: usize,
    /// Components where sparse mode was compared with dense forward mode.
    sparse_checks: usize,
    /// Points of programs with bulk array primitives where sparse mode was
    /// checked (it refused them once; now it must agree on every one).
    sparse_bulk_points: usize,
}

/// Whether a module calls a bulk array primitive anywhere.
fn uses_bulk(module: &Module) -> bool {
    module.funcs().any(|(_, f)| {
        f.insts
            .values()
            .any(|d| matches!(&d.kind, InstKind::Prim { prim, .. } if prim.bulk().is_some()))
    })
}

/// A reference-corpus argument set, as a point of the file it names.
struct JsonPoint {
    file: String,
    func: String,
    args: String,
    /// `case K of NAME.json`, for messages and the perturbation's seed.
    at: String,
}

/// One call site of the corpus being checked.
struct Case<'a> {
    src: &'a Source,
    module: &'a Module,
    registry: &'a Registry,
    /// Where the point comes from: the run line's number, or the JSON case.
    at: String,
    totals: &'a mut Totals,
    failures: &'a mut Vec<String>,
}

/// One step into a value: a tuple field or an array element.
#[derive(Clone, Copy, Debug)]
enum Step {
    Field(usize),
    Index(usize),
}

/// Where an f64 sits among the arguments.
#[derive(Clone, Debug)]
struct Leaf {
    arg: usize,
    path: Vec<Step>,
}

/// One point of one function: what the checks of a point share.
struct Point {
    f: FuncId,
    func: String,
    /// The arguments as IR literals, for messages.
    text: String,
    args: Vec<Val>,
    /// The primal value there.
    fx: f64,
}

impl Case<'_> {
    fn fail(&mut self, func: &str, point: &str, msg: String) {
        self.failures.push(format!(
            "{}:{}: @{func}({point}): {msg}",
            self.src.name, self.at
        ));
    }

    fn fail_at(&mut self, p: &Point, msg: String) {
        self.fail(&p.func, &p.text, msg);
    }

    /// Checks `@func` at the point of one line and at its perturbation.
    fn check_call(&mut self, func: &str, args_text: &str) {
        let Ok(f) = irad::find_function(self.src, self.module, func) else {
            self.fail(func, args_text, "no such function".into());
            return;
        };
        let decl = &self.module[f];
        let differentiable = decl.param_types().iter().any(|t| t.has_tangent());
        if decl.ret != irad::ir::Type::F64 || !differentiable {
            self.totals.calls_skipped += 1;
            return;
        }
        let args_src = Source {
            name: "<args>".into(),
            text: args_text.into(),
        };
        let args = match irad::parse_args(&args_src, self.module, f) {
            Ok(a) => a,
            Err(e) => {
                self.fail(func, args_text, e.to_string());
                return;
            }
        };
        let mut rng = SplitMix(seed(&self.src.name, &self.at));
        let perturbed: Vec<Val> = args.iter().map(|a| perturb(a, &mut rng)).collect();
        let moved = args.iter().zip(&perturbed).any(|(a, p)| !a.same(p));
        self.check_point(f, func, args);
        if moved {
            self.check_point(f, func, perturbed);
        }
    }

    fn check_point(&mut self, f: FuncId, func: &str, args: Vec<Val>) {
        let Some(fx) = self.eval(f, &args) else {
            self.totals.points_skipped += 1;
            return;
        };
        self.totals.points += 1;
        let p = Point {
            f,
            func: func.to_string(),
            text: show_args(&args, self.module),
            args,
            fx,
        };
        let Some(full) = self.gradient(&p, irad::ir::Lanes::ONE, None) else {
            return;
        };
        if !full.value.same(&Val::F64(fx)) {
            let got = full.value.display(self.module);
            self.fail_at(&p, format!("forward value {got}, primal {fx:?}"));
        }
        self.check_batches(&p, &full);
        self.check_wrt(&p, &full);
        for leaf in leaves(&p.args) {
            self.check_component(&p, &full, &leaf);
        }
        let rev = self.check_reverse(&p, &full);
        self.check_sparse(&p, &full, rev.as_ref());
    }

    /// Sparse mode at the point: the primal's value, one pass, every
    /// component within `SPARSE_RTOL` of dense forward mode's and within
    /// 1e-9 of reverse mode's (`rev`, when it ran), bulk array primitives
    /// included.
    fn check_sparse(&mut self, p: &Point, full: &Gradient, rev: Option<&Gradient>) {
        if uses_bulk(self.module) {
            self.totals.sparse_bulk_points += 1;
        }
        let Some(g) = self.gradient(p, irad::ir::Lanes::Sparse, None) else {
            return;
        };
        if !g.value.same(&Val::F64(p.fx)) || g.passes != 1 {
            let got = g.value.display(self.module);
            self.fail_at(
                p,
                format!(
                    "sparse value {got} in {} passes, primal {:?}",
                    g.passes, p.fx
                ),
            );
        }
        let get = |g: &Gradient, leaf: &Leaf| {
            g.gradient[leaf.arg]
                .as_ref()
                .and_then(|g| get_leaf(g, &leaf.path))
        };
        for leaf in &leaves(&p.args) {
            match (get(full, leaf), get(&g, leaf)) {
                (Some(a), Some(b)) if a == b || (a - b).abs() <= SPARSE_RTOL * a.abs().max(1.0) => {
                }
                (Some(a), Some(b)) if a.is_nan() && b.is_nan() => {}
                (a, b) => {
                    self.fail_at(p, format!("{}: dense {a:?}, sparse {b:?}", show_leaf(leaf)))
                }
            }
            self.totals.sparse_checks += 1;
            let Some(rev) = rev else { continue };
            match (get(rev, leaf), get(&g, leaf)) {
                (Some(a), Some(b)) if a == b || (a - b).abs() <= 1e-9 * a.abs().max(1.0) => {}
                (Some(a), Some(b)) if a.is_nan() && b.is_nan() => {}
                (a, b) => self.fail_at(
                    p,
                    format!("{}: reverse {a:?}, sparse {b:?}", show_leaf(leaf)),
                ),
            }
        }
    }

    /// Reverse mode at the point: the primal's value bit for bit, every
    /// component within 1e-9 (relative, floor 1) of forward mode's and
    /// against finite differences as forward mode is. The reverse gradient,
    /// if it ran.
    fn check_reverse(&mut self, p: &Point, full: &Gradient) -> Option<Gradient> {
        let fresh: Vec<Val> = p.args.iter().map(deep_copy).collect();
        let opts = GradOptions::default();
        let rev = match irad::grad_reverse(self.src, self.module, p.f, &fresh, self.registry, &opts)
        {
            Ok((g, _)) => g,
            Err(e) => {
                let msg = e.render(&[self.src]);
                self.fail_at(p, format!("grad_reverse failed: {msg}"));
                return None;
            }
        };
        if !rev.value.same(&Val::F64(p.fx)) {
            let got = rev.value.display(self.module);
            self.fail_at(p, format!("reverse value {got}, primal {:?}", p.fx));
        }
        for leaf in leaves(&p.args) {
            let get = |g: &Gradient| {
                g.gradient[leaf.arg]
                    .as_ref()
                    .and_then(|g| get_leaf(g, &leaf.path))
            };
            match (get(full), get(&rev)) {
                (Some(a), Some(b)) if a == b || (a - b).abs() <= 1e-9 * a.abs().max(1.0) => {}
                (Some(a), Some(b)) if a.is_nan() && b.is_nan() => {}
                (a, b) => self.fail_at(
                    p,
                    format!("{}: forward {a:?}, reverse {b:?}", show_leaf(&leaf)),
                ),
            }
            self.totals.reverse_checks += 1;
            self.check_component(p, &rev, &leaf);
        }
        Some(rev)
    }

    /// The primal at fresh copies of `args`, if it runs and is finite.
    fn eval(&self, f: FuncId, args: &[Val]) -> Option<f64> {
        let fresh: Vec<Val> = args.iter().map(deep_copy).collect();
        match irad::run(self.src, self.module, &irad::RunRequest::new(f, &fresh)) {
            Ok(Val::F64(y)) if y.is_finite() => Some(y),
            _ => None,
        }
    }

    /// Forward mode at fresh copies of the point's arguments.
    fn gradient(
        &mut self,
        p: &Point,
        lanes: irad::ir::Lanes,
        wrt: Option<Vec<usize>>,
    ) -> Option<Gradient> {
        let opts = GradOptions {
            lanes,
            wrt: wrt.clone(),
            ..GradOptions::default()
        };
        let fresh: Vec<Val> = p.args.iter().map(deep_copy).collect();
        match irad::grad_forward(self.src, self.module, p.f, &fresh, self.registry, &opts) {
            Ok((g, _)) => Some(g),
            Err(e) => {
                let msg = e.render(&[self.src]);
                self.fail_at(
                    p,
                    format!(
                        "grad_forward (width {}, wrt {wrt:?}) failed: {msg}",
                        lanes.code()
                    ),
                );
                None
            }
        }
    }

    /// Widths 1, 3 and 8 agree bit for bit; the number of passes.
    fn check_batches(&mut self, p: &Point, full: &Gradient) {
        let n = leaves(&p.args).len();
        for width in [1u32, 3, 8] {
            let g = if width == 1 {
                full.clone()
            } else {
                match self.gradient(p, dense(width), None) {
                    Some(g) => g,
                    None => continue,
                }
            };
            self.totals.batch_checks += 1;
            let w = (width as usize).min(n);
            let want_passes = if n == 0 { 1 } else { n.div_ceil(w) };
            if g.passes != want_passes {
                self.fail_at(
                    p,
                    format!(
                        "width {width}: {} passes for {n} directions, want {want_passes}",
                        g.passes
                    ),
                );
            }
            if !identical(&g.value, &full.value) || !same_grads(&g.gradient, &full.gradient) {
                let msg = format!(
                    "width {width} differs from width 1: {} vs {}",
                    show_grads(&g, self.module),
                    show_grads(full, self.module)
                );
                self.fail_at(p, msg);
            }
        }
    }

    /// `wrt` = one argument: that argument's gradient, `None` elsewhere.
    fn check_wrt(&mut self, p: &Point, full: &Gradient) {
        let params = self.module[p.f].param_types();
        for (i, ty) in params.iter().enumerate() {
            let present = full.gradient.get(i).is_some_and(Option::is_some);
            if present != ty.has_tangent() {
                self.fail_at(
                    p,
                    format!("argument {i} ({ty}): a gradient must be given iff it has a tangent"),
                );
            }
        }
        for i in (0..params.len()).filter(|&i| params[i].has_tangent()) {
            let Some(g) = self.gradient(p, dense(8), Some(vec![i])) else {
                continue;
            };
            self.totals.wrt_checks += 1;
            let want = full.gradient.get(i).and_then(Option::as_ref);
            let ok = g.gradient.len() == params.len()
                && g.gradient.iter().enumerate().all(|(j, gj)| match gj {
                    Some(v) => j == i && want.is_some_and(|w| identical(v, w)),
                    None => j != i,
                });
            if !ok || !identical(&g.value, &full.value) {
                let msg = format!(
                    "wrt [{i}] gives {}, the full run {}",
                    show_grads(&g, self.module),
                    show_grads(full, self.module)
                );
                self.fail_at(p, msg);
            }
        }
    }

    /// One differentiated f64 against central differences.
    fn check_component(&mut self, p: &Point, full: &Gradient, leaf: &Leaf) {
        let x = get_leaf(&p.args[leaf.arg], &leaf.path);
        let ad = full.gradient[leaf.arg]
            .as_ref()
            .and_then(|g| get_leaf(g, &leaf.path));
        let (Some(x), Some(ad)) = (x, ad) else {
            self.fail_at(p, format!("no gradient for {}", show_leaf(leaf)));
            return;
        };
        let here = format!(
            "{}:{}: @{}({}) {}",
            self.src.name,
            self.at,
            p.func,
            p.text,
            show_leaf(leaf)
        );
        if !x.is_finite() {
            self.skip_non_finite(format!("{here}: input {x}"));
            return;
        }
        let h = 1e-6 * x.abs().max(1.0);
        let Some(fd1) = self.central(p, leaf, x, h) else {
            self.skip_non_finite(format!("{here}: f(x +- h) fails or is not finite"));
            return;
        };
        let scale = p.fx.abs().max(1.0);
        let excess = |a: f64, b: f64| (a - b).abs() / (RTOL * a.abs().max(b.abs()) + ATOL * scale);
        let agree = |a: f64, b: f64| excess(a, b) <= 1.0;
        if agree(ad, fd1) {
            self.totals.components += 1;
            self.totals.worst = self.totals.worst.max(excess(ad, fd1));
            return;
        }
        let Some(fd2) = self.central(p, leaf, x, h / 10.0) else {
            self.skip_non_finite(format!("{here}: f(x +- h/10) fails or is not finite"));
            return;
        };
        let what = format!("{here}: forward {ad:e}, fd(h) {fd1:e}, fd(h/10) {fd2:e}");
        if agree(ad, fd2) {
            self.totals.components += 1;
            self.totals.retried += 1;
            self.totals.worst = self.totals.worst.max(excess(ad, fd2));
        } else if !agree(fd1, fd2) {
            self.totals.non_smooth += 1;
            self.totals.non_smooth_list.push(what);
        } else if let Some((left, right)) = self.one_sided(p, leaf, x, h)
            && !agree_loose(left, right, scale)
            && (agree_loose(ad, left, scale) || agree_loose(ad, right, scale))
        {
            // A kink exactly at x: the central differences average the two
            // sides, forward mode takes the derivative of the branch taken.
            self.totals.kinks += 1;
            self.totals
                .kink_list
                .push(format!("{what}, one-sided {left:e} | {right:e}"));
        } else {
            self.fail_at(
                p,
                format!(
                    "{}: forward mode gives {ad:e}, central differences {fd1:e} (h = {h:e}) \
                     and {fd2:e} (h/10)",
                    show_leaf(leaf)
                ),
            );
        }
    }

    fn skip_non_finite(&mut self, what: String) {
        self.totals.non_finite += 1;
        self.totals.non_finite_list.push(what);
    }

    /// `(f(x) - f(x - h)) / h` and `(f(x + h) - f(x)) / h`.
    fn one_sided(&self, p: &Point, leaf: &Leaf, x: f64, h: f64) -> Option<(f64, f64)> {
        let up = self.eval(p.f, &moved(&p.args, leaf, x + h))?;
        let down = self.eval(p.f, &moved(&p.args, leaf, x - h))?;
        let left = (p.fx - down) / (x - (x - h));
        let right = (up - p.fx) / ((x + h) - x);
        (left.is_finite() && right.is_finite()).then_some((left, right))
    }

    /// `(f(x + h) - f(x - h)) / 2h` in the direction of `leaf`.
    fn central(&self, p: &Point, leaf: &Leaf, x: f64, h: f64) -> Option<f64> {
        let at = |v: f64| self.eval(p.f, &moved(&p.args, leaf, v));
        let (up, down) = (at(x + h)?, at(x - h)?);
        // The step actually taken, after rounding x + h and x - h.
        let fd = (up - down) / ((x + h) - (x - h));
        fd.is_finite().then_some(fd)
    }
}

/// Agreement of one-sided differences, whose error is first order in h.
fn agree_loose(a: f64, b: f64, scale: f64) -> bool {
    (a - b).abs() <= ONE_SIDED_TOL * (a.abs().max(b.abs()) + scale)
}

/// Fresh copies of `args` with the leaf at `leaf` set to `x`.
fn moved(args: &[Val], leaf: &Leaf, x: f64) -> Vec<Val> {
    let mut out: Vec<Val> = args.iter().map(deep_copy).collect();
    out[leaf.arg] = set_leaf(&out[leaf.arg], &leaf.path, x);
    out
}

/// Every `.ir` and `.irad` file of the corpus directories, sorted.
fn corpus_files(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let entries =
            std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
                // `NAME.PASS.ir` files are expected outputs, not programs.
                let is_program = name
                    .strip_suffix(".ir")
                    .or_else(|| name.strip_suffix(".irad"))
                    .is_some_and(|stem| !stem.contains('.'));
                if is_program {
                    out.push(path);
                }
            }
        }
    }
    let mut out = Vec::new();
    for dir in [
        "tests/filetests/programs",
        "tests/filetests/surface",
        "tests/filetests/forward",
        "tests/corpus",
        "examples",
    ] {
        walk(&root.join(dir), &mut out);
    }
    out.sort();
    out
}

fn comment_of(path: &Path) -> &'static str {
    if path.extension().is_some_and(|e| e == "irad") {
        "//"
    } else {
        "#"
    }
}

/// `(line number, function, argument text)` of every `run:` line.
fn run_lines(text: &str, comment: &str) -> Vec<(String, String, String)> {
    let prefix = format!("{comment} run:");
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let Some(rest) = raw.trim_start().strip_prefix(prefix.as_str()) else {
            continue;
        };
        let (func, args) = parse_call(rest)
            .unwrap_or_else(|| panic!("line {}: malformed run line {raw:?}", i + 1));
        out.push(((i + 1).to_string(), func, args));
    }
    out
}

/// Splits ` @f(ARGS) ...` into `f` and `ARGS`, matching brackets.
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
                    let func = s[..open].trim().to_string();
                    return Some((func, s[open + 1..open + i].to_string()));
                }
            }
            _ => {}
        }
    }
    None
}

/// The argument sets of `dir/*.json`, each as a point of the file (and IR
/// twin) it names.
fn json_points(dir: &Path) -> Vec<JsonPoint> {
    let mut out = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("tests/corpus exists")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    entries.sort();
    for path in entries {
        let text = std::fs::read_to_string(&path).expect("readable corpus JSON");
        let j: serde_json::Value = serde_json::from_str(&text).expect("corpus JSON parses");
        let func = j["function"].as_str().expect("function named").to_string();
        for file in [j["file"].as_str(), j["ir_file"].as_str()]
            .into_iter()
            .flatten()
        {
            for (k, case) in j["cases"].as_array().into_iter().flatten().enumerate() {
                out.push(JsonPoint {
                    file: file.to_string(),
                    func: func.clone(),
                    args: case["args"].as_str().expect("args text").to_string(),
                    at: format!(
                        "case {k} of {}",
                        path.file_name().and_then(|n| n.to_str()).unwrap_or("?")
                    ),
                });
            }
        }
    }
    assert!(out.len() >= 30, "only {} reference cases found", out.len());
    out
}

/// Every f64 leaf of the arguments: scalars, tuple components, elements of
/// f64 arrays (exactly the differentiated f64s of a full gradient).
fn leaves(args: &[Val]) -> Vec<Leaf> {
    fn walk(v: &Val, arg: usize, path: &mut Vec<Step>, out: &mut Vec<Leaf>) {
        match v {
            Val::F64(_) => out.push(Leaf {
                arg,
                path: path.clone(),
            }),
            Val::Tuple(vals) => {
                for (k, e) in vals.iter().enumerate() {
                    path.push(Step::Field(k));
                    walk(e, arg, path, out);
                    path.pop();
                }
            }
            Val::Array(a) => {
                if let ArrayData::F64(xs) = &*a.0.borrow() {
                    for i in 0..xs.len() {
                        path.push(Step::Index(i));
                        out.push(Leaf {
                            arg,
                            path: path.clone(),
                        });
                        path.pop();
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for (i, a) in args.iter().enumerate() {
        walk(a, i, &mut Vec::new(), &mut out);
    }
    out
}

fn get_leaf(v: &Val, path: &[Step]) -> Option<f64> {
    match (path.split_first(), v) {
        (None, Val::F64(x)) => Some(*x),
        (Some((Step::Field(k), rest)), Val::Tuple(vals)) => get_leaf(vals.get(*k)?, rest),
        (Some((Step::Index(i), [])), Val::Array(a)) => match &*a.0.borrow() {
            ArrayData::F64(xs) => xs.get(*i).copied(),
            _ => None,
        },
        _ => None,
    }
}

/// `v` with the leaf at `path` set to `x`; arrays on the path are written in
/// place (callers pass fresh copies).
fn set_leaf(v: &Val, path: &[Step], x: f64) -> Val {
    match (path.split_first(), v) {
        (None, Val::F64(_)) => Val::F64(x),
        (Some((Step::Field(k), rest)), Val::Tuple(vals)) => {
            let elems: Vec<Val> = vals
                .iter()
                .enumerate()
                .map(|(j, e)| {
                    if j == *k {
                        set_leaf(e, rest, x)
                    } else {
                        e.clone()
                    }
                })
                .collect();
            Val::Tuple(Rc::from(elems))
        }
        (Some((Step::Index(i), [])), Val::Array(a)) => {
            if let ArrayData::F64(xs) = &mut *a.0.borrow_mut() {
                xs[*i] = x;
            }
            v.clone()
        }
        _ => panic!("no leaf at {path:?} in {v:?}"),
    }
}

/// A fresh copy of `v`: arrays get new buffers.
fn deep_copy(v: &Val) -> Val {
    match v {
        Val::Array(a) => Val::Array(ArrayRef::new(a.0.borrow().clone())),
        Val::Tuple(vals) => Val::Tuple(vals.iter().map(deep_copy).collect()),
        other => other.clone(),
    }
}

/// `v` with every finite f64 leaf `x` moved by `0.01 (1 + |x|) u`, u in [-1, 1].
fn perturb(v: &Val, rng: &mut SplitMix) -> Val {
    let mut nudge = |x: f64| {
        let u = rng.uniform();
        if x.is_finite() {
            x + 0.01 * (1.0 + x.abs()) * u
        } else {
            x
        }
    };
    match v {
        Val::F64(x) => Val::F64(nudge(*x)),
        Val::Tuple(vals) => Val::Tuple(vals.iter().map(|e| perturb(e, rng)).collect()),
        Val::Array(a) => match &*a.0.borrow() {
            ArrayData::F64(xs) => Val::f64_array(xs.iter().map(|&x| nudge(x)).collect()),
            other => Val::Array(ArrayRef::new(other.clone())),
        },
        other => other.clone(),
    }
}

/// Bit equality (any NaN equal to any NaN), also for gradients' tuples.
fn identical(a: &Val, b: &Val) -> bool {
    a.same(b)
}

fn same_grads(a: &[Option<Val>], b: &[Option<Val>]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (Some(x), Some(y)) => identical(x, y),
            (None, None) => true,
            _ => false,
        })
}

fn show_args(args: &[Val], module: &Module) -> String {
    let parts: Vec<String> = args.iter().map(|a| a.display(module)).collect();
    parts.join(", ")
}

fn show_grads(g: &Gradient, module: &Module) -> String {
    let mut out = format!(
        "value {} (passes {}), gradient [",
        g.value.display(module),
        g.passes
    );
    for (i, d) in g.gradient.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        match d {
            Some(v) => out.push_str(&v.display(module)),
            None => out.push_str("None"),
        }
    }
    out.push(']');
    out
}

fn show_leaf(leaf: &Leaf) -> String {
    let mut out = format!("argument {}", leaf.arg);
    for step in &leaf.path {
        match step {
            Step::Field(k) => {
                let _ = write!(out, ".{k}");
            }
            Step::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
        }
    }
    out
}

/// FNV-1a of the file name and the point's origin (line or JSON case): the
/// seed of a point's perturbation.
fn seed(file: &str, at: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in file.bytes().chain([0]).chain(at.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// SplitMix64: a small deterministic generator.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1].
    fn uniform(&mut self) -> f64 {
        let unit = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        2.0 * unit - 1.0
    }
}
