/* Element-wise product (codelets/mul.c). */
#include "cuda_util.cuh"

__global__ void mul_kernel(const float *x, int64_t ldx, const float *y, int64_t ldy, float *z, int64_t ldz, int64_t R,
                           int64_t C)
{
    SW_FOR_ROWS(r, R)
    SW_FOR_COLS(c, C) z[r * ldz + c] = x[r * ldx + c] * y[r * ldy + c];
}

extern "C" cudaError_t sw_cuda_mul(const float *x, int64_t ldx, const float *y, int64_t ldy, float *z, int64_t ldz,
                                   int64_t R, int64_t C, cudaStream_t s)
{
    if (R <= 0 || C <= 0) return cudaSuccess;
    SW_LAUNCH(mul_kernel, sw_grid2d(R, C), SW_THREADS, 0, s, x, ldx, y, ldy, z, ldz, R, C);
    return cudaGetLastError();
}
