//! Type checks: primitive calls through the primitive table, `invoke` and
//! dynamic calls against the callee's signature, phi entries, the `gotoifnot`
//! condition, `return`, function constants and the nesting limit of types.
//!
//! Assumes `ssa::compute_defs` has run before `check_inst` and `check_term`.
//! A check whose operand types are unknown (invalid or undefined values, bad
//! constants, types nested too deeply to compare safely) is skipped, so one
//! mistake reports once. Types are compared and printed only when they nest at
//! most `MAX_NESTING + 1` deep, so nothing here can overflow the stack.

use super::{At, Ctx, Slot};
use crate::MAX_NESTING;
use crate::func::{
    Const, FuncRef, Inst, InstKind, Operand, Terminator, Value, const_scalar, const_type,
};
use crate::types::Type;
use smallvec::SmallVec;
use std::borrow::Cow;

/// Checks that the parameter and result types nest at most `MAX_NESTING` deep.
pub(crate) fn check_signature(ctx: &mut Ctx) {
    for (n, &v) in ctx.f.params.iter().enumerate() {
        let Some(data) = ctx.f.values.get(v) else {
            continue;
        };
        let depth = data.ty.depth();
        if depth > MAX_NESTING {
            let msg = format!(
                "type of parameter {} ({}) nests {depth} deep: the limit is {MAX_NESTING}",
                n + 1,
                ctx.value_name(v)
            );
            ctx.err_func(msg);
        }
    }
    let depth = ctx.f.ret.depth();
    if depth > MAX_NESTING {
        let msg = format!("result type nests {depth} deep: the limit is {MAX_NESTING}");
        ctx.err_func(msg);
    }
}

/// What a statement's result is: none (type `()`), a value of known type, or
/// a value whose type cannot be checked.
enum Res<'f> {
    None,
    Typed(Value, &'f Type),
    Unknown,
}

/// Type-checks statement `inst` at `slot`.
pub(crate) fn check_inst(ctx: &mut Ctx, slot: Slot, inst: Inst) {
    let f = ctx.f;
    let Some(data) = f.insts.get(inst) else {
        return;
    };
    let at = At::Inst(slot, inst);
    let res = match data.result {
        None => Res::None,
        Some(r) => match f.values.get(r) {
            None => Res::Unknown,
            Some(_) if !ctx.defs.is_shallow(r) => {
                let depth = f.values.get(r).map_or(0, |d| d.ty.depth());
                let msg = format!(
                    "type of {} nests {depth} deep: the limit is {MAX_NESTING}",
                    ctx.value_name(r)
                );
                ctx.err_at(at, msg);
                Res::Unknown
            }
            Some(vd) => Res::Typed(r, &vd.ty),
        },
    };
    match &data.kind {
        InstKind::Prim { prim, args } => {
            if fixed_sig_holds(ctx, *prim, args, &res) {
                return;
            }
            let types = operand_types(ctx, at, args);
            let annot = match res {
                Res::Typed(_, ty) => Some(ty),
                _ => None,
            };
            if matches!(res, Res::Unknown) && matches!(prim, crate::Prim::Alloc | crate::Prim::Pop)
            {
                return;
            }
            let Some(types) = types else {
                return;
            };
            let field = match args.get(1) {
                Some(Operand::Const(Const::I64(k))) => Some(*k),
                _ => None,
            };
            match prim.result_type(&types, field, annot) {
                Ok(want) => check_result(ctx, at, &format_args!("`{prim}`"), &want, &res),
                Err(msg) => ctx.err_at(at, msg),
            }
        }
        InstKind::Invoke { func, args } => {
            let types = each_operand_type(ctx, at, args);
            let Some(callee) = ctx.m.get(*func) else {
                let msg = format!("invoke of invalid function handle {}", func.as_u32());
                ctx.err_at(at, msg);
                return;
            };
            // The callee's own verification reports a bad signature; here it
            // only makes the checks that depend on it unknown.
            let params: smallvec::SmallVec<[Option<&Type>; 4]> = callee
                .params
                .iter()
                .map(|&p| callee.values.get(p).map(|d| &d.ty).filter(|t| shallow(t)))
                .collect();
            let ret = Some(&callee.ret).filter(|t| shallow(t));
            let what = format_args!("@{}", callee.name);
            check_call(ctx, at, &what, &params, ret, &types, &res);
        }
        InstKind::CallValue { callee, args } => {
            let types = each_operand_type(ctx, at, args);
            let Some(callee_ty) = ctx.defs.known_type(f, *callee) else {
                return;
            };
            let Type::Func(sig) = callee_ty else {
                let msg = format!(
                    "called value {} has type {callee_ty}: expected a function type",
                    ctx.value_name(*callee)
                );
                ctx.err_at(at, msg);
                return;
            };
            let params: Vec<Option<&Type>> = sig.params.iter().map(Some).collect();
            let what = ctx.value_name(*callee);
            check_call(
                ctx,
                at,
                &what.as_str(),
                &params,
                Some(&sig.ret),
                &types,
                &res,
            );
        }
        InstKind::Phi { entries } => {
            let want: &Type = match res {
                Res::None => &Type::Unit,
                Res::Typed(_, ty) => ty,
                Res::Unknown => return,
            };
            for (pred, op) in entries {
                let Some(found) = operand_type(ctx, at, op) else {
                    continue;
                };
                if *found != *want {
                    let msg = format!(
                        "phi entry for {} has type {found}, expected {want}",
                        ctx.block_name(*pred)
                    );
                    ctx.err_at(at, msg);
                }
            }
        }
    }
}

/// Type-checks the terminator of the block at layout index `bi`.
pub(crate) fn check_term(ctx: &mut Ctx, bi: u32) {
    let Some(data) = ctx.f.blocks.get(ctx.cfg.layout[bi as usize]) else {
        return;
    };
    let at = At::Term(bi);
    match &data.term {
        Some(Terminator::GotoIfNot { cond, .. }) => {
            if let Some(ty) = operand_type(ctx, at, cond)
                && *ty != Type::Bool
            {
                let msg = format!("gotoifnot condition must be bool, found {ty}");
                ctx.err_at(at, msg);
            }
        }
        Some(Terminator::Switch { index, .. }) => {
            if let Some(ty) = operand_type(ctx, at, index)
                && *ty != Type::I64
            {
                let msg = format!("switch index must be i64, found {ty}");
                ctx.err_at(at, msg);
            }
        }
        Some(Terminator::Return(op)) => {
            let ret = &ctx.f.ret;
            if let Some(ty) = operand_type(ctx, at, op)
                && shallow(ret)
                && *ty != *ret
            {
                let msg = format!("return value has type {ty}, but the function returns {ret}");
                ctx.err_at(at, msg);
            }
        }
        Some(Terminator::Goto(_)) | None => {}
    }
}

/// Checks arity, argument types and result type of a call of `what`; unknown
/// parameter, argument or result types skip their check.
fn check_call(
    ctx: &mut Ctx,
    at: At,
    what: &dyn std::fmt::Display,
    params: &[Option<&Type>],
    ret: Option<&Type>,
    args: &[Option<Cow<Type>>],
    res: &Res,
) {
    if params.len() != args.len() {
        let msg = format!(
            "{what} takes {} argument{}, found {}",
            params.len(),
            if params.len() == 1 { "" } else { "s" },
            args.len()
        );
        ctx.err_at(at, msg);
        return;
    }
    for (i, (p, a)) in params.iter().zip(args).enumerate() {
        if let (Some(p), Some(a)) = (p, a)
            && **p != **a
        {
            let msg = format!("argument {} of {what} must be {p}, found {a}", i + 1);
            ctx.err_at(at, msg);
        }
    }
    if let Some(ret) = ret {
        check_result(ctx, at, what, ret, res);
    }
}

/// Checks that the statement's result has the type `want` that `what` returns.
fn check_result(ctx: &mut Ctx, at: At, what: &dyn std::fmt::Display, want: &Type, res: &Res) {
    match res {
        Res::None if *want != Type::Unit => {
            let msg = format!("{what} returns {want}, but the statement has no result");
            ctx.err_at(at, msg);
        }
        Res::Typed(r, ty) if *ty != want => {
            let msg = format!(
                "result {} has type {ty}, expected {want} as returned by {what}",
                ctx.value_name(*r)
            );
            ctx.err_at(at, msg);
        }
        _ => {}
    }
}

/// Whether `prim` has a fixed scalar signature that `args` and `res` meet
/// exactly (the statement is well typed); when not, the general check below
/// runs and reports what is wrong. For the common statement (`mul` of two
/// f64 values) it spares gathering the operand types.
fn fixed_sig_holds(ctx: &Ctx, prim: crate::Prim, args: &[Operand], res: &Res) -> bool {
    let (Some((params, ret)), Res::Typed(_, ty)) = (prim.fixed_sig(), res) else {
        return false;
    };
    **ty == ret.ty()
        && params.len() == args.len()
        && params.iter().zip(args).all(|(p, a)| match a {
            Operand::Value(v) => ctx.defs.known_type(ctx.f, *v) == Some(&p.ty()),
            Operand::Const(c) => const_scalar(c) == Some(*p),
        })
}

/// The types of `args`; `None` when any is unknown. Every operand is looked
/// at, so each bad constant is reported.
fn operand_types(ctx: &mut Ctx, at: At, args: &[Operand]) -> Option<SmallVec<[Type; 4]>> {
    let types = each_operand_type(ctx, at, args);
    types.into_iter().map(|t| t.map(Cow::into_owned)).collect()
}

/// The type of each of `args`, `None` where unknown.
fn each_operand_type<'f>(
    ctx: &mut Ctx<'f>,
    at: At,
    args: &[Operand],
) -> SmallVec<[Option<Cow<'f, Type>>; 4]> {
    // Inline: the verifier runs this for every statement.
    args.iter().map(|op| operand_type(ctx, at, op)).collect()
}

/// The type of `op`, reporting bad function constants; `None` when unknown.
fn operand_type<'f>(ctx: &mut Ctx<'f>, at: At, op: &Operand) -> Option<Cow<'f, Type>> {
    match op {
        Operand::Value(v) => ctx.defs.known_type(ctx.f, *v).map(Cow::Borrowed),
        Operand::Const(c @ Const::Func(FuncRef::User(id))) => {
            if ctx.m.get(*id).is_none() {
                let msg = format!(
                    "function constant names invalid function handle {}",
                    id.as_u32()
                );
                ctx.err_at(at, msg);
                return None;
            }
            // A callee with a signature too deep is reported by its own verification.
            const_type(c, ctx.m)
                .filter(|t| t.depth() <= MAX_NESTING + 1)
                .map(Cow::Owned)
        }
        Operand::Const(Const::Func(FuncRef::Prim(p))) => match p.fn_type() {
            Some(ty) => Some(Cow::Owned(ty)),
            None => {
                let msg = p.value_error();
                ctx.err_at(at, msg);
                None
            }
        },
        Operand::Const(c) => const_type(c, ctx.m).map(Cow::Owned),
    }
}

fn shallow(ty: &Type) -> bool {
    ty.depth() <= MAX_NESTING
}
