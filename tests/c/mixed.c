/* Driver for every kind of C parameter (tests/emit.rs): mixed(a: [f64],
 * flag: bool, t: ([f64], f64), n: [i64]) -> f64 with mixed_grad (every
 * argument differentiated, or with -DWRT_T only t, --wrt 2), and
 * stats(a: [f64], flags: [bool]) -> (f64, bool, i64) with flags[i] = i even.
 * Arguments: the IR arguments flattened, an array as its length then its
 * elements. Prints the value, the value and gradient, a and t.0 after the
 * gradient call, and stats' three results. */
#include "mixed.h"
#include "stats.h"
#include "driver.h"

/* Reads an array of doubles (length, then elements) from argv at *k. */
static double *read_f64s(char **argv, int argc, int *k, int64_t *len) {
    if (*k >= argc) exit(usage(argv[0], "..."));
    *len = arg_i64(argv[(*k)++]);
    if (*len < 0 || *k + *len > argc) exit(usage(argv[0], "..."));
    double *xs = calloc((size_t)*len + 1, sizeof(double));
    if (!xs) exit(4);
    for (int64_t i = 0; i < *len; i++) xs[i] = arg_f64(argv[(*k)++]);
    return xs;
}

int main(int argc, char **argv) {
    int k = 1;
    int64_t na, nu, nn;
    double *a = read_f64s(argv, argc, &k, &na);
    if (k + 1 >= argc) return usage(argv[0], "...");
    int32_t flag = (int32_t)arg_i64(argv[k++]);
    double *u = read_f64s(argv, argc, &k, &nu);
    if (k + 1 >= argc) return usage(argv[0], "...");
    double t1 = arg_f64(argv[k++]);
    nn = arg_i64(argv[k++]);
    if (nn < 0 || k + nn != argc) return usage(argv[0], "...");
    int64_t *n = calloc((size_t)nn + 1, sizeof(int64_t));
    if (!n) return 4;
    for (int64_t i = 0; i < nn; i++) n[i] = arg_i64(argv[k++]);

    double v = 0.0;
    check(mixed(a, na, flag, u, nu, t1, n, nn, &v), "primal");
    put("value", &v, 1);
    double *ga = calloc((size_t)na + 1, sizeof(double));
    double *gu = calloc((size_t)nu + 1, sizeof(double));
    double gv = 0.0, gt1 = 0.0;
    if (!ga || !gu) return 4;
#ifdef WRT_T
    check(mixed_grad(a, na, flag, u, nu, t1, n, nn, gu, 1.0, &gv, &gt1), "gradient");
    int64_t ng = 0;
#else
    check(mixed_grad(a, na, flag, u, nu, t1, n, nn, ga, gu, 1.0, &gv, &gt1), "gradient");
    int64_t ng = na;
#endif
    put("value", &gv, 1);
    /* The gradient in argument order: a (unless WRT_T), t.0, t.1. */
    double *all = calloc((size_t)(na + nu + 2), sizeof(double));
    if (!all) return 4;
    memcpy(all, ga, (size_t)ng * sizeof(double));
    memcpy(all + ng, gu, (size_t)nu * sizeof(double));
    all[ng + nu] = gt1;
    put("grad", all, ng + nu + 1);
    put("a", a, na);
    put("u", u, nu);

    uint8_t *flags = calloc((size_t)na + 1, 1);
    if (!flags) return 4;
    for (int64_t i = 0; i < na; i++) flags[i] = (uint8_t)(i % 2 == 0);
    double s = 0.0;
    int32_t more = -1;
    int64_t count = -1;
    check(stats(a, na, flags, na, &s, &more, &count), "stats");
    put("stats", &s, 1);
    printf("%d %" PRId64 "\n", (int)more, count);
    return 0;
}
