/* Softmax over the columns of each row.
 *   fwd: x[r,c] -> y[r,c];  bwd: y[r,c], dy[r,c] -> dx = y * (dy - rowsum(dy * y))
 * Row reductions use SW_SM_LANES independent partial results (a shape GCC
 * vectorises without -ffast-math) and the exponential is inlined (Cephes
 * expf) because libm's expf is a scalar call. A row that is all -inf gives
 * y = 0. */
#include <math.h>
#include <stdint.h>

#include "codelet_util.h"
#include "starweave/ops.h"

#define SW_SM_LANES 16

/* exp(x) within ~2 ulp on [-86.6, 88.72]; 0 below (true value < 2.4e-38),
 * +inf above, NaN for NaN. Branch-free so that GCC vectorises callers. */
static inline float softmax_expf(float x)
{
    const float lo = -86.6f, hi = 88.72f;
    float xc = x < lo ? lo : (x > hi ? hi : x);
    /* n = round(xc / ln 2) by the 1.5 * 2^23 trick: the low mantissa bits of t are n */
    union { float f; uint32_t u; } t = {xc * 1.44269504088896341f + 12582912.0f};
    float n = t.f - 12582912.0f;
    float r = xc - n * 0.693359375f - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* 2^n as 2^(n-1) * 2 so that n = 128 (x near 88.7) stays finite; n >= -125 */
    union { uint32_t u; float f; } s = {(t.u - 0x4B400000u + 126u) << 23};
    float e = p * s.f * 2.0f;
    e = x < lo ? 0.0f : e;
    return x > hi ? INFINITY : e;
}

static float lanes_sum(const float *a)
{
    float s[SW_SM_LANES / 2];
    for (int j = 0; j < SW_SM_LANES / 2; j++) s[j] = a[j] + a[j + SW_SM_LANES / 2];
    for (int w = SW_SM_LANES / 4; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) s[j] += s[j + w];
    return s[0];
}

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
        float mx[SW_SM_LANES];
        for (int j = 0; j < SW_SM_LANES; j++) mx[j] = -INFINITY;
        int64_t c = 0;
        for (; c + SW_SM_LANES <= C; c += SW_SM_LANES)
            for (int j = 0; j < SW_SM_LANES; j++) mx[j] = xr[c + j] > mx[j] ? xr[c + j] : mx[j];
        for (int j = 0; c + j < C; j++) mx[j] = xr[c + j] > mx[j] ? xr[c + j] : mx[j];
        float m = mx[0];
        for (int j = 1; j < SW_SM_LANES; j++) m = mx[j] > m ? mx[j] : m;
        if (m == -INFINITY) m = 0.0f; /* all masked: every exp is 0 */

        float acc[SW_SM_LANES] = {0};
        for (c = 0; c + SW_SM_LANES <= C; c += SW_SM_LANES)
            for (int j = 0; j < SW_SM_LANES; j++) {
                float e = softmax_expf(xr[c + j] - m);
                yr[c + j] = e;
                acc[j] += e;
            }
        for (int j = 0; c + j < C; j++) {
            float e = softmax_expf(xr[c + j] - m);
            yr[c + j] = e;
            acc[j] += e;
        }
        const float sum = lanes_sum(acc);
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
        float acc[SW_SM_LANES] = {0};
        int64_t c = 0;
        for (; c + SW_SM_LANES <= C; c += SW_SM_LANES)
            for (int j = 0; j < SW_SM_LANES; j++) acc[j] += dyr[c + j] * yr[c + j];
        for (int j = 0; c + j < C; j++) acc[j] += dyr[c + j] * yr[c + j];
        const float d = lanes_sum(acc);
        for (c = 0; c < C; c++) dxr[c] = yr[c] * (dyr[c] - d);
    }
}

SW_PERFMODEL(softmax_fwd_model, "sw_softmax_fwd");
SW_PERFMODEL(softmax_bwd_model, "sw_softmax_bwd");

static struct starpu_codelet softmax_fwd_cl = {
    .cpu_funcs = {softmax_fwd_cpu},
    .cpu_funcs_name = {"softmax_fwd_cpu"},
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &softmax_fwd_model,
    .name = "softmax_fwd",
};

static struct starpu_codelet softmax_bwd_cl = {
    .cpu_funcs = {softmax_bwd_cpu},
    .cpu_funcs_name = {"softmax_bwd_cpu"},
    .nbuffers = 3,
    .modes = {STARPU_R, STARPU_R, STARPU_W},
    .model = &softmax_bwd_model,
    .name = "softmax_bwd",
};

void sw_softmax_fwd(starpu_data_handle_t x, starpu_data_handle_t y)
{
    SW_INSERT(&softmax_fwd_cl, STARPU_R, x, STARPU_W, y);
}

void sw_softmax_bwd(starpu_data_handle_t y, starpu_data_handle_t dy, starpu_data_handle_t dx)
{
    SW_INSERT(&softmax_bwd_cl, STARPU_R, y, STARPU_R, dy, STARPU_W, dx);
}
