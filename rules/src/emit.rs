//! Helpers for writing rules: emitting a primitive that must have a result,
//! the primal statement of a call, zero tangents of any type, and checks of a
//! call's shape. The built-in rules (`frules`) use them, and so may the forward
//! transform and users' rules.
//!
//! Lane work goes through the `lane_*` helpers and [`scale`], which look at
//! the tangent operand's type: on f64 tangents they emit f64 arithmetic, on
//! `sparse` tangents (sparse mode, [`irad_ir::Lanes::Sparse`]) the
//! builder's `sscale`/`sadd`, so one rule serves both modes.
//!
//! Assumes a builder positioned in an open block. Guarantees: every helper
//! either appends well-typed statements and returns their operands, or returns
//! a [`RuleError`] (never panics); zero tangents of array-holding types are
//! fresh arrays (never shared between lanes), so a later in-place write into
//! one lane's tangent cannot show up in another's.

use crate::{FruleCall, FwdArg, FwdOut, RuleError};
use irad_ir::{Const, FuncBuilder, Lanes, Operand, Prim, Scalar, Type};
use smallvec::SmallVec;

/// One tangent operand per lane.
pub type Tangents = SmallVec<[Operand; 1]>;

/// `call prim(args)` for a primitive whose result is not `()`; its result as
/// an operand.
pub fn value(b: &mut FuncBuilder<'_>, prim: Prim, args: &[Operand]) -> Result<Operand, RuleError> {
    b.prim(prim, args)?.map(Operand::Value).ok_or_else(|| {
        RuleError::Unsupported(format!("`{prim}` returned () where a value was expected"))
    })
}

/// `call prim(args)` for a primitive whose result may be `()` (a `getfield`
/// of a unit field): its result, or the unit constant.
pub fn value_or_unit(
    b: &mut FuncBuilder<'_>,
    prim: Prim,
    args: &[Operand],
) -> Result<Operand, RuleError> {
    Ok(b.prim(prim, args)?.map_or_else(unit, Operand::Value))
}

/// `call prim(args)` for a primitive whose result is `()`.
pub fn effect(b: &mut FuncBuilder<'_>, prim: Prim, args: &[Operand]) -> Result<(), RuleError> {
    b.prim(prim, args)?;
    Ok(())
}

/// `mul(a, b)`.
pub fn mul(b: &mut FuncBuilder<'_>, x: Operand, y: Operand) -> Result<Operand, RuleError> {
    value(b, Prim::Mul, &[x, y])
}

/// `zmul(x, y)`: the strong product, exactly 0 when either operand is 0
/// whatever the other (docs/rules.md, "Infinities and NaN"). A constant
/// operand folds: `0.0` for a zero, a plain `mul` for a finite non-zero
/// constant (which `zmul` equals there).
pub fn zmul(b: &mut FuncBuilder<'_>, x: Operand, y: Operand) -> Result<Operand, RuleError> {
    for c in [x, y] {
        if let Operand::Const(Const::F64(v)) = c {
            if v == 0.0 {
                return Ok(f64c(0.0));
            }
            if v.is_finite() {
                return mul(b, x, y);
            }
        }
    }
    value(b, Prim::Zmul, &[x, y])
}

/// A product of the chain rule (a partial derivative times a tangent or a
/// cotangent, either order): `mul(x, y)`, or [`zmul`] when the module being
/// built into asks for strong products
/// ([`irad_ir::Module::strong_products`]: the strong derivative the facade
/// falls back to when a derivative comes out NaN; docs/rules.md,
/// "Infinities and NaN"). Rules use it for those products and `mul` for
/// primal ones.
pub fn product(b: &mut FuncBuilder<'_>, x: Operand, y: Operand) -> Result<Operand, RuleError> {
    if strong(b) {
        zmul(b, x, y)
    } else {
        mul(b, x, y)
    }
}

/// Whether the module being built into asks for strong products ([`product`]).
pub fn strong(b: &FuncBuilder<'_>) -> bool {
    b.module().strong_products()
}

/// The f64 constant `x` as an operand.
pub fn f64c(x: f64) -> Operand {
    Operand::Const(Const::F64(x))
}

/// The unit constant `()`.
pub fn unit() -> Operand {
    Operand::Const(Const::Unit)
}

/// The primal statement of `call`: `call prim(primals)` (for `alloc`, annotated
/// with `call.result`), its result as an operand, `()` for a unit result.
pub fn primal(
    b: &mut FuncBuilder<'_>,
    prim: Prim,
    call: &FruleCall<'_>,
) -> Result<Operand, RuleError> {
    let args: SmallVec<[Operand; 3]> = call.args.iter().map(|a| a.primal).collect();
    if prim == Prim::Alloc {
        let (Type::Array(elem), [n]) = (call.result, args.as_slice()) else {
            return Err(RuleError::Unsupported(format!(
                "`alloc` needs one length and an array result type, found {} argument(s) and {}",
                args.len(),
                call.result
            )));
        };
        return Ok(Operand::Value(b.alloc(*elem, *n)?));
    }
    Ok(b.prim(prim, &args)?.map_or_else(unit, Operand::Value))
}

/// The rule of a primitive whose result has no tangent, or a zero one: its
/// primal statement, tangents `None`.
pub fn primal_only(
    b: &mut FuncBuilder<'_>,
    prim: Prim,
    call: &FruleCall<'_>,
) -> Result<FwdOut, RuleError> {
    Ok(FwdOut {
        primal: primal(b, prim, call)?,
        tangents: None,
    })
}

/// The lane indices `0..N` (one lane in sparse mode).
pub fn lanes(call: &FruleCall<'_>) -> std::ops::Range<usize> {
    0..call.lanes.count()
}

/// Whether `t` is a sparse tangent (of type `sparse`).
fn sparse_lane(b: &FuncBuilder<'_>, t: &Operand) -> bool {
    b.operand_type(t).is_ok_and(|ty| ty == Type::Sparse)
}

/// The zero f64 tangent of one lane: `0.0`, or `szero()` in sparse mode.
pub fn lane_zero(b: &mut FuncBuilder<'_>, lanes: Lanes) -> Result<Operand, RuleError> {
    if lanes.is_sparse() {
        value(b, Prim::Szero, &[])
    } else {
        Ok(f64c(0.0))
    }
}

/// `factor * t` for one lane's f64 tangent `t`: [`product`]`(factor, t)`,
/// or `sscale(factor, t)` when `t` is sparse (`sparse_product` for
/// strong products).
pub fn lane_mul(
    b: &mut FuncBuilder<'_>,
    factor: Operand,
    t: Operand,
) -> Result<Operand, RuleError> {
    if sparse_lane(b, &t) {
        sparse_product(b, factor, t)
    } else {
        product(b, factor, t)
    }
}

/// `t * factor` for one lane's f64 tangent `t`: [`lane_mul`] with the dense
/// operands in this order ([`product`]`(t, factor)`).
pub fn lane_mul_by(
    b: &mut FuncBuilder<'_>,
    t: Operand,
    factor: Operand,
) -> Result<Operand, RuleError> {
    if sparse_lane(b, &t) {
        sparse_product(b, factor, t)
    } else {
        product(b, t, factor)
    }
}

/// `sscale(factor, t)` for a sparse tangent `t`; for strong products
/// ([`product`]) the zero handle where `factor` is 0, whatever `t` is
/// (`sscale(factor, select(eq(factor, 0.0), szero(), t))`: the builder
/// scales the zero handle to itself), so that no node of the builder has
/// the coefficient 0 and materialising a tangent never multiplies 0 by an
/// infinite or NaN coefficient of another node (docs/forward.md, "Sparse
/// mode").
fn sparse_product(
    b: &mut FuncBuilder<'_>,
    factor: Operand,
    t: Operand,
) -> Result<Operand, RuleError> {
    if !strong(b) {
        return value(b, Prim::Sscale, &[factor, t]);
    }
    match factor {
        Operand::Const(Const::F64(0.0)) => value(b, Prim::Szero, &[]),
        Operand::Const(Const::F64(_)) => value(b, Prim::Sscale, &[factor, t]),
        _ => {
            let zero = value(b, Prim::Szero, &[])?;
            let f0 = value(b, Prim::Eq, &[factor, f64c(0.0)])?;
            let kept = value(b, Prim::Select, &[f0, zero, t])?;
            value(b, Prim::Sscale, &[factor, kept])
        }
    }
}

/// `p + q` for one lane's f64 tangents: `add`, or `sadd` when sparse.
pub fn lane_add(b: &mut FuncBuilder<'_>, p: Operand, q: Operand) -> Result<Operand, RuleError> {
    if sparse_lane(b, &p) {
        value(b, Prim::Sadd, &[p, q])
    } else {
        value(b, Prim::Add, &[p, q])
    }
}

/// `-t` for one lane's f64 tangent: `neg`, or `sscale(-1.0, t)` when sparse.
pub fn lane_neg(b: &mut FuncBuilder<'_>, t: Operand) -> Result<Operand, RuleError> {
    if sparse_lane(b, &t) {
        value(b, Prim::Sscale, &[f64c(-1.0), t])
    } else {
        value(b, Prim::Neg, &[t])
    }
}

/// `p - q` for one lane's f64 tangents: `sub`, or `sadd(p, sscale(-1.0, q))`
/// when sparse (the same coefficients: negation is exact).
pub fn lane_sub(b: &mut FuncBuilder<'_>, p: Operand, q: Operand) -> Result<Operand, RuleError> {
    if sparse_lane(b, &p) {
        let nq = value(b, Prim::Sscale, &[f64c(-1.0), q])?;
        value(b, Prim::Sadd, &[p, nq])
    } else {
        value(b, Prim::Sub, &[p, q])
    }
}

/// `t / y` for one lane's f64 tangent: `div`, or `sscale(1 / y, t)` when
/// sparse (one rounding more than the dense quotient), or, for strong
/// products ([`product`]), `zmul(1 / y, t)`: exactly 0 when `t` is 0, also
/// where `y` is 0.
pub fn lane_div(b: &mut FuncBuilder<'_>, t: Operand, y: Operand) -> Result<Operand, RuleError> {
    if sparse_lane(b, &t) || strong(b) {
        let r = value(b, Prim::Div, &[f64c(1.0), y])?;
        lane_mul(b, r, t)
    } else {
        value(b, Prim::Div, &[t, y])
    }
}

/// The element type of the tangent array of a `[f64]` in one lane: `f64`,
/// or `sparse` in sparse mode.
pub fn lane_elem(lanes: Lanes) -> Scalar {
    if lanes.is_sparse() {
        Scalar::Sparse
    } else {
        Scalar::F64
    }
}

/// Checks that `call` has `n` arguments and that every argument's tangents
/// (where present) number the lanes of `call`; returns the arguments.
pub fn args<'c>(call: &FruleCall<'c>, prim: Prim, n: usize) -> Result<&'c [FwdArg], RuleError> {
    if call.args.len() != n {
        return Err(RuleError::Unsupported(format!(
            "the rule of `{prim}` takes {n} argument(s), found {}",
            call.args.len()
        )));
    }
    check_width(call)?;
    Ok(call.args)
}

/// Checks that every argument's tangents (where present) number exactly the
/// lanes of `call` (one in sparse mode, which messages call batch width 0).
pub fn check_width(call: &FruleCall<'_>) -> Result<(), RuleError> {
    let lanes = call.lanes.count();
    for (i, arg) in call.args.iter().enumerate() {
        if let Some(t) = &arg.tangents
            && t.len() != lanes
        {
            return Err(RuleError::Unsupported(format!(
                "argument {} has {} tangent(s), expected {lanes} (batch width {})",
                i + 1,
                t.len(),
                call.lanes.code()
            )));
        }
    }
    Ok(())
}

/// Whether `ty` holds an array outside a function type, so that a zero tangent
/// of it cannot be a constant (it needs the primal's lengths):
/// [`Type::holds_array`].
pub fn contains_array(ty: &Type) -> bool {
    ty.holds_array()
}

/// A zero tangent for a value `primal` of type `ty`: `0.0` for f64, a fresh
/// `zeros(length(primal))` for `[f64]`, for a tuple the tuple of its elements'
/// zero tangents (`()` for elements without a tangent type); `None` when `ty`
/// has no tangent type. Emits nothing for f64.
pub fn zero_tangent(
    b: &mut FuncBuilder<'_>,
    ty: &Type,
    primal: Operand,
) -> Result<Option<Operand>, RuleError> {
    zero_tangent_at(b, ty, primal, Lanes::ONE)
}

/// [`zero_tangent`] for one lane of `lanes`: in sparse mode
/// `szero()` for f64 and a fresh `alloc(length(primal)) :: [sparse]` (zero
/// handles) for `[f64]`. A dense `dual<T, N>` (forward over forward, or
/// sparse over forward) gets `dual(z, z, ...)` with a zero tangent of `T`
/// per part (sparse ones in sparse mode);
/// in dense lanes (forward over a sparse rule) a `sparse` handle gets
/// `szero()`, a `[sparse]` array a fresh `alloc(length(primal)) ::
/// [sparse]`, and a `dual<T, sparse>` the sparse dual of `T`'s zero tangent
/// and `T`'s zero sparse tangent.
pub fn zero_tangent_at(
    b: &mut FuncBuilder<'_>,
    ty: &Type,
    primal: Operand,
    lanes: Lanes,
) -> Result<Option<Operand>, RuleError> {
    match ty {
        Type::F64 => Ok(Some(lane_zero(b, lanes)?)),
        Type::Array(Scalar::F64) => {
            let n = value(b, Prim::Length, &[primal])?;
            if lanes.is_sparse() {
                return Ok(Some(Operand::Value(b.alloc(Scalar::Sparse, n)?)));
            }
            Ok(Some(value(b, Prim::Zeros, &[n])?))
        }
        Type::Tuple(elems) if ty.has_tangent() => {
            let mut parts = SmallVec::<[Operand; 4]>::new();
            for (k, elem) in elems.iter().enumerate() {
                let part = if elem.has_tangent() {
                    // Constant f64 zeros need no getfield of the primal.
                    let field = if contains_array(elem) {
                        let k = i64::try_from(k)
                            .map_err(|_| RuleError::Unsupported("tuple too wide".into()))?;
                        value(b, Prim::Getfield, &[primal, Operand::Const(Const::I64(k))])?
                    } else {
                        primal
                    };
                    zero_tangent_at(b, elem, field, lanes)?.unwrap_or_else(unit)
                } else {
                    unit()
                };
                parts.push(part);
            }
            Ok(Some(value(b, Prim::Tuple, &parts)?))
        }
        // Dense lanes over sparse values (forward over a sparse rule): the
        // zero handle, arrays of them, and a sparse dual of zeros.
        Type::Sparse if !lanes.is_sparse() => Ok(Some(value(b, Prim::Szero, &[])?)),
        Type::Array(Scalar::Sparse) if !lanes.is_sparse() => {
            let n = value(b, Prim::Length, &[primal])?;
            Ok(Some(Operand::Value(b.alloc(Scalar::Sparse, n)?)))
        }
        Type::Dual(inner, Lanes::Sparse) if !lanes.is_sparse() => {
            let base = if contains_array(inner) {
                value(b, Prim::Primal, &[primal])?
            } else {
                primal
            };
            let missing = || RuleError::Unsupported(format!("no zero tangent of type {inner}"));
            let p = zero_tangent_at(b, inner, base, lanes)?.ok_or_else(missing)?;
            let t = zero_tangent_at(b, inner, base, Lanes::Sparse)?.ok_or_else(missing)?;
            Ok(Some(value(b, Prim::Dual, &[p, t])?))
        }
        Type::Dual(inner, Lanes::Dense(n)) => {
            // `dual<T', N>`: a zero of T's tangent type per part, its arrays
            // as long as the primal part's.
            let base = if contains_array(inner) {
                value(b, Prim::Primal, &[primal])?
            } else {
                primal
            };
            let mut parts = SmallVec::<[Operand; 4]>::new();
            for _ in 0..=n.get() {
                let z = zero_tangent_at(b, inner, base, lanes)?.ok_or_else(|| {
                    RuleError::Unsupported(format!("no zero tangent of type {inner}"))
                })?;
                parts.push(z);
            }
            Ok(Some(value(b, Prim::Dual, &parts)?))
        }
        _ => Ok(None),
    }
}

/// The zero tangents of every lane of `lanes` of a value `primal` of type
/// `ty` (fresh arrays per lane); `None` when `ty` has no tangent type.
pub fn zero_tangents(
    b: &mut FuncBuilder<'_>,
    ty: &Type,
    primal: Operand,
    lanes: Lanes,
) -> Result<Option<Tangents>, RuleError> {
    if !ty.has_tangent() {
        return Ok(None);
    }
    let mut zeros = Tangents::new();
    for _ in 0..lanes.count() {
        match zero_tangent_at(b, ty, primal, lanes)? {
            Some(t) => zeros.push(t),
            None => return Ok(None),
        }
    }
    Ok(Some(zeros))
}

/// The tangent of `arg` in lane `k` of `lanes`, or a zero
/// tangent when it has none (emitted with [`zero_tangent_at`]); `None` when
/// its type has no tangent type.
pub fn tangent_or_zero(
    b: &mut FuncBuilder<'_>,
    arg: &FwdArg,
    k: usize,
    lanes: Lanes,
) -> Result<Option<Operand>, RuleError> {
    match arg.tangent(k) {
        Some(t) => Ok(Some(t)),
        None => zero_tangent_at(b, &arg.ty, arg.primal, lanes),
    }
}

/// Lane by lane `factor * t` for the tangents `tangents` ([`lane_mul`]: f64
/// or sparse): the chain rule of a function of one f64 argument whose
/// derivative `factor` is computed once.
pub fn scale(
    b: &mut FuncBuilder<'_>,
    factor: Operand,
    tangents: &[Operand],
) -> Result<Tangents, RuleError> {
    tangents.iter().map(|&t| lane_mul(b, factor, t)).collect()
}

/// Where the leaves of tuple field `k` start among the tuple's leaves, and how
/// many it has, for a leaf counter such as [`Type::cotangent_leaves`].
pub fn field_leaves(
    ty: &Type,
    k: usize,
    count: fn(&Type) -> usize,
) -> Result<(usize, usize), RuleError> {
    let Type::Tuple(elems) = ty else {
        return Err(RuleError::Unsupported(format!("getfield of a {ty}")));
    };
    let field = elems
        .get(k)
        .ok_or_else(|| RuleError::Unsupported(format!("field {k} of a {ty}")))?;
    let start = elems[..k].iter().map(count).sum();
    Ok((start, count(field)))
}

/// `f * t` with a strong zero: exactly `0.0` where `t` is 0, whatever `f`
/// is (a NaN or infinite `f` never reaches a lane or cotangent that is 0),
/// and `f * t` elsewhere. Written `select(eq(t, 0), select(finite(f), f * t
/// + 0.0, 0.0), f * t)` (`finite(f)` as `eq(f - f, 0.0)`) rather than
/// `select(eq(t, 0), 0.0, f * t)`, which has the same values, so that the
/// statements stay differentiable in `t` at 0 with derivative `f` when `f`
/// is finite: reverse mode over a forward rule (or forward mode over a
/// pullback) that uses it differentiates `t` there too.
pub fn strong_mul(b: &mut FuncBuilder<'_>, f: Operand, t: Operand) -> Result<Operand, RuleError> {
    let ft = product(b, f, t)?;
    let ff = value(b, Prim::Sub, &[f, f])?;
    let finite = value(b, Prim::Eq, &[ff, f64c(0.0)])?;
    // +0.0 where f t is a zero of either sign, as the plain form gives.
    let zero = value(b, Prim::Add, &[ft, f64c(0.0)])?;
    let at_zero = value(b, Prim::Select, &[finite, zero, f64c(0.0)])?;
    let t0 = value(b, Prim::Eq, &[t, f64c(0.0)])?;
    value(b, Prim::Select, &[t0, at_zero, ft])
}

/// `a + b` where either may be absent (zero).
pub fn add_opt(
    b: &mut FuncBuilder<'_>,
    x: Option<Operand>,
    y: Option<Operand>,
) -> Result<Option<Operand>, RuleError> {
    Ok(match (x, y) {
        (Some(x), Some(y)) => Some(value(b, Prim::Add, &[x, y])?),
        (Some(t), None) | (None, Some(t)) => Some(t),
        (None, None) => None,
    })
}

/// `factor * dy` ([`product`]), absent when `dy` is.
pub fn scale_opt(
    b: &mut FuncBuilder<'_>,
    factor: Operand,
    dy: Option<Operand>,
) -> Result<Option<Operand>, RuleError> {
    dy.map(|d| product(b, d, factor)).transpose()
}

/// A counted loop `for i in 0..n { body(i) }` (n an i64 operand): a header
/// with the counter's phi, the body, and an exit block where the builder is
/// left. `body` must leave the builder in a block without a terminator.
pub fn for_range(
    b: &mut FuncBuilder<'_>,
    n: Operand,
    body: impl FnOnce(&mut FuncBuilder<'_>, Operand) -> Result<(), RuleError>,
) -> Result<(), RuleError> {
    let start = b
        .current_block()
        .ok_or_else(|| RuleError::Unsupported("a loop outside a block".into()))?;
    let header = b.create_block();
    let body_block = b.create_block();
    let exit = b.create_block();
    b.goto(header)?;
    b.switch_to_block(header)?;
    let i = b.phi(Type::I64, &[(start, Operand::from(0i64))])?;
    let more = value(b, Prim::Lt, &[Operand::Value(i), n])?;
    b.gotoifnot(more, exit)?;
    b.switch_to_block(body_block)?;
    body(b, Operand::Value(i))?;
    let next = value(b, Prim::Iadd, &[Operand::Value(i), Operand::from(1i64)])?;
    let latch = b
        .current_block()
        .ok_or_else(|| RuleError::Unsupported("a loop body left no block".into()))?;
    b.goto(header)?;
    b.add_phi_entry(i, latch, next)?;
    b.switch_to_block(exit)?;
    Ok(())
}
