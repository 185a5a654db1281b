/* sw_adamw against a double-precision reference of torch.optim.AdamW over
 * three steps with weight decay (bias corrections 1 - beta^step), on whole
 * tensors and on strided column tiles; one more case at a large step. */
#include <string.h>

#include "testutil.h"

enum { R = 7, C = 13, NSTEP = 3 };

/* PyTorch AdamW, one step, in double */
static void ref_step(double *p, const float *g, double *m, double *v, int64_t n, const sw_adamw_args *a)
{
    const double lr = a->lr, b1 = a->beta1, b2 = a->beta2, eps = a->eps, wd = a->weight_decay;
    const double bc1 = 1 - pow(b1, a->step), bc2 = 1 - pow(b2, a->step);
    for (int64_t i = 0; i < n; i++) {
        p[i] *= 1 - lr * wd;
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * (double)g[i] * g[i];
        p[i] -= (lr / bc1) * m[i] / (sqrt(v[i]) / sqrt(bc2) + eps);
    }
}

static void check(const char *what, const float *got, const double *ref, int64_t n)
{
    tu_close(what, got, ref, n, 1e-5, 1e-6 * tu_maxabs(ref, n));
}

/* tiles: 0 = whole tensors, else that many column tiles */
static void run(int tiles, int step0, const char *tag)
{
    char what[256];
    const int64_t n = R * C;
    float p[R * C], g[R * C], m0[R * C], v0[R * C];
    double pd[R * C], md[R * C], vd[R * C];
    tu_rand(p, n, 1, 1.0f);
    if (step0 == 0) {
        memset(m0, 0, sizeof m0);
        memset(v0, 0, sizeof v0);
    } else { /* mid-training state */
        tu_rand(m0, n, 2, 0.1f);
        tu_rand(v0, n, 3, 0.01f);
        for (int64_t i = 0; i < n; i++) v0[i] = fabsf(v0[i]);
    }
    for (int64_t i = 0; i < n; i++) {
        pd[i] = p[i];
        md[i] = m0[i];
        vd[i] = v0[i];
    }
    sw_tensor *P = tu_tensor("param", R, C, p), *G = tu_tensor("grad", R, C, NULL);
    sw_tensor *M = tu_tensor("m", R, C, m0), *V = tu_tensor("v", R, C, v0);
    sw_adamw_args a = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .step = 0};
    for (int s = 1; s <= NSTEP; s++) {
        tu_rand(g, n, 10 + (uint64_t)s, 1.0f);
        g[0] = 0.0f; /* a zero gradient: m and v decay, p still moves */
        g[1] = 1e-3f * (float)s;
        sw_tensor_write_host(G, g);
        a.step = step0 + s;
        if (tiles == 0) {
            sw_adamw(sw_tensor_whole(P, STARPU_RW), sw_tensor_whole(G, STARPU_R), sw_tensor_whole(M, STARPU_RW),
                     sw_tensor_whole(V, STARPU_RW), &a);
        } else {
            for (int j = 0; j < tiles; j++)
                sw_adamw(sw_tensor_tiles(P, SW_COLS, tiles, STARPU_RW)[j], sw_tensor_tiles(G, SW_COLS, tiles, STARPU_R)[j],
                         sw_tensor_tiles(M, SW_COLS, tiles, STARPU_RW)[j],
                         sw_tensor_tiles(V, SW_COLS, tiles, STARPU_RW)[j], &a);
        }
        ref_step(pd, g, md, vd, n, &a);
        float *gp = tu_read(P), *gm = tu_read(M), *gv = tu_read(V);
        snprintf(what, sizeof what, "adamw step %d: param (%s)", a.step, tag);
        check(what, gp, pd, n);
        snprintf(what, sizeof what, "adamw step %d: m (%s)", a.step, tag);
        check(what, gm, md, n);
        snprintf(what, sizeof what, "adamw step %d: v (%s)", a.step, tag);
        check(what, gv, vd, n);
        free(gp);
        free(gm);
        free(gv);
    }
    /* the reference's update is not just decay: parameters moved by about lr
     * per step (else matching it would say little about the Adam term) */
    {
        double moved = 0;
        for (int64_t i = 0; i < n; i++) moved += fabs(pd[i] - p[i] * pow(1 - 1e-2 * 0.1, NSTEP));
        snprintf(what, sizeof what, "adamw: moved the parameters by ~lr per step (%s)", tag);
        tu_require(what, moved / (double)n > 0.5 * 1e-2 && moved / (double)n < NSTEP * 1.5e-2);
    }
    sw_tensor_free(P);
    sw_tensor_free(G);
    sw_tensor_free(M);
    sw_tensor_free(V);
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    run(0, 0, "whole tensors, from step 1");
    run(3, 0, "3 strided column tiles, from step 1");
    run(0, 997, "whole tensors, steps 998..1000 from a mid-training state");
    return tu_finish();
}
