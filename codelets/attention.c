/* Flash-style attention tile (forward with online softmax, backward in the
 * FlashAttention-2 form), one task per head group; nothing parallel inside.
 *
 * Layout: rows in [s, b] order (row = pos * batch + b); head j of the tile
 * in columns j*d .. j*d+d-1 of q/k/v/o (handles may be strided column
 * tiles); lse[sq*batch, nh] (may be strided). Grouped-query attention: k, v
 * hold nkv heads and query head j reads K/V head j / (nh / nkv). The query
 * heads of a group are consecutive, so each K/V slice is packed once, at
 * the group's first head (and, backward, dK/dV are summed over the group in
 * the packed buffers and written back once, after its last). For each (batch,
 * head) the q, k, v slices are packed into contiguous buffers (K and V also
 * transposed where the inner loop runs over keys), then the queries are
 * processed in blocks of ATT_BQ rows against key blocks of ATT_BK keys:
 * at most an ATT_BQ x ATT_BK block of scores exists at a time.
 *
 * Causal: key position k_pos0 + j is masked for query position q_pos0 + i
 * when it is larger, so a block's valid keys are a prefix; key blocks past
 * the query block's last position are skipped. Fully masked query rows:
 * o = 0, lse = -inf. Dropout (p > 0) applies to the normalised
 * probabilities (kept values scaled 1/(1-p)); lse is that of the
 * un-dropped softmax. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codelet_util.h"
#include "simd.h"
#include "philox.h"
#include "starweave/ops.h"

#define ATT_BQ 32
#define ATT_BK 64

static float *att_alloc(size_t n)
{
    float *p = malloc(sizeof(float) * (n ? n : 1));
    if (!p) {
        fprintf(stderr, "starweave: attention: cannot allocate %zu floats\n", n);
        abort();
    }
    return p;
}

/* dst[i*d + c] = s * src[(i*batch + b)*ld + col + c] */
static void pack_rows(float *dst, const float *src, int64_t ld, int n, int batch, int b, int64_t col,
                      int d, float s)
{
    for (int i = 0; i < n; i++) {
        const float *r = src + ((int64_t)i * batch + b) * ld + col;
        for (int c = 0; c < d; c++) dst[(int64_t)i * d + c] = s * r[c];
    }
}

/* dst[c*n + i] = src[(i*batch + b)*ld + col + c] (transposed pack) */
static void pack_trans(float *dst, const float *src, int64_t ld, int n, int batch, int b, int64_t col,
                       int d)
{
    for (int i = 0; i < n; i++) {
        const float *r = src + ((int64_t)i * batch + b) * ld + col;
        for (int c = 0; c < d; c++) dst[(int64_t)c * n + i] = r[c];
    }
}

/* s[i*ATT_BK + jj] = sum_c A[i*d + c] * BT[c*ld + jj], i < nq, jj < nk */
static void block_abt(float *restrict s, const float *restrict A, const float *restrict BT, int64_t ld,
                      int nq, int nk, int d)
{
    for (int i = 0; i < nq; i++) {
        float *restrict si = s + i * ATT_BK;
        const float *ai = A + (int64_t)i * d;
        for (int jj = 0; jj < nk; jj++) si[jj] = 0.0f;
        for (int c = 0; c < d; c++) {
            const float ac = ai[c];
            const float *restrict bt = BT + (int64_t)c * ld;
            for (int jj = 0; jj < nk; jj++) si[jj] += ac * bt[jj];
        }
    }
}

/* Valid (unmasked) keys of a block starting at key position kb, for a query at qpos. */
static inline int valid_keys(int causal, int64_t qpos, int64_t kb, int nk)
{
    if (!causal) return nk;
    int64_t lim = qpos - kb + 1;
    return lim <= 0 ? 0 : (lim >= nk ? nk : (int)lim);
}

/* K/V heads of the tile (0 means nh), checked against the k, v buffers. */
static int kv_heads(const sw_attn_args *a, void *kbuf, void *vbuf)
{
    const int nkv = a->nkv > 0 ? a->nkv : a->nh;
    STARPU_ASSERT_MSG(nkv > 0 && a->nh % nkv == 0, "attention: nh %% nkv != 0 (nh=%d nkv=%d)", a->nh, nkv);
    STARPU_ASSERT_MSG(SW_COLS_OF(kbuf) == (int64_t)nkv * a->d && SW_COLS_OF(vbuf) == (int64_t)nkv * a->d,
                      "attention: k, v tiles must have nkv*d = %d columns (k %d, v %d)", nkv * a->d,
                      (int)SW_COLS_OF(kbuf), (int)SW_COLS_OF(vbuf));
    return nkv;
}

/* The dropout index is per query head (head0 + h), whatever K/V head it reads. */
static inline uint64_t drop_index(const sw_attn_args *a, int b, int h, int64_t qpos, int64_t kpos)
{
    uint64_t hb = (uint64_t)(a->key.batch0 + b) * (uint64_t)a->heads_total + (uint64_t)(a->head0 + h);
    return (hb * (uint64_t)a->seq_total + (uint64_t)qpos) * (uint64_t)a->seq_total + (uint64_t)kpos;
}

/* buffers: q (R), k (R), v (R), o (W | RW when merge), lse (W | RW when merge) */
static void attn_fwd_cpu(void *buffers[], void *cl_arg)
{
    sw_attn_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const float *q = SW_F32_OF(buffers[0]), *k = SW_F32_OF(buffers[1]), *v = SW_F32_OF(buffers[2]);
    float *o = SW_F32_OF(buffers[3]), *lse = SW_F32_OF(buffers[4]);
    const int64_t ldq = SW_LD_OF(buffers[0]), ldk = SW_LD_OF(buffers[1]), ldv = SW_LD_OF(buffers[2]),
                  ldo = SW_LD_OF(buffers[3]), ldl = SW_LD_OF(buffers[4]);
    const int B = a.batch, d = a.d, sq = a.sq, sk = a.sk;
    const int nkv = kv_heads(&a, buffers[1], buffers[2]), grp = a.nh / nkv;
    const int drop = a.dropout > 0.0f;
    const float inv_keep = drop ? 1.0f / (1.0f - a.dropout) : 1.0f;

    float *Q = att_alloc((size_t)sq * d), *KT = att_alloc((size_t)sk * d), *V = att_alloc((size_t)sk * d);
    float *acc = att_alloc((size_t)ATT_BQ * d);
    float S[ATT_BQ * ATT_BK], m[ATT_BQ], l[ATT_BQ];

    for (int b = 0; b < B; b++) {
        for (int h = 0; h < a.nh; h++) {
            const int64_t col = (int64_t)h * d;
            if (h % grp == 0) { /* first query head of a K/V group */
                const int64_t kvcol = (int64_t)(h / grp) * d;
                pack_trans(KT, k, ldk, sk, B, b, kvcol, d);
                pack_rows(V, v, ldv, sk, B, b, kvcol, d, 1.0f);
            }
            pack_rows(Q, q, ldq, sq, B, b, col, d, a.scale);
            for (int i0 = 0; i0 < sq; i0 += ATT_BQ) {
                const int nq = sq - i0 < ATT_BQ ? sq - i0 : ATT_BQ;
                const int64_t qlast = a.q_pos0 + i0 + nq - 1;
                for (int i = 0; i < nq; i++) {
                    m[i] = -INFINITY;
                    l[i] = 0.0f;
                }
                memset(acc, 0, sizeof(float) * (size_t)nq * d);
                for (int j0 = 0; j0 < sk; j0 += ATT_BK) {
                    const int nk = sk - j0 < ATT_BK ? sk - j0 : ATT_BK;
                    const int64_t kb = a.k_pos0 + j0;
                    if (a.causal && kb > qlast) break; /* later blocks are masked too */
                    block_abt(S, Q + (int64_t)i0 * d, KT + j0, sk, nq, nk, d);
                    for (int i = 0; i < nq; i++) {
                        const int64_t qpos = a.q_pos0 + i0 + i;
                        const int nv = valid_keys(a.causal, qpos, kb, nk);
                        if (nv == 0) continue;
                        float *s = S + i * ATT_BK;
                        float bm = s[0];
                        for (int jj = 1; jj < nv; jj++) bm = s[jj] > bm ? s[jj] : bm;
                        const float mnew = bm > m[i] ? bm : m[i];
                        const float alpha = expf(m[i] - mnew); /* 0 when m was -inf */
                        for (int jj = 0; jj < nv; jj++) s[jj] = sw_expf(s[jj] - mnew);
                        float sum = 0.0f;
                        for (int jj = 0; jj < nv; jj++) sum += s[jj];
                        l[i] = l[i] * alpha + sum;
                        m[i] = mnew;
                        if (drop) {
                            const uint64_t base = drop_index(&a, b, h, qpos, kb);
                            for (int jj = 0; jj < nv; jj++)
                                s[jj] = sw_dropout_keep(a.key.seed, a.key.step, a.key.layer, a.key.op,
                                                        base + (uint64_t)jj, a.dropout)
                                            ? s[jj] * inv_keep
                                            : 0.0f;
                        }
                        float *restrict ac = acc + (int64_t)i * d;
                        if (alpha != 1.0f)
                            for (int c = 0; c < d; c++) ac[c] *= alpha;
                        for (int jj = 0; jj < nv; jj++) {
                            const float pj = s[jj];
                            const float *restrict vr = V + (int64_t)(j0 + jj) * d;
                            for (int c = 0; c < d; c++) ac[c] += pj * vr[c];
                        }
                    }
                }
                /* finalise: o_t = acc / l, lse_t = m + log l; write or merge */
                for (int i = 0; i < nq; i++) {
                    const int64_t row = (int64_t)(i0 + i) * B + b;
                    float *restrict orow = o + row * ldo + col;
                    float *lp = lse + row * ldl + h;
                    const float *ac = acc + (int64_t)i * d;
                    const int empty = !(l[i] > 0.0f);
                    const float lt = empty ? -INFINITY : m[i] + logf(l[i]);
                    const float w = empty ? 0.0f : 1.0f / l[i];
                    if (!a.merge) {
                        *lp = lt;
                        for (int c = 0; c < d; c++) orow[c] = w * ac[c];
                        continue;
                    }
                    const float l1 = *lp;
                    if (empty) continue;           /* merging an empty tile changes nothing */
                    if (l1 == -INFINITY) {         /* existing row empty: take the tile */
                        *lp = lt;
                        for (int c = 0; c < d; c++) orow[c] = w * ac[c];
                        continue;
                    }
                    const float mx = l1 > lt ? l1 : lt;
                    const float ln = mx + logf(expf(l1 - mx) + expf(lt - mx));
                    const float w1 = expf(l1 - ln), w2 = expf(lt - ln) * w;
                    for (int c = 0; c < d; c++) orow[c] = w1 * orow[c] + w2 * ac[c];
                    *lp = ln;
                }
            }
        }
    }
    free(Q);
    free(KT);
    free(V);
    free(acc);
}

/* buffers: q, k, v, o, lse, dout (R); dq (W, or RW when accumulate); dk, dv (W, or RW when
 * accumulate or kv_accumulate) */
static void attn_bwd_cpu(void *buffers[], void *cl_arg)
{
    sw_attn_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const float *q = SW_F32_OF(buffers[0]), *k = SW_F32_OF(buffers[1]), *v = SW_F32_OF(buffers[2]);
    const float *o = SW_F32_OF(buffers[3]), *lse = SW_F32_OF(buffers[4]), *dout = SW_F32_OF(buffers[5]);
    float *dq = SW_F32_OF(buffers[6]), *dk = SW_F32_OF(buffers[7]), *dv = SW_F32_OF(buffers[8]);
    const int64_t ldq = SW_LD_OF(buffers[0]), ldk = SW_LD_OF(buffers[1]), ldv = SW_LD_OF(buffers[2]),
                  ldo = SW_LD_OF(buffers[3]), ldl = SW_LD_OF(buffers[4]), lddo = SW_LD_OF(buffers[5]),
                  lddq = SW_LD_OF(buffers[6]), lddk = SW_LD_OF(buffers[7]), lddv = SW_LD_OF(buffers[8]);
    const int B = a.batch, d = a.d, sq = a.sq, sk = a.sk;
    const int nkv = kv_heads(&a, buffers[1], buffers[2]), grp = a.nh / nkv;
    const int kv_add = a.accumulate || a.kv_accumulate;
    const int drop = a.dropout > 0.0f;
    const float inv_keep = drop ? 1.0f / (1.0f - a.dropout) : 1.0f;
    const float scale = a.scale;

    const size_t nqd = (size_t)sq * d, nkd = (size_t)sk * d;
    float *Q = att_alloc(nqd), *dO = att_alloc(nqd), *dQ = att_alloc(nqd);
    float *K = att_alloc(nkd), *KT = att_alloc(nkd), *VT = att_alloc(nkd);
    float *dK = att_alloc(nkd), *dV = att_alloc(nkd);
    float *Dr = att_alloc((size_t)sq), *L = att_alloc((size_t)sq);
    float S[ATT_BQ * ATT_BK], P2[ATT_BQ * ATT_BK];

    for (int b = 0; b < B; b++) {
        for (int h = 0; h < a.nh; h++) {
            const int64_t col = (int64_t)h * d, kvcol = (int64_t)(h / grp) * d;
            if (h % grp == 0) { /* first query head of a K/V group: dK, dV sum over the group */
                pack_rows(K, k, ldk, sk, B, b, kvcol, d, 1.0f);
                pack_trans(KT, k, ldk, sk, B, b, kvcol, d);
                pack_trans(VT, v, ldv, sk, B, b, kvcol, d);
                memset(dK, 0, sizeof(float) * nkd);
                memset(dV, 0, sizeof(float) * nkd);
            }
            pack_rows(Q, q, ldq, sq, B, b, col, d, 1.0f);
            pack_rows(dO, dout, lddo, sq, B, b, col, d, 1.0f);
            for (int i = 0; i < sq; i++) {
                const int64_t row = (int64_t)i * B + b;
                const float *orow = o + row * ldo + col, *g = dO + (int64_t)i * d;
                float s = 0.0f;
                for (int c = 0; c < d; c++) s += g[c] * orow[c];
                Dr[i] = s;
                L[i] = lse[row * ldl + h];
            }
            memset(dQ, 0, sizeof(float) * nqd);
            for (int i0 = 0; i0 < sq; i0 += ATT_BQ) {
                const int nq = sq - i0 < ATT_BQ ? sq - i0 : ATT_BQ;
                const int64_t qlast = a.q_pos0 + i0 + nq - 1;
                for (int j0 = 0; j0 < sk; j0 += ATT_BK) {
                    const int nk = sk - j0 < ATT_BK ? sk - j0 : ATT_BK;
                    const int64_t kb = a.k_pos0 + j0;
                    if (a.causal && kb > qlast) break;
                    block_abt(S, Q + (int64_t)i0 * d, KT + j0, sk, nq, nk, d);   /* Q K^T */
                    block_abt(P2, dO + (int64_t)i0 * d, VT + j0, sk, nq, nk, d); /* dO V^T */
                    for (int i = 0; i < nq; i++) {
                        const int64_t qpos = a.q_pos0 + i0 + i;
                        const float li = L[i0 + i], Di = Dr[i0 + i];
                        const int nv = li == -INFINITY ? 0 : valid_keys(a.causal, qpos, kb, nk);
                        float *s = S + i * ATT_BK, *dp = P2 + i * ATT_BK;
                        const uint64_t base = drop ? drop_index(&a, b, h, qpos, kb) : 0;
                        for (int jj = 0; jj < nv; jj++) {
                            const float p = sw_expf(scale * s[jj] - li);
                            float z = 1.0f;
                            if (drop)
                                z = sw_dropout_keep(a.key.seed, a.key.step, a.key.layer, a.key.op,
                                                    base + (uint64_t)jj, a.dropout)
                                        ? inv_keep
                                        : 0.0f;
                            s[jj] = scale * p * (dp[jj] * z - Di); /* scale * dS */
                            dp[jj] = p * z;                        /* dropped probability */
                        }
                        const float *qi = Q + (int64_t)(i0 + i) * d, *gi = dO + (int64_t)(i0 + i) * d;
                        float *restrict dqi = dQ + (int64_t)(i0 + i) * d;
                        for (int jj = 0; jj < nv; jj++) {
                            const float ds = s[jj], pd = dp[jj];
                            const float *restrict kr = K + (int64_t)(j0 + jj) * d;
                            float *restrict dkr = dK + (int64_t)(j0 + jj) * d;
                            float *restrict dvr = dV + (int64_t)(j0 + jj) * d;
                            for (int c = 0; c < d; c++) {
                                dqi[c] += ds * kr[c];
                                dkr[c] += ds * qi[c];
                                dvr[c] += pd * gi[c];
                            }
                        }
                    }
                }
            }
            /* write back: = (W) or += (RW) */
            for (int i = 0; i < sq; i++) {
                float *r = dq + ((int64_t)i * B + b) * lddq + col;
                const float *g = dQ + (int64_t)i * d;
                if (a.accumulate) for (int c = 0; c < d; c++) r[c] += g[c];
                else for (int c = 0; c < d; c++) r[c] = g[c];
            }
            if (h % grp != grp - 1) continue; /* dK, dV: after the group's last query head */
            for (int j = 0; j < sk; j++) {
                float *rk = dk + ((int64_t)j * B + b) * lddk + kvcol;
                float *rv = dv + ((int64_t)j * B + b) * lddv + kvcol;
                const float *gk = dK + (int64_t)j * d, *gv = dV + (int64_t)j * d;
                if (kv_add) {
                    for (int c = 0; c < d; c++) rk[c] += gk[c];
                    for (int c = 0; c < d; c++) rv[c] += gv[c];
                } else {
                    for (int c = 0; c < d; c++) rk[c] = gk[c];
                    for (int c = 0; c < d; c++) rv[c] = gv[c];
                }
            }
        }
    }
    free(Q);
    free(dO);
    free(dQ);
    free(K);
    free(KT);
    free(VT);
    free(dK);
    free(dV);
    free(Dr);
    free(L);
}

#ifdef STARWEAVE_USE_CUDA
static sw_cuda_attn cuda_attn(const sw_attn_args *a, int nkv)
{
    STARPU_ASSERT_MSG(a->d >= 1 && a->d <= SW_CUDA_ATT_DMAX,
                      "attention: the CUDA tile takes head dims 1..%d (d = %d)", SW_CUDA_ATT_DMAX, a->d);
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
    return c;
}

/* buffers as attn_fwd_cpu */
static void attn_fwd_cuda(void *buffers[], void *cl_arg)
{
    sw_attn_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int nkv = kv_heads(&a, buffers[1], buffers[2]);
    SW_CUDA_CHECK(sw_cuda_attn_fwd(SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]),
                                   SW_LD_OF(buffers[1]), SW_F32_OF(buffers[2]), SW_LD_OF(buffers[2]),
                                   SW_F32_OF(buffers[3]), SW_LD_OF(buffers[3]), SW_F32_OF(buffers[4]),
                                   SW_LD_OF(buffers[4]), cuda_attn(&a, nkv), starpu_cuda_get_local_stream()));
}

/* buffers as attn_bwd_cpu */
static void attn_bwd_cuda(void *buffers[], void *cl_arg)
{
    sw_attn_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int nkv = kv_heads(&a, buffers[1], buffers[2]);
    SW_CUDA_CHECK(sw_cuda_attn_bwd(
        SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]), SW_LD_OF(buffers[1]),
        SW_F32_OF(buffers[2]), SW_LD_OF(buffers[2]), SW_F32_OF(buffers[3]), SW_LD_OF(buffers[3]),
        SW_F32_OF(buffers[4]), SW_LD_OF(buffers[4]), SW_F32_OF(buffers[5]), SW_LD_OF(buffers[5]),
        SW_F32_OF(buffers[6]), SW_LD_OF(buffers[6]), SW_F32_OF(buffers[7]), SW_LD_OF(buffers[7]),
        SW_F32_OF(buffers[8]), SW_LD_OF(buffers[8]), cuda_attn(&a, nkv), starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL(attn_fwd_model, "sw_attn_fwd");
SW_PERFMODEL(attn_bwd_model, "sw_attn_bwd");

/* o/lse (forward) and dq/dk/dv (backward) modes depend on merge/accumulate/kv_accumulate. */
static struct starpu_codelet attn_fwd_cl = {
    .cpu_funcs = {attn_fwd_cpu},
    .cpu_funcs_name = {"attn_fwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {attn_fwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &attn_fwd_model,
    .name = "attn_fwd",
};

static struct starpu_codelet attn_bwd_cl = {
    .cpu_funcs = {attn_bwd_cpu},
    .cpu_funcs_name = {"attn_bwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {attn_bwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &attn_bwd_model,
    .name = "attn_bwd",
};

/* Caught at submission, where the caller's stack still says who passed them. */
static void check_args(const sw_attn_args *a)
{
    STARPU_ASSERT_MSG(a->nh > 0 && a->nkv >= 0 && (a->nkv == 0 || a->nh % a->nkv == 0),
                      "sw_attn: nh (%d) must be a positive multiple of nkv (%d)", a->nh, a->nkv);
}

static double attn_flops(const sw_attn_args *a, double per)
{
    double f = per * a->batch * a->nh * (double)a->sq * a->sk * a->d;
    return a->causal ? 0.5 * f : f;
}

void sw_attn_fwd(starpu_data_handle_t q, starpu_data_handle_t k, starpu_data_handle_t v,
                 starpu_data_handle_t o, starpu_data_handle_t lse, const sw_attn_args *a)
{
    sw_attn_args args = *a;
    check_args(a);
    enum starpu_data_access_mode out = a->merge ? STARPU_RW : STARPU_W;
    SW_INSERT(&attn_fwd_cl, STARPU_R, q, STARPU_R, k, STARPU_R, v, out, o, out, lse, STARPU_VALUE, &args,
              sizeof args, STARPU_FLOPS, attn_flops(a, 4.0));
}

void sw_attn_bwd(starpu_data_handle_t q, starpu_data_handle_t k, starpu_data_handle_t v,
                 starpu_data_handle_t o, starpu_data_handle_t lse, starpu_data_handle_t dout,
                 starpu_data_handle_t dq, starpu_data_handle_t dk, starpu_data_handle_t dv,
                 const sw_attn_args *a)
{
    sw_attn_args args = *a;
    check_args(a);
    enum starpu_data_access_mode qout = a->accumulate ? STARPU_RW : STARPU_W;
    enum starpu_data_access_mode kvout = a->accumulate || a->kv_accumulate ? STARPU_RW : STARPU_W;
    SW_INSERT(&attn_bwd_cl, STARPU_R, q, STARPU_R, k, STARPU_R, v, STARPU_R, o, STARPU_R, lse, STARPU_R,
              dout, qout, dq, kvout, dk, kvout, dv, STARPU_VALUE, &args, sizeof args, STARPU_FLOPS,
              attn_flops(a, 10.0));
}
