//! Lowering of IR functions to Cranelift functions, shared by the JIT and the
//! object backend (generic over `cranelift_module::Module`).
//!
//! Every compiled function has the internal signature
//! `(ctx, leaves of the parameters...) -> (status: i8, leaves of the result...)`
//! (docs/codegen.md): status 0 is success, 1 an error whose description is in
//! the context. Blocks are lowered in reverse postorder, so every value's
//! definition is lowered before its uses; phis become block parameters, one per
//! leaf. Every statement that can fail (integer division, `fptosi`, array
//! access and allocation, bulk array primitives, `switch`, `pop`, calls) gets
//! a site number, and its check branches to a cold block that stores the
//! error kind, site and operands in the context and returns status 1 (a
//! runtime function that fails has stored them itself). A call whose callee
//! fails records its own site in the trace (`irad_rt_trace`) and returns 1
//! too.
//!
//! Each function is lowered with its small non-recursive callees
//! inlined (`irad_passes::pe::inline_for_codegen`; docs/codegen.md,
//! "Inlining"). Sites in inlined code carry the callee's place, their error
//! returns trace the inlined calls, and an inlined body's entry checks the
//! call depth its frame would have had, so errors read as without inlining.
//! Adjacent counted loops over the same range are then fused on that copy
//! (`lower/fuse.rs`), and innermost loops whose array accesses
//! `lower/bounds.rs` cannot prove in range versioned (`lower/version.rs`):
//! an unchecked copy of the loop runs when one test before it shows every
//! index in range.

mod bounds;
mod fuse;
mod parallel;
mod prim;
mod release;
mod thread;
mod vector;
mod version;

pub(crate) use fuse::count as fused_loops;
pub(crate) use vector::count as vectorised_loops;

use crate::CodegenError;
use crate::layout::{leaf_bytes, leaf_count, leaf_list};
use cranelift_codegen::Context;
use cranelift_codegen::ir::condcodes::{CondCode, IntCC};
use cranelift_codegen::ir::{
    self, AbiParam, BlockArg, InstBuilder, JumpTableData, MemFlagsData, Signature, types,
};
use cranelift_codegen::isa::{CallConv, OwnedTargetIsa, TargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{FuncId as ClFuncId, Linkage, Module as ClModule, ModuleError};
use irad_ir::entity::EntityRef;
use irad_ir::entity::{EntitySet, SecondaryMap};
use irad_ir::flow::ControlFlowGraph;
use irad_ir::func::{
    Block, Const, Func, FuncId, FuncRef, InstKind, Module, Operand, Terminator, Value, ValueDef,
};
use irad_ir::loc::Location;
use irad_ir::prim::Prim;
use irad_ir::timings::{Stage, time};
use irad_ir::types::{FnType, Type};
use irad_passes::pe::{Inlined, Limits};
use irad_runtime::{self as rt, RtSym, TrapKind};
use rustc_hash::FxHashMap as HashMap;
use smallvec::SmallVec;
use std::sync::Arc;

type Leaves = SmallVec<[ir::Value; 2]>;

/// What a site number stands for: the failing statement's location, and for
/// a `pop` the tape's type (for the message).
#[derive(Clone, Debug)]
pub(crate) struct Site {
    pub loc: Location,
    pub tape: Option<Type>,
}

/// The name of the function compiled code calls for `frule`, `revfwd` and
/// `revback`: `(ctx, kind, handle, width, site) -> handle` (`kind` a
/// [`RuleKind`] code), negative with the error in the context on failure.
pub(crate) const RULE_FN: &str = "irad_rule";

/// The compiler state shared by every function of one backend module.
pub(crate) struct Compiler<M: ClModule> {
    pub backend: M,
    /// The Cranelift function of every IR function and primitive value declared so far.
    pub funcs: HashMap<FuncRef, ClFuncId>,
    /// Function values by handle, and back.
    pub handles: Vec<FuncRef>,
    pub handle_of: HashMap<FuncRef, u32>,
    /// Tape numbers by exact type, and back.
    pub tapes: HashMap<Type, u32>,
    pub tape_types: Vec<Type>,
    /// Every site number's meaning.
    pub sites: Vec<Site>,
    /// Declared but not yet defined.
    pending: Vec<FuncRef>,
    /// Defined by the last `define_pending`.
    pub defined: Vec<FuncRef>,
    imports: HashMap<&'static str, ClFuncId>,
    /// The runtime's tables (exp's, log's) by symbol, declared on first need.
    tables: HashMap<&'static str, cranelift_module::DataId>,
    /// `irad.tape_grow`, defined on first need.
    grow: Option<ClFuncId>,
    ctx: Context,
    fctx: FunctionBuilderContext,
    /// The linkage of compiled IR functions (local in the JIT and in objects).
    linkage: Linkage,
    /// The limits within which small non-recursive callees are inlined into
    /// each function before it is lowered (`None`: no inlining).
    pub inline: Option<Limits>,
    /// The functions on a cycle of the call graph, computed for a module of
    /// the given number of functions, and again when functions are added
    /// (rules derived at run time).
    recursive: Option<(usize, EntitySet<FuncId>)>,
    /// For each function defined so far, the functions whose bodies were
    /// inlined into it (their statements are compiled there, not in them:
    /// objects look for the rules those statements need there too).
    pub inlined_bodies: HashMap<FuncId, Vec<FuncId>>,
    /// When set, the Cranelift IR of each function defined, after
    /// Cranelift's optimiser, with the function's name (`irad dump
    /// --format clif`).
    pub clif: Option<Vec<(String, ir::Function)>>,
    /// When set, the shape of every function compiled, in order
    /// ([`crate::Jit::capture_shapes`]).
    pub shapes: Option<Vec<crate::Shape>>,
    /// Whether loops whose array accesses cannot be proven in range are
    /// versioned: an unchecked copy runs when a test before the loop shows
    /// them in range (`lower/version.rs`; docs/codegen.md, "Bounds checks").
    pub version_loops: bool,
    /// Whether adjacent counted loops over the same range are fused, before
    /// versioning (`lower/fuse.rs`; docs/codegen.md, "Loop fusion").
    pub fuse_loops: bool,
    /// Which loops run two iterations at a time in vectors
    /// (`lower/vector.rs`; docs/codegen.md, "Vectorisation").
    pub vectorise: crate::LoopVectors,
    /// Which parameters of the functions compiled so far, and of their
    /// callees, a call may leave referenced after it returns
    /// (`lower/release.rs`).
    summaries: release::Summaries,
    /// The ISA huge functions are compiled with ([`huge_isa`]), made on
    /// first need; `Some(None)` when it cannot be made.
    huge_isa: Option<Option<OwnedTargetIsa>>,
    /// Functions lowered but not yet defined in the backend, in the order
    /// they were lowered: huge ones compiling on threads of their own, and
    /// every one lowered after them (`lower/parallel.rs`).
    queued: Vec<parallel::Queued>,
    /// The first component of the names of the functions this compiler
    /// declares (`irad`: `irad.3.f`, `irad.prim.exp`, `irad.tape_grow`):
    /// another prefix lets a second compiler define another version of the
    /// same IR functions in the same backend module (an object's strong
    /// derivatives, `object.rs`).
    pub prefix: String,
    /// Tests only: lowering fails at every statement applying this primitive,
    /// as no valid program makes it fail half-way through a function.
    #[cfg(test)]
    pub fail_at: Option<Prim>,
}

/// `func` (or its inlined copy `inl`) with the phis of tuples holding
/// arrays split into a phi per field, and `getfield`s of `tuple`
/// statements' array fields folded (`irad_passes::forward::tuples_for_codegen`;
/// docs/codegen.md, "Tuples holding arrays"), so that the arrays a loop
/// carries in a tuple are freed as those it carries in array phis. The
/// copy's new statements (phis, `tuple`, `getfield`) have no place: none
/// can fail.
fn split_tuples(func: &Func, inl: Option<Inlined>) -> Result<Option<Inlined>, CodegenError> {
    let base = inl.as_ref().map_or(func, |i| &i.func);
    match irad_passes::forward::tuples_for_codegen(base) {
        Ok(Some(split)) => {
            let mut w = inl.unwrap_or_else(|| Inlined::identity(func));
            w.func = split;
            Ok(Some(w))
        }
        Ok(None) => Ok(inl),
        Err(e) => Err(CodegenError::internal(format!(
            "splitting the tuple phis of @{}: {e}",
            func.name
        ))),
    }
}

impl<M: ClModule> Compiler<M> {
    pub fn new(backend: M) -> Compiler<M> {
        let ctx = backend.make_context();
        Compiler {
            backend,
            funcs: HashMap::default(),
            handles: Vec::new(),
            handle_of: HashMap::default(),
            tapes: HashMap::default(),
            tape_types: Vec::new(),
            sites: Vec::new(),
            pending: Vec::new(),
            defined: Vec::new(),
            imports: HashMap::default(),
            tables: HashMap::default(),
            grow: None,
            ctx,
            fctx: FunctionBuilderContext::new(),
            linkage: Linkage::Local,
            inline: Some(Limits::default()),
            recursive: None,
            inlined_bodies: HashMap::default(),
            clif: None,
            shapes: None,
            version_loops: true,
            fuse_loops: true,
            vectorise: crate::LoopVectors::default(),
            summaries: release::Summaries::default(),
            huge_isa: None,
            queued: Vec::new(),
            prefix: "irad".to_string(),
            #[cfg(test)]
            fail_at: None,
        }
    }

    pub fn call_conv(&self) -> CallConv {
        self.backend.isa().default_call_conv()
    }

    /// The internal signature of a function of type `sig`, or the error
    /// `what` (the function, or the call) has too many scalars for it:
    /// [`MAX_SIGNATURE_LEAVES`] parameters or results at most.
    pub fn signature(&self, sig: &FnType, what: &str) -> Result<Signature, String> {
        let mut s = Signature::new(self.call_conv());
        s.params.push(AbiParam::new(types::I64));
        for p in &sig.params {
            for leaf in leaf_list(p) {
                s.params.push(AbiParam::new(leaf));
            }
        }
        s.returns.push(AbiParam::new(types::I8));
        for leaf in leaf_list(&sig.ret) {
            s.returns.push(AbiParam::new(leaf));
        }
        for (n, which) in [(s.params.len(), "parameters"), (s.returns.len(), "results")] {
            if n > MAX_SIGNATURE_LEAVES {
                return Err(format!(
                    "{what} has {n} scalar {which} once tuples and duals are flattened; compiled code takes at most {MAX_SIGNATURE_LEAVES} (the interpreter has no such limit: `--backend interp`)"
                ));
            }
        }
        Ok(s)
    }

    /// The type of a function value.
    fn fn_type_of(module: &Module, f: FuncRef) -> Result<FnType, CodegenError> {
        match f {
            FuncRef::User(id) => module
                .get(id)
                .map(Func::fn_type)
                .ok_or_else(|| CodegenError::internal(format!("no function {id:?}"))),
            FuncRef::Prim(p) => match p.fn_type() {
                Some(Type::Func(sig)) => Ok((*sig).clone()),
                _ => Err(CodegenError::internal(format!(
                    "primitive `{p}` has no single signature"
                ))),
            },
        }
    }

    /// The Cranelift function of `f`, declared (and queued for definition) on
    /// first request.
    pub fn declare(&mut self, module: &Module, f: FuncRef) -> Result<ClFuncId, CodegenError> {
        if let Some(&id) = self.funcs.get(&f) {
            return Ok(id);
        }
        let sig = self
            .signature(&Self::fn_type_of(module, f)?, &name_of(module, f))
            .map_err(|msg| match f {
                FuncRef::User(id) => match module.get(id) {
                    Some(func) => CodegenError::at(func, None, &msg),
                    None => CodegenError::internal(msg),
                },
                FuncRef::Prim(_) => CodegenError::internal(msg),
            })?;
        let name = match f {
            FuncRef::User(id) => {
                let name = module.get(id).map_or("", |func| func.name.as_str());
                format!("{}.{}.{name}", self.prefix, id.index())
            }
            FuncRef::Prim(p) => format!("{}.prim.{p}", self.prefix),
        };
        let id = self
            .backend
            .declare_function(&name, self.linkage, &sig)
            .map_err(CodegenError::backend)?;
        self.funcs.insert(f, id);
        self.pending.push(f);
        Ok(id)
    }

    /// The handle of function value `f` (declaring `f`).
    pub fn handle(&mut self, module: &Module, f: FuncRef) -> Result<u32, CodegenError> {
        if let Some(&h) = self.handle_of.get(&f) {
            return Ok(h);
        }
        self.declare(module, f)?;
        let h = u32::try_from(self.handles.len())
            .map_err(|_| CodegenError::internal("too many function values".into()))?;
        self.handles.push(f);
        self.handle_of.insert(f, h);
        Ok(h)
    }

    /// The tape number of type `ty`.
    pub fn tape(&mut self, ty: &Type) -> u32 {
        if let Some(&t) = self.tapes.get(ty) {
            return t;
        }
        let t = self.tape_types.len() as u32;
        self.tape_types.push(ty.clone());
        self.tapes.insert(ty.clone(), t);
        t
    }

    fn site(&mut self, loc: Location, tape: Option<Type>) -> i64 {
        self.sites.push(Site { loc, tape });
        (self.sites.len() - 1) as i64
    }

    /// A function imported by name (the runtime's, or the rule function).
    fn import(
        &mut self,
        name: &'static str,
        params: &[types::Type],
        rets: &[types::Type],
    ) -> Result<ClFuncId, CodegenError> {
        if let Some(&id) = self.imports.get(name) {
            return Ok(id);
        }
        let mut sig = Signature::new(self.call_conv());
        sig.params.extend(params.iter().map(|&t| AbiParam::new(t)));
        sig.returns.extend(rets.iter().map(|&t| AbiParam::new(t)));
        let id = self
            .backend
            .declare_function(name, Linkage::Import, &sig)
            .map_err(CodegenError::backend)?;
        self.imports.insert(name, id);
        Ok(id)
    }

    /// Binds the function compiled code imports as `name` to `id`, a
    /// function of the module (an object's own rule lookup, declared under a
    /// name of its own).
    pub fn bind_import(&mut self, name: &'static str, id: ClFuncId) {
        self.imports.insert(name, id);
    }

    /// The runtime's table `symbol` (`rt::EXP_TABLE_SYMBOL`,
    /// `rt::LOG_TABLE_SYMBOL`), imported as read-only data.
    fn table(&mut self, symbol: &'static str) -> Result<cranelift_module::DataId, CodegenError> {
        if let Some(&id) = self.tables.get(symbol) {
            return Ok(id);
        }
        let id = self
            .backend
            .declare_data(symbol, Linkage::Import, false, false)
            .map_err(CodegenError::backend)?;
        self.tables.insert(symbol, id);
        Ok(id)
    }

    /// Whether some declared function is not defined yet.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// `irad.tape_grow(ctx, tape, size, site)`: calls `irad_rt_tape_grow`
    /// and leaves its failure in the context. It preserves every register
    /// (Cranelift's `preserve_all` convention), so the cold path that grows
    /// a tape does not make the hot path around it spill its values.
    pub fn grow_helper(&mut self) -> Result<ClFuncId, CodegenError> {
        if let Some(id) = self.grow {
            return Ok(id);
        }
        let mut sig = Signature::new(CallConv::PreserveAll);
        sig.params.extend([AbiParam::new(types::I64); 4]);
        let name = format!("{}.tape_grow", self.prefix);
        let id = self
            .backend
            .declare_function(&name, Linkage::Local, &sig)
            .map_err(CodegenError::backend)?;
        let rt_grow = self.import(RtSym::TapeGrow.name(), &[types::I64; 4], &[types::I64])?;
        let mut ctx = self.backend.make_context();
        ctx.func.signature = sig;
        let mut fctx = FunctionBuilderContext::new();
        {
            let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
            let entry = b.create_block();
            b.append_block_params_for_function_params(entry);
            b.switch_to_block(entry);
            let params = b.block_params(entry).to_vec();
            let callee = self.backend.declare_func_in_func(rt_grow, b.func);
            b.ins().call(callee, &params);
            b.ins().return_(&[]);
            b.seal_all_blocks();
            b.finalize(self.backend.isa().frontend_config());
        }
        self.backend
            .define_function(id, &mut ctx)
            .map_err(|e| CodegenError::backend_in(e, &name))?;
        self.grow = Some(id);
        Ok(id)
    }

    /// Defines every declared function not yet defined (and whatever they in
    /// turn declare). `self.defined` lists them afterwards.
    ///
    /// A function that fails to lower stays pending, with those not reached
    /// yet: functions defined before it may call it, so the backend must not
    /// finalize their code without it (the JIT would panic resolving the
    /// call). Every later call fails the same way, never with a panic.
    ///
    /// Huge functions compile on threads of their own while the next are
    /// lowered (`lower/parallel.rs`); all are defined in the backend, in
    /// the order they were lowered, before this returns. An error of an
    /// earlier function comes first, as when each is compiled in turn.
    pub fn define_pending(&mut self, module: &Module) -> Result<(), CodegenError> {
        self.defined.clear();
        let lowered = self.lower_pending(module);
        let flushed = self.flush();
        flushed.and(lowered)
    }

    /// Lowers (and compiles or queues) every pending function.
    fn lower_pending(&mut self, module: &Module) -> Result<(), CodegenError> {
        while let Some(f) = self.pending.pop() {
            if let Err(e) = self.define(module, f) {
                self.pending.push(f);
                return Err(e);
            }
            if self.tape_types.len() > rt::MAX_TAPES {
                return Err(CodegenError::internal(format!(
                    "more than {} tapes (distinct types pushed)",
                    rt::MAX_TAPES
                )));
            }
            if self.queued.is_empty() {
                self.defined.push(f);
            }
        }
        Ok(())
    }

    /// `f` with its small non-recursive callees inlined (docs/codegen.md,
    /// "Inlining"), or `None` when inlining is off or finds no call. Only
    /// callees that verify are inlined: a callee that does not is compiled
    /// (and refused) as a function of its own, as without inlining.
    fn inlined(&mut self, module: &Module, f: FuncId) -> Option<Inlined> {
        // The limits the freeing analysis summarised with, pinned at the
        // first function compiled (`release::Summaries::pin_inline`).
        let limits = self.summaries.pin_inline(&self.inline)?;
        inlined_with(module, f, &limits, &mut self.recursive)
    }

    /// Lowers `f` and defines it in the backend.
    fn define(&mut self, module: &Module, f: FuncRef) -> Result<(), CodegenError> {
        time(Stage::Codegen, || self.define_untimed(module, f))
    }

    fn define_untimed(&mut self, module: &Module, f: FuncRef) -> Result<(), CodegenError> {
        // Lowering assumes what the verifier checks (operand types, SSA
        // dominance, phi entries): refuse anything else with its error.
        if let FuncRef::User(fid) = f
            && let Err(errors) = irad_ir::verify::verify_func(module, fid)
            && let Some(e) = errors.into_iter().next()
        {
            return Err(CodegenError {
                loc: e.loc,
                msg: format!("cannot compile a function that does not verify: {}", e.msg),
            });
        }
        let inlined = match f {
            FuncRef::User(fid) => self.inlined(module, fid),
            FuncRef::Prim(_) => None,
        };
        if let (FuncRef::User(fid), Some(inl)) = (f, &inlined) {
            let mut bodies: Vec<FuncId> = inl.calls.iter().map(|c| c.callee).collect();
            bodies.sort_unstable();
            bodies.dedup();
            self.inlined_bodies.insert(fid, bodies);
        }
        // Tuples holding arrays carried through loops split into a phi per
        // field on the same copy (docs/codegen.md, "Tuples holding arrays").
        let inlined = match f {
            FuncRef::User(fid) => match module.get(fid) {
                Some(func) => split_tuples(func, inlined)?,
                None => inlined,
            },
            FuncRef::Prim(_) => inlined,
        };
        // Loop fusion works on the same copy, before versioning (which then
        // takes a fused loop as one).
        let inlined = match f {
            FuncRef::User(fid) if self.fuse_loops => match module.get(fid) {
                Some(func) => fuse::fuse(func, inlined).0,
                None => inlined,
            },
            _ => inlined,
        };
        // Loop versioning works on the same copy; the accesses of its
        // unchecked loops join those `bounds.rs` proves in range.
        let (inlined, unchecked) = match f {
            FuncRef::User(fid) if self.version_loops => match module.get(fid) {
                Some(func) => version::version(func, inlined),
                None => (inlined, rustc_hash::FxHashSet::default()),
            },
            _ => (inlined, rustc_hash::FxHashSet::default()),
        };
        let id = self.funcs[&f];
        let sig = self
            .signature(&Self::fn_type_of(module, f)?, &name_of(module, f))
            .map_err(|msg| match f {
                FuncRef::User(id) => match module.get(id) {
                    Some(func) => CodegenError::at(func, None, &msg),
                    None => CodegenError::internal(msg),
                },
                FuncRef::Prim(_) => CodegenError::internal(msg),
            })?;
        self.ctx.clear();
        self.ctx.func.signature = sig;
        let mut ctx = std::mem::replace(&mut self.ctx, Context::new());
        let mut fctx = std::mem::take(&mut self.fctx);
        let res = {
            let b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
            let mut lower = Lower {
                c: self,
                b,
                module,
                ctx_val: None,
                inl: inlined.as_ref(),
                fname: Arc::from(""),
                ret_err: ErrReturns::default(),
                cur_frame: None,
                frame_rets: HashMap::default(),
                frame_rets_unfilled: Vec::new(),
                ret_leaves: crate::layout::LeafList::new(),
                vals: Vec::new(),
                fimports: HashMap::default(),
                table_gvs: HashMap::default(),
                prechecked: None,
                seg_tops: HashMap::default(),
                movable_pops: false,
                checked: rustc_hash::FxHashSet::default(),
                in_range: unchecked,
                cur_in_range: false,
                vector: HashMap::default(),
                known: HashMap::default(),
                layout_next: SecondaryMap::new(),
                loop_depth: SecondaryMap::new(),
                fl_ctx: TRUSTED,
                fl_tape: MemFlagsData::new().with_notrap(),
                fl_array: TRUSTED,
                freed: Vec::new(),
                latch: rustc_hash::FxHashMap::default(),
                at_return: rustc_hash::FxHashSet::default(),
                either: rustc_hash::FxHashSet::default(),
                counting: rustc_hash::FxHashMap::default(),
                web_entered: rustc_hash::FxHashMap::default(),
                web_phi_entered: rustc_hash::FxHashMap::default(),
                web_webs: rustc_hash::FxHashMap::default(),
                either_results: rustc_hash::FxHashMap::default(),
                chains: Vec::new(),
                entered: rustc_hash::FxHashMap::default(),
                webs: Vec::new(),
                through: rustc_hash::FxHashMap::default(),
                web_sites: rustc_hash::FxHashMap::default(),
                counted_pushes: rustc_hash::FxHashMap::default(),
                popped_words: rustc_hash::FxHashMap::default(),
                tagged_args: rustc_hash::FxHashMap::default(),
                param_words: rustc_hash::FxHashMap::default(),
            };
            lower.alias_regions();
            let r = match f {
                FuncRef::User(fid) => lower.user_function(fid),
                FuncRef::Prim(p) => lower.prim_wrapper(p),
            };
            // A lowering that failed half-way leaves blocks without a
            // terminator, which `finalize` refuses with a panic: the
            // builder is dropped unfinished instead.
            if r.is_ok() {
                let fc = lower.c.backend.isa().frontend_config();
                lower.b.seal_all_blocks();
                lower.b.finalize(fc);
            }
            r
        };

        if res.is_ok() {
            thread::thread_jumps(&mut ctx.func);
        }
        // `finalize` empties the builder context; after a failure it
        // still holds the half-built function, so the next starts afresh.
        self.fctx = if res.is_ok() {
            fctx
        } else {
            FunctionBuilderContext::new()
        };
        let name = name_of(module, f);
        let mut ctx = match res {
            Ok(()) => match self.queue(f, id, &name, ctx) {
                Some(ctx) => ctx,
                None => {
                    // Queued: the next function gets a context of its own.
                    self.ctx = Context::new();
                    return Ok(());
                }
            },
            Err(_) => ctx,
        };
        let res = res.and_then(|()| {
            time(Stage::Cranelift, || {
                self.define_sized(&name, id, &mut ctx)
                    .map_err(|e| CodegenError::backend_in(e, &name))
            })
        });
        if let (Ok(()), Some(log)) = (&res, &mut self.clif) {
            // `define_function` optimised and compiled `ctx.func` in place.
            log.push((name_of(module, f), ctx.func.clone()));
        }
        ctx.clear();
        self.ctx = ctx;
        res
    }
}

impl<M: ClModule> Compiler<M> {
    /// Compiles `ctx.func` and defines it as `id`: with the backend's own
    /// settings, or, for a function of at least [`HUGE_FUNCTION_INSTS`]
    /// Cranelift instructions or with many values live at once
    /// ([`needs_huge_settings`]), with those of [`huge_isa`] (then defined
    /// from its bytes and relocations, as the backend itself would).
    /// With [`Compiler::shapes`] on, records the function's shape first
    /// under `name`.
    pub(crate) fn define_sized(
        &mut self,
        name: &str,
        id: ClFuncId,
        ctx: &mut Context,
    ) -> Result<(), Box<ModuleError>> {
        let huge = needs_huge_settings(&ctx.func);
        if let Some(shapes) = &mut self.shapes {
            shapes.push(crate::shape::shape(name, &ctx.func, huge));
        }
        if !huge {
            return Ok(self.backend.define_function(id, ctx)?);
        }
        let Some(isa) = self.huge_isa_made() else {
            // No such settings on this target: the backend's own.
            return Ok(self.backend.define_function(id, ctx)?);
        };
        let code = parallel::compile(&isa, id, ctx)?;
        Ok(self
            .backend
            .define_function_bytes(id, code.align, &code.bytes, &code.relocs)?)
    }
}

/// The size, in Cranelift instructions, from which a function is compiled
/// with the settings of `huge_isa`: the backtracking register allocator
/// and the e-graph optimiser cost time more than linear in a function's
/// size (a 100 000-step chain's 800 000-instruction forward sweep took 3.7 s
/// in Cranelift with them, 1.4 s without), while a function this large
/// gains little from them. Smaller functions, loops' bodies included, keep
/// the backend's settings. (At 20 000, the pullback parts of the
/// 10 000-step chain's gradient, 17 542 instructions each, took 23-33 ms
/// each with the backend's settings and 9-11 ms with these.)
pub const HUGE_FUNCTION_INSTS: usize = 10_000;

/// The number of values live at once from which a function is compiled
/// with the settings of `huge_isa`, whatever its size: the backtracking
/// register allocator's time grows with the square of the values live at
/// once where there are many (issue 27, finding 8: a function of 10 000
/// f64 parameters took 5 s to compile, of 35 000 41 s, and so did the
/// trampoline that loads them all before its call; 1 000 take 0.05 s).
pub const WIDE_LIVE_VALUES: usize = 1_024;

/// Whether `func` is compiled with the settings of [`huge_isa`]: it has
/// at least [`HUGE_FUNCTION_INSTS`] instructions, or at some point at
/// least [`WIDE_LIVE_VALUES`] values live (measured only when it has that
/// many values: the measure is a pass over the function).
fn needs_huge_settings(func: &ir::Function) -> bool {
    func.dfg.num_insts() >= HUGE_FUNCTION_INSTS
        || (func.dfg.num_values() >= WIDE_LIVE_VALUES
            && crate::shape::most_live(func) >= WIDE_LIVE_VALUES)
}

/// The backend ISA `isa` with the settings of huge functions: Cranelift's
/// single-pass register allocator (`regalloc_algorithm=single_pass`, linear
/// in the function's size) and no e-graph optimisation (`opt_level=none`);
/// every other setting, shared or of the target, as `isa` has it. `None`
/// when the target cannot be rebuilt so.
fn huge_isa(isa: &dyn TargetIsa) -> Option<OwnedTargetIsa> {
    let mut shared = settings::builder();
    for v in isa.flags().iter() {
        shared.set(v.name, &v.value_string()).ok()?;
    }
    shared.set("regalloc_algorithm", "single_pass").ok()?;
    shared.set("opt_level", "none").ok()?;
    let mut target = cranelift_codegen::isa::lookup(isa.triple().clone()).ok()?;
    for v in isa.isa_flags() {
        target.set(v.name, &v.value_string()).ok()?;
    }
    target.finish(settings::Flags::new(shared)).ok()
}

/// The most scalar parameters, or results, of a compiled signature (the
/// context and the status included). Cranelift's ABI code numbers
/// arguments in 16 bits and panics past that (issue 27, finding 1), so
/// larger signatures are a located error; the margin leaves room for the
/// hidden arguments it adds.
pub const MAX_SIGNATURE_LEAVES: usize = 60_000;

fn name_of(module: &Module, f: FuncRef) -> String {
    match f {
        FuncRef::User(id) => module
            .get(id)
            .map_or(String::new(), |f| format!("@{}", f.name)),
        FuncRef::Prim(p) => format!("@{p}"),
    }
}

/// How many failing checks share one error return block. One block for all
/// of a function's checks has thousands of predecessors along a long
/// dominator chain, on which regalloc2's dominator computation (and
/// Cranelift's) spends time quadratic in the number of checks: a gradient
/// with 10 000 sequential branches took 6 s to compile, most of it there.
const ERR_RET_SHARING: usize = 16;

/// Error return blocks (cold), made on need, each jumped to by at most
/// [`ERR_RET_SHARING`] checks; the lowering fills them at the end.
#[derive(Default)]
struct ErrReturns {
    blocks: Vec<ir::Block>,
    uses: usize,
}

impl ErrReturns {
    /// The block for one more check, and whether it is new.
    fn next(&mut self, b: &mut FunctionBuilder<'_>) -> (ir::Block, bool) {
        let shared = !self.uses.is_multiple_of(ERR_RET_SHARING);
        self.uses += 1;
        match self.blocks.last() {
            Some(&blk) if shared => (blk, false),
            _ => {
                let blk = b.create_block();
                b.set_cold_block(blk);
                self.blocks.push(blk);
                (blk, true)
            }
        }
    }
}

/// The translation of one function.
struct Lower<'a, 'b, M: ClModule> {
    c: &'a mut Compiler<M>,
    b: FunctionBuilder<'b>,
    module: &'a Module,
    ctx_val: Option<ir::Value>,
    /// The function with its calls inlined (`Compiler::inline`), lowered
    /// in place of the module's, with where its statements stood before.
    inl: Option<&'a Inlined>,
    /// The name of the function being lowered, shared by the locations of
    /// its check sites ([`Lower::loc`]).
    fname: Arc<str>,
    /// The blocks that return status 1, made on need, each shared by at most
    /// [`ERR_RET_SHARING`] failing checks.
    ret_err: ErrReturns,
    /// The inlined call whose body the block being lowered belongs to
    /// (an index into `Inlined::calls`), `None` in the function's own.
    cur_frame: Option<usize>,
    /// For each inlined call, the blocks that record its call site in the
    /// trace (as its frame's caller would) and go on to the next outer
    /// one, or to `ret_err`: the error returns of code in its body.
    frame_rets: HashMap<usize, ErrReturns>,
    /// The blocks of `frame_rets` not filled yet, with their inlined call.
    frame_rets_unfilled: Vec<(usize, ir::Block)>,
    ret_leaves: crate::layout::LeafList,
    /// The leaves of every IR value lowered so far, by value number.
    vals: Vec<Option<Leaves>>,
    /// Functions referenced from this function.
    fimports: HashMap<ClFuncId, ir::FuncRef>,
    /// The runtime tables' addresses in this function, once needed.
    table_gvs: HashMap<&'static str, ir::GlobalValue>,
    /// Set while lowering a `push` or `pop` whose room or contents were
    /// checked at the start of its segment: its tape and the byte offset of
    /// its value from the tape's top at the segment start.
    prechecked: Option<(u32, i64)>,
    /// The top of each tape at the start of the current segment, for the
    /// tapes whose pushes (or pops) the segment moved the top over at once.
    seg_tops: HashMap<u32, ir::Value>,
    /// Whether popped values may be loaded where they are first used rather
    /// than at the `pop`: true in functions that neither push nor call, where
    /// nothing can overwrite or free the popped bytes while the function
    /// runs. Without it, the optimiser keeps every load of a long pullback in
    /// place and moves the arithmetic that uses them to the end, so all
    /// popped values stay live at once (slow register allocation, spills).
    movable_pops: bool,
    /// Index and length pairs checked in the current block.
    checked: rustc_hash::FxHashSet<(ir::Value, ir::Value)>,
    /// The accesses of the function whose index is proven in range
    /// (`lower/bounds.rs`): they get no bounds check.
    in_range: rustc_hash::FxHashSet<irad_ir::Inst>,
    /// Whether the statement being lowered is one of those.
    cur_in_range: bool,
    /// The loops run two iterations at a time (`lower/vector.rs`), by the
    /// block that enters each.
    vector: HashMap<Block, vector::Plan>,
    /// Array elements (address, index) known in the current block: loaded or
    /// just stored.
    known: HashMap<(ir::Value, ir::Value), ir::Value>,
    /// The block after each block in the layout of the function lowered
    /// (where `gotoifnot` falls through), looked up in constant time.
    layout_next: SecondaryMap<Block, Option<Block>>,
    /// How many loops hold each block (`Lower::two_way`).
    loop_depth: SecondaryMap<Block, u32>,
    /// Flags of the context's fields and the tape records (one alias region).
    fl_ctx: MemFlagsData,
    /// Flags of the bytes on tapes (their own alias region).
    fl_tape: MemFlagsData,
    /// Flags of array elements (their own alias region): stores to tapes or
    /// to the context cannot change them, so the optimiser may reuse loads.
    fl_array: MemFlagsData,
    /// The array-making statements whose arrays this function frees
    /// (`lower/release.rs`), each with the stack slot holding the array it
    /// made last (null before it runs).
    freed: Vec<(Value, ir::StackSlot, release::Letgo)>,
    /// The latch-owning phis among `freed`, each with the operand it is
    /// entered with from outside its loop and whether its arrays may leave
    /// the loop (`lower/release.rs`).
    latch: rustc_hash::FxHashMap<Value, (Operand, bool)>,
    /// The latch-owning phis among `latch` whose arrays may leave their
    /// loops only into phis that count their pushes: each lets go of its
    /// slot's array at a normal return (`release::Freed::at_return`).
    at_return: rustc_hash::FxHashSet<Value>,
    /// The latch-owning phis among `latch` whose latches bring what calls
    /// of either functions return (`release::Freed::either`): entered from
    /// a latch, each lets go of its slot's array only when the call
    /// returned another.
    either: rustc_hash::FxHashSet<Value>,
    /// The phis whose every push is counted while they hold no array of
    /// the parameters listed (`release::Freed::counting`).
    counting: rustc_hash::FxHashMap<Value, Vec<Value>>,
    /// The phis of sharing webs, and the `select`s they are entered
    /// through, each with the dropped pops and released sites they may
    /// hold from outside (`release::Freed::web_entered`).
    web_entered: rustc_hash::FxHashMap<Value, Vec<Value>>,
    /// The latch-owning phis entered with a sharing web's phi, each with
    /// that phi (`release::Freed::web_phi_entered`).
    web_phi_entered: rustc_hash::FxHashMap<Value, Value>,
    /// The phis of sharing webs entered with other webs' phis, each with
    /// those (`release::Freed::web_webs`).
    web_webs: rustc_hash::FxHashMap<Value, Vec<Value>>,
    /// The results of calls handed over to those phis, each with its phi
    /// (`release::Freed::either_results`): a push of one counts a
    /// reference unless it pushes the array the phi was entered with.
    either_results: rustc_hash::FxHashMap<Value, Value>,
    /// The handing chains (`release::Freed::chains`), which let go as a
    /// whole when their header is entered.
    chains: Vec<release::Chain>,
    /// The latch-owning phis entered with a site's array, whose every push
    /// is counted (`release::Freed::entered`).
    entered: rustc_hash::FxHashMap<Value, Value>,
    /// The choosing phis among `latch` (`release::Freed::webs`), which let
    /// go on the edges into their headers ([`Lower::choosing_edge`]).
    webs: Vec<release::Web>,
    /// The latch-owning phis entered through a `select` of a site's array
    /// and another array, with that other (`release::Freed::through`).
    through: rustc_hash::FxHashMap<Value, Operand>,
    /// The sites of their webs, each with its web's phi.
    web_sites: rustc_hash::FxHashMap<Value, Value>,
    /// The pushes that count the tape's references to the arrays they push
    /// (`release::counted_pushes`).
    counted_pushes: rustc_hash::FxHashMap<irad_ir::Inst, release::Letgo>,
    /// The word each `Drop` pop read from its tape, tag included.
    popped_words: rustc_hash::FxHashMap<Value, ir::Value>,
    /// The `invoke` arguments passed as the word a push of them would push
    /// (`release::tagged_args`), by statement, with their positions.
    tagged_args: rustc_hash::FxHashMap<irad_ir::Inst, Vec<(usize, release::Letgo)>>,
    /// The parameters the function only pushes as they are, each with the
    /// word it was passed (perhaps tagged, `lower/release.rs`, "Pushed
    /// parameters"): every other use sees the address, bit cleared.
    param_words: rustc_hash::FxHashMap<Value, ir::Value>,
}

const TRUSTED: MemFlagsData = MemFlagsData::trusted();

impl<M: ClModule> Lower<'_, '_, M> {
    fn ctx(&self) -> ir::Value {
        self.ctx_val.expect("context parameter bound at entry")
    }

    fn fref(&mut self, id: ClFuncId) -> ir::FuncRef {
        if let Some(&r) = self.fimports.get(&id) {
            return r;
        }
        let r = self.c.backend.declare_func_in_func(id, self.b.func);
        self.fimports.insert(id, r);
        r
    }

    /// Calls the runtime function `sym`.
    /// The address of the runtime's table `symbol` in this function.
    fn table_gv(&mut self, symbol: &'static str) -> Result<ir::GlobalValue, CodegenError> {
        if let Some(&gv) = self.table_gvs.get(symbol) {
            return Ok(gv);
        }
        let id = self.c.table(symbol)?;
        let gv = self.c.backend.declare_data_in_func(id, self.b.func);
        self.table_gvs.insert(symbol, gv);
        Ok(gv)
    }

    fn call_rt(
        &mut self,
        sym: RtSym,
        params: &[types::Type],
        rets: &[types::Type],
        args: &[ir::Value],
    ) -> Result<SmallVec<[ir::Value; 2]>, CodegenError> {
        self.call_import(sym.name(), params, rets, args)
    }

    /// Calls the function imported as `name`: a runtime function (through
    /// [`Lower::call_rt`]) or the rule function [`RULE_FN`].
    fn call_import(
        &mut self,
        name: &'static str,
        params: &[types::Type],
        rets: &[types::Type],
        args: &[ir::Value],
    ) -> Result<SmallVec<[ir::Value; 2]>, CodegenError> {
        let id = self.c.import(name, params, rets)?;
        let r = self.fref(id);
        let call = self.b.ins().call(r, args);
        Ok(self.b.inst_results(call).iter().copied().collect())
    }

    /// The block returning status 1 (the error is already in the context)
    /// from the block being lowered: in inlined code, through the blocks
    /// that trace the inlined calls around it (innermost first).
    fn ret_err(&mut self) -> ir::Block {
        match self.cur_frame {
            Some(k) => self.frame_ret(k),
            None => self.ret_err.next(&mut self.b).0,
        }
    }

    /// An error return of the body of inlined call `k` (made on need,
    /// filled by [`Lower::fill_ret_err`]).
    fn frame_ret(&mut self, k: usize) -> ir::Block {
        let (blk, new) = self.frame_rets.entry(k).or_default().next(&mut self.b);
        if new {
            self.frame_rets_unfilled.push((k, blk));
        }
        blk
    }

    /// Starts a function without error returns; those made later are
    /// filled by [`Lower::fill_ret_err`] once its own blocks are done.
    fn make_ret_err(&mut self) {
        self.ret_err = ErrReturns::default();
    }

    fn fill_ret_err(&mut self) -> Result<(), CodegenError> {
        self.fill_frame_rets()?;
        for blk in std::mem::take(&mut self.ret_err.blocks) {
            self.b.switch_to_block(blk);
            let mut rets = vec![self.b.ins().iconst(types::I8, 1)];
            for leaf in self.ret_leaves.clone() {
                rets.push(self.zero(leaf));
            }
            self.b.ins().return_(&rets);
        }
        Ok(())
    }

    /// Fills the error return of every inlined call's body that some code
    /// uses: `irad_rt_trace` of the inlined call's site, as the caller of
    /// its frame would record it, then the next outer one's error return.
    fn fill_frame_rets(&mut self) -> Result<(), CodegenError> {
        let Some(inl) = self.inl else {
            return Ok(());
        };
        // Filling one may make an error return of an outer call.
        while let Some((k, blk)) = self.frame_rets_unfilled.pop() {
            let call = inl
                .calls
                .get(k)
                .ok_or_else(|| CodegenError::internal(format!("no inlined call {k}")))?;
            let loc = Location {
                func: Some(call.place.func.clone()),
                block: Some(call.place.block),
                stmt: Some(call.place.stmt),
                pos: call.pos,
            };
            let site = self.c.site(loc, None);
            self.b.switch_to_block(blk);
            let ctx = self.ctx();
            let s = self.b.ins().iconst(types::I64, site);
            self.call_rt(RtSym::Trace, &[types::I64, types::I64], &[], &[ctx, s])?;
            let next = match call.outer {
                Some(outer) => self.frame_ret(outer),
                None => self.ret_err.next(&mut self.b).0,
            };
            self.b.ins().jump(next, &[]);
        }
        self.frame_rets.clear();
        Ok(())
    }

    /// Gives the context, the tapes and the arrays an alias region each.
    fn alias_regions(&mut self) {
        let mut region = |user_id: u32, description: &'static str| {
            Some(self.b.func.dfg.alias_regions.insert(ir::AliasRegionData {
                user_id,
                description: description.into(),
            }))
        };
        let (ctx, tape, array) = (region(1, "ctx"), region(2, "tape"), region(3, "array"));
        self.fl_ctx = self.fl_ctx.with_alias_region(ctx);
        self.fl_tape = self.fl_tape.with_alias_region(tape);
        self.fl_array = self.fl_array.with_alias_region(array);
    }

    /// An i64 field at `off` from `p` (the context, a tape record).
    fn load64(&mut self, p: ir::Value, off: i32) -> ir::Value {
        self.b.ins().load(types::I64, self.fl_ctx, p, off)
    }

    fn zero(&mut self, leaf: types::Type) -> ir::Value {
        if leaf == types::F64 {
            self.b.ins().f64const(0.0)
        } else {
            self.b.ins().iconst(leaf, 0)
        }
    }

    /// Branches on `cond` to a new cold block and continues lowering there;
    /// returns the block where the hot path goes on (the caller ends the
    /// cold block and switches to it).
    ///
    /// The hot path is the branch's first successor (the condition is
    /// negated): Cranelift orders blocks in the reverse postorder of a
    /// depth-first walk that enters the first successor first, so the cold
    /// block then comes right after its branch. As the second successor it
    /// came after everything the hot path reaches, often the rest of the
    /// function, and every value it uses (a switch index, a tape's fill)
    /// was live from its definition to there: in a function with
    /// thousands of checks, thousands of values live at once, on which
    /// regalloc2 spends time quadratic in the checks (issue 27, finding
    /// 7: 10 000 sequential branches).
    fn cold_path(&mut self, cond: ir::Value) -> ir::Block {
        let cold = self.b.create_block();
        let cont = self.b.create_block();
        self.b.set_cold_block(cold);
        let hot = self.negate(cond);
        self.b.ins().brif(hot, cont, &[], cold, &[]);
        self.b.switch_to_block(cold);
        cont
    }

    /// Branches to an error return when `cond` is true, after storing the
    /// error kind, site and operands; continues in a new block otherwise.
    fn fail_if(
        &mut self,
        cond: ir::Value,
        kind: TrapKind,
        site: i64,
        a: Option<ir::Value>,
        b: Option<ir::Value>,
    ) {
        let cont = self.cold_path(cond);
        let ctx = self.ctx();
        let k = self.b.ins().iconst(types::I64, kind.code());
        self.b.ins().store(self.fl_ctx, k, ctx, rt::OFF_ERR_KIND);
        let s = self.b.ins().iconst(types::I64, site);
        self.b.ins().store(self.fl_ctx, s, ctx, rt::OFF_ERR_SITE);
        for (v, off) in [(a, rt::OFF_ERR_A), (b, rt::OFF_ERR_B)] {
            let v = match v {
                Some(v) => v,
                None => self.b.ins().iconst(types::I64, 0),
            };
            self.b.ins().store(self.fl_ctx, v, ctx, off);
        }
        let ret = self.ret_err();
        self.b.ins().jump(ret, &[]);
        self.b.switch_to_block(cont);
    }

    /// Returns status 1 when `cond` is true (the error is already recorded).
    fn propagate_if(&mut self, cond: ir::Value) {
        let ret = self.ret_err();
        let cont = self.b.create_block();
        self.b.ins().brif(cond, ret, &[], cont, &[]);
        self.b.switch_to_block(cont);
    }

    fn const_leaves(&mut self, c: &Const) -> Result<Leaves, CodegenError> {
        Ok(match c {
            Const::F64(x) => smallvec::smallvec![self.b.ins().f64const(*x)],
            Const::I64(n) => smallvec::smallvec![self.b.ins().iconst(types::I64, *n)],
            Const::Bool(v) => smallvec::smallvec![self.b.ins().iconst(types::I8, i64::from(*v))],
            Const::Unit => SmallVec::new(),
            Const::Func(f) => {
                let h = self.c.handle(self.module, *f)?;
                smallvec::smallvec![self.b.ins().iconst(types::I64, i64::from(h))]
            }
        })
    }

    fn operand(&mut self, op: &Operand) -> Result<Leaves, CodegenError> {
        match op {
            // `from_slice` copies the leaves at once; `clone` pushes them
            // one by one (a tenth of this function's time).
            Operand::Value(v) => self
                .vals
                .get(v.index())
                .and_then(Option::as_ref)
                .map(|l| Leaves::from_slice(l))
                .ok_or_else(|| {
                    CodegenError::internal(format!("value {v:?} used before its definition"))
                }),
            Operand::Const(c) => self.const_leaves(c),
        }
    }

    fn set(&mut self, v: Value, leaves: Leaves) {
        if self.vals.len() <= v.index() {
            self.vals.resize(v.index() + 1, None);
        }
        self.vals[v.index()] = Some(leaves);
    }

    /// A function of the module.
    fn user_function(&mut self, fid: FuncId) -> Result<(), CodegenError> {
        let module = self.module;
        let func = match self.inl {
            Some(inl) => &inl.func,
            None => module
                .get(fid)
                .ok_or_else(|| CodegenError::internal(format!("no function {fid:?}")))?,
        };
        self.ret_leaves = leaf_list(&func.ret);
        self.fname = func.name.as_str().into();
        // Every value's leaves, by value number: room for all at once.
        self.vals.clear();
        self.vals.resize(func.values.len(), None);
        self.in_range.extend(bounds::in_range(func));
        self.vector = vector::plans(func, &self.in_range, self.c.vectorise);
        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.make_ret_err();
        self.b.switch_to_block(entry);
        let params: Vec<ir::Value> = self.b.block_params(entry).to_vec();
        self.ctx_val = Some(params[0]);
        let mut next = 1;
        for &p in &func.params {
            let n = leaf_count(&func.values[p].ty);
            let leaves: Leaves = params[next..next + n].iter().copied().collect();
            next += n;
            self.set(p, leaves);
        }
        self.mask_pushed_params(fid, func)?;
        let Some(first) = func.entry() else {
            return Err(CodegenError::at(func, None, "function has no blocks"));
        };
        self.movable_pops = !func.insts.values().any(|d| {
            matches!(
                d.kind,
                InstKind::Invoke { .. }
                    | InstKind::CallValue { .. }
                    | InstKind::Prim {
                        prim: Prim::Push,
                        ..
                    }
            )
        });
        self.depth_check();
        self.freed_slots(func);
        let cfg = ControlFlowGraph::with_function(func);
        let order = cfg.reverse_postorder();
        self.layout_next = SecondaryMap::new();
        for pair in func.layout.windows(2) {
            self.layout_next.set(pair[0], Some(pair[1]));
        }
        self.loop_depth = SecondaryMap::new();
        if func.layout.iter().any(|&b| {
            matches!(
                func.blocks[b].term,
                Some(Terminator::GotoIfNot { .. } | Terminator::Switch { .. })
            )
        }) {
            let dom = irad_ir::flow::DominatorTree::with_cfg(&cfg);
            let loops = irad_ir::flow::LoopAnalysis::compute(&cfg, &dom);
            for &b in &order {
                self.loop_depth.set(b, loops.loop_depth(b));
            }
        }
        let mut cl_blocks: HashMap<Block, ir::Block> = HashMap::default();
        for &blk in &order {
            let cb = self.b.create_block();
            cl_blocks.insert(blk, cb);
            for &inst in &func.blocks[blk].insts {
                let data = &func.insts[inst];
                if let InstKind::Phi { .. } = data.kind {
                    if blk == first {
                        return Err(CodegenError::at(
                            func,
                            Some(blk),
                            "the entry block has a phi",
                        ));
                    }
                    let Some(res) = data.result else { continue };
                    let leaves: Leaves = leaf_list(&func.values[res].ty)
                        .into_iter()
                        .map(|leaf| self.b.append_block_param(cb, leaf))
                        .collect();
                    self.set(res, leaves);
                }
            }
        }
        self.b.ins().jump(cl_blocks[&first], &[]);
        for &blk in &order {
            self.b.switch_to_block(cl_blocks[&blk]);
            self.block(func, blk, &cl_blocks)?;
        }
        self.fill_ret_err()
    }

    /// The location of statement `stmt` (from 0; the terminator when past
    /// the last) of block `blk`: where it stood before inlining when
    /// `inl` knows (the callee's name, block and statement), else where
    /// it is in `func`.
    ///
    /// `fname` is `func`'s name, made once per function (`Lower::fname`):
    /// a location is made for every check site, and its name is shared.
    fn loc(
        inl: Option<&Inlined>,
        fname: &Arc<str>,
        func: &Func,
        blk: Block,
        stmt: usize,
    ) -> Location {
        let data = &func.blocks[blk];
        let (pos, place) = match data.insts.get(stmt) {
            Some(&inst) => (
                func.insts[inst].pos,
                inl.and_then(|i| i.insts[inst].as_ref()),
            ),
            None => (data.term_pos, inl.and_then(|i| i.terms[blk].as_ref())),
        };
        match place {
            Some(p) => Location {
                func: Some(p.func.clone()),
                block: Some(p.block),
                stmt: Some(p.stmt),
                pos,
            },
            None => Location {
                func: Some(if **fname == *func.name {
                    Arc::clone(fname)
                } else {
                    func.name.as_str().into()
                }),
                block: Some(data.label),
                stmt: Some(stmt as u32 + 1),
                pos,
            },
        }
    }

    fn block(
        &mut self,
        func: &Func,
        blk: Block,
        cl_blocks: &HashMap<Block, ir::Block>,
    ) -> Result<(), CodegenError> {
        let data = &func.blocks[blk];
        let inl = self.inl;
        let fname = Arc::clone(&self.fname);
        self.checked.clear();
        self.known.clear();
        self.cur_frame = inl.and_then(|i| i.frames[blk]);
        if let Some(i) = inl
            && i.entries.contains(blk)
        {
            self.inlined_depth_check(i.depth(blk));
        }
        self.enter_owning_phis(func, &data.insts)?;
        let mut plan = self.tape_plan(func, blk);
        let unit = Type::Unit;
        for (i, &inst) in data.insts.iter().enumerate() {
            let idata = &func.insts[inst];
            let site_loc = || Self::loc(inl, &fname, func, blk, i);
            if let Some(checks) = plan.checks.remove(&i) {
                self.tape_checks(checks)?;
            }
            self.prechecked = plan.prechecked.get(&i).copied();
            self.cur_in_range = self.in_range.contains(&inst);
            let out = match &idata.kind {
                InstKind::Phi { .. } => continue,
                InstKind::Prim { prim, args } => {
                    // Inline: once per statement of every compiled function.
                    let mut vals: SmallVec<[Leaves; 4]> = SmallVec::with_capacity(args.len());
                    let mut tys: SmallVec<[Type; 4]> = SmallVec::with_capacity(args.len());
                    for a in args {
                        vals.push(self.operand(a)?);
                        tys.push(func.operand_type(a, self.module).ok_or_else(|| {
                            CodegenError::at(func, Some(blk), "an operand has no type")
                        })?);
                    }
                    let ret = idata.result.map_or(&unit, |r| &func.values[r].ty);
                    let slot = idata.result.and_then(|r| self.freed_slot(r));
                    if let Some(slot) = slot {
                        self.free_slot(slot)?;
                    }
                    if let Some(&letgo) = self.counted_pushes.get(&inst) {
                        self.count_push(func, args, letgo, &mut vals)?;
                    } else if *prim == Prim::Push
                        && let Some(Operand::Value(v)) = args.first()
                        && let Some(&word) = self.param_words.get(v)
                        && let Some(leaves) = vals.first_mut()
                        && let Some(p) = leaves.first_mut()
                    {
                        // A parameter pushed as it is pushes the word it
                        // was passed, counting a reference when tagged.
                        *p = word;
                        self.hold_if_tagged(word)?;
                    }
                    let mut out = self.prim(*prim, args, &vals, &tys, ret, &mut || site_loc())?;
                    let mut kept = out.first().copied();
                    if *prim == Prim::Pop
                        && matches!(ret, Type::Array(_))
                        && self.module.counted_tapes()
                        && let Some(w) = out.first_mut()
                    {
                        // A pushed array's word may be tagged (`count_push`):
                        // only in a module whose tapes are counted
                        // (`Module::counted_tapes`), set before its pieces are
                        // compiled (a piece that pushes is compiled no later
                        // than the one that pops what it pushed).
                        let word = *w;
                        *w = self.b.ins().band_imm_s(word, !1i64);
                        if let (Some(r), Some((_, release::Letgo::Drop))) = (idata.result, slot) {
                            self.popped_words.insert(r, word);
                            kept = Some(word);
                        }
                    }
                    if let (Some((slot, _)), Some(p)) = (slot, kept) {
                        self.b.ins().stack_store(types::I64, p, slot, 0);
                    }
                    out
                }
                InstKind::Invoke { func: callee, args } => {
                    let flat = self.invoke_args(func, inst, *callee, args)?;
                    let id = self.c.declare(self.module, FuncRef::User(*callee))?;
                    let r = self.fref(id);
                    let site = self.c.site(site_loc(), None);
                    // A call of a fresh `[T]` result is a site that makes
                    // arrays (`lower/release.rs`, "Fresh results"): it lets
                    // go of its last array before it runs again.
                    let slot = idata.result.and_then(|r| self.freed_slot(r));
                    if let Some(slot) = slot {
                        self.free_slot(slot)?;
                    }
                    let out = self.call(Callee::Direct(r), &flat, site)?;
                    if let (Some((slot, _)), Some(&p)) = (slot, out.first()) {
                        self.b.ins().stack_store(types::I64, p, slot, 0);
                    }
                    out
                }
                InstKind::CallValue { callee, args } => {
                    let Type::Func(sig) = &func.values[*callee].ty else {
                        return Err(CodegenError::at(
                            func,
                            Some(blk),
                            "call of a value that is not a function",
                        ));
                    };
                    let h = self.operand(&Operand::Value(*callee))?[0];
                    let mut flat: SmallVec<[ir::Value; 8]> = SmallVec::new();
                    for a in args {
                        flat.extend(self.operand(a)?);
                    }
                    let sig = self
                        .c
                        .signature(sig, "the function value called")
                        .map_err(|msg| CodegenError::at(func, Some(blk), &msg))?;
                    let sigref = self.b.import_signature(sig);
                    let site = self.c.site(site_loc(), None);
                    self.call(Callee::Indirect(sigref, h), &flat, site)?
                }
            };
            if let Some(res) = idata.result {
                self.set(res, out);
            }
        }
        let term_loc = || Self::loc(inl, &fname, func, blk, data.insts.len());
        let target = |b: &Block| {
            cl_blocks.get(b).copied().ok_or_else(|| {
                CodegenError::at(func, Some(blk), "jump to a block that is not reachable")
            })
        };
        match &data.term {
            None => return Err(CodegenError::at(func, Some(blk), "block has no terminator")),
            Some(Terminator::Goto(t)) => {
                let args = self.phi_args(func, blk, *t)?;
                self.choosing_edge(func, blk, *t)?;
                match self.vector.remove(&blk) {
                    Some(plan) => self.vector_loop(func, &plan, &args, target(t)?)?,
                    None => {
                        self.b.ins().jump(target(t)?, &args);
                    }
                }
            }
            Some(Terminator::GotoIfNot { cond, target: t }) => {
                let c = self.operand(cond)?[0];
                let next = self.layout_next[blk].ok_or_else(|| {
                    CodegenError::at(func, Some(blk), "gotoifnot in the last block")
                })?;
                let then_args = self.phi_args(func, blk, next)?;
                let else_args = self.phi_args(func, blk, *t)?;
                let (then_to, else_to) = (target(&next)?, target(t)?);
                // The jump target first, the fall-through block second
                // (see `negate`), unless the target is in more loops.
                self.two_way(
                    c,
                    (next, then_to, &then_args),
                    (*t, else_to, &else_args),
                    false,
                );
            }
            Some(Terminator::Return(op)) => {
                for k in 0..self.freed.len() {
                    let (v, slot, letgo) = self.freed[k];
                    // What a latch-owning phi, or a site of a choosing
                    // phi's web, holds may have left its loop.
                    let phi = self.web_sites.get(&v).copied().unwrap_or(v);
                    let leaves = match self.webs.iter().find(|w| w.phi == phi) {
                        Some(w) => w.leaves,
                        None => self.latch.get(&phi).is_some_and(|&(_, leaves)| leaves),
                    };
                    if !leaves || self.at_return.contains(&phi) {
                        self.free_slot((slot, letgo))?;
                    }
                }
                let mut rets = vec![self.b.ins().iconst(types::I8, 0)];
                rets.extend(self.operand(op)?);
                self.b.ins().return_(&rets);
            }
            Some(Terminator::Switch { index, targets }) => {
                let i = self.operand(index)?[0];
                let n = targets.len() as i64;
                let site = self.c.site(term_loc(), None);
                if !switch_index_in_range(func, index, n) {
                    let nv = self.b.ins().iconst(types::I64, n);
                    let out = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, i, nv);
                    self.fail_if(out, TrapKind::Switch, site, Some(i), Some(nv));
                }
                if targets.len() <= 2 {
                    // The common case (a recorded predecessor of two): a branch.
                    let first = target(&targets[0])?;
                    let first_args = self.phi_args(func, blk, targets[0])?;
                    if let Some(&second) = targets.get(1) {
                        let second_args = self.phi_args(func, blk, second)?;
                        let to = target(&second)?;
                        self.two_way(
                            i,
                            (second, to, &second_args),
                            (targets[0], first, &first_args),
                            true,
                        );
                    } else {
                        self.b.ins().jump(first, &first_args);
                    }
                    return Ok(());
                }
                // Jump tables carry no block arguments: each target with
                // phis gets a block that passes them.
                let mut calls = Vec::with_capacity(targets.len());
                let mut tramps = Vec::with_capacity(targets.len());
                for t in targets {
                    let args = self.phi_args(func, blk, *t)?;
                    let tramp = self.b.create_block();
                    calls.push(self.b.func.dfg.block_call(tramp, &[]));
                    tramps.push((tramp, target(t)?, args));
                }
                let default = calls
                    .first()
                    .copied()
                    .ok_or_else(|| CodegenError::at(func, Some(blk), "switch without targets"))?;
                let jt = self
                    .b
                    .create_jump_table(JumpTableData::new(default, &calls));
                let i32v = self.b.ins().ireduce(types::I32, i);
                self.b.ins().br_table(i32v, jt);
                for (tramp, to, args) in tramps {
                    self.b.switch_to_block(tramp);
                    self.b.ins().jump(to, &args);
                }
            }
        }
        Ok(())
    }

    /// A branch to `taken` when `c` is nonzero, else to `other` (each the
    /// IR block, its Cranelift block and the arguments): `taken` the first
    /// successor when `taken_first`, unless the second is in fewer loops.
    ///
    /// Cranelift orders blocks in the reverse postorder of a depth-first
    /// walk that enters a branch's first successor first: the second
    /// successor comes right after the branch, the first after all that
    /// the second reaches. The second must be the one inside a loop the
    /// other is not in (a loop's body rather than its exit, which leads to
    /// the rest of the function): with the body after the rest, the values
    /// the body uses stay live across the rest (thousands of loops in a row
    /// made register allocation quadratic), and Cranelift's optimiser
    /// hoists nothing out of the loop (see `negate`).
    fn two_way(
        &mut self,
        c: ir::Value,
        taken: (Block, ir::Block, &[BlockArg]),
        other: (Block, ir::Block, &[BlockArg]),
        taken_first: bool,
    ) {
        let (d_taken, d_other) = (self.loop_depth[taken.0], self.loop_depth[other.0]);
        let taken_first = if taken_first {
            d_taken <= d_other
        } else {
            d_other > d_taken
        };
        if taken_first {
            self.b.ins().brif(c, taken.1, taken.2, other.1, other.2);
        } else {
            let not_c = self.negate(c);
            self.b.ins().brif(not_c, other.1, other.2, taken.1, taken.2);
        }
    }

    /// The negation of the branch condition `c`: the complementary
    /// comparison when `c` is an `icmp` or `fcmp` (whose other uses keep
    /// the original), else `c == 0`.
    ///
    /// `gotoifnot c, #t` falls through into the next block, which for a
    /// loop header is the loop body. Lowered as `brif c, next, t`, the
    /// header's successors are (body, exit), and Cranelift's dominator tree
    /// then lists the exit among the header's children before the body;
    /// its egraph elaboration walks the children in that order and, on
    /// entering the exit (outside the loop), pops the loop from its stack
    /// of loops for good, so nothing in the body is hoisted out of the
    /// loop (cranelift-codegen 0.135, `egraph/elaborate.rs`,
    /// `start_block`). Lowered as `brif !c, t, next`, the body comes first
    /// and loop-invariant code is hoisted (docs/codegen.md, "Loops").
    fn negate(&mut self, c: ir::Value) -> ir::Value {
        if let ir::ValueDef::Result(inst, 0) = self.b.func.dfg.value_def(c) {
            match self.b.func.dfg.insts[inst] {
                ir::InstructionData::IntCompare { cond, args, .. } => {
                    return self.b.ins().icmp(cond.complement(), args[0], args[1]);
                }
                ir::InstructionData::FloatCompare { cond, args, .. } => {
                    return self.b.ins().fcmp(cond.complement(), args[0], args[1]);
                }
                _ => {}
            }
        }
        self.b.ins().icmp_imm_s(IntCC::Equal, c, 0)
    }

    /// The arguments of the jump from `from` to `to`: the leaves of each phi's
    /// entry for `from`.
    fn phi_args(
        &mut self,
        func: &Func,
        from: Block,
        to: Block,
    ) -> Result<Vec<BlockArg>, CodegenError> {
        let mut out = Vec::new();
        for &inst in &func.blocks[to].insts {
            let InstKind::Phi { entries } = &func.insts[inst].kind else {
                break;
            };
            if func.insts[inst].result.is_none() {
                continue;
            }
            let op = entries
                .iter()
                .find(|(b, _)| *b == from)
                .map(|(_, op)| *op)
                .ok_or_else(|| {
                    CodegenError::at(func, Some(to), "a phi has no entry for a predecessor")
                })?;
            out.extend(self.operand(&op)?.into_iter().map(BlockArg::Value));
        }
        Ok(out)
    }

    /// The call-depth check on entry to a function of the module: its frame
    /// must not be deeper than the limit. The check is the callee's, not the
    /// call site's, because a primitive called through a function value is
    /// no frame (as in the interpreter); the error has no site of its own,
    /// and the caller's failure path puts its call site in its place.
    /// The owning phis among the statements `insts` of a block being
    /// entered (`lower/release.rs`): each lets go of the array it held
    /// before this entry, and holds the new one. A latch-owning phi does so
    /// when entered from a latch (with an array other than the one it is
    /// entered with from outside); entered from outside, it holds nothing
    /// and lets go of nothing (what it held may have left the loop), but
    /// for arrays that never leave the loop, which are dead once it is
    /// entered again.
    fn enter_owning_phis(
        &mut self,
        func: &Func,
        insts: &[irad_ir::Inst],
    ) -> Result<(), CodegenError> {
        for &inst in insts {
            if let (InstKind::Phi { .. }, Some(r)) =
                (&func.insts[inst].kind, func.insts[inst].result)
                && let Some(slot) = self.freed_slot(r)
                && !self.web_sites.contains_key(&r)
                && !self.webs.iter().any(|w| w.phi == r)
            {
                if let Some(k) = self.chains.iter().position(|c| c.phis.contains(&r)) {
                    if self.chains[k].head == r {
                        self.enter_chain(k)?;
                    }
                    continue;
                }
                let Some(&p) = self.operand(&Operand::Value(r))?.first() else {
                    return Err(CodegenError::internal(
                        "an owning phi without leaves".into(),
                    ));
                };
                let Some((entry, leaves)) = self.latch.get(&r).copied() else {
                    self.free_slot(slot)?;
                    self.b.ins().stack_store(types::I64, p, slot.0, 0);
                    continue;
                };
                if self.either.contains(&r) {
                    self.enter_either_phi(p, entry, leaves, slot)?;
                    continue;
                }
                // Arrays that never leave the loop are dead once it is
                // entered again, from outside too.
                if !leaves {
                    self.free_slot(slot)?;
                }
                let Some(&e) = self.operand(&entry)?.first() else {
                    return Err(CodegenError::internal(
                        "a latch-owning phi's entry without leaves".into(),
                    ));
                };
                let from_outside = self.b.ins().icmp(IntCC::Equal, p, e);
                let forget = self.b.create_block();
                let swap = self.b.create_block();
                let cont = self.b.create_block();
                self.b.ins().brif(from_outside, forget, &[], swap, &[]);
                self.b.switch_to_block(forget);
                let null = self.b.ins().iconst(types::I64, 0);
                self.b.ins().stack_store(types::I64, null, slot.0, 0);
                self.b.ins().jump(cont, &[]);
                self.b.switch_to_block(swap);
                if leaves {
                    self.free_slot(slot)?;
                }
                self.b.ins().stack_store(types::I64, p, slot.0, 0);
                self.b.ins().jump(cont, &[]);
                self.b.switch_to_block(cont);
            }
        }
        Ok(())
    }

    /// The entry of the header of either phi `p` (`lower/release.rs`,
    /// "Either results"), entered from outside its loop with `entry`. From
    /// outside (`p` is the entry's array): the slot is emptied, letting go
    /// of its array unless that may have left the loop (`leaves`). From a
    /// latch: the call handed back the array the slot holds (nothing to
    /// do), or made a new one, which the slot then holds, letting go of
    /// the one it held (the array `p` had, when a call made it).
    fn enter_either_phi(
        &mut self,
        p: ir::Value,
        entry: Operand,
        leaves: bool,
        slot: (ir::StackSlot, release::Letgo),
    ) -> Result<(), CodegenError> {
        let Some(&e) = self.operand(&entry)?.first() else {
            return Err(CodegenError::internal(
                "an either phi's entry without leaves".into(),
            ));
        };
        let from_outside = self.b.ins().icmp(IntCC::Equal, p, e);
        let forget = self.b.create_block();
        let latch = self.b.create_block();
        let replace = self.b.create_block();
        let cont = self.b.create_block();
        self.b.ins().brif(from_outside, forget, &[], latch, &[]);
        self.b.switch_to_block(forget);
        if !leaves {
            self.free_slot(slot)?;
        }
        let null = self.b.ins().iconst(types::I64, 0);
        self.b.ins().stack_store(types::I64, null, slot.0, 0);
        self.b.ins().jump(cont, &[]);
        self.b.switch_to_block(latch);
        let old = self.b.ins().stack_load(types::I64, types::I64, slot.0, 0);
        let handed_back = self.b.ins().icmp(IntCC::Equal, p, old);
        self.b.ins().brif(handed_back, cont, &[], replace, &[]);
        self.b.switch_to_block(replace);
        self.let_go(old, slot.1)?;
        self.b.ins().stack_store(types::I64, p, slot.0, 0);
        self.b.ins().jump(cont, &[]);
        self.b.switch_to_block(cont);
        Ok(())
    }

    /// The entry of the header of handing chain `k` (`lower/release.rs`,
    /// "Handing chains"). From a latch (the head's new array is not the one
    /// it is entered with from outside): the tail's slot lets go of its
    /// array, each other phi's slot moves one place down the chain, and the
    /// head's holds the head's new array. From outside: the slots are
    /// emptied, letting go of their arrays unless those may have left the
    /// loop.
    fn enter_chain(&mut self, k: usize) -> Result<(), CodegenError> {
        let chain = self.chains[k].clone();
        let mut slots = Vec::with_capacity(chain.phis.len());
        for &p in &chain.phis {
            slots.push(self.freed_slot(p).ok_or_else(|| {
                CodegenError::internal("a handing chain's phi without a slot".into())
            })?);
        }
        let leaves = self.latch.get(&chain.head).is_none_or(|&(_, l)| l);
        let (Some(&p), Some(&e)) = (
            self.operand(&Operand::Value(chain.head))?.first(),
            self.operand(&chain.entry)?.first(),
        ) else {
            return Err(CodegenError::internal(
                "a handing chain's head without leaves".into(),
            ));
        };
        let from_outside = self.b.ins().icmp(IntCC::Equal, p, e);
        let forget = self.b.create_block();
        let shift = self.b.create_block();
        let cont = self.b.create_block();
        self.b.ins().brif(from_outside, forget, &[], shift, &[]);
        self.b.switch_to_block(forget);
        let null = self.b.ins().iconst(types::I64, 0);
        for &slot in &slots {
            if !leaves {
                self.free_slot(slot)?;
            }
            self.b.ins().stack_store(types::I64, null, slot.0, 0);
        }
        self.b.ins().jump(cont, &[]);
        self.b.switch_to_block(shift);
        if let Some(&tail) = slots.first() {
            self.free_slot(tail)?;
        }
        for w in slots.windows(2) {
            let next = self.b.ins().stack_load(types::I64, types::I64, w[1].0, 0);
            self.b.ins().stack_store(types::I64, next, w[0].0, 0);
        }
        if let Some(&(head, _)) = slots.last() {
            self.b.ins().stack_store(types::I64, p, head, 0);
        }
        self.b.ins().jump(cont, &[]);
        self.b.switch_to_block(cont);
        Ok(())
    }

    /// Makes a stack slot, null at entry, for each array-making statement
    /// or array `pop` of `func` whose arrays the function lets go of itself
    /// (`lower/release.rs`).
    fn freed_slots(&mut self, func: &Func) {
        self.freed.clear();
        // Summaries see each callee as it is compiled, its own small
        // callees inlined (`lower/release.rs`, "Summaries of inlined bodies").
        self.c.summaries.pin_inline(&self.c.inline);
        let freed = release::freed_sites(func, self.module, &mut self.c.summaries);
        self.counted_pushes = release::counted_pushes(func, &freed);
        self.tagged_args = release::tagged_args(func, &freed);
        self.latch = freed.latch.iter().copied().collect();
        self.at_return = freed.at_return.clone();
        self.either = freed.either.clone();
        self.counting = freed.counting.clone();
        self.web_entered = freed.web_entered.clone();
        self.web_phi_entered = freed.web_phi_entered.clone();
        self.web_webs = freed.web_webs.clone();
        self.either_results = freed.either_results.clone();
        self.chains = freed.chains.clone();
        self.entered = freed.entered.clone();
        self.through = freed.through.clone();
        self.web_sites = freed
            .webs
            .iter()
            .flat_map(|w| {
                let others = w.others.iter().map(|&(q, _)| q);
                w.sites
                    .iter()
                    .copied()
                    .chain(others)
                    .map(move |s| (s, w.phi))
            })
            .collect();
        self.webs = freed.webs;
        self.popped_words.clear();
        for (v, letgo) in freed.sites {
            let slot = self.b.create_sized_stack_slot(ir::StackSlotData::new(
                ir::StackSlotKind::ExplicitSlot,
                8,
                3,
            ));
            let null = self.b.ins().iconst(types::I64, 0);
            self.b.ins().stack_store(types::I64, null, slot, 0);
            self.freed.push((v, slot, letgo));
        }
    }

    /// The stack slot of array-making statement or pop `v`, if the
    /// function lets go of its arrays, and how.
    fn freed_slot(&self, v: Value) -> Option<(ir::StackSlot, release::Letgo)> {
        self.freed
            .iter()
            .find(|(w, _, _)| *w == v)
            .map(|&(_, s, l)| (s, l))
    }

    /// Lets go of the array in `slot` (nothing when null): `irad_rt_free`,
    /// `irad_rt_release` or `irad_rt_drop_popped`.
    fn free_slot(
        &mut self,
        (slot, letgo): (ir::StackSlot, release::Letgo),
    ) -> Result<(), CodegenError> {
        let p = self.b.ins().stack_load(types::I64, types::I64, slot, 0);
        self.let_go(p, letgo)
    }

    /// Lets go of the array `p` (nothing when null) as `letgo` says.
    fn let_go(&mut self, p: ir::Value, letgo: release::Letgo) -> Result<(), CodegenError> {
        let ctx = self.ctx();
        let sym = match letgo {
            release::Letgo::Free => RtSym::Free,
            release::Letgo::Release => RtSym::Release,
            release::Letgo::Drop => {
                // Only a tagged word holds a counted reference: the test is
                // inline, so that pops of arrays pushed uncounted (the
                // arguments' shadows) cost no call.
                let tagged = self.b.ins().band_imm_s(p, 1);
                let drop = self.b.create_block();
                let cont = self.b.create_block();
                self.b.ins().brif(tagged, drop, &[], cont, &[]);
                self.b.switch_to_block(drop);
                self.call_rt(RtSym::DropPopped, &[types::I64; 2], &[], &[ctx, p])?;
                self.b.ins().jump(cont, &[]);
                self.b.switch_to_block(cont);
                return Ok(());
            }
        };
        self.call_rt(sym, &[types::I64; 2], &[], &[ctx, p])?;
        Ok(())
    }

    /// The edge from `blk` into block `t` for each choosing phi of `t`
    /// (`lower/release.rs`, "Choosing phis"). From outside the loop, the
    /// slots of the phi and of its web's sites are emptied, letting go of
    /// their arrays unless those may have left the loop. From a latch, with
    /// `n` the array the phi is entered with: each site's slot lets go of
    /// its array unless it is `n`, and is emptied; when one is `n` (the
    /// iteration replaced the array), the phi's slot lets go of the array it
    /// held and holds `n`.
    fn choosing_edge(&mut self, func: &Func, blk: Block, t: Block) -> Result<(), CodegenError> {
        for k in 0..self.webs.len() {
            if self.webs[k].header != t {
                continue;
            }
            let w = self.webs[k].clone();
            if w.sharing() {
                self.sharing_edge(func, blk, &w)?;
                continue;
            }
            let missing = || CodegenError::internal("a choosing phi without its slots".into());
            let (pslot, letgo) = self.freed_slot(w.phi).ok_or_else(missing)?;
            let slots = w
                .sites
                .iter()
                .map(|&s| self.freed_slot(s).map(|(slot, _)| slot))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(missing)?;
            let leaves = w.leaves;
            let null = self.b.ins().iconst(types::I64, 0);
            if blk == w.outside {
                for slot in std::iter::once(pslot).chain(slots) {
                    if !leaves {
                        self.free_slot((slot, letgo))?;
                    }
                    self.b.ins().stack_store(types::I64, null, slot, 0);
                }
                continue;
            }
            let n = self.entered_array(func, w.inst, blk)?;
            let mut taken = self.b.ins().iconst(types::I8, 0);
            for slot in slots {
                let a = self.b.ins().stack_load(types::I64, types::I64, slot, 0);
                let is_n = self.b.ins().icmp(IntCC::Equal, a, n);
                let dead = self.b.ins().select(is_n, null, a);
                self.let_go(dead, letgo)?;
                self.b.ins().stack_store(types::I64, null, slot, 0);
                taken = self.b.ins().bor(taken, is_n);
            }
            let old = self.b.ins().stack_load(types::I64, types::I64, pslot, 0);
            let dead = self.b.ins().select(taken, old, null);
            self.let_go(dead, letgo)?;
            let held = self.b.ins().select(taken, n, old);
            self.b.ins().stack_store(types::I64, held, pslot, 0);
        }
        Ok(())
    }

    /// The array (its address) the array phi of statement `inst` is
    /// entered with from block `blk`.
    fn entered_array(
        &mut self,
        func: &Func,
        inst: irad_ir::Inst,
        blk: Block,
    ) -> Result<ir::Value, CodegenError> {
        let missing = || CodegenError::internal("a web's phi without its entry".into());
        let InstKind::Phi { entries } = &func.insts[inst].kind else {
            return Err(missing());
        };
        let op = entries
            .iter()
            .find(|(b, _)| *b == blk)
            .map(|(_, op)| *op)
            .ok_or_else(missing)?;
        self.operand(&op)?.first().copied().ok_or_else(missing)
    }

    /// The edge from `blk` into the header of sharing web `w`
    /// (`lower/release.rs`, "Sharing webs"). From outside the loop, every
    /// slot of the web is emptied, letting go of its array unless the web's
    /// arrays may have left the loop. From a latch, with `n1..nm` the
    /// arrays its phis are entered with: each slot (the phis', then the
    /// sites') lets go of its array unless it is one of them, then each
    /// phi's slot holds its new array if a slot held that array and no
    /// earlier phi of the web is entered with it (one slot per array), and
    /// the sites' slots are emptied.
    fn sharing_edge(
        &mut self,
        func: &Func,
        blk: Block,
        w: &release::Web,
    ) -> Result<(), CodegenError> {
        let missing = || CodegenError::internal("a sharing web without its slots".into());
        let phis: Vec<(Value, irad_ir::Inst)> = w.phi_insts().collect();
        let (_, letgo) = self.freed_slot(w.phi).ok_or_else(missing)?;
        let mut pslots = Vec::new();
        for &(q, _) in &phis {
            pslots.push(self.freed_slot(q).ok_or_else(missing)?.0);
        }
        let mut sslots = Vec::new();
        for &s in &w.sites {
            sslots.push(self.freed_slot(s).ok_or_else(missing)?.0);
        }
        let null = self.b.ins().iconst(types::I64, 0);
        if blk == w.outside {
            for &slot in pslots.iter().chain(&sslots) {
                if !w.leaves {
                    self.free_slot((slot, letgo))?;
                }
                self.b.ins().stack_store(types::I64, null, slot, 0);
            }
            return Ok(());
        }
        let mut news = Vec::new();
        for &(_, inst) in &phis {
            news.push(self.entered_array(func, inst, blk)?);
        }
        let held: Vec<ir::Value> = pslots
            .iter()
            .chain(&sslots)
            .map(|&slot| self.b.ins().stack_load(types::I64, types::I64, slot, 0))
            .collect();
        // Every array held that no phi is entered with is dead (the slots
        // hold distinct arrays, or null).
        for &a in &held {
            let mut kept = self.b.ins().iconst(types::I8, 0);
            for &n in &news {
                let is_n = self.b.ins().icmp(IntCC::Equal, a, n);
                kept = self.b.ins().bor(kept, is_n);
            }
            let dead = self.b.ins().select(kept, null, a);
            self.let_go(dead, letgo)?;
        }
        for (k, &n) in news.iter().enumerate() {
            let mut ours = self.b.ins().iconst(types::I8, 0);
            for &a in &held {
                let is_a = self.b.ins().icmp(IntCC::Equal, n, a);
                ours = self.b.ins().bor(ours, is_a);
            }
            for &m in &news[..k] {
                let first = self.b.ins().icmp(IntCC::NotEqual, n, m);
                ours = self.b.ins().band(ours, first);
            }
            let kept = self.b.ins().select(ours, n, null);
            self.b.ins().stack_store(types::I64, kept, pslots[k], 0);
        }
        for &slot in &sslots {
            self.b.ins().stack_store(types::I64, null, slot, 0);
        }
        Ok(())
    }

    /// A push of a site's own array (`release::counted_pushes`): pushes
    /// the tagged word instead of the address (the address with its low
    /// bit set, for the array a `Release` site made; the word popped, for
    /// a `Drop` site's array, tagged or not) and counts the tape's
    /// reference (`irad_rt_hold`; docs/codegen.md, "Freeing arrays").
    fn count_push(
        &mut self,
        func: &Func,
        args: &[Operand],
        letgo: release::Letgo,
        vals: &mut [Leaves],
    ) -> Result<(), CodegenError> {
        let (Some(Operand::Value(v)), Some(leaves)) = (args.first(), vals.first_mut()) else {
            return Err(CodegenError::at(func, None, "a push without an operand"));
        };
        let Some(&p) = leaves.first() else {
            return Err(CodegenError::at(
                func,
                None,
                "a pushed array without leaves",
            ));
        };
        let word = self.push_word(func, v, p, letgo)?;
        leaves[0] = word;
        let ctx = self.ctx();
        self.call_rt(RtSym::Hold, &[types::I64; 2], &[], &[ctx, word])?;
        Ok(())
    }

    /// The leaves `inst`, an `invoke` of `callee`, passes for `args`: an
    /// argument passed to a parameter the callee only pushes is the word
    /// a push of it would push (the callee counts the reference at its
    /// push), or, for a parameter of this function passed on as it is,
    /// the word it was passed, whose pushes there count when it is tagged
    /// (`lower/release.rs`, "Pushed parameters passed on").
    fn invoke_args(
        &mut self,
        func: &Func,
        inst: irad_ir::Inst,
        callee: FuncId,
        args: &[Operand],
    ) -> Result<SmallVec<[ir::Value; 8]>, CodegenError> {
        let mut flat: SmallVec<[ir::Value; 8]> = SmallVec::new();
        let tagged = self.tagged_args.get(&inst).cloned().unwrap_or_default();
        for (k, a) in args.iter().enumerate() {
            let mut leaves = self.operand(a)?;
            if let (Some(&(_, letgo)), Operand::Value(v), Some(p)) =
                (tagged.iter().find(|&&(j, _)| j == k), a, leaves.first_mut())
            {
                *p = self.push_word(func, v, *p, letgo)?;
            } else if let (Operand::Value(v), Some(p)) = (a, leaves.first_mut())
                && let Some(&word) = self.param_words.get(v)
                && self.c.summaries.pushes(callee, k)
            {
                *p = word;
            }
            flat.extend(leaves);
        }
        Ok(flat)
    }

    /// The word a push of `v` (holding the array `p`), a value whose
    /// pushes as it is count a reference (`release::counted_pushes`), or
    /// an argument passed in its place (`release::tagged_args`), pushes:
    /// `p` tagged, or untagged when `v` holds an array from elsewhere, or
    /// the word a dropped pop read.
    fn push_word(
        &mut self,
        func: &Func,
        v: &Value,
        p: ir::Value,
        letgo: release::Letgo,
    ) -> Result<ir::Value, CodegenError> {
        // A phi counting every push of itself, or a leaf of its calls,
        // holds only arrays of the run's arena but for its parameters'
        // (`lower/release.rs`, "Entered with made arrays"), pushed
        // untagged; whatever other rule it meets, every walk reaching it
        // takes its pushes as counted.
        if let Some(foreign) = self.counting.get(v).cloned() {
            let mut word = self.b.ins().bor_imm_s(p, 1);
            for x in foreign {
                let Some(&xv) = self.operand(&Operand::Value(x))?.first() else {
                    return Err(CodegenError::internal("a parameter without leaves".into()));
                };
                let theirs = self.b.ins().icmp(IntCC::Equal, p, xv);
                word = self.b.ins().select(theirs, p, word);
            }
            return Ok(word);
        }
        if let Some(chain) = self.chains.iter().find(|c| c.phis.contains(v)).cloned() {
            return self.chain_word(v, p, &chain);
        }
        // A latch-owning phi entered with a sharing web's phi pushes that
        // array as the web's phi would, its own tagged (`lower/release.rs`,
        // "Entered with a web's phi").
        if let Some(&q) = self.web_phi_entered.get(v) {
            let Some(&e) = self.operand(&Operand::Value(q))?.first() else {
                return Err(CodegenError::internal("a web's phi without leaves".into()));
            };
            let theirs = self.push_word(func, &q, p, letgo)?;
            let entry = self.b.ins().icmp(IntCC::Equal, p, e);
            let tagged = self.b.ins().bor_imm_s(p, 1);
            return Ok(self.b.ins().select(entry, theirs, tagged));
        }
        // A sharing web's phi counts a reference to an array of the web's
        // own (one a slot of its phis holds), not to one the loop was
        // entered with (`lower/release.rs`, "Sharing webs").
        if let Some(w) = self
            .webs
            .iter()
            .find(|w| w.sharing() && (w.phis().any(|q| q == *v) || w.body.contains(v)))
            .cloned()
        {
            let mut ours = self.b.ins().iconst(types::I8, 0);
            // A phi of the body may also hold an array a site made in this
            // iteration, still in the site's slot ("Pushed body phis").
            let sites: &[Value] = match w.body.contains(v) {
                true => &w.sites,
                false => &[],
            };
            let held = w.phis().chain(sites.iter().copied());
            for q in held {
                let (slot, _) = self.freed_slot(q).ok_or_else(|| {
                    CodegenError::internal("a sharing web's phi without its slot".into())
                })?;
                let a = self.b.ins().stack_load(types::I64, types::I64, slot, 0);
                let is_a = self.b.ins().icmp(IntCC::Equal, p, a);
                ours = self.b.ins().bor(ours, is_a);
            }
            let mut word = self.web_entry_word(func, v, p)?;
            // Holding what another web's phi it was entered with holds: as
            // that phi would push it (`lower/release.rs`, "Webs entered
            // with a web's phis").
            for q in self.web_webs.get(v).cloned().unwrap_or_default() {
                let Some(&e) = self.operand(&Operand::Value(q))?.first() else {
                    return Err(CodegenError::internal("a web's phi without leaves".into()));
                };
                let theirs = self.push_word(func, &q, p, letgo)?;
                let is = self.b.ins().icmp(IntCC::Equal, p, e);
                word = self.b.ins().select(is, theirs, word);
            }
            let tagged = self.b.ins().bor_imm_s(p, 1);
            return Ok(self.b.ins().select(ours, tagged, word));
        }
        // A select a sharing web is entered through.
        if self.web_entered.contains_key(v) {
            return self.web_entry_word(func, v, p);
        }
        Ok(match letgo {
            // A latch-owning phi counts a reference only to an array of its
            // own, not to the one it was entered with from outside
            // (`lower/release.rs`): that one is pushed as before, untagged.
            // So does the result of a call an either phi takes, which may
            // be that array handed back.
            release::Letgo::Release
                if self.through.contains_key(v)
                    || self.either_results.contains_key(v)
                    || (self.latch.contains_key(v) && !self.entered.contains_key(v)) =>
            {
                // Entered through a `select` of a site's array and another,
                // it counts a reference unless it holds the other.
                let entry = match (self.through.get(v), self.either_results.get(v)) {
                    (Some(&x), _) => x,
                    (None, Some(phi)) => match self.latch.get(phi) {
                        Some(&(e, _)) => e,
                        None => {
                            return Err(CodegenError::internal(
                                "an either phi's result without its phi".into(),
                            ));
                        }
                    },
                    (None, None) => self.latch[v].0,
                };
                let Some(&e) = self.operand(&entry)?.first() else {
                    return Err(CodegenError::internal(
                        "a latch-owning phi's entry without leaves".into(),
                    ));
                };
                let mut ours = self.b.ins().icmp(IntCC::NotEqual, p, e);
                // The other may itself hold the site's array (a `select`
                // or phi of it): that one is counted all the same.
                if self.through.contains_key(v)
                    && let Some(&s) = self.entered.get(v)
                    && let Some(&sv) = self.operand(&Operand::Value(s))?.first()
                {
                    let site = self.b.ins().icmp(IntCC::Equal, p, sv);
                    ours = self.b.ins().bor(ours, site);
                }
                let tagged = self.b.ins().bor_imm_s(p, 1);
                self.b.ins().select(ours, tagged, p)
            }
            // Entered with a dropped pop's array: pushed as that pop's word
            // (tagged or not) while it holds it, tagged otherwise.
            release::Letgo::Release
                if let Some(&s) = self.entered.get(v)
                    && matches!(
                        func.def_kind(s),
                        Some(InstKind::Prim {
                            prim: Prim::Pop,
                            ..
                        })
                    ) =>
            {
                let Some(&w) = self.popped_words.get(&s) else {
                    return Err(CodegenError::internal("a popped word not recorded".into()));
                };
                let Some(&sv) = self.operand(&Operand::Value(s))?.first() else {
                    return Err(CodegenError::internal("a pop without leaves".into()));
                };
                let popped = self.b.ins().icmp(IntCC::Equal, p, sv);
                let tagged = self.b.ins().bor_imm_s(p, 1);
                self.b.ins().select(popped, w, tagged)
            }
            release::Letgo::Release => self.b.ins().bor_imm_s(p, 1),
            release::Letgo::Drop => match self.popped_words.get(v) {
                Some(&w) => w,
                None => return Err(CodegenError::internal("a popped word not recorded".into())),
            },
            release::Letgo::Free => {
                return Err(CodegenError::internal("a push of a freed site".into()));
            }
        })
    }

    /// The word a push of `v`, a phi of a sharing web or a `select` it is
    /// entered through, holding array `p` pushes for the arrays the web was
    /// entered with (`release::Freed::web_entered`): a dropped pop's word
    /// when `p` is its array, `p` tagged when it is a released site's, and
    /// `p` untagged otherwise (`lower/release.rs`, "Webs entered with
    /// pops").
    fn web_entry_word(
        &mut self,
        func: &Func,
        v: &Value,
        p: ir::Value,
    ) -> Result<ir::Value, CodegenError> {
        let mut word = p;
        for s in self.web_entered.get(v).cloned().unwrap_or_default() {
            let Some(&sv) = self.operand(&Operand::Value(s))?.first() else {
                return Err(CodegenError::internal(
                    "a web's entry without leaves".into(),
                ));
            };
            let theirs = match func.def_kind(s) {
                Some(InstKind::Prim {
                    prim: Prim::Pop, ..
                }) => match self.popped_words.get(&s) {
                    Some(&w) => w,
                    None => {
                        return Err(CodegenError::internal("a popped word not recorded".into()));
                    }
                },
                _ => self.b.ins().bor_imm_s(p, 1),
            };
            let is = self.b.ins().icmp(IntCC::Equal, p, sv);
            word = self.b.ins().select(is, theirs, word);
        }
        Ok(word)
    }

    /// Counts the reference of a tape entry holding `word`, when it is
    /// tagged (`irad_rt_hold`; the test is inline, so that untagged words
    /// cost no call).
    fn hold_if_tagged(&mut self, word: ir::Value) -> Result<(), CodegenError> {
        let ctx = self.ctx();
        let tagged = self.b.ins().band_imm_s(word, 1);
        let hold = self.b.create_block();
        let cont = self.b.create_block();
        self.b.ins().brif(tagged, hold, &[], cont, &[]);
        self.b.switch_to_block(hold);
        self.call_rt(RtSym::Hold, &[types::I64; 2], &[], &[ctx, word])?;
        self.b.ins().jump(cont, &[]);
        self.b.switch_to_block(cont);
        Ok(())
    }

    /// In a module whose tapes are counted, the `[T]` parameters function
    /// `fid` (lowered as `func`) only pushes as they are may be passed
    /// tagged by their callers (`lower/release.rs`, "Pushed parameters"):
    /// each use sees the address with the bit cleared, and each push of
    /// the parameter pushes the word passed ([`Lower::param_words`]).
    fn mask_pushed_params(&mut self, fid: FuncId, func: &Func) -> Result<(), CodegenError> {
        self.param_words.clear();
        if !self.module.counted_tapes() {
            return Ok(());
        }
        self.c.summaries.pin_inline(&self.c.inline);
        let pushed = self.c.summaries.pushed_params(self.module, fid);
        debug_assert!(
            release::still_only_pushed(func, &self.c.summaries, &pushed),
            "a pushed parameter kept otherwise after inlining, fusion or versioning"
        );
        // And the parameters it pushes as they are and may return at an
        // either leaf (`lower/release.rs`, "Either results").
        let masked = self.c.summaries.masked_params(self.module, fid);
        for (k, &p) in func.params.iter().enumerate() {
            if !masked.get(k).copied().unwrap_or(false) {
                continue;
            }
            let mut leaves = self.operand(&Operand::Value(p))?;
            let Some(word) = leaves.first().copied() else {
                return Err(CodegenError::internal(
                    "an array parameter without leaves".into(),
                ));
            };
            leaves[0] = self.b.ins().band_imm_s(word, !1i64);
            self.set(p, leaves);
            self.param_words.insert(p, word);
        }
        Ok(())
    }

    /// The word a push of handing chain phi `v` (holding the array `p`)
    /// pushes: tagged when its slot holds `p` (an array of the chain's
    /// sites), else the word of the site or pop the chain was entered with
    /// whose array `p` is, else `p` untagged (`lower/release.rs`, "Handing
    /// chains").
    fn chain_word(
        &mut self,
        v: &Value,
        p: ir::Value,
        chain: &release::Chain,
    ) -> Result<ir::Value, CodegenError> {
        let (slot, _) = self
            .freed_slot(*v)
            .ok_or_else(|| CodegenError::internal("a handing chain's phi without a slot".into()))?;
        let mut word = p;
        for &(e, _, how) in chain.entered.iter().rev() {
            let Some(&ev) = self.operand(&Operand::Value(e))?.first() else {
                return Err(CodegenError::internal("an entry without leaves".into()));
            };
            let theirs = match how {
                release::ChainEntry::Made => self.b.ins().bor_imm_s(p, 1),
                release::ChainEntry::Popped => match self.popped_words.get(&e) {
                    Some(&w) => w,
                    None => {
                        return Err(CodegenError::internal("a popped word not recorded".into()));
                    }
                },
            };
            let is = self.b.ins().icmp(IntCC::Equal, p, ev);
            word = self.b.ins().select(is, theirs, word);
        }
        let held = self.b.ins().stack_load(types::I64, types::I64, slot, 0);
        let ours = self.b.ins().icmp(IntCC::Equal, p, held);
        let tagged = self.b.ins().bor_imm_s(p, 1);
        Ok(self.b.ins().select(ours, tagged, word))
    }

    fn depth_check(&mut self) {
        let ctx = self.ctx();
        let depth = self.load64(ctx, rt::OFF_DEPTH);
        let max = self.load64(ctx, rt::OFF_MAX_DEPTH);
        let too_deep = self.b.ins().icmp(IntCC::SignedGreaterThan, depth, max);
        self.fail_if(too_deep, TrapKind::Depth, rt::SITE_NONE, Some(max), None);
    }

    /// The call-depth check of an inlined frame, at the entry of its body:
    /// `depth` frames deeper than the function's own, as the callee's own
    /// [`Lower::depth_check`] would have been, with the same error (no site
    /// of its own; the inlined calls' error returns trace their sites).
    fn inlined_depth_check(&mut self, depth: usize) {
        let ctx = self.ctx();
        let own = self.load64(ctx, rt::OFF_DEPTH);
        let max = self.load64(ctx, rt::OFF_MAX_DEPTH);
        let deeper = self.b.ins().iadd_imm_s(own, depth as i64);
        let too_deep = self.b.ins().icmp(IntCC::SignedGreaterThan, deeper, max);
        self.fail_if(too_deep, TrapKind::Depth, rt::SITE_NONE, Some(max), None);
    }

    /// A call with the stack check, the failure path, and the result leaves
    /// (the callee checks the call depth, see [`Lower::depth_check`]).
    fn call(
        &mut self,
        callee: Callee,
        args: &[ir::Value],
        site: i64,
    ) -> Result<Leaves, CodegenError> {
        // The callee may write any array.
        self.known.clear();
        let ctx = self.ctx();
        let depth = self.load64(ctx, rt::OFF_DEPTH);
        let sp = self.b.ins().get_stack_pointer(types::I64);
        let limit = self.load64(ctx, rt::OFF_STACK_LIMIT);
        let low = self.b.ins().icmp(IntCC::UnsignedLessThan, sp, limit);
        self.fail_if(low, TrapKind::Stack, site, Some(depth), None);
        let deeper = self.b.ins().iadd_imm_s(depth, 1);
        self.b.ins().store(self.fl_ctx, deeper, ctx, rt::OFF_DEPTH);
        // Inline lists: a call is lowered for every call statement.
        let mut full: SmallVec<[ir::Value; 8]> = SmallVec::with_capacity(args.len() + 1);
        full.push(ctx);
        full.extend_from_slice(args);
        let call = match callee {
            Callee::Direct(r) => self.b.ins().call(r, &full),
            Callee::Indirect(sigref, h) => {
                let table = self.load64(ctx, rt::OFF_FN_TABLE);
                let off = self.b.ins().imul_imm_s(h, 8);
                let addr = self.b.ins().iadd(table, off);
                let code = self.b.ins().load(types::I64, self.fl_ctx, addr, 0);
                self.b.ins().call_indirect(sigref, code, &full)
            }
        };
        let results: SmallVec<[ir::Value; 4]> = SmallVec::from_slice(self.b.inst_results(call));
        self.b.ins().store(self.fl_ctx, depth, ctx, rt::OFF_DEPTH);
        let status = results[0];
        let cont = self.cold_path(status);
        let s = self.b.ins().iconst(types::I64, site);
        self.call_rt(RtSym::Trace, &[types::I64, types::I64], &[], &[ctx, s])?;
        let ret = self.ret_err();
        self.b.ins().jump(ret, &[]);
        self.b.switch_to_block(cont);
        Ok(results[1..].iter().copied().collect())
    }

    /// The function that a primitive used as a value calls: the primitive
    /// applied to the parameters, errors at [`rt::SITE_NONE`] (the call site
    /// stands in).
    fn prim_wrapper(&mut self, p: Prim) -> Result<(), CodegenError> {
        let Some(Type::Func(sig)) = p.fn_type() else {
            return Err(CodegenError::internal(format!(
                "primitive `{p}` has no single signature"
            )));
        };
        self.ret_leaves = leaf_list(&sig.ret);
        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.make_ret_err();
        self.b.switch_to_block(entry);
        let params: Vec<ir::Value> = self.b.block_params(entry).to_vec();
        self.ctx_val = Some(params[0]);
        let mut vals = Vec::new();
        let mut next = 1;
        for ty in &sig.params {
            let n = leaf_count(ty);
            vals.push(params[next..next + n].iter().copied().collect::<Leaves>());
            next += n;
        }
        let ops: Vec<Operand> = Vec::new();
        let out = self.prim_at(p, &ops, &vals, &sig.params, &sig.ret, &mut |_, _| {
            rt::SITE_NONE
        })?;
        let mut rets = vec![self.b.ins().iconst(types::I8, 0)];
        rets.extend(out);
        self.b.ins().return_(&rets);
        self.fill_ret_err()
    }

    fn prim(
        &mut self,
        p: Prim,
        ops: &[Operand],
        vals: &[Leaves],
        tys: &[Type],
        ret: &Type,
        loc: &mut dyn FnMut() -> Location,
    ) -> Result<Leaves, CodegenError> {
        // Site numbers are made only for statements that can fail.
        self.prim_at(p, ops, vals, tys, ret, &mut |c, tape| c.site(loc(), tape))
    }

    /// The address of tape `t`'s record.
    fn tape_addr(&mut self, t: u32) -> ir::Value {
        let ctx = self.ctx();
        // The tape records do not move while code runs (the runtime makes
        // room for `MAX_TAPES` of them up front), so their address is a
        // constant the optimiser may load once.
        let flags = self.fl_ctx.with_readonly().with_can_move();
        let tapes = self.b.ins().load(types::I64, flags, ctx, rt::OFF_TAPES);
        self.b.ins().iadd_imm_s(tapes, i64::from(t) * rt::TAPE_SIZE)
    }

    /// `push`: stores the leaves at the tape's top, growing it first when full.
    fn push(
        &mut self,
        t: u32,
        vals: &[ir::Value],
        leaves: &[types::Type],
        site: i64,
    ) -> Result<(), CodegenError> {
        let size = i64::from(record_bytes(leaves));
        self.reserve(t, size, site)?;
        let addr = self.tape_addr(t);
        let top = self.load64(addr, rt::OFF_TAPE_TOP);
        self.store_leaves(top, 0, vals, leaves);
        let new_top = self.b.ins().iadd_imm_s(top, size);
        self.b
            .ins()
            .store(self.fl_ctx, new_top, addr, rt::OFF_TAPE_TOP);
        Ok(())
    }

    fn store_leaves(
        &mut self,
        base: ir::Value,
        off: i64,
        vals: &[ir::Value],
        leaves: &[types::Type],
    ) {
        let mut off = off as i32;
        for (&v, &leaf) in vals.iter().zip(leaves) {
            self.b.ins().store(self.fl_tape, v, base, off);
            off += leaf_bytes(leaf) as i32;
        }
    }

    /// A `push` of a segment whose room was reserved and whose top was
    /// moved at the segment start: stores at `off` from the old top.
    fn push_at(
        &mut self,
        t: u32,
        off: i64,
        vals: &[ir::Value],
        leaves: &[types::Type],
    ) -> Result<(), CodegenError> {
        let top0 = *self
            .seg_tops
            .get(&t)
            .ok_or_else(|| CodegenError::internal("a push outside its segment".into()))?;
        self.store_leaves(top0, off, vals, leaves);
        Ok(())
    }

    /// A `pop` of a segment whose bytes were checked and whose top was moved
    /// at the segment start: loads at `off` (negative) from the old top.
    fn pop_at(&mut self, t: u32, off: i64, leaves: &[types::Type]) -> Result<Leaves, CodegenError> {
        let top0 = *self
            .seg_tops
            .get(&t)
            .ok_or_else(|| CodegenError::internal("a pop outside its segment".into()))?;
        Ok(self.load_leaves(top0, off, leaves))
    }

    fn load_leaves(&mut self, base: ir::Value, off: i64, leaves: &[types::Type]) -> Leaves {
        let mut flags = self.fl_tape;
        if self.movable_pops {
            flags = flags.with_readonly().with_can_move();
        }
        let mut off = off as i32;
        let mut out = Leaves::new();
        for &leaf in leaves {
            out.push(self.b.ins().load(leaf, flags, base, off));
            off += leaf_bytes(leaf) as i32;
        }
        out
    }

    /// Makes sure `size` more bytes fit on tape `t`, growing it (a call of
    /// the runtime, on a cold path) when they do not.
    fn reserve(&mut self, t: u32, size: i64, site: i64) -> Result<(), CodegenError> {
        let addr = self.tape_addr(t);
        let top = self.load64(addr, rt::OFF_TAPE_TOP);
        let end = self.load64(addr, rt::OFF_TAPE_END);
        let room = self.b.ins().isub(end, top);
        let full = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, room, size);
        let cont = self.cold_path(full);
        let ctx = self.ctx();
        let tv = self.b.ins().iconst(types::I64, i64::from(t));
        let sz = self.b.ins().iconst(types::I64, size);
        let sv = self.b.ins().iconst(types::I64, site);
        let helper = self.c.grow_helper()?;
        let r = self.fref(helper);
        self.b.ins().call(r, &[ctx, tv, sz, sv]);
        let kind = self.load64(ctx, rt::OFF_ERR_KIND);
        self.propagate_if(kind);
        self.b.ins().jump(cont, &[]);
        self.b.switch_to_block(cont);
        Ok(())
    }

    /// `pop`: moves the tape's top back and loads the leaves there; an empty
    /// tape is an error (checked here unless `site` is `None`).
    fn pop(&mut self, t: u32, leaves: &[types::Type], site: Option<i64>) -> Leaves {
        let size = i64::from(record_bytes(leaves));
        let addr = self.tape_addr(t);
        let top = self.load64(addr, rt::OFF_TAPE_TOP);
        if let Some(site) = site {
            let base = self.load64(addr, rt::OFF_TAPE_BASE);
            let used = self.b.ins().isub(top, base);
            let empty = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, used, size);
            self.fail_if(empty, TrapKind::EmptyTape, site, None, None);
        }
        let new_top = self.b.ins().iadd_imm_s(top, -size);
        self.b
            .ins()
            .store(self.fl_ctx, new_top, addr, rt::OFF_TAPE_TOP);
        self.load_leaves(new_top, 0, leaves)
    }

    /// Groups the `push` and `pop` statements of block `blk` into segments
    /// that end at calls (a callee may use the same tapes). A tape that a
    /// segment only pushes to gets one room check and one move of its top
    /// at the segment start, each push a store at its offset; a tape it only
    /// pops from, one check that it holds enough and one move, each pop a
    /// load. Tapes both pushed and popped in a segment keep per-statement
    /// checks. (After a run-time error inside a segment the tapes may hold
    /// more or less than the interpreter's would; they are unspecified then.)
    fn tape_plan(&mut self, func: &Func, blk: Block) -> TapePlan {
        let inl = self.inl;
        let fname = Arc::clone(&self.fname);
        let mut plan = TapePlan::default();
        let insts = &func.blocks[blk].insts;
        let mut start = 0;
        while start < insts.len() {
            let mut end = start;
            while end < insts.len()
                && !matches!(
                    func.insts[insts[end]].kind,
                    InstKind::Invoke { .. } | InstKind::CallValue { .. }
                )
            {
                end += 1;
            }
            // Per tape, in order: (statement, size, is_push).
            // Inline lists: a segment ends at every call, so these are made
            // once per call statement.
            let mut uses: SmallVec<[(u32, SmallVec<[TapeUse; 4]>); 2]> = SmallVec::new();
            for (i, &inst) in insts.iter().enumerate().take(end).skip(start) {
                let data = &func.insts[inst];
                let InstKind::Prim { prim, args } = &data.kind else {
                    continue;
                };
                let (ty, is_push) = match prim {
                    Prim::Push => {
                        match args.first().and_then(|a| func.operand_type(a, self.module)) {
                            Some(ty) => (ty, true),
                            None => continue,
                        }
                    }
                    Prim::Pop => match data.result {
                        Some(r) => (func.values[r].ty.clone(), false),
                        None => continue,
                    },
                    _ => continue,
                };
                let size = i64::from(record_bytes(&leaf_list(&ty)));
                let t = self.c.tape(&ty);
                match uses.iter_mut().find(|u| u.0 == t) {
                    Some(u) => u.1.push((i, size, is_push)),
                    None => uses.push((t, smallvec::smallvec![(i, size, is_push)])),
                }
            }
            let mut checks = Checks::new();
            for (tape, list) in uses {
                if list.iter().all(|u| u.2) {
                    let site = self
                        .c
                        .site(Self::loc(inl, &fname, func, blk, list[0].0), None);
                    let mut off = 0;
                    for &(i, size, _) in &list {
                        plan.prechecked.insert(i, (tape, off));
                        off += size;
                    }
                    checks.push(TapeCheck::Room {
                        tape,
                        bytes: off,
                        site,
                    });
                } else if list.iter().all(|u| !u.2) {
                    let ty = self.c.tape_types[tape as usize].clone();
                    let mut cum = 0;
                    let mut pops = SmallVec::with_capacity(list.len());
                    for &(i, size, _) in &list {
                        cum += size;
                        plan.prechecked.insert(i, (tape, -cum));
                        let site = self
                            .c
                            .site(Self::loc(inl, &fname, func, blk, i), Some(ty.clone()));
                        pops.push((size, site));
                    }
                    checks.push(TapeCheck::Filled { tape, pops });
                }
            }
            if !checks.is_empty() {
                plan.checks.insert(start, checks);
            }
            start = end + 1;
        }
        plan
    }

    /// Emits the checks of the start of a segment and moves the tops.
    fn tape_checks(&mut self, checks: Checks) -> Result<(), CodegenError> {
        for check in checks {
            match check {
                TapeCheck::Room { tape, bytes, site } => {
                    self.reserve(tape, bytes, site)?;
                    let addr = self.tape_addr(tape);
                    let top = self.load64(addr, rt::OFF_TAPE_TOP);
                    let new_top = self.b.ins().iadd_imm_s(top, bytes);
                    self.b
                        .ins()
                        .store(self.fl_ctx, new_top, addr, rt::OFF_TAPE_TOP);
                    self.seg_tops.insert(tape, top);
                }
                TapeCheck::Filled { tape, pops } => {
                    let total: i64 = pops.iter().map(|p| p.0).sum();
                    let addr = self.tape_addr(tape);
                    let top = self.load64(addr, rt::OFF_TAPE_TOP);
                    let base = self.load64(addr, rt::OFF_TAPE_BASE);
                    let used = self.b.ins().isub(top, base);
                    let short = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, used, total);
                    let cont = self.cold_path(short);
                    let site = self.failing_pop_site(used, &pops);
                    let ctx = self.ctx();
                    let k = self.b.ins().iconst(types::I64, TrapKind::EmptyTape.code());
                    self.b.ins().store(self.fl_ctx, k, ctx, rt::OFF_ERR_KIND);
                    self.b.ins().store(self.fl_ctx, site, ctx, rt::OFF_ERR_SITE);
                    let ret = self.ret_err();
                    self.b.ins().jump(ret, &[]);
                    self.b.switch_to_block(cont);
                    let new_top = self.b.ins().iadd_imm_s(top, -total);
                    self.b
                        .ins()
                        .store(self.fl_ctx, new_top, addr, rt::OFF_TAPE_TOP);
                    self.seg_tops.insert(tape, top);
                }
            }
        }
        Ok(())
    }

    /// The site of the failing pop of a segment whose tape holds `used`
    /// bytes, fewer than all its `pops` (size, site) take: the first pop
    /// k whose bytes are not all there, the first with `used < size_1 +
    /// ... + size_k` (the first pop when `used` is negative).
    ///
    /// The pops of one tape have one type and so one size `s`, and their
    /// sites were numbered in a row (`tape_plan`): then k is `max(used,
    /// 0) / s` (below the number of pops, since `used` is below their
    /// total) and the site the first one's plus k, four instructions on
    /// the cold path. Otherwise a select per pop; in a long pullback's
    /// segment of a thousand pops those selects were a quarter of its
    /// Cranelift instructions.
    fn failing_pop_site(&mut self, used: ir::Value, pops: &[(i64, i64)]) -> ir::Value {
        let (size, first) = pops[0];
        let in_a_row = pops
            .iter()
            .enumerate()
            .all(|(k, &(s, site))| s == size && site == first + k as i64);
        if in_a_row && size > 0 {
            let zero = self.b.ins().iconst(types::I64, 0);
            let held = self.b.ins().smax(used, zero);
            let k = if (size as u64).is_power_of_two() {
                self.b
                    .ins()
                    .ushr_imm_s(held, i64::from(size.trailing_zeros()))
            } else {
                let s = self.b.ins().iconst(types::I64, size);
                self.b.ins().udiv(held, s)
            };
            return self.b.ins().iadd_imm_s(k, first);
        }
        let mut site = self.b.ins().iconst(types::I64, pops[pops.len() - 1].1);
        let mut cum = 0;
        let mut bounds = Vec::with_capacity(pops.len());
        for &(size, s) in pops {
            cum += size;
            bounds.push((cum, s));
        }
        for &(cum, s) in bounds.iter().rev().skip(1) {
            let lt = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, used, cum);
            let sv = self.b.ins().iconst(types::I64, s);
            site = self.b.ins().select(lt, sv, site);
        }
        site
    }
}

/// One check at the start of a segment of a block (the statements between
/// calls): room for every push of one tape in the segment, or enough bytes
/// on one tape for every pop (each pop's size and site, to report the pop
/// that finds the tape short).
enum TapeCheck {
    Room {
        tape: u32,
        bytes: i64,
        site: i64,
    },
    Filled {
        tape: u32,
        pops: SmallVec<[(i64, i64); 4]>,
    },
}

/// The checks before one statement (inline: one or two tapes).
type Checks = SmallVec<[TapeCheck; 2]>;

/// A `push` (true) or `pop` of a segment: statement number, bytes.
type TapeUse = (usize, i64, bool);

/// The tape checks of a block: which checks go before which statement, and
/// which `push`/`pop` statements they cover (with their sites).
#[derive(Default)]
struct TapePlan {
    checks: HashMap<usize, Checks>,
    prechecked: HashMap<usize, (u32, i64)>,
}

/// Whether the index of a `switch` of `n` targets is in `0..n` whatever
/// the run: a constant in range, or a `select` between two such constants
/// (how reverse mode's pullbacks pick a block's recorded predecessor: `switch
/// select(b, 1, 0), [#p, #q]`). Such a switch needs no range check: the
/// check could never fail.
fn switch_index_in_range(func: &Func, index: &Operand, n: i64) -> bool {
    let fits = |op: &Operand| matches!(op, Operand::Const(Const::I64(k)) if (0..n).contains(k));
    match index {
        Operand::Value(v) => match func.values[*v].def {
            ValueDef::Inst(inst) => match &func.insts[inst].kind {
                InstKind::Prim {
                    prim: Prim::Select,
                    args,
                } => args.len() == 3 && fits(&args[1]) && fits(&args[2]),
                _ => false,
            },
            ValueDef::Param(_) => false,
        },
        other => fits(other),
    }
}

/// The bytes one value with `leaves` takes on a tape: its leaves', and one
/// byte for a value without leaves (`()`, `((), ())`), so that the tape counts
/// them and a pop of one too many fails as in the interpreter.
fn record_bytes(leaves: &[types::Type]) -> u32 {
    leaves.iter().map(|&l| leaf_bytes(l)).sum::<u32>().max(1)
}

enum Callee {
    Direct(ir::FuncRef),
    Indirect(ir::SigRef, ir::Value),
}

fn const_index(op: Option<&Operand>) -> Option<usize> {
    match op {
        Some(Operand::Const(Const::I64(k))) => usize::try_from(*k).ok(),
        _ => None,
    }
}

/// `f` of `module` with its small non-recursive callees inlined by
/// `limits` (docs/codegen.md, "Inlining"), or `None` when that finds no
/// call; `recursive` caches the module's recursive functions with the
/// module's length they were found at. Only callees that verify are
/// inlined (a callee that does not is compiled, and refused, as a
/// function of its own). Code generation compiles this body, and the
/// freeing analysis summarises it (`release.rs`, "Summaries of inlined
/// bodies").
pub(crate) fn inlined_with(
    module: &Module,
    f: FuncId,
    limits: &Limits,
    recursive: &mut Option<(usize, EntitySet<FuncId>)>,
) -> Option<Inlined> {
    let n = module.len();
    let recursive = match recursive {
        Some((len, set)) if *len == n => set,
        _ => {
            let set = irad_passes::pe::recursive_functions(module);
            &recursive.insert((n, set)).1
        }
    };
    let verified: std::cell::RefCell<HashMap<FuncId, bool>> = Default::default();
    let allow = |g: FuncId| {
        *verified
            .borrow_mut()
            .entry(g)
            .or_insert_with(|| irad_ir::verify::verify_func(module, g).is_ok())
    };
    irad_passes::pe::inline_for_codegen(module, f, recursive, limits, &allow)
}

#[cfg(test)]
mod huge_tests {
    use super::HUGE_FUNCTION_INSTS;
    use crate::Jit;
    use irad_ir::interp::{RunOptions, Val};

    /// A straight-line chain of `steps` times `y = sin(y) * 1.0001 + 0.5 * y`
    /// with a tape (`push`/`pop`) and a call of a small function, as IR text.
    fn chain(steps: usize) -> String {
        let mut t =
            String::from("func @chain(%x: f64) -> f64 {\n#1:\n  %y0 = call add(%x, 0.0) :: f64\n");
        for k in 0..steps {
            t.push_str(&format!(
                "  %s{k} = call sin(%y{k}) :: f64\n  call push(%s{k})\n  \
                 %a{k} = call mul(%s{k}, 1.0001) :: f64\n  %b{k} = invoke @half(%y{k}) :: f64\n  \
                 %y{} = call add(%a{k}, %b{k}) :: f64\n",
                k + 1
            ));
        }
        for k in 0..steps {
            t.push_str(&format!(
                "  %p{k} = call pop() :: f64\n  %q{} = call add(%p{k}, %y{steps}) :: f64\n",
                k + 1
            ));
        }
        t.push_str(&format!("  return %q{steps}\n}}\n"));
        t.push_str(
            "func @half(%x: f64) -> f64 {\n#1:\n  %h = call mul(%x, 0.5) :: f64\n  return %h\n}\n",
        );
        t
    }

    #[test]
    fn huge_functions_compute_what_the_interpreter_does() {
        // Enough steps for the chain's Cranelift function to pass the
        // threshold (about 6 Cranelift instructions per step), and a small
        // one below it: both agree with the interpreter bit for bit.
        for steps in [10, HUGE_FUNCTION_INSTS / 4] {
            let m = irad_ir::text::parse_module(&chain(steps)).expect("the chain parses");
            let f = m.by_name("chain").expect("declared");
            let args = [Val::F64(0.3)];
            let opts = RunOptions::default();
            let want = irad_ir::interp::run(&m, f, &args, &opts).expect("interprets");
            let mut jit = Jit::new(&m).expect("a JIT");
            let got = jit.run(f, &args, &opts).expect("runs compiled");
            match (want, got) {
                (Val::F64(w), Val::F64(g)) => assert_eq!(w.to_bits(), g.to_bits(), "{steps}"),
                other => panic!("not two f64s: {other:?}"),
            }
        }
    }

    /// An object of `text`'s function `@top` and everything it calls, each
    /// function compiled on the lowering thread when `in_place` (the
    /// Cranelift IR log on: `lower/parallel.rs` then queues nothing), huge
    /// ones on threads of their own otherwise; with the Cranelift function
    /// names defined, in the order defined.
    fn object(text: &str, in_place: bool) -> (Vec<u8>, Vec<String>) {
        use super::Compiler;
        use irad_ir::func::FuncRef;
        let m = irad_ir::text::parse_module(text).expect("the program parses");
        let top = m.by_name("top").expect("declared");
        let isa = crate::object::native_isa_for_objects().expect("an ISA");
        let builder = cranelift_object::ObjectBuilder::new(
            isa,
            "irad",
            cranelift_module::default_libcall_names(),
        )
        .expect("an object builder");
        let mut comp = Compiler::new(cranelift_object::ObjectModule::new(builder));
        if in_place {
            comp.clif = Some(Vec::new());
        }
        comp.declare(&m, FuncRef::User(top)).expect("declares");
        comp.define_pending(&m).expect("compiles");
        let names = comp
            .defined
            .iter()
            .map(|&f| super::name_of(&m, f))
            .collect();
        let bytes = comp.backend.finish().emit().expect("emits");
        (bytes, names)
    }

    #[test]
    fn huge_functions_compiled_on_threads_make_the_same_object() {
        // Two huge functions (compiled on threads) and, queued behind
        // them, small ones: the object and the order of definition are
        // those of compiling each function in place.
        let steps = HUGE_FUNCTION_INSTS / 5;
        let text = format!(
            "{}{}func @top(%x: f64) -> f64 {{\n#1:\n  %a = invoke @chain(%x) :: f64\n  \
             %b = invoke @other(%a) :: f64\n  %c = invoke @half(%b) :: f64\n  return %c\n}}\n",
            chain(steps),
            chain(steps)
                .split("func @half")
                .next()
                .expect("the chain first")
                .replace("@chain", "@other"),
        );
        let (threads, order) = object(&text, false);
        let (in_place, want_order) = object(&text, true);
        assert_eq!(order, want_order);
        assert!(
            order.len() >= 3 && order.contains(&"@other".to_string()),
            "{order:?}"
        );
        assert!(threads == in_place, "the objects differ");
    }
}
