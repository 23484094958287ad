from common import check


def cmp(a, b):
    return (a < b, a <= b, a > b, a >= b, a == b, a != b)


def bools(p, q):
    return (p == q, p != q, (not p) or q, p and q)


def positive_or_nan(x):
    if x <= 0.0:
        return -1
    return 1 if x > 0.0 else 0


check(__file__, {"cmp": cmp, "bools": bools, "positive_or_nan": positive_or_nan})
