/* Flash-style attention tile kernels (codelets/attention.c has the layout,
 * the masking and the merge rule; the formulas here are the same).
 *
 * Forward: one thread per query row, a block of T query rows of one (batch,
 * head); the block walks the keys in tiles of T rows of K and V staged in
 * shared memory, with the online softmax (running max m, sum l, output
 * accumulator) per query, as the CPU does per key block. Only a T x T block
 * of scores exists at a time, in registers.
 *
 * Backward (FlashAttention-2 form, P recomputed from lse): dQ by one thread
 * per query row over the key tiles; dK and dV by one thread per key row over
 * the query tiles of every query head of its K/V group (GQA), with D = rowsum
 * (dO * O) recomputed per query tile. Each output element is summed by one
 * thread, so there are no atomics and the results do not depend on the
 * launch order.
 *
 * T = min(64, 6144 / (d + 1)) rows per tile keeps two tiles of d floats
 * (and two of T floats) within 48 KiB of shared memory; the per-thread rows (q, acc, ...) are arrays of
 * SW_CUDA_ATT_DMAX floats. Key padding (key_len) masks like the causal rule:
 * each row's valid keys a prefix, tiles past them skipped. */
#include "cuda_util.cuh"
#include "fastmath.h"
#include "philox.h"
#include "attention_common.cuh"

#define ATT_TMAX 64

static int att_tile(int d)
{
    int t = 6144 / (d > 0 ? d + 1 : 1);
    return t > ATT_TMAX ? ATT_TMAX : (t < 1 ? 1 : t);
}

/* grid (query tiles, nh, batch), T threads */
__global__ void attn_fwd_kernel(const float *q, int64_t ldq, const float *k, int64_t ldk, const float *v, int64_t ldv,
                                float *o, int64_t ldo, float *lse, int64_t ldl, sw_cuda_attn a, int T)
{
    SW_DYN_SHARED(float, smem);
    float *Ks = smem, *Vs = smem + (size_t)T * a.d;
    const int b = blockIdx.z, h = blockIdx.y, d = a.d, B = a.batch;
    const int grp = a.nh / a.nkv;
    const int64_t col = (int64_t)h * d, kvcol = (int64_t)(h / grp) * d;
    const int i0 = blockIdx.x * T, i = i0 + threadIdx.x;
    const int active = i < a.sq;
    const int nq = a.sq - i0 < T ? a.sq - i0 : T;
    const int64_t qpos = a.q_pos0 + i, qlast = a.q_pos0 + i0 + nq - 1, klen = att_key_len(a, b);
    const int drop = a.dropout > 0.0f;

    float qr[SW_CUDA_ATT_DMAX], acc[SW_CUDA_ATT_DMAX], s[ATT_TMAX];
    const int64_t row = (int64_t)i * B + b;
    for (int c = 0; c < d; c++) {
        qr[c] = active ? a.scale * q[row * ldq + col + c] : 0.0f;
        acc[c] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;

    for (int j0 = 0; j0 < a.sk; j0 += T) {
        const int nk = a.sk - j0 < T ? a.sk - j0 : T;
        const int64_t kb = a.k_pos0 + j0;
        if ((a.causal && kb > qlast) || kb >= klen) break; /* later tiles are masked too (uniform over the block) */
        att_stage(Ks, k, ldk, j0, nk, B, b, kvcol, d);
        att_stage(Vs, v, ldv, j0, nk, B, b, kvcol, d);
        __syncthreads();
        const int nv = active ? att_valid_keys(a.causal, qpos, kb, nk, klen) : 0;
        if (nv > 0) {
            for (int jj = 0; jj < nv; jj++) {
                const float *kr = Ks + (size_t)jj * d;
                float t = 0.0f;
                for (int c = 0; c < d; c++) t += qr[c] * kr[c];
                s[jj] = t;
            }
            float bm = s[0];
            for (int jj = 1; jj < nv; jj++) bm = s[jj] > bm ? s[jj] : bm;
            const float mnew = bm > m ? bm : m;
            const float alpha = expf(m - mnew); /* 0 when m was -inf */
            float sum = 0.0f;
            for (int jj = 0; jj < nv; jj++) {
                s[jj] = sw_expf(s[jj] - mnew);
                sum += s[jj];
            }
            l = l * alpha + sum;
            m = mnew;
            if (drop)
                for (int jj = 0; jj < nv; jj++)
                    s[jj] = sw_dropout_keep(a.seed, a.step, a.layer, a.op, att_drop_index(a, b, h, qpos, kb + jj),
                                            a.dropout)
                                ? s[jj] * a.inv_keep
                                : 0.0f;
            if (alpha != 1.0f)
                for (int c = 0; c < d; c++) acc[c] *= alpha;
            for (int jj = 0; jj < nv; jj++) {
                const float pj = s[jj];
                const float *vr = Vs + (size_t)jj * d;
                for (int c = 0; c < d; c++) acc[c] += pj * vr[c];
            }
        }
        __syncthreads();
    }
    if (!active) return;

    /* finalise: o_t = acc / l, lse_t = m + log l; write or merge */
    float *orow = o + row * ldo + col, *lp = lse + row * ldl + h;
    const int empty = !(l > 0.0f);
    const float lt = empty ? -INFINITY : m + logf(l);
    const float w = empty ? 0.0f : 1.0f / l;
    if (!a.merge) {
        *lp = lt;
        for (int c = 0; c < d; c++) orow[c] = w * acc[c];
        return;
    }
    const float l1 = *lp;
    if (empty) return; /* merging an empty tile changes nothing */
    if (l1 == -INFINITY) { /* existing row empty: take the tile */
        *lp = lt;
        for (int c = 0; c < d; c++) orow[c] = w * acc[c];
        return;
    }
    const float mx = l1 > lt ? l1 : lt;
    const float ln = mx + logf(expf(l1 - mx) + expf(lt - mx));
    const float w1 = expf(l1 - ln), w2 = expf(lt - ln) * w;
    for (int c = 0; c < d; c++) orow[c] = w1 * orow[c] + w2 * acc[c];
    *lp = ln;
}

/* dQ: grid (query tiles, nh, batch), T threads, one query row each */
__global__ void attn_bwd_dq_kernel(const float *q, int64_t ldq, const float *k, int64_t ldk, const float *v,
                                   int64_t ldv, const float *o, int64_t ldo, const float *lse, int64_t ldl,
                                   const float *dout, int64_t lddo, float *dq, int64_t lddq, sw_cuda_attn a, int T)
{
    SW_DYN_SHARED(float, smem);
    float *Ks = smem, *Vs = smem + (size_t)T * a.d;
    const int b = blockIdx.z, h = blockIdx.y, d = a.d, B = a.batch;
    const int grp = a.nh / a.nkv;
    const int64_t col = (int64_t)h * d, kvcol = (int64_t)(h / grp) * d;
    const int i0 = blockIdx.x * T, i = i0 + threadIdx.x;
    const int active = i < a.sq;
    const int nq = a.sq - i0 < T ? a.sq - i0 : T;
    const int64_t qpos = a.q_pos0 + i, qlast = a.q_pos0 + i0 + nq - 1, klen = att_key_len(a, b);
    const int drop = a.dropout > 0.0f;
    const float scale = a.scale;

    float qr[SW_CUDA_ATT_DMAX], g[SW_CUDA_ATT_DMAX], dqr[SW_CUDA_ATT_DMAX];
    const int64_t row = (int64_t)i * B + b;
    float Di = 0.0f, Li = -INFINITY;
    for (int c = 0; c < d; c++) {
        qr[c] = active ? q[row * ldq + col + c] : 0.0f;
        g[c] = active ? dout[row * lddo + col + c] : 0.0f;
        dqr[c] = 0.0f;
        if (active) Di += g[c] * o[row * ldo + col + c];
    }
    if (active) Li = lse[row * ldl + h];

    for (int j0 = 0; j0 < a.sk; j0 += T) {
        const int nk = a.sk - j0 < T ? a.sk - j0 : T;
        const int64_t kb = a.k_pos0 + j0;
        if ((a.causal && kb > qlast) || kb >= klen) break;
        att_stage(Ks, k, ldk, j0, nk, B, b, kvcol, d);
        att_stage(Vs, v, ldv, j0, nk, B, b, kvcol, d);
        __syncthreads();
        const int nv = (active && Li != -INFINITY) ? att_valid_keys(a.causal, qpos, kb, nk, klen) : 0;
        for (int jj = 0; jj < nv; jj++) {
            const float *kr = Ks + (size_t)jj * d, *vr = Vs + (size_t)jj * d;
            float sc = 0.0f, dp = 0.0f;
            for (int c = 0; c < d; c++) {
                sc += qr[c] * kr[c];
                dp += g[c] * vr[c];
            }
            const float p = sw_expf(scale * sc - Li);
            float z = 1.0f;
            if (drop)
                z = sw_dropout_keep(a.seed, a.step, a.layer, a.op, att_drop_index(a, b, h, qpos, kb + jj), a.dropout)
                        ? a.inv_keep
                        : 0.0f;
            const float ds = scale * p * (dp * z - Di); /* scale * dS */
            for (int c = 0; c < d; c++) dqr[c] += ds * kr[c];
        }
        __syncthreads();
    }
    if (active) att_store_row(dq + row * lddq + col, dqr, d, a.accumulate);
}

/* dK, dV: grid (key tiles, nkv, batch), T threads, one key row each */
__global__ void attn_bwd_dkv_kernel(const float *q, int64_t ldq, const float *k, int64_t ldk, const float *v,
                                    int64_t ldv, const float *o, int64_t ldo, const float *lse, int64_t ldl,
                                    const float *dout, int64_t lddo, float *dk, int64_t lddk, float *dv, int64_t lddv,
                                    sw_cuda_attn a, int T)
{
    SW_DYN_SHARED(float, smem);
    float *Qs = smem, *Gs = smem + (size_t)T * a.d, *Ls = smem + (size_t)2 * T * a.d, *Ds = Ls + T;
    const int b = blockIdx.z, hk = blockIdx.y, d = a.d, B = a.batch;
    const int grp = a.nh / a.nkv;
    const int64_t kvcol = (int64_t)hk * d;
    const int j0 = blockIdx.x * T, j = j0 + threadIdx.x;
    const int active = j < a.sk;
    const int64_t kpos = a.k_pos0 + j, kfirst = a.k_pos0 + j0, klen = att_key_len(a, b);
    const int drop = a.dropout > 0.0f;
    const float scale = a.scale;

    float kr[SW_CUDA_ATT_DMAX], vr[SW_CUDA_ATT_DMAX], dkr[SW_CUDA_ATT_DMAX], dvr[SW_CUDA_ATT_DMAX];
    const int64_t row = (int64_t)j * B + b;
    for (int c = 0; c < d; c++) {
        kr[c] = active ? k[row * ldk + kvcol + c] : 0.0f;
        vr[c] = active ? v[row * ldv + kvcol + c] : 0.0f;
        dkr[c] = 0.0f;
        dvr[c] = 0.0f;
    }

    for (int hh = 0; hh < grp; hh++) {
        const int h = hk * grp + hh;
        const int64_t col = (int64_t)h * d;
        for (int i0 = 0; i0 < a.sq; i0 += T) {
            const int nq = a.sq - i0 < T ? a.sq - i0 : T;
            /* every query of the tile before every key of the block: all masked (uniform) */
            if (a.causal && a.q_pos0 + i0 + nq - 1 < kfirst) continue;
            att_stage(Qs, q, ldq, i0, nq, B, b, col, d);
            att_stage(Gs, dout, lddo, i0, nq, B, b, col, d);
            if ((int)threadIdx.x < nq) { /* lse and D = dO . O of query i0 + t */
                const int64_t qrow = (int64_t)(i0 + threadIdx.x) * B + b;
                const float *gq = dout + qrow * lddo + col, *oq = o + qrow * ldo + col;
                float s = 0.0f;
                for (int c = 0; c < d; c++) s += gq[c] * oq[c];
                Ds[threadIdx.x] = s;
                Ls[threadIdx.x] = lse[qrow * ldl + h];
            }
            __syncthreads();
            if (active) {
                for (int ii = 0; ii < nq; ii++) {
                    const int64_t qpos = a.q_pos0 + i0 + ii;
                    const float Li = Ls[ii];
                    if (Li == -INFINITY || att_masked(a.causal, qpos, kpos, klen)) continue;
                    const float *qi = Qs + (size_t)ii * d, *gi = Gs + (size_t)ii * d;
                    float sc = 0.0f, dp = 0.0f;
                    for (int c = 0; c < d; c++) {
                        sc += qi[c] * kr[c];
                        dp += gi[c] * vr[c];
                    }
                    const float p = sw_expf(scale * sc - Li);
                    float z = 1.0f;
                    if (drop)
                        z = sw_dropout_keep(a.seed, a.step, a.layer, a.op, att_drop_index(a, b, h, qpos, kpos),
                                            a.dropout)
                                ? a.inv_keep
                                : 0.0f;
                    const float ds = scale * p * (dp * z - Ds[ii]);
                    const float pd = p * z; /* dropped probability */
                    for (int c = 0; c < d; c++) {
                        dkr[c] += ds * qi[c];
                        dvr[c] += pd * gi[c];
                    }
                }
            }
            __syncthreads();
        }
    }
    if (!active) return;
    att_store_row(dk + row * lddk + kvcol, dkr, d, a.accumulate || a.kv_accumulate);
    att_store_row(dv + row * lddv + kvcol, dvr, d, a.accumulate || a.kv_accumulate);
}

extern "C" cudaError_t sw_cuda_attn_fwd(const float *q, int64_t ldq, const float *k, int64_t ldk, const float *v,
                                        int64_t ldv, float *o, int64_t ldo, float *lse, int64_t ldl, sw_cuda_attn a,
                                        cudaStream_t s)
{
    if (a.sq <= 0 || a.nh <= 0 || a.batch <= 0) return cudaSuccess;
    if (a.d < 1 || a.d > SW_CUDA_ATT_DMAX) return cudaErrorInvalidValue;
    const int T = att_tile(a.d);
    const size_t shmem = sizeof(float) * 2 * (size_t)T * a.d;
    SW_LAUNCH(attn_fwd_kernel, dim3((unsigned)sw_cdiv(a.sq, T), (unsigned)a.nh, (unsigned)a.batch), T, shmem, s, q,
              ldq, k, ldk, v, ldv, o, ldo, lse, ldl, a, T);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_attn_bwd(const float *q, int64_t ldq, const float *k, int64_t ldk, const float *v,
                                        int64_t ldv, const float *o, int64_t ldo, const float *lse, int64_t ldl,
                                        const float *dout, int64_t lddo, float *dq, int64_t lddq, float *dk,
                                        int64_t lddk, float *dv, int64_t lddv, sw_cuda_attn a, cudaStream_t s)
{
    if (a.nh <= 0 || a.batch <= 0) return cudaSuccess;
    if (a.d < 1 || a.d > SW_CUDA_ATT_DMAX) return cudaErrorInvalidValue;
    const int T = att_tile(a.d);
    if (a.sq > 0)
        SW_LAUNCH(attn_bwd_dq_kernel, dim3((unsigned)sw_cdiv(a.sq, T), (unsigned)a.nh, (unsigned)a.batch), T,
                  sizeof(float) * 2 * (size_t)T * a.d, s, q, ldq, k, ldk, v, ldv, o, ldo, lse, ldl, dout, lddo, dq,
                  lddq, a, T);
    if (a.sk > 0)
        SW_LAUNCH(attn_bwd_dkv_kernel, dim3((unsigned)sw_cdiv(a.sk, T), (unsigned)a.nkv, (unsigned)a.batch), T,
                  sizeof(float) * (2 * (size_t)T * a.d + 2 * (size_t)T), s, q, ldq, k, ldk, v, ldv, o, ldo, lse, ldl,
                  dout, lddo, dk, lddk, dv, lddv, a, T);
    return cudaGetLastError();
}
