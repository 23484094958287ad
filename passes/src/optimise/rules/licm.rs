//! Loop-invariant code motion (pass `licm`): pure statements of a natural
//! loop whose operands are all defined outside it move to the end of the
//! loop's preheader.
//!
//! Assumes a verified function. A natural loop is a header `h` with the
//! blocks that reach a back edge `n -> h` (`h` dominates `n`) without passing
//! through `h`; its preheader is the one predecessor of `h` outside the loop,
//! when it ends in `goto h` (normalisation's split critical edges give one on
//! most loops; a loop without one is left alone: no block is created).
//! Guarantees: only pure statements move (`rules::is_pure`: no effect, and
//! they cannot fail, so running one that the loop might not have run changes
//! nothing observable); phis never move; a statement moves only when every
//! operand is a constant, a parameter, defined outside the loop, or moved
//! before it, so its operands dominate the preheader's end (the preheader
//! dominates the header, which dominates the loop); loops are visited
//! innermost first, so a statement can leave several nested loops. The CFG
//! is not changed.

use super::is_pure;
use crate::cfg::Cfg;
use crate::optimise::dom::Doms;
use irad_ir::entity::EntityRef;
use irad_ir::{Func, FuncId, InstKind, Module, Operand, Terminator, ValueDef};

/// Hoists loop-invariant pure statements in each of `funcs`; returns whether
/// it moved any.
pub fn licm(m: &mut Module, funcs: &[FuncId], _whole: bool) -> bool {
    let mut changed = false;
    for &f in funcs {
        if let Some(func) = m.get_mut(f) {
            changed |= licm_func(func);
        }
    }
    changed
}

struct Loop {
    header: usize,
    body: Vec<bool>,
    size: usize,
}

fn licm_func(func: &mut Func) -> bool {
    let cfg = Cfg::new(func);
    let doms = Doms::new(&cfg);
    let n = cfg.layout.len();
    let mut loops: Vec<Loop> = Vec::new();
    for &b in &doms.rpo {
        for &s in &cfg.succs[b] {
            if !doms.dominates(s, b) {
                continue;
            }
            // Back edge b -> s: collect the body backwards from b.
            let lp = match loops.iter_mut().find(|l| l.header == s) {
                Some(l) => l,
                None => {
                    let mut body = vec![false; n];
                    body[s] = true;
                    loops.push(Loop {
                        header: s,
                        body,
                        size: 1,
                    });
                    let last = loops.len() - 1;
                    &mut loops[last]
                }
            };
            let mut work = vec![b];
            while let Some(x) = work.pop() {
                if lp.body[x] {
                    continue;
                }
                lp.body[x] = true;
                lp.size += 1;
                work.extend(cfg.preds[x].iter().copied());
            }
        }
    }
    loops.sort_by_key(|l| l.size);
    // Where each block's statements are now, for the invariance test.
    let mut block_of_value: Vec<Option<usize>> = vec![None; func.values.len()];
    for (i, &b) in cfg.layout.iter().enumerate() {
        for &inst in &func.blocks[b].insts {
            if let Some(r) = func.insts[inst].result {
                block_of_value[r.index()] = Some(i);
            }
        }
    }
    let mut changed = false;
    for lp in &loops {
        let outside: Vec<usize> = cfg.preds[lp.header]
            .iter()
            .copied()
            .filter(|&p| !lp.body[p])
            .collect();
        let [pre] = outside.as_slice() else {
            continue;
        };
        let pre = *pre;
        let header_block = cfg.layout[lp.header];
        if func.blocks[cfg.layout[pre]].term != Some(Terminator::Goto(header_block)) {
            continue;
        }
        for &b in doms.rpo.iter().filter(|&&b| lp.body[b]) {
            let block = cfg.layout[b];
            let mut kept = Vec::with_capacity(func.blocks[block].insts.len());
            let mut moved = Vec::new();
            for &inst in &func.blocks[block].insts {
                let data = &func.insts[inst];
                let invariant = match &data.kind {
                    InstKind::Prim { prim, args } if is_pure(*prim) && data.result.is_some() => {
                        args.iter().all(|op| match op {
                            Operand::Const(_) => true,
                            Operand::Value(v) => match func.values[*v].def {
                                ValueDef::Param(_) => true,
                                ValueDef::Inst(_) => block_of_value
                                    .get(v.index())
                                    .copied()
                                    .flatten()
                                    .is_some_and(|d| !lp.body[d]),
                            },
                        })
                    }
                    _ => false,
                };
                if invariant {
                    moved.push(inst);
                    if let Some(r) = data.result {
                        block_of_value[r.index()] = Some(pre);
                    }
                } else {
                    kept.push(inst);
                }
            }
            if !moved.is_empty() {
                changed = true;
                func.blocks[block].insts = kept;
                func.blocks[cfg.layout[pre]].insts.extend(moved);
            }
        }
    }
    changed
}
