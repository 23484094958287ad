//! Errors of code generation, and the run-time errors of compiled code turned
//! into the interpreter's [`RunError`]s.

use crate::lower::Site;
use irad_ir::func::{Block, Func};
use irad_ir::interp::RunError;
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
    pub(crate) fn internal(msg: String) -> CodegenError {
        CodegenError {
            loc: Location::default(),
            msg: format!("internal error: {msg}"),
        }
    }

    pub(crate) fn at(func: &Func, block: Option<Block>, msg: &str) -> CodegenError {
        CodegenError {
            loc: Location {
                func: Some(func.name.clone()),
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
    RunError {
        loc: loc_of(f.site),
        msg: message(f, sites),
        trace: f.trace.iter().map(|&s| loc_of(s)).collect(),
    }
}
