/* sw_sumsq and sw_clip (global gradient-norm clipping) against double:
 * the sum of squares of a strided column tile, written then accumulated
 * with weights (alpha), and the scaling min(1, max_norm / (sqrt(n2) + 1e-6))
 * both when it clips (every element scaled: within 1 ulp-ish, relative
 * 1e-6) and when it does not (bit for bit unchanged); a non-[1,1] norm
 * refused at submission. */
#include <math.h>
#include <string.h>

#include "testutil.h"

enum { R = 23, C = 40, N = R * C };

static void refuse(void *arg)
{
    (void)arg;
    tu_init_child();
    sw_tensor *x = tu_tensor("x", 4, 6, NULL), *n2 = tu_tensor("n2", 1, 2, NULL);
    sw_sumsq(sw_tensor_whole(x, STARPU_R), sw_tensor_whole(n2, STARPU_W), 1.0, 0);
}

int main(int argc, char **argv)
{
    tu_expect_refusal("sw_sumsq into a [1,2] norm", refuse, NULL, "sw_sumsq: the squared norm must be [1,1], got [1,2]");
    tu_init(&argc, &argv);
    static float x[N];
    tu_rand(x, N, 61, 2.0f);
    sw_tensor *X = tu_tensor("x", R, C, x), *N2 = tu_tensor("n2", 1, 1, NULL);
    /* columns 10..29 (a strided tile), then the whole with alpha 0.25 added */
    sw_tensor_fill(N2, NAN);
    sw_sumsq(sw_tensor_split(X, SW_COLS, 3, (const int64_t[]){10, 20, 10}, STARPU_R)[1], sw_tensor_whole(N2, STARPU_W),
             1.0, 0);
    sw_sumsq(sw_tensor_whole(X, STARPU_R), sw_tensor_whole(N2, STARPU_RW), 0.25, 1);
    float *got = tu_read(N2);
    double ref = 0, all = 0;
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            double v = x[r * C + c];
            all += v * v;
            if (c >= 10 && c < 30) ref += v * v;
        }
    ref += 0.25 * all;
    /* the sums are in double: the only rounding is the fp32 result (measured err/limit <= 0.5 ulp) */
    tu_close("sumsq of a strided tile, then += 0.25 * sumsq of the whole", got, &ref, 1, 1.2e-7, 0.0);
    free(got);
    /* clipping to max_norm = sqrt(ref)/3: every element scaled by max_norm / (sqrt(n2) + 1e-6) */
    float n2 = (float)ref, max_norm = sqrtf(n2) / 3.0f;
    sw_tensor_write_host(N2, &n2);
    sw_clip(sw_tensor_whole(X, STARPU_RW), sw_tensor_whole(N2, STARPU_R), max_norm);
    static double want[N];
    float s = max_norm / (sqrtf(n2) + 1e-6f);
    for (int i = 0; i < N; i++) want[i] = x[i] * s;
    got = tu_read(X);
    tu_close("clip to a third of the norm: every element scaled", got, want, N, 1e-7, 0.0);
    free(got);
    /* a norm below max_norm: nothing changes */
    sw_tensor_write_host(X, x);
    sw_clip(sw_tensor_whole(X, STARPU_RW), sw_tensor_whole(N2, STARPU_R), 2.0f * sqrtf(n2));
    got = tu_read(X);
    tu_true("clip above the norm leaves every element's bits unchanged", memcmp(got, x, sizeof x) == 0);
    free(got);
    sw_tensor_free(X), sw_tensor_free(N2);
    return tu_finish();
}
