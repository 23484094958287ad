from common import check, tdiv, trem, wrap, I64_MAX


def q(a, b):
    return tdiv(a, b, "%r = call idiv(%a, %b)")


def mean_rem(a, m):
    s = 0
    for v in a:
        s = wrap(s + trem(v, m, "%r = call irem("))
    return tdiv(s, len(a), "%mean = call idiv(")


def min_div(d):
    return tdiv(wrap(I64_MAX + 1), d, "%r = call idiv(%mn")


check(__file__, {"q": q, "mean_rem": mean_rem, "min_div": min_div})
