//! The loops of a primal as the reverse transform sees them, by block
//! position in its BBCode: which loops leave through one exit edge from
//! their header (values defined before such a loop and read inside it are
//! recorded once per run of the loop, at its exit, instead of once per
//! iteration), and which of those are *counted*: the header has one entry
//! edge from outside and one latch, and an `i64` phi that starts at a value
//! from outside and steps by a constant on the latch edge. The pullback runs
//! a counted loop backwards by counting that phi down from its last value
//! (recorded at the exit) to its first, instead of popping one recorded
//! predecessor index per iteration (docs/reverse.md, "What is recorded").
//!
//! Assumes a verified, normalised primal (no critical edges) and its shape.
//! Guarantees: a counted loop's step is a nonzero constant of magnitude at
//! most 2^16, so the phi takes a different value on every visit of the
//! header for fewer than 2^48 iterations (steps wrap like `iadd`), and the
//! first visit is the only one where it equals its start.

use irad_ir::flow::{ControlFlowGraph, DominatorTree, LoopAnalysis};
use irad_ir::{Block, Func, InstKind, Operand, Value};

/// The largest step magnitude of a counted loop.
const MAX_STEP: i64 = 1 << 16;

/// One loop that leaves through one edge, from its header.
#[derive(Clone, Debug)]
pub(super) struct RevLoop {
    /// Its header's position.
    pub header: usize,
    /// The positions that belong to it, in increasing order (a list, not
    /// a flag per position: thousands of loops in a row would take the
    /// square of the blocks).
    pub members: Vec<usize>,
    /// The position of the block its one exit edge leads to (for a loop of
    /// [`RevLoops::multi`], the first of `exits`).
    pub exit: usize,
    /// The positions of the blocks its exit edges lead to, each entered
    /// from the loop only (normalisation split the critical edges): `[exit]`
    /// for a single-exit loop.
    pub exits: Vec<usize>,
    /// When it is counted: how.
    pub counted: Option<Counted>,
}

/// A loop as found: its header, its members, its one exit (a block only
/// it enters, through one edge from its header) if it has one, and all its
/// exit edges (from, to).
type Found = (usize, Vec<usize>, Option<usize>, Vec<(usize, usize)>);

/// How a counted loop counts.
#[derive(Clone, Debug)]
pub(super) struct Counted {
    /// The position of the header's predecessor outside the loop.
    pub pre: usize,
    /// The position of its one latch.
    pub latch: usize,
    /// The header phi that counts.
    pub iv: Value,
    /// Its value on entry (from the predecessor outside).
    pub init: Operand,
    /// What the latch adds to it.
    pub step: i64,
}

/// The single-exit loops of a primal and, for each position, the loops
/// that contain it, innermost first.
#[derive(Clone, Debug, Default)]
pub(super) struct RevLoops {
    /// The loops.
    pub loops: Vec<RevLoop>,
    /// For each position, the single-exit loops containing it, innermost first.
    pub around: Vec<Vec<usize>>,
    /// For each position, whether a loop that is not single-exit contains it
    /// inside its innermost single-exit loop (then nothing is hoisted there).
    pub irregular: Vec<bool>,
    /// For each position, the header position of the innermost loop (of
    /// any kind) containing it.
    pub inner: Vec<Option<usize>>,
    /// The header positions of the loops that leave through more than one
    /// edge, or not from their header, innermost first.
    pub others: Vec<usize>,
    /// For each position, the single-exit loop it heads, if any.
    pub headed: Vec<Option<usize>>,
    /// The loops of `others` that leave through at least one edge, each
    /// to a block that only the loop enters (all of them, in a normalised
    /// primal, but a loop that never leaves), innermost first: what
    /// checkpointing needs of them (`counted` is `None`). [`RevLoops::of`]
    /// numbers them after `loops`.
    pub multi: Vec<RevLoop>,
}

impl RevLoop {
    /// Whether position `i` belongs to the loop.
    pub fn contains(&self, i: usize) -> bool {
        self.members.binary_search(&i).is_ok()
    }
}

impl RevLoops {
    /// Loop `k` among `loops` followed by `multi` (`k` below
    /// [`RevLoops::count`]).
    pub fn of(&self, k: usize) -> &RevLoop {
        match k.checked_sub(self.loops.len()) {
            None => &self.loops[k],
            Some(j) => &self.multi[j],
        }
    }

    /// How many loops [`RevLoops::of`] numbers.
    pub fn count(&self) -> usize {
        self.loops.len() + self.multi.len()
    }

    /// The loops of `src`, whose BBCode blocks have ids `ids` (by position),
    /// with `preds`/`succs` by position.
    pub fn new(
        src: &Func,
        ids: &[Block],
        preds: &[Vec<usize>],
        succs: &[smallvec::SmallVec<[usize; 2]>],
    ) -> RevLoops {
        let n = ids.len();
        let mut pos: irad_ir::entity::SecondaryMap<Block, Option<usize>> =
            irad_ir::entity::SecondaryMap::new();
        for (i, &b) in ids.iter().enumerate() {
            pos.set(b, Some(i));
        }
        let cfg = ControlFlowGraph::with_function(src);
        let dom = DominatorTree::with_cfg(&cfg);
        let la = LoopAnalysis::compute(&cfg, &dom);
        let mut out = RevLoops {
            loops: Vec::new(),
            around: vec![Vec::new(); n],
            irregular: vec![false; n],
            inner: vec![None; n],
            others: Vec::new(),
            headed: vec![None; n],
            multi: Vec::new(),
        };
        for (i, &b) in ids.iter().enumerate() {
            out.inner[i] = la.innermost(b).and_then(|l| pos[la.header(l)]);
        }
        // Every loop, innermost first (by size), with its members.
        let mut all: Vec<Found> = Vec::new();
        for lp in la.loops() {
            let Some(h) = pos[la.header(lp)] else {
                continue;
            };
            let mut members: Vec<usize> = la.blocks(lp).iter().filter_map(|&b| pos[b]).collect();
            members.sort_unstable();
            members.dedup();
            // The exit edges.
            let mut exits = Vec::new();
            for &i in &members {
                for &s in &succs[i] {
                    if members.binary_search(&s).is_err() {
                        exits.push((i, s));
                    }
                }
            }
            let exit = match exits.as_slice() {
                [(from, to)] if *from == h && preds[*to].len() == 1 => Some(*to),
                _ => None,
            };
            all.push((h, members, exit, exits));
        }
        all.sort_by_key(|(_, m, _, _)| m.len());
        for (h, members, exit, exits) in all {
            match exit {
                Some(exit) => {
                    let k = out.loops.len();
                    let counted = counted(src, ids, &pos, preds, h, &members);
                    for &i in &members {
                        out.around[i].push(k);
                    }
                    out.headed[h].get_or_insert(k);
                    out.loops.push(RevLoop {
                        header: h,
                        members,
                        exit,
                        exits: vec![exit],
                        counted,
                    });
                }
                None => {
                    out.others.push(h);
                    for &i in &members {
                        if out.around[i].is_empty() {
                            out.irregular[i] = true;
                        }
                    }
                    let mut targets: Vec<usize> = exits.iter().map(|&(_, to)| to).collect();
                    targets.sort_unstable();
                    targets.dedup();
                    if let Some(&first) = targets.first()
                        && targets.iter().all(|&t| preds[t].len() == 1)
                    {
                        out.multi.push(RevLoop {
                            header: h,
                            members,
                            exit: first,
                            exits: targets,
                            counted: None,
                        });
                    }
                }
            }
        }
        out
    }

    /// Where a value defined at position `def` (`None`: a parameter) and
    /// read at position `i` can be recorded once per run of the innermost
    /// single-exit loop around `i` that does not contain `def`: that loop's
    /// exit. `None` when `i` is in no such loop or an irregular loop is in
    /// between.
    pub fn hoist(&self, i: usize, def: Option<usize>) -> Option<usize> {
        if self.irregular[i] {
            return None;
        }
        let &k = self.around[i].first()?;
        let l = &self.loops[k];
        match def {
            Some(d) if l.contains(d) => None,
            _ => Some(l.exit),
        }
    }
}

/// The counting phi of the loop headed by position `h` with members
/// `members` (sorted), if it is counted.
fn counted(
    src: &Func,
    ids: &[Block],
    pos: &irad_ir::entity::SecondaryMap<Block, Option<usize>>,
    preds: &[Vec<usize>],
    h: usize,
    members: &[usize],
) -> Option<Counted> {
    let member = |i: usize| members.binary_search(&i).is_ok();
    let [a, b] = preds[h].as_slice() else {
        return None;
    };
    let (pre, latch) = match (member(*a), member(*b)) {
        (false, true) => (*a, *b),
        (true, false) => (*b, *a),
        _ => return None,
    };
    for &inst in &src.blocks[ids[h]].insts {
        let data = &src.insts[inst];
        let (InstKind::Phi { entries }, Some(iv)) = (&data.kind, data.result) else {
            continue;
        };
        if src.values[iv].ty != irad_ir::Type::I64 {
            continue;
        }
        let (mut init, mut next) = (None, None);
        for (blk, op) in entries {
            match pos[*blk] {
                Some(p) if p == pre => init = Some(*op),
                Some(p) if p == latch => next = Some(*op),
                _ => {}
            }
        }
        let (Some(init), Some(Operand::Value(next))) = (init, next) else {
            continue;
        };
        if let Some(step) = src.const_offset(next, iv)
            && step != 0
            && step.abs() <= MAX_STEP
        {
            return Some(Counted {
                pre,
                latch,
                iv,
                init,
                step,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reverse::bbcode::BBCode;
    use irad_ir::Const;
    use irad_ir::text::parse_module;

    /// The loops of `@f` in `text` (normalised), with the BBCode's labels.
    fn loops_of(text: &str) -> (RevLoops, Vec<u32>) {
        let mut m = parse_module(text).expect("test IR parses");
        crate::normalise(&mut m).expect("normalises");
        let f = m.by_name("f").expect("@f");
        let func = m[f].clone();
        let bb = BBCode::from_func(&func).expect("BBCode");
        let ids: Vec<Block> = bb.blocks.iter().map(|b| b.id).collect();
        let labels = ids.iter().map(|&b| func.blocks[b].label).collect();
        (RevLoops::new(&func, &ids, &bb.preds(), &bb.succs()), labels)
    }

    const COUNTED: &str = "func @f(%x: f64, %n: i64) -> f64 {
#1:
  goto #2
#2:
  %i = phi [#1 => 5, #3 => %i1] :: i64
  %s = phi [#1 => 0.0, #3 => %s1] :: f64
  %c = call gt(%i, %n) :: bool
  gotoifnot %c, #4
#3:
  %s1 = call add(%s, %x) :: f64
  %i1 = call isub(%i, 2) :: i64
  goto #2
#4:
  return %s
}
";

    #[test]
    fn a_loop_stepping_down_by_a_constant_is_counted() {
        let (l, labels) = loops_of(COUNTED);
        assert_eq!(l.loops.len(), 1);
        let lp = &l.loops[0];
        assert_eq!(labels[lp.header], 2);
        assert_eq!(labels[lp.exit], 4);
        let c = lp.counted.as_ref().expect("counted");
        assert_eq!(c.step, -2);
        assert!(matches!(c.init, Operand::Const(Const::I64(5))));
        assert_eq!((labels[c.pre], labels[c.latch]), (1, 3));
        // Everything in the loop hoists a value defined before it to the exit.
        let body = labels.iter().position(|&b| b == 3).expect("#3");
        assert_eq!(l.hoist(body, None), Some(lp.exit));
        assert_eq!(l.hoist(body, Some(body)), None);
    }

    #[test]
    fn a_step_that_is_not_a_small_constant_is_not_counted() {
        for (from, to) in [
            ("isub(%i, 2)", "imul(%i, 2)"),
            ("isub(%i, 2)", "isub(%i, %n)"),
            ("isub(%i, 2)", "iadd(%i, 65537)"),
            ("isub(%i, 2)", "iadd(%i, 0)"),
        ] {
            let (l, _) = loops_of(&COUNTED.replace(from, to));
            assert_eq!(l.loops.len(), 1, "{to}");
            assert!(l.loops[0].counted.is_none(), "{to}");
        }
        let (l, _) = loops_of(&COUNTED.replace("isub(%i, 2)", "iadd(%i, 65536)"));
        assert_eq!(l.loops[0].counted.as_ref().map(|c| c.step), Some(65536));
    }

    #[test]
    fn a_loop_with_a_second_exit_is_neither_hoisted_nor_counted() {
        let text = "func @f(%x: f64, %n: i64) -> f64 {
#1:
  goto #2
#2:
  %i = phi [#1 => 0, #4 => %i1] :: i64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #5
#3:
  %d = call gt(%x, 1.0) :: bool
  gotoifnot %d, #5
#4:
  %i1 = call iadd(%i, 1) :: i64
  goto #2
#5:
  return %x
}
";
        let (l, labels) = loops_of(text);
        assert!(l.loops.is_empty(), "{:?}", l.loops);
        let body = labels.iter().position(|&b| b == 3).expect("#3");
        assert!(l.irregular[body]);
        assert_eq!(l.hoist(body, None), None);
        // Checkpointing sees it, with both exits (normalisation split the
        // edges into #5, so each exit block is entered from the loop only).
        assert_eq!(l.count(), 1);
        let lp = l.of(0);
        assert_eq!(labels[lp.header], 2);
        assert_eq!(lp.exits.len(), 2, "{:?}", lp.exits);
        assert!(lp.counted.is_none());
        assert!(lp.exits.iter().all(|&e| !lp.contains(e)));
    }
}
