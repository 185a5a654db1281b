/* A BERT-style encoder from the public headers: learned positions, pre-LN blocks, bidirectional attention, a pooled
 * head (heads.h) with MSE on a per-sequence float target, or (--classes C) cross-entropy over C classes; --pool-first
 * pools the first token, not the mean; --per-token: a linear on every row, MSE per token (sw_row_mse); --pad [ID]:
 * padded sequences (keys masked, the mean over the valid positions); --per-token-gathered: the per-token linear on
 * all T rows of this rank's tokens (the final norm's l rows gathered over TP under sp: every TP rank holds the same
 * rows, so its gradient is not summed over TP -- the layer tells from the rows), the MSE on this rank's l of them. Every strategy comes from the layers:
 * mpirun -np 4 encoder_regress --tp 2 --sp --dp 2 (or --ulysses 2 --ring 2, --micro K). Prints the gradient norm before
 * clipping per step, then "grad NAME sumsq abssum" of each parameter's
 * clipped gradient from the ranks holding distinct parts of it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <starweave.h>
#include "cli.h"
#include "train_loop.h"

enum { LAYERS = 2, HIDDEN = 64, HEADS = 4, VOCAB = 256, SEQ = 32, BATCH = 8, OUT = 4 /* --per-token */ };

typedef struct { sw_norm ln1, ln2; sw_linear qkv, proj, fc, fc2; } block_params;
typedef struct { sw_tensor *n1, *m1, *r1, *n1g, *mid, *n2, *m2, *r2, *n2g, *u, *a; sw_attn_saved attn; } block_saved;

typedef struct model {
    sw_ctx x; sw_params *p; sw_attention *attn; sw_embedding emb;
    block_params blk[LAYERS]; sw_norm final_norm;
    sw_seq_head *head;                       /* pooling, the head, its loss: heads.h; or per token: */
    sw_linear tok_head; sw_row_mse *rows; sw_tensor *pred; /* a replicated linear on the rows, MSE per row */
    int gathered; sw_tensor *nfg, *predg, *dpredg, *dnf;       /* --per-token-gathered (with tp and sp): on the T rows */
    sw_pipeline *pipe; sw_tensor *tokens[BATCH], *targets[BATCH], *nf, *nf_mean, *nf_rstd; /* per micro-batch */
    const int32_t *tok, *len, *cls; const float *y, *yt; int pad, classes; /* the batch (every step the same) */
} model;

static void keep(void *mp, sw_saved *s)
{
    model *m = mp; block_saved *k = s->state;
    int64_t T = m->x.T, l = m->x.Tl, f = 4 * HIDDEN / m->x.tp.t, sp = m->x.tp.t > 1 && m->x.c.sp;
    k->n1 = sw_saved_new(s, "n1", l, HIDDEN), k->m1 = sw_saved_new(s, "m1", l, 1), k->r1 = sw_saved_new(s, "r1", l, 1);
    k->n1g = sp ? sw_saved_new(s, "n1_gathered", T, HIDDEN) : k->n1;
    k->mid = sw_saved_new(s, "mid", l, HIDDEN);
    k->n2 = sw_saved_new(s, "n2", l, HIDDEN), k->m2 = sw_saved_new(s, "m2", l, 1), k->r2 = sw_saved_new(s, "r2", l, 1);
    k->n2g = sp ? sw_saved_new(s, "n2_gathered", T, HIDDEN) : k->n2;
    k->u = sw_saved_new(s, "fc", T, f), k->a = sw_saved_new(s, "act", T, f);
    sw_attention_keep(m->attn, s, &k->attn);
}

/* y = h + mlp(ln2(h)), h = x + attention(ln1(x)) */
static void forward(void *mp, int step, int l, sw_saved *s, sw_tensor *in, sw_tensor *y)
{
    model *m = mp; sw_ctx *x = &m->x; block_params *b = &m->blk[l]; block_saved *k = s->state;
    sw_norm_forward(x, &b->ln1, in, k->n1, k->m1, k->r1);
    sw_linear_forward(x, &b->qkv, k->n1, k->n1g, k->attn.qkv);
    sw_attention_forward(x, m->attn, step, l, &k->attn);
    sw_residual_forward(x, step, l, SW_DROP_ATTN_OUT, in, sw_linear_row_forward(x, &b->proj, k->attn.att), k->mid);
    sw_norm_forward(x, &b->ln2, k->mid, k->n2, k->m2, k->r2);
    sw_linear_forward(x, &b->fc, k->n2, k->n2g, k->u);
    sw_gelu_forward(x, k->u, k->a);
    if (y) sw_residual_forward(x, step, l, SW_DROP_MLP_OUT, k->mid, sw_linear_row_forward(x, &b->fc2, k->a), y);
}

static void backward(void *mp, int step, int l, sw_saved *s, sw_tensor *in, sw_tensor *dres)
{
    model *m = mp; sw_ctx *x = &m->x; block_params *b = &m->blk[l]; block_saved *k = s->state;
    sw_tensor *dact = sw_scratch(x, "dact", x->T, k->a->cols), *datt = sw_scratch(x, "datt", x->T, sw_attention_out_cols(m->attn));
    sw_tensor *dqkv = sw_scratch(x, "dqkv", x->T, sw_attention_qkv_cols(m->attn));
    sw_linear_row_backward(x, &b->fc2, sw_residual_backward(x, step, l, SW_DROP_MLP_OUT, dres), k->a, dact);
    sw_gelu_backward(x, k->u, dact);
    sw_norm_backward(x, &b->ln2, sw_linear_backward(x, &b->fc, dact, k->n2, k->n2g), k->mid, k->m2, k->r2, dres, 1);
    sw_linear_row_backward(x, &b->proj, sw_residual_backward(x, step, l, SW_DROP_ATTN_OUT, dres), k->attn.att, datt);
    sw_attention_backward(x, m->attn, step, l, &k->attn, datt, dqkv);
    sw_norm_backward(x, &b->ln1, sw_linear_backward(x, &b->qkv, dqkv, k->n1, k->n1g), in, k->m1, k->r1, dres, 1);
}

static void traffic(void *mp, int l, int output, sw_traffic *t)
{
    model *m = mp; block_params *b = &m->blk[l];
    sw_norm_traffic(&m->x, &b->ln1, t), sw_norm_traffic(&m->x, &b->ln2, t), sw_attention_traffic(&m->x, m->attn, &b->qkv, t);
    sw_linear_traffic(&m->x, &b->qkv, t), sw_linear_traffic(&m->x, &b->proj, t), sw_linear_traffic(&m->x, &b->fc, t);
    if (output) sw_linear_traffic(&m->x, &b->fc2, t);
}
static const sw_block_ops ops = {keep, forward, backward, traffic, sizeof(block_saved)};

static void embed(void *mp, int step, sw_tensor *x0)
{
    sw_embedding_forward(&((model *)mp)->x, &((model *)mp)->emb, step, ((model *)mp)->tokens[((model *)mp)->x.micro], x0);
}
static void embed_backward(void *mp, int step, sw_tensor *dx0)
{
    sw_embedding_backward(&((model *)mp)->x, &((model *)mp)->emb, step, ((model *)mp)->tokens[((model *)mp)->x.micro], dx0);
}
/* the final norm, the pooled head and its loss (or the per-token linear and MSE) */
static void head(void *mp, int step, sw_tensor *xL)
{
    model *m = mp; sw_tensor *tg = m->targets[m->x.micro]; (void)step;
    sw_norm_forward(&m->x, &m->final_norm, xL, m->nf, m->nf_mean, m->nf_rstd);
    if (m->gathered) { /* T rows: the l rows gathered over TP; the loss on this rank's l of the predictions */
        sw_tensor *in = sw_tp_f_forward(&m->x.tp, m->nf, m->nfg);
        sw_linear_forward(&m->x, &m->tok_head, in, in, m->predg);
        sw_copy(sw_tensor_whole(m->pred, STARPU_W), sw_tensor_tiles(m->predg, SW_ROWS, m->x.tp.t, STARPU_R)[m->x.tp.rank]);
        sw_row_mse_forward(&m->x, m->rows, m->pred, tg);
    } else if (m->rows) sw_linear_forward(&m->x, &m->tok_head, m->nf, m->nf, m->pred), sw_row_mse_forward(&m->x, m->rows, m->pred, tg);
    else sw_seq_head_forward(&m->x, m->head, m->nf, tg);
}
/* --per-token-gathered's backward: every TP rank gets the gradient of all T predictions (an all-gather), so the
 * linear's weight gradient is whole on each (no sum over TP: T rows); this rank's l rows of its input gradient */
static sw_tensor *gathered_backward(model *m, sw_tensor *tg)
{
    sw_tensor *dpred = sw_row_mse_backward(&m->x, m->rows, m->pred, tg), *in = m->nfg;
    sw_tensor *dall = sw_tp_g_backward(&m->x.tp, dpred, m->dpredg);
    sw_tensor *din = sw_linear_backward(&m->x, &m->tok_head, dall, in, in);
    sw_copy(sw_tensor_whole(m->dnf, STARPU_W), sw_tensor_tiles(din, SW_ROWS, m->x.tp.t, STARPU_R)[m->x.tp.rank]);
    return m->dnf;
}
static void head_backward(void *mp, int step, sw_tensor *xL, sw_tensor *dxL)
{
    model *m = mp; sw_tensor *tg = m->targets[m->x.micro]; (void)step;
    sw_tensor *dnf = m->gathered ? gathered_backward(m, tg) : m->rows ? sw_linear_backward(&m->x, &m->tok_head, sw_row_mse_backward(&m->x, m->rows, m->pred, tg), m->nf, m->nf)
                             : sw_seq_head_backward(&m->x, m->head, tg);
    sw_norm_backward(&m->x, &m->final_norm, dnf, xL, m->nf_mean, m->nf_rstd, dxL, 0);
}
static sw_tensor *loss(void *mp) { return ((model *)mp)->rows ? sw_row_mse_loss(((model *)mp)->rows) : sw_seq_head_loss(((model *)mp)->head); }
static void embed_traffic(void *mp, sw_traffic *t) { sw_embedding_traffic(&((model *)mp)->x, &((model *)mp)->emb, t); }
static void head_traffic(void *mp, sw_traffic *t)
{
    model *m = mp; sw_norm_traffic(&m->x, &m->final_norm, t);
    m->rows ? sw_linear_traffic(&m->x, &m->tok_head, t), sw_row_mse_traffic(&m->x, m->rows, t) : sw_seq_head_traffic(&m->x, m->head, t);
    if (m->gathered) /* the input's all-gather forward, the predictions' gradient's backward, per micro-batch */
        t->forward[SW_GROUP_TP] += m->x.c.grad_accum * sw_tp_bytes(&m->x.tp, SW_TP_F_FORWARD, m->x.T, HIDDEN),
        t->backward[SW_GROUP_TP] += m->x.c.grad_accum * sw_tp_bytes(&m->x.tp, SW_TP_G_BACKWARD, m->x.T, OUT);
}
static const sw_model_ops model_ops = {embed, embed_backward, head, head_backward, loss, embed_traffic, head_traffic, NULL};

/* the training loop's part (train_loop.h): every micro-batch's tokens, key lengths (--pad), targets */
static void load(void *mp, int step)
{
    model *m = mp; (void)step;
    for (int k = 0; k < m->x.c.grad_accum; k++)
        sw_ctx_load_tokens(&m->x, k, m->tok, NULL, m->tokens[k], NULL), m->pad ? sw_ctx_load_key_lengths(&m->x, k, m->len) : (void)0,
        m->rows ? sw_ctx_load_floats(&m->x, k, m->yt, OUT, m->targets[k])
                : sw_ctx_load_seq_targets(&m->x, k, m->classes ? (const void *)m->cls : (const void *)m->y, m->targets[k]);
}

int main(int argc, char **argv)
{
    int steps, tp, sp = 0, dp, ulysses, ring, micro, classes, pool_first = 0, per_token = 0, gathered = 0, pad = 0;
    const cli_flag flags[] = {
        CLI_INT("--steps", &steps, "20", 1, CLI_INT_MAX, "N", "training steps"),
        CLI_INT("--tp", &tp, "1", 1, CLI_INT_MAX, "T", "tensor-parallel degree"),
        CLI_BOOL("--sp", &sp, "sequence parallelism (with --tp)"),
        CLI_INT("--dp", &dp, "1", 1, CLI_INT_MAX, "D", "data-parallel degree"),
        CLI_INT("--ulysses", &ulysses, "1", 1, CLI_INT_MAX, "U", "DeepSpeed-Ulysses degree"),
        CLI_INT("--ring", &ring, "1", 1, CLI_INT_MAX, "R", "Ring attention degree"),
        CLI_INT("--micro", &micro, "1", 1, CLI_INT_MAX, "K", "micro-batches per step; K x dp must divide the batch of 8"),
        CLI_INT("--classes", &classes, "0", 0, CLI_INT_MAX, "C", "cross-entropy over C >= 2 classes (0: MSE on a float target)"),
        CLI_BOOL("--pool-first", &pool_first, "pool the first token, not the mean"),
        CLI_BOOL("--per-token", &per_token, "a linear on every row, MSE per token (not with --classes)"),
        CLI_BOOL("--per-token-gathered", &gathered, "--per-token on the rows gathered over the ranks (all T rows)"),
        CLI_INT_OPT("--pad", &pad, "1", 0, VOCAB - 1, "ID",
                    "padded sequences: sequence b's tokens from position 32 - (b*7 mod 16)\n"
                    "on are the token ID (1 when not given; 0: none), keys masked"),
        CLI_END};
    cli_parse("encoder_regress", "[mpirun -np N] encoder_regress [options]",
              "A BERT-style encoder with a pooled head (MSE, or cross-entropy over classes).\n"
              "Every strategy comes from the layers: mpirun -np 4 encoder_regress --tp 2 --sp --dp 2.\n", flags, argc, argv);
    per_token = per_token || gathered;
    sw_ctx_config xc = {.seq = SEQ, .batch = BATCH, .tp = tp, .sp = sp, .ulysses = ulysses, .ring = ring, .zigzag = 1,
                        .dp = dp, .grad_accum = micro, .tiles = 4, .seed = 1234, .dropout = 0.1f};
    if (sw_init(&argc, &argv, NULL) != 0) return 1;
    if (micro < 1 || BATCH % (dp * micro)) sw_usage_error("--micro (%d) times --dp (%d) must divide the batch (%d)", micro, dp, BATCH);
    if (classes == 1 || classes < 0 || (classes && per_token)) sw_usage_error("--classes (%d) must be at least 2, without --per-token", classes);
    sw_mesh *mesh = sw_mesh_create(&(sw_mesh_dims){.tp = tp, .ulysses = xc.ulysses, .ring = xc.ring, .dp = dp, .pp = 1});
    sw_comm *world = sw_comm_create(mesh), *comm = sw_world_size() > 1 ? world : NULL; /* NULL: one rank */
    sw_params_config pc = {.seed = 1234, .tiles = 4, .dtype = SW_F32, .grad_accum = micro, .bucket_mb = 25.0f,
                           .grad_group = xc.ulysses * xc.ring > 1 ? SW_GROUP_SP_DP : SW_GROUP_DP,
                           .lr = 5e-4f, .beta1 = 0.9f, .beta2 = 0.999f, .adam_eps = 1e-8f, .clip_grad = 1.0f};
    model *m = calloc(1, sizeof *m); m->p = sw_params_new(&pc, comm);
    sw_ctx_init(&m->x, &xc, comm, m->p);
    m->attn = sw_attention_create(&m->x, &(sw_attention_config){.heads = HEADS, .kv_heads = HEADS, .head_dim = HIDDEN / HEADS,
                                                                .causal = 0 /* bidirectional */, .dropout = 0.1f, .key_padding = pad > 0});
    const int64_t *qkv_tiles; int nqkv = sw_attention_qkv_tiles(m->attn, &qkv_tiles);
    sw_shard qkv_shard = sw_attention_qkv_shard(m->attn, 0);
    m->emb = sw_embedding_add(&m->x, VOCAB, sw_vocab_padded(VOCAB, tp), HIDDEN, SEQ, 0.02f); /* learned positions */
    for (int l = 0; l < LAYERS; l++) {
        char n[6][16];
        for (int i = 0; i < 6; i++) snprintf(n[i], sizeof n[i], "h%d.%s", l, (const char *[]){"ln1", "ln2", "qkv", "proj", "fc", "fc2"}[i]);
        sw_params_set_unit(m->p, l);
        m->blk[l] = (block_params){sw_norm_add(&m->x, n[0], HIDDEN, 0, 1e-5f), sw_norm_add(&m->x, n[1], HIDDEN, 0, 1e-5f),
            sw_linear_add(&m->x, n[2], SW_LINEAR_COLUMN, HIDDEN, 3 * HIDDEN, 1, 0.02f, &qkv_shard, nqkv, qkv_tiles),
            sw_linear_add(&m->x, n[3], SW_LINEAR_ROW, HIDDEN, HIDDEN, 1, 0.01f, NULL, 0, NULL),
            sw_linear_add(&m->x, n[4], SW_LINEAR_COLUMN, HIDDEN, 4 * HIDDEN, 1, 0.02f, NULL, 0, NULL),
            sw_linear_add(&m->x, n[5], SW_LINEAR_ROW, 4 * HIDDEN, HIDDEN, 1, 0.01f, NULL, 0, NULL)};
    }
    sw_params_set_unit(m->p, SW_UNIT_AFTER);
    m->final_norm = sw_norm_add(&m->x, "final_norm", HIDDEN, 0, 1e-5f);
    if (per_token) /* rows that differ per rank under sp: SW_LINEAR_REPLICATED */
        m->tok_head = sw_linear_add(&m->x, "tok_head", SW_LINEAR_REPLICATED, HIDDEN, OUT, 1, 0.1f, NULL, 0, NULL), m->rows = sw_row_mse_create(&m->x, OUT);
    else m->head = sw_seq_head_create(&m->x, &(sw_seq_head_config){.name = "head", .hidden = HIDDEN, .bias = 1, .std = 0.1f,
        .pool = pool_first ? SW_POOL_FIRST : SW_POOL_MEAN, .loss = classes ? SW_LOSS_CLASSES : SW_LOSS_MSE, .outputs = classes ? classes : 1});
    sw_params_allocate(m->p);
    sw_blocks_config bc = {.layers = LAYERS, .rows = m->x.Tl, .cols = HIDDEN, .recompute_every = 1, .recompute = SW_RECOMPUTE_SELECTIVE};
    m->pipe = sw_pipeline_create(&m->x, &bc, &ops, &model_ops, m, 0);
    m->nf = sw_tensor_new2d("final_norm_out", SW_F32, m->x.Tl, HIDDEN);
    m->nf_mean = sw_tensor_new2d("final_norm_mean", SW_F32, m->x.Tl, 1), m->nf_rstd = sw_tensor_new2d("final_norm_rstd", SW_F32, m->x.Tl, 1);
    m->pred = per_token ? sw_tensor_new2d("tok_pred", SW_F32, m->x.Tl, OUT) : NULL;
    m->gathered = gathered && m->x.T != m->x.Tl; /* without sp the l rows are the T rows already */
    if (m->gathered)
        m->nfg = sw_tensor_new2d("final_norm_gathered", SW_F32, m->x.T, HIDDEN), m->predg = sw_tensor_new2d("tok_pred_all", SW_F32, m->x.T, OUT),
        m->dpredg = sw_tensor_new2d("dtok_pred_all", SW_F32, m->x.T, OUT), m->dnf = sw_tensor_new2d("dfinal_norm", SW_F32, m->x.Tl, HIDDEN);
    for (int k = 0; k < micro; k++)
        m->tokens[k] = sw_tensor_new2d("tokens", SW_I32, m->x.T, 1), m->targets[k] = sw_tensor_new2d("targets", classes ? SW_I32 : SW_F32, per_token ? m->x.Tl : m->x.B, per_token ? OUT : 1);
    /* data: sequence b counts up by b + 1 from 3b; its target sin(0.7 b), or its class b mod C, or per token sin(0.3 p + 0.05 token);
     * --pad ID: sequence b's tokens from position SEQ - (b*7 % (SEQ/2)) on the token ID (default 1), their keys masked */
    int32_t tok[SEQ * BATCH], cls[BATCH], len[BATCH]; float y[BATCH], yt[SEQ * BATCH * OUT];
    for (int b = 0; b < BATCH; b++) {
        y[b] = sinf(0.7f * (float)b), cls[b] = classes ? b % classes : 0, len[b] = SEQ - (b * 7 % (SEQ / 2));
        for (int p = 0; p < SEQ; p++) { /* per token: OUT targets of the unpadded token (--pad ID changes none) */
            int32_t t = (p * (b + 1) + 3 * b) % VOCAB, i = p * BATCH + b;
            for (int j = 0; j < OUT; j++) yt[i * OUT + j] = sinf(0.3f * (float)p + 0.05f * (float)t + (float)j);
            tok[i] = pad && p >= len[b] ? pad : t;
        }
    }
    m->tok = tok, m->len = len, m->cls = cls, m->y = y, m->yt = yt, m->pad = pad, m->classes = classes;
    train_loop t = {.prog = "encoder_regress", .steps = steps, .model = m, .load = load, .pipe = m->pipe, .params = m->p, .grad_norm = 1};
    train_loop_run(&t);
    train_print_grads(m->p, &m->x); /* the last step's gradients, from the ranks holding distinct parts */
    train_traffic_report(m->pipe, comm, steps); /* the traffic model beside what the collectives counted */
    for (int k = 0; k < micro; k++) sw_tensor_free(m->tokens[k]), sw_tensor_free(m->targets[k]);
    sw_tensor_free(m->nfg), sw_tensor_free(m->predg), sw_tensor_free(m->dpredg), sw_tensor_free(m->dnf);
    sw_tensor_free(m->nf), sw_tensor_free(m->nf_mean), sw_tensor_free(m->nf_rstd), sw_tensor_free(m->pred), sw_row_mse_destroy(m->rows);
    sw_seq_head_destroy(m->head), sw_pipeline_destroy(m->pipe), sw_attention_destroy(m->attn);
    sw_ctx_destroy(&m->x), sw_params_destroy(m->p), free(m), sw_comm_destroy(world), sw_mesh_destroy(mesh), sw_shutdown();
    return 0;
}
