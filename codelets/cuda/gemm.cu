/* GEMM's companion kernel: the bias rows that cuBLAS then adds A B to
 * (codelets/gemm.c, gemm_bias). The GEMM itself is cublasSgemm. */
#include "cuda_util.cuh"

__global__ void bias_rows_kernel(float *c, int64_t ldc, const float *bias, int64_t incb, int64_t m, int64_t n)
{
    SW_FOR_ROWS(r, m)
    SW_FOR_COLS(j, n) c[r * ldc + j] = bias[j * incb];
}

extern "C" cudaError_t sw_cuda_bias_rows(float *c, int64_t ldc, const float *bias, int64_t incb, int64_t m,
                                         int64_t n, cudaStream_t s)
{
    if (m <= 0 || n <= 0) return cudaSuccess;
    SW_LAUNCH(bias_rows_kernel, sw_grid2d(m, n), SW_THREADS, 0, s, c, ldc, bias, incb, m, n);
    return cudaGetLastError();
}
