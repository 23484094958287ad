//! What the math functions' tests share: ulps, the reference files
//! written by the mpmath scripts under `kernels/tests/`, and a small
//! deterministic generator of arguments. Test-only.

/// The spacing of doubles at `w`: the gap above |w| (the smallest
/// subnormal for 0 and the subnormals; the gap below for the largest
/// double).
pub(super) fn ulp_of(w: f64) -> f64 {
    let u = w.abs();
    if u == 0.0 || w.is_subnormal() {
        f64::from_bits(1)
    } else if u == f64::MAX {
        u - f64::from_bits(u.to_bits() - 1)
    } else {
        f64::from_bits(u.to_bits() + 1) - u
    }
}

/// The distance in ulps (of `want`) between `got` and `want`; 0 when
/// equal, NaNs equal each other, infinite when only one is NaN or
/// infinite.
pub(super) fn ulps(got: f64, want: f64) -> f64 {
    if got == want || (got.is_nan() && want.is_nan()) {
        return 0.0;
    }
    if got.is_nan() || want.is_nan() || got.is_infinite() || want.is_infinite() {
        return f64::INFINITY;
    }
    ((got - want) / ulp_of(want)).abs()
}

/// The error in ulps of `got` against the exact value, given as its
/// correctly rounded `want` and (exact - want) in ulps of `want`.
fn error(got: f64, want: f64, exact_off: f64) -> f64 {
    if got == want || (got.is_nan() && want.is_nan()) {
        exact_off.abs()
    } else if got.is_nan() || want.is_nan() || got.is_infinite() || want.is_infinite() {
        f64::INFINITY
    } else {
        ((got - want) / ulp_of(want) - exact_off).abs()
    }
}

/// The words of a reference line: hex bits, then (exact - rounded) in ulps.
/// Panics on a malformed line (the files are the repository's own).
fn parse_line<const N: usize>(line: &str) -> ([f64; N], f64) {
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words.len(), N + 1, "malformed line {line:?}");
    let mut v = [0.0; N];
    for (slot, w) in v.iter_mut().zip(&words) {
        let b = u64::from_str_radix(w, 16);
        assert!(b.is_ok(), "malformed line {line:?}");
        *slot = f64::from_bits(b.unwrap_or(0));
    }
    let off = words[N].parse::<f64>();
    assert!(off.is_ok(), "malformed line {line:?}");
    (v, off.unwrap_or(0.0))
}

/// Checks `f` against the exact values, as mpmath gives them: `text` has
/// one line per point, x and its correctly rounded f(x) as hex bits, and
/// (exact - rounded) in ulps of the rounded value. Returns the largest
/// error in ulps, asserting that it is at most `bound` and that at least
/// 2000 points were read.
pub(super) fn check_reference(f: fn(f64) -> f64, text: &str, bound: f64) -> f64 {
    let mut n = 0;
    let mut worst: f64 = 0.0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let ([x, want], off) = parse_line::<2>(line);
        let got = f(x);
        let err = error(got, want, off);
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

/// [`check_reference`] for a function of two arguments (lines of x, y,
/// the correctly rounded f(x, y), and the offset).
pub(super) fn check_reference2(f: fn(f64, f64) -> f64, text: &str, bound: f64) -> f64 {
    let mut n = 0;
    let mut worst: f64 = 0.0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let ([x, y, want], off) = parse_line::<3>(line);
        let got = f(x, y);
        let err = error(got, want, off);
        worst = worst.max(err);
        assert!(
            err <= bound,
            "f({x:e}, {y:e}) = {got:e}: {err} ulp from the exact value"
        );
        n += 1;
    }
    assert!(n >= 2000, "only {n} reference values");
    assert!(worst > 0.0, "the comparison compared nothing");
    worst
}

/// xorshift64: uniform doubles in [0, 1) and raw bits, deterministic.
pub(super) struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn bits(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.bits() >> 11) as f64 / (1u64 << 53) as f64
    }
}
