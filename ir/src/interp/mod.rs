//! The reference interpreter (being written).

pub mod value;
