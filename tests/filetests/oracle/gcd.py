from common import check, trem, tdiv, wrap


def gcd(a, b):
    while b != 0:
        a, b = b, trem(a, b)
    return -a if a < 0 else a


def lcm(a, b):
    l = wrap(tdiv(a, gcd(a, b)) * b)
    return l if l >= 0 else wrap(-l)


check(__file__, {"gcd": gcd, "lcm": lcm})
