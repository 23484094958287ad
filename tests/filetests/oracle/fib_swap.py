from common import check, wrap


def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, wrap(a + b)
    return a


def fib_f(n):
    a, b = 0.0, 1.0
    for _ in range(n):
        a, b = b, a + b
    return a


def swap(x, y, n):
    for _ in range(n):
        x, y = y, x
    return (x, y)


check(__file__, {"fib": fib, "fib_f": fib_f, "swap": swap})
