from common import check, wrap, I64_MAX


def edges(a, b):
    return (wrap(a + b), wrap(a - b), wrap(a * b), wrap(-a))


def min_from_max(k):
    mn = wrap(I64_MAX + k)
    neg = wrap(-mn)
    return (mn, neg, neg == mn)


def lcg(x, n):
    for _ in range(n):
        x = wrap(wrap(x * 6364136223846793005) + 1442695040888963407)
    return x


check(__file__, {"edges": edges, "min_from_max": min_from_max, "lcg": lcg})
