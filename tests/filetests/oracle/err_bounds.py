from common import check, IRError


def get(a, i):
    if not 0 <= i < len(a):
        raise IRError("index %d out of bounds for array of length %d" % (i, len(a)),
                      "%v = call arrayref(")
    return a[i]


def fill_to(a, n):
    s = 0
    for i in range(n):
        if i >= len(a):
            raise IRError("index %d out of bounds for array of length %d" % (i, len(a)),
                          "call arrayset(%a, %i, %sq)")
        a[i] = i * i
        s += i * i
    return s


check(__file__, {"get": get, "fill_to": fill_to})
