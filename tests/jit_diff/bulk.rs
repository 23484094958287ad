//! The bulk array primitives (`sum dot axpy scale matvec matmul fill copyto
//! gemm`), compiled as calls of the runtime's kernels: on many shapes (empty
//! arrays, m, k or n = 0, every transpose of `gemm`) and on values whose sums
//! depend on their order, the interpreter and the JIT give the same bits and
//! leave the same array contents; with one array as several inputs
//! (`dot(a, a)`, `matmul(A, A, ...)`), also when the array comes in as two
//! arguments; every failed shape check (each length, each negative
//! dimension, each output that is an input, products beyond i64) has the same
//! message, location and trace in both, also through the `irad run` binary.
//! A bulk primitive that writes an array makes the JIT forget the elements
//! it had loaded.

use super::*;

/// One function per primitive taking every operand as a parameter, and
/// variants passing one array as several operands.
const BULK_IR: &str = r"
func @sum(%a: [f64]) -> f64 {
#1:
  %r = call sum(%a) :: f64
  return %r
}

func @dot(%a: [f64], %b: [f64]) -> f64 {
#1:
  %r = call dot(%a, %b) :: f64
  return %r
}

func @dot_self(%a: [f64]) -> f64 {
#1:
  %r = call dot(%a, %a) :: f64
  return %r
}

func @axpy(%alpha: f64, %x: [f64], %y: [f64]) -> () {
#1:
  call axpy(%alpha, %x, %y)
  return ()
}

func @axpy_self(%alpha: f64, %x: [f64]) -> () {
#1:
  call axpy(%alpha, %x, %x)
  return ()
}

func @scale(%alpha: f64, %x: [f64]) -> () {
#1:
  call scale(%alpha, %x)
  return ()
}

func @fill(%a: [f64], %v: f64) -> () {
#1:
  call fill(%a, %v)
  return ()
}

func @copyto(%dst: [f64], %src: [f64]) -> () {
#1:
  call copyto(%dst, %src)
  return ()
}

func @copyto_self(%a: [f64]) -> () {
#1:
  call copyto(%a, %a)
  return ()
}

func @matvec(%A: [f64], %x: [f64], %m: i64, %n: i64, %y: [f64]) -> () {
#1:
  call matvec(%A, %x, %m, %n, %y)
  return ()
}

func @matvec_aa(%A: [f64], %m: i64, %n: i64, %y: [f64]) -> () {
#1:
  call matvec(%A, %A, %m, %n, %y)
  return ()
}

func @matvec_into_A(%A: [f64], %x: [f64], %m: i64, %n: i64) -> () {
#1:
  call matvec(%A, %x, %m, %n, %A)
  return ()
}

func @matvec_into_x(%A: [f64], %x: [f64], %m: i64, %n: i64) -> () {
#1:
  call matvec(%A, %x, %m, %n, %x)
  return ()
}

func @matmul(%A: [f64], %B: [f64], %m: i64, %k: i64, %n: i64, %C: [f64]) -> () {
#1:
  call matmul(%A, %B, %m, %k, %n, %C)
  return ()
}

func @matmul_aa(%A: [f64], %m: i64, %k: i64, %n: i64, %C: [f64]) -> () {
#1:
  call matmul(%A, %A, %m, %k, %n, %C)
  return ()
}

func @matmul_into_A(%A: [f64], %B: [f64], %m: i64, %k: i64, %n: i64) -> () {
#1:
  call matmul(%A, %B, %m, %k, %n, %A)
  return ()
}

func @matmul_into_B(%A: [f64], %B: [f64], %m: i64, %k: i64, %n: i64) -> () {
#1:
  call matmul(%A, %B, %m, %k, %n, %B)
  return ()
}

func @gemm(%ta: bool, %tb: bool, %A: [f64], %B: [f64], %m: i64, %k: i64, %n: i64, %C: [f64]) -> () {
#1:
  call gemm(%ta, %tb, %A, %B, %m, %k, %n, %C)
  return ()
}

func @gemm_aa(%ta: bool, %tb: bool, %A: [f64], %m: i64, %k: i64, %n: i64, %C: [f64]) -> () {
#1:
  call gemm(%ta, %tb, %A, %A, %m, %k, %n, %C)
  return ()
}

func @gemm_into_A(%ta: bool, %tb: bool, %A: [f64], %B: [f64], %m: i64, %k: i64, %n: i64) -> () {
#1:
  call gemm(%ta, %tb, %A, %B, %m, %k, %n, %A)
  return ()
}

func @gemm_into_B(%ta: bool, %tb: bool, %A: [f64], %B: [f64], %m: i64, %k: i64, %n: i64) -> () {
#1:
  call gemm(%ta, %tb, %A, %B, %m, %k, %n, %B)
  return ()
}

func @gemm_const(%A: [f64], %B: [f64], %C: [f64]) -> () {
#1:
  call gemm(true, false, %A, %B, 2, 3, 2, %C)
  return ()
}

func @reread(%a: [f64], %b: [f64], %i: i64) -> (f64, f64, f64, f64, f64, f64, f64) {
#1:
  %x0 = call arrayref(%a, %i) :: f64
  call fill(%a, 7.0)
  %x1 = call arrayref(%a, %i) :: f64
  call arrayset(%b, %i, 3.0)
  call copyto(%a, %b)
  %x2 = call arrayref(%a, %i) :: f64
  call scale(2.0, %a)
  %x3 = call arrayref(%a, %i) :: f64
  call axpy(0.5, %b, %a)
  %x4 = call arrayref(%a, %i) :: f64
  %s = call sum(%a) :: f64
  %x5 = call arrayref(%a, %i) :: f64
  %r = call tuple(%x0, %x1, %x2, %x3, %x4, %s, %x5) :: (f64, f64, f64, f64, f64, f64, f64)
  return %r
}

func @reread_matrix(%A: [f64], %x: [f64], %y: [f64], %C: [f64], %i: i64, %j: i64) -> (f64, f64, f64, f64, f64, f64) {
#1:
  %y0 = call arrayref(%y, %i) :: f64
  call matvec(%A, %x, 2, 2, %y)
  %y1 = call arrayref(%y, %i) :: f64
  %c0 = call arrayref(%C, %j) :: f64
  call matmul(%A, %A, 2, 2, 2, %C)
  %c1 = call arrayref(%C, %j) :: f64
  %g0 = call arrayref(%C, %i) :: f64
  call gemm(false, true, %A, %A, 2, 2, 2, %C)
  %g1 = call arrayref(%C, %i) :: f64
  %r = call tuple(%y0, %y1, %c0, %c1, %g0, %g1) :: (f64, f64, f64, f64, f64, f64)
  return %r
}

func @loop(%A: [f64], %x: [f64], %n: i64, %steps: i64) -> f64 {
#1:
  %y = call zeros(%n) :: [f64]
  goto #2
#2:
  %i = phi [#1 => 0, #3 => %i1] :: i64
  %more = call lt(%i, %steps) :: bool
  gotoifnot %more, #4
#3:
  call matvec(%A, %x, %n, %n, %y)
  %s = call dot(%y, %y) :: f64
  %c = call div(1.0, %s) :: f64
  %q = call sqrt(%c) :: f64
  call fill(%x, 0.0)
  call axpy(%q, %y, %x)
  %i1 = call iadd(%i, 1) :: i64
  goto #2
#4:
  %r = call sum(%x) :: f64
  return %r
}

func @inner(%A: [f64], %B: [f64], %m: i64) -> f64 {
#1:
  %C = call zeros(4) :: [f64]
  call matmul(%A, %B, %m, 2, 2, %C)
  %r = call sum(%C) :: f64
  return %r
}

func @outer(%A: [f64], %B: [f64], %m: i64) -> f64 {
#1:
  %r = invoke @inner(%A, %B, %m) :: f64
  %s = call mul(%r, 2.0) :: f64
  return %s
}
";

/// `n` values whose sums depend on their order: signs, magnitudes from
/// 1e-3 to 1e16, and a NaN-free mix of halves and thirds; `seed` varies them.
fn data(n: usize, seed: u64) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let i = i as u64 + seed * 7919;
            let mag = [1e-3, 0.5, 1.0 / 3.0, 7.0, 1e8, 1e16][(i % 6) as usize];
            let sign = if (i / 3).is_multiple_of(2) { 1.0 } else { -1.0 };
            sign * mag * (1.0 + ((i * 2_654_435_761) % 1000) as f64 / 997.0)
        })
        .collect()
}

/// A fresh `[f64]` array of [`data`].
fn arr(n: usize, seed: u64) -> Val {
    f64s(&data(n, seed))
}

fn int(n: i64) -> Val {
    Val::I64(n)
}

/// Runs `name` with both backends through the facade, each on its own
/// arguments from `args()` (which may pass one array as several
/// arguments), and asserts the same outcome and the same arguments
/// afterwards. Returns the interpreter's outcome.
fn both(m: &Module, name: &str, args: &dyn Fn() -> Vec<Val>) -> Result<Val, RunError> {
    let f = func(m, name);
    let opts = RunOptions::default();
    let (interp_args, jit_args) = (args(), args());
    let what = format!(
        "@{name}({})",
        interp_args
            .iter()
            .map(|a| show(a, m))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let want = run_on(Backend::Interp, m, f, &interp_args, &opts);
    let got = run_on(Backend::Jit, m, f, &jit_args, &opts);
    assert_same_outcome(&what, m, &want, &got);
    assert_same_args(&what, m, &interp_args, &jit_args);
    want
}

/// As [`both`], and the run succeeds.
fn ok(m: &Module, name: &str, args: &dyn Fn() -> Vec<Val>) -> Val {
    both(m, name, args).unwrap_or_else(|e| panic!("@{name}: {e}"))
}

/// As [`both`], and the run fails in `@at`'s statement `stmt` with `msg`.
fn err(m: &Module, name: &str, args: &dyn Fn() -> Vec<Val>, at: (&str, u32), msg: &str) {
    let e = both(m, name, args).expect_err(name);
    assert_eq!(e.msg, msg, "@{name}");
    assert_eq!(e.loc.func.as_deref(), Some(at.0), "@{name}: {e}");
    assert_eq!(e.loc.stmt, Some(at.1), "@{name}: {e}");
}

/// `sum`'s order as docs/ir.md ("Bulk array primitives") fixes it: 8 partial
/// sums (term q to partial sum q % 8) over the first 8 * floor(len / 8)
/// terms, added pairwise, then the rest left to right.
fn sum_in_lane_order(terms: &[f64]) -> f64 {
    let full = terms.len() / 8 * 8;
    let mut p = [0.0; 8];
    for (q, &t) in terms[..full].iter().enumerate() {
        p[q % 8] += t;
    }
    let s = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
    terms[full..].iter().fold(s, |s, &t| s + t)
}

#[test]
fn reductions_and_vector_updates_agree_bit_for_bit() {
    let m = ir(BULK_IR);
    for n in [0, 1, 2, 3, 7, 64, 1000] {
        let r = ok(&m, "sum", &|| vec![arr(n, 1)]);
        assert!(
            identical(&r, &Val::F64(sum_in_lane_order(&data(n, 1)))),
            "sum of {n}"
        );
        ok(&m, "dot", &|| vec![arr(n, 2), arr(n, 3)]);
        ok(&m, "dot_self", &|| vec![arr(n, 4)]);
        // One array as both arguments of `dot`.
        ok(&m, "dot", &|| {
            let a = arr(n, 5);
            vec![a.clone(), a]
        });
        for alpha in [0.0, -0.0, 1.5, -3.0, f64::INFINITY, f64::NAN] {
            ok(&m, "axpy", &|| vec![Val::F64(alpha), arr(n, 6), arr(n, 7)]);
            ok(&m, "scale", &|| vec![Val::F64(alpha), arr(n, 8)]);
            ok(&m, "fill", &|| vec![arr(n, 9), Val::F64(alpha)]);
        }
        ok(&m, "copyto", &|| vec![arr(n, 10), arr(n, 11)]);
    }
    // An empty output may be an input: nothing is written.
    ok(&m, "axpy_self", &|| vec![Val::F64(2.0), f64s(&[])]);
    ok(&m, "copyto_self", &|| vec![f64s(&[])]);
    ok(&m, "axpy", &|| {
        let a = f64s(&[]);
        vec![Val::F64(2.0), a.clone(), a]
    });
}

#[test]
fn matrix_products_agree_bit_for_bit_on_every_shape() {
    let m = ir(BULK_IR);
    let dims = [0usize, 1, 2, 3, 5];
    for &rows in &dims {
        for &cols in &dims {
            let (mi, ni) = (int(rows as i64), int(cols as i64));
            ok(&m, "matvec", &|| {
                vec![
                    arr(rows * cols, 1),
                    arr(cols, 2),
                    mi.clone(),
                    ni.clone(),
                    arr(rows, 3),
                ]
            });
        }
    }
    for &rows in &dims {
        for &inner in &dims {
            for &cols in &dims {
                let d = [rows, inner, cols].map(|x| int(x as i64));
                let shapes = || (rows * inner, inner * cols, rows * cols);
                ok(&m, "matmul", &|| {
                    let (a, b, c) = shapes();
                    vec![
                        arr(a, 4),
                        arr(b, 5),
                        d[0].clone(),
                        d[1].clone(),
                        d[2].clone(),
                        arr(c, 6),
                    ]
                });
                for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                    ok(&m, "gemm", &|| {
                        let (a, b, c) = shapes();
                        vec![
                            Val::Bool(ta),
                            Val::Bool(tb),
                            arr(a, 7),
                            arr(b, 8),
                            d[0].clone(),
                            d[1].clone(),
                            d[2].clone(),
                            arr(c, 9),
                        ]
                    });
                }
            }
        }
    }
    // A larger product, whose sums run over 64 terms.
    ok(&m, "matmul", &|| {
        vec![
            arr(7 * 64, 1),
            arr(64 * 9, 2),
            int(7),
            int(64),
            int(9),
            arr(63, 3),
        ]
    });
    ok(&m, "gemm_const", &|| vec![arr(6, 1), arr(6, 2), arr(4, 3)]);
}

#[test]
fn one_array_as_several_inputs_agrees() {
    let m = ir(BULK_IR);
    // matvec(A, A, 1, n, y): x = A when m = 1.
    for n in [0, 1, 4] {
        ok(&m, "matvec_aa", &|| {
            vec![arr(n, 1), int(1), int(n as i64), arr(1, 2)]
        });
    }
    // matmul(A, A, ...) and gemm(.., A, A, ..): square, or m*k = k*n.
    for (rows, inner, cols) in [(2, 2, 2), (3, 3, 3), (1, 4, 1), (0, 0, 0), (2, 0, 2)] {
        let d = [rows, inner, cols].map(int);
        let len = (rows * inner) as usize;
        let c_len = (rows * cols) as usize;
        ok(&m, "matmul_aa", &|| {
            vec![
                arr(len, 3),
                d[0].clone(),
                d[1].clone(),
                d[2].clone(),
                arr(c_len, 4),
            ]
        });
        // The same, with the one array passed as both arguments.
        ok(&m, "matmul", &|| {
            let a = arr(len, 5);
            vec![
                a.clone(),
                a,
                d[0].clone(),
                d[1].clone(),
                d[2].clone(),
                arr(c_len, 6),
            ]
        });
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            ok(&m, "gemm_aa", &|| {
                vec![
                    Val::Bool(ta),
                    Val::Bool(tb),
                    arr(len, 7),
                    d[0].clone(),
                    d[1].clone(),
                    d[2].clone(),
                    arr(c_len, 8),
                ]
            });
        }
    }
}

#[test]
fn bulk_writes_make_loaded_elements_stale() {
    let m = ir(BULK_IR);
    let floats = |r: &Val| -> Vec<f64> {
        let Val::Tuple(vs) = r else {
            panic!("a tuple: {}", show(r, &m))
        };
        vs.iter()
            .map(|v| match v {
                Val::F64(x) => *x,
                other => panic!("an f64: {}", show(other, &m)),
            })
            .collect()
    };
    // a = [1, 2, 4], then filled with 7, given b = [3, 5, 6], doubled, and
    // added half of b; element 0 is read after each (the same index value,
    // which the JIT would reuse a load for) and the sum taken.
    let r = ok(&m, "reread", &|| {
        vec![f64s(&[1.0, 2.0, 4.0]), f64s(&[9.0, 5.0, 6.0]), int(0)]
    });
    assert_eq!(floats(&r), [1.0, 7.0, 3.0, 6.0, 7.5, 35.0, 7.5]);
    // y[1] before and after y = A x, C[3] before and after C = A A, C[1]
    // before and after C += A A^T.
    let r = ok(&m, "reread_matrix", &|| {
        vec![
            f64s(&[1.0, 2.0, 3.0, 4.0]),
            f64s(&[1.0, 1.0]),
            f64s(&[0.0, 0.0]),
            f64s(&[9.0; 4]),
            int(1),
            int(3),
        ]
    });
    assert_eq!(floats(&r), [0.0, 7.0, 9.0, 22.0, 10.0, 21.0]);
    for steps in [0, 1, 5] {
        ok(&m, "loop", &|| {
            vec![arr(9, 1), arr(3, 2), int(3), int(steps)]
        });
    }
}

#[test]
fn every_failed_check_has_the_interpreters_message_and_place() {
    let m = ir(BULK_IR);
    let e =
        |name: &str, args: &dyn Fn() -> Vec<Val>, msg: &str| err(&m, name, args, (name, 1), msg);
    let f = Val::F64;
    // Lengths that differ.
    e(
        "dot",
        &|| vec![arr(2, 1), arr(3, 2)],
        "`dot`: a has 2 elements but b has 3",
    );
    e(
        "dot",
        &|| vec![arr(1, 1), arr(0, 2)],
        "`dot`: a has 1 element but b has 0",
    );
    e(
        "axpy",
        &|| vec![f(2.0), arr(3, 1), arr(4, 2)],
        "`axpy`: x has 3 elements but y has 4",
    );
    e(
        "copyto",
        &|| vec![arr(0, 1), arr(2, 2)],
        "`copyto`: dst has 0 elements but src has 2",
    );
    // Lengths that do not fit the dimensions, and negative dimensions.
    let mv = |a: usize, x: usize, rows: i64, cols: i64, y: usize| {
        move || vec![arr(a, 1), arr(x, 2), int(rows), int(cols), arr(y, 3)]
    };
    e(
        "matvec",
        &mv(5, 3, 2, 3, 2),
        "`matvec`: A has 5 elements but m*n = 2*3 = 6",
    );
    e(
        "matvec",
        &mv(6, 2, 2, 3, 2),
        "`matvec`: x has 2 elements but n = 3",
    );
    e(
        "matvec",
        &mv(6, 3, 2, 3, 1),
        "`matvec`: y has 1 element but m = 2",
    );
    e(
        "matvec",
        &mv(0, 0, -1, 0, 0),
        "`matvec`: negative dimension m = -1",
    );
    e(
        "matvec",
        &mv(0, 0, 0, -2, 0),
        "`matvec`: negative dimension n = -2",
    );
    e(
        "matvec",
        &mv(0, 0, -1, -2, 0),
        "`matvec`: negative dimension m = -1",
    );
    let mm = |a: usize, b: usize, d: [i64; 3], c: usize| {
        move || {
            vec![
                arr(a, 1),
                arr(b, 2),
                int(d[0]),
                int(d[1]),
                int(d[2]),
                arr(c, 3),
            ]
        }
    };
    e(
        "matmul",
        &mm(5, 6, [2, 3, 2], 4),
        "`matmul`: A has 5 elements but m*k = 2*3 = 6",
    );
    e(
        "matmul",
        &mm(6, 5, [2, 3, 2], 4),
        "`matmul`: B has 5 elements but k*n = 3*2 = 6",
    );
    e(
        "matmul",
        &mm(6, 6, [2, 3, 2], 3),
        "`matmul`: C has 3 elements but m*n = 2*2 = 4",
    );
    e(
        "matmul",
        &mm(0, 0, [2, -3, 2], 0),
        "`matmul`: negative dimension k = -3",
    );
    e(
        "matmul",
        &mm(0, 0, [0, 0, i64::MIN], 0),
        &format!("`matmul`: negative dimension n = {}", i64::MIN),
    );
    let gm = |ta: bool, tb: bool, a: usize, b: usize, d: [i64; 3], c: usize| {
        move || {
            vec![
                Val::Bool(ta),
                Val::Bool(tb),
                arr(a, 1),
                arr(b, 2),
                int(d[0]),
                int(d[1]),
                int(d[2]),
                arr(c, 3),
            ]
        }
    };
    e(
        "gemm",
        &gm(true, false, 5, 6, [2, 3, 2], 4),
        "`gemm`: A has 5 elements but k*m = 3*2 = 6",
    );
    e(
        "gemm",
        &gm(false, true, 6, 5, [2, 3, 2], 4),
        "`gemm`: B has 5 elements but n*k = 2*3 = 6",
    );
    e(
        "gemm",
        &gm(true, true, 6, 6, [2, 3, 2], 5),
        "`gemm`: C has 5 elements but m*n = 2*2 = 4",
    );
    e(
        "gemm",
        &gm(false, false, 0, 0, [-7, 0, 0], 0),
        "`gemm`: negative dimension m = -7",
    );
    // Products beyond i64 are not wrapped: 2^32 * 2^32 is not 0.
    let big = 1i64 << 32;
    e(
        "matvec",
        &mv(0, 0, big, big, 0),
        "`matvec`: A has 0 elements but m*n = 4294967296*4294967296 = 18446744073709551616",
    );
    e(
        "matmul",
        &mm(0, 0, [big, big, big], 0),
        "`matmul`: A has 0 elements but m*k = 4294967296*4294967296 = 18446744073709551616",
    );
    let max = i64::MAX;
    let square = i128::from(max) * i128::from(max);
    e(
        "gemm",
        &gm(true, true, 0, 0, [0, max, max], 0),
        &format!("`gemm`: B has 0 elements but n*k = {max}*{max} = {square}"),
    );
}

/// An output that is one of the inputs (in the program, or through two
/// arguments), and failed checks inside a callee and inside a loop: the
/// interpreter's message and place, bit for bit.
#[test]
fn outputs_that_are_inputs_and_checks_in_callees_and_loops_fail_alike() {
    let m = ir(BULK_IR);
    let e =
        |name: &str, args: &dyn Fn() -> Vec<Val>, msg: &str| err(&m, name, args, (name, 1), msg);
    let f = Val::F64;
    let t = Val::Bool;
    // Outputs that are inputs, in the program and through two arguments.
    let same = "the output y is the same array as the input x";
    e(
        "axpy_self",
        &|| vec![f(2.0), arr(3, 1)],
        &format!("`axpy`: {same}"),
    );
    e(
        "axpy",
        &|| {
            let a = arr(1, 1);
            vec![f(2.0), a.clone(), a]
        },
        &format!("`axpy`: {same}"),
    );
    let same = "`copyto`: the output dst is the same array as the input src";
    e("copyto_self", &|| vec![arr(2, 1)], same);
    e(
        "copyto",
        &|| {
            let a = arr(2, 1);
            vec![a.clone(), a]
        },
        same,
    );
    // matvec(A, x, 3, 1, A): y = A fits when n = 1.
    e(
        "matvec_into_A",
        &|| vec![arr(3, 1), arr(1, 2), int(3), int(1)],
        "`matvec`: the output y is the same array as the input A",
    );
    e(
        "matvec_into_x",
        &|| vec![arr(4, 1), arr(2, 2), int(2), int(2)],
        "`matvec`: the output y is the same array as the input x",
    );
    e(
        "matmul_into_A",
        &|| vec![arr(4, 1), arr(4, 2), int(2), int(2), int(2)],
        "`matmul`: the output C is the same array as the input A",
    );
    e(
        "matmul_into_B",
        &|| vec![arr(4, 1), arr(6, 2), int(2), int(2), int(3)],
        "`matmul`: the output C is the same array as the input B",
    );
    e(
        "matmul",
        &|| {
            let b = arr(4, 2);
            vec![arr(4, 1), b.clone(), int(2), int(2), int(2), b]
        },
        "`matmul`: the output C is the same array as the input B",
    );
    e(
        "gemm_into_A",
        &|| {
            vec![
                t(true),
                t(false),
                arr(4, 1),
                arr(4, 2),
                int(2),
                int(2),
                int(2),
            ]
        },
        "`gemm`: the output C is the same array as the input A",
    );
    e(
        "gemm_into_B",
        &|| {
            vec![
                t(false),
                t(true),
                arr(4, 1),
                arr(4, 2),
                int(2),
                int(2),
                int(2),
            ]
        },
        "`gemm`: the output C is the same array as the input B",
    );
    // Empty outputs that are inputs write nothing and are allowed.
    ok(&m, "matvec_into_x", &|| {
        vec![arr(0, 1), arr(0, 2), int(0), int(0)]
    });
    ok(&m, "matmul_into_A", &|| {
        vec![arr(0, 1), arr(0, 2), int(0), int(5), int(0)]
    });
    ok(&m, "gemm_into_B", &|| {
        vec![
            t(false),
            t(false),
            arr(0, 1),
            arr(0, 2),
            int(3),
            int(0),
            int(0),
        ]
    });
    // In a callee: located there, with the call site in the trace.
    let fail = both(&m, "outer", &|| vec![arr(4, 1), arr(4, 2), int(3)]).expect_err("@outer");
    assert_eq!(fail.msg, "`matmul`: A has 4 elements but m*k = 3*2 = 6");
    assert_eq!(fail.loc.func.as_deref(), Some("inner"));
    assert_eq!(fail.loc.stmt, Some(2));
    assert_eq!(fail.trace.len(), 1);
    ok(&m, "outer", &|| vec![arr(4, 1), arr(4, 2), int(2)]);
    // In a loop, after the first statements of a later block.
    err(
        &m,
        "loop",
        &|| vec![arr(9, 1), arr(2, 2), int(3), int(2)],
        ("loop", 1),
        "`matvec`: x has 2 elements but n = 3",
    );
}

/// The example of a surface program using the bulk primitives: `@f` fails
/// (`axpy` into its own input), `@g` computes.
const BULK_SURFACE: &str = "\
fn f(a: [f64], x: [f64]) -> f64 {
    let y = zeros(2);
    matvec(a, x, 2, 3, y);
    axpy(2.0, y, y);
    return dot(y, y) + sum(x);
}
fn g(a: [f64], x: [f64]) -> f64 {
    let y = zeros(2);
    matvec(a, x, 2, 3, y);
    let z = zeros(2);
    copyto(z, y);
    axpy(2.0, y, z);
    scale(0.5, z);
    let c = zeros(4);
    matmul(a, a, 2, 3, 2, c);
    fill(y, 1.0);
    return dot(z, z) + sum(x) + sum(c) + sum(y);
}
";

#[test]
fn the_cli_runs_bulk_primitives_alike_with_either_backend() {
    // Once a panic in Cranelift: the primitives were not compiled, and the
    // error in the middle of @f left its blocks unfinished.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("jit_diff");
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let file = dir.join("bulk.irad");
    std::fs::write(&file, BULK_SURFACE).expect("writable scratch file");
    let args = "[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [1.0, 1.0, 1.0]";
    for (name, code, text) in [
        (
            "f",
            1,
            "error: `axpy`: the output y is the same array as the input x (in @f, block #1, statement 3)",
        ),
        ("g", 0, ""),
    ] {
        let run = |backend: &str| {
            Command::new(env!("CARGO_BIN_EXE_irad"))
                .args(["run", file.to_str().expect("utf-8 path"), "-f", name])
                .args(["--args", args, "--backend", backend])
                .output()
                .expect("irad runs")
        };
        let (interp, jit) = (run("interp"), run("jit"));
        assert_eq!(interp.status.code(), Some(code), "@{name}: {interp:?}");
        assert_eq!(jit.status.code(), Some(code), "@{name}: {jit:?}");
        assert_eq!(interp.stdout, jit.stdout, "@{name}: stdout differs");
        assert_eq!(interp.stderr, jit.stderr, "@{name}: stderr differs");
        let stderr = String::from_utf8_lossy(&jit.stderr);
        assert!(stderr.contains(text), "@{name}: {stderr}");
    }
    // And in process, with the interpreter's value.
    let src = Source {
        name: "bulk.irad".into(),
        text: BULK_SURFACE.into(),
    };
    let m = irad::load(&src).expect("the surface program loads");
    let g = func(&m, "g");
    let text = Source {
        name: "<args>".into(),
        text: args.into(),
    };
    let vals = || irad::parse_args(&text, &m, g).expect("arguments parse");
    // y = A x = [6, 15], z = (y + 2 y) / 2 = [9, 22.5], A as 2x3 times A as
    // 3x2 = [22, 28, 49, 64], y filled with 1: 587.25 + 3 + 163 + 2.
    let r = ok(&m, "g", &vals);
    assert!(identical(&r, &Val::F64(755.25)), "{}", show(&r, &m));
}
