import math
from common import check, fptosi, IRError


def to_int(x):
    return fptosi(x, "%n = call fptosi(")


def bucket(x, width):
    q = x / width if width != 0.0 else math.copysign(math.inf, x) * math.copysign(1.0, width)
    return fptosi(float(math.floor(q)) if math.isfinite(q) else q, "%b = call fptosi(")


def make(n):
    m = n - 5
    if n < 0:
        raise IRError("negative array length %d" % n, "%z = call zeros(")
    if m < 0:
        raise IRError("negative array length %d" % m, "%a = call alloc(")
    return n + m


check(__file__, {"to_int": to_int, "bucket": bucket, "make": make})
