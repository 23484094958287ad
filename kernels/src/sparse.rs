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
}

impl Default for SparseArena {
    fn default() -> SparseArena {
        SparseArena {
            nodes: vec![SparseNode::Zero],
            adj: Vec::new(),
            queued: Vec::new(),
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
