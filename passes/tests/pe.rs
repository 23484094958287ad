//! Partial evaluation stays bounded and reports what it cannot do: huge unroll
//! requests are refused quickly, deep chains of calls are inlined within the
//! size limit, a specialisation that needs more rounds than its fuel is an
//! error, and known arguments that do not fit the function are errors naming
//! it. Every result verifies.

use irad_ir::interp::{RunOptions, Val, run};
use irad_ir::text::{parse_module, print_func};
use irad_ir::verify::verify_module;
use irad_ir::{FuncRef, Module};
use irad_passes::pe::{self, Known, Limits};

fn parse(src: &str) -> Module {
    let m = parse_module(src);
    assert!(m.is_ok(), "{m:?}");
    let m = m.unwrap_or_default();
    assert!(verify_module(&m).is_ok());
    m
}

/// A loop of `trip` iterations with a constant bound.
fn counting_loop(trip: i64) -> String {
    format!(
        "func @f(%x: f64) -> f64 {{\n#1:\n  goto #2\n#2:\n  %i = phi [#1 => 0, #3 => %i1] :: i64\n  %s = phi [#1 => %x, #3 => %s1] :: f64\n  %c = call lt(%i, {trip}) :: bool\n  gotoifnot %c, #4\n#3:\n  %s1 = call add(%s, 1.0) :: f64\n  %i1 = call iadd(%i, 1) :: i64\n  goto #2\n#4:\n  return %s\n}}\n"
    )
}

#[test]
fn huge_unroll_requests_are_refused_quickly() {
    for trip in [257, 1_000_000, i64::MAX] {
        let mut m = parse(&counting_loop(trip));
        let start = std::time::Instant::now();
        assert!(!pe::unroll(&mut m), "trip {trip} unrolled");
        assert!(start.elapsed().as_secs() < 5);
    }
    // Within the trip limit but over the size limit.
    let mut m = parse(&counting_loop(200));
    let small = Limits {
        unroll_size: 100,
        ..Limits::default()
    };
    assert!(!pe::unroll_with(&mut m, &small));
    let mut m = parse(&counting_loop(200));
    assert!(pe::unroll(&mut m));
    assert!(verify_module(&m).is_ok());
    let f = m.by_name("f").unwrap_or_else(|| unreachable!());
    let r = run(&m, f, &[Val::F64(0.5)], &RunOptions::default());
    assert!(matches!(r, Ok(Val::F64(x)) if x == 200.5), "{r:?}");
}

/// A chain `@f0 -> @f1 -> ... -> @f{n-1}` of small functions.
fn call_chain(n: usize) -> String {
    let mut src = String::new();
    for i in 0..n {
        let body = if i + 1 < n {
            format!(
                "  %y = invoke @f{}(%x) :: f64\n  %r = call add(%y, 1.0) :: f64\n",
                i + 1
            )
        } else {
            "  %r = call add(%x, 1.0) :: f64\n".to_string()
        };
        src.push_str(&format!(
            "func @f{i}(%x: f64) -> f64 {{\n#1:\n{body}  return %r\n}}\n\n"
        ));
    }
    src
}

/// Calls whose results are the callees' arguments (`@id`), used as the
/// arguments of later calls, callees of several returns (a phi), and names
/// the caller has too: inlined one after another into one copy, as code
/// generation inlines them.
const MANY_SITES: &str = "func @id(%x: f64) -> f64 {
#1:
  return %x
}

func @twice(%x: f64) -> f64 {
#1:
  %a = invoke @id(%x) :: f64
  %b = invoke @id(%a) :: f64
  %y = call add(%a, %b) :: f64
  return %y
}

func @pick(%x: f64) -> f64 {
#1:
  %c = call lt(%x, 0.0) :: bool
  gotoifnot %c, #3
#2:
  %y = call neg(%x) :: f64
  return %y
#3:
  return %x
}

func @f(%x: f64) -> f64 {
#1:
  %a = invoke @id(%x) :: f64
  %b = invoke @id(%a) :: f64
  %y = invoke @twice(%b) :: f64
  %c = call sub(%y, 5.0) :: f64
  %p = invoke @pick(%c) :: f64
  %q = invoke @id(%p) :: f64
  %y_1 = invoke @twice(%q) :: f64
  %r = call mul(%y_1, %a) :: f64
  return %r
}
";

#[test]
fn many_calls_inlined_into_one_copy_keep_its_values_names_and_results() {
    let m = parse(MANY_SITES);
    let f = m.by_name("f").unwrap_or_else(|| unreachable!());
    let recursive = pe::recursive_functions(&m);
    let out = pe::inline_for_codegen(&m, f, &recursive, &Limits::default(), &|_| true);
    let Some(out) = out else {
        return assert!(out.is_some(), "nothing inlined");
    };
    // Ten calls: six in `@f`, two in each of the two copies of `@twice`.
    assert_eq!(out.calls.len(), 10, "{:?}", out.calls);
    let mut inlined = m.clone();
    inlined[f] = out.func;
    assert!(
        verify_module(&inlined).is_ok(),
        "{:?}",
        verify_module(&inlined)
    );
    let text = print_func(&inlined, f);
    assert!(!text.contains("invoke"), "{text}");
    // The results of `@id` calls chained through one another are gone: the
    // first multiplication reads the parameter itself.
    assert!(!text.contains("%a ="), "{text}");
    // It prints and parses back as the same function (no two values share
    // a name, no two blocks a label).
    let again = parse(&irad_ir::text::print_module(&inlined));
    assert_eq!(print_func(&again, f), text);
    for x in [-3.0, 0.0, 1.5, 2.5, 7.0] {
        let want = run(&m, f, &[Val::F64(x)], &RunOptions::default());
        let got = run(&inlined, f, &[Val::F64(x)], &RunOptions::default());
        assert!(matches!(want, Ok(Val::F64(_))), "{want:?}");
        assert_eq!(format!("{want:?}"), format!("{got:?}"), "at {x}");
    }
}

#[test]
fn deep_call_chains_are_inlined_within_the_size_limit() {
    let n = 600;
    let m = parse(&call_chain(n));
    let f0 = m.by_name("f0").unwrap_or_else(|| unreachable!());
    let want = run(&m, f0, &[Val::F64(0.0)], &RunOptions::default());
    let limits = Limits {
        max_func_size: 500,
        ..Limits::default()
    };
    let mut inlined = m.clone();
    assert!(pe::inline_into(&mut inlined, f0, &limits));
    assert!(verify_module(&inlined).is_ok());
    assert!(pe::func_size(&inlined[f0]) <= 500);
    let got = run(&inlined, f0, &[Val::F64(0.0)], &RunOptions::default());
    assert_eq!(format!("{want:?}"), format!("{got:?}"));

    // Specialising inlines the whole chain (the default size limit allows it)
    // and still verifies.
    let mut spec_m = m.clone();
    let spec = pe::specialise(&mut spec_m, f0, &[Known::Unknown]);
    let Ok(spec) = spec else {
        return assert!(spec.is_ok(), "{spec:?}");
    };
    let text = print_func(&spec_m, spec);
    assert!(!text.contains("invoke"), "{text}");
    let got = run(&spec_m, spec, &[Val::F64(0.0)], &RunOptions::default());
    assert_eq!(format!("{want:?}"), format!("{got:?}"));
}

#[test]
fn running_out_of_fuel_is_an_error() {
    let mut m = parse(&call_chain(3));
    let f0 = m.by_name("f0").unwrap_or_else(|| unreachable!());
    let limits = Limits {
        fuel: 1,
        ..Limits::default()
    };
    let err = pe::specialise_with(&mut m, f0, &[Known::Unknown], &limits);
    let msg = err.map(|_| String::new()).unwrap_or_else(|e| e.to_string());
    assert!(msg.contains("did not settle within 1 rounds"), "{msg}");
}

#[test]
fn known_arguments_must_fit() {
    let mut m = parse(
        "func @f(%x: f64, %a: [f64], %g: fn(f64) -> f64) -> f64 {\n#1:\n  %y = call %g(%x) :: f64\n  return %y\n}\n",
    );
    let f = m.by_name("f").unwrap_or_else(|| unreachable!());
    let sin = Val::Func(FuncRef::Prim(irad_ir::Prim::Sin));
    let cases: Vec<(Vec<Known>, &str)> = vec![
        (vec![Known::Unknown], "takes 3 arguments, but 1 are given"),
        (
            vec![Known::Value(Val::I64(1)), Known::Unknown, Known::Unknown],
            "argument 1 of @f must be f64, found i64",
        ),
        (
            vec![Known::Length(3), Known::Unknown, Known::Unknown],
            "not an array",
        ),
        (
            vec![
                Known::Unknown,
                Known::Value(Val::f64_array(vec![1.0])),
                Known::Unknown,
            ],
            "only f64, i64, bool",
        ),
        (
            vec![Known::Unknown, Known::Length(1 << 40), Known::Unknown],
            "exceeds the array limit",
        ),
    ];
    for (known, want) in cases {
        let err = pe::specialise(&mut m, f, &known);
        let msg = err.map(|_| String::new()).unwrap_or_else(|e| e.to_string());
        assert!(msg.contains(want) && msg.contains("in @f"), "{msg}");
    }
    let ok = pe::specialise(
        &mut m,
        f,
        &[Known::Unknown, Known::Length(2), Known::Value(sin)],
    );
    let Ok(spec) = ok else {
        return assert!(ok.is_ok(), "{ok:?}");
    };
    assert_eq!(m[spec].name, "f.spec");
    assert!(print_func(&m, spec).contains("call sin(%x)"));
    // The name is taken now: the next one is numbered.
    assert_eq!(pe::specialise_name(&m, "f"), "f.spec.2");
}
