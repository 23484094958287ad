//! Translates a function into the form the interpreter runs: dense value slots,
//! operands resolved to slots or ready-made constants, phis turned into
//! per-edge parallel moves (one edge per `switch` target), the fall-through
//! block of every `gotoifnot` found once, the tape of every `push` and `pop`
//! numbered.
//!
//! Assumes nothing about the function: it need not be verified. Anything
//! malformed (an invalid handle, a misplaced phi, a missing terminator or phi
//! entry) becomes an `internal error` that is raised only if execution reaches
//! it, so a malformed part that never runs does not stop the rest. Guarantees:
//! every slot index in the result is below `n_slots`, every operand range lies
//! within `operands`, every jump target is a block index of `blocks`.

use super::internal_message;
use super::tape::Tapes;
use super::value::Val;
use crate::entity::EntityRef;
use crate::func::{Block, Const, Func, FuncId, Inst, InstKind, Module, Operand, Terminator, Value};
use crate::loc::Pos;
use crate::prim::Prim;
use crate::types::{Scalar, Type};
use std::ops::Range;

/// An operand: a value slot of the frame or a constant.
#[derive(Clone, Debug)]
pub(super) enum Src {
    /// The frame slot of an SSA value.
    Slot(u32),
    /// A constant.
    Const(Val),
}

/// A compiled statement (phis excepted: they live on edges).
#[derive(Debug)]
pub(super) struct Op {
    /// What it does.
    pub kind: OpKind,
    /// Its statement number in the block, from 1.
    pub stmt: u32,
    /// Its source position.
    pub pos: Option<Pos>,
}

/// What a compiled statement does.
#[derive(Debug)]
pub(super) enum OpKind {
    /// `call prim(args)`; `elem` is the element type of an array result.
    Prim {
        prim: Prim,
        args: Range<u32>,
        dst: Option<u32>,
        elem: Option<Scalar>,
    },
    /// `invoke @func(args)`.
    Invoke {
        func: FuncId,
        args: Range<u32>,
        dst: Option<u32>,
    },
    /// `call tuple(args)` with a result: `ty` is the result type, against
    /// which the new tuple's shape is checked (see `Interpreter::execute`).
    Tuple {
        args: Range<u32>,
        dst: u32,
        ty: Box<Type>,
    },
    /// `call frule(f, N)` with a result of function type `ty`.
    Frule {
        args: Range<u32>,
        dst: u32,
        ty: Box<Type>,
    },
    /// `call push(arg)` onto tape number `tape`.
    Push { arg: Src, tape: u32 },
    /// `%dst = call pop() :: T`, from tape number `tape` (that of `T`).
    Pop { dst: u32, tape: u32 },
    /// `call revfwd(arg)` (`back` false) or `call revback(arg)` (`back` true).
    RevRule {
        back: bool,
        arg: Src,
        dst: Option<u32>,
    },
    /// `call %callee(args)`.
    CallValue {
        callee: u32,
        args: Range<u32>,
        dst: Option<u32>,
    },
    /// A statement of the sparse tangent builder (`sonehot szero sscale
    /// sadd sdense`), run on the interpreter's arena.
    Sparse {
        prim: Prim,
        args: Range<u32>,
        dst: Option<u32>,
    },
    /// A malformed statement: raises this internal error when reached.
    Bad(Box<str>),
}

/// A control-flow edge: the target block and the phi moves into it, which are
/// performed simultaneously.
#[derive(Debug)]
pub(super) struct Edge {
    /// The target's index in `CFunc::blocks`.
    pub target: u32,
    /// (destination slot, source) for each phi of the target.
    pub moves: Box<[(u32, Src)]>,
}

/// An edge, or the internal error raised when it is taken.
pub(super) type EdgeResult = Result<Edge, Box<str>>;

/// A compiled terminator.
#[derive(Debug)]
pub(super) enum Term {
    /// `goto`.
    Goto(EdgeResult),
    /// `gotoifnot cond, target`; `next` is the fall-through edge.
    GotoIfNot {
        cond: Src,
        next: EdgeResult,
        target: EdgeResult,
    },
    /// `return`.
    Return(Src),
    /// `switch index, [targets]`: one edge per target, in index order.
    Switch {
        index: Src,
        targets: Box<[EdgeResult]>,
    },
    /// A malformed or missing terminator: raises this internal error.
    Bad(Box<str>),
}

/// A compiled block.
#[derive(Debug)]
pub(super) struct CBlock {
    /// The block's label.
    pub label: u32,
    /// Its statements after the leading phis.
    pub ops: Box<[Op]>,
    /// Its terminator.
    pub term: Term,
    /// The terminator's statement number (after all statements).
    pub term_stmt: u32,
    /// The terminator's source position.
    pub term_pos: Option<Pos>,
}

/// A compiled function.
#[derive(Debug)]
pub(super) struct CFunc {
    /// The function's name, for locations.
    pub name: Box<str>,
    /// The number of value slots of a frame.
    pub n_slots: usize,
    /// The slot of each parameter.
    pub params: Box<[u32]>,
    /// The entry block's index, or the internal error raised on entry.
    pub entry: Result<u32, Box<str>>,
    /// Every block, indexed like `Func::blocks`.
    pub blocks: Box<[CBlock]>,
    /// The operands of all statements; `Op` argument ranges index this.
    pub operands: Box<[Src]>,
}

/// Compiles `func` of `module`, numbering the tapes its `push` and `pop`
/// statements use in `tapes`.
pub(super) fn compile(func: &Func, module: &Module, tapes: &mut Tapes) -> CFunc {
    let mut ctx = Ctx {
        func,
        module,
        tapes,
        operands: Vec::new(),
        next: vec![None; func.blocks.len()],
    };
    for pair in func.layout.windows(2) {
        if let [b, n] = pair
            && let Some(slot) = ctx.next.get_mut(b.index())
            && slot.is_none()
        {
            *slot = Some(*n);
        }
    }
    let blocks = func.blocks.keys().map(|b| ctx.block(b)).collect();
    let params = func
        .params
        .iter()
        .map(|v| v.index() as u32)
        .filter(|&s| (s as usize) < func.values.len())
        .collect::<Box<[u32]>>();
    let entry = match func.entry() {
        Some(b) if func.blocks.is_valid(b) => Ok(b.index() as u32),
        _ => Err(internal_message(format_args!("function @{} has no blocks", func.name)).into()),
    };
    let entry = if params.len() != func.params.len() {
        Err(internal_message("invalid parameter value handle").into())
    } else {
        entry
    };
    CFunc {
        name: func.name.as_str().into(),
        n_slots: func.values.len(),
        params,
        entry,
        blocks,
        operands: ctx.operands.into_boxed_slice(),
    }
}

struct Ctx<'a> {
    func: &'a Func,
    module: &'a Module,
    tapes: &'a mut Tapes,
    operands: Vec<Src>,
    /// The block after each block in the layout (first occurrence).
    next: Vec<Option<Block>>,
}

impl Ctx<'_> {
    fn block(&mut self, block: Block) -> CBlock {
        let data = &self.func.blocks[block];
        let n_phis = self.leading_phis(block);
        let ops = data
            .insts
            .iter()
            .enumerate()
            .skip(n_phis)
            .map(|(i, &inst)| Op {
                kind: self.op(inst),
                stmt: stmt_number(i),
                pos: self.func.insts.get(inst).and_then(|d| d.pos),
            })
            .collect();
        let term = match &data.term {
            Some(Terminator::Goto(target)) => Term::Goto(self.edge(block, *target)),
            Some(Terminator::GotoIfNot { cond, target }) => match self.src(cond) {
                Ok(cond) => Term::GotoIfNot {
                    cond,
                    next: match self.next.get(block.index()).copied().flatten() {
                        Some(next) => self.edge(block, next),
                        None => Err(internal_message(format_args!(
                            "gotoifnot in block #{} has no next block to fall through to",
                            data.label
                        ))
                        .into()),
                    },
                    target: self.edge(block, *target),
                },
                Err(e) => Term::Bad(e),
            },
            Some(Terminator::Return(op)) => match self.src(op) {
                Ok(src) => Term::Return(src),
                Err(e) => Term::Bad(e),
            },
            Some(Terminator::Switch { index, targets }) => match self.src(index) {
                Ok(index) => Term::Switch {
                    index,
                    targets: targets.iter().map(|&t| self.edge(block, t)).collect(),
                },
                Err(e) => Term::Bad(e),
            },
            None => Term::Bad(
                internal_message(format_args!("block #{} has no terminator", data.label)).into(),
            ),
        };
        CBlock {
            label: data.label,
            ops,
            term,
            term_stmt: stmt_number(data.insts.len()),
            term_pos: data.term_pos,
        }
    }

    /// The number of phis at the start of `block`.
    fn leading_phis(&self, block: Block) -> usize {
        self.func.blocks[block]
            .insts
            .iter()
            .take_while(|&&inst| {
                matches!(
                    self.func.insts.get(inst).map(|d| &d.kind),
                    Some(InstKind::Phi { .. })
                )
            })
            .count()
    }

    fn op(&mut self, inst: Inst) -> OpKind {
        match self.try_op(inst) {
            Ok(kind) => kind,
            Err(msg) => OpKind::Bad(msg),
        }
    }

    fn try_op(&mut self, inst: Inst) -> Result<OpKind, Box<str>> {
        let data = self
            .func
            .insts
            .get(inst)
            .ok_or_else(|| internal_message("invalid statement handle"))?;
        let dst = match data.result {
            Some(v) if v.index() < self.func.values.len() => Some(v.index() as u32),
            Some(_) => return Err(internal_message("invalid result value handle").into()),
            None => None,
        };
        let result_ty = data
            .result
            .and_then(|v| self.func.values.get(v))
            .map(|d| &d.ty);
        let elem = match result_ty {
            Some(Type::Array(elem)) => Some(*elem),
            _ => None,
        };
        Ok(match (&data.kind, dst, result_ty) {
            (
                InstKind::Prim {
                    prim: Prim::Tuple,
                    args,
                },
                Some(dst),
                Some(ty),
            ) => OpKind::Tuple {
                args: self.args(args)?,
                dst,
                ty: Box::new(ty.clone()),
            },
            (
                InstKind::Prim {
                    prim: Prim::Frule,
                    args,
                },
                Some(dst),
                Some(ty),
            ) => OpKind::Frule {
                args: self.args(args)?,
                dst,
                ty: Box::new(ty.clone()),
            },
            (
                InstKind::Prim {
                    prim: Prim::Push,
                    args,
                },
                ..,
            ) => {
                let [arg] = args.as_slice() else {
                    return Err(internal_message("`push` takes 1 operand").into());
                };
                let ty = self
                    .func
                    .operand_type(arg, self.module)
                    .ok_or_else(|| internal_message("`push` of an operand without a type"))?;
                OpKind::Push {
                    arg: self.src(arg)?,
                    tape: self.tapes.id(&ty),
                }
            }
            (
                InstKind::Prim {
                    prim: Prim::Pop, ..
                },
                Some(dst),
                Some(ty),
            ) => OpKind::Pop {
                dst,
                tape: self.tapes.id(ty),
            },
            (
                InstKind::Prim {
                    prim: prim @ (Prim::Revfwd | Prim::Revback),
                    args,
                },
                ..,
            ) => {
                let [arg] = args.as_slice() else {
                    return Err(internal_message(format_args!("`{prim}` takes 1 operand")).into());
                };
                OpKind::RevRule {
                    back: *prim == Prim::Revback,
                    arg: self.src(arg)?,
                    dst,
                }
            }
            (InstKind::Prim { prim, args }, ..) if prim.info().sig == crate::prim::Sig::Sparse => {
                OpKind::Sparse {
                    prim: *prim,
                    args: self.args(args)?,
                    dst,
                }
            }
            (InstKind::Prim { prim, args }, ..) => OpKind::Prim {
                prim: *prim,
                args: self.args(args)?,
                dst,
                elem,
            },
            (InstKind::Invoke { func, args }, ..) => OpKind::Invoke {
                func: *func,
                args: self.args(args)?,
                dst,
            },
            (InstKind::CallValue { callee, args }, ..) => OpKind::CallValue {
                callee: self.slot(*callee)?,
                args: self.args(args)?,
                dst,
            },
            (InstKind::Phi { .. }, ..) => {
                return Err(internal_message("phi after a statement that is not a phi").into());
            }
        })
    }

    /// Appends `args` to the operand table and returns their range.
    fn args(&mut self, args: &[Operand]) -> Result<Range<u32>, Box<str>> {
        let start = self.operands.len() as u32;
        for a in args {
            let src = self.src(a)?;
            self.operands.push(src);
        }
        Ok(start..self.operands.len() as u32)
    }

    fn src(&self, op: &Operand) -> Result<Src, Box<str>> {
        Ok(match op {
            Operand::Value(v) => Src::Slot(self.slot(*v)?),
            Operand::Const(c) => Src::Const(const_val(c)),
        })
    }

    fn slot(&self, v: Value) -> Result<u32, Box<str>> {
        if v.index() < self.func.values.len() {
            Ok(v.index() as u32)
        } else {
            Err(internal_message(format_args!("invalid value handle {v:?}")).into())
        }
    }

    /// The edge from `from` to `to` with the moves of `to`'s phis.
    fn edge(&self, from: Block, to: Block) -> EdgeResult {
        let Some(target) = self.func.blocks.get(to) else {
            return Err(internal_message("invalid block handle").into());
        };
        let from_label = self.func.blocks[from].label;
        let mut moves = Vec::new();
        for &inst in target.insts.iter().take(self.leading_phis(to)) {
            let Some(data) = self.func.insts.get(inst) else {
                continue;
            };
            let InstKind::Phi { entries } = &data.kind else {
                continue;
            };
            let Some((_, op)) = entries.iter().find(|(pred, _)| *pred == from) else {
                return Err(internal_message(format_args!(
                    "phi in block #{} has no entry for predecessor #{from_label}",
                    target.label
                ))
                .into());
            };
            let src = self.src(op)?;
            if let Some(v) = data.result {
                moves.push((self.slot(v)?, src));
            }
        }
        Ok(Edge {
            target: to.index() as u32,
            moves: moves.into_boxed_slice(),
        })
    }
}

/// The statement number (from 1) of the statement at index `i` of its block.
fn stmt_number(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX).saturating_add(1)
}

/// The run-time value of a constant operand.
fn const_val(c: &Const) -> Val {
    match c {
        Const::F64(x) => Val::F64(*x),
        Const::I64(x) => Val::I64(*x),
        Const::Bool(x) => Val::Bool(*x),
        Const::Unit => Val::Unit,
        Const::Func(f) => Val::Func(*f),
    }
}
