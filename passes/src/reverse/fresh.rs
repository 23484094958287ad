//! The user functions that return a new array on every call, and those
//! that return one of their parameters, for checkpointing: a loop that
//! replaces its state by the first's result (`a = step(a)`) makes its
//! array afresh in every iteration, as one that copies it does, and one
//! that replaces it by the second's (`a = update(a)`) keeps it
//! (docs/reverse.md, "Arrays made by a call").
//!
//! A function of result type `[T]` *returns a fresh array* when every
//! return's operand comes, through phis, `select` and `getfield` of a
//! `tuple`, from an array-making statement of the function (`copy`,
//! `zeros`, `alloc`) or from a call of a function that returns a fresh
//! array, and the function is differentiated by its derived pieces (no rule
//! is registered or declared for it, [`fresh_callees`]'s `by_rule`), so
//! that the shadow its forward sweep returns is made the same way: a new
//! zero array.
//!
//! The set is the greatest fixpoint over the functions a primal may call
//! for an array (through calls whose result is an array, at any depth):
//! every one is assumed fresh, and one whose returns trace to anything
//! else (a parameter, a constant, a popped or indexed value, a call of a
//! function not in the set or through a function value) is dropped until
//! none is. That is sound by induction
//! on the calls of a finite run: the innermost call returns an array one of
//! its statements made (any call it traces to would be deeper), and a call
//! returns either such an array or one a deeper call returned fresh. An
//! array so made is referenced by nothing of the caller when the call
//! returns: arrays hold only scalars, a function keeps nothing between
//! calls, and the callee's other values die with it. (The primal has no
//! tapes; the forward sweep's tapes are the pullback's own.)
//!
//! Linear in the size of those functions per round; rounds are at most
//! their number.

use irad_ir::{FuncId, InstKind, Module, Operand, Prim, Terminator, Type, Value, ValueDef};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// The functions `src` may call for an array that return a fresh array (the
/// module's header), leaving out those `by_rule` says are differentiated by
/// a rule: the fixpoint runs over the functions reachable from `src` by
/// calls whose result is an array only, which are all a return can trace
/// to.
pub(super) fn fresh_callees(
    module: &Module,
    src: &irad_ir::Func,
    by_rule: impl Fn(FuncId) -> bool,
) -> HashSet<FuncId> {
    let mut fresh: HashSet<FuncId> = HashSet::default();
    let mut work: Vec<FuncId> = array_calls(src).collect();
    while let Some(id) = work.pop() {
        let Some(f) = module.get(id) else { continue };
        if matches!(f.ret, Type::Array(_)) && !by_rule(id) && fresh.insert(id) {
            work.extend(array_calls(f));
        }
    }
    loop {
        let before = fresh.len();
        let snapshot = fresh.clone();
        fresh.retain(|&id| module.get(id).is_some_and(|f| returns_fresh(f, &snapshot)));
        if fresh.len() == before {
            return fresh;
        }
    }
}

/// The callees of `f`'s calls whose result is an array.
fn array_calls(f: &irad_ir::Func) -> impl Iterator<Item = FuncId> + '_ {
    f.insts.values().filter_map(|d| match (&d.kind, d.result) {
        (InstKind::Invoke { func, .. }, Some(r)) if matches!(f.values[r].ty, Type::Array(_)) => {
            Some(*func)
        }
        _ => None,
    })
}

/// The functions `src` may call for an array that return one of their
/// array parameters as it is on every return, each with that parameter's
/// index, leaving out those `by_rule` says are differentiated by a rule: a
/// loop replacing its array by such a call's result (`a = update(a)`, the
/// function writing it in place) keeps the array, and the shadow the
/// callee's forward sweep returns is the one it was given. Every return's
/// operand must come, through phis and `select`, from that parameter, or
/// from a call of another such function passed it there; the greatest
/// fixpoint, sound by the same induction as [`fresh_callees`].
pub(super) fn passthrough_callees(
    module: &Module,
    src: &irad_ir::Func,
    by_rule: impl Fn(FuncId) -> bool,
) -> HashMap<FuncId, usize> {
    let mut through: HashMap<FuncId, usize> = HashMap::default();
    let mut work: Vec<FuncId> = array_calls(src).collect();
    let mut seen: HashSet<FuncId> = HashSet::default();
    while let Some(id) = work.pop() {
        let Some(f) = module.get(id) else { continue };
        if !matches!(f.ret, Type::Array(_)) || by_rule(id) || !seen.insert(id) {
            continue;
        }
        work.extend(array_calls(f));
        // The parameter the first return traces to, assumed for all.
        if let Some(j) = first_param(module, f, 0) {
            through.insert(id, j);
        }
    }
    loop {
        let before = through.len();
        let snapshot = through.clone();
        through.retain(|&id, &mut j| {
            module
                .get(id)
                .is_some_and(|f| returns_param(f, j, &snapshot))
        });
        if through.len() == before {
            return through;
        }
    }
}

/// The parameter of `f` its first return gives, through phis' first
/// entries, `select`'s first choice and calls (to a depth of 8), if it is
/// one.
fn first_param(module: &Module, f: &irad_ir::Func, depth: u32) -> Option<usize> {
    let mut op = f.layout.iter().find_map(|&b| match &f.blocks[b].term {
        Some(Terminator::Return(op)) => Some(*op),
        _ => None,
    })?;
    for _ in 0..f.values.len() {
        let Operand::Value(v) = op else { return None };
        match f.values[v].def {
            ValueDef::Param(j) => return usize::try_from(j).ok(),
            ValueDef::Inst(d) => {
                op = match &f.insts[d].kind {
                    InstKind::Phi { entries } => entries.first()?.1,
                    InstKind::Prim {
                        prim: Prim::Select,
                        args,
                    } if args.len() == 3 => args[1],
                    InstKind::Invoke { func, args } if depth < 8 => {
                        let j = first_param(module, module.get(*func)?, depth + 1)?;
                        *args.get(j)?
                    }
                    _ => return None,
                }
            }
        }
    }
    None
}

/// Whether every return of `f` gives its parameter `j` as it is, the
/// functions of `through` taken as returning theirs.
fn returns_param(f: &irad_ir::Func, j: usize, through: &HashMap<FuncId, usize>) -> bool {
    let Some(&param) = f.params.get(j) else {
        return false;
    };
    let mut work: Vec<Operand> = f
        .layout
        .iter()
        .filter_map(|&b| match &f.blocks[b].term {
            Some(Terminator::Return(op)) => Some(*op),
            _ => None,
        })
        .collect();
    if work.is_empty() {
        return false;
    }
    let mut seen: HashSet<Value> = HashSet::default();
    while let Some(op) = work.pop() {
        let Operand::Value(v) = op else { return false };
        if v == param || !seen.insert(v) {
            continue;
        }
        let ValueDef::Inst(d) = f.values[v].def else {
            return false;
        };
        match &f.insts[d].kind {
            InstKind::Prim {
                prim: Prim::Select,
                args,
            } if args.len() == 3 => work.extend([args[1], args[2]]),
            InstKind::Phi { entries } => work.extend(entries.iter().map(|&(_, op)| op)),
            InstKind::Invoke { func, args } => match through.get(func).and_then(|&i| args.get(i)) {
                Some(op) => work.push(*op),
                None => return false,
            },
            _ => return false,
        }
    }
    true
}

/// Whether every return of `f` gives an array made in the call, the
/// functions of `fresh` taken as returning fresh arrays.
fn returns_fresh(f: &irad_ir::Func, fresh: &HashSet<FuncId>) -> bool {
    let mut work: Vec<Operand> = f
        .layout
        .iter()
        .filter_map(|&b| match &f.blocks[b].term {
            Some(Terminator::Return(op)) => Some(*op),
            _ => None,
        })
        .collect();
    if work.is_empty() {
        return false;
    }
    let mut seen: HashSet<Value> = HashSet::default();
    while let Some(op) = work.pop() {
        let Operand::Value(v) = op else { return false };
        if !seen.insert(v) {
            continue;
        }
        let ValueDef::Inst(d) = f.values[v].def else {
            return false;
        };
        match &f.insts[d].kind {
            InstKind::Prim {
                prim: Prim::Copy | Prim::Zeros | Prim::Alloc,
                ..
            } => {}
            InstKind::Prim {
                prim: Prim::Select,
                args,
            } if args.len() == 3 => work.extend([args[1], args[2]]),
            InstKind::Prim {
                prim: Prim::Getfield,
                args,
            } => match field_of_tuple(f, args) {
                Some(op) => work.push(op),
                None => return false,
            },
            InstKind::Phi { entries } => work.extend(entries.iter().map(|&(_, op)| op)),
            InstKind::Invoke { func, .. } if fresh.contains(func) => {}
            _ => return false,
        }
    }
    true
}

/// The operand a `getfield(t, i)` of a `tuple` statement's result picks.
fn field_of_tuple(f: &irad_ir::Func, args: &[Operand]) -> Option<Operand> {
    let [Operand::Value(t), Operand::Const(irad_ir::Const::I64(i))] = args else {
        return None;
    };
    let i = usize::try_from(*i).ok()?;
    let ValueDef::Inst(d) = f.values[*t].def else {
        return None;
    };
    match &f.insts[d].kind {
        InstKind::Prim {
            prim: Prim::Tuple,
            args,
        } => args.get(i).copied(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use irad_ir::text::parse_module;

    const TEXT: &str = "func @made(%a: [f64]) -> [f64] {
#1:
  %b = call copy(%a) :: [f64]
  call arrayset(%b, 0, 1.0)
  return %b
}

func @zero(%n: i64) -> [f64] {
#1:
  %z = call zeros(%n) :: [f64]
  return %z
}

func @via(%a: [f64], %c: bool) -> [f64] {
#1:
  gotoifnot %c, #3
#2:
  %m = invoke @made(%a) :: [f64]
  goto #4
#3:
  %z = invoke @zero(2) :: [f64]
  goto #4
#4:
  %r = phi [#2 => %m, #3 => %z] :: [f64]
  return %r
}

func @same(%a: [f64]) -> [f64] {
#1:
  call arrayset(%a, 0, 2.0)
  return %a
}

func @either(%a: [f64], %c: bool) -> [f64] {
#1:
  %b = call copy(%a) :: [f64]
  %r = call select(%c, %b, %a) :: [f64]
  return %r
}

func @rec(%a: [f64], %n: i64) -> [f64] {
#1:
  %c = call eq(%n, 0) :: bool
  gotoifnot %c, #3
#2:
  %b = call copy(%a) :: [f64]
  return %b
#3:
  %m = call isub(%n, 1) :: i64
  %r = invoke @rec(%a, %m) :: [f64]
  return %r
}

func @picked(%a: [f64]) -> [f64] {
#1:
  %b = call copy(%a) :: [f64]
  %t = call tuple(%b, 1.0) :: ([f64], f64)
  %r = call getfield(%t, 0) :: [f64]
  return %r
}

func @through_same(%a: [f64]) -> [f64] {
#1:
  %b = call copy(%a) :: [f64]
  %r = invoke @same(%b) :: [f64]
  return %r
}

func @keep2(%a: [f64], %b: [f64], %c: bool) -> [f64] {
#1:
  gotoifnot %c, #3
#2:
  %s = invoke @same(%b) :: [f64]
  goto #4
#3:
  goto #4
#4:
  %r = phi [#2 => %s, #3 => %b] :: [f64]
  return %r
}

func @swap(%a: [f64], %b: [f64], %c: bool) -> [f64] {
#1:
  %r = call select(%c, %a, %b) :: [f64]
  return %r
}

func @mutual(%a: [f64], %n: i64) -> [f64] {
#1:
  %r = invoke @mutual2(%a, %n) :: [f64]
  return %r
}

func @mutual2(%a: [f64], %n: i64) -> [f64] {
#1:
  %r = invoke @mutual(%a, %n) :: [f64]
  return %r
}
";

    #[test]
    fn arrays_made_in_the_call_are_fresh_and_arguments_are_not() {
        let m = parse_module(TEXT).expect("test IR parses");
        // A function calling every other.
        let mut all = irad_ir::Func::new("all", vec![], Type::Unit);
        for (id, f) in m.funcs() {
            let r = all.values.push(irad_ir::ValueData {
                ty: f.ret.clone(),
                def: ValueDef::Param(0),
                name: None,
            });
            all.insts.push(irad_ir::InstData {
                kind: InstKind::Invoke {
                    func: id,
                    args: Default::default(),
                },
                result: Some(r),
                pos: None,
            });
        }
        let names = |by_rule: &dyn Fn(FuncId) -> bool| {
            let mut names: Vec<String> = fresh_callees(&m, &all, by_rule)
                .into_iter()
                .map(|id| m[id].name.clone())
                .collect();
            names.sort();
            names
        };
        // `same` and `either` may return the argument, `through_same` what
        // `same` returns; the mutual recursion never makes an array (the
        // greatest fixpoint keeps such a cycle, harmlessly: it never
        // returns).
        assert_eq!(
            names(&|_| false),
            ["made", "mutual", "mutual2", "picked", "rec", "via", "zero"]
        );
        // A function differentiated by a rule is not fresh, nor what
        // returns its result.
        // `same` returns its argument, `keep2` its second through `same`;
        // `swap` either of two, `either` a copy or its argument.
        let mut through: Vec<(String, usize)> = passthrough_callees(&m, &all, |_| false)
            .into_iter()
            .map(|(id, j)| (m[id].name.clone(), j))
            .collect();
        through.sort();
        assert_eq!(through, [("keep2".into(), 1), ("same".into(), 0)]);
        let made = m.by_name("made").expect("@made");
        assert_eq!(
            names(&|f| f == made),
            ["mutual", "mutual2", "picked", "rec", "zero"]
        );
    }
}
