//! The frule checker (`irad_rules::check`) as a library: every built-in rule
//! passes; a deliberately wrong rule for `sin` fails with a message naming
//! the point; a rule registered later is the one the registry returns and the
//! checker checks; the checker is deterministic given its seed.

use irad_ir::{FuncBuilder, Prim, Type};
use irad_rules::check::{CheckOptions, Verdict, check_frules, check_signature};
use irad_rules::{FruleCall, FwdOut, Registry, RuleError, emit};

/// `sin` with the wrong tangent `t * sin(x)`.
fn wrong_sin(b: &mut FuncBuilder<'_>, call: &FruleCall<'_>) -> Result<FwdOut, RuleError> {
    let [x] = call.args else {
        return Err(RuleError::Unsupported("sin takes one argument".into()));
    };
    let y = emit::value(b, Prim::Sin, &[x.primal])?;
    let tangents = match &x.tangents {
        Some(ts) => Some(emit::scale(b, y, ts)?),
        None => None,
    };
    Ok(FwdOut {
        primal: y,
        tangents,
    })
}

fn opts(samples: usize) -> CheckOptions {
    CheckOptions { samples, seed: 7 }
}

#[test]
fn every_built_in_rule_passes() {
    let reports = check_frules(&Registry::new(), &opts(20));
    let failures: Vec<String> = reports
        .iter()
        .filter(|r| r.verdict != Verdict::Pass)
        .map(|r| format!("{}: {}", r.name, r.message.as_deref().unwrap_or("")))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(reports.iter().all(|r| r.samples == 20));
    assert!(
        reports
            .iter()
            .any(|r| r.name == "sin(f64)" && r.max_error > 0.0)
    );
}

#[test]
fn a_wrong_rule_for_sin_fails() {
    let mut reg = Registry::new();
    reg.register_frule(Prim::Sin, None, wrong_sin);
    let reports = check_frules(&reg, &opts(10));
    let sin = reports
        .iter()
        .find(|r| r.name == "sin(f64)")
        .expect("sin is checked");
    assert_eq!(sin.verdict, Verdict::Fail);
    let msg = sin.message.as_deref().unwrap_or("");
    assert!(
        msg.contains("finite differences give") && msg.contains("at sin("),
        "{msg}"
    );
    // Only sin is affected.
    assert!(
        reports
            .iter()
            .filter(|r| r.verdict == Verdict::Fail)
            .all(|r| r.prim == Prim::Sin)
    );
}

#[test]
fn a_rule_registered_later_is_the_one_returned() {
    let mut reg = Registry::new();
    let built_in = reg.frule(Prim::Sin, &[Type::F64]).expect("built in");
    reg.register_frule(Prim::Sin, Some(vec![Type::F64]), wrong_sin);
    let later = reg.frule(Prim::Sin, &[Type::F64]).expect("registered");
    assert!(!std::sync::Arc::ptr_eq(&built_in, &later));
    let sig = irad_rules::table::signatures()
        .into_iter()
        .find(|s| s.to_string() == "sin(f64)")
        .expect("sin(f64) in the table");
    assert_eq!(check_signature(&reg, &sig, &opts(5)).verdict, Verdict::Fail);
    assert_eq!(
        check_signature(&Registry::new(), &sig, &opts(5)).verdict,
        Verdict::Pass
    );
}

#[test]
fn no_primitive_is_missing_a_rule() {
    assert_eq!(Registry::new().missing_prims(), Vec::<Prim>::new());
    let ad = irad_ir::prim::PRIMS
        .iter()
        .filter(|row| irad_rules::is_ad_prim(row.prim))
        .count();
    assert_eq!(
        Registry::empty().missing_prims().len(),
        irad_ir::prim::PRIMS.len() - ad
    );
}

#[test]
fn the_checker_is_deterministic() {
    let a = check_frules(&Registry::new(), &opts(3));
    let b = check_frules(&Registry::new(), &opts(3));
    assert_eq!(a, b);
}

/// The signature of the table named `name`.
fn signature(name: &str) -> irad_rules::table::Signature {
    irad_rules::table::signatures()
        .into_iter()
        .find(|s| s.to_string() == name)
        .expect("the signature is in the table")
}

/// Checks `name` with `rule` registered for `prim`; the report's message.
fn failure(prim: Prim, name: &str, rule: impl irad_rules::Frule + 'static) -> String {
    let mut reg = Registry::new();
    reg.register_frule(prim, None, rule);
    let report = check_signature(&reg, &signature(name), &opts(10));
    assert_eq!(
        report.verdict,
        Verdict::Fail,
        "{name} passed with a wrong rule"
    );
    report.message.unwrap_or_default()
}

#[test]
fn a_rule_that_changes_the_primal_fails() {
    let msg = failure(
        Prim::Mul,
        "mul(f64, f64)",
        |b: &mut FuncBuilder<'_>, call: &FruleCall<'_>| {
            let p = emit::primal(b, Prim::Mul, call)?;
            let primal = emit::value(b, Prim::Add, &[p, emit::f64c(1e-3)])?;
            Ok(FwdOut {
                primal,
                tangents: None,
            })
        },
    );
    assert!(msg.contains("primal result"), "{msg}");
}

#[test]
fn a_rule_that_forgets_the_tangent_write_fails() {
    let msg = failure(
        Prim::Arrayset,
        "arrayset([f64], i64, f64)",
        |b: &mut FuncBuilder<'_>, call: &FruleCall<'_>| emit::primal_only(b, Prim::Arrayset, call),
    );
    assert!(msg.contains("argument 1 after the call"), "{msg}");
}

#[test]
fn a_rule_whose_lanes_disagree_with_width_one_fails() {
    let msg = failure(
        Prim::Sin,
        "sin(f64)",
        |b: &mut FuncBuilder<'_>, call: &FruleCall<'_>| {
            let mut out = emit::primal_only(b, Prim::Sin, call)?;
            let [x] = call.args else {
                return Err(RuleError::Unsupported("one argument".into()));
            };
            let c = emit::value(b, Prim::Cos, &[x.primal])?;
            let mut lanes = emit::Tangents::new();
            for k in 0..call.lanes.count() {
                let t = match x.tangent(k) {
                    Some(t) => t,
                    None => emit::lane_zero(b, call.lanes)?,
                };
                // Lane 0 is right; the others are off by a rounding-size error
                // that finite differences cannot see.
                let f = if k == 0 {
                    c
                } else {
                    emit::value(b, Prim::Mul, &[c, emit::f64c(1.0 + 1e-15)])?
                };
                // Through `lane_mul`, so that the rule also emits in sparse
                // mode (check (d)), where its one lane is right.
                lanes.push(emit::lane_mul(b, f, t)?);
            }
            out.tangents = Some(lanes);
            Ok(out)
        },
    );
    assert!(msg.contains("differs from width 1"), "{msg}");
}

#[test]
fn a_rule_that_cannot_emit_in_sparse_mode_fails() {
    let msg = failure(
        Prim::Sin,
        "sin(f64)",
        |b: &mut FuncBuilder<'_>, call: &FruleCall<'_>| {
            let mut out = emit::primal_only(b, Prim::Sin, call)?;
            let [x] = call.args else {
                return Err(RuleError::Unsupported("one argument".into()));
            };
            let c = emit::value(b, Prim::Cos, &[x.primal])?;
            let mut lanes = emit::Tangents::new();
            for k in 0..call.lanes.count() {
                // `mul` takes f64s only: a dense-only rule.
                let t = x.tangent(k).unwrap_or(emit::f64c(0.0));
                lanes.push(emit::mul(b, c, t)?);
            }
            out.tangents = Some(lanes);
            Ok(out)
        },
    );
    assert!(msg.contains("failed to emit in sparse mode"), "{msg}");
}

#[test]
fn a_rule_whose_sparse_tangent_disagrees_with_width_one_fails() {
    let msg = failure(
        Prim::Sin,
        "sin(f64)",
        |b: &mut FuncBuilder<'_>, call: &FruleCall<'_>| {
            let mut out = emit::primal_only(b, Prim::Sin, call)?;
            let [x] = call.args else {
                return Err(RuleError::Unsupported("one argument".into()));
            };
            let c = emit::value(b, Prim::Cos, &[x.primal])?;
            // Off by a rounding-size error in sparse mode only.
            let f = if call.lanes.is_sparse() {
                emit::value(b, Prim::Mul, &[c, emit::f64c(1.0 + 1e-11)])?
            } else {
                c
            };
            let mut lanes = emit::Tangents::new();
            for k in 0..call.lanes.count() {
                let t = match x.tangent(k) {
                    Some(t) => t,
                    None => emit::lane_zero(b, call.lanes)?,
                };
                lanes.push(emit::lane_mul(b, f, t)?);
            }
            out.tangents = Some(lanes);
            Ok(out)
        },
    );
    assert!(msg.contains("sparse mode: tangent of the result"), "{msg}");
}

#[test]
fn a_rule_without_tangent_arrays_for_an_array_result_fails() {
    let msg = failure(
        Prim::Copy,
        "copy([f64])",
        |b: &mut FuncBuilder<'_>, call: &FruleCall<'_>| emit::primal_only(b, Prim::Copy, call),
    );
    assert!(msg.contains("no tangents"), "{msg}");
}

#[test]
fn a_rule_that_emits_ill_typed_ir_fails() {
    let msg = failure(
        Prim::Sin,
        "sin(f64)",
        |b: &mut FuncBuilder<'_>, call: &FruleCall<'_>| {
            let out = emit::primal_only(b, Prim::Sin, call)?;
            emit::value(b, Prim::Iadd, &[out.primal, out.primal])?;
            Ok(out)
        },
    );
    assert!(
        msg.contains("failed to emit") && msg.contains("iadd"),
        "{msg}"
    );
}
