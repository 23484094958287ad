//! Gradient checking of user functions (`irad check-grad`, [`check_grad`]):
//! the derivative of every f64 entry of a function's result with respect to
//! every f64 entry of its arguments, by reverse mode and by forward mode,
//! against finite differences of the function itself.
//!
//! Assumes the function runs at the arguments and at small perturbations of
//! them (a run-time error there is reported as the program's error).
//! Guarantees:
//! - the finite differences run the function as written (the module given,
//!   not its normalised or derived forms) on the same backend as the
//!   derivatives, one fresh copy of the arguments per run;
//! - each entry compares reverse mode with the finite difference
//!   (`|rev - fd| / max(1, |fd|)`, the rule checker's measure) and forward
//!   mode with reverse mode (`|fwd - rev| / max(1, |rev|)`); an entry that
//!   is not finite passes only where both sides are the same non-finite
//!   value (NaN with NaN, an infinity with the same infinity);
//! - the finite difference is the fourth-order central one,
//!   `(8 (f(x+h) - f(x-h)) - (f(x+2h) - f(x-2h))) / (12 h)` with
//!   `h = eps^(1/5) * max(1, |x|)` (rounded so that `x + h - x` is exactly
//!   `h`): its error is about `eps^(4/5)`, 3e-13, times the size of the
//!   fifth derivative, so that the default tolerance of 1e-6 leaves room for
//!   steep functions and still catches any wrong formula; a kink (`abs`,
//!   `max`, a branch) closer than 2h to x makes it meaningless there, which
//!   the entry then shows as a failure.

use crate::deriv::{check_call, executor, f64_leaves, like_with, run_on};
use crate::{Error, GradRequest, Mode, Source, rules};
use irad_ir::interp::value::Val;
use irad_ir::{Module, Type};
use irad_passes::forward::Forward;

/// The largest `|rev - fd| / max(1, |fd|)` an entry may show by default (as
/// `irad test-rules` allows its rules).
pub const FD_TOLERANCE: f64 = 1e-6;

/// The largest `|fwd - rev| / max(1, |rev|)` an entry may show by default:
/// the two modes compute the same sums in different orders, so they agree to
/// a few rounding errors.
pub const MODE_TOLERANCE: f64 = 1e-9;

/// How strict [`check_grad`] is.
#[derive(Clone, Debug)]
pub struct GradCheckOptions {
    /// The largest error against finite differences ([`FD_TOLERANCE`]).
    pub tolerance: f64,
    /// The largest error of forward mode against reverse mode
    /// ([`MODE_TOLERANCE`]).
    pub mode_tolerance: f64,
}

impl Default for GradCheckOptions {
    fn default() -> GradCheckOptions {
        GradCheckOptions {
            tolerance: FD_TOLERANCE,
            mode_tolerance: MODE_TOLERANCE,
        }
    }
}

/// One derivative checked: d `outputs[output]` / d `inputs[input]`.
#[derive(Clone, Debug, PartialEq)]
pub struct GradCheckEntry {
    /// The result entry (an index into [`GradCheck::outputs`]).
    pub output: usize,
    /// The argument entry (an index into [`GradCheck::inputs`]).
    pub input: usize,
    /// By reverse mode.
    pub reverse: f64,
    /// By forward mode.
    pub forward: f64,
    /// By finite differences.
    pub fd: f64,
    /// `|reverse - fd| / max(1, |fd|)` (infinite where exactly one side is
    /// not finite or they are different non-finite values, 0 where both are
    /// the same non-finite value).
    pub fd_error: f64,
    /// `|forward - reverse| / max(1, |reverse|)`, non-finite values as for
    /// `fd_error`.
    pub mode_error: f64,
    /// Whether both errors are within their tolerances.
    pub ok: bool,
}

/// What [`check_grad`] found.
#[derive(Clone, Debug)]
pub struct GradCheck {
    /// The function's value at the arguments.
    pub value: Val,
    /// The labels of the result's f64 entries (`value`, `value.0`,
    /// `value[2]`, ...).
    pub outputs: Vec<String>,
    /// The labels of the arguments' f64 entries (`%x`, `%y[0]`, ...).
    pub inputs: Vec<String>,
    /// One entry per (output, input), outputs in order, inputs in order
    /// within each.
    pub entries: Vec<GradCheckEntry>,
    /// The options it was checked with.
    pub opts: GradCheckOptions,
}

impl GradCheck {
    /// How many entries failed.
    pub fn failed(&self) -> usize {
        self.entries.iter().filter(|e| !e.ok).count()
    }

    /// [`Error::GradCheckFailed`] (naming `file` and the function `func`)
    /// when an entry failed.
    pub fn verdict(&self, file: &str, func: &str) -> Result<(), Error> {
        match self.failed() {
            0 => Ok(()),
            failed => Err(Error::GradCheckFailed {
                file: file.to_string(),
                func: func.to_string(),
                failed,
                total: self.entries.len(),
            }),
        }
    }

    /// The checks as a table, one line per entry, then a summary line.
    /// Numbers are printed as `irad` prints f64 values (shortest round
    /// trip), errors in scientific notation.
    pub fn table(&self, module: &Module) -> String {
        let num = |x: f64| Val::F64(x).display(module);
        let mut rows = vec![[
            "output".to_string(),
            "input".to_string(),
            "reverse".to_string(),
            "forward".to_string(),
            "finite diff".to_string(),
            "fd error".to_string(),
            "fwd-rev".to_string(),
            String::new(),
        ]];
        for e in &self.entries {
            rows.push([
                self.outputs[e.output].clone(),
                self.inputs[e.input].clone(),
                num(e.reverse),
                num(e.forward),
                num(e.fd),
                format!("{:.2e}", e.fd_error),
                format!("{:.2e}", e.mode_error),
                if e.ok { "ok" } else { "FAIL" }.to_string(),
            ]);
        }
        let mut widths = [0usize; 8];
        for r in &rows {
            for (w, cell) in widths.iter_mut().zip(r) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = format!("value: {}\n", self.value.display(module));
        for r in &rows {
            let cells: Vec<String> = r
                .iter()
                .zip(widths)
                .enumerate()
                .map(|(i, (cell, w))| {
                    if (2..7).contains(&i) {
                        format!("{cell:>w$}")
                    } else {
                        format!("{cell:<w$}")
                    }
                })
                .collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
        }
        out.push_str(&format!(
            "{} of {} entries ok (finite differences: 4-point central, tolerance {:e}; \
             forward against reverse: tolerance {:e})\n",
            self.entries.len() - self.failed(),
            self.entries.len(),
            self.opts.tolerance,
            self.opts.mode_tolerance
        ));
        out
    }

    /// The checks as one JSON object: `{"value", "ok", "tolerance",
    /// "mode_tolerance", "outputs", "inputs", "entries": [{"output",
    /// "input", "reverse", "forward", "fd", "fd_error", "mode_error", "ok"},
    /// ...], "summary": {"entries", "failed"}}`; `output` and `input` are
    /// labels, numbers as `--json` writes values (non-finite ones as
    /// strings).
    pub fn to_json(&self, module: &Module) -> serde_json::Value {
        let num = |x: f64| crate::value_to_json(&Val::F64(x), module);
        let entries: Vec<serde_json::Value> = self
            .entries
            .iter()
            .map(|e| {
                serde_json::json!({
                    "output": self.outputs[e.output],
                    "input": self.inputs[e.input],
                    "reverse": num(e.reverse),
                    "forward": num(e.forward),
                    "fd": num(e.fd),
                    "fd_error": num(e.fd_error),
                    "mode_error": num(e.mode_error),
                    "ok": e.ok,
                })
            })
            .collect();
        serde_json::json!({
            "value": crate::value_to_json(&self.value, module),
            "ok": self.failed() == 0,
            "tolerance": num(self.opts.tolerance),
            "mode_tolerance": num(self.opts.mode_tolerance),
            "outputs": self.outputs,
            "inputs": self.inputs,
            "entries": entries,
            "summary": {"entries": self.entries.len(), "failed": self.failed()},
        })
    }
}

/// Checks the derivatives of `req.func` at `req.args`: the full Jacobian
/// (every f64 of the result against every f64 of the arguments) by reverse
/// mode and by forward mode (`req.mode` is not used; `req.opts.lanes` is the
/// forward batch width), each entry against fourth-order central finite
/// differences of the function as written, run by `req.opts.exec`. Returns
/// the report and the module with the derived functions (for printing
/// values). A run-time error of the function, at the point or a perturbed
/// one, is returned as the program's error.
///
/// ```
/// use irad::{GradCheckOptions, GradRequest, Source};
///
/// let src = Source::new("f.irad", "fn f(x: f64, y: [f64]) -> f64 { x * sin(y[0]) + exp(y[1]) }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let args = irad::parse_args(&Source::new("<args>", "2.0, [0.5, -1.0]"), &m, f)?;
/// let registry = irad::rules::Registry::new();
/// let (check, m) = irad::check_grad(&src, &m, &registry, &GradRequest::new(f, &args), &GradCheckOptions::default())?;
/// assert_eq!(check.inputs, ["%x", "%y[0]", "%y[1]"]);
/// assert_eq!(check.entries.len(), 3);
/// assert_eq!(check.failed(), 0, "{}", check.table(&m));
/// assert!(check.entries.iter().all(|e| e.fd_error < 1e-9));
/// # Ok::<(), irad::Error>(())
/// ```
pub fn check_grad(
    src: &Source,
    module: &Module,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
    opts: &GradCheckOptions,
) -> Result<(GradCheck, Module), Error> {
    let params = check_call(src, module, req.func, req.args)?;
    let with_mode = |mode| GradRequest {
        mode,
        opts: req.opts.clone(),
        schedule: req.schedule.clone(),
        ..GradRequest::new(req.func, req.args)
    };
    let (rev, m) = crate::jacobian(src, module, registry, &with_mode(Mode::Reverse))?;
    let (fwd, _) = crate::jacobian(src, module, registry, &with_mode(Mode::Forward))?;
    let fd = finite_differences(src, module, registry, req, &params)?;
    let mut entries = Vec::new();
    for (r, row) in rev.rows.iter().enumerate() {
        for (c, &reverse) in row.iter().enumerate() {
            let forward = fwd.rows.get(r).and_then(|row| row.get(c)).copied();
            let fd_value = fd.get(c).and_then(|col| col.get(r)).copied();
            let (Some(forward), Some(fd_value)) = (forward, fd_value) else {
                return Err(crate::internal(
                    src,
                    "the forward Jacobian or the finite differences have another shape",
                ));
            };
            let fd_error = error(reverse, fd_value);
            let mode_error = error(forward, reverse);
            entries.push(GradCheckEntry {
                output: r,
                input: c,
                reverse,
                forward,
                fd: fd_value,
                fd_error,
                mode_error,
                ok: fd_error <= opts.tolerance && mode_error <= opts.mode_tolerance,
            });
        }
    }
    Ok((
        GradCheck {
            value: rev.value,
            outputs: rev.outputs,
            inputs: rev.inputs,
            entries,
            opts: opts.clone(),
        },
        m,
    ))
}

/// `|a - b| / max(1, |b|)`; for values that are not both finite, 0 where
/// they are the same (NaN and NaN, or equal infinities), infinity otherwise.
fn error(a: f64, b: f64) -> f64 {
    if a.is_finite() && b.is_finite() {
        (a - b).abs() / b.abs().max(1.0)
    } else if (a.is_nan() && b.is_nan()) || a == b {
        0.0
    } else {
        f64::INFINITY
    }
}

/// One column per f64 of the arguments: the fourth-order central difference
/// of every f64 of the result.
fn finite_differences(
    src: &Source,
    module: &Module,
    registry: &rules::Registry,
    req: &GradRequest<'_>,
    params: &[Type],
) -> Result<Vec<Vec<f64>>, Error> {
    let mut x = Vec::new();
    for a in req.args {
        f64_leaves(a, &mut x);
    }
    let mut m = module.clone();
    let mut provider = Forward::new(registry);
    let mut exec = executor(src, req, module.len(), &mut m, &mut provider)?;
    let mut columns = Vec::with_capacity(x.len());
    for j in 0..x.len() {
        let scale = x[j].abs().max(1.0);
        let h = if scale.is_finite() {
            // `x + h - x` is exactly h for this h.
            let h = f64::EPSILON.powf(0.2) * scale;
            (x[j] + h) - x[j]
        } else {
            f64::NAN
        };
        let mut at = |k: f64| -> Result<Vec<f64>, Error> {
            let mut i = 0;
            let args: Vec<Val> = req
                .args
                .iter()
                .zip(params)
                .map(|(a, ty)| {
                    like_with(a, ty, &mut || {
                        i += 1;
                        if i - 1 == j { x[j] + k * h } else { x[i - 1] }
                    })
                })
                .collect();
            let out = run_on(src, &mut *exec, req.func, &args, req)?;
            let mut ys = Vec::new();
            f64_leaves(&out, &mut ys);
            Ok(ys)
        };
        let (p1, m1, p2, m2) = (at(1.0)?, at(-1.0)?, at(2.0)?, at(-2.0)?);
        let col = (0..p1.len())
            .map(|r| {
                let d1 = p1[r] - m1.get(r).copied().unwrap_or(f64::NAN);
                let d2 =
                    p2.get(r).copied().unwrap_or(f64::NAN) - m2.get(r).copied().unwrap_or(f64::NAN);
                (8.0 * d1 - d2) / (12.0 * h)
            })
            .collect();
        columns.push(col);
    }
    Ok(columns)
}
