/* Block policies: a model's stack of blocks run forward and backward with
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
 *    below's prefetched while a block computes. */
#ifndef STARWEAVE_BLOCKS_H
#define STARWEAVE_BLOCKS_H

#include "starweave/comm.h"
#include "starweave/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sw_recompute { SW_RECOMPUTE_NONE, SW_RECOMPUTE_SELECTIVE, SW_RECOMPUTE_FULL } sw_recompute;
/* "none", "selective", "full"; parse returns -1 for anything else */
const char *sw_recompute_name(int mode);
int sw_recompute_parse(const char *name);

enum { SW_SAVED_MAX = 32 };
/* The tensors one block keeps. */
typedef struct sw_saved {
    char prefix[24];         /* names: prefix<slot>.what */
    int slot, n;
    sw_tensor *t[SW_SAVED_MAX];
    int declare;             /* the memory model's pass: nothing allocated */
    double bytes;            /* what the set declared */
} sw_saved;
/* A new [rows, cols] fp32 tensor of the set; NULL, counted in s->bytes,
 * when s->declare (keep must then only record: the memory model). */
sw_tensor *sw_saved_new(sw_saved *s, const char *what, int64_t rows, int64_t cols);

typedef struct sw_block_ops {
    void (*keep)(void *model, sw_saved *s);
    void (*forward)(void *model, int step, int layer, sw_saved *s, sw_tensor *x, sw_tensor *y);
    void (*backward)(void *model, int step, int layer, sw_saved *s, sw_tensor *x, sw_tensor *dx);
    /* optional, for the traffic model: adds block `layer`'s traffic (its
     * layers' sw_*_traffic) to t; output 0: of a forward with y NULL */
    void (*traffic)(void *model, int layer, int output, sw_traffic *t);
} sw_block_ops;

typedef struct sw_blocks_config {
    int layers;
    int64_t rows, cols;      /* the residual stream between blocks: [l, h] */
    int recompute;           /* sw_recompute */
    int recompute_every;     /* FULL: blocks per kept input (>= 1) */
    int offload;             /* needs sw_options.offload; not with FULL */
} sw_blocks_config;

typedef struct sw_blocks sw_blocks;
sw_blocks *sw_blocks_create(const sw_blocks_config *c, const sw_block_ops *ops, void *model);
void sw_blocks_destroy(sw_blocks *b);
sw_tensor *sw_blocks_input(sw_blocks *b);  /* x[0]: written by what comes before the blocks */
sw_tensor *sw_blocks_output(sw_blocks *b); /* x[L] */
sw_tensor *sw_blocks_grad(sw_blocks *b);   /* the residual stream's gradient: of x[L] before
                                              sw_blocks_backward, of x[0] after */
void sw_blocks_forward(sw_blocks *b, int step);
void sw_blocks_backward(sw_blocks *b, int step);
/* The memory model: bytes block `layer` keeps from its forward to its
 * backward on this rank -- its input (with FULL only every
 * recompute_every-th block's) and the saved set its keep declares (none
 * with FULL: the slots are shared; with offload, on the offload node) --
 * from the shapes alone: keep runs on a declaring set (s->declare, slot 0).
 * Call it before sw_blocks_create (e.g. to refuse what cannot fit). */
double sw_blocks_saved_model(const sw_blocks_config *c, const sw_block_ops *ops, void *model, int layer);
/* Block `layer`'s saved bytes: the model's (sw_blocks_saved_model, taken
 * at creation) and those of the tensors the service registered. */
typedef struct sw_block_memory {
    double model_bytes, registered_bytes;
} sw_block_memory;
sw_block_memory sw_blocks_saved_bytes(const sw_blocks *b, int layer);
/* The traffic model of the stack (ops->traffic required): every block's
 * forward and backward, and with SW_RECOMPUTE_FULL every block's forward
 * again in backward (the last of each group without its output). Needs no
 * sw_blocks, so a model can be planned before it is allocated. */
void sw_blocks_traffic(const sw_blocks_config *c, const sw_block_ops *ops, void *model, sw_traffic *t);

#ifdef __cplusplus
}
#endif
#endif
