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
//! caller refers to the array; and when it is in the call's innermost loop
//! (a `getfield` in a loop inside that one reads the same array again on
//! each of its iterations: a review's finding of session 32).

use irad_ir::{Const, Func, FuncId, InstKind, Operand, Prim, Type, Value, ValueDef};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// Where an array sits in a tuple: the fields to take, outermost first
/// (`[k]` field `k`, `[k, j]` field `j` of field `k`); empty for a value
/// followed as a whole.
pub(crate) type FieldPath = Vec<u32>;

/// A value, followed for the part of it at a path (empty: as a whole).
type Item = (Value, FieldPath);

/// What the callees return: whether a function returns a fresh array, and
/// whether the array at a path of a function's tuple result is fresh.
pub(super) type Callees<'a> = (
    &'a dyn Fn(FuncId) -> bool,
    &'a dyn Fn(FuncId, &[u32]) -> bool,
);

/// What makes a fresh array in one primal, for checkpointing: calls of the
/// functions returning one, and the `getfield` results taking fresh fields
/// of calls' tuple results.
#[derive(Clone, Debug, Default)]
pub(crate) struct Fresh {
    /// The functions it may call for an array that return a new one on
    /// every call.
    pub funcs: HashSet<FuncId>,
    /// The fresh fields of the tuple results of the functions it calls,
    /// by path (a field of a field for a tuple inside the result).
    pub fields: HashSet<(FuncId, FieldPath)>,
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
    /// constant index, that field by one of them; for a field inside a
    /// field, each tuple on the way read only so too, and the field by one
    /// `getfield` of all those of the tuples holding its parent.
    pub fn settle(&mut self, src: &Func) {
        self.values.clear();
        if self.fields.is_empty() {
            return;
        }
        // The readers by field of each call result and of each `getfield`
        // of a tuple holding an array; `None` for a value used otherwise.
        let mut readers: HashMap<Value, Option<Vec<(u32, Value)>>> = HashMap::default();
        for d in src.insts.values() {
            let Some(t) = d.result else { continue };
            let tracked = match &d.kind {
                InstKind::Invoke { func, .. } => self.fields.iter().any(|(f, _)| f == func),
                InstKind::Prim {
                    prim: Prim::Getfield,
                    ..
                } => {
                    matches!(src.values[t].ty, Type::Tuple(_))
                        && irad_rules::emit::contains_array(&src.values[t].ty)
                }
                _ => false,
            };
            if tracked {
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
        // A `getfield` makes a new array only where it runs once per run of
        // the call: in the call's innermost loop (the call's block then
        // dominates it, and no cycle holds it without the call), not in a
        // loop inside that one, which would read the same array each time.
        let cfg = irad_ir::flow::ControlFlowGraph::with_function(src);
        let dom = irad_ir::flow::DominatorTree::with_cfg(&cfg);
        let loops = irad_ir::flow::loops::LoopAnalysis::compute(&cfg, &dom);
        let places = src.inst_places();
        let loop_of = |v: Value| match src.values[v].def {
            ValueDef::Inst(i) => places[i].map(|(b, _)| loops.innermost(b)),
            ValueDef::Param(_) => None,
        };
        for d in src.insts.values() {
            let (InstKind::Invoke { func, .. }, Some(t)) = (&d.kind, d.result) else {
                continue;
            };
            let Some(home) = loop_of(t) else { continue };
            for (f, path) in &self.fields {
                if f != func {
                    continue;
                }
                // The values holding the part at each prefix of the path,
                // every one read by constant `getfield`s only.
                // Each in the call's innermost loop.
                let mut at: Vec<Value> = vec![t];
                for &k in path {
                    let mut next = Vec::new();
                    for v in &at {
                        let Some(Some(list)) = readers.get(v) else {
                            next.clear();
                            break;
                        };
                        next.extend(list.iter().filter(|&&(j, _)| j == k).map(|&(_, r)| r));
                    }
                    if next.iter().any(|&r| loop_of(r) != Some(home)) {
                        next.clear();
                    }
                    at = next;
                    if at.is_empty() {
                        break;
                    }
                }
                if let [r] = at.as_slice() {
                    self.values.insert(*r);
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

/// The array fields of a function's tuple result, by path: its fields of
/// type `[T]`, and those of its fields that are tuples, at any depth.
pub(super) fn array_fields(f: &Func) -> Vec<FieldPath> {
    let mut out = Vec::new();
    let mut work: Vec<(&Type, FieldPath)> = vec![(&f.ret, Vec::new())];
    while let Some((ty, path)) = work.pop() {
        let Type::Tuple(fields) = ty else { continue };
        for (k, e) in fields.iter().enumerate() {
            let Ok(k) = u32::try_from(k) else { continue };
            let p: FieldPath = path.iter().copied().chain([k]).collect();
            match e {
                Type::Array(_) => out.push(p),
                Type::Tuple(_) => work.push((e, p)),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

/// The values a trace from `start` meets, each with the field it was
/// followed for; `strict` follows only what makes a fresh array (fails,
/// `None`, on anything else: a parameter, a call not known fresh), or else
/// everything a value holding an array may come from (every operand of a
/// call or primitive).
/// `whole` and `field` say which calls return fresh arrays and fields.
fn trace(
    f: &Func,
    start: Vec<(Operand, FieldPath)>,
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
        if !seen.insert((v, fld.clone()))
            || !(strict || irad_rules::emit::contains_array(&f.values[v].ty))
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
        let fld = match part_step(kind, fld) {
            Step::Follow(next) => {
                work.extend(next);
                continue;
            }
            Step::Bad => return None,
            Step::Other(fld) => fld,
        };
        match (kind, fld.split_first()) {
            (
                InstKind::Prim {
                    prim: Prim::Copy | Prim::Zeros | Prim::Alloc,
                    ..
                },
                None,
            ) => {}
            (InstKind::Invoke { func, .. }, None) if whole(*func) => {}
            (InstKind::Invoke { func, .. }, Some(_)) if field(*func, &fld) => {}
            _ if strict => return None,
            (InstKind::Prim { args, .. } | InstKind::Invoke { args, .. }, _) => {
                work.extend(args.iter().map(|&a| (a, Vec::new())));
            }
            (InstKind::CallValue { callee, args }, _) => {
                work.push((Operand::Value(*callee), Vec::new()));
                work.extend(args.iter().map(|&a| (a, Vec::new())));
            }
            // Followed by `part_step`.
            (InstKind::Phi { .. }, _) => {}
        }
    }
    Some(seen)
}

/// Whether the array at `path` of `f`'s tuple result is fresh (the module
/// comment), callees taken as `whole` and `field` say.
pub(super) fn returns_fresh_field(f: &Func, path: &[u32], (whole, field): Callees<'_>) -> bool {
    let returned = super::fresh::returned(f);
    if returned.is_empty() || path.is_empty() {
        return false;
    }
    let start = |p: FieldPath| -> Vec<(Operand, FieldPath)> {
        returned.iter().map(|&op| (op, p.clone())).collect()
    };
    let Some(mine) = trace(f, start(path.to_vec()), true, (whole, field)) else {
        return false;
    };
    // The rest of the result: at each level of the path, every other
    // field of the tuple there.
    let mut others = Vec::new();
    let mut ty = &f.ret;
    for (i, &k) in path.iter().enumerate() {
        let Type::Tuple(fields) = ty else {
            return false;
        };
        for j in (0..fields.len()).filter_map(|j| u32::try_from(j).ok()) {
            if j != k {
                others.extend(start(path[..i].iter().copied().chain([j]).collect()));
            }
        }
        let Some(next) = fields.get(k as usize) else {
            return false;
        };
        ty = next;
    }
    let Some(theirs) = trace(f, others, false, (whole, field)) else {
        return false;
    };
    // Apart unless one value is met by both traces for parts of it that
    // overlap: one part's path a prefix of the other's (the empty path, the
    // whole value, overlaps every part).
    let by_value: HashMap<Value, Vec<&FieldPath>> =
        mine.iter().fold(HashMap::default(), |mut m, (v, p)| {
            m.entry(*v).or_default().push(p);
            m
        });
    !theirs.iter().any(|(v, a)| {
        by_value
            .get(v)
            .is_some_and(|ps| ps.iter().any(|p| p.starts_with(a) || a.starts_with(p)))
    })
}

/// Where a part of a function's result comes from when it is one of the
/// function's parameters as it is: the parameter's index, and the path in
/// it (empty for an array parameter; `[k]` field `k` of a tuple one).
pub(crate) type ParamPart = (usize, FieldPath);

/// What a callee is taken to give at a part of its result, for
/// [`kept_ends`]: `None` fails the trace, `Some(None)` stops it there
/// without an end (a fact not known yet, while a candidate is sought),
/// `Some(Some(p))` follows the call's argument at `p`.
pub(super) type KeptCallee<'a> = &'a dyn Fn(FuncId, &[u32]) -> Option<Option<ParamPart>>;

/// The parameter parts every return of `f`, followed for the array at
/// `path` of its result, comes from as it is: through `tuple` statements
/// (the operand the path takes), `getfield` (the path grows), phis and
/// `select`, and calls (`callee` says which argument, and which part of
/// it, a call's result gives at a path; the empty path for an array
/// result). `None` when some return comes from anything else: a statement
/// making an array, a constant, a call `callee` fails. A *kept field*
/// (docs/reverse.md, "Arrays kept in the fields of a call's tuple
/// result") is a path for which this is one part.
pub(super) fn kept_ends(
    f: &Func,
    path: &[u32],
    callee: KeptCallee<'_>,
) -> Option<HashSet<ParamPart>> {
    let mut work: Vec<(Operand, FieldPath)> = super::fresh::returned(f)
        .into_iter()
        .map(|op| (op, path.to_vec()))
        .collect();
    if work.is_empty() {
        return None;
    }
    let mut seen: HashSet<Item> = HashSet::default();
    let mut ends = HashSet::default();
    while let Some((op, fld)) = work.pop() {
        let Operand::Value(v) = op else { return None };
        if !seen.insert((v, fld.clone())) {
            continue;
        }
        let d = match f.values[v].def {
            ValueDef::Param(j) => {
                ends.insert((usize::try_from(j).ok()?, fld));
                continue;
            }
            ValueDef::Inst(d) => d,
        };
        let kind = &f.insts[d].kind;
        let fld = match part_step(kind, fld) {
            Step::Follow(next) => {
                work.extend(next);
                continue;
            }
            Step::Bad => return None,
            Step::Other(fld) => fld,
        };
        let InstKind::Invoke { func, args } = kind else {
            return None;
        };
        if let Some((j, part)) = callee(*func, &fld)? {
            work.push((*args.get(j)?, part));
        }
    }
    Some(ends)
}

/// Where [`part_step`] goes from a statement.
enum Step {
    /// On to these operands, each for the part at its path.
    Follow(Vec<(Operand, FieldPath)>),
    /// A statement the trace cannot follow (a `getfield` whose index is not
    /// a constant, a field a `tuple` statement lacks).
    Bad,
    /// No statement that only moves parts of values around: the caller
    /// decides, for the part at this path.
    Other(FieldPath),
}

/// The operands the part at path `fld` of a statement's result comes from,
/// for a statement that only moves parts around: a `tuple` statement (the
/// operand the path's first index takes, for the rest of the path), a
/// `getfield` (its tuple, for the path one field longer), `select` and
/// phis (each choice, for the same path).
fn part_step(kind: &InstKind, fld: FieldPath) -> Step {
    match (kind, fld.split_first()) {
        (
            InstKind::Prim {
                prim: Prim::Tuple,
                args,
            },
            Some((&k, rest)),
        ) => match args.get(k as usize) {
            Some(&op) => Step::Follow(vec![(op, rest.to_vec())]),
            None => Step::Bad,
        },
        (
            InstKind::Prim {
                prim: Prim::Getfield,
                args,
            },
            _,
        ) => match args.as_slice() {
            [t, Operand::Const(Const::I64(k))] => match u32::try_from(*k) {
                Ok(k) => Step::Follow(vec![(*t, [k].into_iter().chain(fld).collect())]),
                Err(_) => Step::Bad,
            },
            _ => Step::Bad,
        },
        (
            InstKind::Prim {
                prim: Prim::Select,
                args,
            },
            _,
        ) if args.len() == 3 => Step::Follow(vec![(args[1], fld.clone()), (args[2], fld)]),
        (InstKind::Phi { entries }, _) => {
            Step::Follow(entries.iter().map(|&(_, op)| (op, fld.clone())).collect())
        }
        _ => Step::Other(fld),
    }
}
