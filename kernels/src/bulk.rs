//! The bulk array primitives (`sum dot axpy scale matvec matmul fill copyto`
//! and the rules' `gemm`): their shape checks and their kernels. The runtime
//! (for compiled code) and the interpreter (`irad-ir`, as `irad_ir::bulk`)
//! both call this module, so both check in the same order, word their errors
//! alike and compute with the same arithmetic in the same order: they agree
//! bit for bit.
//!
//! **Order of summation.** It is fixed by this module, once, for every
//! backend; it is not the scalar loop's, so a bulk primitive may differ from
//! the loop it replaces by rounding (docs/ir.md, "Bulk array primitives"):
//!
//! - `sum` and `dot` keep [`LANES`] (8) partial sums: term q goes to partial
//!   sum `q % 8`, each starting from `0.0`, over the first `8 * (len / 8)`
//!   terms; the partial sums are then added pairwise (`((p0 + p1) + (p2 +
//!   p3)) + ((p4 + p5) + (p6 + p7))`) and the remaining terms added left to
//!   right. Below 8 terms this is the scalar loop's order exactly. No fused
//!   multiply-add: the AVX2 build and the baseline build (chosen at run time
//!   by the machine's features) give the same bits.
//! - `matvec` is one `dot` per row.
//! - `matmul` and `gemm` are `matrixmultiply`'s `dgemm` (blocked, packed,
//!   SIMD micro-kernels chosen at run time by the machine's features, FMA
//!   where it has it; one thread). Its order of summation depends on the
//!   shapes and on the machine's SIMD features: the same call gives the same
//!   bits on one machine, but a machine with other features (say without
//!   FMA) may round differently. The error of each element is within the
//!   usual bound of a sum of products (a few `k * eps` times the sum of the
//!   terms' magnitudes), as the tests check.
//! - `axpy`, `scale`, `fill` and `copyto` compute each element on its own:
//!   no order to choose.
//!
//! Signed zeros and IEEE special values behave as in scalar arithmetic: each
//! sum starts from `0.0` (a sum of `-0.0`s is `0.0`), NaN and infinities
//! propagate, and `matmul` never reads C (a NaN there is overwritten).
//!
//! Callers first run [`check`] (shapes, then overlap), then the kernel, which
//! assumes a passed check and never indexes out of range. An output that is
//! the same array as an input is an error only when the array is not empty
//! (an empty one is never written, and compiled code cannot tell two empty
//! arrays apart).

/// A bulk primitive.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Op {
    /// `sum(a) -> f64`.
    Sum,
    /// `dot(a, b) -> f64`.
    Dot,
    /// `axpy(alpha, x, y)`: `y[i] = y[i] + alpha * x[i]`.
    Axpy,
    /// `scale(alpha, x)`: `x[i] = alpha * x[i]`.
    Scale,
    /// `matvec(A, x, m, n, y)`: `y = A x`, A row-major m×n.
    Matvec,
    /// `matmul(A, B, m, k, n, C)`: `C = A B`, row-major m×k, k×n, m×n.
    Matmul,
    /// `fill(a, v)`: every element becomes v.
    Fill,
    /// `copyto(dst, src)`: `dst[i] = src[i]`.
    Copyto,
    /// `gemm(ta, tb, A, B, m, k, n, C)`: `C = C + op(A) op(B)`, op(A) m×k
    /// (A stored k×m when `ta`), op(B) k×n (B stored n×k when `tb`).
    Gemm,
}

impl Op {
    /// The IR name.
    pub fn name(self) -> &'static str {
        match self {
            Op::Sum => "sum",
            Op::Dot => "dot",
            Op::Axpy => "axpy",
            Op::Scale => "scale",
            Op::Matvec => "matvec",
            Op::Matmul => "matmul",
            Op::Fill => "fill",
            Op::Copyto => "copyto",
            Op::Gemm => "gemm",
        }
    }

    /// The names of the array operands, in operand order.
    pub fn arrays(self) -> &'static [&'static str] {
        match self {
            Op::Sum | Op::Fill => &["a"],
            Op::Scale => &["x"],
            Op::Dot => &["a", "b"],
            Op::Axpy => &["x", "y"],
            Op::Matvec => &["A", "x", "y"],
            Op::Matmul | Op::Gemm => &["A", "B", "C"],
            Op::Copyto => &["dst", "src"],
        }
    }

    /// The names of the dimension operands (i64), in operand order.
    pub fn dims(self) -> &'static [&'static str] {
        match self {
            Op::Matvec => &["m", "n"],
            Op::Matmul | Op::Gemm => &["m", "k", "n"],
            _ => &[],
        }
    }

    /// The position (among [`Op::arrays`]) of the array written, if any.
    pub fn output(self) -> Option<usize> {
        match self {
            Op::Sum | Op::Dot => None,
            Op::Axpy => Some(1),
            Op::Scale | Op::Fill | Op::Copyto => Some(0),
            Op::Matvec | Op::Matmul | Op::Gemm => Some(2),
        }
    }
}

/// Checks the shapes of a call of `op`: `lens` are the lengths of its array
/// operands and `dims` its dimension operands, both in operand order;
/// `flags` are `gemm`'s `ta` and `tb` (ignored by the others). `same(i, j)`
/// says whether array operands i and j are the same array. The error is a
/// lowercase message without location.
pub fn check(
    op: Op,
    lens: &[usize],
    dims: &[i64],
    flags: [bool; 2],
    same: &dyn Fn(usize, usize) -> bool,
) -> Result<(), String> {
    let name = op.name();
    let arrays = op.arrays();
    if lens.len() != arrays.len() || dims.len() != op.dims().len() {
        return Err(format!(
            "internal error: `{name}` applied to the wrong operands"
        ));
    }
    for (d, &v) in op.dims().iter().zip(dims) {
        if v < 0 {
            return Err(format!("`{name}`: negative dimension {d} = {v}"));
        }
    }
    let names = op.dims();
    // The length each array must have, as a product of dimensions (i, j) or
    // one dimension (i, i); none where it must equal another array's. No
    // allocation unless the check fails.
    let (ta, tb) = (op == Op::Gemm && flags[0], op == Op::Gemm && flags[1]);
    let want = |arr: usize| -> Option<(usize, usize)> {
        match op {
            Op::Sum | Op::Scale | Op::Fill | Op::Dot | Op::Axpy | Op::Copyto => None,
            Op::Matvec => Some([(0, 1), (1, 1), (0, 0)][arr]),
            Op::Matmul | Op::Gemm => Some(match arr {
                0 if ta => (1, 0),
                0 => (0, 1),
                1 if tb => (2, 1),
                1 => (1, 2),
                _ => (0, 2),
            }),
        }
    };
    for (arr, &len) in lens.iter().enumerate() {
        let Some((i, j)) = want(arr) else { continue };
        let n = if i == j {
            i128::from(dims[i])
        } else {
            i128::from(dims[i]) * i128::from(dims[j])
        };
        if i128::try_from(len).ok() != Some(n) {
            let text = if i == j {
                format!("{} = {}", names[i], dims[i])
            } else {
                format!("{}*{} = {}*{} = {n}", names[i], names[j], dims[i], dims[j])
            };
            return Err(format!(
                "`{name}`: {} has {len} element{} but {text}",
                arrays[arr],
                plural(len)
            ));
        }
    }
    if matches!(op, Op::Dot | Op::Axpy | Op::Copyto) && lens[0] != lens[1] {
        return Err(format!(
            "`{name}`: {} has {} element{} but {} has {}",
            arrays[0],
            lens[0],
            plural(lens[0]),
            arrays[1],
            lens[1]
        ));
    }
    if let Some(out) = op.output() {
        for i in 0..arrays.len() {
            if i != out && lens[out] > 0 && same(out, i) {
                return Err(format!(
                    "`{name}`: the output {} is the same array as the input {}",
                    arrays[out], arrays[i]
                ));
            }
        }
    }
    Ok(())
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The number of partial sums `sum` and `dot` keep (see the module header).
pub const LANES: usize = 8;

/// Runs `$body` (an expression over the function's arguments) compiled for
/// AVX2 when the machine has it, else for the baseline target. Both are the
/// same arithmetic in the same order (no fused multiply-add), so the choice
/// changes the speed only, never a bit of the result.
macro_rules! multiversion {
    ($name:ident, $avx2:ident, ($($arg:ident: $ty:ty),*) -> $ret:ty, $body:expr) => {
        #[inline(always)]
        fn $name($($arg: $ty),*) -> $ret {
            $body
        }
        #[cfg(target_arch = "x86_64")]
        #[target_feature(enable = "avx2")]
        fn $avx2($($arg: $ty),*) -> $ret {
            $name($($arg),*)
        }
    };
}

multiversion!(sum_lanes, sum_avx2, (a: &[f64]) -> f64, {
    let mut acc = [0.0; LANES];
    let mut chunks = a.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (acc, &x) in acc.iter_mut().zip(chunk) {
            *acc += x;
        }
    }
    chunks.remainder().iter().fold(combine(acc), |s, &x| s + x)
});

multiversion!(dot_lanes, dot_avx2, (a: &[f64], b: &[f64]) -> f64, {
    let mut acc = [0.0; LANES];
    let mut xs = a.chunks_exact(LANES);
    let mut ys = b.chunks_exact(LANES);
    for (x, y) in (&mut xs).zip(&mut ys) {
        for ((acc, &x), &y) in acc.iter_mut().zip(x).zip(y) {
            *acc += x * y;
        }
    }
    xs.remainder()
        .iter()
        .zip(ys.remainder())
        .fold(combine(acc), |s, (&x, &y)| s + x * y)
});

/// The partial sums added pairwise: `((p0 + p1) + (p2 + p3)) + ((p4 + p5)
/// + (p6 + p7))`.
#[inline(always)]
fn combine(p: [f64; LANES]) -> f64 {
    ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]))
}

#[cfg(target_arch = "x86_64")]
fn has_avx2() -> bool {
    std::is_x86_feature_detected!("avx2")
}

/// `sum(a)`, in the order of the module header.
pub fn sum(a: &[f64]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: the machine has AVX2 (checked above).
        return unsafe { sum_avx2(a) };
    }
    sum_lanes(a)
}

/// `dot(a, b)` (equal lengths; extra elements of the longer are ignored), in
/// the order of the module header.
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: the machine has AVX2 (checked above).
        return unsafe { dot_avx2(a, b) };
    }
    dot_lanes(a, b)
}

/// `axpy(alpha, x, y)` (equal lengths).
pub fn axpy(alpha: f64, x: &[f64], y: &mut [f64]) {
    for (y, &x) in y.iter_mut().zip(x) {
        *y += alpha * x;
    }
}

/// `scale(alpha, x)`.
pub fn scale(alpha: f64, x: &mut [f64]) {
    for x in x {
        *x *= alpha;
    }
}

/// `fill(a, v)`.
pub fn fill(a: &mut [f64], v: f64) {
    a.fill(v);
}

/// `copyto(dst, src)` (equal lengths).
pub fn copyto(dst: &mut [f64], src: &[f64]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = s;
    }
}

/// `matvec(A, x, m, n, y)` (checked shapes): `y[i] = dot(A[i, :], x)`.
pub fn matvec(a: &[f64], x: &[f64], n: usize, y: &mut [f64]) {
    if n == 0 {
        y.fill(0.0);
        return;
    }
    for (yi, row) in y.iter_mut().zip(a.chunks_exact(n)) {
        *yi = dot(row, x);
    }
}

/// A matrix operand of [`dgemm`]: its elements and the strides of its rows
/// and columns.
struct Mat<'a> {
    data: &'a [f64],
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

impl<'a> Mat<'a> {
    /// A `rows`×`cols` matrix, stored row-major, or (when `transposed`) the
    /// transpose of a row-major `cols`×`rows` one.
    fn new(data: &'a [f64], rows: usize, cols: usize, transposed: bool) -> Self {
        let (row_stride, col_stride) = if transposed { (1, rows) } else { (cols, 1) };
        Mat {
            data,
            rows,
            cols,
            row_stride,
            col_stride,
        }
    }

    /// Whether every element the strides address lies in `data`.
    fn fits(&self) -> bool {
        self.rows.checked_mul(self.cols) == Some(self.data.len())
    }
}

/// `C = A B` (`accumulate` false: C is only written) or `C = C + A B`, with
/// `matrixmultiply`'s kernel; C is row-major `A.rows`×`B.cols`. Does nothing
/// when a dimension is zero, and (a caller's bug, which [`check`] rules out)
/// when a length does not fit its dimensions.
fn dgemm(a: Mat, b: Mat, c: &mut [f64], accumulate: bool) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    let fits = a.fits() && b.fits() && b.rows == k && m.checked_mul(n) == Some(c.len());
    debug_assert!(fits, "bulk kernel called with unchecked shapes");
    if !fits || m == 0 || k == 0 || n == 0 {
        return;
    }
    let s = |x: usize| x as isize;
    // SAFETY: every element (i, p) of A at i * rs + p * cs lies in a.data
    // because rows * cols == len and the strides are (cols, 1) or (1, rows);
    // likewise B and C (row-major m×n, c.len() == m * n). C does not overlap
    // A or B: it is borrowed mutably while they are borrowed shared.
    unsafe {
        matrixmultiply::dgemm(
            m,
            k,
            n,
            1.0,
            a.data.as_ptr(),
            s(a.row_stride),
            s(a.col_stride),
            b.data.as_ptr(),
            s(b.row_stride),
            s(b.col_stride),
            if accumulate { 1.0 } else { 0.0 },
            c.as_mut_ptr(),
            s(n),
            1,
        );
    }
}

/// `matmul(A, B, m, k, n, C)` (checked shapes): `C[i, j]` is the sum over p
/// of `A[i, p] * B[p, j]`, in the kernel's order (module header); C is
/// overwritten, whatever it held.
pub fn matmul(a: &[f64], b: &[f64], k: usize, n: usize, c: &mut [f64]) {
    if n == 0 {
        return;
    }
    if k == 0 {
        c.fill(0.0);
        return;
    }
    let m = c.len() / n;
    dgemm(Mat::new(a, m, k, false), Mat::new(b, k, n, false), c, false);
}

/// `gemm(ta, tb, A, B, m, k, n, C)` (checked shapes): `C[i, j]` plus the
/// sum of the terms `op(A)[i, p] * op(B)[p, j]`, in the kernel's order.
#[allow(clippy::too_many_arguments)]
pub fn gemm(ta: bool, tb: bool, a: &[f64], b: &[f64], m: usize, k: usize, n: usize, c: &mut [f64]) {
    dgemm(Mat::new(a, m, k, ta), Mat::new(b, k, n, tb), c, true);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never(_: usize, _: usize) -> bool {
        false
    }

    /// The order of the module header, written out plainly.
    fn sum_in_lane_order(terms: &[f64]) -> f64 {
        let full = terms.len() / LANES * LANES;
        let mut p = [0.0; LANES];
        for (q, &t) in terms[..full].iter().enumerate() {
            p[q % LANES] += t;
        }
        let mut s = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
        for &t in &terms[full..] {
            s += t;
        }
        s
    }

    fn data(len: usize, seed: f64) -> Vec<f64> {
        (0..len)
            .map(|i| ((i as f64 + 1.0) * seed).sin() * (1.0 + (i % 7) as f64 * 1e3))
            .collect()
    }

    fn bits(v: &[f64]) -> Vec<u64> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    #[test]
    fn sum_and_dot_add_in_lane_order() {
        for len in [0, 1, 5, 7, 8, 9, 15, 16, 17, 64, 100, 1001] {
            let a = data(len, 0.37);
            let b = data(len, 0.91);
            assert_eq!(
                sum(&a).to_bits(),
                sum_in_lane_order(&a).to_bits(),
                "sum, {len}"
            );
            assert_eq!(
                sum(&a).to_bits(),
                sum_lanes(&a).to_bits(),
                "sum baseline, {len}"
            );
            let products: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x * y).collect();
            assert_eq!(
                dot(&a, &b).to_bits(),
                sum_in_lane_order(&products).to_bits(),
                "dot, {len}"
            );
            assert_eq!(
                dot(&a, &b).to_bits(),
                dot_lanes(&a, &b).to_bits(),
                "dot baseline, {len}"
            );
        }
        // Fewer than LANES elements: the scalar loop's order exactly.
        let a = [0.1, 0.2, 0.3, 1e16, 1.0];
        assert_eq!(
            sum(&a).to_bits(),
            a.iter().fold(0.0, |s, &x| s + x).to_bits()
        );
        // A different order than the loop's on 16 elements: lane 1 keeps
        // both 1.0s, the loop loses the first to 1e16.
        let mut big = [0.0; 16];
        big[0] = 1e16;
        big[1] = 1.0;
        big[9] = 1.0;
        big[8] = -1e16;
        assert_eq!(sum(&big), 2.0);
        assert_eq!(big.iter().fold(0.0, |s, &x| s + x), 1.0);
        assert_eq!(sum(&[]), 0.0);
        // Signed zeros: every partial sum starts at 0.0, and 0.0 + -0.0 is 0.0.
        assert!(sum(&[-0.0; 20]).is_sign_positive());
        assert!(sum(&[-0.0, -0.0]).is_sign_positive());
        assert!(dot(&[-1.0], &[0.0]).is_sign_positive());
        // IEEE specials as the scalar arithmetic gives them.
        assert!(dot(&[f64::INFINITY; 9], &[0.0; 9]).is_nan());
        assert_eq!(sum(&[f64::INFINITY; 12]), f64::INFINITY);
    }

    /// `C + op(A) op(B)` by the naive triple loop, and the sum of the terms'
    /// magnitudes per element (the scale of the rounding error any order of
    /// summation may make).
    #[allow(clippy::too_many_arguments)]
    fn naive(
        ta: bool,
        tb: bool,
        a: &[f64],
        b: &[f64],
        m: usize,
        k: usize,
        n: usize,
        c: &[f64],
    ) -> (Vec<f64>, Vec<f64>) {
        let mut out = c.to_vec();
        let mut mag = c.iter().map(|x| x.abs()).collect::<Vec<_>>();
        for i in 0..m {
            for j in 0..n {
                for p in 0..k {
                    let x = if ta { a[p * m + i] } else { a[i * k + p] };
                    let y = if tb { b[j * k + p] } else { b[p * n + j] };
                    out[i * n + j] += x * y;
                    mag[i * n + j] += (x * y).abs();
                }
            }
        }
        (out, mag)
    }

    #[test]
    fn matmul_and_gemm_agree_with_the_triple_loop_to_rounding() {
        let shapes = [
            (1, 1, 1),
            (3, 4, 2),
            (2, 7, 5),
            (9, 13, 17),
            (64, 33, 10),
            (5, 1, 70),
            (70, 3, 1),
        ];
        for (m, k, n) in shapes {
            let a = data(m * k, 0.73);
            let b = data(k * n, 0.29);
            let c0 = data(m * n, 0.11);
            let mut c = c0.clone();
            matmul(&a, &b, k, n, &mut c);
            let (want, mag) = naive(false, false, &a, &b, m, k, n, &vec![0.0; m * n]);
            for q in 0..m * n {
                assert!(
                    (c[q] - want[q]).abs() <= 4.0 * k as f64 * f64::EPSILON * mag[q],
                    "matmul {m}x{k}x{n} at {q}: {} vs {}",
                    c[q],
                    want[q]
                );
            }
            // Deterministic: the same inputs give the same bits.
            let mut again = vec![f64::NAN; m * n];
            matmul(&a, &b, k, n, &mut again);
            assert_eq!(bits(&again), bits(&c));
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                let at: Vec<f64> = (0..k * m).map(|q| a[(q % m) * k + q / m]).collect();
                let bt: Vec<f64> = (0..n * k).map(|q| b[(q % k) * n + q / k]).collect();
                let (aa, bb) = (if ta { &at } else { &a }, if tb { &bt } else { &b });
                let mut g = c0.clone();
                gemm(ta, tb, aa, bb, m, k, n, &mut g);
                let (want, mag) = naive(ta, tb, aa, bb, m, k, n, &c0);
                for q in 0..m * n {
                    assert!(
                        (g[q] - want[q]).abs() <= 4.0 * (k + 1) as f64 * f64::EPSILON * mag[q],
                        "gemm {ta} {tb} {m}x{k}x{n} at {q}: {} vs {}",
                        g[q],
                        want[q]
                    );
                }
            }
        }
    }

    #[test]
    fn matrix_kernels_on_empty_and_special_values() {
        // k = 0: matmul writes zeros, gemm leaves C alone.
        let mut c = [7.0, f64::NAN];
        matmul(&[], &[], 0, 2, &mut c);
        assert_eq!(bits(&c), bits(&[0.0, 0.0]));
        let mut c = [7.0, -0.0];
        gemm(false, false, &[], &[], 1, 0, 2, &mut c);
        assert_eq!(bits(&c), bits(&[7.0, -0.0]));
        // matmul ignores what C held, NaN included; NaN and infinities in the
        // operands propagate as in scalar arithmetic.
        let mut c = [f64::NAN; 4];
        matmul(&[1.0, 2.0, 3.0, 4.0], &[1.0, 0.0, 0.0, 1.0], 2, 2, &mut c);
        assert_eq!(c, [1.0, 2.0, 3.0, 4.0]);
        let mut c = [0.0; 4];
        matmul(
            &[f64::NAN, 0.0, 0.0, 1.0],
            &[1.0, 0.0, 0.0, 1.0],
            2,
            2,
            &mut c,
        );
        assert!(c[0].is_nan() && c[1].is_nan() && c[2] == 0.0 && c[3] == 1.0);
        let mut c = [0.0];
        matmul(&[f64::INFINITY], &[0.0], 1, 1, &mut c);
        assert!(c[0].is_nan());
        // A product of signed zeros sums to 0.0.
        let mut c = [7.0];
        matmul(&[-1.0], &[0.0], 1, 1, &mut c);
        assert!(c[0] == 0.0 && c[0].is_sign_positive());
        let mut y = vec![0.0; 3];
        let a = data(12, 0.5);
        let x = data(4, 0.25);
        matvec(&a, &x, 4, &mut y);
        assert_eq!(y[1].to_bits(), dot(&a[4..8], &x).to_bits());
    }

    #[test]
    fn checks_name_the_operand() {
        let m = i64::MAX;
        assert_eq!(
            check(Op::Axpy, &[3, 4], &[], [false; 2], &never),
            Err("`axpy`: x has 3 elements but y has 4".into())
        );
        assert_eq!(
            check(Op::Matvec, &[5, 3, 2], &[2, 3], [false; 2], &never),
            Err("`matvec`: A has 5 elements but m*n = 2*3 = 6".into())
        );
        assert_eq!(
            check(Op::Matvec, &[6, 3, 1], &[2, 3], [false; 2], &never),
            Err("`matvec`: y has 1 element but m = 2".into())
        );
        assert_eq!(
            check(Op::Matmul, &[6, 6, 4], &[2, -3, 2], [false; 2], &never),
            Err("`matmul`: negative dimension k = -3".into())
        );
        assert_eq!(
            check(Op::Gemm, &[6, 6, 4], &[2, 3, 2], [true, true], &never),
            Ok(())
        );
        assert_eq!(
            check(Op::Axpy, &[3, 3], &[], [false; 2], &|_, _| true),
            Err("`axpy`: the output y is the same array as the input x".into())
        );
        assert_eq!(
            check(Op::Axpy, &[0, 0], &[], [false; 2], &|_, _| true),
            Ok(())
        );
        assert_eq!(
            check(Op::Matmul, &[4, 4, 4], &[2, 2, 2], [false; 2], &|i, j| i
                + j
                == 2),
            Err("`matmul`: the output C is the same array as the input A".into())
        );
        assert_eq!(
            check(Op::Matmul, &[0, 0, 0], &[m, 0, m], [false; 2], &never),
            Err(format!(
                "`matmul`: C has 0 elements but m*n = {m}*{m} = {}",
                i128::from(m) * i128::from(m)
            ))
        );
    }
}
