import math
from common import check


def fold(g, init, a):
    acc = init
    for v in a:
        acc = g(acc, v)
    return acc


def plus(a, b):
    return a + b


def maxabs(a, b):
    return max(abs(a), abs(b))


def horner_step(acc, c):
    return acc * 0.5 + c


def fold_atan2(a):
    return fold(math.atan2, 1.0, a)


check(__file__, {"fold": fold, "plus": plus, "maxabs": maxabs, "horner_step": horner_step,
                 "fold_atan2": fold_atan2})
