from common import check


def count_primes(n):
    comp = [False] * n
    count = 0
    for i in range(2, n):
        if not comp[i]:
            count += 1
            for j in range(i * i, n, i):
                comp[j] = True
    return count


def primes(n):
    return [c for c in range(2, n) if all(c % d for d in range(2, c))]


def alloc_defaults(n):
    return (0.0, 0, False, n)


check(__file__, {"count_primes": count_primes, "primes": primes, "alloc_defaults": alloc_defaults})
