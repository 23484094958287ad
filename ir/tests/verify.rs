//! Tests of the verifier: one test per invariant, each asserting the exact
//! message and location; valid functions that must verify clean; a size test;
//! and a property test that mutated functions never make the verifier panic.
//!
//! IR is made with the builder and, for invalid IR, by editing the public
//! fields directly (the text parser is written elsewhere).

use irad_ir::func::Args;
use irad_ir::verify::{Place, VerifyError, verify_func, verify_module};
use irad_ir::{
    Block, Const, FuncBuilder, FuncId, FuncRef, Inst, InstKind, Module, Operand, Pos, Prim, Scalar,
    Terminator, Type, Value, ValueDef,
};
use proptest::prelude::*;
use smallvec::smallvec;

type Got = (String, Option<u32>, Option<u32>);

/// The errors of `m` as (message, block label, statement number).
fn errors(m: &Module) -> Vec<Got> {
    match verify_module(m) {
        Ok(()) => Vec::new(),
        Err(errs) => errs
            .iter()
            .map(|e| (e.msg.clone(), e.loc.block, e.loc.stmt))
            .collect(),
    }
}

fn at(msg: &str, block: u32, stmt: u32) -> Got {
    (msg.to_string(), Some(block), Some(stmt))
}

fn at_block(msg: &str, block: u32) -> Got {
    (msg.to_string(), Some(block), None)
}

fn at_func(msg: &str) -> Got {
    (msg.to_string(), None, None)
}

/// Handles of the `abs_sin` function of SYNTAX.md §1.
struct AbsSin {
    m: Module,
    id: FuncId,
    b1: Block,
    b2: Block,
    b3: Block,
    /// `%1 = sin(%x)`, `%2 = lt(%1, 0.0)`, `%3 = neg(%1)`, `%4 = phi`.
    s: Value,
    c: Value,
    n: Value,
    p: Value,
}

/// ```text
/// func @abs_sin(%x: f64) -> f64 {
/// #1:
///   %1 = call sin(%x) :: f64
///   %2 = call lt(%1, 0.0) :: bool
///   gotoifnot %2, #3
/// #2:
///   %3 = call neg(%1) :: f64
///   goto #3
/// #3:
///   %4 = phi [#1 => %1, #2 => %3] :: f64
///   return %4
/// }
/// ```
fn abs_sin() -> AbsSin {
    let mut m = Module::new();
    let id = m
        .declare_func("abs_sin", vec![(Some("x".into()), Type::F64)], Type::F64)
        .unwrap();
    let mut b = FuncBuilder::new(&mut m, id).unwrap();
    let b1 = b.create_block_labeled(1).unwrap();
    let b2 = b.create_block_labeled(2).unwrap();
    let b3 = b.create_block_labeled(3).unwrap();
    b.switch_to_block(b1).unwrap();
    let x = b.param(0).unwrap();
    let s = b.prim(Prim::Sin, &[x.into()]).unwrap().unwrap();
    let c = b.prim(Prim::Lt, &[s.into(), 0.0.into()]).unwrap().unwrap();
    b.gotoifnot(c.into(), b3).unwrap();
    b.switch_to_block(b2).unwrap();
    let n = b.prim(Prim::Neg, &[s.into()]).unwrap().unwrap();
    b.goto(b3).unwrap();
    b.switch_to_block(b3).unwrap();
    let p = b.phi(Type::F64, &[(b1, s.into()), (b2, n.into())]).unwrap();
    b.ret(p.into()).unwrap();
    AbsSin {
        m,
        id,
        b1,
        b2,
        b3,
        s,
        c,
        n,
        p,
    }
}

fn inst_of(m: &Module, id: FuncId, v: Value) -> Inst {
    match m[id].values[v].def {
        ValueDef::Inst(inst) => inst,
        ValueDef::Param(_) => panic!("test helper: {v:?} is a parameter"),
    }
}

fn phi_entries(
    m: &mut Module,
    id: FuncId,
    v: Value,
) -> &mut smallvec::SmallVec<[(Block, Operand); 2]> {
    let inst = inst_of(m, id, v);
    match &mut m[id].insts[inst].kind {
        InstKind::Phi { entries } => entries,
        _ => panic!("test helper: not a phi"),
    }
}

fn args_of(m: &mut Module, id: FuncId, v: Value) -> &mut Args {
    let inst = inst_of(m, id, v);
    match &mut m[id].insts[inst].kind {
        InstKind::Prim { args, .. }
        | InstKind::Invoke { args, .. }
        | InstKind::CallValue { args, .. } => args,
        InstKind::Phi { .. } => panic!("test helper: a phi"),
    }
}

// ---- valid functions ----------------------------------------------------

#[test]
fn abs_sin_verifies() {
    let t = abs_sin();
    assert_eq!(errors(&t.m), vec![]);
    assert_eq!(verify_func(&t.m, t.id), Ok(()));
}

/// ```text
/// func @g(%n: i64, %x: f64, %h: fn(f64) -> f64) -> f64 {
/// #1:  %f = select(true, @sin, @cos); goto #2
/// #5:  %i2 = iadd(%i, 1); %r = invoke @g(0, %a, %h); %acc2 = add(%a, %r); goto #2
/// #9:  return %acc
/// #4:  %j = phi [#3 => 0, #6 => %j2]; %a = phi [#3 => %acc, #6 => %a2]
///      %cj = lt(%j, %i); gotoifnot %cj, #5
/// #6:  %t = call %f(%a); %u = call %h(%t); %a2 = add(%a, %u); %j2 = iadd(%j, 1); goto #4
/// #2:  %i = phi [#1 => 0, #5 => %i2]; %acc = phi [#1 => %x, #5 => %acc2]
///      %c = lt(%i, %n); gotoifnot %c, #9
/// #3:  goto #4
/// }
/// ```
/// Nested loops, phis naming values defined later in the layout, a layout that
/// is not in dominance order, recursion and dynamic calls.
fn nested_loops() -> (Module, FuncId) {
    let mut m = Module::new();
    let unary = Type::func(vec![Type::F64], Type::F64);
    let id = m
        .declare_func(
            "g",
            vec![
                (Some("n".into()), Type::I64),
                (Some("x".into()), Type::F64),
                (Some("h".into()), unary.clone()),
            ],
            Type::F64,
        )
        .unwrap();
    let mut b = FuncBuilder::new(&mut m, id).unwrap();
    let (n, x, h) = (
        b.param(0).unwrap(),
        b.param(1).unwrap(),
        b.param(2).unwrap(),
    );
    let b1 = b.create_block_labeled(1).unwrap();
    let b5 = b.create_block_labeled(5).unwrap();
    let b9 = b.create_block_labeled(9).unwrap();
    let b4 = b.create_block_labeled(4).unwrap();
    let b6 = b.create_block_labeled(6).unwrap();
    let b2 = b.create_block_labeled(2).unwrap();
    let b3 = b.create_block_labeled(3).unwrap();
    let sin = Operand::Const(Const::Func(FuncRef::Prim(Prim::Sin)));
    let cos = Operand::Const(Const::Func(FuncRef::Prim(Prim::Cos)));

    b.switch_to_block(b1).unwrap();
    let f = b
        .prim(Prim::Select, &[true.into(), sin, cos])
        .unwrap()
        .unwrap();
    b.goto(b2).unwrap();

    b.switch_to_block(b2).unwrap();
    let i = b.phi(Type::I64, &[(b1, 0i64.into())]).unwrap();
    let acc = b.phi(Type::F64, &[(b1, x.into())]).unwrap();
    let c = b.prim(Prim::Lt, &[i.into(), n.into()]).unwrap().unwrap();
    b.gotoifnot(c.into(), b9).unwrap();

    b.switch_to_block(b3).unwrap();
    b.goto(b4).unwrap();

    b.switch_to_block(b4).unwrap();
    let j = b.phi(Type::I64, &[(b3, 0i64.into())]).unwrap();
    let a = b.phi(Type::F64, &[(b3, acc.into())]).unwrap();
    let cj = b.prim(Prim::Lt, &[j.into(), i.into()]).unwrap().unwrap();
    b.gotoifnot(cj.into(), b5).unwrap();

    b.switch_to_block(b6).unwrap();
    let t = b.call_value(f, &[a.into()]).unwrap().unwrap();
    let u = b.call_value(h, &[t.into()]).unwrap().unwrap();
    let a2 = b.prim(Prim::Add, &[a.into(), u.into()]).unwrap().unwrap();
    let j2 = b
        .prim(Prim::Iadd, &[j.into(), 1i64.into()])
        .unwrap()
        .unwrap();
    b.goto(b4).unwrap();
    b.add_phi_entry(j, b6, j2.into()).unwrap();
    b.add_phi_entry(a, b6, a2.into()).unwrap();

    b.switch_to_block(b5).unwrap();
    let i2 = b
        .prim(Prim::Iadd, &[i.into(), 1i64.into()])
        .unwrap()
        .unwrap();
    let r = b
        .invoke(id, &[0i64.into(), a.into(), h.into()])
        .unwrap()
        .unwrap();
    let acc2 = b.prim(Prim::Add, &[a.into(), r.into()]).unwrap().unwrap();
    b.goto(b2).unwrap();
    b.add_phi_entry(i, b5, i2.into()).unwrap();
    b.add_phi_entry(acc, b5, acc2.into()).unwrap();

    b.switch_to_block(b9).unwrap();
    b.ret(acc.into()).unwrap();
    (m, id)
}

#[test]
fn nested_loops_with_recursion_and_dynamic_calls_verify() {
    let (m, _) = nested_loops();
    assert_eq!(errors(&m), vec![]);
}

#[test]
fn unit_results_arrays_tuples_and_alloc_verify() {
    let mut m = Module::new();
    let id = m
        .declare_func("arr", vec![(Some("n".into()), Type::I64)], Type::Unit)
        .unwrap();
    let mut b = FuncBuilder::new(&mut m, id).unwrap();
    let n = b.param(0).unwrap();
    let b1 = b.create_block_labeled(0).unwrap();
    b.switch_to_block(b1).unwrap();
    let a = b.alloc(Scalar::I64, n.into()).unwrap();
    assert_eq!(
        b.prim(Prim::Arrayset, &[a.into(), 0i64.into(), 7i64.into()])
            .unwrap(),
        None
    );
    let t = b
        .prim(Prim::Tuple, &[a.into(), 1.5.into()])
        .unwrap()
        .unwrap();
    let e = b
        .prim(Prim::Getfield, &[t.into(), 1i64.into()])
        .unwrap()
        .unwrap();
    let _ = b.prim(Prim::Sqrt, &[e.into()]).unwrap();
    b.ret(Operand::Const(Const::Unit)).unwrap();
    assert_eq!(errors(&m), vec![]);
    // A result value of type () is as good as no result.
    let block = m[id].layout[0];
    let (_, unit) = m[id].push_inst(
        block,
        InstKind::Prim {
            prim: Prim::Tuple,
            args: smallvec![],
        },
        Some(Type::Unit),
        None,
    );
    assert!(unit.is_some());
    assert_eq!(errors(&m), vec![]);
}

#[test]
fn module_with_two_functions_reports_in_module_order() {
    let mut t = abs_sin();
    let id2 = t.m.declare_func("empty", vec![], Type::Unit).unwrap();
    t.m[t.id].blocks[t.b3].term = None;
    let errs = verify_module(&t.m).unwrap_err();
    let funcs: Vec<_> = errs
        .iter()
        .map(|e| e.loc.func.as_deref().unwrap().to_string())
        .collect();
    assert_eq!(funcs, vec!["abs_sin", "empty"]);
    assert_eq!(errs[1].place, Place::Func(id2));
    assert_eq!(verify_func(&t.m, id2).unwrap_err().len(), 1);
    let bad = verify_func(&t.m, FuncId::from_u32(7)).unwrap_err();
    assert_eq!(bad[0].msg, "function handle 7 does not exist");
}

// ---- 1. layout and handles ------------------------------------------------

#[test]
fn function_without_blocks() {
    let mut m = Module::new();
    m.declare_func("f", vec![], Type::Unit).unwrap();
    assert_eq!(
        errors(&m),
        vec![at_func(
            "function has no blocks: expected at least an entry block"
        )]
    );
}

#[test]
fn layout_with_invalid_and_repeated_blocks() {
    let mut t = abs_sin();
    t.m[t.id].layout.push(Block::from_u32(42));
    t.m[t.id].layout.push(t.b2);
    assert_eq!(
        errors(&t.m),
        vec![
            at_func("layout lists invalid block handle 42"),
            at_block("block #2 is listed more than once in the layout", 2),
        ]
    );
}

#[test]
fn layout_of_only_invalid_blocks() {
    let mut m = Module::new();
    let id = m.declare_func("f", vec![], Type::Unit).unwrap();
    m[id].layout.push(Block::from_u32(0));
    assert_eq!(
        errors(&m),
        vec![
            at_func("layout lists invalid block handle 0"),
            at_func("function has no valid blocks: expected at least an entry block"),
        ]
    );
}

#[test]
fn blocks_out_of_the_layout_are_ignored() {
    let mut t = abs_sin();
    // A block a pass removed from the layout, still in the table.
    let dead = t.m[t.id].add_block(7);
    t.m[t.id].layout.pop();
    t.m[t.id].blocks[dead].term = Some(Terminator::Goto(Block::from_u32(99)));
    assert_eq!(errors(&t.m), vec![]);
}

#[test]
fn statement_listed_twice_or_invalid() {
    let mut t = abs_sin();
    let sin = inst_of(&t.m, t.id, t.s);
    t.m[t.id].blocks[t.b2].insts.insert(0, sin);
    t.m[t.id].blocks[t.b2].insts.push(Inst::from_u32(77));
    assert_eq!(
        errors(&t.m),
        vec![
            at(
                "statement is listed more than once: it is already statement 1 of #1",
                2,
                1
            ),
            at("invalid statement handle 77", 2, 3),
        ]
    );
    let errs = verify_module(&t.m).unwrap_err();
    assert_eq!(errs[0].place, Place::Block(t.id, t.b2));
}

#[test]
fn invalid_value_handle_in_operand() {
    let mut t = abs_sin();
    args_of(&mut t.m, t.id, t.n)[0] = Operand::Value(Value::from_u32(99));
    assert_eq!(
        errors(&t.m),
        vec![at("use of invalid value handle %99", 2, 1)]
    );
}

#[test]
fn invalid_parameter_records() {
    let mut t = abs_sin();
    t.m[t.id].params.push(t.s);
    t.m[t.id].params.push(Value::from_u32(50));
    assert_eq!(
        errors(&t.m),
        vec![
            at_func(
                "parameter 2 is %1, which is recorded as the result of statement handle 0: expected parameter 2"
            ),
            at_func("parameter 3 is invalid value handle 50"),
        ]
    );
}

#[test]
fn statement_result_records_another_definition() {
    let mut t = abs_sin();
    let neg = inst_of(&t.m, t.id, t.n);
    t.m[t.id].insts[neg].result = Some(t.s);
    // %1 is now claimed by two statements; the one it names (sin) keeps it, and
    // %3 is no longer anyone's result.
    assert_eq!(
        errors(&t.m),
        vec![
            at(
                "statement result %1 is recorded as the result of statement handle 0: expected this statement",
                2,
                1
            ),
            at(
                "use of undefined value %3: expected a parameter or the result of a statement",
                3,
                1
            ),
        ]
    );
    let mut t = abs_sin();
    let neg = inst_of(&t.m, t.id, t.n);
    t.m[t.id].insts[neg].result = Some(Value::from_u32(40));
    assert_eq!(
        errors(&t.m)[0],
        at("statement result is invalid value handle 40", 2, 1)
    );
}

// ---- 2. labels --------------------------------------------------------------

#[test]
fn duplicate_labels() {
    let mut t = abs_sin();
    t.m[t.id].blocks[t.b3].label = 1;
    assert_eq!(
        errors(&t.m),
        vec![at_block(
            "label #1 is used by an earlier block too: labels must be unique in a function",
            1
        )]
    );
    let errs = verify_module(&t.m).unwrap_err();
    assert_eq!(errs[0].place, Place::Block(t.id, t.b3));
}

// ---- 3. terminators and control flow ----------------------------------------

#[test]
fn block_without_terminator() {
    let mut t = abs_sin();
    t.m[t.id].blocks[t.b2].term = None;
    assert_eq!(
        errors(&t.m),
        vec![
            at(
                "block has no terminator: expected goto, gotoifnot, switch or return",
                2,
                2
            ),
            at(
                "phi has an entry for #2, which is not a predecessor of #3",
                3,
                1
            ),
        ]
    );
    let errs = verify_module(&t.m).unwrap_err();
    assert_eq!(errs[0].place, Place::Term(t.id, t.b2));
}

#[test]
fn gotoifnot_in_last_block() {
    let mut t = abs_sin();
    let c = t.c;
    t.m[t.id].blocks[t.b3].term = Some(Terminator::GotoIfNot {
        cond: c.into(),
        target: t.b2,
    });
    assert_eq!(
        errors(&t.m),
        vec![at(
            "gotoifnot has no next block to fall through to: it ends the layout",
            3,
            2
        )]
    );
}

#[test]
fn gotoifnot_with_equal_successors() {
    let mut t = abs_sin();
    t.m[t.id].blocks[t.b1].term = Some(Terminator::GotoIfNot {
        cond: t.c.into(),
        target: t.b2,
    });
    assert_eq!(
        errors(&t.m),
        vec![
            at(
                "gotoifnot jumps to #2 and falls through to #2: expected two different successors",
                1,
                3
            ),
            at(
                "phi has an entry for #1, which is not a predecessor of #3",
                3,
                1
            ),
        ]
    );
}

#[test]
fn jump_targets_must_be_in_the_layout() {
    let mut t = abs_sin();
    let dead = t.m[t.id].add_block(8);
    t.m[t.id].layout.pop();
    t.m[t.id].blocks[t.b2].term = Some(Terminator::Goto(Block::from_u32(30)));
    t.m[t.id].blocks[t.b1].term = Some(Terminator::GotoIfNot {
        cond: t.c.into(),
        target: dead,
    });
    assert_eq!(
        errors(&t.m),
        vec![
            at("jump target #8 is not in the layout", 1, 3),
            at("jump target is invalid block handle 30", 2, 2),
            at(
                "phi has an entry for #1, which is not a predecessor of #3",
                3,
                1
            ),
            at(
                "phi has an entry for #2, which is not a predecessor of #3",
                3,
                1
            ),
        ]
    );
}

#[test]
fn jump_to_the_entry_block() {
    let mut t = abs_sin();
    t.m[t.id].blocks[t.b2].term = Some(Terminator::Goto(t.b1));
    assert_eq!(
        errors(&t.m),
        vec![
            at(
                "jump to the entry block #1: the entry block must have no predecessors",
                2,
                2
            ),
            at(
                "phi has an entry for #2, which is not a predecessor of #3",
                3,
                1
            ),
        ]
    );
}

fn switch(index: Operand, targets: &[Block]) -> Option<Terminator> {
    Some(Terminator::Switch {
        index,
        targets: targets.iter().copied().collect(),
    })
}

#[test]
fn a_switch_verifies_and_its_targets_are_its_successors() {
    let mut t = abs_sin();
    // #1 -> #3 and #1 -> #2 -> #3: the phi of #3 keeps its two entries.
    t.m[t.id].blocks[t.b1].term = switch(0i64.into(), &[t.b3, t.b2]);
    assert_eq!(errors(&t.m), vec![]);
    assert_eq!(
        t.m[t.id].successors(t.b1, Some(t.b2)).as_slice(),
        &[t.b3, t.b2]
    );
}

#[test]
fn switch_index_must_be_i64() {
    let mut t = abs_sin();
    t.m[t.id].blocks[t.b1].term = switch(t.c.into(), &[t.b2, t.b3]);
    assert_eq!(
        errors(&t.m),
        vec![at("switch index must be i64, found bool", 1, 3)]
    );
}

#[test]
fn switch_needs_a_target() {
    let mut t = abs_sin();
    t.m[t.id].blocks[t.b1].term = switch(0i64.into(), &[]);
    assert_eq!(
        errors(&t.m),
        vec![
            at("switch has no targets: expected at least one", 1, 3),
            at(
                "phi has an entry for #1, which is not a predecessor of #3",
                3,
                1
            ),
        ]
    );
}

#[test]
fn switch_lists_each_target_once() {
    let mut t = abs_sin();
    t.m[t.id].blocks[t.b1].term = switch(0i64.into(), &[t.b2, t.b3, t.b2, t.b3]);
    let dup = |label: u32| {
        at(
            &format!(
                "switch lists #{label} more than once: each target is one edge, and phi entries are per predecessor"
            ),
            1,
            3,
        )
    };
    assert_eq!(errors(&t.m), vec![dup(2), dup(3)]);
}

#[test]
fn switch_targets_must_be_blocks_of_the_layout_other_than_the_entry() {
    let mut t = abs_sin();
    let dead = t.m[t.id].add_block(8);
    t.m[t.id].layout.pop();
    t.m[t.id].blocks[t.b1].term =
        switch(0i64.into(), &[t.b2, dead, Block::from_u32(30), t.b1, t.b3]);
    assert_eq!(
        errors(&t.m),
        vec![
            at("jump target #8 is not in the layout", 1, 3),
            at("jump target is invalid block handle 30", 1, 3),
            at(
                "jump to the entry block #1: the entry block must have no predecessors",
                1,
                3
            ),
        ]
    );
}

// ---- 4. phis ------------------------------------------------------------------

#[test]
fn phi_after_another_statement() {
    let mut t = abs_sin();
    let phi = inst_of(&t.m, t.id, t.p);
    let neg = inst_of(&t.m, t.id, t.n);
    // #3: %3 = neg(%1) would not dominate; use a fresh statement instead.
    let _ = neg;
    let (extra, _) = t.m[t.id].push_inst(
        t.b3,
        InstKind::Prim {
            prim: Prim::Neg,
            args: smallvec![Operand::Value(t.p)],
        },
        Some(Type::F64),
        None,
    );
    t.m[t.id].blocks[t.b3].insts = vec![extra, phi];
    assert_eq!(
        errors(&t.m),
        vec![
            at(
                "use of %4 before its definition: it is defined by statement 2 of this block",
                3,
                1
            ),
            at(
                "phi after a statement that is not a phi: phis must come first in a block",
                3,
                2
            ),
        ]
    );
}

#[test]
fn phi_missing_extra_and_duplicate_entries() {
    let mut t = abs_sin();
    let s = t.s;
    let b1 = t.b1;
    let b3 = t.b3;
    let entries = phi_entries(&mut t.m, t.id, t.p);
    entries.remove(1); // no entry for #2
    entries.push((b1, s.into())); // a second one for #1
    entries.push((b3, s.into())); // #3 is not a predecessor of #3
    entries.push((Block::from_u32(66), s.into()));
    assert_eq!(
        errors(&t.m),
        vec![
            at("phi has more than one entry for predecessor #1", 3, 1),
            at(
                "phi has an entry for #3, which is not a predecessor of #3",
                3,
                1
            ),
            at("phi entry names invalid block handle 66", 3, 1),
            at("phi has no entry for predecessor #2", 3, 1),
        ]
    );
    let errs = verify_module(&t.m).unwrap_err();
    let phi = inst_of(&t.m, t.id, t.p);
    assert_eq!(errs[0].place, Place::Inst(t.id, phi));
}

#[test]
fn phi_needs_entries_for_unreachable_predecessors() {
    let mut t = abs_sin();
    // #4: goto #3, reachable from nowhere, is still a predecessor of #3.
    let b4 = t.m[t.id].add_block(4);
    t.m[t.id].blocks[b4].term = Some(Terminator::Goto(t.b3));
    assert_eq!(
        errors(&t.m),
        vec![at("phi has no entry for predecessor #4", 3, 1)]
    );
    let x = t.m[t.id].params[0];
    phi_entries(&mut t.m, t.id, t.p).push((b4, x.into()));
    assert_eq!(errors(&t.m), vec![]);
}

#[test]
fn phi_in_the_entry_block() {
    let mut m = Module::new();
    let id = m.declare_func("f", vec![], Type::F64).unwrap();
    let mut b = FuncBuilder::new(&mut m, id).unwrap();
    let b0 = b.create_block_labeled(0).unwrap();
    b.switch_to_block(b0).unwrap();
    let p = b.phi(Type::F64, &[]).unwrap();
    b.ret(p.into()).unwrap();
    assert_eq!(
        errors(&m),
        vec![at(
            "phi in the entry block, which has no predecessors",
            0,
            1
        )]
    );
}

// ---- 5. SSA -------------------------------------------------------------------

#[test]
fn use_of_a_value_whose_statement_is_in_no_block() {
    let mut t = abs_sin();
    let neg = inst_of(&t.m, t.id, t.n);
    t.m[t.id].blocks[t.b2].insts.retain(|&i| i != neg);
    assert_eq!(
        errors(&t.m),
        vec![at(
            "use of %3, whose defining statement is in no block",
            3,
            1
        )]
    );
}

#[test]
fn use_of_a_value_with_a_wrong_definition_record() {
    let mut t = abs_sin();
    t.m[t.id].values[t.n].def = ValueDef::Param(0);
    assert_eq!(
        errors(&t.m),
        vec![
            at(
                "statement result %3 is recorded as parameter 1: expected this statement",
                2,
                1
            ),
            at(
                "use of undefined value %3: expected a parameter or the result of a statement",
                3,
                1
            ),
        ]
    );
}

#[test]
fn use_before_definition_in_the_same_block() {
    let mut t = abs_sin();
    // #1: %2 = lt(%1, 0.0) before %1 = sin(%x); #2: %3 = neg(%3).
    t.m[t.id].blocks[t.b1].insts.swap(0, 1);
    args_of(&mut t.m, t.id, t.n)[0] = t.n.into();
    assert_eq!(
        errors(&t.m),
        vec![
            at(
                "use of %1 before its definition: it is defined by statement 2 of this block",
                1,
                1
            ),
            at("use of %3 in the statement that defines it", 2, 1),
        ]
    );
}

#[test]
fn use_not_dominated_by_its_definition() {
    let mut t = abs_sin();
    // return %3, defined in #2, which does not dominate #3.
    t.m[t.id].blocks[t.b3].term = Some(Terminator::Return(t.n.into()));
    assert_eq!(
        errors(&t.m),
        vec![at(
            "use of %3 is not dominated by its definition in #2",
            3,
            2
        )]
    );
}

#[test]
fn phi_operand_must_dominate_the_end_of_its_predecessor() {
    let mut t = abs_sin();
    // The entry for #1 names %3, defined in #2.
    phi_entries(&mut t.m, t.id, t.p)[0].1 = t.n.into();
    assert_eq!(
        errors(&t.m),
        vec![at(
            "phi entry for #1 uses %3, whose definition in #2 does not dominate the end of #1",
            3,
            1
        )]
    );
    // The entry for #2 may name a value of #2 itself, or of a dominator.
    let mut t = abs_sin();
    phi_entries(&mut t.m, t.id, t.p)[1].1 = t.s.into();
    assert_eq!(errors(&t.m), vec![]);
}

#[test]
fn unreachable_uses_are_not_checked_but_unreachable_definitions_are() {
    let mut t = abs_sin();
    // #4 is unreachable; it uses %3 (defined in #2, which does not dominate it)
    // and defines %5, which reachable #3 returns.
    let b4 = t.m[t.id].add_block(4);
    let (_, v5) = t.m[t.id].push_inst(
        b4,
        InstKind::Prim {
            prim: Prim::Neg,
            args: smallvec![Operand::Value(t.n)],
        },
        Some(Type::F64),
        None,
    );
    t.m[t.id].blocks[b4].term = Some(Terminator::Return(t.p.into()));
    t.m[t.id].blocks[t.b3].term = Some(Terminator::Return(v5.unwrap().into()));
    assert_eq!(
        errors(&t.m),
        vec![at(
            "use of %5, which is defined in unreachable block #4",
            3,
            2
        )]
    );
}

// ---- 6. types -------------------------------------------------------------------

#[test]
fn primitive_argument_types() {
    let mut t = abs_sin();
    args_of(&mut t.m, t.id, t.n)[0] = 1i64.into();
    args_of(&mut t.m, t.id, t.c).push(0.0.into());
    assert_eq!(
        errors(&t.m),
        vec![
            at("`lt` takes 2 arguments, found 3", 1, 2),
            at("argument 1 of `neg` must be f64, found i64", 2, 1),
        ]
    );
}

#[test]
fn primitive_result_types() {
    let mut t = abs_sin();
    t.m[t.id].values[t.c].ty = Type::F64;
    let neg = inst_of(&t.m, t.id, t.n);
    t.m[t.id].insts[neg].result = None;
    t.m[t.id].values[t.n].def = ValueDef::Param(5);
    phi_entries(&mut t.m, t.id, t.p).pop();
    phi_entries(&mut t.m, t.id, t.p).push((t.b2, 0.0.into()));
    assert_eq!(
        errors(&t.m),
        vec![
            at(
                "result %2 has type f64, expected bool as returned by `lt`",
                1,
                2
            ),
            at("gotoifnot condition must be bool, found f64", 1, 3),
            at("`neg` returns f64, but the statement has no result", 2, 1),
        ]
    );
}

#[test]
fn getfield_and_alloc_are_typed_through_their_extra_operands() {
    let mut m = Module::new();
    let id = m.declare_func("f", vec![], Type::Unit).unwrap();
    let b0 = m[id].add_block(0);
    let pair = Operand::Value(
        m[id]
            .push_inst(
                b0,
                InstKind::Prim {
                    prim: Prim::Tuple,
                    args: smallvec![1.0.into(), 2i64.into()],
                },
                Some(Type::tuple(vec![Type::F64, Type::I64])),
                None,
            )
            .1
            .unwrap(),
    );
    let f = &mut m[id];
    f.push_inst(
        b0,
        InstKind::Prim {
            prim: Prim::Getfield,
            args: smallvec![pair, 1i64.into()],
        },
        Some(Type::F64),
        None,
    );
    f.push_inst(
        b0,
        InstKind::Prim {
            prim: Prim::Getfield,
            args: smallvec![pair, 2i64.into()],
        },
        Some(Type::F64),
        None,
    );
    f.push_inst(
        b0,
        InstKind::Prim {
            prim: Prim::Alloc,
            args: smallvec![3i64.into()],
        },
        Some(Type::F64),
        None,
    );
    f.push_inst(
        b0,
        InstKind::Prim {
            prim: Prim::Alloc,
            args: smallvec![3i64.into()],
        },
        Some(Type::Array(Scalar::Bool)),
        None,
    );
    f.blocks[b0].term = Some(Terminator::Return(Operand::Const(Const::Unit)));
    assert_eq!(
        errors(&m),
        vec![
            at(
                "result %1 has type f64, expected i64 as returned by `getfield`",
                0,
                2
            ),
            at("field 2 out of range for a tuple of 2 elements", 0, 3),
            at(
                "`alloc` must be annotated with an array type, found f64",
                0,
                4
            ),
        ]
    );
}

#[test]
fn invoke_arity_argument_and_result_types() {
    let (mut m, g) = nested_loops();
    let r = m[g]
        .insts
        .values()
        .find(|d| matches!(d.kind, InstKind::Invoke { .. }))
        .and_then(|d| d.result)
        .unwrap();
    let rname = format!("%{}", r.as_u32());
    let inst = inst_of(&m, g, r);
    let (b5, stmt) = (5, 2);
    // Wrong result type.
    m[g].values[r].ty = Type::I64;
    // acc2 = add(%a, %r) now has an i64 operand too.
    let errs = errors(&m);
    assert_eq!(
        errs,
        vec![
            at(
                &format!("result {rname} has type i64, expected f64 as returned by @g"),
                b5,
                stmt
            ),
            at("argument 2 of `add` must be f64, found i64", b5, 3),
        ]
    );
    m[g].values[r].ty = Type::F64;
    match &mut m[g].insts[inst].kind {
        InstKind::Invoke { args, .. } => args[0] = 1.0.into(),
        _ => unreachable!(),
    }
    assert_eq!(
        errors(&m),
        vec![at("argument 1 of @g must be i64, found f64", b5, stmt)]
    );
    match &mut m[g].insts[inst].kind {
        InstKind::Invoke { args, .. } => {
            args.pop();
        }
        _ => unreachable!(),
    }
    assert_eq!(
        errors(&m),
        vec![at("@g takes 3 arguments, found 2", b5, stmt)]
    );
    match &mut m[g].insts[inst].kind {
        InstKind::Invoke { func, .. } => *func = FuncId::from_u32(9),
        _ => unreachable!(),
    }
    assert_eq!(
        errors(&m),
        vec![at("invoke of invalid function handle 9", b5, stmt)]
    );
}

#[test]
fn dynamic_call_types() {
    let mut m = Module::new();
    let unary = Type::func(vec![Type::F64], Type::F64);
    let id = m
        .declare_func(
            "f",
            vec![(Some("h".into()), unary), (Some("x".into()), Type::F64)],
            Type::F64,
        )
        .unwrap();
    let (h, x) = (m[id].params[0], m[id].params[1]);
    let b0 = m[id].add_block(0);
    let call = |callee: Value, args: Args| InstKind::CallValue { callee, args };
    let f = &mut m[id];
    f.push_inst(
        b0,
        call(h, smallvec![x.into(), x.into()]),
        Some(Type::F64),
        None,
    );
    f.push_inst(b0, call(h, smallvec![1i64.into()]), Some(Type::F64), None);
    f.push_inst(b0, call(h, smallvec![x.into()]), Some(Type::Bool), None);
    f.push_inst(b0, call(x, smallvec![x.into()]), Some(Type::F64), None);
    f.blocks[b0].term = Some(Terminator::Return(x.into()));
    assert_eq!(
        errors(&m),
        vec![
            at("%h takes 1 argument, found 2", 0, 1),
            at("argument 1 of %h must be f64, found i64", 0, 2),
            at(
                "result %4 has type bool, expected f64 as returned by %h",
                0,
                3
            ),
            at(
                "called value %x has type f64: expected a function type",
                0,
                4
            ),
        ]
    );
}

#[test]
fn phi_entry_and_return_types() {
    let mut t = abs_sin();
    phi_entries(&mut t.m, t.id, t.p)[0].1 = true.into();
    t.m[t.id].blocks[t.b3].term = Some(Terminator::Return(1i64.into()));
    assert_eq!(
        errors(&t.m),
        vec![
            at("phi entry for #1 has type bool, expected f64", 3, 1),
            at(
                "return value has type i64, but the function returns f64",
                3,
                2
            ),
        ]
    );
}

#[test]
fn function_constants() {
    let mut t = abs_sin();
    args_of(&mut t.m, t.id, t.n)[0] =
        Operand::Const(Const::Func(FuncRef::User(FuncId::from_u32(3))));
    args_of(&mut t.m, t.id, t.c)[1] = Operand::Const(Const::Func(FuncRef::Prim(Prim::Lt)));
    assert_eq!(
        errors(&t.m),
        vec![
            at(
                "primitive `lt` is overloaded and cannot be used as a value",
                1,
                2
            ),
            at("function constant names invalid function handle 3", 2, 1),
        ]
    );
    // A function of the module and a single-signature primitive are fine values.
    let mut t = abs_sin();
    let id = t.id;
    let c = t.c;
    let block = t.b1;
    let own = Operand::Const(Const::Func(FuncRef::User(id)));
    let sin = Operand::Const(Const::Func(FuncRef::Prim(Prim::Sin)));
    let f = &mut t.m[id];
    f.push_inst(
        block,
        InstKind::Prim {
            prim: Prim::Select,
            args: smallvec![c.into(), own, sin],
        },
        Some(Type::func(vec![Type::F64], Type::F64)),
        None,
    );
    assert_eq!(errors(&t.m), vec![]);
}

fn nested(depth: usize) -> Type {
    let mut ty = Type::F64;
    for _ in 1..depth {
        ty = Type::tuple(vec![ty]);
    }
    ty
}

#[test]
fn type_nesting_limit() {
    let limit = irad_ir::MAX_NESTING;
    let mut m = Module::new();
    let id = m
        .declare_func(
            "deep",
            vec![(Some("a".into()), nested(limit + 1))],
            nested(limit + 5),
        )
        .unwrap();
    let a = m[id].params[0];
    let b0 = m[id].add_block(0);
    let (_, t) = m[id].push_inst(
        b0,
        InstKind::Prim {
            prim: Prim::Tuple,
            args: smallvec![a.into()],
        },
        Some(nested(1_000)),
        None,
    );
    m[id].blocks[b0].term = Some(Terminator::Return(t.unwrap().into()));
    assert_eq!(
        errors(&m),
        vec![
            at_func("type of parameter 1 (%a) nests 257 deep: the limit is 256"),
            at_func("result type nests 261 deep: the limit is 256"),
            at("type of %1 nests 1000 deep: the limit is 256", 0, 1),
        ]
    );
    // Exactly at the limit is fine.
    let mut m = Module::new();
    let id = m
        .declare_func("ok", vec![(Some("a".into()), nested(limit))], nested(limit))
        .unwrap();
    let a = m[id].params[0];
    let b0 = m[id].add_block(0);
    m[id].blocks[b0].term = Some(Terminator::Return(a.into()));
    assert_eq!(errors(&m), vec![]);
}

// ---- 7. no cascades --------------------------------------------------------------

#[test]
fn an_undefined_value_reports_once_per_use_and_no_type_errors() {
    let mut t = abs_sin();
    let neg = inst_of(&t.m, t.id, t.n);
    t.m[t.id].blocks[t.b2].insts.clear();
    // %1 = sin(%3) (and %3's statement is in no block): the uses of %1 are fine.
    args_of(&mut t.m, t.id, t.s)[0] = t.n.into();
    let _ = neg;
    assert_eq!(
        errors(&t.m),
        vec![
            at("use of %3, whose defining statement is in no block", 1, 1),
            at("use of %3, whose defining statement is in no block", 3, 1),
        ]
    );
}

// ---- locations -------------------------------------------------------------------

#[test]
fn locations_carry_positions_and_print_with_their_place() {
    let mut m = Module::new();
    let id = m.declare_func("f", vec![], Type::F64).unwrap();
    m[id].pos = Some(Pos::new(1, 1));
    let mut b = FuncBuilder::new(&mut m, id).unwrap();
    b.set_pos(Some(Pos::new(2, 1)));
    let b1 = b.create_block_labeled(1).unwrap();
    b.switch_to_block(b1).unwrap();
    b.set_pos(Some(Pos::new(3, 3)));
    let s = b.prim(Prim::Sin, &[1.0.into()]).unwrap().unwrap();
    b.set_pos(Some(Pos::new(4, 3)));
    b.ret(s.into()).unwrap();
    m[id].values[s].ty = Type::I64;
    m[id].blocks[b1].term_pos = None;
    let errs: Vec<VerifyError> = verify_module(&m).unwrap_err();
    assert_eq!(errs.len(), 2);
    assert_eq!(errs[0].loc.pos, Some(Pos::new(3, 3)));
    assert_eq!(
        errs[0].to_string(),
        "result %0 has type i64, expected f64 as returned by `sin` (in @f, block #1, statement 1)"
    );
    // The terminator has no position of its own: the block's is the closest.
    assert_eq!(errs[1].loc.pos, Some(Pos::new(2, 1)));
    assert_eq!(
        errs[1].to_string(),
        "return value has type i64, but the function returns f64 (in @f, block #1, statement 2)"
    );
    let diag: &dyn irad_ir::Diagnostic = &errs[1];
    assert_eq!(diag.location().stmt, Some(2));
    assert_eq!(diag.message(), errs[1].msg);
}

// ---- size ----------------------------------------------------------------------------

/// A chain of `n_blocks` blocks of ten statements each; every block uses the
/// parameter and the condition of the entry block, far above it in the
/// dominator tree.
fn chain(n_blocks: u32) -> Module {
    let mut m = Module::new();
    let id = m
        .declare_func("chain", vec![(Some("x".into()), Type::F64)], Type::F64)
        .unwrap();
    let f = &mut m[id];
    let x = f.params[0];
    let add = |a: Value, b: Value| InstKind::Prim {
        prim: Prim::Add,
        args: smallvec![a.into(), b.into()],
    };
    let mut blocks = Vec::new();
    for label in 0..n_blocks {
        blocks.push(f.add_block(label));
    }
    let mut prev = x;
    for (k, &block) in blocks.iter().enumerate() {
        for _ in 0..10 {
            prev = f
                .push_inst(block, add(prev, x), Some(Type::F64), None)
                .1
                .unwrap();
        }
        f.blocks[block].term = Some(match blocks.get(k + 1) {
            Some(&next) => Terminator::Goto(next),
            None => Terminator::Return(prev.into()),
        });
    }
    m
}

#[test]
fn two_hundred_thousand_statements_verify_quickly() {
    let m = chain(20_000);
    let start = std::time::Instant::now();
    assert_eq!(errors(&m), vec![]);
    let elapsed = start.elapsed();
    assert!(elapsed.as_secs_f64() < 5.0, "verification took {elapsed:?}");
}

// ---- no panics ---------------------------------------------------------------------

/// A random edit of a function, with indices taken modulo the table sizes.
#[derive(Clone, Debug)]
enum Mutation {
    SwapOperands(usize, usize, usize),
    DropPhiEntry(usize, usize),
    RetargetJump(usize, u32),
    ChangeType(usize, u8),
    SetOperand(usize, usize, u32),
    SwapLayout(usize, usize),
    DropFromLayout(usize),
    MoveStatement(usize, usize),
    DropResult(usize),
    SetLabel(usize, u32),
    ReturnValue(usize, u32),
    SetPrim(usize, u8),
    Switch(usize, u32, Vec<u32>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<usize>(), any::<usize>())
            .prop_map(|(a, b, c)| Mutation::SwapOperands(a, b, c)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::DropPhiEntry(a, b)),
        (any::<usize>(), 0u32..12).prop_map(|(a, b)| Mutation::RetargetJump(a, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Mutation::ChangeType(a, b)),
        (any::<usize>(), any::<usize>(), 0u32..40)
            .prop_map(|(a, b, c)| Mutation::SetOperand(a, b, c)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLayout(a, b)),
        any::<usize>().prop_map(Mutation::DropFromLayout),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::MoveStatement(a, b)),
        any::<usize>().prop_map(Mutation::DropResult),
        (any::<usize>(), 0u32..4).prop_map(|(a, b)| Mutation::SetLabel(a, b)),
        (any::<usize>(), 0u32..40).prop_map(|(a, b)| Mutation::ReturnValue(a, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Mutation::SetPrim(a, b)),
        (
            any::<usize>(),
            0u32..40,
            prop::collection::vec(0u32..12, 0..4)
        )
            .prop_map(|(a, b, c)| Mutation::Switch(a, b, c)),
    ]
}

fn some_type(k: u8) -> Type {
    match k % 8 {
        0 => Type::F64,
        1 => Type::I64,
        2 => Type::Bool,
        3 => Type::Unit,
        4 => Type::Array(Scalar::F64),
        5 => Type::tuple(vec![Type::F64, Type::I64]),
        6 => Type::func(vec![Type::F64], Type::F64),
        _ => nested(300),
    }
}

fn operands(kind: &mut InstKind) -> Vec<&mut Operand> {
    match kind {
        InstKind::Prim { args, .. } | InstKind::Invoke { args, .. } => args.iter_mut().collect(),
        InstKind::CallValue { args, .. } => args.iter_mut().collect(),
        InstKind::Phi { entries } => entries.iter_mut().map(|(_, op)| op).collect(),
    }
}

fn apply(m: &mut Module, id: FuncId, mutation: &Mutation) {
    let f = &mut m[id];
    let n_insts = f.insts.len().max(1);
    let n_blocks = f.blocks.len().max(1);
    let n_values = f.values.len().max(1);
    let inst = |i: usize| Inst::from_u32((i % n_insts) as u32);
    let block = |i: usize| Block::from_u32((i % n_blocks) as u32);
    match *mutation {
        Mutation::SwapOperands(i, a, b) => {
            if let Some(data) = f.insts.get_mut(inst(i)) {
                let mut ops = operands(&mut data.kind);
                let n = ops.len();
                if n > 1 {
                    let (a, b) = (a % n, b % n);
                    let (x, y) = (*ops[a], *ops[b]);
                    *ops[a] = y;
                    *ops[b] = x;
                }
            }
        }
        Mutation::DropPhiEntry(i, k) => {
            if let Some(InstKind::Phi { entries }) = f.insts.get_mut(inst(i)).map(|d| &mut d.kind)
                && !entries.is_empty()
            {
                let k = k % entries.len();
                entries.remove(k);
            }
        }
        Mutation::RetargetJump(b, target) => {
            if let Some(data) = f.blocks.get_mut(block(b)) {
                match &mut data.term {
                    Some(Terminator::Goto(t)) | Some(Terminator::GotoIfNot { target: t, .. }) => {
                        *t = Block::from_u32(target)
                    }
                    _ => data.term = Some(Terminator::Goto(Block::from_u32(target))),
                }
            }
        }
        Mutation::ChangeType(v, k) => {
            if let Some(data) = f.values.get_mut(Value::from_u32((v % n_values) as u32)) {
                data.ty = some_type(k);
            }
        }
        Mutation::SetOperand(i, k, v) => {
            if let Some(data) = f.insts.get_mut(inst(i)) {
                let mut ops = operands(&mut data.kind);
                let n = ops.len();
                if n > 0 {
                    *ops[k % n] = Operand::Value(Value::from_u32(v));
                }
            }
        }
        Mutation::SwapLayout(a, b) => {
            let n = f.layout.len();
            if n > 0 {
                f.layout.swap(a % n, b % n);
            }
        }
        Mutation::DropFromLayout(a) => {
            let n = f.layout.len();
            if n > 0 {
                f.layout.remove(a % n);
            }
        }
        Mutation::MoveStatement(i, b) => {
            let moved = inst(i);
            for data in f.blocks.values_mut() {
                data.insts.retain(|&x| x != moved);
            }
            if let Some(data) = f.blocks.get_mut(block(b)) {
                data.insts.push(moved);
            }
        }
        Mutation::DropResult(i) => {
            if let Some(data) = f.insts.get_mut(inst(i)) {
                data.result = None;
            }
        }
        Mutation::SetLabel(b, label) => {
            if let Some(data) = f.blocks.get_mut(block(b)) {
                data.label = label;
            }
        }
        Mutation::ReturnValue(b, v) => {
            if let Some(data) = f.blocks.get_mut(block(b)) {
                data.term = Some(Terminator::Return(Operand::Value(Value::from_u32(v))));
            }
        }
        Mutation::SetPrim(i, p) => {
            if let Some(InstKind::Prim { prim, .. }) = f.insts.get_mut(inst(i)).map(|d| &mut d.kind)
            {
                let all = irad_ir::prim::PRIMS;
                *prim = all[p as usize % all.len()].prim;
            }
        }
        Mutation::Switch(b, v, ref targets) => {
            if let Some(data) = f.blocks.get_mut(block(b)) {
                data.term = Some(Terminator::Switch {
                    index: Operand::Value(Value::from_u32(v)),
                    targets: targets.iter().map(|&t| Block::from_u32(t)).collect(),
                });
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn mutated_functions_never_panic(
        base in 0usize..3,
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let (mut m, id) = match base {
            0 => { let t = abs_sin(); (t.m, t.id) }
            1 => nested_loops(),
            _ => { let m = chain(4); let id = m.by_name("chain").unwrap(); (m, id) }
        };
        for mutation in &mutations {
            apply(&mut m, id, mutation);
        }
        if let Err(errs) = verify_module(&m) {
            prop_assert!(!errs.is_empty());
            for e in &errs {
                prop_assert!(e.loc.func.is_some());
                prop_assert!(!e.to_string().is_empty());
                prop_assert!(!e.msg.ends_with('.'));
            }
        }
    }
}
