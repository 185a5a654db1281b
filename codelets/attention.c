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
 * transposed where the inner loop runs over keys; the transposed packs are
 * copied in blocks of 16 keys and zero-padded to whole key blocks plus 16,
 * so that their rows do not share cache sets when sk is a power of two),
 * then the queries are processed in blocks of ATT_BQ rows against key blocks
 * of ATT_BK keys: at most an ATT_BQ x ATT_BK block of scores exists at a
 * time. The block products (Q K^T and dO V^T; P V and dS K; dS^T Q and
 * P^T dO) go through register-blocked kernels in GNU C vectors (simd.h),
 * 4 rows (or keys) at a time over their common keys (or rows), each sum in
 * the order of the scalar loops; masked entries are never read as weights
 * except as zeros of rows with lse = -inf.
 *
 * Causal: key position k_pos0 + j is masked for query position q_pos0 + i
 * when it is larger, so a block's valid keys are a prefix; key blocks past
 * the query block's last position are skipped. Key padding: the keys of
 * batch element b at positions from key_len[b] on are masked too (the
 * valid keys stay a prefix; blocks past them are skipped, their dK, dV 0).
 * Fully masked query rows: o = 0, lse = -inf. Dropout (p > 0) applies to the normalised
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

#define ATT_WHO "attention"
#include "attention_common.h"

/* s[i*ATT_BK + jj] = sum_c A[i*d + c] * BT[c*ldb + jj] for i < nq and at least
 * jj < ncol(i) = valid_keys of row i (nondecreasing in i), at most
 * ATT_BK; other entries are left undefined. */
static void block_abt(float *restrict s, const float *restrict A, const float *restrict BT, int64_t ldb, int nq,
                      int causal, int64_t qpos0, int64_t kb, int nk, int64_t klen, int d)
{
    int i = 0;
    for (; i + 4 <= nq; i += 4) {
        const int ncol = valid_keys(causal, qpos0 + i + 3, kb, nk, klen); /* keys the group's last row sees */
        float *si = s + i * ATT_BK;
        const float *ai = A + (int64_t)i * d;
        switch ((ncol + SW_VL - 1) / SW_VL) {
        case 0: break;
        case 1: att_abt4(si, ATT_BK, ai, BT, ldb, d, 1, 1 * SW_VL); break;
        case 2: att_abt4(si, ATT_BK, ai, BT, ldb, d, 2, 2 * SW_VL); break;
        case 3: att_abt4(si, ATT_BK, ai, BT, ldb, d, 3, 3 * SW_VL); break;
        default: att_abt4(si, ATT_BK, ai, BT, ldb, d, ATT_NV, ATT_NV * SW_VL); break;
        }
    }
    for (; i < nq; i++) {
        const int ncol = valid_keys(causal, qpos0 + i, kb, nk, klen);
        const int nv = (ncol + SW_VL - 1) / SW_VL;
        att_abt1(s + i * ATT_BK, A + (int64_t)i * d, BT, ldb, d, nv, nv * SW_VL);
    }
}

/* Rows r < 4 of y[r*ldy + c] += sum_{t<n} w[r*wr + t*wt] * M[t*ldm + c], for the
 * nv*SW_NL columns from c = 0 (nv <= ATT_RN a constant after inlining): y is
 * held in registers over the whole sum, t in order. */
static inline __attribute__((always_inline)) void rows4_n(float *restrict y, int64_t ldy, const float *restrict w,
                                                          int64_t wr, int64_t wt, const float *restrict M,
                                                          int64_t ldm, int n, int nv)
{
    sw_vn acc[4][ATT_RN], m[ATT_RN];
    for (int r = 0; r < 4; r++)
        for (int v = 0; v < nv; v++) SW_NLOAD(acc[r][v], y + r * ldy + v * SW_NL);
    for (int t = 0; t < n; t++) {
        for (int v = 0; v < nv; v++) {
            SW_NLOAD(m[v], M + (int64_t)t * ldm + v * SW_NL);
            ATT_IN_REG(m[v]);
        }
        for (int r = 0; r < 4; r++) {
            const float wv = w[r * wr + t * wt];
            for (int v = 0; v < nv; v++) acc[r][v] += wv * m[v];
        }
    }
    for (int r = 0; r < 4; r++) memcpy(y + r * ldy, acc[r], sizeof(sw_vn) * (size_t)nv);
}

/* rows4_n over all d columns, ATT_RN native vectors at a time */
static void rows4(float *restrict y, int64_t ldy, const float *restrict w, int64_t wr, int64_t wt,
                  const float *restrict M, int64_t ldm, int n, int d)
{
    if (n <= 0) return;
    int c = 0;
    for (; c + ATT_RN * SW_NL <= d; c += ATT_RN * SW_NL) rows4_n(y + c, ldy, w, wr, wt, M + c, ldm, n, ATT_RN);
#if ATT_RN == 4
    switch ((d - c) / SW_NL) {
    case 3: rows4_n(y + c, ldy, w, wr, wt, M + c, ldm, n, 3); break;
    case 2: rows4_n(y + c, ldy, w, wr, wt, M + c, ldm, n, 2); break;
    case 1: rows4_n(y + c, ldy, w, wr, wt, M + c, ldm, n, 1); break;
    default: break;
    }
#else
    if (d - c >= SW_NL) rows4_n(y + c, ldy, w, wr, wt, M + c, ldm, n, 1);
#endif
    c += (d - c) / SW_NL * SW_NL;
    if (c < d) /* d not a multiple of SW_NL */
        for (int r = 0; r < 4; r++)
            for (int t = 0; t < n; t++) {
                const float wv = w[r * wr + t * wt];
                const float *mr = M + (int64_t)t * ldm;
                float *yr = y + r * ldy;
                for (int x = c; x < d; x++) yr[x] += wv * mr[x];
            }
}

/* One row: y[c] += sum_{t<n} w[t*wt] * M[t*ldm + c], c < d, t in order. */
static void row1(float *restrict y, const float *restrict w, int64_t wt, const float *restrict M, int64_t ldm, int n,
                 int d)
{
    if (n <= 0) return;
    int c = att_axpy_vec(y, w, wt, M, ldm, n, d);
    for (int t = 0; t < n && c < d; t++) {
        const float wv = w[(int64_t)t * wt];
        const float *mr = M + (int64_t)t * ldm;
        for (int x = c; x < d; x++) y[x] += wv * mr[x];
    }
}

/* Y[i*d + c] += sum_{jj < nv[i]} W[i*ATT_BK + jj] * M[jj*d + c] for i < nq (P V in
 * the forward, dS K in the backward): groups of 4 rows over their common
 * keys, then each row's own remaining keys; per row the keys in order. */
static void rows_times_block(float *restrict Y, const float *restrict W, const int *nv, const float *restrict M,
                             int nq, int d)
{
    int i = 0;
    for (; i + 4 <= nq; i += 4) {
        int n0 = nv[i];
        for (int r = 1; r < 4; r++) n0 = nv[i + r] < n0 ? nv[i + r] : n0;
        rows4(Y + (int64_t)i * d, d, W + i * ATT_BK, ATT_BK, 1, M, d, n0, d);
        for (int r = 0; r < 4; r++)
            row1(Y + (int64_t)(i + r) * d, W + (i + r) * ATT_BK + n0, 1, M + (int64_t)n0 * d, d, nv[i + r] - n0,
                 d);
    }
    for (; i < nq; i++) row1(Y + (int64_t)i * d, W + i * ATT_BK, 1, M, d, nv[i], d);
}

/* Y[jj*d + c] += sum_{f[jj] <= i < nq} W[i*ATT_BK + jj] * M[i*d + c] for jj < nk
 * (dS^T Q and P^T dO in the backward; f nondecreasing): groups of 4 keys over
 * their common rows, each key's own earlier rows first; per key the rows in order. */
static void block_t_times_rows(float *restrict Y, const float *restrict W, const int *f, const float *restrict M,
                               int nq, int nk, int d)
{
    int jj = 0;
    for (; jj + 4 <= nk; jj += 4) {
        const int f0 = f[jj + 3];
        for (int r = 0; r < 4; r++)
            row1(Y + (int64_t)(jj + r) * d, W + f[jj + r] * ATT_BK + jj + r, ATT_BK, M + (int64_t)f[jj + r] * d, d,
                 f0 - f[jj + r], d);
        rows4(Y + (int64_t)jj * d, d, W + f0 * ATT_BK + jj, 1, ATT_BK, M + (int64_t)f0 * d, d, nq - f0, d);
    }
    for (; jj < nk; jj++)
        row1(Y + (int64_t)jj * d, W + f[jj] * ATT_BK + jj, ATT_BK, M + (int64_t)f[jj] * d, d, nq - f[jj], d);
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

    const int64_t skp = padded_keys(sk);
    float *Q = att_alloc((size_t)sq * d), *KT = att_alloc((size_t)skp * d), *V = att_alloc((size_t)sk * d);
    float *acc = att_alloc((size_t)ATT_BQ * d);
    float S[ATT_BQ * ATT_BK], m[ATT_BQ], l[ATT_BQ], Z[ATT_BK];
    int NV[ATT_BQ];

    for (int b = 0; b < B; b++) {
        const int64_t klen = key_len(&a, b);
        for (int h = 0; h < a.nh; h++) {
            const int64_t col = (int64_t)h * d;
            if (h % grp == 0) { /* first query head of a K/V group */
                const int64_t kvcol = (int64_t)(h / grp) * d;
                pack_trans(KT, skp, k, ldk, sk, B, b, kvcol, d);
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
                    if ((a.causal && kb > qlast) || kb >= klen) break; /* later blocks are masked too */
                    block_abt(S, Q + (int64_t)i0 * d, KT + j0, skp, nq, a.causal, a.q_pos0 + i0, kb, nk, klen, d);
                    for (int i = 0; i < nq; i++) {
                        const int64_t qpos = a.q_pos0 + i0 + i;
                        const int nv = NV[i] = valid_keys(a.causal, qpos, kb, nk, klen);
                        if (nv == 0) continue;
                        float *s = S + i * ATT_BK;
                        const float bm = sw_row_max(s, nv);
                        const float mnew = bm > m[i] ? bm : m[i];
                        const float alpha = expf(m[i] - mnew); /* 0 when m was -inf */
                        const float sum = att_exp_sum(s, nv, mnew);
                        l[i] = l[i] * alpha + sum;
                        m[i] = mnew;
                        if (drop) {
                            drop_mask(Z, nv, &a, drop_index(&a, b, h, qpos, kb), inv_keep);
                            for (int jj = 0; jj < nv; jj++) s[jj] *= Z[jj];
                        }
                        float *restrict ac = acc + (int64_t)i * d;
                        if (alpha != 1.0f)
                            for (int c = 0; c < d; c++) ac[c] *= alpha;
                    }
                    rows_times_block(acc, S, NV, V + (int64_t)j0 * d, nq, d); /* acc += P V */
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
    const int64_t skp = padded_keys(sk);
    float *Q = att_alloc(nqd), *dO = att_alloc(nqd), *dQ = att_alloc(nqd);
    float *K = att_alloc(nkd), *KT = att_alloc((size_t)skp * d), *VT = att_alloc((size_t)skp * d);
    float *dK = att_alloc(nkd), *dV = att_alloc(nkd);
    float *Dr = att_alloc((size_t)sq), *L = att_alloc((size_t)sq);
    float S[ATT_BQ * ATT_BK], P2[ATT_BQ * ATT_BK], Z[ATT_BK];
    int NV[ATT_BQ], F[ATT_BK];

    for (int b = 0; b < B; b++) {
        const int64_t klen = key_len(&a, b);
        for (int h = 0; h < a.nh; h++) {
            const int64_t col = (int64_t)h * d, kvcol = (int64_t)(h / grp) * d;
            if (h % grp == 0) { /* first query head of a K/V group: dK, dV sum over the group */
                pack_rows(K, k, ldk, sk, B, b, kvcol, d, 1.0f);
                pack_trans(KT, skp, k, ldk, sk, B, b, kvcol, d);
                pack_trans(VT, skp, v, ldv, sk, B, b, kvcol, d);
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
                const int64_t qb = a.q_pos0 + i0, qlast = qb + nq - 1;
                for (int j0 = 0; j0 < sk; j0 += ATT_BK) {
                    const int nk = sk - j0 < ATT_BK ? sk - j0 : ATT_BK;
                    const int64_t kb = a.k_pos0 + j0;
                    if ((a.causal && kb > qlast) || kb >= klen) break; /* dK, dV of the rest stay 0 */
                    block_abt(S, Q + (int64_t)i0 * d, KT + j0, skp, nq, a.causal, qb, kb, nk, klen, d);   /* Q K^T */
                    block_abt(P2, dO + (int64_t)i0 * d, VT + j0, skp, nq, a.causal, qb, kb, nk, klen, d); /* dO V^T */
                    /* S becomes scale * dS, P2 the dropped probabilities; masked entries 0 */
                    for (int i = 0; i < nq; i++) {
                        const int64_t qpos = qb + i;
                        const float li = L[i0 + i], Di = Dr[i0 + i];
                        const int nv = NV[i] = li == -INFINITY ? 0 : valid_keys(a.causal, qpos, kb, nk, klen);
                        float *restrict s = S + i * ATT_BK, *restrict dp = P2 + i * ATT_BK;
                        if (drop && nv > 0) {
                            drop_mask(Z, nv, &a, drop_index(&a, b, h, qpos, kb), inv_keep);
                            for (int jj = 0; jj < nv; jj++) {
                                const float p = sw_expf(scale * s[jj] - li), z = Z[jj];
                                s[jj] = scale * p * (dp[jj] * z - Di);
                                dp[jj] = p * z;
                            }
                        } else {
                            for (int jj = 0; jj < nv; jj++) {
                                const float p = sw_expf(scale * s[jj] - li);
                                s[jj] = scale * p * (dp[jj] - Di);
                                dp[jj] = p;
                            }
                        }
                        memset(s + nv, 0, sizeof(float) * (size_t)(nk - nv));
                        memset(dp + nv, 0, sizeof(float) * (size_t)(nk - nv));
                    }
                    for (int jj = 0; jj < nk; jj++) F[jj] = first_query(a.causal, qb, kb + jj, nq, klen);
                    rows_times_block(dQ + (int64_t)i0 * d, S, NV, K + (int64_t)j0 * d, nq, d); /* dQ += dS K */
                    block_t_times_rows(dK + (int64_t)j0 * d, S, F, Q + (int64_t)i0 * d, nq, nk, d); /* dS^T Q */
                    block_t_times_rows(dV + (int64_t)j0 * d, P2, F, dO + (int64_t)i0 * d, nq, nk, d); /* P^T dO */
                }
            }
            /* write back: = (W) or += (RW) */
            unpack_rows(dq, lddq, dQ, sq, B, b, col, d, a.accumulate);
            if (h % grp != grp - 1) continue; /* dK, dV: after the group's last query head */
            unpack_rows(dk, lddk, dK, sk, B, b, kvcol, d, kv_add);
            unpack_rows(dv, lddv, dV, sk, B, b, kvcol, d, kv_add);
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

/* codelet_util.h's SW_PERFMODEL_BY_WORK (the attention tiles': here and attention_probs.c): the buffers'
 * footprint and the task's FLOPs (whole numbers) */
uint32_t sw_work_footprint(struct starpu_task *task)
{
    uint64_t flops = (uint64_t)llround(task->flops);
    return starpu_hash_crc32c_be_n(&flops, sizeof flops, starpu_task_data_footprint(task));
}

SW_PERFMODEL_BY_WORK(attn_fwd_model, "sw_attn_fwd");
SW_PERFMODEL_BY_WORK(attn_bwd_model, "sw_attn_bwd");

double sw_attn_visible_pairs(int64_t q_pos0, int64_t sq, int64_t k_pos0, int64_t sk, int causal)
{
    if (!causal) return (double)sq * sk;
    double n = 0;
    for (int64_t q = q_pos0; q < q_pos0 + sq; q++) {
        int64_t v = q - k_pos0 + 1; /* keys k_pos0 .. q */
        n += (double)(v < 0 ? 0 : v > sk ? sk : v);
    }
    return n;
}

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
    check_key_padding("sw_attn", a);
    STARPU_ASSERT_MSG(a->nh > 0 && a->nkv >= 0 && (a->nkv == 0 || a->nh % a->nkv == 0),
                      "sw_attn: nh (%d) must be a positive multiple of nkv (%d)", a->nh, a->nkv);
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
