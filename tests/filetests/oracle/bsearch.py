import math
from common import check


def bsearch(a, x):
    lo, hi = 0, len(a)
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if a[mid] == x:
            return mid
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return -lo - 1


def isqrt(n):
    return math.isqrt(n)


check(__file__, {"bsearch": bsearch, "isqrt": isqrt})
