//! The rule checker's typed error: a failure of the rule under test (what a
//! report shows as the rule's failure) or a bug of the checker itself.
//!
//! Assumes nothing beyond `irad_ir::interp`'s error conventions. Guarantees:
//! [`CheckError`]'s `Display` is the exact text the checker has always
//! printed (an internal error reads `internal error: {what}`, made by
//! [`internal_message`]), so the report rows are unchanged; [`CheckError::kind`]
//! tells the two apart without reading the text.

use irad_ir::interp::{ErrorKind, internal_message};
use std::fmt;

/// Why a check of one point stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckError {
    /// The rule is wrong: a finite-difference mismatch, a primal state not
    /// restored, a run that fails where the primitive does not... The text
    /// is the report's message (before the point is appended).
    Failed(String),
    /// A bug of the checker: a value of a shape its own harness excludes.
    /// The text is what went wrong, without the `internal error: ` prefix.
    Internal(String),
}

impl CheckError {
    /// An internal error saying `what`.
    pub fn internal(what: impl fmt::Display) -> CheckError {
        CheckError::Internal(what.to_string())
    }

    /// Whose fault it is: [`ErrorKind::User`] for a failing rule (the input
    /// under test), [`ErrorKind::Internal`] for a bug of the checker.
    pub fn kind(&self) -> ErrorKind {
        match self {
            CheckError::Failed(_) => ErrorKind::User,
            CheckError::Internal(_) => ErrorKind::Internal,
        }
    }
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::Failed(msg) => f.write_str(msg),
            CheckError::Internal(what) => f.write_str(&internal_message(what)),
        }
    }
}

impl std::error::Error for CheckError {}

/// A failure message of the rule under test.
impl From<String> for CheckError {
    fn from(msg: String) -> CheckError {
        CheckError::Failed(msg)
    }
}

/// A failure message of the rule under test.
impl From<&str> for CheckError {
    fn from(msg: &str) -> CheckError {
        CheckError::Failed(msg.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_errors_have_their_kind_and_todays_text() {
        let e = CheckError::internal("array is borrowed");
        assert_eq!(e.kind(), ErrorKind::Internal);
        assert_eq!(e.to_string(), "internal error: array is borrowed");
        assert_eq!(ErrorKind::of_message(&e.to_string()), ErrorKind::Internal);
        let f = CheckError::from("the rule's result is not a dual");
        assert_eq!(f.kind(), ErrorKind::User);
        assert_eq!(f.to_string(), "the rule's result is not a dual");
    }
}
