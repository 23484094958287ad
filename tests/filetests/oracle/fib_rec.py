from common import check


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def tribo(n, w):
    if n < 3:
        return float(n) * w
    return (tribo(n - 1, w) + tribo(n - 2, w)) - tribo(n - 3, w) * w


check(__file__, {"fib": fib, "tribo": tribo})
