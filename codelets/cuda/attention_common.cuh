/* Device helpers shared by the attention kernels (attention.cu, the flash
 * tile, and attention_probs.cu): the masking and dropout index of
 * codelets/attention_common.h, and the staging of tile rows. */
#ifndef STARWEAVE_ATTENTION_COMMON_CUH
#define STARWEAVE_ATTENTION_COMMON_CUH
#include "cuda_util.cuh"
#include "kernels.h"

/* Key length of batch element b (key padding: its keys are those at positions below it), INT64_MAX without. */
static __device__ __forceinline__ int64_t att_key_len(const sw_cuda_attn &a, int b)
{
    return a.key_padding ? (int64_t)a.key_len[b] : INT64_MAX;
}

/* Valid (unmasked) keys of a tile starting at key position kb, for a query at qpos, in a sequence of klen keys. */
static __device__ __forceinline__ int att_valid_keys(int causal, int64_t qpos, int64_t kb, int nk, int64_t klen)
{
    int64_t lim = klen - kb;
    if (causal && qpos - kb + 1 < lim) lim = qpos - kb + 1;
    return lim <= 0 ? 0 : (lim >= nk ? nk : (int)lim);
}

/* The key at kpos is masked for the query at qpos (causal, or past the klen keys). */
static __device__ __forceinline__ int att_masked(int causal, int64_t qpos, int64_t kpos, int64_t klen)
{
    return kpos >= klen || (causal && kpos > qpos);
}

/* The dropout index is per query head, whatever K/V head it reads. */
static __device__ __forceinline__ uint64_t att_drop_index(const sw_cuda_attn &a, int b, int h, int64_t qpos, int64_t kpos)
{
    const uint64_t hb = (uint64_t)(a.batch0 + b) * (uint64_t)a.heads_total + (uint64_t)(a.head0 + h);
    return (hb * (uint64_t)a.seq_total + (uint64_t)qpos) * (uint64_t)a.seq_total + (uint64_t)kpos;
}

/* dst[r * d + c] = src[((j0 + r) * B + b) * ld + col + c] for r < n: rows of a tile into shared memory */
static __device__ __forceinline__ void att_stage(float *dst, const float *src, int64_t ld, int j0, int n, int B, int b,
                                          int64_t col, int d)
{
    for (int idx = threadIdx.x; idx < n * d; idx += blockDim.x) {
        const int r = idx / d, c = idx - r * d;
        dst[idx] = src[((int64_t)(j0 + r) * B + b) * ld + col + c];
    }
}

/* a row of d floats of a gradient (dQ, dK or dV), written or added */
static __device__ __forceinline__ void att_store_row(float *dst, const float *v, int d, int add)
{
    for (int c = 0; c < d; c++) dst[c] = add ? dst[c] + v[c] : v[c];
}

#endif
