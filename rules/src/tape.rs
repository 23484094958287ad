//! The forward rules of the tape primitives `push` and `pop`, which reverse
//! mode's pieces use (`@f.rev.fwd` pushes, the pullback pops): with them
//! forward mode applies to the pieces, and forward over reverse gives
//! Hessian-vector products (docs/reverse.md, "Forward over reverse").
//!
//! - `push(v)` with `v` of a type with a tangent pushes the dual
//!   `dual(v, t1, ..., tN)` on the tape of `dual<T, N>` (zero tangents built
//!   when `v` has none: a constant or an inactive value); a value without a
//!   tangent type (`i64`, `bool`, `[i64]`, ...) is pushed as it is, on its
//!   own tape.
//! - `pop() :: T` with T of a type with a tangent pops `dual<T, N>` and
//!   gives its primal and tangents; otherwise it pops T as it is.
//!
//! - `revfwd(f)` and `revback(f)` (a reverse rule's pieces looked up at run
//!   time, for a call through a function value) are function values, which
//!   have no tangent: their rule is the primal statement. The call through
//!   the piece then finds the piece's forward rule at run time (`frule`), so
//!   the run needs a rule provider that gives both reverse and forward rules.
//!
//! So tangents travel with their primals on one tape, and the tapes keep
//! their last-in-first-out order: every push and every pop of a function and
//! of the functions it calls go through these rules together (a derived rule
//! never mixes transformed and untransformed tape statements, because the
//! transform never runs a `push` or `pop` as a primal statement alone).
//!
//! Assumes calls shaped as the forward transform makes them (one argument
//! for `push`, none for `pop`, the popped type in [`FruleCall::result`]).
//! Guarantees: a call of another shape is a [`RuleError`], never a panic.
//! These rules are not checked by finite differences (`irad test-rules`
//! skips the AD primitives); their tests build a pushing and a popping
//! function and compare forward over reverse with the values expected
//! (passes' forward tests and tests/cli_hvp.rs).

use crate::emit::{self, Tangents, unit, value};
use crate::{FruleCall, FwdOut, Registry, RuleError};
use irad_ir::{FuncBuilder, Operand, Prim};
use smallvec::SmallVec;

/// Registers the frules of `push` and `pop`, and of `revfwd` and `revback`.
pub(crate) fn install(reg: &mut Registry) {
    reg.register_frule(Prim::Push, None, push);
    reg.register_frule(Prim::Pop, None, pop);
    for prim in [Prim::Revfwd, Prim::Revback] {
        reg.register_frule(
            prim,
            None,
            move |b: &mut FuncBuilder<'_>, call: &FruleCall<'_>| emit::primal_only(b, prim, call),
        );
    }
}

/// `push(v)`: pushes the dual of `v` (or `v` itself when its type has no
/// tangent).
fn push(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    let [arg] = call.args else {
        return Err(RuleError::Unsupported(format!(
            "`push` takes one argument, found {}",
            call.args.len()
        )));
    };
    let pushed = if arg.ty.has_tangent() {
        let tangents = match &arg.tangents {
            Some(ts) => ts.clone(),
            None => emit::zero_tangents(b, &arg.ty, arg.primal, call.lanes)?.ok_or_else(|| {
                RuleError::Unsupported(format!("no zero tangent of type {}", arg.ty))
            })?,
        };
        let mut parts: SmallVec<[Operand; 4]> = SmallVec::with_capacity(tangents.len() + 1);
        parts.push(arg.primal);
        parts.extend(tangents);
        value(b, Prim::Dual, &parts)?
    } else {
        arg.primal
    };
    emit::effect(b, Prim::Push, &[pushed])?;
    Ok(FwdOut {
        primal: unit(),
        tangents: None,
    })
}

/// `pop() :: T`: pops `dual<T, N>` and projects it (or pops T itself when T
/// has no tangent).
fn pop(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    if !call.args.is_empty() {
        return Err(RuleError::Unsupported(format!(
            "`pop` takes no argument, found {}",
            call.args.len()
        )));
    }
    let ty = call.result;
    if !ty.has_tangent() {
        let v = b.pop(ty.clone())?;
        return Ok(FwdOut {
            primal: Operand::Value(v),
            tangents: None,
        });
    }
    let d = Operand::Value(b.pop(ty.forward(call.lanes))?);
    let primal = value(b, Prim::Primal, &[d])?;
    let mut tangents = Tangents::with_capacity(call.lanes.count());
    for k in emit::lanes(call) {
        let k =
            i64::try_from(k).map_err(|_| RuleError::Unsupported("too many lanes".to_string()))?;
        tangents.push(value(b, Prim::Tangent, &[d, Operand::from(k)])?);
    }
    Ok(FwdOut {
        primal,
        tangents: Some(tangents),
    })
}
