/* Driver for int_mixed(n: i64, x: f64, m: i64, y: f64) -> f64 and its
 * gradient (tests/emit.rs): arguments N X M Y. Prints the value, then the
 * value and the gradient with respect to x and y. */
#include "int_mixed.h"
#include "driver.h"

int main(int argc, char **argv) {
    if (argc != 5) return usage(argv[0], "N X M Y");
    int64_t n = arg_i64(argv[1]), m = arg_i64(argv[3]);
    double x = arg_f64(argv[2]), y = arg_f64(argv[4]);
    double v = 0.0;
    check(int_mixed(n, x, m, y, &v), "primal");
    put("value", &v, 1);
    double gv = 0.0, g[2] = {0.0, 0.0};
    check(int_mixed_grad(n, x, m, y, 1.0, &gv, &g[0], &g[1]), "gradient");
    put("value", &gv, 1);
    put("grad", g, 2);
    return 0;
}
