"""Generates the constants of irad_kernels::math's sin, cos and tan
(kernels/src/math/trig.rs) with mpmath at 300 bits and prints them as Rust
literals: the table of sin and cos at j pi/64, the parts of pi/64 for the
reduction, the bits of 2/pi for the reduction of large arguments, and the two
polynomials, with their errors.

Run: python3 kernels/tests/trig_table.py  (needs mpmath)

- TRIG_TABLE[j] = [S_hi, S_lo, C_hi, C_lo] for a = j pi/64, j in 0..128:
  S_hi the nearest double to sin(a), S_lo the nearest to the rest; C_hi
  cos(a) rounded to 26 significant bits (so C_hi times a 27-bit number is
  exact), C_lo the nearest double to the rest. Values are computed for the
  first quadrant and extended by symmetry, so the table is exactly odd and
  periodic (sin(pi) is exactly 0).
- SIN_GRID and COS_GRID, for |x| < 1.5 (x = i/32 + r, r exact): for i in
  -48..=48, at row i mod 128, [S_hi, S_lo, C_hi, C_lo] of sin at i/32 as
  above, and the same of cos (cos(a + r) = cos a + (-sin a) r + ...: the
  row is [cos a nearest, rest, -sin a rounded to 26 bits, rest]). The
  other rows are zeros (never read).
- Two splits of pi/64 for Cody and Waite's reduction: PIO64_1 and PIO64_2
  pi/64 rounded to 38 significant bits, then the rest rounded to 38 bits;
  PIO64_3 the next rest, rounded to a double (k times each of the first two
  is exact for |k| < 2^15); PIO64_M1, _M2, _M3 the same with 30 bits (exact
  for |k| < 2^23).
- The sine polynomial: (sin r - r) / r^3 = S(z), z = r^2, degree 2 in z; the
  cosine's: (cos r - 1 + z / 2) / z^2 = C(z), degree 2 (degree 1 would leave
  2^-61 in cos r - 1, 0.002 ulp more in the results); both interpolated at
  the Chebyshev points of z in [0, R^2], R = 0.0246 (just above pi/128, the
  largest |r| after reduction).
"""

import mpmath
from mpmath import mpf

mpmath.mp.prec = 300

PI = mpmath.pi
N = 128


def rust(v):
    """A double as the shortest literal that reads back to it."""
    s = repr(float(v))
    if "e" not in s and "." not in s and "n" not in s:
        s += ".0"
    return s


def round_sig(v, bits):
    """v rounded to `bits` significant bits."""
    if v == 0:
        return mpf(0)
    e = mpmath.floor(mpmath.log(abs(v), 2))
    scale = mpf(2) ** (bits - 1 - e)
    return mpmath.nint(v * scale) / scale


def first_quadrant():
    """sin(m pi/64) for m in 0..=32, as exact mpf values (0 and 1 exactly)."""
    vals = []
    for m in range(33):
        if m == 0:
            vals.append(mpf(0))
        elif m == 32:
            vals.append(mpf(1))
        else:
            vals.append(mpmath.sin(m * PI / 64))
    return vals


Q = first_quadrant()


def sin_j(j):
    """sin(j pi/64) by symmetry from the first quadrant."""
    j %= N
    q, m = divmod(j, 32)
    if q == 0:
        return Q[m]
    if q == 1:
        return Q[32 - m]
    if q == 2:
        return -Q[m]
    return -Q[32 - m]


def cos_j(j):
    return sin_j(j + 32)


def table():
    rows = []
    for j in range(N):
        s, c = sin_j(j), cos_j(j)
        s_hi = mpf(float(s))
        s_lo = float(s - s_hi)
        c_hi = round_sig(c, 26)
        assert float(c_hi) == c_hi
        c_lo = float(c - c_hi)
        rows.append((float(s_hi), s_lo, float(c_hi), c_lo))
    # Odd and periodic, exactly.
    for j in range(N):
        a, b = rows[j], rows[(N - j) % N]
        assert a[0] == -b[0] and a[1] == -b[1] and a[2] == b[2] and a[3] == b[3], j
    return rows


def grid():
    sin_rows = [(0.0, 0.0, 0.0, 0.0)] * N
    cos_rows = [(0.0, 0.0, 0.0, 0.0)] * N
    for i in range(-48, 49):
        a = mpf(i) / 32
        s, c = mpmath.sin(a), mpmath.cos(a)
        s_hi, c_hi = mpf(float(s)), mpf(float(c))
        s26, c26 = round_sig(s, 26), round_sig(c, 26)
        sin_rows[i % N] = (float(s_hi), float(s - s_hi), float(c26), float(c - c26))
        cos_rows[i % N] = (float(c_hi), float(c - c_hi), float(-s26), float(-(s - s26)))
    for i in range(-48, 49):
        a, b = sin_rows[i % N], sin_rows[-i % N]
        assert a[0] == -b[0] and a[1] == -b[1] and a[2] == b[2] and a[3] == b[3], i
        a, b = cos_rows[i % N], cos_rows[-i % N]
        assert a[0] == b[0] and a[1] == b[1] and a[2] == -b[2] and a[3] == -b[3], i
    return sin_rows, cos_rows


def pio64_parts(bits):
    c = PI / 64
    p1 = round_sig(c, bits)
    p2 = round_sig(c - p1, bits)
    p3 = mpf(float(c - p1 - p2))
    err = c - p1 - p2 - p3
    return p1, p2, p3, err


def two_over_pi_words(n):
    """The first 64 n bits of the fraction of 2/pi, as n 64-bit words."""
    v = 2 / PI
    with mpmath.workprec(64 * n + 64):
        v = 2 / mpmath.pi
        w = int(mpmath.floor(v * mpf(2) ** (64 * n)))
    return [(w >> (64 * (n - 1 - i))) & (2**64 - 1) for i in range(n)]


R = mpf("0.0246")


def fit(f, deg):
    """f interpolated at the Chebyshev points of [0, R^2]; coefficients in
    increasing degree, rounded to doubles, and the max error of the rounded
    polynomial (relative to |f|) on a fine grid."""
    a, b = mpf(0), R * R
    n = deg + 1
    nodes = [(a + b) / 2 + (b - a) / 2 * mpmath.cos((2 * i + 1) * PI / (2 * n)) for i in range(n)]
    vals = [f(z) for z in nodes]
    # Solve the Vandermonde system for the interpolant.
    m = mpmath.matrix([[z**k for k in range(n)] for z in nodes])
    coef = mpmath.lu_solve(m, mpmath.matrix(vals))
    coef = [float(coef[k]) for k in range(n)]
    worst = mpf(0)
    for i in range(2001):
        z = b * i / 2000
        p = mpf(0)
        for c in reversed(coef):
            p = p * z + mpf(c)
        fz = f(z)
        worst = max(worst, abs((p - fz) / fz))
    return coef, worst


def sin_q(z):
    if z == 0:
        return mpf(-1) / 6
    r = mpmath.sqrt(z)
    return (mpmath.sin(r) - r) / (r * z)


def cos_q(z):
    if z == 0:
        return mpf(1) / 24
    r = mpmath.sqrt(z)
    return (mpmath.cos(r) - 1 + z / 2) / (z * z)


def main():
    rows = table()
    print("// TRIG_TABLE")
    for s_hi, s_lo, c_hi, c_lo in rows:
        print("    [%s, %s, %s, %s]," % (rust(s_hi), rust(s_lo), rust(c_hi), rust(c_lo)))
    sin_rows, cos_rows = grid()
    for name, rows in (("SIN_GRID", sin_rows), ("COS_GRID", cos_rows)):
        print("// " + name)
        for r in rows:
            print("    [%s, %s, %s, %s]," % tuple(rust(v) for v in r))
    for bits, name in ((38, "PIO64_"), (30, "PIO64_M")):
        p1, p2, p3, err = pio64_parts(bits)
        assert float(p1) == p1 and float(p2) == p2
        print("// %s1 = %s" % (name, rust(p1)))
        print("// %s2 = %s" % (name, rust(p2)))
        print("// %s3 = %s" % (name, rust(p3)))
        print("// pi/64 - (p1 + p2 + p3) = %s (2^%.1f)" % (mpmath.nstr(err, 5), float(mpmath.log(abs(err), 2))))
    print("// INV_PIO64 = %s" % rust(64 / PI))
    c_hi = mpf(float(PI / 64))
    print("// PIO64_HI = %s, PIO64_LO = %s" % (rust(c_hi), rust(PI / 64 - c_hi)))
    words = two_over_pi_words(20)
    print("// TWO_OVER_PI")
    for i in range(0, len(words), 4):
        print("    " + " ".join("0x%016x," % w for w in words[i : i + 4]))
    for name, f, deg, scale in (("SIN_Q", sin_q, 2, R**2 / 6), ("COS_Q", cos_q, 2, R**4 / 24)):
        coef, worst = fit(f, deg)
        print("// %s = [%s]  max rel error 2^%.1f, in the function at R 2^%.1f" % (
            name, ", ".join(rust(c) for c in coef), float(mpmath.log(worst, 2)), float(mpmath.log(worst * scale, 2))))


main()
