/* sw_gelu_fwd / sw_gelu_bwd (tanh approximation): forward against the
 * double formula 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), backward
 * against central differences of the double loss sum(gelu(x) * r); whole,
 * row tiles and strided column tiles, tails out to |x| = 20. */
#include <string.h>

#include "testutil.h"

enum { R = 37, C = 53, N = R * C };
/* Backward vs central differences, |got - fd| <= FD_RTOL |fd| + FD_AREL max|fd|:
 * worst err/limit 0.028 over 8 seeds. The differences (h = 1e-5 in double) are
 * good to ~1e-10 (same figure with h = 1e-4, 1e-6): the rest is the kernel's
 * fp32 rounding (tanhf, the cubic); 10x tighter would leave less than a 10x margin. */
static const double FD_RTOL = 1e-5, FD_AREL = 1e-6;

static double ref_gelu(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static double ref_loss(const double *x, const double *r)
{
    double l = 0;
    for (int i = 0; i < N; i++) l += ref_gelu(x[i]) * r[i];
    return l;
}

/* submits gelu on x -> y (fwd) or on x, grad (bwd) with the given tiling */
static void run(sw_tensor *X, sw_tensor *Y, int bwd, sw_split split, int nt)
{
    starpu_data_handle_t *xt = sw_tensor_tiles(X, split, nt, STARPU_R);
    starpu_data_handle_t *yt = sw_tensor_tiles(Y, split, nt, bwd ? STARPU_RW : STARPU_W);
    for (int i = 0; i < nt; i++) {
        if (bwd) sw_gelu_bwd(xt[i], yt[i]);
        else sw_gelu_fwd(xt[i], yt[i]);
    }
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    static float x[N], r[N];
    tu_rand(x, N, 31, 4.0f);
    const float special[] = {0.0f, -0.0f, 1e-6f, -1e-6f, 20.0f, -20.0f, 10.0f, -10.0f, 7.5f, -7.5f, 3.0f, -3.0f};
    memcpy(x, special, sizeof special);
    tu_rand(r, N, 32, 1.0f);
    static double xd[N], rd[N], y_ref[N], dx_ref[N];
    for (int i = 0; i < N; i++) {
        xd[i] = x[i];
        rd[i] = r[i];
        y_ref[i] = ref_gelu(xd[i]);
    }
    const double h = 1e-5;
    for (int i = 0; i < N; i++) {
        double s = xd[i];
        xd[i] = s + h;
        double lp = ref_loss(xd, rd);
        xd[i] = s - h;
        double lm = ref_loss(xd, rd);
        xd[i] = s;
        dx_ref[i] = (lp - lm) / (2 * h);
    }
    const double ymax = tu_maxabs(y_ref, N), dxmax = tu_maxabs(dx_ref, N);
    char what[160];

    struct { sw_split split; int nt; const char *name; } tilings[] = {
        {SW_ROWS, 1, "whole"}, {SW_ROWS, 3, "3 row tiles"}, {SW_COLS, 2, "2 strided column tiles"},
        {SW_COLS, 5, "5 strided column tiles"}};
    for (size_t t = 0; t < sizeof tilings / sizeof tilings[0]; t++) {
        sw_tensor *X = tu_tensor("x", R, C, x), *Y = tu_tensor("y", R, C, NULL), *G = tu_tensor("grad", R, C, r);
        sw_tensor_fill(Y, NAN);
        run(X, Y, 0, tilings[t].split, tilings[t].nt);
        run(X, G, 1, tilings[t].split, tilings[t].nt);
        float *got = tu_read(Y);
        snprintf(what, sizeof what, "gelu fwd %dx%d, %s", R, C, tilings[t].name);
        tu_close(what, got, y_ref, N, 1e-5, 1e-6 * ymax);
        free(got);
        got = tu_read(G);
        snprintf(what, sizeof what, "gelu bwd (in place) vs finite differences, %s", tilings[t].name);
        tu_close(what, got, dx_ref, N, FD_RTOL, FD_AREL * dxmax);
        free(got);
        sw_tensor_free(X);
        sw_tensor_free(Y);
        sw_tensor_free(G);
    }

    /* far tails and special values: finite, exact limits */
    {
        const float v[] = {-100.0f, -60.0f, -45.0f, 45.0f, 60.0f, 100.0f, 1e30f, -1e30f};
        const int n = (int)(sizeof v / sizeof v[0]);
        sw_tensor *X = tu_tensor("xs", 1, n, v), *Y = tu_tensor("ys", 1, n, NULL);
        sw_tensor *G = tu_tensor("gs", 1, n, NULL);
        sw_tensor_fill(G, 1.0f);
        run(X, Y, 0, SW_ROWS, 1);
        run(X, G, 1, SW_ROWS, 1);
        float *y = tu_read(Y), *g = tu_read(G);
        int ok = 1;
        for (int i = 0; i < n; i++) {
            float ey = v[i] > 0 ? v[i] : 0.0f, eg = v[i] > 0 ? 1.0f : 0.0f;
            if (!(fabsf(y[i] - ey) <= 1e-6f * fabsf(ey)) || !(g[i] == eg)) {
                printf("  x=%g: y=%g (want %g), dgelu=%g (want %g)\n", v[i], y[i], ey, g[i], eg);
                ok = 0;
            }
        }
        tu_true("gelu fwd/bwd tails: y -> max(x, 0), gelu' -> step, no NaN", ok);
        free(y);
        free(g);
        sw_tensor_free(X);
        sw_tensor_free(Y);
        sw_tensor_free(G);
    }
    return tu_finish();
}
