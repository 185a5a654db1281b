/* What graphs/train/ lends the folders above it and nobody else (private):
 * the registry's ZeRO-3 state of a parameter and its check of the units,
 * and the block stacks that share a pool's micro slots (the step driver's
 * chunks). */
#ifndef STARWEAVE_TRAIN_INTERNAL_H
#define STARWEAVE_TRAIN_INTERNAL_H

#include "starweave/blocks.h"
#include "starweave/params.h"

/* params.c: 1 when parameter i's value is at rest as
 * this rank's ZeRO-3 shard (its unit is not gathered); refuses (exit 2)
 * units that do not name the model's `layers` blocks where pipeline stages
 * or ZeRO-2/3 need them (fn: the caller, for the message) */
int sw_params_value_sharded(const sw_params *p, int i);
void sw_params_check_units(const sw_params *p, const char *fn, int layers);

/* Blocks that share another stack's micro slots (pipeline stages' chunks,
 * one pool per stage): block stack c (of the pool's shapes, micro slots
 * and policies) whose residual streams, saved sets, working sets and
 * offload stashes are the pool's tensors; only the gradient of its
 * residual stream is its own. Destroy it before the pool. */
sw_blocks *sw_blocks_create_pooled(const sw_blocks_config *c, const sw_block_ops *ops, void *model, const sw_blocks *pool);
/* what sw_blocks_create_pooled allocates: the gradient stream [rows, cols] */
double sw_blocks_pooled_bytes(const sw_blocks_config *c);

#endif
