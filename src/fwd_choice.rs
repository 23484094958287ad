//! Which lanes forward mode uses when the caller names none (`irad grad
//! --mode fwd` and `irad bench --mode fwd` without `--batch` or
//! `--sparse`): sparse mode where it is cheaper, dense batches otherwise
//! (docs/forward.md, "Choosing dense or sparse").
//!
//! Dense forward mode runs the function ceil(n / 8) times for n
//! differentiated f64s; sparse mode runs it once, at a constant factor more
//! per tangent operation plus one materialisation. So sparse mode wins from
//! some n on: [`SPARSE_MIN_DIRECTIONS`], measured (docs/forward.md gives
//! the figures). The count is of the f64s forward mode would differentiate
//! at these arguments (scalar arguments, tuple components, array elements
//! of the `wrt` arguments), the same as the dense gradient's directions.
//!
//! Assumes nothing of its inputs: a `wrt` position out of range or an
//! argument of the wrong shape counts nothing (the gradient itself reports
//! those). Guarantees: a pure function of the types, the argument shapes and
//! `wrt`.

use irad_ir::interp::value::{ArrayData, Val};
use irad_ir::{FuncId, Lanes, Module, Scalar, Type};

/// The dense batch width forward mode uses by default.
pub const DEFAULT_BATCH: u32 = 8;

/// From this many differentiated f64s on, forward mode without `--batch`
/// or `--sparse` uses sparse mode (measured: docs/forward.md, "Choosing
/// dense or sparse").
pub const SPARSE_MIN_DIRECTIONS: usize = 32;

/// Forward mode's lanes and why.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ForwardChoice {
    /// The lanes: dense batches of width `min(N, directions)`, or sparse.
    pub lanes: Lanes,
    /// The number of f64s differentiated.
    pub directions: usize,
    /// Whether [`choose_forward`] chose (no `--batch` or `--sparse`).
    pub auto: bool,
}

impl ForwardChoice {
    /// `"sparse"` or `"dense"`.
    pub fn mode_name(&self) -> &'static str {
        if self.lanes.is_sparse() {
            "sparse"
        } else {
            "dense"
        }
    }

    /// The dense batch width a pass carries (`None` in sparse mode): the
    /// asked width, no more than the directions (at least 1).
    pub fn batch(&self) -> Option<u32> {
        match self.lanes {
            Lanes::Sparse => None,
            Lanes::Dense(n) => {
                let dirs = u32::try_from(self.directions.max(1)).unwrap_or(u32::MAX);
                Some(n.get().min(dirs))
            }
        }
    }
}

/// The number of f64s forward mode differentiates for `func` at `args`:
/// every f64 leaf of the arguments in `wrt` (default: all).
pub fn forward_directions(
    module: &Module,
    func: FuncId,
    args: &[Val],
    wrt: Option<&[usize]>,
) -> usize {
    let params = module[func].param_types();
    let count_arg = |i: usize| match (args.get(i), params.get(i)) {
        (Some(v), Some(ty)) => f64_leaves(v, ty),
        _ => 0,
    };
    match wrt {
        Some(wrt) => wrt.iter().map(|&i| count_arg(i)).sum(),
        None => (0..args.len()).map(count_arg).sum(),
    }
}

/// The f64 leaves of `v`, of type `ty` (the parts of a dual in order).
fn f64_leaves(v: &Val, ty: &Type) -> usize {
    match (v, ty) {
        (Val::F64(_), Type::F64) => 1,
        (Val::Array(a), Type::Array(Scalar::F64)) => match a.0.try_borrow() {
            Ok(d) => match &*d {
                ArrayData::F64(xs) => xs.len(),
                _ => 0,
            },
            Err(_) => 0,
        },
        (Val::Dual(parts), _) => match ty.dual_parts() {
            Some((inner, tan, _)) => parts
                .iter()
                .enumerate()
                .map(|(k, p)| f64_leaves(p, if k == 0 { inner } else { &tan }))
                .sum(),
            None => 0,
        },
        (Val::Tuple(vs), Type::Tuple(ts)) => vs
            .iter()
            .zip(ts.iter())
            .map(|(v, t)| f64_leaves(v, t))
            .sum(),
        _ => 0,
    }
}

/// Whether sparse forward mode can derive every rule written in the
/// language that `module` declares (docs/rules.md, "Rules written in the
/// language"): a declared jvp is called in sparse mode only where its
/// function's differentiable arguments are f64 and its result holds no
/// array; and no function works on dual values (a forward rule: sparse
/// mode differentiates one when asked, `--sparse`, but its directions are
/// the parts of the duals, which the measurements behind the threshold did
/// not cover; docs/forward.md "Forward over forward"). [`choose_forward`]
/// picks sparse mode only then.
pub fn sparse_capable(module: &Module) -> bool {
    module.funcs().all(|(id, f)| {
        let duals = f.values.values().any(|v| v.ty.holds_dual()) || f.ret.holds_dual();
        let jvp_ok = module.declared_rules(id).jvp.is_none()
            || (f
                .param_types()
                .iter()
                .all(|t| !t.has_tangent() || *t == Type::F64)
                && f.ret.has_tangent()
                && !f.ret.holds_array());
        !duals && jvp_ok
    })
}

/// The lanes for `directions` differentiated f64s: `forced` when given
/// (`--batch N` or `--sparse`), otherwise sparse mode from
/// [`SPARSE_MIN_DIRECTIONS`] on where `sparse_ok` ([`sparse_capable`]),
/// dense batches of [`DEFAULT_BATCH`] otherwise.
pub fn choose_forward(directions: usize, forced: Option<Lanes>, sparse_ok: bool) -> ForwardChoice {
    let (lanes, auto) = match forced {
        Some(lanes) => (lanes, false),
        None if sparse_ok && directions >= SPARSE_MIN_DIRECTIONS => (Lanes::Sparse, true),
        None => (Lanes::dense(DEFAULT_BATCH).unwrap_or(Lanes::ONE), true),
    };
    ForwardChoice {
        lanes,
        directions,
        auto,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_choice_follows_the_threshold_unless_forced() {
        let below = choose_forward(SPARSE_MIN_DIRECTIONS - 1, None, true);
        assert_eq!(below.mode_name(), "dense");
        assert_eq!(below.batch(), Some(DEFAULT_BATCH));
        assert!(below.auto);
        let at = choose_forward(SPARSE_MIN_DIRECTIONS, None, true);
        assert_eq!(
            (at.mode_name(), at.batch(), at.auto),
            ("sparse", None, true)
        );
        let forced = choose_forward(10_000, Lanes::dense(4), true);
        assert_eq!(
            (forced.mode_name(), forced.batch(), forced.auto),
            ("dense", Some(4), false)
        );
        let forced = choose_forward(1, Some(Lanes::Sparse), true);
        assert_eq!((forced.mode_name(), forced.auto), ("sparse", false));
        // No more lanes than directions.
        assert_eq!(choose_forward(3, None, true).batch(), Some(3));
        assert_eq!(choose_forward(0, None, true).batch(), Some(1));
        // A declared jvp sparse mode cannot call keeps the choice dense.
        let dense = choose_forward(10_000, None, false);
        assert_eq!((dense.mode_name(), dense.auto), ("dense", true));
    }
}
