/* The heads' absolute losses (heads.h) under mpirun, against a
 * double-precision recomputation on the host: run by tests/test_heads.sh as
 * test_heads [--tp T [--sp]] [--ulysses U] [--ring R] [--dp D] [--micro K]
 * (Ring zigzag). A comparison of layouts cannot see an error that every
 * layout makes alike, or one only the loss's absolute value shows (a loss
 * all-reduced over too few ranks still trains), so here every loss is
 * recomputed from the global batch itself:
 *  - the pooled head (sw_seq_head; MSE on 3 outputs or cross-entropy over 3
 *    classes, mean or first-token pooling) on a random residual stream
 *    [seq x batch, h] loaded as each rank's rows (sw_ctx_load_floats): each
 *    rank's outputs of its sequences (each micro-batch's, read after its
 *    forward) = W times the pooled rows the host computes from the whole
 *    sequence (W read from the registry), and the step's logged loss on
 *    every rank = the mean over the global batch of the MSE or
 *    cross-entropy recomputed in double from those outputs (each sequence
 *    once, whichever ranks hold it);
 *  - the per-row MSE (sw_row_mse) on random predictions and targets
 *    [seq x batch, 2]: the logged loss on every rank = the mean over every
 *    element of the global batch, and each rank's dpred = 2 (pred - tgt) /
 *    (seq x batch x 2) on its rows.
 * Bounds: relative 1e-5 (losses), 1e-5 + 1e-6 absolute (outputs, dpred). */
#include <math.h>
#include <string.h>

#include "testutil.h"

enum { SEQ = 8, NB = 4, H = 8, NO = 3, NR = 2 };

static int flag(int argc, char **argv, const char *name, int dflt)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], name)) return i + 1 < argc && argv[i + 1][0] != '-' ? atoi(argv[i + 1]) : 1;
    return dflt;
}

/* the global row (position, sequence of the batch) of row r of this rank's l rows in micro-batch k */
static int64_t global_row(const sw_ctx *x, int k, int64_t r)
{
    const int64_t t = x->row0 + r, i = t / x->B, b = t % x->B;
    return sw_ctx_position(x, i) * NB + sw_ctx_micro_batch_first(x, k) + b;
}

static int close_rel(double got, double want, double rtol) { return fabs(got - want) <= rtol * fabs(want); }

/* the pooled head: pool mode, loss */
static void seq_head_case(sw_ctx *x, sw_params *p, sw_pool_mode pool, sw_seq_loss kind, const float *X, const float *y,
                          const int32_t *cls)
{
    const int classes = kind == SW_LOSS_CLASSES, n = NO;
    sw_params_set_unit(p, SW_UNIT_AFTER);
    sw_seq_head *hd = sw_seq_head_create(x, &(sw_seq_head_config){.name = "head", .pool = pool, .loss = kind,
                                                                  .hidden = H, .outputs = n, .bias = 0, .std = 0.5f});
    sw_params_allocate(p);
    float *W = tu_read(sw_params_value(p, sw_seq_head_linear(hd)->w)); /* [n, H], the same on every rank */
    sw_tensor *in = tu_tensor("in", x->resid_rows, H, NULL);
    sw_tensor *tg = classes ? sw_tensor_new2d("cls", SW_I32, x->B, 1) : tu_tensor("y", x->B, n, NULL);
    /* per global sequence: the loss recomputed from this rank's outputs, and how many ranks held it */
    double part[2 * NB] = {0}, worst = 0;
    int out_ok = 1;
    for (int k = 0; k < x->c.grad_accum; k++) {
        sw_ctx_load_floats(x, k, X, H, in);
        sw_ctx_load_seq_targets(x, k, classes ? (const void *)cls : (const void *)y, tg);
        sw_seq_head_forward(x, hd, in, tg);
        float *out = tu_read(sw_seq_head_output(hd)); /* [B, n] */
        for (int b = 0; b < x->B; b++) {
            const int gb = sw_ctx_micro_batch_first(x, k) + b;
            double pooled[H] = {0};
            for (int s = 0; s < (pool == SW_POOL_MEAN ? SEQ : 1); s++)
                for (int c = 0; c < H; c++) pooled[c] += (double)X[(s * NB + gb) * H + c] / (pool == SW_POOL_MEAN ? SEQ : 1);
            double lse = 0, mx = -INFINITY, l = 0;
            for (int o = 0; o < n; o++) {
                double want = 0;
                for (int c = 0; c < H; c++) want += (double)W[o * H + c] * pooled[c];
                const double d = fabs(out[b * n + o] - want);
                if (d > 1e-5 * fabs(want) + 1e-6) out_ok = 0;
                if (d > worst) worst = d;
                mx = fmax(mx, out[b * n + o]);
            }
            for (int o = 0; o < n; o++) { /* from the outputs themselves */
                const double v = out[b * n + o];
                if (classes) lse += exp(v - mx);
                else l += (v - y[gb * n + o]) * (v - y[gb * n + o]);
            }
            if (classes) l = mx + log(lse) - out[b * n + cls[gb]];
            part[2 * gb] += l, part[2 * gb + 1] += 1;
        }
        free(out);
    }
    float logged;
    sw_tensor_read_host(sw_seq_head_loss(hd), &logged);
    SW_CHECK(MPI_Allreduce(MPI_IN_PLACE, part, 2 * NB, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    double loss = 0;
    int held = 1;
    for (int gb = 0; gb < NB; gb++) held &= part[2 * gb + 1] > 0, loss += part[2 * gb] / fmax(part[2 * gb + 1], 1);
    loss /= classes ? NB : NB * n;
    char what[300];
    snprintf(what, sizeof what, "%s pooling, %s: outputs = W x the host's pooled rows (worst |diff| %.1e); "
             "logged loss %.7f = %.7f recomputed in double from the outputs of the global batch",
             pool == SW_POOL_MEAN ? "mean" : "first-token", classes ? "cross-entropy over 3 classes" : "MSE on 3 outputs",
             worst, logged, loss);
    tu_check_ranks(what, out_ok && held && close_rel(logged, loss, 1e-5));
    sw_tensor_free(in), sw_tensor_free(tg);
    free(W);
    sw_seq_head_destroy(hd);
}

static void row_mse_case(sw_ctx *x, const float *P, const float *Yt)
{
    sw_row_mse *r = sw_row_mse_create(x, NR);
    sw_tensor *pred = tu_tensor("pred", x->resid_rows, NR, NULL), *tgt = tu_tensor("tgt", x->resid_rows, NR, NULL);
    const double count = (double)SEQ * NB * NR;
    int d_ok = 1;
    for (int k = 0; k < x->c.grad_accum; k++) {
        sw_ctx_load_floats(x, k, P, NR, pred);
        sw_ctx_load_floats(x, k, Yt, NR, tgt);
        sw_row_mse_forward(x, r, pred, tgt);
        float *d = tu_read(sw_row_mse_backward(x, r, pred, tgt));
        for (int64_t i = 0; i < x->resid_rows; i++)
            for (int j = 0; j < NR; j++) {
                const int64_t g = global_row(x, k, i) * NR + j;
                const double want = 2.0 * ((double)P[g] - Yt[g]) / count;
                if (fabs(d[i * NR + j] - want) > 1e-5 * fabs(want) + 1e-6) d_ok = 0;
            }
        free(d);
    }
    double loss = 0;
    for (int i = 0; i < SEQ * NB * NR; i++) loss += ((double)P[i] - Yt[i]) * ((double)P[i] - Yt[i]);
    loss /= count;
    float logged;
    sw_tensor_read_host(sw_row_mse_loss(r), &logged);
    char what[300];
    snprintf(what, sizeof what, "per-row MSE: logged loss %.7f = %.7f, the mean over the global batch's %d elements "
             "in double; dpred = 2 (pred - tgt) / %d on this rank's rows", logged, loss, SEQ * NB * NR,
             SEQ * NB * NR);
    tu_check_ranks(what, d_ok && close_rel(logged, loss, 1e-5));
    sw_tensor_free(pred), sw_tensor_free(tgt);
    sw_row_mse_destroy(r);
}

int main(int argc, char **argv)
{
    const int tp = flag(argc, argv, "--tp", 1), U = flag(argc, argv, "--ulysses", 1), R = flag(argc, argv, "--ring", 1);
    const int dp = flag(argc, argv, "--dp", 1), micro = flag(argc, argv, "--micro", 1);
    sw_ctx_config xc = {.seq = SEQ, .batch = NB, .tp = tp, .sp = flag(argc, argv, "--sp", 0), .ulysses = U, .ring = R,
                        .zigzag = R > 1, .dp = dp, .grad_accum = micro, .tiles = 1, .seed = 1};
    tu_init(&argc, &argv);
    sw_mesh *mesh = sw_mesh_create(&(sw_mesh_dims){.tp = tp, .ulysses = U, .ring = R, .dp = dp, .pp = 1});
    sw_comm *world = sw_comm_create(mesh), *comm = sw_world_size() > 1 ? world : NULL;
    float X[SEQ * NB * H], y[NB * NO], P[SEQ * NB * NR], Yt[SEQ * NB * NR];
    int32_t cls[NB];
    tu_rand(X, SEQ * NB * H, 11, 1.0f), tu_rand(y, NB * NO, 12, 1.0f);
    tu_rand(P, SEQ * NB * NR, 13, 1.0f), tu_rand(Yt, SEQ * NB * NR, 14, 1.0f);
    for (int b = 0; b < NB; b++) cls[b] = (b * 2 + 1) % NO;
    for (int which = 0; which < 5; which++) {
        sw_params_config pc = {.seed = 1, .tiles = 1, .dtype = SW_F32, .grad_accum = micro, .bucket_mb = 25.0f,
                               .grad_group = U * R > 1 ? SW_GROUP_SP_DP : SW_GROUP_DP, .lr = 1e-3f};
        sw_params *p = sw_params_new(&pc, comm);
        sw_ctx x;
        sw_ctx_init(&x, &xc, comm, p);
        if (which < 4)
            seq_head_case(&x, p, which % 2 ? SW_POOL_FIRST : SW_POOL_MEAN, which / 2 ? SW_LOSS_CLASSES : SW_LOSS_MSE, X,
                          y, cls);
        else row_mse_case(&x, P, Yt);
        starpu_task_wait_for_all();
        sw_scratch_invalidate(&x);
        sw_ctx_destroy(&x);
        sw_params_destroy(p);
    }
    sw_comm_destroy(world);
    sw_mesh_destroy(mesh);
    return tu_finish_all();
}
