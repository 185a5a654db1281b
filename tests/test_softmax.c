/* sw_softmax_fwd / sw_softmax_bwd: forward against a double reference
 * (large logits, -inf entries, an all -inf row), backward against central
 * differences of the double loss sum(softmax(x) * r); whole, row tiles and
 * strided column blocks of a wider tensor. */
#include <string.h>

#include "testutil.h"

enum { R = 37, C = 53, N = R * C };
/* Backward vs central differences, |got - fd| <= FD_RTOL |fd| + FD_AREL max|fd|:
 * worst err/limit 0.060 over 8 seeds. The differences (h = 1e-5 in double) are
 * good to ~1e-10 (same figure with h = 1e-4, 1e-6): the rest is the kernel's
 * fp32 rounding (its row sums); 10x tighter would leave less than a 10x margin. */
static const double FD_RTOL = 1e-5, FD_AREL = 1e-6;

static void ref_softmax(const double *x, double *y, int rows, int cols)
{
    for (int i = 0; i < rows; i++) {
        const double *xr = x + i * cols;
        double m = -INFINITY, s = 0;
        for (int c = 0; c < cols; c++) m = xr[c] > m ? xr[c] : m;
        if (m == -INFINITY) {
            for (int c = 0; c < cols; c++) y[i * cols + c] = 0;
            continue;
        }
        for (int c = 0; c < cols; c++) s += exp(xr[c] - m);
        for (int c = 0; c < cols; c++) y[i * cols + c] = exp(xr[c] - m) / s;
    }
}

static double ref_loss(const double *x, const double *r)
{
    static double y[N];
    ref_softmax(x, y, R, C);
    double l = 0;
    for (int i = 0; i < N; i++) l += y[i] * r[i];
    return l;
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    static float x[N], r[N];
    tu_rand(x, N, 51, 3.0f);
    for (int c = 0; c < C; c++) x[1 * C + c] += 1000.0f; /* large logits: needs the max shift */
    for (int c = 0; c < C; c++) x[2 * C + c] *= 10.0f;   /* peaked */
    tu_rand(r, N, 52, 1.0f);
    static double xd[N], rd[N], y_ref[N], dx_ref[N];
    for (int i = 0; i < N; i++) {
        xd[i] = x[i];
        rd[i] = r[i];
    }
    ref_softmax(xd, y_ref, R, C);
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
    const double dxmax = tu_maxabs(dx_ref, N);
    char what[160];

    for (int nt = 1; nt <= 3; nt += 2) {
        sw_tensor *X = tu_tensor("x", R, C, x), *Y = tu_tensor("y", R, C, NULL);
        sw_tensor *DY = tu_tensor("dy", R, C, r), *DX = tu_tensor("dx", R, C, NULL);
        sw_tensor_fill(Y, NAN);
        sw_tensor_fill(DX, NAN);
        starpu_data_handle_t *xt = sw_tensor_tiles(X, SW_ROWS, nt, STARPU_R);
        starpu_data_handle_t *yt = sw_tensor_tiles(Y, SW_ROWS, nt, STARPU_W);
        for (int i = 0; i < nt; i++) sw_softmax_fwd(xt[i], yt[i]);
        yt = sw_tensor_tiles(Y, SW_ROWS, nt, STARPU_R);
        starpu_data_handle_t *dyt = sw_tensor_tiles(DY, SW_ROWS, nt, STARPU_R);
        starpu_data_handle_t *dxt = sw_tensor_tiles(DX, SW_ROWS, nt, STARPU_W);
        for (int i = 0; i < nt; i++) sw_softmax_bwd(yt[i], dyt[i], dxt[i]);
        float *got = tu_read(Y);
        snprintf(what, sizeof what, "softmax fwd %dx%d, %d row tile(s)", R, C, nt);
        tu_close(what, got, y_ref, N, 1e-5, 1e-7);
        free(got);
        got = tu_read(DX);
        snprintf(what, sizeof what, "softmax bwd vs finite differences, %d row tile(s)", nt);
        tu_close(what, got, dx_ref, N, FD_RTOL, FD_AREL * dxmax);
        free(got);
        sw_tensor_free(X);
        sw_tensor_free(Y);
        sw_tensor_free(DY);
        sw_tensor_free(DX);
    }

    /* strided: the rows of [R, C] live in columns C.. of an [R, 2C] tensor */
    {
        static float x2[2 * N], r2[2 * N];
        for (int i = 0; i < R; i++)
            for (int c = 0; c < C; c++) {
                x2[i * 2 * C + c] = NAN;
                x2[i * 2 * C + C + c] = x[i * C + c];
                r2[i * 2 * C + c] = NAN;
                r2[i * 2 * C + C + c] = r[i * C + c];
            }
        sw_tensor *X = tu_tensor("x2", R, 2 * C, x2), *Y = tu_tensor("y2", R, 2 * C, NULL);
        sw_tensor *DY = tu_tensor("dy2", R, 2 * C, r2), *DX = tu_tensor("dx2", R, 2 * C, NULL);
        sw_tensor_fill(Y, -3.0f);
        starpu_data_handle_t *xt = sw_tensor_tiles(X, SW_COLS, 2, STARPU_R);
        starpu_data_handle_t *yt = sw_tensor_tiles(Y, SW_COLS, 2, STARPU_RW);
        sw_softmax_fwd(xt[1], yt[1]);
        starpu_data_handle_t *dyt = sw_tensor_tiles(DY, SW_COLS, 2, STARPU_R);
        starpu_data_handle_t *dxt = sw_tensor_tiles(DX, SW_COLS, 2, STARPU_W);
        sw_softmax_bwd(yt[1], dyt[1], dxt[1]);
        float *got = tu_read(Y), *g2 = tu_read(DX);
        static float y1[N], d1[N];
        int untouched = 1;
        for (int i = 0; i < R; i++)
            for (int c = 0; c < C; c++) {
                y1[i * C + c] = got[i * 2 * C + C + c];
                d1[i * C + c] = g2[i * 2 * C + C + c];
                untouched &= got[i * 2 * C + c] == -3.0f;
            }
        tu_close("softmax fwd on a strided column block", y1, y_ref, N, 1e-5, 1e-7);
        tu_true("softmax fwd on a strided column block leaves the other block alone", untouched);
        tu_close("softmax bwd on strided column blocks vs finite differences", d1, dx_ref, N, FD_RTOL,
                 FD_AREL * dxmax);
        free(got);
        free(g2);
        sw_tensor_free(X);
        sw_tensor_free(Y);
        sw_tensor_free(DY);
        sw_tensor_free(DX);
    }

    /* masked logits: -inf entries get probability 0, an all -inf row is 0 */
    {
        enum { MR = 3, MC = 21 };
        float xm[MR * MC];
        double xmd[MR * MC], ym[MR * MC];
        tu_rand(xm, MR * MC, 53, 2.0f);
        for (int c = 0; c < MC; c++) {
            if (c % 3 == 0) xm[0 * MC + c] = -INFINITY;
            if (c > 0) xm[1 * MC + c] = -INFINITY; /* one live entry: probability 1 */
            xm[2 * MC + c] = -INFINITY;
        }
        for (int i = 0; i < MR * MC; i++) xmd[i] = xm[i];
        ref_softmax(xmd, ym, MR, MC);
        sw_tensor *X = tu_tensor("xm", MR, MC, xm), *Y = tu_tensor("ym", MR, MC, NULL);
        sw_tensor_fill(Y, NAN);
        sw_softmax_fwd(sw_tensor_whole(X, STARPU_R), sw_tensor_whole(Y, STARPU_W));
        float *got = tu_read(Y);
        tu_close("softmax fwd with -inf entries and an all -inf row", got, ym, MR * MC, 1e-5, 1e-7);
        int zeros = 1;
        for (int i = 0; i < MR * MC; i++) zeros &= (xm[i] == -INFINITY) == (got[i] == 0.0f);
        tu_true("softmax fwd: exactly 0 where (and only where) the logit is -inf", zeros);
        free(got);
        sw_tensor_free(X);
        sw_tensor_free(Y);
    }
    return tu_finish();
}
