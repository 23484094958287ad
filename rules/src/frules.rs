//! The built-in frule of every primitive.

use crate::Registry;

/// Registers the built-in rules.
pub(crate) fn install(_reg: &mut Registry) {}
