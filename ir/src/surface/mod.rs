//! The surface language of SYNTAX.md §2 (`.irad` files): parser, type
//! checker, and lowering to SSA IR without memory slots.
//!
//! `compile` = `parse`, then `check`, then `lower`. Every error is a
//! [`SurfaceError`] located at a 1-based line and column of the source and,
//! where there is one, the function. The output of `lower` passes the
//! verifier; its statements carry the source positions of the expressions
//! they come from, so run-time errors name `.irad` lines.

pub mod ast;
mod lexer;
mod parser;

pub use parser::parse;

use crate::loc::Location;

/// An error in a surface-language file.
#[derive(Clone, Debug, PartialEq)]
pub struct SurfaceError {
    /// Where: `pos` is always set; `func` when inside a function.
    pub loc: Location,
    /// Lowercase, no final full stop; says what was expected and what was found.
    pub msg: String,
}

impl crate::Diagnostic for SurfaceError {
    fn location(&self) -> &Location {
        &self.loc
    }
    fn message(&self) -> &str {
        &self.msg
    }
}

impl std::fmt::Display for SurfaceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::loc::with_place(&self.msg, &self.loc))
    }
}

impl std::error::Error for SurfaceError {}
