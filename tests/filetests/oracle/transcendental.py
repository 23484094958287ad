import math
from common import check


def softplus_sum(x):
    acc = 0.0
    for v in x:
        acc = acc + math.log(1.0 + math.exp(v))
    return acc


def taylor_exp_error(x, terms):
    term, s = 1.0, 0.0
    for k in range(terms):
        s = s + term
        term = term * x / float(k + 1)
    e = math.exp(x)
    return s - e


def mix(x, y):
    ax = abs(x)
    s4 = math.erf(x) + math.tanh(y) + math.atan2(y, x) + math.pow(ax, 1.5) + math.pow(y, 3.0)
    return s4 - math.log1p(ax) * math.expm1(y)


check(__file__, {"softplus_sum": softplus_sum, "taylor_exp_error": taylor_exp_error, "mix": mix})
