/* A BERT-style masked LM from the public headers: the encoder trunk of
 * encoder.h (learned positions, pre-LN blocks, bidirectional attention),
 * token types (an extra table, "tte": the first half of each sequence type 0,
 * the second type 1), an LM head whose
 * loss counts only the masked positions (ignore index -100). Every strategy
 * comes from the layers: mpirun -np 4 encoder_mlm --tp 2 --sp --dp 2 (or
 * --ulysses 2 --ring 2, --micro K; --pad [ID]: sequences of different
 * lengths, below). Prints each step's loss and gradient norm before clipping,
 * then "grad NAME sumsq abssum" of each parameter's clipped gradient from the
 * ranks holding distinct parts of it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <starweave.h>
#include "cli.h"
#include "encoder.h"
#include "train_loop.h"

enum { MASK = ENC_VOCAB - 1, IGNORE = -100 };
typedef struct model {
    encoder e;                             /* first: the blocks read it */
    sw_embedding_table types;              /* token types: rows added to the embedding's */
    sw_lm_head *head;
    sw_tensor *tokens[ENC_BATCH], *type_ids[ENC_BATCH], *targets[ENC_BATCH]; /* per micro-batch */
    const int32_t *tok, *typ, *tgt;        /* the batch (every step the same) */
} model;
/* x0 = dropout(wte[token] + wpe[pos]) + tte[type]; the table's backward reads dx0 before the embedding's */
static void embed(void *mp, int step, sw_tensor *x0)
{
    model *m = mp; int k = m->e.x.micro;
    sw_embedding_forward(&m->e.x, &m->e.emb, step, m->tokens[k], x0), sw_embedding_table_forward(&m->e.x, &m->types, m->type_ids[k], x0);
}
static void embed_backward(void *mp, int step, sw_tensor *dx0)
{
    model *m = mp; int k = m->e.x.micro;
    sw_embedding_table_backward(&m->e.x, &m->types, m->type_ids[k], dx0), sw_embedding_backward(&m->e.x, &m->e.emb, step, m->tokens[k], dx0);
}
/* the final norm, the LM head and its cross-entropy over the masked positions */
static void head(void *mp, int step, sw_tensor *xL)
{
    model *m = mp; (void)step;                                /* the step's counted rows, once: */
    if (m->e.x.micro == 0) sw_lm_head_count(&m->e.x, m->head, m->targets);
    sw_norm_forward(&m->e.x, &m->e.final_norm, xL, m->e.nf, m->e.nf_mean, m->e.nf_rstd);
    sw_lm_head_forward(&m->e.x, m->head, m->e.nf, m->targets[m->e.x.micro]);
}
static void head_backward(void *mp, int step, sw_tensor *xL, sw_tensor *dxL)
{
    model *m = mp; (void)step;
    sw_norm_backward(&m->e.x, &m->e.final_norm, sw_lm_head_backward(&m->e.x, m->head, m->targets[m->e.x.micro]), xL,
                     m->e.nf_mean, m->e.nf_rstd, dxL, 0);
}
static sw_tensor *loss(void *mp) { return sw_lm_head_loss(((model *)mp)->head); }
static void embed_traffic(void *mp, sw_traffic *t)
{ model *m = mp; sw_embedding_traffic(&m->e.x, &m->e.emb, t), sw_embedding_table_traffic(&m->e.x, &m->types, t); }
static void head_traffic(void *mp, sw_traffic *t)
{ model *m = mp; sw_norm_traffic(&m->e.x, &m->e.final_norm, t), sw_lm_head_traffic(&m->e.x, m->head, t); }
static const sw_model_ops model_ops = {.embed_forward = embed, .embed_backward = embed_backward, .head_forward = head,
    .head_backward = head_backward, .loss = loss, .embed_traffic = embed_traffic, .head_traffic = head_traffic};

/* the training loop's part (train_loop.h): every micro-batch's token types, tokens and targets */
static void load(void *mp, int step)
{
    model *m = mp; (void)step;
    for (int k = 0; k < m->e.x.c.grad_accum; k++)
        sw_ctx_load_tokens(&m->e.x, k, m->typ, NULL, m->type_ids[k], NULL), sw_ctx_load_tokens(&m->e.x, k, m->tok, m->tgt, m->tokens[k], m->targets[k]);
}

int main(int argc, char **argv)
{
    encoder_flags f = {0};
    int all = 0, wts = 0, pad = 0;
    const cli_flag flags[] = {
        ENCODER_FLAGS(&f),
        CLI_BOOL("--no-mask-ignore", &all, "every target counted (not only the masked positions)"),
        CLI_BOOL("--mask-weights", &wts, "row weights 1 on the masked positions, 0 elsewhere, every target real"),
        CLI_INT_OPT("--pad", &pad, "1", 0, ENC_VOCAB - 1, "ID",
                    "sequences of different lengths: sequence b's tokens from position\n"
                    "32 - (b*7 mod 16) on are the token ID (1 when not given; 0: none), keys masked"),
        CLI_END};
    cli_parse("encoder_mlm", "[mpirun -np N] encoder_mlm [options]",
              "A BERT-style masked LM (token types, bidirectional attention, loss on the masked positions).\n"
              "Every strategy comes from the layers: mpirun -np 4 encoder_mlm --tp 2 --sp --dp 2.\n", flags, argc, argv);
    all |= wts;
    model *m = calloc(1, sizeof *m);
    if (!m) sw_usage_error("out of memory");
    encoder_begin(&m->e, &f, 3e-3f, pad > 0, &argc, &argv);
    m->types = sw_embedding_table_add(&m->e.x, "tte", 2, ENC_HIDDEN, 0.02f); /* 2 token types */
    encoder_blocks(&m->e);
    int head_w = sw_lm_head_add_weight(&m->e.x, "lm_head", ENC_VOCAB, m->e.vocab_padded, ENC_HIDDEN, 0.02f);
    encoder_finish(&m->e, &model_ops, m);
    m->head = sw_lm_head_create(&m->e.x, head_w, ENC_VOCAB, m->e.vocab_padded, ENC_HIDDEN), sw_lm_head_set_ignore_index(m->head, IGNORE);
    for (int k = 0; k < f.micro; k++) {
        m->tokens[k] = sw_tensor_new2d("tokens", SW_I32, m->e.x.tokens, 1), m->type_ids[k] = sw_tensor_new2d("type_ids", SW_I32, m->e.x.tokens, 1);
        m->targets[k] = sw_tensor_new2d("targets", SW_I32, m->e.x.tokens, 1);
    }
    /* data from a seed: random tokens below MASK; ~15 % masked (the token MASK, the target the original token), every other
     * target IGNORE (--no-mask-ignore, --mask-weights: the original); --pad ID: sequence b's tokens from position
     * ENC_SEQ - (b*7 % (ENC_SEQ/2)) on the token ID (default 1), their targets IGNORE, their keys masked (key_padding) */
    int32_t tok[ENC_SEQ * ENC_BATCH], typ[ENC_SEQ * ENC_BATCH], tgt[ENC_SEQ * ENC_BATCH], len[ENC_BATCH]; float w[ENC_SEQ * ENC_BATCH]; uint64_t r = 1234;
    for (int i = 0; i < ENC_SEQ * ENC_BATCH; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        int32_t t = (int32_t)((r >> 33) % MASK), masked = (r >> 20) % 100 < 15;
        tok[i] = masked ? MASK : t, tgt[i] = masked || all ? t : IGNORE, typ[i] = i / ENC_BATCH >= ENC_SEQ / 2, w[i] = (float)masked;
        if (len[i % ENC_BATCH] = ENC_SEQ - (i % ENC_BATCH * 7 % (ENC_SEQ / 2)), pad && i / ENC_BATCH >= len[i % ENC_BATCH]) tok[i] = pad, tgt[i] = IGNORE, w[i] = 0;
    }
    for (int k = 0; k < f.micro; k++) /* they stay */
        wts ? sw_lm_head_load_weights(&m->e.x, m->head, k, w) : (void)0, pad ? sw_ctx_load_key_lengths(&m->e.x, k, len) : (void)0;
    m->tok = tok, m->typ = typ, m->tgt = tgt;
    train_loop t = {.prog = "encoder_mlm", .steps = f.steps, .model = m, .load = load, .pipe = m->e.pipe, .params = m->e.p, .grad_norm = 1};
    train_loop_run(&t);
    train_print_grads(m->e.p, &m->e.x); /* the last step's gradients, from the ranks holding distinct parts */
    train_traffic_report(m->e.pipe, m->e.comm, f.steps); /* the traffic model beside what the collectives counted */
    for (int k = 0; k < f.micro; k++) sw_tensor_free(m->tokens[k]), sw_tensor_free(m->type_ids[k]), sw_tensor_free(m->targets[k]);
    sw_lm_head_destroy(m->head), encoder_destroy(&m->e), free(m);
    return 0;
}
