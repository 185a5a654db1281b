/* Cross-attention (dit.h, graphs/layers/dit.c): queries from the tokens [S B, a d],
 * keys and values from a conditioning sequence of another length
 * [L B, 2 a d] (k heads | v heads), non-causal, multi-head, on the attention
 * tile with sq != sk. On one rank, with 2 tiles (two head-group tasks) and
 * with 1: the output against a double-precision softmax(q k^T / sqrt(d)) v
 * per sample and head, dq and dkv against finite differences of
 * sum(dout * out); the conditioning loaded with sw_ctx_load_cond from a
 * global [L batch, f] array (two micro-batches: each its own samples). A
 * conditioning length of 0 refused (exit 2).
 * The K/V projection (sw_cross_kv, with and without bias, 1 and 2 tiles):
 * kv = cond W^T + b against double precision, dW, db and dcond against
 * finite differences of sum(dkv * kv); over two micro-batches the
 * registry's gradient (sw_params_reduce_grads) is the sum of both (the
 * layer writes each micro-batch's, it does not add); with dtype bf16 the
 * GEMMs' operands bf16 (the reference rounds them alike), the bias and db
 * fp32; cond_dim 0 and a kv of the wrong shape refused. */
#include <string.h>

#include "testutil.h"

enum { S = 5, B = 2, A = 2, D = 4, L = 3, AD = A * D, NQ = S * B, NK = L * B };

static double g_q[NQ * AD], g_kv[NK * 2 * AD], g_dout[NQ * AD];

static void ref_att(const double *q, const double *kv, double *out)
{
    for (int b = 0; b < B; b++)
        for (int h = 0; h < A; h++)
            for (int i = 0; i < S; i++) {
                const double *qi = q + (i * B + b) * AD + h * D;
                double sc[L], m = -INFINITY, z = 0;
                for (int j = 0; j < L; j++) {
                    const double *kj = kv + (j * B + b) * 2 * AD + h * D;
                    sc[j] = 0;
                    for (int c = 0; c < D; c++) sc[j] += qi[c] * kj[c];
                    sc[j] /= sqrt((double)D);
                    if (sc[j] > m) m = sc[j];
                }
                for (int j = 0; j < L; j++) z += (sc[j] = exp(sc[j] - m));
                for (int c = 0; c < D; c++) {
                    double o = 0;
                    for (int j = 0; j < L; j++) o += sc[j] / z * kv[(j * B + b) * 2 * AD + AD + h * D + c];
                    out[(i * B + b) * AD + h * D + c] = o;
                }
            }
}

static double ref_loss(const void *unused)
{
    (void)unused;
    double out[NQ * AD], l = 0;
    ref_att(g_q, g_kv, out);
    for (int i = 0; i < NQ * AD; i++) l += g_dout[i] * out[i];
    return l;
}

/* the K/V projection: cond [NK, CF], W [2 AD, CF], b [2 AD], loss sum(dkv * kv) */
enum { CF = 3, KV = 2 * AD };
static double g_cond[NK * CF], g_w[KV * CF], g_b[KV], g_dkv[NK * KV];

static void ref_kv(double *kv)
{
    for (int r = 0; r < NK; r++)
        for (int o = 0; o < KV; o++) {
            double v = g_b[o];
            for (int i = 0; i < CF; i++) v += g_cond[r * CF + i] * g_w[o * CF + i];
            kv[r * KV + o] = v;
        }
}

static double kv_loss(const void *unused)
{
    (void)unused;
    double kv[NK * KV], l = 0;
    ref_kv(kv);
    for (int i = 0; i < NK * KV; i++) l += g_dkv[i] * kv[i];
    return l;
}

static void make_ctx(sw_ctx *x, sw_params **p, int tiles, int micro)
{
    sw_params_config pc = {.seed = 1, .tiles = tiles, .dtype = SW_F32, .grad_accum = micro, .bucket_mb = 25.0f, .grad_group = SW_GROUP_DP};
    *p = sw_params_new(&pc, NULL);
    sw_ctx_init(x, &(sw_ctx_config){.seq = S, .batch = B, .tp = 1, .ulysses = 1, .ring = 1, .dp = 1,
                                    .grad_accum = micro, .tiles = tiles, .seed = 1}, NULL, *p);
}

static void refuse_len(void *arg)
{
    (void)arg;
    tu_init_child();
    sw_ctx x;
    sw_params *p;
    make_ctx(&x, &p, 1, 1);
    sw_cross_attention_create(&x, A, D, 0);
}

static void refuse_kv_dim(void *arg)
{
    (void)arg;
    tu_init_child();
    sw_ctx x;
    sw_params *p;
    make_ctx(&x, &p, 1, 1);
    sw_cross_kv_add(&x, "kv", 0, AD, 1, 0.1f);
}

/* x rounded to bfloat16 (to nearest, ties to even), as the GEMMs' operands are with dtype bf16 */
static double bf16(double x)
{
    float f = (float)x;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&f, &u, sizeof f);
    return f;
}
static void round_all(double *v, int n, int on)
{
    for (int i = 0; on && i < n; i++) v[i] = bf16(v[i]);
}

static void refuse_kv_shape(void *arg)
{
    (void)arg;
    tu_init_child();
    sw_ctx x;
    sw_params *p;
    make_ctx(&x, &p, 1, 1);
    sw_cross_kv l = sw_cross_kv_add(&x, "kv", CF, AD, 1, 0.1f);
    sw_params_allocate(p);
    sw_tensor *C = tu_tensor("cond", NK, CF, NULL), *KVt = tu_tensor("kv", NK, AD, NULL);
    sw_cross_kv_forward(&x, &l, C, KVt); /* K only: half the columns */
}

/* the K/V projection on one rank: with bias or not, `tiles` tiles, two micro-batches; with dtype
 * bf16 (b16) the GEMMs read bf16 cond, W and dkv (rounded alike in the reference), the bias and db
 * stay fp32 */
static void kv_case(int bias, int tiles, int b16)
{
    static float cond[2][NK * CF], w[KV * CF], b[KV], dkv[2][NK * KV];
    tu_rand(w, KV * CF, 141, 0.5f), tu_rand(b, KV, 142, 0.5f);
    for (int m = 0; m < 2; m++) tu_rand(cond[m], NK * CF, 143 + m, 1.5f), tu_rand(dkv[m], NK * KV, 145 + m, 1.0f);
    sw_ctx x;
    sw_params *p;
    sw_params_config pc = {.seed = 1, .tiles = tiles, .dtype = b16 ? SW_BF16 : SW_F32, .grad_accum = 2, .bucket_mb = 25.0f, .grad_group = SW_GROUP_DP};
    p = sw_params_new(&pc, NULL);
    sw_ctx_init(&x, &(sw_ctx_config){.seq = S, .batch = B, .tp = 1, .ulysses = 1, .ring = 1, .dp = 1,
                                     .grad_accum = 2, .tiles = tiles, .seed = 1}, NULL, p);
    sw_cross_kv l = sw_cross_kv_add(&x, "kv", CF, AD, bias, 0.1f);
    sw_params_allocate(p);
    sw_tensor_write_host(sw_params_value(p, l.lin.w), w);
    if (bias) sw_tensor_write_host(sw_params_value(p, l.lin.b), b);
    if (b16) sw_params_cast_bf16(p);
    const char *dt = b16 ? ", bf16" : "";
    for (int o = 0; o < KV; o++) g_b[o] = bias ? b[o] : 0.0;
    sw_tensor *C = tu_tensor("cond", NK, CF, NULL), *KVt = tu_tensor("kv", NK, KV, NULL);
    sw_tensor *DKV = tu_tensor("dkv", NK, KV, NULL), *DC = tu_tensor("dcond", NK, CF, NULL);
    static double sum_dw[KV * CF], sum_db[KV];
    memset(sum_dw, 0, sizeof sum_dw), memset(sum_db, 0, sizeof sum_db);
    char what[200];
    for (int m = 0; m < 2; m++) {
        sw_tensor_write_host(C, cond[m]), sw_tensor_write_host(DKV, dkv[m]);
        sw_tensor_fill(KVt, NAN), sw_tensor_fill(DC, NAN);
        sw_ctx_set_micro_batch(&x, m);
        sw_cross_kv_forward(&x, &l, C, KVt);
        sw_cross_kv_backward(&x, &l, C, DKV, DC);
        /* kv and dW, dcond from the GEMMs' operands (bf16-rounded with b16); db from dkv itself */
        static double kv_ref[NK * KV], dw_ref[KV * CF], db_ref[KV], dc_ref[NK * CF];
        tu_to_double(g_w, w, KV * CF), tu_to_double(g_cond, cond[m], NK * CF), tu_to_double(g_dkv, dkv[m], NK * KV);
        tu_fd_grad(kv_loss, NULL, g_b, KV, db_ref);
        round_all(g_w, KV * CF, b16), round_all(g_cond, NK * CF, b16), round_all(g_dkv, NK * KV, b16);
        ref_kv(kv_ref);
        tu_fd_grad(kv_loss, NULL, g_w, KV * CF, dw_ref);
        tu_fd_grad(kv_loss, NULL, g_cond, NK * CF, dc_ref);
        for (int i = 0; i < KV * CF; i++) sum_dw[i] += dw_ref[i];
        for (int i = 0; i < KV; i++) sum_db[i] += db_ref[i];
        float *got = tu_read(KVt);
        snprintf(what, sizeof what, "K/V projection %s bias, %d tile(s)%s, micro-batch %d: kv = cond W^T%s",
                 bias ? "with" : "without", tiles, dt, m, bias ? " + b" : "");
        tu_close(what, got, kv_ref, NK * KV, 1e-5, 1e-6);
        free(got), got = tu_read(sw_params_grad(p, l.lin.w));
        snprintf(what, sizeof what, "K/V projection %s bias, %d tile(s)%s, micro-batch %d: dW vs finite differences",
                 bias ? "with" : "without", tiles, dt, m);
        tu_close(what, got, dw_ref, KV * CF, 1e-5, 1e-5);
        free(got);
        if (bias) {
            got = tu_read(sw_params_grad(p, l.lin.b));
            snprintf(what, sizeof what, "K/V projection with bias, %d tile(s)%s, micro-batch %d: db vs finite differences",
                     tiles, dt, m);
            tu_close(what, got, db_ref, KV, 1e-5, 1e-5);
            free(got);
        }
        got = tu_read(DC);
        snprintf(what, sizeof what, "K/V projection %s bias, %d tile(s)%s, micro-batch %d: dcond vs finite differences",
                 bias ? "with" : "without", tiles, dt, m);
        tu_close(what, got, dc_ref, NK * CF, 1e-5, 1e-5);
        free(got);
        sw_params_reduce_grads(p, m);
    }
    float *got = tu_read(sw_params_grad(p, l.lin.w));
    snprintf(what, sizeof what, "K/V projection %s bias, %d tile(s)%s: the registry's dW = the sum of the 2 micro-batches'",
             bias ? "with" : "without", tiles, dt);
    tu_close(what, got, sum_dw, KV * CF, 1e-5, 1e-5);
    free(got);
    if (bias) {
        got = tu_read(sw_params_grad(p, l.lin.b));
        snprintf(what, sizeof what, "K/V projection with bias, %d tile(s)%s: the registry's db = the sum of the 2 micro-batches'",
                 tiles, dt);
        tu_close(what, got, sum_db, KV, 1e-5, 1e-5);
        free(got);
    }
    if (!bias && !b16) tu_true("K/V projection without bias: no bias parameter registered", l.lin.b < 0 && sw_params_count(p) == 1);
    sw_tensor_free(C), sw_tensor_free(KVt), sw_tensor_free(DKV), sw_tensor_free(DC);
    sw_ctx_destroy(&x);
    sw_params_destroy(p);
}

int main(int argc, char **argv)
{
    tu_expect_refusal("sw_cross_attention_create with a conditioning length of 0", refuse_len, NULL,
                      "sw_cross_attention_create: the conditioning length must be at least 1 (0)");
    tu_expect_refusal("sw_cross_kv_add with no conditioning features", refuse_kv_dim, NULL,
                      "sw_cross_kv_add: cond_dim (0) must be at least 1");
    tu_expect_refusal("sw_cross_kv_forward into a kv of half the columns", refuse_kv_shape, NULL,
                      "sw_cross_kv_forward: kv: must be a tensor [6, 16] ([6, 8] given)");
    tu_init(&argc, &argv);
    for (int bias = 0; bias <= 1; bias++)
        for (int tiles = 1; tiles <= 2; tiles++) kv_case(bias, tiles, 0);
    kv_case(1, 2, 1);
    static float q[NQ * AD], kv[NK * 2 * AD], dout[NQ * AD];
    tu_rand(q, NQ * AD, 131, 1.5f), tu_rand(kv, NK * 2 * AD, 132, 1.5f), tu_rand(dout, NQ * AD, 133, 1.0f);
    tu_to_double(g_q, q, NQ * AD), tu_to_double(g_kv, kv, NK * 2 * AD), tu_to_double(g_dout, dout, NQ * AD);
    static double out_ref[NQ * AD], dq_ref[NQ * AD], dkv_ref[NK * 2 * AD];
    ref_att(g_q, g_kv, out_ref);
    tu_fd_grad(ref_loss, NULL, g_q, NQ * AD, dq_ref);
    tu_fd_grad(ref_loss, NULL, g_kv, NK * 2 * AD, dkv_ref);
    char what[160];
    for (int tiles = 1; tiles <= 2; tiles++) {
        sw_ctx x;
        sw_params *p;
        make_ctx(&x, &p, tiles, 1);
        sw_params_allocate(p);
        sw_cross_attention *a = sw_cross_attention_create(&x, A, D, L);
        sw_saved s;
        memset(&s, 0, sizeof s);
        strcpy(s.prefix, "x");
        sw_cross_saved k;
        sw_cross_attention_keep(a, &s, &k);
        sw_tensor_write_host(k.q, q);
        sw_ctx_load_cond(&x, 0, kv, L, 2 * AD, k.kv); /* the global [L batch, 2 a d] array, one micro-batch */
        sw_tensor *DO = tu_tensor("dout", NQ, AD, dout), *DQ = tu_tensor("dq", NQ, AD, NULL);
        sw_tensor *DKV = tu_tensor("dkv", NK, 2 * AD, NULL);
        sw_tensor_fill(DQ, NAN), sw_tensor_fill(DKV, NAN);
        sw_cross_attention_forward(&x, a, &k);
        sw_cross_attention_backward(&x, a, &k, DO, DQ, DKV);
        float *got = tu_read(k.att);
        snprintf(what, sizeof what, "cross-attention fwd, %d head-group task(s): %d queries x %d keys per sample", tiles,
                 S, L);
        tu_close(what, got, out_ref, NQ * AD, 1e-5, 1e-6);
        free(got);
        got = tu_read(DQ);
        snprintf(what, sizeof what, "cross-attention bwd, %d task(s): dq vs finite differences", tiles);
        tu_close(what, got, dq_ref, NQ * AD, 1e-5, 1e-6);
        free(got);
        got = tu_read(DKV);
        snprintf(what, sizeof what, "cross-attention bwd, %d task(s): dk | dv vs finite differences", tiles);
        tu_close(what, got, dkv_ref, NK * 2 * AD, 1e-5, 1e-6);
        free(got);
        sw_tensor_free(DO), sw_tensor_free(DQ), sw_tensor_free(DKV);
        for (int i = 0; i < s.n; i++) sw_tensor_free(s.t[i]);
        sw_cross_attention_destroy(a);
        sw_ctx_destroy(&x);
        sw_params_destroy(p);
    }
    /* the loader with two micro-batches of one sample: micro-batch k holds sample k's rows */
    sw_ctx x;
    sw_params *p;
    make_ctx(&x, &p, 1, 2);
    sw_tensor *C = tu_tensor("cond", L, 2 * AD, NULL);
    int ok = 1;
    for (int m = 0; m < 2; m++) {
        float got[L * 2 * AD];
        sw_ctx_load_cond(&x, m, kv, L, 2 * AD, C);
        sw_tensor_read_host(C, got);
        for (int j = 0; j < L; j++) ok &= !memcmp(got + j * 2 * AD, kv + (j * B + m) * 2 * AD, sizeof(float) * 2 * AD);
        ok &= x.micro == m;
    }
    tu_true("sw_ctx_load_cond, two micro-batches: each holds its sample's conditioning rows and becomes current", ok);
    sw_tensor_free(C);
    sw_ctx_destroy(&x);
    sw_params_destroy(p);
    return tu_finish();
}
