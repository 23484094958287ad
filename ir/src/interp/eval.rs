//! The semantics of every primitive: one function per group of the primitive
//! table, each matching on [`Prim`].
//!
//! Assumes nothing about the operands: a verified module passes values of the
//! types the table says, but a wrong count or kind of operand is reported as an
//! `internal error: ...` message, never a panic. Guarantees the shared semantics
//! of SYNTAX.md §1: the math functions are irad's own `exp`, `log`, `tanh`,
//! `sin`, `cos`, `tan` and `pow` (`irad_kernels::math`; `powi(x, n)` is
//! `pow(x, n as f64)`) and the `libm` crate's others, the functions compiled
//! code calls or computes inline (so the two agree bit for bit; docs/ir.md,
//! "Semantics"), `add sub mul div neg` are plain
//! IEEE operations, integer arithmetic wraps except where an error is defined.
//! Errors are plain messages (lowercase, no location); the caller locates them.

use super::internal_message;
use super::value::{ArrayData, ArrayRef, Val};
use crate::func::Const;
use crate::prim::Prim;
use crate::types::Scalar;
use irad_kernels::trap::Trap;

/// The largest array (in elements) that `alloc`, `zeros` and `copy` make;
/// larger requests are run-time errors rather than allocation failures.
/// Compiled code keeps the same limit (it is `irad-kernels`').
pub use irad_kernels::MAX_ARRAY_LEN;

/// Applies `prim` to `args`. `elem` is the element type of `alloc`'s result
/// (taken from the statement's result type); other primitives ignore it.
pub(crate) fn eval(prim: Prim, args: &[&Val], elem: Option<Scalar>) -> Result<Val, String> {
    use Prim::*;
    match prim {
        Add | Sub | Mul | Div | Neg | Pow | Powi | Abs | Min | Max | Copysign | Zmul => {
            f64_arith(prim, args)
        }
        Sqrt | Exp | Log | Log1p | Expm1 | Sin | Cos | Tan | Asin | Acos | Atan | Atan2 | Sinh
        | Cosh | Tanh | Erf | Floor | Ceil | Round => f64_func(prim, args),
        Lt | Le | Gt | Ge | Eq | Ne => compare(prim, args),
        Select => select(args),
        Iadd | Isub | Imul | Idiv | Irem | Ineg => int_arith(prim, args),
        And | Or | Not => bool_op(prim, args),
        Sitofp | Fptosi => convert(prim, args),
        Tuple | Getfield => tuple_op(prim, args),
        Alloc | Zeros | Length | Arrayref | Arrayset | Copy => array_op(prim, args, elem),
        Dual | Primal | Tangent => dual_op(prim, args),
        Sum | Dot | Axpy | Scale | Matvec | Matmul | Fill | Copyto | Gemm => bulk_op(prim, args),
        // A hint to reverse mode: nothing to do.
        Checkpoint => Ok(Val::Unit),
        Same => same(args),
        // Need the interpreter's rule provider, tapes or sparse tangent
        // builder: it handles them before `eval`.
        Frule | Push | Pop | Revfwd | Revback | Sonehot | Szero | Sscale | Sadd | Sdense | Ssum
        | Sdot | Sfill | Sgemma | Sgemmb => Err(internal_message(format_args!(
            "`{prim}` evaluated without the interpreter"
        ))),
    }
}

/// Evaluates `prim` on constant operands at compile time, exactly as the
/// interpreter would at run time (the same code, `eval`), so a folded result
/// is bit-identical to the run-time one. This is the one place compile-time
/// constant evaluation lives (partial evaluation uses it; constant-folding
/// rules can too).
///
/// `None` when the call must stay for run time: an operand or the result is not
/// a scalar constant (tuples, arrays, duals), the primitive has an effect or
/// needs the interpreter (arrays, tapes, rules), or the evaluation fails (a
/// run-time error such as `idiv` by zero or `fptosi` of NaN must still be
/// raised at run time, at its statement).
pub fn fold_prim(prim: Prim, args: &[Const]) -> Option<Const> {
    use Prim::*;
    match prim {
        Tuple | Getfield | Alloc | Zeros | Length | Arrayref | Arrayset | Copy | Dual | Primal
        | Tangent | Frule | Push | Pop | Revfwd | Revback | Sonehot | Szero | Sscale | Sadd
        | Sdense | Sum | Dot | Axpy | Scale | Matvec | Matmul | Fill | Copyto | Gemm | Ssum
        | Sdot | Sfill | Sgemma | Sgemmb | Checkpoint | Same => {
            return None;
        }
        _ => {}
    }
    let vals: Vec<Val> = args
        .iter()
        .map(|c| match *c {
            Const::F64(x) => Val::F64(x),
            Const::I64(x) => Val::I64(x),
            Const::Bool(x) => Val::Bool(x),
            Const::Unit => Val::Unit,
            Const::Func(f) => Val::Func(f),
        })
        .collect();
    let refs: Vec<&Val> = vals.iter().collect();
    match eval(prim, &refs, None).ok()? {
        Val::F64(x) => Some(Const::F64(x)),
        Val::I64(x) => Some(Const::I64(x)),
        Val::Bool(x) => Some(Const::Bool(x)),
        Val::Unit => Some(Const::Unit),
        Val::Func(f) => Some(Const::Func(f)),
        Val::Tuple(_) | Val::Array(_) | Val::Dual(_) | Val::Sparse(_) => None,
    }
}

/// `dual(p, t...)`, `primal(d)` and `tangent(d, k)`.
fn dual_op(prim: Prim, args: &[&Val]) -> Result<Val, String> {
    match (prim, args) {
        (Prim::Dual, [_, _, ..]) => Ok(Val::Dual(args.iter().map(|v| (*v).clone()).collect())),
        (Prim::Primal, [Val::Dual(vals)]) => vals
            .first()
            .cloned()
            .ok_or_else(|| internal_message("empty dual")),
        (Prim::Tangent, [Val::Dual(vals), Val::I64(k)]) => usize::try_from(*k)
            .ok()
            .and_then(|k| vals.get(k + 1))
            .cloned()
            .ok_or_else(|| {
                internal_message(format_args!(
                    "tangent {k} out of range for a dual of {} tangents",
                    vals.len().saturating_sub(1)
                ))
            }),
        _ => Err(bad_operands(prim, args)),
    }
}

/// The common scalar cases, computed without building an operand list or a
/// `Result`, so the interpreter's hot loop can store the value straight into
/// its slot. `None` means "not a fast case": the caller falls back to [`eval`].
/// Every case here is one that cannot fail and is defined exactly as in the
/// group functions below (a unit test checks that they agree).
#[inline(always)]
pub(crate) fn fast(prim: Prim, args: &[&Val]) -> Option<Val> {
    use Prim::*;
    Some(match args {
        [Val::F64(a), Val::F64(b)] => match prim {
            Add => Val::F64(a + b),
            Sub => Val::F64(a - b),
            Mul => Val::F64(a * b),
            Div => Val::F64(a / b),
            Lt => Val::Bool(a < b),
            Le => Val::Bool(a <= b),
            Gt => Val::Bool(a > b),
            Ge => Val::Bool(a >= b),
            Eq => Val::Bool(a == b),
            Ne => Val::Bool(a != b),
            _ => return None,
        },
        [Val::I64(a), Val::I64(b)] => match prim {
            Iadd => Val::I64(a.wrapping_add(*b)),
            Isub => Val::I64(a.wrapping_sub(*b)),
            Imul => Val::I64(a.wrapping_mul(*b)),
            Lt => Val::Bool(a < b),
            Le => Val::Bool(a <= b),
            Gt => Val::Bool(a > b),
            Ge => Val::Bool(a >= b),
            Eq => Val::Bool(a == b),
            Ne => Val::Bool(a != b),
            _ => return None,
        },
        [Val::F64(a)] => match prim {
            Neg => Val::F64(-a),
            _ => return None,
        },
        [Val::I64(a)] => match prim {
            Sitofp => Val::F64(*a as f64),
            Ineg => Val::I64(a.wrapping_neg()),
            _ => return None,
        },
        [Val::Bool(a)] => match prim {
            Not => Val::Bool(!a),
            _ => return None,
        },
        _ => return None,
    })
}

/// `add sub mul div neg pow powi abs min max copysign zmul`.
fn f64_arith(prim: Prim, args: &[&Val]) -> Result<Val, String> {
    use Prim::*;
    let x = match (prim, args) {
        (Add, [Val::F64(a), Val::F64(b)]) => a + b,
        (Sub, [Val::F64(a), Val::F64(b)]) => a - b,
        (Mul, [Val::F64(a), Val::F64(b)]) => a * b,
        (Div, [Val::F64(a), Val::F64(b)]) => a / b,
        (Neg, [Val::F64(a)]) => -a,
        (Pow, [Val::F64(a), Val::F64(b)]) => irad_kernels::math::pow(*a, *b),
        (Powi, [Val::F64(a), Val::I64(n)]) => irad_kernels::math::pow(*a, *n as f64),
        (Abs, [Val::F64(a)]) => libm::fabs(*a),
        (Min, [Val::F64(a), Val::F64(b)]) => fmin(*a, *b),
        (Max, [Val::F64(a), Val::F64(b)]) => fmax(*a, *b),
        (Copysign, [Val::F64(a), Val::F64(b)]) => libm::copysign(*a, *b),
        (Zmul, [Val::F64(a), Val::F64(b)]) => irad_kernels::zmul(*a, *b),
        _ => return Err(bad_operands(prim, args)),
    };
    Ok(Val::F64(x))
}

/// The f64 functions: all unary except `atan2`; `exp`, `log` and `tanh` irad's
/// own (`irad_kernels::math`), like `sin`, `cos` and `tan`; the others the
/// `libm` crate's.
fn f64_func(prim: Prim, args: &[&Val]) -> Result<Val, String> {
    use Prim::*;
    if let (Atan2, [Val::F64(y), Val::F64(x)]) = (prim, args) {
        return Ok(Val::F64(libm::atan2(*y, *x)));
    }
    let [Val::F64(x)] = args else {
        return Err(bad_operands(prim, args));
    };
    let x = *x;
    let y = match prim {
        Sqrt => libm::sqrt(x),
        Exp => irad_kernels::math::exp(x),
        Log => irad_kernels::math::log(x),
        Log1p => libm::log1p(x),
        Expm1 => libm::expm1(x),
        Sin => irad_kernels::math::sin(x),
        Cos => irad_kernels::math::cos(x),
        Tan => irad_kernels::math::tan(x),
        Asin => libm::asin(x),
        Acos => libm::acos(x),
        Atan => libm::atan(x),
        Sinh => libm::sinh(x),
        Cosh => libm::cosh(x),
        Tanh => irad_kernels::math::tanh(x),
        Erf => libm::erf(x),
        Floor => libm::floor(x),
        Ceil => libm::ceil(x),
        Round => libm::round(x),
        _ => return Err(bad_operands(prim, args)),
    };
    Ok(Val::F64(y))
}

/// `lt le gt ge` on f64 and i64, `eq ne` also on bool. f64 comparisons are
/// IEEE: a NaN operand makes every comparison false except `ne`.
/// `same(a, b)`: whether `a` and `b` are one array, or both empty (as
/// compiled code, which compares addresses and lengths, says).
fn same(args: &[&Val]) -> Result<Val, String> {
    match args {
        [Val::Array(a), Val::Array(b)] => Ok(Val::Bool(
            std::rc::Rc::ptr_eq(&a.0, &b.0) || (borrow(a)?.is_empty() && borrow(b)?.is_empty()),
        )),
        _ => Err(internal_message("`same` of non-arrays")),
    }
}

fn compare(prim: Prim, args: &[&Val]) -> Result<Val, String> {
    use Prim::*;
    let b = match args {
        [Val::F64(a), Val::F64(b)] => match prim {
            Lt => a < b,
            Le => a <= b,
            Gt => a > b,
            Ge => a >= b,
            Eq => a == b,
            Ne => a != b,
            _ => return Err(bad_operands(prim, args)),
        },
        [Val::I64(a), Val::I64(b)] => match prim {
            Lt => a < b,
            Le => a <= b,
            Gt => a > b,
            Ge => a >= b,
            Eq => a == b,
            Ne => a != b,
            _ => return Err(bad_operands(prim, args)),
        },
        [Val::Bool(a), Val::Bool(b)] => match prim {
            Eq => a == b,
            Ne => a != b,
            _ => return Err(bad_operands(prim, args)),
        },
        _ => return Err(bad_operands(prim, args)),
    };
    Ok(Val::Bool(b))
}

/// `select(c, a, b)`: both operands are already evaluated; returns one of them.
fn select(args: &[&Val]) -> Result<Val, String> {
    match args {
        [Val::Bool(c), a, b] => Ok(if *c { (*a).clone() } else { (*b).clone() }),
        _ => Err(bad_operands(Prim::Select, args)),
    }
}

/// `iadd isub imul ineg` wrap; `idiv irem` truncate toward zero and fail on a
/// zero divisor; `idiv(i64::MIN, -1)` fails, `irem(i64::MIN, -1)` is 0.
fn int_arith(prim: Prim, args: &[&Val]) -> Result<Val, String> {
    use Prim::*;
    let x = match (prim, args) {
        (Iadd, [Val::I64(a), Val::I64(b)]) => a.wrapping_add(*b),
        (Isub, [Val::I64(a), Val::I64(b)]) => a.wrapping_sub(*b),
        (Imul, [Val::I64(a), Val::I64(b)]) => a.wrapping_mul(*b),
        (Ineg, [Val::I64(a)]) => a.wrapping_neg(),
        (Idiv, [Val::I64(a), Val::I64(b)]) => {
            if *b == 0 {
                return Err(Trap::DivZero.to_string());
            }
            a.checked_div(*b)
                .ok_or_else(|| Trap::IdivOverflow.to_string())?
        }
        (Irem, [Val::I64(a), Val::I64(b)]) => {
            if *b == 0 {
                return Err(Trap::RemZero.to_string());
            }
            // Only i64::MIN % -1 overflows, and its mathematical value is 0.
            a.checked_rem(*b).unwrap_or(0)
        }
        _ => return Err(bad_operands(prim, args)),
    };
    Ok(Val::I64(x))
}

/// `and or not`.
fn bool_op(prim: Prim, args: &[&Val]) -> Result<Val, String> {
    use Prim::*;
    let b = match (prim, args) {
        (And, [Val::Bool(a), Val::Bool(b)]) => *a && *b,
        (Or, [Val::Bool(a), Val::Bool(b)]) => *a || *b,
        (Not, [Val::Bool(a)]) => !*a,
        _ => return Err(bad_operands(prim, args)),
    };
    Ok(Val::Bool(b))
}

/// `sitofp` rounds to nearest as Rust's `as f64`; `fptosi` truncates and fails
/// on NaN and on values outside [-2^63, 2^63).
fn convert(prim: Prim, args: &[&Val]) -> Result<Val, String> {
    match (prim, args) {
        (Prim::Sitofp, [Val::I64(n)]) => Ok(Val::F64(*n as f64)),
        (Prim::Fptosi, [Val::F64(x)]) => {
            // 2^63 is exact in f64; every f64 in [-2^63, 2^63) truncates to an i64.
            const TWO_63: f64 = 9_223_372_036_854_775_808.0;
            if x.is_nan() || *x < -TWO_63 || *x >= TWO_63 {
                Err(Trap::Fptosi(*x).to_string())
            } else {
                Ok(Val::I64(*x as i64))
            }
        }
        _ => Err(bad_operands(prim, args)),
    }
}

/// `tuple(...)` (the empty tuple is `()`) and `getfield(t, k)`.
fn tuple_op(prim: Prim, args: &[&Val]) -> Result<Val, String> {
    match (prim, args) {
        (Prim::Tuple, []) => Ok(Val::Unit),
        (Prim::Tuple, _) => Ok(Val::Tuple(args.iter().map(|v| (*v).clone()).collect())),
        (Prim::Getfield, [Val::Tuple(elems), Val::I64(k)]) => usize::try_from(*k)
            .ok()
            .and_then(|k| elems.get(k))
            .cloned()
            .ok_or_else(|| {
                internal_message(format_args!(
                    "field {k} out of range for a tuple of {} elements",
                    elems.len()
                ))
            }),
        _ => Err(bad_operands(prim, args)),
    }
}

/// `alloc zeros length arrayref arrayset copy`.
fn array_op(prim: Prim, args: &[&Val], elem: Option<Scalar>) -> Result<Val, String> {
    use Prim::*;
    match (prim, args) {
        (Alloc, [Val::I64(n)]) => {
            let elem =
                elem.ok_or_else(|| internal_message("`alloc` without an array result type"))?;
            Ok(Val::Array(ArrayRef::new(new_array(elem, *n)?)))
        }
        (Zeros, [Val::I64(n)]) => Ok(Val::Array(ArrayRef::new(new_array(Scalar::F64, *n)?))),
        (Length, [Val::Array(a)]) => {
            let len = borrow(a)?.len();
            Ok(Val::I64(i64::try_from(len).unwrap_or(i64::MAX)))
        }
        (Arrayref, [Val::Array(a), Val::I64(i)]) => {
            let data = borrow(a)?;
            let idx = index(*i, data.len())?;
            data.get(idx)
                .ok_or_else(|| internal_message("array index check failed"))
        }
        (Arrayset, [Val::Array(a), Val::I64(i), v]) => {
            let mut data =
                a.0.try_borrow_mut()
                    .map_err(|_| internal_message("array is borrowed"))?;
            let idx = index(*i, data.len())?;
            let ok = match (&mut *data, v) {
                (ArrayData::F64(xs), Val::F64(x)) => xs.get_mut(idx).map(|slot| *slot = *x),
                (ArrayData::I64(xs), Val::I64(x)) => xs.get_mut(idx).map(|slot| *slot = *x),
                (ArrayData::Bool(xs), Val::Bool(x)) => xs.get_mut(idx).map(|slot| *slot = *x),
                (ArrayData::Sparse(xs), Val::Sparse(x)) => xs.get_mut(idx).map(|slot| *slot = *x),
                _ => return Err(bad_operands(prim, args)),
            };
            ok.ok_or_else(|| internal_message("array index check failed"))?;
            Ok(Val::Unit)
        }
        (Copy, [Val::Array(a)]) => {
            let data = borrow(a)?;
            let copy = match &*data {
                ArrayData::F64(xs) => ArrayData::F64(copy_vec(xs)?),
                ArrayData::I64(xs) => ArrayData::I64(copy_vec(xs)?),
                ArrayData::Bool(xs) => ArrayData::Bool(copy_vec(xs)?),
                ArrayData::Sparse(xs) => ArrayData::Sparse(copy_vec(xs)?),
            };
            Ok(Val::Array(ArrayRef::new(copy)))
        }
        _ => Err(bad_operands(prim, args)),
    }
}

/// The bulk array primitives, through the kernels and checks shared with
/// compiled code (`crate::bulk`).
fn bulk_op(prim: Prim, args: &[&Val]) -> Result<Val, String> {
    use crate::bulk::{self, Op};
    let op = prim.bulk().ok_or_else(|| bad_operands(prim, args))?;
    let (mut arrays, mut dims, mut reals, mut flags) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for v in args {
        match v {
            Val::Array(a) => arrays.push(a),
            Val::I64(n) => dims.push(*n),
            Val::F64(x) => reals.push(*x),
            Val::Bool(b) => flags.push(*b),
            _ => return Err(bad_operands(prim, args)),
        }
    }
    let want_reals = usize::from(matches!(op, Op::Axpy | Op::Scale | Op::Fill));
    let want_flags = if op == Op::Gemm { 2 } else { 0 };
    if reals.len() != want_reals || flags.len() != want_flags {
        return Err(bad_operands(prim, args));
    }
    let mut lens = Vec::with_capacity(arrays.len());
    for a in &arrays {
        match &*borrow(a)? {
            ArrayData::F64(xs) => lens.push(xs.len()),
            _ => return Err(bad_operands(prim, args)),
        }
    }
    let flag = |i: usize| flags.get(i).copied().unwrap_or(false);
    bulk::check(op, &lens, &dims, [flag(0), flag(1)], &|i, j| {
        std::rc::Rc::ptr_eq(&arrays[i].0, &arrays[j].0)
    })?;
    if let Some(out) = op.output()
        && lens[out] == 0
    {
        // Nothing to write (and the output may be an input).
        return Ok(Val::Unit);
    }
    let read = |i: usize| -> Result<std::cell::Ref<'_, [f64]>, String> {
        std::cell::Ref::filter_map(borrow(arrays[i])?, |d| match d {
            ArrayData::F64(xs) => Some(xs.as_slice()),
            _ => None,
        })
        .map_err(|_| bad_operands(prim, args))
    };
    let write = |i: usize| -> Result<std::cell::RefMut<'_, [f64]>, String> {
        let data = arrays[i]
            .0
            .try_borrow_mut()
            .map_err(|_| internal_message("array is borrowed"))?;
        std::cell::RefMut::filter_map(data, |d| match d {
            ArrayData::F64(xs) => Some(xs.as_mut_slice()),
            _ => None,
        })
        .map_err(|_| bad_operands(prim, args))
    };
    let dim = |i: usize| usize::try_from(dims[i]).unwrap_or(0);
    let alpha = reals.first().copied().unwrap_or(0.0);
    match op {
        Op::Sum => return Ok(Val::F64(bulk::sum(&read(0)?))),
        Op::Dot => return Ok(Val::F64(bulk::dot(&read(0)?, &read(1)?))),
        Op::Axpy => bulk::axpy(alpha, &read(0)?, &mut write(1)?),
        Op::Scale => bulk::scale(alpha, &mut write(0)?),
        Op::Fill => bulk::fill(&mut write(0)?, alpha),
        Op::Copyto => bulk::copyto(&mut write(0)?, &read(1)?),
        Op::Matvec => bulk::matvec(&read(0)?, &read(1)?, dim(1), &mut write(2)?),
        Op::Matmul => bulk::matmul(&read(0)?, &read(1)?, dim(1), dim(2), &mut write(2)?),
        Op::Gemm => bulk::gemm(
            flag(0),
            flag(1),
            &read(0)?,
            &read(1)?,
            dim(0),
            dim(1),
            dim(2),
            &mut write(2)?,
        ),
    }
    Ok(Val::Unit)
}

/// The IEEE 754-2019 `minimum`: NaN if either operand is NaN, and `-0.0` is
/// below `0.0` whatever the order of the operands.
fn fmin(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a < b {
        a
    } else if b < a {
        b
    } else if a.is_sign_negative() {
        // Equal operands differ at most in the sign of zero; the negative one wins.
        a
    } else {
        b
    }
}

/// The IEEE 754-2019 `maximum`: NaN if either operand is NaN, and `0.0` is
/// above `-0.0` whatever the order of the operands.
fn fmax(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a > b {
        a
    } else if b > a {
        b
    } else if a.is_sign_positive() {
        a
    } else {
        b
    }
}

/// A zero-filled array of `n` elements, refusing negative and too large lengths
/// and reporting allocation failure as an error.
fn new_array(elem: Scalar, n: i64) -> Result<ArrayData, String> {
    let len = array_len(n)?;
    Ok(match elem {
        Scalar::F64 => ArrayData::F64(filled(len, 0.0)?),
        Scalar::I64 => ArrayData::I64(filled(len, 0)?),
        Scalar::Bool => ArrayData::Bool(filled(len, false)?),
        Scalar::Sparse => ArrayData::Sparse(filled(len, 0)?),
    })
}

/// Checks a requested array length.
pub(crate) fn array_len(n: i64) -> Result<usize, String> {
    if n < 0 {
        return Err(Trap::NegLen(n).to_string());
    }
    if n as u64 > MAX_ARRAY_LEN {
        return Err(Trap::TooLong(n).to_string());
    }
    usize::try_from(n).map_err(|_| format!("array length {n} does not fit in memory"))
}

/// A vector of `len` copies of `x`, or an error when memory runs out.
fn filled<T: Copy>(len: usize, x: T) -> Result<Vec<T>, String> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| Trap::OomAlloc(len as i64).to_string())?;
    v.resize(len, x);
    Ok(v)
}

/// A copy of `xs`, or an error when memory runs out.
fn copy_vec<T: Copy>(xs: &[T]) -> Result<Vec<T>, String> {
    let mut v = Vec::new();
    v.try_reserve_exact(xs.len())
        .map_err(|_| Trap::OomCopy(xs.len() as i64).to_string())?;
    v.extend_from_slice(xs);
    Ok(v)
}

/// Checks index `i` against an array of length `len`.
fn index(i: i64, len: usize) -> Result<usize, String> {
    match usize::try_from(i) {
        Ok(idx) if idx < len => Ok(idx),
        _ => Err(Trap::Index {
            index: i,
            len: len as i64,
        }
        .to_string()),
    }
}

/// Reads an array; the interpreter never holds a borrow across statements, so
/// failure means a bug, reported rather than panicking.
fn borrow(a: &ArrayRef) -> Result<std::cell::Ref<'_, ArrayData>, String> {
    a.0.try_borrow()
        .map_err(|_| internal_message("array is borrowed"))
}

/// The message for operands of the wrong number or kind.
fn bad_operands(prim: Prim, args: &[&Val]) -> String {
    let kinds: Vec<&str> = args.iter().map(|v| v.kind()).collect();
    internal_message(format_args!("`{prim}` applied to ({})", kinds.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prim::PRIMS;

    /// The fast path and the group functions agree wherever the fast path answers.
    #[test]
    fn fast_path_agrees_with_eval() {
        let floats = [
            0.0,
            -0.0,
            1.5,
            -2.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        let ints = [0, 1, -7, i64::MAX, i64::MIN];
        let mut operands: Vec<Vec<Val>> = Vec::new();
        for a in floats {
            operands.push(vec![Val::F64(a)]);
            for b in floats {
                operands.push(vec![Val::F64(a), Val::F64(b)]);
            }
        }
        for a in ints {
            operands.push(vec![Val::I64(a)]);
            for b in ints {
                operands.push(vec![Val::I64(a), Val::I64(b)]);
            }
        }
        operands.push(vec![Val::Bool(true)]);
        operands.push(vec![Val::Bool(false)]);
        let mut answered = 0;
        for row in PRIMS {
            for args in &operands {
                let refs: Vec<&Val> = args.iter().collect();
                if let Some(quick) = fast(row.prim, &refs) {
                    answered += 1;
                    let slow = eval(row.prim, &refs, None);
                    assert!(
                        slow.as_ref().is_ok_and(|v| v.same(&quick)),
                        "{} {args:?}: fast {quick:?}, eval {slow:?}",
                        row.name
                    );
                }
            }
        }
        assert!(answered > 500, "fast path answered only {answered} cases");
    }

    /// Compile-time evaluation agrees with the interpreter and leaves failing
    /// and effectful calls for run time.
    #[test]
    fn fold_prim_folds_pure_calls_and_leaves_errors() {
        use Const::*;
        assert_eq!(
            fold_prim(Prim::Add, &[F64(0.1), F64(0.2)]),
            Some(F64(0.1 + 0.2))
        );
        assert_eq!(
            fold_prim(Prim::Sin, &[F64(1.0)]),
            Some(F64(irad_kernels::math::sin(1.0)))
        );
        assert_eq!(
            fold_prim(Prim::Iadd, &[I64(i64::MAX), I64(1)]),
            Some(I64(i64::MIN))
        );
        assert_eq!(fold_prim(Prim::Lt, &[I64(1), I64(2)]), Some(Bool(true)));
        assert_eq!(fold_prim(Prim::Idiv, &[I64(1), I64(0)]), None);
        assert_eq!(fold_prim(Prim::Idiv, &[I64(i64::MIN), I64(-1)]), None);
        assert_eq!(fold_prim(Prim::Fptosi, &[F64(f64::NAN)]), None);
        assert_eq!(fold_prim(Prim::Zeros, &[I64(2)]), None);
        assert_eq!(fold_prim(Prim::Push, &[F64(1.0)]), None);
        let f = Func(crate::func::FuncRef::Prim(Prim::Sin));
        let g = Func(crate::func::FuncRef::Prim(Prim::Cos));
        assert_eq!(fold_prim(Prim::Select, &[Bool(false), f, g]), Some(g));
    }
}
