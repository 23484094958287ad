//! Dual phis of arrays split into a phi per part (docs/forward.md, "Arrays
//! carried through loops"): forward mode turns a loop phi of `[f64]` into a
//! phi of `dual<[f64]>`, entered with `dual(p, t)` of the arrays made for
//! it and read only through `primal` and `tangent`. Code generation frees an
//! array carried through a loop phi only when the phi is of an array type
//! and owns what enters it (docs/codegen.md, "Freeing arrays"), so a
//! forward rule of a loop carrying an array kept every iteration's array
//! and tangent until the run ended (10^6 iterations of a 1 000-element
//! array: 16 GB), where the primal frees them as it goes. Here each such
//! phi becomes one phi per part, entered with the parts themselves, and
//! each `primal` or `tangent` of it the phi of its part: the primal loop's
//! own shape, once per part.
//!
//! A web of such phis (entering one another, as nested loops' do) splits
//! together, when every phi of it holds a `dual` of a type with an array
//! (dense lanes, or sparse mode's one tangent), every entry is a `dual`
//! statement's value or a phi of the web, and every use of a phi of the
//! web is `primal`, `tangent` with a constant lane, or an entry of a phi of
//! the web. Anything else (a dual passed to a call, returned, chosen by
//! `select`, a constant entry, an argument entering the phi as it is) keeps
//! the web as it is; so does every web of the function when one phi of a
//! web is entered by no `dual` at all (only by phis of the web: never run).
//! A dual of a tuple holding an array splits too, into tuple phis (which
//! code generation does not free; harmless).
//!
//! Reverse mode splits phis of tuples holding arrays the same way before
//! it checkpoints loops ([`split_tuple_array_phis`]: `tuple` for `dual`,
//! `getfield` with a constant index for `primal` and `tangent`; a tuple's
//! constant fields enter their phis as they are), and more widely: every
//! tuple phi holding an array splits unless an entry is a constant or it
//! has a `()` field at any depth (no phi of `()` can be made). Any
//! other tuple entering the web enters by a `getfield` per field, added at
//! the end of the block it enters from (an array field's right after the
//! statement that made the tuple, when no phi did), and a phi of the web used other
//! than by `getfield` with a constant index or as a web phi's entry is made
//! again from its fields' phis by a `tuple` statement just before each such
//! use (so the pullback sums the fields' cotangents in the order it did).
//! [`merge_getfields`] then makes the `getfield`s of one array field of one
//! tuple one statement.
//!
//! Code generation does the same on its own copy of a function, after
//! inlining ([`tuples_for_codegen`]; docs/codegen.md, "Tuples holding
//! arrays"), so that a loop carrying arrays in a tuple carries them in
//! array phis, which it frees as the primal's: first each `getfield` of an
//! array field of a `tuple` statement (inlining leaves these where a
//! callee made a tuple and the caller reads it) becomes the field's
//! operand, then the phis split, then the fields are folded again and the
//! reads of each array field merged.
//!
//! Assumes a verified function. Guarantees: the function computes the same
//! values (each part flows along the same edges as the dual did), verifies,
//! and changes only where a web split; the `dual` statements that only
//! entered split phis, and the `primal`/`tangent` statements of them, are
//! gone.

use crate::normalise::remove_trivial_phis::remove_and_substitute;
use irad_ir::entity::{EntitySet, SecondaryMap};
use irad_ir::{
    Block, BuildError, Const, Func, FuncBuilder, FuncId, Inst, InstKind, Lanes, Module, Operand,
    Prim, Terminator, Type, Value, ValueDef,
};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use smallvec::SmallVec;

/// Each statement's block and position in it (`Func::inst_places`).
type Places = SecondaryMap<Inst, Option<(Block, u32)>>;

/// Where a value is used.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Use {
    /// As an operand of a statement.
    Inst(Inst),
    /// In a block's terminator.
    Term,
}

/// Which phis split: duals (`dual`, read by `primal` and `tangent`), or
/// tuples (`tuple`, read by `getfield`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dual,
    Tuple,
}

/// Splits the webs of dual array phis of function `id` of `module` (see the
/// module comment); returns how many phis were split.
pub(crate) fn split_dual_array_phis(module: &mut Module, id: FuncId) -> Result<usize, BuildError> {
    split(module, id, Kind::Dual)
}

/// Splits the webs of phis of tuples holding an array of `func` the same
/// way: each becomes a phi per field, entered with the fields of the
/// `tuple` statements entering it (or `getfield`s of another tuple), each
/// `getfield` of it with a constant index the phi of its field, any other
/// use a `tuple` of the fields' phis made just before it (reverse mode under a tape limit,
/// docs/reverse.md, "Tuples carried through the header"). Returns how many
/// phis were split.
pub(crate) fn split_tuple_array_phis(func: &mut Func) -> Result<usize, BuildError> {
    if candidates(func, Kind::Tuple).is_empty() {
        return Ok(0);
    }
    // The builder works on a module's function: one of its own, given back.
    let mut module = Module::new();
    let id = module.add_func(std::mem::replace(
        func,
        Func::new(&func.name, Vec::new(), Type::Unit),
    ))?;
    let n = split(&mut module, id, Kind::Tuple);
    if let Some(f) = module.get_mut(id) {
        std::mem::swap(func, f);
    }
    n
}

/// Makes the `getfield`s of an array field of one tuple with one constant
/// index one statement, right after the tuple is defined (after the phis of
/// its block for a phi, first in the entry block for a parameter), where it
/// dominates every use of the others; returns how many went. Reverse mode
/// does so after splitting tuple phis, whose entries read fields that the
/// loop's body may read too: one array is then one value
/// (`fresh_fields.rs`). Array fields only: an array's shadow is one array
/// however many values name it, but merging the reads of a scalar field
/// would sum its cotangents in another order (another sign of a zero, or
/// another rounding) than the pullback without a limit.
pub(crate) fn merge_getfields(func: &mut Func) -> usize {
    merge(func, false)
}

/// [`merge_getfields`] for code generation, which differentiates nothing
/// and so may merge the reads of every field that holds an array, a tuple
/// holding one too (so that a call's tuple inside a tuple is read once,
/// docs/codegen.md, "Tuples holding arrays"), in rounds (a level each).
fn merge_reads_holding_arrays(func: &mut Func) -> usize {
    let mut n = 0;
    for _ in 0..FOLD_ROUNDS {
        match merge(func, true) {
            0 => break,
            k => n += k,
        }
    }
    n
}

/// The merge of [`merge_getfields`], of array fields, or (`wide`) of every
/// field holding an array.
fn merge(func: &mut Func, wide: bool) -> usize {
    let mut groups: HashMap<(Value, i64), Vec<Inst>> = HashMap::default();
    for (inst, r, t, k) in const_getfields(func) {
        if matches!(func.values[r].ty, Type::Array(_))
            || wide && irad_rules::emit::contains_array(&func.values[r].ty)
        {
            groups.entry((t, k)).or_default().push(inst);
        }
    }
    let mut groups: Vec<((Value, i64), Vec<Inst>)> =
        groups.into_iter().filter(|(_, g)| g.len() > 1).collect();
    if groups.is_empty() {
        return 0;
    }
    groups.sort_unstable_by_key(|&(key, _)| key);
    let mut dead: HashSet<Inst> = HashSet::default();
    let mut map: SecondaryMap<Value, Option<Operand>> = SecondaryMap::new();
    let Some(entry) = func.layout.first().copied() else {
        return 0;
    };
    let mut places = func.inst_places();
    for ((t, _), group) in groups {
        let kept = group[0];
        let Some(r) = func.insts[kept].result else {
            continue;
        };
        // Where `t` is defined (reachable statements only: a group of a
        // tuple defined nowhere in the layout stays as it is).
        let (block, after) = match func.values[t].def {
            ValueDef::Inst(d) => match places[d] {
                Some((b, _)) => (b, Some(d)),
                None => continue,
            },
            ValueDef::Param(_) => (entry, None),
        };
        let Some((from, _)) = places[kept] else {
            continue;
        };
        // `t` may be a kept `getfield` of this round, moved already (a
        // field of a field: `places` follows the moves); it must be found.
        if let Some(d) = after
            && !func.blocks[block].insts.contains(&d)
        {
            continue;
        }
        for &other in &group[1..] {
            if let Some(x) = func.insts[other].result {
                map.set(x, Some(Operand::Value(r)));
                dead.insert(other);
            }
        }
        // Moved right after `t`'s definition.
        func.blocks[from].insts.retain(|&i| i != kept);
        let insts = &func.blocks[block].insts;
        let at = match after {
            Some(d) if !matches!(func.insts[d].kind, InstKind::Phi { .. }) => insts
                .iter()
                .position(|&i| i == d)
                .map_or(insts.len(), |p| p + 1),
            _ => insts
                .iter()
                .position(|&i| !matches!(func.insts[i].kind, InstKind::Phi { .. }))
                .unwrap_or(insts.len()),
        };
        func.blocks[block].insts.insert(at, kept);
        places.set(kept, Some((block, 0)));
    }
    let n = dead.len();
    let dead: EntitySet<Inst> = dead.into_iter().collect();
    remove_and_substitute(func, &dead, &map);
    n
}

/// How many rounds of [`fold_tuple_getfields`] a copy for code generation
/// gets (a round folds one more level of nested tuples).
const FOLD_ROUNDS: usize = 8;

/// `func` made ready for code generation (module comment; docs/codegen.md,
/// "Tuples holding arrays"): `getfield`s of array fields of `tuple`
/// statements folded, phis of tuples holding arrays split, then folded
/// again and the reads of fields holding arrays merged. `None` when there is nothing to
/// change. Statements are never renumbered, so a table of places by
/// statement (inlining's) stays true of the old ones; the new ones are
/// `tuple`, `getfield` and phis, which cannot fail.
pub fn tuples_for_codegen(func: &Func) -> Result<Option<Func>, BuildError> {
    if folds(func).is_empty() && candidates(func, Kind::Tuple).is_empty() {
        return Ok(None);
    }
    let mut f = func.clone();
    let mut changed = fold_tuple_getfields(&mut f);
    while let n @ 1.. = split_tuple_array_phis(&mut f)? {
        changed += n;
    }
    changed += fold_tuple_getfields(&mut f);
    if changed == 0 {
        return Ok(None);
    }
    merge_reads_holding_arrays(&mut f);
    Ok(Some(f))
}

/// Folds `x = getfield(t, k)` of an array-holding field `k` of `t =
/// tuple(..)` into the `tuple`'s operand `k`, in up to [`FOLD_ROUNDS`]
/// rounds; returns how many went. The operand's definition dominates `t`'s,
/// which dominates every use of `x`.
fn fold_tuple_getfields(func: &mut Func) -> usize {
    let mut n = 0;
    for _ in 0..FOLD_ROUNDS {
        let found = folds(func);
        if found.is_empty() {
            break;
        }
        n += found.len();
        let to: HashMap<Value, Operand> = found.iter().map(|&(_, x, op)| (x, op)).collect();
        let mut map: SecondaryMap<Value, Option<Operand>> = SecondaryMap::new();
        let mut dead = EntitySet::new();
        for (inst, x, mut op) in found {
            // A field folded into another folded field: to the end of the
            // chain (which ends: each link's definition dominates the last).
            while let Operand::Value(v) = op
                && let Some(&next) = to.get(&v)
            {
                op = next;
            }
            map.set(x, Some(op));
            dead.insert(inst);
        }
        remove_and_substitute(func, &dead, &map);
    }
    n
}

/// The `getfield`s [`fold_tuple_getfields`] folds now: (statement, its
/// result, the operand it becomes).
fn folds(func: &Func) -> Vec<(Inst, Value, Operand)> {
    const_getfields(func)
        .filter(|&(_, x, _, _)| irad_rules::emit::contains_array(&func.values[x].ty))
        .filter_map(|(inst, x, t, k)| {
            let parts = dual_parts(func, t, Kind::Tuple)?;
            let &op = parts.get(usize::try_from(k).ok()?)?;
            Some((inst, x, op))
        })
        .collect()
}

/// Every `x = getfield(t, k)` of `func` with a constant field, in layout
/// order: (statement, `x`, `t`, `k`).
fn const_getfields(func: &Func) -> impl Iterator<Item = (Inst, Value, Value, i64)> + '_ {
    func.layout
        .iter()
        .flat_map(|&b| func.blocks[b].insts.iter().copied())
        .filter_map(|inst| {
            let data = &func.insts[inst];
            match (&data.kind, data.result) {
                (
                    InstKind::Prim {
                        prim: Prim::Getfield,
                        args,
                    },
                    Some(x),
                ) => match args.as_slice() {
                    [Operand::Value(t), Operand::Const(Const::I64(k))] => Some((inst, x, *t, *k)),
                    _ => None,
                },
                _ => None,
            }
        })
}

/// The webs of `kind` of function `id` split; how many phis.
fn split(module: &mut Module, id: FuncId, kind: Kind) -> Result<usize, BuildError> {
    let func = module.get(id).ok_or(BuildError::BadHandle("function"))?;
    let phis = candidates(func, kind);
    if phis.is_empty() {
        return Ok(0);
    }
    let uses = uses_of(func);
    let web = web(func, &phis, &uses, kind);
    if web.is_empty() {
        return Ok(0);
    }
    rewrite(module, id, &web, &uses, kind)
}

/// The phis of a dual (or tuple) type holding an array, by result, with
/// their block.
fn candidates(func: &Func, kind: Kind) -> HashMap<Value, (Inst, Block)> {
    let mut out = HashMap::default();
    for &b in &func.layout {
        for &inst in &func.blocks[b].insts {
            let data = &func.insts[inst];
            let InstKind::Phi { .. } = data.kind else {
                break;
            };
            let Some(r) = data.result else { continue };
            let ours = match (&func.values[r].ty, kind) {
                (Type::Dual(inner, _), Kind::Dual) => irad_rules::emit::contains_array(inner),
                (ty @ Type::Tuple(_), Kind::Tuple) => {
                    irad_rules::emit::contains_array(ty) && !unit_field(ty)
                }
                _ => false,
            };
            if ours {
                out.insert(r, (inst, b));
            }
        }
    }
    out
}

/// Whether tuple type `ty` has a `()` field, at any depth of tuples: a
/// phi per field would need a phi of `()`, which has no result, so such a
/// tuple phi does not split (forward mode's tangent of `([f64], i64)` is
/// `([f64], ())`).
fn unit_field(ty: &Type) -> bool {
    match ty {
        Type::Tuple(fields) => fields
            .iter()
            .any(|f| matches!(f, Type::Unit) || unit_field(f)),
        _ => false,
    }
}

/// Every use of every value.
fn uses_of(func: &Func) -> SecondaryMap<Value, SmallVec<[Use; 2]>> {
    let mut uses: SecondaryMap<Value, SmallVec<[Use; 2]>> = SecondaryMap::new();
    let mut add = |op: &Operand, u: Use| {
        if let Operand::Value(v) = op {
            uses.get_mut(*v).push(u);
        }
    };
    for &b in &func.layout {
        for &inst in &func.blocks[b].insts {
            match &func.insts[inst].kind {
                InstKind::Prim { args, .. } | InstKind::Invoke { args, .. } => {
                    args.iter().for_each(|a| add(a, Use::Inst(inst)));
                }
                InstKind::CallValue { callee, args } => {
                    add(&Operand::Value(*callee), Use::Inst(inst));
                    args.iter().for_each(|a| add(a, Use::Inst(inst)));
                }
                InstKind::Phi { entries } => {
                    entries.iter().for_each(|(_, a)| add(a, Use::Inst(inst)));
                }
            }
        }
        if let Some(op) = func.blocks[b].term.as_ref().and_then(Terminator::operand) {
            add(op, Use::Term);
        }
    }
    uses
}

/// The `dual` (or `tuple`) statement defining `v`, with its parts, if it
/// is one.
fn dual_parts(func: &Func, v: Value, kind: Kind) -> Option<&[Operand]> {
    match (func.def_kind(v)?, kind) {
        (
            InstKind::Prim {
                prim: Prim::Dual,
                args,
            },
            Kind::Dual,
        )
        | (
            InstKind::Prim {
                prim: Prim::Tuple,
                args,
            },
            Kind::Tuple,
        ) => Some(args.as_slice()),
        _ => None,
    }
}

/// The part a `primal` or `tangent` statement reads (0 the primal, k + 1
/// tangent lane k), or a `getfield` (field k), when it reads one of `of`.
fn part_read(func: &Func, inst: Inst, of: Value, kind: Kind) -> Option<usize> {
    match (&func.insts[inst].kind, kind) {
        (
            InstKind::Prim {
                prim: Prim::Primal,
                args,
            },
            Kind::Dual,
        ) if args.as_slice() == [Operand::Value(of)] => Some(0),
        (
            InstKind::Prim {
                prim: Prim::Tangent,
                args,
            },
            Kind::Dual,
        ) => match args.as_slice() {
            [Operand::Value(x), Operand::Const(Const::I64(k))] if *x == of => {
                usize::try_from(*k).ok().map(|k| k + 1)
            }
            _ => None,
        },
        (
            InstKind::Prim {
                prim: Prim::Getfield,
                args,
            },
            Kind::Tuple,
        ) => match args.as_slice() {
            [Operand::Value(x), Operand::Const(Const::I64(k))] if *x == of => {
                usize::try_from(*k).ok()
            }
            _ => None,
        },
        _ => None,
    }
}

/// The candidates that split: the greatest set closed under the rules of
/// the module comment.
fn web(
    func: &Func,
    phis: &HashMap<Value, (Inst, Block)>,
    uses: &SecondaryMap<Value, SmallVec<[Use; 2]>>,
    kind: Kind,
) -> HashMap<Value, (Inst, Block)> {
    let mut web = phis.clone();
    loop {
        let before = web.len();
        let keep: Vec<Value> = web
            .iter()
            .filter(|&(&r, &(inst, _))| {
                let InstKind::Phi { entries } = &func.insts[inst].kind else {
                    return false;
                };
                let arity = parts(func, r);
                let entries_ok = entries.iter().all(|(_, op)| match op {
                    // A tuple enters by its fields: a `tuple` statement's
                    // operands, or `getfield` of any other tuple.
                    Operand::Value(v) if web.contains_key(v) || kind == Kind::Tuple => true,
                    // A dual's parts give the parts' types (below).
                    Operand::Value(v) => dual_parts(func, *v, kind).is_some_and(|p| {
                        p.len() == arity && p.iter().all(|x| matches!(x, Operand::Value(_)))
                    }),
                    Operand::Const(_) => false,
                });
                // A tuple is made again of its fields' phis where it is
                // used as a whole.
                let uses_ok = kind == Kind::Tuple
                    || uses[r].iter().all(|u| match u {
                        Use::Term => false,
                        Use::Inst(i) => match &func.insts[*i].kind {
                            InstKind::Phi { .. } => {
                                func.insts[*i].result.is_some_and(|x| web.contains_key(&x))
                            }
                            _ => part_read(func, *i, r, kind).is_some_and(|k| k < arity),
                        },
                    });
                entries_ok && uses_ok
            })
            .map(|(&r, _)| r)
            .collect();
        web.retain(|r, _| keep.contains(r));
        if web.len() == before {
            return web;
        }
    }
}

/// The number of parts of a dual value: the primal and its dense lanes, or
/// its one sparse tangent; of a tuple, its fields.
fn parts(func: &Func, v: Value) -> usize {
    match &func.values[v].ty {
        Type::Dual(_, Lanes::Dense(n)) => 1 + n.get() as usize,
        Type::Dual(_, Lanes::Sparse) => 2,
        Type::Tuple(fields) => fields.len(),
        _ => 0,
    }
}

/// Splits the phis of `web`; returns how many.
fn rewrite(
    module: &mut Module,
    id: FuncId,
    web: &HashMap<Value, (Inst, Block)>,
    uses: &SecondaryMap<Value, SmallVec<[Use; 2]>>,
    kind: Kind,
) -> Result<usize, BuildError> {
    let func = module.get(id).ok_or(BuildError::BadHandle("function"))?;
    let mut order: Vec<Value> = web.keys().copied().collect();
    order.sort_unstable();
    // The parts' types, from a `dual` entering the web (every phi of a web
    // that splits is entered, through the web, from one).
    let mut types: HashMap<Value, Vec<Type>> = HashMap::default();
    // A tuple phi's fields are its type's.
    if kind == Kind::Tuple {
        for &r in &order {
            if let Type::Tuple(fields) = &func.values[r].ty {
                types.insert(r, fields.to_vec());
            }
        }
    }
    loop {
        let before = types.len();
        for &r in &order {
            if types.contains_key(&r) {
                continue;
            }
            let InstKind::Phi { entries } = &func.insts[web[&r].0].kind else {
                continue;
            };
            for (_, op) in entries {
                let Operand::Value(v) = op else { continue };
                if let Some(t) = types.get(v) {
                    types.insert(r, t.clone());
                    break;
                }
                if let Some(p) = dual_parts(func, *v, kind) {
                    let t: Option<Vec<Type>> = p
                        .iter()
                        .map(|x| match x {
                            Operand::Value(x) => Some(func.values[*x].ty.clone()),
                            Operand::Const(_) => None,
                        })
                        .collect();
                    if let Some(t) = t {
                        types.insert(r, t);
                        break;
                    }
                }
            }
        }
        if types.len() == before {
            break;
        }
    }
    // A web whose phis never meet a `dual` (they only enter one another) is
    // never entered: left alone.
    let order: Vec<Value> = order
        .into_iter()
        .filter(|r| types.contains_key(r))
        .collect();
    if order.len() != web.len() {
        return Ok(0);
    }
    // A tuple entering the web that no `tuple` statement made gives its
    // fields by `getfield`, at the end of the block it enters from.
    let fields = match kind {
        Kind::Tuple => entry_fields(
            module
                .get_mut(id)
                .ok_or(BuildError::BadHandle("function"))?,
            (web, &order),
            &types,
        )?,
        Kind::Dual => HashMap::default(),
    };
    // The new phis, after the existing ones of each old one's block.
    let mut fb = FuncBuilder::new(module, id)?;
    let mut new: HashMap<Value, Vec<Value>> = HashMap::default();
    for &r in &order {
        let (_, b) = web[&r];
        let made = types[&r]
            .iter()
            .map(|ty| fb.insert_phi(b, ty.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        new.insert(r, made);
    }
    // Their entries: a `dual`'s parts, or the parts of a phi of the web.
    let mut dead: HashSet<Inst> = HashSet::default();
    let mut duals: HashSet<Value> = HashSet::default();
    let mut entries_of: Vec<(Value, Block, Operand)> = Vec::new();
    for &r in &order {
        let (inst, _) = web[&r];
        let func = &fb.module()[id];
        let InstKind::Phi { entries } = &func.insts[inst].kind else {
            continue;
        };
        for (j, &part) in new[&r].iter().enumerate() {
            for (from, op) in entries {
                let Operand::Value(v) = op else { continue };
                let x = match (new.get(v), fields.get(&(*v, *from))) {
                    (Some(q), _) => Operand::Value(q[j]),
                    (None, Some(got)) => got[j],
                    (None, None) => {
                        duals.insert(*v);
                        dual_parts(func, *v, kind).map_or(*op, |p| p[j])
                    }
                };
                entries_of.push((part, *from, x));
            }
        }
        dead.insert(inst);
    }
    for (part, from, x) in entries_of {
        fb.add_phi_entry(part, from, x)?;
    }
    let func = module
        .get_mut(id)
        .ok_or(BuildError::BadHandle("function"))?;
    // Each `primal`/`tangent` of a split phi is its part's phi.
    let places = func.inst_places();
    let mut subst: HashMap<Value, Operand> = HashMap::default();
    for &r in &order {
        let mut whole: Vec<Inst> = Vec::new();
        let mut at_end = false;
        for u in &uses[r] {
            let Use::Inst(i) = *u else {
                at_end = true;
                continue;
            };
            if let (Some(k), Some(res)) = (part_read(func, i, r, kind), func.insts[i].result) {
                subst.insert(res, Operand::Value(new[&r][k]));
                dead.insert(i);
            } else if (!matches!(func.insts[i].kind, InstKind::Phi { .. })
                || func.insts[i].result.is_none_or(|x| !web.contains_key(&x)))
                && !whole.contains(&i)
            {
                whole.push(i);
            }
        }
        // A tuple used as a whole (passed to a call, returned, entering a
        // phi that does not split) is made again from its fields' phis
        // where it is so used.
        let fields_of: Vec<Operand> = new[&r].iter().map(|&x| Operand::Value(x)).collect();
        remake_whole(func, (r, &places), (&whole, at_end), &fields_of)?;
    }
    // The `dual`s that only entered split phis.
    for v in duals {
        let only_split = uses[v].iter().all(|u| match u {
            Use::Inst(i) => dead.contains(i),
            Use::Term => false,
        });
        if only_split && let ValueDef::Inst(def) = func.values[v].def {
            dead.insert(def);
        }
    }
    let dead: EntitySet<Inst> = dead.into_iter().collect();
    let mut map: SecondaryMap<Value, Option<Operand>> = SecondaryMap::new();
    for (&v, &op) in &subst {
        map.set(v, Some(op));
    }
    remove_and_substitute(func, &dead, &map);
    Ok(order.len())
}

/// The fields of each tuple entering a phi of `web` (taken in `order`)
/// that no `tuple` statement made and no phi of the web is, by entering
/// block: `getfield`s of it of the field types `types`, added at the end of
/// that block, but for an array field of a tuple a statement other than a
/// phi made: right after that statement.
fn entry_fields(
    func: &mut Func,
    (web, order): (&HashMap<Value, (Inst, Block)>, &[Value]),
    types: &HashMap<Value, Vec<Type>>,
) -> Result<HashMap<(Value, Block), Vec<Operand>>, BuildError> {
    let mut fields: HashMap<(Value, Block), Vec<Operand>> = HashMap::default();
    let places = func.inst_places();
    for &r in order {
        let InstKind::Phi { entries } = func.insts[web[&r].0].kind.clone() else {
            continue;
        };
        for (from, op) in entries {
            let Operand::Value(v) = op else { continue };
            if web.contains_key(&v)
                || dual_parts(func, v, Kind::Tuple).is_some()
                || fields.contains_key(&(v, from))
            {
                continue;
            }
            // An array field's read goes right after the statement making
            // the tuple, next to it (a call's result read in the call's
            // block is a site of code generation, docs/codegen.md,
            // "Tuples holding arrays"); the others at the end of `from`.
            let mut next = after_def(func, v, &places);
            let got = types[&r]
                .iter()
                .enumerate()
                .map(|(k, ty)| {
                    let kind = InstKind::Prim {
                        prim: Prim::Getfield,
                        args: SmallVec::from_slice(&[op, Operand::Const(Const::I64(k as i64))]),
                    };
                    let near = next.filter(|_| matches!(ty, Type::Array(_)));
                    let (inst, x) =
                        func.push_inst(near.map_or(from, |(b, _)| b), kind, Some(ty.clone()), None);
                    if let Some((b, prev)) = near {
                        let insts = &mut func.blocks[b].insts;
                        insts.pop();
                        let at = insts
                            .iter()
                            .position(|&i| i == prev)
                            .map_or(insts.len(), |p| p + 1);
                        insts.insert(at, inst);
                        next = Some((b, inst));
                    }
                    x.map(Operand::Value)
                        .ok_or(BuildError::BadHandle("getfield result"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            fields.insert((v, from), got);
        }
    }
    Ok(fields)
}

/// The block and statement defining `v` when that is a statement other
/// than a phi (in the layout), after which its array fields are read.
fn after_def(func: &Func, v: Value, places: &Places) -> Option<(Block, Inst)> {
    let ValueDef::Inst(d) = func.values[v].def else {
        return None;
    };
    if matches!(func.insts[d].kind, InstKind::Phi { .. }) {
        return None;
    }
    places[d].map(|(b, _)| (b, d))
}

/// Replaces split phi `r` where it is used whole (the statements `whole`,
/// and, when `at_end`, the terminators reading it) by a `tuple` of its
/// fields' phis `fields_of` made just before the use: before the
/// statement, or at the end of the block a phi's entry or a terminator
/// reads it in. Its pullback then adds the fields' cotangents where the
/// use's did, in the order of the pullback without a split.
fn remake_whole(
    func: &mut Func,
    (r, places): (Value, &Places),
    (whole, at_end): (&[Inst], bool),
    fields_of: &[Operand],
) -> Result<(), BuildError> {
    let ty = func.values[r].ty.clone();
    let remake = |func: &mut Func, b: Block, before: Option<Inst>| {
        let kind = InstKind::Prim {
            prim: Prim::Tuple,
            args: fields_of.iter().copied().collect(),
        };
        let (inst, t) = func.push_inst(b, kind, Some(ty.clone()), None);
        if let Some(i) = before {
            let insts = &mut func.blocks[b].insts;
            insts.pop();
            let at = insts.iter().position(|&x| x == i).unwrap_or(insts.len());
            insts.insert(at, inst);
        }
        t.map(Operand::Value)
            .ok_or(BuildError::BadHandle("tuple result"))
    };
    let swap = |op: &mut Operand, t: Operand| {
        if *op == Operand::Value(r) {
            *op = t;
        }
    };
    for &i in whole {
        if let InstKind::Phi { entries } = func.insts[i].kind.clone() {
            for (j, (from, op)) in entries.iter().enumerate() {
                if *op == Operand::Value(r) {
                    let t = remake(func, *from, None)?;
                    if let InstKind::Phi { entries } = &mut func.insts[i].kind {
                        entries[j].1 = t;
                    }
                }
            }
            continue;
        }
        let Some((b, _)) = places[i] else {
            continue;
        };
        let t = remake(func, b, Some(i))?;
        match &mut func.insts[i].kind {
            InstKind::Prim { args, .. } | InstKind::Invoke { args, .. } => {
                args.iter_mut().for_each(|a| swap(a, t));
            }
            InstKind::CallValue { callee, args } => {
                if *callee == r
                    && let Operand::Value(tv) = t
                {
                    *callee = tv;
                }
                args.iter_mut().for_each(|a| swap(a, t));
            }
            InstKind::Phi { .. } => {}
        }
    }
    if at_end {
        for b in func.layout.clone() {
            let reads = func.blocks[b]
                .term
                .as_ref()
                .and_then(Terminator::operand)
                .is_some_and(|op| *op == Operand::Value(r));
            if reads {
                let t = remake(func, b, None)?;
                if let Some(op) = func.blocks[b]
                    .term
                    .as_mut()
                    .and_then(Terminator::operand_mut)
                {
                    swap(op, t);
                }
            }
        }
    }
    Ok(())
}
