/* Mean-squared-error pieces (codelets/mse.c). fwd: one block; each thread
 * sums a strided part in double, thread 0 adds the parts in order (not the
 * CPU's order: the loss may differ in the last bits). */
#include "cuda_util.cuh"

__global__ void mse_fwd_kernel(const float *p, int64_t ldp, const float *t, int64_t ldt, int64_t R, int64_t C,
                               float *out, float alpha)
{
    __shared__ double part[SW_THREADS];
    double acc = 0.0;
    for (int64_t i = threadIdx.x; i < R * C; i += blockDim.x) {
        const double d = (double)p[(i / C) * ldp + i % C] - (double)t[(i / C) * ldt + i % C];
        acc += d * d;
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        double sum = 0.0;
        for (unsigned k = 0; k < blockDim.x; k++) sum += part[k];
        out[0] = (float)((double)alpha * sum);
    }
}

__global__ void mse_bwd_kernel(const float *p, int64_t ldp, const float *t, int64_t ldt, float *d, int64_t ldd,
                               int64_t R, int64_t C, float alpha)
{
    SW_FOR_ROWS(r, R)
    SW_FOR_COLS(c, C) d[r * ldd + c] = 2.0f * alpha * (p[r * ldp + c] - t[r * ldt + c]);
}

extern "C" cudaError_t sw_cuda_mse_fwd(const float *p, int64_t ldp, const float *t, int64_t ldt, int64_t R, int64_t C,
                                       float *out, float alpha, cudaStream_t s)
{
    SW_LAUNCH(mse_fwd_kernel, sw_grid1d(1, 1), SW_THREADS, 0, s, p, ldp, t, ldt, R, C, out, alpha);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_mse_bwd(const float *p, int64_t ldp, const float *t, int64_t ldt, float *d, int64_t ldd,
                                       int64_t R, int64_t C, float alpha, cudaStream_t s)
{
    if (R <= 0 || C <= 0) return cudaSuccess;
    SW_LAUNCH(mse_bwd_kernel, sw_grid2d(R, C), SW_THREADS, 0, s, p, ldp, t, ldt, d, ldd, R, C, alpha);
    return cudaGetLastError();
}
