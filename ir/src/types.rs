//! IR types: scalars, tuples, arrays of a scalar element, function types and the
//! AD type `dual<T>`. `Display` prints the text form of SYNTAX.md §1.
//!
//! A tuple has at least one element: [`Type::tuple`] turns the empty tuple into
//! `()`, so every type has exactly one representation.

use std::fmt;
use std::sync::Arc;

/// The element type of an array.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Scalar {
    /// `f64`
    F64,
    /// `i64`
    I64,
    /// `bool`
    Bool,
}

/// A function type `fn(P, ...) -> R`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct FnType {
    /// Parameter types in order.
    pub params: Vec<Type>,
    /// Result type.
    pub ret: Type,
}

/// An IR type.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Type {
    /// 64-bit IEEE float.
    F64,
    /// 64-bit two's-complement integer.
    I64,
    /// Boolean.
    Bool,
    /// The unit type `()`, also the empty tuple.
    Unit,
    /// A tuple of one or more elements.
    Tuple(Arc<[Type]>),
    /// A one-dimensional heap array, passed by reference.
    Array(Scalar),
    /// A function value.
    Func(Arc<FnType>),
    /// A primal value of the inner type paired with `width` tangents of its
    /// tangent type (forward mode; `width` > 1 in batch mode). The inner type
    /// always has a tangent type (see [`Type::tangent`]).
    Dual(Arc<Type>, u32),
}

impl Scalar {
    /// The scalar as a full type.
    pub fn ty(self) -> Type {
        match self {
            Scalar::F64 => Type::F64,
            Scalar::I64 => Type::I64,
            Scalar::Bool => Type::Bool,
        }
    }

    /// The scalar type `ty`, if it is one.
    pub fn of(ty: &Type) -> Option<Scalar> {
        match ty {
            Type::F64 => Some(Scalar::F64),
            Type::I64 => Some(Scalar::I64),
            Type::Bool => Some(Scalar::Bool),
            _ => None,
        }
    }
}

impl Type {
    /// A tuple of `elems`; `()` when there are none.
    pub fn tuple(elems: Vec<Type>) -> Type {
        if elems.is_empty() {
            Type::Unit
        } else {
            Type::Tuple(elems.into())
        }
    }

    /// The forward-mode pair type `dual<inner>`: one tangent.
    pub fn dual(inner: Type) -> Type {
        Type::Dual(Arc::new(inner), 1)
    }

    /// The batch forward-mode type `dual<inner, width>`: `width` tangents.
    pub fn dual_n(inner: Type, width: u32) -> Type {
        Type::Dual(Arc::new(inner), width)
    }

    /// The tangent type: `f64` for `f64`, `[f64]` for `[f64]`, for a tuple the
    /// tuple of its elements' tangent types with `()` for elements that have
    /// none; `None` for every type without an f64 inside (`i64`, `bool`, `()`,
    /// `[i64]`, `[bool]`, function types) and for `dual<T>` (forward mode is
    /// not nested). Recursive over tuples, so as deep as the type, which the
    /// parser and verifier cap at [`crate::MAX_NESTING`].
    pub fn tangent(&self) -> Option<Type> {
        match self {
            Type::F64 => Some(Type::F64),
            Type::Array(Scalar::F64) => Some(Type::Array(Scalar::F64)),
            Type::Tuple(elems) => {
                let tans: Vec<Option<Type>> = elems.iter().map(Type::tangent).collect();
                if tans.iter().all(Option::is_none) {
                    return None;
                }
                Some(Type::tuple(
                    tans.into_iter().map(|t| t.unwrap_or(Type::Unit)).collect(),
                ))
            }
            _ => None,
        }
    }

    /// Whether the type has a tangent type, i.e. contains an f64 outside a
    /// function type.
    pub fn has_tangent(&self) -> bool {
        let mut stack = vec![self];
        while let Some(ty) = stack.pop() {
            match ty {
                Type::F64 | Type::Array(Scalar::F64) => return true,
                Type::Tuple(elems) => stack.extend(elems.iter()),
                _ => {}
            }
        }
        false
    }

    /// The type a value of this type has in a forward rule of batch width
    /// `width`: `dual<T, width>` when `T` has a tangent, `T` itself otherwise.
    pub fn forward(&self, width: u32) -> Type {
        if self.has_tangent() {
            Type::dual_n(self.clone(), width)
        } else {
            self.clone()
        }
    }

    /// The type of the forward rule of a function of type `sig` at batch width
    /// `width`: every parameter and the result mapped by [`Type::forward`].
    pub fn forward_fn(sig: &FnType, width: u32) -> FnType {
        FnType {
            params: sig.params.iter().map(|p| p.forward(width)).collect(),
            ret: sig.ret.forward(width),
        }
    }

    /// A function type `fn(params) -> ret` from a signature.
    pub fn from_fn(sig: FnType) -> Type {
        Type::Func(Arc::new(sig))
    }

    /// A function type.
    pub fn func(params: Vec<Type>, ret: Type) -> Type {
        Type::Func(Arc::new(FnType { params, ret }))
    }

    /// The nesting depth of the type: 1 for scalars, arrays and `()`.
    ///
    /// Iterative, so that a type built deeper than the parser allows cannot
    /// overflow the stack here.
    pub fn depth(&self) -> usize {
        let mut max = 0;
        let mut stack = vec![(self, 1usize)];
        while let Some((ty, d)) = stack.pop() {
            max = max.max(d);
            match ty {
                Type::Tuple(elems) => stack.extend(elems.iter().map(|e| (e, d + 1))),
                Type::Func(f) => {
                    stack.extend(f.params.iter().map(|e| (e, d + 1)));
                    stack.push((&f.ret, d + 1));
                }
                Type::Dual(inner, _) => stack.push((inner, d + 1)),
                _ => {}
            }
        }
        max
    }
}

impl Type {
    /// The number of nodes of the type tree: 1 for scalars, arrays and `()`.
    /// Iterative, like [`Type::depth`].
    pub fn size(&self) -> usize {
        let mut n = 0usize;
        let mut stack = vec![self];
        while let Some(ty) = stack.pop() {
            n += 1;
            match ty {
                Type::Tuple(elems) => stack.extend(elems.iter()),
                Type::Func(f) => {
                    stack.extend(f.params.iter());
                    stack.push(&f.ret);
                }
                Type::Dual(inner, _) => stack.push(inner),
                _ => {}
            }
        }
        n
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scalar::F64 => "f64",
            Scalar::I64 => "i64",
            Scalar::Bool => "bool",
        })
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::F64 => f.write_str("f64"),
            Type::I64 => f.write_str("i64"),
            Type::Bool => f.write_str("bool"),
            Type::Unit => f.write_str("()"),
            Type::Tuple(elems) => {
                f.write_str("(")?;
                for (i, e) in elems.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{e}")?;
                }
                // A one-element tuple keeps its comma, as in Rust.
                if elems.len() == 1 {
                    f.write_str(",")?;
                }
                f.write_str(")")
            }
            Type::Array(s) => write!(f, "[{s}]"),
            Type::Func(ft) => {
                f.write_str("fn(")?;
                for (i, p) in ft.params.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{p}")?;
                }
                write!(f, ") -> {}", ft.ret)
            }
            Type::Dual(inner, 1) => write!(f, "dual<{inner}>"),
            Type::Dual(inner, width) => write!(f, "dual<{inner}, {width}>"),
        }
    }
}
