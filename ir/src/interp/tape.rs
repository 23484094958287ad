//! The tapes of `push` and `pop`: one last-in-first-out stack of values per
//! exact type, owned by an interpreter and shared by every call it runs (reverse
//! mode pushes in one function and pops in another).
//!
//! A tape is numbered the first time a function that uses it is compiled, so
//! executing `push`/`pop` indexes a vector instead of hashing a type. Assumes
//! nothing about the values pushed (the verifier makes them the tape's type).
//! Guarantees: `pop` returns the last value pushed on the same tape, or the
//! error `pop from an empty tape of T`; the byte counters follow the sizes of
//! [`byte_size`], in constant time per operation.

use super::internal_message;
use super::value::Val;
use crate::types::Type;
use irad_kernels::trap::Trap;
use std::collections::HashMap;

/// Every tape of an interpreter, and the counters of what went through them.
#[derive(Default)]
pub(super) struct Tapes {
    /// The number of each type's tape.
    index: HashMap<Type, u32>,
    /// Each tape's type, values (last pushed last) and value size in bytes.
    tapes: Vec<Tape>,
    /// Values pushed, ever.
    pub pushes: u64,
    /// Bytes pushed, ever.
    pub pushed_bytes: u64,
    /// Bytes on all tapes now.
    pub bytes: u64,
    /// The most bytes on all tapes at any time.
    pub peak_bytes: u64,
    /// Bytes of the elements of the arrays on array tapes now.
    pub element_bytes: u64,
    /// The most bytes the tapes held at any time, the elements of the
    /// arrays on array tapes counted (an array on a tape twice twice).
    pub peak_held_bytes: u64,
}

struct Tape {
    ty: Type,
    bytes: u64,
    /// Whether it holds arrays, whose elements [`Tapes::element_bytes`]
    /// counts.
    arrays: bool,
    vals: Vec<Val>,
}

/// The bytes of the elements of `val` when it is an array (8 per element, 1
/// for `bool`), else 0.
fn element_bytes(val: &Val) -> u64 {
    match val {
        Val::Array(a) => {
            let data = a.0.borrow();
            let each = if matches!(&*data, super::value::ArrayData::Bool(_)) {
                1
            } else {
                8
            };
            (data.len() as u64).saturating_mul(each)
        }
        _ => 0,
    }
}

impl Tapes {
    /// The number of the tape of type `ty`, made on first request.
    pub fn id(&mut self, ty: &Type) -> u32 {
        if let Some(&id) = self.index.get(ty) {
            return id;
        }
        let id = u32::try_from(self.tapes.len()).unwrap_or(u32::MAX);
        self.tapes.push(Tape {
            ty: ty.clone(),
            bytes: byte_size(ty),
            arrays: matches!(ty, Type::Array(_)),
            vals: Vec::new(),
        });
        self.index.insert(ty.clone(), id);
        id
    }

    /// Pushes `val` on tape `id`.
    #[inline]
    pub fn push(&mut self, id: u32, val: Val) -> Result<(), String> {
        let tape = self
            .tapes
            .get_mut(id as usize)
            .ok_or_else(|| internal_message("invalid tape number"))?;
        // Grow by doubling as `push` would, but report a failed allocation
        // as the run-time error compiled code reports, not an abort.
        if tape.vals.len() == tape.vals.capacity() {
            let more = tape.vals.len().max(4);
            tape.vals
                .try_reserve(more)
                .map_err(|_| Trap::OomTape.to_string())?;
        }
        if tape.arrays {
            self.element_bytes = self.element_bytes.saturating_add(element_bytes(&val));
        }
        tape.vals.push(val);
        self.pushes += 1;
        self.pushed_bytes = self.pushed_bytes.saturating_add(tape.bytes);
        self.bytes = self.bytes.saturating_add(tape.bytes);
        self.peak_bytes = self.peak_bytes.max(self.bytes);
        self.peak_held_bytes = self
            .peak_held_bytes
            .max(self.bytes.saturating_add(self.element_bytes));
        Ok(())
    }

    /// Pops the last value of tape `id`.
    #[inline]
    pub fn pop(&mut self, id: u32) -> Result<Val, String> {
        let tape = self
            .tapes
            .get_mut(id as usize)
            .ok_or_else(|| internal_message("invalid tape number"))?;
        let val = tape
            .vals
            .pop()
            .ok_or_else(|| Trap::EmptyTape(&tape.ty.to_string()).to_string())?;
        self.bytes = self.bytes.saturating_sub(tape.bytes);
        if tape.arrays {
            self.element_bytes = self.element_bytes.saturating_sub(element_bytes(&val));
        }
        Ok(val)
    }
}

/// The size in bytes of a value of type `ty` on a tape: 8 for `f64`, `i64`,
/// an array reference and a function value, 1 for `bool`, 0 for `()`, and for
/// a tuple or a dual the sum of its parts (a dual's are its primal and its
/// tangents). Iterative, so no type is too deep for it.
pub fn byte_size(ty: &Type) -> u64 {
    let mut total = 0u64;
    // (type, how many values of it)
    let mut work: Vec<(Type, u64)> = vec![(ty.clone(), 1)];
    while let Some((ty, times)) = work.pop() {
        let each = match &ty {
            Type::F64 | Type::I64 | Type::Array(_) | Type::Func(_) | Type::Sparse => 8,
            Type::Bool => 1,
            Type::Unit => 0,
            Type::Tuple(elems) => {
                work.extend(elems.iter().map(|e| (e.clone(), times)));
                0
            }
            Type::Dual(inner, lanes) => {
                if let Some(tan) = inner.tangent_at(*lanes) {
                    let lanes = lanes.count() as u64;
                    work.push((tan, times.saturating_mul(lanes)));
                }
                work.push(((**inner).clone(), times));
                0
            }
        };
        total = total.saturating_add(each * times);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Lanes, Scalar};

    #[test]
    fn byte_sizes_add_up_the_parts() {
        let pair = Type::tuple(vec![Type::F64, Type::I64]);
        let cases = [
            (Type::F64, 8),
            (Type::I64, 8),
            (Type::Bool, 1),
            (Type::Unit, 0),
            (Type::Array(Scalar::F64), 8),
            (Type::func(vec![Type::F64], Type::F64), 8),
            (Type::tuple(vec![Type::Bool, pair.clone(), Type::Unit]), 17),
            (Type::dual(Type::F64), 16),
            // (f64, i64) and two tangents of (f64, ()).
            (Type::dual_n(pair, Lanes::dense(2).unwrap()), 32),
            (
                Type::dual_n(Type::Array(Scalar::F64), Lanes::dense(3).unwrap()),
                32,
            ),
        ];
        for (ty, n) in cases {
            assert_eq!(byte_size(&ty), n, "{ty}");
        }
    }

    #[test]
    fn tapes_are_per_type_and_count_bytes() {
        let mut tapes = Tapes::default();
        let f = tapes.id(&Type::F64);
        let b = tapes.id(&Type::Bool);
        assert_eq!(tapes.id(&Type::F64), f);
        assert_ne!(f, b);
        tapes.push(f, Val::F64(1.0)).unwrap();
        tapes.push(b, Val::Bool(true)).unwrap();
        tapes.push(f, Val::F64(2.0)).unwrap();
        assert_eq!((tapes.pushes, tapes.pushed_bytes, tapes.bytes), (3, 17, 17));
        assert!(tapes.pop(f).unwrap().same(&Val::F64(2.0)));
        assert!(tapes.pop(b).unwrap().same(&Val::Bool(true)));
        assert_eq!(
            tapes.pop(b).map(|_| ()),
            Err("pop from an empty tape of bool".to_string())
        );
        assert_eq!((tapes.bytes, tapes.peak_bytes), (8, 17));
        // No array pushed: the bytes held are the tapes' own.
        assert_eq!((tapes.element_bytes, tapes.peak_held_bytes), (0, 17));
        assert!(tapes.pop(7).is_err());
        assert!(tapes.push(7, Val::Unit).is_err());
    }

    #[test]
    fn the_bytes_held_count_the_elements_of_arrays_pushed() {
        use super::super::value::{ArrayData, ArrayRef};
        let mut tapes = Tapes::default();
        let fa = tapes.id(&Type::Array(Scalar::F64));
        let ba = tapes.id(&Type::Array(Scalar::Bool));
        let f = tapes.id(&Type::F64);
        let xs = Val::Array(ArrayRef::new(ArrayData::F64(vec![1.0, 2.0, 3.0])));
        let bs = Val::Array(ArrayRef::new(ArrayData::Bool(vec![true; 5])));
        tapes.push(fa, xs.clone()).unwrap();
        tapes.push(ba, bs).unwrap();
        tapes.push(f, Val::F64(1.0)).unwrap();
        // Three 8-byte tape entries, 24 bytes of f64s and 5 of bools.
        assert_eq!((tapes.bytes, tapes.element_bytes), (24, 29));
        assert_eq!(tapes.peak_held_bytes, 53);
        tapes.pop(ba).unwrap();
        assert_eq!((tapes.bytes, tapes.element_bytes), (16, 24));
        // The same array again: its elements counted twice.
        tapes.push(fa, xs).unwrap();
        assert_eq!((tapes.element_bytes, tapes.peak_held_bytes), (48, 72));
        tapes.pop(fa).unwrap();
        tapes.pop(fa).unwrap();
        tapes.pop(f).unwrap();
        assert_eq!((tapes.bytes, tapes.element_bytes), (0, 0));
        assert_eq!(tapes.peak_held_bytes, 72);
    }
}
