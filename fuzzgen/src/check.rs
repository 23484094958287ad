//! The checks the fuzz targets (`fuzz/fuzz_targets/*.rs`) and the seeded
//! tests (`fuzzgen/tests/seeded.rs`) run: each takes one input and returns
//! `Err(description)` when irad misbehaves on it. A fuzz target panics on
//! `Err` (so libFuzzer records the input); a seeded test asserts `Ok`.
//!
//! Assumes nothing of the inputs. Guarantees: a check itself never panics on
//! irad's behalf; a panic inside irad propagates (that is a finding).

use crate::generate::Program;
use irad::ir::interp::{ArrayData, RunOptions, Val};
use irad::ir::{Module, Type};
use irad::passes::forward::grad::GradOptions;
use irad::{Backend, HvpMode, Source};

fn source(name: &str, text: &str) -> Source {
    Source {
        name: name.into(),
        text: text.into(),
    }
}

/// IR text: parsing never panics; text that parses prints to text that
/// parses back to a structurally equal module and prints the same again.
pub fn ir_text(bytes: &[u8]) -> Result<(), String> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Ok(());
    };
    let Ok(m) = irad::ir::text::parse_module(text) else {
        return Ok(());
    };
    let printed = irad::ir::text::print_module(&m);
    let back = irad::ir::text::parse_module(&printed)
        .map_err(|e| format!("printed text does not parse: {e}\n{printed}"))?;
    irad::ir::eq::structural_eq(&m, &back).map_err(|e| format!("round trip differs: {e}"))?;
    let again = irad::ir::text::print_module(&back);
    if again != printed {
        return Err(format!("printing is not stable:\n{printed}\n---\n{again}"));
    }
    Ok(())
}

/// Surface text: loading never panics, and what loads verifies.
pub fn surface_text(bytes: &[u8]) -> Result<(), String> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Ok(());
    };
    let src = source("fuzz.irad", text);
    match irad::load(&src) {
        Ok(m) => irad::ir::verify::verify_module(&m)
            .map_err(|errs| format!("lowered module does not verify: {errs:?}")),
        Err(e) => {
            let _ = e.render(&[&src]);
            Ok(())
        }
    }
}

/// The verifier: on any module that parses, it either accepts or reports
/// errors that each name a function; an accepted module normalises.
pub fn verifier(bytes: &[u8]) -> Result<(), String> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Ok(());
    };
    let Ok(m) = irad::ir::text::parse_module(text) else {
        return Ok(());
    };
    match irad::ir::verify::verify_module(&m) {
        Ok(()) => {
            let mut n = m.clone();
            irad::passes::normalise(&mut n)
                .map_err(|e| format!("a verified module fails to normalise: {e}"))?;
            Ok(())
        }
        Err(errs) => {
            if errs.is_empty() {
                return Err("rejected without an error".into());
            }
            for e in &errs {
                if e.loc.func.is_none() {
                    return Err(format!("an error without a function: {e}"));
                }
            }
            Ok(())
        }
    }
}

/// A generated program, loaded: module, entry function, arguments.
pub struct Loaded {
    /// The source.
    pub src: Source,
    /// The module.
    pub module: Module,
    /// The entry function.
    pub func: irad::ir::FuncId,
    /// Its arguments.
    pub args: Vec<Val>,
}

/// Loads a generated program; failing to is a generator bug.
pub fn load(p: &Program) -> Result<Loaded, String> {
    let src = source("gen.irad", &p.source);
    let module = irad::load(&src).map_err(|e| {
        format!(
            "generated program does not load:\n{}\n{}",
            e.render(&[&src]),
            p.source
        )
    })?;
    let func = irad::find_function(&src, &module, &p.func).map_err(|e| e.to_string())?;
    let args = irad::parse_args(&source("<args>", &p.args), &module, func)
        .map_err(|e| format!("generated arguments do not parse: {e}"))?;
    Ok(Loaded {
        src,
        module,
        func,
        args,
    })
}

/// The step limit of [`interpreter`]: far above what any generated program
/// takes (they terminate by construction, in at most a few million steps),
/// so reaching it means a hang.
pub const MAX_STEPS: u64 = 200_000_000;

/// The interpreter on a generated program, under a step limit
/// ([`MAX_STEPS`]): a value or a clean run-time error (with a location
/// inside the program). Reaching the step limit is a failure: generated
/// programs always terminate.
pub fn interpreter(p: &Program) -> Result<Option<Val>, String> {
    let l = load(p)?;
    let opts = RunOptions {
        max_steps: MAX_STEPS,
        ..RunOptions::default()
    };
    match irad::run(
        &l.src,
        &l.module,
        &irad::RunRequest {
            opts: opts.clone(),
            ..irad::RunRequest::new(l.func, &l.args)
        },
    ) {
        Err(irad::Error::Run { err, .. }) if err.msg.starts_with("step limit") => {
            Err(format!("a generated program hit the step limit: {err}"))
        }
        Ok(v) => Ok(Some(v)),
        Err(irad::Error::Run { err, .. }) => {
            if err.loc.func.is_none() {
                return Err(format!("a run-time error without a place: {err}"));
            }
            Ok(None)
        }
        Err(e) => Err(format!("not a run-time error: {e}")),
    }
}

/// Bit-equal values (any NaN equals any NaN).
pub fn same(a: &Val, b: &Val) -> bool {
    let f = |x: f64, y: f64| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan());
    match (a, b) {
        (Val::F64(x), Val::F64(y)) => f(*x, *y),
        (Val::I64(x), Val::I64(y)) => x == y,
        (Val::Bool(x), Val::Bool(y)) => x == y,
        (Val::Unit, Val::Unit) => true,
        (Val::Tuple(x), Val::Tuple(y)) | (Val::Dual(x), Val::Dual(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| same(p, q))
        }
        (Val::Array(x), Val::Array(y)) => match (&*x.0.borrow(), &*y.0.borrow()) {
            (ArrayData::F64(p), ArrayData::F64(q)) => {
                p.len() == q.len() && p.iter().zip(q).all(|(s, t)| f(*s, *t))
            }
            (ArrayData::I64(p), ArrayData::I64(q)) => p == q,
            (ArrayData::Bool(p), ArrayData::Bool(q)) => p == q,
            _ => false,
        },
        (Val::Func(x), Val::Func(y)) => x == y,
        _ => false,
    }
}

/// The interpreter and the JIT on a generated program: the same value (and
/// arguments' arrays after the run) bit for bit or the same error; the same
/// for reverse-mode gradients, derived once and run by both.
pub fn interp_vs_jit(p: &Program) -> Result<(), String> {
    let l = load(p)?;
    let opts = RunOptions::default();
    // The result, then the arguments as the run left them (it may write
    // into their arrays), as one tuple.
    let run = |b: Backend| {
        let args = fresh(&l.args);
        irad::run(
            &l.src,
            &l.module,
            &irad::RunRequest {
                opts: opts.clone(),
                backend: b,
                ..irad::RunRequest::new(l.func, &args)
            },
        )
        .map(|v| {
            let mut parts = vec![v];
            parts.extend(args);
            Val::Tuple(parts.into())
        })
    };
    let same_result = |what: &str,
                       i: &Result<Val, irad::Error>,
                       j: &Result<Val, irad::Error>|
     -> Result<(), String> {
        match (i, j) {
            (Ok(a), Ok(b)) if same(a, b) => Ok(()),
            (Err(a), Err(b)) if a.to_string() == b.to_string() => Ok(()),
            _ => Err(format!(
                "{what}: interpreter {i:?} but JIT {j:?}\n{}\nargs: {}",
                p.source, p.args
            )),
        }
    };
    same_result("run", &run(Backend::Interp), &run(Backend::Jit))?;
    // One derivation, run by both backends (irad::grad_each).
    let registry = irad::rules::Registry::new();
    let req = irad::GradRequest::new(l.func, &l.args);
    let execs = [Backend::Interp.exec(), Backend::Jit.exec()];
    let (runs, _) = match irad::grad_each(&l.src, &l.module, &registry, &req, &execs) {
        Ok(r) => r,
        // Generated programs are differentiable: failing to derive one (in
        // both backends alike) is a finding too.
        Err(e) => {
            return Err(format!(
                "reverse mode cannot derive a generated program: {e}\n{}\nargs: {}",
                p.source, p.args
            ));
        }
    };
    match runs.as_slice() {
        [i, j] => match (gradient_val(i), gradient_val(j)) {
            (Ok(a), Ok(b)) if same(&a, &b) => Ok(()),
            (Err(a), Err(b)) if a == b => Ok(()),
            (a, b) => Err(format!(
                "grad: interpreter {a:?} but JIT {b:?}\n{}\nargs: {}",
                p.source, p.args
            )),
        },
        _ => Err("grad_each did not run both backends".into()),
    }
}

/// A gradient run as one value (the value, then each argument's gradient,
/// unit where there is none), or its error's text.
fn gradient_val(g: &Result<irad::Gradient, irad::Error>) -> Result<Val, String> {
    match g {
        Ok(g) => {
            let mut parts = vec![g.value.clone()];
            parts.extend(g.gradient.iter().map(|x| x.clone().unwrap_or(Val::Unit)));
            Ok(Val::Tuple(parts.into()))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The tape limits [`checkpoint`] derives under: one byte (every loop that
/// records checkpointed, in stretches of one iteration, at every nesting
/// depth) and 4K (longer stretches, direct paths taken by short runs).
pub const CHECKPOINT_LIMITS: [u64; 2] = [1, 4096];

/// Reverse mode under a tape limit gives the gradient without one, bit for
/// bit, in the interpreter and the JIT (docs/reverse.md, "Checkpointing"):
/// the value and gradient of one derivation without a limit, run by the
/// interpreter, against those of a derivation under each of
/// [`CHECKPOINT_LIMITS`], run by both backends. A program whose gradient
/// fails without a limit must fail under one too (the message may name
/// another place: the replay functions run the loops again).
pub fn checkpoint(p: &Program) -> Result<(), String> {
    let l = load(p)?;
    let registry = irad::rules::Registry::new();
    let runs = |limit: Option<u64>, execs: &[irad::ir::interp::MakeExecutor]| {
        let mut req = irad::GradRequest::new(l.func, &l.args);
        req.opts.tape_limit = limit;
        irad::grad_each(&l.src, &l.module, &registry, &req, execs)
            .map(|(runs, _)| runs.iter().map(gradient_val).collect::<Vec<_>>())
            .map_err(|e| {
                format!(
                    "reverse mode cannot derive a generated program{}: {e}\n{}\nargs: {}",
                    limit.map_or(String::new(), |b| format!(" under a {b}-byte limit")),
                    p.source,
                    p.args
                )
            })
    };
    // Without a limit too, the JIT agrees with the interpreter (the value
    // and the gradient): the primal's loops free arrays the interpreter
    // counts (docs/codegen.md, "Freeing arrays").
    let mut unlimited = runs(None, &[Backend::Interp.exec(), Backend::Jit.exec()])?.into_iter();
    let reference = unlimited.next().ok_or("grad_each ran no backend")?;
    let jit = unlimited.next().ok_or("grad_each ran no JIT")?;
    if !same_run(&reference, &jit) {
        return Err(format!(
            "grad without a limit (JIT) {jit:?} but in the interpreter {reference:?}\n{}\nargs: {}",
            p.source, p.args
        ));
    }
    for limit in CHECKPOINT_LIMITS {
        let got = runs(Some(limit), &[Backend::Interp.exec(), Backend::Jit.exec()])?;
        for (backend, g) in ["interpreter", "JIT"].iter().zip(&got) {
            if !same_run(&reference, g) {
                return Err(format!(
                    "grad under a {limit}-byte limit ({backend}) {g:?} but without a limit {reference:?}\n{}\nargs: {}",
                    p.source, p.args
                ));
            }
        }
    }
    Ok(())
}

/// Whether two gradient runs agree: the same value and gradient, bit for
/// bit (any NaN equals any NaN), or both failed.
fn same_run(a: &Result<Val, String>, b: &Result<Val, String>) -> bool {
    match (a, b) {
        (Ok(a), Ok(b)) => same(a, b),
        (Err(_), Err(_)) => true,
        _ => false,
    }
}

/// The f64 leaves of the differentiable arguments, by position (argument,
/// element of an array or field of a tuple of f64s), for perturbing.
fn leaves(args: &[Val], params: &[Type]) -> Vec<(usize, Option<usize>)> {
    let mut out = Vec::new();
    for (i, (a, t)) in args.iter().zip(params).enumerate() {
        match (a, t) {
            (Val::F64(_), Type::F64) => out.push((i, None)),
            (Val::Array(arr), Type::Array(_)) => {
                if let ArrayData::F64(xs) = &*arr.0.borrow() {
                    out.extend((0..xs.len()).map(|k| (i, Some(k))));
                }
            }
            (Val::Tuple(xs), Type::Tuple(_)) => {
                let fields = xs.iter().enumerate();
                out.extend(
                    fields
                        .filter(|(_, x)| matches!(x, Val::F64(_)))
                        .map(|(k, _)| (i, Some(k))),
                );
            }
            _ => {}
        }
    }
    out
}

/// The tuple `t` with its f64 field `k` replaced by `f` of it.
fn with_field(t: &[Val], k: usize, f: impl Fn(f64) -> f64) -> Val {
    let fields = t.iter().enumerate().map(|(j, x)| match x {
        Val::F64(v) if j == k => Val::F64(f(*v)),
        _ => x.clone(),
    });
    Val::Tuple(fields.collect::<Vec<_>>().into())
}

/// A deep copy of the arguments (a run may write into their arrays).
pub fn fresh(args: &[Val]) -> Vec<Val> {
    args.iter()
        .map(|a| match a {
            Val::Array(arr) => Val::Array(irad::ir::interp::ArrayRef::new(arr.0.borrow().clone())),
            _ => a.clone(),
        })
        .collect()
}

/// A deep copy of the arguments with leaf `at` moved by `h`.
fn moved(args: &[Val], at: (usize, Option<usize>), h: f64) -> Vec<Val> {
    args.iter()
        .enumerate()
        .map(|(i, a)| match (a, at) {
            (Val::F64(x), (j, None)) if i == j => Val::F64(x + h),
            (Val::Tuple(t), (j, Some(k))) if i == j => with_field(t, k, |v| v + h),
            (Val::Array(arr), _) => {
                let mut data = arr.0.borrow().clone();
                if let (ArrayData::F64(xs), (j, Some(k))) = (&mut data, at)
                    && i == j
                    && let Some(x) = xs.get_mut(k)
                {
                    *x += h;
                }
                Val::Array(irad::ir::interp::ArrayRef::new(data))
            }
            _ => a.clone(),
        })
        .collect()
}

/// The gradient entry of leaf `at`.
fn entry(g: &[Option<Val>], at: (usize, Option<usize>)) -> Option<f64> {
    match (g.get(at.0)?.as_ref()?, at.1) {
        (Val::F64(x), None) => Some(*x),
        (Val::Tuple(t), Some(k)) => match t.get(k)? {
            Val::F64(x) => Some(*x),
            _ => None,
        },
        (Val::Array(arr), Some(k)) => match &*arr.0.borrow() {
            ArrayData::F64(xs) => xs.get(k).copied(),
            _ => None,
        },
        _ => None,
    }
}

/// Whether central differences of step 2.5e-6 can check a derivative `g`
/// of a function whose value is `f0`: the value must be moderate (at most
/// 1e6: the generated programs that reach more compound `x cos x` and
/// `exp` into intermediates whose oscillation no difference quotient
/// follows, and a value of 1e8 leaves nothing of a step of 1e-6 in x), their
/// rounding, about `eps |f0| / h`, far below the tolerance, and the
/// function must look the same at a coarser
/// step (`coarse`, step 1e-3): a difference there that disagrees with the
/// fine one means the fine step sees rounding (a small term absorbed by a
/// huge intermediate) or the function oscillates faster than the steps
/// (`sin` of a value of 1e11), where the derivative at the point is right
/// but no difference quotient shows it. Found by the fuzz runner
/// (`fuzzgen/tests/seeded.rs`, `derivative_findings_of_the_runner`).
fn differences_resolve(f0: f64, g: f64, fine: f64, coarse: impl FnOnce() -> Option<f64>) -> bool {
    if f0.abs() > 1e6 || f0.abs() * f64::EPSILON / 2.5e-6 > 1e-6 * (1.0 + g.abs()) {
        return false;
    }
    coarse().is_some_and(|c| (c - fine).abs() <= 1e-2 * (1.0 + fine.abs()))
}

/// Whether the function is continuous at the point, judged from its value
/// there, `f0`, and the means of its values a step either side (`mids`:
/// steps 1e-5 and 2.5e-6). For a smooth function a mean differs from `f0`
/// by about `h^2 f''/2`, so the fine step's difference is a sixteenth of
/// the coarse one's; a function that jumps at the point itself (a branch
/// on `x != 0.0` at x = 0: both steps take the other side) differs by the
/// jump at every step, and central differences there show the derivative
/// of the other side, not of the point. Asked only where a gradient entry
/// and the differences disagree. Found by the fuzz runner (seed
/// 2000376230, `fuzzgen/tests/regressions/derivatives-runner-2000376230.irad`).
fn continuous_at(f0: f64, mids: impl FnOnce() -> Option<(f64, f64)>) -> bool {
    let Some((coarse, fine)) = mids() else {
        return false;
    };
    let (dc, df) = ((coarse - f0).abs(), (fine - f0).abs());
    df <= 1e-9 * (1.0 + f0.abs()) || df <= dc / 4.0
}

/// The rounding of leaf `at`'s derivative in the derivatives' own
/// arithmetic. Tangents and adjoints are linear in their seeds, so
/// seeding `c` and dividing by `c` gives the same derivative up to
/// rounding; with c = 3 and c = 1/7 (not powers of two, so the roundings
/// fall elsewhere) the forward results differ, and the reverse ones, by
/// about the rounding's size. That is about `eps |T|` for the largest
/// tangents `T` that cancel on the way: ~1e-16 of the derivative in a
/// program without cancellation, 5e-3 in one whose accumulator of 1e16 is
/// added and subtracted (its tangent of 5e13 rounds the rest to multiples
/// of 1/128). A derivation or rule that is wrong is wrong alike at every
/// seed, so this does not measure it. `None` where a seeded run fails.
/// Asked only where a check disagrees. Found by the fuzz runner (seed
/// 2000424985, `fuzzgen/tests/regressions/derivatives-runner-2000424985.irad`).
fn rounding_of(
    l: &Loaded,
    registry: &irad::rules::Registry,
    at: (usize, Option<usize>),
) -> Option<f64> {
    let params = l.module[l.func].param_types();
    let req = irad::GradRequest::new(l.func, &l.args);
    let seeded = |c: f64| -> Option<(f64, f64)> {
        let mut tangent = fresh(&l.args);
        for leaf in leaves(&l.args, &params) {
            set_leaf(&mut tangent, leaf, 0.0);
        }
        set_leaf(&mut tangent, at, c);
        let (j, _) = irad::jvp(&l.src, &l.module, registry, &req, &tangent).ok()?;
        let Val::F64(fwd) = j.jvp else {
            return None;
        };
        let (g, _) = irad::vjp(&l.src, &l.module, registry, &req, &Val::F64(c)).ok()?;
        Some((fwd / c, entry(&g.gradient, at)? / c))
    };
    let (f1, r1) = seeded(3.0)?;
    let (f2, r2) = seeded(1.0 / 7.0)?;
    Some((f1 - f2).abs().max((r1 - r2).abs()))
}

/// Whether forward mode's `a` and reverse mode's `b` disagree by no more
/// than `rounding` ([`rounding_of`]) allows.
fn within_rounding(a: f64, b: f64, rounding: Option<f64>) -> bool {
    rounding.is_some_and(|r| (a - b).abs() <= 4.0 * r)
}

/// Whether a derivative `g` whose own arithmetic rounds by `rounding`
/// ([`rounding_of`]) can be checked by finite differences at all: tangents
/// rounded beyond 1e-6 of the derivative are the sign of terms some 1e10
/// times the result cancelling, and the primal then loses the small terms'
/// variation in the big ones' rounding, so the differences show a
/// derivative without them (seed 2000424985: the differences miss a term
/// of 0.088 that the accumulator of 1e16 absorbs).
fn differences_see(g: f64, rounding: Option<f64>) -> bool {
    rounding.is_some_and(|r| r <= 1e-6 * (1.0 + g.abs()))
}

/// What [`derivatives`] compared.
#[derive(Copy, Clone, Debug, Default)]
pub struct Compared {
    /// Gradient entries compared between forward and reverse mode.
    pub modes: usize,
    /// Gradient entries compared with finite differences.
    pub finite_differences: usize,
}

/// Derivative consistency on a generated program (generate it with
/// `Config::smooth`): where the primal runs, forward mode (width 1 and 3,
/// and sparse mode, whose JIT run must equal its interpreter run bit for
/// bit) equals reverse mode within 1e-9 relative (or within the rounding of
/// the derivatives' own arithmetic, `rounding_of`), and both are within
/// 1e-4 of central finite differences at each leaf where the function is
/// smooth (two step sizes agree, `continuous_at`) and well conditioned
/// (`differences_see`).
pub fn derivatives(p: &Program) -> Result<Compared, String> {
    let mut compared = Compared::default();
    let l = load(p)?;
    let opts = RunOptions::default();
    let f = |args: &[Val]| -> Option<f64> {
        match irad::run(
            &l.src,
            &l.module,
            &irad::RunRequest {
                opts: opts.clone(),
                ..irad::RunRequest::new(l.func, &fresh(args))
            },
        ) {
            Ok(Val::F64(y)) if y.is_finite() => Some(y),
            _ => None,
        }
    };
    let Some(f0) = f(&l.args) else {
        return Ok(compared);
    };
    let registry = irad::rules::Registry::new();
    let ctx = |what: &str| format!("{what}\n{}\nargs: {}", p.source, p.args);
    let (rev, _) = irad::grad_reverse(
        &l.src,
        &l.module,
        l.func,
        &l.args,
        &registry,
        &GradOptions::default(),
    )
    .map_err(|e| ctx(&format!("reverse mode fails where the primal runs: {e}")))?;
    // Dense forward mode with one and three tangents, and sparse mode.
    let dense3 = irad::ir::Lanes::dense(3).unwrap_or(irad::ir::Lanes::ONE);
    for lanes in [irad::ir::Lanes::ONE, dense3, irad::ir::Lanes::Sparse] {
        let gopts = GradOptions {
            lanes,
            ..GradOptions::default()
        };
        let fwd = forward_both_backends(&l, &registry, &gopts)
            .map_err(|e| ctx(&format!("forward mode ({lanes:?}): {e}")))?;
        if !same(&fwd.value, &rev.value) {
            return Err(ctx(&format!(
                "forward value {:?} != reverse value {:?}",
                fwd.value, rev.value
            )));
        }
        let params = l.module[l.func].param_types();
        for at in leaves(&l.args, &params) {
            let (Some(a), Some(b)) = (entry(&fwd.gradient, at), entry(&rev.gradient, at)) else {
                return Err(ctx(&format!("no gradient entry for {at:?}")));
            };
            if a.is_finite() && b.is_finite() {
                if (a - b).abs() > 1e-9 * (1.0 + a.abs() + b.abs()) {
                    if within_rounding(a, b, rounding_of(&l, &registry, at)) {
                        continue;
                    }
                    return Err(ctx(&format!(
                        "{lanes:?}: forward {a} != reverse {b} at {at:?}"
                    )));
                }
                compared.modes += 1;
            }
        }
    }
    let params = l.module[l.func].param_types();
    for at in leaves(&l.args, &params) {
        let Some(g) = entry(&rev.gradient, at) else {
            continue;
        };
        let fd = |h: f64| -> Option<f64> {
            let up = f(&moved(&l.args, at, h))?;
            let down = f(&moved(&l.args, at, -h))?;
            Some((up - down) / (2.0 * h))
        };
        // The mean of the values a step either side.
        let fd_mid = |h: f64| -> Option<f64> {
            let up = f(&moved(&l.args, at, h))?;
            let down = f(&moved(&l.args, at, -h))?;
            Some((up + down) / 2.0)
        };
        let (Some(d1), Some(d2)) = (fd(1e-5), fd(2.5e-6)) else {
            continue;
        };
        // Two step sizes that disagree mean a kink or a branch nearby.
        if !g.is_finite() || (d1 - d2).abs() > 1e-5 * (1.0 + d1.abs()) {
            continue;
        }
        if !differences_resolve(f0, g, d2, || fd(1e-3)) {
            continue;
        }
        if (g - d2).abs() > 1e-4 * (1.0 + d2.abs()) {
            if !continuous_at(f0, || Some((fd_mid(1e-5)?, fd_mid(2.5e-6)?)))
                || !differences_see(g, rounding_of(&l, &registry, at))
            {
                continue;
            }
            return Err(ctx(&format!(
                "gradient {g} but finite differences {d2} (and {d1}) at {at:?}"
            )));
        }
        compared.finite_differences += 1;
    }
    Ok(compared)
}

/// Forward mode as `opts` asks, in the interpreter; for sparse mode also
/// in the JIT, from the same derivation, whose value and gradient must be
/// the interpreter's bit for bit (both build sparse tangents with one
/// implementation, docs/forward.md).
fn forward_both_backends(
    l: &Loaded,
    registry: &irad::rules::Registry,
    opts: &GradOptions,
) -> Result<irad::Gradient, String> {
    let req = irad::GradRequest {
        mode: irad::Mode::Forward,
        opts: opts.clone(),
        ..irad::GradRequest::new(l.func, &l.args)
    };
    let mut execs = vec![Backend::Interp.exec()];
    if opts.lanes == irad::ir::Lanes::Sparse {
        execs.push(Backend::Jit.exec());
    }
    let (runs, _) = irad::grad_each(&l.src, &l.module, registry, &req, &execs)
        .map_err(|e| format!("fails where the primal runs: {e}"))?;
    let mut runs = runs.into_iter();
    let interp = runs
        .next()
        .ok_or("grad_each ran nothing")?
        .map_err(|e| format!("fails where the primal runs: {e}"))?;
    if let Some(jit) = runs.next() {
        let jit = jit.map_err(|e| format!("the JIT fails where the interpreter runs: {e}"))?;
        let bits = |g: &irad::Gradient| {
            let mut parts = vec![g.value.clone()];
            parts.extend(g.gradient.iter().map(|x| x.clone().unwrap_or(Val::Unit)));
            Val::Tuple(parts.into())
        };
        if !same(&bits(&interp), &bits(&jit)) {
            return Err(format!(
                "interpreter {:?} but JIT {:?}",
                bits(&interp),
                bits(&jit)
            ));
        }
    }
    Ok(interp)
}

/// What [`second_order`] compared.
#[derive(Copy, Clone, Debug, Default)]
pub struct SecondOrder {
    /// Hessian-vector product entries compared with finite differences of
    /// the gradient.
    pub finite_differences: usize,
    /// Whether the HVP ran at all (the primal runs at the point).
    pub ran: bool,
    /// Entries of reverse over forward, forward over forward and forward
    /// over sparse compared with forward over reverse.
    pub modes: usize,
}

/// Second-order consistency on a generated smooth program: where the primal
/// runs, the Hessian-vector product (forward over reverse, `irad::hvp`)
/// along a direction made from the leaf positions is the same bits in the
/// interpreter and the JIT, its gradient is reverse mode's, and each entry
/// is within 1e-4 of central finite differences of the reverse-mode
/// gradient along the direction wherever two step sizes agree (the gradient
/// is smooth there). Reverse over forward, forward over forward and
/// forward over sparse (`irad::hvp_via`) give the same bits in both backends too, and each
/// finite entry of their products within 1e-8 · (1 + |a| + |b|) of forward
/// over reverse's (the same terms summed in another order).
pub fn second_order(p: &Program) -> Result<SecondOrder, String> {
    let mut out = SecondOrder::default();
    let l = load(p)?;
    let ctx = |what: &str| format!("{what}\n{}\nargs: {}", p.source, p.args);
    let runs = irad::run(
        &l.src,
        &l.module,
        &irad::RunRequest::new(l.func, &fresh(&l.args)),
    );
    if !matches!(runs, Ok(Val::F64(y)) if y.is_finite()) {
        return Ok(out);
    }
    let params = l.module[l.func].param_types();
    let at = leaves(&l.args, &params);
    // The direction: small, varied entries, a function of the position.
    let dir: Vec<f64> = (0..at.len())
        .map(|k| ((k * 7 + 3) % 11) as f64 / 5.0 - 1.0)
        .collect();
    let mut tangent = fresh(&l.args);
    for (&leaf, &d) in at.iter().zip(&dir) {
        set_leaf(&mut tangent, leaf, d);
    }
    let registry = irad::rules::Registry::new();
    let mut by_backend = Vec::new();
    for b in [Backend::Interp, Backend::Jit] {
        let req = irad::GradRequest {
            opts: GradOptions {
                exec: b.exec(),
                ..GradOptions::default()
            },
            ..irad::GradRequest::new(l.func, &l.args)
        };
        let (h, _) = irad::hvp(&l.src, &l.module, &registry, &req, &fresh(&tangent))
            .map_err(|e| ctx(&format!("hvp fails ({b:?}) where the primal runs: {e}")))?;
        by_backend.push(h);
    }
    let bits = |h: &irad::Hvp| {
        let mut parts = vec![h.value.clone()];
        parts.extend(h.gradient.iter().map(|x| x.clone().unwrap_or(Val::Unit)));
        parts.extend(h.hvp.iter().map(|x| x.clone().unwrap_or(Val::Unit)));
        Val::Tuple(parts.into())
    };
    if !same(&bits(&by_backend[0]), &bits(&by_backend[1])) {
        return Err(ctx(&format!(
            "hvp: interpreter {:?} but JIT {:?}",
            bits(&by_backend[0]),
            bits(&by_backend[1])
        )));
    }
    out.ran = true;
    let h = &by_backend[0];
    out.modes = other_mode(&l, &tangent, h, &at, &ctx, HvpMode::ReverseOverForward)?
        + other_mode(&l, &tangent, h, &at, &ctx, HvpMode::ForwardOverForward)?
        + other_mode(&l, &tangent, h, &at, &ctx, HvpMode::ForwardOverSparse)?;
    let grad_at = |args: &[Val]| -> Option<Vec<Option<Val>>> {
        irad::grad_reverse(
            &l.src,
            &l.module,
            l.func,
            &fresh(args),
            &registry,
            &GradOptions::default(),
        )
        .ok()
        .map(|(g, _)| g.gradient)
    };
    let g0 = grad_at(&l.args).ok_or_else(|| ctx("reverse mode fails where the hvp runs"))?;
    for &leaf in &at {
        let (Some(a), Some(b)) = (entry(&h.gradient, leaf), entry(&g0, leaf)) else {
            return Err(ctx(&format!("no gradient entry for {leaf:?}")));
        };
        if a.is_finite() && b.is_finite() && (a - b).abs() > 1e-12 * (1.0 + a.abs() + b.abs()) {
            return Err(ctx(&format!(
                "the hvp's gradient {a} != reverse mode's {b} at {leaf:?}"
            )));
        }
    }
    let along = |step: f64| -> Vec<Val> {
        let mut args = fresh(&l.args);
        for (&leaf, &d) in at.iter().zip(&dir) {
            args = moved(&args, leaf, step * d);
        }
        args
    };
    let fd = |h: f64| -> Option<Vec<Option<Val>>> {
        let up = grad_at(&along(h))?;
        let down = grad_at(&along(-h))?;
        Some(
            up.iter()
                .zip(&down)
                .map(|(u, d)| match (u, d) {
                    (Some(u), Some(d)) => Some(combine(u, d, h)),
                    _ => None,
                })
                .collect(),
        )
    };
    // Differences cannot follow huge values (see `differences_resolve`).
    if !matches!(h.value, Val::F64(y) if y.abs() <= 1e6) {
        return Ok(out);
    }
    let (Some(d1), Some(d2)) = (fd(1e-4), fd(2.5e-5)) else {
        return Ok(out);
    };
    for &leaf in &at {
        let (Some(hv), Some(a), Some(b)) =
            (entry(&h.hvp, leaf), entry(&d1, leaf), entry(&d2, leaf))
        else {
            continue;
        };
        if !hv.is_finite()
            || !a.is_finite()
            || !b.is_finite()
            || (a - b).abs() > 1e-5 * (1.0 + b.abs())
        {
            continue;
        }
        if (hv - b).abs() > 1e-4 * (1.0 + b.abs()) {
            return Err(ctx(&format!(
                "hvp entry {hv} but finite differences of the gradient {b} (and {a}) at {leaf:?}"
            )));
        }
        out.finite_differences += 1;
    }
    Ok(out)
}

/// Hessian-vector products by `mode` (reverse over forward, forward over
/// forward, forward over sparse) along `tangent` on both backends: the same bits in each, and
/// each finite entry of its product within 1e-8 · (1 + |a| + |b|) of
/// forward over reverse's `h` at the leaves `at`; how many entries were
/// compared.
fn other_mode(
    l: &Loaded,
    tangent: &[Val],
    h: &irad::Hvp,
    at: &[(usize, Option<usize>)],
    ctx: &dyn Fn(&str) -> String,
    mode: HvpMode,
) -> Result<usize, String> {
    let name = match mode {
        HvpMode::ReverseOverForward => "reverse over forward",
        HvpMode::ForwardOverForward => "forward over forward",
        HvpMode::ForwardOverSparse => "forward over sparse",
        HvpMode::ForwardOverReverse => "forward over reverse",
    };
    let registry = irad::rules::Registry::new();
    let mut runs = Vec::new();
    for b in [Backend::Interp, Backend::Jit] {
        let req = irad::GradRequest {
            opts: GradOptions {
                exec: b.exec(),
                ..GradOptions::default()
            },
            ..irad::GradRequest::new(l.func, &l.args)
        };
        let (r, _) = irad::hvp_via(&l.src, &l.module, &registry, &req, &fresh(tangent), mode)
            .map_err(|e| {
                ctx(&format!(
                    "{name} fails ({b:?}) where forward over reverse runs: {e}"
                ))
            })?;
        let mut parts = vec![r.value.clone()];
        parts.extend(r.hvp.iter().map(|x| x.clone().unwrap_or(Val::Unit)));
        runs.push((Val::Tuple(parts.into()), r));
    }
    if !same(&runs[0].0, &runs[1].0) {
        return Err(ctx(&format!(
            "{name}: interpreter {:?} but JIT {:?}",
            runs[0].0, runs[1].0
        )));
    }
    let mut compared = 0;
    for &leaf in at {
        let (Some(a), Some(b)) = (entry(&h.hvp, leaf), entry(&runs[0].1.hvp, leaf)) else {
            return Err(ctx(&format!("no hvp entry for {leaf:?}")));
        };
        if !a.is_finite() || !b.is_finite() {
            continue;
        }
        if (a - b).abs() > 1e-8 * (1.0 + a.abs() + b.abs()) {
            return Err(ctx(&format!(
                "hvp entry {a} by forward over reverse but {b} by {name} at {leaf:?}"
            )));
        }
        compared += 1;
    }
    Ok(compared)
}

/// Sets leaf `at` of `args` to `x`.
fn set_leaf(args: &mut [Val], at: (usize, Option<usize>), x: f64) {
    match (args.get_mut(at.0), at.1) {
        (Some(v @ Val::F64(_)), None) => *v = Val::F64(x),
        (Some(v @ Val::Tuple(_)), Some(k)) => {
            if let Val::Tuple(t) = v {
                *v = with_field(&t.clone(), k, |_| x);
            }
        }
        (Some(Val::Array(arr)), Some(k)) => {
            if let ArrayData::F64(xs) = &mut *arr.0.borrow_mut()
                && let Some(slot) = xs.get_mut(k)
            {
                *slot = x;
            }
        }
        _ => {}
    }
}

/// `(u - d) / 2h` entry by entry, for f64s and f64 arrays.
fn combine(u: &Val, d: &Val, h: f64) -> Val {
    match (u, d) {
        (Val::F64(a), Val::F64(b)) => Val::F64((a - b) / (2.0 * h)),
        (Val::Array(a), Val::Array(b)) => match (&*a.0.borrow(), &*b.0.borrow()) {
            (ArrayData::F64(xs), ArrayData::F64(ys)) => Val::f64_array(
                xs.iter()
                    .zip(ys)
                    .map(|(x, y)| (x - y) / (2.0 * h))
                    .collect(),
            ),
            _ => Val::Unit,
        },
        (Val::Tuple(xs), Val::Tuple(ys)) => Val::Tuple(
            xs.iter()
                .zip(ys.iter())
                .map(|(x, y)| combine(x, y, h))
                .collect::<Vec<_>>()
                .into(),
        ),
        _ => Val::Unit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jump_at_the_point_is_not_continuous_but_curvature_is() {
        // f(x) = 3 x^2 at x = 0.5: the means either side differ from f by
        // 3 h^2, shrinking sixteenfold from h = 1e-5 to 2.5e-6.
        let f = |x: f64| 3.0 * x * x;
        let mid = |h: f64| (f(0.5 + h) + f(0.5 - h)) / 2.0;
        assert!(continuous_at(f(0.5), || Some((mid(1e-5), mid(2.5e-6)))));
        // A steep but smooth function: differences above the absolute floor.
        let g = |x: f64| 1e6 * x * x;
        let mid = |h: f64| (g(0.5 + h) + g(0.5 - h)) / 2.0;
        assert!(continuous_at(g(0.5), || Some((mid(1e-5), mid(2.5e-6)))));
        // The same function but with another value at the point itself.
        assert!(!continuous_at(g(0.5) + 0.25, || Some((
            mid(1e-5),
            mid(2.5e-6)
        ))));
        // No mean (the primal fails a step away): nothing to judge by.
        assert!(!continuous_at(1.0, || None));
    }

    fn loaded(file: &str) -> Loaded {
        let path = format!("{}/tests/regressions/{file}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).expect("a regression program");
        load(&Program::from_text(&text).expect("an args line")).expect("it loads")
    }

    #[test]
    fn cancelling_huge_terms_are_rounding_but_a_wrong_derivative_is_not() {
        let registry = irad::rules::Registry::new();
        // The runner's finding: forward and reverse differ by 2.2e-3 at %x2
        // (leaf 2), all of it the rounding of a tangent of 5e13, and the
        // differences cannot see a term of 0.088.
        let l = loaded("derivatives-runner-2000424985.irad");
        let (a, b) = (-1.2486407367135721, -1.2464291780496557);
        let r = rounding_of(&l, &registry, (2, None));
        assert!(r.is_some_and(|r| r > 1e-4), "{r:?}");
        assert!(within_rounding(a, b, r));
        assert!(!differences_see(b, r));
        // The same program, but a disagreement far beyond its rounding.
        assert!(!within_rounding(a, b + 0.1, r));
        // A program without huge terms: its rounding is tiny, so a
        // disagreement of 1e-6 is not explained by it, and finite
        // differences can check it.
        let l = loaded("derivatives-runner-2000376230.irad");
        let (g, _) = irad::grad_reverse(
            &l.src,
            &l.module,
            l.func,
            &l.args,
            &registry,
            &GradOptions::default(),
        )
        .expect("reverse mode runs");
        let b = entry(&g.gradient, (0, None)).expect("a gradient for %x0");
        let r = rounding_of(&l, &registry, (0, None));
        assert!(r.is_some_and(|r| r < 1e-12 * (1.0 + b.abs())), "{r:?}");
        assert!(!within_rounding(b + 1e-6, b, r));
        assert!(!within_rounding(b, b - 1e-6, r));
        assert!(differences_see(b, r));
        // No rounding known (a seeded run failed): nothing is excused.
        assert!(!within_rounding(b, b + 1e-6, None));
        assert!(!differences_see(b, None));
    }
}
