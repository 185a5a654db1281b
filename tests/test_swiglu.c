/* sw_swiglu_fwd / sw_swiglu_bwd: y = silu(gate) * up. The forward against
 * the double formula, the backward (dgate, dup) against central differences
 * of the double loss sum(silu(gate) * up * dy) on both inputs; whole, row
 * tiles and strided column tiles (ld > cols); far tails (no NaN, the exact
 * limits); a shape mismatch refused at submission. */
#include <string.h>

#include "testutil.h"

enum { R = 37, C = 53, N = R * C };
/* y vs the double formula, |got - ref| <= FWD_RTOL |ref| + FWD_AREL max|ref|:
 * worst err/limit 0.111 over 8 seeds and the 4 tilings (the relative error
 * alone, where |ref| >= 1e-2 max: 1.5e-7, sw_expf and two roundings). */
static const double FWD_RTOL = 1e-6, FWD_AREL = 1e-7;
/* dgate, dup vs central differences (h = 1e-5 in double, good to ~1e-10),
 * |got - fd| <= FD_RTOL |fd| + FD_AREL max|fd|: worst err/limit 0.0996
 * (dgate) and 0.065 (dup) over 8 seeds. dgate needs the absolute term:
 * silu'(a) = sg (1 + a (1 - sg)) cancels near its zero a = -1.278 (the
 * relative error alone reaches 9.4e-7 where |ref| >= 1e-2 max). */
static const double FD_RTOL = 2e-6, FD_AREL = 2e-7;

static double ref_silu(double a) { return a / (1.0 + exp(-a)); }

typedef struct {
    const double *g, *u, *dy;
} loss_ctx;

static double ref_loss(const void *p)
{
    const loss_ctx *c = p;
    double l = 0;
    for (int i = 0; i < N; i++) l += ref_silu(c->g[i]) * c->u[i] * c->dy[i];
    return l;
}

/* submits the forward or the backward with the given tiling */
static void run(sw_tensor *G, sw_tensor *U, sw_tensor *Y, sw_tensor *DY, sw_tensor *DG, sw_tensor *DU, sw_split split,
                int nt)
{
    starpu_data_handle_t *gt = sw_tensor_tiles(G, split, nt, STARPU_R), *ut = sw_tensor_tiles(U, split, nt, STARPU_R);
    if (Y) {
        starpu_data_handle_t *yt = sw_tensor_tiles(Y, split, nt, STARPU_W);
        for (int i = 0; i < nt; i++) sw_swiglu_fwd(gt[i], ut[i], yt[i]);
        return;
    }
    starpu_data_handle_t *dyt = sw_tensor_tiles(DY, split, nt, STARPU_R);
    starpu_data_handle_t *dgt = sw_tensor_tiles(DG, split, nt, STARPU_W), *dut = sw_tensor_tiles(DU, split, nt, STARPU_W);
    for (int i = 0; i < nt; i++) sw_swiglu_bwd(gt[i], ut[i], dyt[i], dgt[i], dut[i]);
}

/* ---- refusals (each in a child process that starts the runtime) ---- */
static void refuse_fwd(void *arg)
{
    (void)arg;
    tu_init_child();
    sw_tensor *g = tu_tensor("gate", 8, 16, NULL), *u = tu_tensor("up", 8, 12, NULL), *y = tu_tensor("y", 8, 16, NULL);
    sw_swiglu_fwd(sw_tensor_whole(g, STARPU_R), sw_tensor_whole(u, STARPU_R), sw_tensor_whole(y, STARPU_W));
}

static void refuse_bwd(void *arg)
{
    (void)arg;
    tu_init_child();
    sw_tensor *g = tu_tensor("gate", 8, 16, NULL), *u = tu_tensor("up", 8, 16, NULL);
    sw_tensor *dy = tu_tensor("dy", 8, 16, NULL), *dg = tu_tensor("dgate", 8, 16, NULL), *du = tu_tensor("dup", 7, 16, NULL);
    sw_swiglu_bwd(sw_tensor_whole(g, STARPU_R), sw_tensor_whole(u, STARPU_R), sw_tensor_whole(dy, STARPU_R),
                  sw_tensor_whole(dg, STARPU_W), sw_tensor_whole(du, STARPU_W));
}

int main(int argc, char **argv)
{
    tu_expect_refusal("sw_swiglu_fwd with up narrower than gate", refuse_fwd, NULL,
                      "sw_swiglu_fwd: gate [8,16] and up [8,12] differ in shape");
    tu_expect_refusal("sw_swiglu_bwd with dup shorter than gate", refuse_bwd, NULL,
                      "sw_swiglu_bwd: gate [8,16] and dup [7,16] differ in shape");
    tu_init(&argc, &argv);

    static float g[N], u[N], dy[N];
    tu_rand(g, N, 41, 8.0f);
    const float special[] = {0.0f, -0.0f, 1e-6f, -1e-6f, 20.0f, -20.0f, 10.0f, -10.0f, -1.2785f, 1.0f, -1.0f};
    memcpy(g, special, sizeof special);
    tu_rand(u, N, 42, 2.0f);
    tu_rand(dy, N, 43, 1.0f);
    static double gd[N], ud[N], dyd[N], y_ref[N], dg_ref[N], du_ref[N];
    tu_to_double(gd, g, N);
    tu_to_double(ud, u, N);
    tu_to_double(dyd, dy, N);
    for (int i = 0; i < N; i++) y_ref[i] = ref_silu(gd[i]) * ud[i];
    const loss_ctx ctx = {gd, ud, dyd};
    tu_fd_grad(ref_loss, &ctx, gd, N, dg_ref);
    tu_fd_grad(ref_loss, &ctx, ud, N, du_ref);
    const double ymax = tu_maxabs(y_ref, N), dgmax = tu_maxabs(dg_ref, N), dumax = tu_maxabs(du_ref, N);
    char what[160];

    struct { sw_split split; int nt; const char *name; } tilings[] = {
        {SW_ROWS, 1, "whole"}, {SW_ROWS, 3, "3 row tiles"}, {SW_COLS, 2, "2 strided column tiles"},
        {SW_COLS, 5, "5 strided column tiles"}};
    for (size_t t = 0; t < sizeof tilings / sizeof tilings[0]; t++) {
        sw_tensor *G = tu_tensor("gate", R, C, g), *U = tu_tensor("up", R, C, u), *DY = tu_tensor("dy", R, C, dy);
        sw_tensor *Y = tu_tensor("y", R, C, NULL), *DG = tu_tensor("dgate", R, C, NULL), *DU = tu_tensor("dup", R, C, NULL);
        sw_tensor_fill(Y, NAN), sw_tensor_fill(DG, NAN), sw_tensor_fill(DU, NAN); /* written, never read */
        run(G, U, Y, NULL, NULL, NULL, tilings[t].split, tilings[t].nt);
        run(G, U, NULL, DY, DG, DU, tilings[t].split, tilings[t].nt);
        float *got = tu_read(Y);
        snprintf(what, sizeof what, "swiglu fwd %dx%d, %s", R, C, tilings[t].name);
        tu_close(what, got, y_ref, N, FWD_RTOL, FWD_AREL * ymax);
        free(got);
        got = tu_read(DG);
        snprintf(what, sizeof what, "swiglu bwd dgate vs finite differences, %s", tilings[t].name);
        tu_close(what, got, dg_ref, N, FD_RTOL, FD_AREL * dgmax);
        free(got);
        got = tu_read(DU);
        snprintf(what, sizeof what, "swiglu bwd dup vs finite differences, %s", tilings[t].name);
        tu_close(what, got, du_ref, N, FD_RTOL, FD_AREL * dumax);
        free(got);
        sw_tensor_free(G), sw_tensor_free(U), sw_tensor_free(DY), sw_tensor_free(Y), sw_tensor_free(DG),
            sw_tensor_free(DU);
    }

    /* far tails: exp(-gate) over- or underflows in fp32; finite, the limits
     * silu -> max(gate, 0) and silu' -> step */
    {
        const float v[] = {-1e30f, -1000.0f, -100.0f, -89.0f, 89.0f, 100.0f, 1000.0f, 1e30f};
        const int n = (int)(sizeof v / sizeof v[0]);
        float us[8], dys[8];
        for (int i = 0; i < n; i++) us[i] = 0.5f + 0.25f * (float)i, dys[i] = 1.5f - 0.5f * (float)i;
        sw_tensor *G = tu_tensor("gs", 1, n, v), *U = tu_tensor("us", 1, n, us), *DY = tu_tensor("dys", 1, n, dys);
        sw_tensor *Y = tu_tensor("ys", 1, n, NULL), *DG = tu_tensor("dgs", 1, n, NULL), *DU = tu_tensor("dus", 1, n, NULL);
        run(G, U, Y, NULL, NULL, NULL, SW_ROWS, 1);
        run(G, U, NULL, DY, DG, DU, SW_ROWS, 1);
        float *y = tu_read(Y), *dg = tu_read(DG), *du = tu_read(DU);
        int ok = 1;
        for (int i = 0; i < n; i++) {
            const int pos = v[i] > 0;
            const float ey = pos ? v[i] * us[i] : 0.0f, edg = pos ? dys[i] * us[i] : 0.0f, edu = pos ? dys[i] * v[i] : 0.0f;
            if (!(y[i] == ey && dg[i] == edg && du[i] == edu)) {
                printf("  gate=%g: y=%g (want %g), dgate=%g (want %g), dup=%g (want %g)\n", v[i], y[i], ey, dg[i], edg,
                       du[i], edu);
                ok = 0;
            }
        }
        tu_true("swiglu fwd/bwd tails (|gate| >= 89): silu -> max(gate, 0), silu' -> step, no NaN", ok);
        free(y), free(dg), free(du);
        sw_tensor_free(G), sw_tensor_free(U), sw_tensor_free(DY), sw_tensor_free(Y), sw_tensor_free(DG),
            sw_tensor_free(DU);
    }
    return tu_finish();
}
