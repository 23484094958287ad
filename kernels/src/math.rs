//! The math functions irad implements itself, shared by the reference
//! interpreter and compiled code (through `irad-runtime`), so the two agree
//! bit for bit; the others are the `libm` crate's (docs/ir.md, "Math").
//! [`tanh`] is described at its definition (within 0.75 ulp on the points
//! checked, `kernels/tests/tanh_reference.txt`).
//!
//! [`exp`]: table-driven (the method of Tang, 1989: x = k ln2 / 128 + r,
//! exp(x) = 2^(k / 128) * exp(r)), faster than `libm::exp` (whose rational
//! approximation divides) and within 1 ulp of the exact result: 0.51 ulp
//! at most over the points checked (the tests, and the reference values of
//! `kernels/tests/exp_reference.txt`, correctly rounded by mpmath at 200
//! bits). Written in plain Rust arithmetic without fused multiply-adds, so
//! it gives the same bits on every machine and in every backend.
//!
//! Method, with N = 128:
//! 1. k = round(x * N / ln2), by adding and subtracting 1.5 * 2^52;
//! 2. r = (x - k * L_hi) - k * L_lo, where L_hi + L_lo = ln2 / N and L_hi
//!    has 35 significant bits, so k * L_hi is exact for |k| < 2^18 (|x| <
//!    746 gives |k| < 137 800) and the first subtraction is exact; |r| <=
//!    ln2 / 256 (plus rounding);
//! 3. exp(r) - 1 = r + r^2 (1/2 + r (1/6 + r (1/24 + r / 120))), whose
//!    truncation error is below r^6 / 720 < 2^-60;
//! 4. 2^(j / N), j = k mod N, is a table of pairs (T_hi, T_lo) with T_hi
//!    the nearest double and T_lo the nearest double to the rest, so
//!    2^(j / N) exp(r) = T_hi + (T_lo + T_hi (exp(r) - 1)) with one
//!    rounding of consequence (the last addition): about 0.5 ulp;
//! 5. the result is scaled by 2^(k div N), exactly; a subnormal result is
//!    rounded once, to the subnormal grid (see `subnormal`).
//!
//! Outside (-746, 709.782712893384]: `inf` above, `0.0` below, NaN for NaN.

/// 2^(j / 128) for j in 0..128, as [nearest double, nearest double to the
/// rest]: values computed with mpmath at 200 bits. Compiled code reads this
/// table (through the runtime's `irad_rt_exp_table`) when it computes exp
/// inline, with the same constants and operations as [`exp`].
// Entry 64 is sqrt(2), written as the generated number like the others.
#[allow(clippy::approx_constant)]
pub const EXP_TABLE: [[f64; 2]; 128] = [
    [1.0, 0.0],
    [1.0054299011128027, 9.499186535455032e-17],
    [1.0108892860517005, -1.5234778603368577e-17],
    [1.016378314910953, -5.77217007319966e-17],
    [1.0218971486541166, 5.109225028973444e-17],
    [1.0274459491187637, -4.9560741746453704e-17],
    [1.0330248790212284, 7.600838874027088e-18],
    [1.0386341019613787, 5.996273788852511e-17],
    [1.0442737824274138, 8.551889705537965e-17],
    [1.0499440858006872, 5.592937848127003e-17],
    [1.0556451783605572, 1.759325738772092e-18],
    [1.061377227289262, -1.1973537085365658e-17],
    [1.0671404006768237, -7.899853966841582e-17],
    [1.0729348675259756, -3.839668843358824e-18],
    [1.0787607977571199, -6.656660436056593e-17],
    [1.0846183622133092, 3.166152845816346e-17],
    [1.0905077326652577, -3.046782079812471e-17],
    [1.0964290818163769, -5.919933484449316e-17],
    [1.102382583307841, 5.2660368715706944e-17],
    [1.1083684117236787, -8.786813845180527e-17],
    [1.1143867425958924, 1.0410278456845571e-16],
    [1.1204377524096067, -6.201085906554179e-17],
    [1.1265216186082418, 5.165856758795457e-17],
    [1.1326385195987192, 3.237356166738e-17],
    [1.1387886347566916, 8.912812676025408e-17],
    [1.1449721444318042, 4.6412898921700107e-17],
    [1.1511892299529827, 3.250710218863827e-17],
    [1.1574400736337511, -9.1238712311344e-17],
    [1.1637248587775775, 3.8292048369240935e-17],
    [1.1700437696832502, -1.8477442017900047e-18],
    [1.1763969916502812, 5.554203254218079e-17],
    [1.182784710984341, 1.542975430079076e-17],
    [1.189207115002721, 3.982015231465646e-17],
    [1.1956643920398273, 4.6166036704814814e-17],
    [1.202156731452703, 6.644981499252301e-17],
    [1.2086843236265816, -4.746725945228984e-17],
    [1.215247359980469, -7.712630692681488e-17],
    [1.2218460329727576, -1.0611021211402691e-16],
    [1.22848053610687, -1.89878163130253e-17],
    [1.2351510639369334, -1.0755244344307841e-16],
    [1.241857812073484, 4.658027591836937e-17],
    [1.2486009771892048, -8.261810999021964e-17],
    [1.255380757024691, -6.7113898212968784e-18],
    [1.2621973503942507, -3.0844648874738465e-17],
    [1.2690509571917332, 2.667932131342186e-18],
    [1.275941778396392, 9.91543024421429e-17],
    [1.2828700160787783, 1.713594918243561e-17],
    [1.2898358734066657, 8.949257530897592e-17],
    [1.2968395546510096, 2.5382502794888315e-17],
    [1.3038812651919358, 8.647675598267871e-17],
    [1.3109612115247644, -7.181536135519454e-17],
    [1.318079601266064, -5.4579558271491535e-17],
    [1.3252366431597413, -2.8587312100388614e-17],
    [1.3324325470831615, -5.101586630916744e-17],
    [1.339667524053303, 8.927282594831732e-17],
    [1.3469417862329458, 3.224065101254679e-17],
    [1.3542555469368927, 7.70094837980299e-17],
    [1.3616090206382248, 1.533787661270668e-18],
    [1.3690024229745905, 9.593797919118849e-17],
    [1.3764359707545302, -6.898588935871801e-17],
    [1.383909881963832, -6.770511658794786e-17],
    [1.3914243757719262, -4.9061748652889893e-17],
    [1.3989796725383112, -9.614213209051323e-17],
    [1.4065759938190154, 7.034914812136422e-18],
    [1.4142135623730951, -9.667293313452913e-17],
    [1.4218926021691656, -1.6077828915890244e-17],
    [1.42961333839197, -1.2031642489053655e-17],
    [1.4373759974489824, -4.2040340164675566e-17],
    [1.4451808069770467, -3.0237581349939873e-17],
    [1.4530279958490526, -5.779948609396106e-17],
    [1.460917794180647, -5.600377186075216e-17],
    [1.4688504333369818, 8.465882756533628e-17],
    [1.4768261459394993, -3.483994556892796e-17],
    [1.4848451658727524, 1.0780086764407481e-16],
    [1.4929077282912648, 1.4192920154284036e-17],
    [1.5010140696264256, -6.413767275790235e-17],
    [1.5091644275934228, -1.016455327754295e-16],
    [1.5173590411982147, -4.308699472043341e-17],
    [1.5255981507445384, -1.1024941712342561e-16],
    [1.533881997840956, 8.875226844438446e-17],
    [1.5422108254079407, 7.949834809697621e-17],
    [1.550584877685, -1.4600706590689385e-17],
    [1.559004400237837, 3.7812070533575275e-17],
    [1.567469639965553, -1.0352061768849722e-16],
    [1.5759808451078865, -1.0136916471278304e-17],
    [1.5845382652524937, -1.9337717034585703e-17],
    [1.593142151342267, -1.0094406542311964e-16],
    [1.6017927556826934, -6.054917453527784e-17],
    [1.6104903319492543, 2.4707192569797888e-17],
    [1.6192351351948637, 2.0941334154229092e-17],
    [1.6280274218573478, -6.712955084707084e-17],
    [1.6368674497669644, 7.698325071319876e-17],
    [1.645755478153965, -1.0125679913674773e-16],
    [1.6546917676561943, 9.643294303196029e-17],
    [1.6636765803267364, 5.8909926967131e-17],
    [1.6727101796415966, -5.476715964599563e-17],
    [1.681792830507429, 8.199010020581497e-17],
    [1.6909247992693053, -9.66967147439488e-17],
    [1.7001063537185235, -8.0237193703977e-18],
    [1.709337763100463, -9.868779456632931e-17],
    [1.718619298122478, -1.851380418263111e-17],
    [1.7279512309618377, -1.0750981861204642e-16],
    [1.7373338352737062, 3.164389299292957e-17],
    [1.746767386199169, -1.0752290483507515e-16],
    [1.7562521603732995, 2.960140695448873e-17],
    [1.7657884359332727, 9.461315018083268e-17],
    [1.7753764925265212, 6.429731796556572e-17],
    [1.785016611318935, 1.5330400121031314e-17],
    [1.7947090750031072, 1.8227458427912087e-17],
    [1.804454167806624, -5.177222408793318e-17],
    [1.8142521755003989, -9.969531538920349e-17],
    [1.8241033854070534, -1.0159627862277083e-16],
    [1.8340080864093424, 3.283107224245627e-17],
    [1.843966568958626, -5.939742026949965e-17],
    [1.8539791250833855, 9.761887490727594e-17],
    [1.864046048397789, 6.540912680620572e-17],
    [1.8741676341103, -6.122763413004143e-17],
    [1.8843441790323345, -8.226593125533711e-17],
    [1.8945759815869656, 3.4034035352165297e-17],
    [1.9048633418176741, 6.533857514718279e-17],
    [1.9152065613971474, -1.0619946056195963e-16],
    [1.925605943636125, -9.914963769693741e-17],
    [1.9360617934922943, 1.0332385960676326e-16],
    [1.9465744175792332, 6.811022349533877e-17],
    [1.9571441241754002, 8.960767791036668e-17],
    [1.9677712232331759, -1.0314928011531132e-16],
    [1.978456026387951, 4.0388753109278167e-17],
    [1.9891988469672663, 8.2051326383692e-18],
];

/// N / ln2, N = 128.
pub const INV_LN2_N: f64 = 184.6649652337873;
/// ln2 / N, its leading 35 bits.
pub const LN2_N_HI: f64 = 0.005415212347998022;
/// ln2 / N - LN2_N_HI, rounded.
pub const LN2_N_LO: f64 = 1.2655086083325438e-13;
/// 1.5 * 2^52: adding and subtracting it rounds to an integer (|z| < 2^51).
pub const SHIFT: f64 = 6755399441055744.0;
/// The largest x with a finite exp(x).
pub const EXP_MAX: f64 = 709.782712893384;
/// Below this, exp(x) rounds to 0.0 (it is below 2^-1076).
pub const EXP_MIN: f64 = -746.0;

/// 2^e for e in -1022..=1023, exactly.
fn pow2(e: i64) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// Steps 1 to 4 of the module header for `z` in (-746, 710): `(t_hi, q, k)`
/// with e^z = 2^(k div 128) (t_hi + q), q = t_lo + t_hi (e^r - 1) rounded.
/// Codegen's inline exp repeats these operations in this order.
#[inline(always)]
fn exp_core(z: f64) -> (f64, f64, i64) {
    let kd = (z * INV_LN2_N + SHIFT) - SHIFT;
    let r = (z - kd * LN2_N_HI) - kd * LN2_N_LO;
    let p = r + r * r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0))));
    // |kd| < 137 800: exact as an integer.
    let k = kd as i64;
    let [t_hi, t_lo] = EXP_TABLE[(k & 127) as usize];
    (t_hi, t_lo + t_hi * p, k)
}

/// e^x, within 1 ulp (module header). The interpreter calls it; compiled
/// code computes the same operations inline (codegen's `exp_inline`).
#[inline]
pub fn exp(x: f64) -> f64 {
    if !(x > EXP_MIN && x <= EXP_MAX) {
        return if x.is_nan() {
            x + x
        } else if x > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
    }
    let (t_hi, q, k) = exp_core(x);
    let y = t_hi + q;
    let e = k >> 7;
    if e > 1023 {
        // Only just below the overflow threshold: y < 1, so y 2^1024 is finite.
        y * pow2(1023) * 2.0
    } else if e < -1022 || (e == -1022 && y < 1.0) {
        subnormal(t_hi, q, e)
    } else {
        y * pow2(e)
    }
}

/// (t_hi + q) 2^e for a result below 2^-1022, rounded once, to the
/// subnormal grid. Scaled by 2^1022, the grid is that of [1, 2): the
/// scaled terms a and b are exact, 1 + a is split exactly into hi + lo (a
/// <= 1, so hi - 1 and lo are exact), and (hi + (lo + b)) is the one
/// rounding of consequence; subtracting 1 and scaling back are exact.
fn subnormal(t_hi: f64, q: f64, e: i64) -> f64 {
    // e + 1022 >= -55 because x > -746.
    let s = pow2(e + 1022);
    let (a, b) = (t_hi * s, q * s);
    let hi = 1.0 + a;
    let lo = (1.0 - hi) + a;
    ((hi + (lo + b)) - 1.0) * pow2(-1022)
}

/// tanh's polynomial on |x| < 0.55: tanh(x) = x + x (s Q(s)), s = x^2, Q of
/// degree 10 interpolating (tanh(x) - x) / x^3 at the Chebyshev points of
/// [0, 0.55^2] (mpmath, 200 bits; coefficients in increasing degree). With
/// the coefficients rounded, the polynomial's relative error is below
/// 2^-57 on the interval.
const TANH_Q: [f64; 11] = [
    -0.3333333333333333,
    0.13333333333332714,
    -0.053968253967434016,
    0.021869488493666944,
    -0.008863234397814355,
    0.003592110378689024,
    -0.001455661830100716,
    0.0005889360520074057,
    -0.0002346347410887237,
    8.511313685577672e-05,
    -2.060276537636634e-05,
];

/// tanh(x), within 1 ulp; the interpreter's and compiled code's `tanh`.
///
/// - |x| < 2^-28: x (the next term, x^3 / 3, is below half an ulp);
/// - |x| < 0.55: x + x (s Q(s)) with s = x^2 (`TANH_Q`): the correction
///   is at most a tenth of the result, so its rounding errors count a tenth;
/// - |x| < 22: (1 - E) / (1 + E) with E = e^(-2|x|) kept as a pair hi + lo
///   from exp's table and polynomial (relative error near 2^-60); numerator
///   and denominator are formed exactly as pairs (Fast2Sum, E < 1/3), and the
///   quotient (one division, for 1 / D) gets one correction step with an
///   exact product (Dekker), so the only rounding of consequence is the last;
/// - beyond: +-1 (tanh(22) is 1 - 1.6e-19); NaN gives NaN.
///
/// The sign is the argument's (odd function; `tanh(-0.0)` is `-0.0`).
#[inline]
pub fn tanh(x: f64) -> f64 {
    let a = x.abs();
    if x.is_nan() {
        return x + x;
    }
    if a >= 22.0 {
        return 1.0f64.copysign(x);
    }
    if a < 0.55 {
        if a < 3.725290298461914e-9 {
            return x;
        }
        let s = x * x;
        let mut q = TANH_Q[10];
        for &c in TANH_Q[..10].iter().rev() {
            q = q * s + c;
        }
        return x + x * (s * q);
    }
    // E = e^(-2a) = 2^e (t_hi + (t_lo + t_hi p)), -44 < -2a <= -1.1.
    let (t_hi, q, k) = exp_core(-2.0 * a);
    let scale = pow2(k >> 7);
    let (hi, lo) = (t_hi * scale, q * scale);
    // N = 1 - E and D = 1 + E as normalised pairs (|hi| < 1/3 and |lo| is
    // far below both sums, so each Fast2Sum is exact).
    let (nh, nl) = fast_two_sum(1.0, -hi);
    let (nh, nl) = fast_two_sum(nh, nl - lo);
    let (dh, dl) = fast_two_sum(1.0, hi);
    let (dh, dl) = fast_two_sum(dh, dl + lo);
    // q0 = nh (1 / dh), then q = q0 + (N - q0 D) (1 / dh) with q0 dh
    // exact: the remainder is small, so its own rounding errors do not
    // count; one division.
    let inv = 1.0 / dh;
    let q0 = nh * inv;
    let (ph, pl) = two_product(q0, dh);
    let rem = (((nh - ph) - pl) + nl) - q0 * dl;
    (q0 + rem * inv).copysign(x)
}

/// a + b = s + e exactly, for |a| >= |b| (or a = 0).
#[inline]
fn fast_two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    (s, b - (s - a))
}

/// The exact product a b = hi + lo (Dekker, by Veltkamp splitting; no
/// fused multiply-add, so the same on every machine). For |a|, |b| well
/// inside the normal range.
#[inline]
fn two_product(a: f64, b: f64) -> (f64, f64) {
    const SPLIT: f64 = 134217729.0; // 2^27 + 1
    let split = |v: f64| {
        let c = SPLIT * v;
        let h = c - (c - v);
        (h, v - h)
    };
    let (ah, al) = split(a);
    let (bh, bl) = split(b);
    let hi = a * b;
    let lo = ((ah * bh - hi) + ah * bl + al * bh) + al * bl;
    (hi, lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The spacing of doubles at `w` (the smallest subnormal for 0 and the
    /// subnormals).
    fn ulp_of(w: f64) -> f64 {
        if w == 0.0 || w.is_subnormal() {
            f64::from_bits(1)
        } else {
            let u = w.abs();
            f64::from_bits(u.to_bits() + 1) - u
        }
    }

    /// The distance in ulps (of `want`) between `got` and `want`; 0 when
    /// equal, NaNs equal each other.
    fn ulps(got: f64, want: f64) -> f64 {
        if got == want || (got.is_nan() && want.is_nan()) {
            return 0.0;
        }
        ((got - want) / ulp_of(want)).abs()
    }

    #[test]
    fn exp_special_values() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-0.0), 1.0);
        assert_eq!(exp(1.0), std::f64::consts::E);
        assert_eq!(exp(f64::INFINITY), f64::INFINITY);
        assert_eq!(exp(f64::NEG_INFINITY), 0.0);
        assert!(exp(f64::NAN).is_nan());
        assert_eq!(exp(EXP_MAX), 1.7976931348622732e308);
        assert_eq!(exp(f64::from_bits(EXP_MAX.to_bits() + 1)), f64::INFINITY);
        assert_eq!(exp(1000.0), f64::INFINITY);
        assert_eq!(exp(-1000.0), 0.0);
        // The smallest subnormal, and the last x that rounds to it.
        assert_eq!(exp(-744.4400719213812), f64::from_bits(1));
        assert_eq!(exp(-745.1332191019411), f64::from_bits(1));
        assert_eq!(exp(-745.1332191019412), 0.0);
        assert_eq!(exp(1e-300), 1.0);
        assert_eq!(exp(-1e-300), 1.0);
    }

    /// Against the platform's exp (glibc: within about 0.51 ulp itself) and
    /// the libm crate's, over the whole range: never more than 1 ulp apart.
    #[test]
    fn exp_agrees_with_the_platform_and_libm() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut worst: f64 = 0.0;
        for i in 0..400_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let u = (seed >> 11) as f64 / (1u64 << 53) as f64;
            let x = match i % 4 {
                0 => EXP_MIN + u * (EXP_MAX - EXP_MIN),
                1 => (u - 0.5) * 20.0,
                2 => (u - 0.5) * 1e-3,
                _ => -708.0 - u * 38.0,
            };
            let got = exp(x);
            worst = worst.max(ulps(got, x.exp()));
            assert!(
                ulps(got, x.exp()) <= 1.0,
                "exp({x:e}) = {got:e}, platform {:e}",
                x.exp()
            );
            assert!(
                ulps(got, libm::exp(x)) <= 1.0,
                "exp({x:e}) = {got:e}, libm {:e}",
                libm::exp(x)
            );
        }
        assert!(worst > 0.0, "the comparison compared nothing");
    }

    /// Checks `f` against the exact values, as mpmath (200 bits) gives
    /// them: `text` has one line per point, x and its correctly rounded
    /// f(x) as hex bits, and (exact - rounded) in ulps of the rounded value.
    /// Returns the largest error in ulps.
    fn check_reference(f: fn(f64) -> f64, text: &str, bound: f64) -> f64 {
        let bits = |w: &str| u64::from_str_radix(w, 16).map(f64::from_bits);
        let mut n = 0;
        let mut worst: f64 = 0.0;
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let words: Vec<&str> = line.split_whitespace().collect();
            let [x, want, exact_off] = words[..] else {
                panic!("malformed line {line:?}");
            };
            let (Ok(x), Ok(want), Ok(exact_off)) = (bits(x), bits(want), exact_off.parse::<f64>())
            else {
                panic!("malformed line {line:?}");
            };
            let got = f(x);
            let err = ((got - want) / ulp_of(want) - exact_off).abs();
            worst = worst.max(err);
            assert!(
                err <= bound,
                "f({x:e}) = {got:e}: {err} ulp from the exact value"
            );
            n += 1;
        }
        assert!(n >= 2000, "only {n} reference values");
        assert!(worst > 0.0, "the comparison compared nothing");
        worst
    }

    /// exp against `kernels/tests/exp_reference.txt`: within 0.52 ulp.
    #[test]
    fn exp_is_within_an_ulp_of_the_exact_value() {
        check_reference(exp, include_str!("../tests/exp_reference.txt"), 0.52);
    }

    /// tanh against `kernels/tests/tanh_reference.txt` (both signs, the
    /// polynomial's interval and its edge, the pair quotient, tiny and
    /// saturating arguments): within 0.8 ulp (0.75 is the largest seen on
    /// 200 000 points).
    #[test]
    fn tanh_is_within_an_ulp_of_the_exact_value() {
        check_reference(tanh, include_str!("../tests/tanh_reference.txt"), 0.8);
    }

    #[test]
    fn tanh_special_values() {
        assert_eq!(tanh(0.0).to_bits(), 0.0f64.to_bits());
        assert_eq!(tanh(-0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(tanh(f64::INFINITY), 1.0);
        assert_eq!(tanh(f64::NEG_INFINITY), -1.0);
        assert!(tanh(f64::NAN).is_nan());
        assert_eq!(tanh(22.0), 1.0);
        assert_eq!(tanh(-30.0), -1.0);
        assert_eq!(tanh(1e-300), 1e-300);
        assert_eq!(tanh(-5e-324), -5e-324);
        // Odd, on both sides of each region's edge.
        for x in [
            3.7e-9, 3.8e-9, 0.5499999, 0.55, 0.5500001, 21.99, 19.0, 1.0, 7.5,
        ] {
            assert_eq!(tanh(-x).to_bits(), (-tanh(x)).to_bits(), "{x}");
            assert!((tanh(x) - x.tanh()).abs() <= 2.0 * ulp_of(x.tanh()), "{x}");
        }
    }
}
