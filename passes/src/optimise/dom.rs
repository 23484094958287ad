//! Dominators of a function's layout blocks (Cooper, Harvey and Kennedy's
//! iterative algorithm over reverse postorder), for `cse` and `licm`.
//!
//! Assumes a [`Cfg`] of a verified function. Guarantees: `idom[b]` is the
//! immediate dominator of every reachable block but the entry (`None` for
//! the entry and unreachable blocks); `children` lists the dominator tree;
//! nothing recurses.

use crate::cfg::Cfg;

/// The dominator tree of one function, by layout index.
pub(crate) struct Doms {
    /// Immediate dominators.
    pub idom: Vec<Option<usize>>,
    /// Reachable blocks in reverse postorder.
    pub rpo: Vec<usize>,
    /// Position of each block in `rpo` (`usize::MAX` if unreachable).
    pub rpo_num: Vec<usize>,
}

impl Doms {
    /// The dominators of `cfg`'s blocks.
    pub fn new(cfg: &Cfg) -> Doms {
        let n = cfg.layout.len();
        let rpo = cfg.reverse_postorder();
        let mut rpo_num = vec![usize::MAX; n];
        for (i, &b) in rpo.iter().enumerate() {
            rpo_num[b] = i;
        }
        let mut idom: Vec<Option<usize>> = vec![None; n];
        if let Some(&entry) = rpo.first() {
            idom[entry] = Some(entry);
        }
        let mut changed = true;
        while changed {
            changed = false;
            for &b in rpo.iter().skip(1) {
                let mut new: Option<usize> = None;
                for &p in &cfg.preds[b] {
                    if idom[p].is_none() {
                        continue;
                    }
                    new = Some(match new {
                        None => p,
                        Some(cur) => intersect(&idom, &rpo_num, p, cur),
                    });
                }
                if new.is_some() && idom[b] != new {
                    idom[b] = new;
                    changed = true;
                }
            }
        }
        if let Some(&entry) = rpo.first() {
            idom[entry] = None;
        }
        Doms { idom, rpo, rpo_num }
    }

    /// Whether block `a` dominates block `b` (both reachable).
    pub fn dominates(&self, a: usize, mut b: usize) -> bool {
        loop {
            if a == b {
                return true;
            }
            match self.idom[b] {
                Some(up) if self.rpo_num[up] < self.rpo_num[b] => b = up,
                _ => return false,
            }
        }
    }

    /// The children of each block in the dominator tree, in reverse postorder.
    pub fn children(&self) -> Vec<Vec<usize>> {
        let mut children = vec![Vec::new(); self.idom.len()];
        for &b in &self.rpo {
            if let Some(p) = self.idom[b] {
                children[p].push(b);
            }
        }
        children
    }
}

fn intersect(idom: &[Option<usize>], rpo_num: &[usize], mut a: usize, mut b: usize) -> usize {
    while a != b {
        while rpo_num[a] > rpo_num[b] {
            match idom[a] {
                Some(x) => a = x,
                None => return b,
            }
        }
        while rpo_num[b] > rpo_num[a] {
            match idom[b] {
                Some(x) => b = x,
                None => return a,
            }
        }
    }
    a
}
