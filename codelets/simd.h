/* Kernel helpers shared by the CPU codelets: SIMD row reductions, a
 * vectorisable exp, and access to [1,n] / [n,1] vector buffers. */
#ifndef STARWEAVE_SIMD_H
#define STARWEAVE_SIMD_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codelet_util.h"

/* Row reductions in GNU C vector extensions: GCC lowers them to the widest
 * SIMD the target has (AVX-512, 2x AVX2, 4x SSE), while a plain float
 * reduction loop is not vectorised without -ffast-math. Vectors are only
 * handled through pointers and locals, never passed by value (-Wpsabi). */
#define SW_VL 16
typedef float sw_vf __attribute__((vector_size(SW_VL * sizeof(float))));
#define SW_VLOAD(v, p) memcpy(&(v), (p), sizeof(sw_vf))

/* pairwise sum of the lanes */
static inline float sw_vsum(const sw_vf *v)
{
    float t[SW_VL];
    memcpy(t, v, sizeof t);
    for (int w = SW_VL / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) t[j] += t[j + w];
    return t[0];
}

/* Element i of a [1,n] or [n,1] matrix buffer is at p[i * inc]. */
static inline int64_t sw_vec_inc(void *buf)
{
    STARPU_ASSERT_MSG(SW_ROWS_OF(buf) == 1 || SW_COLS_OF(buf) == 1 || SW_LD_OF(buf) == SW_COLS_OF(buf),
                      "a vector must be [1,n], [n,1] or contiguous");
    return (SW_COLS_OF(buf) == 1 && SW_ROWS_OF(buf) > 1) ? SW_LD_OF(buf) : 1;
}

/* Read-only vector as a contiguous array: the buffer itself, or a gathered
 * copy in *tmp (free it) when the vector is strided. */
static inline const float *sw_vec_in(void *buf, float **tmp)
{
    int64_t inc = sw_vec_inc(buf), n = SW_NUMEL_OF(buf);
    const float *p = SW_F32_OF(buf);
    *tmp = NULL;
    if (inc == 1) return p;
    float *t = malloc(sizeof(float) * (size_t)n);
    STARPU_ASSERT_MSG(t, "out of memory");
    for (int64_t i = 0; i < n; i++) t[i] = p[i * inc];
    *tmp = t;
    return t;
}

typedef int32_t sw_vi __attribute__((vector_size(SW_VL * sizeof(int32_t))));

/* max of x[0..n-1], -inf for n == 0; a NaN compares false and is skipped
 * (as in the scalar m = x > m ? x : m) */
static inline float sw_row_max(const float *x, int64_t n)
{
    sw_vf vm, v;
    for (int j = 0; j < SW_VL; j++) vm[j] = -INFINITY;
    int64_t c = 0;
    for (; c + SW_VL <= n; c += SW_VL) {
        SW_VLOAD(v, x + c);
        sw_vi gt = v > vm;
        vm = (sw_vf)(((sw_vi)v & gt) | ((sw_vi)vm & ~gt));
    }
    float m = -INFINITY;
    for (int j = 0; j < SW_VL; j++) m = vm[j] > m ? vm[j] : m;
    for (; c < n; c++) m = x[c] > m ? x[c] : m;
    return m;
}

/* exp(x) within ~2 ulp on [-86.6, 88.72]; 0 below (true value < 2.4e-38),
 * +inf above, NaN for NaN. Branch-free so that GCC vectorises callers. */
static inline float sw_expf(float x)
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

#endif
