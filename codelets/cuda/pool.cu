/* Pooling over a sequence (codelets/pool.c): the same sums, in double, in
 * the same order (one thread per output element). */
#include "cuda_util.cuh"

__global__ void pool_fwd_kernel(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t B, int64_t C, int64_t p0,
                                int64_t np, float alpha)
{
    SW_FOR_ROWS(b, B)
    SW_FOR_COLS(c, C)
    {
        double s = 0.0;
        for (int64_t i = p0; i < p0 + np; i++) s += (double)x[(i * B + b) * ldx + c];
        y[b * ldy + c] = (float)((double)alpha * s);
    }
}

__global__ void pool_bwd_kernel(const float *dy, int64_t ldy, float *dx, int64_t ldx, int64_t B, int64_t C, int64_t n,
                                int64_t p0, int64_t np, float alpha)
{
    SW_FOR_ROWS(r, n)
    SW_FOR_COLS(c, C)
    {
        const int64_t i = r / B, b = r % B;
        dx[r * ldx + c] = i >= p0 && i < p0 + np ? alpha * dy[b * ldy + c] : 0.0f;
    }
}

extern "C" cudaError_t sw_cuda_pool_fwd(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t B, int64_t C,
                                        int64_t p0, int64_t np, float alpha, cudaStream_t s)
{
    if (B <= 0 || C <= 0) return cudaSuccess;
    SW_LAUNCH(pool_fwd_kernel, sw_grid2d(B, C), SW_THREADS, 0, s, x, ldx, y, ldy, B, C, p0, np, alpha);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_pool_bwd(const float *dy, int64_t ldy, float *dx, int64_t ldx, int64_t B, int64_t C,
                                        int64_t n, int64_t p0, int64_t np, float alpha, cudaStream_t s)
{
    if (n <= 0 || C <= 0) return cudaSuccess;
    SW_LAUNCH(pool_bwd_kernel, sw_grid2d(n, C), SW_THREADS, 0, s, dy, ldy, dx, ldx, B, C, n, p0, np, alpha);
    return cudaGetLastError();
}
