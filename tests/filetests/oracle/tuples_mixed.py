import math
from common import check, tdiv, trem


def divmod_(a, b):
    return (tdiv(a, b), trem(a, b))


def stats(x):
    s, pos, any_nan = 0.0, 0, False
    for v in x:
        s = s + v
        if v > 0.0:
            pos += 1
        any_nan = any_nan or math.isnan(v)
    return (s, pos, any_nan)


def score(x):
    s, p, bad = stats(x)
    return -1.0 if bad else s * float(p)


check(__file__, {"divmod": divmod_, "stats": stats, "score": score})
