/* Softmax over the columns of each row.
 *   fwd: x[r,c] -> y[r,c];  bwd: y[r,c], dy[r,c] -> dx = y * (dy - rowsum(dy * y))
 * The exponential is inlined (Cephes expf) because libm's expf is a scalar
 * call without -ffast-math. A row that is all -inf gives y = 0. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "codelet_util.h"
#include "simd.h"
#include "starweave/ops.h"

/* buffers: x, y */
static void softmax_fwd_cpu(void *buffers[], void *cl_arg)
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
        /* row max; NaN compares false and is left to propagate through exp */
        float m = sw_row_max(xr, C);
        if (m == -INFINITY) m = 0.0f; /* all masked: every exp is 0 */

        int64_t c;
        for (c = 0; c < C; c++) yr[c] = sw_expf(xr[c] - m);
        sw_vf acc = {0}, v;
        for (c = 0; c + SW_VL <= C; c += SW_VL) {
            SW_VLOAD(v, yr + c);
            acc += v;
        }
        float sum = sw_vsum(&acc);
        for (; c < C; c++) sum += yr[c];
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        for (c = 0; c < C; c++) yr[c] *= inv;
    }
}

/* buffers: y, dy, dx */
static void softmax_bwd_cpu(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    const int64_t ldy = SW_LD_OF(buffers[0]), lddy = SW_LD_OF(buffers[1]), lddx = SW_LD_OF(buffers[2]);
    STARPU_ASSERT(SW_ROWS_OF(buffers[1]) == R && SW_COLS_OF(buffers[1]) == C);
    STARPU_ASSERT(SW_ROWS_OF(buffers[2]) == R && SW_COLS_OF(buffers[2]) == C);
    const float *y = SW_F32_OF(buffers[0]), *dy = SW_F32_OF(buffers[1]);
    float *dx = SW_F32_OF(buffers[2]);
    for (int64_t r = 0; r < R; r++) {
        const float *yr = y + r * ldy, *dyr = dy + r * lddy;
        float *dxr = dx + r * lddx;
        sw_vf acc = {0}, vy, vdy;
        int64_t c = 0;
        for (; c + SW_VL <= C; c += SW_VL) {
            SW_VLOAD(vy, yr + c);
            SW_VLOAD(vdy, dyr + c);
            acc += vdy * vy;
        }
        float d = sw_vsum(&acc);
        for (; c < C; c++) d += dyr[c] * yr[c];
        for (c = 0; c < C; c++) dxr[c] = yr[c] * (dyr[c] - d);
    }
}

#ifdef STARWEAVE_USE_CUDA
static void softmax_fwd_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    STARPU_ASSERT(SW_ROWS_OF(buffers[1]) == R && SW_COLS_OF(buffers[1]) == C);
    SW_CUDA_CHECK(sw_cuda_softmax_fwd(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                      SW_LD_OF(buffers[1]), R, C, starpu_cuda_get_local_stream()));
}

static void softmax_bwd_cuda(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    const int64_t R = SW_ROWS_OF(buffers[0]), C = SW_COLS_OF(buffers[0]);
    STARPU_ASSERT(SW_ROWS_OF(buffers[1]) == R && SW_COLS_OF(buffers[1]) == C);
    STARPU_ASSERT(SW_ROWS_OF(buffers[2]) == R && SW_COLS_OF(buffers[2]) == C);
    SW_CUDA_CHECK(sw_cuda_softmax_bwd(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                      SW_LD_OF(buffers[1]), SW_F32_OF(buffers[2]), SW_LD_OF(buffers[2]), R, C,
                                      starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(softmax_fwd_model, "sw_softmax_fwd");
SW_PERFMODEL(softmax_bwd_model, "sw_softmax_bwd");

static struct starpu_codelet softmax_fwd_cl = {
    .cpu_funcs = {softmax_fwd_cpu},
    .cpu_funcs_name = {"softmax_fwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {softmax_fwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &softmax_fwd_model,
    .name = "softmax_fwd",
};

static struct starpu_codelet softmax_bwd_cl = {
    .cpu_funcs = {softmax_bwd_cpu},
    .cpu_funcs_name = {"softmax_bwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {softmax_bwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 3,
    .modes = {STARPU_R, STARPU_R, STARPU_W},
    .model = &softmax_bwd_model,
    .name = "softmax_bwd",
};

void sw_softmax_fwd(starpu_data_handle_t x, starpu_data_handle_t y)
{
    SW_SAME_SHAPE("sw_softmax_fwd", x, y);
    SW_INSERT(&softmax_fwd_cl, STARPU_R, x, STARPU_W, y);
}

void sw_softmax_bwd(starpu_data_handle_t y, starpu_data_handle_t dy, starpu_data_handle_t dx)
{
    SW_SAME_SHAPE("sw_softmax_bwd", y, dy);
    SW_SAME_SHAPE("sw_softmax_bwd", y, dx);
    SW_INSERT(&softmax_bwd_cl, STARPU_R, y, STARPU_R, dy, STARPU_W, dx);
}
