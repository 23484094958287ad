//! The IR text format of SYNTAX.md §1: lexer, parser, printer, and the
//! `--args` literal syntax of SYNTAX.md §3.
//!
//! - [`parse_module`] reads a module, resolves names and infers omitted `:: T`;
//! - [`print_module`], [`print_func`], [`func_lines`] print one;
//! - [`parse_args`], [`parse_value`] read run-time values typed against a signature;
//!   [`parse_known`] reads what is known of them (`--known`).
//!
//! Guarantees: parsing never panics, recurses at most [`crate::MAX_NESTING`]
//! levels and takes time linear in the input; every error is a [`ParseError`]
//! with a source position. For a module `m` whose function constants are
//! expressible (see [`print_module`]), `parse_module(&print_module(m))` equals
//! `m` under [`crate::eq::structural_eq`], and printing that again gives the
//! same text.

mod lexer;
mod literal;
pub mod num;
mod parser;
mod printer;

pub use literal::{KnownArg, parse_args, parse_known, parse_value};
pub use parser::parse_module;
pub use printer::{Line, func_lines, print_func, print_module, printed_names};

use crate::loc::{Location, Pos, with_place};
use std::fmt;

/// An error in IR text or `--args` text: where it is and what is wrong.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ParseError {
    /// Where: `pos` is always set; `func`, `block`, `stmt` when inside one.
    pub loc: Location,
    /// What: lowercase, no final full stop, says what was expected and found.
    pub msg: String,
}

impl ParseError {
    /// An error at `pos` outside any function.
    pub(crate) fn at(pos: Pos, msg: String) -> ParseError {
        ParseError {
            loc: Location::at(pos),
            msg,
        }
    }
}

impl crate::Diagnostic for ParseError {
    fn location(&self) -> &Location {
        &self.loc
    }
    fn message(&self) -> &str {
        &self.msg
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&with_place(&self.msg, &self.loc))
    }
}

impl std::error::Error for ParseError {}
