//! Structural equality of modules: what the text round trip preserves.
//!
//! Two modules are equal when they have the same functions in the same order
//! (names, parameter types, result types), the same block layout (labels), and
//! the same statements and terminators: kinds, primitives, callees by name,
//! result types, phi entries by block label, constants by bits (except that all
//! NaNs are equal, since the text has one `nan`), and operands that refer to the
//! same definitions (parameter index, or layout position of the block and index
//! of the statement in it), and the same declared rules (by function name).
//! Value names, handles and source positions are not
//! compared. Assumes nothing about the modules: invalid handles compare as
//! unequal descriptions, never panic.

use crate::func::{
    Block, Const, Func, FuncRef, Inst, InstKind, Module, Operand, Terminator, Value, ValueDef,
};
use std::collections::HashMap;

/// `Ok` when `a` and `b` are structurally equal; otherwise the first difference,
/// naming the function, block and statement.
pub fn structural_eq(a: &Module, b: &Module) -> Result<(), String> {
    if a.len() != b.len() {
        return Err(format!("{} functions against {}", a.len(), b.len()));
    }
    for ((ia, fa), (ib, fb)) in a.funcs().zip(b.funcs()) {
        let (ra, rb) = (a.declared_rules(ia), b.declared_rules(ib));
        let name =
            |m: &Module, f: Option<crate::FuncId>| f.and_then(|f| m.get(f)).map(|f| f.name.clone());
        if (name(a, ra.jvp), name(a, ra.vjp)) != (name(b, rb.jvp), name(b, rb.vjp)) {
            return Err(format!("@{}: different declared rules", fa.name));
        }
        let cmp = FuncCmp {
            ma: a,
            mb: b,
            fa,
            fb,
            defs_a: def_keys(fa),
            defs_b: def_keys(fb),
        };
        cmp.compare()?;
    }
    Ok(())
}

/// Where a value is defined, independent of handles and names.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
enum DefKey {
    /// Parameter number `n`.
    Param(u32),
    /// Statement `stmt` (from 0) of the block at layout position `block`.
    Inst { block: usize, stmt: usize },
    /// A statement that is not in the layout, or a handle the function lacks.
    Unplaced(u32),
}

fn def_keys(func: &Func) -> HashMap<Inst, (usize, usize)> {
    let mut keys = HashMap::new();
    for (block_pos, &block) in func.layout.iter().enumerate() {
        if let Some(data) = func.blocks.get(block) {
            for (stmt, &inst) in data.insts.iter().enumerate() {
                keys.insert(inst, (block_pos, stmt));
            }
        }
    }
    keys
}

struct FuncCmp<'m> {
    ma: &'m Module,
    mb: &'m Module,
    fa: &'m Func,
    fb: &'m Func,
    defs_a: HashMap<Inst, (usize, usize)>,
    defs_b: HashMap<Inst, (usize, usize)>,
}

impl FuncCmp<'_> {
    fn compare(&self) -> Result<(), String> {
        let (fa, fb) = (self.fa, self.fb);
        if fa.name != fb.name {
            return Err(format!("function @{} against @{}", fa.name, fb.name));
        }
        let here = format!("in @{}", fa.name);
        if fa.param_types() != fb.param_types() || fa.ret != fb.ret {
            return Err(format!(
                "{here}: signature {} against {}",
                crate::types::Type::from_fn(fa.fn_type()),
                crate::types::Type::from_fn(fb.fn_type())
            ));
        }
        if fa.layout.len() != fb.layout.len() {
            return Err(format!(
                "{here}: {} blocks against {}",
                fa.layout.len(),
                fb.layout.len()
            ));
        }
        for (&ba, &bb) in fa.layout.iter().zip(&fb.layout) {
            let (Some(da), Some(db)) = (fa.blocks.get(ba), fb.blocks.get(bb)) else {
                return Err(format!("{here}: invalid block in the layout"));
            };
            if da.label != db.label {
                return Err(format!("{here}: block #{} against #{}", da.label, db.label));
            }
            let here = format!("in @{}, block #{}", fa.name, da.label);
            if da.insts.len() != db.insts.len() {
                return Err(format!(
                    "{here}: {} statements against {}",
                    da.insts.len(),
                    db.insts.len()
                ));
            }
            for (i, (&ia, &ib)) in da.insts.iter().zip(&db.insts).enumerate() {
                self.inst(ia, ib)
                    .map_err(|e| format!("{here}, statement {}: {e}", i + 1))?;
            }
            self.term(da.term.as_ref(), db.term.as_ref())
                .map_err(|e| format!("{here}, terminator: {e}"))?;
        }
        Ok(())
    }

    fn inst(&self, ia: Inst, ib: Inst) -> Result<(), String> {
        let (Some(da), Some(db)) = (self.fa.insts.get(ia), self.fb.insts.get(ib)) else {
            return Err("invalid statement handle".into());
        };
        let ty_a = da.result.and_then(|v| self.fa.values.get(v)).map(|d| &d.ty);
        let ty_b = db.result.and_then(|v| self.fb.values.get(v)).map(|d| &d.ty);
        if da.result.is_some() != db.result.is_some() || ty_a != ty_b {
            return Err(format!(
                "result {} against {}",
                ty_a.map_or("none".to_string(), |t| t.to_string()),
                ty_b.map_or("none".to_string(), |t| t.to_string())
            ));
        }
        match (&da.kind, &db.kind) {
            (InstKind::Prim { prim: pa, args: aa }, InstKind::Prim { prim: pb, args: ab }) => {
                if pa != pb {
                    return Err(format!("call {pa} against call {pb}"));
                }
                self.operands(aa, ab)
            }
            (InstKind::Invoke { func: ga, args: aa }, InstKind::Invoke { func: gb, args: ab }) => {
                let na = self.ma.get(*ga).map(|f| f.name.as_str());
                let nb = self.mb.get(*gb).map(|f| f.name.as_str());
                if na.is_none() || na != nb {
                    return Err(format!("invoke @{na:?} against invoke @{nb:?}"));
                }
                self.operands(aa, ab)
            }
            (
                InstKind::CallValue {
                    callee: ca,
                    args: aa,
                },
                InstKind::CallValue {
                    callee: cb,
                    args: ab,
                },
            ) => {
                self.operand(&Operand::Value(*ca), &Operand::Value(*cb))
                    .map_err(|e| format!("callee: {e}"))?;
                self.operands(aa, ab)
            }
            (InstKind::Phi { entries: ea }, InstKind::Phi { entries: eb }) => {
                if ea.len() != eb.len() {
                    return Err(format!("phi of {} entries against {}", ea.len(), eb.len()));
                }
                for (k, ((pa, oa), (pb, ob))) in ea.iter().zip(eb).enumerate() {
                    let (la, lb) = (self.label_a(*pa), self.label_b(*pb));
                    if la.is_none() || la != lb {
                        return Err(format!("phi entry {} from {la:?} against {lb:?}", k + 1));
                    }
                    self.operand(oa, ob)
                        .map_err(|e| format!("phi entry {}: {e}", k + 1))?;
                }
                Ok(())
            }
            (ka, kb) => Err(format!("{} against {}", kind_name(ka), kind_name(kb))),
        }
    }

    fn term(&self, ta: Option<&Terminator>, tb: Option<&Terminator>) -> Result<(), String> {
        match (ta, tb) {
            (None, None) => Ok(()),
            (Some(Terminator::Goto(a)), Some(Terminator::Goto(b))) => self.target(*a, *b),
            (
                Some(Terminator::GotoIfNot {
                    cond: ca,
                    target: a,
                }),
                Some(Terminator::GotoIfNot {
                    cond: cb,
                    target: b,
                }),
            ) => {
                self.operand(ca, cb)?;
                self.target(*a, *b)
            }
            (Some(Terminator::Return(a)), Some(Terminator::Return(b))) => self.operand(a, b),
            (
                Some(Terminator::Switch {
                    index: ia,
                    targets: a,
                }),
                Some(Terminator::Switch {
                    index: ib,
                    targets: b,
                }),
            ) => {
                self.operand(ia, ib)?;
                if a.len() != b.len() {
                    return Err(format!("switch of {} targets against {}", a.len(), b.len()));
                }
                a.iter().zip(b).try_for_each(|(a, b)| self.target(*a, *b))
            }
            (a, b) => Err(format!("{a:?} against {b:?}")),
        }
    }

    fn target(&self, a: Block, b: Block) -> Result<(), String> {
        let (la, lb) = (self.label_a(a), self.label_b(b));
        if la.is_none() || la != lb {
            return Err(format!("target {la:?} against {lb:?}"));
        }
        Ok(())
    }

    fn label_a(&self, b: Block) -> Option<u32> {
        self.fa.blocks.get(b).map(|d| d.label)
    }

    fn label_b(&self, b: Block) -> Option<u32> {
        self.fb.blocks.get(b).map(|d| d.label)
    }

    fn operands(&self, a: &[Operand], b: &[Operand]) -> Result<(), String> {
        if a.len() != b.len() {
            return Err(format!("{} operands against {}", a.len(), b.len()));
        }
        for (k, (oa, ob)) in a.iter().zip(b).enumerate() {
            self.operand(oa, ob)
                .map_err(|e| format!("operand {}: {e}", k + 1))?;
        }
        Ok(())
    }

    fn operand(&self, a: &Operand, b: &Operand) -> Result<(), String> {
        match (a, b) {
            (Operand::Value(va), Operand::Value(vb)) => {
                let ka = key(self.fa, &self.defs_a, *va);
                let kb = key(self.fb, &self.defs_b, *vb);
                if ka != kb || matches!(ka, DefKey::Unplaced(_)) {
                    return Err(format!("value defined at {ka:?} against {kb:?}"));
                }
                Ok(())
            }
            (Operand::Const(ca), Operand::Const(cb)) => {
                if self.same_const(ca, cb) {
                    Ok(())
                } else {
                    Err(format!("constant {ca:?} against {cb:?}"))
                }
            }
            _ => Err(format!("{a:?} against {b:?}")),
        }
    }

    fn same_const(&self, a: &Const, b: &Const) -> bool {
        match (a, b) {
            (Const::F64(x), Const::F64(y)) => {
                x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
            }
            (Const::Func(FuncRef::User(ga)), Const::Func(FuncRef::User(gb))) => {
                let na = self.ma.get(*ga).map(|f| &f.name);
                na.is_some() && na == self.mb.get(*gb).map(|f| &f.name)
            }
            _ => a == b,
        }
    }
}

fn key(func: &Func, defs: &HashMap<Inst, (usize, usize)>, v: Value) -> DefKey {
    match func.values.get(v).map(|d| d.def) {
        Some(ValueDef::Param(n)) => DefKey::Param(n),
        Some(ValueDef::Inst(inst)) => match defs.get(&inst) {
            Some(&(block, stmt)) => DefKey::Inst { block, stmt },
            None => DefKey::Unplaced(v.as_u32()),
        },
        None => DefKey::Unplaced(v.as_u32()),
    }
}

fn kind_name(kind: &InstKind) -> &'static str {
    match kind {
        InstKind::Prim { .. } => "a primitive call",
        InstKind::Invoke { .. } => "an invoke",
        InstKind::CallValue { .. } => "a dynamic call",
        InstKind::Phi { .. } => "a phi",
    }
}
