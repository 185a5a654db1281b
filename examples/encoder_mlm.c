/* A BERT-style masked LM from the public headers: learned positions, token
 * types (an extra table, "tte": the first half of each sequence type 0, the
 * second type 1), pre-LN blocks, bidirectional attention, an LM head whose
 * loss counts only the masked positions (ignore index -100). Every strategy
 * comes from the layers: mpirun -np 4 encoder_mlm --tp 2 --sp --dp 2 (or
 * --ulysses 2 --ring 2, --micro K; --pad [ID]: sequences of different
 * lengths, below). Prints each step's loss and gradient norm before clipping,
 * then "grad NAME sumsq abssum" of each parameter's clipped gradient from the
 * ranks holding distinct parts of it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <starweave.h>
#include "cli.h"
#include "train_loop.h"
enum { LAYERS = 2, HIDDEN = 64, HEADS = 4, VOCAB = 256, MASK = VOCAB - 1, SEQ = 32, BATCH = 8, IGNORE = -100 };
typedef struct { sw_norm ln1, ln2; sw_linear qkv, proj, fc, fc2; } block_params;
typedef struct { sw_tensor *n1, *m1, *r1, *n1g, *mid, *n2, *m2, *r2, *n2g, *u, *a; sw_attn_saved attn; } block_saved;
typedef struct model {
    sw_ctx x;
    sw_params *p;
    sw_attention *attn;
    sw_embedding emb;
    sw_embedding_table types;                /* token types: rows added to the embedding's */
    block_params blk[LAYERS];
    sw_norm final_norm;
    sw_lm_head *head;
    sw_pipeline *pipe;
    sw_tensor *tokens[BATCH], *type_ids[BATCH], *targets[BATCH], *nf, *nf_mean, *nf_rstd; /* per micro-batch */
    const int32_t *tok, *typ, *tgt; /* the batch (every step the same) */
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
    sw_tensor *dact = sw_scratch(x, "dact", x->T, k->a->cols), *datt = sw_scratch(x, "datt", x->T, sw_attention_out_cols(m->attn)),
              *dqkv = sw_scratch(x, "dqkv", x->T, sw_attention_qkv_cols(m->attn));
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
static const sw_block_ops ops = {.keep = keep, .forward = forward, .backward = backward, .traffic = traffic,
                                 .state_bytes = sizeof(block_saved)};
/* x0 = dropout(wte[token] + wpe[pos]) + tte[type]; the table's backward reads dx0 before the embedding's */
static void embed(void *mp, int step, sw_tensor *x0)
{
    model *m = mp; int k = m->x.micro;
    sw_embedding_forward(&m->x, &m->emb, step, m->tokens[k], x0), sw_embedding_table_forward(&m->x, &m->types, m->type_ids[k], x0);
}
static void embed_backward(void *mp, int step, sw_tensor *dx0)
{
    model *m = mp; int k = m->x.micro;
    sw_embedding_table_backward(&m->x, &m->types, m->type_ids[k], dx0), sw_embedding_backward(&m->x, &m->emb, step, m->tokens[k], dx0);
}
/* the final norm, the LM head and its cross-entropy over the masked positions */
static void head(void *mp, int step, sw_tensor *xL)
{
    model *m = mp; (void)step;                                /* the step's counted rows, once: */
    if (m->x.micro == 0) sw_lm_head_count(&m->x, m->head, m->targets);
    sw_norm_forward(&m->x, &m->final_norm, xL, m->nf, m->nf_mean, m->nf_rstd);
    sw_lm_head_forward(&m->x, m->head, m->nf, m->targets[m->x.micro]);
}
static void head_backward(void *mp, int step, sw_tensor *xL, sw_tensor *dxL)
{
    model *m = mp; (void)step;
    sw_norm_backward(&m->x, &m->final_norm, sw_lm_head_backward(&m->x, m->head, m->targets[m->x.micro]), xL,
                     m->nf_mean, m->nf_rstd, dxL, 0);
}
static sw_tensor *loss(void *mp) { return sw_lm_head_loss(((model *)mp)->head); }
static void embed_traffic(void *mp, sw_traffic *t)
{ model *m = mp; sw_embedding_traffic(&m->x, &m->emb, t), sw_embedding_table_traffic(&m->x, &m->types, t); }
static void head_traffic(void *mp, sw_traffic *t)
{ model *m = mp; sw_norm_traffic(&m->x, &m->final_norm, t), sw_lm_head_traffic(&m->x, m->head, t); }
static const sw_model_ops model_ops = {.embed_forward = embed, .embed_backward = embed_backward, .head_forward = head,
    .head_backward = head_backward, .loss = loss, .embed_traffic = embed_traffic, .head_traffic = head_traffic};

/* the training loop's part (train_loop.h): every micro-batch's token types, tokens and targets */
static void load(void *mp, int step)
{
    model *m = mp; (void)step;
    for (int k = 0; k < m->x.c.grad_accum; k++)
        sw_ctx_load_tokens(&m->x, k, m->typ, NULL, m->type_ids[k], NULL), sw_ctx_load_tokens(&m->x, k, m->tok, m->tgt, m->tokens[k], m->targets[k]);
}

int main(int argc, char **argv)
{
    int steps, tp, sp = 0, dp, ulysses, ring, micro, all = 0, wts = 0, pad = 0;
    const cli_flag flags[] = {
        CLI_INT("--steps", &steps, "20", 1, CLI_INT_MAX, "N", "training steps"),
        CLI_INT("--tp", &tp, "1", 1, CLI_INT_MAX, "T", "tensor-parallel degree"),
        CLI_BOOL("--sp", &sp, "sequence parallelism (with --tp)"),
        CLI_INT("--dp", &dp, "1", 1, CLI_INT_MAX, "D", "data-parallel degree"),
        CLI_INT("--ulysses", &ulysses, "1", 1, CLI_INT_MAX, "U", "DeepSpeed-Ulysses degree"),
        CLI_INT("--ring", &ring, "1", 1, CLI_INT_MAX, "R", "Ring attention degree"),
        CLI_INT("--micro", &micro, "1", 1, CLI_INT_MAX, "K", "micro-batches per step; K x dp must divide the batch of 8"),
        CLI_BOOL("--no-mask-ignore", &all, "every target counted (not only the masked positions)"),
        CLI_BOOL("--mask-weights", &wts, "row weights 1 on the masked positions, 0 elsewhere, every target real"),
        CLI_INT_OPT("--pad", &pad, "1", 0, VOCAB - 1, "ID",
                    "sequences of different lengths: sequence b's tokens from position\n"
                    "32 - (b*7 mod 16) on are the token ID (1 when not given; 0: none), keys masked"),
        CLI_END};
    cli_parse("encoder_mlm", "[mpirun -np N] encoder_mlm [options]",
              "A BERT-style masked LM (token types, bidirectional attention, loss on the masked positions).\n"
              "Every strategy comes from the layers: mpirun -np 4 encoder_mlm --tp 2 --sp --dp 2.\n", flags, argc, argv);
    all |= wts;
    sw_ctx_config xc = {.seq = SEQ, .batch = BATCH, .tp = tp, .sp = sp, .ulysses = ulysses, .ring = ring, .zigzag = 1,
                        .dp = dp, .grad_accum = micro, .tiles = 4, .seed = 1234, .dropout = 0.1f};
    if (sw_init(&argc, &argv, NULL) != 0) return 1;
    if (micro < 1 || BATCH % (dp * micro)) sw_usage_error("--micro (%d) times --dp (%d) must divide the batch (%d)", micro, dp, BATCH);
    sw_mesh *mesh = sw_mesh_create(&(sw_mesh_dims){.tp = tp, .ulysses = xc.ulysses, .ring = xc.ring, .dp = dp, .pp = 1});
    sw_comm *world = sw_comm_create(mesh), *comm = sw_world_size() > 1 ? world : NULL; /* NULL: one rank */
    sw_params_config pc = {.seed = 1234, .tiles = 4, .dtype = SW_F32, .grad_accum = micro, .bucket_mb = 25.0f,
                           .grad_group = xc.ulysses * xc.ring > 1 ? SW_GROUP_SP_DP : SW_GROUP_DP,
                           .lr = 3e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .adam_eps = 1e-8f, .clip_grad = 1.0f};
    model *m = calloc(1, sizeof *m); m->p = sw_params_new(&pc, comm);
    sw_ctx_init(&m->x, &xc, comm, m->p);
    m->attn = sw_attention_create(&m->x, &(sw_attention_config){.heads = HEADS, .kv_heads = HEADS, .head_dim = HIDDEN / HEADS,
                                                                .causal = 0 /* bidirectional */, .dropout = 0.1f, .key_padding = pad > 0});
    const int64_t *qkv_tiles; int nqkv = sw_attention_qkv_tiles(m->attn, &qkv_tiles), vp = sw_vocab_padded(VOCAB, tp);
    sw_shard qkv_shard = sw_attention_qkv_shard(m->attn, 0);
    m->emb = sw_embedding_add(&m->x, VOCAB, vp, HIDDEN, SEQ, 0.02f); /* learned positions */
    m->types = sw_embedding_table_add(&m->x, "tte", 2, HIDDEN, 0.02f); /* 2 token types */
    for (int l = 0; l < LAYERS; l++) {
        char n[6][16];
        for (int i = 0; i < 6; i++) snprintf(n[i], sizeof n[i], "h%d.%s", l, (const char *[]){"ln1", "ln2", "qkv", "proj", "fc", "fc2"}[i]);
        sw_params_set_unit(m->p, l);
        m->blk[l] = (block_params){.ln1 = sw_norm_add(&m->x, n[0], HIDDEN, 0, 1e-5f), .ln2 = sw_norm_add(&m->x, n[1], HIDDEN, 0, 1e-5f),
            .qkv = sw_linear_add(&m->x, n[2], SW_LINEAR_COLUMN, HIDDEN, 3 * HIDDEN, 1, 0.02f, &qkv_shard, nqkv, qkv_tiles),
            .proj = sw_linear_add(&m->x, n[3], SW_LINEAR_ROW, HIDDEN, HIDDEN, 1, 0.01f, NULL, 0, NULL),
            .fc = sw_linear_add(&m->x, n[4], SW_LINEAR_COLUMN, HIDDEN, 4 * HIDDEN, 1, 0.02f, NULL, 0, NULL),
            .fc2 = sw_linear_add(&m->x, n[5], SW_LINEAR_ROW, 4 * HIDDEN, HIDDEN, 1, 0.01f, NULL, 0, NULL)};
    }
    sw_params_set_unit(m->p, SW_UNIT_AFTER), m->final_norm = sw_norm_add(&m->x, "final_norm", HIDDEN, 0, 1e-5f);
    int head_w = sw_lm_head_add_weight(&m->x, "lm_head", VOCAB, vp, HIDDEN, 0.02f);
    sw_params_allocate(m->p);
    sw_blocks_config bc = {.layers = LAYERS, .rows = m->x.Tl, .cols = HIDDEN, .recompute_every = 1, .recompute = SW_RECOMPUTE_SELECTIVE};
    m->pipe = sw_pipeline_create(&m->x, &bc, &ops, &model_ops, m, 0);
    m->head = sw_lm_head_create(&m->x, head_w, VOCAB, vp, HIDDEN), sw_lm_head_set_ignore_index(m->head, IGNORE);
    m->nf = sw_tensor_new2d("final_norm_out", SW_F32, m->x.Tl, HIDDEN);
    m->nf_mean = sw_tensor_new2d("final_norm_mean", SW_F32, m->x.Tl, 1), m->nf_rstd = sw_tensor_new2d("final_norm_rstd", SW_F32, m->x.Tl, 1);
    for (int k = 0; k < micro; k++) {
        m->tokens[k] = sw_tensor_new2d("tokens", SW_I32, m->x.T, 1), m->type_ids[k] = sw_tensor_new2d("type_ids", SW_I32, m->x.T, 1);
        m->targets[k] = sw_tensor_new2d("targets", SW_I32, m->x.T, 1);
    }
    /* data from a seed: random tokens below MASK; ~15 % masked (the token MASK, the target the original token), every other
     * target IGNORE (--no-mask-ignore, --mask-weights: the original); --pad ID: sequence b's tokens from position
     * SEQ - (b*7 % (SEQ/2)) on the token ID (default 1), their targets IGNORE, their keys masked (key_padding) */
    int32_t tok[SEQ * BATCH], typ[SEQ * BATCH], tgt[SEQ * BATCH], len[BATCH]; float w[SEQ * BATCH]; uint64_t r = 1234;
    for (int i = 0; i < SEQ * BATCH; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        int32_t t = (int32_t)((r >> 33) % MASK), masked = (r >> 20) % 100 < 15;
        tok[i] = masked ? MASK : t, tgt[i] = masked || all ? t : IGNORE, typ[i] = i / BATCH >= SEQ / 2, w[i] = (float)masked;
        if (len[i % BATCH] = SEQ - (i % BATCH * 7 % (SEQ / 2)), pad && i / BATCH >= len[i % BATCH]) tok[i] = pad, tgt[i] = IGNORE, w[i] = 0;
    }
    for (int k = 0; k < micro; k++) /* they stay */
        wts ? sw_lm_head_load_weights(&m->x, m->head, k, w) : (void)0, pad ? sw_ctx_load_key_lengths(&m->x, k, len) : (void)0;
    m->tok = tok, m->typ = typ, m->tgt = tgt;
    train_loop t = {.prog = "encoder_mlm", .steps = steps, .model = m, .load = load, .pipe = m->pipe, .params = m->p, .grad_norm = 1};
    train_loop_run(&t);
    train_print_grads(m->p, &m->x); /* the last step's gradients, from the ranks holding distinct parts */
    train_traffic_report(m->pipe, comm, steps); /* the traffic model beside what the collectives counted */
    for (int k = 0; k < micro; k++) sw_tensor_free(m->tokens[k]), sw_tensor_free(m->type_ids[k]), sw_tensor_free(m->targets[k]);
    sw_tensor_free(m->nf), sw_tensor_free(m->nf_mean), sw_tensor_free(m->nf_rstd);
    sw_lm_head_destroy(m->head), sw_pipeline_destroy(m->pipe), sw_attention_destroy(m->attn), sw_ctx_destroy(&m->x);
    sw_params_destroy(m->p), free(m);
    sw_comm_destroy(world), sw_mesh_destroy(mesh), sw_shutdown();
    return 0;
}
