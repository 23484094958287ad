import math
from common import check


def fmin(a, b):
    # the contract: NaN if either is NaN; min(-0.0, 0.0) is -0.0
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == b == 0.0:
        return -0.0 if (math.copysign(1, a) < 0 or math.copysign(1, b) < 0) else 0.0
    return a if a < b else b


def fmax(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == b == 0.0:
        return 0.0 if (math.copysign(1, a) > 0 or math.copysign(1, b) > 0) else -0.0
    return a if a > b else b


def mm(a, b):
    return (fmin(a, b), fmax(a, b))


def zero_signs(z):
    nz = -z
    return (math.copysign(1.0, fmin(nz, z)), math.copysign(1.0, fmax(nz, z)))


check(__file__, {"mm": mm, "zero_signs": zero_signs})
