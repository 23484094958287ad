//! The signatures a function's declared rules must have (`jvp @g`,
//! `vjp @h`; docs/rules.md, "Rules written in the language"), and the
//! verifier's check of them.
//!
//! For `@f(x1: T1, ..., xn: Tn) -> R` (only the arguments whose type has a
//! tangent, the *differentiable* ones, get tangents or cotangents):
//! - the jvp is `(x1: T1, ..., xn: Tn, dx_i: Ti', ...) -> (R, R')`, one
//!   tangent parameter `Ti'` (`Ti`'s tangent type) per differentiable
//!   argument, in order;
//! - the vjp is `(x1: T1, ..., xn: Tn, dy: R') -> C`, where C is the
//!   tangent type of the one differentiable argument, a tuple of them in
//!   order when there are several, `()` when there is none.
//!
//! R must have a tangent (a rule of a function without one has nothing to
//! say). Assumes nothing; guarantees a located error for a rule that does
//! not exist, names the function itself, or has another signature.

use super::Ctx;
use crate::{Func, Type};

/// The parameter and result types a jvp of `f` must have; `None` when `f`'s
/// result has no tangent.
pub fn jvp_signature(f: &Func) -> Option<(Vec<Type>, Type)> {
    let ret_t = f.ret.tangent()?;
    let params = param_types(f)?;
    let tangents: Vec<Type> = params
        .iter()
        .filter_map(tangent_of_differentiable)
        .collect();
    let mut all = params;
    all.extend(tangents);
    Some((all, Type::Tuple(vec![f.ret.clone(), ret_t].into())))
}

/// The parameter and result types a vjp of `f` must have; `None` when `f`'s
/// result has no tangent.
pub fn vjp_signature(f: &Func) -> Option<(Vec<Type>, Type)> {
    let ret_t = f.ret.tangent()?;
    let params = param_types(f)?;
    let mut cts: Vec<Type> = params
        .iter()
        .filter_map(tangent_of_differentiable)
        .collect();
    let result = match cts.len() {
        0 => Type::Unit,
        1 => cts.remove(0),
        _ => Type::Tuple(cts.into()),
    };
    let mut all = params;
    all.push(ret_t);
    Some((all, result))
}

/// The parameter types of `f`; `None` when a parameter record is invalid
/// (which the verifier reports elsewhere).
fn param_types(f: &Func) -> Option<Vec<Type>> {
    f.params
        .iter()
        .map(|&p| f.values.get(p).map(|d| d.ty.clone()))
        .collect()
}

/// `ty`'s tangent type when `ty` has a tangent.
fn tangent_of_differentiable(ty: &Type) -> Option<Type> {
    if ty.has_tangent() { ty.tangent() } else { None }
}

/// Checks the rules declared for the function being verified.
pub(super) fn check_declared_rules(cx: &mut Ctx<'_>) {
    let rules = cx.m.declared_rules(cx.id);
    type Signature = fn(&Func) -> Option<(Vec<Type>, Type)>;
    let checks: [(&str, _, Signature); 2] = [
        ("jvp", rules.jvp, jvp_signature),
        ("vjp", rules.vjp, vjp_signature),
    ];
    for (word, rule, signature) in checks {
        let Some(g) = rule else { continue };
        if param_types(cx.f).is_none() {
            // The parameter records are reported as they are.
            return;
        }
        let Some(func) = cx.m.get(g) else {
            cx.err_func(format!(
                "the {word} of @{} is not a function of the module",
                cx.f.name
            ));
            continue;
        };
        if g == cx.id {
            cx.err_func(format!("@{} cannot be its own {word}", cx.f.name));
            continue;
        }
        let Some((params, ret)) = signature(cx.f) else {
            cx.err_func(format!(
                "@{} has a {word} but its result type {} has no tangent",
                cx.f.name, cx.f.ret
            ));
            continue;
        };
        let Some(have) = param_types(func) else {
            cx.err_func(format!(
                "the {word} of @{} has invalid parameters",
                cx.f.name
            ));
            continue;
        };
        if have != params || func.ret != ret {
            cx.err_func(format!(
                "the {word} of @{} must have the signature ({}) -> {}, but @{} has ({}) -> {}",
                cx.f.name,
                list(&params),
                ret,
                func.name,
                list(&have),
                func.ret
            ));
        }
    }
}

fn list(tys: &[Type]) -> String {
    tys.iter()
        .map(Type::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
