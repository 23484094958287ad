from common import check, tdiv, trem, wrap, I64_MAX


def divrem(a, b):
    return (tdiv(a, b), trem(a, b))


def signs(a, b):
    out = []
    for x, y in ((a, b), (-a, b), (a, -b), (-a, -b)):
        out += [tdiv(x, y), trem(x, y)]
    return out


def min_rem(d):
    mn = wrap(I64_MAX + 1)
    return (trem(mn, d), tdiv(mn, 2))


check(__file__, {"divrem": divrem, "signs": signs, "min_rem": min_rem})
