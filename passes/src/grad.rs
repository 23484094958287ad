//! The gradient request and result both AD modes share: how a gradient is
//! asked for ([`GradOptions`]), what it gives ([`Gradient`]) and why it fails
//! ([`GradError`]); and the check of a request against the function
//! (`check_request`), which both `forward::grad` and `reverse::grad` run
//! first.
//!
//! Assumes a verified module. Guarantees: a checked request has an f64
//! result, arguments of the parameter types, and sorted, distinct `wrt`
//! positions whose parameters have a tangent.

use crate::forward::ForwardError;
use irad_ir::interp::{ArrayRef, ErrorKind, MakeExecutor, RunError, RunOptions, Val};
use irad_ir::{FuncId, Lanes, Location, Module, Type};

/// How a gradient runs (`forward::grad::gradient`,
/// `reverse::grad::gradient`).
#[derive(Clone, Debug)]
pub struct GradOptions {
    /// Forward mode only (reverse mode ignores it): tangents carried per
    /// pass: [`Lanes::Dense`] N (the batch width, 1 to
    /// [`irad_ir::MAX_WIDTH`]; no more are used than there are f64s to
    /// differentiate), or [`Lanes::Sparse`]: sparse mode, one pass whatever
    /// the number of f64s.
    pub lanes: Lanes,
    /// The argument positions to differentiate; `None`: every argument whose
    /// type has a tangent.
    pub wrt: Option<Vec<usize>>,
    /// Interpreter options (call-depth limit).
    pub run: RunOptions,
    /// Run activity analysis (docs/activity.md) while deriving: the default.
    /// Off, every value gets tangents and cotangents (for comparisons).
    pub activity: bool,
    /// Reverse mode only: the tape limit in bytes under which long loops are
    /// checkpointed (docs/reverse.md, "Checkpointing"); `None` (the
    /// default): no limit, only loops with a `checkpoint` statement are.
    pub tape_limit: Option<u64>,
    /// Reverse mode only: per-loop overrides of checkpointing
    /// (docs/schedules.md); empty (the default): none.
    pub checkpoints: crate::reverse::CheckpointSchedule,
    /// What runs the derived functions: the interpreter
    /// ([`irad_ir::interp::interpreter_with_rules`], the default) or compiled
    /// code.
    pub exec: MakeExecutor,
    /// The most statements a block of a derived function may hold before
    /// the facade splits it into functions of its own, so that the code
    /// generator compiles one stretch at a time ([`crate::split`]; the
    /// default [`crate::split::PART_STMTS`]). The results are the same at
    /// any limit.
    pub split_limit: usize,
    /// The most statements a block of one of the user's functions may hold
    /// before it is split the same way ahead of the derivation, so that each
    /// stretch is derived and optimised as a function of its own (default
    /// [`crate::split::PRIMAL_PART_STMTS`]); only `grad` and its variants in
    /// the facade do this. The results are the same at any limit.
    pub primal_split_limit: usize,
    /// Reverse mode only: told of each loop of
    /// [`Gradient::unbounded_loops`] as the derivation notes it, before
    /// the code it derives runs (`irad grad` and `irad bench` print their
    /// warnings so); `None` (the default): only the list after the run.
    pub on_unbounded: Option<crate::reverse::UnboundedHook>,
}

impl Default for GradOptions {
    fn default() -> GradOptions {
        GradOptions {
            lanes: Lanes::ONE,
            wrt: None,
            run: RunOptions::default(),
            exec: irad_ir::interp::interpreter_with_rules,
            activity: true,
            tape_limit: None,
            checkpoints: crate::reverse::CheckpointSchedule::default(),
            split_limit: crate::split::PART_STMTS,
            primal_split_limit: crate::split::PRIMAL_PART_STMTS,
            on_unbounded: None,
        }
    }
}

/// A value and its gradient.
#[derive(Clone, Debug)]
pub struct Gradient {
    /// The function's value.
    pub value: Val,
    /// Per argument: the gradient, a value of the argument's tangent type
    /// (`()` for tuple components without one), or `None` when the argument
    /// has no tangent or is not differentiated.
    pub gradient: Vec<Option<Val>>,
    /// How many passes were run: of the forward rule in forward mode; 1 (one
    /// sweep each way) in reverse mode.
    pub passes: usize,
    /// In reverse mode, the loops of the derived pieces that a tape limit
    /// or the checkpoint schedule asked to checkpoint but that are not
    /// checkpointed and record something per iteration (their tape grows
    /// with the run; [`crate::reverse::Reverse::unbounded_loops`], as the
    /// pieces were derived); empty in forward mode.
    pub unbounded_loops: Vec<crate::reverse::UnboundedLoop>,
}

/// Why a gradient could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum GradError {
    /// Deriving the forward rule failed.
    #[error(transparent)]
    Forward(#[from] ForwardError),
    /// Deriving the reverse rule failed.
    #[error(transparent)]
    Reverse(#[from] crate::reverse::ReverseError),
    /// Running it failed (a run-time error of the program).
    #[error(transparent)]
    Run(#[from] RunError),
    /// The request does not fit the function (arguments, `wrt`, result type).
    #[error("{msg}")]
    Invalid {
        /// Where: the function.
        loc: Location,
        /// What.
        msg: String,
    },
}

impl GradError {
    /// Whose fault it is: the derivation's or run's own kind, and for
    /// [`GradError::Invalid`] [`ErrorKind::Internal`] exactly when the
    /// message is an internal one (a stage that made nothing).
    pub fn kind(&self) -> ErrorKind {
        match self {
            GradError::Forward(e) => e.kind,
            GradError::Reverse(e) => e.kind,
            GradError::Run(e) => e.kind(),
            GradError::Invalid { msg, .. } => ErrorKind::of_message(msg),
        }
    }
}

/// A checked gradient request: where the function is, its parameter types,
/// and the sorted argument positions to differentiate.
#[derive(Clone, Debug)]
pub(crate) struct Request {
    pub floc: Location,
    pub params: Vec<Type>,
    pub wrt: Vec<usize>,
}

/// Checks a gradient request against `f`: an f64 result, arguments of the
/// parameter types, `wrt` positions with a tangent (all such by default).
pub(crate) fn check_request(
    module: &Module,
    f: FuncId,
    args: &[Val],
    wrt: Option<&[usize]>,
) -> Result<Request, GradError> {
    let func = module
        .get(f)
        .ok_or_else(|| invalid(Location::default(), "invalid function handle".into()))?;
    let floc = Location {
        func: Some(func.name.as_str().into()),
        pos: func.pos,
        ..Location::default()
    };
    let name = func.name.clone();
    let params = func.param_types();
    if func.ret != Type::F64 {
        return Err(invalid(
            floc,
            format!(
                "a gradient needs a function returning f64; @{name} returns {}",
                func.ret
            ),
        ));
    }
    if params.len() != args.len() {
        return Err(invalid(
            floc,
            format!(
                "@{name} takes {} argument{}, found {}",
                params.len(),
                if params.len() == 1 { "" } else { "s" },
                args.len()
            ),
        ));
    }
    for (i, (ty, arg)) in params.iter().zip(args).enumerate() {
        if !arg.has_type(ty, module) {
            return Err(invalid(
                floc,
                format!(
                    "argument {} of @{name} must be {ty}, found {}",
                    i + 1,
                    arg.type_text(module)
                ),
            ));
        }
    }
    let wrt: Vec<usize> = match wrt {
        None => (0..params.len())
            .filter(|&i| params[i].has_cotangent())
            .collect(),
        Some(list) => {
            for &i in list {
                let Some(ty) = params.get(i) else {
                    return Err(invalid(
                        floc,
                        format!(
                            "--wrt {i}: @{name} has {} argument{} (positions from 0)",
                            params.len(),
                            if params.len() == 1 { "" } else { "s" }
                        ),
                    ));
                };
                if !ty.has_cotangent() {
                    return Err(invalid(
                        floc,
                        format!(
                            "--wrt {i}: argument {i} of @{name} has type {ty}, which has no tangent"
                        ),
                    ));
                }
            }
            let mut list = list.to_vec();
            list.sort_unstable();
            list.dedup();
            list
        }
    };
    Ok(Request { floc, params, wrt })
}

pub(crate) fn invalid(loc: Location, msg: String) -> GradError {
    GradError::Invalid { loc, msg }
}

/// A fresh copy of `val`: arrays (also inside tuples and duals) get new
/// buffers.
pub fn deep_copy(val: &Val) -> Val {
    match val {
        Val::Array(a) => Val::Array(ArrayRef::new(a.0.borrow().clone())),
        Val::Tuple(vals) => Val::Tuple(vals.iter().map(deep_copy).collect()),
        Val::Dual(parts) => Val::Dual(parts.iter().map(deep_copy).collect()),
        other => other.clone(),
    }
}
