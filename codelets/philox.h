/* Philox4x32-10 counter-based RNG (Salmon et al., SC'11). Header-only so the
 * CPU kernels, the CUDA kernels and the test references draw identical bits. */
#ifndef STARWEAVE_PHILOX_H
#define STARWEAVE_PHILOX_H

#include <stdint.h>

#ifndef SW_HD /* also in fastmath.h */
#ifdef __CUDACC__
#define SW_HD __host__ __device__ __forceinline__
#else
#define SW_HD static inline
#endif
#endif

SW_HD uint32_t sw_mulhilo32(uint32_t a, uint32_t b, uint32_t *hi)
{
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

/* First 32-bit word of Philox4x32-10(counter = {idx lo, idx hi, step, layer<<16|op}, key = seed). */
SW_HD uint32_t sw_philox(uint64_t seed, uint32_t step, uint32_t layer, uint32_t op, uint64_t idx)
{
    uint32_t c0 = (uint32_t)idx, c1 = (uint32_t)(idx >> 32), c2 = step, c3 = (layer << 16) | (op & 0xffffu);
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = sw_mulhilo32(0xD2511F53u, c0, &hi0);
        uint32_t lo1 = sw_mulhilo32(0xCD9E8D57u, c2, &hi1);
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return c0;
}

/* Uniform in [0, 1) with 24 random bits (exact in fp32). */
SW_HD float sw_philox_uniform(uint64_t seed, uint32_t step, uint32_t layer, uint32_t op, uint64_t idx)
{
    return (float)(sw_philox(seed, step, layer, op, idx) >> 8) * (1.0f / 16777216.0f);
}

/* Dropout keep decision: kept iff u >= p. */
SW_HD int sw_dropout_keep(uint64_t seed, uint32_t step, uint32_t layer, uint32_t op, uint64_t idx, float p)
{
    return sw_philox_uniform(seed, step, layer, op, idx) >= p;
}

#endif
