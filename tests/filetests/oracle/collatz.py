from common import check


def collatz_steps(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def longest(limit):
    best, best_steps = 1, 0
    for k in range(1, limit):
        s = collatz_steps(k)
        if s > best_steps:
            best, best_steps = k, s
    return (best, best_steps)


check(__file__, {"collatz_steps": collatz_steps, "longest": longest})
