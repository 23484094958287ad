//! Names and calls for the type checker: what a name stands for as a value,
//! and calls of file functions, primitives (typed by the primitive table),
//! builtins and function values, with their arity and argument checks.

use super::{Checker, Ty, conversion_hint, int_literal, value_pos};
use crate::loc::Pos;
use crate::prim::Prim;
use crate::surface::ast::{Builtin, Expr, ExprId, ExprKind, Res, Sym};
use crate::types::{FnType, Type};
use smallvec::SmallVec;
use std::sync::Arc;

impl<'f> Checker<'f> {
    pub(super) fn name_value(&mut self, e: &Expr, sym: Sym) -> Ty {
        let name = self.file.name(sym);
        let Some(res) = self.resolve(sym) else {
            let hint = self.suggest(name, false);
            self.error(e.pos, format!("unknown name `{name}`{hint}"));
            return Ty::Error;
        };
        let ty = match &res {
            Res::Local(id) => self.local_ty(*id),
            Res::Func(f) => self
                .funcs
                .get(f)
                .map_or(Ty::Error, |sig| Ty::Known(Type::Func(Arc::clone(sig)))),
            Res::Prim(p) => match p.fn_type() {
                Some(t) => Ty::Known(t),
                None => {
                    self.error(e.pos, p.value_error());
                    Ty::Error
                }
            },
            Res::Builtin(_) => {
                self.error(
                    e.pos,
                    format!("builtin `{name}` can only be called, not used as a value"),
                );
                Ty::Error
            }
        };
        self.info.names.insert(e.id, res);
        ty
    }

    /// Checks a call; `alloc_annot` is the annotation of the `let` it initialises.
    pub(super) fn call(
        &mut self,
        e: &'f Expr,
        callee: &'f Expr,
        args: &'f [ExprId],
        alloc_annot: Option<&Type>,
    ) -> Ty {
        let before = self.errors.len();
        let ty = self.call_inner(e, callee, args, alloc_annot);
        let ty = self.never_if_unreported(ty, before);
        self.set_type(e.id, &ty);
        ty
    }

    fn call_inner(
        &mut self,
        e: &'f Expr,
        callee: &'f Expr,
        args: &'f [ExprId],
        alloc_annot: Option<&Type>,
    ) -> Ty {
        let ExprKind::Name(sym) = callee.kind else {
            let t = self.expr(callee);
            return self.call_value(e, callee, &t, args);
        };
        let name = self.file.name(sym);
        let Some(res) = self.resolve(sym) else {
            let hint = self.suggest(name, true);
            self.error(callee.pos, format!("unknown function `{name}`{hint}"));
            self.exprs(args);
            return Ty::Error;
        };
        self.info.names.insert(callee.id, res);
        match res {
            Res::Local(id) => {
                let t = self.local_ty(id);
                self.set_type(callee.id, &t);
                self.call_value(e, callee, &t, args)
            }
            Res::Func(f) => {
                let Some(sig) = self.funcs.get(&f).cloned() else {
                    return Ty::Error;
                };
                self.set_type(callee.id, &Ty::Known(Type::Func(Arc::clone(&sig))));
                self.args(e.pos, self.file.name(f), &sig, args)
            }
            Res::Prim(p) => self.prim_call(e, p, args, alloc_annot),
            Res::Builtin(b) => self.builtin_call(e, name, b, args),
        }
    }

    fn call_value(&mut self, e: &'f Expr, callee: &Expr, t: &Ty, args: &'f [ExprId]) -> Ty {
        match t {
            Ty::Known(Type::Func(sig)) => {
                let sig = Arc::clone(sig);
                let what = match callee.kind {
                    ExprKind::Name(n) => self.file.name(n),
                    _ => "the called function",
                };
                self.args(e.pos, what, &sig, args)
            }
            Ty::Known(t) => {
                self.error(
                    callee.pos,
                    format!("called value has type {t}, not a function type"),
                );
                self.exprs(args);
                Ty::Error
            }
            Ty::Never | Ty::Error => {
                self.exprs(args);
                Ty::Error
            }
        }
    }

    /// Types each of `args` (after an error that leaves their types unused).
    fn exprs(&mut self, args: &'f [ExprId]) {
        for &a in args {
            self.expr(self.file.expr(a));
        }
    }

    fn args(&mut self, pos: Pos, what: &str, sig: &FnType, args: &'f [ExprId]) -> Ty {
        if sig.params.len() != args.len() {
            let n = sig.params.len();
            let s = if n == 1 { "" } else { "s" };
            self.error(
                pos,
                format!("`{what}` takes {n} argument{s}, found {}", args.len()),
            );
            self.exprs(args);
        } else {
            for (&a, p) in args.iter().zip(&sig.params) {
                self.expect(self.file.expr(a), p);
            }
        }
        Ty::Known(sig.ret.clone())
    }

    fn prim_call(&mut self, e: &'f Expr, p: Prim, args: &'f [ExprId], annot: Option<&Type>) -> Ty {
        let file = self.file;
        let tys: SmallVec<[Ty; 3]> = args.iter().map(|&a| self.expr(file.expr(a))).collect();
        if p == Prim::Alloc && !matches!(annot, Some(Type::Array(_))) {
            self.error(
                e.pos,
                "`alloc` needs a `let` with an array type annotation".to_string(),
            );
            return Ty::Error;
        }
        let Some(known) = tys
            .iter()
            .map(|t| t.known().cloned())
            .collect::<Option<SmallVec<[Type; 3]>>>()
        else {
            return Ty::Error;
        };
        let field = args.get(1).and_then(|&a| int_literal(file, file.expr(a)));
        match p.result_type(&known, field, annot) {
            Ok(t) => Ty::Known(t),
            Err(msg) => {
                // An i64 where a fixed signature wants f64 (`sin(2)`): the
                // same hint as a mismatched argument of a file's function.
                let hint = match p.info().sig {
                    crate::prim::Sig::Fixed(params, _) => params
                        .iter()
                        .zip(args.iter().zip(&known))
                        .find(|(want, (_, t))| want.ty() == Type::F64 && **t == Type::I64)
                        .map(|(_, (&a, t))| conversion_hint(file, file.expr(a), &Type::F64, t))
                        .unwrap_or_default(),
                    _ => String::new(),
                };
                self.error(e.pos, format!("{msg}{hint}"));
                Ty::Error
            }
        }
    }

    fn builtin_call(&mut self, e: &'f Expr, name: &str, b: Builtin, args: &'f [ExprId]) -> Ty {
        let [arg] = args else {
            self.error(
                e.pos,
                format!("`{name}` takes 1 argument, found {}", args.len()),
            );
            self.exprs(args);
            return Ty::Error;
        };
        let arg = self.file.expr(*arg);
        match b {
            Builtin::Len => match self.expr(arg) {
                Ty::Known(Type::Array(_)) => Ty::Known(Type::I64),
                Ty::Known(t) => {
                    self.error(
                        value_pos(self.file, arg),
                        format!("mismatched types: expected an array, found {t}"),
                    );
                    Ty::Known(Type::I64)
                }
                _ => Ty::Known(Type::I64),
            },
            Builtin::ToF64 => {
                self.expect(arg, &Type::I64);
                Ty::Known(Type::F64)
            }
            Builtin::ToI64 => {
                self.expect(arg, &Type::F64);
                Ty::Known(Type::I64)
            }
            Builtin::Zeros => {
                self.expect(arg, &Type::I64);
                Ty::Known(Type::Array(crate::types::Scalar::F64))
            }
        }
    }
}
