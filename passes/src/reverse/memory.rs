//! Array writes and aliasing in a primal, for deciding where the pullback
//! may re-read an array instead of recording what was read.
//!
//! Values whose type holds an array are grouped into *classes* that may be
//! the same array: joined through phis, `select`, tuples, `getfield` and the
//! results of calls (a callee may return any array it was given). All array
//! parameters (and the arrays inside tuple parameters) form one class,
//! because a caller may pass the same array twice. `alloc`, `zeros` and
//! `copy` start fresh classes. A statement *writes* a class when it is an
//! `arrayset` into it, a bulk primitive whose output is in it, or a call
//! (`invoke` or through a function value) given an array of it.
//!
//! Assumes a verified primal. Guarantees: the classes over-approximate
//! aliasing (two arrays in different classes are never the same array on
//! any run), and the writes of a statement over-approximate what it may
//! change; the analysis is linear in the size of the function (union-find).

use irad_ir::entity::EntityRef;
use irad_ir::{Func, Inst, InstKind, Operand, Prim, Type, Value};
use smallvec::SmallVec;

/// The array classes of a primal.
#[derive(Clone, Debug)]
pub(super) struct ArrayClasses {
    /// Union-find parents over value indices; values without arrays point
    /// to themselves and are never asked about.
    parent: Vec<u32>,
    /// Per value index: whether its type holds an array.
    holds: Vec<bool>,
}

impl ArrayClasses {
    /// The classes of `func`.
    pub fn of(func: &Func) -> ArrayClasses {
        let n = func.values.len();
        let mut ac = ArrayClasses {
            parent: (0..n as u32).collect(),
            holds: func.values.values().map(|d| holds_array(&d.ty)).collect(),
        };
        let mut first: Option<Value> = None;
        for &p in &func.params {
            if ac.holds(p) {
                match first {
                    Some(f) => ac.union(f, p),
                    None => first = Some(p),
                }
            }
        }
        for data in func.insts.values() {
            let Some(r) = data.result else { continue };
            if !ac.holds(r) {
                continue;
            }
            match &data.kind {
                InstKind::Phi { entries } => {
                    for (_, op) in entries {
                        ac.join_op(r, op);
                    }
                }
                InstKind::Prim { prim, args } => match prim {
                    Prim::Select
                    | Prim::Tuple
                    | Prim::Getfield
                    | Prim::Dual
                    | Prim::Primal
                    | Prim::Tangent => {
                        for op in args {
                            ac.join_op(r, op);
                        }
                    }
                    Prim::Alloc | Prim::Zeros | Prim::Copy => {}
                    // Anything else that gives an array: be safe.
                    _ => {
                        for op in args {
                            ac.join_op(r, op);
                        }
                    }
                },
                InstKind::Invoke { args, .. } => {
                    for op in args {
                        ac.join_op(r, op);
                    }
                }
                InstKind::CallValue { callee, args } => {
                    ac.join_op(r, &Operand::Value(*callee));
                    for op in args {
                        ac.join_op(r, op);
                    }
                    // A function value may return an array of a parameter.
                    if let Some(f) = first {
                        ac.union(r, f);
                    }
                }
            }
        }
        // Flatten: every value points at its representative.
        for i in 0..n {
            let r = ac.find(i as u32);
            ac.parent[i] = r;
        }
        ac
    }

    /// The class of array-holding value `v` (its representative's index).
    pub fn class(&self, v: Value) -> u32 {
        self.parent.get(v.index()).copied().unwrap_or(u32::MAX)
    }

    /// The representative of `x`, halving the path on the way.
    fn find(&mut self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            let up = self.parent[self.parent[x as usize] as usize];
            self.parent[x as usize] = up;
            x = up;
        }
        x
    }

    /// The classes statement `inst` of `func` may write.
    pub fn writes(&self, func: &Func, inst: Inst) -> SmallVec<[u32; 2]> {
        let mut out = SmallVec::new();
        let mut add = |op: &Operand| {
            if let Operand::Value(v) = op
                && self.holds(*v)
            {
                let c = self.class(*v);
                if !out.contains(&c) {
                    out.push(c);
                }
            }
        };
        match &func.insts[inst].kind {
            InstKind::Prim { prim, args } => {
                if *prim == Prim::Arrayset {
                    if let Some(a) = args.first() {
                        add(a);
                    }
                } else if let Some(k) = prim.bulk_output()
                    && let Some(a) = args.get(k)
                {
                    add(a);
                }
            }
            InstKind::Invoke { args, .. } | InstKind::CallValue { args, .. } => {
                for a in args {
                    add(a);
                }
            }
            InstKind::Phi { .. } => {}
        }
        out
    }

    fn holds(&self, v: Value) -> bool {
        self.holds.get(v.index()).copied().unwrap_or(false)
    }

    fn join_op(&mut self, r: Value, op: &Operand) {
        if let Operand::Value(v) = op
            && self.holds(*v)
        {
            self.union(r, *v);
        }
    }

    fn union(&mut self, a: Value, b: Value) {
        let (x, y) = (self.find(a.index() as u32), self.find(b.index() as u32));
        if x != y {
            self.parent[x as usize] = y;
        }
    }
}

/// Whether a type holds an array (or a function value, which may hold
/// anything a caller gave it); a dual holds its parts' arrays.
fn holds_array(t: &Type) -> bool {
    match t {
        Type::Array(_) | Type::Func(_) => true,
        Type::Tuple(ts) => ts.iter().any(holds_array),
        Type::Dual(inner, _) => holds_array(inner),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use irad_ir::text::parse_module;

    const TEXT: &str = "func @f(%a: [f64], %b: [f64], %c: bool, %n: i64) -> f64 {
#1:
  %z = call zeros(%n) :: [f64]
  %y = call copy(%a) :: [f64]
  %s = call select(%c, %z, %y) :: [f64]
  call arrayset(%s, 0, 1.0)
  call axpy(2.0, %a, %z)
  %r = call arrayref(%b, 0) :: f64
  return %r
}
";

    #[test]
    fn parameters_share_a_class_and_fresh_arrays_join_where_they_meet() {
        let m = parse_module(TEXT).expect("test IR parses");
        let f = m.by_name("f").expect("@f");
        let func = &m[f];
        let ac = ArrayClasses::of(func);
        let v = |name: &str| {
            func.values
                .iter()
                .find(|(_, d)| d.name.as_deref() == Some(name))
                .map(|(v, _)| v)
                .expect("a named value")
        };
        // Parameters may be one array.
        assert_eq!(ac.class(v("a")), ac.class(v("b")));
        // `copy` and `zeros` are fresh; `select` joins its operands.
        assert_ne!(ac.class(v("y")), ac.class(v("a")));
        assert_eq!(ac.class(v("s")), ac.class(v("z")));
        assert_eq!(ac.class(v("s")), ac.class(v("y")));
        let stmts: Vec<Inst> = func.blocks[func.layout[0]].insts.clone();
        // arrayset writes its array's class, axpy its output's, arrayref nothing.
        assert_eq!(ac.writes(func, stmts[3]).as_slice(), [ac.class(v("s"))]);
        assert_eq!(ac.writes(func, stmts[4]).as_slice(), [ac.class(v("z"))]);
        assert!(ac.writes(func, stmts[5]).is_empty());
    }
}
