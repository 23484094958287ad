//! Pieces derived on threads (docs/reverse.md, "Pieces derived in
//! parallel").
//!
//! A queued body whose primal is *self-contained* (every statement a
//! primitive or a phi, no function named by a constant) needs nothing of
//! the module but that primal: its derivation reads the primal, writes the
//! two declared pieces and requests no other rule. The parts a huge block
//! is split into (`crate::split`) are such bodies, one per part. When
//! [`Reverse::drain`] finds at least two of them, each of at least the
//! reverse cache's minimum size, in a row at the top of its queue, they
//! are derived at once, each in a module of its own holding a copy of its
//! primal and its two declared pieces (same names, types and positions), on
//! up to as many threads as there are cores, at most four (each holds a
//! part's derivation in memory, which the parts are there to bound); each
//! thread copies the primal of the body it takes. The bodies are then moved
//! into the module at the pieces' ids.
//!
//! Guarantees: the module ends as the serial derivation leaves it, body for
//! body: each derivation is the same code on the same primal with the same
//! settings, and nothing it builds depends on the module beyond the
//! primal's own statements. A body whose derivation made functions of its
//! own (a checkpointed loop's replays) or names a function is derived again
//! in the module, serially, as it would have been. Errors are those of the
//! serial order: the first failing body in the order the queue would have
//! given them.

use super::{Job, Reverse, ReverseError, transform};
use irad_ir::{Const, Func, FuncId, InstKind, Location, Module, Operand, Terminator};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The fewest statements a self-contained primal has for its derivation to
/// go to a thread ([`Reverse::set_parallel_min_stmts`]): below it, copying
/// the primal and starting a thread costs about as much as is gained.
pub const PARALLEL_MIN_STMTS: usize = 4_000;

/// The most threads deriving at once: each holds a part's derivation (its
/// tables and scratch) in memory, which splitting a huge function into
/// parts is there to bound.
const MAX_DERIVE_THREADS: usize = 4;

/// The stack of a deriving thread: as the main thread's (mapped, not
/// committed, until used).
const DERIVE_STACK: usize = 8 << 20;

/// Whether `func` is self-contained: only primitives and phis, and no
/// function named by a constant operand.
pub(super) fn self_contained(func: &Func) -> bool {
    func.insts.values().all(|data| match &data.kind {
        InstKind::Prim { args, .. } => !args.iter().any(names_a_function),
        InstKind::Phi { entries } => !entries.iter().any(|(_, op)| names_a_function(op)),
        InstKind::Invoke { .. } | InstKind::CallValue { .. } => false,
    }) && func.blocks.values().all(|b| match &b.term {
        Some(Terminator::GotoIfNot { cond: op, .. })
        | Some(Terminator::Return(op))
        | Some(Terminator::Switch { index: op, .. }) => !names_a_function(op),
        Some(Terminator::Goto(_)) | None => true,
    })
}

fn names_a_function(op: &Operand) -> bool {
    matches!(op, Operand::Const(Const::Func(_)))
}

/// The bodies derived apart: the forward sweep's and the pullback's,
/// whether the derivation asked for counted tapes, and the loops whose
/// records grow against the request ([`Reverse::unbounded_loops`]);
/// `None` when the body is to be derived in the module after all.
type Bodies = Option<(Func, Func, bool, Vec<super::UnboundedLoop>)>;

/// Derives the bodies of `jobs` (in the order the queue gave them, each
/// self-contained) on threads, then moves them into `module`; see the
/// module header.
pub(super) fn derive_apart(
    rev: &mut Reverse<'_>,
    module: &mut Module,
    jobs: Vec<Job>,
) -> Result<(), ReverseError> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_DERIVE_THREADS);
    if threads < 2 {
        return derive_here(rev, module, jobs);
    }
    let n = jobs.len();
    let done: Vec<Mutex<Option<Result<Bodies, ReverseError>>>> =
        (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let base: &Reverse<'_> = rev;
    let shared: &Module = module;
    std::thread::scope(|s| {
        let work = || {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let out = derive_one(base, shared, job);
                if let Ok(mut d) = done[i].lock() {
                    *d = Some(out);
                }
            }
        };
        for _ in 1..threads.min(n) {
            let spawned = std::thread::Builder::new()
                .name("irad-derive".into())
                .stack_size(DERIVE_STACK)
                .spawn_scoped(s, work);
            if spawned.is_err() {
                break;
            }
        }
        // This thread works too; the scope waits for the others.
        work();
    });
    for (i, (slot, job)) in done.into_iter().zip(jobs).enumerate() {
        let Some(out) = slot.into_inner().ok().flatten() else {
            return Err(ReverseError::internal(
                Location::default(),
                format!("a deriving thread stopped before body {i} of {n}"),
            ));
        };
        let (_, fwd, back, _) = job;
        match out? {
            Some((fbody, bbody, counted, unbounded)) => {
                module[fwd] = fbody;
                module[back] = bbody;
                if counted {
                    module.set_counted_tapes(true);
                }
                for u in unbounded {
                    rev.add_unbounded(u);
                }
            }
            None => derive_here(rev, module, vec![job])?,
        }
    }
    Ok(())
}

/// Derives the bodies of `jobs` in `module`, in order.
fn derive_here(
    rev: &mut Reverse<'_>,
    module: &mut Module,
    jobs: Vec<Job>,
) -> Result<(), ReverseError> {
    for (primal, fwd, back, mask) in jobs {
        transform::derive(rev, module, primal, fwd, back, mask.as_deref())?;
    }
    Ok(())
}

/// Derives the body of `job` apart, in a module of its own: its primal
/// copied (here, on the thread, not all before: one copy per thread at a
/// time), its pieces declared as in `module`, the module's flags, and an
/// empty cache of `base`'s settings. `None` when it must be derived in the
/// module after all (the derivation made functions, or a body names one).
fn derive_one(base: &Reverse<'_>, module: &Module, job: &Job) -> Result<Bodies, ReverseError> {
    let (primal, fwd, back, mask) = job;
    let mut m = Module::new();
    m.set_strong_products(module.strong_products());
    m.set_counted_tapes(module.counted_tapes());
    // Three distinct names, new to `m`: nothing to fail.
    let ids: Vec<FuncId> = [*primal, *fwd, *back]
        .iter()
        .filter_map(|&f| m.add_func(module[f].clone()).ok())
        .collect();
    let [p, f, b] = ids[..] else {
        return Ok(None);
    };
    let mut rev = base.emptied();
    transform::derive(&mut rev, &mut m, p, f, b, mask.as_deref())?;
    if m.len() != 3 || !self_contained(&m[f]) || !self_contained(&m[b]) {
        return Ok(None);
    }
    let take = |m: &mut Module, id: FuncId| {
        let empty = Func::new(&m[id].name, Vec::new(), irad_ir::Type::Unit);
        std::mem::replace(&mut m[id], empty)
    };
    let fbody = take(&mut m, f);
    let bbody = take(&mut m, b);
    Ok(Some((fbody, bbody, m.counted_tapes(), rev.unbounded)))
}
