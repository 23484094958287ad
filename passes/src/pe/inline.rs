//! Inlining: `invoke @g(args)` replaced by a copy of `@g`'s blocks, when `@g`
//! is small and not recursive.
//!
//! Input: a verified module. A call is inlined when the callee is another
//! function of at most [`Limits::inline_size`] statements, lies on no cycle of
//! the call graph (edges: `invoke`, and every function constant a body
//! mentions, since it may be called through a value), and the caller stays
//! within [`Limits::max_func_size`]. The call's block is split at the call:
//! the statements before it end with `goto` to the copy of the callee's
//! entry; the copied blocks follow, with fresh labels and values, parameters
//! replaced by the arguments; each `return v` becomes `goto` to a new
//! continuation block holding the statements after the call and the old
//! terminator, where the call's result is `v` (one return) or a phi of the
//! returned operands (several). Copied statements keep their source
//! positions, so a run-time error inside inlined code reports the callee's
//! source line and the caller's name, block and statement (docs/pe.md).
//!
//! Output: verifies; the same values and errors (except that inlining
//! removes call frames, so a call-depth limit is reached later). Keeps the
//! normal form (docs/passes.md) when the caller and callee have it: the new
//! blocks end in `goto` or in the callee's own branches, the continuation is
//! last when the call's block was, and the entry gains no predecessor.

use super::{
    Labels, Limits, func_size, map_kind, map_targets, map_term, rename_phi_pred, substitute,
};
use irad_ir::entity::{EntitySet, SecondaryMap};
use irad_ir::flow::graph;
use irad_ir::{
    Block, BlockData, Const, Func, FuncId, FuncRef, InstData, InstKind, Module, Operand,
    Terminator, Value, ValueData, ValueDef,
};
use smallvec::SmallVec;
use std::collections::{HashMap, HashSet};

/// Inlines small non-recursive callees into every function of `module` with
/// the default [`Limits`]; returns whether any call was inlined.
pub fn inline(module: &mut Module) -> bool {
    inline_with(module, &Limits::default())
}

/// [`inline`] with explicit limits.
pub fn inline_with(module: &mut Module, limits: &Limits) -> bool {
    let ids: Vec<FuncId> = module.func_ids().collect();
    let mut changed = false;
    for id in ids {
        changed |= inline_into(module, id, limits);
    }
    changed
}

/// Inlines into function `f` of `module` every call it can (including calls
/// that inlined code brings), within `limits`; returns whether any was.
pub fn inline_into(module: &mut Module, f: FuncId, limits: &Limits) -> bool {
    if module.get(f).is_none() {
        return false;
    }
    // Inlining cannot put a function on a cycle it was not on: the edges it
    // adds (f to g's callees) were paths through g already.
    let recursive = recursive_functions(module);
    let mut changed = false;
    // Each inline removes one call and adds a bounded number of statements;
    // the size limit ends the loop, and this bound is a second guard.
    for _ in 0..limits.max_func_size {
        let Some((block, idx, callee)) = next_site(module, f, &recursive, limits) else {
            break;
        };
        let body = module[callee].clone();
        inline_site(&mut module[f], block, idx, &body);
        changed = true;
    }
    changed
}

/// The functions that lie on a cycle of the call graph.
fn recursive_functions(module: &Module) -> EntitySet<FuncId> {
    let mut succs: SecondaryMap<FuncId, SmallVec<[FuncId; 2]>> = SecondaryMap::new();
    for f in module.func_ids() {
        let out = {
            let func = &module[f];
            let mut out: SmallVec<[FuncId; 2]> = SmallVec::new();
            let mut add = |g: FuncId| {
                if module.get(g).is_some() && !out.contains(&g) {
                    out.push(g);
                }
            };
            for &block in &func.layout {
                for &inst in &func.blocks[block].insts {
                    let (args, invoked) = match &func.insts[inst].kind {
                        InstKind::Invoke { func, args } => (args.as_slice(), Some(*func)),
                        InstKind::Prim { args, .. } | InstKind::CallValue { args, .. } => {
                            (args.as_slice(), None)
                        }
                        InstKind::Phi { entries } => {
                            for (_, op) in entries {
                                if let Operand::Const(Const::Func(FuncRef::User(g))) = op {
                                    add(*g);
                                }
                            }
                            (&[][..], None)
                        }
                    };
                    if let Some(g) = invoked {
                        add(g);
                    }
                    for op in args {
                        if let Operand::Const(Const::Func(FuncRef::User(g))) = op {
                            add(*g);
                        }
                    }
                }
                if let Some(
                    Terminator::Return(Operand::Const(Const::Func(FuncRef::User(g))))
                    | Terminator::GotoIfNot {
                        cond: Operand::Const(Const::Func(FuncRef::User(g))),
                        ..
                    },
                ) = &func.blocks[block].term
                {
                    add(*g);
                }
            }
            out
        };
        succs.set(f, out);
    }
    graph::cyclic(module.func_ids(), |f| succs[f].iter().copied())
}

/// The first call in `f` that can be inlined: (block, statement index, callee).
fn next_site(
    module: &Module,
    f: FuncId,
    recursive: &EntitySet<FuncId>,
    limits: &Limits,
) -> Option<(Block, usize, FuncId)> {
    let func = &module[f];
    let size = func_size(func);
    for &block in &func.layout {
        for (idx, &inst) in func.blocks[block].insts.iter().enumerate() {
            let InstKind::Invoke { func: callee, .. } = func.insts[inst].kind else {
                continue;
            };
            let Some(body) = module.get(callee) else {
                continue;
            };
            let on_cycle = recursive.contains(callee);
            let callee_size = func_size(body);
            if callee != f
                && !on_cycle
                && !body.layout.is_empty()
                && callee_size <= limits.inline_size
                && size + callee_size <= limits.max_func_size
            {
                return Some((block, idx, callee));
            }
        }
    }
    None
}

/// Replaces statement `idx` of `block` in `func`, an `invoke` of `callee`,
/// by a copy of `callee`'s blocks.
fn inline_site(func: &mut Func, block: Block, idx: usize, callee: &Func) {
    let call = func.blocks[block].insts[idx];
    let InstKind::Invoke { args, .. } = func.insts[call].kind.clone() else {
        return;
    };
    let call_result = func.insts[call].result;
    let call_pos = func.insts[call].pos;
    let mut labels = Labels::new(func);

    // The continuation: the statements after the call and the terminator.
    let next = func.next_in_layout(block);
    let succs = func.successors(block, next);
    let after = func.blocks[block].insts.split_off(idx + 1);
    func.blocks[block].insts.truncate(idx);
    let term = func.blocks[block].term.take();
    let term_pos = func.blocks[block].term_pos;
    let cont = func.blocks.push(BlockData {
        label: labels.fresh(),
        insts: after,
        term,
        pos: None,
        term_pos,
    });
    for succ in succs {
        rename_phi_pred(func, succ, block, cont);
    }

    // Values: parameters become the arguments; every other value of the
    // callee's layout a fresh value of the same type and name.
    let mut vmap: SecondaryMap<Value, Option<Operand>> = SecondaryMap::new();
    for (&p, &a) in callee.params.iter().zip(args.iter()) {
        vmap.set(p, Some(a));
    }
    let mut bmap: SecondaryMap<Block, Option<Block>> = SecondaryMap::new();
    for &b in &callee.layout {
        let data = &callee.blocks[b];
        let new = func.blocks.push(BlockData {
            label: labels.fresh(),
            insts: Vec::new(),
            term: None,
            pos: data.pos,
            term_pos: data.term_pos,
        });
        bmap.set(b, Some(new));
    }
    // Copies keep their names where the caller does not use them (the
    // printer would rename both otherwise).
    let names: HashSet<Box<str>> = func
        .values
        .values()
        .filter_map(|d| d.name.clone())
        .collect();
    let mut imap = Vec::new();
    for &b in &callee.layout {
        for &inst in &callee.blocks[b].insts {
            let data = &callee.insts[inst];
            let new_inst = func.insts.push(InstData {
                kind: data.kind.clone(),
                result: None,
                pos: data.pos,
            });
            if let Some(r) = data.result {
                let v = func.values.push(ValueData {
                    ty: callee.values[r].ty.clone(),
                    def: ValueDef::Inst(new_inst),
                    name: callee.values[r].name.clone().filter(|n| !names.contains(n)),
                });
                func.insts[new_inst].result = Some(v);
                vmap.set(r, Some(Operand::Value(v)));
            }
            imap.push((b, new_inst));
        }
    }
    // Operands are mapped once each: callee values and caller values share
    // handle numbers.
    let map_op = |op: Operand| match op {
        Operand::Value(v) => vmap[v].unwrap_or(op),
        Operand::Const(_) => op,
    };
    for (b, new_inst) in imap {
        let kind = &mut func.insts[new_inst].kind;
        map_kind(kind, &map_op);
        if let InstKind::Phi { entries } = kind {
            for (pred, _) in entries.iter_mut() {
                *pred = bmap[*pred].unwrap_or(*pred);
            }
        }
        let nb = bmap[b].unwrap_or(b);
        func.blocks[nb].insts.push(new_inst);
    }
    let mut returns: SmallVec<[(Block, Operand); 2]> = SmallVec::new();
    for &b in &callee.layout {
        let nb = bmap[b].unwrap_or(b);
        let term = match callee.blocks[b].term.clone() {
            Some(Terminator::Return(op)) => {
                returns.push((nb, map_op(op)));
                Terminator::Goto(cont)
            }
            Some(mut term) => {
                map_term(&mut term, &map_op);
                map_targets(&mut term, &|t| bmap[t].unwrap_or(t));
                term
            }
            // A verified callee has a terminator on every block.
            None => Terminator::Goto(cont),
        };
        func.blocks[nb].term = Some(term);
    }
    let entry = callee.layout.first().map(|&b| bmap[b].unwrap_or(b));
    if let Some(entry) = entry {
        func.blocks[block].term = Some(Terminator::Goto(entry));
        func.blocks[block].term_pos = call_pos;
    }

    // Layout: the call's block, the callee's blocks, the continuation.
    let at = func
        .layout
        .iter()
        .position(|&b| b == block)
        .map_or(func.layout.len(), |i| i + 1);
    let mut new_blocks: Vec<Block> = callee
        .layout
        .iter()
        .map(|&b| bmap[b].unwrap_or(b))
        .collect();
    new_blocks.push(cont);
    func.layout.splice(at..at, new_blocks);

    // The call's result: the one returned operand, or a phi of them.
    if let Some(r) = call_result {
        let op = match returns.as_slice() {
            [(_, op)] => *op,
            _ => {
                let phi = func.insts.push(InstData {
                    kind: InstKind::Phi {
                        entries: returns.iter().copied().collect(),
                    },
                    result: None,
                    pos: call_pos,
                });
                // The call's result is gone: the phi takes its name.
                let name = func.values[r].name.take();
                let ty = func.values[r].ty.clone();
                let v = func.values.push(ValueData {
                    ty,
                    def: ValueDef::Inst(phi),
                    name,
                });
                func.insts[phi].result = Some(v);
                func.blocks[cont].insts.insert(0, phi);
                Operand::Value(v)
            }
        };
        substitute(func, &HashMap::from([(r, op)]));
    }
}
