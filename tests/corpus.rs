//! The reference corpus (`tests/corpus`, copied from the shared corpus): every
//! program, in the surface language and (where it has one) in its IR twin,
//! runs through the `irad run --json` binary to the value the independent AD
//! system computed, within 1e-8 relative and 1e-10 absolute (the corpus
//! README's tolerance), and `irad grad --mode fwd --json` to the reference
//! value and gradient under the same rule as `check-corpus`:
//! `|got - ref| <= 1e-10 + 1e-8 |ref|` per f64, `null` exactly where the
//! reference has `null` (arguments and tuple components without a tangent),
//! arrays of the same length; and `irad grad --json` (reverse mode, the
//! default) to the same references under the same rule.

use serde_json::Value as J;
use std::path::Path;
use std::process::Command;

/// The rule of `check-corpus`: f64s within 1e-10 + 1e-8 |ref| (NaN only
/// for NaN, equal infinities), `null` only for `null`, arrays element-wise.
fn close(got: &J, want: &J) -> bool {
    match (got, want) {
        (J::Array(g), J::Array(w)) => {
            g.len() == w.len() && g.iter().zip(w).all(|(a, b)| close(a, b))
        }
        (J::Null, J::Null) => true,
        _ => match (as_f64(got), as_f64(want)) {
            (Some(g), Some(w)) if w.is_nan() => g.is_nan(),
            (Some(g), Some(w)) => g == w || (g - w).abs() <= 1e-10 + 1e-8 * w.abs(),
            _ => false,
        },
    }
}

fn as_f64(v: &J) -> Option<f64> {
    match v {
        J::Number(n) => n.as_f64(),
        J::String(s) => match s.as_str() {
            "inf" => Some(f64::INFINITY),
            "-inf" => Some(f64::NEG_INFINITY),
            "nan" => Some(f64::NAN),
            _ => None,
        },
        _ => None,
    }
}

/// One case of the corpus: the program file, its function, the `--args`
/// text and the reference JSON of the case.
struct Case {
    file: String,
    func: String,
    args: String,
    reference: J,
}

/// Every case of `tests/corpus/*.json`, for the surface file and (where there
/// is one) its IR twin.
fn cases() -> Vec<Case> {
    let mut entries: Vec<_> = std::fs::read_dir(corpus_dir())
        .expect("tests/corpus exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("json"))
        .collect();
    entries.sort();
    let mut out = Vec::new();
    for path in entries {
        let text = std::fs::read_to_string(&path).expect("readable corpus file");
        let reference: J = serde_json::from_str(&text).expect("corpus JSON parses");
        let func = reference["function"].as_str().expect("function named");
        let files = [reference["file"].as_str(), reference["ir_file"].as_str()];
        for file in files.into_iter().flatten() {
            for case in reference["cases"].as_array().into_iter().flatten() {
                out.push(Case {
                    file: file.to_string(),
                    func: func.to_string(),
                    args: case["args"].as_str().expect("args text").to_string(),
                    reference: case.clone(),
                });
            }
        }
    }
    // Eleven surface programs and four IR twins, with two or three cases each.
    assert!(out.len() >= 30, "only {} corpus cases found", out.len());
    out
}

fn corpus_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// Runs `irad COMMAND FILE -f F --args ARGS --json EXTRA...` on a case and
/// returns the JSON it prints, failing the test on a non-zero exit.
fn irad_json(command: &str, case: &Case, extra: &[&str]) -> J {
    let path = corpus_dir().join(&case.file);
    let out = Command::new(env!("CARGO_BIN_EXE_irad"))
        .args([
            command,
            path.to_str().expect("utf-8 path"),
            "-f",
            &case.func,
            "--args",
            &case.args,
            "--json",
        ])
        .args(extra)
        .output()
        .expect("irad runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "irad {command} {} @{}({}) {extra:?} failed:\n{stderr}",
        case.file,
        case.func,
        case.args
    );
    serde_json::from_slice(&out.stdout).expect("--json prints JSON")
}

#[test]
fn corpus_programs_run_to_their_reference_values() {
    for case in cases() {
        let got = irad_json("run", &case, &[]);
        assert!(
            close(&got["value"], &case.reference["value"]),
            "{} @{}({}): got {}, reference {}",
            case.file,
            case.func,
            case.args,
            got["value"],
            case.reference["value"]
        );
    }
}

#[test]
fn corpus_gradients_in_forward_mode_match_their_references() {
    for case in cases() {
        let got = irad_json("grad", &case, &["--mode", "fwd"]);
        for key in ["value", "gradient"] {
            assert!(
                close(&got[key], &case.reference[key]),
                "{} @{}({}) --mode fwd: {key} {}, reference {}",
                case.file,
                case.func,
                case.args,
                got[key],
                case.reference[key]
            );
        }
    }
}

#[test]
fn corpus_gradients_in_reverse_mode_match_their_references() {
    for case in cases() {
        let got = irad_json("grad", &case, &[]);
        for key in ["value", "gradient"] {
            assert!(
                close(&got[key], &case.reference[key]),
                "{} @{}({}) reverse mode: {key} {}, reference {}",
                case.file,
                case.func,
                case.args,
                got[key],
                case.reference[key]
            );
        }
    }
}
