//! BBCode: a function as blocks with explicit successors and stable IDs, the
//! form the reverse transform reads (DESIGN.md, Reverse mode).
//!
//! The IR already names blocks, statements and values by stable entity IDs;
//! what ties its blocks to an order is `gotoifnot`, which falls through to the
//! next block of the layout. BBCode replaces it by a two-way `br` whose both
//! targets are explicit, so blocks can be inserted, split and reordered
//! freely; [`BBCode::into_func`] chooses a layout again, adding a jump block
//! where a branch's fall-through target does not come next.
//!
//! Assumes a function whose blocks all have terminators (a verified one).
//! Guarantees: `into_func(from_func(f))` of a function whose layout needs no
//! jump blocks is structurally equal to `f`; the statements, values and their
//! IDs are never renumbered; predecessor lists are in block order without
//! repeats. Nothing recurses.

use irad_ir::entity::SecondaryMap;
use irad_ir::text::{Line, func_lines};
use irad_ir::{Block, BlockData, Func, FuncId, Inst, InstKind, Module, Operand, Terminator};
use smallvec::SmallVec;
use std::fmt::{self, Write as _};

/// How a BBCode block ends: like [`Terminator`], with both targets of a branch
/// explicit.
#[derive(Clone, Debug, PartialEq)]
pub enum BTerm {
    /// `goto #b`.
    Goto(Block),
    /// `br %c, #then, #else`: to `then` when `cond` is true, else to `else_`.
    Br {
        /// The condition.
        cond: Operand,
        /// Where to go when it is true.
        then: Block,
        /// Where to go when it is false.
        else_: Block,
    },
    /// `switch %i, [#b...]`.
    Switch {
        /// The index.
        index: Operand,
        /// The targets by index.
        targets: SmallVec<[Block; 4]>,
    },
    /// `return op`.
    Return(Operand),
}

impl BTerm {
    /// The successors, in order (for `br`, `then` first).
    pub fn successors(&self) -> SmallVec<[Block; 2]> {
        match self {
            BTerm::Goto(b) => SmallVec::from_slice(&[*b]),
            BTerm::Br { then, else_, .. } => SmallVec::from_slice(&[*then, *else_]),
            BTerm::Switch { targets, .. } => targets.iter().copied().collect(),
            BTerm::Return(_) => SmallVec::new(),
        }
    }
}

/// One block: its stable ID, label, statements (IDs into the function's
/// statement table) and terminator.
#[derive(Clone, Debug)]
pub struct BBlock {
    /// The block's ID (an IR block of [`BBCode::func`]).
    pub id: Block,
    /// The statements, phis first.
    pub stmts: Vec<Inst>,
    /// How the block ends.
    pub term: BTerm,
}

/// A function in BBCode form.
#[derive(Clone, Debug)]
pub struct BBCode {
    /// The function: values, statements and block data (labels, positions);
    /// its layout and terminators are ignored until [`BBCode::into_func`].
    pub func: Func,
    /// The blocks in order; the first is the entry.
    pub blocks: Vec<BBlock>,
}

/// Why a function has no BBCode form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BBCodeError(pub String);

impl fmt::Display for BBCodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl BBCode {
    /// The BBCode of `func`: its layout blocks in order, fall-through made
    /// explicit.
    pub fn from_func(func: &Func) -> Result<BBCode, BBCodeError> {
        let blocks = BBCode::blocks_of(func)?;
        Ok(BBCode {
            func: func.clone(),
            blocks,
        })
    }

    /// The blocks of [`BBCode::from_func`] with, as [`BBCode::func`], an
    /// empty function of `func`'s name and result type instead of a copy:
    /// for a reader of the block structure that has `func` at hand (the
    /// reverse transform's `Shape`, whose primal may be hundreds of
    /// megabytes). Editing it ([`BBCode::insert_block`],
    /// [`BBCode::split_block`], [`BBCode::into_func`]) is not meaningful.
    pub fn blocks_only(func: &Func) -> Result<BBCode, BBCodeError> {
        let blocks = BBCode::blocks_of(func)?;
        Ok(BBCode {
            func: Func::new(&func.name, Vec::new(), func.ret.clone()),
            blocks,
        })
    }

    /// `func`'s layout blocks in order, fall-through made explicit.
    fn blocks_of(func: &Func) -> Result<Vec<BBlock>, BBCodeError> {
        let mut blocks = Vec::with_capacity(func.layout.len());
        for (i, &id) in func.layout.iter().enumerate() {
            let data = &func.blocks[id];
            let label = data.label;
            let term = match &data.term {
                Some(Terminator::Goto(b)) => BTerm::Goto(*b),
                Some(Terminator::GotoIfNot { cond, target }) => {
                    let next = func.layout.get(i + 1).copied().ok_or_else(|| {
                        BBCodeError(format!("block #{label} falls through past the last block"))
                    })?;
                    BTerm::Br {
                        cond: *cond,
                        then: next,
                        else_: *target,
                    }
                }
                Some(Terminator::Return(op)) => BTerm::Return(*op),
                Some(Terminator::Switch { index, targets }) => BTerm::Switch {
                    index: *index,
                    targets: targets.iter().copied().collect(),
                },
                None => return Err(BBCodeError(format!("block #{label} has no terminator"))),
            };
            blocks.push(BBlock {
                id,
                stmts: data.insts.clone(),
                term,
            });
        }
        Ok(blocks)
    }

    /// The position of each block in [`BBCode::blocks`].
    pub fn index(&self) -> SecondaryMap<Block, Option<usize>> {
        let mut index = SecondaryMap::new();
        for (i, b) in self.blocks.iter().enumerate() {
            index.set(b.id, Some(i));
        }
        index
    }

    /// The predecessors of each block (by position), in block order, without
    /// repeats; targets that are not blocks of this BBCode are ignored.
    pub fn preds(&self) -> Vec<Vec<usize>> {
        let index = self.index();
        let mut preds = vec![Vec::new(); self.blocks.len()];
        for (i, b) in self.blocks.iter().enumerate() {
            for s in b.term.successors() {
                if let Some(j) = index[s] {
                    let list: &mut Vec<usize> = &mut preds[j];
                    if list.last() != Some(&i) {
                        list.push(i);
                    }
                }
            }
        }
        preds
    }

    /// The successors of each block (by position), in terminator order.
    pub fn succs(&self) -> Vec<SmallVec<[usize; 2]>> {
        let index = self.index();
        self.blocks
            .iter()
            .map(|b| {
                b.term
                    .successors()
                    .iter()
                    .filter_map(|&s| index[s])
                    .collect()
            })
            .collect()
    }

    /// A new empty block ending in `term`, inserted at position `at`, with a
    /// fresh label.
    pub fn insert_block(&mut self, at: usize, term: BTerm) -> Block {
        let label = self.func.fresh_label();
        let id = self.func.add_block(label);
        self.blocks.insert(
            at.min(self.blocks.len()),
            BBlock {
                id,
                stmts: Vec::new(),
                term,
            },
        );
        id
    }

    /// Splits the block at position `at` before its statement number `k`
    /// (from 0; not a phi): the statements from `k` on and the terminator
    /// move to a new block placed right after it, which the old block jumps
    /// to; phis of the successors are updated to name the new block.
    pub fn split_block(&mut self, at: usize, k: usize) -> Result<Block, BBCodeError> {
        let old = self
            .blocks
            .get(at)
            .ok_or_else(|| BBCodeError(format!("no block at position {at}")))?;
        if k > old.stmts.len() {
            return Err(BBCodeError(format!("no statement {k} to split at")));
        }
        if let Some(&first) = old.stmts.get(k)
            && matches!(self.func.insts[first].kind, InstKind::Phi { .. })
        {
            return Err(BBCodeError("cannot split a block among its phis".into()));
        }
        let old_id = old.id;
        let new = self.insert_block(at + 1, BTerm::Return(Operand::Const(irad_ir::Const::Unit)));
        let moved: Vec<Inst> = self.blocks[at].stmts.drain(k..).collect();
        let term = std::mem::replace(&mut self.blocks[at].term, BTerm::Goto(new));
        for s in term.successors() {
            if let Some(sb) = self.blocks.iter().find(|b| b.id == s) {
                for &i in &sb.stmts {
                    if let InstKind::Phi { entries } = &mut self.func.insts[i].kind {
                        for e in entries.iter_mut().filter(|e| e.0 == old_id) {
                            e.0 = new;
                        }
                    }
                }
            }
        }
        let nb = &mut self.blocks[at + 1];
        nb.stmts = moved;
        nb.term = term;
        Ok(new)
    }

    /// Moves the block at position `from` to position `to`.
    pub fn move_block(&mut self, from: usize, to: usize) {
        if from < self.blocks.len() {
            let b = self.blocks.remove(from);
            let to = to.min(self.blocks.len());
            self.blocks.insert(to, b);
        }
    }

    /// The IR function: the blocks in order, each `br` a `gotoifnot` to its
    /// else target that falls through to its then target, through a new
    /// `goto` block placed after it when the then target does not come next.
    pub fn into_func(self) -> Func {
        let BBCode { mut func, blocks } = self;
        let mut layout = Vec::with_capacity(blocks.len());
        for (i, b) in blocks.iter().enumerate() {
            let next = blocks.get(i + 1).map(|n| n.id);
            let data: &mut BlockData = &mut func.blocks[b.id];
            data.insts = b.stmts.clone();
            layout.push(b.id);
            match &b.term {
                BTerm::Goto(t) => data.term = Some(Terminator::Goto(*t)),
                BTerm::Return(op) => data.term = Some(Terminator::Return(*op)),
                BTerm::Switch { index, targets } => {
                    data.term = Some(switch_term(*index, targets));
                }
                BTerm::Br { cond, then, else_ } => {
                    data.term = Some(Terminator::GotoIfNot {
                        cond: *cond,
                        target: *else_,
                    });
                    if next != Some(*then) {
                        let label = func.fresh_label();
                        let jump = func.add_block(label);
                        func.blocks[jump].term = Some(Terminator::Goto(*then));
                        layout.push(jump);
                        // The then target's phis now come from the jump block.
                        for &i in &func.blocks[*then].insts.clone() {
                            if let InstKind::Phi { entries } = &mut func.insts[i].kind {
                                for e in entries.iter_mut().filter(|e| e.0 == b.id) {
                                    e.0 = jump;
                                }
                            }
                        }
                    }
                }
            }
        }
        // `add_block` appended the new blocks to the layout; set ours.
        func.layout = layout;
        func
    }
}

fn switch_term(index: Operand, targets: &[Block]) -> Terminator {
    Terminator::Switch {
        index,
        targets: targets.iter().copied().collect(),
    }
}

impl BBCode {
    /// The BBCode as text: the IR printer's lines for the header, labels and
    /// statements (`func_id` names the function in `module`, which supplies
    /// the names of callees), and each terminator with explicit targets
    /// (`br %c, #then, #else` for a two-way branch).
    pub fn print(&self, module: &Module, func_id: FuncId) -> String {
        let mut m = module.clone();
        let mut func = self.func.clone();
        func.layout = self.blocks.iter().map(|b| b.id).collect();
        let mut thens: SecondaryMap<Block, Option<Block>> = SecondaryMap::new();
        for b in &self.blocks {
            let data = &mut func.blocks[b.id];
            data.insts = b.stmts.clone();
            data.term = Some(match &b.term {
                BTerm::Goto(t) => Terminator::Goto(*t),
                BTerm::Return(o) => Terminator::Return(*o),
                BTerm::Switch { index, targets } => switch_term(*index, targets),
                BTerm::Br { cond, then, else_ } => {
                    thens.set(b.id, Some(*then));
                    Terminator::GotoIfNot {
                        cond: *cond,
                        target: *else_,
                    }
                }
            });
        }
        let mut labels: SecondaryMap<Block, u32> = SecondaryMap::new();
        for (b, d) in func.blocks.iter() {
            labels.set(b, d.label);
        }
        if let Some(slot) = m.get_mut(func_id) {
            *slot = func;
        }
        let mut out = String::new();
        for (line, text) in func_lines(&m, func_id) {
            match line {
                Line::Header => {
                    out.push_str(&text.replacen("func", "bbcode", 1));
                }
                Line::Term(b) if thens[b].is_some() => {
                    let then = thens[b].map_or(0, |t| labels[t]);
                    let rest = text.trim_start().trim_start_matches("gotoifnot ");
                    let (cond, els) = rest.rsplit_once(", ").unwrap_or((rest, "?"));
                    let _ = write!(out, "  br {cond}, #{then}, {els}");
                }
                _ => out.push_str(&text),
            }
            out.push('\n');
        }
        out
    }
}
