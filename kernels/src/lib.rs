//! irad-kernels: what the reference interpreter (`irad-ir`) and the run-time
//! support of compiled code (`irad-runtime`) share, so that the two backends
//! agree by construction rather than by keeping two copies in step:
//!
//! - [`bulk`]: the bulk array primitives' shape checks and kernels;
//! - [`sparse`]: the tangent builder (node arena) of sparse forward mode;
//! - [`float`]: floats printed as IR text words them.
//!
//! The bottom of irad's crate graph: it depends on no other irad crate (and
//! on nothing but `std`), so both `irad-ir` and `irad-runtime` can depend on
//! it without either depending on the other. Nothing here panics on the
//! values compiled code or a program passes in; failures are `Result`s.

#![warn(missing_docs)]

pub mod bulk;
pub mod float;
pub mod sparse;
