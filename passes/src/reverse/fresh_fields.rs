//! Fresh arrays in the fields of a tuple a call returns, for checkpointing
//! (docs/reverse.md, "Arrays made by a call"): a loop whose state a call
//! returns as a tuple (`st = step(st.0, st.1)`, the tuple phi split into a
//! phi per field under a limit) makes its arrays afresh in every iteration
//! when the callee makes them, as `a = step(a)` does with a function that
//! returns a fresh array ([`super::fresh`]).
//!
//! Field `k` of a function's tuple result *is fresh* when every return's
//! operand, followed for that field (a `tuple` statement's operand `k`,
//! `getfield` of a tuple for the field it reads, phis and `select` for the
//! same field), comes from an array-making statement (`copy`, `zeros`,
//! `alloc`), a call of a function returning a fresh array, or a fresh field
//! of a call's tuple result; and when no other field of the result may
//! refer to the array: what the other fields may come from (through the
//! same statements, and through every operand of a call or another
//! primitive whose result holds an array, which may hand back what it is
//! given) meets none of the
//! values field `k` came from, compared by field (`getfield(r, 0)` and
//! `getfield(r, 1)` of one call are apart when both fields of its callee
//! are fresh). The function is differentiated by its derived pieces, as for
//! [`super::fresh`]. The facts are the greatest fixpoint over the fields of
//! the functions a primal may call for a tuple, sound by the induction of
//! [`super::fresh`]: an array so made is referenced, when the call returns,
//! by that field of the result only.
//!
//! In a caller, `getfield(t, k)` of such a call's result `t` makes a fresh
//! array ([`Fresh::settle`]) when every use of `t` is a `getfield` with a
//! constant index and only that one reads field `k`: no other value of the
//! caller refers to the array.

use irad_ir::{Const, Func, FuncId, InstKind, Operand, Prim, Type, Value, ValueDef};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// A value, followed for one field of it (`Some(k)`) or as a whole.
type Item = (Value, Option<u32>);

/// What the callees return: whether a function returns a fresh array, and
/// whether field `k` of a function's tuple result is fresh.
pub(super) type Callees<'a> = (&'a dyn Fn(FuncId) -> bool, &'a dyn Fn(FuncId, u32) -> bool);

/// What makes a fresh array in one primal, for checkpointing: calls of the
/// functions returning one, and the `getfield` results taking fresh fields
/// of calls' tuple results.
#[derive(Clone, Debug, Default)]
pub(crate) struct Fresh {
    /// The functions it may call for an array that return a new one on
    /// every call.
    pub funcs: HashSet<FuncId>,
    /// The fresh fields of the tuple results of the functions it calls.
    pub fields: HashSet<(FuncId, u32)>,
    /// The `getfield` results of the primal that hold such a field (and are
    /// the only reference to it), by [`Fresh::settle`].
    pub values: HashSet<Value>,
}

impl Fresh {
    /// Whether `func` returns a fresh array.
    pub fn returns(&self, func: &FuncId) -> bool {
        self.funcs.contains(func)
    }

    /// Finds the `getfield` results of `src` that hold a fresh field of a
    /// call's result, that call's result read only by `getfield`s with a
    /// constant index, that field by one of them.
    pub fn settle(&mut self, src: &Func) {
        self.values.clear();
        if self.fields.is_empty() {
            return;
        }
        // Each call result's readers by field; `None` for a result used
        // otherwise.
        let mut readers: HashMap<Value, Option<Vec<(u32, Value)>>> = HashMap::default();
        for d in src.insts.values() {
            if let (InstKind::Invoke { func, .. }, Some(t)) = (&d.kind, d.result)
                && self.fields.iter().any(|&(f, _)| f == *func)
            {
                readers.insert(t, Some(Vec::new()));
            }
        }
        if readers.is_empty() {
            return;
        }
        let mut note = |op: &Operand, read: Option<(u32, Value)>| {
            if let Operand::Value(v) = op
                && let Some(slot) = readers.get_mut(v)
            {
                match (slot.as_mut(), read) {
                    (Some(list), Some(r)) => list.push(r),
                    _ => *slot = None,
                }
            }
        };
        for &b in &src.layout {
            for &i in &src.blocks[b].insts {
                let d = &src.insts[i];
                match (&d.kind, d.result) {
                    (
                        InstKind::Prim {
                            prim: Prim::Getfield,
                            args,
                        },
                        Some(r),
                    ) => match args.as_slice() {
                        [t, Operand::Const(Const::I64(k))] => {
                            note(t, u32::try_from(*k).ok().map(|k| (k, r)));
                        }
                        args => args.iter().for_each(|a| note(a, None)),
                    },
                    (InstKind::Prim { args, .. } | InstKind::Invoke { args, .. }, _) => {
                        args.iter().for_each(|a| note(a, None));
                    }
                    (InstKind::CallValue { callee, args }, _) => {
                        note(&Operand::Value(*callee), None);
                        args.iter().for_each(|a| note(a, None));
                    }
                    (InstKind::Phi { entries }, _) => {
                        entries.iter().for_each(|(_, a)| note(a, None));
                    }
                }
            }
            if let Some(op) = src.blocks[b]
                .term
                .as_ref()
                .and_then(irad_ir::Terminator::operand)
            {
                note(op, None);
            }
        }
        for (t, list) in readers {
            let (Some(list), ValueDef::Inst(d)) = (list, src.values[t].def) else {
                continue;
            };
            let InstKind::Invoke { func, .. } = &src.insts[d].kind else {
                continue;
            };
            for &(k, r) in &list {
                let once = list.iter().filter(|&&(j, _)| j == k).count() == 1;
                if once && self.fields.contains(&(*func, k)) {
                    self.values.insert(r);
                }
            }
        }
    }
}

/// The callees of `f`'s calls whose result is a tuple holding an array.
pub(super) fn tuple_calls(f: &Func) -> impl Iterator<Item = FuncId> + '_ {
    f.insts.values().filter_map(|d| match (&d.kind, d.result) {
        (InstKind::Invoke { func, .. }, Some(r))
            if matches!(f.values[r].ty, Type::Tuple(_))
                && irad_rules::emit::contains_array(&f.values[r].ty) =>
        {
            Some(*func)
        }
        _ => None,
    })
}

/// The array fields of a function's tuple result.
pub(super) fn array_fields(f: &Func) -> Vec<u32> {
    match &f.ret {
        Type::Tuple(fields) => (0..fields.len())
            .filter(|&k| matches!(fields[k], Type::Array(_)))
            .filter_map(|k| u32::try_from(k).ok())
            .collect(),
        _ => Vec::new(),
    }
}

/// The values a trace from `start` meets, each with the field it was
/// followed for; `strict` follows only what makes a fresh array (fails,
/// `None`, on anything else: a parameter, a call not known fresh), or else
/// everything a value holding an array may come from (every operand of a
/// call or primitive).
/// `whole` and `field` say which calls return fresh arrays and fields.
fn trace(
    f: &Func,
    start: Vec<(Operand, Option<u32>)>,
    strict: bool,
    (whole, field): Callees<'_>,
) -> Option<HashSet<Item>> {
    let mut seen: HashSet<Item> = HashSet::default();
    let mut work = start;
    while let Some((op, fld)) = work.pop() {
        let Operand::Value(v) = op else {
            if strict {
                return None;
            }
            continue;
        };
        // A scalar refers to no array.
        if !seen.insert((v, fld)) || !(strict || irad_rules::emit::contains_array(&f.values[v].ty))
        {
            continue;
        }
        let ValueDef::Inst(d) = f.values[v].def else {
            if strict {
                return None;
            }
            continue;
        };
        let kind = &f.insts[d].kind;
        match (kind, fld) {
            (
                InstKind::Prim {
                    prim: Prim::Tuple,
                    args,
                },
                Some(k),
            ) => work.push((*args.get(k as usize)?, None)),
            (
                InstKind::Prim {
                    prim: Prim::Getfield,
                    args,
                },
                None,
            ) => match args.as_slice() {
                [t, Operand::Const(Const::I64(k))] => {
                    work.push((*t, Some(u32::try_from(*k).ok()?)));
                }
                _ => return None,
            },
            (
                InstKind::Prim {
                    prim: Prim::Select,
                    args,
                },
                _,
            ) if args.len() == 3 => work.extend([(args[1], fld), (args[2], fld)]),
            (InstKind::Phi { entries }, _) => {
                work.extend(entries.iter().map(|&(_, op)| (op, fld)));
            }
            (
                InstKind::Prim {
                    prim: Prim::Copy | Prim::Zeros | Prim::Alloc,
                    ..
                },
                None,
            ) => {}
            (InstKind::Invoke { func, .. }, None) if whole(*func) => {}
            (InstKind::Invoke { func, .. }, Some(k)) if field(*func, k) => {}
            _ if strict => return None,
            (InstKind::Prim { args, .. } | InstKind::Invoke { args, .. }, _) => {
                work.extend(args.iter().map(|&a| (a, None)));
            }
            (InstKind::CallValue { callee, args }, _) => {
                work.push((Operand::Value(*callee), None));
                work.extend(args.iter().map(|&a| (a, None)));
            }
        }
    }
    Some(seen)
}

/// Whether field `k` of `f`'s tuple result is fresh (the module comment),
/// callees taken as `whole` and `field` say.
pub(super) fn returns_fresh_field(f: &Func, k: u32, (whole, field): Callees<'_>) -> bool {
    let returned = super::fresh::returned(f);
    if returned.is_empty() {
        return false;
    }
    let start = |fld: u32| returned.iter().map(|&op| (op, Some(fld))).collect();
    let Some(mine) = trace(f, start(k), true, (whole, field)) else {
        return false;
    };
    let Type::Tuple(fields) = &f.ret else {
        return false;
    };
    let others = (0..fields.len())
        .filter_map(|j| u32::try_from(j).ok())
        .filter(|&j| j != k)
        .flat_map(start)
        .collect();
    let Some(theirs) = trace(f, others, false, (whole, field)) else {
        return false;
    };
    // Apart unless one value is met for the same field, or as a whole by
    // either trace.
    let met: HashSet<Value> = mine.iter().map(|&(v, _)| v).collect();
    !theirs.iter().any(|&(v, a)| match a {
        None => met.contains(&v),
        Some(_) => mine.contains(&(v, a)) || mine.contains(&(v, None)),
    })
}
