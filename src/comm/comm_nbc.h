/* Collectives that MPI itself runs, as graph nodes that hold no worker
 * (private to src/comm/comm.c; see comm_nbc.c).
 *
 * One task per collective starts MPI's non-blocking collective on the
 * buffers it was given, waits for it at most SW_COMM_SPIN_US microseconds
 * (environment; 200 by default: where the peers are there, it completes
 * in that time), and returns; unfinished, the task does not end -- its
 * buffers stay locked and its successors wait -- until the request
 * completes, which an idle worker (StarPU's idle hook) or a backstop
 * thread (every millisecond) notices. The tasks of one
 * communicator take its token in RW mode, so each rank starts them in
 * submission order -- the order MPI matches collectives by -- and one at a
 * time. Buffers are whole row-major matrices (ld == cols). */
#ifndef STARWEAVE_COMM_NBC_H
#define STARWEAVE_COMM_NBC_H

#include <mpi.h>
#include <starpu.h>

/* SW_NBC_ALLGATHER_INPLACE: `in` (RW) is the whole tensor, this rank's row
 * block in place (sw_allgather_inplace; submitted in simulation only,
 * collectives.c says why) */
typedef enum { SW_NBC_ALLREDUCE, SW_NBC_ALLGATHER, SW_NBC_REDUCE_SCATTER, SW_NBC_ALLTOALL, SW_NBC_ALLGATHER_INPLACE } sw_nbc_kind;

/* Whether MPI may be called from worker threads (MPI_THREAD_MULTIPLE). */
int sw_nbc_available(void);
/* The hook and the backstop thread, while at least one context uses them. */
void sw_nbc_attach(void);
#ifdef STARPU_SIMGRID
/* simulated: comm's server (comm_nbc.c), which runs its collectives and
 * speaks for this rank on it; made by main (collective over comm), stopped
 * after comm's last collective */
void sw_nbc_sim_serve(MPI_Comm comm);
void sw_nbc_sim_stop(MPI_Comm comm);
#endif
void sw_nbc_detach(void);
/* Submits the collective on comm: all-reduce `in` in place (out NULL);
 * all-gather in (this rank's rows) into out (every rank's rows, split as
 * sw_tile_range); reduce-scatter in (every row) into out (this rank's);
 * all-to-all: row block j of in to rank j, rank j's into row block j of out.
 * op: sw_reduce_op. token: comm's, a handle every task of comm writes.
 * recs: sw_trace_comm_begin's records of the collective (NULL-terminated,
 * malloc'ed; NULL when not traced), ended and freed on completion. */
void sw_nbc_submit(sw_nbc_kind kind, MPI_Comm comm, starpu_data_handle_t token, starpu_data_handle_t in,
                   starpu_data_handle_t out, int op, void **recs, int64_t *sent_bytes);

#endif
