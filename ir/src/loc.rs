//! Source positions and IR locations carried by every error.
//!
//! A [`Pos`] is a 1-based line and column in the text a module was parsed from
//! (or the surface file it was lowered from). A [`Location`] says where in the IR
//! something is: function, block label, statement number (from 1 within the
//! block, the terminator counted last) and the source position when known.

use std::fmt;

/// A 1-based line and column in source text.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct Pos {
    /// Line, from 1.
    pub line: u32,
    /// Column in characters, from 1.
    pub col: u32,
}

impl Pos {
    /// The position at `line`, `col`.
    pub fn new(line: u32, col: u32) -> Pos {
        Pos { line, col }
    }
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// Where in a module an error is.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Location {
    /// The function's name, without `@`.
    pub func: Option<String>,
    /// The block's label number (`#N`).
    pub block: Option<u32>,
    /// The statement number within the block, from 1; the terminator is counted last.
    pub stmt: Option<u32>,
    /// The source position, when the module came from text.
    pub pos: Option<Pos>,
}

impl Location {
    /// A location that has only a source position.
    pub fn at(pos: Pos) -> Location {
        Location {
            pos: Some(pos),
            ..Location::default()
        }
    }

    /// Whether the location names a function, block or statement.
    pub fn has_ir_place(&self) -> bool {
        self.func.is_some() || self.block.is_some() || self.stmt.is_some()
    }

    /// The IR place as SYNTAX.md writes it: `in @f, block #2, statement 3`.
    pub fn ir_place(&self) -> String {
        let mut parts = Vec::new();
        if let Some(func) = &self.func {
            parts.push(format!("in @{func}"));
        }
        if let Some(block) = self.block {
            parts.push(format!("block #{block}"));
        }
        if let Some(stmt) = self.stmt {
            parts.push(format!("statement {stmt}"));
        }
        parts.join(", ")
    }
}

/// Formats `message` with its IR place in parentheses, as every error of the IR does.
pub fn with_place(message: &str, loc: &Location) -> String {
    if loc.has_ir_place() {
        format!("{message} ({})", loc.ir_place())
    } else {
        message.to_string()
    }
}
