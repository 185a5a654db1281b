/* SiLU: y = x sigmoid(x) (DiT's timestep MLP and adaLN input).
 *   fwd: x[r,c] -> y[r,c]
 *   bwd: grad (RW): dy on entry, dx = dy * silu'(x) on return
 * The formulas of SwiGLU's gate (codelets/swiglu.c): sigmoid through
 * sw_expf, saturating (no NaN for large |x|), silu'(a) = sg (1 + a (1 - sg))
 * with 1 - sg = e sg where e < 1. */
#include "codelet_util.h"
#include "simd.h"
#include "starweave/ops.h"

/* buffers: x (R), y (W) */
static void silu_fwd_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    const int64_t ldx = SW_LD_OF(buffers[0]), ldy = SW_LD_OF(buffers[1]);
    const float *x = SW_F32_OF(buffers[0]);
    float *y = SW_F32_OF(buffers[1]);
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) {
            const float a = x[r * ldx + c];
            y[r * ldy + c] = a / (1.0f + sw_expf(-a));
        }
}

/* buffers: x (R), grad (RW) */
static void silu_bwd_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    const int64_t ldx = SW_LD_OF(buffers[0]), ldg = SW_LD_OF(buffers[1]);
    const float *x = SW_F32_OF(buffers[0]);
    float *g = SW_F32_OF(buffers[1]);
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) {
            const float a = x[r * ldx + c], e = sw_expf(-a), sg = 1.0f / (1.0f + e);
            const float oms = e < 1.0f ? e * sg : 1.0f - sg;
            g[r * ldg + c] *= sg * (1.0f + a * oms);
        }
}

#ifdef STARWEAVE_USE_CUDA
static void silu_fwd_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    SW_CUDA_CHECK(sw_cuda_silu_fwd(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                   SW_LD_OF(buffers[1]), SW_ROWS_OF(buffers[0]), SW_COLS_OF(buffers[0]),
                                   starpu_cuda_get_local_stream()));
}
static void silu_bwd_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    SW_CUDA_CHECK(sw_cuda_silu_bwd(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                   SW_LD_OF(buffers[1]), SW_ROWS_OF(buffers[0]), SW_COLS_OF(buffers[0]),
                                   starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(silu_fwd_model, "sw_silu_fwd");
SW_PERFMODEL(silu_bwd_model, "sw_silu_bwd");

static struct starpu_codelet silu_fwd_cl = {
    .cpu_funcs = {silu_fwd_cpu},
    .cpu_funcs_name = {"silu_fwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {silu_fwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &silu_fwd_model,
    .name = "silu_fwd",
};

static struct starpu_codelet silu_bwd_cl = {
    .cpu_funcs = {silu_bwd_cpu},
    .cpu_funcs_name = {"silu_bwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {silu_bwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_RW},
    .model = &silu_bwd_model,
    .name = "silu_bwd",
};

void sw_silu_fwd(starpu_data_handle_t x, starpu_data_handle_t y)
{
    SW_SAME_SHAPE("sw_silu_fwd", x, y);
    SW_INSERT(&silu_fwd_cl, STARPU_R, x, STARPU_W, y);
}

void sw_silu_bwd(starpu_data_handle_t x, starpu_data_handle_t grad)
{
    SW_SAME_SHAPE("sw_silu_bwd", x, grad);
    SW_INSERT(&silu_bwd_cl, STARPU_R, x, STARPU_RW, grad);
}
