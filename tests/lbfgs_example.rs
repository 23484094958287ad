//! The optimisation example (`examples/lbfgs/`): L-BFGS from the `argmin`
//! crate, driven by irad's JIT-compiled gradient of the Rosenbrock function,
//! finds its minimum at (1, ..., 1) from the classic start and from another,
//! with at least one gradient call per iteration.

#[allow(dead_code)]
#[path = "../examples/lbfgs/main.rs"]
mod lbfgs;

fn assert_at_ones(m: &lbfgs::Minimum, what: &str) {
    assert!(m.cost < 1e-16, "{what}: cost {:e} ({m:?})", m.cost);
    for (i, x) in m.x.iter().enumerate() {
        assert!((x - 1.0).abs() < 1e-7, "{what}: x[{i}] = {x} ({m:?})");
    }
    assert!(m.iterations > 5, "{what}: {m:?}");
    assert!(m.gradient_calls >= m.iterations as usize, "{what}: {m:?}");
}

#[test]
fn lbfgs_finds_the_minimum_from_the_classic_start() {
    let x0: Vec<f64> = (0..10)
        .map(|i| if i % 2 == 0 { -1.2 } else { 1.0 })
        .collect();
    let m = lbfgs::minimise(x0).expect("minimises");
    assert_at_ones(&m, "(-1.2, 1, ...)");
}

#[test]
fn lbfgs_finds_the_minimum_from_another_start() {
    let x0: Vec<f64> = (0..6).map(|i| 0.3 * i as f64 - 0.8).collect();
    let m = lbfgs::minimise(x0).expect("minimises");
    assert_at_ones(&m, "a ramp");
}
