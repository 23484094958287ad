//! Jump threading of a lowered Cranelift function, before Cranelift
//! compiles it: a block without parameters whose only instruction is a
//! `jump` (the continuation of a check whose cold path was split off, an
//! empty IR block, a trampoline of a jump table) is bypassed: every branch
//! to it goes straight to its target with the jump's arguments, and the
//! block, then unused, leaves the layout.
//!
//! Assumes a finished function (every block ends in a terminator) without
//! `try_call`s (the lowering makes none). Guarantees the same control flow
//! between the remaining blocks and so the same behaviour: a jump-only
//! block executes nothing, and the arguments it passes are defined outside
//! it (it has no parameters and no other instruction), in a block that
//! dominates it and so dominates each of its predecessors' branches. A
//! jump table's entries get no arguments (Cranelift's jump tables carry
//! none), so an entry is threaded only to a jump without arguments. Fewer
//! blocks cost Cranelift less in lowering and register allocation (issues
//! 25 and 27; docs/performance.md, "Fifth round").

use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::ir::{self, BlockArg, BlockCall, InstructionData, Opcode};
use cranelift_codegen::ir::{Block, Function};
use smallvec::SmallVec;

/// Bypasses the jump-only blocks of `func` (see the module header);
/// returns how many blocks it removed.
pub(crate) fn thread_jumps(func: &mut Function) -> usize {
    let Some(entry) = func.layout.entry_block() else {
        return 0;
    };
    // The target of each jump-only block (its own jump), by block.
    let mut forward: SecondaryMap<Block, Option<BlockCall>> = SecondaryMap::new();
    let mut any = false;
    for block in func.layout.blocks() {
        if block == entry || !func.dfg.block_params(block).is_empty() {
            continue;
        }
        let (Some(first), Some(last)) =
            (func.layout.first_inst(block), func.layout.last_inst(block))
        else {
            continue;
        };
        if first != last {
            continue;
        }
        if let InstructionData::Jump { destination, .. } = func.dfg.insts[first] {
            forward[block] = Some(destination);
            any = true;
        }
    }
    if !any {
        return 0;
    }
    // The last jump of the chain of jump-only blocks that starts at each
    // (the first whose target is not jump-only or which passes arguments),
    // found once per block: each walk stops at a block already resolved,
    // so the whole is linear. The blocks of a cycle (an endless loop of
    // jumps) resolve to nothing and are left alone.
    let mut last: SecondaryMap<Block, Option<BlockCall>> = SecondaryMap::new();
    let mut state: SecondaryMap<Block, u8> = SecondaryMap::new(); // 1 walking, 2 done
    let mut path = Vec::new();
    for start in func.layout.blocks() {
        if forward[start].is_none() || state[start] == 2 {
            continue;
        }
        let mut block = start;
        let found = loop {
            if state[block] == 2 {
                break last[block];
            }
            if state[block] == 1 {
                break None;
            }
            state[block] = 1;
            path.push(block);
            let Some(next) = forward[block] else {
                break None;
            };
            let to = next.block(&func.dfg.value_lists);
            if next.len(&func.dfg.value_lists) != 0 || forward[to].is_none() {
                break Some(next);
            }
            block = to;
        };
        for b in path.drain(..) {
            last[b] = found;
            state[b] = 2;
        }
    }
    let resolve = |dfg: &ir::DataFlowGraph, call: BlockCall| -> Option<(Block, Vec<BlockArg>)> {
        let block = call.block(&dfg.value_lists);
        if call.len(&dfg.value_lists) != 0 {
            return None;
        }
        let next = last[block]?;
        Some((
            next.block(&dfg.value_lists),
            next.args(&dfg.value_lists).collect(),
        ))
    };
    let blocks: Vec<Block> = func.layout.blocks().collect();
    for &block in &blocks {
        if forward[block].is_some() {
            continue;
        }
        let Some(term) = func.layout.last_inst(block) else {
            continue;
        };
        let opcode = func.dfg.insts[term].opcode();
        if !matches!(opcode, Opcode::Jump | Opcode::Brif | Opcode::BrTable) {
            continue;
        }
        // Inline: a jump or branch (all but tables) has at most two.
        let calls: SmallVec<[BlockCall; 2]> = SmallVec::from_slice(
            func.dfg.insts[term]
                .branch_destination(&func.dfg.jump_tables, &func.dfg.exception_tables),
        );
        let mut new_calls: SmallVec<[Option<BlockCall>; 2]> = SmallVec::with_capacity(calls.len());
        for call in calls {
            new_calls.push(match resolve(&func.dfg, call) {
                Some((to, args)) if opcode != Opcode::BrTable || args.is_empty() => {
                    Some(BlockCall::new(to, args, &mut func.dfg.value_lists))
                }
                _ => None,
            });
        }
        let dfg = &mut func.dfg;
        let dests =
            dfg.insts[term].branch_destination_mut(&mut dfg.jump_tables, &mut dfg.exception_tables);
        for (dest, new) in dests.iter_mut().zip(new_calls) {
            if let Some(new) = new {
                *dest = new;
            }
        }
    }
    // Remove the blocks no branch names any more.
    let mut used: SecondaryMap<Block, bool> = SecondaryMap::new();
    for &block in &blocks {
        if let Some(term) = func.layout.last_inst(block)
            && forward[block].is_none()
        {
            for call in func.dfg.insts[term]
                .branch_destination(&func.dfg.jump_tables, &func.dfg.exception_tables)
            {
                used[call.block(&func.dfg.value_lists)] = true;
            }
        }
    }
    // A jump-only block still named (a jump table's entry needing
    // arguments, a cycle) keeps what it names.
    let mut kept: Vec<Block> = blocks
        .iter()
        .copied()
        .filter(|&b| forward[b].is_some() && used[b])
        .collect();
    while let Some(b) = kept.pop() {
        if let Some(call) = forward[b] {
            let to = call.block(&func.dfg.value_lists);
            if !used[to] {
                used[to] = true;
                if forward[to].is_some() {
                    kept.push(to);
                }
            }
        }
    }
    let mut removed = 0;
    for &block in &blocks {
        if forward[block].is_some() && !used[block] {
            if let Some(inst) = func.layout.first_inst(block) {
                func.layout.remove_inst(inst);
            }
            func.layout.remove_block(block);
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use cranelift_codegen::ir::{AbiParam, InstBuilder, JumpTableData, Signature, types};
    use cranelift_codegen::isa::{CallConv, TargetFrontendConfig};
    use cranelift_codegen::settings;
    use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
    use target_lexicon::PointerWidth;

    /// `f(c, i)`: a `brif` on `c` to two jump-only blocks (one passing an
    /// argument to the join), then a `br_table` on `i` whose entries are a
    /// jump-only block without arguments, one with arguments (which a
    /// table cannot carry: it stays) and a chain of two jump-only blocks.
    fn sample() -> (Function, usize) {
        let mut sig = Signature::new(CallConv::SystemV);
        sig.params.push(AbiParam::new(types::I8));
        sig.params.push(AbiParam::new(types::I32));
        sig.returns.push(AbiParam::new(types::I64));
        let mut func = Function::with_name_signature(ir::UserFuncName::default(), sig);
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut func, &mut fctx);
        let blocks: Vec<Block> = (0..10).map(|_| b.create_block()).collect();
        let [entry, left, right, join, t0, t1, t2, t2b, out, out_arg] = blocks[..] else {
            unreachable!()
        };
        b.append_block_params_for_function_params(entry);
        let p = b.append_block_param(join, types::I64);
        let q = b.append_block_param(out_arg, types::I64);
        b.switch_to_block(entry);
        let c = b.block_params(entry)[0];
        let i = b.block_params(entry)[1];
        let one = b.ins().iconst(types::I64, 1);
        let two = b.ins().iconst(types::I64, 2);
        b.ins().brif(c, left, &[], right, &[]);
        b.switch_to_block(left);
        b.ins().jump(join, &[BlockArg::Value(one)]);
        b.switch_to_block(right);
        b.ins().jump(join, &[BlockArg::Value(two)]);
        b.switch_to_block(join);
        let calls: Vec<BlockCall> = [t0, t1, t2]
            .iter()
            .map(|&t| b.func.dfg.block_call(t, &[]))
            .collect();
        let jt = b.create_jump_table(JumpTableData::new(calls[0], &calls));
        b.ins().br_table(i, jt);
        b.switch_to_block(t0);
        b.ins().jump(out, &[]);
        b.switch_to_block(t1);
        b.ins().jump(out_arg, &[BlockArg::Value(p)]);
        b.switch_to_block(t2);
        b.ins().jump(t2b, &[]);
        b.switch_to_block(t2b);
        b.ins().jump(out, &[]);
        b.switch_to_block(out);
        b.ins().return_(&[one]);
        b.switch_to_block(out_arg);
        b.ins().return_(&[q]);
        b.seal_all_blocks();
        b.finalize(TargetFrontendConfig {
            default_call_conv: CallConv::SystemV,
            pointer_width: PointerWidth::U64,
            page_size_align_log2: 12,
        });
        (func, 10)
    }

    #[test]
    fn jump_only_blocks_are_bypassed_and_removed() {
        let (mut func, before) = sample();
        let flags = settings::Flags::new(settings::builder());
        cranelift_codegen::verify_function(&func, &flags).expect("the sample verifies");
        let removed = thread_jumps(&mut func);
        cranelift_codegen::verify_function(&func, &flags)
            .unwrap_or_else(|e| panic!("after threading: {e}\n{}", func.display()));
        // left and right pass arguments to the join (kept: the branch
        // takes them), t0, t2 and t2b go; t1 stays for the table.
        assert_eq!(removed, 5, "{}", func.display());
        assert_eq!(func.layout.blocks().count(), before - removed);
        let text = func.display().to_string();
        assert!(text.contains("brif v0, block3(v4), block3(v5)"), "{text}");
        assert!(
            text.contains("br_table v1, block8, [block8, block5, block8]"),
            "{text}"
        );
    }

    #[test]
    fn an_endless_loop_of_jumps_stays() {
        let mut sig = Signature::new(CallConv::SystemV);
        sig.params.push(AbiParam::new(types::I8));
        let mut func = Function::with_name_signature(ir::UserFuncName::default(), sig);
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut func, &mut fctx);
        let [entry, into, spin_a, spin_b, exit] = [(); 5].map(|()| b.create_block());
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let c = b.block_params(entry)[0];
        b.ins().brif(c, into, &[], exit, &[]);
        // into -> spin_a <-> spin_b: jump-only blocks on a cycle.
        b.switch_to_block(into);
        b.ins().jump(spin_a, &[]);
        b.switch_to_block(spin_a);
        b.ins().jump(spin_b, &[]);
        b.switch_to_block(spin_b);
        b.ins().jump(spin_a, &[]);
        b.switch_to_block(exit);
        b.ins().return_(&[]);
        b.seal_all_blocks();
        b.finalize(TargetFrontendConfig {
            default_call_conv: CallConv::SystemV,
            pointer_width: PointerWidth::U64,
            page_size_align_log2: 12,
        });
        let removed = thread_jumps(&mut func);
        let flags = settings::Flags::new(settings::builder());
        cranelift_codegen::verify_function(&func, &flags)
            .unwrap_or_else(|e| panic!("after threading: {e}\n{}", func.display()));
        assert_eq!(removed, 0, "{}", func.display());
        assert_eq!(func.layout.blocks().count(), 5);
    }
}
