//! IR types: scalars, tuples, arrays of a scalar element, function types and the
//! AD type `dual<T>`. `Display` prints the text form of SYNTAX.md §1. Also the
//! type arithmetic of the AD transforms: tangent types (forward mode, dense and
//! sparse), and leaf counts and rule signatures (reverse mode).
//!
//! A tuple has at least one element: [`Type::tuple`] turns the empty tuple into
//! `()`, so every type has exactly one representation.

use smallvec::{SmallVec, smallvec};
use std::fmt;
use std::num::NonZeroU32;
use std::sync::Arc;

/// The element type of an array.
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Scalar {
    /// `f64`
    F64,
    /// `i64`
    I64,
    /// `bool`
    Bool,
    /// `sparse`: a handle of a sparse tangent (sparse forward mode).
    Sparse,
}

/// The tangents a `dual` carries: forward mode's batch width, or sparse mode
/// (docs/ir.md, "Sparse tangents"). A dense width of 0 cannot be written; the
/// widths the text and the passes accept are 1 to [`crate::MAX_WIDTH`].
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum Lanes {
    /// N tangents of the inner type's tangent type ([`Type::tangent`]):
    /// `dual<T>` for 1, `dual<T, N>` (batch mode) for more.
    Dense(NonZeroU32),
    /// One tangent of the sparse tangent type ([`Type::sparse_tangent`]):
    /// `dual<T, sparse>`.
    Sparse,
}

/// A function type `fn(P, ...) -> R`.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct FnType {
    /// Parameter types in order.
    pub params: Vec<Type>,
    /// Result type.
    pub ret: Type,
}

/// An IR type.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Type {
    /// 64-bit IEEE float.
    F64,
    /// 64-bit two's-complement integer.
    I64,
    /// Boolean.
    Bool,
    /// The unit type `()`, also the empty tuple.
    Unit,
    /// A tuple of one or more elements.
    Tuple(Arc<[Type]>),
    /// A one-dimensional heap array, passed by reference.
    Array(Scalar),
    /// A function value.
    Func(Arc<FnType>),
    /// A primal value of the inner type paired with its tangents (forward
    /// mode): dense lanes of its tangent type, or in sparse mode one tangent of
    /// the sparse tangent type ([`Lanes`]). The inner type always has a
    /// tangent type (see [`Type::tangent`]).
    Dual(Arc<Type>, Lanes),
    /// A handle of a node of the sparse tangent builder (sparse forward mode,
    /// docs/ir.md "Sparse tangents"): a tangent vector over the directions of
    /// a gradient, materialised by `sdense`.
    Sparse,
}

impl Scalar {
    /// The scalar as a full type.
    pub fn ty(self) -> Type {
        match self {
            Scalar::F64 => Type::F64,
            Scalar::I64 => Type::I64,
            Scalar::Bool => Type::Bool,
            Scalar::Sparse => Type::Sparse,
        }
    }

    /// The scalar type `ty`, if it is one.
    pub fn of(ty: &Type) -> Option<Scalar> {
        match ty {
            Type::F64 => Some(Scalar::F64),
            Type::I64 => Some(Scalar::I64),
            Type::Bool => Some(Scalar::Bool),
            Type::Sparse => Some(Scalar::Sparse),
            _ => None,
        }
    }
}

impl Lanes {
    /// One dense tangent: `dual<T>`, the rule `@f.fwd`.
    pub const ONE: Lanes = Lanes::Dense(NonZeroU32::MIN);

    /// `n` dense tangents; `None` for 0. (The upper bound,
    /// [`crate::MAX_WIDTH`], is checked where a width is read, with that
    /// place's message.)
    pub fn dense(n: u32) -> Option<Lanes> {
        NonZeroU32::new(n).map(Lanes::Dense)
    }

    /// Whether this is sparse mode.
    pub fn is_sparse(self) -> bool {
        self == Lanes::Sparse
    }

    /// The number of tangents a dual carries: N for dense, 1 in sparse mode.
    pub fn count(self) -> usize {
        match self {
            Lanes::Dense(n) => n.get() as usize,
            Lanes::Sparse => 1,
        }
    }

    /// The i64 that stands for these lanes at run time, as the second operand
    /// of `frule` and in the compiled rule tables: N for dense, 0 for sparse
    /// (so `frule(f, 0)` asks for the sparse rule `@f.fwds`). Messages that
    /// print a batch width print this number.
    pub fn code(self) -> i64 {
        match self {
            Lanes::Dense(n) => i64::from(n.get()),
            Lanes::Sparse => 0,
        }
    }

    /// The lanes a run-time code stands for ([`Lanes::code`]); `None` for a
    /// negative code or one past `u32`.
    pub fn from_code(code: i64) -> Option<Lanes> {
        match u32::try_from(code).ok()? {
            0 => Some(Lanes::Sparse),
            n => Lanes::dense(n),
        }
    }
}

/// How many distinct tuple types [`Type::tuple_of`] keeps per thread; past
/// it the cache starts afresh (a type made again is then made anew, equal
/// to the old one).
const TUPLE_CACHE: usize = 4096;

thread_local! {
    /// The tuple types [`Type::tuple_of`] made on this thread, to share.
    static TUPLES: std::cell::RefCell<rustc_hash::FxHashSet<Arc<[Type]>>> =
        std::cell::RefCell::default();
}

impl Type {
    /// A tuple of `elems`; `()` when there are none.
    pub fn tuple(elems: Vec<Type>) -> Type {
        if elems.is_empty() {
            Type::Unit
        } else {
            Type::Tuple(elems.into())
        }
    }

    /// [`Type::tuple`] of a slice, shared with the last tuple type of the
    /// same elements made on this thread: a statement that makes a tuple
    /// (the type checker's and the builder's result type of `tuple`) gets
    /// its type without an allocation when one like it was made before.
    pub fn tuple_of(elems: &[Type]) -> Type {
        if elems.is_empty() {
            return Type::Unit;
        }
        TUPLES.with(|cache| {
            let Ok(mut cache) = cache.try_borrow_mut() else {
                return Type::Tuple(elems.into());
            };
            if let Some(shared) = cache.get(elems) {
                return Type::Tuple(Arc::clone(shared));
            }
            if cache.len() >= TUPLE_CACHE {
                cache.clear();
            }
            let made: Arc<[Type]> = elems.into();
            cache.insert(Arc::clone(&made));
            Type::Tuple(made)
        })
    }

    /// The forward-mode pair type `dual<inner>`: one tangent.
    pub fn dual(inner: Type) -> Type {
        Type::Dual(Arc::new(inner), Lanes::ONE)
    }

    /// The forward-mode type `dual<inner, N>` (or `dual<inner, sparse>`) with
    /// `lanes` tangents.
    pub fn dual_n(inner: Type, lanes: Lanes) -> Type {
        Type::Dual(Arc::new(inner), lanes)
    }

    /// The tangent type: `f64` for `f64`, `[f64]` for `[f64]`, for a tuple the
    /// tuple of its elements' tangent types with `()` for elements that have
    /// none; for a `dual<T, N>` the dual of the same lanes over `T`'s
    /// tangent type, `dual<T', N>` (to forward mode a dual is the tuple of its
    /// parts, each part's tangent has `T'`'s shape, and the parts' tangents
    /// are packed as a dual again: forward over forward, docs/forward.md
    /// "Forward over forward"), and likewise `dual<T', sparse>` for a sparse
    /// dual; `sparse` for `sparse` and `[sparse]` for `[sparse]` (forward
    /// over a sparse rule, docs/forward.md "Forward over sparse"); `None` for
    /// every type without an f64 or a handle inside (`i64`, `bool`, `()`,
    /// `[i64]`, `[bool]`, function types). Recursive over tuples and duals, so as deep as the type,
    /// which the parser and verifier cap at [`crate::MAX_NESTING`].
    pub fn tangent(&self) -> Option<Type> {
        self.tangent_of(&Type::F64, Scalar::F64)
    }

    /// The tangent type in sparse forward mode: [`Type::tangent`] with every
    /// f64 replaced by `sparse` (`f64` -> `sparse`, `[f64]` -> `[sparse]`,
    /// `(f64, i64)` -> `(sparse, ())`, a dense `dual<T, N>` ->
    /// `dual<T's sparse tangent, N>`: sparse over forward); `None` where
    /// `tangent` is `None` and for any type mentioning `sparse` (sparse mode
    /// is not nested over itself).
    pub fn sparse_tangent(&self) -> Option<Type> {
        if self.mentions_sparse() {
            return None;
        }
        self.tangent_of(&Type::Sparse, Scalar::Sparse)
    }

    /// Whether a dual occurs in the type outside function types (itself, or
    /// inside tuples). Iterative.
    pub fn holds_dual(&self) -> bool {
        match self {
            Type::Dual(..) => return true,
            Type::Tuple(_) => {}
            // Asked of every value of a function: no stack for a leaf.
            _ => return false,
        }
        let mut stack: SmallVec<[_; 8]> = smallvec![self];
        while let Some(ty) = stack.pop() {
            match ty {
                Type::Dual(..) => return true,
                Type::Tuple(elems) => stack.extend(elems.iter()),
                _ => {}
            }
        }
        false
    }

    /// [`Type::tangent`] with `leaf` for each f64 and arrays of `elem` for
    /// each `[f64]`.
    fn tangent_of(&self, leaf: &Type, elem: Scalar) -> Option<Type> {
        match self {
            Type::F64 => Some(leaf.clone()),
            Type::Array(Scalar::F64) => Some(Type::Array(elem)),
            Type::Tuple(elems) => {
                let tans: Vec<Option<Type>> =
                    elems.iter().map(|e| e.tangent_of(leaf, elem)).collect();
                if tans.iter().all(Option::is_none) {
                    return None;
                }
                Some(Type::tuple(
                    tans.into_iter().map(|t| t.unwrap_or(Type::Unit)).collect(),
                ))
            }
            // A dense dual's tangent in either mode (forward over forward,
            // sparse over forward); a sparse dual's in dense mode only.
            Type::Dual(inner, lanes @ Lanes::Dense(_)) => {
                Some(Type::Dual(Arc::new(inner.tangent_of(leaf, elem)?), *lanes))
            }
            Type::Dual(inner, lanes) if *leaf == Type::F64 => {
                Some(Type::Dual(Arc::new(inner.tangent_of(leaf, elem)?), *lanes))
            }
            // Dense forward mode over a sparse rule: a handle stands for a
            // vector over the directions, linear in what it is built from,
            // so its tangent is a handle too.
            Type::Sparse if *leaf == Type::F64 => Some(Type::Sparse),
            Type::Array(Scalar::Sparse) if *leaf == Type::F64 => Some(Type::Array(Scalar::Sparse)),
            _ => None,
        }
    }

    /// The tangent type of one lane of `lanes`: the sparse tangent type in
    /// sparse mode, [`Type::tangent`] otherwise.
    pub fn tangent_at(&self, lanes: Lanes) -> Option<Type> {
        match lanes {
            Lanes::Sparse => self.sparse_tangent(),
            Lanes::Dense(_) => self.tangent(),
        }
    }

    /// Whether `sparse` occurs anywhere in the type (also in `[sparse]`,
    /// sparse duals and function types). Iterative.
    pub fn mentions_sparse(&self) -> bool {
        // Without a stack for the types that hold no other (most of them).
        match self {
            Type::Sparse | Type::Array(Scalar::Sparse) | Type::Dual(_, Lanes::Sparse) => {
                return true;
            }
            Type::Tuple(_) | Type::Func(_) | Type::Dual(..) => {}
            _ => return false,
        }
        let mut stack: SmallVec<[_; 8]> = smallvec![self];
        while let Some(ty) = stack.pop() {
            match ty {
                Type::Sparse | Type::Array(Scalar::Sparse) => return true,
                Type::Dual(_, Lanes::Sparse) => return true,
                Type::Tuple(elems) => stack.extend(elems.iter()),
                Type::Func(f) => {
                    stack.extend(f.params.iter());
                    stack.push(&f.ret);
                }
                Type::Dual(inner, _) => stack.push(inner),
                _ => {}
            }
        }
        false
    }

    /// Whether the type has a tangent type ([`Type::tangent`]), i.e.
    /// contains an f64, a dual, a `sparse` handle or a `[sparse]` array
    /// outside a function type (a dual's primal always holds an f64).
    pub fn has_tangent(&self) -> bool {
        match self {
            Type::F64
            | Type::Array(Scalar::F64 | Scalar::Sparse)
            | Type::Sparse
            | Type::Dual(..) => return true,
            Type::Tuple(_) => {}
            _ => return false,
        }
        let mut stack: SmallVec<[_; 8]> = smallvec![self];
        while let Some(ty) = stack.pop() {
            match ty {
                Type::F64 | Type::Array(Scalar::F64 | Scalar::Sparse) | Type::Sparse => {
                    return true;
                }
                Type::Dual(..) => return true,
                Type::Tuple(elems) => stack.extend(elems.iter()),
                _ => {}
            }
        }
        false
    }

    /// The type a value of this type has in a forward rule with `lanes`:
    /// `dual<T, N>` (or `dual<T, sparse>`) when `T` has a tangent, `T` itself
    /// otherwise.
    pub fn forward(&self, lanes: Lanes) -> Type {
        if self.has_tangent() {
            Type::dual_n(self.clone(), lanes)
        } else {
            self.clone()
        }
    }

    /// The type of the forward rule of a function of type `sig` with `lanes`:
    /// every parameter and the result mapped by [`Type::forward`].
    pub fn forward_fn(sig: &FnType, lanes: Lanes) -> FnType {
        FnType {
            params: sig.params.iter().map(|p| p.forward(lanes)).collect(),
            ret: sig.ret.forward(lanes),
        }
    }

    /// The number of f64 scalars in the type outside arrays and function
    /// types: 1 for `f64`, the sum over the components for a tuple (depth
    /// first), 0 for everything else (`[f64]`, `i64`, `fn(...)`). A dense
    /// `dual<T, N>` counts as the tuple of its parts (the primal, then N
    /// tangents: [`Type::dual_parts`]), so reverse mode differentiates a
    /// forward rule like any function; a sparse dual counts its primal only.
    /// These are the scalars a reverse pass carries cotangents for one by one
    /// ([`Type::rev_back_fn`]). Iterative, like [`Type::depth`].
    pub fn cotangent_leaves(&self) -> usize {
        self.count_leaves(|ty| matches!(ty, Type::F64))
    }

    /// The number of `[f64]` arrays in the type: 1 for `[f64]`, the sum over
    /// the components for a tuple (depth first), 0 for everything else
    /// (`[i64]`, `f64`, `fn(...)`); a dual counts as in
    /// [`Type::cotangent_leaves`]. Each has a shadow array of the same length
    /// in reverse mode ([`Type::rev_fwd_fn`]). Iterative, like
    /// [`Type::depth`].
    pub fn shadow_leaves(&self) -> usize {
        self.count_leaves(|ty| matches!(ty, Type::Array(Scalar::F64)))
    }

    /// Whether reverse mode gives values of this type cotangents: the type
    /// has f64 leaves or `[f64]` arrays outside function types, counting the
    /// parts of duals ([`Type::cotangent_leaves`], [`Type::shadow_leaves`]).
    /// [`Type::has_tangent`] and more: a sparse dual has no tangent but has
    /// cotangents (those of its primal).
    pub fn has_cotangent(&self) -> bool {
        self.cotangent_leaves() + self.shadow_leaves() > 0
    }

    /// The parts of a dense dual `dual<T, N>` as reverse mode sees them, a
    /// tuple `(T, T', ..., T')` of the primal and N tangents (`T'` is
    /// [`Type::tangent`] of `T`, whose leaves are `T`'s): `(T, T', N)`;
    /// `None` for any other type (a sparse dual included).
    pub fn dual_parts(&self) -> Option<(&Type, Type, usize)> {
        match self {
            Type::Dual(inner, Lanes::Dense(n)) => {
                Some((&**inner, inner.tangent()?, n.get() as usize))
            }
            _ => None,
        }
    }

    /// `n` leaves of type `elem` packed into one type: `()` for none, `elem`
    /// itself for one, the n-tuple of `elem` otherwise.
    pub fn leaf_pack(elem: Type, n: usize) -> Type {
        match n {
            0 => Type::Unit,
            1 => elem,
            _ => Type::tuple(vec![elem; n]),
        }
    }

    /// The type of the forward part of the reverse rule of a function of type
    /// `sig`: the primal parameters followed by one `[f64]` shadow per array
    /// leaf of the parameters ([`Type::shadow_leaves`], in parameter order);
    /// the primal result, or, when the result has array leaves, the tuple of
    /// the result and one `[f64]` shadow per array leaf of the result.
    pub fn rev_fwd_fn(sig: &FnType) -> FnType {
        let shadows: usize = sig.params.iter().map(Type::shadow_leaves).sum();
        let mut params = sig.params.clone();
        params.extend(std::iter::repeat_n(Type::Array(Scalar::F64), shadows));
        let ret_shadows = sig.ret.shadow_leaves();
        let ret = if ret_shadows == 0 {
            sig.ret.clone()
        } else {
            let mut elems = Vec::with_capacity(ret_shadows + 1);
            elems.push(sig.ret.clone());
            elems.extend(std::iter::repeat_n(Type::Array(Scalar::F64), ret_shadows));
            Type::tuple(elems)
        };
        FnType { params, ret }
    }

    /// The type of the pullback part of the reverse rule of a function of type
    /// `sig`: one f64 parameter per scalar leaf of the result (its cotangent,
    /// [`Type::cotangent_leaves`]); the result packs the cotangents of the
    /// scalar leaves of all parameters, in parameter order, with
    /// [`Type::leaf_pack`]. Array cotangents travel in the shadows instead.
    pub fn rev_back_fn(sig: &FnType) -> FnType {
        let outs: usize = sig.params.iter().map(Type::cotangent_leaves).sum();
        FnType {
            params: vec![Type::F64; sig.ret.cotangent_leaves()],
            ret: Type::leaf_pack(Type::F64, outs),
        }
    }

    /// A function type `fn(params) -> ret` from a signature.
    pub fn from_fn(sig: FnType) -> Type {
        Type::Func(Arc::new(sig))
    }

    /// A function type.
    pub fn func(params: Vec<Type>, ret: Type) -> Type {
        Type::Func(Arc::new(FnType { params, ret }))
    }

    /// The nesting depth of the type: 1 for scalars, arrays and `()`.
    ///
    /// Iterative, so that a type built deeper than the parser allows cannot
    /// overflow the stack here.
    pub fn depth(&self) -> usize {
        if !matches!(self, Type::Tuple(_) | Type::Func(_) | Type::Dual(..)) {
            return 1;
        }
        let mut max = 0;
        let mut stack: SmallVec<[_; 8]> = smallvec![(self, 1usize)];
        while let Some((ty, d)) = stack.pop() {
            max = max.max(d);
            match ty {
                Type::Tuple(elems) => stack.extend(elems.iter().map(|e| (e, d + 1))),
                Type::Func(f) => {
                    stack.extend(f.params.iter().map(|e| (e, d + 1)));
                    stack.push((&f.ret, d + 1));
                }
                Type::Dual(inner, _) => stack.push((inner, d + 1)),
                _ => {}
            }
        }
        max
    }
}

impl Type {
    /// Whether a value of the type holds an array: an array, or a tuple or
    /// dual with one inside (not through function types, whose values hold
    /// what they were made with out of sight). Iterative, like
    /// [`Type::depth`].
    pub fn holds_array(&self) -> bool {
        match self {
            Type::Array(_) => return true,
            Type::Tuple(_) | Type::Dual(..) => {}
            _ => return false,
        }
        let mut stack: SmallVec<[&Type; 8]> = smallvec![self];
        while let Some(t) = stack.pop() {
            match t {
                Type::Array(_) => return true,
                Type::Tuple(elems) => stack.extend(elems.iter()),
                Type::Dual(inner, _) => stack.push(inner),
                _ => {}
            }
        }
        false
    }
}

impl Type {
    /// The number of nodes of the type tree: 1 for scalars, arrays and `()`.
    /// Iterative, like [`Type::depth`].
    pub fn size(&self) -> usize {
        if !matches!(self, Type::Tuple(_) | Type::Func(_) | Type::Dual(..)) {
            return 1;
        }
        let mut n = 0usize;
        let mut stack: SmallVec<[_; 8]> = smallvec![self];
        while let Some(ty) = stack.pop() {
            n += 1;
            match ty {
                Type::Tuple(elems) => stack.extend(elems.iter()),
                Type::Func(f) => {
                    stack.extend(f.params.iter());
                    stack.push(&f.ret);
                }
                Type::Dual(inner, _) => stack.push(inner),
                _ => {}
            }
        }
        n
    }
}

impl Type {
    /// The number of nodes of the type reached through tuples and duals (not
    /// through arrays or function types) for which `leaf` holds, the inner
    /// type of a dense `dual<T, N>` counted N + 1 times (its primal and its
    /// tangents, which have `T`'s leaves), a sparse dual's once (its
    /// tangents are sparse handles). Saturates instead of overflowing.
    fn count_leaves(&self, leaf: impl Fn(&Type) -> bool) -> usize {
        if !matches!(self, Type::Tuple(_) | Type::Dual(..)) {
            // A leaf or nothing: no stack (an allocation) needed.
            return usize::from(leaf(self));
        }
        let mut n = 0usize;
        let mut stack: SmallVec<[_; 8]> = smallvec![(self, 1usize)];
        while let Some((ty, times)) = stack.pop() {
            match ty {
                Type::Tuple(elems) => stack.extend(elems.iter().map(|e| (e, times))),
                Type::Dual(inner, lanes) => {
                    let parts = match lanes {
                        Lanes::Dense(w) => w.get() as usize + 1,
                        Lanes::Sparse => 1,
                    };
                    stack.push((inner, times.saturating_mul(parts)));
                }
                _ if leaf(ty) => n = n.saturating_add(times),
                _ => {}
            }
        }
        n
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scalar::F64 => "f64",
            Scalar::I64 => "i64",
            Scalar::Bool => "bool",
            Scalar::Sparse => "sparse",
        })
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::F64 => f.write_str("f64"),
            Type::I64 => f.write_str("i64"),
            Type::Bool => f.write_str("bool"),
            Type::Unit => f.write_str("()"),
            Type::Tuple(elems) => {
                f.write_str("(")?;
                for (i, e) in elems.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{e}")?;
                }
                // A one-element tuple keeps its comma, as in Rust.
                if elems.len() == 1 {
                    f.write_str(",")?;
                }
                f.write_str(")")
            }
            Type::Array(s) => write!(f, "[{s}]"),
            Type::Func(ft) => {
                f.write_str("fn(")?;
                for (i, p) in ft.params.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{p}")?;
                }
                write!(f, ") -> {}", ft.ret)
            }
            Type::Dual(inner, Lanes::ONE) => write!(f, "dual<{inner}>"),
            Type::Dual(inner, Lanes::Sparse) => write!(f, "dual<{inner}, sparse>"),
            Type::Sparse => f.write_str("sparse"),
            Type::Dual(inner, Lanes::Dense(n)) => write!(f, "dual<{inner}, {n}>"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(elems: Vec<Type>) -> Type {
        Type::tuple(elems)
    }

    const AF: Type = Type::Array(Scalar::F64);
    const AI: Type = Type::Array(Scalar::I64);

    #[test]
    fn lanes_print_count_and_code() {
        let three = Lanes::dense(3).unwrap();
        assert_eq!(Lanes::dense(0), None);
        assert_eq!(Type::dual(Type::F64).to_string(), "dual<f64>");
        assert_eq!(Type::dual_n(AF, three).to_string(), "dual<[f64], 3>");
        assert_eq!(
            Type::dual_n(Type::F64, Lanes::Sparse).to_string(),
            "dual<f64, sparse>"
        );
        assert_eq!((three.count(), Lanes::Sparse.count()), (3, 1));
        for lanes in [Lanes::ONE, three, Lanes::Sparse] {
            assert_eq!(Lanes::from_code(lanes.code()), Some(lanes));
        }
        assert_eq!(Lanes::Sparse.code(), 0);
        assert_eq!(Lanes::from_code(-1), None);
        assert_eq!(Lanes::from_code(1 << 32), None);
        assert_eq!(
            Type::dual_n(Type::F64, Lanes::Sparse).tangent_at(Lanes::Sparse),
            None
        );
        assert_eq!(Type::F64.tangent_at(Lanes::Sparse), Some(Type::Sparse));
        assert_eq!(Type::F64.tangent_at(three), Some(Type::F64));
        // Dense forward mode over a sparse rule: handles have handles as
        // tangents, a sparse dual a sparse dual of the tangent type.
        let pair = t(vec![Type::F64, Type::I64]);
        assert_eq!(
            Type::dual_n(pair, Lanes::Sparse).tangent(),
            Some(Type::dual_n(t(vec![Type::F64, Type::Unit]), Lanes::Sparse))
        );
        assert_eq!(Type::Sparse.tangent(), Some(Type::Sparse));
        assert_eq!(Type::Sparse.sparse_tangent(), None);
        assert_eq!(
            Type::Array(Scalar::Sparse).tangent(),
            Some(Type::Array(Scalar::Sparse))
        );
    }

    #[test]
    fn has_tangent_holds_for_f64_leaves_duals_and_handles_at_any_depth() {
        let three = Lanes::dense(3).unwrap();
        let cases = [
            (Type::F64, true),
            (AF, true),
            (AI, false),
            (Type::I64, false),
            (Type::Unit, false),
            (Type::dual(Type::F64), true),
            (Type::dual_n(AF, three), true),
            (Type::dual_n(Type::F64, Lanes::Sparse), true),
            (Type::Sparse, true),
            (Type::Array(Scalar::Sparse), true),
            (t(vec![Type::I64, Type::Sparse]), true),
            (t(vec![Type::I64, Type::dual(Type::F64)]), true),
            (t(vec![Type::I64, t(vec![AI, Type::F64])]), true),
            (t(vec![Type::I64, AI]), false),
            (Type::func(vec![Type::F64], Type::F64), false),
        ];
        for (ty, has) in cases {
            assert_eq!(ty.has_tangent(), has, "{ty}");
            assert_eq!(ty.tangent().is_some(), has, "{ty}");
        }
    }

    #[test]
    fn cotangent_leaves_count_scalars_outside_arrays_and_functions() {
        let cases = [
            (Type::F64, 1),
            (Type::I64, 0),
            (Type::Unit, 0),
            (AF, 0),
            (t(vec![Type::F64, t(vec![Type::I64, Type::F64])]), 2),
            (t(vec![AF, t(vec![Type::F64, t(vec![Type::F64])])]), 2),
            (Type::dual(Type::F64), 2),
            (
                Type::dual_n(t(vec![Type::F64, Type::I64]), Lanes::dense(3).unwrap()),
                4,
            ),
            (Type::dual_n(Type::F64, Lanes::Sparse), 1),
            (t(vec![Type::dual(AF), Type::dual(Type::F64)]), 2),
            (Type::func(vec![Type::F64], Type::F64), 0),
        ];
        for (ty, n) in cases {
            assert_eq!(ty.cotangent_leaves(), n, "{ty}");
        }
    }

    #[test]
    fn shadow_leaves_count_f64_arrays() {
        let cases = [
            (AF, 1),
            (AI, 0),
            (Type::F64, 0),
            (t(vec![Type::F64, AF, t(vec![AF, Type::I64])]), 2),
            (t(vec![AI, Type::Array(Scalar::Bool)]), 0),
            (Type::dual(AF), 2),
            (
                Type::dual_n(t(vec![AF, Type::F64]), Lanes::dense(2).unwrap()),
                3,
            ),
            (Type::dual_n(AF, Lanes::Sparse), 1),
            (Type::func(vec![AF], AF), 0),
        ];
        for (ty, n) in cases {
            assert_eq!(ty.shadow_leaves(), n, "{ty}");
        }
    }

    #[test]
    fn leaf_counts_do_not_recurse() {
        let mut deep = Type::F64;
        for _ in 0..10_000 {
            deep = t(vec![deep, AF]);
        }
        assert_eq!(deep.cotangent_leaves(), 1);
        assert_eq!(deep.shadow_leaves(), 10_000);
        // Dropping a deep type recurses; leak it instead.
        std::mem::forget(deep);
    }

    #[test]
    fn leaf_pack_is_unit_single_or_tuple() {
        assert_eq!(Type::leaf_pack(Type::F64, 0), Type::Unit);
        assert_eq!(Type::leaf_pack(Type::F64, 1), Type::F64);
        assert_eq!(
            Type::leaf_pack(Type::F64, 3),
            t(vec![Type::F64, Type::F64, Type::F64])
        );
        assert_eq!(Type::leaf_pack(AF, 2).to_string(), "([f64], [f64])");
    }

    fn sig(params: Vec<Type>, ret: Type) -> FnType {
        FnType { params, ret }
    }

    #[test]
    fn rev_fwd_fn_appends_shadows() {
        let cases = [
            (sig(vec![Type::F64], Type::F64), "fn(f64) -> f64"),
            (
                sig(vec![AF, Type::I64, t(vec![Type::F64, AF])], Type::F64),
                "fn([f64], i64, (f64, [f64]), [f64], [f64]) -> f64",
            ),
            (sig(vec![AI], AF), "fn([i64]) -> ([f64], [f64])"),
            (
                sig(vec![], t(vec![AF, Type::F64, AF])),
                "fn() -> (([f64], f64, [f64]), [f64], [f64])",
            ),
            (sig(vec![AI], Type::Unit), "fn([i64]) -> ()"),
        ];
        for (s, want) in cases {
            assert_eq!(Type::from_fn(Type::rev_fwd_fn(&s)).to_string(), want);
        }
    }

    #[test]
    fn rev_back_fn_maps_result_cotangents_to_argument_cotangents() {
        let cases = [
            (sig(vec![Type::F64], Type::F64), "fn(f64) -> f64"),
            (
                sig(
                    vec![Type::F64, AF, t(vec![Type::F64, Type::I64])],
                    Type::F64,
                ),
                "fn(f64) -> (f64, f64)",
            ),
            (sig(vec![AF], Type::F64), "fn(f64) -> ()"),
            (
                sig(vec![Type::I64], t(vec![Type::F64, AF, Type::F64])),
                "fn(f64, f64) -> ()",
            ),
            (
                sig(vec![Type::F64, Type::F64, Type::F64], Type::Unit),
                "fn() -> (f64, f64, f64)",
            ),
        ];
        for (s, want) in cases {
            assert_eq!(Type::from_fn(Type::rev_back_fn(&s)).to_string(), want);
        }
    }
}
