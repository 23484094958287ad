//! BBCode (`irad_passes::reverse::bbcode`): `into_func(from_func(f))` is
//! structurally equal to a normalised `f` (a loop, a branch joining at a phi,
//! a switch); `preds` and `succs` on small CFGs; and after `insert_block`,
//! `split_block` and `move_block` the function put back into its module
//! verifies and the interpreter computes the same values as before. Also the
//! text form (`br %c, #then, #else`).

use irad_ir::eq::structural_eq;
use irad_ir::interp::{RunOptions, Val, run};
use irad_ir::text::parse_module;
use irad_ir::verify::{render_errors, verify_module};
use irad_ir::{Block, FuncId, InstKind, Module, Operand};
use irad_passes::reverse::bbcode::{BBCode, BTerm};

/// A while loop with two loop-carried phis: `x * n * (n - 1) / 2`.
const LOOP: &str = "func @loop(%x: f64, %n: i64) -> f64 {
#1:
  goto #2
#2:
  %i = phi [#1 => 0, #3 => %i1] :: i64
  %s = phi [#1 => 0.0, #3 => %s1] :: f64
  %c = call lt(%i, %n) :: bool
  gotoifnot %c, #4
#3:
  %fi = call sitofp(%i) :: f64
  %t = call mul(%fi, %x) :: f64
  %s1 = call add(%s, %t) :: f64
  %i1 = call iadd(%i, 1) :: i64
  goto #2
#4:
  return %s
}
";

/// A two-way branch joining at a phi: `-x` below zero, else `3x`.
const BRANCH: &str = "func @branch(%x: f64) -> f64 {
#1:
  %neg = call lt(%x, 0.0) :: bool
  gotoifnot %neg, #3
#2:
  %a = call neg(%x) :: f64
  goto #4
#3:
  %b = call mul(%x, 3.0) :: f64
  goto #4
#4:
  %r = phi [#2 => %a, #3 => %b] :: f64
  return %r
}
";

/// A three-way switch joining at a phi (tests/filetests/ad/switch.ir).
const SWITCH: &str = "func @pick(%i: i64, %x: f64) -> f64 {
#1:
  switch %i, [#4, #2, #3]
#2:
  %a = call mul(%x, 2.0) :: f64
  goto #4
#3:
  %b = call neg(%x) :: f64
  goto #4
#4:
  %r = phi [#1 => %x, #2 => %a, #3 => %b] :: f64
  return %r
}
";

/// Not normalised: the branch's fall-through block has a phi (the edge
/// `#1 -> #2` is critical), so a jump block placed on it must take over the
/// phi's entry.
const FALL_THROUGH_PHI: &str = "func @ft(%x: f64) -> f64 {
#1:
  %big = call gt(%x, 1.0) :: bool
  gotoifnot %big, #3
#2:
  %r = phi [#1 => %x, #3 => %y] :: f64
  return %r
#3:
  %y = call mul(%x, 10.0) :: f64
  goto #2
}
";

/// Not normalised: a loop of one block that branches back to itself.
const SELF_LOOP: &str = "func @self(%n: i64) -> i64 {
#1:
  goto #2
#2:
  %i = phi [#1 => 0, #2 => %i1] :: i64
  %i1 = call iadd(%i, 3) :: i64
  %done = call ge(%i1, %n) :: bool
  gotoifnot %done, #2
#3:
  return %i1
}
";

fn parsed(text: &str) -> Module {
    let m = parse_module(text).expect("test IR parses");
    if let Err(errors) = verify_module(&m) {
        panic!("test IR does not verify:\n{}", render_errors(&m, &errors));
    }
    m
}

fn normalised(text: &str) -> Module {
    let mut m = parsed(text);
    irad_passes::normalise(&mut m).expect("normalises");
    m
}

fn func_id(m: &Module, name: &str) -> FuncId {
    m.by_name(name).expect("function exists")
}

fn bbcode(m: &Module, name: &str) -> BBCode {
    BBCode::from_func(&m[func_id(m, name)]).expect("has a BBCode form")
}

/// `m` with function `name` replaced by `bb.into_func()`; asserts that it
/// verifies.
fn put_back(m: &Module, name: &str, bb: BBCode) -> Module {
    let mut out = m.clone();
    out[func_id(m, name)] = bb.into_func();
    if let Err(errors) = verify_module(&out) {
        panic!("does not verify:\n{}", render_errors(&out, &errors));
    }
    out
}

/// Asserts that `name` computes the same in `before` and `after` on each of
/// `inputs`, and that it runs without error.
fn same_values(before: &Module, after: &Module, name: &str, inputs: &[Vec<Val>]) {
    let opts = RunOptions::default();
    for args in inputs {
        let a = run(before, func_id(before, name), args, &opts).expect("runs before");
        let b = run(after, func_id(after, name), args, &opts).expect("runs after");
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "@{name}{args:?}");
    }
}

/// The label of each block of `bb`, in order.
fn labels(bb: &BBCode) -> Vec<u32> {
    bb.blocks
        .iter()
        .map(|b| bb.func.blocks[b.id].label)
        .collect()
}

/// Per block, the labels of the blocks at `positions`.
fn by_label<I: IntoIterator<Item = usize>>(
    bb: &BBCode,
    lists: impl IntoIterator<Item = I>,
) -> Vec<Vec<u32>> {
    let labels = labels(bb);
    lists
        .into_iter()
        .map(|l| l.into_iter().map(|i| labels[i]).collect())
        .collect()
}

/// The position in `bb` of the block labelled `label`.
fn pos(bb: &BBCode, label: u32) -> usize {
    labels(bb)
        .iter()
        .position(|&l| l == label)
        .expect("label exists")
}

/// The block labelled `label`.
fn block(bb: &BBCode, label: u32) -> Block {
    bb.blocks[pos(bb, label)].id
}

/// The predecessors named by the phis of the block at `at`, as labels.
fn phi_preds(bb: &BBCode, at: usize) -> Vec<Vec<u32>> {
    bb.blocks[at]
        .stmts
        .iter()
        .filter_map(|&i| match &bb.func.insts[i].kind {
            InstKind::Phi { entries } => Some(
                entries
                    .iter()
                    .map(|(b, _)| bb.func.blocks[*b].label)
                    .collect(),
            ),
            _ => None,
        })
        .collect()
}

fn f(x: f64) -> Val {
    Val::F64(x)
}

fn i(n: i64) -> Val {
    Val::I64(n)
}

fn loop_inputs() -> Vec<Vec<Val>> {
    [(2.0, 4), (-1.5, 0), (0.25, 1), (3.0, 7)]
        .iter()
        .map(|&(x, n)| vec![f(x), i(n)])
        .collect()
}

fn branch_inputs() -> Vec<Vec<Val>> {
    [-2.0, 0.0, 0.5, 4.0].iter().map(|&x| vec![f(x)]).collect()
}

#[test]
fn round_trip_is_structurally_equal() {
    for (text, name) in [(LOOP, "loop"), (BRANCH, "branch"), (SWITCH, "pick")] {
        let m = normalised(text);
        let bb = bbcode(&m, name);
        let func = &m[func_id(&m, name)];
        assert_eq!(bb.blocks.len(), func.layout.len(), "@{name}");
        // Every gotoifnot became a br to the next block and its target.
        for (k, b) in bb.blocks.iter().enumerate() {
            if let BTerm::Br { then, else_, .. } = &b.term {
                assert_eq!(Some(then), bb.blocks.get(k + 1).map(|n| &n.id), "@{name}");
                assert_ne!(then, else_, "@{name}");
            }
        }
        let back = put_back(&m, name, bb);
        assert_eq!(structural_eq(&m, &back), Ok(()), "@{name}");
        assert_eq!(back[func_id(&back, name)].layout, func.layout, "@{name}");
    }
    // The kinds of terminators the programs were chosen for.
    let kinds = |text, name| {
        let bb = bbcode(&normalised(text), name);
        let br = bb
            .blocks
            .iter()
            .filter(|b| matches!(b.term, BTerm::Br { .. }));
        let switch = bb
            .blocks
            .iter()
            .filter(|b| matches!(b.term, BTerm::Switch { .. }));
        (br.count(), switch.count())
    };
    assert_eq!(kinds(LOOP, "loop"), (1, 0));
    assert_eq!(kinds(BRANCH, "branch"), (1, 0));
    assert_eq!(kinds(SWITCH, "pick").1, 1);
}

#[test]
fn round_trip_of_a_corpus_program_with_several_functions() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/filetests/programs/collatz.ir"
    ))
    .expect("corpus file");
    let m = normalised(&text);
    let mut back = m.clone();
    for id in m.func_ids() {
        let bb = BBCode::from_func(&m[id]).expect("has a BBCode form");
        back[id] = bb.into_func();
    }
    assert_eq!(structural_eq(&m, &back), Ok(()));
    same_values(&m, &back, "longest", &[vec![i(30)], vec![i(1)]]);
}

#[test]
fn preds_and_succs_of_a_loop_with_a_branch() {
    // #1 -> #2; #2 -> #3 | #6; #3 -> #7 | #4; #7, #4 -> #5; #5 -> #2.
    let m = parsed(
        "func @g(%x: f64, %n: i64) -> f64 {
#1:
  goto #2
#2:
  %i = phi [#1 => 0, #5 => %i1] :: i64
  %more = call lt(%i, %n) :: bool
  gotoifnot %more, #6
#3:
  %pos = call gt(%x, 0.0) :: bool
  gotoifnot %pos, #4
#7:
  goto #5
#4:
  goto #5
#5:
  %i1 = call iadd(%i, 1) :: i64
  goto #2
#6:
  return %x
}
",
    );
    let bb = bbcode(&m, "g");
    assert_eq!(labels(&bb), [1, 2, 3, 7, 4, 5, 6]);
    let succs: Vec<Vec<u32>> = by_label(&bb, bb.succs());
    assert_eq!(
        succs,
        [
            vec![2],
            vec![3, 6],
            vec![7, 4],
            vec![5],
            vec![5],
            vec![2],
            vec![]
        ]
    );
    assert_eq!(
        by_label(&bb, bb.preds()),
        [
            vec![],
            vec![1, 5],
            vec![2],
            vec![3],
            vec![3],
            vec![7, 4],
            vec![2]
        ]
    );
    // The index agrees with the order.
    let index = bb.index();
    for (k, b) in bb.blocks.iter().enumerate() {
        assert_eq!(index[b.id], Some(k));
    }
}

#[test]
fn preds_and_succs_of_a_switch() {
    let m = parsed(SWITCH);
    let bb = bbcode(&m, "pick");
    assert_eq!(labels(&bb), [1, 2, 3, 4]);
    // Successors in terminator order, predecessors in block order.
    assert_eq!(
        by_label(&bb, bb.succs()),
        [vec![4, 2, 3], vec![4], vec![4], vec![]]
    );
    assert_eq!(
        by_label(&bb, bb.preds()),
        [vec![], vec![1], vec![1], vec![1, 2, 3]]
    );
}

#[test]
fn preds_list_a_block_once_and_skip_unknown_targets() {
    let m = parsed(BRANCH);
    let mut bb = bbcode(&m, "branch");
    let (b2, b4) = (block(&bb, 2), block(&bb, 4));
    // A branch with both targets the same block (not valid IR, but BBCode
    // does not care) is one predecessor edge.
    bb.blocks[0].term = BTerm::Br {
        cond: Operand::Const(irad_ir::Const::Bool(true)),
        then: b4,
        else_: b4,
    };
    // A block that is not in the BBCode is ignored.
    let outside = bb.func.add_block(99);
    bb.blocks[1].term = BTerm::Switch {
        index: Operand::Const(irad_ir::Const::I64(0)),
        targets: [outside, b4, b2].into_iter().collect(),
    };
    assert_eq!(
        by_label(&bb, bb.preds()),
        [vec![], vec![2], vec![], vec![1, 2, 3]]
    );
    assert_eq!(
        by_label(&bb, bb.succs()),
        [vec![4, 4], vec![4, 2], vec![4], vec![]]
    );
}

#[test]
fn insert_block_on_an_edge() {
    let m = normalised(LOOP);
    let mut bb = bbcode(&m, "loop");
    let before = labels(&bb);
    let header = pos(&bb, 2);
    let BTerm::Br { then: body, .. } = bb.blocks[header].term.clone() else {
        panic!("the loop header ends in a br: {:?}", bb.blocks[header].term);
    };
    // A new block between the header and the body, which has no phis.
    let new = bb.insert_block(header + 1, BTerm::Goto(body));
    if let BTerm::Br { then, .. } = &mut bb.blocks[header].term {
        *then = new;
    }
    let label = bb.func.blocks[new].label;
    assert!(!before.contains(&label), "label #{label} is taken");
    assert_eq!(bb.blocks.len(), before.len() + 1);
    assert_eq!(bb.blocks[header + 1].id, new);
    assert!(bb.blocks[header + 1].stmts.is_empty());
    assert_eq!(bb.preds()[pos(&bb, label)], [header]);
    assert_eq!(bb.succs()[pos(&bb, label)].as_slice(), [header + 2]);
    let back = put_back(&m, "loop", bb);
    // The new block is the fall-through: no jump block was needed.
    assert_eq!(back[func_id(&back, "loop")].layout.len(), before.len() + 1);
    same_values(&m, &back, "loop", &loop_inputs());
}

#[test]
fn insert_block_past_the_end_appends() {
    let m = normalised(BRANCH);
    let mut bb = bbcode(&m, "branch");
    let n = bb.blocks.len();
    // The else edge of the entry's branch goes through a block at the end;
    // the else target has no phis.
    let BTerm::Br { else_, .. } = bb.blocks[0].term.clone() else {
        panic!("the entry ends in a br");
    };
    let new = bb.insert_block(n + 10, BTerm::Goto(else_));
    if let BTerm::Br { else_, .. } = &mut bb.blocks[0].term {
        *else_ = new;
    }
    assert_eq!(bb.blocks.last().map(|b| b.id), Some(new));
    let back = put_back(&m, "branch", bb);
    same_values(&m, &back, "branch", &branch_inputs());
}

#[test]
fn split_block_moves_statements_and_terminator_and_renames_phis() {
    let m = normalised(LOOP);
    let mut bb = bbcode(&m, "loop");
    let body = pos(&bb, 3);
    let header = pos(&bb, 2);
    let stmts = bb.blocks[body].stmts.clone();
    let term = bb.blocks[body].term.clone();
    assert_eq!(stmts.len(), 4);
    assert_eq!(phi_preds(&bb, header), [vec![1, 3], vec![1, 3]]);

    let new = bb.split_block(body, 2).expect("splits");
    assert_eq!(bb.blocks[body].stmts, stmts[..2]);
    assert_eq!(bb.blocks[body].term, BTerm::Goto(new));
    assert_eq!(bb.blocks[body + 1].id, new);
    assert_eq!(bb.blocks[body + 1].stmts, stmts[2..]);
    assert_eq!(bb.blocks[body + 1].term, term);
    // The header's phis now name the new block for the back edge.
    let label = bb.func.blocks[new].label;
    assert_eq!(phi_preds(&bb, header), [vec![1, label], vec![1, label]]);
    assert_eq!(bb.preds()[header], [0, body + 1]);

    let back = put_back(&m, "loop", bb);
    same_values(&m, &back, "loop", &loop_inputs());
}

#[test]
fn split_block_at_the_end_moves_only_the_terminator() {
    let m = normalised(BRANCH);
    let mut bb = bbcode(&m, "branch");
    let n = bb.blocks[0].stmts.len();
    let term = bb.blocks[0].term.clone();
    let new = bb.split_block(0, n).expect("splits");
    assert_eq!(bb.blocks[0].stmts.len(), n);
    assert!(bb.blocks[1].stmts.is_empty());
    assert_eq!(bb.blocks[1].id, new);
    assert_eq!(bb.blocks[1].term, term);
    assert_eq!(bb.preds()[2], [1]);
    // The branch moved with its fall-through still next: no jump block.
    let back = put_back(&m, "branch", bb);
    assert_eq!(
        back[func_id(&back, "branch")].layout.len(),
        m[func_id(&m, "branch")].layout.len() + 1
    );
    same_values(&m, &back, "branch", &branch_inputs());
}

#[test]
fn split_block_of_a_self_loop() {
    let m = parsed(SELF_LOOP);
    let mut bb = bbcode(&m, "self");
    let at = pos(&bb, 2);
    // After the phi: the back edge now leaves the new block.
    let new = bb.split_block(at, 1).expect("splits");
    let label = bb.func.blocks[new].label;
    assert_eq!(phi_preds(&bb, at), [vec![1, label]]);
    assert_eq!(
        by_label(&bb, bb.succs()),
        [vec![2], vec![label], vec![3, 2], vec![]]
    );
    let back = put_back(&m, "self", bb);
    let inputs: Vec<Vec<Val>> = [0, 1, 3, 10, 11].iter().map(|&n| vec![i(n)]).collect();
    same_values(&m, &back, "self", &inputs);
}

#[test]
fn split_block_refuses_among_phis_and_out_of_range() {
    let m = normalised(LOOP);
    let mut bb = bbcode(&m, "loop");
    let header = pos(&bb, 2);
    let n = bb.blocks.len();
    let stmts = bb.blocks[header].stmts.len();
    for k in [0, 1] {
        let e = bb.split_block(header, k).expect_err("splits among phis");
        assert!(e.0.contains("phi"), "{e}");
    }
    assert!(bb.split_block(header, stmts + 1).is_err());
    assert!(bb.split_block(n, 0).is_err());
    // Nothing changed.
    assert_eq!(bb.blocks.len(), n);
    assert_eq!(bb.blocks[header].stmts.len(), stmts);
    // Right after the phis is allowed.
    bb.split_block(header, 2).expect("splits after the phis");
    let back = put_back(&m, "loop", bb);
    same_values(&m, &back, "loop", &loop_inputs());
}

#[test]
fn move_block_reorders_and_into_func_adds_jumps() {
    let m = normalised(BRANCH);
    let func = &m[func_id(&m, "branch")];
    let mut bb = bbcode(&m, "branch");
    let order = labels(&bb);
    // Move the entry branch's fall-through block to the end.
    let BTerm::Br { then, .. } = bb.blocks[0].term.clone() else {
        panic!("the entry ends in a br");
    };
    let from = bb.index()[then].expect("then is a block of the bbcode");
    assert_eq!(from, 1);
    bb.move_block(from, bb.blocks.len());
    let moved = labels(&bb);
    assert_eq!(moved.last(), Some(&order[1]));
    assert_eq!(moved.len(), order.len());
    // Successors follow the blocks, not the positions.
    assert_eq!(bb.succs()[0].as_slice(), [order.len() - 1, 1]);
    let back = put_back(&m, "branch", bb);
    let out = &back[func_id(&back, "branch")];
    // One jump block after the entry takes the fall-through.
    assert_eq!(out.layout.len(), func.layout.len() + 1);
    let jump = out.layout[1];
    assert!(!order.contains(&out.blocks[jump].label));
    assert!(matches!(
        out.blocks[jump].term,
        Some(irad_ir::Terminator::Goto(t)) if t == then
    ));
    assert!(structural_eq(&m, &back).is_err());
    same_values(&m, &back, "branch", &branch_inputs());
}

#[test]
fn move_block_of_a_fall_through_with_a_phi() {
    let m = parsed(FALL_THROUGH_PHI);
    let mut bb = bbcode(&m, "ft");
    assert_eq!(labels(&bb), [1, 2, 3]);
    bb.move_block(1, 2);
    assert_eq!(labels(&bb), [1, 3, 2]);
    let back = put_back(&m, "ft", bb);
    let out = &back[func_id(&back, "ft")];
    assert_eq!(out.layout.len(), 4);
    // The phi's entry from the entry block now names the jump block.
    let jump = out.blocks[out.layout[1]].label;
    let phi = out.blocks[out.layout[3]].insts[0];
    let InstKind::Phi { entries } = &out.insts[phi].kind else {
        panic!("#2 starts with a phi");
    };
    let preds: Vec<u32> = entries.iter().map(|(b, _)| out.blocks[*b].label).collect();
    assert_eq!(preds, [jump, 3]);
    let inputs: Vec<Vec<Val>> = [0.5, 1.0, 2.0].iter().map(|&x| vec![f(x)]).collect();
    same_values(&m, &back, "ft", &inputs);
}

#[test]
fn move_block_back_and_out_of_range() {
    let m = normalised(SWITCH);
    let mut bb = bbcode(&m, "pick");
    let order = labels(&bb);
    let last = order.len() - 1;
    bb.move_block(last, 1);
    assert_ne!(labels(&bb), order);
    bb.move_block(1, last);
    assert_eq!(labels(&bb), order);
    // A position past the end moves nothing.
    bb.move_block(order.len(), 0);
    assert_eq!(labels(&bb), order);
    let back = put_back(&m, "pick", bb);
    assert_eq!(structural_eq(&m, &back), Ok(()));

    // Switch targets are explicit: any order of the non-entry blocks works.
    let mut bb = bbcode(&m, "pick");
    bb.move_block(1, last);
    bb.move_block(1, last);
    let back = put_back(&m, "pick", bb);
    let inputs: Vec<Vec<Val>> = (0..3).map(|k| vec![i(k), f(1.5)]).collect();
    same_values(&m, &back, "pick", &inputs);
}

#[test]
fn print_shows_both_targets_of_a_branch() {
    let m = parsed(BRANCH);
    let bb = bbcode(&m, "branch");
    let text = bb.print(&m, func_id(&m, "branch"));
    assert!(
        text.starts_with("bbcode @branch(%x: f64) -> f64 {\n"),
        "{text}"
    );
    assert!(text.contains("\n  br %neg, #2, #3\n"), "{text}");
    assert!(!text.contains("gotoifnot"), "{text}");
    assert!(
        text.contains("\n  %r = phi [#2 => %a, #3 => %b] :: f64\n"),
        "{text}"
    );

    // After a move, the branch still names both targets; the IR would need a
    // jump block but the BBCode does not.
    let mut moved = bb.clone();
    moved.move_block(1, 3);
    let text = moved.print(&m, func_id(&m, "branch"));
    assert!(text.contains("\n  br %neg, #2, #3\n#3:\n"), "{text}");
    // Switches print as in the IR.
    let m = parsed(SWITCH);
    let text = bbcode(&m, "pick").print(&m, func_id(&m, "pick"));
    assert!(text.contains("\n  switch %i, [#4, #2, #3]\n"), "{text}");
}
