/* sw_mse_fwd / sw_mse_bwd: the mean-squared-error pieces against a
 * double-precision reference, the backward against finite differences of
 * the reference loss, on a whole tensor and on row tiles (the loss of each
 * tile summed); shapes refused at submission. */
#include <string.h>

#include "testutil.h"

enum { R = 6, C = 3, N = R * C };

typedef struct { const double *t; double alpha; } loss_ctx;
static const double *g_p;

static double ref_loss(const void *p)
{
    const loss_ctx *c = p;
    double s = 0;
    for (int i = 0; i < N; i++) s += (g_p[i] - c->t[i]) * (g_p[i] - c->t[i]);
    return c->alpha * s;
}

static void refuse(void *arg)
{
    (void)arg;
    tu_init_child();
    sw_tensor *p = tu_tensor("p", 4, 2, NULL), *t = tu_tensor("t", 4, 1, NULL), *o = tu_tensor("o", 1, 1, NULL);
    sw_mse_fwd(sw_tensor_whole(p, STARPU_R), sw_tensor_whole(t, STARPU_R), sw_tensor_whole(o, STARPU_W), 1.0f);
}

static void refuse_out(void *arg)
{
    (void)arg;
    tu_init_child();
    sw_tensor *p = tu_tensor("p", 4, 2, NULL), *t = tu_tensor("t", 4, 2, NULL), *o = tu_tensor("o", 2, 1, NULL);
    sw_mse_fwd(sw_tensor_whole(p, STARPU_R), sw_tensor_whole(t, STARPU_R), sw_tensor_whole(o, STARPU_W), 1.0f);
}

int main(int argc, char **argv)
{
    tu_expect_refusal("sw_mse_fwd with targets of another shape", refuse, NULL,
                      "sw_mse_fwd: pred [4,2] and tgt [4,1] differ in shape");
    tu_expect_refusal("sw_mse_fwd into a [2,1] loss", refuse_out, NULL, "sw_mse_fwd: out [2,1] must be [1,1]");
    tu_init(&argc, &argv);
    static float p[N], t[N];
    static double pd[N], td[N], dp_ref[N];
    tu_rand(p, N, 71, 3.0f);
    tu_rand(t, N, 72, 3.0f);
    tu_to_double(pd, p, N);
    tu_to_double(td, t, N);
    g_p = pd;
    const float alpha = 1.0f / 24;
    loss_ctx ctx = {td, alpha};
    double l_ref = ref_loss(&ctx);
    tu_fd_grad(ref_loss, &ctx, pd, N, dp_ref);
    char what[160];
    for (int nt = 1; nt <= 3; nt += 2) {
        sw_tensor *Pt = tu_tensor("pred", R, C, p), *T = tu_tensor("tgt", R, C, t), *DP = tu_tensor("dpred", R, C, NULL);
        sw_tensor *L = tu_tensor("loss", nt, 1, NULL);
        sw_tensor_fill(DP, NAN), sw_tensor_fill(L, NAN);
        for (int j = 0; j < nt; j++) {
            sw_mse_fwd(sw_tensor_tiles(Pt, SW_ROWS, nt, STARPU_R)[j], sw_tensor_tiles(T, SW_ROWS, nt, STARPU_R)[j],
                       sw_tensor_tiles(L, SW_ROWS, nt, STARPU_W)[j], alpha);
            sw_mse_bwd(sw_tensor_tiles(Pt, SW_ROWS, nt, STARPU_R)[j], sw_tensor_tiles(T, SW_ROWS, nt, STARPU_R)[j],
                       sw_tensor_tiles(DP, SW_ROWS, nt, STARPU_W)[j], alpha);
        }
        float *got = tu_read(L), sum = 0;
        for (int j = 0; j < nt; j++) sum += got[j];
        free(got);
        snprintf(what, sizeof what, "mse fwd %dx%d, %d row tile(s)", R, C, nt);
        tu_close(what, &sum, &l_ref, 1, 1e-6, 0);
        got = tu_read(DP);
        snprintf(what, sizeof what, "mse bwd vs finite differences, %d row tile(s)", nt);
        tu_close(what, got, dp_ref, N, 1e-6, 1e-6);
        free(got);
        sw_tensor_free(Pt), sw_tensor_free(T), sw_tensor_free(DP), sw_tensor_free(L);
    }
    return tu_finish();
}
