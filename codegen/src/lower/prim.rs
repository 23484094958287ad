//! Lowering of one primitive call to Cranelift instructions, one function per
//! group of primitives: float arithmetic, math-library calls, comparisons,
//! integers, tuples, duals, arrays, bulk array primitives, the tape (`push`,
//! `pop`), the sparse tangent builder and the rule primitives (`frule`,
//! `revfwd`, `revback`).
//!
//! Assumes the statement was verified (operand counts and types are the
//! primitive table's); a shape the verifier would have refused is an internal
//! error, never a panic. [`Lower::prim_at`] only dispatches, so each group reads
//! on its own. Statements that can fail take a site number from the `site`
//! callback, at the point where they need it, so site numbers come out in
//! statement order.

use super::{Compiler, Leaves, Lower, RULE_FN, const_index};
use crate::CodegenError;
use crate::layout::{elem_bytes, elem_leaf, leaf_count, leaf_list};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{self, InstBuilder, MemFlagsData, types};
use cranelift_module::Module as ClModule;
use irad_ir::func::Operand;
use irad_ir::prim::Prim;
use irad_ir::types::Type;
use irad_runtime::{self as rt, RtSym, RuleKind, TrapKind};
use smallvec::SmallVec;

/// The callback that numbers a failing site: the compiler, and for a `pop`
/// the tape's type.
type SiteFn<'s, M> = dyn FnMut(&mut Compiler<M>, Option<Type>) -> i64 + 's;

/// The first leaf of operand `i` of `p`.
fn first_leaf(p: Prim, vals: &[Leaves], i: usize) -> Result<ir::Value, CodegenError> {
    vals.get(i)
        .and_then(|l| l.first().copied())
        .ok_or_else(|| CodegenError::internal(format!("`{p}` is missing operand {i}")))
}

/// A value of one leaf.
fn one(v: ir::Value) -> Leaves {
    smallvec::smallvec![v]
}

/// The exponent of a `powi` or `pow` when it is a constant -1, 0, 1 or 2
/// (an i64, or an f64 equal to one of those; `-0.0` counts as 0).
fn small_exponent(op: Option<&Operand>) -> Option<i64> {
    match op? {
        Operand::Const(irad_ir::Const::I64(n @ -1..=2)) => Some(*n),
        Operand::Const(irad_ir::Const::F64(y)) => {
            [-1i64, 0, 1, 2].into_iter().find(|&n| *y == n as f64)
        }
        _ => None,
    }
}

/// The error for a primitive handed to a group function it is not in.
fn not_in_group(p: Prim, group: &str) -> CodegenError {
    CodegenError::internal(format!("`{p}` is not {group} primitive"))
}

impl<M: ClModule> Lower<'_, '_, M> {
    /// The leaves of `p` applied to `vals` (of types `tys`; `ops` are the
    /// original operands when known, for constant field numbers).
    pub(super) fn prim_at(
        &mut self,
        p: Prim,
        ops: &[Operand],
        vals: &[Leaves],
        tys: &[Type],
        ret: &Type,
        site: &mut SiteFn<'_, M>,
    ) -> Result<Leaves, CodegenError> {
        use Prim::*;
        #[cfg(test)]
        if self.c.fail_at == Some(p) {
            return Err(CodegenError::internal(format!("`{p}` fails for the test")));
        }
        match p {
            Add | Sub | Mul | Div | Neg | Abs | Min | Max | Copysign | Sqrt | Floor | Ceil => {
                self.prim_float(p, vals)
            }
            Zmul => self.prim_zmul(vals),
            // `pow(x, n)` (irad's own, `irad_kernels::math::pow`) is exactly
            // 1, x, x * x and 1 / x for n = 0, 1, 2 and -1 (its special
            // cases, checked before anything else but NaN, which these give
            // too; a kernel test checks it), so a constant exponent among
            // those (`powi`'s i64 or `pow`'s f64, as the rules of `powi`
            // write it) needs no call.
            Powi | Pow if let Some(n) = small_exponent(ops.get(1)) => {
                let x = first_leaf(p, vals, 0)?;
                Ok(one(match n {
                    0 => self.b.ins().f64const(1.0),
                    1 => x,
                    2 => self.b.ins().fmul(x, x),
                    _ => {
                        let one_ = self.b.ins().f64const(1.0);
                        self.b.ins().fdiv(one_, x)
                    }
                }))
            }
            Pow | Atan2 | Powi | Exp | Log | Log1p | Expm1 | Sin | Cos | Tan | Asin | Acos
            | Atan | Sinh | Cosh | Tanh | Erf | Round => self.prim_math(p, vals),
            Lt | Le | Gt | Ge | Eq | Ne | Select => self.prim_compare(p, vals, tys),
            Iadd | Isub | Imul | Ineg | Idiv | Irem | And | Or | Not | Sitofp | Fptosi => {
                self.prim_int(p, vals, site)
            }
            Sum | Dot | Axpy | Scale | Matvec | Matmul | Fill | Copyto | Gemm => {
                let s = site(self.c, None);
                self.bulk(p, vals, s)
            }
            Tuple | Getfield => self.prim_tuple(p, ops, vals, tys),
            Dual | Primal | Tangent => self.prim_dual(p, ops, vals, tys, ret),
            Alloc | Zeros | Copy => self.prim_array_new(p, vals, tys, ret, site),
            Length | Arrayref | Arrayset => self.prim_array_access(p, vals, tys, site),
            Push | Pop => self.prim_tape(p, vals, tys, ret, site),
            Szero | Sonehot | Sscale | Sadd | Sdense => self.prim_sparse(p, vals, site),
            Ssum | Sdot | Sfill | Sgemma | Sgemmb => {
                let s = site(self.c, None);
                self.sparse_bulk(p, vals, s)
            }
            Frule | Revfwd | Revback => self.prim_rule(p, vals, site),
            // A hint to reverse mode: no code.
            Checkpoint => Ok(SmallVec::new()),
            Same => self.prim_same(vals),
        }
    }

    /// `same(a, b)`: one address, or both lengths 0 (as the interpreter
    /// says).
    fn prim_same(&mut self, vals: &[Leaves]) -> Result<Leaves, CodegenError> {
        let leaf = |i: usize, k: usize| {
            vals.get(i)
                .and_then(|v| v.get(k))
                .copied()
                .ok_or_else(|| CodegenError::internal("`same` of a non-array".into()))
        };
        let (pa, la, pb, lb) = (leaf(0, 0)?, leaf(0, 1)?, leaf(1, 0)?, leaf(1, 1)?);
        let one_address = self.b.ins().icmp(IntCC::Equal, pa, pb);
        let lengths = self.b.ins().bor(la, lb);
        let empty = self.b.ins().icmp_imm_u(IntCC::Equal, lengths, 0);
        Ok(one(self.b.ins().bor(one_address, empty)))
    }

    /// `zmul(a, b)` (`irad_kernels::zmul`): the product, with the bits of
    /// `0.0` where it is NaN and an operand is zero. Branch-free, in the low
    /// lane of 128-bit vectors (SSE compares give all-ones masks): the
    /// operands' zero masks, or'ed, and'ed with the product's NaN mask, clear
    /// the product's bits where both hold. Only the strong derivative has
    /// `zmul`s (docs/rules.md, "Infinities and NaN").
    fn prim_zmul(&mut self, vals: &[Leaves]) -> Result<Leaves, CodegenError> {
        let a = first_leaf(Prim::Zmul, vals, 0)?;
        let b = first_leaf(Prim::Zmul, vals, 1)?;
        let r = self.b.ins().fmul(a, b);
        let av = self.b.ins().scalar_to_vector(types::F64X2, a);
        let bv = self.b.ins().scalar_to_vector(types::F64X2, b);
        let rv = self.b.ins().scalar_to_vector(types::F64X2, r);
        let zero = self.b.ins().f64const(0.0);
        let zv = self.b.ins().splat(types::F64X2, zero);
        let za = self.b.ins().fcmp(FloatCC::Equal, av, zv);
        let zb = self.b.ins().fcmp(FloatCC::Equal, bv, zv);
        let nan = self.b.ins().fcmp(FloatCC::Unordered, rv, rv);
        let either = self.b.ins().bor(za, zb);
        let clear = self.b.ins().band(either, nan);
        let le = MemFlagsData::new().with_endianness(ir::Endianness::Little);
        let ri = self.b.ins().bitcast(types::I64X2, le, rv);
        let kept = self.b.ins().band_not(ri, clear);
        let out = self.b.ins().bitcast(types::F64X2, le, kept);
        Ok(one(self.b.ins().extractlane(out, 0)))
    }

    /// Float arithmetic that Cranelift has instructions for.
    fn prim_float(&mut self, p: Prim, vals: &[Leaves]) -> Result<Leaves, CodegenError> {
        use Prim::*;
        let arg = |i: usize| first_leaf(p, vals, i);
        Ok(match p {
            Add => one(self.b.ins().fadd(arg(0)?, arg(1)?)),
            Sub => one(self.b.ins().fsub(arg(0)?, arg(1)?)),
            Mul => one(self.b.ins().fmul(arg(0)?, arg(1)?)),
            Div => one(self.b.ins().fdiv(arg(0)?, arg(1)?)),
            Neg => one(self.b.ins().fneg(arg(0)?)),
            Abs => one(self.b.ins().fabs(arg(0)?)),
            Min => one(self.b.ins().fmin(arg(0)?, arg(1)?)),
            Max => one(self.b.ins().fmax(arg(0)?, arg(1)?)),
            Copysign => one(self.b.ins().fcopysign(arg(0)?, arg(1)?)),
            Sqrt => one(self.b.ins().sqrt(arg(0)?)),
            Floor => one(self.b.ins().floor(arg(0)?)),
            Ceil => one(self.b.ins().ceil(arg(0)?)),
            _ => return Err(not_in_group(p, "a float arithmetic")),
        })
    }

    /// Float functions computed by the runtime's math library.
    fn prim_math(&mut self, p: Prim, vals: &[Leaves]) -> Result<Leaves, CodegenError> {
        use Prim::*;
        let arg = |i: usize| first_leaf(p, vals, i);
        Ok(match p {
            Pow => one(self.math2(RtSym::Pow, arg(0)?, arg(1)?)?),
            Atan2 => one(self.math2(RtSym::Atan2, arg(0)?, arg(1)?)?),
            Powi => {
                let n = self.b.ins().fcvt_from_sint(types::F64, arg(1)?);
                one(self.math2(RtSym::Pow, arg(0)?, n)?)
            }
            Exp => one(self.exp_inline(arg(0)?)?),
            Log => one(self.log_inline(arg(0)?)?),
            Log1p | Expm1 | Sin | Cos | Tan | Asin | Acos | Atan | Sinh | Cosh | Tanh | Erf
            | Round => {
                let sym = match p {
                    Log1p => RtSym::Log1p,
                    Expm1 => RtSym::Expm1,
                    Sin => RtSym::Sin,
                    Cos => RtSym::Cos,
                    Tan => RtSym::Tan,
                    Asin => RtSym::Asin,
                    Acos => RtSym::Acos,
                    Atan => RtSym::Atan,
                    Sinh => RtSym::Sinh,
                    Cosh => RtSym::Cosh,
                    Tanh => RtSym::Tanh,
                    Erf => RtSym::Erf,
                    _ => RtSym::Round,
                };
                let r = self.call_rt(sym, &[types::F64], &[types::F64], &[arg(0)?])?;
                one(r[0])
            }
            _ => return Err(not_in_group(p, "a math library")),
        })
    }

    /// exp's polynomial step, of scalars or of vectors alike (`konst`
    /// makes a constant of `x`'s type): r = (x - kd L_hi) - kd L_lo and
    /// p = r + r^2 (1/2 + r (1/6 + r (1/24 + r / 120))), the operations of
    /// `irad_kernels::math::exp` in its order.
    pub(super) fn exp_poly(
        &mut self,
        x: ir::Value,
        kd: ir::Value,
        konst: &dyn Fn(&mut Self, f64) -> ir::Value,
    ) -> ir::Value {
        use rt::math::{LN2_N_HI, LN2_N_LO};
        let c = konst(self, LN2_N_HI);
        let t = self.b.ins().fmul(kd, c);
        let r = self.b.ins().fsub(x, t);
        let c = konst(self, LN2_N_LO);
        let t = self.b.ins().fmul(kd, c);
        let r = self.b.ins().fsub(r, t);
        let mut acc = konst(self, 1.0 / 120.0);
        acc = self.b.ins().fmul(r, acc);
        for coef in [1.0 / 24.0, 1.0 / 6.0] {
            let c = konst(self, coef);
            acc = self.b.ins().fadd(c, acc);
            acc = self.b.ins().fmul(r, acc);
        }
        let c = konst(self, 0.5);
        acc = self.b.ins().fadd(c, acc);
        let rr = self.b.ins().fmul(r, r);
        let t = self.b.ins().fmul(rr, acc);
        self.b.ins().fadd(r, t)
    }

    /// `exp(x)` computed inline, without a call: the operations of
    /// `irad_kernels::math::exp` in the same order with the same constants
    /// and table (so the same bits). The common case (x in range, a normal
    /// result) is straight-line code; the rest (NaN, infinities, overflow,
    /// results near overflow or subnormal) is a cold block of selects that
    /// mirrors the kernel's branches. No call, so nothing live across an
    /// `exp` has to be spilled.
    fn exp_inline(&mut self, x: ir::Value) -> Result<ir::Value, CodegenError> {
        use rt::math::{EXP_MAX, EXP_MIN, INV_LN2_N, SHIFT};
        let table = self.table_gv(rt::EXP_TABLE_SYMBOL)?;
        let f = |b: &mut Self, v: f64| b.b.ins().f64const(v);
        // kd = (x * N / ln2 + 1.5 * 2^52) - 1.5 * 2^52; k = kd as an integer,
        // read off the shifted sum's bits (exact while |x * N / ln2| < 2^51,
        // so on every path that uses it).
        let c = f(self, INV_LN2_N);
        let z = self.b.ins().fmul(x, c);
        let sh = f(self, SHIFT);
        let z = self.b.ins().fadd(z, sh);
        let kd = self.b.ins().fsub(z, sh);
        let zbits = self.b.ins().bitcast(types::I64, MemFlagsData::new(), z);
        let k = self.b.ins().iadd_imm_s(zbits, -(SHIFT.to_bits() as i64));
        let p = self.exp_poly(x, kd, &f);
        // [t_hi, t_lo] = table[k & 127]; y = t_hi + (t_lo + t_hi * p)
        let j = self.b.ins().band_imm_s(k, 127);
        let off = self.b.ins().ishl_imm_s(j, 4);
        let base = self.b.ins().symbol_value(types::I64, table);
        let addr = self.b.ins().iadd(base, off);
        let ro = MemFlagsData::trusted().with_readonly();
        let t_hi = self.b.ins().load(types::F64, ro, addr, 0);
        let t_lo = self.b.ins().load(types::F64, ro, addr, 8);
        let t = self.b.ins().fmul(t_hi, p);
        let q = self.b.ins().fadd(t_lo, t);
        let y = self.b.ins().fadd(t_hi, q);
        // y * 2^e, e = k >> 7, when x is in range and -1021 <= e <= 1023.
        let e = self.b.ins().sshr_imm_s(k, 7);
        let fast = self.exp_scale(y, e, 0);
        let lo = f(self, EXP_MIN);
        let hi = f(self, EXP_MAX);
        let above = self.b.ins().fcmp(FloatCC::GreaterThan, x, lo);
        let below = self.b.ins().fcmp(FloatCC::LessThanOrEqual, x, hi);
        let in_range = self.b.ins().band(above, below);
        let e_lo = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, e, -1021);
        let e_hi = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedLessThanOrEqual, e, 1023);
        let ok_e = self.b.ins().band(e_lo, e_hi);
        let ok = self.b.ins().band(in_range, ok_e);
        let slow = self.b.create_block();
        let join = self.b.create_block();
        self.b.set_cold_block(slow);
        let res = self.b.append_block_param(join, types::F64);
        self.b
            .ins()
            .brif(ok, join, &[ir::BlockArg::Value(fast)], slow, &[]);
        self.b.switch_to_block(slow);
        // In range: e > 1023 overflows 2^e, so y 2^1023 2; a result below
        // 2^-1022 is rounded once on the subnormal grid (the kernel's
        // `subnormal`: scaled by 2^1022, hi = 1 + a split exactly, one
        // rounding in hi + (lo + b)); else (e = -1022, y >= 1) y 2^e.
        let e_max = self.b.ins().iconst(types::I64, 1023);
        let over = self.exp_scale(y, e_max, 0);
        let two = f(self, 2.0);
        let over = self.b.ins().fmul(over, two);
        let s = self.exp_scale_pow2(e, 1022);
        let a = self.b.ins().fmul(t_hi, s);
        let bq = self.b.ins().fmul(q, s);
        let one_ = f(self, 1.0);
        let h = self.b.ins().fadd(one_, a);
        let l = self.b.ins().fsub(one_, h);
        let l = self.b.ins().fadd(l, a);
        let l = self.b.ins().fadd(l, bq);
        let sum = self.b.ins().fadd(h, l);
        let sum = self.b.ins().fsub(sum, one_);
        let min_normal = f(self, f64::MIN_POSITIVE);
        let sub = self.b.ins().fmul(sum, min_normal);
        let e_low = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, e, -1022);
        let e_eq = self.b.ins().icmp_imm_s(IntCC::Equal, e, -1022);
        let y_lt1 = self.b.ins().fcmp(FloatCC::LessThan, y, one_);
        let tiny = self.b.ins().band(e_eq, y_lt1);
        let tiny = self.b.ins().bor(e_low, tiny);
        let e_big = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, e, 1023);
        let inner = self.b.ins().select(tiny, sub, fast);
        let inner = self.b.ins().select(e_big, over, inner);
        // Out of range: NaN gives x + x, above inf, below 0.
        let nan = self.b.ins().fadd(x, x);
        let zero = f(self, 0.0);
        let inf = f(self, f64::INFINITY);
        let pos = self.b.ins().fcmp(FloatCC::GreaterThan, x, zero);
        let outside = self.b.ins().select(pos, inf, zero);
        let is_nan = self.b.ins().fcmp(FloatCC::Unordered, x, x);
        let outside = self.b.ins().select(is_nan, nan, outside);
        let v = self.b.ins().select(in_range, inner, outside);
        self.b.ins().jump(join, &[ir::BlockArg::Value(v)]);
        self.b.switch_to_block(join);
        Ok(res)
    }

    /// `log(x)` computed inline, without a call: the operations of
    /// `irad_kernels::math::log` in the same order with the same constants
    /// and table (the runtime's `irad_rt_log_table`), so the same bits. A
    /// positive normal `x` takes straight-line code; the rest goes to a cold
    /// block, which gives the special values (-inf for zeros, `x + x` for
    /// NaN and +inf, NaN for negatives) or, for a subnormal, re-enters the
    /// straight-line code with the bits of `x * 2^52` less 52 in the
    /// exponent field, as the kernel does.
    fn log_inline(&mut self, x: ir::Value) -> Result<ir::Value, CodegenError> {
        use rt::math::{LN2_HI, LN2_LO, LOG_OFF, LOG_Q, LOG_SUBNORMAL_SCALE, LOG_ZH_MASK};
        const MIN_NORMAL_BITS: i64 = 0x0010_0000_0000_0000;
        const INF_BITS: i64 = 0x7ff0_0000_0000_0000;
        let table = self.table_gv(rt::LOG_TABLE_SYMBOL)?;
        let f = |b: &mut Self, v: f64| b.b.ins().f64const(v);
        let main = self.b.create_block();
        let cold = self.b.create_block();
        let join = self.b.create_block();
        self.b.set_cold_block(cold);
        let ixp = self.b.append_block_param(main, types::I64);
        let res = self.b.append_block_param(join, types::F64);
        // 0, subnormal, negative, inf or NaN: bits(x) - MIN_NORMAL_BITS,
        // unsigned, at least INF_BITS - MIN_NORMAL_BITS.
        let ix = self.b.ins().bitcast(types::I64, MemFlagsData::new(), x);
        let t = self.b.ins().iadd_imm_s(ix, -MIN_NORMAL_BITS);
        let special = self.b.ins().icmp_imm_s(
            IntCC::UnsignedGreaterThanOrEqual,
            t,
            INF_BITS - MIN_NORMAL_BITS,
        );
        // The hot path first (see `cold_path`).
        let normal = self.negate(special);
        self.b
            .ins()
            .brif(normal, main, &[ir::BlockArg::Value(ix)], cold, &[]);

        self.b.switch_to_block(main);
        // tmp = ix - LOG_OFF; i = bits 44..51; k = tmp >> 52 (arithmetic);
        // z = bits ix less k in the exponent; zh = z's leading 32 bits.
        let tmp = self.b.ins().iadd_imm_s(ixp, LOG_OFF.wrapping_neg() as i64);
        let i = self.b.ins().ushr_imm_s(tmp, 44);
        let i = self.b.ins().band_imm_s(i, 255);
        let k = self.b.ins().sshr_imm_s(tmp, 52);
        let top = self.b.ins().band_imm_s(tmp, (0xfffu64 << 52) as i64);
        let iz = self.b.ins().isub(ixp, top);
        let z = self.b.ins().bitcast(types::F64, MemFlagsData::new(), iz);
        let izh = self.b.ins().band_imm_s(iz, LOG_ZH_MASK as i64);
        let zh = self.b.ins().bitcast(types::F64, MemFlagsData::new(), izh);
        let zl = self.b.ins().fsub(z, zh);
        // [invc, logc_hi, logc_lo] = table[i], 24 bytes a row.
        let off = self.b.ins().imul_imm_s(i, 24);
        let base = self.b.ins().symbol_value(types::I64, table);
        let addr = self.b.ins().iadd(base, off);
        let ro = MemFlagsData::trusted().with_readonly();
        let invc = self.b.ins().load(types::F64, ro, addr, 0);
        let logc_hi = self.b.ins().load(types::F64, ro, addr, 8);
        let logc_lo = self.b.ins().load(types::F64, ro, addr, 16);
        // rh = zh * invc - 1, rl = zl * invc (both exact); r = rh + rl and
        // r_err = (rh - r) + rl.
        let one_ = f(self, 1.0);
        let rh = self.b.ins().fmul(zh, invc);
        let rh = self.b.ins().fsub(rh, one_);
        let rl = self.b.ins().fmul(zl, invc);
        let r = self.b.ins().fadd(rh, rl);
        let r_err = self.b.ins().fsub(rh, r);
        let r_err = self.b.ins().fadd(r_err, rl);
        // t1 = kd * LN2_HI + logc_hi; hi = t1 + r; e = (t1 - hi) + r;
        // lo = (kd * LN2_LO + logc_lo) + (e + r_err).
        let kd = self.b.ins().fcvt_from_sint(types::F64, k);
        let c = f(self, LN2_HI);
        let t1 = self.b.ins().fmul(kd, c);
        let t1 = self.b.ins().fadd(t1, logc_hi);
        let hi = self.b.ins().fadd(t1, r);
        let e = self.b.ins().fsub(t1, hi);
        let e = self.b.ins().fadd(e, r);
        let c = f(self, LN2_LO);
        let lo = self.b.ins().fmul(kd, c);
        let lo = self.b.ins().fadd(lo, logc_lo);
        let e = self.b.ins().fadd(e, r_err);
        let lo = self.b.ins().fadd(lo, e);
        // q = (Q0 + r Q1) + r2 ((Q2 + r Q3) + r2 Q4);
        // y = hi + (lo + r2 q).
        let r2 = self.b.ins().fmul(r, r);
        let pair = |b: &mut Self, j: usize| {
            let c0 = f(b, LOG_Q[j]);
            let c1 = f(b, LOG_Q[j + 1]);
            let t = b.b.ins().fmul(r, c1);
            b.b.ins().fadd(c0, t)
        };
        let q01 = pair(self, 0);
        let q23 = pair(self, 2);
        let c = f(self, LOG_Q[4]);
        let q = self.b.ins().fmul(r2, c);
        let q = self.b.ins().fadd(q23, q);
        let q = self.b.ins().fmul(r2, q);
        let q = self.b.ins().fadd(q01, q);
        let p = self.b.ins().fmul(r2, q);
        let y = self.b.ins().fadd(lo, p);
        let y = self.b.ins().fadd(hi, y);
        self.b.ins().jump(join, &[ir::BlockArg::Value(y)]);

        self.b.switch_to_block(cold);
        // A positive subnormal (bits in 1..MIN_NORMAL_BITS) goes back to
        // the main block scaled; the rest is: zero -inf, NaN or +inf x + x,
        // negative NaN.
        let scale = f(self, LOG_SUBNORMAL_SCALE);
        let xs = self.b.ins().fmul(x, scale);
        let xs = self.b.ins().bitcast(types::I64, MemFlagsData::new(), xs);
        let ix2 = self.b.ins().iadd_imm_s(xs, -(52i64 << 52));
        let m1 = self.b.ins().iadd_imm_s(ix, -1);
        let sub = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedLessThan, m1, MIN_NORMAL_BITS - 1);
        let zero = f(self, 0.0);
        let inf = f(self, f64::INFINITY);
        let is_zero = self.b.ins().fcmp(FloatCC::Equal, x, zero);
        let is_nan = self.b.ins().fcmp(FloatCC::Unordered, x, x);
        let is_inf = self.b.ins().fcmp(FloatCC::Equal, x, inf);
        let pass = self.b.ins().bor(is_nan, is_inf);
        let twice = self.b.ins().fadd(x, x);
        let nan = f(self, f64::NAN);
        let neg_inf = f(self, f64::NEG_INFINITY);
        let v = self.b.ins().select(pass, twice, nan);
        let v = self.b.ins().select(is_zero, neg_inf, v);
        self.b.ins().brif(
            sub,
            main,
            &[ir::BlockArg::Value(ix2)],
            join,
            &[ir::BlockArg::Value(v)],
        );
        self.b.switch_to_block(join);
        Ok(res)
    }

    /// `y * 2^(e + add)` with the power built from its bits (exact for
    /// `-1022 <= e + add <= 1023`; garbage elsewhere, which callers select
    /// away).
    fn exp_scale(&mut self, y: ir::Value, e: ir::Value, add: i64) -> ir::Value {
        let p = self.exp_scale_pow2(e, add);
        self.b.ins().fmul(y, p)
    }

    /// `2^(e + add)` from its bits.
    fn exp_scale_pow2(&mut self, e: ir::Value, add: i64) -> ir::Value {
        let bias = self.b.ins().iadd_imm_s(e, 1023 + add);
        let bits = self.b.ins().ishl_imm_s(bias, 52);
        self.b.ins().bitcast(types::F64, MemFlagsData::new(), bits)
    }

    fn math2(&mut self, sym: RtSym, a: ir::Value, b: ir::Value) -> Result<ir::Value, CodegenError> {
        Ok(self.call_rt(sym, &[types::F64, types::F64], &[types::F64], &[a, b])?[0])
    }

    /// Comparisons of floats (ordered) and of integers or bools (signed),
    /// and `select` of values of any number of leaves.
    fn prim_compare(
        &mut self,
        p: Prim,
        vals: &[Leaves],
        tys: &[Type],
    ) -> Result<Leaves, CodegenError> {
        use Prim::*;
        let arg = |i: usize| first_leaf(p, vals, i);
        Ok(match p {
            Lt | Le | Gt | Ge | Eq | Ne => {
                let (a, b) = (arg(0)?, arg(1)?);
                if tys.first() == Some(&Type::F64) {
                    let cc = match p {
                        Lt => FloatCC::LessThan,
                        Le => FloatCC::LessThanOrEqual,
                        Gt => FloatCC::GreaterThan,
                        Ge => FloatCC::GreaterThanOrEqual,
                        Eq => FloatCC::Equal,
                        _ => FloatCC::NotEqual,
                    };
                    one(self.b.ins().fcmp(cc, a, b))
                } else {
                    let cc = match p {
                        Lt => IntCC::SignedLessThan,
                        Le => IntCC::SignedLessThanOrEqual,
                        Gt => IntCC::SignedGreaterThan,
                        Ge => IntCC::SignedGreaterThanOrEqual,
                        Eq => IntCC::Equal,
                        _ => IntCC::NotEqual,
                    };
                    one(self.b.ins().icmp(cc, a, b))
                }
            }
            Select => {
                let c = arg(0)?;
                let (a, b) = match (vals.get(1), vals.get(2)) {
                    (Some(a), Some(b)) if a.len() == b.len() => (a.clone(), b.clone()),
                    _ => return Err(CodegenError::internal("bad operands of `select`".into())),
                };
                a.iter()
                    .zip(&b)
                    .map(|(&x, &y)| self.b.ins().select(c, x, y))
                    .collect()
            }
            _ => return Err(not_in_group(p, "a comparison")),
        })
    }

    /// Integer arithmetic, bool logic and conversions; `idiv`, `irem` and
    /// `fptosi` check their operands and fail at a site.
    fn prim_int(
        &mut self,
        p: Prim,
        vals: &[Leaves],
        site: &mut SiteFn<'_, M>,
    ) -> Result<Leaves, CodegenError> {
        use Prim::*;
        let arg = |i: usize| first_leaf(p, vals, i);
        Ok(match p {
            Iadd => one(self.b.ins().iadd(arg(0)?, arg(1)?)),
            Isub => one(self.b.ins().isub(arg(0)?, arg(1)?)),
            Imul => one(self.b.ins().imul(arg(0)?, arg(1)?)),
            Ineg => one(self.b.ins().ineg(arg(0)?)),
            Idiv | Irem => {
                let (a, b) = (arg(0)?, arg(1)?);
                let s = site(self.c, None);
                let zero = self.b.ins().icmp_imm_s(IntCC::Equal, b, 0);
                let kind = if p == Idiv {
                    TrapKind::DivZero
                } else {
                    TrapKind::RemZero
                };
                self.fail_if(zero, kind, s, None, None);
                let minus_one = self.b.ins().icmp_imm_s(IntCC::Equal, b, -1);
                if p == Idiv {
                    let min = self.b.ins().icmp_imm_s(IntCC::Equal, a, i64::MIN);
                    let ovf = self.b.ins().band(min, minus_one);
                    self.fail_if(ovf, TrapKind::IdivOverflow, s, None, None);
                    one(self.b.ins().sdiv(a, b))
                } else {
                    // x % -1 is 0 for every x; dividing by 1 instead avoids
                    // the hardware's overflow on i64::MIN % -1.
                    let onev = self.b.ins().iconst(types::I64, 1);
                    let safe = self.b.ins().select(minus_one, onev, b);
                    one(self.b.ins().srem(a, safe))
                }
            }
            And => one(self.b.ins().band(arg(0)?, arg(1)?)),
            Or => one(self.b.ins().bor(arg(0)?, arg(1)?)),
            Not => one(self.b.ins().bxor_imm_s(arg(0)?, 1)),
            Sitofp => one(self.b.ins().fcvt_from_sint(types::F64, arg(0)?)),
            Fptosi => {
                let x = arg(0)?;
                let s = site(self.c, None);
                const TWO_63: f64 = 9_223_372_036_854_775_808.0;
                let lo = self.b.ins().f64const(-TWO_63);
                let hi = self.b.ins().f64const(TWO_63);
                // Not (x >= -2^63 and x < 2^63): also true for NaN.
                let ge = self.b.ins().fcmp(FloatCC::GreaterThanOrEqual, x, lo);
                let lt = self.b.ins().fcmp(FloatCC::LessThan, x, hi);
                let ok = self.b.ins().band(ge, lt);
                let bad = self.b.ins().bxor_imm_s(ok, 1);
                let bits = self.b.ins().bitcast(types::I64, MemFlagsData::new(), x);
                self.fail_if(bad, TrapKind::Fptosi, s, Some(bits), None);
                one(self.b.ins().fcvt_to_sint_sat(types::I64, x))
            }
            _ => return Err(not_in_group(p, "an integer")),
        })
    }

    /// A bulk array primitive: a call of its runtime entry point with the
    /// context, the leaves of the operands in order (bools widened to i64)
    /// and the site. `sum` and `dot` return their f64 and leave a failure in
    /// the context; the others return non-zero on failure, and may have
    /// written an array, so no element stays known.
    fn bulk(&mut self, p: Prim, vals: &[Leaves], site: i64) -> Result<Leaves, CodegenError> {
        let sym = match p {
            Prim::Sum => RtSym::BulkSum,
            Prim::Dot => RtSym::BulkDot,
            Prim::Axpy => RtSym::BulkAxpy,
            Prim::Scale => RtSym::BulkScale,
            Prim::Matvec => RtSym::BulkMatvec,
            Prim::Matmul => RtSym::BulkMatmul,
            Prim::Fill => RtSym::BulkFill,
            Prim::Copyto => RtSym::BulkCopyto,
            Prim::Gemm => RtSym::BulkGemm,
            _ => {
                return Err(CodegenError::internal(format!(
                    "`{p}` is not a bulk primitive"
                )));
            }
        };
        let ctx = self.ctx();
        let mut params = vec![types::I64];
        let mut args = vec![ctx];
        for &v in vals.iter().flatten() {
            let ty = self.b.func.dfg.value_type(v);
            if ty == types::I8 {
                params.push(types::I64);
                args.push(self.b.ins().uextend(types::I64, v));
            } else {
                params.push(ty);
                args.push(v);
            }
        }
        params.push(types::I64);
        args.push(self.b.ins().iconst(types::I64, site));
        if matches!(p, Prim::Sum | Prim::Dot) {
            let r = self.call_rt(sym, &params, &[types::F64], &args)?;
            let kind = self.load64(ctx, rt::OFF_ERR_KIND);
            self.propagate_if(kind);
            Ok(smallvec::smallvec![r[0]])
        } else {
            let r = self.call_rt(sym, &params, &[types::I64], &args)?;
            self.known.clear();
            self.propagate_if(r[0]);
            Ok(SmallVec::new())
        }
    }

    /// A sparse primitive on arrays of handles (`ssum sdot sfill sgemma
    /// sgemmb`): a call of its runtime entry point with the context, the
    /// leaves of the operands in order (bools widened to i64) and the site,
    /// as [`Self::bulk`]. Each returns a negative number on failure; `ssum`
    /// and `sdot` return their handle, the others may have written an array,
    /// so no element stays known.
    fn sparse_bulk(&mut self, p: Prim, vals: &[Leaves], site: i64) -> Result<Leaves, CodegenError> {
        let sym = match p {
            Prim::Ssum => RtSym::SparseSum,
            Prim::Sdot => RtSym::SparseDot,
            Prim::Sfill => RtSym::SparseFill,
            Prim::Sgemma => RtSym::SparseGemma,
            Prim::Sgemmb => RtSym::SparseGemmb,
            _ => return Err(not_in_group(p, "a sparse array")),
        };
        let ctx = self.ctx();
        let mut params = vec![types::I64];
        let mut args = vec![ctx];
        for &v in vals.iter().flatten() {
            let ty = self.b.func.dfg.value_type(v);
            if ty == types::I8 {
                params.push(types::I64);
                args.push(self.b.ins().uextend(types::I64, v));
            } else {
                params.push(ty);
                args.push(v);
            }
        }
        params.push(types::I64);
        args.push(self.b.ins().iconst(types::I64, site));
        let r = self.call_rt(sym, &params, &[types::I64], &args)?;
        let bad = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, r[0], 0);
        self.propagate_if(bad);
        if matches!(p, Prim::Ssum | Prim::Sdot) {
            Ok(one(r[0]))
        } else {
            self.known.clear();
            Ok(SmallVec::new())
        }
    }

    /// `tuple` (the operands' leaves in order) and `getfield` (the leaves of
    /// one field, whose number is a constant operand).
    fn prim_tuple(
        &mut self,
        p: Prim,
        ops: &[Operand],
        vals: &[Leaves],
        tys: &[Type],
    ) -> Result<Leaves, CodegenError> {
        Ok(match p {
            Prim::Tuple => vals.iter().flatten().copied().collect(),
            Prim::Getfield => {
                let Some(Type::Tuple(elems)) = tys.first() else {
                    return Err(CodegenError::internal("`getfield` of a non-tuple".into()));
                };
                let k = const_index(ops.get(1))
                    .filter(|&k| k < elems.len())
                    .ok_or_else(|| CodegenError::internal("bad field of `getfield`".into()))?;
                let start: usize = elems[..k].iter().map(leaf_count).sum();
                let n = leaf_count(&elems[k]);
                vals[0][start..start + n].iter().copied().collect()
            }
            _ => return Err(not_in_group(p, "a tuple")),
        })
    }

    /// `dual`, `primal` and `tangent`: a dual's leaves are its primal's, then
    /// each tangent's in turn, so all three only regroup leaves.
    fn prim_dual(
        &mut self,
        p: Prim,
        ops: &[Operand],
        vals: &[Leaves],
        tys: &[Type],
        ret: &Type,
    ) -> Result<Leaves, CodegenError> {
        Ok(match p {
            Prim::Dual => vals.iter().flatten().copied().collect(),
            Prim::Primal => {
                let n = leaf_count(ret);
                vals[0][..n].iter().copied().collect()
            }
            Prim::Tangent => {
                let Some(Type::Dual(inner, lanes)) = tys.first() else {
                    return Err(CodegenError::internal("`tangent` of a non-dual".into()));
                };
                let k = const_index(ops.get(1))
                    .filter(|&k| k < lanes.count())
                    .ok_or_else(|| CodegenError::internal("bad index of `tangent`".into()))?;
                let n = leaf_count(ret);
                let start = leaf_count(inner) + k * n;
                vals[0][start..start + n].iter().copied().collect()
            }
            _ => return Err(not_in_group(p, "a dual")),
        })
    }

    /// The primitives that make an array (`alloc`, `zeros`, `copy`): a call
    /// of the runtime, which returns null (with the error in the context) on
    /// failure.
    fn prim_array_new(
        &mut self,
        p: Prim,
        vals: &[Leaves],
        tys: &[Type],
        ret: &Type,
        site: &mut SiteFn<'_, M>,
    ) -> Result<Leaves, CodegenError> {
        use Prim::*;
        let arg = |i: usize| first_leaf(p, vals, i);
        Ok(match p {
            Alloc | Zeros => {
                let elem = match ret {
                    Type::Array(e) => *e,
                    _ => {
                        return Err(CodegenError::internal(
                            "`alloc` without an array type".into(),
                        ));
                    }
                };
                let n = arg(0)?;
                let s = site(self.c, None);
                let ctx = self.ctx();
                let size = self.b.ins().iconst(types::I64, elem_bytes(elem));
                let sv = self.b.ins().iconst(types::I64, s);
                let r = self.call_rt(
                    RtSym::Alloc,
                    &[types::I64; 4],
                    &[types::I64],
                    &[ctx, n, size, sv],
                )?;
                let null = self.b.ins().icmp_imm_s(IntCC::Equal, r[0], 0);
                self.propagate_if(null);
                smallvec::smallvec![r[0], n]
            }
            Copy => {
                let elem = match tys.first() {
                    Some(Type::Array(e)) => *e,
                    _ => return Err(CodegenError::internal("`copy` of a non-array".into())),
                };
                let (ptr, len) = (vals[0][0], vals[0][1]);
                let s = site(self.c, None);
                let ctx = self.ctx();
                let size = self.b.ins().iconst(types::I64, elem_bytes(elem));
                let sv = self.b.ins().iconst(types::I64, s);
                let r = self.call_rt(
                    RtSym::Copy,
                    &[types::I64; 5],
                    &[types::I64],
                    &[ctx, ptr, len, size, sv],
                )?;
                let null = self.b.ins().icmp_imm_s(IntCC::Equal, r[0], 0);
                self.propagate_if(null);
                smallvec::smallvec![r[0], len]
            }
            _ => return Err(not_in_group(p, "an array-making")),
        })
    }

    /// `length`, `arrayref` and `arrayset`: an array's leaves are its
    /// pointer and length; element access checks the index at a site.
    fn prim_array_access(
        &mut self,
        p: Prim,
        vals: &[Leaves],
        tys: &[Type],
        site: &mut SiteFn<'_, M>,
    ) -> Result<Leaves, CodegenError> {
        use Prim::*;
        let arg = |i: usize| first_leaf(p, vals, i);
        Ok(match p {
            Length => one(*vals[0]
                .get(1)
                .ok_or_else(|| CodegenError::internal("`length` of a non-array".into()))?),
            Arrayref | Arrayset => {
                let elem = match tys.first() {
                    Some(Type::Array(e)) => *e,
                    _ => return Err(CodegenError::internal(format!("`{p}` of a non-array"))),
                };
                let (ptr, len) = (vals[0][0], vals[0][1]);
                let i = arg(1)?;
                // Within a block, an index checked once against a length
                // stays in bounds (lengths never change), and an element
                // read or written stays known until something may write
                // arrays (`arrayset` through any name, a call, a bulk
                // primitive with an output).
                if p == Arrayref
                    && let Some(&v) = self.known.get(&(ptr, i))
                {
                    return Ok(one(v));
                }
                if !self.cur_in_range && !self.checked.contains(&(i, len)) {
                    let s = site(self.c, None);
                    let out = self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, i, len);
                    self.fail_if(out, TrapKind::Index, s, Some(i), Some(len));
                    self.checked.insert((i, len));
                }
                let off = self.b.ins().imul_imm_s(i, elem_bytes(elem));
                let addr = self.b.ins().iadd(ptr, off);
                if p == Arrayref {
                    let v = self.b.ins().load(elem_leaf(elem), self.fl_array, addr, 0);
                    self.known.insert((ptr, i), v);
                    one(v)
                } else {
                    let v = arg(2)?;
                    self.b.ins().store(self.fl_array, v, addr, 0);
                    self.known.clear();
                    self.known.insert((ptr, i), v);
                    SmallVec::new()
                }
            }
            _ => return Err(not_in_group(p, "an array access")),
        })
    }

    /// `push` and `pop` on the tape of the value's type: at an offset from
    /// the segment's top when the segment checked the tape at its start,
    /// else with a check of their own at a site.
    fn prim_tape(
        &mut self,
        p: Prim,
        vals: &[Leaves],
        tys: &[Type],
        ret: &Type,
        site: &mut SiteFn<'_, M>,
    ) -> Result<Leaves, CodegenError> {
        Ok(match p {
            Prim::Push => {
                let ty = tys.first().cloned().unwrap_or(Type::Unit);
                let t = self.c.tape(&ty);
                match self.prechecked.take() {
                    Some((_, off)) => self.push_at(t, off, &vals[0], &leaf_list(&ty))?,
                    None => {
                        let s = site(self.c, None);
                        self.push(t, &vals[0], &leaf_list(&ty), s)?;
                    }
                }
                SmallVec::new()
            }
            Prim::Pop => {
                let t = self.c.tape(ret);
                match self.prechecked.take() {
                    Some((_, off)) => self.pop_at(t, off, &leaf_list(ret))?,
                    None => {
                        let s = site(self.c, Some(ret.clone()));
                        self.pop(t, &leaf_list(ret), Some(s))
                    }
                }
            }
            _ => return Err(not_in_group(p, "a tape")),
        })
    }

    /// The sparse tangent builder: `szero` is the null handle, the others
    /// call the runtime, which returns a negative handle on failure
    /// (`sdense` a null array).
    fn prim_sparse(
        &mut self,
        p: Prim,
        vals: &[Leaves],
        site: &mut SiteFn<'_, M>,
    ) -> Result<Leaves, CodegenError> {
        use Prim::*;
        let arg = |i: usize| first_leaf(p, vals, i);
        Ok(match p {
            Szero => one(self.b.ins().iconst(types::I64, 0)),
            Sonehot | Sscale | Sadd => {
                let s = site(self.c, None);
                let ctx = self.ctx();
                let sv = self.b.ins().iconst(types::I64, s);
                let r = match p {
                    Sonehot => self.call_rt(
                        RtSym::SparseOnehot,
                        &[types::I64; 3],
                        &[types::I64],
                        &[ctx, arg(0)?, sv],
                    )?,
                    Sscale => self.call_rt(
                        RtSym::SparseScale,
                        &[types::I64, types::F64, types::I64, types::I64],
                        &[types::I64],
                        &[ctx, arg(0)?, arg(1)?, sv],
                    )?,
                    _ => self.call_rt(
                        RtSym::SparseAdd,
                        &[types::I64; 4],
                        &[types::I64],
                        &[ctx, arg(0)?, arg(1)?, sv],
                    )?,
                };
                let bad = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, r[0], 0);
                self.propagate_if(bad);
                one(r[0])
            }
            Sdense => {
                let n = arg(1)?;
                let s = site(self.c, None);
                let ctx = self.ctx();
                let sv = self.b.ins().iconst(types::I64, s);
                let r = self.call_rt(
                    RtSym::SparseDense,
                    &[types::I64; 4],
                    &[types::I64],
                    &[ctx, arg(0)?, n, sv],
                )?;
                let null = self.b.ins().icmp_imm_s(IntCC::Equal, r[0], 0);
                self.propagate_if(null);
                smallvec::smallvec![r[0], n]
            }
            _ => return Err(not_in_group(p, "a sparse tangent")),
        })
    }

    /// `frule`, `revfwd` and `revback`: a call of [`RULE_FN`], which finds or
    /// derives the rule at run time and returns its handle, negative on
    /// failure.
    fn prim_rule(
        &mut self,
        p: Prim,
        vals: &[Leaves],
        site: &mut SiteFn<'_, M>,
    ) -> Result<Leaves, CodegenError> {
        use Prim::*;
        let arg = |i: usize| first_leaf(p, vals, i);
        let kind = match p {
            Frule => RuleKind::Frule,
            Revfwd => RuleKind::Revfwd,
            Revback => RuleKind::Revback,
            _ => return Err(not_in_group(p, "a rule")),
        };
        let h = arg(0)?;
        let width = if p == Frule {
            arg(1)?
        } else {
            self.b.ins().iconst(types::I64, 0)
        };
        let s = site(self.c, None);
        let ctx = self.ctx();
        let k = self.b.ins().iconst(types::I64, kind.code());
        let sv = self.b.ins().iconst(types::I64, s);
        let r = self.call_import(
            RULE_FN,
            &[types::I64; 5],
            &[types::I64],
            &[ctx, k, h, width, sv],
        )?;
        let bad = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, r[0], 0);
        self.propagate_if(bad);
        Ok(one(r[0]))
    }
}
