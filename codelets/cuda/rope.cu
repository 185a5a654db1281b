/* Rotary position embedding (codelets/rope.c), in place: one thread per
 * rotated pair (column i of head h, i < d/2) over its rows, the CPU's fp32
 * formula for the angle (sw_rope_inv_freq, fastmath.h), cosf/sinf (not the
 * fast intrinsics: nvcc maps them to __cosf/__sinf only under
 * -use_fast_math, which the build does not pass). */
#include "cuda_util.cuh"
#include "fastmath.h"

__global__ void rope_kernel(float *x, int64_t ldx, int64_t R, int64_t pairs, int d, float theta, int64_t row0,
                            int batch, int64_t pos0, int inverse)
{
    const int64_t half = d / 2;
    SW_FOR_COLS(j, pairs) {
        const int64_t h = j / half, i = j % half;
        const float inv = sw_rope_inv_freq(theta, i, d);
        SW_FOR_ROWS(r, R) {
            const int64_t p = pos0 + (row0 + r) / batch;
            const float angle = (float)p * inv;
            const float cs = cosf(angle), sn = inverse ? -sinf(angle) : sinf(angle);
            float *u = x + r * ldx + h * d + i, *v = u + half;
            const float s = *u, t = *v;
            *u = s * cs - t * sn;
            *v = s * sn + t * cs;
        }
    }
}

extern "C" cudaError_t sw_cuda_rope(float *x, int64_t ldx, int64_t R, int64_t C, int d, float theta, int64_t row0,
                                    int batch, int64_t pos0, int inverse, cudaStream_t s)
{
    if (R <= 0 || C <= 0) return cudaSuccess;
    if (d <= 0 || d % 2 != 0 || C % d != 0 || batch <= 0) return cudaErrorInvalidValue;
    const int64_t pairs = C / 2;
    /* at most 128 row blocks: a thread computes its inv_freq (a double pow)
     * once for all the rows it rotates */
    dim3 grid = sw_grid2d(R, pairs);
    grid.y = grid.y > 128 ? 128 : grid.y;
    SW_LAUNCH(rope_kernel, grid, SW_THREADS, 0, s, x, ldx, R, pairs, d, theta, row0, batch, pos0,
              inverse);
    return cudaGetLastError();
}
