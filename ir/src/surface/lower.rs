//! Lowers a type-checked surface file to SSA IR directly, with no memory
//! slots: the algorithm of Braun et al. 2013, "Simple and Efficient
//! Construction of SSA Form".
//!
//! Assumes `info` is what `check` returned for `file`. Guarantees, for such
//! input: one IR function per `fn` (same name, parameter names and order, IR
//! types equal to the surface types) that passes the verifier, where
//! - each local variable is tracked per block (its current definition);
//!   a read in a block whose predecessors are not all known yet (a loop header
//!   before its body is lowered) makes an incomplete phi, completed when the
//!   block is sealed; every phi with one distinct incoming value besides
//!   itself is removed and its uses replaced, recursively, so none survives;
//! - the fall-through block of every `gotoifnot` follows it in the layout and
//!   the entry block has no predecessors (a loop always gets its own header);
//! - `&&`, `||` and `if` are branches joined by a phi; `for` evaluates its
//!   bounds once and `continue` jumps to the increment;
//! - every statement carries the source position of the expression it
//!   computes; values are named after the variables they define (`%s`,
//!   `%s_1`, ... in layout order), parameters keep their names, temporaries
//!   stay unnamed; blocks are labelled `#1`, `#2`, ... in layout order.
//!
//! Code after a statement that never completes (`return`, `break`,
//! `continue`, or an `if` all of whose branches do) is not lowered. A builder
//! call that fails (only on input `check` would reject) leaves its statement
//! out, which the verifier then reports.

use super::ast::{
    BinOp, Block as AstBlock, Builtin, Expr, ExprKind, File, FnDecl, LocalId, Res, Stmt, StmtKind,
    TypeInfo, UnOp,
};
use crate::builder::FuncBuilder;
use crate::func::{
    Block, Const, Func, FuncId, FuncRef, InstKind, Module, Operand, Terminator, Value, ValueDef,
};
use crate::loc::Pos;
use crate::prim::Prim;
use crate::types::{Scalar, Type};
use std::collections::{HashMap, HashSet};

/// Lowers every function of `file` to IR, using the checker's `info`.
pub fn lower(file: &File, info: &TypeInfo) -> Module {
    let mut m = Module::new();
    let mut ids: HashMap<&str, FuncId> = HashMap::new();
    for f in &file.funcs {
        let params = f
            .params
            .iter()
            .map(|p| (Some(p.name.name.clone()), p.ty.clone()))
            .collect();
        if let Ok(id) = m.declare_func(&f.name.name, params, f.ret.clone()) {
            m[id].pos = Some(f.pos);
            ids.insert(&f.name.name, id);
        }
    }
    for f in &file.funcs {
        if let Some(&id) = ids.get(f.name.name.as_str()) {
            lower_fn(&mut m, id, &ids, f, info);
        }
    }
    m
}

/// The SSA construction state of one function.
#[derive(Default)]
struct Ssa {
    /// The current definition of each variable at the end of each block so far.
    defs: HashMap<(Block, LocalId), Operand>,
    /// Blocks whose predecessors are all known.
    sealed: HashSet<Block>,
    /// Phis made in unsealed blocks, completed when the block is sealed.
    incomplete: HashMap<Block, Vec<(LocalId, Value)>>,
    /// Predecessors of each block, in the order the edges were made.
    preds: HashMap<Block, Vec<Block>>,
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
    /// The variable each value defines, for naming.
    tags: HashMap<Value, LocalId>,
    /// The block each `gotoifnot` block must be followed by in the layout.
    follow: HashMap<Block, Block>,
    /// Blocks in the order they were first filled: the layout, before fix-up.
    order: Vec<Block>,
    /// The blocks of `order`.
    in_order: HashSet<Block>,
}

/// Where `break` and `continue` of the innermost loop go.
struct LoopCtx {
    /// The exit block.
    exit: Block,
    /// The `continue` target: the header of a `while`, or the increment
    /// block of a `for`, made on first use.
    cont: Option<Block>,
    /// For a `for` loop, the header to jump to after the increment.
    for_header: Option<Block>,
}

struct Lower<'a, 'm> {
    b: FuncBuilder<'m>,
    info: &'a TypeInfo,
    funcs: &'a HashMap<&'a str, FuncId>,
    ssa: Ssa,
    loops: Vec<LoopCtx>,
    /// The block being filled; `None` after a statement that never completes.
    cur: Option<Block>,
}

fn lower_fn(
    m: &mut Module,
    id: FuncId,
    funcs: &HashMap<&str, FuncId>,
    f: &FnDecl,
    info: &TypeInfo,
) {
    let Ok(b) = FuncBuilder::new(m, id) else {
        return;
    };
    let mut lw = Lower {
        b,
        info,
        funcs,
        ssa: Ssa::default(),
        loops: Vec::new(),
        cur: None,
    };
    let entry = lw.new_block();
    lw.seal(entry);
    lw.switch(entry);
    for (i, p) in f.params.iter().enumerate() {
        if let (Ok(v), Some(&local)) = (lw.b.param(i), info.locals.get(&p.name.pos)) {
            lw.ssa.local_types.insert(local, p.ty.clone());
            lw.ssa.defs.insert((entry, local), Operand::Value(v));
        }
    }
    let value = lw.block(&f.body);
    if let Some(v) = value {
        lw.b.set_pos(f.body.tail.as_deref().map(|t| t.pos));
        lw.ret(v);
    }
    lw.remove_all_trivial_phis();
    let ssa = lw.ssa;
    finish(&mut m[id], ssa, info);
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

impl Lower<'_, '_> {
    // ------------------------------------------------------------ blocks

    fn new_block(&mut self) -> Block {
        self.b.create_block()
    }

    fn switch(&mut self, block: Block) {
        if self.b.switch_to_block(block).is_ok() {
            self.cur = Some(block);
            if self.ssa.in_order.insert(block) {
                self.ssa.order.push(block);
            }
        }
    }

    fn add_pred(&mut self, block: Block, pred: Block) {
        self.ssa.preds.entry(block).or_default().push(pred);
    }

    /// `goto target` from the current block, if there is one.
    fn goto(&mut self, target: Block) {
        if let Some(cur) = self.cur.take()
            && self.b.goto(target).is_ok()
        {
            self.add_pred(target, cur);
        }
    }

    /// `gotoifnot cond, els`, falling through to `then`.
    fn branch(&mut self, cond: Operand, then: Block, els: Block) {
        if let Some(cur) = self.cur.take()
            && self.b.gotoifnot(cond, els).is_ok()
        {
            self.add_pred(then, cur);
            self.add_pred(els, cur);
            self.ssa.follow.insert(cur, then);
        }
    }

    fn ret(&mut self, value: Operand) {
        if self.cur.take().is_some() {
            // A failure is an internal error the verifier reports.
            let _ = self.b.ret(value);
        }
    }

    // ------------------------------------------------------------ SSA variables

    fn write_var(&mut self, local: LocalId, value: Operand) {
        let Some(cur) = self.cur else { return };
        if !self.ssa.local_types.contains_key(&local)
            && let Ok(ty) = self.b.operand_type(&value)
        {
            self.ssa.local_types.insert(local, ty);
        }
        if let Operand::Value(v) = value {
            let is_param = matches!(
                self.b.func().values.get(v).map(|d| d.def),
                Some(ValueDef::Param(_))
            );
            if !is_param {
                self.ssa.tags.entry(v).or_insert(local);
            }
        }
        self.ssa.defs.insert((cur, local), value);
    }

    fn read_var(&mut self, local: LocalId, block: Block) -> Operand {
        let Some(ty) = self.ssa.local_types.get(&local).cloned() else {
            return Operand::Const(Const::Unit);
        };
        if ty == Type::Unit {
            return Operand::Const(Const::Unit);
        }
        if let Some(&op) = self.ssa.defs.get(&(block, local)) {
            return resolve_compress(&mut self.ssa.forward, op);
        }
        let preds = self.ssa.preds.get(&block).cloned().unwrap_or_default();
        let value = if !self.ssa.sealed.contains(&block) {
            let Some(phi) = self.new_phi(block, ty, local) else {
                return Operand::Const(Const::Unit);
            };
            self.ssa
                .incomplete
                .entry(block)
                .or_default()
                .push((local, phi));
            Operand::Value(phi)
        } else if let [pred] = preds[..] {
            self.read_var(local, pred)
        } else if preds.is_empty() {
            // A read with no definition: `check` makes this impossible.
            Operand::Const(Const::Unit)
        } else {
            let Some(phi) = self.new_phi(block, ty, local) else {
                return Operand::Const(Const::Unit);
            };
            // Recorded first, so that a read through a cycle finds this phi.
            self.ssa.defs.insert((block, local), Operand::Value(phi));
            self.add_phi_operands(local, phi, block)
        };
        self.ssa.defs.insert((block, local), value);
        value
    }

    fn new_phi(&mut self, block: Block, ty: Type, local: LocalId) -> Option<Value> {
        let phi = self.b.insert_phi(block, ty).ok()?;
        self.ssa.phis.push(phi);
        self.ssa.tags.insert(phi, local);
        Some(phi)
    }

    fn add_phi_operands(&mut self, local: LocalId, phi: Value, block: Block) -> Operand {
        let preds = self.ssa.preds.get(&block).cloned().unwrap_or_default();
        for pred in preds {
            let op = self.read_var(local, pred);
            self.add_entry(phi, pred, op);
        }
        self.ssa.complete.insert(phi);
        self.try_remove_trivial_phi(phi)
    }

    fn add_entry(&mut self, phi: Value, pred: Block, op: Operand) {
        // A failure is an internal error the verifier reports.
        let _ = self.b.add_phi_entry(phi, pred, op);
        if let Operand::Value(v) = op {
            self.ssa.users.entry(v).or_default().push(phi);
        }
    }

    fn seal(&mut self, block: Block) {
        if let Some(pending) = self.ssa.incomplete.remove(&block) {
            for (local, phi) in pending {
                self.add_phi_operands(local, phi, block);
            }
        }
        self.ssa.sealed.insert(block);
    }

    /// The entries of `phi`, with replacements followed.
    fn phi_entries(&mut self, phi: Value) -> Vec<Operand> {
        let f = self.b.func();
        let Some(ValueDef::Inst(inst)) = f.values.get(phi).map(|d| d.def) else {
            return Vec::new();
        };
        let raw: Vec<Operand> = match f.insts.get(inst).map(|d| &d.kind) {
            Some(InstKind::Phi { entries }) => entries.iter().map(|&(_, op)| op).collect(),
            _ => Vec::new(),
        };
        raw.into_iter()
            .map(|op| resolve_compress(&mut self.ssa.forward, op))
            .collect()
    }

    /// Removes `phi` if it has one distinct incoming value besides itself,
    /// then retries the phis that used it; returns what stands for it.
    fn try_remove_trivial_phi(&mut self, phi: Value) -> Operand {
        if self.ssa.forward.contains_key(&phi) {
            return resolve_compress(&mut self.ssa.forward, Operand::Value(phi));
        }
        if !self.ssa.complete.contains(&phi) {
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
        self.ssa.forward.insert(phi, same);
        let mut users = self.ssa.users.remove(&phi).unwrap_or_default();
        users.retain(|u| *u != phi && !self.ssa.forward.contains_key(u));
        users.sort_unstable();
        users.dedup();
        if let Operand::Value(v) = same {
            // The users of `phi` now use `same`.
            self.ssa.users.entry(v).or_default().extend(&users);
        }
        for user in users {
            self.try_remove_trivial_phi(user);
        }
        same
    }

    /// A last sweep: repeats removal until no trivial phi is left (the
    /// recursive removal already finds them all; this makes it a guarantee).
    fn remove_all_trivial_phis(&mut self) {
        loop {
            let before = self.ssa.forward.len();
            let live: Vec<Value> = self
                .ssa
                .phis
                .iter()
                .copied()
                .filter(|p| !self.ssa.forward.contains_key(p))
                .collect();
            for phi in live {
                self.try_remove_trivial_phi(phi);
            }
            if self.ssa.forward.len() == before {
                return;
            }
        }
    }

    /// The value of a join: the incoming operand when all are the same,
    /// otherwise a phi at the start of the current block.
    fn join(&mut self, ty: Type, entries: Vec<(Block, Operand)>) -> Option<Operand> {
        let cur = self.cur?;
        let ops: Vec<Operand> = entries
            .iter()
            .map(|&(_, op)| resolve_compress(&mut self.ssa.forward, op))
            .collect();
        let first = *ops.first()?;
        if ty == Type::Unit || ops.iter().all(|&op| op == first) {
            return Some(first);
        }
        let phi = self.b.insert_phi(cur, ty).ok()?;
        for (pred, op) in entries {
            self.add_entry(phi, pred, op);
        }
        self.ssa.phis.push(phi);
        self.ssa.complete.insert(phi);
        Some(Operand::Value(phi))
    }

    // ------------------------------------------------------------ statements

    fn block(&mut self, b: &AstBlock) -> Option<Operand> {
        for s in &b.stmts {
            self.cur?;
            self.stmt(s);
        }
        self.cur?;
        match &b.tail {
            Some(tail) => self.expr(tail),
            None => Some(Operand::Const(Const::Unit)),
        }
    }

    fn stmt(&mut self, s: &Stmt) -> Option<()> {
        match &s.kind {
            StmtKind::Let { name, init, .. } => {
                let value = self.expr(init)?;
                let local = *self.info.locals.get(&name.pos)?;
                self.write_var(local, value);
            }
            StmtKind::Assign { name, value } => {
                let value = self.expr(value)?;
                let local = *self.info.locals.get(&name.pos)?;
                self.write_var(local, value);
            }
            StmtKind::IndexAssign {
                array,
                index,
                value,
            } => {
                let a = self.expr(array)?;
                let i = self.expr(index)?;
                let v = self.expr(value)?;
                self.emit(s.pos, Prim::Arrayset, &[a, i, v])?;
            }
            StmtKind::Expr(e) => {
                self.expr(e)?;
            }
            StmtKind::While { cond, body } => self.while_loop(cond, body)?,
            StmtKind::For {
                var,
                start,
                end,
                body,
            } => self.for_loop(s.pos, var.pos, start, end, body)?,
            StmtKind::Return(value) => {
                let v = match value {
                    Some(e) => self.expr(e)?,
                    None => Operand::Const(Const::Unit),
                };
                self.b.set_pos(Some(s.pos));
                self.ret(v);
            }
            StmtKind::Break => {
                let exit = self.loops.last()?.exit;
                self.goto(exit);
            }
            StmtKind::Continue => {
                let target = self.continue_target()?;
                self.goto(target);
            }
        }
        Some(())
    }

    fn continue_target(&mut self) -> Option<Block> {
        if let Some(target) = self.loops.last()?.cont {
            return Some(target);
        }
        let block = self.new_block();
        self.loops.last_mut()?.cont = Some(block);
        Some(block)
    }

    fn while_loop(&mut self, cond: &Expr, body: &AstBlock) -> Option<()> {
        let header = self.new_block();
        self.goto(header);
        self.switch(header);
        let Some(c) = self.expr(cond) else {
            self.seal(header);
            return None;
        };
        let (body_block, exit) = (self.new_block(), self.new_block());
        self.b.set_pos(Some(cond.pos));
        self.branch(c, body_block, exit);
        self.seal(body_block);
        self.switch(body_block);
        self.loops.push(LoopCtx {
            exit,
            cont: Some(header),
            for_header: None,
        });
        self.block(body);
        self.goto(header);
        self.loops.pop();
        self.seal(header);
        self.seal(exit);
        self.switch(exit);
        Some(())
    }

    fn for_loop(
        &mut self,
        pos: Pos,
        var_pos: Pos,
        start: &Expr,
        end: &Expr,
        body: &AstBlock,
    ) -> Option<()> {
        let first = self.expr(start)?;
        let last = self.expr(end)?;
        let local = *self.info.locals.get(&var_pos)?;
        self.write_var(local, first);
        let header = self.new_block();
        self.goto(header);
        self.switch(header);
        let i = self.read_var(local, header);
        let Some(c) = self.emit(pos, Prim::Lt, &[i, last]) else {
            self.seal(header);
            return None;
        };
        let (body_block, exit) = (self.new_block(), self.new_block());
        self.branch(c, body_block, exit);
        self.seal(body_block);
        self.switch(body_block);
        self.loops.push(LoopCtx {
            exit,
            cont: None,
            for_header: Some(header),
        });
        self.block(body);
        if self.cur.is_some()
            && let Some(target) = self.continue_target()
        {
            self.goto(target);
        }
        if let Some(ctx) = self.loops.pop()
            && let (Some(incr), Some(header)) = (ctx.cont, ctx.for_header)
        {
            self.seal(incr);
            self.switch(incr);
            let i = self.read_var(local, incr);
            if let Some(next) = self.emit(pos, Prim::Iadd, &[i, Operand::Const(Const::I64(1))]) {
                self.write_var(local, next);
            }
            self.goto(header);
        }
        self.seal(header);
        self.seal(exit);
        self.switch(exit);
        Some(())
    }

    // ------------------------------------------------------------ expressions

    /// Emits `call prim(args)` at `pos`; `()` stands for a unit result.
    fn emit(&mut self, pos: Pos, prim: Prim, args: &[Operand]) -> Option<Operand> {
        self.cur?;
        self.b.set_pos(Some(pos));
        let res = self.b.prim(prim, args).ok()?;
        Some(res.map_or(Operand::Const(Const::Unit), Operand::Value))
    }

    fn result(res: Option<Value>) -> Operand {
        res.map_or(Operand::Const(Const::Unit), Operand::Value)
    }

    /// The value of `e`; `None` when control does not reach its end.
    fn expr(&mut self, e: &Expr) -> Option<Operand> {
        self.cur?;
        match &e.kind {
            ExprKind::F64(x) => Some(Operand::Const(Const::F64(*x))),
            ExprKind::I64(k) => Some(Operand::Const(Const::I64(*k))),
            ExprKind::Bool(b) => Some(Operand::Const(Const::Bool(*b))),
            ExprKind::Unit => Some(Operand::Const(Const::Unit)),
            ExprKind::Name(_) => self.name(e),
            ExprKind::Unary { op, operand } => {
                let v = self.expr(operand)?;
                match (op, v) {
                    (UnOp::Neg, Operand::Const(Const::F64(x))) => {
                        Some(Operand::Const(Const::F64(-x)))
                    }
                    (UnOp::Neg, Operand::Const(Const::I64(k))) => {
                        Some(Operand::Const(Const::I64(k.wrapping_neg())))
                    }
                    (UnOp::Not, _) => self.emit(e.pos, Prim::Not, &[v]),
                    (UnOp::Neg, _) => {
                        let prim = if self.b.operand_type(&v).ok()? == Type::I64 {
                            Prim::Ineg
                        } else {
                            Prim::Neg
                        };
                        self.emit(e.pos, prim, &[v])
                    }
                }
            }
            ExprKind::Chain { first, rest } => {
                let mut lhs = self.expr(first)?;
                for (op, pos, rhs) in rest {
                    lhs = match op {
                        BinOp::And | BinOp::Or => self.short_circuit(*op, *pos, lhs, rhs)?,
                        _ => {
                            let r = self.expr(rhs)?;
                            self.binary(*op, *pos, lhs, r)?
                        }
                    };
                }
                Some(lhs)
            }
            ExprKind::Call { callee, args } => self.call(e, callee, args),
            ExprKind::Index { array, index } => {
                let a = self.expr(array)?;
                let i = self.expr(index)?;
                self.emit(e.pos, Prim::Arrayref, &[a, i])
            }
            ExprKind::Field { tuple, index } => {
                let t = self.expr(tuple)?;
                let k = Operand::Const(Const::I64(i64::from(*index)));
                self.emit(e.pos, Prim::Getfield, &[t, k])
            }
            ExprKind::Tuple(elems) => {
                let ops = self.exprs(elems)?;
                self.emit(e.pos, Prim::Tuple, &ops)
            }
            ExprKind::If { cond, then, els } => self.if_expr(e, cond, then, els.as_deref()),
            ExprKind::Block(b) => self.block(b),
        }
    }

    fn exprs(&mut self, es: &[Expr]) -> Option<Vec<Operand>> {
        let mut ops = Vec::with_capacity(es.len());
        for e in es {
            ops.push(self.expr(e)?);
        }
        Some(ops)
    }

    fn name(&mut self, e: &Expr) -> Option<Operand> {
        match self.info.names.get(&e.id)? {
            Res::Local(local) => {
                let cur = self.cur?;
                Some(self.read_var(*local, cur))
            }
            Res::Func(name) => {
                let id = *self.funcs.get(name.as_str())?;
                Some(Operand::Const(Const::Func(FuncRef::User(id))))
            }
            Res::Prim(p) => Some(Operand::Const(Const::Func(FuncRef::Prim(*p)))),
            Res::Builtin(_) => None,
        }
    }

    fn binary(&mut self, op: BinOp, pos: Pos, l: Operand, r: Operand) -> Option<Operand> {
        let int = self.b.operand_type(&l).ok()? == Type::I64;
        let prim = match (op, int) {
            (BinOp::Add, false) => Prim::Add,
            (BinOp::Add, true) => Prim::Iadd,
            (BinOp::Sub, false) => Prim::Sub,
            (BinOp::Sub, true) => Prim::Isub,
            (BinOp::Mul, false) => Prim::Mul,
            (BinOp::Mul, true) => Prim::Imul,
            (BinOp::Div, false) => Prim::Div,
            (BinOp::Div, true) => Prim::Idiv,
            (BinOp::Rem, _) => Prim::Irem,
            (BinOp::Lt, _) => Prim::Lt,
            (BinOp::Le, _) => Prim::Le,
            (BinOp::Gt, _) => Prim::Gt,
            (BinOp::Ge, _) => Prim::Ge,
            (BinOp::Eq, _) => Prim::Eq,
            (BinOp::Ne, _) => Prim::Ne,
            (BinOp::And, _) => Prim::And,
            (BinOp::Or, _) => Prim::Or,
        };
        self.emit(pos, prim, &[l, r])
    }

    /// `lhs && rhs` is `if lhs { rhs } else { false }`; `lhs || rhs` is
    /// `if !lhs { rhs } else { true }`: `rhs` runs only when it decides.
    fn short_circuit(&mut self, op: BinOp, pos: Pos, lhs: Operand, rhs: &Expr) -> Option<Operand> {
        let from = self.cur?;
        let (cond, decided) = if op == BinOp::And {
            (lhs, false)
        } else {
            (self.emit(pos, Prim::Not, &[lhs])?, true)
        };
        let (rhs_block, join) = (self.new_block(), self.new_block());
        self.b.set_pos(Some(pos));
        self.branch(cond, rhs_block, join);
        self.seal(rhs_block);
        self.switch(rhs_block);
        let mut entries = vec![(from, Operand::Const(Const::Bool(decided)))];
        if let Some(v) = self.expr(rhs)
            && let Some(end) = self.cur
        {
            entries.push((end, v));
            self.goto(join);
        }
        self.seal(join);
        self.switch(join);
        self.join(Type::Bool, entries)
    }

    fn if_expr(
        &mut self,
        e: &Expr,
        cond: &Expr,
        then: &AstBlock,
        els: Option<&Expr>,
    ) -> Option<Operand> {
        let c = self.expr(cond)?;
        let then_block = self.new_block();
        let Some(els) = els else {
            let join = self.new_block();
            self.b.set_pos(Some(cond.pos));
            self.branch(c, then_block, join);
            self.seal(then_block);
            self.switch(then_block);
            self.block(then);
            self.goto(join);
            self.seal(join);
            self.switch(join);
            return Some(Operand::Const(Const::Unit));
        };
        let else_block = self.new_block();
        self.b.set_pos(Some(cond.pos));
        self.branch(c, then_block, else_block);
        self.seal(then_block);
        self.seal(else_block);
        let mut arrivals = Vec::new();
        self.switch(then_block);
        if let (Some(v), Some(end)) = (self.block(then), self.cur) {
            arrivals.push((end, v));
        }
        self.cur = None;
        self.switch(else_block);
        if let (Some(v), Some(end)) = (self.expr(els), self.cur) {
            arrivals.push((end, v));
        }
        self.cur = None;
        if arrivals.is_empty() {
            return None;
        }
        let join = self.new_block();
        for &(end, _) in &arrivals {
            self.switch(end);
            self.goto(join);
        }
        self.seal(join);
        self.switch(join);
        let ty = self.info.types.get(e.id.0 as usize)?.clone();
        self.join(ty, arrivals)
    }

    fn call(&mut self, e: &Expr, callee: &Expr, args: &[Expr]) -> Option<Operand> {
        let res = match callee.kind {
            ExprKind::Name(_) => self.info.names.get(&callee.id).cloned(),
            _ => None,
        };
        let callee_op = match res {
            Some(Res::Func(name)) => {
                Operand::Const(Const::Func(FuncRef::User(*self.funcs.get(name.as_str())?)))
            }
            Some(Res::Prim(Prim::Alloc)) => {
                let ops = self.exprs(args)?;
                let elem = match self.info.types.get(e.id.0 as usize)? {
                    Type::Array(elem) => *elem,
                    _ => Scalar::F64,
                };
                self.cur?;
                self.b.set_pos(Some(e.pos));
                let v = self.b.alloc(elem, *ops.first()?).ok()?;
                return Some(Operand::Value(v));
            }
            Some(Res::Prim(p)) => {
                let ops = self.exprs(args)?;
                return self.emit(e.pos, p, &ops);
            }
            Some(Res::Builtin(builtin)) => {
                let ops = self.exprs(args)?;
                let prim = match builtin {
                    Builtin::Len => Prim::Length,
                    Builtin::ToF64 => Prim::Sitofp,
                    Builtin::ToI64 => Prim::Fptosi,
                    Builtin::Zeros => Prim::Zeros,
                };
                return self.emit(e.pos, prim, &ops);
            }
            Some(Res::Local(_)) | None => self.expr(callee)?,
        };
        let ops = self.exprs(args)?;
        self.cur?;
        self.b.set_pos(Some(e.pos));
        match callee_op {
            Operand::Value(v) => self.b.call_value(v, &ops).ok().map(Self::result),
            Operand::Const(Const::Func(FuncRef::User(id))) => {
                self.b.invoke(id, &ops).ok().map(Self::result)
            }
            Operand::Const(Const::Func(FuncRef::Prim(p))) => self.emit(e.pos, p, &ops),
            Operand::Const(_) => None,
        }
    }
}

/// Applies the replacements of removed phis, fixes the layout so that every
/// `gotoifnot` falls through to its `then` block, and names blocks and values.
fn finish(func: &mut Func, mut ssa: Ssa, info: &TypeInfo) {
    let removed: Vec<Value> = ssa.forward.keys().copied().collect();
    for v in removed {
        resolve_compress(&mut ssa.forward, Operand::Value(v));
    }
    let fwd = &ssa.forward;
    for &block in &ssa.order {
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
            Some(Terminator::Return(op)) => *op = resolve(fwd, *op),
            _ => {}
        }
    }
    func.layout = layout(&ssa, &func.layout);
    for (i, &block) in func.layout.iter().enumerate() {
        func.blocks[block].label = i as u32 + 1;
    }
    name_values(func, &ssa.tags, info);
}

/// The blocks in the order they were filled, except that each `gotoifnot`
/// block is directly followed by its fall-through block.
fn layout(ssa: &Ssa, created: &[Block]) -> Vec<Block> {
    let followers: HashSet<Block> = ssa.follow.values().copied().collect();
    let mut placed = HashSet::new();
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
fn name_values(func: &mut Func, tags: &HashMap<Value, LocalId>, info: &TypeInfo) {
    let mut used: HashSet<String> = HashSet::new();
    let mut counts: HashMap<String, u32> = HashMap::new();
    for &p in &func.params {
        if let Some(name) = &func.values[p].name {
            used.insert(name.to_string());
            counts.insert(name.to_string(), 1);
        }
    }
    let results: Vec<Value> = func
        .layout
        .iter()
        .flat_map(|&b| func.blocks[b].insts.iter())
        .filter_map(|&i| func.insts[i].result)
        .collect();
    for v in results {
        let Some(base) = tags
            .get(&v)
            .and_then(|l| info.local_names.get(l.0 as usize))
        else {
            continue;
        };
        let n = counts.entry(base.clone()).or_insert(0);
        let name = loop {
            let candidate = if *n == 0 {
                base.clone()
            } else {
                format!("{base}_{n}")
            };
            *n += 1;
            if used.insert(candidate.clone()) {
                break candidate;
            }
        };
        func.values[v].name = Some(name.into());
    }
}
