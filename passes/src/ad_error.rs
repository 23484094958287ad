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

/// Whose fault an AD error is: the interpreter's [`irad_ir::interp::ErrorKind`]
/// under the name the AD passes have always used. `User`: the program (or
/// the request) cannot be differentiated as asked: no rule for a callee, a
/// batch width out of range, nested forward mode. `Internal`: a bug of the
/// transform, which met something the verifier or its own invariants
/// exclude; the message starts with `internal error`.
pub type AdErrorKind = irad_ir::interp::ErrorKind;

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
                    msg: irad_ir::interp::internal_message(what),
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
        irad_ir::interp::internal_message(format_args!(
            "{what} does not verify ({} error(s); first: {first})",
            errs.len()
        ))
    })
}

#[cfg(test)]
mod tests {
    use crate::AdErrorKind;
    use crate::forward::ForwardError;
    use crate::reverse::ReverseError;
    use irad_ir::{Diagnostic, Location};

    fn at_f() -> Location {
        Location {
            func: Some("f".into()),
            stmt: Some(2),
            ..Location::default()
        }
    }

    #[test]
    fn an_internal_error_has_its_kind_and_the_old_text() {
        let e = ReverseError::internal(at_f(), "a phi as a statement");
        assert_eq!(e.kind, AdErrorKind::Internal);
        assert_eq!(e.message(), "internal error: a phi as a statement");
        let old = ReverseError::new(at_f(), "internal error: a phi as a statement");
        assert_eq!(e.to_string(), old.to_string());
        assert_eq!(old.kind, AdErrorKind::User);
        let f = ForwardError::internal(Location::default(), format_args!("no {}", "zero"));
        assert_eq!(
            (f.kind, f.to_string().as_str()),
            (AdErrorKind::Internal, "internal error: no zero")
        );
    }

    #[test]
    fn an_internal_pe_error_has_its_kind_and_the_old_text() {
        let e = crate::pe::PeError::internal(at_f(), "the specialised function does not verify: x");
        assert_eq!(e.kind(), AdErrorKind::Internal);
        assert_eq!(
            e.to_string(),
            irad_ir::loc::with_place(
                "internal error: the specialised function does not verify: x",
                &at_f()
            )
        );
        let user = crate::pe::PeError {
            loc: at_f(),
            msg: "known value 1 does not fit".into(),
        };
        assert_eq!(user.kind(), AdErrorKind::User);
    }

    #[test]
    fn the_kind_survives_into_the_rule_provider_error() {
        use irad_ir::interp::RuleProviderError;
        let e: RuleProviderError = ReverseError::internal(at_f(), "x").into();
        assert!(matches!(e, RuleProviderError::Internal { .. }), "{e:?}");
        let e: RuleProviderError = ReverseError::new(at_f(), "no rule").into();
        assert!(matches!(e, RuleProviderError::Located { .. }), "{e:?}");
    }
}
