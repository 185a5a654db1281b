/* Row softmax kernels (codelets/softmax.c), one block per row. */
#include "cuda_util.cuh"
#include "fastmath.h"

__global__ void softmax_fwd_kernel(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t R, int64_t C)
{
    __shared__ float sh[SW_THREADS];
    SW_FOR_BLOCK_ROWS(r, R) {
        const float *xr = x + r * ldx;
        float *yr = y + r * ldy;
        float m = -INFINITY;
        SW_FOR_THREAD_COLS(c, C) m = xr[c] > m ? xr[c] : m;
        m = sw_block_max(m, sh);
        if (m == -INFINITY) m = 0.0f; /* all masked: every exp is 0 */
        float sum = 0.0f;
        SW_FOR_THREAD_COLS(c, C) {
            const float e = sw_expf(xr[c] - m);
            yr[c] = e;
            sum += e;
        }
        sum = sw_block_sum(sum, sh);
        const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
        SW_FOR_THREAD_COLS(c, C) yr[c] *= inv;
    }
}

__global__ void softmax_bwd_kernel(const float *y, int64_t ldy, const float *dy, int64_t lddy, float *dx,
                                   int64_t lddx, int64_t R, int64_t C)
{
    __shared__ float sh[SW_THREADS];
    SW_FOR_BLOCK_ROWS(r, R) {
        const float *yr = y + r * ldy, *dyr = dy + r * lddy;
        float *dxr = dx + r * lddx;
        float d = 0.0f;
        SW_FOR_THREAD_COLS(c, C) d += dyr[c] * yr[c];
        d = sw_block_sum(d, sh);
        SW_FOR_THREAD_COLS(c, C) dxr[c] = yr[c] * (dyr[c] - d);
    }
}

extern "C" cudaError_t sw_cuda_softmax_fwd(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t R, int64_t C,
                                           cudaStream_t s)
{
    if (R <= 0) return cudaSuccess;
    SW_LAUNCH(softmax_fwd_kernel, sw_grid1d(R, 1), SW_THREADS, 0, s, x, ldx, y, ldy, R, C);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_softmax_bwd(const float *y, int64_t ldy, const float *dy, int64_t lddy, float *dx,
                                           int64_t lddx, int64_t R, int64_t C, cudaStream_t s)
{
    if (R <= 0) return cudaSuccess;
    SW_LAUNCH(softmax_bwd_kernel, sw_grid1d(R, 1), SW_THREADS, 0, s, y, ldy, dy, lddy, dx, lddx, R, C);
    return cudaGetLastError();
}
