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
/* Simulated: each communicator's collectives run, one at a time, on an
 * actor of the rank's own -- its server -- as point-to-point exchanges.
 * Up to SIM_LINEAR_MAX ranks in one round, every rank sending to every
 * other at once: what SMPI's non-blocking collectives (SimGrid 3.32) did
 * here before, and Open MPI's libnbc does for its all-gathers, so the
 * layouts this machine runs simulate as they were checked against their
 * runs (docs/simulation.md). Beyond, the bytes of a bandwidth-optimal
 * algorithm: for a power-of-two group recursive halving (reduce-scatter,
 * distance 1, 2, 4, ...) and doubling (all-gather, distance p/2 ... 1),
 * log2 p exchanges, the largest between the nearest ranks (those of one
 * node); otherwise a ring, p - 1 exchanges with the neighbours; an
 * all-reduce a reduce-scatter then an all-gather, an all-to-all p - 1
 * pairwise exchanges. One round of a large group is out of reach: each
 * message's end searches its actor's list of pending requests, so the CPU
 * time grows with the square of the group (a data-parallel group of 512
 * never ended). Not SMPI's non-blocking collectives themselves: they are
 * one round at every size, and its MPI_Iallreduce copies an MPI_IN_PLACE
 * buffer into a temporary it frees while its sends still read it (a 16
 * MiB all-reduce faulted inside SimGrid). Values are not computed: the
 * messages carry SMPI's folded memory, no reduction is applied. As in a
 * real run no worker is held: the server ends the task when its exchanges
 * are done. SMPI matches a message by its sender's actor, so the server
 * speaks for its rank on its communicator (sw_sim_comm_speaker); the
 * communicator's token already orders its collectives, the same on every
 * rank. */
#define SIM_LINEAR_MAX 8
typedef struct sim_job {
    struct sim_job *next;
    int kind, stop;
    int64_t n;   /* elements: the all-reduce's; the all-to-all's per peer */
    inflight f;  /* its counts (all-gather, reduce-scatter) are read here */
} sim_job;

typedef struct sim_server {
    struct sim_server *next; /* this rank's servers (globals are per simulated rank) */
    MPI_Comm comm;
    starpu_pthread_mutex_t lock;
    starpu_pthread_cond_t cond;
    sim_job *head, *tail;
    long pid; /* the server's actor, once it shares its rank's MPI process */
    starpu_pthread_t thread;
    float *buf; /* SMPI_SHARED_MALLOC'ed: what every message carries */
    int64_t cap;
} sim_server;
static sim_server *servers;

static void sim_push(sim_server *s, sim_job *j)
{
    starpu_pthread_mutex_lock(&s->lock);
    if (s->tail) s->tail->next = j;
    else s->head = j;
    s->tail = j;
    starpu_pthread_cond_broadcast(&s->cond);
    starpu_pthread_mutex_unlock(&s->lock);
}

/* the folded buffer, at least n elements */
static float *sim_buf(sim_server *s, int64_t n)
{
    if (n > s->cap) {
        if (s->buf) SMPI_SHARED_FREE(s->buf);
        s->cap = n;
        s->buf = SMPI_SHARED_MALLOC(sizeof(float) * (size_t)n);
        if (!s->buf) sw_fail(__FILE__, __LINE__, "SMPI_SHARED_MALLOC", -ENOMEM);
    }
    return s->buf;
}

/* sends `send` elements to `to` and receives `recv` from `from` */
static void sim_xchg(sim_server *s, int to, int64_t send, int from, int64_t recv)
{
    float *b = sim_buf(s, send + recv);
    SW_CHECK(MPI_Sendrecv(b, (int)send, MPI_FLOAT, to, 0, b + send, (int)recv, MPI_FLOAT, from, 0, s->comm,
                          MPI_STATUS_IGNORE));
    sw_counter_add(SW_COUNT_SIM_EXCHANGE, 1);
}

/* one round: send[i] elements to every other rank i, recv[i] from it, all
 * at once (one exchange per peer) */
static void sim_linear(sim_server *s, const int64_t *send, const int64_t *recv, int p, int me)
{
    int64_t total = 0;
    for (int i = 0; i < p; i++) total += send[i] + recv[i];
    float *b = sim_buf(s, total);
    MPI_Request *req = malloc(sizeof *req * 2 * (size_t)p);
    if (!req) sw_fail(__FILE__, __LINE__, "malloc", -ENOMEM);
    int n = 0;
    for (int i = 0; i < p; i++) {
        if (i == me) continue;
        SW_CHECK(MPI_Irecv(b, (int)recv[i], MPI_FLOAT, i, 0, s->comm, &req[n++]));
        b += recv[i];
    }
    for (int i = 0; i < p; i++) {
        if (i == me) continue;
        SW_CHECK(MPI_Isend(b, (int)send[i], MPI_FLOAT, i, 0, s->comm, &req[n++]));
        b += send[i];
    }
    SW_CHECK(MPI_Waitall(n, req, MPI_STATUSES_IGNORE));
    free(req);
    sw_counter_add(SW_COUNT_SIM_EXCHANGE, p - 1);
}

static int64_t sum_mod(const int64_t *c, int p, int m, int r) /* the blocks i = r (mod m) */
{
    int64_t t = 0;
    for (int i = r % m; i < p; i += m) t += c[i];
    return t;
}

/* block i of c[0..p-1] ends reduced on rank i */
static void sim_reduce_scatter(sim_server *s, const int64_t *c, int p, int me)
{
    if ((p & (p - 1)) == 0)
        for (int d = 1; d < p; d <<= 1) /* holds the sums of blocks = me (mod d); keeps those = me (mod 2d) */
            sim_xchg(s, me ^ d, sum_mod(c, p, 2 * d, me ^ d), me ^ d, sum_mod(c, p, 2 * d, me));
    else
        for (int k = 0; k < p - 1; k++)
            sim_xchg(s, (me + 1) % p, c[(me - k - 1 + 2 * p) % p], (me + p - 1) % p, c[(me - k - 2 + 2 * p) % p]);
}

/* block i of c[0..p-1] from rank i to every rank */
static void sim_allgather(sim_server *s, const int64_t *c, int p, int me)
{
    if ((p & (p - 1)) == 0)
        for (int d = p / 2; d >= 1; d >>= 1) /* holds blocks = me (mod 2d); then those = me (mod d) */
            sim_xchg(s, me ^ d, sum_mod(c, p, 2 * d, me), me ^ d, sum_mod(c, p, 2 * d, me ^ d));
    else
        for (int k = 0; k < p - 1; k++)
            sim_xchg(s, (me + 1) % p, c[(me - k + p) % p], (me + p - 1) % p, c[(me - k - 1 + 2 * p) % p]);
}

static void sim_run(sim_server *s, const sim_job *j)
{
    int p, me;
    SW_CHECK(MPI_Comm_size(s->comm, &p));
    SW_CHECK(MPI_Comm_rank(s->comm, &me));
    int64_t *c = malloc(sizeof *c * 2 * (size_t)p), *mine = c + p;
    if (!c) sw_fail(__FILE__, __LINE__, "malloc", -ENOMEM);
    const int linear = p <= SIM_LINEAR_MAX;
    /* an all-reduce's blocks: n split as evenly as can be -- 2n in one
     * round (linear), each rank sending the bytes of a ring all-reduce */
    const int64_t n = j->kind == SW_NBC_ALLREDUCE && linear ? 2 * j->n : j->n;
    for (int i = 0; i < p; i++) c[i] = j->f.counts ? j->f.counts[i] : n / p + (i < n % p);
    if (linear) {
        for (int i = 0; i < p; i++) mine[i] = j->kind == SW_NBC_ALLTOALL ? n : c[me];
        switch (j->kind) {
        case SW_NBC_ALLGATHER:
        case SW_NBC_ALLGATHER_INPLACE: sim_linear(s, mine, c, p, me); break; /* its block to all */
        default: sim_linear(s, j->kind == SW_NBC_ALLTOALL ? mine : c, mine, p, me); break; /* block i to i */
        }
    } else {
        switch (j->kind) {
        case SW_NBC_ALLREDUCE:
            sim_reduce_scatter(s, c, p, me);
            sim_allgather(s, c, p, me);
            break;
        case SW_NBC_ALLGATHER:
        case SW_NBC_ALLGATHER_INPLACE: sim_allgather(s, c, p, me); break;
        case SW_NBC_REDUCE_SCATTER: sim_reduce_scatter(s, c, p, me); break;
        case SW_NBC_ALLTOALL:
            for (int k = 1; k < p; k++) {
                const int pow2 = (p & (p - 1)) == 0;
                sim_xchg(s, pow2 ? me ^ k : (me + k) % p, n, pow2 ? me ^ k : (me + p - k) % p, n);
            }
            break;
        }
    }
    free(c);
}

static void sim_serve(void *arg)
{
    sim_server *s = arg;
    starpu_pthread_mutex_lock(&s->lock);
    s->pid = sw_sim_self_pid(); /* it shares its rank's MPI process already (sw_sim_spawn) */
    starpu_pthread_cond_broadcast(&s->cond);
    for (;;) {
        while (!s->head) starpu_pthread_cond_wait(&s->cond, &s->lock);
        sim_job *j = s->head;
        if (!(s->head = j->next)) s->tail = NULL;
        starpu_pthread_mutex_unlock(&s->lock);
        if (j->stop) {
            free(j);
            return;
        }
        sim_run(s, j);
        completed(&j->f);
        struct starpu_task *t = j->f.task;
        free(j);
        starpu_task_end_dep_release(t);
        starpu_pthread_mutex_lock(&s->lock);
    }
}

void sw_nbc_sim_serve(MPI_Comm comm)
{
    sim_server *s = calloc(1, sizeof *s);
    if (!s) sw_fail(__FILE__, __LINE__, "calloc", -ENOMEM);
    s->comm = comm, s->pid = -1;
    starpu_pthread_mutex_init(&s->lock, NULL);
    starpu_pthread_cond_init(&s->cond, NULL);
    s->thread = sw_sim_spawn(sim_serve, s);
    starpu_pthread_mutex_lock(&s->lock);
    while (s->pid < 0) starpu_pthread_cond_wait(&s->cond, &s->lock);
    starpu_pthread_mutex_unlock(&s->lock);
    sw_sim_comm_speaker(comm, s->pid);
    s->next = servers, servers = s;
}

static sim_server *sim_server_of(MPI_Comm comm)
{
    for (sim_server *s = servers; s; s = s->next)
        if (s->comm == comm) return s;
    sw_fail(__FILE__, __LINE__, "no simulated collective server for the communicator", -EINVAL);
    return NULL;
}

void sw_nbc_sim_stop(MPI_Comm comm)
{
    sim_server **at = &servers;
    while (*at && (*at)->comm != comm) at = &(*at)->next;
    sim_server *s = *at;
    if (!s) return;
    *at = s->next;
    sim_job *j = calloc(1, sizeof *j);
    if (!j) sw_fail(__FILE__, __LINE__, "calloc", -ENOMEM);
    j->stop = 1;
    sim_push(s, j);
    starpu_pthread_join(s->thread, NULL);
    if (s->buf) SMPI_SHARED_FREE(s->buf);
    starpu_pthread_mutex_destroy(&s->lock);
    starpu_pthread_cond_destroy(&s->cond);
    free(s);
}
#endif

void sw_nbc_attach(void)
{
    /* simulated: each communicator's server ends its collectives' tasks
     * (above), so neither the idle hook nor the backstop thread is needed -- a real
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
#ifdef STARPU_SIMGRID
    sim_server *server;
#endif
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

/* the MPI call of a real run; simulated, the server's exchanges instead */
#ifdef STARPU_SIMGRID
#define POST(call) (void)op, (void)in
#else
#define POST(call) rc = (call)
#endif

/* buffers: token (RW), in, [out] -- whole contiguous matrices */
static void nbc_start_cpu(void *buffers[], void *cl_arg)
{
    struct nbc_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    if (sw_simulated()) sw_sim_adopt_worker(); /* MPI_Comm_size below: its rank's MPI process (src/core/sim_smpi.cc) */
    const MPI_Op op = a.op == SW_MAX ? MPI_MAX : MPI_SUM;
    inflight f = {MPI_REQUEST_NULL, starpu_task_get_current(), NULL, a.recs, 0};
    float *in = SW_F32_OF(buffers[1]);
    int rc = MPI_SUCCESS, p, me;
    int64_t sent = 0; /* elements of the call's send buffer meant for other ranks */
    SW_CHECK(MPI_Comm_size(a.comm, &p));
    SW_CHECK(MPI_Comm_rank(a.comm, &me));
    switch (a.kind) {
    case SW_NBC_ALLREDUCE:
        sent = SW_NUMEL_OF(buffers[1]);
        POST(MPI_Iallreduce(MPI_IN_PLACE, in, (int)sent, MPI_FLOAT, op, a.comm, &f.req));
        break;
    case SW_NBC_ALLGATHER:
        f.counts = row_counts(a.comm, SW_ROWS_OF(buffers[2]), SW_COLS_OF(buffers[2]));
        sent = SW_NUMEL_OF(buffers[1]);
        POST(MPI_Iallgatherv(in, (int)sent, MPI_FLOAT, SW_F32_OF(buffers[2]), f.counts, f.counts + p, MPI_FLOAT, a.comm,
                             &f.req));
        break;
    case SW_NBC_ALLGATHER_INPLACE:
        f.counts = row_counts(a.comm, SW_ROWS_OF(buffers[1]), SW_COLS_OF(buffers[1]));
        sent = f.counts[me]; /* as SW_NBC_ALLGATHER: its own block handed to MPI */
        POST(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, in, f.counts, f.counts + p, MPI_FLOAT, a.comm,
                             &f.req));
        break;
    case SW_NBC_REDUCE_SCATTER:
        f.counts = row_counts(a.comm, SW_ROWS_OF(buffers[1]), SW_COLS_OF(buffers[1]));
        sent = SW_NUMEL_OF(buffers[1]) - f.counts[me];
        POST(MPI_Ireduce_scatter(in, SW_F32_OF(buffers[2]), f.counts, MPI_FLOAT, op, a.comm, &f.req));
        break;
    case SW_NBC_ALLTOALL: {
        int part = (int)(SW_NUMEL_OF(buffers[1]) / p);
        sent = (int64_t)part * (p - 1);
        POST(MPI_Ialltoall(in, part, MPI_FLOAT, SW_F32_OF(buffers[2]), part, MPI_FLOAT, a.comm, &f.req));
        break;
    }
    }
    if (rc != MPI_SUCCESS) sw_fail(__FILE__, __LINE__, "MPI non-blocking collective", rc);
    __atomic_add_fetch(a.sent_bytes, sent * (int64_t)sizeof(float), __ATOMIC_RELAXED);
    sw_counter_add(SW_COUNT_MPI_COLLECTIVE, 1);
#ifdef STARPU_SIMGRID
    {
        /* the task ran on its worker's SimGrid actor (the codelet's
         * STARPU_CODELET_SIMGRID_EXECUTE); the communicator's server ends it */
        sim_job *j = calloc(1, sizeof *j);
        if (!j) sw_fail(__FILE__, __LINE__, "calloc", -ENOMEM);
        j->kind = a.kind, j->f = f;
        j->n = a.kind == SW_NBC_ALLTOALL ? SW_NUMEL_OF(buffers[1]) / p : SW_NUMEL_OF(buffers[1]);
        starpu_task_end_dep_add(f.task, 1);
        sim_push(a.server, j);
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
#ifdef STARPU_SIMGRID
    /* simulated: on the first CPU worker, as when the simulation was
     * checked against the real runs (docs/simulation.md: a task for one
     * worker is taken before the scheduler's queue, so the collective
     * starts as soon as its data is ready; a real run's first idle worker
     * starts it -- without this, Ulysses 2 x dp 2 ZeRO-3 simulated 10 %
     * slower) */
    struct nbc_args sa = {kind, op, comm, sim_server_of(comm), recs, sent_bytes};
    const int wid = starpu_worker_get_by_type(STARPU_CPU_WORKER, 0);
    if (out)
        SW_INSERT(&nbc_cl3, STARPU_RW, token, STARPU_R, in, STARPU_W, out, STARPU_VALUE, &sa, sizeof sa,
                  STARPU_PRIORITY, STARPU_MAX_PRIO, STARPU_EXECUTE_ON_WORKER, wid);
    else
        SW_INSERT(&nbc_cl2, STARPU_RW, token, STARPU_RW, in, STARPU_VALUE, &sa, sizeof sa, STARPU_PRIORITY,
                  STARPU_MAX_PRIO, STARPU_EXECUTE_ON_WORKER, wid);
    return;
#else
    struct nbc_args a = {kind, op, comm, recs, sent_bytes};
    if (out)
        SW_INSERT(&nbc_cl3, STARPU_RW, token, STARPU_R, in, STARPU_W, out, STARPU_VALUE, &a, sizeof a,
                  STARPU_PRIORITY, STARPU_MAX_PRIO);
    else
        SW_INSERT(&nbc_cl2, STARPU_RW, token, STARPU_RW, in, STARPU_VALUE, &a, sizeof a, STARPU_PRIORITY,
                  STARPU_MAX_PRIO);
#endif
}
