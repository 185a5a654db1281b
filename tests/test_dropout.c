/* sw_dropout_fwd / sw_dropout_bwd: mask from philox.h (the reference draws
 * the same bits), identical whatever the tiling (bit for bit), keep rate
 * close to 1 - p, backward uses the same mask, p = 0 is the identity, and
 * the backward matches central differences of the double reference loss. */
#include <string.h>

#include "philox.h"
#include "testutil.h"

enum { R = 61, C = 97, N = R * C };

static sw_rng_key base_key(void)
{
    sw_rng_key k;
    memset(&k, 0, sizeof k);
    k.seed = 0x5eed1234abcdull;
    k.step = 7;
    k.layer = 3;
    k.op = 2;
    k.row0 = 0;
    k.col0 = 0;
    k.ld_global = C;
    return k;
}

/* reference mask of a [rows, cols] block at (row0, col0) of a global tensor with ld_global columns */
static void ref_mask(const sw_rng_key *k, int rows, int cols, float p, unsigned char *m)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            m[r * cols + c] = (unsigned char)sw_dropout_keep(
                k->seed, k->step, k->layer, k->op, (uint64_t)((k->row0 + r) * k->ld_global + k->col0 + c), p);
}

/* y = dropout(x) with the tensor cut into nt tiles along split; the key of
 * each tile carries the tile's global position */
static float *run_fwd(const float *x, float p, const sw_rng_key *key, sw_split split, int nt)
{
    sw_tensor *X = tu_tensor("x", R, C, x), *Y = tu_tensor("y", R, C, NULL);
    sw_tensor_fill(Y, NAN);
    starpu_data_handle_t *xt = sw_tensor_tiles(X, split, nt, STARPU_R);
    starpu_data_handle_t *yt = sw_tensor_tiles(Y, split, nt, STARPU_W);
    for (int i = 0; i < nt; i++) {
        int64_t first, count;
        sw_tile_range(split == SW_ROWS ? R : C, nt, i, &first, &count);
        sw_rng_key k = *key;
        if (split == SW_ROWS) k.row0 += first;
        else k.col0 += first;
        sw_dropout_fwd(xt[i], yt[i], p, &k);
    }
    float *y = tu_read(Y);
    sw_tensor_free(X);
    sw_tensor_free(Y);
    return y;
}

static float *run_bwd(const float *g, float p, const sw_rng_key *key, sw_split split, int nt)
{
    sw_tensor *G = tu_tensor("grad", R, C, g);
    starpu_data_handle_t *gt = sw_tensor_tiles(G, split, nt, STARPU_RW);
    for (int i = 0; i < nt; i++) {
        int64_t first, count;
        sw_tile_range(split == SW_ROWS ? R : C, nt, i, &first, &count);
        sw_rng_key k = *key;
        if (split == SW_ROWS) k.row0 += first;
        else k.col0 += first;
        sw_dropout_bwd(gt[i], p, &k);
    }
    float *out = tu_read(G);
    sw_tensor_free(G);
    return out;
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    static float x[N], dy[N];
    static double ref[N], fd[N], xd[N], rd[N];
    static unsigned char mask[N];
    tu_rand(x, N, 61, 1.0f);
    tu_rand(dy, N, 62, 1.0f);
    for (int i = 0; i < N; i++) { /* no exact zeros, so y == 0 means dropped */
        if (x[i] == 0.0f) x[i] = 0.5f;
        if (dy[i] == 0.0f) dy[i] = 0.5f;
    }
    const sw_rng_key key = base_key();
    char what[160];

    const float ps[] = {0.1f, 0.5f};
    for (int pi = 0; pi < 2; pi++) {
        const float p = ps[pi];
        ref_mask(&key, R, C, p, mask);
        for (int i = 0; i < N; i++) ref[i] = mask[i] ? x[i] / (1.0 - p) : 0.0;

        float *y1 = run_fwd(x, p, &key, SW_ROWS, 1);
        float *y3 = run_fwd(x, p, &key, SW_ROWS, 3);
        float *yc = run_fwd(x, p, &key, SW_COLS, 2);
        snprintf(what, sizeof what, "dropout fwd p=%.1f %dx%d vs reference mask and 1/(1-p) scale", p, R, C);
        tu_close(what, y1, ref, N, 1e-6, 0);
        snprintf(what, sizeof what, "dropout fwd p=%.1f: 1 tile, 3 row tiles, 2 column tiles bit-identical", p);
        tu_true(what, !memcmp(y1, y3, sizeof x) && !memcmp(y1, yc, sizeof x));

        /* keep rate: binomial(N, 1-p), allow 5 standard deviations */
        int64_t kept = 0;
        for (int i = 0; i < N; i++) kept += y1[i] != 0.0f;
        double mu = N * (1.0 - p), sd = sqrt(N * p * (1.0 - p));
        snprintf(what, sizeof what, "dropout p=%.1f keep rate %.4f (expected %.4f +- %.4f)", p, (double)kept / N,
                 1.0 - p, 5 * sd / N);
        tu_true(what, fabs((double)kept - mu) <= 5 * sd);

        /* backward: same mask, dx = dy / (1 - p) where kept */
        float *g1 = run_bwd(dy, p, &key, SW_ROWS, 1);
        float *g3 = run_bwd(dy, p, &key, SW_ROWS, 3);
        float *gc = run_bwd(dy, p, &key, SW_COLS, 2);
        int same = 1;
        for (int i = 0; i < N; i++) same &= (g1[i] != 0.0f) == (y1[i] != 0.0f);
        snprintf(what, sizeof what, "dropout bwd p=%.1f uses the forward's mask", p);
        tu_true(what, same);
        snprintf(what, sizeof what, "dropout bwd p=%.1f: 1 tile, 3 row tiles, 2 column tiles bit-identical", p);
        tu_true(what, !memcmp(g1, g3, sizeof x) && !memcmp(g1, gc, sizeof x));
        /* finite differences of the double reference loss sum(dropout(x) * r), r = dy */
        for (int i = 0; i < N; i++) {
            xd[i] = x[i];
            rd[i] = dy[i];
        }
        const double h = 1e-3; /* the loss is linear in x: any step is exact up to rounding */
        for (int i = 0; i < N; i++) {
            /* only the term of element i depends on x[i] */
            double lp = (mask[i] ? (xd[i] + h) / (1.0 - p) : 0.0) * rd[i];
            double lm = (mask[i] ? (xd[i] - h) / (1.0 - p) : 0.0) * rd[i];
            fd[i] = (lp - lm) / (2 * h);
        }
        snprintf(what, sizeof what, "dropout bwd p=%.1f vs finite differences", p);
        /* dy / (1 - p) in fp32 is within ~2 ulps: worst err/limit 0.094 over 8 seeds */
        tu_close(what, g1, fd, N, 1e-6, 1e-7 * tu_maxabs(fd, N));
        free(y1);
        free(y3);
        free(yc);
        free(g1);
        free(g3);
        free(gc);
    }

    /* the tensor as a block of a bigger global tensor: the mask follows the global index */
    {
        const float p = 0.3f;
        sw_rng_key k = key;
        k.row0 = 5;
        k.col0 = 11;
        k.ld_global = C + 40;
        ref_mask(&k, R, C, p, mask);
        for (int i = 0; i < N; i++) ref[i] = mask[i] ? x[i] / (1.0 - p) : 0.0;
        float *y1 = run_fwd(x, p, &k, SW_ROWS, 1);
        float *yc = run_fwd(x, p, &k, SW_COLS, 3);
        tu_close("dropout fwd of a block at (5, 11) of a wider global tensor", y1, ref, N, 1e-6, 0);
        tu_true("dropout fwd of a block: 3 column tiles bit-identical to 1 tile", !memcmp(y1, yc, sizeof x));
        /* and a different op id draws a different mask */
        k.op = 3;
        float *yo = run_fwd(x, p, &k, SW_ROWS, 1);
        int64_t differ = 0;
        for (int i = 0; i < N; i++) differ += (yo[i] != 0.0f) != (y1[i] != 0.0f);
        tu_true("dropout: a different op id gives a different mask", differ > N / 10);
        free(y1);
        free(yc);
        free(yo);
    }

    /* rows of one batch column (batch0 2 of a global batch of 3; the local
     * batch is 1): local row g is global row 3 g + 2 (data parallelism) */
    {
        const float p = 0.4f;
        sw_rng_key k = key;
        k.batch0 = 2;
        k.batch_local = 1;
        k.batch_global = 3;
        k.ld_global = C;
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) {
                uint64_t g = (uint64_t)((3 * r + 2) * C + c);
                ref[r * C + c] = sw_dropout_keep(k.seed, k.step, k.layer, k.op, g, p) ? x[r * C + c] / (1.0 - p) : 0.0;
            }
        float *y1 = run_fwd(x, p, &k, SW_ROWS, 4);
        tu_close("dropout fwd of batch column 2 of 3: the global rows' mask", y1, ref, N, 1e-6, 0);
        free(y1);
    }

    /* p = 0: identity, forward and backward */
    {
        float *y = run_fwd(x, 0.0f, &key, SW_COLS, 2);
        float *g = run_bwd(dy, 0.0f, &key, SW_ROWS, 3);
        tu_true("dropout p=0 fwd copies x bit for bit", !memcmp(y, x, sizeof x));
        tu_true("dropout p=0 bwd leaves grad unchanged", !memcmp(g, dy, sizeof dy));
        free(y);
        free(g);
    }
    return tu_finish();
}
