//! The benchmark programs (`benches/programs/*.irad`) stay correct without
//! running the benchmark: each one, at a small size, gives the hand-written
//! Rust primal's value (`benches/common/handwritten.rs`, shared with
//! `benches/ad.rs`) and, by reverse and by forward mode, the hand-derived
//! adjoint's gradient, in the interpreter and in the JIT. Values agree within
//! 1e-12 relative; gradients entry by entry within 1e-12 of their largest
//! entry (an entry that is the small difference of large terms carries their
//! rounding, which the order of accumulation changes).

#[path = "../benches/common/handwritten.rs"]
mod handwritten;

use irad::ir::interp::{ArrayData, RunOptions, Val};
use irad::passes::forward::grad::{GradOptions, Gradient};
use irad::{Backend, Source};

const BACKENDS: [Backend; 2] = [Backend::Interp, Backend::Jit];

/// `benches/programs/NAME.irad`, loaded, and `@NAME`.
fn program(name: &str) -> (Source, irad::ir::Module, irad::ir::FuncId) {
    let path = format!(
        "{}/benches/programs/{name}.irad",
        env!("CARGO_MANIFEST_DIR")
    );
    let src = irad::read_source(std::path::Path::new(&path)).expect("the program exists");
    let m = irad::load(&src).unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
    let f = irad::find_function(&src, &m, name).expect("the program defines @NAME");
    (src, m, f)
}

/// The value of `@NAME(args)` and its gradients by reverse mode and by
/// forward mode (width 8), with `backend` running everything.
fn run_all(name: &str, args: &[Val], backend: Backend) -> (f64, Vec<f64>, Vec<f64>) {
    let (src, m, f) = program(name);
    let registry = irad::rules::Registry::new();
    let opts = GradOptions {
        width: 8,
        exec: backend.exec(),
        ..GradOptions::default()
    };
    let value = irad::run_with(&src, &m, f, args, &RunOptions::default(), backend)
        .unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
    let (rev, _) = irad::grad_reverse(&src, &m, f, args, &registry, &opts)
        .unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
    let (fwd, _) = irad::grad_forward(&src, &m, f, args, &registry, &opts)
        .unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
    assert_eq!(
        floats(&rev.value),
        [floats(&value)[0]],
        "{name}: @f.rev value"
    );
    assert_eq!(
        floats(&fwd.value),
        [floats(&value)[0]],
        "{name}: @f.fwd value"
    );
    (floats(&value)[0], gradient(&rev), gradient(&fwd))
}

fn floats(v: &Val) -> Vec<f64> {
    match v {
        Val::F64(x) => vec![*x],
        Val::Array(a) => match &*a.0.borrow() {
            ArrayData::F64(xs) => xs.clone(),
            other => panic!("not an f64 array: {other:?}"),
        },
        Val::Tuple(vs) => vs.iter().flat_map(floats).collect(),
        other => panic!("not numeric: {other:?}"),
    }
}

fn gradient(g: &Gradient) -> Vec<f64> {
    g.gradient.iter().flatten().flat_map(floats).collect()
}

fn assert_value(what: &str, got: f64, want: f64) {
    assert!(
        (got - want).abs() <= 1e-12 * want.abs(),
        "{what}: {got:e}, want {want:e}"
    );
}

fn assert_gradient(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-12 * scale + 1e-14,
            "{what}: entry {i} is {g:e}, want {w:e}"
        );
    }
}

/// Checks an array program against its hand-written primal and adjoint at `x`.
fn check_array_program(
    name: &str,
    x: &[f64],
    primal: fn(&[f64]) -> f64,
    adjoint: fn(&[f64], &mut [f64]) -> f64,
) {
    let want = primal(x);
    let mut want_grad = vec![0.0; x.len()];
    assert_value(
        &format!("{name}: adjoint's value"),
        adjoint(x, &mut want_grad),
        want,
    );
    for backend in BACKENDS {
        let args = [Val::f64_array(x.to_vec())];
        let (value, rev, fwd) = run_all(name, &args, backend);
        let what = format!("{name} ({backend:?})");
        assert_value(&format!("{what}: value"), value, want);
        assert_gradient(&format!("{what}: reverse"), &rev, &want_grad);
        assert_gradient(&format!("{what}: forward"), &fwd, &want_grad);
    }
}

#[test]
fn rosenbrock_matches_the_hand_written_adjoint() {
    let x = handwritten::rosenbrock_point(37);
    check_array_program(
        "rosenbrock",
        &x,
        handwritten::rosenbrock,
        handwritten::rosenbrock_adjoint,
    );
}

#[test]
fn branchy_matches_the_hand_written_adjoint() {
    let x = handwritten::branchy_point(41);
    assert!(x.iter().any(|&v| v > 0.0) && x.iter().any(|&v| v <= 0.0));
    check_array_program(
        "branchy",
        &x,
        handwritten::branchy,
        handwritten::branchy_adjoint,
    );
}

#[test]
fn sum_has_a_gradient_of_ones() {
    let x: Vec<f64> = (0..19).map(|i| 0.25 * f64::from(i) - 2.0).collect();
    let ones = vec![1.0; x.len()];
    for backend in BACKENDS {
        let (value, rev, fwd) = run_all("sum", &[Val::f64_array(x.clone())], backend);
        assert_value("sum: value", value, handwritten::sum(&x));
        assert_eq!(rev, ones, "sum ({backend:?}): reverse");
        assert_eq!(fwd, ones, "sum ({backend:?}): forward");
    }
}

/// The program's step count is fixed (the benchmark's), so this runs all
/// 10 000 RK4 steps in the interpreter, by reverse and by forward mode.
#[test]
fn lotka_volterra_matches_the_hand_written_adjoint() {
    let p: handwritten::Params = handwritten::LV_PARAMS;
    let want = handwritten::lotka_volterra(&p);
    let (adj_value, want_grad) = handwritten::lotka_volterra_adjoint(&p);
    assert_value("lotka_volterra: adjoint's value", adj_value, want);
    for backend in BACKENDS {
        let args: Vec<Val> = p.iter().map(|&v| Val::F64(v)).collect();
        let (value, rev, fwd) = run_all("lotka_volterra", &args, backend);
        let what = format!("lotka_volterra ({backend:?})");
        assert_value(&format!("{what}: value"), value, want);
        assert_gradient(&format!("{what}: reverse"), &rev, &want_grad);
        assert_gradient(&format!("{what}: forward"), &fwd, &want_grad);
    }
}
