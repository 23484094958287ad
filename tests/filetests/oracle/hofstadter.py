from common import check


def female(n):
    return 1 if n == 0 else n - male(female(n - 1))


def male(n):
    return 0 if n == 0 else n - female(male(n - 1))


def female_seq(n):
    return [female(i) for i in range(n)]


check(__file__, {"female": female, "male": male, "female_seq": female_seq})
