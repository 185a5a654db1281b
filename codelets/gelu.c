/* GeLU, tanh approximation: y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
 *   fwd: x[r,c] -> y[r,c];  bwd: x[r,c], grad[r,c] (dy in, dx out)
 * Written through 1 + tanh(u) = 2 sigmoid(2u), so gelu = x sigmoid(2u) and
 * 1 - tanh(u)^2 = 4 sigmoid(2u) (1 - sigmoid(2u)): no cancellation near
 * u = 0. The exponential is inlined (Cephes expf) so the loops vectorise;
 * libm's expf/tanhf are scalar calls without -ffast-math. */
#include <math.h>
#include <stdint.h>

#include "codelet_util.h"
#include "starweave/ops.h"

/* exp(x) within ~2 ulp on [-86.6, 88.72]; 0 below (true value < 2.4e-38),
 * +inf above, NaN for NaN. Branch-free so that GCC vectorises callers. */
static inline float gelu_expf(float x)
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
            yr[c] = v / (1.0f + gelu_expf(-2.0f * u));
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
            float e = gelu_expf(-2.0f * u);
            float sg = 1.0f / (1.0f + e);
            /* 1 - sg = e sg, without cancellation when sg is near 1 */
            float oms = e < 1.0f ? e * sg : 1.0f - sg;
            /* d/dx [x sg(2u)] = sg + x * 2 sg (1 - sg) du */
            gr[c] *= sg + 2.0f * v * sg * oms * du;
        }
    }
}

SW_PERFMODEL(gelu_fwd_model, "sw_gelu_fwd");
SW_PERFMODEL(gelu_bwd_model, "sw_gelu_bwd");

static struct starpu_codelet gelu_fwd_cl = {
    .cpu_funcs = {gelu_fwd_cpu},
    .cpu_funcs_name = {"gelu_fwd_cpu"},
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &gelu_fwd_model,
    .name = "gelu_fwd",
};

static struct starpu_codelet gelu_bwd_cl = {
    .cpu_funcs = {gelu_bwd_cpu},
    .cpu_funcs_name = {"gelu_bwd_cpu"},
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_RW},
    .model = &gelu_bwd_model,
    .name = "gelu_bwd",
};

void sw_gelu_fwd(starpu_data_handle_t x, starpu_data_handle_t y)
{
    SW_INSERT(&gelu_fwd_cl, STARPU_R, x, STARPU_W, y);
}

void sw_gelu_bwd(starpu_data_handle_t x, starpu_data_handle_t grad)
{
    SW_INSERT(&gelu_bwd_cl, STARPU_R, x, STARPU_RW, grad);
}
