/* Scalar math shared by the CPU kernels and the CUDA kernels, so that both
 * evaluate the same formula (header-only, like philox.h). */
#ifndef STARWEAVE_FASTMATH_H
#define STARWEAVE_FASTMATH_H

#include <math.h>
#include <stdint.h>

#ifndef SW_HD
#ifdef __CUDACC__
#define SW_HD __host__ __device__ __forceinline__
#else
#define SW_HD static inline
#endif
#endif

/* exp(x) within ~2 ulp on [-86.6, 88.72]; 0 below (true value < 2.4e-38),
 * +inf above, NaN for NaN. Branch-free so that GCC vectorises callers. */
SW_HD float sw_expf(float x)
{
    const float lo = -86.6f, hi = 88.72f;
    float xc = x < lo ? lo : (x > hi ? hi : x);
    /* n = round(xc / ln 2) by the 1.5 * 2^23 trick: the low mantissa bits of t are n */
    union { float f; uint32_t u; } t = {xc * 1.44269504088896341f + 12582912.0f};
    float n = t.f - 12582912.0f;
    float r = xc - n * 0.693359375f - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* 2^n as 2^(n-1) * 2 so that n = 128 (x near 88.7) stays finite; n >= -125 */
    union { uint32_t u; float f; } s = {(t.u - 0x4B400000u + 126u) << 23};
    float e = p * s.f * 2.0f;
    e = x < lo ? 0.0f : e;
    return x > hi ? INFINITY : e;
}

/* RoPE inverse frequency of pair i of a head of d (codelets/rope.c):
 * 1 / theta^((float)(2i) / (float)d) as PyTorch forms its fp32 inv_freq
 * (exponent and division in fp32), with the power correctly rounded to
 * fp32 (through double) on CPUs and GPUs alike. powf would not give one
 * answer: glibc's is 1 ulp off in 267 of 263168 (theta 1e2..1e7, even
 * d <= 512, every i), CUDA's may be 4 ulp off, and PyTorch's own (Sleef,
 * 1 ulp) differs in a few; an ulp of inv_freq moves the angle of position
 * p by p * inv_freq * 6e-8. */
SW_HD float sw_rope_inv_freq(float theta, int64_t i, int d)
{
    const float e = (float)(2 * i) / (float)d;
    return 1.0f / (float)pow((double)theta, (double)e);
}

#endif
