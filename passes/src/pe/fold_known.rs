//! Folds statements whose result is known at compile time: the specialiser's
//! own constant evaluation, independent of the rewrite rules of the optimiser.
//!
//! Input: a verified function, and the lengths known for some array values
//! (the parameters a specialisation fixes the length of). Folded, each
//! replaced by its value everywhere and removed:
//! - a primitive call whose operands are all constants, when
//!   `irad_ir::interp::fold_prim` (the interpreter's evaluation, so the value
//!   is bit-identical) gives a value: calls that would fail at run time
//!   (`idiv` by zero, `fptosi` of NaN, ...) and calls with effects stay;
//! - `select(true/false, a, b)`, `getfield` of a `tuple` statement;
//! - `length(a)` of an array of known length: a known parameter, the result
//!   of `alloc(n)` or `zeros(n)` with a constant `n` (the allocation itself
//!   stays: it can still fail), or a `copy` of such an array.
//!
//! Output: none of these is left; every use names the value. Only statements
//! without effects are removed. Sweeps until nothing folds (each sweep removes
//! at least one statement). Idempotent.

use super::substitute;
use irad_ir::interp::{MAX_ARRAY_LEN, fold_prim};
use irad_ir::{Const, Func, Inst, InstKind, Operand, Prim, Value, ValueDef};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// Folds every statement of `func` whose value is known; `lengths` gives the
/// known lengths of array values. Returns whether anything folded.
pub fn fold_known(func: &mut Func, lengths: &HashMap<Value, i64>) -> bool {
    let mut changed = false;
    loop {
        let mut subst: HashMap<Value, Operand> = HashMap::default();
        let mut removed: HashSet<Inst> = HashSet::default();
        for &block in &func.layout {
            for &inst in &func.blocks[block].insts {
                let data = &func.insts[inst];
                let Some(result) = data.result else { continue };
                if let Some(op) = known_result(func, &data.kind, lengths, &subst) {
                    subst.insert(result, op);
                    removed.insert(inst);
                }
            }
        }
        if removed.is_empty() {
            return changed;
        }
        changed = true;
        for i in 0..func.layout.len() {
            let block = func.layout[i];
            func.blocks[block].insts.retain(|i| !removed.contains(i));
        }
        substitute(func, &subst);
    }
}

/// The value of a statement of kind `kind`, if known; operands are read
/// through the folds of this sweep so far.
fn known_result(
    func: &Func,
    kind: &InstKind,
    lengths: &HashMap<Value, i64>,
    subst: &HashMap<Value, Operand>,
) -> Option<Operand> {
    let InstKind::Prim { prim, args } = kind else {
        return None;
    };
    let args: Vec<Operand> = args.iter().map(|op| super::resolve(*op, subst)).collect();
    match (prim, args.as_slice()) {
        (Prim::Select, [Operand::Const(Const::Bool(c)), a, b]) => Some(if *c { *a } else { *b }),
        (Prim::Getfield, [Operand::Value(t), Operand::Const(Const::I64(k))]) => {
            let InstKind::Prim {
                prim: Prim::Tuple,
                args: elems,
            } = def_kind(func, *t)?
            else {
                return None;
            };
            let op = *elems.get(usize::try_from(*k).ok()?)?;
            Some(super::resolve(op, subst))
        }
        (Prim::Length, [Operand::Value(a)]) => {
            known_length(func, *a, lengths, subst).map(|n| Operand::Const(Const::I64(n)))
        }
        _ => {
            let consts: Vec<Const> = args
                .iter()
                .map(|op| match op {
                    Operand::Const(c) => Some(*c),
                    Operand::Value(_) => None,
                })
                .collect::<Option<_>>()?;
            fold_prim(*prim, &consts).map(Operand::Const)
        }
    }
}

/// The length of array value `a`, if known; follows `copy` (a bounded number
/// of times: the function's value count).
fn known_length(
    func: &Func,
    a: Value,
    lengths: &HashMap<Value, i64>,
    subst: &HashMap<Value, Operand>,
) -> Option<i64> {
    let mut a = a;
    for _ in 0..func.values.len() {
        if let Some(&n) = lengths.get(&a) {
            return Some(n);
        }
        let InstKind::Prim { prim, args } = def_kind(func, a)? else {
            return None;
        };
        let arg = super::resolve(*args.first()?, subst);
        match (prim, arg) {
            (Prim::Alloc | Prim::Zeros, Operand::Const(Const::I64(n)))
                if (0..=MAX_ARRAY_LEN as i64).contains(&n) =>
            {
                return Some(n);
            }
            (Prim::Copy, Operand::Value(b)) => a = b,
            _ => return None,
        }
    }
    None
}

/// The kind of the statement that defines `v`, if a statement does.
fn def_kind(func: &Func, v: Value) -> Option<&InstKind> {
    match func.values.get(v)?.def {
        ValueDef::Inst(inst) => func.insts.get(inst).map(|d| &d.kind),
        ValueDef::Param(_) => None,
    }
}
