//! irad: the facade crate (being written).

pub use irad_ir as ir;
