from common import check


def piecewise(x):
    if x < -1.0:
        return 2.0 * x + 1.0
    if x < 1.0:
        return x * x - 2.0
    return 3.0 - x / 2.0


def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def abs_branch(x):
    return -x if x < 0.0 else x


def piece_sum(lo, step, n):
    acc = 0.0
    for i in range(n):
        x = lo + float(i) * step
        acc = acc + abs_branch(clamp(piecewise(x), -2.0, 2.0))
    return acc


check(__file__, {"piecewise": piecewise, "clamp": clamp, "abs_branch": abs_branch,
                 "piece_sum": piece_sum})
