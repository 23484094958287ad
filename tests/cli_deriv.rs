//! Directional and seeded derivatives (`irad jvp`, `irad grad --seed`,
//! `irad jacobian`, and `irad::jvp` / `irad::vjp` / `irad::jacobian`):
//! JVPs against central finite differences and against the Jacobian times the
//! tangent; forward and reverse Jacobians against each other; seeded
//! gradients against seed-weighted sums of per-output gradients (from
//! `irad::grad` on functions that pick one output); the interpreter and the
//! JIT bit for bit; on every corpus program with an f64 result, `jvp` along t
//! against `dot(grad, t)`; the JSON shapes and every error message.
//!
//! Tolerances: "to rounding" is |a - b| <= 1e-12 * max(1, |a|, |b|) (forward
//! and reverse accumulate the same products in different orders); central
//! differences (step 1e-6 relative) are compared within 1e-6 * max(1, |a|).

use irad::{Backend, GradOptions, GradRequest, Mode, Source, Val};
use std::process::{Command, Output};

#[path = "common/values.rs"]
mod values;
use values::{flat, map_f64};

/// Functions with results of several shapes (tuples, arrays, i64 entries)
/// and arguments of several shapes, each with its arguments and a tangent.
const PROGRAM: &str = "
fn vec2(x: f64, y: f64) -> (f64, f64) { (x * y, sin(x) + y * y) }
fn vec2_0(x: f64, y: f64) -> f64 { vec2(x, y).0 }
fn vec2_1(x: f64, y: f64) -> f64 { vec2(x, y).1 }
fn mixed(x: f64, y: [f64], n: i64) -> (f64, [f64], i64) {
    let z: [f64] = alloc(2);
    z[0] = x * y[0] * y[1];
    z[1] = exp(y[n]) / (1.0 + x * x);
    (x * x + y[0], z, n)
}
fn mixed_0(x: f64, y: [f64], n: i64) -> f64 { mixed(x, y, n).0 }
fn mixed_1_0(x: f64, y: [f64], n: i64) -> f64 { mixed(x, y, n).1[0] }
fn mixed_1_1(x: f64, y: [f64], n: i64) -> f64 { mixed(x, y, n).1[1] }
fn pair(p: (f64, i64), s: f64) -> [f64] {
    let r: [f64] = alloc(3);
    for i in 0..3 {
        r[i] = p.0 * s + cos(s * f64(i));
    }
    r
}
fn scalar(x: [f64], a: f64) -> f64 {
    let mut s = 0.0;
    for i in 0..len(x) { s = s + a * x[i] * x[i] * x[i]; }
    s
}
fn ints(n: i64) -> i64 { n * 2 }
";

/// (function, arguments, tangent) of the checks.
const CASES: [(&str, &str, &str); 4] = [
    ("vec2", "0.7, -1.3", "0.3, 2.0"),
    (
        "mixed",
        "0.5, [1.5, -0.25, 2.0], 2",
        "-1.0, [0.5, 0.25, 3.0], 0",
    ),
    ("pair", "(1.25, 4), 0.6", "(0.5, 0), -2.0"),
    ("scalar", "[1.0, -2.0, 0.5], 1.5", "[0.1, 0.2, -0.3], 1.0"),
];

fn src() -> Source {
    Source::new("deriv.irad", PROGRAM)
}

struct Loaded {
    src: Source,
    m: irad::ir::Module,
}

fn load() -> Loaded {
    let src = src();
    let m = irad::load(&src).expect("the program loads");
    Loaded { src, m }
}

impl Loaded {
    fn func(&self, name: &str) -> irad::ir::FuncId {
        irad::find_function(&self.src, &self.m, name).expect("function exists")
    }
    fn args(&self, f: irad::ir::FuncId, text: &str) -> Vec<Val> {
        irad::parse_args(&Source::new("<args>", text), &self.m, f).expect("args parse")
    }
    fn tangent(&self, f: irad::ir::FuncId, args: &[Val], text: &str) -> Vec<Val> {
        irad::parse_tangent(&Source::new("<tangent>", text), &self.m, f, args)
            .expect("tangent parses")
    }
}

fn req<'a>(f: irad::ir::FuncId, args: &'a [Val], backend: Backend) -> GradRequest<'a> {
    GradRequest {
        opts: GradOptions {
            exec: backend.exec(),
            ..GradOptions::default()
        },
        ..GradRequest::new(f, args)
    }
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * 1f64.max(a.abs()).max(b.abs())
}

fn assert_close(a: &[f64], b: &[f64], tol: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: {a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!(close(*x, *y, tol), "{what}: {a:?} vs {b:?}");
    }
}

/// Bit-for-bit equality of two lists of f64 (NaN equal to NaN).
fn same_bits(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

#[test]
fn jvp_matches_central_differences_and_the_jacobian_times_the_tangent() {
    let l = load();
    let registry = irad::rules::Registry::new();
    for (name, args, tangent) in CASES {
        let f = l.func(name);
        let args = l.args(f, args);
        let t = l.tangent(f, &args, tangent);
        let (d, _) =
            irad::jvp(&l.src, &l.m, &registry, &req(f, &args, Backend::Jit), &t).expect("jvp runs");
        let jvp = flat(&d.jvp);
        // Central differences: f(x + h t) - f(x - h t) over 2h.
        let h = 1e-6;
        let tl: Vec<f64> = t.iter().flat_map(flat).collect();
        let shifted = |sign: f64| {
            let mut k = 0;
            let moved: Vec<Val> = args
                .iter()
                .zip(&l.m[f].param_types())
                .map(|(a, ty)| {
                    if ty.has_tangent() {
                        map_f64(a, &mut k, &|x, i| x + sign * h * tl[i])
                    } else {
                        a.clone()
                    }
                })
                .collect();
            let v = irad::run(&l.src, &l.m, &irad::RunRequest::new(f, &moved)).expect("runs");
            flat(&v)
        };
        let (up, down) = (shifted(1.0), shifted(-1.0));
        let fd: Vec<f64> = up
            .iter()
            .zip(&down)
            .map(|(u, d)| (u - d) / (2.0 * h))
            .collect();
        assert_close(
            &jvp,
            &fd,
            1e-6,
            &format!("@{name}: jvp vs central differences"),
        );
        // J t, with J from both modes.
        for mode in [Mode::Forward, Mode::Reverse] {
            let r = GradRequest {
                mode,
                ..req(f, &args, Backend::Jit)
            };
            let (j, _) = irad::jacobian(&l.src, &l.m, &registry, &r).expect("jacobian runs");
            let jt: Vec<f64> = j
                .rows
                .iter()
                .map(|row| row.iter().zip(&tl).map(|(a, b)| a * b).sum())
                .collect();
            assert_close(&jvp, &jt, 1e-12, &format!("@{name}: jvp vs J t ({mode:?})"));
            assert!(d.value.same(&j.value), "@{name}: values differ");
        }
    }
}

#[test]
fn forward_and_reverse_jacobians_agree_to_rounding_at_every_batch_width() {
    let l = load();
    let registry = irad::rules::Registry::new();
    for (name, args, _) in CASES {
        let f = l.func(name);
        let args = l.args(f, args);
        let rev = GradRequest {
            mode: Mode::Reverse,
            ..req(f, &args, Backend::Jit)
        };
        let (jr, _) = irad::jacobian(&l.src, &l.m, &registry, &rev).expect("rev jacobian");
        assert_eq!(jr.rows.len(), jr.outputs.len());
        assert!(!jr.rows.is_empty(), "@{name} has rows");
        for batch in [1, 2, 8] {
            let fwd = GradRequest {
                mode: Mode::Forward,
                opts: GradOptions {
                    lanes: irad::ir::Lanes::dense(batch).expect("not 0"),
                    ..GradOptions::default()
                },
                ..GradRequest::new(f, &args)
            };
            let (jf, _) = irad::jacobian(&l.src, &l.m, &registry, &fwd).expect("fwd jacobian");
            assert_eq!(jf.inputs, jr.inputs);
            assert_eq!(jf.outputs, jr.outputs);
            let cols = jf.inputs.len();
            assert_eq!(jf.passes, cols.div_ceil(batch as usize).max(1), "@{name}");
            for (a, b) in jf.rows.iter().zip(&jr.rows) {
                assert_eq!(a.len(), cols);
                assert_close(a, b, 1e-12, &format!("@{name} batch {batch}"));
            }
        }
    }
}

#[test]
fn seeded_gradients_are_seed_weighted_sums_of_per_output_gradients() {
    let l = load();
    let registry = irad::rules::Registry::new();
    let parts: [(&str, &str, &[&str], &str); 2] = [
        ("vec2", "0.7, -1.3", &["vec2_0", "vec2_1"], "(2.5, -0.5)"),
        (
            "mixed",
            "0.5, [1.5, -0.25, 2.0], 1",
            &["mixed_0", "mixed_1_0", "mixed_1_1"],
            "(3.0, [-2.0, 0.75], 9)",
        ),
    ];
    for (name, args_text, outputs, seed_text) in parts {
        let f = l.func(name);
        let args = l.args(f, args_text);
        let seed = irad::parse_seed(&Source::new("<seed>", seed_text), &l.m, f).expect("seed");
        let weights = flat(&seed);
        let (g, _) = irad::vjp(&l.src, &l.m, &registry, &req(f, &args, Backend::Jit), &seed)
            .expect("vjp runs");
        let got: Vec<f64> = g.gradient.iter().flatten().flat_map(flat).collect();
        let mut want = vec![0.0; got.len()];
        for (out, w) in outputs.iter().zip(&weights) {
            let fo = l.func(out);
            let ao = l.args(fo, args_text);
            let (go, _) = irad::grad(&l.src, &l.m, &registry, &GradRequest::new(fo, &ao))
                .expect("grad of one output");
            let gl: Vec<f64> = go.gradient.iter().flatten().flat_map(flat).collect();
            for (acc, x) in want.iter_mut().zip(gl) {
                *acc += w * x;
            }
        }
        assert_close(
            &got,
            &want,
            1e-12,
            &format!("@{name} seeded by {seed_text}"),
        );
        // The value is the primal's, arrays included.
        let v = irad::run(&l.src, &l.m, &irad::RunRequest::new(f, &args)).expect("runs");
        assert!(
            g.value.same(&v),
            "@{name}: {} vs {}",
            g.value.display(&l.m),
            v.display(&l.m)
        );
    }
    // On an f64 result the seed scales the gradient.
    let f = l.func("scalar");
    let args = l.args(f, "[1.0, -2.0, 0.5], 1.5");
    let (g1, _) = irad::grad(&l.src, &l.m, &registry, &GradRequest::new(f, &args)).expect("grad");
    let (g3, _) = irad::vjp(
        &l.src,
        &l.m,
        &registry,
        &GradRequest::new(f, &args),
        &Val::F64(3.0),
    )
    .expect("vjp");
    let scaled: Vec<f64> = g1
        .gradient
        .iter()
        .flatten()
        .flat_map(flat)
        .map(|x| 3.0 * x)
        .collect();
    let got: Vec<f64> = g3.gradient.iter().flatten().flat_map(flat).collect();
    assert_close(&got, &scaled, 1e-15, "seed 3.0 scales");
}

#[test]
fn interpreter_and_jit_agree_bit_for_bit() {
    let l = load();
    let registry = irad::rules::Registry::new();
    for (name, args, tangent) in CASES {
        let f = l.func(name);
        let args = l.args(f, args);
        let t = l.tangent(f, &args, tangent);
        let mut jvps = Vec::new();
        let mut vjps = Vec::new();
        let mut jacs = Vec::new();
        for backend in [Backend::Interp, Backend::Jit] {
            let r = req(f, &args, backend);
            let (d, _) = irad::jvp(&l.src, &l.m, &registry, &r, &t).expect("jvp");
            jvps.push([flat(&d.value), flat(&d.jvp)].concat());
            let mut k = 0;
            let seed = map_f64(&d.value, &mut k, &|_, i| 1.0 + i as f64 * 0.5);
            let (g, _) = irad::vjp(&l.src, &l.m, &registry, &r, &seed).expect("vjp");
            vjps.push(
                g.gradient
                    .iter()
                    .flatten()
                    .flat_map(flat)
                    .collect::<Vec<_>>(),
            );
            for mode in [Mode::Forward, Mode::Reverse] {
                let r = GradRequest {
                    mode,
                    ..req(f, &args, backend)
                };
                let (j, _) = irad::jacobian(&l.src, &l.m, &registry, &r).expect("jacobian");
                jacs.push(j.rows.concat());
            }
        }
        assert!(same_bits(&jvps[0], &jvps[1]), "@{name} jvp: {jvps:?}");
        assert!(same_bits(&vjps[0], &vjps[1]), "@{name} vjp: {vjps:?}");
        assert!(
            same_bits(&jacs[0], &jacs[2]),
            "@{name} fwd jacobian: {jacs:?}"
        );
        assert!(
            same_bits(&jacs[1], &jacs[3]),
            "@{name} rev jacobian: {jacs:?}"
        );
    }
}

/// The corpus (tests/corpus, as tests/corpus.rs reads it): every case of a
/// function with an f64 result, on both backends, `jvp` along a tangent t
/// equals `dot(grad, t)` (reverse mode) to rounding, and the Jacobian's one
/// row is the gradient (reverse: bit for bit; forward: to rounding).
#[test]
fn corpus_jvp_equals_gradient_dot_tangent() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/corpus exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("json"))
        .collect();
    entries.sort();
    let registry = irad::rules::Registry::new();
    let mut checked = 0;
    for path in entries {
        let text = std::fs::read_to_string(&path).expect("readable");
        let reference: serde_json::Value = serde_json::from_str(&text).expect("JSON");
        let func = reference["function"].as_str().expect("function");
        let files = [reference["file"].as_str(), reference["ir_file"].as_str()];
        for file in files.into_iter().flatten() {
            let src = irad::read_source(&dir.join(file)).expect("corpus file");
            let m = irad::load(&src).expect("corpus loads");
            let f = irad::find_function(&src, &m, func).expect("function");
            if m[f].ret != irad::ir::Type::F64 {
                continue;
            }
            for case in reference["cases"].as_array().into_iter().flatten() {
                let text = case["args"].as_str().expect("args");
                let args = irad::parse_args(&Source::new("<args>", text), &m, f).expect("args");
                let params = m[f].param_types();
                let mut k = 0;
                let t: Vec<Val> = args
                    .iter()
                    .map(|a| map_f64(a, &mut k, &|_, i| ((i * 7 + 3) % 11) as f64 / 5.0 - 1.0))
                    .collect();
                let tl: Vec<f64> = t
                    .iter()
                    .zip(&params)
                    .filter(|(_, ty)| ty.has_tangent())
                    .flat_map(|(v, _)| flat(v))
                    .collect();
                for backend in [Backend::Interp, Backend::Jit] {
                    let r = req(f, &args, backend);
                    let (d, _) = irad::jvp(&src, &m, &registry, &r, &t).expect("jvp");
                    let (g, _) = irad::grad(&src, &m, &registry, &r).expect("grad");
                    let gl: Vec<f64> = g.gradient.iter().flatten().flat_map(flat).collect();
                    let dot: f64 = gl.iter().zip(&tl).map(|(a, b)| a * b).sum();
                    let scale: f64 = gl.iter().zip(&tl).map(|(a, b)| (a * b).abs()).sum();
                    let got = flat(&d.jvp)[0];
                    assert!(
                        (got - dot).abs() <= 1e-12 * scale.max(1.0),
                        "{file} @{func}({text}) {backend:?}: jvp {got}, grad . t {dot}"
                    );
                    assert!(d.value.same(&g.value), "{file} @{func}({text}): values");
                    // The reverse Jacobian's one row is the gradient (the same
                    // pieces with seed 1); the forward one agrees to rounding.
                    for mode in [Mode::Reverse, Mode::Forward] {
                        let r = GradRequest {
                            mode,
                            ..req(f, &args, backend)
                        };
                        let (j, _) = irad::jacobian(&src, &m, &registry, &r).expect("jacobian");
                        assert_eq!(j.rows.len(), 1, "{file} @{func}");
                        if mode == Mode::Reverse {
                            assert!(same_bits(&j.rows[0], &gl), "{file} @{func}({text})");
                        } else {
                            assert_close(
                                &j.rows[0],
                                &gl,
                                1e-12,
                                &format!("{file} @{func}({text})"),
                            );
                        }
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 40, "only {checked} corpus checks");
}

fn irad_cmd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(args)
        .output()
        .expect("irad starts")
}

fn program_file(name: &str) -> String {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli_deriv");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join(name);
    std::fs::write(&path, PROGRAM).expect("temp file");
    path.to_string_lossy().into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("--json prints JSON")
}

fn fails_with(o: &Output, code: i32, text: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{err}");
    assert!(err.contains(text), "{err}");
}

#[test]
fn the_commands_print_the_documented_json_shapes() {
    let p = program_file("shapes.irad");
    let args = [
        "-f",
        "mixed",
        "--args",
        "0.5, [1.5, -0.25, 2.0], 2",
        "--json",
    ];
    let j = json(&irad_cmd(
        &[
            &["jvp", &p][..],
            &args,
            &["--tangent", "1.0, [0.0, 0.0, 0.0], 0"],
        ]
        .concat(),
    ));
    assert_eq!(j.as_object().map(|o| o.len()), Some(2), "{j}");
    assert_eq!(j["value"][2], 2, "{j}");
    assert_eq!(j["jvp"][2], serde_json::Value::Null, "{j}");
    assert_eq!(j["jvp"][0], 1.0, "{j}"); // d(x * x + y0)/dx = 2x = 1
    for mode in ["fwd", "rev"] {
        let j = json(&irad_cmd(
            &[&["jacobian", &p][..], &args, &["--mode", mode]].concat(),
        ));
        let rows = j["jacobian"].as_array().expect("rows");
        assert_eq!(rows.len(), 3, "{j}");
        assert!(
            rows.iter().all(|r| r.as_array().map(Vec::len) == Some(4)),
            "{j}"
        );
        assert_eq!(j["jacobian"][0][1], 1.0, "{j}");
    }
    let j = json(&irad_cmd(
        &[
            &["grad", &p][..],
            &args,
            &["--seed", "(1.0, [0.0, 0.0], 0)"],
        ]
        .concat(),
    ));
    assert_eq!(j["gradient"][0], 1.0, "{j}");
    assert_eq!(j["gradient"][1], serde_json::json!([1.0, 0.0, 0.0]), "{j}");
    assert_eq!(j["gradient"][2], serde_json::Value::Null, "{j}");
    // The text forms.
    let o = irad_cmd(&["jacobian", &p, "-f", "vec2", "--args", "1.0, 2.0"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("  columns: %x, %y\n"), "{text}");
    assert!(text.contains("  value.0: 2.0, 1.0\n"), "{text}");
    let o = irad_cmd(&[
        "jvp",
        &p,
        "-f",
        "vec2",
        "--args",
        "1.0, 2.0",
        "--tangent",
        "1.0, 0.0",
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.starts_with("value: (2.0, "), "{text}");
    assert!(text.contains("\njvp: (2.0, "), "{text}");
}

#[test]
fn every_error_is_a_clear_message() {
    let p = program_file("errors.irad");
    let mixed = ["-f", "mixed", "--args", "0.5, [1.5, -0.25, 2.0], 2"];
    let run =
        |extra: &[&str], cmd: &str, f: &[&str]| irad_cmd(&[&[cmd, &p][..], f, extra].concat());
    fails_with(
        &run(&["--tangent", "1.0, [0.0, 0.0], 0"], "jvp", &mixed),
        1,
        "<tangent>:1:1: error: tangent for argument 2 has 2 entries, argument has 3",
    );
    fails_with(
        &run(&["--tangent", "1.0, [0.0, 0.0, 0.0]"], "jvp", &mixed),
        1,
        "<tangent>:1:",
    );
    fails_with(
        &run(&["--tangent", "1.0, [0.0, 0.0, 0.0], 0.5"], "jvp", &mixed),
        1,
        "<tangent>:1:23: error: expected i64, found `0.5`",
    );
    fails_with(
        &run(
            &["--tangent", "(1.0, 0), [1.0, 0.0, 0.0]"],
            "jvp",
            &["-f", "pair", "--args", "(1.0, 2), 0.5"],
        ),
        1,
        "<tangent>:1:",
    );
    fails_with(
        &run(&["--seed", "(1.0, [0.0], 0)"], "grad", &mixed),
        1,
        "<seed>:1:1: error: the seed (component 1) has 1 entry, the result has 2",
    );
    fails_with(
        &run(&["--seed", "1.0"], "grad", &mixed),
        1,
        "<seed>:1:1: error: ",
    );
    fails_with(
        &run(&[], "grad", &["-f", "vec2", "--args", "1.0, 2.0"]),
        1,
        "error: @vec2 returns (f64, f64): reverse mode needs an output seed of that type",
    );
    fails_with(
        &run(
            &["--seed", "(1.0, 1.0)", "--mode", "fwd"],
            "grad",
            &["-f", "vec2", "--args", "1.0, 2.0"],
        ),
        2,
        "--seed is the output seed of reverse mode: it cannot be used with --mode fwd",
    );
    for cmd in [
        &["jvp", "--tangent", "1"][..],
        &["jacobian"][..],
        &["grad", "--seed", "1"][..],
    ] {
        fails_with(
            &run(&cmd[1..], cmd[0], &["-f", "ints", "--args", "3"]),
            1,
            "error: @ints returns i64, which has no f64 entries: there is nothing to differentiate",
        );
    }
    // The library names the argument too, for directions built in Rust.
    let l = load();
    let f = l.func("mixed");
    let args = l.args(f, "0.5, [1.5, -0.25, 2.0], 2");
    let registry = irad::rules::Registry::new();
    let t = [Val::F64(1.0), Val::f64_array(vec![0.0; 4]), Val::I64(0)];
    let err = irad::jvp(&l.src, &l.m, &registry, &GradRequest::new(f, &args), &t).unwrap_err();
    assert_eq!(
        err.render(&[]),
        "<tangent>:1:1: error: tangent for argument 2 has 4 entries, argument has 3\n"
    );
    let t = [Val::F64(1.0), Val::F64(0.0), Val::I64(0)];
    let err = irad::jvp(&l.src, &l.m, &registry, &GradRequest::new(f, &args), &t).unwrap_err();
    assert_eq!(
        err.render(&[]),
        "<tangent>:1:1: error: tangent for argument 2 must be [f64], found f64\n"
    );
    let err = irad::vjp(
        &l.src,
        &l.m,
        &registry,
        &GradRequest::new(f, &args),
        &Val::F64(1.0),
    )
    .unwrap_err();
    assert_eq!(
        err.render(&[]),
        "<seed>:1:1: error: the seed must be of the result's type (f64, [f64], i64), found f64\n"
    );
}

#[test]
fn tangent_files_and_backends_on_the_command_line() {
    let p = program_file("files.irad");
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli_deriv");
    let good = dir.join("good.tangent");
    std::fs::write(&good, "-1.0, [0.5, 0.25, 3.0], 0\n").expect("temp file");
    let bad = dir.join("bad.tangent");
    std::fs::write(&bad, "-1.0, [0.5], 0\n").expect("temp file");
    let (good, bad) = (good.to_string_lossy(), bad.to_string_lossy());
    let base = [
        "-f",
        "mixed",
        "--args",
        "0.5, [1.5, -0.25, 2.0], 2",
        "--json",
    ];
    let from_file = json(&irad_cmd(
        &[&["jvp", &p][..], &base, &["--tangent-file", &good]].concat(),
    ));
    let inline = json(&irad_cmd(
        &[
            &["jvp", &p][..],
            &base,
            &["--tangent", "-1.0, [0.5, 0.25, 3.0], 0"],
        ]
        .concat(),
    ));
    assert_eq!(from_file, inline);
    // The interpreter prints the same JSON as the JIT (equal numbers;
    // `interpreter_and_jit_agree_bit_for_bit` compares the bits).
    for cmd in [
        &["jvp", "--tangent-file", &good][..],
        &["jacobian", "--mode", "fwd"][..],
        &["jacobian"][..],
        &["grad", "--seed", "(0.5, [2.0, -1.0], 0)"][..],
    ] {
        let jit = irad_cmd(&[&[cmd[0], &p][..], &base, &cmd[1..]].concat());
        let interp = irad_cmd(
            &[
                &[cmd[0], &p][..],
                &base,
                &cmd[1..],
                &["--backend", "interp"],
            ]
            .concat(),
        );
        assert_eq!(json(&jit), json(&interp), "{cmd:?}");
    }
    // Without `--json` the error is text; with it, the same as JSON.
    fails_with(
        &irad_cmd(&[&["jvp", &p][..], &base[..4], &["--tangent-file", &bad]].concat()),
        1,
        &format!("{bad}:1:1: error: tangent for argument 2 has 1 entry, argument has 3"),
    );
    let o = irad_cmd(&[&["jvp", &p][..], &base, &["--tangent-file", &bad]].concat());
    assert_eq!(o.status.code(), Some(1));
    let e: serde_json::Value = serde_json::from_slice(&o.stderr).expect("a JSON error");
    assert_eq!(e["error"]["file"], bad.as_ref());
    assert_eq!(
        (e["error"]["line"].as_u64(), e["error"]["column"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(
        e["error"]["message"],
        "tangent for argument 2 has 1 entry, argument has 3"
    );
}
