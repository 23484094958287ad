//! Derivatives at infinities, NaN and overflow (issue 27, finding 10;
//! docs/rules.md, "Infinities and NaN"). Every entry point derives and runs
//! the plain derivative (IEEE products) and, only when an entry comes out
//! NaN, the strong one (every product of the chain rule a `zmul`: exactly 0
//! when either factor is 0, whatever the other) and returns that instead. So
//! forward mode, reverse mode and sparse forward mode give the same entries,
//! differentiating a subset of the arguments (`--wrt`) gives the entries of
//! the whole gradient, the interpreter and compiled code agree bit for bit,
//! and a derivative without NaN is the plain one, bit for bit.
//!
//! The table: each f64 primitive `p` as `x * p(y)` (unary: d/dx = p(y), the
//! issue's form) or `p(x, y)` (binary), and a few compositions with a kink
//! (a zero partial meeting an infinite one), at every pair of special inputs
//! (zeros of both signs, ordinary values, a subnormal, the largest values,
//! arguments where `exp` overflows or underflows, infinities, NaN). Entries
//! agree when both are NaN or they are equal as numbers (`-0.0 == 0.0`: a
//! sum `t + 0` of a lane whose other tangent is an explicit zero is `+0.0`
//! where leaving the term out keeps `-0.0`), or, for finite entries, within
//! 1e-12 relative (the modes multiply the same partials, but forward mode
//! adds a lane's terms where reverse mode adds each argument's cotangents).
//! Then the second-order modes, Jacobians and directional derivatives,
//! arrays and loops, and the typed calls of a compiled gradient.

use irad::ir::Lanes;
use irad::ir::interp::{RunOptions, Val};
use irad::passes::forward::grad::GradOptions;
use irad::{Backend, GradRequest, HvpMode, Mode, Source};

#[path = "common/values.rs"]
mod values;
use values::leaves;

/// The special inputs.
const SPECIALS: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -2.5,
    1e-310,
    1e308,
    -1e308,
    710.0,
    -746.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
];

const UNARY: &[&str] = &[
    "abs", "sqrt", "exp", "log", "log1p", "expm1", "sin", "cos", "tan", "asin", "acos", "atan",
    "sinh", "cosh", "tanh", "erf", "floor", "ceil", "round", "neg",
];

const BINARY: &[&str] = &[
    "add", "sub", "mul", "div", "pow", "min", "max", "copysign", "atan2", "zmul",
];

/// Compositions with kinks, where a zero partial meets an infinite one in
/// one mode's order and not in the other's.
const COMPOSITE: &str = "
fn kink_sqrt(x: f64, y: f64) -> f64 { sqrt(x * x) + y }
fn kink_log(x: f64, y: f64) -> f64 { log(x * y) * 0.0 + x }
fn powi3(x: f64, y: f64) -> f64 { powi(x, 3) * y }
fn powi_neg(x: f64, y: f64) -> f64 { powi(x, -1) + powi(y, 0) }
fn issue(x: f64, y: f64) -> f64 { x * exp(y) }
fn cancel(x: f64, y: f64) -> f64 { x * exp(y) - x * exp(y) }
";

/// The program: one function per primitive, and the compositions.
fn program() -> String {
    let mut src = String::new();
    for p in UNARY {
        src.push_str(&format!(
            "fn u_{p}(x: f64, y: f64) -> f64 {{ x * {p}(y) }}\n"
        ));
    }
    for p in BINARY {
        src.push_str(&format!(
            "fn b_{p}(x: f64, y: f64) -> f64 {{ {p}(x, y) }}\n"
        ));
    }
    src.push_str(COMPOSITE);
    src
}

/// [`program`] loaded, and the built-in rules.
fn table() -> (Source, irad::ir::Module, irad::rules::Registry) {
    let src = Source::new("ieee.irad", program());
    let module = irad::load(&src).expect("loads");
    (src, module, irad::rules::Registry::new())
}

/// The names of the functions of [`program`].
fn functions() -> Vec<String> {
    let mut out: Vec<String> = UNARY.iter().map(|p| format!("u_{p}")).collect();
    out.extend(BINARY.iter().map(|p| format!("b_{p}")));
    out.extend(
        [
            "kink_sqrt",
            "kink_log",
            "powi3",
            "powi_neg",
            "issue",
            "cancel",
        ]
        .map(String::from),
    );
    out
}

/// A way to compute the gradient.
#[derive(Clone, Debug)]
struct Config {
    mode: Mode,
    lanes: Lanes,
    wrt: Option<Vec<usize>>,
}

fn configs() -> Vec<Config> {
    let mut out = Vec::new();
    for wrt in [None, Some(vec![0]), Some(vec![1])] {
        for (mode, lanes) in [
            (Mode::Reverse, Lanes::ONE),
            (Mode::Forward, Lanes::ONE),
            (Mode::Forward, Lanes::Sparse),
        ] {
            out.push(Config {
                mode,
                lanes,
                wrt: wrt.clone(),
            });
        }
    }
    out
}

/// Whether two entries agree (module header).
fn agree(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan())
        || a == b
        || (a.is_finite() && b.is_finite() && (a - b).abs() <= 1e-12 * a.abs().max(b.abs()))
}

fn f64_of(v: &Option<Val>) -> Option<f64> {
    match v {
        Some(Val::F64(x)) => Some(*x),
        _ => None,
    }
}

#[test]
fn every_mode_and_subset_gives_the_same_entries_at_infinities_and_nan() {
    let (src, module, registry) = table();
    let mut failures = Vec::new();
    for name in functions() {
        let f = irad::find_function(&src, &module, &name).expect("function");
        let seed_args = [Val::F64(1.0), Val::F64(1.0)];
        let compiled: Vec<(Config, irad::CompiledGradient)> = configs()
            .into_iter()
            .map(|c| {
                let req = GradRequest {
                    mode: c.mode,
                    opts: GradOptions {
                        lanes: c.lanes,
                        wrt: c.wrt.clone(),
                        ..GradOptions::default()
                    },
                    ..GradRequest::new(f, &seed_args)
                };
                let g = irad::jit_gradient(&module, &registry, &req)
                    .unwrap_or_else(|e| panic!("@{name} {c:?}: {e:?}"));
                (c, g)
            })
            .collect();
        for &x in SPECIALS {
            for &y in SPECIALS {
                let args = [Val::F64(x), Val::F64(y)];
                // The reference: reverse mode of both arguments.
                let reference = compiled[0]
                    .1
                    .run(&args, &RunOptions::default())
                    .unwrap_or_else(|e| panic!("@{name}({x}, {y}): {e:?}"));
                let want: Vec<Option<f64>> = reference.gradient.iter().map(f64_of).collect();
                for (c, g) in &compiled[1..] {
                    let got = g
                        .run(&args, &RunOptions::default())
                        .unwrap_or_else(|e| panic!("@{name}({x}, {y}) {c:?}: {e:?}"));
                    for (k, entry) in got.gradient.iter().enumerate() {
                        let (Some(a), Some(b)) = (f64_of(entry), want[k]) else {
                            continue;
                        };
                        if name == "cancel" && c.lanes.is_sparse() && x.abs() == 1e308 {
                            // Overflow depends on the order of the sums
                            // (docs/rules.md): the sparse builder adds the
                            // shared term's coefficients first (x - x = 0,
                            // then 0 * e), reverse mode multiplies first
                            // (x * e overflows: inf - inf).
                            continue;
                        }
                        if !agree(a, b) {
                            failures.push(format!(
                                "@{name}({x:?}, {y:?}) d/d{k}: {c:?} gives {a:?}, reverse mode {b:?}"
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} disagreements:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A sum that cancels to exactly zero before it meets an infinite factor
/// stays NaN in every mode (docs/rules.md, "Infinities and NaN"):
/// `x * exp(y) - x * exp(y)` at y = 710 (exp overflows): reverse and dense
/// forward mode multiply each term by exp's infinite partial, then subtract
/// (`inf - inf`); the sparse builder adds the coefficients of the shared
/// term first (`1 - 1 = 0`), then multiplies by `inf` (an IEEE product
/// there, as the strong version has no node of coefficient 0 to skip).
#[test]
fn a_cancelling_sum_is_nan_in_every_mode() {
    let (src, module, registry) = table();
    let f = irad::find_function(&src, &module, "cancel").expect("function");
    let args = [Val::F64(1.0), Val::F64(710.0)];
    for (mode, lanes) in [
        (Mode::Reverse, Lanes::ONE),
        (Mode::Forward, Lanes::ONE),
        (Mode::Forward, Lanes::Sparse),
    ] {
        let req = GradRequest {
            mode,
            opts: GradOptions {
                lanes,
                ..GradOptions::default()
            },
            ..GradRequest::new(f, &args)
        };
        let (g, _) = irad::grad(&src, &module, &registry, &req).expect("gradient");
        let d = f64_of(&g.gradient[0]).expect("an f64");
        assert!(d.is_nan(), "{mode:?} {lanes:?}: {d:?}");
    }
}

#[test]
fn the_interpreter_and_compiled_code_agree_bit_for_bit_at_the_specials() {
    let (src, module, registry) = table();
    let bits = |v: &Option<Val>| f64_of(v).map(|x| if x.is_nan() { u64::MAX } else { x.to_bits() });
    let mut failures = Vec::new();
    // The functions with special cases in their rules, at the pairs of a few
    // specials, by each mode with both arguments: the interpreter's entries
    // and the JIT's, bit for bit (any NaN equal to any NaN). (Compiled code
    // agrees with the interpreter on every primitive elsewhere:
    // tests/jit_diff.)
    let few = [0.0, 710.0, f64::INFINITY, f64::NAN];
    let names = [
        "issue",
        "kink_sqrt",
        "kink_log",
        "powi_neg",
        "u_sqrt",
        "u_log",
        "u_exp",
        "b_pow",
        "b_div",
        "b_zmul",
        "b_atan2",
    ];
    for name in names {
        let f = irad::find_function(&src, &module, name).expect("function");
        for c in configs().into_iter().filter(|c| c.wrt.is_none()) {
            for &x in &few {
                for &y in &few {
                    let args = [Val::F64(x), Val::F64(y)];
                    let mut entries = Vec::new();
                    for backend in [Backend::Interp, Backend::Jit] {
                        let req = GradRequest {
                            mode: c.mode,
                            opts: GradOptions {
                                lanes: c.lanes,
                                exec: backend.exec(),
                                ..GradOptions::default()
                            },
                            ..GradRequest::new(f, &args)
                        };
                        let (g, _) = irad::grad(&src, &module, &registry, &req)
                            .unwrap_or_else(|e| panic!("@{name} {c:?}: {e}"));
                        entries.push(g.gradient.iter().map(bits).collect::<Vec<_>>());
                    }
                    if entries[0] != entries[1] {
                        failures.push(format!(
                            "@{name}({x:?}, {y:?}) {c:?}: interpreter {:?}, JIT {:?}",
                            entries[0], entries[1]
                        ));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The issue's example on the command line: `x * exp(y)` at y = 1000,
/// where exp overflows: `[inf, inf]` by both modes, sparse mode and both
/// backends, and d/dx is `inf` whether or not y is differentiated too.
#[test]
fn the_issues_example_is_inf_in_every_mode_and_for_every_wrt() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ieee");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("overflow.irad");
    std::fs::write(&path, "fn f(x: f64, y: f64) -> f64 { x * exp(y) }\n").expect("temp file");
    let path = path.to_str().expect("utf-8 path");
    for mode in [
        &["--mode", "rev"][..],
        &["--mode", "fwd"],
        &["--mode", "fwd", "--sparse"],
    ] {
        for backend in ["jit", "interp"] {
            for (wrt, want) in [
                ("0,1", "  %x: inf\n  %y: inf\n"),
                ("0", "  %x: inf\n  %y: -\n"),
                ("1", "  %x: -\n  %y: inf\n"),
            ] {
                let mut args = vec!["grad", path, "-f", "f", "--args", "2.0, 1000.0"];
                args.extend_from_slice(mode);
                args.extend(["--wrt", wrt, "--backend", backend]);
                let o = std::process::Command::new(env!("CARGO_BIN_EXE_irad"))
                    .args(&args)
                    .output()
                    .expect("irad starts");
                let out = String::from_utf8_lossy(&o.stdout);
                assert!(
                    o.status.success(),
                    "{args:?}: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
                assert_eq!(out, format!("value: inf\ngradient:\n{want}"), "{args:?}");
            }
        }
    }
}

/// The NaN-free functions and points of [`the_plain_derivative_is_kept_bit_for_bit_where_it_has_no_nan`].
const ORDINARY: &[f64] = &[0.5, -2.5, 3.0, 1e-3];

/// Where the plain derivative has no NaN, every entry point returns it, bit
/// for bit: `irad::grad` (JIT, no optimiser) against `@f.rev` and `@f.fwd`
/// compiled directly (which have no fallback), for every function of the
/// table at ordinary points. And the derived functions a dump shows are the
/// plain ones: no `zmul` in them, while the strong version (a module marked
/// for strong products) has them.
#[test]
fn the_plain_derivative_is_kept_bit_for_bit_where_it_has_no_nan() {
    let (src, module, registry) = table();
    let mut compared = 0;
    for name in functions() {
        let f = irad::find_function(&src, &module, &name).expect("function");
        let rev = irad::jit_reverse(&module, &[f], &registry).expect("@f.rev");
        let rf = rev.func(&format!("{name}.rev")).expect("@f.rev");
        let fwd = irad::jit_forward(&module, &[f], Lanes::ONE, &registry).expect("@f.fwd");
        let ff = fwd.func(&format!("{name}.fwd")).expect("@f.fwd");
        for &x in ORDINARY {
            for &y in ORDINARY {
                let args = [Val::F64(x), Val::F64(y)];
                let out = rev
                    .call(
                        rf,
                        &[Val::F64(x), Val::F64(y), Val::F64(1.0)],
                        &RunOptions::default(),
                    )
                    .expect("@f.rev runs");
                let Val::Tuple(parts) = out else {
                    panic!("@{name}.rev returns a tuple")
                };
                let plain_rev: Vec<f64> = parts[1..]
                    .iter()
                    .filter_map(|v| f64_of(&Some(v.clone())))
                    .collect();
                let plain_fwd: Vec<f64> = (0..2)
                    .map(|k| {
                        let dual = |i: usize, v: f64| {
                            Val::Dual(
                                vec![Val::F64(v), Val::F64(if i == k { 1.0 } else { 0.0 })].into(),
                            )
                        };
                        match fwd.call(ff, &[dual(0, x), dual(1, y)], &RunOptions::default()) {
                            Ok(Val::Dual(p)) => {
                                f64_of(&Some(p[1].clone())).expect("an f64 tangent")
                            }
                            other => panic!("@{name}.fwd: {other:?}"),
                        }
                    })
                    .collect();
                for (mode, plain) in [(Mode::Reverse, &plain_rev), (Mode::Forward, &plain_fwd)] {
                    if plain.iter().any(|d| d.is_nan()) {
                        continue;
                    }
                    let req = GradRequest {
                        mode,
                        opts: GradOptions {
                            exec: Backend::Jit.exec(),
                            ..GradOptions::default()
                        },
                        schedule: Some(irad::passes::optimise::Strategy::Id),
                        ..GradRequest::new(f, &args)
                    };
                    let (g, _) = irad::grad(&src, &module, &registry, &req).expect("gradient");
                    let got: Vec<u64> = g
                        .gradient
                        .iter()
                        .filter_map(f64_of)
                        .map(f64::to_bits)
                        .collect();
                    let want: Vec<u64> = plain.iter().map(|d| d.to_bits()).collect();
                    assert_eq!(got, want, "@{name}({x}, {y}) {mode:?}");
                    compared += 1;
                }
            }
        }
    }
    assert!(
        compared > 400,
        "only {compared} NaN-free gradients compared"
    );

    // The dump's derived functions are plain; the strong version's are not.
    let f = irad::find_function(&src, &module, "issue").expect("function");
    let (plain, added, _) = irad::reverse_module(&src, &module, &[f], &registry).expect("derives");
    let text: String = added
        .iter()
        .map(|&g| irad::ir::text::print_func(&plain, g))
        .collect();
    assert!(text.contains("mul") && !text.contains("zmul"), "{text}");
    let mut strong_module = module.clone();
    strong_module.set_strong_products(true);
    let (strong, added, _) =
        irad::reverse_module(&src, &strong_module, &[f], &registry).expect("derives");
    let text: String = added
        .iter()
        .map(|&g| irad::ir::text::print_func(&strong, g))
        .collect();
    assert!(text.contains("zmul"), "{text}");
}

/// The second-order modes at the issue's point: `x * exp(y)` at
/// (2, 1000) has the gradient `(e^y, x e^y) = (inf, inf)` and the Hessian
/// `[[0, e^y], [e^y, x e^y]] = [[0, inf], [inf, inf]]`, by every Hessian
/// mode (and sparse forward over reverse) in both backends; before the
/// fallback they gave NaN entries that differed between modes. The
/// Hessian-vector product along `(1, 0)` is its first row.
#[test]
fn second_order_modes_agree_at_overflow() {
    let (src, module, registry) = table();
    let f = irad::find_function(&src, &module, "issue").expect("function");
    let args = [Val::F64(2.0), Val::F64(1000.0)];
    let inf = f64::INFINITY;
    let want = vec![vec![0.0, inf], vec![inf, inf]];
    for backend in [Backend::Interp, Backend::Jit] {
        let mut ways: Vec<(HvpMode, Lanes)> = [
            HvpMode::ForwardOverReverse,
            HvpMode::ReverseOverForward,
            HvpMode::ForwardOverForward,
        ]
        .into_iter()
        .map(|m| (m, Lanes::ONE))
        .collect();
        ways.push((HvpMode::ForwardOverReverse, Lanes::Sparse));
        for (mode, lanes) in ways {
            let req = GradRequest {
                opts: GradOptions {
                    lanes,
                    exec: backend.exec(),
                    ..GradOptions::default()
                },
                ..GradRequest::new(f, &args)
            };
            let (h, _) = irad::hessian_via(&src, &module, &registry, &req, mode).expect("hessian");
            assert_eq!(h.rows, want, "{backend:?} {mode:?} {lanes:?}");
            let grad: Vec<Option<f64>> = h.gradient.iter().map(f64_of).collect();
            assert_eq!(grad, [Some(inf), Some(inf)], "{backend:?} {mode:?}");
            if lanes.is_sparse() {
                continue;
            }
            let v = [Val::F64(1.0), Val::F64(0.0)];
            let (p, _) = irad::hvp_via(&src, &module, &registry, &req, &v, mode).expect("hvp");
            let hv: Vec<Option<f64>> = p.hvp.iter().map(f64_of).collect();
            assert_eq!(hv, [Some(0.0), Some(inf)], "{backend:?} {mode:?}");
        }
    }
}

/// Jacobians (forward and reverse mode) and directional derivatives at the
/// issue's point: `[inf, inf]` by both modes, and `inf` along each axis.
#[test]
fn jacobians_and_jvps_agree_at_overflow() {
    let (src, module, registry) = table();
    let f = irad::find_function(&src, &module, "issue").expect("function");
    let args = [Val::F64(2.0), Val::F64(1000.0)];
    let inf = f64::INFINITY;
    for backend in [Backend::Interp, Backend::Jit] {
        for mode in [Mode::Forward, Mode::Reverse] {
            let req = GradRequest {
                mode,
                opts: GradOptions {
                    exec: backend.exec(),
                    ..GradOptions::default()
                },
                ..GradRequest::new(f, &args)
            };
            let (j, _) = irad::jacobian(&src, &module, &registry, &req).expect("jacobian");
            assert_eq!(j.rows, [[inf, inf]], "{backend:?} {mode:?}");
            for t in [[1.0, 0.0], [0.0, 1.0]] {
                let t = [Val::F64(t[0]), Val::F64(t[1])];
                let (d, _) = irad::jvp(&src, &module, &registry, &req, &t).expect("jvp");
                assert_eq!(f64_of(&Some(d.jvp)), Some(inf), "{backend:?} {t:?}");
            }
            let (g, _) = irad::vjp(&src, &module, &registry, &req, &Val::F64(1.0)).expect("vjp");
            let grad: Vec<Option<f64>> = g.gradient.iter().map(f64_of).collect();
            assert_eq!(grad, [Some(inf), Some(inf)], "{backend:?} vjp");
        }
    }
}

/// Arrays and loops: a sum over an array in a loop (`x[i] * exp(y)`), and
/// array writes that overwrite a value whose derivative is infinite, with
/// a kink through `sqrt(x * x)`: every mode and `--wrt` subset gives the
/// entries of reverse mode over all arguments, in both backends; at y =
/// 1000 the loop's entries are all `inf`.
#[test]
fn arrays_and_loops_agree_at_overflow() {
    let text = "
fn looped(x: [f64], y: f64) -> f64 {
    let mut s = 0.0;
    for i in 0..len(x) { s = s + x[i] * exp(y); }
    s
}
fn written(x: [f64], y: f64) -> f64 {
    let a = zeros(2);
    a[0] = x[0] * exp(y);
    a[1] = a[0] * 0.0 + x[1];
    a[0] = 1.0;
    a[1] * a[0] + sqrt(x[0] * x[0]) * y
}
";
    let src = Source::new("arrays.irad", text);
    let module = irad::load(&src).expect("loads");
    let registry = irad::rules::Registry::new();
    let mut failures = Vec::new();
    for name in ["looped", "written"] {
        let f = irad::find_function(&src, &module, name).expect("function");
        for &x0 in &[0.0, 1.0, f64::INFINITY] {
            for &y in &[1.0, 1000.0, f64::INFINITY, f64::NAN] {
                let args = [Val::f64_array(vec![x0, 2.0]), Val::F64(y)];
                let entries = |c: &Config, backend: Backend| -> Vec<Option<Vec<f64>>> {
                    let req = GradRequest {
                        mode: c.mode,
                        opts: GradOptions {
                            lanes: c.lanes,
                            wrt: c.wrt.clone(),
                            exec: backend.exec(),
                            ..GradOptions::default()
                        },
                        ..GradRequest::new(f, &args)
                    };
                    let (g, _) = irad::grad(&src, &module, &registry, &req)
                        .unwrap_or_else(|e| panic!("@{name} {c:?}: {e}"));
                    g.gradient
                        .iter()
                        .map(|d| {
                            d.as_ref().map(|v| {
                                let mut out = Vec::new();
                                leaves(v, &mut out);
                                out
                            })
                        })
                        .collect()
                };
                let all = configs();
                let want = entries(&all[0], Backend::Interp);
                if name == "looped" && y == 1000.0 && x0 == 1.0 {
                    let inf = f64::INFINITY;
                    assert_eq!(want, [Some(vec![inf, inf]), Some(vec![inf])]);
                }
                for c in &all {
                    for backend in [Backend::Interp, Backend::Jit] {
                        let got = entries(c, backend);
                        for (k, (a, b)) in got.iter().zip(&want).enumerate() {
                            let (Some(a), Some(b)) = (a, b) else { continue };
                            let same =
                                a.len() == b.len() && a.iter().zip(b).all(|(p, q)| agree(*p, *q));
                            if !same {
                                failures.push(format!(
                                    "@{name}([{x0}, 2], {y}) d/d{k}: {c:?} {backend:?} gives {a:?}, reverse mode {b:?}"
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A compiled gradient falls back too, in its boxed and its typed calls:
/// at the issue's point both give `(inf, inf)` (the strong version, derived
/// on the first NaN), and at an ordinary point the plain gradient.
#[test]
fn compiled_gradients_fall_back_in_boxed_and_typed_calls() {
    let (src, module, registry) = table();
    let f = irad::find_function(&src, &module, "issue").expect("function");
    let inf = f64::INFINITY;
    for mode in [Mode::Reverse, Mode::Forward] {
        let seed_args = [Val::F64(1.0), Val::F64(1.0)];
        let g = irad::jit_gradient(
            &module,
            &registry,
            &GradRequest {
                mode,
                ..GradRequest::new(f, &seed_args)
            },
        )
        .expect("derives");
        for (y, want) in [(1000.0, [inf, inf]), (1.0, [1f64.exp(), 2.0 * 1f64.exp()])] {
            let r = g
                .run(&[Val::F64(2.0), Val::F64(y)], &RunOptions::default())
                .expect("runs");
            let boxed: Vec<Option<f64>> = r.gradient.iter().map(f64_of).collect();
            assert_eq!(boxed, [Some(want[0]), Some(want[1])], "{mode:?} y = {y}");
            let (mut dx, mut dy) = (0.0, 0.0);
            let v = g
                .gradient_into(
                    &[irad::ArgRef::F64(2.0), irad::ArgRef::F64(y)],
                    &mut [irad::GradOut::F64(&mut dx), irad::GradOut::F64(&mut dy)],
                )
                .expect("typed call");
            assert_eq!(
                (v, dx, dy),
                (2.0 * y.exp(), want[0], want[1]),
                "{mode:?} y = {y}"
            );
        }
    }
}
