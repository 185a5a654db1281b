/** @file
 * Block policies: a model's stack of blocks run forward and backward with
 * activation recomputation and offload applied the same way whatever a
 * block contains (Megatron's recomputation, Open-Sora's gc_step and
 * checkpoint offload).
 *
 * The model gives three functions: keep (allocate, into a sw_saved set,
 * what one block keeps from forward to backward), forward (block `layer`
 * from x into y, using the saved set of its slot) and backward (dx holds
 * the gradient of the block's output on entry, of its input on return).
 * The service owns the residual stream between blocks (x[0] .. x[L]) and
 * its gradient, and chooses the slots:
 *  - SW_RECOMPUTE_NONE / SELECTIVE: one saved set per block (what "none"
 *    keeps more is the layers' business, e.g. attention probabilities);
 *  - SW_RECOMPUTE_FULL: only the input of every recompute_every-th block is
 *    kept; each group's forward is submitted again before its backward into
 *    recompute_every shared slots (forward's y NULL: output not needed);
 *  - offload: two slots alternate; after a block's forward its saved set
 *    is copied to tensors on the offload node and marked "won't use"
 *    (StarPU writes them there and evicts the working copies first); in
 *    backward, last block first, they are copied back, and the block
 *    below's prefetched while a block computes; with several micro-batches
 *    in flight (pipeline stages) each has its own copies there. With
 *    SW_RECOMPUTE_FULL (Open-Sora's checkpoint offload) the kept inputs go
 *    instead: two working tensors alternate, each group's kept input is
 *    copied to the offload node once the group's first block has read it,
 *    and back before the group is refilled (the group below prefetched). */
#ifndef STARWEAVE_BLOCKS_H
#define STARWEAVE_BLOCKS_H

#include "starweave/comm.h"
#include "starweave/params.h"
#include "starweave/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Activation recomputation: what a block keeps from forward to backward. */
typedef enum sw_recompute {
    SW_RECOMPUTE_NONE,      /**< one saved set per block; the layers keep more (attention probabilities) */
    SW_RECOMPUTE_SELECTIVE, /**< one saved set per block */
    SW_RECOMPUTE_FULL       /**< only every recompute_every-th block's input; forward again before backward */
} sw_recompute;
/** Mode's name: "none", "selective", "full". */
const char *sw_recompute_name(int mode);
/** The mode of a name of sw_recompute_name; -1 for anything else. */
int sw_recompute_parse(const char *name);

/** The size of a saved set. */
enum { SW_SAVED_MAX = 64 /**< most tensors in one saved set (sw_saved; a DiT block of four modulated branches keeps up to 40) */ };
/** The tensors one block keeps. */
typedef struct sw_saved {
    char prefix[24];         /**< names: prefix.what (e.g. "h3", "m1.h3" for micro slot 1, "work0") */
    ///@{
    int slot, n;             /**< the set's slot (0 .. sw_blocks_slots - 1), and its tensors in t */
    ///@}
    sw_tensor *t[SW_SAVED_MAX]; /**< the tensors (sw_saved_new) */
    void *state;             /**< sw_block_ops.state_bytes zeroed bytes of the model's own, per set (NULL if 0):
                                where keep records the tensors it made, by name, for forward and backward */
    int declare;             /**< the memory model's pass: nothing allocated */
    double bytes;            /**< what the set declared */
} sw_saved;
/** A new [rows, cols] fp32 tensor of the set; NULL, counted in s->bytes,
 * when s->declare (keep must then only record: the memory model). */
sw_tensor *sw_saved_new(sw_saved *s, const char *what, int64_t rows, int64_t cols);

/** What the model gives the block service: a block's keep, forward and
 * backward (and, optionally, its traffic model). */
typedef struct sw_block_ops {
    /** allocates, into the saved set s, what one block keeps from forward to backward */
    void (*keep)(void *model, sw_saved *s);
    /** block `layer` from x into y (NULL: output not needed), using the saved set of its slot */
    void (*forward)(void *model, int step, int layer, sw_saved *s, sw_tensor *x, sw_tensor *y);
    /** dx holds the gradient of the block's output on entry, of its input on return */
    void (*backward)(void *model, int step, int layer, sw_saved *s, sw_tensor *x, sw_tensor *dx);
    /** optional, for the traffic model: adds block `layer`'s traffic (its
     * layers' sw_*_traffic) to t; output 0: of a forward with y NULL */
    void (*traffic)(void *model, int layer, int output, sw_traffic *t);
    /** bytes of the model's record of one saved set (sw_saved.state; 0: none, the model indexes its
     * own array by sw_saved.slot) */
    size_t state_bytes;
} sw_block_ops;

/** The stack of blocks and its policies (sw_blocks_create). */
typedef struct sw_blocks_config {
    int layers;              /**< blocks */
    ///@{
    int64_t rows, cols;      /**< the residual stream between blocks: [l, h] */
    ///@}
    int recompute;           /**< sw_recompute */
    int recompute_every;     /**< FULL: blocks per kept input (>= 1) */
    int offload;             /**< needs sw_options.offload (with FULL: the kept inputs) */
    ///@{
    /** pipeline stages (filled by sw_pipeline_create): this stage's blocks, first .. first + count - 1
     * (0, 0: all of them) */
    int first, count;
    ///@}
    int inflight;            /**< micro-batches in flight, each with its residual stream and saved sets (0: 1) */
    /** the registry whose ZeRO-2/3 hooks run around each block's forward and backward
     * (sw_params_gather_unit / sw_params_release_unit, unit = the block; filled by
     * sw_pipeline_create; NULL: none) */
    sw_params *params;
} sw_blocks_config;
/** Fills c with the defaults: layers, rows and cols 0 (the caller sets
 * them), SW_RECOMPUTE_SELECTIVE (a field left out of an initializer is 0:
 * SW_RECOMPUTE_NONE), recompute_every 1, no offload, first and count 0
 * (all blocks), inflight 1, params NULL (sw_pipeline_create fills first,
 * count, inflight and params). */
void sw_blocks_config_default(sw_blocks_config *c);
/** The saved sets the service makes for c (keep runs once for each):
 * the stage's blocks times the micro-batches in flight, or the working
 * sets FULL and offload refill (recompute_every, 2). */
int sw_blocks_slots(const sw_blocks_config *c);

/** Refuses (exit 2, "offload-budget-mb (N) must hold two blocks' saved
 * activations (2 x M MiB)") an offload budget (sw_options.offload_budget_mb)
 * below two of c's saved sets, the block in backward and the one
 * prefetched: with less, StarPU finds no room for the buffers it needs and
 * waits forever. No-op without c->offload or a budget. sw_blocks_create
 * checks it; a model may check earlier (before it allocates). */
void sw_blocks_check_offload_budget(const sw_blocks_config *c, const sw_block_ops *ops, void *model);

/** A stack of blocks (opaque): sw_blocks_create. */
typedef struct sw_blocks sw_blocks;
/** The service for c->layers blocks of model: the residual stream, its
 * gradient and the saved sets (keep runs for each slot). Offload with
 * SW_RECOMPUTE_FULL is refused (exit 2). */
sw_blocks *sw_blocks_create(const sw_blocks_config *c, const sw_block_ops *ops, void *model);
/** Frees the stack's tensors. NULL: no-op. */
void sw_blocks_destroy(sw_blocks *b);
/** The micro slot (0 .. inflight - 1) whose residual stream and saved sets
 * the calls below use (pipeline stages: one per micro-batch in flight). */
void sw_blocks_set_micro_slot(sw_blocks *b, int slot);
sw_tensor *sw_blocks_input(sw_blocks *b);  /**< x[0]: written by what comes before the blocks */
sw_tensor *sw_blocks_output(sw_blocks *b); /**< x[L] */
sw_tensor *sw_blocks_grad(sw_blocks *b);   /**< the residual stream's gradient: of x[L] before
                                              sw_blocks_backward, of x[0] after */
/** Submits every block's forward, x[0] to x[L] (with offload, each
 * block's saved set -- with FULL each kept input -- copied to the offload
 * node after its forward). */
void sw_blocks_forward(sw_blocks *b, int step);
/** Submits every block's backward, last block first (with SW_RECOMPUTE_FULL
 * each group's forward again first; with offload, each block's saved set,
 * or group's kept input, copied back first). */
void sw_blocks_backward(sw_blocks *b, int step);
/** The memory model: bytes block `layer` (of this stage) keeps from its forward to its
 * backward on this rank for one micro-batch -- its input (with FULL only every
 * recompute_every-th block's) and the saved set its keep declares (none
 * with FULL: the slots are shared; with offload, on the offload node) --
 * from the shapes alone: keep runs on a declaring set (s->declare, slot 0).
 * Call it before sw_blocks_create (e.g. to refuse what cannot fit). */
double sw_blocks_saved_model(const sw_blocks_config *c, const sw_block_ops *ops, void *model, int layer);
/** Every byte sw_blocks_create(c, ...) allocates in main RAM, from the
 * shapes alone: the residual stream of each micro-batch in flight (with
 * FULL the kept inputs, the output and the working group's inputs), the
 * saved sets (sw_blocks_slots of them; with FULL and offload the working
 * sets), the residual gradient. The offload node's copies are not counted. */
double sw_blocks_bytes(const sw_blocks_config *c, const sw_block_ops *ops, void *model);
/** A block's saved bytes (sw_blocks_saved_bytes). */
typedef struct sw_block_memory {
    ///@{
    double model_bytes, registered_bytes; /**< the memory model's, and the registered tensors' */
    ///@}
} sw_block_memory;
/** Block `layer`'s saved bytes for one micro-batch: the model's
 * (sw_blocks_saved_model, taken at creation) and those of the tensors the
 * service registered (0 and 0 for a block of another stage). */
sw_block_memory sw_blocks_saved_bytes(const sw_blocks *b, int layer);
/** The traffic model of the stack (ops->traffic required): every block's (of this stage)
 * forward and backward, and with SW_RECOMPUTE_FULL every block's forward
 * again in backward (the last of each group without its output). Needs no
 * sw_blocks, so a model can be planned before it is allocated. */
void sw_blocks_traffic(const sw_blocks_config *c, const sw_block_ops *ops, void *model, sw_traffic *t);

#ifdef __cplusplus
}
#endif
#endif
