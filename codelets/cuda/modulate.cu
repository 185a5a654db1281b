/* adaLN modulation and the gated residual (codelets/modulate.c): the same
 * formulas; the per-sequence sums one thread per (sequence, column), over
 * the rows in the CPU's order, in double. */
#include "cuda_util.cuh"

__global__ void modulate_fwd_kernel(const float *x, int64_t ldx, const float *sh, int64_t ldsh, const float *sc,
                                    int64_t ldsc, float *y, int64_t ldy, int64_t n, int64_t C, int64_t B)
{
    SW_FOR_ROWS(r, n)
    SW_FOR_COLS(c, C) {
        const int64_t b = r % B;
        y[r * ldy + c] = x[r * ldx + c] * (1.0f + sc[b * ldsc + c]) + sh[b * ldsh + c];
    }
}

/* dx = dy * (1 + scale[b]) */
__global__ void modulate_dx_kernel(const float *sc, int64_t ldsc, const float *dy, int64_t lddy, float *dx,
                                   int64_t lddx, int64_t n, int64_t C, int64_t B)
{
    SW_FOR_ROWS(r, n)
    SW_FOR_COLS(c, C) dx[r * lddx + c] = dy[r * lddy + c] * (1.0f + sc[(r % B) * ldsc + c]);
}

/* out[b,c] = sum_{r % B == b} a[r,c] (* m[r,c] when m), rows in order, in double */
__global__ void seq_sums_kernel(const float *a, int64_t lda, const float *m, int64_t ldm, int64_t n, int64_t C,
                                float *out, int64_t ldo, int64_t B)
{
    SW_FOR_ROWS(b, B)
    SW_FOR_COLS(c, C) {
        double s = 0.0;
        for (int64_t r = b; r < n; r += B) s += m ? (double)a[r * lda + c] * m[r * ldm + c] : (double)a[r * lda + c];
        out[b * ldo + c] = (float)s;
    }
}

__global__ void gate_fwd_kernel(const float *res, int64_t ldr, const float *g, int64_t ldg, const float *br,
                                int64_t ldb, float *out, int64_t ldo, int64_t n, int64_t C, int64_t B)
{
    SW_FOR_ROWS(r, n)
    SW_FOR_COLS(c, C) out[r * ldo + c] = res[r * ldr + c] + g[(r % B) * ldg + c] * br[r * ldb + c];
}

__global__ void gate_dbranch_kernel(const float *g, int64_t ldg, const float *dy, int64_t lddy, float *db,
                                    int64_t lddb, int64_t n, int64_t C, int64_t B)
{
    SW_FOR_ROWS(r, n)
    SW_FOR_COLS(c, C) db[r * lddb + c] = g[(r % B) * ldg + c] * dy[r * lddy + c];
}

extern "C" cudaError_t sw_cuda_modulate_fwd(const float *x, int64_t ldx, const float *sh, int64_t ldsh,
                                            const float *sc, int64_t ldsc, float *y, int64_t ldy, int64_t n, int64_t C,
                                            int64_t B, cudaStream_t s)
{
    if (n <= 0 || C <= 0 || B <= 0) return cudaSuccess;
    SW_LAUNCH(modulate_fwd_kernel, sw_grid2d(n, C), SW_THREADS, 0, s, x, ldx, sh, ldsh, sc, ldsc, y, ldy, n, C, B);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_modulate_bwd(const float *x, int64_t ldx, const float *sc, int64_t ldsc,
                                            const float *dy, int64_t lddy, float *dx, int64_t lddx, float *dsh,
                                            int64_t lddsh, float *dsc, int64_t lddsc, int64_t n, int64_t C, int64_t B,
                                            cudaStream_t s)
{
    if (n <= 0 || C <= 0 || B <= 0) return cudaSuccess;
    SW_LAUNCH(modulate_dx_kernel, sw_grid2d(n, C), SW_THREADS, 0, s, sc, ldsc, dy, lddy, dx, lddx, n, C, B);
    SW_LAUNCH(seq_sums_kernel, sw_grid2d(B, C), SW_THREADS, 0, s, dy, lddy, (const float *)0, (int64_t)0, n, C, dsh,
              lddsh, B);
    SW_LAUNCH(seq_sums_kernel, sw_grid2d(B, C), SW_THREADS, 0, s, dy, lddy, x, ldx, n, C, dsc, lddsc, B);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_gate_fwd(const float *res, int64_t ldr, const float *g, int64_t ldg, const float *br,
                                        int64_t ldb, float *out, int64_t ldo, int64_t n, int64_t C, int64_t B,
                                        cudaStream_t s)
{
    if (n <= 0 || C <= 0 || B <= 0) return cudaSuccess;
    SW_LAUNCH(gate_fwd_kernel, sw_grid2d(n, C), SW_THREADS, 0, s, res, ldr, g, ldg, br, ldb, out, ldo, n, C, B);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_gate_bwd(const float *br, int64_t ldb, const float *g, int64_t ldg, const float *dy,
                                        int64_t lddy, float *db, int64_t lddb, float *dg, int64_t lddg, int64_t n,
                                        int64_t C, int64_t B, cudaStream_t s)
{
    if (n <= 0 || C <= 0 || B <= 0) return cudaSuccess;
    SW_LAUNCH(gate_dbranch_kernel, sw_grid2d(n, C), SW_THREADS, 0, s, g, ldg, dy, lddy, db, lddb, n, C, B);
    SW_LAUNCH(seq_sums_kernel, sw_grid2d(B, C), SW_THREADS, 0, s, dy, lddy, br, ldb, n, C, dg, lddg, B);
    return cudaGetLastError();
}
