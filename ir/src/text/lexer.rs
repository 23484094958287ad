//! The lexer of the IR text format (SYNTAX.md §1) and of `--args` literals.
//!
//! Assumes nothing about its input: any `&str` is lexed, byte by byte, without
//! allocating per token. Guarantees: tokens carry byte offsets into the source
//! (always on character boundaries, since every token starts and ends at an
//! ASCII byte) and the 1-based line and column (in characters) of their first
//! character; comments (`#` not followed by a digit, to the end of the line) and
//! whitespace are skipped; an unexpected character is a located error. The lexer
//! never panics and takes time linear in the input.

use super::ParseError;
use crate::cursor::Cursor;
use crate::loc::Pos;

/// The kind of a token.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) enum Tok {
    /// `[A-Za-z_][A-Za-z0-9_.]*`, including keywords.
    Ident,
    /// `%name`; the token text is the name without `%`.
    Value,
    /// `@name`; the token text is the name without `@`.
    Global,
    /// `#123`; the token text is the digits.
    Label,
    /// Decimal digits.
    Int,
    /// A number with a `.` or an exponent.
    Float,
    Minus,
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Colon,
    ColonColon,
    Equals,
    FatArrow,
    Arrow,
    Less,
    Greater,
    Eof,
}

/// A token: its kind, its text as a byte range, its position.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Token {
    pub tok: Tok,
    pub start: usize,
    pub end: usize,
    pub pos: Pos,
}

/// A cursor over the source; cloning it saves a position to come back to.
#[derive(Clone)]
pub(crate) struct Lexer<'a> {
    cur: Cursor<'a>,
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident_continue(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.'
}

impl<'a> Lexer<'a> {
    /// A lexer at the start of `src`.
    pub fn new(src: &'a str) -> Lexer<'a> {
        Lexer {
            cur: Cursor::new(src),
        }
    }

    /// Skips the character at the current position, after a lexical error, so
    /// that a scan for function headers can go on. False at the end of the text.
    pub(crate) fn skip_char(&mut self) -> bool {
        self.cur.skip_char()
    }

    /// The text of `token` (without its sigil).
    pub fn text(&self, token: &Token) -> &'a str {
        self.cur.src.get(token.start..token.end).unwrap_or("")
    }

    /// How a token is shown in messages: `` `%x` ``, `` `#3` ``, `end of file`.
    pub fn describe(&self, token: &Token) -> String {
        let text = self.text(token);
        match token.tok {
            Tok::Eof => "end of file".to_string(),
            Tok::Value => format!("`%{text}`"),
            Tok::Global => format!("`@{text}`"),
            Tok::Label => format!("`#{text}`"),
            _ => format!("`{text}`"),
        }
    }

    fn skip_trivia(&mut self) {
        while let Some(b) = self.cur.peek_byte(0) {
            match b {
                b' ' | b'\t' | b'\r' | b'\n' => self.cur.bump(),
                b'#' if !self.cur.peek_byte(1).is_some_and(|c| c.is_ascii_digit()) => {
                    self.cur.bump_while(|c| c != b'\n');
                }
                _ => break,
            }
        }
    }

    /// The next token, or a located error for a character that starts none.
    pub fn next_token(&mut self) -> Result<Token, ParseError> {
        self.skip_trivia();
        let pos = self.cur.pos();
        let start = self.cur.i;
        let Some(b) = self.cur.peek_byte(0) else {
            return Ok(Token {
                tok: Tok::Eof,
                start,
                end: start,
                pos,
            });
        };
        let simple = |lx: &mut Lexer<'a>, tok: Tok, len: usize| {
            for _ in 0..len {
                lx.cur.bump();
            }
            Ok(Token {
                tok,
                start,
                end: lx.cur.i,
                pos,
            })
        };
        match b {
            b'(' => simple(self, Tok::LParen, 1),
            b')' => simple(self, Tok::RParen, 1),
            b'[' => simple(self, Tok::LBracket, 1),
            b']' => simple(self, Tok::RBracket, 1),
            b'{' => simple(self, Tok::LBrace, 1),
            b'}' => simple(self, Tok::RBrace, 1),
            b',' => simple(self, Tok::Comma, 1),
            b'<' => simple(self, Tok::Less, 1),
            b'>' => simple(self, Tok::Greater, 1),
            b':' if self.cur.peek_byte(1) == Some(b':') => simple(self, Tok::ColonColon, 2),
            b':' => simple(self, Tok::Colon, 1),
            b'=' if self.cur.peek_byte(1) == Some(b'>') => simple(self, Tok::FatArrow, 2),
            b'=' => simple(self, Tok::Equals, 1),
            b'-' if self.cur.peek_byte(1) == Some(b'>') => simple(self, Tok::Arrow, 2),
            b'-' => simple(self, Tok::Minus, 1),
            b'%' | b'@' => self.sigil_name(b, pos),
            b'#' => {
                self.cur.bump();
                let name_start = self.cur.i;
                self.cur.bump_while(|c| c.is_ascii_digit());
                self.check_end_of_word(name_start - 1, pos, "label")?;
                Ok(Token {
                    tok: Tok::Label,
                    start: name_start,
                    end: self.cur.i,
                    pos,
                })
            }
            b'0'..=b'9' => self.number(pos),
            _ if is_ident_start(b) => {
                self.cur.bump_while(is_ident_continue);
                Ok(Token {
                    tok: Tok::Ident,
                    start,
                    end: self.cur.i,
                    pos,
                })
            }
            _ => Err(self.unexpected_char(pos)),
        }
    }

    fn sigil_name(&mut self, sigil: u8, pos: Pos) -> Result<Token, ParseError> {
        self.cur.bump();
        let name_start = self.cur.i;
        let tok = if sigil == b'%' {
            Tok::Value
        } else {
            Tok::Global
        };
        match self.cur.peek_byte(0) {
            Some(c) if is_ident_start(c) => self.cur.bump_while(is_ident_continue),
            Some(c) if sigil == b'%' && c.is_ascii_digit() => {
                self.cur.bump_while(|c| c.is_ascii_digit());
                self.check_end_of_word(name_start - 1, pos, "value name")?;
            }
            _ => {
                let what = if sigil == b'%' {
                    "a value name after `%`"
                } else {
                    "a function name after `@`"
                };
                let found = self.found_here();
                return Err(ParseError::at(
                    self.cur.pos(),
                    format!("expected {what}, found {found}"),
                ));
            }
        }
        Ok(Token {
            tok,
            start: name_start,
            end: self.cur.i,
            pos,
        })
    }

    fn number(&mut self, pos: Pos) -> Result<Token, ParseError> {
        let start = self.cur.i;
        let mut tok = Tok::Int;
        self.cur.bump_while(|c| c.is_ascii_digit());
        if self.cur.peek_byte(0) == Some(b'.')
            && self.cur.peek_byte(1).is_some_and(|c| c.is_ascii_digit())
        {
            tok = Tok::Float;
            self.cur.bump();
            self.cur.bump_while(|c| c.is_ascii_digit());
        }
        if self.cur.bump_exponent() {
            tok = Tok::Float;
        }
        self.check_end_of_word(start, pos, "number")?;
        Ok(Token {
            tok,
            start,
            end: self.cur.i,
            pos,
        })
    }

    /// A number or label must not run into letters or dots (`1x`, `1.`, `#2a`,
    /// `1.5e+`): the whole malformed word, from byte `start` at `pos`, is reported.
    fn check_end_of_word(&self, start: usize, pos: Pos, what: &str) -> Result<(), ParseError> {
        let exponent_sign = |i: usize| {
            matches!(self.cur.bytes.get(i), Some(b'+' | b'-'))
                && i > 0
                && matches!(self.cur.bytes.get(i - 1), Some(b'e' | b'E'))
        };
        let runs_on = |i: usize| {
            self.cur.bytes.get(i).is_some_and(|&c| is_ident_continue(c)) || exponent_sign(i)
        };
        if !runs_on(self.cur.i) {
            return Ok(());
        }
        let mut end = self.cur.i;
        while runs_on(end) {
            end += 1;
        }
        let text = self.cur.src.get(start..end).unwrap_or("");
        Err(ParseError {
            loc: crate::loc::Location::at(pos),
            msg: format!("invalid {what} `{text}`"),
        })
    }

    fn found_here(&self) -> String {
        match self
            .cur
            .src
            .get(self.cur.i..)
            .and_then(|s| s.chars().next())
        {
            None => "end of file".to_string(),
            Some('\u{feff}') => {
                "U+FEFF, a byte-order mark (allowed only at the start of a file)".to_string()
            }
            Some(c) if c.is_whitespace() || c.is_control() => format!("{c:?}"),
            Some(c) => format!("`{c}`"),
        }
    }

    fn unexpected_char(&self, pos: Pos) -> ParseError {
        ParseError::at(pos, format!("unexpected character {}", self.found_here()))
    }
}
