//! The error type of an AD transform: a message, the place in the primal it is
//! about, and whose fault it is ([`AdErrorKind`]: the program's, or a bug of
//! the transform, an internal error). Forward and reverse mode each have one
//! (`ForwardError`, `ReverseError`), made by [`ad_error!`] so that they stay
//! alike; and the debug-build verification of what they derive
//! (`verify_derived`).
//!
//! Guarantees: an internal error's message is `internal error: ` followed by
//! what went wrong, the text users have always seen; the kind only adds a
//! type to it.

/// Whose fault an AD error is.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum AdErrorKind {
    /// The program (or the request) cannot be differentiated as asked: no
    /// rule for a callee, a batch width out of range, nested forward mode.
    User,
    /// A bug of the transform: it met something the verifier or its own
    /// invariants exclude. The message starts with `internal error`.
    Internal,
}

/// Defines a located AD error type `$name` with fields `loc`, `msg` and
/// `kind`, constructors for user and internal errors, `Diagnostic`, `Display`
/// (the message with its place), `Error`, and the conversion into the
/// interpreter's [`irad_ir::interp::RuleProviderError`].
macro_rules! ad_error {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct $name {
            /// The primal statement or function it is about.
            pub loc: irad_ir::Location,
            /// The message, lowercase, without location.
            pub msg: String,
            /// Whose fault it is; for [`crate::AdErrorKind::Internal`], `msg`
            /// starts with `internal error`.
            pub kind: crate::AdErrorKind,
        }

        impl $name {
            /// An error of the program or request: `msg` about `loc`.
            pub fn new(loc: irad_ir::Location, msg: impl Into<String>) -> $name {
                $name {
                    loc,
                    msg: msg.into(),
                    kind: crate::AdErrorKind::User,
                }
            }

            /// An internal error (a bug of the transform) about `loc`: the
            /// message `internal error: {what}`.
            pub fn internal(loc: irad_ir::Location, what: impl std::fmt::Display) -> $name {
                $name {
                    loc,
                    msg: format!("internal error: {what}"),
                    kind: crate::AdErrorKind::Internal,
                }
            }
        }

        impl irad_ir::Diagnostic for $name {
            fn location(&self) -> &irad_ir::Location {
                &self.loc
            }
            fn message(&self) -> &str {
                &self.msg
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&irad_ir::loc::with_place(&self.msg, &self.loc))
            }
        }

        impl std::error::Error for $name {}

        impl From<$name> for irad_ir::interp::RuleProviderError {
            fn from(e: $name) -> irad_ir::interp::RuleProviderError {
                match e.kind {
                    crate::AdErrorKind::User => irad_ir::interp::RuleProviderError::Located {
                        loc: e.loc,
                        msg: e.msg,
                    },
                    crate::AdErrorKind::Internal => {
                        irad_ir::interp::RuleProviderError::Internal {
                            loc: e.loc,
                            msg: e.msg,
                        }
                    }
                }
            }
        }
    };
}

/// Like every pass, the AD transforms are checked by the verifier in debug
/// builds and tests: `Err` with the message of the first error when `module`
/// (holding newly derived `what`s) does not verify (an internal error, so the
/// message starts with `internal error`); always `Ok` in release builds.
pub(crate) fn verify_derived(module: &irad_ir::Module, what: &str) -> Result<(), String> {
    if !cfg!(debug_assertions) {
        return Ok(());
    }
    irad_ir::verify::verify_module(module).map_err(|errs| {
        let first = errs.first().map_or(String::new(), |e| e.to_string());
        format!(
            "internal error: {what} does not verify ({} error(s); first: {first})",
            errs.len()
        )
    })
}
