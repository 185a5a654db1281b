/* Generation with a KV cache (graphs.h, sw_gpt_generator), on tp = the
 * ranks: a small model trained 20 steps on token streams (each token 7
 * after the previous), then
 * - the training forward's loss on a batch (full causal attention, no
 *   cache) = the cross-entropy of the generator's logits, fed one position
 *   at a time, within relative 1e-5;
 * - greedy decoding with the cache (the prompt in one pass, then one
 *   position at a time) equals decoding that feeds the whole sequence again
 *   at every position (no cache reused): token for token over 64 tokens of
 *   2 sequences, the logits of every step within relative 1e-4;
 * - the tokens agree on every rank; rank 0 prints them ("tokens:"), for the
 *   script to compare tp 2 with 1 rank;
 * - sampling at temperature 1 with top-k 8: the same on every rank, the
 *   same again with the same seed, and not the greedy sequence.
 * usage: test_generate [--model gpt2|llama] [--kv-heads K] [--misuse token|length]
 *   --misuse: feeds a token outside the vocabulary, or more positions
 *   than max_len, to an untrained model's generator: the library must stop
 *   the program (exit 2; returning exits 3). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <starweave.h>

#include "testutil.h"

enum { B = 2, PROMPT = 8, NEW = 64, MAXLEN = PROMPT + NEW };

static sw_gpt *model;
static sw_gpt_generator *gen;

/* sequence b's token at position pos: each token 7 after the previous (mod vocab) */
static int32_t stream(int b, int pos, int vocab) { return (int32_t)((b * 11 + pos * 7 + 3) % vocab); }

/* greedy (temperature 0) or sampled continuation of the prompts; with
 * recompute, every position's whole sequence fed again from position 0;
 * logits: each step's [B, vl] appended (NULL: not kept) */
static void generate(int32_t *seq, int recompute, float temperature, float *logits, int vl)
{
    int32_t fed[MAXLEN * B], next[B];
    for (int i = 0; i < PROMPT * B; i++) fed[i] = seq[i];
    sw_gpt_generator_reset(gen);
    sw_gpt_generator_feed(gen, fed, PROMPT);
    for (int t = PROMPT; t < MAXLEN; t++) {
        sw_gpt_generator_sample(gen, temperature, temperature > 0 ? 8 : 0, 99, next);
        if (logits) sw_tensor_read_host(sw_gpt_generator_logits(gen), logits + (size_t)(t - PROMPT) * B * vl);
        for (int b = 0; b < B; b++) seq[t * B + b] = fed[t * B + b] = next[b];
        if (t == MAXLEN - 1) break;
        if (recompute) sw_gpt_generator_reset(gen), sw_gpt_generator_feed(gen, fed, t + 1);
        else sw_gpt_generator_feed(gen, fed + t * B, 1);
    }
}

/* 1 when every rank holds the same n tokens */
static int same_on_ranks(const int32_t *x, int n)
{
    int ok = 1;
    for (int i = 0; i < n; i++) {
        int lo = x[i], hi = x[i];
        SW_CHECK(MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
        SW_CHECK(MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        ok &= lo == hi;
    }
    return ok;
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    sw_gpt_config c;
    sw_gpt_config_default(&c);
    c.layers = 2, c.hidden = 64, c.heads = 4, c.vocab = 96, c.seq = 32, c.max_pos = MAXLEN, c.batch = 4;
    c.tiles = 2, c.lr = 1e-2f;
    const char *misuse = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--model")) c.model = sw_model_parse(v), i++;
        else if (!strcmp(a, "--kv-heads")) c.kv_heads = atoi(v), i++;
        else if (!strcmp(a, "--misuse")) misuse = v, i++;
        else { fprintf(stderr, "test_generate: unknown argument %s\n", a); return 99; }
    }
    c.tp = sw_world_size();
    char msg[256];
    if (sw_gpt_config_check(&c, msg, sizeof msg) != 0) { fprintf(stderr, "test_generate: %s\n", msg); return 99; }
    sw_mesh *mesh = sw_mesh_create(&(sw_mesh_dims){c.tp, 1, 1, 1, 1});
    sw_comm *comm = sw_comm_create(mesh);
    model = sw_gpt_create(&c, sw_world_size() > 1 ? comm : NULL);
    if (misuse) {
        static int32_t t[(MAXLEN + 1) * B];
        t[1] = strcmp(misuse, "token") ? 0 : 1 << 20;
        gen = sw_gpt_generator_create(model, B, MAXLEN);
        sw_gpt_generator_feed(gen, t, strcmp(misuse, "token") ? MAXLEN + 1 : 1);
        return 3;
    }
    /* training on the streams */
    int32_t *tok = calloc((size_t)c.seq * c.batch, sizeof *tok), *tgt = calloc((size_t)c.seq * c.batch, sizeof *tgt);
    float loss[2] = {0};
    for (int step = 1; step <= 20; step++) {
        for (int s = 0; s < c.seq; s++)
            for (int b = 0; b < c.batch; b++)
                tok[s * c.batch + b] = stream(b + step, s, c.vocab), tgt[s * c.batch + b] = stream(b + step, s + 1, c.vocab);
        sw_gpt_load_micro_batch(model, 0, tok, tgt);
        sw_gpt_step(model, step);
        if (step == 1 || step == 20) sw_tensor_read_host(sw_gpt_loss(model), &loss[step == 20]);
    }
    char line[600];
    snprintf(line, sizeof line, "tp %d: 20 training steps on the stream, loss %.4f -> %.4f", c.tp, loss[0], loss[1]);
    tu_check_ranks(line, loss[1] < 0.5f * loss[0]);

    const int vl = c.vocab_padded / c.tp;
    /* the oracle without the cache: the training forward's loss on the last batch = the cross-entropy of the
     * logits the generator gives position after position (every rank its vocabulary rows, summed over tp) */
    sw_gpt_load_micro_batch(model, 0, tok, tgt);
    sw_gpt_forward(model, 21);
    float train_loss;
    sw_tensor_read_host(sw_gpt_loss(model), &train_loss);
    gen = sw_gpt_generator_create(model, c.batch, c.seq);
    float *lg = calloc((size_t)c.batch * vl, sizeof *lg);
    double ce = 0;
    for (int t = 0; t < c.seq; t++) {
        sw_gpt_generator_feed(gen, tok + t * c.batch, 1);
        sw_tensor_read_host(sw_gpt_generator_logits(gen), lg);
        double part[2 * 64] = {0}; /* per sequence: sum of exp(logit) over this rank's rows, the target's logit */
        for (int b = 0; b < c.batch; b++)
            for (int j = 0; j < vl; j++) {
                const int v = sw_rank() * vl + j;
                if (v < c.vocab) part[2 * b] += exp(lg[b * vl + j]);
                if (v == tgt[t * c.batch + b]) part[2 * b + 1] = lg[b * vl + j];
            }
        SW_CHECK(MPI_Allreduce(MPI_IN_PLACE, part, 2 * c.batch, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
        for (int b = 0; b < c.batch; b++) ce += log(part[2 * b]) - part[2 * b + 1];
    }
    ce /= (double)c.seq * c.batch;
    snprintf(line, sizeof line, "%s tp %d: the training forward's loss %.7f = the cross-entropy of the generator's "
             "logits fed one position at a time %.7f (relative %.1e, bound 1e-5)", sw_model_name(c.model), c.tp,
             train_loss, ce, fabs(ce - train_loss) / train_loss);
    tu_check_ranks(line, fabs(ce - train_loss) <= 1e-5 * train_loss);
    free(lg);
    sw_gpt_generator_destroy(gen);
    gen = sw_gpt_generator_create(model, B, MAXLEN);
    int32_t cached[MAXLEN * B], full[MAXLEN * B], sampled[MAXLEN * B], again[MAXLEN * B];
    for (int i = 0; i < PROMPT * B; i++) cached[i] = full[i] = sampled[i] = again[i] = stream(i % B + 40, i / B, c.vocab);
    float *lc = calloc((size_t)NEW * B * vl, sizeof *lc), *lf = calloc((size_t)NEW * B * vl, sizeof *lf);
    generate(cached, 0, 0.0f, lc, vl);
    generate(full, 1, 0.0f, lf, vl);
    int diff = 0;
    for (int i = PROMPT * B; i < MAXLEN * B; i++) diff += cached[i] != full[i];
    double err = 0, scale = 0;
    for (int64_t i = 0; i < (int64_t)NEW * B * vl; i++) {
        double e = fabs((double)lc[i] - lf[i]);
        if (e > err) err = e;
        if (fabs(lf[i]) > scale) scale = fabs(lf[i]);
    }
    snprintf(line, sizeof line, "%s tp %d: greedy with the KV cache = feeding the whole sequence at every position, "
             "%d of %d tokens differ; logits of the %d steps: max |diff| / max |logit| %.2e (bound 1e-4)",
             sw_model_name(c.model), c.tp, diff, NEW * B, NEW, err / scale);
    tu_check_ranks(line, diff == 0 && err <= 1e-4 * scale);
    int follows = 0;
    for (int t = PROMPT; t < MAXLEN; t++)
        for (int b = 0; b < B; b++) follows += cached[t * B + b] == (cached[(t - 1) * B + b] + 7) % c.vocab;
    snprintf(line, sizeof line, "greedy continues the streams: %d of %d tokens 7 after the previous", follows, NEW * B);
    tu_check_ranks(line, follows > NEW * B / 2);
    tu_check_ranks("the greedy tokens are the same on every rank", same_on_ranks(cached, MAXLEN * B));
    generate(sampled, 0, 1.0f, NULL, vl);
    generate(again, 0, 1.0f, NULL, vl);
    diff = 0;
    for (int i = 0; i < MAXLEN * B; i++) diff += sampled[i] != cached[i];
    snprintf(line, sizeof line, "sampling (temperature 1, top-k 8): the same on every rank, the same with the same seed, "
             "%d of %d tokens unlike greedy", diff, NEW * B);
    tu_check_ranks(line, same_on_ranks(sampled, MAXLEN * B) && !memcmp(sampled, again, sizeof sampled) && diff > 0);
    if (sw_rank() == 0) {
        printf("tokens:");
        for (int i = PROMPT * B; i < MAXLEN * B; i++) printf(" %d", cached[i]);
        printf("\n");
    }
    free(lc), free(lf), free(tok), free(tgt);
    sw_gpt_generator_destroy(gen);
    sw_gpt_destroy(model);
    sw_comm_destroy(comm);
    sw_mesh_destroy(mesh);
    return tu_finish_all();
}
