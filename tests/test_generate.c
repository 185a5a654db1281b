/* Generation with a KV cache (gpt.h, sw_gpt_generator), on tp = the
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
 *   same again with the same seed, and not the greedy sequence; every
 *   sampled token (there, and from the same logits at temperature 2 with
 *   every candidate and 0.5 with top-k 5) = the token the inverse CDF
 *   gives, recomputed on the host in double from the generator's logits
 *   (every rank's rows, all-gathered) and heads.c's uniform draw of (seed,
 *   position, sequence).
 * --sampler: sw_lm_sample alone (no model), on a context of tp = the
 *   ranks, on fixed logits of 4 sequences that are flat enough (spread 1.5)
 *   that a draw is rarely the greedy token, the padded rows of the
 *   vocabulary at 8 (above every real one: a padded row offered as a
 *   candidate would win); vocab 96 (padded to 128 on 1 rank, 256 at tp 2:
 *   the second rank holds only padding) and 200 (both ranks hold real
 *   tokens), temperature 0, 0.5, 1 and 2, top-k 1, 5 and all, positions 0
 *   .. 11: every token = the host's recomputation (the top k of the ids
 *   below the vocabulary, largest logit first, then the smaller id; the
 *   softmax of (logit - max) / T in double; the first whose cumulative sum
 *   passes u x the sum, u heads.c's draw), every id below the vocabulary,
 *   and with every candidate at temperature 1 and 2 the draws of one
 *   sequence differ by position (the logits are the same at every
 *   position) and are not all the greedy token. Rank 0 prints the tokens
 *   ("sampled:") for the script to compare tp 2 with 1 rank.
 * usage: test_generate [--model gpt2|llama] [--kv-heads K] [--misuse token|length] [--sampler]
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

/* heads.c's uniform draw in [0, 1) from (seed, position, sequence):
 * splitmix64, its top 53 bits (copied: the recomputation's u) */
static double draw(uint64_t seed, uint64_t pos, uint64_t b)
{
    uint64_t z = seed ^ (pos * 0x9E3779B97F4A7C15ull) ^ (b * 0xD1B54A32D192ED03ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

/* the token sampling must give, recomputed in double from one sequence's
 * logits lg[0 .. vocab) (the padded rows past vocab never read): the ids
 * by logit, largest first, then the smaller id; temperature 0: the first;
 * else the top k (0: all) weighted exp((logit - max) / T), and the first
 * whose cumulative weight passes u times their sum (the last if none) */
static int32_t inverse_cdf(const float *lg, int vocab, double T, int k, double u)
{
    int *id = malloc(sizeof(int) * (size_t)vocab);
    for (int i = 0; i < vocab; i++) { /* insertion sort: a few hundred ids */
        int j = i;
        while (j > 0 && (lg[id[j - 1]] < lg[i] || (lg[id[j - 1]] == lg[i] && id[j - 1] > i))) id[j] = id[j - 1], j--;
        id[j] = i;
    }
    int m = T == 0 ? 1 : k > 0 && k < vocab ? k : vocab, pick = m - 1;
    double sum = 0, acc = 0;
    for (int j = 0; j < m && T > 0; j++) sum += exp(((double)lg[id[j]] - lg[id[0]]) / T);
    for (int j = 0; j < m - 1 && T > 0; j++)
        if ((acc += exp(((double)lg[id[j]] - lg[id[0]]) / T)) > u * sum) { pick = j; break; }
    int32_t t = id[pick];
    free(id);
    return t;
}

/* every rank's [rows, vl] columns of a vocab-parallel [rows, vl x ranks] */
static float *gather_vocab(const float *mine, int rows, int vl)
{
    const int np = sw_world_size();
    float *parts = malloc(sizeof(float) * (size_t)rows * vl * np), *all = malloc(sizeof(float) * (size_t)rows * vl * np);
    SW_CHECK(MPI_Allgather(mine, rows * vl, MPI_FLOAT, parts, rows * vl, MPI_FLOAT, MPI_COMM_WORLD));
    for (int r = 0; r < np; r++)
        for (int b = 0; b < rows; b++)
            memcpy(all + (size_t)b * vl * np + (size_t)r * vl, parts + ((size_t)r * rows + b) * vl, sizeof(float) * vl);
    free(parts);
    return all;
}

/* sampled tokens against the recomputation, over the sampled generations */
static int sampled_n, sampled_off, sampled_outside;

/* greedy (temperature 0) or sampled continuation of the prompts (top_k:
 * 0 all); with recompute, every position's whole sequence fed again from
 * position 0; logits: each step's [B, vl] appended (NULL: not kept). A
 * sampled token is checked against inverse_cdf of the logits. */
static void generate(int32_t *seq, int recompute, float temperature, int top_k, float *logits, int vl, int vocab)
{
    int32_t fed[MAXLEN * B], next[B];
    float *mine = malloc(sizeof(float) * (size_t)B * vl);
    for (int i = 0; i < PROMPT * B; i++) fed[i] = seq[i];
    sw_gpt_generator_reset(gen);
    sw_gpt_generator_feed(gen, fed, PROMPT);
    for (int t = PROMPT; t < MAXLEN; t++) {
        sw_gpt_generator_sample(gen, temperature, top_k, 99, next);
        if (logits) sw_tensor_read_host(sw_gpt_generator_logits(gen), logits + (size_t)(t - PROMPT) * B * vl);
        if (temperature > 0) { /* the token the inverse CDF gives at the generator's position: the one drawn, and
                                * those drawn from the same logits at temperature 2 (every candidate) and 0.5 (top-k 5) */
            sw_tensor_read_host(sw_gpt_generator_logits(gen), mine);
            float *all = gather_vocab(mine, B, vl);
            const float temps[3] = {temperature, 2.0f, 0.5f};
            const int ks[3] = {top_k, 0, 5};
            for (int s = 0; s < 3; s++) {
                int32_t got[B];
                if (s == 0) memcpy(got, next, sizeof got);
                else sw_gpt_generator_sample(gen, temps[s], ks[s], 99, got);
                for (int b = 0; b < B; b++) {
                    const int32_t want = inverse_cdf(all + (size_t)b * vl * sw_world_size(), vocab, temps[s], ks[s],
                                                     draw(99, (uint64_t)sw_gpt_generator_position(gen), (uint64_t)b));
                    sampled_n++, sampled_off += got[b] != want, sampled_outside += got[b] < 0 || got[b] >= vocab;
                }
            }
            free(all);
        }
        for (int b = 0; b < B; b++) seq[t * B + b] = fed[t * B + b] = next[b];
        if (t == MAXLEN - 1) break;
        if (recompute) sw_gpt_generator_reset(gen), sw_gpt_generator_feed(gen, fed, t + 1);
        else sw_gpt_generator_feed(gen, fed + t * B, 1);
    }
    free(mine);
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

/* --sampler: sw_lm_sample on fixed logits against inverse_cdf (see the top) */
static void sampler_checks(sw_comm *comm)
{
    enum { NS = 4, NPOS = 12 };
    const int np = sw_world_size(), vocabs[2] = {96, 200}, ks[3] = {1, 5, 0};
    const float temps[4] = {0.0f, 0.5f, 1.0f, 2.0f};
    sw_params_config pc; /* seed, tiles and grad_accum: the context's */
    sw_params_config_default(&pc);
    pc.grad_group = SW_GROUP_DP, pc.lr = 1e-3f;
    sw_params *p = sw_params_new(&pc, np > 1 ? comm : NULL);
    sw_ctx x;
    sw_ctx_init(&x, &(sw_ctx_config){.seq = 8, .batch = NS, .tp = np, .ulysses = 1, .ring = 1, .dp = 1, .grad_accum = 1,
                                     .tiles = 1}, np > 1 ? comm : NULL, p);
    char line[600];
    static int32_t drawn[2 * 4 * 3 * NPOS * NS]; /* every token, printed at the end */
    int nd = 0;
    for (int iv = 0; iv < 2; iv++) {
        const int V = vocabs[iv], Vp = sw_vocab_padded(V, np), vl = Vp / np;
        float *all = malloc(sizeof(float) * (size_t)NS * Vp), *mine = malloc(sizeof(float) * (size_t)NS * vl);
        for (int b = 0; b < NS; b++)
            for (int v = 0; v < Vp; v++) { /* a hash of (b, v) in [0, 1.5); the padding at 8 */
                uint64_t z = (uint64_t)(b * 1000 + v + 1) * 0x9E3779B97F4A7C15ull;
                z ^= z >> 29;
                all[(size_t)b * Vp + v] = v < V ? 1.5f * (float)((z >> 40) % 100003) / 100003.0f : 8.0f;
            }
        for (int b = 0; b < NS; b++)
            memcpy(mine + (size_t)b * vl, all + (size_t)b * Vp + (size_t)sw_rank() * vl, sizeof(float) * vl);
        sw_tensor *lg = sw_tensor_new2d("logits", SW_F32, NS, vl);
        sw_tensor_write_host(lg, mine);
        for (int it = 0; it < 4; it++)
            for (int ik = 0; ik < 3; ik++) {
                const float T = temps[it];
                const int k = ks[ik];
                int32_t tok[NPOS][NS];
                int off = 0, outside = 0, hot = 0, moves = 0;
                for (int pos = 0; pos < NPOS; pos++) {
                    sw_lm_sample(&x, lg, V, T, k, 7, (uint64_t)pos, tok[pos]);
                    for (int b = 0; b < NS; b++) {
                        const float *row = all + (size_t)b * Vp;
                        off += tok[pos][b] != inverse_cdf(row, V, T, k, draw(7, (uint64_t)pos, (uint64_t)b));
                        outside += tok[pos][b] < 0 || tok[pos][b] >= V;
                        hot += tok[pos][b] != inverse_cdf(row, V, 0.0, 0, 0.0); /* not the greedy token */
                        drawn[nd++] = tok[pos][b];
                    }
                }
                for (int b = 0; b < NS; b++) { /* sequences whose draws differ by position */
                    int moved = 0;
                    for (int pos = 1; pos < NPOS; pos++) moved |= tok[pos][b] != tok[0][b];
                    moves += moved;
                }
                const int flat = T >= 1.0f && k == 0; /* every candidate, flat: the position shows */
                snprintf(line, sizeof line, "sw_lm_sample vocab %d (padded %d, %d per rank), temperature %.1f, top-k %d: "
                         "%d of %d draws differ from the inverse CDF recomputed in double, %d ids at or above the "
                         "vocabulary, %d not the greedy token, %d of %d sequences' draws differ by position%s",
                         V, Vp, vl, T, k, off, NPOS * NS, outside, hot, moves, NS, flat ? " (must: all)" : "");
                tu_check_ranks(line, off == 0 && outside == 0 && same_on_ranks(&tok[0][0], NPOS * NS) &&
                                         (!flat || (moves == NS && hot > 0)));
            }
        sw_tensor_free(lg);
        free(all), free(mine);
    }
    if (sw_rank() == 0) {
        printf("sampled:");
        for (int i = 0; i < nd; i++) printf(" %d", drawn[i]);
        printf("\n");
    }
    sw_ctx_destroy(&x);
    sw_params_destroy(p);
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    sw_gpt_config c;
    sw_gpt_config_default(&c);
    c.layers = 2, c.hidden = 64, c.heads = 4, c.vocab = 96, c.seq = 32, c.max_pos = MAXLEN, c.batch = 4;
    c.tiles = 2, c.lr = 1e-2f;
    const char *misuse = NULL;
    int sampler = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--model")) c.model = sw_model_parse(v), i++;
        else if (!strcmp(a, "--kv-heads")) c.kv_heads = atoi(v), i++;
        else if (!strcmp(a, "--misuse")) misuse = v, i++;
        else if (!strcmp(a, "--sampler")) sampler = 1;
        else { fprintf(stderr, "test_generate: unknown argument %s\n", a); return 99; }
    }
    c.tp = sw_world_size();
    char msg[256];
    if (sw_gpt_config_check(&c, msg, sizeof msg) != 0) { fprintf(stderr, "test_generate: %s\n", msg); return 99; }
    sw_mesh *mesh = sw_mesh_create(&(sw_mesh_dims){c.tp, 1, 1, 1, 1});
    sw_comm *comm = sw_comm_create(mesh);
    if (sampler) {
        sampler_checks(comm);
        sw_comm_destroy(comm);
        sw_mesh_destroy(mesh);
        return tu_finish_all();
    }
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
    generate(cached, 0, 0.0f, 0, lc, vl, c.vocab);
    generate(full, 1, 0.0f, 0, lf, vl, c.vocab);
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
    generate(sampled, 0, 1.0f, 8, NULL, vl, c.vocab);
    generate(again, 0, 1.0f, 8, NULL, vl, c.vocab);
    diff = 0;
    for (int i = 0; i < MAXLEN * B; i++) diff += sampled[i] != cached[i];
    snprintf(line, sizeof line, "sampling (temperature 1, top-k 8): the same on every rank, the same with the same seed, "
             "%d of %d tokens unlike greedy", diff, NEW * B);
    tu_check_ranks(line, same_on_ranks(sampled, MAXLEN * B) && !memcmp(sampled, again, sizeof sampled) && diff > 0);
    snprintf(line, sizeof line, "sampling from the generator's logits at each step of those 2 runs (temperature 1 "
             "top-k 8, and from the same logits 2 with every candidate and 0.5 top-k 5): %d of %d tokens differ from "
             "the inverse CDF recomputed in double, %d outside the vocabulary [0, %d) (padded to %d)", sampled_off,
             sampled_n, sampled_outside, c.vocab, c.vocab_padded);
    tu_check_ranks(line, sampled_n == 2 * 3 * NEW * B && sampled_off == 0 && sampled_outside == 0);
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
