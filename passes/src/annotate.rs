//! Annotated printing: IR text with the results of an analysis beside it, as
//! `irad dump` shows them. [`bbcode_text`] prints the BBCode (reverse mode's
//! view of a function's blocks) of some functions, as `irad dump --mode rev`
//! shows it in comments.
//!
//! Assumes verified (and, for BBCode, normalised) functions. Guarantees: the
//! text is a pure function of the module; a function BBCode cannot represent
//! is a [`PassError::Reverse`], never a panic.

use crate::manager::PassError;
use crate::reverse::ReverseError;
use crate::reverse::bbcode::BBCode;
use irad_ir::{FuncId, Location, Module};

/// The BBCode of each of `funcs`, printed, in order, separated by empty
/// lines.
pub fn bbcode_text(m: &Module, funcs: &[FuncId]) -> Result<String, PassError> {
    let mut out = String::new();
    for &f in funcs {
        let code = m
            .get(f)
            .ok_or_else(|| "invalid function handle".to_string())
            .and_then(|func| BBCode::from_func(func).map_err(|e| e.to_string()))
            .map_err(|msg| {
                PassError::from(ReverseError {
                    loc: Location::default(),
                    msg,
                })
            })?;
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&code.print(m, f));
    }
    Ok(out)
}
