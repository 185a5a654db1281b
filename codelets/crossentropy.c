/* Cross-entropy pieces over a block of logits (vocab-parallel friendly).
 * Column c of a logits block is vocabulary id vocab0 + c; ids >= vocab are
 * padding and ignored. A block's pieces are combined by the graph:
 * max = max of block maxes, tgt = sum of block tgts, se = sum of block
 * sumexps (each taken with the combined max), loss = log(se) + max - tgt.
 * With an ignore index or row weights, each row has a weight rw (0 for an
 * ignored row) and the graph's count (the sum of rw over the global batch):
 * the loss is sum rw loss / count and a row's gradient is scaled by
 * rw / count (0 where rw is 0). */
#include <math.h>

#include "codelet_util.h"
#include "simd.h"
#include "starweave/ops.h"

struct ce_args {
    int64_t vocab0, vocab;
    float scale;
};

struct ce_weight_args {
    int32_t ignore; /* the ignore index (SW_CE_IGNORE_NONE: none) */
    int weighted;   /* a weights buffer follows the targets */
};

/* Number of valid (non-padding) columns of the block. */
static int64_t valid_cols(int64_t cols, int64_t vocab0, int64_t vocab)
{
    int64_t nv = vocab - vocab0;
    if (nv < 0) nv = 0;
    return nv < cols ? nv : cols;
}

/* buffers: logits[n,vb] (R), mx[n,1] (W) */
static void ce_max_cpu(void *buffers[], void *cl_arg)
{
    struct ce_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const float *x = SW_F32_OF(buffers[0]);
    int64_t n = SW_ROWS_OF(buffers[0]), ld = SW_LD_OF(buffers[0]);
    int64_t nv = valid_cols(SW_COLS_OF(buffers[0]), a.vocab0, a.vocab);
    float *mx = SW_F32_OF(buffers[1]);
    int64_t ms = sw_vec_inc(buffers[1]);
    for (int64_t r = 0; r < n; r++) {
        mx[r * ms] = sw_row_max(x + r * ld, nv);
    }
}

/* buffers: logits (R), targets[n,1] int32 (R), tgt[n,1] (W) */
static void ce_target_cpu(void *buffers[], void *cl_arg)
{
    struct ce_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const float *x = SW_F32_OF(buffers[0]);
    int64_t n = SW_ROWS_OF(buffers[0]), vb = SW_COLS_OF(buffers[0]), ld = SW_LD_OF(buffers[0]);
    const int32_t *t = SW_I32_OF(buffers[1]);
    int64_t tstr = sw_vec_inc(buffers[1]);
    float *tgt = SW_F32_OF(buffers[2]);
    int64_t gs = sw_vec_inc(buffers[2]);
    for (int64_t r = 0; r < n; r++) {
        int64_t c = (int64_t)t[r * tstr] - a.vocab0;
        tgt[r * gs] = (c >= 0 && c < vb) ? x[r * ld + c] : 0.0f;
    }
}

/* sum_c exp(row[c] - m): SIMD lanes in fp32 over chunks of 1024 columns,
 * the chunks added in double (a 50k-column row stays within ~1e-7). */
static double sum_exp(const float *row, int64_t nv, float m)
{
    double s = 0.0;
    for (int64_t c0 = 0; c0 < nv; c0 += 1024) {
        int64_t c1 = c0 + 1024 < nv ? c0 + 1024 : nv, c = c0;
        sw_vf acc = {0};
        for (; c + SW_VL <= c1; c += SW_VL) {
            float t[SW_VL];
            for (int j = 0; j < SW_VL; j++) t[j] = sw_expf(row[c + j] - m);
            sw_vf v;
            SW_VLOAD(v, t);
            acc += v;
        }
        s += sw_vsum(&acc);
        for (; c < c1; c++) s += sw_expf(row[c] - m);
    }
    return s;
}

/* buffers: logits (R), mx (R), se[n,1] (W) */
static void ce_sumexp_cpu(void *buffers[], void *cl_arg)
{
    struct ce_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const float *x = SW_F32_OF(buffers[0]);
    int64_t n = SW_ROWS_OF(buffers[0]), ld = SW_LD_OF(buffers[0]);
    int64_t nv = valid_cols(SW_COLS_OF(buffers[0]), a.vocab0, a.vocab);
    const float *mx = SW_F32_OF(buffers[1]);
    int64_t ms = sw_vec_inc(buffers[1]);
    float *se = SW_F32_OF(buffers[2]);
    int64_t ss = sw_vec_inc(buffers[2]);
    for (int64_t r = 0; r < n; r++) {
        const float *row = x + r * ld;
        float m = mx[r * ms];
        se[r * ss] = (nv > 0 && m != -INFINITY) ? (float)sum_exp(row, nv, m) : 0.0f;
    }
}

/* buffers: mx (R), tgt (R), se (R), loss[n,1] (W) */
static void ce_loss_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const float *mx = SW_F32_OF(buffers[0]), *tgt = SW_F32_OF(buffers[1]), *se = SW_F32_OF(buffers[2]);
    float *loss = SW_F32_OF(buffers[3]);
    int64_t ms = sw_vec_inc(buffers[0]), ts = sw_vec_inc(buffers[1]), ss = sw_vec_inc(buffers[2]),
            ls = sw_vec_inc(buffers[3]);
    int64_t n = SW_NUMEL_OF(buffers[3]);
    for (int64_t r = 0; r < n; r++) loss[r * ls] = logf(se[r * ss]) + mx[r * ms] - tgt[r * ts];
}

/* buffers: logits (RW), mx (R), se (R), targets (R); weighted: rw[n,1] (R),
 * count[1,1] (R), each row's scale rw / count (0 rows where rw is 0) */
static void ce_bwd_rows(void *buffers[], const struct ce_args *a, int weighted)
{
    float *x = SW_F32_OF(buffers[0]);
    int64_t n = SW_ROWS_OF(buffers[0]), vb = SW_COLS_OF(buffers[0]), ld = SW_LD_OF(buffers[0]);
    int64_t nv = valid_cols(vb, a->vocab0, a->vocab);
    const float *mx = SW_F32_OF(buffers[1]), *se = SW_F32_OF(buffers[2]);
    const int32_t *t = SW_I32_OF(buffers[3]);
    int64_t ms = sw_vec_inc(buffers[1]), ss = sw_vec_inc(buffers[2]), tstr = sw_vec_inc(buffers[3]);
    const float *rw = weighted ? SW_F32_OF(buffers[4]) : NULL;
    int64_t rs = weighted ? sw_vec_inc(buffers[4]) : 0;
    const float cnt = weighted ? SW_F32_OF(buffers[5])[0] : 0.0f;
    for (int64_t r = 0; r < n; r++) {
        float *row = x + r * ld;
        if (weighted && rw[r * rs] == 0.0f) { /* ignored: no gradient (not 0 * inf) */
            for (int64_t c = 0; c < vb; c++) row[c] = 0.0f;
            continue;
        }
        float scale = weighted ? rw[r * rs] / cnt : a->scale;
        float m = mx[r * ms], k = scale / se[r * ss];
        for (int64_t c = 0; c < nv; c++) row[c] = k * sw_expf(row[c] - m);
        for (int64_t c = nv; c < vb; c++) row[c] = 0.0f;
        int64_t tc = (int64_t)t[r * tstr] - a->vocab0;
        if (tc >= 0 && tc < nv) row[tc] -= scale;
    }
}

static void ce_bwd_cpu(void *buffers[], void *cl_arg)
{
    struct ce_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    ce_bwd_rows(buffers, &a, 0);
}

static void ce_bwd_weighted_cpu(void *buffers[], void *cl_arg)
{
    struct ce_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    ce_bwd_rows(buffers, &a, 1);
}

/* buffers: targets[n,1] int32 (R), [weights[n,1] (R)], rw[n,1] (W) */
static void ce_weights_cpu(void *buffers[], void *cl_arg)
{
    struct ce_weight_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int32_t *t = SW_I32_OF(buffers[0]);
    int64_t n = SW_NUMEL_OF(buffers[0]), tstr = sw_vec_inc(buffers[0]);
    const float *w = a.weighted ? SW_F32_OF(buffers[1]) : NULL;
    int64_t ws = a.weighted ? sw_vec_inc(buffers[1]) : 0;
    float *rw = SW_F32_OF(buffers[a.weighted ? 2 : 1]);
    int64_t rs = sw_vec_inc(buffers[a.weighted ? 2 : 1]);
    for (int64_t r = 0; r < n; r++) rw[r * rs] = t[r * tstr] == a.ignore ? 0.0f : w ? w[r * ws] : 1.0f;
}

/* buffers: loss[n,1] (R), rw[n,1] (R), count[1,1] (R), out[1,1] (W):
 * out = sum rw loss / count, summed in double; rows of weight 0 skipped
 * (their loss is not read); count 0 gives 0/0 = NaN (PyTorch's mean over
 * no row) */
static void ce_mean_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const float *loss = SW_F32_OF(buffers[0]), *rw = SW_F32_OF(buffers[1]);
    int64_t n = SW_NUMEL_OF(buffers[0]), ls = sw_vec_inc(buffers[0]), rs = sw_vec_inc(buffers[1]);
    double s = 0.0;
    for (int64_t r = 0; r < n; r++)
        if (rw[r * rs] != 0.0f) s += (double)rw[r * rs] * loss[r * ls];
    SW_F32_OF(buffers[3])[0] = (float)(s / SW_F32_OF(buffers[2])[0]);
}

#ifdef STARWEAVE_USE_CUDA
static void ce_max_cuda(void *buffers[], void *cl_arg)
{
    struct ce_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    SW_CUDA_CHECK(sw_cuda_ce_max(SW_F32_OF(buffers[0]), SW_ROWS_OF(buffers[0]), SW_LD_OF(buffers[0]),
                                 valid_cols(SW_COLS_OF(buffers[0]), a.vocab0, a.vocab), SW_F32_OF(buffers[1]),
                                 sw_vec_inc(buffers[1]), starpu_cuda_get_local_stream()));
}

static void ce_target_cuda(void *buffers[], void *cl_arg)
{
    struct ce_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    SW_CUDA_CHECK(sw_cuda_ce_target(SW_F32_OF(buffers[0]), SW_ROWS_OF(buffers[0]), SW_COLS_OF(buffers[0]),
                                    SW_LD_OF(buffers[0]), SW_I32_OF(buffers[1]), sw_vec_inc(buffers[1]),
                                    SW_F32_OF(buffers[2]), sw_vec_inc(buffers[2]), a.vocab0,
                                    starpu_cuda_get_local_stream()));
}

static void ce_sumexp_cuda(void *buffers[], void *cl_arg)
{
    struct ce_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    SW_CUDA_CHECK(sw_cuda_ce_sumexp(SW_F32_OF(buffers[0]), SW_ROWS_OF(buffers[0]), SW_LD_OF(buffers[0]),
                                    valid_cols(SW_COLS_OF(buffers[0]), a.vocab0, a.vocab), SW_F32_OF(buffers[1]),
                                    sw_vec_inc(buffers[1]), SW_F32_OF(buffers[2]), sw_vec_inc(buffers[2]),
                                    starpu_cuda_get_local_stream()));
}

static void ce_loss_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    SW_CUDA_CHECK(sw_cuda_ce_loss(SW_F32_OF(buffers[0]), sw_vec_inc(buffers[0]), SW_F32_OF(buffers[1]),
                                  sw_vec_inc(buffers[1]), SW_F32_OF(buffers[2]), sw_vec_inc(buffers[2]),
                                  SW_F32_OF(buffers[3]), sw_vec_inc(buffers[3]), SW_NUMEL_OF(buffers[3]),
                                  starpu_cuda_get_local_stream()));
}

static void ce_bwd_launch(void *buffers[], const struct ce_args *a, int weighted)
{
    const int64_t vb = SW_COLS_OF(buffers[0]);
    SW_CUDA_CHECK(sw_cuda_ce_bwd(SW_F32_OF(buffers[0]), SW_ROWS_OF(buffers[0]), vb, SW_LD_OF(buffers[0]),
                                 valid_cols(vb, a->vocab0, a->vocab), SW_F32_OF(buffers[1]), sw_vec_inc(buffers[1]),
                                 SW_F32_OF(buffers[2]), sw_vec_inc(buffers[2]), SW_I32_OF(buffers[3]),
                                 sw_vec_inc(buffers[3]), weighted ? SW_F32_OF(buffers[4]) : NULL,
                                 weighted ? sw_vec_inc(buffers[4]) : 0, weighted ? SW_F32_OF(buffers[5]) : NULL,
                                 a->vocab0, a->scale, starpu_cuda_get_local_stream()));
}

static void ce_bwd_cuda(void *buffers[], void *cl_arg)
{
    struct ce_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    ce_bwd_launch(buffers, &a, 0);
}

static void ce_bwd_weighted_cuda(void *buffers[], void *cl_arg)
{
    struct ce_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    ce_bwd_launch(buffers, &a, 1);
}

static void ce_weights_cuda(void *buffers[], void *cl_arg)
{
    struct ce_weight_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    void *out = buffers[a.weighted ? 2 : 1];
    SW_CUDA_CHECK(sw_cuda_ce_weights(SW_I32_OF(buffers[0]), sw_vec_inc(buffers[0]), SW_NUMEL_OF(buffers[0]),
                                     a.weighted ? SW_F32_OF(buffers[1]) : NULL,
                                     a.weighted ? sw_vec_inc(buffers[1]) : 0, a.ignore, SW_F32_OF(out),
                                     sw_vec_inc(out), starpu_cuda_get_local_stream()));
}

static void ce_mean_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    SW_CUDA_CHECK(sw_cuda_ce_mean(SW_F32_OF(buffers[0]), sw_vec_inc(buffers[0]), SW_F32_OF(buffers[1]),
                                  sw_vec_inc(buffers[1]), SW_NUMEL_OF(buffers[0]), SW_F32_OF(buffers[2]),
                                  SW_F32_OF(buffers[3]), starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(ce_max_model, "sw_ce_max");
SW_PERFMODEL(ce_target_model, "sw_ce_target");
SW_PERFMODEL(ce_sumexp_model, "sw_ce_sumexp");
SW_PERFMODEL(ce_loss_model, "sw_ce_loss");
SW_PERFMODEL(ce_bwd_model, "sw_ce_bwd");
SW_PERFMODEL(ce_bwd_weighted_model, "sw_ce_bwd_weighted");
SW_PERFMODEL(ce_weights_model, "sw_ce_weights");
SW_PERFMODEL(ce_mean_model, "sw_ce_mean");

static struct starpu_codelet ce_max_cl = {
    .cpu_funcs = {ce_max_cpu},
    .cpu_funcs_name = {"ce_max_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {ce_max_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &ce_max_model,
    .name = "ce_max",
};

static struct starpu_codelet ce_target_cl = {
    .cpu_funcs = {ce_target_cpu},
    .cpu_funcs_name = {"ce_target_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {ce_target_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 3,
    .modes = {STARPU_R, STARPU_R, STARPU_W},
    .model = &ce_target_model,
    .name = "ce_target",
};

static struct starpu_codelet ce_sumexp_cl = {
    .cpu_funcs = {ce_sumexp_cpu},
    .cpu_funcs_name = {"ce_sumexp_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {ce_sumexp_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 3,
    .modes = {STARPU_R, STARPU_R, STARPU_W},
    .model = &ce_sumexp_model,
    .name = "ce_sumexp",
};

static struct starpu_codelet ce_loss_cl = {
    .cpu_funcs = {ce_loss_cpu},
    .cpu_funcs_name = {"ce_loss_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {ce_loss_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 4,
    .modes = {STARPU_R, STARPU_R, STARPU_R, STARPU_W},
    .model = &ce_loss_model,
    .name = "ce_loss",
};

static struct starpu_codelet ce_bwd_cl = {
    .cpu_funcs = {ce_bwd_cpu},
    .cpu_funcs_name = {"ce_bwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {ce_bwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 4,
    .modes = {STARPU_RW, STARPU_R, STARPU_R, STARPU_R},
    .model = &ce_bwd_model,
    .name = "ce_bwd",
};

static struct starpu_codelet ce_bwd_weighted_cl = {
    .cpu_funcs = {ce_bwd_weighted_cpu},
    .cpu_funcs_name = {"ce_bwd_weighted_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {ce_bwd_weighted_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 6,
    .modes = {STARPU_RW, STARPU_R, STARPU_R, STARPU_R, STARPU_R, STARPU_R},
    .model = &ce_bwd_weighted_model,
    .name = "ce_bwd_weighted",
};

/* the same function with and without a weights buffer (ce_weight_args.weighted) */
static struct starpu_codelet ce_weights_cl = {
    .cpu_funcs = {ce_weights_cpu},
    .cpu_funcs_name = {"ce_weights_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {ce_weights_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &ce_weights_model,
    .name = "ce_weights",
};

static struct starpu_codelet ce_weights_w_cl = {
    .cpu_funcs = {ce_weights_cpu},
    .cpu_funcs_name = {"ce_weights_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {ce_weights_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 3,
    .modes = {STARPU_R, STARPU_R, STARPU_W},
    .model = &ce_weights_model,
    .name = "ce_weights",
};

static struct starpu_codelet ce_mean_cl = {
    .cpu_funcs = {ce_mean_cpu},
    .cpu_funcs_name = {"ce_mean_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {ce_mean_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 4,
    .modes = {STARPU_R, STARPU_R, STARPU_R, STARPU_W},
    .model = &ce_mean_model,
    .name = "ce_mean",
};

void sw_ce_max(starpu_data_handle_t logits, starpu_data_handle_t mx, int64_t vocab0, int64_t vocab)
{
    struct ce_args a = {vocab0, vocab, 0.0f};
    SW_INSERT(&ce_max_cl, STARPU_R, logits, STARPU_W, mx, STARPU_VALUE, &a, sizeof a);
}

void sw_ce_target(starpu_data_handle_t logits, starpu_data_handle_t targets,
                  starpu_data_handle_t tgt, int64_t vocab0)
{
    struct ce_args a = {vocab0, 0, 0.0f};
    SW_INSERT(&ce_target_cl, STARPU_R, logits, STARPU_R, targets, STARPU_W, tgt, STARPU_VALUE, &a,
              sizeof a);
}

void sw_ce_sumexp(starpu_data_handle_t logits, starpu_data_handle_t mx, starpu_data_handle_t se,
                  int64_t vocab0, int64_t vocab)
{
    struct ce_args a = {vocab0, vocab, 0.0f};
    SW_INSERT(&ce_sumexp_cl, STARPU_R, logits, STARPU_R, mx, STARPU_W, se, STARPU_VALUE, &a, sizeof a);
}

void sw_ce_loss(starpu_data_handle_t mx, starpu_data_handle_t tgt, starpu_data_handle_t se,
                starpu_data_handle_t loss)
{
    SW_INSERT(&ce_loss_cl, STARPU_R, mx, STARPU_R, tgt, STARPU_R, se, STARPU_W, loss);
}

void sw_ce_bwd(starpu_data_handle_t logits, starpu_data_handle_t mx, starpu_data_handle_t se,
               starpu_data_handle_t targets, int64_t vocab0, int64_t vocab, float scale)
{
    struct ce_args a = {vocab0, vocab, scale};
    SW_INSERT(&ce_bwd_cl, STARPU_RW, logits, STARPU_R, mx, STARPU_R, se, STARPU_R, targets,
              STARPU_VALUE, &a, sizeof a);
}

void sw_ce_bwd_weighted(starpu_data_handle_t logits, starpu_data_handle_t mx, starpu_data_handle_t se,
                        starpu_data_handle_t targets, starpu_data_handle_t rw, starpu_data_handle_t count,
                        int64_t vocab0, int64_t vocab)
{
    struct ce_args a = {vocab0, vocab, 0.0f};
    SW_INSERT(&ce_bwd_weighted_cl, STARPU_RW, logits, STARPU_R, mx, STARPU_R, se, STARPU_R, targets, STARPU_R, rw,
              STARPU_R, count, STARPU_VALUE, &a, sizeof a);
}

void sw_ce_weights(starpu_data_handle_t targets, starpu_data_handle_t weights, starpu_data_handle_t rw,
                   int32_t ignore_index)
{
    struct ce_weight_args a = {ignore_index, weights != NULL};
    if (weights)
        SW_INSERT(&ce_weights_w_cl, STARPU_R, targets, STARPU_R, weights, STARPU_W, rw, STARPU_VALUE, &a, sizeof a);
    else
        SW_INSERT(&ce_weights_cl, STARPU_R, targets, STARPU_W, rw, STARPU_VALUE, &a, sizeof a);
}

void sw_ce_mean(starpu_data_handle_t loss, starpu_data_handle_t rw, starpu_data_handle_t count,
                starpu_data_handle_t out)
{
    SW_INSERT(&ce_mean_cl, STARPU_R, loss, STARPU_R, rw, STARPU_R, count, STARPU_W, out);
}
