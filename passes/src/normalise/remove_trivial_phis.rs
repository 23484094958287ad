//! Removes trivial phis: a phi whose entries all carry one operand, apart from
//! entries that name the phi itself.
//!
//! Input: a verified function. Output: no phi of a layout block is trivial,
//! except (a) a phi with no entries or only self-entries (a block with no
//! predecessors, or an unreachable cycle: nothing to replace it by), and (b) a
//! phi whose operand is a constant while the phi is the callee of a dynamic
//! call (`call %p(...)` needs a value). Every use of a removed phi (operands,
//! phi entries, callees, terminators) now names its operand, which dominates
//! every place the phi did. Removing one phi can make another trivial; the
//! pass repeats until none is. It can substitute a constant into a `gotoifnot`
//! or `switch`, or into the first operand of a primitive call, undoing what
//! `fold_constant_branches` and `uniform_constant_operands` guarantee; the
//! normalisation pipeline therefore runs it with them in the group `simplify`,
//! to a fixpoint. Idempotent on its own.

use super::phis;
use irad_ir::entity::{EntitySet, SecondaryMap};
use irad_ir::{Func, Inst, InstKind, Operand, Terminator, Value};
use rustc_hash::FxHashMap as HashMap;

/// Replaces every trivial phi by its operand; returns whether there were any.
pub fn remove_trivial_phis(func: &mut Func) -> bool {
    let mut changed = false;
    loop {
        let callees = callees(func);
        let mut found: HashMap<Value, (Inst, Operand)> = HashMap::default();
        for &block in &func.layout {
            for inst in phis(func, block) {
                let data = &func.insts[inst];
                let (Some(result), InstKind::Phi { entries }) = (data.result, &data.kind) else {
                    continue;
                };
                if let Some(op) = single_operand(result, entries.iter().map(|(_, op)| *op)) {
                    if matches!(op, Operand::Const(_)) && callees.contains(result) {
                        continue;
                    }
                    found.insert(result, (inst, op));
                }
            }
        }
        // A phi whose operand is another phi removed in this sweep waits for
        // the next sweep, so no replacement names a removed value.
        let ready: HashMap<Value, (Inst, Operand)> = found
            .iter()
            .filter(|(_, (_, op))| !matches!(op, Operand::Value(v) if found.contains_key(v)))
            .map(|(&v, &x)| (v, x))
            .collect();
        if ready.is_empty() {
            return changed;
        }
        changed = true;
        let removed: EntitySet<Inst> = ready.values().map(|&(inst, _)| inst).collect();
        let mut subst: SecondaryMap<Value, Option<Operand>> = SecondaryMap::new();
        for (&v, &(_, op)) in &ready {
            subst.set(v, Some(op));
        }
        remove_and_substitute(func, &removed, &subst);
    }
}

/// Takes the statements `removed` out of `func`'s blocks and replaces, in
/// every statement and terminator left, each value `subst` maps (shared
/// with forward mode's split of dual phis).
pub(crate) fn remove_and_substitute(
    func: &mut Func,
    removed: &EntitySet<Inst>,
    subst: &SecondaryMap<Value, Option<Operand>>,
) {
    let layout = func.layout.clone();
    for block in layout {
        func.blocks[block].insts.retain(|&i| !removed.contains(i));
        for inst in func.blocks[block].insts.clone() {
            replace_in_inst(&mut func.insts[inst].kind, subst);
        }
        if let Some(op) = func.blocks[block]
            .term
            .as_mut()
            .and_then(Terminator::operand_mut)
        {
            replace(op, subst);
        }
    }
}

/// The one operand of a phi's entries other than the phi itself, if there is
/// one (shared with the optimiser's `phi-simplify`).
pub(crate) fn single_operand(result: Value, ops: impl Iterator<Item = Operand>) -> Option<Operand> {
    let mut single = None;
    for op in ops {
        if op == Operand::Value(result) {
            continue;
        }
        match single {
            None => single = Some(op),
            Some(s) if s == op => {}
            Some(_) => return None,
        }
    }
    single
}

/// The values used as the callee of a dynamic call.
fn callees(func: &Func) -> EntitySet<Value> {
    func.layout
        .iter()
        .flat_map(|&b| func.blocks[b].insts.iter())
        .filter_map(|&inst| match &func.insts[inst].kind {
            InstKind::CallValue { callee, .. } => Some(*callee),
            _ => None,
        })
        .collect()
}

fn replace_in_inst(kind: &mut InstKind, subst: &SecondaryMap<Value, Option<Operand>>) {
    match kind {
        InstKind::Prim { args, .. } | InstKind::Invoke { args, .. } => {
            args.iter_mut().for_each(|op| replace(op, subst));
        }
        InstKind::CallValue { callee, args } => {
            if let Some(Operand::Value(v)) = subst[*callee] {
                *callee = v;
            }
            args.iter_mut().for_each(|op| replace(op, subst));
        }
        InstKind::Phi { entries } => {
            entries.iter_mut().for_each(|(_, op)| replace(op, subst));
        }
    }
}

fn replace(op: &mut Operand, subst: &SecondaryMap<Value, Option<Operand>>) {
    if let Operand::Value(v) = op
        && let Some(new) = subst[*v]
    {
        *op = new;
    }
}
