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
use irad_ir::entity::SecondaryMap;
use irad_ir::flow::{ControlFlowGraph, DominatorTree, Loop, LoopAnalysis};
use irad_ir::{Block, Func, FuncId, InstKind, Module, Operand, Terminator, Value, ValueDef};

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

fn licm_func(func: &mut Func) -> bool {
    let cfg = ControlFlowGraph::with_function(func);
    let dom = DominatorTree::with_cfg(&cfg);
    let loops = LoopAnalysis::compute(&cfg, &dom);
    // Innermost first: by size, loops of one size in the order found.
    let mut order: Vec<Loop> = loops.loops().collect();
    order.sort_by_key(|&l| loops.blocks(l).len());
    // Where each block's statements are now, for the invariance test.
    let mut block_of_value: SecondaryMap<Value, Option<Block>> = SecondaryMap::new();
    for &b in cfg.blocks() {
        for &inst in &func.blocks[b].insts {
            if let Some(r) = func.insts[inst].result {
                block_of_value.set(r, Some(b));
            }
        }
    }
    // Each loop's blocks are visited in reverse postorder: sorted by
    // their place in it (walking the whole order for every loop was
    // quadratic in the loops of a function).
    let mut rpo_index: SecondaryMap<Block, usize> = SecondaryMap::new();
    for (i, &b) in dom.reverse_postorder().iter().enumerate() {
        rpo_index.set(b, i + 1);
    }
    let mut changed = false;
    for lp in order {
        let header = loops.header(lp);
        let mut outside = cfg
            .preds(header)
            .iter()
            .filter(|&&p| !loops.contains(lp, p));
        let (Some(&pre), None) = (outside.next(), outside.next()) else {
            continue;
        };
        if func.blocks[pre].term != Some(Terminator::Goto(header)) {
            continue;
        }
        let mut blocks: Vec<(usize, Block)> = loops
            .blocks(lp)
            .iter()
            .filter(|&&b| rpo_index[b] != 0)
            .map(|&b| (rpo_index[b], b))
            .collect();
        blocks.sort_unstable();
        for (_, block) in blocks {
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
                                ValueDef::Inst(_) => {
                                    block_of_value[*v].is_some_and(|d| !loops.contains(lp, d))
                                }
                            },
                        })
                    }
                    _ => false,
                };
                if invariant {
                    moved.push(inst);
                    if let Some(r) = data.result {
                        block_of_value.set(r, Some(pre));
                    }
                } else {
                    kept.push(inst);
                }
            }
            if !moved.is_empty() {
                changed = true;
                func.blocks[block].insts = kept;
                func.blocks[pre].insts.extend(moved);
            }
        }
    }
    changed
}
