//! Forward mode through the library: the derived-rule cache (each rule built
//! once per function and width, hits counted), recursion, functions marked
//! primitive by a registered rule, primitives' rules replaced by users, the
//! run-time rule cache of dynamic calls, batch mode, forward over forward,
//! and the errors forward mode gives. Derivatives are checked against values worked out by hand.

use irad_ir::interp::{Interpreter, RunOptions, Val};
use irad_ir::text::{parse_module, print_module};
use irad_ir::verify::verify_module;
use irad_ir::{FuncRef, Lanes, Module, Operand, Prim};
use irad_passes::forward::grad::{GradOptions, gradient};
use irad_passes::forward::{CacheStats, Forward};
use irad_rules::emit::{f64c, mul, value};
use irad_rules::{FruleCall, FwdOut, Registry, RuleError};
use smallvec::smallvec;

fn module(text: &str) -> Module {
    let m = parse_module(text).expect("test IR parses");
    verify_module(&m).expect("test IR verifies");
    m
}

/// Dense lanes of batch width `n` (not 0).
fn dense(n: u32) -> Lanes {
    Lanes::dense(n).expect("a dense width")
}

/// Value and gradient of `name` at `args` (scalars only), width `width`.
fn grad(
    m: &mut Module,
    fwd: &mut Forward<'_>,
    name: &str,
    args: &[f64],
    width: u32,
) -> (f64, Vec<f64>) {
    let f = m.by_name(name).expect("function exists");
    let vals: Vec<Val> = args.iter().map(|&x| Val::F64(x)).collect();
    let opts = GradOptions {
        lanes: dense(width),
        ..GradOptions::default()
    };
    let g = gradient(m, fwd, f, &vals, &opts).expect("gradient");
    let Val::F64(v) = g.value else {
        panic!("value is not f64")
    };
    let ds = g
        .gradient
        .iter()
        .map(|d| match d {
            Some(Val::F64(d)) => *d,
            other => panic!("unexpected gradient entry {other:?}"),
        })
        .collect();
    (v, ds)
}

const TWO_CALLERS: &str = "
func @sq(%x: f64) -> f64 {
#1:
  %y = call mul(%x, %x)
  return %y
}
func @f(%a: f64, %b: f64) -> f64 {
#1:
  %u = invoke @sq(%a)
  %v = invoke @sq(%b)
  %w = invoke @g(%a)
  %s = call add(%u, %v)
  %t = call add(%s, %w)
  return %t
}
func @g(%x: f64) -> f64 {
#1:
  %y = invoke @sq(%x)
  %z = call mul(%y, 3.0)
  return %z
}
";

#[test]
fn a_function_called_from_several_places_is_derived_once() {
    let mut m = module(TWO_CALLERS);
    let reg = Registry::new();
    let mut fwd = Forward::new(&reg);
    let (v, d) = grad(&mut m, &mut fwd, "f", &[2.0, 3.0], 1);
    // f = a^2 + b^2 + 3 a^2
    assert_eq!(v, 4.0 + 9.0 + 12.0);
    assert_eq!(d, vec![16.0, 6.0]);
    // @f, @sq, @g derived once each. A rule asks the cache once per callee
    // (the two calls in @f share one request), so @sq's second request, from
    // @g, is the one hit.
    assert_eq!(
        fwd.stats(),
        CacheStats {
            derived: 3,
            wrapped: 0,
            hits: 1
        }
    );
    let text = print_module(&m);
    assert_eq!(text.matches("func @sq.fwd(").count(), 1, "{text}");
    // A second request, of the same rule, is a hit and adds nothing.
    let n = m.len();
    let f = m.by_name("f").unwrap();
    let again = fwd.rule(&mut m, f, Lanes::ONE).unwrap();
    assert_eq!(Some(again), m.by_name("f.fwd"));
    assert_eq!(m.len(), n);
    assert_eq!(fwd.stats().hits, 2);
    // Another width is another rule.
    let (_, d4) = grad(&mut m, &mut fwd, "f", &[2.0, 3.0], 2);
    assert_eq!(d4, d);
    assert!(m.by_name("f.fwd2").is_some() && m.by_name("sq.fwd2").is_some());
    verify_module(&m).expect("rules verify");
}

#[test]
fn recursion_and_mutual_recursion_terminate_and_are_right() {
    let mut m = module(
        "
func @pow(%x: f64, %n: i64) -> f64 {
#1:
  %z = call le(%n, 0)
  gotoifnot %z, #3
#2:
  return 1.0
#3:
  %m = call isub(%n, 1)
  %r = invoke @pow(%x, %m)
  %y = call mul(%r, %x)
  return %y
}
func @even(%x: f64, %n: i64) -> f64 {
#1:
  %z = call eq(%n, 0)
  gotoifnot %z, #3
#2:
  return %x
#3:
  %m = call isub(%n, 1)
  %s = call sin(%x)
  %r = invoke @odd(%s, %m)
  return %r
}
func @odd(%x: f64, %n: i64) -> f64 {
#1:
  %m = call isub(%n, 1)
  %r = invoke @even(%x, %m)
  %y = call mul(%r, 2.0)
  return %y
}
",
    );
    irad_passes::normalise(&mut m).unwrap();
    let reg = Registry::new();
    let mut fwd = Forward::new(&reg);
    let f = m.by_name("pow").unwrap();
    let g = gradient(
        &mut m,
        &mut fwd,
        f,
        &[Val::F64(1.5), Val::I64(5)],
        &GradOptions::default(),
    )
    .unwrap();
    assert!(g.value.same(&Val::F64(1.5f64.powi(5))));
    assert!(matches!(g.gradient[0], Some(Val::F64(d)) if (d - 5.0 * 1.5f64.powi(4)).abs() < 1e-12));
    assert!(g.gradient[1].is_none(), "an i64 argument has no gradient");
    // even(x, 2) = odd(sin x, 1) = 2 * even(sin x, 0) = 2 sin x
    let e = m.by_name("even").unwrap();
    let g = gradient(
        &mut m,
        &mut fwd,
        e,
        &[Val::F64(0.3), Val::I64(2)],
        &GradOptions::default(),
    )
    .unwrap();
    assert!(matches!(g.gradient[0], Some(Val::F64(d)) if (d - 2.0 * 0.3f64.cos()).abs() < 1e-15));
    assert_eq!(fwd.stats().derived, 3);
    verify_module(&m).expect("rules verify");
}

/// A rule for `@sq` that is deliberately not the derivative of its body
/// (tangent 10 t instead of 2 x t), so that using it shows.
fn fake_sq_rule(
    b: &mut irad_ir::FuncBuilder<'_>,
    call: &FruleCall<'_>,
) -> Result<FwdOut, RuleError> {
    let x = &call.args[0];
    let y = value(b, Prim::Mul, &[x.primal, x.primal])?;
    let tangents = match &x.tangents {
        Some(ts) => {
            let mut out = smallvec![];
            for &t in ts {
                out.push(mul(b, t, f64c(10.0))?);
            }
            Some(out)
        }
        None => None,
    };
    Ok(FwdOut {
        primal: y,
        tangents,
    })
}

#[test]
fn a_registered_function_rule_is_used_instead_of_derivation() {
    let mut m = module(TWO_CALLERS);
    let mut reg = Registry::new();
    reg.register_function_frule("sq", fake_sq_rule);
    let mut fwd = Forward::new(&reg);
    let (v, d) = grad(&mut m, &mut fwd, "f", &[2.0, 3.0], 1);
    assert_eq!(v, 25.0);
    // d/da = 10 + 3 * 10, d/db = 10 with the fake rule.
    assert_eq!(d, vec![40.0, 10.0]);
    assert!(m.by_name("sq.fwd").is_none(), "@sq must not be derived");
    assert_eq!(fwd.stats().derived, 2);
}

#[test]
fn a_registered_primitive_rule_replaces_the_built_in_one() {
    let mut m = module(
        "
func @f(%x: f64) -> f64 {
#1:
  %y = call sin(%x)
  return %y
}
",
    );
    let mut reg = Registry::new();
    reg.register_frule(Prim::Sin, None, fake_sq_rule);
    let mut fwd = Forward::new(&reg);
    let (v, d) = grad(&mut m, &mut fwd, "f", &[3.0], 1);
    assert_eq!((v, d), (9.0, vec![10.0]));
}

const DYNAMIC: &str = "
func @sq(%x: f64) -> f64 {
#1:
  %y = call mul(%x, %x)
  return %y
}
func @pick(%c: bool) -> fn(f64) -> f64 {
#1:
  gotoifnot %c, #3
#2:
  return @sq
#3:
  return @sin
}
func @f(%x: f64, %c: bool) -> f64 {
#1:
  %g = invoke @pick(%c)
  %y = call %g(%x)
  %z = call %g(%y)
  return %z
}
";

#[test]
fn dynamic_calls_find_their_rules_at_run_time_once() {
    let mut m = module(DYNAMIC);
    irad_passes::normalise(&mut m).unwrap();
    let reg = Registry::new();
    let mut fwd = Forward::new(&reg);
    let f = m.by_name("f").unwrap();
    let x = 0.7f64;
    let opts = GradOptions::default();
    // The function value is chosen at run time: sq(sq(x)) = x^4 ...
    let g = gradient(&mut m, &mut fwd, f, &[Val::F64(x), Val::Bool(true)], &opts).unwrap();
    assert!(g.value.same(&Val::F64((x * x) * (x * x))));
    assert!(matches!(g.gradient[0], Some(Val::F64(d)) if (d - 4.0 * x * x * x).abs() < 1e-15));
    // ... or sin(sin(x)), through the rule built around the primitive.
    let g = gradient(&mut m, &mut fwd, f, &[Val::F64(x), Val::Bool(false)], &opts).unwrap();
    let want = x.sin().cos() * x.cos();
    assert!(matches!(g.gradient[0], Some(Val::F64(d)) if (d - want).abs() < 1e-15));
    // @f, @pick derived statically; @sq derived at run time on first use;
    // @sin wrapped once. The second call of each is answered by the
    // interpreter's memo, the second gradient by the cache.
    assert!(fwd.cached(FuncRef::Prim(Prim::Sin), Lanes::ONE).is_some());
    let sq = m.by_name("sq").unwrap();
    assert!(fwd.cached(FuncRef::User(sq), Lanes::ONE).is_some());
    let s = fwd.stats();
    assert_eq!((s.derived, s.wrapped), (3, 1), "{s:?}");
    verify_module(&m).expect("rules verify");
}

#[test]
fn frule_runs_through_any_interpreter_with_the_provider() {
    let mut m = module(DYNAMIC);
    let reg = Registry::new();
    let mut fwd = Forward::new(&reg);
    let f = m.by_name("f").unwrap();
    let rule = fwd.rule(&mut m, f, Lanes::ONE).unwrap();
    let n = m.len();
    let mut interp = Interpreter::with_rules(&mut m, &mut fwd);
    let arg = Val::Dual(vec![Val::F64(2.0), Val::F64(1.0)].into());
    let out = interp
        .run(rule, &[arg, Val::Bool(true)], &RunOptions::default())
        .unwrap();
    assert!(out.same(&Val::Dual(vec![Val::F64(16.0), Val::F64(32.0)].into())));
    assert_eq!(interp.module().len(), n + 1, "@sq.fwd added at run time");
}

#[test]
fn batch_lanes_equal_single_lanes() {
    let text = "
func @f(%x: [f64], %s: f64) -> f64 {
#1:
  %n = call length(%x)
  goto #2
#2:
  %i = phi [#1 => 0, #3 => %j]
  %acc = phi [#1 => 0.0, #3 => %acc2]
  %c = call lt(%i, %n)
  gotoifnot %c, #4
#3:
  %v = call arrayref(%x, %i)
  %w = call mul(%v, %s)
  %e = call exp(%w)
  call arrayset(%x, %i, %e)
  %acc2 = call add(%acc, %e)
  %j = call iadd(%i, 1)
  goto #2
#4:
  %t = call arrayref(%x, 0)
  %r = call mul(%acc, %t)
  return %r
}
";
    let reg = Registry::new();
    let args = || {
        vec![
            Val::f64_array(vec![0.1, -0.4, 0.9, 0.3, -1.2]),
            Val::F64(0.8),
        ]
    };
    let mut results = Vec::new();
    for width in [1u32, 2, 3, 6, 8] {
        let mut m = module(text);
        let mut fwd = Forward::new(&reg);
        let f = m.by_name("f").unwrap();
        let opts = GradOptions {
            lanes: dense(width),
            ..GradOptions::default()
        };
        let g = gradient(&mut m, &mut fwd, f, &args(), &opts).unwrap();
        // Six differentiated f64s: ceil(6 / width) passes.
        assert_eq!(
            g.passes,
            6usize.div_ceil(width.min(6) as usize),
            "width {width}"
        );
        results.push(g);
    }
    for g in &results[1..] {
        assert!(g.value.same(&results[0].value));
        for (a, b) in g.gradient.iter().zip(&results[0].gradient) {
            assert!(a.as_ref().unwrap().same(b.as_ref().unwrap()));
        }
    }
    // d/ds of the result by hand: r = (sum_i e^{x_i s}) * e^{x_0 s}.
    let xs = [0.1f64, -0.4, 0.9, 0.3, -1.2];
    let s = 0.8f64;
    let sum: f64 = xs.iter().map(|x| (x * s).exp()).sum();
    let dsum: f64 = xs.iter().map(|x| x * (x * s).exp()).sum();
    let t = (xs[0] * s).exp();
    let want = dsum * t + sum * xs[0] * t;
    let Some(Val::F64(ds)) = results[0].gradient[1] else {
        panic!("no gradient for s")
    };
    assert!((ds - want).abs() < 1e-12 * want.abs(), "{ds} vs {want}");
}

/// Forward over forward: a function working on duals is differentiated
/// like any other, the tangent of a `dual<f64>` being a `dual<f64>`. For
/// f(x) = primal(x) * tangent(x, 0), at x = dual(3, 2), outer lane 0 along
/// dual(1, 0) gives t = 2, lane 1 along dual(0, 1) gives p = 3; a dual
/// built in the function gets the dual of the parts' tangents.
#[test]
fn forward_over_forward_differentiates_duals() {
    let mut m = module(
        "
func @f(%x: dual<f64>) -> dual<f64> {
#1:
  %p = call primal(%x)
  %t = call tangent(%x, 0)
  %r = call mul(%p, %t)
  %s = call sin(%p)
  %d = call dual(%r, %s)
  return %d
}
",
    );
    let reg = Registry::new();
    let mut fwd = Forward::new(&reg);
    let f = m.by_name("f").unwrap();
    let rule = fwd.rule(&mut m, f, dense(2)).expect("forward over forward");
    verify_module(&m).expect("the rule verifies");
    let text = print_module(&m);
    assert!(
        text.contains("func @f.fwd2(%x: dual<dual<f64>, 2>) -> dual<dual<f64>, 2>"),
        "{text}"
    );
    let d = |a: f64, b: f64| Val::Dual(vec![Val::F64(a), Val::F64(b)].into());
    let x = Val::Dual(vec![d(3.0, 2.0), d(1.0, 0.0), d(0.0, 1.0)].into());
    let out = Interpreter::new(&m)
        .run(rule, &[x], &RunOptions::default())
        .expect("runs");
    // The result dual(p t, sin p) and per lane dual(d(p t), cos p dp).
    let c = 3f64.cos();
    let want = Val::Dual(vec![d(6.0, 3f64.sin()), d(2.0, c), d(3.0, c * 0.0)].into());
    assert!(out.same(&want), "{out:?}");
}

/// Dense forward mode over a function that builds sparse tangents (forward
/// over sparse): handles have handles as tangents. `@g(x, y)` is the
/// gradient of `x y + x` built with the builder, `[y + 1, x]`; its rule at
/// width 2 along x and y gives that gradient's Jacobian, the Hessian
/// `[[0, 1], [1, 0]]`, column by column; a function taking a sparse dual
/// gets the rule whose parameter is a dense dual of it.
#[test]
fn forward_mode_over_sparse_tangents() {
    let mut m = module(
        "
func @g(%x: f64, %y: f64) -> [f64] {
#1:
  %tx = call sonehot(0) :: sparse
  %ty = call sonehot(1) :: sparse
  %a = call sscale(%y, %tx) :: sparse
  %b = call sscale(%x, %ty) :: sparse
  %t = call sadd(%a, %b) :: sparse
  %u = call sadd(%t, %tx) :: sparse
  %h = call sdense(%u, 2) :: [f64]
  return %h
}

func @s(%x: dual<f64, sparse>) -> dual<f64, sparse> {
#1:
  %p = call primal(%x)
  %t = call tangent(%x, 0)
  %c = call cos(%p)
  %q = call sin(%p)
  %u = call sscale(%c, %t)
  %r = call dual(%q, %u)
  return %r
}
",
    );
    let reg = Registry::new();
    let mut fwd = Forward::new(&reg);
    let g = m.by_name("g").unwrap();
    let rule = fwd.rule(&mut m, g, dense(2)).expect("forward over sparse");
    let s = m.by_name("s").unwrap();
    fwd.rule(&mut m, s, Lanes::ONE)
        .expect("forward over a sparse rule");
    verify_module(&m).expect("the rules verify");
    let text = print_module(&m);
    for want in [
        "func @g.fwd2(%x: dual<f64, 2>, %y: dual<f64, 2>) -> dual<[f64], 2>",
        "func @s.fwd(%x: dual<dual<f64, sparse>>) -> dual<dual<f64, sparse>>",
    ] {
        assert!(text.contains(want), "{want} in {text}");
    }
    let d =
        |p: f64, t0: f64, t1: f64| Val::Dual(vec![Val::F64(p), Val::F64(t0), Val::F64(t1)].into());
    // Lane 0 along x, lane 1 along y, at (2, 3).
    let out = Interpreter::new(&m)
        .run(
            rule,
            &[d(2.0, 1.0, 0.0), d(3.0, 0.0, 1.0)],
            &RunOptions::default(),
        )
        .expect("runs");
    let arr = |xs: Vec<f64>| Val::f64_array(xs);
    let want = Val::Dual(
        vec![
            arr(vec![4.0, 2.0]),
            arr(vec![0.0, 1.0]),
            arr(vec![1.0, 0.0]),
        ]
        .into(),
    );
    assert!(out.same(&want), "{out:?}");
}

#[test]
fn forward_mode_errors_are_located() {
    // Sparse lanes over a function working on sparse tangents: that would
    // take handles of handles.
    let mut m = module(
        "
func @f(%x: dual<f64, sparse>) -> f64 {
#1:
  %p = call primal(%x)
  return %p
}
",
    );
    let reg = Registry::new();
    let mut fwd = Forward::new(&reg);
    let f = m.by_name("f").unwrap();
    let err = fwd.rule(&mut m, f, Lanes::Sparse).unwrap_err();
    assert!(
        err.msg.contains(
            "it works on sparse tangents (forward mode over a sparse rule takes dense lanes)"
        ),
        "{err}"
    );
    assert_eq!(err.loc.func.as_deref(), Some("f"));
    // Sparse lanes over a function working on dense duals.
    let mut m = module(
        "
func @f(%x: dual<f64>) -> f64 {
#1:
  %p = call primal(%x)
  return %p
}
",
    );
    let f = m.by_name("f").unwrap();
    // Sparse lanes over a function on dense duals (sparse over forward):
    // the sparse tangent of a `dual<f64>` is a `dual<sparse>`.
    fwd.rule(&mut m, f, Lanes::Sparse)
        .expect("sparse over forward");
    verify_module(&m).expect("the rule verifies");
    let text = print_module(&m);
    assert!(
        text.contains("func @f.fwds(%x: dual<dual<f64>, sparse>) -> dual<f64, sparse>"),
        "{text}"
    );
    // No rule for a primitive: an empty registry.
    let mut m = module(
        "
func @g(%x: f64) -> f64 {
#1:
  %y = call cos(%x)
  return %y
}
",
    );
    let empty = Registry::empty();
    let mut fwd = Forward::new(&empty);
    let g = m.by_name("g").unwrap();
    let err = fwd.rule(&mut m, g, Lanes::ONE).unwrap_err();
    assert_eq!(err.msg, "no forward rule for primitive `cos` on (f64)");
    assert_eq!((err.loc.block, err.loc.stmt), (Some(1), Some(1)));
    assert!(err.loc.pos.is_some());
    // A rule that returns the wrong type is reported, not trusted.
    let mut reg = Registry::new();
    reg.register_frule(
        Prim::Cos,
        None,
        |_b: &mut irad_ir::FuncBuilder<'_>, _c: &FruleCall<'_>| {
            Ok(FwdOut {
                primal: Operand::from(1),
                tangents: None,
            })
        },
    );
    let mut fwd = Forward::new(&reg);
    let err = fwd.rule(&mut m, g, Lanes::ONE).unwrap_err();
    assert!(
        err.msg
            .contains("forward rule of `cos`: its primal result has type i64, expected f64"),
        "{err}"
    );
    // Sparse mode: the same rule, the same error.
    let mut fwd = Forward::new(&reg);
    let err = fwd.rule(&mut m, g, Lanes::Sparse).unwrap_err();
    assert!(err.msg.contains("forward rule of `cos`"), "{err}");
    // A width out of range.
    assert!(
        fwd.rule(&mut m, g, dense(257))
            .unwrap_err()
            .msg
            .contains("batch width 257")
    );
}

#[test]
fn names_do_not_collide_with_existing_functions() {
    let mut m = module(
        "
func @f(%x: f64) -> f64 {
#1:
  %y = call sin(%x)
  return %y
}
func @f.fwd(%x: f64) -> f64 {
#1:
  return %x
}
",
    );
    let reg = Registry::new();
    let mut fwd = Forward::new(&reg);
    let f = m.by_name("f").unwrap();
    let r = fwd.rule(&mut m, f, Lanes::ONE).unwrap();
    assert_eq!(m[r].name, "f.fwd.1");
    verify_module(&m).unwrap();
}

#[test]
fn a_switch_keeps_its_targets_and_the_derivative_follows_the_target_taken() {
    let mut m = module(
        "
func @pick(%i: i64, %x: f64) -> f64 {
#1:
  switch %i, [#4, #2, #3]
#2:
  %a = call mul(%x, %x)
  goto #4
#3:
  %b = call sin(%x)
  goto #4
#4:
  %r = phi [#1 => %x, #2 => %a, #3 => %b] :: f64
  return %r
}
",
    );
    let reg = Registry::new();
    let mut fwd = Forward::new(&reg);
    let f = m.by_name("pick").expect("function exists");
    let x = 1.5f64;
    for (i, value, deriv) in [(0, x, 1.0), (1, x * x, 2.0 * x), (2, x.sin(), x.cos())] {
        let args = [Val::I64(i), Val::F64(x)];
        let g = gradient(&mut m, &mut fwd, f, &args, &GradOptions::default()).expect("gradient");
        assert!(g.value.same(&Val::F64(value)), "{i}: {:?}", g.value);
        assert!(g.gradient[0].is_none(), "{i}: an i64 has no derivative");
        let d = g.gradient[1].as_ref().expect("x has a derivative");
        assert!(d.same(&Val::F64(deriv)), "{i}: {d:?}");
    }
    let text = print_module(&m);
    assert!(text.contains("switch %i, [#4, #2, #3]"), "{text}");
    verify_module(&m).expect("rules verify");
    let args = [Val::I64(3), Val::F64(x)];
    let err = gradient(&mut m, &mut fwd, f, &args, &GradOptions::default())
        .expect_err("index out of range");
    assert!(
        err.to_string()
            .contains("switch index 3 is out of range for 3 targets"),
        "{err}"
    );
}

/// A function that pushes (a square, an f64 argument, a constant and an i64)
/// and one that pops them back, in last-in-first-out order: what forward
/// mode meets in reverse mode's pieces.
const TAPES: &str = "
func @put(%x: f64, %y: f64) -> () {
#1:
  %a = call mul(%x, %x)
  call push(%a)
  call push(%y)
  call push(2.5)
  call push(3)
  return ()
}
func @take() -> f64 {
#1:
  %k = call pop() :: i64
  %c = call pop() :: f64
  %b = call pop() :: f64
  %a = call pop() :: f64
  %kf = call sitofp(%k)
  %s = call sub(%a, %b)
  %t = call mul(%s, %kf)
  %u = call mul(%t, %c)
  %r = call sin(%u)
  return %r
}
func @both(%x: f64, %y: f64) -> f64 {
#1:
  invoke @put(%x, %y)
  %r = invoke @take()
  return %r
}
";

#[test]
fn tangents_travel_on_the_tapes_with_their_primals() {
    // both(x, y) = sin(7.5 (x² - y)): the pops see the pushes in reverse
    // order (the other order would give sin(7.5 (y - x²)) or worse).
    let registry = Registry::new();
    let (x, y): (f64, f64) = (0.7, 0.2);
    let u = 7.5 * (x * x - y);
    let want = (u.sin(), vec![u.cos() * 15.0 * x, -u.cos() * 7.5]);
    for activity in [true, false] {
        for width in [1, 2] {
            let mut m = module(TAPES);
            let mut fwd = Forward::new(&registry);
            fwd.set_activity(activity);
            let (v, d) = grad(&mut m, &mut fwd, "both", &[x, y], width);
            assert_eq!(v, want.0, "activity {activity}, width {width}");
            for (got, w) in d.iter().zip(&want.1) {
                assert!((got - w).abs() <= 1e-12 * w.abs(), "{got} vs {w}");
            }
            // The f64s go on the tape of their duals, the i64 on its own.
            let name = if width == 1 { "take.fwd" } else { "take.fwd2" };
            let rule = m.by_name(name).expect("the rule of @take");
            let text = irad_ir::text::print_func(&m, rule);
            let suffix = if width == 1 { "" } else { ", 2" };
            assert!(
                text.contains(&format!("call pop() :: dual<f64{suffix}>")),
                "{text}"
            );
            assert!(text.contains("call pop() :: i64"), "{text}");
            assert!(!text.contains("call pop() :: f64"), "{text}");
        }
    }
}

#[test]
fn reverse_rules_looked_up_at_run_time_are_function_values_without_tangent() {
    let mut m = module(
        "
func @sq(%x: f64) -> f64 {
#1:
  %y = call mul(%x, %x)
  return %y
}
func @back(%x: f64) -> f64 {
#1:
  %f = call revback(@sq)
  %r = call %f(%x)
  return %r
}
",
    );
    let registry = Registry::new();
    let mut fwd = Forward::new(&registry);
    let f = m.by_name("back").expect("function exists");
    let rule = fwd.rule(&mut m, f, Lanes::ONE).expect("derived");
    let text = irad_ir::text::print_func(&m, rule);
    // The lookup is the primal statement; the call through the piece finds
    // the piece's forward rule at run time.
    assert!(text.contains("call revback(@sq)"), "{text}");
    assert!(text.contains("call frule("), "{text}");
}

/// A loop carrying an array made afresh each iteration (`%c`), and the same
/// loop passing the carried array to a callee as well (`%kept`).
const CARRIED: &str = "
func @first(%y: [f64]) -> f64 {
#1:
  %r = call arrayref(%y, 0)
  return %r
}
func @carried(%x: [f64], %n: i64) -> f64 {
#1:
  %a = call copy(%x)
  goto #2
#2:
  %i = phi [#1 => 0, #3 => %j]
  %c = phi [#1 => %a, #3 => %b]
  %t = call lt(%i, %n)
  gotoifnot %t, #4
#3:
  %b = call copy(%c)
  %v = call arrayref(%c, 1)
  %s = call sin(%v)
  %w = call arrayref(%b, 0)
  %h = call mul(%w, 0.5)
  %u = call add(%h, %s)
  call arrayset(%b, 0, %u)
  %j = call iadd(%i, 1)
  goto #2
#4:
  %r = call arrayref(%c, 0)
  return %r
}
func @kept(%x: [f64], %n: i64) -> f64 {
#1:
  %a = call copy(%x)
  goto #2
#2:
  %i = phi [#1 => 0, #3 => %j]
  %c = phi [#1 => %a, #3 => %b]
  %t = call lt(%i, %n)
  gotoifnot %t, #4
#3:
  %b = call copy(%c)
  %v = invoke @first(%c)
  %s = call sin(%v)
  call arrayset(%b, 0, %s)
  %j = call iadd(%i, 1)
  goto #2
#4:
  %r = call arrayref(%c, 0)
  return %r
}
";

/// The phis of `f` whose type is a dual holding an array, and those of an
/// array type.
fn array_phis(m: &Module, f: irad_ir::FuncId) -> (usize, usize) {
    let func = m.get(f).expect("the rule");
    let (mut duals, mut arrays) = (0, 0);
    for inst in func.layout.iter().flat_map(|&b| &func.blocks[b].insts) {
        if let (irad_ir::InstKind::Phi { .. }, Some(r)) =
            (&func.insts[*inst].kind, func.insts[*inst].result)
        {
            match &func.values[r].ty {
                irad_ir::Type::Dual(..) if irad_rules::emit::contains_array(&func.values[r].ty) => {
                    duals += 1
                }
                irad_ir::Type::Array(_) => arrays += 1,
                _ => {}
            }
        }
    }
    (duals, arrays)
}

#[test]
fn dual_phis_of_arrays_split_into_a_phi_per_part() {
    let reg = Registry::new();
    for (width, parts) in [(dense(1), 2), (dense(3), 4), (Lanes::Sparse, 2)] {
        let mut m = module(CARRIED);
        let mut fwd = Forward::new(&reg);
        let f = m.by_name("carried").unwrap();
        let rule = fwd.rule_of(&mut m, FuncRef::User(f), width).unwrap();
        verify_module(&m).expect("the rule verifies");
        // The carried array and each of its tangents in a phi of its own; no
        // dual of an array left in a phi, nor a `dual` statement making one.
        assert_eq!(array_phis(&m, rule), (0, parts), "{width:?}");
        let text = print_module(&m);
        let body = text
            .split("func @carried.")
            .nth(1)
            .expect("the rule's text");
        assert!(!body.contains("call dual(%b"), "{width:?}: {body}");
        // Passed to a callee as a dual, the carried array keeps its dual phi.
        let k = m.by_name("kept").unwrap();
        let rule = fwd.rule_of(&mut m, FuncRef::User(k), width).unwrap();
        verify_module(&m).expect("the rule verifies");
        assert_eq!(array_phis(&m, rule), (1, 0), "{width:?}");
    }
    // The same derivative as finite differences, through the split rule.
    let mut m = module(CARRIED);
    let mut fwd = Forward::new(&reg);
    let f = m.by_name("carried").unwrap();
    let at = |x0: f64| vec![Val::f64_array(vec![x0, 0.7, -0.2]), Val::I64(5)];
    let g = gradient(&mut m, &mut fwd, f, &at(0.3), &GradOptions::default()).unwrap();
    let Some(Some(Val::Array(d))) = g.gradient.first().cloned() else {
        panic!("no array gradient: {:?}", g.gradient);
    };
    let d0 = match &*d.0.borrow() {
        irad_ir::interp::ArrayData::F64(v) => v[0],
        other => panic!("{other:?}"),
    };
    let run = |x0: f64| {
        let mut i = Interpreter::new(&m);
        match i.run(f, &at(x0), &RunOptions::default()).unwrap() {
            Val::F64(v) => v,
            other => panic!("{other:?}"),
        }
    };
    let h = 1e-6;
    let fd = (run(0.3 + h) - run(0.3 - h)) / (2.0 * h);
    assert!((d0 - fd).abs() < 1e-7, "{d0} against {fd}");
    assert!((d0 - 0.5f64.powi(5)).abs() < 1e-15, "{d0}");
}
