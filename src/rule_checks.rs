//! `irad test-rules`: the reports of the rule checkers over the built-in
//! registry, as the table for people or as JSON (`--json`, docs/cli.md, "JSON
//! output"), and the verdict.
//!
//! Assumes the checkers' reports (`irad_rules::check`) come one per checked
//! rule, named by their signature. Guarantees: the table is the checkers' own
//! ([`irad_rules::check::render_table`]); the JSON says the same things (one
//! entry per signature in the table's order, the summary's counts and
//! largest errors), with non-finite errors as strings as in value JSON.

use crate::Error;
use irad_rules::check::{
    ADJOINT_TOLERANCE, CheckOptions, RuleKind, RuleReport, TOLERANCE, Verdict, check_frules,
    check_rrules, render_table,
};

/// What `irad test-rules` found: every rule check of the built-in registry.
#[derive(Clone, Debug)]
pub struct RuleChecks {
    /// The options the checks ran with.
    pub opts: CheckOptions,
    /// One report per rule checked: the frules, then the rrules.
    pub reports: Vec<RuleReport>,
}

/// Runs the frule and rrule checkers over the built-in registry.
///
/// ```
/// let opts = irad::rules::check::CheckOptions { samples: 2, ..Default::default() };
/// let checks = irad::check_rules(&opts);
/// let j = checks.to_json();
/// assert_eq!(j["ok"], true);
/// assert_eq!(j["summary"]["signatures"].as_u64(), Some(j["signatures"].as_array().unwrap().len() as u64));
/// assert!(checks.table().contains("sin(f64)"));
/// assert!(checks.verdict().is_ok());
/// ```
pub fn check_rules(opts: &CheckOptions) -> RuleChecks {
    let registry = irad_rules::Registry::new();
    let mut reports = check_frules(&registry, opts);
    reports.extend(check_rrules(&registry, opts));
    RuleChecks {
        opts: *opts,
        reports,
    }
}

impl RuleChecks {
    /// The table for people (`irad test-rules` without `--json`).
    pub fn table(&self) -> String {
        render_table(&self.reports, &self.opts)
    }

    /// [`Error::RulesFailed`] when any rule check failed (`total` counts the
    /// frule and the rrule checks).
    pub fn verdict(&self) -> Result<(), Error> {
        let failed = self.failed(None);
        if failed == 0 {
            Ok(())
        } else {
            Err(Error::RulesFailed {
                failed,
                total: self.reports.len(),
            })
        }
    }

    /// The checks as one JSON object: `{"samples", "seed", "ok",
    /// "signatures": [{"name", "frule", "rrule"}, ...], "summary":
    /// {"signatures", "frule", "rrule"}}`; a rule's entry is `{"samples",
    /// "max_error", "ok", "message"}` (`null` for a kind a signature has no
    /// check of), the summary's per kind `{"passed", "failed", "max_error",
    /// "tolerance"}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut names: Vec<&str> = Vec::new();
        for r in &self.reports {
            if !names.contains(&r.name.as_str()) {
                names.push(&r.name);
            }
        }
        let entry = |name: &str, kind: RuleKind| {
            self.reports
                .iter()
                .find(|r| r.name == name && r.kind == kind)
                .map_or(serde_json::Value::Null, |r| {
                    serde_json::json!({
                        "samples": r.samples,
                        "max_error": number(r.max_error),
                        "ok": r.verdict == Verdict::Pass,
                        "message": r.message,
                    })
                })
        };
        let signatures: Vec<serde_json::Value> = names
            .iter()
            .map(|&name| {
                serde_json::json!({
                    "name": name,
                    "frule": entry(name, RuleKind::Frule),
                    "rrule": entry(name, RuleKind::Rrule),
                })
            })
            .collect();
        let summary = |kind: RuleKind, tolerance: f64| {
            let of_kind = self.reports.iter().filter(|r| r.kind == kind);
            let worst = of_kind.clone().map(|r| r.max_error).fold(0.0, f64::max);
            let failed = self.failed(Some(kind));
            serde_json::json!({
                "passed": of_kind.count() - failed,
                "failed": failed,
                "max_error": number(worst),
                "tolerance": tolerance,
            })
        };
        serde_json::json!({
            "samples": self.opts.samples,
            "seed": self.opts.seed,
            "ok": self.failed(None) == 0,
            "signatures": signatures,
            "summary": {
                "signatures": names.len(),
                "frule": summary(RuleKind::Frule, TOLERANCE),
                "rrule": summary(RuleKind::Rrule, ADJOINT_TOLERANCE),
            },
        })
    }

    /// How many checks (of `kind`, or of both kinds) failed.
    fn failed(&self, kind: Option<RuleKind>) -> usize {
        self.reports
            .iter()
            .filter(|r| kind.is_none_or(|k| r.kind == k) && r.verdict != Verdict::Pass)
            .count()
    }
}

/// An error as JSON: a number, or `"inf"`, `"-inf"`, `"nan"` (a rule that
/// computed a non-finite tangent).
fn number(x: f64) -> serde_json::Value {
    crate::value_to_json(&irad_ir::interp::Val::F64(x), &irad_ir::Module::new())
}
