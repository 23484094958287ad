//! Errors of code generation, and the run-time errors of compiled code turned
//! into the interpreter's [`RunError`]s.

use crate::lower::Site;
use irad_ir::func::{Block, Func};
use irad_ir::interp::{ErrorKind, RunError};
use irad_ir::loc::Location;
use irad_runtime::{self as rt, Host, TrapKind};
use std::fmt;

/// Code generation failed: a module the verifier would reject, or a limit of
/// Cranelift. Carries the place in the IR when known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodegenError {
    /// Where in the IR.
    pub loc: Location,
    /// What went wrong (lowercase, without location).
    pub msg: String,
}

impl CodegenError {
    /// An internal error (a bug of code generation, not a fault of the
    /// module): the message `internal error: {what}`, without a place.
    pub fn internal(what: String) -> CodegenError {
        CodegenError {
            loc: Location::default(),
            msg: irad_ir::interp::internal_message(what),
        }
    }

    /// Whose fault it is: [`ErrorKind::Internal`] for one made by
    /// [`CodegenError::internal`] (the message starts with `internal error:
    /// `), else [`ErrorKind::User`] (a module code generation cannot compile,
    /// a limit of the backend).
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::of_message(&self.msg)
    }

    pub(crate) fn at(func: &Func, block: Option<Block>, msg: &str) -> CodegenError {
        CodegenError {
            loc: Location {
                func: Some(func.name.as_str().into()),
                block: block.map(|b| func.blocks[b].label),
                stmt: None,
                pos: func.pos,
            },
            msg: format!("cannot compile: {msg}"),
        }
    }

    pub(crate) fn backend(e: impl fmt::Display) -> CodegenError {
        CodegenError {
            loc: Location::default(),
            msg: format!("code generation failed: {e}"),
        }
    }

    pub(crate) fn backend_in(e: impl fmt::Debug, func: &str) -> CodegenError {
        CodegenError {
            loc: Location::default(),
            msg: format!("code generation failed in {func}: {e:?}"),
        }
    }
}

impl fmt::Display for CodegenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&irad_ir::loc::with_place(&self.msg, &self.loc))
    }
}

impl std::error::Error for CodegenError {}

impl irad_ir::Diagnostic for CodegenError {
    fn location(&self) -> &Location {
        &self.loc
    }
    fn message(&self) -> &str {
        &self.msg
    }
}

/// What compiled code left in its context when it returned status 1.
pub(crate) struct Failure<'a> {
    pub kind: i64,
    pub site: i64,
    pub a: i64,
    pub b: i64,
    pub max_depth: i64,
    pub trace: &'a [i64],
    pub message: &'a str,
}

/// The message of an error kind, worded as the interpreter words it: the
/// text of the [`rt::Trap`] (which objects print too, but for the advice on
/// the stack budget), or the runtime's text for the kinds that carry one.
pub(crate) fn message(f: &Failure<'_>, sites: &[Site]) -> String {
    let site = usize::try_from(f.site).ok().and_then(|s| sites.get(s));
    match TrapKind::from_code(f.kind) {
        Some(TrapKind::Message | TrapKind::Bulk) => f.message.to_string(),
        Some(kind) => {
            let tape = site.and_then(|s| s.tape.as_ref()).map(ToString::to_string);
            rt::Trap::decode(kind, f.a, f.b, f.max_depth, tape.as_deref(), Host::Jit).to_string()
        }
        None => rt::error_text(f.kind, f.a, f.b, f.max_depth, None),
    }
}

/// The [`RunError`] of a failure.
pub(crate) fn run_error(f: &Failure<'_>, sites: &[Site]) -> RunError {
    let loc_of = |s: i64| {
        usize::try_from(s)
            .ok()
            .and_then(|s| sites.get(s))
            .map(|s| s.loc.clone())
            .unwrap_or_default()
    };
    // `f.trace` is innermost first; a deep recursion keeps only its ends.
    let n = f.trace.len();
    RunError::new(loc_of(f.site), message(f, sites)).with_call_sites(n, |i| loc_of(f.trace[i]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_internal_error_has_its_kind_and_the_old_text() {
        let e = CodegenError::internal(format!("no function {}", 3));
        assert_eq!(e.kind(), ErrorKind::Internal);
        assert_eq!(e.to_string(), "internal error: no function 3");
        let cannot = CodegenError::backend("verifier errors");
        assert_eq!(cannot.kind(), ErrorKind::User);
        assert_eq!(
            cannot.to_string(),
            "code generation failed: verifier errors"
        );
    }
}
