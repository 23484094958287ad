import math
from common import check


def newton_sqrt(a, x):
    k = 0
    while True:
        xn = 0.5 * (x + a / x)
        k += 1
        if abs(xn - x) <= 1e-15 * xn or k >= 100:
            return (xn, k)
        x = xn


def newton_error(a):
    return newton_sqrt(a, 1.0)[0] - math.sqrt(a)


check(__file__, {"newton_sqrt": newton_sqrt, "newton_error": newton_error})
