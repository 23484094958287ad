//! Stretches that shorten at run time for the arrays a loop makes in each
//! iteration and records (docs/reverse.md, "Arrays made in each
//! iteration").
//!
//! The stretch length under a limit of B bytes, `max(1, (B / 2) / r)`,
//! comes from the plan's estimate `r` of the bytes one iteration records,
//! where an array pushed counts as its reference. An array made in the
//! iteration (`copy`, `zeros`, a fresh shadow, ...) and pushed stays alive
//! on the tape with all its elements until the pullback pops it, so a loop
//! making an array of 100 000 elements per iteration would hold 800 KB per
//! iteration of a stretch sized for 48 bytes. The elements' number is not
//! known before the run; the lengths of the arrays entering the loop are,
//! on entry, and every replay sees the same ones (an array's length never
//! changes). So a loop under a limit that records `F` arrays made in its
//! iterations (weighted as the estimate weighs inner loops) and has array
//! inputs computes its stretch on entry as
//! `max(1, min(S, (B / 2) / (r + 8 F m)))`, `S` the static stretch and `m`
//! the longest of those arrays: each fresh array is assumed as long as the
//! longest array that enters the loop. The forward sweep computes it in the
//! block entering the loop (its countdown and, for a counted loop of a
//! known trip count, the direct path's test use it) and each replay
//! computes the same value from the same inputs at its entry (its header
//! check and, thinned, its splits use it), so the stretches replayed are
//! the stretches the forward sweep took, and the gradient is the same bit
//! for bit.
//!
//! Assumes the loop's inputs are values defined before it (in the forward
//! sweep, or mapped into the outer replay of a nested loop), which a
//! replay takes as its first parameters in order. Guarantees: the value is
//! at least 1 and at most `S`; without fresh arrays or array inputs the
//! stretch stays the constant `S` and nothing is emitted.

use super::super::ReverseError;
use super::super::ctx::internal;
use super::CkLoop;
use irad_ir::{Block, FuncId, Location, Module, Operand, Prim};

/// How a checkpointed loop under a limit computes its stretch on entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::reverse) struct RunStretch {
    /// Half the limit, in bytes.
    pub half: u64,
    /// The arrays made in the loop that one iteration pushes, weighted as
    /// the estimate of the bytes per iteration weighs blocks.
    pub fresh: u64,
    /// The loop's inputs that are arrays (indices among its inputs): the
    /// longest gives every fresh array's length.
    pub lengths: Vec<usize>,
}

/// The bytes assumed per element of a fresh array, and at most this many
/// fresh arrays are counted (so that `8 F m` stays far from `i64`'s end for
/// any length an array can have).
const ELEMENT_BYTES: u64 = 8;
const MAX_FRESH: u64 = 1 << 16;

/// Appends a primitive with its operands where the caller builds and
/// returns its result.
pub(in crate::reverse) type Emit<'a> =
    dyn FnMut(Prim, &[Operand]) -> Result<Operand, ReverseError> + 'a;

/// The stretch of loop `ck` as an operand computed with `emit` (a primitive
/// and its operands, appended where the caller builds; the results are
/// `i64`), from `inputs`, the caller's operand of each of the loop's
/// inputs: the constant stretch when the loop has no [`RunStretch`].
pub(in crate::reverse) fn stretch(
    ck: &CkLoop,
    inputs: &[Operand],
    loc: &Location,
    emit: &mut Emit<'_>,
) -> Result<Operand, ReverseError> {
    let fixed = i64::try_from(ck.stretch).unwrap_or(i64::MAX);
    let Some(s) = &ck.sized else {
        return Ok(Operand::from(fixed));
    };
    let mut longest: Option<Operand> = None;
    for &j in &s.lengths {
        let a = *inputs
            .get(j)
            .ok_or_else(|| internal(loc, "a sized loop's input out of range"))?;
        let n = emit(Prim::Length, &[a])?;
        longest = Some(match longest {
            None => n,
            Some(m) => {
                let less = emit(Prim::Lt, &[m, n])?;
                emit(Prim::Select, &[less, n, m])?
            }
        });
    }
    let Some(m) = longest else {
        return Ok(Operand::from(fixed));
    };
    let per = s.fresh.min(MAX_FRESH) * ELEMENT_BYTES;
    let per = i64::try_from(per).unwrap_or(i64::MAX);
    let bytes = i64::try_from(ck.bytes.max(1)).unwrap_or(i64::MAX);
    let half = i64::try_from(s.half).unwrap_or(i64::MAX);
    let elems = emit(Prim::Imul, &[m, Operand::from(per)])?;
    let r = emit(Prim::Iadd, &[elems, Operand::from(bytes)])?;
    let q = emit(Prim::Idiv, &[Operand::from(half), r])?;
    let least = i64::try_from(ck.least.max(1)).unwrap_or(i64::MAX);
    let small = emit(Prim::Lt, &[q, Operand::from(least)])?;
    let q = emit(Prim::Select, &[small, Operand::from(least), q])?;
    let long = emit(Prim::Lt, &[Operand::from(fixed), q])?;
    emit(Prim::Select, &[long, Operand::from(fixed), q])
}

/// The stretch of loop `ck` and the stretch less one, computed at the end
/// of block `at` of function `fid` (before its terminator) from
/// `ck.inputs`, values of that function: the block entering the loop in the
/// sweep that runs it without recording. Constants without a
/// [`RunStretch`].
pub(in crate::reverse) fn stretch_at(
    module: &mut Module,
    fid: FuncId,
    at: Block,
    ck: &CkLoop,
    loc: &Location,
) -> Result<(Operand, Operand), ReverseError> {
    if ck.sized.is_none() {
        let fixed = i64::try_from(ck.stretch).unwrap_or(i64::MAX);
        return Ok((Operand::from(fixed), Operand::from(fixed.saturating_sub(1))));
    }
    let func = module
        .get_mut(fid)
        .ok_or_else(|| internal(loc, "no function for the stretch"))?;
    let term = func.blocks[at].term.take();
    let term_pos = func.blocks[at].term_pos;
    let inputs: Vec<Operand> = ck.inputs.iter().map(|&v| Operand::Value(v)).collect();
    let mut fb =
        irad_ir::FuncBuilder::new(module, fid).map_err(|e| internal(loc, e.to_string()))?;
    fb.switch_to_block(at)
        .map_err(|e| internal(loc, e.to_string()))?;
    let mut emit = |prim, args: &[Operand]| {
        super::super::ctx::emit_value(&mut fb, prim, args).map_err(|e| internal(loc, e))
    };
    let out = stretch(ck, &inputs, loc, &mut emit)
        .and_then(|l| Ok((l, emit(Prim::Isub, &[l, Operand::from(1i64)])?)));
    drop(fb);
    let func = module
        .get_mut(fid)
        .ok_or_else(|| internal(loc, "no function for the stretch"))?;
    func.blocks[at].term = term;
    func.blocks[at].term_pos = term_pos;
    out
}
