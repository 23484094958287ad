//! irad-ir: the SSA IR every other irad crate works on.
//!
//! - [`entity`](mod@entity): u32 handles and the dense tables they index;
//! - [`types`], [`prim`]: the type language and the primitive table;
//! - [`func`]: modules, functions, blocks, statements; [`builder`]: how IR is made;
//! - [`text`]: the text format of SYNTAX.md §1 (lexer, parser, printer);
//! - [`flow`]: control flow keyed by `Block` (CFG, dominator tree, loops),
//!   for the verifier, every pass and codegen;
//! - [`verify`]: the verifier; [`interp`]: the reference interpreter;
//! - [`bulk`], [`sparse`]: the bulk array kernels and the tangent builder of
//!   sparse forward mode, from `irad-kernels`, which the runtime uses too, so
//!   both backends compute and materialise alike;
//! - [`suggest`]: "did you mean" suggestions for misspelled names;
//! - [`eq`]: structural equality of modules (names and positions ignored);
//! - [`surface`]: the `.irad` front end (parser, type checker, SSA lowering);
//! - [`timings`]: the stage timings of `irad grad --timings`.
//!
//! Everything that takes user input returns a `Result` whose error carries a
//! [`loc::Location`]; nothing here panics on input.

#![warn(missing_docs)]

pub mod builder;
mod cursor;
pub mod entity;
pub mod eq;
pub mod flow;
pub mod func;
pub mod interp;
pub mod loc;
pub mod prim;
pub mod suggest;
pub mod surface;
pub mod text;
pub mod timings;
pub mod types;
pub mod verify;

pub use builder::FuncBuilder;
pub use func::{
    Block, BlockData, BuildError, Const, DeclaredRules, Func, FuncId, FuncRef, Inst, InstData,
    InstKind, Module, Operand, Terminator, Value, ValueData, ValueDef, ValueName,
};
/// The bulk array primitives' checks and kernels, shared with the runtime.
pub use irad_kernels::bulk;
/// The tangent builder of sparse forward mode, shared with the runtime.
pub use irad_kernels::sparse;
pub use loc::{Location, Pos};
pub use prim::Prim;
pub use types::{FnType, Lanes, Scalar, Type};

/// The deepest nesting of types, tuples and literals that text may have; deeper
/// input is a located error, never a stack overflow.
pub const MAX_NESTING: usize = 256;

/// The most components (nodes of the type tree) that a `tuple` statement's type
/// may have. Inferred types are copied into every value, so without a bound
/// `%t1 = call tuple(%t0, %t0)` repeated 40 times would ask for 2^41 of them.
/// Only inferred types are bounded: a `tuple` statement annotated with its
/// type (`:: T`, written out in full, so no larger than its text) is not.
pub const MAX_TYPE_SIZE: usize = 1 << 12;

/// The bound on the type of a `tuple` statement made by [`FuncBuilder`]:
/// the transforms build tuples of the user's declared types (reverse mode's
/// gradient of every parameter at once), which may exceed
/// [`MAX_TYPE_SIZE`] without any doubling (two parameters of 2 100 f64s).
pub const MAX_BUILT_TYPE_SIZE: usize = 1 << 16;

/// The most tangents a `dual<T, N>` carries (forward mode's batch width).
pub const MAX_WIDTH: u32 = 256;

/// An error that can be shown to a user: a message and where it is.
pub trait Diagnostic {
    /// Where the error is.
    fn location(&self) -> &Location;
    /// The message, lowercase, without final full stop, without the location.
    fn message(&self) -> &str;
}
