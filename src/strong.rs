//! The strong derivative, derived and run only when a derivative comes out
//! NaN (docs/rules.md, "Infinities and NaN"). Every entry point that returns
//! a derivative ([`crate::grad`], [`crate::jvp`], [`crate::vjp`],
//! [`crate::jacobian`], [`crate::hvp_via`], [`crate::hessian_via`],
//! [`crate::CompiledGradient`]) first derives and runs the plain derivative
//! (IEEE products), as always; only when an f64 entry of the derivative it
//! returns is NaN, it derives the strong version (every product of the
//! chain rule a `zmul`: exactly 0 when either operand is 0) from a copy of
//! the module marked [`Module::set_strong_products`], runs it, and returns
//! its result instead. [`crate::emit()`] cannot derive when the object runs:
//! it derives both versions ahead of time with [`strong_copy`], and the
//! object's derivatives make the same choice (`codegen/src/object.rs`).
//!
//! Assumes: the two versions differ only where the plain one has a NaN
//! (docs/rules.md gives the argument and where it fails). Guarantees: a
//! derivative without NaN is the plain one, bit for bit, at the cost of one
//! scan of its entries; the strong version lives in a module of its own, so
//! the plain derived functions (what `irad dump` and the filetests show)
//! are never replaced.

use crate::Error;
use irad_ir::Module;
use irad_ir::interp::value::{ArrayData, Val};

/// A copy of `module` whose derivatives will be strong.
pub(crate) fn strong_copy(module: &Module) -> Module {
    let mut m = module.clone();
    m.set_strong_products(true);
    m
}

/// Whether an f64 entry of `v` (tuples, duals and f64 arrays included) is NaN.
pub(crate) fn has_nan(v: &Val) -> bool {
    match v {
        Val::F64(x) => x.is_nan(),
        Val::Tuple(items) | Val::Dual(items) => items.iter().any(has_nan),
        Val::Array(a) => match &*a.0.borrow() {
            ArrayData::F64(xs) => slice_has_nan(xs),
            _ => false,
        },
        Val::I64(_) | Val::Bool(_) | Val::Unit | Val::Func(_) | Val::Sparse(_) => false,
    }
}

/// Whether an element of `xs` is NaN: a fold without early exit over
/// blocks of 64, which the compiler vectorises, so the scan of a gradient
/// costs a fraction of a microsecond per thousand entries.
pub(crate) fn slice_has_nan(xs: &[f64]) -> bool {
    xs.chunks(64)
        .any(|c| c.iter().fold(false, |nan, x| nan | x.is_nan()))
}

/// Whether an entry of a gradient (one optional value per argument) is NaN.
pub(crate) fn any_nan(entries: &[Option<Val>]) -> bool {
    entries.iter().flatten().any(has_nan)
}

/// `run(module)`; when `nan` says its derivative has a NaN, `run` of the
/// strong copy of `module` instead (the plain result is dropped). An error
/// of either is returned as it is.
pub(crate) fn or_strong<T>(
    module: &Module,
    run: impl Fn(&Module) -> Result<T, Error>,
    nan: impl Fn(&T) -> bool,
) -> Result<T, Error> {
    let plain = run(module)?;
    if !nan(&plain) || module.strong_products() {
        return Ok(plain);
    }
    run(&strong_copy(module))
}

#[cfg(test)]
mod tests {
    use super::{has_nan, slice_has_nan};
    use irad_ir::interp::value::Val;

    #[test]
    fn a_nan_anywhere_is_found_and_infinities_are_not_nan() {
        for n in [0, 1, 63, 64, 65, 200] {
            let xs = vec![f64::INFINITY; n];
            assert!(!slice_has_nan(&xs), "n = {n}");
            for k in 0..n {
                let mut ys = xs.clone();
                ys[k] = f64::NAN;
                assert!(slice_has_nan(&ys), "n = {n}, NaN at {k}");
            }
        }
        let t = Val::Tuple(vec![Val::F64(1.0), Val::f64_array(vec![0.0, f64::NAN])].into());
        assert!(has_nan(&t));
        let d = Val::Dual(vec![Val::F64(f64::NEG_INFINITY), Val::I64(3)].into());
        assert!(!has_nan(&d));
    }
}
