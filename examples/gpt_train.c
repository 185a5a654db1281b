/* gpt_train: train a GPT-2 shaped model with starweave on the tokens of --data
 * (raw bytes, llm.c shards, Megatron datasets: data.c) or a byte-level corpus.
 * Every flag is validated before StarPU starts; bad input exits with 2. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starweave.h"
#include "cli.h"
#include "train_loop.h"
#include "data.h"
#include "plan_main.h"
#include "tokenizer.h"

typedef struct train_opts {
    sw_gpt_config cfg;
    int steps;
    int ncpus;
    int algo;                /* sw_comm_algo: choices in its order */
    const char *sched;
    int gemm;                /* sw_gemm_backend */
    const char *data;
    const char *log;
    int quiet;
    int profile;
    int memory_report, memory_plan, memory_budget_mb;
    int counters;
    const char *save, *resume;
    const char *load_weights, *save_weights; /* weights.h: safetensors or llm.c files */
    int weights_format;
    const char *trace, *dag;
    int save_every;
    int sample_every, sample_len; /* --sample-every, --sample-len */
    float sample_temperature;
    const char *generate;         /* --generate PROMPT: continue it and stop, no training */
    int prompt_text;              /* --prompt-text: PROMPT is text, encoded by GPT-2's BPE on rank 0 */
    const char *tokenizer;        /* --tokenizer FILE: llm.c's token-to-bytes table, samples as text */
    int offload_budget_mb;
    int ncuda;
    unsigned where;          /* sw_set_task_where: 0 (any), STARPU_CPU or STARPU_CUDA */
    sw_comm_backend backend;
} train_opts;

static void parse_args(int argc, char **argv, train_opts *o)
{
    sw_gpt_config_default(&o->cfg);
    o->cfg.max_pos = 0;
    o->steps = 60;
    o->ncpus = -1;
    o->sched = NULL;
    o->gemm = SW_GEMM_AUTO;
    o->data = NULL;
    o->log = "gpt_train.csv";
    o->quiet = 0;
    o->profile = 0;
    o->memory_report = 0;
    o->counters = 0;
    o->save = o->resume = o->trace = o->dag = NULL;
    o->save_every = 0;
    o->sample_every = 0, o->sample_len = 64, o->sample_temperature = 1.0f, o->generate = NULL, o->tokenizer = NULL;
    o->prompt_text = 0;
    o->load_weights = o->save_weights = NULL;
    o->weights_format = -1;
    o->offload_budget_mb = 0;
    o->memory_plan = o->memory_budget_mb = 0;
    o->ncuda = -1;
    o->where = 0;
    o->backend = SW_BACKEND_AUTO;
    int seed = (int)o->cfg.seed, no_zigzag = 0, dtype = -1, device = -1, comm = -1, recompute = -1, weights_format = -1;
    o->algo = SW_ALGO_AUTO;
    const char *model = NULL, *gemm = NULL;
    /* The flags, their values and their help. The rules on the values (ranges, what goes with what) are
     * checked below and by sw_gpt_config_check, with messages naming the rule; the table's ranges are the
     * int's and float's, so what it refuses is what is not a number, an unknown flag or a missing value. */
    const double I0 = CLI_INT_MIN, I1 = CLI_INT_MAX, F0 = -CLI_NO_MAX, F1 = CLI_NO_MAX;
    const cli_flag flags[] = {
        CLI_HEADING("model"),
        CLI_STRING("--model", &model, NULL, "M", "gpt2 (LayerNorm, learned positions, GeLU, biases, tied head) or llama\n"
                   "(RMSNorm, rotary positions, SwiGLU, no biases, untied head) (gpt2)"),
        CLI_INT("--layers", &o->cfg.layers, NULL, I0, I1, "N", "transformer blocks (2)"),
        CLI_INT("--hidden", &o->cfg.hidden, NULL, I0, I1, "N", "hidden size (128)"),
        CLI_INT("--heads", &o->cfg.heads, NULL, I0, I1, "N", "attention heads, must divide hidden (4)"),
        CLI_INT("--kv-heads", &o->cfg.kv_heads, NULL, I0, I1, "N", "K/V heads (grouped-query attention), must divide heads (= heads)"),
        CLI_INT("--vocab", &o->cfg.vocab, NULL, I0, I1, "N", "vocabulary, padded to a multiple of 128*tp (256)"),
        CLI_INT("--ffn", &o->cfg.ffn, NULL, I0, I1, "N", "MLP features (gpt2: 4*hidden; llama: 8/3*hidden rounded up to 64)"),
        CLI_FLOAT("--rope-theta", &o->cfg.rope_theta, NULL, F0, F1, "X", "llama: rotary position base (10000)"),
        CLI_INT("--max-pos", &o->cfg.max_pos, NULL, I0, I1, "N", "learned positions (default: seq)"),
        CLI_FLOAT("--dropout", &o->cfg.dropout, NULL, F0, F1, "P", "dropout probability (0)"),
        CLI_CHOICE_META("--dtype", &dtype, "fp32|bf16", "T", "fp32, or bf16: GEMMs on bf16 operands with fp32 accumulation, fp32\n"
                        "master weights, gradients, optimizer and the other ops (fp32)"),
        CLI_HEADING("training"),
        CLI_INT("--seq", &o->cfg.seq, NULL, I0, I1, "N", "sequence length (64)"),
        CLI_INT("--batch", &o->cfg.batch, NULL, I0, I1, "N", "sequences per step (8)"),
        CLI_INT("--steps", &o->steps, NULL, I0, I1, "N", "training steps (60)"),
        CLI_FLOAT("--lr", &o->cfg.lr, NULL, F0, F1, "X", "AdamW learning rate (1e-3)"),
        CLI_FLOAT("--weight-decay", &o->cfg.weight_decay, NULL, F0, F1, "X", "AdamW weight decay (0)"),
        CLI_FLOAT("--clip-grad", &o->cfg.clip_grad, NULL, F0, F1, "X", "scale the gradients to a global L2 norm of at most X before AdamW (0: off)"),
        CLI_INT("--ignore-index", &o->cfg.ignore_index, NULL, I0, I1, "N", "targets equal to N count for nothing in the loss (PyTorch's -100; outside\n"
                "[0, vocab)); the data's targets never are: the head's count runs (default: none)"),
        CLI_INT("--seed", &seed, NULL, I0, I1, "N", "seed of the init, the data order and dropout (1234)"),
        CLI_STRING("--data", &o->data, NULL, "FILE", "train on the tokens of FILE, its format told by its header, never its name:\n"
                   "an llm.c token shard (int32 header: magic 20240520, version 1, count;\n"
                   "uint16 tokens), a Megatron indexed dataset (FILE, FILE.bin or FILE.idx:\n"
                   "the .idx begins with MMIDIDX; integer dtypes), else the bytes of FILE\n"
                   "(default: synthetic corpus)"),
        CLI_HEADING("parallelism (launch with mpirun -np <product of the degrees>)"),
        CLI_INT("--tp", &o->cfg.tp, NULL, I0, I1, "N", "tensor-parallel degree (1): heads, MLP and vocabulary split"),
        CLI_BOOL("--sp", &o->cfg.sp, "sequence parallelism: norms, dropout, residuals on seq/tp rows"),
        CLI_BOOL("--tp-recompute-allgather", &o->cfg.tp_recompute_allgather, "with --sp, gather the norm outputs again in backward\n"
                 "instead of keeping them"),
        CLI_INT("--dp", &o->cfg.dp, NULL, I0, I1, "N", "data-parallel degree (1): each dp rank takes batch/dp sequences"),
        CLI_INT("--grad-accum", &o->cfg.grad_accum, NULL, I0, I1, "K", "micro-batches per step and rank (1), gradients summed; with --pp\n"
                "they flow through the stages one after another"),
        CLI_INT("--pp", &o->cfg.pp, NULL, I0, I1, "N", "pipeline stages (1): each runs layers/N blocks (the first also the\n"
                "embedding, the last the head); ranks: tp x ulysses x ring x dp x pp"),
        CLI_INT("--pp-inflight", &o->cfg.pp_inflight, NULL, I0, I1, "Q", "micro-batches whose activations a stage holds at once: 0 = 1F1B\n"
                "(pp - stage; default), grad-accum = GPipe"),
        CLI_INT("--pp-virtual", &o->cfg.pp_virtual, NULL, I0, I1, "V", "chunks per stage (1): stage s runs chunks s, s + pp, ... of\n"
                "layers/(pp V) blocks (Megatron's interleaved schedule)"),
        CLI_BOOL("--dw-last", &o->cfg.dw_last, "weight-gradient GEMMs at the lowest task priority, below forward\n"
                 "work (a priority, not a split: see --zero-bubble; without dp, ulysses and ring)"),
        CLI_BOOL("--zero-bubble", &o->cfg.zero_bubble, "Zero Bubble's split (ZB-H1): weight gradients as units of their own\n"
                 "in the pipeline's schedule, filling its waits (tp, dp, ulysses, ring 1)"),
        CLI_FLOAT("--bucket-mb", &o->cfg.bucket_mb, NULL, F0, F1, "X", "gradient bucket size of the dp all-reduce in MiB (25)"),
        CLI_INT("--zero", &o->cfg.zero, NULL, I0, I1, "N", "ZeRO stage over dp (and ulysses x ring) (0): 1 AdamW states and update\n"
                "sharded; 2 also gradients (reduce-scattered per block as its backward\n"
                "ends); 3 also parameters (sharded at rest, each block gathered into a\n"
                "pool before its forward and its backward)"),
        CLI_INT("--zero-prefetch", &o->cfg.zero_prefetch, NULL, I0, I1, "K", "ZeRO-3: blocks gathered ahead of the one computing; the pool holds\n"
                "K + 1 blocks' parameters (1)"),
        CLI_INT("--ulysses", &o->cfg.ulysses, NULL, I0, I1, "N", "DeepSpeed-Ulysses degree (1): sequence split, heads exchanged by\n"
                "all-to-all around attention"),
        CLI_INT("--ring", &o->cfg.ring, NULL, I0, I1, "N", "Ring attention degree (1): sequence split, K/V blocks passed around\n"
                "the ring; with --ulysses: USP (ranks: tp x ulysses x ring x dp)"),
        CLI_BOOL("--no-zigzag", &no_zigzag, "ring: contiguous sequence blocks instead of chunks r and 2R-1-r"),
        CLI_HEADING("activation memory"),
        CLI_CHOICE_META("--recompute", &recompute, "none|selective|full", "MODE",
                        "none: keep the attention probabilities (s^2 per head; ring 1 only);\n"
                        "selective: recompute scores, softmax and dropout in backward;\n"
                        "full: keep only block inputs, redo each block's forward in backward\n"
                        "(selective)"),
        CLI_INT("--recompute-every", &o->cfg.recompute_every, NULL, I0, I1, "K", "full: keep the input of every K-th block, redo groups of K (1)"),
        CLI_BOOL("--offload", &o->cfg.offload, "saved activations leave the memory that computes after their forward\n"
                 "and come back (prefetched, last block first) for backward: to a StarPU\n"
                 "disk node in $TMPDIR, or with CUDA workers to pinned main RAM"),
        CLI_INT("--offload-budget-mb", &o->offload_budget_mb, NULL, I0, I1, "N", "with --offload, memory (MiB) StarPU may allocate in main RAM (disk\n"
                "node) or on each GPU (CUDA); the rest is evicted (0: no limit)"),
        CLI_HEADING("runtime"),
        CLI_INT("--ncpus", &o->ncpus, NULL, I0, I1, "N", "CPU workers per rank (default: cores / ranks per node)"),
        CLI_INT("--ncuda", &o->ncuda, NULL, I0, I1, "N", "CUDA workers per rank, GPU builds (default: every GPU with one rank\n"
                "per node, else one GPU per rank; 0: none)"),
        CLI_CHOICE_META("--device", &device, "any|cuda|cpu", "D", "where ops run: any (the scheduler chooses; the default), cuda (every\n"
                        "op with a CUDA implementation on a GPU) or cpu"),
        CLI_CHOICE_META("--comm", &comm, "auto|mpi|nccl", "B", "collectives: auto (NCCL when every rank has a GPU of its own and there\n"
                        "are 2 ranks or more, else StarPU-MPI), mpi or nccl (auto)"),
        CLI_CHOICE_META("--collective-algo", &o->algo, "auto|ring|direct|mpi", "A",
                        "StarPU-MPI's collectives (comm.h's sw_comm_algo): auto (MPI's own up to 4 MiB,\n"
                        "else ring or direct by size), ring, direct, or mpi (MPI's own at every size)"),
        CLI_STRING("--sched", &o->sched, NULL, "NAME", "StarPU scheduler (default: $STARPU_SCHED or lws)"),
        CLI_STRING("--gemm", &gemm, NULL, "B", "CPU GEMM kernel: auto ($SW_GEMM, else oneDNN on CPUs with AVX-512 where\n"
                   "built with it, else OpenBLAS), openblas or onednn"),
        CLI_INT("--tiles", &o->cfg.tiles, NULL, I0, I1, "N", "row/column tiles per op (4)"),
        CLI_STRING("--log", &o->log, NULL, "FILE", "CSV log of step,loss,ms,tokens_per_s (gpt_train.csv)"),
        CLI_BOOL("--profile", &o->profile, "print per-codelet time (steps 2..N) and the GEMM share"),
        CLI_BOOL("--memory-report", &o->memory_report, "saved activation bytes per layer and rank: model and registered; per rank\n"
                 "the memory model beside StarPU's peak"),
        CLI_BOOL("--memory-plan", &o->memory_plan, "print each rank's memory model (parameter state, saved activations,\n"
                 "logits) and stop, nothing allocated (exit 2 where it does not fit)"),
        CLI_INT("--memory-budget-mb", &o->memory_budget_mb, NULL, I0, I1, "N", "MiB of main RAM each rank may count on: a model that needs more is\n"
                "refused before any allocation (default: the node's MemAvailable / ranks;\n"
                "simulated: the simulated rank's main RAM, default no limit)"),
        CLI_BOOL("--counters", &o->counters, "at the end, on every rank: what ran (GEMMs per backend, bf16 GEMMs and\n"
                 "casts, collectives per kind, MPI-run ones) and the exact bytes sent on\n"
                 "each group beside the traffic model"),
        CLI_STRING("--trace", &o->trace, NULL, "FILE", "trace of every task and request, all ranks: FILE (Chrome/Perfetto JSON),\n"
                   "FILE.paje (ViTE), FILE.overlap.json; prints the overlap per step"),
        CLI_STRING("--dag", &o->dag, NULL, "FILE", "task graph of the first step run (step 1, or the one after --resume),\n"
                   "all ranks, as Graphviz dot: tasks and MPI requests, their dependencies"),
        CLI_HEADING("checkpoints"),
        CLI_STRING("--save", &o->save, NULL, "DIR", "write a checkpoint into DIR after the last step (and every --save-every)"),
        CLI_INT("--save-every", &o->save_every, NULL, I0, I1, "N", "also every N steps (0: only at the end)"),
        CLI_STRING("--resume", &o->resume, NULL, "DIR", "continue from DIR's latest checkpoint: the same model (its shape and\n"
                   "--seed), any parallel layout (tp, ulysses, ring, dp, --zero): a\n"
                   "checkpoint saved under another one is re-sharded into this run's\n"
                   "(a line names both layouts)"),
        CLI_HEADING("generation (a KV cache; not with pp, ulysses, ring or ZeRO-3)"),
        CLI_INT("--sample-every", &o->sample_every, NULL, I0, I1, "N", "every N steps rank 0 prints a continuation of the first 8 tokens of\n"
                "the batch's first sequence (0: never)"),
        CLI_INT("--sample-len", &o->sample_len, NULL, I0, I1, "L", "tokens generated per sample (64)"),
        CLI_FLOAT("--sample-temperature", &o->sample_temperature, NULL, F0, F1, "T", "softmax temperature (1; 0: the most likely token)"),
        CLI_STRING("--generate", &o->generate, NULL, "TEXT", "no training: continue TEXT (bytes; with a vocabulary above 256, token\n"
                   "ids separated by spaces, or text with --prompt-text) by --sample-len\n"
                   "tokens, with the parameters of --resume DIR or --load-weights FILE,\n"
                   "and stop"),
        CLI_BOOL("--prompt-text", &o->prompt_text, "--generate's TEXT is text (a vocabulary above 256): rank 0 encodes it\n"
                 "with GPT-2's BPE, running starweave-prepare-data --encode TEXT (no\n"
                 "shell), and every rank gets the ids. The encoder: $SW_PREPARE_DATA,\n"
                 "else from the build tree the source tree's tools/prepare-data, else\n"
                 "the one beside gpt_train, else starweave-prepare-data from PATH"),
        CLI_STRING("--tokenizer", &o->tokenizer, NULL, "FILE", "llm.c's token-to-bytes table (gpt2_tokenizer.bin, from\n"
                   "starweave-prepare-data): samples print as text"),
        CLI_HEADING("weights (docs/weights.md)"),
        CLI_STRING("--load-weights", &o->load_weights, NULL, "FILE", "start from the weights of FILE, its format told by its header: Hugging\n"
                   "Face safetensors (GPT-2 or LLaMA transformers names; F32, BF16, F16) or an\n"
                   "llm.c GPT-2 checkpoint (magic 20240326); the flags must describe its model"),
        CLI_STRING("--save-weights", &o->save_weights, NULL, "FILE", "write the weights after the last step (with --steps 0: right after\n"
                   "creating or loading them, no training: a conversion)"),
        CLI_CHOICE_META("--weights-format", &weights_format, "safetensors|llmc|llmc-bf16", "F",
                        "of --save-weights: safetensors (F32), llmc (llm.c's version 3, fp32) or\n"
                        "llmc-bf16 (llm.c's version 5, gpt2_124M_bf16.bin: bf16, rounded to nearest\n"
                        "even) (safetensors)"),
        CLI_BOOL("--quiet", &o->quiet, "only the final line"),
        CLI_HEADING("planner (docs/planner.md): the best layout of the model's flags, nothing trained"),
        PLAN_CLI_FLAGS("rank every legal layout (tp, sp, ulysses, ring, dp, ZeRO, pp, chunks,\n"
                       "micro-batches, in-flight quota, recomputation) by predicted ms/step, with\n"
                       "its memory per rank (the exact model); exit 2 when none fits the budget",
                       "validate the flags for --plan-ranks ranks as a run would (the flags'\n"
                       "rules, the world, the pipeline's schedule) and stop: exit 0 or 2"),
        CLI_END};
    cli_parse("gpt_train", "gpt_train [options]",
              "Trains a GPT-2 shaped model (pre-LN, learned positions, tied LM head) whose\n"
              "training step is a StarPU task graph. Tokens come from --data (raw bytes, an\n"
              "llm.c token shard or a Megatron indexed dataset), or are the bytes of a built-in\n"
              "deterministic synthetic corpus.\n", flags, argc, argv);
    /* the values named by words, into the library's enums */
    if (model && (o->cfg.model = sw_model_parse(model)) < 0) sw_usage_error("model must be gpt2 or llama (model = %s)", model);
    if (gemm && (o->gemm = sw_gemm_backend_parse(gemm)) < 0) sw_usage_error("--gemm must be auto, openblas or onednn (got %s)", gemm);
    if (dtype >= 0) o->cfg.dtype = dtype ? SW_BF16 : SW_F32;
    if (device >= 0) o->where = (unsigned[]){0, STARPU_CUDA, STARPU_CPU}[device];
    if (comm >= 0) o->backend = (sw_comm_backend[]){SW_BACKEND_AUTO, SW_BACKEND_MPI, SW_BACKEND_NCCL}[comm];
    if (recompute >= 0) o->cfg.recompute = sw_recompute_parse((const char *[]){"none", "selective", "full"}[recompute]);
    if (weights_format >= 0) o->weights_format = sw_weights_format_parse((const char *[]){"safetensors", "llmc", "llmc-bf16"}[weights_format]);
    if (no_zigzag) o->cfg.zigzag = 0;
    o->cfg.seed = (uint64_t)(uint32_t)seed;
    if (o->cfg.max_pos == 0) o->cfg.max_pos = o->cfg.seq;
    if (o->steps < 0 || (o->steps == 0 && !o->save_weights))
        sw_usage_error("steps must be positive, or 0 with --save-weights (a conversion) (steps = %d)", o->steps);
    if (o->weights_format >= 0 && !o->save_weights) sw_usage_error("weights-format needs --save-weights FILE");
    if (o->weights_format < 0) o->weights_format = SW_WEIGHTS_SAFETENSORS;
    if (o->load_weights && o->resume)
        sw_usage_error("--load-weights and --resume both set the parameters: give one");
    if (o->save_every < 0) sw_usage_error("save-every must not be negative (save-every = %d)", o->save_every);
    if (o->save_every > 0 && !o->save) sw_usage_error("save-every needs --save DIR");
    if (o->sample_every < 0 || o->sample_len < 1 || !(o->sample_temperature >= 0.0f))
        sw_usage_error("sample-every must not be negative (%d), sample-len must be positive (%d), "
                       "sample-temperature must not be negative (%g)", o->sample_every, o->sample_len,
                       o->sample_temperature);
    if (o->generate && !o->resume && !o->load_weights)
        sw_usage_error("--generate needs trained parameters: --resume DIR or --load-weights FILE");
    if (o->prompt_text && !o->generate) sw_usage_error("--prompt-text needs --generate TEXT");
    if (o->prompt_text && o->cfg.vocab <= 256)
        sw_usage_error("--prompt-text encodes TEXT with GPT-2's BPE: it needs a vocabulary above 256 (vocab = %d; "
                       "with a byte vocabulary --generate's TEXT is bytes already)", o->cfg.vocab);
    if (o->offload_budget_mb < 0)
        sw_usage_error("offload-budget-mb must not be negative (offload-budget-mb = %d)", o->offload_budget_mb);
    if (o->offload_budget_mb > 0 && !o->cfg.offload) sw_usage_error("offload-budget-mb needs --offload");
    if (o->memory_budget_mb < 0)
        sw_usage_error("memory-budget-mb must not be negative (memory-budget-mb = %d)", o->memory_budget_mb);
    if (o->ncpus == 0 || o->ncpus < -1) sw_usage_error("ncpus must be positive (ncpus = %d)", o->ncpus);
    if (o->ncuda < -1) sw_usage_error("ncuda must not be negative (ncuda = %d)", o->ncuda);
    if (o->ncuda == 0 && o->where == STARPU_CUDA) sw_usage_error("--device cuda needs CUDA workers (ncuda = 0)");
    char msg[256];
    if (sw_gpt_config_check(&o->cfg, msg, sizeof msg) != 0) sw_usage_error("%s", msg);
}

/* Deterministic synthetic corpus: sentences of a small vocabulary drawn by a
 * fixed LCG, so that there is structure to learn (loss falls quickly). */
static unsigned char *synthetic_corpus(size_t n)
{
    static const char *words[] = {"the", "task", "graph", "runs", "on", "every", "worker", "and",
                                  "data", "moves", "while", "compute", "overlaps", "with", "a",
                                  "tile", "of", "attention", "star", "weave"};
    const size_t nwords = sizeof words / sizeof words[0];
    unsigned char *buf = malloc(n);
    if (!buf) { perror("malloc"); exit(1); }
    uint64_t s = 42;
    size_t i = 0, in_sentence = 0;
    while (i < n) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const char *w = words[(s >> 33) % nwords];
        for (const char *p = w; *p && i < n; p++) buf[i++] = (unsigned char)*p;
        if (++in_sentence == 6 + (s >> 60) % 4) {
            if (i < n) buf[i++] = '.';
            if (i < n) buf[i++] = '\n';
            in_sentence = 0;
        } else if (i < n) {
            buf[i++] = ' ';
        }
    }
    return buf;
}

/* Batch of step `step`: sequence b starts at a pseudo-random offset; rows in [s, b] order. */
static void fill_batch(const int32_t *data, size_t n, const sw_gpt_config *c, int step, int32_t *tok,
                       int32_t *tgt)
{
    size_t span = n - (size_t)c->seq - 1;
    for (int b = 0; b < c->batch; b++) {
        uint64_t s = (c->seed + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)step << 20 | (uint64_t)b);
        s ^= s >> 31; s *= 0xBF58476D1CE4E5B9ull; s ^= s >> 27;
        size_t start = (size_t)(s % (span + 1));
        for (int p = 0; p < c->seq; p++) {
            tok[p * c->batch + b] = data[start + p];
            tgt[p * c->batch + b] = data[start + p + 1];
        }
    }
}

/* Every rank's memory model, printed by rank 0 (MiB). */
static void print_memory_model(sw_gpt_memory r)
{
    int world = sw_world_size(), me = sw_rank();
    double mine[7] = {r.need, r.state, r.saved, r.logits, r.other, r.scratch, sw_memory_available_per_rank()};
    double *all = me == 0 ? malloc(sizeof mine * (size_t)world) : NULL;
    SW_CHECK(MPI_Gather(mine, 7, MPI_DOUBLE, all, 7, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    for (int k = 0; me == 0 && k < world; k++) {
        const double *f = all + 7 * k;
        char more[96];
        if (f[6] > 0) snprintf(more, sizeof more, "this rank may count on %.2f MiB more", f[6] / SW_MIB);
        else snprintf(more, sizeof more, sw_simulated() ? "simulated: no memory limit without --memory-budget-mb"
                                                        : "this rank's memory unknown");
        printf("memory: rank %d: the model needs %.2f MiB: parameter state %.2f, saved activations %.2f, logits "
               "%.2f, other tensors %.2f; beside it the layers' scratch %.2f (%s)\n", k, f[0] / SW_MIB,
               f[1] / SW_MIB, f[2] / SW_MIB, f[3] / SW_MIB, f[4] / SW_MIB, f[5] / SW_MIB, more);
    }
    free(all);
}

/* Saved activations per layer and rank (model of the library, and the
 * bytes of the tensors the builder keeps for the block: "registered"),
 * printed by rank 0. */
static void memory_report(sw_gpt *m)
{
    const sw_gpt_config *c = sw_gpt_get_config(m);
    int world = sw_world_size(), me = sw_rank();
    double *all = malloc(sizeof(double) * 2 * (size_t)c->layers * (size_t)world);
    double *mine = malloc(sizeof(double) * 2 * (size_t)c->layers);
    if (!all || !mine) { perror("malloc"); exit(1); }
    for (int l = 0; l < c->layers; l++) {
        sw_block_memory r = sw_gpt_saved_bytes(m, l);
        mine[2 * l] = r.model_bytes;
        mine[2 * l + 1] = r.registered_bytes;
    }
    SW_CHECK(MPI_Gather(mine, 2 * c->layers, MPI_DOUBLE, all, 2 * c->layers, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    if (me == 0) {
        printf("memory: saved activations per layer (fp32, recompute %s); model: the shapes each block declares "
               "it keeps (sw_blocks_saved_model; docs/memory.md)\n", sw_recompute_name(c->recompute));
        printf("memory: %5s %5s %14s %14s %8s\n", "rank", "layer", "model bytes", "registered", "diff");
        for (int r = 0; r < world; r++)
            for (int l = 0; l < c->layers; l++) {
                double mo = all[2 * (r * c->layers + l)], me_ = all[2 * (r * c->layers + l) + 1];
                if (mo > 0) printf("memory: %5d %5d %14.0f %14.0f %7.2f%%\n", r, l, mo, me_, 100 * (me_ - mo) / mo);
                else printf("memory: %5d %5d %14.0f %14.0f %8s\n", r, l, mo, me_, me_ == 0 ? "0" : "inf");
            }
    }
    free(all);
    free(mine);
    /* the registry's parameter state per rank (values, gradients, ZeRO shards, AdamW moments, buckets, the
     * ZeRO-2/3 pool): the model tests/test_memory.sh checks against StarPU's allocator to the byte */
    double state[2] = {sw_params_bytes(sw_gpt_params(m)), sw_params_pool_bytes(sw_gpt_params(m))}, *states = me == 0 ? malloc(sizeof state * (size_t)world) : NULL;
    SW_CHECK(MPI_Gather(state, 2, MPI_DOUBLE, states, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    for (int r = 0; me == 0 && r < world; r++)
        printf("memory: rank %d: parameter state (ZeRO-%d) model %.0f bytes, of them the ZeRO-2/3 pool %.0f\n", r, c->zero,
               states[2 * r], states[2 * r + 1]);
    free(states);
    /* StarPU's memory nodes, each rank's line gathered on rank 0 */
    enum { LINE = 320 };
    char line[LINE] = "", *lines = me == 0 ? malloc((size_t)world * LINE) : NULL;
    sw_node_memory nodes[8];
    int n = sw_memory_nodes(nodes, 8), at = 0;
    for (int k = 0; k < n && at < LINE; k++)
        at += snprintf(line + at, (size_t)(LINE - at), "%s%s: peak %.2f MiB used (of %.0f), in %.2f MiB, out %.2f MiB",
                       k ? "; " : "", nodes[k].name, nodes[k].peak / SW_MIB, nodes[k].total / SW_MIB,
                       nodes[k].bytes_in / SW_MIB, nodes[k].bytes_out / SW_MIB);
    SW_CHECK(MPI_Gather(line, LINE, MPI_CHAR, lines, LINE, MPI_CHAR, 0, MPI_COMM_WORLD));
    if (me == 0) {
        printf("memory: StarPU memory nodes per rank (used: what StarPU counts; in/out: bytes over its buses during "
               "the run)\n");
        for (int r = 0; r < world; r++) printf("memory: rank %d: %s\n", r, lines + (size_t)r * LINE);
    }
    free(lines);
    print_memory_model(sw_gpt_memory_model(m));
}

/* --memory-plan: the model of every rank (refused where it does not fit), nothing allocated */
static int memory_plan(const sw_gpt_config *cfg, sw_comm *comm, sw_mesh *mesh)
{
    print_memory_model(sw_gpt_memory_plan(cfg, sw_world_size() > 1 ? comm : NULL));
    sw_comm_destroy(comm);
    sw_mesh_destroy(mesh);
    sw_shutdown();
    return 0;
}

/* --tokenizer's table (every rank loads and checks it; vocab 0: none) */
static token_table sample_tokens;

/* n tokens after prompt[0 .. p) (every rank takes part: tensor-parallel
 * collectives), printed by rank 0 after `label`: with --tokenizer each
 * token's bytes; else bytes as text where the vocabulary is bytes (others
 * as \xNN), else token ids; " | " between the prompt and its continuation. */
static void print_sample(sw_gpt *m, const int32_t *prompt, int p, int n, float temperature, uint64_t seed,
                         const char *label)
{
    const sw_gpt_config *c = sw_gpt_get_config(m);
    sw_gpt_generator *g = sw_gpt_generator_create(m, 1, p + n);
    int32_t *seq = malloc(sizeof(int32_t) * (size_t)(p + n));
    if (!seq) { perror("malloc"); exit(1); }
    memcpy(seq, prompt, sizeof(int32_t) * (size_t)p);
    double t0 = train_now_ms(), t1 = 0;
    sw_gpt_generator_feed(g, seq, p);
    for (int i = p; i < p + n; i++) {
        sw_gpt_generator_sample(g, temperature, 0, seed, &seq[i]);
        if (i == p) t1 = train_now_ms(); /* the prompt's pass and the first token */
        if (i + 1 < p + n) sw_gpt_generator_feed(g, &seq[i], 1);
    }
    const double t2 = train_now_ms();
    sw_gpt_generator_destroy(g);
    if (sw_rank() == 0) {
        printf("%s", label);
        for (int i = 0; i < p + n; i++) {
            if (i == p) printf(" | ");
            if (sample_tokens.vocab) token_table_print(&sample_tokens, seq[i], stdout);
            else if (c->vocab > 256) printf("%s%d", i && i != p ? " " : "", seq[i]);
            else if (isprint(seq[i]) || seq[i] == '\n') putchar(seq[i]);
            else printf("\\x%02x", seq[i]);
        }
        printf("\n");
        if (!*label) /* --generate: the times */
            printf("generate: prefill %d tokens in %.1f ms (%.0f tokens/s), decode %d tokens %.2f ms/token\n", p,
                   t1 - t0, p / ((t1 - t0) / 1e3), n - 1, n > 1 ? (t2 - t1) / (n - 1) : 0.0);
        fflush(stdout);
    }
    free(seq);
}

/* --generate: the prompt's tokens (bytes, or ids separated by spaces), at
 * most strlen(text) of them: out holds that many (the generator refuses a
 * prompt longer than its positions) */
static int prompt_tokens(const char *text, int vocab, int32_t *out)
{
    int n = 0;
    for (const char *s = text; *s;) {
        if (vocab <= 256) {
            out[n++] = (unsigned char)*s++;
            continue;
        }
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v >= vocab)
            sw_usage_error("--generate: with a vocabulary of %d the prompt is token ids in [0, %d) separated by spaces "
                           "('%s'; text needs --prompt-text)", vocab, vocab, text);
        out[n++] = (int32_t)v;
        for (s = end; *s == ' '; s++) {}
    }
    if (n == 0) sw_usage_error("--generate: the prompt is empty");
    return n;
}

/* --generate TEXT --prompt-text: rank 0 runs the encoder (tokenizer.h),
 * every rank receives the ids, so that all continue the same prompt; a
 * failure is known to every rank and exits 2 everywhere, the rule printed
 * once (by rank 0, which alone has the message). */
static int32_t *text_prompt(const char *text, int vocab, int *n, int quiet)
{
    const int me = sw_rank();
    int32_t *ids = NULL;
    int head[2] = {0, 0}; /* status, count */
    char msg[1024] = "", path[4096];
    const char *how = "", *encoder = "";
    if (me == 0) {
        encoder = prompt_encoder_find(path, sizeof path, &how);
        head[0] = prompt_encode(encoder, how, text, vocab, &ids, &head[1], msg, sizeof msg);
    }
    MPI_Bcast(head, 2, MPI_INT, 0, MPI_COMM_WORLD);
    if (head[0] != 0) sw_usage_error("%s", msg);
    if (me != 0 && !(ids = calloc((size_t)head[1], sizeof(int32_t)))) { perror("calloc"); exit(1); }
    MPI_Bcast(ids, head[1], MPI_INT32_T, 0, MPI_COMM_WORLD);
    *n = head[1];
    if (me == 0 && !quiet) {
        printf("gpt_train: --prompt-text: %d token(s) from the encoder '%s' (%s):", head[1], encoder, how);
        for (int i = 0; i < head[1]; i++) printf(" %d", ids[i]);
        printf("\n");
    }
    return ids;
}

/* Task time per codelet over steps 2..N, against the workers' wall time. */
static void print_profile(double wall_ms)
{
    sw_stat st[64];
    int n = sw_stats_get(st, 64);
    double busy = 0, gemm = 0;
    long tasks = 0;
    for (int i = 0; i < n; i++) {
        busy += st[i].total_us;
        tasks += st[i].count;
        if (!strncmp(st[i].name, "gemm", 4)) gemm += st[i].total_us;
    }
    double capacity_us = wall_ms * 1e3 * sw_ncpus();
    printf("profile: %-16s %8s %12s %10s %8s\n", "codelet", "tasks", "total ms", "mean us", "share");
    for (int i = 0; i < n; i++)
        printf("profile: %-16s %8ld %12.1f %10.1f %7.1f%%\n", st[i].name, st[i].count, st[i].total_us / 1e3,
               st[i].total_us / st[i].count, 100.0 * st[i].total_us / capacity_us);
    printf("profile: %ld tasks, workers busy %.1f%% of %d x wall; GEMM share of step time %.1f%% "
           "(of task time %.1f%%)\n",
           tasks, 100.0 * busy / capacity_us, sw_ncpus(), 100.0 * gemm / capacity_us, 100.0 * gemm / busy);
}

/* What rank 0 sent per step on each group over the `steps` steps run,
 * beside the library's traffic model (with --counters, every rank's exact
 * bytes and its event counters); the attention FLOPs of every rank's last
 * forward (Ring attention's load balance). */
static void traffic_report(sw_gpt *m, const sw_comm *comm, int steps, int counters)
{
    const sw_gpt_config *c = sw_gpt_get_config(m);
    int me = sw_rank(), n = sw_world_size();
    sw_traffic model;
    sw_gpt_traffic(m, &model);
    starpu_task_wait_for_all(); /* a collective MPI runs is counted when its task runs */
    if (counters) {
        sw_comm_traffic_report(comm, &model, steps, stdout);
        sw_counters_print(stdout);
    }
    for (int g = 0; g < SW_GROUP_COUNT && comm && me == 0; g++) {
        double sent;
        long calls;
        sw_comm_traffic(comm, (sw_group)g, &sent, &calls);
        if (calls)
            printf("communication: rank 0 sent %.3f MiB per step on the %s group in %.1f collectives "
                   "(model: %.3f MiB)\n",
                   sent / steps / SW_MIB, sw_group_name((sw_group)g), (double)calls / steps,
                   (model.forward[g] + model.backward[g]) / SW_MIB);
    }
    if (c->ulysses * c->ring == 1) return;
    double mine = sw_gpt_attention_flops(m), *all = malloc(sizeof(double) * (size_t)n);
    if (!all) { perror("malloc"); exit(1); }
    MPI_Gather(&mine, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (me == 0) {
        double lo = all[0], hi = all[0];
        for (int r = 1; r < n; r++) lo = all[r] < lo ? all[r] : lo, hi = all[r] > hi ? all[r] : hi;
        printf("attention: %.4g .. %.4g GFLOP per rank and forward (spread %.2f %%); per rank:", lo / 1e9, hi / 1e9,
               hi > 0 ? 100 * (hi - lo) / hi : 0.0);
        for (int r = 0; r < n; r++) printf(" %.4g", all[r] / 1e9);
        printf("\n");
    }
    free(all);
}

/* the training loop's part (train_loop.h) */
typedef struct gpt_run {
    sw_gpt *m;
    const int32_t *data;
    size_t n;
    const sw_gpt_config *c;
    int32_t *tok, *tgt;
    const train_opts *o;
} gpt_run;
static void gpt_batch(void *rp, int step)
{
    gpt_run *r = rp;
    fill_batch(r->data, r->n, r->c, step, r->tok, r->tgt);
}
static void gpt_load(void *rp, int step)
{
    gpt_run *r = rp;
    (void)step;
    for (int k = 0; k < r->c->grad_accum; k++) sw_gpt_load_micro_batch(r->m, k, r->tok, r->tgt); /* this rank's columns */
}
static void gpt_step(void *rp, int step) { sw_gpt_step(((gpt_run *)rp)->m, step); } /* every micro-batch, the update */
static float gpt_loss(void *rp) { return sw_gpt_read_loss(((gpt_run *)rp)->m); }
/* --sample-every: the first sequence's first tokens (global batch) continued */
static void gpt_sample(void *rp, int step, float loss)
{
    gpt_run *r = rp;
    const sw_gpt_config *c = r->c;
    (void)loss;
    if (r->o->sample_every <= 0 || step % r->o->sample_every != 0) return;
    int32_t prompt[8];
    int p = c->seq < 8 ? c->seq : 8;
    for (int i = 0; i < p; i++) prompt[i] = r->tok[(int64_t)i * c->batch];
    char label[64];
    snprintf(label, sizeof label, "sample (step %d): ", step);
    print_sample(r->m, prompt, p, r->o->sample_len, r->o->sample_temperature, c->seed + (uint64_t)step, label);
}

int main(int argc, char **argv)
{
    train_opts o;
    parse_args(argc, argv, &o);
    if (plan_o.plan || plan_o.check_config) return plan_main(&o.cfg, argv[0]); /* no training */

    /* the token stream: every rank loads all of it and checks it (a bad
     * file exits 2 on every rank, the message printed once) */
    data_tokens d = {0};
    char data_msg[2400];
    if (o.data) {
        if (data_load(o.data, o.cfg.vocab, &d, data_msg, sizeof data_msg) != 0) sw_usage_error("%s", data_msg);
    } else {
        d.n = 1 << 20;
        unsigned char *text = synthetic_corpus(d.n);
        d.tok = malloc(sizeof(int32_t) * d.n);
        if (!d.tok) { perror("malloc"); exit(1); }
        for (size_t i = 0; i < d.n; i++) d.tok[i] = text[i];
        free(text);
        if (o.cfg.vocab < 256)
            for (size_t i = 0; i < d.n; i++)
                if (d.tok[i] >= o.cfg.vocab)
                    sw_usage_error("byte %d at offset %zu of the data must be below vocab (%d)", d.tok[i], i,
                                   o.cfg.vocab);
    }
    if (o.tokenizer) { /* like the data: checked on every rank, a bad file exits 2 everywhere */
        if (token_table_load(o.tokenizer, &sample_tokens, data_msg, sizeof data_msg) != 0)
            sw_usage_error("%s", data_msg);
        if (sample_tokens.vocab < o.cfg.vocab)
            sw_usage_error("tokenizer file '%s' holds %d tokens but vocab is %d: every token needs its bytes",
                           o.tokenizer, sample_tokens.vocab, o.cfg.vocab);
    }
    const size_t n = d.n;
    const int32_t *data = d.tok;
    const char *unit = d.format == DATA_RAW_BYTES ? "bytes" : "tokens";
    if (n < (size_t)o.cfg.seq + 2)
        sw_usage_error("data (%zu %s) must hold at least seq + 2 (%d) %s", n, unit, o.cfg.seq + 2, unit);

    sw_options ropt;
    sw_options_default(&ropt);
    ropt.ncpus = o.ncpus;
    ropt.sched = o.sched;
    ropt.gemm = o.gemm;
    ropt.quiet = o.quiet;
    ropt.offload = o.cfg.offload;
    ropt.offload_budget_mb = o.offload_budget_mb;
    ropt.memory_budget_mb = o.memory_budget_mb;
    ropt.ncuda = o.ncuda;
    if (sw_init(&argc, &argv, &ropt) != 0) return 1;
    /* GPU requests where no CUDA worker started: every rank checks its own,
     * so a rank with a GPU and one without agree on the verdict */
    if (!sw_world_min(!(o.ncuda > 0 || o.where == STARPU_CUDA) || sw_ncuda() > 0))
        sw_usage_error("%s needs a CUDA worker on every rank, and a rank has none (a GPU build, configure "
                       "--enable-cuda, on a machine with a GPU; this rank has %d)",
                       o.where == STARPU_CUDA ? "--device cuda" : "--ncuda", sw_ncuda());
    sw_set_task_where(o.where);

    /* every rank checks the mesh against the world size before any collective */
    sw_mesh *mesh = sw_mesh_create(&(sw_mesh_dims){o.cfg.tp, o.cfg.ulysses, o.cfg.ring, o.cfg.dp, o.cfg.pp});
    sw_comm *comm = sw_comm_create(mesh);
    sw_comm_set_algo(comm, (sw_comm_algo)o.algo);
    char why[320];
    if (sw_comm_set_backend(comm, o.backend, why, sizeof why) < 0) sw_usage_error("--comm nccl: %s", why);
    int me = sw_rank();
    if (me != 0) o.quiet = 1;
    if (o.memory_plan) return memory_plan(&o.cfg, comm, mesh); /* no training: no log */
    /* rank 0 writes the log; every rank learns whether it could, so that
     * all of them stop (the others would wait in collectives for rank 0) */
    FILE *log = me == 0 && !o.generate ? fopen(o.log, "w") : NULL;
    const int log_errno = errno;
    if (!sw_world_min(me != 0 || o.generate || log != NULL))
        sw_usage_error("cannot write log '%s': %s", o.log, strerror(log_errno)); /* printed by rank 0 */
    if (log) fprintf(log, "step,loss,ms,tokens_per_s\n");

    int32_t *prompt = NULL; /* --generate's tokens, checked before the model is made */
    int prompt_len = 0;
    if (o.generate && o.prompt_text) prompt = text_prompt(o.generate, o.cfg.vocab, &prompt_len, o.quiet);
    else if (o.generate) {
        if (!(prompt = malloc(sizeof(int32_t) * (strlen(o.generate) + 1)))) { perror("malloc"); return 1; }
        prompt_len = prompt_tokens(o.generate, o.cfg.vocab, prompt);
    }

    const double t_create = train_now_ms();
    sw_gpt *m = sw_gpt_create(&o.cfg, sw_world_size() > 1 ? comm : NULL);
    sw_ckpt_field fields[8];
    int nfields = sw_gpt_checkpoint_fields(m, fields);
    const sw_gpt_config *c = sw_gpt_get_config(m);
    int64_t T = (int64_t)c->seq * c->batch;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)T), *tgt = malloc(sizeof(int32_t) * (size_t)T);
    if (!tok || !tgt) { perror("malloc"); return 1; }
    if (!o.quiet)
        printf("gpt_train: %s, layers %d hidden %d heads %d kv-heads %d ffn %d vocab %d (padded %d) seq %d batch %d, "
               "%s, %d rank(s), tp %d%s, ulysses %d, ring %d%s, dp %d, pp %d, grad-accum %d, %d CPU + %d CUDA workers "
               "per rank, collectives on %s, %.1f GFLOP/step, data %s (%s, %zu tokens)\n",
               sw_model_name(c->model), c->layers, c->hidden, c->heads, c->kv_heads, c->ffn, c->vocab, c->vocab_padded,
               c->seq, c->batch,
               c->dtype == SW_BF16 ? "bf16 GEMMs" : "fp32",
               sw_world_size(), c->tp, c->sp ? " + sp" : "", c->ulysses, c->ring,
               c->ring > 1 ? (c->zigzag ? " (zigzag)" : " (no zigzag)") : "", c->dp, c->pp, c->grad_accum, sw_ncpus(),
               sw_ncuda(), sw_comm_backend_name(comm), sw_gpt_step_flops(c) / 1e9,
               o.data ? o.data : "synthetic", data_format_name(d.format), n);
    if (!o.quiet && c->dtype == SW_BF16 && sw_ncpus() > 0) {
        if (sw_gemm_bf16_native())
            printf("gpt_train: bf16 on the CPU workers: GEMMs multiply bf16 operands with fp32 accumulation "
                   "(oneDNN's bf16 matmul)\n");
        else
            printf("gpt_train: bf16 on the CPU workers: GEMM operands are rounded to bf16 and widened exactly to "
                   "fp32 for the fp32 kernel (%s): bf16's numerics, not its speed (bf16 kernels need the onednn "
                   "backend on a CPU with AVX512-BF16 or AMX)\n",
                   sw_gemm_backend_name(sw_gemm_get_backend()));
    }

    /* the training loop (train_loop.h): the batch of each step, its micro-batches, the step, the loss, the
     * log and the lines, checkpoints, samples, the trace */
    gpt_run run = {m, data, n, c, tok, tgt, &o};
    train_loop t = {.prog = "gpt_train", .steps = o.steps, .model = &run, .batch = gpt_batch, .load = gpt_load,
                    .step = gpt_step, .loss = gpt_loss, .after = gpt_sample, .pipe = sw_gpt_pipeline(m),
                    .params = sw_gpt_params(m),
                    .fields = fields, .nfields = nfields,
                    .save = o.save, .resume = o.resume, .save_every = o.save_every, .trace = o.trace, .dag = o.dag,
                    .pp = c->pp, .micro = c->grad_accum, .pp_virtual = c->pp_virtual, .pp_inflight = c->pp_inflight,
                    .quiet = o.quiet, .tokens = T, .log = log, .profile = o.profile};
    const int step0 = train_loop_resume(&t, o.steps > 0 && !o.generate); /* the last step already done */
    if (o.load_weights) {
        sw_weights_load(m, o.load_weights);
        if (!o.quiet)
            printf("gpt_train: weights loaded from %s (%s)\n", o.load_weights,
                   sw_weights_format_name(sw_weights_detect(o.load_weights, NULL, 0)));
    }
    if (o.generate) { /* no training: the prompt continued */
        print_sample(m, prompt, prompt_len, o.sample_len, o.sample_temperature, c->seed, "");
        free(prompt);
    } else if (o.steps == 0) { /* --save-weights with --steps 0: a conversion, no training */
        sw_weights_save(m, o.save_weights, o.weights_format);
        if (me == 0)
            printf("gpt_train: weights written to %s (%s), no step run\n", o.save_weights,
                   sw_weights_format_name(o.weights_format));
    }
    if (o.generate || o.steps == 0) goto done; /* no training */
    starpu_task_wait_for_all(); /* the initial values are tasks: not on step 1's clock */
    if (!o.quiet) printf("gpt_train: parameters ready in %.0f ms\n", train_now_ms() - t_create);
    if (o.memory_report) sw_memory_watch(1);
    train_loop_run(&t); /* simulated, it ends with the line bench/sim.sh reads */
    const float first = t.first, loss = t.last;
    const int timed = t.timed; /* the first step run warms up */
    const double total_ms = t.total_ms, submit_ms = t.submit_ms, avg = timed > 0 ? total_ms / timed : 0;
    if (!sw_simulated() && me == 0)
        printf("gpt_train: loss %.4f -> %.4f after %d steps, %.1f ms/step (steps %d..%d), %.2f GFLOP/s; log: %s\n",
               first, loss, o.steps, avg, step0 + 2, o.steps, avg > 0 ? sw_gpt_step_flops(c) / (avg * 1e6) : 0.0,
               o.log);
    if (o.profile && me == 0) {
        print_profile(total_ms);
        printf("profile: submitting the graph took %.1f ms per step (main thread)\n", timed > 0 ? submit_ms / timed : 0);
    }
    if (o.save_weights) {
        sw_weights_save(m, o.save_weights, o.weights_format);
        if (me == 0) printf("gpt_train: weights written to %s (%s)\n", o.save_weights, sw_weights_format_name(o.weights_format));
    }
    if (o.memory_report) memory_report(m);
    else if (sw_simulated()) print_memory_model(sw_gpt_memory_model(m)); /* the simulated ranks' memory */
    train_loop_report(&t); /* --trace, --dag */
    traffic_report(m, comm, o.steps - step0, o.counters);
done:
    if (log) fclose(log);
    free(tok);
    free(tgt);
    data_free(&d);
    token_table_free(&sample_tokens);
    sw_gpt_destroy(m);
    sw_comm_destroy(comm);
    sw_mesh_destroy(mesh);
    sw_shutdown();
    return 0;
}
