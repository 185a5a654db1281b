/** @file
 * Comparison backend for the collectives, for benchmarks only.
 *
 * sw_allreduce_mpi submits one task whose CPU codelet calls the plain,
 * blocking MPI_Allreduce on the whole buffer. It is the baseline the
 * task-graph collectives of comm.h are measured against
 * (examples/collectives, bench/collectives.sh), not something a graph
 * builder should use: the task holds a StarPU worker blocked inside MPI for
 * the whole collective (no overlap with that worker, no chunking), and
 * because MPI matches collectives by call order, two such tasks on the same
 * communicator must not be able to run concurrently or in different orders
 * on different ranks (one worker per rank, or wait between calls). */
#ifndef STARWEAVE_COMM_MPI_H
#define STARWEAVE_COMM_MPI_H

#include <mpi.h>

#include "starweave/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** t (RW, SW_F32 or SW_I32, same shape on every rank of comm) becomes the
 * sum over comm of every rank's t. Submits one task; does not wait. Call it
 * on every rank of comm, in the same order relative to other collectives on
 * comm. */
void sw_allreduce_mpi(MPI_Comm comm, sw_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
