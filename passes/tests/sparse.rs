//! Sparse forward mode through the library (`GradOptions::lanes` =
//! `Lanes::Sparse`): the full gradient in one pass, equal to dense forward
//! mode's (within 1e-12 relative, floor 1e-12: the materialisation sums the
//! same products in another order) on edge cases (no differentiated input,
//! tuples, integers, branches, loops and phis, arrays written in place,
//! recursion, calls through function values), and its cost counted by the
//! interpreter: the statements and builder nodes of the full gradient of
//! `sum(x)` and of Rosenbrock's function grow linearly in n, where dense
//! forward mode's grow quadratically.

use irad_ir::interp::{Interpreter, RunOptions, Val};
use irad_ir::text::{parse_args, parse_module};
use irad_ir::verify::verify_module;
use irad_ir::{Lanes, Module};
use irad_passes::forward::Forward;
use irad_passes::forward::grad::{GradOptions, Gradient, plan};
use irad_rules::Registry;

const PROGRAMS: &str = "
func @sum(%x: [f64]) -> f64 {
#1:
  %n = call length(%x) :: i64
  goto #2
#2:
  %i = phi [#1 => 0, #3 => %i1] :: i64
  %s = phi [#1 => 0.0, #3 => %s1] :: f64
  %more = call lt(%i, %n) :: bool
  gotoifnot %more, #4
#3:
  %xi = call arrayref(%x, %i) :: f64
  %s1 = call add(%s, %xi) :: f64
  %i1 = call iadd(%i, 1) :: i64
  goto #2
#4:
  return %s
}

func @rosenbrock(%x: [f64]) -> f64 {
#1:
  %n = call length(%x) :: i64
  %m = call isub(%n, 1) :: i64
  goto #2
#2:
  %i = phi [#1 => 0, #3 => %i1] :: i64
  %s = phi [#1 => 0.0, #3 => %s1] :: f64
  %more = call lt(%i, %m) :: bool
  gotoifnot %more, #4
#3:
  %i1 = call iadd(%i, 1) :: i64
  %a = call arrayref(%x, %i1) :: f64
  %b = call arrayref(%x, %i) :: f64
  %bb = call mul(%b, %b) :: f64
  %d = call sub(%a, %bb) :: f64
  %e = call sub(1.0, %b) :: f64
  %d2 = call mul(%d, %d) :: f64
  %t = call mul(100.0, %d2) :: f64
  %e2 = call mul(%e, %e) :: f64
  %u = call add(%t, %e2) :: f64
  %s1 = call add(%s, %u) :: f64
  goto #2
#4:
  return %s
}

func @ints_only(%k: i64) -> f64 {
#1:
  %x = call sitofp(%k) :: f64
  %y = call mul(%x, 2.0) :: f64
  return %y
}

func @tuple(%t: (f64, i64, [f64]), %c: f64) -> f64 {
#1:
  %a = call getfield(%t, 0) :: f64
  %k = call getfield(%t, 1) :: i64
  %v = call getfield(%t, 2) :: [f64]
  %b = call arrayref(%v, %k) :: f64
  %p = call mul(%a, %b) :: f64
  %q = call div(%p, %c) :: f64
  %r = call sin(%q) :: f64
  return %r
}

func @branchy(%x: f64, %y: f64, %n: i64) -> f64 {
#1:
  goto #2
#2:
  %i = phi [#1 => 0, #5 => %i1] :: i64
  %acc = phi [#1 => %x, #5 => %acc2] :: f64
  %more = call lt(%i, %n) :: bool
  gotoifnot %more, #6
#3:
  %big = call gt(%acc, 1.0) :: bool
  gotoifnot %big, #4
#7:
  %h = call mul(%acc, 0.5) :: f64
  %h2 = call min(%h, %y) :: f64
  goto #5
#4:
  %g = call mul(%acc, %y) :: f64
  %g2 = call add(%g, 1.0) :: f64
  goto #5
#5:
  %acc2 = phi [#7 => %h2, #4 => %g2] :: f64
  %i1 = call iadd(%i, 1) :: i64
  goto #2
#6:
  return %acc
}

func @in_place(%a: [f64], %s: f64) -> f64 {
#1:
  %x = call arrayref(%a, 0) :: f64
  %y = call mul(%x, %s) :: f64
  call arrayset(%a, 1, %y)
  %z = call arrayref(%a, 1) :: f64
  %w = call exp(%z) :: f64
  %c = call copy(%a) :: [f64]
  call arrayset(%c, 0, %w)
  %r = call arrayref(%c, 0) :: f64
  %q = call pow(%r, %s) :: f64
  return %q
}

func @power(%x: f64, %n: i64) -> f64 {
#1:
  %z = call le(%n, 0) :: bool
  gotoifnot %z, #3
#2:
  return 1.0
#3:
  %m = call isub(%n, 1) :: i64
  %r = invoke @power(%x, %m) :: f64
  %y = call mul(%r, %x) :: f64
  return %y
}

func @apply(%f: fn(f64) -> f64, %x: f64, %y: f64) -> f64 {
#1:
  %a = call %f(%x) :: f64
  %g = call select(true, @sin, @cos) :: fn(f64) -> f64
  %b = call %g(%y) :: f64
  %h = call atan2(%a, %b) :: f64
  return %h
}

func @sq(%x: f64) -> f64 {
#1:
  %y = call mul(%x, %x) :: f64
  return %y
}
";

fn module() -> Module {
    let m = parse_module(PROGRAMS).expect("test IR parses");
    verify_module(&m).expect("test IR verifies");
    m
}

/// The gradient of `name` at `args` (`--args` text) with `lanes`, and the
/// interpreter's counters for it.
fn grad(name: &str, args: &str, lanes: Lanes) -> (Gradient, irad_ir::interp::InterpStats) {
    let mut m = module();
    let registry = Registry::new();
    let mut fwd = Forward::new(&registry);
    let f = m.by_name(name).expect("function exists");
    let params = m[f].param_types();
    let vals = parse_args(args, &params, &m).expect("args parse");
    let opts = GradOptions {
        lanes,
        ..GradOptions::default()
    };
    let p = plan(&mut m, &mut fwd, f, &vals, &opts).expect("the rule derives");
    let mut it = Interpreter::with_rules(&mut m, &mut fwd);
    let g = p
        .run(&mut it, &vals, &RunOptions::default())
        .expect("the gradient runs");
    (g, it.stats())
}

/// Every f64 of a gradient, in order.
fn flat(g: &Gradient) -> Vec<f64> {
    fn go(v: &Val, out: &mut Vec<f64>) {
        match v {
            Val::F64(x) => out.push(*x),
            Val::Tuple(vs) => vs.iter().for_each(|v| go(v, out)),
            Val::Array(a) => {
                if let irad_ir::interp::ArrayData::F64(xs) = &*a.0.borrow() {
                    out.extend(xs);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for v in g.gradient.iter().flatten() {
        go(v, &mut out);
    }
    out
}

fn assert_close(name: &str, dense: &[f64], sparse: &[f64]) {
    assert_eq!(dense.len(), sparse.len(), "@{name}: gradient sizes");
    for (k, (a, b)) in dense.iter().zip(sparse).enumerate() {
        let ok = a.to_bits() == b.to_bits()
            || (a.is_nan() && b.is_nan())
            || (a - b).abs() <= 1e-12 * a.abs().max(1.0);
        assert!(ok, "@{name}: component {k}: dense {a:?}, sparse {b:?}");
    }
}

#[test]
fn sparse_gradients_equal_dense_ones_in_one_pass() {
    let cases = [
        ("sum", "[1.0, -2.0, 3.5]"),
        ("sum", "[]"),
        ("rosenbrock", "[1.5, 0.5, -0.3, 2.0]"),
        ("ints_only", "4"),
        ("tuple", "(0.7, 1, [3.0, -1.25]), 1.5"),
        ("branchy", "0.3, 1.7, 6"),
        ("branchy", "2.5, 0.25, 4"),
        ("in_place", "[0.5, 9.0], 1.25"),
        ("power", "1.1, 7"),
        ("apply", "@sq, 0.4, 1.2"),
        ("apply", "@sin, 0.4, 1.2"),
    ];
    for (name, args) in cases {
        let (dense, _) = grad(name, args, Lanes::ONE);
        let (sparse, _) = grad(name, args, Lanes::Sparse);
        assert_eq!(sparse.passes, 1, "@{name}: one pass");
        assert!(sparse.value.same(&dense.value), "@{name}: value");
        assert_eq!(
            sparse
                .gradient
                .iter()
                .map(Option::is_some)
                .collect::<Vec<_>>(),
            dense
                .gradient
                .iter()
                .map(Option::is_some)
                .collect::<Vec<_>>(),
            "@{name}: which arguments have gradients"
        );
        assert_close(name, &flat(&dense), &flat(&sparse));
    }
}

#[test]
fn sparse_gradient_of_sum_is_all_ones_and_zero_inputs_work() {
    let (g, stats) = grad("sum", "[]", Lanes::Sparse);
    assert!(flat(&g).is_empty());
    assert_eq!(stats.sparse_nodes, 0);
    let (g, stats) = grad("sum", "[4.0, 5.0, 6.0]", Lanes::Sparse);
    assert_eq!(flat(&g), vec![1.0, 1.0, 1.0]);
    // Three seeds and two sums (the first add folds: 0 + t is t).
    assert_eq!(stats.sparse_nodes, 5);
    let (g, _) = grad("ints_only", "3", Lanes::Sparse);
    assert!(matches!(g.gradient.as_slice(), [None]));
}

/// An array of `n` values as `--args` text.
fn array(n: usize) -> String {
    let xs: Vec<String> = (0..n).map(|i| format!("{}.5", i % 7)).collect();
    format!("[{}]", xs.join(", "))
}

/// The full forward gradient at n and 2n elements: sparse mode's statements
/// and builder nodes double (ratio < 2.5), dense mode's (width 8) about
/// quadruple (ratio > 3.5).
#[test]
fn sparse_forward_gradients_scale_linearly_by_count() {
    let eight = Lanes::dense(8).expect("8 is not 0");
    for name in ["sum", "rosenbrock"] {
        let n = 400;
        let (_, s1) = grad(name, &array(n), Lanes::Sparse);
        let (_, s2) = grad(name, &array(2 * n), Lanes::Sparse);
        let ratio = s2.statements as f64 / s1.statements as f64;
        let nodes = s2.sparse_nodes as f64 / s1.sparse_nodes as f64;
        assert!(ratio < 2.5, "@{name}: sparse statements grew {ratio}x");
        assert!(nodes < 2.5, "@{name}: sparse nodes grew {nodes}x");
        let (_, d1) = grad(name, &array(n), eight);
        let (_, d2) = grad(name, &array(2 * n), eight);
        let dense = d2.statements as f64 / d1.statements as f64;
        assert!(dense > 3.5, "@{name}: dense statements grew only {dense}x");
        println!(
            "@{name}: n = {n} -> {}: sparse statements {} -> {} ({ratio:.2}x), nodes {} -> {} ({nodes:.2}x); dense (width 8) {} -> {} ({dense:.2}x)",
            2 * n,
            s1.statements,
            s2.statements,
            s1.sparse_nodes,
            s2.sparse_nodes,
            d1.statements,
            d2.statements
        );
    }
}
