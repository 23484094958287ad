from common import check


def find(a, x):
    for i, v in enumerate(a):
        if v == x:
            return i
    return -1


def first_over(a, bound):
    s = 0
    for i, v in enumerate(a):
        s += v
        if s > bound:
            return i
    return -1


check(__file__, {"find": find, "first_over": first_over})
