/* sw_pool_fwd / sw_pool_bwd: pooling over a sequence, rows in [s, b]
 * order. The forward against a double-precision reference (mean over all
 * positions, one position, a middle range, none: zeros), on a whole tensor
 * and on strided column tiles; the backward against finite differences of
 * the reference loss sum(dy * pool(x)); shapes refused at submission. */
#include <string.h>

#include "testutil.h"

enum { P = 7, B = 3, H = 10, N = P * B };

typedef struct { const double *dy; int64_t p0, np; double alpha; } loss_ctx;
static const double *g_x;

static void ref_pool(const double *x, int64_t p0, int64_t np, double alpha, double *y)
{
    for (int b = 0; b < B; b++)
        for (int c = 0; c < H; c++) {
            double s = 0;
            for (int64_t i = p0; i < p0 + np; i++) s += x[(i * B + b) * H + c];
            y[b * H + c] = alpha * s;
        }
}

static double ref_loss(const void *p)
{
    const loss_ctx *c = p;
    double y[B * H], l = 0;
    ref_pool(g_x, c->p0, c->np, c->alpha, y);
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

int main(int argc, char **argv)
{
    tu_expect_refusal("sw_pool_fwd with rows not whole positions", refuse_rows, NULL,
                      "sw_pool_fwd: rows [10,4] must be whole positions of pooled [3,4]");
    tu_expect_refusal("sw_pool_bwd past the last position", refuse_range, NULL,
                      "sw_pool_bwd: positions 2 .. 4 outside the 3 positions of the rows");
    tu_init(&argc, &argv);
    static float x[N * H], dy[B * H];
    static double xd[N * H], dyd[B * H], y_ref[B * H], dx_ref[N * H];
    tu_rand(x, N * H, 61, 2.0f);
    tu_rand(dy, B * H, 62, 1.0f);
    tu_to_double(xd, x, N * H);
    tu_to_double(dyd, dy, B * H);
    g_x = xd;
    struct { int64_t p0, np; float alpha; const char *name; } cases[] = {
        {0, P, 1.0f / P, "mean of all positions"}, {0, 1, 1.0f, "first position"},
        {2, 3, 0.25f, "positions 2..4, alpha 1/4"}, {0, 0, 1.0f, "no position (zeros)"}};
    char what[160];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int nt = 1; nt <= 2; nt++) {
            loss_ctx ctx = {dyd, cases[k].p0, cases[k].np, cases[k].alpha};
            ref_pool(xd, ctx.p0, ctx.np, ctx.alpha, y_ref);
            tu_fd_grad(ref_loss, &ctx, xd, N * H, dx_ref);
            sw_tensor *X = tu_tensor("x", N, H, x), *Y = tu_tensor("y", B, H, NULL), *DY = tu_tensor("dy", B, H, dy);
            sw_tensor *DX = tu_tensor("dx", N, H, NULL);
            sw_tensor_fill(Y, NAN), sw_tensor_fill(DX, NAN); /* written, never read */
            for (int j = 0; j < nt; j++) {
                sw_pool_fwd(sw_tensor_tiles(X, SW_COLS, nt, STARPU_R)[j], sw_tensor_tiles(Y, SW_COLS, nt, STARPU_W)[j],
                            ctx.p0, ctx.np, cases[k].alpha);
                sw_pool_bwd(sw_tensor_tiles(DY, SW_COLS, nt, STARPU_R)[j], sw_tensor_tiles(DX, SW_COLS, nt, STARPU_W)[j],
                            ctx.p0, ctx.np, cases[k].alpha);
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
