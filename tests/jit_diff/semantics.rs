//! Semantic edge cases, bit for bit: every primitive on special values
//! (signed zeros, halves, subnormals, infinities, NaN, i64 extremes), the
//! documented results of SYNTAX.md §1 (min/max, rounding, pow, powi, integer
//! division and wrapping, conversions), bool and i64 arrays, copies, arrays
//! in tuples, results that alias arguments, function values as results and
//! arguments, and deep recursion on a test thread's stack.

use super::*;

const F64_UNARY: &[&str] = &[
    "neg", "abs", "sqrt", "exp", "log", "log1p", "expm1", "sin", "cos", "tan", "asin", "acos",
    "atan", "sinh", "cosh", "tanh", "erf", "floor", "ceil", "round",
];
const F64_BINARY: &[&str] = &[
    "add", "sub", "mul", "div", "pow", "atan2", "min", "max", "copysign", "zmul",
];
const F64_COMPARE: &[&str] = &["lt", "le", "gt", "ge", "eq", "ne"];
const I64_BINARY: &[&str] = &["iadd", "isub", "imul", "idiv", "irem"];

/// A module with one function per primitive: `@u_sin(%x)`, `@b_min(%a, %b)`,
/// `@c_lt(%a, %b)` (f64 comparisons), `@i_idiv`, `@ic_lt` (i64
/// comparisons), and the conversions, `powi`, `ineg` and the bool operators.
fn prims_ir() -> String {
    let mut s = String::new();
    let mut def = |name: String, params: &str, ret: &str, body: String| {
        s.push_str(&format!(
            "func @{name}({params}) -> {ret} {{\n#1:\n  %r = call {body} :: {ret}\n  return %r\n}}\n\n"
        ));
    };
    for p in F64_UNARY {
        def(format!("u_{p}"), "%x: f64", "f64", format!("{p}(%x)"));
    }
    for p in F64_BINARY {
        def(
            format!("b_{p}"),
            "%a: f64, %b: f64",
            "f64",
            format!("{p}(%a, %b)"),
        );
    }
    for p in F64_COMPARE {
        def(
            format!("c_{p}"),
            "%a: f64, %b: f64",
            "bool",
            format!("{p}(%a, %b)"),
        );
        def(
            format!("ic_{p}"),
            "%a: i64, %b: i64",
            "bool",
            format!("{p}(%a, %b)"),
        );
    }
    for p in I64_BINARY {
        def(
            format!("i_{p}"),
            "%a: i64, %b: i64",
            "i64",
            format!("{p}(%a, %b)"),
        );
    }
    for p in ["and", "or", "eq", "ne"] {
        def(
            format!("l_{p}"),
            "%a: bool, %b: bool",
            "bool",
            format!("{p}(%a, %b)"),
        );
    }
    def("l_not".into(), "%a: bool", "bool", "not(%a)".into());
    def("ineg".into(), "%a: i64", "i64", "ineg(%a)".into());
    def("sitofp".into(), "%a: i64", "f64", "sitofp(%a)".into());
    def("fptosi".into(), "%x: f64", "i64", "fptosi(%x)".into());
    def(
        "powi".into(),
        "%x: f64, %n: i64",
        "f64",
        "powi(%x, %n)".into(),
    );
    def(
        "select".into(),
        "%c: bool, %a: f64, %b: f64",
        "f64",
        "select(%c, %a, %b)".into(),
    );
    // Primitives called through function values (compiled as wrappers).
    for (name, params, ret, call) in [
        ("v_f", "%g: fn(f64) -> f64, %x: f64", "f64", "%g(%x)"),
        (
            "v_ff",
            "%g: fn(f64, f64) -> f64, %a: f64, %b: f64",
            "f64",
            "%g(%a, %b)",
        ),
        (
            "v_fi",
            "%g: fn(f64, i64) -> f64, %a: f64, %b: i64",
            "f64",
            "%g(%a, %b)",
        ),
        (
            "v_ii",
            "%g: fn(i64, i64) -> i64, %a: i64, %b: i64",
            "i64",
            "%g(%a, %b)",
        ),
        ("v_i", "%g: fn(i64) -> i64, %a: i64", "i64", "%g(%a)"),
        ("v_to_f", "%g: fn(i64) -> f64, %a: i64", "f64", "%g(%a)"),
        ("v_to_i", "%g: fn(f64) -> i64, %x: f64", "i64", "%g(%x)"),
    ] {
        def(name.into(), params, ret, call.into());
    }
    s
}

/// A primitive as a function value.
fn prim(name: &str) -> Val {
    Val::Func(FuncRef::Prim(
        Prim::from_name(name).unwrap_or_else(|| panic!("no primitive {name}")),
    ))
}

/// Special f64s: signed zeros, halves, the smallest subnormal, big and
/// non-finite values, values just off integers.
const SPECIAL: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    -0.5,
    2.5,
    -2.5,
    1.5,
    -1.5,
    0.49999999999999994,
    -0.49999999999999994,
    4503599627370497.0,
    -4503599627370497.0,
    5e-324,
    -5e-324,
    1e-300,
    1e300,
    -1e300,
    710.0,
    -745.5,
    3.0,
    -3.0,
    0.1,
    std::f64::consts::PI,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
];

/// Special i64s: small values of both signs, the extremes, and values that
/// f64 cannot hold exactly.
const SPECIAL_I64: &[i64] = &[
    0,
    1,
    -1,
    2,
    -2,
    7,
    -7,
    3,
    i64::MAX,
    i64::MIN,
    i64::MIN + 1,
    (1 << 53) + 1,
    -(1 << 53) - 1,
    1 << 62,
];

/// Runs `calls` (function name, arguments) with one interpreter and one JIT
/// for `m`, asserting they agree; returns the interpreter's outcomes.
fn sweep(m: &Module, calls: &[(String, Vec<Val>)]) -> Vec<Result<Val, RunError>> {
    let mut interp = Interpreter::new(m);
    let mut jit = Jit::new(m).expect("a JIT");
    let opts = RunOptions::default();
    calls
        .iter()
        .map(|(name, args)| {
            let f = func(m, name);
            let want = interp.run(f, args, &opts);
            let got = jit.run(f, args, &opts);
            let shown: Vec<String> = args.iter().map(|a| show(a, m)).collect();
            assert_same_outcome(&format!("@{name}({})", shown.join(", ")), m, &want, &got);
            want
        })
        .collect()
}

#[test]
fn every_primitive_agrees_on_special_values() {
    use Val::{Bool, F64, I64};
    let m = ir(&prims_ir());
    let mut calls = Vec::new();
    for p in F64_UNARY {
        for &x in SPECIAL {
            calls.push((format!("u_{p}"), vec![F64(x)]));
        }
        calls.push((format!("u_{p}"), vec![F64(-f64::NAN)]));
    }
    for p in F64_BINARY.iter().chain(F64_COMPARE) {
        let prefix = if F64_COMPARE.contains(p) { "c" } else { "b" };
        for &a in SPECIAL {
            for &b in SPECIAL {
                calls.push((format!("{prefix}_{p}"), vec![F64(a), F64(b)]));
            }
        }
    }
    for &x in SPECIAL {
        for &n in SPECIAL_I64.iter().chain(&[-3, 3, 1023, -1074, 1024, -1075]) {
            calls.push(("powi".into(), vec![F64(x), I64(n)]));
        }
        calls.push(("fptosi".into(), vec![F64(x)]));
        for c in [true, false] {
            calls.push(("select".into(), vec![Bool(c), F64(x), F64(-x)]));
        }
    }
    for p in I64_BINARY {
        for &a in SPECIAL_I64 {
            for &b in SPECIAL_I64 {
                calls.push((format!("i_{p}"), vec![I64(a), I64(b)]));
            }
        }
    }
    for p in F64_COMPARE {
        for &a in SPECIAL_I64 {
            for &b in &SPECIAL_I64[..6] {
                calls.push((format!("ic_{p}"), vec![I64(a), I64(b)]));
            }
        }
    }
    for &a in SPECIAL_I64 {
        calls.push(("ineg".into(), vec![I64(a)]));
        calls.push(("sitofp".into(), vec![I64(a)]));
    }
    for p in ["and", "or", "eq", "ne"] {
        for (a, b) in [(false, false), (false, true), (true, false), (true, true)] {
            calls.push((format!("l_{p}"), vec![Bool(a), Bool(b)]));
        }
    }
    calls.push(("l_not".into(), vec![Bool(true)]));
    calls.push(("l_not".into(), vec![Bool(false)]));
    let outcomes = sweep(&m, &calls);
    assert!(outcomes.len() > 8000, "{} calls", outcomes.len());
    // idiv and irem by zero (14 each), idiv(i64::MIN, -1), and fptosi of
    // NaN, of the infinities and of +-1e300 fail; everything else returns.
    let errors = outcomes.iter().filter(|r| r.is_err()).count();
    assert_eq!(errors, 34);
}

/// Compiled code computes `exp` inline (codegen's `exp_inline`) with the
/// kernel's operations; the interpreter calls the kernel. Every branch of
/// the kernel, bit for bit: the whole range, near 0, results near overflow
/// (2^1024 scaled in two steps), the last normal results and the subnormal
/// ones (k div 128 = -1022 with y below and above 1), the thresholds, and
/// the values outside.
#[test]
fn exp_inline_agrees_with_the_kernel_everywhere() {
    use Val::F64;
    let m = ir(&prims_ir());
    let mut xs: Vec<f64> = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        1e-300,
        -1e-300,
        5e-324,
        709.782712893384,
        f64::from_bits(709.782712893384f64.to_bits() + 1),
        709.7,
        709.78,
        -745.1332191019411,
        -745.1332191019412,
        -744.4400719213812,
        -746.0,
        f64::from_bits((-746.0f64).to_bits() - 1),
        -708.3964185322641,
        -708.4,
        -707.0,
        1000.0,
        -1000.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        -f64::NAN,
        f64::MAX,
        f64::MIN,
    ];
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for i in 0..6000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let u = (seed >> 11) as f64 / (1u64 << 53) as f64;
        xs.push(match i % 6 {
            0 => -746.0 + u * 1456.0,
            1 => (u - 0.5) * 40.0,
            2 => (u - 0.5) * 1e-6,
            3 => -745.2 + u * 38.0,
            4 => 705.0 + u * 5.0,
            // Around -1022 ln 2, where k div 128 is -1022 and y straddles 1.
            _ => -708.4 + u * 0.02,
        });
    }
    let calls: Vec<_> = xs
        .iter()
        .map(|&x| ("u_exp".to_string(), vec![F64(x)]))
        .collect();
    let outcomes = sweep(&m, &calls);
    assert_eq!(outcomes.len(), xs.len());
    assert!(outcomes.iter().all(|r| r.is_ok()));
}

/// `powi` with a constant exponent of -1, 0, 1 or 2, and `pow` with one
/// of those as an f64 constant, compile to no call (1 / x, 1, x, x * x: the
/// libm crate's `pow` special cases); the interpreter calls `pow`. Bit for
/// bit on the special values.
#[test]
fn powi_by_a_small_constant_agrees_with_pow() {
    use Val::F64;
    let mut text = String::new();
    for n in -2..=3 {
        let name = format!("p{}", n + 2);
        text.push_str(&format!(
            "func @{name}(%x: f64) -> f64 {{\n#1:\n  %r = call powi(%x, {n}) :: f64\n  return %r\n}}\n\n"
        ));
    }
    // And `pow` with those exponents as f64 constants (as powi's rules
    // write them), -0.0 and 0.5 among them.
    let ys = ["-1.0", "-0.0", "0.0", "1.0", "2.0", "3.0", "0.5"];
    for (i, y) in ys.iter().enumerate() {
        text.push_str(&format!(
            "func @q{i}(%x: f64) -> f64 {{\n#1:\n  %r = call pow(%x, {y}) :: f64\n  return %r\n}}\n\n"
        ));
    }
    let m = ir(&text);
    let mut calls = Vec::new();
    let names = (0..6)
        .map(|n| format!("p{n}"))
        .chain((0..ys.len()).map(|i| format!("q{i}")));
    for name in names {
        for &x in SPECIAL.iter().chain(&[-f64::NAN, 0.1, -3.7, 1e200, 1e-200]) {
            calls.push((name.clone(), vec![F64(x)]));
        }
    }
    let outcomes = sweep(&m, &calls);
    assert!(outcomes.iter().all(|r| r.is_ok()));
}

/// Compiled code computes `log` inline (codegen's `log_inline`) with the
/// kernel's operations; the interpreter calls the kernel. Bit for bit, and
/// equal to `irad_kernels::math::log` itself: every normal binade, near 1
/// and the reduction interval around it, the edges of the table's
/// intervals, subnormals (the cold block's way back into the main path),
/// the largest doubles, and every special value (zeros, negatives,
/// infinities, NaN of either sign).
#[test]
fn log_inline_agrees_with_the_kernel_everywhere() {
    use Val::F64;
    use irad::codegen::runtime::math::LOG_OFF;
    let m = ir(&prims_ir());
    let mut xs: Vec<f64> = SPECIAL.to_vec();
    xs.extend([
        -f64::NAN,
        f64::MAX,
        f64::MIN_POSITIVE,
        f64::from_bits(f64::MIN_POSITIVE.to_bits() - 1),
        5e-324,
        1e-310,
        -5e-324,
        -1e-310,
        f64::MIN,
        1.0 - f64::EPSILON / 2.0,
        1.0 + f64::EPSILON,
        1.0 - 1.0 / 1024.0,
        1.0 + 1.0 / 512.0,
        std::f64::consts::E,
        2.0,
        f64::from_bits(LOG_OFF),
        f64::from_bits(LOG_OFF - 1),
    ]);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for i in 0..8000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let u = (seed >> 11) as f64 / (1u64 << 53) as f64;
        xs.push(match i % 8 {
            // Any bits with the sign clear: every binade, subnormals,
            // infinity and NaNs.
            0 => f64::from_bits(seed >> 1),
            1 => 0.5 + u * 1.5,
            2 => 1.0 + (u - 0.5) * 1e-3,
            3 => 1.0 + (u - 0.5) * 1e-12,
            // The edges of the 256 intervals (bits LOG_OFF + i 2^44).
            4 => f64::from_bits(LOG_OFF + ((seed % 257) << 44) - 8 + (seed >> 60)),
            5 => f64::from_bits(seed >> 12),
            6 => f64::MAX * (1.0 - u * 1e-3),
            _ => -f64::from_bits(seed >> 1),
        });
    }
    let calls: Vec<_> = xs
        .iter()
        .map(|&x| ("u_log".to_string(), vec![F64(x)]))
        .collect();
    let outcomes = sweep(&m, &calls);
    assert_eq!(outcomes.len(), xs.len());
    for (x, got) in xs.iter().zip(&outcomes) {
        let want = irad::codegen::runtime::math::log(*x);
        match got {
            Ok(F64(y)) => assert!(
                y.to_bits() == want.to_bits() || (y.is_nan() && want.is_nan()),
                "log({x:e}): {y:e} against the kernel's {want:e}"
            ),
            other => panic!("log({x:e}): {other:?}"),
        }
    }
}

#[test]
fn primitives_called_through_values_agree_on_special_values() {
    use Val::{F64, I64};
    let m = ir(&prims_ir());
    let mut calls = Vec::new();
    for p in F64_UNARY {
        for &x in SPECIAL {
            calls.push(("v_f".to_string(), vec![prim(p), F64(x)]));
        }
    }
    for p in F64_BINARY {
        for &a in SPECIAL {
            for &b in &SPECIAL[..8] {
                calls.push(("v_ff".to_string(), vec![prim(p), F64(a), F64(b)]));
                calls.push(("v_ff".to_string(), vec![prim(p), F64(b), F64(a)]));
            }
        }
    }
    for &x in SPECIAL {
        for &n in &SPECIAL_I64[..10] {
            calls.push(("v_fi".to_string(), vec![prim("powi"), F64(x), I64(n)]));
        }
        calls.push(("v_to_i".to_string(), vec![prim("fptosi"), F64(x)]));
    }
    for p in I64_BINARY {
        for &a in SPECIAL_I64 {
            for &b in &SPECIAL_I64[..6] {
                calls.push(("v_ii".to_string(), vec![prim(p), I64(a), I64(b)]));
            }
        }
    }
    for &a in SPECIAL_I64 {
        calls.push(("v_i".to_string(), vec![prim("ineg"), I64(a)]));
        calls.push(("v_to_f".to_string(), vec![prim("sitofp"), I64(a)]));
    }
    let outcomes = sweep(&m, &calls);
    // Through a value as when called directly: idiv and irem by zero (14
    // each), idiv(i64::MIN, -1), fptosi of NaN, +-inf and +-1e300.
    let errors: Vec<&RunError> = outcomes.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(errors.len(), 34);
    // Located at the call through the value, in the caller.
    assert!(
        errors
            .iter()
            .all(|e| e.loc.func.as_deref().is_some_and(|f| f.starts_with("v_")))
    );
}

/// The documented results (SYNTAX.md §1) hold in both backends.
#[test]
fn documented_edge_cases_hold_in_both_backends() {
    let m = ir(&prims_ir());
    let cases: &[(&str, &str, &str)] = &[
        // min and max: NaN wins, -0.0 is below 0.0 whatever the order.
        ("b_min", "-0.0, 0.0", "-0.0"),
        ("b_min", "0.0, -0.0", "-0.0"),
        ("b_max", "-0.0, 0.0", "0.0"),
        ("b_max", "0.0, -0.0", "0.0"),
        ("b_min", "nan, 1.0", "nan"),
        ("b_min", "1.0, nan", "nan"),
        ("b_max", "nan, -inf", "nan"),
        ("b_max", "inf, nan", "nan"),
        ("b_min", "-inf, 1e300", "-inf"),
        // round half away from zero.
        ("u_round", "2.5", "3.0"),
        ("u_round", "-2.5", "-3.0"),
        ("u_round", "0.5", "1.0"),
        ("u_round", "-0.5", "-1.0"),
        ("u_round", "0.49999999999999994", "0.0"),
        ("u_round", "-0.49999999999999994", "-0.0"),
        ("u_round", "-0.0", "-0.0"),
        ("u_round", "4503599627370497.0", "4503599627370497.0"),
        ("u_floor", "-0.5", "-1.0"),
        ("u_ceil", "-0.5", "-0.0"),
        // copysign takes the sign bit, also of zeros.
        ("b_copysign", "1.0, -0.0", "-1.0"),
        ("b_copysign", "-2.0, 0.0", "2.0"),
        ("b_copysign", "inf, -1.0", "-inf"),
        // IEEE outside the domain, not errors.
        ("u_sqrt", "-1.0", "nan"),
        ("u_sqrt", "-0.0", "-0.0"),
        ("u_log", "-1.0", "nan"),
        ("u_log", "0.0", "-inf"),
        ("u_asin", "2.0", "nan"),
        ("b_div", "1.0, -0.0", "-inf"),
        ("b_div", "0.0, 0.0", "nan"),
        // pow
        ("b_pow", "0.0, -1.0", "inf"),
        ("b_pow", "-0.0, -1.0", "-inf"),
        ("b_pow", "-8.0, 0.3333333333333333", "nan"),
        ("b_pow", "nan, 0.0", "1.0"),
        ("b_pow", "1.0, nan", "1.0"),
        ("b_pow", "-1.0, inf", "1.0"),
        ("b_pow", "2.0, 0.5", "1.4142135623730951"),
        ("b_pow", "-2.0, 3.0", "-8.0"),
        // powi(x, n) is pow(x, n as f64), negative n too.
        ("powi", "2.0, -3", "0.125"),
        ("powi", "-2.0, -3", "-0.125"),
        ("powi", "0.0, -1", "inf"),
        ("powi", "-0.0, -1", "-inf"),
        ("powi", "-0.0, -2", "inf"),
        ("powi", "2.0, -9223372036854775808", "0.0"),
        ("powi", "10.0, -2", "0.01"),
        ("powi", "nan, 0", "1.0"),
        // Integer division truncates toward zero; only idiv overflows.
        ("i_idiv", "-7, 2", "-3"),
        ("i_idiv", "7, -2", "-3"),
        ("i_idiv", "-7, -2", "3"),
        ("i_irem", "-7, 2", "-1"),
        ("i_irem", "7, -2", "1"),
        ("i_irem", "-9223372036854775808, -1", "0"),
        ("i_irem", "9223372036854775807, -1", "0"),
        ("i_idiv", "-9223372036854775808, 1", "-9223372036854775808"),
        ("i_idiv", "9223372036854775807, -1", "-9223372036854775807"),
        // Wrapping arithmetic.
        ("i_iadd", "9223372036854775807, 1", "-9223372036854775808"),
        ("i_isub", "-9223372036854775808, 1", "9223372036854775807"),
        ("i_imul", "9223372036854775807, 2", "-2"),
        ("i_imul", "4611686018427387904, 4", "0"),
        ("ineg", "-9223372036854775808", "-9223372036854775808"),
        // Conversions: sitofp rounds to nearest even, fptosi truncates.
        ("sitofp", "9223372036854775807", "9223372036854775808.0"),
        ("sitofp", "9007199254740993", "9007199254740992.0"),
        ("sitofp", "-9007199254740993", "-9007199254740992.0"),
        ("sitofp", "9007199254740995", "9007199254740996.0"),
        ("fptosi", "-1.9", "-1"),
        ("fptosi", "1.9", "1"),
        ("fptosi", "-0.0", "0"),
        ("fptosi", "5e-324", "0"),
        ("fptosi", "-9223372036854775808.0", "-9223372036854775808"),
        ("fptosi", "9223372036854774784.0", "9223372036854774784"),
        // Comparisons are IEEE; eq and ne also compare bools.
        ("c_lt", "nan, 1.0", "false"),
        ("c_ge", "nan, nan", "false"),
        ("c_eq", "nan, nan", "false"),
        ("c_ne", "nan, nan", "true"),
        ("c_eq", "-0.0, 0.0", "true"),
        ("c_lt", "-0.0, 0.0", "false"),
        ("l_eq", "true, true", "true"),
        ("l_ne", "true, false", "true"),
        ("ic_lt", "-9223372036854775808, 9223372036854775807", "true"),
        ("select", "true, nan, 1.0", "nan"),
        ("select", "false, nan, -0.0", "-0.0"),
    ];
    let calls: Vec<(String, Vec<Val>)> = cases
        .iter()
        .map(|(name, args, _)| {
            let f = func(&m, name);
            (name.to_string(), args_of(&m, f, args))
        })
        .collect();
    let outcomes = sweep(&m, &calls);
    for ((name, args, want), got) in cases.iter().zip(&outcomes) {
        let f = func(&m, name);
        let want = parse_value(want, &m[f].ret, &m).expect("expected value parses");
        let got = got
            .as_ref()
            .unwrap_or_else(|e| panic!("@{name}({args}): {e}"));
        assert!(
            identical(got, &want),
            "@{name}({args}) = {}, documented {}",
            show(got, &m),
            show(&want, &m)
        );
    }
    // The comparison itself tells NaN from numbers and -0.0 from 0.0.
    assert!(!identical(&Val::F64(f64::NAN), &Val::F64(0.0)));
    assert!(!identical(&Val::F64(-0.0), &Val::F64(0.0)));
}

const ARRAYS_IR: &str = r"
# Negates a bool array into a new one, sets the argument to all true, and
# returns the new array, a copy with element 0 set, and the length.
func @bools(%src: [bool]) -> ([bool], [bool], i64) {
#0:
  %n = call length(%src) :: i64
  %a = call alloc(%n) :: [bool]
  goto #1
#1:
  %i = phi [#0 => 0, #2 => %i1] :: i64
  %more = call lt(%i, %n) :: bool
  gotoifnot %more, #3
#2:
  %s = call arrayref(%src, %i) :: bool
  %ns = call not(%s) :: bool
  call arrayset(%a, %i, %ns)
  call arrayset(%src, %i, true)
  %i1 = call iadd(%i, 1) :: i64
  goto #1
#3:
  %c = call copy(%a) :: [bool]
  call arrayset(%c, 0, true)
  %t = call tuple(%a, %c, %n) :: ([bool], [bool], i64)
  return %t
}

# Squares an i64 array in place (wrapping) and returns its running products.
func @ints(%src: [i64]) -> [i64] {
#0:
  %n = call length(%src) :: i64
  %out = call alloc(%n) :: [i64]
  goto #1
#1:
  %i = phi [#0 => 0, #2 => %i1] :: i64
  %p = phi [#0 => 1, #2 => %p1] :: i64
  %more = call lt(%i, %n) :: bool
  gotoifnot %more, #3
#2:
  %x = call arrayref(%src, %i) :: i64
  %x2 = call imul(%x, %x) :: i64
  call arrayset(%src, %i, %x2)
  %p1 = call imul(%p, %x) :: i64
  call arrayset(%out, %i, %p1)
  %i1 = call iadd(%i, 1) :: i64
  goto #1
#3:
  return %out
}

# Writes into its argument and returns it: the caller's array, not a copy.
func @scale(%a: [f64], %k: f64) -> [f64] {
#0:
  %x = call arrayref(%a, 0) :: f64
  %y = call mul(%x, %k) :: f64
  call arrayset(%a, 0, %y)
  return %a
}

# Returns the second of its arrays, inside a tuple with a fresh one.
func @second(%t: ([f64], f64), %b: [f64]) -> ([f64], [f64], f64) {
#0:
  %a = call getfield(%t, 0) :: [f64]
  %x = call getfield(%t, 1) :: f64
  call arrayset(%a, 0, %x)
  %c = call copy(%a) :: [f64]
  %r = call tuple(%b, %c, %x) :: ([f64], [f64], f64)
  return %r
}

# The same fresh array twice in the result.
func @twice(%n: i64) -> ([f64], [f64]) {
#0:
  %a = call zeros(%n) :: [f64]
  %r = call tuple(%a, %a) :: ([f64], [f64])
  return %r
}

# The second of two arrays.
func @pick(%a: [f64], %b: [f64]) -> [f64] {
#0:
  return %b
}

# One array passed twice: a write through one name is seen through the other.
func @alias(%a: [f64], %b: [f64]) -> f64 {
#0:
  call arrayset(%a, 0, 5.0)
  %x = call arrayref(%b, 0) :: f64
  return %x
}

# Tuples holding arrays, i64s and bools through a loop-carried phi.
func @rotate(%t: ([i64], bool, f64), %k: i64) -> ([i64], bool, f64) {
#0:
  goto #1
#1:
  %i = phi [#0 => 0, #2 => %i1] :: i64
  %u = phi [#0 => %t, #2 => %u1] :: ([i64], bool, f64)
  %more = call lt(%i, %k) :: bool
  gotoifnot %more, #3
#2:
  %a = call getfield(%u, 0) :: [i64]
  %b = call getfield(%u, 1) :: bool
  %x = call getfield(%u, 2) :: f64
  %nb = call not(%b) :: bool
  %nx = call mul(%x, -0.5) :: f64
  call arrayset(%a, %i, %i)
  %u1 = call tuple(%a, %nb, %nx) :: ([i64], bool, f64)
  %i1 = call iadd(%i, 1) :: i64
  goto #1
#3:
  return %u
}
";

/// A new `[bool]` array.
fn bools(xs: &[bool]) -> Val {
    Val::Array(ArrayRef::new(ArrayData::Bool(xs.to_vec())))
}

/// A new `[i64]` array.
fn ints(xs: &[i64]) -> Val {
    Val::Array(ArrayRef::new(ArrayData::I64(xs.to_vec())))
}

#[test]
fn bool_and_i64_arrays_copies_and_tuples_agree() {
    let m = ir(ARRAYS_IR);
    let big = i64::MAX / 3;
    let calls = [
        ("bools", vec![bools(&[true, false, false])]),
        ("bools", vec![bools(&[false])]),
        ("ints", vec![ints(&[3, -4, big, 5])]),
        ("ints", vec![ints(&[])]),
        (
            "rotate",
            vec![
                Val::Tuple(Rc::from(vec![
                    ints(&[9, 9, 9, 9]),
                    Val::Bool(true),
                    Val::F64(3.0),
                ])),
                Val::I64(3),
            ],
        ),
        ("twice", vec![Val::I64(2)]),
    ];
    for (name, args) in &calls {
        let f = func(&m, name);
        let res = check_run(&format!("@{name}"), &m, f, args, &RunOptions::default());
        assert!(res.is_ok(), "@{name}: {res:?}");
    }
    // The documented results, from the JIT.
    let f = func(&m, "bools");
    let src = bools(&[true, false, false]);
    let r = Jit::new(&m)
        .expect("a JIT")
        .run(f, std::slice::from_ref(&src), &RunOptions::default())
        .expect("runs");
    let want = parse_value(
        "([false, true, true], [true, true, true], 3)",
        &m[f].ret,
        &m,
    )
    .expect("parses");
    assert!(identical(&r, &want), "{}", show(&r, &m));
    assert!(identical(&src, &bools(&[true, true, true])));
    let f = func(&m, "ints");
    let src = ints(&[3, -4, big, 5]);
    let r = Jit::new(&m)
        .expect("a JIT")
        .run(f, std::slice::from_ref(&src), &RunOptions::default())
        .expect("runs");
    assert!(identical(
        &r,
        &ints(&[
            3,
            -12,
            (-12i64).wrapping_mul(big),
            (-12i64).wrapping_mul(big).wrapping_mul(5)
        ])
    ));
    assert!(identical(&src, &ints(&[9, 16, big.wrapping_mul(big), 25])));
}

/// Whether `a` and `b` are the same array: a write into element 0 of `a`
/// is seen through `b` (the write is undone afterwards).
fn same_array(a: &ArrayRef, b: &ArrayRef) -> bool {
    const PROBE: f64 = 12345.0;
    let old = match &mut *a.0.borrow_mut() {
        ArrayData::F64(xs) if !xs.is_empty() => std::mem::replace(&mut xs[0], PROBE),
        other => panic!("not a non-empty [f64] array: {other:?}"),
    };
    let seen = matches!(&*b.0.borrow(), ArrayData::F64(xs) if xs.first() == Some(&PROBE));
    if let ArrayData::F64(xs) = &mut *a.0.borrow_mut() {
        xs[0] = old;
    }
    seen
}

#[test]
fn array_results_alias_the_arguments_they_came_from() {
    let m = ir(ARRAYS_IR);
    let opts = RunOptions::default();
    for backend in [Backend::Interp, Backend::Jit] {
        // A result that is an argument is the caller's array.
        let f = func(&m, "scale");
        let a = f64s(&[2.0, 7.0]);
        let r = run_on(backend, &m, f, &[a.clone(), Val::F64(3.0)], &opts).expect("runs");
        assert!(identical(&a, &f64s(&[6.0, 7.0])), "{backend:?}");
        assert!(
            same_array(array_ref(&r), array_ref(&a)),
            "{backend:?}: @scale returned a copy"
        );

        // Inside a tuple too; a copy made inside is a new array.
        let f = func(&m, "second");
        let a = f64s(&[0.0, 1.0]);
        let b = f64s(&[4.0]);
        let t = Val::Tuple(Rc::from(vec![a.clone(), Val::F64(-2.0)]));
        let r = run_on(backend, &m, f, &[t, b.clone()], &opts).expect("runs");
        assert!(identical(&a, &f64s(&[-2.0, 1.0])), "{backend:?}");
        assert!(
            same_array(array_ref(field(&r, 0)), array_ref(&b)),
            "{backend:?}"
        );
        assert!(
            !same_array(array_ref(field(&r, 1)), array_ref(&a)),
            "{backend:?}: the copy is the argument"
        );
        assert!(identical(field(&r, 1), &f64s(&[-2.0, 1.0])), "{backend:?}");

        // One fresh array twice in a result is one array.
        let f = func(&m, "twice");
        let r = run_on(backend, &m, f, &[Val::I64(1)], &opts).expect("runs");
        assert!(
            same_array(array_ref(field(&r, 0)), array_ref(field(&r, 1))),
            "{backend:?}: @twice returned two different arrays"
        );

        // Empty arrays have no elements to tell them apart by, but a result
        // is still the very argument it came from.
        let f = func(&m, "pick");
        for (a, b) in [(f64s(&[]), f64s(&[])), (f64s(&[1.0]), f64s(&[]))] {
            let r = run_on(backend, &m, f, &[a, b.clone()], &opts).expect("runs");
            assert!(
                Rc::ptr_eq(&array_ref(&r).0, &array_ref(&b).0),
                "{backend:?}: @pick returned the other array"
            );
        }

        // One array passed as two arguments.
        let f = func(&m, "alias");
        let a = f64s(&[1.0]);
        let r = run_on(backend, &m, f, &[a.clone(), a.clone()], &opts).expect("runs");
        assert!(
            identical(&r, &Val::F64(5.0)),
            "{backend:?}: {}",
            show(&r, &m)
        );
    }
}

const CALLS_IR: &str = r"
func @sq(%x: f64) -> f64 {
#1:
  %y = call mul(%x, %x) :: f64
  return %y
}

func @choose(%b: bool) -> fn(f64) -> f64 {
#1:
  gotoifnot %b, #3
#2:
  goto #4
#3:
  goto #4
#4:
  %g = phi [#2 => @sin, #3 => @sq] :: fn(f64) -> f64
  return %g
}

func @apply(%g: fn(f64) -> f64, %x: f64) -> f64 {
#1:
  %y = call %g(%x) :: f64
  return %y
}

func @both(%x: f64) -> (fn(f64) -> f64, f64, fn(f64) -> f64) {
#1:
  %s = invoke @choose(true) :: fn(f64) -> f64
  %q = invoke @choose(false) :: fn(f64) -> f64
  %a = invoke @apply(%s, %x) :: f64
  %b = invoke @apply(%q, %a) :: f64
  %t = call tuple(%q, %b, @apply2) :: (fn(f64) -> f64, f64, fn(f64) -> f64)
  return %t
}

func @apply2(%x: f64) -> f64 {
#1:
  %y = invoke @apply(@sq, %x) :: f64
  %z = invoke @apply(@atan, %y) :: f64
  return %z
}

func @countdown(%n: i64) -> i64 {
#0:
  %z = call eq(%n, 0) :: bool
  gotoifnot %z, #2
#1:
  return 0
#2:
  %n1 = call isub(%n, 1) :: i64
  %r = invoke @countdown(%n1) :: i64
  %r1 = call iadd(%r, 1) :: i64
  return %r1
}

# Sixteen values live across the recursive call: a large frame.
func @wide(%n: i64, %x: f64) -> f64 {
#0:
  %z = call le(%n, 0) :: bool
  gotoifnot %z, #2
#1:
  return %x
#2:
  %a1 = call add(%x, 1.0) :: f64
  %a2 = call mul(%x, 2.0) :: f64
  %a3 = call sub(%x, 3.0) :: f64
  %a4 = call add(%a1, %a2) :: f64
  %a5 = call mul(%a3, %a4) :: f64
  %a6 = call sub(%a5, %a1) :: f64
  %a7 = call add(%a6, %a2) :: f64
  %a8 = call mul(%a7, 0.5) :: f64
  %a9 = call add(%a8, %a3) :: f64
  %a10 = call sub(%a9, %a4) :: f64
  %a11 = call mul(%a10, 0.25) :: f64
  %a12 = call add(%a11, %a5) :: f64
  %a13 = call sub(%a12, %a6) :: f64
  %a14 = call mul(%a13, 0.125) :: f64
  %a15 = call add(%a14, %a7) :: f64
  %a16 = call sub(%a15, %a8) :: f64
  %n1 = call isub(%n, 1) :: i64
  %y = call mul(%x, 0.5) :: f64
  %r = invoke @wide(%n1, %y) :: f64
  %s1 = call add(%r, %a1) :: f64
  %s2 = call add(%s1, %a2) :: f64
  %s3 = call add(%s2, %a3) :: f64
  %s4 = call add(%s3, %a4) :: f64
  %s5 = call add(%s4, %a5) :: f64
  %s6 = call add(%s5, %a6) :: f64
  %s7 = call add(%s6, %a7) :: f64
  %s8 = call add(%s7, %a8) :: f64
  %s9 = call add(%s8, %a9) :: f64
  %s10 = call add(%s9, %a10) :: f64
  %s11 = call add(%s10, %a11) :: f64
  %s12 = call add(%s11, %a12) :: f64
  %s13 = call add(%s12, %a13) :: f64
  %s14 = call add(%s13, %a14) :: f64
  %s15 = call add(%s14, %a15) :: f64
  %s16 = call add(%s15, %a16) :: f64
  return %s16
}

# Recursion through a function value.
func @count_by_value(%g: fn(fn(f64) -> f64, f64) -> f64, %n: i64) -> i64 {
#0:
  %z = call le(%n, 0) :: bool
  gotoifnot %z, #2
#1:
  return 0
#2:
  %n1 = call isub(%n, 1) :: i64
  %r = invoke @count_by_value(%g, %n1) :: i64
  %x = call sitofp(%r) :: f64
  %y = call %g(@sq, %x) :: f64
  %r1 = call iadd(%r, 1) :: i64
  return %r1
}
";

#[test]
fn function_values_as_results_and_arguments_agree() {
    let m = ir(CALLS_IR);
    let user = |name: &str| Val::Func(FuncRef::User(func(&m, name)));
    let prim = |p: Prim| Val::Func(FuncRef::Prim(p));
    let calls: Vec<(String, Vec<Val>)> = vec![
        ("choose".into(), vec![Val::Bool(true)]),
        ("choose".into(), vec![Val::Bool(false)]),
        ("apply".into(), vec![prim(Prim::Tanh), Val::F64(0.75)]),
        ("apply".into(), vec![prim(Prim::Erf), Val::F64(-0.3)]),
        ("apply".into(), vec![user("sq"), Val::F64(-1.5)]),
        ("apply".into(), vec![user("apply2"), Val::F64(2.0)]),
        ("both".into(), vec![Val::F64(0.3)]),
        ("count_by_value".into(), vec![user("apply"), Val::I64(20)]),
    ];
    let outcomes = sweep(&m, &calls);
    let got: Vec<Val> = outcomes.into_iter().map(|r| r.expect("runs")).collect();
    assert!(identical(&got[0], &prim(Prim::Sin)));
    assert!(identical(&got[1], &user("sq")));
    assert!(identical(&got[4], &Val::F64(2.25)));
    assert!(identical(field(&got[6], 0), &user("sq")));
    assert!(identical(field(&got[6], 2), &user("apply2")));
    assert!(identical(&got[7], &Val::I64(20)));
    // A function value returned by the JIT calls the same function when
    // passed back in.
    let f = func(&m, "apply");
    let mut jit = Jit::new(&m).expect("a JIT");
    let g = jit
        .run(
            func(&m, "choose"),
            &[Val::Bool(false)],
            &RunOptions::default(),
        )
        .expect("runs");
    let y = jit
        .run(f, &[g, Val::F64(3.0)], &RunOptions::default())
        .expect("runs");
    assert!(identical(&y, &Val::F64(9.0)));
}

#[test]
fn a_primitive_called_through_a_value_is_not_a_frame() {
    // The interpreter counts frames of module functions only: at the limit,
    // a call of a primitive value still runs, a call of a user function fails.
    let m = ir(CALLS_IR);
    let f = func(&m, "apply");
    let opts = RunOptions {
        max_depth: 1,
        ..RunOptions::default()
    };
    let sin = [Val::Func(FuncRef::Prim(Prim::Sin)), Val::F64(0.5)];
    let (want, got) = run_both_direct(&m, f, &sin, &opts);
    assert_same_outcome("@apply(@sin, 0.5) at depth limit 1", &m, &want, &got);
    assert!(
        matches!(want, Ok(Val::F64(y)) if y > 0.479 && y < 0.48),
        "{want:?}"
    );
    let sq = [Val::Func(FuncRef::User(func(&m, "sq"))), Val::F64(0.5)];
    let (want, got) = run_both_direct(&m, f, &sq, &opts);
    assert_same_outcome("@apply(@sq, 0.5) at depth limit 1", &m, &want, &got);
    assert_eq!(
        want.expect_err("too deep").msg,
        "call depth limit of 1 exceeded"
    );
}

#[test]
fn recursion_to_depth_10000_works_on_a_test_thread() {
    // SYNTAX.md §1: recursion to depth 10 000 always works; this runs on the
    // test harness's thread (2 MiB of stack) with the default budget.
    let m = ir(CALLS_IR);
    let opts = RunOptions::default();
    let f = func(&m, "countdown");
    let r = check_run("@countdown(10000)", &m, f, &[Val::I64(10_000)], &opts);
    assert!(identical(&r.expect("depth 10 000 runs"), &Val::I64(10_000)));
    let f = func(&m, "wide");
    let r = check_run(
        "@wide(10000, 1.0)",
        &m,
        f,
        &[Val::I64(10_000), Val::F64(1.0)],
        &opts,
    );
    assert!(r.is_ok(), "{r:?}");
    let f = func(&m, "count_by_value");
    let apply = Val::Func(FuncRef::User(func(&m, "apply")));
    let r = check_run(
        "@count_by_value(@apply, 5000)",
        &m,
        f,
        &[apply, Val::I64(5000)],
        &opts,
    );
    assert!(identical(&r.expect("runs"), &Val::I64(5000)));
}

/// `@fat(n, v)`: 64 elements of `v` read before the recursive call and added
/// after it, so that all 64 are live across the call (reads cannot move past
/// a call, which may write the array): a frame of about 1 KiB.
fn fat_ir() -> String {
    let mut s = String::from(
        "func @fat(%n: i64, %v: [f64]) -> f64 {\n#0:\n  %z = call le(%n, 0) :: bool\n  \
         gotoifnot %z, #2\n#1:\n  return 0.0\n#2:\n",
    );
    for k in 0..64 {
        s.push_str(&format!("  %a{k} = call arrayref(%v, {k}) :: f64\n"));
    }
    s.push_str("  %n1 = call isub(%n, 1) :: i64\n  %s = invoke @fat(%n1, %v) :: f64\n");
    for k in 0..64 {
        s.push_str(&format!(
            "  %s{k} = call add(%s{}, %a{k}) :: f64\n",
            if k == 0 {
                String::new()
            } else {
                (k - 1).to_string()
            }
        ));
    }
    s.push_str("  return %s63\n}\n");
    s
}

#[test]
fn a_large_frame_at_depth_10000_runs_on_a_small_thread() {
    // SYNTAX.md §1: recursion to depth 10 000 always works. This function's
    // frames are about 1 KiB; a test thread has 2 MiB of stack, so the JIT
    // runs the compiled code on a stack of its own.
    let m = ir(&fat_ir());
    let f = func(&m, "fat");
    let args = [Val::I64(10_000), f64s(&[0.5; 64])];
    let opts = RunOptions::default();
    let (want, got) = run_both_direct(&m, f, &args, &opts);
    let want = want.expect("the interpreter runs it");
    assert!(identical(&want, &Val::F64(320_000.0)));
    assert!(identical(&got.expect("the JIT runs it"), &want));
}
