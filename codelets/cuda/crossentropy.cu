/* Cross-entropy pieces (codelets/crossentropy.c): row reductions one block
 * per row, per-row scalars one thread per row. */
#include "cuda_util.cuh"
#include "fastmath.h"

__global__ void ce_max_kernel(const float *x, int64_t n, int64_t ld, int64_t nv, float *mx, int64_t ms)
{
    __shared__ float sh[SW_THREADS];
    SW_FOR_BLOCK_ROWS(r, n) {
        const float *row = x + r * ld;
        float m = -INFINITY;
        SW_FOR_THREAD_COLS(c, nv) m = row[c] > m ? row[c] : m;
        m = sw_block_max(m, sh);
        if (threadIdx.x == 0) mx[r * ms] = m;
    }
}

__global__ void ce_target_kernel(const float *x, int64_t n, int64_t vb, int64_t ld, const int32_t *t, int64_t tstr,
                                 float *tgt, int64_t gs, int64_t vocab0)
{
    SW_FOR_ALL(r, n) {
        const int64_t c = (int64_t)t[r * tstr] - vocab0;
        tgt[r * gs] = (c >= 0 && c < vb) ? x[r * ld + c] : 0.0f;
    }
}

/* sum_c exp(row[c] - m): fp32 terms, double sums (the CPU adds fp32 lane
 * sums of 1024-column chunks in double) */
__global__ void ce_sumexp_kernel(const float *x, int64_t n, int64_t ld, int64_t nv, const float *mx, int64_t ms,
                                 float *se, int64_t ss)
{
    __shared__ double sh[SW_THREADS];
    SW_FOR_BLOCK_ROWS(r, n) {
        const float *row = x + r * ld;
        const float m = mx[r * ms];
        const int live = nv > 0 && m != -INFINITY;
        double acc = 0.0;
        if (live) SW_FOR_THREAD_COLS(c, nv) acc += (double)sw_expf(row[c] - m);
        acc = sw_block_sum(acc, sh);
        if (threadIdx.x == 0) se[r * ss] = live ? (float)acc : 0.0f;
    }
}

__global__ void ce_loss_kernel(const float *mx, int64_t ms, const float *tgt, int64_t ts, const float *se, int64_t ss,
                               float *loss, int64_t ls, int64_t n)
{
    SW_FOR_ALL(r, n) loss[r * ls] = logf(se[r * ss]) + mx[r * ms] - tgt[r * ts];
}

/* row[c] = scale / se * exp(row[c] - m) (c < nv), 0 on padding; minus
 * scale at the target column; with rw (weighted), each row's scale is
 * rw / count and a row of weight 0 is 0 */
__global__ void ce_bwd_kernel(float *x, int64_t n, int64_t vb, int64_t ld, int64_t nv, const float *mx, int64_t ms,
                              const float *se, int64_t ss, const int32_t *t, int64_t tstr, const float *rw,
                              int64_t rs, const float *cnt, int64_t vocab0, float scale)
{
    SW_FOR_ROWS(r, n) {
        float *row = x + r * ld;
        const int dead = rw && rw[r * rs] == 0.0f;
        const float sc = rw ? (dead ? 0.0f : rw[r * rs] / cnt[0]) : scale;
        const float m = mx[r * ms], k = dead ? 0.0f : sc / se[r * ss];
        const int64_t tc = (int64_t)t[r * tstr] - vocab0;
        SW_FOR_COLS(c, vb) {
            float v = c < nv && !dead ? k * sw_expf(row[c] - m) : 0.0f;
            if (c == tc && tc < nv && !dead) v -= sc;
            row[c] = v;
        }
    }
}

/* rw = 0 where the target is the ignore index, else the weight (1 without weights) */
__global__ void ce_weights_kernel(const int32_t *t, int64_t ts, int64_t n, const float *w, int64_t ws, int32_t ignore,
                                  float *rw, int64_t rs)
{
    SW_FOR_ALL(r, n) rw[r * rs] = t[r * ts] == ignore ? 0.0f : w ? w[r * ws] : 1.0f;
}

/* out = sum rw loss / count: one thread, the rows in the CPU's order, in double */
__global__ void ce_mean_kernel(const float *loss, int64_t ls, const float *rw, int64_t rs, int64_t n, const float *cnt,
                               float *out)
{
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    double s = 0.0;
    for (int64_t r = 0; r < n; r++)
        if (rw[r * rs] != 0.0f) s += (double)rw[r * rs] * loss[r * ls];
    out[0] = (float)(s / cnt[0]);
}

extern "C" cudaError_t sw_cuda_ce_max(const float *x, int64_t n, int64_t ld, int64_t nv, float *mx, int64_t ms,
                                      cudaStream_t s)
{
    if (n <= 0) return cudaSuccess;
    SW_LAUNCH(ce_max_kernel, sw_grid1d(n, 1), SW_THREADS, 0, s, x, n, ld, nv, mx, ms);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_ce_target(const float *x, int64_t n, int64_t vb, int64_t ld, const int32_t *t,
                                         int64_t tstr, float *tgt, int64_t gs, int64_t vocab0, cudaStream_t s)
{
    if (n <= 0) return cudaSuccess;
    SW_LAUNCH(ce_target_kernel, sw_grid1d(n, SW_THREADS), SW_THREADS, 0, s, x, n, vb, ld, t, tstr, tgt, gs, vocab0);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_ce_sumexp(const float *x, int64_t n, int64_t ld, int64_t nv, const float *mx,
                                         int64_t ms, float *se, int64_t ss, cudaStream_t s)
{
    if (n <= 0) return cudaSuccess;
    SW_LAUNCH(ce_sumexp_kernel, sw_grid1d(n, 1), SW_THREADS, 0, s, x, n, ld, nv, mx, ms, se, ss);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_ce_loss(const float *mx, int64_t ms, const float *tgt, int64_t ts, const float *se,
                                       int64_t ss, float *loss, int64_t ls, int64_t n, cudaStream_t s)
{
    if (n <= 0) return cudaSuccess;
    SW_LAUNCH(ce_loss_kernel, sw_grid1d(n, SW_THREADS), SW_THREADS, 0, s, mx, ms, tgt, ts, se, ss, loss, ls, n);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_ce_bwd(float *x, int64_t n, int64_t vb, int64_t ld, int64_t nv, const float *mx,
                                      int64_t ms, const float *se, int64_t ss, const int32_t *t, int64_t tstr,
                                      const float *rw, int64_t rs, const float *cnt, int64_t vocab0, float scale,
                                      cudaStream_t s)
{
    if (n <= 0 || vb <= 0) return cudaSuccess;
    SW_LAUNCH(ce_bwd_kernel, sw_grid2d(n, vb), SW_THREADS, 0, s, x, n, vb, ld, nv, mx, ms, se, ss, t, tstr, rw, rs, cnt,
              vocab0, scale);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_ce_weights(const int32_t *t, int64_t ts, int64_t n, const float *w, int64_t ws,
                                          int32_t ignore, float *rw, int64_t rs, cudaStream_t s)
{
    if (n <= 0) return cudaSuccess;
    SW_LAUNCH(ce_weights_kernel, sw_grid1d(n, SW_THREADS), SW_THREADS, 0, s, t, ts, n, w, ws, ignore, rw, rs);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_ce_mean(const float *loss, int64_t ls, const float *rw, int64_t rs, int64_t n,
                                       const float *cnt, float *out, cudaStream_t s)
{
    SW_LAUNCH(ce_mean_kernel, dim3(1), 1, 0, s, loss, ls, rw, rs, n, cnt, out);
    return cudaGetLastError();
}
