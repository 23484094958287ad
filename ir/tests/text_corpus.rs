//! Every IR file of the corpus (copied into `tests/data/`) parses, prints to a
//! fixed point after one print, and reads back structurally equal.

use irad_ir::eq::structural_eq;
use irad_ir::text::{parse_module, print_module};
use std::path::PathBuf;

fn data_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "ir"));
    files.sort();
    files
}

#[test]
fn corpus_round_trips() {
    let files = data_files();
    assert!(files.len() >= 4, "corpus files missing: {files:?}");
    for path in files {
        let src = std::fs::read_to_string(&path).unwrap_or_default();
        let m = parse_module(&src).unwrap_or_else(|e| {
            panic!(
                "{}: {}: {e}",
                path.display(),
                e.loc.pos.map_or(String::new(), |p| p.to_string())
            )
        });
        let printed = print_module(&m);
        let m2 = parse_module(&printed)
            .unwrap_or_else(|e| panic!("{}: reparse: {e}\n{printed}", path.display()));
        assert_eq!(structural_eq(&m, &m2), Ok(()), "{}", path.display());
        assert_eq!(print_module(&m2), printed, "{}", path.display());
    }
}

#[test]
fn corpus_inferred_types_match_annotations() {
    let src = include_str!("data/static_calls.ir");
    let m = parse_module(src).expect("parses");
    let printed = print_module(&m);
    assert!(
        printed.contains("  %h = invoke @hyp(%x, %y) :: f64\n"),
        "{printed}"
    );
    assert!(
        printed.contains("  %wh = call mul(%w, %h) :: f64\n"),
        "{printed}"
    );
}
