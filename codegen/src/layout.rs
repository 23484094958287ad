//! How IR types are laid out in compiled code: every value is a flat list of
//! leaves, each one Cranelift scalar (docs/codegen.md, "Types").
//!
//! - `f64` is one `f64`, `i64` one `i64`, `bool` one `i8` holding 0 or 1;
//! - `()` has no leaves;
//! - a tuple is its elements' leaves in order;
//! - an array `[T]` is two `i64`: the address of its first element and its
//!   length (elements are 8 bytes, 1 for `bool`);
//! - a function value is one `i64`, its handle in the function table;
//! - `sparse` is one `i64`, a handle of the runtime's sparse tangent builder
//!   (`[sparse]` arrays hold such handles, 8 bytes each);
//! - `dual<T, N>` is the leaves of `T`, then the leaves of N tangents of `T`'s
//!   tangent type; `dual<T, sparse>` the leaves of `T` and of one tangent of
//!   `T`'s sparse tangent type.
//!
//! Values pushed on a tape are stored leaf by leaf, 8 bytes per leaf except 1
//! for a `bool`, unaligned; a value without leaves takes one (unused) byte, so
//! that the tape counts it.

use cranelift_codegen::ir::types;
use irad_ir::types::{Scalar, Type};

/// A leaf: the Cranelift type of one scalar piece of a value.
pub(crate) type Leaf = types::Type;

/// The leaves of a value, inline up to eight (no allocation for the
/// scalars, arrays and small tuples of nearly every statement).
pub(crate) type LeafList = smallvec::SmallVec<[Leaf; 8]>;

/// The leaves of `ty`, appended to `out`.
pub(crate) fn leaves(ty: &Type, out: &mut LeafList) {
    match ty {
        Type::F64 => out.push(types::F64),
        Type::I64 | Type::Func(_) | Type::Sparse => out.push(types::I64),
        Type::Bool => out.push(types::I8),
        Type::Unit => {}
        Type::Tuple(elems) => elems.iter().for_each(|e| leaves(e, out)),
        Type::Array(_) => out.extend([types::I64, types::I64]),
        Type::Dual(inner, lanes) => {
            leaves(inner, out);
            if let Some(tan) = inner.tangent_at(*lanes) {
                for _ in 0..lanes.count() {
                    leaves(&tan, out);
                }
            }
        }
    }
}

/// The leaves of `ty` as a new list.
pub(crate) fn leaf_list(ty: &Type) -> LeafList {
    let mut out = LeafList::new();
    leaves(ty, &mut out);
    out
}

/// How many leaves `ty` has.
pub(crate) fn leaf_count(ty: &Type) -> usize {
    match ty {
        Type::F64 | Type::I64 | Type::Func(_) | Type::Bool | Type::Sparse => 1,
        Type::Unit => 0,
        Type::Tuple(elems) => elems.iter().map(leaf_count).sum(),
        Type::Array(_) => 2,
        Type::Dual(inner, lanes) => {
            leaf_count(inner)
                + inner.tangent_at(*lanes).map_or(0, |t| leaf_count(&t)) * lanes.count()
        }
    }
}

/// The bytes a leaf takes on a tape.
pub(crate) fn leaf_bytes(leaf: Leaf) -> u32 {
    if leaf == types::I8 { 1 } else { 8 }
}

/// The bytes an element of an array of `elem` takes.
pub(crate) fn elem_bytes(elem: Scalar) -> i64 {
    match elem {
        Scalar::Bool => 1,
        Scalar::F64 | Scalar::I64 | Scalar::Sparse => 8,
    }
}

/// The Cranelift type of an element of an array of `elem`.
pub(crate) fn elem_leaf(elem: Scalar) -> Leaf {
    match elem {
        Scalar::F64 => types::F64,
        Scalar::I64 | Scalar::Sparse => types::I64,
        Scalar::Bool => types::I8,
    }
}
