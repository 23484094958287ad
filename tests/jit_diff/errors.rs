//! Every run-time error kind, raised by small IR programs: idiv and irem by
//! zero, idiv overflow, fptosi out of range, negative and too long array
//! lengths, indices out of bounds, switch indices out of range, pops from
//! empty tapes, the call-depth limit, errors in callees (with their call
//! sites) and in primitives called through function values, rules without a
//! provider, and errors inside rules derived at run time. The interpreter and
//! the JIT give the same `RunError` (location, message, trace), directly,
//! through the facade and through the `irad run` binary (same stderr, exit
//! status 1).

use super::*;

/// Programs that fail at run time, one function per way to fail.
const ERRORS_IR: &str = r"
func @quot(%a: i64, %b: i64) -> i64 {
#1:
  %r = call idiv(%a, %b) :: i64
  return %r
}

func @rem(%a: i64, %b: i64) -> i64 {
#1:
  %r = call irem(%a, %b) :: i64
  return %r
}

func @to_int(%x: f64) -> i64 {
#1:
  %k = call fptosi(%x) :: i64
  return %k
}

func @alloc_f64(%n: i64) -> i64 {
#1:
  %a = call alloc(%n) :: [f64]
  %l = call length(%a) :: i64
  return %l
}

func @alloc_i64(%n: i64) -> i64 {
#1:
  %a = call alloc(%n) :: [i64]
  %l = call length(%a) :: i64
  return %l
}

func @alloc_bool(%n: i64) -> i64 {
#1:
  %a = call alloc(%n) :: [bool]
  %l = call length(%a) :: i64
  return %l
}

func @zeros_len(%n: i64) -> i64 {
#1:
  %a = call zeros(%n) :: [f64]
  %l = call length(%a) :: i64
  return %l
}

func @get(%a: [f64], %i: i64) -> f64 {
#1:
  %x = call arrayref(%a, %i) :: f64
  return %x
}

func @set(%a: [f64], %i: i64) -> () {
#1:
  call arrayset(%a, %i, 1.5)
  return ()
}

func @get_i64(%a: [i64], %i: i64) -> i64 {
#1:
  %x = call arrayref(%a, %i) :: i64
  return %x
}

func @set_bool(%a: [bool], %i: i64) -> () {
#1:
  call arrayset(%a, %i, true)
  return ()
}

func @fresh_get(%n: i64, %i: i64) -> bool {
#1:
  %a = call alloc(%n) :: [bool]
  %x = call arrayref(%a, %i) :: bool
  return %x
}

func @switch3(%i: i64) -> i64 {
#1:
  switch %i, [#2, #3, #4]
#2:
  return 10
#3:
  return 20
#4:
  return 30
}

func @switch2(%i: i64) -> i64 {
#1:
  switch %i, [#2, #3]
#2:
  return 10
#3:
  return 20
}

func @switch1(%i: i64) -> i64 {
#1:
  switch %i, [#2]
#2:
  return 10
}

func @pop_f64(%x: f64) -> f64 {
#1:
  call push(%x)
  %a = call pop() :: f64
  %b = call pop() :: f64
  %r = call add(%a, %b) :: f64
  return %r
}

func @pop_pair(%x: f64, %n: i64) -> f64 {
#1:
  call push(%x)
  call push(%n)
  %t = call pop() :: (f64, i64)
  %y = call getfield(%t, 0) :: f64
  return %y
}

func @pop_bool(%b: bool) -> bool {
#1:
  %t = call pop() :: bool
  return %t
}

func @pop_array(%a: [f64]) -> [f64] {
#1:
  %t = call pop() :: [f64]
  return %t
}

func @pop_fn(%x: f64) -> f64 {
#1:
  %g = call pop() :: fn(f64) -> f64
  %r = call %g(%x) :: f64
  return %r
}

func @pop_unit(%x: f64) -> f64 {
#1:
  call push(())
  %u = call pop() :: ()
  %v = call pop() :: ()
  return %x
}

func @pop_units(%x: f64) -> f64 {
#1:
  %u = call pop() :: ((), ())
  return %x
}

func @forever(%n: i64) -> i64 {
#1:
  %m = call iadd(%n, 1) :: i64
  %r = invoke @forever(%m) :: i64
  return %r
}

func @pass(%g: fn(i64) -> i64) -> fn(i64) -> i64 {
#1:
  return %g
}

func @forever_by_value(%n: i64) -> i64 {
#1:
  %g = invoke @pass(@forever_by_value) :: fn(i64) -> i64
  %m = call iadd(%n, 1) :: i64
  %r = call %g(%m) :: i64
  return %r
}

func @inner(%a: [f64], %k: i64) -> f64 {
#1:
  %d = call idiv(1, %k) :: i64
  %x = call arrayref(%a, %d) :: f64
  return %x
}

func @middle(%a: [f64], %k: i64) -> f64 {
#1:
  %x = invoke @inner(%a, %k) :: f64
  %y = call mul(%x, 2.0) :: f64
  return %y
}

func @outer(%a: [f64], %k: i64) -> f64 {
#1:
  goto #2
#2:
  %i = phi [#1 => 0, #3 => %i1] :: i64
  %s = phi [#1 => 0.0, #3 => %s1] :: f64
  %more = call lt(%i, 3) :: bool
  gotoifnot %more, #4
#3:
  %j = call isub(%k, %i) :: i64
  %x = invoke @middle(%a, %j) :: f64
  %s1 = call add(%s, %x) :: f64
  %i1 = call iadd(%i, 1) :: i64
  goto #2
#4:
  return %s
}

func @call_value(%g: fn([f64], i64) -> f64, %a: [f64], %k: i64) -> f64 {
#1:
  %x = call %g(%a, %k) :: f64
  return %x
}

func @outer_by_value(%a: [f64], %k: i64) -> f64 {
#1:
  %x = invoke @call_value(@middle, %a, %k) :: f64
  return %x
}

func @apply_ii(%g: fn(i64, i64) -> i64, %a: i64, %b: i64) -> i64 {
#1:
  %r = call %g(%a, %b) :: i64
  return %r
}

func @divide_by_value(%a: i64, %b: i64) -> i64 {
#1:
  %r = invoke @apply_ii(@idiv, %a, %b) :: i64
  return %r
}

func @rem_by_value(%a: i64, %b: i64) -> i64 {
#1:
  %r = invoke @apply_ii(@irem, %a, %b) :: i64
  return %r
}

func @truncate_by_value(%x: f64) -> i64 {
#1:
  %r = invoke @apply_fi(@fptosi, %x) :: i64
  return %r
}

func @apply_fi(%g: fn(f64) -> i64, %x: f64) -> i64 {
#1:
  %r = call %g(%x) :: i64
  return %r
}

func @sq(%x: f64) -> f64 {
#1:
  %y = call mul(%x, %x) :: f64
  return %y
}

func @frule_sq(%x: f64) -> f64 {
#1:
  %g = call frule(@sq, 1) :: fn(dual<f64>) -> dual<f64>
  %d = call dual(%x, 1.0) :: dual<f64>
  %r = call %g(%d) :: dual<f64>
  %p = call primal(%r) :: f64
  return %p
}

func @revfwd_sq(%x: f64) -> f64 {
#1:
  %g = call revfwd(@sq) :: fn(f64) -> f64
  %y = call %g(%x) :: f64
  return %y
}

func @revback_sq(%x: f64) -> f64 {
#1:
  %b = call revback(@sq) :: fn(f64) -> f64
  %y = call %b(%x) :: f64
  return %y
}

func @frule_of_value(%g: fn(f64) -> f64, %x: f64) -> f64 {
#1:
  %h = call frule(%g, 2) :: fn(dual<f64, 2>) -> dual<f64, 2>
  return %x
}
";

/// One way to fail: the function, its arguments, the call-depth limit, the
/// message, the function the failing statement is in and the trace length.
struct ErrorCase {
    func: &'static str,
    args: Vec<Val>,
    max_depth: usize,
    msg: String,
    at: &'static str,
    trace: usize,
}

/// A failure of `func` itself, at the default depth limit, without a trace.
fn fail(func: &'static str, args: Vec<Val>, msg: impl Into<String>) -> ErrorCase {
    ErrorCase {
        func,
        args,
        max_depth: irad::ir::interp::DEFAULT_MAX_DEPTH,
        msg: msg.into(),
        at: func,
        trace: 0,
    }
}

fn fptosi_msg(x: f64) -> String {
    format!("fptosi of {} is out of the i64 range", format_f64(x))
}

/// The table of failures; `m` is the module of [`ERRORS_IR`].
fn error_cases(m: &Module) -> Vec<ErrorCase> {
    use Val::{F64, I64};
    let arr = || f64s(&[1.0, 2.0, 3.0]);
    let i64s = Val::Array(ArrayRef::new(ArrayData::I64(vec![4, 5])));
    let bools = |n| Val::Array(ArrayRef::new(ArrayData::Bool(vec![false; n])));
    let value = |name: &str| Val::Func(FuncRef::User(func(m, name)));
    let two_63 = 9_223_372_036_854_775_808.0_f64;
    let oob = |i: i64, n: i64| format!("index {i} out of bounds for array of length {n}");
    let switch = |i: i64, n: i64| format!("switch index {i} is out of range for {n} targets");
    let too_long = |n: i64| format!("array length {n} exceeds the limit of 268435456 elements");
    vec![
        fail("quot", vec![I64(7), I64(0)], "division by zero"),
        fail("quot", vec![I64(i64::MIN), I64(0)], "division by zero"),
        fail("rem", vec![I64(-7), I64(0)], "remainder by zero"),
        fail(
            "quot",
            vec![I64(i64::MIN), I64(-1)],
            "integer overflow in idiv",
        ),
        fail("to_int", vec![F64(f64::NAN)], fptosi_msg(f64::NAN)),
        fail("to_int", vec![F64(-f64::NAN)], fptosi_msg(f64::NAN)),
        fail(
            "to_int",
            vec![F64(f64::INFINITY)],
            fptosi_msg(f64::INFINITY),
        ),
        fail(
            "to_int",
            vec![F64(f64::NEG_INFINITY)],
            fptosi_msg(f64::NEG_INFINITY),
        ),
        fail("to_int", vec![F64(1e19)], fptosi_msg(1e19)),
        fail("to_int", vec![F64(-1e19)], fptosi_msg(-1e19)),
        fail("to_int", vec![F64(two_63)], fptosi_msg(two_63)),
        // The next f64 below -2^63.
        fail(
            "to_int",
            vec![F64(-9_223_372_036_854_777_856.0)],
            fptosi_msg(-9_223_372_036_854_777_856.0),
        ),
        fail("alloc_f64", vec![I64(-3)], "negative array length -3"),
        fail("alloc_i64", vec![I64(-1)], "negative array length -1"),
        fail(
            "alloc_bool",
            vec![I64(i64::MIN)],
            format!("negative array length {}", i64::MIN),
        ),
        fail("zeros_len", vec![I64(-2)], "negative array length -2"),
        fail("alloc_f64", vec![I64(268_435_457)], too_long(268_435_457)),
        fail("alloc_bool", vec![I64(1 << 40)], too_long(1 << 40)),
        fail("zeros_len", vec![I64(i64::MAX)], too_long(i64::MAX)),
        fail("get", vec![arr(), I64(3)], oob(3, 3)),
        fail("get", vec![arr(), I64(-1)], oob(-1, 3)),
        fail("get", vec![arr(), I64(i64::MIN)], oob(i64::MIN, 3)),
        fail("get", vec![arr(), I64(i64::MAX)], oob(i64::MAX, 3)),
        fail("get", vec![f64s(&[]), I64(0)], oob(0, 0)),
        fail("set", vec![arr(), I64(3)], oob(3, 3)),
        fail("set", vec![arr(), I64(-1)], oob(-1, 3)),
        fail("get_i64", vec![i64s.clone(), I64(2)], oob(2, 2)),
        fail("get_i64", vec![i64s, I64(-2)], oob(-2, 2)),
        fail("set_bool", vec![bools(4), I64(4)], oob(4, 4)),
        fail("set_bool", vec![bools(0), I64(0)], oob(0, 0)),
        fail("fresh_get", vec![I64(5), I64(5)], oob(5, 5)),
        fail("fresh_get", vec![I64(0), I64(-7)], oob(-7, 0)),
        fail("switch3", vec![I64(3)], switch(3, 3)),
        fail("switch3", vec![I64(-1)], switch(-1, 3)),
        fail("switch3", vec![I64(i64::MIN)], switch(i64::MIN, 3)),
        fail("switch2", vec![I64(2)], switch(2, 2)),
        fail("switch2", vec![I64(-1)], switch(-1, 2)),
        fail("switch1", vec![I64(1)], switch(1, 1)),
        fail("switch1", vec![I64(-1)], switch(-1, 1)),
        fail("pop_f64", vec![F64(1.0)], "pop from an empty tape of f64"),
        fail(
            "pop_pair",
            vec![F64(1.0), I64(2)],
            "pop from an empty tape of (f64, i64)",
        ),
        fail(
            "pop_bool",
            vec![Val::Bool(true)],
            "pop from an empty tape of bool",
        ),
        fail("pop_array", vec![arr()], "pop from an empty tape of [f64]"),
        fail(
            "pop_fn",
            vec![F64(1.0)],
            "pop from an empty tape of fn(f64) -> f64",
        ),
        fail("pop_unit", vec![F64(1.0)], "pop from an empty tape of ()"),
        fail(
            "pop_units",
            vec![F64(1.0)],
            "pop from an empty tape of ((), ())",
        ),
        fail(
            "frule_sq",
            vec![F64(2.0)],
            "no rule provider for frule: run forward rules through the forward-mode API",
        ),
        fail(
            "frule_of_value",
            vec![Val::Func(FuncRef::Prim(Prim::Sin)), F64(2.0)],
            "no rule provider for frule: run forward rules through the forward-mode API",
        ),
        fail(
            "revfwd_sq",
            vec![F64(2.0)],
            "no rule provider for revfwd: run reverse rules through the reverse-mode API",
        ),
        fail(
            "revback_sq",
            vec![F64(2.0)],
            "no rule provider for revback: run reverse rules through the reverse-mode API",
        ),
        // Primitives called through function values fail at the call.
        ErrorCase {
            at: "apply_ii",
            trace: 1,
            ..fail("divide_by_value", vec![I64(1), I64(0)], "division by zero")
        },
        ErrorCase {
            at: "apply_ii",
            trace: 1,
            ..fail(
                "divide_by_value",
                vec![I64(i64::MIN), I64(-1)],
                "integer overflow in idiv",
            )
        },
        ErrorCase {
            at: "apply_ii",
            trace: 1,
            ..fail("rem_by_value", vec![I64(1), I64(0)], "remainder by zero")
        },
        ErrorCase {
            at: "apply_fi",
            trace: 1,
            ..fail(
                "truncate_by_value",
                vec![F64(f64::NAN)],
                fptosi_msg(f64::NAN),
            )
        },
        fail(
            "apply_ii",
            vec![Val::Func(FuncRef::Prim(Prim::Idiv)), I64(3), I64(0)],
            "division by zero",
        ),
        // Errors in callees carry the call sites.
        // (@outer calls @middle with k, k - 1 and k - 2, which calls
        // @inner, which reads element 1 / k.)
        ErrorCase {
            at: "inner",
            trace: 2,
            ..fail("outer", vec![arr(), I64(2)], "division by zero")
        },
        ErrorCase {
            at: "inner",
            trace: 2,
            ..fail("outer", vec![f64s(&[1.0]), I64(3)], oob(1, 1))
        },
        ErrorCase {
            at: "inner",
            trace: 3,
            ..fail("outer_by_value", vec![arr(), I64(0)], "division by zero")
        },
        ErrorCase {
            at: "inner",
            trace: 2,
            ..fail(
                "call_value",
                vec![value("middle"), arr(), I64(-1)],
                oob(-1, 3),
            )
        },
        // The call-depth limit, reached by a static and by a dynamic call.
        ErrorCase {
            max_depth: 50,
            trace: 49,
            ..fail("forever", vec![I64(0)], "call depth limit of 50 exceeded")
        },
        ErrorCase {
            max_depth: 1,
            ..fail("forever", vec![I64(0)], "call depth limit of 1 exceeded")
        },
        ErrorCase {
            max_depth: 0,
            ..fail("forever", vec![I64(0)], "call depth limit of 0 exceeded")
        },
        ErrorCase {
            max_depth: 50,
            trace: 49,
            ..fail(
                "forever_by_value",
                vec![I64(0)],
                "call depth limit of 50 exceeded",
            )
        },
        ErrorCase {
            max_depth: 2,
            trace: 1,
            at: "middle",
            ..fail(
                "outer",
                vec![arr(), I64(1)],
                "call depth limit of 2 exceeded",
            )
        },
        // Arguments that do not fit the signature.
        fail("quot", vec![I64(1)], "@quot takes 2 arguments, found 1"),
        fail(
            "get",
            vec![Val::Array(ArrayRef::new(ArrayData::I64(vec![1]))), I64(0)],
            "argument 1 of @get must be [f64], found [i64]",
        ),
    ]
}

#[test]
fn every_run_time_error_is_the_same_in_the_jit() {
    let m = ir(ERRORS_IR);
    let cases = error_cases(&m);
    for c in &cases {
        let f = func(&m, c.func);
        let opts = RunOptions {
            max_depth: c.max_depth,
            ..RunOptions::default()
        };
        let what = format!(
            "@{}({}) with max depth {}",
            c.func,
            c.args
                .iter()
                .map(|a| show(a, &m))
                .collect::<Vec<_>>()
                .join(", "),
            c.max_depth
        );
        let (want, got) = run_both_direct(&m, f, &c.args, &opts);
        assert_same_outcome(&what, &m, &want, &got);
        // Also through the facade, as `irad run` does.
        let facade = check_run(&what, &m, f, &c.args, &opts);
        assert_same_outcome(&what, &m, &want, &facade);
        let err = want.expect_err(&what);
        assert_eq!(err.msg, c.msg, "{what}");
        assert_eq!(err.loc.func.as_deref(), Some(c.at), "{what}: {err}");
        assert_eq!(err.call_sites(), c.trace as u64, "{what}: {err}");
        let in_body = c.max_depth > 0 && !c.msg.contains("argument");
        assert_eq!(err.loc.stmt.is_some(), in_body, "{what}: {:?}", err.loc);
    }
    // The edge of fptosi's range: -2^63 converts.
    let f = func(&m, "to_int");
    let r = check_run(
        "@to_int(-2^63)",
        &m,
        f,
        &[Val::F64(-9_223_372_036_854_775_808.0)],
        &RunOptions::default(),
    );
    assert!(identical(&r.expect("in range"), &Val::I64(i64::MIN)));
}

fn default_depth_limit_is_reached() {
    let m = ir(ERRORS_IR);
    for name in ["forever", "forever_by_value"] {
        let f = func(&m, name);
        let (want, got) = run_both_direct(&m, f, &[Val::I64(0)], &RunOptions::default());
        assert_same_outcome(name, &m, &want, &got);
        let err = want.expect_err(name);
        assert_eq!(err.msg, "call depth limit of 100000 exceeded");
        assert_eq!(err.call_sites(), 99_999, "{name}");
    }
}

#[test]
fn the_default_depth_limit_is_reached_on_a_big_stack() {
    on_big_stack(default_depth_limit_is_reached);
}

#[test]
fn the_default_depth_limit_is_reached_on_a_test_thread() {
    // 2 MiB of stack: the JIT runs compiled code on a stack of its own.
    default_depth_limit_is_reached();
}

#[test]
fn compiled_code_reports_a_full_stack_instead_of_crashing() {
    // With a stack budget of 256 KiB, depth 100 000 is out of reach: a
    // located error, not a crash. This is the one way the JIT may differ
    // from the interpreter (`Jit::set_stack_budget`).
    let m = ir(ERRORS_IR);
    let f = func(&m, "forever");
    let mut jit = Jit::new(&m).expect("a JIT");
    jit.set_stack_budget(256 << 10);
    let err = jit
        .run(f, &[Val::I64(0)], &RunOptions::default())
        .expect_err("the stack budget runs out");
    assert!(
        err.msg.starts_with("native stack exhausted at call depth "),
        "{err}"
    );
    assert_eq!(err.loc.func.as_deref(), Some("forever"));
}

/// `irad run` on `file` with `backend`: (exit code, stderr).
fn irad_run(file: &Path, func: &str, args: &str, extra: &[&str], backend: &str) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_irad"))
        .args(["run", file.to_str().expect("utf-8 path"), "-f", func])
        .args(["--args", args, "--backend", backend])
        .args(extra)
        .output()
        .expect("irad runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_cli_prints_the_same_run_time_errors_with_either_backend() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("jit_diff");
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let file = dir.join("errors.ir");
    std::fs::write(&file, ERRORS_IR).expect("writable scratch file");
    let runs: [(&str, &str, &[&str], &str); 6] = [
        ("quot", "7, 0", &[], "division by zero"),
        (
            "to_int",
            "nan",
            &[],
            "fptosi of nan is out of the i64 range",
        ),
        (
            "outer",
            "[1.0], 3",
            &[],
            "index 1 out of bounds for array of length 1",
        ),
        (
            "divide_by_value",
            "-9223372036854775808, -1",
            &[],
            "overflow",
        ),
        (
            "forever",
            "0",
            &["--max-depth", "40"],
            "call depth limit of 40 exceeded",
        ),
        (
            "pop_pair",
            "1.0, 2",
            &[],
            "pop from an empty tape of (f64, i64)",
        ),
    ];
    for (name, args, extra, text) in runs {
        let (code_i, err_i) = irad_run(&file, name, args, extra, "interp");
        let (code_j, err_j) = irad_run(&file, name, args, extra, "jit");
        assert_eq!(code_i, 1, "@{name}({args}) interp: {err_i}");
        assert_eq!(code_j, 1, "@{name}({args}) jit: {err_j}");
        assert_eq!(err_i, err_j, "@{name}({args}): stderr differs");
        let first = err_i.lines().next().unwrap_or("");
        assert!(
            first.starts_with(&format!("{}:", file.display())) && first.contains(text),
            "@{name}({args}): {err_i}"
        );
    }
    // The default depth limit through the binary, which runs on a big stack.
    let (code_i, err_i) = irad_run(&file, "forever", "0", &[], "interp");
    let (code_j, err_j) = irad_run(&file, "forever", "0", &[], "jit");
    assert_eq!((code_i, code_j), (1, 1), "{err_i}\n{err_j}");
    assert_eq!(err_i, err_j);
    assert!(
        err_i.contains("call depth limit of 100000 exceeded"),
        "{err_i}"
    );
}

/// A function value whose rule is derived at run time, and fails inside.
const RULES_IR: &str = r"
func @scale(%x: f64, %k: i64) -> f64 {
#1:
  %q = call idiv(10, %k) :: i64
  %f = call sitofp(%q) :: f64
  %y = call mul(%x, %f) :: f64
  return %y
}

func @apply_k(%g: fn(f64, i64) -> f64, %x: f64, %k: i64) -> f64 {
#1:
  %y = call %g(%x, %k) :: f64
  return %y
}

func @top(%x: f64, %k: i64) -> f64 {
#1:
  %y = invoke @apply_k(@scale, %x, %k) :: f64
  %z = call sin(%y) :: f64
  return %z
}
";

#[test]
fn errors_inside_rules_derived_at_run_time_are_the_same() {
    let m = ir(RULES_IR);
    let src = Source {
        name: "rules.ir".into(),
        text: RULES_IR.into(),
    };
    let f = func(&m, "top");
    for mode in [Mode::Reverse, fwd(1), fwd(2)] {
        let ok = [Val::F64(1.5), Val::I64(3)];
        assert!(check_grad("@top(1.5, 3)", mode, &src, &m, f, &ok));
        let bad = [Val::F64(1.5), Val::I64(0)];
        assert!(!check_grad("@top(1.5, 0)", mode, &src, &m, f, &bad));
        match grad_on(Backend::Jit, mode, &src, &m, f, &bad) {
            Err(Error::Run { err, .. }) => {
                assert_eq!(err.msg, "division by zero", "{mode:?}");
                // In the rule of @scale, called from the rule of @apply_k,
                // called from the rule of @top.
                assert!(err.trace.len() >= 2, "{mode:?}: {err:?}");
            }
            other => panic!("{mode:?}: {:?}", other.map(|(g, _)| g.value)),
        }
    }
}

/// Blocks that pop several values of one tape at once, after blocks that
/// pushed fewer (none, one, three, by `%k`): the segment's single check
/// finds the tape short, and the error names the first pop that finds it
/// empty. Records of 8 bytes (`f64`), 17 (`(f64, i64, bool)`, not a power
/// of two) and 1 (`bool`).
const SHORT_POPS_IR: &str = r"
func @pops_f64(%k: i64, %x: f64) -> f64 {
#1:
  switch %k, [#2, #3, #4]
#2:
  goto #5
#3:
  call push(%x)
  goto #5
#4:
  call push(%x)
  call push(%x)
  call push(%x)
  goto #5
#5:
  %a = call pop() :: f64
  %b = call pop() :: f64
  %c = call pop() :: f64
  %d = call pop() :: f64
  %s = call add(%a, %b) :: f64
  %t = call add(%c, %d) :: f64
  %r = call add(%s, %t) :: f64
  return %r
}

func @pops_triple(%k: i64, %x: f64) -> f64 {
#1:
  %v = call tuple(%x, %k, true) :: (f64, i64, bool)
  switch %k, [#2, #3, #4]
#2:
  goto #5
#3:
  call push(%v)
  goto #5
#4:
  call push(%v)
  call push(%v)
  goto #5
#5:
  %a = call pop() :: (f64, i64, bool)
  %b = call pop() :: (f64, i64, bool)
  %c = call pop() :: (f64, i64, bool)
  %y = call getfield(%c, 0) :: f64
  return %y
}

func @pops_bool(%k: i64, %p: bool) -> bool {
#1:
  switch %k, [#2, #3, #4]
#2:
  goto #5
#3:
  call push(%p)
  goto #5
#4:
  call push(%p)
  call push(%p)
  goto #5
#5:
  %a = call pop() :: bool
  %b = call pop() :: bool
  %c = call pop() :: bool
  return %c
}
";

#[test]
fn a_short_tape_fails_at_the_first_pop_it_cannot_serve() {
    use Val::{F64, I64};
    let m = ir(SHORT_POPS_IR);
    let opts = RunOptions::default();
    // (function, pushes made by %k, the argument after %k, the failing pop)
    let cases: [(&str, i64, Val, u32); 9] = [
        ("pops_f64", 0, F64(1.0), 1),
        ("pops_f64", 1, F64(1.0), 2),
        ("pops_f64", 2, F64(1.0), 4),
        ("pops_triple", 0, F64(2.0), 1),
        ("pops_triple", 1, F64(2.0), 2),
        ("pops_triple", 2, F64(2.0), 3),
        ("pops_bool", 0, Val::Bool(true), 1),
        ("pops_bool", 1, Val::Bool(true), 2),
        ("pops_bool", 2, Val::Bool(true), 3),
    ];
    for (name, k, x, stmt) in cases {
        let what = format!("@{name}({k})");
        let (want, got) = run_both_direct(&m, func(&m, name), &[I64(k), x], &opts);
        assert_same_outcome(&what, &m, &want, &got);
        let err = got.expect_err(&what);
        assert!(
            err.msg.starts_with("pop from an empty tape of "),
            "{what}: {err}"
        );
        assert_eq!(err.loc.block, Some(5), "{what}: {err:?}");
        assert_eq!(err.loc.stmt, Some(stmt), "{what}: {err:?}");
    }
}
