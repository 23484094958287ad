/* Driver for the error paths of exported functions (tests/emit.rs): one case
 * per run, named by the first argument. Prints the status, the value (on
 * success) and then the error text, which is empty after a success. */
#include "pick.h"
#include "ratio.h"
#include "deep.h"
#include "ratio_twice.h"
#include "driver.h"

int main(int argc, char **argv) {
    if (argc != 2) return usage(argv[0], "CASE");
    const char *c = argv[1];
    double xs[3] = {1.0, 2.0, 3.0}, g[3] = {0.0, 0.0, 0.0};
    double v = 0.0;
    int32_t status;
    if (strcmp(c, "pick") == 0) {
        status = pick(xs, 3, 5, &v);
    } else if (strcmp(c, "pick_ok") == 0) {
        status = pick(xs, 3, 1, &v);
    } else if (strcmp(c, "pick_grad") == 0) {
        status = pick_grad(xs, 3, 5, g, 1.0, &v);
    } else if (strcmp(c, "neg_len") == 0) {
        status = pick(xs, -1, 0, &v);
    } else if (strcmp(c, "ratio") == 0) {
        status = ratio(7, 0, &v);
    } else if (strcmp(c, "ratio_twice") == 0) {
        status = ratio_twice(7, 0, &v);
    } else if (strcmp(c, "deep") == 0) {
        irad_set_max_depth(50);
        status = deep(100, &v);
    } else if (strcmp(c, "deep_ok") == 0) {
        /* Recursion to depth 10 000 always works (SYNTAX.md). */
        status = deep(10000, &v);
    } else if (strcmp(c, "stack") == 0) {
        irad_set_stack_budget(16384);
        status = deep(5000, &v);
    } else {
        return usage(argv[0], "CASE");
    }
    printf("status %d\n", (int)status);
    if (status == 0) put("value", &v, 1);
    printf("%s\n", irad_error_message());
    return 0;
}
