//! The loop of the forward sweep that does not record: a checkpointed
//! loop's blocks of `@f.rev.fwd`, emptied of their recording code (whose
//! copy is the replay function's) and filled again with the primal
//! statements alone, plus the snapshots.
//!
//! The header keeps its block and label and gets, after its phis, a
//! countdown to the next snapshot (`%c`, 0 on entry) and a flag saying
//! whether a snapshot was taken before in this run of the loop (`%st`).
//! When the countdown is 0, the new block `SNAP` pushes the flag, the header
//! phis' values, a copy of each array the loop may write and one of each
//! array it carries through its header phis, and the
//! countdown restarts at `stretch - 1`; then the new block `REST` (the header's
//! statements and terminator) goes on. Values of the loop used after it
//! (the header's) are renamed there to their new definitions.
//!
//! A thinned loop (`thin.rs`) also counts the stretches started (`%sc`,
//! which each block an exit edge leads to pushes): its snapshot holds the stretch's index
//! after the flag (then the stretch, when its replay cannot compute it:
//! `sized.rs`), and `SNAP` keeps a binary counter of the stretches after
//! the first `plain`: new blocks push the snapshot or pop those the counter
//! drops. A loop of binomial schedule (`revolve.rs`) instead pushes the
//! snapshot only at the stretch it is due at, with its slots after the
//! stretch's index, and computes where the next is due (two more header
//! phis, entered from `REST`'s phis); it never pops one. [`advance`]
//! builds the same loop in a thinned loop's replay function, stopping at a
//! given visit of its header instead of taking snapshots.
//!
//! Assumes the forward sweep is complete (pushes, terminators, phi entries),
//! the replay already copied from it, and a loop that `choose` accepted (one
//! entering block, the arrays of its header phis made afresh in it or kept,
//! no array it makes used after it but those, where `CkLoop::leave` says).
//! Guarantees: the loop computes the primal values as the primal does, with
//! the same primitives in the same order, and pushes exactly one snapshot
//! per `stretch` visits of its header, the first at the first visit (a
//! thinned loop: keeps those a binary counter keeps, popping the others, or
//! those the binomial schedule places);
//! the layout keeps every `gotoifnot` falling through to the block it fell
//! through to (`SNAP`, its blocks and `REST` come right after the header).

use super::super::ReverseError;
use super::super::bbcode::BTerm;
use super::super::ctx::{Derivation, build_err, emit_value, err, internal, map_op};
use super::direct::DirectPath;
use super::replay::header_phis;
use super::{CkLoop, Left};
use irad_ir::entity::SecondaryMap;
use irad_ir::{
    Block, FuncBuilder, FuncId, Inst, InstKind, Module, Operand, Prim, Terminator, Type, Value,
};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// The value a block an exit edge leads to (by primal block) has of its own
/// for a value of the forward sweep (the shadow a carried array leaves
/// with through it).
pub(in crate::reverse) type ExitShown = HashMap<(Block, Value), Value>;

/// The renamings of blocks an exit edge leads to (by forward-sweep block)
/// that hold over the loop's own ones there.
type InExit = HashMap<Block, HashMap<Value, Operand>>;

/// Rewrites checkpointed loop `ck` of forward sweep `fwd_id` (whose block of
/// each primal block is `fblock`, and operand of each primal value `fval`)
/// into the loop that does not record, records its header phis in
/// `ck.state`, and updates `fval` to the loop's new values (noting in
/// `shown.0` the new value of each old one, and in `shown.1` the one a
/// block an exit edge leads to has of its own, by its primal block).
pub(in crate::reverse) fn rewrite(
    cx: &Derivation<'_>,
    module: &mut Module,
    fwd_id: FuncId,
    (fblock, fval): (&[Block], &mut SecondaryMap<Value, Option<Operand>>),
    (ck, direct): (&mut CkLoop, Option<&DirectPath>),
    shown: (&mut HashMap<Value, Value>, &mut ExitShown),
) -> Result<(), ReverseError> {
    let (shown, shown_at) = shown;
    let l = &cx.shape.loops.of(ck.k);
    let member_blocks: HashSet<Block> = l.members.iter().copied().map(|i| fblock[i]).collect();
    let recording = clear_blocks(module, fwd_id, &member_blocks, &cx.floc)?;
    let mut fb = FuncBuilder::new(module, fwd_id).map_err(build_err(&cx.floc))?;
    let snap = fb.create_block();
    let rest = fb.create_block();
    let mut p = PLoop {
        cx,
        fb,
        fblock,
        pmap: fval.clone(),
        kshadow: HashMap::default(),
        snap,
        rest,
        mode: Mode::Forward,
        init: Vec::new(),
        extra: Vec::new(),
    };
    let countdown = p.blocks(ck)?;
    p.phi_entries(ck, &countdown)?;
    if let Some((_, sc_next)) = countdown.thin {
        // Each block an exit edge leads to pushes the stretches started,
        // counted in the header, which dominates every edge out of the loop.
        let head = fblock[l.header];
        for &(e, count) in &ck.counts {
            let mut froms: Vec<Block> = Vec::new();
            for &q in &cx.shape.preds[e] {
                let from = if fblock[q] == head { rest } else { fblock[q] };
                if l.contains(q) && cx.shape.reachable[q] && !froms.contains(&from) {
                    froms.push(from);
                }
            }
            for from in froms {
                p.fb.add_phi_entry(count, from, sc_next)
                    .map_err(build_err(&cx.floc))?;
            }
        }
    }
    let PLoop {
        pmap,
        kshadow,
        extra,
        ..
    } = p;
    ck.state = header_phis(cx, l.header)
        .iter()
        .filter_map(|&(_, r)| match pmap[r] {
            Some(Operand::Value(v)) => Some(v),
            _ => None,
        })
        .collect();
    let head = fblock[l.header];
    let mut renamed: HashMap<Value, Operand> = HashMap::default();
    for i in l.members.iter().copied() {
        for &inst in &cx.shape.bb.blocks[i].stmts {
            if let Some(v) = cx.src.insts[inst].result
                && let (Some(Operand::Value(old)), Some(new)) = (fval[v], pmap[v])
            {
                renamed.insert(old, new);
            }
        }
    }
    if let Some(path) = direct {
        // Only the header's values reach the exit (the others do not
        // dominate it).
        let header: Vec<Value> = cx.shape.bb.blocks[l.header]
            .stmts
            .iter()
            .filter_map(|&inst| match fval[cx.src.insts[inst].result?] {
                Some(Operand::Value(old)) => Some(old),
                _ => None,
            })
            .collect();
        merge_at_exit(
            cx,
            module,
            fwd_id,
            (fblock[l.exit], &header),
            (path, rest),
            (ck, &mut renamed),
        )?;
    }
    let f = module
        .get_mut(fwd_id)
        .ok_or_else(|| internal(&cx.floc, "no forward sweep"))?;
    kept_renames(ck, &kshadow, (&mut renamed, shown)).map_err(|what| internal(&cx.floc, what))?;
    // The shadows carried arrays leave with: made in each block an exit
    // edge leads to; with several, those blocks' uses take their own and
    // the block they all jump to merges them.
    let mut in_exit: InExit = HashMap::default();
    let mut merged: HashMap<Value, Vec<(Block, Operand)>> = HashMap::default();
    // With regions, by join (`Leave::joins`), the shadows each exit jumping
    // to it gives.
    let mut joined: HashMap<usize, HashMap<Value, Vec<(Block, Operand)>>> = HashMap::default();
    for &e in &ck.leave.exits {
        let eb = fblock[e];
        let ran: Vec<Value> = std::iter::once(countdown.st)
            .chain(countdown.held.iter().copied())
            .collect();
        let (mut shadows, only_here) =
            exit_shadows(f, (e, eb), ck, &pmap, &ran).map_err(|what| internal(&cx.floc, what))?;
        if let Some(j) = ck.leave.join_of(cx, e) {
            let at = joined.entry(j).or_default();
            for &(old, new) in shadows.iter().chain(&only_here) {
                at.entry(old).or_default().push((eb, Operand::Value(new)));
            }
        }
        for (old, new) in only_here {
            // An array made in the last iteration that leaves through some
            // of the exits only: its shadow there is read in that block (and
            // in the join's phi entry from it).
            match ck.leave.join.is_some() || ck.leave.regions {
                false => shadows.push((old, new)),
                true => {
                    shown_at.insert((cx.shape.bb.blocks[e].id, old), new);
                    in_exit
                        .entry(eb)
                        .or_default()
                        .insert(old, Operand::Value(new));
                }
            }
        }
        for (old, new) in shadows {
            if ck.leave.join.is_none() && !ck.leave.regions {
                renamed.insert(old, Operand::Value(new));
                shown.insert(old, new);
                continue;
            }
            shown_at.insert((cx.shape.bb.blocks[e].id, old), new);
            in_exit
                .entry(eb)
                .or_default()
                .insert(old, Operand::Value(new));
            if ck.leave.join.is_some() {
                merged
                    .entry(old)
                    .or_default()
                    .push((eb, Operand::Value(new)));
            }
        }
    }
    // A region's join merges the shadows every exit jumping to it gives
    // (the uses there are of arrays leaving through all of them).
    let mut joins: Vec<usize> = joined.keys().copied().collect();
    joins.sort_unstable();
    for j in joins {
        let preds = cx.shape.preds[j].len();
        let mut by_old = joined.remove(&j).unwrap_or_default();
        by_old.retain(|_, es| es.len() == preds);
        for (old, new) in merge_by_phis(module, fwd_id, (fblock[j], by_old), &cx.floc)? {
            in_exit
                .entry(fblock[j])
                .or_default()
                .insert(old, Operand::Value(new));
        }
    }
    if let Some(j) = ck.leave.join {
        let by_old = std::mem::take(&mut merged);
        for (old, new) in merge_by_phis(module, fwd_id, (fblock[j], by_old), &cx.floc)? {
            renamed.insert(old, Operand::Value(new));
            shown.insert(old, new);
        }
    }
    let f = module
        .get_mut(fwd_id)
        .ok_or_else(|| internal(&cx.floc, "no forward sweep"))?;
    let added: Vec<Block> = std::iter::once(snap)
        .chain(extra)
        .chain(std::iter::once(rest))
        .collect();
    f.layout.retain(|b| !added.contains(b));
    let at = f
        .layout
        .iter()
        .position(|&b| b == head)
        .map_or(f.layout.len(), |p| p + 1);
    f.layout.splice(at..at, added);
    // Exits whose paths meet only later: each gives its shadows to the
    // blocks it dominates (every use after the loop is in one).
    if ck.leave.regions {
        let cfg = irad_ir::flow::ControlFlowGraph::with_function(f);
        let dom = irad_ir::flow::DominatorTree::with_cfg(&cfg);
        // A join first: it dominates no exit, and the blocks it dominates
        // take its phis.
        let exits: Vec<Block> = (ck.leave.joins.iter().chain(&ck.leave.exits))
            .map(|&e| fblock[e])
            .collect();
        for &b in cfg.blocks() {
            if member_blocks.contains(&b) || exits.contains(&b) {
                continue;
            }
            if let Some(own) = exits
                .iter()
                .find(|&&e| dom.dominates(e, b))
                .and_then(|e| in_exit.get(e))
            {
                in_exit.insert(b, own.clone());
            }
        }
        // The dump names the pushes of a primal block by its own values.
        for (p, &b) in fblock.iter().enumerate() {
            if l.contains(p) {
                continue;
            }
            for (&old, new) in in_exit.get(&b).into_iter().flatten() {
                if let Operand::Value(new) = new {
                    shown_at.insert((cx.shape.bb.blocks[p].id, old), *new);
                }
            }
        }
    }
    // Uses after the loop of the loop's values: the new definitions.
    rename_outside(
        f,
        &member_blocks,
        (snap, rest),
        &recording,
        (&renamed, &in_exit),
        head,
    )
    .map_err(|what| internal(&cx.floc, what))?;
    for i in l.members.iter().copied() {
        for &inst in &cx.shape.bb.blocks[i].stmts {
            if let Some(v) = cx.src.insts[inst].result
                && let Some(Operand::Value(old)) = fval[v]
                && let Some(&new) = renamed.get(&old)
            {
                fval.set(v, Some(new));
                if let Operand::Value(new) = new {
                    shown.insert(old, new);
                }
            }
        }
    }
    Ok(())
}

/// A phi in block `at` of forward sweep `fwd_id` for each value of
/// `by_old` (in the order of the values), with its entries: the new value
/// of each.
fn merge_by_phis(
    module: &mut Module,
    fwd_id: FuncId,
    (at, by_old): (Block, HashMap<Value, Vec<(Block, Operand)>>),
    floc: &irad_ir::Location,
) -> Result<Vec<(Value, Value)>, ReverseError> {
    let mut by_old: Vec<(Value, Vec<(Block, Operand)>)> = by_old.into_iter().collect();
    by_old.sort_unstable_by_key(|(old, _)| *old);
    let mut fb = FuncBuilder::new(module, fwd_id).map_err(build_err(floc))?;
    let mut out = Vec::with_capacity(by_old.len());
    for (old, entries) in by_old {
        let ty = fb.module()[fwd_id].values[old].ty.clone();
        let new = fb.insert_phi(at, ty).map_err(build_err(floc))?;
        for (from, op) in entries {
            fb.add_phi_entry(new, from, op).map_err(build_err(floc))?;
        }
        out.push((old, new));
    }
    Ok(out)
}

/// With a direct path, the exit block `exit` of forward sweep `fwd_id` is
/// entered from the copy (`path`) and from `rest`: each value of the
/// loop's header (`header`, whose new value in the loop that does not record
/// `renamed` gives) gets a phi there, which it is renamed to (the optimiser
/// removes those not used after the loop), and `ck`'s flag phi says whether
/// the loop was checkpointed.
fn merge_at_exit(
    cx: &Derivation<'_>,
    module: &mut Module,
    fwd_id: FuncId,
    (exit, header): (Block, &[Value]),
    (path, rest): (&DirectPath, Block),
    (ck, renamed): (&CkLoop, &mut HashMap<Value, Operand>),
) -> Result<(), ReverseError> {
    let build = build_err(&cx.floc);
    let mut fb = FuncBuilder::new(module, fwd_id).map_err(&build)?;
    let from = path.exit_from;
    if let Some(flag) = ck.flag {
        fb.add_phi_entry(flag, from, Operand::from(false))
            .map_err(&build)?;
        fb.add_phi_entry(flag, rest, Operand::from(true))
            .map_err(&build)?;
    }
    for &(_, count) in &ck.counts {
        fb.add_phi_entry(count, from, Operand::from(0i64))
            .map_err(&build)?;
    }
    let mut merged = Vec::with_capacity(header.len());
    for &old in header {
        let Some(&new) = renamed.get(&old) else {
            continue;
        };
        let ty = fb.func().values[old].ty.clone();
        let copied = path
            .values
            .get(&old)
            .copied()
            .ok_or_else(|| internal(&cx.floc, "a value of the loop not in its copy"))?;
        let phi = fb.insert_phi(exit, ty).map_err(&build)?;
        fb.add_phi_entry(phi, from, Operand::Value(copied))
            .map_err(&build)?;
        fb.add_phi_entry(phi, rest, new).map_err(&build)?;
        merged.push((old, phi));
    }
    for (old, phi) in merged {
        renamed.insert(old, Operand::Value(phi));
    }
    Ok(())
}

/// Empties the blocks `members` of function `fwd_id` (statements and
/// terminators); returns the values their statements defined.
fn clear_blocks(
    module: &mut Module,
    fwd_id: FuncId,
    members: &HashSet<Block>,
    floc: &irad_ir::Location,
) -> Result<HashSet<Value>, ReverseError> {
    let f = module
        .get_mut(fwd_id)
        .ok_or_else(|| internal(floc, "no forward sweep"))?;
    let mut defined = HashSet::default();
    for &b in members {
        for inst in std::mem::take(&mut f.blocks[b].insts) {
            if let Some(r) = f.insts[inst].result {
                defined.insert(r);
            }
        }
        f.blocks[b].term = None;
    }
    Ok(defined)
}

/// The loop being rebuilt in the forward sweep.
struct PLoop<'a, 'r, 'm> {
    cx: &'a Derivation<'r>,
    fb: FuncBuilder<'m>,
    fblock: &'a [Block],
    /// The forward sweep's operand of each primal value: the new one for the
    /// loop's values, the recording sweep's for the others.
    pmap: SecondaryMap<Value, Option<Operand>>,
    /// The new shadow phi of each kept carried array, by its old one.
    kshadow: HashMap<Value, Value>,
    snap: Block,
    rest: Block,
    /// What the header does: take snapshots, or stop the advance.
    mode: Mode,
    /// For an advance, the operand each header phi takes from the block
    /// entering it (by its index among the header phis); empty otherwise.
    init: Vec<Operand>,
    /// Blocks made for the snapshot besides `snap` and `rest`, laid out
    /// between them in this order.
    extra: Vec<Block>,
}

/// What the loop that does not record does at its header.
#[derive(Clone, Copy)]
enum Mode {
    /// The forward sweep's loop: a snapshot every `stretch` visits (thinned
    /// for a thinned loop).
    Forward,
    /// The advance of a thinned loop's replay (`thin.rs`): leaves to `snap`
    /// at the visit `target` (counted from 0), with the header phis' values
    /// as they are there; the loop's own exits go to `snap` too (never taken:
    /// a segment advanced over is followed by another stretch).
    Advance {
        /// The visit to stop at.
        target: Operand,
    },
}

/// The visit countdown (or counter) phi and its next value, the flag phi
/// (whether a snapshot came before), and for a thinned loop the phi counting
/// the stretches started and its next value.
struct Countdown {
    c: Value,
    st: Value,
    /// Whether the run has had 2, 3, ... iterations (`st` says 1), as far
    /// as the deepest array handed on and used after the loop needs
    /// ([`super::Carried::held`]): each a header phi taking the one
    /// before from the latches.
    held: Vec<Value>,
    next: Operand,
    thin: Option<(Value, Operand)>,
    /// For a loop of binomial schedule, the header phis of the stretch the
    /// next snapshot is due at and of the slots it gets, each with its phi
    /// in `REST` (after the snapshot), which the latches give it.
    revolve: Option<[(Value, Value); 2]>,
}

impl PLoop<'_, '_, '_> {
    /// The loop's blocks in reverse postorder: phis, the primal statements
    /// and the terminators; the header's snapshot code. Returns the
    /// countdown.
    fn blocks(&mut self, ck: &CkLoop) -> Result<Countdown, ReverseError> {
        let cx = self.cx;
        let l = &cx.shape.loops.of(ck.k);
        let build = build_err(&cx.floc);
        let mut countdown = None;
        for &i in cx.shape.order.iter().filter(|&&i| l.contains(i)) {
            let at = self.fblock[i];
            self.fb.switch_to_block(at).map_err(&build)?;
            self.fb.set_pos(cx.src.blocks[cx.shape.bb.blocks[i].id].pos);
            for &inst in &cx.shape.bb.blocks[i].stmts {
                let data = &cx.src.insts[inst];
                if let (InstKind::Phi { .. }, Some(r)) = (&data.kind, data.result) {
                    let ty = cx.src.values[r].ty.clone();
                    let v = self.fb.insert_phi(at, ty).map_err(&build)?;
                    self.pmap.set(r, Some(Operand::Value(v)));
                }
            }
            // The kept arrays' shadows, in the header and in the phis inside
            // the loop its kept phis take their arrays through.
            for ik in ck.inner_kept.iter().filter(|ik| ik.block == i) {
                let v = self
                    .fb
                    .insert_phi(at, Type::Array(irad_ir::Scalar::F64))
                    .map_err(&build)?;
                self.kshadow.insert(ik.phi, v);
            }
            if i == l.header {
                for kept in ck.carried.iter().filter_map(|c| c.kept.as_ref()) {
                    let v = self
                        .fb
                        .insert_phi(at, Type::Array(irad_ir::Scalar::F64))
                        .map_err(&build)?;
                    self.kshadow.insert(kept.phi, v);
                }
                countdown = Some(self.snapshot(at, ck)?);
            }
            for &inst in &cx.shape.bb.blocks[i].stmts {
                if !matches!(cx.src.insts[inst].kind, InstKind::Phi { .. }) {
                    self.statement(inst)?;
                }
            }
            self.terminator(i)?;
        }
        countdown.ok_or_else(|| internal(&cx.floc, "a loop without its header"))
    }

    /// The countdown and the snapshot, after the header `head`'s phis; leaves
    /// the builder in `REST`. In an advance, the visit counter and the stop
    /// instead.
    fn snapshot(&mut self, head: Block, ck: &CkLoop) -> Result<Countdown, ReverseError> {
        let cx = self.cx;
        let build = build_err(&cx.floc);
        let c = self.fb.insert_phi(head, Type::I64).map_err(&build)?;
        let st = self.fb.insert_phi(head, Type::Bool).map_err(&build)?;
        if let Mode::Advance { target } = self.mode {
            let stop = self.value(Prim::Eq, &[Operand::Value(c), target])?;
            let next = self.value(Prim::Iadd, &[Operand::Value(c), Operand::from(1i64)])?;
            self.fb.gotoifnot(stop, self.rest).map_err(&build)?;
            self.fb.switch_to_block(self.rest).map_err(&build)?;
            return Ok(Countdown {
                c,
                st,
                held: Vec::new(),
                next,
                thin: None,
                revolve: None,
            });
        }
        let deepest = ck.carried.iter().map(|c| c.held.len()).max().unwrap_or(0);
        let held = (0..deepest)
            .map(|_| self.fb.insert_phi(head, Type::Bool))
            .collect::<Result<Vec<_>, _>>()
            .map_err(&build)?;
        let sc = self.fb.insert_phi(head, Type::I64).map_err(&build)?;
        let take = self.value(Prim::Eq, &[Operand::Value(c), Operand::from(0i64)])?;
        let down = self.value(Prim::Isub, &[Operand::Value(c), Operand::from(1i64)])?;
        let (_, restart) = ck
            .run_stretch
            .ok_or_else(|| internal(&cx.floc, "a loop's stretch not computed"))?;
        let next = self.value(Prim::Select, &[take, restart, down])?;
        let up = self.value(Prim::Iadd, &[Operand::Value(sc), Operand::from(1i64)])?;
        let sc_next = self.value(Prim::Select, &[take, up, Operand::Value(sc)])?;
        let thin = Some((sc, sc_next));
        let due = match &ck.revolve {
            Some(_) => Some((
                self.fb.insert_phi(head, Type::I64).map_err(&build)?,
                self.fb.insert_phi(head, Type::I64).map_err(&build)?,
            )),
            None => None,
        };
        self.fb.gotoifnot(take, self.rest).map_err(&build)?;
        self.fb.switch_to_block(self.snap).map_err(&build)?;
        let revolve = match (&ck.revolve, due) {
            (Some(rv), Some(due)) => Some(self.revolve_snapshot(ck, rv, (st, sc), due, head)?),
            _ => {
                self.thin_snapshot(ck, st, sc)?;
                None
            }
        };
        self.fb.switch_to_block(self.rest).map_err(&build)?;
        Ok(Countdown {
            c,
            st,
            held,
            next,
            thin,
            revolve,
        })
    }

    /// The snapshot of a loop of binomial schedule at the start of stretch
    /// `sc` (from `SNAP`; `head` the header, which jumps to `REST` between
    /// snapshots): pushed when `sc` is the stretch it is due at (the phi
    /// `nx`), with the slots `sl` (for the first, from the stretches of
    /// the run); the next is due after the first part of the forward
    /// sweep's split of the stretches left (`revolve.rs`), or never after
    /// one of a single slot. Returns the due and slots phis with their
    /// phis in `REST`.
    fn revolve_snapshot(
        &mut self,
        ck: &CkLoop,
        rv: &super::Revolve,
        (st, sc): (Value, Value),
        (nx, sl): (Value, Value),
        head: Block,
    ) -> Result<[(Value, Value); 2], ReverseError> {
        let cx = self.cx;
        let l = &cx.shape.loops.of(ck.k);
        let build = build_err(&cx.floc);
        let counted = l
            .counted
            .as_ref()
            .ok_or_else(|| internal(&cx.floc, "a binomial schedule of a loop not counted"))?;
        let (stretch, _) = ck
            .run_stretch
            .ok_or_else(|| internal(&cx.floc, "a loop's stretch not computed"))?;
        let v = Operand::Value;
        let due = self.value(Prim::Eq, &[v(sc), v(nx)])?;
        let push = self.fb.create_block();
        self.fb.gotoifnot(due, self.rest).map_err(&build)?;
        self.fb.switch_to_block(push).map_err(&build)?;
        // The iterations left: the counter's trips to the bound.
        let iv = map_op(&self.pmap, &v(counted.iv), &cx.floc)?;
        let bound = map_op(&self.pmap, &rv.test.bound, &cx.floc)?;
        let diff = match rv.test.up {
            true => self.value(Prim::Isub, &[bound, iv])?,
            false => self.value(Prim::Isub, &[iv, bound])?,
        };
        let diff = match rv.test.strict {
            true => self.value(Prim::Isub, &[diff, Operand::from(1i64)])?,
            false => diff,
        };
        let some = self.value(Prim::Ge, &[diff, Operand::from(0i64)])?;
        let step = Operand::from(counted.step.saturating_abs());
        let q = self.value(Prim::Idiv, &[diff, step])?;
        let trips = self.value(Prim::Iadd, &[q, Operand::from(1i64)])?;
        let trips = self.value(Prim::Select, &[some, trips, Operand::from(0i64)])?;
        // The stretches left, this one included: the header's visits left
        // are `trips + 1` (the last one leaves), and a stretch starts every
        // `stretch` of them, so a run whose trips the stretch divides ends
        // with a stretch of no iteration, which a replay records too.
        let whole = self.value(Prim::Idiv, &[trips, stretch])?;
        let n = self.value(Prim::Iadd, &[whole, Operand::from(1i64)])?;
        let some = self.value(Prim::Ge, &[n, Operand::from(1i64)])?;
        let n = self.value(Prim::Select, &[some, n, Operand::from(1i64)])?;
        let first = self.value(Prim::Eq, &[v(sc), Operand::from(0i64)])?;
        let room = match rv.room {
            Some((half, size)) => Some(self.snapshot_room(ck, (half, size))?),
            None => None,
        };
        let s0 = super::revolve::first_slots(&mut self.fb, n, (rv.least, room))
            .map_err(|m| err(&cx.floc, m))?;
        let s = self.value(Prim::Select, &[first, s0, v(sl)])?;
        let (m, blocks) =
            super::revolve::split(&mut self.fb, (n, s), super::revolve::Splitting::Forward)
                .map_err(|m| err(&cx.floc, m))?;
        let later = self.value(Prim::Iadd, &[v(sc), m])?;
        let last = self.value(Prim::Lt, &[s, Operand::from(2i64)])?;
        let nx_next = self.value(Prim::Select, &[last, Operand::from(i64::MAX), later])?;
        let sl_next = self.value(Prim::Isub, &[s, Operand::from(1i64)])?;
        let push_end = blocks[4];
        self.extra = std::iter::once(push).chain(blocks).collect();
        self.push_snapshot(ck, (st, sc), Some(s))?;
        let mut phis = [(nx, nx), (sl, sl)];
        for ((phi, at_rest), new) in phis.iter_mut().zip([nx_next, sl_next]) {
            let p = self.fb.insert_phi(self.rest, Type::I64).map_err(&build)?;
            self.fb.add_phi_entry(p, head, v(*phi)).map_err(&build)?;
            self.fb
                .add_phi_entry(p, self.snap, v(*phi))
                .map_err(&build)?;
            self.fb.add_phi_entry(p, push_end, new).map_err(&build)?;
            *at_rest = p;
        }
        Ok(phis)
    }

    /// The snapshot of a thinned loop at the start of stretch `sc` (from
    /// `SNAP`). The first `ck.plain` stretches keep theirs; after them, with
    /// `c = sc - plain`, the snapshots are kept as a binary counter: those
    /// held start the runs of stretches that the binary digits of the number
    /// of stretches started give, longest first. An even `c` starts a run
    /// of its own: its snapshot is pushed. An odd one joins the runs of
    /// its trailing one bits into one: the snapshots of all but the
    /// longest of those are popped (as many as the trailing one bits of
    /// `c / 2`), and none is pushed.
    fn thin_snapshot(&mut self, ck: &CkLoop, st: Value, sc: Value) -> Result<(), ReverseError> {
        let cx = self.cx;
        let l = &cx.shape.loops.of(ck.k);
        let build = build_err(&cx.floc);
        let push = self.fb.create_block();
        let drop_head = self.fb.create_block();
        let drop_body = self.fb.create_block();
        self.extra = vec![push, drop_head, drop_body];
        // The counter counts the stretches after the first `plain`, which
        // all keep their snapshots.
        let plain = i64::try_from(ck.plain).unwrap_or(i64::MAX);
        let rel = self.value(Prim::Isub, &[Operand::Value(sc), Operand::from(plain)])?;
        let before = self.value(Prim::Lt, &[rel, Operand::from(0i64)])?;
        let parity = self.value(Prim::Irem, &[rel, Operand::from(2i64)])?;
        let zero = self.value(Prim::Eq, &[parity, Operand::from(0i64)])?;
        let even = self.value(Prim::Or, &[before, zero])?;
        let half = self.value(Prim::Idiv, &[rel, Operand::from(2i64)])?;
        let snap_end = self
            .fb
            .current_block()
            .ok_or_else(|| internal(&cx.floc, "no block"))?;
        self.fb.gotoifnot(even, drop_head).map_err(&build)?;
        self.fb.switch_to_block(push).map_err(&build)?;
        self.push_snapshot(ck, (st, sc), None)?;
        self.fb.switch_to_block(drop_head).map_err(&build)?;
        let x = self.fb.insert_phi(drop_head, Type::I64).map_err(&build)?;
        let bit = self.value(Prim::Irem, &[Operand::Value(x), Operand::from(2i64)])?;
        let one = self.value(Prim::Eq, &[bit, Operand::from(1i64)])?;
        self.fb.gotoifnot(one, self.rest).map_err(&build)?;
        self.fb.switch_to_block(drop_body).map_err(&build)?;
        // The snapshot on top, popped in the reverse order of its pushes.
        for _ in ck.carried.iter().filter(|c| c.kept.is_some()) {
            self.fb
                .pop(Type::Array(irad_ir::Scalar::F64))
                .map_err(&build)?;
        }
        for c in ck.carried.iter().rev() {
            self.fb.pop(c.ty.clone()).map_err(&build)?;
        }
        for leaf in ck.arrays.iter().rev() {
            self.fb.pop(leaf.ty.clone()).map_err(&build)?;
        }
        for (_, r) in header_phis(cx, l.header).iter().rev() {
            self.fb.pop(cx.src.values[*r].ty.clone()).map_err(&build)?;
        }
        if ck
            .sized
            .as_ref()
            .is_some_and(super::sized::RunStretch::saved)
        {
            self.fb.pop(Type::I64).map_err(&build)?;
        }
        self.fb.pop(Type::I64).map_err(&build)?;
        self.fb.pop(Type::Bool).map_err(&build)?;
        let x2 = self.value(Prim::Idiv, &[Operand::Value(x), Operand::from(2i64)])?;
        self.fb.goto(drop_head).map_err(&build)?;
        self.fb.add_phi_entry(x, snap_end, half).map_err(&build)?;
        self.fb.add_phi_entry(x, drop_body, x2).map_err(&build)?;
        Ok(())
    }

    /// Pushes the snapshot at the current position: the flag `st`, the
    /// stretch's index `sc`, the stretch when the replay cannot compute it
    /// (`RunStretch::saved`), the header phis' values, a copy of each array
    /// the loop may write and of each it carries, the kept arrays' shadows;
    /// then goes to `REST`.
    fn push_snapshot(
        &mut self,
        ck: &CkLoop,
        (st, sc): (Value, Value),
        slots: Option<Operand>,
    ) -> Result<(), ReverseError> {
        let cx = self.cx;
        let l = &cx.shape.loops.of(ck.k);
        let build = build_err(&cx.floc);
        self.push(Operand::Value(st))?;
        self.push(Operand::Value(sc))?;
        if let Some(s) = slots {
            self.push(s)?;
        }
        if ck
            .sized
            .as_ref()
            .is_some_and(super::sized::RunStretch::saved)
        {
            let (stretch, _) = ck
                .run_stretch
                .ok_or_else(|| internal(&cx.floc, "a loop's stretch not computed"))?;
            self.push(stretch)?;
        }
        for (_, r) in header_phis(cx, l.header) {
            let v = map_op(&self.pmap, &Operand::Value(r), &cx.floc)?;
            self.push(v)?;
        }
        self.push_arrays(ck)?;
        for a in self.carried_values(ck)? {
            let copy = self.value(Prim::Copy, &[a])?;
            self.push(copy)?;
        }
        for kept in ck.carried.iter().filter_map(|c| c.kept.as_ref()) {
            let v = self
                .kshadow
                .get(&kept.phi)
                .copied()
                .ok_or_else(|| internal(&cx.floc, "a kept shadow without its phi"))?;
            self.push(Operand::Value(v))?;
        }
        self.fb.goto(self.rest).map_err(&build)?;
        Ok(())
    }

    /// The snapshots half the limit holds, `half / (size + 8 n)`, for `n`
    /// the elements a snapshot holds as the arrays are here (the first
    /// snapshot's, which the loop enters with): the copy of each array it
    /// copies, and each carried array itself, which it pushes as a header
    /// value (and keeps alive when the loop replaces it); `size` the rest of
    /// a snapshot's bytes, each kept shadow's reference included.
    fn snapshot_room(
        &mut self,
        ck: &CkLoop,
        (half, size): (u64, u64),
    ) -> Result<Operand, ReverseError> {
        let mut arrays = self.copied_arrays(ck)?;
        for a in self.carried_values(ck)? {
            arrays.extend([a, a]);
        }
        let kept = ck.carried.iter().filter(|c| c.kept.is_some()).count() as u64;
        let fixed = i64::try_from(size.saturating_add(8 * kept)).unwrap_or(i64::MAX);
        let mut bytes = Operand::from(fixed.max(1));
        for a in arrays {
            // 8 bytes per element (arrays in memory are far from 2^60).
            let n = self.value(Prim::Length, &[a])?;
            let b = self.value(Prim::Imul, &[n, Operand::from(8i64)])?;
            bytes = self.value(Prim::Iadd, &[bytes, b])?;
        }
        let half = i64::try_from(half).unwrap_or(i64::MAX);
        self.value(Prim::Idiv, &[Operand::from(half), bytes])
    }

    /// Pushes a copy of each array of `ck.arrays` (reached from the loop's
    /// inputs).
    fn push_arrays(&mut self, ck: &CkLoop) -> Result<(), ReverseError> {
        for a in self.copied_arrays(ck)? {
            let copy = self.value(Prim::Copy, &[a])?;
            self.push(copy)?;
        }
        Ok(())
    }

    /// The arrays of `ck.arrays` (a snapshot copies them), each reached
    /// from its loop input along its path at the current position.
    fn copied_arrays(&mut self, ck: &CkLoop) -> Result<Vec<Operand>, ReverseError> {
        let mut arrays = Vec::with_capacity(ck.arrays.len());
        for leaf in &ck.arrays {
            let mut a = self.input(ck, leaf.input);
            for &k in &leaf.path {
                a = self.value(Prim::Getfield, &[a, Operand::from(k)])?;
            }
            arrays.push(a);
        }
        Ok(arrays)
    }

    /// The header phi of each carried array of `ck` (a snapshot copies it),
    /// as this sweep names it.
    fn carried_values(&self, ck: &CkLoop) -> Result<Vec<Operand>, ReverseError> {
        let cx = self.cx;
        let phis = header_phis(cx, cx.shape.loops.of(ck.k).header);
        ck.carried
            .iter()
            .map(|c| {
                let (_, r) = phis
                    .get(c.phi)
                    .copied()
                    .ok_or_else(|| internal(&cx.floc, "a carried array without its phi"))?;
                map_op(&self.pmap, &Operand::Value(r), &cx.floc)
            })
            .collect()
    }

    /// Input `j` of loop `ck` where this loop is built.
    fn input(&self, ck: &CkLoop, j: usize) -> Operand {
        Operand::Value(ck.inputs[j])
    }

    /// The result of `prim` on `args` at the current position.
    fn value(&mut self, prim: Prim, args: &[Operand]) -> Result<Operand, ReverseError> {
        emit_value(&mut self.fb, prim, args).map_err(|m| err(&self.cx.floc, m))
    }

    /// `push(op)` at the current position.
    fn push(&mut self, op: Operand) -> Result<(), ReverseError> {
        self.fb
            .prim(Prim::Push, &[op])
            .map_err(build_err(&self.cx.floc))?;
        Ok(())
    }

    /// The primal statement `inst` (not a phi).
    fn statement(&mut self, inst: Inst) -> Result<(), ReverseError> {
        let cx = self.cx;
        let data = &cx.src.insts[inst];
        let loc = cx.loc_of(inst);
        self.fb.set_pos(data.pos);
        let res_ty = cx.result_type(inst);
        let r =
            super::super::sweep::primal_stmt(&mut self.fb, &data.kind, &res_ty, &self.pmap, &loc)?;
        if let Some(v) = data.result {
            self.pmap.set(v, Some(r));
        }
        Ok(())
    }

    /// The terminator of primal block `i` (the header's ends `REST`).
    fn terminator(&mut self, i: usize) -> Result<(), ReverseError> {
        let cx = self.cx;
        let build = build_err(&cx.floc);
        let tloc = cx.block_loc(i);
        self.fb
            .set_pos(cx.src.blocks[cx.shape.bb.blocks[i].id].term_pos);
        let index = cx.shape.bb.index();
        let to = |b: &Block| -> Result<Block, ReverseError> {
            index[*b]
                .map(|p| self.fblock[p])
                .ok_or_else(|| internal(&tloc, "a branch out of the function"))
        };
        match &cx.shape.bb.blocks[i].term {
            BTerm::Goto(t) => {
                let t = to(t)?;
                self.fb.goto(t).map_err(&build)?;
            }
            BTerm::Br { cond, else_, .. } => {
                let c = map_op(&self.pmap, cond, &tloc)?;
                let e = to(else_)?;
                self.fb.gotoifnot(c, e).map_err(&build)?;
            }
            BTerm::Switch { index: op, targets } => {
                let c = map_op(&self.pmap, op, &tloc)?;
                let ts = targets.iter().map(to).collect::<Result<Vec<_>, _>>()?;
                self.fb.switch(c, &ts).map_err(&build)?;
            }
            BTerm::Return(_) => return Err(internal(&tloc, "a return inside a loop")),
        }
        Ok(())
    }

    /// The new shadow phi of the kept array whose old one is `old`.
    fn kept_shadow(&self, old: Value) -> Result<Value, ReverseError> {
        self.kshadow
            .get(&old)
            .copied()
            .ok_or_else(|| internal(&self.cx.floc, "a kept shadow without its phi"))
    }

    /// Adds to kept shadow phi `phi` an entry per (primal) block of
    /// `entries` (the reachable ones only, with `reachable`): the kept
    /// shadow phi renamed, or the shadow from before the loop; the edges
    /// of the header `head` leave from `REST`.
    fn kept_entries(
        &mut self,
        (phi, head): (Value, Block),
        entries: &[(Block, Operand)],
        reachable: bool,
    ) -> Result<(), ReverseError> {
        let cx = self.cx;
        let index = cx.shape.bb.index();
        for &(p, op) in entries {
            let Some(pi) = index[p].filter(|&pi| !reachable || cx.shape.reachable[pi]) else {
                continue;
            };
            let from = if self.fblock[pi] == head {
                self.rest
            } else {
                self.fblock[pi]
            };
            let v = match op {
                Operand::Value(v) => self.kshadow.get(&v).copied().map_or(op, Operand::Value),
                op => op,
            };
            self.fb
                .add_phi_entry(phi, from, v)
                .map_err(build_err(&cx.floc))?;
        }
        Ok(())
    }

    /// The entries of the loop's phis and of the countdown's.
    fn phi_entries(&mut self, ck: &CkLoop, cd: &Countdown) -> Result<(), ReverseError> {
        let cx = self.cx;
        let l = &cx.shape.loops.of(ck.k);
        let build = build_err(&cx.floc);
        let index = cx.shape.bb.index();
        let head = self.fblock[l.header];
        let (c, st, next) = (cd.c, cd.st, cd.next);
        let header = header_phis(cx, l.header);
        for i in l.members.iter().copied() {
            for &inst in &cx.shape.bb.blocks[i].stmts {
                let data = &cx.src.insts[inst];
                let (InstKind::Phi { entries }, Some(r)) = (&data.kind, data.result) else {
                    continue;
                };
                let Some(Operand::Value(phi)) = self.pmap[r] else {
                    continue;
                };
                let loc = cx.loc_of(inst);
                for (p, op) in entries {
                    let Some(pi) = index[*p].filter(|&pi| cx.shape.reachable[pi]) else {
                        continue;
                    };
                    // The header's edges now leave from `REST`.
                    let from = if self.fblock[pi] == head {
                        self.rest
                    } else {
                        self.fblock[pi]
                    };
                    // An advance starts from the state it is given.
                    let given = match (pi == ck.pre, i == l.header) {
                        (true, true) => header
                            .iter()
                            .position(|&(_, x)| x == r)
                            .and_then(|j| self.init.get(j).copied()),
                        _ => None,
                    };
                    let v = match given {
                        Some(v) => v,
                        None => map_op(&self.pmap, op, &loc)?,
                    };
                    self.fb.add_phi_entry(phi, from, v).map_err(&build)?;
                }
            }
        }
        let pre = self.fblock[ck.pre];
        for kept in ck.carried.iter().filter_map(|c| c.kept.as_ref()) {
            let phi = self.kept_shadow(kept.phi)?;
            self.fb
                .add_phi_entry(phi, pre, kept.entry)
                .map_err(&build)?;
            self.kept_entries((phi, head), &kept.latches, false)?;
        }
        for ik in &ck.inner_kept {
            let phi = self.kept_shadow(ik.phi)?;
            self.kept_entries((phi, head), &ik.entries, true)?;
        }
        self.fb
            .add_phi_entry(c, pre, Operand::from(0i64))
            .map_err(&build)?;
        self.fb
            .add_phi_entry(st, pre, Operand::from(false))
            .map_err(&build)?;
        for &h in &cd.held {
            self.fb
                .add_phi_entry(h, pre, Operand::from(false))
                .map_err(&build)?;
        }
        if let Some((sc, _)) = cd.thin {
            self.fb
                .add_phi_entry(sc, pre, Operand::from(0i64))
                .map_err(&build)?;
        }
        // The first snapshot is due at stretch 0; its slots come from the run.
        for &(phi, _) in cd.revolve.iter().flatten() {
            self.fb
                .add_phi_entry(phi, pre, Operand::from(0i64))
                .map_err(&build)?;
        }
        for &latch in &ck.latches {
            let lb = self.fblock[latch];
            self.fb.add_phi_entry(c, lb, next).map_err(&build)?;
            self.fb
                .add_phi_entry(st, lb, Operand::from(true))
                .map_err(&build)?;
            // Two iterations by the next visit when one by this one, ...
            for (&h, &before) in cd.held.iter().zip(std::iter::once(&st).chain(&cd.held)) {
                self.fb
                    .add_phi_entry(h, lb, Operand::Value(before))
                    .map_err(&build)?;
            }
            if let Some((sc, sc_next)) = cd.thin {
                self.fb.add_phi_entry(sc, lb, sc_next).map_err(&build)?;
            }
            for &(phi, at_rest) in cd.revolve.iter().flatten() {
                self.fb
                    .add_phi_entry(phi, lb, Operand::Value(at_rest))
                    .map_err(&build)?;
            }
        }
        Ok(())
    }
}

/// The kept arrays' shadows after the loop: the recording sweep's shadow
/// phis (and the shadows of values always holding a kept array,
/// [`super::CkLoop::kept_left`]) renamed to the phis `kshadow` of the loop
/// that does not record.
fn kept_renames(
    ck: &CkLoop,
    kshadow: &HashMap<Value, Value>,
    (renamed, shown): (&mut HashMap<Value, Operand>, &mut HashMap<Value, Value>),
) -> Result<(), &'static str> {
    for (&old, &new) in kshadow {
        renamed.insert(old, Operand::Value(new));
        shown.insert(old, new);
    }
    for &(old, kept) in &ck.kept_left {
        let new = kshadow
            .get(&kept)
            .copied()
            .ok_or("a kept array leaving without its shadow")?;
        renamed.insert(old, Operand::Value(new));
        shown.insert(old, new);
    }
    Ok(())
}

/// For each carried array of `ck` used after the loop, and each array the
/// last iteration made that leaves through exit block `exit` (at position
/// `e`; a fresh zero array as long as it), the shadow it leaves with (the
/// old shadow of the recording sweep, the new value), made at the start
/// of `exit` of `f` (after its phis): for a carried array, a fresh zero
/// array as long as the array (its value in the loop that does not record,
/// by `pmap`) when the loop ran an iteration (`ran`, the header's flag; for
/// an array replaced on some iterations only, its own flag: when the loop
/// replaced it), else the shadow it entered with, which is then its shadow
/// as without a limit.
fn exit_shadows(
    f: &mut irad_ir::Func,
    (e, exit): (usize, Block),
    ck: &CkLoop,
    pmap: &SecondaryMap<Value, Option<Operand>>,
    ran: &[Value],
) -> Result<ExitShadows, String> {
    let mut out = Vec::new();
    let mut only_here = Vec::new();
    let mut made = Vec::new();
    // The header's arrays' shadows here, by header phi.
    let mut header: HashMap<Value, Value> = HashMap::default();
    for c in ck.carried.iter().filter(|c| c.escapes) {
        let Some((sphi, entry)) = c.shadow else {
            continue;
        };
        let a = pmap[c.value].ok_or("a carried array without its new value")?;
        let mut value = |f: &mut irad_ir::Func, prim: Prim, args: &[Operand], ty: Type| {
            exit_value(f, (exit, &mut made), prim, args, ty)
        };
        let n = value(f, Prim::Length, &[a], Type::I64)?;
        let fresh = value(f, Prim::Zeros, &[Operand::Value(n)], c.ty.clone())?;
        let mut entered = Operand::Value(ck.inputs[entry]);
        // An array handed on from another phi holds, after t iterations
        // fewer than its depth, the array the phi t places up its chain
        // entered with, and leaves with that one's entering shadow.
        for (t, &e) in c.held.iter().enumerate() {
            let by = *ran.get(t).ok_or("a held array without its flag")?;
            let s = value(
                f,
                Prim::Select,
                &[Operand::Value(by), Operand::Value(ck.inputs[e]), entered],
                c.ty.clone(),
            )?;
            entered = Operand::Value(s);
        }
        // While it holds the array another phi entered with, that one's
        // entering shadow.
        if let Some(((_, hb), theirs)) = c.held_entry {
            let by = pmap[hb].ok_or("a flag without its new value")?;
            let s = value(
                f,
                Prim::Select,
                &[by, Operand::Value(ck.inputs[theirs]), entered],
                c.ty.clone(),
            )?;
            entered = Operand::Value(s);
        }
        // An array replaced on some iterations only leaves with the shadow
        // it entered with until the loop has replaced it.
        let by = match c.replaced {
            Some((_, rb)) => pmap[rb].ok_or("a flag without its new value")?,
            None => Operand::Value(
                *ran.get(c.held.len())
                    .ok_or("a held array without its flag")?,
            ),
        };
        let s = value(
            f,
            Prim::Select,
            &[by, Operand::Value(fresh), entered],
            c.ty.clone(),
        )?;
        out.push((sphi, s));
        header.insert(c.value, s);
    }
    shared_exits(f, (exit, &mut made), ck, pmap, (&mut out, &mut header))?;
    // Arrays the last iteration made: a fresh zero array as long as each,
    // made once (`zeros_of`, by array) when a chosen phi takes it too.
    let mut zeros_of: HashMap<Value, Value> = HashMap::default();
    let mut zeros = |f: &mut irad_ir::Func, made: &mut Vec<Inst>, x: &Left| {
        if let Some(&z) = zeros_of.get(&x.value) {
            return Ok(z);
        }
        let a = pmap[x.value].ok_or("an array made in the loop without its new value")?;
        let n = exit_value(f, (exit, made), Prim::Length, &[a], Type::I64)?;
        let z = exit_value(
            f,
            (exit, made),
            Prim::Zeros,
            &[Operand::Value(n)],
            x.ty.clone(),
        )?;
        zeros_of.insert(x.value, z);
        Ok::<Value, String>(z)
    };
    for x in ck.left.iter().filter(|x| x.exits.contains(&e)) {
        let Some(s) = x.shadow else { continue };
        // The web's one made array, where it leaves here too: where the
        // iteration made the array, the phi holds that one (one shadow).
        let one = x.chosen.as_ref().and_then(|ch| {
            ck.left
                .iter()
                .find(|m| Some(m.value) == ch.made && m.exits.contains(&e) && m.shadow.is_some())
        });
        let Some(ch) = x.chosen.as_ref() else {
            let fresh = zeros(f, &mut made, x)?;
            match x.exits.len() == ck.leave.exits.len() {
                true => out.push((s, fresh)),
                false => only_here.push((s, fresh)),
            }
            continue;
        };
        // A phi holding the header's array: that array's shadow where it
        // leaves too (one object), else the entering shadow while the loop
        // has not replaced it. Where the iteration made the array it holds
        // and that is the web's one made array, leaving here too, that
        // array's shadow (one object).
        let select =
            |f: &mut irad_ir::Func, made: &mut Vec<Inst>, by: Value, a: Value, b: Value| {
                let by = pmap[by].ok_or("a flag without its new value")?;
                let args = [by, Operand::Value(a), Operand::Value(b)];
                exit_value(f, (exit, made), Prim::Select, &args, x.ty.clone())
            };
        let mut fresh = match (header.get(&ch.header), one) {
            (Some(&h), Some(m)) => {
                let z = zeros(f, &mut made, m)?;
                select(f, &mut made, ch.this, z, h)?
            }
            (Some(&h), None) => {
                let z = zeros(f, &mut made, x)?;
                select(f, &mut made, ch.this, z, h)?
            }
            (None, _) => {
                let z = zeros(f, &mut made, x)?;
                select(f, &mut made, ch.flag, z, ch.entry)?
            }
        };
        if let (None, Some(m)) = (header.get(&ch.header), one) {
            let z = zeros(f, &mut made, m)?;
            fresh = select(f, &mut made, ch.this, z, fresh)?;
        }
        // Its header phi not read after the loop: where it holds the array
        // a header phi of its alias chains leaving here holds, that one's
        // shadow (one object; since session 37, `super::chosen_apart`).
        if !header.contains_key(&ch.header) {
            fresh = chain_exits(
                f,
                (exit, &mut made),
                ck,
                pmap,
                (x, ch.header, &header),
                fresh,
            )?;
        }
        match x.exits.len() == ck.leave.exits.len() {
            true => out.push((s, fresh)),
            false => only_here.push((s, fresh)),
        }
    }
    let insts = &mut f.blocks[exit].insts;
    insts.retain(|i| !made.contains(i));
    let phis = insts
        .iter()
        .take_while(|&&i| matches!(f.insts[i].kind, InstKind::Phi { .. }))
        .count();
    insts.splice(phis..phis, made);
    Ok((out, only_here))
}

/// A carried array that may be another's ([`super::Carried::alias`], up its
/// chain) and leaves, as that one does: where the two are one array (`same`
/// of their values in the loop that does not record, by `pmap`), it leaves
/// with that one's shadow, one shadow for one array as in the run, in
/// `out` (by the recording sweep's shadow phi) and `header` (by the
/// header phi).
fn shared_exits(
    f: &mut irad_ir::Func,
    (exit, made): (Block, &mut Vec<Inst>),
    ck: &CkLoop,
    pmap: &SecondaryMap<Value, Option<Operand>>,
    (out, header): (&mut [(Value, Value)], &mut HashMap<Value, Value>),
) -> Result<(), String> {
    let carried = &ck.carried;
    // By depth: the phi up the chain is settled first.
    for i in super::alias_order(carried, |c| c.escapes) {
        let c = &carried[i];
        let (Some(sphi), Some(&own)) = (c.shadow.map(|s| s.0), header.get(&c.value)) else {
            continue;
        };
        let a = pmap[c.value].ok_or("a carried array without its new value")?;
        let mut s = own;
        for j in super::alias_chain(carried, i) {
            let Some(&theirs) = header.get(&carried[j].value) else {
                continue;
            };
            let b = pmap[carried[j].value].ok_or("a carried array without its new value")?;
            s = where_same(f, (exit, made), (a, b), (theirs, s), &c.ty)?;
        }
        header.insert(c.value, s);
        if let Some(o) = out.iter_mut().find(|o| o.0 == sphi) {
            o.1 = s;
        }
    }
    Ok(())
}

/// The shadow of `x`, a phi choosing arrays on some iterations whose
/// header phi `h` does not leave the loop (its shadow `own` otherwise):
/// where `x` holds the array of a carried phi of `h`'s alias chains that
/// leaves (in `header`, by header phi, with its exit shadow), that phi's
/// exit shadow, so that one array leaves with one shadow.
fn chain_exits(
    f: &mut irad_ir::Func,
    (exit, made): (Block, &mut Vec<Inst>),
    ck: &CkLoop,
    pmap: &SecondaryMap<Value, Option<Operand>>,
    (x, h, header): (&Left, Value, &HashMap<Value, Value>),
    own: Value,
) -> Result<Value, String> {
    let carried = &ck.carried;
    let root = |i: usize| super::alias_root(|j| carried[j].alias, carried.len(), i);
    let at = carried
        .iter()
        .position(|c| c.value == h)
        .ok_or("a chosen array's header phi is not carried")?;
    let a = pmap[x.value].ok_or("an array made in the loop without its new value")?;
    let mut s = own;
    for (j, c) in carried.iter().enumerate() {
        let Some(&theirs) = header.get(&c.value) else {
            continue;
        };
        if j == at || root(j) != root(at) {
            continue;
        }
        let b = pmap[c.value].ok_or("a carried array without its new value")?;
        s = where_same(f, (exit, made), (a, b), (theirs, s), &x.ty)?;
    }
    Ok(s)
}

/// `select(same(a, b), theirs, own) :: ty` appended to block `exit`: the
/// shadow `theirs` where arrays `a` and `b` are one, `own` otherwise.
fn where_same(
    f: &mut irad_ir::Func,
    (exit, made): (Block, &mut Vec<Inst>),
    (a, b): (Operand, Operand),
    (theirs, own): (Value, Value),
    ty: &Type,
) -> Result<Value, String> {
    let one = exit_value(f, (exit, made), Prim::Same, &[a, b], Type::Bool)?;
    let args = [
        Operand::Value(one),
        Operand::Value(theirs),
        Operand::Value(own),
    ];
    exit_value(f, (exit, made), Prim::Select, &args, ty.clone())
}

/// `prim(args) :: ty` appended to block `exit` of `f`, its statement noted
/// in `made` (which [`exit_shadows`] moves after the block's phis).
fn exit_value(
    f: &mut irad_ir::Func,
    (exit, made): (Block, &mut Vec<Inst>),
    prim: Prim,
    args: &[Operand],
    ty: Type,
) -> Result<Value, String> {
    let kind = InstKind::Prim {
        prim,
        args: args.into(),
    };
    let (inst, r) = f.push_inst(exit, kind, Some(ty), None);
    made.push(inst);
    r.ok_or_else(|| "a statement without its result".to_string())
}

/// The shadows exit blocks make ([`exit_shadows`]): those of arrays that
/// leave through every exit edge, then those of arrays made in the last
/// iteration that leave through some only (by the recording sweep's old
/// shadow, the new value).
type ExitShadows = (Vec<(Value, Value)>, Vec<(Value, Value)>);

/// Renames, in the blocks of `f` outside the loop (`members` and the new
/// `snap`/`rest`), the loop's values `renamed` says, or in a block of
/// `in_exit` what it says for that block first (edges from the header
/// `head` now leave from `rest`); fails when such a block reads a value the
/// loop's recording statements defined (`recording`) that has no new name.
fn rename_outside(
    f: &mut irad_ir::Func,
    members: &HashSet<Block>,
    (snap, rest): (Block, Block),
    recording: &HashSet<Value>,
    (renamed, in_exit): (&HashMap<Value, Operand>, &InExit),
    head: Block,
) -> Result<(), String> {
    let none = HashMap::default();
    let map = |own: &HashMap<Value, Operand>, op: &mut Operand| -> Result<(), String> {
        if let Operand::Value(v) = op
            && recording.contains(v)
        {
            *op = *own.get(v).or_else(|| renamed.get(v)).ok_or_else(|| {
                format!(
                    "value {} of a checkpointed loop is used after it",
                    v.as_u32()
                )
            })?;
        }
        Ok(())
    };
    let outside: Vec<Block> = f
        .layout
        .iter()
        .copied()
        .filter(|b| !members.contains(b) && *b != snap && *b != rest)
        .collect();
    for b in outside {
        let own = in_exit.get(&b).unwrap_or(&none);
        for inst in f.blocks[b].insts.clone() {
            match &mut f.insts[inst].kind {
                InstKind::Prim { args, .. } | InstKind::Invoke { args, .. } => {
                    args.iter_mut().try_for_each(|op| map(own, op))?;
                }
                InstKind::CallValue { callee, args } => {
                    let mut c = Operand::Value(*callee);
                    map(own, &mut c)?;
                    if let Operand::Value(c) = c {
                        *callee = c;
                    }
                    args.iter_mut().try_for_each(|op| map(own, op))?;
                }
                InstKind::Phi { entries } => {
                    for (from, op) in entries.iter_mut() {
                        if *from == head {
                            *from = rest;
                        }
                        // A phi's entry is read at the end of the block it
                        // comes from.
                        let at = in_exit.get(from).unwrap_or(&none);
                        map(at, op)?;
                    }
                }
            }
        }
        match &mut f.blocks[b].term {
            Some(Terminator::GotoIfNot { cond: op, .. })
            | Some(Terminator::Switch { index: op, .. })
            | Some(Terminator::Return(op)) => map(own, op)?,
            _ => {}
        }
    }
    Ok(())
}

/// Builds, in function `func` (a thinned loop's replay, `thin.rs`), a loop
/// that does not record: the primal statements of loop `ck` (whose member
/// positions in layout order are `order`), entered from `entry` (open: it
/// gets the jump to the loop's header), its header phis starting from
/// `init`, leaving to `done` (which it leaves open) at the visit `target`
/// of its header, with the header phis' values as they are there; `pmap`
/// gives the function's operand of each primal value defined before the
/// loop. The kept carried arrays' shadows start from their `entry` and
/// take their latches' operands, which must be the function's. Returns
/// those values and the kept shadows there, and the new blocks in layout
/// order (`done` right after the header, which falls through to it).
pub(in crate::reverse) fn advance(
    cx: &Derivation<'_>,
    module: &mut Module,
    (func, ck): (FuncId, &CkLoop),
    (pmap, order): (SecondaryMap<Value, Option<Operand>>, &[usize]),
    (entry, done): (Block, Block),
    (init, target): (Vec<Operand>, Operand),
) -> Result<Advanced, ReverseError> {
    let l = &cx.shape.loops.of(ck.k);
    let build = build_err(&cx.floc);
    let mut fb = FuncBuilder::new(module, func).map_err(&build)?;
    // Every block outside the loop is `done`: the loop's exits are not taken.
    let mut fblock = vec![done; cx.shape.bb.blocks.len()];
    for &i in order {
        fblock[i] = fb.create_block();
    }
    fblock[ck.pre] = entry;
    let rest = fb.create_block();
    fb.switch_to_block(entry).map_err(&build)?;
    fb.goto(fblock[l.header]).map_err(&build)?;
    let mut p = PLoop {
        cx,
        fb,
        fblock: &fblock,
        pmap,
        kshadow: HashMap::default(),
        snap: done,
        rest,
        mode: Mode::Advance { target },
        init,
        extra: Vec::new(),
    };
    let countdown = p.blocks(ck)?;
    p.phi_entries(ck, &countdown)?;
    let values = header_phis(cx, l.header)
        .iter()
        .map(|&(_, r)| map_op(&p.pmap, &Operand::Value(r), &cx.floc))
        .collect::<Result<Vec<_>, _>>()?;
    let kept = ck
        .carried
        .iter()
        .filter_map(|c| c.kept.as_ref())
        .map(|k| {
            p.kshadow
                .get(&k.phi)
                .map(|&v| Operand::Value(v))
                .ok_or_else(|| internal(&cx.floc, "a kept shadow without its phi"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let PLoop { mut fb, .. } = p;
    // The forward sweep's order keeps each fall-through inside the loop; a
    // fall-through out of it (to `done` here) goes through a `goto`.
    let index = cx.shape.bb.index();
    let mut blocks = Vec::with_capacity(order.len() + 2);
    for &i in order {
        let mut ends = fblock[i];
        blocks.push(ends);
        if i == l.header {
            blocks.extend([done, rest]);
            ends = rest;
        }
        if let BTerm::Br { then, .. } = &cx.shape.bb.blocks[i].term
            && index[*then].is_none_or(|p| !l.contains(p))
        {
            let tramp = fb.create_block();
            fb.switch_to_block(tramp).map_err(&build)?;
            fb.goto(done).map_err(&build)?;
            let at = blocks.iter().position(|&b| b == ends).map_or(0, |p| p + 1);
            blocks.insert(at, tramp);
        }
    }
    Ok(((values, kept), blocks))
}

/// What [`advance`] returns: the header phis' values and the kept
/// shadows where it stops, and its blocks in layout order.
type Advanced = ((Vec<Operand>, Vec<Operand>), Vec<Block>);
