//! The text format (being written).

pub mod num;
