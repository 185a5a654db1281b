/* The encoder examples' trunk (encoder.h): its blocks for the step driver,
 * its parameters and its setup. */
#include <stdio.h>
#include <stdlib.h>

#include "encoder.h"

typedef struct { sw_tensor *n1, *m1, *r1, *n1g, *mid, *n2, *m2, *r2, *n2g, *u, *a; sw_attn_saved attn; } block_saved;

static void keep(void *mp, sw_saved *s)
{
    encoder *m = mp; block_saved *k = s->state;
    int64_t T = m->x.tokens, l = m->x.resid_rows, f = 4 * ENC_HIDDEN / m->x.tp.t, sp = m->x.tp.t > 1 && m->x.c.sp;
    k->n1 = sw_saved_new(s, "n1", l, ENC_HIDDEN), k->m1 = sw_saved_new(s, "m1", l, 1), k->r1 = sw_saved_new(s, "r1", l, 1);
    k->n1g = sp ? sw_saved_new(s, "n1_gathered", T, ENC_HIDDEN) : k->n1;
    k->mid = sw_saved_new(s, "mid", l, ENC_HIDDEN);
    k->n2 = sw_saved_new(s, "n2", l, ENC_HIDDEN), k->m2 = sw_saved_new(s, "m2", l, 1), k->r2 = sw_saved_new(s, "r2", l, 1);
    k->n2g = sp ? sw_saved_new(s, "n2_gathered", T, ENC_HIDDEN) : k->n2;
    k->u = sw_saved_new(s, "fc", T, f), k->a = sw_saved_new(s, "act", T, f);
    sw_attention_keep(m->attn, s, &k->attn);
}

/* y = h + mlp(ln2(h)), h = x + attention(ln1(x)) */
static void forward(void *mp, int step, int l, sw_saved *s, sw_tensor *in, sw_tensor *y)
{
    encoder *m = mp; sw_ctx *x = &m->x; enc_block *b = &m->blk[l]; block_saved *k = s->state;
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
    encoder *m = mp; sw_ctx *x = &m->x; enc_block *b = &m->blk[l]; block_saved *k = s->state;
    sw_tensor *dact = sw_scratch(x, "dact", x->tokens, k->a->cols), *datt = sw_scratch(x, "datt", x->tokens, sw_attention_out_cols(m->attn));
    sw_tensor *dqkv = sw_scratch(x, "dqkv", x->tokens, sw_attention_qkv_cols(m->attn));
    sw_linear_row_backward(x, &b->fc2, sw_residual_backward(x, step, l, SW_DROP_MLP_OUT, dres), k->a, dact);
    sw_gelu_backward(x, k->u, dact);
    sw_norm_backward(x, &b->ln2, sw_linear_backward(x, &b->fc, dact, k->n2, k->n2g), k->mid, k->m2, k->r2, dres, 1);
    sw_linear_row_backward(x, &b->proj, sw_residual_backward(x, step, l, SW_DROP_ATTN_OUT, dres), k->attn.att, datt);
    sw_attention_backward(x, m->attn, step, l, &k->attn, datt, dqkv);
    sw_norm_backward(x, &b->ln1, sw_linear_backward(x, &b->qkv, dqkv, k->n1, k->n1g), in, k->m1, k->r1, dres, 1);
}

static void traffic(void *mp, int l, int output, sw_traffic *t)
{
    encoder *m = mp; enc_block *b = &m->blk[l];
    sw_norm_traffic(&m->x, &b->ln1, t), sw_norm_traffic(&m->x, &b->ln2, t), sw_attention_traffic(&m->x, m->attn, &b->qkv, t);
    sw_linear_traffic(&m->x, &b->qkv, t), sw_linear_traffic(&m->x, &b->proj, t), sw_linear_traffic(&m->x, &b->fc, t);
    if (output) sw_linear_traffic(&m->x, &b->fc2, t);
}
static const sw_block_ops ops = {keep, forward, backward, traffic, sizeof(block_saved)};

void encoder_begin(encoder *e, const encoder_flags *f, float lr, int key_padding, int *argc, char ***argv)
{
    sw_ctx_config xc = {.seq = ENC_SEQ, .batch = ENC_BATCH, .tp = f->tp, .sp = f->sp, .ulysses = f->ulysses, .ring = f->ring,
                        .zigzag = 1, .dp = f->dp, .grad_accum = f->micro, .tiles = 4, .seed = 1234, .dropout = 0.1f};
    if (sw_init(argc, argv, NULL) != 0) exit(1);
    if (f->micro < 1 || ENC_BATCH % (f->dp * f->micro))
        sw_usage_error("--micro (%d) times --dp (%d) must divide the batch (%d)", f->micro, f->dp, ENC_BATCH);
    e->mesh = sw_mesh_create(&(sw_mesh_dims){.tp = f->tp, .ulysses = f->ulysses, .ring = f->ring, .dp = f->dp, .pp = 1});
    e->world = sw_comm_create(e->mesh), e->comm = sw_world_size() > 1 ? e->world : NULL; /* NULL: one rank */
    sw_params_config pc = {.seed = 1234, .tiles = 4, .dtype = SW_F32, .grad_accum = f->micro, .bucket_mb = 25.0f,
                           .grad_group = f->ulysses * f->ring > 1 ? SW_GROUP_SP_DP : SW_GROUP_DP,
                           .lr = lr, .beta1 = 0.9f, .beta2 = 0.999f, .adam_eps = 1e-8f, .clip_grad = 1.0f};
    e->p = sw_params_new(&pc, e->comm);
    sw_ctx_init(&e->x, &xc, e->comm, e->p);
    e->attn = sw_attention_create(&e->x, &(sw_attention_config){.heads = ENC_HEADS, .kv_heads = ENC_HEADS,
        .head_dim = ENC_HIDDEN / ENC_HEADS, .causal = 0 /* bidirectional */, .dropout = 0.1f, .key_padding = key_padding});
    e->vocab_padded = sw_vocab_padded(ENC_VOCAB, f->tp);
    e->emb = sw_embedding_add(&e->x, ENC_VOCAB, e->vocab_padded, ENC_HIDDEN, ENC_SEQ, 0.02f); /* learned positions */
}

void encoder_blocks(encoder *e)
{
    const int64_t *qkv_tiles;
    int nqkv = sw_attention_qkv_tiles(e->attn, &qkv_tiles);
    sw_slice qkv_slice = sw_attention_qkv_slice(e->attn, 0);
    sw_ctx *x = &e->x;
    for (int l = 0; l < ENC_LAYERS; l++) {
        char n[6][16];
        for (int i = 0; i < 6; i++) snprintf(n[i], sizeof n[i], "h%d.%s", l, (const char *[]){"ln1", "ln2", "qkv", "proj", "fc", "fc2"}[i]);
        sw_params_set_unit(e->p, l);
        enc_block *b = &e->blk[l]; /* registered in this order: the registry's init follows it */
        b->ln1 = sw_norm_add(x, n[0], ENC_HIDDEN, 0, 1e-5f), b->ln2 = sw_norm_add(x, n[1], ENC_HIDDEN, 0, 1e-5f);
        b->qkv = sw_linear_add(x, n[2], SW_LINEAR_COLUMN, ENC_HIDDEN, 3 * ENC_HIDDEN, 1, 0.02f, &qkv_slice, nqkv, qkv_tiles);
        b->proj = sw_linear_add(x, n[3], SW_LINEAR_ROW, ENC_HIDDEN, ENC_HIDDEN, 1, 0.01f, NULL, 0, NULL);
        b->fc = sw_linear_add(x, n[4], SW_LINEAR_COLUMN, ENC_HIDDEN, 4 * ENC_HIDDEN, 1, 0.02f, NULL, 0, NULL);
        b->fc2 = sw_linear_add(x, n[5], SW_LINEAR_ROW, 4 * ENC_HIDDEN, ENC_HIDDEN, 1, 0.01f, NULL, 0, NULL);
    }
    sw_params_set_unit(e->p, SW_UNIT_AFTER);
    e->final_norm = sw_norm_add(x, "final_norm", ENC_HIDDEN, 0, 1e-5f);
}

void encoder_finish(encoder *e, const sw_model_ops *model_ops, void *model)
{
    sw_params_allocate(e->p);
    sw_blocks_config bc = {.layers = ENC_LAYERS, .rows = e->x.resid_rows, .cols = ENC_HIDDEN, .recompute_every = 1,
                           .recompute = SW_RECOMPUTE_SELECTIVE};
    e->pipe = sw_pipeline_create(&e->x, &bc, &ops, model_ops, model, 0);
    e->nf = sw_tensor_new2d("final_norm_out", SW_F32, e->x.resid_rows, ENC_HIDDEN);
    e->nf_mean = sw_tensor_new2d("final_norm_mean", SW_F32, e->x.resid_rows, 1);
    e->nf_rstd = sw_tensor_new2d("final_norm_rstd", SW_F32, e->x.resid_rows, 1);
}

void encoder_destroy(encoder *e)
{
    sw_tensor_free(e->nf), sw_tensor_free(e->nf_mean), sw_tensor_free(e->nf_rstd);
    sw_pipeline_destroy(e->pipe), sw_attention_destroy(e->attn), sw_ctx_destroy(&e->x), sw_params_destroy(e->p);
    sw_comm_destroy(e->world), sw_mesh_destroy(e->mesh), sw_shutdown();
}
