//! `irad emit` in the facade: an object file exporting a function through
//! the C ABI, and its C header, as an [`EmitRequest`] asks (docs/codegen.md,
//! "The C ABI"; `examples/c/` links such an object into a C program).
//!
//! Assumes a module that verifies. Guarantees: the module is normalised and,
//! with a gradient, `@f.rev` derived and optimised by one pipeline of the
//! pass manager; the rules of every function value a rule statement may
//! meet are derived ahead of time (objects are closed) and are not
//! optimised; every failure is an [`Error`] naming the source.

use crate::{Error, Source, codegen, internal, rules, run_stages};
use irad_ir::{FuncId, Module};
use irad_passes::Step;
use irad_passes::aot_rules::AheadOfTimeRules;
use irad_passes::forward::Forward;
use irad_passes::optimise::{Strategy, default_schedule};
use irad_passes::reverse::Reverse;
use irad_passes::stages::{OptimiseStage, ReverseStage, Scope};

/// What [`emit`] writes: `func` exported as `NAME` (its name, `.` made `_`)
/// and, with `grad`, its value and gradient by reverse mode as `NAME_grad`.
/// [`EmitRequest::new`] gives the defaults: no gradient, every argument with
/// a tangent, the default schedule.
#[derive(Clone, Debug)]
pub struct EmitRequest<'a> {
    /// The function to export.
    pub func: FuncId,
    /// Also export `NAME_grad`.
    pub grad: bool,
    /// The argument positions `NAME_grad` differentiates; `None`: every
    /// argument whose type contains f64.
    pub wrt: Option<Vec<usize>>,
    /// The header's file name (for its include guard).
    pub header_name: &'a str,
    /// The optimiser schedule run over `@f.rev` and its pieces; `None`: the
    /// default schedule (`irad emit --schedule`).
    pub schedule: Option<Strategy>,
}

impl<'a> EmitRequest<'a> {
    /// `func` exported alone, with the header called `header_name`.
    pub fn new(func: FuncId, header_name: &'a str) -> EmitRequest<'a> {
        EmitRequest {
            func,
            grad: false,
            wrt: None,
            header_name,
            schedule: None,
        }
    }
}

/// `irad emit`: the object file and C header `req` asks for.
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
    let func = req.func;
    let mut m = module.clone();
    let registry = rules::Registry::new();
    let rev = Reverse::new(&registry);
    let mut exports = vec![codegen::Export {
        func,
        kind: codegen::ExportKind::Primal,
    }];
    let rev = if req.grad {
        let all: Vec<usize> = (0..m.get(func).map_or(0, |f| f.params.len())).collect();
        let wrt_list = req.wrt.clone().unwrap_or(all);
        let schedule = req.schedule.clone().unwrap_or_else(default_schedule);
        let mut stage = ReverseStage::new(rev, vec![func], Some(wrt_list));
        let mut opt = OptimiseStage::new(&schedule, Scope::From(m.len()));
        run_stages(
            src,
            &mut m,
            &mut [Step::Stage(&mut stage), Step::Stage(&mut opt)],
        )?;
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
        stage.rev
    } else {
        run_stages(src, &mut m, &mut [])?;
        rev
    };
    let mut rules = AheadOfTimeRules {
        fwd: Forward::new(&registry),
        rev,
    };
    let opts = codegen::ObjectOptions {
        source: &src.name,
        header_name: req.header_name,
    };
    codegen::emit_object(&mut m, &mut rules, &exports, &opts).map_err(|err| Error::Codegen {
        file: src.name.clone(),
        err: Box::new(err),
    })
}
