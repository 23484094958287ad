//! Rules written in the language (`jvp g` / `vjp h` after a function's
//! signature, in `.irad` and `.ir`; docs/rules.md): the AD passes call them
//! instead of differentiating the body, in forward mode (every batch width,
//! and sparse mode where the signature is scalar), reverse mode, through
//! function values, and under forward over reverse (HVP); the interpreter
//! and the JIT agree bit for bit; the rule tester (`irad test-rules FILE`)
//! and `irad check-grad` check them against finite differences of the body;
//! the declarations print and parse back; malformed ones are located errors.
//! (Objects: tests/emit.rs, `rules_written_in_the_language_reach_objects`.)

use irad::{Backend, GradCheckOptions, GradOptions, GradRequest, Mode, Source, Val};
use std::path::Path;
use std::process::{Command, Output};

#[path = "common/values.rs"]
mod values;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn load(path: &str) -> (Source, irad::ir::Module) {
    let src = irad::read_source(&Path::new(ROOT).join(path)).expect("readable");
    let m = irad::load(&src).unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
    (src, m)
}

fn irad(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(args)
        .current_dir(ROOT)
        .output()
        .expect("irad runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The f64 leaves of a gradient, in order.
fn leaves(g: &irad::Gradient) -> Vec<f64> {
    values::flat_all(&g.gradient)
}

/// The gradient of `func` at `args` in every mode: reverse, forward at
/// widths 1, 2 and 4, and sparse when `sparse`; on both backends. Asserts
/// the backends agree bit for bit and returns reverse mode's gradient and
/// value after checking the others against it.
fn every_mode(path: &str, func: &str, args: &str, sparse: bool) -> (f64, Vec<f64>) {
    let (src, m) = load(path);
    let f = irad::find_function(&src, &m, func).expect("function");
    let args = irad::parse_args(&Source::new("<args>", args), &m, f).expect("args");
    let registry = irad::rules::Registry::new();
    let mut lanes = vec![
        (Mode::Reverse, irad::ir::Lanes::ONE),
        (Mode::Forward, irad::ir::Lanes::ONE),
    ];
    for w in [2, 4] {
        lanes.push((Mode::Forward, irad::ir::Lanes::dense(w).expect("w > 0")));
    }
    if sparse {
        lanes.push((Mode::Forward, irad::ir::Lanes::Sparse));
    }
    let mut reference: Option<(f64, Vec<f64>)> = None;
    for (mode, lanes) in lanes {
        let mut per_backend = Vec::new();
        for backend in [Backend::Interp, Backend::Jit] {
            let req = GradRequest {
                mode,
                opts: GradOptions {
                    lanes,
                    exec: backend.exec(),
                    ..GradOptions::default()
                },
                ..GradRequest::new(f, &args)
            };
            let (g, _) = irad::grad(&src, &m, &registry, &req)
                .unwrap_or_else(|e| panic!("{path} {mode:?} {lanes:?}: {}", e.render(&[&src])));
            let Val::F64(v) = g.value else {
                panic!("an f64 value")
            };
            per_backend.push((v, leaves(&g)));
        }
        let bits = |(v, g): &(f64, Vec<f64>)| {
            (
                v.to_bits(),
                g.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            )
        };
        assert_eq!(
            bits(&per_backend[0]),
            bits(&per_backend[1]),
            "{path} {mode:?} {lanes:?}: the backends differ"
        );
        let got = per_backend.swap_remove(0);
        match &reference {
            None => reference = Some(got),
            Some((v, g)) => {
                assert_eq!(got.0.to_bits(), v.to_bits(), "{path} {mode:?} {lanes:?}");
                assert_eq!(got.1.len(), g.len());
                for (a, b) in got.1.iter().zip(g) {
                    assert!(
                        (a - b).abs() <= 1e-12 * b.abs().max(1.0),
                        "{path} {mode:?} {lanes:?}: {:?} against {g:?}",
                        got.1
                    );
                }
            }
        }
    }
    reference.expect("at least one mode")
}

#[test]
fn the_declared_rules_replace_the_body_in_every_mode() {
    // clip's body has derivative 0 at 5; its rules pass 1 through.
    let (v, g) = every_mode("tests/lang_rules/clip.irad", "st", "5.0, 0.5", true);
    assert_eq!(v, 3.25);
    assert_eq!(g, [3.0, 1.0]);
    // Through a function value (rules looked up at run time).
    let (v, g) = every_mode("tests/lang_rules/clip.irad", "st_value", "5.0, 0.5", true);
    assert_eq!(v, 3.5);
    assert_eq!(g, [3.0, 1.0]);
    // Inside the interval the rules agree with the body.
    let (_, g) = every_mode("tests/lang_rules/clip.irad", "st", "0.25, -0.5", true);
    assert_eq!(g, [3.0, -1.0]);
}

#[test]
fn arrays_in_and_out_and_tuple_results() {
    // y = a v with array rules: every dense width (later lanes get copies of
    // the arrays); sparse mode refuses an array signature (below).
    let (v, g) = every_mode(
        "tests/lang_rules/scale.irad",
        "loss",
        "[0.5, -1.0, 2.0], 0.7",
        false,
    );
    let (w, a) = ([0.5f64, -1.0, 2.0], 0.7f64);
    let want_v: f64 = w.iter().map(|x| (a * x).sin() * x).sum();
    assert!((v - want_v).abs() < 1e-15, "{v} {want_v}");
    // d/dw_i [sin(a w_i) w_i] = a cos(a w_i) w_i + sin(a w_i)
    for i in 0..3 {
        let want = a * (a * w[i]).cos() * w[i] + (a * w[i]).sin();
        assert!((g[i] - want).abs() < 1e-14, "{i}: {} {want}", g[i]);
    }
    let want_a: f64 = w.iter().map(|x| (a * x).cos() * x * x).sum();
    assert!((g[3] - want_a).abs() < 1e-14, "{} {want_a}", g[3]);
    // The tuple-valued polar map of the .ir file, through `area`.
    let (v, g) = every_mode("tests/lang_rules/polar.ir", "area", "2.0, 0.3", true);
    let (r, t) = (2.0f64, 0.3f64);
    assert!((v - r * r * t.cos() * t.sin()).abs() < 1e-15);
    assert!((g[0] - 2.0 * r * t.cos() * t.sin()).abs() < 1e-14, "{g:?}");
    assert!((g[1] - r * r * (2.0 * t).cos()).abs() < 1e-14, "{g:?}");
}

#[test]
fn sparse_mode_refuses_array_signatures_with_a_located_error() {
    let o = irad(&[
        "grad",
        "tests/lang_rules/scale.irad",
        "-f",
        "loss",
        "--args",
        "[0.5, -1.0, 2.0], 0.7",
        "--mode",
        "fwd",
        "--sparse",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.starts_with("tests/lang_rules/scale.irad:27:13: error:"),
        "{err}"
    );
    assert!(
        err.contains(
            "calls only where the differentiable arguments are f64 and the result holds no array"
        ),
        "{err}"
    );
}

#[test]
fn the_jacobian_of_a_function_with_rules_is_its_rules() {
    let (src, m) = load("tests/lang_rules/polar.ir");
    let f = irad::find_function(&src, &m, "polar").expect("polar");
    let args = [Val::F64(2.0), Val::F64(0.3)];
    let registry = irad::rules::Registry::new();
    let (r, t) = (2.0f64, 0.3f64);
    let want = [[t.cos(), -r * t.sin()], [t.sin(), r * t.cos()]];
    for mode in [Mode::Forward, Mode::Reverse] {
        let req = GradRequest {
            mode,
            ..GradRequest::new(f, &args)
        };
        let (j, _) = irad::jacobian(&src, &m, &registry, &req).expect("jacobian");
        for (row, want_row) in j.rows.iter().zip(&want) {
            for (x, w) in row.iter().zip(want_row) {
                assert!((x - w).abs() < 1e-15, "{mode:?}: {:?}", j.rows);
            }
        }
    }
}

#[test]
fn hessian_vector_products_differentiate_the_vjp() {
    let (src, m) = load("examples/custom_rules.irad");
    let f = irad::find_function(&src, &m, "loss").expect("loss");
    let args = irad::parse_args(&Source::new("<args>", "[1.0, -2.0], 0.5"), &m, f).expect("args");
    let v = irad::parse_tangent(&Source::new("<tangent>", "[1.0, 0.0], 0.0"), &m, f, &args)
        .expect("tangent");
    let registry = irad::rules::Registry::new();
    let (h, _) = irad::hvp(&src, &m, &registry, &GradRequest::new(f, &args), &v).expect("hvp");
    let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
    let (w0, b) = (1.0f64, 0.5f64);
    let s = sig(w0 * b);
    // d2L/dw0^2 = s'(w0 b) b^2, d2L/(db dw0) = s'(w0 b) w0 b + s(w0 b).
    let ds = s * (1.0 - s);
    let mut got = Vec::new();
    for x in h.hvp.iter().flatten() {
        match x {
            Val::F64(x) => got.push(*x),
            Val::Array(a) => {
                if let irad::ir::interp::value::ArrayData::F64(xs) = &*a.0.borrow() {
                    got.extend_from_slice(xs);
                }
            }
            _ => {}
        }
    }
    assert_eq!(got.len(), 3, "{got:?}");
    assert!((got[0] - ds * b * b).abs() < 1e-14, "{got:?}");
    assert_eq!(got[1], 0.0);
    assert!((got[2] - (ds * w0 * b + s)).abs() < 1e-14, "{got:?}");
}

#[test]
fn the_rule_tester_and_check_grad_check_declared_rules() {
    for file in [
        "examples/custom_rules.irad",
        "tests/lang_rules/scale.irad",
        "tests/lang_rules/polar.ir",
    ] {
        let o = irad(&["test-rules", file, "--samples", "10"]);
        assert!(
            o.status.success(),
            "{file}:\n{}{}",
            text(&o.stdout),
            text(&o.stderr)
        );
        let out = text(&o.stdout);
        assert!(out.contains("jvp+vjp       10"), "{out}");
        assert!(out.ends_with(&format!(
            "1 function(s) with declared rules in {file}, 10 samples each, seed 450227925: 1 ok\n"
        )), "{out}");
    }
    // The straight-through clip is not the derivative of its body outside
    // [-1, 1]: the tester says so, with the point.
    let o = irad(&["test-rules", "tests/lang_rules/clip.irad", "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let j: serde_json::Value = serde_json::from_str(&text(&o.stdout)).expect("JSON");
    assert_eq!(j["ok"], false);
    let f = &j["functions"][0];
    assert_eq!(f["name"], "clip");
    assert_eq!(f["ok"], false);
    assert!(
        f["message"]
            .as_str()
            .is_some_and(|m| m.contains("finite differences 0.0")),
        "{f}"
    );
    let e: serde_json::Value = serde_json::from_str(&text(&o.stderr)).expect("JSON error");
    assert_eq!(
        e["error"]["message"],
        "the declared rules of 1 of 1 functions failed their checks"
    );

    // A jvp that is wrong by a factor 2 fails against reverse mode's body
    // and the differences; a vjp alone that is right passes.
    let src = Source::new(
        "sq.irad",
        "fn sq(x: f64) -> f64 jvp sq_jvp { x * x }\n\
         fn sq_jvp(x: f64, dx: f64) -> (f64, f64) { (x * x, 4.0 * x * dx) }\n\
         fn cube(x: f64) -> f64 vjp cube_vjp { x * x * x }\n\
         fn cube_vjp(x: f64, dy: f64) -> f64 { 3.0 * x * x * dy }\n\
         fn count(n: i64, x: f64) -> f64 vjp count_vjp { x }\n\
         fn count_vjp(n: i64, x: f64, dy: f64) -> f64 { dy }\n",
    );
    let m = irad::load(&src).unwrap_or_else(|e| panic!("{}", e.render(&[&src])));
    let registry = irad::rules::Registry::new();
    let checks =
        irad::check_declared_rules(&src, &m, &registry, 5, 7, &GradCheckOptions::default());
    let by_name = |n: &str| {
        checks
            .reports
            .iter()
            .find(|r| r.name == n)
            .unwrap_or_else(|| panic!("{n} in {}", checks.table()))
    };
    let sq = by_name("sq");
    assert!(sq.checked && sq.failure.is_some(), "{}", checks.table());
    assert!(sq.max_mode_error > 0.5, "{}", checks.table());
    let cube = by_name("cube");
    assert!(cube.failure.is_none(), "{}", checks.table());
    assert_eq!(cube.samples, 5);
    let count = by_name("count");
    assert!(!count.checked);
    assert!(
        count
            .failure
            .as_deref()
            .is_some_and(|m| m.contains("type i64 needs chosen values")),
        "{}",
        checks.table()
    );
    assert!(checks.table().contains("skipped"));
    // sq failed and count could not be checked: both count, and the
    // message says which kind.
    let verdict = checks.verdict().expect_err("sq fails, count is unchecked");
    assert_eq!(
        verdict.render(&[&src]).lines().next(),
        Some(
            "sq.irad:1:1: error: the declared rules of 2 of 3 functions failed their checks \
             (1 could not be checked: check it with irad check-grad)"
        ),
    );
    // check-grad at a point says the same of sq.
    let f = irad::find_function(&src, &m, "sq").expect("sq");
    let args = [Val::F64(1.5)];
    let (c, _) = irad::check_grad(
        &src,
        &m,
        &registry,
        &GradRequest::new(f, &args),
        &GradCheckOptions::default(),
    )
    .expect("runs");
    let e = &c.entries[0];
    assert_eq!((e.reverse, e.forward, e.ok), (3.0, 6.0, false));
}

#[test]
fn declarations_print_and_parse_back() {
    for path in [
        "tests/lang_rules/polar.ir",
        "tests/lang_rules/scale.irad",
        "examples/custom_rules.irad",
    ] {
        let (_, m) = load(path);
        let printed = irad::ir::text::print_module(&m);
        assert!(
            printed.contains(" jvp @") && printed.contains(" vjp @"),
            "{printed}"
        );
        let back = irad::ir::text::parse_module(&printed).expect("parses back");
        irad::ir::eq::structural_eq(&m, &back).expect("the same module");
        assert_eq!(irad::ir::text::print_module(&back), printed);
    }
    // A module without its rules is not the same module.
    let (_, m) = load("tests/lang_rules/polar.ir");
    let printed = irad::ir::text::print_module(&m).replace(" jvp @polar_jvp", "");
    let back = irad::ir::text::parse_module(&printed).expect("parses");
    assert!(irad::ir::eq::structural_eq(&m, &back).is_err());
}

#[test]
fn malformed_declarations_are_located_errors() {
    let cases: [(&str, &str, &str); 9] = [
        (
            "a.irad",
            "fn f(x: f64) -> f64 jvp g { x }\nfn g(x: f64) -> f64 { x }\n",
            "a.irad:1:1: error: the jvp of @f must have the signature (f64, f64) -> (f64, f64), but @g has (f64) -> f64 (in @f)",
        ),
        (
            "b.irad",
            "fn f(x: f64) -> f64 jvp gg { x }\nfn g(x: f64, d: f64) -> (f64, f64) { (x, d) }\n",
            "b.irad:1:25: error: unknown function `gg`; did you mean `g`? (in @f)",
        ),
        (
            "c.irad",
            "fn f(x: f64) -> f64 jvp g jvp g { x }\nfn g(x: f64, d: f64) -> (f64, f64) { (x, d) }\n",
            "c.irad:1:27: error: `jvp` declared twice for `f` (in @f)",
        ),
        (
            "d.irad",
            "fn f(x: i64) -> i64 vjp g { x }\nfn g(x: i64, d: f64) -> () { () }\n",
            "d.irad:1:1: error: @f has a vjp but its result type i64 has no tangent (in @f)",
        ),
        (
            "e.irad",
            "fn f(x: f64) -> f64 vjp f { x }\n",
            "e.irad:1:1: error: @f cannot be its own vjp (in @f)",
        ),
        (
            "f.irad",
            "fn f(x: f64) -> f64 jvp { x }\n",
            "f.irad:1:25: error: expected a name, found `{` (in @f)",
        ),
        (
            "g.ir",
            "func @f(%x: f64) -> f64 vjp @h {\n#1:\n  return %x\n}\n",
            "g.ir:1:29: error: unknown function @h (in @f)",
        ),
        (
            "h.ir",
            "func @f(%x: f64) -> f64 jvp {\n#1:\n  return %x\n}\n",
            "h.ir:1:29: error: expected a function name `@name`, found `{` (in @f)",
        ),
        (
            "i.irad",
            "fn f(x: f64, n: i64) -> f64 vjp g { x }\nfn g(x: f64, n: i64, dy: f64) -> (f64, f64) { (dy, dy) }\n",
            "i.irad:1:1: error: the vjp of @f must have the signature (f64, i64, f64) -> f64, but @g has (f64, i64, f64) -> (f64, f64) (in @f)",
        ),
    ];
    for (name, text, want) in cases {
        let src = Source::new(name, text);
        let err = irad::load(&src).expect_err(name);
        let shown = err.render(&[&src]);
        assert_eq!(shown.lines().next(), Some(want), "{shown}");
    }
}

/// Forward mode's automatic choice stays dense where a declared jvp cannot
/// be called in sparse mode (an array signature), and the gradient is right.
#[test]
fn the_automatic_forward_choice_respects_declared_rules() {
    let xs: Vec<String> = (0..40)
        .map(|i| format!("{:.1}", 0.1 * f64::from(i) - 2.0))
        .collect();
    let args = format!("[{}], 0.7", xs.join(", "));
    let run = |mode: &str| {
        let o = irad(&[
            "grad",
            "tests/lang_rules/scale.irad",
            "-f",
            "loss",
            "--args",
            &args,
            "--mode",
            mode,
            "--json",
        ]);
        assert!(o.status.success(), "{mode}: {}", text(&o.stderr));
        serde_json::from_str::<serde_json::Value>(&text(&o.stdout)).expect("JSON")
    };
    let fwd = run("fwd");
    assert_eq!(fwd["forward"]["mode"], "dense", "{fwd}");
    assert_eq!(fwd["forward"]["auto"], true, "{fwd}");
    let rev = run("rev");
    let (f, r) = (
        fwd["gradient"][0].as_array().expect("w"),
        rev["gradient"][0].as_array().expect("w"),
    );
    assert_eq!(f.len(), 40);
    for (a, b) in f.iter().zip(r) {
        let (a, b) = (a.as_f64().expect("f64"), b.as_f64().expect("f64"));
        assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{a} {b}");
    }
    // A scalar signature keeps the sparse choice: the polar map's area.
    let (src, m) = load("tests/lang_rules/polar.ir");
    assert!(irad::sparse_capable(&m), "{}", src.name);
    let (_, m) = load("tests/lang_rules/scale.irad");
    assert!(!irad::sparse_capable(&m));
}
