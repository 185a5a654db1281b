/* Mean-squared-error pieces over a block of predictions and targets.
 *   fwd: out[1,1] = alpha * sum (pred - tgt)^2 (in double, row-major order)
 *   bwd: dpred = 2 alpha (pred - tgt)
 * alpha is 1 / (the elements the mean is over); the layer (graphs/layers/heads.c)
 * picks it for the global batch. */
#include "codelet_util.h"
#include "starweave/ops.h"

/* buffers: pred [n,m] (R), tgt [n,m] (R), out [1,1] (W) */
static void mse_fwd_cpu(void *buffers[], void *cl_arg)
{
    float alpha;
    starpu_codelet_unpack_args(cl_arg, &alpha);
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    const int64_t ldp = SW_LD_OF(buffers[0]), ldt = SW_LD_OF(buffers[1]);
    const float *p = SW_F32_OF(buffers[0]), *t = SW_F32_OF(buffers[1]);
    double s = 0.0;
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) {
            const double d = (double)p[r * ldp + c] - (double)t[r * ldt + c];
            s += d * d;
        }
    SW_F32_OF(buffers[2])[0] = (float)((double)alpha * s);
}

/* buffers: pred (R), tgt (R), dpred (W) */
static void mse_bwd_cpu(void *buffers[], void *cl_arg)
{
    float alpha;
    starpu_codelet_unpack_args(cl_arg, &alpha);
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    const int64_t ldp = SW_LD_OF(buffers[0]), ldt = SW_LD_OF(buffers[1]), ldd = SW_LD_OF(buffers[2]);
    const float *p = SW_F32_OF(buffers[0]), *t = SW_F32_OF(buffers[1]);
    float *d = SW_F32_OF(buffers[2]);
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) d[r * ldd + c] = 2.0f * alpha * (p[r * ldp + c] - t[r * ldt + c]);
}

#ifdef STARWEAVE_USE_CUDA
static void mse_fwd_cuda(void *buffers[], void *cl_arg)
{
    float alpha;
    starpu_codelet_unpack_args(cl_arg, &alpha);
    SW_CUDA_CHECK(sw_cuda_mse_fwd(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                  SW_LD_OF(buffers[1]), SW_ROWS_OF(buffers[0]), SW_COLS_OF(buffers[0]),
                                  SW_F32_OF(buffers[2]), alpha, starpu_cuda_get_local_stream()));
}

static void mse_bwd_cuda(void *buffers[], void *cl_arg)
{
    float alpha;
    starpu_codelet_unpack_args(cl_arg, &alpha);
    SW_CUDA_CHECK(sw_cuda_mse_bwd(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                  SW_LD_OF(buffers[1]), SW_F32_OF(buffers[2]), SW_LD_OF(buffers[2]),
                                  SW_ROWS_OF(buffers[0]), SW_COLS_OF(buffers[0]), alpha,
                                  starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(mse_fwd_model, "sw_mse_fwd");
SW_PERFMODEL(mse_bwd_model, "sw_mse_bwd");

static struct starpu_codelet mse_fwd_cl = {
    .cpu_funcs = {mse_fwd_cpu},
    .cpu_funcs_name = {"mse_fwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {mse_fwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 3,
    .modes = {STARPU_R, STARPU_R, STARPU_W},
    .model = &mse_fwd_model,
    .name = "mse_fwd",
};

static struct starpu_codelet mse_bwd_cl = {
    .cpu_funcs = {mse_bwd_cpu},
    .cpu_funcs_name = {"mse_bwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {mse_bwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 3,
    .modes = {STARPU_R, STARPU_R, STARPU_W},
    .model = &mse_bwd_model,
    .name = "mse_bwd",
};

void sw_mse_fwd(starpu_data_handle_t pred, starpu_data_handle_t tgt, starpu_data_handle_t out, float alpha)
{
    SW_SAME_SHAPE("sw_mse_fwd", pred, tgt);
    SW_REQUIRE_MATRIX("sw_mse_fwd", out);
    if (starpu_matrix_get_ny(out) * starpu_matrix_get_nx(out) != 1)
        sw_failf(__FILE__, __LINE__, "sw_mse_fwd: out [%lu,%lu] must be [1,1]", SW_DIMS(out));
    SW_INSERT(&mse_fwd_cl, STARPU_R, pred, STARPU_R, tgt, STARPU_W, out, STARPU_VALUE, &alpha, sizeof alpha);
}

void sw_mse_bwd(starpu_data_handle_t pred, starpu_data_handle_t tgt, starpu_data_handle_t dpred, float alpha)
{
    SW_SAME_SHAPE("sw_mse_bwd", pred, tgt);
    SW_SAME_SHAPE("sw_mse_bwd", pred, dpred);
    SW_INSERT(&mse_bwd_cl, STARPU_R, pred, STARPU_R, tgt, STARPU_W, dpred, STARPU_VALUE, &alpha, sizeof alpha);
}
