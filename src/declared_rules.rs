//! The rule tester for rules written in the language (`irad test-rules
//! FILE`, [`check_declared_rules`]): every function of a file whose header
//! declares a `jvp` or a `vjp` is checked like a built-in primitive, at
//! random points, by [`crate::check_grad`] on the function itself (its
//! derivatives then come from its declared rules: the jvp in forward mode,
//! the vjp in reverse mode, the body where it declares only one), against
//! finite differences of its body.
//!
//! Assumes a loaded (verified) module. Guarantees: the points are a
//! function of the seed, the function's name and the sample number only
//! (splitmix64), f64 entries uniform in [-2, 2] and arrays of length 3; a
//! function with a parameter that is neither f64, `[f64]` nor a tuple of
//! them is reported as not checked (give it points with `irad check-grad`),
//! never run on made-up integers.

use crate::check_grad::{GradCheckOptions, check_grad};
use crate::{Error, GradRequest, Source, rules};
use irad_ir::interp::value::Val;
use irad_ir::{FuncId, Module, Scalar, Type};

/// The outcome for one function with declared rules.
#[derive(Clone, Debug)]
pub struct DeclaredRuleReport {
    /// The function.
    pub name: String,
    /// `jvp`, `vjp` or `jvp+vjp`.
    pub rules: String,
    /// Points checked (0 when it could not be checked).
    pub samples: usize,
    /// The largest `|rev - fd| / max(1, |fd|)` seen.
    pub max_fd_error: f64,
    /// The largest `|fwd - rev| / max(1, |rev|)` seen.
    pub max_mode_error: f64,
    /// `None` when every point passed; otherwise what failed first (or why
    /// the function was not checked).
    pub failure: Option<String>,
    /// Whether it was checked at all.
    pub checked: bool,
}

/// What `irad test-rules FILE` found.
#[derive(Clone, Debug)]
pub struct DeclaredRuleChecks {
    /// The source's name.
    pub file: String,
    /// Points per function.
    pub samples: usize,
    /// The seed.
    pub seed: u64,
    /// One report per function with declared rules, in definition order.
    pub reports: Vec<DeclaredRuleReport>,
}

/// Checks every rule declared in `module` at `samples` random points
/// (seeded by `seed`), with `opts`' tolerances. A run-time error of a
/// function or its rules at a point fails that function (with the
/// error's message), it does not stop the others.
///
/// ```
/// use irad::Source;
///
/// let src = Source::new("r.irad", "fn sq(x: f64) -> f64 jvp sq_jvp vjp sq_vjp { x * x }\n\
///     fn sq_jvp(x: f64, dx: f64) -> (f64, f64) { (x * x, 2.0 * x * dx) }\n\
///     fn sq_vjp(x: f64, dy: f64) -> f64 { 2.0 * x * dy }\n");
/// let m = irad::load(&src)?;
/// let registry = irad::rules::Registry::new();
/// let checks = irad::check_declared_rules(&src, &m, &registry, 5, 1, &Default::default());
/// assert_eq!(checks.reports.len(), 1);
/// assert_eq!(checks.reports[0].rules, "jvp+vjp");
/// assert!(checks.verdict().is_ok(), "{}", checks.table());
/// # Ok::<(), irad::Error>(())
/// ```
pub fn check_declared_rules(
    src: &Source,
    module: &Module,
    registry: &rules::Registry,
    samples: usize,
    seed: u64,
    opts: &GradCheckOptions,
) -> DeclaredRuleChecks {
    let mut reports = Vec::new();
    for (id, func) in module.funcs() {
        let declared = module.declared_rules(id);
        if declared.is_empty() {
            continue;
        }
        let rules = match (declared.jvp.is_some(), declared.vjp.is_some()) {
            (true, true) => "jvp+vjp",
            (true, false) => "jvp",
            _ => "vjp",
        };
        let mut report = DeclaredRuleReport {
            name: func.name.clone(),
            rules: rules.to_string(),
            samples: 0,
            max_fd_error: 0.0,
            max_mode_error: 0.0,
            failure: None,
            checked: false,
        };
        let params = func.param_types();
        if let Some(bad) = params.iter().find(|t| !samplable(t)) {
            report.failure = Some(format!(
                "not checked: a parameter of type {bad} needs chosen values (irad check-grad)"
            ));
            reports.push(report);
            continue;
        }
        report.checked = true;
        let mut rng = SplitMix64(seed ^ fnv1a(func.name.as_bytes()));
        for k in 0..samples {
            let args: Vec<Val> = params.iter().map(|t| sample(t, &mut rng)).collect();
            report.samples += 1;
            if let Err(msg) = check_point(src, module, registry, id, &args, opts, &mut report) {
                report.failure = Some(format!("sample {k}: {msg}"));
                break;
            }
        }
        reports.push(report);
    }
    DeclaredRuleChecks {
        file: src.name.clone(),
        samples,
        seed,
        reports,
    }
}

/// One point: updates the maxima; `Err` with what failed.
fn check_point(
    src: &Source,
    module: &Module,
    registry: &rules::Registry,
    f: FuncId,
    args: &[Val],
    opts: &GradCheckOptions,
    report: &mut DeclaredRuleReport,
) -> Result<(), String> {
    let req = GradRequest {
        opts: irad_passes::forward::grad::GradOptions {
            lanes: irad_ir::Lanes::dense(4).unwrap_or(irad_ir::Lanes::ONE),
            ..Default::default()
        },
        ..GradRequest::new(f, args)
    };
    let (check, m) =
        check_grad(src, module, registry, &req, opts).map_err(|e| first_line(&e.render(&[src])))?;
    for e in &check.entries {
        report.max_fd_error = report.max_fd_error.max(e.fd_error);
        report.max_mode_error = report.max_mode_error.max(e.mode_error);
    }
    match check.entries.iter().find(|e| !e.ok) {
        None => Ok(()),
        Some(e) => {
            let shown: Vec<String> = args.iter().map(|a| a.display(&m)).collect();
            Err(format!(
                "d {} / d {} at ({}): reverse {}, forward {}, finite differences {}",
                check.outputs[e.output],
                check.inputs[e.input],
                shown.join(", "),
                Val::F64(e.reverse).display(&m),
                Val::F64(e.forward).display(&m),
                Val::F64(e.fd).display(&m)
            ))
        }
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or("").to_string()
}

impl DeclaredRuleChecks {
    /// How many functions failed or could not be checked.
    pub fn failed(&self) -> usize {
        self.reports.iter().filter(|r| r.failure.is_some()).count()
    }

    /// [`Error::DeclaredRulesFailed`] when a function failed or was not
    /// checked.
    pub fn verdict(&self) -> Result<(), Error> {
        match self.failed() {
            0 => Ok(()),
            failed => Err(Error::DeclaredRulesFailed {
                file: self.file.clone(),
                failed,
                unchecked: self.reports.iter().filter(|r| !r.checked).count(),
                total: self.reports.len(),
            }),
        }
    }

    /// The table for people: one line per function, then a failure
    /// paragraph per failed one, then a summary line.
    pub fn table(&self) -> String {
        let width = self
            .reports
            .iter()
            .map(|r| r.name.len())
            .max()
            .unwrap_or(0)
            .max("function".len());
        let mut out = format!(
            "{:<width$}  {:<7}  {:>7}  {:>9}  {:>9}  verdict\n",
            "function", "rules", "samples", "fd error", "fwd-rev"
        );
        for r in &self.reports {
            let verdict = match (&r.failure, r.checked) {
                (None, _) => "ok",
                (Some(_), true) => "FAIL",
                (Some(_), false) => "skipped",
            };
            out.push_str(&format!(
                "{:<width$}  {:<7}  {:>7}  {:>9.2e}  {:>9.2e}  {verdict}\n",
                r.name, r.rules, r.samples, r.max_fd_error, r.max_mode_error
            ));
        }
        for r in &self.reports {
            if let Some(msg) = &r.failure {
                out.push_str(&format!("\n{} ({}): {msg}\n", r.name, r.rules));
            }
        }
        out.push_str(&format!(
            "\n{} function(s) with declared rules in {}, {} samples each, seed {}: {} ok\n",
            self.reports.len(),
            self.file,
            self.samples,
            self.seed,
            self.reports.len() - self.failed()
        ));
        out
    }

    /// The checks as one JSON object: `{"file", "samples", "seed", "ok",
    /// "functions": [{"name", "rules", "samples", "checked", "max_fd_error",
    /// "max_mode_error", "ok", "message"}, ...]}`.
    pub fn to_json(&self) -> serde_json::Value {
        let module = Module::new();
        let num = |x: f64| crate::value_to_json(&Val::F64(x), &module);
        let functions: Vec<serde_json::Value> = self
            .reports
            .iter()
            .map(|r| {
                serde_json::json!({
                    "name": r.name,
                    "rules": r.rules,
                    "samples": r.samples,
                    "checked": r.checked,
                    "max_fd_error": num(r.max_fd_error),
                    "max_mode_error": num(r.max_mode_error),
                    "ok": r.failure.is_none(),
                    "message": r.failure,
                })
            })
            .collect();
        serde_json::json!({
            "file": self.file,
            "samples": self.samples,
            "seed": self.seed,
            "ok": self.failed() == 0,
            "functions": functions,
        })
    }
}

/// Whether random values of `ty` can be made: f64, `[f64]` and tuples of
/// them.
fn samplable(ty: &Type) -> bool {
    match ty {
        Type::F64 | Type::Array(Scalar::F64) => true,
        Type::Tuple(elems) => elems.iter().all(samplable),
        _ => false,
    }
}

/// A random value of a [`samplable`] type.
fn sample(ty: &Type, rng: &mut SplitMix64) -> Val {
    match ty {
        Type::Array(_) => Val::f64_array((0..3).map(|_| rng.uniform()).collect()),
        Type::Tuple(elems) => Val::Tuple(elems.iter().map(|t| sample(t, rng)).collect()),
        _ => Val::F64(rng.uniform()),
    }
}

/// The splitmix64 generator.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-2, 2), on a grid of 2^-52.
    fn uniform(&mut self) -> f64 {
        let unit = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        4.0 * unit - 2.0
    }
}

/// FNV-1a of `bytes`: a stream per function name.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
