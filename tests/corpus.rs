//! The reference corpus (`tests/corpus`, copied from the shared corpus): every
//! program, in the surface language and (where it has one) in its IR twin,
//! runs through the `irad run --json` binary to the value the independent AD
//! system computed, within 1e-8 relative and 1e-10 absolute (the corpus
//! README's tolerance). Gradients are checked once the AD modes exist.

use serde_json::Value as J;
use std::path::Path;
use std::process::Command;

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

#[test]
fn corpus_programs_run_to_their_reference_values() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut checked = 0;
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/corpus exists")
        .flatten()
        .collect();
    entries.sort_by_key(|e| e.path());
    for entry in entries {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable corpus file");
        let reference: J = serde_json::from_str(&text).expect("corpus JSON parses");
        let func = reference["function"].as_str().expect("function named");
        let files = [reference["file"].as_str(), reference["ir_file"].as_str()];
        for (src_file, case) in files.into_iter().flatten().flat_map(|f| {
            reference["cases"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |c| (f, c))
        }) {
            let args = case["args"].as_str().expect("args text");
            let out = Command::new(env!("CARGO_BIN_EXE_irad"))
                .args([
                    "run",
                    dir.join(src_file).to_str().expect("utf-8 path"),
                    "-f",
                    func,
                    "--args",
                    args,
                    "--json",
                ])
                .output()
                .expect("irad runs");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success(),
                "{src_file} @{func}({args}) failed:\n{stderr}"
            );
            let got: J = serde_json::from_slice(&out.stdout).expect("--json prints JSON");
            assert!(
                close(&got["value"], &case["value"]),
                "{src_file} @{func}({args}): got {}, reference {}",
                got["value"],
                case["value"]
            );
            checked += 1;
        }
    }
    // Eleven surface programs and four IR twins, with two or three cases each.
    assert!(checked >= 30, "only {checked} corpus cases found");
}
