/* Calls the value and the gradient of loss.irad's @loss, compiled ahead of
 * time by `irad emit`, from C; then shows how a run-time error comes back
 * (a status code and irad_error_message()). Build and run: README.md here. */
#include <stdio.h>

#include "loss.h"

/* Prints the error of the last call and returns 1 when `status` is not IRAD_OK. */
static int failed(int32_t status, const char *what) {
    if (status == IRAD_OK) return 0;
    printf("%s failed with status %d: %s\n", what, (int)status, irad_error_message());
    return 1;
}

int main(void) {
    double w[3] = {0.5, -0.25, 1.0};
    double x[3] = {1.0, 2.0, 3.0};
    double y = 1.0;

    double value;
    if (failed(loss(w, 3, x, 3, y, &value), "loss")) return 1;
    printf("loss: %.17g\n", value);

    /* The gradient is added into w_grad: start from zeros. */
    double w_grad[3] = {0.0, 0.0, 0.0};
    if (failed(loss_grad(w, 3, x, 3, y, w_grad, 1.0, &value), "loss_grad")) return 1;
    printf("value: %.17g\n", value);
    printf("gradient: %.17g %.17g %.17g\n", w_grad[0], w_grad[1], w_grad[2]);

    /* Too few weights for x: @loss reads w[2], which is out of bounds. The
     * call returns IRAD_ERR_INDEX and writes no output. */
    int32_t status = loss(w, 2, x, 3, y, &value);
    if (status == IRAD_ERR_INDEX) {
        printf("expected error %d: %s\n", (int)status, irad_error_message());
    } else {
        printf("unexpected status %d\n", (int)status);
        return 1;
    }
    return 0;
}
