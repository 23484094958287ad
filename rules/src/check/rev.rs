//! The rrule checker: runs every reverse rule of a registry on random points
//! of the test table (`crate::table`) and checks it against its primitive
//! and, through the adjoint identity, against its frule.
//!
//! For each test signature it builds one module holding the primal `@p`, the
//! frule at width 1 `@f1` ([`super::rule_function`]) and `@rr`: the rrule's
//! forward part and then its pullback in one function, with
//! [`crate::RevFwdOut::saved`] passed to the pullback as it is (no tape:
//! within one function those operands are in scope). `@rr` takes the
//! arguments, one shadow per `[f64]` array of an argument (zero on entry, as
//! in a forward sweep), one `dy` per f64 of the result outside arrays, and one
//! cotangent array per argument shadow and per result shadow, which it writes
//! into the shadows between the two parts: they stand for what the pullbacks
//! of later statements leave there. `@rr0` is the same with `dy` known to be
//! zero (`None`; built only when the result holds an f64 outside arrays). At
//! each sample point it checks, for both:
//! - (a) the forward part's primal result and every argument after it equal
//!   the primitive's, bit for bit up to NaN (or both fail with the same
//!   run-time error);
//! - (b) after the pullback every argument equals its entry state bit for bit
//!   (an in-place write is undone);
//! - (c) the forward part leaves every shadow zero, each result shadow is as
//!   long as its array, and the result's array k is argument i's array
//!   exactly when its shadow is that array's shadow;
//! - (d) the adjoint identity `<dy, J dx> = <J^T dy, dx>` in a random
//!   direction dx (f64 components uniform in [-1, 1], none for constants).
//!   The outputs are the result's f64s (cotangent `dy`) and the arrays the
//!   call leaves behind, the result's and the arguments' (cotangent: the
//!   contents of their shadows between the parts, each distinct shadow
//!   counted once); `J dx` is the frule's tangent of each. The inputs are the
//!   arguments' f64s (cotangent: what the pullback returns, `None` as 0) and
//!   their arrays on entry (cotangent: the shadows after the pullback). The
//!   error `|l - r| / max(1, sum of the magnitudes of the terms)` must be at
//!   most [`ADJOINT_TOLERANCE`].
//!
//! So a rule whose pullback gives no cotangent (comparisons, integer
//! operations, `floor`, `length`) passes exactly when its frule's tangent is
//! zero too. Assumes the interpreter is the reference semantics and the frule
//! is right (the finite-difference checker tests it). Guarantees: the result
//! is a function of the registry, the options and the table only (one
//! splitmix64 stream per signature, apart from the frule checker's); it never
//! panics, whatever a rule emits: a missing rule, a rule that fails to emit,
//! emits IR that does not verify, or computes wrong values gives a failing
//! report whose message names the first failure and the point.
//!
//! This file samples the points and builds the harness; `rev/function.rs`
//! builds `@rr`, and `rev/checks.rs` runs it and checks (a) to (d).

mod checks;
mod function;

use super::{
    CheckOptions, Outcome, RuleKind, RuleReport, Sample, SplitMix64, direction, fnv1a,
    primal_function, rule_function, run_function, sample_domain,
};
use crate::Registry;
use crate::table::{Domain, Signature};
use checks::{f64_array_refs, f64_len};
use function::rrule_function;
use irad_ir::interp::Interpreter;
use irad_ir::text::num::format_f64;
use irad_ir::{FuncId, Module, Type};

/// The largest adjoint error `|<dy, J dx> - <J^T dy, dx>| / max(1, sum of the
/// magnitudes of the terms)` an rrule may show. Both sides are sums of a few
/// products of values computed with a handful of roundings each, so a right
/// rule stays within a few units of 1e-16; 1e-10 leaves room for formulas
/// that differ between the frule and the rrule, and is far below the error of
/// any wrong partial.
pub const ADJOINT_TOLERANCE: f64 = 1e-10;

/// Checks the rrule of every signature of the test table: every primitive
/// but the AD ones, and those AD primitives a forward rule is made of
/// ([`crate::reverses_over_forward`]: `gemm` and the parts of duals).
pub fn check_rrules(reg: &Registry, opts: &CheckOptions) -> Vec<RuleReport> {
    crate::table::signatures()
        .iter()
        .filter(|sig| !crate::is_ad_prim(sig.prim) || crate::reverses_over_forward(sig.prim))
        .map(|sig| check_rrule_signature(reg, sig, opts))
        .collect()
}

/// Checks `reg`'s rrule for one signature on `opts.samples` random points;
/// stops at the first failing sample. A missing rrule (or frule, which gives
/// `J dx`) is a failing report.
pub fn check_rrule_signature(reg: &Registry, sig: &Signature, opts: &CheckOptions) -> RuleReport {
    let mut report = RuleReport::start(sig, RuleKind::Rrule);
    let harness = match Harness::build(reg, sig) {
        Ok(h) => h,
        Err(msg) => return report.fail(msg),
    };
    let mut rng = SplitMix64::new(opts.seed ^ fnv1a(format!("rrule {}", report.name).as_bytes()));
    let mut interp = Interpreter::new(&harness.module);
    report.run_samples(opts.samples, || {
        let mut point = Point::sample(&mut rng, sig, &harness.result);
        let primal = run_function(
            &mut interp,
            harness.primal,
            &harness.types,
            &point.args,
            &[],
        )
        .map_err(|e| format!("{e}, at {}", point.describe(sig)))?;
        point.sample_result_dy(&mut rng, &primal, &harness);
        harness
            .check_point(&mut interp, &point, &primal)
            .map_err(|msg| format!("{msg}, at {}", point.describe(sig)))
    });
    report
}

/// The module under test and the shape of `@rr`'s parameters and result.
struct Harness {
    module: Module,
    primal: FuncId,
    /// The frule at width 1, which gives `J dx`.
    frule: FuncId,
    /// `@rr`, and `@rr0` (dy known zero) when the result has f64s outside
    /// arrays.
    rrule: FuncId,
    rrule_zero: Option<FuncId>,
    /// The types of the arguments (constants included).
    types: Vec<Type>,
    result: Type,
    /// The indices of the non-constant arguments, which are parameters.
    live: Vec<usize>,
    /// For each argument shadow (depth-first through the live arguments),
    /// the index of its argument.
    shadow_owner: Vec<usize>,
}

/// One sample point.
struct Point {
    /// The arguments; `None` for constants.
    args: Vec<Option<Sample>>,
    /// The direction dx per argument; `None` for constants and arguments
    /// without a tangent type.
    dx: Vec<Option<Sample>>,
    /// The cotangent of each f64 of the result outside arrays.
    dy: Vec<f64>,
    /// What is written into each argument shadow between the parts.
    arg_dy: Vec<Vec<f64>>,
    /// What is written into each result shadow between the parts (as long
    /// as the primitive's result arrays).
    result_dy: Vec<Vec<f64>>,
}

impl Harness {
    fn build(reg: &Registry, sig: &Signature) -> Result<Harness, String> {
        let result = sig.result()?;
        let types = sig.types();
        let live: Vec<usize> = sig
            .args
            .iter()
            .enumerate()
            .filter(|(_, a)| !is_const(&a.domain))
            .map(|(i, _)| i)
            .collect();
        let mut shadow_owner = Vec::new();
        for &i in &live {
            let n = types.get(i).map_or(0, Type::shadow_leaves);
            shadow_owner.extend(std::iter::repeat_n(i, n));
        }
        let mut module = Module::new();
        let primal = primal_function(&mut module, sig, &result)
            .map_err(|e| format!("cannot build the primal: {e}"))?;
        let rrule = rrule_function(&mut module, "rr", reg, sig, false)?;
        let rrule_zero = if Type::cotangent_leaves(&result) > 0 {
            Some(
                rrule_function(&mut module, "rr0", reg, sig, true)
                    .map_err(|e| format!("with dy known to be zero: {e}"))?,
            )
        } else {
            None
        };
        let frule = rule_function(&mut module, "f1", reg, sig, irad_ir::Lanes::ONE)
            .map_err(|e| format!("the frule, which gives J dx, failed to emit: {e}"))?;
        if let Err(errs) = irad_ir::verify::verify_module(&module) {
            return Err(format!(
                "the rules' IR does not verify:\n{}",
                irad_ir::verify::render_errors(&module, &errs)
            ));
        }
        Ok(Harness {
            module,
            primal,
            frule,
            rrule,
            rrule_zero,
            types,
            result,
            live,
            shadow_owner,
        })
    }

    fn n_result_shadows(&self) -> usize {
        Type::shadow_leaves(&self.result)
    }
}

impl Point {
    /// The arguments, the direction and the cotangents of the argument
    /// shadows and of the result's f64s; the result shadows' cotangents come
    /// with [`Point::sample_result_dy`].
    fn sample(rng: &mut SplitMix64, sig: &Signature, result: &Type) -> Point {
        let mut args: Vec<Option<Sample>> = Vec::with_capacity(sig.args.len());
        for spec in &sig.args {
            let x = match &spec.domain {
                Domain::Const(_) => None,
                d => Some(sample_domain(rng, d, &args)),
            };
            args.push(x);
        }
        let dx = sig
            .args
            .iter()
            .zip(&args)
            .map(|(spec, x)| match x {
                Some(x) if spec.ty.has_cotangent() => Some(direction(rng, x)),
                _ => None,
            })
            .collect();
        let dy = (0..Type::cotangent_leaves(result))
            .map(|_| rng.uniform(-1.0, 1.0))
            .collect();
        let mut arg_dy = Vec::new();
        for x in args.iter().flatten() {
            let mut arrays = Vec::new();
            sample_leaves(x, &mut Vec::new(), &mut arrays);
            for a in arrays {
                arg_dy.push(a.iter().map(|_| rng.uniform(-1.0, 1.0)).collect());
            }
        }
        Point {
            args,
            dx,
            dy,
            arg_dy,
            result_dy: Vec::new(),
        }
    }

    /// Cotangents for the result shadows, as long as the primitive's result
    /// arrays (empty when it fails).
    fn sample_result_dy(
        &mut self,
        rng: &mut SplitMix64,
        primal: &Result<Outcome, String>,
        h: &Harness,
    ) {
        let mut arrays = Vec::new();
        if let Ok(p) = primal {
            // A result of the wrong shape shows as a failure of (a) later.
            let _ = f64_array_refs(&p.result, &h.result, &mut arrays);
        }
        self.result_dy = (0..h.n_result_shadows())
            .map(|k| {
                let n = arrays.get(k).and_then(|a| f64_len(a).ok()).unwrap_or(0);
                (0..n).map(|_| rng.uniform(-1.0, 1.0)).collect()
            })
            .collect();
    }

    /// `mul(0.5, 2.0), dx (0.1, -0.3), dy (0.7)`, and the shadow cotangents
    /// when there are any.
    fn describe(&self, sig: &Signature) -> String {
        let list = |xs: &[Option<Sample>], consts: bool| -> String {
            xs.iter()
                .zip(&sig.args)
                .filter_map(|(x, spec)| match (x, &spec.domain) {
                    (Some(x), _) => Some(x.to_string()),
                    (None, Domain::Const(c)) if consts => Some(crate::table::const_text(c)),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let floats = |xs: &[f64]| -> String {
            xs.iter()
                .map(|x| format_f64(*x))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut out = format!(
            "{}({}), dx ({})",
            sig.prim,
            list(&self.args, true),
            list(&self.dx, false)
        );
        if !self.dy.is_empty() {
            out.push_str(&format!(", dy ({})", floats(&self.dy)));
        }
        if !self.arg_dy.is_empty() {
            let parts: Vec<String> = self
                .arg_dy
                .iter()
                .map(|d| format!("[{}]", floats(d)))
                .collect();
            out.push_str(&format!(", argument shadows set to {}", parts.join(", ")));
        }
        if !self.result_dy.is_empty() {
            let parts: Vec<String> = self
                .result_dy
                .iter()
                .map(|d| format!("[{}]", floats(d)))
                .collect();
            out.push_str(&format!(", result shadows set to {}", parts.join(", ")));
        }
        out
    }
}

fn is_const(d: &Domain) -> bool {
    matches!(d, Domain::Const(_))
}

/// The f64s outside arrays and the `[f64]` arrays of a sample, depth-first.
fn sample_leaves(s: &Sample, f64s: &mut Vec<f64>, arrays: &mut Vec<Vec<f64>>) {
    match s {
        Sample::F64(x) => f64s.push(*x),
        Sample::F64s(xs) => arrays.push(xs.clone()),
        Sample::Tuple(xs) | Sample::Dual(xs) => {
            for x in xs {
                sample_leaves(x, f64s, arrays);
            }
        }
        _ => {}
    }
}
