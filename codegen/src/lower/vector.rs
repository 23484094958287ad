//! Vectorisation of map and reduction loops over f64 arrays (docs/codegen.md,
//! "Vectorisation"): two iterations at a time in Cranelift's 128-bit
//! vectors (`f64x2`), with the results the scalar loop would give, bit for
//! bit.
//!
//! Which loops. A counted loop of `lower/bounds.rs` (`i` from a constant
//! `k0 >= 0` by one while `i < B`) whose header holds only its phis and the
//! compare `lt(i, B)`, `B` defined outside the loop, entered from one block
//! that ends in `goto`, and whose other blocks are a chain of blocks, each
//! with one predecessor, ending in `goto` the next and the last in `goto`
//! the header (an innermost loop without branches). The header's phis are
//! `i` and *accumulators*: a phi `acc` updated by a chain of statements
//! `u1 = add(acc, e1)`, `u2 = mul(u1, e2)`, ... (each `add(x, e)`,
//! `add(e, x)`, `sub(x, e)`, `mul`, `min` or `max` either way round), each
//! value of the chain used in the loop only by the next update, and the
//! last only as the phi's entry from the latch (`s = s + 100 * a * a + b *
//! b` is two). Every other statement of the chain is
//! - f64 `add sub mul div neg abs sqrt min max`: exactly rounded or exact
//!   IEEE operations, which the vector instructions compute per lane with
//!   the scalar instructions' results (`min`/`max`: Cranelift's `fmin`/
//!   `fmax`, the same NaN and signed-zero rules for vectors as for scalars,
//!   which are SYNTAX.md's);
//! - f64 `exp`: `exp_x2`, the scalar `exp_inline`'s operations (those of
//!   `irad_kernels::math::exp`) in the same order on vectors, each lane's
//!   table entry and power of two built on its own, and when either lane
//!   leaves the common path (argument out of range, a result near overflow
//!   or subnormal) the scalar code for each lane in a cold block: the
//!   interpreter's bits in every lane;
//! - i64 `iadd isub imul ineg` and `length`, making *uniform* values (the
//!   same in every iteration: from values defined outside the loop and
//!   constants) or *indices* `i + u` (`iadd(i, u)`, `iadd(u, x)`, `isub(x,
//!   u)` with `x` an index and `u` uniform);
//! - `arrayref`/`arrayset` of an `[f64]` array (uniform) at an index: in
//!   iterations `i` and `i + 1`, the index is `x` and `x + 1` (wrapping
//!   arithmetic is exact modulo 2^64), so one 16-byte load or store covers
//!   both. When `bounds::in_range` proves the access in range, both are;
//!   otherwise each vector body first checks `x <u max(len, 1) - 1` (both
//!   in range) for every such access, after computing the indices (which
//!   has no effect) and before anything else, and leaves for the scalar
//!   header with the current `i` and accumulators when one fails: the
//!   scalar loop then reports the error at the interpreter's iteration and
//!   statement, with the earlier iterations' effects all done.
//!
//! - `push` of an f64 (uniform or per lane) or an i64 (uniform or an
//!   index): each vector body makes room for both iterations' pushes on
//!   each tape at once and moves its top over them, as the scalar code does
//!   once per block (`Lower::tape_plan`: a tape that cannot grow fails at
//!   the first push, out of memory, and leaves the tapes unspecified), and
//!   stores the first iteration's values, then the second's, at their
//!   offsets: the bytes the scalar pushes would have written, in order (one
//!   16-byte store when an iteration pushes one f64 per lane).
//!
//! Nothing else: no calls (but `exp`'s cold path, which has no effect),
//! pops or failing statements; so nothing in a vector body can fail (but a
//! tape's growth, out of memory), and errors, locations and tapes are those
//! of the scalar loop.
//!
//! Order. The vector loop runs statement by statement for both iterations,
//! where the scalar loop runs iteration by iteration. The two agree unless
//! an array written in the loop is read or written at another place by the
//! other iteration. So an array written in the loop is accessed (read and
//! written) at one index only (the same `i + u`, compared as a sum of
//! uniform terms and a constant), and every other array accessed in the
//! loop is either provably another array (one of them allocated in this
//! function, `alloc`/`zeros`/`copy`, and the other another allocation or a
//! parameter), or checked at run time before the loop: when the two
//! arrays' memory overlaps, the vector loop is skipped (unless both are
//! accessed at one index only and are the very same array: then each
//! iteration touches its own element of it, as with one array).
//! Accumulators are updated in scalar code, all the updates of the first
//! iteration (lane 0) and then all those of the second: the sequential
//! order exactly.
//!
//! Lowering. The block entering the loop jumps to a vector header instead,
//! with the phis' values: `i < L` with `L = max(B, 1) - 1` (so `i + 1 < B`
//! without overflow) runs one vector body (both iterations, then `i + 2`),
//! otherwise the scalar header is entered with the current `i` and
//! accumulators, and the scalar loop does what is left (at most one
//! iteration; all of them when the run-time alias check failed; from the
//! pair whose index check failed).
//!
//! Assumes a verified function and `in_range` from `bounds::in_range` of the
//! same function. Guarantees: a loop is planned only when every statement
//! matches the above; anything else is compiled as before.

use super::bounds::counted_loops;
use super::{Leaves, Lower};
use crate::{CodegenError, LoopVectors};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{self, BlockArg, InstBuilder, MemFlagsData, types};
use cranelift_module::Module as ClModule;
use irad_ir::flow::{ControlFlowGraph, DominatorTree, LoopAnalysis};
use irad_ir::{Block, Const, Func, Inst, InstKind, Operand, Prim, Terminator, Type, Value};
use irad_runtime as rt;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// A loop to vectorise, keyed by the block that enters it.
pub(super) struct Plan {
    /// The loop's header (the scalar loop's entry).
    header: Block,
    /// The induction variable `i` and its bound `B`.
    iv: Value,
    bound: Value,
    /// The statements of the chain, in order (accumulator updates included).
    stmts: Vec<Inst>,
    /// The accumulator updates: statement, its phi, and the value it
    /// updates (the phi or the previous update's result).
    accs: HashMap<Inst, (Value, Value)>,
    /// Pairs of arrays whose memory must not overlap for the vector loop
    /// to run (checked before it), and whether they may also be the very
    /// same array (when the loop accesses both at one index only).
    guards: Vec<(Value, Value, bool)>,
    /// The accesses not proven in range, as (array, index): both
    /// iterations' indices are checked before each vector body, which
    /// leaves to the scalar loop when one is out of range.
    checks: Vec<(Value, Value)>,
    /// The statements computing uniform values and indices (no effects, no
    /// failure), lowered before those checks.
    pure: HashSet<Inst>,
    /// The `push` statements, in order.
    pushes: Vec<Push>,
}

/// A `push` of an f64 or i64 in a vectorised loop, with its place (block,
/// statement number from 0) and the type pushed (which names the tape).
struct Push {
    inst: Inst,
    blk: Block,
    stmt: usize,
    ty: Type,
}

/// An index `i + sum(terms) + k`: uniform terms (values, with a sign) and a
/// constant, kept sorted so that equal sums compare equal.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
struct Affine {
    terms: Vec<(Value, bool)>,
    k: i64,
}

impl Affine {
    fn add(&self, u: &Operand, neg: bool) -> Option<Affine> {
        let mut out = self.clone();
        match u {
            Operand::Const(Const::I64(c)) => {
                out.k = if neg {
                    out.k.wrapping_sub(*c)
                } else {
                    out.k.wrapping_add(*c)
                }
            }
            Operand::Value(v) => {
                // `+ v - v` cancels.
                if let Some(p) = out.terms.iter().position(|t| *t == (*v, !neg)) {
                    out.terms.remove(p);
                } else {
                    out.terms.push((*v, neg));
                    out.terms.sort_unstable_by_key(|t| (t.0, t.1));
                }
            }
            Operand::Const(_) => return None,
        }
        Some(out)
    }
}

/// What a value of the loop is, per iteration.
#[derive(Clone, PartialEq, Debug)]
enum Class {
    /// The same in both iterations (defined outside the loop, a constant, or
    /// computed from those).
    Uniform,
    /// An index `i + ...`: one more in the second iteration.
    Index(Affine),
    /// An f64 that differs per iteration: one vector lane each.
    Lane,
}

/// The f64 primitives computed lane by lane (module header).
const ELEMENTWISE: [Prim; 10] = [
    Prim::Add,
    Prim::Sub,
    Prim::Mul,
    Prim::Div,
    Prim::Neg,
    Prim::Abs,
    Prim::Sqrt,
    Prim::Min,
    Prim::Max,
    Prim::Exp,
];

/// The loops of `func` to vectorise, keyed by the block entering each.
pub(super) fn plans(
    func: &Func,
    in_range: &HashSet<Inst>,
    which: LoopVectors,
) -> HashMap<Block, Plan> {
    let mut out = HashMap::default();
    if which == LoopVectors::Off {
        return out;
    }
    let cfg = ControlFlowGraph::with_function(func);
    let dom = DominatorTree::with_cfg(&cfg);
    let la = LoopAnalysis::compute(&cfg, &dom);
    for c in counted_loops(func, &cfg, &la) {
        if let Some((pre, plan)) = plan(func, &cfg, &la, in_range, &c) {
            // Reductions only when asked for (`LoopVectors`).
            if plan.accs.is_empty() || which == LoopVectors::MapsAndReductions {
                out.insert(pre, plan);
            }
        }
    }
    out
}

/// The number of loops of `func` that compiled code runs with vectors
/// when `which` are (for tests; `func` as compiled, without inlining or
/// versioning).
pub(crate) fn count(func: &Func, which: LoopVectors) -> usize {
    plans(func, &super::bounds::in_range(func), which).len()
}

/// The plan of counted loop `c`, with the block entering it, if the loop
/// qualifies (module header).
fn plan(
    func: &Func,
    cfg: &ControlFlowGraph,
    la: &LoopAnalysis,
    in_range: &HashSet<Inst>,
    c: &super::bounds::Counted,
) -> Option<(Block, Plan)> {
    let header = la.header(c.lp);
    let pre = *cfg.preds(header).iter().find(|&&p| !la.contains(c.lp, p))?;
    if func.blocks[pre].term != Some(Terminator::Goto(header)) {
        return None;
    }
    // The chain from the fall-through block back to the header.
    let mut chain = vec![c.body];
    loop {
        let blk = *chain.last()?;
        if cfg.preds(blk).len() != 1 || !la.contains(c.lp, blk) {
            return None;
        }
        match func.blocks[blk].term {
            Some(Terminator::Goto(next)) if next == header => break,
            Some(Terminator::Goto(next)) if !chain.contains(&next) => chain.push(next),
            _ => return None,
        }
    }
    if la.blocks(c.lp).len() != chain.len() + 1 {
        return None;
    }
    let latch = *chain.last()?;
    let loop_insts: HashSet<Inst> = la
        .blocks(c.lp)
        .iter()
        .flat_map(|&b| func.blocks[b].insts.iter().copied())
        .collect();
    let defined_in_loop = |v: Value| match func.values[v].def {
        irad_ir::ValueDef::Param(_) => false,
        irad_ir::ValueDef::Inst(inst) => loop_insts.contains(&inst),
    };
    if defined_in_loop(c.bound) {
        return None;
    }
    // The header: phis of `i` and of accumulators, then `lt(i, B)` only.
    let mut acc_phis: HashMap<Value, Value> = HashMap::default(); // phi -> update value
    for &inst in &func.blocks[header].insts {
        let data = &func.insts[inst];
        match &data.kind {
            InstKind::Phi { entries } => {
                let r = data.result?;
                if r == c.iv {
                    continue;
                }
                if func.values[r].ty != Type::F64 {
                    return None;
                }
                let (_, Operand::Value(u)) = entries.iter().find(|e| e.0 == latch)? else {
                    return None;
                };
                acc_phis.insert(r, *u);
            }
            InstKind::Prim {
                prim: Prim::Lt,
                args,
            } if args.as_slice() == [Operand::Value(c.iv), Operand::Value(c.bound)] => {}
            _ => return None,
        }
    }
    let stmts: Vec<Inst> = chain
        .iter()
        .flat_map(|&b| func.blocks[b].insts.iter().copied())
        .collect();
    let places: HashMap<Inst, (Block, usize)> = chain
        .iter()
        .flat_map(|&b| {
            func.blocks[b]
                .insts
                .iter()
                .enumerate()
                .map(move |(k, &i)| (i, (b, k)))
        })
        .collect();
    let accs = accumulators(func, &stmts, &acc_phis)?;
    let mut class: HashMap<Value, Class> = HashMap::default();
    class.insert(c.iv, Class::Index(Affine::default()));
    let class_of = |class: &HashMap<Value, Class>, op: &Operand| -> Option<Class> {
        match op {
            Operand::Const(Const::F64(_) | Const::I64(_)) => Some(Class::Uniform),
            Operand::Const(_) => None,
            Operand::Value(v) if !defined_in_loop(*v) => Some(Class::Uniform),
            Operand::Value(v) => class.get(v).cloned(),
        }
    };
    // Array accesses: (array, index, is a store); those not proven in
    // range: (array, index value); the statements computing uniform values
    // and indices.
    let mut accesses: Vec<(Value, Affine, bool)> = Vec::new();
    let mut checks: Vec<(Value, Value)> = Vec::new();
    let mut pure: HashSet<Inst> = HashSet::default();
    let mut pushes: Vec<Push> = Vec::new();
    for &inst in &stmts {
        let data = &func.insts[inst];
        let InstKind::Prim { prim, args } = &data.kind else {
            return None;
        };
        if let Some(&(_, acc)) = accs.get(&inst) {
            // The element: the operand that is not the accumulator.
            let e = args.iter().find(|a| **a != Operand::Value(acc))?;
            if !is_f64(func, e) || !matches!(class_of(&class, e)?, Class::Uniform | Class::Lane) {
                return None;
            }
            continue;
        }
        let cls: Vec<Class> = args
            .iter()
            .map(|a| class_of(&class, a))
            .collect::<Option<_>>()?;
        let f64_ops = args.iter().all(|a| is_f64(func, a));
        let res_ty = data.result.map(|r| func.values[r].ty.clone());
        let result = {
            match prim {
                p if ELEMENTWISE.contains(p) && f64_ops && res_ty == Some(Type::F64) => {
                    if cls.iter().all(|c| *c == Class::Uniform) {
                        Some(Class::Uniform)
                    } else if cls
                        .iter()
                        .all(|c| matches!(c, Class::Uniform | Class::Lane))
                    {
                        Some(Class::Lane)
                    } else {
                        return None;
                    }
                }
                Prim::Iadd | Prim::Isub | Prim::Imul | Prim::Ineg | Prim::Length => {
                    Some(int_class(*prim, args, &cls)?)
                }
                Prim::Arrayref | Prim::Arrayset => {
                    let (Some(Operand::Value(a)), Some(Class::Uniform), Some(Class::Index(x))) =
                        (args.first(), cls.first(), cls.get(1))
                    else {
                        return None;
                    };
                    let elem_f64 = matches!(&func.values[*a].ty, Type::Array(e) if *e == irad_ir::types::Scalar::F64);
                    if !elem_f64 {
                        return None;
                    }
                    if !in_range.contains(&inst) {
                        let Some(Operand::Value(x)) = args.get(1) else {
                            return None;
                        };
                        if !checks.contains(&(*a, *x)) {
                            checks.push((*a, *x));
                        }
                    }
                    let store = *prim == Prim::Arrayset;
                    accesses.push((*a, x.clone(), store));
                    if store {
                        if !matches!(cls.get(2), Some(Class::Uniform | Class::Lane)) {
                            return None;
                        }
                        None
                    } else {
                        Some(Class::Lane)
                    }
                }
                Prim::Push => {
                    let ty = match args.first() {
                        Some(Operand::Value(v)) => func.values[*v].ty.clone(),
                        Some(Operand::Const(Const::F64(_))) => Type::F64,
                        Some(Operand::Const(Const::I64(_))) => Type::I64,
                        _ => return None,
                    };
                    let fits = matches!(
                        (&ty, cls.first()),
                        (Type::F64, Some(Class::Lane | Class::Uniform))
                            | (Type::I64, Some(Class::Index(_) | Class::Uniform))
                    );
                    if !fits {
                        return None;
                    }
                    let (blk, stmt) = *places.get(&inst)?;
                    pushes.push(Push {
                        inst,
                        blk,
                        stmt,
                        ty,
                    });
                    None
                }
                _ => return None,
            }
        };
        if matches!(result, Some(Class::Uniform | Class::Index(_))) {
            pure.insert(inst);
        }
        if let (Some(r), Some(cl)) = (data.result, result) {
            class.insert(r, cl);
        }
    }
    let guards = alias_guards(func, &accesses)?;
    Some((
        pre,
        Plan {
            header,
            iv: c.iv,
            bound: c.bound,
            stmts,
            accs,
            guards,
            checks,
            pure,
            pushes,
        },
    ))
}

/// Whether operand `op` is an f64.
fn is_f64(func: &Func, op: &Operand) -> bool {
    match op {
        Operand::Const(c) => matches!(c, Const::F64(_)),
        Operand::Value(v) => func.values[*v].ty == Type::F64,
    }
}

/// The class of an i64 statement's result (module header), if allowed.
fn int_class(prim: Prim, args: &[Operand], cls: &[Class]) -> Option<Class> {
    if cls.iter().all(|c| *c == Class::Uniform) {
        return Some(Class::Uniform);
    }
    match (prim, cls) {
        (Prim::Iadd, [Class::Index(x), Class::Uniform]) => {
            Some(Class::Index(x.add(args.get(1)?, false)?))
        }
        (Prim::Iadd, [Class::Uniform, Class::Index(x)]) => {
            Some(Class::Index(x.add(args.first()?, false)?))
        }
        (Prim::Isub, [Class::Index(x), Class::Uniform]) => {
            Some(Class::Index(x.add(args.get(1)?, true)?))
        }
        _ => None,
    }
}

/// Each accumulator's chain of updates among the loop's statements
/// `stmts`, from its phi to its entry from the latch (`acc_phis`: phi ->
/// that entry), each value used only by the next update: the updates, each
/// with its phi and the accumulator value it updates; `None` when a chain
/// is not of that shape.
fn accumulators(
    func: &Func,
    stmts: &[Inst],
    acc_phis: &HashMap<Value, Value>,
) -> Option<HashMap<Inst, (Value, Value)>> {
    // For each value, the statements of the chain that read it (each once).
    let mut users: HashMap<Value, Vec<Inst>> = HashMap::default();
    for &st in stmts {
        let mut read: Vec<Value> = operands(&func.insts[st].kind);
        read.sort_unstable();
        read.dedup();
        for v in read {
            users.entry(v).or_default().push(st);
        }
    }
    let uses = |v: Value| users.get(&v).map_or(0, Vec::len);
    let mut accs: HashMap<Inst, (Value, Value)> = HashMap::default();
    for (&phi, &u) in acc_phis {
        let mut cur = phi;
        while cur != u {
            if uses(cur) != 1 {
                return None;
            }
            let upd = *users.get(&cur)?.first()?;
            if !is_reduction(func, upd, cur) {
                return None;
            }
            accs.insert(upd, (phi, cur));
            cur = func.insts[upd].result?;
        }
        if uses(u) != 0 || u == phi {
            return None;
        }
    }
    Some(accs)
}

/// Whether statement `upd` is `prim(phi, e)` (or `prim(e, phi)` for the
/// commutative ones) with `prim` a reduction (module header), `e` not `phi`.
fn is_reduction(func: &Func, upd: Inst, phi: Value) -> bool {
    let InstKind::Prim { prim, args } = &func.insts[upd].kind else {
        return false;
    };
    let acc = Operand::Value(phi);
    match (prim, args.as_slice()) {
        (Prim::Sub, [a, e]) => *a == acc && *e != acc,
        (Prim::Add | Prim::Mul | Prim::Min | Prim::Max, [a, e]) => (*a == acc) != (*e == acc),
        _ => false,
    }
}

/// The values statement `kind` reads.
fn operands(kind: &InstKind) -> Vec<Value> {
    let value = |op: &Operand| match op {
        Operand::Value(v) => Some(*v),
        Operand::Const(_) => None,
    };
    match kind {
        InstKind::Prim { args, .. } | InstKind::Invoke { args, .. } => {
            args.iter().filter_map(value).collect()
        }
        InstKind::CallValue { callee, args } => std::iter::once(*callee)
            .chain(args.iter().filter_map(value))
            .collect(),
        InstKind::Phi { entries } => entries.iter().filter_map(|e| value(&e.1)).collect(),
    }
}

/// The pairs of arrays to check for overlap at run time, or `None` when
/// the accesses cannot be vectorised (module header, "Order").
fn alias_guards(
    func: &Func,
    accesses: &[(Value, Affine, bool)],
) -> Option<Vec<(Value, Value, bool)>> {
    let fresh = |a: Value| {
        matches!(
            func.def_kind(a),
            Some(InstKind::Prim {
                prim: Prim::Alloc | Prim::Zeros | Prim::Copy,
                ..
            })
        )
    };
    let param = |a: Value| matches!(func.values[a].def, irad_ir::ValueDef::Param(_));
    // The pairwise comparisons below are cubic at worst: a loop with more
    // accesses than this (none seen in practice) is left scalar.
    if accesses.len() > 256 {
        return None;
    }
    let mut guards = Vec::new();
    for (w, wx, store) in accesses {
        if !store {
            continue;
        }
        for (a, ax, _) in accesses {
            if a == w {
                if ax != wx {
                    return None;
                }
                continue;
            }
            let distinct = (fresh(*w) && (fresh(*a) || param(*a))) || (fresh(*a) && param(*w));
            let (x, y) = (*w.min(a), *w.max(a));
            if distinct
                || guards
                    .iter()
                    .any(|g: &(Value, Value, bool)| (g.0, g.1) == (x, y))
            {
                continue;
            }
            // Accessed at one index only, both: the same array is fine too.
            let one_index = accesses
                .iter()
                .filter(|e| e.0 == x || e.0 == y)
                .all(|e| e.1 == *wx);
            guards.push((x, y, one_index));
        }
    }
    Some(guards)
}

/// A value of the vector body: scalar leaves (uniform), an index (its
/// value in the first iteration), or a vector of two f64s.
#[derive(Clone)]
enum VVal {
    Scalar(Leaves),
    Index(ir::Value),
    Lane(ir::Value),
}

impl<M: ClModule> Lower<'_, '_, M> {
    /// Ends the block entering `plan`'s loop (whose terminator jumps to the
    /// scalar header `scalar` with `args`) with the vector loop, which goes
    /// on into the scalar header (module header, "Lowering").
    pub(super) fn vector_loop(
        &mut self,
        func: &Func,
        plan: &Plan,
        args: &[BlockArg],
        scalar: ir::Block,
    ) -> Result<(), CodegenError> {
        let header_phis: Vec<Value> = func.blocks[plan.header]
            .insts
            .iter()
            .filter_map(|&i| match func.insts[i].kind {
                InstKind::Phi { .. } => func.insts[i].result,
                _ => None,
            })
            .collect();
        if header_phis.len() != args.len() {
            return Err(CodegenError::internal(
                "a vectorised loop's phis do not match its entry".into(),
            ));
        }
        // Errors (a tape that cannot grow) trace the loop's inlined calls.
        let frame = self.cur_frame;
        self.cur_frame = self.inl.and_then(|i| i.frames[plan.header]);
        let r = self.vector_loop_in(func, plan, &header_phis, args, scalar);
        self.cur_frame = frame;
        r
    }

    /// [`Lower::vector_loop`] once the phis are known.
    fn vector_loop_in(
        &mut self,
        func: &Func,
        plan: &Plan,
        header_phis: &[Value],
        args: &[BlockArg],
        scalar: ir::Block,
    ) -> Result<(), CodegenError> {
        let b = self.operand(&Operand::Value(plan.bound))?[0];
        // L = max(B, 1) - 1: i < L is i + 1 < B, without overflow.
        let one = self.b.ins().iconst(types::I64, 1);
        let pos = self.b.ins().icmp(IntCC::SignedGreaterThan, b, one);
        let bb = self.b.ins().select(pos, b, one);
        let limit = self.b.ins().iadd_imm_s(bb, -1);
        // For each array of a checked access: max(len, 1) - 1, so that an
        // index x passes `x <u that` when x and x + 1 are both in range.
        let mut last: HashMap<Value, ir::Value> = HashMap::default();
        for &(a, _) in &plan.checks {
            if last.contains_key(&a) {
                continue;
            }
            let len = *self
                .operand(&Operand::Value(a))?
                .get(1)
                .ok_or_else(|| CodegenError::internal("an array without a length".into()))?;
            let zero = self.b.ins().iconst(types::I64, 0);
            let empty = self.b.ins().icmp(IntCC::Equal, len, zero);
            let lm1 = self.b.ins().iadd_imm_s(len, -1);
            last.insert(a, self.b.ins().select(empty, zero, lm1));
        }
        let vh = self.b.create_block();
        let vb = self.b.create_block();
        let mut ok = None;
        for &(x, y, same_ok) in &plan.guards {
            let mut d = self.disjoint(x, y)?;
            if same_ok {
                let px = self.operand(&Operand::Value(x))?[0];
                let py = self.operand(&Operand::Value(y))?[0];
                let same = self.b.ins().icmp(IntCC::Equal, px, py);
                d = self.b.ins().bor(d, same);
            }
            ok = Some(match ok {
                None => d,
                Some(o) => self.b.ins().band(o, d),
            });
        }
        match ok {
            Some(ok) => {
                self.b.ins().brif(ok, vh, args, scalar, args);
            }
            None => {
                self.b.ins().jump(vh, args);
            }
        }
        // The vector header: a parameter per phi.
        self.b.switch_to_block(vh);
        let mut params: HashMap<Value, ir::Value> = HashMap::default();
        let mut vh_args = Vec::with_capacity(header_phis.len());
        for &phi in header_phis {
            let leaf = if phi == plan.iv {
                types::I64
            } else {
                types::F64
            };
            let p = self.b.append_block_param(vh, leaf);
            params.insert(phi, p);
            vh_args.push(BlockArg::Value(p));
        }
        let i = params[&plan.iv];
        let more = self.b.ins().icmp(IntCC::SignedLessThan, i, limit);
        self.b.ins().brif(more, vb, &[], scalar, &vh_args);
        // The body: both iterations.
        self.b.switch_to_block(vb);
        let mut vals: HashMap<Value, VVal> = HashMap::default();
        vals.insert(plan.iv, VVal::Index(i));
        // Each accumulator's updates, in order: the operation, which
        // operand the element is, and the element in each lane.
        let mut updates: HashMap<Value, Vec<(Prim, usize, [ir::Value; 2])>> = HashMap::default();
        // Uniform values and indices first, then the checks of the accesses
        // not proven in range, then the rest.
        for &inst in plan.stmts.iter().filter(|s| plan.pure.contains(s)) {
            let data = &func.insts[inst];
            let InstKind::Prim { prim, args } = &data.kind else {
                return Err(CodegenError::internal(
                    "a vectorised statement is a call".into(),
                ));
            };
            let ops: Vec<VVal> = args
                .iter()
                .map(|a| self.vval(&vals, a))
                .collect::<Result<_, _>>()?;
            let out = self.vector_stmt(*prim, &ops)?;
            if let (Some(r), Some(v)) = (data.result, out) {
                vals.insert(r, v);
            }
        }
        if !plan.checks.is_empty() {
            let mut all = None;
            for &(a, x) in &plan.checks {
                let VVal::Index(x0) = self.vval(&vals, &Operand::Value(x))? else {
                    return Err(CodegenError::internal("a checked index is not one".into()));
                };
                let ok = self.b.ins().icmp(IntCC::UnsignedLessThan, x0, last[&a]);
                all = Some(match all {
                    None => ok,
                    Some(o) => self.b.ins().band(o, ok),
                });
            }
            let all = all.ok_or_else(|| CodegenError::internal("no checks".into()))?;
            let rest = self.b.create_block();
            self.b.ins().brif(all, rest, &[], scalar, &vh_args);
            self.b.switch_to_block(rest);
        }
        let slots = self.vector_reserve(func, plan)?;
        for &inst in plan.stmts.iter().filter(|s| !plan.pure.contains(s)) {
            let data = &func.insts[inst];
            let InstKind::Prim { prim, args } = &data.kind else {
                return Err(CodegenError::internal(
                    "a vectorised statement is a call".into(),
                ));
            };
            if let Some(&slot) = slots.get(&inst) {
                let v = match args.first() {
                    Some(a) => self.vval(&vals, a)?,
                    None => return Err(CodegenError::internal("a push of nothing".into())),
                };
                self.vector_push(slot, v);
                continue;
            }
            if let Some(&(phi, acc)) = plan.accs.get(&inst) {
                let e_at = usize::from(args.first() == Some(&Operand::Value(acc)));
                let e = args.get(e_at).ok_or_else(|| {
                    CodegenError::internal("an update without its element".into())
                })?;
                let lanes = match self.vval(&vals, e)? {
                    VVal::Lane(v) => [
                        self.b.ins().extractlane(v, 0),
                        self.b.ins().extractlane(v, 1),
                    ],
                    VVal::Scalar(s) => [s[0], s[0]],
                    VVal::Index(_) => {
                        return Err(CodegenError::internal("an index accumulated".into()));
                    }
                };
                updates.entry(phi).or_default().push((*prim, e_at, lanes));
                continue;
            }
            let ops: Vec<VVal> = args
                .iter()
                .map(|a| self.vval(&vals, a))
                .collect::<Result<_, _>>()?;
            let out = self.vector_stmt(*prim, &ops)?;
            if let (Some(r), Some(v)) = (data.result, out) {
                vals.insert(r, v);
            }
        }
        // The first iteration's updates, then the second's: the scalar
        // loop's order.
        let mut accs: HashMap<Value, ir::Value> = HashMap::default();
        for &phi in header_phis {
            let Some(ups) = updates.get(&phi) else {
                continue;
            };
            let mut acc = params[&phi];
            for lane in 0..2 {
                for &(p, e_at, es) in ups {
                    let (x, y) = if e_at == 1 {
                        (acc, es[lane])
                    } else {
                        (es[lane], acc)
                    };
                    acc = self.f64_op(p, &[x, y])?;
                }
            }
            accs.insert(phi, acc);
        }
        let next = self.b.ins().iadd_imm_s(i, 2);
        let back: Vec<BlockArg> = header_phis
            .iter()
            .map(|phi| {
                BlockArg::Value(if *phi == plan.iv {
                    next
                } else {
                    accs.get(phi).copied().unwrap_or(params[phi])
                })
            })
            .collect();
        self.b.ins().jump(vh, &back);
        Ok(())
    }

    /// Makes room on each tape the loop pushes to for both iterations'
    /// pushes and moves its top over them, as the scalar code does once for
    /// a block's pushes (`Lower::tape_plan`; a failure to grow the tape is
    /// reported at the first push). Returns, for each push, where its
    /// first iteration's value goes: the old top, its offset in an
    /// iteration's record, and the bytes one iteration pushes to the tape.
    fn vector_reserve(
        &mut self,
        func: &Func,
        plan: &Plan,
    ) -> Result<HashMap<Inst, (ir::Value, i32, i32)>, CodegenError> {
        let mut tapes: Vec<(u32, Vec<&Push>)> = Vec::new();
        for p in &plan.pushes {
            let t = self.c.tape(&p.ty);
            match tapes.iter_mut().find(|e| e.0 == t) {
                Some(e) => e.1.push(p),
                None => tapes.push((t, vec![p])),
            }
        }
        let mut out = HashMap::default();
        for (t, list) in tapes {
            let per_iter = 8 * list.len() as i32;
            let first = list[0];
            let loc = Self::loc(self.inl, &self.fname, func, first.blk, first.stmt);
            let site = self.c.site(loc, None);
            self.reserve(t, 2 * i64::from(per_iter), site)?;
            let addr = self.tape_addr(t);
            let top = self.load64(addr, rt::OFF_TAPE_TOP);
            let new_top = self.b.ins().iadd_imm_s(top, 2 * i64::from(per_iter));
            self.b
                .ins()
                .store(self.fl_ctx, new_top, addr, rt::OFF_TAPE_TOP);
            for (k, p) in list.iter().enumerate() {
                out.insert(p.inst, (top, 8 * k as i32, per_iter));
            }
        }
        Ok(out)
    }

    /// Stores a pushed value of both iterations in the room
    /// [`Lower::vector_reserve`] made: the first iteration's at `off` from
    /// `top`, the second's one iteration's record further.
    fn vector_push(&mut self, (top, off, per_iter): (ir::Value, i32, i32), v: VVal) {
        let lanes = match v {
            VVal::Lane(v) if per_iter == 8 => {
                self.b.ins().store(self.fl_tape, v, top, off);
                return;
            }
            VVal::Lane(v) => [
                self.b.ins().extractlane(v, 0),
                self.b.ins().extractlane(v, 1),
            ],
            VVal::Index(x) => [x, self.b.ins().iadd_imm_s(x, 1)],
            VVal::Scalar(s) => [s[0], s[0]],
        };
        self.b.ins().store(self.fl_tape, lanes[0], top, off);
        self.b
            .ins()
            .store(self.fl_tape, lanes[1], top, off + per_iter);
    }

    /// Whether the memory of arrays `x` and `y` does not overlap.
    fn disjoint(&mut self, x: Value, y: Value) -> Result<ir::Value, CodegenError> {
        let xs = self.operand(&Operand::Value(x))?;
        let ys = self.operand(&Operand::Value(y))?;
        let end = |s: &mut Self, l: &Leaves| {
            let bytes = s.b.ins().imul_imm_s(l[1], 8);
            s.b.ins().iadd(l[0], bytes)
        };
        let xe = end(self, &xs);
        let ye = end(self, &ys);
        let before = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, xe, ys[0]);
        let after = self.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, ye, xs[0]);
        Ok(self.b.ins().bor(before, after))
    }

    /// The vector body's value of operand `op`.
    fn vval(&mut self, vals: &HashMap<Value, VVal>, op: &Operand) -> Result<VVal, CodegenError> {
        if let Operand::Value(v) = op
            && let Some(x) = vals.get(v)
        {
            return Ok(x.clone());
        }
        Ok(VVal::Scalar(self.operand(op)?))
    }

    /// A scalar f64 operation (as `prim_float` lowers it), on scalars or
    /// on vectors of two.
    fn f64_op(&mut self, p: Prim, x: &[ir::Value]) -> Result<ir::Value, CodegenError> {
        let arg = |k: usize| {
            x.get(k)
                .copied()
                .ok_or_else(|| CodegenError::internal(format!("`{p}` without operand {k}")))
        };
        if p == Prim::Exp {
            let x = arg(0)?;
            return if self.b.func.dfg.value_type(x) == types::F64X2 {
                self.exp_x2(x)
            } else {
                self.exp_scalar(x)
            };
        }
        let ins = self.b.ins();
        Ok(match p {
            Prim::Add => ins.fadd(arg(0)?, arg(1)?),
            Prim::Sub => ins.fsub(arg(0)?, arg(1)?),
            Prim::Mul => ins.fmul(arg(0)?, arg(1)?),
            Prim::Div => ins.fdiv(arg(0)?, arg(1)?),
            Prim::Neg => ins.fneg(arg(0)?),
            Prim::Abs => ins.fabs(arg(0)?),
            Prim::Sqrt => ins.sqrt(arg(0)?),
            Prim::Min => ins.fmin(arg(0)?, arg(1)?),
            Prim::Max => ins.fmax(arg(0)?, arg(1)?),
            _ => {
                return Err(CodegenError::internal(format!("`{p}` is not vectorised")));
            }
        })
    }

    /// `exp(x)` of one f64, as the scalar lowering computes it
    /// (`prim.rs`, `exp_inline`).
    fn exp_scalar(&mut self, x: ir::Value) -> Result<ir::Value, CodegenError> {
        let out = self.prim_at(
            Prim::Exp,
            &[],
            &[smallvec::smallvec![x]],
            &[Type::F64],
            &Type::F64,
            &mut |_, _| rt::SITE_NONE,
        )?;
        out.first()
            .copied()
            .ok_or_else(|| CodegenError::internal("`exp` without a result".into()))
    }

    /// The flags of a load or store of two array elements at once: those
    /// of array elements but not `aligned`, since `a[x]` and `a[x + 1]` are
    /// 16-byte aligned only when `x` is even. (An aligned vector load may
    /// be folded into an SSE arithmetic instruction's memory operand, which
    /// faults on an unaligned address on a machine without AVX.)
    fn fl_pair(&self) -> MemFlagsData {
        let mut fl = MemFlagsData::new().with_notrap();
        if let Some(region) = self.fl_array.alias_region() {
            fl = fl.with_alias_region(Some(region));
        }
        fl
    }

    /// `exp` of both lanes of `x`: the operations of the scalar `exp_inline`
    /// (`prim.rs`; `irad_kernels::math::exp`) in the same order with the
    /// same constants, in vectors, each lane's table entry loaded on its
    /// own. That is the scalar code's result in each lane when both lanes
    /// take its common path (argument in range, normal result); otherwise
    /// a cold block computes each lane with the scalar code itself.
    fn exp_x2(&mut self, x: ir::Value) -> Result<ir::Value, CodegenError> {
        use rt::math::{EXP_MAX, EXP_MIN, INV_LN2_N, SHIFT};
        let table = self.table_gv(rt::EXP_TABLE_SYMBOL)?;
        let le = MemFlagsData::new().with_endianness(ir::Endianness::Little);
        let f = |s: &mut Self, v: f64| {
            let c = s.b.ins().f64const(v);
            s.b.ins().splat(types::F64X2, c)
        };
        let c = f(self, INV_LN2_N);
        let z = self.b.ins().fmul(x, c);
        let sh = f(self, SHIFT);
        let z = self.b.ins().fadd(z, sh);
        let kd = self.b.ins().fsub(z, sh);
        let zbits = self.b.ins().bitcast(types::I64X2, le, z);
        let p = self.exp_poly(x, kd, &f);
        // Per lane: k, the table entry, the exponent e and 2^e.
        let base = self.b.ins().symbol_value(types::I64, table);
        let ro = MemFlagsData::trusted().with_readonly();
        let mut hi = [x; 2];
        let mut lo = [x; 2];
        let mut pow2 = [x; 2];
        let mut ok_e = None;
        for lane in 0..2u8 {
            let zb = self.b.ins().extractlane(zbits, lane);
            let k = self.b.ins().iadd_imm_s(zb, -(SHIFT.to_bits() as i64));
            let j = self.b.ins().band_imm_s(k, 127);
            let off = self.b.ins().ishl_imm_s(j, 4);
            let addr = self.b.ins().iadd(base, off);
            hi[lane as usize] = self.b.ins().load(types::F64, ro, addr, 0);
            lo[lane as usize] = self.b.ins().load(types::F64, ro, addr, 8);
            let e = self.b.ins().sshr_imm_s(k, 7);
            let bias = self.b.ins().iadd_imm_s(e, 1023);
            pow2[lane as usize] = self.b.ins().ishl_imm_s(bias, 52);
            let e_lo = self
                .b
                .ins()
                .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, e, -1021);
            let e_hi = self
                .b
                .ins()
                .icmp_imm_s(IntCC::SignedLessThanOrEqual, e, 1023);
            let ok = self.b.ins().band(e_lo, e_hi);
            ok_e = Some(match ok_e {
                None => ok,
                Some(o) => self.b.ins().band(o, ok),
            });
        }
        let pair = |s: &mut Self, ty: types::Type, v: [ir::Value; 2]| {
            let w = s.b.ins().scalar_to_vector(ty, v[0]);
            s.b.ins().insertlane(w, v[1], 1)
        };
        let t_hi = pair(self, types::F64X2, hi);
        let t_lo = pair(self, types::F64X2, lo);
        let t = self.b.ins().fmul(t_hi, p);
        let q = self.b.ins().fadd(t_lo, t);
        let y = self.b.ins().fadd(t_hi, q);
        let bits = pair(self, types::I64X2, pow2);
        let scale = self.b.ins().bitcast(types::F64X2, le, bits);
        let fast = self.b.ins().fmul(y, scale);
        // Both lanes in range (EXP_MIN < x <= EXP_MAX, false for NaN) with
        // -1021 <= e <= 1023.
        let lo_c = f(self, EXP_MIN);
        let hi_c = f(self, EXP_MAX);
        let above = self.b.ins().fcmp(FloatCC::GreaterThan, x, lo_c);
        let below = self.b.ins().fcmp(FloatCC::LessThanOrEqual, x, hi_c);
        let in_range = self.b.ins().band(above, below);
        let all_in = self.b.ins().vall_true(in_range);
        let ok_e = ok_e.ok_or_else(|| CodegenError::internal("no lanes".into()))?;
        let ok = self.b.ins().band(all_in, ok_e);
        let slow = self.b.create_block();
        let join = self.b.create_block();
        self.b.set_cold_block(slow);
        let res = self.b.append_block_param(join, types::F64X2);
        self.b
            .ins()
            .brif(ok, join, &[BlockArg::Value(fast)], slow, &[]);
        self.b.switch_to_block(slow);
        let mut lanes = [x; 2];
        for lane in 0..2u8 {
            let xl = self.b.ins().extractlane(x, lane);
            lanes[lane as usize] = self.exp_scalar(xl)?;
        }
        let v = pair(self, types::F64X2, lanes);
        self.b.ins().jump(join, &[BlockArg::Value(v)]);
        self.b.switch_to_block(join);
        Ok(res)
    }

    /// One statement of the vector body (not an accumulator update); its
    /// result, if it has one.
    fn vector_stmt(&mut self, p: Prim, ops: &[VVal]) -> Result<Option<VVal>, CodegenError> {
        let bad = || CodegenError::internal(format!("`{p}` vectorised on wrong operands"));
        let scalar = |v: &VVal| match v {
            VVal::Scalar(s) => s.first().copied(),
            _ => None,
        };
        Ok(Some(match p {
            p if ELEMENTWISE.contains(&p) => {
                if let Some(xs) = ops.iter().map(scalar).collect::<Option<Vec<_>>>() {
                    VVal::Scalar(smallvec::smallvec![self.f64_op(p, &xs)?])
                } else {
                    let mut xs = Vec::with_capacity(ops.len());
                    for o in ops {
                        xs.push(match o {
                            VVal::Lane(v) => *v,
                            VVal::Scalar(s) => self.b.ins().splat(types::F64X2, s[0]),
                            VVal::Index(_) => return Err(bad()),
                        });
                    }
                    VVal::Lane(self.f64_op(p, &xs)?)
                }
            }
            Prim::Length => VVal::Scalar(smallvec::smallvec![match ops.first() {
                Some(VVal::Scalar(s)) if s.len() == 2 => s[1],
                _ => return Err(bad()),
            }]),
            Prim::Iadd | Prim::Isub | Prim::Imul | Prim::Ineg => {
                if let Some(xs) = ops.iter().map(scalar).collect::<Option<Vec<_>>>() {
                    let ins = self.b.ins();
                    let v = match (p, xs.as_slice()) {
                        (Prim::Iadd, [x, y]) => ins.iadd(*x, *y),
                        (Prim::Isub, [x, y]) => ins.isub(*x, *y),
                        (Prim::Imul, [x, y]) => ins.imul(*x, *y),
                        (Prim::Ineg, [x]) => ins.ineg(*x),
                        _ => return Err(bad()),
                    };
                    VVal::Scalar(smallvec::smallvec![v])
                } else {
                    // An index plus or minus a uniform value: the first
                    // iteration's index.
                    let v = match (p, ops) {
                        (Prim::Iadd, [VVal::Index(x), VVal::Scalar(y)])
                        | (Prim::Iadd, [VVal::Scalar(y), VVal::Index(x)]) => {
                            self.b.ins().iadd(*x, y[0])
                        }
                        (Prim::Isub, [VVal::Index(x), VVal::Scalar(y)]) => {
                            self.b.ins().isub(*x, y[0])
                        }
                        _ => return Err(bad()),
                    };
                    VVal::Index(v)
                }
            }
            Prim::Arrayref | Prim::Arrayset => {
                let (Some(VVal::Scalar(a)), Some(VVal::Index(x))) = (ops.first(), ops.get(1))
                else {
                    return Err(bad());
                };
                let off = self.b.ins().imul_imm_s(*x, 8);
                let addr = self.b.ins().iadd(a[0], off);
                if p == Prim::Arrayref {
                    let fl = self.fl_pair();
                    VVal::Lane(self.b.ins().load(types::F64X2, fl, addr, 0))
                } else {
                    let v = match ops.get(2) {
                        Some(VVal::Lane(v)) => *v,
                        Some(VVal::Scalar(s)) => self.b.ins().splat(types::F64X2, s[0]),
                        _ => return Err(bad()),
                    };
                    let fl = self.fl_pair();
                    self.b.ins().store(fl, v, addr, 0);
                    return Ok(None);
                }
            }
            _ => return Err(bad()),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The benchmark programs' vectorised loops, on the front end's IR,
    /// maps only (the default) and with reductions: the mixture's loop
    /// writing `diff` (its read of `invs` checked per pair) and the maps of
    /// vector.irad; with reductions also rosenbrock's sum (a chain of two
    /// adds), the sum, both loops of logsumexp (the maximum, the sum of
    /// `exp`), the mixture's sum of squares of `diff` and its helper's two
    /// (not the sums of `log`).
    #[test]
    fn the_benchmark_programs_loops() {
        let cases = [
            ("rosenbrock", "rosenbrock", 0, 1),
            ("sum", "sum", 0, 1),
            ("logsumexp", "logsumexp", 0, 2),
            ("gmm", "gmm", 1, 2),
            ("gmm", "logsumexp", 0, 2),
            ("branchy", "branchy", 0, 0),
            ("vector", "scale", 1, 1),
            ("vector", "axpb", 1, 1),
            ("vector", "map", 1, 1),
            ("vector", "dotr", 0, 1),
            ("vector", "expmap", 1, 1),
            ("vector", "mul2", 1, 1),
        ];
        for (file, f, maps, all) in cases {
            let path = format!(
                "{}/../benches/programs/{file}.irad",
                env!("CARGO_MANIFEST_DIR")
            );
            let text = std::fs::read_to_string(&path).expect("the benchmark program");
            let m = irad_ir::surface::compile(&text).expect("the program compiles");
            let func = &m[m.by_name(f).expect("the function")];
            assert_eq!(count(func, LoopVectors::Maps), maps, "@{f} of {file}");
            assert_eq!(
                count(func, LoopVectors::MapsAndReductions),
                all,
                "@{f} of {file}"
            );
        }
    }
}
