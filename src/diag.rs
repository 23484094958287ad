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
///
/// ```
/// use irad::ir::Pos;
///
/// let plain = irad::diag::render("f.ir", None, Some(Pos::new(2, 3)), "bad thing");
/// assert_eq!(plain, "f.ir:2:3: error: bad thing\n");
/// let shown = irad::diag::render("f.ir", Some("line one\nline two\n"), Some(Pos::new(2, 3)), "bad thing");
/// assert!(shown.starts_with("f.ir:2:3: error: bad thing\n"));
/// assert!(shown.contains("line two"), "{shown}");
/// ```
pub fn render(file: &str, text: Option<&str>, pos: Option<Pos>, message: &str) -> String {
    match text {
        Some(text) => SourceLines::new(file, text).render(pos, message),
        None => header(file, pos, message),
    }
}

/// A source text with its line index, built once so that rendering many
/// errors in one file takes time linear in their number, not quadratic.
pub struct SourceLines<'a> {
    file: &'a str,
    text: &'a str,
    files: SimpleFile<&'a str, &'a str>,
    /// The byte offset where each line starts.
    line_starts: Vec<usize>,
}

impl<'a> SourceLines<'a> {
    /// Indexes the lines of `text`, the contents of `file`.
    ///
    /// ```
    /// let lines = irad::diag::SourceLines::new("f.ir", "a\nb\n");
    /// let out = lines.render(Some(irad::ir::Pos::new(1, 1)), "first");
    /// assert!(out.starts_with("f.ir:1:1: error: first\n"));
    /// ```
    pub fn new(file: &'a str, text: &'a str) -> SourceLines<'a> {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        SourceLines {
            file,
            text,
            files: SimpleFile::new(file, text),
            line_starts,
        }
    }

    /// One error as text, like [`render`], with the source line and a caret.
    ///
    /// ```
    /// let lines = irad::diag::SourceLines::new("f.ir", "alpha\nbeta\n");
    /// let out = lines.render(Some(irad::ir::Pos::new(2, 2)), "here");
    /// assert!(out.starts_with("f.ir:2:2: error: here\n"));
    /// assert!(out.contains("beta") && out.contains('^'), "{out}");
    /// ```
    pub fn render(&self, pos: Option<Pos>, message: &str) -> String {
        let mut out = header(self.file, pos, message);
        if let Some(p) = pos {
            out.push_str(&self.snippet(p));
        }
        out
    }

    /// The source line of `pos` with a caret under the token there.
    fn snippet(&self, pos: Pos) -> String {
        let range = self.token_range(pos);
        let diagnostic = Diagnostic::error().with_labels(vec![Label::primary((), range)]);
        let config = Config::default();
        match term::emit_into_string(&config, &self.files, &diagnostic) {
            // The first line codespan writes is its own `error:` header, which our
            // first line already says in SYNTAX.md's format.
            Ok(s) => s
                .split_once('\n')
                .map(|(_, rest)| rest.to_string())
                .unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// The byte range of the token that starts at `pos` (at least one
    /// character, clamped to the text).
    fn token_range(&self, pos: Pos) -> std::ops::Range<usize> {
        let text = self.text;
        let line_start = self
            .line_starts
            .get((pos.line as usize).saturating_sub(1))
            .copied()
            .unwrap_or(text.len());
        let line = text[line_start..].split('\n').next().unwrap_or("");
        let start = line_start
            + line
                .char_indices()
                .nth((pos.col as usize).saturating_sub(1))
                .map_or(line.len(), |(i, _)| i);
        let rest = &text[start..];
        let is_word =
            |c: char| c.is_alphanumeric() || matches!(c, '_' | '.' | '%' | '@' | '#' | '-');
        let mut len: usize = rest
            .char_indices()
            .find(|&(_, c)| !is_word(c))
            .map_or(rest.len(), |(i, _)| i);
        if len == 0 {
            len = rest.chars().next().map_or(0, char::len_utf8);
        }
        start..start + len
    }
}

fn header(file: &str, pos: Option<Pos>, message: &str) -> String {
    match pos {
        Some(p) => format!("{file}:{}:{}: error: {message}\n", p.line, p.col),
        None => format!("{file}: error: {message}\n"),
    }
}

/// A note line such as `called from f.ir:3:3 (in @g, block #1, statement 2)`.
///
/// ```
/// let n = irad::diag::note("f.ir", Some(irad::ir::Pos::new(3, 3)), "called in @g");
/// assert_eq!(n, "note: called in @g at f.ir:3:3\n");
/// ```
pub fn note(file: &str, pos: Option<Pos>, message: &str) -> String {
    match pos {
        Some(p) => format!("note: {message} at {file}:{}:{}\n", p.line, p.col),
        None => format!("note: {message}\n"),
    }
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
