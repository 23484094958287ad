//! What `irad emit --hvp` exports (docs/codegen.md, "Hessian-vector
//! products"): the wrapper `@f.hvp` around the forward-over-reverse rule
//! `@f.vjp.fwd` of a function returning f64 (as [`crate::hvp`] derives it),
//! whose parameters and result are all plain values, so that the C ABI can
//! take them: the primal arguments, then the direction as leaves (one f64
//! per f64 of the differentiated arguments outside arrays, then one `[f64]`
//! per `[f64]` array of them, of the array's length), then the gradient's
//! and the product's buffers (one `[f64]` each per such array, added into);
//! the result is the tuple of the value, the gradient's f64 leaves and the
//! product's f64 leaves (of the differentiated arguments, outside arrays).
//!
//! Assumes a verified, normalised module and a function returning f64.
//! Guarantees: the wrapper builds the duals `@f.vjp.fwd` takes (the
//! arguments with the direction; zero directions for the arguments not
//! differentiated; the buffers as the primal and tangent of their arrays'
//! shadows, fresh zero shadows for the arrays not differentiated; the seed
//! `dual(1.0, 0.0)`) and takes its result apart, nothing else; every
//! arrays is restored by the rule before it returns; a failure to build is
//! an internal [`Error`], never a panic.

use crate::deriv::{ReverseRun, check_wrt, forward_rule_with, func_loc, invalid};
use crate::{Error, GradRequest, Source, internal};
use irad_ir::{FuncBuilder, FuncId, Lanes, Module, Operand, Prim, Scalar, Type};
use irad_passes::forward::Forward;
use irad_passes::optimise::Strategy;
use irad_passes::reverse::Reverse;
use irad_rules::{RuleError, emit};

/// The module with `@f.hvp` and what it is made of, and the rule caches
/// (grown), for `irad emit --hvp`.
pub(crate) struct HvpExport<'r> {
    pub(crate) m: Module,
    pub(crate) rev: Reverse<'r>,
    pub(crate) fwd: Forward<'r>,
    /// `@f.hvp`.
    pub(crate) wrapper: FuncId,
    /// The checked, sorted argument positions differentiated.
    pub(crate) wrt: Vec<usize>,
}

/// Derives the pieces of `func` for `wrt` (all arguments with a tangent by
/// default), `@f.vjp` and its forward rule, optimised by `schedule`, and
/// builds `@f.hvp` around them, with the rule caches `rev` and `fwd`.
pub(crate) fn derive<'r>(
    src: &Source,
    m: Module,
    rev: Reverse<'r>,
    fwd: Forward<'r>,
    func: FuncId,
    wrt: Option<&[usize]>,
    schedule: Option<Strategy>,
) -> Result<HvpExport<'r>, Error> {
    let (floc, f) = func_loc(src, &m, func)?;
    if f.ret != Type::F64 {
        return Err(invalid(
            src,
            floc,
            format!(
                "@{} returns {}: `--hvp` needs a function returning f64",
                f.name, f.ret
            ),
        ));
    }
    let wrt = check_wrt(src, &m, func, wrt)?;
    let req = GradRequest {
        schedule,
        ..GradRequest::new(func, &[])
    };
    let run = ReverseRun::with_cache(src, m, rev, &req, func, &wrt)?;
    let (mut m, fwd, rule) =
        forward_rule_with(src, run.m, fwd, &req, run.wrapper.id, Lanes::ONE, None)?;
    let wrapper = build(&mut m, func, rule, &wrt)
        .map_err(|e| internal(src, &format!("building the hvp wrapper: {e}")))?;
    Ok(HvpExport {
        m,
        rev: run.cache,
        fwd,
        wrapper,
        wrt,
    })
}

/// Builds `@f.hvp` (see the module comment) around `rule` = `@f.vjp.fwd`.
fn build(m: &mut Module, f: FuncId, rule: FuncId, wrt: &[usize]) -> Result<FuncId, String> {
    let func = m.get(f).ok_or("invalid function handle")?;
    let params = func.param_types();
    let base = func.name.clone();
    let (mut ns, mut na) = (0, 0);
    for &i in wrt {
        let ty = params
            .get(i)
            .ok_or("a --wrt position past the parameters")?;
        ns += ty.cotangent_leaves();
        na += ty.shadow_leaves();
    }
    let f64s = Type::Array(Scalar::F64);
    let mut wparams: Vec<(Option<String>, Type)> =
        params.iter().map(|t| (None, t.clone())).collect();
    wparams.extend(std::iter::repeat_n((None, Type::F64), ns));
    wparams.extend(std::iter::repeat_n((None, f64s), 3 * na));
    let ret = Type::tuple(std::iter::repeat_n(Type::F64, 1 + 2 * ns).collect());
    let mut name = format!("{base}.hvp");
    let mut k = 1;
    while m.by_name(&name).is_some() {
        k += 1;
        name = format!("{base}.hvp{k}");
    }
    let id = m
        .declare_func(&name, wparams, ret)
        .map_err(|e| e.to_string())?;
    let mut b = FuncBuilder::new(m, id).map_err(|e| e.to_string())?;
    let entry = b.create_block();
    b.switch_to_block(entry).map_err(|e| e.to_string())?;
    let body = Body {
        n: params.len(),
        ns,
        na,
    };
    body.emit(&mut b, &params, rule, wrt)
        .map_err(|e| e.to_string())?;
    Ok(id)
}

/// The parameter layout of `@f.hvp`: `n` primal parameters, `ns` direction
/// scalars, then `na` arrays each of directions, gradient buffers and
/// product buffers.
struct Body {
    n: usize,
    ns: usize,
    na: usize,
}

impl Body {
    fn param(&self, b: &FuncBuilder<'_>, i: usize) -> Result<Operand, RuleError> {
        Ok(Operand::Value(b.param(i)?))
    }

    /// The statements: the duals, the call of the rule, the result taken
    /// apart.
    fn emit(
        &self,
        b: &mut FuncBuilder<'_>,
        params: &[Type],
        rule: FuncId,
        wrt: &[usize],
    ) -> Result<(), RuleError> {
        let (mut scal, mut arr) = (self.n, self.n + self.ns);
        let mut args = Vec::with_capacity(params.len());
        let mut shadows = Vec::new();
        let mut buffer = 0;
        for (i, ty) in params.iter().enumerate() {
            let p = self.param(b, i)?;
            if !ty.has_tangent() {
                args.push(p);
                continue;
            }
            let mut arrays = Vec::new();
            array_leaves(b, p, ty, &mut arrays)?;
            let dir = if wrt.contains(&i) {
                for _ in &arrays {
                    let g = self.param(b, self.n + self.ns + self.na + buffer)?;
                    let h = self.param(b, self.n + self.ns + 2 * self.na + buffer)?;
                    shadows.push(emit::value(b, Prim::Dual, &[g, h])?);
                    buffer += 1;
                }
                self.direction(b, ty, &mut scal, &mut arr)?
            } else {
                for &a in &arrays {
                    let len = emit::value(b, Prim::Length, &[a])?;
                    let z = emit::value(b, Prim::Zeros, &[len])?;
                    let t = emit::value(b, Prim::Zeros, &[len])?;
                    shadows.push(emit::value(b, Prim::Dual, &[z, t])?);
                }
                emit::zero_tangent(b, ty, p)?.unwrap_or_else(emit::unit)
            };
            args.push(emit::value(b, Prim::Dual, &[p, dir])?);
        }
        args.extend(shadows);
        args.push(emit::value(
            b,
            Prim::Dual,
            &[emit::f64c(1.0), emit::f64c(0.0)],
        )?);
        let r = b
            .invoke(rule, &args)?
            .map(Operand::Value)
            .ok_or_else(|| RuleError::Unsupported("the rule has no result".into()))?;
        let pr = emit::value(b, Prim::Primal, &[r])?;
        let tr = emit::value(b, Prim::Tangent, &[r, Operand::from(0i64)])?;
        let mut out = vec![emit::value(b, Prim::Getfield, &[pr, Operand::from(0i64)])?];
        let total: usize = params.iter().map(Type::cotangent_leaves).sum();
        for part in [pr, tr] {
            if total == 0 {
                break;
            }
            let cots = emit::value(b, Prim::Getfield, &[part, Operand::from(1i64)])?;
            let mut k = 0;
            for (i, ty) in params.iter().enumerate() {
                for _ in 0..ty.cotangent_leaves() {
                    if wrt.contains(&i) {
                        out.push(leaf(b, cots, k, total)?);
                    }
                    k += 1;
                }
            }
        }
        let t = emit::value(b, Prim::Tuple, &out)?;
        b.ret(t)?;
        Ok(())
    }

    /// The direction of an argument of type `ty` made of the next scalar
    /// (`scal`) and array (`arr`) parameters: a value of its tangent type.
    fn direction(
        &self,
        b: &mut FuncBuilder<'_>,
        ty: &Type,
        scal: &mut usize,
        arr: &mut usize,
    ) -> Result<Operand, RuleError> {
        match ty {
            Type::F64 => {
                *scal += 1;
                self.param(b, *scal - 1)
            }
            Type::Array(Scalar::F64) => {
                *arr += 1;
                self.param(b, *arr - 1)
            }
            Type::Tuple(elems) => {
                let mut parts = Vec::with_capacity(elems.len());
                for e in elems.iter() {
                    parts.push(if e.has_tangent() {
                        self.direction(b, e, scal, arr)?
                    } else {
                        emit::unit()
                    });
                }
                emit::value(b, Prim::Tuple, &parts)
            }
            _ => Ok(emit::unit()),
        }
    }
}

/// Leaf `k` of `total` f64 cotangents packed as the pullback packs them
/// (one f64 alone, a tuple otherwise).
pub(crate) fn leaf(
    b: &mut FuncBuilder<'_>,
    cots: Operand,
    k: usize,
    total: usize,
) -> Result<Operand, RuleError> {
    if total == 1 {
        return Ok(cots);
    }
    let k = i64::try_from(k).map_err(|_| RuleError::Unsupported("too many leaves".into()))?;
    emit::value(b, Prim::Getfield, &[cots, Operand::from(k)])
}

/// The `[f64]` arrays inside `op` (of type `ty`), depth-first.
pub(crate) fn array_leaves(
    b: &mut FuncBuilder<'_>,
    op: Operand,
    ty: &Type,
    out: &mut Vec<Operand>,
) -> Result<(), RuleError> {
    match ty {
        Type::Array(Scalar::F64) => out.push(op),
        Type::Tuple(elems) if ty.shadow_leaves() > 0 => {
            for (k, e) in elems.iter().enumerate() {
                if e.shadow_leaves() == 0 {
                    continue;
                }
                let k = i64::try_from(k)
                    .map_err(|_| RuleError::Unsupported("tuple too wide".into()))?;
                let field = emit::value(b, Prim::Getfield, &[op, Operand::from(k)])?;
                array_leaves(b, field, e, out)?;
            }
        }
        _ => {}
    }
    Ok(())
}
