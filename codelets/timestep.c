/* Sinusoidal timestep features (DiT / Open-Sora's TimestepEmbedder):
 *   y[b, i] = cos(t_b f_i), y[b, half + i] = sin(t_b f_i), i < half = dim / 2,
 *   f_i = exp(-ln(max_period) i / half); a last zero column when dim is odd.
 * As PyTorch forms them in fp32: f_i = exp(fl(fl(-ln max_period) * i) / half)
 * and the argument fl(t_b f_i) in fp32; exp, cos and sin evaluated in double
 * and rounded (the CUDA kernel alike). No backward (no gradient to t). */
#include <math.h>

#include "codelet_util.h"
#include "starweave/ops.h"

static inline float ts_freq(int64_t i, int64_t half, double max_period)
{
    const float a = (float)-log(max_period) * (float)i;
    return (float)exp((double)(a / (float)half));
}

/* buffers: t [B,1] or [1,B] (R), y [B,dim] (W) */
static void timestep_cpu(void *buffers[], void *cl_arg)
{
    double max_period;
    starpu_codelet_unpack_args(cl_arg, &max_period);
    const int64_t B = SW_ROWS_OF(buffers[1]), dim = SW_COLS_OF(buffers[1]), ldy = SW_LD_OF(buffers[1]);
    const int64_t inct = SW_ROWS_OF(buffers[0]) == 1 ? 1 : SW_LD_OF(buffers[0]), half = dim / 2;
    const float *t = SW_F32_OF(buffers[0]);
    float *y = SW_F32_OF(buffers[1]);
    for (int64_t b = 0; b < B; b++) {
        for (int64_t i = 0; i < half; i++) {
            const float arg = t[b * inct] * ts_freq(i, half, max_period);
            y[b * ldy + i] = (float)cos((double)arg);
            y[b * ldy + half + i] = (float)sin((double)arg);
        }
        if (dim % 2) y[b * ldy + dim - 1] = 0.0f;
    }
}

#ifdef STARWEAVE_USE_CUDA
static void timestep_cuda(void *buffers[], void *cl_arg)
{
    double max_period;
    starpu_codelet_unpack_args(cl_arg, &max_period);
    const int64_t inct = SW_ROWS_OF(buffers[0]) == 1 ? 1 : SW_LD_OF(buffers[0]);
    SW_CUDA_CHECK(sw_cuda_timestep(SW_F32_OF(buffers[0]), inct, SW_F32_OF(buffers[1]), SW_LD_OF(buffers[1]),
                                   SW_ROWS_OF(buffers[1]), SW_COLS_OF(buffers[1]), max_period,
                                   starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(timestep_model, "sw_timestep");

static struct starpu_codelet timestep_cl = {
    .cpu_funcs = {timestep_cpu},
    .cpu_funcs_name = {"timestep_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {timestep_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &timestep_model,
    .name = "timestep",
};

void sw_timestep_fwd(starpu_data_handle_t t, starpu_data_handle_t y, float max_period)
{
    SW_ONE_PER_ROW("sw_timestep_fwd", t, y);
    if (starpu_matrix_get_nx(y) < 2)
        sw_failf(__FILE__, __LINE__, "sw_timestep_fwd: y [%lu,%lu] must have at least 2 columns", SW_DIMS(y));
    if (!(max_period > 1.0f))
        sw_failf(__FILE__, __LINE__, "sw_timestep_fwd: max_period must be above 1 (%g)", (double)max_period);
    const double mp = max_period;
    SW_INSERT(&timestep_cl, STARPU_R, t, STARPU_W, y, STARPU_VALUE, &mp, sizeof mp);
}
