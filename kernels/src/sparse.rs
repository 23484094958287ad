//! The tangent builder of sparse forward mode: an arena of nodes that stand
//! for tangent vectors (docs/forward.md, "Sparse mode"). The runtime (for
//! compiled code) and the interpreter (`irad-ir`, as `irad_ir::sparse`) both
//! use this arena, so both materialise tangents with the same arithmetic in
//! the same order and agree bit for bit.
//!
//! A handle is an index into the arena; handle 0 is the zero tangent and
//! costs nothing. The other nodes are `onehot(k)` (the unit vector of
//! direction k), `scale(c, a)` (c times a) and `add(a, b)`. Making a node is
//! O(1) and its children always have smaller handles than it, which the
//! constructors check, so the arena is a DAG in topological order.
//!
//! The bulk array primitives' sparse rules (docs/forward.md, "Sparse mode")
//! make `comb` nodes: a weighted sum `c1 a1 + ... + cq aq` of existing
//! handles, with its terms in a side table, one node per result element
//! (`ssum`, `sdot`: O(n) terms for n elements; `sgemma`/`sgemmb`: k + 1 terms
//! per element of an m×n result, O(m k n) in all). Terms whose handle is zero
//! are dropped; a combination with no term left is the zero handle and one
//! whose only term has weight 1.0 is that term's handle (no node), so a copy
//! of handles makes nothing. [`check_bulk`] checks their shapes with the
//! bulk primitives' checks and words.
//!
//! [`SparseArena::dense`] materialises a tangent: one backward sweep over the
//! handles from the root down to the smallest one it reaches, in decreasing
//! order, skipping those it does not reach; a shared sub-DAG is visited once,
//! and the cost is O(root - lowest reached + n) for a dense result of n
//! entries: O(nodes made) for the one materialisation at the end of a
//! gradient, which is linear in the tangent work (a priority queue over the
//! reachable nodes alone measured several times slower). Iterative, so no
//! depth of DAG can overflow the stack. Assumes nothing of its callers:
//! invalid handles and directions are errors, never panics.

use crate::trap::Trap;

/// The largest number of nodes an arena holds (2^31 handles fit an i64 and
/// a u32 index); making one more is an error.
pub const MAX_SPARSE_NODES: usize = 1 << 31;

/// The sparse primitives that read or write arrays of handles (the tangents
/// of the bulk array primitives in sparse forward mode).
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum SparseBulk {
    /// `ssum([sparse]) -> sparse`.
    Sum,
    /// `sdot([f64], [sparse]) -> sparse`.
    Dot,
    /// `sfill([sparse], sparse)`.
    Fill,
    /// `sgemma(bool, bool, [sparse], [f64], i64, i64, i64, [sparse])`.
    GemmA,
    /// `sgemmb(bool, bool, [f64], [sparse], i64, i64, i64, [sparse])`.
    GemmB,
}

impl SparseBulk {
    /// The IR name.
    pub fn name(self) -> &'static str {
        match self {
            SparseBulk::Sum => "ssum",
            SparseBulk::Dot => "sdot",
            SparseBulk::Fill => "sfill",
            SparseBulk::GemmA => "sgemma",
            SparseBulk::GemmB => "sgemmb",
        }
    }
}

/// Checks the shapes of a call of `op` as the bulk primitive it mirrors
/// (`sdot` as `dot`, `sgemma`/`sgemmb` as `gemm`: the same conditions and
/// words, named after `op`); `ssum` and `sfill` take any length. `lens` are
/// the lengths of the array operands, `dims` the dimensions, `flags` the
/// transposition flags, `same(i, j)` whether array operands i and j are the
/// same array, all in operand order.
pub fn check_bulk(
    op: SparseBulk,
    lens: &[usize],
    dims: &[i64],
    flags: [bool; 2],
    same: &dyn Fn(usize, usize) -> bool,
) -> Result<(), String> {
    use crate::bulk::{Op, check};
    let mirror = match op {
        SparseBulk::Sum | SparseBulk::Fill => return Ok(()),
        SparseBulk::Dot => Op::Dot,
        SparseBulk::GemmA | SparseBulk::GemmB => Op::Gemm,
    };
    check(mirror, lens, dims, flags, same).map_err(|msg| {
        msg.replacen(
            &format!("`{}`", mirror.name()),
            &format!("`{}`", op.name()),
            1,
        )
    })
}

/// One node of the tangent builder.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum SparseNode {
    /// The zero tangent (handle 0 only).
    Zero,
    /// The unit vector of direction `k`.
    OneHot(u64),
    /// `c` times the tangent of the child.
    Scale(f64, u32),
    /// The sum of the tangents of the two children.
    Add(u32, u32),
    /// A weighted sum of children: terms `start .. start + len` of the
    /// arena's term table ([`SparseArena::terms`]), each a weight and a child.
    Comb {
        /// The first term.
        start: u32,
        /// The number of terms (at least 2, or 1 with a weight other than 1).
        len: u32,
    },
}

/// Why a sparse operation failed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SparseError {
    /// A handle that names no node of the arena.
    BadHandle(i64),
    /// A negative direction for `onehot`.
    BadDirection(i64),
    /// A direction `k` at or beyond the materialised length `n`: (k, n).
    OutOfRange(u64, i64),
    /// The arena holds [`MAX_SPARSE_NODES`] nodes already.
    Full,
    /// Memory ran out growing the arena (or its scratch space).
    OutOfMemory,
}

impl SparseError {
    /// The run-time error this is.
    pub fn trap(self) -> Trap<'static> {
        match self {
            SparseError::BadHandle(h) => Trap::SparseHandle(h),
            SparseError::BadDirection(k) => Trap::SparseDirection(k),
            // Directions come from `onehot`, which refuses negative ones, so
            // every `k` fits an i64.
            SparseError::OutOfRange(k, n) => Trap::SparseRange {
                direction: k as i64,
                len: n,
            },
            SparseError::Full => Trap::SparseFull,
            SparseError::OutOfMemory => Trap::OomSparse,
        }
    }
}

impl std::fmt::Display for SparseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.trap().fmt(f)
    }
}

/// The arena of tangent nodes, with the scratch space of materialisation.
#[derive(Clone, Debug)]
pub struct SparseArena {
    nodes: Vec<SparseNode>,
    /// Accumulated coefficients during [`SparseArena::dense`], by handle;
    /// zero outside it.
    adj: Vec<f64>,
    /// Whether a handle is reached during [`SparseArena::dense`].
    queued: Vec<bool>,
    /// The terms of the `Comb` nodes: (weight, child).
    terms: Vec<(f64, u32)>,
}

impl Default for SparseArena {
    fn default() -> SparseArena {
        SparseArena {
            nodes: vec![SparseNode::Zero],
            adj: Vec::new(),
            queued: Vec::new(),
            terms: Vec::new(),
        }
    }
}

impl SparseArena {
    /// The number of nodes, the zero node included.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the arena holds only the zero node.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() <= 1
    }

    /// Forgets every node but zero (handles made before are invalid after).
    pub fn clear(&mut self) {
        self.nodes.truncate(1);
        self.terms.clear();
    }

    /// The terms (weight, child) of a `Comb` node `start .. start + len`
    /// (empty for a range outside the table).
    pub fn terms(&self, start: u32, len: u32) -> &[(f64, u32)] {
        let (start, len) = (start as usize, len as usize);
        self.terms.get(start..start + len).unwrap_or(&[])
    }

    /// The node of handle `h`.
    pub fn node(&self, h: i64) -> Result<SparseNode, SparseError> {
        usize::try_from(h)
            .ok()
            .and_then(|i| self.nodes.get(i))
            .copied()
            .ok_or(SparseError::BadHandle(h))
    }

    fn push(&mut self, node: SparseNode) -> Result<i64, SparseError> {
        if self.nodes.len() >= MAX_SPARSE_NODES {
            return Err(SparseError::Full);
        }
        // Grow by doubling, as `push` would, but fail cleanly.
        if self.nodes.len() == self.nodes.capacity() {
            let more = self.nodes.len().min(MAX_SPARSE_NODES - self.nodes.len());
            self.nodes
                .try_reserve(more.max(1))
                .map_err(|_| SparseError::OutOfMemory)?;
        }
        self.nodes.push(node);
        Ok((self.nodes.len() - 1) as i64)
    }

    fn index(&self, h: i64) -> Result<u32, SparseError> {
        self.node(h)?;
        u32::try_from(h).map_err(|_| SparseError::BadHandle(h))
    }

    /// `onehot(k)`: a new node for the unit vector of direction `k`.
    pub fn onehot(&mut self, k: i64) -> Result<i64, SparseError> {
        let k = u64::try_from(k).map_err(|_| SparseError::BadDirection(k))?;
        self.push(SparseNode::OneHot(k))
    }

    /// `scale(c, a)`: zero when `a` is zero (whatever `c` is, so a zero
    /// tangent stays exactly zero), otherwise a new node.
    pub fn scale(&mut self, c: f64, a: i64) -> Result<i64, SparseError> {
        let a = self.index(a)?;
        if a == 0 {
            return Ok(0);
        }
        self.push(SparseNode::Scale(c, a))
    }

    /// `add(a, b)`: the other operand when one is zero, otherwise a new node.
    pub fn add(&mut self, a: i64, b: i64) -> Result<i64, SparseError> {
        let (a, b) = (self.index(a)?, self.index(b)?);
        match (a, b) {
            (0, _) => Ok(i64::from(b)),
            (_, 0) => Ok(i64::from(a)),
            _ => self.push(SparseNode::Add(a, b)),
        }
    }

    /// A new `Comb` node for the weighted sum of `terms` (weight, handle):
    /// terms with the zero handle are dropped; none left is the zero handle,
    /// one of weight 1.0 is its handle. On an invalid handle nothing is made.
    fn comb(&mut self, terms: impl Iterator<Item = (f64, i64)>) -> Result<i64, SparseError> {
        let start = self.terms.len();
        let res = self.comb_from(start, terms);
        if res.is_err() {
            self.terms.truncate(start);
        }
        res
    }

    fn comb_from(
        &mut self,
        start: usize,
        terms: impl Iterator<Item = (f64, i64)>,
    ) -> Result<i64, SparseError> {
        for (c, h) in terms {
            let h = self.index(h)?;
            if h == 0 {
                continue;
            }
            if self.terms.len() == self.terms.capacity() {
                let more = self.terms.len().max(16);
                self.terms
                    .try_reserve(more)
                    .map_err(|_| SparseError::OutOfMemory)?;
            }
            self.terms.push((c, h));
        }
        let len = self.terms.len() - start;
        match len {
            0 => Ok(0),
            1 if self.terms[start].0 == 1.0 => {
                let h = self.terms[start].1;
                self.terms.truncate(start);
                Ok(i64::from(h))
            }
            _ => {
                let (Ok(start), Ok(len)) = (u32::try_from(start), u32::try_from(len)) else {
                    return Err(SparseError::Full);
                };
                if u32::try_from(self.terms.len()).is_err() {
                    return Err(SparseError::Full);
                }
                self.push(SparseNode::Comb { start, len })
            }
        }
    }

    /// `ssum(a)`: the sum of the handles of `a` (one node, or none).
    pub fn sum(&mut self, a: &[i64]) -> Result<i64, SparseError> {
        self.comb(a.iter().map(|&h| (1.0, h)))
    }

    /// `sdot(w, a)`: `w[0] a[0] + ... + w[n-1] a[n-1]` (one node, or none);
    /// the caller checked the lengths ([`check_bulk`]), extra entries of
    /// either are ignored.
    pub fn dot(&mut self, w: &[f64], a: &[i64]) -> Result<i64, SparseError> {
        self.comb(w.iter().copied().zip(a.iter().copied()))
    }

    /// `sfill(a, v)`: every handle of `a` becomes `v` (checked first).
    pub fn fill(&self, a: &mut [i64], v: i64) -> Result<(), SparseError> {
        self.index(v)?;
        a.fill(v);
        Ok(())
    }

    /// `sgemma(ta, tb, A, B, m, k, n, C)` (`sparse_a`, `s` is A and `f` B)
    /// or `sgemmb` (`!sparse_a`, `f` is A and `s` B): `C += op(A) op(B)` on
    /// handles, one `Comb` node per element of C with the old handle (of
    /// weight one) and the k products, in order of the inner index. Shapes as
    /// [`crate::bulk::gemm`]'s, checked by the caller ([`check_bulk`]); a
    /// shape that does not fit is [`SparseError::BadHandle`] of -1, never a
    /// panic. On an error, C may be partly updated.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm(
        &mut self,
        sparse_a: bool,
        ta: bool,
        tb: bool,
        s: &[i64],
        f: &[f64],
        (m, k, n): (usize, usize, usize),
        c: &mut [i64],
    ) -> Result<(), SparseError> {
        let fits = |len: usize, r: usize, q: usize| r.checked_mul(q) == Some(len);
        let (la, lb) = if sparse_a {
            (s.len(), f.len())
        } else {
            (f.len(), s.len())
        };
        if !(fits(la, m, k) && fits(lb, k, n) && fits(c.len(), m, n)) {
            return Err(SparseError::BadHandle(-1));
        }
        // Element (i, l) of op(A) and (l, j) of op(B), as indices.
        let ia = |i: usize, l: usize| if ta { l * m + i } else { i * k + l };
        let ib = |l: usize, j: usize| if tb { j * k + l } else { l * n + j };
        for i in 0..m {
            for j in 0..n {
                let old = c[i * n + j];
                let products = (0..k).map(|l| {
                    if sparse_a {
                        (f[ib(l, j)], s[ia(i, l)])
                    } else {
                        (f[ia(i, l)], s[ib(l, j)])
                    }
                });
                c[i * n + j] = self.comb(std::iter::once((1.0, old)).chain(products))?;
            }
        }
        Ok(())
    }

    /// The tangent of handle `h` as a dense vector of `n` coefficients, in
    /// `out` (cleared and filled with `n` entries; the caller checks `n`).
    ///
    /// The coefficient of the root is 1; nodes are visited in decreasing
    /// handle order, each passing its coefficient to its children
    /// (`scale(c, a)` passes `c * coef` to `a`, `add` passes `coef` to both),
    /// and `onehot(k)` adds its coefficient to `out[k]`. A direction at or
    /// beyond `n` is an error.
    pub fn dense(&mut self, h: i64, n: usize, out: &mut Vec<f64>) -> Result<(), SparseError> {
        let root = self.index(h)? as usize;
        out.clear();
        out.try_reserve(n).map_err(|_| SparseError::OutOfMemory)?;
        out.resize(n, 0.0);
        if root == 0 {
            return Ok(());
        }
        if self.adj.len() < self.nodes.len() {
            let more = self.nodes.len() - self.adj.len();
            let more_q = self.nodes.len() - self.queued.len();
            self.adj
                .try_reserve(more)
                .and_then(|()| self.queued.try_reserve(more_q))
                .map_err(|_| SparseError::OutOfMemory)?;
            self.adj.resize(self.nodes.len(), 0.0);
            self.queued.resize(self.nodes.len(), false);
        }
        self.queued[root] = true;
        self.adj[root] = 1.0;
        let mut lowest = root;
        let mut result = Ok(());
        let mut i = root;
        // Children have smaller handles than their parents, so every node
        // has all its contributions when the sweep reaches it.
        while i >= lowest && i > 0 {
            if std::mem::take(&mut self.queued[i]) {
                let coef = std::mem::take(&mut self.adj[i]);
                let mut pass = |j: u32, c: f64| {
                    let j = j as usize;
                    self.adj[j] += c;
                    self.queued[j] = true;
                    lowest = lowest.min(j);
                };
                match self.nodes[i] {
                    SparseNode::Zero => {}
                    SparseNode::OneHot(k) => {
                        match usize::try_from(k).ok().and_then(|k| out.get_mut(k)) {
                            Some(slot) => *slot += coef,
                            None if result.is_ok() => {
                                result = Err(SparseError::OutOfRange(k, n as i64));
                            }
                            None => {}
                        }
                    }
                    SparseNode::Scale(c, a) => pass(a, c * coef),
                    SparseNode::Add(a, b) => {
                        pass(a, coef);
                        pass(b, coef);
                    }
                    SparseNode::Comb { start, len } => {
                        let (start, len) = (start as usize, len as usize);
                        for &(c, j) in self.terms.get(start..start + len).unwrap_or(&[]) {
                            pass(j, c * coef);
                        }
                    }
                }
            }
            i -= 1;
        }
        // Handle 0 (zero) may have been marked; leave the scratch clean.
        self.queued[0] = false;
        self.adj[0] = 0.0;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_free_and_sums_materialise() {
        let mut a = SparseArena::default();
        assert_eq!(a.scale(2.0, 0), Ok(0));
        assert_eq!(a.add(0, 0), Ok(0));
        assert_eq!(a.len(), 1);
        let x = a.onehot(0).unwrap_or(0);
        let y = a.onehot(2).unwrap_or(0);
        let sx = a.scale(3.0, x).unwrap_or(0);
        let s = a.add(sx, y).unwrap_or(0);
        // Shared: s + s = 2s.
        let d = a.add(s, s).unwrap_or(0);
        let mut out = Vec::new();
        assert_eq!(a.dense(d, 3, &mut out), Ok(()));
        assert_eq!(out, vec![6.0, 0.0, 2.0]);
        assert_eq!(a.dense(d, 2, &mut out), Err(SparseError::OutOfRange(2, 2)));
        assert_eq!(a.add(99, 0), Err(SparseError::BadHandle(99)));
        assert_eq!(a.onehot(-1), Err(SparseError::BadDirection(-1)));
        a.clear();
        assert!(a.is_empty());
    }

    #[test]
    fn combinations_materialise_as_weighted_sums() {
        let mut a = SparseArena::default();
        let x: Vec<i64> = (0..3).map(|k| a.onehot(k).unwrap_or(0)).collect();
        let mut out = Vec::new();
        // ssum of zero handles is zero, of one handle that handle: no node.
        assert_eq!(a.sum(&[0, 0]), Ok(0));
        assert_eq!(a.sum(&[0, x[1]]), Ok(x[1]));
        let before = a.len();
        let s = a.sum(&x).unwrap_or(0);
        assert_eq!(a.len(), before + 1);
        assert_eq!(a.dense(s, 3, &mut out), Ok(()));
        assert_eq!(out, vec![1.0, 1.0, 1.0]);
        let d = a.dot(&[2.0, -1.0, 0.5], &[x[0], x[0], x[2]]).unwrap_or(0);
        assert_eq!(a.dense(d, 3, &mut out), Ok(()));
        assert_eq!(out, vec![1.0, 0.0, 0.5]);
        assert_eq!(a.dot(&[1.0], &[99]), Err(SparseError::BadHandle(99)));
        // C (1×2) += A (1×3 handles) B (3×2), then with B transposed.
        let mut c = [x[2], 0];
        let b = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        assert_eq!(
            a.gemm(true, false, false, &x, &b, (1, 3, 2), &mut c),
            Ok(())
        );
        assert_eq!(a.dense(c[0], 3, &mut out), Ok(()));
        assert_eq!(out, vec![1.0, 3.0, 6.0]);
        assert_eq!(a.dense(c[1], 3, &mut out), Ok(()));
        assert_eq!(out, vec![2.0, 4.0, 6.0]);
        // C (2×1) += A (2×3 f64) op(B), B (3×1 handles) given as 1×3, tb.
        let mut c = [0, 0];
        let a23 = [1.0, 0.0, 2.0, 0.0, -1.0, 0.0];
        assert_eq!(
            a.gemm(false, false, true, &x, &a23, (2, 3, 1), &mut c),
            Ok(())
        );
        assert_eq!(a.dense(c[0], 3, &mut out), Ok(()));
        assert_eq!(out, vec![1.0, 0.0, 2.0]);
        assert_eq!(a.dense(c[1], 3, &mut out), Ok(()));
        assert_eq!(out, vec![0.0, -1.0, 0.0]);
        // Shapes that do not fit are errors, never panics.
        assert!(
            a.gemm(true, false, false, &x, &b, (2, 3, 2), &mut c)
                .is_err()
        );
        let mut f = [0; 2];
        assert_eq!(a.fill(&mut f, s), Ok(()));
        assert_eq!(f, [s, s]);
        assert_eq!(a.fill(&mut f, -3), Err(SparseError::BadHandle(-3)));
        a.clear();
        assert!(a.terms.is_empty());
    }

    #[test]
    fn shape_checks_name_the_sparse_primitive() {
        let same = |_: usize, _: usize| false;
        assert_eq!(
            check_bulk(SparseBulk::Sum, &[3], &[], [false; 2], &same),
            Ok(())
        );
        assert_eq!(
            check_bulk(SparseBulk::Dot, &[3, 2], &[], [false; 2], &same),
            Err("`sdot`: a has 3 elements but b has 2".to_string())
        );
        assert_eq!(
            check_bulk(SparseBulk::GemmB, &[6, 3, 3], &[2, 3, 1], [false; 2], &same),
            Err("`sgemmb`: C has 3 elements but m*n = 2*1 = 2".to_string())
        );
        let aliased = |i: usize, j: usize| i != j;
        assert_eq!(
            check_bulk(
                SparseBulk::GemmA,
                &[1, 1, 1],
                &[1, 1, 1],
                [false; 2],
                &aliased
            ),
            Err("`sgemma`: the output C is the same array as the input A".to_string())
        );
    }

    #[test]
    fn deep_chains_do_not_recurse() {
        let mut a = SparseArena::default();
        let mut h = a.onehot(0).unwrap_or(0);
        for _ in 0..1_000_000 {
            h = a.scale(1.0, h).unwrap_or(0);
        }
        let mut out = Vec::new();
        assert_eq!(a.dense(h, 1, &mut out), Ok(()));
        assert_eq!(out, vec![1.0]);
    }
}
