/* Driver for tests/c/ieee.irad (tests/emit.rs): NAME ARGS...
 *   issue X Y                  value and gradient, then the Hessian-vector
 *                              product along (DX, DY) = (1, 1)
 *   looped|written N X0 ... Y G0  the gradient with the buffer starting at
 *                              G0 in every entry; prints the status, the
 *                              value, the buffer and x after the call (an
 *                              error: its code and text instead)
 *   looped_hvp N X0 ... Y G0   the same for looped_hvp along all ones, then
 *                              the product's buffer and the direction */
#include "issue.h"
#include "looped.h"
#include "written.h"
#include "driver.h"

static void report(int32_t status, double v, const double *g, int64_t ng, const double *x,
                   int64_t n) {
    if (status != 0) {
        printf("status %d\n%s\n", (int)status, irad_error_message());
    } else {
        put("value", &v, 1);
        put("grad", g, ng);
    }
    put("x", x, n);
}

int main(int argc, char **argv) {
    if (argc < 2) return usage(argv[0], "NAME ARGS...");
    if (strcmp(argv[1], "issue") == 0) {
        if (argc != 4) return usage(argv[0], "issue X Y");
        double x = arg_f64(argv[2]), y = arg_f64(argv[3]);
        double v = 0.0, g[2] = {0.0, 0.0}, h[2] = {0.0, 0.0};
        check(issue_grad(x, y, 1.0, &v, &g[0], &g[1]), "gradient");
        put("value", &v, 1);
        put("grad", g, 2);
        check(issue_hvp(x, y, 1.0, 1.0, &v, &g[0], &g[1], &h[0], &h[1]), "hvp");
        put("value", &v, 1);
        put("grad", g, 2);
        put("hvp", h, 2);
        return 0;
    }
    if (argc < 3) return usage(argv[0], "NAME N X0 ... Y G0");
    int64_t n = arg_i64(argv[2]);
    if (n < 0 || n != argc - 5) return usage(argv[0], "NAME N X0 ... Y G0");
    double *x = calloc((size_t)n + 1, sizeof(double));
    double *g = calloc((size_t)n + 1, sizeof(double));
    if (!x || !g) return 4;
    for (int64_t i = 0; i < n; i++) x[i] = arg_f64(argv[i + 3]);
    double y = arg_f64(argv[n + 3]), g0 = arg_f64(argv[n + 4]);
    for (int64_t i = 0; i < n; i++) g[i] = g0;
    double v = 0.0, gy = 0.0;
    int32_t status;
    if (strcmp(argv[1], "looped_hvp") == 0) {
        /* Along (x, y) = (1, ..., 1): the gradient's and the product's
         * buffers both start at G0. */
        double *dir = calloc((size_t)n + 1, sizeof(double));
        double *h = calloc((size_t)n + 1, sizeof(double));
        if (!dir || !h) return 4;
        for (int64_t i = 0; i < n; i++) {
            dir[i] = 1.0;
            h[i] = g0;
        }
        double hy = 0.0;
        status = looped_hvp(x, n, y, 1.0, dir, g, h, &v, &gy, &hy);
        g[n] = gy;
        h[n] = hy;
        report(status, v, g, n + 1, x, n);
        put("hvp", h, n + 1);
        put("dir", dir, n);
        free(dir);
        free(h);
        free(x);
        free(g);
        return 0;
    }
    if (strcmp(argv[1], "looped") == 0) {
        status = looped_grad(x, n, y, g, 1.0, &v, &gy);
    } else {
        status = written_grad(x, n, y, g, 1.0, &v, &gy);
    }
    g[n] = gy;
    report(status, v, g, n + 1, x, n);
    free(x);
    free(g);
    return 0;
}
