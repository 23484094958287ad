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

use super::{
    CheckOptions, Outcome, RuleKind, RuleReport, Sample, SplitMix64, Verdict, direction, fnv1a,
    lane, primal_function, rule_function, run_function, sample_domain, show,
};
use crate::emit::{self, cotangent_leaves, shadow_leaves, value};
use crate::table::{Domain, Signature};
use crate::{Callee, PullbackCall, Registry, RevArg, RevCall, RuleError};
use irad_ir::interp::{ArrayData, ArrayRef, Interpreter, RunOptions, Val};
use irad_ir::text::num::format_f64;
use irad_ir::{FuncBuilder, FuncId, Module, Operand, Prim, Scalar, Type};
use std::rc::Rc;

/// The largest adjoint error `|<dy, J dx> - <J^T dy, dx>| / max(1, sum of the
/// magnitudes of the terms)` an rrule may show. Both sides are sums of a few
/// products of values computed with a handful of roundings each, so a right
/// rule stays within a few units of 1e-16; 1e-10 leaves room for formulas
/// that differ between the frule and the rrule, and is far below the error of
/// any wrong partial.
pub const ADJOINT_TOLERANCE: f64 = 1e-10;

/// Checks the rrule of every signature of the test table (the AD primitives
/// have none and are not in it).
pub fn check_rrules(reg: &Registry, opts: &CheckOptions) -> Vec<RuleReport> {
    crate::table::signatures()
        .iter()
        .filter(|sig| !crate::is_ad_prim(sig.prim))
        .map(|sig| check_rrule_signature(reg, sig, opts))
        .collect()
}

/// Checks `reg`'s rrule for one signature on `opts.samples` random points;
/// stops at the first failing sample. A missing rrule (or frule, which gives
/// `J dx`) is a failing report.
pub fn check_rrule_signature(reg: &Registry, sig: &Signature, opts: &CheckOptions) -> RuleReport {
    let name = sig.to_string();
    let mut report = RuleReport {
        name: name.clone(),
        prim: sig.prim,
        kind: RuleKind::Rrule,
        samples: 0,
        max_error: 0.0,
        verdict: Verdict::Pass,
        message: None,
    };
    let harness = match Harness::build(reg, sig) {
        Ok(h) => h,
        Err(msg) => {
            report.verdict = Verdict::Fail;
            report.message = Some(msg);
            return report;
        }
    };
    let mut rng = SplitMix64::new(opts.seed ^ fnv1a(format!("rrule {name}").as_bytes()));
    let mut interp = Interpreter::new(&harness.module);
    for _ in 0..opts.samples {
        let mut point = Point::sample(&mut rng, sig, &harness.result);
        let primal = run_function(
            &mut interp,
            harness.primal,
            &harness.types,
            &point.args,
            &[],
        );
        point.sample_result_dy(&mut rng, &primal, &harness);
        report.samples += 1;
        match harness.check_point(&mut interp, &point, &primal) {
            Ok(err) => report.max_error = report.max_error.max(err),
            Err(msg) => {
                report.verdict = Verdict::Fail;
                report.message = Some(format!("{msg}, at {}", point.describe(sig)));
                break;
            }
        }
    }
    report
}

/// The module under test and the shape of `@rr`'s parameters and result.
struct Harness {
    module: Module,
    primal: FuncId,
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

/// The frule's `J dx`, split like the cotangents.
struct Tangents {
    /// Of the result's f64s outside arrays.
    result_f64s: Vec<f64>,
    /// Of the result's `[f64]` arrays.
    result_arrays: Vec<Vec<f64>>,
    /// Of the arguments' `[f64]` arrays after the call (in shadow order).
    arg_arrays: Vec<Vec<f64>>,
}

/// What one run of `@rr` gave, split by the layout of its result.
struct RevRun {
    /// The forward part's result itself, for identities.
    result: Val,
    /// A deep copy of the result after the forward part.
    result_copy: Val,
    /// Deep copies of the live arguments after the forward part.
    args_copy: Vec<Val>,
    /// The live arguments after the pullback.
    args_after: Vec<Val>,
    /// Copies of the argument shadows, then the result shadows, after the
    /// forward part.
    shadows_fwd: Vec<Val>,
    /// The result shadows themselves.
    result_shadows: Vec<Val>,
    /// Copies of every shadow between the parts (argument shadows first).
    shadows_mid: Vec<Val>,
    /// The argument shadows after the pullback.
    arg_shadows_after: Vec<Val>,
    /// The pullback's cotangents of the live arguments' f64s, flat.
    cotangents: Vec<f64>,
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
            let n = types.get(i).map_or(0, shadow_leaves);
            shadow_owner.extend(std::iter::repeat_n(i, n));
        }
        let mut module = Module::new();
        let primal = primal_function(&mut module, sig, &result)
            .map_err(|e| format!("cannot build the primal: {e}"))?;
        let rrule = rrule_function(&mut module, "rr", reg, sig, false)?;
        let rrule_zero = if cotangent_leaves(&result) > 0 {
            Some(
                rrule_function(&mut module, "rr0", reg, sig, true)
                    .map_err(|e| format!("with dy known to be zero: {e}"))?,
            )
        } else {
            None
        };
        let frule = rule_function(&mut module, "f1", reg, sig, 1)
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
        shadow_leaves(&self.result)
    }

    /// Checks one point with `@rr` and `@rr0`; the largest adjoint error.
    fn check_point(
        &self,
        interp: &mut Interpreter<'_>,
        p: &Point,
        primal: &Result<Outcome, String>,
    ) -> Result<f64, String> {
        // J dx, once for both functions; only when the primitive runs.
        let tangents = match primal {
            Ok(_) => Some(self.frule_tangents(interp, p)?),
            Err(_) => None,
        };
        let mut err = self.check_function(interp, self.rrule, false, p, primal, &tangents)?;
        if let Some(f) = self.rrule_zero {
            let e = self
                .check_function(interp, f, true, p, primal, &tangents)
                .map_err(|e| format!("with dy known to be zero (None): {e}"))?;
            err = err.max(e);
        }
        Ok(err)
    }

    /// Checks (a) to (d) for one run of `f`.
    fn check_function(
        &self,
        interp: &mut Interpreter<'_>,
        f: FuncId,
        zero_dy: bool,
        p: &Point,
        primal: &Result<Outcome, String>,
        tangents: &Option<Tangents>,
    ) -> Result<f64, String> {
        let run = self.run(interp, f, p);
        let (primal, run) = match (primal, run) {
            (Err(a), Err(b)) if *a == b => return Ok(0.0),
            (Err(a), Err(b)) => {
                return Err(format!(
                    "the primitive fails with `{a}`, the rule with `{b}`"
                ));
            }
            (Err(a), Ok(_)) => {
                return Err(format!("the primitive fails with `{a}`, the rule does not"));
            }
            (Ok(_), Err(b)) => {
                return Err(format!("the rule fails with `{b}`, the primitive does not"));
            }
            (Ok(primal), Ok(run)) => (primal, run),
        };
        let tangents = tangents
            .as_ref()
            .ok_or("internal error: no frule tangents")?;
        self.check_primal(primal, &run)?;
        self.check_restored(p, &run)?;
        let aliased = self.check_shadows(primal, &run)?;
        self.adjoint(p, &run, tangents, &aliased, zero_dy)
    }

    /// (a): the forward part's primal result and the arguments after it.
    fn check_primal(&self, primal: &Outcome, run: &RevRun) -> Result<(), String> {
        if !primal.result.same(&run.result_copy) {
            return Err(format!(
                "the forward part's primal result {} differs from the primitive's {}",
                show(&run.result_copy),
                show(&primal.result)
            ));
        }
        for (&i, after) in self.live.iter().zip(&run.args_copy) {
            let Some(Some(want)) = primal.args.get(i) else {
                return Err("internal error: a live argument without value".into());
            };
            if !want.same(after) {
                return Err(format!(
                    "argument {} is {} after the forward part, {} after the primitive",
                    i + 1,
                    show(after),
                    show(want)
                ));
            }
        }
        Ok(())
    }

    /// (b): every argument is as on entry after the pullback.
    fn check_restored(&self, p: &Point, run: &RevRun) -> Result<(), String> {
        for (&i, after) in self.live.iter().zip(&run.args_after) {
            let Some(Some(entry)) = p.args.get(i) else {
                return Err("internal error: a live argument without sample".into());
            };
            let entry = entry.to_val();
            if !entry.same(after) {
                return Err(format!(
                    "argument {} is {} after the pullback, {} on entry: the pullback does not restore it",
                    i + 1,
                    show(after),
                    show(&entry)
                ));
            }
        }
        Ok(())
    }

    /// (c): shadows zero after the forward part, result shadows as long as
    /// their arrays, and shadows aliased exactly where arrays are. Returns,
    /// per result shadow, whether it is an argument shadow or an earlier
    /// result shadow (so that the adjoint identity counts it once).
    fn check_shadows(&self, primal: &Outcome, run: &RevRun) -> Result<Vec<bool>, String> {
        let n_as = self.shadow_owner.len();
        let mut primal_arrays = Vec::new();
        f64_array_refs(&primal.result, &self.result, &mut primal_arrays)?;
        for (k, s) in run.shadows_fwd.iter().enumerate() {
            let xs = f64_data(s)?;
            let what = match self.shadow_owner.get(k) {
                Some(i) => format!("the shadow of argument {}", i + 1),
                None => self.result_shadow_name(k - n_as),
            };
            if k >= n_as {
                let want = primal_arrays.get(k - n_as).map(f64_len).transpose()?;
                if want != Some(xs.len()) {
                    return Err(format!(
                        "{what} has {} element(s), the result's array {}",
                        xs.len(),
                        want.map_or_else(|| "none".into(), |n| n.to_string())
                    ));
                }
            }
            if xs.iter().any(|&x| x != 0.0) {
                return Err(format!(
                    "{what} is {} after the forward part: it must stay zero (the forward sweep leaves cotangents alone)",
                    show(s)
                ));
            }
        }
        let mut result_arrays = Vec::new();
        f64_array_refs(&run.result, &self.result, &mut result_arrays)?;
        let mut arg_arrays = Vec::new();
        for (&i, v) in self.live.iter().zip(&run.args_after) {
            let ty = self.types.get(i).ok_or("internal error: argument type")?;
            f64_array_refs(v, ty, &mut arg_arrays)?;
        }
        let arg_shadows = &run.arg_shadows_after;
        let mut aliased = Vec::with_capacity(run.result_shadows.len());
        for (k, (array, shadow)) in result_arrays.iter().zip(&run.result_shadows).enumerate() {
            let mut seen = false;
            for (m, (a, s)) in arg_arrays.iter().zip(arg_shadows).enumerate() {
                let same_array = same_ref(array, a);
                if same_array != same_ref(shadow, s) {
                    let i = self.shadow_owner.get(m).map_or(0, |i| i + 1);
                    return Err(alias_message(
                        &self.result_shadow_name(k),
                        &format!("argument {i}'s array"),
                        same_array,
                    ));
                }
                seen |= same_array;
            }
            for (k2, (a, s)) in result_arrays
                .iter()
                .zip(&run.result_shadows)
                .take(k)
                .enumerate()
            {
                let same_array = same_ref(array, a);
                if same_array != same_ref(shadow, s) {
                    return Err(alias_message(
                        &self.result_shadow_name(k),
                        &format!("array {} of the result", k2 + 1),
                        same_array,
                    ));
                }
                seen |= same_array;
            }
            aliased.push(seen);
        }
        Ok(aliased)
    }

    /// `the shadow of the result` or `the shadow of array k of the result`.
    fn result_shadow_name(&self, k: usize) -> String {
        if self.n_result_shadows() == 1 {
            "the shadow of the result".into()
        } else {
            format!("the shadow of array {} of the result", k + 1)
        }
    }

    /// (d): the adjoint identity; the error.
    fn adjoint(
        &self,
        p: &Point,
        run: &RevRun,
        t: &Tangents,
        aliased: &[bool],
        zero_dy: bool,
    ) -> Result<f64, String> {
        let n_as = self.shadow_owner.len();
        let mut left = Vec::new();
        if t.result_f64s.len() != p.dy.len() {
            return Err(format!(
                "internal error: {} result tangents for {} cotangents",
                t.result_f64s.len(),
                p.dy.len()
            ));
        }
        if !zero_dy {
            left.extend(p.dy.iter().zip(&t.result_f64s).map(|(d, t)| d * t));
        }
        let mid_results = run.shadows_mid.get(n_as..).unwrap_or(&[]);
        for (k, (s, tan)) in mid_results.iter().zip(&t.result_arrays).enumerate() {
            if aliased.get(k).copied().unwrap_or(false) {
                continue;
            }
            let what = self.result_shadow_name(k);
            products(&mut left, &what, &f64_data(s)?, tan)?;
        }
        let mid_args = run.shadows_mid.get(..n_as).unwrap_or(&[]);
        for (m, (s, tan)) in mid_args.iter().zip(&t.arg_arrays).enumerate() {
            let i = self.shadow_owner.get(m).map_or(0, |i| i + 1);
            products(
                &mut left,
                &format!("the shadow of argument {i}"),
                &f64_data(s)?,
                tan,
            )?;
        }
        let mut right = Vec::new();
        let mut cotangents = run.cotangents.iter();
        let mut shadows = run.arg_shadows_after.iter();
        let mut cot_text = Vec::new();
        let mut shadow_text = Vec::new();
        for &i in &self.live {
            let ty = self.types.get(i).ok_or("internal error: argument type")?;
            let (mut xs, mut arrays) = (Vec::new(), Vec::new());
            if let Some(Some(dx)) = p.dx.get(i) {
                sample_leaves(dx, &mut xs, &mut arrays);
            }
            let n = cotangent_leaves(ty);
            let cs: Vec<f64> = cotangents.by_ref().take(n).copied().collect();
            if cs.len() != n || xs.len() != n {
                return Err("internal error: cotangent count".into());
            }
            right.extend(cs.iter().zip(&xs).map(|(c, x)| c * x));
            if n > 0 {
                let parts: Vec<String> = cs.iter().map(|c| format_f64(*c)).collect();
                cot_text.push(format!("argument {}: {}", i + 1, parts.join(", ")));
            }
            for dx in &arrays {
                let s = shadows.next().ok_or("internal error: shadow count")?;
                let what = format!("the shadow of argument {}", i + 1);
                products(&mut right, &what, &f64_data(s)?, dx)?;
                shadow_text.push(format!("argument {}: {}", i + 1, show(s)));
            }
        }
        let (l, r) = (left.iter().sum::<f64>(), right.iter().sum::<f64>());
        let scale = [left.as_slice(), right.as_slice()]
            .iter()
            .map(|ts| ts.iter().map(|x| x.abs()).sum::<f64>())
            .fold(1.0, f64::max);
        let err = adjoint_error(l, r, scale);
        if err > ADJOINT_TOLERANCE || err.is_nan() {
            let mut msg = format!(
                "adjoint identity fails: <dy, J dx> = {} with J dx from the frule, but <J^T dy, dx> = {} from the pullback (error {err:.3e})",
                format_f64(l),
                format_f64(r)
            );
            if !cot_text.is_empty() {
                msg.push_str(&format!("; cotangents {}", cot_text.join("; ")));
            }
            if !shadow_text.is_empty() {
                msg.push_str(&format!(
                    "; shadows after the pullback {}",
                    shadow_text.join("; ")
                ));
            }
            return Err(msg);
        }
        Ok(err)
    }

    /// Runs the frule at width 1 in direction dx; its tangents, split.
    fn frule_tangents(&self, interp: &mut Interpreter<'_>, p: &Point) -> Result<Tangents, String> {
        let run = run_function(
            interp,
            self.frule,
            &self.types,
            &p.args,
            std::slice::from_ref(&p.dx),
        )
        .map_err(|e| format!("the frule, which gives J dx, fails with `{e}`"))?;
        let mut t = Tangents {
            result_f64s: Vec::new(),
            result_arrays: Vec::new(),
            arg_arrays: Vec::new(),
        };
        if self.result.has_tangent() {
            let tr = lane(&run.result, 0).ok_or("the frule's result is not a dual")?;
            tangent_leaves(&tr, &self.result, &mut t.result_f64s, &mut t.result_arrays)?;
        }
        for &i in &self.live {
            let ty = self.types.get(i).ok_or("internal error: argument type")?;
            if shadow_leaves(ty) == 0 {
                continue;
            }
            let v = run
                .args
                .get(i)
                .and_then(Option::as_ref)
                .ok_or("internal error: frule argument")?;
            let ta = lane(v, 0).ok_or("the frule's argument is not a dual")?;
            tangent_leaves(&ta, ty, &mut Vec::new(), &mut t.arg_arrays)?;
        }
        Ok(t)
    }

    /// Runs `@rr` (or `@rr0`) on fresh copies of the point.
    fn run(&self, interp: &mut Interpreter<'_>, f: FuncId, p: &Point) -> Result<RevRun, String> {
        let mut vals = Vec::new();
        for &i in &self.live {
            let x = p
                .args
                .get(i)
                .and_then(Option::as_ref)
                .ok_or("internal error: a live argument without sample")?;
            vals.push(x.to_val());
        }
        let n_live = vals.len();
        // Argument shadows enter zero, as in a forward sweep.
        for d in &p.arg_dy {
            vals.push(Val::f64_array(vec![0.0; d.len()]));
        }
        vals.extend(p.dy.iter().map(|&d| Val::F64(d)));
        for d in p.arg_dy.iter().chain(&p.result_dy) {
            vals.push(Val::f64_array(d.clone()));
        }
        let out = interp
            .run(f, &vals, &RunOptions::default())
            .map_err(|e| e.msg)?;
        let Val::Tuple(parts) = out else {
            return Err("internal error: @rr returned no tuple".into());
        };
        let n_as = p.arg_dy.len();
        let n_rs = self.n_result_shadows();
        let mut parts = parts.iter().cloned();
        let mut take = |n: usize| -> Result<Vec<Val>, String> {
            let v: Vec<Val> = parts.by_ref().take(n).collect();
            if v.len() == n {
                Ok(v)
            } else {
                Err("internal error: @rr returned too few values".into())
            }
        };
        let mut first = take(2)?.into_iter();
        let (Some(result), Some(result_copy)) = (first.next(), first.next()) else {
            return Err("internal error: @rr returned too few values".into());
        };
        let args_copy = take(n_live)?;
        let shadows_fwd = take(n_as + n_rs)?;
        let result_shadows = take(n_rs)?;
        let shadows_mid = take(n_as + n_rs)?;
        let n_cot = self
            .live
            .iter()
            .filter_map(|&i| self.types.get(i))
            .map(cotangent_leaves)
            .sum();
        let cotangents = take(n_cot)?
            .iter()
            .map(|v| match v {
                Val::F64(x) => Ok(*x),
                _ => Err("internal error: a cotangent that is not f64".to_string()),
            })
            .collect::<Result<Vec<f64>, String>>()?;
        let args_after = vals.get(..n_live).unwrap_or(&[]).to_vec();
        let arg_shadows_after = vals.get(n_live..n_live + n_as).unwrap_or(&[]).to_vec();
        Ok(RevRun {
            result,
            result_copy,
            args_copy,
            args_after,
            shadows_fwd,
            result_shadows,
            shadows_mid,
            arg_shadows_after,
            cotangents,
        })
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
                Some(x) if spec.ty.has_tangent() => Some(direction(rng, x)),
                _ => None,
            })
            .collect();
        let dy = (0..cotangent_leaves(result))
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

/// Builds `@name`, the test function of `reg`'s rrule for `sig` (see the
/// module comment): parameters are the live arguments, one zero shadow per
/// `[f64]` array of them, `dy` per f64 of the result outside arrays, and the
/// cotangent arrays for the argument shadows then the result shadows. It
/// returns the flat tuple (result, deep copy of the result after the forward
/// part, deep copy of each live argument after it, copies of every shadow
/// after it, the result shadows, copies of every shadow between the parts,
/// the f64 cotangents of the live arguments with `None` as 0). With
/// `zero_dy`, the pullback gets `None` for every `dy`.
fn rrule_function(
    module: &mut Module,
    name: &str,
    reg: &Registry,
    sig: &Signature,
    zero_dy: bool,
) -> Result<FuncId, String> {
    let result = sig.result()?;
    let types = sig.types();
    let rule = reg
        .rrule(sig.prim, &types)
        .ok_or_else(|| format!("no rrule registered for {sig}"))?;
    let consts: Vec<bool> = sig.args.iter().map(|a| is_const(&a.domain)).collect();
    let live: Vec<&Type> = types
        .iter()
        .zip(&consts)
        .filter(|(_, c)| !**c)
        .map(|(t, _)| t)
        .collect();
    let n_live = live.len();
    let n_as: usize = live.iter().map(|t| shadow_leaves(t)).sum();
    let n_rs = shadow_leaves(&result);
    let n_dy = cotangent_leaves(&result);
    let n_cot: usize = live.iter().map(|t| cotangent_leaves(t)).sum();
    let f64s = Type::Array(Scalar::F64);
    let mut params: Vec<(Option<String>, Type)> = Vec::new();
    params.extend(live.iter().map(|t| (None, (*t).clone())));
    params.extend((0..n_as).map(|_| (None, f64s.clone())));
    params.extend((0..n_dy).map(|_| (None, Type::F64)));
    params.extend((0..n_as + n_rs).map(|_| (None, f64s.clone())));
    let mut rets = vec![result.clone(), result.clone()];
    rets.extend(live.iter().map(|t| (*t).clone()));
    rets.extend((0..2 * (n_as + n_rs) + n_rs).map(|_| f64s.clone()));
    rets.extend((0..n_cot).map(|_| Type::F64));
    let internal = |e: RuleError| format!("internal error building the rrule's test function: {e}");
    let f = module
        .declare_func(name, params, Type::tuple(rets))
        .map_err(|e| internal(e.into()))?;
    let mut b = FuncBuilder::new(module, f).map_err(|e| internal(e.into()))?;
    let entry = b.create_block();
    b.switch_to_block(entry).map_err(|e| internal(e.into()))?;
    let param = |b: &FuncBuilder<'_>, i: usize| -> Result<Operand, String> {
        b.param(i)
            .map(Operand::Value)
            .map_err(|e| internal(e.into()))
    };
    let mut args = Vec::with_capacity(sig.args.len());
    let (mut next_live, mut next_shadow) = (0, n_live);
    for spec in &sig.args {
        if let Domain::Const(c) = spec.domain {
            args.push(RevArg {
                primal: Operand::Const(c),
                ty: spec.ty.clone(),
                shadows: Default::default(),
            });
            continue;
        }
        let primal = param(&b, next_live)?;
        next_live += 1;
        let mut shadows = smallvec::SmallVec::new();
        for _ in 0..shadow_leaves(&spec.ty) {
            shadows.push(param(&b, next_shadow)?);
            next_shadow += 1;
        }
        args.push(RevArg {
            primal,
            ty: spec.ty.clone(),
            shadows,
        });
    }
    let call = RevCall {
        callee: Callee::Prim(sig.prim),
        args: &args,
        result: &result,
    };
    let out = rule
        .forward(&mut b, &call)
        .map_err(|e| format!("the forward part failed to emit: {e}"))?;
    if b.current_block() != Some(entry) {
        return Err("the forward part created blocks: it must be straight-line code".into());
    }
    let got = b
        .operand_type(&out.primal)
        .map_err(|e| format!("the forward part returned a bad primal: {e}"))?;
    if got != result {
        return Err(format!("the forward part returned a {got} for a {result}"));
    }
    if out.shadows.len() != n_rs {
        return Err(format!(
            "the forward part returned {} shadow(s) for a {result}, which holds {n_rs} [f64] array(s)",
            out.shadows.len()
        ));
    }
    for s in &out.shadows {
        let t = b
            .operand_type(s)
            .map_err(|e| format!("the forward part returned a bad shadow: {e}"))?;
        if t != f64s {
            return Err(format!("the forward part returned a shadow of type {t}"));
        }
    }
    let mut ret = vec![
        out.primal,
        deep_copy(&mut b, out.primal, &result).map_err(internal)?,
    ];
    for (j, t) in live.iter().enumerate() {
        let a = param(&b, j)?;
        ret.push(deep_copy(&mut b, a, t).map_err(internal)?);
    }
    let mut shadows: Vec<Operand> = Vec::with_capacity(n_as + n_rs);
    for k in 0..n_as {
        shadows.push(param(&b, n_live + k)?);
    }
    shadows.extend(out.shadows.iter().copied());
    for &s in &shadows {
        ret.push(value(&mut b, Prim::Copy, &[s]).map_err(internal)?);
    }
    ret.extend(out.shadows.iter().copied());
    let dy_arrays = n_live + n_as + n_dy;
    for (k, &s) in shadows.iter().enumerate() {
        let d = param(&b, dy_arrays + k)?;
        copy_into(&mut b, s, d).map_err(internal)?;
    }
    for &s in &shadows {
        ret.push(value(&mut b, Prim::Copy, &[s]).map_err(internal)?);
    }
    let mut dy = Vec::with_capacity(n_dy);
    for k in 0..n_dy {
        dy.push(if zero_dy {
            None
        } else {
            Some(param(&b, n_live + n_as + k)?)
        });
    }
    let pcall = PullbackCall {
        callee: Callee::Prim(sig.prim),
        arg_types: &types,
        arg_const: &consts,
        result: &result,
        saved: &out.saved,
        dy: &dy,
    };
    let back = rule
        .pullback(&mut b, &pcall)
        .map_err(|e| format!("the pullback failed to emit: {e}"))?;
    if back.cotangents.len() != types.len() {
        return Err(format!(
            "the pullback returned cotangents for {} argument(s), the call has {}",
            back.cotangents.len(),
            types.len()
        ));
    }
    for (i, ((cs, t), c)) in back.cotangents.iter().zip(&types).zip(&consts).enumerate() {
        let n = cotangent_leaves(t);
        if cs.len() != n {
            return Err(format!(
                "the pullback returned {} cotangent(s) for argument {} ({t}), which has {n} f64{} outside arrays",
                cs.len(),
                i + 1,
                if n == 1 { "" } else { "s" }
            ));
        }
        for op in cs.iter().flatten() {
            let got = b
                .operand_type(op)
                .map_err(|e| format!("the pullback returned a bad cotangent: {e}"))?;
            if got != Type::F64 {
                return Err(format!(
                    "the pullback returned a {got} as a cotangent of argument {}",
                    i + 1
                ));
            }
        }
        if !c {
            ret.extend(cs.iter().map(|op| op.unwrap_or(emit::f64c(0.0))));
        }
    }
    let after = |e: RuleError| format!("cannot continue after the pullback: {e}");
    let r = value(&mut b, Prim::Tuple, &ret).map_err(after)?;
    b.ret(r).map_err(|e| after(e.into()))?;
    Ok(f)
}

/// A copy of `op` (of type `ty`) that shares no array with it: arrays are
/// copied, tuples holding arrays rebuilt, everything else is itself.
fn deep_copy(b: &mut FuncBuilder<'_>, op: Operand, ty: &Type) -> Result<Operand, RuleError> {
    match ty {
        Type::Array(_) => value(b, Prim::Copy, &[op]),
        Type::Tuple(elems) if emit::contains_array(ty) => {
            let mut parts = Vec::with_capacity(elems.len());
            for (k, elem) in elems.iter().enumerate() {
                let k = i64::try_from(k)
                    .map_err(|_| RuleError::Unsupported("tuple too wide".into()))?;
                let field = value(b, Prim::Getfield, &[op, Operand::from(k)])?;
                parts.push(deep_copy(b, field, elem)?);
            }
            value(b, Prim::Tuple, &parts)
        }
        _ => Ok(op),
    }
}

/// `for i in 0..min(length(dst), length(src)) { dst[i] = src[i] }`.
fn copy_into(b: &mut FuncBuilder<'_>, dst: Operand, src: Operand) -> Result<(), RuleError> {
    let ld = value(b, Prim::Length, &[dst])?;
    let ls = value(b, Prim::Length, &[src])?;
    let shorter = value(b, Prim::Lt, &[ld, ls])?;
    let n = value(b, Prim::Select, &[shorter, ld, ls])?;
    emit::for_range(b, n, |b, i| {
        let x = value(b, Prim::Arrayref, &[src, i])?;
        emit::effect(b, Prim::Arrayset, &[dst, i, x])
    })
}

fn is_const(d: &Domain) -> bool {
    matches!(d, Domain::Const(_))
}

/// The f64s outside arrays and the `[f64]` arrays of a sample, depth-first.
fn sample_leaves(s: &Sample, f64s: &mut Vec<f64>, arrays: &mut Vec<Vec<f64>>) {
    match s {
        Sample::F64(x) => f64s.push(*x),
        Sample::F64s(xs) => arrays.push(xs.clone()),
        Sample::Tuple(xs) => {
            for x in xs {
                sample_leaves(x, f64s, arrays);
            }
        }
        _ => {}
    }
}

/// The f64s outside arrays and the `[f64]` arrays of a tangent `v` of a
/// value of type `ty`, depth-first (components without a tangent type are
/// `()` in `v` and skipped).
fn tangent_leaves(
    v: &Val,
    ty: &Type,
    f64s: &mut Vec<f64>,
    arrays: &mut Vec<Vec<f64>>,
) -> Result<(), String> {
    match (ty, v) {
        (Type::F64, Val::F64(x)) => f64s.push(*x),
        (Type::Array(Scalar::F64), Val::Array(_)) => arrays.push(f64_data(v)?),
        (Type::Tuple(elems), Val::Tuple(vals)) if elems.len() == vals.len() => {
            for (e, x) in elems.iter().zip(vals.iter()) {
                if e.has_tangent() {
                    tangent_leaves(x, e, f64s, arrays)?;
                }
            }
        }
        _ if !ty.has_tangent() => {}
        _ => return Err(format!("a tangent is a {}, expected a {ty}", v.kind())),
    }
    Ok(())
}

/// The `[f64]` arrays of a value `v` of type `ty`, depth-first, as the
/// values themselves (for identities).
fn f64_array_refs(v: &Val, ty: &Type, out: &mut Vec<Val>) -> Result<(), String> {
    match (ty, v) {
        (Type::Array(Scalar::F64), Val::Array(_)) => out.push(v.clone()),
        (Type::Tuple(elems), Val::Tuple(vals)) if elems.len() == vals.len() => {
            for (e, x) in elems.iter().zip(vals.iter()) {
                f64_array_refs(x, e, out)?;
            }
        }
        (Type::Array(Scalar::F64) | Type::Tuple(_), _) => {
            return Err(format!("a {} where a {ty} was expected", v.kind()));
        }
        _ => {}
    }
    Ok(())
}

/// The elements of an f64 array value.
fn f64_data(v: &Val) -> Result<Vec<f64>, String> {
    let Val::Array(ArrayRef(a)) = v else {
        return Err(format!("a {} where an f64 array was expected", v.kind()));
    };
    let data = a
        .try_borrow()
        .map_err(|_| "internal error: array is borrowed".to_string())?;
    match &*data {
        ArrayData::F64(xs) => Ok(xs.clone()),
        _ => Err("an array that is not [f64]".into()),
    }
}

fn f64_len(v: &Val) -> Result<usize, String> {
    f64_data(v).map(|xs| xs.len())
}

/// Whether two array values are one array.
fn same_ref(a: &Val, b: &Val) -> bool {
    match (a, b) {
        (Val::Array(ArrayRef(x)), Val::Array(ArrayRef(y))) => Rc::ptr_eq(x, y),
        _ => false,
    }
}

fn alias_message(shadow: &str, other: &str, same_array: bool) -> String {
    let owner = shadow
        .strip_prefix("the shadow of ")
        .unwrap_or("the result");
    if same_array {
        format!("{owner} is {other}, but {shadow} is not that array's shadow")
    } else {
        format!("{owner} is not {other}, but {shadow} is that array's shadow")
    }
}

/// Appends the products `a[j] * b[j]`; arrays of different lengths are an
/// error naming `what`.
fn products(out: &mut Vec<f64>, what: &str, a: &[f64], b: &[f64]) -> Result<(), String> {
    if a.len() != b.len() {
        return Err(format!(
            "{what} has {} element(s), the frule's tangent {}",
            a.len(),
            b.len()
        ));
    }
    out.extend(a.iter().zip(b).map(|(x, y)| x * y));
    Ok(())
}

/// `|l - r| / scale`; 0 when both are the same non-finite value, infinite
/// when only one is finite.
fn adjoint_error(l: f64, r: f64, scale: f64) -> f64 {
    if l.is_finite() && r.is_finite() {
        (l - r).abs() / scale
    } else if (l.is_nan() && r.is_nan()) || l == r {
        0.0
    } else {
        f64::INFINITY
    }
}
