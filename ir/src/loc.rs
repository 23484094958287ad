//! Source positions and IR locations carried by every error.
//!
//! A [`Pos`] is a 1-based line and column in the text a module was parsed from
//! (or the surface file it was lowered from). A [`Location`] says where in the IR
//! something is: function, block label, statement number (from 1 within the
//! block, the terminator counted last) and the source position when known.

use std::fmt;

/// A 1-based line and column in source text.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct Pos {
    /// Line, from 1.
    pub line: u32,
    /// Column in characters, from 1.
    pub col: u32,
}

impl Pos {
    /// The position at `line`, `col`.
    pub fn new(line: u32, col: u32) -> Pos {
        Pos { line, col }
    }
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// Where in a module an error is.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Location {
    /// The function's name, without `@`; shared, so that the locations of
    /// a function's statements (reverse mode makes one per statement) copy
    /// no string.
    pub func: Option<std::sync::Arc<str>>,
    /// The block's label number (`#N`).
    pub block: Option<u32>,
    /// The statement number within the block, from 1; the terminator is counted last.
    pub stmt: Option<u32>,
    /// The source position, when the module came from text.
    pub pos: Option<Pos>,
}

impl Location {
    /// A location that has only a source position.
    pub fn at(pos: Pos) -> Location {
        Location {
            pos: Some(pos),
            ..Location::default()
        }
    }

    /// Whether the location names a function, block or statement.
    pub fn has_ir_place(&self) -> bool {
        self.func.is_some() || self.block.is_some() || self.stmt.is_some()
    }

    /// The IR place as SYNTAX.md writes it: `in @f, block #2, statement 3`.
    pub fn ir_place(&self) -> String {
        let mut parts = Vec::new();
        if let Some(func) = &self.func {
            parts.push(format!("in @{func}"));
        }
        if let Some(block) = self.block {
            parts.push(format!("block #{block}"));
        }
        if let Some(stmt) = self.stmt {
            parts.push(format!("statement {stmt}"));
        }
        parts.join(", ")
    }

    /// The IR place for a person who wrote the source rather than the IR: as
    /// [`Location::ir_place`], but a derived function is named by what it is
    /// for, with its internal name in parentheses for `irad dump` readers:
    /// `in the gradient of `f` (@f.rev.fwd), block #2, statement 3`.
    pub fn user_place(&self) -> String {
        let Some(phrase) = self.func.as_deref().and_then(derived_phrase) else {
            return self.ir_place();
        };
        let rest = Location {
            func: None,
            ..self.clone()
        };
        let mut place = format!("in {phrase} (@{})", self.func.as_deref().unwrap_or(""));
        if rest.has_ir_place() {
            place.push_str(", ");
            place.push_str(&rest.ir_place());
        }
        place
    }
}

/// What a derived function is for, by the naming scheme of the derivations
/// (docs/forward.md, docs/reverse.md, docs/pe.md): `f.rev`, `f.rev.fwd`,
/// `f.rev.back`, `f.rev.wrt0_2`, ... are "the gradient of `f`"; `f.fwd`,
/// `f.fwd8`, `f.fwds`, `f.fwd3.wrt0`, `f.fwds.grad`, ... "the forward-mode
/// derivative of `f`"; `f.spec` "`f` specialised on its known arguments";
/// each may end in `.N`, the number that keeps a name fresh. `None` for a
/// name that is not derived (its name is what the user wrote).
pub fn derived_phrase(func: &str) -> Option<String> {
    let parts: Vec<&str> = func.split('.').collect();
    let is_fwd = |p: &str| {
        p.strip_prefix("fwd")
            .is_some_and(|r| r == "s" || r.bytes().all(|b| b.is_ascii_digit()))
    };
    let is_derived = |p: &str| {
        p == "rev"
            || p == "back"
            || p == "grad"
            || p == "spec"
            || is_fwd(p)
            || p.strip_prefix("wrt").is_some_and(|r| {
                !r.is_empty() && r.bytes().all(|b| b.is_ascii_digit() || b == b'_')
            })
            || (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    };
    // The first segment (after the base) from which every segment is derived.
    let mut start = parts.len();
    while start > 1 && is_derived(parts[start - 1]) {
        start -= 1;
    }
    // The derivation kind is the first such segment that names one.
    let (i, kind) = parts
        .iter()
        .enumerate()
        .skip(start)
        .find(|(_, p)| **p == "rev" || **p == "spec" || is_fwd(p))?;
    let base = parts.get(..i)?.join(".");
    Some(match *kind {
        "rev" => format!("the gradient of `{base}`"),
        "spec" => format!("`{base}` specialised on its known arguments"),
        _ => format!("the forward-mode derivative of `{base}`"),
    })
}

/// Formats `message` with its place for the user ([`Location::user_place`]):
/// the form run-time errors take.
pub fn with_user_place(message: &str, loc: &Location) -> String {
    if loc.has_ir_place() {
        format!("{message} ({})", loc.user_place())
    } else {
        message.to_string()
    }
}

/// Formats `message` with its IR place in parentheses, as every error of the IR does.
pub fn with_place(message: &str, loc: &Location) -> String {
    if loc.has_ir_place() {
        format!("{message} ({})", loc.ir_place())
    } else {
        message.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_names_read_as_what_they_are_for() {
        let g = |n: &str| derived_phrase(n);
        assert_eq!(
            g("logsumexp.rev.fwd").as_deref(),
            Some("the gradient of `logsumexp`")
        );
        assert_eq!(g("f.rev").as_deref(), Some("the gradient of `f`"));
        assert_eq!(
            g("f.rev.back.wrt0_2").as_deref(),
            Some("the gradient of `f`")
        );
        assert_eq!(
            g("a.b.rev.wrt1.2").as_deref(),
            Some("the gradient of `a.b`")
        );
        assert_eq!(
            g("f.fwd8").as_deref(),
            Some("the forward-mode derivative of `f`")
        );
        assert_eq!(
            g("f.fwds.grad").as_deref(),
            Some("the forward-mode derivative of `f`")
        );
        assert_eq!(
            g("f.spec.2").as_deref(),
            Some("`f` specialised on its known arguments")
        );
        assert_eq!(g("f"), None);
        assert_eq!(g("rev"), None);
        assert_eq!(g("f.forward"), None);
        assert_eq!(g("f.2"), None);
    }

    #[test]
    fn user_place_keeps_the_internal_name() {
        let loc = Location {
            func: Some("f.rev.fwd".into()),
            block: Some(2),
            stmt: Some(3),
            pos: None,
        };
        assert_eq!(
            loc.user_place(),
            "in the gradient of `f` (@f.rev.fwd), block #2, statement 3"
        );
        let plain = Location {
            func: Some("f".into()),
            ..Location::default()
        };
        assert_eq!(plain.user_place(), "in @f");
        let only = Location {
            func: Some("f.fwd".into()),
            ..Location::default()
        };
        assert_eq!(
            only.user_place(),
            "in the forward-mode derivative of `f` (@f.fwd)"
        );
    }
}
