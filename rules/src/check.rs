//! The rule checker: runs every rule of a registry on random points of the
//! test table (`crate::table`) and compares it with its primitive. This file
//! checks frules against finite differences and renders the reports; the
//! rrule checker, which checks the adjoint identity against the frule, is
//! `check/rev.rs` ([`check_rrules`]).
//!
//! For each test signature it builds one module holding the primal `@p(args)
//! -> R` (a call of the primitive) and the rule at widths 1 and 3, `@r1` and
//! `@r3` (`(forward args) -> forward R`: project each dual argument with
//! `primal`/`tangent`, emit the registry's rule, pack with `dual`), verifies
//! it, and runs it in the reference interpreter on fresh copies of the
//! arrays. At each sample point it checks:
//! - (a) the rule's primal result and every argument's final state (arrays
//!   written in place) equal the primal's, bit for bit up to NaN, at both
//!   widths (or both fail with the same run-time error);
//! - (b) each lane's tangent of the result and of every array argument's final
//!   state agrees with central finite differences of the primal along that
//!   lane's direction: step `h = cbrt(eps) * max(1, max |x|)`, error
//!   `|t - fd| / max(1, |fd|)`, pass at most [`TOLERANCE`];
//! - (c) the width-3 lanes equal three width-1 runs with the same directions,
//!   bit for bit;
//! - (d) the rule in sparse forward mode (`@rs`, `check/sparse.rs`: one
//!   direction, each f64 tangent `t` the handle `t * onehot(0)`), on
//!   signatures of f64s and `[f64]`s (all scalar and bulk primitives), gives
//!   the primal's results and lane 0's tangents of the width-1 run within
//!   [`SPARSE_TOLERANCE`] (the builder multiplies the same factors in
//!   another order).
//!
//! Assumes the interpreter is the reference semantics. Guarantees: the result
//! is a function of the registry, the options and the table only (its own
//! splitmix64 generator, one stream per signature so that adding a signature
//! does not change the others' points); it never panics, whatever a rule
//! emits: a rule that fails to emit, emits IR that does not verify, or
//! computes wrong values gives a failing report whose message names the first
//! failure and the point.

use crate::emit;
use crate::table::{Domain, Signature};
use crate::{Callee, FruleCall, FwdArg, Registry, RuleError};
use irad_ir::interp::{ArrayData, ArrayRef, Interpreter, RunOptions, Val};
use irad_ir::text::num::format_f64;
use irad_ir::{FuncBuilder, FuncId, Lanes, Module, Operand, Prim, Scalar, Type};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

mod carrier;
mod error;
mod rev;
mod sparse;

pub use carrier::DIRECTIONS as SPARSE_OPERAND_DIRECTIONS;
pub use error::CheckError;

pub use rev::{ADJOINT_TOLERANCE, check_rrule_signature, check_rrules};

/// The default number of sample points per signature.
pub const DEFAULT_SAMPLES: usize = 50;

/// The default seed.
pub const DEFAULT_SEED: u64 = 0x1ad5_eed5;

/// The largest error `|t - fd| / max(1, |fd|)` a rule may show. Central
/// differences with `h = cbrt(eps)` are good to about `eps^(2/3)`, 4e-11,
/// times the size of the third derivative over the first; 1e-6 leaves room
/// for the steepest points of the table (tan near 1.2, pow near its bounds)
/// and is still far below the error of any wrong formula.
pub const TOLERANCE: f64 = 1e-6;

/// The largest difference `|sparse - dense| / max(1, |dense|)` between the
/// sparse rule's tangent and the width-1 rule's (check (d)).
pub const SPARSE_TOLERANCE: f64 = 1e-12;

/// The longest array the checker samples, whatever a domain asks for.
pub const MAX_SAMPLE_LEN: i64 = 1 << 16;

/// The batch width checked against width 1.
pub const WIDTH: u32 = 3;

/// [`WIDTH`] as lanes.
const WIDTH_LANES: Lanes = match std::num::NonZeroU32::new(WIDTH) {
    Some(n) => Lanes::Dense(n),
    None => Lanes::ONE,
};

/// How to check.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CheckOptions {
    /// Sample points per signature.
    pub samples: usize,
    /// The seed of the random points and directions.
    pub seed: u64,
}

impl Default for CheckOptions {
    fn default() -> CheckOptions {
        CheckOptions {
            samples: DEFAULT_SAMPLES,
            seed: DEFAULT_SEED,
        }
    }
}

/// Whether a rule passed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every sample agreed.
    Pass,
    /// A sample disagreed, or the rule could not be built.
    Fail,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Pass => "ok",
            Verdict::Fail => "FAIL",
        })
    }
}

/// Which rule of a signature a report is about.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum RuleKind {
    /// The forward rule, checked against finite differences ([`check_frules`]).
    Frule,
    /// The reverse rule, checked with the adjoint identity against the frule
    /// ([`check_rrules`]).
    Rrule,
}

impl fmt::Display for RuleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RuleKind::Frule => "frule",
            RuleKind::Rrule => "rrule",
        })
    }
}

/// The outcome of checking one rule of one test signature.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleReport {
    /// The signature, e.g. `sin(f64)`.
    pub name: String,
    /// The primitive.
    pub prim: Prim,
    /// Which rule was checked.
    pub kind: RuleKind,
    /// How many sample points were run (fewer than asked after a failure).
    pub samples: usize,
    /// The largest error seen: for an frule the finite-difference error (0
    /// for rules with no tangent to compare), for an rrule the adjoint error
    /// `|<dy, J dx> - <J^T dy, dx>| / max(1, sum of the terms' magnitudes)`.
    pub max_error: f64,
    /// Pass or fail.
    pub verdict: Verdict,
    /// The first failure: what differed, and at which point.
    pub message: Option<String>,
}

impl RuleReport {
    /// A passing report of no samples yet for `kind` of `sig`.
    pub(crate) fn start(sig: &Signature, kind: RuleKind) -> RuleReport {
        RuleReport {
            name: sig.to_string(),
            prim: sig.prim,
            kind,
            samples: 0,
            max_error: 0.0,
            verdict: Verdict::Pass,
            message: None,
        }
    }

    /// Marks the report failed with `msg`.
    pub(crate) fn fail(mut self, msg: String) -> RuleReport {
        self.verdict = Verdict::Fail;
        self.message = Some(msg);
        self
    }

    /// Runs `n` samples, each giving its error or a failure message; keeps the
    /// largest error and stops at the first failure.
    pub(crate) fn run_samples(
        &mut self,
        n: usize,
        mut sample: impl FnMut() -> Result<f64, String>,
    ) {
        for _ in 0..n {
            self.samples += 1;
            match sample() {
                Ok(err) => self.max_error = self.max_error.max(err),
                Err(msg) => {
                    self.verdict = Verdict::Fail;
                    self.message = Some(msg);
                    break;
                }
            }
        }
    }
}

/// Checks the rule of every signature of the test table.
pub fn check_frules(reg: &Registry, opts: &CheckOptions) -> Vec<RuleReport> {
    crate::table::signatures()
        .iter()
        .map(|sig| check_signature(reg, sig, opts))
        .collect()
}

/// Checks `reg`'s rule for one signature on `opts.samples` random points;
/// stops at the first failing sample.
pub fn check_signature(reg: &Registry, sig: &Signature, opts: &CheckOptions) -> RuleReport {
    let mut report = RuleReport::start(sig, RuleKind::Frule);
    let harness = match Harness::build(reg, sig) {
        Ok(h) => h,
        Err(msg) => return report.fail(msg),
    };
    let mut rng = SplitMix64::new(opts.seed ^ fnv1a(report.name.as_bytes()));
    let mut interp = Interpreter::new(&harness.module);
    report.run_samples(opts.samples, || {
        let point = Point::sample(&mut rng, sig);
        harness
            .check_point(&mut interp, &point)
            .map_err(|msg| format!("{msg}, at {}", point.describe(sig)))
    });
    report
}

/// The reports as a table for people: one line per signature (in order of
/// first appearance) with, for each kind of rule that has reports, the
/// largest error and the verdict (`-` where a signature has no report of that
/// kind), and the samples run; then each failure's message; then a summary
/// naming the options and, per kind, the counts and the tolerance.
pub fn render_table(reports: &[RuleReport], opts: &CheckOptions) -> String {
    let mut rows: Vec<(&str, [Option<&RuleReport>; 2])> = Vec::new();
    let mut row_of: HashMap<&str, usize> = HashMap::new();
    for r in reports {
        let i = *row_of.entry(r.name.as_str()).or_insert_with(|| {
            rows.push((r.name.as_str(), [None, None]));
            rows.len() - 1
        });
        if let Some(row) = rows.get_mut(i) {
            row.1[kind_index(r.kind)] = Some(r);
        }
    }
    let kinds: Vec<RuleKind> = [RuleKind::Frule, RuleKind::Rrule]
        .into_iter()
        .filter(|k| reports.iter().any(|r| r.kind == *k))
        .collect();
    let width = rows
        .iter()
        .map(|r| r.0.len())
        .chain(std::iter::once(4))
        .max()
        .unwrap_or(4);
    let mut out = format!("{:width$}  {:>7}", "rule", "samples");
    for k in &kinds {
        let (error, verdict) = match k {
            RuleKind::Frule => ("fd error", "frule"),
            RuleKind::Rrule => ("adj error", "rrule"),
        };
        out.push_str(&format!("  {error:>9}  {verdict:5}"));
    }
    let mut out = format!("{}\n", out.trim_end());
    for (name, pair) in &rows {
        let mut counts: Vec<usize> = pair.iter().flatten().map(|r| r.samples).collect();
        counts.dedup();
        let samples = counts
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join("/");
        let mut line = format!("{name:width$}  {samples:>7}");
        for k in &kinds {
            match pair[kind_index(*k)] {
                Some(r) => line.push_str(&format!(
                    "  {:>9.2e}  {:5}",
                    r.max_error,
                    r.verdict.to_string()
                )),
                None => line.push_str(&format!("  {:>9}  {:5}", "-", "-")),
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    for r in reports.iter().filter(|r| r.verdict == Verdict::Fail) {
        out.push_str(&format!(
            "\nFAIL {} {}: {}\n",
            r.kind,
            r.name,
            r.message.as_deref().unwrap_or("failed")
        ));
    }
    out.push_str(&format!(
        "\n{} signatures checked, {} samples each, seed {}\n",
        rows.len(),
        opts.samples,
        opts.seed
    ));
    for k in &kinds {
        let of_kind: Vec<&RuleReport> = reports.iter().filter(|r| r.kind == *k).collect();
        let failed = of_kind
            .iter()
            .filter(|r| r.verdict == Verdict::Fail)
            .count();
        let worst = of_kind.iter().map(|r| r.max_error).fold(0.0, f64::max);
        let (what, tolerance) = match k {
            RuleKind::Frule => ("finite-difference", TOLERANCE),
            RuleKind::Rrule => ("adjoint", ADJOINT_TOLERANCE),
        };
        out.push_str(&format!(
            "{k}s: {} passed, {failed} failed; max {what} error {worst:.2e} (tolerance {tolerance:.0e})\n",
            of_kind.len() - failed,
        ));
    }
    out
}

/// Builds, in `module`, the function `@name` that runs `reg`'s rule for `sig`
/// with `lanes` tangents: its parameters are the non-constant arguments'
/// [`Type::forward`] types, it projects each dual parameter into its primal
/// and tangents, emits the rule and returns `dual(primal, tangents...)` (or
/// the primal when the result has no tangent type).
///
/// A rule that returns no tangents for a result holding an array breaks the
/// [`crate::FwdOut`] contract and is an error here.
pub fn rule_function(
    module: &mut Module,
    name: &str,
    reg: &Registry,
    sig: &Signature,
    lanes: Lanes,
) -> Result<FuncId, RuleError> {
    let result = sig.result().map_err(RuleError::Unsupported)?;
    let params = sig
        .args
        .iter()
        .filter(|a| !matches!(a.domain, Domain::Const(_)))
        .map(|a| (None, carrier::carrier(&a.ty).forward(lanes)))
        .collect();
    let f = module.declare_func(name, params, carrier::carrier(&result).forward(lanes))?;
    let mut b = FuncBuilder::new(module, f)?;
    let entry = b.create_block();
    b.switch_to_block(entry)?;
    let mut args = Vec::with_capacity(sig.args.len());
    // The `[sparse]` arrays (primal and tangents) and their carriers, to
    // write back after the rule.
    let mut written: Vec<(Operand, Operand)> = Vec::new();
    let mut next = 0;
    for arg in &sig.args {
        if let Domain::Const(c) = arg.domain {
            args.push(FwdArg {
                primal: Operand::Const(c),
                ty: arg.ty.clone(),
                tangents: None,
            });
            continue;
        }
        let p = Operand::Value(b.param(next)?);
        next += 1;
        if !arg.ty.has_tangent() {
            args.push(FwdArg {
                primal: p,
                ty: arg.ty.clone(),
                tangents: None,
            });
            continue;
        }
        let carried = emit::value(&mut b, Prim::Primal, &[p])?;
        let primal = carrier::decode(&mut b, &arg.ty, carried)?;
        let mut tangents = SmallVec::new();
        let mut carried_tangents = SmallVec::<[Operand; 4]>::new();
        for k in 0..lanes.count() {
            let k =
                i64::try_from(k).map_err(|_| RuleError::Unsupported("too many lanes".into()))?;
            let t = emit::value(&mut b, Prim::Tangent, &[p, Operand::from(k)])?;
            carried_tangents.push(t);
            tangents.push(carrier::decode(&mut b, &arg.ty, t)?);
        }
        if arg.ty == Type::Array(Scalar::Sparse) {
            written.push((primal, carried));
            written.extend(tangents.iter().copied().zip(carried_tangents));
        }
        args.push(FwdArg {
            primal,
            ty: arg.ty.clone(),
            tangents: Some(tangents),
        });
    }
    let rule = reg
        .frule(sig.prim, &sig.types())
        .ok_or_else(|| RuleError::Unsupported(format!("no frule registered for {sig}")))?;
    let call = FruleCall {
        callee: Callee::Prim(sig.prim),
        args: &args,
        result: &result,
        lanes,
    };
    let out = rule.emit(&mut b, &call)?;
    for (a, x) in written {
        carrier::write_back(&mut b, a, x)?;
    }
    let ret = if result.has_tangent() {
        let tangents = match out.tangents {
            Some(t) => t,
            None if emit::contains_array(&result) => {
                return Err(RuleError::Unsupported(format!(
                    "the rule returned no tangents for a result of type {result}, which holds an array"
                )));
            }
            None => emit::zero_tangents(&mut b, &result, out.primal, lanes)?
                .ok_or_else(|| RuleError::Unsupported(format!("{result} has no zero tangent")))?,
        };
        if tangents.len() != lanes.count() {
            return Err(RuleError::Unsupported(format!(
                "the rule returned {} tangents at width {}",
                tangents.len(),
                lanes.code()
            )));
        }
        let mut ops = vec![carrier::encode(&mut b, &result, out.primal)?];
        for t in tangents {
            ops.push(carrier::encode(&mut b, &result, t)?);
        }
        emit::value(&mut b, Prim::Dual, &ops)?
    } else {
        out.primal
    };
    b.ret(ret)?;
    Ok(f)
}

/// A sample value: what an argument, a direction or a final state holds,
/// without the sharing of interpreter arrays, so each run gets fresh copies.
#[derive(Clone, Debug, PartialEq)]
enum Sample {
    F64(f64),
    I64(i64),
    Bool(bool),
    Unit,
    Tuple(Vec<Sample>),
    /// A dual: the primal, then the tangents.
    Dual(Vec<Sample>),
    F64s(Vec<f64>),
    I64s(Vec<i64>),
    Bools(Vec<bool>),
}

/// One sample point: the arguments (`None` for constant operands) and one
/// direction per lane for each argument with a tangent type.
struct Point {
    args: Vec<Option<Sample>>,
    /// `dirs[k][i]`: lane k's direction for argument i.
    dirs: Vec<Vec<Option<Sample>>>,
}

/// The module under test: the primal and the rule at widths 1 and [`WIDTH`].
struct Harness {
    module: Module,
    primal: FuncId,
    rule1: FuncId,
    rule_n: FuncId,
    /// The rule in sparse mode, for signatures of f64s and `[f64]`s.
    rule_s: Option<FuncId>,
    /// The types of the arguments (constants included).
    types: Vec<Type>,
    result: Type,
}

/// What a run left behind: the result and each non-constant argument's final
/// value (arrays read after the call).
struct Outcome {
    result: Val,
    args: Vec<Option<Val>>,
}

impl Harness {
    fn build(reg: &Registry, sig: &Signature) -> Result<Harness, String> {
        let result = sig.result()?;
        let mut module = Module::new();
        let primal = primal_function(&mut module, sig, &result)
            .map_err(|e| format!("cannot build the primal: {e}"))?;
        let rule1 = rule_function(&mut module, "r1", reg, sig, Lanes::ONE)
            .map_err(|e| format!("the rule failed to emit at width 1: {e}"))?;
        let rule_n = rule_function(&mut module, "r3", reg, sig, WIDTH_LANES)
            .map_err(|e| format!("the rule failed to emit at width {WIDTH}: {e}"))?;
        let rule_s = sparse::sparse_rule_function(&mut module, "rs", reg, sig)
            .map_err(|e| format!("the rule failed to emit in sparse mode: {e}"))?;
        if let Err(errs) = irad_ir::verify::verify_module(&module) {
            return Err(format!(
                "the rule's IR does not verify:\n{}",
                irad_ir::verify::render_errors(&module, &errs)
            ));
        }
        Ok(Harness {
            module,
            primal,
            rule1,
            rule_n,
            rule_s,
            types: sig.types().iter().map(carrier::carrier).collect(),
            result: carrier::carrier(&result),
        })
    }

    /// Checks one point; the largest finite-difference error, or what failed.
    fn check_point(&self, interp: &mut Interpreter<'_>, p: &Point) -> Result<f64, CheckError> {
        let primal = self.run(interp, self.primal, &p.args, &[])?;
        let mut lanes1 = Vec::new();
        for (k, dir) in p.dirs.iter().enumerate() {
            let run = self.run(interp, self.rule1, &p.args, std::slice::from_ref(dir))?;
            self.same_primal(&primal, &run)
                .map_err(|e| format!("width 1, lane {k}: {e}"))?;
            lanes1.push(run);
        }
        let run_n = self.run(interp, self.rule_n, &p.args, &p.dirs)?;
        self.same_primal(&primal, &run_n)
            .map_err(|e| format!("width {WIDTH}: {e}"))?;
        self.check_sparse(interp, p, &primal, lanes1.first())?;
        let (Ok(_), Ok(run_n)) = (&primal, &run_n) else {
            // Both failed with the same error: nothing more to compare.
            return Ok(0.0);
        };
        let mut max_err: f64 = 0.0;
        for (k, run1) in lanes1.iter().enumerate() {
            let Ok(run1) = run1 else {
                return Err(format!("width 1, lane {k}: the rule failed to run").into());
            };
            let tan1 = self.tangent_leaves(run1, 0)?;
            let tan_n = self.tangent_leaves(run_n, k)?;
            if let Some(at) = first_difference(&tan1, &tan_n) {
                return Err(format!(
                    "lane {k} at width {WIDTH} differs from width 1 at {}: {} != {}",
                    at.0,
                    format_f64(at.1),
                    format_f64(at.2)
                )
                .into());
            }
            let fd = self.finite_differences(interp, &p.args, &p.dirs[k])?;
            if fd.len() != tan1.len() {
                return Err(format!(
                    "lane {k}: the rule gives {} tangent components, the primal {}",
                    tan1.len(),
                    fd.len()
                )
                .into());
            }
            for ((what, t), (_, d)) in tan1.iter().zip(&fd) {
                let err = fd_error(*t, *d);
                if err > TOLERANCE || err.is_nan() {
                    return Err(format!(
                        "lane {k}: tangent of {what} is {}, finite differences give {} (error {err:.3e})",
                        format_f64(*t),
                        format_f64(*d)
                    )
                    .into());
                }
                max_err = max_err.max(err);
            }
        }
        Ok(max_err)
    }

    /// (d): the sparse rule along lane 0's direction gives the primal's
    /// results and the width-1 run's tangents within [`SPARSE_TOLERANCE`].
    fn check_sparse(
        &self,
        interp: &mut Interpreter<'_>,
        p: &Point,
        primal: &Result<Outcome, String>,
        run1: Option<&Result<Outcome, String>>,
    ) -> Result<(), CheckError> {
        let (Some(rule_s), Some(dir), Some(run1)) = (self.rule_s, p.dirs.first(), run1) else {
            return Ok(());
        };
        let run_s = self.run(interp, rule_s, &p.args, std::slice::from_ref(dir))?;
        self.same_primal(primal, &run_s)
            .map_err(|e| format!("sparse mode: {e}"))?;
        let (Ok(run1), Ok(run_s)) = (run1, &run_s) else {
            return Ok(());
        };
        let dense = self.tangent_leaves(run1, 0)?;
        let sparse = self.tangent_leaves(run_s, 0)?;
        if dense.len() != sparse.len() {
            return Err(format!(
                "sparse mode gives {} tangent components, width 1 {}",
                sparse.len(),
                dense.len()
            )
            .into());
        }
        for ((what, d), (_, s)) in dense.iter().zip(&sparse) {
            let same = d.to_bits() == s.to_bits()
                || (d.is_nan() && s.is_nan())
                || (d - s).abs() <= SPARSE_TOLERANCE * d.abs().max(1.0);
            if !same {
                return Err(format!(
                    "sparse mode: tangent of {what} is {}, width 1 gives {}",
                    format_f64(*s),
                    format_f64(*d)
                )
                .into());
            }
        }
        Ok(())
    }

    /// Runs `f` on the point's arguments (fresh arrays), as duals with the
    /// given lanes' directions when `dirs` is not empty: its outcome or its
    /// run-time error (inner), or a bug of the checker (outer).
    fn run(
        &self,
        interp: &mut Interpreter<'_>,
        f: FuncId,
        args: &[Option<Sample>],
        dirs: &[Vec<Option<Sample>>],
    ) -> Result<Result<Outcome, String>, CheckError> {
        run_function(interp, f, &self.types, args, dirs)
    }

    /// (a): the rule's primal result and arguments' final primal states are
    /// the primal's, or both runs failed with the same error.
    fn same_primal(
        &self,
        primal: &Result<Outcome, String>,
        rule: &Result<Outcome, String>,
    ) -> Result<(), String> {
        match (primal, rule) {
            (Err(a), Err(b)) if a == b => Ok(()),
            (Err(a), Err(b)) => Err(format!("the primal fails with `{a}`, the rule with `{b}`")),
            (Err(a), Ok(_)) => Err(format!("the primal fails with `{a}`, the rule does not")),
            (Ok(_), Err(b)) => Err(format!("the rule fails with `{b}`, the primal does not")),
            (Ok(p), Ok(r)) => {
                let r_primal = primal_part(&r.result, &self.result);
                if !p.result.same(&r_primal) {
                    return Err(format!(
                        "primal result {} differs from the primitive's {}",
                        show(&r_primal),
                        show(&p.result)
                    ));
                }
                for (i, (pa, ra)) in p.args.iter().zip(&r.args).enumerate() {
                    let (Some(pa), Some(ra), Some(ty)) = (pa, ra, self.types.get(i)) else {
                        continue;
                    };
                    let ra = primal_part(ra, ty);
                    if !pa.same(&ra) {
                        return Err(format!(
                            "argument {} is {} after the rule, {} after the primitive",
                            i + 1,
                            show(&ra),
                            show(pa)
                        ));
                    }
                }
                Ok(())
            }
        }
    }

    /// Lane `k`'s tangent components, named: the result's, then each array
    /// argument's final tangent.
    fn tangent_leaves(&self, run: &Outcome, k: usize) -> Result<Vec<(String, f64)>, CheckError> {
        let mut out = Vec::new();
        if self.result.has_tangent() {
            let t = lane(&run.result, k).ok_or("the rule's result is not a dual")?;
            leaves(&t, &self.result, "the result", &mut out)?;
        }
        for (i, arg) in run.args.iter().enumerate() {
            let (Some(v), Some(ty)) = (arg, self.types.get(i)) else {
                continue;
            };
            if emit::contains_array(ty) && ty.has_tangent() {
                let t = lane(v, k).ok_or("an argument is not a dual")?;
                leaves(
                    &t,
                    ty,
                    &format!("argument {} after the call", i + 1),
                    &mut out,
                )?;
            }
        }
        Ok(out)
    }

    /// Central differences of the primal along `dir`: the same components as
    /// [`Harness::tangent_leaves`].
    fn finite_differences(
        &self,
        interp: &mut Interpreter<'_>,
        args: &[Option<Sample>],
        dir: &[Option<Sample>],
    ) -> Result<Vec<(String, f64)>, CheckError> {
        let scale = args
            .iter()
            .flatten()
            .map(Sample::max_abs)
            .fold(1.0, f64::max);
        let h = f64::EPSILON.cbrt() * scale;
        let shifted = |sign: f64| -> Vec<Option<Sample>> {
            args.iter()
                .zip(dir)
                .map(|(x, d)| match (x, d) {
                    (Some(x), Some(d)) => Some(x.axpy(sign * h, d)),
                    (x, _) => x.clone(),
                })
                .collect()
        };
        let plus = self
            .run(interp, self.primal, &shifted(1.0), &[])?
            .map_err(|e| format!("the primal fails at x + h*d: {e}"))?;
        let minus = self
            .run(interp, self.primal, &shifted(-1.0), &[])?
            .map_err(|e| format!("the primal fails at x - h*d: {e}"))?;
        let hi = self.primal_leaves(&plus)?;
        let lo = self.primal_leaves(&minus)?;
        Ok(hi
            .into_iter()
            .zip(lo)
            .map(|((what, a), (_, b))| (what, (a - b) / (2.0 * h)))
            .collect())
    }

    /// The f64 components of a primal run, in the order of
    /// [`Harness::tangent_leaves`].
    fn primal_leaves(&self, run: &Outcome) -> Result<Vec<(String, f64)>, CheckError> {
        let mut out = Vec::new();
        if self.result.has_tangent() {
            leaves(&run.result, &self.result, "the result", &mut out)?;
        }
        for (i, arg) in run.args.iter().enumerate() {
            let (Some(v), Some(ty)) = (arg, self.types.get(i)) else {
                continue;
            };
            if emit::contains_array(ty) && ty.has_tangent() {
                leaves(
                    v,
                    ty,
                    &format!("argument {} after the call", i + 1),
                    &mut out,
                )?;
            }
        }
        Ok(out)
    }
}

impl Point {
    fn sample(rng: &mut SplitMix64, sig: &Signature) -> Point {
        let mut args: Vec<Option<Sample>> = Vec::with_capacity(sig.args.len());
        for spec in &sig.args {
            let x = match &spec.domain {
                Domain::Const(_) => None,
                d => Some(sample_domain(rng, d, &args)),
            };
            args.push(x);
        }
        let dirs = (0..WIDTH)
            .map(|_| {
                sig.args
                    .iter()
                    .zip(&args)
                    .map(|(spec, x)| match x {
                        Some(x) if spec.ty.has_tangent() => Some(direction(rng, x)),
                        _ => None,
                    })
                    .collect()
            })
            .collect();
        Point { args, dirs }
    }

    /// `sin(0.5)` with the lane directions: `sin(0.5), directions (0.1), ...`.
    fn describe(&self, sig: &Signature) -> String {
        let list = |xs: &[Option<Sample>], consts: bool| -> String {
            xs.iter()
                .zip(&sig.args)
                .filter_map(|(x, spec)| match (x, &spec.domain) {
                    (Some(x), _) => Some(x.to_string()),
                    (None, Domain::Const(c)) if consts => Some(crate::table::const_text(c)),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let dirs: Vec<String> = self
            .dirs
            .iter()
            .map(|d| format!("({})", list(d, false)))
            .collect();
        format!(
            "{}({}), lane directions {}",
            sig.prim,
            list(&self.args, true),
            dirs.join(", ")
        )
    }
}

impl Sample {
    /// A fresh interpreter value: arrays are new buffers.
    fn to_val(&self) -> Val {
        match self {
            Sample::F64(x) => Val::F64(*x),
            Sample::I64(k) => Val::I64(*k),
            Sample::Bool(b) => Val::Bool(*b),
            Sample::Unit => Val::Unit,
            Sample::Tuple(xs) => Val::Tuple(xs.iter().map(Sample::to_val).collect()),
            Sample::Dual(xs) => Val::Dual(xs.iter().map(Sample::to_val).collect()),
            Sample::F64s(xs) => Val::f64_array(xs.clone()),
            Sample::I64s(xs) => Val::Array(ArrayRef::new(ArrayData::I64(xs.clone()))),
            Sample::Bools(xs) => Val::Array(ArrayRef::new(ArrayData::Bool(xs.clone()))),
        }
    }

    /// `self + a * d` on the f64 components that `d` has (the others kept).
    fn axpy(&self, a: f64, d: &Sample) -> Sample {
        match (self, d) {
            (Sample::F64(x), Sample::F64(t)) => Sample::F64(x + a * t),
            (Sample::F64s(xs), Sample::F64s(ts)) => {
                Sample::F64s(xs.iter().zip(ts).map(|(x, t)| x + a * t).collect())
            }
            (Sample::Tuple(xs), Sample::Tuple(ts)) => {
                Sample::Tuple(xs.iter().zip(ts).map(|(x, t)| x.axpy(a, t)).collect())
            }
            (Sample::Dual(xs), Sample::Dual(ts)) => {
                Sample::Dual(xs.iter().zip(ts).map(|(x, t)| x.axpy(a, t)).collect())
            }
            (x, _) => x.clone(),
        }
    }

    /// The largest magnitude of an f64 component (0 when there is none).
    fn max_abs(&self) -> f64 {
        match self {
            Sample::F64(x) => x.abs(),
            Sample::F64s(xs) => xs.iter().fold(0.0, |m, x| m.max(x.abs())),
            Sample::Tuple(xs) => xs.iter().fold(0.0, |m, x| m.max(x.max_abs())),
            _ => 0.0,
        }
    }
}

impl fmt::Display for Sample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn list<T>(
            f: &mut fmt::Formatter<'_>,
            xs: &[T],
            show: impl Fn(&T) -> String,
        ) -> fmt::Result {
            let parts: Vec<String> = xs.iter().map(show).collect();
            write!(f, "[{}]", parts.join(", "))
        }
        match self {
            Sample::F64(x) => f.write_str(&format_f64(*x)),
            Sample::I64(k) => write!(f, "{k}"),
            Sample::Bool(b) => write!(f, "{b}"),
            Sample::Unit => f.write_str("()"),
            Sample::Tuple(xs) => {
                let parts: Vec<String> = xs.iter().map(Sample::to_string).collect();
                if parts.len() == 1 {
                    write!(f, "({},)", parts.join(", "))
                } else {
                    write!(f, "({})", parts.join(", "))
                }
            }
            Sample::Dual(xs) => {
                let parts: Vec<String> = xs.iter().map(Sample::to_string).collect();
                write!(f, "dual({})", parts.join(", "))
            }
            Sample::F64s(xs) => list(f, xs, |x| format_f64(*x)),
            Sample::I64s(xs) => list(f, xs, i64::to_string),
            Sample::Bools(xs) => list(f, xs, bool::to_string),
        }
    }
}

/// A value drawn from `d`; `earlier` holds the arguments drawn before (for
/// indices and `Apart`).
fn sample_domain(rng: &mut SplitMix64, d: &Domain, earlier: &[Option<Sample>]) -> Sample {
    match d {
        Domain::F64 { lo, hi } => Sample::F64(rng.uniform(*lo, *hi)),
        Domain::Magnitude { lo, hi } => Sample::F64(rng.sign() * rng.uniform(*lo, *hi)),
        Domain::AwayFromSteps {
            lo,
            hi,
            offset,
            margin,
        } => {
            let ok = |x: f64| {
                let r = (x - offset).rem_euclid(1.0);
                r >= *margin && r <= 1.0 - margin
            };
            Sample::F64(rng.uniform_where(*lo, *hi, ok))
        }
        Domain::Apart { lo, hi, from, gap } => {
            let other = match earlier.get(*from) {
                Some(Some(Sample::F64(x))) => *x,
                _ => f64::NAN,
            };
            Sample::F64(
                rng.uniform_where(*lo, *hi, |x| other.is_nan() || (x - other).abs() >= *gap),
            )
        }
        Domain::I64 { lo, hi } => Sample::I64(rng.int(*lo, *hi)),
        Domain::I64Magnitude { lo, hi } => {
            let k = rng.int(*lo, *hi);
            Sample::I64(if rng.sign() < 0.0 {
                k.wrapping_neg()
            } else {
                k
            })
        }
        Domain::Bool => Sample::Bool(rng.next() & 1 == 1),
        Domain::Index { of } => {
            let len = match earlier.get(*of) {
                Some(Some(Sample::F64s(xs))) => xs.len(),
                Some(Some(Sample::I64s(xs))) => xs.len(),
                Some(Some(Sample::Bools(xs))) => xs.len(),
                _ => 0,
            };
            let top = i64::try_from(len)
                .unwrap_or(i64::MAX)
                .saturating_sub(1)
                .max(0);
            Sample::I64(rng.int(0, top))
        }
        Domain::Array { elem, lo, hi, len } => {
            let lo_len = i64::try_from(len.0).unwrap_or(0);
            // Capped, so that a table entry cannot ask for more memory than a
            // test deserves.
            let hi_len = i64::try_from(len.1)
                .unwrap_or(MAX_SAMPLE_LEN)
                .min(MAX_SAMPLE_LEN)
                .max(lo_len.min(MAX_SAMPLE_LEN));
            let lo_len = lo_len.min(hi_len);
            let n = usize::try_from(rng.int(lo_len, hi_len)).unwrap_or(0);
            match elem {
                irad_ir::Scalar::F64 => {
                    Sample::F64s((0..n).map(|_| rng.uniform(*lo, *hi)).collect())
                }
                irad_ir::Scalar::I64 => Sample::I64s(
                    (0..n)
                        .map(|_| rng.uniform(*lo, *hi).round() as i64)
                        .collect(),
                ),
                irad_ir::Scalar::Bool => {
                    Sample::Bools((0..n).map(|_| rng.next() & 1 == 1).collect())
                }
                // Handles are sampled by `Domain::Handles`.
                irad_ir::Scalar::Sparse => Sample::Unit,
            }
        }
        Domain::Tuple(ds) => {
            Sample::Tuple(ds.iter().map(|d| sample_domain(rng, d, earlier)).collect())
        }
        Domain::Dual(ds) => {
            Sample::Dual(ds.iter().map(|d| sample_domain(rng, d, earlier)).collect())
        }
        Domain::Handles { len } => {
            let n = len.unwrap_or(1).min(MAX_SAMPLE_LEN as usize);
            let count = n.saturating_mul(carrier::DIRECTIONS as usize);
            Sample::F64s((0..count).map(|_| rng.uniform(-2.0, 2.0)).collect())
        }
        Domain::Const(_) => Sample::Unit,
    }
}

/// A random tangent direction for the value `x`: each f64 component uniform
/// in [-1, 1], `()` for components without a tangent type; for a dual (in
/// the rrule checker, which differentiates duals as the tuples of their
/// parts), a direction for each part.
fn direction(rng: &mut SplitMix64, x: &Sample) -> Sample {
    match x {
        Sample::Dual(xs) => Sample::Dual(xs.iter().map(|x| direction(rng, x)).collect()),
        Sample::F64(_) => Sample::F64(rng.uniform(-1.0, 1.0)),
        Sample::F64s(xs) => Sample::F64s(xs.iter().map(|_| rng.uniform(-1.0, 1.0)).collect()),
        Sample::Tuple(xs) => Sample::Tuple(
            xs.iter()
                .map(|x| {
                    if x.has_cotangent() {
                        direction(rng, x)
                    } else {
                        Sample::Unit
                    }
                })
                .collect(),
        ),
        _ => Sample::Unit,
    }
}

impl Sample {
    /// Whether the value holds an f64 or an `[f64]` (also in the parts of a
    /// dual): its type has a tangent type, or is a dual.
    fn has_cotangent(&self) -> bool {
        match self {
            Sample::F64(_) | Sample::F64s(_) => true,
            Sample::Tuple(xs) | Sample::Dual(xs) => xs.iter().any(Sample::has_cotangent),
            _ => false,
        }
    }
}

/// The primal of a value of type `ty` that a rule function returned or took:
/// element 0 of a dual, the value itself when `ty` has no tangent.
fn primal_part(v: &Val, ty: &Type) -> Val {
    match v {
        Val::Dual(parts) if ty.has_tangent() => parts.first().cloned().unwrap_or(Val::Unit),
        _ => v.clone(),
    }
}

/// Lane `k`'s tangent of a dual value.
fn lane(v: &Val, k: usize) -> Option<Val> {
    match v {
        Val::Dual(parts) => parts.get(k + 1).cloned(),
        _ => None,
    }
}

/// Appends the f64 components of `v`, a value of type `ty` or of its tangent
/// type, named after `what`: f64s, `[f64]` elements, tuple elements that
/// have a tangent type, and the parts of duals in order.
fn leaves(v: &Val, ty: &Type, what: &str, out: &mut Vec<(String, f64)>) -> Result<(), CheckError> {
    match (ty, v) {
        (Type::F64, Val::F64(x)) => out.push((what.to_string(), *x)),
        (Type::Array(irad_ir::Scalar::F64), Val::Array(a)) => {
            let data =
                a.0.try_borrow()
                    .map_err(|_| CheckError::internal("array is borrowed"))?;
            let ArrayData::F64(xs) = &*data else {
                return Err(format!("{what} is not an f64 array").into());
            };
            for (j, x) in xs.iter().enumerate() {
                out.push((format!("{what}[{j}]"), *x));
            }
        }
        (Type::Tuple(elems), Val::Tuple(vals)) if elems.len() == vals.len() => {
            for (j, (e, x)) in elems.iter().zip(vals.iter()).enumerate() {
                if e.has_tangent() {
                    leaves(x, e, &format!("{what}.{j}"), out)?;
                }
            }
        }
        (Type::Dual(..), Val::Dual(parts)) => {
            // The parts in order, as forward mode over a forward rule sees
            // a dual (a value of the dual's tangent type is a dual too).
            let Some((inner, tan, lanes)) = ty.dual_parts().filter(|p| p.2 + 1 == parts.len())
            else {
                return Err(format!("{what} has {} parts, expected a {ty}", parts.len()).into());
            };
            leaves(&parts[0], inner, &format!("{what}.primal"), out)?;
            for k in 0..lanes {
                leaves(&parts[k + 1], &tan, &format!("{what}.tangent{k}"), out)?;
            }
        }
        _ if !ty.has_tangent() => {}
        _ => return Err(format!("{what} is a {}, expected a {ty}", v.kind()).into()),
    }
    Ok(())
}

/// The first position where two named component lists differ bit for bit
/// (NaN equal to NaN), or where one is longer: (name, left, right).
fn first_difference(a: &[(String, f64)], b: &[(String, f64)]) -> Option<(String, f64, f64)> {
    if a.len() != b.len() {
        return Some((
            format!("{} vs {} components", a.len(), b.len()),
            f64::NAN,
            f64::NAN,
        ));
    }
    a.iter().zip(b).find_map(|((what, x), (_, y))| {
        let same = (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits();
        (!same).then(|| (what.clone(), *x, *y))
    })
}

/// `|t - fd| / max(1, |fd|)`; 0 when both are the same non-finite value,
/// infinite when only one is finite.
fn fd_error(t: f64, fd: f64) -> f64 {
    if t.is_finite() && fd.is_finite() {
        (t - fd).abs() / fd.abs().max(1.0)
    } else if (t.is_nan() && fd.is_nan()) || t == fd {
        0.0
    } else {
        f64::INFINITY
    }
}

/// A value for a message, without module context (function values print as
/// their kind).
fn show(v: &Val) -> String {
    match v {
        Val::F64(x) => format_f64(*x),
        Val::I64(k) => k.to_string(),
        Val::Bool(b) => b.to_string(),
        Val::Unit => "()".into(),
        Val::Tuple(xs) | Val::Dual(xs) => {
            let parts: Vec<String> = xs.iter().map(show).collect();
            format!("({})", parts.join(", "))
        }
        Val::Array(a) => match a.0.try_borrow() {
            Ok(data) => {
                let parts: Vec<String> = (0..data.len())
                    .filter_map(|i| data.get(i))
                    .map(|x| show(&x))
                    .collect();
                format!("[{}]", parts.join(", "))
            }
            Err(_) => "[..]".into(),
        },
        Val::Func(_) => "function".into(),
        Val::Sparse(h) => format!("sparse#{h}"),
    }
}

/// `@p(args) -> R`: one call of the primitive on the non-constant arguments
/// and the constants of the signature.
fn primal_function(
    module: &mut Module,
    sig: &Signature,
    result: &Type,
) -> Result<FuncId, RuleError> {
    let params = sig
        .args
        .iter()
        .filter(|a| !matches!(a.domain, Domain::Const(_)))
        .map(|a| (None, carrier::carrier(&a.ty)))
        .collect();
    let f = module.declare_func("p", params, carrier::carrier(result))?;
    let mut b = FuncBuilder::new(module, f)?;
    let entry = b.create_block();
    b.switch_to_block(entry)?;
    let mut ops = Vec::with_capacity(sig.args.len());
    let mut written = Vec::new();
    let mut next = 0;
    for arg in &sig.args {
        match arg.domain {
            Domain::Const(c) => ops.push(Operand::Const(c)),
            _ => {
                let x = Operand::Value(b.param(next)?);
                let v = carrier::decode(&mut b, &arg.ty, x)?;
                if arg.ty == Type::Array(Scalar::Sparse) {
                    written.push((v, x));
                }
                ops.push(v);
                next += 1;
            }
        }
    }
    let ret = match (sig.prim, result, ops.as_slice()) {
        (Prim::Alloc, Type::Array(elem), [n]) => Operand::Value(b.alloc(*elem, *n)?),
        _ => b
            .prim(sig.prim, &ops)?
            .map_or_else(emit::unit, Operand::Value),
    };
    for (a, x) in written {
        carrier::write_back(&mut b, a, x)?;
    }
    let ret = carrier::encode(&mut b, result, ret)?;
    b.ret(ret)?;
    Ok(f)
}

/// Runs `f` on `args` (fresh arrays; `None` for constant operands, which are
/// not parameters), as duals with the given lanes' directions when `dirs` is
/// not empty; `types` are the types of all the arguments. The inner error is
/// `f`'s run-time error (an outcome to compare), the outer one a bug of the
/// checker.
fn run_function(
    interp: &mut Interpreter<'_>,
    f: FuncId,
    types: &[Type],
    args: &[Option<Sample>],
    dirs: &[Vec<Option<Sample>>],
) -> Result<Result<Outcome, String>, CheckError> {
    let mut vals = Vec::new();
    let mut slots = Vec::new();
    for (i, arg) in args.iter().enumerate() {
        let Some(x) = arg else {
            slots.push(None);
            continue;
        };
        let ty = types
            .get(i)
            .ok_or_else(|| CheckError::internal("argument type"))?;
        let v = if !dirs.is_empty() && ty.has_tangent() {
            let mut parts = vec![x.to_val()];
            for lane in dirs {
                let d = lane
                    .get(i)
                    .and_then(Option::as_ref)
                    .ok_or_else(|| CheckError::internal("missing direction"))?;
                parts.push(d.to_val());
            }
            Val::Dual(Rc::from(parts))
        } else {
            x.to_val()
        };
        slots.push(Some(vals.len()));
        vals.push(v);
    }
    let result = match interp.run(f, &vals, &RunOptions::default()) {
        Ok(result) => result,
        Err(e) => return Ok(Err(e.msg)),
    };
    let args = slots
        .into_iter()
        .map(|s| s.and_then(|j| vals.get(j).cloned()))
        .collect();
    Ok(Ok(Outcome { result, args }))
}

/// The column of a kind of rule in [`render_table`]'s rows.
fn kind_index(k: RuleKind) -> usize {
    match k {
        RuleKind::Frule => 0,
        RuleKind::Rrule => 1,
    }
}

/// FNV-1a, to give each signature its own random stream.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The splitmix64 generator (Steele, Lea, Flood 2014): tiny, fast, and good
/// enough for sample points.
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// Uniform in [lo, hi] among the points where `ok` holds (rejection,
    /// at most 1000 tries, then the midpoint).
    fn uniform_where(&mut self, lo: f64, hi: f64, ok: impl Fn(f64) -> bool) -> f64 {
        for _ in 0..1000 {
            let x = self.uniform(lo, hi);
            if ok(x) {
                return x;
            }
        }
        (lo + hi) / 2.0
    }

    fn sign(&mut self) -> f64 {
        if self.next() & 1 == 1 { -1.0 } else { 1.0 }
    }

    /// Uniform in `lo..=hi` (`lo` when the range is empty).
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        let span = (hi as i128 - lo as i128 + 1) as u128;
        let r = u128::from(self.next()) % span;
        (lo as i128 + r as i128) as i64
    }
}
