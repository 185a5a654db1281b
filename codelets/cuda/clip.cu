/* Gradient-norm clipping (codelets/clip.c). sumsq: one block; each thread
 * sums a strided part in double, thread 0 adds the parts in order (not the
 * CPU's order: the norm may differ in the last bits). */
#include "cuda_util.cuh"

__global__ void sumsq_kernel(const float *x, int64_t ld, int64_t R, int64_t C, float *out, double alpha,
                             int accumulate)
{
    __shared__ double part[SW_THREADS];
    double acc = 0.0;
    for (int64_t i = threadIdx.x; i < R * C; i += blockDim.x) {
        const double v = (double)x[(i / C) * ld + i % C];
        acc += v * v;
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        double sum = 0.0;
        for (unsigned t = 0; t < blockDim.x; t++) sum += part[t];
        sum *= alpha;
        out[0] = (float)(accumulate ? (double)out[0] + sum : sum);
    }
}

__global__ void clip_kernel(float *x, int64_t ld, int64_t R, int64_t C, const float *n2, float max_norm)
{
    float s = max_norm / (sqrtf(n2[0]) + 1e-6f);
    if (s >= 1.0f) return;
    SW_FOR_ROWS(r, R)
    SW_FOR_COLS(c, C) x[r * ld + c] *= s;
}

extern "C" cudaError_t sw_cuda_sumsq(const float *x, int64_t ld, int64_t R, int64_t C, float *out, double alpha,
                                     int accumulate, cudaStream_t s)
{
    SW_LAUNCH(sumsq_kernel, sw_grid1d(1, 1), SW_THREADS, 0, s, x, ld, R, C, out, alpha, accumulate);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_clip(float *x, int64_t ld, int64_t R, int64_t C, const float *n2, float max_norm,
                                    cudaStream_t s)
{
    if (R <= 0 || C <= 0) return cudaSuccess;
    SW_LAUNCH(clip_kernel, sw_grid2d(R, C), SW_THREADS, 0, s, x, ld, R, C, n2, max_norm);
    return cudaGetLastError();
}
