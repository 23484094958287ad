//! The IR data model: modules of functions, functions of blocks, blocks of
//! statements ending in a terminator.
//!
//! Every entity lives in one owning table of its function (`values`, `insts`,
//! `blocks`); the block order is the separate `layout`. Nothing here enforces
//! SSA or typing: the builder keeps simple invariants (every value has a type
//! and a definition site, handles are valid) and the verifier checks the rest.
//! Value names and source positions are carried along but are not part of a
//! module's meaning (see `eq::structural_eq`).
//!
//! Nothing here imports the builder (`builder.rs`), which builds on this
//! module. The error of a module edit or builder call ([`BuildError`]) and the
//! name rules ([`is_ident`], [`is_value_name`]) are defined here because the
//! module's own edits (`add_func`, `rename`) need them.

use crate::entity::{EntityRef, PrimaryMap, SecondaryMap};
use crate::loc::Pos;
use crate::prim::Prim;
use crate::types::{FnType, Scalar, Type};
use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;

crate::entity!(
    /// An SSA value: a function parameter or a statement result.
    Value,
    "v"
);
crate::entity!(
    /// A basic block of a function.
    Block,
    "block"
);
crate::entity!(
    /// A statement of a function.
    Inst,
    "inst"
);
crate::entity!(
    /// A function of a module.
    FuncId,
    "func"
);

/// A function that can be referenced as a value (`@g`, `@sin`).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum FuncRef {
    /// A function of the module.
    User(FuncId),
    /// A primitive with a single signature.
    Prim(Prim),
}

/// A constant operand.
#[derive(Copy, Clone, Debug)]
pub enum Const {
    /// An f64; equality compares bits, so `-0.0 != 0.0` and NaN equals itself.
    F64(f64),
    /// An i64.
    I64(i64),
    /// A bool.
    Bool(bool),
    /// `()`.
    Unit,
    /// A function name used as a value.
    Func(FuncRef),
}

impl PartialEq for Const {
    fn eq(&self, other: &Const) -> bool {
        match (self, other) {
            (Const::F64(a), Const::F64(b)) => a.to_bits() == b.to_bits(),
            (Const::I64(a), Const::I64(b)) => a == b,
            (Const::Bool(a), Const::Bool(b)) => a == b,
            (Const::Unit, Const::Unit) => true,
            (Const::Func(a), Const::Func(b)) => a == b,
            _ => false,
        }
    }
}

/// An operand of a statement or terminator.
#[derive(Copy, Clone, PartialEq, Debug)]
pub enum Operand {
    /// An SSA value of the same function.
    Value(Value),
    /// A constant.
    Const(Const),
}

impl From<Value> for Operand {
    fn from(v: Value) -> Operand {
        Operand::Value(v)
    }
}
impl From<f64> for Operand {
    fn from(x: f64) -> Operand {
        Operand::Const(Const::F64(x))
    }
}
impl From<i64> for Operand {
    fn from(x: i64) -> Operand {
        Operand::Const(Const::I64(x))
    }
}
impl From<bool> for Operand {
    fn from(x: bool) -> Operand {
        Operand::Const(Const::Bool(x))
    }
}
impl From<Const> for Operand {
    fn from(c: Const) -> Operand {
        Operand::Const(c)
    }
}

/// Operand lists: most statements have three operands or fewer.
pub type Args = SmallVec<[Operand; 3]>;

/// What a statement does.
#[derive(Clone, PartialEq, Debug)]
pub enum InstKind {
    /// `call NAME(args)`: a primitive.
    Prim {
        /// The primitive.
        prim: Prim,
        /// Its operands.
        args: Args,
    },
    /// `invoke @g(args)`: a static call of a function of the module.
    Invoke {
        /// The callee.
        func: FuncId,
        /// Its operands.
        args: Args,
    },
    /// `call %f(args)`: a dynamic call through a value of function type.
    CallValue {
        /// The value holding the callee.
        callee: Value,
        /// Its operands.
        args: Args,
    },
    /// `phi [#b => op, ...]`: one entry per predecessor.
    Phi {
        /// (predecessor, incoming operand) pairs.
        entries: SmallVec<[(Block, Operand); 2]>,
    },
}

/// A statement: what it does, its result (absent when unit), its source position.
#[derive(Clone, Debug)]
pub struct InstData {
    /// What the statement does.
    pub kind: InstKind,
    /// The value it defines, if any; its type is the statement's type.
    pub result: Option<Value>,
    /// The source position of the statement.
    pub pos: Option<Pos>,
}

/// How a block ends.
#[derive(Clone, PartialEq, Debug)]
pub enum Terminator {
    /// `goto #b`
    Goto(Block),
    /// `gotoifnot op, #b`: jump to `target` when `cond` is false, otherwise fall
    /// through to the next block of the layout.
    GotoIfNot {
        /// The condition (bool).
        cond: Operand,
        /// Where to go when it is false.
        target: Block,
    },
    /// `return op`
    Return(Operand),
    /// `switch op, [#b0, #b1, ...]`: jump to `targets[index]`; an index outside
    /// `0..targets.len()` is a run-time error. The targets are distinct (each
    /// is one CFG edge, and phi entries are per predecessor).
    Switch {
        /// The index (i64).
        index: Operand,
        /// The targets, in index order.
        targets: SmallVec<[Block; 4]>,
    },
}

impl Terminator {
    /// The operand the terminator reads (a `gotoifnot`'s condition, a
    /// `switch`'s index, the value returned); `None` for `goto`.
    pub fn operand(&self) -> Option<&Operand> {
        match self {
            Terminator::GotoIfNot { cond: op, .. }
            | Terminator::Switch { index: op, .. }
            | Terminator::Return(op) => Some(op),
            Terminator::Goto(_) => None,
        }
    }

    /// The operand the terminator reads, to change it.
    pub fn operand_mut(&mut self) -> Option<&mut Operand> {
        match self {
            Terminator::GotoIfNot { cond: op, .. }
            | Terminator::Switch { index: op, .. }
            | Terminator::Return(op) => Some(op),
            Terminator::Goto(_) => None,
        }
    }
}

/// A basic block.
#[derive(Clone, Debug, Default)]
pub struct BlockData {
    /// The label number `N` of `#N:`.
    pub label: u32,
    /// Statements in order; phis first.
    pub insts: Vec<Inst>,
    /// The terminator, once set.
    pub term: Option<Terminator>,
    /// The source position of the label.
    pub pos: Option<Pos>,
    /// The source position of the terminator.
    pub term_pos: Option<Pos>,
}

/// Where a value comes from.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum ValueDef {
    /// The function's parameter number `n` (from 0).
    Param(u32),
    /// The result of a statement.
    Inst(Inst),
}

/// A value's name: a string stored inline up to 24 bytes (`x`, `s_12`,
/// `acc.fwd_3`), so that naming or copying a value allocates nothing.
pub type ValueName = compact_str::CompactString;

/// A value's type, definition and optional name.
#[derive(Clone, Debug)]
pub struct ValueData {
    /// The value's type.
    pub ty: Type,
    /// Where it is defined.
    pub def: ValueDef,
    /// Its name in text (`x` for `%x`, `3` for `%3`), if it has one.
    pub name: Option<ValueName>,
}

/// A function.
#[derive(Clone, Debug)]
pub struct Func {
    /// The name, without `@`.
    pub name: String,
    /// Parameter values, in order.
    pub params: Vec<Value>,
    /// The result type.
    pub ret: Type,
    /// Every value of the function.
    pub values: PrimaryMap<Value, ValueData>,
    /// Every statement of the function.
    pub insts: PrimaryMap<Inst, InstData>,
    /// Every block of the function.
    pub blocks: PrimaryMap<Block, BlockData>,
    /// The block order; the first block is the entry.
    pub layout: Vec<Block>,
    /// The source position of `func`.
    pub pos: Option<Pos>,
}

/// A module: functions that may call each other.
#[derive(Clone, Debug, Default)]
pub struct Module {
    funcs: PrimaryMap<FuncId, Func>,
    by_name: HashMap<String, FuncId>,
    /// The derivative rules declared in the program for some functions
    /// (`jvp @g`, `vjp @h` after a signature).
    rules: HashMap<FuncId, DeclaredRules>,
    /// Whether the derivative rules emit the strong product `zmul` for the
    /// products of the chain rule instead of `mul` (docs/rules.md,
    /// "Infinities and NaN"): set only on the copy of a module that the
    /// facade derives again when a derivative comes out NaN.
    strong_products: bool,
    /// Whether compiled code counts the tapes' references to the arrays it
    /// pushes and frees them at their last pop (docs/codegen.md, "Freeing
    /// arrays"): set by reverse mode when it checkpoints a loop into this
    /// module, whose replays would otherwise keep every stretch's arrays.
    counted_tapes: bool,
}

/// Derivative rules a program declares for one of its functions, each
/// itself a function of the module (docs/rules.md, "Rules written in the
/// language"): the AD passes call them instead of differentiating the
/// function's body.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct DeclaredRules {
    /// The forward rule: takes the arguments, then the tangent of each
    /// argument whose type has one, and returns `(result, result tangent)`.
    pub jvp: Option<FuncId>,
    /// The reverse rule: takes the arguments, then the result's cotangent
    /// (of the result's tangent type), and returns the cotangent of the
    /// argument whose type has a tangent (a tuple of them in order when
    /// there are several, `()` when there is none).
    pub vjp: Option<FuncId>,
}

impl DeclaredRules {
    /// Whether neither rule is declared.
    pub fn is_empty(&self) -> bool {
        self.jvp.is_none() && self.vjp.is_none()
    }
}

impl Func {
    /// An empty function with parameters of the given names and types.
    pub fn new(name: &str, params: Vec<(Option<String>, Type)>, ret: Type) -> Func {
        let mut func = Func {
            name: name.to_string(),
            params: Vec::new(),
            ret,
            values: PrimaryMap::new(),
            insts: PrimaryMap::new(),
            blocks: PrimaryMap::new(),
            layout: Vec::new(),
            pos: None,
        };
        for (i, (pname, ty)) in params.into_iter().enumerate() {
            let v = func.values.push(ValueData {
                ty,
                def: ValueDef::Param(i as u32),
                name: pname.map(ValueName::from),
            });
            func.params.push(v);
        }
        func
    }

    /// The parameter types, in order.
    pub fn param_types(&self) -> Vec<Type> {
        self.params
            .iter()
            .map(|&v| self.values[v].ty.clone())
            .collect()
    }

    /// The function's type `fn(params) -> ret`.
    pub fn fn_type(&self) -> FnType {
        FnType {
            params: self.param_types(),
            ret: self.ret.clone(),
        }
    }

    /// The entry block, if the function has any block.
    pub fn entry(&self) -> Option<Block> {
        self.layout.first().copied()
    }

    /// Appends a new block with label `label` to the layout.
    pub fn add_block(&mut self, label: u32) -> Block {
        let block = self.blocks.push(BlockData {
            label,
            ..BlockData::default()
        });
        self.layout.push(block);
        block
    }

    /// A label not used by any block of the function.
    pub fn fresh_label(&self) -> u32 {
        match self.blocks.values().map(|b| b.label).max() {
            None => 1,
            Some(max) if max < u32::MAX => max + 1,
            // `#4294967295` is taken: fall back to the smallest free label
            // (there is one, since a function has fewer than 2^32 blocks).
            Some(_) => {
                let used: rustc_hash::FxHashSet<u32> =
                    self.blocks.values().map(|b| b.label).collect();
                (0..u32::MAX).find(|l| !used.contains(l)).unwrap_or(0)
            }
        }
    }

    /// Appends a statement to `block`; when `result_ty` is given it also makes
    /// the result value of that type.
    pub fn push_inst(
        &mut self,
        block: Block,
        kind: InstKind,
        result_ty: Option<Type>,
        pos: Option<Pos>,
    ) -> (Inst, Option<Value>) {
        let inst = self.insts.push(InstData {
            kind,
            result: None,
            pos,
        });
        let result = result_ty.map(|ty| {
            self.values.push(ValueData {
                ty,
                def: ValueDef::Inst(inst),
                name: None,
            })
        });
        self.insts[inst].result = result;
        self.blocks[block].insts.push(inst);
        (inst, result)
    }

    /// The type of an operand; `module` supplies the types of function constants.
    pub fn operand_type(&self, op: &Operand, module: &Module) -> Option<Type> {
        match op {
            Operand::Value(v) => self.values.get(*v).map(|d| d.ty.clone()),
            Operand::Const(c) => const_type(c, module),
        }
    }

    /// The block that follows `block` in the layout (where `gotoifnot` falls through).
    pub fn next_in_layout(&self, block: Block) -> Option<Block> {
        let idx = self.layout.iter().position(|&b| b == block)?;
        self.layout.get(idx + 1).copied()
    }

    /// The successors of `block`: for `gotoifnot`, the fall-through block first;
    /// for `switch`, the targets in index order.
    ///
    /// `next` is the block after `block` in the layout.
    pub fn successors(&self, block: Block, next: Option<Block>) -> SmallVec<[Block; 2]> {
        match &self.blocks[block].term {
            Some(Terminator::Goto(b)) => SmallVec::from_slice(&[*b]),
            Some(Terminator::GotoIfNot { target, .. }) => {
                let mut succ = SmallVec::new();
                if let Some(n) = next {
                    succ.push(n);
                }
                succ.push(*target);
                succ
            }
            Some(Terminator::Switch { targets, .. }) => targets.iter().copied().collect(),
            Some(Terminator::Return(_)) | None => SmallVec::new(),
        }
    }

    /// The statement that defines value `v`, if a statement does (not a
    /// parameter, not a value of another function).
    pub fn def_kind(&self, v: Value) -> Option<&InstKind> {
        match self.values.get(v)?.def {
            ValueDef::Inst(inst) => Some(&self.insts.get(inst)?.kind),
            ValueDef::Param(_) => None,
        }
    }

    /// The constant `c` when `x` is `base + c` by its definition: `base`
    /// itself (0), `iadd(base, c)`, `iadd(c, base)` or `isub(base, -c)`;
    /// how loops recognise a counter's step and an offset from it.
    pub fn const_offset(&self, x: Value, base: Value) -> Option<i64> {
        if x == base {
            return Some(0);
        }
        let InstKind::Prim { prim, args } = self.def_kind(x)? else {
            return None;
        };
        match (prim, args.as_slice()) {
            (Prim::Iadd, [Operand::Value(v), Operand::Const(Const::I64(c))])
            | (Prim::Iadd, [Operand::Const(Const::I64(c)), Operand::Value(v)])
                if *v == base =>
            {
                Some(*c)
            }
            (Prim::Isub, [Operand::Value(v), Operand::Const(Const::I64(c))]) if *v == base => {
                c.checked_neg()
            }
            _ => None,
        }
    }

    /// The (statement number from 1, block) of each instruction, for error locations.
    pub fn inst_places(&self) -> SecondaryMap<Inst, Option<(Block, u32)>> {
        let mut places = SecondaryMap::new();
        for &block in &self.layout {
            for (i, &inst) in self.blocks[block].insts.iter().enumerate() {
                places.set(inst, Some((block, i as u32 + 1)));
            }
        }
        places
    }
}

/// The scalar type of a scalar constant (`f64`, `i64`, `bool`); `None` for
/// `()` and function constants.
pub(crate) fn const_scalar(c: &Const) -> Option<Scalar> {
    match c {
        Const::F64(_) => Some(Scalar::F64),
        Const::I64(_) => Some(Scalar::I64),
        Const::Bool(_) => Some(Scalar::Bool),
        Const::Unit | Const::Func(_) => None,
    }
}

/// The type of a constant; `None` for a function handle the module does not have.
pub fn const_type(c: &Const, module: &Module) -> Option<Type> {
    Some(match c {
        Const::F64(_) => Type::F64,
        Const::I64(_) => Type::I64,
        Const::Bool(_) => Type::Bool,
        Const::Unit => Type::Unit,
        Const::Func(FuncRef::User(id)) => Type::from_fn(module.get(*id)?.fn_type()),
        Const::Func(FuncRef::Prim(p)) => p.fn_type()?,
    })
}

/// A mistake in a builder call or a module edit ([`Module::add_func`],
/// [`Module::rename`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BuildError {
    /// A function of that name already exists.
    #[error("function @{0} is defined twice")]
    DuplicateFunc(String),
    /// A name that is not an identifier.
    #[error("`{0}` is not a valid name: names match [A-Za-z_][A-Za-z0-9_.]*")]
    BadName(String),
    /// A handle that does not belong to this module or function.
    #[error("invalid {0} handle")]
    BadHandle(&'static str),
    /// A statement or terminator with no current block.
    #[error("no current block: call switch_to_block first")]
    NoBlock,
    /// A statement or terminator after the block's terminator.
    #[error("block #{0} already has a terminator")]
    Terminated(u32),
    /// Two blocks with one label.
    #[error("block #{0} is defined twice")]
    DuplicateLabel(u32),
    /// A phi after a non-phi statement.
    #[error("phi after another statement in block #{0}: phis must come first")]
    PhiNotFirst(u32),
    /// An operand or result type that does not fit.
    #[error("{0}")]
    Type(String),
    /// A `switch` without targets or with a target listed twice.
    #[error("{0}")]
    Switch(String),
}

/// Whether `name` is an identifier: `[A-Za-z_][A-Za-z0-9_.]*`.
pub fn is_ident(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

/// Whether `name` can name a value: an identifier or a decimal number.
pub fn is_value_name(name: &str) -> bool {
    is_ident(name) || (!name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()))
}

impl Module {
    /// An empty module.
    pub fn new() -> Module {
        Module::default()
    }

    /// Whether the derivative rules building code into this module emit the
    /// strong product `zmul` for the chain rule's products (docs/rules.md,
    /// "Infinities and NaN"); false unless [`Module::set_strong_products`]
    /// said otherwise.
    pub fn strong_products(&self) -> bool {
        self.strong_products
    }

    /// Makes the derivative rules building code into this module emit `zmul`
    /// (`on`) or `mul` for the chain rule's products. Only the derived
    /// functions built afterwards are affected.
    pub fn set_strong_products(&mut self, on: bool) {
        self.strong_products = on;
    }

    /// Whether compiled code counts the tapes' references to arrays and
    /// frees a popped array once nothing uses it (docs/codegen.md,
    /// "Freeing arrays"); false unless [`Module::set_counted_tapes`] said
    /// otherwise. Not part of the text form: a module printed and parsed
    /// back compiles without it, which changes when arrays are freed, not
    /// what is computed.
    pub fn counted_tapes(&self) -> bool {
        self.counted_tapes
    }

    /// Makes compiled code of this module count the tapes' references to
    /// arrays (`on`), or not. Functions compiled afterwards are affected;
    /// code compiled either way works with the other's tapes.
    pub fn set_counted_tapes(&mut self, on: bool) {
        self.counted_tapes = on;
    }

    /// Adds `func`; fails when a function of that name exists.
    pub fn add_func(&mut self, func: Func) -> Result<FuncId, BuildError> {
        if self.by_name.contains_key(&func.name) {
            return Err(BuildError::DuplicateFunc(func.name));
        }
        let name = func.name.clone();
        let id = self.funcs.push(func);
        self.by_name.insert(name, id);
        Ok(id)
    }

    /// The function `id`, if the module has it.
    pub fn get(&self, id: FuncId) -> Option<&Func> {
        self.funcs.get(id)
    }

    /// The function `id` for writing, if the module has it. Renaming it through
    /// this reference is not seen by [`Module::by_name`]; use [`Module::rename`].
    pub fn get_mut(&mut self, id: FuncId) -> Option<&mut Func> {
        self.funcs.get_mut(id)
    }

    /// The function called `name` (without `@`).
    pub fn by_name(&self, name: &str) -> Option<FuncId> {
        self.by_name.get(name).copied()
    }

    /// Renames function `id`; fails when the new name is taken.
    pub fn rename(&mut self, id: FuncId, name: &str) -> Result<(), BuildError> {
        if !is_ident(name) {
            return Err(BuildError::BadName(name.to_string()));
        }
        if self.by_name.contains_key(name) {
            return Err(BuildError::DuplicateFunc(name.to_string()));
        }
        let func = self
            .funcs
            .get_mut(id)
            .ok_or(BuildError::BadHandle("function"))?;
        self.by_name.remove(&func.name);
        func.name = name.to_string();
        self.by_name.insert(name.to_string(), id);
        Ok(())
    }

    /// All functions in definition order.
    pub fn funcs(&self) -> impl DoubleEndedIterator<Item = (FuncId, &Func)> {
        self.funcs.iter()
    }

    /// All function handles in definition order.
    pub fn func_ids(&self) -> impl DoubleEndedIterator<Item = FuncId> + use<> {
        self.funcs.keys()
    }

    /// The number of functions.
    pub fn len(&self) -> usize {
        self.funcs.len()
    }

    /// The rules declared for function `f` (none by default).
    pub fn declared_rules(&self, f: FuncId) -> DeclaredRules {
        self.rules.get(&f).copied().unwrap_or_default()
    }

    /// Declares the rules of function `f` (replacing any it had); the
    /// verifier checks that they exist and fit `f`'s signature.
    pub fn declare_rules(&mut self, f: FuncId, rules: DeclaredRules) {
        if rules.is_empty() {
            self.rules.remove(&f);
        } else {
            self.rules.insert(f, rules);
        }
    }

    /// Whether the module has no function.
    pub fn is_empty(&self) -> bool {
        self.funcs.is_empty()
    }

    /// A copy of the module's first `n` functions (all when `n` is larger),
    /// with their names, the rules declared among them and the products
    /// flag: the module as it was before functions were appended to it (by
    /// a derivation, which only appends), without copying what was added.
    pub fn prefix(&self, n: usize) -> Module {
        let mut m = Module {
            strong_products: self.strong_products,
            ..Module::default()
        };
        for (id, f) in self.funcs.iter().take(n) {
            m.funcs.push(f.clone());
            m.by_name.insert(f.name.clone(), id);
        }
        let inside = |f: Option<FuncId>| f.is_none_or(|f| f.index() < n);
        m.rules = self
            .rules
            .iter()
            .filter(|(f, r)| inside(Some(**f)) && inside(r.jvp) && inside(r.vjp))
            .map(|(f, r)| (*f, *r))
            .collect();
        m
    }
}

impl std::ops::Index<FuncId> for Module {
    type Output = Func;
    fn index(&self, id: FuncId) -> &Func {
        &self.funcs[id]
    }
}

impl std::ops::IndexMut<FuncId> for Module {
    fn index_mut(&mut self, id: FuncId) -> &mut Func {
        &mut self.funcs[id]
    }
}
