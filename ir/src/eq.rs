//! Structural equality of modules (being written).
