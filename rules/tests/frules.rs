//! The built-in frules on hand-picked points: each test builds a function
//! `@r` that projects its dual arguments with `primal`/`tangent`, calls the
//! registry's rule and packs the result with `dual`, verifies it, runs it in
//! the interpreter and compares with values worked out by hand. Also checks
//! that every primitive of the table has a rule, that a rule with no tangents
//! to work on emits no tangent statements, and that later registrations win.
//!
//! The random, table-driven check of every rule is `irad_rules::check`; these
//! tests pin the conventions at kinks and ties that random points never hit.

use irad_ir::interp::{RunOptions, Val, run};
use irad_ir::{Const, FuncBuilder, FuncId, Lanes, Module, Operand, Prim, Scalar, Type};
use irad_rules::{FruleCall, FwdArg, FwdOut, Registry, RuleError, emit};
use smallvec::SmallVec;
use std::rc::Rc;

/// An argument of the rule function: a parameter of this type, or a constant
/// operand (no tangent).
enum Arg {
    Param(Type),
    Const(Const),
}

/// Builds `@r` for `prim` at `width` with `reg`'s rule; returns the module,
/// the function and the number of statements the rule emitted.
fn build(
    reg: &Registry,
    prim: Prim,
    args: &[Arg],
    result: &Type,
    width: u32,
) -> (Module, FuncId, usize) {
    let lanes = Lanes::dense(width).expect("a dense width");
    let mut m = Module::new();
    let params: Vec<(Option<String>, Type)> = args
        .iter()
        .filter_map(|a| match a {
            Arg::Param(ty) => Some((None, ty.forward(lanes))),
            Arg::Const(_) => None,
        })
        .collect();
    let f = m
        .declare_func("r", params, result.forward(lanes))
        .expect("declare");
    let mut b = FuncBuilder::new(&mut m, f).expect("builder");
    let entry = b.create_block();
    b.switch_to_block(entry).expect("block");
    let mut fwd = Vec::new();
    let mut i = 0;
    for a in args {
        match a {
            Arg::Param(ty) => {
                let p = Operand::Value(b.param(i).expect("param"));
                i += 1;
                if ty.has_tangent() {
                    let primal = emit::value(&mut b, Prim::Primal, &[p]).expect("primal");
                    let tangents: SmallVec<[Operand; 1]> = (0..width)
                        .map(|k| {
                            emit::value(&mut b, Prim::Tangent, &[p, Operand::from(i64::from(k))])
                                .expect("tangent")
                        })
                        .collect();
                    fwd.push(FwdArg {
                        primal,
                        ty: ty.clone(),
                        tangents: Some(tangents),
                    });
                } else {
                    fwd.push(FwdArg {
                        primal: p,
                        ty: ty.clone(),
                        tangents: None,
                    });
                }
            }
            Arg::Const(c) => {
                let ty = match c {
                    Const::F64(_) => Type::F64,
                    Const::I64(_) => Type::I64,
                    Const::Bool(_) => Type::Bool,
                    _ => Type::Unit,
                };
                fwd.push(FwdArg {
                    primal: Operand::Const(*c),
                    ty,
                    tangents: None,
                });
            }
        }
    }
    let before = b.func().blocks[entry].insts.len();
    let types: Vec<Type> = fwd.iter().map(|a| a.ty.clone()).collect();
    let rule = reg.frule(prim, &types).expect("a rule");
    let call = FruleCall {
        callee: irad_rules::Callee::Prim(prim),
        args: &fwd,
        result,
        lanes,
    };
    let out = rule.emit(&mut b, &call).expect("rule emits");
    let emitted = b.func().blocks[entry].insts.len() - before;
    let ret = if result.has_tangent() {
        let ts = match out.tangents {
            Some(ts) => ts,
            None => emit::zero_tangents(&mut b, result, out.primal, lanes)
                .expect("zeros")
                .expect("tangent type"),
        };
        let mut ops = vec![out.primal];
        ops.extend(ts);
        emit::value(&mut b, Prim::Dual, &ops).expect("dual")
    } else {
        out.primal
    };
    b.ret(ret).expect("return");
    irad_ir::verify::verify_module(&m).expect("the rule verifies");
    (m, f, emitted)
}

fn dual(xs: &[f64]) -> Val {
    Val::Dual(xs.iter().map(|&x| Val::F64(x)).collect::<Vec<_>>().into())
}

fn f64s(v: &Val) -> Vec<f64> {
    match v {
        Val::Dual(xs) => xs.iter().flat_map(f64s).collect(),
        Val::F64(x) => vec![*x],
        other => panic!("not f64: {other:?}"),
    }
}

fn eval(prim: Prim, args: &[Arg], vals: &[Val], width: u32) -> Vec<f64> {
    let result = match prim {
        Prim::Lt => Type::Bool,
        _ => Type::F64,
    };
    let (m, f, _) = build(&Registry::new(), prim, args, &result, width);
    let v = run(&m, f, vals, &RunOptions::default()).expect("runs");
    match v {
        Val::Bool(_) => vec![],
        v => f64s(&v),
    }
}

const F: fn() -> Arg = || Arg::Param(Type::F64);

#[test]
fn sin_at_width_two_scales_each_lane() {
    let got = eval(Prim::Sin, &[F()], &[dual(&[0.5, 1.0, -2.0])], 2);
    let c = irad_kernels::math::cos(0.5);
    assert_eq!(got, vec![irad_kernels::math::sin(0.5), c, -2.0 * c]);
}

#[test]
fn abs_takes_plus_t_at_both_zeros() {
    for x in [0.0, -0.0] {
        assert_eq!(
            eval(Prim::Abs, &[F()], &[dual(&[x, 3.0])], 1),
            vec![0.0, 3.0]
        );
    }
    assert_eq!(
        eval(Prim::Abs, &[F()], &[dual(&[-2.0, 3.0])], 1),
        vec![2.0, -3.0]
    );
}

#[test]
fn min_and_max_give_a_tie_to_the_first_operand() {
    let args = [dual(&[1.0, 10.0]), dual(&[1.0, 20.0])];
    assert_eq!(eval(Prim::Min, &[F(), F()], &args, 1), vec![1.0, 10.0]);
    assert_eq!(eval(Prim::Max, &[F(), F()], &args, 1), vec![1.0, 10.0]);
    let args = [dual(&[2.0, 10.0]), dual(&[1.0, 20.0])];
    assert_eq!(eval(Prim::Min, &[F(), F()], &args, 1), vec![1.0, 20.0]);
    assert_eq!(eval(Prim::Max, &[F(), F()], &args, 1), vec![2.0, 10.0]);
    // A NaN operand: the primal is NaN and the tangent the second operand's.
    let args = [dual(&[f64::NAN, 10.0]), dual(&[1.0, 20.0])];
    let got = eval(Prim::Min, &[F(), F()], &args, 1);
    assert!(got[0].is_nan() && got[1] == 20.0, "{got:?}");
}

#[test]
fn min_with_a_constant_operand_gives_it_a_zero_tangent() {
    let got = eval(
        Prim::Min,
        &[F(), Arg::Const(Const::F64(0.0))],
        &[dual(&[1.0, 5.0])],
        1,
    );
    assert_eq!(got, vec![0.0, 0.0]);
    let got = eval(
        Prim::Min,
        &[F(), Arg::Const(Const::F64(2.0))],
        &[dual(&[1.0, 5.0])],
        1,
    );
    assert_eq!(got, vec![1.0, 5.0]);
}

#[test]
fn copysign_flips_the_tangent_where_signs_differ() {
    let got = eval(
        Prim::Copysign,
        &[F(), F()],
        &[dual(&[2.0, 3.0]), dual(&[-1.0, 7.0])],
        1,
    );
    assert_eq!(got, vec![-2.0, -3.0]);
    let got = eval(
        Prim::Copysign,
        &[F(), F()],
        &[dual(&[-2.0, 3.0]), dual(&[-0.0, 7.0])],
        1,
    );
    assert_eq!(got, vec![-2.0, 3.0]);
}

#[test]
fn pow_with_a_constant_exponent_has_no_log_term() {
    let got = eval(
        Prim::Pow,
        &[F(), Arg::Const(Const::F64(2.0))],
        &[dual(&[-3.0, 1.0])],
        1,
    );
    assert_eq!(got, vec![9.0, -6.0]);
}

#[test]
fn powi_and_rounding() {
    let got = eval(
        Prim::Powi,
        &[F(), Arg::Const(Const::I64(3))],
        &[dual(&[2.0, 1.0])],
        1,
    );
    assert_eq!(got, vec![8.0, 12.0]);
    for p in [Prim::Floor, Prim::Ceil, Prim::Round] {
        let got = eval(p, &[F()], &[dual(&[2.5, 1.0])], 1);
        assert_eq!(got[1], 0.0, "{p}");
    }
}

#[test]
fn arrayset_writes_the_primal_and_every_tangent_array() {
    let arr = Type::Array(Scalar::F64);
    let (m, f, _) = build(
        &Registry::new(),
        Prim::Arrayset,
        &[
            Arg::Param(arr),
            Arg::Const(Const::I64(1)),
            Arg::Param(Type::F64),
        ],
        &Type::Unit,
        2,
    );
    let a = [
        Val::f64_array(vec![1.0, 2.0]),
        Val::f64_array(vec![3.0, 4.0]),
        Val::f64_array(vec![5.0, 6.0]),
    ];
    let d = Val::Dual(Rc::from(a.to_vec()));
    let v = run(
        &m,
        f,
        &[d, dual(&[9.0, 10.0, 11.0])],
        &RunOptions::default(),
    )
    .expect("runs");
    assert!(v.same(&Val::Unit));
    let want = [vec![1.0, 9.0], vec![3.0, 10.0], vec![5.0, 11.0]];
    for (a, w) in a.iter().zip(want) {
        assert!(a.same(&Val::f64_array(w.clone())), "{a:?} != {w:?}");
    }
}

#[test]
fn every_primitive_has_a_rule() {
    assert_eq!(Registry::new().missing_prims(), Vec::<Prim>::new());
}

#[test]
fn no_tangents_means_no_tangent_work() {
    let reg = Registry::new();
    let c = || Arg::Const(Const::F64(0.5));
    for p in [Prim::Sin, Prim::Exp, Prim::Neg, Prim::Abs, Prim::Floor] {
        let (_, _, emitted) = build(&reg, p, &[c()], &Type::F64, 3);
        // The primal statement only (zero tangents are constants).
        assert_eq!(emitted, 1, "{p}");
    }
    for p in [
        Prim::Add,
        Prim::Mul,
        Prim::Div,
        Prim::Pow,
        Prim::Atan2,
        Prim::Min,
        Prim::Copysign,
    ] {
        let (_, _, emitted) = build(&reg, p, &[c(), c()], &Type::F64, 3);
        assert_eq!(emitted, 1, "{p}");
    }
}

#[test]
fn a_later_rule_takes_precedence() {
    let mut reg = Registry::new();
    let constant = |b: &mut FuncBuilder<'_>, call: &FruleCall<'_>| -> Result<FwdOut, RuleError> {
        let primal = emit::primal(b, Prim::Sin, call)?;
        let tangents = Some((0..call.lanes.count()).map(|_| emit::f64c(42.0)).collect());
        Ok(FwdOut { primal, tangents })
    };
    reg.register_frule(Prim::Sin, Some(vec![Type::F64]), constant);
    let (m, f, _) = build(&reg, Prim::Sin, &[F()], &Type::F64, 1);
    let v = run(&m, f, &[dual(&[0.5, 1.0])], &RunOptions::default()).expect("runs");
    assert_eq!(f64s(&v), vec![irad_kernels::math::sin(0.5), 42.0]);
}
