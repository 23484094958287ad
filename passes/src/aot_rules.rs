//! The rules an object file is built with (`irad emit`): a run-time rule
//! provider that answers both modes ahead of time, forward rules from
//! forward mode's cache and reverse pieces from reverse mode's.
//!
//! Assumes a verified, normalised module. Guarantees: a rule asked for twice
//! is built once; the reverse cache can be the one that built `@f.rev`, so
//! the object shares its pieces.

use crate::forward::Forward;
use crate::reverse::Reverse;
use irad_ir::interp::{RuleProvider, RuleProviderError};
use irad_ir::{FuncId, FuncRef, Lanes, Module};

/// Forward rules from `fwd`, reverse pieces from `rev`.
pub struct AheadOfTimeRules<'r> {
    /// The forward-rule cache.
    pub fwd: Forward<'r>,
    /// The reverse-piece cache.
    pub rev: Reverse<'r>,
}

impl RuleProvider for AheadOfTimeRules<'_> {
    fn forward_rule(
        &mut self,
        module: &mut Module,
        callee: FuncRef,
        width: Lanes,
    ) -> Result<FuncId, RuleProviderError> {
        self.fwd.forward_rule(module, callee, width)
    }

    fn reverse_rule(
        &mut self,
        module: &mut Module,
        callee: FuncRef,
    ) -> Result<(FuncId, FuncId), RuleProviderError> {
        self.rev.reverse_rule(module, callee)
    }
}
