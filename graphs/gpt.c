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
#include "tp_mappings.h"
#include "starweave/graphs.h"
#include "starweave/ops.h"
#include "starweave/runtime.h"
#include "starweave/trace.h"

/* parameter slots of one block, in graphs.h order */
enum { LN1_W, LN1_B, QKV_W, QKV_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC_W, FC_B, FC2_W, FC2_B };

/* What one block keeps from forward to backward. "l" rows: this rank's
 * residual-stream rows (T/tp with sp, else T); full rows: T. */
typedef struct block_acts {
    sw_tensor *ln1, *ln1_mean, *ln1_rstd; /* [l,h], [l,1], [l,1] */
    sw_tensor *ln1g;                      /* [T,h] ln1 gathered (sp; = ln1 without sp, shared scratch with tp_recompute_allgather) */
    sw_tensor *qkv;                       /* [T,(aq+2ak)d]: local q | k | v heads (scratch with Ulysses) */
    sw_tensor *qkv_u;                     /* attention space [Tr,(hq+2hk)d] (= qkv without Ulysses) */
    sw_tensor *att, *att_u, *lse;         /* [T,aq d], [Tr,hq d] (= att without Ulysses), [Tr,hq] */
    sw_tensor *x_mid;                     /* [l,h] residual stream after attention */
    sw_tensor *ln2, *ln2_mean, *ln2_rstd, *ln2g;
    sw_tensor *fc, *fc_gelu;              /* [T,4h/tp] before / after GeLU */
    sw_tensor *probs;                     /* recompute none: [B hq S, S] attention probabilities (S = seq) */
    int nown;
    sw_tensor *own[16];                   /* the tensors allocated for this block alone */
} block_acts;

struct sw_gpt {
    sw_gpt_config c;
    sw_tp tp;
    sw_comm *comm;          /* the mesh's collectives (DP group) */
    int dp_rank;
    int B, micro;           /* sequences per micro-batch, current micro-batch */
    int T, Tl, row0;        /* tokens of a micro-batch, local residual rows and the first of them */
    int P;                  /* row tiles of the local rows; column tiles of the GEMMs */
    int aq, ak, kv0, d;     /* local query heads, local K/V heads, first global K/V head, head dim */
    /* context parallelism: the attention space is the ring block (Tr = U T
     * rows: the positions of ring rank rr, gathered over Ulysses) with
     * hq = aq/U query and hk = ak/U K/V heads */
    int U, R, ur, rr, zig;  /* Ulysses and ring degrees and ranks, zigzag layout */
    int Tr, hq, hk;
    int nlr;                /* runs of consecutive global positions among the local ones (1 or 2) */
    int64_t lr_i0[2], lr_p0[2], lr_n[2]; /* first local position, its global position, length */
    sw_group gg;            /* gradient group: dp, or ulysses x ring x dp */
    int gn, gr;             /* its size and this rank's place */
    double attn_flops;      /* attention FLOPs of the last forward */
    int G, Gk;              /* attention tasks per run (query-head groups) and K/V column tiles */
    int64_t *qkv_sizes;     /* G + 2 Gk column sizes of qkv_u: q groups | k tiles | v tiles */
    int nqkv;               /* column blocks of the QKV GEMM: G + 2 Gk, or 3 U with Ulysses */
    int64_t *gemm_sizes;    /* their sizes (qkv_sizes, or q | k | v heads of each Ulysses member) */
    int npc[2];             /* row pieces of the T and the local rows: tiles cut at the position runs */
    int64_t *pc_size[2], *pc_key[2], *pc_off[2], *pc_pos[2]; /* size, dropout-key row, row in run, run's position */
    int Vl;                 /* local vocabulary rows */
    int nparams;
    sw_tensor **param, **grad, **adam_m, **adam_v;
    sw_tensor **w16;                      /* --dtype bf16: bf16 copies of the GEMM weights (NULL: none) */
    sw_tensor *tokens, *targets;          /* [T,1] int32 */
    sw_tensor **x;                        /* x[0] embedding output .. x[L] last block output, [l,h] */
    int K;                                /* blocks per checkpoint with full recomputation, else 0 */
    int nblocks;                          /* block_acts allocated: one per layer, or K (full recomputation) */
    block_acts *blocks;
    block_acts **acts;                    /* acts[l] = blocks[l % nblocks]: a working set with full recomputation
                                             (filled again in backward) and with offload (filled by onload) */
    sw_tensor ***stash;                   /* offload: stash[l][i] on the offload node holds acts[l]->own[i] */
    struct stash_ref { struct sw_gpt *m; int l; } *sref; /* sref[l]: prefetch callback argument of block l */
    sw_tensor *lnf, *lnf_mean, *lnf_rstd, *lnfg; /* [l,h], [l,1], [l,1], [T,h] */
    sw_tensor *logits;                    /* [T,Vl]; holds dlogits after backward */
    sw_tensor *ce_max, *ce_tgt, *ce_sumexp, *ce_rows, *loss; /* [T,1] x4, [1,1] */
    sw_tensor *loss_sum;                  /* [1,1] over micro-batches and dp ranks, when either is > 1 */
    /* gradient buckets (dp > 1 or grad_accum > 1): flat [1, n] tensors of
     * consecutive parameters in reverse order */
    int nbuckets;
    sw_tensor **bucket;
    int *bucket_first, *bucket_count;     /* parameters first, first-1, ... (count of them) */
    int64_t **bucket_sizes;
    /* scratch shared by all layers (StarPU orders the reuse) */
    sw_tensor *emb;                       /* [T,h] vocab-parallel embedding partial */
    sw_tensor *part;                      /* [T,h] partial sums of a row-parallel output / of an input gradient */
    sw_tensor *gath;                      /* [T,h] re-gathered norm output (tp_recompute_allgather) */
    sw_tensor *red, *tmp, *dy;            /* [l,h] */
    sw_tensor *dres, *dln;                /* [l,h] residual gradient, reduced input gradient */
    sw_tensor *dfull;                     /* [T,h] gathered branch gradient (sp) */
    sw_tensor *datt, *dqkv, *dfc;         /* [T,aq d], [T,(aq+2ak)d], [T,4h/tp] */
    sw_tensor *qkv_t;                     /* Ulysses: the QKV GEMM's output, before the all-to-all */
    sw_tensor *part_w, *part_b;           /* [P,h] per-tile LayerNorm parameter gradients */
    sw_tensor *lm_part;                   /* [P*T,h] partial sums of dlnf over vocabulary tiles */
    /* K/V heads replicated over tp / kv_heads ranks: their weight gradients
     * are partial sums; gathered over TP and added up among the sharers */
    int kv_replicated;
    sw_tensor **gshard;                   /* ZeRO-1: this dp rank's rows of each gradient (NULL: not sharded) */
    sw_tensor *kvw_mine, *kvw_all;        /* [2d,h], [tp*2d,h] */
    sw_tensor *kvb_mine, *kvb_all;        /* [1,2d], [tp,2d] */
    /* context parallelism scratch: K/V blocks and their gradients on the
     * ring (double-buffered, [Tr,2hk d]); attention-space gradients */
    sw_tensor *kvbuf[2], *dkvbuf[2], *datt_u, *dqkv_u;
};

static double saved_model_bytes(const sw_gpt_config *c, int layer);

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
    c->tp = 1;
    c->dp = 1;
    c->grad_accum = 1;
    c->bucket_mb = 25.0f;
    c->ulysses = 1;
    c->ring = 1;
    c->zigzag = 1;
    c->recompute = SW_RECOMPUTE_SELECTIVE;
    c->recompute_every = 1;
}

static const char *const recompute_names[] = {"none", "selective", "full"};

const char *sw_recompute_name(int mode)
{
    return mode >= 0 && mode < 3 ? recompute_names[mode] : "?";
}

int sw_recompute_parse(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, recompute_names[i])) return i;
    return -1;
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
    if (c->kv_heads == 0) c->kv_heads = c->heads;
    RULE(c->kv_heads > 0, "kv-heads must be positive (kv-heads = %d)", c->kv_heads);
    RULE(c->heads % c->kv_heads == 0, "heads (%d) must be divisible by kv-heads (%d)", c->heads, c->kv_heads);
    RULE(c->tp > 0, "tp must be at least 1 (tp = %d)", c->tp);
    RULE(c->heads % c->tp == 0, "heads (%d) must be divisible by tp (%d)", c->heads, c->tp);
    RULE(c->kv_heads < c->tp || c->kv_heads % c->tp == 0,
         "kv-heads (%d) must be divisible by tp (%d) when kv-heads >= tp (K/V heads split)", c->kv_heads, c->tp);
    RULE(c->kv_heads >= c->tp || c->tp % c->kv_heads == 0,
         "tp (%d) must be divisible by kv-heads (%d) when kv-heads < tp (K/V heads replicated)", c->tp, c->kv_heads);
    RULE(c->ulysses > 0, "ulysses must be at least 1 (ulysses = %d)", c->ulysses);
    RULE(c->ring > 0, "ring must be at least 1 (ring = %d)", c->ring);
    RULE(c->ulysses == 1 || c->heads % (c->tp * c->ulysses) == 0, "heads (%d) must be divisible by tp*ulysses (%d*%d)",
         c->heads, c->tp, c->ulysses);
    RULE(c->ulysses == 1 || c->kv_heads % (c->tp * c->ulysses) == 0,
         "kv-heads (%d) must be divisible by tp*ulysses (%d*%d): Ulysses splits the K/V heads", c->kv_heads, c->tp,
         c->ulysses);
    int cp = c->ulysses * c->ring, zig = c->ring > 1 && c->zigzag;
    RULE(!zig || c->seq % (2 * cp) == 0, "seq (%d) must be divisible by 2*ring*ulysses (2*%d*%d) with zigzag", c->seq,
         c->ring, c->ulysses);
    RULE(c->seq % cp == 0, "seq (%d) must be divisible by ring*ulysses (%d*%d)", c->seq, c->ring, c->ulysses);
    RULE(c->vocab > 0, "vocab must be positive (vocab = %d)", c->vocab);
    RULE(c->seq > 0, "seq must be positive (seq = %d)", c->seq);
    RULE(c->batch > 0, "batch must be positive (batch = %d)", c->batch);
    RULE(c->max_pos > 0, "max-pos must be positive (max-pos = %d)", c->max_pos);
    RULE(c->seq <= c->max_pos, "seq (%d) must not exceed the positions of the model (max-pos = %d)", c->seq,
         c->max_pos);
    RULE(!c->sp || c->seq % c->tp == 0, "seq (%d) must be divisible by tp (%d) with sequence parallelism", c->seq,
         c->tp);
    RULE(!c->sp || (c->seq / cp) % c->tp == 0,
         "seq/(ulysses*ring) (%d) must be divisible by tp (%d) with sequence parallelism", c->seq / cp, c->tp);
    RULE(!c->tp_recompute_allgather || c->sp, "tp-recompute-allgather needs sequence parallelism (--sp)");
    RULE(c->dp > 0, "dp must be at least 1 (dp = %d)", c->dp);
    RULE(c->grad_accum > 0, "grad-accum must be at least 1 (grad-accum = %d)", c->grad_accum);
    RULE(c->batch % (c->dp * c->grad_accum) == 0, "batch (%d) must be divisible by dp*grad-accum (%d*%d)",
         c->batch, c->dp, c->grad_accum);
    RULE(c->zero == 0 || c->zero == 1, "zero must be 0 or 1 (zero = %d)", c->zero);
    RULE(c->bucket_mb > 0.0f, "bucket-mb must be positive (bucket-mb = %g)", c->bucket_mb);
    RULE(c->recompute >= SW_RECOMPUTE_NONE && c->recompute <= SW_RECOMPUTE_FULL,
         "recompute must be none, selective or full (recompute = %d)", c->recompute);
    RULE(c->recompute_every > 0, "recompute-every must be at least 1 (recompute-every = %d)", c->recompute_every);
    RULE(c->recompute_every == 1 || c->recompute == SW_RECOMPUTE_FULL,
         "recompute-every (%d) needs recompute full (recompute = %s)", c->recompute_every,
         sw_recompute_name(c->recompute));
    RULE(c->recompute != SW_RECOMPUTE_NONE || c->ring == 1,
         "recompute none needs ring = 1 (ring = %d): Ring attention never holds a whole row of probabilities",
         c->ring);
    RULE(!c->offload || c->recompute != SW_RECOMPUTE_FULL,
         "offload needs recompute none or selective (recompute = full keeps only block inputs)");
    RULE(c->dtype == SW_F32 || c->dtype == SW_BF16, "dtype must be fp32 (%d) or bf16 (%d) (dtype = %d)", SW_F32,
         SW_BF16, c->dtype);
    RULE(c->dropout >= 0.0f && c->dropout < 1.0f, "dropout must be in [0, 1) (dropout = %g)", c->dropout);
    RULE(c->tiles > 0, "tiles (%d) must be positive", c->tiles);
    int local_rows = c->seq / cp * (c->batch / (c->dp * c->grad_accum)) / (c->sp ? c->tp : 1);
    RULE(c->tiles <= local_rows,
         "tiles (%d) must not exceed the rows of a rank, seq*batch/(dp*grad-accum*ulysses*ring)%s (%d)", c->tiles,
         c->sp ? "/tp" : "", local_rows);
    int head_cols = c->hidden / c->tp; /* columns of the local attention output */
    RULE(c->tiles <= head_cols, "tiles (%d) must not exceed hidden/tp (%d)", c->tiles, head_cols);
    RULE(c->ln_eps > 0.0f, "ln-eps must be positive (ln-eps = %g)", c->ln_eps);
    RULE(c->lr > 0.0f, "lr must be positive (lr = %g)", c->lr);
    RULE((int64_t)c->seq * c->batch * c->hidden * 4 <= (int64_t)UINT32_MAX,
         "seq*batch*4*hidden (%lld) must fit in 32 bits", (long long)c->seq * c->batch * c->hidden * 4);
    int pad = 128 * c->tp;
    c->vocab_padded = (c->vocab + pad - 1) / pad * pad;
    RULE(c->tiles <= c->vocab_padded / c->tp, "tiles (%d) must not exceed the padded vocabulary per rank (%d)",
         c->tiles, c->vocab_padded / c->tp);
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
        int kv = c->kv_heads ? c->kv_heads : c->heads;
        int64_t qkv = h + 2 * (int64_t)kv * (h / c->heads);
        const int64_t out[SW_GPT_LAYER_PARAMS] = {h, h, qkv, qkv, h, h, h, h, 4 * h, 4 * h, h, h};
        *rows = 1;
        *cols = out[k];
        if (k == QKV_W || k == PROJ_W || k == FC_W) *rows = out[k], *cols = h;
        if (k == FC2_W) *rows = h, *cols = 4 * h;
        snprintf(name, namelen, "h%d.%s", l, block_names[k]);
    }
}

static int block_param(int layer, int k) { return 2 + SW_GPT_LAYER_PARAMS * layer + k; }

/* parameters that enter GEMMs: wte (the tied LM head) and the blocks' linear weights */
static int gemm_weight(const sw_gpt_config *c, int index)
{
    if (index == 0) return 1;
    if (index < 2 || index >= 2 + SW_GPT_LAYER_PARAMS * c->layers) return 0;
    int k = (index - 2) % SW_GPT_LAYER_PARAMS;
    return k == QKV_W || k == PROJ_W || k == FC_W || k == FC2_W;
}

/* ---------------------------------------------------------------- shards */

/* A shard is up to three blocks of the global [rows, cols] tensor, stacked
 * along the split dim: rows [start, start + count) (dim 0) or columns
 * (dim 1). n == 0: replicated. */
typedef struct shard {
    int n, dim;
    int64_t start[3], count[3];
} shard;

static int kv_heads_of(const sw_gpt_config *c) { return c->kv_heads ? c->kv_heads : c->heads; }

/* first global K/V head used by TP rank r, and how many it holds */
static void kv_range(const sw_gpt_config *c, int r, int *kv0, int *ak)
{
    int kv = kv_heads_of(c), aq = c->heads / c->tp;
    if (kv >= c->tp) *ak = kv / c->tp, *kv0 = r * *ak;
    else *ak = 1, *kv0 = r * aq / (c->heads / kv); /* replicated: the head of my query heads */
}

static shard shard_of(const sw_gpt_config *c, int r, int index)
{
    shard s = {0, 0, {0}, {0}};
    int t = c->tp;
    if (t == 1) return s;
    int64_t h = c->hidden, d = h / c->heads, aq = c->heads / t, f = 4 * h / t;
    int last = 2 + SW_GPT_LAYER_PARAMS * c->layers;
    if (index == 0) { /* wte: vocabulary rows */
        int64_t vl = c->vocab_padded / t;
        s = (shard){1, 0, {r * vl}, {vl}};
    } else if (index >= 2 && index < last) {
        int k = (index - 2) % SW_GPT_LAYER_PARAMS, kv0, ak;
        kv_range(c, r, &kv0, &ak);
        int64_t kvd = (int64_t)kv_heads_of(c) * d;
        switch (k) {
        case QKV_W: case QKV_B: /* my query heads, my K/V heads */
            s = (shard){3, k == QKV_W ? 0 : 1, {r * aq * d, h + kv0 * d, h + kvd + kv0 * d}, {aq * d, ak * d, ak * d}};
            break;
        case PROJ_W: s = (shard){1, 1, {r * aq * d}, {aq * d}}; break; /* row-parallel: input columns */
        case FC_W: s = (shard){1, 0, {r * f}, {f}}; break;
        case FC_B: s = (shard){1, 1, {r * f}, {f}}; break;
        case FC2_W: s = (shard){1, 1, {r * f}, {f}}; break;
        default: break; /* norms, row-parallel biases: replicated */
        }
    }
    return s;
}

void sw_gpt_local_shape(const sw_gpt_config *c, int tp_rank, int index, int64_t *rows, int64_t *cols)
{
    char name[64];
    sw_gpt_param_shape(c, index, rows, cols, name, sizeof name);
    shard s = shard_of(c, tp_rank, index);
    if (s.n == 0) return;
    int64_t n = 0;
    for (int i = 0; i < s.n; i++) n += s.count[i];
    if (s.dim == 0) *rows = n;
    else *cols = n;
}

void sw_gpt_shard(const sw_gpt_config *c, int tp_rank, int index, const float *global, float *local)
{
    int64_t rows, cols;
    char name[64];
    sw_gpt_param_shape(c, index, &rows, &cols, name, sizeof name);
    shard s = shard_of(c, tp_rank, index);
    if (s.n == 0) {
        memcpy(local, global, sizeof(float) * (size_t)(rows * cols));
        return;
    }
    if (s.dim == 0) {
        for (int i = 0; i < s.n; i++, local += s.count[i - 1] * cols)
            memcpy(local, global + s.start[i] * cols, sizeof(float) * (size_t)(s.count[i] * cols));
        return;
    }
    int64_t lc = 0;
    for (int i = 0; i < s.n; i++) lc += s.count[i];
    for (int64_t row = 0; row < rows; row++) {
        float *dst = local + row * lc;
        for (int i = 0; i < s.n; i++, dst += s.count[i - 1])
            memcpy(dst, global + row * cols + s.start[i], sizeof(float) * (size_t)s.count[i]);
    }
}

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

static int64_t *new_sizes(int n)
{
    int64_t *v = malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    if (!v) { perror("starweave: malloc"); abort(); }
    return v;
}

/* Attention tasks: G query-head groups, G the largest divisor of the
 * attention-space query heads not above the number of tiles such that every
 * group reads one K/V column tile (G divides the K/V heads, or they divide
 * G). The QKV GEMM writes the G + 2 Gk column blocks, or with Ulysses the
 * q, k and v heads of each member (the all-to-all's parts). */
static void attention_groups(sw_gpt *m)
{
    int g = m->c.tiles < m->hq ? m->c.tiles : m->hq;
    while (m->hq % g || (m->hk % g && g % m->hk)) g--;
    m->G = g;
    m->Gk = g < m->hk ? g : m->hk;
    m->qkv_sizes = new_sizes(m->G + 2 * m->Gk);
    for (int i = 0; i < m->G; i++) m->qkv_sizes[i] = (int64_t)m->hq * m->d / m->G;
    for (int i = 0; i < 2 * m->Gk; i++) m->qkv_sizes[m->G + i] = (int64_t)m->hk * m->d / m->Gk;
    m->nqkv = m->U > 1 ? 3 * m->U : m->G + 2 * m->Gk;
    m->gemm_sizes = new_sizes(m->nqkv);
    for (int i = 0; i < m->nqkv; i++)
        m->gemm_sizes[i] = m->U == 1 ? m->qkv_sizes[i] : (int64_t)(i < m->U ? m->hq : m->hk) * m->d;
}

/* Positions of ring rank rr's block, in ring-block order: zigzag chunks
 * rr and 2R - 1 - rr of 2R, or block rr of R. Returns the number of runs. */
static int ring_runs(const sw_gpt *m, int rr, int64_t p0[2], int64_t n[2])
{
    int64_t s = m->c.seq;
    if (m->zig) {
        int64_t c = s / (2 * m->R);
        p0[0] = rr * c, p0[1] = (2 * m->R - 1 - rr) * c, n[0] = n[1] = c;
        return 2;
    }
    p0[0] = rr * (s / m->R), n[0] = s / m->R;
    return 1;
}

/* This rank's positions: piece ur of U of its ring block, as runs of
 * consecutive global positions; and the row pieces of the T rows (k = 0)
 * and of the local residual rows (k = 1, from T row row0): the P row tiles,
 * cut where a run ends, each with what its position-dependent ops need. */
static void position_runs(sw_gpt *m)
{
    int64_t rp[2], rn[2], S = m->c.seq / (m->U * m->R), lo = m->ur * S, at = 0;
    int nr = ring_runs(m, m->rr, rp, rn);
    for (int k = 0; k < nr; at += rn[k++]) {
        int64_t a = at > lo ? at : lo, b = at + rn[k] < lo + S ? at + rn[k] : lo + S;
        if (a >= b) continue;
        m->lr_i0[m->nlr] = a - lo, m->lr_p0[m->nlr] = rp[k] + a - at, m->lr_n[m->nlr++] = b - a;
    }
    for (int k = 0; k < 2; k++) {
        int64_t n = k ? m->Tl : m->T, off = k ? m->row0 : 0;
        m->pc_size[k] = new_sizes(m->P + 1), m->pc_key[k] = new_sizes(m->P + 1);
        m->pc_off[k] = new_sizes(m->P + 1), m->pc_pos[k] = new_sizes(m->P + 1);
        for (int i = 0; i < m->P; i++) {
            int64_t first, count;
            sw_tile_range(n, m->P, i, &first, &count);
            for (int64_t r = off + first, end = r + count; r < end;) {
                int j = 0;
                while (j + 1 < m->nlr && r >= m->lr_i0[j + 1] * m->B) j++;
                int64_t run0 = m->lr_i0[j] * m->B, run_end = run0 + m->lr_n[j] * m->B;
                int64_t len = (end < run_end ? end : run_end) - r, pi = m->npc[k]++;
                m->pc_size[k][pi] = len;
                m->pc_off[k][pi] = r - run0;
                m->pc_pos[k][pi] = m->lr_p0[j];
                m->pc_key[k][pi] = m->lr_p0[j] * m->B + r - run0; /* row in the [s, b] rows of the whole sequence */
                r += len;
            }
        }
    }
}

int64_t sw_gpt_position(const sw_gpt *m, int64_t i)
{
    int j = 0;
    while (j + 1 < m->nlr && i >= m->lr_i0[j + 1]) j++;
    return m->lr_p0[j] + i - m->lr_i0[j];
}

/* ZeRO-1 shards the rows of parameters that have at least dp of them */
static int sharded(const sw_gpt *m, int64_t rows) { return m->c.zero && m->gn > 1 && rows >= m->gn; }

/* Gradient buckets, in reverse parameter order (backward produces the last
 * parameters' gradients first): at most bucket_mb MiB each, the first at
 * most 1 MiB so that the first reduction starts early (as PyTorch DDP does,
 * whose bucket_cap_mb is in MiB too). */
static void create_buckets(sw_gpt *m)
{
    const sw_gpt_config *c = &m->c;
    if (m->gn * c->grad_accum > 1) m->loss_sum = sw_tensor_new2d("loss_sum", SW_F32, 1, 1);
    /* buckets sum micro-batches, and carry the dp all-reduce (not with ZeRO-1) */
    if (c->grad_accum == 1 && (m->gn == 1 || c->zero)) return;
    int n = m->nparams;
    m->bucket = calloc((size_t)n, sizeof *m->bucket);
    m->bucket_first = calloc((size_t)n, sizeof(int));
    m->bucket_count = calloc((size_t)n, sizeof(int));
    m->bucket_sizes = calloc((size_t)n, sizeof *m->bucket_sizes);
    if (!m->bucket || !m->bucket_first || !m->bucket_count || !m->bucket_sizes) {
        perror("starweave: calloc");
        abort();
    }
    double limit = c->bucket_mb * SW_MIB;
    for (int p = n - 1; p >= 0;) {
        int b = m->nbuckets++, first = p;
        double cap = b == 0 && limit > SW_MIB ? SW_MIB : limit, bytes = 0;
        while (p >= 0 && (p == first || bytes + (double)sw_tensor_bytes(m->grad[p]) <= cap))
            bytes += (double)sw_tensor_bytes(m->grad[p--]);
        int count = first - p;
        m->bucket_first[b] = first;
        m->bucket_count[b] = count;
        m->bucket_sizes[b] = malloc(sizeof(int64_t) * (size_t)count);
        if (!m->bucket_sizes[b]) { perror("starweave: malloc"); abort(); }
        int64_t total = 0;
        for (int i = 0; i < count; i++) total += m->bucket_sizes[b][i] = sw_tensor_numel(m->grad[first - i]);
        char name[32];
        snprintf(name, sizeof name, "grad_bucket%d", b);
        m->bucket[b] = sw_tensor_new2d(name, SW_F32, 1, total);
    }
}

/* a tensor of block a alone, named prefix<b>.what */
static sw_tensor *own(block_acts *a, const char *prefix, int b, const char *what, int64_t rows, int64_t cols)
{
    char name[64];
    snprintf(name, sizeof name, "%s%d.%s", prefix, b, what);
    if (a->nown == (int)(sizeof a->own / sizeof a->own[0])) sw_fail(__FILE__, __LINE__, "block_acts: own", -12);
    return a->own[a->nown++] = sw_tensor_new2d(name, SW_F32, rows, cols);
}

/* What block b keeps from forward to backward ("l" rows: T/tp with sp, else T) */
static void block_create(sw_gpt *m, block_acts *a, const char *prefix, int b)
{
    const sw_gpt_config *c = &m->c;
    int64_t T = m->T, Tl = m->Tl, h = c->hidden, hf = 4 * h / c->tp, qkv_cols = (int64_t)(m->aq + 2 * m->ak) * m->d;
    int gathered = c->tp > 1 && c->sp;
    a->ln1 = own(a, prefix, b, "ln1", Tl, h);
    a->ln1_mean = own(a, prefix, b, "ln1_mean", Tl, 1);
    a->ln1_rstd = own(a, prefix, b, "ln1_rstd", Tl, 1);
    a->ln1g = !gathered ? a->ln1 : m->gath ? m->gath : own(a, prefix, b, "ln1_gathered", T, h);
    /* with Ulysses the QKV GEMM writes the shared qkv_t, sent to the head split qkv_u */
    a->qkv = m->U > 1 ? m->qkv_t : own(a, prefix, b, "qkv", T, qkv_cols);
    a->qkv_u = m->U > 1 ? own(a, prefix, b, "qkv_u", m->Tr, (int64_t)(m->hq + 2 * m->hk) * m->d) : a->qkv;
    a->att = own(a, prefix, b, "att", T, (int64_t)m->aq * m->d);
    a->att_u = m->U > 1 ? own(a, prefix, b, "att_u", m->Tr, (int64_t)m->hq * m->d) : a->att;
    a->lse = own(a, prefix, b, "lse", m->Tr, m->hq);
    if (c->recompute == SW_RECOMPUTE_NONE) /* ring = 1: the attention space holds the whole sequence */
        a->probs = own(a, prefix, b, "probs", (int64_t)m->Tr * m->hq, c->seq);
    a->x_mid = own(a, prefix, b, "x_mid", Tl, h);
    a->ln2 = own(a, prefix, b, "ln2", Tl, h);
    a->ln2_mean = own(a, prefix, b, "ln2_mean", Tl, 1);
    a->ln2_rstd = own(a, prefix, b, "ln2_rstd", Tl, 1);
    a->ln2g = !gathered ? a->ln2 : m->gath ? m->gath : own(a, prefix, b, "ln2_gathered", T, h);
    a->fc = own(a, prefix, b, "fc", T, hf);
    a->fc_gelu = own(a, prefix, b, "fc_gelu", T, hf);
}

sw_gpt *sw_gpt_create(const sw_gpt_config *cfg, sw_comm *comm)
{
    sw_gpt *m = calloc(1, sizeof *m);
    if (!m) { perror("starweave: calloc"); abort(); }
    m->c = *cfg;
    char msg[256];
    if (sw_gpt_config_check(&m->c, msg, sizeof msg) != 0) sw_usage_error("%s", msg);
    const sw_gpt_config *c = &m->c;
    const sw_mesh *mesh = comm ? sw_comm_mesh(comm) : NULL;
    static const struct { sw_group g; const char *name; } degrees[] = {
        {SW_GROUP_TP, "tp"}, {SW_GROUP_ULYSSES, "ulysses"}, {SW_GROUP_RING, "ring"}, {SW_GROUP_DP, "dp"}};
    const int want[] = {c->tp, c->ulysses, c->ring, c->dp};
    for (int i = 0; i < 4; i++) {
        int have = mesh ? sw_mesh_size(mesh, degrees[i].g) : 1;
        if (have != want[i])
            sw_usage_error("%s (%d) must equal the %s degree of the mesh (%d)", degrees[i].name, want[i],
                           degrees[i].name, have);
    }
    if (c->offload && sw_offload_node() < 0)
        sw_usage_error("offload needs an offload memory node (sw_init with sw_options.offload = 1; gpt_train --offload)");
    /* the budget must hold the saved activations of the block in backward
     * and of the one prefetched (measured: with tp 2 and 1.5 blocks, StarPU
     * found no room for the collectives' buffers and waited forever) */
    double block_mib = saved_model_bytes(c, 0) / SW_MIB;
    if (c->offload && sw_offload_budget_mb() > 0 && sw_offload_budget_mb() < 2 * block_mib)
        sw_usage_error("offload-budget-mb (%d) must hold two blocks' saved activations (2 x %.2f MiB)",
                       sw_offload_budget_mb(), block_mib);
    m->tp = (sw_tp){c->tp > 1 ? comm : NULL, c->tp, comm ? sw_mesh_rank(sw_comm_mesh(comm), SW_GROUP_TP) : 0, c->sp};
    m->comm = comm;
    m->dp_rank = mesh ? sw_mesh_rank(mesh, SW_GROUP_DP) : 0;
    m->U = c->ulysses, m->R = c->ring, m->zig = c->ring > 1 && c->zigzag;
    m->ur = mesh ? sw_mesh_rank(mesh, SW_GROUP_ULYSSES) : 0;
    m->rr = mesh ? sw_mesh_rank(mesh, SW_GROUP_RING) : 0;
    m->gg = m->U * m->R > 1 ? SW_GROUP_SP_DP : SW_GROUP_DP;
    m->gn = c->dp * m->U * m->R;
    m->gr = mesh ? sw_mesh_rank(mesh, m->gg) : 0;
    m->B = c->batch / (c->dp * c->grad_accum);
    int64_t T = (int64_t)c->seq / (m->U * m->R) * m->B, h = c->hidden;
    m->T = (int)T;
    m->Tl = c->sp ? (int)(T / c->tp) : (int)T;
    m->row0 = c->sp ? m->tp.rank * m->Tl : 0;
    m->P = c->tiles;
    m->d = c->hidden / c->heads;
    m->aq = c->heads / c->tp;
    kv_range(c, m->tp.rank, &m->kv0, &m->ak);
    m->kv_replicated = kv_heads_of(c) < c->tp;
    m->hq = m->aq / m->U, m->hk = m->ak / m->U, m->Tr = m->U * m->T;
    attention_groups(m);
    position_runs(m);
    m->Vl = c->vocab_padded / c->tp;
    int64_t Tl = m->Tl, hf = 4 * h / c->tp, qkv_cols = (int64_t)(m->aq + 2 * m->ak) * m->d;
    m->nparams = sw_gpt_num_params(c);
    m->param = calloc((size_t)m->nparams, sizeof(sw_tensor *));
    m->grad = calloc((size_t)m->nparams, sizeof(sw_tensor *));
    m->adam_m = calloc((size_t)m->nparams, sizeof(sw_tensor *));
    m->adam_v = calloc((size_t)m->nparams, sizeof(sw_tensor *));
    m->x = calloc((size_t)c->layers + 1, sizeof(sw_tensor *));
    m->gshard = calloc((size_t)m->nparams, sizeof(sw_tensor *));
    if (c->dtype == SW_BF16) m->w16 = calloc((size_t)m->nparams, sizeof(sw_tensor *));
    if (!m->param || !m->grad || !m->adam_m || !m->adam_v || !m->x || !m->gshard || (c->dtype == SW_BF16 && !m->w16)) {
        perror("starweave: calloc");
        abort();
    }
    for (int i = 0; i < m->nparams; i++) {
        int64_t rows, cols, lrows, lcols;
        char name[64], gname[72];
        sw_gpt_param_shape(c, i, &rows, &cols, name, sizeof name);
        sw_gpt_local_shape(c, m->tp.rank, i, &lrows, &lcols);
        m->param[i] = sw_tensor_new2d(name, SW_F32, lrows, lcols);
        snprintf(gname, sizeof gname, "d.%s", name);
        m->grad[i] = sw_tensor_new2d(gname, SW_F32, lrows, lcols);
        if (m->w16 && gemm_weight(c, i)) {
            snprintf(gname, sizeof gname, "bf16.%s", name);
            m->w16[i] = sw_tensor_new2d(gname, SW_BF16, lrows, lcols);
        }
        /* ZeRO-1: the moments of this dp rank's rows only */
        int64_t mrows = lrows;
        if (sharded(m, lrows)) {
            int64_t first;
            sw_tile_range(lrows, m->gn, m->gr, &first, &mrows);
            snprintf(gname, sizeof gname, "dshard.%s", name);
            m->gshard[i] = sw_tensor_new2d(gname, SW_F32, mrows, lcols);
        }
        snprintf(gname, sizeof gname, "m.%s", name);
        m->adam_m[i] = sw_tensor_new2d(gname, SW_F32, mrows, lcols);
        snprintf(gname, sizeof gname, "v.%s", name);
        m->adam_v[i] = sw_tensor_new2d(gname, SW_F32, mrows, lcols);
        /* the global values, whatever the sharding */
        float *host = malloc(sizeof(float) * (size_t)(rows * cols));
        float *local = malloc(sizeof(float) * (size_t)(lrows * lcols));
        if (!host || !local) { perror("starweave: malloc"); abort(); }
        init_param(c, i, host, rows, cols);
        sw_gpt_shard(c, m->tp.rank, i, host, local);
        sw_tensor_write_host(m->param[i], local);
        free(host);
        free(local);
        sw_tensor_fill(m->adam_m[i], 0.0f);
        sw_tensor_fill(m->adam_v[i], 0.0f);
    }
    m->tokens = sw_tensor_new2d("tokens", SW_I32, T, 1);
    m->targets = sw_tensor_new2d("targets", SW_I32, T, 1);
    /* block inputs: every one, or with full recomputation those of the
     * checkpointed blocks (l % K == 0; the others are the working set's) */
    int full = c->recompute == SW_RECOMPUTE_FULL;
    m->K = full ? c->recompute_every : 0;
    for (int l = 0; l <= c->layers; l++)
        m->x[l] = !full || l % m->K == 0 || l == c->layers ? act("x", l, Tl, h)
                  : l < m->K                               ? act("x_work", l, Tl, h)
                                                           : m->x[l % m->K];
    if (c->tp > 1 && c->sp && c->tp_recompute_allgather) m->gath = act("gathered", -1, T, h);
    if (m->U > 1) m->qkv_t = act("qkv", -1, T, qkv_cols);
    int nb = full ? m->K : c->offload ? 2 : c->layers;
    m->nblocks = nb < c->layers ? nb : c->layers;
    m->blocks = calloc((size_t)m->nblocks, sizeof(block_acts));
    m->acts = calloc((size_t)c->layers, sizeof(block_acts *));
    if (!m->blocks || !m->acts) { perror("starweave: calloc"); abort(); }
    for (int b = 0; b < m->nblocks; b++) block_create(m, &m->blocks[b], m->nblocks < c->layers ? "work" : "h", b);
    for (int l = 0; l < c->layers; l++) m->acts[l] = &m->blocks[l % m->nblocks];
    if (c->offload) {
        m->stash = calloc((size_t)c->layers, sizeof *m->stash);
        m->sref = calloc((size_t)c->layers, sizeof *m->sref);
        if (!m->stash || !m->sref) { perror("starweave: calloc"); abort(); }
        for (int l = 0; l < c->layers; l++) {
            m->sref[l] = (struct stash_ref){m, l};
            block_acts *a = m->acts[l];
            m->stash[l] = calloc((size_t)a->nown, sizeof(sw_tensor *));
            if (!m->stash[l]) { perror("starweave: calloc"); abort(); }
            for (int i = 0; i < a->nown; i++) {
                char name[80];
                snprintf(name, sizeof name, "h%d.%s", l, strchr(a->own[i]->name, '.') + 1);
                m->stash[l][i] = sw_tensor_new_offload(name, a->own[i]->rows, a->own[i]->cols);
            }
        }
    }
    m->lnf = act("lnf", -1, Tl, h);
    m->lnf_mean = act("lnf_mean", -1, Tl, 1);
    m->lnf_rstd = act("lnf_rstd", -1, Tl, 1);
    m->lnfg = c->tp > 1 && c->sp ? act("lnf_gathered", -1, T, h) : m->lnf;
    m->logits = act("logits", -1, T, m->Vl);
    m->ce_max = act("ce_max", -1, T, 1);
    m->ce_tgt = act("ce_target", -1, T, 1);
    m->ce_sumexp = act("ce_sumexp", -1, T, 1);
    m->ce_rows = act("ce_rows", -1, T, 1);
    m->loss = act("loss", -1, 1, 1);
    m->emb = act("emb", -1, T, h);
    m->part = act("part", -1, T, h);
    m->red = act("red", -1, Tl, h);
    m->tmp = act("tmp", -1, Tl, h);
    m->dy = act("dy", -1, Tl, h);
    m->dres = act("dres", -1, Tl, h);
    m->dln = act("dln", -1, Tl, h);
    m->dfull = act("dfull", -1, T, h);
    m->datt = act("datt", -1, T, (int64_t)m->aq * m->d);
    m->dqkv = act("dqkv", -1, T, qkv_cols);
    m->dfc = act("dfc", -1, T, hf);
    m->part_w = act("ln_part_w", -1, m->P, h);
    m->part_b = act("ln_part_b", -1, m->P, h);
    m->lm_part = act("lm_part", -1, (int64_t)m->P * T, h);
    m->datt_u = m->U > 1 ? act("datt_u", -1, m->Tr, (int64_t)m->hq * m->d) : m->datt;
    m->dqkv_u = m->U > 1 ? act("dqkv_u", -1, m->Tr, (int64_t)(m->hq + 2 * m->hk) * m->d) : m->dqkv;
    for (int i = 0; i < 2 && m->R > 1; i++) {
        m->kvbuf[i] = act(i ? "kv_block1" : "kv_block0", -1, m->Tr, 2 * (int64_t)m->hk * m->d);
        m->dkvbuf[i] = act(i ? "dkv_block1" : "dkv_block0", -1, m->Tr, 2 * (int64_t)m->hk * m->d);
    }
    create_buckets(m);
    if (m->kv_replicated) {
        m->kvw_mine = act("kv_grad_w", -1, 2 * m->d, h);
        m->kvw_all = act("kv_grad_w_all", -1, (int64_t)c->tp * 2 * m->d, h);
        m->kvb_mine = act("kv_grad_b", -1, 1, 2 * m->d);
        m->kvb_all = act("kv_grad_b_all", -1, c->tp, 2 * m->d);
    }
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
        sw_tensor_free(m->gshard[i]);
        if (m->w16) sw_tensor_free(m->w16[i]);
    }
    for (int l = 0; l <= m->c.layers; l++)
        if (!m->K || l < m->K || m->x[l] != m->x[l % m->K]) sw_tensor_free(m->x[l]); /* not a working-set alias */
    for (int l = 0; m->stash && l < m->c.layers; l++) {
        for (int i = 0; i < m->acts[l]->nown; i++) sw_tensor_free(m->stash[l][i]);
        free(m->stash[l]);
    }
    free(m->stash);
    free(m->sref);
    for (int b = 0; b < m->nblocks; b++)
        for (int i = 0; i < m->blocks[b].nown; i++) sw_tensor_free(m->blocks[b].own[i]);
    free(m->blocks);
    if (m->lnfg != m->lnf) sw_tensor_free(m->lnfg);
    sw_tensor *rest[] = {m->tokens, m->targets, m->lnf, m->lnf_mean, m->lnf_rstd, m->logits,
                         m->ce_max, m->ce_tgt, m->ce_sumexp, m->ce_rows, m->loss, m->emb, m->part, m->gath,
                         m->red, m->tmp, m->dy, m->dres, m->dln, m->dfull, m->datt, m->dqkv, m->dfc,
                         m->part_w, m->part_b, m->lm_part, m->kvw_mine, m->kvw_all, m->kvb_mine, m->kvb_all,
                         m->qkv_t, m->kvbuf[0], m->kvbuf[1], m->dkvbuf[0], m->dkvbuf[1]};
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) sw_tensor_free(rest[i]);
    if (m->datt_u != m->datt) sw_tensor_free(m->datt_u);
    if (m->dqkv_u != m->dqkv) sw_tensor_free(m->dqkv_u);
    for (int k = 0; k < 2; k++) {
        free(m->pc_size[k]);
        free(m->pc_key[k]);
        free(m->pc_off[k]);
        free(m->pc_pos[k]);
    }
    free(m->gemm_sizes);
    for (int b = 0; b < m->nbuckets; b++) {
        sw_tensor_free(m->bucket[b]);
        free(m->bucket_sizes[b]);
    }
    free(m->bucket);
    free(m->bucket_first);
    free(m->bucket_count);
    free(m->bucket_sizes);
    sw_tensor_free(m->loss_sum);
    free(m->qkv_sizes);
    free(m->param);
    free(m->grad);
    free(m->adam_m);
    free(m->adam_v);
    free(m->gshard);
    free(m->w16);
    free(m->x);
    free(m->acts);
    free(m);
}

const sw_gpt_config *sw_gpt_get_config(const sw_gpt *m) { return &m->c; }
sw_tensor *sw_gpt_param(sw_gpt *m, int i) { return m->param[i]; }
sw_tensor *sw_gpt_grad(sw_gpt *m, int i) { return m->grad[i]; }
sw_tensor *sw_gpt_reduced_grad(sw_gpt *m, int i, int64_t *first_row)
{
    int64_t count;
    *first_row = 0;
    if (!m->gshard[i]) return m->grad[i];
    sw_tile_range(m->param[i]->rows, m->gn, m->gr, first_row, &count);
    return m->gshard[i];
}
sw_tensor *sw_gpt_adam_m(sw_gpt *m, int i) { return m->adam_m[i]; }
sw_tensor *sw_gpt_adam_v(sw_gpt *m, int i) { return m->adam_v[i]; }
sw_tensor *sw_gpt_tokens(sw_gpt *m) { return m->tokens; }
sw_tensor *sw_gpt_targets(sw_gpt *m) { return m->targets; }
sw_tensor *sw_gpt_loss(sw_gpt *m) { return m->loss_sum ? m->loss_sum : m->loss; }

/* --------------------------------------------------------- tile helpers */

static starpu_data_handle_t rows_r(sw_gpt *m, sw_tensor *t, int i) { return sw_tensor_tiles(t, SW_ROWS, m->P, STARPU_R)[i]; }
static starpu_data_handle_t rows_w(sw_gpt *m, sw_tensor *t, int i) { return sw_tensor_tiles(t, SW_ROWS, m->P, STARPU_W)[i]; }
static starpu_data_handle_t rows_rw(sw_gpt *m, sw_tensor *t, int i) { return sw_tensor_tiles(t, SW_ROWS, m->P, STARPU_RW)[i]; }
static starpu_data_handle_t cols_r(sw_gpt *m, sw_tensor *t, int i) { return sw_tensor_tiles(t, SW_COLS, m->P, STARPU_R)[i]; }
static starpu_data_handle_t cols_w(sw_gpt *m, sw_tensor *t, int i) { return sw_tensor_tiles(t, SW_COLS, m->P, STARPU_W)[i]; }
static starpu_data_handle_t whole_r(sw_tensor *t) { return sw_tensor_whole(t, STARPU_R); }
static starpu_data_handle_t whole_w(sw_tensor *t) { return sw_tensor_whole(t, STARPU_W); }

/* the micro-batch's place in the global batch, for the dropout masks */
static void batch_of_key(const sw_gpt *m, sw_rng_key *k)
{
    if (m->B == m->c.batch) return;
    k->batch0 = sw_gpt_micro_batch_first(m, m->micro);
    k->batch_local = m->B;
    k->batch_global = m->c.batch;
}

/* Row piece i of the T rows (k = 0) or of the local residual rows (k = 1)
 * of t: for the ops that depend on positions (embedding, dropout). They are
 * the row tiles unless a tile holds two runs of positions (zigzag). */
static starpu_data_handle_t piece(sw_gpt *m, int k, sw_tensor *t, int i, enum starpu_data_access_mode mode)
{
    if (m->npc[k] == m->P) return sw_tensor_tiles(t, SW_ROWS, m->P, mode)[i];
    return sw_tensor_split(t, SW_ROWS, m->npc[k], m->pc_size[k], mode)[i];
}

/* rows of the T rows' run of positions k */
static starpu_data_handle_t run_rows(sw_gpt *m, sw_tensor *t, int k)
{
    int64_t sizes[2] = {m->lr_n[0] * m->B, m->lr_n[1] * m->B};
    return m->nlr == 1 ? whole_r(t) : sw_tensor_split(t, SW_ROWS, m->nlr, sizes, STARPU_R)[k];
}

/* dropout key of row piece i of the local residual rows: global row index */
static sw_rng_key drop_key(sw_gpt *m, int step, unsigned layer, unsigned op, int i)
{
    sw_rng_key k = {m->c.seed, (uint32_t)step, (uint16_t)layer, (uint16_t)op, m->pc_key[1][i], 0, m->c.hidden, 0, 0, 0};
    batch_of_key(m, &k);
    return k;
}

static int tp_on(const sw_gpt *m) { return m->tp.t > 1; }

/* --dtype bf16: the weight a GEMM reads (the bf16 copy of a GEMM weight),
 * and a GEMM operand from an fp32 handle: a bf16 temporary cast from it,
 * released by op_done once its GEMMs are submitted. fp32: the same. */
static sw_tensor *gemm_w(const sw_gpt *m, int w) { return m->w16 && m->w16[w] ? m->w16[w] : m->param[w]; }
static starpu_data_handle_t op16(const sw_gpt *m, starpu_data_handle_t h) { return m->w16 ? sw_cast_bf16_temp(h) : h; }
static void op_done(const sw_gpt *m, starpu_data_handle_t h)
{
    if (m->w16) starpu_data_unregister_submit(h);
}

/* ------------------------------------------------------- layer builders */

/* y[l,h] = LayerNorm(x) with saved mean/rstd [l,1] */
static void layernorm_forward(sw_gpt *m, sw_tensor *x, int w, sw_tensor *y, sw_tensor *mean, sw_tensor *rstd)
{
    for (int i = 0; i < m->P; i++)
        sw_layernorm_fwd(rows_r(m, x, i), whole_r(m->param[w]), whole_r(m->param[w + 1]), rows_w(m, y, i),
                         rows_w(m, mean, i), rows_w(m, rstd, i), m->c.ln_eps);
}

/* dres[l,h] (+)= LayerNorm'(dy); d(w), d(b) = sums of per-tile partials
 * (over the local rows: summed over TP with sp) */
static void layernorm_backward(sw_gpt *m, sw_tensor *dy, sw_tensor *x, int w, sw_tensor *mean, sw_tensor *rstd,
                               int accumulate)
{
    for (int i = 0; i < m->P; i++)
        sw_layernorm_bwd(rows_r(m, dy, i), rows_r(m, x, i), whole_r(m->param[w]), rows_r(m, mean, i),
                         rows_r(m, rstd, i), accumulate ? rows_rw(m, m->dres, i) : rows_w(m, m->dres, i),
                         rows_w(m, m->part_w, i), rows_w(m, m->part_b, i), accumulate);
    sw_colsum(whole_r(m->part_w), whole_w(m->grad[w]), 1.0f, 0.0f);
    sw_colsum(whole_r(m->part_b), whole_w(m->grad[w + 1]), 1.0f, 0.0f);
    sw_tp_sum_replicated_grad(&m->tp, m->grad[w]);
    sw_tp_sum_replicated_grad(&m->tp, m->grad[w + 1]);
}

/* GEMM tiling: OpenBLAS packs both operands of every call, so a task split
 * along one output dimension re-packs the whole other operand. Activations
 * ([T, *], T = seq*batch, small) are re-packed; weights never are: every
 * task gets its own slice of the weight. Output features are split into n
 * tiles (sizes: NULL for equal tiles). */

/* column-parallel y[T,out] = x[T,in] W^T + b, W [out,in]. With sp, x_full
 * is being all-gathered: row block i of y is computed from rank i's chunk
 * as soon as that chunk is there, this rank's own chunk first, straight
 * from x_local (no wait on the gather). */
static void column_forward(sw_gpt *m, sw_tensor *x_local, sw_tensor *x_full, int w, sw_tensor *y, int n,
                           const int64_t *sizes)
{
    starpu_data_handle_t *W = sw_tensor_split(gemm_w(m, w), SW_ROWS, n, sizes, STARPU_R);
    starpu_data_handle_t *B = sw_tensor_split(m->param[w + 1], SW_COLS, n, sizes, STARPU_R);
    if (x_full == x_local) {
        starpu_data_handle_t x = op16(m, whole_r(x_full));
        for (int j = 0; j < n; j++)
            sw_gemm_bias(x, 0, W[j], 1, B[j], sw_tensor_split(y, SW_COLS, n, sizes, STARPU_W)[j]);
        op_done(m, x);
        return;
    }
    int t = m->tp.t;
    for (int k = 0; k < t; k++) {
        int i = (m->tp.rank - k + t) % t; /* the ring all-gather's arrival order */
        starpu_data_handle_t src =
            op16(m, i == m->tp.rank ? whole_r(x_local) : sw_tensor_tiles(x_full, SW_ROWS, t, STARPU_R)[i]);
        for (int j = 0; j < n; j++)
            sw_gemm_bias(src, 0, W[j], 1, B[j], sw_tensor_grid(y, t, NULL, n, sizes, STARPU_W)[i * n + j]);
        op_done(m, src);
    }
}

/* dW[out,in] = dy^T x (split over out), db = colsum(dy) (bias != 0),
 * dx[T,in] = dy W (split over in, P tiles) */
static void linear_backward(sw_gpt *m, sw_tensor *dy, sw_tensor *x, int w, int bias, sw_tensor *dx, int n,
                            const int64_t *sizes)
{
    starpu_data_handle_t x16 = op16(m, whole_r(x));
    for (int j = 0; j < n; j++) {
        starpu_data_handle_t dyj = sw_tensor_split(dy, SW_COLS, n, sizes, STARPU_R)[j], dy16 = op16(m, dyj);
        sw_gemm(dy16, 1, x16, 0, sw_tensor_split(m->grad[w], SW_ROWS, n, sizes, STARPU_W)[j], 1.0f, 0.0f);
        op_done(m, dy16);
        if (bias) sw_colsum(dyj, sw_tensor_split(m->grad[w + 1], SW_COLS, n, sizes, STARPU_W)[j], 1.0f, 0.0f);
    }
    op_done(m, x16);
    starpu_data_handle_t dy16 = op16(m, whole_r(dy));
    for (int j = 0; j < m->P; j++)
        sw_gemm(dy16, 0, sw_tensor_tiles(gemm_w(m, w), SW_COLS, m->P, STARPU_R)[j], 0, cols_w(m, dx, j), 1.0f, 0.0f);
    op_done(m, dy16);
}

/* backward of a column-parallel linear whose input was x_local (gathered
 * into x_full with sp): weight gradients, then the input gradient through
 * f's backward; returns the tensor holding it ([l,h]) */
static sw_tensor *column_backward(sw_gpt *m, sw_tensor *dy, sw_tensor *x_local, sw_tensor *x_full, int w, int n,
                                  const int64_t *sizes)
{
    if (m->c.tp_recompute_allgather) x_full = sw_tp_f_forward(&m->tp, x_local, m->gath); /* gather again */
    linear_backward(m, dy, x_full, w, 1, m->part, n, sizes);
    return sw_tp_f_backward(&m->tp, m->part, m->dln);
}

/* row-parallel y[l,h] = g(x[T,in] W^T) + b: the bias is added once, after
 * the reduction; returns the tensor holding y */
static sw_tensor *row_forward(sw_gpt *m, sw_tensor *x, int w)
{
    starpu_data_handle_t x16 = op16(m, whole_r(x));
    if (!tp_on(m)) {
        for (int j = 0; j < m->P; j++)
            sw_gemm_bias(x16, 0, sw_tensor_tiles(gemm_w(m, w), SW_ROWS, m->P, STARPU_R)[j], 1,
                         cols_r(m, m->param[w + 1], j), cols_w(m, m->part, j));
        op_done(m, x16);
        return m->part;
    }
    for (int j = 0; j < m->P; j++)
        sw_gemm(x16, 0, sw_tensor_tiles(gemm_w(m, w), SW_ROWS, m->P, STARPU_R)[j], 1, cols_w(m, m->part, j), 1.0f,
                0.0f);
    op_done(m, x16);
    sw_tensor *y = sw_tp_g_forward(&m->tp, m->part, m->red);
    for (int i = 0; i < m->P; i++) sw_bias_add(rows_rw(m, y, i), whole_r(m->param[w + 1]));
    return y;
}

/* backward of a row-parallel linear: dy [l,h] local; the bias gradient
 * from the local rows, the rest from dy gathered by g's backward */
static void row_backward(sw_gpt *m, sw_tensor *dy, sw_tensor *x, int w, sw_tensor *dx)
{
    if (!tp_on(m)) {
        linear_backward(m, dy, x, w, 1, dx, m->P, NULL);
        return;
    }
    sw_colsum(whole_r(dy), whole_w(m->grad[w + 1]), 1.0f, 0.0f);
    sw_tp_sum_replicated_grad(&m->tp, m->grad[w + 1]);
    linear_backward(m, sw_tp_g_backward(&m->tp, dy, m->dfull), x, w, 0, dx, m->P, NULL);
}

/* Attention task arguments for query-head group `group` of the attention
 * space: sq query rows from position q_pos0 against sk key rows from k_pos0
 * (per batch element). */
static sw_attn_args attn_args(sw_gpt *m, int step, int layer, int group, int64_t q_pos0, int64_t sq, int64_t k_pos0,
                              int64_t sk)
{
    const sw_gpt_config *c = &m->c;
    sw_attn_args a;
    memset(&a, 0, sizeof a);
    a.batch = m->B;
    a.nh = m->hq / m->G;
    a.nkv = m->hk / m->Gk;
    a.d = m->d;
    a.sq = (int)sq, a.sk = (int)sk;
    a.q_pos0 = q_pos0, a.k_pos0 = k_pos0;
    a.causal = 1;
    a.scale = 1.0f / sqrtf((float)a.d);
    a.dropout = c->dropout;
    a.key = (sw_rng_key){c->seed, (uint32_t)step, (uint16_t)layer, SW_DROP_ATTN_PROBS, 0, 0, c->hidden, 0, 0, 0};
    batch_of_key(m, &a.key);
    a.head0 = m->tp.rank * m->aq + m->ur * m->hq + group * a.nh;
    a.heads_total = c->heads;
    a.seq_total = c->seq;
    return a;
}

/* Ulysses all-to-all between the sequence-split qkv [T,(aq+2ak)d] (column
 * blocks: the q heads of each member, then their k, then their v heads)
 * and the head-split qkv_u [U T,(hq+2hk)d] (row block j from member j,
 * columns q | k | v): to_heads 1 forward, 0 for the gradients. */
static void ulysses_qkv(sw_gpt *m, sw_tensor *seq_split, sw_tensor *head_split, int to_heads)
{
    int U = m->U;
    int64_t hs[3] = {(int64_t)m->hq * m->d, (int64_t)m->hk * m->d, (int64_t)m->hk * m->d};
    starpu_data_handle_t *cols = sw_tensor_split(seq_split, SW_COLS, 3 * U, m->gemm_sizes, to_heads ? STARPU_R : STARPU_W);
    starpu_data_handle_t *rows = sw_tensor_grid(head_split, U, NULL, 3, hs, to_heads ? STARPU_W : STARPU_R);
    starpu_data_handle_t *s = calloc(3 * (size_t)U, sizeof *s);
    if (!s) { perror("starweave: calloc"); abort(); }
    for (int j = 0; j < U; j++)
        for (int k = 0; k < 3; k++) s[j * 3 + k] = cols[k * U + j]; /* member j's q, k, v heads */
    if (to_heads) sw_alltoall_parts(m->comm, SW_GROUP_ULYSSES, 3, s, rows);
    else sw_alltoall_parts(m->comm, SW_GROUP_ULYSSES, 3, rows, s);
    free(s);
}

/* Ulysses all-to-all of the attention output [U T, hq d] <-> [T, aq d]
 * (row block j <-> column block j of member j) */
static void ulysses_out(sw_gpt *m, sw_tensor *head_split, sw_tensor *seq_split, int to_seq)
{
    int U = m->U;
    starpu_data_handle_t *rows = sw_tensor_tiles(head_split, SW_ROWS, U, to_seq ? STARPU_R : STARPU_W);
    starpu_data_handle_t *cols = sw_tensor_tiles(seq_split, SW_COLS, U, to_seq ? STARPU_W : STARPU_R);
    if (to_seq) sw_alltoall_parts(m->comm, SW_GROUP_ULYSSES, 1, rows, cols);
    else sw_alltoall_parts(m->comm, SW_GROUP_ULYSSES, 1, cols, rows);
}

/* visible (query, key) pairs of a causal tile: queries q0 .. q0+nq-1, keys k0 .. k0+nk-1 */
static double visible_pairs(int64_t q0, int64_t nq, int64_t k0, int64_t nk)
{
    double n = 0;
    for (int64_t q = q0; q < q0 + nq; q++) {
        int64_t v = q - k0 + 1;
        n += (double)(v < 0 ? 0 : v > nk ? nk : v);
    }
    return n;
}

/* The K/V blocks of ring step s (the block of ring rank rr - s): 0 the
 * rank's own (columns of qkv_u), else the ring buffer s % 2. */
static starpu_data_handle_t kv_block(sw_gpt *m, sw_tensor *qkv_u, int s)
{
    int64_t split[2] = {(int64_t)m->hq * m->d, 2 * (int64_t)m->hk * m->d};
    if (s == 0) return sw_tensor_split(qkv_u, SW_COLS, 2, split, STARPU_R)[1];
    return whole_r(m->kvbuf[s % 2]);
}

/* Tile pairs (query run a, key run b) of a ring step, in submission order:
 * the diagonal ones first (at step 0 those of the rank's own positions), so that the first tile touching a
 * query run's output (or a key run's gradient) is the one that writes it. */
static int ring_pairs(int nq, int pa[4], int pb[4])
{
    int n = 0;
    for (int a = 0; a < nq; a++) pa[n] = a, pb[n++] = a;
    for (int a = 0; a < nq; a++)
        for (int b = 0; b < nq; b++)
            if (a != b) pa[n] = a, pb[n++] = b;
    return n;
}

/* Attention in the attention space, qkv_u -> o [Tr, hq d], lse [Tr, hq]:
 * Ring attention over the ring group (R steps; the K/V block of step s + 1
 * travels while step s computes, double-buffered; partial outputs merged by
 * log-sum-exp), one task per (query run, key run, head group), fully
 * masked tiles skipped. R = 1: one step on the rank's own K/V. */
static void ring_forward(sw_gpt *m, int step, int layer, sw_tensor *qkv_u, sw_tensor *o, sw_tensor *lse,
                         sw_tensor *probs)
{
    int G = m->G, Gk = m->Gk, ncol = G + 2 * Gk, R = m->R;
    int64_t qp[2] = {0, 0}, qn[2] = {0, 0}, kp[2] = {0, 0}, kn[2] = {0, 0};
    int nq = ring_runs(m, m->rr, qp, qn);
    int64_t rs[2] = {qn[0] * m->B, qn[1] * m->B};
    int written[2] = {0, 0}, pa[4], pb[4];
    m->attn_flops = 0;
    for (int s = 0; s < R; s++) {
        if (s + 1 < R) /* the next block travels while this one is used */
            sw_ring_shift_handles(m->comm, SW_GROUP_RING, kv_block(m, qkv_u, s), sw_tensor_whole(m->kvbuf[(s + 1) % 2], STARPU_W), 1);
        ring_runs(m, (m->rr - s + R) % R, kp, kn);
        starpu_data_handle_t *Q = sw_tensor_grid(qkv_u, nq, rs, ncol, m->qkv_sizes, STARPU_R);
        starpu_data_handle_t *KV = s == 0 ? Q + G : sw_tensor_grid(m->kvbuf[s % 2], nq, rs, 2 * Gk, m->qkv_sizes + G, STARPU_R);
        int kstride = s == 0 ? ncol : 2 * Gk;
        int np = ring_pairs(nq, pa, pb);
        for (int t = 0; t < np; t++) {
            int a = pa[t], b = pb[t];
            if (kp[b] > qp[a] + qn[a] - 1) continue; /* every key after every query */
            m->attn_flops += 4.0 * m->B * m->hq * m->d * visible_pairs(qp[a], qn[a], kp[b], kn[b]);
            starpu_data_handle_t *O = sw_tensor_grid(o, nq, rs, G, NULL, STARPU_RW);
            starpu_data_handle_t *L = sw_tensor_grid(lse, nq, rs, G, NULL, STARPU_RW);
            for (int g = 0; g < G; g++) {
                int kv = g * Gk / G;
                sw_attn_args at = attn_args(m, step, layer, g, qp[a], qn[a], kp[b], kn[b]);
                at.merge = written[a];
                if (probs) /* recompute none (R = 1): the probabilities kept for backward */
                    sw_attn_probs_fwd(Q[a * ncol + g], KV[b * kstride + kv], KV[b * kstride + Gk + kv], O[a * G + g],
                                      L[a * G + g], sw_tensor_tiles(probs, SW_ROWS, G, STARPU_W)[g], &at);
                else
                    sw_attn_fwd(Q[a * ncol + g], KV[b * kstride + kv], KV[b * kstride + Gk + kv], O[a * G + g],
                                L[a * G + g], &at);
            }
            written[a] = 1;
        }
    }
}

/* Backward of ring_forward: dq accumulates here (columns of dqkv_u); the
 * gradient of each K/V block travels around the ring with the block
 * (dkv buffers), gathering every rank's contribution, and comes back to
 * its owner after R shifts, into dqkv_u's k | v columns. */
static void ring_backward(sw_gpt *m, int step, int layer, sw_tensor *qkv_u, sw_tensor *o, sw_tensor *lse,
                          sw_tensor *probs, sw_tensor *dout, sw_tensor *dqkv_u)
{
    int G = m->G, Gk = m->Gk, ncol = G + 2 * Gk, R = m->R;
    int64_t qp[2] = {0, 0}, qn[2] = {0, 0}, kp[2] = {0, 0}, kn[2] = {0, 0};
    int64_t split[2] = {(int64_t)m->hq * m->d, 2 * (int64_t)m->hk * m->d};
    int nq = ring_runs(m, m->rr, qp, qn);
    int64_t rs[2] = {qn[0] * m->B, qn[1] * m->B};
    int dq_done[2] = {0, 0}, pa[4], pb[4];
    for (int s = 0; s < R; s++) {
        if (s + 1 < R)
            sw_ring_shift_handles(m->comm, SW_GROUP_RING, kv_block(m, qkv_u, s), sw_tensor_whole(m->kvbuf[(s + 1) % 2], STARPU_W), 1);
        ring_runs(m, (m->rr - s + R) % R, kp, kn);
        starpu_data_handle_t *Q = sw_tensor_grid(qkv_u, nq, rs, ncol, m->qkv_sizes, STARPU_R);
        starpu_data_handle_t *KV = s == 0 ? Q + G : sw_tensor_grid(m->kvbuf[s % 2], nq, rs, 2 * Gk, m->qkv_sizes + G, STARPU_R);
        int kstride = s == 0 ? ncol : 2 * Gk;
        /* the block's gradient: written at the owner (step 0), accumulated on the way */
        starpu_data_handle_t *dKV =
            R > 1 ? sw_tensor_grid(m->dkvbuf[s % 2], nq, rs, 2 * Gk, m->qkv_sizes + G, STARPU_RW) : NULL;
        int dstride = R == 1 ? ncol : 2 * Gk, dkv_done[2] = {s > 0, s > 0};
        int np = ring_pairs(nq, pa, pb);
        for (int t = 0; t < np; t++) {
            int a = pa[t], b = pb[t];
            if (kp[b] > qp[a] + qn[a] - 1) continue;
            starpu_data_handle_t *O = sw_tensor_grid(o, nq, rs, G, NULL, STARPU_R);
            starpu_data_handle_t *L = sw_tensor_grid(lse, nq, rs, G, NULL, STARPU_R);
            starpu_data_handle_t *dO = sw_tensor_grid(dout, nq, rs, G, NULL, STARPU_R);
            starpu_data_handle_t *dQ = sw_tensor_grid(dqkv_u, nq, rs, ncol, m->qkv_sizes, STARPU_RW);
            if (R == 1) dKV = dQ + G;
            /* a key run's gradient is written first by the diagonal tile, which precedes every tile
             * that accumulates into its query run's dq (ring_pairs' order) */
            if (dq_done[a] && !dkv_done[b]) sw_fail(__FILE__, __LINE__, "ring attention: tile order", -22);
            for (int g = 0; g < G; g++) {
                int kv = g * Gk / G;
                sw_attn_args at = attn_args(m, step, layer, g, qp[a], qn[a], kp[b], kn[b]);
                at.accumulate = dq_done[a];
                /* groups sharing a K/V tile add their dk, dv after the first one */
                at.kv_accumulate = dkv_done[b] || g % (G / Gk) != 0;
                if (probs)
                    sw_attn_probs_bwd(Q[a * ncol + g], KV[b * kstride + kv], KV[b * kstride + Gk + kv],
                                      sw_tensor_tiles(probs, SW_ROWS, G, STARPU_R)[g], dO[a * G + g], dQ[a * ncol + g],
                                      dKV[b * dstride + kv], dKV[b * dstride + Gk + kv], &at);
                else
                    sw_attn_bwd(Q[a * ncol + g], KV[b * kstride + kv], KV[b * kstride + Gk + kv], O[a * G + g],
                                L[a * G + g], dO[a * G + g], dQ[a * ncol + g], dKV[b * dstride + kv],
                                dKV[b * dstride + Gk + kv], &at);
            }
            dq_done[a] = dkv_done[b] = 1;
        }
        if (R > 1) /* the gradient goes on with its block; after the last step, home */
            sw_ring_shift_handles(m->comm, SW_GROUP_RING, whole_r(m->dkvbuf[s % 2]),
                                  s + 1 < R ? sw_tensor_whole(m->dkvbuf[(s + 1) % 2], STARPU_W)
                                            : sw_tensor_split(dqkv_u, SW_COLS, 2, split, STARPU_W)[1],
                                  1);
    }
}

/* att[T,aq d], lse = causal attention of this block's qkv: with Ulysses the
 * heads are exchanged for the sequence around it */
static void attention_forward(sw_gpt *m, int step, int layer)
{
    block_acts *A = m->acts[layer];
    if (m->U > 1) ulysses_qkv(m, A->qkv, A->qkv_u, 1);
    ring_forward(m, step, layer, A->qkv_u, A->att_u, A->lse, A->probs);
    if (m->U > 1) ulysses_out(m, A->att_u, A->att, 1);
}

static void attention_backward(sw_gpt *m, int step, int layer)
{
    block_acts *A = m->acts[layer];
    if (m->U > 1) ulysses_out(m, m->datt_u, m->datt, 0);
    ring_backward(m, step, layer, A->qkv_u, A->att_u, A->lse, A->probs, m->datt_u, m->dqkv_u);
    if (m->U > 1) ulysses_qkv(m, m->dqkv, m->dqkv_u, 0);
}

/* K/V heads replicated over tp / kv_heads ranks: each rank's K/V weight
 * gradients cover only its own query heads. Gather every rank's over TP and
 * add up those of the ranks sharing this rank's K/V head, in rank order, so
 * that the sharers hold the same bits. */
static void sum_replicated_kv_grads(sw_gpt *m, int layer)
{
    if (!m->kv_replicated) return;
    int t = m->tp.t, per = t / kv_heads_of(&m->c), first = m->kv0 * per;
    int64_t wsz[2] = {(int64_t)m->aq * m->d, 2 * (int64_t)m->d};
    sw_tensor *grads[2] = {m->grad[block_param(layer, QKV_W)], m->grad[block_param(layer, QKV_B)]};
    sw_tensor *mine[2] = {m->kvw_mine, m->kvb_mine}, *all[2] = {m->kvw_all, m->kvb_all};
    for (int k = 0; k < 2; k++) {
        sw_split split = k == 0 ? SW_ROWS : SW_COLS;
        sw_copy(whole_w(mine[k]), sw_tensor_split(grads[k], split, 2, wsz, STARPU_R)[1]);
        sw_allgather(m->tp.comm, SW_GROUP_TP, mine[k], all[k]);
        starpu_data_handle_t *from = sw_tensor_tiles(all[k], SW_ROWS, t, STARPU_R);
        sw_copy(sw_tensor_split(grads[k], split, 2, wsz, STARPU_W)[1], from[first]);
        for (int s = first + 1; s < first + per; s++)
            sw_axpy(1.0f, from[s], sw_tensor_split(grads[k], split, 2, wsz, STARPU_RW)[1]);
    }
}

/* out[l,h] = res + dropout(branch) */
static void residual_forward(sw_gpt *m, int step, int layer, int op, sw_tensor *res, sw_tensor *branch,
                             sw_tensor *out)
{
    for (int i = 0; i < m->npc[1]; i++) {
        starpu_data_handle_t b = piece(m, 1, branch, i, STARPU_R);
        if (m->c.dropout > 0.0f) {
            sw_rng_key k = drop_key(m, step, (unsigned)layer, (unsigned)op, i);
            sw_dropout_fwd(b, piece(m, 1, m->tmp, i, STARPU_W), m->c.dropout, &k);
            b = piece(m, 1, m->tmp, i, STARPU_R);
        }
        sw_add(piece(m, 1, res, i, STARPU_R), b, piece(m, 1, out, i, STARPU_W));
    }
}

/* gradient of the dropped branch: dropout is diagonal, so its backward is
 * its forward applied to the gradient (same key, same mask). */
static sw_tensor *residual_backward(sw_gpt *m, int step, int layer, int op)
{
    if (m->c.dropout == 0.0f) return m->dres;
    for (int i = 0; i < m->npc[1]; i++) {
        sw_rng_key k = drop_key(m, step, (unsigned)layer, (unsigned)op, i);
        sw_dropout_fwd(piece(m, 1, m->dres, i, STARPU_R), piece(m, 1, m->dy, i, STARPU_W), m->c.dropout, &k);
    }
    return m->dy;
}

/* ------------------------------------------------------------- forward */

/* x[0][l,h] = dropout(wte[tokens] + wpe[pos]): the vocab-parallel lookup
 * over all T rows (wpe added by TP rank 0 only), reduced by g */
static void embedding_forward(sw_gpt *m, int step)
{
    const sw_gpt_config *c = &m->c;
    sw_tensor *e = tp_on(m) ? m->emb : c->dropout > 0.0f ? m->tmp : m->x[0];
    for (int i = 0; i < m->npc[0]; i++)
        sw_embedding_fwd(piece(m, 0, m->tokens, i, STARPU_R), whole_r(m->param[0]), whole_r(m->param[1]),
                         piece(m, 0, e, i, STARPU_W), m->pc_off[0][i], m->B, m->pc_pos[0][i],
                         (int64_t)m->tp.rank * m->Vl, m->tp.rank == 0);
    sw_tensor *x0 = tp_on(m) ? sw_tp_g_forward(&m->tp, m->emb, m->red) : e;
    for (int i = 0; i < m->npc[1] && x0 != m->x[0]; i++) {
        if (c->dropout > 0.0f) {
            sw_rng_key k = drop_key(m, step, SW_DROP_EMBED_LAYER, SW_DROP_EMBED, i);
            sw_dropout_fwd(piece(m, 1, x0, i, STARPU_R), piece(m, 1, m->x[0], i, STARPU_W), c->dropout, &k);
        } else {
            sw_copy(piece(m, 1, m->x[0], i, STARPU_W), piece(m, 1, x0, i, STARPU_R));
        }
    }
}

/* loss = mean cross-entropy of logits[T,Vl] = f(lnf) wte^T: the vocabulary
 * is split over TP, so the row max, the target logit and the sum of exps
 * are all-reduced ([T,1] each); every rank gets the loss */
static void lm_head_forward(sw_gpt *m)
{
    const sw_gpt_config *c = &m->c;
    int P = m->P;
    int64_t vocab0 = (int64_t)m->tp.rank * m->Vl;
    sw_tensor *lnf = sw_tp_f_forward(&m->tp, m->lnf, m->lnfg);
    starpu_data_handle_t x16 = op16(m, whole_r(lnf));
    for (int j = 0; j < P; j++)
        sw_gemm(x16, 0, sw_tensor_tiles(gemm_w(m, 0), SW_ROWS, P, STARPU_R)[j], 1, cols_w(m, m->logits, j), 1.0f,
                0.0f);
    op_done(m, x16);
    for (int i = 0; i < P; i++) {
        sw_ce_max(rows_r(m, m->logits, i), rows_w(m, m->ce_max, i), vocab0, c->vocab);
        sw_ce_target(rows_r(m, m->logits, i), rows_r(m, m->targets, i), rows_w(m, m->ce_tgt, i), vocab0);
    }
    if (tp_on(m)) {
        sw_allreduce(m->tp.comm, SW_GROUP_TP, m->ce_max, SW_MAX);
        sw_allreduce(m->tp.comm, SW_GROUP_TP, m->ce_tgt, SW_SUM);
    }
    for (int i = 0; i < P; i++)
        sw_ce_sumexp(rows_r(m, m->logits, i), rows_r(m, m->ce_max, i), rows_w(m, m->ce_sumexp, i), vocab0, c->vocab);
    if (tp_on(m)) sw_allreduce(m->tp.comm, SW_GROUP_TP, m->ce_sumexp, SW_SUM);
    for (int i = 0; i < P; i++)
        sw_ce_loss(rows_r(m, m->ce_max, i), rows_r(m, m->ce_tgt, i), rows_r(m, m->ce_sumexp, i),
                   rows_w(m, m->ce_rows, i));
    sw_colsum(whole_r(m->ce_rows), whole_w(m->loss), 1.0f / (float)m->T, 0.0f);
    /* the global batch's mean: micro-batches summed here, dp ranks after the last */
    if (!m->loss_sum) return;
    float share = 1.0f / (float)(m->gn * c->grad_accum);
    sw_colsum(whole_r(m->loss), sw_tensor_whole(m->loss_sum, m->micro ? STARPU_RW : STARPU_W), share,
              m->micro ? 1.0f : 0.0f);
    if (m->micro == c->grad_accum - 1 && m->gn > 1) sw_allreduce(m->comm, m->gg, m->loss_sum, SW_SUM);
}

/* Offload (Open-Sora's stack, as tasks): after block l's forward its saved
 * activations are copied from the working set (two blocks, alternating)
 * into their tensors on the offload node and marked "won't use" (StarPU
 * writes them home and evicts their working copies first: main RAM's, or
 * with CUDA workers the GPU's); in backward
 * they are copied back into the working set before block l's backward
 * (last block first), and once that onload has run, block l - 1's are
 * prefetched (to sw_compute_node) while block l computes. (StarPU's prefetch does not wait for
 * the tasks submitted before it, so it is issued from the onload's
 * completion, when it is due, not at submission.) */
static void prefetch_block(void *arg)
{
    const struct stash_ref *r = arg;
    for (int i = 0; i < r->m->acts[r->l]->nown; i++)
        starpu_data_prefetch_on_node(r->m->stash[r->l][i]->handle, (unsigned)sw_compute_node(), 1);
}

static void offload_block(sw_gpt *m, int l)
{
    block_acts *a = m->acts[l];
    sw_trace_set_phase(SW_PHASE_OFFLOAD, l);
    for (int i = 0; i < a->nown; i++) {
        sw_copy(whole_w(m->stash[l][i]), whole_r(a->own[i]));
        sw_tensor_wont_use(m->stash[l][i]);
    }
}

static void onload_block(sw_gpt *m, int l)
{
    block_acts *a = m->acts[l];
    sw_trace_set_phase(SW_PHASE_OFFLOAD, l);
    for (int i = 0; i < a->nown; i++)
        sw_copy_then(whole_w(a->own[i]), whole_r(m->stash[l][i]), i == 0 && l > 0 ? prefetch_block : NULL,
                     l > 0 ? &m->sref[l - 1] : NULL);
}

/* Block l's forward, from x[l] into its saved activations and (out != 0)
 * x[l+1]; out = 0 when full recomputation refills the last block of a
 * group, whose output is already kept. */
static void block_forward(sw_gpt *m, int step, int l, int out)
{
    block_acts *A = m->acts[l];
    int P = m->P;
    /* attention: x_mid = x[l] + dropout(proj(attention(qkv(ln1(x[l]))))) */
    layernorm_forward(m, m->x[l], block_param(l, LN1_W), A->ln1, A->ln1_mean, A->ln1_rstd);
    sw_tensor *ln1 = sw_tp_f_forward(&m->tp, A->ln1, A->ln1g);
    column_forward(m, A->ln1, ln1, block_param(l, QKV_W), A->qkv, m->nqkv, m->gemm_sizes);
    attention_forward(m, step, l);
    sw_tensor *proj = row_forward(m, A->att, block_param(l, PROJ_W));
    residual_forward(m, step, l, SW_DROP_ATTN_OUT, m->x[l], proj, A->x_mid);
    /* MLP: x[l+1] = x_mid + dropout(fc2(gelu(fc(ln2(x_mid))))) */
    layernorm_forward(m, A->x_mid, block_param(l, LN2_W), A->ln2, A->ln2_mean, A->ln2_rstd);
    sw_tensor *ln2 = sw_tp_f_forward(&m->tp, A->ln2, A->ln2g);
    column_forward(m, A->ln2, ln2, block_param(l, FC_W), A->fc, P, NULL);
    for (int j = 0; j < P; j++) sw_gelu_fwd(cols_r(m, A->fc, j), cols_w(m, A->fc_gelu, j));
    if (!out) return;
    sw_tensor *fc2 = row_forward(m, A->fc_gelu, block_param(l, FC2_W));
    residual_forward(m, step, l, SW_DROP_MLP_OUT, A->x_mid, fc2, m->x[l + 1]);
}

void sw_gpt_forward(sw_gpt *m, int step)
{
    const sw_gpt_config *c = &m->c;
    sw_trace_set_phase(SW_PHASE_FORWARD, -1); /* trace labels; no-ops when tracing is off */
    /* bf16: the GEMMs' weights, from the master weights as they are now */
    for (int i = 0; m->w16 && m->micro == 0 && i < m->nparams; i++)
        if (m->w16[i]) sw_cast(whole_r(m->param[i]), whole_w(m->w16[i]));
    embedding_forward(m, step);
    for (int l = 0; l < c->layers; l++) {
        sw_trace_set_phase(SW_PHASE_FORWARD, l);
        block_forward(m, step, l, 1);
        if (m->stash) offload_block(m, l);
    }
    int lnf = sw_gpt_num_params(c) - 2;
    sw_trace_set_phase(SW_PHASE_FORWARD, -1);
    layernorm_forward(m, m->x[c->layers], lnf, m->lnf, m->lnf_mean, m->lnf_rstd);
    lm_head_forward(m);
}

/* ------------------------------------------------------------ backward */

/* dlogits = (softmax - onehot) / T on the local vocabulary (no
 * communication); returns the gradient of lnf ([l,h], through f) */
static sw_tensor *lm_head_backward(sw_gpt *m)
{
    const sw_gpt_config *c = &m->c;
    int P = m->P;
    int64_t vocab0 = (int64_t)m->tp.rank * m->Vl;
    for (int i = 0; i < P; i++)
        sw_ce_bwd(rows_rw(m, m->logits, i), rows_r(m, m->ce_max, i), rows_r(m, m->ce_sumexp, i),
                  rows_r(m, m->targets, i), vocab0, c->vocab, 1.0f / ((float)m->T * m->gn * c->grad_accum));
    /* dwte = dlogits^T lnf (split over the vocabulary) */
    starpu_data_handle_t x16 = op16(m, whole_r(m->lnfg));
    for (int j = 0; j < P; j++) {
        starpu_data_handle_t d16 = op16(m, cols_r(m, m->logits, j));
        sw_gemm(d16, 1, x16, 0, sw_tensor_tiles(m->grad[0], SW_ROWS, P, STARPU_W)[j], 1.0f, 0.0f);
        op_done(m, d16);
    }
    op_done(m, x16);
    /* dlnf = dlogits wte, split over the vocabulary (the reduction dimension:
     * neither large operand is re-packed) into partial sums, then added */
    if (P == 1) {
        starpu_data_handle_t d16 = op16(m, whole_r(m->logits));
        sw_gemm(d16, 0, whole_r(gemm_w(m, 0)), 0, whole_w(m->part), 1.0f, 0.0f);
        op_done(m, d16);
    } else {
        for (int j = 0; j < P; j++) {
            starpu_data_handle_t d16 = op16(m, cols_r(m, m->logits, j));
            sw_gemm(d16, 0, sw_tensor_tiles(gemm_w(m, 0), SW_ROWS, P, STARPU_R)[j], 0,
                    sw_tensor_tiles(m->lm_part, SW_ROWS, P, STARPU_W)[j], 1.0f, 0.0f);
            op_done(m, d16);
        }
        starpu_data_handle_t *lp = sw_tensor_tiles(m->lm_part, SW_ROWS, P, STARPU_R);
        sw_add(lp[0], lp[1], whole_w(m->part));
        for (int j = 2; j < P; j++) sw_axpy(1.0f, lp[j], sw_tensor_whole(m->part, STARPU_RW));
    }
    return sw_tp_f_backward(&m->tp, m->part, m->dln);
}

/* Sum this micro-batch's gradients into the buckets; after the last one,
 * all-reduce each bucket over DP (its reduction depends only on the
 * copies of its own gradients, so it starts while the backward of earlier
 * layers goes on) and copy the sums back into the gradients. */
static void reduce_gradients(sw_gpt *m)
{
    const sw_gpt_config *c = &m->c;
    if (!m->nbuckets) return;
    int last = m->micro == c->grad_accum - 1;
    for (int b = 0; b < m->nbuckets; b++) {
        int n = m->bucket_count[b], first = m->bucket_first[b];
        for (int i = 0; i < n; i++)
            sw_copy_flat(whole_r(m->grad[first - i]),
                         sw_tensor_split(m->bucket[b], SW_COLS, n, m->bucket_sizes[b], m->micro ? STARPU_RW : STARPU_W)[i],
                         m->micro > 0);
        if (!last) continue;
        if (m->gn > 1 && !c->zero) sw_allreduce(m->comm, m->gg, m->bucket[b], SW_SUM);
        for (int i = 0; i < n; i++)
            sw_copy_flat(sw_tensor_split(m->bucket[b], SW_COLS, n, m->bucket_sizes[b], STARPU_R)[i],
                         whole_w(m->grad[first - i]), 0);
    }
}

/* Block l's backward: dres holds the gradient of x[l+1] on entry, of x[l] on return */
static void block_backward(sw_gpt *m, int step, int l)
{
    block_acts *A = m->acts[l];
    int P = m->P;
    /* MLP */
    sw_tensor *dz = residual_backward(m, step, l, SW_DROP_MLP_OUT);
    row_backward(m, dz, A->fc_gelu, block_param(l, FC2_W), m->dfc);
    for (int j = 0; j < P; j++)
        sw_gelu_bwd(cols_r(m, A->fc, j), sw_tensor_tiles(m->dfc, SW_COLS, P, STARPU_RW)[j]);
    sw_tensor *dln2 = column_backward(m, m->dfc, A->ln2, A->ln2g, block_param(l, FC_W), P, NULL);
    layernorm_backward(m, dln2, A->x_mid, block_param(l, LN2_W), A->ln2_mean, A->ln2_rstd, 1);
    /* attention */
    sw_tensor *dproj = residual_backward(m, step, l, SW_DROP_ATTN_OUT);
    row_backward(m, dproj, A->att, block_param(l, PROJ_W), m->datt);
    attention_backward(m, step, l);
    sw_tensor *dln1 = column_backward(m, m->dqkv, A->ln1, A->ln1g, block_param(l, QKV_W), m->nqkv, m->gemm_sizes);
    sum_replicated_kv_grads(m, l);
    layernorm_backward(m, dln1, m->x[l], block_param(l, LN1_W), A->ln1_mean, A->ln1_rstd, 1);
}

void sw_gpt_backward(sw_gpt *m, int step)
{
    const sw_gpt_config *c = &m->c;
    int lnf = sw_gpt_num_params(c) - 2;

    sw_trace_set_phase(SW_PHASE_BACKWARD, -1);
    sw_tensor *dlnf = lm_head_backward(m);
    layernorm_backward(m, dlnf, m->x[c->layers], lnf, m->lnf_mean, m->lnf_rstd, 0);

    /* blocks in reverse; with full recomputation each group of K blocks is
     * first refilled from its kept input (the group's last block up to its
     * GeLU: its output is the next group's kept input) */
    for (int l = c->layers - 1; l >= 0; l--) {
        if (m->stash) onload_block(m, l);
        if (m->K && ((l + 1) % m->K == 0 || l == c->layers - 1))
            for (int r = l / m->K * m->K; r <= l; r++) {
                sw_trace_set_phase(SW_PHASE_RECOMPUTE, r);
                block_forward(m, step, r, r < l);
            }
        sw_trace_set_phase(SW_PHASE_BACKWARD, l);
        block_backward(m, step, l);
    }

    sw_trace_set_phase(SW_PHASE_BACKWARD, -1);
    /* embedding: dwte += scatter(dx0) over all T rows (g's backward gathers
     * them), dwpe = scatter(dx0) (full on every rank: wpe was added once) */
    sw_tensor *demb = m->dres;
    if (c->dropout > 0.0f) {
        for (int i = 0; i < m->npc[1]; i++) {
            sw_rng_key k = drop_key(m, step, SW_DROP_EMBED_LAYER, SW_DROP_EMBED, i);
            sw_dropout_fwd(piece(m, 1, m->dres, i, STARPU_R), piece(m, 1, m->dy, i, STARPU_W), c->dropout, &k);
        }
        demb = m->dy;
    }
    demb = sw_tp_g_backward(&m->tp, demb, m->dfull);
    /* one scatter per run of positions (dwpe written by the first) */
    for (int k = 0; k < m->nlr; k++)
        sw_embedding_bwd(run_rows(m, m->tokens, k), run_rows(m, demb, k),
                         sw_tensor_whole(m->grad[0], STARPU_RW), sw_tensor_whole(m->grad[1], k ? STARPU_RW : STARPU_W),
                         0, m->B, m->lr_p0[k], (int64_t)m->tp.rank * m->Vl, k == 0);

    reduce_gradients(m);

    /* the scratch is dead until the next step: StarPU may drop every copy
     * instead of keeping (or writing back) it */
    sw_tensor *scratch[] = {m->logits, m->emb, m->part, m->gath, m->red, m->tmp, m->dy, m->dres, m->dln,
                            m->dfull, m->datt, m->dqkv, m->dfc, m->part_w, m->part_b, m->lm_part,
                            m->kvw_mine, m->kvw_all, m->kvb_mine, m->kvb_all};
    for (size_t i = 0; i < sizeof scratch / sizeof scratch[0]; i++)
        if (scratch[i]) sw_tensor_invalidate(scratch[i]);
}

/* --------------------------------------------------------------- AdamW */

void sw_gpt_update(sw_gpt *m, int step)
{
    const sw_gpt_config *c = &m->c;
    sw_adamw_args a = {c->lr, c->beta1, c->beta2, c->adam_eps, c->weight_decay, step};
    sw_trace_set_phase(SW_PHASE_OPTIMIZER, -1);
    for (int p = 0; p < m->nparams; p++) {
        sw_tensor *t = m->param[p];
        if (m->gshard[p]) {
            /* ZeRO-1: sum this rank's rows of the gradient over dp, update them, gather every rank's rows */
            sw_reduce_scatter(m->comm, m->gg, m->grad[p], m->gshard[p], SW_SUM);
            sw_adamw(sw_tensor_tiles(t, SW_ROWS, m->gn, STARPU_RW)[m->gr], whole_r(m->gshard[p]),
                     sw_tensor_whole(m->adam_m[p], STARPU_RW), sw_tensor_whole(m->adam_v[p], STARPU_RW), &a);
            sw_allgather_inplace(m->comm, m->gg, t);
            continue;
        }
        if (c->zero && m->gn > 1) sw_allreduce(m->comm, m->gg, m->grad[p], SW_SUM); /* too few rows to shard */
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

/* ------------------------------------------------------- memory model */

/* saved activations of block `layer` by the model, in bytes */
static double saved_model_bytes(const sw_gpt_config *c, int layer)
{
    /* the model, from the configuration alone (fp32 elements):
     * selective: l (4h + 4) + [sp, t > 1, kept gathered] 2 T h + T ((aq + 2 ak) d + aq d + aq + 2 * 4h/t)
     *   l = T/t with sp, else T: block input, ln1, x_mid, ln2 (+ mean, rstd of
     *   both norms); the gathered norm outputs; qkv, attention output, lse,
     *   fc before and after GeLU; with Ulysses + T aq d: the attention output
     *   in both layouts. T = seq/(ulysses*ring) * B, B = batch/(dp*grad_accum).
     * none: + (aq/ulysses) B seq^2, the attention probabilities.
     * full: l h for a checkpointed block (layer % recompute_every == 0), else 0. */
    double t = c->tp, B = c->batch / (c->dp * c->grad_accum), T = (double)c->seq / (c->ulysses * c->ring) * B;
    double h = c->hidden;
    double d = (double)c->hidden / c->heads;
    double kv = kv_heads_of(c), aq = c->heads / t, ak = kv >= t ? kv / t : 1;
    double l = c->sp ? T / t : T;
    double gathered = c->sp && c->tp > 1 && !c->tp_recompute_allgather ? 2 * T * h : 0;
    double elems = l * (4 * h + 4) + gathered + T * ((aq + 2 * ak) * d + aq * d + aq + 2 * 4 * h / t);
    if (c->ulysses > 1) elems += T * aq * d;
    if (c->recompute == SW_RECOMPUTE_NONE) elems += aq / c->ulysses * B * (double)c->seq * c->seq;
    if (c->recompute == SW_RECOMPUTE_FULL) elems = layer % c->recompute_every == 0 ? l * h : 0;
    return 4 * elems;
}

sw_gpt_memory sw_gpt_saved_bytes(const sw_gpt *m, int layer)
{
    sw_gpt_memory r = {saved_model_bytes(&m->c, layer), 0};
    /* registered: the block's input when it is kept, and the tensors allocated
     * for the block alone (none with full recomputation: its working set is
     * shared by the blocks of every group) */
    if (!m->K || layer % m->K == 0) r.registered_bytes += (double)sw_tensor_bytes(m->x[layer]);
    for (int i = 0; i < m->acts[layer]->nown && !m->K; i++) /* offload: the copies on the offload node */
        r.registered_bytes += (double)sw_tensor_bytes(m->stash ? m->stash[layer][i] : m->acts[layer]->own[i]);
    return r;
}

double sw_gpt_tp_bytes_model(const sw_gpt_config *c)
{
    if (c->tp < 2) return 0;
    /* per micro-batch, times grad_accum: the TP collectives run for each */
    double t = c->tp, T = (double)c->seq / (c->ulysses * c->ring) * (c->batch / (c->dp * c->grad_accum));
    double h = c->hidden, L = c->layers, f = 4;
    double d = h / c->heads, kv = kv_heads_of(c);
    double ar = 2 * (t - 1) / t, ag = (t - 1) / t; /* per byte of the full tensor */
    double act = f * T * h;
    double bytes = (4 * L + 2) * ar * act;                   /* blocks, embedding, LM head */
    if (c->sp && c->tp_recompute_allgather) bytes += 2 * L * ag * act; /* re-gathers in backward */
    bytes += 3 * ar * f * T;                                  /* cross-entropy max, target, sum-exp */
    if (c->sp) bytes += (6 * L + 2) * ar * f * h;             /* replicated parameters' gradients */
    if (kv < t) bytes += L * ag * t * f * (2 * d * h + 2 * d); /* replicated K/V gradients, gathered */
    return bytes * c->grad_accum;
}

void sw_gpt_cp_bytes_model(const sw_gpt_config *c, double *ulysses_bytes, double *ring_bytes)
{
    /* per micro-batch, times grad_accum; fp32; per layer */
    double U = c->ulysses, R = c->ring, T = (double)c->seq / (U * R) * (c->batch / (c->dp * c->grad_accum));
    double d = (double)c->hidden / c->heads, kv = kv_heads_of(c), t = c->tp;
    double aq = c->heads / t, ak = kv >= t ? kv / t : 1, L = c->layers, f = 4;
    /* q, k, v in and the output out, forward and backward: (U-1)/U of T (2 aq + 2 ak) d, twice */
    *ulysses_bytes = U > 1 ? L * 2 * (U - 1) / U * f * T * (2 * aq + 2 * ak) * d * c->grad_accum : 0;
    /* K/V blocks [U T, 2 ak/U d]: R-1 shifts forward, R-1 backward, their gradients R */
    *ring_bytes = R > 1 ? L * (3 * R - 2) * f * T * 2 * ak * d * c->grad_accum : 0;
}

double sw_gpt_attention_flops(const sw_gpt *m) { return m->attn_flops; }

void sw_gpt_set_micro_batch(sw_gpt *m, int k)
{
    if (k < 0 || k >= m->c.grad_accum) sw_fail(__FILE__, __LINE__, "sw_gpt_set_micro_batch: k out of range", -22);
    m->micro = k;
}

int sw_gpt_micro_batch_size(const sw_gpt *m) { return m->B; }

int sw_gpt_micro_batch_first(const sw_gpt *m, int k)
{
    return (m->dp_rank * m->c.grad_accum + k) * m->B;
}

void sw_gpt_load_micro_batch(sw_gpt *m, int k, const int32_t *tok, const int32_t *tgt)
{
    const sw_gpt_config *c = &m->c;
    int64_t n = m->T, first = sw_gpt_micro_batch_first(m, k);
    int32_t *mt = malloc(sizeof(int32_t) * (size_t)n), *mg = malloc(sizeof(int32_t) * (size_t)n);
    if (!mt || !mg) { perror("starweave: malloc"); abort(); }
    for (int64_t i = 0; i < n / m->B; i++) /* this rank's positions */
        for (int64_t b = 0, pos = sw_gpt_position(m, i); b < m->B; b++) {
            mt[i * m->B + b] = tok[pos * c->batch + first + b];
            mg[i * m->B + b] = tgt[pos * c->batch + first + b];
        }
    sw_tensor_write_host(m->tokens, mt);
    sw_tensor_write_host(m->targets, mg);
    free(mt);
    free(mg);
    sw_gpt_set_micro_batch(m, k);
}

float sw_gpt_read_loss(sw_gpt *m)
{
    float loss;
    sw_tensor_read_host(sw_gpt_loss(m), &loss);
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
