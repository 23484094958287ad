from common import check


def rsum(x, i):
    return 0.0 if i >= len(x) else x[i] + rsum(x, i + 1)


def rmax(x, lo, hi):
    if hi - lo == 1:
        return x[lo]
    mid = lo + (hi - lo) // 2
    return max(rmax(x, lo, mid), rmax(x, mid, hi))


check(__file__, {"rsum": rsum, "rmax": rmax})
