from common import check, fptosi, wrap


def to_int(x):
    return fptosi(x)


def to_float(n):
    return float(n)


def both(x, n):
    a = fptosi(x)
    b = fptosi(-x)
    return (a, b, float(n), float(wrap(a + n)))


check(__file__, {"to_int": to_int, "to_float": to_float, "both": both})
