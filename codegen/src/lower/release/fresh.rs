//! Which array leaves of a function's result are *fresh*, and which calls
//! of such functions are sites that make arrays in their callers
//! (`lower/release.rs`, "Fresh results", has the rules and why they are
//! sound). Assumes verified functions (SSA dominance). Guarantees: a leaf
//! is said fresh only when, on every return, it holds an array made
//! during the call that no other reference survives but counted tape
//! references, and the callee never lets go of it; [`Summaries`] keeps
//! the greatest such set over the call graph.

use super::{BUDGET, PrimUse, Summaries, Use, Uses, prim_use};
use irad_ir::flow::DominatorTree;
use irad_ir::types::{Scalar, Type};
use irad_ir::{Block, Const, Func, Inst, InstKind, Operand, Prim, Terminator, Value, ValueDef};
use rustc_hash::FxHashMap as HashMap;
use rustc_hash::FxHashSet as HashSet;

/// What a summary says of one array leaf of a function's result.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(in crate::lower) enum Fresh {
    /// Not known to be fresh: the caller treats it as any call's result.
    No,
    /// Fresh; `pushed` when the callee (or a callee of it) may have pushed
    /// it on a tape, every such push counted (a tagged word).
    Made { pushed: bool },
}

/// Where an array sits in a value: the fields to take, outermost first
/// (empty: the value itself).
pub(in crate::lower) type Path = Vec<usize>;

/// A function's fresh summary: each array leaf of its result, by path,
/// with what is known of it.
pub(in crate::lower) type FreshLeaves = Vec<(Path, Fresh)>;

/// The array leaves of result type `ty`, by path: `[T]` has one (the
/// result itself, `[]`); a tuple one per field of type `[T]` (`[k]`) and
/// the leaves of each field that is a tuple, under its index (`[k, ..]`).
/// `None` when the type holds an array otherwise (a dual): no leaf is then
/// fresh, so that every leaf that can hold an array is one of these.
fn leaf_paths(ty: &Type) -> Option<Vec<Path>> {
    match ty {
        Type::Array(_) => Some(vec![Vec::new()]),
        Type::Tuple(elems) => {
            let mut out = Vec::new();
            for (k, e) in elems.iter().enumerate() {
                match e {
                    Type::Array(_) | Type::Tuple(_) => {
                        for p in leaf_paths(e)? {
                            out.push([k].into_iter().chain(p).collect());
                        }
                    }
                    e if e.holds_array() => return None,
                    _ => {}
                }
            }
            Some(out)
        }
        _ => None,
    }
}

/// The summary a greatest fixpoint starts from: every array leaf of
/// `func`'s result fresh and never pushed.
pub(super) fn top(func: &Func) -> FreshLeaves {
    leaf_paths(&func.ret)
        .unwrap_or_default()
        .into_iter()
        .map(|p| (p, Fresh::Made { pushed: false }))
        .collect()
}

/// The operands `func`'s reachable returns return.
fn returned(func: &Func, dom: &DominatorTree) -> Vec<Operand> {
    func.layout
        .iter()
        .filter(|&&b| dom.is_reachable(b))
        .filter_map(
            |&b| match func.blocks.get(b).and_then(|d| d.term.as_ref()) {
                Some(Terminator::Return(op)) => Some(*op),
                _ => None,
            },
        )
        .collect()
}

/// The fresh leaves of `func`, given the current summaries of its callees
/// (`lower/release.rs`, "Fresh results").
pub(super) fn fresh_leaves(func: &Func, summaries: &Summaries) -> FreshLeaves {
    let Some(leaves) = leaf_paths(&func.ret) else {
        return Vec::new();
    };
    let mut out: FreshLeaves = leaves.iter().map(|p| (p.clone(), Fresh::No)).collect();
    if leaves.is_empty() {
        return out;
    }
    let cfg = irad_ir::flow::ControlFlowGraph::with_function(func);
    let dom = DominatorTree::with_cfg(&cfg);
    let uses = Uses::of(func, &dom);
    let calls = Calls::of(func, &dom, &uses, summaries);
    let returned = returned(func, &dom);
    let mut budget = BUDGET;
    for (at, slot) in leaves.iter().zip(out.iter_mut()) {
        // What the leaf may hold over every return: only arrays made in
        // this call?
        let mut sources = Sources::default();
        for op in &returned {
            sources.add(func, (&dom, &calls, summaries), *op, at);
        }
        if sources.unknown || sources.origins.is_empty() {
            continue;
        }
        // Each of those reaches nothing that escapes but this leaf.
        let mut pushed = false;
        let mut fresh = true;
        for o in &sources.origins {
            let (start, path, callee_pushed) = match o {
                Origin::Made(v) => (*v, Vec::new(), None),
                Origin::Called(v, p) => (*v, Vec::new(), Some(*p)),
                Origin::Field(t, j, p) => (*t, j.clone(), Some(*p)),
            };
            let walk = Reach {
                func,
                uses: &uses,
                summaries,
                aliases: &calls.aliases,
                called: &calls.sites,
                leaf: at,
                // Only a statement's own array may be pushed here; a
                // call's may have been pushed by its callee (counted).
                maker: callee_pushed.is_none(),
            };
            match walk.returned(start, path, &mut budget) {
                Some(here) => pushed |= here || callee_pushed == Some(true),
                None => {
                    fresh = false;
                    break;
                }
            }
        }
        if fresh {
            slot.1 = Fresh::Made { pushed };
        }
    }
    out
}

/// What a summary says of one array leaf of a function's result that
/// holds, on every return, either an array made during the call or one
/// of its parameters as it was passed (`lower/release.rs`, "Either
/// results").
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(in crate::lower) struct Either {
    /// The parameter the leaf may hold.
    pub(in crate::lower) param: usize,
    /// Whether the function (or a callee of it) may have pushed an array
    /// it made and returns at the leaf, each such push counted (a tagged
    /// word).
    pub(in crate::lower) pushed: bool,
    /// Whether the function pushes the parameter as it is (an array of
    /// 8-byte elements): it then clears the bit of the word it is passed
    /// and counts each push of a tagged one, as for a pushed parameter.
    pub(in crate::lower) param_pushed: bool,
    /// Whether the leaf holds nothing but the parameter: the function
    /// hands back, on every return, the array it was passed there.
    pub(in crate::lower) only_param: bool,
}

/// For each array leaf of `func`'s result (by path, as fresh leaves are:
/// `[]` for a `[T]` result, `[k]` for field `k` of a tuple's, `[k, j]`
/// for field `j` of its field `k`, ...), whether that leaf holds on every
/// return either an array made during the call (as a fresh leaf would) or
/// one of its parameters as it was passed, that parameter reaching
/// nothing that escapes but the return at this leaf and pushes of itself
/// as it is (`lower/release.rs`, "Either results"); given the settled
/// summaries of its callees. Only the leaves that are, with their paths.
/// No parameter serves two leaves. A leaf that is fresh is not either (a
/// fresh call is a site of its own), nor is one that no parameter fits.
pub(super) fn either(func: &Func, summaries: &Summaries) -> Vec<(Path, Either)> {
    let mut out = Vec::new();
    let Some(leaves) = leaf_paths(&func.ret) else {
        return out;
    };
    if leaves.is_empty() {
        return out;
    }
    let cfg = irad_ir::flow::ControlFlowGraph::with_function(func);
    let dom = DominatorTree::with_cfg(&cfg);
    let uses = Uses::of(func, &dom);
    let calls = Calls::of(func, &dom, &uses, summaries);
    let returned = returned(func, &dom);
    let mut budget = BUDGET;
    let mut taken: Vec<usize> = Vec::new();
    for at in &leaves {
        let ty = at_path(&func.ret, at);
        for (j, &param) in func.params.iter().enumerate() {
            if taken.contains(&j) || func.values.get(param).map(|d| &d.ty) != ty {
                continue;
            }
            if let Some(e) = either_leaf(
                func,
                (&dom, &uses, &calls, summaries),
                (&returned, at),
                (j, param),
                &mut budget,
            ) {
                out.push((at.clone(), e));
                taken.push(j);
                break;
            }
        }
    }
    out
}

/// The type at `path` of a value of type `ty`.
fn at_path<'t>(ty: &'t Type, path: &[usize]) -> Option<&'t Type> {
    match path.split_first() {
        None => Some(ty),
        Some((&k, rest)) => match ty {
            Type::Tuple(elems) => at_path(elems.get(k)?, rest),
            _ => None,
        },
    }
}

/// Whether the leaf at `at` (a path, empty for a `[T]` result) of the
/// `returned` values holds parameter `j` (value `param`) or arrays
/// made during the call, and nothing else, with `param` and those arrays
/// reaching nothing that escapes but the return at this leaf (and pushes
/// as they are).
fn either_leaf(
    func: &Func,
    (dom, uses, calls, summaries): (&DominatorTree, &Uses, &Calls, &Summaries),
    (returned, at): (&[Operand], &[usize]),
    (j, param): (usize, Value),
    budget: &mut usize,
) -> Option<Either> {
    let mut sources = Sources {
        param: Some(param),
        ..Sources::default()
    };
    for op in returned {
        sources.add(func, (dom, calls, summaries), *op, at);
    }
    if sources.unknown || !sources.passed {
        return None;
    }
    let walk = |maker: bool| Reach {
        func,
        uses,
        summaries,
        aliases: &calls.aliases,
        called: &calls.sites,
        leaf: at,
        maker,
    };
    // The parameter is kept only by the return at this leaf and by pushes
    // of itself as it is (counted when its caller passes a tagged word,
    // which only 8-byte elements can carry, "Pushed parameters").
    let param_pushed = walk(true).returned(param, Vec::new(), budget)?;
    let even = matches!(
        func.values.get(param).map(|d| &d.ty),
        Some(Type::Array(Scalar::F64 | Scalar::I64))
    );
    if param_pushed && !even {
        return None;
    }
    let mut pushed = false;
    for o in &sources.origins {
        let (start, callee_pushed) = match *o {
            Origin::Made(v) => (v, None),
            Origin::Called(v, p) => (v, Some(p)),
            Origin::Field(..) => return None,
        };
        let here = walk(callee_pushed.is_none()).returned(start, Vec::new(), budget)?;
        pushed |= here || callee_pushed == Some(true);
    }
    Some(Either {
        param: j,
        pushed,
        param_pushed,
        only_param: sources.origins.is_empty(),
    })
}

/// The calls of fresh leaves in a function: each value that is a site
/// making arrays in it ("Fresh results"), with whether the callee may have
/// pushed its array (counted).
pub(super) struct Calls {
    pub(super) sites: HashMap<Value, bool>,
    /// For a `getfield` site, the later `getfield`s of the same field of
    /// the same call, which hold the same array: values the site reaches.
    pub(super) aliases: HashMap<Value, Vec<Value>>,
}

impl Calls {
    /// The sites of `func` that are calls of fresh leaves: `r = invoke
    /// @g(...)` of type `[T]` whose result is fresh; `g = getfield(t, k)`
    /// of a fresh field `k` where `t = invoke @g(...)` is in the same
    /// block, `t` is used only by `getfield`s, those of fields that can
    /// hold an array all there, and `g` is the first of field `k` (the
    /// others are its aliases); and a fresh leaf deeper down, taken by a
    /// chain of such `getfield`s in the block ([`leaf_fields`]).
    pub(super) fn of(
        func: &Func,
        dom: &DominatorTree,
        uses: &Uses,
        summaries: &Summaries,
    ) -> Calls {
        let mut sites = HashMap::default();
        let mut aliases = HashMap::default();
        for &b in &func.layout {
            if !dom.is_reachable(b) {
                continue;
            }
            for &inst in &func.blocks[b].insts {
                let data = &func.insts[inst];
                let (InstKind::Invoke { func: callee, .. }, Some(t)) = (&data.kind, data.result)
                else {
                    continue;
                };
                match func.values.get(t).map(|d| &d.ty) {
                    Some(Type::Array(_)) => {
                        if let Fresh::Made { pushed } = summaries.fresh(*callee, &[]) {
                            sites.insert(t, pushed);
                        }
                    }
                    Some(Type::Tuple(_)) => {
                        for (path, g, others) in leaf_fields(func, uses, (t, b)) {
                            if let Fresh::Made { pushed } = summaries.fresh(*callee, &path) {
                                sites.insert(g, pushed);
                                if !others.is_empty() {
                                    aliases.insert(g, others);
                                }
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        Calls { sites, aliases }
    }
}

/// The array leaves of tuple `t` (made in block `b`) taken by chains of
/// `getfield`s in `b` ([`fields`] at each level): each leaf's path, its
/// first `getfield` and the others of the same leaf. A tuple field taken
/// more than once is not followed (its leaves would have aliases of
/// their own).
pub(super) fn leaf_fields(
    func: &Func,
    uses: &Uses,
    (t, b): (Value, Block),
) -> Vec<(Path, Value, Vec<Value>)> {
    let mut out = Vec::new();
    let mut work: Vec<(Value, Path)> = vec![(t, Vec::new())];
    while let Some((t, prefix)) = work.pop() {
        for (k, g, others) in fields(func, uses, (t, b)) {
            let path: Path = prefix.iter().copied().chain([k]).collect();
            match func.values.get(g).map(|d| &d.ty) {
                Some(Type::Array(_)) => out.push((path, g, others)),
                Some(ty @ Type::Tuple(_)) if ty.holds_array() && others.is_empty() => {
                    work.push((g, path));
                }
                _ => {}
            }
        }
    }
    out
}

/// The fields of tuple `t` (made in block `b`) taken by `getfield`s, when
/// every use of `t` is a `getfield` of a constant field, and those whose
/// result can hold an array are in block `b`: each field with its first
/// `getfield` (in statement order) and the others of the same field, which
/// hold the same array (a source's `t.0[0] + t.0[1]` takes the field
/// twice). A `getfield` of a field that holds no array, in another block,
/// holds no reference to one: left out.
pub(super) fn fields(
    func: &Func,
    uses: &Uses,
    (t, b): (Value, Block),
) -> Vec<(usize, Value, Vec<Value>)> {
    let mut out: Vec<(usize, Value, Vec<Value>)> = Vec::new();
    // The uses of a value are listed in layout order, so in statement
    // order within `b`.
    for u in uses.by_value.get(&t).map_or(&[][..], Vec::as_slice) {
        let Use::Inst(i, at) = *u else {
            return Vec::new();
        };
        let Some((g, k)) = getfield(func, i) else {
            return Vec::new();
        };
        if at != b {
            if func.values.get(g).is_some_and(|d| !d.ty.holds_array()) {
                continue;
            }
            return Vec::new();
        }
        match out.iter_mut().find(|(j, _, _)| *j == k) {
            Some((_, _, others)) => others.push(g),
            None => out.push((k, g, Vec::new())),
        }
    }
    out
}

/// Statement `i` as `g = getfield(t, k)`: its result and field.
fn getfield(func: &Func, i: Inst) -> Option<(Value, usize)> {
    let data = func.insts.get(i)?;
    let InstKind::Prim {
        prim: Prim::Getfield,
        args,
    } = &data.kind
    else {
        return None;
    };
    let Some(Operand::Const(Const::I64(k))) = args.get(1) else {
        return None;
    };
    Some((data.result?, usize::try_from(*k).ok()?))
}

/// An array made during a call, as [`Sources`] finds it.
#[derive(Clone, PartialEq, Eq, Debug)]
enum Origin {
    /// The value of a statement that makes arrays.
    Made(Value),
    /// A call's fresh array: a site of [`Calls`], with whether its callee
    /// may have pushed it.
    Called(Value, bool),
    /// The leaf at a path of the tuple a call returned, fresh, with
    /// whether its callee may have pushed it.
    Field(Value, Path, bool),
}

/// What one leaf of the returned values may hold: the arrays made during
/// the call it is copied from by the rules of `lower/release.rs` (sites
/// that make arrays, calls of fresh leaves), and whether it may hold
/// anything else.
#[derive(Default)]
struct Sources {
    seen: HashSet<(Value, Path)>,
    origins: Vec<Origin>,
    unknown: bool,
    /// A parameter the leaf may hold as it was passed ([`either`]): met,
    /// it sets `passed` rather than `unknown`.
    param: Option<Value>,
    passed: bool,
}

impl Sources {
    /// Adds what the leaf at `path` of `op` (empty: the whole value, an
    /// array) may hold.
    fn add(
        &mut self,
        func: &Func,
        (dom, calls, summaries): (&DominatorTree, &Calls, &Summaries),
        op: Operand,
        path: &[usize],
    ) {
        let mut work: Vec<(Operand, Path)> = vec![(op, path.to_vec())];
        while let Some((op, path)) = work.pop() {
            let Operand::Value(v) = op else {
                self.unknown = true;
                continue;
            };
            if !self.seen.insert((v, path.clone())) {
                continue;
            }
            if path.is_empty() && self.param == Some(v) {
                self.passed = true;
                continue;
            }
            let origin = match (path.is_empty(), calls.sites.get(&v)) {
                (true, Some(&pushed)) => Some(Origin::Called(v, pushed)),
                (true, None) if makes(func, v) => Some(Origin::Made(v)),
                _ => None,
            };
            if let Some(o) = origin {
                if !self.origins.contains(&o) {
                    self.origins.push(o);
                }
                continue;
            }
            let inst = match func.values.get(v).map(|d| &d.def) {
                Some(ValueDef::Inst(i)) => *i,
                _ => {
                    self.unknown = true;
                    continue;
                }
            };
            match &func.insts[inst].kind {
                InstKind::Phi { entries } => work.extend(
                    entries
                        .iter()
                        .filter(|(b, _)| dom.is_reachable(*b))
                        .map(|(_, op)| (*op, path.clone())),
                ),
                InstKind::Prim {
                    prim: Prim::Select,
                    args,
                } if args.len() == 3 => {
                    work.extend([(args[1], path.clone()), (args[2], path.clone())]);
                }
                InstKind::Prim {
                    prim: Prim::Tuple,
                    args,
                } if path.first().is_some_and(|&j| j < args.len()) => {
                    work.push((args[path[0]], path[1..].to_vec()));
                }
                InstKind::Prim {
                    prim: Prim::Getfield,
                    args,
                } => match (getfield(func, inst), args.first()) {
                    (Some((_, j)), Some(t)) => {
                        work.push((*t, [j].into_iter().chain(path).collect()));
                    }
                    _ => self.unknown = true,
                },
                InstKind::Invoke { func: callee, .. } if !path.is_empty() => {
                    match summaries.fresh(*callee, &path) {
                        Fresh::Made { pushed } => {
                            let o = Origin::Field(v, path, pushed);
                            if !self.origins.contains(&o) {
                                self.origins.push(o);
                            }
                        }
                        Fresh::No => self.unknown = true,
                    }
                }
                _ => self.unknown = true,
            }
        }
    }
}

/// Whether `v` is made by a statement that makes a new array of the run's
/// arena: `alloc`, `zeros`, `copy`, `sdense`.
pub(super) fn makes(func: &Func, v: Value) -> bool {
    matches!(
        func.def_kind(v),
        Some(InstKind::Prim {
            prim: Prim::Alloc | Prim::Zeros | Prim::Copy | Prim::Sdense,
            ..
        })
    )
}

/// The search of where an array made during a call may go, over one
/// function: by which values, at which field of each (a path of field
/// indices, empty for the array itself).
struct Reach<'a> {
    func: &'a Func,
    uses: &'a Uses,
    summaries: &'a Summaries,
    /// [`Calls::aliases`]: a site's aliases hold its array too.
    aliases: &'a HashMap<Value, Vec<Value>>,
    /// [`Calls::sites`]: a push of one as it is is counted
    /// (`counted_pushes`, "Fresh results pushed on").
    called: &'a HashMap<Value, bool>,
    /// Where a returned value may hold the array: `[]` for a `[T]` result,
    /// `[k]` for field `k` of a tuple's.
    leaf: &'a [usize],
    /// Whether the array is a statement's own, which may be pushed as it
    /// is (such a push is tagged in every compiled function of a module
    /// whose tapes are counted, `counted_pushes`).
    maker: bool,
}

impl Reach<'_> {
    /// Whether the array held by `start` at `path` reaches nothing that
    /// escapes but returns at the leaf: every value holding it, followed
    /// by `tuple`, `getfield` (of its field only), `select` and every phi,
    /// is only read, pushed as it is (`start` itself, a statement's array),
    /// passed to a parameter its callee does not keep, or returned with
    /// the array at `self.leaf`. `Some(pushed)` if so, else `None`.
    fn returned(&self, start: Value, path: Vec<usize>, budget: &mut usize) -> Option<bool> {
        let func = self.func;
        let mut seen: HashSet<(Value, Vec<usize>)> = HashSet::default();
        let mut work = vec![(start, path)];
        for &g in self.aliases.get(&start).into_iter().flatten() {
            work.push((g, Vec::new()));
        }
        let mut pushed = false;
        seen.extend(work.iter().cloned());
        while let Some((v, path)) = work.pop() {
            for &u in self.uses.by_value.get(&v).map_or(&[][..], Vec::as_slice) {
                *budget = budget.checked_sub(1)?;
                let inst = match u {
                    // Returned: only at the leaf (a condition or an index
                    // cannot hold an array).
                    Use::Term(_) if path == self.leaf => continue,
                    Use::Term(_) => return None,
                    Use::Inst(i, _) => i,
                };
                let data = func.insts.get(inst)?;
                let mut next: Vec<Vec<usize>> = Vec::new();
                match &data.kind {
                    InstKind::Prim { prim, args } => match (prim_use(*prim), prim) {
                        (PrimUse::Keeps, _) => {}
                        (PrimUse::Pushes, _)
                            if path.is_empty()
                                && ((v == start && self.maker) || self.called.contains_key(&v)) =>
                        {
                            pushed = true;
                        }
                        (PrimUse::Propagates, Prim::Tuple) => {
                            for (m, op) in args.iter().enumerate() {
                                if *op == Operand::Value(v) {
                                    next.push(
                                        [m].into_iter().chain(path.iter().copied()).collect(),
                                    );
                                }
                            }
                        }
                        (PrimUse::Propagates, Prim::Getfield) => {
                            let (_, k) = getfield(func, inst)?;
                            if path.first() == Some(&k) {
                                next.push(path[1..].to_vec());
                            }
                        }
                        (PrimUse::Propagates, Prim::Select) => next.push(path.clone()),
                        _ => return None,
                    },
                    InstKind::Phi { .. } => next.push(path.clone()),
                    InstKind::Invoke { func: callee, args } => {
                        if args.iter().enumerate().any(|(k, op)| {
                            *op == Operand::Value(v) && self.summaries.keeps(*callee, k)
                        }) {
                            return None;
                        }
                    }
                    InstKind::CallValue { .. } => return None,
                }
                if let Some(r) = data.result {
                    for p in next {
                        if seen.insert((r, p.clone())) {
                            work.push((r, p));
                        }
                    }
                }
            }
        }
        Some(pushed)
    }
}
