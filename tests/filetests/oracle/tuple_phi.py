from common import check


def fib_pair(n):
    a, b = 0.0, 1.0
    for _ in range(n):
        a, b = b, a + b
    return (a, b)


def min_arg_max(x):
    lo, arg, hi = x[0], 0, x[0]
    for i in range(1, len(x)):
        hi = max(hi, x[i])
        if x[i] < lo:
            lo, arg = x[i], i
    return (lo, arg, hi)


check(__file__, {"fib_pair": fib_pair, "min_arg_max": min_arg_max})
