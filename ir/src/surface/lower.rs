//! Lowers a type-checked surface file to SSA IR directly, with no memory
//! slots: the algorithm of Braun et al. 2013, "Simple and Efficient
//! Construction of SSA Form".
//!
//! Assumes `info` is what `check` returned for `file`. Guarantees, for such
//! input: one IR function per `fn` (same name, parameter names and order, IR
//! types equal to the surface types) that passes the verifier, where
//! - local variables are SSA values from the start (see `ssa`): a read in a
//!   block whose predecessors are not all known yet (a loop header before its
//!   body is lowered) makes an incomplete phi, completed when the block is
//!   sealed; no phi with one distinct incoming value besides itself survives;
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
    BinOp, Block as AstBlock, Builtin, Expr, ExprId, ExprKind, File, FnDecl, LocalId, Res, Stmt,
    StmtKind, Sym, TypeInfo, UnOp,
};
use super::ssa::{SsaBuilder, finish};
use crate::builder::FuncBuilder;
use crate::func::{Block, Const, FuncId, FuncRef, Module, Operand, Value};
use crate::loc::Pos;
use crate::prim::Prim;
use crate::types::{Scalar, Type};
use rustc_hash::FxHashMap as HashMap;

/// Lowers every function of `file` to IR, using the checker's `info`.
pub fn lower(file: &File, info: &TypeInfo) -> Module {
    let mut m = Module::new();
    let mut ids: HashMap<Sym, FuncId> = HashMap::default();
    for f in &file.funcs {
        let params = file
            .params(f.params)
            .iter()
            .map(|p| (Some(file.name(p.name.name).to_string()), p.ty.clone()))
            .collect();
        if let Ok(id) = m.declare_func(file.name(f.name.name), params, f.ret.clone()) {
            m[id].pos = Some(f.pos);
            ids.insert(f.name.name, id);
        }
    }
    for f in &file.funcs {
        if let Some(&id) = ids.get(&f.name.name) {
            let rule = |r: &Option<crate::surface::ast::Ident>| {
                r.as_ref().and_then(|r| ids.get(&r.name).copied())
            };
            let rules = crate::DeclaredRules {
                jvp: rule(&f.jvp),
                vjp: rule(&f.vjp),
            };
            m.declare_rules(id, rules);
            lower_fn(&mut m, id, &ids, file, f, info);
        }
    }
    m
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
    file: &'a File,
    info: &'a TypeInfo,
    funcs: &'a HashMap<Sym, FuncId>,
    ssa: SsaBuilder<'m>,
    loops: Vec<LoopCtx>,
}

fn lower_fn(
    m: &mut Module,
    id: FuncId,
    funcs: &HashMap<Sym, FuncId>,
    file: &File,
    f: &FnDecl,
    info: &TypeInfo,
) {
    let Ok(b) = FuncBuilder::new(m, id) else {
        return;
    };
    let mut lw = Lower {
        file,
        info,
        funcs,
        ssa: SsaBuilder::new(b),
        loops: Vec::new(),
    };
    let params: Vec<(LocalId, Type, usize)> = file
        .params(f.params)
        .iter()
        .enumerate()
        .filter_map(|(i, p)| Some((*info.locals.get(&p.name.pos)?, p.ty.clone(), i)))
        .collect();
    lw.ssa.start(&params);
    let value = lw.block(&f.body);
    if let Some(v) = value {
        lw.ssa.b.set_pos(f.body.tail.map(|t| file.expr(t).pos));
        lw.ssa.ret(v);
    }
    let state = lw.ssa.into_state();
    finish(&mut m[id], state, file, info);
}

impl Lower<'_, '_> {
    // ------------------------------------------------------------ statements

    fn block(&mut self, b: &AstBlock) -> Option<Operand> {
        let file = self.file;
        for s in file.stmts(b.stmts) {
            self.ssa.cur?;
            self.stmt(s);
        }
        self.ssa.cur?;
        match b.tail {
            Some(tail) => self.expr_id(tail),
            None => Some(Operand::Const(Const::Unit)),
        }
    }

    fn stmt(&mut self, s: &Stmt) -> Option<()> {
        let file = self.file;
        match &s.kind {
            StmtKind::Let {
                mutable,
                name,
                init,
                ..
            } => {
                let value = self.expr_id(*init)?;
                let local = *self.info.locals.get(&name.pos)?;
                if *mutable {
                    self.ssa.write_var(local, value);
                } else {
                    self.ssa.bind_fixed(local, value);
                }
            }
            StmtKind::Assign { name, value } => {
                let value = self.expr_id(*value)?;
                let local = *self.info.locals.get(&name.pos)?;
                self.ssa.write_var(local, value);
            }
            StmtKind::IndexAssign {
                array,
                index,
                value,
            } => {
                let a = self.expr_id(*array)?;
                let i = self.expr_id(*index)?;
                let v = self.expr_id(*value)?;
                self.emit(s.pos, Prim::Arrayset, &[a, i, v])?;
            }
            StmtKind::Expr(e) => {
                self.expr_id(*e)?;
            }
            StmtKind::While { cond, body } => self.while_loop(file.expr(*cond), body)?,
            StmtKind::For {
                var,
                start,
                end,
                body,
            } => self.for_loop(s.pos, var.pos, (*start, *end), body)?,
            StmtKind::Return(value) => {
                let v = match value {
                    Some(e) => self.expr_id(*e)?,
                    None => Operand::Const(Const::Unit),
                };
                self.ssa.b.set_pos(Some(s.pos));
                self.ssa.ret(v);
            }
            StmtKind::Break => {
                let exit = self.loops.last()?.exit;
                self.ssa.goto(exit);
            }
            StmtKind::Continue => {
                let target = self.continue_target()?;
                self.ssa.goto(target);
            }
        }
        Some(())
    }

    fn continue_target(&mut self) -> Option<Block> {
        if let Some(target) = self.loops.last()?.cont {
            return Some(target);
        }
        let block = self.ssa.new_block();
        self.loops.last_mut()?.cont = Some(block);
        Some(block)
    }

    fn while_loop(&mut self, cond: &Expr, body: &AstBlock) -> Option<()> {
        let header = self.ssa.new_block();
        self.ssa.goto(header);
        self.ssa.switch(header);
        let Some(c) = self.expr(cond) else {
            self.ssa.seal(header);
            return None;
        };
        let (body_block, exit) = (self.ssa.new_block(), self.ssa.new_block());
        self.ssa.b.set_pos(Some(cond.pos));
        self.ssa.branch(c, body_block, exit);
        self.ssa.seal(body_block);
        self.ssa.switch(body_block);
        self.loops.push(LoopCtx {
            exit,
            cont: Some(header),
            for_header: None,
        });
        self.block(body);
        self.ssa.goto(header);
        self.loops.pop();
        self.ssa.seal(header);
        self.ssa.seal(exit);
        self.ssa.switch(exit);
        Some(())
    }

    fn for_loop(
        &mut self,
        pos: Pos,
        var_pos: Pos,
        (start, end): (ExprId, ExprId),
        body: &AstBlock,
    ) -> Option<()> {
        let first = self.expr_id(start)?;
        let last = self.expr_id(end)?;
        let local = *self.info.locals.get(&var_pos)?;
        self.ssa.write_var(local, first);
        let header = self.ssa.new_block();
        self.ssa.goto(header);
        self.ssa.switch(header);
        let i = self.ssa.read_var(local, header);
        let Some(c) = self.emit(pos, Prim::Lt, &[i, last]) else {
            self.ssa.seal(header);
            return None;
        };
        let (body_block, exit) = (self.ssa.new_block(), self.ssa.new_block());
        self.ssa.branch(c, body_block, exit);
        self.ssa.seal(body_block);
        self.ssa.switch(body_block);
        self.loops.push(LoopCtx {
            exit,
            cont: None,
            for_header: Some(header),
        });
        self.block(body);
        if self.ssa.cur.is_some()
            && let Some(target) = self.continue_target()
        {
            self.ssa.goto(target);
        }
        if let Some(ctx) = self.loops.pop()
            && let (Some(incr), Some(header)) = (ctx.cont, ctx.for_header)
        {
            self.ssa.seal(incr);
            self.ssa.switch(incr);
            let i = self.ssa.read_var(local, incr);
            if let Some(next) = self.emit(pos, Prim::Iadd, &[i, Operand::Const(Const::I64(1))]) {
                self.ssa.write_var(local, next);
            }
            self.ssa.goto(header);
        }
        self.ssa.seal(header);
        self.ssa.seal(exit);
        self.ssa.switch(exit);
        Some(())
    }

    // ------------------------------------------------------------ expressions

    /// Emits `call prim(args)` at `pos`; `()` stands for a unit result.
    fn emit(&mut self, pos: Pos, prim: Prim, args: &[Operand]) -> Option<Operand> {
        self.ssa.cur?;
        self.ssa.b.set_pos(Some(pos));
        let res = self.ssa.b.prim(prim, args).ok()?;
        Some(res.map_or(Operand::Const(Const::Unit), Operand::Value))
    }

    fn result(res: Option<Value>) -> Operand {
        res.map_or(Operand::Const(Const::Unit), Operand::Value)
    }

    /// The value of the expression `id`; `None` when control does not reach
    /// its end.
    fn expr_id(&mut self, id: ExprId) -> Option<Operand> {
        self.expr(self.file.expr(id))
    }

    /// The value of `e`; `None` when control does not reach its end.
    fn expr(&mut self, e: &Expr) -> Option<Operand> {
        self.ssa.cur?;
        let file = self.file;
        match &e.kind {
            ExprKind::F64(x) => Some(Operand::Const(Const::F64(*x))),
            ExprKind::I64(k) => Some(Operand::Const(Const::I64(*k))),
            ExprKind::Bool(b) => Some(Operand::Const(Const::Bool(*b))),
            ExprKind::Unit => Some(Operand::Const(Const::Unit)),
            ExprKind::Name(_) => self.name(e),
            ExprKind::Unary { op, operand } => {
                let v = self.expr_id(*operand)?;
                match (op, v) {
                    (UnOp::Neg, Operand::Const(Const::F64(x))) => {
                        Some(Operand::Const(Const::F64(-x)))
                    }
                    (UnOp::Neg, Operand::Const(Const::I64(k))) => {
                        Some(Operand::Const(Const::I64(k.wrapping_neg())))
                    }
                    (UnOp::Not, _) => self.emit(e.pos, Prim::Not, &[v]),
                    (UnOp::Neg, _) => {
                        let prim = if self.ssa.b.operand_type(&v).ok()? == Type::I64 {
                            Prim::Ineg
                        } else {
                            Prim::Neg
                        };
                        self.emit(e.pos, prim, &[v])
                    }
                }
            }
            ExprKind::Chain { first, rest } => {
                let mut lhs = self.expr_id(*first)?;
                for &(op, pos, rhs) in file.links(*rest) {
                    lhs = match op {
                        BinOp::And | BinOp::Or => {
                            self.short_circuit(op, pos, lhs, file.expr(rhs))?
                        }
                        _ => {
                            let r = self.expr_id(rhs)?;
                            self.binary(op, pos, lhs, r)?
                        }
                    };
                }
                Some(lhs)
            }
            ExprKind::Call { callee, args } => self.call(e, file.expr(*callee), file.exprs(*args)),
            ExprKind::Index { array, index } => {
                let a = self.expr_id(*array)?;
                let i = self.expr_id(*index)?;
                self.emit(e.pos, Prim::Arrayref, &[a, i])
            }
            ExprKind::Field { tuple, index } => {
                let t = self.expr_id(*tuple)?;
                let k = Operand::Const(Const::I64(i64::from(*index)));
                self.emit(e.pos, Prim::Getfield, &[t, k])
            }
            ExprKind::Tuple(elems) => {
                let ops = self.exprs(file.exprs(*elems))?;
                self.emit(e.pos, Prim::Tuple, &ops)
            }
            ExprKind::If { cond, then, els } => {
                let els = els.map(|x| file.expr(x));
                self.if_expr(e, file.expr(*cond), file.block(*then), els)
            }
            ExprKind::Block(b) => self.block(file.block(*b)),
        }
    }

    fn exprs(&mut self, es: &[ExprId]) -> Option<smallvec::SmallVec<[Operand; 4]>> {
        let mut ops = smallvec::SmallVec::with_capacity(es.len());
        for &e in es {
            ops.push(self.expr_id(e)?);
        }
        Some(ops)
    }

    fn name(&mut self, e: &Expr) -> Option<Operand> {
        match self.info.names.get(&e.id)? {
            Res::Local(local) => {
                let cur = self.ssa.cur?;
                Some(self.ssa.read_var(*local, cur))
            }
            Res::Func(name) => {
                let id = *self.funcs.get(name)?;
                Some(Operand::Const(Const::Func(FuncRef::User(id))))
            }
            Res::Prim(p) => Some(Operand::Const(Const::Func(FuncRef::Prim(*p)))),
            Res::Builtin(_) => None,
        }
    }

    fn binary(&mut self, op: BinOp, pos: Pos, l: Operand, r: Operand) -> Option<Operand> {
        let int = self.ssa.b.operand_type(&l).ok()? == Type::I64;
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
        let from = self.ssa.cur?;
        let (cond, decided) = if op == BinOp::And {
            (lhs, false)
        } else {
            (self.emit(pos, Prim::Not, &[lhs])?, true)
        };
        let (rhs_block, join) = (self.ssa.new_block(), self.ssa.new_block());
        self.ssa.b.set_pos(Some(pos));
        self.ssa.branch(cond, rhs_block, join);
        self.ssa.seal(rhs_block);
        self.ssa.switch(rhs_block);
        let mut entries = vec![(from, Operand::Const(Const::Bool(decided)))];
        if let Some(v) = self.expr(rhs)
            && let Some(end) = self.ssa.cur
        {
            entries.push((end, v));
            self.ssa.goto(join);
        }
        self.ssa.seal(join);
        self.ssa.switch(join);
        self.ssa.join(Type::Bool, entries)
    }

    fn if_expr(
        &mut self,
        e: &Expr,
        cond: &Expr,
        then: &AstBlock,
        els: Option<&Expr>,
    ) -> Option<Operand> {
        let c = self.expr(cond)?;
        let Some(els) = els else {
            let then_block = self.ssa.new_block();
            let join = self.ssa.new_block();
            self.ssa.b.set_pos(Some(cond.pos));
            self.ssa.branch(c, then_block, join);
            self.ssa.seal(then_block);
            self.ssa.switch(then_block);
            self.block(then);
            self.ssa.goto(join);
            self.ssa.seal(join);
            self.ssa.switch(join);
            return Some(Operand::Const(Const::Unit));
        };
        let mut arrivals = Vec::new();
        self.if_else_arms(c, cond.pos, then, els, &mut arrivals);
        if arrivals.is_empty() {
            return None;
        }
        let join = self.ssa.new_block();
        for &(end, _) in &arrivals {
            self.ssa.switch(end);
            self.ssa.goto(join);
        }
        self.ssa.seal(join);
        self.ssa.switch(join);
        let ty = self.info.types.get(e.id.0 as usize)?.clone();
        self.ssa.join(ty, arrivals)
    }

    /// Lowers the arms of `if c { then } else els` from the branch on `c` up
    /// to, not including, the join: each arm that completes adds its end
    /// block and value to `arrivals`. An `else if` that has an `else` adds its
    /// arms to the same list, so a whole chain meets at one join (one phi).
    fn if_else_arms(
        &mut self,
        c: Operand,
        cond_pos: Pos,
        then: &AstBlock,
        els: &Expr,
        arrivals: &mut Vec<(Block, Operand)>,
    ) {
        let (then_block, else_block) = (self.ssa.new_block(), self.ssa.new_block());
        self.ssa.b.set_pos(Some(cond_pos));
        self.ssa.branch(c, then_block, else_block);
        self.ssa.seal(then_block);
        self.ssa.seal(else_block);
        self.ssa.switch(then_block);
        if let (Some(v), Some(end)) = (self.block(then), self.ssa.cur) {
            arrivals.push((end, v));
        }
        self.ssa.cur = None;
        self.ssa.switch(else_block);
        let file = self.file;
        match &els.kind {
            ExprKind::If {
                cond,
                then,
                els: Some(inner),
            } => {
                let cond = file.expr(*cond);
                if let Some(c) = self.expr(cond) {
                    let then = file.block(*then);
                    self.if_else_arms(c, cond.pos, then, file.expr(*inner), arrivals);
                }
            }
            _ => {
                if let (Some(v), Some(end)) = (self.expr(els), self.ssa.cur) {
                    arrivals.push((end, v));
                }
            }
        }
        self.ssa.cur = None;
    }

    fn call(&mut self, e: &Expr, callee: &Expr, args: &[ExprId]) -> Option<Operand> {
        let res = match callee.kind {
            ExprKind::Name(_) => self.info.names.get(&callee.id).copied(),
            _ => None,
        };
        let callee_op = match res {
            Some(Res::Func(name)) => {
                Operand::Const(Const::Func(FuncRef::User(*self.funcs.get(&name)?)))
            }
            Some(Res::Prim(Prim::Alloc)) => {
                let ops = self.exprs(args)?;
                let elem = match self.info.types.get(e.id.0 as usize)? {
                    Type::Array(elem) => *elem,
                    _ => Scalar::F64,
                };
                self.ssa.cur?;
                self.ssa.b.set_pos(Some(e.pos));
                let v = self.ssa.b.alloc(elem, *ops.first()?).ok()?;
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
        self.ssa.cur?;
        self.ssa.b.set_pos(Some(e.pos));
        match callee_op {
            Operand::Value(v) => self.ssa.b.call_value(v, &ops).ok().map(Self::result),
            Operand::Const(Const::Func(FuncRef::User(id))) => {
                self.ssa.b.invoke(id, &ops).ok().map(Self::result)
            }
            Operand::Const(Const::Func(FuncRef::Prim(p))) => self.emit(e.pos, p, &ops),
            Operand::Const(_) => None,
        }
    }
}
