/* sw_pool_fwd / sw_pool_bwd: pooling over a sequence, rows in [s, b]
 * order. The forward against a double-precision reference (mean over all
 * positions, one position, a middle range, none: zeros), on a whole tensor
 * and on strided column tiles; the backward against finite differences of
 * the reference loss sum(dy * pool(x)); shapes refused at submission.
 * With per-sequence lengths (sw_pool_fwd_len / _bwd_len, a padded batch):
 * the rows' positions in one run or in two (a zigzag share), each
 * sequence's valid positions only, scaled by alpha / len[b] (a sequence
 * with no valid position here: zeros), against the same reference. */
#include <string.h>

#include "testutil.h"

enum { P = 7, B = 3, H = 10, N = P * B };

typedef struct { const double *dy; int64_t p0, np; double alpha; const sw_pool_lengths *L; } loss_ctx;
static const double *g_x;

/* global position of local position i, by a plain walk over the runs */
static int64_t ref_pos(const sw_pool_lengths *L, int64_t i)
{
    int64_t pos = i;
    for (int j = 0; j < L->nruns; j++)
        if (i >= L->i0[j]) pos = L->pos0[j] + (i - L->i0[j]);
    return pos;
}

static void ref_pool(const double *x, int64_t p0, int64_t np, double alpha, const sw_pool_lengths *L, double *y)
{
    for (int b = 0; b < B; b++)
        for (int c = 0; c < H; c++) {
            double s = 0;
            for (int64_t i = p0; i < p0 + np; i++)
                if (!L || ref_pos(L, i) < L->len[b]) s += x[(i * B + b) * H + c];
            y[b * H + c] = (L ? alpha / L->len[b] : alpha) * s;
        }
}

static double ref_loss(const void *p)
{
    const loss_ctx *c = p;
    double y[B * H], l = 0;
    ref_pool(g_x, c->p0, c->np, c->alpha, c->L, y);
    for (int i = 0; i < B * H; i++) l += c->dy[i] * y[i];
    return l;
}

static void refuse_rows(void *arg)
{
    (void)arg;
    tu_init_child();
    sw_tensor *x = tu_tensor("x", 10, 4, NULL), *y = tu_tensor("y", 3, 4, NULL);
    sw_pool_fwd(sw_tensor_whole(x, STARPU_R), sw_tensor_whole(y, STARPU_W), 0, 1, 1.0f);
}

static void refuse_range(void *arg)
{
    (void)arg;
    tu_init_child();
    sw_tensor *x = tu_tensor("x", 9, 4, NULL), *y = tu_tensor("y", 3, 4, NULL);
    sw_pool_bwd(sw_tensor_whole(y, STARPU_R), sw_tensor_whole(x, STARPU_W), 2, 2, 1.0f);
}

static void refuse_len(void *arg)
{
    (void)arg;
    tu_init_child();
    sw_tensor *x = tu_tensor("x", 9, 4, NULL), *y = tu_tensor("y", 3, 4, NULL);
    sw_pool_lengths L = {.nruns = 1, .len = {5, 0, 2}};
    sw_pool_fwd_len(sw_tensor_whole(x, STARPU_R), sw_tensor_whole(y, STARPU_W), 0, 3, 1.0f, &L);
}

int main(int argc, char **argv)
{
    tu_expect_refusal("sw_pool_fwd with rows not whole positions", refuse_rows, NULL,
                      "sw_pool_fwd: rows [10,4] must be whole positions of pooled [3,4]");
    tu_expect_refusal("sw_pool_bwd past the last position", refuse_range, NULL,
                      "sw_pool_bwd: positions 2 .. 4 outside the 3 positions of the rows");
    tu_expect_refusal("sw_pool_fwd_len with a length 0", refuse_len, NULL,
                      "sw_pool_fwd: lengths: every length must be at least 1 (len[1] = 0)");
    tu_init(&argc, &argv);
    static float x[N * H], dy[B * H];
    static double xd[N * H], dyd[B * H], y_ref[B * H], dx_ref[N * H];
    tu_rand(x, N * H, 61, 2.0f);
    tu_rand(dy, B * H, 62, 1.0f);
    tu_to_double(xd, x, N * H);
    tu_to_double(dyd, dy, B * H);
    g_x = xd;
    /* one run at global position 5 (lengths cut it in the middle, at its end, before it); two runs
     * (a zigzag share: local 0..3 are positions 2..5, local 4..6 positions 20..22) */
    static const sw_pool_lengths one = {.nruns = 1, .i0 = {0}, .pos0 = {5}, .len = {8, 12, 3}};
    static const sw_pool_lengths two = {.nruns = 2, .i0 = {0, 4}, .pos0 = {2, 20}, .len = {4, 21, 1}};
    struct { int64_t p0, np; float alpha; const sw_pool_lengths *L; const char *name; } cases[] = {
        {0, P, 1.0f / P, NULL, "mean of all positions"}, {0, 1, 1.0f, NULL, "first position"},
        {2, 3, 0.25f, NULL, "positions 2..4, alpha 1/4"}, {0, 0, 1.0f, NULL, "no position (zeros)"},
        {0, P, 1.0f, &one, "lengths, one run"}, {0, P, 1.0f, &two, "lengths, two runs (zigzag)"},
        {1, 5, 0.5f, &two, "lengths, two runs, positions 1..5, alpha 1/2"}};
    char what[160];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int nt = 1; nt <= 2; nt++) {
            loss_ctx ctx = {dyd, cases[k].p0, cases[k].np, cases[k].alpha, cases[k].L};
            ref_pool(xd, ctx.p0, ctx.np, ctx.alpha, ctx.L, y_ref);
            tu_fd_grad(ref_loss, &ctx, xd, N * H, dx_ref);
            sw_tensor *X = tu_tensor("x", N, H, x), *Y = tu_tensor("y", B, H, NULL), *DY = tu_tensor("dy", B, H, dy);
            sw_tensor *DX = tu_tensor("dx", N, H, NULL);
            sw_tensor_fill(Y, NAN), sw_tensor_fill(DX, NAN); /* written, never read */
            for (int j = 0; j < nt; j++) {
                sw_pool_fwd_len(sw_tensor_tiles(X, SW_COLS, nt, STARPU_R)[j],
                                sw_tensor_tiles(Y, SW_COLS, nt, STARPU_W)[j], ctx.p0, ctx.np, cases[k].alpha, ctx.L);
                sw_pool_bwd_len(sw_tensor_tiles(DY, SW_COLS, nt, STARPU_R)[j],
                                sw_tensor_tiles(DX, SW_COLS, nt, STARPU_W)[j], ctx.p0, ctx.np, cases[k].alpha, ctx.L);
            }
            float *got = tu_read(Y);
            snprintf(what, sizeof what, "pool fwd %s, %s", cases[k].name, nt == 1 ? "whole" : "2 strided column tiles");
            tu_close(what, got, y_ref, B * H, 1e-6, 1e-7);
            free(got);
            got = tu_read(DX);
            snprintf(what, sizeof what, "pool bwd vs finite differences, %s, %s", cases[k].name,
                     nt == 1 ? "whole" : "2 strided column tiles");
            tu_close(what, got, dx_ref, N * H, 1e-6, 1e-6);
            free(got);
            sw_tensor_free(X), sw_tensor_free(Y), sw_tensor_free(DY), sw_tensor_free(DX);
        }
    return tu_finish();
}
