from common import check


def is_even(n):
    return True if n == 0 else is_odd(n - 1)


def is_odd(n):
    return False if n == 0 else is_even(n - 1)


check(__file__, {"is_even": is_even, "is_odd": is_odd})
