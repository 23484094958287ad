//! The parser of IR text (SYNTAX.md §1): text to [`Module`].
//!
//! Two passes over the tokens: the first reads every function header (so
//! functions may be used before their definition) and skips the bodies; the
//! second parses each body. A body is read in one go: each statement is created
//! at once with [`Func::push_inst`] (so its result value exists and its name is
//! known), and its operands, block references and terminators are kept aside
//! and filled in when the body is complete, which allows uses before definitions
//! in layout order. Omitted `:: T` annotations are then inferred by a worklist
//! over the statements whose operand types become known, in time linear in the
//! function.
//!
//! Assumes nothing about the input. Guarantees: never panics, recurses at most
//! [`MAX_NESTING`] levels (only in types), runs in time linear in the input
//! (names are looked up in hash maps, nothing is rescanned); every error is
//! located, and inside a function names the function, block and statement.
//! Type errors where an annotation is present are left to the verifier.

use super::ParseError;
use super::lexer::{Lexer, Tok, Token};
use crate::func::{
    Args, Block, Const, Func, FuncId, FuncRef, Inst, InstKind, Module, Operand, Terminator, Value,
};
use crate::loc::{Location, Pos};
use crate::prim::Prim;
use crate::types::{Lanes, Scalar, Type};
use crate::{MAX_NESTING, MAX_WIDTH};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::collections::hash_map::Entry;

/// Parses a module from IR text, resolving names and inferring omitted types.
pub fn parse_module(src: &str) -> Result<Module, ParseError> {
    let mut parser = Parser::new(src)?;
    let mut module = Module::new();
    let (headers, lex_error) = parser.parse_headers(&mut module)?;
    // With every header known, the body holding a lexical error reports it
    // with its block and statement (or an earlier error of the text first).
    for header in headers {
        parser.declare_rules(&mut module, &header)?;
        parser.parse_body(&mut module, header)?;
    }
    match lex_error {
        Some(e) => Err(e),
        None => Ok(module),
    }
}

/// A function header read by the first pass, and where its body starts.
struct Header<'a> {
    id: FuncId,
    name: &'a str,
    params: Vec<&'a str>,
    /// The declared rules: `jvp @g` / `vjp @h`, the word, the name and
    /// where the name is.
    rules: Vec<(&'a str, &'a str, Pos)>,
    body: (Lexer<'a>, Token),
}

/// An operand before value names are resolved.
#[derive(Clone, Copy)]
enum RawOp<'a> {
    Value(&'a str, Pos),
    Const(Const),
}

/// A block reference before labels are resolved.
#[derive(Clone, Copy)]
struct RawLabel {
    label: u32,
    pos: Pos,
}

enum RawKind<'a> {
    Prim(Prim, Vec<RawOp<'a>>),
    Invoke(FuncId, Vec<RawOp<'a>>),
    CallValue(&'a str, Pos, Vec<RawOp<'a>>),
    Phi(Vec<(RawLabel, RawOp<'a>)>),
}

enum RawTerm<'a> {
    Goto(RawLabel),
    GotoIfNot(RawOp<'a>, RawLabel),
    Return(RawOp<'a>),
    Switch(RawOp<'a>, Vec<RawLabel>),
}

/// Where in the function a statement or terminator is, for error locations.
#[derive(Clone, Copy)]
struct Place {
    label: u32,
    stmt: u32,
    pos: Pos,
}

struct PendingInst<'a> {
    inst: Inst,
    kind: RawKind<'a>,
    place: Place,
    /// The result needs its type inferred.
    infer: bool,
}

struct PendingTerm<'a> {
    block: Block,
    term: RawTerm<'a>,
    place: Place,
}

/// The state of the body being parsed.
struct Body<'a> {
    names: HashMap<&'a str, Value>,
    labels: HashMap<u32, Block>,
    insts: Vec<PendingInst<'a>>,
    terms: Vec<PendingTerm<'a>>,
}

struct Parser<'a> {
    lx: Lexer<'a>,
    tok: Token,
    /// The error context: function, block label, statement number.
    func: Option<String>,
    block: Option<u32>,
    stmt: Option<u32>,
    /// The module's functions by name, from the first pass.
    funcs: HashMap<&'a str, FuncId>,
}

impl<'a> Parser<'a> {
    fn new(src: &'a str) -> Result<Parser<'a>, ParseError> {
        let mut lx = Lexer::new(src);
        let tok = lx.next_token()?;
        Ok(Parser {
            lx,
            tok,
            func: None,
            block: None,
            stmt: None,
            funcs: HashMap::new(),
        })
    }

    fn err(&self, pos: Pos, msg: String) -> ParseError {
        ParseError {
            loc: Location {
                func: self.func.as_deref().map(Into::into),
                block: self.block,
                stmt: self.stmt,
                pos: Some(pos),
            },
            msg,
        }
    }

    fn err_at_place(&self, place: Place, pos: Pos, msg: String) -> ParseError {
        ParseError {
            loc: Location {
                func: self.func.as_deref().map(Into::into),
                block: Some(place.label),
                stmt: Some(place.stmt),
                pos: Some(pos),
            },
            msg,
        }
    }

    fn advance(&mut self) -> Result<Token, ParseError> {
        let tok = self.tok;
        self.tok = self.lx.next_token().map_err(|mut e| {
            e.loc.func = self.func.as_deref().map(Into::into);
            e.loc.block = self.block;
            e.loc.stmt = self.stmt;
            e
        })?;
        Ok(tok)
    }

    fn text(&self) -> &'a str {
        self.lx.text(&self.tok)
    }

    fn found(&self) -> String {
        self.lx.describe(&self.tok)
    }

    fn is_keyword(&self, kw: &str) -> bool {
        self.tok.tok == Tok::Ident && self.text() == kw
    }

    fn expected(&self, what: &str) -> ParseError {
        self.err(
            self.tok.pos,
            format!("expected {what}, found {}", self.found()),
        )
    }

    fn expect(&mut self, tok: Tok, what: &str) -> Result<Token, ParseError> {
        if self.tok.tok == tok {
            self.advance()
        } else {
            Err(self.expected(what))
        }
    }

    // ---- pass 1: headers ----

    /// Every header of the text, and the first lexical error met while
    /// skipping bodies (the scan skips the bad character and goes on, so that
    /// functions defined after it are known when that body is parsed). An error
    /// in a header after such a lexical error stops the scan; the earlier
    /// lexical error is the one reported.
    #[allow(clippy::type_complexity)]
    fn parse_headers(
        &mut self,
        module: &mut Module,
    ) -> Result<(Vec<Header<'a>>, Option<ParseError>), ParseError> {
        let mut headers = Vec::new();
        let mut lex_error = None;
        while self.tok.tok != Tok::Eof {
            match self.parse_header(module) {
                Ok((header, body_error)) => {
                    headers.push(header);
                    if lex_error.is_none() {
                        lex_error = body_error;
                    }
                }
                Err(e) if lex_error.is_none() => return Err(e),
                Err(_) => break,
            }
        }
        self.func = None;
        Ok((headers, lex_error))
    }

    /// One header and the skip of its body, with the body's first lexical error.
    fn parse_header(
        &mut self,
        module: &mut Module,
    ) -> Result<(Header<'a>, Option<ParseError>), ParseError> {
        self.func = None;
        if !self.is_keyword("func") {
            return Err(self.expected("`func`"));
        }
        let func_pos = self.advance()?.pos;
        let name_tok = self.expect(Tok::Global, "a function name `@name`")?;
        let name = self.lx.text(&name_tok);
        self.func = Some(name.to_string());
        let header = self.parse_signature(module, name, name_tok.pos, func_pos)?;
        self.funcs.insert(name, header.id);
        let body_error = self.skip_body(name)?;
        Ok((header, body_error))
    }

    fn parse_signature(
        &mut self,
        module: &mut Module,
        name: &'a str,
        name_pos: Pos,
        func_pos: Pos,
    ) -> Result<Header<'a>, ParseError> {
        self.expect(Tok::LParen, "`(`")?;
        let mut params: Vec<(&'a str, Type)> = Vec::new();
        let mut seen: HashMap<&'a str, ()> = HashMap::new();
        if self.tok.tok != Tok::RParen {
            loop {
                let ptok = self.expect(Tok::Value, "a parameter `%name`")?;
                let pname = self.lx.text(&ptok);
                if seen.insert(pname, ()).is_some() {
                    return Err(self.err(ptok.pos, format!("duplicate value definition %{pname}")));
                }
                self.expect(Tok::Colon, "`:`")?;
                let ty = self.parse_type(1)?;
                params.push((pname, ty));
                if self.tok.tok == Tok::Comma {
                    self.advance()?;
                } else if self.tok.tok == Tok::RParen {
                    break;
                } else {
                    return Err(self.expected("`,` or `)`"));
                }
            }
        }
        self.advance()?;
        // `-> ()` may be omitted.
        let ret = if self.tok.tok == Tok::Arrow {
            self.advance()?;
            self.parse_type(1)?
        } else {
            Type::Unit
        };
        // Declared rules: `jvp @g`, `vjp @h`, each at most once.
        let mut rules = Vec::new();
        while self.is_keyword("jvp") || self.is_keyword("vjp") {
            let word = self.lx.text(&self.tok);
            let at = self.advance()?.pos;
            if rules.iter().any(|&(w, _, _)| w == word) {
                return Err(self.err(at, format!("`{word}` declared twice for @{name}")));
            }
            let rule_tok = self.expect(Tok::Global, "a function name `@name`")?;
            rules.push((word, self.lx.text(&rule_tok), rule_tok.pos));
        }
        if self.tok.tok != Tok::LBrace {
            return Err(self.expected("`{` (or `jvp @g`, `vjp @h`)"));
        }
        self.advance()?;
        let param_names = params.iter().map(|(n, _)| *n).collect();
        let decl = params
            .into_iter()
            .map(|(n, t)| (Some(n.to_string()), t))
            .collect();
        let id = module
            .declare_func(name, decl, ret)
            .map_err(|_| self.err(name_pos, format!("duplicate function @{name}")))?;
        module[id].pos = Some(func_pos);
        Ok(Header {
            id,
            name,
            params: param_names,
            rules,
            body: (self.lx.clone(), self.tok),
        })
    }

    /// Records the rules `header` declares, each naming a function of the
    /// module (their signatures are the verifier's to check).
    fn declare_rules(
        &mut self,
        module: &mut Module,
        header: &Header<'a>,
    ) -> Result<(), ParseError> {
        let mut rules = crate::DeclaredRules::default();
        for &(word, name, pos) in &header.rules {
            self.func = Some(header.name.to_string());
            let Some(&g) = self.funcs.get(name) else {
                return Err(self.err(pos, format!("unknown function @{name}")));
            };
            if word == "jvp" {
                rules.jvp = Some(g);
            } else {
                rules.vjp = Some(g);
            }
        }
        self.func = None;
        module.declare_rules(header.id, rules);
        Ok(())
    }

    /// Skips a body up to its `}`. The first lexical error is returned as
    /// `Ok(Some(_))`, for the second pass to report in context, and the scan
    /// goes on past the bad character; a missing `}` is an `Err`.
    fn skip_body(&mut self, name: &str) -> Result<Option<ParseError>, ParseError> {
        let mut first_error = None;
        loop {
            match self.tok.tok {
                Tok::RBrace => break,
                Tok::Eof => {
                    return Err(self.err(
                        self.tok.pos,
                        format!("unterminated function @{name}: expected `}}`, found end of file"),
                    ));
                }
                Tok::Ident if self.text() == "func" => {
                    return Err(self.err(
                        self.tok.pos,
                        format!("unterminated function @{name}: expected `}}`, found `func`"),
                    ));
                }
                _ => {}
            }
            if let Err(lex_error) = self.advance() {
                first_error.get_or_insert(lex_error);
                if !self.lx.skip_char() {
                    return Ok(first_error);
                }
            }
        }
        // The token after `}` starts the next header; a lexical error there is
        // the header's to report.
        if let Err(lex_error) = self.advance() {
            first_error.get_or_insert(lex_error);
        }
        Ok(first_error)
    }

    // ---- types ----

    /// The rest of `dual<T` after `T`: an optional `, N` and the `>`. Kept out
    /// of `parse_type`, which recurses once per nesting level and so must keep
    /// a small stack frame.
    #[inline(never)]
    fn dual_type_rest(&mut self, at: Pos, inner: Type) -> Result<Type, ParseError> {
        let mut lanes = Lanes::ONE;
        if self.tok.tok == Tok::Comma {
            self.advance()?;
            let num = self.tok;
            if num.tok == Tok::Ident && self.text() == "sparse" {
                // `dual<T, sparse>`: sparse forward mode.
                self.advance()?;
                self.expect(Tok::Greater, "`>`")?;
                if !inner.has_tangent() {
                    return Err(self.err(
                        at,
                        format!("`dual<{inner}, sparse>` needs a type with a tangent (one that contains f64)"),
                    ));
                }
                if inner.sparse_tangent().is_none() {
                    return Err(self.err(
                        at,
                        format!("`dual<{inner}, sparse>` needs a type without duals or sparse handles (sparse mode is not nested)"),
                    ));
                }
                return Ok(Type::dual_n(inner, Lanes::Sparse));
            }
            if num.tok != Tok::Int {
                return Err(self.expected("a batch width or `sparse`"));
            }
            let text = self.lx.text(&num);
            lanes = text
                .parse::<u32>()
                .ok()
                .filter(|w| *w <= MAX_WIDTH)
                .and_then(Lanes::dense)
                .ok_or_else(|| {
                    self.err(
                        num.pos,
                        format!("batch width {text} out of range (1 to {MAX_WIDTH})"),
                    )
                })?;
            self.advance()?;
        }
        self.expect(Tok::Greater, "`>`")?;
        if !inner.has_tangent() {
            return Err(self.err(
                at,
                format!("`dual<{inner}>` needs a type with a tangent (one that contains f64)"),
            ));
        }
        Ok(Type::dual_n(inner, lanes))
    }

    fn parse_type(&mut self, depth: usize) -> Result<Type, ParseError> {
        if depth > MAX_NESTING {
            return Err(self.err(
                self.tok.pos,
                format!("type nested deeper than {MAX_NESTING} levels"),
            ));
        }
        match self.tok.tok {
            Tok::Ident => {
                let word = self.text();
                let scalar = match word {
                    "f64" => Some(Type::F64),
                    "i64" => Some(Type::I64),
                    "bool" => Some(Type::Bool),
                    "sparse" => Some(Type::Sparse),
                    _ => None,
                };
                if let Some(ty) = scalar {
                    self.advance()?;
                    return Ok(ty);
                }
                match word {
                    "fn" => {
                        self.advance()?;
                        self.expect(Tok::LParen, "`(`")?;
                        let (params, _) = self.parse_type_list(depth)?;
                        self.expect(Tok::Arrow, "`->`")?;
                        let ret = self.parse_type(depth + 1)?;
                        Ok(Type::func(params, ret))
                    }
                    "dual" => {
                        let at = self.tok.pos;
                        self.advance()?;
                        self.expect(Tok::Less, "`<`")?;
                        let inner = self.parse_type(depth + 1)?;
                        self.dual_type_rest(at, inner)
                    }
                    _ => Err(self.expected("a type")),
                }
            }
            Tok::LParen => {
                self.advance()?;
                let (mut elems, trailing_comma) = self.parse_type_list(depth)?;
                // `(T)` without a comma is `T` in parentheses, as in Rust.
                match elems.pop() {
                    Some(only) if elems.is_empty() && !trailing_comma => Ok(only),
                    Some(last) => {
                        elems.push(last);
                        Ok(Type::tuple(elems))
                    }
                    None => Ok(Type::Unit),
                }
            }
            Tok::LBracket => {
                self.advance()?;
                let elem = match self.text() {
                    "f64" if self.tok.tok == Tok::Ident => Scalar::F64,
                    "i64" if self.tok.tok == Tok::Ident => Scalar::I64,
                    "bool" if self.tok.tok == Tok::Ident => Scalar::Bool,
                    "sparse" if self.tok.tok == Tok::Ident => Scalar::Sparse,
                    _ => {
                        return Err(
                            self.expected("an array element type `f64`, `i64`, `bool` or `sparse`")
                        );
                    }
                };
                self.advance()?;
                self.expect(Tok::RBracket, "`]`")?;
                Ok(Type::Array(elem))
            }
            _ => Err(self.expected("a type")),
        }
    }

    /// Types separated by commas up to and including `)`; a trailing comma is
    /// allowed and reported.
    fn parse_type_list(&mut self, depth: usize) -> Result<(Vec<Type>, bool), ParseError> {
        let mut types = Vec::new();
        let mut trailing = false;
        while self.tok.tok != Tok::RParen {
            types.push(self.parse_type(depth + 1)?);
            trailing = false;
            if self.tok.tok == Tok::Comma {
                self.advance()?;
                trailing = true;
            } else if self.tok.tok != Tok::RParen {
                return Err(self.expected("`,` or `)`"));
            }
        }
        self.advance()?;
        Ok((types, trailing))
    }

    // ---- pass 2: bodies ----

    fn parse_body(&mut self, module: &mut Module, header: Header<'a>) -> Result<(), ParseError> {
        (self.lx, self.tok) = header.body;
        self.func = Some(header.name.to_string());
        self.block = None;
        self.stmt = None;
        let mut body = Body {
            names: HashMap::new(),
            labels: HashMap::new(),
            insts: Vec::new(),
            terms: Vec::new(),
        };
        for (name, &v) in header.params.iter().zip(&module[header.id].params) {
            body.names.insert(name, v);
        }
        let func = &mut module[header.id];
        // The current block, its label and whether it has its terminator.
        let mut current: Option<(Block, u32, bool)> = None;
        loop {
            match self.tok.tok {
                Tok::RBrace | Tok::Label | Tok::Eof => {
                    if let Some((_, label, false)) = current {
                        self.stmt = None;
                        return Err(
                            self.expected(&format!("a terminator at the end of block #{label}"))
                        );
                    }
                    if self.tok.tok == Tok::RBrace {
                        if current.is_none() {
                            return Err(self.err(
                                module[header.id].pos.unwrap_or(self.tok.pos),
                                format!("function @{} has no blocks", header.name),
                            ));
                        }
                        break;
                    }
                    if self.tok.tok == Tok::Eof {
                        return Err(self.expected("`}`"));
                    }
                    let block = self.parse_label(func, &mut body)?;
                    current = Some((block, func.blocks[block].label, false));
                }
                _ => {
                    let Some((block, label, terminated)) = current else {
                        return Err(self.expected("a block label `#N:`"));
                    };
                    if terminated {
                        self.stmt = Some(self.stmt.unwrap_or(0) + 1);
                        return Err(self.expected(&format!(
                            "a block label or `}}` after the terminator of block #{label}"
                        )));
                    }
                    let stmt = self.stmt.unwrap_or(0) + 1;
                    self.stmt = Some(stmt);
                    let place = Place {
                        label,
                        stmt,
                        pos: self.tok.pos,
                    };
                    if let Some(term) = self.parse_terminator()? {
                        body.terms.push(PendingTerm { block, term, place });
                        func.blocks[block].term_pos = Some(place.pos);
                        current = Some((block, label, true));
                    } else {
                        self.parse_statement(func, block, place, &mut body)?;
                    }
                }
            }
        }
        self.block = None;
        self.stmt = None;
        self.resolve(func, &body)?;
        self.infer(module, header.id, &body)?;
        // What follows the `}` is outside the function.
        self.func = None;
        self.advance()?;
        Ok(())
    }

    fn parse_label(&mut self, func: &mut Func, body: &mut Body<'a>) -> Result<Block, ParseError> {
        let at = self.tok;
        let label = self.label_number(&at)?;
        self.block = Some(label);
        self.stmt = None;
        self.advance()?;
        self.expect(Tok::Colon, "`:` after the block label")?;
        match body.labels.entry(label) {
            Entry::Occupied(_) => Err(self.err(at.pos, format!("duplicate block label #{label}"))),
            Entry::Vacant(slot) => {
                let block = func.add_block(label);
                func.blocks[block].pos = Some(at.pos);
                slot.insert(block);
                Ok(block)
            }
        }
    }

    fn label_number(&self, at: &Token) -> Result<u32, ParseError> {
        let text = self.lx.text(at);
        text.parse::<u32>().map_err(|_| {
            self.err(
                at.pos,
                format!("label #{text} out of range (at most {})", u32::MAX),
            )
        })
    }

    fn raw_label(&mut self) -> Result<RawLabel, ParseError> {
        if self.tok.tok != Tok::Label {
            return Err(self.expected("a block label `#N`"));
        }
        let at = self.advance()?;
        Ok(RawLabel {
            label: self.label_number(&at)?,
            pos: at.pos,
        })
    }

    /// A terminator, or `None` (nothing consumed) when the next token starts none.
    fn parse_terminator(&mut self) -> Result<Option<RawTerm<'a>>, ParseError> {
        if self.tok.tok != Tok::Ident {
            return Ok(None);
        }
        let term = match self.text() {
            "goto" => {
                self.advance()?;
                RawTerm::Goto(self.raw_label()?)
            }
            "gotoifnot" => {
                self.advance()?;
                let cond = self.parse_operand()?;
                self.expect(Tok::Comma, "`,`")?;
                RawTerm::GotoIfNot(cond, self.raw_label()?)
            }
            "return" => {
                self.advance()?;
                RawTerm::Return(self.parse_operand()?)
            }
            "switch" => {
                self.advance()?;
                let index = self.parse_operand()?;
                self.expect(Tok::Comma, "`,`")?;
                self.expect(Tok::LBracket, "`[`")?;
                let mut targets = Vec::new();
                while self.tok.tok != Tok::RBracket {
                    targets.push(self.raw_label()?);
                    if self.tok.tok == Tok::Comma {
                        self.advance()?;
                    } else if self.tok.tok != Tok::RBracket {
                        return Err(self.expected("`,` or `]`"));
                    }
                }
                self.advance()?;
                RawTerm::Switch(index, targets)
            }
            _ => return Ok(None),
        };
        Ok(Some(term))
    }

    fn parse_statement(
        &mut self,
        func: &mut Func,
        block: Block,
        place: Place,
        body: &mut Body<'a>,
    ) -> Result<(), ParseError> {
        let result = if self.tok.tok == Tok::Value {
            let at = self.advance()?;
            self.expect(Tok::Equals, "`=`")?;
            Some((self.lx.text(&at), at.pos))
        } else {
            None
        };
        let kind = self.parse_rhs(result.is_some())?;
        let annot = if self.tok.tok == Tok::ColonColon {
            self.advance()?;
            Some(self.parse_type(1)?)
        } else {
            None
        };
        let infer = result.is_some() && annot.is_none();
        if infer && matches!(kind, RawKind::Prim(Prim::Alloc, _)) {
            // Point at the statement, not at the token after it.
            return Err(self.err(
                place.pos,
                "`alloc` needs a type annotation `:: [T]` naming its element type".to_string(),
            ));
        }
        if infer && matches!(kind, RawKind::Prim(Prim::Pop, _)) {
            return Err(self.err(
                place.pos,
                "`pop` needs a type annotation `:: T` naming the tape it pops".to_string(),
            ));
        }
        let result_ty = result.map(|_| annot.unwrap_or(Type::Unit));
        let placeholder = InstKind::Phi {
            entries: SmallVec::new(),
        };
        let (inst, value) = func.push_inst(block, placeholder, result_ty, Some(place.pos));
        if let (Some((name, pos)), Some(value)) = (result, value) {
            match body.names.entry(name) {
                Entry::Occupied(_) => {
                    return Err(self.err(pos, format!("duplicate value definition %{name}")));
                }
                Entry::Vacant(slot) => {
                    slot.insert(value);
                }
            }
            func.values[value].name = Some(name.into());
        }
        body.insts.push(PendingInst {
            inst,
            kind,
            place,
            infer,
        });
        Ok(())
    }
}

impl<'a> Parser<'a> {
    // ---- statements and operands ----

    fn parse_rhs(&mut self, has_result: bool) -> Result<RawKind<'a>, ParseError> {
        if self.is_keyword("call") {
            self.advance()?;
            match self.tok.tok {
                Tok::Ident => {
                    let name = self.text();
                    let Some(prim) = Prim::from_name(name) else {
                        let hint = crate::suggest::did_you_mean(
                            name,
                            "",
                            crate::prim::PRIMS.iter().map(|row| row.name),
                        );
                        return Err(
                            self.err(self.tok.pos, format!("unknown primitive `{name}`{hint}"))
                        );
                    };
                    self.advance()?;
                    Ok(RawKind::Prim(prim, self.parse_call_args()?))
                }
                Tok::Value => {
                    let at = self.advance()?;
                    let args = self.parse_call_args()?;
                    Ok(RawKind::CallValue(self.lx.text(&at), at.pos, args))
                }
                _ => Err(self.expected("a primitive name or a value `%f` after `call`")),
            }
        } else if self.is_keyword("invoke") {
            self.advance()?;
            if self.tok.tok != Tok::Global {
                return Err(self.expected("a function name `@g` after `invoke`"));
            }
            let name = self.text();
            let Some(&callee) = self.funcs.get(name) else {
                let hint = self.suggest_func(name, false);
                return Err(self.err(self.tok.pos, format!("unknown function @{name}{hint}")));
            };
            self.advance()?;
            Ok(RawKind::Invoke(callee, self.parse_call_args()?))
        } else if self.is_keyword("phi") {
            self.advance()?;
            self.expect(Tok::LBracket, "`[`")?;
            let mut entries = Vec::new();
            while self.tok.tok != Tok::RBracket {
                let label = self.raw_label()?;
                self.expect(Tok::FatArrow, "`=>`")?;
                entries.push((label, self.parse_operand()?));
                if self.tok.tok == Tok::Comma {
                    self.advance()?;
                } else if self.tok.tok != Tok::RBracket {
                    return Err(self.expected("`,` or `]`"));
                }
            }
            self.advance()?;
            Ok(RawKind::Phi(entries))
        } else if has_result {
            Err(self.expected("`call`, `invoke` or `phi`"))
        } else {
            Err(self.expected("a statement or a terminator"))
        }
    }

    fn parse_call_args(&mut self) -> Result<Vec<RawOp<'a>>, ParseError> {
        self.expect(Tok::LParen, "`(`")?;
        let mut args = Vec::new();
        while self.tok.tok != Tok::RParen {
            args.push(self.parse_operand()?);
            if self.tok.tok == Tok::Comma {
                self.advance()?;
            } else if self.tok.tok != Tok::RParen {
                return Err(self.expected("`,` or `)`"));
            }
        }
        self.advance()?;
        Ok(args)
    }

    fn parse_operand(&mut self) -> Result<RawOp<'a>, ParseError> {
        let at = self.tok;
        let text = self.text();
        let op = match at.tok {
            Tok::Value => RawOp::Value(text, at.pos),
            Tok::Int | Tok::Float => RawOp::Const(self.number(&at, false)?),
            Tok::Minus => {
                self.advance()?;
                let num = self.tok;
                match num.tok {
                    Tok::Int | Tok::Float => RawOp::Const(self.number(&num, true)?),
                    Tok::Ident if self.text() == "inf" => {
                        RawOp::Const(Const::F64(f64::NEG_INFINITY))
                    }
                    _ => return Err(self.expected("a number after `-`")),
                }
            }
            Tok::Ident => match text {
                "true" => RawOp::Const(Const::Bool(true)),
                "false" => RawOp::Const(Const::Bool(false)),
                "inf" => RawOp::Const(Const::F64(f64::INFINITY)),
                "nan" => RawOp::Const(Const::F64(f64::NAN)),
                _ => return Err(self.expected("an operand")),
            },
            Tok::LParen => {
                self.advance()?;
                if self.tok.tok != Tok::RParen {
                    return Err(self.expected("`)` of `()` (tuples are made by `call tuple`)"));
                }
                RawOp::Const(Const::Unit)
            }
            Tok::Global => RawOp::Const(Const::Func(self.func_const(text, at.pos)?)),
            _ => return Err(self.expected("an operand")),
        };
        self.advance()?;
        Ok(op)
    }

    /// The constant of number token `at`, negated when `negative`.
    fn number(&self, at: &Token, negative: bool) -> Result<Const, ParseError> {
        let text = self.lx.text(at);
        if at.tok == Tok::Int {
            int_value(text, negative).map(Const::I64).ok_or_else(|| {
                let sign = if negative { "-" } else { "" };
                self.err(
                    at.pos,
                    format!("integer literal {sign}{text} out of range for i64"),
                )
            })
        } else {
            float_value(text, negative)
                .map(Const::F64)
                .ok_or_else(|| self.err(at.pos, format!("invalid number `{text}`")))
        }
    }

    /// `@name` as a value: the module's function, else a primitive with one signature.
    fn func_const(&self, name: &str, pos: Pos) -> Result<FuncRef, ParseError> {
        if let Some(&id) = self.funcs.get(name) {
            return Ok(FuncRef::User(id));
        }
        match Prim::from_name(name) {
            Some(prim) if prim.fn_type().is_some() => Ok(FuncRef::Prim(prim)),
            Some(prim) => Err(self.err(pos, prim.value_error())),
            None => {
                let hint = self.suggest_func(name, true);
                Err(self.err(pos, format!("unknown function @{name}{hint}")))
            }
        }
    }

    /// `; did you mean `@g`?` for an unknown function name: the closest
    /// function of the module, or (`prims`: where a primitive may stand)
    /// primitive.
    fn suggest_func(&self, name: &str, prims: bool) -> String {
        let mut funcs: Vec<&str> = self.funcs.keys().copied().collect();
        funcs.sort_unstable();
        let prim_names = crate::prim::PRIMS
            .iter()
            .filter(|_| prims)
            .map(|row| row.name);
        crate::suggest::did_you_mean(name, "@", funcs.into_iter().chain(prim_names))
    }

    // ---- resolution ----

    fn resolve(&self, func: &mut Func, body: &Body<'a>) -> Result<(), ParseError> {
        for pending in &body.insts {
            let place = pending.place;
            let kind = match &pending.kind {
                RawKind::Prim(prim, args) => InstKind::Prim {
                    prim: *prim,
                    args: self.operands(args, body, place)?,
                },
                RawKind::Invoke(callee, args) => InstKind::Invoke {
                    func: *callee,
                    args: self.operands(args, body, place)?,
                },
                RawKind::CallValue(name, pos, args) => InstKind::CallValue {
                    callee: self.value(name, *pos, body, place)?,
                    args: self.operands(args, body, place)?,
                },
                RawKind::Phi(entries) => {
                    let mut out = SmallVec::with_capacity(entries.len());
                    for (label, op) in entries {
                        out.push((
                            self.block_ref(label, body, place)?,
                            self.operand(op, body, place)?,
                        ));
                    }
                    InstKind::Phi { entries: out }
                }
            };
            func.insts[pending.inst].kind = kind;
        }
        for pending in &body.terms {
            let place = pending.place;
            let term = match &pending.term {
                RawTerm::Goto(label) => Terminator::Goto(self.block_ref(label, body, place)?),
                RawTerm::GotoIfNot(cond, label) => Terminator::GotoIfNot {
                    cond: self.operand(cond, body, place)?,
                    target: self.block_ref(label, body, place)?,
                },
                RawTerm::Return(op) => Terminator::Return(self.operand(op, body, place)?),
                RawTerm::Switch(index, labels) => Terminator::Switch {
                    index: self.operand(index, body, place)?,
                    targets: labels
                        .iter()
                        .map(|label| self.block_ref(label, body, place))
                        .collect::<Result<_, _>>()?,
                },
            };
            func.blocks[pending.block].term = Some(term);
        }
        Ok(())
    }

    fn operands(
        &self,
        args: &[RawOp<'a>],
        body: &Body<'a>,
        place: Place,
    ) -> Result<Args, ParseError> {
        args.iter()
            .map(|op| self.operand(op, body, place))
            .collect()
    }

    fn operand(
        &self,
        op: &RawOp<'a>,
        body: &Body<'a>,
        place: Place,
    ) -> Result<Operand, ParseError> {
        match op {
            RawOp::Value(name, pos) => Ok(Operand::Value(self.value(name, *pos, body, place)?)),
            RawOp::Const(c) => Ok(Operand::Const(*c)),
        }
    }

    fn value(
        &self,
        name: &str,
        pos: Pos,
        body: &Body<'a>,
        place: Place,
    ) -> Result<Value, ParseError> {
        body.names.get(name).copied().ok_or_else(|| {
            let mut names: Vec<&str> = body.names.keys().copied().collect();
            names.sort_unstable();
            let hint = crate::suggest::did_you_mean(name, "%", names);
            self.err_at_place(place, pos, format!("undefined value %{name}{hint}"))
        })
    }

    fn block_ref(
        &self,
        label: &RawLabel,
        body: &Body<'a>,
        place: Place,
    ) -> Result<Block, ParseError> {
        body.labels.get(&label.label).copied().ok_or_else(|| {
            self.err_at_place(
                place,
                label.pos,
                format!("unknown block label #{}", label.label),
            )
        })
    }

    // ---- type inference ----

    /// Gives every unannotated result its type: a worklist over the statements
    /// whose operand types are known, each statement visited once per operand.
    fn infer(&self, module: &mut Module, id: FuncId, body: &Body<'a>) -> Result<(), ParseError> {
        let items: Vec<&PendingInst<'a>> = body.insts.iter().filter(|p| p.infer).collect();
        if items.is_empty() {
            return Ok(());
        }
        let mut known = vec![true; module[id].values.len()];
        for item in &items {
            if let Some(v) = module[id].insts[item.inst].result
                && let Some(slot) = known.get_mut(v.as_u32() as usize)
            {
                *slot = false;
            }
        }
        let is_known = |known: &[bool], op: &Operand| match op {
            Operand::Value(v) => known.get(v.as_u32() as usize).copied().unwrap_or(false),
            Operand::Const(_) => true,
        };
        let mut waiting: HashMap<Value, Vec<usize>> = HashMap::new();
        let mut remaining = vec![0usize; items.len()];
        let mut queue = Vec::new();
        for (k, item) in items.iter().enumerate() {
            let func = &module[id];
            let deps: Vec<Value> = match &func.insts[item.inst].kind {
                InstKind::Prim { args, .. } => unknown_values(args, &known),
                InstKind::Invoke { .. } => Vec::new(),
                InstKind::CallValue { callee, .. } => {
                    unknown_values(&[Operand::Value(*callee)], &known)
                }
                InstKind::Phi { entries } => {
                    if entries.iter().any(|(_, op)| is_known(&known, op)) {
                        Vec::new()
                    } else {
                        let ops: Vec<Operand> = entries.iter().map(|(_, op)| *op).collect();
                        unknown_values(&ops, &known)
                    }
                }
            };
            // A phi waits for any one entry; other statements for all their operands.
            let is_phi = matches!(func.insts[item.inst].kind, InstKind::Phi { .. });
            remaining[k] = if is_phi {
                deps.len().min(1)
            } else {
                deps.len()
            };
            if deps.is_empty() {
                queue.push(k);
            }
            for dep in deps {
                waiting.entry(dep).or_default().push(k);
            }
        }
        let mut done = vec![false; items.len()];
        while let Some(k) = queue.pop() {
            let item = items[k];
            let ty = self.infer_one(module, id, item, &known)?;
            let func = &mut module[id];
            let Some(v) = func.insts[item.inst].result else {
                continue;
            };
            func.values[v].ty = ty;
            if let Some(slot) = known.get_mut(v.as_u32() as usize) {
                *slot = true;
            }
            if let Some(slot) = done.get_mut(k) {
                *slot = true;
            }
            for w in waiting.remove(&v).unwrap_or_default() {
                if let Some(r) = remaining.get_mut(w)
                    && *r > 0
                {
                    *r -= 1;
                    if *r == 0 {
                        queue.push(w);
                    }
                }
            }
        }
        if let Some(k) = done.iter().position(|d| !d) {
            let item = items[k];
            let name = result_name(&module[id], item.inst);
            return Err(self.err_at_place(
                item.place,
                item.place.pos,
                format!("cannot infer the type of {name}; add an annotation `:: T`"),
            ));
        }
        Ok(())
    }

    fn infer_one(
        &self,
        module: &Module,
        id: FuncId,
        item: &PendingInst<'a>,
        known: &[bool],
    ) -> Result<Type, ParseError> {
        let func = &module[id];
        let op_type = |op: &Operand| -> Option<Type> {
            match op {
                Operand::Value(v) if !known.get(v.as_u32() as usize).copied().unwrap_or(false) => {
                    None
                }
                _ => func.operand_type(op, module),
            }
        };
        let fail = |why: String| {
            let name = result_name(func, item.inst);
            self.err_at_place(
                item.place,
                item.place.pos,
                format!("cannot infer the type of {name}: {why}"),
            )
        };
        match &func.insts[item.inst].kind {
            InstKind::Prim { prim, args } => {
                let types: Option<Vec<Type>> = args.iter().map(op_type).collect();
                let types = types.ok_or_else(|| fail("an operand has no type".into()))?;
                let field = match args.get(1) {
                    Some(Operand::Const(Const::I64(k))) => Some(*k),
                    _ => None,
                };
                prim.result_type(&types, field, None).map_err(fail)
            }
            InstKind::Invoke { func: callee, .. } => module
                .get(*callee)
                .map(|f| f.ret.clone())
                .ok_or_else(|| fail("unknown callee".into())),
            InstKind::CallValue { callee, .. } => match op_type(&Operand::Value(*callee)) {
                Some(Type::Func(sig)) => Ok(sig.ret.clone()),
                Some(ty) => Err(fail(format!(
                    "called value has type {ty}, not a function type"
                ))),
                None => Err(fail("the called value has no type".into())),
            },
            InstKind::Phi { entries } => entries
                .iter()
                .find_map(|(_, op)| op_type(op))
                .ok_or_else(|| fail("no entry has a known type".into())),
        }
    }
}

fn unknown_values(ops: &[Operand], known: &[bool]) -> Vec<Value> {
    ops.iter()
        .filter_map(|op| match op {
            Operand::Value(v) if !known.get(v.as_u32() as usize).copied().unwrap_or(true) => {
                Some(*v)
            }
            _ => None,
        })
        .collect()
}

fn result_name(func: &Func, inst: Inst) -> String {
    func.insts[inst]
        .result
        .and_then(|v| func.values[v].name.as_deref())
        .map_or_else(|| "the result".to_string(), |n| format!("%{n}"))
}

/// The i64 of decimal `digits`, negated when `negative`; `None` when out of range.
pub(crate) fn int_value(digits: &str, negative: bool) -> Option<i64> {
    let magnitude: u64 = digits.parse().ok()?;
    let value = if negative {
        -i128::from(magnitude)
    } else {
        i128::from(magnitude)
    };
    i64::try_from(value).ok()
}

/// The f64 of a lexed float literal, negated when `negative`.
pub(crate) fn float_value(text: &str, negative: bool) -> Option<f64> {
    let x: f64 = text.parse().ok()?;
    Some(if negative { -x } else { x })
}
