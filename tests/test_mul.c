/* sw_mul: z = x * y element by element. The product of two floats is exact
 * in double, so the reference (double product rounded to float) is the
 * correctly rounded fp32 product and the check is bit-exact (measured:
 * 0 differences); whole, row tiles, strided column tiles (ld > cols) and
 * infinities/NaN; a shape mismatch refused at submission. */
#include <string.h>

#include "testutil.h"

enum { R = 29, C = 61, N = R * C };

static void run(sw_tensor *X, sw_tensor *Y, sw_tensor *Z, sw_split split, int nt)
{
    starpu_data_handle_t *xt = sw_tensor_tiles(X, split, nt, STARPU_R), *yt = sw_tensor_tiles(Y, split, nt, STARPU_R);
    starpu_data_handle_t *zt = sw_tensor_tiles(Z, split, nt, STARPU_W);
    for (int i = 0; i < nt; i++) sw_mul(xt[i], yt[i], zt[i]);
}

static void refuse(void *arg)
{
    (void)arg;
    tu_init_child();
    sw_tensor *x = tu_tensor("x", 4, 6, NULL), *y = tu_tensor("y", 4, 6, NULL), *z = tu_tensor("z", 6, 4, NULL);
    sw_mul(sw_tensor_whole(x, STARPU_R), sw_tensor_whole(y, STARPU_R), sw_tensor_whole(z, STARPU_W));
}

int main(int argc, char **argv)
{
    tu_expect_refusal("sw_mul into a transposed z", refuse, NULL, "sw_mul: x [4,6] and z [6,4] differ in shape");
    tu_init(&argc, &argv);
    static float x[N], y[N];
    tu_rand(x, N, 51, 3.0f);
    tu_rand(y, N, 52, 3.0f);
    const float sx[] = {INFINITY, -INFINITY, 0.0f, NAN, 1e30f, -0.0f}, sy[] = {2.0f, 0.5f, INFINITY, 1.0f, 1e30f, 3.0f};
    memcpy(x, sx, sizeof sx);
    memcpy(y, sy, sizeof sy);
    static double ref[N];
    for (int i = 0; i < N; i++) ref[i] = (float)((double)x[i] * (double)y[i]);
    char what[160];
    struct { sw_split split; int nt; const char *name; } tilings[] = {
        {SW_ROWS, 1, "whole"}, {SW_ROWS, 4, "4 row tiles"}, {SW_COLS, 3, "3 strided column tiles"}};
    for (size_t t = 0; t < sizeof tilings / sizeof tilings[0]; t++) {
        sw_tensor *X = tu_tensor("x", R, C, x), *Y = tu_tensor("y", R, C, y), *Z = tu_tensor("z", R, C, NULL);
        sw_tensor_fill(Z, NAN);
        run(X, Y, Z, tilings[t].split, tilings[t].nt);
        float *got = tu_read(Z);
        snprintf(what, sizeof what, "mul %dx%d, %s (inf * 0 = NaN, 1e30^2 = inf): exact", R, C, tilings[t].name);
        tu_close(what, got, ref, N, 0.0, 0.0);
        free(got);
        sw_tensor_free(X), sw_tensor_free(Y), sw_tensor_free(Z);
    }
    return tu_finish();
}
