//! Number formatting shared by the printer and value display: f64 in the
//! shortest form that reads back to the same bits, always with a `.` or an
//! exponent (`1.0`, `1e16`, `-0.0`, `nan`, `inf`, `-inf`). The function lives
//! in `irad-kernels` (`irad_kernels::float`), where the runtime's error texts
//! use it too; this module keeps its place in the text format's API.

pub use irad_kernels::float::format_f64;
