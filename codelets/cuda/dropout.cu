/* Dropout kernel (codelets/dropout.c): the mask bit of each element comes
 * from philox.h with the CPU's global index, so CPU and GPU masks are
 * bit-identical. */
#include "cuda_util.cuh"
#include "philox.h"

__global__ void dropout_kernel(const float *in, int64_t ldi, float *out, int64_t ldo, int64_t R, int64_t C,
                               sw_cuda_rng k, float p, float scale)
{
    SW_FOR_ROWS(r, R) {
        int64_t g = k.row0 + r;
        if (k.batch_global > 0) g = g / k.batch_local * k.batch_global + k.batch0 + g % k.batch_local;
        const uint64_t base = (uint64_t)(g * k.ld_global + k.col0);
        SW_FOR_COLS(c, C) {
            const int keep = sw_dropout_keep(k.seed, k.step, k.layer, k.op, base + (uint64_t)c, p);
            out[r * ldo + c] = keep ? in[r * ldi + c] * scale : 0.0f;
        }
    }
}

extern "C" cudaError_t sw_cuda_dropout(const float *in, int64_t ldi, float *out, int64_t ldo, int64_t R, int64_t C,
                                       sw_cuda_rng key, float p, float scale, cudaStream_t s)
{
    if (R <= 0 || C <= 0) return cudaSuccess;
    SW_LAUNCH(dropout_kernel, sw_grid2d(R, C), SW_THREADS, 0, s, in, ldi, out, ldo, R, C, key, p, scale);
    return cudaGetLastError();
}
