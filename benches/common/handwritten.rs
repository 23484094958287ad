//! Hand-written Rust primals and adjoints of the benchmark programs
//! (`benches/programs/*.irad`): what irad's compiled gradients are measured
//! against (benches/ad.rs) and checked against (tests/bench_programs.rs).
//!
//! Each primal evaluates its expressions in the order the `.irad` program
//! does, so primal values agree with irad's to the last bit except where the
//! math functions differ (these use std's `sin`/`exp`, irad the `libm`
//! crate's). Each adjoint returns the value and adds the gradient into `grad`
//! (the shadow convention of irad's `@f.rev`), or, for scalar arguments,
//! returns it. The adjoints are derived by hand, reverse mode, with no tape
//! beyond what the function needs (Lotka-Volterra keeps the state at the
//! start of each step and recomputes the stages).

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
