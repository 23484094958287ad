from common import check


def horner(c, x):
    p = 0.0
    for ci in c:
        p = p * x + ci
    return p


def horner_d(c, x):
    p, dp = 0.0, 0.0
    for ci in c:
        p, dp = p * x + ci, dp * x + p
    return (p, dp)


check(__file__, {"horner": horner, "horner_d": horner_d})
