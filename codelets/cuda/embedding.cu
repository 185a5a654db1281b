/* Token + position embedding kernels (codelets/embedding.c). The backward
 * scatter-add runs one thread per column over the rows in order: no
 * atomics, the CPU's order of additions, bit-identical gradients. */
#include "cuda_util.cuh"

__global__ void embedding_fwd_kernel(const int32_t *tok, int64_t ts, const float *wte, int64_t nv, int64_t ldte,
                                     const float *wpe, int64_t ldpe, float *x, int64_t n, int64_t c, int64_t ldx,
                                     sw_cuda_emb e)
{
    SW_FOR_ROWS(r, n) {
        const int64_t pos = e.pos0 + (e.row0 + r) / e.batch;
        const int64_t id = (int64_t)tok[r * ts] - e.vocab0;
        const int in_range = id >= 0 && id < nv;
        SW_FOR_COLS(j, c) {
            float v = 0.0f;
            if (in_range && e.with_wpe) v = wte[id * ldte + j] + wpe[pos * ldpe + j];
            else if (in_range) v = wte[id * ldte + j];
            else if (e.with_wpe) v = wpe[pos * ldpe + j];
            x[r * ldx + j] = v;
        }
    }
}

__global__ void embedding_bwd_kernel(const int32_t *tok, int64_t ts, const float *dx, int64_t n, int64_t c,
                                     int64_t ldx, float *dwte, int64_t nv, int64_t ldte, float *dwpe, int64_t np,
                                     int64_t cp, int64_t ldpe, sw_cuda_emb e)
{
    const int64_t width = c > cp ? c : cp;
    SW_FOR_ALL(j, width) {
        if (e.zero_wpe && j < cp)
            for (int64_t p = 0; p < np; p++) dwpe[p * ldpe + j] = 0.0f;
        if (e.zero_wte && j < c)
            for (int64_t v = 0; v < nv; v++) dwte[v * ldte + j] = 0.0f;
        if (j < c) {
            for (int64_t r = 0; r < n; r++) {
                const int64_t pos = e.pos0 + (e.row0 + r) / e.batch;
                const int64_t id = (int64_t)tok[r * ts] - e.vocab0;
                const float g = dx[r * ldx + j];
                if (e.has_wpe) dwpe[pos * ldpe + j] += g;
                if (id >= 0 && id < nv) dwte[id * ldte + j] += g;
            }
        }
    }
}

extern "C" cudaError_t sw_cuda_embedding_fwd(const int32_t *tok, int64_t ts, const float *wte, int64_t nv,
                                             int64_t ldte, const float *wpe, int64_t ldpe, float *x, int64_t n,
                                             int64_t c, int64_t ldx, sw_cuda_emb e, cudaStream_t s)
{
    if (n <= 0 || c <= 0) return cudaSuccess;
    SW_LAUNCH(embedding_fwd_kernel, sw_grid2d(n, c), SW_THREADS, 0, s, tok, ts, wte, nv, ldte, wpe, ldpe, x, n, c,
              ldx, e);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_embedding_bwd(const int32_t *tok, int64_t ts, const float *dx, int64_t n, int64_t c,
                                             int64_t ldx, float *dwte, int64_t nv, int64_t ldte, float *dwpe,
                                             int64_t np, int64_t cp, int64_t ldpe, sw_cuda_emb e, cudaStream_t s)
{
    const int64_t width = c > cp ? c : cp;
    if (width <= 0) return cudaSuccess;
    SW_LAUNCH(embedding_bwd_kernel, sw_grid1d(width, SW_THREADS), SW_THREADS, 0, s, tok, ts, dx, n, c, ldx, dwte, nv,
              ldte, dwpe, np, cp, ldpe, e);
    return cudaGetLastError();
}
