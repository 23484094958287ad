//! The irad command line (being written).

fn main() {}
