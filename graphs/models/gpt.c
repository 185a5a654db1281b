/* GPT-2 and LLaMA as descriptions made of layers (layers.h), read top to
 * bottom like llm.c's train_gpt2.c: the parameters, what a block keeps, a
 * block's forward and backward, then the model's. Both are the same
 * pre-norm decoder built from different layers, chosen by a spec (as
 * Megatron-core assembles a transformer layer from a spec of submodules).
 * It holds no communication and no parallel logic: the layers take theirs
 * from the context, the block policies (blocks.h) recompute and offload,
 * the registry (params.h) reduces gradients and updates. Activations are
 * [T, C] matrices with T = seq * batch rows in [s, b] order (row =
 * pos * batch + b). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_internal.h"
#include "layers/layer_util.h"
#include "starweave/gpt.h"
#include "starweave/runtime.h"
#include "starweave/trace.h"

/* the layers of the decoder: GPT-2's and LLaMA's */
static const decoder_spec specs[] = {
    [SW_MODEL_GPT2] = {0, 1, 0, 0, 1, {"ln1", "qkv", "proj", "ln2", "fc", "fc2", "lnf"}},
    [SW_MODEL_LLAMA] = {1, 0, 1, 1, 0, {"attn_norm", "qkv", "proj", "mlp_norm", "gate_up", "down", "norm"}},
};

/* what one block keeps from forward to backward ("l" rows: this rank's
 * residual rows, T/tp with sp, else T) */
typedef struct gpt_saved {
    sw_tensor *ln1, *ln1_mean, *ln1_rstd; /* [l,h], [l,1], [l,1] */
    sw_tensor *ln1g;                      /* [T,h] ln1 gathered (sp; = ln1 without) */
    sw_attn_saved attn;                   /* qkv, attention output, lse (probs) */
    sw_tensor *x_mid;                     /* [l,h] residual stream after attention */
    sw_tensor *ln2, *ln2_mean, *ln2_rstd, *ln2g;
    sw_tensor *fc, *act;                  /* [T,F/tp] before / after GeLU (SwiGLU: [T,2F/tp] gate | up, [T,F/tp]) */
    /* Zero Bubble's split: the output gradients of fc2, fc, proj and qkv, kept for the W unit (else NULL) */
    sw_tensor *wdy[4];
} gpt_saved;

static sw_ctx_config ctx_config(const sw_gpt_config *c)
{
    return (sw_ctx_config){.seq = c->seq, .batch = c->batch, .tp = c->tp, .sp = c->sp,
                           .tp_recompute_allgather = c->tp_recompute_allgather, .ulysses = c->ulysses,
                           .ring = c->ring, .zigzag = c->zigzag, .dp = c->dp, .grad_accum = c->grad_accum,
                           .tiles = c->tiles, .seed = c->seed, .dropout = c->dropout, .dw_last = c->dw_last,
                           .zero_bubble = c->zero_bubble};
}

static sw_attention_config attention_config(const sw_gpt_config *c)
{
    return (sw_attention_config){c->heads, c->kv_heads, c->hidden / c->heads, 1, c->dropout,
                                 c->recompute == SW_RECOMPUTE_NONE, specs[c->model].rope ? c->rope_theta : 0.0f, 0};
}

/* ---------------------------------------------------------- parameters */

/* In gpt.h order: token embedding (and learned positions), per block
 * norm1 qkv proj norm2 fc fc2, final norm (and an untied LM head).
 * N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), norms 1 (and 0),
 * biases 0. */
static void add_params(sw_gpt *m)
{
    const sw_gpt_config *c = &m->c;
    const decoder_spec *sp = m->spec;
    sw_ctx *x = &m->x;
    int64_t h = c->hidden, qkv = h + 2 * (int64_t)c->kv_heads * (h / c->heads), F = c->ffn;
    float std = 0.02f, res_std = 0.02f / sqrtf(2.0f * (float)c->layers);
    const int64_t *qkv_sizes;
    int nqkv = sw_attention_qkv_tiles(m->attn, &qkv_sizes);
    sw_slice qkv_slice = sw_attention_qkv_slice(m->attn, 0);
    m->emb = sw_embedding_add(x, c->vocab, c->vocab_padded, h, sp->rope ? 0 : c->max_pos, std);
    m->emb.tied = sp->tied; /* the LM head reads wte */
    for (int l = 0; l < c->layers; l++) {
        gpt_layer *L = &m->layer[l];
        char name[32];
        sw_params_set_unit(x->params, l);
#define NAME(k) (snprintf(name, sizeof name, "h%d.%s", l, sp->names[k]), name)
        L->ln1 = sw_norm_add(x, NAME(0), h, sp->rms, c->ln_eps);
        L->qkv = sw_linear_add(x, NAME(1), SW_LINEAR_COLUMN, h, qkv, sp->bias, std, &qkv_slice, nqkv, qkv_sizes);
        L->proj = sw_linear_add(x, NAME(2), SW_LINEAR_ROW, h, h, sp->bias, res_std, NULL, 0, NULL);
        L->ln2 = sw_norm_add(x, NAME(3), h, sp->rms, c->ln_eps);
        L->fc = sp->swiglu ? sw_linear_add_gated(x, NAME(4), h, F, std)
                           : sw_linear_add(x, NAME(4), SW_LINEAR_COLUMN, h, F, sp->bias, std, NULL, 0, NULL);
        L->fc2 = sw_linear_add(x, NAME(5), SW_LINEAR_ROW, F, h, sp->bias, res_std, NULL, 0, NULL);
#undef NAME
    }
    sw_params_set_unit(x->params, SW_UNIT_AFTER);
    m->lnf = sw_norm_add(x, sp->names[6], h, sp->rms, c->ln_eps);
    m->head_w = sp->tied ? m->emb.wte : sw_lm_head_add_weight(x, "lm_head", c->vocab, c->vocab_padded, h, std);
    if (sp->tied) sw_params_share(x->params, m->emb.wte, SW_UNIT_AFTER);
}

/* -------------------------------------------------------------- blocks */

static void block_keep(void *model, sw_saved *s)
{
    sw_gpt *m = model;
    sw_ctx *x = &m->x;
    gpt_saved *a = s->state;
    int64_t T = x->tokens, Tl = x->resid_rows, h = m->c.hidden, hf = m->c.ffn / m->c.tp;
    int gathered = m->c.tp > 1 && m->c.sp, ln = !m->spec->rms;
    /* the gathered norm outputs: kept, or gathered again in backward into a scratch */
    a->ln1 = sw_saved_new(s, "ln1", Tl, h);
    a->ln1_mean = ln ? sw_saved_new(s, "ln1_mean", Tl, 1) : NULL;
    a->ln1_rstd = sw_saved_new(s, "ln1_rstd", Tl, 1);
    a->ln1g = !gathered ? a->ln1 : m->c.tp_recompute_allgather ? sw_scratch(x, "gathered", T, h)
                                                              : sw_saved_new(s, "ln1_gathered", T, h);
    sw_attention_keep(m->attn, s, &a->attn);
    a->x_mid = sw_saved_new(s, "x_mid", Tl, h);
    a->ln2 = sw_saved_new(s, "ln2", Tl, h);
    a->ln2_mean = ln ? sw_saved_new(s, "ln2_mean", Tl, 1) : NULL;
    a->ln2_rstd = sw_saved_new(s, "ln2_rstd", Tl, 1);
    a->ln2g = !gathered ? a->ln2 : m->c.tp_recompute_allgather ? sw_scratch(x, "gathered", T, h)
                                                              : sw_saved_new(s, "ln2_gathered", T, h);
    a->fc = sw_saved_new(s, "fc", T, m->spec->swiglu ? 2 * hf : hf);
    a->act = sw_saved_new(s, m->spec->swiglu ? "fc_swiglu" : "fc_gelu", T, hf);
    if (x->c.zero_bubble) { /* what the W unit reads beside the inputs above (tp 1: l = T) */
        a->wdy[0] = sw_saved_new(s, "wdy_fc2", Tl, h);
        a->wdy[1] = sw_saved_new(s, "wdy_fc", T, m->spec->swiglu ? 2 * hf : hf);
        a->wdy[2] = sw_saved_new(s, "wdy_proj", Tl, h);
        a->wdy[3] = sw_saved_new(s, "wdy_qkv", T, sw_attention_qkv_cols(m->attn));
    }
}

/* y = x + attention block + MLP block; y NULL: stop after the activation
 * (full recomputation refilling a group's last block, whose output is kept) */
static void block_forward(void *model, int step, int l, sw_saved *s, sw_tensor *in, sw_tensor *y)
{
    sw_gpt *m = model;
    sw_ctx *x = &m->x;
    gpt_layer *L = &m->layer[l];
    gpt_saved *a = s->state;
    /* x_mid = x + dropout(proj(attention(qkv(ln1(x))))) */
    sw_norm_forward(x, &L->ln1, in, a->ln1, a->ln1_mean, a->ln1_rstd);
    sw_linear_forward(x, &L->qkv, a->ln1, a->ln1g, a->attn.qkv);
    sw_attention_forward(x, m->attn, step, l, &a->attn);
    sw_tensor *proj = sw_linear_row_forward(x, &L->proj, a->attn.att);
    sw_residual_forward(x, step, l, SW_DROP_ATTN_OUT, in, proj, a->x_mid);
    sw_gpt_mlp_forward(m, x, step, l, a->x_mid, a->ln2, a->ln2_mean, a->ln2_rstd, a->ln2g, a->fc, a->act, y);
}

/* y = x_mid + dropout(fc2(act(fc(ln2(x_mid))))), act GeLU or SwiGLU */
void sw_gpt_mlp_forward(sw_gpt *m, sw_ctx *x, int step, int l, sw_tensor *res, sw_tensor *ln2, sw_tensor *mean,
                        sw_tensor *rstd, sw_tensor *ln2g, sw_tensor *fc, sw_tensor *act, sw_tensor *y)
{
    gpt_layer *L = &m->layer[l];
    sw_norm_forward(x, &L->ln2, res, ln2, mean, rstd);
    sw_linear_forward(x, &L->fc, ln2, ln2g, fc);
    if (m->spec->swiglu) sw_swiglu_forward(x, fc, act);
    else sw_gelu_forward(x, fc, act);
    if (!y) return;
    sw_tensor *fc2 = sw_linear_row_forward(x, &L->fc2, act);
    sw_residual_forward(x, step, l, SW_DROP_MLP_OUT, res, fc2, y);
}

/* dres: the gradient of the block's output on entry, of its input on return */
static void block_backward(void *model, int step, int l, sw_saved *s, sw_tensor *in, sw_tensor *dres)
{
    sw_gpt *m = model;
    sw_ctx *x = &m->x;
    gpt_layer *L = &m->layer[l];
    gpt_saved *a = s->state;
    /* MLP */
    sw_tensor *dact = sw_scratch(x, "dact", x->tokens, a->act->cols), *dfc = dact;
    sw_linear_defer_weight_grads(x, a->wdy[0]); /* Zero Bubble's split: dW in the W unit (layers.h) */
    sw_linear_row_backward(x, &L->fc2, sw_residual_backward(x, step, l, SW_DROP_MLP_OUT, dres), a->act, dact);
    if (m->spec->swiglu) sw_swiglu_backward(x, a->fc, dact, dfc = sw_scratch(x, "dfc", x->tokens, a->fc->cols));
    else sw_gelu_backward(x, a->fc, dact); /* in place */
    sw_linear_defer_weight_grads(x, a->wdy[1]);
    sw_tensor *dln2 = sw_linear_backward(x, &L->fc, dfc, a->ln2, a->ln2g);
    sw_norm_backward(x, &L->ln2, dln2, a->x_mid, a->ln2_mean, a->ln2_rstd, dres, 1);
    /* attention */
    sw_tensor *datt = sw_scratch(x, "datt", x->tokens, sw_attention_out_cols(m->attn));
    sw_tensor *dqkv = sw_scratch(x, "dqkv", x->tokens, sw_attention_qkv_cols(m->attn));
    sw_linear_defer_weight_grads(x, a->wdy[2]);
    sw_linear_row_backward(x, &L->proj, sw_residual_backward(x, step, l, SW_DROP_ATTN_OUT, dres), a->attn.att, datt);
    sw_attention_backward(x, m->attn, step, l, &a->attn, datt, dqkv);
    sw_linear_defer_weight_grads(x, a->wdy[3]);
    sw_tensor *dln1 = sw_linear_backward(x, &L->qkv, dqkv, a->ln1, a->ln1g);
    sw_attention_sum_kv_grads(x, m->attn, &L->qkv);
    sw_norm_backward(x, &L->ln1, dln1, in, a->ln1_mean, a->ln1_rstd, dres, 1);
}

/* what the block sends; output 0: without fc2's reduction (y NULL) */
static void block_traffic(void *model, int l, int output, sw_traffic *t)
{
    sw_gpt *m = model;
    const sw_ctx *x = &m->x;
    const gpt_layer *L = &m->layer[l];
    sw_norm_traffic(x, &L->ln1, t);
    sw_linear_traffic(x, &L->qkv, t);
    sw_attention_traffic(x, m->attn, &L->qkv, t);
    sw_linear_traffic(x, &L->proj, t);
    sw_norm_traffic(x, &L->ln2, t);
    sw_linear_traffic(x, &L->fc, t);
    if (output) sw_linear_traffic(x, &L->fc2, t);
}

static const sw_block_ops block_ops = {block_keep, block_forward, block_backward, block_traffic, sizeof(gpt_saved)};

/* ------------------------------------- before and after the blocks */

/* x0 = embedding of the micro-batch's tokens (and learned positions) */
static void embed_forward(void *model, int step, sw_tensor *x0)
{
    sw_gpt *m = model;
    sw_embedding_forward(&m->x, &m->emb, step, m->tokens[m->x.micro], x0);
}

static void embed_backward(void *model, int step, sw_tensor *dx0)
{
    sw_gpt *m = model;
    sw_embedding_backward(&m->x, &m->emb, step, m->tokens[m->x.micro], dx0);
}

/* loss = cross-entropy(head(final norm(xL)), targets) */
static void head_forward(void *model, int step, sw_tensor *xL)
{
    sw_gpt *m = model;
    (void)step;
    /* the step's count of counted rows (an ignore index), from every micro-batch's targets, before any backward */
    if (m->x.micro == 0) sw_lm_head_count(&m->x, m->head, m->targets);
    sw_norm_forward(&m->x, &m->lnf, xL, m->lnf_out, m->lnf_mean, m->lnf_rstd);
    sw_lm_head_forward(&m->x, m->head, m->lnf_out, m->targets[m->x.micro]);
}

static void head_backward(void *model, int step, sw_tensor *xL, sw_tensor *dxL)
{
    sw_gpt *m = model;
    (void)step;
    sw_tensor *dlnf = sw_lm_head_backward(&m->x, m->head, m->targets[m->x.micro]);
    sw_norm_backward(&m->x, &m->lnf, dlnf, xL, m->lnf_mean, m->lnf_rstd, dxL, 0);
}

static sw_tensor *model_loss(void *model) { return sw_lm_head_loss(((sw_gpt *)model)->head); }

static void embed_traffic(void *model, sw_traffic *t)
{
    sw_gpt *m = model;
    sw_embedding_traffic(&m->x, &m->emb, t);
}

static void head_traffic(void *model, sw_traffic *t)
{
    sw_gpt *m = model;
    sw_norm_traffic(&m->x, &m->lnf, t);
    sw_lm_head_traffic(&m->x, m->head, t);
}

static const sw_model_ops model_ops = {embed_forward, embed_backward, head_forward, head_backward,
                                       model_loss, embed_traffic, head_traffic, NULL};

/* --------------------------------------------------------------- model */

static sw_blocks_config blocks_config(const sw_gpt *m)
{
    const sw_gpt_config *c = &m->c;
    return (sw_blocks_config){.layers = c->layers, .rows = m->x.resid_rows, .cols = c->hidden, .recompute = c->recompute,
                              .recompute_every = c->recompute_every, .offload = c->offload};
}

/* The bytes this rank is certain to hold (sw_gpt_memory_model). */
static sw_gpt_memory memory_model(sw_gpt *m)
{
    const sw_gpt_config *c = &m->c;
    sw_blocks_config bc = blocks_config(m);
    sw_gpt_memory r = {.state = sw_params_bytes(m->params), .pool = sw_params_pool_bytes(m->params),
                       .buckets = sw_params_buckets_bytes(m->params)};
    /* this stage's chunks of blocks with the micro slots of its quota (sw_pipeline_create's), less one
     * residual gradient (counted below) */
    r.saved = sw_pipeline_blocks_bytes(&m->x, &bc, &block_ops, m, c->pp_inflight) - 4.0 * (double)bc.rows * (double)bc.cols;
    /* the tensors of the stage beside them: the blocks' residual gradient, every micro-batch's tokens and
     * targets, the loss (the last stage's head holds it); on the last stage the final norm's output and
     * statistics and the LM head's (sw_lm_head_bytes) */
    const sw_ctx *x = &m->x;
    r.other = 4.0 * x->resid_rows * c->hidden + 8.0 * c->grad_accum * x->tokens + 4.0;
    if (sw_params_runs_unit(m->params, SW_UNIT_AFTER)) {
        r.logits = 4.0 * x->tokens * (double)(c->vocab_padded / c->tp);
        r.other += 4.0 * x->resid_rows * (c->hidden + 2) + sw_lm_head_bytes(x, c->vocab_padded, c->hidden, c->ignore_index) - r.logits - 4.0;
    }
    r.need = r.state + r.saved + r.logits + r.other;
    r.scratch = sw_scratch_bytes(&m->x);
    return r;
}

sw_gpt_memory sw_gpt_memory_model(const sw_gpt *m) { return memory_model((sw_gpt *)m); /* reads only */ }

/* Refuses, before any allocation, a model whose certain bytes per rank --
 * parameter state, saved activations of this stage's blocks for the
 * micro-batches it holds at once (unless offloaded), logits (last stage)
 * -- exceed the memory this rank may count on (the memory budget, where
 * one is given), and an offload budget that cannot hold the saved
 * activations of the block in backward and of the one prefetched
 * (sw_blocks_check_offload_budget: with less, StarPU finds no room for the
 * collectives' buffers and waits forever). */
static void refuse_unless_fits(sw_gpt *m)
{
    sw_blocks_config bc = blocks_config(m);
    sw_blocks_check_offload_budget(&bc, &block_ops, m); /* the blocks' rule, before anything is allocated */
    /* every rank's figures (stages differ), so that all refuse together, for the rank short of the most */
    sw_gpt_memory r = memory_model(m);
    enum { N = 6 };
    double mine[N] = {r.need, r.state, r.saved, r.logits, sw_memory_available_per_rank(), r.other}, *all = mine;
    int world = sw_world_size(), worst = -1;
    if (world > 1) {
        all = sw_xcalloc((size_t)world * N, sizeof *all);
        SW_CHECK(MPI_Allgather(mine, N, MPI_DOUBLE, all, N, MPI_DOUBLE, MPI_COMM_WORLD));
    }
    for (int k = 0; k < world; k++) {
        const double *f = all + N * k;
        if (f[4] > 0 && f[0] > f[4] && (worst < 0 || f[0] - f[4] > all[N * worst] - all[N * worst + 4])) worst = k;
    }
    double f[N];
    if (worst >= 0) memcpy(f, all + N * worst, sizeof f);
    if (all != mine) free(all);
    if (worst >= 0)
        sw_usage_error("the model needs at least %.1f MiB on rank %d (parameters, gradients and AdamW moments %.1f "
                       "MiB, saved activations %.1f MiB, logits %.1f MiB, other tensors %.1f MiB), more than the "
                       "%.1f MiB %s: reduce seq, batch, layers or hidden, split it over more ranks (tp, ulysses, "
                       "ring, dp, pp), shard it (--zero 3), or use --recompute full or --offload",
                       f[0] / SW_MIB, worst, f[1] / SW_MIB, f[2] / SW_MIB, f[3] / SW_MIB, f[5] / SW_MIB, f[4] / SW_MIB,
                       sw_memory_budget_mb() > 0 && f[4] >= sw_memory_budget_mb() * SW_MIB
                           ? "of the memory budget per rank (--memory-budget-mb)"
                           : "of main RAM available to each rank of this node");
}

/* The model described -- configuration checked, registry filled, layers
 * configured -- with nothing allocated yet. */
static sw_gpt *model_described(const sw_gpt_config *cfg, sw_comm *comm)
{
    sw_gpt *m = sw_xcalloc(1, sizeof *m);
    m->c = *cfg;
    char msg[256];
    if (sw_gpt_config_check(&m->c, msg, sizeof msg) != 0) sw_usage_error("%s", msg);
    const sw_gpt_config *c = &m->c;
    m->spec = &specs[c->model];
    if (c->offload && sw_offload_node() < 0)
        sw_usage_error("offload needs an offload memory node (sw_init with sw_options.offload = 1; gpt_train --offload)");
    int ulysses_ring = c->ulysses * c->ring > 1;
    sw_params_config pc = {c->seed, c->tiles, c->dtype, c->grad_accum, c->bucket_mb, c->zero,
                           ulysses_ring ? SW_GROUP_SP_DP : SW_GROUP_DP, c->lr, c->beta1, c->beta2, c->adam_eps,
                           c->weight_decay, c->clip_grad, c->zero_prefetch + 1, c->pp_virtual};
    int stages = comm ? sw_mesh_size(sw_comm_mesh(comm), SW_GROUP_PP) : 1;
    if (stages != c->pp) sw_usage_error("pp (%d) must equal the mesh's pipeline stages (%d)", c->pp, stages);
    m->params = sw_params_new(&pc, comm);
    sw_ctx_config xc = ctx_config(c);
    sw_ctx_init(&m->x, &xc, comm, m->params);
    sw_attention_config ac = attention_config(c);
    m->attn = sw_attention_create(&m->x, &ac);
    m->layer = sw_xcalloc((size_t)c->layers, sizeof *m->layer);
    add_params(m);
    return m;
}

static void model_undescribed(sw_gpt *m)
{
    sw_attention_destroy(m->attn);
    sw_ctx_destroy(&m->x);
    sw_params_destroy(m->params);
    free(m->layer);
    free(m);
}

sw_gpt_memory sw_gpt_memory_plan(const sw_gpt_config *cfg, sw_comm *comm)
{
    sw_gpt *m = model_described(cfg, comm);
    refuse_unless_fits(m);
    sw_gpt_memory r = memory_model(m);
    model_undescribed(m);
    return r;
}

void sw_gpt_plan_rank(const sw_gpt_config *cfg, int rank, sw_gpt_memory *mem, sw_traffic *t)
{
    sw_mesh_dims d = {cfg->tp, cfg->ulysses, cfg->ring, cfg->dp, cfg->pp};
    sw_mesh *mesh = sw_mesh_virtual(&d, rank);
    sw_comm *comm = sw_comm_virtual(mesh);
    sw_gpt *m = model_described(cfg, comm);
    const sw_gpt_config *c = &m->c;
    if (mem) *mem = memory_model(m);
    if (t) { /* sw_pipeline_traffic's sum for this rank's stage, on the described model */
        memset(t, 0, sizeof *t);
        int pp = c->pp, stage = sw_mesh_stage(mesh), V = c->pp_virtual > 1 ? c->pp_virtual : 1, K = c->grad_accum;
        int first = stage == 0, last = stage == pp - 1;
        if (first) embed_traffic(m, t);
        for (int k = 0; k < K; k++) {
            if (first) sw_params_gather_traffic(m->params, SW_UNIT_BEFORE, 0, t);
            if (first) sw_params_gather_traffic(m->params, SW_UNIT_BEFORE, 1, t);
            if (last) sw_params_gather_traffic(m->params, SW_UNIT_AFTER, 1, t);
        }
        sw_blocks_config bc = blocks_config(m);
        double boundary = sw_comm_bytes(comm, SW_GROUP_PP, SW_COLL_SEND, bc.rows, bc.cols);
        for (int v = 0; v < V; v++) {
            int j = v * pp + stage;
            sw_blocks_config b = bc;
            b.count = c->layers / (pp * V);
            b.first = j * b.count;
            b.params = m->params;
            sw_blocks_traffic(&b, &block_ops, m, t);
            if (j < pp * V - 1) t->forward[SW_GROUP_PP] += K * boundary;
            if (j > 0) t->backward[SW_GROUP_PP] += K * boundary;
        }
        if (last) {
            /* described, not created: the logits of a model planned for a bigger machine would not fit here */
            m->head = sw_lm_head_describe(&m->x, m->head_w, c->vocab, c->vocab_padded);
            sw_lm_head_set_ignore_index(m->head, c->ignore_index);
            head_traffic(m, t);
            sw_lm_head_destroy(m->head);
            m->head = NULL;
            t->backward[SW_GROUP_PP] += (pp - 1) * sw_comm_bytes(comm, SW_GROUP_PP, SW_COLL_SEND, 1, 1);
        }
        sw_params_traffic(m->params, t);
    }
    model_undescribed(m);
    sw_comm_destroy(comm);
    sw_mesh_destroy(mesh);
}

sw_gpt *sw_gpt_create(const sw_gpt_config *cfg, sw_comm *comm)
{
    sw_gpt *m = model_described(cfg, comm);
    const sw_gpt_config *c = &m->c;
    refuse_unless_fits(m);
    sw_params_allocate(m->params);
    const sw_ctx *x = &m->x;
    m->tokens = sw_xcalloc((size_t)c->grad_accum, sizeof *m->tokens);
    m->targets = sw_xcalloc((size_t)c->grad_accum, sizeof *m->targets);
    for (int k = 0; k < c->grad_accum; k++) {
        char name[32];
        snprintf(name, sizeof name, k ? "tokens%d" : "tokens", k);
        m->tokens[k] = sw_tensor_new2d(name, SW_I32, x->tokens, 1);
        snprintf(name, sizeof name, k ? "targets%d" : "targets", k);
        m->targets[k] = sw_tensor_new2d(name, SW_I32, x->tokens, 1);
    }
    sw_blocks_config bc = blocks_config(m);
    m->pipe = sw_pipeline_create(&m->x, &bc, &block_ops, &model_ops, m, c->pp_inflight);
    m->blocks = sw_pipeline_blocks(m->pipe);
    if (sw_params_runs_unit(m->params, SW_UNIT_AFTER)) {
        m->lnf_out = sw_tensor_new2d("lnf", SW_F32, x->resid_rows, c->hidden);
        m->lnf_mean = sw_tensor_new2d("lnf_mean", SW_F32, x->resid_rows, 1);
        m->lnf_rstd = sw_tensor_new2d("lnf_rstd", SW_F32, x->resid_rows, 1);
        m->head = sw_lm_head_create(&m->x, m->head_w, c->vocab, c->vocab_padded, c->hidden);
        sw_lm_head_set_ignore_index(m->head, c->ignore_index);
    }
    return m;
}

void sw_gpt_destroy(sw_gpt *m)
{
    if (!m) return;
    sw_pipeline_destroy(m->pipe);
    sw_lm_head_destroy(m->head);
    sw_tensor *t[] = {m->lnf_out, m->lnf_mean, m->lnf_rstd};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) sw_tensor_free(t[i]);
    for (int k = 0; k < m->c.grad_accum; k++) sw_tensor_free(m->tokens[k]), sw_tensor_free(m->targets[k]);
    free(m->tokens);
    free(m->targets);
    model_undescribed(m);
}

void sw_gpt_step(sw_gpt *m, int step) { sw_pipeline_step(m->pipe, step); }

/* One micro-batch on the whole model (no pipeline stages): the driver's
 * forward and backward of one micro-batch, for programs that look between
 * them (the reference tests). */
static void one_stage_only(const sw_gpt *m, const char *what)
{
    if (m->c.pp > 1)
        sw_usage_error("%s runs one micro-batch through the whole model: with pp %d, submit whole steps (sw_gpt_step)",
                       what, m->c.pp);
}

void sw_gpt_forward(sw_gpt *m, int step)
{
    sw_ctx *x = &m->x;
    one_stage_only(m, "sw_gpt_forward");
    sw_trace_set_phase(SW_PHASE_FORWARD, -1); /* trace labels; no-ops when tracing is off */
    if (x->micro == 0) sw_params_cast_bf16(m->params); /* bf16: the GEMMs' weights, as they are now */
    /* ZeRO-3: what comes before and after the blocks gathered around them, as the step driver does
     * (the blocks gather their own); the head here apart from its backward, so gathered twice */
    sw_params_gather_unit(m->params, SW_UNIT_BEFORE, 0);
    embed_forward(m, step, sw_blocks_input(m->blocks));
    sw_params_release_unit(m->params, SW_UNIT_BEFORE, 0);
    sw_blocks_forward(m->blocks, step);
    sw_params_gather_unit(m->params, SW_UNIT_AFTER, 0);
    head_forward(m, step, sw_blocks_output(m->blocks));
    sw_params_release_unit(m->params, SW_UNIT_AFTER, 0);
}

void sw_gpt_backward(sw_gpt *m, int step)
{
    sw_ctx *x = &m->x;
    sw_tensor *dres = sw_blocks_grad(m->blocks);
    one_stage_only(m, "sw_gpt_backward");
    sw_trace_set_phase(SW_PHASE_BACKWARD, -1);
    sw_params_gather_unit(m->params, SW_UNIT_AFTER, 1);
    head_backward(m, step, sw_blocks_output(m->blocks), dres);
    sw_params_release_unit(m->params, SW_UNIT_AFTER, 1);
    sw_blocks_backward(m->blocks, step);
    sw_params_gather_unit(m->params, SW_UNIT_BEFORE, 1);
    embed_backward(m, step, dres);
    sw_params_release_unit(m->params, SW_UNIT_BEFORE, 1);
    sw_params_reduce_grads(m->params, x->micro);
    /* the scratch is dead until the next step (as the driver does it) */
    if (x->micro == x->c.grad_accum - 1) sw_scratch_invalidate(x), sw_tensor_invalidate(dres);
}

void sw_gpt_update(sw_gpt *m, int step) { sw_params_update(m->params, step); }

/* ------------------------------------------------------------ accessors */

const sw_gpt_config *sw_gpt_get_config(const sw_gpt *m) { return &m->c; }
sw_params *sw_gpt_params(sw_gpt *m) { return m->params; }

int sw_gpt_checkpoint_fields(const sw_gpt *m, sw_ckpt_field out[8])
{
    const sw_gpt_config *c = &m->c;
    const sw_ckpt_field f[] = {{"model", c->model}, {"layers", c->layers}, {"hidden", c->hidden},
                               {"heads", c->heads}, {"kv-heads", c->kv_heads}, {"ffn", c->ffn},
                               {"padded vocabulary", c->vocab_padded}, {"max-pos", c->max_pos}};
    memcpy(out, f, sizeof f);
    return (int)(sizeof f / sizeof f[0]);
}
sw_tensor *sw_gpt_param(sw_gpt *m, int i) { return sw_params_value(m->params, i); }
sw_tensor *sw_gpt_grad(sw_gpt *m, int i) { return sw_params_grad(m->params, i); }
sw_tensor *sw_gpt_reduced_grad(sw_gpt *m, int i, int64_t *first_row) { return sw_params_reduced_grad(m->params, i, first_row); }
sw_tensor *sw_gpt_adam_m(sw_gpt *m, int i) { return sw_params_adam_m(m->params, i); }
sw_tensor *sw_gpt_adam_v(sw_gpt *m, int i) { return sw_params_adam_v(m->params, i); }
sw_tensor *sw_gpt_tokens(sw_gpt *m) { return m->tokens[m->x.micro]; }
sw_tensor *sw_gpt_targets(sw_gpt *m) { return m->targets[m->x.micro]; }
sw_tensor *sw_gpt_loss(sw_gpt *m) { return sw_pipeline_loss(m->pipe); }
sw_pipeline *sw_gpt_pipeline(sw_gpt *m) { return m->pipe; }
double sw_gpt_attention_flops(const sw_gpt *m) { return sw_attention_flops(m->attn); }
int64_t sw_gpt_position(const sw_gpt *m, int64_t i) { return sw_ctx_position(&m->x, i); }
void sw_gpt_set_micro_batch(sw_gpt *m, int k) { sw_ctx_set_micro_batch(&m->x, k); }
int sw_gpt_micro_batch_size(const sw_gpt *m) { return m->x.B; }
int sw_gpt_micro_batch_first(const sw_gpt *m, int k) { return sw_ctx_micro_batch_first(&m->x, k); }

void sw_gpt_traffic(sw_gpt *m, sw_traffic *t) { sw_pipeline_traffic(m->pipe, t); }

sw_block_memory sw_gpt_saved_bytes(const sw_gpt *m, int layer)
{
    return sw_blocks_saved_bytes(sw_pipeline_chunk(m->pipe, sw_params_unit_chunk(m->params, layer)), layer);
}

void sw_gpt_load_micro_batch(sw_gpt *m, int k, const int32_t *tok, const int32_t *tgt)
{
    const sw_gpt_config *c = &m->c;
    if (k < 0 || k >= c->grad_accum)
        sw_usage_error("sw_gpt_load_micro_batch: micro-batch %d is outside [0, grad-accum %d)", k, c->grad_accum);
    /* the whole global batch, the same on every rank: every rank refuses
     * alike (an id outside the vocabulary would read another row of wte, or
     * none, and give a plausible, wrong loss) */
    for (int64_t i = 0; i < (int64_t)c->seq * c->batch; i++)
        if (tok[i] < 0 || tok[i] >= c->vocab || ((tgt[i] < 0 || tgt[i] >= c->vocab) && tgt[i] != c->ignore_index))
        {
            const int bad_tok = tok[i] < 0 || tok[i] >= c->vocab;
            char ign[64] = "";
            if (!bad_tok && c->ignore_index != SW_CE_IGNORE_NONE)
                snprintf(ign, sizeof ign, " and is not the ignore index %d", c->ignore_index);
            sw_usage_error("sw_gpt_load_micro_batch: %s %d at position %lld of sequence %lld is outside [0, vocab %d)%s",
                           bad_tok ? "token" : "target", bad_tok ? tok[i] : tgt[i], (long long)(i / c->batch),
                           (long long)(i % c->batch), c->vocab, ign);
        }
    sw_ctx_load_tokens(&m->x, k, tok, tgt, m->tokens[k], m->targets[k]);
}

float sw_gpt_read_loss(sw_gpt *m)
{
    float loss;
    sw_tensor_read_host(sw_gpt_loss(m), &loss);
    return loss;
}

/* ------------------------------------------- parameter layout by config */

/* The registry's descriptions for TP rank r, without a runtime: the same
 * add_params on a context that only knows the TP place and the tiling. */
static sw_params *describe(const sw_gpt_config *cfg, int r)
{
    sw_gpt m;
    memset(&m, 0, sizeof m);
    m.c = *cfg;
    char msg[256];
    if (sw_gpt_config_check(&m.c, msg, sizeof msg) != 0) sw_usage_error("%s", msg);
    m.spec = &specs[m.c.model];
    sw_params_config pc = {0};
    m.params = sw_params_new(&pc, NULL);
    m.x.params = m.params;
    m.x.tp = (sw_tp){NULL, m.c.tp, r, m.c.sp};
    m.x.ulysses = m.c.ulysses, m.x.row_tiles = m.c.tiles;
    sw_attention_config ac = attention_config(&m.c);
    m.attn = sw_attention_create(&m.x, &ac);
    m.layer = sw_xcalloc((size_t)m.c.layers, sizeof *m.layer);
    add_params(&m);
    free(m.layer);
    sw_attention_destroy(m.attn);
    return m.params;
}

int sw_gpt_num_params(const sw_gpt_config *c)
{
    return c->model == SW_MODEL_LLAMA ? 1 + SW_LLAMA_LAYER_PARAMS * c->layers + 2 : 2 + SW_GPT_LAYER_PARAMS * c->layers + 2;
}

void sw_gpt_param_shape(const sw_gpt_config *c, int index, int64_t *rows, int64_t *cols, char *name, size_t namelen)
{
    sw_params *p = describe(c, 0);
    const sw_param_desc *d = sw_params_desc(p, index);
    *rows = d->rows, *cols = d->cols;
    snprintf(name, namelen, "%s", d->name);
    sw_params_destroy(p);
}

void sw_gpt_local_shape(const sw_gpt_config *c, int tp_rank, int index, int64_t *rows, int64_t *cols)
{
    sw_params *p = describe(c, tp_rank);
    sw_slice_shape(sw_params_desc(p, index), rows, cols);
    sw_params_destroy(p);
}

void sw_gpt_slice(const sw_gpt_config *c, int tp_rank, int index, const float *global, float *local)
{
    sw_params *p = describe(c, tp_rank);
    sw_slice_extract(sw_params_desc(p, index), global, local);
    sw_params_destroy(p);
}
