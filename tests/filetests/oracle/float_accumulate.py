from common import check


def tenths(n):
    s = 0.0
    for _ in range(n):
        s = s + 0.1
    return s


def kahan(x):
    s, c = 0.0, 0.0
    for v in x:
        y = v - c
        t = s + y
        c = (t - s) - y
        s = t
    return s


check(__file__, {"tenths": tenths, "kahan": kahan})
