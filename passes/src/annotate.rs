//! Annotated printing: IR text with the results of an analysis beside it, as
//! `irad dump` shows them. [`activity_text`] prints functions with the result
//! of activity analysis as comments (`irad dump --activity`); [`bbcode_text`]
//! prints the BBCode (reverse mode's view of a function's blocks) of some
//! functions, and [`comment_lines`] turns such text into the `#` comment
//! lines `irad dump --mode rev` shows above the module.
//!
//! Assumes verified, normalised functions. Guarantees: the text is a pure
//! function of the module, and the activity text still parses as IR (every
//! annotation is a comment); a request that does not fit the functions
//! ([`PassError::Request`]) or a function BBCode cannot represent
//! ([`PassError::Reverse`]) is an error, never a panic.

use crate::activity::Activity;
use crate::manager::PassError;
use crate::reverse::ReverseError;
use crate::reverse::bbcode::BBCode;
use irad_ir::text::{Line, func_lines};
use irad_ir::{FuncId, Location, Module, Operand};

/// The BBCode of each of `funcs`, printed, in order, separated by empty
/// lines.
pub fn bbcode_text(m: &Module, funcs: &[FuncId]) -> Result<String, PassError> {
    let mut out = String::new();
    for &f in funcs {
        let code = m
            .get(f)
            .ok_or_else(|| "invalid function handle".to_string())
            .and_then(|func| BBCode::from_func(func).map_err(|e| e.to_string()))
            .map_err(|msg| PassError::from(ReverseError::new(Location::default(), msg)))?;
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&code.print(m, f));
    }
    Ok(out)
}

/// `funcs` of `m` (every function when empty) printed with the result of
/// activity analysis: after each function's header a comment line
/// `# active parameters: ...` (or `none`): the parameters of `wrt` whose
/// derivative matters (for a `[f64]` array, whose array class is varied and
/// useful), and after each statement with a
/// result a trailing `# active` or `# const` comment. `wrt`, the parameters
/// that are active (all when `None`), applies to each function; a position
/// past a function's parameters is a [`PassError::Request`].
pub fn activity_text(
    m: &Module,
    funcs: &[FuncId],
    wrt: Option<&[usize]>,
) -> Result<String, PassError> {
    let ids: Vec<FuncId> = if funcs.is_empty() {
        m.func_ids().collect()
    } else {
        funcs.to_vec()
    };
    let mut out = String::new();
    for (k, id) in ids.into_iter().enumerate() {
        let Some(func) = m.get(id) else { continue };
        if let Some(&bad) = wrt.and_then(|w| w.iter().find(|&&i| i >= func.params.len())) {
            return Err(PassError::Request {
                message: format!(
                    "--wrt {bad}: @{} has {} parameter(s)",
                    func.name,
                    func.params.len()
                ),
            });
        }
        let mask: Vec<bool> = (0..func.params.len())
            .map(|i| wrt.is_none_or(|w| w.contains(&i)))
            .collect();
        let act = Activity::of(func, &mask);
        if k > 0 {
            out.push('\n');
        }
        for (line, text) in func_lines(m, id) {
            out.push_str(&text);
            match line {
                Line::Header => {
                    // A parameter outside `wrt` is never listed, even an
                    // array (every array value is active, for its shadow).
                    let active: Vec<String> = func
                        .params
                        .iter()
                        .enumerate()
                        .filter(|&(i, &p)| mask[i] && act.wants_cotangent(&Operand::Value(p)))
                        .map(|(i, _)| i.to_string())
                        .collect();
                    let list = if active.is_empty() {
                        "none".to_string()
                    } else {
                        active.join(", ")
                    };
                    out.push_str(&format!("\n# active parameters: {list}"));
                }
                Line::Inst(inst) => {
                    if let Some(r) = func.insts[inst].result {
                        out.push_str(if act.is_active(r) {
                            "  # active"
                        } else {
                            "  # const"
                        });
                    }
                }
                _ => {}
            }
            out.push('\n');
        }
    }
    Ok(out)
}

/// `text` as IR comment lines (`# ` before each line) followed by an empty
/// line: how `irad dump --mode rev` shows the BBCode above the module.
pub fn comment_lines(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        out.push_str("# ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    out
}
