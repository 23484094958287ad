/* Driver for an exported function of two f64 arguments returning f64, and
 * its gradient: IRAD_FUNC names it, IRAD_HEADER its header (tests/emit.rs).
 * Prints the value, then the value and gradient from IRAD_FUNC_grad. */
#include IRAD_HEADER
#include "driver.h"

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

int main(int argc, char **argv) {
    if (argc != 3) return usage(argv[0], "X Y");
    double x = arg_f64(argv[1]), y = arg_f64(argv[2]);
    double v = 0.0;
    check(IRAD_FUNC(x, y, &v), "primal");
    put("value", &v, 1);
    double gv = 0.0, g[2] = {0.0, 0.0};
    check(CAT(IRAD_FUNC, _grad)(x, y, 1.0, &gv, &g[0], &g[1]), "gradient");
    put("value", &gv, 1);
    put("grad", g, 2);
    return 0;
}
