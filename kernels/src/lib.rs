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
//!   `tanh`, `sin`, `cos`, `tan`, `pow`).
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
