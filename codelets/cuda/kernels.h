/* Launchers of the CUDA kernels (codelets/cuda/<op>.cu), called by the CUDA
 * functions of the codelets (codelets/<op>.c). Each enqueues its kernels on
 * the given stream (the StarPU worker's) and returns at once with
 * cudaGetLastError(); nothing synchronises (the codelets are
 * STARPU_CUDA_ASYNC). Pointers are device pointers; matrices are row-major
 * with a leading dimension ld (elements), vectors have an element stride
 * inc. Every kernel evaluates the same formula as the CPU function of its
 * codelet (fp32, with the same double accumulations where the CPU uses
 * them); only the summation order of reductions differs. */
#ifndef STARWEAVE_CUDA_KERNELS_H
#define STARWEAVE_CUDA_KERNELS_H

#include <stdint.h>
#ifndef SW_CUDA_EMU
#include <cuda_runtime_api.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- gemm.cu: c[r, j] = bias[j * incb] for r < m, j < n (before cuBLAS adds A B) */
cudaError_t sw_cuda_bias_rows(float *c, int64_t ldc, const float *bias, int64_t incb, int64_t m, int64_t n,
                              cudaStream_t s);

/* ---- cast.cu: fp32 <-> bf16 (bf16.h), strided rows ---- */
cudaError_t sw_cuda_cast_to_bf16(const float *s, int64_t lds, uint16_t *d, int64_t ldd, int64_t R, int64_t C,
                                 cudaStream_t st);
cudaError_t sw_cuda_cast_from_bf16(const uint16_t *s, int64_t lds, float *d, int64_t ldd, int64_t R, int64_t C,
                                   cudaStream_t st);

/* ---- layernorm.cu ---- */
cudaError_t sw_cuda_layernorm_fwd(const float *x, int64_t ldx, const float *w, int64_t incw, const float *b,
                                  int64_t incb, float *y, int64_t ldy, float *mean, int64_t incm, float *rstd,
                                  int64_t incr, int64_t R, int64_t C, float eps, cudaStream_t s);
cudaError_t sw_cuda_layernorm_bwd(const float *dy, int64_t lddy, const float *x, int64_t ldx, const float *w,
                                  int64_t incw, const float *mean, int64_t incm, const float *rstd, int64_t incr,
                                  float *dx, int64_t lddx, float *dw, int64_t incdw, float *db, int64_t incdb,
                                  int64_t R, int64_t C, int accumulate, cudaStream_t s);

/* ---- rmsnorm.cu ---- */
cudaError_t sw_cuda_rmsnorm_fwd(const float *x, int64_t ldx, const float *w, int64_t incw, float *y, int64_t ldy,
                                float *rstd, int64_t incr, int64_t R, int64_t C, float eps, cudaStream_t s);
cudaError_t sw_cuda_rmsnorm_bwd(const float *dy, int64_t lddy, const float *x, int64_t ldx, const float *w,
                                int64_t incw, const float *rstd, int64_t incr, float *dx, int64_t lddx, float *dw,
                                int64_t incdw, int64_t R, int64_t C, int accumulate, cudaStream_t s);

/* ---- gelu.cu ---- */
cudaError_t sw_cuda_gelu_fwd(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t R, int64_t C,
                             cudaStream_t s);
cudaError_t sw_cuda_gelu_bwd(const float *x, int64_t ldx, float *g, int64_t ldg, int64_t R, int64_t C,
                             cudaStream_t s);

/* ---- swiglu.cu: y = silu(gate) * up; dgate, dup written ---- */
cudaError_t sw_cuda_swiglu_fwd(const float *g, int64_t ldg, const float *u, int64_t ldu, float *y, int64_t ldy,
                               int64_t R, int64_t C, cudaStream_t s);
cudaError_t sw_cuda_swiglu_bwd(const float *g, int64_t ldg, const float *u, int64_t ldu, const float *dy,
                               int64_t lddy, float *dg, int64_t lddg, float *du, int64_t lddu, int64_t R, int64_t C,
                               cudaStream_t s);

/* ---- clip.cu: out[0] (+)= alpha * sum x^2 (one block); x *= min(1, max_norm / (sqrt(n2[0]) + 1e-6)) ---- */
cudaError_t sw_cuda_sumsq(const float *x, int64_t ld, int64_t R, int64_t C, float *out, double alpha, int accumulate,
                          cudaStream_t s);
cudaError_t sw_cuda_clip(float *x, int64_t ld, int64_t R, int64_t C, const float *n2, float max_norm, cudaStream_t s);

/* ---- pool.cu: y[b,c] = alpha sum_{i in [p0, p0+np)} x[i B + b, c]; dx = alpha dy on those rows, 0 elsewhere ---- */
/* with per-sequence lengths (L->on): position i of sequence b counts iff its global position
 * (run j: pos0[j] + i - i0[j]) is below len[b], each sequence scaled by alpha / len[b] (in double) */
#define SW_CUDA_POOL_RUNS 4
#define SW_CUDA_POOL_SEQS 64
typedef struct sw_cuda_pool_len {
    int on, nruns;
    int64_t i0[SW_CUDA_POOL_RUNS], pos0[SW_CUDA_POOL_RUNS];
    int32_t len[SW_CUDA_POOL_SEQS];
} sw_cuda_pool_len;
cudaError_t sw_cuda_pool_fwd(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t B, int64_t C, int64_t p0,
                             int64_t np, float alpha, const sw_cuda_pool_len *L, cudaStream_t s);
cudaError_t sw_cuda_pool_bwd(const float *dy, int64_t ldy, float *dx, int64_t ldx, int64_t B, int64_t C, int64_t n,
                             int64_t p0, int64_t np, float alpha, const sw_cuda_pool_len *L, cudaStream_t s);

/* ---- mse.cu: out[0] = alpha sum (p - t)^2 (one block); d = 2 alpha (p - t) ---- */
cudaError_t sw_cuda_mse_fwd(const float *p, int64_t ldp, const float *t, int64_t ldt, int64_t R, int64_t C, float *out,
                            float alpha, cudaStream_t s);
cudaError_t sw_cuda_mse_bwd(const float *p, int64_t ldp, const float *t, int64_t ldt, float *d, int64_t ldd, int64_t R,
                            int64_t C, float alpha, cudaStream_t s);

/* ---- modulate.cu: per-sequence vectors [B, C] over rows in [s, b] order (row r: sequence r % B) ----
 * modulate: y = x (1 + sc) + sh; dx = dy (1 + sc), dsh = sum_r dy, dsc = sum_r dy x (double, rows in order)
 * gate: out = res + g br; db = g dy, dg = sum_r dy br */
cudaError_t sw_cuda_modulate_fwd(const float *x, int64_t ldx, const float *sh, int64_t ldsh, const float *sc,
                                 int64_t ldsc, float *y, int64_t ldy, int64_t n, int64_t C, int64_t B, cudaStream_t s);
cudaError_t sw_cuda_modulate_bwd(const float *x, int64_t ldx, const float *sc, int64_t ldsc, const float *dy,
                                 int64_t lddy, float *dx, int64_t lddx, float *dsh, int64_t lddsh, float *dsc,
                                 int64_t lddsc, int64_t n, int64_t C, int64_t B, cudaStream_t s);
cudaError_t sw_cuda_gate_fwd(const float *res, int64_t ldr, const float *g, int64_t ldg, const float *br, int64_t ldb,
                             float *out, int64_t ldo, int64_t n, int64_t C, int64_t B, cudaStream_t s);
cudaError_t sw_cuda_gate_bwd(const float *br, int64_t ldb, const float *g, int64_t ldg, const float *dy, int64_t lddy,
                             float *db, int64_t lddb, float *dg, int64_t lddg, int64_t n, int64_t C, int64_t B,
                             cudaStream_t s);

/* ---- silu.cu: y = x sigmoid(x); g = g silu'(x) in place (the formulas of swiglu.cu) ---- */
cudaError_t sw_cuda_silu_fwd(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t R, int64_t C,
                             cudaStream_t s);
cudaError_t sw_cuda_silu_bwd(const float *x, int64_t ldx, float *g, int64_t ldg, int64_t R, int64_t C,
                             cudaStream_t s);

/* ---- timestep.cu: y[b] = [cos(t_b f_i) | sin(t_b f_i)] (| 0), f_i = exp(-ln(max_period) i / half), in double ---- */
cudaError_t sw_cuda_timestep(const float *t, int64_t inct, float *y, int64_t ldy, int64_t B, int64_t dim,
                             double max_period, cudaStream_t s);

/* ---- permute.cu: rows (i1, i2, i3) of x [n1 n2 n3, C] to rows (i2, i1, i3) of y ---- */
cudaError_t sw_cuda_swap_rows(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t n1, int64_t n2, int64_t n3,
                              int64_t C, cudaStream_t s);

/* ---- mul.cu: z = x * y ---- */
cudaError_t sw_cuda_mul(const float *x, int64_t ldx, const float *y, int64_t ldy, float *z, int64_t ldz, int64_t R,
                        int64_t C, cudaStream_t s);

/* ---- rope.cu: x[R, C] rotated in place, C a multiple of d (d even); the
 * arguments of sw_rope (ops.h) ---- */
cudaError_t sw_cuda_rope(float *x, int64_t ldx, int64_t R, int64_t C, int d, float theta, int64_t row0, int batch,
                         int64_t pos0, int inverse, cudaStream_t s);

/* ---- add.cu ---- */
cudaError_t sw_cuda_add(const float *x, int64_t ldx, const float *y, int64_t ldy, float *z, int64_t ldz, int64_t R,
                        int64_t C, cudaStream_t s);
cudaError_t sw_cuda_axpy(float alpha, const float *x, int64_t ldx, float *y, int64_t ldy, int64_t R, int64_t C,
                         cudaStream_t s);
cudaError_t sw_cuda_bias_add(float *x, int64_t ldx, const float *b, int64_t incb, int64_t R, int64_t C,
                             cudaStream_t s);
cudaError_t sw_cuda_colsum(const float *x, int64_t ldx, float *y, int64_t incy, int64_t R, int64_t C, float alpha,
                           float beta, cudaStream_t s);
cudaError_t sw_cuda_copy_flat(const float *x, int64_t ldx, int64_t R, int64_t C, float *y, int64_t ldy, int64_t RY,
                              int64_t CY, int accumulate, cudaStream_t s);

/* ---- softmax.cu ---- */
cudaError_t sw_cuda_softmax_fwd(const float *x, int64_t ldx, float *y, int64_t ldy, int64_t R, int64_t C,
                                cudaStream_t s);
cudaError_t sw_cuda_softmax_bwd(const float *y, int64_t ldy, const float *dy, int64_t lddy, float *dx, int64_t lddx,
                                int64_t R, int64_t C, cudaStream_t s);

/* ---- dropout.cu: the fields of sw_rng_key (ops.h) the mask reads ---- */
typedef struct sw_cuda_rng {
    uint64_t seed;
    uint32_t step, layer, op;
    int64_t row0, col0, ld_global, batch0, batch_local, batch_global;
} sw_cuda_rng;
/* out[r, c] = keep(r, c) ? in[r, c] * scale : 0 (in == out allowed) */
cudaError_t sw_cuda_dropout(const float *in, int64_t ldi, float *out, int64_t ldo, int64_t R, int64_t C,
                            sw_cuda_rng key, float p, float scale, cudaStream_t s);

/* ---- embedding.cu ---- */
typedef struct sw_cuda_emb {
    int64_t row0, pos0, vocab0;
    int batch, zero_wpe, with_wpe;
    int zero_wte, has_wpe; /* dwte written, not added to; wpe/dwpe given (else NULL) */
} sw_cuda_emb;
cudaError_t sw_cuda_embedding_fwd(const int32_t *tok, int64_t ts, const float *wte, int64_t nv, int64_t ldte,
                                  const float *wpe, int64_t ldpe, float *x, int64_t n, int64_t c, int64_t ldx,
                                  sw_cuda_emb e, cudaStream_t s);
/* one thread per column walks the rows in order: the scatter-adds land in
 * the CPU's order, without atomics */
cudaError_t sw_cuda_embedding_bwd(const int32_t *tok, int64_t ts, const float *dx, int64_t n, int64_t c, int64_t ldx,
                                  float *dwte, int64_t nv, int64_t ldte, float *dwpe, int64_t np, int64_t cp,
                                  int64_t ldpe, sw_cuda_emb e, cudaStream_t s);

/* ---- crossentropy.cu (nv: valid columns of the block) ---- */
cudaError_t sw_cuda_ce_max(const float *x, int64_t n, int64_t ld, int64_t nv, float *mx, int64_t ms, cudaStream_t s);
cudaError_t sw_cuda_ce_target(const float *x, int64_t n, int64_t vb, int64_t ld, const int32_t *t, int64_t tstr,
                              float *tgt, int64_t gs, int64_t vocab0, cudaStream_t s);
cudaError_t sw_cuda_ce_sumexp(const float *x, int64_t n, int64_t ld, int64_t nv, const float *mx, int64_t ms,
                              float *se, int64_t ss, cudaStream_t s);
cudaError_t sw_cuda_ce_loss(const float *mx, int64_t ms, const float *tgt, int64_t ts, const float *se, int64_t ss,
                            float *loss, int64_t ls, int64_t n, cudaStream_t s);
/* rw (NULL: none) [n] stride rs and cnt [1]: each row's scale rw / cnt, 0 rows where rw is 0 */
cudaError_t sw_cuda_ce_bwd(float *x, int64_t n, int64_t vb, int64_t ld, int64_t nv, const float *mx, int64_t ms,
                           const float *se, int64_t ss, const int32_t *t, int64_t tstr, const float *rw, int64_t rs,
                           const float *cnt, int64_t vocab0, float scale, cudaStream_t s);
/* rw = 0 where t is ignore, else w (NULL: 1) */
cudaError_t sw_cuda_ce_weights(const int32_t *t, int64_t ts, int64_t n, const float *w, int64_t ws, int32_t ignore,
                               float *rw, int64_t rs, cudaStream_t s);
/* out[0] = sum rw loss / cnt[0] over n rows (weight-0 rows skipped) */
cudaError_t sw_cuda_ce_mean(const float *loss, int64_t ls, const float *rw, int64_t rs, int64_t n, const float *cnt,
                            float *out, cudaStream_t s);

/* ---- attention.cu: the fields of sw_attn_args (ops.h), nkv resolved ---- */
#define SW_CUDA_ATT_DMAX 256 /* largest head dim of the CUDA attention kernels */
#define SW_CUDA_ATT_MAXSEQ 64 /* = SW_ATTN_MAX_SEQS (ops.h): key lengths per tile */
typedef struct sw_cuda_attn {
    int batch, nh, nkv, d, sq, sk;
    int64_t q_pos0, k_pos0;
    int causal;
    float scale, dropout, inv_keep;
    uint64_t seed;
    uint32_t step, layer, op;
    int64_t batch0;
    int head0, heads_total;
    int64_t seq_total;
    int merge, accumulate, kv_accumulate;
    int key_padding;                       /* 1: batch element b sees the keys at kpos < key_len[b] */
    int32_t key_len[SW_CUDA_ATT_MAXSEQ];
} sw_cuda_attn;
cudaError_t sw_cuda_attn_fwd(const float *q, int64_t ldq, const float *k, int64_t ldk, const float *v, int64_t ldv,
                             float *o, int64_t ldo, float *lse, int64_t ldl, sw_cuda_attn a, cudaStream_t s);
cudaError_t sw_cuda_attn_bwd(const float *q, int64_t ldq, const float *k, int64_t ldk, const float *v, int64_t ldv,
                             const float *o, int64_t ldo, const float *lse, int64_t ldl, const float *dout,
                             int64_t lddo, float *dq, int64_t lddq, float *dk, int64_t lddk, float *dv, int64_t lddv,
                             sw_cuda_attn a, cudaStream_t s);

/* ---- attention_probs.cu: the arguments as for attention.cu (merge 0); probs [batch*nh*sq, sk]
 * (ld ldp) holds P before dropout, row (b*nh + h)*sq + i, masked keys 0. The backward allocates
 * batch*nh*sq floats on the stream (cudaMallocAsync) and frees them there. ---- */
cudaError_t sw_cuda_attn_probs_fwd(const float *q, int64_t ldq, const float *k, int64_t ldk, const float *v,
                                   int64_t ldv, float *o, int64_t ldo, float *lse, int64_t ldl, float *probs,
                                   int64_t ldp, sw_cuda_attn a, cudaStream_t s);
cudaError_t sw_cuda_attn_probs_bwd(const float *q, int64_t ldq, const float *k, int64_t ldk, const float *v,
                                   int64_t ldv, const float *probs, int64_t ldp, const float *dout, int64_t lddo,
                                   float *dq, int64_t lddq, float *dk, int64_t lddk, float *dv, int64_t lddv,
                                   sw_cuda_attn a, cudaStream_t s);

/* ---- adamw.cu: the scalars as the CPU function forms them ---- */
typedef struct sw_cuda_adamw_scalars {
    float b1, b2, c1, c2, eps, decay, step_size, bc2_sqrt;
} sw_cuda_adamw_scalars;
cudaError_t sw_cuda_adamw(float *p, int64_t ldp, const float *g, int64_t ldg, float *m, int64_t ldm, float *v,
                          int64_t ldv, int64_t R, int64_t C, sw_cuda_adamw_scalars a, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
