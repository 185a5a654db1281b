/* Shared by the CUDA kernels (codelets/cuda/<op>.cu): launch and shared-memory
 * macros, grid shapes, block-wide reductions.
 *
 * Kernels are launched through SW_LAUNCH and declare dynamic shared memory
 * through SW_DYN_SHARED, and every thread of a block reaches every
 * __syncthreads(): tests/cuda_emu.h defines these (and the CUDA built-ins)
 * to run the same kernel source on the CPU, one coroutine per thread, so
 * the kernels' index arithmetic is tested on machines without a GPU. */
#ifndef STARWEAVE_CUDA_UTIL_CUH
#define STARWEAVE_CUDA_UTIL_CUH

#include <math.h>
#include <stdint.h>

#ifndef SW_CUDA_EMU
#include <cuda_runtime.h>
#define SW_LAUNCH(kernel, grid, block, shmem, stream, ...) \
    kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)
#define SW_DYN_SHARED(type, name) extern __shared__ type name[]
#endif

#include "kernels.h"

/* Threads per block of the element-wise and row-reduction kernels (a power
 * of two: the block reductions halve it). */
#define SW_THREADS 256

static inline int64_t sw_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Grid of a 2D grid-stride loop: x over columns (SW_THREADS per block), y
 * over rows; both capped, the kernels loop over the rest. */
static inline dim3 sw_grid2d(int64_t rows, int64_t cols)
{
    int64_t gx = sw_cdiv(cols, SW_THREADS), gy = rows;
    gx = gx < 1 ? 1 : (gx > 1024 ? 1024 : gx);
    gy = gy < 1 ? 1 : (gy > 65535 ? 65535 : gy);
    return dim3((unsigned)gx, (unsigned)gy, 1);
}

/* Grid of a 1D grid-stride loop over n items (or one block per row). */
static inline dim3 sw_grid1d(int64_t n, int64_t per_block)
{
    int64_t g = sw_cdiv(n, per_block);
    g = g < 1 ? 1 : (g > 65535 ? 65535 : g);
    return dim3((unsigned)g, 1, 1);
}

/* 2D grid-stride loops (rows over y, columns over x) */
#define SW_FOR_ROWS(r, R) for (int64_t r = blockIdx.y; r < (R); r += gridDim.y)
#define SW_FOR_COLS(c, C) \
    for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < (C); c += (int64_t)gridDim.x * blockDim.x)
/* one block per row (x), threads over the row's columns */
#define SW_FOR_BLOCK_ROWS(r, R) for (int64_t r = blockIdx.x; r < (R); r += gridDim.x)
#define SW_FOR_THREAD_COLS(c, C) for (int64_t c = threadIdx.x; c < (C); c += blockDim.x)
/* 1D grid-stride loop */
#define SW_FOR_ALL(i, N) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (N); i += (int64_t)gridDim.x * blockDim.x)

/* Sum over the block (blockDim.x a power of two, sh holds blockDim.x
 * values); every thread gets the result and sh is free again on return. */
template <typename T>
__device__ __forceinline__ T sw_block_sum(T v, T *sh)
{
    const unsigned t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
        if (t < w) sh[t] += sh[t + w];
        __syncthreads();
    }
    const T r = sh[0];
    __syncthreads();
    return r;
}

/* Max over the block with the CPU kernels' rule m = x > m ? x : m: NaN
 * compares false and is skipped; -inf when every value is -inf or NaN. */
__device__ __forceinline__ float sw_block_max(float v, float *sh)
{
    const unsigned t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (unsigned w = blockDim.x / 2; w > 0; w >>= 1) {
        if (t < w) sh[t] = sh[t + w] > sh[t] ? sh[t + w] : sh[t];
        __syncthreads();
    }
    const float r = sh[0];
    __syncthreads();
    return r;
}

#endif
