//! Object files with a C ABI: what `irad emit` writes (docs/codegen.md, "The
//! C ABI").
//!
//! [`emit_object`] compiles the exported functions and everything they reach
//! with the lowering the JIT uses (`lower::Compiler` over a
//! `cranelift_object::ObjectModule`, native ISA, position-independent), and
//! adds:
//! - one exported C function per [`Export`], generated from its
//!   `cabi::Plan`: it keeps a [`irad_runtime::Ctx`] in its frame, calls
//!   `irad_rt_enter`, checks array lengths, calls the internal function,
//!   stores the results through the out-pointers on success and returns the
//!   status `irad_rt_leave` makes (which frees every array and tape of the call);
//! - the function table (`irad.fn_table`, read through `Ctx::fn_table`): the
//!   address of every function value's code, by handle;
//! - `irad_rule`, local to the object: the rules of function values
//!   (`frule`, `revfwd`, `revback`) as a table lookup. An object is closed,
//!   so every rule a rule statement may ask for is built ahead of time
//!   through the [`RuleProvider`]: for every function value whose type is
//!   the operand type of a rule statement, the reverse pieces (for
//!   `revfwd`/`revback`) and the forward rule of each constant width (for
//!   `frule`), repeated until the rules themselves need nothing new. A lookup
//!   that misses fails with `TrapKind::NoRule`;
//! - the site table (`irad.sites`): per site number, C strings with the
//!   source position, the IR place and a `pop`'s tape type, from which the
//!   runtime writes located error messages;
//! - with a [`StrongVersion`], the strong derivatives (docs/rules.md,
//!   "Infinities and NaN"), compiled by a second `Compiler` into the same
//!   module under the prefix `irad.strong` with tables of their own; each
//!   exported derivative then saves the buffers it adds into, runs the
//!   plain version, scans its derivative outputs for NaN and only then
//!   restores the buffers and runs the strong version.
//!
//! Internal symbols are local, so objects emitted separately link into one
//! program; only the exported functions are global.

use crate::CodegenError;
use crate::cabi::{self, ArgLeaf, Export, ExportKind, Plan, ResultLeaf};
use crate::layout::leaf_count;
use crate::lower::{Compiler, RULE_FN};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{
    self, AbiParam, BlockArg, InstBuilder, MemFlagsData, Signature, StackSlotData, StackSlotKind,
    types,
};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{
    DataDescription, DataId, FuncId as ClFuncId, Linkage, Module as ClModule, default_libcall_names,
};
use cranelift_object::{ObjectBuilder, ObjectModule};
use irad_ir::func::{Const, FuncId, FuncRef, InstKind, Module, Operand};
use irad_ir::interp::RuleProvider;
use irad_ir::loc::Location;
use irad_ir::prim::Prim;
use irad_ir::types::{FnType, Lanes, Type};
use irad_runtime::{self as rt, Ctx, RtSym, RuleKind, TrapKind};
use std::collections::{HashMap, HashSet};

/// An object file and the C header that declares its exported functions.
#[derive(Clone, Debug)]
pub struct ObjectFile {
    /// The object file's bytes (ELF, Mach-O or COFF, as the machine uses).
    pub object: Vec<u8>,
    /// The header's text.
    pub header: String,
}

/// What an object's texts say about where it came from.
#[derive(Clone, Copy, Debug)]
pub struct ObjectOptions<'a> {
    /// The source file's name, as error messages of the object name it.
    pub source: &'a str,
    /// The header's file name (its include guard is made from it).
    pub header_name: &'a str,
}

/// Compiles `exports` of `module` (and everything they reach, with the rules
/// of their function values, which `provider` derives and adds to `module`)
/// into an object file with a C ABI, and writes its header; with `strong`,
/// the exported derivatives fall back to its versions where theirs come
/// out NaN (see [`define_in_module`]).
pub fn emit_object(
    module: &mut Module,
    provider: &mut dyn RuleProvider,
    exports: &[Export],
    opts: &ObjectOptions<'_>,
    strong: Option<StrongVersion<'_>>,
) -> Result<ObjectFile, CodegenError> {
    let builder = ObjectBuilder::new(native_isa()?, "irad", default_libcall_names())
        .map_err(CodegenError::backend)?;
    let (backend, defined) = define_in_module(
        ObjectModule::new(builder),
        module,
        provider,
        exports,
        opts,
        strong,
    )?;
    let object = backend.finish().emit().map_err(CodegenError::backend)?;
    Ok(ObjectFile {
        object,
        header: defined.header,
    })
}

/// What [`define_in_module`] defined in the caller's module.
#[derive(Clone, Debug)]
pub struct DefinedExports {
    /// Each exported C function's symbol and its id in the caller's module,
    /// in the order of the exports.
    pub functions: Vec<(String, ClFuncId)>,
    /// The C header declaring them (what `irad emit` writes beside its
    /// object).
    pub header: String,
}

/// Defines `exports` of `module` (and everything they reach, with the
/// rules of their function values, which `provider` derives and adds to
/// `module`) in the caller's Cranelift module `backend`, a JIT or an object
/// module the caller owns and finishes: the exported C functions (global,
/// [`cranelift_module::Linkage::Export`], the C ABI of docs/codegen.md) and,
/// local to the module, the internal functions, the rule lookup
/// `irad_rule`, the function table and the site table. Returns the module
/// with the ids of the exported functions and their C header. With
/// `strong`, the strong versions of the derivative exports are defined
/// too (local, `irad.strong.*`), and each exported derivative runs its
/// strong version when a derivative the plain one returns is NaN
/// (docs/codegen.md, "Infinities and NaN in objects").
///
/// Assumes `backend`'s ISA has the flag `enable_multi_ret_implicit_sret`
/// set (irad's functions return several values; checked: an error
/// otherwise) and, for objects, `is_pic` where the caller links them into
/// a position-independent program. The local symbols are named `irad.*`
/// and `irad_rule`, so define irad's exports in a module once. The caller
/// provides the runtime's symbols: link `libirad_runtime.a` with an object,
/// or register [`runtime_symbols`] with a `cranelift_jit::JITBuilder`.
pub fn define_in_module<M: ClModule>(
    backend: M,
    module: &mut Module,
    provider: &mut dyn RuleProvider,
    exports: &[Export],
    opts: &ObjectOptions<'_>,
    strong: Option<StrongVersion<'_>>,
) -> Result<(M, DefinedExports), CodegenError> {
    if !backend.isa().flags().enable_multi_ret_implicit_sret() {
        return Err(CodegenError::backend(
            "the module's ISA must have the flag `enable_multi_ret_implicit_sret` set: \
             irad's functions return several values"
                .to_string(),
        ));
    }
    if backend.get_name("irad.fn_table").is_some() {
        return Err(CodegenError::backend(
            "the module already defines irad's functions: define every export in one call"
                .to_string(),
        ));
    }
    let plans = exports
        .iter()
        .map(|e| cabi::plan(module, e))
        .collect::<Result<Vec<_>, _>>()?;
    let mut comp = Compiler::new(backend);
    // Declared local before the lowering imports it, so that calls of
    // `irad_rule` bind to the definition in this module.
    let rule_fn = comp
        .backend
        .declare_function(RULE_FN, Linkage::Local, &rule_signature(&comp))
        .map_err(CodegenError::backend)?;
    for p in &plans {
        comp.declare(module, FuncRef::User(p.internal))?;
    }
    let rules = close_rules(&mut comp, module, provider)?;
    let data = Tables::declare(&mut comp, "irad")?;
    let entry_sites = entry_sites(&mut comp, &plans);
    // The strong versions, compiled by a compiler of their own into the
    // same backend module, with tables of their own.
    let strong = match strong {
        Some(s) => Some(define_strong(&mut comp.backend, &plans, s, opts.source)?),
        None => None,
    };
    // Set by the derivations before any piece was compiled, the rules'
    // included; the strong module's pieces are compiled as the plain
    // one's are.
    let counted = module.counted_tapes() || strong.as_ref().is_some_and(|s| s.counted);
    let mut functions = Vec::with_capacity(plans.len());
    for (k, (p, &site)) in plans.iter().zip(&entry_sites).enumerate() {
        let plain = plain_version(&mut comp, module, p, site, &data)?;
        let strong = strong.as_ref().and_then(|s| s.version(k));
        let id = define_export(&mut comp, module, p, (&plain, strong.as_ref()), counted)?;
        functions.push((p.symbol.clone(), id));
    }
    define_rule_fn(&mut comp, rule_fn, &rules)?;
    define_fn_table(&mut comp, data.fn_table)?;
    define_sites(&mut comp, &data, opts.source)?;
    let header = cabi::header(opts.header_name, opts.source, &plans);
    Ok((comp.backend, DefinedExports { functions, header }))
}

/// The runtime's symbols that code defined by [`define_in_module`] calls
/// or reads, with their addresses in this process: register each with a
/// `cranelift_jit::JITBuilder` (`builder.symbol(name, address)`) before
/// defining irad's functions in its module. (An object links
/// `libirad_runtime.a` instead.)
pub fn runtime_symbols() -> Vec<(&'static str, *const u8)> {
    let mut out: Vec<(&'static str, *const u8)> = rt::RtSym::ALL
        .iter()
        .map(|s| (s.name(), s.address()))
        .collect();
    out.push((
        rt::EXP_TABLE_SYMBOL,
        std::ptr::addr_of!(rt::irad_rt_exp_table).cast::<u8>(),
    ));
    out.push((
        rt::LOG_TABLE_SYMBOL,
        std::ptr::addr_of!(rt::irad_rt_log_table).cast::<u8>(),
    ));
    out
}

/// The data objects of an object file besides the code (of one compiler).
struct Tables {
    fn_table: DataId,
    sites: DataId,
    strings: DataId,
}

impl Tables {
    /// Declares `PREFIX.fn_table`, `PREFIX.sites` and `PREFIX.strings`.
    fn declare<M: ClModule>(comp: &mut Compiler<M>, prefix: &str) -> Result<Tables, CodegenError> {
        Ok(Tables {
            fn_table: declare_data(comp, &format!("{prefix}.fn_table"))?,
            sites: declare_data(comp, &format!("{prefix}.sites"))?,
            strings: declare_data(comp, &format!("{prefix}.strings"))?,
        })
    }
}

/// Every export's entry site, pushed first: the number of sites is final
/// before the exported functions, which pass it to the runtime, are
/// generated.
fn entry_sites<M: ClModule>(comp: &mut Compiler<M>, plans: &[Plan]) -> Vec<i64> {
    plans
        .iter()
        .map(|p| {
            comp.sites.push(crate::lower::Site {
                loc: p.loc.clone(),
                tape: None,
            });
            (comp.sites.len() - 1) as i64
        })
        .collect()
}

/// The strong version of an object's derivatives (docs/rules.md,
/// "Infinities and NaN"): the same exports derived in a copy of the module
/// marked [`Module::set_strong_products`]. [`define_in_module`] compiles
/// them beside the plain ones, and each exported derivative runs them when
/// one of the derivatives it returns is NaN.
pub struct StrongVersion<'a> {
    /// The strong copy of the module, with its derived functions.
    pub module: &'a mut Module,
    /// Derives the rules of its function values (strong, as the module is).
    pub provider: &'a mut dyn RuleProvider,
    /// One per export of the plain version, in the same order and of the
    /// same kind, naming functions of [`StrongVersion::module`] (the
    /// primal exports are not compiled again).
    pub exports: &'a [Export],
}

/// The strong versions of an object's exports, compiled, with their tables
/// defined.
struct StrongCompiled {
    tables: Tables,
    /// Whether the strong module's tapes are counted.
    counted: bool,
    ntapes: i64,
    nsites: i64,
    /// Per export: its internal function, entry site and plan; `None` for
    /// a primal.
    exports: Vec<Option<(ClFuncId, i64, Plan)>>,
}

impl StrongCompiled {
    /// The strong version of export number `k`, if it has one.
    fn version(&self, k: usize) -> Option<Version<'_>> {
        let (internal, site, plan) = self.exports.get(k)?.as_ref()?;
        Some(Version {
            internal: *internal,
            fn_table: self.tables.fn_table,
            sites: self.tables.sites,
            ntapes: self.ntapes,
            nsites: self.nsites,
            site: *site,
            args: &plan.args,
            results: &plan.results,
        })
    }
}

/// The prefix of the strong version's symbols (local to the module).
const STRONG_PREFIX: &str = "irad.strong";

/// Compiles the derivative exports of `strong` into `backend` with a
/// compiler of their own (symbols prefixed [`STRONG_PREFIX`]: its own
/// functions, rule lookup, function and site tables), checking that each
/// has the C form of its plain version in `plans`.
fn define_strong<M: ClModule>(
    backend: &mut M,
    plans: &[Plan],
    strong: StrongVersion<'_>,
    source: &str,
) -> Result<StrongCompiled, CodegenError> {
    if strong.exports.len() != plans.len() {
        return Err(CodegenError::internal(
            "the strong version has another number of exports".into(),
        ));
    }
    let mut splans = Vec::with_capacity(plans.len());
    for (p, e) in plans.iter().zip(strong.exports) {
        if matches!(e.kind, ExportKind::Primal) {
            splans.push(None);
            continue;
        }
        let sp = cabi::plan(strong.module, e)?;
        if sp.symbol != p.symbol
            || sp.params.len() != p.params.len()
            || sp.args.len() != p.args.len()
            || sp.results.len() != p.results.len()
        {
            return Err(CodegenError::internal(format!(
                "the strong version of `{}` has another C form",
                p.symbol
            )));
        }
        splans.push(Some(sp));
    }
    let mut comp = Compiler::new(backend);
    comp.prefix = STRONG_PREFIX.to_string();
    let rule_name = format!("{STRONG_PREFIX}.rule");
    let rule_fn = comp
        .backend
        .declare_function(&rule_name, Linkage::Local, &rule_signature(&comp))
        .map_err(CodegenError::backend)?;
    comp.bind_import(RULE_FN, rule_fn);
    for sp in splans.iter().flatten() {
        comp.declare(strong.module, FuncRef::User(sp.internal))?;
    }
    let rules = close_rules(&mut comp, strong.module, strong.provider)?;
    let counted = strong.module.counted_tapes();
    let tables = Tables::declare(&mut comp, STRONG_PREFIX)?;
    let mut exports = Vec::with_capacity(splans.len());
    for sp in splans {
        exports.push(match sp {
            None => None,
            Some(sp) => {
                let internal = comp.declare(strong.module, FuncRef::User(sp.internal))?;
                let site = entry_sites(&mut comp, std::slice::from_ref(&sp))[0];
                Some((internal, site, sp))
            }
        });
    }
    define_rule_fn(&mut comp, rule_fn, &rules)?;
    define_fn_table(&mut comp, tables.fn_table)?;
    define_sites(&mut comp, &tables, source)?;
    let count = |n: usize| {
        i64::try_from(n).map_err(|_| CodegenError::internal("too many tapes or sites".into()))
    };
    Ok(StrongCompiled {
        counted,
        ntapes: count(comp.tape_types.len())?,
        nsites: count(comp.sites.len())?,
        tables,
        exports,
    })
}

/// One row of `irad_rule`'s table: the rule of `kind` (at `width`) of the
/// function value `handle` is the function value `rule`.
#[derive(Clone, Copy, Debug)]
struct RuleEntry {
    kind: RuleKind,
    handle: u32,
    width: i64,
    rule: u32,
}

/// A kind of rule that some rule statement asks of function values of type
/// `ty`: the reverse pieces (`lanes` `None`), or the forward rule with `lanes`.
#[derive(Clone, Debug)]
struct Need {
    ty: Type,
    lanes: Option<Lanes>,
    /// The first statement that asks, for errors.
    loc: Location,
}

/// The ISA of this machine with the flags irad's objects are made with
/// (`opt_level=speed`, `enable_multi_ret_implicit_sret`, `is_pic`): what
/// an embedder's `ObjectModule` for [`define_in_module`] can be built on.
pub fn native_isa_for_objects() -> Result<cranelift_codegen::isa::OwnedTargetIsa, CodegenError> {
    native_isa()
}

/// The ISA of this machine, with the flags of the object backend.
fn native_isa() -> Result<cranelift_codegen::isa::OwnedTargetIsa, CodegenError> {
    let mut flags = settings::builder();
    for (k, v) in [
        ("opt_level", "speed"),
        ("enable_multi_ret_implicit_sret", "true"),
        ("is_pic", "true"),
        (
            "enable_verifier",
            if cfg!(debug_assertions) {
                "true"
            } else {
                "false"
            },
        ),
    ] {
        flags.set(k, v).map_err(CodegenError::backend)?;
    }
    cranelift_native::builder()
        .map_err(|e| CodegenError::backend(format!("this machine is not supported: {e}")))?
        .finish(settings::Flags::new(flags))
        .map_err(CodegenError::backend)
}

/// `irad_rule`'s signature: `(ctx, kind, handle, width, site) -> handle`.
fn rule_signature<M: ClModule>(comp: &Compiler<M>) -> Signature {
    let mut sig = Signature::new(comp.call_conv());
    sig.params.extend([AbiParam::new(types::I64); 5]);
    sig.returns.push(AbiParam::new(types::I64));
    sig
}

/// Compiles everything pending and builds the rules of function values that
/// rule statements may ask for, until nothing new is needed. Returns the
/// rule table.
fn close_rules<M: ClModule>(
    comp: &mut Compiler<M>,
    module: &mut Module,
    provider: &mut dyn RuleProvider,
) -> Result<Vec<RuleEntry>, CodegenError> {
    let mut needs: Vec<Need> = Vec::new();
    let mut done: HashSet<(u32, Option<Lanes>)> = HashSet::new();
    // The handles of rules built here, and whether each is a reverse piece
    // (true) or a forward rule (false). A piece may need a forward rule
    // (forward over reverse: `frule` of what `revfwd` gave) and a forward
    // rule reverse pieces (reverse over forward), but neither mode is
    // nested in itself, so a rule never gets a rule of its own kind.
    let mut rule_handles: HashMap<u32, bool> = HashMap::new();
    let mut entries = Vec::new();
    loop {
        comp.define_pending(module)?;
        for f in comp.defined.clone() {
            if let FuncRef::User(id) = f {
                scan_rule_statements(module, id, &mut needs)?;
                // Inlined bodies' statements are compiled in `id`.
                let bodies = comp.inlined_bodies.get(&id).cloned().unwrap_or_default();
                for g in bodies {
                    scan_rule_statements(module, g, &mut needs)?;
                }
            }
        }
        let mut progress = false;
        let mut h = 0usize;
        // Building a rule adds handles (of the rule functions), so the bound
        // is read anew each time.
        while h < comp.handles.len() {
            let handle = u32::try_from(h)
                .map_err(|_| CodegenError::internal("too many function values".into()))?;
            h += 1;
            let rule_of = rule_handles.get(&handle).copied();
            let callee = comp.handles[handle as usize];
            let sig = fn_type_of(module, callee)?;
            let ty = Type::from_fn(sig.clone());
            let callee_name = name_of(module, callee);
            let wanted = |n: &&Need| {
                n.ty == ty
                    && match rule_of {
                        None => true,
                        Some(piece) => piece == n.lanes.is_some(),
                    }
            };
            for need in needs.iter().filter(wanted) {
                if !done.insert((handle, need.lanes)) {
                    continue;
                }
                progress = true;
                let fail = |msg: String| CodegenError {
                    loc: need.loc.clone(),
                    msg: format!(
                        "cannot build the {} rule of function value {callee_name} ahead of time: {msg}",
                        if need.lanes.is_none() {
                            "reverse"
                        } else {
                            "forward"
                        },
                    ),
                };
                let Some(lanes) = need.lanes else {
                    let (fwd, back) = provider
                        .reverse_rule(module, callee)
                        .map_err(|e| fail(e.to_string()))?;
                    check_type(module, fwd, &Type::rev_fwd_fn(&sig)).map_err(fail)?;
                    check_type(module, back, &Type::rev_back_fn(&sig)).map_err(fail)?;
                    let hf = comp.handle(module, FuncRef::User(fwd))?;
                    let hb = comp.handle(module, FuncRef::User(back))?;
                    rule_handles.extend([(hf, true), (hb, true)]);
                    entries.push(RuleEntry {
                        kind: RuleKind::Revfwd,
                        handle,
                        width: 0,
                        rule: hf,
                    });
                    entries.push(RuleEntry {
                        kind: RuleKind::Revback,
                        handle,
                        width: 0,
                        rule: hb,
                    });
                    continue;
                };
                let id = provider
                    .forward_rule(module, callee, lanes)
                    .map_err(|e| fail(e.to_string()))?;
                check_type(module, id, &Type::forward_fn(&sig, lanes)).map_err(fail)?;
                let r = comp.handle(module, FuncRef::User(id))?;
                rule_handles.insert(r, false);
                entries.push(RuleEntry {
                    kind: RuleKind::Frule,
                    handle,
                    width: lanes.code(),
                    rule: r,
                });
            }
        }
        if !progress {
            return Ok(entries);
        }
    }
}

/// Adds to `needs` what the rule statements of function `id` ask for.
fn scan_rule_statements(
    module: &Module,
    id: FuncId,
    needs: &mut Vec<Need>,
) -> Result<(), CodegenError> {
    let func = module
        .get(id)
        .ok_or_else(|| CodegenError::internal(format!("no function {id:?}")))?;
    for &blk in &func.layout {
        for (i, &inst) in func.blocks[blk].insts.iter().enumerate() {
            let InstKind::Prim { prim, args } = &func.insts[inst].kind else {
                continue;
            };
            if !matches!(prim, Prim::Frule | Prim::Revfwd | Prim::Revback) {
                continue;
            }
            let loc = Location {
                func: Some(func.name.as_str().into()),
                block: Some(func.blocks[blk].label),
                stmt: Some(i as u32 + 1),
                pos: func.insts[inst].pos,
            };
            let ty = args
                .first()
                .and_then(|a| func.operand_type(a, module))
                .filter(|t| matches!(t, Type::Func(_)))
                .ok_or_else(|| CodegenError {
                    loc: loc.clone(),
                    msg: format!("cannot compile: `{prim}` of a value that is not a function"),
                })?;
            let lanes = if *prim == Prim::Frule {
                match args.get(1) {
                    Some(Operand::Const(Const::I64(w))) => match Lanes::from_code(*w) {
                        Some(lanes) => Some(lanes),
                        None => {
                            return Err(CodegenError {
                                loc,
                                msg: format!("cannot compile: batch width {w} out of range"),
                            });
                        }
                    },
                    _ => {
                        return Err(CodegenError {
                            loc,
                            msg: "cannot compile into an object: `frule` with a width that is not a constant (objects build their rules ahead of time)".into(),
                        });
                    }
                }
            } else {
                None
            };
            if !needs.iter().any(|n| n.lanes == lanes && n.ty == ty) {
                needs.push(Need { ty, lanes, loc });
            }
        }
    }
    Ok(())
}

/// The type of a function value.
fn fn_type_of(module: &Module, f: FuncRef) -> Result<FnType, CodegenError> {
    match f {
        FuncRef::User(id) => module
            .get(id)
            .map(|f| f.fn_type())
            .ok_or_else(|| CodegenError::internal(format!("no function {id:?}"))),
        FuncRef::Prim(p) => match p.fn_type() {
            Some(Type::Func(sig)) => Ok((*sig).clone()),
            _ => Err(CodegenError::internal(format!(
                "primitive `{p}` has no single signature"
            ))),
        },
    }
}

/// Checks that a rule the provider made has the type the rule statement's
/// call expects (a wrong one would be called with the wrong signature).
fn check_type(module: &Module, id: FuncId, want: &FnType) -> Result<(), String> {
    let want = Type::from_fn(want.clone());
    let got = module.get(id).map(|f| Type::from_fn(f.fn_type()));
    if got.as_ref() == Some(&want) {
        Ok(())
    } else {
        Err(irad_ir::interp::internal_message(format_args!(
            "the rule has type {}, not {want}",
            got.map_or("nothing".to_string(), |t| t.to_string())
        )))
    }
}

fn name_of(module: &Module, f: FuncRef) -> String {
    match f {
        FuncRef::User(id) => module
            .get(id)
            .map_or_else(|| "?".to_string(), |f| format!("@{}", f.name)),
        FuncRef::Prim(p) => format!("@{p}"),
    }
}

fn declare_data<M: ClModule>(comp: &mut Compiler<M>, name: &str) -> Result<DataId, CodegenError> {
    comp.backend
        .declare_data(name, Linkage::Local, false, false)
        .map_err(CodegenError::backend)
}

/// A runtime function, imported.
fn import<M: ClModule>(
    comp: &mut Compiler<M>,
    sym: RtSym,
    params: &[types::Type],
    rets: &[types::Type],
) -> Result<ClFuncId, CodegenError> {
    let mut sig = Signature::new(comp.call_conv());
    sig.params.extend(params.iter().map(|&t| AbiParam::new(t)));
    sig.returns.extend(rets.iter().map(|&t| AbiParam::new(t)));
    comp.backend
        .declare_function(sym.name(), Linkage::Import, &sig)
        .map_err(CodegenError::backend)
}

/// One version of an exported function's internal call: the function, the
/// tables of the compiler that compiled it, and how the C parameters make
/// its arguments and take its results.
struct Version<'p> {
    internal: ClFuncId,
    fn_table: DataId,
    sites: DataId,
    ntapes: i64,
    nsites: i64,
    /// The entry's site number in `sites` (for argument errors).
    site: i64,
    args: &'p [ArgLeaf],
    results: &'p [ResultLeaf],
}

/// The runtime functions an exported function calls.
struct EntryFns {
    enter: ClFuncId,
    leave: ClFuncId,
    alloc: ClFuncId,
    save: ClFuncId,
    unsave: ClFuncId,
    has_nan: ClFuncId,
    restore: ClFuncId,
}

impl EntryFns {
    fn import<M: ClModule>(comp: &mut Compiler<M>) -> Result<EntryFns, CodegenError> {
        let i64s = [types::I64; 4];
        Ok(EntryFns {
            enter: import(comp, RtSym::Enter, &i64s[..3], &[])?,
            leave: import(comp, RtSym::Leave, &i64s, &[types::I32])?,
            alloc: import(comp, RtSym::Alloc, &i64s, &[types::I64])?,
            save: import(comp, RtSym::Save, &i64s, &[types::I64])?,
            unsave: import(comp, RtSym::Unsave, &i64s[..2], &[])?,
            has_nan: import(comp, RtSym::HasNan, &i64s[..2], &[types::I64])?,
            restore: import(comp, RtSym::Restore, &i64s[..3], &[])?,
        })
    }
}

/// The plain version of `plan`'s internal call, compiled by `comp`.
fn plain_version<'p, M: ClModule>(
    comp: &mut Compiler<M>,
    module: &Module,
    plan: &'p Plan,
    site: i64,
    data: &Tables,
) -> Result<Version<'p>, CodegenError> {
    let internal = comp.declare(module, FuncRef::User(plan.internal))?;
    Ok(Version {
        internal,
        fn_table: data.fn_table,
        sites: data.sites,
        ntapes: i64::try_from(comp.tape_types.len())
            .map_err(|_| CodegenError::internal("too many tapes".into()))?,
        nsites: i64::try_from(comp.sites.len())
            .map_err(|_| CodegenError::internal("too many sites".into()))?,
        site,
        args: &plan.args,
        results: &plan.results,
    })
}

/// Generates the exported C function of `plan`, which runs `plain`; with
/// `strong`, it saves the buffers the derivative writes ([`Plan::saved`]),
/// and when a derivative it returns ([`Plan::scanned`],
/// [`Plan::derivs_from`]) is NaN, restores them and runs `strong` instead
/// (docs/rules.md, "Infinities and NaN"). When `counted` (the tapes of
/// either version are), `[bool]` arrays at odd addresses are passed as
/// copies ([`Plan::bools`]).
fn define_export<M: ClModule>(
    comp: &mut Compiler<M>,
    module: &Module,
    plan: &Plan,
    (plain, strong): (&Version<'_>, Option<&Version<'_>>),
    counted: bool,
) -> Result<ClFuncId, CodegenError> {
    let func = module
        .get(plan.internal)
        .ok_or_else(|| CodegenError::internal(format!("no function {:?}", plan.internal)))?;
    let n_in: usize = func.param_types().iter().map(leaf_count).sum::<usize>();
    if n_in != plan.args.len() || leaf_count(&func.ret) != plan.results.len() {
        return Err(CodegenError::internal(format!(
            "the C form of @{} does not match its signature",
            func.name
        )));
    }
    let mut sig = Signature::new(comp.call_conv());
    sig.params
        .extend(plan.params.iter().map(|p| AbiParam::new(p.leaf)));
    sig.returns.push(AbiParam::new(types::I32));
    let id = comp
        .backend
        .declare_function(&plan.symbol, Linkage::Export, &sig)
        .map_err(|e| CodegenError {
            loc: plan.loc.clone(),
            msg: format!("cannot export `{}`: {e}", plan.symbol),
        })?;
    let fns = EntryFns::import(comp)?;
    let ctx_size = u32::try_from(std::mem::size_of::<Ctx>())
        .map_err(|_| CodegenError::internal("context too large".into()))?;
    // The saved buffers' copies are kept in a stack slot, null until made,
    // and freed on every way out.
    let nsaved = if strong.is_some() {
        plan.saved.len()
    } else {
        0
    };
    let saves_size =
        u32::try_from(nsaved * 8).map_err(|_| CodegenError::internal("too many buffers".into()))?;

    let mut ctx = comp.backend.make_context();
    ctx.func.signature = sig;
    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let ps = b.block_params(entry).to_vec();
        let params = ps.clone();
        let slot =
            b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, ctx_size, 3));
        let cx = b.ins().stack_addr(types::I64, slot, 0);
        let saves = (nsaved > 0).then(|| {
            let s = b.create_sized_stack_slot(StackSlotData::new(
                StackSlotKind::ExplicitSlot,
                saves_size,
                3,
            ));
            let zero = b.ins().iconst(types::I64, 0);
            for k in 0..nsaved {
                b.ins().stack_store(types::I64, zero, s, (8 * k) as i32);
            }
            s
        });
        enter(comp, &mut b, &fns, cx, plain.fn_table, plain.ntapes);

        let leave_blk = b.create_block();
        let status = b.append_block_param(leave_blk, types::I64);
        let sites = b.append_block_param(leave_blk, types::I64);
        let nsites = b.append_block_param(leave_blk, types::I64);
        let failed = b.create_block();
        b.set_cold_block(failed);

        let bools: &[(usize, usize)] = if counted { &plan.bools } else { &[] };
        let kept = keep_bools(&mut b, bools, &ps);
        check_lengths(&mut b, plan, &ps, cx, plain.site, failed);
        let mut ps_in = ps.clone();
        if let Some(kept) = kept {
            let site = b.ins().iconst(types::I64, plain.site);
            align_bools(
                comp,
                &mut b,
                &fns,
                (bools, kept, &mut ps_in),
                (cx, site),
                failed,
            );
        }
        let ps = ps_in;
        let saved = match saves {
            Some(s) => save_buffers(comp, &mut b, &fns, (plan, &ps), (cx, s), plain.site, failed),
            None => Vec::new(),
        };
        let res = call_version(comp, &mut b, &fns, plain, &ps, cx, failed);
        match strong {
            None => {
                store_results(&mut b, plain.results, &res, &ps);
                jump_leave(comp, &mut b, leave_blk, 0, plain);
            }
            Some(strong) => {
                let nan = scan_for_nan(comp, &mut b, &fns, plan, &res, &ps);
                let (keep, rerun) = (b.create_block(), b.create_block());
                b.set_cold_block(rerun);
                b.ins().brif(nan, rerun, &[], keep, &[]);
                b.switch_to_block(keep);
                store_results(&mut b, plain.results, &res, &ps);
                jump_leave(comp, &mut b, leave_blk, 0, plain);

                b.switch_to_block(rerun);
                // Success: its status is 0.
                leave(comp, &mut b, &fns, cx, 0, plain);
                for (&(p, len), &copy) in plan.saved.iter().zip(&saved) {
                    let bytes = b.ins().imul_imm_s(ps[len], 8);
                    let r = comp.backend.declare_func_in_func(fns.restore, b.func);
                    b.ins().call(r, &[ps[p], copy, bytes]);
                }
                enter(comp, &mut b, &fns, cx, strong.fn_table, strong.ntapes);
                let failed_strong = b.create_block();
                b.set_cold_block(failed_strong);
                let res = call_version(comp, &mut b, &fns, strong, &ps, cx, failed_strong);
                store_results(&mut b, strong.results, &res, &ps);
                jump_leave(comp, &mut b, leave_blk, 0, strong);
                b.switch_to_block(failed_strong);
                jump_leave(comp, &mut b, leave_blk, 1, strong);
            }
        }

        b.switch_to_block(failed);
        jump_leave(comp, &mut b, leave_blk, 1, plain);

        b.switch_to_block(leave_blk);
        if let Some(kept) = kept {
            bools_back(comp, &mut b, &fns, bools, kept, &params);
        }
        if let Some(s) = saves {
            for (k, &(_, len)) in plan.saved.iter().enumerate() {
                let p = b
                    .ins()
                    .stack_load(types::I64, types::I64, s, (8 * k) as i32);
                let r = comp.backend.declare_func_in_func(fns.unsave, b.func);
                b.ins().call(r, &[p, ps[len]]);
            }
        }
        let leave_ref = comp.backend.declare_func_in_func(fns.leave, b.func);
        let call = b.ins().call(leave_ref, &[cx, status, sites, nsites]);
        let code = b.inst_results(call)[0];
        b.ins().return_(&[code]);
        b.seal_all_blocks();
        b.finalize(comp.backend.isa().frontend_config());
    }
    // The C entry of a function of thousands of parameters passes them
    // all to one call: wide (`define_sized`).
    comp.define_sized(&plan.symbol, id, &mut ctx)
        .map_err(|e| CodegenError::backend_in(e, &plan.symbol))?;
    Ok(id)
}

/// `irad_rt_enter(cx, table, ntapes)`.
fn enter<M: ClModule>(
    comp: &mut Compiler<M>,
    b: &mut FunctionBuilder<'_>,
    fns: &EntryFns,
    cx: ir::Value,
    fn_table: DataId,
    ntapes: i64,
) {
    let table_gv = comp.backend.declare_data_in_func(fn_table, b.func);
    let table = b.ins().symbol_value(types::I64, table_gv);
    let nt = b.ins().iconst(types::I64, ntapes);
    let enter_ref = comp.backend.declare_func_in_func(fns.enter, b.func);
    b.ins().call(enter_ref, &[cx, table, nt]);
}

/// The status `status`, the address of `version`'s site table and its
/// length: the last three arguments of `irad_rt_leave`.
fn leave_args<M: ClModule>(
    comp: &mut Compiler<M>,
    b: &mut FunctionBuilder<'_>,
    status: i64,
    version: &Version<'_>,
) -> [ir::Value; 3] {
    let sites_gv = comp.backend.declare_data_in_func(version.sites, b.func);
    let sites = b.ins().symbol_value(types::I64, sites_gv);
    let st = b.ins().iconst(types::I64, status);
    let ns = b.ins().iconst(types::I64, version.nsites);
    [st, sites, ns]
}

/// `irad_rt_leave(cx, status, sites, nsites)` of `version`'s site table;
/// returns its status code.
fn leave<M: ClModule>(
    comp: &mut Compiler<M>,
    b: &mut FunctionBuilder<'_>,
    fns: &EntryFns,
    cx: ir::Value,
    status: i64,
    version: &Version<'_>,
) -> ir::Value {
    let [st, sites, ns] = leave_args(comp, b, status, version);
    let leave_ref = comp.backend.declare_func_in_func(fns.leave, b.func);
    let call = b.ins().call(leave_ref, &[cx, st, sites, ns]);
    b.inst_results(call)[0]
}

/// Jumps to the block that leaves the call with `status` and `version`'s
/// site table.
fn jump_leave<M: ClModule>(
    comp: &mut Compiler<M>,
    b: &mut FunctionBuilder<'_>,
    leave_blk: ir::Block,
    status: i64,
    version: &Version<'_>,
) {
    let args = leave_args(comp, b, status, version).map(BlockArg::Value);
    b.ins().jump(leave_blk, &args);
}

/// Refuses a negative length before any compiled code runs (it would pass
/// every bounds check: they compare unsigned).
fn check_lengths(
    b: &mut FunctionBuilder<'_>,
    plan: &Plan,
    ps: &[ir::Value],
    cx: ir::Value,
    site: i64,
    failed: ir::Block,
) {
    for &(len, arg) in &plan.lengths {
        let neg = b.ins().icmp_imm_s(IntCC::SignedLessThan, ps[len], 0);
        let bad = b.create_block();
        let ok = b.create_block();
        b.set_cold_block(bad);
        b.ins().brif(neg, bad, &[], ok, &[]);
        b.switch_to_block(bad);
        let arg = i64::try_from(arg).unwrap_or(i64::MAX);
        for (v, off) in [
            (
                b.ins().iconst(types::I64, TrapKind::BadLength.code()),
                rt::OFF_ERR_KIND,
            ),
            (b.ins().iconst(types::I64, site), rt::OFF_ERR_SITE),
            (b.ins().iconst(types::I64, arg), rt::OFF_ERR_A),
            (ps[len], rt::OFF_ERR_B),
        ] {
            b.ins().store(MemFlagsData::trusted(), v, cx, off);
        }
        b.ins().jump(failed, &[]);
        b.switch_to_block(ok);
    }
}

/// A stack slot holding, for each of `bools` (pointer and length
/// parameters of `[bool]` arrays, [`Plan::bools`]), the address the call
/// passes: the caller's until [`align_bools`] makes a copy. `None` when
/// there are none.
fn keep_bools(
    b: &mut FunctionBuilder<'_>,
    bools: &[(usize, usize)],
    ps: &[ir::Value],
) -> Option<ir::StackSlot> {
    if bools.is_empty() {
        return None;
    }
    let size = u32::try_from(bools.len() * 8).ok()?;
    let slot = b.create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, size, 3));
    for (k, &(p, _)) in bools.iter().enumerate() {
        b.ins().stack_store(types::I64, ps[p], slot, (8 * k) as i32);
    }
    Some(slot)
}

/// Replaces in `ps` each of `bools` whose address is odd by a copy made in
/// the run's arena (16-byte aligned, freed when the call leaves), kept in
/// `kept`: compiled code whose tapes are counted reads the low bit of a
/// popped array's address as a tag (docs/codegen.md, "Arrays on tapes").
/// To `failed` when a copy cannot be made (the error in `cx`).
fn align_bools<M: ClModule>(
    comp: &mut Compiler<M>,
    b: &mut FunctionBuilder<'_>,
    fns: &EntryFns,
    (bools, kept, ps): (&[(usize, usize)], ir::StackSlot, &mut [ir::Value]),
    (cx, site): (ir::Value, ir::Value),
    failed: ir::Block,
) {
    for (k, &(p, len)) in bools.iter().enumerate() {
        let odd = b.ins().band_imm_s(ps[p], 1);
        let copy = b.create_block();
        let made = b.create_block();
        let cont = b.create_block();
        let addr = b.append_block_param(cont, types::I64);
        b.set_cold_block(copy);
        b.ins()
            .brif(odd, copy, &[], cont, &[BlockArg::Value(ps[p])]);
        b.switch_to_block(copy);
        let one = b.ins().iconst(types::I64, 1);
        let alloc_ref = comp.backend.declare_func_in_func(fns.alloc, b.func);
        let call = b.ins().call(alloc_ref, &[cx, ps[len], one, site]);
        let q = b.inst_results(call)[0];
        let null = b.ins().icmp_imm_s(IntCC::Equal, q, 0);
        b.ins().brif(null, failed, &[], made, &[]);
        b.switch_to_block(made);
        let r = comp.backend.declare_func_in_func(fns.restore, b.func);
        b.ins().call(r, &[q, ps[p], ps[len]]);
        b.ins().stack_store(types::I64, q, kept, (8 * k) as i32);
        b.ins().jump(cont, &[BlockArg::Value(q)]);
        b.switch_to_block(cont);
        ps[p] = addr;
    }
}

/// Copies each of `bools` that [`align_bools`] passed as a copy back into
/// the caller's array (`params`: the C parameters), on every way out.
fn bools_back<M: ClModule>(
    comp: &mut Compiler<M>,
    b: &mut FunctionBuilder<'_>,
    fns: &EntryFns,
    bools: &[(usize, usize)],
    kept: ir::StackSlot,
    params: &[ir::Value],
) {
    for (k, &(p, len)) in bools.iter().enumerate() {
        let q = b
            .ins()
            .stack_load(types::I64, types::I64, kept, (8 * k) as i32);
        let copied = b.ins().icmp(IntCC::NotEqual, q, params[p]);
        let back = b.create_block();
        let cont = b.create_block();
        b.set_cold_block(back);
        b.ins().brif(copied, back, &[], cont, &[]);
        b.switch_to_block(back);
        let r = comp.backend.declare_func_in_func(fns.restore, b.func);
        b.ins().call(r, &[params[p], q, params[len]]);
        b.ins().jump(cont, &[]);
        b.switch_to_block(cont);
    }
}

/// Saves each buffer of [`Plan::saved`] (`irad_rt_save`), keeping the
/// copies in the stack slot `saves` (freed when the call leaves), and
/// returns them; to `failed` when one cannot be made (the error in `cx`).
fn save_buffers<M: ClModule>(
    comp: &mut Compiler<M>,
    b: &mut FunctionBuilder<'_>,
    fns: &EntryFns,
    (plan, ps): (&Plan, &[ir::Value]),
    (cx, saves): (ir::Value, ir::StackSlot),
    site: i64,
    failed: ir::Block,
) -> Vec<ir::Value> {
    let mut copies = Vec::with_capacity(plan.saved.len());
    for (k, &(p, len)) in plan.saved.iter().enumerate() {
        let site = b.ins().iconst(types::I64, site);
        let save_ref = comp.backend.declare_func_in_func(fns.save, b.func);
        let call = b.ins().call(save_ref, &[cx, ps[p], ps[len], site]);
        let copy = b.inst_results(call)[0];
        b.ins().stack_store(types::I64, copy, saves, (8 * k) as i32);
        let null = b.ins().icmp_imm_s(IntCC::Equal, copy, 0);
        let ok = b.create_block();
        b.ins().brif(null, failed, &[], ok, &[]);
        b.switch_to_block(ok);
        copies.push(copy);
    }
    copies
}

/// Makes `version`'s arguments from the C parameters `ps` (zeroed scratch
/// shadows allocated in `cx`), calls it, and continues in a new block with
/// its results when it succeeds (to `failed` when not).
fn call_version<M: ClModule>(
    comp: &mut Compiler<M>,
    b: &mut FunctionBuilder<'_>,
    fns: &EntryFns,
    version: &Version<'_>,
    ps: &[ir::Value],
    cx: ir::Value,
    failed: ir::Block,
) -> Vec<ir::Value> {
    let mut args = vec![cx];
    for leaf in version.args {
        let v = match *leaf {
            ArgLeaf::Param(p) | ArgLeaf::Shadow(p) | ArgLeaf::Len(p) => ps[p],
            ArgLeaf::Bool(p) => b.ins().icmp_imm_s(IntCC::NotEqual, ps[p], 0),
            ArgLeaf::Scratch(len) => {
                // The shadow of an array not differentiated: zeroed
                // memory the runtime frees when the call ends.
                let size = b.ins().iconst(types::I64, 8);
                let s = b.ins().iconst(types::I64, version.site);
                let alloc_ref = comp.backend.declare_func_in_func(fns.alloc, b.func);
                let call = b.ins().call(alloc_ref, &[cx, ps[len], size, s]);
                let p = b.inst_results(call)[0];
                let null = b.ins().icmp_imm_s(IntCC::Equal, p, 0);
                let ok = b.create_block();
                b.ins().brif(null, failed, &[], ok, &[]);
                b.switch_to_block(ok);
                p
            }
        };
        args.push(v);
    }
    let internal_ref = comp.backend.declare_func_in_func(version.internal, b.func);
    let call = b.ins().call(internal_ref, &args);
    let res = b.inst_results(call).to_vec();
    let ok = b.create_block();
    b.ins().brif(res[0], failed, &[], ok, &[]);
    b.switch_to_block(ok);
    res
}

/// Stores the internal call's results `res` through the out-pointers.
fn store_results(
    b: &mut FunctionBuilder<'_>,
    results: &[ResultLeaf],
    res: &[ir::Value],
    ps: &[ir::Value],
) {
    for (&v, dest) in res[1..].iter().zip(results) {
        if let ResultLeaf::Out(p, leaf) = *dest {
            let v = if leaf == types::I8 {
                b.ins().uextend(types::I32, v)
            } else {
                v
            };
            b.ins().store(MemFlagsData::new(), v, ps[p], 0);
        }
    }
}

/// Whether a derivative the call returns is NaN (an `i8`, 0 or 1): its
/// f64 results from [`Plan::derivs_from`] on, and the buffers of
/// [`Plan::scanned`].
fn scan_for_nan<M: ClModule>(
    comp: &mut Compiler<M>,
    b: &mut FunctionBuilder<'_>,
    fns: &EntryFns,
    plan: &Plan,
    res: &[ir::Value],
    ps: &[ir::Value],
) -> ir::Value {
    let mut nan = b.ins().iconst(types::I8, 0);
    for (k, dest) in plan.results.iter().enumerate().skip(plan.derivs_from) {
        if let ResultLeaf::Out(_, leaf) = *dest
            && leaf == types::F64
        {
            let v = res[1 + k];
            let unordered = b.ins().fcmp(FloatCC::Unordered, v, v);
            nan = b.ins().bor(nan, unordered);
        }
    }
    for &(p, len) in &plan.scanned {
        let r = comp.backend.declare_func_in_func(fns.has_nan, b.func);
        let call = b.ins().call(r, &[ps[p], ps[len]]);
        let found = b.inst_results(call)[0];
        let found = b.ins().icmp_imm_s(IntCC::NotEqual, found, 0);
        nan = b.ins().bor(nan, found);
    }
    nan
}

/// Generates `irad_rule`: the rule table as a chain of comparisons; a miss
/// records [`TrapKind::NoRule`] and returns -1.
fn define_rule_fn<M: ClModule>(
    comp: &mut Compiler<M>,
    id: ClFuncId,
    rules: &[RuleEntry],
) -> Result<(), CodegenError> {
    let mut ctx = comp.backend.make_context();
    ctx.func.signature = rule_signature(comp);
    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let ps = b.block_params(entry).to_vec();
        let (cx, kind, handle, width, site) = (ps[0], ps[1], ps[2], ps[3], ps[4]);
        for r in rules {
            let k = b.ins().icmp_imm_s(IntCC::Equal, kind, r.kind.code());
            let h = b
                .ins()
                .icmp_imm_s(IntCC::Equal, handle, i64::from(r.handle));
            let w = b.ins().icmp_imm_s(IntCC::Equal, width, r.width);
            let kh = b.ins().band(k, h);
            let hit = b.ins().band(kh, w);
            let found = b.create_block();
            let next = b.create_block();
            b.ins().brif(hit, found, &[], next, &[]);
            b.switch_to_block(found);
            let v = b.ins().iconst(types::I64, i64::from(r.rule));
            b.ins().return_(&[v]);
            b.switch_to_block(next);
        }
        let flags = MemFlagsData::trusted();
        let no_rule = b.ins().iconst(types::I64, TrapKind::NoRule.code());
        b.ins().store(flags, no_rule, cx, rt::OFF_ERR_KIND);
        b.ins().store(flags, site, cx, rt::OFF_ERR_SITE);
        b.ins().store(flags, handle, cx, rt::OFF_ERR_A);
        b.ins().store(flags, kind, cx, rt::OFF_ERR_B);
        let minus_one = b.ins().iconst(types::I64, -1);
        b.ins().return_(&[minus_one]);
        b.seal_all_blocks();
        b.finalize(comp.backend.isa().frontend_config());
    }
    comp.backend
        .define_function(id, &mut ctx)
        .map_err(|e| CodegenError::backend_in(e, RULE_FN))
}

/// Defines the function table: the code address of every handle.
fn define_fn_table<M: ClModule>(comp: &mut Compiler<M>, id: DataId) -> Result<(), CodegenError> {
    let mut desc = DataDescription::new();
    // Never empty: a data object of size zero may share its address.
    let n = comp.handles.len().max(1);
    desc.define(vec![0u8; n * 8].into_boxed_slice());
    desc.set_align(8);
    for (i, f) in comp.handles.iter().enumerate() {
        let fid = *comp
            .funcs
            .get(f)
            .ok_or_else(|| CodegenError::internal("a function value was not declared".into()))?;
        let r = comp.backend.declare_func_in_data(fid, &mut desc);
        let off = u32::try_from(i * 8)
            .map_err(|_| CodegenError::internal("function table too large".into()))?;
        desc.write_function_addr(off, r);
    }
    comp.backend
        .define_data(id, &desc)
        .map_err(CodegenError::backend)
}

/// Defines the site table and the strings it points at.
fn define_sites<M: ClModule>(
    comp: &mut Compiler<M>,
    data: &Tables,
    source: &str,
) -> Result<(), CodegenError> {
    let mut blob: Vec<u8> = Vec::new();
    let mut offsets: HashMap<String, i64> = HashMap::new();
    let mut intern = |s: String| -> i64 {
        if let Some(&o) = offsets.get(&s) {
            return o;
        }
        let o = blob.len() as i64;
        // IR names and file names hold no NUL; drop any to keep C strings whole.
        blob.extend(s.bytes().filter(|&c| c != 0));
        blob.push(0);
        offsets.insert(s, o);
        o
    };
    let mut rows: Vec<[Option<i64>; 3]> = Vec::with_capacity(comp.sites.len());
    for site in &comp.sites {
        let pos = site.loc.pos.unwrap_or(irad_ir::loc::Pos::new(1, 1));
        rows.push([
            Some(intern(format!("{source}:{}:{}", pos.line, pos.col))),
            Some(intern(site.loc.user_place())),
            site.tape.as_ref().map(|t| intern(t.to_string())),
        ]);
    }
    if blob.is_empty() {
        blob.push(0);
    }
    let mut strings = DataDescription::new();
    strings.define(blob.into_boxed_slice());
    comp.backend
        .define_data(data.strings, &strings)
        .map_err(CodegenError::backend)?;

    let mut table = DataDescription::new();
    table.define(vec![0u8; rows.len().max(1) * rt::SITE_INFO_SIZE].into_boxed_slice());
    table.set_align(8);
    let gv = comp.backend.declare_data_in_data(data.strings, &mut table);
    for (i, row) in rows.iter().enumerate() {
        for (k, off) in row.iter().enumerate() {
            if let Some(off) = off {
                let at = u32::try_from(i * rt::SITE_INFO_SIZE + k * 8)
                    .map_err(|_| CodegenError::internal("site table too large".into()))?;
                table.write_data_addr(at, gv, *off);
            }
        }
    }
    comp.backend
        .define_data(data.sites, &table)
        .map_err(CodegenError::backend)
}

#[cfg(test)]
mod tests {
    use irad_runtime as rt;

    /// The runtime words an `fptosi` failure with the IR's number format.
    #[test]
    fn runtime_error_texts_format_numbers_as_the_ir_does() {
        for x in [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e19,
            -1e19,
            9.223372036854776e18,
            2.5,
        ] {
            assert_eq!(
                rt::error_text(rt::TrapKind::Fptosi.code(), x.to_bits() as i64, 0, 10, None),
                format!(
                    "fptosi of {} is out of the i64 range",
                    irad_ir::text::num::format_f64(x)
                ),
            );
        }
    }
}
