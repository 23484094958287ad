//! Forward mode's choice of lanes (docs/forward.md, "Choosing dense or
//! sparse"; docs/cli.md): `irad grad --mode fwd` and `irad bench --mode fwd`
//! without `--batch` or `--sparse` use sparse mode from
//! `irad::SPARSE_MIN_DIRECTIONS` differentiated f64s on (counted over
//! `--wrt`'s arguments) and dense batches of 8 below; `--batch N` and
//! `--sparse` force the choice; the choice shows as `"forward"` under
//! `--json` and as a `forward:` line in `bench`'s text; reverse mode has
//! neither. Whatever the lanes, the gradient is the same to rounding.

use serde_json::Value;
use std::process::Command;

/// Runs irad at the repository's root: exit status and stdout (stderr is
/// part of the failure message).
fn irad(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("irad runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "irad {args:?}: {stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(args: &[&str]) -> Value {
    let text = irad(args);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// `n` arguments of Rosenbrock's function.
fn array(n: usize) -> String {
    let xs: Vec<String> = (0..n)
        .map(|i| format!("{}", ((i * 5) % 13) as f64 / 8.0 - 0.7))
        .collect();
    format!("[{}]", xs.join(", "))
}

fn grad(args: &str, extra: &[&str]) -> Value {
    let mut all = vec![
        "grad",
        "examples/rosenbrock.irad",
        "-f",
        "rosenbrock",
        "--args",
        args,
        "--json",
    ];
    all.extend_from_slice(extra);
    json(&all)
}

/// The gradient's numbers.
fn numbers(v: &Value) -> Vec<f64> {
    v["gradient"][0]
        .as_array()
        .map(|xs| xs.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default()
}

fn forward(mode: &str, batch: Option<u64>, directions: usize, auto: bool) -> Value {
    serde_json::json!({"mode": mode, "batch": batch, "directions": directions, "auto": auto})
}

#[test]
fn grad_picks_sparse_mode_for_many_inputs_and_dense_for_few() {
    let at = irad::SPARSE_MIN_DIRECTIONS;
    let few = array(at - 1);
    let g = grad(&few, &["--mode", "fwd"]);
    assert_eq!(g["forward"], forward("dense", Some(8), at - 1, true));
    let many = array(at);
    let g = grad(&many, &["--mode", "fwd"]);
    assert_eq!(g["forward"], forward("sparse", None, at, true));
    // The same gradient as dense mode forced and as reverse mode.
    let dense = grad(&many, &["--mode", "fwd", "--batch", "8"]);
    assert_eq!(dense["forward"], forward("dense", Some(8), at, false));
    let rev = grad(&many, &[]);
    assert!(rev.get("forward").is_none(), "{rev}");
    let (s, d, r) = (numbers(&g), numbers(&dense), numbers(&rev));
    assert_eq!(s.len(), at);
    for ((s, d), r) in s.iter().zip(&d).zip(&r) {
        assert!(
            (s - d).abs() <= 1e-12 * d.abs().max(1.0),
            "sparse {s}, dense {d}"
        );
        assert!(
            (s - r).abs() <= 1e-9 * r.abs().max(1.0),
            "sparse {s}, reverse {r}"
        );
    }
    assert_eq!(g["value"], dense["value"]);
}

#[test]
fn batch_and_sparse_force_the_choice() {
    let many = array(100);
    let g = grad(&many, &["--mode", "fwd", "--batch", "4"]);
    assert_eq!(g["forward"], forward("dense", Some(4), 100, false));
    let g = grad("[1.5, 0.5, -0.3]", &["--mode", "fwd", "--sparse"]);
    assert_eq!(g["forward"], forward("sparse", None, 3, false));
    // No more lanes than inputs.
    let g = grad("[1.5, 0.5, -0.3]", &["--mode", "fwd"]);
    assert_eq!(g["forward"], forward("dense", Some(3), 3, true));
}

#[test]
fn the_count_is_of_the_differentiated_arguments() {
    // bulk.irad's `pick(xs: [f64], s: f64)`: many array elements, but with
    // `--wrt 1` one f64 is differentiated.
    let xs = array(64);
    let args = format!("{xs}, 1.5");
    let base = [
        "grad",
        "tests/filetests/surface/bulk.irad",
        "-f",
        "pick",
        "--args",
        &args,
    ];
    let mut all: Vec<&str> = base.to_vec();
    all.extend(["--mode", "fwd", "--json", "--wrt", "1"]);
    let g = json(&all);
    assert_eq!(g["forward"], forward("dense", Some(1), 1, true));
    let mut all: Vec<&str> = base.to_vec();
    all.extend(["--mode", "fwd", "--json"]);
    let g = json(&all);
    assert_eq!(g["forward"], forward("sparse", None, 65, true));
}

#[test]
fn bench_shows_the_choice() {
    let many = array(40);
    let base = [
        "bench",
        "examples/rosenbrock.irad",
        "-f",
        "rosenbrock",
        "--args",
        &many,
        "--min-time",
        "0.01",
    ];
    let mut all: Vec<&str> = base.to_vec();
    all.extend(["--mode", "fwd", "--json"]);
    let b = json(&all);
    assert_eq!(b["forward"], forward("sparse", None, 40, true));
    let mut all: Vec<&str> = base.to_vec();
    all.extend(["--mode", "fwd"]);
    let text = irad(&all);
    let want = format!(
        "forward:  sparse (chosen: 40 f64 inputs, sparse from {})\n",
        irad::SPARSE_MIN_DIRECTIONS
    );
    assert!(text.starts_with(&want), "{text}");
    let mut all: Vec<&str> = base.to_vec();
    all.extend(["--mode", "fwd", "--batch", "2"]);
    assert!(irad(&all).starts_with("forward:  dense, batch 2 (--batch)\n"));
    let mut all: Vec<&str> = base.to_vec();
    all.push("--json");
    assert!(json(&all).get("forward").is_none());
}
