import math
from common import check


def apply_twice(f, x):
    return f(f(x))


def compose(f, g, x):
    return f(g(x))


def double(x):
    return x * 2.0


def inc(x):
    return x + 1.0


def sin_sin_plus(x):
    return apply_twice(math.sin, x) + compose(inc, math.sin, x)


check(__file__, {"apply_twice": apply_twice, "compose": compose, "double": double,
                 "inc": inc, "sin_sin_plus": sin_sin_plus})
