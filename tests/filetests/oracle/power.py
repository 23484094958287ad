from common import check, wrap, tdiv, trem


def ipow(b, e):
    if e == 0:
        return 1
    half = ipow(b, tdiv(e, 2))
    sq = wrap(half * half)
    return wrap(sq * b) if trem(e, 2) == 1 else sq


def fpow(x, n):
    if n < 0:
        return 1.0 / fpow(x, -n)
    if n == 0:
        return 1.0
    half = fpow(x, tdiv(n, 2))
    sq = half * half
    return sq * x if trem(n, 2) != 0 else sq


check(__file__, {"ipow": ipow, "fpow": fpow})
