//! The rrule checker (`irad_rules::check::check_rrules`) as a library: every
//! built-in rrule passes; deliberately wrong rrules fail, each with a message
//! that names what is wrong and the point (a pullback that swaps the factors
//! of `mul`, an `arrayset` that does not restore, a forward part that changes
//! the primal or writes a shadow, shadows aliased unlike their arrays, a
//! pullback that ignores `dy`, cotangents of the wrong shape, a missing
//! rrule); the checker is deterministic given its seed.

use irad_ir::{FuncBuilder, Operand, Prim, Type};
use irad_rules::check::{
    CheckOptions, RuleKind, Verdict, check_frules, check_rrule_signature, check_rrules,
    render_table,
};
use irad_rules::emit::{self, f64c, value};
use irad_rules::{PullbackCall, PullbackOut, Registry, RevCall, RevFwdOut, RruleFns, RuleError};
use smallvec::{SmallVec, smallvec};

fn opts(samples: usize) -> CheckOptions {
    CheckOptions { samples, seed: 7 }
}

/// The signature of the table named `name`.
fn signature(name: &str) -> irad_rules::table::Signature {
    irad_rules::table::signatures()
        .into_iter()
        .find(|s| s.to_string() == name)
        .expect("the signature is in the table")
}

/// Checks `name` with `rule` registered as the rrule of `prim`; the failing
/// report's message.
fn failure(prim: Prim, name: &str, rule: RruleFns) -> String {
    let mut reg = Registry::new();
    reg.register_rrule(prim, None, rule);
    let report = check_rrule_signature(&reg, &signature(name), &opts(10));
    assert_eq!(report.kind, RuleKind::Rrule);
    assert_eq!(
        report.verdict,
        Verdict::Fail,
        "{name} passed with a wrong rrule"
    );
    report.message.unwrap_or_default()
}

fn unsupported(what: &str) -> RuleError {
    RuleError::Unsupported(what.into())
}

/// The primal of a call of `prim` with a result: its statement, nothing saved.
fn plain(b: &mut FuncBuilder<'_>, prim: Prim, call: &RevCall<'_>) -> Result<Operand, RuleError> {
    let args: Vec<Operand> = call.args.iter().map(|a| a.primal).collect();
    value(b, prim, &args)
}

/// `mul` whose forward part saves both factors.
fn mul_forward(b: &mut FuncBuilder<'_>, call: &RevCall<'_>) -> Result<RevFwdOut, RuleError> {
    let [x, y] = call.args else {
        return Err(unsupported("mul takes two arguments"));
    };
    Ok(RevFwdOut {
        primal: plain(b, Prim::Mul, call)?,
        shadows: SmallVec::new(),
        saved: smallvec![x.primal, y.primal],
    })
}

/// The right pullback of [`mul_forward`]: `(y * dy, x * dy)`.
fn mul_back(b: &mut FuncBuilder<'_>, call: &PullbackCall<'_>) -> Result<PullbackOut, RuleError> {
    let ([x, y], [dy]) = (call.saved, call.dy) else {
        return Err(unsupported("two saved values, one cotangent"));
    };
    let dx = emit::scale_opt(b, *y, *dy)?;
    let dz = emit::scale_opt(b, *x, *dy)?;
    Ok(PullbackOut {
        cotangents: smallvec![smallvec![dx], smallvec![dz]],
    })
}

/// `arrayset` on `[f64]`: the built-in forward part without the shadow, so
/// the pullback can be varied.
fn arrayset_forward(b: &mut FuncBuilder<'_>, call: &RevCall<'_>) -> Result<RevFwdOut, RuleError> {
    let [a, i, v] = call.args else {
        return Err(unsupported("arrayset takes three arguments"));
    };
    let old = value(b, Prim::Arrayref, &[a.primal, i.primal])?;
    emit::effect(b, Prim::Arrayset, &[a.primal, i.primal, v.primal])?;
    let shadow = *a.shadows.first().ok_or_else(|| unsupported("a shadow"))?;
    Ok(RevFwdOut {
        primal: emit::unit(),
        shadows: SmallVec::new(),
        saved: smallvec![a.primal, i.primal, old, shadow],
    })
}

#[test]
fn every_built_in_rrule_passes() {
    let reports = check_rrules(&Registry::new(), &opts(20));
    let failures: Vec<String> = reports
        .iter()
        .filter(|r| r.verdict != Verdict::Pass)
        .map(|r| format!("{}: {}", r.name, r.message.as_deref().unwrap_or("")))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Every signature but those of AD primitives other than the ones a
    // forward rule is made of (`gemm` and the parts of duals: reverse over
    // forward), which are checked too.
    let with_rrule = irad_rules::table::signatures()
        .iter()
        .filter(|s| !irad_rules::is_ad_prim(s.prim) || irad_rules::reverses_over_forward(s.prim))
        .count();
    assert_eq!(reports.len(), with_rrule);
    for name in [
        "gemm(true, false, [f64], [f64], 2, 3, 2, [f64])",
        "tangent(dual<f64, 3>, 1)",
        "dual((f64, [f64]), (f64, [f64]), (f64, [f64]))",
    ] {
        assert!(reports.iter().any(|r| r.name == name), "{name} is checked");
    }
    assert!(reports.iter().all(|r| r.samples == 20));
    assert!(reports.iter().all(|r| r.kind == RuleKind::Rrule));
    // The adjoint identity is computed, not vacuous, where there are f64s.
    for name in ["sin(f64)", "arrayset([f64], i64, f64)", "copy([f64])"] {
        assert!(
            reports.iter().any(|r| r.name == name && r.max_error > 0.0),
            "{name}"
        );
    }
}

#[test]
fn no_primitive_is_missing_an_rrule() {
    assert_eq!(Registry::new().missing_rrules(), Vec::<Prim>::new());
}

#[test]
fn the_right_mul_rule_written_here_passes() {
    let mut reg = Registry::new();
    reg.register_rrule(Prim::Mul, None, RruleFns::new(mul_forward, mul_back));
    for name in ["mul(f64, f64)", "mul(f64, 2.0)"] {
        let report = check_rrule_signature(&reg, &signature(name), &opts(10));
        assert_eq!(
            report.verdict,
            Verdict::Pass,
            "{name}: {:?}",
            report.message
        );
    }
}

#[test]
fn a_mul_pullback_that_swaps_the_factors_fails() {
    let msg = failure(
        Prim::Mul,
        "mul(f64, f64)",
        RruleFns::new(mul_forward, |b, call| {
            let ([x, y], [dy]) = (call.saved, call.dy) else {
                return Err(unsupported("two saved values, one cotangent"));
            };
            let dx = emit::scale_opt(b, *x, *dy)?;
            let dz = emit::scale_opt(b, *y, *dy)?;
            Ok(PullbackOut {
                cotangents: smallvec![smallvec![dx], smallvec![dz]],
            })
        }),
    );
    assert!(
        msg.starts_with("adjoint identity fails: <dy, J dx> = ")
            && msg.contains("cotangents argument 1: ")
            && msg.contains(", at mul(")
            && msg.contains("dx (")
            && msg.contains("dy ("),
        "{msg}"
    );
}

#[test]
fn an_arrayset_that_does_not_restore_fails() {
    let msg = failure(
        Prim::Arrayset,
        "arrayset([f64], i64, f64)",
        RruleFns::new(arrayset_forward, |b, call| {
            let [_, i, _, s] = call.saved else {
                return Err(unsupported("four saved values"));
            };
            // Moves the element's cotangent to v, but never writes the old
            // element back.
            let g = value(b, Prim::Arrayref, &[*s, *i])?;
            emit::effect(b, Prim::Arrayset, &[*s, *i, f64c(0.0)])?;
            Ok(PullbackOut {
                cotangents: smallvec![smallvec![], smallvec![], smallvec![Some(g)]],
            })
        }),
    );
    assert!(
        msg.starts_with("argument 1 is [")
            && msg.contains("after the pullback")
            && msg.contains("does not restore it")
            && msg.contains(", at arrayset(["),
        "{msg}"
    );
}

#[test]
fn an_arrayset_that_keeps_the_overwritten_cotangent_fails() {
    let msg = failure(
        Prim::Arrayset,
        "arrayset([f64], i64, f64)",
        RruleFns::new(arrayset_forward, |b, call| {
            let [a, i, old, s] = call.saved else {
                return Err(unsupported("four saved values"));
            };
            emit::effect(b, Prim::Arrayset, &[*a, *i, *old])?;
            // Gives v the cotangent but leaves it in the shadow as well.
            let g = value(b, Prim::Arrayref, &[*s, *i])?;
            Ok(PullbackOut {
                cotangents: smallvec![smallvec![], smallvec![], smallvec![Some(g)]],
            })
        }),
    );
    assert!(
        msg.starts_with("adjoint identity fails")
            && msg.contains("shadows after the pullback argument 1: ["),
        "{msg}"
    );
}

#[test]
fn a_forward_part_that_changes_the_primal_fails() {
    let msg = failure(
        Prim::Sin,
        "sin(f64)",
        RruleFns::new(
            |b, call| {
                let y = plain(b, Prim::Sin, call)?;
                Ok(RevFwdOut {
                    primal: value(b, Prim::Add, &[y, f64c(1e-12)])?,
                    shadows: SmallVec::new(),
                    saved: SmallVec::new(),
                })
            },
            |_, _| {
                Ok(PullbackOut {
                    cotangents: smallvec![smallvec![None]],
                })
            },
        ),
    );
    assert!(
        msg.starts_with("the forward part's primal result")
            && msg.contains("differs from the primitive's"),
        "{msg}"
    );
}

#[test]
fn a_forward_part_that_writes_a_shadow_fails() {
    let msg = failure(
        Prim::Arrayref,
        "arrayref([f64], i64)",
        RruleFns::new(
            |b, call| {
                let [a, i] = call.args else {
                    return Err(unsupported("two arguments"));
                };
                let s = *a.shadows.first().ok_or_else(|| unsupported("a shadow"))?;
                emit::effect(b, Prim::Arrayset, &[s, i.primal, f64c(1.0)])?;
                Ok(RevFwdOut {
                    primal: plain(b, Prim::Arrayref, call)?,
                    shadows: SmallVec::new(),
                    saved: smallvec![s, i.primal],
                })
            },
            |_, _| {
                Ok(PullbackOut {
                    cotangents: smallvec![smallvec![], smallvec![]],
                })
            },
        ),
    );
    assert!(
        msg.starts_with("the shadow of argument 1 is [") && msg.contains("must stay zero"),
        "{msg}"
    );
}

#[test]
fn a_select_that_gives_a_passed_on_array_a_fresh_shadow_fails() {
    let msg = failure(
        Prim::Select,
        "select(bool, [f64], [f64])",
        RruleFns::new(
            |b, call| {
                let z = plain(b, Prim::Select, call)?;
                let n = value(b, Prim::Length, &[z])?;
                Ok(RevFwdOut {
                    primal: z,
                    shadows: smallvec![value(b, Prim::Zeros, &[n])?],
                    saved: SmallVec::new(),
                })
            },
            |_, _| {
                Ok(PullbackOut {
                    cotangents: smallvec![smallvec![], smallvec![], smallvec![]],
                })
            },
        ),
    );
    assert!(
        msg.contains("the result is argument ")
            && msg.contains("but the shadow of the result is not that array's shadow"),
        "{msg}"
    );
}

#[test]
fn a_pullback_that_ignores_a_known_zero_dy_fails() {
    // Right when dy is given, but a cotangent of 1 when dy is None.
    let msg = failure(
        Prim::Neg,
        "neg(f64)",
        RruleFns::new(
            |b, call| {
                Ok(RevFwdOut {
                    primal: plain(b, Prim::Neg, call)?,
                    shadows: SmallVec::new(),
                    saved: SmallVec::new(),
                })
            },
            |b, call| {
                let dx = match call.dy {
                    [Some(d)] => value(b, Prim::Neg, &[*d])?,
                    _ => f64c(1.0),
                };
                Ok(PullbackOut {
                    cotangents: smallvec![smallvec![Some(dx)]],
                })
            },
        ),
    );
    assert!(
        msg.starts_with("with dy known to be zero (None): adjoint identity fails"),
        "{msg}"
    );
}

#[test]
fn a_rule_without_cotangent_for_a_comparison_gives_none() {
    // A cotangent for an argument of `lt`, whose result has none to give.
    let msg = failure(
        Prim::Lt,
        "lt(f64, f64)",
        RruleFns::new(
            |b, call| {
                Ok(RevFwdOut {
                    primal: plain(b, Prim::Lt, call)?,
                    shadows: SmallVec::new(),
                    saved: SmallVec::new(),
                })
            },
            |_, _| {
                Ok(PullbackOut {
                    cotangents: smallvec![smallvec![Some(f64c(0.5))], smallvec![None]],
                })
            },
        ),
    );
    assert!(msg.starts_with("adjoint identity fails"), "{msg}");
}

#[test]
fn cotangents_of_the_wrong_shape_fail() {
    let msg = failure(
        Prim::Mul,
        "mul(f64, 2.0)",
        RruleFns::new(mul_forward, |b, call| {
            let mut out = mul_back(b, call)?;
            // A constant argument still has one entry per f64.
            out.cotangents[1] = smallvec![];
            Ok(out)
        }),
    );
    assert!(
        msg.contains(
            "returned 0 cotangent(s) for argument 2 (f64), which has 1 f64 outside arrays"
        ),
        "{msg}"
    );
}

#[test]
fn a_forward_part_with_blocks_fails() {
    let msg = failure(
        Prim::Sin,
        "sin(f64)",
        RruleFns::new(
            |b, call| {
                let y = plain(b, Prim::Sin, call)?;
                let next = b.create_block();
                b.goto(next)?;
                b.switch_to_block(next)?;
                Ok(RevFwdOut {
                    primal: y,
                    shadows: SmallVec::new(),
                    saved: SmallVec::new(),
                })
            },
            |_, _| {
                Ok(PullbackOut {
                    cotangents: smallvec![smallvec![None]],
                })
            },
        ),
    );
    assert!(msg.contains("created blocks"), "{msg}");
}

#[test]
fn a_pullback_that_emits_ill_typed_ir_fails() {
    let msg = failure(
        Prim::Mul,
        "mul(f64, f64)",
        RruleFns::new(mul_forward, |b, call| {
            let [x, _] = call.saved else {
                return Err(unsupported("two saved values"));
            };
            value(b, Prim::Iadd, &[*x, *x])?;
            mul_back(b, call)
        }),
    );
    assert!(
        msg.starts_with("the pullback failed to emit") && msg.contains("iadd"),
        "{msg}"
    );
}

#[test]
fn a_missing_rrule_is_a_failing_row() {
    let mut reg = Registry::empty();
    reg.register_frule(
        Prim::Sin,
        None,
        |b: &mut FuncBuilder<'_>, call: &irad_rules::FruleCall<'_>| {
            emit::primal_only(b, Prim::Sin, call)
        },
    );
    let report = check_rrule_signature(&reg, &signature("sin(f64)"), &opts(3));
    assert_eq!(report.verdict, Verdict::Fail);
    assert_eq!(report.samples, 0);
    assert_eq!(
        report.message.as_deref(),
        Some("no rrule registered for sin(f64)")
    );
    // The whole table against an empty registry: every row fails, none panics.
    let reports = check_rrules(&Registry::empty(), &opts(1));
    assert!(reports.iter().all(|r| r.verdict == Verdict::Fail));
}

#[test]
fn a_user_rrule_for_some_types_only_is_checked_for_those() {
    let mut reg = Registry::new();
    let wrong = RruleFns::new(mul_forward, |b, call| {
        let mut out = mul_back(b, call)?;
        out.cotangents.swap(0, 1);
        Ok(out)
    });
    reg.register_rrule(Prim::Mul, Some(vec![Type::F64, Type::F64]), wrong);
    let reports = check_rrules(&reg, &opts(5));
    let failed: Vec<&str> = reports
        .iter()
        .filter(|r| r.verdict == Verdict::Fail)
        .map(|r| r.name.as_str())
        .collect();
    // `mul(f64, 2.0)` has the types (f64, f64) too.
    assert_eq!(failed, ["mul(f64, f64)", "mul(f64, 2.0)"]);
}

#[test]
fn the_rrule_checker_is_deterministic() {
    let a = check_rrules(&Registry::new(), &opts(3));
    let b = check_rrules(&Registry::new(), &opts(3));
    assert_eq!(a, b);
}

#[test]
fn the_table_shows_both_rules_of_each_signature() {
    let o = opts(2);
    let mut reg = Registry::new();
    reg.register_rrule(
        Prim::Mul,
        None,
        RruleFns::new(mul_forward, |b, call| {
            let mut out = mul_back(b, call)?;
            out.cotangents.swap(0, 1);
            Ok(out)
        }),
    );
    let mut reports = check_frules(&reg, &o);
    reports.extend(check_rrules(&reg, &o));
    let table = render_table(&reports, &o);
    let mut lines = table.lines();
    assert_eq!(
        lines
            .next()
            .map(|l| l.split_whitespace().collect::<Vec<_>>()),
        Some(vec![
            "rule", "samples", "fd", "error", "frule", "adj", "error", "rrule"
        ])
    );
    let sin = table
        .lines()
        .find(|l| l.starts_with("sin(f64) "))
        .expect("a sin row");
    let cols: Vec<&str> = sin.split_whitespace().collect();
    assert_eq!(
        (cols.len(), cols[1], cols[3], cols[5]),
        (6, "2", "ok", "ok")
    );
    let mul = table
        .lines()
        .find(|l| l.starts_with("mul(f64, f64) "))
        .expect("a mul row");
    assert!(mul.ends_with(" FAIL"), "{mul}");
    assert!(table.contains("\nFAIL rrule mul(f64, f64): adjoint identity fails"));
    // Every signature has an frule, the parts of duals too (forward over
    // forward).
    let n = irad_rules::table::signatures().len();
    assert!(
        table.contains(&format!("frules: {n} passed, 0 failed;")),
        "{table}"
    );
    let with_rrule = irad_rules::table::signatures()
        .iter()
        .filter(|s| !irad_rules::is_ad_prim(s.prim) || irad_rules::reverses_over_forward(s.prim))
        .count();
    assert!(
        table.contains(&format!("rrules: {} passed, 2 failed;", with_rrule - 2)),
        "{table}"
    );
    // Only frules: no rrule columns.
    let frules_only = render_table(&check_frules(&reg, &o), &o);
    assert!(!frules_only.contains("rrule"), "{frules_only}");
}
