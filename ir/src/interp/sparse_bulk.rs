//! The interpreter's side of the sparse primitives on arrays of handles
//! (`ssum sdot sfill sgemma sgemmb`, docs/ir.md "Sparse tangents"): the
//! operands unpacked, [`crate::sparse::check_bulk`] run, then the kernel of
//! [`crate::sparse::SparseArena`], the same code the runtime calls for
//! compiled code, so both backends make the same nodes in the same order.
//!
//! Assumes operands of the verified types; any other shape of operands is an
//! internal error, never a panic. As with the bulk primitives, an output of
//! length 0 is checked but never written (it may then be an input).

use super::internal_message;
use super::value::{ArrayData, ArrayRef, Val};
use crate::prim::Prim;
use crate::sparse::{SparseArena, SparseBulk, check_bulk};
use std::cell::{Ref, RefMut};
use std::rc::Rc;

/// `prim` (one of [`Prim::sparse_bulk`]) on `args` with the arena `arena`.
pub(super) fn run(arena: &mut SparseArena, prim: Prim, args: &[&Val]) -> Result<Val, String> {
    let bad = || {
        let kinds: Vec<&str> = args.iter().map(|v| v.kind()).collect();
        internal_message(format_args!("`{prim}` applied to ({})", kinds.join(", ")))
    };
    let op = prim.sparse_bulk().ok_or_else(bad)?;
    let (mut arrays, mut dims, mut flags, mut handle) = (Vec::new(), Vec::new(), Vec::new(), None);
    for v in args {
        match v {
            Val::Array(a) => arrays.push(a),
            Val::I64(n) => dims.push(*n),
            Val::Bool(b) => flags.push(*b),
            Val::Sparse(h) => handle = Some(*h),
            _ => return Err(bad()),
        }
    }
    let lens = arrays
        .iter()
        .map(|a| read(a).map(|d| d.len()))
        .collect::<Result<Vec<_>, _>>()?;
    let flag = |i: usize| flags.get(i).copied().unwrap_or(false);
    check_bulk(op, &lens, &dims, [flag(0), flag(1)], &|i, j| {
        Rc::ptr_eq(&arrays[i].0, &arrays[j].0)
    })?;
    let sparse = |i: usize| -> Result<Ref<'_, [i64]>, String> {
        let a = arrays.get(i).ok_or_else(bad)?;
        Ref::filter_map(read(a)?, |d| match d {
            ArrayData::Sparse(xs) => Some(xs.as_slice()),
            _ => None,
        })
        .map_err(|_| bad())
    };
    let real = |i: usize| -> Result<Ref<'_, [f64]>, String> {
        let a = arrays.get(i).ok_or_else(bad)?;
        Ref::filter_map(read(a)?, |d| match d {
            ArrayData::F64(xs) => Some(xs.as_slice()),
            _ => None,
        })
        .map_err(|_| bad())
    };
    let write = |i: usize| -> Result<RefMut<'_, [i64]>, String> {
        let a = arrays.get(i).ok_or_else(bad)?;
        let data =
            a.0.try_borrow_mut()
                .map_err(|_| internal_message("array is borrowed"))?;
        RefMut::filter_map(data, |d| match d {
            ArrayData::Sparse(xs) => Some(xs.as_mut_slice()),
            _ => None,
        })
        .map_err(|_| bad())
    };
    let res = match op {
        SparseBulk::Sum => {
            return arena
                .sum(&sparse(0)?)
                .map(Val::Sparse)
                .map_err(|e| e.to_string());
        }
        SparseBulk::Dot => {
            return arena
                .dot(&real(0)?, &sparse(1)?)
                .map(Val::Sparse)
                .map_err(|e| e.to_string());
        }
        SparseBulk::Fill => arena.fill(&mut write(0)?, handle.ok_or_else(bad)?),
        SparseBulk::GemmA | SparseBulk::GemmB => {
            if lens.get(2) == Some(&0) {
                return Ok(Val::Unit);
            }
            let dim = |i: usize| {
                dims.get(i)
                    .and_then(|&d| usize::try_from(d).ok())
                    .unwrap_or(0)
            };
            let sparse_a = op == SparseBulk::GemmA;
            let (s, f) = if sparse_a {
                (sparse(0)?, real(1)?)
            } else {
                (sparse(1)?, real(0)?)
            };
            arena.gemm(
                sparse_a,
                flag(0),
                flag(1),
                &s,
                &f,
                (dim(0), dim(1), dim(2)),
                &mut write(2)?,
            )
        }
    };
    res.map(|()| Val::Unit).map_err(|e| e.to_string())
}

/// Reads an array; the interpreter never holds a borrow across statements,
/// so failure means a bug, reported rather than panicking.
fn read(a: &ArrayRef) -> Result<Ref<'_, ArrayData>, String> {
    a.0.try_borrow()
        .map_err(|_| internal_message("array is borrowed"))
}
