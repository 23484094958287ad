//! Phi simplification: a phi whose entries all carry one operand, apart from
//! entries naming the phi itself, is that operand (the test is
//! `normalise::remove_trivial_phis`'s, shared).
//!
//! Assumes a verified function. Guarantees: the operand dominates every use
//! of the phi (it reaches the phi's block along every edge that does not come
//! from the phi itself); a phi with no entries, or only self-entries, is left
//! alone. The engine refuses a constant replacement for a phi that is the
//! callee of a dynamic call.

use super::StmtCtx;
use crate::normalise::remove_trivial_phis::single_operand;
use irad_ir::{Inst, InstKind, Operand};

/// Replaces a phi with one distinct incoming operand by it (rule `phi-simplify`).
pub fn phi_simplify(cx: &StmtCtx<'_>, inst: Inst) -> Option<Operand> {
    let data = cx.func.insts.get(inst)?;
    let InstKind::Phi { entries } = &data.kind else {
        return None;
    };
    let result = data.result?;
    single_operand(result, entries.iter().map(|(_, op)| cx.subst.resolve(*op)))
}
