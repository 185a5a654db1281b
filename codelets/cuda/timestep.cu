/* Sinusoidal timestep features, the formula of codelets/timestep.c (fp32
 * frequencies and arguments, exp/cos/sin in double). */
#include "cuda_util.cuh"

__global__ void timestep_kernel(const float *t, int64_t inct, float *y, int64_t ldy, int64_t B, int64_t dim,
                                double max_period)
{
    const int64_t half = dim / 2;
    SW_FOR_ROWS(b, B)
    SW_FOR_COLS(i, half) {
        const float a = (float)-log(max_period) * (float)i;
        const float f = (float)exp((double)(a / (float)half));
        const float arg = t[b * inct] * f;
        y[b * ldy + i] = (float)cos((double)arg);
        y[b * ldy + half + i] = (float)sin((double)arg);
        if (i == 0 && dim % 2) y[b * ldy + dim - 1] = 0.0f;
    }
}

extern "C" cudaError_t sw_cuda_timestep(const float *t, int64_t inct, float *y, int64_t ldy, int64_t B, int64_t dim,
                                        double max_period, cudaStream_t s)
{
    if (B <= 0 || dim <= 0) return cudaSuccess;
    if (dim < 2) return cudaErrorInvalidValue; /* refused by sw_timestep_fwd */
    SW_LAUNCH(timestep_kernel, sw_grid2d(B, dim / 2), SW_THREADS, 0, s, t, inct, y, ldy, B, dim, max_period);
    return cudaGetLastError();
}
