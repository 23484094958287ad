//! The fuzz targets' checks (`irad_fuzzgen::check`) on fixed seeds, so that
//! `cargo test` exercises the generator and every property without
//! cargo-fuzz: generated programs load, run to a value or a clean error, give
//! the same results in the interpreter and the JIT, and their derivatives
//! agree between modes and with finite differences; the parsers and the
//! verifier take seeded garbage and mutated test files without panicking;
//! and the committed fuzz corpora (`fuzz/corpus/*`) replay cleanly.

use arbitrary::Unstructured;
use irad_fuzzgen::check;
use irad_fuzzgen::generate::{Config, Program, program};
use irad_fuzzgen::seeded;
use std::path::PathBuf;

/// How many seeds each property runs (`IRAD_FUZZ_SEEDS` overrides).
fn seeds(default: u64) -> u64 {
    std::env::var("IRAD_FUZZ_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn generated(seed: u64, cfg: &Config) -> Program {
    let bytes = seeded(seed, 4096);
    let mut u = Unstructured::new(&bytes);
    program(&mut u, cfg).expect("the generator always makes a program")
}

#[test]
fn generated_programs_load_and_run_to_a_value_or_a_clean_error() {
    let mut values = 0;
    let n = seeds(300);
    for seed in 0..n {
        let p = generated(seed, &Config::default());
        match check::interpreter(&p) {
            Ok(Some(_)) => values += 1,
            Ok(None) => {}
            Err(e) => panic!("seed {seed}: {e}"),
        }
    }
    // The generator keeps operands in their domains: nearly all run.
    assert!(
        values * 10 >= n * 9,
        "only {values} of {n} programs ran to a value"
    );
}

#[test]
fn generated_programs_agree_between_interpreter_and_jit() {
    for seed in 0..seeds(50) {
        let p = generated(1000 + seed, &Config::default());
        if let Err(e) = check::interp_vs_jit(&p) {
            panic!("seed {}: {e}", 1000 + seed);
        }
    }
}

#[test]
fn generated_gradients_are_the_same_under_tape_limits() {
    for seed in 0..seeds(30) {
        let cfg = Config {
            max_loop_depth: 3,
            carried_arrays: true,
            ..Config::default()
        };
        let p = generated(4000 + seed, &cfg);
        if let Err(e) = check::checkpoint(&p) {
            panic!("seed {}: {e}", 4000 + seed);
        }
    }
}

#[test]
fn generated_derivatives_agree_between_modes_and_with_finite_differences() {
    // As the runner's `derivatives` target: with loops carrying arrays.
    let cfg = Config {
        smooth: true,
        carried_arrays: true,
        ..Config::default()
    };
    let n = seeds(60);
    let (mut modes, mut fd) = (0, 0);
    for seed in 0..n {
        let p = generated(2000 + seed, &cfg);
        match check::derivatives(&p) {
            Ok(c) => {
                modes += c.modes;
                fd += c.finite_differences;
            }
            Err(e) => panic!("seed {}: {e}", 2000 + seed),
        }
    }
    // Most programs are smooth at their point: the checks compare a lot.
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    assert!(
        modes >= 2 * n,
        "only {modes} mode comparisons for {n} programs"
    );
    assert!(
        fd >= n,
        "only {fd} finite-difference comparisons for {n} programs"
    );
}

#[test]
fn generated_hessian_vector_products_agree_between_backends_and_with_differences() {
    let cfg = Config {
        smooth: true,
        ..Config::default()
    };
    let n = seeds(30);
    let (mut ran, mut fd, mut modes) = (0, 0, 0);
    for seed in 0..n {
        let p = generated(3000 + seed, &cfg);
        match check::second_order(&p) {
            Ok(c) => {
                ran += usize::from(c.ran);
                fd += c.finite_differences;
                modes += c.modes;
            }
            Err(e) => panic!("seed {}: {e}", 3000 + seed),
        }
    }
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    eprintln!(
        "second order: the hvp ran on {ran} of {n} programs, {fd} entries compared with differences, {modes} with reverse over forward and forward over forward"
    );
    assert!(
        modes >= 2 * n,
        "only {modes} reverse-over-forward and forward-over-forward comparisons for {n} programs"
    );
    // Most programs run at their point and are smooth along the direction.
    assert!(
        ran * 10 >= n * 8,
        "the hvp ran on only {ran} of {n} programs"
    );
    assert!(
        fd >= n,
        "only {fd} finite-difference comparisons for {n} programs"
    );
}

/// Over a few thousand seeds the generator writes every feature it knows
/// (`generate::FEATURES`) and every primitive a user can write, and every
/// program loads: a change that drops one shows here (the runner's
/// `--coverage` table, fuzz/README.md "Coverage", has the frequencies).
#[test]
fn generator_covers_every_feature_and_primitive() {
    let mut cov = irad_fuzzgen::coverage::Coverage::default();
    // Every third program as the `checkpoint` target's (loops carrying
    // arrays, three deep).
    let checkpoint = Config {
        max_loop_depth: 3,
        carried_arrays: true,
        ..Config::default()
    };
    let plain = Config::default();
    for seed in 0..seeds(1500) {
        let cfg = match seed % 3 {
            2 => &checkpoint,
            _ => &plain,
        };
        cov.add(&generated(50_000 + seed, cfg));
    }
    assert_eq!(cov.not_loaded, 0);
    let table = cov.table();
    let never: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("| `") && l.contains("` | 0 |"))
        .collect();
    assert!(never.is_empty(), "never generated:\n{}", never.join("\n"));
}

/// The test files of the repository, as seeds for mutation.
fn test_files(ext: &str) -> Vec<Vec<u8>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = Vec::new();
    let mut dirs = vec![root.join("tests/filetests"), root.join("tests/corpus")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().and_then(|e| e.to_str()) == Some(ext)
                && let Ok(bytes) = std::fs::read(&p)
            {
                out.push(bytes);
            }
        }
    }
    out.sort();
    out
}

/// `bytes` with a few seeded edits: byte flips, deletions, duplications.
fn mutate(bytes: &[u8], seed: u64) -> Vec<u8> {
    let r = seeded(seed, 64);
    let mut out = bytes.to_vec();
    for k in 0..4 {
        if out.is_empty() {
            break;
        }
        let at = usize::from(r[2 * k]) * out.len() / 256;
        match r[2 * k + 1] % 4 {
            0 => out[at] = r[40 + k],
            1 => {
                out.remove(at);
            }
            2 => {
                let end = (at + usize::from(r[48 + k] % 32)).min(out.len());
                let piece = out[at..end].to_vec();
                out.splice(at..at, piece);
            }
            _ => out.insert(at, b"(){}[],;:%#@-"[usize::from(r[56 + k]) % 13]),
        }
    }
    out
}

#[test]
fn parsers_and_verifier_take_mutated_test_files() {
    let n = seeds(8);
    for (i, file) in test_files("ir").iter().enumerate() {
        for s in 0..n {
            let input = mutate(file, (i as u64) * 1000 + s);
            check::ir_text(&input).unwrap_or_else(|e| panic!("ir file {i} seed {s}: {e}"));
            check::verifier(&input).unwrap_or_else(|e| panic!("ir file {i} seed {s}: {e}"));
        }
    }
    for (i, file) in test_files("irad").iter().enumerate() {
        for s in 0..n {
            let input = mutate(file, (i as u64) * 1000 + s);
            check::surface_text(&input).unwrap_or_else(|e| panic!("irad file {i} seed {s}: {e}"));
        }
    }
}

#[test]
fn generated_programs_survive_mutation() {
    for seed in 0..seeds(100) {
        let p = generated(3000 + seed, &Config::default());
        let input = mutate(p.source.as_bytes(), seed);
        check::surface_text(&input).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

#[test]
fn committed_fuzz_corpora_replay() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    type Check = fn(&[u8]) -> Result<(), String>;
    let targets: [(&str, Check); 6] = [
        ("ir_parse", check::ir_text),
        ("surface_parse", check::surface_text),
        ("verify", check::verifier),
        ("interp", |b| {
            let mut u = Unstructured::new(b);
            let p = program(&mut u, &Config::default()).map_err(|e| e.to_string())?;
            check::interpreter(&p).map(|_| ())
        }),
        ("interp_vs_jit", |b| {
            let mut u = Unstructured::new(b);
            let p = program(&mut u, &Config::default()).map_err(|e| e.to_string())?;
            check::interp_vs_jit(&p)
        }),
        ("derivatives", |b| {
            let mut u = Unstructured::new(b);
            let cfg = Config {
                smooth: true,
                ..Config::default()
            };
            let p = program(&mut u, &cfg).map_err(|e| e.to_string())?;
            check::derivatives(&p).map(|_| ())
        }),
    ];
    for (name, check) in targets {
        let entries = std::fs::read_dir(root.join(name))
            .unwrap_or_else(|e| panic!("fuzz/corpus/{name}: {e}"));
        let mut replayed = 0;
        for e in entries.flatten() {
            let bytes = std::fs::read(e.path()).expect("readable corpus file");
            check(&bytes).unwrap_or_else(|err| panic!("{name}/{:?}: {err}", e.file_name()));
            replayed += 1;
        }
        // Every target has a committed, minimised corpus (fuzz/README.md).
        assert!(replayed >= 20, "fuzz/corpus/{name}: only {replayed} inputs");
    }
}

#[test]
fn fuzz_findings_stay_fixed() {
    // Inputs that once failed a fuzz target, named TARGET-what: a generated
    // program written out (`.irad`, its arguments on a last `// args:`
    // line), which stays the same program whatever the generator becomes,
    // or the raw input of a target that reads bytes.
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/regressions");
    let mut n = 0;
    for e in std::fs::read_dir(&dir)
        .expect("the regressions directory exists")
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        let bytes = std::fs::read(e.path()).expect("readable regression input");
        let target = name.split('-').next().unwrap_or("");
        let result = if name.ends_with(".irad") {
            let text = String::from_utf8_lossy(&bytes);
            let p = Program::from_text(&text).expect("a `// args:` line");
            match target {
                "interp_vs_jit" => check::interp_vs_jit(&p),
                "derivatives" => check::derivatives(&p).map(|_| ()),
                "checkpoint" => check::checkpoint(&p),
                "second_order" => check::second_order(&p).map(|_| ()),
                "interp" => check::interpreter(&p).map(|_| ()),
                _ => panic!("{name}: unknown target"),
            }
        } else {
            match target {
                "ir_parse" => check::ir_text(&bytes),
                "surface_parse" => check::surface_text(&bytes),
                "verify" => check::verifier(&bytes),
                _ => panic!("{name}: a generator target's finding is kept as a program (.irad)"),
            }
        };
        result.unwrap_or_else(|err| panic!("{name}: {err}"));
        n += 1;
    }
    assert!(n >= 12, "only {n} regression inputs in {}", dir.display());
}
