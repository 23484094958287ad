//! The error type of an AD transform: a message and the place in the primal
//! it is about. Forward and reverse mode each have one (`ForwardError`,
//! `ReverseError`), made by [`ad_error!`] so that they stay alike; and the
//! debug-build verification of what they derive (`verify_derived`).

/// Defines a located AD error type `$name` with fields `loc` and `msg`, a
/// crate-internal constructor, `Diagnostic`, `Display` (the message with its
/// place) and `Error`.
macro_rules! ad_error {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct $name {
            /// The primal statement or function it is about.
            pub loc: irad_ir::Location,
            /// The message, lowercase, without location.
            pub msg: String,
        }

        impl $name {
            pub(crate) fn new(loc: irad_ir::Location, msg: impl Into<String>) -> $name {
                $name {
                    loc,
                    msg: msg.into(),
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
    };
}

/// Like every pass, the AD transforms are checked by the verifier in debug
/// builds and tests: the message of the first error when `module` (holding
/// newly derived `what`s) does not verify; always `Ok` in release builds.
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
