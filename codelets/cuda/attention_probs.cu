/* Attention with saved probabilities (codelets/attention_probs.c has the
 * layout, the masking, the GQA head mapping and the formulas; the kernels
 * evaluate the same ones, key by key and query by query in the CPU's order,
 * and draw the dropout bits from the same counter as attention.cu).
 *
 * Each kernel gives one thread to each of the T rows of a tile of one
 * (batch, head) and walks the other side in tiles of T rows staged in
 * shared memory, next to the T x T block of probs between the two tiles,
 * loaded and stored whole rows of keys at a time (coalesced).
 *
 * Forward: grid (query tiles, nh, batch), one thread per query row, three
 * passes over the key tiles that the tile's last query can see:
 *   1. s = scale q.k into the probs rows, and the row max m;
 *   2. sum = rowsum exp(s - m) (read back; only the max is known in pass 1);
 *   3. p = exp(s - m) / sum over the scores (0 at masked keys, to the end of
 *      the row), o = D(P) V accumulated in registers; lse = m + log(sum).
 * Backward, two kernels on the stream:
 *   dQ: grid (query tiles, nh, batch), one thread per query row:
 *       1. r = rowsum(dP o P) with dP = D(dO V^T), saved in a scratch vector
 *          of batch*nh*sq floats (cudaMallocAsync, freed on the stream after
 *          the next kernel);
 *       2. dS = scale P o (dP - r) over the probs block in shared memory,
 *          dQ = dS K.
 *   dK, dV: grid (key tiles, nkv, batch), one thread per key row, over the
 *       query tiles of every query head of its K/V group (GQA), with r of
 *       the tile's queries from the scratch: dV += D(P)^T dO, then dS over
 *       the probs block, dK += dS^T Q.
 * dP = D(dO V^T) is recomputed where it is needed (d multiply-adds an
 * entry) rather than kept, which would take batch*nh*sq*sk floats more.
 * Each output element is summed by one thread in the CPU's order, so there
 * are no atomics and the results do not depend on the launch order.
 *
 * T (at most 64) is chosen so that a tile of T x d floats, the T x (T|1)
 * probs block (an odd row stride: the threads' rows fall in different
 * banks) and T floats fit in 48 KiB; the per-thread rows are arrays of
 * SW_CUDA_ATT_DMAX floats. */
#include "cuda_util.cuh"
#include "fastmath.h"
#include "philox.h"
#include "attention_common.cuh"

#define PROBS_TMAX 64
#define PROBS_SMEM_FLOATS 12288 /* 48 KiB */
/* row stride of the probs block in shared memory (odd) */
#define PROBS_LDS(T) ((T) | 1)

static size_t probs_smem_floats(int T, int d)
{
    return (size_t)T * d + (size_t)T * PROBS_LDS(T) + (size_t)T;
}

static int probs_tile(int d)
{
    int t = PROBS_TMAX;
    while (t > 1 && probs_smem_floats(t, d) > PROBS_SMEM_FLOATS) t--;
    return t;
}

/* Of the n valid keys of a row (a prefix), those in the tile j0 .. j0+nk-1. */
static __device__ __forceinline__ int probs_in_tile(int n, int j0, int nk)
{
    const int m = n - j0;
    return m <= 0 ? 0 : (m < nk ? m : nk);
}

/* 1/(1-p) where the entry (query qpos, key kpos) of query head h is kept, 0
 * where dropped: the CPU's index (attention_common.h: drop_index, per query
 * head whatever K/V head it reads) and counter. */
static __device__ __forceinline__ float probs_keep(const sw_cuda_attn &a, int b, int h, int64_t qpos, int64_t kpos)
{
    return sw_dropout_keep(a.seed, a.step, a.layer, a.op, att_drop_index(a, b, h, qpos, kpos), a.dropout) ? a.inv_keep
                                                                                                       : 0.0f;
}

/* dP of key j (0 = the first key of the call) for the query at qpos: D(dO . v_j) */
static __device__ __forceinline__ float probs_dp(const sw_cuda_attn &a, const float *g, const float *vr, int drop, int b,
                                                 int h, int64_t qpos, int j)
{
    float dp = 0.0f;
    for (int c = 0; c < a.d; c++) dp += g[c] * vr[c];
    return drop ? dp * probs_keep(a, b, h, qpos, a.k_pos0 + j) : dp;
}

/* S[r * lds + c] = P[r * ldp + c], r < nr, c < nc: a block of probs rows */
static __device__ __forceinline__ void probs_load(float *S, int lds, const float *P, int64_t ldp, int nr, int nc)
{
    for (int idx = threadIdx.x; idx < nr * nc; idx += blockDim.x) {
        const int r = idx / nc, c = idx - r * nc;
        S[r * lds + c] = P[(int64_t)r * ldp + c];
    }
}

/* P[r * ldp + c] = S[r * lds + c] for c < nc, 0 for nc <= c < nz; r < nr */
static __device__ __forceinline__ void probs_store(float *P, int64_t ldp, const float *S, int lds, int nr, int nc,
                                                   int nz)
{
    for (int idx = threadIdx.x; idx < nr * nz; idx += blockDim.x) {
        const int r = idx / nz, c = idx - r * nz;
        P[(int64_t)r * ldp + c] = c < nc ? S[r * lds + c] : 0.0f;
    }
}

/* grid (query tiles, nh, batch), T threads */
__global__ void attn_probs_fwd_kernel(const float *q, int64_t ldq, const float *k, int64_t ldk, const float *v,
                                      int64_t ldv, float *o, int64_t ldo, float *lse, int64_t ldl, float *probs,
                                      int64_t ldp, sw_cuda_attn a, int T)
{
    SW_DYN_SHARED(float, smem);
    const int lds = PROBS_LDS(T);
    float *KV = smem, *S = smem + (size_t)T * a.d; /* K (pass 1) or V (pass 3) tile; probs block */
    const int b = blockIdx.z, h = blockIdx.y, d = a.d, B = a.batch, sk = a.sk, t = threadIdx.x;
    const int grp = a.nh / a.nkv;
    const int64_t col = (int64_t)h * d, kvcol = (int64_t)(h / grp) * d;
    const int i0 = blockIdx.x * T, i = i0 + t;
    const int active = i < a.sq;
    const int nq = a.sq - i0 < T ? a.sq - i0 : T;
    const int64_t qpos = a.q_pos0 + i;
    const int64_t klen = att_key_len(a, b);
    const int kend = att_valid_keys(a.causal, a.q_pos0 + i0 + nq - 1, a.k_pos0, sk, klen); /* keys the tile sees */
    const int nv = active ? att_valid_keys(a.causal, qpos, a.k_pos0, sk, klen) : 0;       /* keys this row sees */
    const int drop = a.dropout > 0.0f;
    float *P = probs + ((int64_t)(b * a.nh + h) * a.sq + i0) * ldp; /* probs row of query i0 */
    float *Srow = S + (size_t)t * lds;

    float qr[SW_CUDA_ATT_DMAX], acc[SW_CUDA_ATT_DMAX];
    const int64_t row = (int64_t)i * B + b;
    for (int c = 0; c < d; c++) {
        qr[c] = active ? a.scale * q[row * ldq + col + c] : 0.0f;
        acc[c] = 0.0f;
    }

    /* pass 1: scaled scores into the probs rows, row max over the valid keys */
    float m = -INFINITY;
    for (int j0 = 0; j0 < kend; j0 += T) {
        const int nk = kend - j0 < T ? kend - j0 : T, nt = probs_in_tile(nv, j0, nk);
        att_stage(KV, k, ldk, j0, nk, B, b, kvcol, d);
        __syncthreads();
        for (int jj = 0; jj < nk; jj++) {
            float s = 0.0f;
            if (jj < nt) {
                const float *kr = KV + (size_t)jj * d;
                for (int c = 0; c < d; c++) s += qr[c] * kr[c];
                m = s > m ? s : m;
            }
            Srow[jj] = s;
        }
        __syncthreads(); /* the next tile's K is staged after every thread has passed here */
        probs_store(P + j0, ldp, S, lds, nq, nk, nk);
    }
    __syncthreads();

    /* pass 2: sum of exp(s - m) over the valid keys, in key order */
    float sum = 0.0f;
    for (int j0 = 0; j0 < kend; j0 += T) {
        const int nk = kend - j0 < T ? kend - j0 : T, nt = probs_in_tile(nv, j0, nk);
        probs_load(S, lds, P + j0, ldp, nq, nk);
        __syncthreads();
        for (int jj = 0; jj < nt; jj++) sum += sw_expf(Srow[jj] - m);
        __syncthreads();
    }
    const float inv = nv > 0 ? 1.0f / sum : 0.0f;
    if (active) lse[row * ldl + h] = nv > 0 ? m + logf(sum) : -INFINITY;

    /* pass 3: P over the scores (0 at masked keys, to the end of the row), O = D(P) V */
    for (int j0 = 0; j0 < sk; j0 += T) {
        const int nk = sk - j0 < T ? sk - j0 : T;
        const int ns = probs_in_tile(kend, j0, nk), nt = probs_in_tile(nv, j0, nk); /* scored, valid */
        if (ns > 0) { /* uniform over the block */
            probs_load(S, lds, P + j0, ldp, nq, ns);
            att_stage(KV, v, ldv, j0, ns, B, b, kvcol, d);
            __syncthreads();
            for (int jj = 0; jj < nt; jj++) {
                const float p = sw_expf(Srow[jj] - m) * inv;
                Srow[jj] = p;
                const float w = drop ? p * probs_keep(a, b, h, qpos, a.k_pos0 + j0 + jj) : p;
                const float *vr = KV + (size_t)jj * d;
                for (int c = 0; c < d; c++) acc[c] += w * vr[c];
            }
            for (int jj = nt; jj < ns; jj++) Srow[jj] = 0.0f;
            __syncthreads();
        }
        probs_store(P + j0, ldp, S, lds, nq, ns, nk);
        __syncthreads();
    }
    if (!active) return;
    float *orow = o + row * ldo + col;
    for (int c = 0; c < d; c++) orow[c] = acc[c];
}

/* dQ and r: grid (query tiles, nh, batch), T threads, one query row each */
__global__ void attn_probs_bwd_dq_kernel(const float *k, int64_t ldk, const float *v, int64_t ldv, const float *probs,
                                         int64_t ldp, const float *dout, int64_t lddo, float *dq, int64_t lddq,
                                         float *rs, sw_cuda_attn a, int T)
{
    SW_DYN_SHARED(float, smem);
    const int lds = PROBS_LDS(T);
    float *KV = smem, *S = smem + (size_t)T * a.d; /* V or K tile; probs block, then dS */
    const int b = blockIdx.z, h = blockIdx.y, d = a.d, B = a.batch, t = threadIdx.x;
    const int grp = a.nh / a.nkv;
    const int64_t col = (int64_t)h * d, kvcol = (int64_t)(h / grp) * d;
    const int i0 = blockIdx.x * T, i = i0 + t;
    const int active = i < a.sq;
    const int nq = a.sq - i0 < T ? a.sq - i0 : T;
    const int64_t qpos = a.q_pos0 + i;
    const int64_t klen = att_key_len(a, b);
    const int kend = att_valid_keys(a.causal, a.q_pos0 + i0 + nq - 1, a.k_pos0, a.sk, klen);
    const int nv = active ? att_valid_keys(a.causal, qpos, a.k_pos0, a.sk, klen) : 0;
    const int drop = a.dropout > 0.0f;
    const float scale = a.scale;
    const float *P = probs + ((int64_t)(b * a.nh + h) * a.sq + i0) * ldp;
    float *Srow = S + (size_t)t * lds;

    float g[SW_CUDA_ATT_DMAX], dqr[SW_CUDA_ATT_DMAX];
    const int64_t row = (int64_t)i * B + b;
    for (int c = 0; c < d; c++) {
        g[c] = active ? dout[row * lddo + col + c] : 0.0f;
        dqr[c] = 0.0f;
    }

    /* pass 1: r = rowsum(dP o P), dP = D(dO . v) */
    float r = 0.0f;
    for (int j0 = 0; j0 < kend; j0 += T) {
        const int nk = kend - j0 < T ? kend - j0 : T, nt = probs_in_tile(nv, j0, nk);
        probs_load(S, lds, P + j0, ldp, nq, nk);
        att_stage(KV, v, ldv, j0, nk, B, b, kvcol, d);
        __syncthreads();
        for (int jj = 0; jj < nt; jj++) r += probs_dp(a, g, KV + (size_t)jj * d, drop, b, h, qpos, j0 + jj) * Srow[jj];
        __syncthreads();
    }
    if (active) rs[(int64_t)(b * a.nh + h) * a.sq + i] = r;

    /* pass 2: dS = scale P o (dP - r) over the probs block, dQ += dS K */
    for (int j0 = 0; j0 < kend; j0 += T) {
        const int nk = kend - j0 < T ? kend - j0 : T, nt = probs_in_tile(nv, j0, nk);
        probs_load(S, lds, P + j0, ldp, nq, nk);
        att_stage(KV, v, ldv, j0, nk, B, b, kvcol, d);
        __syncthreads();
        for (int jj = 0; jj < nt; jj++)
            Srow[jj] = scale * Srow[jj] * (probs_dp(a, g, KV + (size_t)jj * d, drop, b, h, qpos, j0 + jj) - r);
        __syncthreads();
        att_stage(KV, k, ldk, j0, nk, B, b, kvcol, d);
        __syncthreads();
        for (int jj = 0; jj < nt; jj++) {
            const float ds = Srow[jj];
            const float *kr = KV + (size_t)jj * d;
            for (int c = 0; c < d; c++) dqr[c] += ds * kr[c];
        }
        __syncthreads();
    }
    if (active) att_store_row(dq + row * lddq + col, dqr, d, a.accumulate);
}

/* dK, dV: grid (key tiles, nkv, batch), T threads, one key row each */
__global__ void attn_probs_bwd_dkv_kernel(const float *q, int64_t ldq, const float *v, int64_t ldv,
                                          const float *probs, int64_t ldp, const float *dout, int64_t lddo,
                                          const float *rs, float *dk, int64_t lddk, float *dv, int64_t lddv,
                                          sw_cuda_attn a, int T)
{
    SW_DYN_SHARED(float, smem);
    const int lds = PROBS_LDS(T);
    /* dO, then Q tile; probs block (rows: queries, columns: this tile's keys), then dS; r of the queries */
    float *QG = smem, *S = smem + (size_t)T * a.d, *R = S + (size_t)T * lds;
    const int b = blockIdx.z, hk = blockIdx.y, d = a.d, B = a.batch, t = threadIdx.x;
    const int grp = a.nh / a.nkv;
    const int64_t kvcol = (int64_t)hk * d;
    const int j0 = blockIdx.x * T, j = j0 + t;
    const int active = j < a.sk;
    const int nk = a.sk - j0 < T ? a.sk - j0 : T;
    const int64_t kpos = a.k_pos0 + j, kfirst = a.k_pos0 + j0, klen = att_key_len(a, b);
    const int drop = a.dropout > 0.0f;
    const float scale = a.scale;

    float vr[SW_CUDA_ATT_DMAX], dkr[SW_CUDA_ATT_DMAX], dvr[SW_CUDA_ATT_DMAX];
    const int64_t row = (int64_t)j * B + b;
    for (int c = 0; c < d; c++) {
        vr[c] = active ? v[row * ldv + kvcol + c] : 0.0f;
        dkr[c] = 0.0f;
        dvr[c] = 0.0f;
    }

    for (int hh = 0; hh < grp; hh++) {
        const int h = hk * grp + hh;
        const int64_t col = (int64_t)h * d;
        const float *Ph = probs + (int64_t)(b * a.nh + h) * a.sq * ldp + j0, *rh = rs + (int64_t)(b * a.nh + h) * a.sq;
        for (int i0 = 0; i0 < a.sq; i0 += T) {
            const int nq = a.sq - i0 < T ? a.sq - i0 : T;
            /* every query of the tile before every key of the block: all masked (uniform) */
            if (a.causal && a.q_pos0 + i0 + nq - 1 < kfirst) continue;
            probs_load(S, lds, Ph + (int64_t)i0 * ldp, ldp, nq, nk);
            if (t < nq) R[t] = rh[i0 + t];
            att_stage(QG, dout, lddo, i0, nq, B, b, col, d);
            __syncthreads();
            /* dV += D(P)^T dO; dS = scale P o (dP - r) over the block */
            if (active) {
                for (int ii = 0; ii < nq; ii++) {
                    const int64_t qpos = a.q_pos0 + i0 + ii;
                    if (att_masked(a.causal, qpos, kpos, klen)) continue;
                    const float *gi = QG + (size_t)ii * d;
                    float dp = 0.0f;
                    for (int c = 0; c < d; c++) dp += gi[c] * vr[c];
                    const float p = S[ii * lds + t];
                    float pd = p;
                    if (drop) {
                        const float z = probs_keep(a, b, h, qpos, kpos);
                        dp *= z;
                        pd = p * z;
                    }
                    for (int c = 0; c < d; c++) dvr[c] += pd * gi[c];
                    S[ii * lds + t] = scale * p * (dp - R[ii]);
                }
            }
            __syncthreads();
            att_stage(QG, q, ldq, i0, nq, B, b, col, d);
            __syncthreads();
            /* dK += dS^T Q */
            if (active) {
                for (int ii = 0; ii < nq; ii++) {
                    if (att_masked(a.causal, a.q_pos0 + i0 + ii, kpos, klen)) continue;
                    const float ds = S[ii * lds + t];
                    const float *qi = QG + (size_t)ii * d;
                    for (int c = 0; c < d; c++) dkr[c] += ds * qi[c];
                }
            }
            __syncthreads();
        }
    }
    if (!active) return;
    att_store_row(dk + row * lddk + kvcol, dkr, d, a.accumulate || a.kv_accumulate);
    att_store_row(dv + row * lddv + kvcol, dvr, d, a.accumulate || a.kv_accumulate);
}

static int probs_args_ok(const sw_cuda_attn &a)
{
    return a.d >= 1 && a.d <= SW_CUDA_ATT_DMAX && a.nkv >= 1 && a.nh % a.nkv == 0 && !a.merge;
}

extern "C" cudaError_t sw_cuda_attn_probs_fwd(const float *q, int64_t ldq, const float *k, int64_t ldk,
                                              const float *v, int64_t ldv, float *o, int64_t ldo, float *lse,
                                              int64_t ldl, float *probs, int64_t ldp, sw_cuda_attn a,
                                              cudaStream_t s)
{
    if (a.sq <= 0 || a.nh <= 0 || a.batch <= 0) return cudaSuccess;
    if (!probs_args_ok(a)) return cudaErrorInvalidValue;
    const int T = probs_tile(a.d);
    SW_LAUNCH(attn_probs_fwd_kernel, dim3((unsigned)sw_cdiv(a.sq, T), (unsigned)a.nh, (unsigned)a.batch), T,
              sizeof(float) * probs_smem_floats(T, a.d), s, q, ldq, k, ldk, v, ldv, o, ldo, lse, ldl, probs, ldp, a,
              T);
    return cudaGetLastError();
}

extern "C" cudaError_t sw_cuda_attn_probs_bwd(const float *q, int64_t ldq, const float *k, int64_t ldk,
                                              const float *v, int64_t ldv, const float *probs, int64_t ldp,
                                              const float *dout, int64_t lddo, float *dq, int64_t lddq, float *dk,
                                              int64_t lddk, float *dv, int64_t lddv, sw_cuda_attn a, cudaStream_t s)
{
    if (a.nh <= 0 || a.batch <= 0) return cudaSuccess;
    if (!probs_args_ok(a)) return cudaErrorInvalidValue;
    const int T = probs_tile(a.d);
    const size_t shmem = sizeof(float) * probs_smem_floats(T, a.d);
    float *rs = NULL; /* r of every (batch, head, query), from the dQ kernel to the dK/dV kernel */
    if (a.sq > 0) {
        const cudaError_t e = cudaMallocAsync((void **)&rs, sizeof(float) * (size_t)a.batch * a.nh * a.sq, s);
        if (e != cudaSuccess) return e;
        SW_LAUNCH(attn_probs_bwd_dq_kernel, dim3((unsigned)sw_cdiv(a.sq, T), (unsigned)a.nh, (unsigned)a.batch), T,
                  shmem, s, k, ldk, v, ldv, probs, ldp, dout, lddo, dq, lddq, rs, a, T);
    }
    if (a.sk > 0)
        SW_LAUNCH(attn_probs_bwd_dkv_kernel, dim3((unsigned)sw_cdiv(a.sk, T), (unsigned)a.nkv, (unsigned)a.batch), T,
                  shmem, s, q, ldq, v, ldv, probs, ldp, dout, lddo, rs, dk, lddk, dv, lddv, a, T);
    cudaError_t e = cudaGetLastError();
    if (rs) {
        const cudaError_t f = cudaFreeAsync(rs, s);
        if (e == cudaSuccess) e = f;
    }
    return e;
}
