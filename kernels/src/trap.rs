//! The run-time errors (traps) of irad programs: their kinds with the stable
//! numeric codes of the C ABI, their operands and their message texts, one
//! list for the interpreter, the runtime and the code generator.
//!
//! [`TrapKind`] is what compiled code stores in its context (`Ctx::err_kind`,
//! as [`TrapKind::code`]) and what an exported C function returns; the codes
//! are part of the C ABI (the `IRAD_ERR_*` defines of the headers `irad emit`
//! writes) and never change: a new kind takes the next free code. Code
//! [`NO_TRAP`] (0) means no error.
//!
//! [`Trap`] is a kind with its operands; its `Display` is the message, the
//! one text every backend prints (lowercase, no location, no final full
//! stop). The interpreter builds a [`Trap`] where a statement fails; the
//! runtime and the JIT rebuild it from the kind and the two operands compiled
//! code left in its context ([`Trap::decode`]). [`Trap::operands`] and
//! [`Trap::decode`] are inverse for every kind that carries operands.

use crate::MAX_ARRAY_LEN;
use crate::float::format_f64;
use std::fmt;

/// The code of "no error": the context's error kind while all is well, and
/// the status of an exported function that succeeded (`IRAD_OK`).
pub const NO_TRAP: i64 = 0;

/// The kind of a run-time error, with its stable code (the discriminant).
#[repr(i64)]
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum TrapKind {
    /// `idiv` by zero.
    DivZero = 1,
    /// `irem` by zero.
    RemZero = 2,
    /// `idiv(i64::MIN, -1)`.
    IdivOverflow = 3,
    /// `fptosi` of NaN or of a value outside the i64 range; operand `a` holds
    /// the f64's bits.
    Fptosi = 4,
    /// A negative array length `a`.
    NegLen = 5,
    /// An array length `a` above [`MAX_ARRAY_LEN`].
    TooLong = 6,
    /// Out of memory allocating an array of `a` elements.
    OomAlloc = 7,
    /// Out of memory copying an array of `a` elements.
    OomCopy = 8,
    /// Index `a` out of bounds for an array of length `b`.
    Index = 9,
    /// Switch index `a` out of range for `b` targets.
    Switch = 10,
    /// Pop from an empty tape (the site says which type).
    EmptyTape = 11,
    /// The call-depth limit `a` was reached at a call.
    Depth = 12,
    /// The native stack ran out at call depth `a`.
    Stack = 13,
    /// An error whose text the runtime holds (rule derivation, internal
    /// errors).
    Message = 14,
    /// Out of memory growing a tape.
    OomTape = 15,
    /// A rule of a function value that an object file does not hold (objects
    /// are closed: their rules are built ahead of time); `a` is the handle,
    /// `b` the [`RuleKind`] code.
    NoRule = 16,
    /// An array argument of an exported function has a negative length: `a`
    /// is the argument's position (from 0), `b` the length.
    BadLength = 17,
    /// An invalid sparse tangent handle `a` (`sscale`, `sadd`, `sdense`).
    SparseHandle = 18,
    /// A negative one-hot direction `a` (`sonehot`).
    SparseDirection = 19,
    /// A one-hot direction `a` at or beyond the length `b` materialised
    /// (`sdense`).
    SparseRange = 20,
    /// The sparse tangent builder is full
    /// ([`crate::sparse::MAX_SPARSE_NODES`] nodes).
    SparseFull = 21,
    /// A bulk array primitive's operands failed [`crate::bulk::check`] (a
    /// length that does not fit, a negative dimension, an output that is an
    /// input); the runtime holds the text.
    Bulk = 22,
    /// Out of memory growing the sparse tangent builder.
    OomSparse = 23,
}

/// The kinds of rule that compiled code asks for at run time (the `kind`
/// argument of the rule function `irad_rule`, and operand `b` of a
/// [`TrapKind::NoRule`]), with their stable codes.
#[repr(i64)]
#[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
pub enum RuleKind {
    /// `frule(f, N)`: the forward rule.
    Frule = 0,
    /// `revfwd(f)`: the reverse rule's forward sweep.
    Revfwd = 1,
    /// `revback(f)`: the reverse rule's pullback.
    Revback = 2,
}

/// Which backend ran the code that trapped, where the advice of a message
/// depends on it.
#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Host {
    /// The JIT, in the process that compiled the code.
    Jit,
    /// An object file written by `irad emit`, called from C.
    Object,
}

/// A run-time error: its kind and what its message says.
#[derive(Copy, Clone, PartialEq, Debug)]
pub enum Trap<'a> {
    /// [`TrapKind::DivZero`].
    DivZero,
    /// [`TrapKind::RemZero`].
    RemZero,
    /// [`TrapKind::IdivOverflow`].
    IdivOverflow,
    /// [`TrapKind::Fptosi`]: the value converted.
    Fptosi(f64),
    /// [`TrapKind::NegLen`]: the length asked for.
    NegLen(i64),
    /// [`TrapKind::TooLong`]: the length asked for.
    TooLong(i64),
    /// [`TrapKind::OomAlloc`]: the number of elements.
    OomAlloc(i64),
    /// [`TrapKind::OomCopy`]: the number of elements.
    OomCopy(i64),
    /// [`TrapKind::Index`].
    Index {
        /// The index.
        index: i64,
        /// The array's length.
        len: i64,
    },
    /// [`TrapKind::Switch`].
    Switch {
        /// The index.
        index: i64,
        /// The number of targets.
        targets: i64,
    },
    /// [`TrapKind::EmptyTape`]: the tape's type, as IR text.
    EmptyTape(&'a str),
    /// [`TrapKind::Depth`]: the call-depth limit.
    Depth(i64),
    /// [`TrapKind::Stack`].
    Stack {
        /// The call depth reached.
        depth: i64,
        /// The call-depth limit.
        max_depth: i64,
        /// Where the code ran (the advice differs).
        host: Host,
    },
    /// [`TrapKind::Message`] without its text.
    Message,
    /// [`TrapKind::OomTape`].
    OomTape,
    /// [`TrapKind::NoRule`].
    NoRule {
        /// The function value's handle.
        handle: i64,
        /// The rule asked for.
        rule: RuleKind,
    },
    /// [`TrapKind::BadLength`].
    BadLength {
        /// The argument's position, from 0.
        arg: i64,
        /// Its length.
        len: i64,
    },
    /// [`TrapKind::SparseHandle`]: the handle.
    SparseHandle(i64),
    /// [`TrapKind::SparseDirection`]: the direction.
    SparseDirection(i64),
    /// [`TrapKind::SparseRange`].
    SparseRange {
        /// The one-hot direction.
        direction: i64,
        /// The length materialised.
        len: i64,
    },
    /// [`TrapKind::SparseFull`].
    SparseFull,
    /// [`TrapKind::Bulk`] without its text.
    Bulk,
    /// [`TrapKind::OomSparse`].
    OomSparse,
}

impl TrapKind {
    /// Every kind, in code order.
    pub const ALL: [TrapKind; 23] = [
        TrapKind::DivZero,
        TrapKind::RemZero,
        TrapKind::IdivOverflow,
        TrapKind::Fptosi,
        TrapKind::NegLen,
        TrapKind::TooLong,
        TrapKind::OomAlloc,
        TrapKind::OomCopy,
        TrapKind::Index,
        TrapKind::Switch,
        TrapKind::EmptyTape,
        TrapKind::Depth,
        TrapKind::Stack,
        TrapKind::Message,
        TrapKind::OomTape,
        TrapKind::NoRule,
        TrapKind::BadLength,
        TrapKind::SparseHandle,
        TrapKind::SparseDirection,
        TrapKind::SparseRange,
        TrapKind::SparseFull,
        TrapKind::Bulk,
        TrapKind::OomSparse,
    ];

    /// The stable code: what compiled code stores and C callers receive.
    pub const fn code(self) -> i64 {
        self as i64
    }

    /// The kind of a code; `None` for [`NO_TRAP`] and unknown codes.
    pub fn from_code(code: i64) -> Option<TrapKind> {
        TrapKind::ALL.into_iter().find(|k| k.code() == code)
    }
}

impl RuleKind {
    /// The stable code compiled code passes.
    pub const fn code(self) -> i64 {
        self as i64
    }

    /// The kind of a code; `None` for unknown codes.
    pub fn from_code(code: i64) -> Option<RuleKind> {
        [RuleKind::Frule, RuleKind::Revfwd, RuleKind::Revback]
            .into_iter()
            .find(|k| k.code() == code)
    }

    /// How messages name the rule.
    pub fn describe(self) -> &'static str {
        match self {
            RuleKind::Frule => "forward",
            RuleKind::Revfwd => "reverse (forward sweep)",
            RuleKind::Revback => "reverse (pullback)",
        }
    }
}

impl<'a> Trap<'a> {
    /// The trap compiled code describes by `kind` and operands `a` and `b`;
    /// `max_depth` is the context's call-depth limit, `tape` the type of the
    /// failing `pop`'s tape when known, `host` where the code ran. A
    /// [`TrapKind::NoRule`] with an unknown rule code counts as a pullback.
    pub fn decode(
        kind: TrapKind,
        a: i64,
        b: i64,
        max_depth: i64,
        tape: Option<&'a str>,
        host: Host,
    ) -> Trap<'a> {
        match kind {
            TrapKind::DivZero => Trap::DivZero,
            TrapKind::RemZero => Trap::RemZero,
            TrapKind::IdivOverflow => Trap::IdivOverflow,
            TrapKind::Fptosi => Trap::Fptosi(f64::from_bits(a as u64)),
            TrapKind::NegLen => Trap::NegLen(a),
            TrapKind::TooLong => Trap::TooLong(a),
            TrapKind::OomAlloc => Trap::OomAlloc(a),
            TrapKind::OomCopy => Trap::OomCopy(a),
            TrapKind::Index => Trap::Index { index: a, len: b },
            TrapKind::Switch => Trap::Switch {
                index: a,
                targets: b,
            },
            TrapKind::EmptyTape => Trap::EmptyTape(tape.unwrap_or("?")),
            TrapKind::Depth => Trap::Depth(a),
            TrapKind::Stack => Trap::Stack {
                depth: a,
                max_depth,
                host,
            },
            TrapKind::Message => Trap::Message,
            TrapKind::OomTape => Trap::OomTape,
            TrapKind::NoRule => Trap::NoRule {
                handle: a,
                rule: RuleKind::from_code(b).unwrap_or(RuleKind::Revback),
            },
            TrapKind::BadLength => Trap::BadLength { arg: a, len: b },
            TrapKind::SparseHandle => Trap::SparseHandle(a),
            TrapKind::SparseDirection => Trap::SparseDirection(a),
            TrapKind::SparseRange => Trap::SparseRange {
                direction: a,
                len: b,
            },
            TrapKind::SparseFull => Trap::SparseFull,
            TrapKind::Bulk => Trap::Bulk,
            TrapKind::OomSparse => Trap::OomSparse,
        }
    }

    /// The kind.
    pub fn kind(&self) -> TrapKind {
        match self {
            Trap::DivZero => TrapKind::DivZero,
            Trap::RemZero => TrapKind::RemZero,
            Trap::IdivOverflow => TrapKind::IdivOverflow,
            Trap::Fptosi(_) => TrapKind::Fptosi,
            Trap::NegLen(_) => TrapKind::NegLen,
            Trap::TooLong(_) => TrapKind::TooLong,
            Trap::OomAlloc(_) => TrapKind::OomAlloc,
            Trap::OomCopy(_) => TrapKind::OomCopy,
            Trap::Index { .. } => TrapKind::Index,
            Trap::Switch { .. } => TrapKind::Switch,
            Trap::EmptyTape(_) => TrapKind::EmptyTape,
            Trap::Depth(_) => TrapKind::Depth,
            Trap::Stack { .. } => TrapKind::Stack,
            Trap::Message => TrapKind::Message,
            Trap::OomTape => TrapKind::OomTape,
            Trap::NoRule { .. } => TrapKind::NoRule,
            Trap::BadLength { .. } => TrapKind::BadLength,
            Trap::SparseHandle(_) => TrapKind::SparseHandle,
            Trap::SparseDirection(_) => TrapKind::SparseDirection,
            Trap::SparseRange { .. } => TrapKind::SparseRange,
            Trap::SparseFull => TrapKind::SparseFull,
            Trap::Bulk => TrapKind::Bulk,
            Trap::OomSparse => TrapKind::OomSparse,
        }
    }

    /// The operands `a` and `b` compiled code stores for this trap (0 where
    /// the kind has none; the tape's type and the call-depth limit of
    /// [`Trap::EmptyTape`] and [`Trap::Stack`] are not operands).
    pub fn operands(&self) -> (i64, i64) {
        match *self {
            Trap::Fptosi(x) => (x.to_bits() as i64, 0),
            Trap::NegLen(n)
            | Trap::TooLong(n)
            | Trap::OomAlloc(n)
            | Trap::OomCopy(n)
            | Trap::Depth(n)
            | Trap::SparseHandle(n)
            | Trap::SparseDirection(n) => (n, 0),
            Trap::Index { index, len } => (index, len),
            Trap::Switch { index, targets } => (index, targets),
            Trap::Stack { depth, .. } => (depth, 0),
            Trap::NoRule { handle, rule } => (handle, rule.code()),
            Trap::BadLength { arg, len } => (arg, len),
            Trap::SparseRange { direction, len } => (direction, len),
            Trap::DivZero
            | Trap::RemZero
            | Trap::IdivOverflow
            | Trap::EmptyTape(_)
            | Trap::Message
            | Trap::OomTape
            | Trap::SparseFull
            | Trap::Bulk
            | Trap::OomSparse => (0, 0),
        }
    }
}

impl fmt::Display for Trap<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Trap::DivZero => f.write_str("division by zero"),
            Trap::RemZero => f.write_str("remainder by zero"),
            Trap::IdivOverflow => f.write_str("integer overflow in idiv"),
            Trap::Fptosi(x) => write!(f, "fptosi of {} is out of the i64 range", format_f64(x)),
            Trap::NegLen(n) => write!(f, "negative array length {n}"),
            Trap::TooLong(n) => {
                write!(
                    f,
                    "array length {n} exceeds the limit of {MAX_ARRAY_LEN} elements"
                )
            }
            Trap::OomAlloc(n) => write!(f, "out of memory allocating an array of {n} elements"),
            Trap::OomCopy(n) => write!(f, "out of memory copying an array of {n} elements"),
            Trap::Index { index, len } => {
                write!(f, "index {index} out of bounds for array of length {len}")
            }
            Trap::Switch { index, targets } => {
                write!(
                    f,
                    "switch index {index} is out of range for {targets} targets"
                )
            }
            Trap::EmptyTape(ty) => write!(f, "pop from an empty tape of {ty}"),
            Trap::Depth(max) => write!(f, "call depth limit of {max} exceeded"),
            Trap::Stack {
                depth,
                max_depth,
                host,
            } => {
                let advice = match host {
                    Host::Jit => "raise the JIT's stack budget",
                    Host::Object => {
                        "raise the stack budget with irad_set_stack_budget on a thread with a larger stack"
                    }
                };
                write!(
                    f,
                    "native stack exhausted at call depth {depth} (the call-depth limit is {max_depth}; {advice})"
                )
            }
            Trap::Message => f.write_str("internal error: a failure without a message"),
            Trap::OomTape => f.write_str("out of memory growing a tape"),
            Trap::NoRule { handle, rule } => write!(
                f,
                "the object holds no {} rule for function value {handle} (objects are closed: rules are built ahead of time)",
                rule.describe()
            ),
            Trap::BadLength { arg, len } => {
                write!(f, "array argument {arg} has negative length {len}")
            }
            Trap::SparseHandle(h) => write!(f, "invalid sparse handle {h}"),
            Trap::SparseDirection(k) => write!(f, "negative sparse direction {k}"),
            Trap::SparseRange { direction, len } => write!(
                f,
                "sparse direction {direction} out of range for a dense tangent of length {len}"
            ),
            Trap::SparseFull => f.write_str("too many sparse tangent nodes"),
            Trap::OomSparse => f.write_str("out of memory growing the sparse tangent builder"),
            Trap::Bulk => f.write_str("internal error: a bulk primitive failed without a message"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable_and_round_trip() {
        for (i, kind) in TrapKind::ALL.into_iter().enumerate() {
            assert_eq!(kind.code(), i as i64 + 1);
            assert_eq!(TrapKind::from_code(kind.code()), Some(kind));
        }
        assert_eq!(TrapKind::from_code(NO_TRAP), None);
        assert_eq!(TrapKind::from_code(24), None);
        for rule in [RuleKind::Frule, RuleKind::Revfwd, RuleKind::Revback] {
            assert_eq!(RuleKind::from_code(rule.code()), Some(rule));
        }
        assert_eq!(RuleKind::Frule.code(), 0);
        assert_eq!(RuleKind::Revback.code(), 2);
    }

    #[test]
    fn decode_inverts_operands() {
        for kind in TrapKind::ALL {
            let (a, b) = match kind {
                TrapKind::NoRule => (7, 1),
                TrapKind::Fptosi => (2.5f64.to_bits() as i64, 0),
                _ => (5, 3),
            };
            let trap = Trap::decode(kind, a, b, 10, Some("f64"), Host::Jit);
            assert_eq!(trap.kind(), kind);
            let (ta, tb) = trap.operands();
            match trap {
                Trap::EmptyTape(_) | Trap::Message | Trap::OomTape | Trap::Bulk => {}
                Trap::DivZero
                | Trap::RemZero
                | Trap::IdivOverflow
                | Trap::SparseFull
                | Trap::OomSparse => {}
                Trap::Index { .. }
                | Trap::Switch { .. }
                | Trap::NoRule { .. }
                | Trap::BadLength { .. }
                | Trap::SparseRange { .. } => assert_eq!((ta, tb), (a, b), "{kind:?}"),
                _ => assert_eq!(ta, a, "{kind:?}"),
            }
        }
    }

    #[test]
    fn messages() {
        let text = |kind, a, b, host| Trap::decode(kind, a, b, 100, None, host).to_string();
        assert_eq!(
            text(TrapKind::Index, 5, 3, Host::Jit),
            "index 5 out of bounds for array of length 3"
        );
        assert_eq!(
            text(TrapKind::Fptosi, f64::NAN.to_bits() as i64, 0, Host::Jit),
            "fptosi of nan is out of the i64 range"
        );
        assert_eq!(
            text(TrapKind::TooLong, 1 << 29, 0, Host::Jit),
            "array length 536870912 exceeds the limit of 268435456 elements"
        );
        assert_eq!(
            text(TrapKind::EmptyTape, 0, 0, Host::Jit),
            "pop from an empty tape of ?"
        );
        assert_eq!(
            text(TrapKind::Stack, 9, 0, Host::Jit),
            "native stack exhausted at call depth 9 (the call-depth limit is 100; raise the JIT's stack budget)"
        );
        assert_eq!(
            text(TrapKind::Stack, 9, 0, Host::Object),
            "native stack exhausted at call depth 9 (the call-depth limit is 100; raise the stack budget with irad_set_stack_budget on a thread with a larger stack)"
        );
        assert_eq!(
            text(TrapKind::NoRule, 3, 0, Host::Object),
            "the object holds no forward rule for function value 3 (objects are closed: rules are built ahead of time)"
        );
        assert_eq!(
            text(TrapKind::NoRule, 3, 9, Host::Object),
            "the object holds no reverse (pullback) rule for function value 3 (objects are closed: rules are built ahead of time)"
        );
    }
}
