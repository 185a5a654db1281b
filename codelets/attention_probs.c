/* Attention without recomputation (Megatron's "--recompute none"): the
 * forward materialises the softmax probabilities and saves them, the
 * backward reads them instead of recomputing Q K^T and the exponentials.
 * One task per head group; nothing parallel inside.
 *
 * Layout, masking, grouped-query attention and the dropout mask are those of
 * the flash tile (attention.c): rows in [s, b] order, head j of the tile in
 * columns j*d .. j*d+d-1 (strided column tiles allowed), query head j reads
 * K/V head j / (nh / nkv), the dropout bit of (query, key) drawn from the
 * same counter, so both paths drop the same entries (the helpers are shared:
 * attention_common.h). probs[batch*nh*sq, sk] holds P before dropout, row
 * (b*nh + j)*sq + i; masked keys (causal, or past the sequence's key_len
 * with key padding) are 0.
 *
 * For each (batch, head) the slices are packed into contiguous buffers (K
 * transposed for the scores, V transposed for dO V^T, both zero-padded to
 * whole key blocks; K/V once per group). Queries go in blocks of ATT_BQ
 * rows against key blocks of ATT_BK keys, over the key range that the
 * block's last query can see.
 *   forward:  S = scale Q K^T (into the probs rows), P = softmax(S) in
 *             place, O = D(P) V, lse = max + log(sum)
 *   backward: dP = D(dO V^T), dV += D(P)^T dO, r = rowsum(dP o P)   (pass 1)
 *             dS = P o (dP - r), dQ += scale dS K, dK += scale dS^T Q (pass 2)
 * where D() drops and rescales by 1/(1-p). The two passes over a query
 * block keep its dP rows (ATT_BQ x sk floats). Unlike the flash tile, whose
 * scores live one block at a time, the products here are whole blocks, so
 * they go through two register-blocked kernels in GNU C vectors (simd.h):
 * block_abt (scores, dO V^T) and axpy_rows (the four products with a d-wide
 * result, accumulated in registers). CUDA: codelets/cuda/attention_probs.cu,
 * the same formulas (and dropout bits) by query and key tiles. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codelet_util.h"
#include "simd.h"
#include "philox.h"
#include "starweave/ops.h"

#define ATT_WHO "attention_probs"
#include "attention_common.h"

/* s[i*lds + jj] = sum_c A[i*d + c] * BT[c*ldb + jj], i < nq, jj < nk <= ATT_BK. Reads
 * ATT_BK columns of BT from column 0 (padded packs). Register blocks of 4 rows
 * (att_abt4): per c, each load of BT feeds 4 FMAs. */
static void block_abt(float *restrict s, int64_t lds, const float *restrict A, const float *restrict BT,
                      int64_t ldb, int nq, int nk, int d)
{
    int i = 0;
    for (; i + 4 <= nq; i += 4) att_abt4(s + (int64_t)i * lds, lds, A + (int64_t)i * d, BT, ldb, d, ATT_NV, nk);
    for (; i < nq; i++) att_abt1(s + (int64_t)i * lds, A + (int64_t)i * d, BT, ldb, d, ATT_NV, nk);
}

/* y[c] += sum_{j<n} w[j*ldw] * M[j*ldm + c], c < d: y is held in registers
 * (4 vectors at a time) over the whole sum. */
static void axpy_rows(float *restrict y, const float *restrict w, int64_t ldw, const float *restrict M, int64_t ldm,
                      int n, int d)
{
    const int c = att_axpy_vec(y, w, ldw, M, ldm, n, d);
    if (c < d) { /* d not a multiple of SW_NL */
        float t[SW_NL];
        const int nt = d - c;
        memcpy(t, y + c, sizeof(float) * (size_t)nt);
        for (int j = 0; j < n; j++) {
            const float wj = w[(int64_t)j * ldw];
            const float *mr = M + (int64_t)j * ldm + c;
            for (int x = 0; x < nt; x++) t[x] += wj * mr[x];
        }
        memcpy(y + c, t, sizeof(float) * (size_t)nt);
    }
}

/* sum_j x[j] * y[j] */
static inline float vdot(const float *x, const float *y, int n)
{
    sw_vf acc = {0}, vx, vy;
    int j = 0;
    for (; j + SW_VL <= n; j += SW_VL) {
        SW_VLOAD(vx, x + j);
        SW_VLOAD(vy, y + j);
        acc += vx * vy;
    }
    float s = sw_vsum(&acc);
    for (; j < n; j++) s += x[j] * y[j];
    return s;
}

static void check_probs_buf(const sw_attn_args *a, void *pbuf)
{
    STARPU_ASSERT_MSG(SW_ROWS_OF(pbuf) == (int64_t)a->batch * a->nh * a->sq && SW_COLS_OF(pbuf) == a->sk,
                      "attention_probs: probs must be [batch*nh*sq, sk] = [%lld, %d] (got [%lld, %lld])",
                      (long long)a->batch * a->nh * a->sq, a->sk, (long long)SW_ROWS_OF(pbuf),
                      (long long)SW_COLS_OF(pbuf));
}

/* Keys of the tile that the query block ending at position qlast can see
 * (in a sequence of klen keys). */
static inline int key_extent(const sw_attn_args *a, int64_t qlast, int64_t klen)
{
    return valid_keys(a->causal, qlast, a->k_pos0, a->sk, klen);
}

/* buffers: q, k, v (R); o, lse, probs (W) */
static void attn_probs_fwd_cpu(void *buffers[], void *cl_arg)
{
    sw_attn_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const float *q = SW_F32_OF(buffers[0]), *k = SW_F32_OF(buffers[1]), *v = SW_F32_OF(buffers[2]);
    float *o = SW_F32_OF(buffers[3]), *lse = SW_F32_OF(buffers[4]), *probs = SW_F32_OF(buffers[5]);
    const int64_t ldq = SW_LD_OF(buffers[0]), ldk = SW_LD_OF(buffers[1]), ldv = SW_LD_OF(buffers[2]),
                  ldo = SW_LD_OF(buffers[3]), ldl = SW_LD_OF(buffers[4]), ldp = SW_LD_OF(buffers[5]);
    const int B = a.batch, d = a.d, sq = a.sq, sk = a.sk;
    const int64_t skp = padded_keys(sk);
    const int nkv = kv_heads(&a, buffers[1], buffers[2]), grp = a.nh / nkv;
    check_probs_buf(&a, buffers[5]);
    const int drop = a.dropout > 0.0f;
    const float inv_keep = drop ? 1.0f / (1.0f - a.dropout) : 1.0f;

    float *Q = att_alloc((size_t)sq * d), *KT = att_alloc((size_t)skp * d), *V = att_alloc((size_t)sk * d);
    float *acc = att_alloc((size_t)ATT_BQ * d);
    float Z[ATT_BK];

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
            float *Ph = probs + ((int64_t)b * a.nh + h) * sq * ldp;
            for (int i0 = 0; i0 < sq; i0 += ATT_BQ) {
                const int nq = sq - i0 < ATT_BQ ? sq - i0 : ATT_BQ;
                const int kend = key_extent(&a, a.q_pos0 + i0 + nq - 1, klen);
                /* scaled scores of the keys the block can see, straight into the probs rows */
                for (int j0 = 0; j0 < kend; j0 += ATT_BK) {
                    const int nk = kend - j0 < ATT_BK ? kend - j0 : ATT_BK;
                    block_abt(Ph + (int64_t)i0 * ldp + j0, ldp, Q + (int64_t)i0 * d, KT + j0, skp, nq, nk, d);
                }
                /* softmax in place over each row's visible keys; the rest 0 */
                for (int i = 0; i < nq; i++) {
                    const int64_t row = (int64_t)(i0 + i) * B + b;
                    float *p = Ph + (int64_t)(i0 + i) * ldp;
                    const int nv = valid_keys(a.causal, a.q_pos0 + i0 + i, a.k_pos0, sk, klen);
                    if (nv == 0) {
                        lse[row * ldl + h] = -INFINITY;
                        memset(p, 0, sizeof(float) * (size_t)sk);
                        continue;
                    }
                    const float m = sw_row_max(p, nv);
                    const float sum = att_exp_sum(p, nv, m);
                    const float inv = 1.0f / sum;
                    for (int j = 0; j < nv; j++) p[j] *= inv;
                    memset(p + nv, 0, sizeof(float) * (size_t)(sk - nv));
                    lse[row * ldl + h] = m + logf(sum);
                }
                /* O = D(P) V, key block by key block (a V block is reused by every row) */
                memset(acc, 0, sizeof(float) * (size_t)nq * d);
                for (int j0 = 0; j0 < kend; j0 += ATT_BK) {
                    const int nk = kend - j0 < ATT_BK ? kend - j0 : ATT_BK;
                    const int64_t kb = a.k_pos0 + j0;
                    for (int i = 0; i < nq; i++) {
                        const int64_t qpos = a.q_pos0 + i0 + i;
                        const int nv = valid_keys(a.causal, qpos, kb, nk, klen);
                        if (nv == 0) continue;
                        const float *pr = Ph + (int64_t)(i0 + i) * ldp + j0;
                        if (drop) {
                            drop_mask(Z, nv, &a, drop_index(&a, b, h, qpos, kb), inv_keep);
                            for (int jj = 0; jj < nv; jj++) Z[jj] *= pr[jj];
                            pr = Z;
                        }
                        axpy_rows(acc + (int64_t)i * d, pr, 1, V + (int64_t)j0 * d, d, nv, d);
                    }
                }
                for (int i = 0; i < nq; i++) {
                    float *orow = o + ((int64_t)(i0 + i) * B + b) * ldo + col;
                    memcpy(orow, acc + (int64_t)i * d, sizeof(float) * (size_t)d);
                }
            }
        }
    }
    free(Q);
    free(KT);
    free(V);
    free(acc);
}

/* buffers: q, k, v, probs, dout (R); dq (W, or RW when accumulate); dk, dv (W, or RW when
 * accumulate or kv_accumulate) */
static void attn_probs_bwd_cpu(void *buffers[], void *cl_arg)
{
    sw_attn_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const float *q = SW_F32_OF(buffers[0]), *k = SW_F32_OF(buffers[1]), *v = SW_F32_OF(buffers[2]);
    const float *probs = SW_F32_OF(buffers[3]), *dout = SW_F32_OF(buffers[4]);
    float *dq = SW_F32_OF(buffers[5]), *dk = SW_F32_OF(buffers[6]), *dv = SW_F32_OF(buffers[7]);
    const int64_t ldq = SW_LD_OF(buffers[0]), ldk = SW_LD_OF(buffers[1]), ldv = SW_LD_OF(buffers[2]),
                  ldp = SW_LD_OF(buffers[3]), lddo = SW_LD_OF(buffers[4]), lddq = SW_LD_OF(buffers[5]),
                  lddk = SW_LD_OF(buffers[6]), lddv = SW_LD_OF(buffers[7]);
    const int B = a.batch, d = a.d, sq = a.sq, sk = a.sk;
    const int64_t skp = padded_keys(sk);
    const int nkv = kv_heads(&a, buffers[1], buffers[2]), grp = a.nh / nkv;
    check_probs_buf(&a, buffers[3]);
    const int kv_add = a.accumulate || a.kv_accumulate;
    const int drop = a.dropout > 0.0f;
    const float inv_keep = drop ? 1.0f / (1.0f - a.dropout) : 1.0f;
    const float scale = a.scale;

    const size_t nqd = (size_t)sq * d, nkd = (size_t)sk * d;
    float *Q = att_alloc(nqd), *dO = att_alloc(nqd), *dQ = att_alloc(nqd);
    float *K = att_alloc(nkd), *VT = att_alloc((size_t)skp * d), *dK = att_alloc(nkd), *dV = att_alloc(nkd);
    float *G = att_alloc((size_t)ATT_BQ * skp); /* dP of a query block's rows */
    float *W = att_alloc((size_t)ATT_BQ * ATT_BK); /* D(P), then dS, of a block; masked entries 0 */
    float r[ATT_BQ], Z[ATT_BK];

    for (int b = 0; b < B; b++) {
        const int64_t klen = key_len(&a, b);
        for (int h = 0; h < a.nh; h++) {
            const int64_t col = (int64_t)h * d, kvcol = (int64_t)(h / grp) * d;
            if (h % grp == 0) { /* first query head of a K/V group: dK, dV sum over the group */
                pack_rows(K, k, ldk, sk, B, b, kvcol, d, 1.0f);
                pack_trans(VT, skp, v, ldv, sk, B, b, kvcol, d);
                memset(dK, 0, sizeof(float) * nkd);
                memset(dV, 0, sizeof(float) * nkd);
            }
            pack_rows(Q, q, ldq, sq, B, b, col, d, 1.0f);
            pack_rows(dO, dout, lddo, sq, B, b, col, d, 1.0f);
            memset(dQ, 0, sizeof(float) * nqd);
            const float *Ph = probs + ((int64_t)b * a.nh + h) * sq * ldp;
            for (int i0 = 0; i0 < sq; i0 += ATT_BQ) {
                const int nq = sq - i0 < ATT_BQ ? sq - i0 : ATT_BQ;
                const int64_t qb = a.q_pos0 + i0;
                const int kend = key_extent(&a, qb + nq - 1, klen);
                for (int i = 0; i < nq; i++) r[i] = 0.0f;
                /* pass 1: dP = D(dO V^T); dV += D(P)^T dO; r = rowsum(dP o P) */
                for (int j0 = 0; j0 < kend; j0 += ATT_BK) {
                    const int nk = kend - j0 < ATT_BK ? kend - j0 : ATT_BK;
                    const int64_t kb = a.k_pos0 + j0;
                    block_abt(G + j0, skp, dO + (int64_t)i0 * d, VT + j0, skp, nq, nk, d);
                    for (int i = 0; i < nq; i++) {
                        const int nv = valid_keys(a.causal, qb + i, kb, nk, klen);
                        const float *pr = Ph + (int64_t)(i0 + i) * ldp + j0;
                        float *g = G + (int64_t)i * skp + j0, *wr = W + i * ATT_BK;
                        if (drop && nv > 0) {
                            drop_mask(Z, nv, &a, drop_index(&a, b, h, qb + i, kb), inv_keep);
                            for (int jj = 0; jj < nv; jj++) {
                                g[jj] *= Z[jj];
                                wr[jj] = pr[jj] * Z[jj];
                            }
                        } else {
                            memcpy(wr, pr, sizeof(float) * (size_t)nv);
                        }
                        memset(wr + nv, 0, sizeof(float) * (size_t)(nk - nv));
                        r[i] += vdot(g, pr, nv);
                    }
                    for (int jj = 0; jj < nk; jj++) {
                        const int f = first_query(a.causal, qb, kb + jj, nq, klen);
                        axpy_rows(dV + (int64_t)(j0 + jj) * d, W + f * ATT_BK + jj, ATT_BK,
                                  dO + (int64_t)(i0 + f) * d, d, nq - f, d);
                    }
                }
                /* pass 2: scale dS = scale P o (dP - r); dQ += scale dS K; dK += scale dS^T Q */
                for (int j0 = 0; j0 < kend; j0 += ATT_BK) {
                    const int nk = kend - j0 < ATT_BK ? kend - j0 : ATT_BK;
                    const int64_t kb = a.k_pos0 + j0;
                    for (int i = 0; i < nq; i++) {
                        const int nv = valid_keys(a.causal, qb + i, kb, nk, klen);
                        const float *pr = Ph + (int64_t)(i0 + i) * ldp + j0;
                        const float *g = G + (int64_t)i * skp + j0;
                        float *wr = W + i * ATT_BK;
                        const float ri = r[i];
                        for (int jj = 0; jj < nv; jj++) wr[jj] = scale * pr[jj] * (g[jj] - ri);
                        memset(wr + nv, 0, sizeof(float) * (size_t)(nk - nv));
                        axpy_rows(dQ + (int64_t)(i0 + i) * d, wr, 1, K + (int64_t)j0 * d, d, nv, d);
                    }
                    for (int jj = 0; jj < nk; jj++) {
                        const int f = first_query(a.causal, qb, kb + jj, nq, klen);
                        axpy_rows(dK + (int64_t)(j0 + jj) * d, W + f * ATT_BK + jj, ATT_BK,
                                  Q + (int64_t)(i0 + f) * d, d, nq - f, d);
                    }
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
    free(VT);
    free(dK);
    free(dV);
    free(G);
    free(W);
}

#ifdef STARWEAVE_USE_CUDA
/* buffers as attn_probs_fwd_cpu */
static void attn_probs_fwd_cuda(void *buffers[], void *cl_arg)
{
    sw_attn_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int nkv = kv_heads(&a, buffers[1], buffers[2]);
    check_probs_buf(&a, buffers[5]);
    SW_CUDA_CHECK(sw_cuda_attn_probs_fwd(
        SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]), SW_LD_OF(buffers[1]),
        SW_F32_OF(buffers[2]), SW_LD_OF(buffers[2]), SW_F32_OF(buffers[3]), SW_LD_OF(buffers[3]),
        SW_F32_OF(buffers[4]), SW_LD_OF(buffers[4]), SW_F32_OF(buffers[5]), SW_LD_OF(buffers[5]), cuda_attn(&a, nkv),
        starpu_cuda_get_local_stream()));
}

/* buffers as attn_probs_bwd_cpu */
static void attn_probs_bwd_cuda(void *buffers[], void *cl_arg)
{
    sw_attn_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const int nkv = kv_heads(&a, buffers[1], buffers[2]);
    check_probs_buf(&a, buffers[3]);
    SW_CUDA_CHECK(sw_cuda_attn_probs_bwd(
        SW_F32_OF(buffers[0]), SW_LD_OF(buffers[0]), SW_F32_OF(buffers[1]), SW_LD_OF(buffers[1]),
        SW_F32_OF(buffers[2]), SW_LD_OF(buffers[2]), SW_F32_OF(buffers[3]), SW_LD_OF(buffers[3]),
        SW_F32_OF(buffers[4]), SW_LD_OF(buffers[4]), SW_F32_OF(buffers[5]), SW_LD_OF(buffers[5]),
        SW_F32_OF(buffers[6]), SW_LD_OF(buffers[6]), SW_F32_OF(buffers[7]), SW_LD_OF(buffers[7]), cuda_attn(&a, nkv),
        starpu_cuda_get_local_stream()));
}
#endif

SW_PERFMODEL_BY_WORK(attn_probs_fwd_model, "sw_attn_probs_fwd");
SW_PERFMODEL_BY_WORK(attn_probs_bwd_model, "sw_attn_probs_bwd");

/* Backward: the dq/dk/dv modes depend on accumulate/kv_accumulate. */
static struct starpu_codelet attn_probs_fwd_cl = {
    .cpu_funcs = {attn_probs_fwd_cpu},
    .cpu_funcs_name = {"attn_probs_fwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {attn_probs_fwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 6,
    .modes = {STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_W, STARPU_W},
    .model = &attn_probs_fwd_model,
    .name = "attn_probs_fwd",
};

static struct starpu_codelet attn_probs_bwd_cl = {
    .cpu_funcs = {attn_probs_bwd_cpu},
    .cpu_funcs_name = {"attn_probs_bwd_cpu"},
#ifdef STARWEAVE_USE_CUDA
    .cuda_funcs = {attn_probs_bwd_cuda},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &attn_probs_bwd_model,
    .name = "attn_probs_bwd",
};

/* Caught at submission, where the caller's stack still says who passed them. */
static void check_args(const char *fn, const sw_attn_args *a, starpu_data_handle_t probs)
{
    if (a->merge) {
        fprintf(stderr,
                "starweave: %s: merge must be 0: the saved-probabilities attention covers the whole key "
                "range in one task (ring = 1); Ring attention uses sw_attn_fwd/sw_attn_bwd\n",
                fn);
        abort();
    }
    STARPU_ASSERT_MSG(a->nh > 0 && a->nkv >= 0 && (a->nkv == 0 || a->nh % a->nkv == 0),
                      "%s: nh (%d) must be a positive multiple of nkv (%d)", fn, a->nh, a->nkv);
    check_key_padding(fn, a);
    STARPU_ASSERT_MSG(starpu_matrix_get_ny(probs) == (uint32_t)((int64_t)a->batch * a->nh * a->sq) &&
                          starpu_matrix_get_nx(probs) == (uint32_t)a->sk,
                      "%s: probs must be [batch*nh*sq, sk] = [%lld, %d] (got [%u, %u])", fn,
                      (long long)a->batch * a->nh * a->sq, a->sk, (unsigned)starpu_matrix_get_ny(probs),
                      (unsigned)starpu_matrix_get_nx(probs));
}

void sw_attn_probs_fwd(starpu_data_handle_t q, starpu_data_handle_t k, starpu_data_handle_t v,
                       starpu_data_handle_t o, starpu_data_handle_t lse, starpu_data_handle_t probs,
                       const sw_attn_args *a)
{
    sw_attn_args args = *a;
    check_args("sw_attn_probs_fwd", a, probs);
    /* Q K^T and P V: 2 + 2 per (query, key, dim) */
    SW_INSERT(&attn_probs_fwd_cl, STARPU_R, q, STARPU_R, k, STARPU_R, v, STARPU_W, o, STARPU_W, lse, STARPU_W,
              probs, STARPU_VALUE, &args, sizeof args, STARPU_FLOPS, attn_flops(a, 4.0));
}

void sw_attn_probs_bwd(starpu_data_handle_t q, starpu_data_handle_t k, starpu_data_handle_t v,
                       starpu_data_handle_t probs, starpu_data_handle_t dout,
                       starpu_data_handle_t dq, starpu_data_handle_t dk, starpu_data_handle_t dv,
                       const sw_attn_args *a)
{
    sw_attn_args args = *a;
    check_args("sw_attn_probs_bwd", a, probs);
    enum starpu_data_access_mode qout = a->accumulate ? STARPU_RW : STARPU_W;
    enum starpu_data_access_mode kvout = a->accumulate || a->kv_accumulate ? STARPU_RW : STARPU_W;
    /* dO V^T, D(P)^T dO, dS K, dS^T Q: 8 per (query, key, dim); no Q K^T */
    SW_INSERT(&attn_probs_bwd_cl, STARPU_R, q, STARPU_R, k, STARPU_R, v, STARPU_R, probs, STARPU_R, dout, qout,
              dq, kvout, dk, kvout, dv, STARPU_VALUE, &args, sizeof args, STARPU_FLOPS, attn_flops(a, 8.0));
}
