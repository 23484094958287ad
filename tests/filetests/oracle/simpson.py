import math
from common import check


def simpson(f, a, b, n):
    h = (b - a) / float(n)
    acc = f(a) + f(b)
    for i in range(1, n):
        x = a + float(i) * h
        acc = acc + (4.0 if i % 2 == 1 else 2.0) * f(x)
    return acc * (h / 3.0)


def cubic(x):
    return (x * x * x - 2.0 * x) + 1.0


def integrate_sin(n):
    return simpson(math.sin, 0.0, math.acos(-1.0), n)


check(__file__, {"simpson": simpson, "cubic": cubic, "integrate_sin": integrate_sin})
