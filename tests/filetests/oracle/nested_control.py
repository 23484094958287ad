from common import check, trem, tdiv, wrap


def count_pairs(a, target, limit):
    cnt = 0
    n = len(a)
    for i in range(n):
        for j in range(i + 1, n):
            if wrap(a[i] + a[j]) == target:
                cnt += 1
                if cnt >= limit:
                    return cnt
    return cnt


def digits_sum(n):
    s = 0
    while True:
        s += trem(n, 10)
        n = tdiv(n, 10)
        if n == 0:
            return s


check(__file__, {"count_pairs": count_pairs, "digits_sum": digits_sum})
