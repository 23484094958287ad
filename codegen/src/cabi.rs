//! The C ABI of exported functions (docs/codegen.md, "The C ABI"): how the
//! parameters and result of an IR function become C parameters, and the
//! header that declares them.
//!
//! A [`Plan`] says, for one exported function, which C parameters it takes
//! (in order), how they make the leaves of the internal function's
//! arguments, and where the internal function's result leaves go. The plan is
//! pure data; `object.rs` generates the function from it and
//! [`header`] writes its declaration. Types without a C form (function
//! values, arrays in results) are refused here with a located error, before
//! any code is generated.
//!
//! - `f64` is `double`, `i64` is `int64_t`, `bool` is `int32_t` (0 is
//!   false, anything else true; results are 0 or 1), `()` has no parameter;
//! - a tuple is its components in order (`p_0`, `p_1`, ...);
//! - an array `[T]` is a pointer to its first element (`double *`,
//!   `int64_t *`, `uint8_t *` holding 0 or 1 for `bool`) and an `int64_t`
//!   length (`NAME_len`); the function may write into it, as IR functions may;
//! - the result is written through out-pointers (`out`, or `out_0`, ...),
//!   only on success;
//! - the gradient function `NAME_grad` takes the primal's parameters, then a
//!   shadow buffer (`double *NAME_grad`, of the array's length) per `[f64]`
//!   array differentiated, into which the gradient is added, then one seed per
//!   f64 of the result (`seed`), then the out-pointers of the value, then one
//!   out-pointer per f64 of a differentiated argument outside arrays
//!   (`NAME_grad`): SYNTAX.md's gradient convention.

use crate::CodegenError;
use cranelift_codegen::ir::types;
use irad_ir::func::{FuncId, Module};
use irad_ir::loc::Location;
use irad_ir::types::{Scalar, Type};
use std::collections::HashSet;
use std::fmt::Write as _;

/// A function to export from an object file.
#[derive(Clone, Debug)]
pub struct Export {
    /// The IR function whose value (or gradient) is exported.
    pub func: FuncId,
    /// What is exported.
    pub kind: ExportKind,
}

/// What an [`Export`] computes.
#[derive(Clone, Debug)]
pub enum ExportKind {
    /// The function itself, exported as `NAME`.
    Primal,
    /// Value and gradient, exported as `NAME_grad`: `rev` is the function's
    /// `@f.rev` in the module (reverse mode's value-and-gradient function),
    /// `wrt` the argument positions differentiated (`None`: every argument
    /// whose type has a tangent).
    Grad {
        /// `@f.rev`.
        rev: FuncId,
        /// The argument positions to differentiate.
        wrt: Option<Vec<usize>>,
    },
    /// Value, gradient and Hessian-vector product along a direction the
    /// caller passes, exported as `NAME_hvp`: `hvp` is the wrapper `@f.hvp`
    /// (built by the facade around the forward-over-reverse rule), whose
    /// parameters are the primal's, then one f64 per f64 of the
    /// differentiated arguments outside arrays (the direction), then one
    /// `[f64]` per `[f64]` array of them three times (the direction, the
    /// gradient's buffer, the product's buffer), and whose result is the
    /// tuple of the value, the gradient's and the product's f64s. `wrt` as
    /// for [`ExportKind::Grad`] (the function must return f64).
    Hvp {
        /// `@f.hvp`.
        hvp: FuncId,
        /// The argument positions to differentiate.
        wrt: Option<Vec<usize>>,
    },
}

/// One C parameter of an exported function.
#[derive(Clone, Debug)]
pub(crate) struct CParam {
    /// Its C type (`double`, `int64_t *`, ...).
    pub cty: &'static str,
    /// Its name in the header.
    pub name: String,
    /// What it means, for the header.
    pub doc: String,
    /// Its Cranelift type (pointers are `i64`).
    pub leaf: types::Type,
}

/// How one leaf of the internal function's arguments is made.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ArgLeaf {
    /// A C parameter as it is (`double`, `int64_t`, a pointer or a length).
    Param(usize),
    /// A `bool` from an `int32_t` C parameter: nonzero is true.
    Bool(usize),
    /// The pointer of a shadow buffer the caller passes.
    Shadow(usize),
    /// A zeroed scratch shadow of this many elements (the length parameter)
    /// for an array not differentiated.
    Scratch(usize),
    /// The length of a shadow: the length parameter of its array.
    Len(usize),
}

/// Where one leaf of the internal function's result goes.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ResultLeaf {
    /// Stored through this out-pointer parameter (a `bool` widened to `int32_t`).
    Out(usize, types::Type),
    /// Not wanted (the gradient of an argument not differentiated).
    Drop,
}

/// The C form of one exported function.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// The exported symbol.
    pub symbol: String,
    /// The function the export calls (`@f` or `@f.rev`).
    pub internal: FuncId,
    /// The primal's location, for errors at entry.
    pub loc: Location,
    /// The C parameters, in order.
    pub params: Vec<CParam>,
    /// The leaves of the internal call's arguments.
    pub args: Vec<ArgLeaf>,
    /// The destination of each leaf of the internal call's result.
    pub results: Vec<ResultLeaf>,
    /// (length parameter, argument position) of every array parameter:
    /// checked to be non-negative on entry.
    pub lengths: Vec<(usize, usize)>,
    /// A one-line summary with the IR signature, for the header.
    pub summary: String,
    /// (pointer parameter, length parameter) of every buffer of doubles
    /// the caller passes beside the primal's arguments (shadows,
    /// directions): what a derivative writes, and saves before its plain
    /// version runs, to restore before its strong version runs. (Arrays of
    /// the primal's arguments are restored by the derivative itself.)
    pub saved: Vec<(usize, usize)>,
    /// Those of [`Plan::saved`] that receive derivatives: scanned for NaN.
    pub scanned: Vec<(usize, usize)>,
    /// (pointer parameter, length parameter) of every `[bool]` array
    /// parameter. Its address may be odd, which compiled code whose tapes
    /// are counted would read as a tag (docs/codegen.md, "Arrays on
    /// tapes"): there the export passes a copy of it instead, and copies
    /// it back when the call ends.
    pub bools: Vec<(usize, usize)>,
    /// The index in [`Plan::results`] of the first derivative leaf (the
    /// value's leaves come before it): from there on they are scanned.
    pub derivs_from: usize,
}

/// Words that cannot name a C parameter or function.
const C_KEYWORDS: &[&str] = &[
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "bool",
    "true",
    "false",
    "_Bool",
    "_Complex",
    "_Imaginary",
    "main",
];

/// The C symbol of function `name` (`.` becomes `_`), with `suffix`.
pub(crate) fn symbol_of(
    module: &Module,
    func: FuncId,
    suffix: &str,
) -> Result<String, CodegenError> {
    let f = module
        .get(func)
        .ok_or_else(|| CodegenError::internal(format!("no function {func:?}")))?;
    let sym = format!("{}{suffix}", sanitize(&f.name));
    let loc = func_loc(module, func);
    if sym.starts_with("irad_") || sym.starts_with("IRAD_") {
        return Err(CodegenError {
            loc,
            msg: format!(
                "cannot export @{} as `{sym}`: names starting with `irad_` belong to the irad runtime",
                f.name
            ),
        });
    }
    if C_KEYWORDS.contains(&sym.as_str()) {
        return Err(CodegenError {
            loc,
            msg: format!(
                "cannot export @{} as `{sym}`: it is a C keyword or `main`",
                f.name
            ),
        });
    }
    Ok(sym)
}

/// The plan of `export`.
pub(crate) fn plan(module: &Module, export: &Export) -> Result<Plan, CodegenError> {
    let func = module
        .get(export.func)
        .ok_or_else(|| CodegenError::internal(format!("no function {:?}", export.func)))?;
    let loc = func_loc(module, export.func);
    let fail = |msg: String| CodegenError {
        loc: loc.clone(),
        msg,
    };
    let params = func.param_types();
    for (i, ty) in params.iter().enumerate() {
        if let Some(why) = no_c_form(ty, false) {
            return Err(fail(format!(
                "cannot export @{}: argument {i} has type {ty}, and {why}",
                func.name
            )));
        }
    }
    if let Some(why) = no_c_form(&func.ret, true) {
        return Err(fail(format!(
            "cannot export @{}: it returns {}, and {why}",
            func.name, func.ret
        )));
    }
    let (wrt, internal, suffix) = match &export.kind {
        ExportKind::Primal => (None, export.func, ""),
        ExportKind::Grad { rev, wrt } => (
            Some(check_wrt(&func.name, &params, wrt.as_deref()).map_err(fail)?),
            *rev,
            "_grad",
        ),
        ExportKind::Hvp { hvp, wrt } => {
            if func.ret != Type::F64 {
                return Err(fail(format!(
                    "cannot export the Hessian-vector product of @{}: it returns {}, not f64",
                    func.name, func.ret
                )));
            }
            (
                Some(check_wrt(&func.name, &params, wrt.as_deref()).map_err(fail)?),
                *hvp,
                "_hvp",
            )
        }
    };
    let hvp = matches!(export.kind, ExportKind::Hvp { .. });
    let symbol = symbol_of(module, export.func, suffix)?;
    let mut b = PlanBuilder {
        grad: wrt.is_some(),
        ..PlanBuilder::default()
    };
    // Parameter names first, so that the names made up later (`x_len`,
    // `out`) yield to them.
    let names: Vec<String> = func
        .params
        .iter()
        .enumerate()
        .map(|(i, &v)| match func.values[v].name.as_deref() {
            Some(n) if !n.chars().all(|c| c.is_ascii_digit()) => sanitize(n),
            _ => format!("arg{i}"),
        })
        .map(|n| b.names.fresh(&n))
        .collect();
    for (i, ty) in params.iter().enumerate() {
        let want = wrt.as_ref().is_some_and(|w| w.contains(&i));
        b.param(ty, &names[i], &format!("argument {i}"), i, want);
    }
    let grad = wrt.is_some();
    if hvp {
        b.hvp_params();
    } else if grad {
        let shadows = std::mem::take(&mut b.shadows);
        for (len, name, want) in shadows {
            if want {
                let p = b.push(
                    "double *",
                    &format!("{name}_grad"),
                    format!(
                        "{} doubles (as many as {name}); the gradient with respect to {name} is added into it",
                        b.params[len].name
                    ),
                    types::I64,
                );
                b.args.extend([ArgLeaf::Shadow(p), ArgLeaf::Len(len)]);
                b.saved.push((p, len));
                b.scanned.push((p, len));
            } else {
                b.args.extend([ArgLeaf::Scratch(len), ArgLeaf::Len(len)]);
            }
        }
        let nseed = func.ret.cotangent_leaves();
        for k in 0..nseed {
            let name = if nseed == 1 {
                "seed".to_string()
            } else {
                format!("seed_{k}")
            };
            let p = b.push(
                "double",
                &name,
                if nseed == 1 {
                    "the output seed: 1.0 for the gradient itself".to_string()
                } else {
                    format!("the seed of the result's f64 number {k}")
                },
                types::F64,
            );
            b.args.push(ArgLeaf::Param(p));
        }
    }
    b.outs(&func.ret);
    let derivs_from = b.results.len();
    if hvp {
        b.hvp_outs();
    } else if grad {
        let outs = std::mem::take(&mut b.grad_outs);
        for (name, what, want) in outs {
            if want {
                let p = b.push(
                    "double *",
                    &format!("{name}_grad"),
                    format!("receives the gradient with respect to {what} (times the seed)"),
                    types::I64,
                );
                b.results.push(ResultLeaf::Out(p, types::F64));
            } else {
                b.results.push(ResultLeaf::Drop);
            }
        }
    }
    let ir_sig = ir_signature(module, export.func);
    let summary = if hvp {
        format!(
            "Value, gradient and Hessian-vector product of {ir_sig} by forward mode over reverse mode (@{}.vjp.fwd).",
            func.name
        )
    } else if grad {
        format!(
            "Value and gradient of {ir_sig} by reverse mode (@{}.rev).",
            func.name
        )
    } else {
        format!("The value of {ir_sig}.")
    };
    Ok(Plan {
        symbol,
        internal,
        loc,
        params: b.params,
        args: b.args,
        results: b.results,
        lengths: b.lengths,
        summary,
        saved: b.saved,
        scanned: b.scanned,
        bools: b.bools,
        derivs_from,
    })
}

/// The header declaring `plans`, guarded by a macro made from `name` (the
/// header's file name).
pub(crate) fn header(name: &str, source: &str, plans: &[Plan]) -> String {
    let guard: String = format!("IRAD_{}", sanitize(name).to_ascii_uppercase());
    // Names go inside comments, which `*/` would end.
    let (name, source) = (name.replace("*/", "* /"), source.replace("*/", "* /"));
    let mut h = String::new();
    let _ = writeln!(
        h,
        "/* {name}: written by `irad emit` from {source}. Link with the object file,\n * libirad_runtime.a, -lm -lpthread -ldl (docs/codegen.md, \"The C ABI\"). */"
    );
    let _ = writeln!(
        h,
        "#ifndef {guard}\n#define {guard}\n\n#include <stdint.h>\n"
    );
    h.push_str(RUNTIME_API);
    let _ = writeln!(h, "\n#ifdef __cplusplus\nextern \"C\" {{\n#endif\n");
    for p in plans {
        let _ = writeln!(h, "/* {}", p.summary);
        let width = p.params.iter().map(|c| c.name.len()).max().unwrap_or(0);
        for c in &p.params {
            let _ = writeln!(h, " *   {:width$}  {}", c.name, c.doc);
        }
        let _ = writeln!(
            h,
            " * Returns IRAD_OK (0), or an IRAD_ERR_* code and irad_error_message() says\n * what and where; outputs are written only on success. */"
        );
        let params: Vec<String> = p
            .params
            .iter()
            .map(|c| {
                if c.cty.ends_with('*') {
                    format!("{}{}", c.cty, c.name)
                } else {
                    format!("{} {}", c.cty, c.name)
                }
            })
            .collect();
        let list = if params.is_empty() {
            "void".to_string()
        } else {
            params.join(", ")
        };
        let _ = writeln!(h, "int32_t {}({list});\n", p.symbol);
    }
    let _ = writeln!(h, "#ifdef __cplusplus\n}}\n#endif\n\n#endif /* {guard} */");
    h
}

/// The part of every header that declares the runtime library: status codes
/// and the functions of `irad_runtime`, guarded on its own so that headers of
/// several objects can be included together.
const RUNTIME_API: &str = "#ifndef IRAD_RUNTIME_API
#define IRAD_RUNTIME_API

/* Status codes of exported functions (the runtime's ERR_* kinds). */
#define IRAD_OK                 0  /* success */
#define IRAD_ERR_DIV_ZERO       1  /* idiv by zero */
#define IRAD_ERR_REM_ZERO       2  /* irem by zero */
#define IRAD_ERR_IDIV_OVERFLOW  3  /* idiv(INT64_MIN, -1) */
#define IRAD_ERR_FPTOSI         4  /* fptosi of NaN or out of the i64 range */
#define IRAD_ERR_NEG_LEN        5  /* alloc/zeros of a negative length */
#define IRAD_ERR_TOO_LONG       6  /* alloc/zeros above 2^28 elements */
#define IRAD_ERR_OOM_ALLOC      7  /* out of memory allocating an array */
#define IRAD_ERR_OOM_COPY       8  /* out of memory copying an array */
#define IRAD_ERR_INDEX          9  /* array index out of bounds */
#define IRAD_ERR_SWITCH        10  /* internal: switch index out of range */
#define IRAD_ERR_EMPTY_TAPE    11  /* internal: pop from an empty tape */
#define IRAD_ERR_DEPTH         12  /* call-depth limit exceeded */
#define IRAD_ERR_STACK         13  /* native stack budget exhausted */
#define IRAD_ERR_MESSAGE       14  /* internal error */
#define IRAD_ERR_OOM_TAPE      15  /* out of memory growing a tape */
#define IRAD_ERR_NO_RULE       16  /* a rule the object does not hold */
#define IRAD_ERR_BAD_LENGTH    17  /* an array argument with a negative length */
#define IRAD_ERR_SPARSE_HANDLE 18  /* internal: an invalid sparse tangent handle */
#define IRAD_ERR_SPARSE_DIRECTION 19  /* a negative one-hot direction */
#define IRAD_ERR_SPARSE_RANGE  20  /* a one-hot direction beyond sdense's length */
#define IRAD_ERR_SPARSE_FULL   21  /* too many sparse tangent nodes */
#define IRAD_ERR_BULK          22  /* bulk array primitive: shapes that do not fit, or output is an input */
#define IRAD_ERR_OOM_SPARSE    23  /* out of memory growing the sparse tangent builder */

/* The error of the last exported function that returned on this thread:
 * \"file:line:col: error: message (in @f, block #2, statement 3)\" and one
 * \"note: called ...\" line per call on the way out; \"\" after a success.
 * Valid until the next call of an exported function on this thread. */
const char *irad_error_message(void);
/* The native stack compiled code may use below an exported function's entry,
 * for later calls on this thread; deeper calls fail with IRAD_ERR_STACK
 * instead of overflowing. 0 (the default) means the stack the thread has
 * left below the entry, less a margin (on Linux; 1 MiB elsewhere). */
void irad_set_stack_budget(uint64_t bytes);
/* The call-depth limit for later calls on this thread (default 100000). */
void irad_set_max_depth(int64_t depth);

#endif /* IRAD_RUNTIME_API */
";

/// Collects the pieces of a [`Plan`] while walking the parameter types.
#[derive(Default)]
struct PlanBuilder {
    /// Whether this is a gradient function (whose arrays are restored).
    grad: bool,
    names: Names,
    params: Vec<CParam>,
    args: Vec<ArgLeaf>,
    results: Vec<ResultLeaf>,
    lengths: Vec<(usize, usize)>,
    /// Every `[f64]` array met: (length parameter, name, wanted).
    shadows: Vec<(usize, String, bool)>,
    /// Every f64 outside arrays met: (name, description, wanted).
    grad_outs: Vec<(String, String, bool)>,
    /// [`Plan::saved`].
    saved: Vec<(usize, usize)>,
    /// [`Plan::scanned`].
    scanned: Vec<(usize, usize)>,
    /// [`Plan::bools`].
    bools: Vec<(usize, usize)>,
}

impl PlanBuilder {
    fn push(&mut self, cty: &'static str, name: &str, doc: String, leaf: types::Type) -> usize {
        let name = self.names.fresh(name);
        self.params.push(CParam {
            cty,
            name,
            doc,
            leaf,
        });
        self.params.len() - 1
    }

    /// The C parameters of a value of type `ty` called `name` (already
    /// reserved for the outermost call), part of argument `arg`.
    fn param(&mut self, ty: &Type, name: &str, what: &str, arg: usize, want: bool) {
        match ty {
            Type::F64 => {
                let p = self.push_named("double", name, format!("{what} (f64)"), types::F64);
                self.args.push(ArgLeaf::Param(p));
                self.grad_outs
                    .push((name.to_string(), what.to_string(), want));
            }
            Type::I64 => {
                let p = self.push_named("int64_t", name, format!("{what} (i64)"), types::I64);
                self.args.push(ArgLeaf::Param(p));
            }
            Type::Bool => {
                let p = self.push_named(
                    "int32_t",
                    name,
                    format!("{what} (bool: 0 is false, anything else true)"),
                    types::I32,
                );
                self.args.push(ArgLeaf::Bool(p));
            }
            Type::Tuple(elems) => {
                for (k, e) in elems.iter().enumerate() {
                    let sub = self.names.fresh(&format!("{name}_{k}"));
                    self.param(e, &sub, &format!("{what}, component {k}"), arg, want);
                }
            }
            Type::Array(elem) => {
                let (cty, ety) = match elem {
                    Scalar::F64 => ("double *", "f64"),
                    Scalar::I64 => ("int64_t *", "i64"),
                    Scalar::Bool => ("uint8_t *", "bool, each 0 or 1"),
                    // Refused by `no_c_form` before any parameter is planned.
                    Scalar::Sparse => ("int64_t *", "sparse handles"),
                };
                let len_name = self.names.fresh(&format!("{name}_len"));
                let p = self.push_named(
                    cty,
                    name,
                    format!(
                        "{what} ([{}]): {len_name} elements ({ety}), {}",
                        elem_text(*elem),
                        if self.grad {
                            "written during the call and restored before it returns"
                        } else {
                            "which the function may write"
                        }
                    ),
                    types::I64,
                );
                let len = self.push_named(
                    "int64_t",
                    &len_name,
                    format!("the length of {name}"),
                    types::I64,
                );
                self.args.extend([ArgLeaf::Param(p), ArgLeaf::Param(len)]);
                self.lengths.push((len, arg));
                if *elem == Scalar::Bool {
                    self.bools.push((p, len));
                }
                if *elem == Scalar::F64 {
                    self.shadows.push((len, name.to_string(), want));
                }
            }
            // `plan` refuses the other types before walking.
            Type::Unit | Type::Func(_) | Type::Dual(..) | Type::Sparse => {}
        }
    }

    /// The parameters of `NAME_hvp` after the primal's: the direction's
    /// scalars (`NAME_dir`), its arrays (`double *NAME_dir`, of the array's
    /// length), the gradient's buffers (`double *NAME_grad`) and the
    /// product's (`double *NAME_hvp`), for the differentiated arguments.
    fn hvp_params(&mut self) {
        let scalars: Vec<(String, String)> = self
            .grad_outs
            .iter()
            .filter(|(_, _, want)| *want)
            .map(|(n, w, _)| (n.clone(), w.clone()))
            .collect();
        for (name, what) in scalars {
            let p = self.push(
                "double",
                &format!("{name}_dir"),
                format!("the direction's entry for {what}"),
                types::F64,
            );
            self.args.push(ArgLeaf::Param(p));
        }
        let arrays: Vec<(usize, String)> = self
            .shadows
            .iter()
            .filter(|(_, _, want)| *want)
            .map(|(len, n, _)| (*len, n.clone()))
            .collect();
        for (suffix, doc) in [
            ("dir", "the direction's entries for"),
            ("grad", "the gradient with respect to {} is added into it"),
            (
                "hvp",
                "the Hessian-vector product's entries for {} are added into it",
            ),
        ] {
            for (len, name) in &arrays {
                let doc = if doc.contains("{}") {
                    doc.replace("{}", name)
                } else {
                    format!("{doc} {name}")
                };
                let p = self.push(
                    "double *",
                    &format!("{name}_{suffix}"),
                    format!(
                        "{} doubles (as many as {name}): {doc}",
                        self.params[*len].name
                    ),
                    types::I64,
                );
                self.args.extend([ArgLeaf::Shadow(p), ArgLeaf::Len(*len)]);
                self.saved.push((p, *len));
                if suffix != "dir" {
                    self.scanned.push((p, *len));
                }
            }
        }
    }

    /// The out-pointers of `NAME_hvp` after the value's: the gradient's
    /// entries (`NAME_grad`), then the product's (`NAME_hvp`), for the f64s
    /// of the differentiated arguments outside arrays.
    fn hvp_outs(&mut self) {
        let scalars: Vec<(String, String)> = self
            .grad_outs
            .iter()
            .filter(|(_, _, want)| *want)
            .map(|(n, w, _)| (n.clone(), w.clone()))
            .collect();
        for (suffix, doc) in [
            ("grad", "receives the gradient with respect to"),
            ("hvp", "receives the Hessian-vector product's entry for"),
        ] {
            for (name, what) in &scalars {
                let p = self.push(
                    "double *",
                    &format!("{name}_{suffix}"),
                    format!("{doc} {what}"),
                    types::I64,
                );
                self.results.push(ResultLeaf::Out(p, types::F64));
            }
        }
    }

    /// Like [`PlanBuilder::push`] for a name already reserved.
    fn push_named(
        &mut self,
        cty: &'static str,
        name: &str,
        doc: String,
        leaf: types::Type,
    ) -> usize {
        self.params.push(CParam {
            cty,
            name: name.to_string(),
            doc,
            leaf,
        });
        self.params.len() - 1
    }

    /// The out-pointers of a result of type `ret`.
    fn outs(&mut self, ret: &Type) {
        let mut leaves = Vec::new();
        scalar_leaves(ret, "", &mut leaves);
        let single = leaves.len() == 1;
        for (path, s) in leaves {
            let name = if single {
                "out".to_string()
            } else {
                format!("out{path}")
            };
            let (cty, leaf, what) = match s {
                Scalar::F64 => ("double *", types::F64, "f64"),
                Scalar::I64 => ("int64_t *", types::I64, "i64"),
                Scalar::Bool => ("int32_t *", types::I8, "bool, stored as 0 or 1"),
                Scalar::Sparse => ("int64_t *", types::I64, "a sparse handle"),
            };
            let part = if single {
                "the result".to_string()
            } else {
                format!(
                    "component {} of the result",
                    path.trim_start_matches('_').replace('_', ".")
                )
            };
            let p = self.push(cty, &name, format!("receives {part} ({what})"), types::I64);
            self.results.push(ResultLeaf::Out(p, leaf));
        }
    }
}

/// The scalar leaves of a result type (without arrays or functions), with
/// their component paths (`_0_1`).
fn scalar_leaves(ty: &Type, path: &str, out: &mut Vec<(String, Scalar)>) {
    match ty {
        Type::F64 => out.push((path.to_string(), Scalar::F64)),
        Type::I64 => out.push((path.to_string(), Scalar::I64)),
        Type::Bool => out.push((path.to_string(), Scalar::Bool)),
        Type::Tuple(elems) => {
            for (k, e) in elems.iter().enumerate() {
                scalar_leaves(e, &format!("{path}_{k}"), out);
            }
        }
        _ => {}
    }
}

/// Why a parameter (or, with `result`, a result) of type `ty` has no C form.
fn no_c_form(ty: &Type, result: bool) -> Option<&'static str> {
    match ty {
        Type::F64 | Type::I64 | Type::Bool | Type::Unit => None,
        Type::Array(Scalar::Sparse) => Some("sparse tangents cannot cross the C ABI"),
        Type::Array(_) if result => Some(
            "arrays cannot be returned through the C ABI (pass an array argument and write into it instead)",
        ),
        Type::Array(_) => None,
        Type::Tuple(elems) => elems.iter().find_map(|e| no_c_form(e, result)),
        Type::Func(_) => Some("function values cannot cross the C ABI"),
        Type::Dual(..) => Some("dual values cannot cross the C ABI"),
        Type::Sparse => Some("sparse tangents cannot cross the C ABI"),
    }
}

/// The checked, sorted list of argument positions to differentiate.
fn check_wrt(name: &str, params: &[Type], wrt: Option<&[usize]>) -> Result<Vec<usize>, String> {
    let Some(list) = wrt else {
        return Ok((0..params.len())
            .filter(|&i| params[i].has_tangent())
            .collect());
    };
    for &i in list {
        let Some(ty) = params.get(i) else {
            return Err(format!(
                "--wrt {i}: @{name} has {} argument{} (positions from 0)",
                params.len(),
                if params.len() == 1 { "" } else { "s" }
            ));
        };
        if !ty.has_tangent() {
            return Err(format!(
                "--wrt {i}: argument {i} of @{name} has type {ty}, which has no tangent"
            ));
        }
    }
    let mut list = list.to_vec();
    list.sort_unstable();
    list.dedup();
    Ok(list)
}

/// `@f(%x: [f64], %n: i64) -> f64`.
fn ir_signature(module: &Module, func: FuncId) -> String {
    let Some(f) = module.get(func) else {
        return String::new();
    };
    let params: Vec<String> = f
        .params
        .iter()
        .map(|&v| match f.values[v].name.as_deref() {
            Some(n) => format!("%{n}: {}", f.values[v].ty),
            None => f.values[v].ty.to_string(),
        })
        .collect();
    format!("@{}({}) -> {}", f.name, params.join(", "), f.ret)
}

fn elem_text(s: Scalar) -> &'static str {
    match s {
        Scalar::F64 => "f64",
        Scalar::I64 => "i64",
        Scalar::Bool => "bool",
        Scalar::Sparse => "sparse",
    }
}

/// The location of a function (its name and source position).
pub(crate) fn func_loc(module: &Module, func: FuncId) -> Location {
    Location {
        func: module.get(func).map(|f| f.name.as_str().into()),
        pos: module.get(func).and_then(|f| f.pos),
        ..Location::default()
    }
}

/// `name` as a C identifier: every other character becomes `_`, and a
/// leading digit gets a `_` before it.
fn sanitize(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

/// The names given so far in one function's parameter list.
#[derive(Default)]
struct Names {
    used: HashSet<String>,
}

impl Names {
    /// `name`, or `name_2`, `name_3`, ... when taken or a C keyword.
    fn fresh(&mut self, name: &str) -> String {
        let taken = |s: &str, used: &HashSet<String>| {
            used.contains(s) || C_KEYWORDS.contains(&s) || s.starts_with("irad_")
        };
        let mut cand = name.to_string();
        let mut k = 2;
        while taken(&cand, &self.used) {
            cand = format!("{name}_{k}");
            k += 1;
        }
        self.used.insert(cand.clone());
        cand
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use irad_runtime::{NO_TRAP, TrapKind};

    /// The name the header gives a trap kind's status code, for the test that
    /// keeps the header's codes equal to [`TrapKind::code`] (the match is
    /// exhaustive, so a new kind cannot be forgotten here).
    fn status_name(kind: TrapKind) -> &'static str {
        match kind {
            TrapKind::DivZero => "IRAD_ERR_DIV_ZERO",
            TrapKind::RemZero => "IRAD_ERR_REM_ZERO",
            TrapKind::IdivOverflow => "IRAD_ERR_IDIV_OVERFLOW",
            TrapKind::Fptosi => "IRAD_ERR_FPTOSI",
            TrapKind::NegLen => "IRAD_ERR_NEG_LEN",
            TrapKind::TooLong => "IRAD_ERR_TOO_LONG",
            TrapKind::OomAlloc => "IRAD_ERR_OOM_ALLOC",
            TrapKind::OomCopy => "IRAD_ERR_OOM_COPY",
            TrapKind::Index => "IRAD_ERR_INDEX",
            TrapKind::Switch => "IRAD_ERR_SWITCH",
            TrapKind::EmptyTape => "IRAD_ERR_EMPTY_TAPE",
            TrapKind::Depth => "IRAD_ERR_DEPTH",
            TrapKind::Stack => "IRAD_ERR_STACK",
            TrapKind::Message => "IRAD_ERR_MESSAGE",
            TrapKind::OomTape => "IRAD_ERR_OOM_TAPE",
            TrapKind::NoRule => "IRAD_ERR_NO_RULE",
            TrapKind::BadLength => "IRAD_ERR_BAD_LENGTH",
            TrapKind::SparseHandle => "IRAD_ERR_SPARSE_HANDLE",
            TrapKind::SparseDirection => "IRAD_ERR_SPARSE_DIRECTION",
            TrapKind::SparseRange => "IRAD_ERR_SPARSE_RANGE",
            TrapKind::SparseFull => "IRAD_ERR_SPARSE_FULL",
            TrapKind::Bulk => "IRAD_ERR_BULK",
            TrapKind::OomSparse => "IRAD_ERR_OOM_SPARSE",
        }
    }

    fn module(text: &str) -> Module {
        irad_ir::text::parse_module(text).expect("parses")
    }

    #[test]
    fn the_header_defines_the_runtimes_status_codes() {
        let codes = TrapKind::ALL.map(|k| (status_name(k), k.code()));
        for (name, code) in [("IRAD_OK", NO_TRAP)].iter().chain(&codes) {
            let line = RUNTIME_API
                .lines()
                .find(|l| l.starts_with(&format!("#define {name} ")))
                .unwrap_or_else(|| panic!("no #define {name}"));
            let value: i64 = line
                .split_whitespace()
                .nth(2)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("bad line {line}"));
            assert_eq!(value, *code, "{name}");
        }
        let defines = RUNTIME_API.matches("#define IRAD_").count();
        // IRAD_RUNTIME_API itself, IRAD_OK, then one per trap kind.
        assert_eq!(defines, codes.len() + 2);
    }

    #[test]
    fn parameter_names_are_c_identifiers_and_never_collide() {
        let m = module(
            "func @f.g(%x: [f64], %x_len: i64, %int: (f64, bool), %3: f64) -> (f64, bool) {
#1:
  %r = call tuple(1.0, true) :: (f64, bool)
  return %r
}
",
        );
        let id = m.by_name("f.g").expect("f.g");
        let p = plan(
            &m,
            &Export {
                func: id,
                kind: ExportKind::Primal,
            },
        )
        .expect("plans");
        let names: Vec<&str> = p.params.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "x", "x_len_2", "x_len", "int_2_0", "int_2_1", "arg3", "out_0", "out_1"
            ]
        );
        assert_eq!(p.symbol, "f_g");
        let h = header("f.h", "a*/f.ir", &[p]);
        assert!(h.contains("from a* /f.ir"), "{h}");
        assert!(
            h.contains(
                "int32_t f_g(double *x, int64_t x_len_2, int64_t x_len, double int_2_0, \
                 int32_t int_2_1, double arg3, double *out_0, int32_t *out_1);"
            ),
            "{h}"
        );
        assert!(h.contains("#ifndef IRAD_F_H"), "{h}");
    }

    #[test]
    fn what_c_cannot_carry_is_refused_with_the_functions_location() {
        let m = module(
            "func @apply(%f: fn(f64) -> f64, %x: f64) -> f64 {
#1:
  %r = call %f(%x) :: f64
  return %r
}

func @irad_x(%x: f64) -> f64 {
#1:
  return %x
}
",
        );
        let export = |name: &str, kind: ExportKind| Export {
            func: m.by_name(name).expect("function"),
            kind,
        };
        let err = plan(&m, &export("apply", ExportKind::Primal)).expect_err("refused");
        assert_eq!(err.loc.func.as_deref(), Some("apply"));
        assert_eq!(err.loc.pos, Some(irad_ir::loc::Pos::new(1, 1)));
        assert_eq!(
            err.msg,
            "cannot export @apply: argument 0 has type fn(f64) -> f64, and function values cannot cross the C ABI"
        );
        let err = plan(&m, &export("irad_x", ExportKind::Primal)).expect_err("refused");
        assert!(
            err.msg.contains("belong to the irad runtime"),
            "{}",
            err.msg
        );
        let rev = m.by_name("irad_x").expect("function");
        let err = plan(
            &m,
            &export(
                "apply",
                ExportKind::Grad {
                    rev,
                    wrt: Some(vec![1]),
                },
            ),
        )
        .expect_err("refused");
        assert!(err.msg.contains("function values"), "{}", err.msg);
    }
}
