//! Walks over interpreter values shared by the derivative tests (cli_deriv,
//! cli_hvp, cli_rof, emit, ieee_derivatives, lang_rules, sparse_hessian): the f64
//! entries of a value or of a gradient-shaped list, and a value with its f64
//! entries rewritten (for finite-difference points). Assumes nothing of the
//! values; guarantees depth-first order, array elements in index order,
//! which is the order of irad's flattened inputs and Jacobian columns.
//! Included with `#[path]`; a test file uses only some of these.
#![allow(dead_code)]

use irad::ir::interp::Val;
use irad::ir::interp::{ArrayData, ArrayRef};

/// Appends the f64 entries of `v` (tuples and duals walked in order, f64
/// arrays element by element; integers, booleans and functions skipped).
pub fn leaves(v: &Val, out: &mut Vec<f64>) {
    match v {
        Val::F64(x) => out.push(*x),
        Val::Array(a) => {
            if let ArrayData::F64(xs) = &*a.0.borrow() {
                out.extend_from_slice(xs);
            }
        }
        Val::Tuple(vs) | Val::Dual(vs) => vs.iter().for_each(|v| leaves(v, out)),
        _ => {}
    }
}

/// The f64 entries of `v`.
pub fn flat(v: &Val) -> Vec<f64> {
    let mut out = Vec::new();
    leaves(v, &mut out);
    out
}

/// The f64 entries of a gradient-shaped list (entries `None` skipped).
pub fn flat_all(g: &[Option<Val>]) -> Vec<f64> {
    let mut out = Vec::new();
    g.iter().flatten().for_each(|v| leaves(v, &mut out));
    out
}

/// `v` with each f64 entry x replaced by `f(x, k)`, k counting the entries
/// from `*k` on (and left one past the last).
pub fn map_f64(v: &Val, k: &mut usize, f: &dyn Fn(f64, usize) -> f64) -> Val {
    match v {
        Val::F64(x) => {
            *k += 1;
            Val::F64(f(*x, *k - 1))
        }
        Val::Array(a) => match &*a.0.borrow() {
            ArrayData::F64(xs) => Val::f64_array(
                xs.iter()
                    .map(|&x| {
                        *k += 1;
                        f(x, *k - 1)
                    })
                    .collect(),
            ),
            other => Val::Array(ArrayRef::new(other.clone())),
        },
        Val::Tuple(vs) => Val::Tuple(vs.iter().map(|v| map_f64(v, k, f)).collect()),
        other => other.clone(),
    }
}

/// The arguments with every f64 entry x replaced by `f(x, k)`, k counting
/// the entries across all arguments.
pub fn map_args(args: &[Val], f: &dyn Fn(f64, usize) -> f64) -> Vec<Val> {
    let mut k = 0;
    args.iter().map(|a| map_f64(a, &mut k, f)).collect()
}
