/* Driver for two objects linked together (tests/emit.rs): tuples(p: (f64,
 * f64), th: f64, k: i64) -> f64 with tuples_grad for --wrt 0, and
 * polar(x: f64, y: f64) -> (f64, f64). Arguments P0 P1 TH K. Prints the
 * value, the value and the gradient with respect to p, and polar(P0, P1). */
#include "tuples.h"
#include "polar.h"
#include "driver.h"

int main(int argc, char **argv) {
    if (argc != 5) return usage(argv[0], "P0 P1 TH K");
    double p0 = arg_f64(argv[1]), p1 = arg_f64(argv[2]), th = arg_f64(argv[3]);
    int64_t k = arg_i64(argv[4]);
    double v = 0.0;
    check(tuples(p0, p1, th, k, &v), "primal");
    put("value", &v, 1);
    double gv = 0.0, g[2] = {0.0, 0.0};
    check(tuples_grad(p0, p1, th, k, 1.0, &gv, &g[0], &g[1]), "gradient");
    put("value", &gv, 1);
    put("grad", g, 2);
    double r[2] = {0.0, 0.0};
    check(polar(p0, p1, &r[0], &r[1]), "polar");
    put("polar", r, 2);
    return 0;
}
