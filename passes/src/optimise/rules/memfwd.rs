//! Memory forwarding within a block (pass `memfwd`): a read of an array
//! element whose value the block already knows is replaced by that value, and
//! a write that a later write of the same element covers is removed.
//!
//! Assumes a verified function. An element is named by an array *value* and
//! an index operand (the same SSA value, or equal `i64` constants); two
//! different array values may be the same array, so what a write may change
//! is decided by element type only: arrays of different element types
//! (`[f64]`, `[i64]`, `[bool]`, `[sparse]`) are never the same array, and
//! arrays hold scalars, so a write changes no element of any other element
//! type. Array lengths never change.
//!
//! Guarantees, one walk per block in order (docs/optimise.md, "memfwd"):
//! - **load after load**: `arrayref(a, i)` after an earlier `arrayref(a, i)`
//!   of the block gets the earlier result, when no statement between may write
//!   an array of `a`'s element type (`arrayset` of that type, a bulk primitive
//!   with an output, `invoke`, a call through a value);
//! - **load after store**: `arrayref(a, i)` after `arrayset(a, i, v)` gets
//!   `v`, under the same condition;
//! - **store after store**: `arrayset(a, i, v1)` is removed when a later
//!   `arrayset(a, i, v2)` of the block covers it and (1) an access of
//!   `(a, i)` before the first store (kept in the program) already proved the
//!   index in range, so the first store cannot fail and every error happens
//!   where it did; (2) every statement between cannot fail and reads no array
//!   that may hold the element: only primitives that never fail and touch no
//!   array memory, writes `arrayset(b, j, w)` whose `(b, j)` was proved in
//!   range, and reads `arrayref(b, j)` proved in range of another element
//!   type. Memory stays observable after a run-time error (an embedder keeps
//!   its arrays), which is why nothing between may fail.
//!
//! A removed read or write is not executed, so it neither reads nor writes;
//! a removed access always has an earlier kept access of the same element
//! (by induction over the walk), which fails first where it would have.

use irad_ir::{Const, Func, FuncId, Inst, InstKind, Module, Operand, Prim, Scalar, Type, Value};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// Forwards reads and removes covered writes in each of `funcs`; returns
/// whether it changed anything.
pub fn memfwd(m: &mut Module, funcs: &[FuncId], _whole: bool) -> bool {
    let mut changed = false;
    for &f in funcs {
        if let Some(func) = m.get_mut(f) {
            changed |= memfwd_func(func);
        }
    }
    changed
}

/// An index operand, comparable: a value, or an `i64` constant.
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
enum Index {
    Value(Value),
    Const(i64),
}

/// An array element: the array value and the index.
type Elem = (Value, Index);

/// What a statement may do to array memory, for the walk.
enum Class {
    /// Cannot fail, reads and writes no array element.
    Quiet,
    /// May fail or have an effect other than on array elements (tapes, rule
    /// look-ups, fresh arrays); writes no existing array.
    Opaque,
    /// `arrayref`.
    Load,
    /// `arrayset`.
    Store,
    /// A bulk primitive (or a sparse one on arrays of handles): reads
    /// arrays, may fail, and may write its output ([`Prim::writes_array`]).
    Bulk,
}

/// The class of a primitive. Exhaustive, so that a new primitive must be
/// classified here.
fn class(prim: Prim) -> Class {
    use Prim::*;
    match prim {
        Add | Sub | Mul | Div | Neg | Pow | Powi | Abs | Min | Max | Copysign | Zmul | Sqrt
        | Exp | Log | Log1p | Expm1 | Sin | Cos | Tan | Asin | Acos | Atan | Atan2 | Sinh
        | Cosh | Tanh | Erf | Floor | Ceil | Round | Lt | Le | Gt | Ge | Eq | Ne | Select
        | Iadd | Isub | Imul | Ineg | And | Or | Not | Sitofp | Tuple | Getfield | Length
        | Dual | Primal | Tangent | Szero | Checkpoint | Same => Class::Quiet,
        Idiv | Irem | Fptosi | Alloc | Zeros | Copy | Frule | Push | Pop | Revfwd | Revback
        | Sonehot | Sscale | Sadd | Sdense => Class::Opaque,
        Arrayref => Class::Load,
        Arrayset => Class::Store,
        Sum | Dot | Axpy | Scale | Matvec | Matmul | Fill | Copyto | Gemm | Ssum | Sdot | Sfill
        | Sgemma | Sgemmb => Class::Bulk,
    }
}

fn memfwd_func(func: &mut Func) -> bool {
    let mut walk = Walk::default();
    for bi in 0..func.layout.len() {
        let block = func.layout[bi];
        walk.block(func, block);
    }
    if walk.removed.is_empty() {
        return false;
    }
    let subst = &walk.subst;
    super::super::apply_to_operands(func, &walk.removed, |op| {
        if let Operand::Value(v) = op
            && let Some(&w) = subst.get(v)
        {
            *op = w;
        }
    });
    true
}

/// The state of the walk over one function.
#[derive(Default)]
struct Walk {
    /// The operand each forwarded read's result is replaced by (already
    /// final: replacements are kept reads' results or resolved operands).
    subst: HashMap<Value, Operand>,
    /// The statements removed.
    removed: HashSet<Inst>,
    /// Per element type, what the elements known in the current block hold.
    known: HashMap<Scalar, HashMap<Elem, Operand>>,
    /// The elements accessed earlier in the block by a kept statement (or
    /// by one whose own earlier access is kept): their index is in range.
    proved: HashSet<Elem>,
    /// The writes that a later write of the same element may remove: each
    /// proved in range when it ran, with nothing since that may fail or
    /// read the element.
    pending: HashMap<Elem, (Inst, Scalar)>,
}

impl Walk {
    /// Walks the statements of `block` in order.
    fn block(&mut self, func: &mut Func, block: irad_ir::Block) {
        self.known.clear();
        self.proved.clear();
        self.pending.clear();
        for ii in 0..func.blocks[block].insts.len() {
            let inst = func.blocks[block].insts[ii];
            let subst = &self.subst;
            let data = &mut func.insts[inst];
            let args = match &mut data.kind {
                InstKind::Prim { args, .. } => args,
                InstKind::Invoke { .. } | InstKind::CallValue { .. } => {
                    self.known.clear();
                    self.pending.clear();
                    continue;
                }
                InstKind::Phi { .. } => continue,
            };
            for op in args.iter_mut() {
                if let Operand::Value(v) = op
                    && let Some(&w) = subst.get(v)
                {
                    *op = w;
                }
            }
            let data = &func.insts[inst];
            let InstKind::Prim { prim, args } = &data.kind else {
                continue;
            };
            match class(*prim) {
                Class::Quiet => {}
                Class::Opaque => self.pending.clear(),
                Class::Bulk => {
                    self.pending.clear();
                    if prim.writes_array() {
                        self.known.clear();
                    }
                }
                Class::Load => {
                    let Some((elem, scalar)) = element(func, args) else {
                        self.known.clear();
                        self.pending.clear();
                        continue;
                    };
                    let Some(result) = data.result else {
                        // Unused and unnamed: still a read that may fail.
                        if !self.proved.contains(&elem) {
                            self.pending.clear();
                        }
                        self.proved.insert(elem);
                        continue;
                    };
                    self.load(inst, result, elem, scalar);
                }
                Class::Store => {
                    let Some((elem, scalar)) = element(func, args) else {
                        self.known.clear();
                        self.pending.clear();
                        continue;
                    };
                    let Some(&value) = args.get(2) else {
                        continue;
                    };
                    self.store(inst, elem, scalar, value);
                }
            }
        }
    }

    /// `result = arrayref(elem)`, an array of `scalar`s.
    fn load(&mut self, inst: Inst, result: Value, elem: Elem, scalar: Scalar) {
        if let Some(&known) = self.known.get(&scalar).and_then(|k| k.get(&elem)) {
            // Not executed any more: it neither reads nor fails.
            self.subst.insert(result, known);
            self.removed.insert(inst);
            return;
        }
        if self.proved.contains(&elem) {
            // Cannot fail, and reads an element of its own type only.
            self.pending.retain(|_, (_, written)| *written != scalar);
        } else {
            self.pending.clear();
        }
        self.proved.insert(elem);
        self.known
            .entry(scalar)
            .or_default()
            .insert(elem, Operand::Value(result));
    }

    /// `arrayset(elem, value)`, an array of `scalar`s.
    fn store(&mut self, inst: Inst, elem: Elem, scalar: Scalar, value: Operand) {
        if self.proved.contains(&elem) {
            if let Some((earlier, _)) = self.pending.remove(&elem) {
                self.removed.insert(earlier);
            }
            self.pending.insert(elem, (inst, scalar));
        } else {
            // May fail: the writes before it stay visible after its error.
            self.pending.clear();
            self.proved.insert(elem);
        }
        let known = self.known.entry(scalar).or_default();
        known.clear();
        known.insert(elem, value);
    }
}

/// The element `arrayref`/`arrayset` operands `args` name, and the arrays'
/// element type; `None` when the operands are not a value of array type and
/// an index.
fn element(func: &Func, args: &[Operand]) -> Option<(Elem, Scalar)> {
    let (Some(Operand::Value(array)), Some(index)) = (args.first(), args.get(1)) else {
        return None;
    };
    let Type::Array(scalar) = func.values.get(*array)?.ty else {
        return None;
    };
    let index = match *index {
        Operand::Value(v) => Index::Value(v),
        Operand::Const(Const::I64(k)) => Index::Const(k),
        Operand::Const(_) => return None,
    };
    Some(((*array, index), scalar))
}

#[cfg(test)]
mod tests {
    use super::memfwd;
    use expect_test::{Expect, expect};
    use irad_ir::text::{parse_module, print_module};
    use irad_ir::verify::verify_module;

    /// Runs `memfwd` over every function of `src`; checks that the result
    /// verifies, and compares whether it changed anything and the printed
    /// module with `want`.
    fn check(src: &str, want: Expect) {
        let mut m = parse_module(src).expect("the test input parses");
        let funcs: Vec<_> = m.func_ids().collect();
        let changed = memfwd(&mut m, &funcs, true);
        assert!(verify_module(&m).is_ok(), "{}", print_module(&m));
        want.assert_eq(&format!("changed: {changed}\n{}", print_module(&m)));
    }

    #[test]
    fn reads_are_forwarded_by_equal_constant_indices_only() {
        check(
            "func @f(%a: [f64]) -> f64 {
#1:
  %r1 = call arrayref(%a, 0) :: f64
  %r2 = call arrayref(%a, 0) :: f64
  %r3 = call arrayref(%a, 1) :: f64
  %s = call add(%r2, %r3) :: f64
  return %s
}
",
            expect![[r#"
                changed: true
                func @f(%a: [f64]) -> f64 {
                #1:
                  %r1 = call arrayref(%a, 0) :: f64
                  %r3 = call arrayref(%a, 1) :: f64
                  %s = call add(%r1, %r3) :: f64
                  return %s
                }
            "#]],
        );
    }

    #[test]
    fn statements_that_write_no_array_do_not_stop_reads() {
        // A pop, a push, an idiv that may fail, fresh arrays (alloc, copy)
        // and a bulk read write no existing array.
        check(
            "func @f(%a: [f64], %d: i64) -> f64 {
#1:
  %r1 = call arrayref(%a, %d) :: f64
  call push(%r1)
  %p = call pop() :: f64
  %q = call idiv(7, %d) :: i64
  %b = call alloc(%q) :: [f64]
  %c = call copy(%a) :: [f64]
  %s = call dot(%a, %c) :: f64
  %r2 = call arrayref(%a, %d) :: f64
  %t = call add(%r2, %p) :: f64
  %u = call add(%t, %s) :: f64
  return %u
}
",
            expect![[r#"
                changed: true
                func @f(%a: [f64], %d: i64) -> f64 {
                #1:
                  %r1 = call arrayref(%a, %d) :: f64
                  call push(%r1)
                  %p = call pop() :: f64
                  %q = call idiv(7, %d) :: i64
                  %b = call alloc(%q) :: [f64]
                  %c = call copy(%a) :: [f64]
                  %s = call dot(%a, %c) :: f64
                  %t = call add(%r1, %p) :: f64
                  %u = call add(%t, %s) :: f64
                  return %u
                }
            "#]],
        );
    }

    #[test]
    fn a_write_stops_reads_of_its_element_type_only() {
        // The write to [bool] leaves the [f64] element known; the write to
        // another [f64] value (maybe the same array) does not.
        check(
            "func @f(%a: [f64], %b: [f64], %c: [bool]) -> f64 {
#1:
  %r1 = call arrayref(%a, 0) :: f64
  call arrayset(%c, 0, true)
  %r2 = call arrayref(%a, 0) :: f64
  call arrayset(%b, 3, 1.0)
  %r3 = call arrayref(%a, 0) :: f64
  %s = call add(%r2, %r3) :: f64
  return %s
}
",
            expect![[r#"
                changed: true
                func @f(%a: [f64], %b: [f64], %c: [bool]) -> f64 {
                #1:
                  %r1 = call arrayref(%a, 0) :: f64
                  call arrayset(%c, 0, true)
                  call arrayset(%b, 3, 1.0)
                  %r3 = call arrayref(%a, 0) :: f64
                  %s = call add(%r1, %r3) :: f64
                  return %s
                }
            "#]],
        );
    }

    #[test]
    fn writes_between_which_the_first_write_stays() {
        // Each pair of writes of (%a, 0) has, between them: a fill (a bulk
        // output), a call through a value, a pop (it may fail), a read of
        // [f64] through %b. Only the pair with arithmetic between loses its
        // first write.
        check(
            "func @f(%a: [f64], %b: [f64], %g: fn() -> (), %x: f64) -> () {
#1:
  %r = call arrayref(%a, 0) :: f64
  call arrayset(%a, 0, 1.0)
  call fill(%b, 0.0)
  call arrayset(%a, 0, 2.0)
  call %g()
  call arrayset(%a, 0, 3.0)
  %p = call pop() :: f64
  call arrayset(%a, 0, %p)
  %s = call arrayref(%b, 0) :: f64
  call arrayset(%a, 0, %s)
  %y = call mul(%x, %s) :: f64
  call arrayset(%a, 0, %y)
  return ()
}
",
            expect![[r#"
                changed: true
                func @f(%a: [f64], %b: [f64], %g: fn() -> (), %x: f64) -> () {
                #1:
                  %r = call arrayref(%a, 0) :: f64
                  call arrayset(%a, 0, 1.0)
                  call fill(%b, 0.0)
                  call arrayset(%a, 0, 2.0)
                  call %g()
                  call arrayset(%a, 0, 3.0)
                  %p = call pop() :: f64
                  call arrayset(%a, 0, %p)
                  %s = call arrayref(%b, 0) :: f64
                  %y = call mul(%x, %s) :: f64
                  call arrayset(%a, 0, %y)
                  return ()
                }
            "#]],
        );
    }

    #[test]
    fn a_write_proves_its_index_for_the_next() {
        // The first write may fail, so it stays; it proves the index in
        // range, so the second is covered by the third.
        check(
            "func @f(%a: [i64], %i: i64) -> () {
#1:
  call arrayset(%a, %i, 1)
  call arrayset(%a, %i, 2)
  call arrayset(%a, %i, 3)
  return ()
}
",
            expect![[r#"
                changed: true
                func @f(%a: [i64], %i: i64) -> () {
                #1:
                  call arrayset(%a, %i, 1)
                  call arrayset(%a, %i, 3)
                  return ()
                }
            "#]],
        );
    }

    #[test]
    fn nothing_to_forward_is_no_change() {
        check(
            "func @f(%a: [f64], %i: i64) -> f64 {
#1:
  %r1 = call arrayref(%a, %i) :: f64
  goto #2
#2:
  %r2 = call arrayref(%a, %i) :: f64
  %s = call add(%r1, %r2) :: f64
  return %s
}
",
            expect![[r#"
                changed: false
                func @f(%a: [f64], %i: i64) -> f64 {
                #1:
                  %r1 = call arrayref(%a, %i) :: f64
                  goto #2
                #2:
                  %r2 = call arrayref(%a, %i) :: f64
                  %s = call add(%r1, %r2) :: f64
                  return %s
                }
            "#]],
        );
    }
}
