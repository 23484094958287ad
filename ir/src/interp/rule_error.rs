//! The error of a [`super::RuleProvider`]: why the rule of a function value
//! met at run time could not be made. It is typed so that a caller can tell the
//! program's fault (a located AD error), a bug of the provider and a provider
//! that makes no rules of the kind asked for apart; `Display` gives the text
//! users see, which the interpreter and the JIT locate at the `frule`,
//! `revfwd` or `revback` statement.

use crate::loc::{Location, with_place};
use std::fmt;

/// Why a [`super::RuleProvider`] could not make a rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuleProviderError {
    /// The program cannot be differentiated there: the AD pass's message
    /// (lowercase, without location) and the place in the primal it is
    /// about; printed as the pass prints it, the message with its place.
    Located {
        /// The primal statement or function it is about.
        loc: Location,
        /// The message, lowercase, without location.
        msg: String,
    },
    /// Like [`RuleProviderError::Located`], but a bug of the provider, not a
    /// fault of the program: `msg` starts with `internal error`.
    Internal {
        /// The primal statement or function it is about.
        loc: Location,
        /// The message, lowercase, without location.
        msg: String,
    },
    /// The provider makes no rules of this kind (e.g. forward rules while
    /// running reverse-mode code): the message.
    Unavailable(String),
}

impl fmt::Display for RuleProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleProviderError::Located { loc, msg } | RuleProviderError::Internal { loc, msg } => {
                f.write_str(&with_place(msg, loc))
            }
            RuleProviderError::Unavailable(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for RuleProviderError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_the_message_with_its_place() {
        let bare = RuleProviderError::Unavailable("no reverse rules".into());
        assert_eq!(bare.to_string(), "no reverse rules");
        let unplaced = RuleProviderError::Internal {
            loc: Location::default(),
            msg: "internal error: x".into(),
        };
        assert_eq!(unplaced.to_string(), "internal error: x");
    }
}
