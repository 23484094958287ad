from common import check, IRError, DEPTH_LIMIT

# Python cannot recurse 100 000 deep, so the recursion is unrolled: the call
# at recursion level k (entry call = depth 1) runs at depth k; the call that
# would create depth DEPTH_LIMIT + 1 fails at the recursive invoke.


def countdown(n):
    frames = n + 1  # countdown(n), countdown(n-1), ..., countdown(0)
    if frames > DEPTH_LIMIT:
        raise IRError("call depth limit of 100000 exceeded", "%r = invoke @countdown(")
    r = 0
    for _ in range(n):
        r = r + 1
    return r


def sum_down(x, n):
    frames = max(n, 0) + 1
    if frames > DEPTH_LIMIT:
        raise IRError("call depth limit of 100000 exceeded", "%rest = invoke @sum_down(")
    acc = 0.0
    for _ in range(max(n, 0)):  # innermost first: x + (x + (... + 0.0))
        acc = x + acc
    return acc


check(__file__, {"countdown": countdown, "sum_down": sum_down})
