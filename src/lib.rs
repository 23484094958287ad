//! irad: a compiler middle-end that differentiates SSA programs.
//!
//! This facade ties the layers together for the command line and for embedding
//! compilers: read a source file, parse and verify it ([`load`], or
//! [`load_normalised`] to also normalise), find a function ([`find_function`]),
//! read its arguments ([`parse_args`]), run it ([`run`] with a [`RunRequest`]:
//! interpreter or JIT), and show any error in SYNTAX.md's format
//! ([`Error::render`]). Each operation takes one request struct whose `new`
//! gives the defaults, changed with struct-update syntax.
//! Gradients: [`grad`] gives value and gradient as a [`GradRequest`] asks
//! (mode, `wrt`, batch width and backend in [`GradOptions`], a schedule);
//! [`grad_reverse`] and [`grad_forward`] are its one-mode shorthands with the
//! default schedule; [`forward_module`] and [`reverse_module`] give the module
//! with the derived functions added, unoptimised (what `irad dump --mode
//! fwd|rev --schedule id` prints).
//! Directional and seeded derivatives: [`jvp`] (the derivative along a
//! tangent, one forward pass), [`vjp`] (reverse mode with an output seed of
//! the result's type) and [`jacobian`] (either mode), for results of any
//! shape with f64 entries; [`parse_tangent`] and [`parse_seed`] read their
//! directions (`irad jvp`, `irad grad --seed`, `irad jacobian`).
//! Native code: [`jit_gradient`] keeps a gradient compiled by the JIT
//! ([`CompiledGradient`]: `Send + Sync`, called through `&self` from many
//! threads at once, with typed, allocation-free calls
//! [`CompiledGradient::gradient_into`] taking [`ArgRef`]s and writing
//! [`GradOut`]s), [`jit_reverse`] / [`jit_forward`] / [`jit_primal`] a
//! whole module ([`Compiled`]), and [`emit`] writes an object file with a C ABI
//! and its header as an [`EmitRequest`] asks (`irad emit`).
//! Every stage (normalisation, forward and reverse mode, the optimiser,
//! specialisation) runs under the pass manager of [`passes::manager`].
//! The layers themselves are re-exported: [`ir`] is the IR crate (builder,
//! text format, verifier, interpreter), [`rules`] the rule registry and the
//! rule checker behind `irad test-rules` ([`test_rules`]), [`passes`] the pass
//! manager, normalisation, forward and reverse mode and the optimiser,
//! [`codegen`] the Cranelift backend.
//!
//! Every function here returns [`Error`] for bad input; none panics. Errors
//! carry the source's name and, where the input has one, a line and column.
//!
//! # Quick start
//!
//! Parse a function of the surface language, and get its value and gradient
//! by reverse mode:
//!
//! ```
//! use irad::{GradOptions, Source};
//!
//! # fn main() -> Result<(), irad::Error> {
//! let src = Source::new("f.irad", "fn f(x: f64, y: f64) -> f64 { x * x * y + sin(y) }");
//! let module = irad::load(&src)?;
//! let f = irad::find_function(&src, &module, "f")?;
//! let args = irad::parse_args(&Source::new("<args>", "3.0, 0.0"), &module, f)?;
//! let registry = irad::rules::Registry::new();
//! let (g, m) = irad::grad_reverse(&src, &module, f, &args, &registry, &GradOptions::default())?;
//! assert_eq!(g.value.display(&m), "0.0");
//! let grads: Vec<String> = g.gradient.iter().flatten().map(|d| d.display(&m)).collect();
//! assert_eq!(grads, ["0.0", "10.0"]); // d/dx = 2xy, d/dy = x^2 + cos(y)
//! # Ok(())
//! # }
//! ```
//!
//! Errors name the place: a type error in the source is rendered as the
//! command line prints it.
//!
//! ```
//! use irad::Source;
//!
//! let src = Source::new("bad.irad", "fn f(x: f64) -> f64 {\n    x + 1\n}\n");
//! let err = irad::load(&src).unwrap_err();
//! let text = err.render(&[&src]);
//! assert!(text.starts_with("bad.irad:2:"), "{text}");
//! assert!(text.contains("error: "), "{text}");
//! ```
//!
//! # Registering a user rule
//!
//! An embedder can give any function of its module a hand-written derivative:
//! [`rules::Registry::register_function_frule`] (forward mode) and
//! [`rules::Registry::register_function_rrule`] (reverse mode) mark the
//! function primitive, so the AD passes call the rule where they meet
//! `invoke @name(...)` instead of differentiating its body (docs/rules.md).
//! Here `@clip` clamps its argument to `[-1, 1]`, and the rules are the
//! "straight-through" derivative 1 that training code often wants for it,
//! where the body's derivative would be 0 outside the interval.
//!
//! ```
//! use irad::ir::{FuncBuilder, Operand};
//! use irad::rules::{FruleCall, FwdOut, PullbackCall, PullbackOut, RevCall, RevFwdOut};
//! use irad::rules::{Registry, RruleFns, RuleError};
//! use irad::{GradOptions, Mode, Source};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let src = Source::new(
//!     "clip.irad",
//!     "fn clip(x: f64) -> f64 { min(max(x, -1.0), 1.0) }\n\
//!      fn f(x: f64) -> f64 { 3.0 * clip(x) }\n",
//! );
//! let module = irad::load(&src)?;
//! let f = irad::find_function(&src, &module, "f")?;
//!
//! /// The primal: `invoke @clip(x)` (a rule writes IR through the builder).
//! fn call_clip(b: &mut FuncBuilder<'_>, x: Operand) -> Result<Operand, RuleError> {
//!     let missing = || RuleError::Unsupported("no @clip".into());
//!     let clip = b.module().by_name("clip").ok_or_else(missing)?;
//!     b.invoke(clip, &[x])?.map(Operand::Value).ok_or_else(missing)
//! }
//! let mut registry = Registry::new();
//! // Forward: the tangent passes through unchanged.
//! registry.register_function_frule("clip", |b: &mut FuncBuilder<'_>, call: &FruleCall<'_>| {
//!     let [x] = call.args else {
//!         return Err(RuleError::Unsupported("clip takes one argument".into()));
//!     };
//!     Ok(FwdOut { primal: call_clip(b, x.primal)?, tangents: x.tangents.clone() })
//! });
//! // Reverse: nothing to save; the cotangent passes through unchanged.
//! registry.register_function_rrule(
//!     "clip",
//!     RruleFns::new(
//!         |b: &mut FuncBuilder<'_>, call: &RevCall<'_>| {
//!             let [x] = call.args else {
//!                 return Err(RuleError::Unsupported("clip takes one argument".into()));
//!             };
//!             let primal = call_clip(b, x.primal)?;
//!             Ok(RevFwdOut { primal, shadows: Default::default(), saved: Default::default() })
//!         },
//!         |_b: &mut FuncBuilder<'_>, call: &PullbackCall<'_>| {
//!             Ok(PullbackOut { cotangents: vec![call.dy.iter().copied().collect()].into() })
//!         },
//!     ),
//! );
//!
//! let args = irad::parse_args(&Source::new("<args>", "5.0"), &module, f)?;
//! let opts = GradOptions::default();
//! for mode in [Mode::Forward, Mode::Reverse] {
//!     let (g, m) = match mode {
//!         Mode::Forward => irad::grad_forward(&src, &module, f, &args, &registry, &opts)?,
//!         Mode::Reverse => irad::grad_reverse(&src, &module, f, &args, &registry, &opts)?,
//!     };
//!     assert_eq!(g.value.display(&m), "3.0");
//!     // 3 * (the rule's 1), where differentiating clip's body would give 0.
//!     assert_eq!(g.gradient[0].as_ref().map(|d| d.display(&m)).as_deref(), Some("3.0"));
//! }
//! // Without the rules, the body is differentiated.
//! let plain = Registry::new();
//! let (g, m) = irad::grad_reverse(&src, &module, f, &args, &plain, &opts)?;
//! assert_eq!(g.gradient[0].as_ref().map(|d| d.display(&m)).as_deref(), Some("0.0"));
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod bench;
mod check_grad;
mod compiled;
mod declared_rules;
mod deriv;
pub mod diag;
pub mod dot;
mod emit;
mod error;
mod fof;
mod fos;
mod fwd_choice;
mod grad;
mod hvp;
mod hvp_export;
mod json;
mod rof;
mod rule_checks;
mod schedule;
mod size;
mod sparse_hessian;
mod strong;
pub mod timings;
mod typed;

pub use bench::{BenchOptions, BenchReport, MAX_RUNS, MIN_RUNS, MIN_SAMPLE_TIME, bench};
pub use check_grad::{
    FD_TOLERANCE, GradCheck, GradCheckEntry, GradCheckOptions, MODE_TOLERANCE, check_grad,
};
pub use compiled::{
    Compiled, CompiledError, CompiledGradient, Mode, jit_forward, jit_gradient, jit_primal,
    jit_reverse,
};
pub use declared_rules::{DeclaredRuleChecks, DeclaredRuleReport, check_declared_rules};
pub use deriv::{
    Jacobian, Jvp, SEED_SOURCE, TANGENT_SOURCE, jacobian, jvp, parse_seed, parse_tangent,
    require_seed, vjp,
};
pub use emit::{EmitRequest, define_in_module, emit, emit_noting};
pub use error::{Error, UNNAMED_SOURCE, pass_error};
pub use fwd_choice::{
    DEFAULT_BATCH, ForwardChoice, SPARSE_MIN_DIRECTIONS, choose_forward, forward_directions,
    sparse_capable,
};
pub use grad::{GradRequest, grad, grad_each, grad_error, grad_forward, grad_owned, grad_reverse};
pub use hvp::{Hessian, Hvp, HvpMode, hessian, hessian_via, hvp, hvp_via};
pub use irad_codegen as codegen;
pub use irad_ir as ir;
pub use irad_passes as passes;
pub use irad_rules as rules;
pub use json::value_to_json;
pub use rule_checks::{RuleChecks, check_rules};
pub use schedule::{CHECKPOINT_SOURCE, optimise_from, read_checkpoints, read_schedule};
pub use size::parse_size;
pub use typed::{ArgRef, GradOut};

use irad_passes::Step;
use irad_passes::forward::Forward;
pub use irad_passes::forward::grad::{GradError, GradOptions, Gradient};
pub use irad_passes::reverse::{UnboundedHook, UnboundedLoop};
use irad_passes::stages::{ForwardStage, ReverseStage, SpecialiseStage};

pub use ir::interp::value::Val;
pub use ir::interp::{RunError, RunOptions};

use ir::text::ParseError;
use ir::timings::{Stage, time};
use ir::{FuncId, Module, Pos};
use std::path::Path;

/// The warning `irad grad`, `bench` and `emit --grad` print on stderr for
/// a loop a tape limit or the checkpoint schedule asked to checkpoint that
/// is not checkpointed and records something per iteration: SYNTAX.md's
/// located format with `warning` for `error` (`file:line:column: warning:
/// loop #2 of @f is not checkpointed: REASON; its records grow with its
/// iterations`; the file alone when the loop has no source position).
///
/// ```
/// use irad::{GradOptions, GradRequest, Source, Val};
///
/// // `keep` takes what a call that may return its argument returns: not checkpointed.
/// let text = "fn f(x: [f64], n: i64) -> f64 {
///     let mut r = copy(x);
///     let mut keep = copy(x);
///     for i in 0..n {
///         let t = copy(r);
///         t[0] = t[0] * 0.5;
///         r = t;
///         if t[0] < keep[0] { keep = ident(r, 2); }
///     }
///     keep[0] + r[0]
/// }
/// fn ident(a: [f64], k: i64) -> [f64] {
///     if k > 0 {
///         return ident(a, k - 1);
///     }
///     a
/// }";
/// let src = Source::new("f.irad", text);
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let args = irad::parse_args(&Source::new("<args>", "[1.0, 2.0], 3"), &m, f)?;
/// let opts = GradOptions { tape_limit: Some(1024), ..GradOptions::default() };
/// let req = GradRequest { opts, ..GradRequest::new(f, &args) };
/// let (g, _) = irad::grad(&src, &m, &irad::rules::Registry::new(), &req)?;
/// let warnings: Vec<String> =
///     g.unbounded_loops.iter().map(|u| irad::unbounded_warning(&src, u)).collect();
/// assert_eq!(warnings.len(), 1);
/// assert!(warnings[0].starts_with("f.irad:4:"), "{}", warnings[0]);
/// assert!(warnings[0].contains(": warning: loop #2 of @f is not checkpointed: "));
///
/// // The same, told as the derivation notes it, before the run.
/// let told = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
/// let sink = told.clone();
/// let hook = irad::UnboundedHook::new(move |u| sink.lock().unwrap().push(u.clone()));
/// let opts = GradOptions { tape_limit: Some(1024), on_unbounded: Some(hook), ..GradOptions::default() };
/// let req = GradRequest { opts, ..GradRequest::new(f, &args) };
/// irad::grad(&src, &m, &irad::rules::Registry::new(), &req)?;
/// assert_eq!(*told.lock().unwrap(), g.unbounded_loops);
/// # Ok::<(), irad::Error>(())
/// ```
pub fn unbounded_warning(src: &Source, u: &UnboundedLoop) -> String {
    match u.skipped.pos {
        Some(p) => format!("{}:{}:{}: warning: {u}", src.name, p.line, p.col),
        None => format!("{}: warning: {u}", src.name),
    }
}

/// A source text and the name errors call it by (a path, or `<args>`).
/// [`load`] chooses the language by the name's extension.
#[derive(Clone, Debug)]
pub struct Source {
    /// The name printed in error messages.
    pub name: String,
    /// The text.
    pub text: String,
}

impl Source {
    /// A source called `name` holding `text` (nothing is read from disk).
    ///
    /// ```
    /// let src = irad::Source::new("sq.ir", "func @sq(%x: f64) -> f64 {\n#1:\n  %2 = call mul(%x, %x) :: f64\n  return %2\n}\n");
    /// assert_eq!(src.name, "sq.ir");
    /// assert!(irad::load(&src).is_ok());
    /// ```
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Source {
        Source {
            name: name.into(),
            text: text.into(),
        }
    }
}

/// Reads `path` as a source, checking that it is UTF-8; the source is named
/// by the path, as errors print it.
///
/// ```
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/rosenbrock.irad");
/// let src = irad::read_source(std::path::Path::new(path))?;
/// assert!(src.text.contains("fn rosenbrock"));
///
/// let err = irad::read_source(std::path::Path::new("no/such/file.irad")).unwrap_err();
/// assert!(err.to_string().starts_with("no/such/file.irad: error: cannot read file"));
/// # Ok::<(), irad::Error>(())
/// ```
pub fn read_source(path: &Path) -> Result<Source, Error> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| Error::Io {
        file: name.clone(),
        message: e.to_string(),
    })?;
    source_from_bytes(name, bytes)
}

/// A source from raw bytes, checking that they are UTF-8; the error names
/// the line and column of the first bad byte. A UTF-8 byte-order mark at the
/// start (as some Windows editors write) is skipped.
///
/// ```
/// let ok = irad::source_from_bytes("a.ir".into(), b"# nothing\n".to_vec())?;
/// assert_eq!(ok.text, "# nothing\n");
/// let bom = irad::source_from_bytes("a.ir".into(), b"\xef\xbb\xbf# nothing\n".to_vec())?;
/// assert_eq!(bom.text, "# nothing\n");
///
/// let err = irad::source_from_bytes("b.ir".into(), b"# ok\n  \xff".to_vec()).unwrap_err();
/// assert_eq!(err.to_string(), "b.ir:2:3: error: file is not valid UTF-8");
/// # Ok::<(), irad::Error>(())
/// ```
pub fn source_from_bytes(name: String, mut bytes: Vec<u8>) -> Result<Source, Error> {
    if bytes.starts_with(b"\xef\xbb\xbf") {
        bytes.drain(..3);
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(Source { name, text }),
        Err(e) => {
            let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            // `good` is valid UTF-8 by construction.
            let good = std::str::from_utf8(good).unwrap_or("");
            let line = good.matches('\n').count() + 1;
            let col = good.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            Err(Error::Utf8 {
                file: name,
                pos: Pos::new(to_u32(line), to_u32(col)),
            })
        }
    }
}

/// Parses and verifies a source, choosing the language by extension: `.ir` is
/// IR text, `.irad` the surface language (compiled to IR).
///
/// ```
/// use irad::Source;
///
/// let ir = Source::new("sq.ir", "func @sq(%x: f64) -> f64 {\n#1:\n  %2 = call mul(%x, %x) :: f64\n  return %2\n}\n");
/// let surface = Source::new("sq.irad", "fn sq(x: f64) -> f64 { x * x }");
/// for src in [&ir, &surface] {
///     let m = irad::load(src)?;
///     assert!(m.by_name("sq").is_some());
/// }
/// // Other extensions are refused, with a location.
/// let err = irad::load(&Source::new("sq.txt", "")).unwrap_err();
/// assert!(err.to_string().starts_with("sq.txt:1:1: error: unknown file type"));
/// # Ok::<(), irad::Error>(())
/// ```
pub fn load(src: &Source) -> Result<Module, Error> {
    let file = || src.name.clone();
    let ext = Path::new(&src.name).extension().and_then(|e| e.to_str());
    let module = match ext {
        Some("ir") => time(Stage::Parse, || ir::text::parse_module(&src.text)).map_err(|err| {
            Error::Parse {
                file: file(),
                err: Box::new(err),
            }
        })?,
        Some("irad") => {
            ir::surface::compile(&src.text).map_err(|errs| Error::Surface { file: file(), errs })?
        }
        _ => {
            return Err(Error::Language {
                file: file(),
                message:
                    "unknown file type: irad reads the surface language (.irad) and IR text (.ir)"
                        .into(),
            });
        }
    };
    // The surface lowering's output always verifies; if it ever did not, the
    // errors would still name the function and the source line.
    time(Stage::Check, || ir::verify::verify_module(&module))
        .map_err(|errs| Error::Verify { file: file(), errs })?;
    Ok(module)
}

/// [`load`], then the normalisation pipeline ([`normalise`]): the module the
/// AD passes and the code generator start from, verified after every pass
/// in every build. One call for an embedder that has text and wants IR ready
/// to differentiate.
///
/// ```
/// use irad::Source;
///
/// let src = Source::new("abs.irad", "fn abs2(x: f64) -> f64 { if x < 0.0 { -x } else { x } }");
/// let m = irad::load_normalised(&src)?;
/// let f = irad::find_function(&src, &m, "abs2")?;
/// // Normalisation leaves a single return block.
/// let text = irad::ir::text::print_module(&m);
/// assert_eq!(text.matches("return").count(), 1);
/// let v = irad::run(&src, &m, &irad::RunRequest::new(f, &[irad::Val::F64(-2.0)]))?;
/// assert_eq!(v.display(&m), "2.0");
/// # Ok::<(), irad::Error>(())
/// ```
pub fn load_normalised(src: &Source) -> Result<Module, Error> {
    let module = load(src)?;
    normalise(src, &module)
}

/// Checks a module made some other way than [`load`] (the builder API, a
/// pass of the embedder's own): every error the verifier finds, each with
/// its function, block and statement. `src` names the module in messages
/// (a [`Source`] with empty text is fine for a module built in memory).
///
/// ```
/// use irad::ir::{FuncBuilder, Module, Prim, Type};
///
/// let mut m = Module::new();
/// let f = m.declare_func("half", vec![(Some("x".into()), Type::F64)], Type::F64)?;
/// let mut b = FuncBuilder::new(&mut m, f)?;
/// let entry = b.create_block();
/// b.switch_to_block(entry)?;
/// let x = b.param(0)?;
/// let y = b.prim(Prim::Mul, &[x.into(), 0.5.into()])?.ok_or("a result")?;
/// b.ret(y.into())?;
/// let src = irad::Source::new("<builder>", "");
/// irad::verify(&src, &m)?;
///
/// // A function without a terminator does not verify.
/// let g = m.declare_func("g", vec![], Type::F64)?;
/// let mut b = FuncBuilder::new(&mut m, g)?;
/// let entry = b.create_block();
/// b.switch_to_block(entry)?;
/// let err = irad::verify(&src, &m).unwrap_err();
/// assert!(err.render(&[&src]).contains("in @g"), "{}", err.render(&[&src]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn verify(src: &Source, module: &Module) -> Result<(), Error> {
    ir::verify::verify_module(module).map_err(|errs| Error::Verify {
        file: src.name.clone(),
        errs,
    })
}

/// The module after the normalisation pipeline (docs/passes.md): constant
/// operands made uniform, unreachable blocks removed, critical edges split,
/// a single return block; verified after every pass in every build. The AD
/// functions of this crate normalise their input themselves; this is for an
/// embedder that wants to see or keep the normalised module.
///
/// ```
/// use irad::Source;
///
/// let src = Source::new("a.ir", "func @a(%x: f64) -> f64 {\n#1:\n  return %x\n#2:\n  return 1.0\n}\n");
/// let m = irad::load(&src)?;
/// assert_eq!(m[irad::find_function(&src, &m, "a")?].layout.len(), 2);
/// let n = irad::normalise(&src, &m)?;
/// // The unreachable block #2 is gone.
/// assert_eq!(n[irad::find_function(&src, &n, "a")?].layout.len(), 1);
/// # Ok::<(), irad::Error>(())
/// ```
pub fn normalise(src: &Source, module: &Module) -> Result<Module, Error> {
    let mut m = module.clone();
    let wrap = |err| Error::Pass {
        file: src.name.clone(),
        err,
    };
    let opts = irad_passes::PipelineOptions {
        verify: true,
        ..irad_passes::PipelineOptions::default()
    };
    irad_passes::run_passes(&mut m, &irad_passes::normalise_pipeline(), &opts).map_err(wrap)?;
    Ok(m)
}

/// The module after each pass that `irad dump` shows: with `after`, only the
/// module after the normalisation pipeline up to and including that pass
/// (one of [`passes::NORMALISE`]); otherwise the input (named `input`) and
/// the module after each pass of the pipeline.
///
/// ```
/// use irad::Source;
/// use irad::passes::PassId;
///
/// let src = Source::new("f.irad", "fn f(x: f64) -> f64 { if x < 0.0 { -x } else { x } }");
/// let m = irad::load(&src)?;
/// let all = irad::pass_snapshots(&src, &m, None)?;
/// assert_eq!(all[0].0, "input");
/// assert!(all.len() > 2);
/// let last = irad::pass_snapshots(&src, &m, Some(PassId::SplitCriticalEdges))?;
/// assert_eq!(last.len(), 1);
/// assert_eq!(last[0].0, "split_critical_edges");
/// // A pass name is read once, where it is text; an unknown one is an
/// // error that lists the known ones.
/// let err = PassId::parse_normalise("nope").unwrap_err();
/// assert!(err.to_string().contains("no pass named `nope`"));
/// # Ok::<(), irad::Error>(())
/// ```
pub fn pass_snapshots(
    src: &Source,
    module: &Module,
    after: Option<irad_passes::PassId>,
) -> Result<Vec<(&'static str, Module)>, Error> {
    let req = irad_passes::dump::DumpRequest {
        after,
        all_passes: after.is_none(),
        ..Default::default()
    };
    let registry = rules::Registry::new();
    let dump = irad_passes::dump::dump(module, &req, &registry).map_err(|e| pass_error(src, e))?;
    Ok(dump
        .sections
        .into_iter()
        .map(|s| {
            let name = match s.label {
                irad_passes::dump::Label::Pass(pass) => pass.name(),
                _ => "input",
            };
            (name, s.module)
        })
        .collect())
}

/// The function called `name` (with or without `@`); the error lists the
/// functions the module has.
///
/// ```
/// use irad::Source;
///
/// let src = Source::new("f.irad", "fn f(x: f64) -> f64 { x }\nfn g(x: f64) -> f64 { f(x) }");
/// let m = irad::load(&src)?;
/// assert_eq!(irad::find_function(&src, &m, "@g")?, irad::find_function(&src, &m, "g")?);
/// let err = irad::find_function(&src, &m, "h").unwrap_err();
/// assert_eq!(err.to_string(), "f.irad:1:1: error: no function @h in the module (it has @f, @g)");
/// # Ok::<(), irad::Error>(())
/// ```
pub fn find_function(src: &Source, module: &Module, name: &str) -> Result<FuncId, Error> {
    let bare = name.strip_prefix('@').unwrap_or(name);
    module.by_name(bare).ok_or_else(|| {
        // The first few names, and the closest one when it is close.
        const LISTED: usize = 20;
        let all: Vec<&str> = module.funcs().map(|(_, f)| f.name.as_str()).collect();
        let mut names: Vec<String> = all.iter().take(LISTED).map(|n| format!("@{n}")).collect();
        if all.len() > LISTED {
            names.push(format!("and {} more", all.len() - LISTED));
        }
        let hint = ir::suggest::did_you_mean(bare, "@", all.iter().copied());
        Error::NoFunction {
            file: src.name.clone(),
            message: format!(
                "no function @{bare} in the module (it has {}){hint}",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ),
        }
    })
}

/// Reads argument text (`--args`) typed against the parameters of `func`:
/// comma-separated IR literals, arrays `[1.0, 2.0]`, tuples `(1.0, 2)`.
/// Errors are located in the argument text.
///
/// ```
/// use irad::{Source, Val};
///
/// let src = Source::new("f.irad", "fn f(x: [f64], n: i64) -> f64 { x[n] }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let args = irad::parse_args(&Source::new("<args>", "[1.0, 2.5], 1"), &m, f)?;
/// assert!(matches!(args[1], Val::I64(1)));
/// let err = irad::parse_args(&Source::new("<args>", "[1.0], 1.5"), &m, f).unwrap_err();
/// assert_eq!(err.render(&[]), "<args>:1:8: error: expected i64, found `1.5`\n");
/// # Ok::<(), irad::Error>(())
/// ```
pub fn parse_args(args: &Source, module: &Module, func: FuncId) -> Result<Vec<Val>, Error> {
    let params = module[func].param_types();
    ir::text::parse_args(&args.text, &params, module).map_err(|err| Error::Parse {
        file: args.name.clone(),
        err: Box::new(err),
    })
}

/// What [`run`] runs: `func` on `args`, with `opts` (the call-depth
/// limit), by `backend`. [`RunRequest::new`] gives the reference interpreter
/// and the default options.
#[derive(Clone, Debug)]
pub struct RunRequest<'a> {
    /// The function.
    pub func: FuncId,
    /// Its arguments.
    pub args: &'a [Val],
    /// The call-depth limit.
    pub opts: RunOptions,
    /// The interpreter, or compiled code (which gives the same results and
    /// errors).
    pub backend: Backend,
}

impl<'a> RunRequest<'a> {
    /// `func` on `args` in the interpreter, with the default options.
    pub fn new(func: FuncId, args: &'a [Val]) -> RunRequest<'a> {
        RunRequest {
            func,
            args,
            opts: RunOptions::default(),
            backend: Backend::Interp,
        }
    }
}

/// Runs the call `req` asks for. A run-time error names the statement and
/// its source position.
///
/// ```
/// use irad::{Backend, RunRequest, Source};
///
/// let src = Source::new("f.irad", "fn f(x: [f64], i: i64) -> f64 {\n    x[i] * 2.0\n}\n");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let args = irad::parse_args(&Source::new("<args>", "[1.0, 2.5], 1"), &m, f)?;
/// let v = irad::run(&src, &m, &RunRequest::new(f, &args))?;
/// assert_eq!(v.display(&m), "5.0");
///
/// let args = irad::parse_args(&Source::new("<args>", "[1.0, 2.5], 7"), &m, f)?;
/// let err = irad::run(&src, &m, &RunRequest::new(f, &args)).unwrap_err();
/// assert!(err.render(&[&src]).starts_with("f.irad:2:"), "{}", err.render(&[&src]));
/// assert!(err.to_string().contains("index 7 out of bounds"), "{err}");
///
/// // Compiled code gives the same results.
/// let src = Source::new("fib.irad", "fn f(n: i64) -> i64 { if n < 2 { n } else { f(n - 1) + f(n - 2) } }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let args = irad::parse_args(&Source::new("<args>", "20"), &m, f)?;
/// for backend in [Backend::Interp, Backend::Jit] {
///     let v = irad::run(&src, &m, &RunRequest { backend, ..RunRequest::new(f, &args) })?;
///     assert_eq!(v.display(&m), "6765");
/// }
/// # Ok::<(), irad::Error>(())
/// ```
pub fn run(src: &Source, module: &Module, req: &RunRequest<'_>) -> Result<Val, Error> {
    let (func, args, opts) = (req.func, req.args, &req.opts);
    let res = match req.backend {
        Backend::Interp => ir::interp::run(module, func, args, opts),
        Backend::Jit => codegen::Jit::new(module)
            .map_err(|e| RunError::new(e.loc, e.msg))
            .and_then(|mut jit| jit.run(func, args, opts)),
    };
    res.map_err(|err| Error::Run {
        file: src.name.clone(),
        err: Box::new(err),
    })
}

/// What runs functions: the reference interpreter or compiled code.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum Backend {
    /// The reference interpreter.
    Interp,
    /// Native code from the Cranelift JIT ([`codegen::Jit`]).
    #[default]
    Jit,
}

impl Backend {
    /// The executor maker of this backend, for [`GradOptions::exec`]: what
    /// runs the derived functions of [`grad_forward`] and [`grad_reverse`].
    ///
    /// ```
    /// use irad::{Backend, GradOptions, Source};
    ///
    /// let src = Source::new("f.irad", "fn f(x: f64, y: f64) -> f64 { x * x * y }");
    /// let m = irad::load(&src)?;
    /// let f = irad::find_function(&src, &m, "f")?;
    /// let args = irad::parse_args(&Source::new("<args>", "3.0, 2.0"), &m, f)?;
    /// let registry = irad::rules::Registry::new();
    /// let opts = GradOptions { exec: Backend::Jit.exec(), ..GradOptions::default() };
    /// let (g, m) = irad::grad_reverse(&src, &m, f, &args, &registry, &opts)?;
    /// assert_eq!(g.gradient[0].as_ref().map(|d| d.display(&m)).as_deref(), Some("12.0"));
    /// # Ok::<(), irad::Error>(())
    /// ```
    pub fn exec(self) -> ir::interp::MakeExecutor {
        match self {
            Backend::Interp => ir::interp::interpreter_with_rules,
            Backend::Jit => codegen::jit_with_rules,
        }
    }
}

/// The module normalised, with `@f.rev` (and the pieces it calls) for each of
/// `funcs` (every function when empty); also the ids of the functions added,
/// in order, and the BBCode text of each function differentiated: the raw
/// derivation, before any optimisation (what `irad dump --mode rev
/// --schedule id` prints; without `--schedule`, `dump` prints the pieces
/// after the default schedule, as `irad grad` runs them).
///
/// ```
/// use irad::Source;
///
/// let src = Source::new("sq.irad", "fn sq(x: f64) -> f64 { x * x }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "sq")?;
/// let registry = irad::rules::Registry::new();
/// let (m, added, bbcode) = irad::reverse_module(&src, &m, &[f], &registry)?;
/// let names: Vec<&str> = added.iter().map(|&id| m[id].name.as_str()).collect();
/// assert!(names.contains(&"sq.rev"), "{names:?}");
/// assert!(bbcode.contains("sq"), "{bbcode}");
/// // @sq.rev takes x and the seed, and returns (value, dx).
/// let rev = m.by_name("sq.rev").ok_or("no @sq.rev")?;
/// let out = irad::ir::interp::run(&m, rev, &[irad::Val::F64(3.0), irad::Val::F64(1.0)], &Default::default())?;
/// assert_eq!(out.display(&m), "(9.0, 6.0)");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn reverse_module(
    src: &Source,
    module: &Module,
    funcs: &[FuncId],
    registry: &rules::Registry,
) -> Result<(Module, Vec<FuncId>, String), Error> {
    let mut m = module.clone();
    let rev = irad_passes::reverse::Reverse::new(registry);
    let mut stage = ReverseStage::new(rev, funcs.to_vec(), None).with_bbcode();
    run_stages(src, &mut m, &mut [Step::Stage(&mut stage)])?;
    Ok((m, stage.added, stage.bbcode))
}

/// The module normalised and printed with the result of activity analysis
/// (`irad dump --activity`): after each function's header a comment line
/// `# active parameters: ...`, and after each statement with a result a
/// trailing `# active` or `# const` comment, so the text still parses.
/// `funcs` selects the functions printed (all when empty); `wrt`, the
/// parameters that are active (all when `None`), applies to each of them.
///
/// ```
/// use irad::Source;
///
/// let src = Source::new("f.irad", "fn f(x: f64, n: f64) -> f64 { let k = n * 2.0; x * k }");
/// let m = irad::load(&src)?;
/// let text = irad::activity_dump(&src, &m, &[], Some(&[0]))?;
/// assert!(text.contains("# active parameters: 0\n"), "{text}");
/// assert!(text.contains("# const"), "{text}"); // n * 2.0 needs no derivative
/// assert!(text.contains("# active"), "{text}");
/// // A parameter the function does not have is a located error.
/// let err = irad::activity_dump(&src, &m, &[], Some(&[5])).unwrap_err();
/// assert_eq!(err.to_string(), "f.irad:1:1: error: --wrt 5: @f has 2 parameter(s)");
/// # Ok::<(), irad::Error>(())
/// ```
pub fn activity_dump(
    src: &Source,
    module: &Module,
    funcs: &[FuncId],
    wrt: Option<&[usize]>,
) -> Result<String, Error> {
    let m = normalise(src, module)?;
    irad_passes::annotate::activity_text(&m, funcs, wrt).map_err(|e| pass_error(src, e))
}

/// The module normalised, with the forward rules (with `width` lanes) of `funcs`
/// (every function when empty) and of everything they call; also the ids of
/// the rules built, in order.
///
/// ```
/// use irad::{Source, Val};
///
/// let src = Source::new("sq.irad", "fn sq(x: f64) -> f64 { x * x }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "sq")?;
/// let registry = irad::rules::Registry::new();
/// let (m, added) = irad::forward_module(&src, &m, &[f], irad::ir::Lanes::ONE, &registry)?;
/// assert_eq!(m[added[0]].name, "sq.fwd");
/// // @sq.fwd maps dual(x, dx) to dual(x * x, 2 * x * dx).
/// let x = Val::Dual(vec![Val::F64(3.0), Val::F64(1.0)].into());
/// let y = irad::ir::interp::run(&m, added[0], &[x], &Default::default())?;
/// assert_eq!(y.display(&m), "dual(9.0, 6.0)");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn forward_module(
    src: &Source,
    module: &Module,
    funcs: &[FuncId],
    width: ir::Lanes,
    registry: &rules::Registry,
) -> Result<(Module, Vec<FuncId>), Error> {
    let mut m = module.clone();
    let mut stage = ForwardStage::new(Forward::new(registry), funcs.to_vec(), width);
    run_stages(src, &mut m, &mut [Step::Stage(&mut stage)])?;
    Ok((m, stage.added))
}

/// Runs the normalisation pipeline, then `stages`, over `m` with the
/// manager's default options (verification in debug builds and tests).
/// The huge blocks of the functions from number `first` on (those a
/// derivation added) split into functions of their own, so that the code
/// generator compiles one stretch at a time (`irad_passes::split`; timed
/// as part of the `codegen` stage).
fn split_derived(src: &Source, m: &mut Module, first: usize, limit: usize) -> Result<(), Error> {
    let funcs: Vec<FuncId> = m.func_ids().skip(first).collect();
    irad_ir::timings::time(irad_ir::timings::Stage::Codegen, || {
        irad_passes::split::split_huge_blocks_at(m, &funcs, limit)
    })
    .map(drop)
    .map_err(|e| internal(src, &format!("splitting a huge block: {e}")))
}

fn run_stages(src: &Source, m: &mut Module, stages: &mut [Step<'_>]) -> Result<(), Error> {
    let mut pipeline = irad_passes::manager::steps(&irad_passes::normalise_pipeline());
    pipeline.extend(stages.iter_mut().map(|step| match step {
        Step::Pass(id) => Step::Pass(*id),
        Step::Stage(stage) => Step::Stage(&mut **stage),
    }));
    let opts = irad_passes::PipelineOptions::default();
    irad_passes::run_pipeline(m, &mut pipeline, &opts).map_err(|e| pass_error(src, e))?;
    Ok(())
}

/// An error that is a bug of irad, not of the input.
fn internal(src: &Source, what: &str) -> Error {
    Error::Internal {
        file: src.name.clone(),
        message: ir::interp::internal_message(what),
    }
}

/// What is known of each argument for [`specialise`]: the known values,
/// `_` for unknown, and `_[N]` for an array of known length N (one type with
/// [`ir::text::KnownArg`], which [`parse_known`] reads).
pub use irad_passes::pe::Known;

/// Reads `--known` text typed against the parameters of `func`: comma-separated
/// entries, one per parameter, each `_` (unknown), `_[N]` (an array parameter
/// of length N) or a literal in the `--args` syntax (a known value; arrays
/// cannot be known values). Errors name the line and column in the text.
///
/// ```
/// use irad::{Known, Source};
///
/// let src = Source::new("f.irad", "fn f(a: f64, x: [f64]) -> f64 { a * x[0] }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let known = irad::parse_known(&Source::new("<known>", "2.0, _[3]"), &m, f)?;
/// assert!(matches!(known[1], Known::Length(3)));
/// let err = irad::parse_known(&Source::new("<known>", "2.0, 1.0"), &m, f).unwrap_err();
/// assert!(err.render(&[]).starts_with("<known>:1:6: error: "), "{}", err.render(&[]));
/// # Ok::<(), irad::Error>(())
/// ```
pub fn parse_known(known: &Source, module: &Module, func: FuncId) -> Result<Vec<Known>, Error> {
    let params = module[func].param_types();
    ir::text::parse_known(&known.text, &params, module).map_err(|err| Error::Parse {
        file: known.name.clone(),
        err: Box::new(err),
    })
}

/// Whether `args` agree with `known` (each known value equal, each known
/// length the array's): the arguments a specialisation computes the same
/// results for. The error names the first argument that does not.
///
/// ```
/// use irad::Source;
///
/// let src = Source::new("f.irad", "fn f(a: f64, x: [f64]) -> f64 { a * x[0] }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let known = irad::parse_known(&Source::new("<known>", "2.0, _"), &m, f)?;
/// let args_src = Source::new("<args>", "3.0, [1.0]");
/// let args = irad::parse_args(&args_src, &m, f)?;
/// let err = irad::check_args_known(&args_src, &m, &args, &known).unwrap_err();
/// assert!(err.to_string().contains("argument 1 is 3.0, but `--known` fixes it to 2.0"), "{err}");
/// # Ok::<(), irad::Error>(())
/// ```
pub fn check_args_known(
    args_src: &Source,
    module: &Module,
    args: &[Val],
    known: &[Known],
) -> Result<(), Error> {
    for (i, (arg, k)) in args.iter().zip(known).enumerate() {
        let bad = match k {
            Known::Unknown => None,
            Known::Value(v) if !arg.same(v) => Some(v.display(module)),
            Known::Value(_) => None,
            Known::Length(n) => match arg {
                Val::Array(a) if a.0.borrow().len() as u64 == *n => None,
                _ => Some(format!("an array of length {n}")),
            },
        };
        if let Some(want) = bad {
            return Err(Error::Parse {
                file: args_src.name.clone(),
                err: Box::new(ParseError {
                    loc: ir::Location::at(Pos::new(1, 1)),
                    msg: format!(
                        "argument {} is {}, but `--known` fixes it to {want}",
                        i + 1,
                        arg.display(module)
                    ),
                }),
            });
        }
    }
    Ok(())
}

/// The module with `func` specialised on `known` (see
/// [`irad_passes::pe::specialise`]): a copy of `module` with the new function
/// (`@NAME.spec`, same signature) added; also its id. Other functions are
/// unchanged.
///
/// ```
/// use irad::Source;
///
/// let src = Source::new("p.irad", "fn p(x: f64, n: i64) -> f64 {\n    let mut s = 1.0;\n    for i in 0..n { s = s * x; }\n    s\n}\n");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "p")?;
/// let known = irad::parse_known(&Source::new("<known>", "_, 3"), &m, f)?;
/// let (m, spec) = irad::specialise(&src, &m, f, &known)?;
/// assert_eq!(m[spec].name, "p.spec");
/// let args = irad::parse_args(&Source::new("<args>", "2.0, 3"), &m, spec)?;
/// let v = irad::run(&src, &m, &irad::RunRequest::new(spec, &args))?;
/// assert_eq!(v.display(&m), "8.0");
/// # Ok::<(), irad::Error>(())
/// ```
pub fn specialise(
    src: &Source,
    module: &Module,
    func: FuncId,
    known: &[Known],
) -> Result<(Module, FuncId), Error> {
    let mut m = module.clone();
    let mut stage = SpecialiseStage::new(func, known);
    let opts = irad_passes::PipelineOptions::default();
    irad_passes::run_pipeline(&mut m, &mut [Step::Stage(&mut stage)], &opts)
        .map_err(|e| pass_error(src, e))?;
    let Some(id) = stage.spec else {
        return Err(internal(src, "the specialise stage made nothing"));
    };
    Ok((m, id))
}

/// `irad test-rules`: checks the built-in frule of every primitive against
/// finite differences of the primitive, and its rrule against the primitive
/// and, through the adjoint identity, against the frule (`rules::check`).
/// Returns the table to print (one row per test signature, with both
/// verdicts), and [`Error::RulesFailed`] when any rule check failed (`total`
/// counts the frule and the rrule checks). [`check_rules`] gives the
/// reports themselves (and their JSON).
///
/// ```
/// let opts = irad::rules::check::CheckOptions { samples: 2, ..Default::default() };
/// let (table, verdict) = irad::test_rules(&opts);
/// assert!(table.contains("sin"), "{table}");
/// assert!(verdict.is_ok());
/// ```
pub fn test_rules(opts: &rules::check::CheckOptions) -> (String, Result<(), Error>) {
    let checks = check_rules(opts);
    (checks.table(), checks.verdict())
}

/// The Rust snippets of the docs, run as doctests (the shell sessions are run
/// by `tests/doc_commands.rs`).
#[cfg(doctest)]
#[doc = include_str!("../docs/tutorial.md")]
#[doc = include_str!("../docs/overview.md")]
#[doc = include_str!("../docs/rules.md")]
#[doc = include_str!("../docs/forward.md")]
pub struct DocSnippets;

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
