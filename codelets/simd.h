/* Kernel helpers shared by the CPU codelets: SIMD row reductions, a
 * vectorisable exp, and access to [1,n] / [n,1] vector buffers. */
#ifndef STARWEAVE_SIMD_H
#define STARWEAVE_SIMD_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codelet_util.h"
#include "fastmath.h"

/* Row reductions in GNU C vector extensions: GCC lowers them to the widest
 * SIMD the target has (AVX-512, 2x AVX2, 4x SSE), while a plain float
 * reduction loop is not vectorised without -ffast-math. Vectors are only
 * handled through pointers and locals, never passed by value (-Wpsabi). */
#define SW_VL 16
typedef float sw_vf __attribute__((vector_size(SW_VL * sizeof(float))));
#define SW_VLOAD(v, p) memcpy(&(v), (p), sizeof(sw_vf))

/* The target's own vector, one register wide, for register-blocked kernels
 * that keep arrays of vectors in registers: GCC keeps such arrays of the
 * wider sw_vf in memory where it is two registers (AVX2), moving every FMA's
 * result through the stack. Kernels whose lanes are independent sums use
 * it: their results do not depend on its width. */
#if defined(__AVX512F__)
#define SW_NL 16
#elif defined(__AVX__)
#define SW_NL 8
#else
#define SW_NL 4
#endif
typedef float sw_vn __attribute__((vector_size(SW_NL * sizeof(float))));
#define SW_NLOAD(v, p) memcpy(&(v), (p), sizeof(sw_vn))

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

/* max of x[0..n-1], -inf for n == 0; a NaN compares false and is skipped
 * (as in the scalar m = x > m ? x : m). In native vectors: GCC turns
 * compares of the wider sw_vf into scalar branches on AVX2. Four
 * accumulators keep the compare-select chains apart. The max is exact, so
 * the width and grouping change nothing (but the sign of an all-zero max). */
static inline float sw_row_max(const float *x, int64_t n)
{
    typedef int32_t vi __attribute__((vector_size(SW_NL * sizeof(int32_t))));
    const sw_vn ninf = (sw_vn){0} - INFINITY;
    sw_vn vm[4] = {ninf, ninf, ninf, ninf}, v;
    int64_t c = 0;
    for (; c + 4 * SW_NL <= n; c += 4 * SW_NL)
        for (int u = 0; u < 4; u++) {
            SW_NLOAD(v, x + c + u * SW_NL);
            vi gt = v > vm[u];
            vm[u] = (sw_vn)(((vi)v & gt) | ((vi)vm[u] & ~gt));
        }
    for (; c + SW_NL <= n; c += SW_NL) {
        SW_NLOAD(v, x + c);
        vi gt = v > vm[0];
        vm[0] = (sw_vn)(((vi)v & gt) | ((vi)vm[0] & ~gt));
    }
    float m = -INFINITY;
    for (int u = 0; u < 4; u++)
        for (int j = 0; j < SW_NL; j++) m = vm[u][j] > m ? vm[u][j] : m;
    for (; c < n; c++) m = x[c] > m ? x[c] : m;
    return m;
}

#endif
