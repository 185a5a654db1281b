/** @file
 * starweave runtime: start/stop StarPU and StarPU-MPI, error checking. */
#ifndef STARWEAVE_RUNTIME_H
#define STARWEAVE_RUNTIME_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <starpu.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Options of sw_init (sw_options_default sets every field's default). */
typedef struct sw_options {
    int ncpus;           /**< CPU workers per rank; -1: StarPU's choice (or cores / ranks on this node) */
    const char *sched;   /**< StarPU scheduler name; NULL: $STARPU_SCHED or "lws" */
    int quiet;           /**< 1: no banner on rank 0 */
    int idle_sleep_us;   /**< an idle worker sleeps this long between looks for work (0: spins, StarPU's
                            default); -1: $SW_IDLE_SLEEP_US, else SW_IDLE_SLEEP_US_SHARED when ranks
                            share the node and 0 otherwise (docs/runtime-notes.md) */
    int ncuda;           /**< CUDA workers per rank (GPU builds, configure --enable-cuda), at most the GPUs;
                            -1: $STARPU_NCUDA, else every GPU, or one when ranks share the node. Ranks
                            sharing a node take distinct GPUs (from local rank * ncuda on, mod the GPUs).
                            Ignored (no CUDA worker) in CPU-only builds. */
    int offload;         /**< 1: an offload memory node. With CUDA workers: main RAM, whose home buffers are
                            then pinned (page-locked), so that StarPU's GPU<->host copies are
                            asynchronous DMA beside the kernels. Without: a StarPU disk node
                            (out-of-core) in a fresh directory under $TMPDIR (or /tmp), removed at
                            sw_shutdown */
    int offload_budget_mb; /**< > 0: MiB that the data StarPU allocates may hold on the memory the
                            offload node backs: main RAM (STARPU_LIMIT_CPU_MEM; starweave's own home
                            buffers are not counted) with the disk node, each GPU's memory
                            (STARPU_LIMIT_CUDA_MEM; everything on the GPU counts) with CUDA workers.
                            StarPU evicts what does not fit to the offload node. 0: no limit;
                            negative: refused by sw_init (exit 2). Offloading blocks need two
                            blocks' saved sets (sw_blocks_check_offload_budget) */
    int gemm;            /**< sw_gemm_backend (ops.h); SW_GEMM_AUTO: $SW_GEMM if set, else the CPU's best */
    int memory_budget_mb; /**< > 0: MiB of main RAM this rank may count on (sw_memory_available_per_rank
                            returns at most this), so a model that would not fit it is refused before
                            any allocation; nothing is evicted to keep to it. 0: the node's share.
                            Simulated: the simulated rank's main RAM (0: no limit) */
} sw_options;

/** Microseconds an idle worker sleeps between looks for work when ranks
 * share the node and neither sw_options.idle_sleep_us nor $SW_IDLE_SLEEP_US
 * says otherwise. */
#define SW_IDLE_SLEEP_US_SHARED 100

/** Fills opt with the defaults: ncpus, idle_sleep_us and ncuda -1, sched
 * NULL, quiet, offload, offload_budget_mb and memory_budget_mb 0, gemm SW_GEMM_AUTO. */
void sw_options_default(sw_options *opt);

/** Starts MPI (if not started), StarPU and StarPU-MPI on MPI_COMM_WORLD.
 * When several ranks share a node, worker binding is turned off unless the
 * environment says otherwise (docs/runtime-notes.md, "Oversubscribed launches").
 * Returns 0, or a negative errno-style code after printing why. */
int sw_init(int *argc, char ***argv, const sw_options *opt);
/** Waits for every submitted task, then stops StarPU-MPI and StarPU
 * (removing the offload disk node's directory) and finalizes MPI if it is
 * not finalized yet. Does nothing when sw_init has not run. */
void sw_shutdown(void);

/** This process's rank in MPI_COMM_WORLD. */
int sw_rank(void);
/** The number of ranks in MPI_COMM_WORLD. */
int sw_world_size(void);
/** 1 in the simulation build (a StarPU built with SimGrid, run by
 * starpu_smpirun; docs/simulation.md): codelets are not executed, each task
 * takes its calibrated model's time on StarPU's simulated clock
 * (starpu_timing_now), so values read on the host (losses, checksums) are
 * not computed, and StarPU's main-RAM buffers are folded (they take no
 * memory). 0 otherwise. */
int sw_simulated(void);
/** The offload memory node (sw_options.offload): STARPU_MAIN_RAM (0) with
 * CUDA workers, a disk node without, -1 when off. */
int sw_offload_node(void);
/** The offload budget (sw_options.offload_budget_mb) in MiB (0: none). */
int sw_offload_budget_mb(void);
/** The memory budget per rank (sw_options.memory_budget_mb) in MiB (0: none). */
int sw_memory_budget_mb(void);
/** 1 when tensors' home buffers are pinned (CUDA workers were asked for). */
int sw_home_pinned(void);
/** The memory node tasks compute in, where offloaded data is prefetched
 * back to: the first CUDA worker's with CUDA workers, else main RAM. */
int sw_compute_node(void);

/** Bytes in a MiB: the unit of every memory size starweave takes or prints
 * (flags, budgets, reports), as of StarPU's memory limits. */
#define SW_MIB 1048576.0

/** Memory per StarPU memory node: what StarPU counts as used there (buffers
 * it allocated, and starpu_malloc'ed home buffers unless a budget is set),
 * now and the highest value seen by a sampling thread (every 0.5 ms while
 * watching), and the bytes moved into and out of the node (StarPU's bus
 * counters) since the watch started. */
typedef struct sw_node_memory {
    char name[32]; /**< the node's name (starpu_memory_node_get_name) */
    ///@{
    double used, peak, total; /**< bytes; total: the node's size or budget */
    ///@}
    ///@{
    double bytes_in, bytes_out; /**< bytes moved into and out of the node since the watch started */
    ///@}
} sw_node_memory;
/** Starts (on != 0) or stops the thread that samples every node's use for
 * the peaks; starting it resets the peaks and the bus counts. */
void sw_memory_watch(int on);
/** Fills up to max nodes; returns how many. */
int sw_memory_nodes(sw_node_memory *out, int max);
/** CPU workers of this rank. */
int sw_ncpus(void);
/** CUDA workers of this rank (0 in CPU-only builds and on machines without GPU). */
int sw_ncuda(void);
/** The smallest v over every rank (collective over MPI_COMM_WORLD: every
 * rank calls it): for agreeing on a check that ranks evaluate alone. */
int sw_world_min(int v);

/** Worker types the codelet tasks submitted from now on may run on: an or of
 * STARPU_CPU and STARPU_CUDA, or 0 (the default) for any. A codelet with no
 * implementation for any of the given types is not restricted (the
 * collectives' CPU-only reduction tasks stay runnable). For tests and
 * experiments: tests/test_cuda runs every codelet once on a CPU worker and
 * once on a CUDA worker. Call it from the submitting thread between
 * submissions. */
void sw_set_task_where(unsigned where);
/** StarPU priority of the tasks submitted from now on that set none
 * themselves (0, the default: StarPU's default priority); returns the one
 * it replaces. Builders raise it around a chain the step waits on (the LM
 * head's dx partial sums, the linears' dx GEMMs) so that a scheduler that
 * orders by priority (lws, dmda, ...) runs it before work nothing waits
 * for yet. */
int sw_set_task_priority(int priority);
/** Added to the priority of every task submitted from now on (after
 * sw_set_task_priority's), so that the priorities builders set stay relative
 * to it; returns the one it replaces (0 by default). The pipeline's step
 * driver sets each unit of its computed order a base below the previous
 * unit's: a stage's worker then runs the order instead of interleaving the
 * tasks of every unit that is ready. */
int sw_set_task_priority_base(int base);
/** The StarPU where mask of a task of cl under that restriction (-1: any). */
int32_t sw_task_where(const struct starpu_codelet *cl);

/** Per-codelet execution statistics from StarPU's profiling API (off by
 * default: enabling turns StarPU profiling on and adds a completion
 * callback to every task). */
typedef struct sw_stat {
    const char *name;     /**< codelet name */
    long count;           /**< tasks of the codelet that ran */
    double total_us;      /**< sum of task execution times */
} sw_stat;
/** Statistics on (on != 0: turns StarPU profiling on) or off (profiling
 * stays on while sw_trace is enabled). */
void sw_stats_enable(int on);
/** Drops the statistics gathered so far. */
void sw_stats_reset(void);
/** Fills up to max entries, sorted by total time; returns how many. */
int sw_stats_get(sw_stat *out, int max);
/** Completion callback that codelet submission passes to StarPU (NULL when off). */
void (*sw_stats_hook(void))(void *);

/** The pipeline's measured unit costs: while the calling thread's meter is
 * set (not NULL), each task it submits through sw_task_submit adds its
 * execution time in nanoseconds (StarPU's profiling info) into *meter once
 * it has run (an atomic add: read it after the tasks have run). Setting a
 * meter turns StarPU's profiling on; sw_task_meter_stop turns it back to
 * what sw_stats and sw_trace need. */
void sw_task_meter(long long *meter);
/** Clears the calling thread's meter and restores the profiling status (call with no task running). */
void sw_task_meter_stop(void);

/** Event counters: what ran, counted where it runs, so that a test or a
 * report can prove that a feature took part (oneDNN computed the GEMMs, a
 * GEMM read bf16 operands, MPI ran a collective, the tensor-parallel layers
 * gathered rather than all-reduced). Always on (a relaxed atomic add at
 * each event), per process, since it started or the last
 * sw_counters_reset. */
typedef enum sw_counter {
    SW_COUNT_GEMM_OPENBLAS,   /**< CPU GEMMs OpenBLAS computed */
    SW_COUNT_GEMM_ONEDNN,     /**< CPU GEMMs oneDNN computed */
    SW_COUNT_GEMM_CUBLAS,     /**< GEMMs cuBLAS computed */
    SW_COUNT_GEMM_BF16,       /**< GEMMs (any backend) whose operands A and B were bf16 */
    SW_COUNT_CAST_BF16,       /**< elements cast from fp32 to bf16 */
    SW_COUNT_ALLREDUCE,       /**< collectives submitted, by kind (groups of 2 or more members): all-reduces */
    SW_COUNT_ALLGATHER,       /**< ... all-gathers */
    SW_COUNT_REDUCE_SCATTER,  /**< ... reduce-scatters */
    SW_COUNT_ALLTOALL,        /**< ... all-to-alls */
    SW_COUNT_BROADCAST,       /**< ... broadcasts */
    SW_COUNT_RING_SHIFT,      /**< ... ring shifts */
    SW_COUNT_MPI_COLLECTIVE,  /**< collectives MPI ran (started by a task) */
    SW_COUNT_MPI_DEFERRED,    /**< ... of which completed after their task returned */
    SW_COUNT_P2P_SEND,        /**< StarPU-MPI send requests of the decomposed collectives */
    SW_COUNT_TASK_PRIORITY,   /**< tasks given sw_set_task_priority's priority (not 0) */
    SW_COUNT_SEND,            /**< point-to-point messages sent by sw_send (pipeline stages) */
    SW_COUNT_GEMM_WIDENED,    /**< bf16 GEMMs whose operands were widened to fp32 (no native bf16 product) */
    SW_COUNT_LATE_W,          /**< Zero Bubble's W units (weight gradients) a pipeline stage submitted after its
                               * step's last forward: the cooldown's, per step */
    SW_COUNT_SIM_EXCHANGE,    /**< simulation build: point-to-point exchanges the collectives MPI runs were simulated
                               * as (recursive halving and doubling, or a ring; src/comm/comm_nbc.c) */
    SW_COUNTER_COUNT          /**< the number of counters */
} sw_counter;
/** The count of c (0 for an unknown c). */
int64_t sw_counter_get(sw_counter c);
/** Its name in reports: "gemm_onednn", "allgather", ... (NULL when unknown). */
const char *sw_counter_name(sw_counter c);
/** Sets every counter of this process to 0. */
void sw_counters_reset(void);
/** One line of every counter of this rank:
 *   counters: rank R: gemm_openblas=N gemm_onednn=N ... task_priority=N */
void sw_counters_print(FILE *out);
/** Adds n to c: the library's own events (a codelet of the caller's may add
 * to them too). */
void sw_counter_add(sw_counter c, int64_t n);

/** Main-RAM bytes this rank may count on: the node's MemAvailable divided
 * among the ranks on the node (Open MPI's local size), or less if StarPU
 * (which counts the home buffers, but under an offload budget) sees less,
 * or the memory budget (sw_options.memory_budget_mb) if less; 0 when
 * unknown. Simulated (sw_simulated), the memory budget alone, 0 without
 * one: this machine's memory is not the simulated node's, and the
 * simulated rank's main RAM is the budget (StarPU's limit too) or has no
 * limit. */
double sw_memory_available_per_rank(void);

/* ---- submitting your own codelets ---- */
/** sw_task_submit submits a task the way the library submits its own, so
 * that a codelet of the caller's is seen like the library's: sw_trace
 * records it (its codelet's name, the phase and layer of
 * sw_trace_set_phase and the step of sw_trace_mark_step at submission,
 * worker, start and end, bytes of its buffers, task->flops), the task graph
 * (sw_trace_dag_enable) its data accesses, sw_stats its execution time, and
 * it runs only where sw_set_task_where allows. Build the task as for StarPU:
 *     struct starpu_task *t = starpu_task_build(&my_cl, STARPU_R, x, STARPU_RW, y,
 *                                               STARPU_VALUE, &alpha, sizeof alpha, 0);
 *     SW_CHECK(sw_task_submit(t));
 * or with starpu_task_create and its fields; SW_TASK_INSERT below does
 * both. The task's own completion and prologue callbacks, if any, still
 * run (after starweave's). Submit each task once through it. Returns
 * starpu_task_submit's code, -EINVAL for a task without codelet. */
int sw_task_submit(struct starpu_task *task);
/** StarPU's cost per task on this machine, measured now: n tasks whose
 * codelet does nothing, each reading two 128 x 128 tiles and writing a
 * temporary of its own (as the layers' tasks do), submitted from the
 * calling thread and run on the first CPU worker (one_worker != 0) or on
 * any CPU worker; returns the wall time per task in microseconds, -1 if it
 * cannot be measured (the simulation build, no CPU worker, n < 1). The
 * planner's task_us, and the per-task cost bench/calibrate.sh records for
 * the simulation (docs/simulation.md). Call between tasks: it waits for
 * all. */
double sw_task_cost_us(int one_worker, int n);
/** starpu_task_insert(cl, ...) through sw_task_submit, aborting with
 * file:line on failure (the arguments of starpu_task_insert, without the
 * final 0). STARPU_NAME NULL first: starpu_task_build would name the task
 * "task_build"; unnamed, StarPU's tools show the codelet's name. */
#define SW_TASK_INSERT(cl, ...)                                                                    \
    do {                                                                                           \
        struct starpu_task *sw_task_ = starpu_task_build((cl), STARPU_NAME, NULL, __VA_ARGS__, 0); \
        if (!sw_task_) sw_fail(__FILE__, __LINE__, "starpu_task_build(" #cl ")", -EINVAL);         \
        SW_CHECK(sw_task_submit(sw_task_));                                                        \
    } while (0)

/** Report a failed call (StarPU: negative return, MPI: != MPI_SUCCESS) with
 * file:line and the call text, then abort every rank. */
void sw_fail(const char *file, int line, const char *call, long code) __attribute__((noreturn));
/** A call the library refuses (arguments that cannot go together, such as
 * a submit helper's shapes): a refusal as sw_usage_error's (the message
 * once, exit 2 on every rank); file and line are not printed (the message
 * names the call and its arguments). */
void sw_failf(const char *file, int line, const char *fmt, ...) __attribute__((noreturn, format(printf, 3, 4)));
/** Report a user error (rule + values) once, and exit 2 on every rank,
 * whether every rank broke the rule or this rank alone (one pipeline
 * stage, one data-parallel rank): the refusing rank tells the others and waits at
 * most 2 s for theirs, never in a barrier; all refusing shut down
 * together, otherwise the lowest refusing rank prints and every rank's
 * watcher thread ends its process (docs/own-model.md, "Misuse refused"). */
void sw_usage_error(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/** Runs call (a StarPU or MPI call returning 0 on success) and, on any
 * other value, reports it through sw_fail (file:line, the call's text and
 * its code; every rank aborts). */
#define SW_CHECK(call)                                                   \
    do {                                                                 \
        long sw_check_rc_ = (long)(call);                                \
        if (sw_check_rc_ != 0) sw_fail(__FILE__, __LINE__, #call, sw_check_rc_); \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
