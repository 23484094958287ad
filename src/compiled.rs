//! Compiled modules that an embedding compiler keeps and calls: a module
//! (built with the builder API or parsed), its derived functions, and the
//! JIT's native code for all of them, behind one owning handle.
//!
//! [`Compiled`] and [`CompiledGradient`] own everything they need (the
//! module, the rule provider of function values met at run time and a copy
//! of the rule registry it reads), are `Send + Sync`, and are called through
//! `&self`: many threads may call one at once, each call with a runtime
//! context (tapes, arena, stack) of its own (docs/codegen.md, "The JIT").
//! [`CompiledGradient::gradient_into`] is the typed, allocation-free call
//! (`crate::typed`).
//!
//! ```
//! use irad::ir::{FuncBuilder, Module, Prim, Type};
//! use irad::ir::interp::{RunOptions, Val};
//!
//! // f(x) = x * sin(x), built without text.
//! let mut m = Module::new();
//! let f = m.declare_func("f", vec![(Some("x".into()), Type::F64)], Type::F64).unwrap();
//! let mut b = FuncBuilder::new(&mut m, f).unwrap();
//! let entry = b.create_block();
//! b.switch_to_block(entry).unwrap();
//! let x = b.param(0).unwrap();
//! let s = b.prim(Prim::Sin, &[x.into()]).unwrap().unwrap();
//! let y = b.prim(Prim::Mul, &[x.into(), s.into()]).unwrap().unwrap();
//! b.ret(y.into()).unwrap();
//!
//! let registry = irad::rules::Registry::new();
//! let c = irad::jit_reverse(&m, &[f], &registry).unwrap();
//! // @f.rev: the arguments, then the seed; returns (value, dx).
//! let rev = c.func("f.rev").unwrap();
//! let out = c.call(rev, &[Val::F64(2.0), Val::F64(1.0)], &RunOptions::default()).unwrap();
//! let Val::Tuple(parts) = out else { panic!("a tuple") };
//! let (Val::F64(v), Val::F64(dx)) = (&parts[0], &parts[1]) else { panic!("f64s") };
//! assert_eq!(*v, 2.0 * 2.0f64.sin());
//! assert!((dx - (2.0f64.sin() + 2.0 * 2.0f64.cos())).abs() < 1e-15);
//! ```

use crate::GradRequest;
use crate::codegen::{CodegenError, JitSession, SharedJit};
use irad_ir::interp::{RuleProvider, RunError, RunOptions, Val};
use irad_ir::{FuncId, Module};
use irad_passes::forward::grad::GradError;
use irad_passes::forward::{Forward, ForwardError};
use irad_passes::reverse::{Reverse, ReverseError};
use irad_passes::split::PART_STMTS;
use irad_passes::stages::{
    ForwardGradStage, ForwardStage, OptimiseStage, ReverseGradStage, ReverseStage, Scope,
};
use irad_passes::{PassError, Step};
use irad_rules::Registry;
use std::sync::{Arc, OnceLock};

/// Why a module could not be compiled or a compiled function failed.
#[derive(Debug, thiserror::Error)]
pub enum CompiledError {
    /// Normalisation failed.
    #[error(transparent)]
    Pass(#[from] irad_passes::PassError),
    /// Deriving a forward rule failed.
    #[error(transparent)]
    Forward(#[from] ForwardError),
    /// Deriving reverse-mode pieces failed.
    #[error(transparent)]
    Reverse(#[from] ReverseError),
    /// Code generation failed.
    #[error(transparent)]
    Codegen(#[from] CodegenError),
    /// The function failed at run time.
    #[error(transparent)]
    Run(#[from] RunError),
}

/// A module with its derived functions, compiled by the JIT (on first call of
/// each function), owning everything it needs (rules of function values met
/// at run time are derived with its own copy of the registry). `Send +
/// Sync`: threads share one through `&Compiled` (or an `Arc`).
pub struct Compiled {
    jit: SharedJit,
}

impl Compiled {
    /// The module with every derived function (and every rule added at run time).
    ///
    /// ```
    /// let src = irad::Source::new("f.irad", "fn f(x: f64) -> f64 { x * sin(x) }");
    /// let m = irad::load(&src)?;
    /// let f = irad::find_function(&src, &m, "f")?;
    /// let registry = irad::rules::Registry::new();
    /// let c = irad::jit_reverse(&m, &[f], &registry)?;
    /// assert!(c.module().by_name("f.rev").is_some());
    /// assert!(c.module().by_name("f.rev.back").is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn module(&self) -> &Module {
        self.jit.module()
    }

    /// The function named `name` (with or without `@`), e.g. `f`, `f.rev`, `f.fwd`.
    ///
    /// ```
    /// let src = irad::Source::new("f.irad", "fn f(x: f64) -> f64 { x * sin(x) }");
    /// let m = irad::load(&src)?;
    /// let f = irad::find_function(&src, &m, "f")?;
    /// let c = irad::jit_primal(&m)?;
    /// assert_eq!(c.func("@f"), Some(f));
    /// assert_eq!(c.func("f.rev"), None); // jit_primal derives nothing
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn func(&self, name: &str) -> Option<FuncId> {
        self.jit.module().by_name(name.trim_start_matches('@'))
    }

    /// Compiles `f` (and what it reaches) now rather than on its first call.
    ///
    /// ```
    /// let src = irad::Source::new("f.irad", "fn f(x: f64) -> f64 { x * sin(x) }");
    /// let m = irad::load(&src)?;
    /// let f = irad::find_function(&src, &m, "f")?;
    /// let c = irad::jit_primal(&m)?;
    /// c.compile(f)?; // the first call below pays no compile time
    /// let v = c.call(f, &[irad::Val::F64(0.0)], &Default::default())?;
    /// assert_eq!(v.display(c.module()), "0.0");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn compile(&self, f: FuncId) -> Result<(), CompiledError> {
        Ok(self.jit.compile(f)?)
    }

    /// Calls `f` on `args` in native code; the same results and errors as the
    /// interpreter's `run`. Each call has a runtime context of its own: tapes
    /// start empty and are emptied after (a reverse rule's forward sweep and
    /// pullback, called one after the other, share one through
    /// [`Compiled::session`]).
    ///
    /// ```
    /// use irad::{RunOptions, Val};
    ///
    /// let src = irad::Source::new("f.irad", "fn f(n: i64) -> i64 { 100 / n }");
    /// let m = irad::load(&src)?;
    /// let f = irad::find_function(&src, &m, "f")?;
    /// let c = irad::jit_primal(&m)?;
    /// let v = c.call(f, &[Val::I64(7)], &RunOptions::default())?;
    /// assert_eq!(v.display(c.module()), "14");
    /// // Division by zero is an error returned to the caller, not a signal.
    /// let err = c.call(f, &[Val::I64(0)], &RunOptions::default()).unwrap_err();
    /// assert!(err.to_string().contains("division by zero"), "{err}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn call(&self, f: FuncId, args: &[Val], opts: &RunOptions) -> Result<Val, CompiledError> {
        Ok(self.jit.run(f, args, opts)?)
    }

    /// A runtime context for calls that share tapes, given back when
    /// dropped: `@f.rev.fwd`, then `@f.rev.back` with the seed.
    ///
    /// ```
    /// use irad::Val;
    ///
    /// let src = irad::Source::new("f.irad", "fn f(x: f64) -> f64 { x * sin(x) }");
    /// let m = irad::load(&src)?;
    /// let f = irad::find_function(&src, &m, "f")?;
    /// let registry = irad::rules::Registry::new();
    /// let c = irad::jit_reverse(&m, &[f], &registry)?;
    /// let (fwd, back) = (c.func("f.rev.fwd").ok_or("no fwd")?, c.func("f.rev.back").ok_or("no back")?);
    /// let mut s = c.session();
    /// let y = s.run(fwd, &[Val::F64(2.0)], &Default::default())?;
    /// let dx = s.run(back, &[Val::F64(1.0)], &Default::default())?;
    /// assert_eq!(y.display(c.module()), format!("{:?}", 2.0 * 2.0f64.sin()));
    /// assert_eq!(dx.display(c.module()), format!("{:?}", 2.0f64.sin() + 2.0 * 2.0f64.cos()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn session(&self) -> JitSession<'_> {
        self.jit.session()
    }
}

/// `module` normalised and compiled as it is: its functions only.
///
/// ```
/// let m = irad::ir::text::parse_module(
///     "func @twice(%x: f64) -> f64 {\n#1:\n  %2 = call add(%x, %x) :: f64\n  return %2\n}\n",
/// )?;
/// let c = irad::jit_primal(&m)?;
/// let twice = c.func("twice").ok_or("no @twice")?;
/// let v = c.call(twice, &[irad::Val::F64(1.25)], &Default::default())?;
/// assert_eq!(v.display(c.module()), "2.5");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn jit_primal(module: &Module) -> Result<Compiled, CompiledError> {
    let mut m = module.clone();
    normalise_and(&mut m, &mut [], PART_STMTS)?;
    Ok(Compiled {
        jit: SharedJit::new(m, None)?,
    })
}

/// `module` normalised, with `@f.rev` (and its pieces) for each of `funcs`
/// (SYNTAX.md's gradient convention: the arguments, a shadow per array, the
/// seed; returns the value and the scalar gradients), compiled.
/// The module documentation has an example with a module built by the
/// builder; here an array argument, whose gradient is added into its shadow:
///
/// ```
/// use irad::Val;
/// use irad::ir::interp::{ArrayData, ArrayRef};
///
/// let src = irad::Source::new("s.irad", "fn s(x: [f64]) -> f64 { x[0] * x[1] }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "s")?;
/// let registry = irad::rules::Registry::new();
/// let c = irad::jit_reverse(&m, &[f], &registry)?;
/// let rev = c.func("s.rev").ok_or("no @s.rev")?;
/// let shadow = ArrayRef::new(ArrayData::F64(vec![0.0, 0.0]));
/// let x = Val::f64_array(vec![3.0, 4.0]);
/// let out = c.call(rev, &[x, Val::Array(shadow.clone()), Val::F64(1.0)], &Default::default())?;
/// assert_eq!(out.display(c.module()), "(12.0,)");
/// assert_eq!(Val::Array(shadow).display(c.module()), "[4.0, 3.0]");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn jit_reverse(
    module: &Module,
    funcs: &[FuncId],
    registry: &Registry,
) -> Result<Compiled, CompiledError> {
    let jit = SharedJit::with_owner(Arc::new(registry.clone()), |registry| {
        let mut m = module.clone();
        let mut stage = ReverseStage::new(Reverse::new(registry), funcs.to_vec(), None);
        // An empty `funcs` derives nothing (a stage's empty roots mean all).
        let stages = if funcs.is_empty() {
            &mut [][..]
        } else {
            &mut [Step::Stage(&mut stage)][..]
        };
        normalise_and(&mut m, stages, PART_STMTS)?;
        let provider: Box<dyn RuleProvider + Send + '_> = Box::new(stage.rev);
        Ok::<_, CompiledError>((m, Some(provider)))
    })?;
    Ok(Compiled { jit })
}

/// `module` normalised, with the forward rule with `width` lanes (`@f.fwd`,
/// `@f.fwdN` for N > 1, `@f.fwds` for sparse) of each of `funcs`, compiled.
///
/// ```
/// use irad::Val;
///
/// let src = irad::Source::new("f.irad", "fn f(x: f64) -> f64 { x * x * x }");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "f")?;
/// let registry = irad::rules::Registry::new();
/// let c = irad::jit_forward(&m, &[f], irad::ir::Lanes::ONE, &registry)?;
/// let fwd = c.func("f.fwd").ok_or("no @f.fwd")?;
/// let x = Val::Dual(vec![Val::F64(2.0), Val::F64(1.0)].into());
/// let y = c.call(fwd, &[x], &Default::default())?;
/// assert_eq!(y.display(c.module()), "dual(8.0, 12.0)");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn jit_forward(
    module: &Module,
    funcs: &[FuncId],
    width: irad_ir::Lanes,
    registry: &Registry,
) -> Result<Compiled, CompiledError> {
    let jit = SharedJit::with_owner(Arc::new(registry.clone()), |registry| {
        let mut m = module.clone();
        let mut stage = ForwardStage::new(Forward::new(registry), funcs.to_vec(), width);
        // An empty `funcs` derives nothing (a stage's empty roots mean all).
        let stages = if funcs.is_empty() {
            &mut [][..]
        } else {
            &mut [Step::Stage(&mut stage)][..]
        };
        normalise_and(&mut m, stages, PART_STMTS)?;
        let provider: Box<dyn RuleProvider + Send + '_> = Box::new(stage.fwd);
        Ok::<_, CompiledError>((m, Some(provider)))
    })?;
    Ok(Compiled { jit })
}

/// Which AD mode a compiled gradient uses.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forward mode: ceil(n / width) passes of `@f.fwdW`.
    Forward,
    /// Reverse mode: `@f.rev.fwd` then `@f.rev.back`.
    Reverse,
}

pub(crate) enum Plan {
    Forward(irad_passes::forward::grad::ForwardPlan),
    Reverse(irad_passes::reverse::grad::ReversePlan),
}

/// A gradient derived and compiled once, run many times: what `irad bench`
/// times and what an embedder keeps. Its results are those of
/// [`crate::grad_forward`] / [`crate::grad_reverse`] with the JIT. It owns
/// what it needs and is `Send + Sync`: threads call one at once through
/// `&self`, each call with its own tapes, arena and stack.
pub struct CompiledGradient {
    pub(crate) jit: SharedJit,
    pub(crate) plan: Plan,
    /// `f` in the compiled module.
    pub(crate) func: FuncId,
    /// Which arguments the gradient is taken with respect to.
    pub(crate) wrt: Vec<bool>,
    /// The entry points of typed calls, made on the first.
    pub(crate) typed: OnceLock<Result<crate::typed::TypedPlan, String>>,
    /// What the strong version is derived from (`None` in the strong
    /// version itself): the module as given and the request.
    pub(crate) recipe: Option<Box<StrongRecipe>>,
    /// The strong version, derived and compiled the first time a run's
    /// gradient has a NaN (docs/rules.md, "Infinities and NaN").
    pub(crate) strong: OnceLock<Result<Box<CompiledGradient>, String>>,
}

/// What [`jit_gradient`] derives the strong version of a gradient from.
pub(crate) struct StrongRecipe {
    module: Module,
    registry: Registry,
    mode: crate::Mode,
    opts: irad_passes::forward::grad::GradOptions,
    schedule: irad_passes::optimise::Strategy,
}

impl CompiledGradient {
    /// The module with `f`, its derived functions and any rule added since.
    ///
    /// ```
    /// use irad::{GradRequest, Val};
    ///
    /// let src = irad::Source::new("f.irad", "fn f(x: f64, y: f64) -> f64 { x * x * y }");
    /// let m = irad::load(&src)?;
    /// let f = irad::find_function(&src, &m, "f")?;
    /// let registry = irad::rules::Registry::new();
    /// let args = [Val::F64(3.0), Val::F64(2.0)];
    /// let g = irad::jit_gradient(&m, &registry, &GradRequest::new(f, &args))?;
    /// assert_eq!(g.module()[g.func()].name, "f");
    /// assert!(g.module().len() > m.len()); // the reverse pieces were added
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn module(&self) -> &Module {
        self.jit.module()
    }

    /// The differentiated function (its id in [`CompiledGradient::module`],
    /// the same as in the module it was made from).
    ///
    /// ```
    /// use irad::{GradRequest, Val};
    ///
    /// let src = irad::Source::new("f.irad", "fn f(x: f64, y: f64) -> f64 { x * x * y }");
    /// let m = irad::load(&src)?;
    /// let f = irad::find_function(&src, &m, "f")?;
    /// let registry = irad::rules::Registry::new();
    /// let args = [Val::F64(3.0), Val::F64(2.0)];
    /// let g = irad::jit_gradient(&m, &registry, &GradRequest::new(f, &args))?;
    /// assert_eq!(g.func(), f);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn func(&self) -> FuncId {
        self.func
    }

    /// In reverse mode, the loops of the derived pieces that the request's
    /// tape limit or checkpoint schedule asked to checkpoint but that are
    /// not checkpointed and record something per iteration: their tape
    /// grows with the run (each printable as a warning by
    /// [`crate::unbounded_warning`]; [`crate::BenchReport`] holds the same
    /// list). Empty in forward mode.
    pub fn unbounded_loops(&self) -> &[irad_passes::reverse::UnboundedLoop] {
        match &self.plan {
            Plan::Reverse(p) => p.unbounded_loops(),
            Plan::Forward(_) => &[],
        }
    }

    /// The value and gradient at `args`, which must have the types (and, for
    /// forward mode, are best of the shapes) the gradient was compiled for.
    /// Run it as often as needed: derivation and compilation happened once.
    ///
    /// ```
    /// use irad::{GradRequest, Val};
    ///
    /// let src = irad::Source::new("f.irad", "fn f(x: f64, y: f64) -> f64 { x * x * y }");
    /// let m = irad::load(&src)?;
    /// let f = irad::find_function(&src, &m, "f")?;
    /// let registry = irad::rules::Registry::new();
    /// let args = [Val::F64(3.0), Val::F64(2.0)];
    /// let g = irad::jit_gradient(&m, &registry, &GradRequest::new(f, &args))?;
    /// for (x, dx) in [(3.0, 12.0), (1.0, 4.0)] {
    ///     let r = g.run(&[Val::F64(x), Val::F64(2.0)], &Default::default())?;
    ///     let m = g.module();
    ///     assert_eq!(r.gradient[0].as_ref().map(|d| d.display(m)), Some(format!("{dx:?}")));
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn run(
        &self,
        args: &[Val],
        opts: &RunOptions,
    ) -> Result<irad_passes::forward::grad::Gradient, irad_passes::forward::grad::GradError> {
        let g = self.run_plain(args, opts)?;
        if !crate::strong::any_nan(&g.gradient) {
            return Ok(g);
        }
        match self.strong_version(args)? {
            Some(s) => s.run_plain(args, opts),
            None => Ok(g),
        }
    }

    /// The strong version of this gradient (`None` when this is it),
    /// derived and compiled on the first call, for arguments like `args`.
    pub(crate) fn strong_version(
        &self,
        args: &[Val],
    ) -> Result<Option<&CompiledGradient>, GradError> {
        let Some(recipe) = &self.recipe else {
            return Ok(None);
        };
        let made = self.strong.get_or_init(|| {
            let m = crate::strong::strong_copy(&recipe.module);
            let req = GradRequest {
                mode: recipe.mode,
                opts: recipe.opts.clone(),
                schedule: Some(recipe.schedule.clone()),
                ..GradRequest::new(self.func, args)
            };
            derive(&m, &recipe.registry, &req)
                .map(Box::new)
                .map_err(|e| e.to_string())
        });
        match made {
            Ok(s) => Ok(Some(s)),
            Err(msg) => Err(GradError::Invalid {
                loc: irad_ir::Location::default(),
                msg: msg.clone(),
            }),
        }
    }

    /// [`CompiledGradient::run`] without the strong fallback.
    fn run_plain(
        &self,
        args: &[Val],
        opts: &RunOptions,
    ) -> Result<irad_passes::forward::grad::Gradient, irad_passes::forward::grad::GradError> {
        let mut session = self.jit.session();
        session.with_stack(|s| match &self.plan {
            Plan::Forward(p) => p.run(s, args, opts),
            Plan::Reverse(p) => p.run(s, args, opts),
        })
    }

    /// Runs `f` itself (the primal) in the same compiled module.
    ///
    /// ```
    /// use irad::{GradRequest, Val};
    ///
    /// let src = irad::Source::new("f.irad", "fn f(x: f64, y: f64) -> f64 { x * x * y }");
    /// let m = irad::load(&src)?;
    /// let f = irad::find_function(&src, &m, "f")?;
    /// let registry = irad::rules::Registry::new();
    /// let args = [Val::F64(3.0), Val::F64(2.0)];
    /// let g = irad::jit_gradient(&m, &registry, &GradRequest::new(f, &args))?;
    /// let v = g.run_primal(&args, &Default::default())?;
    /// assert_eq!(v.display(g.module()), "18.0");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn run_primal(&self, args: &[Val], opts: &RunOptions) -> Result<Val, RunError> {
        self.jit.run(self.func, args, opts)
    }

    /// Compiles everything the gradient and the primal run, so that the first
    /// run does not pay for it.
    ///
    /// ```
    /// use irad::{GradRequest, Val};
    ///
    /// let src = irad::Source::new("f.irad", "fn f(x: f64, y: f64) -> f64 { x * x * y }");
    /// let m = irad::load(&src)?;
    /// let f = irad::find_function(&src, &m, "f")?;
    /// let registry = irad::rules::Registry::new();
    /// let args = [Val::F64(3.0), Val::F64(2.0)];
    /// let g = irad::jit_gradient(&m, &registry, &GradRequest::new(f, &args))?;
    /// g.compile()?;
    /// let r = g.run(&args, &Default::default())?;
    /// assert_eq!(r.value.display(g.module()), "18.0");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn compile(&self) -> Result<(), CodegenError> {
        self.jit.compile(self.func)?;
        let ids: Vec<FuncId> = self.plan_funcs();
        for id in ids {
            self.jit.compile(id)?;
        }
        Ok(())
    }

    fn plan_funcs(&self) -> Vec<FuncId> {
        match &self.plan {
            Plan::Forward(p) => vec![p.entry()],
            Plan::Reverse(p) => {
                let (a, b) = p.pieces();
                vec![a, b]
            }
        }
    }
}

/// The gradient `req` asks for, kept compiled: `req.func` of `module`
/// normalised, its derived functions built in `req.mode` for arguments like
/// `req.args` (with `req.opts.wrt` and, forward, `req.opts.lanes`) and
/// optimised by `req.schedule`, all kept in a JIT (compiled on first run, or
/// by [`CompiledGradient::compile`]); `req.opts.exec` is not used.
/// An error converts to a located [`crate::Error`] with [`crate::grad_error`].
///
/// ```
/// use irad::{GradOptions, GradRequest, Mode, Source};
///
/// let src = Source::new("r.irad", "fn r(x: [f64]) -> f64 {\n    let mut s = 0.0;\n    for i in 0..len(x) { s = s + x[i] * x[i]; }\n    s\n}\n");
/// let m = irad::load(&src)?;
/// let f = irad::find_function(&src, &m, "r")?;
/// let args = irad::parse_args(&Source::new("<args>", "[1.0, 2.0, 3.0]"), &m, f)?;
/// let registry = irad::rules::Registry::new();
/// let lanes = irad::ir::Lanes::dense(3).expect("3 is not 0");
/// let opts = GradOptions { lanes, ..GradOptions::default() };
/// for mode in [Mode::Forward, Mode::Reverse] {
///     let req = GradRequest { mode, opts: opts.clone(), ..GradRequest::new(f, &args) };
///     let g = irad::jit_gradient(&m, &registry, &req).map_err(|e| irad::grad_error(&src, e))?;
///     let r = g.run(&args, &Default::default()).map_err(|e| irad::grad_error(&src, e))?;
///     assert_eq!(r.value.display(g.module()), "14.0");
///     assert_eq!(r.gradient[0].as_ref().map(|d| d.display(g.module())).as_deref(), Some("[2.0, 4.0, 6.0]"));
/// }
/// // With a schedule of one's own.
/// let f2 = irad::load(&Source::new("f.irad", "fn f(x: f64) -> f64 { x * 1.0 + 0.0 }"))?;
/// let id = f2.by_name("f").ok_or("no @f")?;
/// let args = [irad::Val::F64(2.0)];
/// let req = GradRequest {
///     schedule: Some(irad::read_schedule(Some("normalise(fold <+ identities); try(dce)"))?),
///     ..GradRequest::new(id, &args)
/// };
/// let g = irad::jit_gradient(&f2, &registry, &req).map_err(|e| irad::grad_error(&src, e))?;
/// let r = g.run(&args, &Default::default()).map_err(|e| irad::grad_error(&src, e))?;
/// assert_eq!(r.gradient[0].as_ref().map(|d| d.display(g.module())).as_deref(), Some("1.0"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn jit_gradient(
    module: &Module,
    registry: &Registry,
    req: &GradRequest<'_>,
) -> Result<CompiledGradient, GradError> {
    let mut g = derive(module, registry, req)?;
    if !module.strong_products() {
        g.recipe = Some(Box::new(StrongRecipe {
            module: module.clone(),
            registry: registry.clone(),
            mode: req.mode,
            opts: req.opts.clone(),
            schedule: req.schedule(),
        }));
    }
    Ok(g)
}

/// [`jit_gradient`] without the recipe of the strong version.
fn derive(
    module: &Module,
    registry: &Registry,
    req: &GradRequest<'_>,
) -> Result<CompiledGradient, GradError> {
    let (f, args, opts) = (req.func, req.args, &req.opts);
    let schedule = req.schedule();
    let mut plan = None;
    let made = SharedJit::with_owner(Arc::new(registry.clone()), |registry| {
        let mut m = module.clone();
        let mut opt = OptimiseStage::new(&schedule, Scope::From(m.len()));
        let provider: Box<dyn RuleProvider + Send + '_> = match req.mode {
            Mode::Forward => {
                let mut stage = ForwardGradStage::new(Forward::new(registry), f, args, opts);
                let mut stages = [Step::Stage(&mut stage), Step::Stage(&mut opt)];
                normalise_and(&mut m, &mut stages, opts.split_limit)?;
                plan = stage.plan.map(Plan::Forward);
                Box::new(stage.cache)
            }
            Mode::Reverse => {
                let mut stage = ReverseGradStage::new(Reverse::new(registry), f, args, opts);
                let mut stages = [Step::Stage(&mut stage), Step::Stage(&mut opt)];
                normalise_and(&mut m, &mut stages, opts.split_limit)?;
                plan = stage.plan.map(Plan::Reverse);
                Box::new(stage.cache)
            }
        };
        Ok::<_, CompiledError>((m, Some(provider)))
    });
    let jit = match made {
        Ok(jit) => jit,
        Err(CompiledError::Codegen(e)) => return Err(GradError::Run(RunError::new(e.loc, e.msg))),
        Err(e) => return Err(into_grad_error(e)),
    };
    let plan = plan.ok_or_else(|| GradError::Invalid {
        loc: irad_ir::Location::default(),
        msg: irad_ir::interp::internal_message("the gradient stage made no plan"),
    })?;
    let wrt = (0..args.len())
        .map(|i| opts.wrt.as_ref().is_none_or(|w| w.contains(&i)))
        .collect();
    Ok(CompiledGradient {
        jit,
        plan,
        func: f,
        wrt,
        typed: OnceLock::new(),
        recipe: None,
        strong: OnceLock::new(),
    })
}

/// Runs the normalisation pipeline, then `stages`, over `m` through the pass
/// manager (verification in debug builds and tests); a stage's error is the
/// variant of its module.
///
/// Then the huge blocks of what `stages` derived are split, at `split_limit`
/// statements ([`split_from`]).
pub(crate) fn normalise_and(
    m: &mut Module,
    stages: &mut [Step<'_>],
    split_limit: usize,
) -> Result<(), CompiledError> {
    let first = m.len();
    normalise_only_and(m, stages)?;
    split_from(m, first, split_limit)
}

/// Splits the huge blocks of the functions from number `first` on (those
/// a derivation added) into functions of their own, as `irad grad` does
/// (`irad_passes::split`, timed as part of the `codegen` stage): the code
/// generator then compiles one stretch at a time.
fn split_from(m: &mut Module, first: usize, limit: usize) -> Result<(), CompiledError> {
    let funcs: Vec<FuncId> = m.func_ids().skip(first).collect();
    irad_ir::timings::time(irad_ir::timings::Stage::Codegen, || {
        irad_passes::split::split_huge_blocks_at(m, &funcs, limit)
    })
    .map(drop)
    .map_err(|e| {
        CompiledError::Codegen(CodegenError::internal(format!(
            "splitting a huge block: {e}"
        )))
    })
}

/// [`normalise_and`] without the split.
fn normalise_only_and(m: &mut Module, stages: &mut [Step<'_>]) -> Result<(), CompiledError> {
    let mut pipeline = irad_passes::manager::steps(&irad_passes::normalise_pipeline());
    pipeline.extend(stages.iter_mut().map(|step| match step {
        Step::Pass(id) => Step::Pass(*id),
        Step::Stage(stage) => Step::Stage(&mut **stage),
    }));
    let opts = irad_passes::PipelineOptions::default();
    match irad_passes::run_pipeline(m, &mut pipeline, &opts) {
        Ok(_) => Ok(()),
        Err(PassError::Forward(err)) => Err(CompiledError::Forward(*err)),
        Err(PassError::Reverse(err)) => Err(CompiledError::Reverse(*err)),
        Err(err) => Err(CompiledError::Pass(err)),
    }
}

/// A pipeline's error as a gradient error: the gradient stage's own, or (a
/// failed normalisation or schedule) [`GradError::Invalid`] with its message.
pub(crate) fn into_grad_error(err: CompiledError) -> GradError {
    let invalid = |msg: String| GradError::Invalid {
        loc: irad_ir::Location::default(),
        msg,
    };
    match err {
        CompiledError::Pass(PassError::Grad(err)) => *err,
        CompiledError::Forward(err) => GradError::Forward(err),
        CompiledError::Reverse(err) => GradError::Reverse(err),
        CompiledError::Run(err) => GradError::Run(err),
        other => invalid(other.to_string()),
    }
}
