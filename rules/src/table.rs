//! The primitive table for testing: for every primitive with a rule, one or
//! more test signatures (argument types, `alloc`'s annotation, constant
//! operands) with a sampling domain per argument. The rule checker
//! (`crate::check`) walks it.
//!
//! Assumes nothing. Guarantees: every primitive of `irad_ir::prim::PRIMS`
//! except the AD ones (`Prim::is_ad`: `dual`, `primal`, `tangent`, `frule`,
//! `push`, `pop`, `revfwd`, `revback`, the sparse builder's) has at least
//! one signature (a unit test checks it), and so have `gemm`, the parts of
//! duals (`dual`, `primal`, `tangent`: reverse over forward and forward over
//! forward) and the sparse builder's primitives (frules only: forward over
//! sparse); every f64 domain lies inside the
//! function's smooth domain with a margin larger than any finite-difference
//! step, so central differences are valid there: away from kinks (abs at 0),
//! ties (min/max operands at least 0.1 apart), jumps (floor/ceil at integers,
//! round at half-integers), branch cuts (atan2 near the negative x axis) and
//! poles; every index lies in range of its array.

use irad_ir::{Const, Lanes, Prim, Scalar, Type};
use std::fmt;

/// How to sample one argument.
#[derive(Clone, Debug, PartialEq)]
pub enum Domain {
    /// An f64 uniform in `[lo, hi]`.
    F64 {
        /// Lower bound.
        lo: f64,
        /// Upper bound.
        hi: f64,
    },
    /// An f64 of magnitude uniform in `[lo, hi]` (0 < lo) and random sign:
    /// keeps away from zero on both sides.
    Magnitude {
        /// Smallest magnitude.
        lo: f64,
        /// Largest magnitude.
        hi: f64,
    },
    /// An f64 in `[lo, hi]` at least `margin` away from every point
    /// `offset + k` (k an integer): away from the jumps of floor and ceil
    /// (offset 0) or round (offset 0.5).
    AwayFromSteps {
        /// Lower bound.
        lo: f64,
        /// Upper bound.
        hi: f64,
        /// Where the steps are, modulo 1.
        offset: f64,
        /// The least distance to a step.
        margin: f64,
    },
    /// An f64 in `[lo, hi]` at least `gap` away from the f64 argument number
    /// `from` (earlier in the list): keeps min/max away from ties.
    Apart {
        /// Lower bound.
        lo: f64,
        /// Upper bound.
        hi: f64,
        /// The argument to keep away from.
        from: usize,
        /// The least distance.
        gap: f64,
    },
    /// An i64 uniform in `lo..=hi`.
    I64 {
        /// Lower bound.
        lo: i64,
        /// Upper bound (inclusive).
        hi: i64,
    },
    /// An i64 of magnitude in `lo..=hi` (0 < lo) and random sign.
    I64Magnitude {
        /// Smallest magnitude.
        lo: i64,
        /// Largest magnitude (inclusive).
        hi: i64,
    },
    /// A bool, either value equally likely.
    Bool,
    /// An index in range of the array argument number `of` (earlier in the
    /// list, of length at least 1).
    Index {
        /// The array argument.
        of: usize,
    },
    /// An array of `len.0..=len.1` elements (at most
    /// `check::MAX_SAMPLE_LEN`), each from `[lo, hi]` (rounded to integers
    /// for `[i64]`, ignored for `[bool]`).
    Array {
        /// The element type.
        elem: Scalar,
        /// Element lower bound.
        lo: f64,
        /// Element upper bound.
        hi: f64,
        /// Length range (inclusive).
        len: (usize, usize),
    },
    /// A tuple, each element from its own domain.
    Tuple(Vec<Domain>),
    /// A dense dual `dual<T, N>`: the primal from the first domain, one
    /// tangent from each further domain (N of them, at least one), for the
    /// rrules of the parts of duals (reverse over forward).
    Dual(Vec<Domain>),
    /// Sparse handles for the frules of the builder's primitives, carried
    /// by the checker as their coefficients over
    /// `check::SPARSE_OPERAND_DIRECTIONS` directions, each uniform in
    /// [-2, 2] (`check/carrier.rs`): one `sparse` handle when `len` is
    /// `None`, a `[sparse]` of `len` handles otherwise.
    Handles {
        /// The array's length, `None` for a single handle.
        len: Option<usize>,
    },
    /// A constant operand (no parameter, no tangent), such as `getfield`'s
    /// field number or a constant exponent.
    Const(Const),
}

/// One argument of a test signature.
#[derive(Clone, Debug, PartialEq)]
pub struct ArgSpec {
    /// The argument's type.
    pub ty: Type,
    /// Where its values come from.
    pub domain: Domain,
}

/// A primitive called with arguments of given types, and where to sample them.
#[derive(Clone, Debug, PartialEq)]
pub struct Signature {
    /// The primitive.
    pub prim: Prim,
    /// The arguments in order.
    pub args: Vec<ArgSpec>,
    /// The `:: T` annotation (`alloc` only).
    pub annot: Option<Type>,
}

impl Signature {
    /// The primal result type, or the typing error of a malformed signature.
    pub fn result(&self) -> Result<Type, String> {
        let types: Vec<Type> = self.args.iter().map(|a| a.ty.clone()).collect();
        let field = match self.args.get(1).map(|a| &a.domain) {
            Some(Domain::Const(Const::I64(k))) => Some(*k),
            _ => None,
        };
        self.prim.result_type(&types, field, self.annot.as_ref())
    }

    /// The argument types.
    pub fn types(&self) -> Vec<Type> {
        self.args.iter().map(|a| a.ty.clone()).collect()
    }
}

impl fmt::Display for Signature {
    /// `sin(f64)`, `getfield((f64, i64), 1)`, `alloc(i64) :: [f64]`,
    /// `pow(f64, 3.0)`: constants print as their value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(", self.prim)?;
        for (i, arg) in self.args.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match &arg.domain {
                Domain::Const(c) => write!(f, "{}", const_text(c))?,
                _ => write!(f, "{}", arg.ty)?,
            }
        }
        f.write_str(")")?;
        if let Some(t) = &self.annot {
            write!(f, " :: {t}")?;
        }
        Ok(())
    }
}

/// The test signatures of every primitive with a rule, grouped as in
/// `ir/src/prim.rs`.
pub fn signatures() -> Vec<Signature> {
    use Prim::*;
    let mut t = Vec::new();
    let wide = || f(-5.0, 5.0);

    // f64 arithmetic.
    for p in [Add, Sub, Mul, Zmul] {
        t.push(sig(p, vec![wide(), wide()]));
    }
    t.push(sig(Mul, vec![wide(), c(Const::F64(2.0))]));
    t.push(sig(Div, vec![wide(), mag(0.2, 5.0)]));
    t.push(sig(Div, vec![c(Const::F64(1.0)), mag(0.2, 5.0)]));
    t.push(sig(Neg, vec![wide()]));
    t.push(sig(Pow, vec![f(0.2, 5.0), f(-3.0, 3.0)]));
    // A constant exponent with a negative base: the rule has no log term.
    t.push(sig(Pow, vec![f(-3.0, 3.0), c(Const::F64(3.0))]));
    t.push(sig(Powi, vec![mag(0.2, 3.0), i(-4, 4)]));
    t.push(sig(Abs, vec![mag(0.1, 5.0)]));
    for p in [Min, Max] {
        t.push(sig(p, vec![wide(), apart(-5.0, 5.0, 0, 0.1)]));
    }
    t.push(sig(Copysign, vec![mag(0.1, 5.0), mag(0.1, 5.0)]));

    // f64 functions.
    let unary: [(Prim, f64, f64); 15] = [
        (Sqrt, 0.1, 10.0),
        (Exp, -5.0, 5.0),
        (Log, 0.1, 10.0),
        (Log1p, -0.9, 10.0),
        (Expm1, -5.0, 5.0),
        (Sin, -6.0, 6.0),
        (Cos, -6.0, 6.0),
        (Tan, -1.2, 1.2),
        (Asin, -0.95, 0.95),
        (Acos, -0.95, 0.95),
        (Atan, -5.0, 5.0),
        (Sinh, -4.0, 4.0),
        (Cosh, -4.0, 4.0),
        (Tanh, -4.0, 4.0),
        (Erf, -3.0, 3.0),
    ];
    for (p, lo, hi) in unary {
        t.push(sig(p, vec![f(lo, hi)]));
    }
    // y away from 0, so the branch cut on the negative x axis is never crossed.
    t.push(sig(Atan2, vec![mag(0.2, 3.0), f(-3.0, 3.0)]));
    for (p, offset) in [(Floor, 0.0), (Ceil, 0.0), (Round, 0.5)] {
        t.push(sig(p, vec![steps(-5.0, 5.0, offset)]));
    }

    // Comparisons and select.
    for p in [Lt, Le, Gt, Ge, Eq, Ne] {
        t.push(sig(p, vec![f(-3.0, 3.0), f(-3.0, 3.0)]));
        t.push(sig(p, vec![i(-5, 5), i(-5, 5)]));
    }
    for p in [Eq, Ne] {
        t.push(sig(p, vec![b(), b()]));
    }
    t.push(sig(Select, vec![b(), wide(), wide()]));
    t.push(sig(Select, vec![b(), wide(), c(Const::F64(0.0))]));
    t.push(sig(
        Select,
        vec![b(), arr(Scalar::F64, 0, 4), arr(Scalar::F64, 0, 4)],
    ));
    let pair = || tup(vec![wide(), i(-5, 5)]);
    t.push(sig(Select, vec![b(), pair(), pair()]));
    t.push(sig(Select, vec![b(), i(-5, 5), i(-5, 5)]));

    // i64 and bool.
    for p in [Iadd, Isub, Imul] {
        t.push(sig(p, vec![i(-1000, 1000), i(-1000, 1000)]));
    }
    for p in [Idiv, Irem] {
        t.push(sig(p, vec![i(-1000, 1000), imag(1, 50)]));
    }
    t.push(sig(Ineg, vec![i(-1000, 1000)]));
    for p in [And, Or] {
        t.push(sig(p, vec![b(), b()]));
    }
    t.push(sig(Not, vec![b()]));

    // The hint to reverse mode.
    t.push(sig(Checkpoint, vec![c(Const::I64(16))]));
    t.push(sig(
        Same,
        vec![arr(Scalar::F64, 0, 4), arr(Scalar::F64, 0, 4)],
    ));

    // Conversions.
    t.push(sig(Sitofp, vec![i(-1000, 1000)]));
    t.push(sig(Fptosi, vec![f(-100.0, 100.0)]));

    // Tuples.
    t.push(sig(Tuple, vec![wide(), i(-5, 5)]));
    t.push(sig(Tuple, vec![wide(), wide()]));
    t.push(sig(Tuple, vec![i(-5, 5), b()]));
    t.push(sig(
        Tuple,
        vec![arr(Scalar::F64, 0, 3), wide(), c(Const::F64(1.5))],
    ));
    t.push(sig(Tuple, vec![]));
    t.push(sig(Getfield, vec![pair(), c(Const::I64(0))]));
    t.push(sig(Getfield, vec![pair(), c(Const::I64(1))]));
    let arr_pair = tup(vec![arr(Scalar::F64, 1, 3), wide()]);
    t.push(sig(Getfield, vec![arr_pair.clone(), c(Const::I64(0))]));
    t.push(sig(Getfield, vec![arr_pair, c(Const::I64(1))]));

    // The parts of duals (reverse over forward, forward over forward).
    let v3 = || arr(Scalar::F64, 3, 3);
    let fa = || tup(vec![wide(), v3()]);
    t.push(sig(Dual, vec![wide(), wide()]));
    t.push(sig(Dual, vec![wide(), wide(), wide()]));
    t.push(sig(Dual, vec![v3(), v3()]));
    t.push(sig(Dual, vec![fa(), fa(), fa()]));
    t.push(sig(Primal, vec![dual(vec![wide(), wide()])]));
    t.push(sig(Primal, vec![dual(vec![v3(), v3(), v3()])]));
    t.push(sig(Primal, vec![dual(vec![fa(), fa()])]));
    t.push(sig(
        Tangent,
        vec![dual(vec![wide(), wide(), wide(), wide()]), c(Const::I64(1))],
    ));
    t.push(sig(Tangent, vec![dual(vec![v3(), v3()]), c(Const::I64(0))]));
    t.push(sig(
        Tangent,
        vec![dual(vec![fa(), fa(), fa()]), c(Const::I64(1))],
    ));

    // Arrays.
    for elem in [Scalar::F64, Scalar::I64, Scalar::Bool] {
        let mut s = sig(Alloc, vec![i(0, 5)]);
        s.annot = Some(Type::Array(elem));
        t.push(s);
    }
    t.push(sig(Zeros, vec![i(0, 5)]));
    for elem in [Scalar::F64, Scalar::I64] {
        t.push(sig(Length, vec![arr(elem, 0, 4)]));
    }
    for elem in [Scalar::F64, Scalar::I64, Scalar::Bool] {
        t.push(sig(Arrayref, vec![arr(elem, 1, 4), index(0)]));
    }
    t.push(sig(
        Arrayset,
        vec![arr(Scalar::F64, 1, 4), index(0), wide()],
    ));
    t.push(sig(
        Arrayset,
        vec![arr(Scalar::F64, 1, 4), index(0), c(Const::F64(0.5))],
    ));
    t.push(sig(
        Arrayset,
        vec![arr(Scalar::I64, 1, 4), index(0), i(-5, 5)],
    ));
    t.push(sig(Arrayset, vec![arr(Scalar::Bool, 1, 4), index(0), b()]));
    for elem in [Scalar::F64, Scalar::I64] {
        t.push(sig(Copy, vec![arr(elem, 0, 4)]));
    }

    // Bulk array primitives: fixed lengths where shapes must agree.
    let v = |n: usize| arr(Scalar::F64, n, n);
    let k = |n: i64| c(Const::I64(n));
    t.push(sig(Sum, vec![arr(Scalar::F64, 0, 5)]));
    t.push(sig(Dot, vec![v(4), v(4)]));
    t.push(sig(Axpy, vec![wide(), v(4), v(4)]));
    t.push(sig(Copyto, vec![v(4), v(4)]));
    t.push(sig(Axpy, vec![c(Const::F64(-1.5)), v(3), v(3)]));
    t.push(sig(Scale, vec![wide(), arr(Scalar::F64, 0, 4)]));
    t.push(sig(Scale, vec![c(Const::F64(2.0)), v(3)]));
    t.push(sig(Fill, vec![arr(Scalar::F64, 0, 4), wide()]));
    t.push(sig(Fill, vec![v(3), c(Const::F64(0.25))]));
    for (m, n) in [(2, 3), (3, 1), (0, 2), (2, 0)] {
        let (mu, nu) = (m as usize, n as usize);
        t.push(sig(Matvec, vec![v(mu * nu), v(nu), k(m), k(n), v(mu)]));
    }
    for (m, kk, n) in [(2, 3, 2), (1, 4, 3), (3, 2, 1), (2, 0, 2), (0, 2, 3)] {
        let (mu, ku, nu) = (m as usize, kk as usize, n as usize);
        t.push(sig(
            Matmul,
            vec![v(mu * ku), v(ku * nu), k(m), k(kk), k(n), v(mu * nu)],
        ));
    }
    // `gemm` (an AD primitive: frule only, for forward over reverse), every
    // transposition; op(A) is m×k, op(B) k×n, stored transposed when asked.
    for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
        for (m, kk, n) in [(2, 3, 2), (1, 2, 3)] {
            let (mu, ku, nu) = (m as usize, kk as usize, n as usize);
            t.push(sig(
                Gemm,
                vec![
                    c(Const::Bool(ta)),
                    c(Const::Bool(tb)),
                    v(mu * ku),
                    v(ku * nu),
                    k(m),
                    k(kk),
                    k(n),
                    v(mu * nu),
                ],
            ));
        }
    }
    sparse_builder(&mut t);
    t
}

/// The builder's primitives (dense frules: forward mode over a sparse rule),
/// their handles carried as coefficients (`Domain::Handles`); the shapes of
/// `sgemma`/`sgemmb` as `gemm`'s.
fn sparse_builder(t: &mut Vec<Signature>) {
    use Prim::*;
    let h = || Domain::Handles { len: None };
    let hs = |n: usize| Domain::Handles { len: Some(n) };
    let v = |n: usize| arr(Scalar::F64, n, n);
    let k = |n: i64| c(Const::I64(n));
    let dirs = crate::check::SPARSE_OPERAND_DIRECTIONS;
    t.push(sig(Sonehot, vec![i(0, dirs - 1)]));
    t.push(sig(Szero, vec![]));
    t.push(sig(Sscale, vec![f(-5.0, 5.0), h()]));
    t.push(sig(Sscale, vec![c(Const::F64(-1.0)), h()]));
    t.push(sig(Sadd, vec![h(), h()]));
    t.push(sig(Sdense, vec![h(), k(dirs)]));
    t.push(sig(Sdense, vec![h(), k(dirs + 2)]));
    t.push(sig(Ssum, vec![hs(3)]));
    t.push(sig(Sdot, vec![v(3), hs(3)]));
    t.push(sig(Sfill, vec![hs(3), h()]));
    for (ta, tb) in [(false, false), (true, true)] {
        let (m, kk, n) = (2usize, 3usize, 2usize);
        let dims = || [k(m as i64), k(kk as i64), k(n as i64)];
        let flags = [c(Const::Bool(ta)), c(Const::Bool(tb))];
        let [dm, dk, dn] = dims();
        let mut a = flags.to_vec();
        a.extend([hs(m * kk), v(kk * n), dm, dk, dn, hs(m * n)]);
        t.push(sig(Sgemma, a));
        let [dm, dk, dn] = dims();
        let mut b = flags.to_vec();
        b.extend([v(m * kk), hs(kk * n), dm, dk, dn, hs(m * n)]);
        t.push(sig(Sgemmb, b));
    }
}

/// The text of a constant operand, as the IR prints it.
pub(crate) fn const_text(c: &Const) -> String {
    match c {
        Const::F64(x) => irad_ir::text::num::format_f64(*x),
        Const::I64(k) => k.to_string(),
        Const::Bool(b) => b.to_string(),
        Const::Unit => "()".into(),
        Const::Func(_) => "@fn".into(),
    }
}

/// The type a domain's values have.
fn domain_type(d: &Domain) -> Type {
    match d {
        Domain::F64 { .. }
        | Domain::Magnitude { .. }
        | Domain::AwayFromSteps { .. }
        | Domain::Apart { .. } => Type::F64,
        Domain::I64 { .. } | Domain::I64Magnitude { .. } | Domain::Index { .. } => Type::I64,
        Domain::Bool => Type::Bool,
        Domain::Array { elem, .. } => Type::Array(*elem),
        Domain::Tuple(ds) => Type::tuple(ds.iter().map(domain_type).collect()),
        Domain::Dual(ds) => {
            let lanes = u32::try_from(ds.len().saturating_sub(1))
                .ok()
                .and_then(Lanes::dense)
                .unwrap_or(Lanes::ONE);
            Type::dual_n(ds.first().map_or(Type::F64, domain_type), lanes)
        }
        Domain::Handles { len: None } => Type::Sparse,
        Domain::Handles { len: Some(_) } => Type::Array(Scalar::Sparse),
        Domain::Const(c) => match c {
            Const::F64(_) => Type::F64,
            Const::I64(_) => Type::I64,
            Const::Bool(_) => Type::Bool,
            Const::Unit | Const::Func(_) => Type::Unit,
        },
    }
}

fn sig(prim: Prim, domains: Vec<Domain>) -> Signature {
    let args = domains
        .into_iter()
        .map(|domain| ArgSpec {
            ty: domain_type(&domain),
            domain,
        })
        .collect();
    Signature {
        prim,
        args,
        annot: None,
    }
}

fn f(lo: f64, hi: f64) -> Domain {
    Domain::F64 { lo, hi }
}

fn mag(lo: f64, hi: f64) -> Domain {
    Domain::Magnitude { lo, hi }
}

fn steps(lo: f64, hi: f64, offset: f64) -> Domain {
    Domain::AwayFromSteps {
        lo,
        hi,
        offset,
        margin: 0.1,
    }
}

fn apart(lo: f64, hi: f64, from: usize, gap: f64) -> Domain {
    Domain::Apart { lo, hi, from, gap }
}

fn i(lo: i64, hi: i64) -> Domain {
    Domain::I64 { lo, hi }
}

fn imag(lo: i64, hi: i64) -> Domain {
    Domain::I64Magnitude { lo, hi }
}

fn b() -> Domain {
    Domain::Bool
}

fn c(k: Const) -> Domain {
    Domain::Const(k)
}

fn index(of: usize) -> Domain {
    Domain::Index { of }
}

fn tup(ds: Vec<Domain>) -> Domain {
    Domain::Tuple(ds)
}

fn dual(parts: Vec<Domain>) -> Domain {
    Domain::Dual(parts)
}

fn arr(elem: Scalar, min: usize, max: usize) -> Domain {
    Domain::Array {
        elem,
        lo: -5.0,
        hi: 5.0,
        len: (min, max),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn every_primitive_with_a_rule_has_a_signature() {
        let covered: HashSet<Prim> = signatures().iter().map(|s| s.prim).collect();
        let missing: Vec<&str> = irad_ir::prim::PRIMS
            .iter()
            .filter(|row| !row.prim.is_ad())
            .filter(|row| !covered.contains(&row.prim))
            .map(|row| row.name)
            .collect();
        assert_eq!(missing, Vec::<&str>::new());
    }

    #[test]
    fn every_signature_is_well_typed_and_uniquely_named() {
        let mut names = HashSet::new();
        for s in signatures() {
            assert!(s.result().is_ok(), "{s}: {:?}", s.result());
            assert!(names.insert(s.to_string()), "{s} is listed twice");
        }
        let names: Vec<String> = signatures().iter().map(|s| s.to_string()).collect();
        for want in [
            "sin(f64)",
            "pow(f64, 3.0)",
            "getfield((f64, i64), 1)",
            "alloc(i64) :: [f64]",
            "select(bool, (f64, i64), (f64, i64))",
            "tuple()",
        ] {
            assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
        }
    }
}
