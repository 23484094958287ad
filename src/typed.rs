//! Typed calls of a [`CompiledGradient`]: f64 and i64 scalars and `&[f64]`
//! slices in, the value returned and the gradient written into the
//! caller's buffers, without boxed [`Val`]s.
//!
//! Assumes: the gradient's function takes only `f64`, `i64` and `[f64]`
//! parameters (others get an error naming the boxed path) and returns `f64`
//! (every gradient does). Guarantees: the results are those of
//! [`CompiledGradient::run`] bit for bit (the same compiled functions, on
//! copies of the arrays, as the boxed path runs); a reverse-mode gradient's
//! call allocates nothing once its context's buffers have grown (the slices
//! are copied into reused buffers, so compiled code never writes into the
//! caller's `&[f64]`; the array gradients are accumulated in place in the
//! caller's `&mut [f64]`). Forward-mode gradients take the boxed path
//! inside (one allocation per argument and result).

use crate::codegen::{Entry, JitSession, Scratch};
use crate::compiled::{CompiledGradient, Plan};
use irad_ir::Location;
use irad_ir::interp::{RunError, RunOptions, Val};
use irad_ir::types::{Scalar, Type};
use irad_passes::forward::grad::GradError;

/// An argument of a typed call: a borrowed value of an `f64`, `i64` or
/// `[f64]` parameter.
#[derive(Copy, Clone, Debug)]
pub enum ArgRef<'a> {
    /// An `f64`.
    F64(f64),
    /// An `i64`.
    I64(i64),
    /// An `[f64]`, read only: compiled code runs on a copy.
    Slice(&'a [f64]),
}

/// Where a typed call writes one argument's derivative.
#[derive(Debug)]
pub enum GradOut<'a> {
    /// The derivative with respect to an `f64` argument.
    F64(&'a mut f64),
    /// The gradient with respect to an `[f64]` argument, of its length
    /// (overwritten, not added to).
    Slice(&'a mut [f64]),
    /// Not wanted (and the only choice for an `i64` argument, or one the
    /// gradient is not taken with respect to).
    Skip,
}

/// A parameter's kind in a typed call.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Kind {
    F64,
    I64,
    Slice,
}

/// How typed calls of one gradient run.
#[derive(Debug)]
pub(crate) struct TypedPlan {
    kinds: Vec<Kind>,
    /// Whether each argument has a derivative to write.
    wrt: Vec<bool>,
    primal: Entry,
    grad: TypedGrad,
}

#[derive(Debug)]
enum TypedGrad {
    /// The forward sweep (the arguments, then a shadow per slice; returns
    /// the value) and the pullback (the seed; returns a cotangent per f64
    /// argument).
    Reverse {
        fwd: Entry,
        back: Entry,
        ncot: usize,
    },
    /// Through [`CompiledGradient::run`].
    Boxed,
}

impl TypedPlan {
    /// The plan of `g`, compiling what it calls; an error names what does
    /// not fit a typed call.
    pub(crate) fn new(g: &CompiledGradient) -> Result<TypedPlan, String> {
        let m = g.jit.module();
        let func = m.get(g.func).ok_or("the gradient's function is missing")?;
        let params = func.param_types();
        let mut kinds = Vec::with_capacity(params.len());
        for (i, ty) in params.iter().enumerate() {
            kinds.push(match ty {
                Type::F64 => Kind::F64,
                Type::I64 => Kind::I64,
                Type::Array(Scalar::F64) => Kind::Slice,
                _ => {
                    return Err(format!(
                        "argument {} of @{} has type {ty}: typed calls take f64, i64 and [f64] \
                         arguments (use `CompiledGradient::run`)",
                        i + 1,
                        func.name
                    ));
                }
            });
        }
        if func.ret != Type::F64 {
            return Err(format!("@{} does not return f64", func.name));
        }
        let wrt = kinds
            .iter()
            .zip(&g.wrt)
            .map(|(k, w)| *k != Kind::I64 && *w)
            .collect();
        let entry = |f| g.jit.entry(f).map_err(|e| e.to_string());
        let primal = entry(g.func)?;
        let grad = match &g.plan {
            Plan::Reverse(p) => {
                let (fwd, back) = p.pieces();
                let nslices = kinds.iter().filter(|k| **k == Kind::Slice).count();
                let ncot = kinds.iter().filter(|k| **k == Kind::F64).count();
                let mut fwd_params = params.clone();
                fwd_params.extend((0..nslices).map(|_| Type::Array(Scalar::F64)));
                let fits = m
                    .get(fwd)
                    .is_some_and(|f| f.param_types() == fwd_params && f.ret == Type::F64)
                    && m.get(back).is_some_and(|f| {
                        f.param_types() == [Type::F64] && f.ret == Type::leaf_pack(Type::F64, ncot)
                    });
                if fits {
                    TypedGrad::Reverse {
                        fwd: entry(fwd)?,
                        back: entry(back)?,
                        ncot,
                    }
                } else {
                    TypedGrad::Boxed
                }
            }
            Plan::Forward(_) => TypedGrad::Boxed,
        };
        Ok(TypedPlan {
            kinds,
            wrt,
            primal,
            grad,
        })
    }
}

/// A run error at the function, for arguments that do not fit.
fn misuse(g: &CompiledGradient, msg: impl Into<String>) -> RunError {
    let m = g.jit.module();
    let loc = Location {
        func: m.get(g.func).map(|f| f.name.as_str().into()),
        ..Location::default()
    };
    RunError::new(loc, msg)
}

impl CompiledGradient {
    fn typed_plan(&self) -> Result<&TypedPlan, RunError> {
        self.typed
            .get_or_init(|| TypedPlan::new(self))
            .as_ref()
            .map_err(|msg| misuse(self, msg.clone()))
    }

    /// Checks `args` (and `grads`, when given) against the plan.
    fn check_typed(
        &self,
        plan: &TypedPlan,
        args: &[ArgRef<'_>],
        grads: Option<&[GradOut<'_>]>,
    ) -> Result<(), RunError> {
        if args.len() != plan.kinds.len() {
            return Err(misuse(
                self,
                format!(
                    "{} arguments given, the function takes {}",
                    args.len(),
                    plan.kinds.len()
                ),
            ));
        }
        if let Some(grads) = grads
            && grads.len() != args.len()
        {
            return Err(misuse(
                self,
                format!(
                    "{} gradient outputs for {} arguments",
                    grads.len(),
                    args.len()
                ),
            ));
        }
        for (i, (a, k)) in args.iter().zip(&plan.kinds).enumerate() {
            let fits = matches!(
                (a, k),
                (ArgRef::F64(_), Kind::F64)
                    | (ArgRef::I64(_), Kind::I64)
                    | (ArgRef::Slice(_), Kind::Slice)
            );
            if !fits {
                return Err(misuse(
                    self,
                    format!("argument {} is {a:?}, the parameter is {k:?}", i + 1),
                ));
            }
            let Some(out) = grads.map(|g| &g[i]) else {
                continue;
            };
            let ok = match (out, a) {
                (GradOut::Skip, _) => true,
                (_, _) if !plan.wrt[i] => false,
                (GradOut::F64(_), ArgRef::F64(_)) => true,
                (GradOut::Slice(d), ArgRef::Slice(x)) => d.len() == x.len(),
                _ => false,
            };
            if !ok {
                return Err(misuse(
                    self,
                    format!(
                        "gradient output {} does not fit argument {} ({a:?}{})",
                        i + 1,
                        i + 1,
                        if plan.wrt[i] {
                            ""
                        } else {
                            ", without a derivative: pass GradOut::Skip"
                        }
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The value at `args` and its gradient, written into `grads` (one per
    /// argument, [`GradOut::Skip`] for those not wanted): the typed,
    /// allocation-free counterpart of [`CompiledGradient::run`] for
    /// functions of `f64`, `i64` and `[f64]` arguments, with its results
    /// bit for bit. Arguments of other shapes, or outputs that do not fit
    /// them, are an error at the function.
    ///
    /// ```
    /// use irad::{ArgRef, GradOut, GradRequest, Val};
    ///
    /// let src = irad::Source::new("f.irad", "fn f(x: f64, w: [f64]) -> f64 {\n    let mut s = 0.0;\n    for i in 0..len(w) { s = s + w[i] * x; }\n    s * x\n}\n");
    /// let m = irad::load(&src)?;
    /// let f = irad::find_function(&src, &m, "f")?;
    /// let registry = irad::rules::Registry::new();
    /// let args = [Val::F64(2.0), Val::f64_array(vec![1.0, 2.0])];
    /// let g = irad::jit_gradient(&m, &registry, &GradRequest::new(f, &args))?;
    /// let (mut dx, mut dw) = (0.0, [0.0; 2]);
    /// let w = [1.0, 2.0];
    /// let y = g.gradient_into(
    ///     &[ArgRef::F64(2.0), ArgRef::Slice(&w)],
    ///     &mut [GradOut::F64(&mut dx), GradOut::Slice(&mut dw)],
    /// )?;
    /// assert_eq!((y, dx, dw), (12.0, 12.0, [4.0, 4.0]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn gradient_into(
        &self,
        args: &[ArgRef<'_>],
        grads: &mut [GradOut<'_>],
    ) -> Result<f64, RunError> {
        let plan = self.typed_plan()?;
        self.check_typed(plan, args, Some(grads))?;
        let TypedGrad::Reverse { fwd, back, ncot } = plan.grad else {
            return self.boxed_into(args, grads);
        };
        let res = {
            let mut session = self.jit.session();
            let mut sc = std::mem::take(session.scratch());
            let res =
                session.try_in_place(|s| reverse_into(s, &mut sc, args, grads, fwd, back, ncot));
            *session.scratch() = sc;
            res
        };
        if res.is_err() || !grads.iter().any(has_nan) {
            return res;
        }
        // A NaN: the strong version's gradient instead (docs/rules.md,
        // "Infinities and NaN"), derived on the first NaN.
        match self
            .strong_version(&boxed_args(args))
            .map_err(|e| misuse(self, e.to_string()))?
        {
            Some(s) => s.gradient_into(args, grads),
            None => res,
        }
    }

    /// The value at `args` (of `f64`, `i64` and `[f64]` parameters): the
    /// typed, allocation-free counterpart of
    /// [`CompiledGradient::run_primal`].
    ///
    /// ```
    /// use irad::{ArgRef, GradRequest, Val};
    ///
    /// let src = irad::Source::new("f.irad", "fn f(x: f64, y: f64) -> f64 { x * y + sin(x) }");
    /// let m = irad::load(&src)?;
    /// let f = irad::find_function(&src, &m, "f")?;
    /// let registry = irad::rules::Registry::new();
    /// let g = irad::jit_gradient(&m, &registry, &GradRequest::new(f, &[Val::F64(0.0), Val::F64(0.0)]))?;
    /// assert_eq!(g.value(&[ArgRef::F64(2.0), ArgRef::F64(3.0)])?, 6.0 + 2.0f64.sin());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn value(&self, args: &[ArgRef<'_>]) -> Result<f64, RunError> {
        let plan = self.typed_plan()?;
        self.check_typed(plan, args, None)?;
        let mut session = self.jit.session();
        let mut sc = std::mem::take(session.scratch());
        let res = session.try_in_place(|s| primal_into(s, &mut sc, args, plan.primal));
        *session.scratch() = sc;
        res
    }

    /// [`CompiledGradient::gradient_into`] through the boxed path.
    fn boxed_into(&self, args: &[ArgRef<'_>], grads: &mut [GradOut<'_>]) -> Result<f64, RunError> {
        let vals = boxed_args(args);
        let r = self
            .run(&vals, &RunOptions::default())
            .map_err(|e| match e {
                GradError::Run(e) => e,
                GradError::Invalid { loc, msg } => RunError::new(loc, msg),
                other => misuse(self, other.to_string()),
            })?;
        for (out, d) in grads.iter_mut().zip(&r.gradient) {
            match (out, d) {
                (GradOut::F64(o), Some(Val::F64(x))) => **o = *x,
                (GradOut::Slice(o), Some(Val::Array(a))) => {
                    if let irad_ir::interp::ArrayData::F64(xs) = &*a.0.borrow() {
                        o.copy_from_slice(xs);
                    }
                }
                _ => {}
            }
        }
        match r.value {
            Val::F64(y) => Ok(y),
            other => Err(misuse(
                self,
                format!("the value is {}, not f64", other.kind()),
            )),
        }
    }
}

/// `args` as boxed values.
fn boxed_args(args: &[ArgRef<'_>]) -> Vec<Val> {
    args.iter()
        .map(|a| match a {
            ArgRef::F64(x) => Val::F64(*x),
            ArgRef::I64(n) => Val::I64(*n),
            ArgRef::Slice(xs) => Val::f64_array(xs.to_vec()),
        })
        .collect()
}

/// Whether a derivative written into `out` has a NaN.
fn has_nan(out: &GradOut<'_>) -> bool {
    match out {
        GradOut::F64(x) => x.is_nan(),
        GradOut::Slice(xs) => crate::strong::slice_has_nan(xs),
        GradOut::Skip => false,
    }
}

/// Fills `sc.copies` with copies of the slices of `args`, then `extra`
/// zeros, and `sc.words` with the leaves of `args` (slices pointing at
/// their copies). Returns the offset of the zeros in `sc.copies`.
fn flatten_args(sc: &mut Scratch, args: &[ArgRef<'_>], extra: usize) -> usize {
    let copied: usize = args
        .iter()
        .map(|a| match a {
            ArgRef::Slice(xs) => xs.len(),
            _ => 0,
        })
        .sum();
    sc.copies.clear();
    sc.copies.resize(copied + extra, 0.0);
    let mut at = 0;
    for a in args {
        if let ArgRef::Slice(xs) = a {
            sc.copies[at..at + xs.len()].copy_from_slice(xs);
            at += xs.len();
        }
    }
    sc.words.clear();
    let base = sc.copies.as_mut_ptr();
    let mut at = 0;
    for a in args {
        match a {
            ArgRef::F64(x) => sc.words.push(x.to_bits()),
            ArgRef::I64(n) => sc.words.push(*n as u64),
            ArgRef::Slice(xs) => {
                // SAFETY: `at + xs.len() <= copied`, within `copies`.
                let p = unsafe { base.add(at) };
                sc.words.extend([p as u64, xs.len() as u64]);
                at += xs.len();
            }
        }
    }
    copied
}

/// The primal at `args` through its trampoline.
fn primal_into(
    s: &mut JitSession<'_>,
    sc: &mut Scratch,
    args: &[ArgRef<'_>],
    primal: Entry,
) -> Result<f64, RunError> {
    flatten_args(sc, args, 0);
    sc.rets.clear();
    sc.rets.push(0);
    // SAFETY: the words are the leaves of the primal's parameters (checked
    // kinds: f64, i64, [f64] as pointer and length into `sc.copies`, alive
    // and ours to write); one f64 result.
    unsafe { s.call(primal, &sc.words, &mut sc.rets)? };
    Ok(f64::from_bits(sc.rets[0]))
}

/// The reverse sweep pair at `args`, the gradient written into `grads`.
fn reverse_into(
    s: &mut JitSession<'_>,
    sc: &mut Scratch,
    args: &[ArgRef<'_>],
    grads: &mut [GradOut<'_>],
    fwd: Entry,
    back: Entry,
    ncot: usize,
) -> Result<f64, RunError> {
    // Shadows: the caller's buffers, zeroed, or zeros of our own.
    let own: usize = args
        .iter()
        .zip(grads.iter())
        .map(|(a, g)| match (a, g) {
            (ArgRef::Slice(xs), GradOut::Skip) => xs.len(),
            _ => 0,
        })
        .sum();
    let mut at = flatten_args(sc, args, own);
    let base = sc.copies.as_mut_ptr();
    for (a, g) in args.iter().zip(grads.iter_mut()) {
        let ArgRef::Slice(xs) = a else { continue };
        let p = match g {
            GradOut::Slice(d) => {
                d.fill(0.0);
                d.as_mut_ptr()
            }
            _ => {
                // SAFETY: `at + xs.len()` is within `copies` (counted in `own`).
                let p = unsafe { base.add(at) };
                at += xs.len();
                p
            }
        };
        sc.words.extend([p as u64, xs.len() as u64]);
    }
    sc.rets.clear();
    sc.rets.resize(ncot.max(1), 0);
    // SAFETY: the words are the forward sweep's parameters (the arguments,
    // then a shadow of each slice's length: the caller's `&mut` buffer or
    // ours, alive until the pullback has run); one f64 result.
    unsafe { s.call(fwd, &sc.words, &mut sc.rets[..1])? };
    let value = f64::from_bits(sc.rets[0]);
    // SAFETY: the pullback takes the seed and returns `ncot` f64s.
    unsafe { s.call(back, &[1f64.to_bits()], &mut sc.rets[..ncot])? };
    let mut k = 0;
    for (a, g) in args.iter().zip(grads.iter_mut()) {
        if let ArgRef::F64(_) = a {
            if let GradOut::F64(d) = g {
                **d = f64::from_bits(sc.rets[k]);
            }
            k += 1;
        }
    }
    Ok(value)
}
