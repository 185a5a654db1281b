/* Softmax over the columns of each row.
 *   fwd: x[r,c] -> y[r,c];  bwd: y[r,c], dy[r,c] -> dx = y * (dy - rowsum(dy * y))
 * The exponential is inlined (Cephes expf) because libm's expf is a scalar
 * call without -ffast-math. A row that is all -inf gives y = 0. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "codelet_util.h"
#include "starweave/ops.h"

/* Row reductions in GNU C vector extensions: GCC lowers them to the widest
 * SIMD the target has (AVX-512, 2x AVX2, 4x SSE), while a plain float
 * reduction loop is not vectorised without -ffast-math. Vectors are only
 * handled through pointers and locals, never passed by value (-Wpsabi). */
#define SW_VL 16
typedef float sw_vf __attribute__((vector_size(SW_VL * sizeof(float))));
typedef int32_t sw_vi __attribute__((vector_size(SW_VL * sizeof(int32_t))));
#define SW_VLOAD(v, p) memcpy(&(v), (p), sizeof(sw_vf))

/* pairwise sum of the lanes */
static float vsum(const sw_vf *v)
{
    float t[SW_VL];
    memcpy(t, v, sizeof t);
    for (int w = SW_VL / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) t[j] += t[j + w];
    return t[0];
}

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
        sw_vf vm, v;
        for (int j = 0; j < SW_VL; j++) vm[j] = -INFINITY;
        int64_t c = 0;
        for (; c + SW_VL <= C; c += SW_VL) {
            SW_VLOAD(v, xr + c);
            sw_vi gt = v > vm;
            vm = (sw_vf)(((sw_vi)v & gt) | ((sw_vi)vm & ~gt));
        }
        float m = -INFINITY;
        for (int j = 0; j < SW_VL; j++) m = vm[j] > m ? vm[j] : m;
        for (; c < C; c++) m = xr[c] > m ? xr[c] : m;
        if (m == -INFINITY) m = 0.0f; /* all masked: every exp is 0 */

        for (c = 0; c < C; c++) yr[c] = softmax_expf(xr[c] - m);
        sw_vf acc = {0};
        for (c = 0; c + SW_VL <= C; c += SW_VL) {
            SW_VLOAD(v, yr + c);
            acc += v;
        }
        float sum = vsum(&acc);
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
        float d = vsum(&acc);
        for (; c < C; c++) d += dyr[c] * yr[c];
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
