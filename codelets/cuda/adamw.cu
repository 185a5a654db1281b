/* AdamW kernel (codelets/adamw.c); the bias-correction scalars are formed
 * on the host exactly as the CPU function forms them. */
#include "cuda_util.cuh"

__global__ void adamw_kernel(float *p, int64_t ldp, const float *g, int64_t ldg, float *m, int64_t ldm, float *v,
                             int64_t ldv, int64_t R, int64_t C, sw_cuda_adamw_scalars a)
{
    SW_FOR_ROWS(r, R)
    SW_FOR_COLS(c, C) {
        const float gc = g[r * ldg + c];
        const float mc = a.b1 * m[r * ldm + c] + a.c1 * gc;
        const float vc = a.b2 * v[r * ldv + c] + a.c2 * gc * gc;
        m[r * ldm + c] = mc;
        v[r * ldv + c] = vc;
        const float denom = sqrtf(vc) / a.bc2_sqrt + a.eps;
        p[r * ldp + c] = p[r * ldp + c] * a.decay - a.step_size * (mc / denom);
    }
}

extern "C" cudaError_t sw_cuda_adamw(float *p, int64_t ldp, const float *g, int64_t ldg, float *m, int64_t ldm,
                                     float *v, int64_t ldv, int64_t R, int64_t C, sw_cuda_adamw_scalars a,
                                     cudaStream_t s)
{
    if (R <= 0 || C <= 0) return cudaSuccess;
    SW_LAUNCH(adamw_kernel, sw_grid2d(R, C), SW_THREADS, 0, s, p, ldp, g, ldg, m, ldm, v, ldv, R, C, a);
    return cudaGetLastError();
}
