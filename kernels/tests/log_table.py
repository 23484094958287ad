"""Generates the constants of irad_kernels::math::log (kernels/src/math.rs):
LOG_TABLE, LN2_HI, LN2_LO and LOG_Q, with mpmath at 200 bits, and prints them
as Rust literals. Also reports the largest |r| and the polynomial's error.

Run: python3 kernels/tests/log_table.py  (needs mpmath)

The reduction (see math.rs): x = 2^k z with z in [OFF, 2 OFF) as bits,
OFF = 0x3fe6980000000000; the table index i is bits 44..51 of
bits(x) - OFF, so interval i holds the z whose bits are in
[OFF + i 2^44, OFF + (i + 1) 2^44); interval 150 holds 1.0 in its middle
(bits-wise) and gets invc = 1 exactly.
"""

import struct
import mpmath
from mpmath import mpf

mpmath.mp.prec = 200

OFF = 0x3FE6980000000000
N = 256
SHIFT = 44
ONE = 150


def from_bits(b):
    return struct.unpack("<d", struct.pack("<Q", b))[0]


def rust(v):
    """A double as the shortest literal that reads back to it."""
    s = repr(float(v))
    if "e" not in s and "." not in s:
        s += ".0"
    return s


def round_sig(v, bits):
    """v rounded to `bits` significant bits (v > 0)."""
    e = mpmath.floor(mpmath.log(v, 2))
    scale = mpf(2) ** (bits - 1 - e)
    return mpmath.nint(v * scale) / scale


def round_multiple(v, q):
    return mpmath.nint(v / q) * q


q42 = mpf(2) ** -42
ln2 = mpmath.log(2)
ln2_hi = round_multiple(ln2, q42)
ln2_lo = float(ln2 - ln2_hi)

rows = []
rmax = mpf(0)
for i in range(N):
    a = mpf(from_bits(OFF + i * 2**SHIFT))
    b = mpf(from_bits(OFF + (i + 1) * 2**SHIFT))
    if i == ONE:
        assert a < 1 < b
        invc = mpf(1)
    else:
        invc = round_sig(2 / (a + b), 21)
    assert float(invc) == invc
    logc = -mpmath.log(invc)
    hi = round_multiple(logc, q42)
    lo = float(logc - hi)
    assert float(hi) == hi
    rows.append((float(invc), float(hi), lo))
    rmax = max(rmax, abs(a * invc - 1), abs(b * invc - 1))

# Q(r) = (log1p(r) - r) / r^2 on [-R, R], interpolated at Chebyshev points.
R = mpf(0.001955)
assert rmax < R
DEG = 4


def qf(r):
    if abs(r) < mpf(10) ** -30:
        return mpf(-0.5) + r / 3 - r**2 / 4
    return (mpmath.log1p(r) - r) / r**2


nodes = [R * mpmath.cos(mpmath.pi * (j + mpf(0.5)) / (DEG + 1)) for j in range(DEG + 1)]
A = mpmath.matrix([[t**p for p in range(DEG + 1)] for t in nodes])
y = mpmath.matrix([qf(t) for t in nodes])
coef = mpmath.lu_solve(A, y)
coef = [float(c) for c in coef]
err = mpf(0)
for j in range(2001):
    t = -R + 2 * R * j / 2000
    p = mpf(0)
    for c in reversed(coef):
        p = p * t + mpf(c)
    err = max(err, abs(p - qf(t)))

print(f"// max |r| = {float(rmax):.6g}, Q's error on [-R, R] = {float(err):.3g} (2^{float(mpmath.log(err, 2)):.1f})")
print(f"pub const LN2_HI: f64 = {rust(float(ln2_hi))};")
print(f"pub const LN2_LO: f64 = {rust(ln2_lo)};")
print("const LOG_Q: [f64; %d] = [" % (DEG + 1))
for c in coef:
    print(f"    {rust(c)},")
print("];")
print(f"pub const LOG_TABLE: [[f64; 3]; {N}] = [")
for inv, hi, lo in rows:
    print(f"    [{rust(inv)}, {rust(hi)}, {rust(lo)}],")
print("];")
