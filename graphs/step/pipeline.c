/* The step driver and pipeline stages (see pipeline.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer_util.h"
#include "train/params_internal.h"
#include "schedule.h"
#include "starweave/pipeline.h"
#include "starweave/runtime.h"
#include "starweave/trace.h"

struct sw_pipeline {
    sw_ctx *x;
    sw_model_ops mops;
    void *model;
    sw_block_ops ops;
    int pp, stage, V, K;   /* stages, this one, chunks per stage, micro-batches */
    int quota;             /* chunks' saved sets (a chunk's blocks for one micro-batch) in flight on this stage */
    sw_blocks_config *bc;  /* bc[c]: chunk c's blocks */
    sw_blocks **chunk;     /* chunk c of this stage: virtual stage c pp + stage */
    int slots;             /* the stage's micro slots, one pool shared by its chunks (at most the quota) */
    int split;             /* Zero Bubble's split (sw_ctx_config.zero_bubble): W units of their own */
    int units;             /* the stage's units: 2 K V, 3 K V with the split */
    sw_unit *order;        /* the stage's work in submission order (schedule.h) */
    struct sw_wdefer *wl;  /* the split: wl[slot], the weight gradients micro slot `slot`'s B unit left */
    unsigned char *wmask;  /* the split: wmask[k], parameter k's gradient written by the W units */
    int late_w;            /* the split: W units after the stage's last forward (the cooldown's) */
    int *lates;            /* the split: every stage's late_w in the current order (pp; 0 without the split) */
    int inflight;          /* the quota asked for (sw_pipeline_create) */
    int *allslots;         /* every stage's pool of micro slots, sized at create (the re-planned order stays within) */
    /* the costs the order comes from (schedule.h): the guess until the second step's tasks are measured
     * (meter 3: the first step, not measured; 1: this step's; 2: measured, sw_pipeline_replan to call;
     * 0: done), then measured (1; 2: but no order fits), per stage in us */
    int meter, measured;   /* measured 3: measured, and the guess's order kept as the shorter under them */
    long long spent[3];    /* this rank's measured step: ns of its forward, B (the backward without the split), W tasks */
    sw_unit_costs *costs;  /* pp: the measured costs */
    sw_tensor *loss;       /* [1,1] the loss received from the last stage (the others) */
};

/* the registry places the units (params.h): the driver runs the blocks it places on this stage */
int sw_pipeline_stage_of(int layer, int layers, int pp, int chunks) { return sw_params_stage_of(layer, layers, pp, chunks); }

/* the schedule of this rank's stage, refused (exit 2 on every rank: each
 * simulates every stage) when the quotas let no order finish */
static void plan(const sw_ctx *x, int inflight, int *pp, int *stage, int *V, sw_unit *order, int *slots, int *every,
                 int *lates)
{
    const sw_mesh *mesh = x->comm ? sw_comm_mesh(x->comm) : NULL;
    *pp = mesh ? sw_mesh_size(mesh, SW_GROUP_PP) : 1, *stage = mesh ? sw_mesh_stage(mesh) : 0;
    int chunks = x->params ? sw_params_get_config(x->params)->pp_chunks : 1, K = x->c.grad_accum, stuck = 0;
    *V = chunks > 1 ? chunks : 1;
    char msg[512]; /* the rules the planner judges by too (sw_schedule_check) */
    if (sw_schedule_check(*pp, *V, K, inflight, x->c.zero_bubble, msg, sizeof msg)) sw_usage_error("%s", msg);
    /* every stage's order (each rank simulates every stage), this one's kept */
    const int split = x->c.zero_bubble, n = sw_schedule_units(*V, K, split);
    sw_unit *all = sw_xcalloc((size_t)*pp * (size_t)n, sizeof *all);
    int *allslots = sw_xcalloc((size_t)*pp, sizeof *allslots);
    if (sw_schedule_split(*pp, *V, K, inflight, split, all, allslots, &stuck))
        sw_usage_error("%s", "the pipeline's schedule: sw_schedule_split failed after sw_schedule_check passed");
    if (order) memcpy(order, all + (size_t)*stage * (size_t)n, (size_t)n * sizeof *order);
    *slots = allslots[*stage];
    if (every) memcpy(every, allslots, (size_t)*pp * sizeof *every);
    for (int t = 0; t < *pp && lates; t++) lates[t] = split ? sw_schedule_late_w(all + (size_t)t * (size_t)n, n) : 0;
    free(all), free(allslots);
}

/* chunk c's blocks on this stage: virtual stage c pp + stage, of layers / (pp V) blocks, the stage's micro slots */
static sw_blocks_config chunk_config(const sw_ctx *x, const sw_blocks_config *c, int pp, int stage, int V, int chunk,
                                     int slots)
{
    sw_blocks_config b = *c;
    b.count = c->layers / (pp * V);
    b.first = (chunk * pp + stage) * b.count;
    b.inflight = slots;
    b.params = x->params; /* the blocks' ZeRO-2/3 hooks */
    return b;
}

static void check_layout(const sw_blocks_config *c, int pp, int V)
{
    if (c->layers % (pp * V))
        sw_usage_error("the blocks (%d) must be divisible by the pipeline stages times their chunks (pp %d x %d)",
                       c->layers, pp, V);
}

double sw_pipeline_blocks_bytes(const sw_ctx *x, const sw_blocks_config *c, const sw_block_ops *ops, void *model,
                                int inflight)
{
    sw_check_ptr("sw_pipeline_blocks_bytes", "x", x);
    sw_check_ptr("sw_pipeline_blocks_bytes", "c", c);
    int pp, stage, V, slots;
    plan(x, inflight, &pp, &stage, &V, NULL, &slots, NULL, NULL);
    check_layout(c, pp, V);
    /* chunk 0 allocates the stage's pool of micro slots, the other chunks only their own gradient stream */
    sw_blocks_config b = chunk_config(x, c, pp, stage, V, 0, slots);
    return sw_blocks_bytes(&b, ops, model) + (V - 1) * sw_blocks_pooled_bytes(&b);
}

sw_pipeline *sw_pipeline_create(sw_ctx *x, const sw_blocks_config *c, const sw_block_ops *ops,
                                const sw_model_ops *mops, void *model, int inflight)
{
    static const char *fn = "sw_pipeline_create";
    sw_check_ptr(fn, "x", x);
    sw_check_ptr(fn, "x->params", x->params);
    sw_check_ptr(fn, "c", c);
    sw_check_ptr(fn, "ops", ops);
    sw_check_ptr(fn, "mops", mops);
    const char *missing = !mops->embed_forward ? "embed_forward" : !mops->embed_backward ? "embed_backward"
                          : !mops->head_forward ? "head_forward" : !mops->head_backward ? "head_backward"
                          : !mops->loss ? "loss" : NULL;
    if (missing) sw_usage_error("%s: mops->%s: must not be NULL", fn, missing);
    sw_pipeline *s = sw_xcalloc(1, sizeof *s);
    int chunks = sw_params_get_config(x->params)->pp_chunks;
    s->K = x->c.grad_accum;
    s->split = x->c.zero_bubble;
    s->units = sw_schedule_units(chunks > 1 ? chunks : 1, s->K, s->split);
    s->order = sw_xcalloc((size_t)s->units, sizeof *s->order);
    const sw_mesh *mesh = x->comm ? sw_comm_mesh(x->comm) : NULL;
    s->allslots = sw_xcalloc(mesh ? (size_t)sw_mesh_size(mesh, SW_GROUP_PP) : 1, sizeof *s->allslots);
    s->lates = sw_xcalloc(mesh ? (size_t)sw_mesh_size(mesh, SW_GROUP_PP) : 1, sizeof *s->lates);
    plan(x, inflight, &s->pp, &s->stage, &s->V, s->order, &s->slots, s->allslots, s->lates);
    s->inflight = inflight;
    /* the order of the steps after the second from its measured costs (the first step's carry one-time
     * costs -- allocations, the libraries' initialisation: measured 150 ms for a forward of gpt_train --pp 2
     * --hidden 64, 1 ms in the second): with stages (one stage's order does not depend on costs); in
     * simulation too, where the tasks' times are the simulated ones (StarPU's profiling on SimGrid's clock:
     * the calibrated performance models), so the simulated pipeline runs the order a real one would */
    s->meter = s->pp > 1 ? 3 : 0;
    if (s->split) {
        s->wl = sw_xcalloc((size_t)s->slots, sizeof *s->wl);
        s->wmask = sw_xcalloc((size_t)sw_params_count(x->params), 1);
        s->late_w = sw_schedule_late_w(s->order, s->units);
    }
    check_layout(c, s->pp, s->V);
    s->x = x;
    s->mops = *mops;
    s->model = model;
    s->ops = *ops;
    s->quota = sw_schedule_quota(s->pp, s->V, s->K, inflight, s->stage);
    s->bc = sw_xcalloc((size_t)s->V, sizeof *s->bc);
    s->chunk = sw_xcalloc((size_t)s->V, sizeof *s->chunk);
    for (int v = 0; v < s->V; v++) {
        s->bc[v] = chunk_config(x, c, s->pp, s->stage, s->V, v, s->slots);
        /* one pool of micro slots per stage: chunk 0's residual streams and saved sets, shared by the others */
        s->chunk[v] = v ? sw_blocks_create_pooled(&s->bc[v], ops, model, s->chunk[0]) : sw_blocks_create(&s->bc[v], ops, model);
    }
    if (s->stage != s->pp - 1) s->loss = sw_tensor_new2d("loss", SW_F32, 1, 1);
    return s;
}

void sw_pipeline_destroy(sw_pipeline *s)
{
    if (!s) return;
    for (int v = s->V - 1; v >= 0; v--) sw_blocks_destroy(s->chunk[v]); /* the pool's owner, chunk 0, last */
    free(s->chunk), free(s->bc), free(s->order), free(s->allslots), free(s->lates), free(s->costs);
    for (int i = 0; s->wl && i < s->slots; i++) free(s->wl[i].item);
    free(s->wl), free(s->wmask);
    sw_tensor_free(s->loss);
    free(s);
}

sw_blocks *sw_pipeline_blocks(sw_pipeline *s) { return s->chunk[0]; }
int sw_pipeline_chunks(const sw_pipeline *s) { return s->V; }
sw_blocks *sw_pipeline_chunk(sw_pipeline *s, int chunk)
{
    sw_check_ptr("sw_pipeline_chunk", "s", s);
    if (chunk < 0 || chunk >= s->V) sw_usage_error("sw_pipeline_chunk: chunk %d of %d", chunk, s->V);
    return s->chunk[chunk];
}
/* The step's loss on this rank: the model's loss tensor, which the head
 * writes on the last stage and the driver receives into on the others
 * (pipeline.h); on a stage where the model has none (loss() NULL), the
 * driver's own copy. */
sw_tensor *sw_pipeline_loss(sw_pipeline *s)
{
    sw_check_ptr("sw_pipeline_loss", "s", s);
    sw_tensor *l = s->mops.loss(s->model);
    if (!l && s->stage == s->pp - 1) sw_usage_error("sw_pipeline_loss: mops->loss: returned NULL on the last stage");
    if (!l) return s->loss;
    sw_check_tensor("sw_pipeline_loss", "mops->loss()", l, 1, 1);
    return l;
}
int sw_pipeline_inflight(const sw_pipeline *s) { return s->quota; }
int sw_pipeline_stage(const sw_pipeline *s, int *stages)
{
    if (stages) *stages = s->pp;
    return s->stage;
}

/* The point-to-point channels (schedule.h): each chunk's activations
 * forward and gradients back between a pair of neighbours on a channel of
 * their own, each matched in call order on its own (both ends submit a
 * chunk's micro-batches in order), so the order across chunks may differ
 * between the two ends; all above a model's own (comm.h). */
static int channel(const sw_pipeline *s, int j, int backward) { return sw_schedule_channel(s->pp, j, backward); }
enum { COND_CHANNEL = SW_PP_COND_CHANNEL, DCOND_CHANNEL = SW_PP_DCOND_CHANNEL, LOSS_CHANNEL = SW_PP_LOSS_CHANNEL };

/* The model's conditioning of micro-batch k (its value, or gradient), or NULL */
static sw_tensor *conditioning(sw_pipeline *s, int k, int grad)
{
    return s->mops.conditioning ? s->mops.conditioning(s->model, k, grad) : NULL;
}

/* the measured step (meter 1): the execution times of this unit's tasks into its kind's sum (0 forward, 1 B --
 * the backward without the split --, 2 W) */
static void meter(sw_pipeline *s, int kind)
{
    if (s->meter == 1) sw_task_meter(&s->spent[kind]);
}

/* The point-to-point hop between this stage and the next, in ns: half the
 * shortest of HOP_ROUNDS round trips of a boundary tensor's bytes (an
 * activation's shape and type) over the pp group (sw_comm_hop_host: MPI's
 * own, not counted as the step's traffic), timed on StarPU's clock (in a
 * simulation SimGrid's: the simulated network). Blocking, between steps.
 * 0 on the last stage. */
enum { HOP_ROUNDS = 3 };
static long long measure_hop(sw_pipeline *s)
{
    const sw_tensor *out = sw_blocks_output(s->chunk[0]);
    return (long long)(sw_comm_hop_host(s->x->comm, SW_GROUP_PP, sw_tensor_bytes(out), HOP_ROUNDS) * 1e3);
}

/* The order of the later steps from the measured step's costs (called by
 * the program between steps, its tasks run): every rank's measured
 * forward, B and W tasks summed per stage (integers, so every rank has the
 * same sums and computes the same orders), per unit in microseconds; the
 * simulation run again within the pools allocated at create (schedule.h:
 * cap), which the blocks' micro slots are. The guess's order stays where
 * a stage measured nothing or no order fits the pools. */
int sw_pipeline_replan(sw_pipeline *s)
{
    sw_check_ptr("sw_pipeline_replan", "s", s);
    if (s->meter != 2) return 0;
    s->meter = 0;
    sw_task_meter_stop(); /* the measured step's tasks have run (the caller waited): their times are in the sums */
    const int pp = s->pp, n = s->units;
    long long *sum = sw_xcalloc((size_t)pp * 5, sizeof *sum);
    for (int i = 0; i < 3; i++) sum[s->stage * 5 + i] = s->spent[i];
    sum[s->stage * 5 + 3] = 1; /* this rank, one of its stage's */
    sum[s->stage * 5 + 4] = measure_hop(s);
    sw_comm_sum_host(s->x->comm, SW_GROUP_WORLD, sum, pp * 5);
    sw_unit_costs *costs = sw_xcalloc((size_t)pp, sizeof *costs);
    int ok = 1;
    long long hops = 0;
    for (int t = 0; t < pp; t++) {
        long long units = sum[t * 5 + 3] * s->K * s->V * 1000; /* a kind's units on the stage's ranks, in ns per us */
        long *c[3] = {&costs[t].f, &costs[t].b, &costs[t].w};
        for (int i = 0; i < 3; i++) *c[i] = units ? (long)((sum[t * 5 + i] + units / 2) / units) : 0;
        ok &= sum[t * 5] > 0 && sum[t * 5 + 1] > 0 && (!s->split || sum[t * 5 + 2] > 0);
        for (int i = 0; i < 3; i++) *c[i] = *c[i] < 1 && (i < 2 || s->split) ? 1 : *c[i];
        costs[t].h = sum[t * 5 + 3] ? (long)((sum[t * 5 + 4] + sum[t * 5 + 3] * 500) / (sum[t * 5 + 3] * 1000)) : 0;
        hops += t < pp - 1 ? costs[t].h : 0;
    }
    costs[pp - 1].h = pp > 1 ? (long)(hops / (pp - 1)) : 0; /* the boundary back to stage 0 (chunks): the mean */
    sw_unit *all = sw_xcalloc((size_t)pp * (size_t)n, sizeof *all);
    int *slots = sw_xcalloc((size_t)pp, sizeof *slots), kept = 0;
    /* the simulation under the measured costs, or the guess's order where it ends sooner under them */
    if (ok && !sw_schedule_replan(pp, s->V, s->K, s->inflight, s->split, costs, s->allslots, all, slots, &kept)) {
        memcpy(s->order, all + (size_t)s->stage * (size_t)n, (size_t)n * sizeof *s->order);
        if (s->split) s->late_w = sw_schedule_late_w(s->order, n);
        for (int t = 0; t < pp && s->split; t++) s->lates[t] = sw_schedule_late_w(all + (size_t)t * (size_t)n, n);
        s->measured = kept == 1 ? 3 : kept == 2 ? 4 : 1;
    } else if (ok) s->measured = 2; /* measured, but no order of them fits: the guess's order stays */
    if (ok) s->costs = costs, costs = NULL;
    free(costs), free(all), free(slots), free(sum);
    return 1;
}

double sw_pipeline_schedule_hop(const sw_pipeline *s, int stage)
{
    sw_check_ptr("sw_pipeline_schedule_hop", "s", s);
    if (stage < 0 || stage >= s->pp) sw_usage_error("sw_pipeline_schedule_hop: stage %d of %d", stage, s->pp);
    return s->measured ? (double)s->costs[stage].h / 1e3 : 0;
}

int sw_pipeline_late_w(const sw_pipeline *s, int stage)
{
    sw_check_ptr("sw_pipeline_late_w", "s", s);
    if (stage < 0 || stage >= s->pp) sw_usage_error("sw_pipeline_late_w: stage %d of %d", stage, s->pp);
    return s->lates[stage];
}

int sw_pipeline_schedule_costs(const sw_pipeline *s, int stage, double *f, double *b, double *w)
{
    sw_check_ptr("sw_pipeline_schedule_costs", "s", s);
    if (stage < 0 || stage >= s->pp) sw_usage_error("sw_pipeline_schedule_costs: stage %d of %d", stage, s->pp);
    const sw_unit_costs g = SW_SCHEDULE_GUESS, *c = s->measured ? &s->costs[stage] : &g; /* 1 to 4: measured */
    const double unit = s->measured ? 1e3 : 1; /* us to ms */
    if (f) *f = (double)c->f / unit;
    if (b) *b = (double)(s->split ? c->b : c->b + c->w) / unit; /* without the split: the whole backward */
    if (w) *w = s->split ? (double)c->w / unit : 0;
    return s->measured;
}

/* micro-batch k's forward through chunk c: its input (the embedding, or
 * the previous virtual stage's output), its blocks into the micro slot
 * the schedule gave it, its output to the next virtual stage (the last
 * keeps it for the head, which runs with the backward) */
static void forward(sw_pipeline *s, int step, int c, int k, int slot)
{
    int j = c * s->pp + s->stage, J = s->pp * s->V;
    sw_blocks *b = s->chunk[c];
    meter(s, 0);
    sw_ctx_set_micro_batch(s->x, k);
    sw_blocks_set_micro_slot(b, slot);
    sw_trace_set_phase(SW_PHASE_FORWARD, -1);
    if (j == 0) {
        sw_params_gather_unit(s->x->params, SW_UNIT_BEFORE, 0); /* ZeRO-3 */
        s->mops.embed_forward(s->model, step, sw_blocks_input(b));
        sw_params_release_unit(s->x->params, SW_UNIT_BEFORE, 0);
        sw_tensor *cond = conditioning(s, k, 0); /* to every other stage */
        for (int r = 1; r < s->pp && cond; r++) sw_send_on(s->x->comm, SW_GROUP_PP, COND_CHANNEL, cond, r);
    } else {
        sw_recv_on(s->x->comm, SW_GROUP_PP, channel(s, j - 1, 0), sw_blocks_input(b), (s->stage + s->pp - 1) % s->pp);
        if (c == 0 && conditioning(s, k, 0)) sw_recv_on(s->x->comm, SW_GROUP_PP, COND_CHANNEL, conditioning(s, k, 0), 0);
    }
    sw_blocks_forward(b, step);
    if (j < J - 1) sw_send_on(s->x->comm, SW_GROUP_PP, channel(s, j, 0), sw_blocks_output(b), (s->stage + 1) % s->pp);
}

/* micro-batch k's backward through chunk c: the gradient of its output
 * (the head and loss, forward and backward, on the last virtual stage;
 * else from the next), its blocks, then the gradient of its input to the
 * previous virtual stage or into the embedding; the chunk's gradients into
 * the registry's buckets */
static void backward(sw_pipeline *s, int step, int c, int k, int slot)
{
    sw_ctx *x = s->x;
    int j = c * s->pp + s->stage, J = s->pp * s->V;
    sw_blocks *b = s->chunk[c];
    sw_tensor *dx = sw_blocks_grad(b);
    meter(s, 1);
    sw_ctx_set_micro_batch(x, k);
    sw_blocks_set_micro_slot(b, slot);
    sw_tensor *dcond = conditioning(s, k, 1);
    if (c == s->V - 1 && dcond) sw_zero(sw_tensor_whole(dcond, STARPU_W)); /* this stage's first backward of k */
    if (j == J - 1) {
        sw_params_gather_unit(x->params, SW_UNIT_AFTER, 1); /* ZeRO-2/3: for the head's forward and backward */
        sw_trace_set_phase(SW_PHASE_FORWARD, -1);
        s->mops.head_forward(s->model, step, sw_blocks_output(b));
        sw_trace_set_phase(SW_PHASE_BACKWARD, -1);
        s->mops.head_backward(s->model, step, sw_blocks_output(b), dx);
        sw_params_release_unit(x->params, SW_UNIT_AFTER, 1);
    } else sw_recv_on(x->comm, SW_GROUP_PP, channel(s, j, 1), dx, (s->stage + 1) % s->pp);
    x->wdefer = s->split ? &s->wl[slot] : NULL; /* the split: the blocks' weight gradients left to the W unit */
    sw_blocks_backward(b, step);
    x->wdefer = NULL, x->wdy = NULL;
    for (int i = 0; s->split && i < s->wl[slot].n; i++) {
        const sw_wgrad *w = &s->wl[slot].item[i];
        s->wmask[w->l->w] = 1;
        if (w->with_bias && w->l->b >= 0) s->wmask[w->l->b] = 1;
    }
    sw_trace_set_phase(SW_PHASE_BACKWARD, -1);
    if (j == 0) {
        for (int r = 1; r < s->pp && dcond; r++) { /* every other stage's part of the conditioning's gradient */
            sw_tensor *part = sw_scratch(x, "pipeline_dcond", dcond->rows, dcond->cols);
            sw_recv_on(x->comm, SW_GROUP_PP, DCOND_CHANNEL, part, r);
            sw_copy_flat(sw_tensor_whole(part, STARPU_R), sw_tensor_whole(dcond, STARPU_RW), 1);
        }
        sw_params_gather_unit(x->params, SW_UNIT_BEFORE, 1);
        s->mops.embed_backward(s->model, step, dx);
        sw_params_release_unit(x->params, SW_UNIT_BEFORE, 1);
    } else {
        sw_send_on(x->comm, SW_GROUP_PP, channel(s, j - 1, 1), dx, (s->stage + s->pp - 1) % s->pp);
        if (c == 0 && dcond) sw_send_on(x->comm, SW_GROUP_PP, DCOND_CHANNEL, dcond, 0); /* this stage's last backward of k */
    }
    /* the chunk's gradients this unit wrote (the split: all but the W unit's) */
    sw_params_reduce_grads_some(x->params, k, s->V > 1 ? c : -1, s->wmask, 0);
}

/* Zero Bubble's W unit: micro-batch k's weight gradients through chunk c,
 * from what its B unit kept in micro slot `slot` (the output gradients,
 * beside the saved inputs), then summed into the buckets; the slot is free
 * for the next forward after it (schedule.h) */
static void weight_grads(sw_pipeline *s, int step, int c, int k, int slot)
{
    (void)step;
    meter(s, 2);
    sw_ctx_set_micro_batch(s->x, k);
    sw_trace_set_phase(SW_PHASE_BACKWARD, -1);
    sw_linear_weight_grads(s->x, &s->wl[slot]);
    sw_params_reduce_grads_some(s->x->params, k, s->V > 1 ? c : -1, s->wmask, 1);
}

void sw_pipeline_step(sw_pipeline *s, int step)
{
    sw_check_ptr("sw_pipeline_step", "s", s);
    sw_params_cast_bf16(s->x->params); /* bf16: the GEMMs' weights, as they are now */
    /* Each unit at a priority below the previous one's, 4 apart (the
     * layers' own, -1..1, stay inside it): without, a stage's worker ran the
     * tasks of every ready unit interleaved -- the first micro-batch's
     * activation left stage 0 after all four warm-up forwards' embeddings
     * and first layers, and each stage's input gradient after the next
     * micro-batch's forward tasks (docs/simulation.md, "The pipeline
     * judged"). */
    const int base = sw_set_task_priority_base(0);
    for (int i = 0; i < s->units; i++) {
        const sw_unit *u = &s->order[i];
        sw_set_task_priority_base(base + 4 * (s->units - i));
        (u->fwd ? forward : u->w ? weight_grads : backward)(s, step, u->chunk, u->k, u->slot);
    }
    sw_set_task_priority_base(base);
    if (s->meter == 1) sw_task_meter(NULL), s->meter = 2; /* measured: sw_pipeline_replan once its tasks ran */
    else if (s->meter == 3) s->meter = 1;                 /* the first step: the next one measured */
    sw_counter_add(SW_COUNT_LATE_W, s->late_w);
    /* The scratch is dead until the next step: StarPU may drop every copy
     * instead of keeping (or writing back) it. Once per step: the next
     * micro-batch overwrites it anyway. (Invalidating after each
     * micro-batch once raced -- wrong losses with tp 2 + sp and 4
     * micro-batches, garbage received by the previous stage -- because
     * StarPU skipped the partitioning after an invalidation and the tiles'
     * writes passed the whole tensor's pending readers; sw_tensor_invalidate
     * orders them now, docs/runtime-notes.md.) */
    sw_scratch_invalidate(s->x);
    sw_params_update(s->x->params, step);
    /* the loss, from the last stage to every other */
    int last = s->stage == s->pp - 1;
    for (int r = 0; r < s->pp - 1 && last; r++) sw_send_on(s->x->comm, SW_GROUP_PP, LOSS_CHANNEL, sw_pipeline_loss(s), r);
    if (!last) sw_recv_on(s->x->comm, SW_GROUP_PP, LOSS_CHANNEL, sw_pipeline_loss(s), s->pp - 1);
}

void sw_pipeline_traffic(sw_pipeline *s, sw_traffic *t)
{
    sw_check_ptr("sw_pipeline_traffic", "s", s);
    memset(t, 0, sizeof *t);
    sw_comm *c = s->x->comm;
    int K = s->K, first = s->stage == 0, last = s->stage == s->pp - 1, J = s->pp * s->V;
    if (first && s->mops.embed_traffic) s->mops.embed_traffic(s->model, t);
    for (int k = 0; k < K; k++) { /* ZeRO-3's gathers around what comes before and after the blocks */
        if (first) sw_params_gather_traffic(s->x->params, SW_UNIT_BEFORE, 0, t);
        if (first) sw_params_gather_traffic(s->x->params, SW_UNIT_BEFORE, 1, t);
        if (last) sw_params_gather_traffic(s->x->params, SW_UNIT_AFTER, 1, t);
    }
    double boundary = sw_comm_bytes(c, SW_GROUP_PP, SW_COLL_SEND, s->bc[0].rows, s->bc[0].cols);
    for (int v = 0; v < s->V; v++) {
        int j = v * s->pp + s->stage;
        sw_blocks_traffic(&s->bc[v], &s->ops, s->model, t);
        if (j < J - 1) t->forward[SW_GROUP_PP] += K * boundary;
        if (j > 0) t->backward[SW_GROUP_PP] += K * boundary;
    }
    if (last && s->mops.head_traffic) s->mops.head_traffic(s->model, t);
    if (last) t->backward[SW_GROUP_PP] += (s->pp - 1) * sw_comm_bytes(c, SW_GROUP_PP, SW_COLL_SEND, 1, 1);
    for (int k = 0; k < K && s->pp > 1; k++) { /* the conditioning to every other stage, its gradients back */
        sw_tensor *cond = conditioning(s, k, 0);
        if (!cond) break;
        double bytes = sw_comm_bytes(c, SW_GROUP_PP, SW_COLL_SEND, cond->rows, cond->cols);
        if (first) t->forward[SW_GROUP_PP] += (s->pp - 1) * bytes;
        else t->backward[SW_GROUP_PP] += bytes;
    }
    sw_params_traffic(s->x->params, t);
}
