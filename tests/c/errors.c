/* Driver for the error paths of exported functions (tests/emit.rs): one case
 * per run, named by the first argument. Prints the status, the value (on
 * success) and then the error text, which is empty after a success. */
#include "pick.h"
#include "ratio.h"
#include "deep.h"
#include "ratio_twice.h"
#include "chain.h"
#include "driver.h"
#include <pthread.h>

/* The gradient of @chain at depth 10 000, on the thread that runs it; the
 * error text is per thread, so it is copied for main to print. */
static int32_t chain_status;
static char chain_error[4096];
static void *chain_deep(void *unused) {
    double v = 0.0, g = 0.0;
    (void)unused;
    chain_status = chain_grad(0.5, 10000, 1.0, &v, &g);
    snprintf(chain_error, sizeof chain_error, "%s", irad_error_message());
    return NULL;
}

/* Runs chain_deep on a new thread with a stack of `bytes`. */
static int32_t on_thread(size_t bytes) {
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, bytes);
    if (pthread_create(&t, &attr, chain_deep, NULL) != 0) return -1;
    pthread_join(t, NULL);
    pthread_attr_destroy(&attr);
    return chain_status;
}

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
    } else if (strcmp(c, "chain_grad_deep") == 0) {
        /* The default budget is the stack the thread has left: depth
         * 10 000 of a gradient works on the main thread (8 MiB)... */
        chain_deep(NULL);
        status = chain_status;
    } else if (strcmp(c, "chain_grad_small_thread") == 0) {
        /* ...and fails cleanly, never overflows, on a 64 KiB thread. */
        status = on_thread(65536);
    } else if (strcmp(c, "stack") == 0) {
        irad_set_stack_budget(16384);
        status = deep(5000, &v);
    } else {
        return usage(argv[0], "CASE");
    }
    printf("status %d\n", (int)status);
    if (status == 0) put("value", &v, 1);
    printf("%s\n", strncmp(c, "chain_grad", 10) == 0 ? chain_error : irad_error_message());
    return 0;
}
