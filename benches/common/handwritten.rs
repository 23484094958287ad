//! Hand-written Rust primals and adjoints of the benchmark programs
//! (`benches/programs/*.irad`): what irad's compiled gradients are measured
//! against (benches/ad.rs) and checked against (tests/bench_programs.rs).
//!
//! Each primal evaluates its expressions in the order the `.irad` program
//! does, so primal values agree with irad's to the last bit except where the
//! math functions differ (these use std's `sin`/`exp`, glibc's; irad its
//! own, each within an ulp of the exact value, so at most a few ulps from
//! glibc's). Each adjoint returns the value and adds the gradient into
//! `grad` (the shadow convention of irad's `@f.rev`), or, for scalar
//! arguments, returns it. The adjoints are derived by hand, reverse mode, with no tape
//! beyond what the function needs (Lotka-Volterra keeps the state at the
//! start of each step and recomputes the stages; the MLP keeps its hidden
//! activations and logits; the Gaussian mixture recomputes each point's
//! scores). The MLP's and the mixture's data come from a small xorshift
//! generator here, so every user of this file sees the same problem.

/// The Rosenbrock function, `sum_{i < n-1} 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2`.
pub fn rosenbrock(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for w in x.windows(2) {
        let a = w[1] - w[0] * w[0];
        let b = 1.0 - w[0];
        s = s + 100.0 * a * a + b * b;
    }
    s
}

/// The value of [`rosenbrock`]; its gradient is added into `grad` (of `x`'s length).
pub fn rosenbrock_adjoint(x: &[f64], grad: &mut [f64]) -> f64 {
    assert_eq!(x.len(), grad.len(), "one gradient entry per element");
    let mut s = 0.0;
    // Term i reads x[i] and x[i+1]; the adjoint of x[i+1] that term i
    // produces is carried to the next step instead of being added into
    // grad[i+1] now, so each entry of `grad` is written once.
    let mut carried = 0.0;
    for (w, g) in x.windows(2).zip(grad.iter_mut()) {
        let a = w[1] - w[0] * w[0];
        let b = 1.0 - w[0];
        s = s + 100.0 * a * a + b * b;
        // d/da (100 a^2) = 200 a; a depends on x[i+1] (+1) and x[i] (-2 x[i]);
        // d/db (b^2) = 2 b; b depends on x[i] (-1).
        let a_bar = 200.0 * a;
        let b_bar = 2.0 * b;
        *g += carried - 2.0 * w[0] * a_bar - b_bar;
        carried = a_bar;
    }
    if let Some(last) = grad.last_mut() {
        *last += carried;
    }
    s
}

/// The Lotka-Volterra parameters `(a, b, c, d)`.
pub type Params = [f64; 4];

/// Time step of the Lotka-Volterra integration.
pub const LV_DT: f64 = 0.001;
/// Number of RK4 steps of the Lotka-Volterra integration.
pub const LV_STEPS: usize = 10_000;

/// `u + v` after [`LV_STEPS`] RK4 steps of `du = a u - b u v`,
/// `dv = -c v + d u v` from `(1, 1)`.
pub fn lotka_volterra(p: &Params) -> f64 {
    let (mut u, mut v) = (1.0, 1.0);
    for _ in 0..LV_STEPS {
        (u, v) = rk4_step(p, u, v);
    }
    u + v
}

/// The value of [`lotka_volterra`] and its gradient with respect to the parameters.
pub fn lotka_volterra_adjoint(p: &Params) -> (f64, Params) {
    // Forward sweep: the state at the start of every step.
    let mut states = Vec::with_capacity(LV_STEPS);
    let (mut u, mut v) = (1.0, 1.0);
    for _ in 0..LV_STEPS {
        states.push((u, v));
        (u, v) = rk4_step(p, u, v);
    }
    let value = u + v;
    // Reverse sweep: the adjoint of the state, carried back step by step.
    let mut p_bar = [0.0; 4];
    let (mut u_bar, mut v_bar) = (1.0, 1.0);
    for &(u, v) in states.iter().rev() {
        (u_bar, v_bar) = rk4_step_adjoint(p, u, v, u_bar, v_bar, &mut p_bar);
    }
    (value, p_bar)
}

/// `sum_i (x[i] > 0 ? sin(x[i]) x[i] : exp(x[i]) - x[i]^2 / 2)`.
pub fn branchy(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for &xi in x {
        if xi > 0.0 {
            s += xi.sin() * xi;
        } else {
            s += xi.exp() - 0.5 * xi * xi;
        }
    }
    s
}

/// The value of [`branchy`]; its gradient is added into `grad` (of `x`'s length).
pub fn branchy_adjoint(x: &[f64], grad: &mut [f64]) -> f64 {
    assert_eq!(x.len(), grad.len(), "one gradient entry per element");
    let mut s = 0.0;
    for (&xi, g) in x.iter().zip(grad.iter_mut()) {
        if xi > 0.0 {
            let (sin, cos) = xi.sin_cos();
            s += sin * xi;
            *g += cos * xi + sin;
        } else {
            let e = xi.exp();
            s += e - 0.5 * xi * xi;
            *g += e - xi;
        }
    }
    s
}

/// `log(sum_i exp(x[i] - m)) + m` with `m = max_i x[i]`: the max in one
/// pass, then the sum in a second, as the program does.
pub fn logsumexp(x: &[f64]) -> f64 {
    let mut m = f64::NEG_INFINITY;
    for &xi in x {
        m = m.max(xi);
    }
    let mut s = 0.0;
    for &xi in x {
        s += (xi - m).exp();
    }
    s.ln() + m
}

/// The value of [`logsumexp`]; its gradient, `exp(x[i] - f)` (the softmax),
/// is added into `grad` (of `x`'s length). Two passes, one exp per element in
/// each: the max and the sum together (the sum rescaled whenever the max
/// grows), then the gradient.
pub fn logsumexp_adjoint(x: &[f64], grad: &mut [f64]) -> f64 {
    assert_eq!(x.len(), grad.len(), "one gradient entry per element");
    let mut m = f64::NEG_INFINITY;
    let mut s = 0.0;
    for &xi in x {
        if xi <= m {
            s += (xi - m).exp();
        } else {
            // exp(-inf) is 0, so the first element needs no special case.
            s = s * (m - xi).exp() + 1.0;
            m = xi;
        }
    }
    let f = s.ln() + m;
    for (&xi, g) in x.iter().zip(grad.iter_mut()) {
        *g += (xi - f).exp();
    }
    f
}

/// The sum of the elements, left to right.
pub fn sum(x: &[f64]) -> f64 {
    let mut s = 0.0;
    for &xi in x {
        s += xi;
    }
    s
}

/// `x[i] = 0.5 + 0.3 sin(i)`: the Rosenbrock benchmark's point.
pub fn rosenbrock_point(n: usize) -> Vec<f64> {
    (0..n).map(|i| 0.5 + 0.3 * (i as f64).sin()).collect()
}

/// `x[i] = 3 sin(1.3 i)`: the logsumexp benchmark's point (a spread of
/// exponents, so the softmax is far from uniform).
pub fn logsumexp_point(n: usize) -> Vec<f64> {
    (0..n).map(|i| 3.0 * (1.3 * i as f64).sin()).collect()
}

/// `x[i] = sin(1.7 i)`: the branchy benchmark's point.
pub fn branchy_point(n: usize) -> Vec<f64> {
    (0..n).map(|i| (1.7 * i as f64).sin()).collect()
}

/// The Lotka-Volterra benchmark's parameters.
pub const LV_PARAMS: Params = [1.5, 1.0, 3.0, 1.0];

/// The derivative field `(a u - b u v, -c v + d u v)`, in the program's order.
fn field(p: &Params, u: f64, v: f64) -> (f64, f64) {
    let [a, b, c, d] = *p;
    (a * u - b * u * v, -c * v + d * u * v)
}

/// One classic Runge-Kutta step of [`field`].
fn rk4_step(p: &Params, u: f64, v: f64) -> (f64, f64) {
    let dt = LV_DT;
    let (k1u, k1v) = field(p, u, v);
    let (k2u, k2v) = field(p, u + 0.5 * dt * k1u, v + 0.5 * dt * k1v);
    let (k3u, k3v) = field(p, u + 0.5 * dt * k2u, v + 0.5 * dt * k2v);
    let (k4u, k4v) = field(p, u + dt * k3u, v + dt * k3v);
    (
        u + dt / 6.0 * (k1u + 2.0 * k2u + 2.0 * k3u + k4u),
        v + dt / 6.0 * (k1v + 2.0 * k2v + 2.0 * k3v + k4v),
    )
}

/// The adjoint of [`field`] at `(u, v)` for the output adjoint `(ku_bar,
/// kv_bar)`: returns the adjoint of `(u, v)` and adds that of the parameters.
fn field_adjoint(
    p: &Params,
    u: f64,
    v: f64,
    ku_bar: f64,
    kv_bar: f64,
    p_bar: &mut Params,
) -> (f64, f64) {
    let [a, b, c, d] = *p;
    p_bar[0] += ku_bar * u;
    p_bar[1] -= ku_bar * u * v;
    p_bar[2] -= kv_bar * v;
    p_bar[3] += kv_bar * u * v;
    (
        ku_bar * (a - b * v) + kv_bar * d * v,
        -ku_bar * b * u + kv_bar * (d * u - c),
    )
}

/// The adjoint of [`rk4_step`] from `(u, v)`: given the adjoint of the new
/// state, returns the adjoint of `(u, v)` and adds that of the parameters.
/// The stages are recomputed from `(u, v)`.
fn rk4_step_adjoint(
    p: &Params,
    u: f64,
    v: f64,
    u_bar: f64,
    v_bar: f64,
    p_bar: &mut Params,
) -> (f64, f64) {
    let dt = LV_DT;
    // Recompute the stage points.
    let (k1u, k1v) = field(p, u, v);
    let (u2, v2) = (u + 0.5 * dt * k1u, v + 0.5 * dt * k1v);
    let (k2u, k2v) = field(p, u2, v2);
    let (u3, v3) = (u + 0.5 * dt * k2u, v + 0.5 * dt * k2v);
    let (k3u, k3v) = field(p, u3, v3);
    let (u4, v4) = (u + dt * k3u, v + dt * k3v);
    // new = old + dt/6 (k1 + 2 k2 + 2 k3 + k4).
    let (mut ou_bar, mut ov_bar) = (u_bar, v_bar);
    let w = dt / 6.0;
    let (mut k1u_bar, mut k1v_bar) = (w * u_bar, w * v_bar);
    let (mut k2u_bar, mut k2v_bar) = (2.0 * w * u_bar, 2.0 * w * v_bar);
    let (mut k3u_bar, mut k3v_bar) = (2.0 * w * u_bar, 2.0 * w * v_bar);
    let (k4u_bar, k4v_bar) = (w * u_bar, w * v_bar);
    // k4 = field(old + dt k3).
    let (s_u, s_v) = field_adjoint(p, u4, v4, k4u_bar, k4v_bar, p_bar);
    ou_bar += s_u;
    ov_bar += s_v;
    k3u_bar += dt * s_u;
    k3v_bar += dt * s_v;
    // k3 = field(old + dt/2 k2).
    let (s_u, s_v) = field_adjoint(p, u3, v3, k3u_bar, k3v_bar, p_bar);
    ou_bar += s_u;
    ov_bar += s_v;
    k2u_bar += 0.5 * dt * s_u;
    k2v_bar += 0.5 * dt * s_v;
    // k2 = field(old + dt/2 k1).
    let (s_u, s_v) = field_adjoint(p, u2, v2, k2u_bar, k2v_bar, p_bar);
    ou_bar += s_u;
    ov_bar += s_v;
    k1u_bar += 0.5 * dt * s_u;
    k1v_bar += 0.5 * dt * s_v;
    // k1 = field(old).
    let (s_u, s_v) = field_adjoint(p, u, v, k1u_bar, k1v_bar, p_bar);
    (ou_bar + s_u, ov_bar + s_v)
}

/// The sizes of an MLP problem (benches/programs/mlp_*.irad): `nb` examples
/// of `nin` inputs, `nh` hidden units, `nout` classes.
#[derive(Copy, Clone, Debug)]
pub struct MlpDims {
    /// Examples in the batch.
    pub nb: usize,
    /// Inputs per example.
    pub nin: usize,
    /// Hidden units.
    pub nh: usize,
    /// Classes.
    pub nout: usize,
}

/// The MLP benchmark's sizes (issue 12): batch 64, 784 -> 128 -> 10.
pub const MLP_DIMS: MlpDims = MlpDims {
    nb: 64,
    nin: 784,
    nh: 128,
    nout: 10,
};

/// The parameters of the MLP, or their gradient: `w1` is nin x nh and `w2`
/// nh x nout, row-major, stored input by output as in the programs.
#[derive(Clone, Debug, PartialEq)]
pub struct MlpParams {
    /// The first layer's weights, nin x nh.
    pub w1: Vec<f64>,
    /// The first layer's biases, nh.
    pub b1: Vec<f64>,
    /// The second layer's weights, nh x nout.
    pub w2: Vec<f64>,
    /// The second layer's biases, nout.
    pub b2: Vec<f64>,
}

/// An MLP problem: parameters, a batch `x` (nb x nin, row-major) and one
/// class per example.
#[derive(Clone, Debug)]
pub struct MlpProblem {
    /// The sizes.
    pub dims: MlpDims,
    /// The weights and biases.
    pub params: MlpParams,
    /// The inputs, nb x nin.
    pub x: Vec<f64>,
    /// The class of each example, in 0..nout.
    pub labels: Vec<i64>,
}

impl MlpParams {
    /// Zeros of the shapes of `dims`: a gradient to add into.
    pub fn zeros(dims: MlpDims) -> MlpParams {
        MlpParams {
            w1: vec![0.0; dims.nin * dims.nh],
            b1: vec![0.0; dims.nh],
            w2: vec![0.0; dims.nh * dims.nout],
            b2: vec![0.0; dims.nout],
        }
    }

    /// The four arrays, in the programs' argument order.
    pub fn arrays(&self) -> [&[f64]; 4] {
        [&self.w1, &self.b1, &self.w2, &self.b2]
    }

    /// The four arrays, mutable, in the programs' argument order.
    pub fn arrays_mut(&mut self) -> [&mut Vec<f64>; 4] {
        [&mut self.w1, &mut self.b1, &mut self.w2, &mut self.b2]
    }
}

/// A deterministic problem of the shapes of `dims`: weights uniform in
/// +-1/sqrt(fan-in) (so the hidden units are neither linear nor saturated),
/// biases in +-0.1, inputs in [0, 1) (as pixel intensities), labels uniform;
/// drawn from xorshift64* seeded with `seed`.
pub fn mlp_problem(dims: MlpDims, seed: u64) -> MlpProblem {
    let mut rng = XorShift::new(seed);
    let mut uniform = |n: usize, lo: f64, hi: f64| -> Vec<f64> {
        (0..n).map(|_| lo + (hi - lo) * rng.next_f64()).collect()
    };
    let r1 = 1.0 / (dims.nin as f64).sqrt();
    let r2 = 1.0 / (dims.nh as f64).sqrt();
    let params = MlpParams {
        w1: uniform(dims.nin * dims.nh, -r1, r1),
        b1: uniform(dims.nh, -0.1, 0.1),
        w2: uniform(dims.nh * dims.nout, -r2, r2),
        b2: uniform(dims.nout, -0.1, 0.1),
    };
    let x = uniform(dims.nb * dims.nin, 0.0, 1.0);
    let labels = (0..dims.nb)
        .map(|_| (rng.next_u64() % dims.nout as u64) as i64)
        .collect();
    MlpProblem {
        dims,
        params,
        x,
        labels,
    }
}

/// The mean softmax cross-entropy of the MLP `tanh(x W1 + b1) W2 + b2` on the
/// batch: the programs' function. Every sum is taken in the programs' order
/// (matrix elements from 0.0 in increasing p, the mean left to right); the
/// matrix products run with the inner loop along rows.
pub fn mlp(p: &MlpProblem) -> f64 {
    let MlpDims { nb, nout, .. } = p.dims;
    let (_, zb) = mlp_forward(p);
    let mut total = 0.0;
    for b in 0..nb {
        let row = &zb[b * nout..(b + 1) * nout];
        let (m, s) = max_and_sum_exp(row);
        total += m + s.ln() - row[label(p, b)];
    }
    total / nb as f64
}

/// [`mlp`] with mlp_scalar.irad's loop nests, statement for statement: each
/// matrix element as a dot product in its own innermost loop (the first
/// layer reads W1 down a column), then the bias; the loss as the program
/// computes it. The same sums in the same order as [`mlp`], so the same
/// value; what differs is the loop order, which [`mlp`] chooses so that the
/// innermost loop runs along rows (independent elements, which rustc
/// vectorises) instead of along one dependent sum. This is the rustc
/// compilation of the program irad compiles.
pub fn mlp_program_order(p: &MlpProblem) -> f64 {
    let MlpDims { nb, nin, nh, nout } = p.dims;
    let MlpParams { w1, b1, w2, b2 } = &p.params;
    let x = &p.x;
    let mut h = vec![0.0; nb * nh];
    for b in 0..nb {
        for j in 0..nh {
            let mut acc = 0.0;
            for q in 0..nin {
                acc += x[b * nin + q] * w1[q * nh + j];
            }
            h[b * nh + j] = (acc + b1[j]).tanh();
        }
    }
    let mut z = vec![0.0; nb * nout];
    for b in 0..nb {
        for c in 0..nout {
            let mut acc = 0.0;
            for j in 0..nh {
                acc += h[b * nh + j] * w2[j * nout + c];
            }
            z[b * nout + c] = acc;
        }
    }
    let mut total = 0.0;
    for b in 0..nb {
        let mut m = f64::NEG_INFINITY;
        for c in 0..nout {
            m = m.max(z[b * nout + c] + b2[c]);
        }
        let mut s = 0.0;
        for c in 0..nout {
            s += (z[b * nout + c] + b2[c] - m).exp();
        }
        let k = label(p, b);
        total += m + s.ln() - (z[b * nout + k] + b2[k]);
    }
    total / nb as f64
}

/// The value of [`mlp`]; the gradient with respect to the parameters (not
/// `x`) is added into `grad`. Keeps the hidden activations and the logits of
/// the forward pass, nothing else.
pub fn mlp_adjoint(p: &MlpProblem, grad: &mut MlpParams) -> f64 {
    let MlpDims { nb, nin, nh, nout } = p.dims;
    let (h, zb) = mlp_forward(p);
    // The loss and its adjoint with respect to the logits (with b2):
    // softmax minus one-hot, over nb for the mean.
    let mut total = 0.0;
    let mut dz = vec![0.0; nb * nout];
    for b in 0..nb {
        let row = &zb[b * nout..(b + 1) * nout];
        let k = label(p, b);
        let (m, s) = max_and_sum_exp(row);
        total += m + s.ln() - row[k];
        let dz_row = &mut dz[b * nout..(b + 1) * nout];
        for (d, &z) in dz_row.iter_mut().zip(row) {
            *d = (z - m).exp() / s / nb as f64;
        }
        dz_row[k] -= 1.0 / nb as f64;
    }
    // Output layer: db2 = sum_b dz, dW2 = h^T dz, dh = dz W2^T.
    let mut da = vec![0.0; nb * nh];
    for b in 0..nb {
        let dz_row = &dz[b * nout..(b + 1) * nout];
        for (g, &d) in grad.b2.iter_mut().zip(dz_row) {
            *g += d;
        }
        for j in 0..nh {
            let hj = h[b * nh + j];
            let w2_row = &p.params.w2[j * nout..(j + 1) * nout];
            let g_row = &mut grad.w2[j * nout..(j + 1) * nout];
            let mut dh = 0.0;
            for c in 0..nout {
                g_row[c] += hj * dz_row[c];
                dh += dz_row[c] * w2_row[c];
            }
            // Through tanh: d tanh(u)/du = 1 - tanh(u)^2.
            da[b * nh + j] = dh * (1.0 - hj * hj);
        }
    }
    // Hidden layer: db1 = sum_b da, dW1 = x^T da, one row of dW1 at a time.
    for b in 0..nb {
        for (g, &d) in grad.b1.iter_mut().zip(&da[b * nh..(b + 1) * nh]) {
            *g += d;
        }
    }
    for (pi, g_row) in grad.w1.chunks_exact_mut(nh).enumerate() {
        for b in 0..nb {
            let xv = p.x[b * nin + pi];
            for (g, &d) in g_row.iter_mut().zip(&da[b * nh..(b + 1) * nh]) {
                *g += xv * d;
            }
        }
    }
    total / nb as f64
}

/// The central difference of [`mlp`] with respect to entry `i` of parameter
/// array `k` (0 to 3: w1, b1, w2, b2), with the step `1e-5 max(1, |w|)`.
pub fn mlp_central_difference(p: &MlpProblem, k: usize, i: usize) -> f64 {
    let mut q = p.clone();
    let w = p.params.arrays()[k][i];
    let step = 1e-5 * w.abs().max(1.0);
    q.params.arrays_mut()[k][i] = w + step;
    let up = mlp(&q);
    q.params.arrays_mut()[k][i] = w - step;
    let down = mlp(&q);
    // The steps actually taken, after rounding.
    (up - down) / ((w + step) - (w - step))
}

/// The hidden activations `h` (nb x nh) and the logits with their bias
/// (nb x nout).
fn mlp_forward(p: &MlpProblem) -> (Vec<f64>, Vec<f64>) {
    let MlpDims { nb, nin, nh, nout } = p.dims;
    let MlpParams { w1, b1, w2, b2 } = &p.params;
    let mut h = vec![0.0; nb * nh];
    matmul_rows(&p.x, w1, nin, nh, &mut h);
    for row in h.chunks_exact_mut(nh) {
        for (v, &bias) in row.iter_mut().zip(b1) {
            *v = (*v + bias).tanh();
        }
    }
    let mut zb = vec![0.0; nb * nout];
    matmul_rows(&h, w2, nh, nout, &mut zb);
    for row in zb.chunks_exact_mut(nout) {
        for (v, &bias) in row.iter_mut().zip(b2) {
            *v += bias;
        }
    }
    (h, zb)
}

/// `c = a b` (a: m x k, b: k x n, c: m x n, row-major; c zero on entry): each
/// element summed from 0.0 in increasing p, the inner loop along a row of b.
fn matmul_rows(a: &[f64], b: &[f64], k: usize, n: usize, c: &mut [f64]) {
    for (c_row, a_row) in c.chunks_exact_mut(n).zip(a.chunks_exact(k)) {
        for (&av, b_row) in a_row.iter().zip(b.chunks_exact(n)) {
            for (cv, &bv) in c_row.iter_mut().zip(b_row) {
                *cv += av * bv;
            }
        }
    }
}

/// The largest element of a row and the sum of `exp(z - max)` over it, in order.
fn max_and_sum_exp(row: &[f64]) -> (f64, f64) {
    let m = row.iter().fold(f64::NEG_INFINITY, |m, &z| m.max(z));
    let mut s = 0.0;
    for &z in row {
        s += (z - m).exp();
    }
    (m, s)
}

/// Example `b`'s class, as an index.
fn label(p: &MlpProblem, b: usize) -> usize {
    usize::try_from(p.labels[b]).expect("labels are class indices")
}

/// The sizes of a Gaussian-mixture problem (benches/programs/gmm.irad): `n`
/// points of `d` dimensions, `k` components.
#[derive(Copy, Clone, Debug)]
pub struct GmmDims {
    /// Points.
    pub n: usize,
    /// Dimensions of a point.
    pub d: usize,
    /// Components.
    pub k: usize,
}

/// The Gaussian-mixture benchmark's sizes (issue 21): 1 000 points of 12
/// dimensions, 8 components.
pub const GMM_DIMS: GmmDims = GmmDims {
    n: 1000,
    d: 12,
    k: 8,
};

/// The parameters of the mixture, or their gradient, in the program's
/// argument order: `mu` and `invs` are k x d, row-major (component by
/// component).
#[derive(Clone, Debug, PartialEq)]
pub struct GmmParams {
    /// The means, k x d.
    pub mu: Vec<f64>,
    /// The log-weights, k (not normalised).
    pub logw: Vec<f64>,
    /// The inverse standard deviations, k x d (a diagonal per component).
    pub invs: Vec<f64>,
}

impl GmmParams {
    /// Zeros of the shapes of `dims`: a gradient to add into.
    pub fn zeros(dims: GmmDims) -> GmmParams {
        GmmParams {
            mu: vec![0.0; dims.k * dims.d],
            logw: vec![0.0; dims.k],
            invs: vec![0.0; dims.k * dims.d],
        }
    }

    /// The three arrays, in the program's argument order.
    pub fn arrays(&self) -> [&[f64]; 3] {
        [&self.mu, &self.logw, &self.invs]
    }

    /// The three arrays, mutable, in the program's argument order.
    pub fn arrays_mut(&mut self) -> [&mut Vec<f64>; 3] {
        [&mut self.mu, &mut self.logw, &mut self.invs]
    }
}

/// A Gaussian-mixture problem: the parameters and the points (n x d,
/// row-major), which are data, not differentiated.
#[derive(Clone, Debug)]
pub struct GmmProblem {
    /// The sizes.
    pub dims: GmmDims,
    /// The means, log-weights and inverse standard deviations.
    pub params: GmmParams,
    /// The points, n x d.
    pub x: Vec<f64>,
}

/// A deterministic problem of the shapes of `dims`: means in +-1,
/// log-weights in +-0.5, inverse standard deviations in [0.5, 1.5), points
/// in +-1.5 (so that several components share each point: the softmax over
/// components is neither uniform nor one-hot); drawn from xorshift64* seeded
/// with `seed`.
pub fn gmm_problem(dims: GmmDims, seed: u64) -> GmmProblem {
    let mut rng = XorShift::new(seed);
    let mut uniform = |n: usize, lo: f64, hi: f64| -> Vec<f64> {
        (0..n).map(|_| lo + (hi - lo) * rng.next_f64()).collect()
    };
    let GmmDims { n, d, k } = dims;
    let params = GmmParams {
        mu: uniform(k * d, -1.0, 1.0),
        logw: uniform(k, -0.5, 0.5),
        invs: uniform(k * d, 0.5, 1.5),
    };
    let x = uniform(n * d, -1.5, 1.5);
    GmmProblem { dims, params, x }
}

/// The Gaussian-mixture objective, the program's function:
///
/// `sum_i logsumexp_c (logw[c] + sum_j log(invs[c, j]) - 0.5 sum_j ((x[i, j] - mu[c, j]) invs[c, j])^2)`,
///
/// every sum taken in the program's order (from 0.0, increasing index).
pub fn gmm(p: &GmmProblem) -> f64 {
    let GmmDims { n, d, k } = p.dims;
    let GmmParams { mu, invs, .. } = &p.params;
    let logdet = gmm_logdet(p);
    let mut scores = vec![0.0; k];
    let mut total = 0.0;
    for xi in p.x.chunks_exact(d).take(n) {
        for (c, score) in scores.iter_mut().enumerate() {
            let mut q = 0.0;
            for j in 0..d {
                let z = (xi[j] - mu[c * d + j]) * invs[c * d + j];
                q += z * z;
            }
            *score = logdet[c] - 0.5 * q;
        }
        let (m, s) = max_and_sum_exp(&scores);
        total += m + s.ln();
    }
    total
}

/// [`gmm`] with gmm.irad's structure, statement for statement: the scaled
/// differences written to a scratch array `diff` in one loop and squared
/// and summed in a second, and the log-sum-exp in a helper that is not
/// inlined (as a call, like the program's). The same sums in the same order
/// as [`gmm`], so the same value; [`gmm`] fuses the two loops and inlines
/// the log-sum-exp. This is the rustc compilation of the program irad
/// compiles.
pub fn gmm_program_order(p: &GmmProblem) -> f64 {
    let GmmDims { n, d, k } = p.dims;
    let GmmParams { mu, logw, invs } = &p.params;
    let x = &p.x;
    let mut logdet = vec![0.0; k];
    for c in 0..k {
        let mut s = 0.0;
        for j in 0..d {
            s += invs[c * d + j].ln();
        }
        logdet[c] = logw[c] + s;
    }
    let mut scores = vec![0.0; k];
    let mut diff = vec![0.0; d];
    let mut total = 0.0;
    for i in 0..n {
        for c in 0..k {
            for j in 0..d {
                diff[j] = (x[i * d + j] - mu[c * d + j]) * invs[c * d + j];
            }
            let mut q = 0.0;
            for &z in &diff {
                q += z * z;
            }
            scores[c] = logdet[c] - 0.5 * q;
        }
        total += gmm_logsumexp(&scores);
    }
    total
}

/// gmm.irad's `logsumexp` helper, kept a call.
#[inline(never)]
fn gmm_logsumexp(s: &[f64]) -> f64 {
    let mut m = f64::NEG_INFINITY;
    for &v in s {
        m = m.max(v);
    }
    let mut t = 0.0;
    for &v in s {
        t += (v - m).exp();
    }
    m + t.ln()
}

/// The value of [`gmm`]; the gradient with respect to the parameters (not
/// the points) is added into `grad`. One pass over the points: each point's
/// scores (keeping the scaled differences z, k x d, and the exponentials),
/// its log-sum-exp, then the softmax weights `w_c` and
/// `mu_bar[c, j] += w_c z_j invs[c, j]`,
/// `invs_bar[c, j] -= w_c z_j (x[i, j] - mu[c, j])`; the weights summed over
/// the points give `logw_bar` and the log-determinant's share of `invs_bar`
/// at the end.
pub fn gmm_adjoint(p: &GmmProblem, grad: &mut GmmParams) -> f64 {
    let GmmDims { n, d, k } = p.dims;
    let GmmParams { mu, invs, .. } = &p.params;
    let logdet = gmm_logdet(p);
    let mut scores = vec![0.0; k];
    let mut z = vec![0.0; k * d];
    let mut wsum = vec![0.0; k];
    let mut total = 0.0;
    for xi in p.x.chunks_exact(d).take(n) {
        for (c, score) in scores.iter_mut().enumerate() {
            let mut q = 0.0;
            for j in 0..d {
                let zj = (xi[j] - mu[c * d + j]) * invs[c * d + j];
                z[c * d + j] = zj;
                q += zj * zj;
            }
            *score = logdet[c] - 0.5 * q;
        }
        let m = scores.iter().fold(f64::NEG_INFINITY, |m, &s| m.max(s));
        let mut s = 0.0;
        for score in scores.iter_mut() {
            // The score is not needed again, its exponential is.
            *score = (*score - m).exp();
            s += *score;
        }
        total += m + s.ln();
        let inv_s = 1.0 / s;
        for c in 0..k {
            let w = scores[c] * inv_s;
            wsum[c] += w;
            for j in 0..d {
                let g = w * z[c * d + j];
                grad.mu[c * d + j] += g * invs[c * d + j];
                grad.invs[c * d + j] -= g * (xi[j] - mu[c * d + j]);
            }
        }
    }
    for c in 0..k {
        grad.logw[c] += wsum[c];
        for j in 0..d {
            grad.invs[c * d + j] += wsum[c] / invs[c * d + j];
        }
    }
    total
}

/// The central difference of [`gmm`] with respect to entry `i` of parameter
/// array `a` (0 to 2: mu, logw, invs), with the step `1e-5 max(1, |w|)`.
pub fn gmm_central_difference(p: &GmmProblem, a: usize, i: usize) -> f64 {
    let mut q = p.clone();
    let w = p.params.arrays()[a][i];
    let step = 1e-5 * w.abs().max(1.0);
    q.params.arrays_mut()[a][i] = w + step;
    let up = gmm(&q);
    q.params.arrays_mut()[a][i] = w - step;
    let down = gmm(&q);
    (up - down) / ((w + step) - (w - step))
}

/// `logw[c] + sum_j log(invs[c, j])` for each component, the sum from 0.0
/// in increasing j.
fn gmm_logdet(p: &GmmProblem) -> Vec<f64> {
    let d = p.dims.d;
    let GmmParams { logw, invs, .. } = &p.params;
    logw.iter()
        .zip(invs.chunks_exact(d))
        .map(|(&lw, row)| {
            let mut s = 0.0;
            for &v in row {
                s += v.ln();
            }
            lw + s
        })
        .collect()
}

/// xorshift64* (Vigna): a small deterministic generator for benchmark data.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> XorShift {
        // The state must not be zero.
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1), 53 bits.
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}
