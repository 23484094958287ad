//! Entity handles and the dense tables they index.
//!
//! An entity (`Value`, `Block`, `Inst`, `FuncId`) is a `u32` newtype made by the
//! [`entity!`](crate::entity!) macro. A [`PrimaryMap`] owns the data of one kind of entity and
//! hands out its handles in order; a [`SecondaryMap`] attaches side data to
//! handles made elsewhere and answers a default for handles it has not seen; an
//! [`EntitySet`] is a set of handles, one bit each.
//! Handles are only meaningful for the table that made them; the tables check
//! nothing beyond bounds, which `get` reports as `None`.

use std::fmt;
use std::marker::PhantomData;

/// A handle that indexes a dense table.
pub trait EntityRef: Copy + Eq {
    /// The handle for table position `index`.
    fn new(index: usize) -> Self;
    /// The table position of this handle.
    fn index(self) -> usize;
}

/// Declares a `u32` newtype entity handle with `Debug` printing `prefix` and the index.
#[macro_export]
macro_rules! entity {
    ($(#[$attr:meta])* $name:ident, $prefix:expr) => {
        $(#[$attr])*
        #[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(u32);

        impl $crate::entity::EntityRef for $name {
            fn new(index: usize) -> Self {
                // Tables never grow past u32::MAX entries: the parser and builder
                // report an error long before (see `PrimaryMap::push`).
                $name(u32::try_from(index).unwrap_or(u32::MAX))
            }
            fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl $name {
            /// The handle's raw index.
            pub fn as_u32(self) -> u32 {
                self.0
            }
            /// The handle with raw index `index`.
            pub fn from_u32(index: u32) -> Self {
                $name(index)
            }
        }

        impl ::std::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                write!(f, "{}{}", $prefix, self.0)
            }
        }
    };
}

/// A table that owns the data of one kind of entity.
#[derive(Clone, PartialEq)]
pub struct PrimaryMap<K: EntityRef, V> {
    elems: Vec<V>,
    unused: PhantomData<K>,
}

impl<K: EntityRef, V> PrimaryMap<K, V> {
    /// An empty table.
    pub fn new() -> Self {
        PrimaryMap {
            elems: Vec::new(),
            unused: PhantomData,
        }
    }

    /// Appends `v` and returns its handle.
    pub fn push(&mut self, v: V) -> K {
        let k = K::new(self.elems.len());
        self.elems.push(v);
        k
    }

    /// The number of entities in the table.
    pub fn len(&self) -> usize {
        self.elems.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.elems.is_empty()
    }

    /// The data of `k`, or `None` when `k` is not a handle of this table.
    pub fn get(&self, k: K) -> Option<&V> {
        self.elems.get(k.index())
    }

    /// The data of `k` for writing, or `None` when `k` is not a handle of this table.
    pub fn get_mut(&mut self, k: K) -> Option<&mut V> {
        self.elems.get_mut(k.index())
    }

    /// Whether `k` is a handle of this table.
    pub fn is_valid(&self, k: K) -> bool {
        k.index() < self.elems.len()
    }

    /// All handles in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = K> + ExactSizeIterator + use<K, V> {
        (0..self.elems.len()).map(K::new)
    }

    /// All (handle, data) pairs in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (K, &V)> {
        self.elems.iter().enumerate().map(|(i, v)| (K::new(i), v))
    }

    /// All data in order.
    pub fn values(&self) -> std::slice::Iter<'_, V> {
        self.elems.iter()
    }

    /// All data in order, for writing.
    pub fn values_mut(&mut self) -> std::slice::IterMut<'_, V> {
        self.elems.iter_mut()
    }
}

impl<K: EntityRef, V> Default for PrimaryMap<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: EntityRef, V> std::ops::Index<K> for PrimaryMap<K, V> {
    type Output = V;
    /// Indexing is for handles this table made; user input goes through `get`.
    fn index(&self, k: K) -> &V {
        &self.elems[k.index()]
    }
}

impl<K: EntityRef, V> std::ops::IndexMut<K> for PrimaryMap<K, V> {
    fn index_mut(&mut self, k: K) -> &mut V {
        &mut self.elems[k.index()]
    }
}

impl<K: EntityRef + fmt::Debug, V: fmt::Debug> fmt::Debug for PrimaryMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Side data for entities of another table; unseen handles read as the default.
#[derive(Clone)]
pub struct SecondaryMap<K: EntityRef, V: Clone> {
    elems: Vec<V>,
    default: V,
    unused: PhantomData<K>,
}

impl<K: EntityRef, V: Clone + Default> SecondaryMap<K, V> {
    /// An empty map whose default is `V::default()`.
    pub fn new() -> Self {
        Self::with_default(V::default())
    }
}

impl<K: EntityRef, V: Clone> SecondaryMap<K, V> {
    /// An empty map that reads `default` for every handle.
    pub fn with_default(default: V) -> Self {
        SecondaryMap {
            elems: Vec::new(),
            default,
            unused: PhantomData,
        }
    }

    /// The data of `k` (the default when never set).
    pub fn get(&self, k: K) -> &V {
        self.elems.get(k.index()).unwrap_or(&self.default)
    }

    /// Sets the data of `k`, growing the map as needed.
    pub fn set(&mut self, k: K, v: V) {
        let i = k.index();
        if i == self.elems.len() {
            // Filling in order (the common case): no default to clone.
            self.elems.push(v);
            return;
        }
        if i > self.elems.len() {
            self.elems.resize(i + 1, self.default.clone());
        }
        self.elems[i] = v;
    }

    /// The data of `k` for writing, growing the map as needed.
    pub fn get_mut(&mut self, k: K) -> &mut V {
        let i = k.index();
        if i >= self.elems.len() {
            self.elems.resize(i + 1, self.default.clone());
        }
        &mut self.elems[i]
    }
}

impl<K: EntityRef, V: Clone + Default> Default for SecondaryMap<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: EntityRef, V: Clone> std::ops::Index<K> for SecondaryMap<K, V> {
    type Output = V;
    fn index(&self, k: K) -> &V {
        self.get(k)
    }
}

impl<K: EntityRef + fmt::Debug, V: Clone + fmt::Debug> fmt::Debug for SecondaryMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.elems.iter().enumerate().map(|(i, v)| (K::new(i), v)))
            .finish()
    }
}

/// A set of entities of one kind, as a bit per handle: dense, ordered by
/// handle, unseen handles absent.
#[derive(Clone, PartialEq, Eq)]
pub struct EntitySet<K: EntityRef> {
    words: Vec<u64>,
    len: usize,
    unused: PhantomData<K>,
}

impl<K: EntityRef> EntitySet<K> {
    /// An empty set.
    pub fn new() -> Self {
        EntitySet {
            words: Vec::new(),
            len: 0,
            unused: PhantomData,
        }
    }

    /// Whether `k` is in the set.
    pub fn contains(&self, k: K) -> bool {
        let i = k.index();
        self.words
            .get(i / 64)
            .is_some_and(|w| w & (1u64 << (i % 64)) != 0)
    }

    /// Adds `k`; returns whether it was absent.
    pub fn insert(&mut self, k: K) -> bool {
        let i = k.index();
        if i / 64 >= self.words.len() {
            self.words.resize(i / 64 + 1, 0);
        }
        let bit = 1u64 << (i % 64);
        let fresh = self.words[i / 64] & bit == 0;
        self.words[i / 64] |= bit;
        self.len += usize::from(fresh);
        fresh
    }

    /// Removes `k`; returns whether it was present.
    pub fn remove(&mut self, k: K) -> bool {
        let i = k.index();
        let Some(w) = self.words.get_mut(i / 64) else {
            return false;
        };
        let bit = 1u64 << (i % 64);
        let present = *w & bit != 0;
        *w &= !bit;
        self.len -= usize::from(present);
        present
    }

    /// The number of entities in the set.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Empties the set.
    pub fn clear(&mut self) {
        self.words.clear();
        self.len = 0;
    }

    /// The members in increasing handle order.
    pub fn iter(&self) -> impl Iterator<Item = K> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut rest = w;
            std::iter::from_fn(move || {
                if rest == 0 {
                    return None;
                }
                let b = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                Some(K::new(wi * 64 + b))
            })
        })
    }
}

impl<K: EntityRef> Default for EntitySet<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: EntityRef> FromIterator<K> for EntitySet<K> {
    fn from_iter<I: IntoIterator<Item = K>>(iter: I) -> Self {
        let mut set = EntitySet::new();
        for k in iter {
            set.insert(k);
        }
        set
    }
}

impl<K: EntityRef> Extend<K> for EntitySet<K> {
    fn extend<I: IntoIterator<Item = K>>(&mut self, iter: I) {
        for k in iter {
            self.insert(k);
        }
    }
}

impl<K: EntityRef + fmt::Debug> fmt::Debug for EntitySet<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::func::Value;

    #[test]
    fn secondary_map_set_in_order_out_of_order_and_over() {
        let mut m: SecondaryMap<Value, u32> = SecondaryMap::with_default(7);
        // In order: each set appends.
        m.set(Value::new(0), 10);
        m.set(Value::new(1), 11);
        // Past the end: the gap reads as the default.
        m.set(Value::new(4), 14);
        // Over an existing entry and over a gap's default.
        m.set(Value::new(1), 21);
        m.set(Value::new(2), 12);
        let got: Vec<u32> = (0..6).map(|i| *m.get(Value::new(i))).collect();
        assert_eq!(got, [10, 21, 12, 7, 14, 7]);
        *m.get_mut(Value::new(5)) += 1;
        assert_eq!(m[Value::new(5)], 8);
        assert_eq!(m[Value::new(6)], 7);
    }
}
