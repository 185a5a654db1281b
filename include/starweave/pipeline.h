/** @file
 * The step driver and pipeline parallelism, for any model built from the
 * layers: the model gives what comes before its blocks (the embedding),
 * its blocks (blocks.h) and what comes after them (final norm, head and
 * loss); the driver submits a whole training step -- every micro-batch's
 * forward and backward, the gradient reduction and the update -- as one
 * graph.
 *
 * With pp pipeline stages (the mesh's outermost dimension) stage s runs
 * blocks s L/pp .. (s + 1) L/pp - 1, the first stage also what comes
 * before them and the last what comes after; a stage sends its output to
 * the next stage and the gradient of its input to the previous one
 * (sw_send, sw_recv over the pp group), and the registry holds on each
 * rank only its stage's parameters (sw_params_set_unit).
 *
 * With pp_chunks = V > 1 in the registry's configuration (Megatron's
 * interleaved virtual stages) each stage runs V chunks of layers / (pp V)
 * blocks: chunk c of stage s is virtual stage c pp + s, so a micro-batch
 * goes through every stage V times (the last stage's chunk c sends to the
 * first stage's chunk c + 1).
 *
 * The schedule is computed, not written down: a list schedule from the
 * stages' in-flight quotas, a priority and costs. Stage s holds the saved
 * sets of at most q_s chunks of micro-batches at once (its in-flight
 * quota; without chunks, micro-batches), in one pool of micro slots
 * shared by its chunks: the forward of a micro-batch into a slot reuses
 * the slot an earlier micro-batch's backward reads, so it cannot start
 * before that backward has run. Each rank simulates every stage (a
 * forward costs 1, a backward 2 -- or measured costs, below): an idle stage starts a ready forward
 * (the latest chunk first) while its quota has room, else a ready
 * backward; each stage submits its work in its order of starts, with the
 * micro slot the simulation gave each micro-batch. StarPU derives the
 * dependencies from that order on each handle: within a stage the layers'
 * shared scratch and the micro slots make it run the stage's units in
 * that order; between stages the sends and receives are the
 * dependencies, so a stage waits for its neighbours' data, not for a
 * clock. The costs: the first two steps' order from the guess (a forward
 * 1, a backward 2; F, B and W 1 each with the split); the second step's
 * tasks' execution times are measured (StarPU's profiling, per stage and
 * kind of unit; the first step's carry one-time costs), and once they
 * have run sw_pipeline_replan (the program's call between steps: the
 * driver only submits) sums them per stage over its ranks and simulates
 * the order of every later step again from them, within the pools of
 * micro slots allocated at create (so memory stays as the model says), or
 * keeps the guess's order where no order fits them or where, replayed under
 * the measured costs, it ends sooner (graphs/step/schedule.h,
 * sw_schedule_replan; in a simulation too, from the simulated times)
 * (sw_pipeline_schedule_costs says which). Without chunks the order is Megatron-core's 1F1B for q_s = pp -
 * s and GPipe's for q_s = the micro-batches (tests/test_schedule.c). The
 * default q_s = (V - 1) pp + pp - s is 1F1B's memory without chunks (pp -
 * s micro-batches); pp-inflight Q micro-batches gives Q V (GPipe: Q = the
 * micro-batches). Quotas that let no order finish are refused (exit 2 on
 * every rank), and so are more than 14 chunks per stage (two
 * point-to-point channels each between a pair of neighbours, above a
 * model's own: comm.h).
 *
 * Zero Bubble's split (x->c.zero_bubble, ZB-H1): each backward is a B
 * unit (input gradients) and a W unit (the weight gradients the blocks'
 * linears left, sw_linear_defer_weight_grads), every unit costing 1; a
 * micro-batch keeps its slot until its W, every stage up to the first
 * stage's quota (1F1B's peak memory: later stages hold more than under
 * 1F1B), and an idle stage starts a forward, else a B, else its oldest W
 * (graphs/step/schedule.h). */
#ifndef STARWEAVE_PIPELINE_H
#define STARWEAVE_PIPELINE_H

#include "starweave/blocks.h"
#include "starweave/comm.h"
#include "starweave/layers.h"
#include "starweave/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The stage that runs block `layer` of `layers` over pp stages of
 * `chunks` chunks each: the registry's placement (sw_params_stage_of), which
 * the driver follows. */
int sw_pipeline_stage_of(int layer, int layers, int pp, int chunks);

/** What a model gives the driver besides its blocks. The current
 * micro-batch is the context's (sw_ctx.micro), set by the driver before
 * each call. */
typedef struct sw_model_ops {
    /** first stage: what comes before the blocks, the micro-batch's input into x0 [l, h] */
    void (*embed_forward)(void *model, int step, sw_tensor *x0);
    /** its backward: dx0 holds the gradient of x0 (consumed) */
    void (*embed_backward)(void *model, int step, sw_tensor *dx0);
    /** last stage: what comes after the blocks, from their output xL, through the loss (summed over
     * the step's micro-batches into the tensor `loss` gives) */
    void (*head_forward)(void *model, int step, sw_tensor *xL);
    /** its backward: writes the gradient of xL into dxL */
    void (*head_backward)(void *model, int step, sw_tensor *xL, sw_tensor *dxL);
    /** the model's [1,1] loss tensor, called on every stage: on the last the one its head writes (the
     * driver sends it to the others); on the others NULL where the model has no head there, else a
     * [1,1] tensor the driver receives the step's loss into -- so the model's loss tensor holds the
     * step's loss on every rank where it exists (sw_pipeline_loss returns it, or the driver's copy) */
    sw_tensor *(*loss)(void *model);
    /** optional, for the traffic model: adds what embed_forward and embed_backward send for one step */
    void (*embed_traffic)(void *model, sw_traffic *t);
    /** optional, for the traffic model: adds what head_forward and head_backward send for one step */
    void (*head_traffic)(void *model, sw_traffic *t);
    /** optional (NULL: none): a per-micro-batch conditioning that blocks (and the head) read besides
     * the residual stream -- a DiT's timestep embedding, made by embed_forward -- and its gradient,
     * which they add into: micro-batch k's value (grad 0) or gradient (grad 1), fp32 tensors of
     * the same shape on every stage. The driver zeroes the gradient on each stage before that
     * stage's first backward of k (so head_backward and every block's backward add into it).
     * With pipeline stages the first stage sends the value to every other stage after
     * embed_forward, before their first forward of k, and every other stage sends its gradient
     * back after its last backward of k; the first stage adds them into its own before
     * embed_backward, which then holds the sum over every block and the head. */
    sw_tensor *(*conditioning)(void *model, int k, int grad);
} sw_model_ops;

/** A model's step driver (opaque): sw_pipeline_create. */
typedef struct sw_pipeline sw_pipeline;

/** The driver for a model on the context x (its registry -- whose
 * pp_chunks sets the chunks per stage --, mesh and micro-batches:
 * x->c.grad_accum of them per step): creates the stacks of this stage's
 * chunks of blocks (c->first, count and inflight are filled here).
 * inflight: the micro-batches a stage holds saved sets for at once, 0 for
 * 1F1B's quota (pp - stage; with V chunks (V - 1) pp + pp - stage chunks'
 * sets), or a number Q >= 1 for every stage (GPipe: the micro-batches), at
 * most the micro-batches. Refused (exit 2 on every rank): blocks not
 * divisible by the stages times the chunks, chunks without stages,
 * inflight < 0, quotas that let no order finish. */
sw_pipeline *sw_pipeline_create(sw_ctx *x, const sw_blocks_config *c, const sw_block_ops *ops,
                                const sw_model_ops *mops, void *model, int inflight);
/** Frees the driver and its blocks. NULL: no-op. */
void sw_pipeline_destroy(sw_pipeline *s);
/** The stack of this stage's blocks (its first chunk's). */
sw_blocks *sw_pipeline_blocks(sw_pipeline *s);
/** This stage's chunks (1 without interleaving). */
int sw_pipeline_chunks(const sw_pipeline *s);
/** The stack of this stage's chunk `chunk` (0 .. sw_pipeline_chunks - 1;
 * sw_params_unit_chunk gives a block's). */
sw_blocks *sw_pipeline_chunk(sw_pipeline *s, int chunk);
/** The memory model: every byte sw_pipeline_create(x, c, ops, ..., inflight)
 * allocates for this stage's blocks (sw_blocks_bytes of the first chunk
 * with the stage's pool of micro slots, at most its quota (with Zero
 * Bubble's split at most the first stage's), and each other
 * chunk's gradient stream), from the shapes alone. */
double sw_pipeline_blocks_bytes(const sw_ctx *x, const sw_blocks_config *c, const sw_block_ops *ops, void *model,
                                int inflight);
/** [1,1] the step's loss on this rank, once sw_pipeline_step's tasks have
 * run: the model's loss tensor (sw_model_ops.loss: written by the head on
 * the last stage, received into on the others), or on a stage where the
 * model has none (loss() NULL) the driver's copy received from the last
 * stage. Read it on any rank: the same value everywhere. */
sw_tensor *sw_pipeline_loss(sw_pipeline *s);
/** This rank's stage and the number of stages. */
int sw_pipeline_stage(const sw_pipeline *s, int *stages);
/** The costs the order of the step submitted last came from, of stage
 * `stage`'s units: returns 0 for the guess (the first two steps, one
 * stage, or no order of the measured costs within the
 * pools: *f 1, *b 2 and *w 0, or 1, 1 and 1 with Zero Bubble's split, in
 * units of a forward), 1 for costs measured in the second step (after
 * sw_pipeline_replan: milliseconds per unit, the stage's mean; *b the input gradients
 * with the split, else the whole backward, and *w 0), 2 for costs measured
 * (the same) of which no order fits the quotas and the pools (uneven
 * costs with interleaved chunks: the guess's order stays), 3 for costs
 * measured (the same) under which the guess's order ends sooner than the
 * one simulated from them, and stays, 4 for costs measured (the same)
 * under which the patient simulation's order (a W only where it delays no
 * input on its way) ends soonest (graphs/step/schedule.h,
 * sw_schedule_replan). f, b, w may be NULL. */
int sw_pipeline_schedule_costs(const sw_pipeline *s, int stage, double *f, double *b, double *w);
/** The point-to-point hop the order's costs include, in milliseconds:
 * from a unit's end on stage `stage` to its output's arrival on stage
 * `stage` + 1, and back (half the shortest of three round trips of a
 * boundary tensor, measured by sw_pipeline_replan between the second step
 * and the third); 0 before (the guess has no hop). */
double sw_pipeline_schedule_hop(const sw_pipeline *s, int stage);
/** With Zero Bubble's split, the W units that stage `stage`'s current
 * order (what sw_pipeline_step submits: the guess's, after
 * sw_pipeline_replan the measured costs') places after its last forward
 * (in the cooldown, where 1F1B idles); 0 without the split. Each rank computes every
 * stage's order, so any stage may be asked on any rank. */
int sw_pipeline_late_w(const sw_pipeline *s, int stage);
/** Blocking, collective over every rank of the model (call it on each,
 * between steps, with the submitted steps' tasks run -- train_loop calls
 * it after each step's wait): once the second step (the measured one) has
 * run, sums its measured costs per stage over the ranks
 * (sw_comm_sum_host) and computes the order of the later steps from them;
 * returns 1 then, 0 on every other call (no stages, before the
 * measurement, after it). In a simulation (SimGrid) too: the measured
 * times are the simulated ones, from the calibrated performance models. Until it is called after the second step,
 * StarPU's profiling stays on and the guess's order is used. */
int sw_pipeline_replan(sw_pipeline *s);
/** This stage's in-flight quota (chunks of micro-batches whose saved sets it holds at once). */
int sw_pipeline_inflight(const sw_pipeline *s);
/** Submits training step `step` (1-based): bf16 weight copies, every
 * micro-batch's forward and backward on this stage, the gradient
 * reduction and the AdamW update; then the loss from the last stage to
 * every stage. The micro-batches' inputs (tokens) must be written before
 * (the model's business); read the loss with sw_pipeline_loss (or the
 * model's loss tensor, which holds the same on every stage it exists:
 * sw_model_ops.loss). */
void sw_pipeline_step(sw_pipeline *s, int step);
/** The traffic model of one step on this rank: what comes before the
 * blocks (first stage), this stage's blocks, what comes after (last stage),
 * the sends between stages, the loss sent to every stage, the registry's
 * reductions. Fills t (zeroed first). */
void sw_pipeline_traffic(sw_pipeline *s, sw_traffic *t);

#ifdef __cplusplus
}
#endif
#endif
