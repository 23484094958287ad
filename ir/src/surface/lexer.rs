//! The lexer of the surface language (SYNTAX.md §2): source text to tokens.
//!
//! Assumes nothing about its input: any `&str` is lexed byte by byte. Whitespace
//! (spaces, tabs, CR, LF) and `//` comments are skipped. Numbers are lexed as
//! in the IR (SYNTAX.md §1): decimal digits are an integer, digits with a `.`
//! and digits or an exponent are a float; a number running into letters,
//! a dangling `.` or exponent is an error (`invalid number `1.5e+``). Right
//! after a `.` token only digits are taken, so `t.0.1` is `t . 0 . 1`, as in
//! Rust. Keywords are identifiers; the parser tells them apart.
//!
//! Guarantees: tokens carry byte ranges on character boundaries (every token
//! starts and ends at an ASCII byte) and the 1-based line and column (in
//! characters) of their first character; they are made one at a time, on
//! demand ([`Tokens`]), and end with one `Eof` token, or with an `Error`
//! token at the first character that starts no token, whose error is kept
//! beside it, so the parser reports it only if no earlier error comes
//! first. Never panics; time linear in the input.

use super::SurfaceError;
use crate::cursor::Cursor;
use crate::loc::{Location, Pos};

/// The kind of a token.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub(crate) enum Tok {
    /// `[A-Za-z_][A-Za-z0-9_]*`, including keywords.
    Ident,
    /// Decimal digits.
    Int,
    /// A number with a `.` or an exponent.
    Float,
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Comma,
    Colon,
    Semi,
    Dot,
    DotDot,
    Arrow,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Bang,
    Assign,
    EqEq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    AndAnd,
    OrOr,
    /// The end of the text.
    Eof,
    /// Where lexing failed; the error is kept beside the tokens.
    Error,
}

/// A token: its kind, its text as a byte range, its position.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Token {
    pub tok: Tok,
    pub start: usize,
    pub end: usize,
    pub pos: Pos,
}

/// The tokens of a text, made one at a time as the parser asks for them (a
/// list of all of them would hold 32 bytes per token of a large file at once).
/// After the last token, `Eof` or `Error`, [`next`](Self::next) gives that
/// token again.
pub(crate) struct Tokens<'a> {
    lx: Lexer<'a>,
    /// Whether the last token was `.` (a number after it is a field number).
    after_dot: bool,
    /// The final token once it is made.
    last: Option<Token>,
    /// The lexical error at the `Error` token, once it is reached.
    pub error: Option<SurfaceError>,
}

impl<'a> Tokens<'a> {
    /// The tokens of `src`.
    pub(crate) fn new(src: &'a str) -> Tokens<'a> {
        Tokens {
            lx: Lexer {
                cur: Cursor::new(src),
            },
            after_dot: false,
            last: None,
            error: None,
        }
    }

    /// The next token; the final `Eof` or `Error` token again and again at
    /// the end.
    pub(crate) fn next(&mut self) -> Token {
        if let Some(t) = self.last {
            return t;
        }
        match self.lx.next_token(self.after_dot) {
            Ok(t) => {
                if t.tok == Tok::Eof {
                    self.last = Some(t);
                }
                self.after_dot = t.tok == Tok::Dot;
                t
            }
            Err(err) => {
                let (pos, e) = *err;
                let t = Token {
                    tok: Tok::Error,
                    start: self.lx.cur.i,
                    end: self.lx.cur.i,
                    pos,
                };
                self.last = Some(t);
                self.error = Some(e);
                t
            }
        }
    }
}

/// A lexical error and where it is, boxed: the result of lexing a token
/// stays small, and errors are rare.
type LexError = Box<(Pos, SurfaceError)>;

struct Lexer<'a> {
    cur: Cursor<'a>,
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident_continue(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl<'a> Lexer<'a> {
    fn skip_trivia(&mut self) {
        while let Some(b) = self.cur.peek_byte(0) {
            match b {
                b' ' | b'\t' | b'\r' => self.cur.bump_ascii(),
                b'\n' => self.cur.bump(),
                b'/' if self.cur.peek_byte(1) == Some(b'/') => self.cur.bump_while(|c| c != b'\n'),
                _ => break,
            }
        }
    }

    fn next_token(&mut self, after_dot: bool) -> Result<Token, LexError> {
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
        let two = |c: u8| self.cur.peek_byte(1) == Some(c);
        let (tok, len) = match b {
            b'(' => (Tok::LParen, 1),
            b')' => (Tok::RParen, 1),
            b'[' => (Tok::LBracket, 1),
            b']' => (Tok::RBracket, 1),
            b'{' => (Tok::LBrace, 1),
            b'}' => (Tok::RBrace, 1),
            b',' => (Tok::Comma, 1),
            b':' => (Tok::Colon, 1),
            b';' => (Tok::Semi, 1),
            b'.' if two(b'.') => (Tok::DotDot, 2),
            b'.' => (Tok::Dot, 1),
            b'-' if two(b'>') => (Tok::Arrow, 2),
            b'+' => (Tok::Plus, 1),
            b'-' => (Tok::Minus, 1),
            b'*' => (Tok::Star, 1),
            b'/' => (Tok::Slash, 1),
            b'%' => (Tok::Percent, 1),
            b'!' if two(b'=') => (Tok::Ne, 2),
            b'!' => (Tok::Bang, 1),
            b'=' if two(b'=') => (Tok::EqEq, 2),
            b'=' => (Tok::Assign, 1),
            b'<' if two(b'=') => (Tok::Le, 2),
            b'<' => (Tok::Lt, 1),
            b'>' if two(b'=') => (Tok::Ge, 2),
            b'>' => (Tok::Gt, 1),
            b'&' if two(b'&') => (Tok::AndAnd, 2),
            b'|' if two(b'|') => (Tok::OrOr, 2),
            b'0'..=b'9' => return self.number(pos, after_dot),
            _ if is_ident_start(b) => {
                while self.cur.peek_byte(0).is_some_and(is_ident_continue) {
                    self.cur.bump_ascii();
                }
                return Ok(Token {
                    tok: Tok::Ident,
                    start,
                    end: self.cur.i,
                    pos,
                });
            }
            _ => return Err(Box::new((pos, self.unexpected_char(pos)))),
        };
        for _ in 0..len {
            self.cur.bump_ascii();
        }
        Ok(Token {
            tok,
            start,
            end: self.cur.i,
            pos,
        })
    }

    /// A number; right after a `.` token only its digits (a field number).
    fn number(&mut self, pos: Pos, after_dot: bool) -> Result<Token, LexError> {
        let start = self.cur.i;
        let mut tok = Tok::Int;
        self.cur.bump_while(|c| c.is_ascii_digit());
        if !after_dot {
            if self.cur.peek_byte(0) == Some(b'.') {
                match self.cur.peek_byte(1) {
                    Some(c) if c.is_ascii_digit() => {
                        tok = Tok::Float;
                        self.cur.bump();
                        self.cur.bump_while(|c| c.is_ascii_digit());
                    }
                    // `0..n` is a range; `1.x` a field access (rejected later).
                    Some(c) if c == b'.' || is_ident_start(c) => {}
                    // `1.` alone is not a literal of the IR.
                    _ => {
                        self.cur.bump();
                        return Err(Box::new((pos, self.invalid_number(start, pos))));
                    }
                }
            }
            if self.cur.bump_exponent() {
                tok = Tok::Float;
            }
        }
        if self.runs_on(self.cur.i) {
            return Err(Box::new((pos, self.invalid_number(start, pos))));
        }
        Ok(Token {
            tok,
            start,
            end: self.cur.i,
            pos,
        })
    }

    /// Whether the character at byte `i` would continue a malformed number:
    /// a letter, digit or `_`, or a sign after an `e`.
    fn runs_on(&self, i: usize) -> bool {
        let exponent_sign = matches!(self.cur.bytes.get(i), Some(b'+' | b'-'))
            && i > 0
            && matches!(self.cur.bytes.get(i - 1), Some(b'e' | b'E'));
        self.cur.bytes.get(i).is_some_and(|&c| is_ident_continue(c)) || exponent_sign
    }

    /// `invalid number `TEXT``, the text running from `start` over every
    /// character that could continue it.
    fn invalid_number(&self, start: usize, pos: Pos) -> SurfaceError {
        let mut end = self.cur.i;
        while self.runs_on(end) {
            end += 1;
        }
        let text = self.cur.src.get(start..end).unwrap_or("");
        SurfaceError {
            loc: Location::at(pos),
            msg: format!("invalid number `{text}`"),
        }
    }

    fn unexpected_char(&self, pos: Pos) -> SurfaceError {
        let found = match self
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
        };
        SurfaceError {
            loc: Location::at(pos),
            msg: format!("unexpected character {found}"),
        }
    }
}
