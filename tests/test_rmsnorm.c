/* sw_rmsnorm_fwd / sw_rmsnorm_bwd: forward against a double reference,
 * backward against central differences of the double reference loss
 * sum(y * r); one and several row tiles, strided vectors, accumulate flag. */
#include <string.h>

#include "testutil.h"

enum { R = 37, C = 53 };
static const float EPS = 1e-5f;
/* Backward vs central differences, |got - fd| <= FD_RTOL |fd| + FD_AREL max|fd|:
 * worst err/limit 0.10 over 20 seeds. The differences (h = 1e-5 in double) are
 * good to ~1e-10 (same figure with h = 1e-4, 1e-6): the rest is the kernel's
 * fp32 rounding (its row sums); 10x tighter would leave less than a 10x margin. */
static const double FD_RTOL = 1e-5, FD_AREL = 1e-6;

struct rms_ref {
    double x[R * C], w[C], r[R * C];
};

static void ref_fwd(const struct rms_ref *p, double *y, double *rstd)
{
    for (int i = 0; i < R; i++) {
        double ms = 0;
        for (int c = 0; c < C; c++) ms += p->x[i * C + c] * p->x[i * C + c];
        double s = 1.0 / sqrt(ms / C + EPS);
        for (int c = 0; c < C; c++) y[i * C + c] = p->w[c] * p->x[i * C + c] * s;
        if (rstd) rstd[i] = s;
    }
}

static double ref_loss(const void *ctx)
{
    const struct rms_ref *p = ctx;
    static double y[R * C];
    ref_fwd(p, y, NULL);
    double l = 0;
    for (int i = 0; i < R * C; i++) l += y[i] * p->r[i];
    return l;
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    static float x[R * C], w[C], r[R * C], d0[R * C];
    tu_rand(x, R * C, 21, 2.0f);
    tu_rand(w, C, 22, 0.5f);
    for (int c = 0; c < C; c++) w[c] += 1.0f;
    tu_rand(r, R * C, 23, 1.0f);
    tu_rand(d0, R * C, 24, 1.0f);

    static struct rms_ref p;
    tu_to_double(p.x, x, R * C);
    tu_to_double(p.w, w, C);
    tu_to_double(p.r, r, R * C);
    static double y_ref[R * C], rstd_ref[R], dx_ref[R * C], dw_ref[C], tmp[R * C];
    ref_fwd(&p, y_ref, rstd_ref);
    tu_fd_grad(ref_loss, &p, p.x, R * C, dx_ref);
    tu_fd_grad(ref_loss, &p, p.w, C, dw_ref);
    const double ymax = tu_maxabs(y_ref, R * C), dxmax = tu_maxabs(dx_ref, R * C), dwmax = tu_maxabs(dw_ref, C);
    char what[160];

    const int tilings[] = {1, 3, 5};
    for (int ti = 0; ti < 3; ti++) {
        const int nt = tilings[ti];
        sw_tensor *X = tu_tensor("x", R, C, x), *W = tu_tensor("w", 1, C, w);
        sw_tensor *Y = tu_tensor("y", R, C, NULL), *Rs = tu_tensor("rstd", R, 1, NULL);
        sw_tensor *DY = tu_tensor("dy", R, C, r), *DX = tu_tensor("dx", R, C, NULL);
        sw_tensor *DXa = tu_tensor("dx_acc", R, C, d0);
        sw_tensor *DW = tu_tensor("dw_part", nt, C, NULL), *DW2 = tu_tensor("dw_part2", nt, C, NULL);
        sw_tensor_fill(Y, NAN);
        sw_tensor_fill(DX, NAN);
        starpu_data_handle_t *xt = sw_tensor_tiles(X, SW_ROWS, nt, STARPU_R);
        starpu_data_handle_t *yt = sw_tensor_tiles(Y, SW_ROWS, nt, STARPU_W);
        starpu_data_handle_t *rt = sw_tensor_tiles(Rs, SW_ROWS, nt, STARPU_W);
        starpu_data_handle_t hw = sw_tensor_whole(W, STARPU_R);
        for (int i = 0; i < nt; i++) sw_rmsnorm_fwd(xt[i], hw, yt[i], rt[i], EPS);

        rt = sw_tensor_tiles(Rs, SW_ROWS, nt, STARPU_R);
        starpu_data_handle_t *dyt = sw_tensor_tiles(DY, SW_ROWS, nt, STARPU_R);
        starpu_data_handle_t *dxt = sw_tensor_tiles(DX, SW_ROWS, nt, STARPU_W);
        starpu_data_handle_t *dxat = sw_tensor_tiles(DXa, SW_ROWS, nt, STARPU_RW);
        starpu_data_handle_t *dwt = sw_tensor_tiles(DW, SW_ROWS, nt, STARPU_W);
        starpu_data_handle_t *dwt2 = sw_tensor_tiles(DW2, SW_ROWS, nt, STARPU_W);
        for (int i = 0; i < nt; i++) {
            sw_rmsnorm_bwd(dyt[i], xt[i], hw, rt[i], dxt[i], dwt[i], 0);
            sw_rmsnorm_bwd(dyt[i], xt[i], hw, rt[i], dxat[i], dwt2[i], 1);
        }

        float *got = tu_read(Y);
        snprintf(what, sizeof what, "rmsnorm fwd y, %dx%d, %d row tile(s)", R, C, nt);
        tu_close(what, got, y_ref, R * C, 1e-5, 1e-6 * ymax);
        free(got);
        got = tu_read(Rs);
        snprintf(what, sizeof what, "rmsnorm fwd rstd, %d row tile(s)", nt);
        tu_close(what, got, rstd_ref, R, 1e-5, 0);
        free(got);
        got = tu_read(DX);
        snprintf(what, sizeof what, "rmsnorm bwd dx vs finite differences, %d row tile(s)", nt);
        tu_close(what, got, dx_ref, R * C, FD_RTOL, FD_AREL * dxmax);
        free(got);
        got = tu_read(DXa);
        for (int i = 0; i < R * C; i++) tmp[i] = d0[i] + dx_ref[i];
        snprintf(what, sizeof what, "rmsnorm bwd dx accumulate (+=), %d row tile(s)", nt);
        tu_close(what, got, tmp, R * C, FD_RTOL, FD_AREL * dxmax);
        free(got);
        sw_tensor *parts[2] = {DW, DW2};
        for (int k = 0; k < 2; k++) {
            got = tu_read(parts[k]);
            float sum[C] = {0};
            for (int i = 0; i < nt; i++)
                for (int c = 0; c < C; c++) sum[c] += got[i * C + c];
            snprintf(what, sizeof what, "rmsnorm bwd dw (sum of %d tile parts%s) vs finite differences", nt,
                     k ? ", accumulate run" : "");
            tu_close(what, sum, dw_ref, C, FD_RTOL, FD_AREL * dwmax);
            free(got);
        }
        sw_tensor *all[] = {X, W, Y, Rs, DY, DX, DXa, DW, DW2};
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) sw_tensor_free(all[k]);
    }

    /* strided vectors: w and dw_part as [C,1] columns of [C,2] tensors, rstd
     * as an [R,1] column of an [R,2] tensor */
    {
        float w2[2 * C];
        for (int c = 0; c < C; c++) {
            w2[2 * c] = NAN;
            w2[2 * c + 1] = w[c];
        }
        sw_tensor *X = tu_tensor("x", R, C, x), *W = tu_tensor("w2", C, 2, w2);
        sw_tensor *Y = tu_tensor("y", R, C, NULL), *Rs = tu_tensor("rstd2", R, 2, NULL);
        sw_tensor *DY = tu_tensor("dy", R, C, r), *DX = tu_tensor("dx", R, C, NULL);
        sw_tensor *DW = tu_tensor("dw2", C, 2, NULL);
        starpu_data_handle_t *wc = sw_tensor_tiles(W, SW_COLS, 2, STARPU_R);
        starpu_data_handle_t *rc = sw_tensor_tiles(Rs, SW_COLS, 2, STARPU_W);
        sw_rmsnorm_fwd(sw_tensor_whole(X, STARPU_R), wc[1], sw_tensor_whole(Y, STARPU_W), rc[1], EPS);
        rc = sw_tensor_tiles(Rs, SW_COLS, 2, STARPU_R);
        starpu_data_handle_t *dc = sw_tensor_tiles(DW, SW_COLS, 2, STARPU_W);
        sw_rmsnorm_bwd(sw_tensor_whole(DY, STARPU_R), sw_tensor_whole(X, STARPU_R), wc[1], rc[1],
                       sw_tensor_whole(DX, STARPU_W), dc[0], 0);
        float *got = tu_read(Y);
        tu_close("rmsnorm fwd y, strided [n,1] w and rstd", got, y_ref, R * C, 1e-5, 1e-6 * ymax);
        free(got);
        float col[R > C ? R : C];
        got = tu_read(Rs);
        for (int i = 0; i < R; i++) col[i] = got[2 * i + 1];
        tu_close("rmsnorm fwd rstd into a strided [R,1] column", col, rstd_ref, R, 1e-5, 0);
        free(got);
        got = tu_read(DX);
        tu_close("rmsnorm bwd dx, strided vectors", got, dx_ref, R * C, FD_RTOL, FD_AREL * dxmax);
        free(got);
        got = tu_read(DW);
        for (int c = 0; c < C; c++) col[c] = got[2 * c];
        tu_close("rmsnorm bwd dw_part into a strided [C,1] column", col, dw_ref, C, FD_RTOL, FD_AREL * dwmax);
        free(got);
        sw_tensor *all[] = {X, W, Y, Rs, DY, DX, DW};
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) sw_tensor_free(all[k]);
    }
    return tu_finish();
}
