/** @file
 * sw_trace: per-task and per-message timelines of a run, merged over the
 * ranks, exported for Perfetto / chrome://tracing and ViTE, with a
 * compute/communication overlap report.
 *
 * Where the numbers come from (nothing is estimated):
 *  - tasks: StarPU's profiling info (start_time, end_time, workerid) of
 *    each task submitted through sw_task_submit (runtime.h: the library's
 *    codelets and the caller's own), read in the task's completion
 *    callback; codelet name and task->flops (the codelets that pass
 *    STARPU_FLOPS); bytes = the sizes of the task's buffers, read
 *    when the task becomes ready (its prologue callback: by completion time
 *    a temporary handle may already be unregistered).
 *  - messages: one record per StarPU-MPI detached request that src/comm
 *    submits. "posted" is when StarPU-MPI can post it (the data it sends or
 *    receives into is ready: an acquire callback on the handle, ordered like
 *    the request itself), "completed" is the request's own callback.
 *  - phase, layer, step: what the submitting thread had set (sw_trace_set_phase,
 *    sw_trace_mark_step) when the task or request was submitted, so a whole
 *    step can be submitted ahead of its execution and still be labelled.
 *
 * Tasks submitted other than through sw_task_submit (starpu_task_insert
 * called directly, starpu_data_cpy, StarPU's partitioning tasks) are not
 * recorded.
 *
 * The task graph of what is submitted (sw_trace_dag_*) is recorded apart
 * and written as Graphviz dot.
 *
 * Times: microseconds of starpu_timing_now() on each rank, shifted onto
 * rank 0's clock (offsets measured by ping-pong at sw_trace_collect) and
 * made to start at 0 at the earliest record. */
#ifndef STARWEAVE_TRACE_H
#define STARWEAVE_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>
#include <starpu.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The phase of the step a record belongs to (sw_trace_set_phase). */
typedef enum {
    SW_PHASE_NONE = 0,  /**< untagged: counted as compute in the overlap report */
    SW_PHASE_FORWARD,   /**< forward */
    SW_PHASE_BACKWARD,  /**< backward */
    SW_PHASE_OPTIMIZER, /**< the optimizer's update */
    SW_PHASE_RECOMPUTE, /**< forward again in backward (activation recomputation) */
    SW_PHASE_OFFLOAD,   /**< data movement tasks: not compute */
    SW_PHASE_COMM,      /**< tasks serving a collective (reductions, gates): not compute */
    SW_PHASE_COUNT      /**< the number of phases */
} sw_phase;

/** Phase p's name: "none", "forward", "backward", "optimizer", "recompute", "offload", "comm"; "?" otherwise. */
const char *sw_phase_name(sw_phase p);

/** The labels captured into each record at submission. */
typedef struct sw_trace_ctx {
    sw_phase phase; /**< the phase */
    int layer;  /**< -1: none */
    int step;   /**< -1: before the first sw_trace_mark_step */
} sw_trace_ctx;

/** Tracing on (turns StarPU profiling on: it must be on when a task is
 * submitted for the task to have profiling info) or off (tasks and
 * requests submitted from now on are not recorded; profiling stays as it
 * is, since sw_stats may use it). Records are kept across on/off. Local. */
void sw_trace_enable(int on);
/** 1 while tracing is on (sw_trace_enable). */
int sw_trace_enabled(void);
/** Drops this rank's records, merged trace and task graph (call with nothing
 * in flight). */
void sw_trace_reset(void);

/** Labels for what the calling thread submits next (per thread: submission
 * may happen on several threads). */
void sw_trace_set_phase(sw_phase phase, int layer);
/** Starts step `step`: later submissions carry it; also records an instant
 * "step N" marker at the current time. */
void sw_trace_mark_step(int step);
/** The calling thread's labels (to restore with sw_trace_set_ctx). */
sw_trace_ctx sw_trace_get_ctx(void);
void sw_trace_set_ctx(sw_trace_ctx ctx); /**< restore a saved context */

/* ---- hooks for task submission (sw_task_submit, runtime.h) ---- */
/** Hook for task submission (sw_task_submit, runtime.h): a record holding
 * the current context, to pass as the task's callback argument (StarPU
 * frees it after the callback); NULL when tracing is off. */
void *sw_trace_task_begin(void);
/** Hook for task submission: the prologue callback to pass with rec
 * (NFREE), NULL when rec is NULL. */
void (*sw_trace_task_prologue(void *rec))(void *);
/** Hook for task submission: called by the runtime's completion callback
 * with the record of sw_trace_task_begin. */
void sw_trace_task_end(void *rec);

/* ---- hooks for communication (src/comm/comm.c) ---- */
/** Hook for communication (src/comm/comm.c): call right before starpu_mpi_isend_detached / irecv_detached on handle h
 * (same thread, same order, so the readiness probe is ordered like the
 * request) and pass the result as the request's callback argument with
 * sw_trace_comm_done as the callback: NULL when tracing is off, and then
 * pass a NULL callback. collective: a static string ("allreduce_ring", ...);
 * group: a static string naming the communicator (sw_group_name), which
 * with (source, destination, tag) pairs each send with its receive; chunk:
 * the chunk / step index within the collective (-1: whole buffer); peer:
 * rank in comm (stored as a world rank). Bytes are h's size. */
void *sw_trace_comm_begin(const char *collective, const char *group, int chunk, MPI_Comm comm, int peer,
                          int is_send, int64_t tag, starpu_data_handle_t h);
/** The request's callback: records its completion (rec from
 * sw_trace_comm_begin; NULL: nothing). */
void sw_trace_comm_done(void *rec);

/* ---- merging and export ---- */
/** Merging: collective over MPI_COMM_WORLD. Waits for every
 * submitted task and traced request (up to 60 s for the requests; one
 * still in flight then is reported and left out), measures each
 * rank's clock offset to rank 0, and gathers every rank's records onto
 * rank 0 (replacing the previous merged trace). Returns 0 or a negative
 * errno-style code (same on every rank). Call before sw_mesh_destroy
 * / sw_shutdown, not from a task or callback. */
int sw_trace_collect(void);

/** Rank 0, after sw_trace_collect (other ranks: return 0, do nothing):
 * Chrome / Perfetto JSON: one process per rank (a thread per worker, and
 * "MPI requests" lanes: overlapping requests go to separate lanes), one
 * "transfers" process (each send matched with its receive: from the send
 * being posted to the receive completing). Returns 0 or -errno. */
int sw_trace_write_json(const char *path);
/** Rank 0, after sw_trace_collect (other ranks: return 0, do nothing):
 * Paje (ViTE, pajeng): program > rank > worker / comm lane containers,
 * tasks and requests as states, transfers as links; times in ms. */
int sw_trace_write_paje(const char *path);

/** Overlap of communication with computation, per rank and step (a step's
 * records are those submitted after sw_trace_mark_step(step)). wall: first
 * to last record of the rank in the step; compute: union of its task
 * intervals except phases COMM and OFFLOAD; comm: union of its request
 * intervals (posted to completed: a request waiting for its peer counts)
 * and of its COMM-phase tasks (a collective's reductions); overlap:
 * |comm and compute|; idle: wall - |any task or request| (= wall - compute
 * - comm + overlap when there are no OFFLOAD tasks). */
typedef struct sw_overlap {
    int rank;              /**< the rank */
    int step;              /**< -1: the whole trace of the rank */
    ///@{
    long ntasks, ncomm;    /**< tasks and requests in the step */
    ///@}
    ///@{
    double wall_us, compute_us, comm_us, overlap_us, idle_us; /**< wall, compute, comm, overlap, idle (above) */
    ///@}
    double overlap_share;  /**< overlap_us / comm_us; 0 without communication */
} sw_overlap;
/** Rank 0 after sw_trace_collect: fills up to max rows ordered by rank,
 * then step (the whole-trace row of a rank first); returns how many rows
 * there are in all (may exceed max), 0 on other ranks. */
int sw_trace_overlap(sw_overlap *out, int max);
/** Writes the overlap rows as JSON,
 * {"ranks": N, "overlap": [{rank, step, ...}, ...]} on rank 0. */
int sw_trace_write_overlap_json(const char *path);

/** Collective: sw_trace_collect, then the writers for the non-NULL paths. */
int sw_trace_write(const char *json_path, const char *paje_path, const char *overlap_json_path);

/** Sizes of the merged trace on rank 0 (0 elsewhere), for tests and reports. */
void sw_trace_counts(long *ntasks, long *ncomm, int *nranks);

/* ---- task graph (Graphviz dot) ---- */
/** The task graph of what is submitted, written as Graphviz dot: on or off.
 * While on (independent of sw_trace_enable; local), every task submitted
 * through sw_task_submit and every request of src/comm is recorded at
 * submission as a node: its codelet or collective, the labels of the
 * context, and its data accesses (handle, mode). Edges are derived from
 * the accesses as StarPU derives its implicit dependencies (sequential
 * consistency): an access depends on the earlier accesses to overlapping
 * data of which one at least writes, back to the last write that covered
 * it (a read on the last writers, a write on them and on the readers
 * since). A tensor's tiles are other handles than the tensor itself: two
 * accesses overlap when their sw_blocks do (src/core/tensor.c); any other handle
 * (a temporary) is a datum of its own. SCRATCH accesses are private; REDUX
 * and COMMUTE ones count as RW. Copies (starpu_data_cpy, declared with
 * sw_trace_dag_copy) are not nodes, but dependencies pass through them.
 * The edges are data dependencies: StarPU's partitioning tasks may order
 * accesses to tiles of different tilings that do not overlap as well, and
 * those orderings are not drawn. */
void sw_trace_dag_enable(int on);
/** 1 while the task graph is recorded (sw_trace_dag_enable). */
int sw_trace_dag_enabled(void);
/** Hook: sw_task_submit calls sw_trace_dag_task with the built task right before
 * starpu_task_submit. (sw_trace_comm_begin records requests.) */
void sw_trace_dag_task(struct starpu_task *task);
/** Hook: call sw_trace_dag_copy(dst, src) right before
 * starpu_data_cpy(dst, src, ...). */
void sw_trace_dag_copy(starpu_data_handle_t dst, starpu_data_handle_t src);
/** dst = src, asynchronous (starpu_data_cpy), declared to the task graph:
 * the library's copies go through it. */
void sw_copy(starpu_data_handle_t dst, starpu_data_handle_t src);
/** the same, calling done(arg) once the copy has run (from a worker: it must not block) */
void sw_copy_then(starpu_data_handle_t dst, starpu_data_handle_t src, void (*done)(void *), void *arg);
/** Collective over MPI_COMM_WORLD: gathers every rank's graph onto rank 0,
 * which writes one dot file: a cluster per rank; nodes `r<rank>_<i>`, i
 * counting the rank's nodes in submission order, labelled `"op\nL<layer>"`,
 * boxes for tasks and ellipses for requests, filled by phase (the colours
 * of bench/plot_trace.py); edges from each node's dependencies with those
 * implied by others left out (transitive reduction, for up to 23170 nodes
 * per rank; above, every dependency is drawn and the file says so), and
 * dashed edges from each send to its matching receive. Keeps the records.
 * Returns 0 or -errno (same on every rank). */
int sw_trace_dag_write(const char *dot_path);
/** Rank 0 after sw_trace_dag_write: what the file holds, over all ranks
 * (0 elsewhere). */
void sw_trace_dag_counts(long *ntasks, long *nrequests, long *nedges, long *nmessages);

#ifdef __cplusplus
}
#endif
#endif
