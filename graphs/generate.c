/* Generation with a KV cache for GPT-2 and LLaMA (graphs.h): the prompt
 * through the forward (prefill), then one position at a time (decode), each
 * layer appending its keys and values to its cache and attending to it;
 * the next token chosen from the vocab-parallel logits, the same on every
 * tensor-parallel rank. The layers are the training model's, on a context
 * of their own whose rows are the new positions of this rank's sequences. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_internal.h"
#include "layer_util.h"
#include "starweave/runtime.h"

/* the tensors of one feed of L positions of the B sequences (L B rows) */
typedef struct gen_pass {
    sw_ctx x;
    int L;
    sw_tensor *tok;                          /* [L B, 1] */
    sw_tensor *res[2], *mid;                 /* the residual stream, [L B, h] */
    sw_tensor *ln, *mean, *rstd;             /* a norm's output and statistics */
    sw_tensor *qkv, *att, *fc, *act;
} gen_pass;

struct sw_gpt_generator {
    sw_gpt *m;
    int B, max_len, pos;                     /* sequences, positions at most, positions fed */
    sw_kv_cache **kv;                        /* per layer */
    gen_pass one, many;                      /* L = 1 (decode), and the last prefill's L */
    sw_tensor *logits;                       /* [B, vocab_padded / tp]: of the last position fed */
    sw_tensor *cand;                         /* [tp, B 2 k]: each rank's best (value, index) pairs */
    int cand_k;
};

static void pass_free(gen_pass *p)
{
    if (!p->L) return;
    sw_tensor *t[] = {p->tok, p->res[0], p->res[1], p->mid, p->ln, p->mean, p->rstd, p->qkv, p->att, p->fc, p->act};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) sw_tensor_free(t[i]);
    sw_ctx_destroy(&p->x);
    memset(p, 0, sizeof *p);
}

static void pass_init(sw_gpt_generator *g, gen_pass *p, int L)
{
    const sw_gpt_config *c = &g->m->c;
    int64_t rows = (int64_t)L * g->B, h = c->hidden, hf = c->ffn / c->tp;
    sw_ctx_config xc = {.seq = L, .batch = g->B * c->dp, .tp = c->tp, .ulysses = 1, .ring = 1, .dp = c->dp,
                        .grad_accum = 1, .tiles = c->tiles < rows ? c->tiles : (int)rows, .col_tiles = c->tiles,
                        .seed = c->seed}; /* a decode step's one row per sequence: its columns still in tiles */
    sw_ctx_init(&p->x, &xc, g->m->x.comm, g->m->params);
    p->L = L;
    p->tok = sw_tensor_new2d("gen.tokens", SW_I32, rows, 1);
    p->res[0] = sw_tensor_new2d("gen.x0", SW_F32, rows, h);
    p->res[1] = sw_tensor_new2d("gen.x1", SW_F32, rows, h);
    p->mid = sw_tensor_new2d("gen.x_mid", SW_F32, rows, h);
    p->ln = sw_tensor_new2d("gen.ln", SW_F32, rows, h);
    p->mean = sw_tensor_new2d("gen.mean", SW_F32, rows, 1);
    p->rstd = sw_tensor_new2d("gen.rstd", SW_F32, rows, 1);
    p->qkv = sw_tensor_new2d("gen.qkv", SW_F32, rows, sw_attention_qkv_cols(g->m->attn));
    p->att = sw_tensor_new2d("gen.att", SW_F32, rows, sw_attention_out_cols(g->m->attn));
    p->fc = sw_tensor_new2d("gen.fc", SW_F32, rows, g->m->spec->swiglu ? 2 * hf : hf);
    p->act = sw_tensor_new2d("gen.act", SW_F32, rows, hf);
}

sw_gpt_generator *sw_gpt_generator_create(sw_gpt *m, int batch, int max_len)
{
    static const char *fn = "sw_gpt_generator_create";
    sw_check_ptr(fn, "m", m);
    const sw_gpt_config *c = &m->c;
    if (c->pp > 1 || c->ulysses * c->ring > 1 || c->zero >= 3)
        sw_usage_error("generation needs every layer and whole parameter values on each rank, and whole sequences: "
                       "not pp (%d), ulysses x ring (%d x %d) or ZeRO-3 (zero %d)", c->pp, c->ulysses, c->ring, c->zero);
    if (batch < 1 || max_len < 1 || (!m->spec->rope && max_len > c->max_pos))
        sw_usage_error("%s: batch (%d) and max_len (%d) must be positive, max_len at most the learned positions "
                       "(max-pos %d)", fn, batch, max_len, m->spec->rope ? max_len : c->max_pos);
    sw_gpt_generator *g = sw_xcalloc(1, sizeof *g);
    g->m = m, g->B = batch, g->max_len = max_len;
    g->kv = sw_xcalloc((size_t)c->layers, sizeof *g->kv);
    for (int l = 0; l < c->layers; l++) g->kv[l] = sw_kv_cache_create(m->attn, batch, max_len);
    pass_init(g, &g->one, 1);
    g->logits = sw_tensor_new2d("gen.logits", SW_F32, batch, c->vocab_padded / c->tp);
    return g;
}

void sw_gpt_generator_destroy(sw_gpt_generator *g)
{
    if (!g) return;
    for (int l = 0; l < g->m->c.layers; l++) sw_kv_cache_destroy(g->kv[l]);
    free(g->kv);
    pass_free(&g->one);
    pass_free(&g->many);
    sw_tensor_free(g->logits);
    sw_tensor_free(g->cand);
    free(g);
}

int sw_gpt_generator_position(const sw_gpt_generator *g) { return g->pos; }
void sw_gpt_generator_reset(sw_gpt_generator *g) { g->pos = 0; }
sw_tensor *sw_gpt_generator_logits(sw_gpt_generator *g) { return g->logits; }

void sw_gpt_generator_feed(sw_gpt_generator *g, const int32_t *tok, int L)
{
    static const char *fn = "sw_gpt_generator_feed";
    sw_check_ptr(fn, "g", g);
    sw_check_ptr(fn, "tok", tok);
    sw_gpt *m = g->m;
    const sw_gpt_config *c = &m->c;
    if (L < 1 || g->pos + L > g->max_len)
        sw_usage_error("%s: %d positions after %d: at least 1, at most max_len (%d) in all", fn, L, g->pos, g->max_len);
    for (int64_t i = 0; i < (int64_t)L * g->B; i++)
        if (tok[i] < 0 || tok[i] >= c->vocab)
            sw_usage_error("%s: token %lld is %d, outside the vocabulary [0, %d)", fn, (long long)i, tok[i], c->vocab);
    gen_pass *p = &g->one;
    if (L > 1) {
        if (g->many.L != L) pass_free(&g->many), pass_init(g, &g->many, L);
        p = &g->many;
    }
    sw_ctx *x = &p->x;
    sw_ctx_set_first_position(x, g->pos);
    sw_tensor_write_host(p->tok, tok);
    sw_params_cast_bf16(m->params); /* bf16: the GEMMs' weights as they are now */
    sw_embedding_forward(x, &m->emb, 0, p->tok, p->res[0]);
    for (int l = 0; l < c->layers; l++) {
        const gpt_layer *Ly = &m->layer[l];
        sw_tensor *in = p->res[l % 2], *out = p->res[(l + 1) % 2];
        sw_norm_forward(x, &Ly->ln1, in, p->ln, m->spec->rms ? NULL : p->mean, p->rstd);
        sw_linear_forward(x, &Ly->qkv, p->ln, p->ln, p->qkv);
        sw_attention_cached_forward(x, m->attn, g->kv[l], p->qkv, p->att);
        sw_residual_forward(x, 0, l, SW_DROP_ATTN_OUT, in, sw_linear_row_forward(x, &Ly->proj, p->att), p->mid);
        sw_gpt_mlp_forward(m, x, 0, l, p->mid, p->ln, m->spec->rms ? NULL : p->mean, p->rstd, p->ln, p->fc, p->act, out);
    }
    /* the logits of the last position: final norm, then its rows times the (vocab-parallel) head */
    sw_norm_forward(x, &m->lnf, p->res[c->layers % 2], p->ln, m->spec->rms ? NULL : p->mean, p->rstd);
    int64_t split[2] = {(int64_t)(L - 1) * g->B, g->B};
    starpu_data_handle_t last = L > 1 ? sw_tensor_split(p->ln, SW_ROWS, 2, split, STARPU_R)[1]
                                      : sw_tensor_whole(p->ln, STARPU_R);
    sw_tensor *w = sw_params_value(m->params, m->head_w);
    for (int j = 0; j < c->tiles; j++) /* the head's rows in tiles: its GEMM reads the most bytes of all */
        sw_gemm(last, 0, sw_tensor_tiles(w, SW_ROWS, c->tiles, STARPU_R)[j], 1,
                sw_tensor_tiles(g->logits, SW_COLS, c->tiles, STARPU_W)[j], 1.0f, 0.0f);
    g->pos += L;
}

/* a uniform number in [0, 1) from (seed, position, sequence): splitmix64 */
static double uniform(uint64_t seed, uint64_t pos, uint64_t b)
{
    uint64_t z = seed ^ (pos * 0x9E3779B97F4A7C15ull) ^ (b * 0xD1B54A32D192ED03ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

/* (value, global index) pairs: larger value first, then smaller index */
static int by_value(const void *a, const void *b)
{
    const float *x = a, *y = b;
    if (x[0] != y[0]) return x[0] < y[0] ? 1 : -1;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

void sw_gpt_generator_sample(sw_gpt_generator *g, float temperature, int top_k, uint64_t seed, int32_t *next)
{
    static const char *fn = "sw_gpt_generator_sample";
    sw_check_ptr(fn, "g", g);
    sw_check_ptr(fn, "next", next);
    const sw_gpt_config *c = &g->m->c;
    if (g->pos < 1) sw_usage_error("%s: nothing fed yet (sw_gpt_generator_feed)", fn);
    if (!(temperature >= 0.0f) || top_k < 0)
        sw_usage_error("%s: temperature (%g) and top_k (%d) must not be negative", fn, temperature, top_k);
    const int vl = c->vocab_padded / c->tp, tp = c->tp, B = g->B;
    const int k = temperature == 0.0f ? 1 : top_k > 0 && top_k < c->vocab ? top_k : c->vocab;
    const int64_t v0 = (int64_t)g->m->x.tp.rank * vl;
    float *logits = sw_xcalloc((size_t)B * (size_t)vl, sizeof *logits);
    sw_tensor_read_host(g->logits, logits);
    /* this rank's best k of each sequence (the padded rows of the vocabulary left out) */
    const int kl = k < vl ? k : vl;
    float *mine = sw_xcalloc((size_t)B * 2 * (size_t)kl, sizeof *mine), *all = mine;
    float *pairs = sw_xcalloc((size_t)vl * 2, sizeof *pairs);
    for (int b = 0; b < B; b++) {
        int n = 0;
        for (int j = 0; j < vl && v0 + j < c->vocab; j++, n++)
            pairs[2 * n] = logits[(size_t)b * vl + j], pairs[2 * n + 1] = (float)(v0 + j);
        qsort(pairs, (size_t)n, 2 * sizeof(float), by_value);
        for (int j = 0; j < kl; j++) {
            mine[((size_t)b * kl + j) * 2] = j < n ? pairs[2 * j] : -INFINITY;
            mine[((size_t)b * kl + j) * 2 + 1] = j < n ? pairs[2 * j + 1] : -1.0f;
        }
    }
    if (tp > 1) { /* every rank's, the same on every rank */
        if (!g->cand || g->cand_k != kl) {
            sw_tensor_free(g->cand);
            g->cand = sw_tensor_new2d("gen.candidates", SW_F32, tp, (int64_t)B * 2 * kl);
            g->cand_k = kl;
        }
        all = sw_xcalloc((size_t)tp * B * 2 * kl, sizeof *all);
        memcpy(all + (size_t)g->m->x.tp.rank * B * 2 * kl, mine, sizeof *mine * (size_t)B * 2 * kl);
        sw_tensor_write_host(g->cand, all);
        sw_allgather_inplace(g->m->x.comm, SW_GROUP_TP, g->cand);
        sw_tensor_read_host(g->cand, all);
    }
    float *cand = sw_xcalloc((size_t)tp * kl * 2, sizeof *cand);
    for (int b = 0; b < B; b++) {
        int n = 0;
        for (int r = 0; r < tp; r++)
            for (int j = 0; j < kl; j++) {
                const float *e = all + (((size_t)r * B + b) * kl + j) * 2;
                if (e[1] >= 0) cand[2 * n] = e[0], cand[2 * n + 1] = e[1], n++;
            }
        qsort(cand, (size_t)n, 2 * sizeof(float), by_value);
        int pick = 0;
        if (temperature > 0.0f) { /* softmax over the best k at the temperature, then the inverse CDF */
            int m = k < n ? k : n;
            double sum = 0, acc = 0, u;
            for (int j = 0; j < m; j++) sum += exp((cand[2 * j] - cand[0]) / temperature);
            u = uniform(seed, (uint64_t)g->pos, (uint64_t)b) * sum;
            for (pick = 0; pick < m - 1; pick++)
                if ((acc += exp((cand[2 * pick] - cand[0]) / temperature)) > u) break;
        }
        next[b] = (int32_t)cand[2 * pick + 1];
    }
    if (all != mine) free(all);
    free(cand), free(pairs), free(mine), free(logits);
}
