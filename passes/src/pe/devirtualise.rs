//! Devirtualisation: `call %f(args)` whose callee is known to be one function
//! constant becomes `invoke @g(args)`, or `call prim(args)` for a primitive
//! function value.
//!
//! Input: a verified function. The callee is known when every definition it
//! can come from is the same constant: it is a phi whose entries (ignoring
//! entries naming the phi itself, and through other phis, loops included) all
//! carry one function constant `@g`, or a `select` whose operands do (or whose
//! condition is a constant). This is an optimistic analysis (phis start
//! unknown and are lowered to "many" when two constants or an unknown value
//! meet), so a function carried around a loop is found. Output: no dynamic
//! call has such a callee; the phis that carried it stay (unused ones are
//! removed by `remove_trivial_phis`). Changes no control flow. Idempotent.

use super::call_of_const;
use irad_ir::{Const, Func, FuncRef, InstKind, Module, Operand, Prim, Type, Value};
use rustc_hash::FxHashMap as HashMap;

/// Devirtualises every function of `module`; returns whether any call changed.
pub fn devirtualise(module: &mut Module) -> bool {
    let ids: Vec<_> = module.func_ids().collect();
    let mut changed = false;
    for id in ids {
        changed |= devirtualise_func(&mut module[id]);
    }
    changed
}

/// Devirtualises the dynamic calls of `func` whose callee is one known
/// function constant; returns whether any call changed.
pub fn devirtualise_func(func: &mut Func) -> bool {
    let known = known_functions(func);
    let mut changed = false;
    for i in 0..func.layout.len() {
        let block = func.layout[i];
        for j in 0..func.blocks[block].insts.len() {
            let inst = func.blocks[block].insts[j];
            let kind = &mut func.insts[inst].kind;
            let InstKind::CallValue { callee, args } = kind else {
                continue;
            };
            let Some(Lattice::One(f)) = known.get(callee) else {
                continue;
            };
            if let Some(call) = call_of_const(*f, std::mem::take(args)) {
                *kind = call;
                changed = true;
            }
        }
    }
    changed
}

/// What the analysis knows of a value of function type.
#[derive(Copy, Clone, PartialEq, Debug)]
enum Lattice {
    /// No definition seen yet (optimistic start of phis and selects).
    Unknown,
    /// Always this function.
    One(FuncRef),
    /// Possibly several functions, or one not known at compile time.
    Many,
}

fn meet(a: Lattice, b: Lattice) -> Lattice {
    match (a, b) {
        (Lattice::Unknown, x) | (x, Lattice::Unknown) => x,
        (Lattice::One(f), Lattice::One(g)) if f == g => a,
        _ => Lattice::Many,
    }
}

/// The known function of each phi and select of function type in `func`'s
/// layout, iterated to a fixpoint (each value only goes down the lattice, so
/// it ends after at most two changes per value).
fn known_functions(func: &Func) -> HashMap<Value, Lattice> {
    let mut lat: HashMap<Value, Lattice> = HashMap::default();
    let mut defs = Vec::new();
    for &block in &func.layout {
        for &inst in &func.blocks[block].insts {
            let data = &func.insts[inst];
            let Some(result) = data.result else { continue };
            if !matches!(func.values[result].ty, Type::Func(_)) {
                continue;
            }
            let tracked = matches!(
                data.kind,
                InstKind::Phi { .. }
                    | InstKind::Prim {
                        prim: Prim::Select,
                        ..
                    }
            );
            if tracked {
                lat.insert(result, Lattice::Unknown);
                defs.push((result, inst));
            }
        }
    }
    let of = |lat: &HashMap<Value, Lattice>, op: &Operand| match op {
        Operand::Const(Const::Func(f)) => Lattice::One(*f),
        Operand::Const(_) => Lattice::Many,
        Operand::Value(v) => lat.get(v).copied().unwrap_or(Lattice::Many),
    };
    let mut changed = true;
    while changed {
        changed = false;
        for &(result, inst) in &defs {
            let new = match &func.insts[inst].kind {
                InstKind::Phi { entries } => entries
                    .iter()
                    .filter(|(_, op)| *op != Operand::Value(result))
                    .fold(Lattice::Unknown, |acc, (_, op)| meet(acc, of(&lat, op))),
                InstKind::Prim { args, .. } => match args.as_slice() {
                    [Operand::Const(Const::Bool(true)), a, _] => of(&lat, a),
                    [Operand::Const(Const::Bool(false)), _, b] => of(&lat, b),
                    [_, a, b] => meet(of(&lat, a), of(&lat, b)),
                    _ => Lattice::Many,
                },
                _ => Lattice::Many,
            };
            let old = lat.get(&result).copied().unwrap_or(Lattice::Many);
            let new = meet(old, new);
            if new != old {
                lat.insert(result, new);
                changed = true;
            }
        }
    }
    lat
}
