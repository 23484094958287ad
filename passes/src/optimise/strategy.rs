//! Schedules as data: the strategy terms of docs/optimise.md and their
//! canonical text.
//!
//! Assumes nothing. Guarantees: `Display` prints the text form, with `;`
//! looser than `<+` and parentheses only where a sequence is an alternative;
//! the constructors [`Strategy::seq`] and [`Strategy::choice`] flatten nested
//! sequences and choices (both are associative), so printing a parsed schedule
//! and parsing it again gives the same term.

use std::fmt;

/// A strategy: what the optimiser does to a position of the module tree
/// (module, function, block, statement). It succeeds or fails there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// `id`: succeeds and changes nothing.
    Id,
    /// `fail`: fails.
    Fail,
    /// A rule, a group of rules or a pass (`fold`, `mul-one`, `dce`), as
    /// [`rules::find_rule`](super::rules::find_rule) gives it; it prints as
    /// its name.
    Rule(&'static super::rules::Rule),
    /// `s1; s2; ...`: each in turn; fails as soon as one fails.
    Seq(Vec<Strategy>),
    /// `s1 <+ s2 <+ ...`: the first that succeeds.
    Choice(Vec<Strategy>),
    /// `try(s)`: `s <+ id`.
    Try(Box<Strategy>),
    /// `repeat(s)`: `s` until it fails or changes nothing (fuel-limited).
    Repeat(Box<Strategy>),
    /// `one(s)`: `s` at the first child where it succeeds.
    One(Box<Strategy>),
    /// `all(s)`: `s` at every child; fails if it fails at one.
    All(Box<Strategy>),
    /// `top_down(s)`: `s <+ one(top_down(s))`.
    TopDown(Box<Strategy>),
    /// `bottom_up(s)`: `one(bottom_up(s)) <+ s`.
    BottomUp(Box<Strategy>),
    /// `normalise(s)`: `repeat(top_down(s))`, computed by sweeps.
    Normalise(Box<Strategy>),
}

/// The combinators that take one strategy in parentheses, by their names.
pub(crate) const UNARY: &[&str] = &[
    "try",
    "repeat",
    "one",
    "all",
    "top_down",
    "bottom_up",
    "normalise",
];

impl Strategy {
    /// `items` in sequence; nested sequences are spliced in, and a single
    /// item is itself.
    pub fn seq(items: Vec<Strategy>) -> Strategy {
        let mut flat = Vec::new();
        for s in items {
            match s {
                Strategy::Seq(inner) => flat.extend(inner),
                other => flat.push(other),
            }
        }
        if flat.len() == 1 {
            flat.pop().unwrap_or(Strategy::Id)
        } else {
            Strategy::Seq(flat)
        }
    }

    /// The left choice of `items`; nested choices are spliced in, and a
    /// single item is itself.
    pub fn choice(items: Vec<Strategy>) -> Strategy {
        let mut flat = Vec::new();
        for s in items {
            match s {
                Strategy::Choice(inner) => flat.extend(inner),
                other => flat.push(other),
            }
        }
        if flat.len() == 1 {
            flat.pop().unwrap_or(Strategy::Fail)
        } else {
            Strategy::Choice(flat)
        }
    }

    /// The combinator `name(inner)`, for a name of [`UNARY`].
    pub(crate) fn unary(name: &str, inner: Strategy) -> Option<Strategy> {
        let b = Box::new(inner);
        Some(match name {
            "try" => Strategy::Try(b),
            "repeat" => Strategy::Repeat(b),
            "one" => Strategy::One(b),
            "all" => Strategy::All(b),
            "top_down" => Strategy::TopDown(b),
            "bottom_up" => Strategy::BottomUp(b),
            "normalise" => Strategy::Normalise(b),
            _ => return None,
        })
    }

    /// The top-level steps: the items of a sequence, or the strategy itself.
    /// `irad dump --schedule` prints the module after each.
    pub fn steps(&self) -> Vec<&Strategy> {
        match self {
            Strategy::Seq(items) => items.iter().collect(),
            other => vec![other],
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Strategy::Id => f.write_str("id"),
            Strategy::Fail => f.write_str("fail"),
            Strategy::Rule(rule) => f.write_str(rule.name),
            Strategy::Seq(items) => {
                for (i, s) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{s}")?;
                }
                Ok(())
            }
            Strategy::Choice(items) => {
                for (i, s) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(" <+ ")?;
                    }
                    if matches!(s, Strategy::Seq(_)) {
                        write!(f, "({s})")?;
                    } else {
                        write!(f, "{s}")?;
                    }
                }
                Ok(())
            }
            Strategy::Try(s) => write!(f, "try({s})"),
            Strategy::Repeat(s) => write!(f, "repeat({s})"),
            Strategy::One(s) => write!(f, "one({s})"),
            Strategy::All(s) => write!(f, "all({s})"),
            Strategy::TopDown(s) => write!(f, "top_down({s})"),
            Strategy::BottomUp(s) => write!(f, "bottom_up({s})"),
            Strategy::Normalise(s) => write!(f, "normalise({s})"),
        }
    }
}
