//! House-style checks over the source tree (STYLE.md): every Rust file of every
//! crate (and of the tests, benches, examples and fuzz targets) opens with a
//! `//!` comment saying what it does, assumes and guarantees.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() && name != "target" && !name.to_string_lossy().starts_with('.') {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_rust_file_opens_with_a_module_comment() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [
        "src", "tests", "benches", "examples", "ir", "rules", "passes", "codegen", "runtime",
        "kernels", "fuzzgen", "fuzz",
    ] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 20, "found only {} Rust files", files.len());
    let missing: Vec<String> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            !text.trim_start().starts_with("//!")
        })
        .map(|f| f.strip_prefix(root).unwrap_or(f).display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "files without a `//!` header: {missing:?}"
    );
}
