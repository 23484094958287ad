/* Driver for an exported function of one f64 argument returning f64:
 * IRAD_FUNC names it, IRAD_HEADER its header (tests/emit.rs). Prints the
 * value. */
#include IRAD_HEADER
#include "driver.h"

int main(int argc, char **argv) {
    if (argc != 2) return usage(argv[0], "X");
    double v = 0.0;
    check(IRAD_FUNC(arg_f64(argv[1]), &v), "primal");
    put("value", &v, 1);
    return 0;
}
