//! The derived-rule cache both AD modes share: the rules already derived or
//! declared, by key (forward mode: callee and batch width; reverse mode:
//! callee), the variants with only some parameters active, the queue of
//! declared rules whose bodies are still to be built, and usage counters.
//!
//! Assumes nothing about what a rule is (`R`: one function, or the two pieces
//! of reverse mode) or what a queued job holds (`J`). Guarantees: a key
//! answers the same rule until the cache is dropped; every job queued is
//! counted as derived, every answer from the cache as a hit.

use rustc_hash::FxHashMap as HashMap;
use std::hash::Hash;

/// How a derived-rule cache has been used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Rules derived from a function body.
    pub derived: usize,
    /// Rules built around a primitive's or a marked function's registered
    /// rule, for use as a function value.
    pub wrapped: usize,
    /// Requests answered from the cache.
    pub hits: usize,
}

/// Derived rules by key `K`, variants by (key, activity of each parameter),
/// and the declared bodies still to build (jobs `J`).
#[derive(Debug)]
pub(crate) struct RuleCache<K, R, J> {
    rules: HashMap<K, R>,
    variants: HashMap<(K, Vec<bool>), R>,
    pending: Vec<J>,
    stats: CacheStats,
}

impl<K: Eq + Hash, R: Copy, J> RuleCache<K, R, J> {
    /// An empty cache.
    pub fn new() -> RuleCache<K, R, J> {
        RuleCache {
            rules: HashMap::default(),
            variants: HashMap::default(),
            pending: Vec::new(),
            stats: CacheStats::default(),
        }
    }

    /// The rule of `key`, counted as a hit when there is one.
    pub fn get(&mut self, key: &K) -> Option<R> {
        let rule = self.peek(key)?;
        self.stats.hits += 1;
        Some(rule)
    }

    /// The rule of `key`, without counting.
    pub fn peek(&self, key: &K) -> Option<R> {
        self.rules.get(key).copied()
    }

    /// Records the rule of `key`.
    pub fn insert(&mut self, key: K, rule: R) {
        self.rules.insert(key, rule);
    }

    /// The variant of `key` with the parameters of `mask` active, counted as
    /// a hit when there is one.
    pub fn get_variant(&mut self, key: K, mask: Vec<bool>) -> Option<R> {
        let rule = self.variants.get(&(key, mask)).copied()?;
        self.stats.hits += 1;
        Some(rule)
    }

    /// Records the variant of `key` with the parameters of `mask` active.
    pub fn insert_variant(&mut self, key: K, mask: Vec<bool>, rule: R) {
        self.variants.insert((key, mask), rule);
    }

    /// Queues the body of a declared rule, counted as derived.
    pub fn queue(&mut self, job: J) {
        self.pending.push(job);
        self.stats.derived += 1;
    }

    /// The next body to build (the last queued first).
    pub fn next_job(&mut self) -> Option<J> {
        self.pending.pop()
    }

    /// The next body to build if `take` accepts it.
    pub fn next_job_if(&mut self, take: impl FnOnce(&J) -> bool) -> Option<J> {
        if take(self.pending.last()?) {
            self.pending.pop()
        } else {
            None
        }
    }

    /// Counts a rule built around a registered rule.
    pub fn count_wrapped(&mut self) {
        self.stats.wrapped += 1;
    }

    /// Counts a request answered by the mode from its own tables.
    pub fn count_hit(&mut self) {
        self.stats.hits += 1;
    }

    /// How the cache has been used so far.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }
}
