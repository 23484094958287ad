//! Renders errors for people, in the format SYNTAX.md §3 fixes:
//!
//! ```text
//! f.ir:12:5: error: phi has no entry for predecessor #4 (in @f, block #2, statement 3)
//!    ┌─ f.ir:12:5
//!    │
//! 12 │   %5 = phi [#1 => %2] :: f64
//!    │   ^^
//! ```
//!
//! The first line is ours; the source line with its caret is drawn by
//! codespan-reporting. Positions are 1-based lines and character columns; a
//! position past the end of the text is clamped to it, so rendering never fails.

use codespan_reporting::diagnostic::{Diagnostic, Label};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, Config};
use irad_ir::Pos;

/// One error as text: `file:line:col: error: message`, then the source line
/// with a caret when the source text is known.
pub fn render(file: &str, text: Option<&str>, pos: Option<Pos>, message: &str) -> String {
    let mut out = match pos {
        Some(p) => format!("{file}:{}:{}: error: {message}\n", p.line, p.col),
        None => format!("{file}: error: {message}\n"),
    };
    if let (Some(text), Some(p)) = (text, pos) {
        out.push_str(&snippet(file, text, p));
    }
    out
}

/// A note line such as `called from f.ir:3:3 (in @g, block #1, statement 2)`.
pub fn note(file: &str, pos: Option<Pos>, message: &str) -> String {
    match pos {
        Some(p) => format!("note: {message} at {file}:{}:{}\n", p.line, p.col),
        None => format!("note: {message}\n"),
    }
}

/// The source line of `pos` with a caret under the token there.
fn snippet(file: &str, text: &str, pos: Pos) -> String {
    let range = token_range(text, pos);
    let files = SimpleFile::new(file, text);
    let diagnostic = Diagnostic::error().with_labels(vec![Label::primary((), range)]);
    let config = Config::default();
    match term::emit_into_string(&config, &files, &diagnostic) {
        // The first line codespan writes is its own `error:` header, which our
        // first line already says in SYNTAX.md's format.
        Ok(s) => s
            .split_once('\n')
            .map(|(_, rest)| rest.to_string())
            .unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// The byte range of the token that starts at `pos` (at least one character,
/// clamped to the text).
fn token_range(text: &str, pos: Pos) -> std::ops::Range<usize> {
    let line_start = text
        .split_inclusive('\n')
        .take((pos.line as usize).saturating_sub(1))
        .map(str::len)
        .sum::<usize>();
    let line = text[line_start..].split('\n').next().unwrap_or("");
    let start = line_start
        + line
            .char_indices()
            .nth((pos.col as usize).saturating_sub(1))
            .map_or(line.len(), |(i, _)| i);
    let rest = &text[start..];
    let is_word = |c: char| c.is_alphanumeric() || matches!(c, '_' | '.' | '%' | '@' | '#' | '-');
    let mut len: usize = rest
        .char_indices()
        .find(|&(_, c)| !is_word(c))
        .map_or(rest.len(), |(i, _)| i);
    if len == 0 {
        len = rest.chars().next().map_or(0, char::len_utf8);
    }
    start..start + len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_header_and_caret() {
        let text = "func @f() -> f64 {\n#1:\n  return %nope\n}\n";
        let out = render(
            "f.ir",
            Some(text),
            Some(Pos::new(3, 10)),
            "undefined value %nope",
        );
        let mut lines = out.lines();
        assert_eq!(
            lines.next(),
            Some("f.ir:3:10: error: undefined value %nope")
        );
        assert!(out.contains("3 │   return %nope"), "{out}");
        assert!(out.contains("^^^^^"), "{out}");
    }

    #[test]
    fn clamps_positions_past_the_end() {
        let out = render(
            "f.ir",
            Some("abc"),
            Some(Pos::new(9, 40)),
            "unexpected end of input",
        );
        assert!(out.starts_with("f.ir:9:40: error: unexpected end of input\n"));
        let out = render("f.ir", Some(""), Some(Pos::new(1, 1)), "empty");
        assert!(out.starts_with("f.ir:1:1: error: empty\n"));
    }
}
