/** @file
 * Checkpoints of a parameter registry (any model) that re-shard: every
 * rank saves the pieces it holds of each tensor (a parameter's value and
 * its AdamW moments m and v) with the tensor's name, its global shape and
 * each piece's global rectangle, as torch.distributed.checkpoint does; a
 * resuming rank reads, from whichever files of the step cover it, the
 * pieces that overlap what it holds. So a run resumes under another tensor-
 * parallel, data-parallel, Ulysses, Ring or pipeline degree, with ZeRO-1
 * on or off, as well as under its own layout (then bit for bit: dropout
 * masks and batches are functions of seed and step). The model's fields
 * given by the caller, the seed and each tensor's global shape must match.
 *
 * Layout on disk: DIR/step-NNNNNNNN/rank-RRRRR.ckpt, one file per saving
 * rank, and DIR/latest naming the last complete step. A step is committed
 * as a whole: every rank writes its file (a temporary name, fsync'ed,
 * renamed) into the staging directory DIR/step-NNNNNNNN.tmp; when every
 * rank's file is in place, rank 0 renames it to DIR/step-NNNNNNNN (where
 * that step exists already, an earlier run's, the two are exchanged
 * atomically, renameat2's RENAME_EXCHANGE, and the earlier one removed;
 * without that on the file system, an earlier step that `latest` names is
 * kept and the save refused), then replaces `latest` the same way. So a
 * run killed at any moment, or a rank failing to write, into a fresh or a
 * used directory, leaves `latest` naming a complete step, never a mix.
 * Every file of one save carries the same save id, drawn anew by each
 * save and checked on load. Each file ends with a 64-bit FNV-1a checksum
 * of everything before it.
 *
 * A file (format SWCKPT05, native byte order): a 680-byte header (magic,
 * field count, saving rank, step, model field count, 16 named int64
 * fields: the model's, then the layout -- number of ranks, tp, ulysses,
 * ring, dp, pp, zero -- then the parameters held, then the seed, then the
 * save id); then 3
 * entries of 192 bytes per parameter held (name, kind: 0 value, 1 AdamW m,
 * 2 AdamW v, the number of pieces, the global rows and columns, up to 3
 * pieces: global row, column, rows, columns and the file offset of its
 * row-major fp32 data); then the data; then the checksum.
 *
 * A parameter whose value is NULL in the registry (not held by this rank,
 * e.g. another pipeline stage's) is neither saved nor loaded by it. A
 * region held by several files (data-parallel replicas, tied parameters)
 * is read from any one of them. Collective over MPI_COMM_WORLD. */
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

/** A parallel layout as a checkpoint records it (sw_checkpoint_load_layout). */
typedef struct sw_ckpt_layout {
    int ranks;              /**< the world size */
    ///@{
    int tp, ulysses, ring, dp, pp; /**< the mesh's degrees */
    ///@}
    int zero;               /**< the registry's ZeRO stage (0: none) */
} sw_ckpt_layout;

/** Saves after `step` (its update done). Blocking: waits for the tasks that
 * write the saved tensors. Returns 0, or exits 1 on every rank with the
 * reason if a file cannot be written (DIR/latest then unchanged).
 * model: at most 8 fields that must match (NULL, 0: none) */
int sw_checkpoint_save(sw_params *p, const sw_ckpt_field *model, int nmodel, const char *dir, int step);
/** Loads DIR/latest into p, re-sharding it when it was saved under another
 * layout, and returns its step. Refused, with the reason printed once and
 * exit 2 on every rank: a missing, truncated or corrupt (checksum) file of
 * the step, a file of another format version, a file of another save than
 * the step's rank 0 file (save id), a mismatched model (its fields, the
 * seed, a tensor's global shape), and a checkpoint whose pieces
 * leave an element this rank holds uncovered (the tensor and the region
 * named). Nothing is written to DIR. */
int sw_checkpoint_load(sw_params *p, const sw_ckpt_field *model, int nmodel, const char *dir);
/** sw_checkpoint_load, also telling the layout the checkpoint was saved
 * with (saved) and this run's (here), either NULL if not wanted: they
 * differ when the checkpoint was re-sharded. */
int sw_checkpoint_load_layout(sw_params *p, const sw_ckpt_field *model, int nmodel, const char *dir,
                              sw_ckpt_layout *saved, sw_ckpt_layout *here);

#ifdef __cplusplus
}
#endif
#endif
