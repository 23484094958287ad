from common import check, wrap


def prefix_in_place(a):
    for i in range(1, len(a)):
        a[i] = wrap(a[i - 1] + a[i])
    return a


def all_subarray_sums(a):
    n = len(a)
    p = [0.0] * (n + 1)
    for i in range(n):
        p[i + 1] = p[i] + a[i]
    total = 0.0
    for lo in range(n):
        for hi in range(lo + 1, n + 1):
            total = total + (p[hi] - p[lo])
    return total


check(__file__, {"prefix_in_place": prefix_in_place, "all_subarray_sums": all_subarray_sums})
