import math
from common import check, round_half_away


def floor_(x):
    return math.copysign(float(math.floor(x)), x)


def ceil_(x):
    return math.copysign(float(math.ceil(x)), x)


def rfc(x):
    return (round_half_away(x), floor_(x), ceil_(x), abs(x))


def signs(x, y):
    return (math.copysign(x, y), math.copysign(x, -y), math.copysign(0.0, y))


check(__file__, {"rfc": rfc, "signs": signs})
