//! Partial evaluation (issue 9, part 4): specialising a function on arguments
//! known at compile time, and the transforms that specialisation repeats until
//! nothing changes. One file per transform:
//!
//! - [`inline`](fn@inline): `invoke @g(...)` of a small, non-recursive `@g`
//!   replaced by a copy of `@g`'s blocks;
//! - [`unroll`](fn@unroll): loops with a trip count known at compile time,
//!   and small, replaced by that many copies of their body;
//! - [`devirtualise`](fn@devirtualise): `call %f(...)` whose callee is known
//!   to be one function constant becomes `invoke @g(...)` (or `call prim(...)`);
//! - `fold_known`: statements whose operands are known are replaced by their
//!   value (through `irad_ir::interp::fold_prim`, the interpreter's own
//!   evaluation), `length` of arrays of known length included;
//! - `merge_blocks`: straight-line chains of blocks, which inlining and
//!   unrolling leave, merged into one block;
//! - [`specialise`](fn@specialise): clones a function under a new name, makes
//!   its known parameters constants and runs all of the above with the
//!   normalisation passes to a fixpoint, under a fuel limit.
//!
//! Assumes verified modules. Guarantees: every transform leaves a module that
//! verifies and computes the same values and run-time errors as before (the
//! same floating-point operations in the same order); what an error inside
//! inlined or unrolled code reports is in docs/pe.md. Growth is bounded by
//! [`Limits`]; nothing here recurses on the shape of the input.

mod devirtualise;
mod fold_known;
mod inline;
mod merge_blocks;
mod specialise;
mod unroll;

pub use devirtualise::{devirtualise, devirtualise_func};
pub use fold_known::fold_known;
pub use inline::{
    Inlined, InlinedCall, Place, inline, inline_for_codegen, inline_into, inline_with,
    inlined_as_compiled, recursive_functions,
};
pub use merge_blocks::merge_blocks;
pub use specialise::{Known, PeError, specialise, specialise_name, specialise_with};
pub use unroll::{unroll, unroll_func, unroll_with};

use irad_ir::func::Args;
use irad_ir::prim::Sig;
use irad_ir::{Block, Const, Func, FuncRef, InstKind, Operand, Terminator, Value};
use rustc_hash::FxHashMap as HashMap;

/// How far partial evaluation may grow code. Sizes count statements (phis
/// included) and terminators of the blocks in a function's layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest callee [`inline`](fn@inline) copies into a caller.
    pub inline_size: usize,
    /// The largest trip count [`unroll`](fn@unroll) unrolls.
    pub unroll_trip: u64,
    /// The largest trip count × loop size (the statements the unrolled copies
    /// hold) [`unroll`](fn@unroll) creates for one loop.
    pub unroll_size: usize,
    /// No transform grows a function past this size.
    pub max_func_size: usize,
    /// The most rounds [`specialise`](fn@specialise) runs; needing more is
    /// an error.
    pub fuel: usize,
}

impl Default for Limits {
    /// Inline callees of up to 40 statements; unroll up to 256 trips and
    /// 2 000 statements per loop; functions up to 20 000 statements; 64 rounds.
    fn default() -> Limits {
        Limits {
            inline_size: 40,
            unroll_trip: 256,
            unroll_size: 2_000,
            max_func_size: 20_000,
            fuel: 64,
        }
    }
}

/// The size of `func`: statements and terminators of its layout blocks.
pub fn func_size(func: &Func) -> usize {
    func.layout
        .iter()
        .map(|&b| func.blocks[b].insts.len() + 1)
        .sum()
}

/// The statement that calls the function constant `callee` with `args`:
/// `invoke @g(args)` for a function of the module, `call prim(args)` for a
/// primitive of one fixed signature (the only primitives that are values);
/// `None` otherwise.
pub(crate) fn call_of_const(callee: FuncRef, args: Args) -> Option<InstKind> {
    match callee {
        FuncRef::User(func) => Some(InstKind::Invoke { func, args }),
        FuncRef::Prim(prim) if matches!(prim.info().sig, Sig::Fixed(..)) => {
            Some(InstKind::Prim { prim, args })
        }
        FuncRef::Prim(_) => None,
    }
}

/// `op` through `subst`, following chains (a value replaced by a value that is
/// itself replaced); chains are at most as long as the map.
pub(crate) fn resolve(op: Operand, subst: &HashMap<Value, Operand>) -> Operand {
    let mut op = op;
    for _ in 0..=subst.len() {
        match op {
            Operand::Value(v) => match subst.get(&v) {
                Some(&next) if next != op => op = next,
                _ => return op,
            },
            Operand::Const(_) => return op,
        }
    }
    op
}

/// Rewrites one statement's operands through `subst`; a dynamic call whose
/// callee becomes a function constant becomes a static call of it.
pub(crate) fn subst_kind(kind: &mut InstKind, subst: &HashMap<Value, Operand>) {
    map_kind(kind, &|op| resolve(op, subst));
}

/// Rewrites a terminator's operands through `subst`.
pub(crate) fn subst_term(term: &mut Terminator, subst: &HashMap<Value, Operand>) {
    map_term(term, &|op| resolve(op, subst));
}

/// Rewrites one statement's operands with `map` (each operand once: `map`
/// may send values of another function to values of this one); a dynamic
/// call whose callee becomes a function constant becomes a static call of it.
pub(crate) fn map_kind(kind: &mut InstKind, map: &dyn Fn(Operand) -> Operand) {
    match kind {
        InstKind::Prim { args, .. } | InstKind::Invoke { args, .. } => {
            args.iter_mut().for_each(|op| *op = map(*op));
        }
        InstKind::Phi { entries } => {
            entries.iter_mut().for_each(|(_, op)| *op = map(*op));
        }
        InstKind::CallValue { callee, args } => {
            args.iter_mut().for_each(|op| *op = map(*op));
            match map(Operand::Value(*callee)) {
                Operand::Value(v) => *callee = v,
                Operand::Const(Const::Func(f)) => {
                    if let Some(call) = call_of_const(f, std::mem::take(args)) {
                        *kind = call;
                    }
                }
                // A function value replaced by a non-function: not from a
                // verified module; leave the call for the verifier.
                Operand::Const(_) => {}
            }
        }
    }
}

/// Rewrites a terminator's operands with `map` (each operand once).
pub(crate) fn map_term(term: &mut Terminator, map: &dyn Fn(Operand) -> Operand) {
    match term {
        Terminator::GotoIfNot { cond: op, .. }
        | Terminator::Switch { index: op, .. }
        | Terminator::Return(op) => *op = map(*op),
        Terminator::Goto(_) => {}
    }
}

/// Rewrites a terminator's targets with `map` (each target once).
pub(crate) fn map_targets(term: &mut Terminator, map: &dyn Fn(Block) -> Block) {
    match term {
        Terminator::Goto(b) | Terminator::GotoIfNot { target: b, .. } => *b = map(*b),
        Terminator::Switch { targets, .. } => targets.iter_mut().for_each(|b| *b = map(*b)),
        Terminator::Return(_) => {}
    }
}

/// Replaces every use of the values of `subst` in the layout blocks of
/// `func` (operands, phi entries, callees, terminators).
pub(crate) fn substitute(func: &mut Func, subst: &HashMap<Value, Operand>) {
    if subst.is_empty() {
        return;
    }
    for i in 0..func.layout.len() {
        let block = func.layout[i];
        for j in 0..func.blocks[block].insts.len() {
            let inst = func.blocks[block].insts[j];
            subst_kind(&mut func.insts[inst].kind, subst);
        }
        if let Some(term) = &mut func.blocks[block].term {
            subst_term(term, subst);
        }
    }
}

/// Renames predecessor `from` to `to` in the phis of `block`.
pub(crate) fn rename_phi_pred(func: &mut Func, block: Block, from: Block, to: Block) {
    for j in 0..func.blocks[block].insts.len() {
        let inst = func.blocks[block].insts[j];
        match &mut func.insts[inst].kind {
            InstKind::Phi { entries } => entries
                .iter_mut()
                .filter(|(b, _)| *b == from)
                .for_each(|(b, _)| *b = to),
            _ => break,
        }
    }
}

/// Fresh block labels for one function: above every label in use, or, past
/// `u32::MAX`, the smallest free ones.
pub(crate) struct Labels {
    used: rustc_hash::FxHashSet<u32>,
    next: u32,
}

impl Labels {
    /// The labels of `func`.
    pub fn new(func: &Func) -> Labels {
        let used: rustc_hash::FxHashSet<u32> = func.blocks.values().map(|b| b.label).collect();
        let next = used.iter().max().map_or(1, |m| m.wrapping_add(1));
        Labels { used, next }
    }

    /// A label no block has.
    pub fn fresh(&mut self) -> u32 {
        let mut label = self.next;
        while self.used.contains(&label) {
            label = label.wrapping_add(1);
        }
        self.used.insert(label);
        self.next = label.wrapping_add(1);
        label
    }
}
