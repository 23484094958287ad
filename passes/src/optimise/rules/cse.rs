//! Common subexpression elimination (pass `cse`), dominator-based: a
//! primitive call equal to one that dominates it (same primitive, same
//! operands after earlier replacements, same result type) is replaced by the
//! earlier result.
//!
//! Assumes a verified function. Guarantees: only calls whose result depends
//! on their operands alone are merged (`rules::is_deterministic`: the pure
//! primitives, and `idiv`, `irem`, `fptosi`, which may fail but then fail
//! first at the dominating call); statements with effects or identity
//! (`arrayset`, `alloc`, `zeros`, `copy`, `push`, `pop`), reads of memory
//! (`arrayref`), rule look-ups, phis and calls of functions are never merged.
//! The earlier call dominates the later, so every use of the later result is
//! dominated by the replacement. Walks the dominator tree without recursion.

use super::is_deterministic;
use irad_ir::entity::SecondaryMap;
use irad_ir::flow::{ControlFlowGraph, DominatorTree};
use irad_ir::{Block, Const, FuncId, FuncRef, Inst, InstKind, Module, Operand, Prim, Type, Value};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use smallvec::SmallVec;

/// Runs CSE over each of `funcs`; returns whether it merged anything.
pub fn cse(m: &mut Module, funcs: &[FuncId], _whole: bool) -> bool {
    let mut changed = false;
    for &f in funcs {
        if let Some(func) = m.get_mut(f) {
            changed |= cse_func(func);
        }
    }
    changed
}

/// An operand as part of a hash key: a value by number, a constant by its
/// bits (so `-0.0` and `0.0` differ, and a NaN equals itself).
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) enum KeyOp {
    Value(u32),
    F64(u64),
    I64(i64),
    Bool(bool),
    Unit,
    User(u32),
    Prim(Prim),
}

/// A call's key: its primitive, operands and result type (the operands
/// inline for up to three, so that most keys need no allocation).
type Key = (Prim, SmallVec<[KeyOp; 3]>, Type);

/// `op` as part of a hash key.
pub(crate) fn key_op(op: &Operand) -> KeyOp {
    match op {
        Operand::Value(v) => KeyOp::Value(v.as_u32()),
        Operand::Const(Const::F64(x)) => KeyOp::F64(x.to_bits()),
        Operand::Const(Const::I64(x)) => KeyOp::I64(*x),
        Operand::Const(Const::Bool(b)) => KeyOp::Bool(*b),
        Operand::Const(Const::Unit) => KeyOp::Unit,
        Operand::Const(Const::Func(FuncRef::User(id))) => KeyOp::User(id.as_u32()),
        Operand::Const(Const::Func(FuncRef::Prim(p))) => KeyOp::Prim(*p),
    }
}

fn cse_func(func: &mut irad_ir::Func) -> bool {
    let cfg = ControlFlowGraph::with_function(func);
    let dom = DominatorTree::with_cfg(&cfg);
    let mut cx = Scopes::default();
    let Some(entry) = cfg.entry() else {
        return false;
    };
    // Each entry: (block, next child, undo-log length when entered).
    let mut stack: Vec<(Block, usize, usize)> = Vec::new();
    cx.visit_block(func, entry);
    stack.push((entry, 0, 0));
    while let Some(top) = stack.last_mut() {
        let (b, next, mark) = *top;
        if let Some(&c) = dom.children(b).get(next) {
            top.1 += 1;
            let mark_c = cx.undo.len();
            cx.visit_block(func, c);
            stack.push((c, 0, mark_c));
        } else if stack.len() == 1 {
            // Leaving the entry ends the walk: the table is dropped whole
            // rather than emptied call by call.
            break;
        } else {
            for inst in cx.undo.drain(mark..) {
                // Its operands are as when it was recorded: the key too.
                if let Some((key, _)) = key_of(func, inst) {
                    cx.table.remove(&key);
                }
            }
            stack.pop();
        }
    }
    if cx.removed.is_empty() {
        return false;
    }
    let subst = &cx.subst;
    super::super::apply_to_operands(func, &cx.removed, |op| {
        if let Operand::Value(v) = op
            && let Some(w) = subst[*v]
        {
            *op = Operand::Value(w);
        }
    });
    true
}

/// The state of the walk: the calls seen on the dominator-tree path, and
/// what was merged.
#[derive(Default)]
struct Scopes {
    /// The earlier result each merged result is replaced by.
    subst: SecondaryMap<Value, Option<Value>>,
    /// The merged statements.
    removed: HashSet<Inst>,
    /// The calls of the blocks on the path from the entry, by key.
    table: HashMap<Key, Value>,
    /// The calls recorded in `table`, in the order they were added, to
    /// leave a block's scope.
    undo: Vec<Inst>,
}

impl Scopes {
    /// Visits the statements of `block` in order: substitutes their operands,
    /// then merges each with an equal dominating call or records it.
    fn visit_block(&mut self, func: &mut irad_ir::Func, block: Block) {
        for i in 0..func.blocks[block].insts.len() {
            let inst = func.blocks[block].insts[i];
            let data = &mut func.insts[inst];
            let InstKind::Prim { args, .. } = &mut data.kind else {
                continue;
            };
            for op in args.iter_mut() {
                if let Operand::Value(v) = op
                    && let Some(w) = self.subst[*v]
                {
                    *op = Operand::Value(w);
                }
            }
            let Some((key, result)) = key_of(func, inst) else {
                continue;
            };
            match self.table.get(&key) {
                Some(&earlier) => {
                    self.subst.set(result, Some(earlier));
                    self.removed.insert(inst);
                }
                None => {
                    self.table.insert(key, result);
                    self.undo.push(inst);
                }
            }
        }
    }
}

/// The key of `inst` and its result, when it is a call CSE may merge.
fn key_of(func: &irad_ir::Func, inst: Inst) -> Option<(Key, Value)> {
    let data = &func.insts[inst];
    let InstKind::Prim { prim, args } = &data.kind else {
        return None;
    };
    let result = data.result?;
    if !is_deterministic(*prim) {
        return None;
    }
    let key = (
        *prim,
        args.iter().map(key_op).collect(),
        func.values[result].ty.clone(),
    );
    Some((key, result))
}
