/* SwiGLU kernels, the formulas of codelets/swiglu.c. */
#include "cuda_util.cuh"
#include "fastmath.h"

__global__ void swiglu_fwd_kernel(const float *g, int64_t ldg, const float *u, int64_t ldu, float *y, int64_t ldy,
                                  int64_t R, int64_t C)
{
    SW_FOR_ROWS(r, R)
    SW_FOR_COLS(c, C) {
        const float a = g[r * ldg + c];
        y[r * ldy + c] = a / (1.0f + sw_expf(-a)) * u[r * ldu + c];
    }
}

__global__ void swiglu_bwd_kernel(const float *g, int64_t ldg, const float *u, int64_t ldu, const float *dy,
                                  int64_t lddy, float *dg, int64_t lddg, float *du, int64_t lddu, int64_t R, int64_t C)
{
    SW_FOR_ROWS(r, R)
    SW_FOR_COLS(c, C) {
        const float a = g[r * ldg + c], d = dy[r * lddy + c];
        const float e = sw_expf(-a);
        const float sg = 1.0f / (1.0f + e);
        const float oms = e < 1.0f ? e * sg : 1.0f - sg;
        dg[r * lddg + c] = d * u[r * ldu + c] * (sg * (1.0f + a * oms));
        du[r * lddu + c] = d * (a * sg);
    }
}

extern "C" cudaError_t sw_cuda_swiglu_fwd(const float *g, int64_t ldg, const float *u, int64_t ldu, float *y,
                                          int64_t ldy, int64_t R, int64_t C, cudaStream_t s)
{
    if (R <= 0 || C <= 0) return cudaSuccess;
    SW_LAUNCH(swiglu_fwd_kernel, sw_grid2d(R, C), SW_THREADS, 0, s, g, ldg, u, ldu, y, ldy, R, C);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_swiglu_bwd(const float *g, int64_t ldg, const float *u, int64_t ldu, const float *dy,
                                          int64_t lddy, float *dg, int64_t lddg, float *du, int64_t lddu, int64_t R,
                                          int64_t C, cudaStream_t s)
{
    if (R <= 0 || C <= 0) return cudaSuccess;
    SW_LAUNCH(swiglu_bwd_kernel, sw_grid2d(R, C), SW_THREADS, 0, s, g, ldg, u, ldu, dy, lddy, dg, lddg, du, lddu, R,
              C);
    return cudaGetLastError();
}
