/* Driver for tests/c/temporaries.irad (tests/emit.rs): the value of `f`,
 * the value and gradient of `r` and the value of `c` at X and N, printed
 * as bits. The test runs it under an address-space limit the arrays of
 * the loops would exceed if they were not freed as the loops go. */
#include "temporaries_f.h"
#include "temporaries_r.h"
#include "temporaries_c.h"
#include "driver.h"

int main(int argc, char **argv) {
    if (argc != 3) return usage(argv[0], "X N");
    double x = arg_f64(argv[1]);
    int64_t n = arg_i64(argv[2]);
    double v = 0.0, rv = 0.0, g = 0.0, cv = 0.0;
    check(f(x, n, &v), "f");
    put("value", &v, 1);
    check(r_grad(x, n, 1.0, &rv, &g), "r_grad");
    put("value", &rv, 1);
    put("grad", &g, 1);
    check(c(x, n, &cv), "c");
    put("value", &cv, 1);
    return 0;
}
