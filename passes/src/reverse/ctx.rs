//! The shared context of one reverse derivation: the primal function, the
//! facts about its control flow both sweeps read ([`Shape`]), activity, the
//! rule pieces of the user functions it invokes, and the small helpers both
//! sweeps use (operand and shadow mapping, cotangent accumulation, located
//! errors).
//!
//! Assumes a verified primal; [`Derivation::new`] checks that it is
//! normalised (one return block, no critical edges, an entry without
//! predecessors) and that reverse mode supports it, and refuses it with a
//! located error otherwise. Guarantees: once built, a [`Derivation`] is read
//! only; the module is touched only to request the pieces of invoked user
//! functions (declared and queued, not built).

use super::analysis::{idoms, live_out, on_cycle, reaches, rpo};
use super::bbcode::{BBCode, BTerm};
use super::checkpoint::replaced::{self, Replaced};
use super::loops::RevLoops;
use super::memory::ArrayClasses;
use super::{Reverse, ReverseError};
use crate::activity::Activity;
use crate::forward::transform::stmt_loc;
use irad_ir::entity::SecondaryMap;
use irad_ir::{
    Block, Func, FuncBuilder, FuncId, FuncRef, Inst, InstKind, Location, Module, Operand, Prim,
    Type, Value,
};
use irad_rules::{Registry, Rrule};
use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A cotangent's key: a primal value and one of its f64 leaves.
pub(super) type Key = (Value, u32);
/// The current cotangent of each (primal value, leaf).
pub(super) type Cots = BTreeMap<Key, Operand>;
/// The `[f64]` shadows of the primal values in the forward sweep.
pub(super) type Shadows = SecondaryMap<Value, SmallVec<[Operand; 1]>>;

/// How a statement is differentiated.
#[derive(Clone)]
pub(super) enum How {
    /// A registered rrule (primitive or marked function).
    Rule(Arc<dyn Rrule>, Option<String>),
    /// `invoke` of the derived rule pieces of a user function.
    Invoke(FuncId),
    /// A call through a function value: `revback` of the saved callee.
    Dynamic,
    /// A phi: handled at the edges.
    Phi,
    /// No derivative work (activity analysis): the primal statement alone.
    Primal,
}

/// The state of one statement between the sweeps: how it is differentiated
/// and the operands of the forward sweep its pullback reads.
#[derive(Clone)]
pub(super) struct Stmt {
    pub how: How,
    pub saved: SmallVec<[Operand; 4]>,
}

/// The control flow of the primal, by position in its BBCode.
pub(super) struct Shape {
    /// The block form of the primal.
    pub bb: BBCode,
    /// The number of blocks.
    pub n: usize,
    /// The predecessors of each block.
    pub preds: Vec<Vec<usize>>,
    /// The successors of each block.
    pub succs: Vec<SmallVec<[usize; 2]>>,
    /// The return block.
    pub ret: usize,
    /// Which blocks can reach the return block.
    pub to_ret: Vec<bool>,
    /// The blocks reachable from the entry, in reverse postorder.
    pub order: Vec<usize>,
    /// Which blocks are reachable from the entry.
    pub reachable: Vec<bool>,
    /// Blocks that run at most once per call and dominate the return block.
    pub once: Vec<bool>,
    /// The single-exit and counted loops.
    pub loops: RevLoops,
    /// The immediate dominator of each block.
    pub idom: Vec<Option<usize>>,
}

/// Everything the sweeps share about one derivation.
pub(super) struct Derivation<'r> {
    /// The primal function.
    pub src: Func,
    /// The location of the primal, for errors.
    pub floc: Location,
    /// Its control flow.
    pub shape: Shape,
    /// Which values carry derivatives.
    pub act: Activity,
    /// The active f64-carrying values live out of each block, in ascending
    /// order.
    pub live: Vec<Vec<Value>>,
    /// The (block, statement number) of each primal statement.
    pub places: SecondaryMap<Inst, Option<(Block, u32)>>,
    /// Where the rules come from.
    pub registry: &'r Registry,
    /// The pieces (forward sweep, pullback) of every user function invoked.
    pub callees: HashMap<FuncId, (FuncId, FuncId)>,
    /// Which arrays may be the same, and which statements write which.
    pub classes: ArrayClasses,
    /// The header phis of arrays replaced on some iterations only, each with
    /// the flag phi added beside it (`checkpoint/replaced.rs`; only when
    /// checkpointing may be asked for).
    pub replaced: HashMap<Value, Replaced>,
    /// The functions it may call for an array that return a new one on
    /// every call, and the `getfield` results holding a fresh field of a
    /// call's tuple result (`fresh.rs`, `fresh_fields.rs`; only when
    /// checkpointing may be asked for): a loop replacing its array by such
    /// a value makes it afresh.
    pub fresh: super::fresh::Fresh,
    /// The functions it may call for an array that return one of their
    /// parameters, with its index (`fresh.rs`; only when checkpointing may
    /// be asked for): a loop replacing its array by such a call's result
    /// keeps it.
    pub passthrough: HashMap<FuncId, usize>,
    /// The kept fields of the tuple results of the functions it may call:
    /// by function and path, the parameter (and its part) every return
    /// gives there as it is (`fresh.rs`, `fresh_fields.rs`; only when
    /// checkpointing may be asked for): a loop replacing its array by such
    /// a field of a call's result keeps it.
    pub kept_fields:
        HashMap<(FuncId, super::fresh_fields::FieldPath), super::fresh_fields::ParamPart>,
    /// The functions it may call for an array that return, on every call,
    /// a fresh array or one of their parameters as it is, with its index
    /// (`fresh.rs`; only when checkpointing may be asked for): a loop
    /// replacing its array by such a call's result, the array it holds
    /// passed, may carry it as one made afresh (`checkpoint/mod.rs`,
    /// `either_inside`).
    pub either: HashMap<FuncId, usize>,
    /// What one call of each function it invokes is taken to record per
    /// element of the longest array, in arrays' worth (`sized.rs`,
    /// `call_cost`; only when checkpointing may be asked for, and only
    /// those counting more than nothing).
    pub call_elements: HashMap<FuncId, u64>,
}

impl<'r> Derivation<'r> {
    /// Checks the primal, computes its control-flow facts and activity, and
    /// requests the pieces of the user functions it invokes, with the
    /// parameters of `mask` active (`None`: all).
    pub fn new(
        rev: &mut Reverse<'r>,
        module: &mut Module,
        primal: FuncId,
        mask: Option<&[bool]>,
    ) -> Result<Derivation<'r>, ReverseError> {
        let src = module
            .get(primal)
            .ok_or_else(|| ReverseError::new(Location::default(), "invalid function handle"))?
            .clone();
        let floc = Location {
            func: Some(src.name.as_str().into()),
            pos: src.pos,
            ..Location::default()
        };
        check_supported(&src, &floc)?;
        // The blocks only: `src` is the function, and a second copy of a
        // huge primal is hundreds of megabytes.
        let bb = BBCode::blocks_only(&src).map_err(|e| internal(&floc, e))?;
        let mut shape = Shape::new(bb, &src, &floc)?;
        let mut src = src;
        let mut replaced = HashMap::default();
        let mut known = super::fresh::Known::default();
        if checkpoints_asked(rev, &src) {
            let registry = rev.registry;
            let by_rule = |id| {
                module
                    .get(id)
                    .is_some_and(|g| registry.function_rrule_in(module, &g.name).is_some())
            };
            known = rev.call_facts.learn(module, &src, by_rule);
            // Tuples holding arrays carried through loops become a phi per
            // field, which checkpointing handles (docs/reverse.md, "Tuples
            // carried through the header").
            // Nested tuples split a level per round.
            let mut changed = 0;
            while let n @ 1.. = crate::forward::split::split_tuple_array_phis(&mut src)
                .map_err(|e| internal(&floc, e))?
            {
                changed += n;
            }
            // One `getfield` per field of a tuple, so that a field a call
            // returns fresh is one value (`fresh_fields.rs`).
            changed += crate::forward::split::merge_getfields(&mut src);
            if changed > 0 {
                let bb = BBCode::blocks_only(&src).map_err(|e| internal(&floc, e))?;
                shape = Shape::new(bb, &src, &floc)?;
            }
            known.fresh.settle(&src);
            replaced = replaced::mark(&mut src, &shape, &known.fresh);
            if !replaced.is_empty() {
                let bb = BBCode::blocks_only(&src).map_err(|e| internal(&floc, e))?;
                shape = Shape::new(bb, &src, &floc)?;
            }
        }
        let act = if rev.activity() {
            Activity::of(&src, mask.unwrap_or(&[]))
        } else {
            Activity::all(&src)
        };
        let mut live = live_out(&shape.bb, &src, &shape.succs);
        // Inactive values never get a cotangent: no join phis for them.
        for set in &mut live {
            set.retain(|v| act.is_active(*v));
        }
        let places = src.inst_places();
        let registry = rev.registry();
        let classes = ArrayClasses::of(&src);
        let mut cx = Derivation {
            src,
            floc,
            shape,
            act,
            live,
            places,
            registry,
            callees: HashMap::default(),
            classes,
            replaced,
            fresh: known.fresh,
            passthrough: known.passthrough,
            kept_fields: known.kept_fields,
            either: known.either,
            call_elements: known.elements,
        };
        cx.request_callees(rev, module)?;
        Ok(cx)
    }

    /// The rule pieces of every user function invoked, before a builder
    /// borrows the module.
    fn request_callees(
        &mut self,
        rev: &mut Reverse<'r>,
        module: &mut Module,
    ) -> Result<(), ReverseError> {
        for b in &self.shape.bb.blocks {
            for &inst in &b.stmts {
                if self.act.primal_only(&self.src, inst) {
                    continue;
                }
                if let InstKind::Invoke { func, .. } = &self.src.insts[inst].kind {
                    let name = module.get(*func).map_or("", |f| f.name.as_str());
                    if self.registry.function_rrule_in(module, name).is_none()
                        && !self.callees.contains_key(func)
                    {
                        let pieces = rev.request(module, FuncRef::User(*func))?;
                        self.callees.insert(*func, pieces);
                    }
                }
            }
        }
        Ok(())
    }

    /// The location of primal statement `inst`.
    pub fn loc_of(&self, inst: Inst) -> Location {
        match *self.places.get(inst) {
            Some((blk, stmt)) => stmt_loc(&self.src, blk, stmt, inst, &self.floc),
            None => self.floc.clone(),
        }
    }

    /// The location of block `i` (by position), for its terminator.
    pub fn block_loc(&self, i: usize) -> Location {
        Location {
            block: Some(self.label(i)),
            ..self.floc.clone()
        }
    }

    /// The label of block `i` (by position).
    pub fn label(&self, i: usize) -> u32 {
        self.src.blocks[self.shape.bb.blocks[i].id].label
    }

    /// The type of a primal operand, read in module `m`.
    pub fn optype(&self, op: &Operand, m: &Module) -> Result<Type, ReverseError> {
        self.src
            .operand_type(op, m)
            .ok_or_else(|| internal(&self.floc, "an operand without a type"))
    }

    /// The type of the result of primal statement `inst` (`()` for none).
    pub fn result_type(&self, inst: Inst) -> Type {
        self.src.insts[inst]
            .result
            .map(|r| self.src.values[r].ty.clone())
            .unwrap_or(Type::Unit)
    }

    /// The failure for a primal that is not normalised.
    pub fn need_normal(&self, what: &str) -> ReverseError {
        need_normal(&self.floc, what)
    }
}

/// Whether reverse mode may checkpoint a loop of `src`: under a tape limit,
/// a checkpoint schedule, or a `checkpoint` statement in it.
fn checkpoints_asked(rev: &Reverse<'_>, src: &Func) -> bool {
    rev.tape_limit().is_some()
        || !rev.checkpoint_schedule().is_empty()
        || src.insts.values().any(|d| {
            matches!(
                d.kind,
                InstKind::Prim {
                    prim: Prim::Checkpoint,
                    ..
                }
            )
        })
}

impl Shape {
    /// The control-flow facts of `bb`, the block form of `src`; refuses a
    /// primal that never returns or is not normalised.
    fn new(bb: BBCode, src: &Func, floc: &Location) -> Result<Shape, ReverseError> {
        let n = bb.blocks.len();
        let preds = bb.preds();
        let succs = bb.succs();
        let rets: Vec<usize> = (0..n)
            .filter(|&i| matches!(bb.blocks[i].term, BTerm::Return(_)))
            .collect();
        let ret = match rets.as_slice() {
            [r] => *r,
            [] => {
                return Err(err(
                    floc,
                    format!(
                        "reverse mode of @{} is not possible: it never returns",
                        src.name
                    ),
                ));
            }
            _ => return Err(need_normal(floc, "one return block")),
        };
        if n == 0 || !preds[0].is_empty() {
            return Err(need_normal(floc, "an entry block without predecessors"));
        }
        for ps in &preds {
            if ps.len() > 1 && ps.iter().any(|&p| succs[p].len() > 1) {
                return Err(need_normal(floc, "no critical edges"));
            }
        }
        let to_ret = reaches(&preds, ret);
        let order = rpo(&succs, 0);
        let idom = idoms(&preds, &order);
        let cyc = on_cycle(&succs);
        let mut once = vec![false; n];
        let mut d = Some(ret);
        while let Some(b) = d {
            if !cyc[b] {
                once[b] = true;
            }
            d = idom[b];
        }
        if !cyc[0] {
            once[0] = true;
        }
        let mut reachable = vec![false; n];
        for &i in &order {
            reachable[i] = true;
        }
        let ids: Vec<Block> = bb.blocks.iter().map(|b| b.id).collect();
        let loops = RevLoops::new(src, &ids, &preds, &succs);
        Ok(Shape {
            bb,
            n,
            preds,
            succs,
            ret,
            to_ret,
            order,
            reachable,
            once,
            loops,
            idom,
        })
    }

    /// Whether a value defined in block `d` and read in block `i` is, at
    /// the read, the one computed in the same iteration of every loop around
    /// `i`: `d` is `i`, or dominates it within the same innermost loop
    /// (conservative: false when unsure).
    pub fn same_iteration(&self, d: usize, i: usize) -> bool {
        if d == i {
            return true;
        }
        let inner = self.loops.inner[i];
        if self.loops.inner[d] != inner {
            return false;
        }
        // A bounded walk up the dominator tree keeps this O(1) per query.
        let mut x = i;
        for _ in 0..SAME_ITERATION_WALK {
            let Some(up) = self.idom[x] else {
                return false;
            };
            if up == d {
                return true;
            }
            if self.loops.inner[up] != inner {
                return false;
            }
            x = up;
        }
        false
    }

    /// Whether one of the blocks `among` dominates block `i` (each block
    /// dominates itself).
    pub fn dominated_by(&self, i: usize, among: &[usize]) -> bool {
        let mut x = Some(i);
        for _ in 0..=self.n {
            let Some(y) = x else { return false };
            if among.contains(&y) {
                return true;
            }
            x = self.idom[y].filter(|&z| z != y);
        }
        false
    }

    /// Whether block `i` gets tape traffic and a reverse block: reachable
    /// from the entry and reaching the return.
    pub fn kept(&self, i: usize) -> bool {
        self.reachable[i] && self.to_ret[i]
    }
}

/// How far up the dominator tree [`Shape::same_iteration`] looks.
const SAME_ITERATION_WALK: usize = 64;

/// Refuses what reverse mode cannot take: sparse tangents (sparse duals and
/// handles) and the AD primitives other than those of a dense forward rule
/// (`dual`, `primal`, `tangent`, `frule`, `gemm`, which have rrules:
/// reverse over forward, `irad_rules::reverses_over_forward`). Tapes (`push`, `pop`) and the reverse pieces' lookups
/// (`revfwd`, `revback`) are refused: reverse mode is not nested over
/// itself.
pub(super) fn check_supported(func: &Func, loc: &Location) -> Result<(), ReverseError> {
    if func.ret.mentions_sparse() || func.values.values().any(|v| v.ty.mentions_sparse()) {
        return Err(err(
            loc,
            format!(
                "reverse mode of @{} is not supported: it works on sparse tangents",
                func.name
            ),
        ));
    }
    for data in func.insts.values() {
        if let InstKind::Prim { prim, .. } = data.kind
            && irad_rules::is_ad_prim(prim)
            && !irad_rules::reverses_over_forward(prim)
        {
            return Err(err(
                loc,
                format!(
                    "reverse mode of @{} is not supported: it calls the AD primitive `{prim}`",
                    func.name
                ),
            ));
        }
    }
    Ok(())
}

/// The argument operands of a statement.
pub(super) fn args_of(kind: &InstKind) -> &[Operand] {
    match kind {
        InstKind::Prim { args, .. }
        | InstKind::Invoke { args, .. }
        | InstKind::CallValue { args, .. } => args,
        InstKind::Phi { .. } => &[],
    }
}

/// The forward-sweep operand of a primal operand.
pub(super) fn map_op(
    fval: &SecondaryMap<Value, Option<Operand>>,
    op: &Operand,
    loc: &Location,
) -> Result<Operand, ReverseError> {
    match op {
        Operand::Const(c) => Ok(Operand::Const(*c)),
        Operand::Value(v) => {
            fval[*v].ok_or_else(|| internal(loc, format!("value {v:?} used before its definition")))
        }
    }
}

/// The shadows of a primal operand (none for a constant).
pub(super) fn shadows_of(fshadow: &Shadows, op: &Operand) -> SmallVec<[Operand; 1]> {
    match op {
        Operand::Value(v) => fshadow[*v].clone(),
        Operand::Const(_) => SmallVec::new(),
    }
}

/// `m[key] += c` (or `= c` where absent).
pub(super) fn accumulate(
    b: &mut FuncBuilder<'_>,
    m: &mut Cots,
    key: Key,
    c: Operand,
) -> Result<(), String> {
    let new = match m.get(&key) {
        Some(&old) => emit_value(b, Prim::Add, &[old, c])?,
        None => c,
    };
    m.insert(key, new);
    Ok(())
}

/// The result of `prim(args)` as an operand.
pub(super) fn emit_value(
    b: &mut FuncBuilder<'_>,
    prim: Prim,
    args: &[Operand],
) -> Result<Operand, String> {
    irad_rules::emit::value(b, prim, args).map_err(|e| e.to_string())
}

/// A reverse-mode failure at `loc`.
pub(super) fn err(loc: &Location, msg: impl Into<String>) -> ReverseError {
    ReverseError::new(loc.clone(), msg)
}

/// An internal error of reverse mode (a bug, not a fault of the program) at
/// `loc`: the message `internal error: {what}`.
pub(super) fn internal(loc: &Location, what: impl std::fmt::Display) -> ReverseError {
    ReverseError::internal(loc.clone(), what)
}

/// An internal builder failure at `loc`.
pub(super) fn build_err(loc: &Location) -> impl Fn(irad_ir::BuildError) -> ReverseError + '_ {
    move |e| internal(loc, e)
}

/// The failure for a primal that is not normalised: `what` it lacks.
fn need_normal(floc: &Location, what: &str) -> ReverseError {
    internal(
        floc,
        format_args!(
            "reverse mode needs a normalised function ({what}); run the normalisation passes first"
        ),
    )
}
