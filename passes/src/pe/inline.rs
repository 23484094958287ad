//! Inlining: `invoke @g(args)` replaced by a copy of `@g`'s blocks, when `@g`
//! is small and not recursive.
//!
//! Input: a verified module. A call is inlined when the callee is another
//! function of at most [`Limits::inline_size`] statements, lies on no cycle of
//! the call graph (edges: `invoke`, and every function constant a body
//! mentions, since it may be called through a value), and the caller stays
//! within [`Limits::max_func_size`]. The call's block is split at the call:
//! the statements before it end with `goto` to the copy of the callee's
//! entry; the copied blocks follow, with fresh labels and values, parameters
//! replaced by the arguments; each `return v` becomes `goto` to a new
//! continuation block holding the statements after the call and the old
//! terminator, where the call's result is `v` (one return) or a phi of the
//! returned operands (several). Copied statements keep their source
//! positions, so a run-time error inside inlined code reports the callee's
//! source line and the caller's name, block and statement (docs/pe.md).
//!
//! Output: verifies; the same values and errors (except that inlining
//! removes call frames, so a call-depth limit is reached later). Keeps the
//! normal form (docs/passes.md) when the caller and callee have it: the new
//! blocks end in `goto` or in the callee's own branches, the continuation is
//! last when the call's block was, and the entry gains no predecessor.
//!
//! For code generation, [`inline_for_codegen`] makes the same transformation
//! on a copy of one function, leaving the module alone, inlines only
//! callees that do not mix pushes and pops with the caller, and
//! returns with the copy where each statement stood before ([`Inlined`]), so
//! that errors in inlined code can be reported exactly as without inlining
//! (docs/codegen.md, "Inlining").

use super::{
    Labels, Limits, func_size, map_kind, map_targets, map_term, rename_phi_pred, substitute,
};
use irad_ir::entity::{EntitySet, SecondaryMap};
use irad_ir::flow::graph;
use irad_ir::{
    Block, BlockData, Const, Func, FuncId, FuncRef, Inst, InstData, InstKind, Module, Operand, Pos,
    Prim, Terminator, Value, ValueData, ValueDef, ValueName,
};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use smallvec::SmallVec;
use std::sync::Arc;

/// Inlines small non-recursive callees into every function of `module` with
/// the default [`Limits`]; returns whether any call was inlined.
pub fn inline(module: &mut Module) -> bool {
    inline_with(module, &Limits::default())
}

/// [`inline`] with explicit limits.
pub fn inline_with(module: &mut Module, limits: &Limits) -> bool {
    let ids: Vec<FuncId> = module.func_ids().collect();
    let mut changed = false;
    for id in ids {
        changed |= inline_into(module, id, limits);
    }
    changed
}

/// Inlines into function `f` of `module` every call it can (including calls
/// that inlined code brings), within `limits`; returns whether any was.
pub fn inline_into(module: &mut Module, f: FuncId, limits: &Limits) -> bool {
    if module.get(f).is_none() {
        return false;
    }
    // Inlining cannot put a function on a cycle it was not on: the edges it
    // adds (f to g's callees) were paths through g already.
    let recursive = recursive_functions(module);
    let mut changed = false;
    let mut sites = Sites::new(&module[f]);
    let mut from = 0;
    // Each inline removes one call and adds a bounded number of statements;
    // the size limit ends the loop, and this bound is a second guard.
    for _ in 0..limits.max_func_size {
        let Some((at, block, idx, callee)) = next_site(
            module,
            f,
            &module[f],
            (from, sites.size),
            &recursive,
            limits,
            &|_| true,
        ) else {
            break;
        };
        let body = module[callee].clone();
        inline_site(&mut module[f], block, idx, &body, &mut sites);
        from = at + 1;
        changed = true;
    }
    sites.finish(&mut module[f]);
    changed
}

/// What inlining calls into one function carries from one call to the
/// next, so that inlining a call costs about the callee's size rather than
/// the caller's (a caller that receives a thousand small bodies, as a chain
/// of small functions calling each other does, would otherwise be scanned a
/// thousand times): the names and block labels in use, and the calls'
/// results still to be replaced by what the callees return, all at once by
/// [`Sites::finish`]. Until then the caller still uses the removed calls'
/// results; nothing that chooses or copies the next call reads operands.
struct Sites {
    /// The caller's size ([`func_size`]) as the calls inlined left it.
    size: usize,
    names: HashSet<ValueName>,
    labels: Labels,
    results: HashMap<Value, Operand>,
}

impl Sites {
    fn new(func: &Func) -> Sites {
        Sites {
            size: func_size(func),
            names: func
                .values
                .values()
                .filter_map(|d| d.name.clone())
                .collect(),
            labels: Labels::new(func),
            results: HashMap::default(),
        }
    }

    /// Replaces the results of the inlined calls by what their callees
    /// returned. A callee may return an argument that was itself an earlier
    /// call's result: such chains are followed to their end (they end, since
    /// each step goes to a value defined before the call).
    fn finish(self, func: &mut Func) {
        let resolve = |mut op: Operand| {
            while let Operand::Value(v) = op
                && let Some(&next) = self.results.get(&v)
            {
                op = next;
            }
            op
        };
        let subst: HashMap<Value, Operand> = self
            .results
            .iter()
            .map(|(&r, &op)| (r, resolve(op)))
            .collect();
        substitute(func, &subst);
    }
}

/// Where a statement stood before inlining: its function (by name, without
/// `@`), block label and statement number from 1 (the terminator counted
/// last), as an error names it (SYNTAX.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    /// The function's name.
    pub func: Arc<str>,
    /// The block's label.
    pub block: u32,
    /// The statement's number within the block, from 1.
    pub stmt: u32,
}

/// A call that [`inline_for_codegen`] replaced by its callee's body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlinedCall {
    /// Where the `invoke` stood.
    pub place: Place,
    /// Its source position.
    pub pos: Option<Pos>,
    /// The inlined call whose body the `invoke` was in (an index into
    /// [`Inlined::calls`]), `None` when it was in the function itself.
    pub outer: Option<usize>,
    /// The function called, whose body was copied.
    pub callee: FuncId,
}

/// A copy of a function with small callees inlined, for code generation,
/// and for every statement of the copy where it stood before inlining, so
/// that its errors can read exactly as they would without inlining.
#[derive(Clone, Debug)]
pub struct Inlined {
    /// The function with the calls inlined (same name, parameters, type).
    pub func: Func,
    /// Each statement's place before inlining (every statement that can
    /// fail has one; a phi made for several returns has none).
    pub insts: SecondaryMap<Inst, Option<Place>>,
    /// Each block's terminator's place before inlining.
    pub terms: SecondaryMap<Block, Option<Place>>,
    /// For each block, the innermost inlined call whose body it belongs to
    /// (an index into `calls`); `None` for the function's own blocks.
    /// Every statement of a block belongs to the same body.
    pub frames: SecondaryMap<Block, Option<usize>>,
    /// The blocks that are the entry of an inlined callee's copy, where its
    /// frame would have begun.
    pub entries: EntitySet<Block>,
    /// The calls inlined, outer ones before the calls their bodies brought.
    pub calls: Vec<InlinedCall>,
}

impl Inlined {
    /// `func` with nothing inlined: a copy with every statement and
    /// terminator at its own place (for passes that change a copy of a
    /// function for code generation, as loop versioning does).
    pub fn identity(func: &Func) -> Inlined {
        let mut out = Inlined {
            func: func.clone(),
            insts: SecondaryMap::new(),
            terms: SecondaryMap::new(),
            frames: SecondaryMap::new(),
            entries: EntitySet::new(),
            calls: Vec::new(),
        };
        set_places(&mut out, func, None, |b| (b, None));
        out
    }

    /// How many frames the inlined calls around block `b` stood for (0 in
    /// the function's own blocks).
    pub fn depth(&self, b: Block) -> usize {
        let mut n = 0;
        let mut at = self.frames[b];
        while let Some(i) = at {
            n += 1;
            at = self.calls.get(i).and_then(|c| c.outer);
        }
        n
    }
}

/// A copy of function `f` of `module` with every call inlined that
/// [`inline_into`] would inline (within `limits`; `recursive` is
/// [`recursive_functions`] of `module`), of callees that do not pop where
/// the caller pushes (or push where it pops) and that `allow` accepts;
/// `None` when there is none. The module is not changed.
///
/// What the copy computes is `f`'s: the same values and errors, except that
/// an inlined call makes no frame. The [`Inlined`] tables say where each
/// copied statement stood, so a code generator can report an error in
/// inlined code with the callee's name, block and statement, and the
/// inlined calls as the trace of calls it would have had, and can check the
/// call depth where each inlined frame would have begun.
pub fn inline_for_codegen(
    module: &Module,
    f: FuncId,
    recursive: &EntitySet<FuncId>,
    limits: &Limits,
    allow: &dyn Fn(FuncId) -> bool,
) -> Option<Inlined> {
    let func = module.get(f)?;
    let mut any = false;
    // Pushes and pops are not mixed in one function: code generation loads
    // a popped value where it is used only in a function that neither
    // pushes nor calls (docs/codegen.md, "Tapes"), so a pullback inlined
    // next to its forward sweep (`@f.rev` calls both) would get slower.
    // Callees with loops are inlined like any other: code generation
    // lowers loop headers so that Cranelift hoists loop invariants
    // (docs/codegen.md, "Loops"), and then a loop inlined into its caller
    // measured faster than the call (docs/performance.md, "Inlining
    // before codegen").
    // The caller's pushes and pops: its own, then those of each body
    // inlined into it.
    let tape = std::cell::Cell::new(tape_use(func));
    let allow_here = |g: FuncId| {
        let (push, pop) = tape.get();
        let (g_push, g_pop) = tape_use(&module[g]);
        let mixes = pop && g_push || push && g_pop;
        !mixes && allow(g)
    };
    // The first site is looked for in `func` itself: most functions have
    // none, and then no copy is made (a copy of a 400 000-statement
    // function is most of its lowering's memory and a tenth of its time).
    let mut site = Some(next_site(
        module,
        f,
        func,
        (0, func_size(func)),
        recursive,
        limits,
        &allow_here,
    )?);
    let mut out = Inlined::identity(func);
    let mut sites = Sites::new(func);
    // Calls before the last one inlined were passed over for good: the
    // caller only grows, and only gains pushes and pops, so a call refused
    // once is refused again; the next one is looked for from the first
    // block of the last callee's copy on.
    let mut from = 0;
    for _ in 0..limits.max_func_size {
        let Some((at, block, idx, callee)) = site.take().or_else(|| {
            next_site(
                module,
                f,
                &out.func,
                (from, sites.size),
                recursive,
                limits,
                &allow_here,
            )
        }) else {
            break;
        };
        let call = out.func.blocks[block].insts[idx];
        let body = &module[callee];
        let Some(copied) = inline_site(&mut out.func, block, idx, body, &mut sites) else {
            break;
        };
        from = at + 1;
        let (push, pop) = tape.get();
        let (g_push, g_pop) = tape_use(body);
        tape.set((push || g_push, pop || g_pop));
        any = true;
        // The continuation holds the rest of the call's block: same body,
        // and the old terminator with its place.
        let frame = out.frames[block];
        out.frames.set(copied.cont, frame);
        let term = out.terms[block].clone();
        out.terms.set(copied.cont, term);
        out.terms.set(block, None);
        let Some(place) = out.insts[call].clone() else {
            continue;
        };
        out.calls.push(InlinedCall {
            place,
            pos: func_pos(&out.func, call),
            outer: frame,
            callee,
        });
        let here = Some(out.calls.len() - 1);
        let blocks: HashMap<Block, Block> = copied.blocks.iter().copied().collect();
        let insts: HashMap<Inst, Inst> = copied.insts.iter().copied().collect();
        set_places(&mut out, body, here, |b| {
            (blocks.get(&b).copied().unwrap_or(b), Some(&insts))
        });
        if let Some(&(_, entry)) = copied.blocks.first() {
            out.entries.insert(entry);
        }
    }
    sites.finish(&mut out.func);
    any.then_some(out)
}

/// `module` as code generation compiles it: every function replaced by its
/// [`inline_for_codegen`] copy (default [`Limits`]; only callees that
/// verify), what `irad dump --after inline` prints. Each copy is made from
/// the module as given, so a function's callees are inlined as they were
/// written, never twice.
pub fn inlined_as_compiled(module: &Module) -> Module {
    let recursive = recursive_functions(module);
    let limits = Limits::default();
    let allow = |g: FuncId| irad_ir::verify::verify_func(module, g).is_ok();
    let mut out = module.clone();
    for f in module.func_ids() {
        if let Some(inl) = inline_for_codegen(module, f, &recursive, &limits, &allow) {
            out[f] = inl.func;
        }
    }
    out
}

/// Whether `func`'s layout blocks push and whether they pop.
fn tape_use(func: &Func) -> (bool, bool) {
    let (mut push, mut pop) = (false, false);
    for &b in &func.layout {
        for &inst in &func.blocks[b].insts {
            if let InstKind::Prim { prim, .. } = &func.insts[inst].kind {
                push |= *prim == Prim::Push;
                pop |= *prim == Prim::Pop;
            }
        }
    }
    (push, pop)
}

/// The source position of statement `inst` of `func`.
fn func_pos(func: &Func, inst: Inst) -> Option<Pos> {
    func.insts.get(inst).and_then(|d| d.pos)
}

/// Records the places of `body`'s statements and terminators (`body` as it
/// is in the module) at their copies: block `b` of `body` is `at(b).0` in
/// `out.func`, its statements mapped by `at(b).1` (the identity when `None`),
/// inside inlined call `frame`.
fn set_places<'m>(
    out: &mut Inlined,
    body: &Func,
    frame: Option<usize>,
    at: impl Fn(Block) -> (Block, Option<&'m HashMap<Inst, Inst>>),
) {
    let name: Arc<str> = Arc::from(body.name.as_str());
    for &b in &body.layout {
        let data = &body.blocks[b];
        let (nb, insts) = at(b);
        for (i, &inst) in data.insts.iter().enumerate() {
            let new = insts.and_then(|m| m.get(&inst).copied()).unwrap_or(inst);
            out.insts.set(
                new,
                Some(Place {
                    func: name.clone(),
                    block: data.label,
                    stmt: i as u32 + 1,
                }),
            );
        }
        out.terms.set(
            nb,
            Some(Place {
                func: name.clone(),
                block: data.label,
                stmt: data.insts.len() as u32 + 1,
            }),
        );
        out.frames.set(nb, frame);
    }
}

/// The functions that lie on a cycle of the call graph (edges: `invoke`,
/// and every function constant a body mentions).
pub fn recursive_functions(module: &Module) -> EntitySet<FuncId> {
    let mut succs: SecondaryMap<FuncId, SmallVec<[FuncId; 2]>> = SecondaryMap::new();
    for f in module.func_ids() {
        let out = {
            let func = &module[f];
            let mut out: SmallVec<[FuncId; 2]> = SmallVec::new();
            let mut add = |g: FuncId| {
                if module.get(g).is_some() && !out.contains(&g) {
                    out.push(g);
                }
            };
            for &block in &func.layout {
                for &inst in &func.blocks[block].insts {
                    let (args, invoked) = match &func.insts[inst].kind {
                        InstKind::Invoke { func, args } => (args.as_slice(), Some(*func)),
                        InstKind::Prim { args, .. } | InstKind::CallValue { args, .. } => {
                            (args.as_slice(), None)
                        }
                        InstKind::Phi { entries } => {
                            for (_, op) in entries {
                                if let Operand::Const(Const::Func(FuncRef::User(g))) = op {
                                    add(*g);
                                }
                            }
                            (&[][..], None)
                        }
                    };
                    if let Some(g) = invoked {
                        add(g);
                    }
                    for op in args {
                        if let Operand::Const(Const::Func(FuncRef::User(g))) = op {
                            add(*g);
                        }
                    }
                }
                if let Some(
                    Terminator::Return(Operand::Const(Const::Func(FuncRef::User(g))))
                    | Terminator::GotoIfNot {
                        cond: Operand::Const(Const::Func(FuncRef::User(g))),
                        ..
                    },
                ) = &func.blocks[block].term
                {
                    add(*g);
                }
            }
            out
        };
        succs.set(f, out);
    }
    graph::cyclic(module.func_ids(), |f| succs[f].iter().copied())
}

/// The first call in `func` (function `f` of `module`, or a copy of it) that
/// can be inlined: (block, statement index, callee). `allow` may refuse a
/// callee that passes the other tests.
fn next_site(
    module: &Module,
    f: FuncId,
    func: &Func,
    (from, size): (usize, usize),
    recursive: &EntitySet<FuncId>,
    limits: &Limits,
    allow: &dyn Fn(FuncId) -> bool,
) -> Option<(usize, Block, usize, FuncId)> {
    for (at, &block) in func.layout.iter().enumerate().skip(from) {
        for (idx, &inst) in func.blocks[block].insts.iter().enumerate() {
            let InstKind::Invoke { func: callee, .. } = func.insts[inst].kind else {
                continue;
            };
            let Some(body) = module.get(callee) else {
                continue;
            };
            let on_cycle = recursive.contains(callee);
            let callee_size = func_size(body);
            if callee != f
                && !on_cycle
                && !body.layout.is_empty()
                && callee_size <= limits.inline_size
                && size + callee_size <= limits.max_func_size
                && allow(callee)
            {
                return Some((at, block, idx, callee));
            }
        }
    }
    None
}

/// Where the pieces of an inlined callee went: its blocks and statements
/// (old handle to new) and the continuation block.
struct Copied {
    blocks: Vec<(Block, Block)>,
    insts: Vec<(Inst, Inst)>,
    cont: Block,
}

/// Replaces statement `idx` of `block` in `func`, an `invoke` of `callee`,
/// by a copy of `callee`'s blocks.
fn inline_site(
    func: &mut Func,
    block: Block,
    idx: usize,
    callee: &Func,
    sites: &mut Sites,
) -> Option<Copied> {
    let call = func.blocks[block].insts[idx];
    let InstKind::Invoke { args, .. } = func.insts[call].kind.clone() else {
        return None;
    };
    let call_result = func.insts[call].result;
    let call_pos = func.insts[call].pos;
    let size_before = func.blocks[block].insts.len() + 1;
    let labels = &mut sites.labels;

    // The continuation: the statements after the call and the terminator.
    let next = func.next_in_layout(block);
    let succs = func.successors(block, next);
    let after = func.blocks[block].insts.split_off(idx + 1);
    func.blocks[block].insts.truncate(idx);
    let term = func.blocks[block].term.take();
    let term_pos = func.blocks[block].term_pos;
    let cont = func.blocks.push(BlockData {
        label: labels.fresh(),
        insts: after,
        term,
        pos: None,
        term_pos,
    });
    for succ in succs {
        rename_phi_pred(func, succ, block, cont);
    }

    // Values: parameters become the arguments; every other value of the
    // callee's layout a fresh value of the same type and name.
    let mut vmap: SecondaryMap<Value, Option<Operand>> = SecondaryMap::new();
    for (&p, &a) in callee.params.iter().zip(args.iter()) {
        vmap.set(p, Some(a));
    }
    let mut bmap: SecondaryMap<Block, Option<Block>> = SecondaryMap::new();
    for &b in &callee.layout {
        let data = &callee.blocks[b];
        let new = func.blocks.push(BlockData {
            label: labels.fresh(),
            insts: Vec::with_capacity(data.insts.len()),
            term: None,
            pos: data.pos,
            term_pos: data.term_pos,
        });
        bmap.set(b, Some(new));
    }
    // Copies keep their names where the caller does not use them (the
    // printer would rename both otherwise); the names in the caller are
    // those it had before this call was inlined.
    let names = &sites.names;
    let mut new_names: Vec<ValueName> = Vec::new();
    let mut imap = Vec::new();
    for &b in &callee.layout {
        for &inst in &callee.blocks[b].insts {
            let data = &callee.insts[inst];
            let new_inst = func.insts.push(InstData {
                kind: data.kind.clone(),
                result: None,
                pos: data.pos,
            });
            if let Some(r) = data.result {
                let name = callee.values[r].name.clone().filter(|n| !names.contains(n));
                new_names.extend(name.clone());
                let v = func.values.push(ValueData {
                    ty: callee.values[r].ty.clone(),
                    def: ValueDef::Inst(new_inst),
                    name,
                });
                func.insts[new_inst].result = Some(v);
                vmap.set(r, Some(Operand::Value(v)));
            }
            imap.push((b, inst, new_inst));
        }
    }
    // Operands are mapped once each: callee values and caller values share
    // handle numbers.
    let map_op = |op: Operand| match op {
        Operand::Value(v) => vmap[v].unwrap_or(op),
        Operand::Const(_) => op,
    };
    for &(b, _, new_inst) in &imap {
        let kind = &mut func.insts[new_inst].kind;
        map_kind(kind, &map_op);
        if let InstKind::Phi { entries } = kind {
            for (pred, _) in entries.iter_mut() {
                *pred = bmap[*pred].unwrap_or(*pred);
            }
        }
        let nb = bmap[b].unwrap_or(b);
        func.blocks[nb].insts.push(new_inst);
    }
    let mut returns: SmallVec<[(Block, Operand); 2]> = SmallVec::new();
    for &b in &callee.layout {
        let nb = bmap[b].unwrap_or(b);
        let term = match callee.blocks[b].term.clone() {
            Some(Terminator::Return(op)) => {
                returns.push((nb, map_op(op)));
                Terminator::Goto(cont)
            }
            Some(mut term) => {
                map_term(&mut term, &map_op);
                map_targets(&mut term, &|t| bmap[t].unwrap_or(t));
                term
            }
            // A verified callee has a terminator on every block.
            None => Terminator::Goto(cont),
        };
        func.blocks[nb].term = Some(term);
    }
    let entry = callee.layout.first().map(|&b| bmap[b].unwrap_or(b));
    if let Some(entry) = entry {
        func.blocks[block].term = Some(Terminator::Goto(entry));
        func.blocks[block].term_pos = call_pos;
    }

    // Layout: the call's block, the callee's blocks, the continuation.
    let at = func
        .layout
        .iter()
        .position(|&b| b == block)
        .map_or(func.layout.len(), |i| i + 1);
    let mut new_blocks: Vec<Block> = callee
        .layout
        .iter()
        .map(|&b| bmap[b].unwrap_or(b))
        .collect();
    new_blocks.push(cont);
    func.layout.splice(at..at, new_blocks);

    // The call's result: the one returned operand, or a phi of them.
    if let Some(r) = call_result {
        let op = match returns.as_slice() {
            [(_, op)] => *op,
            _ => {
                let phi = func.insts.push(InstData {
                    kind: InstKind::Phi {
                        entries: returns.iter().copied().collect(),
                    },
                    result: None,
                    pos: call_pos,
                });
                // The call's result is gone: the phi takes its name.
                let name = func.values[r].name.take();
                let ty = func.values[r].ty.clone();
                let v = func.values.push(ValueData {
                    ty,
                    def: ValueDef::Inst(phi),
                    name,
                });
                func.insts[phi].result = Some(v);
                func.blocks[cont].insts.insert(0, phi);
                Operand::Value(v)
            }
        };
        sites.results.insert(r, op);
    }
    sites.names.extend(new_names);
    let size_after: usize = [block, cont]
        .iter()
        .chain(callee.layout.iter().filter_map(|&b| bmap[b].as_ref()))
        .map(|&b| func.blocks[b].insts.len() + 1)
        .sum();
    sites.size = sites.size - size_before + size_after;
    debug_assert_eq!(sites.size, func_size(func), "the size kept by `Sites`");
    Some(Copied {
        blocks: callee
            .layout
            .iter()
            .map(|&b| (b, bmap[b].unwrap_or(b)))
            .collect(),
        insts: imap.into_iter().map(|(_, old, new)| (old, new)).collect(),
        cont,
    })
}
