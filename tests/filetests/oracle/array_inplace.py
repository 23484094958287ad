from common import check


def fill_squares(a):
    for i in range(len(a)):
        a[i] = float(i) * float(i)


def scale(a, s):
    for i in range(len(a)):
        a[i] = a[i] * s
    return len(a)


def squares_sum(n):
    a = [0.0] * n
    fill_squares(a)
    k = scale(a, 0.5)
    acc = 0.0
    for i in range(k):
        acc = acc + a[i]
    return acc


def scale_twice(a, s):
    scale(a, s)
    scale(a, s)
    return a


check(__file__, {"squares_sum": squares_sum, "scale_twice": scale_twice})
