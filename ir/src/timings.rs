//! Stage timings of the pipeline from text to a run (`irad grad --timings`):
//! the time spent in each of the named [`Stage`]s, accumulated over the
//! process, exclusive of the stages nested inside it (codegen's time does not
//! count Cranelift's, which runs inside it; `run` does not count the code it
//! compiles lazily).
//!
//! Assumes: stages are entered through [`time`] only, which every crate of
//! the pipeline can reach (this crate is at the bottom of it).
//! Guarantees: while recording is off (the default) [`time`] costs one
//! relaxed atomic load and runs its closure unchanged; recording changes no
//! output. The totals are process-wide (atomics), the nesting is per thread.

use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A stage of the pipeline, in pipeline order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Text to syntax tree (or IR text to IR).
    Parse,
    /// Name resolution and type checking, and the verifier on the module read.
    Check,
    /// Lowering the checked syntax to SSA IR.
    Ssa,
    /// The normalisation passes.
    Normalise,
    /// The AD transform (reverse or forward mode).
    Derive,
    /// The optimiser schedule over the derived functions.
    Optimise,
    /// IR to Cranelift IR (with codegen's own inlining, fusion, versioning).
    Codegen,
    /// Cranelift compiling Cranelift IR to machine code.
    Cranelift,
    /// Running the compiled (or interpreted) code.
    Run,
}

impl Stage {
    /// Every stage, in pipeline order.
    pub const ALL: [Stage; 9] = [
        Stage::Parse,
        Stage::Check,
        Stage::Ssa,
        Stage::Normalise,
        Stage::Derive,
        Stage::Optimise,
        Stage::Codegen,
        Stage::Cranelift,
        Stage::Run,
    ];

    /// The stage's name as printed: `parse`, `check`, `ssa`, `normalise`,
    /// `derive`, `optimise`, `codegen`, `cranelift`, `run`.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Parse => "parse",
            Stage::Check => "check",
            Stage::Ssa => "ssa",
            Stage::Normalise => "normalise",
            Stage::Derive => "derive",
            Stage::Optimise => "optimise",
            Stage::Codegen => "codegen",
            Stage::Cranelift => "cranelift",
            Stage::Run => "run",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The time of each stage, as [`snapshot`] read it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timings {
    /// Indexed by [`Stage`] in the order of [`Stage::ALL`].
    pub stages: [Duration; 9],
}

impl Timings {
    /// The time of `stage`.
    pub fn get(&self, stage: Stage) -> Duration {
        self.stages[stage.index()]
    }

    /// The sum over every stage.
    pub fn total(&self) -> Duration {
        self.stages.iter().sum()
    }
}

/// Turns recording on or off for the whole process.
pub fn enable(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Whether recording is on.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Sets the zero of every stage's total.
pub fn reset() {
    for n in &NANOS {
        n.store(0, Ordering::Relaxed);
    }
}

/// The totals recorded since the last [`reset`].
pub fn snapshot() -> Timings {
    let mut t = Timings::default();
    for (d, n) in t.stages.iter_mut().zip(&NANOS) {
        *d = Duration::from_nanos(n.load(Ordering::Relaxed));
    }
    t
}

/// Installs a function called as each outermost call of [`time`] for a
/// stage ends, while recording is on (a benchmark samples memory there);
/// only the first call installs one.
pub fn on_stage_end(hook: fn(Stage)) {
    let _ = HOOK.set(hook);
}

/// Runs `work` as part of `stage`: with recording on, its time (less that of
/// the stages timed inside it) is added to `stage`'s total, and the stage
/// that was running around it is paused meanwhile.
pub fn time<T>(stage: Stage, work: impl FnOnce() -> T) -> T {
    if !enabled() {
        return work();
    }
    let start = Instant::now();
    let outer = CURRENT.with(|c| c.replace(Some((stage, start))));
    if let Some((s, since)) = outer {
        add(s, start - since);
    }
    let result = work();
    let end = Instant::now();
    // Nested stages moved `CURRENT`'s start past theirs.
    if let Some((s, since)) = CURRENT.with(Cell::get) {
        add(s, end - since);
    }
    CURRENT.with(|c| c.set(outer.map(|(s, _)| (s, end))));
    if outer.is_none_or(|(s, _)| s != stage)
        && let Some(hook) = HOOK.get()
    {
        hook(stage);
    }
    result
}

static ENABLED: AtomicBool = AtomicBool::new(false);
static NANOS: [AtomicU64; 9] = [const { AtomicU64::new(0) }; 9];
static HOOK: OnceLock<fn(Stage)> = OnceLock::new();

thread_local! {
    /// The stage running on this thread and since when its time is not yet
    /// added to its total.
    static CURRENT: Cell<Option<(Stage, Instant)>> = const { Cell::new(None) };
}

fn add(stage: Stage, d: Duration) {
    let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    NANOS[stage.index()].fetch_add(nanos, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_stages_are_exclusive() {
        enable(true);
        let spin = |ms: u64| std::thread::sleep(Duration::from_millis(ms));
        let before = snapshot();
        let wall = Instant::now();
        time(Stage::Codegen, || {
            spin(20);
            time(Stage::Cranelift, || spin(30));
            spin(10);
        });
        let wall = wall.elapsed();
        let after = snapshot();
        let d = |s: Stage| after.get(s) - before.get(s);
        // Only these sleeps count (no other test of this crate times codegen).
        assert!(d(Stage::Cranelift) >= Duration::from_millis(30));
        assert!(d(Stage::Codegen) >= Duration::from_millis(30));
        // Exclusive: the two add up to the outer call's time, no more
        // (inclusive times would count the inner 30 ms twice).
        assert!(d(Stage::Codegen) + d(Stage::Cranelift) <= wall);
        let names: Vec<&str> = Stage::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(names.len(), after.stages.len());
    }
}
