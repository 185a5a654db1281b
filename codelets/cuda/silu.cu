/* SiLU kernels, the formulas of codelets/silu.c. */
#include "cuda_util.cuh"
#include "fastmath.h"

__global__ void silu_fwd_kernel(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t R, int64_t C)
{
    SW_FOR_ROWS(r, R)
    SW_FOR_COLS(c, C) {
        const float a = x[r * ldx + c];
        y[r * ldy + c] = a / (1.0f + sw_expf(-a));
    }
}

__global__ void silu_bwd_kernel(const float *x, int64_t ldx, float *g, int64_t ldg, int64_t R, int64_t C)
{
    SW_FOR_ROWS(r, R)
    SW_FOR_COLS(c, C) {
        const float a = x[r * ldx + c], e = sw_expf(-a), sg = 1.0f / (1.0f + e);
        const float oms = e < 1.0f ? e * sg : 1.0f - sg;
        g[r * ldg + c] *= sg * (1.0f + a * oms);
    }
}

extern "C" cudaError_t sw_cuda_silu_fwd(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t R, int64_t C,
                                        cudaStream_t s)
{
    if (R <= 0 || C <= 0) return cudaSuccess;
    SW_LAUNCH(silu_fwd_kernel, sw_grid2d(R, C), SW_THREADS, 0, s, x, ldx, y, ldy, R, C);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_silu_bwd(const float *x, int64_t ldx, float *g, int64_t ldg, int64_t R, int64_t C,
                                        cudaStream_t s)
{
    if (R <= 0 || C <= 0) return cudaSuccess;
    SW_LAUNCH(silu_bwd_kernel, sw_grid2d(R, C), SW_THREADS, 0, s, x, ldx, g, ldg, R, C);
    return cudaGetLastError();
}
