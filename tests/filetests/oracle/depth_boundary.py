from common import check, IRError, DEPTH_LIMIT

# ping(n) -> pong(n-1) -> ping(n-2) ...; n + 1 frames in all. Unrolled, since
# Python cannot recurse this deep: ping adds 1 on the way back, pong adds 2.


def run(start_is_ping, n):
    if n + 1 > DEPTH_LIMIT:
        raise IRError("call depth limit of 100000 exceeded", "invoke")
    # frame k (0-based) is ping when k is even and we started with ping
    total = 0
    for k in range(n):  # frames 0..n-1 each add their increment; frame n returns 0
        is_ping = (k % 2 == 0) == start_is_ping
        total += 1 if is_ping else 2
    return total


check(__file__, {"ping": lambda n: run(True, n), "pong": lambda n: run(False, n)})
