/** @file
 * The parameter registry: every parameter of a model with its global
 * shape, how tensor parallelism slices it, its initialisation, its
 * gradient and its AdamW moments; and the services that work on any
 * registry, whatever the model: bf16 copies of the GEMM weights, gradient
 * accumulation over micro-batches, data-parallel gradient reduction in
 * flat buckets (reverse order, each all-reduced as soon as its gradients
 * are final), ZeRO-1 and the AdamW update. Checkpoints (checkpoint.h) save
 * and load a registry.
 *
 * Use: sw_params_new, sw_params_add for each parameter (layers.h's
 * constructors add theirs), sw_params_allocate; then per step
 * sw_params_cast_bf16 before the first forward, sw_params_reduce_grads
 * after each micro-batch's backward, sw_params_update. */
#ifndef STARWEAVE_PARAMS_H
#define STARWEAVE_PARAMS_H

#include <stdint.h>
#include "starweave/comm.h"
#include "starweave/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** This TP rank's slice of a global [rows, cols] parameter. Up to three
 * blocks of it stacked along `dim` (0: rows [start, start + count), 1:
 * columns), e.g. a grouped-query QKV weight's q | k | v heads. n == 0:
 * replicated over the TP group (every rank holds the whole tensor). */
typedef struct sw_slice {
    ///@{
    int n, dim;             /**< blocks (0: replicated), and the dim they are stacked along */
    ///@}
    ///@{
    int64_t start[3], count[3]; /**< each block: its first row (column) and extent */
    ///@}
    int share[3];           /**< TP ranks holding the same block (0 or 1: this rank alone; e.g. a K/V
                               head replicated over tp/kv_heads ranks): the gradient norm counts it once */
} sw_slice;

/** rank r's 1/t of the rows (dim 0) or columns (dim 1) of extent n */
sw_slice sw_slice_even(int dim, int64_t n, int t, int r);

/** A parameter's description (sw_params_add). */
typedef struct sw_param_desc {
    char name[48];          /**< e.g. "h3.qkv_w" (checkpoints and traces) */
    ///@{
    int64_t rows, cols;     /**< global shape; vectors are [1, n] */
    ///@}
    sw_slice slice;         /**< this TP rank's part */
    int gemm;               /**< a GEMM operand: gets a bf16 copy with dtype bf16 */
    int fp32_reads;         /**< a GEMM operand that a non-GEMM op also reads in fp32 (an embedding's
                                 lookup of a tied table): with ZeRO-3 and bf16 its fp32 values are
                                 gathered too, where other GEMM weights gather only their bf16 copy */
    float init_std;         /**< > 0: normal(0, init_std) from the seed; else every element init_value */
    float init_value;       /**< the constant of init_std <= 0 */
    int64_t init_rows;      /**< rows initialised (the rest 0: padded vocabulary); 0: all */
} sw_param_desc;

/** The registry's configuration (sw_params_new). Start from
 * sw_params_config_default and set what differs. seed, tiles and
 * grad_accum are the layer context's (sw_ctx_config): left 0 they take
 * its values when the registry is given to sw_ctx_init; set, they must
 * equal them (refused, exit 2). A registry used without a context sets
 * them (sw_params_allocate refuses tiles or grad_accum 0). */
typedef struct sw_params_config {
    uint64_t seed;          /**< initialisation: element i of parameter k from (seed, k, i), whatever the slicing
                                 or sharding (0 with a context: sw_ctx_config.seed) */
    int tiles;              /**< row tiles of the AdamW update (0: sw_ctx_config.tiles) */
    int dtype;              /**< SW_BF16: bf16 copies of the GEMM weights */
    int grad_accum;         /**< micro-batches per step (0: sw_ctx_config.grad_accum) */
    float bucket_mb;        /**< gradient bucket size (MiB; the first bucket at most 1 MiB) */
    /** ZeRO stage over the gradient group: 0 none; 1 AdamW moments and update
     * sharded; 2 also the gradients (reduce-scattered per unit as its
     * backward ends, only the shard kept); 3 also the values (sharded at
     * rest, all-gathered into a pool around each unit's forward and
     * backward). A parameter with fewer rows than the group stays whole
     * (all-reduced); with a group of 1 every stage is plain data parallelism. */
    int zero;
    /** the ranks holding different data of the same parameters: gradients
     * are summed over it (SW_GROUP_DP, or SW_GROUP_SP_DP with context
     * parallelism); its size 1: no reduction. Left out of an initializer it
     * is 0, SW_GROUP_WORLD: sw_ctx_init refuses any group but the
     * context's gradient group (sw_ctx.grad_group), naming both */
    sw_group grad_group;
    ///@{
    float lr, beta1, beta2, adam_eps, weight_decay; /**< AdamW's hyperparameters (sw_adamw_args) */
    ///@}
    float clip_grad;        /**< > 0: gradients scaled by min(1, clip_grad / global L2 norm) before AdamW */
    /** ZeRO-2/3: units the pool holds at once (>= 1; 0: 2), the one computing
     * and zero_pool - 1 gathered ahead of it (the prefetch depth) */
    int zero_pool;
    /** model chunks per pipeline stage (Megatron's virtual stages, interleaved: stage s runs chunks
     * s, s + pp, ..., of layers / (pp x pp_chunks) blocks each; 0 or 1: one contiguous range) */
    int pp_chunks;
} sw_params_config;

/** Fills c with the defaults: seed, tiles and grad_accum 0 (the layer
 * context's, at sw_ctx_init), fp32, buckets of 25 MiB, no ZeRO,
 * grad_group SW_GROUP_DP (set SW_GROUP_SP_DP with ulysses or ring),
 * PyTorch's AdamW (lr 1e-3, betas 0.9 and 0.999, eps 1e-8, weight decay
 * 0.01), no clipping, zero_pool 2, one chunk per pipeline stage. */
void sw_params_config_default(sw_params_config *c);
/** A parameter registry (opaque): sw_params_new. */
typedef struct sw_params sw_params;

/** A new, empty registry. comm: the mesh's collectives (NULL on one rank) */
sw_params *sw_params_new(const sw_params_config *c, sw_comm *comm);
/** Registers a parameter; returns its index (registration order: the
 * order of checkpoints and of the init keys). */
int sw_params_add(sw_params *p, const sw_param_desc *d);
/** The units of a model's parameters (sw_params_set_unit): what comes
 * before the blocks (the embedding), block l (l >= 0), what comes after
 * them (final norm, head). The registry places the units on the pipeline
 * stages (the mesh's pp, pp_chunks of the configuration): the first stage
 * runs SW_UNIT_BEFORE, stage s the blocks sw_params_stage_of gives it,
 * the last SW_UNIT_AFTER; a rank holds (allocates, updates, saves) only the
 * parameters of the units its stage runs, and the step driver (pipeline.h)
 * runs on each stage the blocks placed there. */
enum {
    SW_UNIT_BEFORE = -1, /**< what comes before the blocks (the default unit) */
    SW_UNIT_AFTER = -2   /**< what comes after the blocks */
};
/** The unit of the parameters registered from now on: a block index (>= 0),
 * SW_UNIT_BEFORE (until the first call) or SW_UNIT_AFTER. A model calls it
 * before each block's parameters and before what comes after them. */
void sw_params_set_unit(sw_params *p, int unit);
/** Parameter i, of SW_UNIT_BEFORE, is also read after the blocks (unit
 * SW_UNIT_AFTER): a tied embedding and LM head. With pipeline stages both
 * end stages hold it and its gradients are summed between them (the mesh's
 * pp_ends group) before the update. Anything else is refused (exit 2). */
void sw_params_share(sw_params *p, int i, int unit);
/** The stage that runs block `layer` of `layers` over pp stages of
 * `chunks` chunks each (0 or 1: contiguous ranges of layers / pp blocks;
 * else virtual stage layer / (layers / (pp chunks)), on stage that mod pp):
 * the placement of the blocks, the registry's (sw_pipeline_stage_of is the
 * same). */
int sw_params_stage_of(int layer, int layers, int pp, int chunks);
/** The pipeline stage that runs `unit` (0 without pipeline stages). */
int sw_params_unit_stage(const sw_params *p, int unit);
/** The chunk of its stage that runs `unit` (0 .. pp_chunks - 1; 0 without chunks). */
int sw_params_unit_chunk(const sw_params *p, int unit);
/** 1 when this rank's stage runs `unit`. */
int sw_params_runs_unit(const sw_params *p, int unit);
/** 1 when this rank holds parameter i (after sw_params_allocate; every
 * parameter without pipeline stages). Not held: its value, gradient and
 * moments are NULL. */
int sw_params_held(const sw_params *p, int i);
/** 1 when parameter i's tensors exist on this rank (held, and
 * sw_params_allocate has run), else 0. */
int sw_params_allocated(const sw_params *p, int i);
/** Allocates every tensor of the parameters this rank holds (with
 * pipeline stages, those of its stage's units: the blocks must be
 * divisible by the stages, exit 2 otherwise) and submits the tasks that
 * write the initial values and zero the moments (one per tensor;
 * asynchronous: what reads them after, tasks or acquires, waits for them). */
void sw_params_allocate(sw_params *p);
/** Frees the registry and its tensors. NULL: no-op. */
void sw_params_destroy(sw_params *p);

/** ZeRO-2/3 hook: before unit `unit`'s forward (backward 0) or backward
 * (backward 1) on this rank. ZeRO-3: a slot of the pool is claimed (after
 * the release of the unit that held it before: StarPU orders it, the host
 * does not wait) and the unit's sharded values are all-gathered into it
 * (and cast to bf16 for the GEMMs with dtype bf16); until the release,
 * sw_params_value / sw_params_gemm_weight return those views. Backward
 * (ZeRO-2 and 3): the slot's gradient part becomes the unit's gradients
 * (sw_params_grad). No-op for ZeRO 0/1, or a unit without pooled
 * parameters. The block service and the step driver call it. */
void sw_params_gather_unit(sw_params *p, int unit, int backward);
/** ZeRO-2/3 hook: after unit `unit`'s forward or backward. Backward: its
 * gradients reduce-scattered over the gradient group into their shards
 * (summed into them from the step's second micro-batch on). Then the slot
 * is released: the next claim of it waits for every task submitted on the
 * unit's views so far. */
void sw_params_release_unit(sw_params *p, int unit, int backward);
/** Adds one sw_params_gather_unit(p, unit, backward)'s all-gathers to t
 * (the traffic model; forward or backward bytes), nothing below ZeRO-3. */
void sw_params_gather_traffic(const sw_params *p, int unit, int backward, sw_traffic *t);
/** The pool's bytes (ZeRO-2/3: gathered values, bf16 copies, gradients of
 * the largest unit, times the units it holds); 0 otherwise. Part of
 * sw_params_bytes. */
double sw_params_pool_bytes(const sw_params *p);
/** The gradient buckets' bytes: the whole gradients this rank holds (not
 * ZeRO-2/3's pooled ones) where micro-batches are summed (grad_accum > 1)
 * or all-reduced without ZeRO over a gradient group of more than one; 0
 * otherwise. Each micro-batch's backward copies (the first) or adds (the
 * rest) them into the buckets; all-reduced buckets are copied back after
 * the last (grad_accum + 1 passes a step over these bytes), the others
 * added to the last micro-batch's gradients (grad_accum passes). Part of
 * sw_params_bytes. */
double sw_params_buckets_bytes(const sw_params *p);
/** The row of parameter i that row 0 of sw_params_value holds outside a
 * gather: with ZeRO-3 the value at rest is this rank's rows of it, else 0. */
int64_t sw_params_value_first_row(const sw_params *p, int i);

/** The number of parameters registered. */
int sw_params_count(const sw_params *p);
/** Parameter i's description. */
const sw_param_desc *sw_params_desc(const sw_params *p, int i);
/** The configuration the registry was created with. */
const sw_params_config *sw_params_get_config(const sw_params *p);
/** The collectives context (NULL on one rank). */
sw_comm *sw_params_comm(const sw_params *p);
/** this rank's slice of parameter i (ZeRO-3: the gathered view while its
 * unit is gathered, else this rank's rows, sw_params_value_first_row) */
sw_tensor *sw_params_value(sw_params *p, int i);
/** the gradient of this rank's slice of parameter i (ZeRO-2/3: the pool's
 * view while its unit's backward runs, else NULL for a pooled gradient) */
sw_tensor *sw_params_grad(sw_params *p, int i);
/** AdamW's first moment of parameter i (with ZeRO-1 this rank's rows only) */
sw_tensor *sw_params_adam_m(sw_params *p, int i);
/** AdamW's second moment of parameter i (with ZeRO-1 this rank's rows only) */
sw_tensor *sw_params_adam_v(sw_params *p, int i);
/** the tensor a GEMM reads: the bf16 copy with dtype bf16, else the value */
sw_tensor *sw_params_gemm_weight(const sw_params *p, int i);
/** The gradient summed over the gradient group, as the update used it: with
 * ZeRO-1 only this rank's rows (from *first_row), after sw_params_update. */
sw_tensor *sw_params_reduced_grad(sw_params *p, int i, int64_t *first_row);
/** [1,1]: the squared global gradient norm of the last update (clip_grad > 0; NULL otherwise) */
sw_tensor *sw_params_grad_norm2(sw_params *p);
/** shape of this rank's slice of the parameter d */
void sw_slice_shape(const sw_param_desc *d, int64_t *rows, int64_t *cols);
/** extraction of this rank's slice from the global tensor (row-major) */
void sw_slice_extract(const sw_param_desc *d, const float *global, float *local);
/** Bytes this rank holds for parameters, gradients, bf16 copies and moments
 * (and gradient buckets once allocated); from the descriptions, so it can
 * be asked before sw_params_allocate. */
double sw_params_bytes(const sw_params *p);
/** Adds the step's gradient reductions to t->backward (the traffic model,
 * see sw_traffic): the buckets' all-reduces over the gradient group, or
 * ZeRO-1's reduce-scatters and parameter gathers, and the clipping norm's
 * all-reduce over the world. From the descriptions, like sw_params_bytes. */
void sw_params_traffic(const sw_params *p, sw_traffic *t);

/* Step services (submit only). */
/** Step service (submits only): each GEMM weight's bf16 copy cast from its
 * fp32 value (dtype bf16; nothing otherwise). Before the first forward of a step. */
void sw_params_cast_bf16(sw_params *p);
/** After micro-batch `micro`'s backward: gradients summed into the buckets,
 * and after the last one each bucket all-reduced over the gradient group
 * and copied back (no-op when neither is needed). */
void sw_params_reduce_grads(sw_params *p, int micro);
/** The same for the parameters of chunk `chunk` of this stage only (its
 * units': sw_params_unit_chunk), after that chunk's backward of micro-batch
 * micro (interleaved pipeline stages); each bucket's all-reduce starts once
 * all its members' last micro-batch is in. chunk -1: all parameters. */
void sw_params_reduce_grads_chunk(sw_params *p, int micro, int chunk);
/** AdamW (ZeRO-1: reduce-scatter, update of this rank's rows, all-gather).
 * With clip_grad: every gradient summed over the gradient group first, the
 * global norm from each rank's distinct elements (a TP-replicated block
 * counted once, a ZeRO shard by its owner) all-reduced over the world,
 * then every gradient scaled (PyTorch's clip_grad_norm_, eps 1e-6). */
void sw_params_update(sw_params *p, int step);

#ifdef __cplusplus
}
#endif
#endif
