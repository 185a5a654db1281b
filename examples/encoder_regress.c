/* A BERT-style encoder from the public headers: the encoder trunk of encoder.h (learned positions, pre-LN blocks,
 * bidirectional attention), a pooled
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

#include <starweave.h>
#include "cli.h"
#include "encoder.h"
#include "train_loop.h"

enum { OUT = 4 /* --per-token */ };

typedef struct model {
    encoder e;                               /* first: the blocks read it */
    sw_seq_head *head;                       /* pooling, the head, its loss: heads.h; or per token: */
    sw_linear tok_head; sw_row_mse *rows; sw_tensor *pred; /* a replicated linear on the rows, MSE per row */
    int gathered; sw_tensor *nfg, *predg, *dpredg, *dnf;       /* --per-token-gathered (with tp and sp): on the T rows */
    sw_tensor *tokens[ENC_BATCH], *targets[ENC_BATCH];       /* per micro-batch */
    const int32_t *tok, *len, *cls; const float *y, *yt; int pad, classes; /* the batch (every step the same) */
} model;

static void embed(void *mp, int step, sw_tensor *x0)
{
    sw_embedding_forward(&((model *)mp)->e.x, &((model *)mp)->e.emb, step, ((model *)mp)->tokens[((model *)mp)->e.x.micro], x0);
}
static void embed_backward(void *mp, int step, sw_tensor *dx0)
{
    sw_embedding_backward(&((model *)mp)->e.x, &((model *)mp)->e.emb, step, ((model *)mp)->tokens[((model *)mp)->e.x.micro], dx0);
}
/* the final norm, the pooled head and its loss (or the per-token linear and MSE) */
static void head(void *mp, int step, sw_tensor *xL)
{
    model *m = mp; sw_tensor *tg = m->targets[m->e.x.micro]; (void)step;
    sw_norm_forward(&m->e.x, &m->e.final_norm, xL, m->e.nf, m->e.nf_mean, m->e.nf_rstd);
    if (m->gathered) { /* T rows: the l rows gathered over TP; the loss on this rank's l of the predictions */
        sw_tensor *in = sw_tp_f_forward(&m->e.x.tp, m->e.nf, m->nfg);
        sw_linear_forward(&m->e.x, &m->tok_head, in, in, m->predg);
        sw_copy(sw_tensor_whole(m->pred, STARPU_W), sw_tensor_tiles(m->predg, SW_ROWS, m->e.x.tp.t, STARPU_R)[m->e.x.tp.rank]);
        sw_row_mse_forward(&m->e.x, m->rows, m->pred, tg);
    } else if (m->rows) sw_linear_forward(&m->e.x, &m->tok_head, m->e.nf, m->e.nf, m->pred), sw_row_mse_forward(&m->e.x, m->rows, m->pred, tg);
    else sw_seq_head_forward(&m->e.x, m->head, m->e.nf, tg);
}
/* --per-token-gathered's backward: every TP rank gets the gradient of all T predictions (an all-gather), so the
 * linear's weight gradient is whole on each (no sum over TP: T rows); this rank's l rows of its input gradient */
static sw_tensor *gathered_backward(model *m, sw_tensor *tg)
{
    sw_tensor *dpred = sw_row_mse_backward(&m->e.x, m->rows, m->pred, tg), *in = m->nfg;
    sw_tensor *dall = sw_tp_g_backward(&m->e.x.tp, dpred, m->dpredg);
    sw_tensor *din = sw_linear_backward(&m->e.x, &m->tok_head, dall, in, in);
    sw_copy(sw_tensor_whole(m->dnf, STARPU_W), sw_tensor_tiles(din, SW_ROWS, m->e.x.tp.t, STARPU_R)[m->e.x.tp.rank]);
    return m->dnf;
}
static void head_backward(void *mp, int step, sw_tensor *xL, sw_tensor *dxL)
{
    model *m = mp; sw_tensor *tg = m->targets[m->e.x.micro]; (void)step;
    sw_tensor *dnf = m->gathered ? gathered_backward(m, tg) : m->rows ? sw_linear_backward(&m->e.x, &m->tok_head, sw_row_mse_backward(&m->e.x, m->rows, m->pred, tg), m->e.nf, m->e.nf)
                             : sw_seq_head_backward(&m->e.x, m->head, tg);
    sw_norm_backward(&m->e.x, &m->e.final_norm, dnf, xL, m->e.nf_mean, m->e.nf_rstd, dxL, 0);
}
static sw_tensor *loss(void *mp) { return ((model *)mp)->rows ? sw_row_mse_loss(((model *)mp)->rows) : sw_seq_head_loss(((model *)mp)->head); }
static void embed_traffic(void *mp, sw_traffic *t) { sw_embedding_traffic(&((model *)mp)->e.x, &((model *)mp)->e.emb, t); }
static void head_traffic(void *mp, sw_traffic *t)
{
    model *m = mp; sw_norm_traffic(&m->e.x, &m->e.final_norm, t);
    m->rows ? sw_linear_traffic(&m->e.x, &m->tok_head, t), sw_row_mse_traffic(&m->e.x, m->rows, t) : sw_seq_head_traffic(&m->e.x, m->head, t);
    if (m->gathered) /* the input's all-gather forward, the predictions' gradient's backward, per micro-batch */
        t->forward[SW_GROUP_TP] += m->e.x.c.grad_accum * sw_tp_bytes(&m->e.x.tp, SW_TP_F_FORWARD, m->e.x.tokens, ENC_HIDDEN),
        t->backward[SW_GROUP_TP] += m->e.x.c.grad_accum * sw_tp_bytes(&m->e.x.tp, SW_TP_G_BACKWARD, m->e.x.tokens, OUT);
}
static const sw_model_ops model_ops = {embed, embed_backward, head, head_backward, loss, embed_traffic, head_traffic, NULL};

/* the training loop's part (train_loop.h): every micro-batch's tokens, key lengths (--pad), targets */
static void load(void *mp, int step)
{
    model *m = mp; (void)step;
    for (int k = 0; k < m->e.x.c.grad_accum; k++)
        sw_ctx_load_tokens(&m->e.x, k, m->tok, NULL, m->tokens[k], NULL), m->pad ? sw_ctx_load_key_lengths(&m->e.x, k, m->len) : (void)0,
        m->rows ? sw_ctx_load_floats(&m->e.x, k, m->yt, OUT, m->targets[k])
                : sw_ctx_load_seq_targets(&m->e.x, k, m->classes ? (const void *)m->cls : (const void *)m->y, m->targets[k]);
}

int main(int argc, char **argv)
{
    encoder_flags f = {0};
    int classes, pool_first = 0, per_token = 0, gathered = 0, pad = 0;
    const cli_flag flags[] = {
        ENCODER_FLAGS(&f),
        CLI_INT("--classes", &classes, "0", 0, CLI_INT_MAX, "C", "cross-entropy over C >= 2 classes (0: MSE on a float target)"),
        CLI_BOOL("--pool-first", &pool_first, "pool the first token, not the mean"),
        CLI_BOOL("--per-token", &per_token, "a linear on every row, MSE per token (not with --classes)"),
        CLI_BOOL("--per-token-gathered", &gathered, "--per-token on the rows gathered over the ranks (all T rows)"),
        CLI_INT_OPT("--pad", &pad, "1", 0, ENC_VOCAB - 1, "ID",
                    "padded sequences: sequence b's tokens from position 32 - (b*7 mod 16)\n"
                    "on are the token ID (1 when not given; 0: none), keys masked"),
        CLI_END};
    cli_parse("encoder_regress", "[mpirun -np N] encoder_regress [options]",
              "A BERT-style encoder with a pooled head (MSE, or cross-entropy over classes).\n"
              "Every strategy comes from the layers: mpirun -np 4 encoder_regress --tp 2 --sp --dp 2.\n", flags, argc, argv);
    per_token = per_token || gathered;
    if (classes == 1 || classes < 0 || (classes && per_token)) sw_usage_error("--classes (%d) must be at least 2, without --per-token", classes);
    model *m = calloc(1, sizeof *m);
    if (!m) sw_usage_error("out of memory");
    encoder_begin(&m->e, &f, 5e-4f, pad > 0, &argc, &argv);
    encoder_blocks(&m->e);
    if (per_token) /* rows that differ per rank under sp: SW_LINEAR_REPLICATED */
        m->tok_head = sw_linear_add(&m->e.x, "tok_head", SW_LINEAR_REPLICATED, ENC_HIDDEN, OUT, 1, 0.1f, NULL, 0, NULL), m->rows = sw_row_mse_create(&m->e.x, OUT);
    else m->head = sw_seq_head_create(&m->e.x, &(sw_seq_head_config){.name = "head", .hidden = ENC_HIDDEN, .bias = 1, .std = 0.1f,
        .pool = pool_first ? SW_POOL_FIRST : SW_POOL_MEAN, .loss = classes ? SW_LOSS_CLASSES : SW_LOSS_MSE, .outputs = classes ? classes : 1});
    encoder_finish(&m->e, &model_ops, m);
    m->pred = per_token ? sw_tensor_new2d("tok_pred", SW_F32, m->e.x.resid_rows, OUT) : NULL;
    m->gathered = gathered && m->e.x.tokens != m->e.x.resid_rows; /* without sp the l rows are the T rows already */
    if (m->gathered)
        m->nfg = sw_tensor_new2d("final_norm_gathered", SW_F32, m->e.x.tokens, ENC_HIDDEN), m->predg = sw_tensor_new2d("tok_pred_all", SW_F32, m->e.x.tokens, OUT),
        m->dpredg = sw_tensor_new2d("dtok_pred_all", SW_F32, m->e.x.tokens, OUT), m->dnf = sw_tensor_new2d("dfinal_norm", SW_F32, m->e.x.resid_rows, ENC_HIDDEN);
    for (int k = 0; k < f.micro; k++)
        m->tokens[k] = sw_tensor_new2d("tokens", SW_I32, m->e.x.tokens, 1), m->targets[k] = sw_tensor_new2d("targets", classes ? SW_I32 : SW_F32, per_token ? m->e.x.resid_rows : m->e.x.B, per_token ? OUT : 1);
    /* data: sequence b counts up by b + 1 from 3b; its target sin(0.7 b), or its class b mod C, or per token sin(0.3 p + 0.05 token);
     * --pad ID: sequence b's tokens from position ENC_SEQ - (b*7 % (ENC_SEQ/2)) on the token ID (default 1), their keys masked */
    int32_t tok[ENC_SEQ * ENC_BATCH], cls[ENC_BATCH], len[ENC_BATCH]; float y[ENC_BATCH], yt[ENC_SEQ * ENC_BATCH * OUT];
    for (int b = 0; b < ENC_BATCH; b++) {
        y[b] = sinf(0.7f * (float)b), cls[b] = classes ? b % classes : 0, len[b] = ENC_SEQ - (b * 7 % (ENC_SEQ / 2));
        for (int p = 0; p < ENC_SEQ; p++) { /* per token: OUT targets of the unpadded token (--pad ID changes none) */
            int32_t t = (p * (b + 1) + 3 * b) % ENC_VOCAB, i = p * ENC_BATCH + b;
            for (int j = 0; j < OUT; j++) yt[i * OUT + j] = sinf(0.3f * (float)p + 0.05f * (float)t + (float)j);
            tok[i] = pad && p >= len[b] ? pad : t;
        }
    }
    m->tok = tok, m->len = len, m->cls = cls, m->y = y, m->yt = yt, m->pad = pad, m->classes = classes;
    train_loop t = {.prog = "encoder_regress", .steps = f.steps, .model = m, .load = load, .pipe = m->e.pipe, .params = m->e.p, .grad_norm = 1};
    train_loop_run(&t);
    train_print_grads(m->e.p, &m->e.x); /* the last step's gradients, from the ranks holding distinct parts */
    train_traffic_report(m->e.pipe, m->e.comm, f.steps); /* the traffic model beside what the collectives counted */
    for (int k = 0; k < f.micro; k++) sw_tensor_free(m->tokens[k]), sw_tensor_free(m->targets[k]);
    sw_tensor_free(m->nfg), sw_tensor_free(m->predg), sw_tensor_free(m->dpredg), sw_tensor_free(m->dnf), sw_tensor_free(m->pred);
    sw_row_mse_destroy(m->rows), sw_seq_head_destroy(m->head), encoder_destroy(&m->e), free(m);
    return 0;
}
