//! The `emit` target's machinery (`irad_fuzzgen::emit`) on programs written
//! for it: values, gradients and run-time errors of objects called through
//! the C ABI agree with the JIT for every kind of parameter the generator
//! passes (f64, i64, bool, tuples, arrays, more parameters than registers),
//! at overflow (where both give the strong derivative), and a failing run
//! reaches the error comparison (status code and text).
//! Needs a C compiler (`cc`), as `tests/emit.rs` does.

#![cfg(unix)]

use irad_fuzzgen::emit::{Outcome, Runtime, check_batch, static_runtime};
use irad_fuzzgen::generate::Program;

fn program(source: &str, args: &str) -> Program {
    Program {
        source: source.into(),
        func: "main".into(),
        args: args.into(),
        features: Vec::new(),
    }
}

#[test]
fn objects_agree_with_the_jit_on_values_gradients_and_errors() {
    let work = std::env::temp_dir().join(format!("irad-emit-target-{}", std::process::id()));
    let lib = static_runtime().unwrap_or_else(|e| panic!("{e}"));
    let rt = Runtime::load(&lib, &work.join("runtime")).unwrap_or_else(|e| panic!("{e}"));
    let many: Vec<String> = (0..12).map(|k| format!("x{k}: f64")).collect();
    let sum: Vec<String> = (0..12).map(|k| format!("x{k} * f64({k} + n)")).collect();
    let cases = [
        // An index out of bounds in the value and in the gradient.
        (
            program(
                "fn main(x0: f64, a: [f64], n: i64) -> f64 {\n    a[n] * x0\n}\n",
                "1.5, [1.0, 2.0], 5",
            ),
            Outcome::default(),
        ),
        // Division by zero.
        (
            program(
                "fn main(x0: f64, n: i64) -> f64 {\n    f64(10 / n) * x0\n}\n",
                "1.5, 0",
            ),
            Outcome::default(),
        ),
        // A tuple and an array written in place.
        (
            program(
                "fn main(t: (f64, i64, f64), a: [f64]) -> f64 {\n    a[0] = t.0 * t.2;\n    t.0 * f64(t.1) + a[0] * a[1]\n}\n",
                "(1.5, 2, -0.5), [1.0, 2.0]",
            ),
            Outcome {
                value_ran: true,
                grad_ran: true,
            },
        ),
        // A bool.
        (
            program(
                "fn main(x: f64, b: bool) -> f64 {\n    if b { x * sin(x) } else { x }\n}\n",
                "2.0, true",
            ),
            Outcome {
                value_ran: true,
                grad_ran: true,
            },
        ),
        // Overflow (issue 27, finding 10): the plain gradient is NaN (0 *
        // inf in d/dy and d/da[0]); the JIT's and the object's are both the
        // strong one, bit for bit.
        (
            program(
                "fn main(x: f64, y: f64, a: [f64]) -> f64 {\n    x * exp(y) + a[0] * exp(y)\n}\n",
                "0.0, 1000.0, [0.0, 2.0]",
            ),
            Outcome {
                value_ran: true,
                grad_ran: true,
            },
        ),
        // More parameters than the registers carry.
        (
            program(
                &format!(
                    "fn main({}, a: [f64], n: i64) -> f64 {{\n    {} + sum(a)\n}}\n",
                    many.join(", "),
                    sum.join(" + ")
                ),
                &format!(
                    "{}, [0.5, -1.5, 2.5], 3",
                    (0..12)
                        .map(|k| format!("{k}.25"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            Outcome {
                value_ran: true,
                grad_ran: true,
            },
        ),
    ];
    let programs: Vec<(u64, Program)> = cases
        .iter()
        .enumerate()
        .map(|(i, (p, _))| (i as u64, p.clone()))
        .collect();
    let results = check_batch(&rt, &work.join("batch"), &programs);
    assert_eq!(results.len(), cases.len());
    for ((p, want), got) in cases.iter().zip(&results) {
        match got {
            Ok(o) => assert_eq!(o, want, "{}", p.source),
            Err(e) => panic!("{e}"),
        }
    }
    // The batch's files are gone.
    assert!(!work.join("batch").exists());
    let _ = std::fs::remove_dir_all(&work);
}
