//! The binomial schedule of a checkpointed counted loop whose trip count is
//! known on entry (docs/reverse.md, "Binomial schedule"): where its forward
//! sweep takes its snapshots and where a replay splits a segment.
//!
//! Each snapshot holds its number of *slots*: how many snapshots the
//! segment it starts may have on the tape at once, its own included. The
//! forward sweep gives the first snapshot `S` slots and each next one one
//! fewer; a replay that splits a segment of `s` slots pushes the snapshot
//! back with `s` slots for the first part and goes on with the second part
//! with `s - 1` (its start is not on the tape until that part splits in
//! turn), so the tape never holds more than `S` snapshots of the loop. The
//! slots bound the snapshots whatever the split; the split decides only the
//! recomputation.
//!
//! With `s` slots and `r` forward runs of each stretch besides the one that
//! records it, a replay covers at most `N(s, r) = binomial(s + r, s)`
//! stretches (`N(s, r) = N(s, r - 1) + N(s - 1, r)`: the first part is run
//! once more, the second has a slot fewer), and the forward sweep, whose run
//! costs nothing more, `F(s, r) = N(s, r) + F(s - 1, r) = binomial(s + r +
//! 1, s) - 1`. The splits below take the least such `r` and a first part
//! that leaves the second within its capacity and is at least the capacity
//! two runs (a replay) or one run (the forward sweep) fewer would give:
//! `max(n - N(s - 1, r), N(s, r - 2))` and `max(n - F(s - 1, r), N(s, r -
//! 1))`. Checked against an exhaustive search for the fewest forward runs
//! over every segment of up to 250 stretches and 7 slots, both are optimal.
//!
//! Assumes `n >= 1` and `s >= 1` (a replay splits only `n >= 2`); the
//! binomials are computed in `f64` and the search stops after
//! [`MOST_ROUNDS`] runs, so a wrong count (a trip count that wrapped) only
//! makes a poorer split. Guarantees: the first part is at least 1 and at
//! most `n - 1` (a replay) or `n` (the forward sweep).

use irad_ir::{Block, FuncBuilder, Operand, Prim, Type};

use super::super::ctx::emit_value;

/// The most forward runs the search for `r` tries. A loop of `2^63`
/// stretches with `1 + log2` of them as slots needs 64.
pub(super) const MOST_ROUNDS: f64 = 128.0;

/// Which split: a replay's or the forward sweep's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Splitting {
    /// A replay's segment, whose first part is run forward once more.
    Replay,
    /// The stretches left in the forward sweep, whose run is free.
    Forward,
}

/// Emits, from the builder's current block, the length (`i64`) of the first
/// part of a segment of `n` stretches with `s` slots (`i64` operands), split
/// as `how` says. Leaves the builder in a new block; returns the length and
/// the new blocks in the layout order they need (the current block falls
/// through to the first, and the search's header to its body).
///
/// A segment its slots nearly cover (`n <= s + 1` for a replay, `n <= s`
/// for the forward sweep: one forward run at most, or none) splits after
/// its first stretch, which the search would find too; that case skips the
/// search, as most splits of a replay are of short segments.
pub(super) fn split(
    fb: &mut FuncBuilder<'_>,
    (n, s): (Operand, Operand),
    how: Splitting,
) -> Result<(Operand, [Block; 5]), String> {
    let e = |fb: &mut FuncBuilder<'_>, p: Prim, a: &[Operand]| emit_value(fb, p, a);
    let er = |r: Result<(), irad_ir::BuildError>| r.map_err(|x| x.to_string());
    let cover = match how {
        Splitting::Replay => e(fb, Prim::Iadd, &[s, Operand::from(1i64)])?,
        Splitting::Forward => s,
    };
    let short = e(fb, Prim::Le, &[n, cover])?;
    let nf = e(fb, Prim::Sitofp, &[n])?;
    let sf = e(fb, Prim::Sitofp, &[s])?;
    let quick = fb.create_block();
    let head = fb.create_block();
    let body = fb.create_block();
    let after = fb.create_block();
    let join = fb.create_block();
    let from = fb.current_block().ok_or("no block to split from")?;
    er(fb.gotoifnot(short, head))?;
    er(fb.switch_to_block(quick))?;
    er(fb.goto(join))?;
    er(fb.switch_to_block(head))?;
    let phi = |fb: &mut FuncBuilder<'_>| fb.insert_phi(head, Type::F64).map_err(|x| x.to_string());
    // `r`, then N(s, r - 2), N(s, r - 1) and N(s, r).
    let (r, two, one, cur) = (phi(fb)?, phi(fb)?, phi(fb)?, phi(fb)?);
    let v = Operand::Value;
    let f = |x: f64| Operand::from(x);
    let up = e(fb, Prim::Add, &[v(r), f(1.0)])?;
    let top = e(fb, Prim::Add, &[sf, up])?;
    let times = e(fb, Prim::Mul, &[v(cur), top])?;
    // N(s, r + 1).
    let next = e(fb, Prim::Div, &[times, up])?;
    let enough = match how {
        Splitting::Replay => e(fb, Prim::Ge, &[v(cur), nf])?,
        Splitting::Forward => {
            let cap = e(fb, Prim::Sub, &[next, f(1.0)])?;
            e(fb, Prim::Ge, &[cap, nf])?
        }
    };
    let capped = e(fb, Prim::Ge, &[v(r), f(MOST_ROUNDS)])?;
    let stop = e(fb, Prim::Or, &[enough, capped])?;
    let more = e(fb, Prim::Not, &[stop])?;
    er(fb.gotoifnot(more, after))?;
    er(fb.switch_to_block(body))?;
    er(fb.goto(head))?;
    for (p, start, again) in [
        (r, f(0.0), up),
        (two, f(0.0), v(one)),
        (one, f(0.0), v(cur)),
        (cur, f(1.0), next),
    ] {
        er(fb.add_phi_entry(p, from, start))?;
        er(fb.add_phi_entry(p, body, again))?;
    }
    er(fb.switch_to_block(after))?;
    // What the second part may hold, and the least first part.
    let (other, least, most) = match how {
        Splitting::Replay => {
            // N(s - 1, r) = N(s, r) s / (s + r).
            let sr = e(fb, Prim::Add, &[sf, v(r)])?;
            let t = e(fb, Prim::Mul, &[v(cur), sf])?;
            let other = e(fb, Prim::Div, &[t, sr])?;
            (other, v(two), e(fb, Prim::Sub, &[nf, f(1.0)])?)
        }
        Splitting::Forward => {
            // F(s - 1, r) = binomial(s + r, s - 1) - 1 = N(s, r) s / (r + 1) - 1.
            let t = e(fb, Prim::Mul, &[v(cur), sf])?;
            let b = e(fb, Prim::Div, &[t, up])?;
            (e(fb, Prim::Sub, &[b, f(1.0)])?, v(one), nf)
        }
    };
    let lo = e(fb, Prim::Sub, &[nf, other])?;
    let m = e(fb, Prim::Max, &[lo, least])?;
    let m = e(fb, Prim::Round, &[m])?;
    let m = e(fb, Prim::Min, &[m, most])?;
    let m = e(fb, Prim::Max, &[m, f(1.0)])?;
    let m = e(fb, Prim::Fptosi, &[m])?;
    er(fb.goto(join))?;
    er(fb.switch_to_block(join))?;
    let first = fb.insert_phi(join, Type::I64).map_err(|x| x.to_string())?;
    er(fb.add_phi_entry(first, quick, Operand::from(1i64)))?;
    er(fb.add_phi_entry(first, after, m))?;
    Ok((v(first), [quick, head, body, after, join]))
}

/// Emits the slots of a loop's first snapshot, `n` (an `i64` operand) the
/// stretches of its run: `max(least, 1 + ceil(b / 2))`, `b = 1 + floor(log2
/// n)` its binary digits. That is about half the snapshots the binary
/// counter may hold (`b`), and fewer forward runs (with `s` slots and as
/// many runs, `binomial(2 s, s)` is about `4^s`): 1.75 runs per stretch for
/// 64 stretches with 5 slots, where the binary counter holds up to 7 and
/// runs 3 on average; 4.8 for 4 096 with 8, against 13 and 6. Or as many as
/// the limit has room for, when that is more.
pub(super) fn first_slots(
    fb: &mut FuncBuilder<'_>,
    n: Operand,
    (least, room): (u64, Option<Operand>),
) -> Result<Operand, String> {
    let mut e = |p: Prim, a: &[Operand]| emit_value(fb, p, a);
    let nf = e(Prim::Sitofp, &[n])?;
    let nf = e(Prim::Max, &[nf, Operand::from(1.0)])?;
    let ln = e(Prim::Log, &[nf])?;
    let log2 = e(Prim::Div, &[ln, Operand::from(std::f64::consts::LN_2)])?;
    let log2 = e(Prim::Floor, &[log2])?;
    // 1 + ceil((log2 + 1) / 2) = 1 + floor(log2 / 2) + 1.
    let half = e(Prim::Div, &[log2, Operand::from(2.0)])?;
    let half = e(Prim::Floor, &[half])?;
    let slots = e(Prim::Add, &[half, Operand::from(2.0)])?;
    // At least 2 already.
    let s = match least > 2 {
        true => e(
            Prim::Max,
            &[slots, Operand::from(least.min(1 << 52) as f64)],
        )?,
        false => slots,
    };
    // The room computed on entry (an `i64`), when more.
    let s = match room {
        Some(r) => {
            let r = e(Prim::Sitofp, &[r])?;
            let r = e(Prim::Min, &[r, Operand::from((1u64 << 52) as f64)])?;
            e(Prim::Max, &[s, r])?
        }
        None => s,
    };
    e(Prim::Fptosi, &[s])
}
