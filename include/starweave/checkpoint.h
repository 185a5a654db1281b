/** @file
 * Checkpoints of a parameter registry (any model): parameters and AdamW
 * moments of every rank (its shards), the step, the model's fields given by
 * the caller, the parallel layout and every parameter's name and shape, so
 * that a resumed run continues exactly (dropout masks and batches are
 * functions of seed and step) and a mismatch is named.
 *
 * Layout on disk: DIR/step-NNNNNNNN/rank-RRRRR.ckpt, one file per rank, and
 * DIR/latest naming the last complete step. Every file is written to a
 * temporary name, fsync'ed and renamed; `latest` is replaced the same way
 * only after every rank's file is in place, so a run killed during a save
 * leaves the previous checkpoint loadable. Each file ends with a 64-bit
 * FNV-1a checksum of everything before it. Collective over MPI_COMM_WORLD. */
#ifndef STARWEAVE_CHECKPOINT_H
#define STARWEAVE_CHECKPOINT_H

#include "starweave/params.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A field of the model that a checkpoint must match (sw_checkpoint_save,
 * sw_checkpoint_load). */
typedef struct sw_ckpt_field {
    const char *name;       /**< e.g. "hidden": named in the refusal of a mismatched checkpoint */
    int64_t value;          /**< its value */
} sw_ckpt_field;
/** Saves after `step` (its update done). Blocking: waits for the tasks that
 * write the saved tensors. Returns 0, or exits 1 on every rank with the
 * reason if a file cannot be written.
 * model: at most 8 fields that must match (NULL, 0: none) */
int sw_checkpoint_save(sw_params *p, const sw_ckpt_field *model, int nmodel, const char *dir, int step);
/** Loads DIR/latest into p and returns its step. A missing, truncated,
 * corrupt (checksum) or mismatched (model, layout, rank count) checkpoint
 * is refused: every rank exits 2, the reason printed by the ranks that saw
 * it. */
int sw_checkpoint_load(sw_params *p, const sw_ckpt_field *model, int nmodel, const char *dir);

#ifdef __cplusplus
}
#endif
#endif
