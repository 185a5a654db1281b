/* The row permutation of codelets/permute.c: one thread per element of y,
 * a copy (bit for bit). */
#include "cuda_util.cuh"

__global__ void swap_rows_kernel(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t n1, int64_t n2,
                                 int64_t n3, int64_t C)
{
    SW_FOR_ROWS(r, n1 * n2 * n3)
    SW_FOR_COLS(c, C) {
        const int64_t i3 = r % n3, i1 = (r / n3) % n1, i2 = r / (n3 * n1); /* r = (i2 n1 + i1) n3 + i3 */
        y[r * ldy + c] = x[((i1 * n2 + i2) * n3 + i3) * ldx + c];
    }
}

extern "C" cudaError_t sw_cuda_swap_rows(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t n1, int64_t n2,
                                         int64_t n3, int64_t C, cudaStream_t s)
{
    const int64_t n = n1 * n2 * n3;
    if (n <= 0 || C <= 0) return cudaSuccess;
    SW_LAUNCH(swap_rows_kernel, sw_grid2d(n, C), SW_THREADS, 0, s, x, ldx, y, ldy, n1, n2, n3, C);
    return cudaGetLastError();
}
