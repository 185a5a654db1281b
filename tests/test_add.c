/* sw_add, sw_axpy, sw_bias_add, sw_colsum against double references: whole,
 * row tiles and strided column tiles; colsum with beta 0 (y write-only, NaN
 * contents ignored) and beta 1, accumulated over row tiles, and into a
 * strided [C,1] vector; sw_zero on a column tile. These ops are linear: no backward codelets. */
#include <string.h>

#include "testutil.h"

enum { R = 37, C = 53, N = R * C };

struct tiling {
    sw_split split;
    int nt;
    const char *name;
};
static const struct tiling tilings[] = {
    {SW_ROWS, 1, "whole"}, {SW_ROWS, 3, "3 row tiles"}, {SW_COLS, 2, "2 strided column tiles"},
    {SW_COLS, 4, "4 strided column tiles"}};
enum { NTILINGS = sizeof tilings / sizeof tilings[0] };

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    static float x[N], y[N], bias[C], y0[C];
    static double ref[N];
    tu_rand(x, N, 41, 1.0f);
    tu_rand(y, N, 42, 3.0f);
    tu_rand(bias, C, 43, 2.0f);
    tu_rand(y0, C, 44, 1.0f);
    char what[160];

    for (int t = 0; t < NTILINGS; t++) {
        const struct tiling *tl = &tilings[t];
        /* z = x + y */
        sw_tensor *X = tu_tensor("x", R, C, x), *Y = tu_tensor("y", R, C, y), *Z = tu_tensor("z", R, C, NULL);
        sw_tensor_fill(Z, NAN);
        starpu_data_handle_t *xt = sw_tensor_tiles(X, tl->split, tl->nt, STARPU_R);
        starpu_data_handle_t *yt = sw_tensor_tiles(Y, tl->split, tl->nt, STARPU_R);
        starpu_data_handle_t *zt = sw_tensor_tiles(Z, tl->split, tl->nt, STARPU_W);
        for (int i = 0; i < tl->nt; i++) sw_add(xt[i], yt[i], zt[i]);
        float *got = tu_read(Z);
        for (int i = 0; i < N; i++) ref[i] = (double)x[i] + y[i];
        snprintf(what, sizeof what, "add z = x + y, %dx%d, %s", R, C, tl->name);
        tu_close(what, got, ref, N, 1e-6, 1e-7 * tu_maxabs(ref, N));
        free(got);

        /* y += -0.6 x */
        yt = sw_tensor_tiles(Y, tl->split, tl->nt, STARPU_RW);
        for (int i = 0; i < tl->nt; i++) sw_axpy(-0.6f, xt[i], yt[i]);
        got = tu_read(Y);
        for (int i = 0; i < N; i++) ref[i] = (double)y[i] - 0.6 * x[i];
        snprintf(what, sizeof what, "axpy y += -0.6 x, %s", tl->name);
        tu_close(what, got, ref, N, 1e-6, 1e-7 * tu_maxabs(ref, N));
        free(got);

        /* x[r,c] += bias[c]: bias whole for row tiles, bias column tiles for column tiles */
        sw_tensor *Bs = tu_tensor("bias", 1, C, bias);
        xt = sw_tensor_tiles(X, tl->split, tl->nt, STARPU_RW);
        starpu_data_handle_t *bt = tl->split == SW_COLS ? sw_tensor_tiles(Bs, SW_COLS, tl->nt, STARPU_R) : NULL;
        for (int i = 0; i < tl->nt; i++) sw_bias_add(xt[i], bt ? bt[i] : sw_tensor_whole(Bs, STARPU_R));
        got = tu_read(X);
        for (int i = 0; i < N; i++) ref[i] = (double)x[i] + bias[i % C];
        snprintf(what, sizeof what, "bias_add x += bias[1,c], %s", tl->name);
        tu_close(what, got, ref, N, 1e-6, 1e-7 * tu_maxabs(ref, N));
        free(got);

        sw_tensor_free(X);
        sw_tensor_free(Y);
        sw_tensor_free(Z);
        sw_tensor_free(Bs);
    }

    /* colsum: y[1,c] = beta y + alpha sum_r x[r,c] */
    static double cs[C];
    for (int c = 0; c < C; c++) {
        cs[c] = 0;
        for (int r = 0; r < R; r++) cs[c] += x[r * C + c];
    }
    for (int t = 0; t < NTILINGS; t++) {
        const struct tiling *tl = &tilings[t];
        for (int beta = 0; beta < 2; beta++) {
            sw_tensor *X = tu_tensor("x", R, C, x), *Y = tu_tensor("colsum", 1, C, beta ? y0 : NULL);
            if (!beta) sw_tensor_fill(Y, NAN);
            starpu_data_handle_t *xt = sw_tensor_tiles(X, tl->split, tl->nt, STARPU_R);
            if (tl->split == SW_COLS) {
                starpu_data_handle_t *yt = sw_tensor_tiles(Y, SW_COLS, tl->nt, beta ? STARPU_RW : STARPU_W);
                for (int i = 0; i < tl->nt; i++) sw_colsum(xt[i], yt[i], 0.5f, (float)beta);
            } else {
                /* row tiles: the first tile sets (or scales) y, the others add */
                starpu_data_handle_t yh = sw_tensor_whole(Y, STARPU_RW);
                for (int i = 0; i < tl->nt; i++) sw_colsum(xt[i], yh, 0.5f, i == 0 ? (float)beta : 1.0f);
            }
            float *got = tu_read(Y);
            for (int c = 0; c < C; c++) ref[c] = 0.5 * cs[c] + (beta ? (double)y0[c] : 0.0);
            snprintf(what, sizeof what, "colsum y = %d y + 0.5 sum_r x, %s", beta, tl->name);
            tu_close(what, got, ref, C, 1e-6, 1e-6 * tu_maxabs(ref, C));
            free(got);
            sw_tensor_free(X);
            sw_tensor_free(Y);
        }
    }
    /* zero: column tile 1 of 2 of a NaN-filled tensor; the other tile left alone */
    {
        sw_tensor *X = tu_tensor("zeroed", R, C, x);
        starpu_data_handle_t *xt = sw_tensor_tiles(X, SW_COLS, 2, STARPU_W);
        sw_zero(xt[1]);
        float *got = tu_read(X);
        int64_t c0 = C - C / 2, zeros = 0, kept = 0; /* tile 1: columns c0 .. C - 1 */
        for (int i = 0; i < N; i++) i % C >= c0 ? (zeros += got[i] == 0.0f) : (kept += got[i] == x[i]);
        tu_true("zero: a column tile's every element 0", zeros == (int64_t)R * (C - c0));
        tu_true("zero: the other column tile untouched", kept == (int64_t)R * c0);
        free(got);
        sw_tensor_free(X);
    }
    /* colsum wider than one block of accumulated columns */
    {
        enum { RW = 7, CW = 1100 };
        static float xw[RW * CW];
        static double rw[CW];
        tu_rand(xw, RW * CW, 45, 1.0f);
        for (int c = 0; c < CW; c++) {
            rw[c] = 0;
            for (int r = 0; r < RW; r++) rw[c] += xw[r * CW + c];
        }
        sw_tensor *X = tu_tensor("xw", RW, CW, xw), *Y = tu_tensor("yw", 1, CW, NULL);
        sw_tensor_fill(Y, NAN);
        sw_colsum(sw_tensor_whole(X, STARPU_R), sw_tensor_whole(Y, STARPU_W), 1.0f, 0.0f);
        float *got = tu_read(Y);
        tu_close("colsum 7x1100 (several column blocks), beta 0", got, rw, CW, 1e-6, 1e-6 * tu_maxabs(rw, CW));
        free(got);
        sw_tensor_free(X);
        sw_tensor_free(Y);
    }
    /* colsum into a strided [C,1] vector (column 1 of a [C,2] tensor), beta 1 */
    {
        float y2[2 * C];
        for (int c = 0; c < C; c++) {
            y2[2 * c] = -7.0f;
            y2[2 * c + 1] = y0[c];
        }
        sw_tensor *X = tu_tensor("x", R, C, x), *Y = tu_tensor("y2", C, 2, y2);
        starpu_data_handle_t *yc = sw_tensor_tiles(Y, SW_COLS, 2, STARPU_RW);
        sw_colsum(sw_tensor_whole(X, STARPU_R), yc[1], -2.0f, 1.0f);
        float *got = tu_read(Y), col[C];
        int other_ok = 1;
        for (int c = 0; c < C; c++) {
            col[c] = got[2 * c + 1];
            ref[c] = y0[c] - 2.0 * cs[c];
            other_ok &= got[2 * c] == -7.0f;
        }
        tu_close("colsum into a strided [C,1] vector, alpha -2, beta 1", col, ref, C, 1e-6, 1e-6 * tu_maxabs(ref, C));
        tu_true("colsum into a strided vector leaves the other column alone", other_ok);
        free(got);
        sw_tensor_free(X);
        sw_tensor_free(Y);
    }
    /* bias_add with a strided [C,1] bias */
    {
        float b2[2 * C];
        for (int c = 0; c < C; c++) {
            b2[2 * c] = bias[c];
            b2[2 * c + 1] = NAN;
        }
        sw_tensor *X = tu_tensor("x", R, C, x), *Bs = tu_tensor("b2", C, 2, b2);
        starpu_data_handle_t *bc = sw_tensor_tiles(Bs, SW_COLS, 2, STARPU_R);
        sw_bias_add(sw_tensor_whole(X, STARPU_RW), bc[0]);
        float *got = tu_read(X);
        for (int i = 0; i < N; i++) ref[i] = (double)x[i] + bias[i % C];
        tu_close("bias_add with a strided [C,1] bias", got, ref, N, 1e-6, 1e-7 * tu_maxabs(ref, N));
        free(got);
        sw_tensor_free(X);
        sw_tensor_free(Bs);
    }
    /* copy_flat: a [R, C] tensor into a column tile of a flat [1, *] bucket
     * (row-major order), accumulated a second time, and back into a strided
     * column tile of a wider tensor */
    {
        const int64_t sizes[3] = {5, N, 7};
        sw_tensor *X = tu_tensor("x", R, C, x), *F = tu_tensor("flat", 1, N + 12, NULL);
        sw_tensor *W = tu_tensor("wide", R, 2 * C, NULL);
        starpu_data_handle_t slot = sw_tensor_split(F, SW_COLS, 3, sizes, STARPU_W)[1];
        sw_copy_flat(sw_tensor_whole(X, STARPU_R), slot, 0);
        sw_copy_flat(sw_tensor_whole(X, STARPU_R), sw_tensor_split(F, SW_COLS, 3, sizes, STARPU_RW)[1], 1);
        sw_copy_flat(sw_tensor_split(F, SW_COLS, 3, sizes, STARPU_R)[1], sw_tensor_tiles(W, SW_COLS, 2, STARPU_W)[1], 0);
        float *got = tu_read(W);
        float back[N];
        for (int64_t r = 0; r < R; r++)
            for (int64_t c = 0; c < C; c++) back[r * C + c] = got[r * 2 * C + C + c];
        for (int i = 0; i < N; i++) ref[i] = 2.0 * x[i];
        tu_close("copy_flat into a bucket slot, accumulated, and back into a strided tile", back, ref, N, 1e-6, 0);
        free(got);
        sw_tensor_free(X);
        sw_tensor_free(F);
        sw_tensor_free(W);
    }
    /* copy_rows: a strided column tile of x's first 5 rows into rows 9..13 of a cache whose other rows stay */
    {
        sw_tensor *X = tu_tensor("x", R, C, x), *Y = tu_tensor("cache", 20, C / 2, y);
        int64_t cols[2] = {C / 2, C - C / 2}, rows[2] = {5, R - 5};
        sw_copy_rows(sw_tensor_grid(X, 2, rows, 2, cols, STARPU_R)[0], sw_tensor_whole(Y, STARPU_RW), 9);
        float *got = tu_read(Y);
        for (int64_t r = 0; r < 20; r++)
            for (int64_t c = 0; c < C / 2; c++)
                ref[r * (C / 2) + c] = r >= 9 && r < 14 ? x[(r - 9) * C + c] : y[r * (C / 2) + c];
        tu_close("copy_rows: 5 rows of a strided tile into rows 9..13, the other rows kept", got, ref, 20 * (C / 2), 0, 0);
        free(got);
        sw_tensor_free(X);
        sw_tensor_free(Y);
    }
    return tu_finish();
}
