//! SSA checks: parameters and results are recorded where they are defined,
//! every use names a defined value whose definition dominates it, phis come
//! first and have exactly one entry per predecessor.
//!
//! Assumes `cfg::build_cfg` has run (for everything but `check_params`).
//! Guarantees that `Defs` tells, for every value of the table, whether it is
//! defined and where, and whether its type may be compared and printed.

use super::{At, Ctx, Slot};
use crate::MAX_NESTING;
use crate::entity::SecondaryMap;
use crate::func::{Block, Inst, InstKind, Operand, Terminator, Value, ValueDef};

/// How a value is defined.
#[derive(Copy, Clone, PartialEq, Eq, Debug, Default)]
pub(crate) enum Def {
    /// Not (yet) looked at: a handle beyond the table.
    #[default]
    Unknown,
    /// A parameter, recorded at its position.
    Param,
    /// The result of the statement at this slot, which records it.
    At(Slot),
    /// The result of a statement that no block lists.
    Orphan,
    /// The value's definition record does not agree with the parameter list or
    /// with the statement it names.
    Mismatch,
}

/// Per-value facts for the checks of uses and types.
#[derive(Default)]
pub(crate) struct Defs {
    def: SecondaryMap<Value, Def>,
    /// Whether the value's type nests at most `MAX_NESTING` deep.
    shallow: SecondaryMap<Value, bool>,
    /// The layout index of the last block with a non-phi statement seen so far.
    non_phi_in: Option<u32>,
    /// `pred_mark[p] == b + 1` when block `p` is a predecessor of the block
    /// at layout index `b`, the one whose phis are being checked.
    pred_mark: SecondaryMap<Block, u32>,
    marked: Option<u32>,
    /// `seen[p] == phi_stamp` when the current phi has an entry for `p`.
    seen: SecondaryMap<Block, u32>,
    phi_stamp: u32,
}

/// Where a value is used: at a statement index of a block (the terminator's
/// index is the number of statements), or at the end of a predecessor for a
/// phi entry.
#[derive(Copy, Clone)]
enum Site {
    At { block: u32, index: u32 },
    Edge { pred: u32 },
}

impl Defs {
    /// The type of `v` if it is defined and shallow enough to compare.
    pub fn known_type<'f>(
        &self,
        ctx_f: &'f crate::func::Func,
        v: Value,
    ) -> Option<&'f crate::types::Type> {
        match self.def.get(v) {
            Def::Param | Def::At(_) if *self.shallow.get(v) => ctx_f.values.get(v).map(|d| &d.ty),
            _ => None,
        }
    }

    /// Whether `v`'s type nests at most `MAX_NESTING` deep.
    pub fn is_shallow(&self, v: Value) -> bool {
        *self.shallow.get(v)
    }
}

/// Checks that each parameter is a valid value recorded as that parameter.
pub(crate) fn check_params(ctx: &mut Ctx) {
    for (n, &v) in ctx.f.params.iter().enumerate() {
        match ctx.f.values.get(v) {
            None => {
                let msg = format!("parameter {} is invalid value handle {}", n + 1, v.as_u32());
                ctx.err_func(msg);
            }
            Some(data) if data.def != ValueDef::Param(n as u32) => {
                let msg = format!(
                    "parameter {} is {}, which is recorded as {}: expected parameter {}",
                    n + 1,
                    ctx.value_name(v),
                    describe_def(data.def),
                    n + 1
                );
                ctx.err_func(msg);
            }
            Some(_) => {}
        }
    }
}

/// Classifies every value of the table.
pub(crate) fn compute_defs(ctx: &mut Ctx) {
    let f = ctx.f;
    let mut defs = Defs::default();
    for (v, data) in f.values.iter() {
        let def = match data.def {
            ValueDef::Param(n) => {
                if f.params.get(n as usize) == Some(&v) {
                    Def::Param
                } else {
                    Def::Mismatch
                }
            }
            ValueDef::Inst(inst) => match f.insts.get(inst) {
                Some(idata) if idata.result == Some(v) => match ctx.cfg.slot_of(inst) {
                    Some(slot) => Def::At(slot),
                    None => Def::Orphan,
                },
                _ => Def::Mismatch,
            },
        };
        defs.def.set(v, def);
        defs.shallow.set(v, data.ty.depth() <= MAX_NESTING);
    }
    ctx.defs = defs;
}

/// Checks statement `inst` at `slot`: its result record, its position if it
/// is a phi, its phi entries, and the definitions of the values it uses.
pub(crate) fn check_inst(ctx: &mut Ctx, slot: Slot, inst: Inst) {
    let Some(data) = ctx.f.insts.get(inst) else {
        return;
    };
    let at = At::Inst(slot, inst);
    if let Some(r) = data.result {
        check_result(ctx, at, inst, r);
    }
    let site = Site::At {
        block: slot.block,
        index: slot.index,
    };
    match &data.kind {
        InstKind::Phi { entries } => {
            check_phi_position(ctx, at, slot);
            if slot.block == 0 {
                ctx.err_at(
                    at,
                    "phi in the entry block, which has no predecessors".into(),
                );
                return;
            }
            check_phi_entries(ctx, at, slot.block, entries);
        }
        InstKind::Prim { args, .. } | InstKind::Invoke { args, .. } => {
            ctx.defs.non_phi_in = Some(slot.block);
            check_operands(ctx, at, site, args);
        }
        InstKind::CallValue { callee, args } => {
            ctx.defs.non_phi_in = Some(slot.block);
            check_use(ctx, at, site, *callee);
            check_operands(ctx, at, site, args);
        }
    }
}

/// Checks the definitions of the values the terminator of block `bi` uses.
pub(crate) fn check_term(ctx: &mut Ctx, bi: u32) {
    let Some(data) = ctx.f.blocks.get(ctx.cfg.layout[bi as usize]) else {
        return;
    };
    let site = Site::At {
        block: bi,
        index: data.insts.len() as u32,
    };
    match &data.term {
        Some(Terminator::GotoIfNot { cond: op, .. })
        | Some(Terminator::Switch { index: op, .. })
        | Some(Terminator::Return(op)) => {
            if let Operand::Value(v) = op {
                check_use(ctx, At::Term(bi), site, *v);
            }
        }
        Some(Terminator::Goto(_)) | None => {}
    }
}

fn check_result(ctx: &mut Ctx, at: At, inst: Inst, r: Value) {
    match ctx.f.values.get(r) {
        None => {
            let msg = format!("statement result is invalid value handle {}", r.as_u32());
            ctx.err_at(at, msg);
        }
        Some(data) if data.def != ValueDef::Inst(inst) => {
            let msg = format!(
                "statement result {} is recorded as {}: expected this statement",
                ctx.value_name(r),
                describe_def(data.def)
            );
            ctx.err_at(at, msg);
        }
        Some(_) => {}
    }
}

fn check_phi_position(ctx: &mut Ctx, at: At, slot: Slot) {
    if ctx.defs.non_phi_in == Some(slot.block) {
        let msg = "phi after a statement that is not a phi: phis must come first in a block";
        ctx.err_at(at, msg.into());
    }
}

/// Checks that the entries of a phi in block `b` match its predecessors exactly
/// and that their operands are available at the end of each predecessor.
fn check_phi_entries(ctx: &mut Ctx, at: At, b: u32, entries: &[(Block, Operand)]) {
    let block = ctx.cfg.layout[b as usize];
    if ctx.defs.marked != Some(b) {
        for &p in ctx.cfg.flow.preds(block) {
            ctx.defs.pred_mark.set(p, b + 1);
        }
        ctx.defs.marked = Some(b);
    }
    ctx.defs.phi_stamp += 1;
    let stamp = ctx.defs.phi_stamp;
    for &(pred, op) in entries {
        let Some(p) = ctx.cfg.index_of(pred) else {
            let msg = if ctx.f.blocks.is_valid(pred) {
                format!(
                    "phi has an entry for {}, which is not a predecessor of {}",
                    ctx.block_name(pred),
                    ctx.block_name(block)
                )
            } else {
                format!("phi entry names invalid block handle {}", pred.as_u32())
            };
            ctx.err_at(at, msg);
            continue;
        };
        if ctx.defs.pred_mark[pred] != b + 1 {
            let msg = format!(
                "phi has an entry for {}, which is not a predecessor of {}",
                ctx.block_name(pred),
                ctx.block_name(block)
            );
            ctx.err_at(at, msg);
            continue;
        }
        if ctx.defs.seen[pred] == stamp {
            let msg = format!(
                "phi has more than one entry for predecessor {}",
                ctx.block_name(pred)
            );
            ctx.err_at(at, msg);
            continue;
        }
        ctx.defs.seen.set(pred, stamp);
        if let Operand::Value(v) = op {
            check_use(ctx, at, Site::Edge { pred: p }, v);
        }
    }
    for i in 0..ctx.cfg.flow.preds(block).len() {
        let p = ctx.cfg.flow.preds(block)[i];
        if ctx.defs.seen[p] != stamp {
            let msg = format!("phi has no entry for predecessor {}", ctx.block_name(p));
            ctx.err_at(at, msg);
        }
    }
}

fn check_operands(ctx: &mut Ctx, at: At, site: Site, args: &[Operand]) {
    for op in args {
        if let Operand::Value(v) = op {
            check_use(ctx, at, site, *v);
        }
    }
}

/// Checks that `v` is defined and that its definition dominates `site`.
fn check_use(ctx: &mut Ctx, at: At, site: Site, v: Value) {
    if let Some(msg) = use_problem(ctx, site, v) {
        ctx.err_at(at, msg);
    }
}

/// What is wrong with using `v` at `site`, if anything. Names are formatted
/// only for errors: this runs for every use in the function.
fn use_problem(ctx: &Ctx, site: Site, v: Value) -> Option<String> {
    if !ctx.f.values.is_valid(v) {
        return Some(format!("use of invalid value handle %{}", v.as_u32()));
    }
    let name = || ctx.value_name(v);
    let d = match *ctx.defs.def.get(v) {
        Def::Param => return None,
        Def::At(d) => d,
        Def::Orphan => {
            return Some(format!(
                "use of {}, whose defining statement is in no block",
                name()
            ));
        }
        Def::Mismatch | Def::Unknown => {
            return Some(format!(
                "use of undefined value {}: expected a parameter or the result of a statement",
                name()
            ));
        }
    };
    let block_name = |bi: u32| ctx.block_name(ctx.cfg.layout[bi as usize]);
    let cfg = &ctx.cfg;
    match site {
        Site::At { block, index } => {
            if !cfg.reachable(block) {
                None
            } else if d.block == block {
                if d.index == index {
                    Some(format!(
                        "use of {} in the statement that defines it",
                        name()
                    ))
                } else if d.index > index {
                    Some(format!(
                        "use of {} before its definition: it is defined by statement {} of this block",
                        name(),
                        d.index + 1
                    ))
                } else {
                    None
                }
            } else if !cfg.reachable(d.block) {
                Some(format!(
                    "use of {}, which is defined in unreachable block {}",
                    name(),
                    block_name(d.block)
                ))
            } else if !cfg.dominates(d.block, block) {
                Some(format!(
                    "use of {} is not dominated by its definition in {}",
                    name(),
                    block_name(d.block)
                ))
            } else {
                None
            }
        }
        Site::Edge { pred } => {
            if !cfg.reachable(pred) || d.block == pred {
                None
            } else if !cfg.reachable(d.block) {
                Some(format!(
                    "phi entry for {} uses {}, which is defined in unreachable block {}",
                    block_name(pred),
                    name(),
                    block_name(d.block)
                ))
            } else if !cfg.dominates(d.block, pred) {
                let pred_name = block_name(pred);
                Some(format!(
                    "phi entry for {pred_name} uses {}, whose definition in {} does not dominate the end of {pred_name}",
                    name(),
                    block_name(d.block)
                ))
            } else {
                None
            }
        }
    }
}

fn describe_def(def: ValueDef) -> String {
    match def {
        ValueDef::Param(n) => format!("parameter {}", n as u64 + 1),
        ValueDef::Inst(inst) => format!("the result of statement handle {}", inst.as_u32()),
    }
}
