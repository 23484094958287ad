//! The verifier (being written).
