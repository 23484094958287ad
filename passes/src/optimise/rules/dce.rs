//! Dead code elimination (pass `dce`): unreachable blocks, unused pure
//! statements, and dead tapes.
//!
//! Assumes a verified module. Guarantees, for each function in scope:
//! - every layout block is reachable (`normalise::remove_unreachable_blocks`);
//! - no pure statement (`rules::is_pure`: no effect, cannot fail) and no phi
//!   whose result no live statement or terminator uses is left, cycles of
//!   phis that only feed each other included. Statements that may fail at
//!   run time (`idiv`, `arrayref`, `alloc`, ...), have effects, or call
//!   functions are always kept, so errors still happen where they did.
//!
//! Dead tapes, only at the module position (`whole`) and only when the module
//! has no `frule`, `revfwd` or `revback` statement (rules derived at run time
//! could use the same tapes): for a tape type T, when no `pop` of T anywhere in
//! the module has a used result (after removing dead code), every `push` and
//! every `pop` of T in the module is removed, in every function (also those
//! out of scope, where a pop counts as used if any statement uses it). Sound
//! because a tape is observable only through the values popped from it, and
//! through the error of popping an empty tape: the rule assumes balanced tapes
//! (every pop finds a value), which all code reverse mode derives guarantees;
//! a hand-written program that pops an empty tape of a dead type would lose
//! that error (docs/optimise.md).

use super::is_pure;
use crate::normalise::remove_unreachable_blocks;
use irad_ir::entity::EntityRef;
use irad_ir::{FuncId, Inst, InstKind, Module, Operand, Prim, Terminator, Type, ValueDef};
use rustc_hash::FxHashSet as HashSet;

/// Removes dead code from `funcs` of `m`, and dead tapes from all of `m`
/// when `whole` (see the module documentation); returns whether it removed
/// anything.
pub fn dce(m: &mut Module, funcs: &[FuncId], whole: bool) -> bool {
    let mut changed = false;
    for &f in funcs {
        if let Some(func) = m.get_mut(f) {
            changed |= remove_unreachable_blocks(func);
        }
    }
    let tapes = whole && !has_dynamic_rules(m);
    let in_scope: HashSet<FuncId> = funcs.iter().copied().collect();
    let check: Vec<FuncId> = if tapes {
        m.func_ids().collect()
    } else {
        funcs.to_vec()
    };
    let mut live_tapes: HashSet<Type> = HashSet::default();
    let dead = loop {
        let mut grew = false;
        let mut dead = Vec::new();
        for &f in &check {
            let local = in_scope.contains(&f);
            let (d, used_pops) = liveness(m, f, local, tapes, &live_tapes);
            for ty in used_pops {
                grew |= live_tapes.insert(ty);
            }
            dead.push((f, d));
        }
        if !grew {
            break dead;
        }
    };
    for (f, dead) in dead {
        if dead.is_empty() {
            continue;
        }
        changed = true;
        let func = &mut m[f];
        for b in func.layout.clone() {
            func.blocks[b].insts.retain(|i| !dead.contains(i));
        }
    }
    changed
}

/// Whether any function of `m` looks rules up at run time.
fn has_dynamic_rules(m: &Module) -> bool {
    m.funcs().any(|(_, func)| {
        func.layout.iter().any(|&b| {
            func.blocks[b].insts.iter().any(|&i| {
                matches!(
                    func.insts[i].kind,
                    InstKind::Prim {
                        prim: Prim::Frule | Prim::Revfwd | Prim::Revback,
                        ..
                    }
                )
            })
        })
    })
}

/// The tape a `push` or `pop` statement uses, if it is one.
fn tape_of(m: &Module, f: FuncId, inst: Inst) -> Option<Type> {
    let func = &m[f];
    let data = &func.insts[inst];
    match &data.kind {
        InstKind::Prim {
            prim: Prim::Push,
            args,
        } => func.operand_type(args.first()?, m),
        InstKind::Prim {
            prim: Prim::Pop, ..
        } => Some(func.values[data.result?].ty.clone()),
        _ => None,
    }
}

/// The dead statements of `f` (the removable ones nothing live uses), and the tape
/// types of candidate pops whose results are used. `local`: pure statements
/// and phis may be removed; `tapes`: pushes and pops of tapes not in
/// `live_tapes` may be removed.
fn liveness(
    m: &Module,
    f: FuncId,
    local: bool,
    tapes: bool,
    live_tapes: &HashSet<Type>,
) -> (HashSet<Inst>, Vec<Type>) {
    let func = &m[f];
    let removable = |inst: Inst| -> bool {
        let kind = &func.insts[inst].kind;
        if local {
            match kind {
                InstKind::Phi { .. } => return true,
                InstKind::Prim { prim, .. } if is_pure(*prim) => return true,
                _ => {}
            }
        }
        tapes && tape_of(m, f, inst).is_some_and(|ty| !live_tapes.contains(&ty))
    };
    let mut live_val = vec![false; func.values.len()];
    let mut live_inst = vec![false; func.insts.len()];
    let mut work: Vec<irad_ir::Value> = Vec::new();
    let mark = |op: &Operand, work: &mut Vec<irad_ir::Value>, live_val: &mut Vec<bool>| {
        if let Operand::Value(v) = op
            && let Some(slot) = live_val.get_mut(v.index())
            && !*slot
        {
            *slot = true;
            work.push(*v);
        }
    };
    let mut candidates = Vec::new();
    for &b in &func.layout {
        let block = &func.blocks[b];
        for &inst in &block.insts {
            if removable(inst) {
                candidates.push(inst);
            } else {
                live_inst[inst.index()] = true;
                for_operands(&func.insts[inst].kind, |op| {
                    mark(op, &mut work, &mut live_val)
                });
            }
        }
        match &block.term {
            Some(Terminator::GotoIfNot { cond: op, .. })
            | Some(Terminator::Switch { index: op, .. })
            | Some(Terminator::Return(op)) => mark(op, &mut work, &mut live_val),
            Some(Terminator::Goto(_)) | None => {}
        }
    }
    while let Some(v) = work.pop() {
        let ValueDef::Inst(inst) = func.values[v].def else {
            continue;
        };
        if live_inst[inst.index()] {
            continue;
        }
        live_inst[inst.index()] = true;
        for_operands(&func.insts[inst].kind, |op| {
            mark(op, &mut work, &mut live_val)
        });
    }
    let mut used_pops = Vec::new();
    let mut dead = HashSet::default();
    for inst in candidates {
        if live_inst[inst.index()] {
            if tapes
                && let Some(ty) = tape_of(m, f, inst)
                && !live_tapes.contains(&ty)
            {
                used_pops.push(ty);
            }
        } else {
            dead.insert(inst);
        }
    }
    (dead, used_pops)
}

/// Calls `visit` on every operand of a statement (a dynamic call's callee
/// included).
pub(crate) fn for_operands(kind: &InstKind, mut visit: impl FnMut(&Operand)) {
    match kind {
        InstKind::Prim { args, .. } | InstKind::Invoke { args, .. } => args.iter().for_each(visit),
        InstKind::CallValue { callee, args } => {
            visit(&Operand::Value(*callee));
            args.iter().for_each(visit);
        }
        InstKind::Phi { entries } => entries.iter().for_each(|(_, op)| visit(op)),
    }
}
