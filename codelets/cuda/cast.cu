/* fp32 <-> bf16 casts (codelets/cast.c): the CPU's conversions (bf16.h),
 * one thread per element over strided rows. */
#include "bf16.h"
#include "cuda_util.cuh"

__global__ void cast_to_bf16_kernel(const float *s, int64_t lds, uint16_t *d, int64_t ldd, int64_t R, int64_t C)
{
    SW_FOR_ROWS(r, R) SW_FOR_COLS(c, C) d[r * ldd + c] = sw_bf16_from_f32(s[r * lds + c]);
}

__global__ void cast_from_bf16_kernel(const uint16_t *s, int64_t lds, float *d, int64_t ldd, int64_t R, int64_t C)
{
    SW_FOR_ROWS(r, R) SW_FOR_COLS(c, C) d[r * ldd + c] = sw_f32_from_bf16(s[r * lds + c]);
}

extern "C" cudaError_t sw_cuda_cast_to_bf16(const float *s, int64_t lds, uint16_t *d, int64_t ldd, int64_t R,
                                            int64_t C, cudaStream_t st)
{
    if (R <= 0 || C <= 0) return cudaSuccess;
    SW_LAUNCH(cast_to_bf16_kernel, sw_grid2d(R, C), SW_THREADS, 0, st, s, lds, d, ldd, R, C);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_cast_from_bf16(const uint16_t *s, int64_t lds, float *d, int64_t ldd, int64_t R,
                                              int64_t C, cudaStream_t st)
{
    if (R <= 0 || C <= 0) return cudaSuccess;
    SW_LAUNCH(cast_from_bf16_kernel, sw_grid2d(R, C), SW_THREADS, 0, st, s, lds, d, ldd, R, C);
    return cudaGetLastError();
}
