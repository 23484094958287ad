//! The verifier: checks that a function is well-formed IR, collecting every
//! error with its location.
//!
//! It assumes nothing about its input: any `Func` that can be built through the
//! public fields is accepted without panicking, and the work is linear in the
//! size of the function (plus the near-linear iterative dominator computation
//! of `crate::flow`, whose CFG and dominator tree it uses); nothing recurses
//! over the CFG.
//! It guarantees that a function it accepts can be walked, interpreted and
//! transformed without further checks on the invariants below.
//!
//! Layout and handles
//!
//! - A function has at least one block; its first block in the layout is the entry.
//! - The layout lists only valid blocks, each at most once. A block of the table
//!   that the layout does not list is dead (as after a pass removed it) and is
//!   ignored; so is a statement that no block lists.
//! - A statement is listed by at most one block, at most once; statement handles
//!   in blocks are valid.
//! - Parameters are valid values recorded as the parameter of their position.
//! - Every handle an operand, terminator or phi entry names is valid.
//!
//! Blocks and control flow
//!
//! - Block labels are unique within the function.
//! - Every block ends in a terminator; jump targets are blocks of the layout.
//! - `gotoifnot` has a next block to fall through to, and it differs from the target.
//! - `switch` has at least one target and lists each target once (each is one
//!   edge; phi entries are per predecessor).
//! - The entry block has no predecessors: nothing jumps to it (nothing can fall
//!   through to it, as it comes first).
//!
//! Phis
//!
//! - Phis come before every other statement of their block; there is none in the
//!   entry block.
//! - A phi has exactly one entry per predecessor of its block, and no entry for
//!   a block that is not a predecessor. Edges from unreachable blocks count.
//!
//! SSA
//!
//! - Every used value is defined in this function: a parameter, or the result of
//!   a statement that some block lists, and that statement records it as its result.
//! - Each statement's result is recorded as defined by that statement.
//! - Definitions dominate uses: in the same block, the definition comes earlier;
//!   a phi entry's operand is available at the end of its predecessor. Uses in
//!   unreachable blocks (and phi entries from unreachable predecessors) are not
//!   checked, but a reachable use of a value defined in an unreachable block is
//!   an error.
//!
//! Types
//!
//! - Primitive calls are typed by `Prim::result_type`; `invoke` and dynamic calls
//!   by the callee's signature (callee exists, arity, argument types); the
//!   result value has the call's result type, and a statement with no result
//!   has type `()`.
//! - Phi entry operands have the phi's type; the `gotoifnot` condition is bool;
//!   the `switch` index is i64; `return` returns the function's result type.
//! - Function constants name a function of the module or a primitive with a
//!   single signature.
//! - Types of parameters, result and values nest at most `MAX_NESTING` deep.
//!
//! To keep one mistake from producing many errors, a check is skipped when an
//! operand's type is unknown (an invalid or undefined value, a bad constant).
//! Errors come in a fixed order: functions in module order, then function-level
//! errors, then blocks in layout order, statements in order, terminator last.

mod cfg;
mod render;
mod rules;
mod ssa;
mod typing;

use crate::func::{Block, Func, FuncId, Inst, Module, Value};
use crate::loc::{Location, Pos};
use std::fmt;

pub use render::render_errors;
pub use rules::{jvp_signature, vjp_signature};

/// Where in a module a [`VerifyError`] is, as handles, so that a printer can
/// show the error under the right line of the printed function.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Place {
    /// The function as a whole (its header, parameters or layout).
    Func(FuncId),
    /// A block (its label, or a statement handle it lists that is invalid).
    Block(FuncId, Block),
    /// A statement.
    Inst(FuncId, Inst),
    /// The terminator of a block (or where it is missing).
    Term(FuncId, Block),
}

/// An IR invariant that does not hold, with its location.
#[derive(Clone, PartialEq, Debug)]
pub struct VerifyError {
    /// Where the error is: function, block label, statement number, source position.
    pub loc: Location,
    /// What is wrong: lowercase, no final full stop.
    pub msg: String,
    /// The same place as handles, for printing the error beside the IR.
    pub place: Place,
}

impl crate::Diagnostic for VerifyError {
    fn location(&self) -> &Location {
        &self.loc
    }
    fn message(&self) -> &str {
        &self.msg
    }
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::loc::with_place(&self.msg, &self.loc))
    }
}

impl std::error::Error for VerifyError {}

/// Verifies every function of `m`, in module order, and returns all errors.
pub fn verify_module(m: &Module) -> Result<(), Vec<VerifyError>> {
    let mut errors = Vec::new();
    for id in m.func_ids() {
        if let Err(mut errs) = verify_func(m, id) {
            errors.append(&mut errs);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Verifies function `f` of `m` and returns all its errors, in order.
pub fn verify_func(m: &Module, f: FuncId) -> Result<(), Vec<VerifyError>> {
    let Some(func) = m.get(f) else {
        return Err(vec![VerifyError {
            loc: Location::default(),
            msg: format!("function handle {} does not exist", f.as_u32()),
            place: Place::Func(f),
        }]);
    };
    let mut ctx = Ctx::new(m, f, func);
    ctx.run();
    ctx.finish()
}

/// The order of an error: (block rank, statement number). Rank 0 is the
/// function, then 1 + layout index; statement 0 is the block itself. Errors of
/// one key keep the order the checks emitted them in.
type Key = (u32, u32);

/// A statement or terminator that an error is about.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) enum At {
    /// Statement `inst`, listed at `slot`.
    Inst(Slot, Inst),
    /// The terminator of the block at this layout index.
    Term(u32),
}

/// Where a statement is: its block's layout index and its index in the block.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) struct Slot {
    pub block: u32,
    pub index: u32,
}

/// The state of one run of the verifier over one function.
pub(crate) struct Ctx<'a> {
    pub m: &'a Module,
    pub id: FuncId,
    pub f: &'a Func,
    errors: Vec<(Key, VerifyError)>,
    /// Verified facts about the layout and CFG, filled by `cfg`.
    pub cfg: cfg::Cfg,
    /// Where each value is defined, filled by `ssa`.
    pub defs: ssa::Defs,
}

impl<'a> Ctx<'a> {
    fn new(m: &'a Module, id: FuncId, f: &'a Func) -> Ctx<'a> {
        Ctx {
            m,
            id,
            f,
            errors: Vec::new(),
            cfg: cfg::Cfg::default(),
            defs: ssa::Defs::default(),
        }
    }

    fn run(&mut self) {
        typing::check_signature(self);
        rules::check_declared_rules(self);
        ssa::check_params(self);
        if !cfg::check_layout(self) {
            return;
        }
        cfg::check_blocks(self);
        cfg::build_cfg(self);
        ssa::compute_defs(self);
        for bi in 0..self.cfg.layout.len() {
            let block = self.cfg.layout[bi];
            let Some(data) = self.f.blocks.get(block) else {
                continue;
            };
            for (k, &inst) in data.insts.iter().enumerate() {
                let slot = Slot {
                    block: bi as u32,
                    index: k as u32,
                };
                if self.cfg.slot_of(inst) != Some(slot) {
                    continue;
                }
                ssa::check_inst(self, slot, inst);
                typing::check_inst(self, slot, inst);
            }
            ssa::check_term(self, bi as u32);
            typing::check_term(self, bi as u32);
        }
    }

    fn finish(mut self) -> Result<(), Vec<VerifyError>> {
        if self.errors.is_empty() {
            return Ok(());
        }
        // Stable: errors of one place keep the order the checks emitted them in.
        self.errors.sort_by_key(|(key, _)| *key);
        Err(self.errors.into_iter().map(|(_, e)| e).collect())
    }

    fn push(
        &mut self,
        key: Key,
        block: Option<Block>,
        stmt: Option<u32>,
        pos: Option<Pos>,
        place: Place,
        msg: String,
    ) {
        let label = block.and_then(|b| self.f.blocks.get(b)).map(|d| d.label);
        let pos = pos
            .or_else(|| block.and_then(|b| self.f.blocks.get(b)).and_then(|d| d.pos))
            .or(self.f.pos);
        let loc = Location {
            func: Some(self.f.name.as_str().into()),
            block: label,
            stmt,
            pos,
        };
        self.errors.push((key, VerifyError { loc, msg, place }));
    }

    /// Reports an error about the function as a whole.
    pub fn err_func(&mut self, msg: String) {
        let place = Place::Func(self.id);
        self.push((0, 0), None, None, None, place, msg);
    }

    /// Reports an error about the block at layout index `bi`.
    pub fn err_block(&mut self, bi: u32, msg: String) {
        let block = self.cfg.layout[bi as usize];
        let place = Place::Block(self.id, block);
        self.push((bi + 1, 0), Some(block), None, None, place, msg);
    }

    /// Reports an error about the statement entry `index` of the block at layout
    /// index `bi` that is not a statement of its own (an invalid or repeated handle).
    pub fn err_entry(&mut self, slot: Slot, msg: String) {
        let block = self.cfg.layout[slot.block as usize];
        let place = Place::Block(self.id, block);
        self.push(
            (slot.block + 1, slot.index + 1),
            Some(block),
            Some(slot.index + 1),
            None,
            place,
            msg,
        );
    }

    /// Reports an error about statement `inst` at `slot`.
    pub fn err_inst(&mut self, slot: Slot, inst: Inst, msg: String) {
        let block = self.cfg.layout[slot.block as usize];
        let pos = self.f.insts.get(inst).and_then(|d| d.pos);
        let place = Place::Inst(self.id, inst);
        self.push(
            (slot.block + 1, slot.index + 1),
            Some(block),
            Some(slot.index + 1),
            pos,
            place,
            msg,
        );
    }

    /// Reports an error about the terminator of the block at layout index `bi`.
    pub fn err_term(&mut self, bi: u32, msg: String) {
        let block = self.cfg.layout[bi as usize];
        let data = self.f.blocks.get(block);
        let stmt = data.map_or(1, |d| d.insts.len() as u32 + 1);
        let pos = data.and_then(|d| d.term_pos);
        let place = Place::Term(self.id, block);
        self.push((bi + 1, stmt), Some(block), Some(stmt), pos, place, msg);
    }

    /// Reports an error about a statement or terminator.
    pub fn err_at(&mut self, at: At, msg: String) {
        match at {
            At::Inst(slot, inst) => self.err_inst(slot, inst, msg),
            At::Term(bi) => self.err_term(bi, msg),
        }
    }

    /// `%name` if the value has a name, else `%index`.
    pub fn value_name(&self, v: Value) -> String {
        match self.f.values.get(v).and_then(|d| d.name.as_deref()) {
            Some(name) => format!("%{name}"),
            None => format!("%{}", v.as_u32()),
        }
    }

    /// `#label` of a block of the table, or a description of an invalid handle.
    pub fn block_name(&self, b: Block) -> String {
        match self.f.blocks.get(b) {
            Some(d) => format!("#{}", d.label),
            None => format!("invalid block handle {}", b.as_u32()),
        }
    }
}
