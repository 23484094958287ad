//! Tests of the control-flow module (`ir/src/flow/`): successors and
//! predecessors, immediate dominators, dominance, reverse postorder,
//! reachability and natural loops, on small CFGs written as IR text.

use irad_ir::flow::{ControlFlowGraph, DominatorTree, Loop, LoopAnalysis, graph};
use irad_ir::text::parse_module;
use irad_ir::{Block, Func, Module};

/// The module of `src`.
fn parse(src: &str) -> Module {
    parse_module(src).expect("test IR parses")
}

/// The block labelled `#label` of `func`.
fn blk(func: &Func, label: u32) -> Block {
    func.blocks
        .iter()
        .find(|(_, d)| d.label == label)
        .map(|(b, _)| b)
        .expect("label exists")
}

/// The labels of `blocks`.
fn labels(func: &Func, blocks: &[Block]) -> Vec<u32> {
    blocks.iter().map(|&b| func.blocks[b].label).collect()
}

struct Flow {
    m: Module,
    cfg: ControlFlowGraph,
    dom: DominatorTree,
    loops: LoopAnalysis,
}

impl Flow {
    fn new(body: &str) -> Flow {
        let m = parse(&format!("func @f(%c: bool, %i: i64) -> f64 {{\n{body}}}\n"));
        let func = &m[m.by_name("f").expect("@f")];
        let cfg = ControlFlowGraph::with_function(func);
        let dom = DominatorTree::with_cfg(&cfg);
        let loops = LoopAnalysis::compute(&cfg, &dom);
        Flow { m, cfg, dom, loops }
    }
    fn func(&self) -> &Func {
        &self.m[self.m.by_name("f").expect("@f")]
    }
    fn b(&self, label: u32) -> Block {
        blk(self.func(), label)
    }
    fn succs(&self, label: u32) -> Vec<u32> {
        labels(self.func(), self.cfg.succs(self.b(label)))
    }
    fn preds(&self, label: u32) -> Vec<u32> {
        labels(self.func(), self.cfg.preds(self.b(label)))
    }
    fn idom(&self, label: u32) -> Option<u32> {
        self.dom
            .idom(self.b(label))
            .map(|b| self.func().blocks[b].label)
    }
    fn dominates(&self, a: u32, b: u32) -> bool {
        self.dom.dominates(self.b(a), self.b(b))
    }
    fn rpo(&self) -> Vec<u32> {
        labels(self.func(), self.dom.reverse_postorder())
    }
    /// (header, latches, body) of every loop, in the analysis' order.
    fn loops(&self) -> Vec<(u32, Vec<u32>, Vec<u32>)> {
        self.loops
            .loops()
            .map(|l| {
                (
                    self.func().blocks[self.loops.header(l)].label,
                    labels(self.func(), self.loops.latches(l)),
                    labels(self.func(), self.loops.blocks(l)),
                )
            })
            .collect()
    }
}

#[test]
fn one_block() {
    let f = Flow::new("#1:\n  return 1.0\n");
    assert_eq!(f.succs(1), Vec::<u32>::new());
    assert_eq!(f.preds(1), Vec::<u32>::new());
    assert_eq!(f.idom(1), None);
    assert!(f.dominates(1, 1));
    assert_eq!(f.rpo(), [1]);
    assert!(f.loops.is_empty());
    assert_eq!(f.cfg.entry(), Some(f.b(1)));
}

#[test]
fn diamond() {
    let f =
        Flow::new("#1:\n  gotoifnot %c, #3\n#2:\n  goto #4\n#3:\n  goto #4\n#4:\n  return 1.0\n");
    assert_eq!(f.succs(1), [2, 3], "fall-through first");
    assert_eq!(f.preds(4), [2, 3], "layout order");
    assert_eq!(f.idom(2), Some(1));
    assert_eq!(f.idom(3), Some(1));
    assert_eq!(f.idom(4), Some(1));
    assert!(f.dominates(1, 4));
    assert!(!f.dominates(2, 4));
    assert!(!f.dominates(4, 2));
    assert_eq!(f.rpo(), [1, 3, 2, 4]);
    assert_eq!(labels(f.func(), f.dom.children(f.b(1))), [3, 2, 4]);
    assert!(f.loops.is_empty());
}

#[test]
fn gotoifnot_falls_through_to_the_next_layout_block() {
    // The layout order, not the label order, decides the fall-through.
    let f = Flow::new("#1:\n  gotoifnot %c, #2\n#3:\n  return 1.0\n#2:\n  return 2.0\n");
    assert_eq!(f.succs(1), [3, 2]);
    assert_eq!(f.cfg.next_in_layout(f.b(1)), Some(f.b(3)));
    assert_eq!(f.cfg.next_in_layout(f.b(2)), None);
    assert_eq!(f.preds(3), [1]);
    assert_eq!(f.rpo(), [1, 2, 3]);
}

#[test]
fn simple_loop() {
    let f =
        Flow::new("#1:\n  goto #2\n#2:\n  gotoifnot %c, #4\n#3:\n  goto #2\n#4:\n  return 1.0\n");
    assert_eq!(f.preds(2), [1, 3]);
    assert_eq!(f.idom(3), Some(2));
    assert_eq!(f.idom(4), Some(2));
    assert!(f.dominates(2, 3));
    assert!(!f.dominates(3, 2));
    assert_eq!(f.rpo(), [1, 2, 4, 3]);
    assert_eq!(f.loops(), [(2, vec![3], vec![2, 3])]);
    let lp = f.loops.loops().next().expect("one loop");
    assert_eq!(f.loops.loop_headed_by(f.b(2)), Some(lp));
    assert_eq!(f.loops.loop_depth(f.b(3)), 1);
    assert_eq!(f.loops.loop_depth(f.b(4)), 0);
    assert_eq!(f.loops.parent(lp), None);
}

#[test]
fn nested_loops() {
    // #2 heads the outer loop (latch #5), #3 the inner one (latch #4).
    let f = Flow::new(concat!(
        "#1:\n  goto #2\n",
        "#2:\n  gotoifnot %c, #6\n",
        "#3:\n  gotoifnot %c, #5\n",
        "#4:\n  goto #3\n",
        "#5:\n  goto #2\n",
        "#6:\n  return 1.0\n",
    ));
    assert_eq!(f.idom(5), Some(3));
    assert_eq!(f.idom(6), Some(2));
    let found = f.loops();
    assert_eq!(found.len(), 2);
    assert!(found.contains(&(2, vec![5], vec![2, 3, 4, 5])));
    assert!(found.contains(&(3, vec![4], vec![3, 4])));
    let outer = f.loops.loop_headed_by(f.b(2)).expect("outer");
    let inner = f.loops.loop_headed_by(f.b(3)).expect("inner");
    assert_eq!(f.loops.parent(inner), Some(outer));
    assert_eq!(f.loops.depth(inner), 2);
    assert_eq!(f.loops.depth(outer), 1);
    assert_eq!(f.loops.innermost(f.b(4)), Some(inner));
    assert_eq!(f.loops.innermost(f.b(5)), Some(outer));
    assert_eq!(f.loops.loop_depth(f.b(4)), 2);
    assert!(f.loops.contains(outer, f.b(4)));
    assert!(!f.loops.contains(inner, f.b(5)));
}

#[test]
fn self_loop() {
    let f = Flow::new("#1:\n  goto #2\n#2:\n  gotoifnot %c, #2\n#3:\n  return 1.0\n");
    assert_eq!(f.succs(2), [3, 2]);
    assert_eq!(f.preds(2), [1, 2], "a block is its own predecessor once");
    assert_eq!(f.idom(2), Some(1));
    assert_eq!(f.loops(), [(2, vec![2], vec![2])]);
    let cyc = graph::cyclic(f.cfg.blocks().iter().copied(), |b| {
        f.cfg.succs(b).iter().copied()
    });
    assert!(cyc.contains(f.b(2)));
    assert!(!cyc.contains(f.b(1)));
}

#[test]
fn unreachable_blocks() {
    // #3 is unreachable and jumps into the loop body #4, which it joins (it
    // reaches the latch); #5 is unreachable and dead-ends.
    let f = Flow::new(concat!(
        "#1:\n  goto #2\n",
        "#2:\n  gotoifnot %c, #6\n",
        "#4:\n  goto #2\n",
        "#3:\n  goto #4\n",
        "#5:\n  return 2.0\n",
        "#6:\n  return 1.0\n",
    ));
    assert_eq!(f.preds(4), [2, 3]);
    assert!(!f.dom.is_reachable(f.b(3)));
    assert!(!f.dom.is_reachable(f.b(5)));
    assert_eq!(f.idom(3), None);
    assert_eq!(f.idom(4), Some(2));
    assert!(!f.dominates(1, 3));
    assert!(f.dominates(3, 3));
    assert_eq!(f.rpo(), [1, 2, 6, 4]);
    let reach = f.cfg.reachable();
    assert_eq!(reach.len(), 4);
    assert!(!reach.contains(f.b(5)));
    assert_eq!(f.loops(), [(2, vec![4], vec![2, 4, 3])]);
}

#[test]
fn irreducible_cycle_is_no_natural_loop() {
    // #2 and #3 form a cycle entered at both: neither dominates the other.
    let f = Flow::new(concat!(
        "#1:\n  gotoifnot %c, #3\n",
        "#2:\n  gotoifnot %c, #4\n",
        "#3:\n  goto #2\n",
        "#4:\n  gotoifnot %c, #3\n",
        "#5:\n  return 1.0\n",
    ));
    assert_eq!(f.idom(2), Some(1));
    assert_eq!(f.idom(3), Some(1));
    assert_eq!(f.idom(4), Some(2));
    assert!(!f.dominates(2, 3));
    assert!(!f.dominates(3, 2));
    assert!(f.loops.is_empty());
    let cyc = graph::cyclic(f.cfg.blocks().iter().copied(), |b| {
        f.cfg.succs(b).iter().copied()
    });
    let on: Vec<u32> = labels(f.func(), &cyc.iter().collect::<Vec<_>>());
    assert_eq!(on.len(), 3);
    assert!(!cyc.contains(f.b(1)) && !cyc.contains(f.b(5)));
}

#[test]
fn switch_targets_in_index_order_and_malformed_edges_ignored() {
    let mut m = parse(concat!(
        "func @f(%i: i64) -> f64 {\n",
        "#1:\n  switch %i, [#3, #2, #3]\n",
        "#2:\n  return 1.0\n",
        "#3:\n  goto #9\n",
        "#9:\n  return 2.0\n",
        "}\n",
    ));
    let id = m.by_name("f").expect("@f");
    // #9 leaves the layout, and the layout lists #2 twice.
    let b9 = blk(&m[id], 9);
    let b2 = blk(&m[id], 2);
    m[id].layout.retain(|&b| b != b9);
    m[id].layout.push(b2);
    let func = &m[id];
    let cfg = ControlFlowGraph::with_function(func);
    // The repeated target is one edge; a target outside the layout none.
    assert_eq!(labels(func, cfg.succs(blk(func, 1))), [3, 2]);
    assert!(cfg.succs(blk(func, 3)).is_empty());
    assert_eq!(labels(func, cfg.blocks()), [1, 2, 3]);
    assert_eq!(labels(func, cfg.preds(blk(func, 2))), [1]);
}

#[test]
fn reaching_walks_predecessors() {
    let f = Flow::new(
        "#1:\n  gotoifnot %c, #3\n#2:\n  return 2.0\n#3:\n  goto #4\n#4:\n  return 1.0\n",
    );
    let to4 = graph::reachable(f.b(4), |b| f.cfg.preds(b).iter().copied());
    assert!(to4.contains(f.b(1)) && to4.contains(f.b(3)));
    assert!(!to4.contains(f.b(2)));
}

#[test]
fn entity_set_is_a_set_of_handles_in_order() {
    use irad_ir::entity::{EntityRef, EntitySet};
    let mut set: EntitySet<Block> = EntitySet::new();
    assert!(set.is_empty());
    for i in [130, 3, 64, 3, 0] {
        set.insert(Block::new(i));
    }
    assert_eq!(set.len(), 4);
    let got: Vec<usize> = set.iter().map(|b| b.index()).collect();
    assert_eq!(got, [0, 3, 64, 130]);
    assert!(set.remove(Block::new(64)));
    assert!(!set.remove(Block::new(64)));
    assert!(!set.remove(Block::new(100_000)));
    assert!(!set.contains(Block::new(64)));
    assert!(set.contains(Block::new(130)));
    assert_eq!(set.len(), 3);
    set.clear();
    assert!(set.is_empty() && !set.contains(Block::new(0)));
}

/// A function of `n` blocks with terminators drawn from `next` (a small
/// deterministic generator), so that every shape turns up: loops,
/// irreducible cycles, unreachable blocks, switches.
fn random_func(n: usize, next: &mut impl FnMut(usize) -> usize) -> Func {
    use irad_ir::{Operand, Terminator, Type};
    let mut func = Func::new("f", vec![(None, Type::Bool), (None, Type::I64)], Type::F64);
    let blocks: Vec<Block> = (0..n).map(|i| func.add_block(i as u32 + 1)).collect();
    for (i, &b) in blocks.iter().enumerate() {
        // Never to the entry, as in verified code.
        let target = |next: &mut dyn FnMut(usize) -> usize| blocks[1 + next(n - 1)];
        let term = match next(4) {
            _ if n == 1 => Terminator::Return(Operand::from(1.0)),
            0 => Terminator::Return(Operand::from(1.0)),
            1 => Terminator::Goto(target(next)),
            2 if i + 1 < n => Terminator::GotoIfNot {
                cond: Operand::Value(func.params[0]),
                target: target(next),
            },
            _ => Terminator::Switch {
                index: Operand::Value(func.params[1]),
                targets: (0..1 + next(3)).map(|_| target(next)).collect(),
            },
        };
        func.blocks[b].term = Some(term);
    }
    func
}

#[test]
fn dominators_agree_with_the_definition_on_random_cfgs() {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |bound: usize| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((state >> 33) as usize) % bound.max(1)
    };
    for round in 0..300 {
        let n = 1 + round % 9;
        let func = random_func(n, &mut next);
        let cfg = ControlFlowGraph::with_function(&func);
        let dom = DominatorTree::with_cfg(&cfg);
        let loops = LoopAnalysis::compute(&cfg, &dom);
        let entry = cfg.entry().expect("entry");
        let reach = cfg.reachable();
        // Predecessors mirror successors, in layout order.
        for &b in cfg.blocks() {
            let want: Vec<Block> = cfg
                .blocks()
                .iter()
                .copied()
                .filter(|&p| cfg.succs(p).contains(&b))
                .collect();
            assert_eq!(cfg.preds(b), want.as_slice());
        }
        for &a in cfg.blocks() {
            assert_eq!(dom.is_reachable(a), reach.contains(a));
            // The blocks reachable from the entry without passing through `a`.
            let avoid = graph::reachable(entry, |x| {
                cfg.succs(x)
                    .iter()
                    .copied()
                    .filter(move |&s| s != a && x != a)
                    .collect::<Vec<_>>()
            });
            for &b in cfg.blocks() {
                let want = a == b
                    || (reach.contains(a) && reach.contains(b) && a != entry && !avoid.contains(b))
                    || (a == entry && reach.contains(b));
                assert_eq!(dom.dominates(a, b), want, "round {round}: {a:?} dom {b:?}");
            }
            // The idom dominates strictly and is dominated by every other
            // strict dominator.
            if let Some(d) = dom.idom(a) {
                assert!(dom.dominates(d, a) && d != a);
                for &c in cfg.blocks() {
                    if c != a && dom.dominates(c, a) {
                        assert!(dom.dominates(c, d));
                    }
                }
            } else {
                assert!(a == entry || !reach.contains(a));
            }
        }
        // Reverse postorder: every block after its idom.
        for &b in dom.reverse_postorder() {
            if let Some(d) = dom.idom(b) {
                assert!(dom.rpo_index(d) < dom.rpo_index(b));
            }
        }
        // Every loop's header dominates its reachable blocks, and a latch
        // is a predecessor of the header.
        for lp in loops.loops() {
            let h = loops.header(lp);
            for &b in loops.blocks(lp) {
                assert!(!reach.contains(b) || dom.dominates(h, b));
            }
            for &l in loops.latches(lp) {
                assert!(cfg.preds(h).contains(&l) && dom.dominates(h, l));
            }
        }
        // A block's innermost loop is the smallest holding it.
        for &b in cfg.blocks() {
            let smallest = loops
                .loops()
                .filter(|&l| loops.contains(l, b))
                .min_by_key(|&l| loops.blocks(l).len());
            let got = loops.innermost(b);
            assert_eq!(
                got.map(|l| loops.blocks(l).len()),
                smallest.map(|l| loops.blocks(l).len())
            );
            assert!(got.is_none_or(|l| loops.contains(l, b)));
        }
        // A loop's parent is the smallest other loop holding its header
        // (the first such in the order found, among equals), its depth one
        // more than its parent's; its blocks are the body's, in layout order.
        for lp in loops.loops() {
            let h = loops.header(lp);
            let rank = |o: Loop| (loops.blocks(o).len(), o);
            let smallest = loops
                .loops()
                .filter(|&o| rank(o) > rank(lp) && loops.contains(o, h))
                .min_by_key(|&o| rank(o));
            assert_eq!(loops.parent(lp), smallest, "round {round}");
            let want = loops.parent(lp).map_or(1, |p| loops.depth(p) + 1);
            assert_eq!(loops.depth(lp), want);
            let body: Vec<Block> = cfg
                .blocks()
                .iter()
                .copied()
                .filter(|&b| loops.contains(lp, b))
                .collect();
            assert_eq!(loops.blocks(lp), body.as_slice());
        }
    }
}
