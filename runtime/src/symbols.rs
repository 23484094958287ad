//! The runtime's entry points that compiled code calls, as one enum: the
//! code generator names a callee by [`RtSym`] (so a misspelt name is a
//! compile error), the JIT registers every [`RtSym::ALL`] with Cranelift at
//! its [`RtSym::address`], and objects import the same [`RtSym::name`]s from
//! `libirad_runtime.a`.
//!
//! Each variant is written beside the function it stands for, and both its
//! name and its address come from that one identifier: the functions are
//! `#[unsafe(no_mangle)]`, so their symbol is their Rust name, and naming a
//! function that does not exist does not compile. `tests/emit.rs` also checks
//! that the static library defines every name. The functions C programs call
//! themselves (`irad_error_message`, `irad_set_*`) are not here: compiled
//! code never calls them.

use crate::*;

/// Declares [`RtSym`] from `Variant = function` pairs.
macro_rules! runtime_symbols {
    ($($variant:ident = $func:ident,)*) => {
        /// A runtime function that compiled code calls.
        #[derive(Copy, Clone, PartialEq, Eq, Hash, Debug)]
        pub enum RtSym {
            $(
                #[doc = concat!("`", stringify!($func), "`.")]
                $variant,
            )*
        }

        impl RtSym {
            /// Every runtime function compiled code calls.
            pub const ALL: &'static [RtSym] = &[$(RtSym::$variant),*];

            /// The symbol name (the function's `no_mangle` name).
            pub const fn name(self) -> &'static str {
                match self {
                    $(RtSym::$variant => stringify!($func),)*
                }
            }

            /// The function's address in this process, for the JIT.
            pub fn address(self) -> *const u8 {
                match self {
                    $(RtSym::$variant => $func as *const u8,)*
                }
            }
        }
    };
}

runtime_symbols! {
    Alloc = irad_rt_alloc,
    Copy = irad_rt_copy,
    Free = irad_rt_free,
    Hold = irad_rt_hold,
    Release = irad_rt_release,
    DropPopped = irad_rt_drop_popped,
    TapeGrow = irad_rt_tape_grow,
    Trace = irad_rt_trace,
    Enter = irad_rt_enter,
    Leave = irad_rt_leave,
    HasNan = irad_rt_has_nan,
    Restore = irad_rt_restore,
    Save = irad_rt_save,
    Unsave = irad_rt_unsave,
    SparseOnehot = irad_rt_sparse_onehot,
    SparseScale = irad_rt_sparse_scale,
    SparseAdd = irad_rt_sparse_add,
    SparseDense = irad_rt_sparse_dense,
    SparseSum = irad_rt_sparse_sum,
    SparseDot = irad_rt_sparse_dot,
    SparseFill = irad_rt_sparse_fill,
    SparseGemma = irad_rt_sparse_gemma,
    SparseGemmb = irad_rt_sparse_gemmb,
    Log1p = irad_rt_log1p,
    Expm1 = irad_rt_expm1,
    Sin = irad_rt_sin,
    Cos = irad_rt_cos,
    Tan = irad_rt_tan,
    Asin = irad_rt_asin,
    Acos = irad_rt_acos,
    Atan = irad_rt_atan,
    Sinh = irad_rt_sinh,
    Cosh = irad_rt_cosh,
    Tanh = irad_rt_tanh,
    Erf = irad_rt_erf,
    Round = irad_rt_round,
    Pow = irad_rt_pow,
    Atan2 = irad_rt_atan2,
    BulkSum = irad_rt_bulk_sum,
    BulkDot = irad_rt_bulk_dot,
    BulkAxpy = irad_rt_bulk_axpy,
    BulkScale = irad_rt_bulk_scale,
    BulkFill = irad_rt_bulk_fill,
    BulkCopyto = irad_rt_bulk_copyto,
    BulkMatvec = irad_rt_bulk_matvec,
    BulkMatmul = irad_rt_bulk_matmul,
    BulkGemm = irad_rt_bulk_gemm,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_and_addresses_are_distinct() {
        let names: HashSet<_> = RtSym::ALL.iter().map(|s| s.name()).collect();
        let addrs: HashSet<_> = RtSym::ALL.iter().map(|s| s.address()).collect();
        assert_eq!(names.len(), RtSym::ALL.len());
        assert_eq!(addrs.len(), RtSym::ALL.len());
        assert!(names.iter().all(|n| n.starts_with("irad_rt_")));
        assert_eq!(RtSym::TapeGrow.name(), "irad_rt_tape_grow");
    }
}
