//! Run-time values of the reference interpreter.
//!
//! Scalars are held inline; tuples are immutable and shared; arrays are shared
//! mutable buffers, so a write through one reference is seen through every
//! other (the caller sees a callee's in-place writes). Function values are
//! handles into the module's function table or primitives.

use crate::func::{FuncRef, Module};
use crate::text::num::format_f64;
use crate::types::{Scalar, Type};
use std::cell::RefCell;
use std::rc::Rc;

/// The elements of an array.
#[derive(Clone, Debug, PartialEq)]
pub enum ArrayData {
    /// `[f64]`
    F64(Vec<f64>),
    /// `[i64]`
    I64(Vec<i64>),
    /// `[bool]`
    Bool(Vec<bool>),
    /// `[sparse]`: handles of the interpreter's sparse tangent builder.
    Sparse(Vec<i64>),
}

/// A reference to an array; clones share the buffer.
#[derive(Clone, Debug)]
pub struct ArrayRef(pub Rc<RefCell<ArrayData>>);

/// A run-time value.
#[derive(Clone, Debug)]
pub enum Val {
    /// f64
    F64(f64),
    /// i64
    I64(i64),
    /// bool
    Bool(bool),
    /// ()
    Unit,
    /// A tuple of one or more values.
    Tuple(Rc<[Val]>),
    /// An array reference.
    Array(ArrayRef),
    /// A function value.
    Func(FuncRef),
    /// A dual value of forward mode: the primal, then one value per tangent.
    Dual(Rc<[Val]>),
    /// A handle of the running interpreter's sparse tangent builder (valid
    /// only during the run that made it).
    Sparse(i64),
}

impl ArrayData {
    /// A zero-filled (false-filled) array of `len` elements.
    pub fn zeroed(elem: Scalar, len: usize) -> ArrayData {
        match elem {
            Scalar::F64 => ArrayData::F64(vec![0.0; len]),
            Scalar::I64 => ArrayData::I64(vec![0; len]),
            Scalar::Bool => ArrayData::Bool(vec![false; len]),
            Scalar::Sparse => ArrayData::Sparse(vec![0; len]),
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            ArrayData::F64(v) => v.len(),
            ArrayData::I64(v) => v.len(),
            ArrayData::Bool(v) => v.len(),
            ArrayData::Sparse(v) => v.len(),
        }
    }

    /// Whether the array has no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` as a value, if in range.
    pub fn get(&self, i: usize) -> Option<Val> {
        match self {
            ArrayData::F64(v) => v.get(i).map(|&x| Val::F64(x)),
            ArrayData::I64(v) => v.get(i).map(|&x| Val::I64(x)),
            ArrayData::Bool(v) => v.get(i).map(|&x| Val::Bool(x)),
            ArrayData::Sparse(v) => v.get(i).map(|&x| Val::Sparse(x)),
        }
    }
}

impl ArrayRef {
    /// A new array holding `data`.
    pub fn new(data: ArrayData) -> ArrayRef {
        ArrayRef(Rc::new(RefCell::new(data)))
    }
}

impl Val {
    /// An f64 array value.
    pub fn f64_array(xs: Vec<f64>) -> Val {
        Val::Array(ArrayRef::new(ArrayData::F64(xs)))
    }

    /// Equality as the IR defines it for results: f64 by value except that any
    /// NaN equals any NaN and `-0.0` differs from `0.0` (bit equality up to NaN
    /// payloads); arrays by contents; functions by handle.
    pub fn same(&self, other: &Val) -> bool {
        fn same_f64(a: f64, b: f64) -> bool {
            (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
        }
        match (self, other) {
            (Val::F64(a), Val::F64(b)) => same_f64(*a, *b),
            (Val::I64(a), Val::I64(b)) => a == b,
            (Val::Bool(a), Val::Bool(b)) => a == b,
            (Val::Unit, Val::Unit) => true,
            (Val::Tuple(a), Val::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.same(y))
            }
            (Val::Array(a), Val::Array(b)) => match (&*a.0.borrow(), &*b.0.borrow()) {
                (ArrayData::F64(x), ArrayData::F64(y)) => {
                    x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_f64(*p, *q))
                }
                (x, y) => x == y,
            },
            (Val::Func(a), Val::Func(b)) => a == b,
            (Val::Dual(a), Val::Dual(b)) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.same(y))
            }
            (Val::Sparse(a), Val::Sparse(b)) => a == b,
            _ => false,
        }
    }

    /// What kind of value this is, for messages: `f64`, `i64`, `bool`, `()`,
    /// `tuple`, `array`, `function`, `dual`, `sparse`.
    pub fn kind(&self) -> &'static str {
        match self {
            Val::F64(_) => "f64",
            Val::I64(_) => "i64",
            Val::Bool(_) => "bool",
            Val::Unit => "()",
            Val::Tuple(_) => "tuple",
            Val::Array(_) => "array",
            Val::Func(_) => "function",
            Val::Dual(_) => "dual",
            Val::Sparse(_) => "sparse",
        }
    }

    /// Whether the value has type `ty`; `module` gives the types of function
    /// values. Iterative, so deeply nested tuples cannot overflow the stack.
    pub fn has_type(&self, ty: &Type, module: &Module) -> bool {
        let mut work = vec![(self, ty)];
        while let Some((val, ty)) = work.pop() {
            let ok = match (val, ty) {
                (Val::F64(_), Type::F64)
                | (Val::I64(_), Type::I64)
                | (Val::Bool(_), Type::Bool)
                | (Val::Unit, Type::Unit) => true,
                (Val::Tuple(vals), Type::Tuple(tys)) => {
                    work.extend(vals.iter().zip(tys.iter()));
                    vals.len() == tys.len()
                }
                (Val::Array(a), Type::Array(elem)) => a.0.try_borrow().is_ok_and(|data| {
                    matches!(
                        (&*data, elem),
                        (ArrayData::F64(_), Scalar::F64)
                            | (ArrayData::I64(_), Scalar::I64)
                            | (ArrayData::Bool(_), Scalar::Bool)
                            | (ArrayData::Sparse(_), Scalar::Sparse)
                    )
                }),
                (Val::Func(FuncRef::User(id)), Type::Func(want)) => {
                    module.get(*id).is_some_and(|f| f.fn_type() == **want)
                }
                (Val::Func(FuncRef::Prim(p)), Type::Func(_)) => p.fn_type().as_ref() == Some(ty),
                (Val::Sparse(_), Type::Sparse) => true,
                (Val::Dual(vals), Type::Dual(inner, lanes)) => match inner.tangent_at(*lanes) {
                    Some(tan) if vals.len() == lanes.count() + 1 => {
                        work.push((&vals[0], inner));
                        // The tangent type is owned here; check the tangents
                        // against it now rather than through the work list.
                        vals[1..].iter().all(|t| t.has_type(&tan, module))
                    }
                    _ => false,
                },
                _ => false,
            };
            if !ok {
                return false;
            }
        }
        true
    }

    /// The value's type as text (`f64`, `(f64, [i64])`, `fn(f64) -> f64`), for
    /// messages; tuples nested deeper than a few levels print as `(...)`.
    pub fn type_text(&self, module: &Module) -> String {
        let mut out = String::new();
        self.write_type(module, &mut out, 0);
        out
    }

    fn write_type(&self, module: &Module, out: &mut String, depth: usize) {
        match self {
            Val::Tuple(_) if depth >= 8 => out.push_str("(...)"),
            Val::Tuple(elems) => {
                out.push('(');
                for (i, e) in elems.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    e.write_type(module, out, depth + 1);
                }
                if elems.len() == 1 {
                    out.push(',');
                }
                out.push(')');
            }
            Val::Array(a) => out.push_str(match a.0.try_borrow().as_deref() {
                Ok(ArrayData::F64(_)) => "[f64]",
                Ok(ArrayData::I64(_)) => "[i64]",
                Ok(ArrayData::Bool(_)) => "[bool]",
                Ok(ArrayData::Sparse(_)) => "[sparse]",
                Err(_) => "array",
            }),
            Val::Func(FuncRef::User(id)) => match module.get(*id) {
                Some(f) => out.push_str(&Type::from_fn(f.fn_type()).to_string()),
                None => out.push_str("function"),
            },
            Val::Func(FuncRef::Prim(p)) => match p.fn_type() {
                Some(t) => out.push_str(&t.to_string()),
                None => out.push_str("function"),
            },
            Val::Dual(_) if depth >= 8 => out.push_str("dual<...>"),
            Val::Dual(vals) => {
                out.push_str("dual<");
                if let Some(p) = vals.first() {
                    p.write_type(module, out, depth + 1);
                }
                if vals.len() > 2 {
                    out.push_str(&format!(", {}", vals.len() - 1));
                }
                if matches!(vals.get(1), Some(Val::Sparse(_))) {
                    out.push_str(", sparse");
                }
                out.push('>');
            }
            _ => out.push_str(self.kind()),
        }
    }

    /// The value in IR literal syntax (`1.5`, `[1.0, 2.0]`, `(1.0, 2)`, `@g`,
    /// `dual(1.5, 1.0)`).
    pub fn display(&self, module: &Module) -> String {
        let mut out = String::new();
        self.write(module, &mut out);
        out
    }

    fn write(&self, module: &Module, out: &mut String) {
        match self {
            Val::F64(x) => out.push_str(&format_f64(*x)),
            Val::I64(x) => out.push_str(&x.to_string()),
            Val::Bool(x) => out.push_str(if *x { "true" } else { "false" }),
            Val::Unit => out.push_str("()"),
            Val::Tuple(elems) => {
                out.push('(');
                for (i, e) in elems.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    e.write(module, out);
                }
                if elems.len() == 1 {
                    out.push(',');
                }
                out.push(')');
            }
            Val::Array(a) => {
                out.push('[');
                let data = a.0.borrow();
                for i in 0..data.len() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    if let Some(e) = data.get(i) {
                        e.write(module, out);
                    }
                }
                out.push(']');
            }
            Val::Func(FuncRef::Prim(p)) => {
                out.push('@');
                out.push_str(p.name());
            }
            Val::Func(FuncRef::User(id)) => {
                out.push('@');
                out.push_str(module.get(*id).map_or("?", |f| f.name.as_str()));
            }
            Val::Sparse(h) => out.push_str(&format!("sparse#{h}")),
            Val::Dual(vals) => {
                out.push_str("dual(");
                for (i, v) in vals.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    v.write(module, out);
                }
                out.push(')');
            }
        }
    }
}
