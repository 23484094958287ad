//! The dense forward rules of the sparse builder's primitives (`sonehot
//! szero sscale sadd sdense` and, on arrays of handles, `ssum sdot sfill
//! sgemma sgemmb`), so that dense forward mode applies to a sparse rule
//! `@f.fwds` and to the sparse gradient's wrapper (forward over sparse:
//! docs/forward.md, "Forward over sparse").
//!
//! A handle stands for a vector over the sparse directions; every builder
//! primitive is linear in its handles and bilinear in (f64 factor, handle),
//! so the tangent of a handle along an outer (dense) lane is a handle of the
//! same builder (`Type::tangent` of `sparse` is `sparse`, of `[sparse]` is
//! `[sparse]`):
//! - `sonehot(k)` and `szero()` are constants: no tangents (zero);
//! - `sscale(c, s)`: `sscale(dc, s) + sscale(c, ds)`;
//! - `sadd(a, b)`: `sadd(da, db)`;
//! - `sdense(s, n)`: `sdense(ds, n)` (a fresh zero array without `ds`);
//! - `ssum(a)`: `ssum(da)`; `sdot(w, a)`: `sdot(dw, a) + sdot(w, da)`;
//! - `sfill(a, h)`: `sfill(da, dh)`; `sgemma`/`sgemmb` (`C += op(A)
//!   op(B)`): `dC += op(dA) op(B) + op(A) op(dB)`, both products of the
//!   same primitive (the handle side stays the handle side).
//!
//! Assumes calls shaped as the forward transform makes them: dense lanes,
//! array operands with one tangent array per lane. Sparse lanes (sparse mode
//! over a sparse rule, which would need handles of handles) and calls of
//! another shape are a [`RuleError`], never a panic. Guarantees: the primal
//! statement runs first, so shapes are checked and errors are the
//! primitive's; each lane costs at most two builder statements per primal
//! statement (nodes linear in the primitive's own); every handle made lives
//! in the run's one builder, like the primal's. `irad test-rules` checks
//! these rules against finite differences (`check.rs`, sparse operands
//! carried as their coefficients over a few directions).

use crate::emit::{self, Tangents, effect, value};
use crate::rrules::arity;
use crate::{FruleCall, FwdArg, FwdOut, Registry, RuleError};
use irad_ir::{FuncBuilder, Operand, Prim};
use smallvec::SmallVec;

/// The builder primitives with a dense frule here.
pub(crate) const PRIMS: [Prim; 10] = [
    Prim::Sonehot,
    Prim::Szero,
    Prim::Sscale,
    Prim::Sadd,
    Prim::Sdense,
    Prim::Ssum,
    Prim::Sdot,
    Prim::Sfill,
    Prim::Sgemma,
    Prim::Sgemmb,
];

/// Registers the frule of each builder primitive.
pub(crate) fn install(reg: &mut Registry) {
    for prim in PRIMS {
        reg.register_frule(
            prim,
            None,
            move |b: &mut FuncBuilder<'_>, call: &FruleCall<'_>| frule(b, call, prim),
        );
    }
}

/// The tangent arrays of array operand `a`, one per lane.
fn arrays(a: &FwdArg, prim: Prim) -> Result<&[Operand], RuleError> {
    a.tangents.as_deref().ok_or_else(|| {
        RuleError::Unsupported(format!(
            "the rule of `{prim}` found an array without tangent arrays"
        ))
    })
}

/// `p + q` of two optional handles (`None` is zero).
fn sum_opt(
    b: &mut FuncBuilder<'_>,
    p: Option<Operand>,
    q: Option<Operand>,
) -> Result<Option<Operand>, RuleError> {
    Ok(match (p, q) {
        (Some(p), Some(q)) => Some(value(b, Prim::Sadd, &[p, q])?),
        (Some(t), None) | (None, Some(t)) => Some(t),
        (None, None) => None,
    })
}

/// Per lane, `one(k)` (an optional handle); `None` when no lane has one,
/// zero handles for the lanes without one otherwise.
fn per_lane(
    b: &mut FuncBuilder<'_>,
    call: &FruleCall<'_>,
    mut one: impl FnMut(&mut FuncBuilder<'_>, usize) -> Result<Option<Operand>, RuleError>,
) -> Result<Option<Tangents>, RuleError> {
    let mut lanes: SmallVec<[Option<Operand>; 1]> = SmallVec::new();
    for k in emit::lanes(call) {
        lanes.push(one(b, k)?);
    }
    if lanes.iter().all(Option::is_none) {
        return Ok(None);
    }
    let mut out = Tangents::new();
    for t in lanes {
        out.push(match t {
            Some(t) => t,
            None => value(b, Prim::Szero, &[])?,
        });
    }
    Ok(Some(out))
}

fn frule(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>, prim: Prim) -> Result<FwdOut, RuleError> {
    if call.lanes.is_sparse() {
        return Err(RuleError::Unsupported(format!(
            "`{prim}` in sparse forward mode: forward mode over a sparse rule takes dense lanes"
        )));
    }
    let n = match prim {
        Prim::Szero => 0,
        Prim::Sonehot | Prim::Ssum => 1,
        Prim::Sscale | Prim::Sadd | Prim::Sdense | Prim::Sdot | Prim::Sfill => 2,
        Prim::Sgemma | Prim::Sgemmb => 8,
        _ => return Err(arity(prim)),
    };
    let args = emit::args(call, prim, n)?;
    let primal: SmallVec<[Operand; 8]> = args.iter().map(|a| a.primal).collect();
    let out = |primal, tangents| FwdOut { primal, tangents };
    match (prim, args) {
        (Prim::Sonehot | Prim::Szero, _) => Ok(out(value(b, prim, &primal)?, None)),
        (Prim::Sscale, [c, s]) => {
            let z = value(b, prim, &primal)?;
            let t = per_lane(b, call, |b, k| {
                let p = c
                    .tangent(k)
                    .map(|dc| value(b, Prim::Sscale, &[dc, s.primal]))
                    .transpose()?;
                let q = s
                    .tangent(k)
                    .map(|ds| value(b, Prim::Sscale, &[c.primal, ds]))
                    .transpose()?;
                sum_opt(b, p, q)
            })?;
            Ok(out(z, t))
        }
        (Prim::Sadd, [x, y]) => {
            let z = value(b, prim, &primal)?;
            let t = per_lane(b, call, |b, k| sum_opt(b, x.tangent(k), y.tangent(k)))?;
            Ok(out(z, t))
        }
        (Prim::Sdense, [s, len]) => {
            // The result is an array: tangents in every lane.
            let z = value(b, prim, &primal)?;
            let mut t = Tangents::new();
            for k in emit::lanes(call) {
                t.push(match s.tangent(k) {
                    Some(ds) => value(b, Prim::Sdense, &[ds, len.primal])?,
                    None => value(b, Prim::Zeros, &[len.primal])?,
                });
            }
            Ok(out(z, Some(t)))
        }
        (Prim::Ssum, [a]) => {
            let z = value(b, prim, &primal)?;
            let da = arrays(a, prim)?;
            let t = per_lane(b, call, |b, k| Ok(Some(value(b, Prim::Ssum, &[da[k]])?)))?;
            Ok(out(z, t))
        }
        (Prim::Sdot, [w, a]) => {
            let z = value(b, prim, &primal)?;
            let da = arrays(a, prim)?;
            let t = per_lane(b, call, |b, k| {
                let p = w
                    .tangent(k)
                    .map(|dw| value(b, Prim::Sdot, &[dw, a.primal]))
                    .transpose()?;
                let q = value(b, Prim::Sdot, &[w.primal, da[k]])?;
                sum_opt(b, p, Some(q))
            })?;
            Ok(out(z, t))
        }
        (Prim::Sfill, [a, h]) => {
            effect(b, prim, &primal)?;
            let da = arrays(a, prim)?;
            for k in emit::lanes(call) {
                let dh = match h.tangent(k) {
                    Some(t) => t,
                    None => value(b, Prim::Szero, &[])?,
                };
                effect(b, Prim::Sfill, &[da[k], dh])?;
            }
            Ok(out(emit::unit(), None))
        }
        (Prim::Sgemma | Prim::Sgemmb, [ta, tb, a, bm, m, kk, n, c]) => {
            effect(b, prim, &primal)?;
            let dc = arrays(c, prim)?;
            for k in emit::lanes(call) {
                // dC += op(dA) op(B) + op(A) op(dB); an operand without
                // tangents (a constant) contributes nothing.
                for (x, y) in [
                    (a.tangent(k), Some(bm.primal)),
                    (Some(a.primal), bm.tangent(k)),
                ] {
                    let (Some(x), Some(y)) = (x, y) else {
                        continue;
                    };
                    let ops = [
                        ta.primal, tb.primal, x, y, m.primal, kk.primal, n.primal, dc[k],
                    ];
                    effect(b, prim, &ops)?;
                }
            }
            Ok(out(emit::unit(), None))
        }
        _ => Err(arity(prim)),
    }
}
