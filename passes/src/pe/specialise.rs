//! Specialisation: a copy of a function for arguments known at compile time.
//!
//! Input: a verified module, a function `@f` of it and what is known of each
//! parameter ([`Known`]): nothing, a constant (f64, i64, bool, `()`, a
//! function value, or a tuple of those), or for an array parameter its length.
//! Output: a new function of the module, `@f.spec` (or `@f.spec.2`,
//! `@f.spec.3`, ... when the name is taken; see [`specialise_name`]), with
//! `@f`'s signature: it keeps every parameter, so callers pass the same
//! arguments, but ignores the values of the known ones, which are constants in
//! its body (a known tuple is built once at the entry); `length` of an array
//! of known length is that constant. On arguments that agree with what is
//! known it computes exactly what `@f` computes (values and run-time errors);
//! on others its result is unspecified but still safe (every run-time check
//! stays). Then, in rounds until a round changes nothing: known statements
//! folded (`fold_known`), constant branches folded, unreachable blocks
//! dropped, trivial phis removed, dynamic calls devirtualised, known loops
//! unrolled, small callees inlined; finally straight-line chains of blocks
//! are merged (`merge_blocks`) and the normalisation passes
//! (`simplify`, `split_critical_edges`, `single_return`) run on the new
//! function. Needing more than [`Limits::fuel`] rounds is an error, never a
//! hang; growth is bounded by [`Limits`]. The module is verified after.
//! Other functions of the module are not changed.

use super::{Limits, devirtualise_func, fold_known, inline_into, merge_blocks, unroll_func};
use crate::normalise::{
    fold_constant_branches, remove_trivial_phis, remove_unreachable_blocks, single_return,
    split_critical_edges, uniform_constant_operands,
};
use irad_ir::interp::{MAX_ARRAY_LEN, Val};
use irad_ir::verify::verify_module;
use irad_ir::{
    Const, Diagnostic, Func, FuncId, Inst, InstData, InstKind, Location, Module, Operand, Prim,
    Terminator, Type, Value, ValueData, ValueDef,
};
use rustc_hash::FxHashMap as HashMap;
use std::fmt;

/// What is known of one parameter at compile time: the type the `--known`
/// text is read into ([`irad_ir::text::parse_known`]), under its name here.
pub use irad_ir::text::KnownArg as Known;

/// A specialisation that cannot be made: a `known` list that does not fit the
/// function, or a function that did not settle within the fuel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeError {
    /// Where: the function (and the statement, for a verification failure).
    pub loc: Location,
    /// What: lowercase, no final full stop.
    pub msg: String,
}

impl Diagnostic for PeError {
    fn location(&self) -> &Location {
        &self.loc
    }
    fn message(&self) -> &str {
        &self.msg
    }
}

impl fmt::Display for PeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&irad_ir::loc::with_place(&self.msg, &self.loc))
    }
}

impl std::error::Error for PeError {}

impl PeError {
    /// An internal error (a bug of partial evaluation, not a fault of the
    /// request) at `loc`: the message `internal error: {what}`.
    pub fn internal(loc: Location, what: impl fmt::Display) -> PeError {
        PeError {
            loc,
            msg: irad_ir::interp::internal_message(what),
        }
    }

    /// Whose fault it is: [`irad_ir::interp::ErrorKind::Internal`] for one
    /// made by [`PeError::internal`] (the message starts with `internal
    /// error: `), else [`irad_ir::interp::ErrorKind::User`].
    pub fn kind(&self) -> irad_ir::interp::ErrorKind {
        irad_ir::interp::ErrorKind::of_message(&self.msg)
    }
}

/// Specialises function `f` of `module` on `known` (one entry per parameter)
/// with the default [`Limits`]; returns the new function.
pub fn specialise(module: &mut Module, f: FuncId, known: &[Known]) -> Result<FuncId, PeError> {
    specialise_with(module, f, known, &Limits::default())
}

/// [`specialise`] with explicit limits.
pub fn specialise_with(
    module: &mut Module,
    f: FuncId,
    known: &[Known],
    limits: &Limits,
) -> Result<FuncId, PeError> {
    let Some(func) = module.get(f) else {
        return Err(PeError {
            loc: Location::default(),
            msg: format!("no function {f:?} in the module"),
        });
    };
    let at_func = Location {
        func: Some(func.name.as_str().into()),
        pos: func.pos,
        ..Location::default()
    };
    let fail = |msg: String| PeError {
        loc: at_func.clone(),
        msg,
    };
    check_known(module, func, known).map_err(fail)?;
    let mut copy = func.clone();
    copy.name = specialise_name(module, &func.name);
    let name = copy.name.clone();
    let id = module
        .add_func(copy)
        .map_err(|e| fail(format!("cannot add @{name}: {e}")))?;

    let (lengths, prelude) = bind_known(&mut module[id], known);
    let mut settled = false;
    for _ in 0..limits.fuel {
        let mut changed = false;
        {
            let func = &mut module[id];
            changed |= fold_known(func, &lengths);
            changed |= fold_constant_branches(func);
            changed |= remove_unreachable_blocks(func);
            changed |= remove_trivial_phis(func);
            changed |= devirtualise_func(func);
            changed |= unroll_func(func, limits);
        }
        changed |= inline_into(module, id, limits);
        if !changed {
            settled = true;
            break;
        }
    }
    if !settled {
        return Err(fail(format!(
            "specialising @{} did not settle within {} rounds (the fuel limit)",
            module[f].name, limits.fuel
        )));
    }
    let func = &mut module[id];
    drop_unused(func, &prelude);
    merge_blocks(func);
    // The normalisation pipeline on the new function alone: `simplify` to
    // its fixpoint (which the loop above has nearly reached), then the CFG
    // passes that run once.
    let mut rounds = 0;
    loop {
        let changed = uniform_constant_operands(func)
            | fold_constant_branches(func)
            | remove_unreachable_blocks(func)
            | remove_trivial_phis(func);
        rounds += 1;
        if !changed || rounds > limits.max_func_size {
            break;
        }
    }
    split_critical_edges(func);
    single_return(func);
    verify_module(module).map_err(|errors| {
        let first = errors.first();
        PeError::internal(
            first.map_or(at_func.clone(), |e| e.loc.clone()),
            format_args!(
                "the specialised function does not verify: {}",
                first.map_or(String::new(), |e| e.msg.clone())
            ),
        )
    })?;
    Ok(id)
}

/// The name of the specialisation of `@name`: `name.spec`, or `name.spec.N`
/// with the smallest N from 2 whose name no function of `module` has. A valid
/// identifier whenever `name` is one.
pub fn specialise_name(module: &Module, name: &str) -> String {
    let base = format!("{name}.spec");
    if module.by_name(&base).is_none() {
        return base;
    }
    (2..)
        .map(|n| format!("{base}.{n}"))
        .find(|cand| module.by_name(cand).is_none())
        .unwrap_or(base)
}

/// Checks that `known` fits `func`'s parameters.
fn check_known(module: &Module, func: &Func, known: &[Known]) -> Result<(), String> {
    let params = func.param_types();
    if params.len() != known.len() {
        return Err(format!(
            "@{} takes {} argument{}, but {} are given as known or `_`",
            func.name,
            params.len(),
            if params.len() == 1 { "" } else { "s" },
            known.len()
        ));
    }
    for (i, (ty, k)) in params.iter().zip(known).enumerate() {
        match k {
            Known::Unknown => {}
            Known::Value(v) => {
                if !constant_value(v) {
                    return Err(format!(
                        "argument {} of @{}: only f64, i64, bool, (), function values and tuples of them can be known values",
                        i + 1,
                        func.name
                    ));
                }
                if !v.has_type(ty, module) {
                    return Err(format!(
                        "argument {} of @{} must be {ty}, found {}",
                        i + 1,
                        func.name,
                        v.type_text(module)
                    ));
                }
            }
            Known::Length(n) => {
                if !matches!(ty, Type::Array(_)) {
                    return Err(format!(
                        "argument {} of @{} is {ty}, not an array: only arrays have a known length",
                        i + 1,
                        func.name
                    ));
                }
                if *n > MAX_ARRAY_LEN {
                    return Err(format!(
                        "known length {n} of argument {} exceeds the array limit of {MAX_ARRAY_LEN} elements",
                        i + 1
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Whether `v` is a value that can be a constant of the IR (tuples are
/// built by a statement). Iterative.
fn constant_value(v: &Val) -> bool {
    let mut work = vec![v];
    while let Some(v) = work.pop() {
        match v {
            Val::F64(_) | Val::I64(_) | Val::Bool(_) | Val::Unit | Val::Func(_) => {}
            Val::Tuple(elems) => work.extend(elems.iter()),
            Val::Array(_) | Val::Dual(_) | Val::Sparse(_) => return false,
        }
    }
    true
}

/// Replaces the uses of known parameters of `func` by their values; returns
/// the known lengths of array parameters and the `tuple` statements made for
/// known tuples.
fn bind_known(func: &mut Func, known: &[Known]) -> (HashMap<Value, i64>, Vec<Inst>) {
    let mut subst: HashMap<Value, Operand> = HashMap::default();
    let mut lengths = HashMap::default();
    let mut prelude = Vec::new();
    for (&param, k) in func.params.clone().iter().zip(known) {
        match k {
            Known::Unknown => {}
            Known::Value(v) => {
                let ty = func.values[param].ty.clone();
                let op = materialise(func, v, &ty, &mut prelude);
                subst.insert(param, op);
            }
            Known::Length(n) => {
                lengths.insert(param, i64::try_from(*n).unwrap_or(i64::MAX));
            }
        }
    }
    if let Some(entry) = func.entry() {
        // The entry has no predecessors, so no phis: the tuples go first.
        let insts = &mut func.blocks[entry].insts;
        insts.splice(0..0, prelude.iter().copied());
    }
    super::substitute(func, &subst);
    (lengths, prelude)
}

/// Removes the statements of `made` (the known tuples, built by `bind_known`)
/// whose results nothing uses any more, outermost first; they have no
/// effect. Other dead code is left to the optimiser's `dce`.
fn drop_unused(func: &mut Func, made: &[Inst]) {
    for &inst in made.iter().rev() {
        let Some(result) = func.insts[inst].result else {
            continue;
        };
        let used = func.layout.iter().any(|&b| {
            let data = &func.blocks[b];
            data.insts
                .iter()
                .any(|&i| i != inst && uses(&func.insts[i].kind, result))
                || data.term.as_ref().is_some_and(|t| match t {
                    Terminator::GotoIfNot { cond: op, .. }
                    | Terminator::Switch { index: op, .. }
                    | Terminator::Return(op) => *op == Operand::Value(result),
                    Terminator::Goto(_) => false,
                })
        });
        if !used {
            for &b in &func.layout {
                func.blocks[b].insts.retain(|&i| i != inst);
            }
        }
    }
}

/// Whether a statement of kind `kind` uses `v`.
fn uses(kind: &InstKind, v: Value) -> bool {
    let op = Operand::Value(v);
    match kind {
        InstKind::Prim { args, .. } | InstKind::Invoke { args, .. } => args.contains(&op),
        InstKind::CallValue { callee, args } => *callee == v || args.contains(&op),
        InstKind::Phi { entries } => entries.iter().any(|(_, o)| *o == op),
    }
}

/// The operand for constant `v` of type `ty`: a constant, or for a tuple the
/// result of `tuple` statements appended to `prelude` (elements first).
fn materialise(func: &mut Func, v: &Val, ty: &Type, prelude: &mut Vec<irad_ir::Inst>) -> Operand {
    match v {
        Val::F64(x) => Operand::Const(Const::F64(*x)),
        Val::I64(x) => Operand::Const(Const::I64(*x)),
        Val::Bool(x) => Operand::Const(Const::Bool(*x)),
        Val::Unit => Operand::Const(Const::Unit),
        Val::Func(f) => Operand::Const(Const::Func(*f)),
        Val::Tuple(elems) => {
            let Type::Tuple(tys) = ty else {
                // `check_known` checked the value against the type.
                return Operand::Const(Const::Unit);
            };
            let args: irad_ir::func::Args = elems
                .iter()
                .zip(tys.iter())
                .map(|(e, t)| materialise(func, e, t, prelude))
                .collect();
            let inst = func.insts.push(InstData {
                kind: InstKind::Prim {
                    prim: Prim::Tuple,
                    args,
                },
                result: None,
                pos: None,
            });
            let r = func.values.push(ValueData {
                ty: ty.clone(),
                def: ValueDef::Inst(inst),
                name: None,
            });
            func.insts[inst].result = Some(r);
            prelude.push(inst);
            Operand::Value(r)
        }
        // Rejected by `check_known`.
        Val::Array(_) | Val::Dual(_) | Val::Sparse(_) => Operand::Const(Const::Unit),
    }
}
