//! The bulk array primitives (`sum dot axpy scale matvec matmul fill copyto`
//! and the rules' `gemm`): their shape checks and their kernels. The runtime
//! (for compiled code) and the interpreter (`irad-ir`, as `irad_ir::bulk`)
//! both call this module, so both check in the same order, word their errors
//! alike and compute with the same arithmetic in the same order: they agree
//! bit for bit.
//!
//! Every sum starts from `0.0` and adds its terms left to right, as the
//! scalar loop `acc = 0.0; for p in 0..k { acc = acc + x[p] * y[p] }` does
//! (signed zeros included: a sum of `-0.0`s is `0.0`), so a bulk primitive
//! gives exactly what the scalar loop it replaces gives;
//! the matrix kernels order their loops so that the inner loop runs along
//! rows (contiguous memory) without changing any element's order of
//! summation. No fused multiply-add is used.
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

/// `sum(a)`.
pub fn sum(a: &[f64]) -> f64 {
    a.iter().fold(0.0, |acc, &x| acc + x)
}

/// `dot(a, b)` (equal lengths).
pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).fold(0.0, |acc, (&x, &y)| acc + x * y)
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

/// `matmul(A, B, m, k, n, C)` (checked shapes): `C[i, j]` is the sum over p
/// of `A[i, p] * B[p, j]`, in increasing p.
pub fn matmul(a: &[f64], b: &[f64], k: usize, n: usize, c: &mut [f64]) {
    if n == 0 {
        return;
    }
    if k == 0 {
        c.fill(0.0);
        return;
    }
    for (crow, arow) in c.chunks_exact_mut(n).zip(a.chunks_exact(k)) {
        // p = 0 sets the row (0.0 plus the first term, as the scalar loop
        // starts), the others add to it: each element's sum is taken in
        // increasing p, as the scalar loop takes it.
        let (brow0, rest) = b.split_at(n);
        let a0 = arow[0];
        for (c, &b) in crow.iter_mut().zip(brow0) {
            *c = 0.0 + a0 * b;
        }
        for (&ap, brow) in arow[1..].iter().zip(rest.chunks_exact(n)) {
            for (c, &b) in crow.iter_mut().zip(brow) {
                *c += ap * b;
            }
        }
    }
}

/// `gemm(ta, tb, A, B, m, k, n, C)` (checked shapes): `C[i, j]` plus the
/// terms `op(A)[i, p] * op(B)[p, j]` in increasing p.
#[allow(clippy::too_many_arguments)]
pub fn gemm(ta: bool, tb: bool, a: &[f64], b: &[f64], m: usize, k: usize, n: usize, c: &mut [f64]) {
    if m == 0 || n == 0 || k == 0 {
        return;
    }
    let at = |i: usize, p: usize| if ta { a[p * m + i] } else { a[i * k + p] };
    if tb {
        // op(B)[p, j] = B[j, p]: row j of B is contiguous in p. Four output
        // columns at a time, each its own chain of sums in increasing p (the
        // same order as one at a time), so the four chains overlap.
        for (i, crow) in c.chunks_mut(n).enumerate() {
            let mut quads = crow.chunks_exact_mut(4);
            let mut brows = b.chunks_exact(4 * k);
            for (cq, bq) in (&mut quads).zip(&mut brows) {
                let (b0, rest) = bq.split_at(k);
                let (b1, rest) = rest.split_at(k);
                let (b2, b3) = rest.split_at(k);
                let mut acc = [cq[0], cq[1], cq[2], cq[3]];
                for p in 0..k {
                    let aip = at(i, p);
                    acc[0] += aip * b0[p];
                    acc[1] += aip * b1[p];
                    acc[2] += aip * b2[p];
                    acc[3] += aip * b3[p];
                }
                cq.copy_from_slice(&acc);
            }
            for (cij, brow) in quads
                .into_remainder()
                .iter_mut()
                .zip(brows.remainder().chunks_exact(k))
            {
                let mut acc = *cij;
                for (p, &bjp) in brow.iter().enumerate() {
                    acc += at(i, p) * bjp;
                }
                *cij = acc;
            }
        }
    } else {
        for (i, crow) in c.chunks_exact_mut(n).enumerate() {
            for (p, brow) in b.chunks_exact(n).enumerate() {
                let aip = at(i, p);
                for (c, &b) in crow.iter_mut().zip(brow) {
                    *c += aip * b;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never(_: usize, _: usize) -> bool {
        false
    }

    #[test]
    fn kernels_sum_in_scalar_loop_order() {
        let a = [0.1, 0.2, 0.3, 1e16, 1.0];
        let mut acc = 0.0;
        for &x in &a {
            acc += x;
        }
        assert_eq!(sum(&a).to_bits(), acc.to_bits());
        assert_eq!(sum(&[]), 0.0);
        // Signed zeros as the loop gives them: 0.0 + -0.0 is 0.0.
        assert!(sum(&[-0.0, -0.0]).is_sign_positive());
        assert!(dot(&[-1.0], &[0.0]).is_sign_positive());
        let mut c = [7.0];
        matmul(&[-1.0], &[0.0], 1, 1, &mut c);
        assert!(c[0] == 0.0 && c[0].is_sign_positive());
        assert_eq!(dot(&[1.0, 2.0], &[3.0, 4.0]), 11.0);
        // matmul equals the naive triple loop bit for bit.
        let (m, k, n) = (3, 4, 2);
        let a: Vec<f64> = (0..m * k).map(|i| (i as f64 * 0.37).sin()).collect();
        let b: Vec<f64> = (0..k * n).map(|i| (i as f64 * 0.91).cos()).collect();
        let mut c = vec![9.0; m * n];
        matmul(&a, &b, k, n, &mut c);
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0;
                for p in 0..k {
                    acc += a[i * k + p] * b[p * n + j];
                }
                assert_eq!(c[i * n + j].to_bits(), acc.to_bits());
            }
        }
        // gemm with every transpose agrees with matmul on transposed copies
        // (n = 2 here; the 4-column path is checked below).
        let at: Vec<f64> = (0..k * m).map(|q| a[(q % m) * k + q / m]).collect();
        let bt: Vec<f64> = (0..n * k).map(|q| b[(q % k) * n + q / k]).collect();
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut g = vec![0.0; m * n];
            let (aa, bb) = (if ta { &at } else { &a }, if tb { &bt } else { &b });
            gemm(ta, tb, aa, bb, m, k, n, &mut g);
            assert_eq!(g, c, "ta {ta} tb {tb}");
        }
        let mut y = vec![0.0; m];
        matvec(&a, &b[..k], k, &mut y);
        assert_eq!(y[1], dot(&a[k..2 * k], &b[..k]));
    }

    #[test]
    fn gemm_with_transposed_b_sums_each_element_in_order() {
        for (m, k, n) in [(3, 5, 9), (1, 1, 4), (2, 7, 5), (4, 3, 8)] {
            let a: Vec<f64> = (0..m * k).map(|i| (i as f64 * 0.73).sin() * 1e3).collect();
            let bt: Vec<f64> = (0..n * k).map(|i| (i as f64 * 0.29).cos() * 1e-3).collect();
            let mut c: Vec<f64> = (0..m * n).map(|i| i as f64 * 0.1).collect();
            let mut want = c.clone();
            for i in 0..m {
                for j in 0..n {
                    for p in 0..k {
                        want[i * n + j] += a[i * k + p] * bt[j * k + p];
                    }
                }
            }
            gemm(false, true, &a, &bt, m, k, n, &mut c);
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&c), bits(&want), "{m}x{k}x{n}");
        }
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
