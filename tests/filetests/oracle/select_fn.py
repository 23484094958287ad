import math
from common import check


def pick(x, use_sin):
    return (math.sin if use_sin else math.cos)(x)


def sq(x):
    return x * x


def neg_sq(x):
    return -(x * x)


def signed_square(x):
    return (neg_sq if x < 0.0 else sq)(x)


def iterate(x, k):
    f = sq if k > 2 else neg_sq
    for _ in range(k):
        x = f(x)
    return x


check(__file__, {"pick": pick, "sq": sq, "neg_sq": neg_sq, "signed_square": signed_square,
                 "iterate": iterate})
