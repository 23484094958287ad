//! A byte cursor over source text, shared by the lexers of the IR text format
//! and of the surface language. It tracks the 1-based line and the column in
//! characters (UTF-8 continuation bytes do not start a character), so every
//! position it reports is one a person can find in an editor. It never panics:
//! reads past the end are `None`.

use crate::loc::Pos;

/// A position in a source text; cloning it saves a place to come back to.
#[derive(Clone)]
pub(crate) struct Cursor<'a> {
    /// The whole text.
    pub src: &'a str,
    /// The same text as bytes.
    pub bytes: &'a [u8],
    /// The byte offset of the next byte.
    pub i: usize,
    /// The line of the next byte, from 1.
    pub line: u32,
    /// The column of the next byte, in characters, from 1.
    pub col: u32,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `src`.
    pub fn new(src: &'a str) -> Cursor<'a> {
        Cursor {
            src,
            bytes: src.as_bytes(),
            i: 0,
            line: 1,
            col: 1,
        }
    }

    /// The byte `k` places ahead, if any.
    pub fn peek_byte(&self, k: usize) -> Option<u8> {
        self.bytes.get(self.i + k).copied()
    }

    /// Moves past one byte, keeping line and column.
    pub fn bump(&mut self) {
        if let Some(&b) = self.bytes.get(self.i) {
            self.i += 1;
            if b == b'\n' {
                self.line = self.line.saturating_add(1);
                self.col = 1;
            } else if b & 0xC0 != 0x80 {
                // Continuation bytes of a UTF-8 sequence do not start a character.
                self.col = self.col.saturating_add(1);
            }
        }
    }

    /// Moves past one byte that the caller knows is ASCII and not `\n` (a
    /// space, a letter, a digit, an operator): what [`bump`](Self::bump)
    /// does for such a byte, without looking at it.
    pub fn bump_ascii(&mut self) {
        debug_assert!(
            self.peek_byte(0)
                .is_some_and(|b| b.is_ascii() && b != b'\n')
        );
        if self.i < self.bytes.len() {
            self.i += 1;
            self.col = self.col.saturating_add(1);
        }
    }

    /// Moves past bytes while `pred` holds.
    pub fn bump_while(&mut self, pred: impl Fn(u8) -> bool) {
        while let Some(b) = self.peek_byte(0) {
            if !pred(b) {
                break;
            }
            self.bump();
        }
    }

    /// Moves past the exponent of a number (`e5`, `E-3`, `e+7`) if one
    /// follows, digits included; whether it did. `e` without digits is left.
    pub fn bump_exponent(&mut self) -> bool {
        if !matches!(self.peek_byte(0), Some(b'e' | b'E')) {
            return false;
        }
        let digit_at = match self.peek_byte(1) {
            Some(b'+' | b'-') => 2,
            _ => 1,
        };
        if !self.peek_byte(digit_at).is_some_and(|c| c.is_ascii_digit()) {
            return false;
        }
        for _ in 0..digit_at {
            self.bump();
        }
        self.bump_while(|c| c.is_ascii_digit());
        true
    }

    /// Moves past one whole character (after a lexical error, so that a scan
    /// can go on). False at the end of the text.
    pub fn skip_char(&mut self) -> bool {
        if self.i >= self.bytes.len() {
            return false;
        }
        self.bump();
        while self.peek_byte(0).is_some_and(|b| b & 0xC0 == 0x80) {
            self.bump();
        }
        true
    }

    /// The position of the next byte.
    pub fn pos(&self) -> Pos {
        Pos::new(self.line, self.col)
    }
}
