/** @file
 * Heads and losses on one row per sequence: pooling over a sequence, and a
 * small replicated head with its loss (mean squared error on float targets,
 * or cross-entropy over a few classes); and a mean-squared-error loss on
 * every row (sw_row_mse, below). Like every layer they only submit
 * tasks, and their parallel rules are inside them, so a model needs none:
 *  - the rows they read are the residual stream's l rows ([s, b] order,
 *    split by sp over TP, and by Ulysses/Ring into seq/(ulysses*ring)
 *    positions of each sequence, zigzag included);
 *  - pooling sums each rank's positions of its B sequences and all-reduces
 *    the partial sums over the ranks holding the sequences' other
 *    positions (tp with sp, ulysses, ring: SW_GROUP_TP, SW_GROUP_SP or
 *    SW_GROUP_TP_SP), so every one of them holds the same [B, h]; with
 *    key lengths loaded (a padded batch, sw_ctx_load_key_lengths) mean
 *    pooling sums each sequence's valid positions only (global position
 *    below len[b], whichever rank holds it) scaled by 1/len[b];
 *    first-token pooling takes the row of position 0 (zeros on the other
 *    ranks, the same all-reduce); the backward needs no communication;
 *  - the head is a SW_LINEAR_REPLICATED linear (layers.h) on the B pooled
 *    rows: its gradient is not summed over TP and is scaled by
 *    1/(ulysses*ring), so the registry's sum over the gradient group
 *    counts each sequence once (the rule it takes from B rows);
 *  - the loss is the mean over the global batch (every dp rank and
 *    micro-batch): the backward scales by 1/(global batch), the loss
 *    tensor sums the micro-batches and all-reduces over dp once per step. */
#ifndef STARWEAVE_HEADS_H
#define STARWEAVE_HEADS_H

#include "starweave/layers.h"

#ifdef __cplusplus
extern "C" {
#endif

/** How a sequence becomes one row. */
typedef enum {
    SW_POOL_MEAN,  /**< the mean over the sequence's positions; with key lengths loaded
                    * (sw_ctx_load_key_lengths), over its positions below len[b] only (1/len[b]) */
    SW_POOL_FIRST  /**< the row of position 0 (BERT's [CLS]) */
} sw_pool_mode;

/** pooled [B, h] (B = sequences of the micro-batch, the same on every rank
 * sharing them) from in [l, h] (the residual stream's rows) */
void sw_pool_forward(sw_ctx *x, sw_pool_mode mode, sw_tensor *in, sw_tensor *pooled);
/** din [l, h] (written) from dpooled [B, h]: no communication */
void sw_pool_backward(sw_ctx *x, sw_pool_mode mode, sw_tensor *dpooled, sw_tensor *din);
/** Adds the pooling's all-reduce of [B, h] per micro-batch to t. */
void sw_pool_traffic(const sw_ctx *x, int64_t h, sw_traffic *t);

/** A head's loss. */
typedef enum {
    SW_LOSS_MSE,          /**< mean squared error against float targets [B, outputs] */
    SW_LOSS_CLASSES       /**< cross-entropy over `outputs` classes, int32 targets [B, 1] in 0 .. outputs - 1 */
} sw_seq_loss;

/** A head on one row per sequence (sw_seq_head_create). */
typedef struct sw_seq_head_config {
    const char *name;        /**< its parameters: name_w [outputs, hidden] and, with bias, name_b [outputs] */
    sw_pool_mode pool;       /**< how the sequence becomes one row */
    sw_seq_loss loss;        /**< the loss */
    int64_t hidden;          /**< h: the residual stream's columns */
    int outputs;             /**< regression outputs, or classes */
    int bias;                /**< 1: with a bias (0 at init) */
    float std;               /**< the weight's N(0, std) init */
} sw_seq_head_config;

/** Fills c with the defaults: name NULL, hidden and outputs 0 (the caller
 * sets them), SW_POOL_MEAN, SW_LOSS_MSE, no bias, std 0.02. */
void sw_seq_head_config_default(sw_seq_head_config *c);
/** A pooled head and its loss (opaque). */
typedef struct sw_seq_head sw_seq_head;
/** Registers the head's parameters (in the registry's current unit: after
 * the blocks, sw_params_set_unit(p, SW_UNIT_AFTER)), so before
 * sw_params_allocate, and makes its tensors. */
sw_seq_head *sw_seq_head_create(sw_ctx *x, const sw_seq_head_config *c);
/** Frees the head's tensors (blocking). NULL: no-op. */
void sw_seq_head_destroy(sw_seq_head *hd);
/** [1,1]: the loss's mean over the global batch once the step's last micro-batch has gone forward
 * (NULL for a NULL head) */
sw_tensor *sw_seq_head_loss(sw_seq_head *hd);
/** [B, outputs]: the predictions (logits) of the last forward, until its backward */
sw_tensor *sw_seq_head_output(sw_seq_head *hd);
/** The head's linear (its parameter indices). */
const sw_linear *sw_seq_head_linear(const sw_seq_head *hd);
/** Pools in [l, h], applies the head and the loss against targets
 * ([B, outputs] fp32 for MSE, [B, 1] int32 for classes; sw_ctx_load_seq_targets). */
void sw_seq_head_forward(sw_ctx *x, sw_seq_head *hd, sw_tensor *in, sw_tensor *targets);
/** The backward of the loss, the head and the pooling: returns din [l, h] (a scratch). */
sw_tensor *sw_seq_head_backward(sw_ctx *x, sw_seq_head *hd, sw_tensor *targets);
/** Adds the head's traffic per step to t: the pooling's, and the loss's all-reduce over dp. */
void sw_seq_head_traffic(const sw_ctx *x, const sw_seq_head *hd, sw_traffic *t);

/** A mean-squared-error loss on every row (per token: a diffusion model's
 * noise prediction), beside the per-sequence one of sw_seq_head.
 *  - pred and targets are [l, n] fp32: this rank's rows of the residual
 *    stream's layout (the l rows: with sp this TP rank's slice, without sp
 *    the T rows, the same on every TP rank), targets loaded with
 *    sw_ctx_load_floats into [l, n];
 *  - the loss is the mean over every element of the global batch (seq x
 *    batch x n: every dp rank, micro-batch and position): each rank sums
 *    its rows' squares scaled by 1/(global count), the loss tensor sums the
 *    micro-batches and is all-reduced once per step over the ranks holding
 *    other rows -- TP with sp, Ulysses, Ring, dp (never TP without sp:
 *    those ranks hold the same rows, counted once);
 *  - the backward is 2 (pred - tgt) / (global count): a linear before it on
 *    those l rows is SW_LINEAR_REPLICATED (its gradient summed over TP
 *    under sp, where the rows differ: the rule of l rows), and the registry's sums over the gradient
 *    group and the micro-batches give the exact gradient. */
typedef struct sw_row_mse sw_row_mse;
/** outputs: n, the columns of pred and targets (at least 1). */
sw_row_mse *sw_row_mse_create(sw_ctx *x, int64_t outputs);
/** Frees its tensors (blocking). NULL: no-op. */
void sw_row_mse_destroy(sw_row_mse *r);
/** Bytes sw_row_mse_create(x, outputs) allocates in context x, from the
 * shapes alone: dpred [l, outputs], the micro-batch's loss [1,1], and the
 * step's sum [1,1] where there is one (several micro-batches, or rows of
 * the sequences on other ranks: sp, Ulysses, Ring, dp). */
double sw_row_mse_bytes(const sw_ctx *x, int64_t outputs);
/** The loss against targets: pred, targets [l, n] fp32. */
void sw_row_mse_forward(sw_ctx *x, sw_row_mse *r, sw_tensor *pred, sw_tensor *targets);
/** dpred [l, n] (its own tensor, valid until the next backward). */
sw_tensor *sw_row_mse_backward(sw_ctx *x, sw_row_mse *r, sw_tensor *pred, sw_tensor *targets);
/** [1,1]: the mean over the global batch once the step's last micro-batch has gone forward
 * (NULL for a NULL loss) */
sw_tensor *sw_row_mse_loss(sw_row_mse *r);
/** Adds the loss's all-reduces, once per step, to t. */
void sw_row_mse_traffic(const sw_ctx *x, const sw_row_mse *r, sw_traffic *t);

/** Blocking, for programs: writes this rank's rows of micro-batch k of a
 * global [seq*batch, f] fp32 array in [s, b] order (row p*batch + b:
 * position p of sequence b) into inputs, [T, f] (every row of this rank's
 * positions) or [l, f] (this TP rank's rows with sp), and makes k the
 * current micro-batch. */
void sw_ctx_load_floats(sw_ctx *x, int k, const float *in, int64_t f, sw_tensor *inputs);
/** Blocking, for programs: writes micro-batch k's sequences of a global
 * [batch, n] per-sequence array (fp32 or int32, as targets' dtype) into
 * targets [B, n], and makes k the current micro-batch. */
void sw_ctx_load_seq_targets(sw_ctx *x, int k, const void *tgt, sw_tensor *targets);

/** Blocking, for programs (generation of any model with a vocab-parallel
 * head): next[b], the token after row b of logits [B, vocab_padded / tp]
 * (this tensor-parallel rank's vocabulary rows, from tp rank r's first
 * row r (vocab_padded / tp); rows at or past `vocab` are padding) -- the
 * largest logit (temperature 0; ties: the smaller token), or drawn from the
 * softmax at `temperature` of the top_k largest (0: all) with a uniform
 * number from (seed, position, b). The same on every tensor-parallel rank:
 * each rank's best top_k (one at temperature 0) are all-gathered over tp.
 * Collective over the tp group. */
void sw_lm_sample(sw_ctx *x, sw_tensor *logits, int vocab, float temperature, int top_k, uint64_t seed,
                  uint64_t position, int32_t *next);

#ifdef __cplusplus
}
#endif
#endif
