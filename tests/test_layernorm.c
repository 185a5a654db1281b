/* sw_layernorm_fwd / sw_layernorm_bwd: forward against a double reference,
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

struct ln_ref {
    double x[R * C], w[C], b[C], r[R * C];
};

static void ref_fwd(const struct ln_ref *p, double *y, double *mean, double *rstd)
{
    for (int i = 0; i < R; i++) {
        double m = 0, v = 0;
        for (int c = 0; c < C; c++) m += p->x[i * C + c];
        m /= C;
        for (int c = 0; c < C; c++) v += (p->x[i * C + c] - m) * (p->x[i * C + c] - m);
        v /= C;
        double s = 1.0 / sqrt(v + EPS);
        for (int c = 0; c < C; c++) y[i * C + c] = (p->x[i * C + c] - m) * s * p->w[c] + p->b[c];
        if (mean) mean[i] = m;
        if (rstd) rstd[i] = s;
    }
}

static double ref_loss(const void *ctx)
{
    const struct ln_ref *p = ctx;
    static double y[R * C];
    ref_fwd(p, y, NULL, NULL);
    double l = 0;
    for (int i = 0; i < R * C; i++) l += y[i] * p->r[i];
    return l;
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    static float x[R * C], w[C], b[C], r[R * C], d0[R * C];
    tu_rand(x, R * C, 11, 2.0f);
    for (int i = 0; i < R * C; i++) x[i] += 0.7f; /* a mean away from 0 */
    tu_rand(w, C, 12, 0.5f);
    for (int c = 0; c < C; c++) w[c] += 1.0f;
    tu_rand(b, C, 13, 0.5f);
    tu_rand(r, R * C, 14, 1.0f);
    tu_rand(d0, R * C, 15, 1.0f);

    static struct ln_ref p;
    tu_to_double(p.x, x, R * C);
    tu_to_double(p.w, w, C);
    tu_to_double(p.b, b, C);
    tu_to_double(p.r, r, R * C);
    static double y_ref[R * C], mean_ref[R], rstd_ref[R], dx_ref[R * C], dw_ref[C], db_ref[C], tmp[R * C];
    ref_fwd(&p, y_ref, mean_ref, rstd_ref);
    tu_fd_grad(ref_loss, &p, p.x, R * C, dx_ref);
    tu_fd_grad(ref_loss, &p, p.w, C, dw_ref);
    tu_fd_grad(ref_loss, &p, p.b, C, db_ref);
    const double ymax = tu_maxabs(y_ref, R * C), dxmax = tu_maxabs(dx_ref, R * C);
    const double dwmax = tu_maxabs(dw_ref, C), dbmax = tu_maxabs(db_ref, C);
    char what[160];

    const int tilings[] = {1, 3, 5};
    for (int ti = 0; ti < 3; ti++) {
        const int nt = tilings[ti];
        sw_tensor *X = tu_tensor("x", R, C, x), *W = tu_tensor("w", 1, C, w), *B = tu_tensor("b", 1, C, b);
        sw_tensor *Y = tu_tensor("y", R, C, NULL), *Mn = tu_tensor("mean", R, 1, NULL);
        sw_tensor *Rs = tu_tensor("rstd", R, 1, NULL), *DY = tu_tensor("dy", R, C, r);
        sw_tensor *DX = tu_tensor("dx", R, C, NULL), *DXa = tu_tensor("dx_acc", R, C, d0);
        sw_tensor *DW = tu_tensor("dw_part", nt, C, NULL), *DB = tu_tensor("db_part", nt, C, NULL);
        sw_tensor *DW2 = tu_tensor("dw_part2", nt, C, NULL), *DB2 = tu_tensor("db_part2", nt, C, NULL);
        sw_tensor_fill(Y, NAN);
        sw_tensor_fill(DX, NAN);
        starpu_data_handle_t *xt = sw_tensor_tiles(X, SW_ROWS, nt, STARPU_R);
        starpu_data_handle_t *yt = sw_tensor_tiles(Y, SW_ROWS, nt, STARPU_W);
        starpu_data_handle_t *mt = sw_tensor_tiles(Mn, SW_ROWS, nt, STARPU_W);
        starpu_data_handle_t *rt = sw_tensor_tiles(Rs, SW_ROWS, nt, STARPU_W);
        starpu_data_handle_t hw = sw_tensor_whole(W, STARPU_R), hb = sw_tensor_whole(B, STARPU_R);
        for (int i = 0; i < nt; i++) sw_layernorm_fwd(xt[i], hw, hb, yt[i], mt[i], rt[i], EPS);

        mt = sw_tensor_tiles(Mn, SW_ROWS, nt, STARPU_R);
        rt = sw_tensor_tiles(Rs, SW_ROWS, nt, STARPU_R);
        starpu_data_handle_t *dyt = sw_tensor_tiles(DY, SW_ROWS, nt, STARPU_R);
        starpu_data_handle_t *dxt = sw_tensor_tiles(DX, SW_ROWS, nt, STARPU_W);
        starpu_data_handle_t *dxat = sw_tensor_tiles(DXa, SW_ROWS, nt, STARPU_RW);
        starpu_data_handle_t *dwt = sw_tensor_tiles(DW, SW_ROWS, nt, STARPU_W);
        starpu_data_handle_t *dbt = sw_tensor_tiles(DB, SW_ROWS, nt, STARPU_W);
        starpu_data_handle_t *dwt2 = sw_tensor_tiles(DW2, SW_ROWS, nt, STARPU_W);
        starpu_data_handle_t *dbt2 = sw_tensor_tiles(DB2, SW_ROWS, nt, STARPU_W);
        for (int i = 0; i < nt; i++) {
            sw_layernorm_bwd(dyt[i], xt[i], hw, mt[i], rt[i], dxt[i], dwt[i], dbt[i], 0);
            sw_layernorm_bwd(dyt[i], xt[i], hw, mt[i], rt[i], dxat[i], dwt2[i], dbt2[i], 1);
        }

        float *got = tu_read(Y);
        snprintf(what, sizeof what, "layernorm fwd y, %dx%d, %d row tile(s)", R, C, nt);
        tu_close(what, got, y_ref, R * C, 1e-5, 1e-6 * ymax);
        free(got);
        got = tu_read(Mn);
        snprintf(what, sizeof what, "layernorm fwd mean, %d row tile(s)", nt);
        tu_close(what, got, mean_ref, R, 1e-5, 1e-6);
        free(got);
        got = tu_read(Rs);
        snprintf(what, sizeof what, "layernorm fwd rstd, %d row tile(s)", nt);
        tu_close(what, got, rstd_ref, R, 1e-5, 0);
        free(got);

        got = tu_read(DX);
        snprintf(what, sizeof what, "layernorm bwd dx vs finite differences, %d row tile(s)", nt);
        tu_close(what, got, dx_ref, R * C, FD_RTOL, FD_AREL * dxmax);
        free(got);
        got = tu_read(DXa);
        for (int i = 0; i < R * C; i++) tmp[i] = d0[i] + dx_ref[i];
        snprintf(what, sizeof what, "layernorm bwd dx accumulate (+=), %d row tile(s)", nt);
        tu_close(what, got, tmp, R * C, FD_RTOL, FD_AREL * dxmax);
        free(got);
        sw_tensor *parts[4] = {DW, DB, DW2, DB2};
        for (int k = 0; k < 4; k++) {
            got = tu_read(parts[k]);
            float sum[C] = {0};
            for (int i = 0; i < nt; i++)
                for (int c = 0; c < C; c++) sum[c] += got[i * C + c];
            snprintf(what, sizeof what, "layernorm bwd %s (sum of %d tile parts%s) vs finite differences",
                     k % 2 ? "db" : "dw", nt, k >= 2 ? ", accumulate run" : "");
            tu_close(what, sum, k % 2 ? db_ref : dw_ref, C, FD_RTOL, FD_AREL * (k % 2 ? dbmax : dwmax));
            free(got);
        }
        sw_tensor *all[] = {X, W, B, Y, Mn, Rs, DY, DX, DXa, DW, DB, DW2, DB2};
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) sw_tensor_free(all[k]);
    }

    /* strided vectors: w as a [C,1] column of a [C,2] tensor, mean / rstd as
     * [R,1] columns of [R,2] tensors, dw_part as a [C,1] column (ld 2) */
    {
        float w2[2 * C], b2[2 * C];
        for (int c = 0; c < C; c++) {
            w2[2 * c] = w[c];
            w2[2 * c + 1] = NAN;
            b2[2 * c] = NAN;
            b2[2 * c + 1] = b[c];
        }
        sw_tensor *X = tu_tensor("x", R, C, x), *W = tu_tensor("w2", C, 2, w2), *B = tu_tensor("b2", C, 2, b2);
        sw_tensor *Y = tu_tensor("y", R, C, NULL), *Mn = tu_tensor("mean2", R, 2, NULL);
        sw_tensor *Rs = tu_tensor("rstd2", R, 2, NULL), *DY = tu_tensor("dy", R, C, r);
        sw_tensor *DX = tu_tensor("dx", R, C, NULL), *DWB = tu_tensor("dwb", C, 2, NULL);
        starpu_data_handle_t *wc = sw_tensor_tiles(W, SW_COLS, 2, STARPU_R);
        starpu_data_handle_t *bc = sw_tensor_tiles(B, SW_COLS, 2, STARPU_R);
        starpu_data_handle_t *mc = sw_tensor_tiles(Mn, SW_COLS, 2, STARPU_W);
        starpu_data_handle_t *rc = sw_tensor_tiles(Rs, SW_COLS, 2, STARPU_W);
        sw_layernorm_fwd(sw_tensor_whole(X, STARPU_R), wc[0], bc[1], sw_tensor_whole(Y, STARPU_W), mc[1], rc[0],
                         EPS);
        mc = sw_tensor_tiles(Mn, SW_COLS, 2, STARPU_R);
        rc = sw_tensor_tiles(Rs, SW_COLS, 2, STARPU_R);
        starpu_data_handle_t *dc = sw_tensor_tiles(DWB, SW_COLS, 2, STARPU_W);
        sw_layernorm_bwd(sw_tensor_whole(DY, STARPU_R), sw_tensor_whole(X, STARPU_R), wc[0], mc[1], rc[0],
                         sw_tensor_whole(DX, STARPU_W), dc[1], dc[0], 0);
        float *got = tu_read(Y);
        tu_close("layernorm fwd y, strided [n,1] w, b, mean, rstd", got, y_ref, R * C, 1e-5, 1e-6 * ymax);
        free(got);
        got = tu_read(Mn);
        float col[R > C ? R : C];
        for (int i = 0; i < R; i++) col[i] = got[2 * i + 1];
        tu_close("layernorm fwd mean into a strided [R,1] column", col, mean_ref, R, 1e-5, 1e-6);
        free(got);
        got = tu_read(DX);
        tu_close("layernorm bwd dx, strided vectors", got, dx_ref, R * C, FD_RTOL, FD_AREL * dxmax);
        free(got);
        got = tu_read(DWB);
        for (int c = 0; c < C; c++) col[c] = got[2 * c + 1];
        tu_close("layernorm bwd dw_part into a strided [C,1] column", col, dw_ref, C, FD_RTOL, FD_AREL * dwmax);
        for (int c = 0; c < C; c++) col[c] = got[2 * c];
        tu_close("layernorm bwd db_part into a strided [C,1] column", col, db_ref, C, FD_RTOL, FD_AREL * dbmax);
        free(got);
        sw_tensor *all[] = {X, W, B, Y, Mn, Rs, DY, DX, DWB};
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) sw_tensor_free(all[k]);
    }
    return tu_finish();
}
