/* Pooling over a sequence (codelets/pool.c): the same sums, in double, in
 * the same order (one thread per output element); with per-sequence
 * lengths (L.on) only the valid positions, scaled by alpha / len[b]. */
#include "cuda_util.cuh"

/* global position of local position i (the last run starting at or before it) */
__device__ static inline int64_t pool_pos(const sw_cuda_pool_len &L, int64_t i)
{
    int j = 0;
    while (j + 1 < L.nruns && i >= L.i0[j + 1]) j++;
    return L.pos0[j] + i - L.i0[j];
}

__global__ void pool_fwd_kernel(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t B, int64_t C, int64_t p0,
                                int64_t np, float alpha, sw_cuda_pool_len L)
{
    SW_FOR_ROWS(b, B)
    SW_FOR_COLS(c, C)
    {
        double s = 0.0;
        if (!L.on) {
            for (int64_t i = p0; i < p0 + np; i++) s += (double)x[(i * B + b) * ldx + c];
            y[b * ldy + c] = (float)((double)alpha * s);
        } else {
            for (int64_t i = p0; i < p0 + np; i++)
                if (pool_pos(L, i) < L.len[b]) s += (double)x[(i * B + b) * ldx + c];
            y[b * ldy + c] = (float)((double)alpha / (double)L.len[b] * s);
        }
    }
}

__global__ void pool_bwd_kernel(const float *dy, int64_t ldy, float *dx, int64_t ldx, int64_t B, int64_t C, int64_t n,
                                int64_t p0, int64_t np, float alpha, sw_cuda_pool_len L)
{
    SW_FOR_ROWS(r, n)
    SW_FOR_COLS(c, C)
    {
        const int64_t i = r / B, b = r % B;
        if (!L.on)
            dx[r * ldx + c] = i >= p0 && i < p0 + np ? alpha * dy[b * ldy + c] : 0.0f;
        else
            dx[r * ldx + c] = i >= p0 && i < p0 + np && pool_pos(L, i) < L.len[b]
                                  ? (float)((double)alpha / (double)L.len[b]) * dy[b * ldy + c]
                                  : 0.0f;
    }
}

static sw_cuda_pool_len pool_len_arg(const sw_cuda_pool_len *L)
{
    sw_cuda_pool_len a;
    if (L) return *L;
    a.on = 0, a.nruns = 1, a.i0[0] = 0, a.pos0[0] = 0, a.len[0] = 1;
    return a;
}

extern "C" cudaError_t sw_cuda_pool_fwd(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t B, int64_t C,
                                        int64_t p0, int64_t np, float alpha, const sw_cuda_pool_len *L, cudaStream_t s)
{
    if (B <= 0 || C <= 0) return cudaSuccess;
    SW_LAUNCH(pool_fwd_kernel, sw_grid2d(B, C), SW_THREADS, 0, s, x, ldx, y, ldy, B, C, p0, np, alpha,
              pool_len_arg(L));
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_pool_bwd(const float *dy, int64_t ldy, float *dx, int64_t ldx, int64_t B, int64_t C,
                                        int64_t n, int64_t p0, int64_t np, float alpha, const sw_cuda_pool_len *L,
                                        cudaStream_t s)
{
    if (n <= 0 || C <= 0) return cudaSuccess;
    SW_LAUNCH(pool_bwd_kernel, sw_grid2d(n, C), SW_THREADS, 0, s, dy, ldy, dx, ldx, B, C, n, p0, np, alpha,
              pool_len_arg(L));
    return cudaGetLastError();
}
