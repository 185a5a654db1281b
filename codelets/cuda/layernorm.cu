/* LayerNorm kernels (codelets/layernorm.c): one block per row for the row
 * statistics and dx, one thread per column for the weight/bias gradient
 * sums, which accumulate over the rows in double and in row order, as on
 * the CPU. */
#include "cuda_util.cuh"

__global__ void layernorm_fwd_kernel(const float *x, int64_t ldx, const float *w, int64_t incw, const float *b,
                                     int64_t incb, float *y, int64_t ldy, float *mean, int64_t incm, float *rstd,
                                     int64_t incr, int64_t R, int64_t C, float eps)
{
    __shared__ float sh[SW_THREADS];
    const float invC = 1.0f / (float)C;
    SW_FOR_BLOCK_ROWS(r, R) {
        const float *xr = x + r * ldx;
        float *yr = y + r * ldy;
        float sum = 0.0f;
        SW_FOR_THREAD_COLS(c, C) sum += xr[c];
        const float m = sw_block_sum(sum, sh) * invC;
        /* two passes: the variance of the centred values does not cancel */
        float ss = 0.0f;
        SW_FOR_THREAD_COLS(c, C) ss += (xr[c] - m) * (xr[c] - m);
        const float s = 1.0f / sqrtf(sw_block_sum(ss, sh) * invC + eps);
        SW_FOR_THREAD_COLS(c, C) yr[c] = (xr[c] - m) * s * w[c * incw] + b[c * incb];
        if (threadIdx.x == 0) {
            mean[r * incm] = m;
            rstd[r * incr] = s;
        }
    }
}

/* g = dy * w; dx = s * (g - mean(g) - xhat * mean(g * xhat)) */
__global__ void layernorm_bwd_dx_kernel(const float *dy, int64_t lddy, const float *x, int64_t ldx, const float *w,
                                        int64_t incw, const float *mean, int64_t incm, const float *rstd,
                                        int64_t incr, float *dx, int64_t lddx, int64_t R, int64_t C, int accumulate)
{
    __shared__ float sh[SW_THREADS];
    const float invC = 1.0f / (float)C;
    SW_FOR_BLOCK_ROWS(r, R) {
        const float *dyr = dy + r * lddy, *xr = x + r * ldx;
        float *dxr = dx + r * lddx;
        const float m = mean[r * incm], s = rstd[r * incr];
        float t1 = 0.0f, t2 = 0.0f;
        SW_FOR_THREAD_COLS(c, C) {
            float g = dyr[c] * w[c * incw];
            t1 += g;
            t2 += g * ((xr[c] - m) * s);
        }
        const float mg = sw_block_sum(t1, sh) * invC, mgx = sw_block_sum(t2, sh) * invC;
        SW_FOR_THREAD_COLS(c, C) {
            float xh = (xr[c] - m) * s;
            float v = s * (dyr[c] * w[c * incw] - mg - xh * mgx);
            dxr[c] = accumulate ? dxr[c] + v : v;
        }
    }
}

__global__ void layernorm_bwd_dw_kernel(const float *dy, int64_t lddy, const float *x, int64_t ldx,
                                        const float *mean, int64_t incm, const float *rstd, int64_t incr, float *dw,
                                        int64_t incdw, float *db, int64_t incdb, int64_t R, int64_t C)
{
    SW_FOR_ALL(c, C) {
        double aw = 0.0, ab = 0.0;
        for (int64_t r = 0; r < R; r++) {
            const float d = dy[r * lddy + c];
            const float xh = (x[r * ldx + c] - mean[r * incm]) * rstd[r * incr];
            aw += (double)(d * xh);
            ab += (double)d;
        }
        dw[c * incdw] = (float)aw;
        db[c * incdb] = (float)ab;
    }
}

extern "C" cudaError_t sw_cuda_layernorm_fwd(const float *x, int64_t ldx, const float *w, int64_t incw,
                                             const float *b, int64_t incb, float *y, int64_t ldy, float *mean,
                                             int64_t incm, float *rstd, int64_t incr, int64_t R, int64_t C, float eps,
                                             cudaStream_t s)
{
    if (R <= 0) return cudaSuccess;
    SW_LAUNCH(layernorm_fwd_kernel, sw_grid1d(R, 1), SW_THREADS, 0, s, x, ldx, w, incw, b, incb, y, ldy, mean, incm,
              rstd, incr, R, C, eps);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_layernorm_bwd(const float *dy, int64_t lddy, const float *x, int64_t ldx,
                                             const float *w, int64_t incw, const float *mean, int64_t incm,
                                             const float *rstd, int64_t incr, float *dx, int64_t lddx, float *dw,
                                             int64_t incdw, float *db, int64_t incdb, int64_t R, int64_t C,
                                             int accumulate, cudaStream_t s)
{
    if (C <= 0) return cudaSuccess;
    if (R > 0)
        SW_LAUNCH(layernorm_bwd_dx_kernel, sw_grid1d(R, 1), SW_THREADS, 0, s, dy, lddy, x, ldx, w, incw, mean, incm,
                  rstd, incr, dx, lddx, R, C, accumulate);
    SW_LAUNCH(layernorm_bwd_dw_kernel, sw_grid1d(C, SW_THREADS), SW_THREADS, 0, s, dy, lddy, x, ldx, mean, incm,
              rstd, incr, dw, incdw, db, incdb, R, C);
    return cudaGetLastError();
}
