//! The benchmark programs (`benches/programs/*.irad`) stay correct without
//! running the benchmark: each one, at a small size, gives the hand-written
//! Rust primal's value (`benches/common/handwritten.rs`, shared with
//! `benches/ad.rs`) and, by reverse and by forward mode, the hand-derived
//! adjoint's gradient, in the interpreter and in the JIT. Values agree within
//! 1e-12 relative; gradients entry by entry within 1e-12 of their largest
//! entry (an entry that is the small difference of large terms carries their
//! rounding, which the order of accumulation changes).
//!
//! The Gaussian mixture (`gmm`) is differentiated with respect to its
//! parameters only, and its hand-written adjoint is checked against central
//! differences, as the MLP's is; `logsumexp` is also run far beyond exp's
//! range, which the program's shift by the max must survive.
//!
//! The two MLP programs (`mlp_bulk`, `mlp_scalar`: one function, written with
//! the bulk primitives and with scalar loops) must also agree with each other
//! to rounding (1e-13 relative; `matmul` sums in its kernel's order), their gradients with respect to the weights and biases with
//! the hand-written adjoint within 1e-10 of the largest entry, and that
//! adjoint with central differences on every coordinate of a small problem.

#[path = "../benches/common/handwritten.rs"]
mod handwritten;

use irad::ir::interp::{ArrayData, ArrayRef, Val};
use irad::passes::forward::grad::{GradOptions, Gradient};
use irad::{Backend, Source};

const BACKENDS: [Backend; 2] = [Backend::Interp, Backend::Jit];

/// `benches/programs/NAME.irad`, loaded, and `@NAME`.
fn program(name: &str) -> (Source, irad::ir::Module, irad::ir::FuncId) {
    program_fn(name, name)
}

/// `benches/programs/FILE.irad`, loaded, and `@func`.
fn program_fn(file: &str, func: &str) -> (Source, irad::ir::Module, irad::ir::FuncId) {
    let path = format!(
        "{}/benches/programs/{file}.irad",
        env!("CARGO_MANIFEST_DIR")
    );
    let src = irad::read_source(std::path::Path::new(&path)).expect("the program exists");
    let m = irad::load(&src).unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
    let f = irad::find_function(&src, &m, func).expect("the program defines the function");
    (src, m, f)
}

/// The value of `@NAME(args)` and its gradients by reverse mode and by
/// forward mode (width 8), with `backend` running everything.
fn run_all(name: &str, args: &[Val], backend: Backend) -> (f64, Vec<f64>, Vec<f64>) {
    let (src, m, f) = program(name);
    let registry = irad::rules::Registry::new();
    let opts = GradOptions {
        lanes: irad::ir::Lanes::dense(8).expect("8 is not 0"),
        exec: backend.exec(),
        ..GradOptions::default()
    };
    let value = irad::run(
        &src,
        &m,
        &irad::RunRequest {
            backend,
            ..irad::RunRequest::new(f, args)
        },
    )
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
    assert_gradient_within(what, got, want, 1e-12);
}

/// Every entry within `rel` of the largest entry of `want` (or 1e-14).
fn assert_gradient_within(what: &str, got: &[f64], want: &[f64], rel: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * scale + 1e-14,
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
fn logsumexp_matches_the_hand_written_adjoint() {
    let x = handwritten::logsumexp_point(43);
    check_array_program(
        "logsumexp",
        &x,
        handwritten::logsumexp,
        handwritten::logsumexp_adjoint,
    );
    // Shifted far beyond exp's range (exp(710) overflows): the program
    // subtracts the max first, so value and gradient stay finite.
    let shifted: Vec<f64> = x.iter().map(|v| v + 1000.0).collect();
    assert!(shifted.iter().all(|v| !v.exp().is_finite()));
    check_array_program(
        "logsumexp",
        &shifted,
        handwritten::logsumexp,
        handwritten::logsumexp_adjoint,
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

/// The MLP programs' sizes here: small enough for the interpreter and for
/// central differences on every coordinate.
const MLP_SMALL: handwritten::MlpDims = handwritten::MlpDims {
    nb: 3,
    nin: 5,
    nh: 4,
    nout: 3,
};

/// The MLP programs' arguments: w1, b1, w2, b2, x, labels.
fn mlp_args(p: &handwritten::MlpProblem) -> Vec<Val> {
    let mut args: Vec<Val> = p
        .params
        .arrays()
        .into_iter()
        .map(|a| Val::f64_array(a.to_vec()))
        .collect();
    args.push(Val::f64_array(p.x.clone()));
    args.push(Val::Array(ArrayRef::new(ArrayData::I64(p.labels.clone()))));
    args
}

/// The value of `@loss` of `benches/programs/FILE.irad` on `p`.
fn mlp_value(file: &str, p: &handwritten::MlpProblem, backend: Backend) -> f64 {
    let (src, m, f) = program_fn(file, "loss");
    let v = irad::run(
        &src,
        &m,
        &irad::RunRequest {
            backend,
            ..irad::RunRequest::new(f, &mlp_args(p))
        },
    )
    .unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
    floats(&v)[0]
}

/// The bulk program's value is the same bit for bit in the interpreter and
/// in the JIT (one kernel); the scalar program's agrees with it to rounding
/// (`matmul` sums in the kernel's blocked order, the loops in increasing p),
/// and both with the hand-written primal's (which uses std's tanh, exp and
/// log).
#[test]
fn mlp_programs_agree_to_rounding() {
    for seed in 1..=4 {
        let p = handwritten::mlp_problem(MLP_SMALL, seed);
        let want = handwritten::mlp(&p);
        let mut first: Option<f64> = None;
        for backend in BACKENDS {
            let bulk = mlp_value("mlp_bulk", &p, backend);
            let scalar = mlp_value("mlp_scalar", &p, backend);
            if let Some(first) = first {
                assert_eq!(
                    bulk.to_bits(),
                    first.to_bits(),
                    "seed {seed}: bulk differs between backends"
                );
            }
            first = Some(bulk);
            assert!(
                (bulk - scalar).abs() <= 1e-13 * scalar.abs(),
                "seed {seed} ({backend:?}): bulk {bulk:e}, scalar {scalar:e}"
            );
            assert_value(&format!("mlp (seed {seed}, {backend:?})"), bulk, want);
        }
    }
}

/// The hand-written adjoint against central differences of the hand-written
/// primal, on every coordinate of a small problem.
#[test]
fn mlp_adjoint_matches_central_differences() {
    let p = handwritten::mlp_problem(MLP_SMALL, 7);
    let mut grad = handwritten::MlpParams::zeros(MLP_SMALL);
    let value = handwritten::mlp_adjoint(&p, &mut grad);
    assert_value("mlp adjoint's value", value, handwritten::mlp(&p));
    // The benchmark's rustc primal in the program's loop order sums in the
    // same order as the hand-written one: the same bits.
    assert_eq!(
        handwritten::mlp_program_order(&p).to_bits(),
        handwritten::mlp(&p).to_bits()
    );
    for (k, g) in grad.arrays().into_iter().enumerate() {
        for (i, &gi) in g.iter().enumerate() {
            let fd = handwritten::mlp_central_difference(&p, k, i);
            assert!(
                (fd - gi).abs() <= 1e-7 * gi.abs() + 1e-9,
                "parameter {k}, entry {i}: adjoint {gi:e}, central difference {fd:e}"
            );
        }
    }
}

/// Both programs' gradients with respect to the weights and biases (not x,
/// not the labels), by reverse and by forward mode, against the hand-written
/// adjoint.
#[test]
fn mlp_gradients_match_the_hand_written_adjoint() {
    let p = handwritten::mlp_problem(MLP_SMALL, 3);
    let mut want = handwritten::MlpParams::zeros(MLP_SMALL);
    handwritten::mlp_adjoint(&p, &mut want);
    let want: Vec<f64> = want.arrays().concat();
    let args = mlp_args(&p);
    let registry = irad::rules::Registry::new();
    for file in ["mlp_bulk", "mlp_scalar"] {
        let (src, m, f) = program_fn(file, "loss");
        for backend in BACKENDS {
            let opts = GradOptions {
                lanes: irad::ir::Lanes::dense(8).expect("8 is not 0"),
                wrt: Some(vec![0, 1, 2, 3]),
                exec: backend.exec(),
                ..GradOptions::default()
            };
            let what = format!("{file} ({backend:?})");
            let (rev, _) = irad::grad_reverse(&src, &m, f, &args, &registry, &opts)
                .unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
            let (fwd, _) = irad::grad_forward(&src, &m, f, &args, &registry, &opts)
                .unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
            for g in [&rev, &fwd] {
                assert!(
                    g.gradient[4].is_none() && g.gradient[5].is_none(),
                    "{what}: not wrt x or labels"
                );
            }
            assert_gradient_within(&format!("{what}: reverse"), &gradient(&rev), &want, 1e-10);
            assert_gradient_within(&format!("{what}: forward"), &gradient(&fwd), &want, 1e-10);
        }
    }
}

/// The benchmark's own problem (batch 64, 784 -> 128 -> 10): the loss is
/// near log(10), as for an untrained network, and the hand-written adjoint
/// agrees with central differences on a few coordinates of each array.
#[test]
fn mlp_benchmark_problem_is_sound() {
    let p = handwritten::mlp_problem(handwritten::MLP_DIMS, 12);
    let mut grad = handwritten::MlpParams::zeros(handwritten::MLP_DIMS);
    let value = handwritten::mlp_adjoint(&p, &mut grad);
    assert!((value - 10f64.ln()).abs() < 0.5, "loss {value}");
    for (k, g) in grad.arrays().into_iter().enumerate() {
        for i in [0, g.len() / 2, g.len() - 1] {
            let fd = handwritten::mlp_central_difference(&p, k, i);
            assert!(
                (fd - g[i]).abs() <= 1e-6 * g[i].abs() + 1e-9,
                "parameter {k}, entry {i}: adjoint {:e}, central difference {fd:e}",
                g[i]
            );
        }
    }
}

/// The Gaussian mixture's sizes here: small enough for the interpreter and
/// for central differences on every coordinate, with more than one point,
/// component and dimension.
const GMM_SMALL: handwritten::GmmDims = handwritten::GmmDims { n: 6, d: 3, k: 4 };

/// The Gaussian mixture's arguments: mu, logw, invs, x.
fn gmm_args(p: &handwritten::GmmProblem) -> Vec<Val> {
    let mut args: Vec<Val> = p
        .params
        .arrays()
        .into_iter()
        .map(|a| Val::f64_array(a.to_vec()))
        .collect();
    args.push(Val::f64_array(p.x.clone()));
    args
}

/// The hand-written adjoint against central differences of the hand-written
/// primal, on every coordinate of a small problem, and on a few of the
/// benchmark's.
#[test]
fn gmm_adjoint_matches_central_differences() {
    for (dims, seed, every) in [(GMM_SMALL, 5, true), (handwritten::GMM_DIMS, 21, false)] {
        let p = handwritten::gmm_problem(dims, seed);
        let mut grad = handwritten::GmmParams::zeros(dims);
        let value = handwritten::gmm_adjoint(&p, &mut grad);
        assert_value("gmm adjoint's value", value, handwritten::gmm(&p));
        assert_eq!(
            handwritten::gmm_program_order(&p).to_bits(),
            handwritten::gmm(&p).to_bits(),
            "the program-structured rustc primal sums as the fused one"
        );
        for (a, g) in grad.arrays().into_iter().enumerate() {
            let coords: Vec<usize> = if every {
                (0..g.len()).collect()
            } else {
                vec![0, g.len() / 2, g.len() - 1]
            };
            for i in coords {
                let fd = handwritten::gmm_central_difference(&p, a, i);
                assert!(
                    (fd - g[i]).abs() <= 1e-6 * g[i].abs() + 1e-7,
                    "{dims:?}, parameter {a}, entry {i}: adjoint {:e}, central difference {fd:e}",
                    g[i]
                );
            }
        }
    }
}

/// The program's value against the hand-written primal, and its gradients
/// with respect to mu, logw and invs (not the points), by reverse and by
/// forward mode, against the hand-written adjoint.
#[test]
fn gmm_matches_the_hand_written_adjoint() {
    let p = handwritten::gmm_problem(GMM_SMALL, 3);
    let want_value = handwritten::gmm(&p);
    let mut want = handwritten::GmmParams::zeros(GMM_SMALL);
    handwritten::gmm_adjoint(&p, &mut want);
    let want: Vec<f64> = want.arrays().concat();
    let args = gmm_args(&p);
    let registry = irad::rules::Registry::new();
    let (src, m, f) = program("gmm");
    for backend in BACKENDS {
        let what = format!("gmm ({backend:?})");
        let value = irad::run(
            &src,
            &m,
            &irad::RunRequest {
                backend,
                ..irad::RunRequest::new(f, &args)
            },
        )
        .unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
        assert_value(&format!("{what}: value"), floats(&value)[0], want_value);
        let opts = GradOptions {
            lanes: irad::ir::Lanes::dense(8).expect("8 is not 0"),
            wrt: Some(vec![0, 1, 2]),
            exec: backend.exec(),
            ..GradOptions::default()
        };
        let (rev, _) = irad::grad_reverse(&src, &m, f, &args, &registry, &opts)
            .unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
        let (fwd, _) = irad::grad_forward(&src, &m, f, &args, &registry, &opts)
            .unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
        for g in [&rev, &fwd] {
            assert!(g.gradient[3].is_none(), "{what}: not wrt x");
            assert_eq!(floats(&g.value), [floats(&value)[0]], "{what}: value");
        }
        assert_gradient(&format!("{what}: reverse"), &gradient(&rev), &want);
        assert_gradient(&format!("{what}: forward"), &gradient(&fwd), &want);
    }
}
