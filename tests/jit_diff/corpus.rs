//! Every corpus program (surface and IR twin) and case, in every mode: the
//! primal through `irad::run_with`, reverse mode through `irad::grad_reverse`
//! and forward mode at widths 1, 3 and 8 and sparse (`Lanes::Sparse`) through
//! `irad::grad_forward`, with
//! the interpreter and with the JIT: results bit for bit, arguments
//! untouched by the gradients.

use super::*;

#[test]
fn corpus_primal_and_gradients_agree_in_every_mode() {
    let dir = manifest_dir().join("tests/corpus");
    let mut jsons: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/corpus exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("json"))
        .collect();
    jsons.sort();
    let mut cases = 0;
    for json in jsons {
        let text = std::fs::read_to_string(&json).expect("readable corpus file");
        let reference: J = serde_json::from_str(&text).expect("corpus JSON parses");
        let name = reference["function"].as_str().expect("function named");
        for file in [reference["file"].as_str(), reference["ir_file"].as_str()]
            .into_iter()
            .flatten()
        {
            let src = irad::read_source(&dir.join(file)).expect("readable corpus program");
            let m = irad::load(&src).unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
            let f = irad::find_function(&src, &m, name).expect("corpus function exists");
            for case in reference["cases"].as_array().into_iter().flatten() {
                let text = case["args"].as_str().expect("args text");
                let args = irad::parse_args(
                    &Source {
                        name: "<args>".into(),
                        text: text.into(),
                    },
                    &m,
                    f,
                )
                .expect("corpus args parse");
                let what = format!("{file} @{name}({text})");
                let primal = check_run(&what, &m, f, &args, &RunOptions::default());
                assert!(primal.is_ok(), "{what}: the corpus case fails");
                for mode in [
                    Mode::Reverse,
                    fwd(1),
                    fwd(3),
                    fwd(8),
                    Mode::Forward(irad::ir::Lanes::Sparse),
                ] {
                    assert!(
                        check_grad(&what, mode, &src, &m, f, &args),
                        "{what}: {mode:?} fails"
                    );
                }
                cases += 1;
            }
        }
    }
    // Eleven surface programs and four IR twins, two or three cases each.
    assert!(cases >= 30, "only {cases} corpus cases");
}
