//! Checkpoint schedules (docs/schedules.md): per-loop overrides of the
//! checkpointing decisions, given outside the program (`irad grad
//! --checkpoint 'line 12 = 100; #5 = record'`, `GradOptions::checkpoints`,
//! [`super::super::Reverse::set_checkpoint_schedule`]). A rule names loops by
//! the source line of their header or by the label the dump shows
//! (`loop #5`, optionally of one function, `@f#5`) and gives them stretches
//! of N iterations, or `record` (also `none`, or `0`): recorded in full, never
//! checkpointed. A rule does what a `checkpoint(n)` statement in the loop
//! would, and takes precedence over one.
//!
//! Assumes nothing of the text. Guarantees: parsing never panics; an error
//! is located (line and column from 1, in the text) and says what was
//! expected and what was found; [`CheckpointSchedule::unmatched`] lists the
//! rules that name no loop of a module, for the caller to refuse them.

use irad_ir::flow::{ControlFlowGraph, DominatorTree, LoopAnalysis};
use irad_ir::text::ParseError;
use irad_ir::{Block, Func, Location, Module, Pos};
use std::fmt;

/// Which loops a rule names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoopTarget {
    /// The loops whose header's source position is on this line.
    Line(u32),
    /// The loop whose header is the block of this label (as the dump shows
    /// it: `loop #5`), in the named function, or in every function.
    Label {
        /// The function (without `@`), or `None`: any function.
        func: Option<String>,
        /// The header's label.
        label: u32,
    },
}

/// What a rule asks for the loops it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopChoice {
    /// Checkpointed with stretches of this many iterations (at least 1).
    Every(u64),
    /// Recorded in full, never checkpointed.
    Record,
}

/// One rule of a [`CheckpointSchedule`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointRule {
    /// The loops it names.
    pub target: LoopTarget,
    /// What it asks for them.
    pub choice: LoopChoice,
    /// Where the rule starts in the schedule's text.
    pub pos: Pos,
}

impl CheckpointRule {
    /// Whether the rule names the loop of `func` headed by `header`.
    pub fn names(&self, func: &Func, header: Block) -> bool {
        match &self.target {
            LoopTarget::Line(n) => header_line(func, header) == Some(*n),
            LoopTarget::Label { func: g, label } => {
                *label == func.blocks[header].label && g.as_deref().is_none_or(|g| g == func.name)
            }
        }
    }
}

impl fmt::Display for CheckpointRule {
    /// The rule in canonical form (`line 12 = 100`, `@f#5 = record`), which
    /// parses back to the same rule.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.target {
            LoopTarget::Line(n) => write!(f, "line {n}")?,
            LoopTarget::Label {
                func: Some(g),
                label,
            } => write!(f, "@{g}#{label}")?,
            LoopTarget::Label { func: None, label } => write!(f, "#{label}")?,
        }
        match self.choice {
            LoopChoice::Every(n) => write!(f, " = {n}"),
            LoopChoice::Record => f.write_str(" = record"),
        }
    }
}

/// Per-loop overrides of checkpointing, in the order written; where two
/// rules name the same loop, the later one holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckpointSchedule {
    /// The rules.
    pub rules: Vec<CheckpointRule>,
}

impl CheckpointSchedule {
    /// Reads a schedule: rules `LOOP = CHOICE` separated by `;` (or new
    /// lines), `LOOP` being `line N`, `#N` or `@NAME#N` and `CHOICE` a number
    /// of iterations per stretch or `record` / `none` (`0` means the same).
    /// The empty text is the empty schedule.
    ///
    /// ```
    /// use irad_passes::reverse::{CheckpointSchedule, LoopChoice, LoopTarget};
    ///
    /// let s = CheckpointSchedule::parse("line 12 = 100; @f#5 = record")?;
    /// assert_eq!(s.rules[0].target, LoopTarget::Line(12));
    /// assert_eq!(s.rules[1].choice, LoopChoice::Record);
    /// assert_eq!(s.to_string(), "line 12 = 100; @f#5 = record");
    /// let e = CheckpointSchedule::parse("line 12 = often").unwrap_err();
    /// assert_eq!(e.loc.pos, Some(irad_ir::Pos { line: 1, col: 11 }));
    /// assert_eq!(e.msg, "expected a number of iterations, `record` or `none`, found `often`");
    /// # Ok::<(), irad_ir::text::ParseError>(())
    /// ```
    pub fn parse(text: &str) -> Result<CheckpointSchedule, ParseError> {
        let mut lx = Lexer::new(text);
        let mut rules = Vec::new();
        loop {
            lx.skip_separators();
            let Some(start) = lx.peek_pos() else {
                break;
            };
            let target = lx.target()?;
            lx.expect('=', "`=` after the loop")?;
            let choice = lx.choice()?;
            rules.push(CheckpointRule {
                target,
                choice,
                pos: start,
            });
            lx.skip_space();
            match lx.peek() {
                None | Some(';' | '\n') => {}
                Some(_) => return Err(lx.error("`;` or the end of the schedule")),
            }
        }
        Ok(CheckpointSchedule { rules })
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// What the schedule asks for the loop of `func` headed by `header`:
    /// the last rule that names it, if any.
    pub fn lookup(&self, func: &Func, header: Block) -> Option<&CheckpointRule> {
        self.rules.iter().rev().find(|r| r.names(func, header))
    }

    /// The rules that name no loop of any function of `module` (the module
    /// reverse mode derives from, normalised: the labels are the dump's).
    pub fn unmatched(&self, module: &Module) -> Vec<&CheckpointRule> {
        let mut hit = vec![false; self.rules.len()];
        for (_, func) in module.funcs() {
            let cfg = ControlFlowGraph::with_function(func);
            let dom = DominatorTree::with_cfg(&cfg);
            let loops = LoopAnalysis::compute(&cfg, &dom);
            for lp in loops.loops() {
                for (r, h) in self.rules.iter().zip(hit.iter_mut()) {
                    *h |= r.names(func, loops.header(lp));
                }
            }
        }
        self.rules
            .iter()
            .zip(hit)
            .filter(|(_, h)| !h)
            .map(|(r, _)| r)
            .collect()
    }
}

impl fmt::Display for CheckpointSchedule {
    /// The rules in canonical form, separated by `; `.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.rules.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// The source line of a loop headed by `header`: that of its terminator
/// (the loop's condition, for a `for` or `while` loop of the surface
/// language), else of its first statement that has a position.
pub fn header_line(func: &Func, header: Block) -> Option<u32> {
    header_pos(func, header).map(|p| p.line)
}

/// The source position of a loop headed by `header`, as [`header_line`]
/// finds its line.
pub fn header_pos(func: &Func, header: Block) -> Option<Pos> {
    let b = &func.blocks[header];
    b.term_pos
        .or_else(|| b.insts.iter().find_map(|&i| func.insts[i].pos))
}

/// The characters of a schedule with their positions.
struct Lexer {
    chars: Vec<(char, Pos)>,
    at: usize,
    end: Pos,
}

impl Lexer {
    fn new(text: &str) -> Lexer {
        let (mut line, mut col) = (1, 1);
        let mut chars = Vec::new();
        for c in text.chars() {
            chars.push((c, Pos { line, col }));
            if c == '\n' {
                line += 1;
                col = 1;
            } else {
                col += 1;
            }
        }
        Lexer {
            chars,
            at: 0,
            end: Pos { line, col },
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).map(|c| c.0)
    }

    fn pos(&self) -> Pos {
        self.chars.get(self.at).map_or(self.end, |c| c.1)
    }

    fn peek_pos(&self) -> Option<Pos> {
        self.chars.get(self.at).map(|c| c.1)
    }

    /// Skips spaces and tabs (not new lines, which separate rules).
    fn skip_space(&mut self) {
        while matches!(self.peek(), Some(c) if c.is_whitespace() && c != '\n') {
            self.at += 1;
        }
    }

    /// Skips white space and `;`.
    fn skip_separators(&mut self) {
        while matches!(self.peek(), Some(c) if c.is_whitespace() || c == ';') {
            self.at += 1;
        }
    }

    /// The word (letters, digits, `_`, `.`) at the cursor, consumed.
    fn word(&mut self) -> String {
        let mut w = String::new();
        while let Some(c) = self
            .peek()
            .filter(|c| c.is_alphanumeric() || "_.".contains(*c))
        {
            w.push(c);
            self.at += 1;
        }
        w
    }

    /// What is at the cursor, for messages: the word there, a character,
    /// or the end.
    fn found(&self) -> String {
        match self.peek() {
            None => "the end of the schedule".into(),
            Some('\n') => "the end of the line".into(),
            Some(c) if c.is_alphanumeric() || c == '_' => {
                let w: String = self.chars[self.at..]
                    .iter()
                    .map(|c| c.0)
                    .take_while(|c| c.is_alphanumeric() || "_.".contains(*c))
                    .collect();
                format!("`{w}`")
            }
            Some(c) => format!("`{c}`"),
        }
    }

    fn error(&self, expected: &str) -> ParseError {
        ParseError {
            loc: Location::at(self.pos()),
            msg: format!("expected {expected}, found {}", self.found()),
        }
    }

    fn expect(&mut self, c: char, what: &str) -> Result<(), ParseError> {
        self.skip_space();
        if self.peek() == Some(c) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.error(what))
        }
    }

    /// A number that fits `u32` (`what` names it in messages).
    fn number(&mut self, what: &str) -> Result<u64, ParseError> {
        self.skip_space();
        let (pos, save) = (self.pos(), self.at);
        if !self.peek().is_some_and(|c| c.is_ascii_digit()) {
            return Err(self.error(what));
        }
        let w = self.word();
        match w.parse::<u64>() {
            Ok(n) => Ok(n),
            Err(_) => {
                self.at = save;
                Err(ParseError {
                    loc: Location::at(pos),
                    msg: format!("expected {what}, found `{w}`"),
                })
            }
        }
    }

    fn target(&mut self) -> Result<LoopTarget, ParseError> {
        let what = "a loop (`line N`, `#N` or `@NAME#N`)";
        let func = match self.peek() {
            Some('@') => {
                self.at += 1;
                let name = self.word();
                if name.is_empty() {
                    return Err(self.error("a function's name after `@`"));
                }
                if self.peek() != Some('#') {
                    return Err(self.error("`#` and the loop's label after the function"));
                }
                Some(name)
            }
            _ => None,
        };
        if self.peek() == Some('#') {
            self.at += 1;
            let pos = self.pos();
            let label = self.number("the label of the loop's header")?;
            let label = u32::try_from(label).map_err(|_| ParseError {
                loc: Location::at(pos),
                msg: format!("label #{label} is too large"),
            })?;
            return Ok(LoopTarget::Label { func, label });
        }
        let save = self.at;
        if self.word() != "line" {
            self.at = save;
            return Err(self.error(what));
        }
        self.skip_space();
        let pos = self.pos();
        let line = self.number("a line number after `line`")?;
        match u32::try_from(line) {
            Ok(n) if n > 0 => Ok(LoopTarget::Line(n)),
            _ => Err(ParseError {
                loc: Location::at(pos),
                msg: format!("line {line} does not exist (lines count from 1)"),
            }),
        }
    }

    fn choice(&mut self) -> Result<LoopChoice, ParseError> {
        let what = "a number of iterations, `record` or `none`";
        self.skip_space();
        if self.peek().is_some_and(|c| c.is_ascii_digit()) {
            return Ok(match self.number(what)? {
                0 => LoopChoice::Record,
                n => LoopChoice::Every(n),
            });
        }
        let save = self.at;
        match self.word().as_str() {
            "record" | "none" => Ok(LoopChoice::Record),
            _ => {
                self.at = save;
                Err(self.error(what))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        match CheckpointSchedule::parse(text) {
            Ok(s) => format!("parsed: {s}"),
            Err(e) => match e.loc.pos {
                Some(p) => format!("{}:{}: error: {}", p.line, p.col, e.msg),
                None => format!("nowhere: {}", e.msg),
            },
        }
    }

    #[test]
    fn rules_read_and_print_back() {
        let s = CheckpointSchedule::parse(" line 3=7 ;\n#12 = none\n@f.g_2#4 = 0;").unwrap();
        assert_eq!(s.to_string(), "line 3 = 7; #12 = record; @f.g_2#4 = record");
        assert_eq!(s.rules[1].pos, Pos { line: 2, col: 1 });
        assert_eq!(CheckpointSchedule::parse(&s.to_string()).unwrap(), {
            let mut t = s.clone();
            t.rules[0].pos = Pos { line: 1, col: 1 };
            t.rules[1].pos = Pos { line: 1, col: 13 };
            t.rules[2].pos = Pos { line: 1, col: 27 };
            t
        });
        assert!(CheckpointSchedule::parse("  ; \n").unwrap().is_empty());
    }

    #[test]
    fn errors_are_located() {
        assert_eq!(
            err("line x = 3"),
            "1:6: error: expected a line number after `line`, found `x`"
        );
        assert_eq!(
            err("line 0 = 3"),
            "1:6: error: line 0 does not exist (lines count from 1)"
        );
        assert_eq!(
            err("#5 3"),
            "1:4: error: expected `=` after the loop, found `3`"
        );
        assert_eq!(
            err("#5 = 3 4"),
            "1:8: error: expected `;` or the end of the schedule, found `4`"
        );
        assert_eq!(
            err("#5 = 3;\nloop 4 = 1"),
            "2:1: error: expected a loop (`line N`, `#N` or `@NAME#N`), found `loop`"
        );
        assert_eq!(
            err("@#5 = 1"),
            "1:2: error: expected a function's name after `@`, found `#`"
        );
        assert_eq!(
            err("@f = 1"),
            "1:3: error: expected `#` and the loop's label after the function, found ` `"
        );
        assert_eq!(
            err("#99999999999 = 1"),
            "1:2: error: label #99999999999 is too large"
        );
        assert_eq!(
            err("#1 = 99999999999999999999999"),
            "1:6: error: expected a number of iterations, `record` or `none`, found `99999999999999999999999`"
        );
        assert_eq!(
            err("#1 ="),
            "1:5: error: expected a number of iterations, `record` or `none`, found the end of the schedule"
        );
    }
}
