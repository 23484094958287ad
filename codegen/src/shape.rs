//! The shape of a Cranelift function on which the register allocators'
//! time depends, measured on the function as lowering hands it to
//! Cranelift: how many values are live at each block start in the order
//! Cranelift lays blocks out, and how many at most at once.
//!
//! Cranelift lowers blocks in the reverse postorder of its dominator tree's
//! depth-first walk (`DominatorTree::cfg_rpo`), and regalloc2 allocates
//! them in that order: its single-pass allocator visits every value live
//! at a block's start once per block (its time grows with the sum measured
//! here), the backtracking allocator's time with the square of the values
//! live at once where there are many. Tests keep both linear in the size
//! of the program (issue 27, findings 7 and 8): see `tests/compile_scale.rs`.
//!
//! Assumes a function that Cranelift's verifier accepts (every use after
//! its definition in that order, as SSA and the reverse postorder give).
//! Guarantees: time and memory linear in the function's size.

use cranelift_codegen::dominator_tree::DominatorTree;
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::flowgraph::ControlFlowGraph;
use cranelift_codegen::ir;

/// The shape of one function compiled (see [`crate::Jit::capture_shapes`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// The IR function's name (`f.rev.back`), a primitive's wrapper's, or
    /// `trampoline of f`.
    pub name: String,
    /// Cranelift instructions.
    pub insts: usize,
    /// Cranelift blocks reachable from the entry.
    pub blocks: usize,
    /// The values live at the start of each block, summed over the blocks,
    /// in Cranelift's block order.
    pub live_at_block_starts: usize,
    /// The most values live at once (between two instructions).
    pub most_live: usize,
    /// Whether the function was compiled with the settings of huge
    /// functions (the single-pass register allocator, no e-graph).
    pub huge_settings: bool,
}

/// The shape of `func`, compiled with the settings of huge functions or not.
pub(crate) fn shape(name: &str, func: &ir::Function, huge_settings: bool) -> Shape {
    let live = liveness(func);
    Shape {
        name: name.to_string(),
        insts: func.dfg.num_insts(),
        blocks: live.blocks,
        live_at_block_starts: live.at_block_starts,
        most_live: live.most,
        huge_settings,
    }
}

/// The most values of `func` live at once ([`Shape::most_live`]).
pub(crate) fn most_live(func: &ir::Function) -> usize {
    liveness(func).most
}

struct Liveness {
    blocks: usize,
    at_block_starts: usize,
    most: usize,
}

fn liveness(func: &ir::Function) -> Liveness {
    let cfg = ControlFlowGraph::with_function(func);
    let domtree = DominatorTree::with_function(func, &cfg);
    let order: Vec<ir::Block> = domtree.cfg_rpo().copied().collect();
    // Walking the blocks backwards, as the single-pass allocator does: a
    // value is live from its last use back to its definition.
    let mut live = vec![false; func.dfg.num_values()];
    let mut n_live = 0usize;
    let (mut at_block_starts, mut most) = (0usize, 0usize);
    let mut mark = |v: ir::Value, on: bool, n_live: &mut usize| {
        let slot = &mut live[func.dfg.resolve_aliases(v).index()];
        if *slot != on {
            *slot = on;
            if on {
                *n_live += 1;
            } else {
                *n_live -= 1;
            }
        }
    };
    for &block in order.iter().rev() {
        for inst in func.layout.block_insts(block).rev() {
            for &res in func.dfg.inst_results(inst) {
                mark(res, false, &mut n_live);
            }
            for v in func.dfg.inst_values(inst) {
                mark(v, true, &mut n_live);
            }
            most = most.max(n_live);
        }
        for &param in func.dfg.block_params(block) {
            mark(param, false, &mut n_live);
        }
        at_block_starts += n_live;
    }
    Liveness {
        blocks: order.len(),
        at_block_starts,
        most,
    }
}

#[cfg(test)]
mod tests {
    use super::shape;
    use cranelift_codegen::ir::{AbiParam, Function, InstBuilder, Signature, UserFuncName, types};
    use cranelift_codegen::isa::{CallConv, TargetFrontendConfig};
    use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};

    /// `n` checks in a row, each branching on `x < k` to a cold block
    /// that uses a value of its own block; the cold block first or second.
    fn checks(n: i64, cold_first: bool) -> Function {
        let mut sig = Signature::new(CallConv::SystemV);
        sig.params.push(AbiParam::new(types::I64));
        sig.returns.push(AbiParam::new(types::I64));
        let mut func = Function::with_name_signature(UserFuncName::default(), sig);
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let x = b.block_params(entry)[0];
        for k in 0..n {
            let y = b.ins().iadd_imm_s(x, k);
            let bad = b.ins().icmp_imm_s(
                cranelift_codegen::ir::condcodes::IntCC::SignedLessThan,
                y,
                k,
            );
            let cold = b.create_block();
            let cont = b.create_block();
            b.set_cold_block(cold);
            if cold_first {
                b.ins().brif(bad, cold, &[], cont, &[]);
            } else {
                let good = b.ins().icmp_imm_s(
                    cranelift_codegen::ir::condcodes::IntCC::SignedGreaterThanOrEqual,
                    y,
                    k,
                );
                b.ins().brif(good, cont, &[], cold, &[]);
            }
            b.switch_to_block(cold);
            b.ins().return_(&[y]);
            b.switch_to_block(cont);
        }
        b.ins().return_(&[x]);
        b.seal_all_blocks();
        b.finalize(TargetFrontendConfig {
            default_call_conv: CallConv::SystemV,
            pointer_width: target_lexicon::PointerWidth::U64,
            page_size_align_log2: 12,
        });
        func
    }

    #[test]
    fn cold_blocks_first_keep_their_values_live_to_the_end() {
        // The cold block listed first comes after all later code in
        // Cranelift's order, so each `y` stays live to the end: the sum
        // grows with the square of the checks. Listed second, it comes
        // right after its branch.
        let quadratic = shape("first", &checks(200, true), false);
        let linear = shape("second", &checks(200, false), false);
        assert_eq!(quadratic.blocks, 401);
        assert!(
            quadratic.live_at_block_starts > 200 * 199 / 2,
            "{quadratic:?}"
        );
        assert!(linear.live_at_block_starts <= 3 * 401, "{linear:?}");
        assert!(linear.most_live <= 3, "{linear:?}");
    }
}
