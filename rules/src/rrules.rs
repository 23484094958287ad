//! The built-in rrule of every primitive of the table except the AD ones,
//! grouped as in `ir/src/prim.rs`.
//!
//! Assumes calls shaped as the reverse transform makes them (see [`crate::RevArg`]
//! and [`PullbackCall`]): argument types as the primitive's signature says,
//! one shadow per `[f64]` array of an argument, one `dy` entry per f64 of the
//! result. A call of another shape is a [`RuleError`], never a panic.
//!
//! Guarantees, for every rule:
//! - the forward part emits the primal statement exactly as the primal has
//!   it, so results, arrays and run-time errors are the primitive's;
//! - the forward part of an f64 function saves one partial derivative per
//!   f64 argument that is not a constant (computed once, with the conventions
//!   of the frules at kinks and ties), and its pullback costs one multiply
//!   per such argument; nothing is saved or emitted for constant arguments,
//!   and nothing is emitted in the pullback where `dy` is known to be zero;
//! - `arrayset` saves the overwritten element and its pullback writes it back,
//!   so after the pullback the array is as before the forward part; the
//!   cotangent of an array element lives in the array's shadow, read and
//!   reset by the pullback of the write, incremented by that of a read: O(1)
//!   per element, never a dense array;
//! - new arrays (`alloc`, `zeros`, `copy`) get fresh zero shadows; `select`,
//!   `tuple` and `getfield` pass shadows on, so every name of one array has
//!   the same shadow.

use crate::emit::{self, f64c, mul, value};
use crate::frules::{PRIMAL_ONLY, UNARY};
use crate::{PullbackCall, PullbackOut, Registry, RevCall, RevFwdOut, RruleFns, RuleError};
use irad_ir::{Const, FuncBuilder, Operand, Prim, Scalar, Type};
use smallvec::{SmallVec, smallvec};

/// The partials of one call, inline (no allocation per statement).
type Partials = SmallVec<[Option<Operand>; 2]>;

/// Partial derivatives of an f64 function: one per argument in `want`
/// (`None` elsewhere, or for a zero partial), given the arguments and the
/// primal result.
type PartialsFn =
    fn(&mut FuncBuilder<'_>, &[Operand], Operand, &[bool]) -> Result<Partials, RuleError>;

/// Registers the built-in rrules, each for every argument type.
pub(crate) fn install(reg: &mut Registry) {
    for &(prim, factor) in UNARY {
        install_partials(reg, prim, false, move |b, args, y, _| {
            let [x] = args else {
                return Err(RuleError::Unsupported(format!(
                    "`{prim}` takes one argument"
                )));
            };
            Ok(smallvec![Some(factor(b, *x, y)?)])
        });
    }
    let binary: &[(Prim, bool, PartialsFn)] = &[
        (Prim::Add, false, |_, _, _, _| {
            Ok(smallvec![Some(f64c(1.0)), Some(f64c(1.0))])
        }),
        (Prim::Sub, false, |_, _, _, _| {
            Ok(smallvec![Some(f64c(1.0)), Some(f64c(-1.0))])
        }),
        (Prim::Neg, false, |_, _, _, _| {
            Ok(smallvec![Some(f64c(-1.0))])
        }),
        (Prim::Mul, false, |_, a, _, _| {
            Ok(smallvec![a.get(1).copied(), a.first().copied()])
        }),
        (Prim::Zmul, false, |_, a, _, _| {
            Ok(smallvec![a.get(1).copied(), a.first().copied()])
        }),
        (Prim::Div, false, div_partials),
        (Prim::Pow, true, pow_partials),
        (Prim::Powi, false, powi_partials),
        (Prim::Copysign, false, copysign_partials),
        (Prim::Atan2, false, atan2_partials),
    ];
    for &(prim, strong, partials) in binary {
        install_partials(reg, prim, strong, partials);
    }
    for &prim in PRIMAL_ONLY {
        reg.register_rrule(
            prim,
            None,
            RruleFns::new(
                move |b, call| Ok(plain(primal(b, prim, call)?)),
                |_, call| Ok(no_cotangents(call)),
            ),
        );
    }
    reg.register_rrule(Prim::Min, None, pick(Prim::Min, Prim::Le));
    reg.register_rrule(Prim::Max, None, pick(Prim::Max, Prim::Ge));
    reg.register_rrule(Prim::Select, None, RruleFns::new(select_fwd, select_back));
    reg.register_rrule(Prim::Tuple, None, RruleFns::new(tuple_fwd, tuple_back));
    reg.register_rrule(
        Prim::Getfield,
        None,
        RruleFns::new(getfield_fwd, getfield_back),
    );
    for prim in [Prim::Alloc, Prim::Zeros] {
        reg.register_rrule(
            prim,
            None,
            RruleFns::new(
                move |b, call| new_array(b, prim, call),
                |_, call| Ok(no_cotangents(call)),
            ),
        );
    }
    reg.register_rrule(
        Prim::Arrayref,
        None,
        RruleFns::new(arrayref_fwd, arrayref_back),
    );
    reg.register_rrule(
        Prim::Arrayset,
        None,
        RruleFns::new(arrayset_fwd, arrayset_back),
    );
    reg.register_rrule(Prim::Copy, None, RruleFns::new(copy_fwd, copy_back));
}

/// The arguments that get a partial: f64 arguments that are not constants.
fn wanted(types: &[Type], consts: &[bool]) -> SmallVec<[bool; 4]> {
    types
        .iter()
        .zip(consts)
        .map(|(t, &c)| *t == Type::F64 && !c)
        .collect()
}

/// The rule of an f64 function given by its partials: the forward part saves
/// the partials of the wanted arguments (a zero partial as the constant 0,
/// which costs no tape); the pullback scales `dy` by each
/// (`select(eq(dy, 0), 0, p * dy)` when `strong`, so that a zero cotangent
/// never meets an infinite or NaN partial, as the frule's lanes do).
fn install_partials(
    reg: &mut Registry,
    prim: Prim,
    strong: bool,
    partials: impl Fn(&mut FuncBuilder<'_>, &[Operand], Operand, &[bool]) -> Result<Partials, RuleError>
    + Send
    + Sync
    + 'static,
) {
    reg.register_rrule(
        prim,
        None,
        RruleFns::new(
            move |b, call| {
                // Inline: this runs once per differentiated statement.
                let args: SmallVec<[Operand; 4]> = call.args.iter().map(|a| a.primal).collect();
                let want: SmallVec<[bool; 4]> = call
                    .args
                    .iter()
                    .map(|a| a.ty == Type::F64 && a.active)
                    .collect();
                let y = value(b, prim, &args)?;
                let mut saved = SmallVec::new();
                if want.iter().any(|&w| w) {
                    let ps = partials(b, &args, y, &want)?;
                    for (i, &w) in want.iter().enumerate() {
                        if w {
                            saved.push(ps.get(i).copied().flatten().unwrap_or(f64c(0.0)));
                        }
                    }
                }
                Ok(RevFwdOut {
                    primal: y,
                    shadows: SmallVec::new(),
                    saved,
                })
            },
            move |b, call| {
                let want = wanted(call.arg_types, call.arg_inactive);
                let dy = one_dy(call)?;
                let mut saved = call.saved.iter();
                let mut cotangents = SmallVec::with_capacity(want.len());
                for (&w, ty) in want.iter().zip(call.arg_types) {
                    if !w {
                        cotangents.push(smallvec![None; ty.cotangent_leaves()]);
                        continue;
                    }
                    let p = *saved.next().ok_or_else(|| short(call))?;
                    let c = match dy {
                        Some(d) if strong => Some(strong_scale(b, p, d)?),
                        Some(d) => scale(b, p, d)?,
                        None => None,
                    };
                    cotangents.push(smallvec![c]);
                }
                Ok(PullbackOut { cotangents })
            },
        ),
    );
}

/// `p * d` ([`emit::product`]: `zmul` for strong products), with the
/// constants 0, 1 and -1 folded (the last two exact either way).
fn scale(b: &mut FuncBuilder<'_>, p: Operand, d: Operand) -> Result<Option<Operand>, RuleError> {
    let c = match p {
        Operand::Const(Const::F64(c)) => Some(c),
        _ => None,
    };
    // -0.0 counts as zero.
    Ok(match c {
        Some(0.0) => None,
        Some(1.0) => Some(d),
        Some(-1.0) => Some(value(b, Prim::Neg, &[d])?),
        _ => Some(emit::product(b, p, d)?),
    })
}

/// `p * d`, exactly 0 where `d` is 0 ([`emit::strong_mul`], which stays
/// differentiable in `d` for forward over reverse).
fn strong_scale(b: &mut FuncBuilder<'_>, p: Operand, d: Operand) -> Result<Operand, RuleError> {
    emit::strong_mul(b, p, d)
}

/// `d(x / y)`: `1 / y` and `-(z / y)` with `z = x / y`.
fn div_partials(
    b: &mut FuncBuilder<'_>,
    a: &[Operand],
    z: Operand,
    want: &[bool],
) -> Result<Partials, RuleError> {
    let [_, y] = a else {
        return Err(arity(Prim::Div));
    };
    let px = if want[0] {
        Some(value(b, Prim::Div, &[f64c(1.0), *y])?)
    } else {
        None
    };
    let py = if want[1] {
        let q = value(b, Prim::Div, &[z, *y])?;
        Some(value(b, Prim::Neg, &[q])?)
    } else {
        None
    };
    Ok(smallvec![px, py])
}

/// `d pow(x, y)`: `y * pow(x, y - 1)` (0 where y = 0) and `log(x) * z` (0
/// where x = 0), as the frule has them.
fn pow_partials(
    b: &mut FuncBuilder<'_>,
    a: &[Operand],
    z: Operand,
    want: &[bool],
) -> Result<Partials, RuleError> {
    let [x, y] = a else {
        return Err(arity(Prim::Pow));
    };
    let px = if want[0] {
        let ym1 = value(b, Prim::Sub, &[*y, f64c(1.0)])?;
        let p = value(b, Prim::Pow, &[*x, ym1])?;
        let f = mul(b, *y, p)?;
        let y0 = value(b, Prim::Eq, &[*y, f64c(0.0)])?;
        Some(value(b, Prim::Select, &[y0, f64c(0.0), f])?)
    } else {
        None
    };
    let py = if want[1] {
        let l = value(b, Prim::Log, &[*x])?;
        let f = mul(b, l, z)?;
        let x0 = value(b, Prim::Eq, &[*x, f64c(0.0)])?;
        Some(value(b, Prim::Select, &[x0, f64c(0.0), f])?)
    } else {
        None
    };
    Ok(smallvec![px, py])
}

/// `d powi(x, n) / dx = n * pow(x, n - 1)`, 0 where n = 0.
fn powi_partials(
    b: &mut FuncBuilder<'_>,
    a: &[Operand],
    _z: Operand,
    want: &[bool],
) -> Result<Partials, RuleError> {
    let [x, n] = a else {
        return Err(arity(Prim::Powi));
    };
    if !want[0] {
        return Ok(smallvec![None, None]);
    }
    let nf = value(b, Prim::Sitofp, &[*n])?;
    let nm1 = value(b, Prim::Sub, &[nf, f64c(1.0)])?;
    let p = value(b, Prim::Pow, &[*x, nm1])?;
    let f = mul(b, nf, p)?;
    let n0 = value(b, Prim::Eq, &[*n, Operand::from(0i64)])?;
    Ok(smallvec![
        Some(value(b, Prim::Select, &[n0, f64c(0.0), f])?),
        None,
    ])
}

/// `copysign(x, y)`: `copysign(1, x) * copysign(1, y)` for x, zero for y.
fn copysign_partials(
    b: &mut FuncBuilder<'_>,
    a: &[Operand],
    _z: Operand,
    want: &[bool],
) -> Result<Partials, RuleError> {
    let [x, y] = a else {
        return Err(arity(Prim::Copysign));
    };
    if !want[0] {
        return Ok(smallvec![None, None]);
    }
    let sx = value(b, Prim::Copysign, &[f64c(1.0), *x])?;
    let sy = value(b, Prim::Copysign, &[f64c(1.0), *y])?;
    Ok(smallvec![Some(mul(b, sx, sy)?), None])
}

/// `d atan2(y, x)`: `x / r` and `-(y / r)` with `r = x^2 + y^2`.
fn atan2_partials(
    b: &mut FuncBuilder<'_>,
    a: &[Operand],
    _z: Operand,
    want: &[bool],
) -> Result<Partials, RuleError> {
    let [y, x] = a else {
        return Err(arity(Prim::Atan2));
    };
    let x2 = mul(b, *x, *x)?;
    let y2 = mul(b, *y, *y)?;
    let r = value(b, Prim::Add, &[x2, y2])?;
    let py = if want[0] {
        Some(value(b, Prim::Div, &[*x, r])?)
    } else {
        None
    };
    let px = if want[1] {
        let q = value(b, Prim::Div, &[*y, r])?;
        Some(value(b, Prim::Neg, &[q])?)
    } else {
        None
    };
    Ok(smallvec![py, px])
}

/// `min`/`max`: the comparison that picks the first operand (`le` for min,
/// `ge` for max, so a tie goes to the first) is saved, and the pullback
/// routes `dy` with `select`.
fn pick(prim: Prim, cmp: Prim) -> RruleFns {
    RruleFns::new(
        move |b, call| {
            let [x, y] = call.args else {
                return Err(arity(prim));
            };
            let z = value(b, prim, &[x.primal, y.primal])?;
            let both_const = !x.active && !y.active;
            let mut saved = SmallVec::new();
            if !both_const {
                saved.push(value(b, cmp, &[x.primal, y.primal])?);
            }
            Ok(RevFwdOut {
                primal: z,
                shadows: SmallVec::new(),
                saved,
            })
        },
        move |b, call| {
            let dy = one_dy(call)?;
            let (Some(d), Some(&c)) = (dy, call.saved.first()) else {
                return Ok(no_cotangents(call));
            };
            let dx = value(b, Prim::Select, &[c, d, f64c(0.0)])?;
            let dz = value(b, Prim::Select, &[c, f64c(0.0), d])?;
            Ok(PullbackOut {
                cotangents: smallvec![smallvec![Some(dx)], smallvec![Some(dz)]],
            })
        },
    )
}

/// `select(c, a, b)` of any type: the shadows are selected like the values;
/// the condition is saved when the type holds f64s outside arrays.
fn select_fwd(b: &mut FuncBuilder<'_>, call: &RevCall<'_>) -> Result<RevFwdOut, RuleError> {
    let [c, x, y] = call.args else {
        return Err(arity(Prim::Select));
    };
    let z = value(b, Prim::Select, &[c.primal, x.primal, y.primal])?;
    let mut shadows = SmallVec::new();
    for (&sx, &sy) in x.shadows.iter().zip(&y.shadows) {
        shadows.push(value(b, Prim::Select, &[c.primal, sx, sy])?);
    }
    let mut saved = SmallVec::new();
    if Type::cotangent_leaves(&x.ty) > 0 {
        saved.push(c.primal);
    }
    Ok(RevFwdOut {
        primal: z,
        shadows,
        saved,
    })
}

/// `dy` to the side the condition chose, leaf by leaf.
fn select_back(b: &mut FuncBuilder<'_>, call: &PullbackCall<'_>) -> Result<PullbackOut, RuleError> {
    let mut dx = SmallVec::new();
    let mut dz = SmallVec::new();
    if let Some(&c) = call.saved.first() {
        for &d in call.dy {
            match d {
                Some(d) => {
                    dx.push(Some(value(b, Prim::Select, &[c, d, f64c(0.0)])?));
                    dz.push(Some(value(b, Prim::Select, &[c, f64c(0.0), d])?));
                }
                None => {
                    dx.push(None);
                    dz.push(None);
                }
            }
        }
    }
    Ok(PullbackOut {
        cotangents: smallvec![smallvec![], dx, dz],
    })
}

/// `tuple(a, ...)`: the shadows are the components' in order.
fn tuple_fwd(b: &mut FuncBuilder<'_>, call: &RevCall<'_>) -> Result<RevFwdOut, RuleError> {
    let z = primal(b, Prim::Tuple, call)?;
    let shadows = call
        .args
        .iter()
        .flat_map(|a| a.shadows.iter().copied())
        .collect();
    Ok(RevFwdOut {
        primal: z,
        shadows,
        saved: SmallVec::new(),
    })
}

/// Each component gets its slice of `dy`; no statements.
fn tuple_back(_: &mut FuncBuilder<'_>, call: &PullbackCall<'_>) -> Result<PullbackOut, RuleError> {
    let mut rest = call.dy;
    let mut cotangents = SmallVec::with_capacity(call.arg_types.len());
    for ty in call.arg_types {
        let n = Type::cotangent_leaves(ty);
        if rest.len() < n {
            return Err(short(call));
        }
        let (mine, tail) = rest.split_at(n);
        cotangents.push(mine.iter().copied().collect());
        rest = tail;
    }
    Ok(PullbackOut { cotangents })
}

/// The field index `k` of a `getfield` call.
fn field_index(k: Operand) -> Result<usize, RuleError> {
    match k {
        Operand::Const(Const::I64(k)) => {
            usize::try_from(k).map_err(|_| RuleError::Unsupported(format!("getfield index {k}")))
        }
        _ => Err(RuleError::Unsupported(
            "getfield needs a constant index".into(),
        )),
    }
}

/// `getfield(t, k)`: the field's slice of the tuple's shadows.
fn getfield_fwd(b: &mut FuncBuilder<'_>, call: &RevCall<'_>) -> Result<RevFwdOut, RuleError> {
    let [t, k] = call.args else {
        return Err(arity(Prim::Getfield));
    };
    // A unit field is the unit constant (a tuple phi's `()` field).
    let z = emit::value_or_unit(b, Prim::Getfield, &[t.primal, k.primal])?;
    let (start, n) = emit::field_leaves(&t.ty, field_index(k.primal)?, Type::shadow_leaves)?;
    let shadows = t
        .shadows
        .get(start..start + n)
        .ok_or_else(|| RuleError::Unsupported("getfield: too few shadows".into()))?
        .iter()
        .copied()
        .collect();
    Ok(RevFwdOut {
        primal: z,
        shadows,
        saved: smallvec![k.primal],
    })
}

/// The tuple's cotangent is `dy` in the field's slice, zero elsewhere.
fn getfield_back(
    _: &mut FuncBuilder<'_>,
    call: &PullbackCall<'_>,
) -> Result<PullbackOut, RuleError> {
    let (Some(ty), Some(&k)) = (call.arg_types.first(), call.saved.first()) else {
        return Err(short(call));
    };
    let (start, n) = emit::field_leaves(ty, field_index(k)?, Type::cotangent_leaves)?;
    if call.dy.len() != n {
        return Err(short(call));
    }
    let mut dt: crate::Cotangents = smallvec![None; Type::cotangent_leaves(ty)];
    dt[start..start + n].copy_from_slice(call.dy);
    Ok(PullbackOut {
        cotangents: smallvec![dt, smallvec![]],
    })
}

/// `alloc` and `zeros`: the primal and, for `[f64]`, a fresh zero shadow of
/// the same length.
fn new_array(
    b: &mut FuncBuilder<'_>,
    prim: Prim,
    call: &RevCall<'_>,
) -> Result<RevFwdOut, RuleError> {
    let [n] = call.args else {
        return Err(arity(prim));
    };
    let z = primal(b, prim, call)?;
    let mut shadows = SmallVec::new();
    if *call.result == Type::Array(Scalar::F64) {
        shadows.push(value(b, Prim::Zeros, &[n.primal])?);
    }
    Ok(RevFwdOut {
        primal: z,
        shadows,
        saved: SmallVec::new(),
    })
}

/// `arrayref(a, i)`: for `[f64]` the shadow and the index are saved.
fn arrayref_fwd(b: &mut FuncBuilder<'_>, call: &RevCall<'_>) -> Result<RevFwdOut, RuleError> {
    let [a, i] = call.args else {
        return Err(arity(Prim::Arrayref));
    };
    let z = value(b, Prim::Arrayref, &[a.primal, i.primal])?;
    let saved = match a.shadows.first() {
        Some(&s) => smallvec![s, i.primal],
        None => SmallVec::new(),
    };
    Ok(RevFwdOut {
        primal: z,
        shadows: SmallVec::new(),
        saved,
    })
}

/// `shadow[i] += dy`.
fn arrayref_back(
    b: &mut FuncBuilder<'_>,
    call: &PullbackCall<'_>,
) -> Result<PullbackOut, RuleError> {
    if let ([s, i], [Some(d)]) = (call.saved, call.dy) {
        let old = value(b, Prim::Arrayref, &[*s, *i])?;
        let new = value(b, Prim::Add, &[old, *d])?;
        emit::effect(b, Prim::Arrayset, &[*s, *i, new])?;
    }
    Ok(no_cotangents(call))
}

/// `arrayset(a, i, v)`: the overwritten element is read first and saved with
/// the array, the index and (for `[f64]`) the shadow.
fn arrayset_fwd(b: &mut FuncBuilder<'_>, call: &RevCall<'_>) -> Result<RevFwdOut, RuleError> {
    let [a, i, v] = call.args else {
        return Err(arity(Prim::Arrayset));
    };
    let old = value(b, Prim::Arrayref, &[a.primal, i.primal])?;
    emit::effect(b, Prim::Arrayset, &[a.primal, i.primal, v.primal])?;
    let mut saved: SmallVec<[Operand; 4]> = smallvec![a.primal, i.primal, old];
    if let Some(&s) = a.shadows.first() {
        saved.push(s);
    }
    Ok(RevFwdOut {
        primal: emit::unit(),
        shadows: SmallVec::new(),
        saved,
    })
}

/// Writes the old element back; for `[f64]` the value written gets the
/// element's cotangent, which is then zero (the element was overwritten).
fn arrayset_back(
    b: &mut FuncBuilder<'_>,
    call: &PullbackCall<'_>,
) -> Result<PullbackOut, RuleError> {
    let (a, i, old, shadow) = match call.saved {
        [a, i, old] => (*a, *i, *old, None),
        [a, i, old, s] => (*a, *i, *old, Some(*s)),
        _ => return Err(short(call)),
    };
    emit::effect(b, Prim::Arrayset, &[a, i, old])?;
    let mut out = no_cotangents(call);
    if let Some(s) = shadow {
        let g = value(b, Prim::Arrayref, &[s, i])?;
        emit::effect(b, Prim::Arrayset, &[s, i, f64c(0.0)])?;
        if let Some(dv) = out.cotangents.get_mut(2)
            && call.arg_types.get(2) == Some(&Type::F64)
        {
            *dv = smallvec![Some(g)];
        }
    }
    Ok(out)
}

/// `copy(a)` on `[f64]`: the copy gets a fresh zero shadow; both shadows are
/// saved.
fn copy_fwd(b: &mut FuncBuilder<'_>, call: &RevCall<'_>) -> Result<RevFwdOut, RuleError> {
    let [a] = call.args else {
        return Err(arity(Prim::Copy));
    };
    let z = value(b, Prim::Copy, &[a.primal])?;
    let Some(&sa) = a.shadows.first() else {
        return Ok(plain(z));
    };
    let n = value(b, Prim::Length, &[a.primal])?;
    let sz = value(b, Prim::Zeros, &[n])?;
    Ok(RevFwdOut {
        primal: z,
        shadows: smallvec![sz],
        saved: smallvec![sa, sz],
    })
}

/// `shadow_a[i] += shadow_copy[i]` for every i: a loop as long as the copy's.
fn copy_back(b: &mut FuncBuilder<'_>, call: &PullbackCall<'_>) -> Result<PullbackOut, RuleError> {
    if let [sa, sz] = call.saved {
        let (sa, sz) = (*sa, *sz);
        let n = value(b, Prim::Length, &[sz])?;
        emit::for_range(b, n, |b, i| {
            let x = value(b, Prim::Arrayref, &[sa, i])?;
            let y = value(b, Prim::Arrayref, &[sz, i])?;
            let s = value(b, Prim::Add, &[x, y])?;
            emit::effect(b, Prim::Arrayset, &[sa, i, s])
        })?;
    }
    Ok(no_cotangents(call))
}

/// The primal statement of a call (for `alloc`, annotated with its result).
fn primal(b: &mut FuncBuilder<'_>, prim: Prim, call: &RevCall<'_>) -> Result<Operand, RuleError> {
    let args: SmallVec<[Operand; 3]> = call.args.iter().map(|a| a.primal).collect();
    if prim == Prim::Alloc {
        let (Type::Array(elem), [n]) = (call.result, args.as_slice()) else {
            return Err(RuleError::Unsupported(format!(
                "`alloc` needs one length and an array result type, found {}",
                call.result
            )));
        };
        return Ok(Operand::Value(b.alloc(*elem, *n)?));
    }
    Ok(b.prim(prim, &args)?.map_or_else(emit::unit, Operand::Value))
}

/// A forward part with nothing but the primal.
fn plain(primal: Operand) -> RevFwdOut {
    RevFwdOut {
        primal,
        shadows: SmallVec::new(),
        saved: SmallVec::new(),
    }
}

/// Zero cotangents for every argument.
pub(crate) fn no_cotangents(call: &PullbackCall<'_>) -> PullbackOut {
    PullbackOut {
        cotangents: call
            .arg_types
            .iter()
            .map(|t| smallvec![None; Type::cotangent_leaves(t)])
            .collect(),
    }
}

/// The one cotangent of an f64 result.
fn one_dy(call: &PullbackCall<'_>) -> Result<Option<Operand>, RuleError> {
    match call.dy {
        [d] => Ok(*d),
        _ => Err(RuleError::Unsupported(format!(
            "the pullback of `{}` expects one cotangent, found {}",
            call.callee,
            call.dy.len()
        ))),
    }
}

fn short(call: &PullbackCall<'_>) -> RuleError {
    RuleError::Unsupported(format!(
        "the pullback of `{}` got fewer saved values or cotangents than its forward part gives",
        call.callee
    ))
}

pub(crate) fn arity(prim: Prim) -> RuleError {
    RuleError::Unsupported(format!(
        "wrong number of arguments for the rule of `{prim}`"
    ))
}
