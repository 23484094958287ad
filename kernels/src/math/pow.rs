//! pow(x, y): irad's own, shared by the interpreter and compiled code
//! (through `irad-runtime`; `powi(x, n)` is `pow(x, n as f64)`), within 1
//! ulp of the exact result: 0.5088 ulp at most on 200 000 points against
//! mpmath, in every region of `kernels/tests/pow_reference.py` (whose first
//! 3 000 points are `kernels/tests/pow_reference.txt`, a test). Plain Rust
//! arithmetic without fused multiply-adds, so the same bits on every
//! machine and backend.
//!
//! Method: x^y = e^(y log x), with log x as a pair hi + lo accurate to about
//! 2^-68 relative (log's table and reduction, with log1p(r) = r - r^2/2 +
//! r^3 P(r) formed in pairs), y log x = th + tl by an exact product
//! (Dekker's, splitting both factors into 26 and 27 bits), and e^(th + tl)
//! by exp's table and polynomial with tl added to the reduced argument. An
//! error of 2^-68 in log x is an error of |y log x| 2^-68 <= 2^-58.5 in the
//! result (|y log x| < 746 whenever the result is finite and nonzero), so
//! the result is exp's (0.51 ulp) plus a few hundredths of an ulp.
//!
//! 1. log x: x = 2^k z, interval i of z, invc, logc_hi + logc_lo and r =
//!    z invc - 1 = r + r_err exactly, as in `log`. t1 = k LN2_HI + logc_hi
//!    is exact; s1 = t1 + r exactly with its error e1 (Fast2Sum: |t1| > |r|
//!    unless t1 = 0); r = ra + rb with ra its leading 26 bits, so -ra^2/2 is
//!    exact and s2 = s1 - ra^2/2 exactly with its error e2 (Fast2Sum:
//!    ra^2/2 < 2^-10 |s1|); -r^2/2 + ra^2/2 = -rb (r + ra)/2; hi = s2 and lo
//!    gathers the errors, the low parts of k ln2 and log c, r_err, that
//!    term and r^3 P(r) (`POW_LOG_P`, degree 4, relative error 2^-50.3, so
//!    2^-70 of r).
//! 2. y hi = th + e (exactly but for the rounding of the smallest partial
//!    product, under 2^-100 of th), tl = e + y lo.
//! 3. e^(th + tl): k = round(th 128 / ln2), r = (th - k L_hi) - k L_lo + tl,
//!    and exp's steps 3 to 5 (`exp_scale`): overflow to inf, subnormal
//!    results rounded once.
//!
//! Special cases (IEEE 754 and C99 Annex F), tested before anything else
//! only when x is not a positive normal number, |y| is outside [2^-65,
//! 2^63), or y is a power of two (or zero, inf, NaN):
//! - pow(x, +-0) = 1 for every x, NaN too; pow(1, y) = 1 for every y, NaN
//!   too; otherwise a NaN operand gives NaN;
//! - pow(x, 1) = x, pow(x, 2) = x * x and pow(x, -1) = 1 / x exactly (so
//!   compiled code may compute a constant exponent among these inline);
//! - y = +-inf: 1 for x = -1; +0 or +inf by whether |x| < 1 and the sign of
//!   y (|x| < 1 and y = +inf gives +0);
//! - x = +-0: y < 0 gives +inf (-inf for -0 and an odd integer y); y > 0
//!   gives +0 (x itself for an odd integer y);
//! - x = +inf: +inf for y > 0, +0 for y < 0; x = -inf: -inf or -0 for an
//!   odd integer y, else +inf or +0;
//! - x < 0 finite: NaN unless y is an integer; then (-1)^y |x|^y;
//! - |y| >= 2^63 (an even integer) with |x| != 1: +0 or +inf (|y log x| is
//!   then above 1024); |y| < 2^-65: 1 (|y log x| < 2^-55).

use super::{
    EXP_MIN, INF_BITS, LN2_LO, LOG_SUBNORMAL_SCALE, MIN_NORMAL_BITS, exp_core_tail, exp_scale,
    lead26, log_reduce,
};

/// (log1p(r) - r + r^2/2) / r^3 on |r| <= 0.001955, interpolated at the
/// Chebyshev points (mpmath, 200 bits; coefficients in increasing degree;
/// relative error 2^-50.3 once rounded).
const POW_LOG_P: [f64; 5] = [
    0.3333333333333333,
    -0.24999999999942937,
    0.19999999999949278,
    -0.1666672638598989,
    0.1428576736956084,
];

/// The exponent fields of 2^-65 and 2^63: the fast path's range of |y|.
const Y_EXP_LO: u64 = 1023 - 65;
/// See [`Y_EXP_LO`].
const Y_EXP_HI: u64 = 1023 + 63;
/// Below this (-746), e^t rounds to 0; from 710 on, it overflows.
const T_MAX: f64 = 710.0;

/// log x as a pair (hi, lo), relative error about 2^-68, for the bits `ix`
/// of a positive normal x, or of a subnormal one scaled by 2^52 with 52
/// taken off its exponent field (step 1 of the module header).
#[inline(always)]
fn log_pair(ix: u64) -> (f64, f64) {
    let (s1, e1, r, r_err, kd, logc_lo) = log_reduce(ix);
    let ra = lead26(r);
    let rb = (r - ra) + r_err;
    let hra2 = -0.5 * (ra * ra);
    let s2 = s1 + hra2;
    let e2 = (s1 - s2) + hra2;
    let r2 = r * r;
    let p = (POW_LOG_P[0] + r * POW_LOG_P[1])
        + r2 * ((POW_LOG_P[2] + r * POW_LOG_P[3]) + r2 * POW_LOG_P[4]);
    let lo =
        ((kd * LN2_LO + logc_lo) + ((e1 + e2) + r_err)) + ((r2 * r) * p - 0.5 * (rb * (r + ra)));
    (s2, lo)
}

/// e^(th + tl) for |tl| below an ulp or so of th (step 3 of the module
/// header): +inf from th = 710 on, 0 at and below -746.
#[inline(always)]
fn exp_pair(th: f64, tl: f64) -> f64 {
    if !(th > EXP_MIN && th < T_MAX) {
        return if th > 0.0 { f64::INFINITY } else { 0.0 };
    }
    let (t_hi, q, k) = exp_core_tail(th, Some(tl));
    exp_scale(t_hi, q, k)
}

/// |x|^y for the bits `ix` of |x| (as [`log_pair`] takes them) and y with
/// 2^-65 <= |y| < 2^63, negated when `neg`.
#[inline(always)]
fn pow_core(ix: u64, y: f64, neg: bool) -> f64 {
    let (hi, lo) = log_pair(ix);
    // y hi = th + e exactly (Dekker's product with 26-bit leading parts).
    let (yh, hh) = (lead26(y), lead26(hi));
    let (yl, hl) = (y - yh, hi - hh);
    let th = y * hi;
    let e = (((yh * hh - th) + yh * hl) + yl * hh) + yl * hl;
    let v = exp_pair(th, e + y * lo);
    if neg { -v } else { v }
}

/// x^y, within 1 ulp (module header); the interpreter's and compiled
/// code's `pow` (and `powi(x, n)`, which is `pow(x, n as f64)`).
#[inline]
pub fn pow(x: f64, y: f64) -> f64 {
    let (ix, iy) = (x.to_bits(), y.to_bits());
    let ey = (iy >> 52) & 0x7ff;
    if ix.wrapping_sub(MIN_NORMAL_BITS) >= INF_BITS - MIN_NORMAL_BITS
        || ey.wrapping_sub(Y_EXP_LO) >= Y_EXP_HI - Y_EXP_LO
        || iy << 12 == 0
    {
        return pow_special(x, y);
    }
    pow_core(ix, y, false)
}

/// Whether y (finite) is an integer, and whether an odd one: `(int, odd)`.
fn integer_kind(y: f64) -> (bool, bool) {
    let e = ((y.to_bits() >> 52) & 0x7ff) as i64 - 1023;
    if e < 0 {
        // |y| < 1: an integer only if zero.
        return (y == 0.0, false);
    }
    if e >= 53 {
        // Every double from 2^53 on is an even integer.
        return (true, false);
    }
    let frac_bits = 52 - e;
    let m = y.to_bits() & ((1u64 << 52) - 1);
    let int = m & ((1u64 << frac_bits) - 1) == 0;
    // The units bit: the implicit one when e = 0, else bit frac_bits of m.
    let odd = int
        && (if e == 0 {
            true
        } else {
            (m >> frac_bits) & 1 == 1
        });
    (int, odd)
}

/// The cases [`pow`]'s fast path leaves out (module header, "Special
/// cases").
#[cold]
#[inline(never)]
fn pow_special(x: f64, y: f64) -> f64 {
    if y == 0.0 || x == 1.0 {
        return 1.0;
    }
    if x.is_nan() || y.is_nan() {
        return x + y;
    }
    if y == 1.0 {
        return x;
    }
    if y == 2.0 {
        return x * x;
    }
    if y == -1.0 {
        return 1.0 / x;
    }
    let ax = x.abs();
    if y.is_infinite() {
        return if ax == 1.0 {
            1.0
        } else if (ax < 1.0) == (y > 0.0) {
            0.0
        } else {
            f64::INFINITY
        };
    }
    let (int, odd) = integer_kind(y);
    if x == 0.0 || x.is_infinite() {
        // 0^y and inf^y: zero or infinity by the sign of y (and of the
        // exponent of x), with x's sign for an odd integer y.
        let big = (x == 0.0) == (y < 0.0);
        let v = if big { f64::INFINITY } else { 0.0 };
        return if odd && x.is_sign_negative() { -v } else { v };
    }
    if x < 0.0 && !int {
        return f64::NAN;
    }
    let neg = x < 0.0 && odd;
    if ax == 1.0 {
        return if neg { -1.0 } else { 1.0 };
    }
    let ay = y.abs();
    if ay >= 9.223_372_036_854_776e18 {
        // |y| >= 2^63, an even integer: |y log x| > 1024.
        return if (ax < 1.0) == (y > 0.0) {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if ay < 2.710505431213761e-20 {
        // |y| < 2^-65 (not an integer, so x > 0): |y log x| < 2^-55.
        return 1.0;
    }
    let ix = if ax < f64::MIN_POSITIVE {
        (ax * LOG_SUBNORMAL_SCALE).to_bits().wrapping_sub(52 << 52)
    } else {
        ax.to_bits()
    };
    pow_core(ix, y, neg)
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{Rng, check_reference2, ulps};
    use super::*;

    /// pow against `kernels/tests/pow_reference.txt` (typical arguments, x
    /// near 1 with large |y|, results over the whole range, negative x with
    /// integer y, exact integer powers, subnormal results and arguments,
    /// results near overflow, tiny y): within 0.51 ulp (0.5088 is the
    /// largest seen on 200 000 points, of which 140 are not correctly
    /// rounded; the libm crate's pow is off by up to 527 ulps on them, for x
    /// near 1 and |y| near 1e9).
    #[test]
    fn pow_is_within_an_ulp_of_the_exact_value() {
        check_reference2(pow, include_str!("../../tests/pow_reference.txt"), 0.51);
    }

    #[test]
    fn pow_special_values() {
        let (inf, nan) = (f64::INFINITY, f64::NAN);
        let same = |a: f64, b: f64| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        // (x, y, pow(x, y)), as C99 Annex F fixes them.
        let cases = [
            (nan, 0.0, 1.0),
            (nan, -0.0, 1.0),
            (inf, 0.0, 1.0),
            (1.0, nan, 1.0),
            (1.0, inf, 1.0),
            (1.0, -inf, 1.0),
            (2.0, nan, nan),
            (nan, 1.0, nan),
            (-1.0, inf, 1.0),
            (-1.0, -inf, 1.0),
            (0.5, inf, 0.0),
            (0.5, -inf, inf),
            (-2.0, inf, inf),
            (-2.0, -inf, 0.0),
            (0.0, -3.0, inf),
            (-0.0, -3.0, -inf),
            (-0.0, -2.0, inf),
            (-0.0, -0.5, inf),
            (-0.0, -inf, inf),
            (0.0, 3.0, 0.0),
            (-0.0, 3.0, -0.0),
            (-0.0, 2.0, 0.0),
            (-0.0, 0.5, 0.0),
            (-0.0, inf, 0.0),
            (inf, 0.5, inf),
            (inf, -0.5, 0.0),
            (-inf, 3.0, -inf),
            (-inf, 2.0, inf),
            (-inf, 0.5, inf),
            (-inf, -3.0, -0.0),
            (-inf, -2.0, 0.0),
            (-2.0, 0.5, nan),
            (-8.0, 1.0 / 3.0, nan),
            (-2.0, 3.0, -8.0),
            (-2.0, -3.0, -0.125),
            (-2.0, 4.0, 16.0),
            (-1.0, 1e300, 1.0),
            (-1.0, 3.0, -1.0),
            (-0.5, 1e300, 0.0),
            (-3.0, 1e300, inf),
            (0.5, -1e300, inf),
            (1.0000000000000002, 1e19, inf),
            (0.9999999999999999, 1e19, 0.0),
            (2.0, 1e-300, 1.0),
            (2.0, -1e-300, 1.0),
            (2.0, 1024.0, inf),
            (2.0, 1023.0, 8.98846567431158e307),
            (2.0, -1074.0, 5e-324),
            (2.0, -1075.0, 0.0),
            (-2.0, -1075.0, -0.0),
            (2.0, 0.5, std::f64::consts::SQRT_2),
            (10.0, 22.0, 1e22),
            (10.0, -5.0, 1e-5),
            (5e-324, 0.5, 2.2227587494850775e-162),
            (5e-324, -1.0, inf),
        ];
        for (x, y, want) in cases {
            assert!(
                same(pow(x, y), want),
                "pow({x:e}, {y:e}) = {:e}, not {want:e}",
                pow(x, y)
            );
        }
    }

    /// pow(x, 2), pow(x, 1) and pow(x, -1) are x * x, x and 1 / x, bit for
    /// bit (compiled code relies on it); pow(x, 0.5) is within 1 ulp of
    /// sqrt(x), and integer powers of two are exact.
    #[test]
    fn pow_small_integer_exponents() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for i in 0..100_000 {
            let x = f64::from_bits(rng.bits());
            if x.is_nan() {
                continue;
            }
            assert_eq!(pow(x, 2.0).to_bits(), (x * x).to_bits(), "{x:e}");
            assert_eq!(pow(x, 1.0).to_bits(), x.to_bits(), "{x:e}");
            assert_eq!(pow(x, -1.0).to_bits(), (1.0 / x).to_bits(), "{x:e}");
            if x > 0.0 {
                assert!(ulps(pow(x, 0.5), x.sqrt()) <= 1.0, "{x:e}");
            }
            let k = (i % 2000) - 1000;
            assert_eq!(pow(2.0, f64::from(k)), 2.0f64.powi(k), "2^{k}");
        }
    }

    /// Against the platform's (glibc's, correctly rounded in all but rare
    /// cases) over typical, wide and near-1 arguments and negative x with
    /// integer y: never more than 1 ulp apart.
    #[test]
    fn pow_agrees_with_the_platform() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let mut worst: f64 = 0.0;
        for i in 0..300_000 {
            let (u, v) = (rng.unit(), rng.unit());
            let (x, y) = match i % 4 {
                0 => (0.1 + 9.9 * u, -5.0 + 10.0 * v),
                1 => {
                    let x = 2f64.powf(-1022.0 + 2046.0 * u);
                    (x, (-740.0 + 1445.0 * v) / x.ln())
                }
                2 => (1.0 + (u - 0.5) * 1e-6, (v - 0.5) * 2e9),
                _ => (-(0.5 + 4.0 * u), ((v - 0.5) * 200.0).round()),
            };
            let (got, plat) = (pow(x, y), x.powf(y));
            worst = worst.max(ulps(got, plat));
            assert!(
                ulps(got, plat) <= 1.0,
                "pow({x:e}, {y:e}) = {got:e}, platform {plat:e}"
            );
        }
        assert!(worst > 0.0, "the comparison compared nothing");
    }

    /// log x as the pair of step 1 is within 2^-67 of log x, relative, on
    /// the powers of two (log 2^k = k ln2, known to 2^-106 as a pair), and
    /// hi + lo is within an ulp of log's result everywhere.
    #[test]
    fn log_pair_is_accurate() {
        use super::super::two_product;
        const LN2_TAIL: f64 = 2.3190468138462996e-17;
        for k in -1022i32..=1023 {
            let (hi, lo) = log_pair(2f64.powi(k).to_bits());
            let kd = f64::from(k);
            let (ph, pl) = two_product(kd, std::f64::consts::LN_2);
            let err = (hi - ph) + ((lo - pl) - kd * LN2_TAIL);
            let bound = 2f64.powi(-67) * (kd * std::f64::consts::LN_2).abs();
            assert!(err.abs() <= bound, "2^{k}: {hi:e} + {lo:e}, error {err:e}");
        }
        let mut rng = Rng(0x1234_5678_9abc_def1);
        for _ in 0..100_000 {
            let x = f64::from_bits(rng.bits() >> 2) + 1e-300;
            let (hi, lo) = log_pair(x.to_bits());
            assert!(ulps(hi + lo, super::super::log(x)) <= 1.0, "{x:e}");
        }
    }
}
