/* Helpers shared by the C drivers of tests/emit.rs: reading arguments,
 * printing doubles as their exact bits, and stopping on a failed call. */
#ifndef IRAD_TEST_DRIVER_H
#define IRAD_TEST_DRIVER_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline double arg_f64(const char *s) { return strtod(s, NULL); }

static inline int64_t arg_i64(const char *s) { return (int64_t)strtoll(s, NULL, 10); }

/* One line: LABEL and the bits of each double in hex (tests compare bits). */
static inline void put(const char *label, const double *xs, int64_t n) {
    printf("%s", label);
    for (int64_t i = 0; i < n; i++) {
        uint64_t bits;
        memcpy(&bits, &xs[i], sizeof bits);
        printf(" %016" PRIx64, bits);
    }
    printf("\n");
}

/* Stops with the status and the error text when a call failed. */
static inline void check(int32_t status, const char *what) {
    if (status != 0) {
        printf("%s failed with status %d\n%s\n", what, (int)status, irad_error_message());
        exit(3);
    }
}

static inline int usage(const char *prog, const char *args) {
    fprintf(stderr, "usage: %s %s\n", prog, args);
    return 2;
}

#endif
