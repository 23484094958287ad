/* Driver for the bulk array primitives of tests/c/bulk.irad (tests/emit.rs).
 * Arguments: A's length and elements, B's, m, k, n, C's length and
 * elements. Prints the status, on success the value and C afterwards, and
 * then the error text, which is empty after a success. */
#include "mm.h"
#include "driver.h"

/* Reads an array (its length, then its elements) at argv[*i]. */
static double *read_array(char **argv, int argc, int *i, int64_t *len) {
    if (*i >= argc) exit(usage(argv[0], "A B M K N C"));
    *len = arg_i64(argv[(*i)++]);
    double *xs = calloc((size_t)(*len > 0 ? *len : 1), sizeof *xs);
    if (xs == NULL) exit(4);
    for (int64_t j = 0; j < *len; j++) {
        if (*i >= argc) exit(usage(argv[0], "A B M K N C"));
        xs[j] = arg_f64(argv[(*i)++]);
    }
    return xs;
}

int main(int argc, char **argv) {
    int i = 1;
    int64_t a_len, b_len, c_len;
    double *a = read_array(argv, argc, &i, &a_len);
    double *b = read_array(argv, argc, &i, &b_len);
    if (i + 3 > argc) return usage(argv[0], "A B M K N C");
    int64_t m = arg_i64(argv[i]), k = arg_i64(argv[i + 1]), n = arg_i64(argv[i + 2]);
    i += 3;
    double *c = read_array(argv, argc, &i, &c_len);
    double v = 0.0;
    int32_t status = mm(a, a_len, b, b_len, m, k, n, c, c_len, &v);
    printf("status %d\n", (int)status);
    if (status == 0) {
        put("value", &v, 1);
        put("c", c, c_len);
    }
    printf("%s\n", irad_error_message());
    free(a);
    free(b);
    free(c);
    return 0;
}
