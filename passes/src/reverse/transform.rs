//! The reverse transform of one function body: from its BBCode, the forward
//! sweep `@f.rev.fwd` and the pullback `@f.rev.back` (docs/reverse.md), in
//! four steps over one [`Derivation`] (the shared context, `ctx.rs`):
//!
//! 1. the forward parts of the statements (`sweep.rs`), which choose the
//!    values each pullback needs;
//! 2. the [`TapePlan`] (`plan.rs`): where each of those values is pushed and
//!    popped, computed before any push or pop is written;
//! 3. the rest of the forward sweep: pushes, terminators and phi entries,
//!    following the plan;
//! 4. the pullback (`pullback.rs`), popping as the plan says.
//!
//! Between steps 2 and 3 the loops to checkpoint are chosen
//! (`checkpoint/`); after step 3 their recording blocks are copied into
//! their replay functions and rewritten to run without recording.
//!
//! Assumes a verified, normalised primal (single return block, no critical
//! edges, entry without predecessors), which [`Derivation::new`] checks.
//! Guarantees: on success both pieces are complete; the plan returned is the
//! one both sweeps followed.

use super::checkpoint;
use super::ctx::Derivation;
use super::plan::TapePlan;
use super::pullback::Pullback;
use super::sweep::{Sweep, place_moved_pushes};
use super::{Reverse, ReverseError};
use irad_ir::{FuncId, Module};

pub(super) use super::ctx::check_supported;

/// Derives the bodies of `fwd_id` and `back_id` (declared with the right
/// types) from the primal `primal`, with the parameters of `mask` active
/// (`None`: all); returns the tape plan they follow.
pub(super) fn derive(
    rev: &mut Reverse<'_>,
    module: &mut Module,
    primal: FuncId,
    fwd_id: FuncId,
    back_id: FuncId,
    mask: Option<&[bool]>,
) -> Result<TapePlan, ReverseError> {
    let limit = rev.tape_limit();
    let schedule = rev.checkpoint_schedule().clone();
    let cx = Derivation::new(rev, module, primal, mask)?;
    let mut sweep = Sweep::new(&cx, module, fwd_id)?;
    sweep.statements()?;
    let mut plan = sweep.plan();
    let mut ck = checkpoint::choose(&cx, &sweep.view(), &mut plan, (limit, &schedule))?;
    sweep.block_ends(&plan, &mut ck)?;
    sweep.phi_entries()?;
    let swept = sweep.finish();
    place_moved_pushes(module, fwd_id, swept.placed);
    checkpoint::rewrite(&cx, module, fwd_id, (&swept.fblock, &swept.fval), &mut ck)?;
    let mut pullback = Pullback::new(&cx, module, back_id, (&swept.stmts, &plan), &ck)?;
    pullback.blocks()?;
    checkpoint::mark_replay_pushes(&cx, module, &ck, &mut plan);
    plan.set_checkpoints(checkpoint::summary(&cx, module, &ck), ck.skipped);
    plan.set_shown(ck.shown, ck.shown_at);
    rev.note_unbounded(&module[primal].name, plan.not_checkpointed());
    Ok(plan)
}
