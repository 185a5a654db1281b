/* Saved-activation memory measured by StarPU, not by the builder's own
 * bookkeeping (under mpirun, tests/test_memory.sh). sw_gpt_saved_bytes's
 * "measured" figure sums the tensors the builder registered for a block;
 * here the bytes come from StarPU's allocator: every tensor's home buffer
 * is starpu_malloc'ed with STARPU_MALLOC_COUNT, so the main-RAM node's used
 * bytes (total - available) count every allocation of the library. A model
 * of L + 1 blocks allocates one block more than a model of L blocks: its
 * parameters, gradients and AdamW moments (4 x the block's parameter bytes
 * on this rank, from the shapes) and what the block keeps for backward.
 * The difference minus the parameter state must equal, to the byte (they
 * are integers: a tensor of a single row missing from the model shows), in
 * every recompute mode, on one rank and per rank with tp 2 + sp:
 *  - the library's memory model for block L (sw_gpt_saved_bytes(.).model_bytes:
 *    the shapes the block declares it keeps, sw_blocks_saved_model);
 *  - the same accounting written out as a formula of the configuration
 *    (formula_bytes below, the table of docs/memory.md).
 * A builder that keeps a tensor it does not declare, or declares one it
 * does not allocate, fails here; so does a block whose declared shapes
 * stray from the formula.
 *
 * With --pp P (pipeline stages, 4 micro-batches): the same allocator
 * measures what the in-flight quota costs. A stage holds the residual
 * stream and saved sets of q micro-batches; a model whose stages hold q
 * allocates, per rank, (q - 1) x (its stage's blocks x the block's model
 * bytes + the stage's output [l, h]) more than one whose stages hold 1
 * micro-batch, to the byte: 1F1B
 * (q = pp - stage) and GPipe (q = 4, every micro-batch).
 *
 * With --zero Z (2 or 3; dp = the ranks): the parameter state (values,
 * gradients, AdamW moments, ZeRO shards, buckets and the ZeRO-2/3 pool)
 * that StarPU's allocator counts. A ZeRO-Z model allocates, per rank,
 * sw_params_bytes(ZeRO-Z) - sw_params_bytes(no ZeRO) less than the same
 * model without ZeRO (its activations are the same), to the byte; and
 * the ZeRO-3 state is (P + G + O) / dp of the sharded parameters plus
 * the pool (printed).
 *
 * In every mode: the whole model's need (sw_gpt_memory_model) equals what
 * StarPU's allocator counts at creation, to the byte, and the plan made
 * without allocating (sw_gpt_memory_plan) says the same.
 *
 * usage: test_memory [--sp] [--recompute none|selective|full] [--recompute-every K] [--pp P] [--zero Z]
 *                    [--ignore-index N] [--bf16] [--zero-bubble]
 *        (tp = the number of ranks / P) */
#include <string.h>

#include "testutil.h"

static double formula_bytes(const sw_gpt_config *c, int layer)
{
    /* Megatron's accounting of this decoder, from the configuration alone (fp32 elements):
     * selective: l (4h + 4) + [sp, t > 1, kept gathered] 2 T h + T ((aq + 2 ak) d + aq d + aq + 2 F/t)
     *   (LLaMA: l (4h + 2), no means; 3 F/t, gate | up and the SwiGLU output; F = ffn)
     *   l = T/t with sp, else T: block input, ln1, x_mid, ln2 (+ mean, rstd of
     *   both norms); the gathered norm outputs; qkv, attention output, lse,
     *   fc before and after GeLU; with Ulysses + T aq d: the attention output
     *   in both layouts. T = seq/(ulysses*ring) * B, B = batch/(dp*grad_accum).
     * none: + (aq/ulysses) B seq^2, the attention probabilities.
     * full: l h for a checkpointed block (layer % recompute_every == 0), else 0. */
    double t = c->tp, B = c->batch / (c->dp * c->grad_accum), T = (double)c->seq / (c->ulysses * c->ring) * B;
    double h = c->hidden;
    double d = (double)c->hidden / c->heads;
    double kv = c->kv_heads, aq = c->heads / t, ak = kv >= t ? kv / t : 1;
    double l = c->sp ? T / t : T, F = c->ffn > 0 ? c->ffn : 4 * h, llama = c->model == SW_MODEL_LLAMA;
    double gathered = c->sp && c->tp > 1 && !c->tp_recompute_allgather ? 2 * T * h : 0;
    /* norms keep rstd (and LayerNorm the mean); the MLP keeps fc (gate | up with SwiGLU) and its activation */
    double elems = l * (4 * h + (llama ? 2 : 4)) + gathered + T * ((aq + 2 * ak) * d + aq * d + aq + (llama ? 3 : 2) * F / t);
    if (c->ulysses > 1) elems += T * aq * d;
    if (c->recompute == SW_RECOMPUTE_NONE) elems += aq / c->ulysses * B * (double)c->seq * c->seq;
    if (c->recompute == SW_RECOMPUTE_FULL) elems = layer % c->recompute_every == 0 ? l * h : 0;
    /* Zero Bubble's split (tp 1): the output gradients of fc2 and proj [l, h], fc [T, F] (SwiGLU 2F) and qkv,
     * kept for the W unit */
    if (c->zero_bubble) elems += l * 2 * h + T * ((aq + 2 * ak) * d + (llama ? 2 : 1) * F / t);
    return 4 * elems;
}

/* bytes StarPU counts as allocated in main RAM */
static double ram_used(void)
{
    return (double)(starpu_memory_get_total(STARPU_MAIN_RAM) - starpu_memory_get_available(STARPU_MAIN_RAM));
}

/* main-RAM bytes a model of c allocates at creation */
static double model_alloc(const sw_gpt_config *c, sw_comm *comm)
{
    starpu_task_wait_for_all();
    double before = ram_used();
    sw_gpt *m = sw_gpt_create(c, comm);
    starpu_task_wait_for_all();
    double after = ram_used();
    sw_gpt_destroy(m);
    return after - before;
}

/* The whole model at creation: StarPU's main-RAM bytes equal the memory
 * model's need (sw_gpt_memory_model: parameter state, saved activations,
 * logits and the other tensors), to the byte, and the plan made without
 * allocating (sw_gpt_memory_plan) says the same. */
static void whole_model(const sw_gpt_config *c, sw_comm *comm)
{
    const sw_gpt_memory plan = sw_gpt_memory_plan(c, comm);
    starpu_task_wait_for_all();
    const double before = ram_used();
    sw_gpt *m = sw_gpt_create(c, comm);
    starpu_task_wait_for_all();
    const double alloc = ram_used() - before;
    const sw_gpt_memory r = sw_gpt_memory_model(m);
    sw_gpt_destroy(m);
    char line[400];
    snprintf(line, sizeof line, "the whole model at creation: StarPU's main-RAM bytes %.0f, the memory model's need %.0f "
             "(state %.0f, saved %.0f, logits %.0f, other %.0f; %.0f bytes off), the plan's %.0f", alloc, r.need,
             r.state, r.saved, r.logits, r.other, alloc - r.need, plan.need);
    tu_check_ranks(line, plan.need == r.need && alloc == r.need);
}

int main(int argc, char **argv)
{
    int offload = 0; /* --offload: sw_init with an offload node, the model with offload */
    for (int i = 1; i < argc; i++) offload |= !strcmp(argv[i], "--offload");
    if (offload) {
        sw_options opt;
        sw_options_default(&opt);
        opt.quiet = 1, opt.offload = 1;
        if (sw_init(&argc, &argv, &opt) != 0) return 77;
    } else tu_init(&argc, &argv);
    sw_gpt_config c;
    sw_gpt_config_default(&c);
    c.offload = offload;
    c.layers = 2; c.hidden = 64; c.heads = 8; c.vocab = 500; c.seq = 32; c.max_pos = 32; c.batch = 4;
    int pp = 1, zero = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--sp")) c.sp = 1;
        else if (!strcmp(a, "--recompute")) c.recompute = sw_recompute_parse(v), i++;
        else if (!strcmp(a, "--recompute-every")) c.recompute_every = atoi(v), i++;
        else if (!strcmp(a, "--pp")) pp = atoi(v), i++;
        else if (!strcmp(a, "--pp-virtual")) c.pp_virtual = atoi(v), i++;
        else if (!strcmp(a, "--zero")) zero = atoi(v), i++;
        else if (!strcmp(a, "--ignore-index")) c.ignore_index = atoi(v), i++;
        else if (!strcmp(a, "--bf16")) c.dtype = SW_BF16;
        else if (!strcmp(a, "--zero-bubble")) c.zero_bubble = 1;
        else if (!strcmp(a, "--offload")) continue;
        else { fprintf(stderr, "test_memory: unknown argument %s\n", a); return 99; }
    }
    c.tp = sw_world_size() / pp;
    if (zero) c.dp = sw_world_size(), c.tp = 1, c.zero = zero;
    if (pp > 1) c.pp = pp, c.layers = 2 * pp * (c.pp_virtual > 1 ? c.pp_virtual : 1), c.grad_accum = 4;
    char msg[256];
    if (sw_gpt_config_check(&c, msg, sizeof msg) != 0) { fprintf(stderr, "test_memory: %s\n", msg); return 99; }
    sw_mesh *mesh = sw_mesh_create(&(sw_mesh_dims){c.tp, 1, 1, c.dp, pp});
    sw_comm *comm = sw_comm_create(mesh);
    sw_comm *use = sw_world_size() > 1 ? comm : NULL;
    const int tp_rank = sw_mesh_rank(mesh, SW_GROUP_TP);
    whole_model(&c, use);
    if (c.pp_virtual > 1 && !offload) {
        /* interleaved chunks: one pool of micro slots per stage, shared by its chunks, of its quota q = (V - 1) pp
         * + pp - stage chunks' saved sets. GPipe's quota holds every chunk of every micro-batch (K V); the default
         * holds (K V - q) x (a chunk's blocks x the block's model bytes + its output [l, h]) less, to the byte
         * (with a pool per chunk, each of its own peak, stage 0 of pp 2 x 2 held 5 sets for a quota of 4) */
        const int stage = sw_mesh_stage(mesh), V = c.pp_virtual, per_chunk = c.layers / (pp * V), K = c.grad_accum;
        const int q = (V - 1) * pp + pp - stage < K * V ? (V - 1) * pp + pp - stage : K * V;
        sw_gpt_config all = c;
        all.pp_inflight = K;
        sw_gpt *m = sw_gpt_create(&c, use);
        const double block = sw_gpt_saved_bytes(m, stage * per_chunk).model_bytes;
        sw_gpt_destroy(m);
        const double out = 4.0 * c.seq * (c.batch / c.grad_accum) / (c.sp ? c.tp : 1) * c.hidden;
        const double less = model_alloc(&all, use) - model_alloc(&c, use), want = (K * V - q) * (per_chunk * block + out);
        char line[400];
        snprintf(line, sizeof line, "pp %d x %d chunks x tp %d, stage %d: the default quota allocates %.0f less than "
                 "GPipe's; model (%d x %d - %d) x (%d blocks x %.0f + output %.0f) = %.0f (%.0f bytes off): the stage "
                 "holds its quota, %d chunks' saved sets", pp, V, c.tp, stage, less, K, V, q, per_chunk, block, out, want,
                 less - want, q);
        tu_check_ranks(line, less == want && q < K * V);
    }
    if (c.pp_virtual > 1 || offload) { /* interleaved chunks, offload (the working sets fixed): the whole model's
                                          * bytes */
        sw_comm_destroy(comm);
        sw_mesh_destroy(mesh);
        return tu_finish_all();
    }
    if (zero) {
        sw_gpt_config plain = c;
        plain.zero = 0;
        sw_gpt *m0 = sw_gpt_create(&plain, use), *mz = sw_gpt_create(&c, use);
        const double model0 = sw_params_bytes(sw_gpt_params(m0)), modelz = sw_params_bytes(sw_gpt_params(mz));
        const double pool = sw_params_pool_bytes(sw_gpt_params(mz));
        sw_gpt_destroy(m0), sw_gpt_destroy(mz);
        const double measured = model_alloc(&plain, use) - model_alloc(&c, use), want = model0 - modelz;
        char line[400];
        snprintf(line, sizeof line, "dp %d, ZeRO-%d: StarPU's main-RAM bytes %.0f less than without ZeRO; model: parameter "
                 "state %.0f -> %.0f (pool %.0f), %.0f less (%.0f bytes off)", c.dp, zero, measured, model0, modelz, pool,
                 want, measured - want);
        tu_check_ranks(line, measured == want && measured > 0);
        sw_comm_destroy(comm);
        sw_mesh_destroy(mesh);
        return tu_finish_all();
    }
    if (pp > 1) {
        const int stage = sw_mesh_stage(mesh), blocks = c.layers / pp;
        sw_gpt_config one = c;
        one.pp_inflight = 1;
        const double base = model_alloc(&one, use);
        sw_gpt *m = sw_gpt_create(&one, use);
        const double block = sw_gpt_saved_bytes(m, stage * blocks).model_bytes;
        sw_gpt_destroy(m);
        for (int q = 0; q <= 4; q += 4) { /* 0: 1F1B's quota, 4: GPipe's */
            sw_gpt_config qc = c;
            qc.pp_inflight = q;
            /* Zero Bubble's ZB-H1 keeps a micro-batch's sets until its W: every stage up to the first's quota */
            const int first = c.zero_bubble ? pp : pp - stage, held = q ? q : first < 4 ? first : 4;
            /* per micro-batch in flight: the blocks' inputs and saved sets, and the stage's output [l, h] */
            const double out = 4.0 * c.seq * (c.batch / c.grad_accum) / (c.sp ? c.tp : 1) * c.hidden;
            const double grown = model_alloc(&qc, use) - base, want = (held - 1) * (blocks * block + out);
            char line[400];
            snprintf(line, sizeof line, "pp %d x tp %d, stage %d, %s: StarPU's main-RAM bytes grow by %.0f over one "
                     "micro-batch in flight; model (%d - 1) x (%d blocks x %.0f + output %.0f) = %.0f (%.0f bytes off)",
                     pp, c.tp, stage, q ? "GPipe (4 in flight)" : c.zero_bubble ? "ZB-H1 (min(pp, 4) kept until W)"
                     : "1F1B (pp - stage in flight)", grown, held, blocks,
                     block, out, want, grown - want);
            tu_check_ranks(line, grown == want && (held > 1 || stage == pp - 1));
        }
        sw_comm_destroy(comm);
        sw_mesh_destroy(mesh);
        return tu_finish_all();
    }
    /* blocks L = 2 and 3: with recompute full every 2, block 2 keeps its input and block 3 nothing */
    for (int L = 2; L <= 3; L++) {
        sw_gpt_config small = c, big = c;
        small.layers = L, big.layers = L + 1;
        const double grown = model_alloc(&big, use) - model_alloc(&small, use);
        /* the block's parameter state from its shapes: param, grad, m, v */
        double state = 0;
        for (int p = 0; p < SW_GPT_LAYER_PARAMS; p++) {
            int64_t rows, cols;
            sw_gpt_local_shape(&big, tp_rank, 2 + L * SW_GPT_LAYER_PARAMS + p, &rows, &cols);
            state += 4.0 * sizeof(float) * (double)(rows * cols);
        }
        sw_gpt *m = sw_gpt_create(&big, use);
        const double models[2] = {sw_gpt_saved_bytes(m, L).model_bytes, formula_bytes(&big, L)};
        sw_gpt_destroy(m);
        const double saved = grown - state;
        for (int k = 0; k < 2; k++) {
            const double model = models[k], off = saved - model;
            char line[400];
            snprintf(line, sizeof line,
                     "tp %d%s, recompute %s every %d, block %d: StarPU's main-RAM bytes grow by %.0f with the block, "
                     "%.0f of them parameter state, %.0f saved activations; %s %.0f (%.0f bytes off)",
                     c.tp, c.sp ? " + sp" : "", sw_recompute_name(c.recompute), c.recompute_every, L, grown, state,
                     saved, k ? "formula" : "memory model", model, off);
            tu_check_ranks(line, off == 0);
        }
    }
    sw_comm_destroy(comm);
    sw_mesh_destroy(mesh);
    return tu_finish_all();
}
