/* Misuse of the public API refused with a message, never a crash or a
 * plausible wrong result (tests/test_misuse.sh):
 *   test_misuse CASE   one misuse; the library must stop the program (exit 2
 *                      on every rank, the rule and the value printed once);
 *                      returning is a failure (exit 3)
 * Cases: target (a target past the vocabulary), ignore (-100, PyTorch's
 * ignore index, where the config sets none), ignore-other (the config's
 * ignore index -100 set, a target past the vocabulary still refused),
 * ignore-valid (an ignore index that is a real token id), token (a
 * negative token), micro (a micro-batch past grad_accum); the pooled head
 * of heads.h: head-unallocated (forward before sw_params_allocate),
 * head-null (a NULL input), head-targets (targets of the wrong shape);
 * duplicate (sw_params_add with a name already registered);
 * the layers (layer_case below: seq 8, batch 4, h 16, dp = the world, or
 * tp 2 with sp on 2 ranks for the gathered-* cases): norm-mean (LayerNorm
 * forward, mean NULL), norm-bwd-rstd (backward, rstd NULL), norm-shape (y
 * of the wrong shape), linear-shape (x_local of the wrong shape),
 * linear-null (y NULL), linear-unallocated (before sw_params_allocate),
 * linear-index (a parameter index of no parameter), embed-tokens (tokens
 * NULL), load-targets (sw_ctx_load_tokens given targets but no tensor for
 * them, after a load of tokens alone), lm-targets (targets NULL), lm-shape (the input of the wrong
 * shape), gathered-null (x_gathered NULL under sp), gathered-local (the
 * local tensor passed as x_gathered), attn-null (the saved tensors NULL),
 * blocks-op (a NULL block op), pipeline-ops (NULL model ops),
 * params-index (a parameter index out of range); key-length (a key length
 * past the sequence, sw_ctx_load_key_lengths); replicated-rows (a
 * replicated linear on rows that are neither l, T nor B: no gradient rule
 * fits); the registry against the context at sw_ctx_init (from the
 * defaults, sw_*_config_default): ctx-grad-group (grad_group left 0, the
 * world group), ctx-seed (a registry seed other than the context's),
 * ctx-grad-accum (a registry grad_accum other than the context's); the
 * model cases (units-pp, units-zero3, zero3-other-unit, stage-head) and one
 * rank refusing alone (one-rank, rank0-only): below, on 2 ranks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starweave.h"

static void keep(void *m, sw_saved *s) { (void)m, (void)s; }
static void fwd(void *m, int step, int l, sw_saved *s, sw_tensor *x, sw_tensor *y) { (void)m, (void)step, (void)l, (void)s, (void)x, (void)y; }

/* A small model of the public layers, as a user writes one (custom_model's
 * shape without attention): embedding; blocks of norm -> up (column) ->
 * GeLU -> down (row) + residual; final norm, LM head. Cases: units-* (its
 * parameters registered without sw_params_set_unit: pp 2, or dp 2 ZeRO-3),
 * zero3-other-unit (dp 2 ZeRO-3: every block reads block 0's up weight,
 * not gathered while block 1 runs), stage-head (pp 2: the last stage's
 * head is given no targets, a misuse only that stage sees while the first
 * stage waits for its gradient). one-rank, rank0-only: below. */
enum { MH = 16, MSEQ = 8, MBATCH = 4, MVOCAB = 256, MLAYERS = 2 };
typedef struct { sw_norm norm; sw_linear up, down; } mblock;
typedef struct { sw_tensor *n, *rstd, *u, *a; } msaved;
typedef struct {
    sw_ctx x;
    sw_params *p;
    sw_embedding emb;
    mblock blk[MLAYERS];
    sw_norm fnorm;
    int head_w, no_targets, other_unit;
    sw_lm_head *head;
    sw_tensor *tokens[2], *targets[2], *nf, *nf_rstd;
} mmodel;
static void m_keep(void *mp, sw_saved *s)
{
    mmodel *m = mp;
    msaved *k = s->state;
    k->n = sw_saved_new(s, "n", m->x.resid_rows, MH);
    k->rstd = sw_saved_new(s, "rstd", m->x.resid_rows, 1);
    k->u = sw_saved_new(s, "up", m->x.tokens, 4 * MH);
    k->a = sw_saved_new(s, "act", m->x.tokens, 4 * MH);
}
static void m_forward(void *mp, int step, int l, sw_saved *s, sw_tensor *in, sw_tensor *y)
{
    mmodel *m = mp;
    msaved *k = s->state;
    sw_norm_forward(&m->x, &m->blk[l].norm, in, k->n, NULL, k->rstd);
    sw_linear_forward(&m->x, &m->blk[m->other_unit ? 0 : l].up, k->n, k->n, k->u);
    sw_gelu_forward(&m->x, k->u, k->a);
    if (y) sw_residual_forward(&m->x, step, l, SW_DROP_MLP_OUT, in, sw_linear_row_forward(&m->x, &m->blk[l].down, k->a), y);
}
static void m_backward(void *mp, int step, int l, sw_saved *s, sw_tensor *in, sw_tensor *dres)
{
    mmodel *m = mp;
    msaved *k = s->state;
    sw_tensor *dn = sw_scratch(&m->x, "dn", m->x.resid_rows, MH), *dact = sw_scratch(&m->x, "dact", m->x.tokens, 4 * MH);
    sw_linear_row_backward(&m->x, &m->blk[l].down, sw_residual_backward(&m->x, step, l, SW_DROP_MLP_OUT, dres), k->a, dact);
    sw_gelu_backward(&m->x, k->u, dact);
    sw_copy_flat(sw_tensor_whole(sw_linear_backward(&m->x, &m->blk[l].up, dact, k->n, k->n), STARPU_R),
                 sw_tensor_whole(dn, STARPU_W), 0);
    sw_norm_backward(&m->x, &m->blk[l].norm, dn, in, NULL, k->rstd, dres, 1);
}
static void m_embed(void *mp, int step, sw_tensor *x0)
{
    mmodel *m = mp;
    sw_embedding_forward(&m->x, &m->emb, step, m->tokens[m->x.micro], x0);
}
static void m_embed_backward(void *mp, int step, sw_tensor *dx0)
{
    mmodel *m = mp;
    sw_embedding_backward(&m->x, &m->emb, step, m->tokens[m->x.micro], dx0);
}
static void m_head(void *mp, int step, sw_tensor *xL)
{
    mmodel *m = mp;
    (void)step;
    sw_norm_forward(&m->x, &m->fnorm, xL, m->nf, NULL, m->nf_rstd);
    sw_lm_head_forward(&m->x, m->head, m->nf, m->no_targets ? NULL : m->targets[m->x.micro]);
}
static void m_head_backward(void *mp, int step, sw_tensor *xL, sw_tensor *dxL)
{
    mmodel *m = mp;
    (void)step;
    sw_norm_backward(&m->x, &m->fnorm, sw_lm_head_backward(&m->x, m->head, m->targets[m->x.micro]), xL, NULL,
                     m->nf_rstd, dxL, 0);
}
static sw_tensor *m_loss(void *mp) { return sw_lm_head_loss(((mmodel *)mp)->head); }

/* the model on 2 ranks (pp 2 with 2 micro-batches, or dp 2 with ZeRO-3),
 * trained for a step; returns only if the library let the misuse pass */
static void model_case(const char *what)
{
    const int zero3 = !strcmp(what, "units-zero3") || !strcmp(what, "zero3-other-unit");
    const int pp = zero3 ? 1 : 2, dp = 2 / pp, micro = pp;
    sw_mesh *mesh = sw_mesh_create(&(sw_mesh_dims){.tp = 1, .ulysses = 1, .ring = 1, .dp = dp, .pp = pp});
    sw_comm *comm = sw_comm_create(mesh);
    mmodel *m = calloc(1, sizeof *m);
    m->p = sw_params_new(&(sw_params_config){.seed = 1, .tiles = 1, .dtype = SW_F32, .grad_accum = micro,
                                             .zero = pp == 1 ? 3 : 0, .grad_group = SW_GROUP_DP, .lr = 1e-3f},
                         comm);
    sw_ctx_init(&m->x, &(sw_ctx_config){.seq = MSEQ, .batch = MBATCH, .tp = 1, .ulysses = 1, .ring = 1, .dp = dp,
                                        .grad_accum = micro, .tiles = 1, .seed = 1}, comm, m->p);
    const int units = strncmp(what, "units-", 6) != 0; /* units-*: sw_params_set_unit forgotten */
    m->no_targets = !strcmp(what, "stage-head");
    m->other_unit = !strcmp(what, "zero3-other-unit");
    m->emb = sw_embedding_add(&m->x, MVOCAB, sw_vocab_padded(MVOCAB, 1), MH, MSEQ, 0.02f);
    for (int l = 0; l < MLAYERS; l++) {
        char n[3][16];
        for (int i = 0; i < 3; i++) snprintf(n[i], sizeof n[i], "h%d.%s", l, (const char *[]){"norm", "up", "down"}[i]);
        if (units) sw_params_set_unit(m->p, l);
        m->blk[l] = (mblock){sw_norm_add(&m->x, n[0], MH, 1, 1e-5f),
                             sw_linear_add(&m->x, n[1], SW_LINEAR_COLUMN, MH, 4 * MH, 0, 0.02f, NULL, 0, NULL),
                             sw_linear_add(&m->x, n[2], SW_LINEAR_ROW, 4 * MH, MH, 0, 0.02f, NULL, 0, NULL)};
    }
    if (units) sw_params_set_unit(m->p, SW_UNIT_AFTER);
    m->fnorm = sw_norm_add(&m->x, "final_norm", MH, 1, 1e-5f);
    m->head_w = sw_lm_head_add_weight(&m->x, "lm_head", MVOCAB, sw_vocab_padded(MVOCAB, 1), MH, 0.02f);
    sw_params_allocate(m->p);
    static const sw_block_ops ops = {m_keep, m_forward, m_backward, NULL, sizeof(msaved)};
    static const sw_model_ops mops = {m_embed, m_embed_backward, m_head, m_head_backward, m_loss, NULL, NULL, NULL};
    sw_pipeline *pipe = sw_pipeline_create(&m->x, &(sw_blocks_config){.layers = MLAYERS, .rows = m->x.resid_rows, .cols = MH},
                                           &ops, &mops, m, 0);
    if (sw_params_runs_unit(m->p, SW_UNIT_AFTER)) {
        m->head = sw_lm_head_create(&m->x, m->head_w, MVOCAB, sw_vocab_padded(MVOCAB, 1), MH);
        m->nf = sw_tensor_new2d("nf", SW_F32, m->x.resid_rows, MH);
        m->nf_rstd = sw_tensor_new2d("nf_rstd", SW_F32, m->x.resid_rows, 1);
    }
    int32_t tok[MSEQ * MBATCH], tgt[MSEQ * MBATCH];
    for (int i = 0; i < MSEQ * MBATCH; i++) tok[i] = i % MVOCAB, tgt[i] = (i + 1) % MVOCAB;
    for (int k = 0; k < micro; k++) {
        m->tokens[k] = sw_tensor_new2d("tokens", SW_I32, m->x.tokens, 1);
        m->targets[k] = sw_tensor_new2d("targets", SW_I32, m->x.tokens, 1);
        sw_ctx_load_tokens(&m->x, k, tok, tgt, m->tokens[k], m->targets[k]);
    }
    sw_pipeline_step(pipe, 1);
    float loss;
    sw_tensor_read_host(sw_pipeline_loss(pipe), &loss);
    printf("test_misuse %s: step 1 loss %.6f\n", what, loss);
}

/* a refusal on one rank only while the others wait for it in a collective
 * (one-rank: the last rank refuses, rank0-only: rank 0 does) */
static void one_rank_case(const char *what)
{
    const int me = sw_rank(), who = strcmp(what, "rank0-only") ? sw_world_size() - 1 : 0;
    if (me == who)
        sw_params_set_unit(sw_params_new(&(sw_params_config){.seed = 1, .tiles = 1, .grad_accum = 1}, NULL), -5);
    sw_world_min(me); /* the others wait here for the refusing rank */
}

/* one misuse of a layer; returns only if the library let it pass */
static void layer_case(const char *what)
{
    const int np = sw_world_size(), sp = !strncmp(what, "gathered-", 9), tp = sp ? 2 : 1;
    sw_mesh *mesh = sw_mesh_create(&(sw_mesh_dims){.tp = tp, .ulysses = 1, .ring = 1, .dp = np / tp, .pp = 1});
    sw_comm *comm = sw_comm_create(mesh);
    sw_params_config pc = {.seed = 1, .tiles = 1, .dtype = SW_F32, .grad_accum = 1, .grad_group = SW_GROUP_DP, .lr = 1e-3f};
    sw_params *p = sw_params_new(&pc, np > 1 ? comm : NULL);
    sw_ctx x;
    sw_ctx_init(&x, &(sw_ctx_config){.seq = 8, .batch = 4, .tp = tp, .sp = sp, .ulysses = 1, .ring = 1, .dp = np / tp,
                                     .grad_accum = 1, .tiles = 1, .seed = 1}, np > 1 ? comm : NULL, p);
    const int64_t h = 16, T = x.tokens, l = x.resid_rows;
    const int vp = sw_vocab_padded(256, tp);
    sw_embedding emb = sw_embedding_add(&x, 256, vp, h, 8, 0.02f);
    sw_norm ln = sw_norm_add(&x, "ln", h, 0, 1e-5f);
    sw_linear fc = sw_linear_add(&x, "fc", SW_LINEAR_COLUMN, h, 32, 1, 0.02f, NULL, 0, NULL);
    /* registered for its case only (the other cases' parameter counts stay) */
    sw_linear rep = !strcmp(what, "replicated-rows") ? sw_linear_add(&x, "rep", SW_LINEAR_REPLICATED, h, 8, 1, 0.02f, NULL, 0, NULL) : fc;
    sw_lm_head *hd = sw_lm_head_create(&x, emb.wte, 256, vp, h);
    sw_attention *att = sw_attention_create(&x, &(sw_attention_config){.heads = 2, .kv_heads = 2, .head_dim = 8, .causal = 1});
    if (strcmp(what, "linear-unallocated")) sw_params_allocate(p);
    sw_tensor *in = sw_tensor_new2d("in", SW_F32, l, h), *y = sw_tensor_new2d("y", SW_F32, l, h);
    sw_tensor *mean = sw_tensor_new2d("mean", SW_F32, l, 1), *rstd = sw_tensor_new2d("rstd", SW_F32, l, 1);
    sw_tensor *xg = sw_tensor_new2d("xg", SW_F32, T, h), *out = sw_tensor_new2d("out", SW_F32, T, 32 / tp);
    sw_tensor *tok = sw_tensor_new2d("tok", SW_I32, T, 1), *tgt = sw_tensor_new2d("tgt", SW_I32, T, 1);
    sw_tensor *wrong = sw_tensor_new2d("wrong", SW_F32, l, h / 2);
    if (!strcmp(what, "norm-mean")) sw_norm_forward(&x, &ln, in, y, NULL, rstd);
    else if (!strcmp(what, "norm-bwd-rstd")) sw_norm_backward(&x, &ln, y, in, mean, NULL, in, 1);
    else if (!strcmp(what, "norm-shape")) sw_norm_forward(&x, &ln, in, wrong, mean, rstd);
    else if (!strcmp(what, "linear-shape")) sw_linear_forward(&x, &fc, wrong, xg, out);
    else if (!strcmp(what, "linear-null")) sw_linear_forward(&x, &fc, in, xg, NULL);
    else if (!strcmp(what, "linear-unallocated")) sw_linear_forward(&x, &fc, in, xg, out);
    else if (!strcmp(what, "linear-index")) {
        sw_linear bad = fc;
        bad.w = 1000;
        sw_linear_forward(&x, &bad, in, xg, out);
    } else if (!strcmp(what, "embed-tokens")) sw_embedding_forward(&x, &emb, 1, NULL, y);
    else if (!strcmp(what, "replicated-rows")) { /* 3 rows: neither l, T nor B */
        sw_tensor *r3 = sw_tensor_new2d("r3", SW_F32, 3, h), *o3 = sw_tensor_new2d("o3", SW_F32, 3, 8);
        sw_linear_forward(&x, &rep, r3, r3, o3);
    }
    else if (!strcmp(what, "load-targets")) { /* targets without their tensor (tokens alone pass) */
        int32_t ids[32] = {0};
        sw_ctx_load_tokens(&x, 0, ids, NULL, tok, NULL);
        sw_ctx_load_tokens(&x, 0, ids, ids, tok, NULL);
    }
    else if (!strcmp(what, "lm-targets")) sw_lm_head_forward(&x, hd, in, NULL);
    else if (!strcmp(what, "lm-shape")) sw_lm_head_forward(&x, hd, wrong, tgt);
    else if (!strcmp(what, "gathered-null")) sw_linear_forward(&x, &fc, in, NULL, out);
    else if (!strcmp(what, "gathered-local")) sw_linear_forward(&x, &fc, in, in, out);
    else if (!strcmp(what, "attn-null")) {
        sw_attn_saved k;
        memset(&k, 0, sizeof k);
        sw_attention_forward(&x, att, 1, 0, &k);
    } else if (!strcmp(what, "blocks-op")) {
        sw_blocks_create(&(sw_blocks_config){.layers = 1, .rows = l, .cols = h}, &(sw_block_ops){.keep = keep, .forward = fwd},
                         NULL);
    } else if (!strcmp(what, "pipeline-ops")) {
        sw_pipeline_create(&x, &(sw_blocks_config){.layers = 1, .rows = l, .cols = h},
                           &(sw_block_ops){.keep = keep, .forward = fwd}, NULL, NULL, 0);
    } else if (!strcmp(what, "params-index")) sw_params_grad(p, sw_params_count(p));
    else { fprintf(stderr, "test_misuse: unknown case %s\n", what); exit(99); }
    (void)tok;
}

int main(int argc, char **argv)
{
    if (sw_init(&argc, &argv, NULL) != 0) return 99;
    if (argc != 2) { fprintf(stderr, "usage: test_misuse target|ignore|ignore-other|ignore-valid|token|micro|head-*|duplicate|key-length\n"); return 99; }
    const char *what = argv[1];
    if (!strncmp(what, "ctx-", 4)) { /* the registry against the context: from the defaults, one field off */
        sw_mesh *mesh = sw_mesh_create(NULL);
        sw_comm *comm = sw_comm_create(mesh);
        sw_params_config pc;
        sw_params_config_default(&pc);
        if (!strcmp(what, "ctx-grad-group")) pc.grad_group = (sw_group)0; /* as left out of an initializer */
        if (!strcmp(what, "ctx-seed")) pc.seed = 5;
        if (!strcmp(what, "ctx-grad-accum")) pc.grad_accum = 2;
        sw_params *p = sw_params_new(&pc, sw_world_size() > 1 ? comm : NULL);
        sw_ctx_config xc;
        sw_ctx_config_default(&xc);
        xc.seq = 8, xc.batch = 4, xc.dp = sw_world_size(), xc.seed = 1;
        sw_ctx x;
        sw_ctx_init(&x, &xc, sw_world_size() > 1 ? comm : NULL, p); /* must not return */
        printf("test_misuse %s: returned\n", what);
        return 3;
    }
    if (!strcmp(what, "duplicate")) { /* two parameters of one name */
        sw_params_config pc = {.seed = 1, .tiles = 1, .dtype = SW_F32, .grad_accum = 1, .grad_group = SW_GROUP_DP, .lr = 1e-3f};
        sw_params *p = sw_params_new(&pc, NULL);
        sw_param_desc d = {.name = "h0.ln_w", .rows = 1, .cols = 16, .init_value = 1.0f};
        sw_params_add(p, &d);
        snprintf(d.name, sizeof d.name, "h0.ln_b");
        sw_params_add(p, &d);
        snprintf(d.name, sizeof d.name, "h0.ln_w");
        sw_params_add(p, &d); /* must not return */
        printf("test_misuse %s: returned\n", what);
        return 3;
    }
    if (!strncmp(what, "units-", 6) || !strcmp(what, "stage-head") || !strcmp(what, "zero3-other-unit")) {
        model_case(what); /* must not return */
        printf("test_misuse %s: returned\n", what);
        return 3;
    }
    if (!strcmp(what, "one-rank") || !strcmp(what, "rank0-only")) {
        one_rank_case(what); /* must not return */
        printf("test_misuse %s: returned\n", what);
        return 3;
    }
    if (strncmp(what, "head-", 5) && strcmp(what, "target") && strncmp(what, "ignore", 6) && strcmp(what, "token") &&
        strcmp(what, "micro") && strcmp(what, "key-length")) {
        layer_case(what); /* must not return */
        printf("test_misuse %s: returned\n", what);
        return 3;
    }
    if (!strncmp(what, "head-", 5) || !strcmp(what, "key-length")) { /* a pooled head on the context's rows (dp = the world) */
        sw_mesh *mesh = sw_mesh_create(NULL);
        sw_comm *comm = sw_comm_create(mesh);
        sw_params_config pc = {.seed = 1, .tiles = 1, .dtype = SW_F32, .grad_accum = 1, .grad_group = SW_GROUP_DP, .lr = 1e-3f};
        sw_params *p = sw_params_new(&pc, sw_world_size() > 1 ? comm : NULL);
        sw_ctx x;
        sw_ctx_init(&x, &(sw_ctx_config){.seq = 8, .batch = 4, .tp = 1, .ulysses = 1, .ring = 1, .dp = sw_world_size(),
                                         .grad_accum = 1, .tiles = 1, .seed = 1}, sw_world_size() > 1 ? comm : NULL, p);
        if (!strcmp(what, "key-length")) sw_ctx_load_key_lengths(&x, 0, (const int32_t[4]){8, 3, 9, 1}); /* must not return */
        sw_seq_head *hd = sw_seq_head_create(&x, &(sw_seq_head_config){.name = "head", .hidden = 16, .outputs = 1, .std = 0.1f});
        sw_tensor *in = sw_tensor_new2d("in", SW_F32, x.resid_rows, 16), *y = sw_tensor_new2d("y", SW_F32, x.B, 1);
        if (strcmp(what, "head-unallocated")) sw_params_allocate(p);
        if (!strcmp(what, "head-targets")) y = sw_tensor_new2d("y", SW_F32, x.B, 3);
        sw_seq_head_forward(&x, hd, strcmp(what, "head-null") ? in : NULL, y);
        return 3;
    }
    sw_gpt_config c;
    sw_gpt_config_default(&c);
    c.layers = 1, c.hidden = 32, c.heads = 2, c.seq = 8, c.max_pos = 8, c.batch = 2, c.tiles = 1;
    c.dp = sw_world_size();
    if (!strcmp(what, "ignore-other")) c.ignore_index = -100;
    if (!strcmp(what, "ignore-valid")) c.ignore_index = 5; /* sw_gpt_create refuses */
    sw_mesh *mesh = sw_mesh_create(NULL);
    sw_comm *comm = sw_comm_create(mesh);
    sw_gpt *m = sw_gpt_create(&c, c.dp > 1 ? comm : NULL);
    int32_t tok[8 * 2], tgt[8 * 2];
    for (int i = 0; i < 16; i++) tok[i] = i % c.vocab, tgt[i] = (i + 1) % c.vocab;
    int k = 0;
    tgt[2] = c.ignore_index == -100 ? -100 : tgt[2]; /* accepted with the config's ignore index */
    if (!strcmp(what, "target") || !strcmp(what, "ignore-other")) tgt[5] = c.vocab + 1000;
    else if (!strcmp(what, "ignore")) tgt[3] = -100;
    else if (!strcmp(what, "token")) tok[9] = -1;
    else if (!strcmp(what, "micro")) k = 1;
    else { fprintf(stderr, "test_misuse: unknown case %s\n", what); return 99; }
    sw_gpt_load_micro_batch(m, k, tok, tgt); /* must not return */
    printf("test_misuse %s: sw_gpt_load_micro_batch returned\n", what);
    return 3;
}
