/* Runs the CUDA kernels of codelets/cuda/<op>.cu on the CPU, for machines
 * without a GPU (tests/test_cuda_emu): forced in front of a kernel file
 * compiled as C++ (g++ -include tests/cuda_emu.h -x c++ file.cu).
 *
 * A launch runs its blocks one after the other; the threads of a block are
 * coroutines (ucontext) on one OS thread, each running the kernel until it
 * returns or reaches __syncthreads(), where it waits until every thread of
 * the block is there. __shared__ variables become static (one block runs at
 * a time), dynamic shared memory is a buffer filled with NaN bytes (reading
 * what no thread wrote shows up). A block where some threads return while
 * others wait at a barrier is reported and aborts. Not emulated: warps,
 * shuffles, atomics, races (threads run in order, so a missing barrier may
 * go unnoticed). Kernel files launch through SW_LAUNCH and declare dynamic
 * shared memory with SW_DYN_SHARED (codelets/cuda/cuda_util.cuh); their
 * launchers may take stream-ordered scratch (cudaMallocAsync/cudaFreeAsync). */
#ifndef STARWEAVE_CUDA_EMU_H
#define STARWEAVE_CUDA_EMU_H

#define SW_CUDA_EMU 1

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
typedef void *cudaStream_t;
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2 };

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static

inline dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace sw_emu {
enum { RUNNABLE, AT_BARRIER, DONE };
inline ucontext_t sched;
inline ucontext_t *ctx;
inline int *state;
inline char *stacks;
inline size_t nalloc;
inline int current;
inline void *dyn_shared;
inline void (*body)(void *);
inline void *body_arg;
const size_t stack_bytes = 256 * 1024;

inline void trampoline()
{
    body(body_arg);
    state[current] = DONE;
} /* returns to sched through uc_link */

template <typename F>
void call(void *f)
{
    (*(F *)f)();
}

template <typename F>
void launch(dim3 grid, dim3 block, size_t shmem, F f)
{
    const size_t n = (size_t)block.x * block.y * block.z;
    if (n == 0 || n > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0) {
        fprintf(stderr, "cuda_emu: bad launch (grid %u %u %u, block %u %u %u)\n", grid.x, grid.y, grid.z, block.x,
                block.y, block.z);
        abort();
    }
    if (n > nalloc) {
        free(ctx);
        free(state);
        free(stacks);
        ctx = (ucontext_t *)calloc(n, sizeof *ctx);
        state = (int *)calloc(n, sizeof *state);
        stacks = (char *)malloc(n * stack_bytes);
        if (!ctx || !state || !stacks) {
            fprintf(stderr, "cuda_emu: out of memory\n");
            abort();
        }
        nalloc = n;
    }
    void *shared = malloc(shmem ? shmem : 1);
    if (!shared) abort();
    gridDim = grid;
    blockDim = block;
    body = call<F>;
    body_arg = &f;
    dyn_shared = shared;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                blockIdx = dim3(bx, by, bz);
                memset(shared, 0xff, shmem); /* NaN floats */
                for (size_t i = 0; i < n; i++) {
                    getcontext(&ctx[i]);
                    ctx[i].uc_stack.ss_sp = stacks + i * stack_bytes;
                    ctx[i].uc_stack.ss_size = stack_bytes;
                    ctx[i].uc_link = &sched;
                    makecontext(&ctx[i], trampoline, 0);
                    state[i] = RUNNABLE;
                }
                for (;;) {
                    for (size_t i = 0; i < n; i++) {
                        if (state[i] != RUNNABLE) continue;
                        current = (int)i;
                        threadIdx = dim3((unsigned)(i % block.x), (unsigned)(i / block.x % block.y),
                                         (unsigned)(i / block.x / block.y));
                        swapcontext(&sched, &ctx[i]);
                    }
                    size_t waiting = 0;
                    for (size_t i = 0; i < n; i++) waiting += state[i] == AT_BARRIER;
                    if (waiting == 0) break;
                    if (waiting != n) {
                        fprintf(stderr, "cuda_emu: block (%u %u %u): %zu of %zu threads wait at __syncthreads, the "
                                "others returned\n", bx, by, bz, waiting, n);
                        abort();
                    }
                    for (size_t i = 0; i < n; i++) state[i] = RUNNABLE;
                }
            }
    free(shared);
}
} // namespace sw_emu

inline void __syncthreads()
{
    sw_emu::state[sw_emu::current] = sw_emu::AT_BARRIER;
    swapcontext(&sw_emu::ctx[sw_emu::current], &sw_emu::sched);
}

inline cudaError_t cudaGetLastError() { return cudaSuccess; }

/* Stream-ordered scratch: host memory filled with NaN bytes (reading what no
 * kernel wrote shows up), freed at once (launches run to completion). */
inline cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t)
{
    *p = malloc(n ? n : 1);
    if (!*p) return cudaErrorMemoryAllocation;
    memset(*p, 0xff, n);
    return cudaSuccess;
}
inline cudaError_t cudaFreeAsync(void *p, cudaStream_t)
{
    free(p);
    return cudaSuccess;
}

#define SW_LAUNCH(kernel, grid, block, shmem, stream, ...) \
    ((void)(stream), sw_emu::launch(dim3(grid), dim3(block), (size_t)(shmem), [=]() { kernel(__VA_ARGS__); }))
#define SW_DYN_SHARED(type, name) type *name = (type *)sw_emu::dyn_shared

#endif
