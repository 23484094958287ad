/* Driver for smooth(x: [f64], w: f64) -> f64 of tests/checkpoint/arrays.irad
 * (which rewrites x in place in a loop) and its gradient (tests/emit.rs):
 * arguments N X0 ... X(N-1) W. Prints the value, the value and the gradient
 * (x's, then w's), and x after the gradient call (back in its state on
 * entry). */
#include "smooth.h"
#include "driver.h"

int main(int argc, char **argv) {
    if (argc < 3) return usage(argv[0], "N X0 X1 ... W");
    int64_t n = arg_i64(argv[1]);
    if (n < 0 || n != argc - 3) return usage(argv[0], "N X0 X1 ... W");
    double *x = calloc((size_t)n + 1, sizeof(double));
    double *x0 = calloc((size_t)n + 1, sizeof(double));
    double *g = calloc((size_t)n + 2, sizeof(double));
    if (!x || !x0 || !g) return 4;
    for (int64_t i = 0; i < n; i++) x[i] = x0[i] = arg_f64(argv[i + 2]);
    double w = arg_f64(argv[n + 2]);
    double v = 0.0;
    check(smooth(x, n, w, &v), "primal");
    put("value", &v, 1);
    /* The primal wrote x: start the gradient from the same x. */
    for (int64_t i = 0; i < n; i++) x[i] = x0[i];
    double gv = 0.0;
    check(smooth_grad(x, n, w, g, 1.0, &gv, &g[n]), "gradient");
    put("value", &gv, 1);
    put("grad", g, n + 1);
    put("x", x, n);
    free(x);
    free(x0);
    free(g);
    return 0;
}
