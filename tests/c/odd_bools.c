/* Driver for gate(a: [f64], m: [bool]) -> f64 of tests/c/odd_bools.irad and
 * its gradient (tests/emit.rs): arguments OFF NA A0 ... NM M0 .... m is
 * placed OFF bytes past a 16-byte boundary, between guard bytes. Prints the
 * primal's value (or its status) and m after it, then, from m as it was,
 * the gradient's value and gradient (or its status) and m after it, and
 * whether the guard bytes are intact. */
#include "odd_bools.h"
#include "driver.h"

static void put_bools(const char *label, const uint8_t *m, int64_t n) {
    printf("%s", label);
    for (int64_t i = 0; i < n; i++) printf(" %d", (int)m[i]);
    printf("\n");
}

int main(int argc, char **argv) {
    if (argc < 4) return usage(argv[0], "OFF NA A0 ... NM M0 ...");
    int64_t off = arg_i64(argv[1]);
    int64_t na = arg_i64(argv[2]);
    if (off < 0 || off > 15 || na < 0 || na + 4 > argc) return usage(argv[0], "...");
    int64_t nm = arg_i64(argv[na + 3]);
    if (nm < 0 || na + nm + 4 != argc) return usage(argv[0], "...");
    double *a = calloc((size_t)na + 1, sizeof(double));
    double *g = calloc((size_t)na + 1, sizeof(double));
    uint8_t *m0 = calloc((size_t)nm + 1, 1);
    /* 16 guard bytes, OFF more, m, 16 guard bytes. */
    size_t size = 16 + (size_t)off + (size_t)nm + 16;
    unsigned char *buf = aligned_alloc(16, (size + 15) / 16 * 16);
    if (!a || !g || !m0 || !buf) return 4;
    memset(buf, 0x55, size);
    uint8_t *m = buf + 16 + off;
    for (int64_t i = 0; i < na; i++) a[i] = arg_f64(argv[i + 3]);
    for (int64_t i = 0; i < nm; i++) m[i] = m0[i] = (uint8_t)arg_i64(argv[na + 4 + i]);

    double v = 0.0;
    int32_t status = gate(a, na, m, nm, &v);
    if (status == 0) {
        put("value", &v, 1);
    } else {
        printf("status %d\n", (int)status);
    }
    put_bools("m", m, nm);
    memcpy(m, m0, (size_t)nm);
    double gv = 0.0;
    status = gate_grad(a, na, m, nm, g, 1.0, &gv);
    if (status == 0) {
        put("value", &gv, 1);
        put("grad", g, na);
    } else {
        printf("status %d\n", (int)status);
    }
    put_bools("m", m, nm);
    int intact = 1;
    for (size_t i = 0; i < 16 + (size_t)off; i++) intact &= buf[i] == 0x55;
    for (size_t i = 16 + (size_t)off + (size_t)nm; i < size; i++) intact &= buf[i] == 0x55;
    printf("guard %s\n", intact ? "intact" : "broken");
    free(a);
    free(g);
    free(m0);
    free(buf);
    return 0;
}
