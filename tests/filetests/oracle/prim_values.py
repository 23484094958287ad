import math
from common import check, wrap


def sum_and_product(a):
    s, p = 0, 1
    for v in a:
        s = wrap(s + v)
    for v in a:
        p = wrap(p * v)
    return (s, p)


def floors(a):
    # floor keeps the sign of zero: floor(-0.0) == -0.0
    return [math.copysign(float(math.floor(v)), v) for v in a]


def angle_sum(y, x):
    return math.atan2(y, x) + math.atan2(x, y)


check(__file__, {"sum_and_product": sum_and_product, "floors": floors, "angle_sum": angle_sum})
