/* Generation with a KV cache for GPT-2 and LLaMA (gpt.h): the prompt
 * through the forward (prefill), then one position at a time (decode), each
 * layer appending its keys and values to its cache and attending to it;
 * the next token chosen from the vocab-parallel logits, the same on every
 * tensor-parallel rank. The layers are the training model's, on a context
 * of their own whose rows are the new positions of this rank's sequences. */
#include <stdlib.h>
#include <string.h>

#include "gpt_internal.h"
#include "layers/layer_util.h"
#include "starweave/heads.h"
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

void sw_gpt_generator_sample(sw_gpt_generator *g, float temperature, int top_k, uint64_t seed, int32_t *next)
{
    sw_check_ptr("sw_gpt_generator_sample", "g", g);
    if (g->pos < 1) sw_usage_error("sw_gpt_generator_sample: nothing fed yet (sw_gpt_generator_feed)");
    sw_lm_sample(&g->m->x, g->logits, g->m->c.vocab, temperature, top_k, seed, (uint64_t)g->pos, next);
}
