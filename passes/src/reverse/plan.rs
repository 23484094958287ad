//! The tape plan of one reverse derivation: for every value of the forward
//! sweep that the pullback reads, on which tape it travels (its type), where
//! the forward sweep pushes it and where the pullback pops it; and for every
//! block whose successor joins several predecessors, the index it pushes so
//! that the pullback can `switch` back.
//!
//! Three places a saved value can take (docs/reverse.md, "Tapes"):
//! - read only by statements of the block that defines it: pushed right after
//!   the forward part of the last of those statements, popped right before
//!   that statement's pullback (short live ranges on both sides);
//! - defined in a block that runs at most once per call and dominates the
//!   return block (or a parameter): pushed once, at the end of the return
//!   block, popped once where the pullback starts;
//! - otherwise: pushed at the end of each block that reads it, popped where
//!   that block's reverse starts.
//!
//! Assumes the forward parts of the statements have been emitted (the saved
//! values are values of the forward sweep, chosen by the rules), and nothing
//! else: the plan is computed before any push or pop is written, and both
//! sweeps then follow it. Guarantees: each saved value has one entry per
//! place it is pushed; within each place, entries are in the order the
//! forward sweep pushes them (the pullback pops them in reverse).
//! [`tape_plan`] derives a function into a scratch copy of its module and
//! returns its plan, with the value names of the printed forward sweep.

use super::checkpoint::StretchSource;
use super::checkpoint::schedule::CheckpointSchedule;
use super::choose::PlanInput;
use super::ctx::Derivation;
use super::{Reverse, ReverseError};
use irad_ir::entity::SecondaryMap;
use irad_ir::text::printed_names;
use irad_ir::{Block, Func, FuncId, FuncRef, Inst, Location, Module, Operand, Prim, Type, Value};
use irad_rules::Registry;
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use smallvec::SmallVec;
use std::fmt;

/// The indices into [`TapePlan`]'s saves of one statement's or block's.
type SaveList = SmallVec<[usize; 2]>;

/// Where a saved value is pushed and popped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Site {
    /// Pushed right after the forward part of statement `stmt` (from 1) of
    /// block `#label`, popped right before that statement's pullback.
    Stmt {
        /// The primal block.
        block: Block,
        /// Its label.
        label: u32,
        /// The primal statement.
        inst: Inst,
        /// Its number in the block, from 1.
        stmt: u32,
    },
    /// Pushed at the end of block `#label` (before its terminator), popped
    /// where the reverse of that block starts.
    BlockEnd {
        /// The primal block.
        block: Block,
        /// Its label.
        label: u32,
    },
    /// Pushed once per call at the end of the return block, popped once where
    /// the pullback starts.
    Once,
}

/// One value carried from the forward sweep to the pullback on a tape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Save {
    /// The value, in the forward sweep.
    pub value: Value,
    /// Its name in the printed forward sweep, when known ([`tape_plan`]).
    pub name: Option<String>,
    /// Its type: the tape it travels on.
    pub ty: Type,
    /// Where it is pushed and popped.
    pub site: Site,
    /// When a checkpointed loop's replay function pushes it rather than the
    /// forward sweep (a value its blocks record): which, and the value there.
    pub replay: Option<ReplayPush>,
}

/// A value pushed by the replay function of a checkpointed loop (the loop's
/// recording blocks run there, not in the forward sweep).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayPush {
    /// The replay function.
    pub func: FuncId,
    /// Its name.
    pub name: String,
    /// The value pushed, in the replay function.
    pub value: Value,
    /// Its name in the printed replay function, when known ([`tape_plan`]).
    pub value_name: Option<String>,
}

/// The index of a block among the predecessors of its one successor, pushed
/// at the block's end; the reverse of the successor pops it and `switch`es
/// on it. Between two predecessors it travels as a `bool` (one byte of
/// tape: `true` for the second), otherwise as an `i64`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BranchSave {
    /// The block that pushes.
    pub from: Block,
    /// Its label.
    pub from_label: u32,
    /// Its one successor, whose reverse pops.
    pub to: Block,
    /// The successor's label.
    pub to_label: u32,
    /// The index pushed: the position of `from` among the predecessors of `to`.
    pub index: usize,
    /// Whether `to` has two predecessors, so that the index is a `bool`.
    pub two_way: bool,
    /// The replay function of a checkpointed loop that pushes it instead of
    /// the forward sweep (`from` is a block of that loop).
    pub replay: Option<String>,
}

impl BranchSave {
    /// The operand pushed.
    pub fn pushed(&self) -> Operand {
        if self.two_way {
            Operand::from(self.index == 1)
        } else {
            Operand::from(self.index as i64)
        }
    }
}

/// The tape plan of one function (see the module header).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TapePlan {
    saves: Vec<Save>,
    branches: Vec<BranchSave>,
    ret_label: u32,
    // Inline lists: most statements save one or two values, and a list on
    // the heap per statement was an allocation per primal statement.
    by_stmt: HashMap<Inst, SaveList>,
    by_block: HashMap<Block, SaveList>,
    once: Vec<usize>,
    branch_of: HashMap<Block, usize>,
    recomputed: Vec<Recompute>,
    by_recompute: HashMap<(Block, Value), usize>,
    counted: Vec<Option<CountedLoop>>,
    canon: HashMap<Value, Value>,
    checkpointed: Vec<CheckpointedLoop>,
    skipped: Vec<SkippedLoop>,
    shown: HashMap<Value, Value>,
    shown_at: HashMap<(Block, Value), Value>,
}

/// A value of the forward sweep that the reverse of a block computes again
/// from what it has, instead of reading it from a tape.
#[derive(Clone, Debug, PartialEq)]
pub struct Recompute {
    /// The value, in the forward sweep.
    pub value: Value,
    /// Its name in the printed forward sweep, when known ([`tape_plan`]).
    pub name: Option<String>,
    /// The primal block whose reverse computes it.
    pub block: Block,
    /// Its label.
    pub label: u32,
    /// The primal statement (number in its block, from 1) whose forward part
    /// computes it in the forward sweep, and that statement's block label.
    pub from: (u32, u32),
    /// The primitive that computes it.
    pub prim: Prim,
    /// Its operands, values of the forward sweep or constants.
    pub args: irad_ir::func::Args,
}

/// A loop the pullback runs backwards by counting: its header's phi `iv`
/// steps by `step` from `init`; the pullback counts it down from its last
/// value (recorded when the loop exits) and leaves the loop's reverse when
/// it is back at `init`, so no predecessor index is recorded per iteration.
#[derive(Clone, Debug, PartialEq)]
pub struct CountedLoop {
    /// The header.
    pub header: Block,
    /// Its label.
    pub label: u32,
    /// The counting phi, in the forward sweep.
    pub iv: Value,
    /// Its name in the printed forward sweep, when known.
    pub name: Option<String>,
    /// Its start, in the forward sweep.
    pub init: Operand,
    /// What each iteration adds.
    pub step: i64,
}

/// A loop the forward sweep runs without recording (docs/reverse.md,
/// "Checkpointing"): at the start of every `stretch` iterations it pushes a
/// snapshot (its header phis' values and copies of the arrays it writes);
/// the pullback replays the stretches from their snapshots, last first,
/// with the recording code of the loop (the function `replay`), and runs
/// each stretch's reverse right after its replay.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointedLoop {
    /// The header.
    pub header: Block,
    /// Its label.
    pub label: u32,
    /// Iterations per stretch.
    pub stretch: u64,
    /// Where the stretch length comes from.
    pub source: StretchSource,
    /// The estimated tape bytes of one iteration.
    pub bytes_per_iteration: u64,
    /// Under a limit, the arrays made in the loop that one iteration
    /// records, when the stretch shortens on entry for the lengths of the
    /// loop's array inputs (docs/reverse.md, "Arrays made in each
    /// iteration"); 0 otherwise.
    pub fresh_arrays: u64,
    /// Of `fresh_arrays`, the arrays' worth the loop's calls are taken to
    /// record per element (docs/reverse.md, "Calls that record per
    /// element").
    pub called_arrays: u64,
    /// Under a limit, the arrays made in the loop that one iteration
    /// records whose lengths it computes on entry (`zeros(n)`, a copy of an
    /// array it reads from before it): each counts at its length.
    pub known_arrays: u64,
    /// Whether the loop or the loops inside it make and record arrays of
    /// unknown length that are not counted: it has no array input, nor
    /// enters with an array, whose length they could be taken to have.
    pub uncounted_arrays: bool,
    /// Under a limit, the loops directly inside it whose trips its stretch
    /// counts on entry (docs/reverse.md, "Loops inside a sized loop"); its
    /// own bytes per iteration are then `bytes_per_iteration` less what the
    /// static estimate counted for them, `own_bytes`.
    pub inner_runs: Vec<InnerRun>,
    /// How many arrays defined before the loop, other than its inputs, the
    /// bounds of `inner_runs` read the lengths of (the arrays its header
    /// phis enter with): each snapshot then pushes the stretch, which its
    /// replay cannot compute.
    pub entered_lengths: u64,
    /// Whether an array giving that longest length is one the loop enters
    /// with (the shadow of an array it carries and makes afresh), rather
    /// than one it reads from before it, or `entered_lengths` is not zero.
    pub lengths_entered: bool,
    /// How many integers defined before the loop, other than its inputs,
    /// those bounds read (a countdown's start, which the loop reads only
    /// through its header phis): each snapshot then pushes the stretch too.
    pub entered_values: u64,
    /// The estimated bytes of one iteration outside `inner_runs`.
    pub own_bytes: u64,
    /// The values a snapshot holds: the header phis of the loop of the
    /// forward sweep.
    pub state: Vec<Value>,
    /// Their names in the printed forward sweep, when known ([`tape_plan`]).
    pub state_names: Vec<Option<String>>,
    /// How many arrays a snapshot copies.
    pub arrays: usize,
    /// How many of them the loop carries from one iteration to the next
    /// through its header phis (their shadows are handed from stretch to
    /// stretch).
    pub carried: usize,
    /// How many of those are used after the loop.
    pub carried_after: usize,
    /// How many of those the loop replaces on some iterations only (each
    /// with a flag among the header's values).
    pub carried_replaced: usize,
    /// How many of those hold the array another of them held the iteration
    /// before (`prev = cur; cur = next;`).
    pub carried_handed: usize,
    /// How many of those may hold the array another of them holds (a phi
    /// handed the array an either call may hand back, or a phi replaced on
    /// some iterations by the array another takes: `keep = r`), which each
    /// snapshot tells by `same`.
    pub carried_shared: usize,
    /// How many of those may hold the array another of them entered the
    /// loop with (`if better { keep = r; } r = step(r);`), which a flag
    /// beside each says.
    pub carried_entered: usize,
    /// The fewest iterations a stretch has (more than 1 when arrays are
    /// handed on: every stretch but the first then starts with arrays the
    /// loop made).
    pub least: u64,
    /// How many arrays made in an iteration (`copy`, `zeros`, `alloc`) are
    /// used after the loop other than through its header phis (made by the
    /// run's last iteration).
    pub made_after: usize,
    /// The label of the checkpointed loop whose replay function takes this
    /// loop's snapshots, when it is checkpointed inside another one.
    pub within: Option<u32>,
    /// The name of the function that replays one stretch.
    pub replay: String,
    /// When the forward sweep tells on entry that the loop runs at most
    /// this many iterations (a counted loop against a bound defined before
    /// it) and then records it as it would without a limit: the stretch, or
    /// for a loop inside another's replay at most `INNER_TRIPS`.
    pub direct: Option<u64>,
    /// The labels of the checkpointed loops inside it that its direct path
    /// records in full too, each when its run is no longer than its own
    /// direct path records.
    pub direct_inner: Vec<u32>,
    /// How many edges leave the loop, when it is not a loop that leaves
    /// through one edge from its header (`break`, `return` in it, `&&` or
    /// `||` in a `while` condition, a test at the bottom): each replay then
    /// pushes the loop's inputs back for the replay of the stretch before.
    pub exits: Option<usize>,
    /// Whether the exits' paths meet only later, each exit block giving
    /// the arrays used after the loop the shadows of the blocks it
    /// dominates.
    pub exits_apart: bool,
    /// With `exits_apart`, the labels of the blocks several exit blocks
    /// (and nothing else) jump to, which merge their shadows by phis.
    pub exits_joined: Vec<u32>,
    /// After how many stretches its snapshots are thinned online (0: from
    /// the first): the forward sweep keeps the snapshots of those and then
    /// those of a binary counter of the stretches after them (at most one
    /// more than the base-2 logarithm of their number), and the pullback
    /// splits the segment between two kept snapshots in halves
    /// (docs/reverse.md, "Bounded snapshots").
    pub thinned_after: u64,
    /// For a counted loop whose trip count is known on entry, the binomial
    /// schedule instead (docs/reverse.md, "Binomial schedule"), with the
    /// snapshots the limit has room for (0: none counted): each snapshot
    /// holds its slots, and at most `max(room, 2 + floor(log2 C) / 2)` are
    /// held for `C` stretches.
    pub binomial: Option<u64>,
    /// For such a loop whose snapshots copy arrays: whether its first
    /// snapshot takes the slots half the limit holds, for the arrays at
    /// their lengths on entry, when that is more.
    pub binomial_room: bool,
}

/// A loop inside a checkpointed loop whose trips (and snapshots) the outer
/// loop's stretch counts on entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InnerRun {
    /// Its header's label.
    pub label: u32,
    /// The label of the counted loop it is inside, if it is not directly
    /// inside the sized loop (or inside short loops only); its bytes are
    /// then part of that loop's per iteration.
    pub inside: Option<u32>,
    /// The estimated bytes one of its iterations records.
    pub bytes: u64,
    /// The arrays made in it that one of its iterations records, of
    /// unknown length.
    pub fresh: u64,
    /// Of `fresh`, the arrays' worth its calls are taken to record.
    pub called: u64,
    /// Those whose lengths are known on entry.
    pub known: u64,
    /// How many arrays a snapshot of it copies (0 when counted not at
    /// all).
    pub copies: u64,
    /// How many of those are made in the outer loop, each taken as long as
    /// the longest array the outer loop reads from before it (the others
    /// are inputs of the outer loop, counted at their lengths).
    pub copies_made: u64,
    /// How many runs of it an iteration of the outer loop is taken to
    /// make (16 for each short loop between them).
    pub runs: u64,
    /// Where its trips come from.
    pub trips: InnerTrips,
}

/// Where the trips of an [`InnerRun`] come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InnerTrips {
    /// Its start and bound, on entry.
    Bounds,
    /// Its start and bound, which hold the outer loop's counter: the most
    /// they give at either end of its range.
    Counter,
    /// Its start and bound, which hold the counter of a loop around it
    /// inside the outer loop: the most they give at the ends of the ranges
    /// of the counters they read.
    Counters,
    /// The static estimate's 16.
    Estimate,
}

/// A loop that checkpointing was asked for (by a tape limit or a
/// `checkpoint` statement) and that is not checkpointed, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedLoop {
    /// The header's label.
    pub label: u32,
    /// Why it is not checkpointed.
    pub reason: String,
    /// Whether its records grow with its iterations though a tape limit
    /// or a schedule asked for it to be checkpointed: it records something
    /// per iteration, it leaves, it is no counted loop of a constant trip
    /// count of at most 16 (whose run records as much each time), nor one
    /// inside a checkpointed loop whose stretch holds its run (`it is
    /// inside loop #N, which is checkpointed`), and neither the program
    /// (`checkpoint(0)`) nor the checkpoint schedule (`= record`) asked
    /// for it to be recorded.
    pub grows: bool,
    /// The loop's source position ([`super::header_pos`]), when the
    /// module came from text.
    pub pos: Option<irad_ir::Pos>,
}

/// A loop of a derived function whose records grow with its iterations
/// though a tape limit or a schedule asked for checkpointing
/// ([`SkippedLoop::grows`]): the tape of a long run of it is not bounded.
/// `irad grad`, `bench` and `emit --grad` print each as a warning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnboundedLoop {
    /// The primal function it is in, without `@`.
    pub func: String,
    /// The loop, with why it is not checkpointed and where it is.
    pub skipped: SkippedLoop,
}

impl fmt::Display for UnboundedLoop {
    /// `loop #2 of @f is not checkpointed: REASON; its records grow with
    /// its iterations`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "loop #{} of @{} is not checkpointed: {}; its records grow with its iterations",
            self.skipped.label, self.func, self.skipped.reason
        )
    }
}

/// Told of each [`UnboundedLoop`] as the derivation notes it
/// ([`super::Reverse::set_on_unbounded`], `GradOptions::on_unbounded`):
/// before any code derived with it runs, so that a warning reaches the user
/// even when the run then fails for want of memory. Rules derived at run
/// time (calls through function values) tell theirs as they are derived.
#[derive(Clone)]
pub struct UnboundedHook(pub std::sync::Arc<dyn Fn(&UnboundedLoop) + Send + Sync>);

impl UnboundedHook {
    /// A hook calling `f`.
    pub fn new(f: impl Fn(&UnboundedLoop) + Send + Sync + 'static) -> UnboundedHook {
        UnboundedHook(std::sync::Arc::new(f))
    }
}

impl fmt::Debug for UnboundedHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("UnboundedHook(..)")
    }
}

/// Builds `f` (a function of a normalised, verified module) in reverse mode
/// in a scratch copy of `module`, activity analysis on, and returns its tape
/// plan, with the names of the saved values as `irad dump --mode rev` prints
/// them in `@f.rev.fwd`. A function marked primitive by a registered rrule
/// has no plan: that is an error.
pub fn tape_plan(
    module: &Module,
    registry: &Registry,
    f: FuncId,
) -> Result<TapePlan, ReverseError> {
    tape_plan_limited(module, registry, f, None)
}

/// [`tape_plan`] of `f` derived under the tape limit `limit` (bytes;
/// [`Reverse::set_tape_limit`]): the plan also says which loops are
/// checkpointed and how, and which are not and why.
pub fn tape_plan_limited(
    module: &Module,
    registry: &Registry,
    f: FuncId,
    limit: Option<u64>,
) -> Result<TapePlan, ReverseError> {
    tape_plan_scheduled(module, registry, f, limit, &CheckpointSchedule::default())
}

/// [`tape_plan_limited`] with the per-loop overrides of `schedule`
/// ([`Reverse::set_checkpoint_schedule`], docs/schedules.md).
pub fn tape_plan_scheduled(
    module: &Module,
    registry: &Registry,
    f: FuncId,
    limit: Option<u64>,
    schedule: &CheckpointSchedule,
) -> Result<TapePlan, ReverseError> {
    let mut m = module.clone();
    let func = m
        .get(f)
        .ok_or_else(|| ReverseError::new(Location::default(), "invalid function handle"))?;
    if registry.function_rrule_in(module, &func.name).is_some() {
        return Err(ReverseError::new(
            Location {
                func: Some(func.name.as_str().into()),
                pos: func.pos,
                ..Location::default()
            },
            format!(
                "@{} has a registered reverse rule and no tape plan",
                func.name
            ),
        ));
    }
    let mut rev = Reverse::new(registry);
    rev.set_tape_limit(limit);
    rev.set_checkpoint_schedule(schedule.clone());
    rev.request(&mut m, FuncRef::User(f))?;
    let (primal, fwd_id, back_id, mask) = rev
        .cache
        .next_job()
        .ok_or_else(|| ReverseError::internal(Location::default(), "no pieces queued"))?;
    let mut plan =
        super::transform::derive(&mut rev, &mut m, primal, fwd_id, back_id, mask.as_deref())?;
    plan.name_values(&m, fwd_id);
    Ok(plan)
}

impl TapePlan {
    /// The saved values, in the order the forward sweep first meets them
    /// (blocks in layout order, statements in order).
    pub fn saves(&self) -> &[Save] {
        &self.saves
    }

    /// The predecessor indices, in reverse postorder of their blocks.
    pub fn branches(&self) -> &[BranchSave] {
        &self.branches
    }

    /// The label of the return block, where [`Site::Once`] values are pushed.
    pub fn ret_label(&self) -> u32 {
        self.ret_label
    }

    /// The values pushed right after the forward part of `inst`, in push order.
    pub fn after_stmt(&self, inst: Inst) -> impl DoubleEndedIterator<Item = &Save> {
        self.pick(self.by_stmt.get(&inst).map(|l| &l[..]))
    }

    /// The values pushed at the end of `block`, in push order.
    pub fn at_block_end(&self, block: Block) -> impl DoubleEndedIterator<Item = &Save> {
        self.pick(self.by_block.get(&block).map(|l| &l[..]))
    }

    /// The values pushed once per call, in push order.
    pub fn once(&self) -> impl DoubleEndedIterator<Item = &Save> {
        self.pick(Some(&self.once[..]))
    }

    /// The values the reverse of blocks computes again, in block order.
    pub fn recomputed(&self) -> &[Recompute] {
        &self.recomputed
    }

    /// How the reverse of `block` computes `value` again, if it does.
    pub fn recompute_at(&self, block: Block, value: Value) -> Option<&Recompute> {
        self.by_recompute
            .get(&(block, value))
            .map(|&k| &self.recomputed[k])
    }

    /// The loops run backwards by counting.
    pub fn counted(&self) -> impl Iterator<Item = &CountedLoop> {
        self.counted.iter().flatten()
    }

    /// The value of the forward sweep the pullback reads in place of `v`:
    /// an earlier value of the same block that `v` repeats, or `v`.
    pub fn canonical(&self, v: Value) -> Value {
        self.canon.get(&v).copied().unwrap_or(v)
    }

    /// The counted loops, aligned with the derivation's single-exit loops.
    pub(super) fn counted_slots(&self) -> &[Option<CountedLoop>] {
        &self.counted
    }

    /// The checkpointed loops, outermost first.
    pub fn checkpointed(&self) -> &[CheckpointedLoop] {
        &self.checkpointed
    }

    /// The loops checkpointing was asked for that are not checkpointed.
    pub fn not_checkpointed(&self) -> &[SkippedLoop] {
        &self.skipped
    }

    /// Records the checkpointing decisions, for printing.
    pub(super) fn set_checkpoints(
        &mut self,
        checkpointed: Vec<CheckpointedLoop>,
        skipped: Vec<SkippedLoop>,
    ) {
        self.checkpointed = checkpointed;
        self.skipped = skipped;
    }

    /// The value of the forward sweep that stands for `v` once checkpointed
    /// loops are rewritten (a value of such a loop used after it is
    /// defined anew there), or `v`: the value named in the printed sweep.
    pub fn shown(&self, v: Value) -> Value {
        self.shown.get(&v).copied().unwrap_or(v)
    }

    /// The value of the forward sweep that `save` pushes once checkpointed
    /// loops are rewritten: as [`TapePlan::shown`], but a block an exit edge
    /// of such a loop leads to may push a value of its own (the shadow a
    /// carried array leaves the loop with through it).
    pub fn shown_save(&self, save: &Save) -> Value {
        let own = match save.site {
            Site::BlockEnd { block, .. } => self.shown_at.get(&(block, save.value)),
            _ => None,
        };
        own.copied().unwrap_or_else(|| self.shown(save.value))
    }

    /// Records the values of checkpointed loops defined anew, and those
    /// blocks an exit edge leads to define of their own.
    pub(super) fn set_shown(
        &mut self,
        renamed: HashMap<Value, Value>,
        at: HashMap<(Block, Value), Value>,
    ) {
        self.shown = renamed;
        self.shown_at = at;
    }

    /// The saved values and predecessor indices, for marking those a replay
    /// function pushes.
    pub(super) fn pushes_mut(&mut self) -> (&mut [Save], &mut [BranchSave]) {
        (&mut self.saves, &mut self.branches)
    }

    /// Takes the predecessor index pushed at the end of `from` out of the
    /// plan (a checkpointed loop's replays push it instead).
    pub(super) fn take_branch(&mut self, from: Block) -> Option<BranchSave> {
        let k = self.branch_of.remove(&from)?;
        let br = self.branches.remove(k);
        for slot in self.branch_of.values_mut() {
            if *slot > k {
                *slot -= 1;
            }
        }
        Some(br)
    }

    /// Adds `value` (of type `ty`) to the values pushed at the end of block
    /// `block` (`#label`) and popped where its reverse starts, unless it is
    /// one of them already.
    pub(super) fn add_block_end_save(&mut self, block: Block, label: u32, value: Value, ty: Type) {
        if self.at_block_end(block).any(|s| s.value == value) {
            return;
        }
        self.push(Save {
            value,
            name: None,
            ty,
            site: Site::BlockEnd { block, label },
            replay: None,
        });
    }

    /// The predecessor index pushed at the end of `block`, if any.
    pub fn branch_from(&self, block: Block) -> Option<&BranchSave> {
        self.branch_of.get(&block).map(|&k| &self.branches[k])
    }

    fn pick<'a>(&'a self, idx: Option<&'a [usize]>) -> impl DoubleEndedIterator<Item = &'a Save> {
        idx.unwrap_or_default().iter().map(|&k| &self.saves[k])
    }

    /// Adds a save and indexes it.
    fn push(&mut self, save: Save) {
        let k = self.saves.len();
        match &save.site {
            Site::Stmt { inst, .. } => self.by_stmt.entry(*inst).or_default().push(k),
            Site::BlockEnd { block, .. } => self.by_block.entry(*block).or_default().push(k),
            Site::Once => self.once.push(k),
        }
        self.saves.push(save);
    }

    /// Fills in the names of the saved values as printed in function `fwd`.
    fn name_values(&mut self, m: &Module, fwd: FuncId) {
        let names = printed_names(m, fwd);
        let mut replay_names: HashMap<FuncId, std::collections::HashMap<Value, String>> =
            HashMap::default();
        let shown = std::mem::take(&mut self.shown);
        let show = |v: &Value| *shown.get(v).unwrap_or(v);
        for save in &mut self.saves {
            let own = match save.site {
                Site::BlockEnd { block, .. } => self.shown_at.get(&(block, save.value)),
                _ => None,
            };
            save.name = names.get(own.unwrap_or(&show(&save.value))).cloned();
            if let Some(r) = &mut save.replay {
                let names = replay_names
                    .entry(r.func)
                    .or_insert_with(|| printed_names(m, r.func));
                r.value_name = names.get(&r.value).cloned();
            }
        }
        for r in &mut self.recomputed {
            r.name = names.get(&r.value).cloned();
        }
        for c in self.counted.iter_mut().flatten() {
            c.name = names.get(&show(&c.iv)).cloned();
        }
        for c in &mut self.checkpointed {
            c.state_names = c.state.iter().map(|v| names.get(v).cloned()).collect();
        }
        self.shown = shown;
    }

    /// The plan of derivation `cx`, from the statements as the forward sweep
    /// left them (see [`super::choose`]).
    pub(super) fn build(cx: &Derivation<'_>, input: &PlanInput<'_>) -> TapePlan {
        let chosen = super::choose::choose(cx, input);
        let shape = &cx.shape;
        let bb = &shape.bb;
        let mut plan = TapePlan {
            ret_label: cx.label(shape.ret),
            ..TapePlan::default()
        };
        let fdef = &chosen.fdef;
        // A value read only in its defining block, by statements whose
        // forward parts stayed there, moves next to its last reader.
        let stayed = |inst: Inst| input.fend[inst].is_some();
        let mut readers: HashMap<Value, (bool, Option<Inst>)> = HashMap::default();
        for &(i, reader, v) in &chosen.reads {
            let here = fdef[v] == Some(i) && reader.is_some_and(stayed);
            readers
                .entry(v)
                .and_modify(|(ok, last)| {
                    *ok &= here;
                    *last = reader;
                })
                .or_insert((here, reader));
        }
        let mut seen: HashSet<(Option<usize>, Value)> = HashSet::default();
        for &(i, _, v) in &chosen.reads {
            let ty = input.fwd.values[v].ty.clone();
            let site = match readers.get(&v) {
                Some(&(true, Some(last))) => {
                    if !seen.insert((None, v)) {
                        continue;
                    }
                    let stmt = cx.places.get(last).map_or(0, |(_, s)| s);
                    Site::Stmt {
                        block: bb.blocks[i].id,
                        label: cx.label(i),
                        inst: last,
                        stmt,
                    }
                }
                _ if fdef[v].is_none_or(|d| shape.once[d]) => {
                    if !seen.insert((None, v)) {
                        continue;
                    }
                    Site::Once
                }
                _ => {
                    if !seen.insert((Some(i), v)) {
                        continue;
                    }
                    Site::BlockEnd {
                        block: bb.blocks[i].id,
                        label: cx.label(i),
                    }
                }
            };
            plan.push(Save {
                value: v,
                name: None,
                ty,
                site,
                replay: None,
            });
        }
        for r in chosen.recomputed {
            plan.by_recompute
                .insert((r.block, r.value), plan.recomputed.len());
            plan.recomputed.push(r);
        }
        plan.counted = chosen.counted;
        plan.canon = chosen.canon;
        plan.plan_branches(cx);
        plan
    }

    /// The predecessor indices: a block whose one successor has several
    /// predecessors and reaches the return pushes its index among them,
    /// unless that successor heads a loop run backwards by counting.
    fn plan_branches(&mut self, cx: &Derivation<'_>) {
        let shape = &cx.shape;
        let counted: HashSet<Block> = self.counted().map(|c| c.header).collect();
        for &i in &shape.order {
            if let [s] = shape.succs[i].as_slice()
                && shape.preds[*s].len() > 1
                && shape.to_ret[*s]
                && !counted.contains(&shape.bb.blocks[*s].id)
            {
                let index = shape.preds[*s].iter().position(|&p| p == i).unwrap_or(0);
                let from = shape.bb.blocks[i].id;
                self.branch_of.insert(from, self.branches.len());
                self.branches.push(BranchSave {
                    from,
                    from_label: cx.label(i),
                    to: shape.bb.blocks[*s].id,
                    to_label: cx.label(*s),
                    index,
                    two_way: shape.preds[*s].len() == 2,
                    replay: None,
                });
            }
        }
    }
}

impl TapePlan {
    /// The plan as lines of text: one per saved value, recomputed value,
    /// counted loop, predecessor index, checkpointed loop and loop not
    /// checkpointed; each with the name of the replay function that pushes
    /// what it says (`None`: the forward sweep).
    pub fn lines(&self) -> Vec<(Option<String>, String)> {
        let mut out = Vec::new();
        for save in &self.saves {
            out.push((
                save.replay.as_ref().map(|r| r.name.clone()),
                self.save_line(save),
            ));
        }
        for r in &self.recomputed {
            out.push((
                None,
                format!(
                    "`{}` of #{} statement {}: recomputed in the reverse of #{}, not recorded",
                    r.prim, r.from.0, r.from.1, r.label
                ),
            ));
        }
        for c in self.counted() {
            let name = match &c.name {
                Some(name) => format!("%{name}"),
                None => format!("value {}", c.iv.as_u32()),
            };
            out.push((
                None,
                format!(
                    "{name}: counts loop #{} (step {}); its reverse counts back, recording no index per iteration",
                    c.label, c.step
                ),
            ));
        }
        for br in &self.branches {
            let (k, ty) = if br.two_way {
                ((br.index == 1).to_string(), "bool")
            } else {
                (br.index.to_string(), "i64")
            };
            let by = br
                .replay
                .as_ref()
                .map(|r| format!(" by @{r}"))
                .unwrap_or_default();
            out.push((
                br.replay.clone(),
                format!(
                    "{k}: {ty}  pushed at the end of #{}{by} (its index among the predecessors of #{}), popped at the end of the reverse of #{}",
                    br.from_label, br.to_label, br.to_label
                ),
            ));
        }
        for c in &self.checkpointed {
            out.push((None, checkpointed_line(c)));
        }
        for s in &self.skipped {
            out.push((
                None,
                format!("loop #{}: not checkpointed: {}", s.label, s.reason),
            ));
        }
        out
    }

    /// The line of one saved value.
    fn save_line(&self, save: &Save) -> String {
        let name = match (&save.replay, &save.name) {
            (Some(r), _) => r.value_name.as_ref(),
            (None, name) => name.as_ref(),
        };
        let mut line = match name {
            Some(name) => format!("%{name}"),
            None => format!("value {}", save.value.as_u32()),
        };
        let by = save
            .replay
            .as_ref()
            .map(|r| format!(" by @{}", r.name))
            .unwrap_or_default();
        line.push_str(&match &save.site {
            Site::Stmt { label, stmt, .. } => format!(
                ": {}  pushed after #{label} statement {stmt}{by}, popped before its pullback",
                save.ty
            ),
            Site::BlockEnd { label, .. } => format!(
                ": {}  pushed at the end of #{label}{by}, popped where its reverse starts",
                save.ty
            ),
            Site::Once => format!(
                ": {}  pushed once at the end of #{}, popped where the pullback starts",
                save.ty, self.ret_label
            ),
        });
        line
    }
}

impl fmt::Display for TapePlan {
    /// [`TapePlan::lines`], one per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (_, line) in self.lines() {
            writeln!(f, "{line}")?;
        }
        Ok(())
    }
}

/// "N array" or "N arrays".
fn arrays_text(n: u64) -> String {
    format!("{n} array{}", if n == 1 { "" } else { "s" })
}

/// What the calls among `fresh` arrays an iteration makes and records
/// stand for, if any.
fn called_text(fresh: u64, called: u64) -> String {
    match called {
        0 => String::new(),
        c if c == fresh => " (all of them what its calls are taken to record)".into(),
        c => format!(" ({c} of them what its calls are taken to record)"),
    }
}

/// How a checkpointed loop under `limit` whose inner loops count their
/// trips on entry says how its stretch is sized.
fn inner_runs_text(c: &CheckpointedLoop, limit: u64) -> String {
    let mut text = format!(
        " at most (tape limit {}, about {} bytes per iteration",
        size_text(limit),
        c.own_bytes
    );
    if c.fresh_arrays > 0 {
        text.push_str(&format!(
            " and 8 per element of the {} an iteration makes and records{}",
            arrays_text(c.fresh_arrays),
            called_text(c.fresh_arrays, c.called_arrays)
        ));
    }
    if c.known_arrays > 0 {
        text.push_str(&format!(
            " and 8 per element of the {} of known length an iteration makes and records",
            arrays_text(c.known_arrays)
        ));
    }
    for (i, r) in c.inner_runs.iter().enumerate() {
        text.push_str(&format!(
            "{} loop #{}",
            if i == 0 { ", besides" } else { ";" },
            r.label
        ));
        if let Some(o) = r.inside {
            text.push_str(&format!(" (inside loop #{o})"));
        }
        if r.runs > 1 {
            text.push_str(&format!(" ({} runs per iteration)", r.runs));
        }
        text.push_str(&format!(": about {} bytes", r.bytes));
        if r.fresh > 0 {
            text.push_str(&format!(
                " and 8 per element of {}{}",
                arrays_text(r.fresh),
                called_text(r.fresh, r.called)
            ));
        }
        if r.known > 0 {
            text.push_str(&format!(
                " and 8 per element of {} of known length",
                arrays_text(r.known)
            ));
        }
        text.push_str(match r.trips {
            InnerTrips::Bounds => " per iteration for the iterations its start and bound give on entry",
            InnerTrips::Counter => " per iteration for the most iterations its start and bound give at either end of the loop's range",
            InnerTrips::Counters => " per iteration for the most iterations its start and bound give at the ends of the ranges of the counters they read",
            InnerTrips::Estimate => " per iteration for 16 iterations",
        });
        if r.copies > 0 {
            text.push_str(&format!(
                ", and per run 8 per element of the {} its snapshots copy, for 1 + log2 of its stretches",
                arrays_text(r.copies)
            ));
        }
    }
    if c.fresh_arrays > 0
        || c.inner_runs
            .iter()
            .any(|r| r.fresh > 0 || r.copies_made > 0)
    {
        text.push_str(match c.lengths_entered {
            false => ", each array made in the loop taken as long as the longest array the loop reads from before it",
            true => ", each array made in the loop taken as long as the longest array the loop reads from or enters with",
        });
    }
    if c.uncounted_arrays {
        text.push_str(", not counting the arrays of unknown length made in the loop (it reads no array from before it)");
    }
    text.push_str(": fewer on entry when those are long or many)");
    text
}

/// What a snapshot of a loop whose stretch reads values its replay lacks
/// says of the stretch it pushes.
fn entered_text(c: &CheckpointedLoop) -> Option<String> {
    let values = |n: u64| format!("{n} value{}", if n == 1 { "" } else { "s" });
    let from = match (c.entered_lengths, c.entered_values) {
        (0, 0) => return None,
        (a, 0) => format!("the length of {}", arrays_text(a)),
        (0, v) => values(v),
        (a, v) => format!("the length of {} and {}", arrays_text(a), values(v)),
    };
    Some(format!(
        "the stretch (computed from {from} it enters with, which its replay lacks)"
    ))
}

/// The line of a checkpointed loop.
fn checkpointed_line(c: &CheckpointedLoop) -> String {
    let mut line = format!(
        "loop #{}: checkpointed every {} iteration",
        c.label, c.stretch
    );
    if c.stretch != 1 {
        line.push('s');
    }
    match &c.source {
        StretchSource::Limit(limit) if !c.inner_runs.is_empty() || c.known_arrays > 0 => {
            line.push_str(&inner_runs_text(c, *limit));
        }
        StretchSource::Limit(limit) if c.fresh_arrays > 0 => line.push_str(&format!(
            " at most (tape limit {}, about {} bytes per iteration and 8 per element of the {} an iteration makes and records{}, each taken as long as the longest array the loop {}: fewer on entry when those are long)",
            size_text(*limit),
            c.bytes_per_iteration,
            arrays_text(c.fresh_arrays),
            called_text(c.fresh_arrays, c.called_arrays),
            match c.lengths_entered {
                false => "reads from before it",
                true => "reads from or enters with",
            }
        )),
        StretchSource::Limit(limit) => line.push_str(&format!(
            " (tape limit {}, about {} bytes per iteration)",
            size_text(*limit),
            c.bytes_per_iteration
        )),
        StretchSource::Program => line.push_str(" (`checkpoint` in the loop)"),
        StretchSource::Schedule(rule) => {
            line.push_str(&format!(" (`{rule}` in the checkpoint schedule)"))
        }
    }
    match c.within {
        // Its state is values of the outer loop's replay, not printed here.
        Some(outer) => line.push_str(&format!(
            ", inside loop #{outer}'s replay, which takes its snapshots; each snapshot pushes a flag (a stretch before it?), the stretch's index, {}{}{} value{}",
            match c.binomial {
                Some(_) => "its slots, ",
                None => "",
            },
            match entered_text(c) {
                None => String::new(),
                Some(t) => format!("{t}, "),
            },
            c.state.len(),
            if c.state.len() == 1 { "" } else { "s" }
        )),
        None => {
            line.push_str("; each snapshot pushes a flag (a stretch before it?), the stretch's index,");
            if c.binomial.is_some() {
                line.push_str(" its slots,");
            }
            if let Some(t) = entered_text(c) {
                line.push_str(&format!(" {t},"));
            }
            for (v, name) in c.state.iter().zip(&c.state_names) {
                match name {
                    Some(name) => line.push_str(&format!(" %{name}")),
                    None => line.push_str(&format!(" value {}", v.as_u32())),
                }
            }
        }
    }
    match c.arrays {
        0 => line.push_str(" and no array"),
        1 => line.push_str(" and a copy of 1 array"),
        n => line.push_str(&format!(" and copies of {n} arrays")),
    }
    match c.carried {
        0 => {}
        n => {
            line.push_str(&format!(" ({n} carried from one iteration to the next"));
            if c.carried_after > 0 {
                line.push_str(&format!(", {} of them used after it", c.carried_after));
            }
            if c.carried_replaced > 0 {
                line.push_str(&format!(
                    ", {} of them replaced on some iterations only",
                    c.carried_replaced
                ));
            }
            if c.carried_handed > 0 {
                line.push_str(&format!(
                    ", {} of them holding the array another held the iteration before: stretches of at least {} iterations",
                    c.carried_handed, c.least
                ));
            }
            let perhaps = [
                (c.carried_shared, "holds"),
                (c.carried_entered, "entered with"),
            ];
            for (n, what) in perhaps.into_iter().filter(|&(n, _)| n > 0) {
                line.push_str(&format!(", {n} of them perhaps the array another {what}"));
            }
            line.push(')');
        }
    }
    match c.made_after {
        0 => {}
        1 => line.push_str("; 1 array its last iteration makes is used after it"),
        n => line.push_str(&format!(
            "; {n} arrays its last iteration makes are used after it"
        )),
    }
    match (c.binomial, c.thinned_after) {
        (Some(0 | 1), _) if c.binomial_room => line.push_str(
            "; snapshots placed by the binomial schedule of the stretches left (its trip count is known on entry): at most what half the limit holds, for the arrays a snapshot copies at their lengths on entry, or 2 + half the base-2 logarithm of the number of stretches held, whichever is more, a segment of several stretches split where the schedule says by its replay",
        ),
        (Some(0 | 1), _) => line.push_str(
            "; snapshots placed by the binomial schedule of the stretches left (its trip count is known on entry): at most 2 + half the base-2 logarithm of the number of stretches held, a segment of several stretches split where the schedule says by its replay",
        ),
        (Some(room), _) => line.push_str(&format!(
            "; snapshots placed by the binomial schedule of the stretches left (its trip count is known on entry): at most {room} (what half the limit holds) or 2 + half the base-2 logarithm of the number of stretches held, whichever is more, a segment of several stretches split where the schedule says by its replay"
        )),
        (None, 0) => line.push_str(
            "; snapshots thinned online (a binary counter of the stretches: at most 1 + log2 of their number held), a segment of several stretches split in halves by its replay",
        ),
        (None, n) => line.push_str(&format!(
            "; snapshots thinned online after {n} stretches (a binary counter of the stretches after them: at most {n} + 1 + log2 of their number held), a segment of several stretches split in halves by its replay"
        )),
    }
    line.push_str(&format!(
        "; the pullback replays each stretch, last first, with @{}",
        c.replay
    ));
    if let Some(n) = c.exits {
        line.push_str(&format!(
            "; it leaves through {n} edge{} (the last stretch's replay leaves where the run did), and each replay pushes the loop's inputs back for the stretch before",
            if n == 1 { " not from its header" } else { "s" }
        ));
        if c.exits_apart {
            line.push_str(
                "; its exits' paths meet only later: each exit block's shadows serve the blocks it dominates",
            );
            if !c.exits_joined.is_empty() {
                let labels: Vec<String> = c.exits_joined.iter().map(|l| format!("#{l}")).collect();
                line.push_str(&format!(
                    ", and {} that several exit blocks jump to merge{} theirs by phis",
                    labels.join(" and "),
                    if labels.len() == 1 { "s" } else { "" }
                ));
            }
        }
    }
    if let Some(runs) = c.direct {
        line.push_str(&format!(
            "; a run of at most {runs} iteration{} is recorded as without a limit",
            if runs == 1 { "" } else { "s" }
        ));
        if !c.direct_inner.is_empty() {
            let labels: Vec<String> = c.direct_inner.iter().map(|l| format!("#{l}")).collect();
            line.push_str(&format!(
                " (with loop{} {} inside it, when each run of {} is as short as its own direct path records)",
                if labels.len() == 1 { "" } else { "s" },
                labels.join(", "),
                if labels.len() == 1 { "it" } else { "them" }
            ));
        }
    }
    line
}

/// A byte count as `64M`, `1G`, `3K` when a power of 1024 divides it, in
/// bytes otherwise.
pub fn size_text(bytes: u64) -> String {
    for (shift, unit) in [(40, 'T'), (30, 'G'), (20, 'M'), (10, 'K')] {
        if bytes != 0 && bytes.is_multiple_of(1u64 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// The position (among the primal's blocks) of the block of the forward
/// sweep `fwd` that defines each statement result; parameters have none.
pub(super) fn def_blocks(fwd: &Func, fblock: &[Block]) -> SecondaryMap<Value, Option<usize>> {
    let mut pos: SecondaryMap<Block, Option<usize>> = SecondaryMap::new();
    for (i, &b) in fblock.iter().enumerate() {
        pos.set(b, Some(i));
    }
    let mut out = SecondaryMap::new();
    for &b in &fwd.layout {
        let Some(i) = pos[b] else { continue };
        for &inst in &fwd.blocks[b].insts {
            if let Some(v) = fwd.insts[inst].result {
                out.set(v, Some(i));
            }
        }
    }
    out
}
