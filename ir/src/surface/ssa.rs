//! Braun et al. 2013, "Simple and Efficient Construction of SSA Form", over
//! a [`FuncBuilder`]: the blocks and variables half of the surface lowering.
//!
//! Variables are `LocalId`s. A variable that is never assigned (a parameter,
//! a `let` without `mut`) has one value, read directly. For the others, each
//! block keeps the current definition of each variable written or read in it;
//! a read looks through the predecessors (recursively, memoised per join
//! block), making a phi only where they differ or where the search runs into
//! a cycle (a loop). In a block
//! that is not sealed (not all predecessors known: a loop header before its
//! back edges exist) the phi is incomplete and gets its entries when the block
//! is sealed. A phi whose entries are one value and itself is removed, uses of
//! it are forwarded to that value (with path compression), and the phis that
//! used it are retried, recursively; [`finish`] then rewrites all operands,
//! so no phi with a single distinct incoming value survives.
//!
//! Also kept here: the predecessor lists (the layout is not final while
//! building), the fall-through constraints of `gotoifnot`, and the names of
//! values. [`finish`] fixes the layout so each `gotoifnot` falls through to
//! the block it was built to, labels blocks `#1`, `#2`, ... in layout order,
//! and names values after their variables (`%s`, `%s_1`, ...).

use super::ast::{File, LocalId, TypeInfo};
use crate::builder::FuncBuilder;
use crate::entity::SecondaryMap;
use crate::func::{
    Block, Const, Func, FuncRef, InstKind, Operand, Terminator, Value, ValueDef, ValueName,
};
use crate::types::Type;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use smallvec::SmallVec;

/// Appends blocks and statements to one function and keeps its variables in
/// SSA form.
pub(super) struct SsaBuilder<'m> {
    /// Where statements go.
    pub(super) b: FuncBuilder<'m>,
    /// The block being filled; `None` after a statement that never completes.
    pub(super) cur: Option<Block>,
    st: Ssa,
}

/// A join whose predecessors a read is reading: the join, its predecessors,
/// and the values found so far (for the first ones).
type PendingJoin = (Block, Preds, JoinOps);

/// A block's predecessors (inline for two: a read crossing a join copies
/// them).
type Preds = SmallVec<[Block; 2]>;

/// The values of a join's predecessors, in their order.
type JoinOps = SmallVec<[(Block, Operand); 2]>;

/// What a step of a variable read found at a block.
enum Step {
    /// The value.
    Value(Operand),
    /// Nothing yet: the value is that at the end of the one predecessor.
    Pred(Block),
    /// A join: the values at the ends of these predecessors decide.
    Join(Preds),
}

/// The SSA construction state of one function.
#[derive(Default)]
pub(super) struct Ssa {
    /// The current definition of each variable at the end of each block so far.
    defs: HashMap<(Block, LocalId), Operand>,
    /// The one value of each variable that is never assigned (parameters and
    /// `let` without `mut`): its definition dominates every read, so reads
    /// need no search and no phi.
    fixed: HashMap<LocalId, Operand>,
    /// (block, variable) pairs whose value a read is computing from the
    /// block's predecessors; meeting one again means a cycle, which a phi breaks.
    visiting: HashSet<(Block, LocalId)>,
    /// Blocks whose predecessors are all known.
    sealed: HashSet<Block>,
    /// Phis made in unsealed blocks, completed when the block is sealed.
    incomplete: HashMap<Block, Vec<(LocalId, Value)>>,
    /// Predecessors of each block, in the order the edges were made.
    preds: HashMap<Block, Preds>,
    /// Removed (trivial) phis and the operand that replaces each.
    forward: HashMap<Value, Operand>,
    /// Every phi made, in order; those in `forward` are dead.
    phis: Vec<Value>,
    /// Phis whose entries are all present (only those may be found trivial).
    complete: HashSet<Value>,
    /// The phis that have each value as an entry (with replacements applied).
    users: HashMap<Value, Vec<Value>>,
    /// The IR type of each variable, known from its first definition.
    local_types: HashMap<LocalId, Type>,
    /// The variable each value defines, for naming (dense by value: one
    /// entry is set per assignment).
    tags: SecondaryMap<Value, Option<LocalId>>,
    /// The block each `gotoifnot` block must be followed by in the layout.
    follow: HashMap<Block, Block>,
    /// Blocks in the order they were first filled: the layout, before fix-up.
    order: Vec<Block>,
    /// The blocks of `order`.
    in_order: HashSet<Block>,
}

impl<'m> SsaBuilder<'m> {
    /// A builder that appends to the function of `b`, which has no block yet.
    pub(super) fn new(b: FuncBuilder<'m>) -> SsaBuilder<'m> {
        SsaBuilder {
            b,
            cur: None,
            st: Ssa::default(),
        }
    }

    /// Makes the entry block, sealed (it has no predecessors), and binds the
    /// parameters: `(local, type, parameter number)`.
    pub(super) fn start(&mut self, params: &[(LocalId, Type, usize)]) {
        let entry = self.new_block();
        self.seal(entry);
        self.switch(entry);
        for (local, ty, i) in params {
            if let Ok(v) = self.b.param(*i) {
                self.st.local_types.insert(*local, ty.clone());
                self.st.fixed.insert(*local, Operand::Value(v));
            }
        }
    }

    /// Removes the remaining trivial phis and gives back what [`finish`] needs.
    pub(super) fn into_state(mut self) -> Ssa {
        self.remove_all_trivial_phis();
        self.st
    }

    // ------------------------------------------------------------ blocks

    pub(super) fn new_block(&mut self) -> Block {
        self.b.create_block()
    }

    pub(super) fn switch(&mut self, block: Block) {
        if self.b.switch_to_block(block).is_ok() {
            self.cur = Some(block);
            if self.st.in_order.insert(block) {
                self.st.order.push(block);
            }
        }
    }

    pub(super) fn add_pred(&mut self, block: Block, pred: Block) {
        self.st.preds.entry(block).or_default().push(pred);
    }

    /// `goto target` from the current block, if there is one.
    pub(super) fn goto(&mut self, target: Block) {
        if let Some(cur) = self.cur.take()
            && self.b.goto(target).is_ok()
        {
            self.add_pred(target, cur);
        }
    }

    /// `gotoifnot cond, els`, falling through to `then`.
    pub(super) fn branch(&mut self, cond: Operand, then: Block, els: Block) {
        if let Some(cur) = self.cur.take()
            && self.b.gotoifnot(cond, els).is_ok()
        {
            self.add_pred(then, cur);
            self.add_pred(els, cur);
            self.st.follow.insert(cur, then);
        }
    }

    pub(super) fn ret(&mut self, value: Operand) {
        if self.cur.take().is_some() {
            // A failure is an internal error the verifier reports.
            let _ = self.b.ret(value);
        }
    }

    // ------------------------------------------------------------ SSA variables

    pub(super) fn write_var(&mut self, local: LocalId, value: Operand) {
        let Some(cur) = self.cur else { return };
        if !self.st.local_types.contains_key(&local)
            && let Ok(ty) = self.b.operand_type(&value)
        {
            self.st.local_types.insert(local, ty);
        }
        if let Operand::Value(v) = value {
            let is_param = matches!(
                self.b.func().values.get(v).map(|d| d.def),
                Some(ValueDef::Param(_))
            );
            if !is_param && self.st.tags.get(v).is_none() {
                self.st.tags.set(v, Some(local));
            }
        }
        self.st.defs.insert((cur, local), value);
    }

    /// Binds a variable that is never assigned (`let` without `mut`) to `value`.
    pub(super) fn bind_fixed(&mut self, local: LocalId, value: Operand) {
        if self.cur.is_none() {
            return;
        }
        self.write_var(local, value);
        self.st.fixed.insert(local, value);
    }

    /// The value of `local` at the end of `block`. The search through the
    /// predecessors keeps its own stack of joins being read, so a read across
    /// any number of joins uses no deeper native stack than one.
    pub(super) fn read_var(&mut self, local: LocalId, block: Block) -> Operand {
        if let Some(&op) = self.st.fixed.get(&local) {
            return resolve_compress(&mut self.st.forward, op);
        }
        let Some(ty) = self.st.local_types.get(&local).cloned() else {
            return Operand::Const(Const::Unit);
        };
        if ty == Type::Unit {
            return Operand::Const(Const::Unit);
        }
        let mut stack: Vec<PendingJoin> = Vec::new();
        let mut at = block;
        loop {
            // The value at the end of `at`, or a join to descend into.
            let found = match self.read_step(local, at, &ty) {
                Step::Value(v) => v,
                Step::Pred(pred) => {
                    at = pred;
                    continue;
                }
                Step::Join(preds) => {
                    // `Join` has two or more predecessors.
                    let join = at;
                    at = preds[0];
                    stack.push((join, preds, JoinOps::new()));
                    continue;
                }
            };
            // Hand the value up through the joins it completes.
            let mut value = found;
            loop {
                let Some((join, preds, ops)) = stack.last_mut() else {
                    return value;
                };
                ops.push((preds[ops.len()], value));
                if ops.len() < preds.len() {
                    at = preds[ops.len()];
                    break;
                }
                let join = *join;
                let Some((_, _, ops)) = stack.pop() else {
                    return value;
                };
                value = self.finish_join(local, join, &ty, ops);
            }
        }
    }

    /// One step of [`read_var`](Self::read_var) at `block`.
    fn read_step(&mut self, local: LocalId, block: Block, ty: &Type) -> Step {
        if let Some(&op) = self.st.defs.get(&(block, local)) {
            return Step::Value(resolve_compress(&mut self.st.forward, op));
        }
        let preds = self.st.preds.get(&block).cloned().unwrap_or_default();
        if !self.st.sealed.contains(&block) {
            let Some(phi) = self.new_phi(block, ty.clone(), local) else {
                return Step::Value(Operand::Const(Const::Unit));
            };
            self.st
                .incomplete
                .entry(block)
                .or_default()
                .push((local, phi));
            self.st.defs.insert((block, local), Operand::Value(phi));
            return Step::Value(Operand::Value(phi));
        }
        match preds[..] {
            // Not recorded: a block with one predecessor is on no cycle of
            // sealed blocks, and the joins the search crosses keep what it
            // found, so recording here too would only double the memory.
            [pred] => Step::Pred(pred),
            // A read with no definition: `check` makes this impossible.
            [] => Step::Value(Operand::Const(Const::Unit)),
            _ if !self.st.visiting.insert((block, local)) => {
                // A read through a cycle of sealed blocks came back here: a
                // phi breaks the cycle; the read of this join completes it.
                let Some(phi) = self.new_phi(block, ty.clone(), local) else {
                    return Step::Value(Operand::Const(Const::Unit));
                };
                self.st.defs.insert((block, local), Operand::Value(phi));
                Step::Value(Operand::Value(phi))
            }
            _ => Step::Join(preds),
        }
    }

    /// The value at the join `block` from the values `ops` of its
    /// predecessors: a phi only where they differ (or a cycle made one). A
    /// phi made at every join on the way and removed as trivial later would
    /// cost time and memory for each read times the joins it crosses.
    fn finish_join(&mut self, local: LocalId, block: Block, ty: &Type, ops: JoinOps) -> Operand {
        self.st.visiting.remove(&(block, local));
        let value = match self.st.defs.get(&(block, local)).copied() {
            // The phi a cycle made (nothing else records a definition here
            // while the predecessors are read).
            Some(Operand::Value(phi)) => {
                for (pred, op) in ops {
                    self.add_entry(phi, pred, op);
                }
                self.st.complete.insert(phi);
                self.try_remove_trivial_phi(phi)
            }
            _ => {
                let resolved: SmallVec<[Operand; 2]> = ops
                    .iter()
                    .map(|&(_, op)| resolve_compress(&mut self.st.forward, op))
                    .collect();
                if resolved.iter().all(|op| Some(op) == resolved.first()) {
                    resolved
                        .first()
                        .copied()
                        .unwrap_or(Operand::Const(Const::Unit))
                } else {
                    let Some(phi) = self.new_phi(block, ty.clone(), local) else {
                        return Operand::Const(Const::Unit);
                    };
                    for (pred, op) in ops {
                        self.add_entry(phi, pred, op);
                    }
                    self.st.complete.insert(phi);
                    self.try_remove_trivial_phi(phi)
                }
            }
        };
        self.st.defs.insert((block, local), value);
        value
    }

    pub(super) fn new_phi(&mut self, block: Block, ty: Type, local: LocalId) -> Option<Value> {
        let phi = self.b.insert_phi(block, ty).ok()?;
        self.st.phis.push(phi);
        self.st.tags.set(phi, Some(local));
        Some(phi)
    }

    pub(super) fn add_phi_operands(&mut self, local: LocalId, phi: Value, block: Block) -> Operand {
        let preds = self.st.preds.get(&block).cloned().unwrap_or_default();
        for pred in preds {
            let op = self.read_var(local, pred);
            self.add_entry(phi, pred, op);
        }
        self.st.complete.insert(phi);
        self.try_remove_trivial_phi(phi)
    }

    pub(super) fn add_entry(&mut self, phi: Value, pred: Block, op: Operand) {
        // A failure is an internal error the verifier reports.
        let _ = self.b.add_phi_entry(phi, pred, op);
        if let Operand::Value(v) = op {
            self.st.users.entry(v).or_default().push(phi);
        }
    }

    pub(super) fn seal(&mut self, block: Block) {
        if let Some(pending) = self.st.incomplete.remove(&block) {
            for (local, phi) in pending {
                self.add_phi_operands(local, phi, block);
            }
        }
        self.st.sealed.insert(block);
    }

    /// The entries of `phi`, with replacements followed.
    pub(super) fn phi_entries(&mut self, phi: Value) -> Vec<Operand> {
        let f = self.b.func();
        let Some(ValueDef::Inst(inst)) = f.values.get(phi).map(|d| d.def) else {
            return Vec::new();
        };
        let raw: Vec<Operand> = match f.insts.get(inst).map(|d| &d.kind) {
            Some(InstKind::Phi { entries }) => entries.iter().map(|&(_, op)| op).collect(),
            _ => Vec::new(),
        };
        raw.into_iter()
            .map(|op| resolve_compress(&mut self.st.forward, op))
            .collect()
    }

    /// Removes `phi` if it has one distinct incoming value besides itself,
    /// then retries the phis that used it; returns what stands for it.
    pub(super) fn try_remove_trivial_phi(&mut self, phi: Value) -> Operand {
        if self.st.forward.contains_key(&phi) {
            return resolve_compress(&mut self.st.forward, Operand::Value(phi));
        }
        if !self.st.complete.contains(&phi) {
            return Operand::Value(phi);
        }
        let mut same = None;
        for op in self.phi_entries(phi) {
            if op == Operand::Value(phi) || Some(op) == same {
                continue;
            }
            if same.is_some() {
                return Operand::Value(phi);
            }
            same = Some(op);
        }
        // No entry but itself: unreachable, which lowering never makes.
        let Some(same) = same else {
            return Operand::Value(phi);
        };
        self.st.forward.insert(phi, same);
        let mut users = self.st.users.remove(&phi).unwrap_or_default();
        users.retain(|u| *u != phi && !self.st.forward.contains_key(u));
        users.sort_unstable();
        users.dedup();
        if let Operand::Value(v) = same {
            // The users of `phi` now use `same`.
            self.st.users.entry(v).or_default().extend(&users);
        }
        for user in users {
            self.try_remove_trivial_phi(user);
        }
        same
    }

    /// A last sweep: repeats removal until no trivial phi is left (the
    /// recursive removal already finds them all; this makes it a guarantee).
    pub(super) fn remove_all_trivial_phis(&mut self) {
        loop {
            let before = self.st.forward.len();
            let live: Vec<Value> = self
                .st
                .phis
                .iter()
                .copied()
                .filter(|p| !self.st.forward.contains_key(p))
                .collect();
            for phi in live {
                self.try_remove_trivial_phi(phi);
            }
            if self.st.forward.len() == before {
                return;
            }
        }
    }

    /// The value of a join: the incoming operand when all are the same,
    /// otherwise a phi at the start of the current block.
    pub(super) fn join(&mut self, ty: Type, entries: Vec<(Block, Operand)>) -> Option<Operand> {
        let cur = self.cur?;
        let ops: Vec<Operand> = entries
            .iter()
            .map(|&(_, op)| resolve_compress(&mut self.st.forward, op))
            .collect();
        let first = *ops.first()?;
        if ty == Type::Unit || ops.iter().all(|&op| op == first) {
            return Some(first);
        }
        let phi = self.b.insert_phi(cur, ty).ok()?;
        for (pred, op) in entries {
            self.add_entry(phi, pred, op);
        }
        self.st.phis.push(phi);
        self.st.complete.insert(phi);
        Some(Operand::Value(phi))
    }
}

/// Applies the replacements of removed phis, fixes the layout so that every
/// `gotoifnot` falls through to its `then` block, and names blocks and values.
pub(super) fn finish(func: &mut Func, mut ssa: Ssa, file: &File, info: &TypeInfo) {
    let removed: Vec<Value> = ssa.forward.keys().copied().collect();
    for v in removed {
        resolve_compress(&mut ssa.forward, Operand::Value(v));
    }
    let fwd = &ssa.forward;
    // With no phi removed (straight-line code) there is nothing to rewrite.
    let order: &[Block] = if fwd.is_empty() { &[] } else { &ssa.order };
    for &block in order {
        let insts = std::mem::take(&mut func.blocks[block].insts);
        let mut kept = Vec::with_capacity(insts.len());
        for inst in insts {
            let data = &mut func.insts[inst];
            if data.result.is_some_and(|v| fwd.contains_key(&v)) {
                continue;
            }
            let new_kind = match &mut data.kind {
                InstKind::Prim { args, .. } | InstKind::Invoke { args, .. } => {
                    args.iter_mut().for_each(|a| *a = resolve(fwd, *a));
                    None
                }
                InstKind::Phi { entries } => {
                    entries.iter_mut().for_each(|(_, a)| *a = resolve(fwd, *a));
                    None
                }
                InstKind::CallValue { callee, args } => {
                    args.iter_mut().for_each(|a| *a = resolve(fwd, *a));
                    match resolve(fwd, Operand::Value(*callee)) {
                        Operand::Value(v) => {
                            *callee = v;
                            None
                        }
                        // The callee became a known function once a phi of
                        // function values was found trivial.
                        Operand::Const(Const::Func(FuncRef::User(func))) => {
                            Some(InstKind::Invoke {
                                func,
                                args: args.clone(),
                            })
                        }
                        Operand::Const(Const::Func(FuncRef::Prim(prim))) => Some(InstKind::Prim {
                            prim,
                            args: args.clone(),
                        }),
                        Operand::Const(_) => None,
                    }
                }
            };
            if let Some(kind) = new_kind {
                data.kind = kind;
            }
            kept.push(inst);
        }
        let data = &mut func.blocks[block];
        data.insts = kept;
        match &mut data.term {
            Some(Terminator::GotoIfNot { cond, .. }) => *cond = resolve(fwd, *cond),
            Some(Terminator::Switch { index, .. }) => *index = resolve(fwd, *index),
            Some(Terminator::Return(op)) => *op = resolve(fwd, *op),
            _ => {}
        }
    }
    func.layout = layout(&ssa, &func.layout);
    for (i, &block) in func.layout.iter().enumerate() {
        func.blocks[block].label = i as u32 + 1;
    }
    name_values(func, &ssa.tags, file, info);
}

/// The blocks in the order they were filled, except that each `gotoifnot`
/// block is directly followed by its fall-through block.
fn layout(ssa: &Ssa, created: &[Block]) -> Vec<Block> {
    let followers: HashSet<Block> = ssa.follow.values().copied().collect();
    let mut placed = HashSet::default();
    let mut out = Vec::with_capacity(ssa.order.len());
    for &start in &ssa.order {
        if placed.contains(&start) || followers.contains(&start) {
            continue;
        }
        let mut block = start;
        loop {
            placed.insert(block);
            out.push(block);
            match ssa.follow.get(&block) {
                Some(&next) if !placed.contains(&next) => block = next,
                _ => break,
            }
        }
    }
    // Only reached on a lowering bug; kept so the verifier can report it.
    for &block in ssa.order.iter().chain(created) {
        if ssa.preds.contains_key(&block) && placed.insert(block) {
            out.push(block);
        }
    }
    out
}

/// Names each value that defines a variable after it: `s`, then `s_1`, ...
fn name_values(
    func: &mut Func,
    tags: &SecondaryMap<Value, Option<LocalId>>,
    file: &File,
    info: &TypeInfo,
) {
    // The names in use are kept by their spelling (see `spelling`): pairs of
    // slices of the parameters' and the variables' names, so that the only
    // block allocated per named value is its name.
    let params: Vec<ValueName> = func
        .params
        .iter()
        .filter_map(|&p| func.values[p].name.clone())
        .collect();
    let mut used: HashSet<(&str, u32)> = HashSet::default();
    let mut counts: HashMap<&str, u32> = HashMap::default();
    for name in &params {
        used.insert(spelling(name));
        counts.insert(name, 1);
    }
    let results: Vec<Value> = func
        .layout
        .iter()
        .flat_map(|&b| func.blocks[b].insts.iter())
        .filter_map(|&i| func.insts[i].result)
        .collect();
    let mut candidate = String::new();
    for v in results {
        let Some(&base) = tags.get(v).and_then(|l| info.local_names.get(l.0 as usize)) else {
            continue;
        };
        let base = file.name(base);
        let n = counts.entry(base).or_insert(0);
        // `base` itself, then `base_1`, `base_2`, ...: the first not in use.
        let key = loop {
            let key = if *n == 0 { spelling(base) } else { (base, *n) };
            *n += 1;
            if !used.contains(&key) {
                break key;
            }
        };
        used.insert(key);
        candidate.clear();
        candidate.push_str(key.0);
        if key.1 != 0 {
            use std::fmt::Write;
            let _ = write!(candidate, "_{}", key.1);
        }
        func.values[v].name = Some(ValueName::from(candidate.as_str()));
    }
}

/// `name` as the pair `(stem, k)` that spells it: `stem_k` when it ends in
/// `_` and a decimal `k >= 1` without leading zeros, `(name, 0)` otherwise.
/// Two names are equal exactly when their pairs are (a pair spells one
/// name), and a made name `base_n` (n >= 1) is the pair `(base, n)`.
fn spelling(name: &str) -> (&str, u32) {
    if let Some((stem, digits)) = name.rsplit_once('_')
        && !digits.is_empty()
        && !digits.starts_with('0')
        && digits.bytes().all(|b| b.is_ascii_digit())
        && let Ok(k) = digits.parse::<u32>()
    {
        return (stem, k);
    }
    (name, 0)
}

/// Follows the replacements of removed phis.
fn resolve(forward: &HashMap<Value, Operand>, mut op: Operand) -> Operand {
    // Each step goes to a phi that was live when the step was made, so the
    // chain is acyclic; the bound is a guard, not a limit ever reached.
    for _ in 0..=forward.len() {
        match op {
            Operand::Value(v) => match forward.get(&v) {
                Some(&next) => op = next,
                None => return op,
            },
            Operand::Const(_) => return op,
        }
    }
    op
}

/// [`resolve`], then points every removed phi on the way straight at the
/// result (path compression), so later lookups take one step.
fn resolve_compress(forward: &mut HashMap<Value, Operand>, op: Operand) -> Operand {
    let root = resolve(forward, op);
    let mut at = op;
    while let Operand::Value(v) = at {
        match forward.get_mut(&v) {
            Some(next) if *next != root => {
                at = *next;
                *next = root;
            }
            _ => break,
        }
    }
    root
}
