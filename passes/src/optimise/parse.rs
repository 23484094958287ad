//! The text form of schedules: a small recursive-descent parser.
//!
//! Grammar (docs/optimise.md):
//! ```text
//! schedule := seq
//! seq      := choice (';' choice)*
//! choice   := term ('<+' term)*
//! term     := 'id' | 'fail' | NAME | COMB '(' seq ')' | '(' seq ')'
//! COMB     := try | repeat | one | all | top_down | bottom_up | normalise
//! NAME     := [A-Za-z_][A-Za-z0-9_-]*   (a rule, group or pass)
//! ```
//! Assumes nothing about the text. Guarantees: every error names the line and
//! column (1-based, in characters) where the schedule goes wrong; an unknown
//! name lists the known ones; nesting deeper than [`MAX_DEPTH`] is an error,
//! not a stack overflow. Never panics.

use super::OptError;
use super::rules;
use super::strategy::{Strategy, UNARY};

/// How deep parentheses and combinators may nest.
pub const MAX_DEPTH: usize = 256;

/// Parses a schedule such as `normalise(fold <+ identities); try(dce)`.
pub fn parse_schedule(text: &str) -> Result<Strategy, OptError> {
    let mut p = Parser {
        toks: lex(text)?,
        at: 0,
        end: end_pos(text),
    };
    let s = p.seq(0)?;
    match p.peek() {
        None => Ok(s),
        Some(t) => Err(t.err(format!(
            "expected `;`, `<+` or the end, found {}",
            t.tok.show()
        ))),
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Name(String),
    Open,
    Close,
    Semi,
    Choice,
}

impl Tok {
    fn show(&self) -> String {
        match self {
            Tok::Name(n) => format!("`{n}`"),
            Tok::Open => "`(`".into(),
            Tok::Close => "`)`".into(),
            Tok::Semi => "`;`".into(),
            Tok::Choice => "`<+`".into(),
        }
    }
}

#[derive(Clone, Debug)]
struct Spanned {
    tok: Tok,
    line: u32,
    col: u32,
}

impl Spanned {
    fn err(&self, msg: String) -> OptError {
        OptError::Parse {
            line: self.line,
            col: self.col,
            msg,
        }
    }
}

fn end_pos(text: &str) -> (u32, u32) {
    let line = text.matches('\n').count() + 1;
    let col = text.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (to_u32(line), to_u32(col))
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn lex(text: &str) -> Result<Vec<Spanned>, OptError> {
    let chars: Vec<char> = text.chars().collect();
    let mut toks = Vec::new();
    let (mut line, mut col) = (1u32, 1u32);
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        let (l0, c0) = (line, col);
        let push = |tok, toks: &mut Vec<Spanned>| {
            toks.push(Spanned {
                tok,
                line: l0,
                col: c0,
            })
        };
        if c == '\n' {
            line += 1;
            col = 1;
            i += 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            col += 1;
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while chars
                .get(i)
                .is_some_and(|&c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                i += 1;
            }
            let name: String = chars[start..i].iter().collect();
            col += to_u32(i - start);
            push(Tok::Name(name), &mut toks);
            continue;
        }
        let tok = match c {
            '(' => Tok::Open,
            ')' => Tok::Close,
            ';' => Tok::Semi,
            '<' if chars.get(i + 1) == Some(&'+') => {
                i += 1;
                col += 1;
                Tok::Choice
            }
            _ => {
                return Err(OptError::Parse {
                    line,
                    col,
                    msg: format!("unexpected character `{c}`"),
                });
            }
        };
        i += 1;
        col += 1;
        push(tok, &mut toks);
    }
    Ok(toks)
}

struct Parser {
    toks: Vec<Spanned>,
    at: usize,
    end: (u32, u32),
}

impl Parser {
    fn peek(&self) -> Option<&Spanned> {
        self.toks.get(self.at)
    }

    fn end_err(&self, msg: String) -> OptError {
        OptError::Parse {
            line: self.end.0,
            col: self.end.1,
            msg,
        }
    }

    fn seq(&mut self, depth: usize) -> Result<Strategy, OptError> {
        let mut items = vec![self.choice(depth)?];
        while self.peek().is_some_and(|t| t.tok == Tok::Semi) {
            self.at += 1;
            items.push(self.choice(depth)?);
        }
        Ok(Strategy::seq(items))
    }

    fn choice(&mut self, depth: usize) -> Result<Strategy, OptError> {
        let mut items = vec![self.term(depth)?];
        while self.peek().is_some_and(|t| t.tok == Tok::Choice) {
            self.at += 1;
            items.push(self.term(depth)?);
        }
        Ok(Strategy::choice(items))
    }

    fn term(&mut self, depth: usize) -> Result<Strategy, OptError> {
        let Some(t) = self.peek().cloned() else {
            return Err(self.end_err("expected a strategy, found the end of the schedule".into()));
        };
        if depth >= MAX_DEPTH {
            return Err(t.err(format!("schedule nested deeper than {MAX_DEPTH} levels")));
        }
        self.at += 1;
        match &t.tok {
            Tok::Open => {
                let s = self.seq(depth + 1)?;
                self.close(&t)?;
                Ok(s)
            }
            Tok::Name(n) if n == "id" => Ok(Strategy::Id),
            Tok::Name(n) if n == "fail" => Ok(Strategy::Fail),
            Tok::Name(n) if UNARY.contains(&n.as_str()) => {
                let open = match self.peek() {
                    Some(o) if o.tok == Tok::Open => o.clone(),
                    Some(o) => {
                        return Err(
                            o.err(format!("expected `(` after `{n}`, found {}", o.tok.show()))
                        );
                    }
                    None => return Err(self.end_err(format!("expected `(` after `{n}`"))),
                };
                self.at += 1;
                let inner = self.seq(depth + 1)?;
                self.close(&open)?;
                Strategy::unary(n, inner).ok_or_else(|| t.err(format!("unknown combinator `{n}`")))
            }
            Tok::Name(n) => match rules::find_rule(n) {
                Some(rule) => Ok(Strategy::Rule(rule)),
                None => {
                    let known = rules::known_names();
                    let hint = irad_ir::suggest::did_you_mean(
                        n,
                        "",
                        known.iter().copied().chain(UNARY.iter().copied()),
                    );
                    Err(t.err(format!(
                        "unknown rule `{n}` (known: {}){hint}",
                        known.join(", ")
                    )))
                }
            },
            other => Err(t.err(format!("expected a strategy, found {}", other.show()))),
        }
    }

    fn close(&mut self, open: &Spanned) -> Result<(), OptError> {
        match self.peek() {
            Some(t) if t.tok == Tok::Close => {
                self.at += 1;
                Ok(())
            }
            Some(t) => Err(t.err(format!(
                "expected `)` to close the `(` at column {}, found {}",
                open.col,
                t.tok.show()
            ))),
            None => Err(self.end_err(format!(
                "expected `)` to close the `(` at column {}, found the end of the schedule",
                open.col
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printing_parses_back() {
        for text in [
            "id",
            "normalise(fold <+ identities); dce",
            "(fold; dce) <+ id",
            "try(repeat(top_down(mul-one)))",
            "a_b",
        ] {
            let Ok(s) = parse_schedule(text) else {
                // `a_b` is unknown: only the known names parse.
                assert_eq!(text, "a_b");
                continue;
            };
            let printed = s.to_string();
            assert_eq!(parse_schedule(&printed).ok(), Some(s), "{text}");
        }
    }
}
