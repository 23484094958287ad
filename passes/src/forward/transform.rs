//! The forward transform of one function body: `make_fwds_ad_stmts` maps each
//! primal statement to the statements of its forward rule, in a function with
//! the primal's blocks, labels and layout.
//!
//! Value mapping (width N): a value whose type has no tangent (`i64`, `bool`,
//! `()`, `[i64]`, `[bool]`, functions) maps to a value of the same type; any
//! other value of type T maps to a `dual<T, N>`. A dual value is kept in one or
//! both of two forms, each made once where the value is defined, so that it
//! dominates every use:
//! - *unpacked*: its primal and N tangents (what primitive rules take and
//!   give; rule results start in this form);
//! - *packed*: the `dual<T, N>` value (what phis, calls and `return` take;
//!   parameters, phis and call results start in this form).
//!
//! A scan of the uses decides which forms each value needs, so nothing is
//! packed or projected that is not used. Constants take part with a zero
//! tangent: rules see no tangent at all (and emit no tangent work), packed
//! positions get `dual(c, 0.0, ...)` built where they are needed.
//!
//! A primal that is itself a dense forward rule (forward over forward) needs
//! nothing special here: its duals are values with a tangent type like any
//! other (`Type::tangent` of `dual<T, N>` is `dual<T', N>`), and `dual`,
//! `primal`, `tangent`, `frule` go through their frules (irad_rules'
//! `dual.rs`).
//!
//! A sparse rule (`@f.fwds`, the sparse gradient's wrapper) in dense lanes
//! needs nothing special either: handles have handles as tangents, and the
//! builder's primitives their frules (irad_rules' `sparse_fwd.rs`).
//!
//! Assumes a verified primal (without sparse tangents in sparse mode,
//! [`check_nestable`]). Blocks are filled in reverse
//! postorder (definitions before uses), phi entries added at the end;
//! unreachable blocks are dropped with the phi entries that come from them.

use super::{Forward, ForwardError};
use crate::activity::Activity;
use irad_ir::entity::{EntitySet, SecondaryMap};
use irad_ir::flow::ControlFlowGraph;
use irad_ir::{
    Block, BuildError, Const, Func, FuncBuilder, FuncId, FuncRef, InstKind, Lanes, Location,
    Module, Operand, Prim, Terminator, Type, Value, ValueDef,
};
use irad_rules::{Callee, FruleCall, FwdArg, FwdOut, Registry, RuleError, emit};
use smallvec::SmallVec;
use std::collections::HashMap;

type Tangents = SmallVec<[Operand; 1]>;

/// What a primal value became in the rule.
#[derive(Clone, Debug)]
enum Mapped {
    /// A value without a tangent type: the same value in the rule.
    Plain(Operand),
    /// A dual value, in the forms made so far.
    Dual {
        packed: Option<Operand>,
        unpacked: Option<(Operand, Option<Tangents>)>,
    },
}

/// Refuses what forward mode cannot take: in sparse mode, a function that
/// works on sparse tangents (`dual<T, sparse>`, `sparse` handles: sparse
/// mode over a sparse rule would need handles of handles). Dense lanes take
/// it (forward over a sparse rule: the tangent of a handle is a handle, the
/// builder's frules are irad_rules' `sparse_fwd.rs`), and both take dense
/// duals (the tangent of a `dual<T, N>` is a `dual<T', N>`, in sparse mode
/// a `dual` of handles).
pub(super) fn check_nestable(
    func: &Func,
    loc: &Location,
    width: Lanes,
) -> Result<(), ForwardError> {
    if !width.is_sparse() {
        return Ok(());
    }
    let tys = || std::iter::once(&func.ret).chain(func.values.values().map(|v| &v.ty));
    if tys().any(Type::mentions_sparse) {
        return Err(ForwardError::new(
            loc.clone(),
            format!(
                "sparse forward mode of @{} is not supported: it works on sparse tangents (forward mode over a sparse rule takes dense lanes)",
                func.name
            ),
        ));
    }
    Ok(())
}

/// The dual of `primal` with `tangents` (zero tangents built by
/// `irad_rules::emit::zero_tangents` when `None`), or `primal` itself when
/// `ty` has no tangent.
pub(super) fn pack(
    b: &mut FuncBuilder<'_>,
    primal: &Operand,
    tangents: Option<&[Operand]>,
    ty: &Type,
    width: Lanes,
) -> Result<Operand, RuleError> {
    if !ty.has_tangent() {
        return Ok(*primal);
    }
    let mut args: SmallVec<[Operand; 4]> = SmallVec::with_capacity(width.count() + 1);
    args.push(*primal);
    match tangents {
        Some(ts) => args.extend_from_slice(ts),
        None => {
            let zeros = emit::zero_tangents(b, ty, *primal, width)?
                .ok_or_else(|| RuleError::Unsupported(format!("no zero tangent of type {ty}")))?;
            args.extend_from_slice(&zeros);
        }
    }
    emit::value(b, Prim::Dual, &args)
}

/// The rule argument for packed operand `op` of primal type `ty`: projected
/// into primal and tangents when `ty` has a tangent.
pub(super) fn unpack(
    b: &mut FuncBuilder<'_>,
    op: Operand,
    ty: &Type,
    width: Lanes,
) -> Result<FwdArg, BuildError> {
    if !ty.has_tangent() {
        return Ok(FwdArg {
            primal: op,
            ty: ty.clone(),
            tangents: None,
        });
    }
    let (p, ts) = project(b, op, width)?;
    Ok(FwdArg {
        primal: p,
        ty: ty.clone(),
        tangents: Some(ts),
    })
}

/// `primal(op)` and `tangent(op, k)` for every lane.
fn project(
    b: &mut FuncBuilder<'_>,
    op: Operand,
    width: Lanes,
) -> Result<(Operand, Tangents), BuildError> {
    let missing = || BuildError::Type("a projection without result".into());
    let p = b.prim(Prim::Primal, &[op])?.ok_or_else(missing)?;
    let mut ts = Tangents::with_capacity(width.count());
    for k in 0..width.count() {
        let k = i64::try_from(k).map_err(|_| BuildError::Type("too many lanes".into()))?;
        let t = b
            .prim(Prim::Tangent, &[op, Operand::from(k)])?
            .ok_or_else(missing)?;
        ts.push(Operand::Value(t));
    }
    Ok((Operand::Value(p), ts))
}

/// Runs `rule` on `call` and checks what it returned; both failures name the
/// rule and the place.
pub(super) fn emit_checked(
    b: &mut FuncBuilder<'_>,
    rule: &dyn irad_rules::Frule,
    call: &FruleCall<'_>,
    loc: &Location,
) -> Result<FwdOut, ForwardError> {
    let fail = |msg: String| {
        ForwardError::new(
            loc.clone(),
            format!("forward rule of `{}`: {msg}", call.callee),
        )
    };
    let out = rule.emit(b, call).map_err(|e| fail(e.to_string()))?;
    check_out(b, &out, call.result, call.lanes).map_err(fail)?;
    Ok(out)
}

/// Checks what a rule returned against the primal result type `ty`.
fn check_out(b: &FuncBuilder<'_>, out: &FwdOut, ty: &Type, width: Lanes) -> Result<(), String> {
    let got = b.operand_type(&out.primal).map_err(|e| e.to_string())?;
    if &got != ty {
        return Err(format!("its primal result has type {got}, expected {ty}"));
    }
    match (&out.tangents, ty.tangent_at(width)) {
        (None, None) => Ok(()),
        (Some(_), None) => Err(format!("it returned tangents for {ty}, which has none")),
        (None, Some(_)) if emit::contains_array(ty) => Err(format!(
            "it returned no tangents for {ty}, which holds an array"
        )),
        (None, Some(_)) => Ok(()),
        (Some(ts), Some(tan)) => {
            if ts.len() != width.count() {
                return Err(format!(
                    "it returned {} tangents, expected {}",
                    ts.len(),
                    width.count()
                ));
            }
            for t in ts {
                let got = b.operand_type(t).map_err(|e| e.to_string())?;
                if got != tan {
                    return Err(format!("a tangent has type {got}, expected {tan}"));
                }
            }
            Ok(())
        }
    }
}

/// Which forms of each primal value the rule needs.
#[derive(Default)]
struct Needs {
    unpacked: EntitySet<Value>,
    packed: EntitySet<Value>,
}

/// The state of one rule being built.
struct Ctx<'a, 'm> {
    b: FuncBuilder<'m>,
    src: &'a Func,
    registry: &'a Registry,
    width: Lanes,
    needs: Needs,
    vals: SecondaryMap<Value, Option<Mapped>>,
    /// Static callees: their rule, or `None` when a registered rule is
    /// emitted in place (the callee is marked primitive).
    callees: HashMap<FuncId, Option<FuncId>>,
    /// Callee names and signatures, read before the builder took the module.
    callee_info: HashMap<FuncId, (String, irad_ir::FnType)>,
    /// Which values need tangents.
    act: Activity,
}

/// Builds the body of `rule`, the forward rule of `primal` at `width`, in
/// which the parameters with `mask[i]` false (all active when `None`) carry no
/// tangent.
pub(super) fn derive(
    fwd: &mut Forward<'_>,
    module: &mut Module,
    primal: FuncId,
    rule: FuncId,
    width: Lanes,
    mask: Option<&[bool]>,
) -> Result<(), ForwardError> {
    let src = module
        .get(primal)
        .ok_or_else(|| ForwardError::new(Location::default(), "invalid function handle"))?
        .clone();
    let floc = Location {
        func: Some(src.name.as_str().into()),
        pos: src.pos,
        ..Location::default()
    };
    check_nestable(&src, &floc, width)?;
    let cfg = ControlFlowGraph::with_function(&src);
    let reachable = cfg.reachable();
    let live: Vec<Block> = cfg
        .blocks()
        .iter()
        .copied()
        .filter(|&b| reachable.contains(b))
        .collect();
    let registry = fwd.registry();
    // A function that touches a tape, or calls one that does, reads and
    // writes values that activity analysis cannot follow (a pop gives what
    // another function pushed; a call that pops is varied whatever its
    // arguments): every value with a tangent type gets tangents.
    let act = if fwd.activity() && !uses_tapes(module, primal) {
        Activity::of(&src, mask.unwrap_or(&[]))
    } else {
        Activity::all(&src)
    };

    // Which forms each value needs, and which callees there are.
    let mut needs = Needs::default();
    let mut callees: HashMap<FuncId, Option<FuncId>> = HashMap::new();
    let mut callee_info = HashMap::new();
    for &blk in &live {
        let data = &src.blocks[blk];
        for &inst in &data.insts {
            let passive = is_passive(&src, &act, inst);
            match &src.insts[inst].kind {
                InstKind::Prim { args, .. } => note(&mut needs.unpacked, args),
                InstKind::Phi { entries } => {
                    let set = if passive {
                        &mut needs.unpacked
                    } else {
                        &mut needs.packed
                    };
                    for (pred, op) in entries {
                        if reachable.contains(*pred) {
                            note(set, std::slice::from_ref(op));
                        }
                    }
                }
                InstKind::Invoke { args, .. } | InstKind::CallValue { args, .. } if passive => {
                    note(&mut needs.unpacked, args);
                }
                InstKind::Invoke { func, args } => {
                    let callee = module.get(*func).ok_or_else(|| {
                        ForwardError::new(floc.clone(), "invalid function handle")
                    })?;
                    let marked = registry.function_frule_in(module, &callee.name).is_some();
                    callee_info.insert(*func, (callee.name.clone(), callee.fn_type()));
                    if marked {
                        note(&mut needs.unpacked, args);
                        callees.insert(*func, None);
                    } else {
                        note(&mut needs.packed, args);
                        if let std::collections::hash_map::Entry::Vacant(e) = callees.entry(*func) {
                            let id = fwd.request(module, FuncRef::User(*func), width)?;
                            e.insert(Some(id));
                        }
                    }
                }
                InstKind::CallValue { args, .. } => note(&mut needs.packed, args),
            }
        }
        if let Some(Terminator::Return(op)) = &data.term {
            note(&mut needs.packed, std::slice::from_ref(op));
        }
    }

    let b = FuncBuilder::new(module, rule)
        .map_err(|e| ForwardError::new(floc.clone(), e.to_string()))?;
    let mut cx = Ctx {
        b,
        src: &src,
        registry,
        width,
        needs,
        vals: SecondaryMap::new(),
        callees,
        callee_info,
        act,
    };
    cx.body(&cfg, &reachable, &floc)?;
    // Arrays carried through loops as duals: a phi per part, which code
    // generation can free as the primal's (`split.rs`).
    super::split::split_dual_array_phis(module, rule)
        .map_err(|e| ForwardError::internal(floc.clone(), e.to_string()))?;
    Ok(())
}

/// Whether `f` or a function it calls (statically, transitively) runs `push`
/// or `pop`, or looks up a reverse rule at run time (`revfwd`, `revback`:
/// the pieces it then calls through a function value use the tapes): a
/// reverse-mode piece, or a function calling one.
fn uses_tapes(module: &Module, f: FuncId) -> bool {
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![f];
    while let Some(g) = stack.pop() {
        if !seen.insert(g) {
            continue;
        }
        let Some(func) = module.get(g) else { continue };
        for inst in func.insts.values() {
            match &inst.kind {
                InstKind::Prim {
                    prim: Prim::Push | Prim::Pop | Prim::Revfwd | Prim::Revback,
                    ..
                } => return true,
                InstKind::Invoke { func: callee, .. } => stack.push(*callee),
                _ => {}
            }
        }
    }
    false
}

/// Whether statement `inst` runs as its primal statement alone (see
/// [`Activity::primal_only`]).
fn is_passive(src: &Func, act: &Activity, inst: irad_ir::Inst) -> bool {
    act.primal_only(src, inst)
}

/// Records the values among `ops`.
fn note(set: &mut EntitySet<Value>, ops: &[Operand]) {
    set.extend(ops.iter().filter_map(|op| match op {
        Operand::Value(v) => Some(*v),
        Operand::Const(_) => None,
    }));
}

impl Ctx<'_, '_> {
    fn build_err(&self, loc: &Location) -> impl Fn(BuildError) -> ForwardError + use<> {
        let loc = loc.clone();
        move |e| ForwardError::internal(loc.clone(), e)
    }

    /// Every block, statement and terminator of the rule.
    fn body(
        &mut self,
        cfg: &ControlFlowGraph,
        reachable: &EntitySet<Block>,
        floc: &Location,
    ) -> Result<(), ForwardError> {
        let src = self.src;
        let width = self.width;
        let err = self.build_err(floc);
        // The blocks, in the primal's layout order, with its labels.
        let mut bmap: SecondaryMap<Block, Option<Block>> = SecondaryMap::new();
        for &blk in cfg.blocks() {
            if reachable.contains(blk) {
                self.b.set_pos(src.blocks[blk].pos);
                let nb = self
                    .b
                    .create_block_labeled(src.blocks[blk].label)
                    .map_err(&err)?;
                bmap.set(blk, Some(nb));
            }
        }
        // The parameters: plain, or packed duals.
        for (i, &p) in src.params.iter().enumerate() {
            let nv = Operand::Value(self.b.param(i).map_err(&err)?);
            let m = if src.values[p].ty.has_tangent() {
                Mapped::Dual {
                    packed: Some(nv),
                    unpacked: None,
                }
            } else {
                Mapped::Plain(nv)
            };
            self.vals.set(p, Some(m));
        }
        let mut phi_of: SecondaryMap<Value, Option<Value>> = SecondaryMap::new();
        // (primal phi, index of the entry in it, new predecessor, operand)
        let mut entries: Vec<(Value, usize, Block, Operand)> = Vec::new();
        for blk in cfg.reverse_postorder() {
            let nb =
                bmap[blk].ok_or_else(|| ForwardError::internal(floc.clone(), "block not built"))?;
            self.b.switch_to_block(nb).map_err(&err)?;
            let data = &src.blocks[blk];
            let mut defined: Vec<Value> = Vec::new();
            if cfg.entry() == Some(blk) {
                self.b.set_pos(src.pos);
                defined.extend(src.params.iter().copied());
            }
            let mut rest = data.insts.as_slice();
            let mut passive_phis: Vec<Value> = Vec::new();
            while let Some((&inst, tail)) = rest.split_first() {
                let InstKind::Phi { .. } = &src.insts[inst].kind else {
                    break;
                };
                rest = tail;
                let Some(r) = src.insts[inst].result else {
                    continue;
                };
                self.b.set_pos(src.insts[inst].pos);
                if is_passive(src, &self.act, inst) {
                    // An inactive phi carries its primal only.
                    let nv = self.b.phi(src.values[r].ty.clone(), &[]).map_err(&err)?;
                    self.name(nv, r, "");
                    phi_of.set(r, Some(nv));
                    let m = Mapped::Dual {
                        packed: None,
                        unpacked: Some((Operand::Value(nv), None)),
                    };
                    self.vals.set(r, Some(m));
                    passive_phis.push(r);
                    continue;
                }
                let ty = src.values[r].ty.forward(width);
                let nv = self.b.phi(ty, &[]).map_err(&err)?;
                self.name(nv, r, "");
                phi_of.set(r, Some(nv));
                let m = if src.values[r].ty.has_tangent() {
                    Mapped::Dual {
                        packed: Some(Operand::Value(nv)),
                        unpacked: None,
                    }
                } else {
                    Mapped::Plain(Operand::Value(nv))
                };
                self.vals.set(r, Some(m));
                defined.push(r);
            }
            // Parameters and phis that primitive statements read: project them
            // once, here, where they dominate every use.
            for v in defined {
                self.ensure_unpacked(v, floc)?;
            }
            // Inactive phis that calls, returns or active phis take packed:
            // their dual with zero tangents, once.
            for v in passive_phis {
                if self.needs.packed.contains(v) {
                    let ty = src.values[v].ty.clone();
                    let d = self.packed(&Operand::Value(v), &ty, floc)?;
                    if let Some(Mapped::Dual { packed, .. }) = self.vals.get_mut(v) {
                        *packed = Some(d);
                    }
                }
            }
            let first = data.insts.len() - rest.len();
            for (k, &inst) in rest.iter().enumerate() {
                let idata = &src.insts[inst];
                self.b.set_pos(idata.pos);
                let loc = stmt_loc(src, blk, (first + k) as u32 + 1, inst, floc);
                self.make_fwds_ad_stmts(&idata.kind, idata.result, &loc)?;
            }
            // Phi entries of the successors for the edges out of this block.
            let tloc = Location {
                block: Some(data.label),
                stmt: u32::try_from(data.insts.len() + 1).ok(),
                pos: data.term_pos.or(floc.pos),
                ..floc.clone()
            };
            self.b.set_pos(data.term_pos);
            for &succ in cfg.succs(blk) {
                for &inst in &src.blocks[succ].insts {
                    let InstKind::Phi { entries: es } = &src.insts[inst].kind else {
                        break;
                    };
                    let Some(r) = src.insts[inst].result else {
                        continue;
                    };
                    let passive = is_passive(src, &self.act, inst);
                    for (k, (pred, op)) in es.iter().enumerate() {
                        if *pred == blk {
                            let ty = &src.values[r].ty;
                            let nop = if passive {
                                self.primal_of(op, &tloc)?
                            } else {
                                self.packed(op, ty, &tloc)?
                            };
                            entries.push((r, k, nb, nop));
                        }
                    }
                }
            }
            let term = data
                .term
                .as_ref()
                .ok_or_else(|| ForwardError::new(tloc.clone(), "block without terminator"))?;
            match term {
                Terminator::Goto(t) => {
                    let t = bmap[*t].ok_or_else(|| unreachable_target(&tloc))?;
                    self.b.goto(t).map_err(&err)?;
                }
                Terminator::GotoIfNot { cond, target } => {
                    let c = self.plain(cond, &tloc)?;
                    let t = bmap[*target].ok_or_else(|| unreachable_target(&tloc))?;
                    self.b.gotoifnot(c, t).map_err(&err)?;
                }
                Terminator::Switch { index, targets } => {
                    let i = self.plain(index, &tloc)?;
                    let ts = targets
                        .iter()
                        .map(|t| bmap[*t].ok_or_else(|| unreachable_target(&tloc)))
                        .collect::<Result<SmallVec<[Block; 4]>, _>>()?;
                    self.b.switch(i, &ts).map_err(&err)?;
                }
                Terminator::Return(op) => {
                    let r = self.packed(op, &src.ret, &tloc)?;
                    self.b.ret(r).map_err(&err)?;
                }
            }
        }
        // In the primal's entry order, so the rule reads like the primal.
        entries.sort_by_key(|&(phi, k, _, _)| (phi, k));
        for (phi, _, pred, op) in entries {
            let nv =
                phi_of[phi].ok_or_else(|| ForwardError::internal(floc.clone(), "phi not built"))?;
            self.b.add_phi_entry(nv, pred, op).map_err(&err)?;
        }
        Ok(())
    }

    /// Gives new value `nv` the name of primal value `v` (plus `suffix`), if
    /// that makes a valid name.
    fn name(&mut self, nv: Value, v: Value, suffix: &str) {
        if let Some(name) = &self.src.values[v].name {
            // Inline up to 24 bytes, as the names themselves ([`ValueName`]).
            let mut full = name.clone();
            full.push_str(suffix);
            // An invalid name (a number with a suffix) is simply not given.
            let _ = self.b.set_name(nv, &full);
        }
    }

    /// Makes the unpacked form of dual `v` if primitive statements read it.
    fn ensure_unpacked(&mut self, v: Value, loc: &Location) -> Result<(), ForwardError> {
        if !self.needs.unpacked.contains(v) {
            return Ok(());
        }
        let Some(Mapped::Dual {
            packed: Some(p),
            unpacked: None,
        }) = self.vals[v].clone()
        else {
            return Ok(());
        };
        if self.act.is_inactive(v) {
            let pr = self.project_primal(p, loc)?;
            if let Operand::Value(pv) = pr {
                self.name(pv, v, ".p");
            }
            self.vals.set(
                v,
                Some(Mapped::Dual {
                    packed: Some(p),
                    unpacked: Some((pr, None)),
                }),
            );
            return Ok(());
        }
        let (pr, ts) = project(&mut self.b, p, self.width).map_err(self.build_err(loc))?;
        if let Operand::Value(pv) = pr {
            self.name(pv, v, ".p");
        }
        for (k, t) in ts.iter().enumerate() {
            if let Operand::Value(tv) = *t {
                let suffix = if self.width.count() == 1 {
                    ".t".to_string()
                } else {
                    format!(".t{k}")
                };
                self.name(tv, v, &suffix);
            }
        }
        self.vals.set(
            v,
            Some(Mapped::Dual {
                packed: Some(p),
                unpacked: Some((pr, Some(ts))),
            }),
        );
        Ok(())
    }

    /// Operand `op` of a type without tangent.
    fn plain(&self, op: &Operand, loc: &Location) -> Result<Operand, ForwardError> {
        match op {
            Operand::Const(_) => Ok(*op),
            Operand::Value(v) => match self.vals[*v].as_ref() {
                Some(Mapped::Plain(o)) => Ok(*o),
                _ => Err(missing(loc, *v)),
            },
        }
    }

    /// Operand `op` of primal type `ty` as a rule argument.
    fn arg(&self, op: &Operand, ty: &Type, loc: &Location) -> Result<FwdArg, ForwardError> {
        match op {
            Operand::Const(_) => Ok(FwdArg {
                primal: *op,
                ty: ty.clone(),
                tangents: None,
            }),
            Operand::Value(v) => match self.vals[*v].as_ref() {
                Some(Mapped::Plain(o)) => Ok(FwdArg {
                    primal: *o,
                    ty: ty.clone(),
                    tangents: None,
                }),
                Some(Mapped::Dual {
                    unpacked: Some((p, ts)),
                    ..
                }) => Ok(FwdArg {
                    primal: *p,
                    ty: ty.clone(),
                    tangents: ts.clone(),
                }),
                _ => Err(missing(loc, *v)),
            },
        }
    }

    /// Operand `op` of primal type `ty` in packed form, building a constant's
    /// dual at the builder's position.
    fn packed(&mut self, op: &Operand, ty: &Type, loc: &Location) -> Result<Operand, ForwardError> {
        match op {
            Operand::Const(_) => pack(&mut self.b, op, None, ty, self.width).map_err(rule_err(loc)),
            Operand::Value(v) => match self.vals[*v].clone() {
                Some(Mapped::Plain(o)) => Ok(o),
                Some(Mapped::Dual {
                    packed: Some(p), ..
                }) => Ok(p),
                // An inactive value's dual, built here (its primal dominates
                // this use).
                Some(Mapped::Dual {
                    packed: None,
                    unpacked: Some((p, ts)),
                }) => pack(&mut self.b, &p, ts.as_deref(), ty, self.width).map_err(rule_err(loc)),
                _ => Err(missing(loc, *v)),
            },
        }
    }

    /// The primal of operand `op` (projected here from its dual when the
    /// rule has the packed form only).
    fn primal_of(&mut self, op: &Operand, loc: &Location) -> Result<Operand, ForwardError> {
        match op {
            Operand::Const(_) => Ok(*op),
            Operand::Value(v) => match self.vals[*v].clone() {
                Some(Mapped::Plain(o)) => Ok(o),
                Some(Mapped::Dual {
                    unpacked: Some((p, _)),
                    ..
                }) => Ok(p),
                Some(Mapped::Dual {
                    packed: Some(d), ..
                }) => self.project_primal(d, loc),
                _ => Err(missing(loc, *v)),
            },
        }
    }

    /// `primal(d)`.
    fn project_primal(&mut self, d: Operand, loc: &Location) -> Result<Operand, ForwardError> {
        let p = self
            .b
            .prim(Prim::Primal, &[d])
            .map_err(self.build_err(loc))?
            .ok_or_else(|| ForwardError::internal(loc.clone(), "primal without result"))?;
        Ok(Operand::Value(p))
    }

    /// The primal statement alone of a statement with an inactive result (see
    /// [`is_passive`]); its result gets no tangent.
    fn passive_stmt(
        &mut self,
        kind: &InstKind,
        r: Value,
        loc: &Location,
    ) -> Result<(), ForwardError> {
        let ty = self.src.values[r].ty.clone();
        let err = self.build_err(loc);
        let res = match kind {
            InstKind::Prim { prim, args } => {
                let ops = self.primal_ops(args, loc)?;
                self.b.prim(*prim, &ops).map_err(err)?
            }
            InstKind::Invoke { func, args } => {
                let ops = self.primal_ops(args, loc)?;
                self.b.invoke(*func, &ops).map_err(err)?
            }
            InstKind::CallValue { callee, args } => {
                let f = self.plain(&Operand::Value(*callee), loc)?;
                let Operand::Value(f) = f else {
                    return Err(ForwardError::internal(
                        loc.clone(),
                        "a call through a constant",
                    ));
                };
                let ops = self.primal_ops(args, loc)?;
                self.b.call_value(f, &ops).map_err(err)?
            }
            InstKind::Phi { .. } => {
                return Err(ForwardError::internal(
                    loc.clone(),
                    "a phi after other statements",
                ));
            }
        };
        let primal = res.map_or(Operand::Const(Const::Unit), Operand::Value);
        let out = FwdOut {
            primal,
            tangents: None,
        };
        self.define_unpacked(r, &ty, out, loc)
    }

    /// The primals of `ops`.
    fn primal_ops(
        &mut self,
        ops: &[Operand],
        loc: &Location,
    ) -> Result<SmallVec<[Operand; 4]>, ForwardError> {
        ops.iter().map(|op| self.primal_of(op, loc)).collect()
    }

    /// Records what primal value `r` (of type `ty`) became: a rule's result.
    fn define_unpacked(
        &mut self,
        r: Value,
        ty: &Type,
        out: FwdOut,
        loc: &Location,
    ) -> Result<(), ForwardError> {
        if let Operand::Value(pv) = out.primal
            && self.b.func().values[pv].name.is_none()
        {
            self.name(pv, r, "");
        }
        if !ty.has_tangent() {
            self.vals.set(r, Some(Mapped::Plain(out.primal)));
            return Ok(());
        }
        let packed = if self.needs.packed.contains(r) {
            let p = pack(
                &mut self.b,
                &out.primal,
                out.tangents.as_deref(),
                ty,
                self.width,
            )
            .map_err(rule_err(loc))?;
            if let Operand::Value(pv) = p {
                self.name(pv, r, ".d");
            }
            Some(p)
        } else {
            None
        };
        self.vals.set(
            r,
            Some(Mapped::Dual {
                packed,
                unpacked: Some((out.primal, out.tangents)),
            }),
        );
        Ok(())
    }

    /// Records the result `res` of a call of a rule (a packed dual, or plain).
    fn define_packed(
        &mut self,
        r: Value,
        ty: &Type,
        res: Option<Value>,
        loc: &Location,
    ) -> Result<(), ForwardError> {
        let op = res.map_or(Operand::Const(Const::Unit), Operand::Value);
        if let Some(v) = res {
            self.name(v, r, "");
        }
        if ty.has_tangent() {
            self.vals.set(
                r,
                Some(Mapped::Dual {
                    packed: Some(op),
                    unpacked: None,
                }),
            );
            self.ensure_unpacked(r, loc)
        } else {
            self.vals.set(r, Some(Mapped::Plain(op)));
            Ok(())
        }
    }

    /// Calls a registered rule for `callee` on `args`, checking its output.
    fn emit_rule(
        &mut self,
        callee: Callee<'_>,
        rule: &dyn irad_rules::Frule,
        args: &[FwdArg],
        result: &Type,
        loc: &Location,
    ) -> Result<FwdOut, ForwardError> {
        let call = FruleCall {
            callee,
            args,
            result,
            lanes: self.width,
        };
        emit_checked(&mut self.b, rule, &call, loc)
    }

    /// The statements of the forward rule of one primal statement (not a phi).
    fn make_fwds_ad_stmts(
        &mut self,
        kind: &InstKind,
        result: Option<Value>,
        loc: &Location,
    ) -> Result<(), ForwardError> {
        let src = self.src;
        if let Some(r) = result
            && let ValueDef::Inst(inst) = src.values[r].def
            && is_passive(src, &self.act, inst)
        {
            return self.passive_stmt(kind, r, loc);
        }
        let result_ty = result.map_or(Type::Unit, |r| src.values[r].ty.clone());
        match kind {
            InstKind::Prim { prim, args } => {
                let fargs = args
                    .iter()
                    .map(|op| {
                        let ty = self.primal_type(op, loc)?;
                        self.arg(op, &ty, loc)
                    })
                    .collect::<Result<SmallVec<[FwdArg; 4]>, _>>()?;
                let types: SmallVec<[Type; 4]> = fargs.iter().map(|a| a.ty.clone()).collect();
                let rule = self.registry.frule(*prim, &types).ok_or_else(|| {
                    let list: Vec<String> = types.iter().map(Type::to_string).collect();
                    ForwardError::new(
                        loc.clone(),
                        format!(
                            "no forward rule for primitive `{prim}` on ({})",
                            list.join(", ")
                        ),
                    )
                })?;
                let out = self.emit_rule(Callee::Prim(*prim), &*rule, &fargs, &result_ty, loc)?;
                match result {
                    Some(r) => self.define_unpacked(r, &result_ty, out, loc),
                    None => Ok(()),
                }
            }
            InstKind::Invoke { func, args } => {
                let (name, sig) = self
                    .callee_info
                    .get(func)
                    .cloned()
                    .ok_or_else(|| ForwardError::internal(loc.clone(), "callee"))?;
                match self.callees.get(func).copied().flatten() {
                    None => {
                        // Marked primitive: its registered rule, in place.
                        let rule = self
                            .registry
                            .function_frule_in(self.b.module(), &name)
                            .ok_or_else(|| {
                                ForwardError::new(
                                    loc.clone(),
                                    format!("no forward rule for @{name}"),
                                )
                            })?;
                        let fargs = args
                            .iter()
                            .zip(&sig.params)
                            .map(|(op, ty)| self.arg(op, ty, loc))
                            .collect::<Result<SmallVec<[FwdArg; 4]>, _>>()?;
                        let out =
                            self.emit_rule(Callee::Func(&name), &*rule, &fargs, &sig.ret, loc)?;
                        match result {
                            Some(r) => self.define_unpacked(r, &result_ty, out, loc),
                            None => Ok(()),
                        }
                    }
                    Some(rule) => {
                        let mut ops: SmallVec<[Operand; 4]> = SmallVec::with_capacity(args.len());
                        for (op, ty) in args.iter().zip(&sig.params) {
                            ops.push(self.packed(op, ty, loc)?);
                        }
                        let res = self.b.invoke(rule, &ops).map_err(self.build_err(loc))?;
                        match result {
                            Some(r) => self.define_packed(r, &result_ty, res, loc),
                            None => Ok(()),
                        }
                    }
                }
            }
            InstKind::CallValue { callee, args } => {
                let f = self.plain(&Operand::Value(*callee), loc)?;
                let Type::Func(sig) = src.values[*callee].ty.clone() else {
                    return Err(ForwardError::internal(
                        loc.clone(),
                        "a call through a value that is not a function",
                    ));
                };
                let rule = self
                    .b
                    .prim(Prim::Frule, &[f, Operand::from(self.width.code())])
                    .map_err(self.build_err(loc))?
                    .ok_or_else(|| ForwardError::internal(loc.clone(), "frule"))?;
                let mut ops: SmallVec<[Operand; 4]> = SmallVec::with_capacity(args.len());
                for (op, ty) in args.iter().zip(&sig.params) {
                    ops.push(self.packed(op, ty, loc)?);
                }
                let res = self.b.call_value(rule, &ops).map_err(self.build_err(loc))?;
                match result {
                    Some(r) => self.define_packed(r, &result_ty, res, loc),
                    None => Ok(()),
                }
            }
            InstKind::Phi { .. } => Err(ForwardError::internal(
                loc.clone(),
                "a phi after other statements",
            )),
        }
    }

    /// The primal type of operand `op` of the source function.
    fn primal_type(&self, op: &Operand, loc: &Location) -> Result<Type, ForwardError> {
        match op {
            Operand::Value(v) => Ok(self.src.values[*v].ty.clone()),
            Operand::Const(c) => irad_ir::func::const_type(c, self.b.module())
                .ok_or_else(|| ForwardError::internal(loc.clone(), "constant without a type")),
        }
    }
}

fn rule_err(loc: &Location) -> impl Fn(RuleError) -> ForwardError + use<> {
    let loc = loc.clone();
    move |e| ForwardError::internal(loc.clone(), e)
}

fn missing(loc: &Location, v: Value) -> ForwardError {
    ForwardError::internal(
        loc.clone(),
        format!("value {v:?} used before the rule defined it"),
    )
}

fn unreachable_target(loc: &Location) -> ForwardError {
    ForwardError::internal(loc.clone(), "jump to a dropped block")
}

/// The location of statement `inst`, number `stmt` (from 1) of block `blk`.
pub(crate) fn stmt_loc(
    src: &Func,
    blk: Block,
    stmt: u32,
    inst: irad_ir::Inst,
    floc: &Location,
) -> Location {
    Location {
        block: Some(src.blocks[blk].label),
        stmt: Some(stmt),
        pos: src.insts[inst].pos.or(floc.pos),
        ..floc.clone()
    }
}
