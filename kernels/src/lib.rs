//! irad-kernels: what the reference interpreter (`irad-ir`) and the run-time
//! support of compiled code (`irad-runtime`) share, so that the two backends
//! agree by construction rather than by keeping two copies in step:
//!
//! - [`bulk`]: the bulk array primitives' shape checks and kernels;
//! - [`sparse`]: the tangent builder (node arena) of sparse forward mode;
//! - [`trap`]: the run-time errors: kinds with their C ABI codes, operands
//!   and message texts;
//! - [`float`]: floats printed as IR text words them;
//! - [`math`]: the math functions irad implements itself (`exp`, `log`,
//!   `tanh`, `sin`, `cos`, `tan`, `pow`);
//! - [`zmul`]: the strong product of the strong derivative
//!   (docs/rules.md, "Infinities and NaN").
//!
//! The bottom of irad's crate graph: it depends on no other irad crate (only
//! on `std` and `matrixmultiply`, the matrix kernel), so both `irad-ir` and `irad-runtime` can depend on
//! it without either depending on the other. Nothing here panics on the
//! values compiled code or a program passes in; failures are `Result`s.

#![warn(missing_docs)]

pub mod bulk;
pub mod float;
pub mod math;
pub mod sparse;
pub mod trap;

/// The largest array (in elements) that `alloc`, `zeros` and `copy` make,
/// in the interpreter and in compiled code; larger requests are run-time
/// errors ([`trap::TrapKind::TooLong`]) rather than allocation failures.
/// 2^28 elements is 2 GiB of f64: one array cannot outgrow the memory of the
/// machines irad runs on.
pub const MAX_ARRAY_LEN: u64 = 1 << 28;

/// `zmul(a, b)`: `a * b`, except that an exact zero operand makes it `0.0`
/// whatever the other operand is (`0 * inf` and `0 * NaN` are `0.0`, not
/// NaN). The product of the chain rule in the strong derivative that the
/// facade falls back to when a derivative comes out NaN (docs/rules.md,
/// "Infinities and NaN"); the sparse tangent builder's products too. Equal
/// to IEEE `a * b`, bit for bit, wherever that is not NaN.
#[inline]
pub fn zmul(a: f64, b: f64) -> f64 {
    let r = a * b;
    if r.is_nan() && (a == 0.0 || b == 0.0) {
        0.0
    } else {
        r
    }
}

#[cfg(test)]
mod tests {
    use super::zmul;

    #[test]
    fn zmul_is_mul_but_for_a_zero_times_infinity_or_nan() {
        let specials = [
            0.0,
            -0.0,
            1.5,
            -2.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            1e308,
        ];
        for &a in &specials {
            for &b in &specials {
                let (z, m) = (zmul(a, b), a * b);
                if a == 0.0 || b == 0.0 {
                    // Zero, and IEEE's signed zero wherever IEEE gives one.
                    assert_eq!(z, 0.0, "zmul({a}, {b})");
                    if !m.is_nan() {
                        assert_eq!(z.to_bits(), m.to_bits(), "zmul({a}, {b})");
                    }
                } else {
                    assert!(z.to_bits() == m.to_bits() || (z.is_nan() && m.is_nan()));
                }
            }
        }
    }
}
