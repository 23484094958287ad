//! The type checker of the surface language: resolves every name and types
//! every expression of a parsed file (SYNTAX.md §2, Rust-like rules with no
//! implicit conversions).
//!
//! Assumes a tree from the parser (its ids and lists are the file's).
//! Guarantees: either a [`TypeInfo`] in which every `Name`, callee, binding
//! and assignment is resolved and every expression has its IR type, or all
//! errors found, sorted by source position. An expression whose type cannot
//! be known gets an error type that fits everywhere, and an expression that
//! never yields (a block ending in `return`, `break` or `continue`) gets a
//! "never" type that fits everywhere too, so one mistake gives one error. In
//! [`TypeInfo::types`] both are recorded as `()`; the lowering never needs
//! the type of an expression that does not yield.

mod calls;

use super::SurfaceError;
use super::ast::{
    BinOp, Block, Builtin, Expr, ExprId, ExprKind, ExprTable, File, FnDecl, LocalId, Res, Stmt,
    StmtKind, Sym, TypeInfo, UnOp,
};
use crate::loc::{Location, Pos};
use crate::prim::Prim;
use crate::types::{FnType, Type};
use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;
use std::sync::Arc;

/// Resolves and types `file`; all errors (in source order) when it is ill-typed.
pub fn check(file: &File) -> Result<TypeInfo, Vec<SurfaceError>> {
    let mut cx = Checker {
        file,
        funcs: HashMap::default(),
        info: TypeInfo {
            types: vec![Type::Unit; file.n_exprs() as usize],
            names: ExprTable::with_capacity(file.n_exprs() as usize),
            ..TypeInfo::default()
        },
        errors: Vec::new(),
        locals: Vec::new(),
        scope: Scope::default(),
        func: "",
        ret: Type::Unit,
        loops: 0,
        while_cond: None,
    };
    for f in &file.funcs {
        cx.declare_fn(f);
    }
    for f in &file.funcs {
        cx.check_fn(f);
    }
    if cx.errors.is_empty() {
        Ok(cx.info)
    } else {
        let mut errors = cx.errors;
        errors.sort_by_key(|e| e.loc.pos);
        Err(errors)
    }
}

/// The i64 value of an integer literal, possibly negated (`3`, `-3`, `-(3)`):
/// the form the field operand of a `getfield` call must have.
fn int_literal(file: &File, e: &Expr) -> Option<i64> {
    match &e.kind {
        ExprKind::I64(k) => Some(*k),
        ExprKind::Unary {
            op: UnOp::Neg,
            operand,
        } => int_literal(file, file.expr(*operand)).map(i64::wrapping_neg),
        _ => None,
    }
}

/// A type as the checker sees it.
#[derive(Clone, Debug, PartialEq)]
enum Ty {
    /// A real type.
    Known(Type),
    /// The expression does not yield (it returns, breaks or continues).
    Never,
    /// The expression's type is unknown because of an error already reported.
    Error,
}

/// A binding in scope.
struct Local {
    ty: Ty,
    mutable: bool,
}

struct Checker<'f> {
    /// The file checked.
    file: &'f File,
    /// Signatures of the file's functions (the first of duplicates).
    /// Each function's type, shared by its uses (a call copies no list).
    funcs: HashMap<Sym, Arc<FnType>>,
    info: TypeInfo,
    errors: Vec<SurfaceError>,
    /// Every binding of the file, by `LocalId`.
    locals: Vec<Local>,
    /// The bindings in scope.
    scope: Scope,
    /// The function being checked.
    func: &'f str,
    /// Its result type.
    ret: Type,
    /// How many loops enclose the current statement.
    loops: u32,
    /// While checking a `while` condition: the value of `loops` there. A
    /// `break`/`continue` at that depth would leave from inside the
    /// condition, which Rust rejects (E0590) and so does this checker.
    while_cond: Option<u32>,
}

/// The bindings in scope: a stack, innermost last, with an index by name
/// (the innermost binding of each name), so that a lookup takes constant
/// time however many bindings are in scope (a function of 70 000
/// parameters, a body of 100 000 `let`s).
#[derive(Default)]
struct Scope {
    /// Each binding, innermost last, with the binding of the same name it
    /// shadows.
    stack: Vec<(Sym, LocalId, Option<LocalId>)>,
    /// The innermost binding of each name in scope.
    innermost: HashMap<Sym, LocalId>,
}

impl Scope {
    fn push(&mut self, name: Sym, id: LocalId) {
        let shadowed = self.innermost.insert(name, id);
        self.stack.push((name, id, shadowed));
    }

    fn lookup(&self, name: Sym) -> Option<LocalId> {
        self.innermost.get(&name).copied()
    }

    fn len(&self) -> usize {
        self.stack.len()
    }

    /// Ends the bindings made after the first `depth`.
    fn truncate(&mut self, depth: usize) {
        while self.stack.len() > depth {
            let Some((name, _, shadowed)) = self.stack.pop() else {
                break;
            };
            match shadowed {
                Some(id) => self.innermost.insert(name, id),
                None => self.innermost.remove(&name),
            };
        }
    }

    fn clear(&mut self) {
        self.stack.clear();
        self.innermost.clear();
    }

    /// The names in scope, innermost first (shadowed ones included).
    fn names_innermost_first(&self) -> impl Iterator<Item = Sym> + '_ {
        self.stack.iter().rev().map(|&(n, _, _)| n)
    }
}

impl Ty {
    /// Whether a value of this type may stand where `want` is expected.
    fn fits(&self, want: &Type) -> bool {
        match self {
            Ty::Known(t) => t == want,
            Ty::Never | Ty::Error => true,
        }
    }

    fn known(&self) -> Option<&Type> {
        match self {
            Ty::Known(t) => Some(t),
            _ => None,
        }
    }
}

/// `A` or `A and B`: the operand types an operator error names.
fn found_pair(a: &Type, b: &Type) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("{a} and {b}")
    }
}

fn builtin(name: &str) -> Option<Builtin> {
    match name {
        "len" => Some(Builtin::Len),
        "f64" => Some(Builtin::ToF64),
        "i64" => Some(Builtin::ToI64),
        "zeros" => Some(Builtin::Zeros),
        _ => None,
    }
}

/// Where the value of `e` comes from, for mismatch errors: the tail of a block.
fn value_pos(file: &File, e: &Expr) -> Pos {
    match &e.kind {
        ExprKind::Block(b) => {
            let b = file.block(*b);
            b.tail.map_or(b.pos, |t| value_pos(file, file.expr(t)))
        }
        _ => e.pos,
    }
}

/// The expression whose value `e` yields: the tail of a block, or `e`.
fn value_expr<'f>(file: &'f File, e: &'f Expr) -> &'f Expr {
    match &e.kind {
        ExprKind::Block(b) => file
            .block(*b)
            .tail
            .map_or(e, |t| value_expr(file, file.expr(t))),
        _ => e,
    }
}

/// A hint for an expression of type `found` where `want` is needed: for an
/// i64 where an f64 is expected, `; write `2.0` for an f64 literal` (an
/// integer literal) or `; convert with `f64(n)`` (a name); "" otherwise.
fn conversion_hint(file: &File, e: &Expr, want: &Type, found: &Type) -> String {
    if *want != Type::F64 || *found != Type::I64 {
        return String::new();
    }
    let e = value_expr(file, e);
    if let Some(k) = int_literal(file, e) {
        return format!("; write `{k}.0` for an f64 literal");
    }
    match &e.kind {
        ExprKind::Name(n) => format!("; convert with `f64({})`", file.name(*n)),
        _ => String::new(),
    }
}

/// The hint for a binary operator on an f64 and an i64 operand: the i64
/// operand written as an f64 literal or converted (see [`conversion_hint`]).
fn operand_hint(file: &File, lhs: Option<&Expr>, a: &Type, rhs: &Expr, b: &Type) -> String {
    match (a, b) {
        (Type::F64, Type::I64) => conversion_hint(file, rhs, &Type::F64, b),
        (Type::I64, Type::F64) => lhs.map_or_else(
            || "; convert the i64 operand with `f64(...)`".to_string(),
            |l| conversion_hint(file, l, &Type::F64, a),
        ),
        _ => String::new(),
    }
}

impl<'f> Checker<'f> {
    fn error(&mut self, pos: Pos, msg: String) {
        let loc = Location {
            func: (!self.func.is_empty()).then(|| self.func.into()),
            ..Location::at(pos)
        };
        self.errors.push(SurfaceError { loc, msg });
    }

    /// A mismatch at the value of `e`, with a hint when it is a common mistake
    /// (an integer literal or an i64 name where an f64 is expected).
    fn mismatch_at(&mut self, e: &Expr, want: &Type, found: &Ty) {
        if let Ty::Known(t) = found {
            let hint = conversion_hint(self.file, e, want, t);
            self.error(
                value_pos(self.file, e),
                format!("mismatched types: expected {want}, found {t}{hint}"),
            );
        }
    }

    fn set_type(&mut self, id: ExprId, ty: &Ty) {
        let idx = id.0 as usize;
        if idx >= self.info.types.len() {
            self.info.types.resize(idx + 1, Type::Unit);
        }
        self.info.types[idx] = ty.known().cloned().unwrap_or(Type::Unit);
    }

    fn declare_fn(&mut self, f: &'f FnDecl) {
        self.func = self.file.name(f.name.name);
        if self.funcs.contains_key(&f.name.name) {
            self.error(f.name.pos, format!("duplicate function `{}`", self.func));
            return;
        }
        let params = self.file.params(f.params);
        let sig = FnType {
            params: params.iter().map(|p| p.ty.clone()).collect(),
            ret: f.ret.clone(),
        };
        self.funcs.insert(f.name.name, Arc::new(sig));
    }

    fn bind(&mut self, name: Sym, pos: Pos, ty: Ty, mutable: bool) {
        let id = LocalId(self.locals.len() as u32);
        self.locals.push(Local { ty, mutable });
        self.info.locals.insert(pos, id);
        self.info.local_names.push(name);
        self.scope.push(name, id);
    }

    fn check_fn(&mut self, f: &'f FnDecl) {
        let file = self.file;
        self.func = file.name(f.name.name);
        self.ret = f.ret.clone();
        self.loops = 0;
        self.while_cond = None;
        self.scope.clear();
        // A declared rule names a function of the file; its signature is the
        // IR verifier's to check.
        for rule in [&f.jvp, &f.vjp].into_iter().flatten() {
            if !self.funcs.contains_key(&rule.name) {
                let name = file.name(rule.name);
                let hint = self.suggest(name, true);
                self.error(rule.pos, format!("unknown function `{name}`{hint}"));
            }
        }
        for p in file.params(f.params) {
            if self.scope.lookup(p.name.name).is_some() {
                let name = file.name(p.name.name);
                self.error(p.name.pos, format!("duplicate parameter `{name}`"));
            }
            self.bind(p.name.name, p.name.pos, Ty::Known(p.ty.clone()), false);
        }
        let ty = self.block(&f.body);
        let Ty::Known(found) = &ty else { return };
        if found == &f.ret {
            return;
        }
        match f.body.tail {
            None => self.error(
                f.name.pos,
                format!(
                    "missing return value: `{}` returns {} but its body has no value",
                    self.func, f.ret
                ),
            ),
            Some(tail) => self.mismatch_at(file.expr(tail), &f.ret, &ty),
        }
    }

    fn lookup(&self, name: Sym) -> Option<LocalId> {
        self.scope.lookup(name)
    }

    fn resolve(&self, name: Sym) -> Option<Res> {
        if let Some(id) = self.lookup(name) {
            Some(Res::Local(id))
        } else if self.funcs.contains_key(&name) {
            Some(Res::Func(name))
        } else {
            let text = self.file.name(name);
            if let Some(p) = Prim::from_name(text) {
                Some(Res::Prim(p))
            } else {
                builtin(text).map(Res::Builtin)
            }
        }
    }

    /// `; did you mean `x`?` for a name that resolves to nothing: the
    /// closest local in scope (innermost first), function of the file,
    /// builtin or primitive; for a callee (`call`) the functions first.
    fn suggest(&self, name: &str, call: bool) -> String {
        let file = self.file;
        let locals = self.scope.names_innermost_first().map(|s| file.name(s));
        let mut funcs: Vec<&str> = self.funcs.keys().map(|&s| file.name(s)).collect();
        funcs.sort_unstable();
        let builtins = ["len", "f64", "i64", "zeros"];
        let prims = crate::prim::PRIMS.iter().map(|row| row.name);
        if call {
            let c = funcs.into_iter().chain(builtins).chain(prims).chain(locals);
            crate::suggest::did_you_mean(name, "", c)
        } else {
            let c = locals.chain(funcs).chain(prims);
            crate::suggest::did_you_mean(name, "", c)
        }
    }

    fn local_ty(&self, id: LocalId) -> Ty {
        self.locals
            .get(id.0 as usize)
            .map_or(Ty::Error, |l| l.ty.clone())
    }

    fn block(&mut self, b: &Block) -> Ty {
        let file = self.file;
        let depth = self.scope.len();
        let mut diverges = false;
        for s in file.stmts(b.stmts) {
            diverges |= self.stmt(s);
        }
        let tail = b.tail.map(|e| self.expr(file.expr(e)));
        self.scope.truncate(depth);
        if diverges {
            Ty::Never
        } else {
            tail.unwrap_or(Ty::Known(Type::Unit))
        }
    }

    /// Checks a statement; true when control never leaves it normally.
    fn stmt(&mut self, s: &'f Stmt) -> bool {
        let file = self.file;
        match &s.kind {
            StmtKind::Let {
                mutable,
                name,
                ty,
                init,
            } => {
                let init = file.expr(*init);
                let found = match &init.kind {
                    ExprKind::Call { callee, args } => {
                        self.call(init, file.expr(*callee), file.exprs(*args), ty.as_ref())
                    }
                    _ => self.expr(init),
                };
                let bound = match ty {
                    Some(want) => {
                        if !found.fits(want) {
                            self.mismatch_at(init, want, &found);
                        }
                        Ty::Known(want.clone())
                    }
                    None => found.clone(),
                };
                self.bind(name.name, name.pos, bound, *mutable);
                found == Ty::Never
            }
            StmtKind::Assign { name, value } => {
                let value = file.expr(*value);
                let found = self.expr(value);
                let text = file.name(name.name);
                match self.lookup(name.name) {
                    Some(id) => {
                        self.info.locals.insert(name.pos, id);
                        let mutable = self.locals.get(id.0 as usize).is_some_and(|l| l.mutable);
                        if !mutable {
                            self.error(
                                name.pos,
                                format!("cannot assign to immutable binding `{text}`"),
                            );
                        } else if let Ty::Known(want) = self.local_ty(id)
                            && !found.fits(&want)
                        {
                            self.mismatch_at(value, &want, &found);
                        }
                    }
                    None if self.funcs.contains_key(&name.name) => {
                        self.error(name.pos, format!("cannot assign to function `{text}`"))
                    }
                    None if crate::prim::Prim::from_name(text).is_some() => {
                        self.error(name.pos, format!("cannot assign to primitive `{text}`"))
                    }
                    None => {
                        let hint = self.suggest(text, false);
                        self.error(name.pos, format!("unknown name `{text}`{hint}"));
                    }
                }
                found == Ty::Never
            }
            StmtKind::IndexAssign {
                array,
                index,
                value,
            } => {
                let (array, value) = (file.expr(*array), file.expr(*value));
                let arr = self.expr(array);
                self.expect(file.expr(*index), &Type::I64);
                let val = self.expr(value);
                match arr {
                    Ty::Known(Type::Array(elem)) => {
                        if !val.fits(&elem.ty()) {
                            self.mismatch_at(value, &elem.ty(), &val);
                        }
                    }
                    Ty::Known(t) => {
                        self.error(array.pos, format!("cannot index a value of type {t}"))
                    }
                    Ty::Never | Ty::Error => {}
                }
                false
            }
            StmtKind::Expr(e) => {
                let e = file.expr(*e);
                let ty = self.expr(e);
                if s.unit_without_semi
                    && let Ty::Known(t) = &ty
                    && *t != Type::Unit
                {
                    self.error(
                        value_pos(file, e),
                        format!(
                            "mismatched types: expected (), found {t} \
                             (a block-like statement without `;` must have type (), as in Rust)"
                        ),
                    );
                }
                ty == Ty::Never
            }
            StmtKind::While { cond, body } => {
                let outer = self.while_cond.replace(self.loops);
                self.condition(file.expr(*cond));
                self.while_cond = outer;
                self.loops += 1;
                self.block(body);
                self.loops -= 1;
                false
            }
            StmtKind::For {
                var,
                start,
                end,
                body,
            } => {
                self.expect(file.expr(*start), &Type::I64);
                self.expect(file.expr(*end), &Type::I64);
                let depth = self.scope.len();
                self.bind(var.name, var.pos, Ty::Known(Type::I64), false);
                self.loops += 1;
                self.block(body);
                self.loops -= 1;
                self.scope.truncate(depth);
                false
            }
            StmtKind::Return(value) => {
                let ret = self.ret.clone();
                match value {
                    Some(e) => {
                        let e = file.expr(*e);
                        let found = self.expr(e);
                        if !found.fits(&ret) {
                            self.mismatch_at(e, &ret, &found);
                        }
                    }
                    None if ret != Type::Unit => self.error(
                        s.pos,
                        format!("return value missing: `{}` returns {ret}", self.func),
                    ),
                    None => {}
                }
                true
            }
            StmtKind::Break | StmtKind::Continue => {
                let word = if s.kind == StmtKind::Break {
                    "break"
                } else {
                    "continue"
                };
                if self.while_cond == Some(self.loops) {
                    self.error(
                        s.pos,
                        format!("`{word}` inside the condition of a `while` loop"),
                    );
                } else if self.loops == 0 {
                    self.error(s.pos, format!("`{word}` outside a loop"));
                }
                true
            }
        }
    }

    /// Checks `e` against `want`, reporting a mismatch at its value.
    fn expect(&mut self, e: &'f Expr, want: &Type) -> Ty {
        let found = self.expr(e);
        if !found.fits(want) {
            self.mismatch_at(e, want, &found);
        }
        found
    }

    fn condition(&mut self, cond: &'f Expr) {
        if let Ty::Known(t) = self.expr(cond)
            && t != Type::Bool
        {
            self.error(
                value_pos(self.file, cond),
                format!("condition must be bool, found {t}"),
            );
        }
    }

    fn expr(&mut self, e: &'f Expr) -> Ty {
        let before = self.errors.len();
        let ty = self.expr_kind(e);
        let ty = self.never_if_unreported(ty, before);
        self.set_type(e.id, &ty);
        ty
    }

    /// An error type with no error reported since `before` comes from an
    /// operand that never yields (`-{ return 1.0; }`, `(x, { break; })`): the
    /// expression never yields either. Left an error type, it would fit
    /// everywhere with no message, hiding real type errors and giving an `if`
    /// around it no type to join its arms with.
    fn never_if_unreported(&self, ty: Ty, before: usize) -> Ty {
        if ty == Ty::Error && self.errors.len() == before {
            Ty::Never
        } else {
            ty
        }
    }

    fn expr_kind(&mut self, e: &'f Expr) -> Ty {
        let file = self.file;
        match &e.kind {
            ExprKind::F64(_) => Ty::Known(Type::F64),
            ExprKind::I64(_) => Ty::Known(Type::I64),
            ExprKind::Bool(_) => Ty::Known(Type::Bool),
            ExprKind::Unit => Ty::Known(Type::Unit),
            ExprKind::Name(name) => self.name_value(e, *name),
            ExprKind::Unary { op, operand } => self.unary(e.pos, *op, file.expr(*operand)),
            ExprKind::Chain { first, rest } => {
                let first = file.expr(*first);
                let mut lhs = self.expr(first);
                for (k, &(op, pos, rhs)) in file.links(*rest).iter().enumerate() {
                    let rhs = file.expr(rhs);
                    let r = self.expr(rhs);
                    let lhs_expr = (k == 0).then_some(first);
                    lhs = self.binary(op, pos, (&lhs, lhs_expr), (&r, rhs));
                }
                lhs
            }
            ExprKind::Call { callee, args } => {
                self.call(e, file.expr(*callee), file.exprs(*args), None)
            }
            ExprKind::Index { array, index } => {
                let arr = self.expr(file.expr(*array));
                self.expect(file.expr(*index), &Type::I64);
                match arr {
                    Ty::Known(Type::Array(elem)) => Ty::Known(elem.ty()),
                    Ty::Known(t) => {
                        self.error(e.pos, format!("cannot index a value of type {t}"));
                        Ty::Error
                    }
                    Ty::Never | Ty::Error => Ty::Error,
                }
            }
            ExprKind::Field { tuple, index } => match self.expr(file.expr(*tuple)) {
                Ty::Known(Type::Tuple(elems)) => match elems.get(*index as usize) {
                    Some(t) => Ty::Known(t.clone()),
                    None => {
                        let n = elems.len();
                        self.error(
                            e.pos,
                            format!("no field {index} on a tuple of {n} elements"),
                        );
                        Ty::Error
                    }
                },
                Ty::Known(t) => {
                    self.error(e.pos, format!("no field {index} on a value of type {t}"));
                    Ty::Error
                }
                Ty::Never | Ty::Error => Ty::Error,
            },
            ExprKind::Tuple(elems) => {
                let elems = file.exprs(*elems);
                let tys: SmallVec<[Ty; 4]> =
                    elems.iter().map(|&x| self.expr(file.expr(x))).collect();
                let Some(known) = tys
                    .iter()
                    .map(|t| t.known().cloned())
                    .collect::<Option<SmallVec<[Type; 4]>>>()
                else {
                    return Ty::Error;
                };
                match Prim::Tuple.result_type(&known, None, None) {
                    Ok(t) => Ty::Known(t),
                    Err(msg) => {
                        self.error(e.pos, msg);
                        Ty::Error
                    }
                }
            }
            ExprKind::If { cond, then, els } => {
                self.condition(file.expr(*cond));
                let then_ty = self.block(file.block(*then));
                match els {
                    Some(els) => {
                        let els = file.expr(*els);
                        let else_ty = self.expr(els);
                        match (&then_ty, &else_ty) {
                            (Ty::Never, t) | (t, Ty::Never) => t.clone(),
                            (Ty::Error, _) | (_, Ty::Error) => Ty::Error,
                            (Ty::Known(a), Ty::Known(_)) => {
                                if !else_ty.fits(a) {
                                    self.mismatch_at(els, a, &else_ty);
                                    return Ty::Error;
                                }
                                then_ty
                            }
                        }
                    }
                    None => {
                        if let Ty::Known(t) = &then_ty
                            && *t != Type::Unit
                        {
                            // At the `if`: it is the missing `else` that is wrong.
                            self.error(
                                e.pos,
                                format!("`if` without `else` must have type (), found {t}"),
                            );
                            // Reported: no second error where `()` is not wanted.
                            return Ty::Error;
                        }
                        Ty::Known(Type::Unit)
                    }
                }
            }
            ExprKind::Block(b) => self.block(file.block(*b)),
        }
    }

    fn unary(&mut self, pos: Pos, op: UnOp, operand: &'f Expr) -> Ty {
        let t = self.expr(operand);
        let Ty::Known(t) = t else { return Ty::Error };
        match op {
            UnOp::Neg if matches!(t, Type::F64 | Type::I64) => Ty::Known(t),
            UnOp::Not if t == Type::Bool => Ty::Known(t),
            UnOp::Neg => {
                self.error(
                    pos,
                    format!("operator `-` needs an f64 or i64 operand, found {t}"),
                );
                Ty::Error
            }
            UnOp::Not => {
                self.error(pos, format!("operator `!` needs a bool operand, found {t}"));
                Ty::Error
            }
        }
    }

    /// Types `lhs op rhs`; `lhs.1` is the left operand's expression when it
    /// is one (not the result of an earlier operator of the chain).
    fn binary(&mut self, op: BinOp, pos: Pos, lhs: (&Ty, Option<&Expr>), rhs: (&Ty, &Expr)) -> Ty {
        let ((lhs, lhs_expr), (rhs, rhs_expr)) = (lhs, rhs);
        let result_if_unknown = match op {
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne => {
                Ty::Known(Type::Bool)
            }
            BinOp::And | BinOp::Or => Ty::Known(Type::Bool),
            _ => Ty::Error,
        };
        let (Ty::Known(a), Ty::Known(b)) = (lhs, rhs) else {
            return result_if_unknown;
        };
        let sym = op.symbol();
        let numeric = a == b && matches!(a, Type::F64 | Type::I64);
        let (ok, result, need) = match op {
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div => {
                (numeric, a.clone(), "two f64 or two i64 operands")
            }
            BinOp::Rem => (a == b && *a == Type::I64, Type::I64, "i64 operands"),
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                (numeric, Type::Bool, "two f64 or two i64 operands")
            }
            BinOp::Eq | BinOp::Ne => (
                numeric || (a == b && *a == Type::Bool),
                Type::Bool,
                "two f64, two i64 or two bool operands",
            ),
            BinOp::And | BinOp::Or => (a == b && *a == Type::Bool, Type::Bool, "bool operands"),
        };
        if ok {
            return Ty::Known(result);
        }
        let (found, hint) = if matches!(op, BinOp::Rem | BinOp::And | BinOp::Or) {
            (found_pair(a, b), String::new())
        } else {
            (
                format!("{a} and {b}"),
                operand_hint(self.file, lhs_expr, a, rhs_expr, b),
            )
        };
        self.error(
            pos,
            format!("operator `{sym}` needs {need}, found {found}{hint}"),
        );
        result_if_unknown
    }
}
