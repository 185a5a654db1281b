/* The decoder's configuration (GPT-2, LLaMA): its rules and its FLOPs
 * (see gpt.h); its memory and traffic models are the layers'. */
#include <stdio.h>
#include <string.h>

#include "layers/layer_util.h"
#include "starweave/gpt.h"


static const char *const model_names[] = {"gpt2", "llama"};
const char *sw_model_name(int model) { return model >= 0 && model < 2 ? model_names[model] : "?"; }
int sw_model_parse(const char *name)
{
    for (int i = 0; i < 2; i++)
        if (!strcmp(name, model_names[i])) return i;
    return -1;
}

/* ---------------------------------------------------------------- config */

void sw_gpt_config_default(sw_gpt_config *c)
{
    memset(c, 0, sizeof *c);
    c->rope_theta = 10000.0f;
    c->layers = 2;
    c->hidden = 128;
    c->heads = 4;
    c->vocab = 256;
    c->ignore_index = SW_CE_IGNORE_NONE;
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
    c->pp = 1;
    c->bucket_mb = 25.0f;
    c->zero_prefetch = 1;
    c->ulysses = 1;
    c->ring = 1;
    c->zigzag = 1;
    c->recompute = SW_RECOMPUTE_SELECTIVE;
    c->recompute_every = 1;
}

int sw_gpt_config_check(sw_gpt_config *c, char *msg, size_t n)
{
    SW_RULE(c->model == SW_MODEL_GPT2 || c->model == SW_MODEL_LLAMA, "model must be gpt2 or llama (model = %d)", c->model);
    SW_RULE(c->layers > 0, "layers must be positive (layers = %d)", c->layers);
    SW_RULE(c->hidden > 0, "hidden must be positive (hidden = %d)", c->hidden);
    SW_RULE(c->heads > 0, "heads must be positive (heads = %d)", c->heads);
    SW_RULE(c->hidden % c->heads == 0, "hidden (%d) must be divisible by heads (%d)", c->hidden, c->heads);
    if (c->kv_heads == 0) c->kv_heads = c->heads;
    SW_RULE(c->kv_heads > 0, "kv-heads must be positive (kv-heads = %d)", c->kv_heads);
    SW_RULE(c->heads % c->kv_heads == 0, "heads (%d) must be divisible by kv-heads (%d)", c->heads, c->kv_heads);
    SW_RULE(c->tp > 0, "tp must be at least 1 (tp = %d)", c->tp);
    SW_RULE(c->heads % c->tp == 0, "heads (%d) must be divisible by tp (%d)", c->heads, c->tp);
    SW_RULE(c->kv_heads < c->tp || c->kv_heads % c->tp == 0,
         "kv-heads (%d) must be divisible by tp (%d) when kv-heads >= tp (K/V heads split)", c->kv_heads, c->tp);
    SW_RULE(c->kv_heads >= c->tp || c->tp % c->kv_heads == 0,
         "tp (%d) must be divisible by kv-heads (%d) when kv-heads < tp (K/V heads replicated)", c->tp, c->kv_heads);
    SW_RULE(c->ulysses > 0, "ulysses must be at least 1 (ulysses = %d)", c->ulysses);
    SW_RULE(c->ring > 0, "ring must be at least 1 (ring = %d)", c->ring);
    SW_RULE(c->ulysses == 1 || c->heads % (c->tp * c->ulysses) == 0, "heads (%d) must be divisible by tp*ulysses (%d*%d)",
         c->heads, c->tp, c->ulysses);
    SW_RULE(c->ulysses == 1 || c->kv_heads % (c->tp * c->ulysses) == 0,
         "kv-heads (%d) must be divisible by tp*ulysses (%d*%d): Ulysses splits the K/V heads", c->kv_heads, c->tp,
         c->ulysses);
    /* the QKV GEMM has 3 x ulysses output tiles under Ulysses (graphs/attention.c), a linear at most 64
     * (sw_linear.sizes): refused here, with the flags, not at the model's creation */
    SW_RULE(3 * c->ulysses <= (int)(sizeof ((sw_linear *)0)->sizes / sizeof(int64_t)),
            "ulysses (%d) must be at most %d: the QKV GEMM's 3 x ulysses output tiles, at most %d", c->ulysses,
            (int)(sizeof ((sw_linear *)0)->sizes / sizeof(int64_t)) / 3, (int)(sizeof ((sw_linear *)0)->sizes / sizeof(int64_t)));
    int cp = c->ulysses * c->ring, zig = c->ring > 1 && c->zigzag;
    SW_RULE(!zig || c->seq % (2 * cp) == 0, "seq (%d) must be divisible by 2*ring*ulysses (2*%d*%d) with zigzag", c->seq,
         c->ring, c->ulysses);
    SW_RULE(c->seq % cp == 0, "seq (%d) must be divisible by ring*ulysses (%d*%d)", c->seq, c->ring, c->ulysses);
    SW_RULE(c->vocab > 0, "vocab must be positive (vocab = %d)", c->vocab);
    SW_RULE(c->ignore_index < 0 || c->ignore_index >= c->vocab,
         "ignore-index (%d) must be outside [0, vocab %d): it would drop a real token", c->ignore_index, c->vocab);
    SW_RULE(c->seq > 0, "seq must be positive (seq = %d)", c->seq);
    SW_RULE(c->batch > 0, "batch must be positive (batch = %d)", c->batch);
    SW_RULE(c->max_pos > 0, "max-pos must be positive (max-pos = %d)", c->max_pos);
    SW_RULE(c->seq <= c->max_pos, "seq (%d) must not exceed the positions of the model (max-pos = %d)", c->seq,
         c->max_pos);
    SW_RULE(!c->sp || c->seq % c->tp == 0, "seq (%d) must be divisible by tp (%d) with sequence parallelism", c->seq,
         c->tp);
    SW_RULE(!c->sp || (c->seq / cp) % c->tp == 0,
         "seq/(ulysses*ring) (%d) must be divisible by tp (%d) with sequence parallelism", c->seq / cp, c->tp);
    SW_RULE(!c->tp_recompute_allgather || c->sp, "tp-recompute-allgather needs sequence parallelism (--sp)");
    SW_RULE(c->dp > 0, "dp must be at least 1 (dp = %d)", c->dp);
    SW_RULE(c->grad_accum > 0, "grad-accum must be at least 1 (grad-accum = %d)", c->grad_accum);
    SW_RULE(c->batch % (c->dp * c->grad_accum) == 0, "batch (%d) must be divisible by dp*grad-accum (%d*%d)",
         c->batch, c->dp, c->grad_accum);
    SW_RULE(c->zero >= 0 && c->zero <= 3, "zero must be 0, 1, 2 or 3 (zero = %d)", c->zero);
    SW_RULE(c->zero_prefetch >= 0, "zero-prefetch must be 0 or more (zero-prefetch = %d)", c->zero_prefetch);
    SW_RULE(c->pp > 0, "pp must be at least 1 (pp = %d)", c->pp);
    SW_RULE(c->layers % c->pp == 0, "layers (%d) must be divisible by pp (%d): each stage runs layers/pp blocks",
            c->layers, c->pp);
    SW_RULE(c->pp_virtual >= 0, "pp-virtual must be at least 1 (pp-virtual = %d)", c->pp_virtual);
    SW_RULE(c->pp_virtual <= 1 || c->pp > 1, "pp-virtual (%d) needs pipeline stages (pp = %d)", c->pp_virtual, c->pp);
    SW_RULE(c->pp_virtual <= 1 || c->layers % (c->pp * c->pp_virtual) == 0,
            "layers (%d) must be divisible by pp x pp-virtual (%d x %d): each chunk runs layers/(pp*pp-virtual) blocks",
            c->layers, c->pp, c->pp_virtual);
    SW_RULE(c->pp_virtual <= 1 || c->grad_accum >= c->pp,
            "interleaved chunks need at least pp micro-batches: grad-accum (%d) must be at least pp (%d) with "
            "pp-virtual %d", c->grad_accum, c->pp, c->pp_virtual);
    SW_RULE(!c->zero_bubble || c->tp * c->ulysses * c->ring * c->dp == 1,
            "zero-bubble needs tp, ulysses, ring and dp 1 (tp %d, ulysses %d, ring %d, dp %d): its W units read the "
            "blocks' saved inputs, and no gradient may be reduced before they run", c->tp, c->ulysses, c->ring, c->dp);
    SW_RULE(!c->zero_bubble || (c->recompute != SW_RECOMPUTE_FULL && !c->offload),
            "zero-bubble needs recompute none or selective and no offload (recompute %s, offload %d): its W units read "
            "the blocks' saved inputs, which full recomputation and offload share between micro-batches",
            sw_recompute_name(c->recompute), c->offload);
    SW_RULE(c->pp_inflight >= 0, "pp-inflight must be 0 (1F1B: pp - stage) or at least 1 (pp-inflight = %d)",
            c->pp_inflight);
    SW_RULE(c->bucket_mb > 0.0f, "bucket-mb must be positive (bucket-mb = %g)", c->bucket_mb);
    SW_RULE(c->recompute >= SW_RECOMPUTE_NONE && c->recompute <= SW_RECOMPUTE_FULL,
         "recompute must be none, selective or full (recompute = %d)", c->recompute);
    SW_RULE(c->recompute_every > 0, "recompute-every must be at least 1 (recompute-every = %d)", c->recompute_every);
    SW_RULE(c->recompute_every == 1 || c->recompute == SW_RECOMPUTE_FULL,
         "recompute-every (%d) needs recompute full (recompute = %s)", c->recompute_every,
         sw_recompute_name(c->recompute));
    SW_RULE(c->recompute != SW_RECOMPUTE_NONE || c->ring == 1,
         "recompute none needs ring = 1 (ring = %d): Ring attention never holds a whole row of probabilities",
         c->ring);
    SW_RULE(c->dtype == SW_F32 || c->dtype == SW_BF16, "dtype must be fp32 (%d) or bf16 (%d) (dtype = %d)", SW_F32,
         SW_BF16, c->dtype);
    SW_RULE(c->dropout >= 0.0f && c->dropout < 1.0f, "dropout must be in [0, 1) (dropout = %g)", c->dropout);
    SW_RULE(c->tiles > 0, "tiles (%d) must be positive", c->tiles);
    int local_rows = c->seq / cp * (c->batch / (c->dp * c->grad_accum)) / (c->sp ? c->tp : 1);
    SW_RULE(c->tiles <= local_rows,
         "tiles (%d) must not exceed the rows of a rank, seq*batch/(dp*grad-accum*ulysses*ring)%s (%d)", c->tiles,
         c->sp ? "/tp" : "", local_rows);
    int head_cols = c->hidden / c->tp; /* columns of the local attention output */
    SW_RULE(c->tiles <= head_cols, "tiles (%d) must not exceed hidden/tp (%d)", c->tiles, head_cols);
    SW_RULE(c->ln_eps > 0.0f, "ln-eps must be positive (ln-eps = %g)", c->ln_eps);
    SW_RULE(c->lr > 0.0f, "lr must be positive (lr = %g)", c->lr);
    SW_RULE(c->clip_grad >= 0.0f, "clip-grad must not be negative (clip-grad = %g)", c->clip_grad);
    SW_RULE((int64_t)c->seq * c->batch * c->hidden * 4 <= (int64_t)UINT32_MAX,
         "seq*batch*4*hidden (%lld) must fit in 32 bits", (long long)c->seq * c->batch * c->hidden * 4);
    if (c->ffn == 0) c->ffn = c->model == SW_MODEL_LLAMA ? (8 * c->hidden / 3 + 63) / 64 * 64 : 4 * c->hidden;
    SW_RULE(c->ffn > 0 && c->ffn % c->tp == 0, "ffn (%d) must be a positive multiple of tp (%d)", c->ffn, c->tp);
    SW_RULE(c->tiles <= c->ffn / c->tp, "tiles (%d) must not exceed ffn/tp (%d)", c->tiles, c->ffn / c->tp);
    SW_RULE(c->model != SW_MODEL_LLAMA || (c->hidden / c->heads) % 2 == 0,
         "head dim hidden/heads (%d) must be even for rotary positions", c->hidden / c->heads);
    SW_RULE(c->model != SW_MODEL_LLAMA || c->rope_theta > 0.0f, "rope-theta must be positive (%g)", c->rope_theta);
    int pad = 128 * c->tp;
    c->vocab_padded = (c->vocab + pad - 1) / pad * pad;
    SW_RULE(c->tiles <= c->vocab_padded / c->tp, "tiles (%d) must not exceed the padded vocabulary per rank (%d)",
         c->tiles, c->vocab_padded / c->tp);
    return 0;
}

/* ------------------------------------------------------------- FLOPs */

double sw_gpt_step_flops(const sw_gpt_config *c)
{
    double T = (double)c->seq * c->batch, h = c->hidden;
    double vp = c->vocab_padded > 0 ? c->vocab_padded : (c->vocab + 127) / 128 * 128;
    /* per block: qkv 6Th^2, proj 2Th^2, MLP 4ThF (SwiGLU 6ThF), attention 4 b s^2 h (full square) */
    double F = c->ffn > 0 ? c->ffn : 4 * h;
    double block = 8.0 * T * h * h + (c->model == SW_MODEL_LLAMA ? 6.0 : 4.0) * T * h * F +
                   4.0 * c->batch * (double)c->seq * c->seq * h;
    double forward = c->layers * block + 2.0 * T * h * vp;
    return 3.0 * forward; /* backward = 2 x forward */
}
