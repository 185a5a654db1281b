/* A model of one's own from the public layers alone: a parallel-block
 * transformer (GPT-J / PaLM style), y = x + attention(n(x)) + mlp(n(x)),
 * one RMSNorm feeding both branches, rotary positions, untied LM head.
 * Every strategy comes from the layers and the step driver: run it as
 *   mpirun -np 4 custom_model --tp 2 --sp --dp 2
 * and tensor + sequence + data parallelism apply with no line of it
 * changed (so do --ulysses, --ring, --pp (pipeline stages), --pp-virtual V
 * (chunks per stage), --micro K (micro-batches per step), --recompute-full,
 * --zero 1-3; --layers N: blocks, 2 by default;
 * --bidirectional makes attention non-causal; --help: the flag table).
 * Two switches show the library's refusals and guarantees (tests/test_slicing.sh):
 * --qkv-plain registers the QKV linear as a plain even-split column linear
 * instead of sw_attention_qkv_add (the heads do not line up under tp:
 * sw_attention_forward refuses it); --loss-every-rank makes the LM head on
 * every pipeline stage and prints, on every rank, the loss read from the
 * model's own loss tensor (sw_lm_head_loss: the step's loss on every
 * stage, pipeline.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <starweave.h>
#include "cli.h"
#include "train_loop.h"

enum { MAX_LAYERS = 8, HIDDEN = 64, HEADS = 4, VOCAB = 256, SEQ = 32, BATCH = 8 };

typedef struct { sw_norm norm; sw_linear qkv, proj, up, down; } block_params;
typedef struct { sw_tensor *n, *rstd, *ng, *u, *a; sw_attn_saved attn; } block_saved;

typedef struct model {
    sw_ctx x;
    sw_params *p;
    sw_attention *attn;
    sw_embedding emb;
    block_params blk[MAX_LAYERS];
    sw_norm final_norm;
    int head_w;
    sw_pipeline *pipe;
    sw_lm_head *head;
    sw_tensor *tokens[BATCH], *targets[BATCH], *nf, *nf_rstd; /* per micro-batch */
    int32_t tok[SEQ * BATCH], tgt[SEQ * BATCH];              /* the batch (every step the same) */
    int loss_every_rank;
} model;

/* what a block keeps: the norm output (gathered with sp), the MLP's hidden
 * before and after GeLU, and attention's */
static void keep(void *mp, sw_saved *s)
{
    model *m = mp;
    block_saved *k = s->state;
    int64_t T = m->x.tokens, l = m->x.resid_rows, f = 4 * HIDDEN / m->x.tp.t;
    k->n = sw_saved_new(s, "n", l, HIDDEN);
    k->rstd = sw_saved_new(s, "rstd", l, 1);
    k->ng = m->x.tp.t > 1 && m->x.c.sp ? sw_saved_new(s, "n_gathered", T, HIDDEN) : k->n;
    k->u = sw_saved_new(s, "up", T, f);
    k->a = sw_saved_new(s, "act", T, f);
    sw_attention_keep(m->attn, s, &k->attn);
}

static void forward(void *mp, int step, int l, sw_saved *s, sw_tensor *in, sw_tensor *y)
{
    model *m = mp;
    sw_ctx *x = &m->x;
    block_params *b = &m->blk[l];
    block_saved *k = s->state;
    sw_norm_forward(x, &b->norm, in, k->n, NULL, k->rstd);
    sw_linear_forward(x, &b->qkv, k->n, k->ng, k->attn.qkv);
    sw_attention_forward(x, m->attn, step, l, &k->attn);
    sw_linear_forward(x, &b->up, k->n, k->ng, k->u);
    sw_gelu_forward(x, k->u, k->a);
    if (!y) return; /* full recomputation: the output is kept already */
    sw_tensor *mid = sw_scratch(x, "mid", x->resid_rows, HIDDEN);
    sw_residual_forward(x, step, l, SW_DROP_ATTN_OUT, in, sw_linear_row_forward(x, &b->proj, k->attn.att), mid);
    sw_residual_forward(x, step, l, SW_DROP_MLP_OUT, mid, sw_linear_row_forward(x, &b->down, k->a), y);
}

/* dres: the output's gradient in, the input's out; the norm's gradient is
 * the sum of both branches' */
static void backward(void *mp, int step, int l, sw_saved *s, sw_tensor *in, sw_tensor *dres)
{
    model *m = mp;
    sw_ctx *x = &m->x;
    block_params *b = &m->blk[l];
    block_saved *k = s->state;
    sw_tensor *dn = sw_scratch(x, "dn", x->resid_rows, HIDDEN), *dact = sw_scratch(x, "dact", x->tokens, k->a->cols);
    sw_tensor *datt = sw_scratch(x, "datt", x->tokens, sw_attention_out_cols(m->attn));
    sw_tensor *dqkv = sw_scratch(x, "dqkv", x->tokens, sw_attention_qkv_cols(m->attn));
    sw_linear_row_backward(x, &b->down, sw_residual_backward(x, step, l, SW_DROP_MLP_OUT, dres), k->a, dact);
    sw_gelu_backward(x, k->u, dact);
    sw_copy_flat(sw_tensor_whole(sw_linear_backward(x, &b->up, dact, k->n, k->ng), STARPU_R),
                 sw_tensor_whole(dn, STARPU_W), 0);
    sw_linear_row_backward(x, &b->proj, sw_residual_backward(x, step, l, SW_DROP_ATTN_OUT, dres), k->attn.att, datt);
    sw_attention_backward(x, m->attn, step, l, &k->attn, datt, dqkv);
    sw_copy_flat(sw_tensor_whole(sw_linear_backward(x, &b->qkv, dqkv, k->n, k->ng), STARPU_R),
                 sw_tensor_whole(dn, STARPU_RW), 1);
    sw_norm_backward(x, &b->norm, dn, in, NULL, k->rstd, dres, 1);
}

/* what the block sends (the traffic model); output 0: a forward without y */
static void traffic(void *mp, int l, int output, sw_traffic *t)
{
    model *m = mp;
    block_params *b = &m->blk[l];
    sw_norm_traffic(&m->x, &b->norm, t);
    sw_linear_traffic(&m->x, &b->qkv, t);
    sw_attention_traffic(&m->x, m->attn, &b->qkv, t);
    sw_linear_traffic(&m->x, &b->up, t);
    if (output) sw_linear_traffic(&m->x, &b->proj, t), sw_linear_traffic(&m->x, &b->down, t);
}
static const sw_block_ops ops = {keep, forward, backward, traffic, sizeof(block_saved)};

/* before the blocks: the token embedding; after them: the final norm, the
 * LM head and its loss (the current micro-batch is the context's) */
static void embed(void *mp, int step, sw_tensor *x0)
{
    model *m = mp;
    sw_embedding_forward(&m->x, &m->emb, step, m->tokens[m->x.micro], x0);
}
static void embed_backward(void *mp, int step, sw_tensor *dx0)
{
    model *m = mp;
    sw_embedding_backward(&m->x, &m->emb, step, m->tokens[m->x.micro], dx0);
}
static void head(void *mp, int step, sw_tensor *xL)
{
    model *m = mp;
    (void)step;
    sw_norm_forward(&m->x, &m->final_norm, xL, m->nf, NULL, m->nf_rstd);
    sw_lm_head_forward(&m->x, m->head, m->nf, m->targets[m->x.micro]);
}
static void head_backward(void *mp, int step, sw_tensor *xL, sw_tensor *dxL)
{
    model *m = mp;
    (void)step;
    sw_norm_backward(&m->x, &m->final_norm, sw_lm_head_backward(&m->x, m->head, m->targets[m->x.micro]), xL, NULL,
                     m->nf_rstd, dxL, 0);
}
static sw_tensor *loss(void *mp) { return sw_lm_head_loss(((model *)mp)->head); }
static void embed_traffic(void *mp, sw_traffic *t) { sw_embedding_traffic(&((model *)mp)->x, &((model *)mp)->emb, t); }
static void head_traffic(void *mp, sw_traffic *t)
{
    model *m = mp;
    sw_norm_traffic(&m->x, &m->final_norm, t);
    sw_lm_head_traffic(&m->x, m->head, t);
}
static const sw_model_ops model_ops = {embed, embed_backward, head, head_backward, loss, embed_traffic, head_traffic, NULL};

/* the training loop's part (train_loop.h): the micro-batches, and with --loss-every-rank the model's own
 * loss tensor on every rank (the driver fills it on every stage) */
static void load(void *mp, int step)
{
    model *m = mp;
    (void)step;
    for (int k = 0; k < m->x.c.grad_accum; k++) sw_ctx_load_tokens(&m->x, k, m->tok, m->tgt, m->tokens[k], m->targets[k]);
}
static void after(void *mp, int step, float l)
{
    model *m = mp;
    if (!m->loss_every_rank) return;
    sw_tensor_read_host(sw_lm_head_loss(m->head), &l);
    printf("rank %d step %2d  model loss %.7f\n", sw_rank(), step, l);
}

int main(int argc, char **argv)
{
    int tp, sp = 0, dp, pp, pp_virtual, ulysses, ring, zero, steps, micro, layers, bidirectional = 0, recompute_full = 0;
    int qkv_plain = 0, loss_every_rank = 0;
    const cli_flag flags[] = {
        CLI_INT("--steps", &steps, "20", 1, CLI_INT_MAX, "N", "training steps"),
        CLI_INT("--layers", &layers, "2", 1, MAX_LAYERS, "N", "blocks"),
        CLI_BOOL("--bidirectional", &bidirectional, "attention not causal: every token sees the whole sequence"),
        CLI_INT("--tp", &tp, "1", 1, CLI_INT_MAX, "T", "tensor-parallel degree"),
        CLI_BOOL("--sp", &sp, "sequence parallelism (with --tp)"),
        CLI_INT("--dp", &dp, "1", 1, CLI_INT_MAX, "D", "data-parallel degree"),
        CLI_INT("--zero", &zero, "0", 0, 3, "N", "ZeRO stage over dp (and ulysses x ring)"),
        CLI_INT("--ulysses", &ulysses, "1", 1, CLI_INT_MAX, "U", "DeepSpeed-Ulysses degree"),
        CLI_INT("--ring", &ring, "1", 1, CLI_INT_MAX, "R", "Ring attention degree"),
        CLI_INT("--pp", &pp, "1", 1, CLI_INT_MAX, "P", "pipeline stages"),
        CLI_INT("--pp-virtual", &pp_virtual, "1", 1, CLI_INT_MAX, "V", "chunks per pipeline stage"),
        CLI_INT("--micro", &micro, "1", 1, CLI_INT_MAX, "K", "micro-batches per step; K x dp must divide the batch of 8"),
        CLI_BOOL("--recompute-full", &recompute_full, "keep only each block's input, redo its forward in backward"),
        CLI_BOOL("--qkv-plain", &qkv_plain, "the QKV linear as a plain column linear (refused under tp: a misuse shown)"),
        CLI_BOOL("--loss-every-rank", &loss_every_rank, "print the model's own loss tensor on every rank"),
        CLI_END};
    cli_parse("custom_model", "[mpirun -np N] custom_model [options]",
              "A parallel-block transformer written from the public layers alone; every strategy applies\n"
              "to it unchanged: mpirun -np 4 custom_model --tp 2 --sp --dp 2.\n", flags, argc, argv);
    sw_ctx_config xc; /* the defaults (degrees 1), then what this model sets; grad_accum, tiles and seed given here once */
    sw_ctx_config_default(&xc);
    xc.seq = SEQ, xc.batch = BATCH, xc.tp = tp, xc.sp = sp, xc.ulysses = ulysses, xc.ring = ring, xc.zigzag = 1;
    xc.dp = dp, xc.grad_accum = micro, xc.tiles = 4, xc.seed = 1234, xc.dropout = 0.1f;
    sw_options opt;
    sw_options_default(&opt);
    if (sw_init(&argc, &argv, &opt) != 0) return 1;
    if (micro < 1 || BATCH % (dp * micro)) sw_usage_error("--micro (%d) times --dp (%d) must divide the batch (%d)", micro, dp, BATCH);
    sw_mesh *mesh = sw_mesh_create(&(sw_mesh_dims){.tp = tp, .ulysses = xc.ulysses, .ring = xc.ring, .dp = dp, .pp = pp});
    sw_comm *world = sw_comm_create(mesh), *comm = sw_world_size() > 1 ? world : NULL; /* NULL: one rank */
    int cp = xc.ulysses * xc.ring;
    sw_params_config pc; /* seed, tiles and grad_accum left 0: the context's (sw_ctx_init) */
    sw_params_config_default(&pc);
    pc.zero = zero, pc.grad_group = cp > 1 ? SW_GROUP_SP_DP : SW_GROUP_DP;
    pc.lr = 3e-3f, pc.weight_decay = 0.0f, pc.clip_grad = 1.0f, pc.pp_chunks = pp_virtual;
    model *m = calloc(1, sizeof *m);
    m->p = sw_params_new(&pc, comm);
    sw_ctx_init(&m->x, &xc, comm, m->p);
    /* causal (--bidirectional: every token sees the whole sequence), rotary positions */
    sw_attention_config ac;
    sw_attention_config_default(&ac);
    ac.heads = ac.kv_heads = HEADS, ac.head_dim = HIDDEN / HEADS, ac.causal = !bidirectional;
    ac.dropout = 0.1f, ac.rope_theta = 10000.0f;
    m->attn = sw_attention_create(&m->x, &ac);
    int vp = sw_vocab_padded(VOCAB, tp);
    /* the parameters, unit by unit: before the blocks, each block, after them */
    m->emb = sw_embedding_add(&m->x, VOCAB, vp, HIDDEN, 0, 0.02f); /* no learned positions */
    for (int l = 0; l < layers; l++) {
        char n[5][16];
        for (int i = 0; i < 5; i++) snprintf(n[i], sizeof n[i], "h%d.%s", l, (const char *[]){"norm", "qkv", "proj", "up", "down"}[i]);
        sw_params_set_unit(m->p, l);
        m->blk[l] = (block_params){sw_norm_add(&m->x, n[0], HIDDEN, 1, 1e-5f),
            qkv_plain ? sw_linear_add(&m->x, n[1], SW_LINEAR_COLUMN, HIDDEN, 3 * HIDDEN, 0, 0.02f, NULL, 0, NULL)
                      : sw_attention_qkv_add(&m->x, m->attn, n[1], HIDDEN, 0, 0.02f), /* the attention's slice, tiles */
            sw_linear_add(&m->x, n[2], SW_LINEAR_ROW, HIDDEN, HIDDEN, 0, 0.01f, NULL, 0, NULL),
            sw_linear_add(&m->x, n[3], SW_LINEAR_COLUMN, HIDDEN, 4 * HIDDEN, 0, 0.02f, NULL, 0, NULL),
            sw_linear_add(&m->x, n[4], SW_LINEAR_ROW, 4 * HIDDEN, HIDDEN, 0, 0.01f, NULL, 0, NULL)};
    }
    sw_params_set_unit(m->p, SW_UNIT_AFTER);
    m->final_norm = sw_norm_add(&m->x, "final_norm", HIDDEN, 1, 1e-5f);
    m->head_w = sw_lm_head_add_weight(&m->x, "lm_head", VOCAB, vp, HIDDEN, 0.02f);
    sw_params_allocate(m->p); /* this rank's stage's parameters */
    sw_blocks_config bc;
    sw_blocks_config_default(&bc);
    bc.layers = layers, bc.rows = m->x.resid_rows, bc.cols = HIDDEN;
    if (recompute_full) bc.recompute = SW_RECOMPUTE_FULL;
    m->pipe = sw_pipeline_create(&m->x, &bc, &ops, &model_ops, m, 0); /* 1F1B's quota */
    if (loss_every_rank) m->head = sw_lm_head_create(&m->x, m->head_w, VOCAB, vp, HIDDEN); /* its loss tensor everywhere */
    if (sw_params_runs_unit(m->p, SW_UNIT_AFTER)) {
        if (!m->head) m->head = sw_lm_head_create(&m->x, m->head_w, VOCAB, vp, HIDDEN);
        m->nf = sw_tensor_new2d("final_norm_out", SW_F32, m->x.resid_rows, HIDDEN);
        m->nf_rstd = sw_tensor_new2d("final_norm_rstd", SW_F32, m->x.resid_rows, 1);
    }
    for (int k = 0; k < micro; k++) {
        m->tokens[k] = sw_tensor_new2d("tokens", SW_I32, m->x.tokens, 1);
        m->targets[k] = sw_tensor_new2d("targets", SW_I32, m->x.tokens, 1);
    }

    /* data: sequence b counts up by b + 1 modulo the vocabulary; the target is the next token */
    for (int p = 0; p < SEQ; p++)
        for (int b = 0; b < BATCH; b++)
            m->tok[p * BATCH + b] = (p * (b + 1)) % VOCAB, m->tgt[p * BATCH + b] = ((p + 1) * (b + 1)) % VOCAB;
    m->loss_every_rank = loss_every_rank;
    train_loop t = {.prog = "custom_model", .steps = steps, .model = m, .load = load, .after = after, .pipe = m->pipe};
    train_loop_run(&t);
    train_traffic_report(m->pipe, comm, steps); /* the traffic model beside what the collectives counted, every rank */
    for (int k = 0; k < micro; k++) sw_tensor_free(m->tokens[k]), sw_tensor_free(m->targets[k]);
    sw_tensor_free(m->nf);
    sw_tensor_free(m->nf_rstd);
    sw_lm_head_destroy(m->head);
    sw_pipeline_destroy(m->pipe);
    sw_attention_destroy(m->attn);
    sw_ctx_destroy(&m->x);
    sw_params_destroy(m->p);
    free(m);
    sw_comm_destroy(world);
    sw_mesh_destroy(mesh);
    sw_shutdown();
    return 0;
}
