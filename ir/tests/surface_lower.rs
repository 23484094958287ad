//! Tests of the lowering of `.irad` files to SSA IR (`surface::lower`): every
//! corpus program lowers to IR that verifies and computes the corpus values
//! (and what its IR twin computes); snapshots of the printed IR of small
//! programs; and a generator of random well-typed programs whose lowering must
//! verify, keep no trivial phi, and run without internal error.
//!
//! Every lowered module goes through `compile_ok`, which runs the verifier and
//! the trivial-phi check.

use expect_test::{Expect, expect};
use irad_ir::interp::{self, RunOptions, Val};
use irad_ir::text::{parse_args, parse_module, print_module};
use irad_ir::verify::{render_errors, verify_module};
use irad_ir::{InstKind, Module, Operand, surface};
use std::path::PathBuf;

// ---------------------------------------------------------------- helpers

/// Compiles `src`, verifies the result and checks that no phi is trivial.
fn compile_ok(src: &str) -> Module {
    let m = match surface::compile(src) {
        Ok(m) => m,
        Err(errs) => {
            let msgs: Vec<String> = errs
                .iter()
                .map(|e| {
                    format!(
                        "{}: {}",
                        e.loc.pos.map_or(String::new(), |p| p.to_string()),
                        e.msg
                    )
                })
                .collect();
            panic!("does not compile:\n{}\n{src}", msgs.join("\n"));
        }
    };
    if let Err(errs) = verify_module(&m) {
        panic!("lowered IR does not verify:\n{}", render_errors(&m, &errs));
    }
    assert_no_trivial_phi(&m);
    m
}

/// Fails when a phi has a single distinct incoming operand besides itself.
fn assert_no_trivial_phi(m: &Module) {
    for (_, f) in m.funcs() {
        for &block in &f.layout {
            for &inst in &f.blocks[block].insts {
                let data = &f.insts[inst];
                let InstKind::Phi { entries } = &data.kind else {
                    continue;
                };
                let me = data.result.map(Operand::Value);
                let mut distinct: Vec<Operand> = Vec::new();
                for (_, op) in entries {
                    if Some(*op) != me && !distinct.contains(op) {
                        distinct.push(*op);
                    }
                }
                assert!(
                    distinct.len() > 1,
                    "trivial phi in @{}:\n{}",
                    f.name,
                    print_module(m)
                );
            }
        }
    }
}

/// Runs function `name` of `m` on arguments written as `--args` text.
fn run(m: &Module, name: &str, args: &str) -> Result<Val, interp::RunError> {
    let id = m
        .by_name(name)
        .unwrap_or_else(|| panic!("no function {name}"));
    let vals = parse_args(args, &m[id].param_types(), m).expect("arguments parse");
    interp::run(m, id, &vals, &RunOptions::default())
}

fn run_f64(m: &Module, name: &str, args: &str) -> f64 {
    match run(m, name, args) {
        Ok(Val::F64(x)) => x,
        other => panic!("@{name}({args}) gave {other:?}"),
    }
}

fn data(path: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn check_ir(src: &str, want: Expect) {
    want.assert_eq(&print_module(&compile_ok(src)));
}

// ---------------------------------------------------------------- corpus

/// (file, function, arguments, value) from the corpus JSON files.
const CASES: &[(&str, &str, &str, f64)] = &[
    (
        "branchy.irad",
        "branchy",
        "[0.5, -0.3, 1.7, -2.5, 0.05, -0.95, 3.1, -1.4], 0.8",
        1.4750945115616094,
    ),
    (
        "branchy.irad",
        "branchy",
        "[-0.2, -0.4, -0.6, -0.8, -1.2, -1.6, 0.2, 0.4, 0.6, 0.8], -1.3",
        -0.6558611928730531,
    ),
    (
        "break_continue.irad",
        "skip_and_stop",
        "[0.4, -0.3, 0.9, 0.2, -1.1, 0.7, 0.5, 0.3], 1.2",
        1.5523535624675748,
    ),
    (
        "break_continue.irad",
        "skip_and_stop",
        "[0.4, -0.3, 0.9, 0.2, -1.1, 0.7, 0.5, 0.3], 10.0",
        1.3209255121659553,
    ),
    (
        "break_continue.irad",
        "skip_and_stop",
        "[-0.5, 2.5, 0.1], 0.75",
        1.7037827206672107,
    ),
    (
        "early_return.irad",
        "scan",
        "[0.3, -0.5, 0.8, 1.1, -0.7, 0.45], 0.6",
        9.497108570545597,
    ),
    (
        "early_return.irad",
        "scan",
        "[0.2, 0.1, -0.3, 0.25, 0.4], 0.07",
        -0.859805048958562,
    ),
    ("higher_order.irad", "hof", "0.6, -0.9", 3.0270231888445673),
    ("higher_order.irad", "hof", "1.4, 0.35", 3.089801661430079),
    (
        "horner.irad",
        "horner",
        "[1.5, -0.7, 0.25, 0.9, -0.3], 1.3",
        1.87295121129063,
    ),
    (
        "horner.irad",
        "horner",
        "[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2], -0.85",
        -0.07316461056596665,
    ),
    (
        "int_mixed.irad",
        "int_mixed",
        "6, 0.73, 4, 1.9",
        228.75278907407872,
    ),
    (
        "int_mixed.irad",
        "int_mixed",
        "9, 1.37, 2, -0.45",
        -315.7104935982208,
    ),
    (
        "recursive_power.irad",
        "rpow_main",
        "1.1, 7, 0.9",
        1.193651705000001,
    ),
    (
        "recursive_power.irad",
        "rpow_main",
        "-0.8, 10, 1.05",
        1.5552478614581573,
    ),
    (
        "recursive_power.irad",
        "rpow_main",
        "1.3, 0, -0.7",
        1.403571,
    ),
    (
        "rosenbrock.irad",
        "rosenbrock",
        "[0.5, 0.8, -0.3, 1.2, 0.9]",
        273.0,
    ),
    (
        "rosenbrock.irad",
        "rosenbrock",
        "[0.5, 0.7524, 0.7728, 0.5423, 0.2730, 0.2123, 0.4162, 0.6971, 0.7968, 0.6236, 0.3368, 0.2000, 0.3390, 0.6252, 0.7972, 0.6950, 0.4140, 0.2116, 0.2744, 0.5445, 0.7739, 0.7513, 0.4975, 0.2474, 0.2237, 0.4401, 0.7294]",
        243.23216297174795,
    ),
    (
        "scalar_prims.irad",
        "prims",
        "0.7, 1.3",
        -0.8770575753291618,
    ),
    ("scalar_prims.irad", "prims", "1.9, 0.45", 4.730709860850151),
    (
        "scalar_prims.irad",
        "prims",
        "-0.6, 1.5",
        -2.338049469503823,
    ),
    ("static_calls.irad", "chain", "0.8, -1.1", 0.662699883245808),
    ("static_calls.irad", "chain", "2.3, 0.4", 0.5940445723403591),
    (
        "tuples.irad",
        "tuples",
        "(0.8, -0.4), 0.3, 3",
        1.7375432757759182,
    ),
    (
        "tuples.irad",
        "tuples",
        "(-1.2, 0.5), -0.7, 2",
        2.4663301488380505,
    ),
];

/// Corpus programs that have an IR twin in `tests/data/`.
const TWINS: &[&str] = &[
    "break_continue",
    "recursive_power",
    "static_calls",
    "tuples",
];

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-10 || (a - b).abs() <= 1e-8 * b.abs()
}

#[test]
fn corpus_lowers_verifies_and_computes_the_reference_values() {
    for &(file, func, args, want) in CASES {
        let m = compile_ok(&data(&format!("surface/{file}")));
        let got = run_f64(&m, func, args);
        assert!(
            close(got, want),
            "{file} @{func}({args}) = {got}, want {want}"
        );
        let stem = file.trim_end_matches(".irad");
        if TWINS.contains(&stem) {
            let twin = parse_module(&data(&format!("{stem}.ir"))).expect("twin parses");
            let twin_val = run_f64(&twin, func, args);
            assert!(close(got, twin_val), "{file}: {got} vs IR twin {twin_val}");
        }
    }
}

#[test]
fn every_corpus_file_lowers() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/surface");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("corpus dir").flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "irad") {
            let m = compile_ok(&std::fs::read_to_string(&path).expect("reads"));
            // The printed IR reads back: the lowering makes only valid names.
            let text = print_module(&m);
            let back = parse_module(&text).expect("printed IR parses");
            assert_eq!(print_module(&back), text);
            n += 1;
        }
    }
    assert_eq!(n, 11);
}

#[test]
fn run_time_errors_name_the_source_line() {
    let m = compile_ok("fn f(a: [f64], i: i64) -> f64 {\n    let x = 1.0;\n    x + a[i]\n}\n");
    let err = run(&m, "f", "[1.0], 3").expect_err("out of bounds");
    assert_eq!(err.msg, "index 3 out of bounds for array of length 1");
    assert_eq!(err.loc.pos.map(|p| (p.line, p.col)), Some((3, 9)));
    let m = compile_ok("fn g(n: i64) -> i64 {\n    let k = 0;\n    n / k\n}\n");
    let err = run(&m, "g", "3").expect_err("division by zero");
    assert_eq!(err.msg, "division by zero");
    assert_eq!(err.loc.pos.map(|p| (p.line, p.col)), Some((3, 7)));
}

#[test]
fn short_circuit_skips_the_right_operand() {
    // The right operands would fail (index out of bounds) if evaluated.
    let m = compile_ok(
        "fn f(a: [f64], i: i64) -> bool { i < len(a) && a[i] > 0.0 }\n\
         fn g(a: [f64], i: i64) -> bool { i >= len(a) || a[i] > 0.0 }\n",
    );
    assert!(matches!(run(&m, "f", "[1.0], 5"), Ok(Val::Bool(false))));
    assert!(matches!(run(&m, "f", "[1.0], 0"), Ok(Val::Bool(true))));
    assert!(matches!(run(&m, "g", "[1.0], 5"), Ok(Val::Bool(true))));
    assert!(matches!(run(&m, "g", "[-1.0], 0"), Ok(Val::Bool(false))));
}

#[test]
fn loops_and_shadowing_compute_what_rust_does() {
    let m = compile_ok(
        "fn f(n: i64) -> i64 {
            let mut s = 0;
            let mut i = 0;
            while i < n {
                i = i + 1;
                if i % 3 == 0 { continue; }
                let i = i * 10;
                s = s + i;
            }
            for j in 0..n {
                for k in 0..j {
                    if k > 2 { break; }
                    s = s + k;
                }
            }
            s
        }",
    );
    let rust = |n: i64| {
        let mut s = 0;
        let mut i = 0;
        while i < n {
            i += 1;
            if i % 3 == 0 {
                continue;
            }
            let i = i * 10;
            s += i;
        }
        for j in 0..n {
            for k in 0..j {
                if k > 2 {
                    break;
                }
                s += k;
            }
        }
        s
    };
    for n in [0, 1, 5, 9] {
        assert!(matches!(run(&m, "f", &n.to_string()), Ok(Val::I64(v)) if v == rust(n)));
    }
}

#[test]
fn fn_valued_locals_and_phis_of_functions() {
    let m = compile_ok(
        "fn sq(x: f64) -> f64 { x * x }
         fn f(x: f64, b: bool) -> f64 {
             let mut g = sin;
             let h = if b { sq } else { cos };
             for i in 0..3 { g = h; }
             let k = sq;
             g(x) + k(x)
         }",
    );
    assert!(close(run_f64(&m, "f", "2.0, true"), 8.0));
    assert!(close(run_f64(&m, "f", "0.0, false"), 1.0));
}

#[test]
fn alloc_and_array_writes() {
    let m = compile_ok(
        "fn f(n: i64) -> f64 {
             let a: [i64] = alloc(n);
             let b = zeros(n);
             for i in 0..n { a[i] = i * i; b[i] = f64(a[i]) + 0.5; }
             let mut s = 0.0;
             for i in 0..len(b) { s = s + b[i]; }
             s
         }",
    );
    assert!(close(run_f64(&m, "f", "4"), 16.0));
}

#[test]
fn primitives_by_their_ir_names() {
    let m = compile_ok(
        "fn f(x: f64, b: bool) -> f64 {
             let t = tuple(x, 2, b);
             let a = copy(zeros(3));
             a[1] = getfield(t, 0);
             let y = select(getfield(t, 2), a[1], -1.0);
             y * f64(getfield(t, 1)) + f64(length(a)) + powi(x, -2)
         }",
    );
    assert!(close(run_f64(&m, "f", "2.0, true"), 4.0 + 3.0 + 0.25));
    assert!(close(run_f64(&m, "f", "2.0, false"), -2.0 + 3.0 + 0.25));
}

#[test]
fn check_resolves_names_and_bindings() {
    use irad_ir::surface::ast::{ExprKind, Res, StmtKind};
    let src = "fn g(x: f64) -> f64 { x }\nfn f(x: f64) -> f64 {\n    let mut y = g(x);\n    y = sin(y);\n    y\n}\n";
    let file = surface::parse(src).expect("parses");
    let info = surface::check(&file).expect("checks");
    assert_eq!(info.types.len(), file.n_exprs() as usize);
    let local_names: Vec<&str> = info.local_names.iter().map(|&s| file.name(s)).collect();
    assert_eq!(local_names, ["x", "x", "y"]);
    let f = &file.funcs[1];
    let stmts = file.stmts(f.body.stmts);
    let StmtKind::Let { name, init, .. } = &stmts[0].kind else {
        panic!("a let")
    };
    let ExprKind::Call { callee, args } = &file.expr(*init).kind else {
        panic!("a call")
    };
    let Some(&Res::Func(g)) = info.names.get(callee) else {
        panic!("not resolved to a function")
    };
    assert_eq!(file.name(g), "g");
    let param = info.locals[&file.params(f.params)[0].name.pos];
    let arg = file.exprs(*args)[0];
    assert_eq!(info.names.get(&arg), Some(&Res::Local(param)));
    assert_eq!(info.types[init.0 as usize], irad_ir::Type::F64);
    let StmtKind::Assign {
        name: assigned,
        value,
    } = &stmts[1].kind
    else {
        panic!("an assignment")
    };
    assert_eq!(info.locals[&assigned.pos], info.locals[&name.pos]);
    let ExprKind::Call { callee, .. } = &file.expr(*value).kind else {
        panic!("a call")
    };
    assert_eq!(info.names.get(callee), Some(&Res::Prim(irad_ir::Prim::Sin)));
}

// ---------------------------------------------------------------- snapshots

#[test]
fn snapshot_straight_line() {
    check_ir(
        "fn f(x: f64, y: f64) -> f64 {\n    let a = x * y + 1.0;\n    let a = a - -2.0;\n    sin(a) / y\n}\n",
        expect![[r#"
            func @f(%x: f64, %y: f64) -> f64 {
            #1:
              %0 = call mul(%x, %y) :: f64
              %a = call add(%0, 1.0) :: f64
              %a_1 = call sub(%a, -2.0) :: f64
              %1 = call sin(%a_1) :: f64
              %2 = call div(%1, %y) :: f64
              return %2
            }
        "#]],
    );
}

/// Made names (`y_2`) that a parameter or a variable spells already, and
/// names that look made (`y_2_1`, `x_01`, `x_0`), each stay distinct.
#[test]
fn snapshot_value_names_that_collide() {
    check_ir(
        "fn f(y_1: f64, x_01: f64) -> f64 {\n    let mut y = y_1 * 2.0;\n    y = y + 1.0;\n    let y_2 = y * 3.0;\n    y = y_2 * y;\n    let x_0 = y + x_01;\n    let x = x_0 * 2.0;\n    let x_01 = x + 1.0;\n    let x = x_01 - 1.0;\n    let y_2_1 = x * y;\n    let y_2 = y_2_1 + y;\n    y + y_2\n}\n",
        expect![[r#"
            func @f(%y_1: f64, %x_01: f64) -> f64 {
            #1:
              %y = call mul(%y_1, 2.0) :: f64
              %y_2 = call add(%y, 1.0) :: f64
              %y_2_1 = call mul(%y_2, 3.0) :: f64
              %y_3 = call mul(%y_2_1, %y_2) :: f64
              %x_0 = call add(%y_3, %x_01) :: f64
              %x = call mul(%x_0, 2.0) :: f64
              %x_01_1 = call add(%x, 1.0) :: f64
              %x_1 = call sub(%x_01_1, 1.0) :: f64
              %y_2_1_1 = call mul(%x_1, %y_3) :: f64
              %y_2_2 = call add(%y_2_1_1, %y_3) :: f64
              %0 = call add(%y_3, %y_2_2) :: f64
              return %0
            }
        "#]],
    );
}

#[test]
fn snapshot_if_else_expression() {
    check_ir(
        "fn f(x: f64) -> f64 {\n    let y = if x < 0.0 { -x } else { x * 2.0 };\n    y + 1.0\n}\n",
        expect![[r#"
            func @f(%x: f64) -> f64 {
            #1:
              %0 = call lt(%x, 0.0) :: bool
              gotoifnot %0, #3
            #2:
              %1 = call neg(%x) :: f64
              goto #4
            #3:
              %2 = call mul(%x, 2.0) :: f64
              goto #4
            #4:
              %y = phi [#2 => %1, #3 => %2] :: f64
              %3 = call add(%y, 1.0) :: f64
              return %3
            }
        "#]],
    );
}

#[test]
fn snapshot_else_if_chain() {
    check_ir(
        "fn sign(x: i64) -> i64 {\n    if x < 0 { -1 } else if x == 0 { 0 } else { 1 }\n}\n",
        expect![[r#"
            func @sign(%x: i64) -> i64 {
            #1:
              %0 = call lt(%x, 0) :: bool
              gotoifnot %0, #3
            #2:
              goto #6
            #3:
              %1 = call eq(%x, 0) :: bool
              gotoifnot %1, #5
            #4:
              goto #6
            #5:
              goto #6
            #6:
              %2 = phi [#2 => -1, #4 => 0, #5 => 1] :: i64
              return %2
            }
        "#]],
    );
}

#[test]
fn snapshot_while_with_mutable_variables() {
    check_ir(
        "fn f(n: i64) -> f64 {\n    let mut i = 0;\n    let mut s = 0.0;\n    let c = 2.0;\n    while i < n {\n        s = s * c + 1.0;\n        i = i + 1;\n    }\n    s\n}\n",
        expect![[r#"
            func @f(%n: i64) -> f64 {
            #1:
              goto #2
            #2:
              %i = phi [#1 => 0, #3 => %i_1] :: i64
              %s = phi [#1 => 0.0, #3 => %s_1] :: f64
              %0 = call lt(%i, %n) :: bool
              gotoifnot %0, #4
            #3:
              %1 = call mul(%s, 2.0) :: f64
              %s_1 = call add(%1, 1.0) :: f64
              %i_1 = call iadd(%i, 1) :: i64
              goto #2
            #4:
              return %s
            }
        "#]],
    );
}

#[test]
fn snapshot_for_with_break_and_continue() {
    check_ir(
        "fn f(x: [f64]) -> f64 {\n    let mut s = 0.0;\n    for i in 0..len(x) {\n        if x[i] < 0.0 { continue; }\n        if x[i] > 10.0 { break; }\n        s = s + x[i];\n    }\n    s\n}\n",
        expect![[r#"
            func @f(%x: [f64]) -> f64 {
            #1:
              %0 = call length(%x) :: i64
              goto #2
            #2:
              %i = phi [#1 => 0, #8 => %i_1] :: i64
              %s = phi [#1 => 0.0, #8 => %s_2] :: f64
              %1 = call lt(%i, %0) :: bool
              gotoifnot %1, #9
            #3:
              %2 = call arrayref(%x, %i) :: f64
              %3 = call lt(%2, 0.0) :: bool
              gotoifnot %3, #5
            #4:
              goto #8
            #5:
              %4 = call arrayref(%x, %i) :: f64
              %5 = call gt(%4, 10.0) :: bool
              gotoifnot %5, #7
            #6:
              goto #9
            #7:
              %6 = call arrayref(%x, %i) :: f64
              %s_1 = call add(%s, %6) :: f64
              goto #8
            #8:
              %s_2 = phi [#4 => %s, #7 => %s_1] :: f64
              %i_1 = call iadd(%i, 1) :: i64
              goto #2
            #9:
              return %s
            }
        "#]],
    );
}

#[test]
fn snapshot_nested_loops() {
    check_ir(
        "fn f(n: i64) -> i64 {\n    let mut s = 0;\n    for i in 0..n {\n        let mut j = 0;\n        while j < i {\n            s = s + j;\n            j = j + 1;\n        }\n    }\n    s\n}\n",
        expect![[r#"
            func @f(%n: i64) -> i64 {
            #1:
              goto #2
            #2:
              %i = phi [#1 => 0, #7 => %i_1] :: i64
              %s = phi [#1 => 0, #7 => %s_1] :: i64
              %0 = call lt(%i, %n) :: bool
              gotoifnot %0, #8
            #3:
              goto #4
            #4:
              %j = phi [#3 => 0, #5 => %j_1] :: i64
              %s_1 = phi [#3 => %s, #5 => %s_2] :: i64
              %1 = call lt(%j, %i) :: bool
              gotoifnot %1, #6
            #5:
              %s_2 = call iadd(%s_1, %j) :: i64
              %j_1 = call iadd(%j, 1) :: i64
              goto #4
            #6:
              goto #7
            #7:
              %i_1 = call iadd(%i, 1) :: i64
              goto #2
            #8:
              return %s
            }
        "#]],
    );
}

#[test]
fn snapshot_early_return_in_a_loop() {
    check_ir(
        "fn find(x: [f64], t: f64) -> i64 {\n    for i in 0..len(x) {\n        if x[i] > t { return i; }\n    }\n    -1\n}\n",
        expect![[r#"
            func @find(%x: [f64], %t: f64) -> i64 {
            #1:
              %0 = call length(%x) :: i64
              goto #2
            #2:
              %i = phi [#1 => 0, #6 => %i_1] :: i64
              %1 = call lt(%i, %0) :: bool
              gotoifnot %1, #7
            #3:
              %2 = call arrayref(%x, %i) :: f64
              %3 = call gt(%2, %t) :: bool
              gotoifnot %3, #5
            #4:
              return %i
            #5:
              goto #6
            #6:
              %i_1 = call iadd(%i, 1) :: i64
              goto #2
            #7:
              return -1
            }
        "#]],
    );
}

#[test]
fn snapshot_and_or() {
    check_ir(
        "fn f(a: f64, b: f64) -> bool {\n    a > 0.0 && b > 0.0 || a == b\n}\n",
        expect![[r#"
            func @f(%a: f64, %b: f64) -> bool {
            #1:
              %0 = call gt(%a, 0.0) :: bool
              gotoifnot %0, #3
            #2:
              %1 = call gt(%b, 0.0) :: bool
              goto #3
            #3:
              %2 = phi [#1 => false, #2 => %1] :: bool
              %3 = call not(%2) :: bool
              gotoifnot %3, #5
            #4:
              %4 = call eq(%a, %b) :: bool
              goto #5
            #5:
              %5 = phi [#3 => true, #4 => %4] :: bool
              return %5
            }
        "#]],
    );
}

#[test]
fn snapshot_tuples() {
    check_ir(
        "fn swap(p: (f64, i64)) -> (i64, f64) {\n    (p.1, p.0)\n}\nfn g(x: f64) -> f64 {\n    let t = swap((x, 3));\n    t.1 * f64(t.0)\n}\n",
        expect![[r#"
            func @swap(%p: (f64, i64)) -> (i64, f64) {
            #1:
              %0 = call getfield(%p, 1) :: i64
              %1 = call getfield(%p, 0) :: f64
              %2 = call tuple(%0, %1) :: (i64, f64)
              return %2
            }

            func @g(%x: f64) -> f64 {
            #1:
              %0 = call tuple(%x, 3) :: (f64, i64)
              %t = invoke @swap(%0) :: (i64, f64)
              %1 = call getfield(%t, 1) :: f64
              %2 = call getfield(%t, 0) :: i64
              %3 = call sitofp(%2) :: f64
              %4 = call mul(%1, %3) :: f64
              return %4
            }
        "#]],
    );
}

#[test]
fn snapshot_array_writes() {
    check_ir(
        "fn fill(a: [f64], v: f64) {\n    for i in 0..len(a) {\n        a[i] = v * f64(i);\n    }\n}\nfn mk(n: i64) -> [bool] {\n    let b: [bool] = alloc(n);\n    b[0] = true;\n    b\n}\n",
        expect![[r#"
            func @fill(%a: [f64], %v: f64) -> () {
            #1:
              %0 = call length(%a) :: i64
              goto #2
            #2:
              %i = phi [#1 => 0, #4 => %i_1] :: i64
              %1 = call lt(%i, %0) :: bool
              gotoifnot %1, #5
            #3:
              %2 = call sitofp(%i) :: f64
              %3 = call mul(%v, %2) :: f64
              call arrayset(%a, %i, %3)
              goto #4
            #4:
              %i_1 = call iadd(%i, 1) :: i64
              goto #2
            #5:
              return ()
            }

            func @mk(%n: i64) -> [bool] {
            #1:
              %b = call alloc(%n) :: [bool]
              call arrayset(%b, 0, true)
              return %b
            }
        "#]],
    );
}

#[test]
fn snapshot_recursion() {
    check_ir(
        "fn fib(n: i64) -> i64 {\n    if n < 2 { return n; }\n    fib(n - 1) + fib(n - 2)\n}\n",
        expect![[r#"
            func @fib(%n: i64) -> i64 {
            #1:
              %0 = call lt(%n, 2) :: bool
              gotoifnot %0, #3
            #2:
              return %n
            #3:
              %1 = call isub(%n, 1) :: i64
              %2 = invoke @fib(%1) :: i64
              %3 = call isub(%n, 2) :: i64
              %4 = invoke @fib(%3) :: i64
              %5 = call iadd(%2, %4) :: i64
              return %5
            }
        "#]],
    );
}

#[test]
fn snapshot_higher_order_call() {
    check_ir(
        "fn apply(f: fn(f64) -> f64, x: f64) -> f64 { f(x) * 2.0 }\nfn sq(x: f64) -> f64 { x * x }\nfn main(x: f64) -> f64 { apply(sq, x) + apply(sin, x) }\n",
        expect![[r#"
            func @apply(%f: fn(f64) -> f64, %x: f64) -> f64 {
            #1:
              %0 = call %f(%x) :: f64
              %1 = call mul(%0, 2.0) :: f64
              return %1
            }

            func @sq(%x: f64) -> f64 {
            #1:
              %0 = call mul(%x, %x) :: f64
              return %0
            }

            func @main(%x: f64) -> f64 {
            #1:
              %0 = invoke @apply(@sq, %x) :: f64
              %1 = invoke @apply(@sin, %x) :: f64
              %2 = call add(%0, %1) :: f64
              return %2
            }
        "#]],
    );
}

#[test]
fn snapshot_loop_at_function_start_and_unit_values() {
    check_ir(
        "fn f(n: i64) {\n    let mut i = n;\n    while i > 0 {\n        i = i - 1;\n    }\n    let u = ();\n    return u;\n}\n",
        expect![[r#"
            func @f(%n: i64) -> () {
            #1:
              goto #2
            #2:
              %i = phi [#1 => %n, #3 => %i_1] :: i64
              %0 = call gt(%i, 0) :: bool
              gotoifnot %0, #4
            #3:
              %i_1 = call isub(%i, 1) :: i64
              goto #2
            #4:
              return ()
            }
        "#]],
    );
}

// ---------------------------------------------------------------- random programs

/// A scalar type of the generated programs.
#[derive(Copy, Clone, PartialEq, Debug)]
enum Ty {
    F,
    I,
    B,
}

struct Var {
    name: String,
    ty: Ty,
    mutable: bool,
}

/// Renders a well-typed program from a stream of choices (as Hypothesis
/// does): proptest shrinks the stream, the renderer keeps track of scopes,
/// mutability and loops, so every program it writes type-checks.
struct Gen<'c> {
    choices: &'c [u32],
    next: usize,
    out: String,
    vars: Vec<Var>,
    loops: u32,
    fresh: u32,
}

impl Gen<'_> {
    fn pick(&mut self, n: u32) -> u32 {
        let c = self.choices.get(self.next).copied().unwrap_or(0);
        self.next += 1;
        c % n
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.fresh += 1;
        format!("{prefix}{}", self.fresh)
    }

    /// The variables in scope (a `let` hides earlier ones of its name).
    fn visible(&self) -> Vec<&Var> {
        self.vars
            .iter()
            .enumerate()
            .filter(|(i, v)| !self.vars[i + 1..].iter().any(|w| w.name == v.name))
            .map(|(_, v)| v)
            .collect()
    }

    fn var_of(&mut self, ty: Ty, mutable_only: bool) -> Option<String> {
        let names: Vec<String> = self
            .visible()
            .into_iter()
            .filter(|v| v.ty == ty && (v.mutable || !mutable_only))
            .map(|v| v.name.clone())
            .collect();
        if names.is_empty() {
            return None;
        }
        let k = self.pick(names.len() as u32) as usize;
        names.get(k).cloned()
    }

    fn expr(&mut self, ty: Ty, depth: u32) -> String {
        let leaf = depth == 0 || self.pick(3) == 0;
        if leaf {
            if self.pick(2) == 0
                && let Some(v) = self.var_of(ty, false)
            {
                return v;
            }
            return match ty {
                Ty::F => format!("{}.5", self.pick(4)),
                Ty::I => format!("{}", self.pick(5)),
                Ty::B => ["true", "false"][self.pick(2) as usize].to_string(),
            };
        }
        let d = depth - 1;
        match ty {
            Ty::F => match self.pick(8) {
                0 => format!("({} + {})", self.expr(Ty::F, d), self.expr(Ty::F, d)),
                1 => format!("({} * {})", self.expr(Ty::F, d), self.expr(Ty::F, d)),
                2 => format!("-{}", self.expr(Ty::F, d)),
                3 => format!("sin({})", self.expr(Ty::F, d)),
                4 => format!("f64({})", self.expr(Ty::I, d)),
                5 => format!(
                    "(if {} {{ {} }} else {{ {} }})",
                    self.expr(Ty::B, d),
                    self.expr(Ty::F, d),
                    self.expr(Ty::F, d)
                ),
                6 => format!(
                    "(if {} {{ {} }} else if {} {{ {} }} else {{ {} }})",
                    self.expr(Ty::B, d),
                    self.expr(Ty::F, d),
                    self.expr(Ty::B, d),
                    self.expr(Ty::F, d),
                    self.expr(Ty::F, d)
                ),
                _ => format!("h({}, {})", self.expr(Ty::F, d), self.expr(Ty::I, d)),
            },
            Ty::I => match self.pick(5) {
                0 => format!("({} + {})", self.expr(Ty::I, d), self.expr(Ty::I, d)),
                1 => format!("({} * {})", self.expr(Ty::I, d), self.expr(Ty::I, d)),
                2 => format!("({} % {})", self.expr(Ty::I, d), self.expr(Ty::I, d)),
                3 => format!("-{}", self.expr(Ty::I, d)),
                _ => format!(
                    "(if {} {{ {} }} else {{ {} }})",
                    self.expr(Ty::B, d),
                    self.expr(Ty::I, d),
                    self.expr(Ty::I, d)
                ),
            },
            Ty::B => match self.pick(5) {
                0 => format!("({} < {})", self.expr(Ty::F, d), self.expr(Ty::F, d)),
                1 => format!("({} >= {})", self.expr(Ty::I, d), self.expr(Ty::I, d)),
                2 => format!("({} && {})", self.expr(Ty::B, d), self.expr(Ty::B, d)),
                3 => format!("({} || {})", self.expr(Ty::B, d), self.expr(Ty::B, d)),
                _ => format!("!{}", self.expr(Ty::B, d)),
            },
        }
    }

    fn ty(&mut self) -> Ty {
        [Ty::F, Ty::I, Ty::B][self.pick(3) as usize]
    }

    fn block(&mut self, depth: u32, indent: usize) {
        let scope = self.vars.len();
        self.stmts(depth, indent);
        self.vars.truncate(scope);
    }

    fn stmts(&mut self, depth: u32, indent: usize) {
        let n = 1 + self.pick(4);
        for _ in 0..n {
            self.stmt(depth, indent);
        }
    }

    fn line(&mut self, indent: usize, text: &str) {
        self.out.push_str(&" ".repeat(indent * 4));
        self.out.push_str(text);
        self.out.push('\n');
    }

    fn stmt(&mut self, depth: u32, indent: usize) {
        let kinds = if depth == 0 { 3 } else { 8 };
        match self.pick(kinds) {
            0 => {
                let ty = self.ty();
                let e = self.expr(ty, 2);
                let mutable = self.pick(2) == 0;
                // Sometimes shadow a variable in scope, maybe with another type.
                let visible: Vec<String> = self.visible().iter().map(|v| v.name.clone()).collect();
                let name = match self.pick(3) {
                    0 if !visible.is_empty() => {
                        let k = self.pick(visible.len() as u32) as usize;
                        visible[k].clone()
                    }
                    _ => self.fresh("v"),
                };
                let m = if mutable { "mut " } else { "" };
                self.line(indent, &format!("let {m}{name} = {e};"));
                self.vars.push(Var { name, ty, mutable });
            }
            1 | 2 => {
                let ty = self.ty();
                if let Some(v) = self.var_of(ty, true) {
                    let e = self.expr(ty, 2);
                    self.line(indent, &format!("{v} = {e};"));
                }
            }
            3 => {
                let c = self.expr(Ty::B, 2);
                self.line(indent, &format!("if {c} {{"));
                self.block(depth - 1, indent + 1);
                match self.pick(3) {
                    0 => {}
                    1 => {
                        self.line(indent, "} else {");
                        self.block(depth - 1, indent + 1);
                    }
                    _ => {
                        let c = self.expr(Ty::B, 2);
                        self.line(indent, &format!("}} else if {c} {{"));
                        self.block(depth - 1, indent + 1);
                        self.line(indent, "} else {");
                        self.block(depth - 1, indent + 1);
                    }
                }
                self.line(indent, "}");
            }
            4 => {
                // A while loop with a counter that bounds it.
                let w = self.fresh("w");
                let limit = self.pick(4);
                let c = self.expr(Ty::B, 1);
                self.line(indent, &format!("let mut {w} = 0;"));
                self.line(indent, &format!("while {w} < {limit} && {c} {{"));
                self.line(indent + 1, &format!("{w} = {w} + 1;"));
                self.loops += 1;
                self.block(depth - 1, indent + 1);
                self.loops -= 1;
                self.line(indent, "}");
            }
            5 => {
                let i = self.fresh("i");
                let (a, b) = (self.pick(3), self.pick(5));
                self.line(indent, &format!("for {i} in {a}..{b} {{"));
                self.vars.push(Var {
                    name: i,
                    ty: Ty::I,
                    mutable: false,
                });
                self.loops += 1;
                self.block(depth - 1, indent + 1);
                self.loops -= 1;
                self.vars.pop();
                self.line(indent, "}");
            }
            6 if self.loops > 0 => {
                let c = self.expr(Ty::B, 1);
                let word = ["break", "continue"][self.pick(2) as usize];
                self.line(indent, &format!("if {c} {{ {word}; }}"));
            }
            _ => {
                let c = self.expr(Ty::B, 1);
                let e = self.expr(Ty::F, 1);
                self.line(indent, &format!("if {c} {{ return {e}; }}"));
            }
        }
    }

    fn program(choices: &[u32]) -> String {
        let mut g = Gen {
            choices,
            next: 0,
            out: String::new(),
            vars: Vec::new(),
            loops: 0,
            fresh: 0,
        };
        g.out
            .push_str("fn h(x: f64, n: i64) -> f64 { x * 0.5 + f64(n) }\n");
        g.out.push_str("fn f(p: f64, q: i64, r: bool) -> f64 {\n");
        for (name, ty) in [("p", Ty::F), ("q", Ty::I), ("r", Ty::B)] {
            g.vars.push(Var {
                name: name.into(),
                ty,
                mutable: false,
            });
        }
        for (name, ty, init) in [("a", Ty::F, "p"), ("k", Ty::I, "q"), ("c", Ty::B, "r")] {
            g.line(1, &format!("let mut {name} = {init};"));
            g.vars.push(Var {
                name: name.into(),
                ty,
                mutable: true,
            });
        }
        // The function body's statements: its `let`s stay in scope for the tail.
        g.stmts(3, 1);
        // `a` may have been shadowed by a non-f64 `let`: the tail is any f64.
        let tail = g.expr(Ty::F, 3);
        g.line(1, &tail);
        g.out.push_str("}\n");
        g.out
    }
}

fn random_program_holds(choices: &[u32]) {
    let src = Gen::program(choices);
    let m = compile_ok(&src);
    let want = oracle::run_f(&src, 0.75, 3, true);
    match (run(&m, "f", "0.75, 3, true"), want) {
        (Ok(Val::F64(x)), Some(y)) => assert!(
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
            "IR gives {x}, the source means {y}\n{src}\n{}",
            print_module(&m)
        ),
        (Ok(other), _) => panic!("f returned {other:?}, the source means {want:?}\n{src}"),
        (Err(e), want) => {
            assert!(
                !e.msg.starts_with("internal error"),
                "{}\n{src}\n{}",
                e.msg,
                print_module(&m)
            );
            assert_eq!(
                want, None,
                "IR fails ({}), the source does not\n{src}",
                e.msg
            );
        }
    }
}

/// A direct evaluator of the surface subset the generator writes, over the
/// checked syntax tree: the meaning the lowering must preserve.
mod oracle {
    use irad_ir::surface::ast::{
        BinOp, Block, Expr, ExprId, ExprKind, File, Res, Stmt, StmtKind, TypeInfo, UnOp,
    };
    use irad_ir::surface::{self};
    use std::collections::HashMap;

    #[derive(Copy, Clone, Debug, PartialEq)]
    enum V {
        F(f64),
        I(i64),
        B(bool),
        U,
    }

    /// Why evaluation stopped early; `Fail` is a run-time error.
    enum Stop {
        Break,
        Continue,
        Return(V),
        Fail,
    }

    struct Eval<'a> {
        file: &'a File,
        info: &'a TypeInfo,
        env: HashMap<u32, V>,
    }

    /// `f(p, q, r)` of the program; `None` on a run-time error.
    pub fn run_f(src: &str, p: f64, q: i64, r: bool) -> Option<f64> {
        let file = surface::parse(src).ok()?;
        let info = surface::check(&file).ok()?;
        let mut ev = Eval {
            file: &file,
            info: &info,
            env: HashMap::new(),
        };
        match ev.call("f", &[V::F(p), V::I(q), V::B(r)]) {
            Ok(V::F(x)) => Some(x),
            _ => None,
        }
    }

    impl Eval<'_> {
        fn call(&mut self, name: &str, args: &[V]) -> Result<V, Stop> {
            let file = self.file;
            let f = file
                .funcs
                .iter()
                .find(|f| file.name(f.name.name) == name)
                .ok_or(Stop::Fail)?;
            let saved = std::mem::take(&mut self.env);
            for (param, arg) in file.params(f.params).iter().zip(args) {
                self.env.insert(self.info.locals[&param.name.pos].0, *arg);
            }
            let res = match self.block(&f.body) {
                Ok(v) | Err(Stop::Return(v)) => Ok(v),
                Err(_) => Err(Stop::Fail),
            };
            self.env = saved;
            res
        }

        fn block(&mut self, b: &Block) -> Result<V, Stop> {
            for s in self.file.stmts(b.stmts) {
                self.stmt(s)?;
            }
            match b.tail {
                Some(e) => self.ex(e),
                None => Ok(V::U),
            }
        }

        fn ex(&mut self, id: ExprId) -> Result<V, Stop> {
            self.expr(self.file.expr(id))
        }

        fn set(&mut self, pos: irad_ir::Pos, v: V) {
            self.env.insert(self.info.locals[&pos].0, v);
        }

        fn stmt(&mut self, s: &Stmt) -> Result<(), Stop> {
            match &s.kind {
                StmtKind::Let { name, init, .. } => {
                    let v = self.ex(*init)?;
                    self.set(name.pos, v);
                }
                StmtKind::Assign { name, value } => {
                    let v = self.ex(*value)?;
                    self.set(name.pos, v);
                }
                StmtKind::Expr(e) => {
                    self.ex(*e)?;
                }
                StmtKind::While { cond, body } => {
                    while self.ex(*cond)? == V::B(true) {
                        match self.block(body) {
                            Ok(_) | Err(Stop::Continue) => {}
                            Err(Stop::Break) => break,
                            Err(other) => return Err(other),
                        }
                    }
                }
                StmtKind::For {
                    var,
                    start,
                    end,
                    body,
                } => {
                    let (V::I(a), V::I(b)) = (self.ex(*start)?, self.ex(*end)?) else {
                        return Err(Stop::Fail);
                    };
                    for i in a..b {
                        self.set(var.pos, V::I(i));
                        match self.block(body) {
                            Ok(_) | Err(Stop::Continue) => {}
                            Err(Stop::Break) => break,
                            Err(other) => return Err(other),
                        }
                    }
                }
                StmtKind::Return(e) => {
                    let v = match e {
                        Some(e) => self.ex(*e)?,
                        None => V::U,
                    };
                    return Err(Stop::Return(v));
                }
                StmtKind::Break => return Err(Stop::Break),
                StmtKind::Continue => return Err(Stop::Continue),
                StmtKind::IndexAssign { .. } => return Err(Stop::Fail),
            }
            Ok(())
        }

        fn expr(&mut self, e: &Expr) -> Result<V, Stop> {
            Ok(match &e.kind {
                ExprKind::F64(x) => V::F(*x),
                ExprKind::I64(k) => V::I(*k),
                ExprKind::Bool(b) => V::B(*b),
                ExprKind::Unit => V::U,
                ExprKind::Name(_) => match self.info.names.get(&e.id) {
                    Some(Res::Local(id)) => *self.env.get(&id.0).ok_or(Stop::Fail)?,
                    _ => return Err(Stop::Fail),
                },
                ExprKind::Unary { op, operand } => match (op, self.ex(*operand)?) {
                    (UnOp::Neg, V::F(x)) => V::F(-x),
                    (UnOp::Neg, V::I(k)) => V::I(k.wrapping_neg()),
                    (UnOp::Not, V::B(b)) => V::B(!b),
                    _ => return Err(Stop::Fail),
                },
                ExprKind::Chain { first, rest } => {
                    let mut lhs = self.ex(*first)?;
                    for &(op, _, rhs) in self.file.links(*rest) {
                        lhs = match (op, lhs) {
                            (BinOp::And, V::B(false)) => V::B(false),
                            (BinOp::Or, V::B(true)) => V::B(true),
                            (BinOp::And | BinOp::Or, _) => self.ex(rhs)?,
                            _ => binary(op, lhs, self.ex(rhs)?)?,
                        };
                    }
                    lhs
                }
                ExprKind::Call { callee, args } => {
                    let mut vals = Vec::new();
                    for &a in self.file.exprs(*args) {
                        vals.push(self.ex(a)?);
                    }
                    let ExprKind::Name(name) = self.file.expr(*callee).kind else {
                        return Err(Stop::Fail);
                    };
                    let name = self.file.name(name);
                    match (name, vals.as_slice()) {
                        ("sin", [V::F(x)]) => V::F(irad_kernels::math::sin(*x)),
                        ("f64", [V::I(k)]) => V::F(*k as f64),
                        _ => self.call(name, &vals)?,
                    }
                }
                ExprKind::If { cond, then, els } => {
                    if self.ex(*cond)? == V::B(true) {
                        self.block(self.file.block(*then))?
                    } else if let Some(els) = els {
                        self.ex(*els)?
                    } else {
                        V::U
                    }
                }
                ExprKind::Block(b) => self.block(self.file.block(*b))?,
                _ => return Err(Stop::Fail),
            })
        }
    }

    fn binary(op: BinOp, a: V, b: V) -> Result<V, Stop> {
        Ok(match (op, a, b) {
            (BinOp::Add, V::F(x), V::F(y)) => V::F(x + y),
            (BinOp::Mul, V::F(x), V::F(y)) => V::F(x * y),
            (BinOp::Add, V::I(x), V::I(y)) => V::I(x.wrapping_add(y)),
            (BinOp::Mul, V::I(x), V::I(y)) => V::I(x.wrapping_mul(y)),
            (BinOp::Rem, V::I(_), V::I(0)) => return Err(Stop::Fail),
            (BinOp::Rem, V::I(x), V::I(y)) => V::I(x.wrapping_rem(y)),
            (BinOp::Lt, V::F(x), V::F(y)) => V::B(x < y),
            (BinOp::Ge, V::I(x), V::I(y)) => V::B(x >= y),
            (BinOp::Lt, V::I(x), V::I(y)) => V::B(x < y),
            _ => return Err(Stop::Fail),
        })
    }
}

#[test]
fn random_programs_fixed_seeds() {
    let n: u32 = std::env::var("IRAD_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    for seed in 0..n {
        let choices: Vec<u32> = (0..400u32)
            .map(|i| {
                (seed.wrapping_mul(2_654_435_761) ^ i.wrapping_mul(40_503)).rotate_left(i % 31)
            })
            .collect();
        random_program_holds(&choices);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
    #[test]
    fn random_well_typed_programs_lower_verify_and_run(
        choices in proptest::collection::vec(0u32..1000, 0..400)
    ) {
        random_program_holds(&choices);
    }
}
#[test]
fn long_runs_of_joins_lower_quickly() {
    // `x` is read only after 3000 joins: its read goes back through all of
    // them (deep recursion, one trivial phi per join, all removed).
    let mut src =
        String::from("fn f(p: f64, c: bool) -> f64 {\n    let x = p;\n    let mut s = 0.0;\n");
    for _ in 0..3000 {
        src.push_str("    if c { s = s + 1.0; } else { s = s - 1.0; }\n");
    }
    src.push_str("    x + s\n}\n");
    let start = std::time::Instant::now();
    let m = compile_ok(&src);
    assert!(close(run_f64(&m, "f", "0.5, true"), 3000.5));
    assert!(start.elapsed().as_secs() < 20, "took {:?}", start.elapsed());
}

#[test]
fn deep_nesting_within_the_parser_limit_lowers() {
    // Nested `if` expressions and loops, as deep as the parser allows.
    let depth = 120;
    let mut src = String::from("fn f(x: f64, n: i64) -> f64 {\n    let mut s = 0.0;\n");
    for k in 0..depth {
        src.push_str(&format!(
            "for i{k} in 0..n {{ s = s + 1.0; if s > x {{ break; }}\n"
        ));
    }
    src.push_str(&"}".repeat(depth));
    src.push_str("\n    s + ");
    for _ in 0..depth {
        src.push_str("if x > 0.0 { ");
    }
    src.push('x');
    for _ in 0..depth {
        src.push_str(" } else { 1.0 }");
    }
    src.push_str("\n}\n");
    let m = compile_ok(&src);
    assert!(close(run_f64(&m, "f", "3.0, 2"), 10.0));
}
