/* Every codelet on a CPU worker and on a CUDA worker, same inputs
 * (sw_set_task_where), results compared: the CUDA implementations compute
 * what the CPU ones do (the CPU ones are tested against double references
 * in test_<op>). Skipped (exit 77) in builds without CUDA and where StarPU
 * has no CUDA worker; tests/test_cuda_emu checks the kernels without a GPU.
 *
 * Each case builds its tensors from fixed seeds, submits the ops (some on
 * strided column tiles) and reads its outputs; it runs once restricted to
 * CPU workers and once to CUDA workers. Tolerances: bit-identical for
 * dropout (masks and values), embedding, adds, copies and products (the
 * same fp32 operations in the same order); otherwise |cuda - cpu| <= tol
 * |cpu| + tol/100 max|cpu| (REL) or tol max|cpu| (MAXREL: GEMM, whose sums
 * cuBLAS orders its own way, AdamW, whose m = b1 m + (1 - b1) g cancels, and
 * RoPE, whose a cos - b sin cancels), with tol 1e-4 for attention and 2e-5
 * or less elsewhere (reductions in another order, fused multiply-adds,
 * CUDA's 2-ulp cosf/sinf). */
#include "config.h"

#ifndef STARWEAVE_USE_CUDA
#include <stdio.h>
int main(void)
{
    printf("SKIP: built without CUDA (configure --enable-cuda)\n");
    return 77;
}
#else
#include <string.h>

#include "testutil.h"

#define MAXOUT 8
typedef struct {
    int n;
    const char *name[MAXOUT];
    float *v[MAXOUT];
    int64_t len[MAXOUT];
} outputs;

static void keep(outputs *o, const char *name, sw_tensor *t)
{
    if (o->n == MAXOUT) abort();
    o->name[o->n] = name;
    o->len[o->n] = sw_tensor_numel(t);
    o->v[o->n++] = tu_read(t);
}

static sw_tensor *T(const char *name, int64_t R, int64_t C, uint64_t seed, float scale)
{
    sw_tensor *t = tu_tensor(name, R, C, NULL);
    float *x = malloc(sizeof(float) * (size_t)(R * C));
    if (!x) exit(99);
    if (scale > 0) tu_rand(x, R * C, seed, scale);
    else memset(x, 0, sizeof(float) * (size_t)(R * C));
    sw_tensor_write_host(t, x);
    free(x);
    return t;
}

static sw_tensor *TI(const char *name, int64_t n, int32_t lo, int32_t span)
{
    sw_tensor *t = sw_tensor_new2d(name, SW_I32, n, 1);
    int32_t *x = malloc(sizeof(int32_t) * (size_t)n);
    if (!x) exit(99);
    for (int64_t i = 0; i < n; i++) x[i] = lo + (int32_t)((i * 7919) % span);
    sw_tensor_write_host(t, x);
    free(x);
    return t;
}

static void free_all(sw_tensor **t, int n)
{
    for (int i = 0; i < n; i++) sw_tensor_free(t[i]);
}

#define RD(t) sw_tensor_whole((t), STARPU_R)
#define W(t) sw_tensor_whole((t), STARPU_W)
#define RW(t) sw_tensor_whole((t), STARPU_RW)
#define FREE(...)                                                          \
    do {                                                                   \
        sw_tensor *all_[] = {__VA_ARGS__};                                 \
        free_all(all_, (int)(sizeof all_ / sizeof all_[0]));               \
    } while (0)

/* ---------------- cases ---------------- */

static void c_gemm(outputs *o)
{
    /* C = A B^T + beta C on column tiles of C (strided), and A^T B */
    sw_tensor *A = T("A", 96, 160, 1, 1), *B = T("B", 200, 160, 2, 1), *C = T("C", 96, 200, 3, 1);
    sw_tensor *D = T("D", 160, 160, 0, 0), *bias = T("bias", 1, 200, 4, 1), *E = T("E", 96, 200, 0, 0);
    starpu_data_handle_t *bt = sw_tensor_tiles(B, SW_ROWS, 2, STARPU_R);
    starpu_data_handle_t *ct = sw_tensor_tiles(C, SW_COLS, 2, STARPU_RW);
    for (int i = 0; i < 2; i++) sw_gemm(RD(A), 0, bt[i], 1, ct[i], 0.5f, 1.0f);
    sw_gemm(RD(A), 1, RD(A), 0, W(D), 1.0f, 0.0f);
    sw_gemm_bias(RD(A), 0, RD(B), 1, RD(bias), W(E));
    keep(o, "gemm A B^T + C (strided tiles)", C);
    keep(o, "gemm A^T A", D);
    keep(o, "gemm_bias", E);
    FREE(A, B, C, D, bias, E);
}

/* fp32 -> bf16 on strided column tiles, back to fp32 on row tiles */
static void c_cast(outputs *o)
{
    sw_tensor *X = T("x", 70, 130, 11, 3), *H = sw_tensor_new2d("x16", SW_BF16, 70, 130), *Y = T("y", 70, 130, 0, 0);
    starpu_data_handle_t *xt = sw_tensor_tiles(X, SW_COLS, 3, STARPU_R), *ht = sw_tensor_tiles(H, SW_COLS, 3, STARPU_W);
    for (int j = 0; j < 3; j++) sw_cast(xt[j], ht[j]);
    starpu_data_handle_t *hr = sw_tensor_tiles(H, SW_ROWS, 2, STARPU_R), *yt = sw_tensor_tiles(Y, SW_ROWS, 2, STARPU_W);
    for (int i = 0; i < 2; i++) sw_cast(hr[i], yt[i]);
    keep(o, "fp32 -> bf16 -> fp32", Y);
    FREE(X, H, Y);
}

/* bf16 operands (cuBLAS GemmEx, fp32 accumulation): strided tiles, transposes, bias */
static void c_gemm_bf16(outputs *o)
{
    sw_tensor *A = T("A", 96, 160, 1, 1), *B = T("B", 200, 160, 2, 1), *C = T("C", 96, 200, 3, 1);
    sw_tensor *A16 = sw_tensor_new2d("A16", SW_BF16, 96, 160), *B16 = sw_tensor_new2d("B16", SW_BF16, 200, 160);
    sw_tensor *D = T("D", 160, 160, 0, 0), *bias = T("bias", 1, 200, 4, 1), *E = T("E", 96, 200, 0, 0);
    sw_cast(RD(A), W(A16));
    sw_cast(RD(B), W(B16));
    starpu_data_handle_t *bt = sw_tensor_tiles(B16, SW_ROWS, 2, STARPU_R);
    starpu_data_handle_t *ct = sw_tensor_tiles(C, SW_COLS, 2, STARPU_RW);
    for (int i = 0; i < 2; i++) sw_gemm(RD(A16), 0, bt[i], 1, ct[i], 0.5f, 1.0f);
    sw_gemm(RD(A16), 1, RD(A16), 0, W(D), 1.0f, 0.0f);
    sw_gemm_bias(RD(A16), 0, RD(B16), 1, RD(bias), W(E));
    keep(o, "bf16 gemm A B^T + C (strided tiles)", C);
    keep(o, "bf16 gemm A^T A", D);
    keep(o, "bf16 gemm_bias", E);
    FREE(A, B, C, A16, B16, D, bias, E);
}

static void c_norms(outputs *o)
{
    const int64_t R = 64, C = 384;
    sw_tensor *x = T("x", R, C, 5, 2), *w = T("w", 1, C, 6, 1), *b = T("b", 1, C, 7, 1), *y = T("y", R, C, 0, 0);
    sw_tensor *m = T("m", R, 1, 0, 0), *s = T("s", R, 1, 0, 0), *dy = T("dy", R, C, 8, 1), *dx = T("dx", R, C, 9, 1);
    sw_tensor *dw = T("dw", 1, C, 0, 0), *db = T("db", 1, C, 0, 0), *y2 = T("y2", R, C, 0, 0);
    sw_tensor *s2 = T("s2", R, 1, 0, 0);
    sw_tensor *dx2 = T("dx2", R, C, 0, 0), *dw2 = T("dw2", 1, C, 0, 0);
    sw_layernorm_fwd(RD(x), RD(w), RD(b), W(y), W(m), W(s), 1e-5f);
    sw_layernorm_bwd(RD(dy), RD(x), RD(w), RD(m), RD(s), RW(dx), W(dw), W(db), 1);
    sw_rmsnorm_fwd(RD(x), RD(w), W(y2), W(s2), 1e-5f);
    sw_rmsnorm_bwd(RD(dy), RD(x), RD(w), RD(s2), W(dx2), W(dw2), 0);
    keep(o, "layernorm y", y), keep(o, "layernorm rstd", s), keep(o, "layernorm dx (+=)", dx);
    keep(o, "layernorm dw", dw), keep(o, "layernorm db", db);
    keep(o, "rmsnorm y", y2), keep(o, "rmsnorm dx", dx2), keep(o, "rmsnorm dw", dw2);
    FREE(x, w, b, y, m, s, dy, dx, dw, db, y2, s2, dx2, dw2);
}

static void c_pointwise(outputs *o)
{
    const int64_t R = 48, C = 1000;
    sw_tensor *x = T("x", R, C, 10, 6), *y = T("y", R, C, 0, 0), *g = T("g", R, C, 11, 1), *sy = T("sy", R, C, 0, 0);
    sw_tensor *sdx = T("sdx", R, C, 0, 0);
    starpu_data_handle_t *xt = sw_tensor_tiles(x, SW_COLS, 3, STARPU_R), *yt = sw_tensor_tiles(y, SW_COLS, 3, STARPU_W);
    for (int i = 0; i < 3; i++) sw_gelu_fwd(xt[i], yt[i]);
    sw_gelu_bwd(RD(x), RW(g));
    sw_softmax_fwd(RD(x), W(sy));
    sw_softmax_bwd(RD(sy), RD(g), W(sdx));
    keep(o, "gelu fwd (strided tiles)", y), keep(o, "gelu bwd", g);
    keep(o, "softmax fwd", sy), keep(o, "softmax bwd", sdx);
    FREE(x, y, g, sy, sdx);
}

/* LLaMA's element-wise ops: SwiGLU on strided column tiles, the product */
static void c_swiglu(outputs *o)
{
    const int64_t R = 48, C = 1000;
    sw_tensor *g = T("gate", R, C, 40, 8), *u = T("up", R, C, 41, 2), *dy = T("dy", R, C, 42, 1);
    sw_tensor *y = T("y", R, C, 0, 0), *dg = T("dgate", R, C, 0, 0), *du = T("dup", R, C, 0, 0);
    starpu_data_handle_t *gt = sw_tensor_tiles(g, SW_COLS, 3, STARPU_R), *ut = sw_tensor_tiles(u, SW_COLS, 3, STARPU_R);
    starpu_data_handle_t *yt = sw_tensor_tiles(y, SW_COLS, 3, STARPU_W);
    for (int i = 0; i < 3; i++) sw_swiglu_fwd(gt[i], ut[i], yt[i]);
    sw_swiglu_bwd(RD(g), RD(u), RD(dy), W(dg), W(du));
    keep(o, "swiglu fwd (strided tiles)", y), keep(o, "swiglu dgate", dg), keep(o, "swiglu dup", du);
    FREE(g, u, dy, y, dg, du);
}

static void c_mul(outputs *o)
{
    const int64_t R = 33, C = 700;
    sw_tensor *x = T("x", R, C, 43, 3), *y = T("y", R, C, 44, 3), *z = T("z", R, C, 0, 0);
    sw_mul(RD(x), RD(y), W(z));
    keep(o, "mul", z);
    FREE(x, y, z);
}

/* RoPE on the q | k column blocks of a fused qkv matrix, rows from global
 * row 5 of a batch of 2 at positions from 300; then the inverse of a gradient */
static void c_rope(outputs *o)
{
    const int64_t R = 96;
    const int d = 64, batch = 2;
    sw_tensor *qkv = T("qkv", R, 8 * d, 45, 1), *g = T("g", R, 4 * d, 46, 1);
    starpu_data_handle_t *b = sw_tensor_split(qkv, SW_COLS, 3, (int64_t[]){4 * d, 2 * d, 2 * d}, STARPU_RW);
    sw_rope(b[0], d, 10000.0f, 5, batch, 300, 0);
    sw_rope(b[1], d, 10000.0f, 5, batch, 300, 0);
    sw_rope(RW(g), d, 10000.0f, 5, batch, 300, 1);
    keep(o, "rope q, k column blocks (v untouched)", qkv), keep(o, "rope inverse", g);
    FREE(qkv, g);
}

static void c_dropout(outputs *o)
{
    const int64_t R = 40, C = 768;
    sw_tensor *x = T("x", R, C, 12, 1), *y = T("y", R, C, 0, 0), *g = T("g", R, C, 13, 1);
    sw_rng_key k;
    memset(&k, 0, sizeof k);
    k.seed = 99, k.step = 4, k.layer = 3, k.op = 1, k.ld_global = C, k.batch0 = 1, k.batch_local = 4,
    k.batch_global = 8;
    starpu_data_handle_t *xt = sw_tensor_tiles(x, SW_COLS, 2, STARPU_R), *yt = sw_tensor_tiles(y, SW_COLS, 2, STARPU_W);
    for (int i = 0; i < 2; i++) {
        sw_rng_key ki = k;
        ki.col0 = i * (C / 2);
        sw_dropout_fwd(xt[i], yt[i], 0.25f, &ki);
    }
    sw_dropout_bwd(RW(g), 0.25f, &k);
    keep(o, "dropout fwd (column tiles)", y), keep(o, "dropout bwd", g);
    FREE(x, y, g);
}

static void c_adds(outputs *o)
{
    const int64_t R = 33, C = 700;
    sw_tensor *x = T("x", R, C, 14, 1), *y = T("y", R, C, 15, 1), *z = T("z", R, C, 0, 0), *b = T("b", 1, C, 16, 1);
    sw_tensor *s = T("s", 1, C, 17, 1), *f = T("f", 7, 3300, 0, 0);
    sw_add(RD(x), RD(y), W(z));
    sw_axpy(-0.5f, RD(x), RW(y));
    sw_bias_add(RW(x), RD(b));
    sw_colsum(RD(z), RW(s), 2.0f, 0.5f);
    sw_copy_flat(RD(z), W(f), 0);
    sw_copy_flat(RD(x), RW(f), 1);
    keep(o, "add", z), keep(o, "axpy", y), keep(o, "bias_add", x), keep(o, "colsum", s), keep(o, "copy_flat", f);
    FREE(x, y, z, b, s, f);
}

static void c_embedding(outputs *o)
{
    const int64_t n = 64, c = 256, V = 50, P = 40;
    sw_tensor *tok = TI("tok", n, 0, 70), *wte = T("wte", V, c, 18, 1), *wpe = T("wpe", P, c, 19, 1);
    sw_tensor *x = T("x", n, c, 0, 0), *dx = T("dx", n, c, 20, 1), *dwte = T("dwte", V, c, 21, 1);
    sw_tensor *dwpe = T("dwpe", P, c, 0, 0);
    sw_embedding_fwd(RD(tok), RD(wte), RD(wpe), W(x), 4, 2, 3, 10, 1);
    sw_embedding_bwd(RD(tok), RD(dx), RW(dwte), W(dwpe), 4, 2, 3, 10, 1);
    keep(o, "embedding fwd", x), keep(o, "embedding dwte", dwte), keep(o, "embedding dwpe", dwpe);
    FREE(tok, wte, wpe, x, dx, dwte, dwpe);
}

static void c_crossentropy(outputs *o)
{
    const int64_t n = 32, vb = 1200;
    sw_tensor *l = T("logits", n, vb, 22, 5), *t = TI("t", n, 90, 1200), *mx = T("mx", n, 1, 0, 0);
    sw_tensor *tg = T("tgt", n, 1, 0, 0), *se = T("se", n, 1, 0, 0), *loss = T("loss", n, 1, 0, 0);
    sw_ce_max(RD(l), W(mx), 100, 1250);
    sw_ce_target(RD(l), RD(t), W(tg), 100);
    sw_ce_sumexp(RD(l), RD(mx), W(se), 100, 1250);
    sw_ce_loss(RD(mx), RD(tg), RD(se), W(loss));
    sw_ce_bwd(RW(l), RD(mx), RD(se), RD(t), 100, 1250, 1.0f / 32);
    keep(o, "ce max", mx), keep(o, "ce target", tg), keep(o, "ce sumexp", se), keep(o, "ce loss", loss);
    keep(o, "ce bwd", l);
    FREE(l, t, mx, tg, se, loss);
}

static void c_adamw(outputs *o)
{
    sw_tensor *p = T("p", 30, 500, 23, 1), *g = T("g", 30, 500, 24, 1), *m = T("m", 30, 500, 25, 0.01f);
    sw_tensor *v = T("v", 30, 500, 0, 0);
    sw_adamw_args a = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 1};
    for (int s = 1; s <= 3; s++) {
        a.step = s;
        sw_adamw(RW(p), RD(g), RW(m), RW(v), &a);
    }
    keep(o, "adamw param", p), keep(o, "adamw m", m), keep(o, "adamw v", v);
    FREE(p, g, m, v);
}

/* Ring-attention pattern: two key blocks merged, then the backward on the
 * head-group column tiles (GQA 4/2, causal, dropout, accumulate). */
static void c_attention(outputs *o)
{
    const int B = 2, nh = 4, nkv = 2, d = 64, s = 96;
    const int64_t rq = (int64_t)s * B;
    sw_tensor *q = T("q", rq, nh * d, 26, 1), *k = T("k", rq, nkv * d, 27, 1), *v = T("v", rq, nkv * d, 28, 1);
    sw_tensor *out = T("o", rq, nh * d, 0, 0), *lse = T("lse", rq, nh, 0, 0), *dout = T("do", rq, nh * d, 29, 1);
    sw_tensor *dq = T("dq", rq, nh * d, 30, 1), *dk = T("dk", rq, nkv * d, 0, 0), *dv = T("dv", rq, nkv * d, 0, 0);
    sw_attn_args a;
    memset(&a, 0, sizeof a);
    a.batch = B, a.nh = nh, a.nkv = nkv, a.d = d, a.sq = s, a.causal = 1, a.scale = 0.125f, a.dropout = 0.1f;
    a.key.seed = 5, a.key.step = 1, a.key.layer = 2, a.key.op = 7, a.heads_total = nh, a.seq_total = s;
    const int64_t half = (int64_t)(s / 2) * B;
    starpu_data_handle_t *kt = sw_tensor_split(k, SW_ROWS, 2, (int64_t[]){half, half}, STARPU_R);
    starpu_data_handle_t *vt = sw_tensor_split(v, SW_ROWS, 2, (int64_t[]){half, half}, STARPU_R);
    a.sk = s / 2;
    sw_attn_fwd(RD(q), kt[0], vt[0], W(out), W(lse), &a);
    a.k_pos0 = s / 2, a.merge = 1;
    sw_attn_fwd(RD(q), kt[1], vt[1], RW(out), RW(lse), &a);
    keep(o, "attention fwd o (merged)", out), keep(o, "attention fwd lse", lse);
    a.sk = s, a.k_pos0 = 0, a.merge = 0, a.accumulate = 1;
    sw_attn_bwd(RD(q), RD(k), RD(v), RD(out), RD(lse), RD(dout), RW(dq), RW(dk), RW(dv), &a);
    keep(o, "attention dq", dq), keep(o, "attention dk", dk), keep(o, "attention dv", dv);
    FREE(q, k, v, out, lse, dout, dq, dk, dv);
}

/* Attention with saved probabilities on the head-group column tiles (GQA
 * 4/2, two tasks of one K/V group each), causal with positions past the
 * first keys, dropout; then the backward from the probs, dq written and
 * dk, dv accumulated. */
static void c_attention_probs(outputs *o)
{
    const int B = 2, nh = 4, nkv = 2, d = 64, s = 80, G = 2; /* s: two query tiles, one partial */
    const int64_t rq = (int64_t)s * B;
    sw_tensor *q = T("q", rq, nh * d, 31, 1), *k = T("k", rq, nkv * d, 32, 1), *v = T("v", rq, nkv * d, 33, 1);
    sw_tensor *out = T("o", rq, nh * d, 0, 0), *lse = T("lse", rq, nh, 0, 0), *dout = T("do", rq, nh * d, 34, 1);
    sw_tensor *dq = T("dq", rq, nh * d, 0, 0), *dk = T("dk", rq, nkv * d, 35, 1), *dv = T("dv", rq, nkv * d, 36, 1);
    sw_attn_args a;
    memset(&a, 0, sizeof a);
    a.batch = B, a.nh = nh / G, a.nkv = nkv / G, a.d = d, a.sq = s, a.sk = s, a.causal = 1, a.scale = 0.125f;
    a.q_pos0 = 5, a.k_pos0 = 0, a.dropout = 0.1f, a.kv_accumulate = 1;
    a.key.seed = 6, a.key.step = 2, a.key.layer = 1, a.key.op = 3, a.heads_total = nh, a.seq_total = s + 5;
    starpu_data_handle_t *qt = sw_tensor_tiles(q, SW_COLS, G, STARPU_R), *kt = sw_tensor_tiles(k, SW_COLS, G, STARPU_R);
    starpu_data_handle_t *vt = sw_tensor_tiles(v, SW_COLS, G, STARPU_R);
    starpu_data_handle_t *ot = sw_tensor_tiles(out, SW_COLS, G, STARPU_W);
    starpu_data_handle_t *lt = sw_tensor_tiles(lse, SW_COLS, G, STARPU_W);
    starpu_data_handle_t *gt = sw_tensor_tiles(dout, SW_COLS, G, STARPU_R);
    starpu_data_handle_t *dqt = sw_tensor_tiles(dq, SW_COLS, G, STARPU_W);
    starpu_data_handle_t *dkt = sw_tensor_tiles(dk, SW_COLS, G, STARPU_RW);
    starpu_data_handle_t *dvt = sw_tensor_tiles(dv, SW_COLS, G, STARPU_RW);
    /* one probs tensor per task: [B * (nh/G) * s, s] */
    sw_tensor *pg[2];
    for (int g = 0; g < G; g++) {
        pg[g] = T(g ? "probs1" : "probs0", (int64_t)B * a.nh * s, s, 0, 0);
        a.head0 = g * a.nh;
        sw_attn_probs_fwd(qt[g], kt[g], vt[g], ot[g], lt[g], W(pg[g]), &a);
        sw_attn_probs_bwd(qt[g], kt[g], vt[g], RD(pg[g]), gt[g], dqt[g], dkt[g], dvt[g], &a);
    }
    keep(o, "attention_probs fwd o (GQA column tiles)", out), keep(o, "attention_probs fwd lse", lse);
    keep(o, "attention_probs probs (group 0)", pg[0]), keep(o, "attention_probs probs (group 1)", pg[1]);
    keep(o, "attention_probs dq", dq), keep(o, "attention_probs dk (+=)", dk);
    keep(o, "attention_probs dv (+=)", dv);
    FREE(q, k, v, out, lse, dout, dq, dk, dv, pg[0], pg[1]);
}

/* ---------------- driver ---------------- */

typedef enum { BITS, REL, MAXREL } tol_kind;
typedef struct {
    const char *name;
    void (*run)(outputs *);
    tol_kind kind;
    double tol;
} test_case;

static void compare(const test_case *tc, const outputs *cpu, const outputs *gpu)
{
    for (int i = 0; i < cpu->n; i++) {
        const int64_t n = cpu->len[i];
        char what[256];
        snprintf(what, sizeof what, "%s: CUDA vs CPU", cpu->name[i]);
        if (tc->kind == BITS) {
            int64_t bad = 0;
            for (int64_t j = 0; j < n; j++) bad += memcmp(&cpu->v[i][j], &gpu->v[i][j], sizeof(float)) != 0;
            char buf[400];
            snprintf(buf, sizeof buf, "%s: bit-identical (%lld of %lld differ)", what, (long long)bad, (long long)n);
            tu_true(buf, bad == 0);
            continue;
        }
        double *ref = malloc(sizeof(double) * (size_t)n);
        if (!ref) exit(99);
        tu_to_double(ref, cpu->v[i], n);
        const double mx = tu_maxabs(ref, n); /* the lse of masked rows is -inf */
        const double rtol = tc->kind == REL ? tc->tol : 0.0;
        const double atol = tc->kind == REL ? tc->tol * 1e-2 * mx : tc->tol * mx;
        tu_close(what, gpu->v[i], ref, n, rtol, atol);
        free(ref);
    }
}

int main(int argc, char **argv)
{
    sw_options opt;
    sw_options_default(&opt);
    opt.quiet = 1;
    opt.ncuda = 1; /* whatever $STARPU_NCUDA says (make check sets 0) */
    if (sw_init(&argc, &argv, &opt) != 0) {
        printf("SKIP: StarPU could not start\n");
        return 77;
    }
    if (sw_ncuda() == 0 || sw_ncpus() == 0) {
        printf("SKIP: no CUDA worker (%d CUDA, %d CPU workers; the test needs one of each)\n", sw_ncuda(), sw_ncpus());
        sw_shutdown();
        return 77;
    }
    const test_case cases[] = {
        {"gemm", c_gemm, MAXREL, 1e-4},
        {"cast", c_cast, BITS, 0},
        {"bf16 gemm", c_gemm_bf16, MAXREL, 1e-4},
        {"norms", c_norms, REL, 2e-5},
        {"gelu/softmax", c_pointwise, REL, 2e-5},
        {"swiglu", c_swiglu, REL, 2e-5},
        {"mul", c_mul, BITS, 0},
        {"rope", c_rope, MAXREL, 1e-6}, /* cancellation in a cos - b sin: absolute errors */
        {"dropout", c_dropout, BITS, 0},
        {"adds", c_adds, REL, 1e-6}, /* axpy and colsum may fuse; the rest is exact */
        {"embedding", c_embedding, BITS, 0},
        {"cross-entropy", c_crossentropy, REL, 2e-5},
        {"adamw", c_adamw, MAXREL, 1e-5},
        {"attention", c_attention, REL, 1e-4},
        {"attention_probs", c_attention_probs, REL, 1e-4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        outputs cpu = {0}, gpu = {0};
        sw_set_task_where(STARPU_CPU);
        cases[i].run(&cpu);
        sw_set_task_where(STARPU_CUDA);
        cases[i].run(&gpu);
        sw_set_task_where(0);
        compare(&cases[i], &cpu, &gpu);
        for (int j = 0; j < cpu.n; j++) free(cpu.v[j]), free(gpu.v[j]);
    }
    return tu_finish();
}
#endif
