/* GPT-2 training step as a StarPU task graph: forward, backward, AdamW.
 *
 * Read top to bottom like llm.c's train_gpt2.c: one list of parameters,
 * one list of saved activations per layer, then every layer's forward and
 * backward as submitted tasks. Activations are [T, C] matrices with
 * T = seq * batch rows in [s, b] order (row = pos * batch + b), so that a
 * later sequence split is a contiguous row block. Row-wise ops and the
 * activation GEMMs run on `tiles` row tiles; weight gradients are split
 * along the output features; attention runs on head groups. The tiling is
 * fixed by the configuration, never by the number of workers, so results
 * are bit-identical for any scheduler and worker count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "philox.h"
#include "starweave/graphs.h"
#include "starweave/ops.h"
#include "starweave/runtime.h"

/* parameter slots of one block, in graphs.h order */
enum { LN1_W, LN1_B, QKV_W, QKV_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC_W, FC_B, FC2_W, FC2_B };

/* what one block keeps from forward to backward */
typedef struct block_acts {
    sw_tensor *ln1, *ln1_mean, *ln1_rstd; /* [T,h], [T,1], [T,1] */
    sw_tensor *qkv;                       /* [T,3h] */
    sw_tensor *att, *lse;                 /* [T,h], [T,heads] */
    sw_tensor *x_mid;                     /* [T,h] residual stream after attention */
    sw_tensor *ln2, *ln2_mean, *ln2_rstd;
    sw_tensor *fc, *fc_gelu;              /* [T,4h] before / after GeLU */
} block_acts;

struct sw_gpt {
    sw_gpt_config c;
    int T, P, G;            /* tokens, row tiles, attention head groups */
    int nparams;
    sw_tensor **param, **grad, **adam_m, **adam_v;
    sw_tensor *tokens, *targets;          /* [T,1] int32 */
    sw_tensor **x;                        /* x[0] embedding output .. x[L] last block output, [T,h] */
    block_acts *acts;
    sw_tensor *lnf, *lnf_mean, *lnf_rstd; /* [T,h], [T,1], [T,1] */
    sw_tensor *logits;                    /* [T,Vp]; holds dlogits after backward */
    sw_tensor *ce_max, *ce_tgt, *ce_sumexp, *ce_rows, *loss; /* [T,1] x4, [1,1] */
    /* scratch shared by all layers (StarPU orders the reuse) */
    sw_tensor *tmp, *dy;                  /* [T,h] */
    sw_tensor *dres, *dln, *datt;         /* [T,h] residual gradient, LN input grads, attention output grad */
    sw_tensor *dqkv, *dfc;                /* [T,3h], [T,4h] */
    sw_tensor *part_w, *part_b;           /* [P,h] per-tile LayerNorm parameter gradients */
    sw_tensor *lm_part;                   /* [P*T,h] partial sums of dlnf over vocabulary tiles */
};

/* ---------------------------------------------------------------- config */

void sw_gpt_config_default(sw_gpt_config *c)
{
    memset(c, 0, sizeof *c);
    c->layers = 2;
    c->hidden = 128;
    c->heads = 4;
    c->vocab = 256;
    c->max_pos = 64;
    c->seq = 64;
    c->batch = 8;
    c->dropout = 0.0f;
    c->ln_eps = 1e-5f;
    c->seed = 1234;
    c->tiles = 4;
    c->lr = 1e-3f;
    c->beta1 = 0.9f;
    c->beta2 = 0.999f;
    c->adam_eps = 1e-8f;
    c->weight_decay = 0.0f;
}

int sw_gpt_config_check(sw_gpt_config *c, char *msg, size_t n)
{
#define RULE(cond, ...)                         \
    do {                                        \
        if (!(cond)) {                          \
            snprintf(msg, n, __VA_ARGS__);      \
            return -1;                          \
        }                                       \
    } while (0)
    RULE(c->layers > 0, "layers must be positive (layers = %d)", c->layers);
    RULE(c->hidden > 0, "hidden must be positive (hidden = %d)", c->hidden);
    RULE(c->heads > 0, "heads must be positive (heads = %d)", c->heads);
    RULE(c->hidden % c->heads == 0, "hidden (%d) must be divisible by heads (%d)", c->hidden, c->heads);
    RULE(c->vocab > 0, "vocab must be positive (vocab = %d)", c->vocab);
    RULE(c->seq > 0, "seq must be positive (seq = %d)", c->seq);
    RULE(c->batch > 0, "batch must be positive (batch = %d)", c->batch);
    RULE(c->max_pos > 0, "max-pos must be positive (max-pos = %d)", c->max_pos);
    RULE(c->seq <= c->max_pos, "seq (%d) must not exceed the positions of the model (max-pos = %d)", c->seq,
         c->max_pos);
    RULE(c->dropout >= 0.0f && c->dropout < 1.0f, "dropout must be in [0, 1) (dropout = %g)", c->dropout);
    RULE(c->tiles > 0, "tiles must be positive (tiles = %d)", c->tiles);
    RULE(c->tiles <= c->seq * c->batch, "tiles (%d) must not exceed seq*batch (%d)", c->tiles,
         c->seq * c->batch);
    RULE(c->tiles <= c->hidden, "tiles (%d) must not exceed hidden (%d)", c->tiles, c->hidden);
    RULE(c->ln_eps > 0.0f, "ln-eps must be positive (ln-eps = %g)", c->ln_eps);
    RULE(c->lr > 0.0f, "lr must be positive (lr = %g)", c->lr);
    RULE((int64_t)c->seq * c->batch * c->hidden * 4 <= (int64_t)UINT32_MAX,
         "seq*batch*4*hidden (%lld) must fit in 32 bits", (long long)c->seq * c->batch * c->hidden * 4);
    c->vocab_padded = (c->vocab + 127) / 128 * 128;
    RULE(c->tiles <= c->vocab_padded, "tiles (%d) must not exceed the padded vocabulary (%d)", c->tiles,
         c->vocab_padded);
#undef RULE
    return 0;
}

/* ------------------------------------------------------------ parameters */

int sw_gpt_num_params(const sw_gpt_config *c)
{
    return 2 + SW_GPT_LAYER_PARAMS * c->layers + 2;
}

void sw_gpt_param_shape(const sw_gpt_config *c, int index, int64_t *rows, int64_t *cols, char *name,
                        size_t namelen)
{
    static const char *block_names[SW_GPT_LAYER_PARAMS] = {
        "ln1_w", "ln1_b", "qkv_w", "qkv_b", "proj_w", "proj_b",
        "ln2_w", "ln2_b", "fc_w", "fc_b", "fc2_w", "fc2_b"};
    int64_t h = c->hidden;
    int last = 2 + SW_GPT_LAYER_PARAMS * c->layers;
    if (index == 0) {
        *rows = c->vocab_padded, *cols = h;
        snprintf(name, namelen, "wte");
    } else if (index == 1) {
        *rows = c->max_pos, *cols = h;
        snprintf(name, namelen, "wpe");
    } else if (index >= last) {
        *rows = 1, *cols = h;
        snprintf(name, namelen, index == last ? "lnf_w" : "lnf_b");
    } else {
        int l = (index - 2) / SW_GPT_LAYER_PARAMS, k = (index - 2) % SW_GPT_LAYER_PARAMS;
        static const int64_t out[SW_GPT_LAYER_PARAMS] = {1, 1, 3, 3, 1, 1, 1, 1, 4, 4, 1, 1};
        *rows = 1;
        *cols = out[k] * h;
        if (k == QKV_W || k == PROJ_W || k == FC_W) *rows = out[k] * h, *cols = h;
        if (k == FC2_W) *rows = h, *cols = 4 * h;
        snprintf(name, namelen, "h%d.%s", l, block_names[k]);
    }
}

static int block_param(int layer, int k) { return 2 + SW_GPT_LAYER_PARAMS * layer + k; }

/* GPT-2 init: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), LN weights 1, biases 0. */
static void init_param(const sw_gpt_config *c, int index, float *p, int64_t rows, int64_t cols)
{
    int64_t n = rows * cols;
    int k = index >= 2 ? (index - 2) % SW_GPT_LAYER_PARAMS : -1;
    int is_block = index >= 2 && index < 2 + SW_GPT_LAYER_PARAMS * c->layers;
    if (index >= 2 + SW_GPT_LAYER_PARAMS * c->layers) k = index % 2 == 0 ? LN1_W : LN1_B;
    if (rows == 1) { /* biases and LayerNorm */
        float v = (k == LN1_W || k == LN2_W) ? 1.0f : 0.0f;
        for (int64_t i = 0; i < n; i++) p[i] = v;
        return;
    }
    float std = 0.02f;
    if (is_block && (k == PROJ_W || k == FC2_W)) std = 0.02f / sqrtf(2.0f * (float)c->layers);
    for (int64_t i = 0; i < n; i++) {
        /* Box-Muller on two counter-based uniforms: independent of any tiling */
        float u1 = sw_philox_uniform(c->seed, 0, (uint32_t)index, 0xFFFE, 2 * (uint64_t)i);
        float u2 = sw_philox_uniform(c->seed, 0, (uint32_t)index, 0xFFFE, 2 * (uint64_t)i + 1);
        float r = sqrtf(-2.0f * logf(1.0f - u1));
        p[i] = std * r * cosf(6.28318530718f * u2);
    }
    if (index == 0) /* padded vocabulary rows stay zero */
        memset(p + (int64_t)c->vocab * cols, 0, sizeof(float) * (size_t)((rows - c->vocab) * cols));
}

/* ------------------------------------------------------ create / destroy */

static sw_tensor *act(const char *what, int layer, int64_t rows, int64_t cols)
{
    char name[64];
    if (layer >= 0) snprintf(name, sizeof name, "h%d.%s", layer, what);
    else snprintf(name, sizeof name, "%s", what);
    return sw_tensor_new2d(name, SW_F32, rows, cols);
}

/* largest divisor of heads not above the number of tiles */
static int head_groups(const sw_gpt_config *c)
{
    int g = c->tiles < c->heads ? c->tiles : c->heads;
    while (c->heads % g) g--;
    return g;
}

sw_gpt *sw_gpt_create(const sw_gpt_config *cfg)
{
    sw_gpt *m = calloc(1, sizeof *m);
    if (!m) { perror("starweave: calloc"); abort(); }
    m->c = *cfg;
    char msg[256];
    if (sw_gpt_config_check(&m->c, msg, sizeof msg) != 0) sw_usage_error("%s", msg);
    const sw_gpt_config *c = &m->c;
    int64_t T = (int64_t)c->seq * c->batch, h = c->hidden;
    m->T = (int)T;
    m->P = c->tiles;
    m->G = head_groups(c);
    m->nparams = sw_gpt_num_params(c);
    m->param = calloc((size_t)m->nparams, sizeof(sw_tensor *));
    m->grad = calloc((size_t)m->nparams, sizeof(sw_tensor *));
    m->adam_m = calloc((size_t)m->nparams, sizeof(sw_tensor *));
    m->adam_v = calloc((size_t)m->nparams, sizeof(sw_tensor *));
    m->x = calloc((size_t)c->layers + 1, sizeof(sw_tensor *));
    m->acts = calloc((size_t)c->layers, sizeof(block_acts));
    if (!m->param || !m->grad || !m->adam_m || !m->adam_v || !m->x || !m->acts) {
        perror("starweave: calloc");
        abort();
    }
    for (int i = 0; i < m->nparams; i++) {
        int64_t rows, cols;
        char name[64], gname[72];
        sw_gpt_param_shape(c, i, &rows, &cols, name, sizeof name);
        m->param[i] = sw_tensor_new2d(name, SW_F32, rows, cols);
        snprintf(gname, sizeof gname, "d.%s", name);
        m->grad[i] = sw_tensor_new2d(gname, SW_F32, rows, cols);
        snprintf(gname, sizeof gname, "m.%s", name);
        m->adam_m[i] = sw_tensor_new2d(gname, SW_F32, rows, cols);
        snprintf(gname, sizeof gname, "v.%s", name);
        m->adam_v[i] = sw_tensor_new2d(gname, SW_F32, rows, cols);
        float *host = malloc(sizeof(float) * (size_t)(rows * cols));
        if (!host) { perror("starweave: malloc"); abort(); }
        init_param(c, i, host, rows, cols);
        sw_tensor_write_host(m->param[i], host);
        free(host);
        sw_tensor_fill(m->adam_m[i], 0.0f);
        sw_tensor_fill(m->adam_v[i], 0.0f);
    }
    m->tokens = sw_tensor_new2d("tokens", SW_I32, T, 1);
    m->targets = sw_tensor_new2d("targets", SW_I32, T, 1);
    for (int l = 0; l <= c->layers; l++) m->x[l] = act("x", l, T, h);
    for (int l = 0; l < c->layers; l++) {
        block_acts *a = &m->acts[l];
        a->ln1 = act("ln1", l, T, h);
        a->ln1_mean = act("ln1_mean", l, T, 1);
        a->ln1_rstd = act("ln1_rstd", l, T, 1);
        a->qkv = act("qkv", l, T, 3 * h);
        a->att = act("att", l, T, h);
        a->lse = act("lse", l, T, c->heads);
        a->x_mid = act("x_mid", l, T, h);
        a->ln2 = act("ln2", l, T, h);
        a->ln2_mean = act("ln2_mean", l, T, 1);
        a->ln2_rstd = act("ln2_rstd", l, T, 1);
        a->fc = act("fc", l, T, 4 * h);
        a->fc_gelu = act("fc_gelu", l, T, 4 * h);
    }
    m->lnf = act("lnf", -1, T, h);
    m->lnf_mean = act("lnf_mean", -1, T, 1);
    m->lnf_rstd = act("lnf_rstd", -1, T, 1);
    m->logits = act("logits", -1, T, c->vocab_padded);
    m->ce_max = act("ce_max", -1, T, 1);
    m->ce_tgt = act("ce_target", -1, T, 1);
    m->ce_sumexp = act("ce_sumexp", -1, T, 1);
    m->ce_rows = act("ce_rows", -1, T, 1);
    m->loss = act("loss", -1, 1, 1);
    m->tmp = act("tmp", -1, T, h);
    m->dy = act("dy", -1, T, h);
    m->dres = act("dres", -1, T, h);
    m->dln = act("dln", -1, T, h);
    m->datt = act("datt", -1, T, h);
    m->dqkv = act("dqkv", -1, T, 3 * h);
    m->dfc = act("dfc", -1, T, 4 * h);
    m->part_w = act("ln_part_w", -1, m->P, h);
    m->part_b = act("ln_part_b", -1, m->P, h);
    m->lm_part = act("lm_part", -1, (int64_t)m->P * T, h);
    return m;
}

void sw_gpt_destroy(sw_gpt *m)
{
    if (!m) return;
    for (int i = 0; i < m->nparams; i++) {
        sw_tensor_free(m->param[i]);
        sw_tensor_free(m->grad[i]);
        sw_tensor_free(m->adam_m[i]);
        sw_tensor_free(m->adam_v[i]);
    }
    for (int l = 0; l <= m->c.layers; l++) sw_tensor_free(m->x[l]);
    for (int l = 0; l < m->c.layers; l++) {
        block_acts *a = &m->acts[l];
        sw_tensor *all[] = {a->ln1, a->ln1_mean, a->ln1_rstd, a->qkv, a->att, a->lse,
                            a->x_mid, a->ln2, a->ln2_mean, a->ln2_rstd, a->fc, a->fc_gelu};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) sw_tensor_free(all[i]);
    }
    sw_tensor *rest[] = {m->tokens, m->targets, m->lnf, m->lnf_mean, m->lnf_rstd, m->logits,
                         m->ce_max, m->ce_tgt, m->ce_sumexp, m->ce_rows, m->loss, m->tmp, m->dy,
                         m->dres, m->dln, m->datt, m->dqkv, m->dfc, m->part_w, m->part_b, m->lm_part};
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) sw_tensor_free(rest[i]);
    free(m->param);
    free(m->grad);
    free(m->adam_m);
    free(m->adam_v);
    free(m->x);
    free(m->acts);
    free(m);
}

const sw_gpt_config *sw_gpt_get_config(const sw_gpt *m) { return &m->c; }
sw_tensor *sw_gpt_param(sw_gpt *m, int i) { return m->param[i]; }
sw_tensor *sw_gpt_grad(sw_gpt *m, int i) { return m->grad[i]; }
sw_tensor *sw_gpt_tokens(sw_gpt *m) { return m->tokens; }
sw_tensor *sw_gpt_targets(sw_gpt *m) { return m->targets; }
sw_tensor *sw_gpt_loss(sw_gpt *m) { return m->loss; }

/* --------------------------------------------------------- tile helpers */

static starpu_data_handle_t rows_r(sw_gpt *m, sw_tensor *t, int i) { return sw_tensor_tiles(t, SW_ROWS, m->P, STARPU_R)[i]; }
static starpu_data_handle_t rows_w(sw_gpt *m, sw_tensor *t, int i) { return sw_tensor_tiles(t, SW_ROWS, m->P, STARPU_W)[i]; }
static starpu_data_handle_t rows_rw(sw_gpt *m, sw_tensor *t, int i) { return sw_tensor_tiles(t, SW_ROWS, m->P, STARPU_RW)[i]; }
static starpu_data_handle_t cols_r(sw_gpt *m, sw_tensor *t, int i) { return sw_tensor_tiles(t, SW_COLS, m->P, STARPU_R)[i]; }
static starpu_data_handle_t cols_w(sw_gpt *m, sw_tensor *t, int i) { return sw_tensor_tiles(t, SW_COLS, m->P, STARPU_W)[i]; }
static starpu_data_handle_t whole_r(sw_tensor *t) { return sw_tensor_whole(t, STARPU_R); }

static int64_t tile_row0(sw_gpt *m, int i)
{
    int64_t first, count;
    sw_tile_range(m->T, m->P, i, &first, &count);
    return first;
}

static sw_rng_key drop_key(sw_gpt *m, int step, unsigned layer, unsigned op, int64_t row0)
{
    sw_rng_key k = {m->c.seed, (uint32_t)step, (uint16_t)layer, (uint16_t)op, row0, 0, m->c.hidden};
    return k;
}

/* ------------------------------------------------------- layer builders */

/* y[T,h] = LayerNorm(x) with saved mean/rstd [T,1] */
static void layernorm_forward(sw_gpt *m, sw_tensor *x, int w, sw_tensor *y, sw_tensor *mean, sw_tensor *rstd)
{
    for (int i = 0; i < m->P; i++)
        sw_layernorm_fwd(rows_r(m, x, i), whole_r(m->param[w]), whole_r(m->param[w + 1]), rows_w(m, y, i),
                         rows_w(m, mean, i), rows_w(m, rstd, i), m->c.ln_eps);
}

/* dres[T,h] += LayerNorm'(dln); d(w), d(b) = sums of per-tile partials */
static void layernorm_backward(sw_gpt *m, sw_tensor *x, int w, sw_tensor *mean, sw_tensor *rstd, int accumulate)
{
    for (int i = 0; i < m->P; i++)
        sw_layernorm_bwd(rows_r(m, m->dln, i), rows_r(m, x, i), whole_r(m->param[w]), rows_r(m, mean, i),
                         rows_r(m, rstd, i), accumulate ? rows_rw(m, m->dres, i) : rows_w(m, m->dres, i),
                         rows_w(m, m->part_w, i), rows_w(m, m->part_b, i), accumulate);
    sw_colsum(whole_r(m->part_w), sw_tensor_whole(m->grad[w], STARPU_W), 1.0f, 0.0f);
    sw_colsum(whole_r(m->part_b), sw_tensor_whole(m->grad[w + 1], STARPU_W), 1.0f, 0.0f);
}

/* GEMM tiling: OpenBLAS packs both operands of every call, so a task split
 * along one output dimension re-packs the whole other operand. Activations
 * ([T, *], T = seq*batch, small) are re-packed; weights never are: every
 * task gets its own slice of the weight. */

/* y[T,out] = x[T,in] W^T + b, W [out,in]: split over out (ntiles column tiles of y) */
static void linear_forward(sw_gpt *m, sw_tensor *x, int w, sw_tensor *y, int ntiles)
{
    for (int j = 0; j < ntiles; j++)
        sw_gemm_bias(whole_r(x), 0, sw_tensor_tiles(m->param[w], SW_ROWS, ntiles, STARPU_R)[j], 1,
                     sw_tensor_tiles(m->param[w + 1], SW_COLS, ntiles, STARPU_R)[j],
                     sw_tensor_tiles(y, SW_COLS, ntiles, STARPU_W)[j]);
}

/* dW[out,in] = dy^T x (split over out), db = colsum(dy), dx[T,in] = dy W (split over in) */
static void linear_backward(sw_gpt *m, sw_tensor *dy, sw_tensor *x, int w, sw_tensor *dx)
{
    for (int j = 0; j < m->P; j++) {
        sw_gemm(cols_r(m, dy, j), 1, whole_r(x), 0, sw_tensor_tiles(m->grad[w], SW_ROWS, m->P, STARPU_W)[j],
                1.0f, 0.0f);
        sw_colsum(cols_r(m, dy, j), cols_w(m, m->grad[w + 1], j), 1.0f, 0.0f);
    }
    for (int j = 0; j < m->P; j++)
        sw_gemm(whole_r(dy), 0, sw_tensor_tiles(m->param[w], SW_COLS, m->P, STARPU_R)[j], 0, cols_w(m, dx, j),
                1.0f, 0.0f);
}

static sw_attn_args attn_args(sw_gpt *m, int step, int layer, int group)
{
    const sw_gpt_config *c = &m->c;
    sw_attn_args a;
    memset(&a, 0, sizeof a);
    a.batch = c->batch;
    a.nh = c->heads / m->G;
    a.d = c->hidden / c->heads;
    a.sq = a.sk = c->seq;
    a.causal = 1;
    a.scale = 1.0f / sqrtf((float)a.d);
    a.dropout = c->dropout;
    a.key = drop_key(m, step, (unsigned)layer, SW_DROP_ATTN_PROBS, 0);
    a.head0 = group * a.nh;
    a.heads_total = c->heads;
    a.seq_total = c->seq;
    return a;
}

/* att[T,h], lse[T,heads] = causal attention of qkv[T,3h], one task per head group */
static void attention_forward(sw_gpt *m, int step, int layer)
{
    block_acts *A = &m->acts[layer];
    int G = m->G;
    for (int g = 0; g < G; g++) {
        starpu_data_handle_t *qkv = sw_tensor_tiles(A->qkv, SW_COLS, 3 * G, STARPU_R);
        sw_attn_args a = attn_args(m, step, layer, g);
        sw_attn_fwd(qkv[g], qkv[G + g], qkv[2 * G + g], sw_tensor_tiles(A->att, SW_COLS, G, STARPU_W)[g],
                    sw_tensor_tiles(A->lse, SW_COLS, G, STARPU_W)[g], &a);
    }
}

static void attention_backward(sw_gpt *m, int step, int layer)
{
    block_acts *A = &m->acts[layer];
    int G = m->G;
    for (int g = 0; g < G; g++) {
        starpu_data_handle_t *qkv = sw_tensor_tiles(A->qkv, SW_COLS, 3 * G, STARPU_R);
        starpu_data_handle_t *dqkv = sw_tensor_tiles(m->dqkv, SW_COLS, 3 * G, STARPU_W);
        sw_attn_args a = attn_args(m, step, layer, g);
        sw_attn_bwd(qkv[g], qkv[G + g], qkv[2 * G + g], sw_tensor_tiles(A->att, SW_COLS, G, STARPU_R)[g],
                    sw_tensor_tiles(A->lse, SW_COLS, G, STARPU_R)[g],
                    sw_tensor_tiles(m->datt, SW_COLS, G, STARPU_R)[g], dqkv[g], dqkv[G + g], dqkv[2 * G + g], &a);
    }
}

/* out = res + dropout(branch) */
static void residual_forward(sw_gpt *m, int step, int layer, int op, sw_tensor *res, sw_tensor *branch,
                             sw_tensor *out)
{
    for (int i = 0; i < m->P; i++) {
        starpu_data_handle_t b = rows_r(m, branch, i);
        if (m->c.dropout > 0.0f) {
            sw_rng_key k = drop_key(m, step, (unsigned)layer, (unsigned)op, tile_row0(m, i));
            sw_dropout_fwd(b, rows_w(m, m->tmp, i), m->c.dropout, &k);
            b = rows_r(m, m->tmp, i);
        }
        sw_add(rows_r(m, res, i), b, rows_w(m, out, i));
    }
}

/* gradient of the dropped branch: dropout is diagonal, so its backward is
 * its forward applied to the gradient (same key, same mask). */
static sw_tensor *residual_backward(sw_gpt *m, int step, int layer, int op)
{
    if (m->c.dropout == 0.0f) return m->dres;
    for (int i = 0; i < m->P; i++) {
        sw_rng_key k = drop_key(m, step, (unsigned)layer, (unsigned)op, tile_row0(m, i));
        sw_dropout_fwd(rows_r(m, m->dres, i), rows_w(m, m->dy, i), m->c.dropout, &k);
    }
    return m->dy;
}

/* ------------------------------------------------------------- forward */

void sw_gpt_forward(sw_gpt *m, int step)
{
    const sw_gpt_config *c = &m->c;
    int P = m->P;
    /* x[0] = wte[tokens] + wpe[pos] (+ dropout) */
    sw_tensor *emb = c->dropout > 0.0f ? m->tmp : m->x[0];
    for (int i = 0; i < P; i++)
        sw_embedding_fwd(rows_r(m, m->tokens, i), whole_r(m->param[0]), whole_r(m->param[1]), rows_w(m, emb, i),
                         tile_row0(m, i), c->batch, 0, 0);
    if (c->dropout > 0.0f)
        for (int i = 0; i < P; i++) {
            sw_rng_key k = drop_key(m, step, SW_DROP_EMBED_LAYER, SW_DROP_EMBED, tile_row0(m, i));
            sw_dropout_fwd(rows_r(m, m->tmp, i), rows_w(m, m->x[0], i), c->dropout, &k);
        }

    for (int l = 0; l < c->layers; l++) {
        block_acts *A = &m->acts[l];
        layernorm_forward(m, m->x[l], block_param(l, LN1_W), A->ln1, A->ln1_mean, A->ln1_rstd);
        linear_forward(m, A->ln1, block_param(l, QKV_W), A->qkv, 3 * m->G); /* = attention's tiles */
        attention_forward(m, step, l);
        linear_forward(m, A->att, block_param(l, PROJ_W), m->dy, P); /* dy: forward scratch here */
        residual_forward(m, step, l, SW_DROP_ATTN_OUT, m->x[l], m->dy, A->x_mid);
        layernorm_forward(m, A->x_mid, block_param(l, LN2_W), A->ln2, A->ln2_mean, A->ln2_rstd);
        linear_forward(m, A->ln2, block_param(l, FC_W), A->fc, P);
        for (int j = 0; j < P; j++) sw_gelu_fwd(cols_r(m, A->fc, j), cols_w(m, A->fc_gelu, j));
        linear_forward(m, A->fc_gelu, block_param(l, FC2_W), m->dy, P);
        residual_forward(m, step, l, SW_DROP_MLP_OUT, A->x_mid, m->dy, m->x[l + 1]);
    }

    int lnf = sw_gpt_num_params(c) - 2;
    layernorm_forward(m, m->x[c->layers], lnf, m->lnf, m->lnf_mean, m->lnf_rstd);
    /* logits[T,Vp] = lnf wte^T (tied head) and the cross-entropy pieces */
    for (int j = 0; j < P; j++)
        sw_gemm(whole_r(m->lnf), 0, sw_tensor_tiles(m->param[0], SW_ROWS, P, STARPU_R)[j], 1, cols_w(m, m->logits, j),
                1.0f, 0.0f);
    for (int i = 0; i < P; i++) {
        starpu_data_handle_t lg = rows_r(m, m->logits, i);
        sw_ce_max(lg, rows_w(m, m->ce_max, i), 0, c->vocab);
        sw_ce_target(lg, rows_r(m, m->targets, i), rows_w(m, m->ce_tgt, i), 0);
        sw_ce_sumexp(lg, rows_r(m, m->ce_max, i), rows_w(m, m->ce_sumexp, i), 0, c->vocab);
        sw_ce_loss(rows_r(m, m->ce_max, i), rows_r(m, m->ce_tgt, i), rows_r(m, m->ce_sumexp, i),
                   rows_w(m, m->ce_rows, i));
    }
    sw_colsum(whole_r(m->ce_rows), sw_tensor_whole(m->loss, STARPU_W), 1.0f / (float)m->T, 0.0f);
}

/* ------------------------------------------------------------ backward */

void sw_gpt_backward(sw_gpt *m, int step)
{
    const sw_gpt_config *c = &m->c;
    int P = m->P;
    int lnf = sw_gpt_num_params(c) - 2;

    /* dlogits = (softmax - onehot) / T, in place */
    for (int i = 0; i < P; i++)
        sw_ce_bwd(rows_rw(m, m->logits, i), rows_r(m, m->ce_max, i), rows_r(m, m->ce_sumexp, i),
                  rows_r(m, m->targets, i), 0, c->vocab, 1.0f / (float)m->T);
    /* dwte = dlogits^T lnf (split over the vocabulary), dlnf = dlogits wte */
    for (int j = 0; j < P; j++)
        sw_gemm(cols_r(m, m->logits, j), 1, whole_r(m->lnf), 0,
                sw_tensor_tiles(m->grad[0], SW_ROWS, P, STARPU_W)[j], 1.0f, 0.0f);
    /* dlnf = dlogits wte, split over the vocabulary (the reduction dimension:
     * neither 51 MB operand is re-packed) into partial sums, then added */
    if (P == 1) {
        sw_gemm(whole_r(m->logits), 0, whole_r(m->param[0]), 0, sw_tensor_whole(m->dln, STARPU_W), 1.0f, 0.0f);
    } else {
        for (int j = 0; j < P; j++)
            sw_gemm(cols_r(m, m->logits, j), 0, sw_tensor_tiles(m->param[0], SW_ROWS, P, STARPU_R)[j], 0,
                    rows_w(m, m->lm_part, j), 1.0f, 0.0f);
        sw_add(rows_r(m, m->lm_part, 0), rows_r(m, m->lm_part, 1), sw_tensor_whole(m->dln, STARPU_W));
        for (int j = 2; j < P; j++) sw_axpy(1.0f, rows_r(m, m->lm_part, j), sw_tensor_whole(m->dln, STARPU_RW));
    }
    layernorm_backward(m, m->x[c->layers], lnf, m->lnf_mean, m->lnf_rstd, 0);

    for (int l = c->layers - 1; l >= 0; l--) {
        block_acts *A = &m->acts[l];
        /* MLP: x[l+1] = x_mid + dropout(fc2(gelu(fc(ln2(x_mid))))) */
        sw_tensor *dz = residual_backward(m, step, l, SW_DROP_MLP_OUT);
        linear_backward(m, dz, A->fc_gelu, block_param(l, FC2_W), m->dfc);
        for (int j = 0; j < P; j++)
            sw_gelu_bwd(cols_r(m, A->fc, j), sw_tensor_tiles(m->dfc, SW_COLS, P, STARPU_RW)[j]);
        linear_backward(m, m->dfc, A->ln2, block_param(l, FC_W), m->dln);
        layernorm_backward(m, A->x_mid, block_param(l, LN2_W), A->ln2_mean, A->ln2_rstd, 1);
        /* attention: x_mid = x[l] + dropout(proj(attention(qkv(ln1(x[l]))))) */
        sw_tensor *dproj = residual_backward(m, step, l, SW_DROP_ATTN_OUT);
        linear_backward(m, dproj, A->att, block_param(l, PROJ_W), m->datt);
        attention_backward(m, step, l);
        linear_backward(m, m->dqkv, A->ln1, block_param(l, QKV_W), m->dln);
        layernorm_backward(m, m->x[l], block_param(l, LN1_W), A->ln1_mean, A->ln1_rstd, 1);
    }

    /* embedding: dwte += scatter(dx0), dwpe = scatter(dx0) */
    sw_tensor *demb = m->dres;
    if (c->dropout > 0.0f) {
        for (int i = 0; i < P; i++) {
            sw_rng_key k = drop_key(m, step, SW_DROP_EMBED_LAYER, SW_DROP_EMBED, tile_row0(m, i));
            sw_dropout_fwd(rows_r(m, m->dres, i), rows_w(m, m->dy, i), c->dropout, &k);
        }
        demb = m->dy;
    }
    sw_embedding_bwd(whole_r(m->tokens), whole_r(demb), sw_tensor_whole(m->grad[0], STARPU_RW),
                     sw_tensor_whole(m->grad[1], STARPU_W), 0, c->batch, 0, 0, 1);

    /* the scratch gradients are dead until the next backward: StarPU may
     * drop every copy instead of keeping (or writing back) them */
    sw_tensor *scratch[] = {m->logits, m->tmp, m->dy, m->dres, m->dln, m->datt, m->dqkv, m->dfc,
                            m->part_w, m->part_b, m->lm_part};
    for (size_t i = 0; i < sizeof scratch / sizeof scratch[0]; i++) sw_tensor_invalidate(scratch[i]);
}

/* --------------------------------------------------------------- AdamW */

void sw_gpt_update(sw_gpt *m, int step)
{
    const sw_gpt_config *c = &m->c;
    sw_adamw_args a = {c->lr, c->beta1, c->beta2, c->adam_eps, c->weight_decay, step};
    for (int p = 0; p < m->nparams; p++) {
        sw_tensor *t = m->param[p];
        if (t->rows < m->P) {
            sw_adamw(sw_tensor_whole(t, STARPU_RW), whole_r(m->grad[p]), sw_tensor_whole(m->adam_m[p], STARPU_RW),
                     sw_tensor_whole(m->adam_v[p], STARPU_RW), &a);
            continue;
        }
        for (int i = 0; i < m->P; i++)
            sw_adamw(rows_rw(m, t, i), rows_r(m, m->grad[p], i), rows_rw(m, m->adam_m[p], i),
                     rows_rw(m, m->adam_v[p], i), &a);
    }
}

float sw_gpt_read_loss(sw_gpt *m)
{
    float loss;
    sw_tensor_read_host(m->loss, &loss);
    return loss;
}

double sw_gpt_step_flops(const sw_gpt_config *c)
{
    double T = (double)c->seq * c->batch, h = c->hidden;
    double vp = c->vocab_padded > 0 ? c->vocab_padded : (c->vocab + 127) / 128 * 128;
    /* per block: qkv 6Th^2, proj 2Th^2, MLP 16Th^2, attention 4 b s^2 h (full square) */
    double block = 24.0 * T * h * h + 4.0 * c->batch * (double)c->seq * c->seq * h;
    double forward = c->layers * block + 2.0 * T * h * vp;
    return 3.0 * forward; /* backward = 2 x forward */
}
