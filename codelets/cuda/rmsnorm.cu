/* RMSNorm kernels (codelets/rmsnorm.c): one block per row for rstd and
 * dx, one thread per column for the weight gradient (double, row order). */
#include "cuda_util.cuh"

__global__ void rmsnorm_fwd_kernel(const float *x, int64_t ldx, const float *w, int64_t incw, float *y, int64_t ldy,
                                   float *rstd, int64_t incr, int64_t R, int64_t C, float eps)
{
    __shared__ float sh[SW_THREADS];
    const float invC = 1.0f / (float)C;
    SW_FOR_BLOCK_ROWS(r, R) {
        const float *xr = x + r * ldx;
        float *yr = y + r * ldy;
        float ss = 0.0f;
        SW_FOR_THREAD_COLS(c, C) ss += xr[c] * xr[c];
        const float s = 1.0f / sqrtf(sw_block_sum(ss, sh) * invC + eps);
        SW_FOR_THREAD_COLS(c, C) yr[c] = w[c * incw] * (xr[c] * s);
        if (threadIdx.x == 0) rstd[r * incr] = s;
    }
}

/* g = dy * w; dx = s * g - x * s^3 * mean(g * x) */
__global__ void rmsnorm_bwd_dx_kernel(const float *dy, int64_t lddy, const float *x, int64_t ldx, const float *w,
                                      int64_t incw, const float *rstd, int64_t incr, float *dx, int64_t lddx,
                                      int64_t R, int64_t C, int accumulate)
{
    __shared__ float sh[SW_THREADS];
    const float invC = 1.0f / (float)C;
    SW_FOR_BLOCK_ROWS(r, R) {
        const float *dyr = dy + r * lddy, *xr = x + r * ldx;
        float *dxr = dx + r * lddx;
        const float s = rstd[r * incr];
        float t = 0.0f;
        SW_FOR_THREAD_COLS(c, C) t += dyr[c] * w[c * incw] * xr[c];
        const float k = s * s * s * sw_block_sum(t, sh) * invC;
        SW_FOR_THREAD_COLS(c, C) {
            float v = s * dyr[c] * w[c * incw] - k * xr[c];
            dxr[c] = accumulate ? dxr[c] + v : v;
        }
    }
}

__global__ void rmsnorm_bwd_dw_kernel(const float *dy, int64_t lddy, const float *x, int64_t ldx, const float *rstd,
                                      int64_t incr, float *dw, int64_t incdw, int64_t R, int64_t C)
{
    SW_FOR_ALL(c, C) {
        double a = 0.0;
        for (int64_t r = 0; r < R; r++) a += (double)(dy[r * lddy + c] * x[r * ldx + c] * rstd[r * incr]);
        dw[c * incdw] = (float)a;
    }
}

extern "C" cudaError_t sw_cuda_rmsnorm_fwd(const float *x, int64_t ldx, const float *w, int64_t incw, float *y,
                                           int64_t ldy, float *rstd, int64_t incr, int64_t R, int64_t C, float eps,
                                           cudaStream_t s)
{
    if (R <= 0) return cudaSuccess;
    SW_LAUNCH(rmsnorm_fwd_kernel, sw_grid1d(R, 1), SW_THREADS, 0, s, x, ldx, w, incw, y, ldy, rstd, incr, R, C, eps);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_rmsnorm_bwd(const float *dy, int64_t lddy, const float *x, int64_t ldx,
                                           const float *w, int64_t incw, const float *rstd, int64_t incr, float *dx,
                                           int64_t lddx, float *dw, int64_t incdw, int64_t R, int64_t C,
                                           int accumulate, cudaStream_t s)
{
    if (C <= 0) return cudaSuccess;
    if (R > 0)
        SW_LAUNCH(rmsnorm_bwd_dx_kernel, sw_grid1d(R, 1), SW_THREADS, 0, s, dy, lddy, x, ldx, w, incw, rstd, incr, dx,
                  lddx, R, C, accumulate);
    SW_LAUNCH(rmsnorm_bwd_dw_kernel, sw_grid1d(C, SW_THREADS), SW_THREADS, 0, s, dy, lddy, x, ldx, rstd, incr, dw,
              incdw, R, C);
    return cudaGetLastError();
}
