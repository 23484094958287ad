from common import check


def independent(a):
    b = list(a)
    b[0] = 100.0
    a[1] = -1.0
    return [a[0], a[1], b[0], b[1]]


def bool_copy(n):
    a = [False] * n
    b = list(a)
    b[0] = True
    return (a[0], b[0], len(b))


def zeros_len(n):
    z = [0.0] * n
    s = 0.0
    for v in z:
        s = s + v
    return (len(z), s)


check(__file__, {"independent": independent, "bool_copy": bool_copy, "zeros_len": zeros_len})
