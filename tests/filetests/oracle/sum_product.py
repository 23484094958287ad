from common import check


def sum_(x):
    acc = 0.0
    for v in x:
        acc = acc + v
    return acc


def prod(x):
    acc = 1.0
    for v in x:
        acc = acc * v
    return acc


def mean_sq(x):
    acc = 0.0
    for v in x:
        acc = acc + v * v
    return acc / float(len(x))


check(__file__, {"sum": sum_, "prod": prod, "mean_sq": mean_sq})
