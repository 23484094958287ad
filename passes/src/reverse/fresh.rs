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
//! is registered or declared for it, [`CallFacts::learn`]'s `by_rule`), so
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

pub(crate) use super::fresh_fields::Fresh;
use super::fresh_fields::{
    FieldPath, ParamPart, array_fields, kept_ends, returns_fresh_field, tuple_calls,
};
use irad_ir::{FuncId, InstKind, Module, Operand, Prim, Terminator, Type, Value, ValueDef};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// What reverse mode knows of the functions primals call, kept across the
/// derivations of one [`super::Reverse`]: whether each returns a fresh
/// array, which parameter it returns as it is, and what a call of it is
/// taken to record per element (`checkpoint/sized.rs`, `call_cost`). Each
/// fact of a function depends only on the functions it may call, which no
/// derivation changes (reverse mode adds pieces, never rewrites a primal),
/// so a fact once decided stays; each function is analysed once, and the
/// work goes by explicit stacks, so a chain of calls of any depth costs its
/// length.
#[derive(Clone, Debug, Default)]
pub(super) struct CallFacts {
    fresh: HashMap<FuncId, bool>,
    through: HashMap<FuncId, Option<usize>>,
    either: HashMap<FuncId, Option<usize>>,
    elements: HashMap<FuncId, u64>,
    fields: HashMap<(FuncId, FieldPath), bool>,
    kept: HashMap<(FuncId, FieldPath), Option<ParamPart>>,
}

/// The facts about the functions one primal invokes (directly), as
/// [`CallFacts::learn`] gives them.
#[derive(Clone, Debug, Default)]
pub(super) struct Known {
    /// Those that return a fresh array, and the fresh fields of those
    /// returning tuples (`fresh_fields.rs`).
    pub fresh: Fresh,
    /// Those that return one of their parameters, with its index.
    pub passthrough: HashMap<FuncId, usize>,
    /// Those, neither of the above, that return on every return either a
    /// fresh array or one of their parameters, the same one, with its
    /// index (`either_way(a)`: `a` on some paths, a copy on others).
    pub either: HashMap<FuncId, usize>,
    /// Those whose calls count more than nothing per element, with it.
    pub elements: HashMap<FuncId, u64>,
    /// The kept fields of those returning tuples: by function and path of
    /// the result, the parameter (and the path in it) that every return
    /// gives there as it is (`fresh_fields.rs`, [`kept_ends`]).
    pub kept_fields: HashMap<(FuncId, FieldPath), ParamPart>,
}

impl CallFacts {
    /// Decides the facts of every function `src` may call (leaving out, as
    /// neither fresh nor passing through and counting nothing, those
    /// `by_rule` says are differentiated by a rule) and returns those of
    /// its direct callees.
    pub fn learn(
        &mut self,
        module: &Module,
        src: &irad_ir::Func,
        by_rule: impl Fn(FuncId) -> bool,
    ) -> Known {
        self.learn_fresh(module, src, &by_rule);
        self.learn_through(module, src, &by_rule);
        self.learn_either(module, src, &by_rule);
        self.learn_elements(module, src, &by_rule);
        self.learn_fields(module, src, &by_rule);
        self.learn_kept(module, src, &by_rule);
        let mut known = Known::default();
        for d in src.insts.values() {
            let InstKind::Invoke { func, .. } = &d.kind else {
                continue;
            };
            if self.fresh.get(func) == Some(&true) {
                known.fresh.funcs.insert(*func);
            }
            for k in module.get(*func).map(array_fields).unwrap_or_default() {
                let key = (*func, k);
                if let Some(Some(part)) = self.kept.get(&key) {
                    known.kept_fields.insert(key.clone(), part.clone());
                }
                if self.fields.get(&key) == Some(&true) {
                    known.fresh.fields.insert(key);
                }
            }
            if let Some(&Some(j)) = self.through.get(func) {
                known.passthrough.insert(*func, j);
            } else if let Some(&Some(j)) = self.either.get(func)
                && self.fresh.get(func) != Some(&true)
            {
                known.either.insert(*func, j);
            }
            if let Some(&c @ 1..) = self.elements.get(func) {
                known.elements.insert(*func, c);
            }
        }
        known
    }

    /// Which functions `src` may call for an array return a fresh array
    /// (the module's header): the greatest fixpoint over those not yet
    /// decided, the decided ones taken as they are. The functions
    /// reachable by calls for an array from an undecided one are decided
    /// or among them, so the fixpoint is the one over the whole module.
    fn learn_fresh(
        &mut self,
        module: &Module,
        src: &irad_ir::Func,
        by_rule: &impl Fn(FuncId) -> bool,
    ) {
        let mut open: HashSet<FuncId> = HashSet::default();
        let mut work: Vec<FuncId> = array_calls(src).collect();
        while let Some(id) = work.pop() {
            if self.fresh.contains_key(&id) || open.contains(&id) {
                continue;
            }
            match module.get(id) {
                Some(f) if matches!(f.ret, Type::Array(_)) && !by_rule(id) => {
                    open.insert(id);
                    work.extend(array_calls(f));
                }
                _ => {
                    self.fresh.insert(id, false);
                }
            }
        }
        let candidates: Vec<FuncId> = open.iter().copied().collect();
        loop {
            let before = open.len();
            let snapshot = open.clone();
            let decided = &self.fresh;
            let fresh = |h: FuncId| snapshot.contains(&h) || decided.get(&h) == Some(&true);
            open.retain(|&id| module.get(id).is_some_and(|f| returns_fresh(f, &fresh)));
            if open.len() == before {
                break;
            }
        }
        for id in candidates {
            self.fresh.insert(id, open.contains(&id));
        }
    }

    /// Which functions `src` may call for an array return one of their
    /// array parameters as it is on every return, and which: through phis
    /// and `select`, from that parameter, or from a call of another such
    /// function passed it there. A loop replacing its array by such a
    /// call's result (`a = update(a)`, the function writing it in place)
    /// keeps the array, and the shadow the callee's forward sweep returns
    /// is the one it was given. Each undecided function is assumed to
    /// return the parameter its first return gives; the greatest fixpoint
    /// over them, sound by the same induction as freshness.
    fn learn_through(
        &mut self,
        module: &Module,
        src: &irad_ir::Func,
        by_rule: &impl Fn(FuncId) -> bool,
    ) {
        let settled = param_fixpoint(
            (module, src, &self.through),
            |id, f| match first_param(module, f, 0) {
                Some(j) if matches!(f.ret, Type::Array(_)) && !by_rule(id) => Some(j),
                _ => None,
            },
            |f, j, param| returns_param(f, j, &|h| param(h)),
        );
        self.through.extend(settled);
    }

    /// Which functions `src` may call for an array return, on every
    /// return, either a fresh array or one of their array parameters as it
    /// is, the same one on every return, and which: through phis,
    /// `select` and `getfield` of a `tuple`, from an array-making
    /// statement, that parameter, a call of a fresh function, or a call of
    /// a function passing through (or so returning) its parameter passed
    /// that one. The shadow the callee's forward sweep returns is then a
    /// new zero array or the one it was given, as the array is. Each
    /// undecided function is assumed to do so for the first of its array
    /// parameters that one of its returns traces to; the greatest fixpoint,
    /// sound by the same induction as freshness (run after `learn_fresh`
    /// and `learn_through`, whose facts it takes as they are).
    fn learn_either(
        &mut self,
        module: &Module,
        src: &irad_ir::Func,
        by_rule: &impl Fn(FuncId) -> bool,
    ) {
        let (fresh, through) = (&self.fresh, &self.through);
        let settled = param_fixpoint(
            (module, src, &self.either),
            |id, f| {
                let j = (0..f.params.len()).find(|&j| {
                    matches!(f.values[f.params[j]].ty, Type::Array(_)) && reaches_param(f, j)
                });
                j.filter(|_| matches!(f.ret, Type::Array(_)) && !by_rule(id))
            },
            |f, j, param| {
                let facts = |h: FuncId| Facts {
                    fresh: fresh.get(&h) == Some(&true),
                    param: through.get(&h).copied().flatten().or_else(|| param(h)),
                };
                returns_either(f, j, &facts)
            },
        );
        self.either.extend(settled);
    }

    /// Which array fields of the tuple results of the functions `src` may
    /// call for a tuple (at any depth, through calls for a tuple) are fresh
    /// (`fresh_fields.rs`): the greatest fixpoint over those not yet
    /// decided, the arrays those functions call for learnt first.
    fn learn_fields(
        &mut self,
        module: &Module,
        src: &irad_ir::Func,
        by_rule: &impl Fn(FuncId) -> bool,
    ) {
        let mut open: HashSet<(FuncId, FieldPath)> = HashSet::default();
        let fields = &self.fields;
        for (id, f, paths) in undecided_fields(module, src, |key| fields.contains_key(key)) {
            self.learn_fresh(module, f, by_rule);
            for k in paths {
                if by_rule(id) {
                    self.fields.insert((id, k), false);
                } else {
                    open.insert((id, k));
                }
            }
        }
        let candidates: Vec<(FuncId, FieldPath)> = open.iter().cloned().collect();
        loop {
            let before = open.len();
            let snapshot = open.clone();
            let (decided, whole) = (&self.fields, &self.fresh);
            let whole = |h: FuncId| whole.get(&h) == Some(&true);
            let field = |h: FuncId, k: &[u32]| {
                let key = (h, k.to_vec());
                snapshot.contains(&key) || decided.get(&key) == Some(&true)
            };
            open.retain(|(id, k)| {
                module
                    .get(*id)
                    .is_some_and(|f| returns_fresh_field(f, k, (&whole, &field)))
            });
            if open.len() == before {
                break;
            }
        }
        for c in candidates {
            let fresh = open.contains(&c);
            self.fields.insert(c, fresh);
        }
    }

    /// Which array fields of the tuple results of the functions `src` may
    /// call for a tuple (at any depth) are kept fields, and where from
    /// (`fresh_fields.rs`, [`kept_ends`]): each undecided one is assumed
    /// to give the one parameter part its returns reach when undecided
    /// callees are left out (none, or several: it is not kept); the
    /// greatest fixpoint over those assumptions, the parameters functions
    /// returning an array pass through learnt first. Sound by the same
    /// induction as freshness: the deepest call of a finite run returns
    /// its parameter's part as it is, and every other what a deeper one
    /// returned so.
    fn learn_kept(
        &mut self,
        module: &Module,
        src: &irad_ir::Func,
        by_rule: &impl Fn(FuncId) -> bool,
    ) {
        let mut open: HashMap<(FuncId, FieldPath), ParamPart> = HashMap::default();
        let mut undecided: Vec<(FuncId, FieldPath)> = Vec::new();
        let kept = &self.kept;
        for (id, f, paths) in undecided_fields(module, src, |key| kept.contains_key(key)) {
            self.learn_through(module, f, by_rule);
            for k in paths {
                if by_rule(id) {
                    self.kept.insert((id, k), None);
                } else {
                    undecided.push((id, k));
                }
            }
        }
        // The candidates: what each reaches with the undecided callees
        // without one left out, in rounds until no more are found (a
        // caller's candidate may need its callee's).
        let pending: HashSet<(FuncId, FieldPath)> = undecided.iter().cloned().collect();
        loop {
            let mut found = Vec::new();
            for key in undecided.iter().filter(|k| !open.contains_key(*k)) {
                let callee = |h: FuncId, p: &[u32]| self.kept_callee(h, p, &pending, &open, true);
                let ends = module
                    .get(key.0)
                    .and_then(|f| kept_ends(f, &key.1, &callee));
                if let Some(ends) = ends
                    && ends.len() == 1
                    && let Some(end) = ends.into_iter().next()
                {
                    found.push((key.clone(), end));
                }
            }
            if found.is_empty() {
                break;
            }
            open.extend(found);
        }
        loop {
            let before = open.len();
            let snapshot = open.clone();
            open.retain(|(id, k), end| {
                let callee =
                    |h: FuncId, p: &[u32]| self.kept_callee(h, p, &pending, &snapshot, false);
                module
                    .get(*id)
                    .and_then(|f| kept_ends(f, k, &callee))
                    .is_some_and(|ends| ends.len() == 1 && ends.contains(end))
            });
            if open.len() == before {
                break;
            }
        }
        for key in undecided {
            let end = open.get(&key).cloned();
            self.kept.insert(key, end);
        }
    }

    /// What [`kept_ends`] takes a call of `h` to give at path `p` of its
    /// result: the parameter it passes through for an array result (the
    /// empty path), a decided kept field, or one still `pending` as
    /// `assumed`; a pending one not assumed stops the trace when `skip`
    /// (while candidates are sought) and fails it otherwise.
    fn kept_callee(
        &self,
        h: FuncId,
        p: &[u32],
        pending: &HashSet<(FuncId, FieldPath)>,
        assumed: &HashMap<(FuncId, FieldPath), ParamPart>,
        skip: bool,
    ) -> Option<Option<ParamPart>> {
        if p.is_empty() {
            return self
                .through
                .get(&h)
                .copied()
                .flatten()
                .map(|j| Some((j, Vec::new())));
        }
        let key = (h, p.to_vec());
        if let Some(decided) = self.kept.get(&key) {
            return decided.clone().map(Some);
        }
        match assumed.get(&key) {
            _ if !pending.contains(&key) => None,
            Some(end) => Some(Some(end.clone())),
            None => skip.then_some(None),
        }
    }

    /// What a call of each function `src` may call counts per element
    /// (`call_cost`), callees first by an explicit post-order; a function
    /// on a cycle of calls counts its callees on the cycle as 0.
    fn learn_elements(
        &mut self,
        module: &Module,
        src: &irad_ir::Func,
        by_rule: &impl Fn(FuncId) -> bool,
    ) {
        enum Step {
            Enter(FuncId),
            Leave(FuncId),
        }
        let mut on_path: HashSet<FuncId> = HashSet::default();
        let mut work: Vec<Step> = calls(src).map(Step::Enter).collect();
        while let Some(step) = work.pop() {
            match step {
                Step::Enter(id) => {
                    if self.elements.contains_key(&id) || on_path.contains(&id) {
                        continue;
                    }
                    match module.get(id) {
                        Some(f) if !by_rule(id) => {
                            on_path.insert(id);
                            work.push(Step::Leave(id));
                            work.extend(calls(f).map(Step::Enter));
                        }
                        _ => {
                            self.elements.insert(id, 0);
                        }
                    }
                }
                Step::Leave(id) => {
                    on_path.remove(&id);
                    let Some(f) = module.get(id) else { continue };
                    let elements = &self.elements;
                    let c = crate::reverse::checkpoint::sized::call_cost(f, |h| {
                        elements.get(&h).copied().unwrap_or(0)
                    });
                    self.elements.insert(id, c);
                }
            }
        }
    }
}

/// The functions `src` may call for a tuple (at any depth, through calls
/// for a tuple) with array fields `decided` does not hold, each with those
/// fields' paths; a function whose fields are all decided is not looked
/// into (its callees' facts were decided with its own).
fn undecided_fields<'m>(
    module: &'m Module,
    src: &irad_ir::Func,
    decided: impl Fn(&(FuncId, FieldPath)) -> bool,
) -> Vec<(FuncId, &'m irad_ir::Func, Vec<FieldPath>)> {
    let mut out = Vec::new();
    let mut seen: HashSet<FuncId> = HashSet::default();
    let mut work: Vec<FuncId> = tuple_calls(src).collect();
    while let Some(id) = work.pop() {
        if !seen.insert(id) {
            continue;
        }
        let Some(f) = module.get(id) else { continue };
        let paths: Vec<FieldPath> = array_fields(f)
            .into_iter()
            .filter(|k| !decided(&(id, k.clone())))
            .collect();
        if !paths.is_empty() {
            work.extend(tuple_calls(f));
            out.push((id, f, paths));
        }
    }
    out
}

/// The callees of `f`'s calls.
fn calls(f: &irad_ir::Func) -> impl Iterator<Item = FuncId> + '_ {
    f.insts.values().filter_map(|d| match &d.kind {
        InstKind::Invoke { func, .. } => Some(*func),
        _ => None,
    })
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

/// The parameter of `f` its first return gives, through phis' first
/// entries, `select`'s first choice and calls (to a depth of 8), if it is
/// one.
fn first_param(module: &Module, f: &irad_ir::Func, depth: u32) -> Option<usize> {
    let mut op = *returned(f).first()?;
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

/// The operands of `f`'s returns.
pub(super) fn returned(f: &irad_ir::Func) -> Vec<Operand> {
    f.layout
        .iter()
        .filter_map(|&b| match &f.blocks[b].term {
            Some(Terminator::Return(op)) => Some(*op),
            _ => None,
        })
        .collect()
}

/// Whether every return of `f` traces back to ends: a value `end` accepts
/// ends its trace; any other must be a statement's result, and `next` gives
/// the operands its trace goes on with (none: it ends well; `None`: the
/// trace fails, and so does the whole).
fn traces(
    f: &irad_ir::Func,
    end: impl Fn(Value) -> bool,
    next: impl Fn(&InstKind) -> Option<Vec<Operand>>,
) -> bool {
    let mut work = returned(f);
    if work.is_empty() {
        return false;
    }
    let mut seen: HashSet<Value> = HashSet::default();
    while let Some(op) = work.pop() {
        let Operand::Value(v) = op else { return false };
        if end(v) || !seen.insert(v) {
            continue;
        }
        let ValueDef::Inst(d) = f.values[v].def else {
            return false;
        };
        match next(&f.insts[d].kind) {
            Some(ops) => work.extend(ops),
            None => return false,
        }
    }
    true
}

/// The operands a phi or `select` may give.
fn choices(kind: &InstKind) -> Option<Vec<Operand>> {
    match kind {
        InstKind::Prim {
            prim: Prim::Select,
            args,
        } if args.len() == 3 => Some(vec![args[1], args[2]]),
        InstKind::Phi { entries } => Some(entries.iter().map(|&(_, op)| op).collect()),
        _ => None,
    }
}

/// Whether every return of `f` gives its parameter `j` as it is, the
/// functions of `through` taken as returning theirs.
fn returns_param(f: &irad_ir::Func, j: usize, through: &impl Fn(FuncId) -> Option<usize>) -> bool {
    let Some(&param) = f.params.get(j) else {
        return false;
    };
    traces(
        f,
        |v| v == param,
        |kind| match kind {
            InstKind::Invoke { func, args } => Some(vec![*args.get(through(*func)?)?]),
            kind => choices(kind),
        },
    )
}

/// Whether every return of `f` gives an array made in the call, the
/// functions of `fresh` taken as returning fresh arrays.
fn returns_fresh(f: &irad_ir::Func, fresh: &impl Fn(FuncId) -> bool) -> bool {
    traces(
        f,
        |_| false,
        |kind| match kind {
            InstKind::Prim {
                prim: Prim::Copy | Prim::Zeros | Prim::Alloc,
                ..
            } => Some(vec![]),
            InstKind::Prim {
                prim: Prim::Getfield,
                args,
            } => Some(vec![field_of_tuple(f, args)?]),
            InstKind::Invoke { func, .. } if fresh(*func) => Some(vec![]),
            kind => choices(kind),
        },
    )
}

/// A greatest fixpoint of facts "returns parameter `j`" (in a sense
/// `holds` checks) over the functions `src` may call for an array that
/// `decided` does not hold yet: each is assumed to hold for the parameter
/// `candidate` gives (none: it does not), `holds` is checked against the
/// assumptions (and `decided`) until none is dropped. Returns the new facts.
fn param_fixpoint(
    (module, src, decided): (&Module, &irad_ir::Func, &HashMap<FuncId, Option<usize>>),
    candidate: impl Fn(FuncId, &irad_ir::Func) -> Option<usize>,
    holds: impl Fn(&irad_ir::Func, usize, &dyn Fn(FuncId) -> Option<usize>) -> bool,
) -> HashMap<FuncId, Option<usize>> {
    let mut open: HashMap<FuncId, usize> = HashMap::default();
    let mut out: HashMap<FuncId, Option<usize>> = HashMap::default();
    let mut work: Vec<FuncId> = array_calls(src).collect();
    let mut seen: HashSet<FuncId> = HashSet::default();
    while let Some(id) = work.pop() {
        if decided.contains_key(&id) || !seen.insert(id) {
            continue;
        }
        let Some(f) = module.get(id) else { continue };
        work.extend(array_calls(f));
        match candidate(id, f) {
            Some(j) => {
                open.insert(id, j);
            }
            None => {
                out.insert(id, None);
            }
        }
    }
    loop {
        let before = open.len();
        let snapshot = open.clone();
        let param = |h: FuncId| match snapshot.get(&h) {
            Some(&j) => Some(j),
            None => decided.get(&h).copied().flatten(),
        };
        open.retain(|&id, &mut j| module.get(id).is_some_and(|f| holds(f, j, &param)));
        if open.len() == before {
            break;
        }
    }
    for id in seen {
        out.entry(id).or_insert_with(|| open.get(&id).copied());
    }
    out
}

/// What [`returns_either`] takes a callee to return: a fresh array, or
/// (else) its parameter `param` or a fresh array.
struct Facts {
    fresh: bool,
    param: Option<usize>,
}

/// Whether some return of `f` traces, through phis, `select` and the
/// arguments of calls, to its parameter `j` (the candidate that
/// [`returns_either`] then checks).
fn reaches_param(f: &irad_ir::Func, j: usize) -> bool {
    let Some(&param) = f.params.get(j) else {
        return false;
    };
    let mut work = returned(f);
    let mut seen: HashSet<Value> = HashSet::default();
    while let Some(op) = work.pop() {
        let Operand::Value(v) = op else { continue };
        if v == param {
            return true;
        }
        if !seen.insert(v) {
            continue;
        }
        if let ValueDef::Inst(d) = f.values[v].def {
            match &f.insts[d].kind {
                InstKind::Invoke { args, .. } => work.extend(args.iter().copied()),
                kind => work.extend(choices(kind).unwrap_or_default()),
            }
        }
    }
    false
}

/// Whether every return of `f` gives either an array made in the call or
/// its parameter `j` as it is, callees taken as `facts` says.
fn returns_either(f: &irad_ir::Func, j: usize, facts: &impl Fn(FuncId) -> Facts) -> bool {
    let Some(&param) = f.params.get(j) else {
        return false;
    };
    traces(
        f,
        |v| v == param,
        |kind| match kind {
            InstKind::Prim {
                prim: Prim::Copy | Prim::Zeros | Prim::Alloc,
                ..
            } => Some(vec![]),
            InstKind::Prim {
                prim: Prim::Getfield,
                args,
            } => Some(vec![field_of_tuple(f, args)?]),
            InstKind::Invoke { func, args } => {
                let h = facts(*func);
                match (h.fresh, h.param) {
                    (true, _) => Some(vec![]),
                    (false, Some(k)) => Some(vec![*args.get(k)?]),
                    (false, None) => None,
                }
            }
            kind => choices(kind),
        },
    )
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

func @some_through(%a: [f64], %c: bool) -> [f64] {
#1:
  gotoifnot %c, #3
#2:
  %s = invoke @same(%a) :: [f64]
  goto #4
#3:
  %m = invoke @made(%a) :: [f64]
  goto #4
#4:
  %r = phi [#2 => %s, #3 => %m] :: [f64]
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

    /// A function calling every function of `m` (its statements are not
    /// placed in blocks: the facts read only the calls).
    fn calling_all(m: &Module) -> irad_ir::Func {
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
        all
    }

    #[test]
    fn arrays_made_in_the_call_are_fresh_and_arguments_are_not() {
        let m = parse_module(TEXT).expect("test IR parses");
        let all = calling_all(&m);
        let names = |by_rule: &dyn Fn(FuncId) -> bool| {
            let mut facts = CallFacts::default();
            let mut names: Vec<String> = facts
                .learn(&m, &all, by_rule)
                .fresh
                .funcs
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
        let mut through: Vec<(String, usize)> = CallFacts::default()
            .learn(&m, &all, |_| false)
            .passthrough
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
        // A copy or the argument: `either` by a select, `some_through` by
        // calls of `same` and `made`; not `swap` (two parameters), nor the
        // fresh and passing-through ones, nor `some_through` when `made`
        // has a rule.
        let either = |by_rule: &dyn Fn(FuncId) -> bool| {
            let mut e: Vec<(String, usize)> = CallFacts::default()
                .learn(&m, &all, by_rule)
                .either
                .into_iter()
                .map(|(id, j)| (m[id].name.clone(), j))
                .collect();
            e.sort();
            e
        };
        assert_eq!(
            either(&|_| false),
            [("either".into(), 0), ("some_through".into(), 0)]
        );
        assert_eq!(either(&|f| f == made), [("either".into(), 0)]);
    }

    const FIELDS: &str = "func @pair(%a: [f64], %b: [f64]) -> ([f64], [f64]) {
#1:
  %c = call copy(%a) :: [f64]
  %d = call copy(%b) :: [f64]
  %t = call tuple(%c, %d) :: ([f64], [f64])
  return %t
}

func @twice(%a: [f64]) -> ([f64], [f64]) {
#1:
  %c = call copy(%a) :: [f64]
  %t = call tuple(%c, %c) :: ([f64], [f64])
  return %t
}

func @keep(%a: [f64]) -> [f64] {
#1:
  return %a
}

func @kept(%a: [f64]) -> ([f64], [f64]) {
#1:
  %c = call copy(%a) :: [f64]
  %k = invoke @keep(%c) :: [f64]
  %t = call tuple(%c, %k) :: ([f64], [f64])
  return %t
}

func @mixed(%a: [f64], %x: f64) -> ([f64], f64, [f64]) {
#1:
  %c = call copy(%a) :: [f64]
  %y = call arrayref(%c, 0) :: f64
  %t = call tuple(%a, %y, %c) :: ([f64], f64, [f64])
  return %t
}

func @inner(%a: [f64], %b: [f64]) -> ([f64], f64, [f64]) {
#1:
  %r = invoke @pair(%a, %b) :: ([f64], [f64])
  %p = call getfield(%r, 0) :: [f64]
  %q = call getfield(%r, 1) :: [f64]
  %t = call tuple(%q, 1.0, %p) :: ([f64], f64, [f64])
  return %t
}

func @whole(%a: [f64], %b: [f64]) -> ([f64], [f64]) {
#1:
  %r = invoke @pair(%a, %b) :: ([f64], [f64])
  %p = call getfield(%r, 0) :: [f64]
  %k = invoke @keep(%p) :: [f64]
  %t = call tuple(%k, %p) :: ([f64], [f64])
  return %t
}

func @nest(%a: [f64], %b: [f64]) -> (([f64], f64), [f64]) {
#1:
  %c = call copy(%a) :: [f64]
  %d = call copy(%b) :: [f64]
  %i = call tuple(%c, 1.0) :: ([f64], f64)
  %t = call tuple(%i, %d) :: (([f64], f64), [f64])
  return %t
}

func @nest_shared(%a: [f64]) -> (([f64], f64), [f64]) {
#1:
  %c = call copy(%a) :: [f64]
  %i = call tuple(%c, 1.0) :: ([f64], f64)
  %t = call tuple(%i, %c) :: (([f64], f64), [f64])
  return %t
}

func @unnest(%a: [f64], %b: [f64]) -> ([f64], ([f64], f64)) {
#1:
  %r = invoke @nest(%a, %b) :: (([f64], f64), [f64])
  %i = call getfield(%r, 0) :: ([f64], f64)
  %p = call getfield(%i, 0) :: [f64]
  %q = call getfield(%r, 1) :: [f64]
  %j = call tuple(%q, 2.0) :: ([f64], f64)
  %t = call tuple(%p, %j) :: ([f64], ([f64], f64))
  return %t
}
";

    #[test]
    fn fields_are_fresh_when_made_in_the_call_and_apart() {
        let m = parse_module(FIELDS).expect("test IR parses");
        let all = calling_all(&m);
        let fields = |by_rule: &dyn Fn(FuncId) -> bool| {
            let mut out: Vec<(String, FieldPath)> = CallFacts::default()
                .learn(&m, &all, by_rule)
                .fresh
                .fields
                .into_iter()
                .map(|(id, k)| (m[id].name.clone(), k))
                .collect();
            out.sort();
            out
        };
        // `twice` and `kept` may give one array in both fields; `mixed`'s
        // first field is its parameter; `inner` takes `pair`'s two fresh
        // fields apart; `whole`'s second field goes into `keep`, which may
        // hand it back as the first. `nest`'s arrays are fresh at paths
        // [0, 0] and [1], `nest_shared`'s one array at neither; `unnest`
        // takes `nest`'s apart into [0] and [1, 0].
        assert_eq!(
            fields(&|_| false),
            [
                ("inner".into(), vec![0]),
                ("inner".into(), vec![2]),
                ("mixed".into(), vec![2]),
                ("nest".into(), vec![0, 0]),
                ("nest".into(), vec![1]),
                ("pair".into(), vec![0]),
                ("pair".into(), vec![1]),
                ("unnest".into(), vec![0]),
                ("unnest".into(), vec![1, 0]),
            ]
        );
        // A function with a rule returns nothing known, nor do its callers
        // through it.
        let pair = m.by_name("pair").expect("@pair");
        let nest = m.by_name("nest").expect("@nest");
        assert_eq!(
            fields(&|f| f == pair || f == nest),
            [("mixed".into(), vec![2])]
        );
    }

    const KEPT: &str = "func @push(%q: [f64], %v: [f64]) -> ([f64], [f64]) {
#1:
  call arrayset(%q, 0, 1.0)
  %t = call tuple(%q, %v) :: ([f64], [f64])
  return %t
}

func @swap(%q: [f64], %v: [f64]) -> ([f64], [f64]) {
#1:
  %t = call tuple(%v, %q) :: ([f64], [f64])
  return %t
}

func @same(%a: [f64]) -> [f64] {
#1:
  return %a
}

func @via_same(%q: [f64], %v: [f64]) -> ([f64], [f64]) {
#1:
  %s = invoke @same(%v) :: [f64]
  %c = call copy(%q) :: [f64]
  %t = call tuple(%s, %c) :: ([f64], [f64])
  return %t
}

func @whole(%t: ([f64], f64)) -> ([f64], f64) {
#1:
  %a = call getfield(%t, 0) :: [f64]
  %x = call getfield(%t, 1) :: f64
  %r = call tuple(%a, %x) :: ([f64], f64)
  return %r
}

func @nest(%s: (([f64], f64), [f64])) -> (([f64], f64), [f64]) {
#1:
  %i = call getfield(%s, 0) :: ([f64], f64)
  %q = call getfield(%i, 0) :: [f64]
  %v = call getfield(%s, 1) :: [f64]
  %r = invoke @swap(%v, %q) :: ([f64], [f64])
  %a = call getfield(%r, 1) :: [f64]
  %b = call getfield(%r, 0) :: [f64]
  %j = call tuple(%a, 1.0) :: ([f64], f64)
  %t = call tuple(%j, %b) :: (([f64], f64), [f64])
  return %t
}

func @rec(%q: [f64], %v: [f64], %n: i64) -> ([f64], [f64]) {
#1:
  %c = call eq(%n, 0) :: bool
  gotoifnot %c, #3
#2:
  %t = call tuple(%q, %v) :: ([f64], [f64])
  return %t
#3:
  %m = call isub(%n, 1) :: i64
  %r = invoke @rec(%q, %v, %m) :: ([f64], [f64])
  return %r
}

func @maybe(%q: [f64], %v: [f64], %c: bool) -> ([f64], [f64]) {
#1:
  %d = call copy(%q) :: [f64]
  %a = call select(%c, %d, %q) :: [f64]
  %b = call select(%c, %q, %v) :: [f64]
  %t = call tuple(%a, %v) :: ([f64], [f64])
  %u = call tuple(%b, %v) :: ([f64], [f64])
  %w = call select(%c, %t, %u) :: ([f64], [f64])
  return %w
}

func @spin(%q: [f64], %v: [f64]) -> ([f64], [f64]) {
#1:
  %r = invoke @spin(%q, %v) :: ([f64], [f64])
  return %r
}
";

    #[test]
    fn kept_fields_are_the_parameter_part_every_return_hands_back() {
        let m = parse_module(KEPT).expect("test IR parses");
        let all = calling_all(&m);
        let kept = |by_rule: &dyn Fn(FuncId) -> bool| {
            let mut out: Vec<(String, FieldPath, ParamPart)> = CallFacts::default()
                .learn(&m, &all, by_rule)
                .kept_fields
                .into_iter()
                .map(|((id, k), p)| (m[id].name.clone(), k, p))
                .collect();
            out.sort();
            out
        };
        // `push` hands back both, `swap` both crossed; `via_same` its second
        // parameter through `same` (the other field is a copy); `whole` a
        // tuple parameter's field, `nest` its parameter's fields, swapped
        // twice by `swap` and its own `getfield`s (`s.1` at [0, 0]); `rec` through itself. `maybe`'s first field is a
        // copy or `q` (neither), its second `v` on every path; `spin`
        // never returns, and is taken as keeping nothing.
        let pp = |j: usize, p: &[u32]| (j, p.to_vec());
        assert_eq!(
            kept(&|_| false),
            [
                ("maybe".into(), vec![1], pp(1, &[])),
                ("nest".into(), vec![0, 0], pp(0, &[1])),
                ("nest".into(), vec![1], pp(0, &[0, 0])),
                ("push".into(), vec![0], pp(0, &[])),
                ("push".into(), vec![1], pp(1, &[])),
                ("rec".into(), vec![0], pp(0, &[])),
                ("rec".into(), vec![1], pp(1, &[])),
                ("swap".into(), vec![0], pp(1, &[])),
                ("swap".into(), vec![1], pp(0, &[])),
                ("via_same".into(), vec![0], pp(1, &[])),
                ("whole".into(), vec![0], pp(0, &[0])),
            ]
        );
        // A function with a rule keeps nothing known, nor do its callers
        // through it.
        let swap = m.by_name("swap").expect("@swap");
        let names: Vec<String> = kept(&|f| f == swap).into_iter().map(|(n, ..)| n).collect();
        assert!(
            !names.iter().any(|n| n == "swap" || n == "nest"),
            "{names:?}"
        );
        assert!(names.iter().any(|n| n == "push"), "{names:?}");
    }
}
