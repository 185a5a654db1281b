/* GeLU, tanh approximation: y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
 *   fwd: x[r,c] -> y[r,c];  bwd: x[r,c], grad[r,c] (dy in, dx out)
 * Written through 1 + tanh(u) = 2 sigmoid(2u), so gelu = x sigmoid(2u) and
 * 1 - tanh(u)^2 = 4 sigmoid(2u) (1 - sigmoid(2u)): no cancellation near
 * u = 0. The exponential is inlined (Cephes expf) so the loops vectorise;
 * libm's expf/tanhf are scalar calls without -ffast-math. */
#include <math.h>
#include <stdint.h>

#include "codelet_util.h"
#include "simd.h"
#include "starweave/ops.h"

#define GELU_K0 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_K1 0.044715f

/* buffers: x, y */
static void gelu_fwd_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    const int64_t ldx = SW_LD_OF(buffers[0]), ldy = SW_LD_OF(buffers[1]);
    STARPU_ASSERT(SW_ROWS_OF(buffers[1]) == R && SW_COLS_OF(buffers[1]) == C);
    const float *x = SW_F32_OF(buffers[0]);
    float *y = SW_F32_OF(buffers[1]);
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * ldx;
        float *yr = y + r * ldy;
        for (int64_t c = 0; c < C; c++) {
            float v = xr[c];
            float u = GELU_K0 * (v + GELU_K1 * v * v * v);
            yr[c] = v / (1.0f + sw_expf(-2.0f * u));
        }
    }
}

/* buffers: x, grad */
static void gelu_bwd_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    const int64_t ldx = SW_LD_OF(buffers[0]), ldg = SW_LD_OF(buffers[1]);
    STARPU_ASSERT(SW_ROWS_OF(buffers[1]) == R && SW_COLS_OF(buffers[1]) == C);
    const float *x = SW_F32_OF(buffers[0]);
    float *g = SW_F32_OF(buffers[1]);
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * ldx;
        float *gr = g + r * ldg;
        for (int64_t c = 0; c < C; c++) {
            /* beyond |x| = 20, gelu' is 0 or 1 in fp32; clamping keeps
             * x du finite where sg (1 - sg) is 0 */
            float v = xr[c];
            v = v < -20.0f ? -20.0f : v;
            v = v > 20.0f ? 20.0f : v;
            float u = GELU_K0 * (v + GELU_K1 * v * v * v);
            float du = GELU_K0 * (1.0f + 3.0f * GELU_K1 * v * v);
            float e = sw_expf(-2.0f * u);
            float sg = 1.0f / (1.0f + e);
            /* 1 - sg = e sg, without cancellation when sg is near 1 */
            float oms = e < 1.0f ? e * sg : 1.0f - sg;
            /* d/dx [x sg(2u)] = sg + x * 2 sg (1 - sg) du */
            gr[c] *= sg + 2.0f * v * sg * oms * du;
        }
    }
}

#ifdef STARWEAVE_USE_CUDA
static void gelu_fwd_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    STARPU_ASSERT(SW_ROWS_OF(buffers[1]) == R && SW_COLS_OF(buffers[1]) == C);
    SW_CUDA_CHECK(sw_cuda_gelu_fwd(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                   SW_LD_OF(buffers[1]), R, C, starpu_cuda_get_local_stream()));
}

static void gelu_bwd_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    STARPU_ASSERT(SW_ROWS_OF(buffers[1]) == R && SW_COLS_OF(buffers[1]) == C);
    SW_CUDA_CHECK(sw_cuda_gelu_bwd(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                   SW_LD_OF(buffers[1]), R, C, starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(gelu_fwd_model, "sw_gelu_fwd");
SW_PERFMODEL(gelu_bwd_model, "sw_gelu_bwd");

static struct starpu_codelet gelu_fwd_cl = {
    .cpu_funcs = {gelu_fwd_cpu},
    .cpu_funcs_name = {"gelu_fwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {gelu_fwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &gelu_fwd_model,
    .name = "gelu_fwd",
};

static struct starpu_codelet gelu_bwd_cl = {
    .cpu_funcs = {gelu_bwd_cpu},
    .cpu_funcs_name = {"gelu_bwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {gelu_bwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_RW},
    .model = &gelu_bwd_model,
    .name = "gelu_bwd",
};

void sw_gelu_fwd(starpu_data_handle_t x, starpu_data_handle_t y)
{
    SW_SAME_SHAPE("sw_gelu_fwd", x, y);
    SW_INSERT(&gelu_fwd_cl, STARPU_R, x, STARPU_W, y);
}

void sw_gelu_bwd(starpu_data_handle_t x, starpu_data_handle_t grad)
{
    SW_SAME_SHAPE("sw_gelu_bwd", x, grad);
    SW_INSERT(&gelu_bwd_cl, STARPU_R, x, STARPU_RW, grad);
}
