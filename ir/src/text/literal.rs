//! Run-time values written as IR literals: the `--args` text of SYNTAX.md §3
//! (`1.5, [1.0, 2.0], (1.0, 2), true, (), @g`), single expected results, and
//! the `--known` text of partial evaluation (`_, 3, _[4]`: [`parse_known`]).
//!
//! Every literal is read against the type it must have, so `[]` takes the
//! expected element type and `@sin` is checked against a function type.
//! Assumes nothing about the text. Guarantees: never panics, recurses at most
//! [`MAX_NESTING`] levels, and every error names the line:column within the
//! text and says what was expected and what was found.

use super::ParseError;
use super::lexer::{Lexer, Tok, Token};
use super::parser::{float_value, int_value};
use crate::MAX_NESTING;
use crate::func::{FuncRef, Module};
use crate::interp::value::{ArrayData, ArrayRef, Val};
use crate::loc::{Location, Pos};
use crate::prim::Prim;
use crate::types::{Lanes, Scalar, Type};

/// Reads comma-separated argument values typed against `params`.
///
/// An integer literal is accepted where an f64 is expected when the f64 holds it
/// exactly (`3` for `3.0`; `9007199254740993` is an error). `@name` is the
/// module's function, else a primitive with one signature, and its function type
/// must be the one expected. Errors: wrong number of values, a value of the
/// wrong type, malformed or too deeply nested literals.
pub fn parse_args(src: &str, params: &[Type], m: &Module) -> Result<Vec<Val>, ParseError> {
    let mut reader = Reader::new(src, m)?;
    let mut vals = Vec::with_capacity(params.len());
    if reader.tok.tok == Tok::Eof {
        if params.is_empty() {
            return Ok(vals);
        }
        return Err(reader.expected(&count_text(params.len()), "no value"));
    }
    loop {
        let Some(ty) = params.get(vals.len()) else {
            return Err(reader.err(
                reader.tok.pos,
                format!("expected {}, found more", count_text(params.len())),
            ));
        };
        vals.push(reader.value(ty, 1)?);
        match reader.tok.tok {
            Tok::Comma => {
                reader.advance()?;
            }
            Tok::Eof => break,
            _ => return Err(reader.expected_found("`,` or the end of the arguments")),
        }
    }
    if vals.len() < params.len() {
        return Err(reader.err(
            reader.tok.pos,
            format!(
                "expected {}, found {}",
                count_text(params.len()),
                vals.len()
            ),
        ));
    }
    Ok(vals)
}

/// Reads one literal of type `ty` (the whole text).
pub fn parse_value(src: &str, ty: &Type, m: &Module) -> Result<Val, ParseError> {
    let mut reader = Reader::new(src, m)?;
    let val = reader.value(ty, 1)?;
    if reader.tok.tok != Tok::Eof {
        return Err(reader.expected_found("the end of the value"));
    }
    Ok(val)
}

/// What is known of one parameter at compile time, as `--known` text says it
/// (`irad dump --known`, `run --known`). Partial evaluation takes this type
/// itself: `irad_passes::pe::Known` (and `irad::Known`) re-export it.
#[derive(Clone, Debug)]
pub enum KnownArg {
    /// `_`: nothing is known; the parameter stays a parameter.
    Unknown,
    /// A literal: its value, an f64, i64, bool, `()`, function value, or a
    /// tuple of those (arrays and duals cannot be known values).
    Value(Val),
    /// `_[N]`: for an array parameter, its length.
    Length(u64),
}

/// Reads `--known` text typed against `params`: comma-separated entries, one
/// per parameter, each `_` (unknown), `_[N]` (an array parameter of length N)
/// or a literal in the `--args` syntax (a known value; arrays cannot be known
/// values). Errors name the line and column in the text.
pub fn parse_known(src: &str, params: &[Type], m: &Module) -> Result<Vec<KnownArg>, ParseError> {
    let fail = |pos: Pos, msg: String| ParseError {
        loc: Location::at(pos),
        msg,
    };
    check_brackets(src)?;
    let pieces = split_top_level(src);
    let pieces: Vec<(usize, &str)> = if pieces.len() == 1 && pieces[0].1.trim().is_empty() {
        Vec::new()
    } else {
        pieces
    };
    if pieces.len() != params.len() {
        return Err(fail(
            pos_at(src, src.len()),
            format!(
                "expected {} known argument{} (`_` for an unknown one), found {}",
                params.len(),
                if params.len() == 1 { "" } else { "s" },
                pieces.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(params.len());
    for ((start, piece), ty) in pieces.into_iter().zip(params) {
        let lead = piece.len() - piece.trim_start().len();
        let piece = piece.trim();
        let at = pos_at(src, start + lead);
        if piece == "_" {
            out.push(KnownArg::Unknown);
            continue;
        }
        if let Some(inner) = piece.strip_prefix("_[").and_then(|r| r.strip_suffix(']')) {
            if !matches!(ty, Type::Array(_)) {
                return Err(fail(
                    at,
                    format!("`_[N]` is for arrays, but the argument is {ty}"),
                ));
            }
            let n = inner.trim().parse::<u64>().map_err(|_| {
                fail(
                    at,
                    format!(
                        "expected a length `_[N]` with N a non-negative integer, found `{piece}`"
                    ),
                )
            })?;
            out.push(KnownArg::Length(n));
            continue;
        }
        if matches!(ty, Type::Array(_)) {
            return Err(fail(
                at,
                format!("an array argument is `_` or `_[N]` (a known length), found `{piece}`"),
            ));
        }
        let val = parse_value(piece, ty, m).map_err(|mut err| {
            if let Some(p) = err.loc.pos {
                err.loc.pos = Some(if p.line == 1 {
                    Pos::new(at.line, at.col.saturating_add(p.col - 1))
                } else {
                    Pos::new(at.line.saturating_add(p.line - 1), p.col)
                });
            }
            err
        })?;
        out.push(KnownArg::Value(val));
    }
    Ok(out)
}

/// Checks that the brackets of `text` pair up, so that a missing `]` or `)`
/// is reported where it is missing, not as a wrong count of pieces.
fn check_brackets(text: &str) -> Result<(), ParseError> {
    let fail = |offset: usize, msg: String| ParseError {
        loc: Location::at(pos_at(text, offset)),
        msg,
    };
    let place = |offset: usize| {
        let p = pos_at(text, offset);
        if p.line == 1 {
            format!("column {}", p.col)
        } else {
            format!("line {}, column {}", p.line, p.col)
        }
    };
    let mut open: Vec<(usize, char)> = Vec::new();
    for (i, c) in text.char_indices() {
        let want = match c {
            '(' | '[' => {
                open.push((i, c));
                continue;
            }
            ')' => '(',
            ']' => '[',
            _ => continue,
        };
        match open.pop() {
            Some((_, o)) if o == want => {}
            Some((at, o)) => {
                let close = if o == '(' { ')' } else { ']' };
                return Err(fail(
                    i,
                    format!(
                        "expected `{close}` to close the `{o}` at {}, found `{c}`",
                        place(at)
                    ),
                ));
            }
            None => return Err(fail(i, format!("unmatched `{c}`"))),
        }
    }
    match open.pop() {
        Some((at, o)) => {
            let close = if o == '(' { ')' } else { ']' };
            Err(fail(
                text.len(),
                format!(
                    "expected `{close}` to close the `{o}` at {}, found the end of the text",
                    place(at)
                ),
            ))
        }
        None => Ok(()),
    }
}

/// Splits `text` at commas outside brackets: (byte offset, piece) pairs.
fn split_top_level(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push((start, &text[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push((start, &text[start..]));
    out
}

/// The 1-based line and column (in characters) of byte `offset` of `text`.
fn pos_at(text: &str, offset: usize) -> Pos {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    let to_u32 = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    Pos::new(to_u32(line), to_u32(col))
}

fn count_text(n: usize) -> String {
    format!("{n} argument{}", if n == 1 { "" } else { "s" })
}

struct Reader<'a> {
    lx: Lexer<'a>,
    tok: Token,
    m: &'a Module,
}

impl<'a> Reader<'a> {
    fn new(src: &'a str, m: &'a Module) -> Result<Reader<'a>, ParseError> {
        let mut lx = Lexer::new(src);
        let tok = lx.next_token()?;
        Ok(Reader { lx, tok, m })
    }

    fn advance(&mut self) -> Result<Token, ParseError> {
        let tok = self.tok;
        self.tok = self.lx.next_token()?;
        Ok(tok)
    }

    fn err(&self, pos: Pos, msg: String) -> ParseError {
        ParseError::at(pos, msg)
    }

    fn expected(&self, what: &str, found: &str) -> ParseError {
        self.err(self.tok.pos, format!("expected {what}, found {found}"))
    }

    fn expected_found(&self, what: &str) -> ParseError {
        self.expected(what, &self.lx.describe(&self.tok))
    }

    fn text(&self) -> &'a str {
        self.lx.text(&self.tok)
    }

    fn value(&mut self, ty: &Type, depth: usize) -> Result<Val, ParseError> {
        if depth > MAX_NESTING {
            return Err(self.err(
                self.tok.pos,
                format!("value nested deeper than {MAX_NESTING} levels"),
            ));
        }
        match ty {
            Type::F64 => self.f64_value().map(Val::F64),
            Type::I64 => self.i64_value().map(Val::I64),
            Type::Bool => self.bool_value().map(Val::Bool),
            Type::Unit => {
                if self.tok.tok != Tok::LParen {
                    return Err(self.expected_found("()"));
                }
                self.advance()?;
                if self.tok.tok != Tok::RParen {
                    return Err(self.expected_found("`)` of ()"));
                }
                self.advance()?;
                Ok(Val::Unit)
            }
            Type::Tuple(elems) => self.tuple_value(ty, elems, depth),
            Type::Array(elem) => self.array_value(ty, *elem),
            Type::Func(_) => self.func_value(ty),
            Type::Dual(_, Lanes::Sparse) | Type::Sparse => Err(self.err(
                self.tok.pos,
                format!("{ty} has no literals: sparse tangents exist only inside a run"),
            )),
            Type::Dual(inner, Lanes::Dense(n)) => self.dual_value(ty, inner, n.get(), depth),
        }
    }

    /// An optional `-` and a number token: (token, negative).
    fn signed_number(&mut self, what: &str) -> Result<(Token, bool), ParseError> {
        let negative = self.tok.tok == Tok::Minus;
        if negative {
            self.advance()?;
        }
        match self.tok.tok {
            Tok::Int | Tok::Float => Ok((self.advance()?, negative)),
            Tok::Ident if self.text() == "inf" => Ok((self.advance()?, negative)),
            Tok::Ident if self.text() == "nan" && !negative => Ok((self.advance()?, negative)),
            _ => Err(self.expected_found(what)),
        }
    }

    fn f64_value(&mut self) -> Result<f64, ParseError> {
        let start = self.tok.pos;
        let (num, negative) = self.signed_number("f64")?;
        let text = self.lx.text(&num);
        let value = match (num.tok, text) {
            (Tok::Ident, "inf") => Some(if negative {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }),
            (Tok::Ident, _) => Some(f64::NAN),
            (Tok::Float, _) => float_value(text, negative),
            _ => {
                // An integer stands for the f64 that holds it exactly.
                let exact = int_value(text, negative).and_then(|i| {
                    let x = i as f64;
                    (x as i128 == i128::from(i)).then_some(x)
                });
                return exact.ok_or_else(|| {
                    let sign = if negative { "-" } else { "" };
                    self.err(
                        start,
                        format!("expected f64, found {sign}{text}, which f64 cannot hold exactly"),
                    )
                });
            }
        };
        value.ok_or_else(|| self.err(start, format!("invalid number `{text}`")))
    }

    fn i64_value(&mut self) -> Result<i64, ParseError> {
        let start = self.tok.pos;
        let (num, negative) = self.signed_number("i64")?;
        let text = self.lx.text(&num);
        let sign = if negative { "-" } else { "" };
        if num.tok != Tok::Int {
            return Err(self.err(start, format!("expected i64, found `{sign}{text}`")));
        }
        int_value(text, negative).ok_or_else(|| {
            self.err(
                start,
                format!("integer literal {sign}{text} out of range for i64"),
            )
        })
    }

    fn bool_value(&mut self) -> Result<bool, ParseError> {
        let value = match (self.tok.tok, self.text()) {
            (Tok::Ident, "true") => true,
            (Tok::Ident, "false") => false,
            _ => return Err(self.expected_found("bool")),
        };
        self.advance()?;
        Ok(value)
    }

    fn tuple_value(&mut self, ty: &Type, elems: &[Type], depth: usize) -> Result<Val, ParseError> {
        if self.tok.tok != Tok::LParen {
            return Err(self.expected_found(&format!("a tuple of type {ty}")));
        }
        self.advance()?;
        let mut vals = Vec::with_capacity(elems.len());
        for (i, elem) in elems.iter().enumerate() {
            vals.push(self.value(elem, depth + 1)?);
            let last = i + 1 == elems.len();
            match self.tok.tok {
                Tok::Comma => {
                    self.advance()?;
                }
                Tok::RParen if last => {}
                _ if last => return Err(self.expected_found("`)`")),
                _ => return Err(self.expected_found(&format!("`,` (a tuple of type {ty})"))),
            }
        }
        if self.tok.tok != Tok::RParen {
            return Err(self.expected_found(&format!("`)` (a tuple of {} elements)", elems.len())));
        }
        self.advance()?;
        Ok(Val::Tuple(vals.into()))
    }

    /// `dual(p, t1, ..., tN)`: the primal, then `width` tangents.
    fn dual_value(
        &mut self,
        ty: &Type,
        inner: &Type,
        width: u32,
        depth: usize,
    ) -> Result<Val, ParseError> {
        if !(self.tok.tok == Tok::Ident && self.text() == "dual") {
            return Err(self.expected_found(&format!("`dual(...)`, a value of type {ty}")));
        }
        self.advance()?;
        if self.tok.tok != Tok::LParen {
            return Err(self.expected_found("`(` after `dual`"));
        }
        self.advance()?;
        let Some(tan) = inner.tangent() else {
            return Err(self.err(self.tok.pos, format!("{ty} has no tangent type")));
        };
        let mut vals = Vec::with_capacity(width as usize + 1);
        vals.push(self.value(inner, depth + 1)?);
        for _ in 0..width {
            if self.tok.tok != Tok::Comma {
                return Err(self.expected_found(&format!(
                    "`,` and a tangent ({ty} has {width} tangent{})",
                    if width == 1 { "" } else { "s" }
                )));
            }
            self.advance()?;
            vals.push(self.value(&tan, depth + 1)?);
        }
        if self.tok.tok != Tok::RParen {
            return Err(self.expected_found(&format!(
                "`)` ({ty} has {width} tangent{})",
                if width == 1 { "" } else { "s" }
            )));
        }
        self.advance()?;
        Ok(Val::Dual(vals.into()))
    }

    fn array_value(&mut self, ty: &Type, elem: Scalar) -> Result<Val, ParseError> {
        if elem == Scalar::Sparse {
            return Err(self.err(
                self.tok.pos,
                format!("{ty} has no literals: sparse tangents exist only inside a run"),
            ));
        }
        if self.tok.tok != Tok::LBracket {
            return Err(self.expected_found(&format!("an array of type {ty}")));
        }
        self.advance()?;
        let mut data = ArrayData::zeroed(elem, 0);
        while self.tok.tok != Tok::RBracket {
            match &mut data {
                ArrayData::F64(v) => v.push(self.f64_value()?),
                ArrayData::I64(v) => v.push(self.i64_value()?),
                ArrayData::Bool(v) => v.push(self.bool_value()?),
                ArrayData::Sparse(_) => return Err(self.expected_found("`]`")),
            }
            match self.tok.tok {
                Tok::Comma => {
                    self.advance()?;
                }
                Tok::RBracket => {}
                _ => return Err(self.expected_found("`,` or `]`")),
            }
        }
        self.advance()?;
        Ok(Val::Array(ArrayRef::new(data)))
    }

    fn func_value(&mut self, ty: &Type) -> Result<Val, ParseError> {
        if self.tok.tok != Tok::Global {
            return Err(self.expected_found(&format!("a function `@name` of type {ty}")));
        }
        let name = self.text();
        let at = self.tok.pos;
        let (fref, found) = if let Some(id) = self.m.by_name(name) {
            (FuncRef::User(id), Type::from_fn(self.m[id].fn_type()))
        } else {
            match Prim::from_name(name).map(|p| (p, p.fn_type())) {
                Some((p, Some(t))) => (FuncRef::Prim(p), t),
                Some((p, None)) => return Err(self.err(at, p.value_error())),
                None => {
                    let mut names: Vec<&str> = self
                        .m
                        .func_ids()
                        .map(|id| self.m[id].name.as_str())
                        .collect();
                    names.sort_unstable();
                    let prims = crate::prim::PRIMS.iter().map(|row| row.name);
                    let hint =
                        crate::suggest::did_you_mean(name, "@", names.into_iter().chain(prims));
                    return Err(self.err(at, format!("unknown function @{name}{hint}")));
                }
            }
        };
        if &found != ty {
            return Err(self.err(at, format!("expected {ty}, found @{name} of type {found}")));
        }
        self.advance()?;
        Ok(Val::Func(fref))
    }
}
