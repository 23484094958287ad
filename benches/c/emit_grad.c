/* The per-call cost of an exported gradient (docs/performance.md, "Strong
 * products in objects"): rosenbrock_grad of examples/rosenbrock.irad called
 * K times at n = N (x_i = 1.2 - 0.1 (i mod 7)), its buffer set to G0 in
 * every entry before each call (0: the plain gradient a caller asks for).
 *
 *   irad emit examples/rosenbrock.irad -f rosenbrock --grad -o DIR/rosenbrock.o
 *   cc -O2 -I DIR benches/c/emit_grad.c DIR/rosenbrock.o \
 *      target/release/libirad_runtime.a -lm -lpthread -ldl -o DIR/emit_grad
 *   perf stat -e task-clock DIR/emit_grad N K [G0]
 *   valgrind --tool=callgrind --toggle-collect=rosenbrock_grad DIR/emit_grad N K [G0]
 */
#include "rosenbrock.h"
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000, k = argc > 2 ? atol(argv[2]) : 100;
    double g0 = argc > 3 ? atof(argv[3]) : 0.0;
    if (n < 1 || k < 1) return 2;
    double *x = malloc((size_t)n * sizeof *x), *g = malloc((size_t)n * sizeof *g);
    double v = 0.0, acc = 0.0;
    if (!x || !g) return 4;
    for (long i = 0; i < n; i++) x[i] = 1.2 - 0.1 * (double)(i % 7);
    for (long r = 0; r < k; r++) {
        for (long i = 0; i < n; i++) g[i] = g0;
        if (rosenbrock_grad(x, n, g, 1.0, &v) != 0) {
            puts(irad_error_message());
            return 1;
        }
        acc += g[0] + v;
    }
    printf("%.17g\n", acc);
    free(x);
    free(g);
    return 0;
}
