/* Driver for the Hessian-vector products of tests/c/hvp.irad (tests/emit.rs),
 * built with one of -DHVP_MIXED, -DHVP_MIXED_WRT (--wrt 0,2), -DHVP_HOF.
 * Arguments: the function's arguments, then the direction's entries for the
 * differentiated arguments (mixed: X P0 P1 N Y0 ... Y(N-1) K DX DP0 DY0 ...;
 * mixed --wrt 0,2: the same without DP0; hof: X Y DX DY). Prints the value,
 * the gradient's f64s outside arrays (`grad`) and y's (`grad_y`), the same
 * for the Hessian-vector product (`hvp`, `hvp_y`), and y after the call
 * (which must be back in its state on entry). */
#include "hvp_out.h"
#include "driver.h"

int main(int argc, char **argv) {
    double v = 0.0;
#if defined(HVP_HOF)
    if (argc != 5) return usage(argv[0], "X Y DX DY");
    double x = arg_f64(argv[1]), y = arg_f64(argv[2]);
    double dx = arg_f64(argv[3]), dy = arg_f64(argv[4]);
    double g[2] = {0.0, 0.0}, h[2] = {0.0, 0.0};
    check(hof_hvp(x, y, dx, dy, &v, &g[0], &g[1], &h[0], &h[1]), "hof_hvp");
    put("value", &v, 1);
    put("grad", g, 2);
    put("hvp", h, 2);
#else
    if (argc < 5) return usage(argv[0], "X P0 P1 N Y... K DX [DP0] DY...");
    double x = arg_f64(argv[1]);
    double p0 = arg_f64(argv[2]);
    int64_t p1 = arg_i64(argv[3]);
    int64_t n = arg_i64(argv[4]);
#if defined(HVP_MIXED_WRT)
    int64_t want = 5 + n + 2 + n;
#else
    int64_t want = 5 + n + 3 + n;
#endif
    if (n < 0 || argc != want) return usage(argv[0], "X P0 P1 N Y... K DX [DP0] DY...");
    double *y = calloc((size_t)n + 1, sizeof(double));
    double *ydir = calloc((size_t)n + 1, sizeof(double));
    double *yg = calloc((size_t)n + 1, sizeof(double));
    double *yh = calloc((size_t)n + 1, sizeof(double));
    if (!y || !ydir || !yg || !yh) return 4;
    for (int64_t i = 0; i < n; i++) y[i] = arg_f64(argv[5 + i]);
    int64_t k = arg_i64(argv[5 + n]);
    int a = (int)(6 + n);
    double dx = arg_f64(argv[a++]);
#if defined(HVP_MIXED_WRT)
    for (int64_t i = 0; i < n; i++) ydir[i] = arg_f64(argv[a++]);
    double g[1] = {0.0}, h[1] = {0.0};
    check(mixed_hvp(x, p0, p1, y, n, k, dx, ydir, yg, yh, &v, &g[0], &h[0]), "mixed_hvp");
    put("value", &v, 1);
    put("grad", g, 1);
#else
    double dp0 = arg_f64(argv[a++]);
    for (int64_t i = 0; i < n; i++) ydir[i] = arg_f64(argv[a++]);
    double g[2] = {0.0, 0.0}, h[2] = {0.0, 0.0};
    check(mixed_hvp(x, p0, p1, y, n, k, dx, dp0, ydir, yg, yh, &v, &g[0], &g[1], &h[0], &h[1]),
          "mixed_hvp");
    put("value", &v, 1);
    put("grad", g, 2);
#endif
    put("grad_y", yg, n);
#if defined(HVP_MIXED_WRT)
    put("hvp", h, 1);
#else
    put("hvp", h, 2);
#endif
    put("hvp_y", yh, n);
    put("y", y, n);
    free(y);
    free(ydir);
    free(yg);
    free(yh);
#endif
    return 0;
}
