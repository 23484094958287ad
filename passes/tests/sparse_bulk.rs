//! Sparse forward mode on the bulk array primitives (`sum dot axpy scale
//! matvec matmul fill copyto`, and `gemm`, the rules' own): each program's
//! full gradient in one pass equals dense forward mode's (within 1e-12
//! relative, floor 1e-12: the materialisation sums the same products in
//! another order), with arrays aliased across calls, constant and active
//! scalars, and written in place; and the cost of each rule is a few
//! statements per call whatever the length, with builder nodes linear in
//! the primitive's own work (`dot` of n elements: O(n) seeds and one node;
//! an n×n `matmul`: O(n^2) nodes, whose terms are the O(n^3) products).

use irad_ir::interp::{Interpreter, RunOptions, Val};
use irad_ir::text::{parse_args, parse_module};
use irad_ir::verify::verify_module;
use irad_ir::{Lanes, Module};
use irad_passes::forward::Forward;
use irad_passes::forward::grad::{GradOptions, Gradient, plan};
use irad_rules::Registry;

const PROGRAMS: &str = "
func @sumdot(%x: [f64], %y: [f64]) -> f64 {
#1:
  %s = call sum(%x) :: f64
  %d = call dot(%x, %y) :: f64
  %e = call dot(%x, %x) :: f64
  %t = call mul(%s, %d) :: f64
  %u = call add(%t, %e) :: f64
  return %u
}

func @dotn(%x: [f64], %y: [f64]) -> f64 {
#1:
  %d = call dot(%x, %y) :: f64
  return %d
}

func @updates(%a: f64, %x: [f64], %y: [f64]) -> f64 {
#1:
  call axpy(%a, %x, %y)
  call axpy(2.5, %y, %x)
  call scale(%a, %x)
  call scale(-3.0, %y)
  %s = call dot(%x, %y) :: f64
  %n = call length(%x) :: i64
  %z = call zeros(%n) :: [f64]
  call copyto(%z, %y)
  call axpy(%s, %z, %x)
  %t = call sum(%x) :: f64
  %u = call mul(%t, %a) :: f64
  return %u
}

func @fills(%v: f64, %x: [f64]) -> f64 {
#1:
  %s = call sin(%v) :: f64
  call fill(%x, %s)
  %y = call copy(%x) :: [f64]
  call fill(%y, 2.0)
  %d = call dot(%x, %y) :: f64
  %t = call sum(%x) :: f64
  %u = call mul(%d, %t) :: f64
  return %u
}

func @matvec(%a: [f64], %x: [f64]) -> f64 {
#1:
  %y = call zeros(2) :: [f64]
  call matvec(%a, %x, 2, 3, %y)
  %z = call zeros(3) :: [f64]
  call copyto(%z, %x)
  call matvec(%a, %z, 2, 3, %y)
  %d = call dot(%y, %y) :: f64
  return %d
}

func @matmul(%a: [f64], %b: [f64], %n: i64) -> f64 {
#1:
  %nn = call imul(%n, %n) :: i64
  %c = call zeros(%nn) :: [f64]
  call matmul(%a, %b, %n, %n, %n, %c)
  %d = call zeros(%nn) :: [f64]
  call matmul(%c, %a, %n, %n, %n, %d)
  %s = call dot(%d, %b) :: f64
  return %s
}

func @gemm(%a: [f64], %b: [f64], %c: [f64]) -> f64 {
#1:
  call gemm(true, false, %a, %b, 2, 3, 2, %c)
  call gemm(false, true, %a, %b, 2, 3, 2, %c)
  %s = call dot(%c, %c) :: f64
  return %s
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

/// An array of `n` values as `--args` text.
fn array(n: usize, seed: usize) -> String {
    let xs: Vec<String> = (0..n)
        .map(|i| format!("{}", ((i * 7 + seed * 3) % 11) as f64 / 4.0 - 1.2))
        .collect();
    format!("[{}]", xs.join(", "))
}

#[test]
fn sparse_gradients_of_bulk_primitives_equal_dense_ones() {
    let cases = [
        ("sumdot", format!("{}, {}", array(5, 1), array(5, 2))),
        ("sumdot", "[], []".to_string()),
        ("updates", format!("0.75, {}, {}", array(4, 1), array(4, 2))),
        ("updates", "-1.5, [], []".to_string()),
        ("fills", format!("0.4, {}", array(3, 1))),
        ("matvec", format!("{}, {}", array(6, 1), array(3, 2))),
        ("matmul", format!("{}, {}, 3", array(9, 1), array(9, 2))),
        ("matmul", "[], [], 0".to_string()),
        (
            "gemm",
            format!("{}, {}, {}", array(6, 1), array(6, 2), array(4, 3)),
        ),
    ];
    for (name, args) in &cases {
        let (dense, _) = grad(name, args, Lanes::ONE);
        let (sparse, _) = grad(name, args, Lanes::Sparse);
        assert_eq!(sparse.passes, 1, "@{name}: one pass");
        assert!(sparse.value.same(&dense.value), "@{name}: value");
        let dense = flat(&dense);
        assert!(
            dense.iter().any(|&d| d != 0.0) || args.contains("[]"),
            "@{name}({args}): a gradient that is all zero checks nothing"
        );
        assert_close(name, &dense, &flat(&sparse));
    }
}

/// The full gradient at n and 2n elements: sparse mode's statements and
/// nodes double at most for `dot` (the seeds; the rule is four statements
/// and three nodes), and an n×n `matmul`'s nodes grow as its output, n^2 (4x,
/// not 8x as its products).
#[test]
fn sparse_rules_of_bulk_primitives_cost_their_own_work() {
    let n = 300;
    let at = |n: usize| format!("{}, {}", array(n, 1), array(n, 2));
    let (_, s1) = grad("dotn", &at(n), Lanes::Sparse);
    let (_, s2) = grad("dotn", &at(2 * n), Lanes::Sparse);
    let ratio = s2.statements as f64 / s1.statements as f64;
    let nodes = s2.sparse_nodes as f64 / s1.sparse_nodes as f64;
    assert!(ratio < 2.2, "@dot: sparse statements grew {ratio}x");
    assert!(nodes < 2.2, "@dot: sparse nodes grew {nodes}x");
    // The 2n seeds, then y . tx and x . ty (a node each) and their sum.
    assert_eq!(s1.sparse_nodes, 2 * n as u64 + 3);
    let mm = |n: usize| format!("{}, {}, {n}", array(n * n, 1), array(n * n, 2));
    let (_, m1) = grad("matmul", &mm(8), Lanes::Sparse);
    let (_, m2) = grad("matmul", &mm(16), Lanes::Sparse);
    let nodes = m2.sparse_nodes as f64 / m1.sparse_nodes as f64;
    assert!(nodes < 4.5, "@matmul: sparse nodes grew {nodes}x");
    // The seeds (2 n^2), at most two nodes per element of C and D (4 n^2)
    // and three for the dot.
    assert!(
        m1.sparse_nodes <= 6 * 64 + 3,
        "@matmul: {} nodes",
        m1.sparse_nodes
    );
    // Statements do not grow with the matrices but by the seeding loop.
    let ratio = m2.statements as f64 / m1.statements as f64;
    assert!(ratio < 4.5, "@matmul: statements grew {ratio}x");
}
