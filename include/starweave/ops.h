/** @file
 * Codelet submit helpers. Every argument named a handle is a StarPU matrix
 * handle in row-major form (nx = columns, ny = rows, ld >= nx): a "vector"
 * of length n is a [1, n] or [n, 1] matrix; the kernels only use nx*ny.
 * Shapes are written [rows, cols]. Each helper submits one task and returns;
 * a failed submission aborts through SW_CHECK. The GEMMs, casts, adds,
 * norms, GeLU, softmax, dropout and AdamW check their handles' shapes
 * first and refuse a mismatch before submitting (sw_failf: the op, the
 * arguments and their shapes, e.g. "sw_gemm: op(A) [64,128] and op(B)
 * [256,32] do not chain (128 != 256)"; every rank aborts). Float data is
 * fp32, token ids and targets are int32. */
#ifndef STARWEAVE_OPS_H
#define STARWEAVE_OPS_H

#include <stdint.h>
#include <starpu.h>

#include "starweave/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- counter-based RNG key for dropout (see codelets/philox.h) ---- */
/** The counter-based RNG key of dropout (see codelets/philox.h).
 * The mask bit of element (r, c) of a tile is a pure function of
 * (seed, step, layer, op, global index), global index =
 * (row0 + r) * ld_global + col0 + c, so every tiling and every slicing of
 * the same tensor draws the same mask. */
typedef struct sw_rng_key {
    uint64_t seed;          /**< the run's seed */
    uint32_t step;          /**< training step */
    uint16_t layer;         /**< block index (SW_DROP_EMBED_LAYER: the embedding) */
    uint16_t op;            /**< which dropout of the layer (SW_DROP_EMBED, ...) */
    ///@{
    int64_t row0, col0;     /**< global position of the tile's element (0,0) */
    ///@}
    int64_t ld_global;      /**< columns of the global tensor */
    ///@{
    /** Rows in [s, b] order holding batch columns batch0 .. batch0 +
     * batch_local - 1 of a global batch of batch_global (data parallelism,
     * micro-batches): row g = pos * batch_local + b of the local rows is
     * row pos * batch_global + batch0 + b of the global tensor, and the
     * attention dropout's batch index is batch0 + b. batch_global == 0:
     * the rows are the global ones. */
    int64_t batch0, batch_local, batch_global;
    ///@}
} sw_rng_key;

/** The CPU GEMM kernel every sw_gemm task calls (configure --with-gemm).
 * OPENBLAS: cblas_sgemm, one thread. ONEDNN (built with oneDNN): oneDNN's
 * matmul primitive, created once per shape and kept per worker thread, one
 * OpenMP thread inside the task. AUTO: oneDNN where it is built and the CPU
 * runs its AVX-512 kernels (where it is the faster of the two; on AVX2
 * OpenBLAS is: BENCHMARKS.md), else OpenBLAS. */
typedef enum {
    SW_GEMM_AUTO = 0,     /**< oneDNN where it is built and the CPU runs its AVX-512 kernels, else OpenBLAS */
    SW_GEMM_OPENBLAS = 1, /**< cblas_sgemm, one thread */
    SW_GEMM_ONEDNN = 2    /**< oneDNN's matmul primitive (built with oneDNN) */
} sw_gemm_backend;
/** Sets the CPU GEMM kernel (sw_gemm_backend) every sw_gemm task calls.
 * Results are bit-identical for every scheduler and worker count with one
 * backend; two backends differ in the last bits. Set it while no GEMM task
 * runs (sw_init does: sw_options.gemm, else $SW_GEMM). Returns the backend
 * in use, or -1 with the reason in msg (n bytes) when ONEDNN is asked of a
 * build without it (the backend is then unchanged). */
int sw_gemm_set_backend(sw_gemm_backend b, char *msg, size_t n);
/** The backend in use (as sw_gemm_set_backend last set it). */
sw_gemm_backend sw_gemm_get_backend(void);
/** Backend b's name: "auto", "openblas", "onednn". */
const char *sw_gemm_backend_name(int b);
/** The backend of a name of sw_gemm_backend_name; -1 for anything else. */
int sw_gemm_backend_parse(const char *name);
/** What runs: "onednn (oneDNN 2.6.3, avx512_core_bf16, bf16 native)",
 * "openblas (OpenBLAS 0.3.21, Haswell, bf16 widened to fp32)" */
void sw_gemm_describe(char *buf, size_t n);
/** 1 when bf16 GEMM operands run as bf16 on the CPU (the oneDNN backend on a
 * CPU with AVX512-BF16 or AMX: bf16 products, fp32 accumulation); 0 when
 * they are widened, exactly, to fp32 for the fp32 kernel. */
int sw_gemm_bf16_native(void);
/** The kernel itself, for benchmarks and users' own codelets: row-major
 * C[m,n] = alpha op(A) op(B) + beta C on the calling thread, A and B of
 * dtype (SW_F32 or SW_BF16, leading dimensions in elements), C fp32. */
void sw_gemm_cpu(int transA, int transB, int m, int n, int k, float alpha, const void *A, int lda, const void *B,
                 int ldb, float beta, float *C, int ldc, sw_dtype dtype);

/* ---- GEMM (codelets/gemm.c) ---- */
/** C[m,n] = alpha * op(A) * op(B) + beta * C, op(X) = X or X^T (trans != 0).
 * beta == 0: C is accessed W (its old contents ignored), else RW.
 *
 * bf16 operands (--dtype bf16): A and B both fp32 or both bf16 (element
 * size 2, see sw_cast); products accumulate in fp32 (cuBLAS GemmEx with
 * fp32 compute on GPUs; on CPUs oneDNN's bf16 matmul where
 * sw_gemm_bf16_native(), else the bf16 tiles are widened, exactly, and go
 * through the chosen backend's fp32 kernel); C and bias are fp32. */
void sw_gemm(starpu_data_handle_t A, int transA, starpu_data_handle_t B, int transB,
             starpu_data_handle_t C, float alpha, float beta);
/** C[m,n] = op(A) * op(B) + bias[1,n] (bias broadcast over rows; C accessed W).
 * A and B fp32 or bf16 as for sw_gemm. */
void sw_gemm_bias(starpu_data_handle_t A, int transA, starpu_data_handle_t B, int transB,
                  starpu_data_handle_t bias, starpu_data_handle_t C);


/* ---- casts (codelets/cast.c) ---- */
/** dst = src between fp32 and bf16 (the direction from the element sizes;
 * to bf16: round to nearest even), same shape. */
void sw_cast(starpu_data_handle_t src, starpu_data_handle_t dst);
/** A bf16 copy of the fp32 src in a temporary handle (home node -1: StarPU
 * allocates it where its readers run): release it with
 * starpu_data_unregister_submit once they are submitted. */
starpu_data_handle_t sw_cast_bf16_temp(starpu_data_handle_t src);
/** dst [r, c/2] fp32-typed = src [r, c] fp32 rounded to bf16, two per
 * element (element 2j in the low half: bf16 element j of the row), so
 * collectives that move fp32 move bf16 (c even). */
void sw_bf16_pack(starpu_data_handle_t src, starpu_data_handle_t dst);
/** dst [r, c] bf16 = the bf16 elements packed in src [r, c/2] (a copy). */
void sw_bf16_unpack(starpu_data_handle_t src, starpu_data_handle_t dst);

/* ---- LayerNorm (codelets/layernorm.c), rows normalised over cols ---- */
/** LayerNorm, rows normalised over cols:
 * y[r,c] = (x - mean) * rstd * w + b; mean[r,1], rstd[r,1] saved (W). */
void sw_layernorm_fwd(starpu_data_handle_t x, starpu_data_handle_t w, starpu_data_handle_t b,
                      starpu_data_handle_t y, starpu_data_handle_t mean, starpu_data_handle_t rstd,
                      float eps);
/** LayerNorm's backward: dx[r,c] (W, or RW += when accumulate), dw_part[1,c] and db_part[1,c] (W):
 * this tile's contribution to the weight/bias gradients. */
void sw_layernorm_bwd(starpu_data_handle_t dy, starpu_data_handle_t x, starpu_data_handle_t w,
                      starpu_data_handle_t mean, starpu_data_handle_t rstd,
                      starpu_data_handle_t dx, starpu_data_handle_t dw_part,
                      starpu_data_handle_t db_part, int accumulate);

/* ---- RMSNorm (codelets/rmsnorm.c): y = w * x / sqrt(mean(x^2) + eps) ---- */
/** RMSNorm, rows normalised over cols: y[r,c] = w * x / sqrt(mean(x^2) + eps)
 * (W); rstd[r,1] saved (W). */
void sw_rmsnorm_fwd(starpu_data_handle_t x, starpu_data_handle_t w, starpu_data_handle_t y,
                    starpu_data_handle_t rstd, float eps);
/** RMSNorm's backward: dx[r,c] (W, or RW += when accumulate) and dw_part[1,c]
 * (W): this tile's contribution to the weight gradient. */
void sw_rmsnorm_bwd(starpu_data_handle_t dy, starpu_data_handle_t x, starpu_data_handle_t w,
                    starpu_data_handle_t rstd, starpu_data_handle_t dx,
                    starpu_data_handle_t dw_part, int accumulate);

/* ---- GeLU, tanh approximation (codelets/gelu.c) ---- */
/** y = gelu(x), tanh approximation (W), same shapes. */
void sw_gelu_fwd(starpu_data_handle_t x, starpu_data_handle_t y);
/** GeLU's backward: grad (RW): dy on entry, dx = dy * gelu'(x) on return. */
void sw_gelu_bwd(starpu_data_handle_t x, starpu_data_handle_t grad);

/* ---- SwiGLU (codelets/swiglu.c) ---- */
/** SwiGLU: y = silu(gate) * up, silu(a) = a sigmoid(a);
 * gate, up, y [r, c] (may be column blocks of wider matrices); y written (W). */
void sw_swiglu_fwd(starpu_data_handle_t gate, starpu_data_handle_t up, starpu_data_handle_t y);
/** SwiGLU's backward: dgate = dy * up * silu'(gate), dup = dy * silu(gate); both written (W). */
void sw_swiglu_bwd(starpu_data_handle_t gate, starpu_data_handle_t up, starpu_data_handle_t dy,
                   starpu_data_handle_t dgate, starpu_data_handle_t dup);

/* ---- element-wise product (codelets/mul.c) ---- */
/** Element-wise product: z = x * y (W), same shapes. */
void sw_mul(starpu_data_handle_t x, starpu_data_handle_t y, starpu_data_handle_t z);

/* ---- rotary position embedding (codelets/rope.c) ---- */
/** Rotary position embedding, in place:
 * x[n, heads*d] (RW; may be a column block of a wider matrix), rows in [s, b] order:
 * row r of the tile is global row row0 + r of a run of positions starting at pos0,
 * position p = pos0 + (row0 + r) / batch. Each head's d columns are rotated in
 * pairs (i, i + d/2), i < d/2 (GPT-NeoX / Hugging Face LLaMA "rotate_half"):
 * angle = p * theta^(-2i/d); (a, b) -> (a cos - b sin, a sin + b cos).
 * inverse != 0 rotates by -angle: the backward (the rotation's transpose). d even.
 * The angle is fp32 as PyTorch forms it: (float)p * inv_freq, inv_freq = 1 / theta^((float)(2i) / d)
 * in fp32 (the power correctly rounded), on CPUs and GPUs alike.
 * A d that is odd or does not divide the columns, batch <= 0, a negative
 * row0 or pos0, or theta <= 0 is refused at submission. */
void sw_rope(starpu_data_handle_t x, int d, float theta, int64_t row0, int batch, int64_t pos0, int inverse);

/* Shape mismatches (and, for sw_rope, a d that is odd or does not divide
 * the columns, batch <= 0, negative row0/pos0, theta <= 0) are refused when
 * the task is submitted: a message naming the op and the shapes, then
 * sw_fail (runtime.h). */

/* ---- element-wise adds and reductions (codelets/add.c) ---- */
void sw_add(starpu_data_handle_t x, starpu_data_handle_t y, starpu_data_handle_t z); /**< z = x + y (W) */
void sw_axpy(float alpha, starpu_data_handle_t x, starpu_data_handle_t y);           /**< y += alpha x (RW) */
void sw_bias_add(starpu_data_handle_t x, starpu_data_handle_t bias);                 /**< x[r,c] += bias[1,c] (RW) */
/** y (+)= x element by element in row-major order; x and y may have
 * different shapes with the same number of elements (a gradient and its
 * slice of a flat bucket). accumulate: y RW, else W. */
void sw_copy_flat(starpu_data_handle_t x, starpu_data_handle_t y, int accumulate);
/** y[row0 + r, c] = x[r, c] for every row r of x (y RW: its other rows
 * kept; the same columns): new keys and values into a KV cache. Rows past
 * y's are refused at submission (exit 2). */
void sw_copy_rows(starpu_data_handle_t x, starpu_data_handle_t y, int64_t row0);
/** x = 0 (W; a view's padding columns are left alone): a gradient that
 * several tasks then add into. */
void sw_zero(starpu_data_handle_t x);
/** y[1,c] = beta * y + alpha * sum_r x[r,c]; beta == 0: y accessed W. */
void sw_colsum(starpu_data_handle_t x, starpu_data_handle_t y, float alpha, float beta);

/* ---- softmax over each row (codelets/softmax.c) ---- */
/** y = softmax(x) over each row (W), same shapes. */
void sw_softmax_fwd(starpu_data_handle_t x, starpu_data_handle_t y);
/** Softmax's backward from its output y: dx = y * (dy - sum over the row
 * of dy * y) (W), same shapes. */
void sw_softmax_bwd(starpu_data_handle_t y, starpu_data_handle_t dy, starpu_data_handle_t dx);

/* ---- dropout (codelets/dropout.c): y = x * keep / (1 - p), keep = u >= p ---- */
/** Dropout: y = x * keep / (1 - p) (W), keep = u >= p, u drawn from key's
 * counter-based RNG. */
void sw_dropout_fwd(starpu_data_handle_t x, starpu_data_handle_t y, float p, const sw_rng_key *key);
/** Dropout's backward: grad (RW): dy on entry, dx on return (mask regenerated from the key). */
void sw_dropout_bwd(starpu_data_handle_t grad, float p, const sw_rng_key *key);

/* ---- token + position embedding (codelets/embedding.c) ---- */
/** Token + position embedding.
 * Rows are tokens in [s, b] order: global row g = row0 + r has position
 * pos0 + g / batch. tokens[n,1] int32 are the ids of the tile's n rows.
 * Ids outside [vocab0, vocab0 + wte rows) contribute zero (vocab-parallel).
 * with_wpe == 0: x = wte part only (wpe is not read; the vocab-parallel
 * ranks but one, so that the sum over ranks adds wpe once). wpe NULL: no
 * learned positions. */
void sw_embedding_fwd(starpu_data_handle_t tokens, starpu_data_handle_t wte,
                      starpu_data_handle_t wpe, starpu_data_handle_t x,
                      int64_t row0, int batch, int64_t pos0, int64_t vocab0, int with_wpe);
/** Flags of sw_embedding_bwd's zero. */
enum {
    SW_EMB_ZERO_WPE = 1, /**< dwpe written (W), not added to */
    SW_EMB_ZERO_WTE = 2  /**< dwte written (W), not added to */
};
/** Embedding's backward: dwte += scatter(dx) (RW), or with SW_EMB_ZERO_WTE in zero dwte = scatter(dx)
 * (W); dwpe (NULL: none) likewise with SW_EMB_ZERO_WPE. */
void sw_embedding_bwd(starpu_data_handle_t tokens, starpu_data_handle_t dx,
                      starpu_data_handle_t dwte, starpu_data_handle_t dwpe,
                      int64_t row0, int batch, int64_t pos0, int64_t vocab0, int zero);

/* ---- flash-style causal attention tile (codelets/attention.c) ---- */
/** Batch elements an attention tile holds key lengths for (sw_attn_args.key_len). */
#define SW_ATTN_MAX_SEQS 64
/** The arguments of a flash-style causal attention tile (sw_attn_fwd, sw_attn_bwd).
 * q[sq*batch, nh*d], k,v[sk*batch, nkv*d]: rows in [s, b] order, head j in
 * columns j*d..j*d+d-1 (the handles may be column blocks of a wider matrix).
 * Grouped-query attention: query head j uses K/V head j / (nh / nkv).
 * o[sq*batch, nh*d], lse[sq*batch, nh] (natural-log log-sum-exp of the
 * scaled scores). Query row i has global position q_pos0 + i, key row j
 * k_pos0 + j; causal masks kpos > qpos. Fully masked rows: o = 0, lse = -inf.
 * merge == 0: o, lse written (W). merge == 1: the tile's result is merged
 * into o, lse (RW) by log-sum-exp (Ring attention).
 * Attention dropout (p > 0) on the probabilities uses the rng key with
 * global index ((b * heads_total + head0 + j) * seq_total + qpos) * seq_total + kpos.
 * Key padding (key_padding 1): batch element b sees only the keys at global
 * positions kpos < key_len[b] (a prefix, with the causal rule on top); at
 * most SW_ATTN_MAX_SEQS batch elements per tile. */
typedef struct sw_attn_args {
    ///@{
    int batch, nh, d;       /**< batch, heads in this tile, head dim */
    ///@}
    ///@{
    int sq, sk;             /**< query / key rows per batch element */
    ///@}
    ///@{
    int64_t q_pos0, k_pos0; /**< global positions of the first query and key rows */
    ///@}
    int causal;             /**< 1: keys after the query are masked */
    float scale;            /**< usually 1/sqrt(d) */
    float dropout;          /**< probability of the attention dropout (0: none) */
    sw_rng_key key;         /**< only seed/step/layer/op are used */
    ///@{
    int head0, heads_total; /**< the tile's first head among heads_total (the dropout's global index) */
    ///@}
    int64_t seq_total;      /**< the global sequence length (the dropout's global index) */
    int merge;              /**< forward: merge into o/lse */
    int accumulate;         /**< backward: dq, dk, dv += (RW) instead of = (W) */
    int nkv;                /**< K/V heads in the k, v tiles (grouped-query attention); 0 means nh.
                               nh % nkv == 0; query head j of the tile uses K/V head j / (nh / nkv) */
    int kv_accumulate;      /**< backward: dk, dv += (RW) even when accumulate == 0 (query-head groups
                               that share K/V heads write the same dk, dv one after the other);
                               dq follows accumulate only */
    int key_padding;        /**< 1: key_len[b] masks the keys of batch element b (b < batch <= SW_ATTN_MAX_SEQS) */
    int32_t key_len[SW_ATTN_MAX_SEQS]; /**< key_padding: the keys of batch element b are those at kpos < key_len[b] */
} sw_attn_args;
/** (query, key) pairs an attention tile computes per batch element and
 * head: sq x sk; with causal, those whose key position (k_pos0 up to
 * k_pos0 + sk - 1) is at most the query's (q_pos0 up to q_pos0 + sq - 1):
 * half of a square tile on the diagonal, all of one before it (a Ring
 * step's earlier block), none of one after it. */
double sw_attn_visible_pairs(int64_t q_pos0, int64_t sq, int64_t k_pos0, int64_t sk, int causal);
/** Attention tile forward (sw_attn_args): o, lse from q, k, v (W, or RW
 * merged by log-sum-exp with merge). */
void sw_attn_fwd(starpu_data_handle_t q, starpu_data_handle_t k, starpu_data_handle_t v,
                 starpu_data_handle_t o, starpu_data_handle_t lse, const sw_attn_args *a);
/** Attention tile backward: dq, dk, dv (W, or RW += with accumulate /
 * kv_accumulate) from dout. Uses the final o and lse of the whole row (over all key blocks). */
void sw_attn_bwd(starpu_data_handle_t q, starpu_data_handle_t k, starpu_data_handle_t v,
                 starpu_data_handle_t o, starpu_data_handle_t lse, starpu_data_handle_t dout,
                 starpu_data_handle_t dq, starpu_data_handle_t dk, starpu_data_handle_t dv,
                 const sw_attn_args *a);

/* ---- attention without recomputation (codelets/attention_probs.c) ---- */
/** Attention without recomputation.
 * Same arguments, layouts, masking, GQA and dropout mask as sw_attn_fwd /
 * sw_attn_bwd, but the forward saves the softmax probabilities and the
 * backward reads them instead of recomputing Q K^T (Megatron's
 * "--recompute none"; O(sq*sk) memory per head). Whole key range only:
 * merge must be 0 (Ring attention uses the flash tile).
 * probs[batch*nh*sq, sk] (may be strided): row (b*nh + j)*sq + i holds the
 * probabilities of query i of head j of batch element b over the keys,
 * before dropout; masked keys and fully masked rows are 0.
 * Forward: o, lse, probs written (W); o = dropout(P) V. */
void sw_attn_probs_fwd(starpu_data_handle_t q, starpu_data_handle_t k, starpu_data_handle_t v,
                       starpu_data_handle_t o, starpu_data_handle_t lse, starpu_data_handle_t probs,
                       const sw_attn_args *a);
/** Backward from the saved probs: dq (W, or RW += when accumulate), dk, dv
 * (W, or RW += when accumulate or kv_accumulate). */
void sw_attn_probs_bwd(starpu_data_handle_t q, starpu_data_handle_t k, starpu_data_handle_t v,
                       starpu_data_handle_t probs, starpu_data_handle_t dout,
                       starpu_data_handle_t dq, starpu_data_handle_t dk, starpu_data_handle_t dv,
                       const sw_attn_args *a);

/* ---- cross-entropy pieces over a block of logits (codelets/crossentropy.c) ---- */
/** Cross-entropy piece over a block of logits: each row's maximum mx.
 * logits[n, vb]: columns are vocabulary ids vocab0 .. vocab0+vb-1; ids >=
 * vocab (padding) are ignored. All outputs (of sw_ce_max, sw_ce_target,
 * sw_ce_sumexp, sw_ce_loss) are [n,1] and written (W). */
void sw_ce_max(starpu_data_handle_t logits, starpu_data_handle_t mx, int64_t vocab0, int64_t vocab);
/** tgt[n,1] (W): each row's logit of its target (targets[n,1] int32); 0 where
 * the target is not in the block. */
void sw_ce_target(starpu_data_handle_t logits, starpu_data_handle_t targets,
                  starpu_data_handle_t tgt, int64_t vocab0);
/** se[n,1] (W): each row's sum of exp(logit - mx) over the block's ids
 * below vocab. */
void sw_ce_sumexp(starpu_data_handle_t logits, starpu_data_handle_t mx, starpu_data_handle_t se,
                  int64_t vocab0, int64_t vocab);
void sw_ce_loss(starpu_data_handle_t mx, starpu_data_handle_t tgt, starpu_data_handle_t se,
                starpu_data_handle_t loss);                    /**< loss[n,1] (W) = log(se) + mx - tgt */
/** logits (RW) become scale * (softmax - onehot(target)); padding columns 0. */
void sw_ce_bwd(starpu_data_handle_t logits, starpu_data_handle_t mx, starpu_data_handle_t se,
               starpu_data_handle_t targets, int64_t vocab0, int64_t vocab, float scale);
/** The ignore index of no row: no int32 target equals it once loaded
 * (loaders refuse targets outside [0, vocab) other than the ignore index). */
#define SW_CE_IGNORE_NONE INT32_MIN
/** rw[n,1] (W): each row's weight in the mean, 0 where targets[n,1] (int32)
 * is ignore_index, else weights[n,1] (NULL: 1). */
void sw_ce_weights(starpu_data_handle_t targets, starpu_data_handle_t weights, starpu_data_handle_t rw,
                   int32_t ignore_index);
/** out[1,1] (W) = sum over the rows of rw loss / count[1,1] (rows of
 * weight 0 skipped; count 0: NaN, PyTorch's mean over no row). loss, rw [n,1]. */
void sw_ce_mean(starpu_data_handle_t loss, starpu_data_handle_t rw, starpu_data_handle_t count,
                starpu_data_handle_t out);
/** sw_ce_bwd with each row's scale rw / count (rw [n,1], count [1,1]);
 * rows of weight 0 get 0 (no gradient). */
void sw_ce_bwd_weighted(starpu_data_handle_t logits, starpu_data_handle_t mx, starpu_data_handle_t se,
                        starpu_data_handle_t targets, starpu_data_handle_t rw, starpu_data_handle_t count,
                        int64_t vocab0, int64_t vocab);

/* ---- pooling over a sequence (codelets/pool.c) ---- */
/** y[B,h] (W) = alpha * sum over positions i = p0 .. p0+np-1 of x[i*B + b]
 * (x [n,h] in [s, b] order: n/B positions of B sequences; np 0: zeros) */
void sw_pool_fwd(starpu_data_handle_t x, starpu_data_handle_t y, int64_t p0, int64_t np, float alpha);
/** dx[n,h] (W) = alpha * dy[b] on the rows of positions p0 .. p0+np-1, 0 on the others */
void sw_pool_bwd(starpu_data_handle_t dy, starpu_data_handle_t dx, int64_t p0, int64_t np, float alpha);
/** Runs of positions the pooling's lengths need (sw_pool_lengths). */
#define SW_POOL_MAX_RUNS 4
/** Per-sequence lengths of a padded batch for sw_pool_fwd_len / sw_pool_bwd_len:
 * local position i of the rows (rows i*B + b) is global position
 * pos0[j] + i - i0[j] for the last run j with i0[j] <= i (i0[0] = 0; runs
 * as a rank's zigzag or sp share of the positions gives them), and
 * position p of sequence b is valid iff p < len[b] (b < B <= SW_ATTN_MAX_SEQS). */
typedef struct sw_pool_lengths {
    int nruns;                         /**< 1 .. SW_POOL_MAX_RUNS */
    int64_t i0[SW_POOL_MAX_RUNS];      /**< first local position of each run */
    int64_t pos0[SW_POOL_MAX_RUNS];    /**< its global position */
    int32_t len[SW_ATTN_MAX_SEQS];     /**< valid positions of each sequence, >= 1 */
} sw_pool_lengths;
/** sw_pool_fwd over the valid positions only, each sequence scaled by
 * alpha / len[b] (mean pooling of a padded batch: alpha 1); L NULL:
 * sw_pool_fwd, bit for bit. */
void sw_pool_fwd_len(starpu_data_handle_t x, starpu_data_handle_t y, int64_t p0, int64_t np, float alpha,
                     const sw_pool_lengths *L);
/** Its backward: dx = (alpha / len[b]) dy[b] on the valid rows among p0 .. p0+np-1, 0 elsewhere. */
void sw_pool_bwd_len(starpu_data_handle_t dy, starpu_data_handle_t dx, int64_t p0, int64_t np, float alpha,
                     const sw_pool_lengths *L);

/* ---- mean squared error (codelets/mse.c) ---- */
/** out[1,1] (W) = alpha * sum (pred - tgt)^2, summed in double */
void sw_mse_fwd(starpu_data_handle_t pred, starpu_data_handle_t tgt, starpu_data_handle_t out, float alpha);
/** dpred (W) = 2 alpha (pred - tgt) */
void sw_mse_bwd(starpu_data_handle_t pred, starpu_data_handle_t tgt, starpu_data_handle_t dpred, float alpha);

/* ---- diffusion-transformer ops (codelets/modulate.c, silu.c, timestep.c, permute.c) ---- */
/** adaLN modulation: y[n,h] (W) = x * (1 + scale[b]) + shift[b], rows in [s, b]
 * order (row r of sequence r % B), shift and scale [B,h] (may be column
 * blocks of a wider matrix); n a multiple of B. */
void sw_modulate_fwd(starpu_data_handle_t x, starpu_data_handle_t shift, starpu_data_handle_t scale,
                     starpu_data_handle_t y);
/** Its backward: dx (W) = dy * (1 + scale[b]); dshift[b] (W) = sum of dy over
 * sequence b's rows, dscale[b] (W) = sum of dy * x (in double). */
void sw_modulate_bwd(starpu_data_handle_t x, starpu_data_handle_t scale, starpu_data_handle_t dy,
                     starpu_data_handle_t dx, starpu_data_handle_t dshift, starpu_data_handle_t dscale);
/** Gated residual: out[n,h] (W) = res + gate[b] * branch (rows as sw_modulate_fwd). */
void sw_gate_fwd(starpu_data_handle_t res, starpu_data_handle_t gate, starpu_data_handle_t branch,
                 starpu_data_handle_t out);
/** Its backward: dbranch (W) = gate[b] * dy; dgate[b] (W) = sum of dy * branch over sequence b's rows. */
void sw_gate_bwd(starpu_data_handle_t branch, starpu_data_handle_t gate, starpu_data_handle_t dy,
                 starpu_data_handle_t dbranch, starpu_data_handle_t dgate);
/** y = silu(x) = x sigmoid(x) (W), same shapes. */
void sw_silu_fwd(starpu_data_handle_t x, starpu_data_handle_t y);
/** SiLU's backward: grad (RW): dy on entry, dx = dy * silu'(x) on return. */
void sw_silu_bwd(starpu_data_handle_t x, starpu_data_handle_t grad);
/** Sinusoidal timestep features: y[B,dim] (W) = [cos(t f) | sin(t f)] (a zero
 * column more for an odd dim), f_i = exp(-ln(max_period) i / (dim/2)), t one
 * value per row of y; dim >= 2, max_period > 1. */
void sw_timestep_fwd(starpu_data_handle_t t, starpu_data_handle_t y, float max_period);
/** Row permutation: y (W) row (i2 n1 + i1) n3 + i3 = x row (i1 n2 + i2) n3 + i3
 * (x, y [n1 n2 n3, C]); sw_swap_rows(y, x, n2, n1, n3) is its inverse. */
void sw_swap_rows(starpu_data_handle_t x, starpu_data_handle_t y, int64_t n1, int64_t n2, int64_t n3);

/* ---- gradient-norm clipping (codelets/clip.c) ---- */
/** For gradient-norm clipping:
 * out[1,1] = (accumulate ? out : 0) + alpha * sum x^2 (summed in double;
 * out W, or RW with accumulate) */
void sw_sumsq(starpu_data_handle_t x, starpu_data_handle_t out, double alpha, int accumulate);
/** x (RW) *= min(1, max_norm / (sqrt(n2) + 1e-6)), n2 [1,1] the squared global norm */
void sw_clip(starpu_data_handle_t x, starpu_data_handle_t n2, float max_norm);

/* ---- AdamW (codelets/adamw.c), decoupled weight decay ---- */
/** The hyperparameters of an AdamW update (sw_adamw). */
typedef struct sw_adamw_args {
    ///@{
    float lr, beta1, beta2, eps, weight_decay; /**< learning rate, moment decays, epsilon, decoupled weight decay */
    ///@}
    int step;               /**< 1-based, for bias correction */
} sw_adamw_args;
/** AdamW with decoupled weight decay: param, m, v (RW) updated from grad
 * (R), all of the same shape. */
void sw_adamw(starpu_data_handle_t param, starpu_data_handle_t grad, starpu_data_handle_t m,
              starpu_data_handle_t v, const sw_adamw_args *a);

#ifdef __cplusplus
}
#endif
#endif
