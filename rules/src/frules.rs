//! The built-in frule of every primitive of the table except the AD ones
//! (`Prim::is_ad`), grouped as in `ir/src/prim.rs`.
//!
//! Assumes calls shaped as the forward transform makes them (see [`FwdArg`]):
//! argument types as the primitive's signature says, tangents present only
//! for arguments whose type has a tangent type, and then exactly one per lane
//! ([`FruleCall::lanes`]). A call of another shape is a [`RuleError`], never a panic.
//!
//! Guarantees, for every rule:
//! - the primal statement is emitted first and exactly as the primal has it,
//!   so the primal result, the primal arrays and any run-time error are those
//!   of the primitive;
//! - derivative factors are computed once, then each lane costs one multiply
//!   (or one `select`, one array statement);
//! - lane work goes through `emit`'s `lane_*` helpers, so every rule also
//!   runs in sparse mode ([`irad_ir::Lanes::Sparse`]: one lane of `sparse`
//!   tangents, `[sparse]` for arrays), where a multiply is an `sscale` and a
//!   sum an `sadd`;
//! - when no argument that matters has tangents, no tangent work is emitted:
//!   the tangents are `None`, except for rules returning arrays, which return
//!   fresh zero tangent arrays (a zero array needs its length);
//! - at kinks, ties and NaN the conventions of `docs/rules.md`.

use crate::emit::{self, Tangents, f64c, mul, value};
use crate::{FruleCall, FwdArg, FwdOut, Registry, RuleError};
use irad_ir::{FuncBuilder, Operand, Prim, Scalar, Type};

/// The derivative factor `f'(x)` of a function of one f64 argument, given the
/// argument `x` and the primal result `y = f(x)`.
pub(crate) type Factor = fn(&mut FuncBuilder<'_>, Operand, Operand) -> Result<Operand, RuleError>;

/// A rule written as a plain function.
type RuleFn = fn(&mut FuncBuilder<'_>, &FruleCall<'_>) -> Result<FwdOut, RuleError>;

/// The functions of one f64 argument whose tangent is `f'(x) * t`.
pub(crate) const UNARY: &[(Prim, Factor)] = &[
    (Prim::Abs, abs_factor),
    (Prim::Sqrt, |b, _, y| value(b, Prim::Div, &[f64c(0.5), y])),
    (Prim::Exp, |_, _, y| Ok(y)),
    (Prim::Log, |b, x, _| value(b, Prim::Div, &[f64c(1.0), x])),
    (Prim::Log1p, |b, x, _| {
        let d = value(b, Prim::Add, &[f64c(1.0), x])?;
        value(b, Prim::Div, &[f64c(1.0), d])
    }),
    // expm1(x) + 1 = exp(x), without a second call of exp.
    (Prim::Expm1, |b, _, y| value(b, Prim::Add, &[y, f64c(1.0)])),
    (Prim::Sin, |b, x, _| value(b, Prim::Cos, &[x])),
    (Prim::Cos, |b, x, _| {
        let s = value(b, Prim::Sin, &[x])?;
        value(b, Prim::Neg, &[s])
    }),
    // tan' = 1 + tan^2.
    (Prim::Tan, |b, _, y| {
        let y2 = mul(b, y, y)?;
        value(b, Prim::Add, &[f64c(1.0), y2])
    }),
    (Prim::Asin, |b, x, _| inv_sqrt_one_minus_sq(b, x, 1.0)),
    (Prim::Acos, |b, x, _| inv_sqrt_one_minus_sq(b, x, -1.0)),
    (Prim::Atan, |b, x, _| {
        let x2 = mul(b, x, x)?;
        let d = value(b, Prim::Add, &[f64c(1.0), x2])?;
        value(b, Prim::Div, &[f64c(1.0), d])
    }),
    (Prim::Sinh, |b, x, _| value(b, Prim::Cosh, &[x])),
    (Prim::Cosh, |b, x, _| value(b, Prim::Sinh, &[x])),
    // tanh' = 1 - tanh^2.
    (Prim::Tanh, |b, _, y| {
        let y2 = mul(b, y, y)?;
        value(b, Prim::Sub, &[f64c(1.0), y2])
    }),
    // erf' = 2/sqrt(pi) * exp(-x^2).
    (Prim::Erf, |b, x, _| {
        let x2 = mul(b, x, x)?;
        let m = value(b, Prim::Neg, &[x2])?;
        let e = value(b, Prim::Exp, &[m])?;
        mul(b, f64c(std::f64::consts::FRAC_2_SQRT_PI), e)
    }),
];

/// Primitives whose result has no tangent type, or a tangent that is zero
/// wherever it is defined: the primal statement and no tangents.
pub(crate) const PRIMAL_ONLY: &[Prim] = &[
    Prim::Floor,
    Prim::Ceil,
    Prim::Round,
    Prim::Lt,
    Prim::Le,
    Prim::Gt,
    Prim::Ge,
    Prim::Eq,
    Prim::Ne,
    Prim::Iadd,
    Prim::Isub,
    Prim::Imul,
    Prim::Idiv,
    Prim::Irem,
    Prim::Ineg,
    Prim::And,
    Prim::Or,
    Prim::Not,
    Prim::Sitofp,
    Prim::Fptosi,
    Prim::Length,
    Prim::Checkpoint,
    Prim::Same,
];

/// The rules of primitives with a rule function of their own.
const OTHERS: &[(Prim, RuleFn)] = &[
    (Prim::Add, add),
    (Prim::Sub, sub),
    (Prim::Mul, mul_rule),
    (Prim::Zmul, zmul_rule),
    (Prim::Div, div),
    (Prim::Neg, neg),
    (Prim::Pow, pow),
    (Prim::Powi, powi),
    (Prim::Min, min),
    (Prim::Max, max),
    (Prim::Copysign, copysign),
    (Prim::Atan2, atan2),
    (Prim::Select, select),
    (Prim::Tuple, tuple),
    (Prim::Getfield, getfield),
    (Prim::Alloc, alloc),
    (Prim::Zeros, zeros),
    (Prim::Arrayref, arrayref),
    (Prim::Arrayset, arrayset),
    (Prim::Copy, copy),
];

/// Registers the built-in rules, each for every argument type (`types: None`).
pub(crate) fn install(reg: &mut Registry) {
    for &(prim, factor) in UNARY {
        reg.register_frule(
            prim,
            None,
            move |b: &mut FuncBuilder<'_>, call: &FruleCall<'_>| unary(b, call, prim, factor),
        );
    }
    for &prim in PRIMAL_ONLY {
        reg.register_frule(
            prim,
            None,
            move |b: &mut FuncBuilder<'_>, call: &FruleCall<'_>| {
                emit::check_width(call)?;
                emit::primal_only(b, prim, call)
            },
        );
    }
    for &(prim, rule) in OTHERS {
        reg.register_frule(prim, None, rule);
    }
}

/// `y = f(x)`, then `f'(x) * t` in each lane.
fn unary(
    b: &mut FuncBuilder<'_>,
    call: &FruleCall<'_>,
    prim: Prim,
    factor: Factor,
) -> Result<FwdOut, RuleError> {
    let [x] = emit::args(call, prim, 1)? else {
        return Err(arity(prim));
    };
    let y = value(b, prim, &[x.primal])?;
    let Some(tx) = &x.tangents else {
        return Ok(out(y, None));
    };
    let f = factor(b, x.primal, y)?;
    Ok(out(y, Some(emit::scale(b, f, tx)?)))
}

/// `abs`: the factor is -1 for x < 0 and +1 otherwise, so the tangent at
/// both zeros (and at NaN) is `+t`: the right-sided derivative.
fn abs_factor(b: &mut FuncBuilder<'_>, x: Operand, _y: Operand) -> Result<Operand, RuleError> {
    let neg = value(b, Prim::Lt, &[x, f64c(0.0)])?;
    value(b, Prim::Select, &[neg, f64c(-1.0), f64c(1.0)])
}

/// `sign / sqrt(1 - x^2)`: the derivative of asin (sign 1) and acos (sign -1).
fn inv_sqrt_one_minus_sq(
    b: &mut FuncBuilder<'_>,
    x: Operand,
    sign: f64,
) -> Result<Operand, RuleError> {
    let x2 = mul(b, x, x)?;
    let d = value(b, Prim::Sub, &[f64c(1.0), x2])?;
    let s = value(b, Prim::Sqrt, &[d])?;
    value(b, Prim::Div, &[f64c(sign), s])
}

/// `d(x + y) = tx + ty`.
fn add(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    let [x, y] = emit::args(call, Prim::Add, 2)? else {
        return Err(arity(Prim::Add));
    };
    let z = value(b, Prim::Add, &[x.primal, y.primal])?;
    let tangents = match (&x.tangents, &y.tangents) {
        (None, None) => None,
        (Some(tx), None) => Some(tx.clone()),
        (None, Some(ty)) => Some(ty.clone()),
        (Some(tx), Some(ty)) => Some(zip(b, tx, ty, emit::lane_add)?),
    };
    Ok(out(z, tangents))
}

/// `d(x - y) = tx - ty`.
fn sub(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    let [x, y] = emit::args(call, Prim::Sub, 2)? else {
        return Err(arity(Prim::Sub));
    };
    let z = value(b, Prim::Sub, &[x.primal, y.primal])?;
    let tangents = match (&x.tangents, &y.tangents) {
        (None, None) => None,
        (Some(tx), None) => Some(tx.clone()),
        (None, Some(ty)) => Some(map(b, ty, emit::lane_neg)?),
        (Some(tx), Some(ty)) => Some(zip(b, tx, ty, emit::lane_sub)?),
    };
    Ok(out(z, tangents))
}

/// `d(x * y) = tx * y + x * ty`.
fn mul_rule(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    product_rule(b, call, Prim::Mul)
}

/// `zmul(x, y)` (the strong derivative's product): the rule of `mul`, so
/// that forward mode over the strong derivative's pullbacks works.
fn zmul_rule(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    product_rule(b, call, Prim::Zmul)
}

/// `d(x * y) = tx * y + x * ty` for `prim` `mul` or `zmul`.
fn product_rule(
    b: &mut FuncBuilder<'_>,
    call: &FruleCall<'_>,
    prim: Prim,
) -> Result<FwdOut, RuleError> {
    let [x, y] = emit::args(call, prim, 2)? else {
        return Err(arity(prim));
    };
    let z = value(b, prim, &[x.primal, y.primal])?;
    let tangents = match (&x.tangents, &y.tangents) {
        (None, None) => None,
        (Some(tx), None) => Some(emit::scale(b, y.primal, tx)?),
        (None, Some(ty)) => Some(emit::scale(b, x.primal, ty)?),
        (Some(tx), Some(ty)) => Some(zip(b, tx, ty, |b, p, q| {
            let a = emit::lane_mul_by(b, p, y.primal)?;
            let c = emit::lane_mul(b, x.primal, q)?;
            emit::lane_add(b, a, c)
        })?),
    };
    Ok(out(z, tangents))
}

/// `d(x / y) = (tx - z ty) / y` with `z = x / y` the primal result.
fn div(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    let [x, y] = emit::args(call, Prim::Div, 2)? else {
        return Err(arity(Prim::Div));
    };
    let z = value(b, Prim::Div, &[x.primal, y.primal])?;
    if emit::strong(b) {
        return Ok(out(z, strong_div(b, x, y, z)?));
    }
    let tangents = match (&x.tangents, &y.tangents) {
        (None, None) => None,
        (Some(tx), None) => Some(map(b, tx, |b, p| emit::lane_div(b, p, y.primal))?),
        (None, Some(ty)) => {
            let q = value(b, Prim::Div, &[z, y.primal])?;
            let f = value(b, Prim::Neg, &[q])?;
            Some(emit::scale(b, f, ty)?)
        }
        (Some(tx), Some(ty)) => Some(zip(b, tx, ty, |b, p, q| {
            let zq = emit::lane_mul(b, z, q)?;
            let d = emit::lane_sub(b, p, zq)?;
            emit::lane_div(b, d, y.primal)
        })?),
    };
    Ok(out(z, tangents))
}

/// The strong derivative's `d(x / y)`: `(1 / y) tx + (-(z / y)) ty`, the
/// partials reverse mode saves, each term a strong product, so that a lane
/// that does not move x (or y) gets exactly nothing from it whatever its
/// partial is (docs/rules.md, "Infinities and NaN").
fn strong_div(
    b: &mut FuncBuilder<'_>,
    x: &FwdArg,
    y: &FwdArg,
    z: Operand,
) -> Result<Option<Tangents>, RuleError> {
    let fx = match &x.tangents {
        Some(_) => Some(value(b, Prim::Div, &[f64c(1.0), y.primal])?),
        None => None,
    };
    let fy = match &y.tangents {
        Some(_) => {
            let q = value(b, Prim::Div, &[z, y.primal])?;
            Some(value(b, Prim::Neg, &[q])?)
        }
        None => None,
    };
    Ok(match (&x.tangents, &y.tangents, fx, fy) {
        (Some(tx), Some(ty), Some(fx), Some(fy)) => Some(zip(b, tx, ty, |b, p, q| {
            let a = emit::lane_mul(b, fx, p)?;
            let c = emit::lane_mul(b, fy, q)?;
            emit::lane_add(b, a, c)
        })?),
        (Some(tx), _, Some(fx), _) => Some(emit::scale(b, fx, tx)?),
        (_, Some(ty), _, Some(fy)) => Some(emit::scale(b, fy, ty)?),
        _ => None,
    })
}

/// `d(-x) = -tx`.
fn neg(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    let [x] = emit::args(call, Prim::Neg, 1)? else {
        return Err(arity(Prim::Neg));
    };
    let y = value(b, Prim::Neg, &[x.primal])?;
    let tangents = match &x.tangents {
        None => None,
        Some(tx) => Some(map(b, tx, emit::lane_neg)?),
    };
    Ok(out(y, tangents))
}

/// `d pow(x, y) = tx * y * pow(x, y - 1) + ty * log(x) * pow(x, y)`; the log
/// term only when y has tangents, so a constant exponent never meets the log
/// of a negative base.
fn pow(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    let [x, y] = emit::args(call, Prim::Pow, 2)? else {
        return Err(arity(Prim::Pow));
    };
    let z = value(b, Prim::Pow, &[x.primal, y.primal])?;
    // d/dx = y * pow(x, y - 1), taken as 0 where y = 0 (x^0 is constant,
    // but 0 * pow(0, -1) would be NaN).
    let fx = match &x.tangents {
        Some(_) => {
            let ym1 = value(b, Prim::Sub, &[y.primal, f64c(1.0)])?;
            let p = value(b, Prim::Pow, &[x.primal, ym1])?;
            let f = mul(b, y.primal, p)?;
            let y0 = value(b, Prim::Eq, &[y.primal, f64c(0.0)])?;
            Some(value(b, Prim::Select, &[y0, f64c(0.0), f])?)
        }
        None => None,
    };
    // d/dy = log(x) * pow(x, y), taken as 0 where x = 0 (0^y is constant
    // near y > 0, but log(0) * 0 would be NaN); NaN for x < 0.
    let fy = match &y.tangents {
        Some(_) => {
            let l = value(b, Prim::Log, &[x.primal])?;
            let f = mul(b, l, z)?;
            let x0 = value(b, Prim::Eq, &[x.primal, f64c(0.0)])?;
            Some(value(b, Prim::Select, &[x0, f64c(0.0), f])?)
        }
        None => None,
    };
    if fx.is_none() && fy.is_none() {
        return Ok(out(z, None));
    }
    // Each term counts only where its tangent is not zero ("strong zero"): a
    // lane that does not move x must not pick up a NaN or infinite d/dx (x
    // near 0 with y < 1), nor one that does not move y the NaN d/dy of x < 0.
    let mut lanes = Tangents::new();
    for k in emit::lanes(call) {
        let p = strong_term(b, fx, x.tangent(k))?;
        let q = strong_term(b, fy, y.tangent(k))?;
        lanes.push(match (p, q) {
            (Some(p), Some(q)) => emit::lane_add(b, p, q)?,
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => emit::lane_zero(b, call.lanes)?,
        });
    }
    Ok(out(z, Some(lanes)))
}

/// The term `f * t`, exactly 0 when `t` is 0 whatever `f` is
/// ([`emit::strong_mul`], which stays differentiable in `t` for reverse
/// over forward); `None` when either is absent. A sparse `t` is scaled as
/// it is: the zero handle stays zero whatever `f` is, but a direction whose
/// coefficient is 0 inside a non-zero handle meets `f` (docs/forward.md,
/// "Sparse mode").
fn strong_term(
    b: &mut FuncBuilder<'_>,
    f: Option<Operand>,
    t: Option<Operand>,
) -> Result<Option<Operand>, RuleError> {
    let (Some(f), Some(t)) = (f, t) else {
        return Ok(None);
    };
    if b.operand_type(&t).is_ok_and(|ty| ty == Type::Sparse) {
        return Ok(Some(emit::lane_mul(b, f, t)?));
    }
    Ok(Some(emit::strong_mul(b, f, t)?))
}

/// `d powi(x, n) = n * pow(x, n - 1) * tx`, with `n - 1` computed in f64:
/// `powi(x, n)` is `pow(x, n as f64)`, so this is `powi(x, n - 1)` wherever
/// `n - 1` is exact in f64, and it does not wrap at `n = i64::MIN`.
fn powi(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    let [x, n] = emit::args(call, Prim::Powi, 2)? else {
        return Err(arity(Prim::Powi));
    };
    let z = value(b, Prim::Powi, &[x.primal, n.primal])?;
    let Some(tx) = &x.tangents else {
        return Ok(out(z, None));
    };
    let nf = value(b, Prim::Sitofp, &[n.primal])?;
    let nm1 = value(b, Prim::Sub, &[nf, f64c(1.0)])?;
    let p = value(b, Prim::Pow, &[x.primal, nm1])?;
    let f = mul(b, nf, p)?;
    // powi(x, 0) is constant: 0, where 0 * pow(0, -1) would be NaN.
    let n0 = value(b, Prim::Eq, &[n.primal, Operand::from(0i64)])?;
    let f = value(b, Prim::Select, &[n0, f64c(0.0), f])?;
    Ok(out(z, Some(emit::scale(b, f, tx)?)))
}

/// `min(a, b)`: the tangent of `a` where `le(a, b)`, else that of `b`; so a
/// tie goes to the first operand, and a NaN operand (where `le` is false)
/// gives the second operand's tangent.
fn min(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    pick(b, call, Prim::Min, Prim::Le)
}

/// `max(a, b)`: the tangent of `a` where `ge(a, b)`, else that of `b`.
fn max(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    pick(b, call, Prim::Max, Prim::Ge)
}

/// `min`/`max`: the primal, then `select(cmp(a, b), ta, tb)` in each lane.
fn pick(
    b: &mut FuncBuilder<'_>,
    call: &FruleCall<'_>,
    prim: Prim,
    cmp: Prim,
) -> Result<FwdOut, RuleError> {
    let [x, y] = emit::args(call, prim, 2)? else {
        return Err(arity(prim));
    };
    let z = value(b, prim, &[x.primal, y.primal])?;
    if x.tangents.is_none() && y.tangents.is_none() {
        return Ok(out(z, None));
    }
    let c = value(b, cmp, &[x.primal, y.primal])?;
    let mut lanes = Tangents::new();
    for k in emit::lanes(call) {
        let tx = match x.tangent(k) {
            Some(t) => t,
            None => emit::lane_zero(b, call.lanes)?,
        };
        let ty = match y.tangent(k) {
            Some(t) => t,
            None => emit::lane_zero(b, call.lanes)?,
        };
        lanes.push(value(b, Prim::Select, &[c, tx, ty])?);
    }
    Ok(out(z, Some(lanes)))
}

/// `copysign(x, y)`: `tx` where the sign bits of x and y agree, else `-tx`,
/// as `copysign(1, x) * copysign(1, y) * tx` (exact: the factor is ±1);
/// zero with respect to y.
fn copysign(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    let [x, y] = emit::args(call, Prim::Copysign, 2)? else {
        return Err(arity(Prim::Copysign));
    };
    let z = value(b, Prim::Copysign, &[x.primal, y.primal])?;
    let Some(tx) = &x.tangents else {
        return Ok(out(z, None));
    };
    let sx = value(b, Prim::Copysign, &[f64c(1.0), x.primal])?;
    let sy = value(b, Prim::Copysign, &[f64c(1.0), y.primal])?;
    let f = mul(b, sx, sy)?;
    Ok(out(z, Some(emit::scale(b, f, tx)?)))
}

/// `d atan2(y, x) = (x ty - y tx) / (x^2 + y^2)`.
fn atan2(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    let [y, x] = emit::args(call, Prim::Atan2, 2)? else {
        return Err(arity(Prim::Atan2));
    };
    let z = value(b, Prim::Atan2, &[y.primal, x.primal])?;
    if y.tangents.is_none() && x.tangents.is_none() {
        return Ok(out(z, None));
    }
    let x2 = mul(b, x.primal, x.primal)?;
    let y2 = mul(b, y.primal, y.primal)?;
    let r = value(b, Prim::Add, &[x2, y2])?;
    let fy = match &y.tangents {
        Some(_) => Some(value(b, Prim::Div, &[x.primal, r])?),
        None => None,
    };
    let fx = match &x.tangents {
        Some(_) => {
            let q = value(b, Prim::Div, &[y.primal, r])?;
            Some(value(b, Prim::Neg, &[q])?)
        }
        None => None,
    };
    Ok(out(z, two_terms(b, call, y, fy, x, fx)?))
}

/// `select(c, a, b)`: the primal select, then `select(c, ta, tb)` in each
/// lane, for any tangent type; a side without tangents contributes a zero
/// tangent (`0.0`, or fresh zero arrays for array-holding types).
fn select(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    let [c, x, y] = emit::args(call, Prim::Select, 3)? else {
        return Err(arity(Prim::Select));
    };
    let z = value(b, Prim::Select, &[c.primal, x.primal, y.primal])?;
    let ty = &x.ty;
    let no_work = x.tangents.is_none() && y.tangents.is_none() && !emit::contains_array(ty);
    if !ty.has_tangent() || no_work {
        return Ok(out(z, None));
    }
    let mut lanes = Tangents::new();
    for k in emit::lanes(call) {
        let tx = emit::tangent_or_zero(b, x, k, call.lanes)?
            .ok_or_else(|| no_tangent(Prim::Select, ty))?;
        let ty_k = emit::tangent_or_zero(b, y, k, call.lanes)?
            .ok_or_else(|| no_tangent(Prim::Select, ty))?;
        lanes.push(value(b, Prim::Select, &[c.primal, tx, ty_k])?);
    }
    Ok(out(z, Some(lanes)))
}

/// `tuple(a, ...)`: in each lane the tuple of the components' tangents, `()`
/// for components without a tangent type, a zero for components without
/// tangents; `None` when the tuple has no tangent type or no component has
/// tangents (and none holds an array).
fn tuple(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    emit::check_width(call)?;
    let z = emit::primal(b, Prim::Tuple, call)?;
    let elems: smallvec::SmallVec<[Type; 4]> = call.args.iter().map(|a| a.ty.clone()).collect();
    let result = Type::tuple_of(&elems);
    let no_work = call.args.iter().all(|a| a.tangents.is_none()) && !emit::contains_array(&result);
    if !result.has_tangent() || no_work {
        return Ok(out(z, None));
    }
    let mut lanes = Tangents::new();
    for k in emit::lanes(call) {
        let mut parts = Vec::with_capacity(call.args.len());
        for arg in call.args {
            parts.push(emit::tangent_or_zero(b, arg, k, call.lanes)?.unwrap_or_else(emit::unit));
        }
        lanes.push(value(b, Prim::Tuple, &parts)?);
    }
    Ok(out(z, Some(lanes)))
}

/// `getfield(t, k)`: `getfield(tangent, k)` in each lane, when the field has a
/// tangent type.
fn getfield(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    let [t, k] = emit::args(call, Prim::Getfield, 2)? else {
        return Err(arity(Prim::Getfield));
    };
    // A unit field is the unit constant.
    let z = emit::value_or_unit(b, Prim::Getfield, &[t.primal, k.primal])?;
    let elem = call.result;
    if !elem.has_tangent() {
        return Ok(out(z, None));
    }
    let Some(tt) = &t.tangents else {
        if emit::contains_array(elem) {
            return Ok(out(z, emit::zero_tangents(b, elem, z, call.lanes)?));
        }
        return Ok(out(z, None));
    };
    Ok(out(
        z,
        Some(map(b, tt, |b, p| value(b, Prim::Getfield, &[p, k.primal]))?),
    ))
}

/// `alloc(n) :: [f64]`: the primal and a fresh `alloc(n) :: [f64]` (all zero;
/// `[sparse]`, zero handles, in sparse mode) per lane; `alloc(n) ::
/// [sparse]` in dense lanes: a fresh array of zero handles per lane;
/// `[i64]`, `[bool]`: the primal only.
fn alloc(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    let [n] = emit::args(call, Prim::Alloc, 1)? else {
        return Err(arity(Prim::Alloc));
    };
    let z = emit::primal(b, Prim::Alloc, call)?;
    let elem = match call.result {
        Type::Array(Scalar::F64) => emit::lane_elem(call.lanes),
        // Handles in dense lanes (forward over a sparse rule).
        Type::Array(Scalar::Sparse) if !call.lanes.is_sparse() => Scalar::Sparse,
        _ => return Ok(out(z, None)),
    };
    let mut lanes = Tangents::new();
    for _ in emit::lanes(call) {
        lanes.push(Operand::Value(b.alloc(elem, n.primal)?));
    }
    Ok(out(z, Some(lanes)))
}

/// `zeros(n)`: the primal and a fresh `zeros(n)` per lane (`alloc(n) ::
/// [sparse]` in sparse mode).
fn zeros(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    let [n] = emit::args(call, Prim::Zeros, 1)? else {
        return Err(arity(Prim::Zeros));
    };
    let z = value(b, Prim::Zeros, &[n.primal])?;
    let mut lanes = Tangents::new();
    for _ in emit::lanes(call) {
        lanes.push(if call.lanes.is_sparse() {
            Operand::Value(b.alloc(Scalar::Sparse, n.primal)?)
        } else {
            value(b, Prim::Zeros, &[n.primal])?
        });
    }
    Ok(out(z, Some(lanes)))
}

/// `arrayref(a, i)` on `[f64]` (and `[sparse]`, whose tangents are arrays of
/// handles): `arrayref(ta, i)` in each lane.
fn arrayref(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    let [a, i] = emit::args(call, Prim::Arrayref, 2)? else {
        return Err(arity(Prim::Arrayref));
    };
    let z = value(b, Prim::Arrayref, &[a.primal, i.primal])?;
    match (&a.ty, &a.tangents) {
        (Type::Array(Scalar::F64 | Scalar::Sparse), Some(ta)) => {
            let lanes = map(b, ta, |b, p| value(b, Prim::Arrayref, &[p, i.primal]))?;
            Ok(out(z, Some(lanes)))
        }
        _ => Ok(out(z, None)),
    }
}

/// `arrayset(a, i, v)` on `[f64]` (and `[sparse]`): the primal write, then
/// in each lane `arrayset(ta, i, tv)` (`0.0`, or the zero handle, where v
/// has no tangents), in place.
fn arrayset(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    let [a, i, v] = emit::args(call, Prim::Arrayset, 3)? else {
        return Err(arity(Prim::Arrayset));
    };
    emit::effect(b, Prim::Arrayset, &[a.primal, i.primal, v.primal])?;
    if let (Type::Array(elem @ (Scalar::F64 | Scalar::Sparse)), Some(ta)) = (&a.ty, &a.tangents) {
        for (k, &t) in ta.iter().enumerate() {
            let tv = match v.tangent(k) {
                Some(tv) => tv,
                None if *elem == Scalar::Sparse => value(b, Prim::Szero, &[])?,
                None => emit::lane_zero(b, call.lanes)?,
            };
            emit::effect(b, Prim::Arrayset, &[t, i.primal, tv])?;
        }
    }
    Ok(out(emit::unit(), None))
}

/// `copy(a)` on `[f64]` (and `[sparse]`): the primal copy and a copy of each
/// tangent array.
fn copy(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    let [a] = emit::args(call, Prim::Copy, 1)? else {
        return Err(arity(Prim::Copy));
    };
    let z = value(b, Prim::Copy, &[a.primal])?;
    let tangents = match &a.tangents {
        Some(ta) if matches!(a.ty, Type::Array(Scalar::F64 | Scalar::Sparse)) => {
            Some(map(b, ta, |b, p| value(b, Prim::Copy, &[p]))?)
        }
        _ => emit::zero_tangents(b, &a.ty, z, call.lanes)?,
    };
    Ok(out(z, tangents))
}

/// `fa * ta + fb * tb` in each lane, for factors present where the argument
/// has tangents; `None` when neither has.
fn two_terms(
    b: &mut FuncBuilder<'_>,
    call: &FruleCall<'_>,
    a: &FwdArg,
    fa: Option<Operand>,
    c: &FwdArg,
    fc: Option<Operand>,
) -> Result<Option<Tangents>, RuleError> {
    if fa.is_none() && fc.is_none() {
        return Ok(None);
    }
    let mut lanes = Tangents::new();
    for k in emit::lanes(call) {
        let p = match (fa, a.tangent(k)) {
            (Some(f), Some(t)) => Some(emit::lane_mul(b, f, t)?),
            _ => None,
        };
        let q = match (fc, c.tangent(k)) {
            (Some(f), Some(t)) => Some(emit::lane_mul(b, f, t)?),
            _ => None,
        };
        lanes.push(match (p, q) {
            (Some(p), Some(q)) => emit::lane_add(b, p, q)?,
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => emit::lane_zero(b, call.lanes)?,
        });
    }
    Ok(Some(lanes))
}

/// `f(t)` for each lane's tangent.
fn map(
    b: &mut FuncBuilder<'_>,
    ts: &[Operand],
    mut f: impl FnMut(&mut FuncBuilder<'_>, Operand) -> Result<Operand, RuleError>,
) -> Result<Tangents, RuleError> {
    ts.iter().map(|&t| f(b, t)).collect()
}

/// `f(p, q)` for the tangents of two arguments, lane by lane.
fn zip(
    b: &mut FuncBuilder<'_>,
    ps: &[Operand],
    qs: &[Operand],
    mut f: impl FnMut(&mut FuncBuilder<'_>, Operand, Operand) -> Result<Operand, RuleError>,
) -> Result<Tangents, RuleError> {
    ps.iter().zip(qs).map(|(&p, &q)| f(b, p, q)).collect()
}

fn out(primal: Operand, tangents: Option<Tangents>) -> FwdOut {
    FwdOut { primal, tangents }
}

fn arity(prim: Prim) -> RuleError {
    RuleError::Unsupported(format!(
        "wrong number of arguments for the rule of `{prim}`"
    ))
}

fn no_tangent(prim: Prim, ty: &Type) -> RuleError {
    RuleError::Unsupported(format!("the rule of `{prim}` found no tangent for a {ty}"))
}
