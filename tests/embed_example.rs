//! The embedding example (`examples/embed/`): the `calc` toy compiler lowers
//! its program through the builder API, irad's JIT-compiled reverse-mode
//! gradient of each function equals forward mode's and central finite
//! differences, and malformed `calc` programs are located errors.

#[allow(dead_code)]
#[path = "../examples/embed/main.rs"]
mod embed;

use embed::calc;

#[test]
fn the_example_program_differentiates() {
    let module = calc::compile(embed::PROGRAM).expect("the example compiles");
    let points: [(&str, Vec<f64>); 5] = [
        ("f", vec![0.5, 1.5]),
        ("f", vec![-2.0, 0.25]),
        ("g", vec![0.5, 1.5]),
        ("g", vec![2.0, -1.0]),
        ("h", vec![0.7]),
    ];
    for (name, point) in points {
        let (value, rev, fwd) = embed::gradients(&module, name, &point).expect("differentiates");
        assert_eq!(rev, fwd, "{name}{point:?}: reverse and forward differ");
        let f = |p: &[f64]| embed::gradients(&module, name, p).expect("runs").0;
        assert_eq!(f(&point), value);
        for i in 0..point.len() {
            let h = 1e-6;
            let (mut up, mut down) = (point.clone(), point.clone());
            up[i] += h;
            down[i] -= h;
            let fd = (f(&up) - f(&down)) / (2.0 * h);
            assert!(
                (fd - rev[i]).abs() <= 1e-6 * (1.0 + fd.abs()),
                "{name}{point:?} d/dx{i}: {} vs finite differences {fd}",
                rev[i]
            );
        }
    }
    // h(x) = sum_k (k x^2 + f(x, k)): check one value by hand.
    let x: f64 = 0.7;
    let want: f64 = (0..5)
        .map(|k| {
            let k = f64::from(k);
            k * x * x + x * k + x.sin() / (1.0 + k * k)
        })
        .sum();
    let (got, _, _) = embed::gradients(&module, "h", &[x]).expect("runs");
    assert!((got - want).abs() <= 1e-12 * want.abs(), "{got} vs {want}");
}

#[test]
fn malformed_programs_are_located_errors() {
    for (src, want) in [
        (
            "def f(x) = x +",
            "2:1: expected an expression, found the end of the program",
        ),
        ("def f(x) = y", "def f: unknown variable `y`"),
        ("def f(x) = g(x)", "def f: 1:12: unknown function `g`"),
        ("def f(x) = x $ 2", "1:14: unexpected character `$`"),
        ("def f(x) = if x then 1 else 2", "1:17: expected `<` or `>`"),
        (
            "def f(x) = sin(x, x)",
            "def f: 1:12: `sin` takes one argument",
        ),
    ] {
        let err = calc::compile(src).err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some(want), "{src}");
    }
    let deep = format!("def f(x) = {}x{}", "(".repeat(100_000), ")".repeat(100_000));
    let err = calc::compile(&deep).err().map(|e| e.to_string());
    assert_eq!(err.as_deref(), Some("1:212: expression nested too deeply"));
}
