//! The facade's one error type, [`Error`]: every lower crate's error wrapped
//! with the name of its source, whose fault it is ([`Error::kind`]), and how
//! people read it ([`Error::render`]: SYNTAX.md's `file:line:column: error:`
//! format with the source line and a caret, call traces of run-time errors).
//!
//! Assumes the source a located error names is the one given to `render`.
//! Guarantees: every message starts with the file (and a line and column
//! where the error has a place), never panics on any error or source.

use crate::{Source, diag, grad_error};
use irad_codegen as codegen;
use irad_ir as ir;
use irad_ir::interp::RunError;
use irad_ir::text::ParseError;
use irad_ir::verify::VerifyError;
use irad_ir::{Diagnostic, Pos};
use irad_passes::forward::ForwardError;
use irad_passes::forward::grad::GradError;

/// Anything that can go wrong between reading a file and printing a result.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("{file}: error: cannot read file: {message}")]
    Io {
        /// The path.
        file: String,
        /// What the operating system said.
        message: String,
    },
    /// An output file could not be written (`irad emit`).
    #[error("{file}: error: cannot write file: {message}")]
    Write {
        /// The path.
        file: String,
        /// What the operating system said.
        message: String,
    },
    /// The file is not UTF-8.
    #[error("{file}:{}:{}: error: file is not valid UTF-8", pos.line, pos.col)]
    Utf8 {
        /// The path.
        file: String,
        /// Where the first bad byte is.
        pos: Pos,
    },
    /// The file's extension names no language irad reads.
    #[error("{file}:1:1: error: {message}")]
    Language {
        /// The path.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// A syntax or name error in IR text or in argument text.
    #[error("{file}: {err}")]
    Parse {
        /// The source's name.
        file: String,
        /// The error (boxed: it is large and rare).
        err: Box<ParseError>,
    },
    /// Errors of the surface language: syntax, names, types.
    #[error("{file}: {} error(s)", errs.len())]
    Surface {
        /// The source's name.
        file: String,
        /// Every error found.
        errs: Vec<ir::surface::SurfaceError>,
    },
    /// The module does not verify.
    #[error("{file}: {} verification error(s)", errs.len())]
    Verify {
        /// The source's name.
        file: String,
        /// Every error found.
        errs: Vec<VerifyError>,
    },
    /// `-f NAME` names no function of the module.
    #[error("{file}:1:1: error: {message}")]
    NoFunction {
        /// The source's name.
        file: String,
        /// What is wrong, with the functions that exist.
        message: String,
    },
    /// The request does not fit the program (`irad dump --activity --wrt`
    /// naming a parameter the function does not have).
    #[error("{file}:1:1: error: {message}")]
    Request {
        /// The source's name.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// A feature the request needs is not built yet.
    #[error("{file}:1:1: error: {message}")]
    Unsupported {
        /// The source's name.
        file: String,
        /// What is missing.
        message: String,
    },
    /// A bug of irad, not a fault of the input (`message` starts with
    /// `internal error: `); errors of the lower crates say the same through
    /// their kind (`irad::ir::interp::ErrorKind::Internal`).
    #[error("{file}:1:1: error: {message}")]
    Internal {
        /// The source's name.
        file: String,
        /// What went wrong.
        message: String,
    },
    /// A pass failed (an unknown pass name, or a pass that left invalid IR).
    #[error("{file}: error: {err}")]
    Pass {
        /// The source's name.
        file: String,
        /// The error.
        err: irad_passes::PassError,
    },
    /// Forward mode could not derive a rule, or the gradient request does
    /// not fit the function (`--wrt`, result type).
    #[error("{file}: {err}")]
    Forward {
        /// The source's name.
        file: String,
        /// The error (boxed: it is large and rare).
        err: Box<ForwardError>,
    },
    /// Reverse mode could not derive the pieces of a function.
    #[error("{file}: {err}")]
    Reverse {
        /// The source's name.
        file: String,
        /// The error (boxed: it is large and rare).
        err: Box<irad_passes::reverse::ReverseError>,
    },
    /// A specialisation could not be made (`irad dump --known`): the known
    /// arguments do not fit the function, or it did not settle.
    #[error("{file}: {err}")]
    Pe {
        /// The source's name.
        file: String,
        /// The error (boxed: it is large and rare).
        err: Box<irad_passes::pe::PeError>,
    },
    /// A run-time error.
    #[error("{file}: {err}")]
    Run {
        /// The source's name.
        file: String,
        /// The error (boxed: it is large and rare).
        err: Box<RunError>,
    },
    /// Code generation failed, or a function cannot be exported through the
    /// C ABI (`irad emit`).
    #[error("{file}: {err}")]
    Codegen {
        /// The source's name.
        file: String,
        /// The error (boxed: it is large and rare).
        err: Box<codegen::CodegenError>,
    },
    /// A schedule that does not parse (located in the schedule text, the
    /// pseudo-file `<schedule>`), or that failed to run (out of fuel).
    #[error("{}", schedule_message(file, err))]
    Schedule {
        /// The source's name (`<schedule>` for a parse error).
        file: String,
        /// The error (boxed: it is large and rare).
        err: Box<irad_passes::optimise::OptError>,
    },
    /// `irad test-rules`: some rules disagree with their primitive.
    #[error("error: {failed} of {total} rule checks failed")]
    RulesFailed {
        /// How many test signatures failed.
        failed: usize,
        /// How many were checked.
        total: usize,
    },
    /// `irad test-rules FILE`: some rules declared in the file disagree with
    /// their function (or could not be checked).
    #[error(
        "{file}:1:1: error: the declared rules of {failed} of {total} functions failed their checks{}",
        unchecked_note(*unchecked)
    )]
    DeclaredRulesFailed {
        /// The source's name.
        file: String,
        /// How many functions failed or could not be checked.
        failed: usize,
        /// How many of those could not be checked (a parameter the
        /// tester cannot sample).
        unchecked: usize,
        /// How many have declared rules.
        total: usize,
    },
    /// `irad check-grad`: some gradient entries disagree with finite
    /// differences, or forward mode with reverse mode.
    #[error("{file}:1:1: error: {failed} of {total} gradient checks of `{func}` failed")]
    GradCheckFailed {
        /// The source's name.
        file: String,
        /// The function checked.
        func: String,
        /// How many entries (output, input) failed.
        failed: usize,
        /// How many were checked.
        total: usize,
    },
}

impl Error {
    /// Whose fault it is: [`ir::interp::ErrorKind::Internal`] for a bug of
    /// irad (an [`Error::Internal`], or a wrapped error of that kind),
    /// [`ir::interp::ErrorKind::User`] for a fault of the input, the
    /// arguments or the request.
    pub fn kind(&self) -> ir::interp::ErrorKind {
        use ir::interp::ErrorKind;
        match self {
            Error::Internal { .. } => ErrorKind::Internal,
            Error::Pass { err, .. } => err.kind(),
            Error::Forward { err, .. } => err.kind,
            Error::Reverse { err, .. } => err.kind,
            Error::Pe { err, .. } => err.kind(),
            Error::Run { err, .. } => err.kind(),
            Error::Codegen { err, .. } => err.kind(),
            _ => ErrorKind::User,
        }
    }
}

/// The error of a pipeline of the pass manager, in the facade's terms: a
/// stage's own error as the facade reports it elsewhere (forward, reverse,
/// gradient request, schedule, specialisation), any other as [`Error::Pass`].
pub fn pass_error(src: &Source, e: irad_passes::PassError) -> Error {
    use irad_passes::PassError as P;
    let file = src.name.clone();
    match e {
        P::Forward(err) => Error::Forward { file, err },
        P::Reverse(err) => Error::Reverse { file, err },
        P::Grad(err) => grad_error(src, *err),
        P::Optimise(err) => Error::Schedule { file, err },
        P::Pe(err) => Error::Pe { file, err },
        P::Request { message } => Error::Request { file, message },
        err => Error::Pass { file, err },
    }
}

impl Error {
    /// The error as people read it: each message in SYNTAX.md's format
    /// (`file:line:column: error: ...`) with the source line and a caret.
    /// `sources` are the texts the error may point into, looked up by name;
    /// without its text an error still names file, line and column.
    ///
    /// ```
    /// use irad::Source;
    ///
    /// let src = Source::new("t.ir", "func @t(%x: f64) -> f64 {\n#1:\n  return %y\n}\n");
    /// let err = irad::load(&src).unwrap_err();
    /// let text = err.render(&[&src]);
    /// assert!(text.starts_with("t.ir:3:"), "{text}");
    /// assert!(text.contains("return %y"), "{text}"); // the line, with a caret
    /// assert!(err.render(&[]).starts_with("t.ir:3:"));
    /// ```
    pub fn render(&self, sources: &[&Source]) -> String {
        let text_of = |file: &str| {
            sources
                .iter()
                .find(|s| s.name == file)
                .map(|s| s.text.as_str())
        };
        match self {
            Error::Parse { file, err } => render_diag(file, text_of(file), &**err),
            Error::Verify { file, errs } => render_all(file, text_of(file), errs),
            Error::Pass { file, err } => {
                let mut out = diag::render(file, None, Some(Pos::new(1, 1)), &err.to_string());
                let errs = match err {
                    irad_passes::PassError::Input { errors }
                    | irad_passes::PassError::Verify { errors, .. } => errors.as_slice(),
                    _ => &[],
                };
                out.push_str(&render_all(file, text_of(file), errs));
                out
            }
            Error::Surface { file, errs } => render_all(file, text_of(file), errs),
            Error::Forward { file, err } => render_diag(file, text_of(file), &**err),
            Error::Reverse { file, err } => render_diag(file, text_of(file), &**err),
            Error::Codegen { file, err } => render_diag(file, text_of(file), &**err),
            Error::Pe { file, err } => render_diag(file, text_of(file), &**err),
            Error::Schedule { file, err } => match &**err {
                // Already `<schedule>:LINE:COL: error: ...`.
                irad_passes::optimise::OptError::Parse { .. } => format!("{err}\n"),
                other => diag::render(file, None, Some(Pos::new(1, 1)), &other.to_string()),
            },
            Error::Run { file, err } => {
                // Derived functions are named for the user ("in the
                // gradient of `f`"), their internal names kept in parentheses.
                let lines = text_of(file).map(|text| diag::SourceLines::new(file, text));
                let message = ir::loc::with_user_place(&err.msg, &err.loc);
                let pos = err.loc.pos.or(Some(Pos::new(1, 1)));
                let mut out = match &lines {
                    Some(lines) => lines.render(pos, &message),
                    None => diag::render(file, None, pos, &message),
                };
                // A depth-limit error has a call site per frame: show the
                // innermost and outermost few.
                // (The interpreter keeps only the ends of a deep stack and
                // counts the rest in `trace_elided`.)
                for (pos, what) in trace_notes(err) {
                    out.push_str(&diag::note(file, pos, &what));
                }
                out
            }
            Error::Utf8 { file, pos } => {
                diag::render(file, None, Some(*pos), "file is not valid UTF-8")
            }
            // No line is at fault; SYNTAX.md still wants a line and column.
            Error::NoFunction { file, message }
            | Error::Request { file, message }
            | Error::Language { file, message }
            | Error::Unsupported { file, message }
            | Error::Internal { file, message } => {
                diag::render(file, None, Some(Pos::new(1, 1)), message)
            }
            other => format!("{other}\n"),
        }
    }
}

impl Error {
    /// The error as one JSON object, for `--json` (docs/cli.md, "JSON
    /// output"): `{"error": E, "errors": [E, ...]}`, where each `E` is
    /// `{"file", "line", "column", "message", "kind"}` and `error` is the
    /// first of `errors` (a file with three syntax errors has three). Each
    /// `E` says what the first line of the text form says
    /// (`file:line:column: error: message`, [`Error::render`]): `file`,
    /// `line` and `column` are `null` where that line has none (`cannot read
    /// file`, `test-rules`' verdict), `kind` is `"user"` or `"internal"`
    /// ([`Error::kind`]).
    ///
    /// ```
    /// use irad::Source;
    ///
    /// let src = Source::new("t.ir", "func @t(%x: f64) -> f64 {\n#1:\n  return %y\n}\n");
    /// let err = irad::load(&src).unwrap_err();
    /// let j = err.to_json();
    /// assert_eq!(j["error"]["file"], "t.ir");
    /// assert_eq!(j["error"]["line"], 3);
    /// assert_eq!(j["error"]["kind"], "user");
    /// let first = err.render(&[&src]);
    /// let m = j["error"]["message"].as_str().unwrap();
    /// assert!(first.starts_with(&format!("t.ir:3:{}: error: {m}\n", j["error"]["column"])));
    /// ```
    pub fn to_json(&self) -> serde_json::Value {
        let kind = match self.kind() {
            ir::interp::ErrorKind::User => "user",
            ir::interp::ErrorKind::Internal => "internal",
        };
        let entries: Vec<serde_json::Value> = self
            .messages()
            .into_iter()
            .map(|m| m.to_json(kind))
            .collect();
        let mut entries = entries;
        // A run-time error's call trace, as the text's notes.
        if let (Error::Run { file, err }, Some(serde_json::Value::Object(first))) =
            (self, entries.first_mut())
        {
            let notes: Vec<serde_json::Value> = trace_notes(err)
                .into_iter()
                .map(|(pos, message)| {
                    serde_json::json!({
                        "file": pos.map(|_| file),
                        "line": pos.map(|p| p.line),
                        "column": pos.map(|p| p.col),
                        "message": message,
                    })
                })
                .collect();
            first.insert("notes".into(), serde_json::Value::Array(notes));
        }
        let first = entries.first().cloned().unwrap_or(serde_json::Value::Null);
        serde_json::json!({ "error": first, "errors": entries })
    }

    /// Every message of the error, as the header lines of [`Error::render`]
    /// say them (at least one).
    fn messages(&self) -> Vec<Message> {
        let at = |file: &str, pos: Option<Pos>, text: String| Message {
            file: Some(file.to_string()),
            pos,
            text,
        };
        let start = Some(Pos::new(1, 1));
        let located = |file: &str, err: &dyn Diagnostic| {
            let loc = err.location();
            at(
                file,
                loc.pos.or(start),
                ir::loc::with_place(err.message(), loc),
            )
        };
        let all = |file: &str, errs: &[&dyn Diagnostic]| -> Vec<Message> {
            errs.iter().map(|e| located(file, *e)).collect()
        };
        let mut out = match self {
            Error::Parse { file, err } => vec![located(file, &**err)],
            Error::Verify { file, errs } => all(file, &dyns(errs)),
            Error::Surface { file, errs } => all(file, &dyns(errs)),
            Error::Forward { file, err } => vec![located(file, &**err)],
            Error::Reverse { file, err } => vec![located(file, &**err)],
            Error::Codegen { file, err } => vec![located(file, &**err)],
            Error::Pe { file, err } => vec![located(file, &**err)],
            Error::Pass { file, err } => {
                let errs = match err {
                    irad_passes::PassError::Input { errors }
                    | irad_passes::PassError::Verify { errors, .. } => errors.as_slice(),
                    _ => &[],
                };
                let mut out = vec![at(file, start, err.to_string())];
                out.extend(all(file, &dyns(errs)));
                out
            }
            Error::Schedule { file, err } => match &**err {
                irad_passes::optimise::OptError::Parse { line, col, msg } => {
                    // Its text names the pseudo-file itself.
                    vec![at("<schedule>", Some(Pos::new(*line, *col)), msg.clone())]
                }
                other => vec![at(file, start, other.to_string())],
            },
            Error::Run { file, err } => vec![at(
                file,
                err.loc.pos.or(start),
                ir::loc::with_user_place(&err.msg, &err.loc),
            )],
            Error::Utf8 { file, pos } => {
                vec![at(file, Some(*pos), "file is not valid UTF-8".into())]
            }
            Error::NoFunction { file, message }
            | Error::Request { file, message }
            | Error::Language { file, message }
            | Error::Unsupported { file, message }
            | Error::Internal { file, message } => vec![at(file, start, message.clone())],
            Error::Io { file, message } | Error::Write { file, message } => {
                let verb = if matches!(self, Error::Io { .. }) {
                    "read"
                } else {
                    "write"
                };
                vec![at(file, None, format!("cannot {verb} file: {message}"))]
            }
            Error::RulesFailed { failed, total } => vec![Message {
                file: None,
                pos: None,
                text: format!("{failed} of {total} rule checks failed"),
            }],
            Error::DeclaredRulesFailed {
                file,
                failed,
                unchecked,
                total,
            } => vec![at(
                file,
                start,
                format!(
                    "the declared rules of {failed} of {total} functions failed their checks{}",
                    unchecked_note(*unchecked)
                ),
            )],
            Error::GradCheckFailed {
                file,
                func,
                failed,
                total,
            } => vec![at(
                file,
                start,
                format!("{failed} of {total} gradient checks of `{func}` failed"),
            )],
        };
        if out.is_empty() {
            // An error list that is empty still says something.
            out.push(Message {
                file: None,
                pos: None,
                text: self.to_string(),
            });
        }
        out
    }
}

/// One message of an [`Error`]: what the first line of its text form says.
struct Message {
    file: Option<String>,
    pos: Option<Pos>,
    text: String,
}

impl Message {
    fn to_json(&self, kind: &str) -> serde_json::Value {
        serde_json::json!({
            "file": self.file,
            "line": self.pos.map(|p| p.line),
            "column": self.pos.map(|p| p.col),
            "message": self.text,
            "kind": kind,
        })
    }
}

fn dyns<E: Diagnostic>(errs: &[E]) -> Vec<&dyn Diagnostic> {
    errs.iter().map(|e| e as &dyn Diagnostic).collect()
}

/// The message of [`Error::Schedule`]: a parse error already names its place
/// in the schedule text; a failure while running names the file.
fn schedule_message(file: &str, err: &irad_passes::optimise::OptError) -> String {
    match err {
        irad_passes::optimise::OptError::Parse { .. } => err.to_string(),
        other => format!("{file}: {other}"),
    }
}

/// How many innermost and outermost call sites a run-time error shows.
/// The notes of a run-time error's call trace, innermost first: the first
/// [`TRACE_HEAD`] and the last [`TRACE_TAIL`] call sites (`called ...`,
/// with their positions), and between them `... N more calls ...` for the
/// rest (those the interpreter did not keep included).
fn trace_notes(err: &RunError) -> Vec<(Option<Pos>, String)> {
    let n = err.trace.len();
    let mut out = Vec::new();
    for (i, call) in err.trace.iter().enumerate() {
        if i == TRACE_HEAD && n > TRACE_HEAD + TRACE_TAIL {
            let hidden = (n - TRACE_HEAD - TRACE_TAIL) as u64 + err.trace_elided;
            out.push((None, format!("... {hidden} more calls ...")));
        }
        if i < TRACE_HEAD || i + TRACE_TAIL >= n {
            out.push((call.pos, format!("called {}", call.user_place())));
        }
    }
    out
}

const TRACE_HEAD: usize = 8;
const TRACE_TAIL: usize = 2;

/// Renders many errors of one file, indexing its lines once, so that a file
/// with many errors renders in linear time.
fn render_all<E: Diagnostic>(file: &str, text: Option<&str>, errs: &[E]) -> String {
    let lines = text.map(|text| diag::SourceLines::new(file, text));
    errs.iter()
        .map(|e| render_located(file, lines.as_ref(), e))
        .collect()
}

fn render_diag(file: &str, text: Option<&str>, err: &dyn Diagnostic) -> String {
    let lines = text.map(|text| diag::SourceLines::new(file, text));
    render_located(file, lines.as_ref(), err)
}

fn render_located(file: &str, lines: Option<&diag::SourceLines>, err: &dyn Diagnostic) -> String {
    let loc = err.location();
    let message = ir::loc::with_place(err.message(), loc);
    // SYNTAX.md: every message names a line and column; an error with no
    // position of its own points at the start of the file.
    let pos = loc.pos.or(Some(Pos::new(1, 1)));
    match lines {
        Some(lines) => lines.render(pos, &message),
        None => diag::render(file, None, pos, &message),
    }
}

/// `$some` with `$file` bound to the error's file name, or `$none` for the
/// one variant without a file: one list of the variants for [`Error::file`]
/// and its `&mut` twin.
macro_rules! with_file {
    ($e:expr, $file:ident => $some:expr, $none:expr) => {
        match $e {
            Error::Io { file: $file, .. }
            | Error::Write { file: $file, .. }
            | Error::Utf8 { file: $file, .. }
            | Error::Language { file: $file, .. }
            | Error::Parse { file: $file, .. }
            | Error::Surface { file: $file, .. }
            | Error::Verify { file: $file, .. }
            | Error::NoFunction { file: $file, .. }
            | Error::Request { file: $file, .. }
            | Error::Unsupported { file: $file, .. }
            | Error::Internal { file: $file, .. }
            | Error::Pass { file: $file, .. }
            | Error::Forward { file: $file, .. }
            | Error::Reverse { file: $file, .. }
            | Error::Pe { file: $file, .. }
            | Error::Run { file: $file, .. }
            | Error::Codegen { file: $file, .. }
            | Error::Schedule { file: $file, .. }
            | Error::GradCheckFailed { file: $file, .. }
            | Error::DeclaredRulesFailed { file: $file, .. } => $some,
            Error::RulesFailed { .. } => $none,
        }
    };
}

/// The file name an error converted with `From` (the `?` operator) carries
/// until [`Error::in_file`] names its source: modules built with the builder
/// API have no file.
pub const UNNAMED_SOURCE: &str = "<module>";

impl Error {
    /// The same error naming `file` as its source (the name of the
    /// [`Source`] it is about), for errors made by `From`, which know no
    /// file ([`UNNAMED_SOURCE`]). [`Error::RulesFailed`] names no file and
    /// is returned as it is.
    ///
    /// ```
    /// use irad::{GradRequest, Val};
    ///
    /// fn gradient(src: &irad::Source) -> Result<(), irad::Error> {
    ///     let m = irad::load(src)?;
    ///     let f = irad::find_function(src, &m, "f")?;
    ///     let registry = irad::rules::Registry::new();
    ///     let args = [Val::F64(2.0), Val::f64_array(vec![1.0])];
    ///     let mut g = irad::jit_gradient(&m, &registry, &GradRequest::new(f, &args))?;
    ///     // A run-time error converts with `?`; `in_file` names the source.
    ///     let bad = [Val::F64(-1.0), Val::f64_array(vec![1.0])];
    ///     g.run(&bad, &Default::default()).map_err(|e| irad::Error::from(e).in_file(&src.name))?;
    ///     Ok(())
    /// }
    /// let src = irad::Source::new("f.irad", "fn f(x: f64, a: [f64]) -> f64 {\n    let y = x * a[0];\n    if x < 0.0 { a[3] } else { y }\n}\n");
    /// let err = gradient(&src).unwrap_err();
    /// assert!(err.render(&[&src]).starts_with("f.irad:3:"), "{}", err.render(&[&src]));
    /// ```
    pub fn in_file(mut self, file: &str) -> Error {
        if let Some(slot) = self.file_mut() {
            *slot = file.to_string();
        }
        self
    }

    /// The name of the source the error is about (`None` for
    /// [`Error::RulesFailed`]).
    ///
    /// ```
    /// let err = irad::load(&irad::Source::new("bad.irad", "fn")).unwrap_err();
    /// assert_eq!(err.file(), Some("bad.irad"));
    /// ```
    pub fn file(&self) -> Option<&str> {
        with_file!(self, file => Some(file.as_str()), None)
    }

    fn file_mut(&mut self) -> Option<&mut String> {
        with_file!(self, file => Some(file), None)
    }

    /// A source standing for "no file", for the `From` conversions.
    fn unnamed() -> Source {
        Source::new(UNNAMED_SOURCE, "")
    }
}

/// A gradient's error (derivation, request or run time), as
/// [`crate::grad_error`] makes it, naming [`UNNAMED_SOURCE`] until
/// [`Error::in_file`].
impl From<GradError> for Error {
    fn from(e: GradError) -> Error {
        grad_error(&Error::unnamed(), e)
    }
}

/// A run-time error.
impl From<RunError> for Error {
    fn from(err: RunError) -> Error {
        Error::Run {
            file: UNNAMED_SOURCE.into(),
            err: Box::new(err),
        }
    }
}

/// A code-generation error.
impl From<codegen::CodegenError> for Error {
    fn from(err: codegen::CodegenError) -> Error {
        Error::Codegen {
            file: UNNAMED_SOURCE.into(),
            err: Box::new(err),
        }
    }
}

/// A pass-manager error, as [`pass_error`] makes it.
impl From<irad_passes::PassError> for Error {
    fn from(e: irad_passes::PassError) -> Error {
        pass_error(&Error::unnamed(), e)
    }
}

/// A forward-mode derivation error.
impl From<ForwardError> for Error {
    fn from(err: ForwardError) -> Error {
        Error::Forward {
            file: UNNAMED_SOURCE.into(),
            err: Box::new(err),
        }
    }
}

/// A reverse-mode derivation error.
impl From<irad_passes::reverse::ReverseError> for Error {
    fn from(err: irad_passes::reverse::ReverseError) -> Error {
        Error::Reverse {
            file: UNNAMED_SOURCE.into(),
            err: Box::new(err),
        }
    }
}

/// A specialisation error.
impl From<irad_passes::pe::PeError> for Error {
    fn from(err: irad_passes::pe::PeError) -> Error {
        Error::Pe {
            file: UNNAMED_SOURCE.into(),
            err: Box::new(err),
        }
    }
}

/// A schedule error (parse or run).
impl From<irad_passes::optimise::OptError> for Error {
    fn from(err: irad_passes::optimise::OptError) -> Error {
        Error::Schedule {
            file: UNNAMED_SOURCE.into(),
            err: Box::new(err),
        }
    }
}

/// A parse error of IR text.
impl From<ParseError> for Error {
    fn from(err: ParseError) -> Error {
        Error::Parse {
            file: UNNAMED_SOURCE.into(),
            err: Box::new(err),
        }
    }
}

/// Verification errors of a module.
impl From<Vec<VerifyError>> for Error {
    fn from(errs: Vec<VerifyError>) -> Error {
        Error::Verify {
            file: UNNAMED_SOURCE.into(),
            errs,
        }
    }
}

/// An error of a compiled module or gradient, each part as its own
/// conversion makes it.
impl From<crate::CompiledError> for Error {
    fn from(e: crate::CompiledError) -> Error {
        use crate::CompiledError as C;
        match e {
            C::Pass(err) => err.into(),
            C::Forward(err) => err.into(),
            C::Reverse(err) => err.into(),
            C::Codegen(err) => err.into(),
            C::Run(err) => err.into(),
        }
    }
}

/// A gradient error as a compiled module's error (the request errors of
/// [`GradError::Invalid`] become forward-mode errors, as
/// [`crate::grad_error`] reports them).
impl From<GradError> for crate::CompiledError {
    fn from(e: GradError) -> crate::CompiledError {
        use crate::CompiledError as C;
        match e {
            GradError::Forward(err) => C::Forward(err),
            GradError::Reverse(err) => C::Reverse(err),
            GradError::Run(err) => C::Run(err),
            GradError::Invalid { loc, msg } => C::Forward(ForwardError::new(loc, msg)),
        }
    }
}

/// The tail of [`Error::DeclaredRulesFailed`]'s message: how many of the
/// functions counted were not checked at all.
fn unchecked_note(unchecked: usize) -> String {
    match unchecked {
        0 => String::new(),
        1 => " (1 could not be checked: check it with irad check-grad)".to_string(),
        n => format!(" ({n} could not be checked: check them with irad check-grad)"),
    }
}
