/* Cross-entropy pieces over a block of logits (vocab-parallel friendly).
 * Column c of a logits block is vocabulary id vocab0 + c; ids >= vocab are
 * padding and ignored. A block's pieces are combined by the graph:
 * max = max of block maxes, tgt = sum of block tgts, se = sum of block
 * sumexps (each taken with the combined max), loss = log(se) + max - tgt. */
#include <math.h>

#include "codelet_util.h"
#include "simd.h"
#include "starweave/ops.h"

struct ce_args {
    int64_t vocab0, vocab;
    float scale;
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

/* buffers: logits (RW), mx (R), se (R), targets (R) */
static void ce_bwd_cpu(void *buffers[], void *cl_arg)
{
    struct ce_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    float *x = SW_F32_OF(buffers[0]);
    int64_t n = SW_ROWS_OF(buffers[0]), vb = SW_COLS_OF(buffers[0]), ld = SW_LD_OF(buffers[0]);
    int64_t nv = valid_cols(vb, a.vocab0, a.vocab);
    const float *mx = SW_F32_OF(buffers[1]), *se = SW_F32_OF(buffers[2]);
    const int32_t *t = SW_I32_OF(buffers[3]);
    int64_t ms = sw_vec_inc(buffers[1]), ss = sw_vec_inc(buffers[2]), tstr = sw_vec_inc(buffers[3]);
    for (int64_t r = 0; r < n; r++) {
        float *row = x + r * ld;
        float m = mx[r * ms], k = a.scale / se[r * ss];
        for (int64_t c = 0; c < nv; c++) row[c] = k * sw_expf(row[c] - m);
        for (int64_t c = nv; c < vb; c++) row[c] = 0.0f;
        int64_t tc = (int64_t)t[r * tstr] - a.vocab0;
        if (tc >= 0 && tc < nv) row[tc] -= a.scale;
    }
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

static void ce_bwd_cuda(void *buffers[], void *cl_arg)
{
    struct ce_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int64_t vb = SW_COLS_OF(buffers[0]);
    SW_CUDA_CHECK(sw_cuda_ce_bwd(SW_F32_OF(buffers[0]), SW_ROWS_OF(buffers[0]), vb, SW_LD_OF(buffers[0]),
                                 valid_cols(vb, a.vocab0, a.vocab), SW_F32_OF(buffers[1]), sw_vec_inc(buffers[1]),
                                 SW_F32_OF(buffers[2]), sw_vec_inc(buffers[2]), SW_I32_OF(buffers[3]),
                                 sw_vec_inc(buffers[3]), a.vocab0, a.scale, starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(ce_max_model, "sw_ce_max");
SW_PERFMODEL(ce_target_model, "sw_ce_target");
SW_PERFMODEL(ce_sumexp_model, "sw_ce_sumexp");
SW_PERFMODEL(ce_loss_model, "sw_ce_loss");
SW_PERFMODEL(ce_bwd_model, "sw_ce_bwd");

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
