/* SwiGLU gating (LLaMA's MLP): y = silu(gate) * up, silu(a) = a sigmoid(a).
 *   fwd: gate[r,c], up[r,c] -> y[r,c]
 *   bwd: gate, up, dy[r,c] -> dgate = dy * up * silu'(gate), dup = dy * silu(gate)
 * sigmoid(a) = 1 / (1 + e), e = exp(-a), through sw_expf (simd.h), which
 * is inlined so the loops vectorise and saturates instead of overflowing:
 * e = +inf for a < -88.7 gives sigmoid 0, silu -0 and silu' 0, no NaN.
 * silu'(a) = sg (1 + a (1 - sg)), with 1 - sg = e sg where e < 1 (no
 * cancellation when sg is near 1). */

#include "codelet_util.h"
#include "simd.h"
#include "starweave/ops.h"

/* buffers: gate, up, y */
static void swiglu_fwd_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    for (int i = 1; i < 3; i++) STARPU_ASSERT(SW_ROWS_OF(buffers[i]) == R && SW_COLS_OF(buffers[i]) == C);
    const int64_t ldg = SW_LD_OF(buffers[0]), ldu = SW_LD_OF(buffers[1]), ldy = SW_LD_OF(buffers[2]);
    const float *g = SW_F32_OF(buffers[0]), *u = SW_F32_OF(buffers[1]);
    float *y = SW_F32_OF(buffers[2]);
    for (int64_t r = 0; r < R; r++) {
        const float *gr = g + r * ldg, *ur = u + r * ldu;
        float *yr = y + r * ldy;
        for (int64_t c = 0; c < C; c++) {
            const float a = gr[c];
            yr[c] = a / (1.0f + sw_expf(-a)) * ur[c];
        }
    }
}

/* buffers: gate, up, dy, dgate, dup */
static void swiglu_bwd_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    for (int i = 1; i < 5; i++) STARPU_ASSERT(SW_ROWS_OF(buffers[i]) == R && SW_COLS_OF(buffers[i]) == C);
    const int64_t ldg = SW_LD_OF(buffers[0]), ldu = SW_LD_OF(buffers[1]), lddy = SW_LD_OF(buffers[2]);
    const int64_t lddg = SW_LD_OF(buffers[3]), lddu = SW_LD_OF(buffers[4]);
    const float *g = SW_F32_OF(buffers[0]), *u = SW_F32_OF(buffers[1]), *dy = SW_F32_OF(buffers[2]);
    float *dg = SW_F32_OF(buffers[3]), *du = SW_F32_OF(buffers[4]);
    for (int64_t r = 0; r < R; r++) {
        const float *gr = g + r * ldg, *ur = u + r * ldu, *dyr = dy + r * lddy;
        float *dgr = dg + r * lddg, *dur = du + r * lddu;
        for (int64_t c = 0; c < C; c++) {
            const float a = gr[c], d = dyr[c];
            const float e = sw_expf(-a);
            const float sg = 1.0f / (1.0f + e);
            const float oms = e < 1.0f ? e * sg : 1.0f - sg;
            dgr[c] = d * ur[c] * (sg * (1.0f + a * oms));
            dur[c] = d * (a * sg);
        }
    }
}

#ifdef STARWEAVE_USE_CUDA
static void swiglu_fwd_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    for (int i = 1; i < 3; i++) STARPU_ASSERT(SW_ROWS_OF(buffers[i]) == R && SW_COLS_OF(buffers[i]) == C);
    SW_CUDA_CHECK(sw_cuda_swiglu_fwd(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                     SW_LD_OF(buffers[1]), SW_F32_OF(buffers[2]), SW_LD_OF(buffers[2]), R, C,
                                     starpu_cuda_get_local_stream()));
}

static void swiglu_bwd_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    for (int i = 1; i < 5; i++) STARPU_ASSERT(SW_ROWS_OF(buffers[i]) == R && SW_COLS_OF(buffers[i]) == C);
    SW_CUDA_CHECK(sw_cuda_swiglu_bwd(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                     SW_LD_OF(buffers[1]), SW_F32_OF(buffers[2]), SW_LD_OF(buffers[2]),
                                     SW_F32_OF(buffers[3]), SW_LD_OF(buffers[3]), SW_F32_OF(buffers[4]),
                                     SW_LD_OF(buffers[4]), R, C, starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(swiglu_fwd_model, "sw_swiglu_fwd");
SW_PERFMODEL(swiglu_bwd_model, "sw_swiglu_bwd");

static struct starpu_codelet swiglu_fwd_cl = {
    .cpu_funcs = {swiglu_fwd_cpu},
    .cpu_funcs_name = {"swiglu_fwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {swiglu_fwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 3,
    .modes = {STARPU_R, STARPU_R, STARPU_W},
    .model = &swiglu_fwd_model,
    .name = "swiglu_fwd",
};

static struct starpu_codelet swiglu_bwd_cl = {
    .cpu_funcs = {swiglu_bwd_cpu},
    .cpu_funcs_name = {"swiglu_bwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {swiglu_bwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 5,
    .modes = {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_W},
    .model = &swiglu_bwd_model,
    .name = "swiglu_bwd",
};

void sw_swiglu_fwd(starpu_data_handle_t gate, starpu_data_handle_t up, starpu_data_handle_t y)
{
    SW_SAME_SHAPE("sw_swiglu_fwd", gate, up);
    SW_SAME_SHAPE("sw_swiglu_fwd", gate, y);
    SW_INSERT(&swiglu_fwd_cl, STARPU_R, gate, STARPU_R, up, STARPU_W, y);
}

void sw_swiglu_bwd(starpu_data_handle_t gate, starpu_data_handle_t up, starpu_data_handle_t dy,
                   starpu_data_handle_t dgate, starpu_data_handle_t dup)
{
    SW_SAME_SHAPE("sw_swiglu_bwd", gate, up);
    SW_SAME_SHAPE("sw_swiglu_bwd", gate, dy);
    SW_SAME_SHAPE("sw_swiglu_bwd", gate, dgate);
    SW_SAME_SHAPE("sw_swiglu_bwd", gate, dup);
    SW_INSERT(&swiglu_bwd_cl, STARPU_R, gate, STARPU_R, up, STARPU_R, dy, STARPU_W, dgate, STARPU_W, dup);
}
