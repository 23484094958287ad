/* Driver for best_after(x: [f64], n: i64) -> f64 of
 * tests/free_arrays/sharing.irad (a best iterate kept by reference: header
 * phis sharing the step's arrays) and its gradient (tests/emit.rs):
 * arguments N X0 ... X(N-1) STEPS. Prints the value, the value and the
 * gradient with respect to x. */
#include "best.h"
#include "driver.h"

int main(int argc, char **argv) {
    if (argc < 3) return usage(argv[0], "N X0 X1 ... STEPS");
    int64_t n = arg_i64(argv[1]);
    if (n < 0 || n != argc - 3) return usage(argv[0], "N X0 X1 ... STEPS");
    double *x = calloc((size_t)n + 1, sizeof(double));
    double *g = calloc((size_t)n + 1, sizeof(double));
    if (!x || !g) return 4;
    for (int64_t i = 0; i < n; i++) x[i] = arg_f64(argv[i + 2]);
    int64_t steps = arg_i64(argv[n + 2]);
    double v = 0.0;
    check(best_after(x, n, steps, &v), "primal");
    put("value", &v, 1);
    double gv = 0.0;
    check(best_after_grad(x, n, steps, g, 1.0, &gv), "gradient");
    put("value", &gv, 1);
    put("grad", g, n);
    free(x);
    free(g);
    return 0;
}
