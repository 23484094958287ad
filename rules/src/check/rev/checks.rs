//! The checks of one sample point of the rrule checker (see `check/rev.rs`):
//! running `@rr` and the frule, and (a) the primal, (b) the state restored,
//! (c) the shadows, (d) the adjoint identity, each a message naming what
//! differed.
//!
//! Assumes a harness whose functions verified. Guarantees: never panics; an
//! unexpected value shape is a [`CheckError::Internal`] (printed as an
//! `internal error: ...` message), not a crash; what the rule got wrong is a
//! [`CheckError::Failed`].

use super::{ADJOINT_TOLERANCE, Harness, Point, sample_leaves};
use crate::check::{CheckError, Outcome, lane, run_function, show};
use irad_ir::interp::{ArrayData, ArrayRef, Interpreter, RunOptions, Val};
use irad_ir::text::num::format_f64;
use irad_ir::{FuncId, Scalar, Type};
use std::rc::Rc;

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
    /// Checks one point with `@rr` and `@rr0`; the largest adjoint error.
    pub(super) fn check_point(
        &self,
        interp: &mut Interpreter<'_>,
        p: &Point,
        primal: &Result<Outcome, String>,
    ) -> Result<f64, CheckError> {
        // J dx, once for both functions; only when the primitive runs.
        let tangents = match primal {
            Ok(_) => Some(self.frule_tangents(interp, p)?),
            Err(_) => None,
        };
        let mut err = self.check_function(interp, self.rrule, false, p, primal, &tangents)?;
        if let Some(f) = self.rrule_zero {
            let e = self
                .check_function(interp, f, true, p, primal, &tangents)
                .map_err(|e| match e {
                    CheckError::Failed(m) => {
                        CheckError::Failed(format!("with dy known to be zero (None): {m}"))
                    }
                    internal => internal,
                })?;
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
    ) -> Result<f64, CheckError> {
        let run = self.run(interp, f, p)?;
        let (primal, run) = match (primal, run) {
            (Err(a), Err(b)) if *a == b => return Ok(0.0),
            (Err(a), Err(b)) => {
                return Err(format!("the primitive fails with `{a}`, the rule with `{b}`").into());
            }
            (Err(a), Ok(_)) => {
                return Err(format!("the primitive fails with `{a}`, the rule does not").into());
            }
            (Ok(_), Err(b)) => {
                return Err(format!("the rule fails with `{b}`, the primitive does not").into());
            }
            (Ok(primal), Ok(run)) => (primal, run),
        };
        let tangents = tangents
            .as_ref()
            .ok_or_else(|| CheckError::internal("no frule tangents"))?;
        self.check_primal(primal, &run)?;
        self.check_restored(p, &run)?;
        let aliased = self.check_shadows(primal, &run)?;
        self.adjoint(p, &run, tangents, &aliased, zero_dy)
    }

    /// (a): the forward part's primal result and the arguments after it.
    fn check_primal(&self, primal: &Outcome, run: &RevRun) -> Result<(), CheckError> {
        if !primal.result.same(&run.result_copy) {
            return Err(CheckError::Failed(format!(
                "the forward part's primal result {} differs from the primitive's {}",
                show(&run.result_copy),
                show(&primal.result)
            )));
        }
        for (&i, after) in self.live.iter().zip(&run.args_copy) {
            let Some(Some(want)) = primal.args.get(i) else {
                return Err(CheckError::internal("a live argument without value"));
            };
            if !want.same(after) {
                return Err(CheckError::Failed(format!(
                    "argument {} is {} after the forward part, {} after the primitive",
                    i + 1,
                    show(after),
                    show(want)
                )));
            }
        }
        Ok(())
    }

    /// (b): every argument is as on entry after the pullback.
    fn check_restored(&self, p: &Point, run: &RevRun) -> Result<(), CheckError> {
        for (&i, after) in self.live.iter().zip(&run.args_after) {
            let Some(Some(entry)) = p.args.get(i) else {
                return Err(CheckError::internal("a live argument without sample"));
            };
            let entry = entry.to_val();
            if !entry.same(after) {
                return Err(CheckError::Failed(format!(
                    "argument {} is {} after the pullback, {} on entry: the pullback does not restore it",
                    i + 1,
                    show(after),
                    show(&entry)
                )));
            }
        }
        Ok(())
    }

    /// (c): shadows zero after the forward part, result shadows as long as
    /// their arrays, and shadows aliased exactly where arrays are. Returns,
    /// per result shadow, whether it is an argument shadow or an earlier
    /// result shadow (so that the adjoint identity counts it once).
    fn check_shadows(&self, primal: &Outcome, run: &RevRun) -> Result<Vec<bool>, CheckError> {
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
                    return Err(CheckError::Failed(format!(
                        "{what} has {} element(s), the result's array {}",
                        xs.len(),
                        want.map_or_else(|| "none".into(), |n| n.to_string())
                    )));
                }
            }
            if xs.iter().any(|&x| x != 0.0) {
                return Err(CheckError::Failed(format!(
                    "{what} is {} after the forward part: it must stay zero (the forward sweep leaves cotangents alone)",
                    show(s)
                )));
            }
        }
        let mut result_arrays = Vec::new();
        f64_array_refs(&run.result, &self.result, &mut result_arrays)?;
        let mut arg_arrays = Vec::new();
        for (&i, v) in self.live.iter().zip(&run.args_after) {
            let ty = self
                .types
                .get(i)
                .ok_or_else(|| CheckError::internal("argument type"))?;
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
                    return Err(CheckError::Failed(alias_message(
                        &self.result_shadow_name(k),
                        &format!("argument {i}'s array"),
                        same_array,
                    )));
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
                    return Err(CheckError::Failed(alias_message(
                        &self.result_shadow_name(k),
                        &format!("array {} of the result", k2 + 1),
                        same_array,
                    )));
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
    ) -> Result<f64, CheckError> {
        let n_as = self.shadow_owner.len();
        let mut left = Vec::new();
        if t.result_f64s.len() != p.dy.len() {
            return Err(CheckError::internal(format!(
                "{} result tangents for {} cotangents",
                t.result_f64s.len(),
                p.dy.len()
            )));
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
            let ty = self
                .types
                .get(i)
                .ok_or_else(|| CheckError::internal("argument type"))?;
            let (mut xs, mut arrays) = (Vec::new(), Vec::new());
            if let Some(Some(dx)) = p.dx.get(i) {
                sample_leaves(dx, &mut xs, &mut arrays);
            }
            let n = Type::cotangent_leaves(ty);
            let cs: Vec<f64> = cotangents.by_ref().take(n).copied().collect();
            if cs.len() != n || xs.len() != n {
                return Err(CheckError::internal("cotangent count"));
            }
            right.extend(cs.iter().zip(&xs).map(|(c, x)| c * x));
            if n > 0 {
                let parts: Vec<String> = cs.iter().map(|c| format_f64(*c)).collect();
                cot_text.push(format!("argument {}: {}", i + 1, parts.join(", ")));
            }
            for dx in &arrays {
                let s = shadows
                    .next()
                    .ok_or_else(|| CheckError::internal("shadow count"))?;
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
                "adjoint identity fails: <dy, J dx> = {} with J dx from {}, but <J^T dy, dx> = {} from the pullback (error {err:.3e})",
                format_f64(l),
                "the frule",
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
            return Err(msg.into());
        }
        Ok(err)
    }

    /// Runs the frule at width 1 in direction dx; its tangents, split.
    fn frule_tangents(
        &self,
        interp: &mut Interpreter<'_>,
        p: &Point,
    ) -> Result<Tangents, CheckError> {
        let run = run_function(
            interp,
            self.frule,
            &self.types,
            &p.args,
            std::slice::from_ref(&p.dx),
        )?
        .map_err(|e| format!("the frule, which gives J dx, fails with `{e}`"))?;
        let tangent_of = |v: &Val, what: &str| -> Result<Val, CheckError> {
            lane(v, 0)
                .ok_or_else(|| CheckError::Failed(format!("the frule's {what} is not a dual")))
        };
        let mut t = Tangents {
            result_f64s: Vec::new(),
            result_arrays: Vec::new(),
            arg_arrays: Vec::new(),
        };
        if self.result.has_cotangent() {
            let tr = tangent_of(&run.result, "result")?;
            tangent_leaves(&tr, &self.result, &mut t.result_f64s, &mut t.result_arrays)?;
        }
        for &i in &self.live {
            let ty = self
                .types
                .get(i)
                .ok_or_else(|| CheckError::internal("argument type"))?;
            if Type::shadow_leaves(ty) == 0 {
                continue;
            }
            let v = run
                .args
                .get(i)
                .and_then(Option::as_ref)
                .ok_or_else(|| CheckError::internal("frule argument"))?;
            let ta = tangent_of(v, "argument")?;
            tangent_leaves(&ta, ty, &mut Vec::new(), &mut t.arg_arrays)?;
        }
        Ok(t)
    }

    /// Runs `@rr` (or `@rr0`) on fresh copies of the point: its outcome or
    /// its run-time error (inner), or a bug of the checker (outer).
    fn run(
        &self,
        interp: &mut Interpreter<'_>,
        f: FuncId,
        p: &Point,
    ) -> Result<Result<RevRun, String>, CheckError> {
        let mut vals = Vec::new();
        for &i in &self.live {
            let x = p
                .args
                .get(i)
                .and_then(Option::as_ref)
                .ok_or_else(|| CheckError::internal("a live argument without sample"))?;
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
        let out = match interp.run(f, &vals, &RunOptions::default()) {
            Ok(out) => out,
            Err(e) => return Ok(Err(e.msg)),
        };
        let Val::Tuple(parts) = out else {
            return Err(CheckError::internal("@rr returned no tuple"));
        };
        let n_as = p.arg_dy.len();
        let n_rs = self.n_result_shadows();
        let mut parts = parts.iter().cloned();
        let mut take = |n: usize| -> Result<Vec<Val>, CheckError> {
            let v: Vec<Val> = parts.by_ref().take(n).collect();
            if v.len() == n {
                Ok(v)
            } else {
                Err(CheckError::internal("@rr returned too few values"))
            }
        };
        let mut first = take(2)?.into_iter();
        let (Some(result), Some(result_copy)) = (first.next(), first.next()) else {
            return Err(CheckError::internal("@rr returned too few values"));
        };
        let args_copy = take(n_live)?;
        let shadows_fwd = take(n_as + n_rs)?;
        let result_shadows = take(n_rs)?;
        let shadows_mid = take(n_as + n_rs)?;
        let n_cot = self
            .live
            .iter()
            .filter_map(|&i| self.types.get(i))
            .map(Type::cotangent_leaves)
            .sum();
        let cotangents = take(n_cot)?
            .iter()
            .map(|v| match v {
                Val::F64(x) => Ok(*x),
                _ => Err(CheckError::internal("a cotangent that is not f64")),
            })
            .collect::<Result<Vec<f64>, CheckError>>()?;
        let args_after = vals.get(..n_live).unwrap_or(&[]).to_vec();
        let arg_shadows_after = vals.get(n_live..n_live + n_as).unwrap_or(&[]).to_vec();
        Ok(Ok(RevRun {
            result,
            result_copy,
            args_copy,
            args_after,
            shadows_fwd,
            result_shadows,
            shadows_mid,
            arg_shadows_after,
            cotangents,
        }))
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
) -> Result<(), CheckError> {
    match (ty, v) {
        (Type::F64, Val::F64(x)) => f64s.push(*x),
        (Type::Array(Scalar::F64), Val::Array(_)) => arrays.push(f64_data(v)?),
        (Type::Tuple(elems), Val::Tuple(vals)) if elems.len() == vals.len() => {
            for (e, x) in elems.iter().zip(vals.iter()) {
                if e.has_cotangent() {
                    tangent_leaves(x, e, f64s, arrays)?;
                }
            }
        }
        (Type::Dual(..), Val::Dual(parts)) => {
            let (inner, tangent, lanes) = ty
                .dual_parts()
                .ok_or_else(|| CheckError::internal("a dual without dense parts"))?;
            if parts.len() != lanes + 1 {
                return Err(format!("a dual of {} parts, expected a {ty}", parts.len()).into());
            }
            for (k, x) in parts.iter().enumerate() {
                tangent_leaves(x, if k == 0 { inner } else { &tangent }, f64s, arrays)?;
            }
        }
        _ if !ty.has_cotangent() => {}
        _ => return Err(format!("a tangent is a {}, expected a {ty}", v.kind()).into()),
    }
    Ok(())
}

/// The `[f64]` arrays of a value `v` of type `ty`, depth-first, as the
/// values themselves (for identities).
pub(super) fn f64_array_refs(v: &Val, ty: &Type, out: &mut Vec<Val>) -> Result<(), String> {
    match (ty, v) {
        (Type::Array(Scalar::F64), Val::Array(_)) => out.push(v.clone()),
        (Type::Tuple(elems), Val::Tuple(vals)) if elems.len() == vals.len() => {
            for (e, x) in elems.iter().zip(vals.iter()) {
                f64_array_refs(x, e, out)?;
            }
        }
        (Type::Dual(..), Val::Dual(parts)) => {
            if let Some((inner, tangent, _)) = ty.dual_parts() {
                for (k, x) in parts.iter().enumerate() {
                    f64_array_refs(x, if k == 0 { inner } else { &tangent }, out)?;
                }
            }
        }
        (Type::Array(Scalar::F64) | Type::Tuple(_) | Type::Dual(..), _) => {
            return Err(format!("a {} where a {ty} was expected", v.kind()));
        }
        _ => {}
    }
    Ok(())
}

/// The elements of an f64 array value.
fn f64_data(v: &Val) -> Result<Vec<f64>, CheckError> {
    let Val::Array(ArrayRef(a)) = v else {
        return Err(format!("a {} where an f64 array was expected", v.kind()).into());
    };
    let data = a
        .try_borrow()
        .map_err(|_| CheckError::internal("array is borrowed"))?;
    match &*data {
        ArrayData::F64(xs) => Ok(xs.clone()),
        _ => Err("an array that is not [f64]".into()),
    }
}

/// The length of an f64 array value.
pub(super) fn f64_len(v: &Val) -> Result<usize, CheckError> {
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
