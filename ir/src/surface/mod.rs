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
mod lower;
mod parser;
mod ssa;
mod typeck;

pub use parser::parse;

use crate::func::Module;
use crate::loc::Location;

/// The stack of the threads `check` and `lower` run on. Their recursion is
/// bounded by the parser's nesting limit (SSA construction's reads of a
/// variable through a long run of joins keep their own heap stack), so the
/// margin is wide; it is only reserved, not touched.
const WALK_STACK: usize = 256 << 20;

/// Runs `work` on a thread with a [`WALK_STACK`] stack, or on the caller's
/// thread if it has that much stack left (a thread started for it costs more
/// than a small file's whole walk: the fuzz runner's workers have such
/// stacks) or if no thread can be started.
fn with_big_stack<T: Send>(name: &str, work: impl Fn() -> T + Sync) -> T {
    if stacker::remaining_stack().is_some_and(|left| left >= WALK_STACK) {
        return work();
    }
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name(name.into())
            .stack_size(WALK_STACK)
            .spawn_scoped(scope, &work);
        match spawned {
            Ok(handle) => match handle.join() {
                Ok(result) => result,
                // Neither walk panics; if one did, pass the panic on.
                Err(payload) => std::panic::resume_unwind(payload),
            },
            Err(_) => work(),
        }
    })
}

/// Resolves and types `file` (see `typeck`): the [`TypeInfo`](ast::TypeInfo)
/// lowering needs, or all errors in source order.
pub fn check(file: &ast::File) -> Result<ast::TypeInfo, Vec<SurfaceError>> {
    with_big_stack("irad-check", || typeck::check(file))
}

/// Lowers a checked file to SSA IR (see `lower`); `info` is what [`check`]
/// returned for `file`.
pub fn lower(file: &ast::File, info: &ast::TypeInfo) -> Module {
    with_big_stack("irad-lower", || lower::lower(file, info))
}

/// Parses, type-checks and lowers a `.irad` file. The module is meant to pass
/// the verifier; a verifier error on it is an internal error of the front
/// end, which the caller (who runs the verifier) reports.
pub fn compile(src: &str) -> Result<Module, Vec<SurfaceError>> {
    use crate::timings::{Stage, time};
    let file = time(Stage::Parse, || parse(src)).map_err(|e| vec![e])?;
    let info = time(Stage::Check, || check(&file))?;
    Ok(time(Stage::Ssa, || lower(&file, &info)))
}

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
