/* Collectives that MPI runs, started by a task and completed without
 * holding a worker (comm_nbc.h).
 *
 * Why: a collective decomposed into StarPU-MPI requests and reduction tasks
 * hands each message between StarPU-MPI's progression thread and a worker;
 * where ranks share cores, each hand-off can wait for an OS time slice
 * (BENCHMARKS.md, "Collective latency"). MPI's own collective algorithms
 * run inside MPI, driven by whoever tests the request: here the idle
 * workers, which would otherwise spin looking for tasks. */
#include "comm_nbc.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <starpu_expert.h>
#include <time.h>

#include "codelet_util.h"
#include "core/sim_smpi.h"
#include "starweave/comm.h"
#include "starweave/runtime.h"
#include "starweave/trace.h"

/* a collective in flight: its request, its task (ended on completion) and
 * the counts MPI reads until then */
typedef struct inflight {
    MPI_Request req;
    struct starpu_task *task;
    int *counts; /* counts[p], displs[p] (all-gather, reduce-scatter) */
    void **recs; /* its trace records (NULL-terminated), or NULL */
    int done;    /* complete, its task not ended yet */
    void *sim_buf; /* simulated all-reduce: its buffers (below), freed at the end */
} inflight;

/* the request completed: its trace records end now */
static void completed(inflight *f)
{
    for (void **r = f->recs; r && *r; r++) sw_trace_comm_done(*r);
    free(f->recs);
    free(f->counts);
    f->recs = NULL, f->counts = NULL, f->done = 1;
}

static struct {
    pthread_mutex_t lock;
    pthread_cond_t work; /* a request was added, or stop */
    inflight *q;
    int n, cap;
    int users, hook, stop, release_pending;
    pthread_t backstop;
    double spin_s; /* how long the starting task waits for completion */
} nbc = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, 0, 0, 0, -1, 0, 0, 0, 0};

int sw_nbc_available(void)
{
    /* simulated: SMPI says MPI_THREAD_SINGLE, but every actor of a rank
     * may call MPI (src/core/sim_smpi.cc), as the real run's threads do */
    if (sw_simulated()) return 1;
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    return provided == MPI_THREAD_MULTIPLE;
}

/* Tests the requests in flight (MPI's collectives advance inside these
 * calls) and marks those complete; with `release` (a worker thread: dmda
 * updates its worker's model when a task ends, so tasks end on workers
 * only) ends the tasks of every one marked. nbc.lock held on entry and on
 * return. Returns the number not released. */
static int test_inflight(int release)
{
    struct starpu_task *done[64];
    int ndone = 0;
    for (int i = 0; i < nbc.n;) {
        int flag = nbc.q[i].done;
        if (!flag) {
            int rc = MPI_Test(&nbc.q[i].req, &flag, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) sw_fail(__FILE__, __LINE__, "MPI_Test (non-blocking collective)", rc);
            if (flag) completed(&nbc.q[i]);
        }
        if (!flag || !release || ndone == 64) {
            i++;
            continue;
        }
        done[ndone++] = nbc.q[i].task;
        nbc.q[i] = nbc.q[--nbc.n]; /* completion order does not matter: each task has its own */
    }
    int left = nbc.n;
    pthread_mutex_unlock(&nbc.lock);
    for (int i = 0; i < ndone; i++) starpu_task_end_dep_release(done[i]);
    pthread_mutex_lock(&nbc.lock);
    return left;
}

/* A task that ends, on a worker, the tasks whose requests completed. */
static void release_cpu(void *buffers[], void *arg)
{
    (void)buffers, (void)arg;
    pthread_mutex_lock(&nbc.lock);
    nbc.release_pending = 0;
    test_inflight(1);
    pthread_mutex_unlock(&nbc.lock);
}
static struct starpu_codelet release_cl = {
    .cpu_funcs = {release_cpu},
    .cpu_funcs_name = {"release_cpu"},
    .nbuffers = 0,
    .name = "comm_mpi_release",
};

/* From a thread that is not a worker: tests, and has a worker end those complete. */
static int test_elsewhere(void)
{
    int left = test_inflight(0), ready = 0;
    for (int i = 0; i < nbc.n; i++) ready |= nbc.q[i].done;
    if (ready && !nbc.release_pending) {
        nbc.release_pending = 1;
        int rc = starpu_task_insert(&release_cl, STARPU_PRIORITY, STARPU_MAX_PRIO, 0);
        if (rc) sw_fail(__FILE__, __LINE__, "starpu_task_insert (collective release)", rc);
    }
    return left;
}

/* StarPU's idle hook, called by a worker that found no task (between the
 * naps of src/core/runtime.c's idle hook where ranks share cores). */
static unsigned idle_hook(void *arg)
{
    (void)arg;
    if (pthread_mutex_trylock(&nbc.lock)) return 0; /* another thread is testing */
    if (nbc.n) test_inflight(1);
    pthread_mutex_unlock(&nbc.lock);
    return 0;
}

/* The backstop: while every worker computes, no idle hook runs; this
 * thread tests every millisecond while a request is in flight (rarely
 * enough not to take the ranks' cores from their workers: polling more
 * often slowed the steps, BENCHMARKS.md) and sleeps otherwise. */
static void *backstop(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&nbc.lock);
    while (!nbc.stop) {
        if (nbc.n == 0) {
            pthread_cond_wait(&nbc.work, &nbc.lock);
            continue;
        }
        test_elsewhere();
        pthread_mutex_unlock(&nbc.lock);
        nanosleep(&(struct timespec){0, 1000000L}, NULL);
        pthread_mutex_lock(&nbc.lock);
    }
    pthread_mutex_unlock(&nbc.lock);
    return NULL;
}

#ifdef STARPU_SIMGRID
/* Simulated: the reductions' op. The values are not computed (no codelet
 * runs), yet SMPI applies MPI_SUM to every piece a rank receives, on this
 * machine's CPU: 11 % of an 8-rank LLaMA-7B tp 8 run's CPU time (perf,
 * docs/simulation.md "Where the wall time goes"). SMPI charges no
 * simulated time for an op (bench/sim.sh: smpi/simulate-computation:no),
 * so an op that does nothing simulates the same collective. Per rank
 * (SMPI privatizes the globals). */
static void sim_noop(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)in, (void)inout, (void)len, (void)dt;
}
static MPI_Op sim_op(void)
{
    static MPI_Op op = MPI_OP_NULL;
    if (op == MPI_OP_NULL) SW_CHECK(MPI_Op_create(sim_noop, 1, &op));
    return op;
}

/* simulated: waits for a collective started by nbc_start_cpu, then ends its task */
static void sim_wait(void *arg)
{
    inflight *f = arg;
    SW_CHECK(MPI_Wait(&f->req, MPI_STATUS_IGNORE));
    completed(f);
    if (f->sim_buf) SMPI_SHARED_FREE(f->sim_buf);
    struct starpu_task *t = f->task;
    free(f);
    starpu_task_end_dep_release(t);
}

/* Simulated: SMPI matches messages by the sending actor, so one actor per
 * rank -- the first CPU worker's -- runs every collective of
 * sw_nbc_submit (a real run lets any worker start one: a difference of
 * schedule, docs/simulation.md). Its pid, asked of it by a task. */
static void pid_cpu(void *buffers[], void *arg)
{
    (void)buffers;
    /* adopted now, before the other ranks learn its pid: SMPI delivers a
     * message into the receiving actor's process state, so one sent to it
     * before its first collective landed in a state it then dropped (pp 2
     * deadlocked: the last stage reached the tied embedding's all-reduce
     * first, and its message was lost) */
    sw_sim_adopt_worker();
    *(long *)arg = sw_sim_self_pid();
}
static struct starpu_codelet pid_cl = {
    .flags = STARPU_CODELET_SIMGRID_EXECUTE,
    .cpu_funcs = {pid_cpu},
    .nbuffers = 0,
    .name = "sim_worker_pid",
};
long sw_nbc_sim_speaker(void)
{
    static long pid = -1;
    if (pid < 0) {
        struct starpu_task *t = starpu_task_create();
        t->cl = &pid_cl;
        t->cl_arg = &pid;
        t->execute_on_a_specific_worker = 1;
        t->workerid = (unsigned)starpu_worker_get_by_type(STARPU_CPU_WORKER, 0);
        t->synchronous = 1;
        SW_CHECK(starpu_task_submit(t));
    }
    return pid;
}
#endif

void sw_nbc_attach(void)
{
    /* simulated: each collective is waited for inside its task (below), so
     * neither the idle hook nor the backstop thread is needed -- a real
     * thread could not call SMPI, which only SimGrid's actors may */
    if (sw_simulated()) return;
    pthread_mutex_lock(&nbc.lock);
    if (nbc.users++ == 0) {
        const char *spin = getenv("SW_COMM_SPIN_US");
        nbc.spin_s = (spin ? atof(spin) : 200.0) * 1e-6;
        nbc.stop = 0;
        nbc.hook = starpu_idle_hook_register(idle_hook, NULL);
        if (nbc.hook < 0) sw_fail(__FILE__, __LINE__, "starpu_idle_hook_register", nbc.hook);
        if (pthread_create(&nbc.backstop, NULL, backstop, NULL) != 0)
            sw_fail(__FILE__, __LINE__, "pthread_create (collective backstop)", -EAGAIN);
    }
    pthread_mutex_unlock(&nbc.lock);
}

void sw_nbc_detach(void)
{
    if (sw_simulated()) return;
    pthread_mutex_lock(&nbc.lock);
    int last = --nbc.users == 0;
    if (last) {
        starpu_idle_hook_deregister(nbc.hook);
        nbc.hook = -1;
        nbc.stop = 1;
        pthread_cond_signal(&nbc.work);
    }
    pthread_mutex_unlock(&nbc.lock);
    if (last) pthread_join(nbc.backstop, NULL);
}

struct nbc_args {
    int kind, op;
    MPI_Comm comm;
    void **recs;
    int64_t *sent_bytes; /* where the bytes handed to MPI for other ranks are added */
};

/* rows of every rank (sw_tile_range) times cols: counts[0..p-1], displs[p..2p-1] */
static int *row_counts(MPI_Comm comm, int64_t rows, int64_t cols)
{
    int p;
    SW_CHECK(MPI_Comm_size(comm, &p));
    int *c = malloc(2 * sizeof(int) * (size_t)p);
    if (!c) sw_fail(__FILE__, __LINE__, "malloc", -ENOMEM);
    for (int i = 0; i < p; i++) {
        int64_t first, count;
        sw_tile_range(rows, p, i, &first, &count);
        c[i] = (int)(count * cols), c[p + i] = (int)(first * cols);
    }
    return c;
}

/* buffers: token (RW), in, [out] -- whole contiguous matrices */
static void nbc_start_cpu(void *buffers[], void *cl_arg)
{
    struct nbc_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    if (sw_simulated()) sw_sim_adopt_worker(); /* its rank's MPI process (src/core/sim_smpi.cc) */
#ifdef STARPU_SIMGRID
    const MPI_Op op = sim_op(); /* no arithmetic on values never computed */
#else
    const MPI_Op op = a.op == SW_MAX ? MPI_MAX : MPI_SUM;
#endif
    inflight f = {MPI_REQUEST_NULL, starpu_task_get_current(), NULL, a.recs, 0, NULL};
    float *in = SW_F32_OF(buffers[1]);
    int rc = MPI_SUCCESS, p, me;
    int64_t sent = 0; /* elements of the call's send buffer meant for other ranks */
    SW_CHECK(MPI_Comm_size(a.comm, &p));
    SW_CHECK(MPI_Comm_rank(a.comm, &me));
    switch (a.kind) {
    case SW_NBC_ALLREDUCE:
#ifdef STARPU_SIMGRID
        if (p > 1) {
            /* Simulated: not SMPI's MPI_Iallreduce (SimGrid 3.32), which
             * (1) copies an MPI_IN_PLACE buffer into a temporary it frees
             * when the call returns, while its sends still read it (a 16
             * MiB all-reduce then faulted inside SimGrid's copy, in a loop
             * of SIGSEGVs: the "stuck" 8-rank dp runs of GPT-2 medium),
             * and (2) sends the whole buffer to every other rank, (p-1) x
             * N, with p-1 temporaries of N on each rank: p/2 times the
             * bytes of a ring or reduce-scatter + all-gather all-reduce,
             * and memory that grows with p^2 over the simulated ranks.
             * Instead one reduce-scatter of 2N elements: each rank sends
             * 2N(p-1)/p, the bytes of a ring all-reduce, in one round of
             * messages (one latency where a real reduce-scatter +
             * all-gather pays two). The values are not computed in
             * simulation: the buffers are SMPI's folded memory (SMPI
             * skips copying its shared blocks, bench/sim.sh's 64 MiB; a
             * smaller one is copied, read from untouched pages). */
            int64_t n = SW_NUMEL_OF(buffers[1]);
            int part = (int)((2 * n + p - 1) / p);
            f.sim_buf = SMPI_SHARED_MALLOC(sizeof(float) * (size_t)part * (size_t)(p + 1));
            f.counts = malloc(sizeof(int) * (size_t)p);
            if (!f.sim_buf || !f.counts) sw_fail(__FILE__, __LINE__, "malloc", -ENOMEM);
            for (int i = 0; i < p; i++) f.counts[i] = part;
            rc = MPI_Ireduce_scatter(f.sim_buf, (float *)f.sim_buf + (size_t)part * (size_t)p, f.counts, MPI_FLOAT, op,
                                     a.comm, &f.req);
            sent = n; /* what the real run counts (MPI_Iallreduce's buffer) */
            break;
        }
#endif
        rc = MPI_Iallreduce(MPI_IN_PLACE, in, (int)SW_NUMEL_OF(buffers[1]), MPI_FLOAT, op, a.comm, &f.req);
        sent = SW_NUMEL_OF(buffers[1]);
        break;
    case SW_NBC_ALLGATHER:
        f.counts = row_counts(a.comm, SW_ROWS_OF(buffers[2]), SW_COLS_OF(buffers[2]));
        rc = MPI_Iallgatherv(in, (int)SW_NUMEL_OF(buffers[1]), MPI_FLOAT, SW_F32_OF(buffers[2]), f.counts,
                             f.counts + p, MPI_FLOAT, a.comm, &f.req);
        sent = SW_NUMEL_OF(buffers[1]);
        break;
    case SW_NBC_ALLGATHER_INPLACE:
        f.counts = row_counts(a.comm, SW_ROWS_OF(buffers[1]), SW_COLS_OF(buffers[1]));
#ifdef STARPU_SIMGRID
        /* this rank's block sent from SMPI's folded memory, not
         * MPI_IN_PLACE (SMPI's in-place handling is where its all-reduce
         * read a freed temporary, above); the values are not computed */
        f.sim_buf = SMPI_SHARED_MALLOC(sizeof(float) * (size_t)(f.counts[me] > 0 ? f.counts[me] : 1));
        if (!f.sim_buf) sw_fail(__FILE__, __LINE__, "malloc", -ENOMEM);
        rc = MPI_Iallgatherv(f.sim_buf, f.counts[me], MPI_FLOAT, in, f.counts, f.counts + p, MPI_FLOAT, a.comm,
                             &f.req);
#else
        rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, in, f.counts, f.counts + p, MPI_FLOAT, a.comm,
                             &f.req);
#endif
        sent = f.counts[me]; /* as SW_NBC_ALLGATHER: its own block handed to MPI */
        break;
    case SW_NBC_REDUCE_SCATTER:
        f.counts = row_counts(a.comm, SW_ROWS_OF(buffers[1]), SW_COLS_OF(buffers[1]));
        rc = MPI_Ireduce_scatter(in, SW_F32_OF(buffers[2]), f.counts, MPI_FLOAT, op, a.comm, &f.req);
        sent = SW_NUMEL_OF(buffers[1]) - f.counts[me];
        break;
    case SW_NBC_ALLTOALL: {
        int part = (int)(SW_NUMEL_OF(buffers[1]) / p);
        rc = MPI_Ialltoall(in, part, MPI_FLOAT, SW_F32_OF(buffers[2]), part, MPI_FLOAT, a.comm, &f.req);
        sent = (int64_t)part * (p - 1);
        break;
    }
    }
    if (rc != MPI_SUCCESS) sw_fail(__FILE__, __LINE__, "MPI non-blocking collective", rc);
    __atomic_add_fetch(a.sent_bytes, sent * (int64_t)sizeof(float), __ATOMIC_RELAXED);
    sw_counter_add(SW_COUNT_MPI_COLLECTIVE, 1);
#ifdef STARPU_SIMGRID
    {
        /* The task runs on its worker's SimGrid actor (the codelet's
         * STARPU_CODELET_SIMGRID_EXECUTE), so SMPI simulates the collective
         * on the platform's network. As in a real run the worker is not
         * held: an actor of the rank waits for the request on the
         * simulated clock and ends the task then (a worker held in the
         * wait deadlocked pp 2 with one worker per rank: the last stage
         * reached the embedding's all-reduce with backward work for the
         * first stage still queued behind it). */
        inflight *h = malloc(sizeof *h);
        if (!h) sw_fail(__FILE__, __LINE__, "malloc", -ENOMEM);
        *h = f;
        starpu_task_end_dep_add(f.task, 1);
        sw_sim_spawn(sim_wait, h);
        return;
    }
#endif
    /* where the peers are there already, a short wait (SW_COMM_SPIN_US)
     * finishes it here: an end deferred costs a hand-off to another thread
     * (the wait's length was chosen by measurement, BENCHMARKS.md) */
    double t0 = MPI_Wtime();
    for (int flag = 0;;) {
        SW_CHECK(MPI_Test(&f.req, &flag, MPI_STATUS_IGNORE));
        if (flag) {
            completed(&f);
            return;
        }
        if (MPI_Wtime() - t0 > nbc.spin_s) break;
    }
    starpu_task_end_dep_add(f.task, 1); /* ended once MPI_Test says so */
    sw_counter_add(SW_COUNT_MPI_DEFERRED, 1);
    pthread_mutex_lock(&nbc.lock);
    if (nbc.n == nbc.cap) {
        nbc.cap = nbc.cap ? 2 * nbc.cap : 16;
        nbc.q = realloc(nbc.q, sizeof *nbc.q * (size_t)nbc.cap);
        if (!nbc.q) sw_fail(__FILE__, __LINE__, "realloc", -ENOMEM);
    }
    nbc.q[nbc.n++] = f;
    pthread_cond_signal(&nbc.work);
    pthread_mutex_unlock(&nbc.lock);
}

/* STARPU_CODELET_SIMGRID_EXECUTE: in simulation StarPU runs the function
 * itself (it calls MPI, which SMPI then simulates) instead of a model's
 * time; real runs ignore the flag. */
static struct starpu_codelet nbc_cl2 = {
    .flags = STARPU_CODELET_SIMGRID_EXECUTE,
    .cpu_funcs = {nbc_start_cpu},
    .cpu_funcs_name = {"nbc_start_cpu"},
    .nbuffers = 2,
    .modes = {STARPU_RW, STARPU_RW},
    .name = "comm_mpi_collective",
};
static struct starpu_codelet nbc_cl3 = {
    .flags = STARPU_CODELET_SIMGRID_EXECUTE,
    .cpu_funcs = {nbc_start_cpu},
    .cpu_funcs_name = {"nbc_start_cpu"},
    .nbuffers = 3,
    .modes = {STARPU_RW, STARPU_R, STARPU_W},
    .name = "comm_mpi_collective",
};

void sw_nbc_submit(sw_nbc_kind kind, MPI_Comm comm, starpu_data_handle_t token, starpu_data_handle_t in,
                   starpu_data_handle_t out, int op, void **recs, int64_t *sent_bytes)
{
    struct nbc_args a = {kind, op, comm, recs, sent_bytes};
#ifdef STARPU_SIMGRID
    /* the actor that speaks for this rank on the collectives' communicators */
    const int wid = starpu_worker_get_by_type(STARPU_CPU_WORKER, 0);
    if (out)
        SW_INSERT(&nbc_cl3, STARPU_RW, token, STARPU_R, in, STARPU_W, out, STARPU_VALUE, &a, sizeof a,
                  STARPU_PRIORITY, STARPU_MAX_PRIO, STARPU_EXECUTE_ON_WORKER, wid);
    else
        SW_INSERT(&nbc_cl2, STARPU_RW, token, STARPU_RW, in, STARPU_VALUE, &a, sizeof a, STARPU_PRIORITY,
                  STARPU_MAX_PRIO, STARPU_EXECUTE_ON_WORKER, wid);
    return;
#endif
    if (out)
        SW_INSERT(&nbc_cl3, STARPU_RW, token, STARPU_R, in, STARPU_W, out, STARPU_VALUE, &a, sizeof a,
                  STARPU_PRIORITY, STARPU_MAX_PRIO);
    else
        SW_INSERT(&nbc_cl2, STARPU_RW, token, STARPU_RW, in, STARPU_VALUE, &a, sizeof a, STARPU_PRIORITY,
                  STARPU_MAX_PRIO);
}
