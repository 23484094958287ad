from common import check


def same(a, b):
    # One array (one list), or both empty: irad's `same`.
    return a is b or (len(a) == 0 and len(b) == 0)


def same_self(a):
    return same(a, a)


def same_args(a, b):
    return same(a, b)


def same_copy(a):
    return same(a, list(a))


def same_through(a, k):
    c = list(a)
    s = a if k else c
    return (same(s, a), same(s, c))


def same_empty(n):
    a = [0.0] * n
    b = [0.0] * n
    return same(a, b)


check(__file__, {"same_self": same_self, "same_args": same_args, "same_copy": same_copy,
                 "same_through": same_through, "same_empty": same_empty})
