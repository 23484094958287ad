//! The parser of the surface language (SYNTAX.md §2): text to [`ast::File`].
//!
//! Recursive descent over the tokens of the lexer (made as it asks for them,
//! two ahead of where it reads), with Rust's syntax and
//! precedence for the subset. Binary operators are read by an operator stack
//! in one loop, and each run of operators of one precedence level becomes one
//! flat [`ExprKind::Chain`], so `x + x + ... + x` of any length adds no depth;
//! prefix operators are collected in a loop and postfix ones (calls, indexing,
//! fields) applied in a loop.
//!
//! Assumes nothing about the input. Guarantees: never panics; every error is
//! the first one of the text, located at the offending token, and names the
//! enclosing function once its name is read; parentheses, blocks, prefix and
//! postfix operators, `if` branches and the like each count one nesting level
//! and more than [`MAX_NESTING`] levels are an error, so the recursion (a
//! bounded number of frames per level) and the tree's depth stay bounded; the
//! parse runs on its own thread with a stack large enough for that bound. Time
//! is linear in the input. Expression ids are dense from 0 in creation order.
//!
//! The tree is built flat ([`ast`](super::ast)): each expression is pushed to
//! the file's table when it is made, after its children, so its id is its
//! index there. The lists being read (the operands of open chains, the
//! arguments and elements of open calls and tuples, the statements of open
//! blocks, the prefix operators of open operands) are kept on scratch stacks
//! for the whole parse, innermost last, and each is appended to its table
//! when it is complete, so every list is contiguous. Names are interned
//! through a map from their text, kept for the parse only.

use super::SurfaceError;
use super::ast::{
    BinOp, Block, BlockId, ChainLink, Expr, ExprId, ExprKind, File, FnDecl, Ident, List, Param,
    Stmt, StmtKind, Sym, UnOp,
};
use super::lexer::{Tok, Token, Tokens};
use crate::MAX_NESTING;
use crate::loc::{Location, Pos};
use crate::types::{Scalar, Type};
use rustc_hash::FxHashMap as HashMap;

/// The stack of the thread [`parse`] runs on. Input nested up to
/// [`MAX_NESTING`] levels of the deepest kind needs under 4 MiB even in
/// unoptimised builds, whose frames are large (about 15 KB per parenthesis),
/// so this leaves a wide margin; it is only reserved, not touched.
const PARSE_STACK: usize = 64 << 20;

/// Parses a whole `.irad` file; the first error of the text if any.
///
/// Runs on a thread of its own with a 64 MiB stack, so that the nesting
/// limit, not the caller's stack, bounds what parses (as rustc does); on the
/// caller's thread if it has that much stack left, or if no thread can be
/// started.
pub fn parse(src: &str) -> Result<File, SurfaceError> {
    if stacker::remaining_stack().is_some_and(|left| left >= PARSE_STACK) {
        return parse_here(src);
    }
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("irad-parse".into())
            .stack_size(PARSE_STACK)
            .spawn_scoped(scope, || parse_here(src));
        match spawned {
            Ok(handle) => match handle.join() {
                Ok(result) => result,
                // The parser does not panic; if it did, pass the panic on.
                Err(payload) => std::panic::resume_unwind(payload),
            },
            Err(_) => parse_here(src),
        }
    })
}

/// [`parse`] on the current thread.
fn parse_here(src: &str) -> Result<File, SurfaceError> {
    let mut toks = Tokens::new(src);
    let ahead = [toks.next(), toks.next()];
    let mut p = Parser {
        src,
        toks,
        ahead,
        file: File::default(),
        syms: HashMap::default(),
        func: None,
        pending: Vec::new(),
        link_stack: Vec::new(),
        expr_stack: Vec::new(),
        stmt_stack: Vec::new(),
        prefix_stack: Vec::new(),
    };
    while p.peek().tok != Tok::Eof {
        p.func = None;
        let f = p.fn_decl()?;
        p.file.funcs.push(f);
    }
    Ok(p.file)
}

/// Binding strength of the binary operators, loosest first.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Or,
    And,
    Cmp,
    Add,
    Mul,
}

/// A chain being built on the operator stack: its first operand, where its
/// further operands start on [`Parser::link_stack`], and the operator that
/// waits for its right operand.
struct Pending {
    level: Level,
    first: ExprId,
    base: usize,
    op: (BinOp, Pos),
}

/// A postfix operator seen after a primary expression.
enum Postfix {
    Call(List<ExprId>),
    Index(ExprId),
    Field(u32),
}

const KEYWORDS: [&str; 15] = [
    "fn", "let", "mut", "if", "else", "while", "for", "in", "return", "break", "continue", "true",
    "false", "inf", "nan",
];

struct Parser<'a> {
    src: &'a str,
    /// The tokens after the next two.
    toks: Tokens<'a>,
    /// The next two tokens (the parser looks at most one token past the next).
    ahead: [Token; 2],
    /// The file being built: its functions so far and its tables.
    file: File,
    /// The symbol of each name interned so far, by its text.
    syms: HashMap<&'a str, Sym>,
    /// The function being read, once its name is.
    func: Option<Sym>,
    /// The operator stacks of the expressions being read, innermost last
    /// (each [`expr`](Parser::expr) works above the part it found): one
    /// vector for the whole parse instead of one per expression.
    pending: Vec<Pending>,
    /// The operators and operands after the first of the chains being built
    /// (of `pending`), each chain's above those of the chains below it; a
    /// chain's are appended to the file's table when it is closed.
    link_stack: Vec<ChainLink>,
    /// The arguments and elements read so far of the calls and tuples being
    /// read, innermost last; each list is appended to the file's table when
    /// it is complete.
    expr_stack: Vec<ExprId>,
    /// The statements read so far of the blocks being read, innermost last;
    /// likewise appended to the file's table at each block's `}`.
    stmt_stack: Vec<Stmt>,
    /// The prefix operators of the operands being read, innermost last.
    prefix_stack: Vec<(UnOp, Pos)>,
}

impl<'a> Parser<'a> {
    // ---- tokens ----

    fn peek(&self) -> Token {
        self.peek_at(0)
    }

    /// The token `k` ahead, `k` at most 1; the final `Eof`/`Error` token
    /// past the end.
    fn peek_at(&self, k: usize) -> Token {
        debug_assert!(k < self.ahead.len());
        let [next, after] = self.ahead;
        if k == 0 { next } else { after }
    }

    fn advance(&mut self) -> Token {
        let [next, after] = self.ahead;
        self.ahead = [after, self.toks.next()];
        next
    }

    fn text(&self, t: &Token) -> &'a str {
        self.src.get(t.start..t.end).unwrap_or("")
    }

    fn is_word(&self, word: &str) -> bool {
        let t = self.peek();
        t.tok == Tok::Ident && self.text(&t) == word
    }

    /// Consumes the keyword `word` if it is next.
    fn eat_word(&mut self, word: &str) -> bool {
        let yes = self.is_word(word);
        if yes {
            self.advance();
        }
        yes
    }

    fn eat(&mut self, tok: Tok) -> bool {
        let yes = self.peek().tok == tok;
        if yes {
            self.advance();
        }
        yes
    }

    /// Consumes a `tok`, or fails with `expected WHAT, found ...`.
    fn expect(&mut self, tok: Tok, what: &str) -> Result<Token, SurfaceError> {
        if self.peek().tok == tok {
            Ok(self.advance())
        } else {
            Err(self.expected(what))
        }
    }

    fn expect_word(&mut self, word: &str) -> Result<Token, SurfaceError> {
        if self.is_word(word) {
            Ok(self.advance())
        } else {
            Err(self.expected(&format!("`{word}`")))
        }
    }

    // ---- errors ----

    fn err(&self, pos: Pos, msg: String) -> SurfaceError {
        SurfaceError {
            loc: Location {
                func: self.func.map(|f| self.file.name(f).into()),
                pos: Some(pos),
                ..Location::default()
            },
            msg,
        }
    }

    /// `expected WHAT, found TOKEN` at the next token; the lexical error if
    /// the next token is where lexing failed.
    fn expected(&self, what: &str) -> SurfaceError {
        let t = self.peek();
        let found = match t.tok {
            Tok::Error => {
                if let Some(e) = &self.toks.error {
                    let mut e = e.clone();
                    e.loc.func = self.func.map(|f| self.file.name(f).into());
                    return e;
                }
                "an invalid character".to_string()
            }
            Tok::Eof => "end of file".to_string(),
            _ => format!("`{}`", self.text(&t)),
        };
        self.err(t.pos, format!("expected {what}, found {found}"))
    }

    fn too_deep(&self, depth: usize) -> Result<(), SurfaceError> {
        if depth > MAX_NESTING {
            Err(self.err(
                self.peek().pos,
                format!("expression nested deeper than {MAX_NESTING} levels"),
            ))
        } else {
            Ok(())
        }
    }

    // ---- items ----

    fn fn_decl(&mut self) -> Result<FnDecl, SurfaceError> {
        let pos = self.expect_word("fn")?.pos;
        let name = self.ident()?;
        self.func = Some(name.name);
        self.expect(Tok::LParen, "`(`")?;
        // Functions do not nest: the parameters go straight to the table.
        let start = self.file.params.len();
        while self.peek().tok != Tok::RParen {
            let pname = self.ident()?;
            self.expect(Tok::Colon, "`:`")?;
            let ty = self.ty(1)?;
            self.file.params.push(Param { name: pname, ty });
            if !self.eat(Tok::Comma) && self.peek().tok != Tok::RParen {
                return Err(self.expected("`,` or `)`"));
            }
        }
        let params = self.list_from(start, self.file.params.len(), "parameters")?;
        self.advance();
        let ret = if self.eat(Tok::Arrow) {
            self.ty(1)?
        } else {
            Type::Unit
        };
        // Declared rules: `jvp g`, `vjp h`, each at most once.
        let (mut jvp, mut vjp) = (None, None);
        while self.is_word("jvp") || self.is_word("vjp") {
            let t = self.advance();
            let word = self.text(&t);
            let rule = self.ident()?;
            let slot = if word == "jvp" { &mut jvp } else { &mut vjp };
            if slot.is_some() {
                return Err(self.err(
                    t.pos,
                    format!(
                        "`{word}` declared twice for `{}`",
                        self.file.name(name.name)
                    ),
                ));
            }
            *slot = Some(rule);
        }
        if self.peek().tok != Tok::LBrace {
            return Err(self.expected("`{` (or `jvp g`, `vjp h`)"));
        }
        let body = self.block(1)?;
        Ok(FnDecl {
            name,
            params,
            ret,
            jvp,
            vjp,
            body,
            pos,
        })
    }

    /// A name that is not a keyword.
    fn ident(&mut self) -> Result<Ident, SurfaceError> {
        let t = self.peek();
        let name = self.text(&t);
        if t.tok != Tok::Ident || KEYWORDS.contains(&name) {
            return Err(self.expected("a name"));
        }
        self.advance();
        Ok(Ident {
            name: self.intern(name, t.pos)?,
            pos: t.pos,
        })
    }

    /// The symbol of `name`, made on its first use.
    fn intern(&mut self, name: &'a str, pos: Pos) -> Result<Sym, SurfaceError> {
        if let Some(&sym) = self.syms.get(name) {
            return Ok(sym);
        }
        let sym = Sym(self.index32(self.file.names.len(), pos, "names")?);
        self.file.names.push(name.into());
        self.syms.insert(name, sym);
        Ok(sym)
    }

    /// `n` as a `u32` index or length, or `too many WHAT` at `pos`.
    fn index32(&self, n: usize, pos: Pos, what: &str) -> Result<u32, SurfaceError> {
        u32::try_from(n).map_err(|_| self.err(pos, format!("too many {what}")))
    }

    /// The list of `table[start..end]` of one of the file's tables.
    fn list_from<T>(&self, start: usize, end: usize, what: &str) -> Result<List<T>, SurfaceError> {
        let pos = self.peek().pos;
        let len = self.index32(end - start, pos, what)?;
        Ok(List::new(self.index32(start, pos, what)?, len))
    }

    // ---- types ----

    fn ty(&mut self, depth: usize) -> Result<Type, SurfaceError> {
        if depth > MAX_NESTING {
            return Err(self.err(
                self.peek().pos,
                format!("type nested deeper than {MAX_NESTING} levels"),
            ));
        }
        let t = self.peek();
        match t.tok {
            Tok::Ident => {
                let ty = match self.text(&t) {
                    "f64" => Type::F64,
                    "i64" => Type::I64,
                    "bool" => Type::Bool,
                    "fn" => {
                        self.advance();
                        self.expect(Tok::LParen, "`(`")?;
                        let (params, _) = self.ty_list(depth)?;
                        let ret = if self.eat(Tok::Arrow) {
                            self.ty(depth + 1)?
                        } else {
                            Type::Unit
                        };
                        return Ok(Type::func(params, ret));
                    }
                    _ => return Err(self.expected("a type")),
                };
                self.advance();
                Ok(ty)
            }
            Tok::LParen => {
                self.advance();
                let (mut elems, trailing_comma) = self.ty_list(depth)?;
                // `(T)` without a comma is `T` in parentheses, as in Rust.
                if elems.len() == 1
                    && !trailing_comma
                    && let Some(only) = elems.pop()
                {
                    return Ok(only);
                }
                Ok(Type::tuple(elems))
            }
            Tok::LBracket => {
                self.advance();
                let elem_pos = self.peek().pos;
                let elem = self.ty(depth + 1)?;
                let Some(scalar) = Scalar::of(&elem) else {
                    return Err(self.err(
                        elem_pos,
                        format!("array elements must be f64, i64 or bool, found {elem}"),
                    ));
                };
                self.expect(Tok::RBracket, "`]`")?;
                Ok(Type::Array(scalar))
            }
            _ => Err(self.expected("a type")),
        }
    }

    /// Types separated by commas up to and including `)`, and whether a
    /// comma came last.
    fn ty_list(&mut self, depth: usize) -> Result<(Vec<Type>, bool), SurfaceError> {
        let mut types = Vec::new();
        let mut trailing = false;
        while self.peek().tok != Tok::RParen {
            types.push(self.ty(depth + 1)?);
            trailing = self.eat(Tok::Comma);
            if !trailing && self.peek().tok != Tok::RParen {
                return Err(self.expected("`,` or `)`"));
            }
        }
        self.advance();
        Ok((types, trailing))
    }

    // ---- blocks and statements ----

    /// `{ stmts tail }`, at nesting level `depth`.
    fn block(&mut self, depth: usize) -> Result<Block, SurfaceError> {
        self.too_deep(depth)?;
        let pos = self.expect(Tok::LBrace, "`{`")?.pos;
        let base = self.stmt_stack.len();
        let mut tail = None;
        loop {
            let t = self.peek();
            match t.tok {
                Tok::RBrace => {
                    self.advance();
                    break;
                }
                // An empty statement, as Rust allows.
                Tok::Semi => {
                    self.advance();
                    continue;
                }
                _ => {}
            }
            if let Some(e) = self.stmt(depth)? {
                tail = Some(e);
                self.expect(Tok::RBrace, "`}`")?;
                break;
            }
        }
        let start = self.file.stmts.len();
        self.file.stmts.extend(self.stmt_stack.drain(base..));
        let stmts = self.list_from(start, self.file.stmts.len(), "statements")?;
        Ok(Block { stmts, tail, pos })
    }

    /// One statement, pushed to the statement stack; or the block's tail
    /// expression, returned when an expression is followed by `}`.
    fn stmt(&mut self, depth: usize) -> Result<Option<ExprId>, SurfaceError> {
        let t = self.peek();
        let pos = t.pos;
        let word = if t.tok == Tok::Ident {
            self.text(&t)
        } else {
            ""
        };
        let kind = match word {
            "let" => {
                self.advance();
                let mutable = self.eat_word("mut");
                let name = self.ident()?;
                let ty = if self.eat(Tok::Colon) {
                    Some(self.ty(1)?)
                } else {
                    None
                };
                self.expect(Tok::Assign, "`=`")?;
                let init = self.expr(depth + 1)?;
                self.expect(Tok::Semi, "`;`")?;
                StmtKind::Let {
                    mutable,
                    name,
                    ty,
                    init,
                }
            }
            "while" => {
                self.advance();
                let cond = self.expr(depth + 1)?;
                let body = self.block(depth + 1)?;
                StmtKind::While { cond, body }
            }
            "for" => {
                self.advance();
                let var = self.ident()?;
                self.expect_word("in")?;
                let start = self.expr(depth + 1)?;
                self.expect(Tok::DotDot, "`..`")?;
                let end = self.expr(depth + 1)?;
                let body = self.block(depth + 1)?;
                StmtKind::For {
                    var,
                    start,
                    end,
                    body,
                }
            }
            "return" => {
                self.advance();
                let value = match self.peek().tok {
                    Tok::Semi | Tok::RBrace => None,
                    _ => Some(self.expr(depth + 1)?),
                };
                self.end_of_jump()?;
                StmtKind::Return(value)
            }
            "break" => {
                self.advance();
                self.end_of_jump()?;
                StmtKind::Break
            }
            "continue" => {
                self.advance();
                self.end_of_jump()?;
                StmtKind::Continue
            }
            "if" | "" if t.tok == Tok::LBrace || word == "if" => {
                // A block-like expression ends the statement without `;`,
                // or is the block's value when `}` follows.
                let e = if word == "if" {
                    self.if_expr(depth + 1)?
                } else {
                    let b = self.block(depth + 1)?;
                    let b = self.table_block(b)?;
                    self.mk(ExprKind::Block(b), pos)?
                };
                if self.peek().tok == Tok::RBrace {
                    return Ok(Some(e));
                }
                if !self.eat(Tok::Semi) {
                    // As in Rust, its value must then be `()`: `if c { 1 }
                    // else { 2 } - 1` is this statement, then `-1`.
                    let kind = StmtKind::Expr(e);
                    self.stmt_stack.push(Stmt {
                        kind,
                        pos,
                        unit_without_semi: true,
                    });
                    return Ok(None);
                }
                StmtKind::Expr(e)
            }
            _ => {
                let e = self.expr(depth + 1)?;
                match self.peek().tok {
                    Tok::RBrace => return Ok(Some(e)),
                    Tok::Semi => {
                        self.advance();
                        StmtKind::Expr(e)
                    }
                    Tok::Assign => {
                        self.advance();
                        self.assign(e, depth)?
                    }
                    _ => return Err(self.expected("`;`")),
                }
            }
        };
        self.stmt_stack.push(Stmt {
            kind,
            pos,
            unit_without_semi: false,
        });
        Ok(None)
    }

    /// The rest of `target = value;` after the `=`.
    fn assign(&mut self, target_id: ExprId, depth: usize) -> Result<StmtKind, SurfaceError> {
        // The target is not an expression of the tree: give back its id
        // (the last one handed out: a node is made after its children) to
        // keep ids dense, and take it out of the table, where its id is its
        // index.
        let target = match self.file.exprs.last() {
            Some(last)
                if last.id == target_id
                    && matches!(last.kind, ExprKind::Name(_) | ExprKind::Index { .. }) =>
            {
                self.file.exprs.pop()
            }
            _ => None,
        };
        let value = self.expr(depth + 1)?;
        self.expect(Tok::Semi, "`;`")?;
        match target {
            Some(Expr {
                kind: ExprKind::Name(name),
                pos,
                ..
            }) => Ok(StmtKind::Assign {
                name: Ident { name, pos },
                value,
            }),
            Some(Expr {
                kind: ExprKind::Index { array, index },
                ..
            }) => Ok(StmtKind::IndexAssign {
                array,
                index,
                value,
            }),
            _ => {
                let pos = self.file.expr(target_id).pos;
                Err(self.err(pos, "invalid left-hand side of assignment".to_string()))
            }
        }
    }

    /// After `return`, `break`, `continue`: a `;`, or the block's `}` (left
    /// for the block), as Rust allows.
    fn end_of_jump(&mut self) -> Result<(), SurfaceError> {
        if self.peek().tok == Tok::RBrace || self.eat(Tok::Semi) {
            Ok(())
        } else {
            Err(self.expected("`;`"))
        }
    }

    // ---- expressions ----

    /// Makes an expression: pushes it to the file's table, where its id is
    /// its index (its children, made before it, have smaller ids).
    fn mk(&mut self, kind: ExprKind, pos: Pos) -> Result<ExprId, SurfaceError> {
        // Ids up to `u32::MAX - 1`, so that a count of them fits a `u32`.
        let id = match u32::try_from(self.file.exprs.len()) {
            Ok(id) if id < u32::MAX => ExprId(id),
            _ => return Err(self.err(pos, "too many expressions".to_string())),
        };
        self.file.exprs.push(Expr { kind, pos, id });
        Ok(id)
    }

    /// The position of the expression `id`, made already.
    fn pos_of(&self, id: ExprId) -> Pos {
        self.file.expr(id).pos
    }

    /// Puts the block of a block expression or an `if` in the file's table.
    fn table_block(&mut self, b: Block) -> Result<BlockId, SurfaceError> {
        let id = BlockId(self.index32(self.file.blocks.len(), b.pos, "blocks")?);
        self.file.blocks.push(b);
        Ok(id)
    }

    /// Appends `expr_stack[base..]` to the file's expression lists.
    fn take_exprs(&mut self, base: usize) -> Result<List<ExprId>, SurfaceError> {
        let start = self.file.expr_lists.len();
        self.file.expr_lists.extend(self.expr_stack.drain(base..));
        self.list_from(start, self.file.expr_lists.len(), "expressions")
    }

    /// The binary operator next, if any.
    fn binop(&self) -> Option<(BinOp, Level)> {
        Some(match self.peek().tok {
            Tok::OrOr => (BinOp::Or, Level::Or),
            Tok::AndAnd => (BinOp::And, Level::And),
            Tok::EqEq => (BinOp::Eq, Level::Cmp),
            Tok::Ne => (BinOp::Ne, Level::Cmp),
            Tok::Lt => (BinOp::Lt, Level::Cmp),
            Tok::Le => (BinOp::Le, Level::Cmp),
            Tok::Gt => (BinOp::Gt, Level::Cmp),
            Tok::Ge => (BinOp::Ge, Level::Cmp),
            Tok::Plus => (BinOp::Add, Level::Add),
            Tok::Minus => (BinOp::Sub, Level::Add),
            Tok::Star => (BinOp::Mul, Level::Mul),
            Tok::Slash => (BinOp::Div, Level::Mul),
            Tok::Percent => (BinOp::Rem, Level::Mul),
            _ => return None,
        })
    }

    /// Closes a pending chain with its last operand `last`.
    fn close(&mut self, p: Pending, last: ExprId) -> Result<ExprId, SurfaceError> {
        self.link_stack.push((p.op.0, p.op.1, last));
        let start = self.file.links.len();
        self.file.links.extend(self.link_stack.drain(p.base..));
        let rest = self.list_from(start, self.file.links.len(), "operands")?;
        let pos = self.pos_of(p.first);
        self.mk(
            ExprKind::Chain {
                first: p.first,
                rest,
            },
            pos,
        )
    }

    /// An expression at nesting level `depth`: operands joined by binary
    /// operators, with an operator stack of at most one chain per level.
    fn expr(&mut self, depth: usize) -> Result<ExprId, SurfaceError> {
        self.too_deep(depth)?;
        // This expression's chains are `self.pending[base..]`.
        let base = self.pending.len();
        let mut cur = self.operand(depth)?;
        while let Some((op, level)) = self.binop() {
            let op_pos = self.advance().pos;
            while self.pending.len() > base
                && self.pending.last().is_some_and(|top| top.level > level)
            {
                if let Some(top) = self.pending.pop() {
                    cur = self.close(top, cur)?;
                }
            }
            let mine = self.pending.len() > base;
            match self.pending.last_mut().filter(|_| mine) {
                Some(top) if top.level == level => {
                    if level == Level::Cmp {
                        return Err(
                            self.err(op_pos, "comparison operators cannot be chained".to_string())
                        );
                    }
                    let prev = std::mem::replace(&mut top.op, (op, op_pos));
                    self.link_stack.push((prev.0, prev.1, cur));
                }
                _ => {
                    let base = self.link_stack.len();
                    self.pending.push(Pending {
                        level,
                        first: cur,
                        base,
                        op: (op, op_pos),
                    });
                }
            }
            cur = self.operand(depth)?;
        }
        while self.pending.len() > base
            && let Some(top) = self.pending.pop()
        {
            cur = self.close(top, cur)?;
        }
        Ok(cur)
    }

    /// Prefix operators, a primary expression, postfix operators; each
    /// operator one nesting level.
    fn operand(&mut self, depth: usize) -> Result<ExprId, SurfaceError> {
        // This operand's prefix operators are `self.prefix_stack[base..]`.
        let base = self.prefix_stack.len();
        loop {
            let t = self.peek();
            let op = match t.tok {
                Tok::Minus => UnOp::Neg,
                Tok::Bang => UnOp::Not,
                _ => break,
            };
            self.too_deep(depth + (self.prefix_stack.len() - base) + 1)?;
            self.advance();
            self.prefix_stack.push((op, t.pos));
        }
        let mut depth = depth + (self.prefix_stack.len() - base);
        // `-9223372036854775808` is i64::MIN, as in Rust.
        let t = self.peek();
        let mut e = if t.tok == Tok::Int
            && self.prefix_stack.len() > base
            && matches!(self.prefix_stack.last(), Some((UnOp::Neg, _)))
            && self.text(&t) == "9223372036854775808"
            && !matches!(self.peek_at(1).tok, Tok::LParen | Tok::LBracket | Tok::Dot)
        {
            self.advance();
            let neg_pos = self.prefix_stack.pop().map_or(t.pos, |(_, p)| p);
            self.mk(ExprKind::I64(i64::MIN), neg_pos)?
        } else {
            self.primary(depth)?
        };
        loop {
            let t = self.peek();
            let post = match t.tok {
                Tok::LParen => {
                    self.too_deep(depth + 1)?;
                    self.advance();
                    let base = self.expr_stack.len();
                    while self.peek().tok != Tok::RParen {
                        let arg = self.expr(depth + 1)?;
                        self.expr_stack.push(arg);
                        if !self.eat(Tok::Comma) && self.peek().tok != Tok::RParen {
                            return Err(self.expected("`,` or `)`"));
                        }
                    }
                    self.advance();
                    Postfix::Call(self.take_exprs(base)?)
                }
                Tok::LBracket => {
                    self.too_deep(depth + 1)?;
                    self.advance();
                    let index = self.expr(depth + 1)?;
                    self.expect(Tok::RBracket, "`]`")?;
                    Postfix::Index(index)
                }
                Tok::Dot => {
                    self.too_deep(depth + 1)?;
                    self.advance();
                    let f = self.peek();
                    let n = match f.tok {
                        Tok::Int => self.text(&f).parse::<u32>().map_err(|_| {
                            self.err(
                                f.pos,
                                format!("field number {} out of range", self.text(&f)),
                            )
                        })?,
                        _ => return Err(self.expected("a field number")),
                    };
                    self.advance();
                    Postfix::Field(n)
                }
                _ => break,
            };
            depth += 1;
            let pos = self.pos_of(e);
            let kind = match post {
                Postfix::Call(args) => ExprKind::Call { callee: e, args },
                Postfix::Index(index) => ExprKind::Index { array: e, index },
                Postfix::Field(index) => ExprKind::Field { tuple: e, index },
            };
            e = self.mk(kind, pos)?;
        }
        while self.prefix_stack.len() > base
            && let Some((op, pos)) = self.prefix_stack.pop()
        {
            e = self.mk(ExprKind::Unary { op, operand: e }, pos)?;
        }
        Ok(e)
    }

    fn primary(&mut self, depth: usize) -> Result<ExprId, SurfaceError> {
        let t = self.peek();
        let pos = t.pos;
        let kind = match t.tok {
            Tok::Int => {
                let text = self.text(&t);
                let v = text.parse::<i64>().map_err(|_| {
                    self.err(pos, format!("integer literal {text} out of range for i64"))
                })?;
                self.advance();
                ExprKind::I64(v)
            }
            Tok::Float => {
                let text = self.text(&t);
                let v = text
                    .parse::<f64>()
                    .map_err(|_| self.err(pos, format!("invalid number `{text}`")))?;
                self.advance();
                ExprKind::F64(v)
            }
            Tok::LParen => {
                self.too_deep(depth + 1)?;
                self.advance();
                if self.eat(Tok::RParen) {
                    ExprKind::Unit
                } else {
                    let first = self.expr(depth + 1)?;
                    if self.eat(Tok::RParen) {
                        return Ok(first);
                    }
                    if !self.eat(Tok::Comma) {
                        return Err(self.expected("`,` or `)`"));
                    }
                    let base = self.expr_stack.len();
                    self.expr_stack.push(first);
                    while self.peek().tok != Tok::RParen {
                        let elem = self.expr(depth + 1)?;
                        self.expr_stack.push(elem);
                        if !self.eat(Tok::Comma) && self.peek().tok != Tok::RParen {
                            return Err(self.expected("`,` or `)`"));
                        }
                    }
                    self.advance();
                    ExprKind::Tuple(self.take_exprs(base)?)
                }
            }
            Tok::LBrace => {
                let b = self.block(depth + 1)?;
                ExprKind::Block(self.table_block(b)?)
            }
            Tok::Ident => match self.text(&t) {
                "true" => {
                    self.advance();
                    ExprKind::Bool(true)
                }
                "false" => {
                    self.advance();
                    ExprKind::Bool(false)
                }
                "inf" => {
                    self.advance();
                    ExprKind::F64(f64::INFINITY)
                }
                "nan" => {
                    self.advance();
                    ExprKind::F64(f64::NAN)
                }
                "if" => return self.if_expr(depth + 1),
                name if KEYWORDS.contains(&name) => return Err(self.expected("an expression")),
                name => {
                    self.advance();
                    ExprKind::Name(self.intern(name, pos)?)
                }
            },
            _ => return Err(self.expected("an expression")),
        };
        self.mk(kind, pos)
    }

    /// `if cond { } else if cond { } else { }`; each `else if` one level deeper.
    fn if_expr(&mut self, depth: usize) -> Result<ExprId, SurfaceError> {
        self.too_deep(depth)?;
        let pos = self.expect_word("if")?.pos;
        let cond = self.expr(depth + 1)?;
        let then = self.block(depth + 1)?;
        let then = self.table_block(then)?;
        let els = if self.eat_word("else") {
            let e = if self.is_word("if") {
                self.if_expr(depth + 1)?
            } else {
                let bpos = self.peek().pos;
                let b = self.block(depth + 1)?;
                let b = self.table_block(b)?;
                self.mk(ExprKind::Block(b), bpos)?
            };
            Some(e)
        } else {
            None
        };
        self.mk(ExprKind::If { cond, then, els }, pos)
    }
}
