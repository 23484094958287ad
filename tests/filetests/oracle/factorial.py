from common import check, wrap


def fact(n):
    return 1 if n <= 1 else wrap(n * fact(n - 1))


def tri(n):
    return 0.0 if n == 0 else float(n) + tri(n - 1)


check(__file__, {"fact": fact, "tri": tri})
