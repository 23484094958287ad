//! The primitive table: every primitive's IR name and signature.
//!
//! One row per primitive in [`PRIMS`]. The verifier, the parser's type
//! inference and the builder all type a call through [`Prim::result_type`]; the
//! interpreter's semantics live in `interp::eval`, the AD rules in `irad-rules`,
//! keyed by [`Prim`]. Adding a primitive means adding a variant and a row here,
//! then its semantics and rules; nothing else switches on the name.

use crate::types::{Lanes, Scalar, Type};
use crate::{MAX_NESTING, MAX_TYPE_SIZE, MAX_WIDTH};
use std::fmt;

/// A primitive operation.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
#[allow(missing_docs)] // each variant is the primitive of the same IR name
pub enum Prim {
    Add,
    Sub,
    Mul,
    Div,
    Neg,
    Pow,
    Powi,
    Abs,
    Min,
    Max,
    Copysign,
    Zmul,
    Sqrt,
    Exp,
    Log,
    Log1p,
    Expm1,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Atan2,
    Sinh,
    Cosh,
    Tanh,
    Erf,
    Floor,
    Ceil,
    Round,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    Select,
    Iadd,
    Isub,
    Imul,
    Idiv,
    Irem,
    Ineg,
    And,
    Or,
    Not,
    Sitofp,
    Fptosi,
    Tuple,
    Getfield,
    Alloc,
    Zeros,
    Length,
    Arrayref,
    Arrayset,
    Copy,
    Dual,
    Primal,
    Tangent,
    Frule,
    Push,
    Pop,
    Revfwd,
    Revback,
    Sonehot,
    Szero,
    Sscale,
    Sadd,
    Sdense,
    Sum,
    Dot,
    Axpy,
    Scale,
    Matvec,
    Matmul,
    Fill,
    Copyto,
    Gemm,
    Ssum,
    Sdot,
    Sfill,
    Sgemma,
    Sgemmb,
    Checkpoint,
    Same,
}

/// How a primitive is typed.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Sig {
    /// A fixed signature: these parameter types, this result.
    Fixed(&'static [Scalar], Scalar),
    /// `(f64, f64)`, `(i64, i64)` (and `(bool, bool)` when `bools`) to `bool`.
    Compare {
        /// Whether bools may be compared too (`eq`, `ne`).
        bools: bool,
    },
    /// `select(bool, T, T) -> T`.
    Select,
    /// `tuple(a, b, ...)`: the tuple of the operand types.
    Tuple,
    /// `getfield(t, k)` with a constant `k`: the k-th element type.
    Getfield,
    /// `alloc(n) :: [T]`: the annotation names the element type.
    Alloc,
    /// `zeros(n) -> [f64]`.
    Zeros,
    /// `length([T]) -> i64`.
    Length,
    /// `arrayref([T], i64) -> T`.
    Arrayref,
    /// `arrayset([T], i64, T) -> ()`.
    Arrayset,
    /// `copy([T]) -> [T]`.
    Copy,
    /// `dual(p, t1, ..., tN) -> dual<T, N>`: a primal and N tangents.
    Dual,
    /// `primal(dual<T, N>) -> T`.
    Primal,
    /// `tangent(dual<T, N>, k)` with a constant `k` in `0..N`: the k-th tangent.
    Tangent,
    /// `frule(f, N)` with a constant `N`: the forward rule of function value
    /// `f` at batch width N, found (or derived) at run time.
    Frule,
    /// `push(v) -> ()`: pushes `v` on the tape of its type.
    Push,
    /// `pop() :: T`: the annotation names the tape; pops its last value.
    Pop,
    /// `revfwd(f)`: the forward part of the reverse rule of function value
    /// `f`, of type [`Type::rev_fwd_fn`] of `f`'s, found (or derived) at run time.
    Revfwd,
    /// `revback(f)`: the pullback part of the reverse rule of function value
    /// `f`, of type [`Type::rev_back_fn`] of `f`'s, found (or derived) at run time.
    Revback,
    /// The sparse tangent builder (docs/ir.md, "Sparse tangents"):
    /// `sonehot(i64) -> sparse`, `szero() -> sparse`,
    /// `sscale(f64, sparse) -> sparse`, `sadd(sparse, sparse) -> sparse`,
    /// `sdense(sparse, i64) -> [f64]`, and the tangents of the bulk array
    /// primitives: `ssum([sparse]) -> sparse`, `sdot([f64], [sparse]) ->
    /// sparse`, `sfill([sparse], sparse)`, `sgemma(bool, bool, [sparse],
    /// [f64], i64, i64, i64, [sparse])`, `sgemmb(bool, bool, [f64], [sparse],
    /// i64, i64, i64, [sparse])` (see [`Prim::sparse_bulk`]). Not function
    /// values.
    Sparse,
    /// A bulk array primitive (docs/ir.md, "Bulk array primitives"), of the
    /// fixed signature [`Prim::bulk_params`]; not a function value.
    Bulk,
    /// `checkpoint(i64) -> ()`: a hint to reverse mode, doing nothing at run
    /// time (docs/reverse.md, "Checkpointing"); not a function value.
    Hint,
    /// `same([T], [T]) -> bool`: whether two arrays are one (a write to
    /// either is seen through the other); two empty arrays count as one.
    /// Reverse mode's checkpointed loops use it to restore arrays that may
    /// be one (docs/reverse.md, "Arrays one phi hands another"); not a
    /// function value.
    Same,
}

/// One row of the primitive table.
#[derive(Copy, Clone, Debug)]
pub struct PrimInfo {
    /// The primitive.
    pub prim: Prim,
    /// Its IR name.
    pub name: &'static str,
    /// Its signature.
    pub sig: Sig,
}

use Scalar::{Bool as B, F64 as F, I64 as I};

const F1: Sig = Sig::Fixed(&[F], F);
const F2: Sig = Sig::Fixed(&[F, F], F);
const I1: Sig = Sig::Fixed(&[I], I);
const I2: Sig = Sig::Fixed(&[I, I], I);

macro_rules! rows {
    ($($prim:ident $name:literal $sig:expr;)*) => {
        /// Every primitive, in declaration order.
        pub const PRIMS: &[PrimInfo] = &[$(PrimInfo { prim: Prim::$prim, name: $name, sig: $sig },)*];
    };
}

rows! {
    Add "add" F2; Sub "sub" F2; Mul "mul" F2; Div "div" F2; Neg "neg" F1;
    Pow "pow" F2; Powi "powi" Sig::Fixed(&[F, I], F); Abs "abs" F1;
    Min "min" F2; Max "max" F2; Copysign "copysign" F2; Zmul "zmul" F2;
    Sqrt "sqrt" F1; Exp "exp" F1; Log "log" F1; Log1p "log1p" F1; Expm1 "expm1" F1;
    Sin "sin" F1; Cos "cos" F1; Tan "tan" F1; Asin "asin" F1; Acos "acos" F1;
    Atan "atan" F1; Atan2 "atan2" F2; Sinh "sinh" F1; Cosh "cosh" F1; Tanh "tanh" F1;
    Erf "erf" F1; Floor "floor" F1; Ceil "ceil" F1; Round "round" F1;
    Lt "lt" Sig::Compare { bools: false }; Le "le" Sig::Compare { bools: false };
    Gt "gt" Sig::Compare { bools: false }; Ge "ge" Sig::Compare { bools: false };
    Eq "eq" Sig::Compare { bools: true }; Ne "ne" Sig::Compare { bools: true };
    Select "select" Sig::Select;
    Iadd "iadd" I2; Isub "isub" I2; Imul "imul" I2; Idiv "idiv" I2; Irem "irem" I2;
    Ineg "ineg" I1;
    And "and" Sig::Fixed(&[B, B], B); Or "or" Sig::Fixed(&[B, B], B); Not "not" Sig::Fixed(&[B], B);
    Sitofp "sitofp" Sig::Fixed(&[I], F); Fptosi "fptosi" Sig::Fixed(&[F], I);
    Tuple "tuple" Sig::Tuple; Getfield "getfield" Sig::Getfield;
    Alloc "alloc" Sig::Alloc; Zeros "zeros" Sig::Zeros; Length "length" Sig::Length;
    Arrayref "arrayref" Sig::Arrayref; Arrayset "arrayset" Sig::Arrayset; Copy "copy" Sig::Copy;
    Dual "dual" Sig::Dual; Primal "primal" Sig::Primal; Tangent "tangent" Sig::Tangent;
    Frule "frule" Sig::Frule;
    Push "push" Sig::Push; Pop "pop" Sig::Pop;
    Revfwd "revfwd" Sig::Revfwd; Revback "revback" Sig::Revback;
    Sonehot "sonehot" Sig::Sparse; Szero "szero" Sig::Sparse; Sscale "sscale" Sig::Sparse;
    Sadd "sadd" Sig::Sparse; Sdense "sdense" Sig::Sparse;
    Sum "sum" Sig::Bulk; Dot "dot" Sig::Bulk; Axpy "axpy" Sig::Bulk; Scale "scale" Sig::Bulk;
    Matvec "matvec" Sig::Bulk; Matmul "matmul" Sig::Bulk; Fill "fill" Sig::Bulk;
    Copyto "copyto" Sig::Bulk; Gemm "gemm" Sig::Bulk;
    Ssum "ssum" Sig::Sparse; Sdot "sdot" Sig::Sparse; Sfill "sfill" Sig::Sparse;
    Sgemma "sgemma" Sig::Sparse; Sgemmb "sgemmb" Sig::Sparse;
    Checkpoint "checkpoint" Sig::Hint;
    Same "same" Sig::Same;
}

impl Prim {
    /// The table row of this primitive.
    pub fn info(self) -> &'static PrimInfo {
        // The table lists the variants in declaration order; a unit test checks it.
        &PRIMS[self as usize]
    }

    /// Whether the primitive is one the AD transforms introduce (`dual`,
    /// `primal`, `tangent`, `frule`, `push`, `pop`, `revfwd`, `revback`, the
    /// sparse tangent builder `sonehot szero sscale sadd sdense ssum sdot
    /// sfill sgemma sgemmb`, and `gemm`, which the rules of the matrix
    /// primitives write): their rules are the AD passes' own, not the
    /// ordinary table's (`gemm` and the sparse builder have frules, for
    /// forward over reverse and forward over sparse; `dual`, `primal`,
    /// `tangent`, `frule` both kinds; `push`, `pop`, `revfwd`, `revback`
    /// frules).
    pub fn is_ad(self) -> bool {
        self == Prim::Gemm
            || matches!(
                self.info().sig,
                Sig::Dual
                    | Sig::Primal
                    | Sig::Tangent
                    | Sig::Frule
                    | Sig::Push
                    | Sig::Pop
                    | Sig::Revfwd
                    | Sig::Revback
                    | Sig::Sparse
            )
    }

    /// The bulk array primitive this is (`sum dot axpy scale matvec matmul
    /// fill copyto gemm`), whose checks and kernels are [`crate::bulk`].
    pub fn bulk(self) -> Option<crate::bulk::Op> {
        use crate::bulk::Op;
        Some(match self {
            Prim::Sum => Op::Sum,
            Prim::Dot => Op::Dot,
            Prim::Axpy => Op::Axpy,
            Prim::Scale => Op::Scale,
            Prim::Matvec => Op::Matvec,
            Prim::Matmul => Op::Matmul,
            Prim::Fill => Op::Fill,
            Prim::Copyto => Op::Copyto,
            Prim::Gemm => Op::Gemm,
            _ => return None,
        })
    }

    /// The sparse primitive on arrays of handles this is (`ssum sdot sfill
    /// sgemma sgemmb`), whose checks and kernels are [`crate::sparse`].
    pub fn sparse_bulk(self) -> Option<crate::sparse::SparseBulk> {
        use crate::sparse::SparseBulk;
        Some(match self {
            Prim::Ssum => SparseBulk::Sum,
            Prim::Sdot => SparseBulk::Dot,
            Prim::Sfill => SparseBulk::Fill,
            Prim::Sgemma => SparseBulk::GemmA,
            Prim::Sgemmb => SparseBulk::GemmB,
            _ => return None,
        })
    }

    /// Whether this primitive only reads or writes the elements of its array
    /// operands and keeps no reference to them in its result: element reads
    /// and writes, `length`, `copy` (of its source) and the bulk and sparse
    /// bulk primitives. Code generation frees arrays by it, and reverse mode
    /// tells when an array's identity does not matter.
    pub fn keeps_no_reference(self) -> bool {
        matches!(
            self,
            Prim::Arrayref | Prim::Arrayset | Prim::Length | Prim::Copy | Prim::Same
        ) || self.bulk().is_some()
            || self.sparse_bulk().is_some()
    }

    /// Whether a call of this primitive may write an array operand it is
    /// given: the bulk primitives with an output, `arrayset`, and `sfill`,
    /// `sgemma`, `sgemmb`.
    pub fn writes_array(self) -> bool {
        self.bulk_output().is_some()
            || matches!(
                self,
                Prim::Arrayset | Prim::Sfill | Prim::Sgemma | Prim::Sgemmb
            )
    }

    /// The parameter types and result type of a bulk array primitive.
    pub fn bulk_params(self) -> Option<(Vec<Type>, Type)> {
        use crate::bulk::Op;
        let (f, i, b, arr) = (Type::F64, Type::I64, Type::Bool, Type::Array(Scalar::F64));
        let op = self.bulk()?;
        let params = match op {
            Op::Sum => vec![arr],
            Op::Dot | Op::Copyto => vec![arr.clone(), arr],
            Op::Axpy => vec![f, arr.clone(), arr],
            Op::Scale => vec![f, arr],
            Op::Fill => vec![arr, f],
            Op::Matvec => vec![arr.clone(), arr.clone(), i.clone(), i, arr],
            Op::Matmul => vec![arr.clone(), arr.clone(), i.clone(), i.clone(), i, arr],
            Op::Gemm => vec![
                b.clone(),
                b,
                arr.clone(),
                arr.clone(),
                i.clone(),
                i.clone(),
                i,
                arr,
            ],
        };
        let ret = if matches!(op, Op::Sum | Op::Dot) {
            Type::F64
        } else {
            Type::Unit
        };
        Some((params, ret))
    }

    /// The operand position of the array a bulk primitive writes, if any.
    pub fn bulk_output(self) -> Option<usize> {
        let out = self.bulk()?.output()?;
        let (params, _) = self.bulk_params()?;
        params
            .iter()
            .enumerate()
            .filter(|(_, t)| matches!(t, Type::Array(_)))
            .nth(out)
            .map(|(i, _)| i)
    }

    /// The message for using this primitive as a function value, which only
    /// primitives with a [`Prim::fn_type`] can be. It says why: a bulk
    /// primitive; an array primitive whose type comes from its call's
    /// annotation (`alloc`), that is generic over the element type (`length`,
    /// `copy`, ...), or that works on arrays (`zeros`, one signature but no
    /// function value); or a primitive with several signatures.
    pub fn value_error(self) -> String {
        let why = match self.info().sig {
            _ if self.bulk().is_some() => {
                return format!(
                    "primitive `{self}` is a bulk array primitive and cannot be used as a value"
                );
            }
            Sig::Alloc => "its element type comes from the `:: [T]` annotation of a call",
            Sig::Zeros => {
                "only primitives on scalars (such as `sin`) are function values, and it works on arrays"
            }
            Sig::Length | Sig::Copy | Sig::Arrayref | Sig::Arrayset | Sig::Same => {
                "it is generic over the array's element type, so it has no single function type"
            }
            _ => return format!("primitive `{self}` is overloaded and cannot be used as a value"),
        };
        format!(
            "primitive `{self}` cannot be used as a value: {why} (call it, or wrap the call in a function)"
        )
    }

    /// The IR name.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// The primitive called `name` in IR text.
    pub fn from_name(name: &str) -> Option<Prim> {
        // A table by name, made on first use: the type checker and the IR
        // parser look up every call's primitive, and a walk of `PRIMS`
        // comparing strings cost a tenth of the type checker's time.
        static BY_NAME: std::sync::OnceLock<rustc_hash::FxHashMap<&'static str, Prim>> =
            std::sync::OnceLock::new();
        BY_NAME
            .get_or_init(|| {
                // The first row of a name, as a walk of the table finds.
                let mut by_name = rustc_hash::FxHashMap::default();
                for row in PRIMS {
                    by_name.entry(row.name).or_insert(row.prim);
                }
                by_name
            })
            .get(name)
            .copied()
    }

    /// The function type of the primitive used as a value (`@sin`), for
    /// primitives with exactly one fixed signature; `None` for overloaded ones.
    pub fn fn_type(self) -> Option<Type> {
        match self.info().sig {
            Sig::Fixed(params, ret) => Some(Type::func(
                params.iter().map(|s| s.ty()).collect(),
                ret.ty(),
            )),
            _ => None,
        }
    }

    /// The parameter and result scalars of a primitive with a fixed scalar
    /// signature (`sin`, `add`, `powi`, ...), `None` for every other kind of
    /// signature. Such a primitive's [`Prim::result_type`] depends on nothing
    /// but these: when its operands have exactly these types, the result is
    /// the returned scalar, which lets the builder and the verifier type the
    /// common statement without gathering its operand types.
    pub(crate) fn fixed_sig(self) -> Option<(&'static [Scalar], Scalar)> {
        match self.info().sig {
            Sig::Fixed(params, ret) => Some((params, ret)),
            _ => None,
        }
    }

    /// The result type of a call with arguments of types `args`.
    ///
    /// `field` is the constant second operand of `getfield` when it is an i64
    /// constant; `annot` is the statement's `:: T` annotation, required by `alloc`.
    /// The error is a lowercase message without location.
    pub fn result_type(
        self,
        args: &[Type],
        field: Option<i64>,
        annot: Option<&Type>,
    ) -> Result<Type, String> {
        let call = Call {
            prim: self,
            name: self.name(),
            args,
            field,
            annot,
        };
        let sig = self.info().sig;
        match sig {
            Sig::Fixed(..) | Sig::Compare { .. } | Sig::Select => call.scalar(sig),
            Sig::Tuple | Sig::Getfield => call.tuple(sig),
            Sig::Alloc | Sig::Zeros | Sig::Length | Sig::Copy => call.array(sig),
            Sig::Arrayref | Sig::Arrayset => call.element(sig),
            Sig::Dual => call.dual(),
            Sig::Primal | Sig::Tangent => call.dual_part(sig),
            Sig::Frule | Sig::Revfwd | Sig::Revback => call.rule(sig),
            Sig::Push | Sig::Pop => call.tape(sig),
            Sig::Sparse | Sig::Bulk => call.fixed_types(sig),
            Sig::Hint => {
                call.arity(1)?;
                call.want(0, "i64", args.first() == Some(&Type::I64))?;
                Ok(Type::Unit)
            }
            Sig::Same => {
                call.arity(2)?;
                call.want(0, "an array", matches!(args[0], Type::Array(_)))?;
                call.want(1, &args[0], args[1] == args[0])?;
                Ok(Type::Bool)
            }
        }
    }
}

/// A call being typed by [`Prim::result_type`], with the checks every
/// signature uses; one method per group of signatures.
struct Call<'a> {
    prim: Prim,
    name: &'static str,
    args: &'a [Type],
    field: Option<i64>,
    annot: Option<&'a Type>,
}

impl Call<'_> {
    /// Fails unless there are `n` arguments.
    fn arity(&self, n: usize) -> Result<(), String> {
        let (name, args) = (self.name, self.args);
        if args.len() == n {
            Ok(())
        } else {
            Err(format!(
                "`{name}` takes {n} argument{}, found {}",
                if n == 1 { "" } else { "s" },
                args.len()
            ))
        }
    }

    /// Fails unless `ok`, saying that argument `i` must be `what`.
    /// `what` is formatted only on failure (no allocation per operand typed).
    fn want(&self, i: usize, what: impl std::fmt::Display, ok: bool) -> Result<(), String> {
        let (name, args) = (self.name, self.args);
        if ok {
            Ok(())
        } else {
            Err(format!(
                "argument {} of `{name}` must be {what}, found {}",
                i + 1,
                args[i]
            ))
        }
    }

    /// The error for a signature handed to a group method it is not in.
    fn not_in_group(&self, group: &str) -> String {
        crate::interp::internal_message(format_args!("`{}` is not {group} primitive", self.name))
    }

    /// Fixed scalar signatures, comparisons and `select`.
    fn scalar(&self, sig: Sig) -> Result<Type, String> {
        let args = self.args;
        match sig {
            Sig::Fixed(params, ret) => {
                self.arity(params.len())?;
                for (i, p) in params.iter().enumerate() {
                    self.want(i, p, args[i] == p.ty())?;
                }
                Ok(ret.ty())
            }
            Sig::Compare { bools } => {
                self.arity(2)?;
                let ok =
                    matches!(args[0], Type::F64 | Type::I64) || (bools && args[0] == Type::Bool);
                let what = if bools {
                    "f64, i64 or bool"
                } else {
                    "f64 or i64"
                };
                self.want(0, what, ok)?;
                self.want(
                    1,
                    format_args!("{} like argument 1", args[0]),
                    args[1] == args[0],
                )?;
                Ok(Type::Bool)
            }
            Sig::Select => {
                self.arity(3)?;
                self.want(0, "bool", args[0] == Type::Bool)?;
                self.want(
                    2,
                    format_args!("{} like argument 2", args[1]),
                    args[2] == args[1],
                )?;
                Ok(args[1].clone())
            }
            _ => Err(self.not_in_group("a scalar")),
        }
    }

    /// `tuple` (bounded in depth and size) and `getfield` of a constant field.
    fn tuple(&self, sig: Sig) -> Result<Type, String> {
        let (args, field) = (self.args, self.field);
        match sig {
            Sig::Tuple => {
                // Checked before the clone: a chain of `tuple` statements whose
                // types are inferred could otherwise nest without bound, or
                // double in size at each statement (`tuple(%t, %t)`).
                let depth = 1 + args.iter().map(Type::depth).max().unwrap_or(0);
                if depth > MAX_NESTING {
                    return Err(format!(
                        "tuple type nested deeper than {MAX_NESTING} levels"
                    ));
                }
                // An annotated statement states its type in full: no bound.
                let limit = if self.annot.is_some() {
                    usize::MAX
                } else {
                    MAX_TYPE_SIZE
                };
                let mut size = 1usize;
                for arg in args {
                    size = size.saturating_add(arg.size());
                    if size > limit {
                        return Err(format!(
                            "tuple type has more than {MAX_TYPE_SIZE} components"
                        ));
                    }
                }
                Ok(Type::tuple_of(args))
            }
            Sig::Getfield => {
                self.arity(2)?;
                let Type::Tuple(elems) = &args[0] else {
                    return Err(format!(
                        "argument 1 of `getfield` must be a tuple, found {}",
                        args[0]
                    ));
                };
                let Some(k) = field else {
                    return Err("argument 2 of `getfield` must be an i64 constant".into());
                };
                usize::try_from(k)
                    .ok()
                    .and_then(|k| elems.get(k))
                    .cloned()
                    .ok_or_else(|| {
                        format!(
                            "field {k} out of range for a tuple of {} elements",
                            elems.len()
                        )
                    })
            }
            _ => Err(self.not_in_group("a tuple")),
        }
    }

    /// Whole arrays: `alloc` (typed by its annotation), `zeros`, `length`, `copy`.
    fn array(&self, sig: Sig) -> Result<Type, String> {
        let (args, annot) = (self.args, self.annot);
        match sig {
            Sig::Alloc => {
                self.arity(1)?;
                self.want(0, "i64", args[0] == Type::I64)?;
                match annot {
                    Some(t @ Type::Array(_)) => Ok(t.clone()),
                    Some(t) => Err(format!(
                        "`alloc` must be annotated with an array type, found {t}"
                    )),
                    None => Err("`alloc` needs a type annotation `:: [T]`".into()),
                }
            }
            Sig::Zeros => {
                self.arity(1)?;
                self.want(0, "i64", args[0] == Type::I64)?;
                Ok(Type::Array(Scalar::F64))
            }
            Sig::Length => {
                self.arity(1)?;
                self.want(0, "an array", matches!(args[0], Type::Array(_)))?;
                Ok(Type::I64)
            }
            Sig::Copy => {
                self.arity(1)?;
                self.want(0, "an array", matches!(args[0], Type::Array(_)))?;
                Ok(args[0].clone())
            }
            _ => Err(self.not_in_group("an array")),
        }
    }

    /// Array elements: `arrayref` and `arrayset`.
    fn element(&self, sig: Sig) -> Result<Type, String> {
        let args = self.args;
        match sig {
            Sig::Arrayref => {
                self.arity(2)?;
                let Type::Array(elem) = args[0] else {
                    return Err(format!(
                        "argument 1 of `arrayref` must be an array, found {}",
                        args[0]
                    ));
                };
                self.want(1, "i64", args[1] == Type::I64)?;
                Ok(elem.ty())
            }
            Sig::Arrayset => {
                self.arity(3)?;
                let Type::Array(elem) = args[0] else {
                    return Err(format!(
                        "argument 1 of `arrayset` must be an array, found {}",
                        args[0]
                    ));
                };
                self.want(1, "i64", args[1] == Type::I64)?;
                self.want(2, elem, args[2] == elem.ty())?;
                Ok(Type::Unit)
            }
            _ => Err(self.not_in_group("an array element")),
        }
    }

    /// `dual(p, t1, ..., tN)`: N dense tangents, or one sparse tangent.
    fn dual(&self) -> Result<Type, String> {
        let args = self.args;
        if args.len() < 2 {
            return Err(format!(
                "`dual` takes a primal and at least one tangent, found {} argument{}",
                args.len(),
                if args.len() == 1 { "" } else { "s" }
            ));
        }
        let width = args.len() - 1;
        let lanes = u32::try_from(width)
            .ok()
            .filter(|w| *w <= MAX_WIDTH)
            .and_then(Lanes::dense)
            .ok_or_else(|| format!("`dual` takes at most {MAX_WIDTH} tangents, found {width}"))?;
        let Some(tan) = args[0].tangent() else {
            return Err(format!(
                "argument 1 of `dual` must be a type with a tangent (one that contains f64), found {}",
                args[0]
            ));
        };
        // One tangent of the sparse tangent type: a sparse dual.
        if let (Some(stan), [_, t]) = (args[0].sparse_tangent(), args)
            && t.mentions_sparse()
        {
            self.want(
                1,
                format_args!("{stan}, the sparse tangent type of {}", args[0]),
                *t == stan,
            )?;
            return Ok(Type::dual_n(args[0].clone(), Lanes::Sparse));
        }
        for i in 1..args.len() {
            self.want(
                i,
                format_args!("{tan}, the tangent type of {}", args[0]),
                args[i] == tan,
            )?;
        }
        Ok(Type::dual_n(args[0].clone(), lanes))
    }

    /// The parts of a dual: `primal`, and `tangent` with a constant index.
    fn dual_part(&self, sig: Sig) -> Result<Type, String> {
        let (args, field) = (self.args, self.field);
        match sig {
            Sig::Primal => {
                self.arity(1)?;
                match &args[0] {
                    Type::Dual(inner, _) => Ok((**inner).clone()),
                    _ => Err(format!(
                        "argument 1 of `primal` must be a dual, found {}",
                        args[0]
                    )),
                }
            }
            Sig::Tangent => {
                self.arity(2)?;
                let Type::Dual(inner, lanes) = &args[0] else {
                    return Err(format!(
                        "argument 1 of `tangent` must be a dual, found {}",
                        args[0]
                    ));
                };
                let Some(k) = field.filter(|_| args[1] == Type::I64) else {
                    return Err("argument 2 of `tangent` must be an i64 constant".into());
                };
                let count = lanes.count();
                if !(0..count as i64).contains(&k) {
                    return Err(format!(
                        "tangent {k} out of range for {} with {count} tangent{}",
                        args[0],
                        if count == 1 { "" } else { "s" }
                    ));
                }
                inner
                    .tangent_at(*lanes)
                    .ok_or_else(|| format!("{} has no tangent type", args[0]))
            }
            _ => Err(self.not_in_group("a dual")),
        }
    }

    /// The rules of a function value: `frule` with constant lanes, `revfwd`
    /// and `revback`.
    fn rule(&self, sig: Sig) -> Result<Type, String> {
        let (name, args, field) = (self.name, self.args, self.field);
        match sig {
            Sig::Frule => {
                self.arity(2)?;
                let Type::Func(sig) = &args[0] else {
                    return Err(format!(
                        "argument 1 of `frule` must be a function, found {}",
                        args[0]
                    ));
                };
                let Some(width) = field.filter(|_| args[1] == Type::I64) else {
                    return Err("argument 2 of `frule` must be an i64 constant".into());
                };
                // The operand is the lanes' run-time code: 0 is sparse mode
                // ([`Lanes::code`]).
                let lanes = Lanes::from_code(width)
                    .filter(|l| l.code() <= i64::from(MAX_WIDTH))
                    .ok_or_else(|| {
                        format!("batch width {width} out of range (0 for sparse, 1 to {MAX_WIDTH})")
                    })?;
                Ok(Type::from_fn(Type::forward_fn(sig, lanes)))
            }
            Sig::Revfwd | Sig::Revback => {
                self.arity(1)?;
                let Type::Func(sig) = &args[0] else {
                    return Err(format!(
                        "argument 1 of `{name}` must be a function, found {}",
                        args[0]
                    ));
                };
                Ok(Type::from_fn(if self.prim == Prim::Revfwd {
                    Type::rev_fwd_fn(sig)
                } else {
                    Type::rev_back_fn(sig)
                }))
            }
            _ => Err(self.not_in_group("a rule")),
        }
    }

    /// The tape: `push` of any value, `pop` of the annotation's type.
    fn tape(&self, sig: Sig) -> Result<Type, String> {
        match sig {
            Sig::Push => {
                self.arity(1)?;
                Ok(Type::Unit)
            }
            Sig::Pop => {
                self.arity(0)?;
                self.annot.cloned().ok_or_else(|| {
                    "`pop` needs a result with a type annotation: `%v = call pop() :: T`".into()
                })
            }
            _ => Err(self.not_in_group("a tape")),
        }
    }

    /// The sparse tangent builder and the bulk array primitives: fixed
    /// parameter types that are not all scalars.
    fn fixed_types(&self, sig: Sig) -> Result<Type, String> {
        const SA: Type = Type::Array(Scalar::Sparse);
        const FA: Type = Type::Array(Scalar::F64);
        const B: Type = Type::Bool;
        const I: Type = Type::I64;
        let (name, args) = (self.name, self.args);
        match sig {
            Sig::Sparse => {
                let (params, ret): (&[Type], Type) = match self.prim {
                    Prim::Sonehot => (&[Type::I64], Type::Sparse),
                    Prim::Szero => (&[], Type::Sparse),
                    Prim::Sscale => (&[Type::F64, Type::Sparse], Type::Sparse),
                    Prim::Sadd => (&[Type::Sparse, Type::Sparse], Type::Sparse),
                    Prim::Ssum => (&[SA], Type::Sparse),
                    Prim::Sdot => (&[FA, SA], Type::Sparse),
                    Prim::Sfill => (&[SA, Type::Sparse], Type::Unit),
                    Prim::Sgemma => (&[B, B, SA, FA, I, I, I, SA], Type::Unit),
                    Prim::Sgemmb => (&[B, B, FA, SA, I, I, I, SA], Type::Unit),
                    _ => (&[Type::Sparse, Type::I64], Type::Array(Scalar::F64)),
                };
                self.arity(params.len())?;
                for (i, p) in params.iter().enumerate() {
                    self.want(i, p, args[i] == *p)?;
                }
                Ok(ret)
            }
            Sig::Bulk => {
                let (params, ret) = self.prim.bulk_params().ok_or_else(|| {
                    crate::interp::internal_message(format_args!(
                        "`{name}` is not a bulk primitive"
                    ))
                })?;
                self.arity(params.len())?;
                for (i, p) in params.iter().enumerate() {
                    self.want(i, p, args[i] == *p)?;
                }
                Ok(ret)
            }
            _ => Err(self.not_in_group("a sparse or bulk")),
        }
    }
}

impl fmt::Display for Prim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_in_declaration_order() {
        for (i, row) in PRIMS.iter().enumerate() {
            assert_eq!(row.prim as usize, i, "row {} is out of order", row.name);
            assert_eq!(Prim::from_name(row.name), Some(row.prim));
        }
        assert_eq!(PRIMS.len(), Prim::Same as usize + 1);
        for name in ["", "sinn", "Sin", "sin ", "fn", "len"] {
            assert_eq!(Prim::from_name(name), None, "{name:?}");
        }
        for row in PRIMS {
            assert_eq!(
                row.prim.bulk().is_some(),
                row.sig == Sig::Bulk,
                "{}",
                row.name
            );
            if let Some(op) = row.prim.bulk() {
                assert_eq!(op.name(), row.name);
                let (params, _) = row.prim.bulk_params().unwrap();
                let arrays = params
                    .iter()
                    .filter(|t| matches!(t, Type::Array(_)))
                    .count();
                let ints = params.iter().filter(|t| **t == Type::I64).count();
                assert_eq!(arrays, op.arrays().len(), "{}", row.name);
                assert_eq!(ints, op.dims().len(), "{}", row.name);
                if let Some(k) = row.prim.bulk_output() {
                    assert_eq!(params[k], Type::Array(Scalar::F64));
                }
            }
        }
    }

    #[test]
    fn overloaded_prims_have_no_function_type() {
        assert_eq!(Prim::Lt.fn_type(), None);
        assert_eq!(Prim::Select.fn_type(), None);
        assert_eq!(
            Prim::Atan2.fn_type(),
            Some(Type::func(vec![Type::F64, Type::F64], Type::F64))
        );
    }

    #[test]
    fn result_types_are_checked() {
        assert_eq!(
            Prim::Lt.result_type(&[Type::I64, Type::I64], None, None),
            Ok(Type::Bool)
        );
        assert!(
            Prim::Lt
                .result_type(&[Type::Bool, Type::Bool], None, None)
                .is_err()
        );
        assert_eq!(
            Prim::Eq.result_type(&[Type::Bool, Type::Bool], None, None),
            Ok(Type::Bool)
        );
        let pair = Type::tuple(vec![Type::F64, Type::I64]);
        assert_eq!(
            Prim::Getfield.result_type(&[pair.clone(), Type::I64], Some(1), None),
            Ok(Type::I64)
        );
        assert!(
            Prim::Getfield
                .result_type(&[pair, Type::I64], Some(2), None)
                .is_err()
        );
        assert!(Prim::Alloc.result_type(&[Type::I64], None, None).is_err());
        assert_eq!(
            Prim::Sin.result_type(&[Type::I64], None, None),
            Err("argument 1 of `sin` must be f64, found i64".to_string())
        );
    }

    #[test]
    fn tape_and_reverse_rule_primitives_are_typed() {
        let pair = Type::tuple(vec![Type::F64, Type::Array(Scalar::F64)]);
        assert_eq!(
            Prim::Push.result_type(std::slice::from_ref(&pair), None, None),
            Ok(Type::Unit)
        );
        assert!(Prim::Push.result_type(&[], None, None).is_err());
        assert_eq!(
            Prim::Pop.result_type(&[], None, Some(&pair)),
            Ok(pair.clone())
        );
        assert_eq!(
            Prim::Pop.result_type(&[], None, None),
            Err("`pop` needs a result with a type annotation: `%v = call pop() :: T`".into())
        );
        assert!(
            Prim::Pop
                .result_type(&[Type::F64], None, Some(&pair))
                .is_err()
        );
        let f = Type::func(vec![Type::F64, Type::Array(Scalar::F64)], Type::F64);
        let fwd = Prim::Revfwd.result_type(std::slice::from_ref(&f), None, None);
        assert_eq!(
            fwd.map(|t| t.to_string()),
            Ok("fn(f64, [f64], [f64]) -> f64".to_string())
        );
        let back = Prim::Revback.result_type(std::slice::from_ref(&f), None, None);
        assert_eq!(
            back.map(|t| t.to_string()),
            Ok("fn(f64) -> f64".to_string())
        );
        assert_eq!(
            Prim::Revback.result_type(&[Type::F64], None, None),
            Err("argument 1 of `revback` must be a function, found f64".into())
        );
        let ad: Vec<&str> = PRIMS
            .iter()
            .filter(|row| row.prim.is_ad())
            .map(|row| row.name)
            .collect();
        assert_eq!(
            ad,
            [
                "dual", "primal", "tangent", "frule", "push", "pop", "revfwd", "revback",
                "sonehot", "szero", "sscale", "sadd", "sdense", "gemm", "ssum", "sdot", "sfill",
                "sgemma", "sgemmb"
            ]
        );
    }
}
