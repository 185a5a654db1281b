/* Checkpoints of a GPT model: parameters and AdamW moments of every rank
 * (its shards), the step, and the layout, so that a resumed run continues
 * exactly (dropout masks and batches are functions of seed and step).
 *
 * Layout on disk: DIR/step-NNNNNNNN/rank-RRRRR.ckpt, one file per rank, and
 * DIR/latest naming the last complete step. Every file is written to a
 * temporary name, fsync'ed and renamed; `latest` is replaced the same way
 * only after every rank's file is in place, so a run killed during a save
 * leaves the previous checkpoint loadable. Each file ends with a 64-bit
 * FNV-1a checksum of everything before it. Collective over MPI_COMM_WORLD. */
#ifndef STARWEAVE_CHECKPOINT_H
#define STARWEAVE_CHECKPOINT_H

#include "starweave/graphs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Saves after `step` (its update done). Blocking: waits for the tasks that
 * write the saved tensors. Returns 0, or exits 1 on every rank with the
 * reason if a file cannot be written. */
int sw_checkpoint_save(sw_gpt *m, const char *dir, int step);
/* Loads DIR/latest into m and returns its step. A missing, truncated,
 * corrupt (checksum) or mismatched (model, layout, rank count) checkpoint
 * is refused: every rank exits 2, the reason printed by the ranks that saw
 * it. */
int sw_checkpoint_load(sw_gpt *m, const char *dir);

#ifdef __cplusplus
}
#endif
#endif
