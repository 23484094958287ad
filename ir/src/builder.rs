//! The builder: the one way the parser, the front end, the passes, the tests and
//! embedding compilers make IR.
//!
//! [`FuncBuilder`] appends statements to a current block and types each one as
//! it goes (through the primitive table and callee signatures), so a typing
//! mistake is reported at the call that made it. It checks what it can see
//! locally (handles, names, arities, operand types, one terminator per block,
//! phis first); whole-function properties (dominance, phi entries against
//! predecessors) are the verifier's.
//!
//! It builds on the data model in `func.rs`, never the other way round; its
//! error [`BuildError`] and the name rules are defined there and re-exported
//! here.

use crate::func::{
    Args, Block, Const, FuncId, FuncRef, InstKind, Module, Operand, Terminator, Value,
    const_scalar, const_type,
};
use crate::loc::Pos;
use crate::prim::Prim;
use crate::types::{Scalar, Type};
use rustc_hash::FxHashSet as HashSet;
use smallvec::SmallVec;

/// The builder's error and the name rules live with the data model, which
/// uses them too; re-exported so that `builder::` paths keep working.
pub use crate::func::{BuildError, is_ident, is_value_name};

impl Module {
    /// Declares a function with named (or unnamed) parameters and no blocks yet.
    pub fn declare_func(
        &mut self,
        name: &str,
        params: Vec<(Option<String>, Type)>,
        ret: Type,
    ) -> Result<FuncId, BuildError> {
        if !is_ident(name) {
            return Err(BuildError::BadName(name.to_string()));
        }
        for pname in params.iter().filter_map(|(n, _)| n.as_deref()) {
            if !is_value_name(pname) {
                return Err(BuildError::BadName(pname.to_string()));
            }
        }
        self.add_func(crate::func::Func::new(name, params, ret))
    }
}

/// Appends statements to one function of a module.
pub struct FuncBuilder<'m> {
    module: &'m mut Module,
    func: FuncId,
    current: Option<Block>,
    pos: Option<Pos>,
    /// Labels in use, and the next label to try, kept from the first block
    /// made on, so that making a block costs O(1) rather than a scan.
    labels: Option<(HashSet<u32>, u32)>,
}

impl<'m> FuncBuilder<'m> {
    /// A builder for function `func` of `module`.
    pub fn new(module: &'m mut Module, func: FuncId) -> Result<FuncBuilder<'m>, BuildError> {
        if module.get(func).is_none() {
            return Err(BuildError::BadHandle("function"));
        }
        Ok(FuncBuilder {
            module,
            func,
            current: None,
            pos: None,
            labels: None,
        })
    }

    /// The function being built.
    pub fn func(&self) -> &crate::func::Func {
        &self.module[self.func]
    }

    /// The module being built.
    pub fn module(&self) -> &Module {
        self.module
    }

    /// Parameter `i` of the function.
    pub fn param(&self, i: usize) -> Result<Value, BuildError> {
        self.func()
            .params
            .get(i)
            .copied()
            .ok_or(BuildError::BadHandle("parameter"))
    }

    /// Sets the source position recorded on the statements and terminators that follow.
    pub fn set_pos(&mut self, pos: Option<Pos>) {
        self.pos = pos;
    }

    /// Appends a block with a fresh label to the layout.
    pub fn create_block(&mut self) -> Block {
        let (used, next) = self.labels();
        // The next label above every label in use, or, past u32::MAX, the
        // smallest free one (a function has fewer than 2^32 blocks).
        let mut label = *next;
        while used.contains(&label) {
            label = label.wrapping_add(1);
        }
        used.insert(label);
        *next = label.wrapping_add(1);
        self.module[self.func].add_block(label)
    }

    /// Appends a block labelled `#label` to the layout.
    pub fn create_block_labeled(&mut self, label: u32) -> Result<Block, BuildError> {
        let (used, next) = self.labels();
        if !used.insert(label) {
            return Err(BuildError::DuplicateLabel(label));
        }
        if label >= *next {
            *next = label.wrapping_add(1);
        }
        let f = &mut self.module[self.func];
        let block = f.add_block(label);
        f.blocks[block].pos = self.pos;
        Ok(block)
    }

    /// Makes `block` the block that statements are appended to.
    pub fn switch_to_block(&mut self, block: Block) -> Result<(), BuildError> {
        if !self.func().blocks.is_valid(block) {
            return Err(BuildError::BadHandle("block"));
        }
        self.current = Some(block);
        Ok(())
    }

    /// The block statements are appended to.
    pub fn current_block(&self) -> Option<Block> {
        self.current
    }

    /// Gives `value` the name it prints with (`%name`). Names need not be unique:
    /// the printer renames duplicates.
    pub fn set_name(&mut self, value: Value, name: &str) -> Result<(), BuildError> {
        if !is_value_name(name) {
            return Err(BuildError::BadName(name.to_string()));
        }
        let data = self.module[self.func]
            .values
            .get_mut(value)
            .ok_or(BuildError::BadHandle("value"))?;
        data.name = Some(name.into());
        Ok(())
    }

    /// `call prim(args)`; the result is `None` when its type is `()`.
    /// Use [`FuncBuilder::alloc`] for `alloc` and [`FuncBuilder::pop`] for
    /// `pop`, which need a type.
    pub fn prim(&mut self, prim: Prim, args: &[Operand]) -> Result<Option<Value>, BuildError> {
        let ty = self.prim_type(prim, args, None)?;
        self.append(
            InstKind::Prim {
                prim,
                args: args.into(),
            },
            ty,
        )
    }

    /// `call alloc(n) :: [elem]`.
    pub fn alloc(&mut self, elem: Scalar, n: Operand) -> Result<Value, BuildError> {
        let annot = Type::Array(elem);
        let ty = self.prim_type(Prim::Alloc, &[n], Some(&annot))?;
        let args: Args = SmallVec::from_slice(&[n]);
        self.append(
            InstKind::Prim {
                prim: Prim::Alloc,
                args,
            },
            ty,
        )?
        .ok_or_else(|| BuildError::Type("alloc has no result".into()))
    }

    /// `%v = call pop() :: ty`: pops the last value pushed on the tape of type
    /// `ty`. The statement always has a result, even of type `()`, since the
    /// annotation that names the tape is printed only on a result.
    pub fn pop(&mut self, ty: Type) -> Result<Value, BuildError> {
        let ty = self.prim_type(Prim::Pop, &[], Some(&ty))?;
        let block = self.open_block()?;
        let kind = InstKind::Prim {
            prim: Prim::Pop,
            args: Args::new(),
        };
        let pos = self.pos;
        let (_, result) = self.module[self.func].push_inst(block, kind, Some(ty), pos);
        result.ok_or_else(|| BuildError::Type("pop has no result".into()))
    }

    /// `invoke @callee(args)`; the result is `None` when the callee returns `()`.
    pub fn invoke(
        &mut self,
        callee: FuncId,
        args: &[Operand],
    ) -> Result<Option<Value>, BuildError> {
        let f = self
            .module
            .get(callee)
            .ok_or(BuildError::BadHandle("function"))?;
        // Inline: an invoke is built for every call statement derived.
        let params: SmallVec<[Type; 4]> =
            f.params.iter().map(|&v| f.values[v].ty.clone()).collect();
        let ret = f.ret.clone();
        self.check_args(&format_args!("@{}", f.name), &params, args)?;
        self.append(
            InstKind::Invoke {
                func: callee,
                args: args.into(),
            },
            ret,
        )
    }

    /// `call %callee(args)` through a value of function type.
    pub fn call_value(
        &mut self,
        callee: Value,
        args: &[Operand],
    ) -> Result<Option<Value>, BuildError> {
        let ty = self.operand_type(&Operand::Value(callee))?;
        let Type::Func(sig) = ty else {
            return Err(BuildError::Type(format!(
                "called value has type {ty}, not a function type"
            )));
        };
        self.check_args(&"the called function", &sig.params, args)?;
        self.append(
            InstKind::CallValue {
                callee,
                args: args.into(),
            },
            sig.ret.clone(),
        )
    }

    /// `phi [entries] :: ty` at the start of the current block. Entries may be
    /// added later with [`FuncBuilder::add_phi_entry`] (for loop back edges).
    pub fn phi(&mut self, ty: Type, entries: &[(Block, Operand)]) -> Result<Value, BuildError> {
        let block = self.current.ok_or(BuildError::NoBlock)?;
        let f = &self.module[self.func];
        let first_non_phi = f.blocks[block]
            .insts
            .iter()
            .any(|&i| !matches!(f.insts[i].kind, InstKind::Phi { .. }));
        if first_non_phi {
            return Err(BuildError::PhiNotFirst(f.blocks[block].label));
        }
        for (pred, op) in entries {
            self.check_phi_entry(&ty, *pred, op)?;
        }
        let kind = InstKind::Phi {
            entries: entries.into(),
        };
        self.append(kind, ty.clone())?
            .ok_or_else(|| BuildError::Type("a phi of type () has no result".into()))
    }

    /// An empty `phi :: ty` inserted after the existing phis of `block` (which
    /// need not be the current block, and may already hold other statements).
    /// Its entries are added with [`FuncBuilder::add_phi_entry`]; SSA
    /// construction needs this for loop headers and joins filled before a
    /// variable is first read there.
    pub fn insert_phi(&mut self, block: Block, ty: Type) -> Result<Value, BuildError> {
        self.check_block(block)?;
        if ty == Type::Unit {
            return Err(BuildError::Type("a phi of type () has no result".into()));
        }
        let kind = InstKind::Phi {
            entries: SmallVec::new(),
        };
        let f = &mut self.module[self.func];
        let (inst, result) = f.push_inst(block, kind, Some(ty), None);
        let insts = &mut f.blocks[block].insts;
        // push_inst appended it; move it to just after the leading phis.
        insts.pop();
        let at = insts
            .iter()
            .position(|&i| !matches!(f.insts[i].kind, InstKind::Phi { .. }))
            .unwrap_or(insts.len());
        insts.insert(at, inst);
        result.ok_or_else(|| BuildError::Type("a phi without result".into()))
    }

    /// Adds an entry to the phi that defines `phi`.
    pub fn add_phi_entry(
        &mut self,
        phi: Value,
        pred: Block,
        op: Operand,
    ) -> Result<(), BuildError> {
        let f = &self.module[self.func];
        let data = f.values.get(phi).ok_or(BuildError::BadHandle("value"))?;
        let crate::func::ValueDef::Inst(inst) = data.def else {
            return Err(BuildError::Type("value is a parameter, not a phi".into()));
        };
        let ty = data.ty.clone();
        self.check_phi_entry(&ty, pred, &op)?;
        match &mut self.module[self.func].insts[inst].kind {
            InstKind::Phi { entries } => {
                entries.push((pred, op));
                Ok(())
            }
            _ => Err(BuildError::Type("value is not defined by a phi".into())),
        }
    }

    /// `goto #target`
    pub fn goto(&mut self, target: Block) -> Result<(), BuildError> {
        self.check_block(target)?;
        self.terminate(Terminator::Goto(target))
    }

    /// `gotoifnot cond, #target`: the fall-through block is the next one in the layout.
    pub fn gotoifnot(&mut self, cond: Operand, target: Block) -> Result<(), BuildError> {
        self.check_block(target)?;
        let ty = self.operand_type(&cond)?;
        if ty != Type::Bool {
            return Err(BuildError::Type(format!(
                "gotoifnot condition must be bool, found {ty}"
            )));
        }
        self.terminate(Terminator::GotoIfNot { cond, target })
    }

    /// `switch index, [targets]`: jump to `targets[index]`. The index is an
    /// i64; the targets are blocks of this function, at least one, each listed
    /// once.
    pub fn switch(&mut self, index: Operand, targets: &[Block]) -> Result<(), BuildError> {
        for &target in targets {
            self.check_block(target)?;
        }
        let ty = self.operand_type(&index)?;
        if ty != Type::I64 {
            return Err(BuildError::Type(format!(
                "switch index must be i64, found {ty}"
            )));
        }
        if targets.is_empty() {
            return Err(BuildError::Switch("switch has no targets".into()));
        }
        let mut seen = HashSet::default();
        if let Some(&dup) = targets.iter().find(|&&t| !seen.insert(t)) {
            let label = self.func().blocks[dup].label;
            return Err(BuildError::Switch(format!(
                "switch lists #{label} more than once"
            )));
        }
        self.terminate(Terminator::Switch {
            index,
            targets: targets.into(),
        })
    }

    /// `return value`
    pub fn ret(&mut self, value: Operand) -> Result<(), BuildError> {
        let ty = self.operand_type(&value)?;
        let want = &self.func().ret;
        if &ty != want {
            return Err(BuildError::Type(format!(
                "return value has type {ty}, function returns {want}"
            )));
        }
        self.terminate(Terminator::Return(value))
    }

    /// The type of `op` in this function.
    pub fn operand_type(&self, op: &Operand) -> Result<Type, BuildError> {
        match op {
            Operand::Value(v) => self
                .func()
                .values
                .get(*v)
                .map(|d| d.ty.clone())
                .ok_or(BuildError::BadHandle("value")),
            Operand::Const(c) => const_type(c, self.module).ok_or(match c {
                Const::Func(FuncRef::Prim(p)) => BuildError::Type(p.value_error()),
                _ => BuildError::BadHandle("function"),
            }),
        }
    }

    fn prim_type(
        &self,
        prim: Prim,
        args: &[Operand],
        annot: Option<&Type>,
    ) -> Result<Type, BuildError> {
        // The common statement (`mul` of two f64 values): a fixed scalar
        // signature that the operands meet exactly needs no list of their
        // types; anything else takes the general path, which also words
        // the errors.
        if let Some((params, ret)) = prim.fixed_sig()
            && params.len() == args.len()
            && params.iter().zip(args).all(|(p, a)| match a {
                Operand::Value(v) => self.func().values.get(*v).is_some_and(|d| d.ty == p.ty()),
                Operand::Const(c) => const_scalar(c) == Some(*p),
            })
        {
            return Ok(ret.ty());
        }
        let types = args
            .iter()
            .map(|a| self.operand_type(a))
            .collect::<Result<smallvec::SmallVec<[Type; 4]>, _>>()?;
        let field = match args.get(1) {
            Some(Operand::Const(Const::I64(k))) => Some(*k),
            _ => None,
        };
        // Tuples the builder makes are bounded by MAX_BUILT_TYPE_SIZE, not
        // by the bound on inferred types (they are of declared types).
        let built;
        let annot = match (prim, annot) {
            (Prim::Tuple, None)
                if types.iter().map(Type::size).sum::<usize>() < crate::MAX_BUILT_TYPE_SIZE =>
            {
                built = Type::tuple_of(&types);
                Some(&built)
            }
            _ => annot,
        };
        prim.result_type(&types, field, annot)
            .map_err(BuildError::Type)
    }

    /// `what` names the callee in an error (formatted only then).
    fn check_args(
        &self,
        what: &dyn std::fmt::Display,
        params: &[Type],
        args: &[Operand],
    ) -> Result<(), BuildError> {
        if params.len() != args.len() {
            return Err(BuildError::Type(format!(
                "{what} takes {} arguments, found {}",
                params.len(),
                args.len()
            )));
        }
        for (i, (p, a)) in params.iter().zip(args).enumerate() {
            let ty = self.operand_type(a)?;
            if &ty != p {
                return Err(BuildError::Type(format!(
                    "argument {} of {what} must be {p}, found {ty}",
                    i + 1
                )));
            }
        }
        Ok(())
    }

    fn check_phi_entry(&self, ty: &Type, pred: Block, op: &Operand) -> Result<(), BuildError> {
        self.check_block(pred)?;
        let found = self.operand_type(op)?;
        if &found != ty {
            return Err(BuildError::Type(format!(
                "phi of type {ty} has an entry of type {found}"
            )));
        }
        Ok(())
    }

    /// The labels in use and the next label to try, read from the function once.
    fn labels(&mut self) -> (&mut HashSet<u32>, &mut u32) {
        let f = &self.module[self.func];
        let (used, next) = self.labels.get_or_insert_with(|| {
            let used: HashSet<u32> = f.blocks.values().map(|b| b.label).collect();
            (used, f.fresh_label())
        });
        (used, next)
    }

    fn check_block(&self, block: Block) -> Result<(), BuildError> {
        if self.func().blocks.is_valid(block) {
            Ok(())
        } else {
            Err(BuildError::BadHandle("block"))
        }
    }

    fn open_block(&self) -> Result<Block, BuildError> {
        let block = self.current.ok_or(BuildError::NoBlock)?;
        let data = &self.func().blocks[block];
        if data.term.is_some() {
            return Err(BuildError::Terminated(data.label));
        }
        Ok(block)
    }

    fn append(&mut self, kind: InstKind, ty: Type) -> Result<Option<Value>, BuildError> {
        let block = self.open_block()?;
        let result_ty = (ty != Type::Unit).then_some(ty);
        let pos = self.pos;
        let (_, result) = self.module[self.func].push_inst(block, kind, result_ty, pos);
        Ok(result)
    }

    fn terminate(&mut self, term: Terminator) -> Result<(), BuildError> {
        let block = self.open_block()?;
        let pos = self.pos;
        let data = &mut self.module[self.func].blocks[block];
        data.term = Some(term);
        data.term_pos = pos;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module with `@f(%i: i64, %x: f64) -> f64` and three blocks.
    fn three_blocks() -> (Module, FuncId) {
        let mut m = Module::new();
        let f = m
            .declare_func("f", vec![(None, Type::I64), (None, Type::F64)], Type::F64)
            .expect("fresh name");
        let mut b = FuncBuilder::new(&mut m, f).expect("valid function");
        for _ in 0..3 {
            b.create_block();
        }
        (m, f)
    }

    #[test]
    fn switch_checks_its_index_and_targets() {
        let (mut m, f) = three_blocks();
        let layout = m[f].layout.clone();
        let mut b = FuncBuilder::new(&mut m, f).expect("valid function");
        let (i, x) = (b.param(0).expect("i"), b.param(1).expect("x"));
        b.switch_to_block(layout[0]).expect("valid block");
        let cases: [(Operand, Vec<Block>, BuildError); 4] = [
            (
                x.into(),
                vec![layout[1]],
                BuildError::Type("switch index must be i64, found f64".into()),
            ),
            (
                i.into(),
                vec![],
                BuildError::Switch("switch has no targets".into()),
            ),
            (
                i.into(),
                vec![layout[1], layout[2], layout[1]],
                BuildError::Switch("switch lists #2 more than once".into()),
            ),
            (
                i.into(),
                vec![layout[1], Block::from_u32(9)],
                BuildError::BadHandle("block"),
            ),
        ];
        for (index, targets, err) in cases {
            assert_eq!(b.switch(index, &targets), Err(err));
        }
        assert_eq!(b.switch(i.into(), &[layout[2], layout[1]]), Ok(()));
        assert_eq!(
            b.func().blocks[layout[0]].term,
            Some(Terminator::Switch {
                index: i.into(),
                targets: SmallVec::from_slice(&[layout[2], layout[1]]),
            })
        );
        assert_eq!(
            b.switch(i.into(), &[layout[1]]),
            Err(BuildError::Terminated(1))
        );
    }

    #[test]
    fn pop_always_has_a_result_of_its_type() {
        let (mut m, f) = three_blocks();
        let entry = m[f].layout[0];
        let mut b = FuncBuilder::new(&mut m, f).expect("valid function");
        b.switch_to_block(entry).expect("valid block");
        let pair = Type::tuple(vec![Type::F64, Type::I64]);
        for ty in [Type::F64, pair, Type::Unit] {
            let v = b.pop(ty.clone()).expect("pop");
            assert_eq!(b.func().values[v].ty, ty);
        }
        assert!(matches!(b.prim(Prim::Pop, &[]), Err(BuildError::Type(_))));
        let x = b.param(1).expect("x");
        assert_eq!(b.prim(Prim::Push, &[x.into()]), Ok(None));
        b.ret(x.into()).expect("open block");
        assert_eq!(b.pop(Type::F64), Err(BuildError::Terminated(1)));
    }
}
