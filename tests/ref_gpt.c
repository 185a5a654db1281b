/* Serial double-precision reference of the GPT-2 model (see ref_gpt.h).
 * Notation: T = seq*batch rows in [s, b] order, C = hidden, NH = heads,
 * D = C/NH, KV = K/V heads, CQ = (NH + 2 KV) D = width of qkv, S = seq,
 * B = batch, Vp = padded vocabulary, V = real vocabulary. */
#include "ref_gpt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "philox.h"

static void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz);
    if (!p) { perror("ref_gpt: calloc"); exit(99); }
    return p;
}
static double *dalloc(int64_t n) { return xcalloc((size_t)n, sizeof(double)); }

/* ---------------- parameters ---------------- */

enum { P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_PROJW, P_PROJB, P_LN2W, P_LN2B, P_FCW, P_FCB, P_FC2W, P_FC2B };

int ref_gpt_num_params(const sw_gpt_config *c) { return 2 + 12 * c->layers + 2; }

/* K/V heads (kv_heads 0: one per query head) and the width of qkv. */
static int kv_heads(const sw_gpt_config *c) { return c->kv_heads > 0 ? c->kv_heads : c->heads; }
static int64_t qkv_width(const sw_gpt_config *c)
{
    return (int64_t)(c->heads + 2 * kv_heads(c)) * (c->hidden / c->heads);
}

int64_t ref_gpt_param_numel(const sw_gpt_config *c, int i)
{
    int64_t C = c->hidden;
    int n = ref_gpt_num_params(c);
    if (i == 0) return (int64_t)c->vocab_padded * C;
    if (i == 1) return (int64_t)c->max_pos * C;
    if (i >= n - 2) return C;
    switch ((i - 2) % 12) {
    case P_QKVW: return qkv_width(c) * C;
    case P_QKVB: return qkv_width(c);
    case P_PROJW: return C * C;
    case P_FCW: case P_FC2W: return 4 * C * C;
    case P_FCB: return 4 * C;
    default: return C;
    }
}

#define LP(arr, l, k) ((arr)[2 + 12 * (l) + (k)])

/* ---------------- saved activations ---------------- */

struct ref_gpt_acts {
    int layers;
    double *encoded;              /* [T,C] before embedding dropout */
    double **x;                   /* L+1 x [T,C]: residual stream entering layer l (x[L]: final) */
    double **ln1, **ln1_mean, **ln1_rstd;  /* [T,C], [T], [T] */
    double **qkv;                 /* [T,CQ] */
    double **att;                 /* [B,NH,S,S] softmax probabilities (before dropout) */
    double **atto;                /* [T,C] attention output */
    double **xmid;                /* [T,C] residual after the attention block */
    double **ln2, **ln2_mean, **ln2_rstd;
    double **fch, **fcg;          /* [T,4C] before / after GeLU */
    double *lnf, *lnf_mean, *lnf_rstd;
    double *probs;                /* [T,Vp] softmax over the real vocabulary (0 on padding) */
};

static double **dalloc_n(int n, int64_t each)
{
    double **p = xcalloc((size_t)n, sizeof(double *));
    for (int i = 0; i < n; i++) p[i] = dalloc(each);
    return p;
}
static void dfree_n(double **p, int n)
{
    if (!p) return;
    for (int i = 0; i < n; i++) free(p[i]);
    free(p);
}

ref_gpt_acts *ref_gpt_acts_new(const sw_gpt_config *c)
{
    ref_gpt_acts *a = xcalloc(1, sizeof(*a));
    int L = c->layers;
    a->layers = L;
    int64_t T = (int64_t)c->seq * c->batch, C = c->hidden;
    int64_t att = (int64_t)c->batch * c->heads * c->seq * c->seq;
    a->encoded = dalloc(T * C);
    a->x = dalloc_n(L + 1, T * C);
    a->ln1 = dalloc_n(L, T * C); a->ln1_mean = dalloc_n(L, T); a->ln1_rstd = dalloc_n(L, T);
    a->qkv = dalloc_n(L, T * qkv_width(c));
    a->att = dalloc_n(L, att);
    a->atto = dalloc_n(L, T * C);
    a->xmid = dalloc_n(L, T * C);
    a->ln2 = dalloc_n(L, T * C); a->ln2_mean = dalloc_n(L, T); a->ln2_rstd = dalloc_n(L, T);
    a->fch = dalloc_n(L, T * 4 * C); a->fcg = dalloc_n(L, T * 4 * C);
    a->lnf = dalloc(T * C); a->lnf_mean = dalloc(T); a->lnf_rstd = dalloc(T);
    a->probs = dalloc(T * c->vocab_padded);
    return a;
}

void ref_gpt_acts_free(ref_gpt_acts *a)
{
    if (!a) return;
    int L = a->layers;
    free(a->encoded);
    dfree_n(a->x, L + 1);
    dfree_n(a->ln1, L); dfree_n(a->ln1_mean, L); dfree_n(a->ln1_rstd, L);
    dfree_n(a->qkv, L); dfree_n(a->att, L); dfree_n(a->atto, L); dfree_n(a->xmid, L);
    dfree_n(a->ln2, L); dfree_n(a->ln2_mean, L); dfree_n(a->ln2_rstd, L);
    dfree_n(a->fch, L); dfree_n(a->fcg, L);
    free(a->lnf); free(a->lnf_mean); free(a->lnf_rstd); free(a->probs);
    free(a);
}

/* ---------------- dropout ---------------- */

/* Multiplier of element idx: keep ? 1/(1-p) : 0 (1 when p == 0). */
static double drop_mul(const sw_gpt_config *c, int step, uint32_t layer, uint32_t op, uint64_t idx)
{
    if (c->dropout <= 0.0f) return 1.0;
    if (!sw_dropout_keep(c->seed, (uint32_t)step, layer, op, idx, c->dropout)) return 0.0;
    return 1.0 / (1.0 - (double)c->dropout);
}

/* out[n] = in[n] * mask (idx = i); in == out allowed. Also the backward (grad in place). */
static void dropout_forward(double *out, const double *in, int64_t n, const sw_gpt_config *c, int step,
                            uint32_t layer, uint32_t op)
{
    for (int64_t i = 0; i < n; i++) out[i] = in[i] * drop_mul(c, step, layer, op, (uint64_t)i);
}

/* ---------------- layers ---------------- */

/* encoder: out[T,C] = wte[tok[t]] + wpe[t / B] (row t = pos*B + b) */
static void encoder_forward(double *out, const int32_t *tok, const double *wte, const double *wpe, int64_t T,
                            int B, int64_t C)
{
    for (int64_t t = 0; t < T; t++) {
        const double *we = wte + (int64_t)tok[t] * C, *pe = wpe + (t / B) * C;
        for (int64_t i = 0; i < C; i++) out[t * C + i] = we[i] + pe[i];
    }
}
/* encoder backward: dwte[Vp,C] += scatter(dout[T,C]), dwpe[max_pos,C] += ... */
static void encoder_backward(double *dwte, double *dwpe, const double *dout, const int32_t *tok, int64_t T,
                             int B, int64_t C)
{
    for (int64_t t = 0; t < T; t++) {
        double *dwe = dwte + (int64_t)tok[t] * C, *dpe = dwpe + (t / B) * C;
        for (int64_t i = 0; i < C; i++) { dwe[i] += dout[t * C + i]; dpe[i] += dout[t * C + i]; }
    }
}

/* layernorm: inp[T,C] -> out[T,C], mean[T], rstd[T]; w,b [C]; biased variance */
static void layernorm_forward(double *out, double *mean, double *rstd, const double *inp, const double *w,
                              const double *b, int64_t T, int64_t C, double eps)
{
    for (int64_t t = 0; t < T; t++) {
        const double *x = inp + t * C;
        double m = 0, v = 0;
        for (int64_t i = 0; i < C; i++) m += x[i];
        m /= (double)C;
        for (int64_t i = 0; i < C; i++) v += (x[i] - m) * (x[i] - m);
        v /= (double)C;
        double s = 1.0 / sqrt(v + eps);
        for (int64_t i = 0; i < C; i++) out[t * C + i] = (x[i] - m) * s * w[i] + b[i];
        mean[t] = m;
        rstd[t] = s;
    }
}
/* layernorm backward: dinp[T,C] += , dw[C] += , db[C] += from dout[T,C] */
static void layernorm_backward(double *dinp, double *dw, double *db, const double *dout, const double *inp,
                               const double *w, const double *mean, const double *rstd, int64_t T, int64_t C)
{
    for (int64_t t = 0; t < T; t++) {
        const double *dy = dout + t * C, *x = inp + t * C;
        double m = mean[t], s = rstd[t], dnorm_mean = 0, dnorm_norm_mean = 0;
        for (int64_t i = 0; i < C; i++) {
            double n = (x[i] - m) * s, dn = w[i] * dy[i];
            dnorm_mean += dn;
            dnorm_norm_mean += dn * n;
        }
        dnorm_mean /= (double)C;
        dnorm_norm_mean /= (double)C;
        for (int64_t i = 0; i < C; i++) {
            double n = (x[i] - m) * s, dn = w[i] * dy[i];
            db[i] += dy[i];
            dw[i] += n * dy[i];
            dinp[t * C + i] += s * (dn - dnorm_mean - n * dnorm_norm_mean);
        }
    }
}

/* --dtype bf16 (c->dtype == SW_BF16): every GEMM of the library reads bf16
 * operands, fp32 elsewhere (gpt.h). The library holds each operand in
 * fp32 and casts it with bf16.h's sw_bf16_from_f32 (round to nearest, ties to even),
 * so the reference rounds the double value to fp32, then to bf16; the
 * products and sums stay in double (the library's are exact products of
 * bf16 values summed in fp32). The linears' and the LM head's GEMMs
 * (forward, dx and dW) are the GEMMs; attention (QK^T, PV), norms, GeLU,
 * softmax and the bias sums are not, and are not rounded. */
/* Written apart from bf16.h, so that a break there is seen: f = (float)v
 * to the multiple of its binade's bf16 spacing (8 significant bits; 2^-133
 * below 2^-126) that nearbyint picks in the default rounding mode, to
 * nearest, ties to even. (Past the largest bf16 the library gives inf; the
 * tests' values are far below.) */
static double bf16_round(double v)
{
    const float f = (float)v;
    if (f == 0.0f || !isfinite(f)) return f;
    int e;
    frexp(f, &e); /* |f| in [2^(e-1), 2^e) */
    const double q = ldexp(1.0, e - 8 > -133 ? e - 8 : -133);
    return nearbyint(f / q) * q;
}

/* Rounded activations and gradients whose double value lies so close to a
 * bf16 rounding boundary that the library's fp32 value may round to the
 * other neighbour (see ref_gpt_bf16_near_ties). */
static int64_t near_ties, rounded_total;

int64_t ref_gpt_bf16_near_ties(int64_t *rounded)
{
    if (rounded) *rounded = rounded_total;
    return near_ties;
}

void ref_gpt_bf16_reset_stats(void) { near_ties = rounded_total = 0; }

/* A GEMM operand x[n] as the GEMM reads it: x itself in fp32; in bf16 a
 * rounded copy in *own (freed by the caller). computed: x is an activation
 * or a gradient (the library's fp32 value differs from ours by its fp32
 * rounding errors), not a parameter (the same fp32 value on both sides):
 * counts its elements that lie within 2^-20 of their own magnitude (16 fp32
 * ulps) of a bf16 rounding boundary, among those of magnitude >= 2^-8
 * max|x| (a smaller element that rounds the other way moves x by at most
 * 2^-16 max|x|). */
static const double *gemm_operand(const sw_gpt_config *c, const double *x, int64_t n, int computed, double **own)
{
    *own = NULL;
    if (c->dtype != SW_BF16) return x;
    double *r = dalloc(n), m = 0;
    for (int64_t i = 0; i < n; i++) {
        r[i] = bf16_round(x[i]);
        if (fabs(x[i]) > m) m = fabs(x[i]);
    }
    if (computed) {
        for (int64_t i = 0; i < n; i++) {
            const double d = ldexp(fabs(x[i]), -20);
            if (fabs(x[i]) >= ldexp(m, -8) && bf16_round(x[i] - d) != bf16_round(x[i] + d)) near_ties++;
        }
        rounded_total += n;
    }
    *own = r;
    return r;
}

/* matmul: out[T,OC] = inp[T,IC] w[OC,IC]^T + bias[OC] (bias may be NULL);
 * inp and w are the GEMM's operands (bf16: rounded) */
static void matmul_forward(const sw_gpt_config *c, double *out, const double *inp, const double *w,
                           const double *bias, int64_t T, int64_t IC, int64_t OC)
{
    double *own_x, *own_w;
    inp = gemm_operand(c, inp, T * IC, 1, &own_x);
    w = gemm_operand(c, w, OC * IC, 0, &own_w);
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = 0; o < OC; o++) {
            double s = bias ? bias[o] : 0.0;
            const double *x = inp + t * IC, *wr = w + o * IC;
            for (int64_t i = 0; i < IC; i++) s += x[i] * wr[i];
            out[t * OC + o] = s;
        }
    free(own_x);
    free(own_w);
}
/* matmul backward: dinp[T,IC] += dout w, dw[OC,IC] += dout^T inp, dbias[OC]
 * += colsum(dout); the GEMMs' operands dout, w and inp are rounded in bf16,
 * the bias sum reads dout as it is (fp32 in the library) */
static void matmul_backward(const sw_gpt_config *c, double *dinp, double *dw, double *dbias, const double *dout,
                            const double *inp, const double *w, int64_t T, int64_t IC, int64_t OC)
{
    double *own_d, *own_x, *own_w;
    const double *dg = gemm_operand(c, dout, T * OC, 1, &own_d);
    inp = gemm_operand(c, inp, T * IC, 1, &own_x);
    w = gemm_operand(c, w, OC * IC, 0, &own_w);
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = 0; o < OC; o++) {
            double g = dg[t * OC + o];
            if (dbias) dbias[o] += dout[t * OC + o];
            if (g == 0.0) continue;
            const double *wr = w + o * IC, *x = inp + t * IC;
            double *di = dinp + t * IC, *dwr = dw + o * IC;
            for (int64_t i = 0; i < IC; i++) { di[i] += g * wr[i]; dwr[i] += g * x[i]; }
        }
    free(own_d);
    free(own_x);
    free(own_w);
}

/* attention: qkv[T,CQ] = [q (NH heads) | k (KV heads) | v (KV heads)] ->
 * out[T,C], att[B,NH,S,S] probabilities before dropout; query head h uses
 * K/V head h / (NH/KV); causal, scale 1/sqrt(D), dropout on the
 * probabilities (op 1, indexed by the query head). */
static void attention_forward(double *out, double *att, const double *qkv, const sw_gpt_config *c, int step,
                              int layer)
{
    int B = c->batch, S = c->seq, NH = c->heads, KV = kv_heads(c);
    int64_t C = c->hidden, D = C / NH, CQ = qkv_width(c);
    double scale = 1.0 / sqrt((double)D);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int qp = 0; qp < S; qp++) {
                const int64_t kcol = C + (int64_t)(h / (NH / KV)) * D, vcol = kcol + KV * D;
                const double *q = qkv + ((int64_t)qp * B + b) * CQ + h * D;
                double *p = att + (((int64_t)b * NH + h) * S + qp) * S;
                double mx = -INFINITY;
                for (int kp = 0; kp < S; kp++) {
                    if (kp > qp) { p[kp] = 0; continue; }
                    const double *k = qkv + ((int64_t)kp * B + b) * CQ + kcol;
                    double s = 0;
                    for (int64_t i = 0; i < D; i++) s += q[i] * k[i];
                    p[kp] = s * scale;
                    if (p[kp] > mx) mx = p[kp];
                }
                double sum = 0;
                for (int kp = 0; kp <= qp; kp++) { p[kp] = exp(p[kp] - mx); sum += p[kp]; }
                for (int kp = 0; kp <= qp; kp++) p[kp] /= sum;
                double *o = out + ((int64_t)qp * B + b) * C + h * D;
                for (int64_t i = 0; i < D; i++) o[i] = 0;
                uint64_t base = (((uint64_t)b * NH + h) * S + qp) * S;
                for (int kp = 0; kp <= qp; kp++) {
                    double pd = p[kp] * drop_mul(c, step, (uint32_t)layer, SW_DROP_ATTN_PROBS, base + kp);
                    const double *v = qkv + ((int64_t)kp * B + b) * CQ + vcol;
                    for (int64_t i = 0; i < D; i++) o[i] += pd * v[i];
                }
            }
}
/* attention backward: dqkv[T,CQ] += from dout[T,C] (dk, dv summed over the
 * query heads of each K/V head) */
static void attention_backward(double *dqkv, const double *dout, const double *qkv, const double *att,
                               const sw_gpt_config *c, int step, int layer)
{
    int B = c->batch, S = c->seq, NH = c->heads, KV = kv_heads(c);
    int64_t C = c->hidden, D = C / NH, CQ = qkv_width(c);
    double scale = 1.0 / sqrt((double)D);
    double *dp = dalloc(S);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int qp = 0; qp < S; qp++) {
                const int64_t kcol = C + (int64_t)(h / (NH / KV)) * D, vcol = kcol + KV * D;
                const double *p = att + (((int64_t)b * NH + h) * S + qp) * S;
                const double *dov = dout + ((int64_t)qp * B + b) * C + h * D;
                const double *q = qkv + ((int64_t)qp * B + b) * CQ + h * D;
                double *dq = dqkv + ((int64_t)qp * B + b) * CQ + h * D;
                uint64_t base = (((uint64_t)b * NH + h) * S + qp) * S;
                double dot = 0;
                for (int kp = 0; kp <= qp; kp++) {
                    double mul = drop_mul(c, step, (uint32_t)layer, SW_DROP_ATTN_PROBS, base + kp);
                    const double *v = qkv + ((int64_t)kp * B + b) * CQ + vcol;
                    double *dv = dqkv + ((int64_t)kp * B + b) * CQ + vcol;
                    double dpd = 0;
                    for (int64_t i = 0; i < D; i++) { dpd += dov[i] * v[i]; dv[i] += p[kp] * mul * dov[i]; }
                    dp[kp] = dpd * mul;
                    dot += p[kp] * dp[kp];
                }
                for (int kp = 0; kp <= qp; kp++) {
                    double ds = p[kp] * (dp[kp] - dot) * scale;
                    const double *k = qkv + ((int64_t)kp * B + b) * CQ + kcol;
                    double *dk = dqkv + ((int64_t)kp * B + b) * CQ + kcol;
                    for (int64_t i = 0; i < D; i++) { dq[i] += ds * k[i]; dk[i] += ds * q[i]; }
                }
            }
    free(dp);
}

/* gelu (tanh approximation): out[n] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
#define GELU_K 0.7978845608028654 /* sqrt(2/pi) */
static void gelu_forward(double *out, const double *inp, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        double x = inp[i];
        out[i] = 0.5 * x * (1.0 + tanh(GELU_K * (x + 0.044715 * x * x * x)));
    }
}
/* gelu backward, in place: grad[n] (dout on entry) *= gelu'(inp) */
static void gelu_backward(double *grad, const double *inp, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        double x = inp[i], u = GELU_K * (x + 0.044715 * x * x * x), th = tanh(u);
        double du = GELU_K * (1.0 + 3.0 * 0.044715 * x * x);
        double g = 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du;
        grad[i] *= g;
    }
}

/* crossentropy: logits[T,Vp] -> probs[T,Vp] (softmax over the first V columns, 0 beyond),
 * returns mean over T of -log probs[t, target[t]] */
static double crossentropy_forward(double *probs, const double *logits, const int32_t *targets, int64_t T,
                                   int64_t V, int64_t Vp)
{
    double loss = 0;
    for (int64_t t = 0; t < T; t++) {
        const double *l = logits + t * Vp;
        double *p = probs + t * Vp, mx = -INFINITY, sum = 0;
        for (int64_t v = 0; v < V; v++) if (l[v] > mx) mx = l[v];
        for (int64_t v = 0; v < V; v++) sum += exp(l[v] - mx);
        for (int64_t v = 0; v < V; v++) p[v] = exp(l[v] - mx) / sum;
        for (int64_t v = V; v < Vp; v++) p[v] = 0;
        loss += log(sum) + mx - l[targets[t]];
    }
    return loss / (double)T;
}
/* crossentropy backward: dlogits[T,Vp] = (probs - onehot(target)) / T, 0 on padding */
static void crossentropy_backward(double *dlogits, const double *probs, const int32_t *targets, int64_t T,
                                  int64_t Vp)
{
    for (int64_t t = 0; t < T; t++) {
        for (int64_t v = 0; v < Vp; v++) dlogits[t * Vp + v] = probs[t * Vp + v] / (double)T;
        dlogits[t * Vp + targets[t]] -= 1.0 / (double)T;
    }
}

/* ---------------- model ---------------- */

double ref_gpt_forward(const sw_gpt_config *c, double *const *P, const int32_t *tokens, const int32_t *targets,
                       int step, ref_gpt_acts *a)
{
    int L = c->layers, B = c->batch;
    int64_t T = (int64_t)c->seq * B, C = c->hidden, V = c->vocab, Vp = c->vocab_padded;
    double eps = c->ln_eps;
    double *tmp = dalloc(T * C), *logits = dalloc(T * Vp);

    encoder_forward(a->encoded, tokens, P[0], P[1], T, B, C);
    dropout_forward(a->x[0], a->encoded, T * C, c, step, SW_DROP_EMBED_LAYER, SW_DROP_EMBED);
    for (int l = 0; l < L; l++) {
        layernorm_forward(a->ln1[l], a->ln1_mean[l], a->ln1_rstd[l], a->x[l], LP(P, l, P_LN1W), LP(P, l, P_LN1B), T,
                          C, eps);
        matmul_forward(c, a->qkv[l], a->ln1[l], LP(P, l, P_QKVW), LP(P, l, P_QKVB), T, C, qkv_width(c));
        attention_forward(a->atto[l], a->att[l], a->qkv[l], c, step, l);
        matmul_forward(c, tmp, a->atto[l], LP(P, l, P_PROJW), LP(P, l, P_PROJB), T, C, C);
        dropout_forward(tmp, tmp, T * C, c, step, (uint32_t)l, SW_DROP_ATTN_OUT);
        for (int64_t i = 0; i < T * C; i++) a->xmid[l][i] = a->x[l][i] + tmp[i];
        layernorm_forward(a->ln2[l], a->ln2_mean[l], a->ln2_rstd[l], a->xmid[l], LP(P, l, P_LN2W), LP(P, l, P_LN2B),
                          T, C, eps);
        matmul_forward(c, a->fch[l], a->ln2[l], LP(P, l, P_FCW), LP(P, l, P_FCB), T, C, 4 * C);
        gelu_forward(a->fcg[l], a->fch[l], T * 4 * C);
        matmul_forward(c, tmp, a->fcg[l], LP(P, l, P_FC2W), LP(P, l, P_FC2B), T, 4 * C, C);
        dropout_forward(tmp, tmp, T * C, c, step, (uint32_t)l, SW_DROP_MLP_OUT);
        for (int64_t i = 0; i < T * C; i++) a->x[l + 1][i] = a->xmid[l][i] + tmp[i];
    }
    int n = ref_gpt_num_params(c);
    layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, a->x[L], P[n - 2], P[n - 1], T, C, eps);
    matmul_forward(c, logits, a->lnf, P[0], NULL, T, C, Vp);
    double loss = crossentropy_forward(a->probs, logits, targets, T, V, Vp);
    free(tmp);
    free(logits);
    return loss;
}

void ref_gpt_backward(const sw_gpt_config *c, double *const *P, const int32_t *tokens, const int32_t *targets,
                      int step, ref_gpt_acts *a, double **G)
{
    int L = c->layers, B = c->batch, n = ref_gpt_num_params(c);
    int64_t T = (int64_t)c->seq * B, C = c->hidden, Vp = c->vocab_padded;
    for (int i = 0; i < n; i++) memset(G[i], 0, (size_t)ref_gpt_param_numel(c, i) * sizeof(double));

    double *dlogits = dalloc(T * Vp), *dx = dalloc(T * C), *dxf = dalloc(T * C), *dt = dalloc(T * C);
    double *dqkv = dalloc(T * qkv_width(c)), *dfc = dalloc(T * 4 * C), *dln = dalloc(T * C);

    crossentropy_backward(dlogits, a->probs, targets, T, Vp);
    matmul_backward(c, dxf, G[0], NULL, dlogits, a->lnf, P[0], T, C, Vp);
    layernorm_backward(dx, G[n - 2], G[n - 1], dxf, a->x[L], P[n - 2], a->lnf_mean, a->lnf_rstd, T, C);
    /* dx: gradient w.r.t. the residual stream */
    for (int l = L - 1; l >= 0; l--) {
        /* MLP block: x[l+1] = xmid + drop(fc2(gelu(fc(ln2(xmid))))) */
        memcpy(dt, dx, (size_t)(T * C) * sizeof(double));
        dropout_forward(dt, dt, T * C, c, step, (uint32_t)l, SW_DROP_MLP_OUT);
        memset(dfc, 0, (size_t)(T * 4 * C) * sizeof(double));
        matmul_backward(c, dfc, LP(G, l, P_FC2W), LP(G, l, P_FC2B), dt, a->fcg[l], LP(P, l, P_FC2W), T, 4 * C, C);
        gelu_backward(dfc, a->fch[l], T * 4 * C);
        memset(dln, 0, (size_t)(T * C) * sizeof(double));
        matmul_backward(c, dln, LP(G, l, P_FCW), LP(G, l, P_FCB), dfc, a->ln2[l], LP(P, l, P_FCW), T, C, 4 * C);
        layernorm_backward(dx, LP(G, l, P_LN2W), LP(G, l, P_LN2B), dln, a->xmid[l], LP(P, l, P_LN2W),
                           a->ln2_mean[l], a->ln2_rstd[l], T, C);
        /* attention block: xmid = x[l] + drop(proj(attn(qkv(ln1(x[l]))))) */
        memcpy(dt, dx, (size_t)(T * C) * sizeof(double));
        dropout_forward(dt, dt, T * C, c, step, (uint32_t)l, SW_DROP_ATTN_OUT);
        memset(dln, 0, (size_t)(T * C) * sizeof(double));
        matmul_backward(c, dln, LP(G, l, P_PROJW), LP(G, l, P_PROJB), dt, a->atto[l], LP(P, l, P_PROJW), T, C, C);
        memset(dqkv, 0, (size_t)(T * qkv_width(c)) * sizeof(double));
        attention_backward(dqkv, dln, a->qkv[l], a->att[l], c, step, l);
        memset(dln, 0, (size_t)(T * C) * sizeof(double));
        matmul_backward(c, dln, LP(G, l, P_QKVW), LP(G, l, P_QKVB), dqkv, a->ln1[l], LP(P, l, P_QKVW), T, C,
                        qkv_width(c));
        layernorm_backward(dx, LP(G, l, P_LN1W), LP(G, l, P_LN1B), dln, a->x[l], LP(P, l, P_LN1W), a->ln1_mean[l],
                           a->ln1_rstd[l], T, C);
    }
    dropout_forward(dx, dx, T * C, c, step, SW_DROP_EMBED_LAYER, SW_DROP_EMBED);
    encoder_backward(G[0], G[1], dx, tokens, T, B, C);
    free(dlogits); free(dx); free(dxf); free(dt); free(dqkv); free(dfc); free(dln);
}

void ref_gpt_adamw(const sw_gpt_config *c, double **P, double *const *G, double **M, double **Vv, int step)
{
    double lr = c->lr, b1 = c->beta1, b2 = c->beta2, eps = c->adam_eps, wd = c->weight_decay;
    double bc1 = 1.0 - pow(b1, step), bc2 = 1.0 - pow(b2, step);
    for (int i = 0; i < ref_gpt_num_params(c); i++) {
        int64_t n = ref_gpt_param_numel(c, i);
        double *p = P[i], *m = M[i], *v = Vv[i];
        const double *g = G[i];
        for (int64_t k = 0; k < n; k++) {
            p[k] *= 1.0 - lr * wd;
            m[k] = b1 * m[k] + (1.0 - b1) * g[k];
            v[k] = b2 * v[k] + (1.0 - b2) * g[k] * g[k];
            p[k] -= lr / bc1 * m[k] / (sqrt(v[k]) / sqrt(bc2) + eps);
        }
    }
}
