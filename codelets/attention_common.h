/* Helpers shared by the two CPU attention codelets: the flash tile
 * (attention.c) and the attention with saved probabilities
 * (attention_probs.c). Block sizes, the allocation wrapper, the packs of the
 * q/k/v slices, causal masking, grouped-query heads, the dropout mask (the
 * same counter in both, so that both paths drop the same entries), the
 * flop count and, in CUDA builds, the arguments of the CUDA kernels.
 *
 * The including file defines ATT_WHO, its name in messages ("attention",
 * "attention_probs"), before including this header. */
#ifndef STARWEAVE_ATTENTION_COMMON_H
#define STARWEAVE_ATTENTION_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codelet_util.h"
#include "simd.h"
#include "philox.h"
#include "starweave/ops.h"

#ifndef ATT_WHO
#error "define ATT_WHO (the codelet's name in messages) before including attention_common.h"
#endif

/* Queries go in blocks of ATT_BQ rows against key blocks of ATT_BK keys. */
#define ATT_BQ 32
#define ATT_BK 64
/* GNU C vectors (simd.h) in a key block */
#define ATT_NV (ATT_BK / SW_VL)

/* Native vectors (simd.h) per row that the 4-row kernels hold in registers
 * at once: 4 x ATT_RN accumulators plus ATT_RN loaded ones must fit the
 * register file (32 with AVX-512, 16 with AVX2). The column split changes no
 * sum: each output still sums over its terms in order. */
#ifdef __AVX512F__
#define ATT_RN 4
#else
#define ATT_RN 2
#endif

/* Keeps a loaded vector in a register: without it GCC folds the loads of the
 * reused operand into every FMA (4x the loads, and the kernels are load-bound).
 * An empty asm, so the value and the results are unchanged. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define ATT_IN_REG(x) __asm__("" : "+v"(x))
#else
#define ATT_IN_REG(x) ((void)0)
#endif

/* The helpers that are not inline stay so (inlining them changes the kernels'
 * code); an includer that does not call one of them gets no warning. */
#define ATT_UNUSED __attribute__((unused))

static ATT_UNUSED float *att_alloc(size_t n)
{
    float *p = malloc(sizeof(float) * (n ? n : 1));
    if (!p) {
        fprintf(stderr, "starweave: " ATT_WHO ": cannot allocate %zu floats\n", n);
        abort();
    }
    return p;
}

/* dst[i*d + c] = s * src[(i*batch + b)*ld + col + c] */
static ATT_UNUSED void pack_rows(float *dst, const float *src, int64_t ld, int n, int batch, int b, int64_t col,
                                 int d, float s)
{
    for (int i = 0; i < n; i++) {
        const float *r = src + ((int64_t)i * batch + b) * ld + col;
        for (int c = 0; c < d; c++) dst[(int64_t)i * d + c] = s * r[c];
    }
}

/* The inverse of pack_rows (s = 1) for a gradient: dst[(i*batch + b)*ld + col + c]
 * = (or += when add) src[i*d + c] */
static ATT_UNUSED void unpack_rows(float *dst, int64_t ld, const float *src, int n, int batch, int b, int64_t col,
                                   int d, int add)
{
    for (int i = 0; i < n; i++) {
        float *r = dst + ((int64_t)i * batch + b) * ld + col;
        const float *g = src + (int64_t)i * d;
        if (add) for (int c = 0; c < d; c++) r[c] += g[c];
        else memcpy(r, g, sizeof(float) * (size_t)d);
    }
}

/* dst[c*ldd + i] = src[(i*batch + b)*ld + col + c] (transposed pack), i < n, in
 * blocks of 16 rows so that each store fills a cache line; the columns n..ldd-1
 * of dst are zero, so that the score kernels may read whole vectors (whole key
 * blocks) past n. */
static ATT_UNUSED void pack_trans(float *dst, int64_t ldd, const float *src, int64_t ld, int n, int batch, int b,
                                  int64_t col, int d)
{
    for (int i0 = 0; i0 < n; i0 += 16) {
        const int m = n - i0 < 16 ? n - i0 : 16;
        const float *r[16];
        for (int i = 0; i < m; i++) r[i] = src + ((int64_t)(i0 + i) * batch + b) * ld + col;
        for (int c = 0; c < d; c++) {
            float *dr = dst + (int64_t)c * ldd + i0;
            for (int i = 0; i < m; i++) dr[i] = r[i][c];
        }
    }
    for (int c = 0; c < d; c++) memset(dst + (int64_t)c * ldd + n, 0, sizeof(float) * (size_t)(ldd - n));
}

/* Row length of the transposed packs: the keys rounded up to whole key blocks
 * (the score kernels read up to ATT_BK columns), plus 16 so that the rows of a
 * pack do not all fall in the same cache sets when sk is a power of two. */
static inline int64_t padded_keys(int sk)
{
    return ((int64_t)sk + ATT_BK - 1) / ATT_BK * ATT_BK + 16;
}

/* Scores of 4 rows, register-blocked: s[r*lds + jj] = sum_c A[r*d + c] *
 * BT[c*ldb + jj] for r < 4 and jj < nv*SW_VL (nv a constant after inlining;
 * BT padded), stored for jj < nstore. Each sum over c in order, as a scalar
 * loop; ATT_RN native vectors of columns at a time. */
static inline __attribute__((always_inline)) void att_abt4(float *restrict s, int64_t lds, const float *restrict A,
                                                           const float *restrict BT, int64_t ldb, int d, int nv,
                                                           int nstore)
{
    const int nn = nv * (SW_VL / SW_NL);
    for (int v0 = 0; v0 < nn; v0 += ATT_RN) {
        const int n = nn - v0 < ATT_RN ? nn - v0 : ATT_RN;
        const float *bt0 = BT + v0 * SW_NL;
        sw_vn acc[4][ATT_RN], bt[ATT_RN];
        memset(acc, 0, sizeof acc);
        for (int c = 0; c < d; c++) {
            for (int v = 0; v < n; v++) {
                SW_NLOAD(bt[v], bt0 + (int64_t)c * ldb + v * SW_NL);
                ATT_IN_REG(bt[v]);
            }
            for (int r = 0; r < 4; r++) {
                const float ar = A[(int64_t)r * d + c];
                for (int v = 0; v < n; v++) acc[r][v] += ar * bt[v];
            }
        }
        int cols = nstore - v0 * SW_NL;
        cols = cols < 0 ? 0 : (cols > n * SW_NL ? n * SW_NL : cols);
        for (int r = 0; r < 4; r++) memcpy(s + (int64_t)r * lds + v0 * SW_NL, acc[r], sizeof(float) * (size_t)cols);
    }
}

/* One row of the same: s[jj] = sum_c a[c] * BT[c*ldb + jj], jj < nv*SW_VL,
 * stored for jj < nstore. */
static inline void att_abt1(float *restrict s, const float *restrict a, const float *restrict BT, int64_t ldb, int d,
                            int nv, int nstore)
{
    const int nn = nv * (SW_VL / SW_NL);
    sw_vn acc[ATT_BK / SW_NL], bt;
    memset(acc, 0, sizeof acc);
    for (int c = 0; c < d; c++) {
        const float ac = a[c];
        for (int v = 0; v < nn; v++) {
            SW_NLOAD(bt, BT + (int64_t)c * ldb + v * SW_NL);
            acc[v] += ac * bt;
        }
    }
    memcpy(s, acc, sizeof(float) * (size_t)nstore);
}

/* The vector part of y[c] += sum_{t<n} w[t*wt] * M[t*ldm + c]: the columns c
 * < d in whole native vectors, y held in registers (64 columns at a time,
 * then one vector) over the whole sum, t in order. Returns the first column
 * not done (c < d when d is not a multiple of SW_NL), for the caller's
 * scalar tail. */
static inline __attribute__((always_inline)) int att_axpy_vec(float *restrict y, const float *restrict w, int64_t wt,
                                                              const float *restrict M, int64_t ldm, int n, int d)
{
    enum { NY = 4 * SW_VL / SW_NL }; /* 64 columns at a time: 4 AVX-512 or 8 AVX2 registers */
    int c = 0;
    for (; c + NY * SW_NL <= d; c += NY * SW_NL) {
        sw_vn acc[NY], m;
        for (int v = 0; v < NY; v++) SW_NLOAD(acc[v], y + c + v * SW_NL);
        for (int t = 0; t < n; t++) {
            const float wv = w[(int64_t)t * wt];
            const float *mr = M + (int64_t)t * ldm + c;
            for (int v = 0; v < NY; v++) {
                SW_NLOAD(m, mr + v * SW_NL);
                acc[v] += wv * m;
            }
        }
        memcpy(y + c, acc, sizeof acc);
    }
    for (; c + SW_NL <= d; c += SW_NL) {
        sw_vn y0, m;
        SW_NLOAD(y0, y + c);
        for (int t = 0; t < n; t++) {
            SW_NLOAD(m, M + (int64_t)t * ldm + c);
            y0 += w[(int64_t)t * wt] * m;
        }
        memcpy(y + c, &y0, sizeof y0);
    }
    return c;
}

/* p[j] = sw_expf(p[j] - m) for j < n; returns their sum (in SW_VL lanes,
 * summed pairwise, then the rest in order), the softmax denominator. */
static inline __attribute__((always_inline)) float att_exp_sum(float *p, int n, float m)
{
    for (int j = 0; j < n; j++) p[j] = sw_expf(p[j] - m);
    sw_vf vs = {0}, vp;
    int j = 0;
    for (; j + SW_VL <= n; j += SW_VL) {
        SW_VLOAD(vp, p + j);
        vs += vp;
    }
    float sum = sw_vsum(&vs);
    for (; j < n; j++) sum += p[j];
    return sum;
}

/* Key length of batch element b: its keys are those at positions below it
 * (key padding), INT64_MAX without key padding. */
static inline int64_t key_len(const sw_attn_args *a, int b)
{
    return a->key_padding ? (int64_t)a->key_len[b] : INT64_MAX;
}

/* Valid (unmasked) keys, from 0, among the nk keys starting at key position
 * kb, for a query at position qpos, in a sequence of klen keys (key_len):
 * a prefix, cut by the causal rule and by the key length. */
static inline int valid_keys(int causal, int64_t qpos, int64_t kb, int nk, int64_t klen)
{
    int64_t lim = klen - kb;
    if (causal && qpos - kb + 1 < lim) lim = qpos - kb + 1;
    return lim <= 0 ? 0 : (lim >= nk ? nk : (int)lim);
}

/* First of the nq queries from position qb that sees the key at position
 * kpos (nq: none, also when the key is past the sequence's klen keys). */
static inline int first_query(int causal, int64_t qb, int64_t kpos, int nq, int64_t klen)
{
    if (kpos >= klen) return nq;
    if (!causal || kpos <= qb) return 0;
    return kpos - qb >= nq ? nq : (int)(kpos - qb);
}

/* K/V heads of the tile (0 means nh), checked against the k, v buffers. */
static ATT_UNUSED int kv_heads(const sw_attn_args *a, void *kbuf, void *vbuf)
{
    const int nkv = a->nkv > 0 ? a->nkv : a->nh;
    STARPU_ASSERT_MSG(nkv > 0 && a->nh % nkv == 0, ATT_WHO ": nh %% nkv != 0 (nh=%d nkv=%d)", a->nh, nkv);
    STARPU_ASSERT_MSG(SW_COLS_OF(kbuf) == (int64_t)nkv * a->d && SW_COLS_OF(vbuf) == (int64_t)nkv * a->d,
                      ATT_WHO ": k, v tiles must have nkv*d = %d columns (k %d, v %d)", nkv * a->d,
                      (int)SW_COLS_OF(kbuf), (int)SW_COLS_OF(vbuf));
    return nkv;
}

/* The dropout index is per query head (head0 + h), whatever K/V head it reads. */
static inline uint64_t drop_index(const sw_attn_args *a, int b, int h, int64_t qpos, int64_t kpos)
{
    uint64_t hb = (uint64_t)(a->key.batch0 + b) * (uint64_t)a->heads_total + (uint64_t)(a->head0 + h);
    return (hb * (uint64_t)a->seq_total + (uint64_t)qpos) * (uint64_t)a->seq_total + (uint64_t)kpos;
}

/* z[jj] = 1/(1-p) where entry jj (global index base + jj) is kept, 0 where dropped, jj < n */
static inline void drop_mask(float *restrict z, int n, const sw_attn_args *a, uint64_t base, float inv_keep)
{
    for (int jj = 0; jj < n; jj++)
        z[jj] = sw_dropout_keep(a->key.seed, a->key.step, a->key.layer, a->key.op, base + (uint64_t)jj, a->dropout)
                    ? inv_keep
                    : 0.0f;
}

#ifdef STARWEAVE_USE_CUDA
_Static_assert(SW_CUDA_ATT_MAXSEQ == SW_ATTN_MAX_SEQS, "kernels.h: SW_CUDA_ATT_MAXSEQ must equal SW_ATTN_MAX_SEQS");
/* The arguments as the CUDA kernels take them (cuda/kernels.h), nkv resolved
 * by kv_heads(): the same counter fields, so the kernels draw the same
 * dropout bits. */
static ATT_UNUSED sw_cuda_attn cuda_attn(const sw_attn_args *a, int nkv)
{
    STARPU_ASSERT_MSG(a->d >= 1 && a->d <= SW_CUDA_ATT_DMAX,
                      ATT_WHO ": the CUDA kernels take head dims 1..%d (d = %d)", SW_CUDA_ATT_DMAX, a->d);
    sw_cuda_attn c;
    memset(&c, 0, sizeof c);
    c.batch = a->batch;
    c.nh = a->nh;
    c.nkv = nkv;
    c.d = a->d;
    c.sq = a->sq;
    c.sk = a->sk;
    c.q_pos0 = a->q_pos0;
    c.k_pos0 = a->k_pos0;
    c.causal = a->causal;
    c.scale = a->scale;
    c.dropout = a->dropout;
    c.inv_keep = a->dropout > 0.0f ? 1.0f / (1.0f - a->dropout) : 1.0f;
    c.seed = a->key.seed;
    c.step = a->key.step;
    c.layer = a->key.layer;
    c.op = a->key.op;
    c.batch0 = a->key.batch0;
    c.head0 = a->head0;
    c.heads_total = a->heads_total;
    c.seq_total = a->seq_total;
    c.merge = a->merge;
    c.accumulate = a->accumulate;
    c.kv_accumulate = a->kv_accumulate;
    c.key_padding = a->key_padding;
    memcpy(c.key_len, a->key_len, sizeof c.key_len);
    return c;
}
#endif

/* Key padding: the tile's batch elements fit key_len (caught at submission). */
static ATT_UNUSED void check_key_padding(const char *fn, const sw_attn_args *a)
{
    if (a->key_padding && (a->batch > SW_ATTN_MAX_SEQS || a->batch < 0)) {
        fprintf(stderr, "starweave: %s: key_padding: batch must be at most SW_ATTN_MAX_SEQS (%d, %d)\n", fn,
                a->batch, SW_ATTN_MAX_SEQS);
        abort();
    }
}

/* per FLOPs per visible (query, key) pair and head dim: per * batch * nh * d * the tile's visible pairs (a
 * causal tile by its positions: a Ring step's fully visible block counts all its pairs, the diagonal half);
 * with the FLOPs in its perf model's footprint (codelet_util.h: SW_PERFMODEL_BY_WORK) */
static ATT_UNUSED double attn_flops(const sw_attn_args *a, double per)
{
    return per * a->batch * a->nh * a->d * sw_attn_visible_pairs(a->q_pos0, a->sq, a->k_pos0, a->sk, a->causal);
}

#endif
