/* Driver for rosenbrock(x: [f64]) -> f64 and rosenbrock_grad (tests/emit.rs):
 * arguments N X0 ... X(N-1). Prints the value, the value and gradient, and
 * x after the gradient call (which must be back in its state on entry). */
#include "rosenbrock.h"
#include "driver.h"

int main(int argc, char **argv) {
    if (argc < 2) return usage(argv[0], "N X0 X1 ...");
    int64_t n = arg_i64(argv[1]);
    if (n < 0 || n != argc - 2) return usage(argv[0], "N X0 X1 ...");
    double *x = calloc((size_t)n + 1, sizeof(double));
    double *g = calloc((size_t)n + 1, sizeof(double));
    if (!x || !g) return 4;
    for (int64_t i = 0; i < n; i++) x[i] = arg_f64(argv[i + 2]);
    double v = 0.0;
    check(rosenbrock(x, n, &v), "primal");
    put("value", &v, 1);
    double gv = 0.0;
    check(rosenbrock_grad(x, n, g, 1.0, &gv), "gradient");
    put("value", &gv, 1);
    put("grad", g, n);
    put("x", x, n);
    free(x);
    free(g);
    return 0;
}
