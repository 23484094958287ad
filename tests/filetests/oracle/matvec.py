from common import check, IRError


def matvec(a, x, m):
    n = len(x)
    y = [0.0] * m
    for i in range(m):
        s = 0.0
        for j in range(n):
            k = i * n + j
            if k >= len(a):
                raise IRError("index %d out of bounds for array of length %d" % (k, len(a)),
                              "%aij = call arrayref(")
            s = s + a[k] * x[j]
        y[i] = s
    return y


def matvec_norm2(a, x, m):
    acc = 0.0
    for v in matvec(a, x, m):
        acc = acc + v * v
    return acc


check(__file__, {"matvec": matvec, "matvec_norm2": matvec_norm2})
