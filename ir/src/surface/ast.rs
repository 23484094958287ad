//! The syntax tree of the surface language (SYNTAX.md §2), the contract
//! between its parser, its type checker and its lowering to SSA.
//!
//! The tree is flat: a [`File`] owns one table of expressions, indexed by
//! [`ExprId`], and side tables for the lists (the operands of chains, the
//! arguments of calls and elements of tuples, the statements of blocks, the
//! parameters of functions) and for the blocks of block expressions and
//! `if`s (so that an expression is 32 bytes, not 56). A node names its
//! children by id and a list by a [`List`], a start and a length in its
//! table; the file's accessors ([`File::expr`], [`File::stmts`], ...) turn
//! them into nodes and slices. Names are interned: every distinct name is
//! stored once and nodes hold its [`Sym`] ([`File::name`] gives its text).
//! So a parse allocates a few growing tables and one block per distinct
//! name, not one per node.
//!
//! Every node carries the source position of its first character. Every
//! expression has an [`ExprId`], dense from 0 in the order the parser makes
//! them (a node after its children), that indexes [`File::expr`] and the
//! type checker's tables ([`TypeInfo`]). Each list is contiguous in its
//! table.
//!
//! The tree is never deeper than the parser's nesting limit allows: a run of
//! binary operators of one precedence level (`a + b - c + ...`, any length) is
//! stored flat as [`ExprKind::Chain`], so only parentheses, blocks, unary
//! operators, calls and the like add depth. Walks over the tree may recurse.

use crate::loc::Pos;
use crate::prim::Prim;
use crate::types::Type;
use std::marker::PhantomData;

/// A whole `.irad` file: functions in any order, and the tables that hold
/// their nodes. Made only by the parser, so every id and list a node holds
/// is one of this file's.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct File {
    /// The functions, in source order.
    pub funcs: Vec<FnDecl>,
    /// Every expression, by id.
    pub(super) exprs: Vec<Expr>,
    /// The operators and operands after the first operand of each chain.
    pub(super) links: Vec<ChainLink>,
    /// The arguments of calls and the elements of tuples.
    pub(super) expr_lists: Vec<ExprId>,
    /// The statements of blocks.
    pub(super) stmts: Vec<Stmt>,
    /// The blocks of block expressions and of `if`s (apart, so that an
    /// expression stays small).
    pub(super) blocks: Vec<Block>,
    /// The parameters of functions.
    pub(super) params: Vec<Param>,
    /// Each distinct name, by [`Sym`].
    pub(super) names: Vec<Box<str>>,
}

impl File {
    /// How many expressions the file has (ids are `0..n_exprs()`).
    pub fn n_exprs(&self) -> u32 {
        // The parser makes at most `u32::MAX` expressions.
        self.exprs.len() as u32
    }

    /// The expression `id`. Panics if `id` is not of this file.
    pub fn expr(&self, id: ExprId) -> &Expr {
        &self.exprs[id.0 as usize]
    }

    /// The block `id` of a block expression or an `if`. Panics if `id` is
    /// not of this file.
    pub fn block(&self, id: BlockId) -> &Block {
        &self.blocks[id.0 as usize]
    }

    /// The text of the name `sym`. Panics if `sym` is not of this file.
    pub fn name(&self, sym: Sym) -> &str {
        &self.names[sym.0 as usize]
    }

    /// The operators and operands of a chain after its first operand.
    pub fn links(&self, list: List<ChainLink>) -> &[ChainLink] {
        list.of(&self.links)
    }

    /// The expressions of a list: a call's arguments, a tuple's elements.
    pub fn exprs(&self, list: List<ExprId>) -> &[ExprId] {
        list.of(&self.expr_lists)
    }

    /// The statements of a block.
    pub fn stmts(&self, list: List<Stmt>) -> &[Stmt] {
        list.of(&self.stmts)
    }

    /// The parameters of a function.
    pub fn params(&self, list: List<Param>) -> &[Param] {
        list.of(&self.params)
    }
}

/// Identifies the block of a block expression or of an `if` within its
/// file (see [`File::block`]).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct BlockId(pub u32);

/// Identifies a distinct name within its file (see [`File::name`]).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct Sym(pub u32);

/// A list of nodes of type `T`, contiguous in one of the file's side tables:
/// where it starts and how long it is.
pub struct List<T> {
    start: u32,
    len: u32,
    of: PhantomData<fn() -> T>,
}

impl<T> List<T> {
    /// The list of `table[start..start + len]`.
    pub(super) fn new(start: u32, len: u32) -> Self {
        List {
            start,
            len,
            of: PhantomData,
        }
    }

    /// How many nodes it has.
    pub fn len(self) -> usize {
        self.len as usize
    }

    /// Whether it has none.
    pub fn is_empty(self) -> bool {
        self.len == 0
    }

    /// Its part of `table`; empty if it is not in `table`.
    fn of(self, table: &[T]) -> &[T] {
        let start = self.start as usize;
        let end = start.saturating_add(self.len as usize);
        table.get(start..end).unwrap_or(&[])
    }
}

impl<T> Clone for List<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for List<T> {}

impl<T> PartialEq for List<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.start, self.len) == (other.start, other.len)
    }
}

impl<T> Eq for List<T> {}

impl<T> std::fmt::Debug for List<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}..+{}", self.start, self.len)
    }
}

/// A name with its position.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Ident {
    /// The name.
    pub name: Sym,
    /// Where it is.
    pub pos: Pos,
}

/// `fn name(params) -> ret { body }`.
#[derive(Clone, Debug, PartialEq)]
pub struct FnDecl {
    /// The function's name.
    pub name: Ident,
    /// Parameters in order ([`File::params`]).
    pub params: List<Param>,
    /// The result type; `()` when `-> T` is omitted.
    pub ret: Type,
    /// `jvp g`: the function that is its forward rule (docs/rules.md,
    /// "Rules written in the language").
    pub jvp: Option<Ident>,
    /// `vjp h`: the function that is its reverse rule.
    pub vjp: Option<Ident>,
    /// The body; its value (tail expression) is the result unless it returns.
    pub body: Block,
    /// The position of `fn`.
    pub pos: Pos,
}

/// `name: type`.
#[derive(Clone, Debug, PartialEq)]
pub struct Param {
    /// The parameter's name.
    pub name: Ident,
    /// Its type.
    pub ty: Type,
}

/// `{ stmts; tail }`: statements, then an optional value expression.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Block {
    /// Statements in order ([`File::stmts`]).
    pub stmts: List<Stmt>,
    /// The last expression without `;`, the block's value; `()` when absent.
    pub tail: Option<ExprId>,
    /// The position of `{`.
    pub pos: Pos,
}

/// A statement.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    /// What it is.
    pub kind: StmtKind,
    /// The position of its first character.
    pub pos: Pos,
    /// A block-like expression statement (`if`, a block) not followed by
    /// `;`: its value must be `()`, as in Rust.
    pub unit_without_semi: bool,
}

/// The kinds of statement.
#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// `let x = e;`, `let mut x = e;`, `let x: T = e;`
    Let {
        /// Whether the binding may be assigned (`let mut`).
        mutable: bool,
        /// The bound name.
        name: Ident,
        /// The optional `: T` annotation.
        ty: Option<Type>,
        /// The initial value.
        init: ExprId,
    },
    /// `x = e;`
    Assign {
        /// The assigned name.
        name: Ident,
        /// The new value.
        value: ExprId,
    },
    /// `a[i] = e;` (through any expression of array type).
    IndexAssign {
        /// The array.
        array: ExprId,
        /// The index.
        index: ExprId,
        /// The value written.
        value: ExprId,
    },
    /// An expression statement: `e;`, or a block-like expression (`if`, a block)
    /// that ends without `;` in statement position.
    Expr(ExprId),
    /// `while cond { body }`
    While {
        /// The condition.
        cond: ExprId,
        /// The body.
        body: Block,
    },
    /// `for var in start..end { body }` (i64, `end` exclusive, both evaluated once).
    For {
        /// The loop variable (immutable in the body).
        var: Ident,
        /// The first value.
        start: ExprId,
        /// One past the last value.
        end: ExprId,
        /// The body.
        body: Block,
    },
    /// `return e;` or `return;`
    Return(Option<ExprId>),
    /// `break;`
    Break,
    /// `continue;`
    Continue,
}

/// Identifies an expression within its file (see [`File::expr`]).
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct ExprId(pub u32);

/// An expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// The position of its first character (for a chain, of its first operand;
    /// see [`ExprKind::Chain`] for the operators' positions).
    pub pos: Pos,
    /// Its id, its index in the file and in [`TypeInfo::types`].
    pub id: ExprId,
}

// The expression table is most of a parsed file: keep its nodes small.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Expr>() <= 32);

/// An operator of a chain with its position, and the operand after it.
pub type ChainLink = (BinOp, Pos, ExprId);

/// The kinds of expression.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// An f64 literal (`1.0`, `2e-3`, `inf`, `nan`); `-1.0` is a negation.
    F64(f64),
    /// An i64 literal; `-7` is a negation, except that the parser folds the
    /// negation of `9223372036854775808` into `i64::MIN`.
    I64(i64),
    /// `true` or `false`.
    Bool(bool),
    /// `()`.
    Unit,
    /// A name: a local variable, a parameter, a function of the file or a
    /// primitive used as a value. The type checker says which.
    Name(Sym),
    /// `-e` or `!e`.
    Unary {
        /// The operator.
        op: UnOp,
        /// The operand.
        operand: ExprId,
    },
    /// `first op1 e1 op2 e2 ...` with operators of one precedence level,
    /// evaluated left to right (`((first op1 e1) op2 e2) ...`). `&&` and `||`
    /// chains short-circuit. Comparisons do not chain: a comparison chain has
    /// exactly one operator (the parser rejects `a < b < c`, as Rust does).
    Chain {
        /// The first operand.
        first: ExprId,
        /// Each operator with its position, and the operand after it
        /// ([`File::links`]); never empty.
        rest: List<ChainLink>,
    },
    /// `callee(args)`: a function of the file, a primitive by its IR name, a
    /// variable of function type, or a builtin (`len`, `f64`, `i64`, `zeros`).
    Call {
        /// The called expression (usually a `Name`).
        callee: ExprId,
        /// The arguments ([`File::exprs`]).
        args: List<ExprId>,
    },
    /// `a[i]`
    Index {
        /// The array.
        array: ExprId,
        /// The index.
        index: ExprId,
    },
    /// `t.0`
    Field {
        /// The tuple.
        tuple: ExprId,
        /// The field number.
        index: u32,
    },
    /// `(a, b, ...)` with two or more elements, or `(a,)` ([`File::exprs`]).
    Tuple(List<ExprId>),
    /// `if cond { then } else ...`; as a statement the else may be absent.
    If {
        /// The condition.
        cond: ExprId,
        /// The `then` block ([`File::block`]).
        then: BlockId,
        /// The `else` branch: a `Block` expression or another `If`.
        els: Option<ExprId>,
    },
    /// `{ stmts; tail }` as an expression ([`File::block`]).
    Block(BlockId),
}

/// A unary operator.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum UnOp {
    /// `-` on f64 or i64.
    Neg,
    /// `!` on bool.
    Not,
}

/// A binary operator.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
#[allow(missing_docs)] // named after their symbols
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

impl BinOp {
    /// The operator as written in source (`+`, `<=`, `&&`, ...).
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }
}

/// A local binding (parameter, `let`, or `for` variable), unique in the file.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct LocalId(pub u32);

/// What a name or a call's callee stands for, as the type checker resolved it.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Res {
    /// A local binding of the enclosing function.
    Local(LocalId),
    /// A function of the file, by name.
    Func(Sym),
    /// A primitive, by its IR name (called, or as a value `sin`).
    Prim(Prim),
    /// A builtin of the surface language.
    Builtin(Builtin),
}

/// The surface language's own functions.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Builtin {
    /// `len(a)`: `length`.
    Len,
    /// `f64(i)`: `sitofp`.
    ToF64,
    /// `i64(x)`: `fptosi`.
    ToI64,
    /// `zeros(n)`: an f64 array of zeros.
    Zeros,
}

/// What the type checker knows of a file, for lowering.
#[derive(Clone, Debug, Default)]
pub struct TypeInfo {
    /// The type of every expression, by [`ExprId`].
    pub types: Vec<Type>,
    /// For every `Name` expression and every `Call`'s callee that is a
    /// `Name`, what it resolves to, by the id of that `Name` expression.
    pub names: ExprTable<Res>,
    /// For every `let`, parameter, `for` variable and assignment, the binding,
    /// by the position of the binding's name (`Ident::pos`).
    pub locals: rustc_hash::FxHashMap<Pos, LocalId>,
    /// Each local's source name, by `LocalId` (for readable SSA value names).
    pub local_names: Vec<Sym>,
}

/// Side data of some expressions, by [`ExprId`]: a dense table (one slot per
/// expression id up to the largest set), so that setting and reading take
/// constant time and touch memory in the order of the ids, which is the
/// order of the source (a hash map by id scattered the entries of a large
/// file over memory: the lowering spent most of its time on cache misses).
#[derive(Clone, Debug, PartialEq)]
pub struct ExprTable<T> {
    slots: Vec<Option<T>>,
}

impl<T> Default for ExprTable<T> {
    fn default() -> Self {
        ExprTable { slots: Vec::new() }
    }
}

impl<T> ExprTable<T> {
    /// A table with room for the ids `0..n` (it grows past them if needed).
    pub fn with_capacity(n: usize) -> Self {
        ExprTable {
            slots: Vec::with_capacity(n),
        }
    }

    /// The entry of `id`, if one was set.
    pub fn get(&self, id: &ExprId) -> Option<&T> {
        self.slots.get(id.0 as usize)?.as_ref()
    }

    /// Sets the entry of `id`, returning the one it replaces.
    pub fn insert(&mut self, id: ExprId, value: T) -> Option<T> {
        let idx = id.0 as usize;
        if idx >= self.slots.len() {
            self.slots.resize_with(idx + 1, || None);
        }
        self.slots.get_mut(idx)?.replace(value)
    }

    /// The entries set, in the order of their ids.
    pub fn iter(&self) -> impl Iterator<Item = (ExprId, &T)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((ExprId(i as u32), s.as_ref()?)))
    }
}
