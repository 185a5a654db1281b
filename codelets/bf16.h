/* bfloat16 <-> fp32, shared by the CPU codelets, the CUDA kernels and the
 * tests. bf16 is the upper half of an fp32: 8 exponent bits, 7 mantissa
 * bits. fp32 -> bf16 rounds to nearest, ties to even (as PyTorch and the
 * CUDA intrinsics do); NaN stays a (quiet) NaN; values past the largest
 * bf16 round to infinity. bf16 -> fp32 is exact. */
#ifndef STARWEAVE_BF16_H
#define STARWEAVE_BF16_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define SW_BF16_FN static __host__ __device__ __forceinline__
#else
#define SW_BF16_FN static inline
#endif

SW_BF16_FN uint16_t sw_bf16_from_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* NaN: keep sign, set quiet bit */
    u += 0x7fffu + ((u >> 16) & 1u);                                             /* ties to even */
    return (uint16_t)(u >> 16);
}

SW_BF16_FN float sw_f32_from_bf16(uint16_t b)
{
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#endif
