//! `irad emit` in the facade: an object file exporting a function through
//! the C ABI, and its C header, as an [`EmitRequest`] asks (docs/codegen.md,
//! "The C ABI"; `examples/c/` links such an object into a C program).
//!
//! Assumes a module that verifies. Guarantees: the module is normalised and,
//! with a gradient, `@f.rev` derived and optimised by one pipeline of the
//! pass manager; the rules of every function value a rule statement may
//! meet are derived ahead of time (objects are closed) and are not
//! optimised; with a derivative, the same is derived again from the strong
//! copy of the module, and the object's derivatives run it where theirs
//! come out NaN (docs/codegen.md, "Infinities and NaN in objects"); every
//! failure is an [`Error`] naming the source.

use crate::strong::strong_copy;
use crate::{Error, Source, codegen, internal, rules, run_stages};
use irad_ir::{FuncId, Module};
use irad_passes::Step;
use irad_passes::aot_rules::AheadOfTimeRules;
use irad_passes::forward::Forward;
use irad_passes::optimise::{Strategy, default_schedule};
use irad_passes::reverse::{Reverse, UnboundedLoop};
use irad_passes::stages::{OptimiseStage, ReverseStage, Scope};

/// What [`emit`] writes: `func` exported as `NAME` (its name, `.` made `_`),
/// with `grad` its value and gradient by reverse mode as `NAME_grad`, and
/// with `hvp` its value, gradient and Hessian-vector product along a
/// direction the caller passes as `NAME_hvp` (forward over reverse; `func`
/// returns f64). [`EmitRequest::new`] gives the defaults: no derivative,
/// every argument with a tangent, the default schedule.
#[derive(Clone, Debug)]
pub struct EmitRequest<'a> {
    /// The function to export.
    pub func: FuncId,
    /// Also export `NAME_grad`.
    pub grad: bool,
    /// Also export `NAME_hvp`.
    pub hvp: bool,
    /// The argument positions `NAME_grad` and `NAME_hvp` differentiate;
    /// `None`: every argument whose type contains f64.
    pub wrt: Option<Vec<usize>>,
    /// The header's file name (for its include guard).
    pub header_name: &'a str,
    /// The optimiser schedule run over `@f.rev` and its pieces; `None`: the
    /// default schedule (`irad emit --schedule`).
    pub schedule: Option<Strategy>,
    /// The tape limit (bytes) `NAME_grad` keeps its tapes under by
    /// checkpointing long loops (`irad emit --tape-limit`; docs/reverse.md,
    /// "Checkpointing"); `None`: no limit. The requests of one object share
    /// their derived functions: the smallest limit among them applies to
    /// all.
    pub tape_limit: Option<u64>,
    /// Per-loop overrides of checkpointing for `NAME_grad` (`irad emit
    /// --checkpoint`; docs/schedules.md). The requests of one object share
    /// their derived functions: their rules apply to all, in request order.
    pub checkpoints: irad_passes::reverse::CheckpointSchedule,
}

impl<'a> EmitRequest<'a> {
    /// `func` exported alone, with the header called `header_name`.
    pub fn new(func: FuncId, header_name: &'a str) -> EmitRequest<'a> {
        EmitRequest {
            func,
            grad: false,
            hvp: false,
            wrt: None,
            header_name,
            schedule: None,
            tape_limit: None,
            checkpoints: irad_passes::reverse::CheckpointSchedule::default(),
        }
    }
}

/// `irad emit`: the object file and C header `req` asks for. Its
/// derivatives give the strong derivative's entries where the plain one
/// has a NaN, as [`crate::grad()`] does.
///
/// ```
/// use irad::{EmitRequest, Source};
///
/// let src = Source::new("sq.irad", "fn sq(x: f64) -> f64 { x * x }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "sq")?;
/// let obj = irad::emit(&src, &m, &EmitRequest { grad: true, ..EmitRequest::new(f, "sq.h") })?;
/// assert!(!obj.object.is_empty());
/// assert!(obj.header.contains("int32_t sq(double x, double *out);"), "{}", obj.header);
/// assert!(obj.header.contains("int32_t sq_grad("), "{}", obj.header);
/// // Write them with std::fs::write("sq.o", &obj.object) and the header beside it.
///
/// // The Hessian-vector product: the direction is a parameter.
/// let obj = irad::emit(&src, &m, &EmitRequest { hvp: true, ..EmitRequest::new(f, "sq.h") })?;
/// assert!(
///     obj.header.contains("int32_t sq_hvp(double x, double x_dir, double *out, double *x_grad, double *x_hvp);"),
///     "{}",
///     obj.header
/// );
///
/// // Only y differentiated, without optimisation: one gradient out-pointer.
/// let src = Source::new("f.irad", "fn f(x: f64, y: f64) -> f64 { x * y }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let req = EmitRequest {
///     grad: true,
///     wrt: Some(vec![1]),
///     schedule: Some(irad::read_schedule(Some("id"))?),
///     ..EmitRequest::new(f, "f.h")
/// };
/// let obj = irad::emit(&src, &m, &req)?;
/// assert!(obj.header.contains("y_grad"), "{}", obj.header);
/// assert!(!obj.header.contains("x_grad"), "{}", obj.header);
/// # Ok::<(), irad::Error>(())
/// ```
pub fn emit(
    src: &Source,
    module: &Module,
    req: &EmitRequest<'_>,
) -> Result<codegen::ObjectFile, Error> {
    emit_noting(src, module, req).map(|(object, _)| object)
}

/// [`emit`], also returning the loops of the gradient's pieces that its
/// tape limit or checkpoint schedule asked to checkpoint but that are not
/// checkpointed and record something per iteration (their tape grows with
/// the run; [`Reverse::unbounded_loops`]), which `irad emit --grad` prints
/// as warnings.
///
/// ```
/// use irad::{EmitRequest, Source};
///
/// // `keep` takes what a call that may return its argument returns: refused.
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
/// let req = EmitRequest { grad: true, tape_limit: Some(1024), ..EmitRequest::new(f, "f.h") };
/// let (obj, unbounded) = irad::emit_noting(&src, &m, &req)?;
/// assert!(!obj.object.is_empty());
/// assert_eq!(unbounded.len(), 1);
/// assert_eq!(unbounded[0].skipped.pos.map(|p| p.line), Some(4));
/// # Ok::<(), irad::Error>(())
/// ```
pub fn emit_noting(
    src: &Source,
    module: &Module,
    req: &EmitRequest<'_>,
) -> Result<(codegen::ObjectFile, Vec<UnboundedLoop>), Error> {
    with_exports(
        src,
        module,
        std::slice::from_ref(req),
        |m, rules, exports, opts, strong| codegen::emit_object(m, rules, exports, opts, strong),
    )
}

/// What [`emit`] puts in an object, defined in the embedder's own Cranelift
/// module instead (a `cranelift_jit::JITModule` or a
/// `cranelift_object::ObjectModule` it made and will finish): for each of
/// `reqs`, the exported C functions `NAME` (and `NAME_grad`, `NAME_hvp`,
/// with their strong versions, as in an object), with everything they
/// reach. All of them are defined in one call (irad's
/// internal symbols are defined once per module: a second call on the same
/// module is an error). Returns the module, the exported functions' ids in
/// it and one C header for them all (named by the first request's
/// `header_name`). See
/// [`codegen::define_in_module`] for what the module must allow and the
/// runtime symbols the embedder provides ([`codegen::runtime_symbols`] for
/// a JIT).
///
/// ```
/// use irad::codegen::cranelift_module::Module as _;
/// use irad::{EmitRequest, Source};
///
/// let src = Source::new("sq.irad", "fn sq(x: f64) -> f64 { x * x }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "sq")?;
/// // The embedder's object module (an ISA with the flags irad needs).
/// let isa = irad::codegen::native_isa_for_objects()?;
/// let builder = irad::codegen::cranelift_object::ObjectBuilder::new(
///     isa,
///     "mine",
///     irad::codegen::cranelift_module::default_libcall_names(),
/// )?;
/// let backend = irad::codegen::cranelift_object::ObjectModule::new(builder);
/// let req = EmitRequest { grad: true, ..EmitRequest::new(f, "sq.h") };
/// let (backend, defined) = irad::define_in_module(backend, &src, &m, &[req])?;
/// let names: Vec<&str> = defined.functions.iter().map(|(n, _)| n.as_str()).collect();
/// assert_eq!(names, ["sq", "sq_grad"]);
/// assert!(backend.declarations().get_function_decl(defined.functions[0].1).name.as_deref() == Some("sq"));
/// let object = backend.finish().emit()?;
/// assert!(!object.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn define_in_module<M: codegen::cranelift_module::Module>(
    backend: M,
    src: &Source,
    module: &Module,
    reqs: &[EmitRequest<'_>],
) -> Result<(M, codegen::DefinedExports), Error> {
    with_exports(src, module, reqs, |m, rules, exports, opts, strong| {
        codegen::define_in_module(backend, m, rules, exports, opts, strong)
    })
    .map(|(defined, _)| defined)
}

/// The module normalised (and, for each request with a gradient, `@f.rev`
/// derived and optimised), the exports and the ahead-of-time rules `reqs`
/// ask for, handed to `make`; with a derivative among them, the same
/// derived again from the strong copy of `module` (`crate::strong`), for
/// the object's exported derivatives to run when theirs come out NaN
/// (docs/rules.md, "Infinities and NaN"). Also returns the loops of the
/// derived pieces whose records grow against the tape limit
/// ([`Reverse::unbounded_loops`]).
fn with_exports<T>(
    src: &Source,
    module: &Module,
    reqs: &[EmitRequest<'_>],
    make: impl FnOnce(
        &mut Module,
        &mut dyn irad_ir::interp::RuleProvider,
        &[codegen::Export],
        &codegen::ObjectOptions<'_>,
        Option<codegen::StrongVersion<'_>>,
    ) -> Result<T, codegen::CodegenError>,
) -> Result<(T, Vec<UnboundedLoop>), Error> {
    let Some(first) = reqs.first() else {
        return Err(Error::Request {
            file: src.name.clone(),
            message: "nothing to export: give at least one function".into(),
        });
    };
    let registry = rules::Registry::new();
    let (mut m, mut rules, exports) = prepare(src, module.clone(), &registry, reqs)?;
    let derivs = reqs.iter().any(|r| r.grad || r.hvp);
    let mut strong = if derivs && !module.strong_products() {
        Some(prepare(src, strong_copy(module), &registry, reqs)?)
    } else {
        None
    };
    let strong = strong
        .as_mut()
        .map(|(module, provider, exports)| codegen::StrongVersion {
            module,
            provider,
            exports,
        });
    let opts = codegen::ObjectOptions {
        source: &src.name,
        header_name: first.header_name,
    };
    let made = make(&mut m, &mut rules, &exports, &opts, strong).map_err(|err| Error::Codegen {
        file: src.name.clone(),
        err: Box::new(err),
    })?;
    // After code generation, which derives the rules of the calls through
    // function values the object holds.
    let unbounded = rules.rev.unbounded_loops().to_vec();
    Ok((made, unbounded))
}

/// `m` normalised (and, for each request with a gradient, `@f.rev`
/// derived and optimised), with the ahead-of-time rules and the exports
/// `reqs` ask for.
fn prepare<'r>(
    src: &Source,
    mut m: Module,
    registry: &'r rules::Registry,
    reqs: &[EmitRequest<'_>],
) -> Result<(Module, AheadOfTimeRules<'r>, Vec<codegen::Export>), Error> {
    let user_funcs = m.len();
    let mut rev = Reverse::new(registry);
    let mut fwd = Forward::new(registry);
    rev.set_tape_limit(reqs.iter().filter_map(|r| r.tape_limit).min());
    rev.set_checkpoint_schedule(irad_passes::reverse::CheckpointSchedule {
        rules: reqs
            .iter()
            .flat_map(|r| r.checkpoints.rules.iter().cloned())
            .collect(),
    });
    let mut exports = Vec::new();
    // The module is normalised once, with the first gradient's stages (or
    // alone, below, when no request asks for a gradient).
    let mut normalised = false;
    for req in reqs {
        let func = req.func;
        exports.push(codegen::Export {
            func,
            kind: codegen::ExportKind::Primal,
        });
        if req.hvp {
            let h = crate::hvp_export::derive(
                src,
                std::mem::take(&mut m),
                rev,
                fwd,
                func,
                req.wrt.as_deref(),
                req.schedule.clone(),
            )?;
            (m, rev, fwd) = (h.m, h.rev, h.fwd);
            normalised = true;
            exports.push(codegen::Export {
                func,
                kind: codegen::ExportKind::Hvp {
                    hvp: h.wrapper,
                    wrt: Some(h.wrt),
                },
            });
        }
        if !req.grad {
            continue;
        }
        let all: Vec<usize> = (0..m.get(func).map_or(0, |f| f.params.len())).collect();
        let wrt_list = req.wrt.clone().unwrap_or(all);
        let schedule = req.schedule.clone().unwrap_or_else(default_schedule);
        let mut stage = ReverseStage::new(rev, vec![func], Some(wrt_list));
        let mut opt = OptimiseStage::new(&schedule, Scope::From(m.len()));
        let mut steps = [Step::Stage(&mut stage), Step::Stage(&mut opt)];
        if normalised {
            let opts = irad_passes::PipelineOptions::default();
            irad_passes::run_pipeline(&mut m, &mut steps, &opts)
                .map_err(|e| crate::pass_error(src, e))?;
        } else {
            run_stages(src, &mut m, &mut steps)?;
            normalised = true;
        }
        let Some(&id) = stage.revs.first() else {
            return Err(internal(src, "the reverse stage derived nothing"));
        };
        exports.push(codegen::Export {
            func,
            kind: codegen::ExportKind::Grad {
                rev: id,
                wrt: req.wrt.clone(),
            },
        });
        rev = stage.rev;
    }
    if !normalised {
        run_stages(src, &mut m, &mut [])?;
    }
    crate::split_derived(src, &mut m, user_funcs, irad_passes::split::PART_STMTS)?;
    Ok((m, AheadOfTimeRules { fwd, rev }, exports))
}
