/* GeLU (tanh approximation) kernels, the formulas of codelets/gelu.c. */
#include "cuda_util.cuh"
#include "fastmath.h"

#define GELU_K0 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_K1 0.044715f

__global__ void gelu_fwd_kernel(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t R, int64_t C)
{
    SW_FOR_ROWS(r, R)
    SW_FOR_COLS(c, C) {
        float v = x[r * ldx + c];
        float u = GELU_K0 * (v + GELU_K1 * v * v * v);
        y[r * ldy + c] = v / (1.0f + sw_expf(-2.0f * u));
    }
}

__global__ void gelu_bwd_kernel(const float *x, int64_t ldx, float *g, int64_t ldg, int64_t R, int64_t C)
{
    SW_FOR_ROWS(r, R)
    SW_FOR_COLS(c, C) {
        float v = x[r * ldx + c];
        v = v < -20.0f ? -20.0f : v;
        v = v > 20.0f ? 20.0f : v;
        float u = GELU_K0 * (v + GELU_K1 * v * v * v);
        float du = GELU_K0 * (1.0f + 3.0f * GELU_K1 * v * v);
        float e = sw_expf(-2.0f * u);
        float sg = 1.0f / (1.0f + e);
        float oms = e < 1.0f ? e * sg : 1.0f - sg;
        g[r * ldg + c] *= sg + 2.0f * v * sg * oms * du;
    }
}

extern "C" cudaError_t sw_cuda_gelu_fwd(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t R, int64_t C,
                                        cudaStream_t s)
{
    if (R <= 0 || C <= 0) return cudaSuccess;
    SW_LAUNCH(gelu_fwd_kernel, sw_grid2d(R, C), SW_THREADS, 0, s, x, ldx, y, ldy, R, C);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_gelu_bwd(const float *x, int64_t ldx, float *g, int64_t ldg, int64_t R, int64_t C,
                                        cudaStream_t s)
{
    if (R <= 0 || C <= 0) return cudaSuccess;
    SW_LAUNCH(gelu_bwd_kernel, sw_grid2d(R, C), SW_THREADS, 0, s, x, ldx, g, ldg, R, C);
    return cudaGetLastError();
}
