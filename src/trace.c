/* sw_trace: records from StarPU's profiling info and StarPU-MPI request
 * callbacks, merged on rank 0, written as Chrome JSON, Paje and an overlap
 * report (see trace.h).
 *
 * The recorder is a singleton like the runtime: callbacks arrive on worker
 * threads and on StarPU-MPI's progression thread, so appends take a lock;
 * the labels are per submitting thread. */
#include "starweave/trace.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <starpu_mpi.h>

#include "starweave/runtime.h"
#include "starweave/tensor.h"

/* ---------------- records (also the wire format of the gather) ---------------- */

typedef struct task_rec {
    double start_us, end_us, bytes, flops;
    int32_t rank, worker, phase, layer, step, pad_;
    char name[40];
} task_rec;

typedef struct comm_rec {
    double submit_us, posted_us, done_us, bytes;
    int64_t tag;
    int32_t rank, peer, chunk, is_send, phase, layer, step, lane; /* lane: set on rank 0 */
    char coll[32], group[16];
} comm_rec;

typedef struct mark_rec {
    double t_us;
    int32_t rank, step;
} mark_rec;

#define SW_TRACE_NAME 32 /* worker name length on the wire */

/* growable array of fixed-size records */
typedef struct vec {
    void *p;
    size_t n, cap, elem;
} vec;

static void *vec_push(vec *v)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 256;
        void *p = realloc(v->p, cap * v->elem);
        if (!p) sw_fail(__FILE__, __LINE__, "realloc(trace records)", -ENOMEM);
        v->p = p;
        v->cap = cap;
    }
    return (char *)v->p + v->elem * v->n++;
}

static void vec_free(vec *v)
{
    free(v->p);
    v->p = NULL;
    v->n = v->cap = 0;
}

/* ---------------- task graph records ---------------- */

enum { DAG_TASK, DAG_SEND, DAG_RECV, DAG_COPY }; /* copies: passed through, not drawn */

typedef struct dag_node {
    int32_t rank, kind, phase, layer, step;
    int32_t msg; /* a request: its comm_rec in dag.comms */
    char name[40];
} dag_node;

typedef struct dag_edge {
    int32_t from, to; /* nodes of one rank, from < to */
} dag_edge;

/* an access still able to be depended on: rows [r0, r1), columns [c0, c1) */
typedef struct dag_acc {
    int64_t r0, r1, c0, c1;
    int32_t node, write;
} dag_acc;

/* one datum (a tensor with its tiles, or a temporary) and its live accesses */
typedef struct dag_datum {
    const void *key;
    vec acc;
} dag_datum;

static struct {
    atomic_int on;
    pthread_mutex_t lock;
    vec tasks, comms, marks;   /* this rank's records (local clock) */
    atomic_long comm_pending;  /* requests begun whose record is not appended yet */
    /* merged trace, rank 0 (rank 0's clock, origin at the earliest record) */
    int nranks;
    int *nworkers;             /* per rank */
    char (*wnames)[SW_TRACE_NAME]; /* worker names, rank-major */
    int *wname_first;          /* index of rank r's first worker name */
    vec mtasks, mcomms, mmarks;
    double *offset_us;         /* per rank: added to its clock */
    double end_us;             /* last time in the merged trace */
    struct {
        atomic_int on;
        pthread_mutex_t lock;  /* submission may happen on several threads */
        vec nodes, edges;      /* edges grouped by destination, in node order */
        vec comms;             /* the requests' records (posted_us: node index once packed) */
        vec preds;             /* scratch: the dependencies of the node being recorded */
        dag_datum *data;       /* open addressing on key */
        size_t ndata, cap;
        long counts[4];        /* written on rank 0: tasks, requests, edges, messages */
    } dag;
} tr = {
    .dag = {.lock = PTHREAD_MUTEX_INITIALIZER, .nodes = {.elem = sizeof(dag_node)}, .edges = {.elem = sizeof(dag_edge)},
            .comms = {.elem = sizeof(comm_rec)}, .preds = {.elem = sizeof(int32_t)}},
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .tasks = {.elem = sizeof(task_rec)}, .comms = {.elem = sizeof(comm_rec)}, .marks = {.elem = sizeof(mark_rec)},
    .mtasks = {.elem = sizeof(task_rec)}, .mcomms = {.elem = sizeof(comm_rec)}, .mmarks = {.elem = sizeof(mark_rec)},
};

static _Thread_local sw_trace_ctx cur = {SW_PHASE_NONE, -1, -1};

static const char *phase_names[SW_PHASE_COUNT] = {"none", "forward", "backward", "optimizer",
                                                  "recompute", "offload", "comm"};

const char *sw_phase_name(sw_phase p) { return (unsigned)p < SW_PHASE_COUNT ? phase_names[p] : "?"; }

static void copy_name(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "?");
}

/* ---------------- switches and labels ---------------- */

void sw_trace_enable(int on)
{
    /* profiling info is allocated at submission when profiling is on */
    if (on) starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
    atomic_store(&tr.on, on != 0);
}

int sw_trace_enabled(void) { return atomic_load(&tr.on); }

static void merged_free(void)
{
    vec_free(&tr.mtasks);
    vec_free(&tr.mcomms);
    vec_free(&tr.mmarks);
    free(tr.nworkers);
    free(tr.wnames);
    free(tr.wname_first);
    free(tr.offset_us);
    tr.nworkers = NULL;
    tr.wnames = NULL;
    tr.wname_first = NULL;
    tr.offset_us = NULL;
    tr.nranks = 0;
    tr.end_us = 0;
}

static void dag_clear(void);

void sw_trace_reset(void)
{
    pthread_mutex_lock(&tr.lock);
    tr.tasks.n = tr.comms.n = tr.marks.n = 0;
    pthread_mutex_unlock(&tr.lock);
    merged_free();
    dag_clear();
}

void sw_trace_set_phase(sw_phase phase, int layer)
{
    cur.phase = phase;
    cur.layer = layer;
}

void sw_trace_mark_step(int step)
{
    cur.step = step;
    if (!atomic_load(&tr.on)) return;
    double now = starpu_timing_now();
    pthread_mutex_lock(&tr.lock);
    mark_rec *m = vec_push(&tr.marks);
    *m = (mark_rec){now, 0, step};
    pthread_mutex_unlock(&tr.lock);
}

sw_trace_ctx sw_trace_get_ctx(void) { return cur; }
void sw_trace_set_ctx(sw_trace_ctx ctx) { cur = ctx; }

/* ---------------- task records ---------------- */

struct task_arg {
    sw_trace_ctx ctx;
    double bytes;
};

void *sw_trace_task_begin(void)
{
    if (!atomic_load(&tr.on)) return NULL;
    struct task_arg *a = malloc(sizeof *a); /* StarPU frees it (callback_arg_free) */
    if (!a) sw_fail(__FILE__, __LINE__, "malloc(trace task)", -ENOMEM);
    a->ctx = cur;
    a->bytes = 0;
    return a;
}

/* Runs when the task is ready, before it is scheduled: its handles are
 * certainly registered (by completion, an unregister_submit may have
 * freed a temporary), and StarPU sets the current task. */
static void task_prologue(void *arg)
{
    struct task_arg *a = arg;
    struct starpu_task *t = starpu_task_get_current();
    if (!a || !t || !t->cl) return;
    double bytes = 0;
    for (unsigned i = 0; i < STARPU_TASK_GET_NBUFFERS(t); i++) {
        starpu_data_handle_t h = STARPU_TASK_GET_HANDLE(t, i);
        if (h) bytes += (double)starpu_data_get_size(h);
    }
    a->bytes = bytes;
}

void (*sw_trace_task_prologue(void *rec))(void *) { return rec ? task_prologue : NULL; }

void sw_trace_task_end(void *arg)
{
    struct task_arg *a = arg;
    struct starpu_task *t = starpu_task_get_current();
    /* no profiling info: profiling was off when the task was submitted */
    if (!a || !t || !t->profiling_info) return;
    struct starpu_profiling_task_info *pi = t->profiling_info;
    task_rec r;
    memset(&r, 0, sizeof r);
    r.start_us = starpu_timing_timespec_to_us(&pi->start_time);
    r.end_us = starpu_timing_timespec_to_us(&pi->end_time);
    if (!(r.end_us >= r.start_us) || r.start_us <= 0) return; /* never ran on a worker */
    r.bytes = a->bytes;
    r.flops = t->flops;
    r.worker = pi->workerid;
    r.phase = a->ctx.phase;
    r.layer = a->ctx.layer;
    r.step = a->ctx.step;
    copy_name(r.name, sizeof r.name, t->cl && t->cl->name ? t->cl->name : t->name);
    pthread_mutex_lock(&tr.lock);
    *(task_rec *)vec_push(&tr.tasks) = r;
    pthread_mutex_unlock(&tr.lock);
}

/* ---------------- communication records ---------------- */

struct comm_arg {
    comm_rec rec;
    atomic_int refs; /* the readiness probe and the request callback */
    starpu_data_handle_t h;
};

static void comm_unref(struct comm_arg *a)
{
    if (atomic_fetch_sub(&a->refs, 1) != 1) return;
    comm_rec r = a->rec;
    /* the send's probe and StarPU-MPI's own acquire are both readers
     * released together; if the probe ran last, the request was posted no
     * later than it completed */
    if (r.posted_us < 0 || r.posted_us > r.done_us) r.posted_us = r.posted_us < 0 ? r.submit_us : r.done_us;
    free(a);
    pthread_mutex_lock(&tr.lock);
    *(comm_rec *)vec_push(&tr.comms) = r;
    pthread_mutex_unlock(&tr.lock);
    atomic_fetch_sub(&tr.comm_pending, 1);
}

/* The data the request sends or receives into is ready: StarPU-MPI hands
 * the request to its progression thread at this point. */
static void comm_ready(void *arg)
{
    struct comm_arg *a = arg;
    a->rec.posted_us = starpu_timing_now();
    starpu_data_release(a->h);
    comm_unref(a);
}

void sw_trace_comm_done(void *arg)
{
    struct comm_arg *a = arg;
    if (!a) return;
    a->rec.done_us = starpu_timing_now();
    comm_unref(a);
}

/* the request's own fields: what it moves, between whom, and its labels */
static void comm_rec_fill(comm_rec *r, const char *collective, const char *group, int chunk, MPI_Comm comm, int peer,
                          int is_send, int64_t tag, starpu_data_handle_t h)
{
    r->bytes = h ? (double)starpu_data_get_size(h) : 0;
    r->tag = tag;
    r->chunk = chunk;
    r->is_send = is_send != 0;
    r->phase = cur.phase;
    r->layer = cur.layer;
    r->step = cur.step;
    r->peer = peer;
    if (comm != MPI_COMM_WORLD && comm != MPI_COMM_NULL) { /* the merged trace speaks world ranks */
        MPI_Group cg, wg;
        SW_CHECK(MPI_Comm_group(comm, &cg));
        SW_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
        SW_CHECK(MPI_Group_translate_ranks(cg, 1, &peer, wg, &r->peer));
        SW_CHECK(MPI_Group_free(&cg));
        SW_CHECK(MPI_Group_free(&wg));
    }
    copy_name(r->coll, sizeof r->coll, collective);
    copy_name(r->group, sizeof r->group, group);
}

static void dag_request(const char *collective, const char *group, int chunk, MPI_Comm comm, int peer, int is_send,
                        int64_t tag, starpu_data_handle_t h);

void *sw_trace_comm_begin(const char *collective, const char *group, int chunk, MPI_Comm comm, int peer,
                          int is_send, int64_t tag, starpu_data_handle_t h)
{
    if (atomic_load(&tr.dag.on)) dag_request(collective, group, chunk, comm, peer, is_send, tag, h);
    if (!atomic_load(&tr.on)) return NULL;
    struct comm_arg *a = calloc(1, sizeof *a);
    if (!a) sw_fail(__FILE__, __LINE__, "calloc(trace request)", -ENOMEM);
    comm_rec *r = &a->rec;
    r->submit_us = starpu_timing_now();
    r->posted_us = -1;
    comm_rec_fill(r, collective, group, chunk, comm, peer, is_send, tag, h);
    atomic_fetch_add(&tr.comm_pending, 1);
    if (h) {
        /* ordered like the request that follows (same thread, same handle,
         * sequential consistency): R after the writers for a send, W after
         * every earlier access for a receive */
        atomic_store(&a->refs, 2);
        a->h = h;
        SW_CHECK(starpu_data_acquire_cb(h, is_send ? STARPU_R : STARPU_W, comm_ready, a));
    } else {
        atomic_store(&a->refs, 1);
    }
    return a;
}

/* ---------------- collect: clocks and gather ---------------- */

/* Offset to add to this rank's clock to read rank 0's: ping-pong, the
 * round with the shortest round trip (its midpoint is the best bound). */
static double clock_offset(MPI_Comm comm, int me, int n)
{
    enum { ROUNDS = 16 };
    double best_rtt = 1e300, best = 0;
    for (int r = 1; r < n; r++) {
        for (int k = 0; k < ROUNDS; k++) {
            if (me == 0) {
                double dummy, t0;
                SW_CHECK(MPI_Recv(&dummy, 1, MPI_DOUBLE, r, 7, comm, MPI_STATUS_IGNORE));
                t0 = starpu_timing_now();
                SW_CHECK(MPI_Send(&t0, 1, MPI_DOUBLE, r, 8, comm));
            } else if (me == r) {
                double t1 = starpu_timing_now(), t0;
                SW_CHECK(MPI_Send(&t1, 1, MPI_DOUBLE, 0, 7, comm));
                SW_CHECK(MPI_Recv(&t0, 1, MPI_DOUBLE, 0, 8, comm, MPI_STATUS_IGNORE));
                double t3 = starpu_timing_now();
                if (t3 - t1 < best_rtt) {
                    best_rtt = t3 - t1;
                    best = t0 - 0.5 * (t1 + t3);
                }
            }
        }
    }
    return best;
}

typedef struct blob_head {
    int32_t rank, nworkers;
    int64_t ntasks, ncomms, nmarks;
    double offset_us;
} blob_head;

static int cmp_task(const void *x, const void *y)
{
    const task_rec *a = x, *b = y;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    if (a->worker != b->worker) return a->worker < b->worker ? -1 : 1;
    return (a->start_us > b->start_us) - (a->start_us < b->start_us);
}

static int cmp_comm(const void *x, const void *y)
{
    const comm_rec *a = x, *b = y;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    return (a->posted_us > b->posted_us) - (a->posted_us < b->posted_us);
}

/* Greedy lanes per rank: a request goes to the first lane free at its
 * posting, so no two records of one lane overlap (trace viewers draw a
 * track as nested slices). mcomms sorted by (rank, posted). */
static void assign_lanes(void)
{
    comm_rec *c = tr.mcomms.p;
    size_t i = 0;
    double *lane_end = NULL;
    size_t nl = 0;
    while (i < tr.mcomms.n) {
        int rank = c[i].rank;
        nl = 0;
        for (; i < tr.mcomms.n && c[i].rank == rank; i++) {
            size_t l = 0;
            while (l < nl && lane_end[l] > c[i].posted_us) l++;
            if (l == nl) {
                double *p = realloc(lane_end, sizeof *p * (nl + 1));
                if (!p) sw_fail(__FILE__, __LINE__, "realloc(lanes)", -ENOMEM);
                lane_end = p;
                nl++;
            }
            lane_end[l] = c[i].done_us;
            c[i].lane = (int32_t)l;
        }
    }
    free(lane_end);
}

/* Every rank's blob (at most 1 GiB) concatenated on rank 0, NULL on the
 * others; *displs_out: where each rank's starts (rank 0; free it). */
static char *gather_blobs(MPI_Comm comm, int me, int n, const char *blob, size_t sz, int **displs_out)
{
    if (sz > (size_t)1 << 30) sw_fail(__FILE__, __LINE__, "trace too large for one MPI_Gatherv", -E2BIG);
    int mysz = (int)sz, *sizes = NULL, *displs = NULL;
    char *all = NULL;
    if (me == 0) {
        sizes = calloc((size_t)n, sizeof *sizes);
        displs = calloc((size_t)n, sizeof *displs);
        if (!sizes || !displs) sw_fail(__FILE__, __LINE__, "calloc(trace gather)", -ENOMEM);
    }
    SW_CHECK(MPI_Gather(&mysz, 1, MPI_INT, sizes, 1, MPI_INT, 0, comm));
    if (me == 0) {
        size_t total = 0;
        for (int r = 0; r < n; r++) {
            if (total + (size_t)sizes[r] > (size_t)1 << 31) sw_fail(__FILE__, __LINE__, "merged trace over 2 GiB", -E2BIG);
            displs[r] = (int)total;
            total += (size_t)sizes[r];
        }
        all = malloc(total ? total : 1);
        if (!all) sw_fail(__FILE__, __LINE__, "malloc(merged trace)", -ENOMEM);
    }
    SW_CHECK(MPI_Gatherv(blob, mysz, MPI_BYTE, all, sizes, displs, MPI_BYTE, 0, comm));
    free(sizes);
    *displs_out = displs;
    return all;
}

int sw_trace_collect(void)
{
    int me, n;
    SW_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &me));
    SW_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &n));
    /* Every task callback has run once starpu_task_wait_for_all returns;
     * the traced requests are counted until their callbacks have run.
     * Not starpu_mpi_wait_for_all: its barrier (StarPU-MPI 1.3.10) hung in
     * 2 to 4 runs in 20 of tests/test_trace at 3 ranks, 2 CPU workers each,
     * eager, on 2 cores, with tracing off and src/comm.c unchanged too (one
     * rank's progression thread never entered the barrier); 0 in 25 since. */
    starpu_task_wait_for_all();
    for (int k = 0; k < 60000 && atomic_load(&tr.comm_pending) > 0; k++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    long pending = atomic_load(&tr.comm_pending);
    if (pending > 0) fprintf(stderr, "starweave: trace: rank %d: %ld request(s) still in flight, not recorded\n", me, pending);

    MPI_Comm comm; /* private: our point-to-point traffic cannot meet StarPU-MPI's */
    SW_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    double offset = clock_offset(comm, me, n);

    /* pack: head, worker names, tasks, requests, marks */
    pthread_mutex_lock(&tr.lock);
    blob_head h = {me, (int32_t)starpu_worker_get_count(), (int64_t)tr.tasks.n, (int64_t)tr.comms.n,
                   (int64_t)tr.marks.n, offset};
    size_t sz = sizeof h + (size_t)h.nworkers * SW_TRACE_NAME + tr.tasks.n * sizeof(task_rec) +
                tr.comms.n * sizeof(comm_rec) + tr.marks.n * sizeof(mark_rec);
    char *blob = calloc(1, sz), *p = blob;
    if (!blob) sw_fail(__FILE__, __LINE__, "calloc(trace blob)", -ENOMEM);
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    for (int w = 0; w < h.nworkers; w++, p += SW_TRACE_NAME) starpu_worker_get_name(w, p, SW_TRACE_NAME);
    for (size_t i = 0; i < tr.tasks.n; i++, p += sizeof(task_rec)) {
        task_rec r = ((task_rec *)tr.tasks.p)[i];
        r.rank = me;
        memcpy(p, &r, sizeof r);
    }
    for (size_t i = 0; i < tr.comms.n; i++, p += sizeof(comm_rec)) {
        comm_rec r = ((comm_rec *)tr.comms.p)[i];
        r.rank = me;
        memcpy(p, &r, sizeof r);
    }
    for (size_t i = 0; i < tr.marks.n; i++, p += sizeof(mark_rec)) {
        mark_rec r = ((mark_rec *)tr.marks.p)[i];
        r.rank = me;
        memcpy(p, &r, sizeof r);
    }
    pthread_mutex_unlock(&tr.lock);

    int *displs;
    char *all = gather_blobs(comm, me, n, blob, sz, &displs);
    SW_CHECK(MPI_Comm_free(&comm));
    free(blob);
    merged_free();
    if (me != 0) return 0;

    /* unpack onto rank 0's clock */
    tr.nranks = n;
    tr.nworkers = calloc((size_t)n, sizeof *tr.nworkers);
    tr.wname_first = calloc((size_t)n, sizeof *tr.wname_first);
    tr.offset_us = calloc((size_t)n, sizeof *tr.offset_us);
    if (!tr.nworkers || !tr.wname_first || !tr.offset_us) sw_fail(__FILE__, __LINE__, "calloc(merged)", -ENOMEM);
    int totw = 0;
    for (int r = 0; r < n; r++) totw += ((blob_head *)(all + displs[r]))->nworkers;
    tr.wnames = calloc((size_t)(totw ? totw : 1), SW_TRACE_NAME);
    if (!tr.wnames) sw_fail(__FILE__, __LINE__, "calloc(worker names)", -ENOMEM);
    double origin = 1e300;
    for (int r = 0, w0 = 0; r < n; r++) {
        const char *q = all + displs[r];
        blob_head bh;
        memcpy(&bh, q, sizeof bh);
        q += sizeof bh;
        tr.nworkers[r] = bh.nworkers;
        tr.wname_first[r] = w0;
        tr.offset_us[r] = bh.offset_us;
        for (int w = 0; w < bh.nworkers; w++, q += SW_TRACE_NAME) {
            memcpy(tr.wnames[w0 + w], q, SW_TRACE_NAME);
            tr.wnames[w0 + w][SW_TRACE_NAME - 1] = 0;
        }
        w0 += bh.nworkers;
        for (int64_t i = 0; i < bh.ntasks; i++, q += sizeof(task_rec)) {
            task_rec *t = vec_push(&tr.mtasks);
            memcpy(t, q, sizeof *t);
            t->start_us += bh.offset_us;
            t->end_us += bh.offset_us;
            if (t->start_us < origin) origin = t->start_us;
        }
        for (int64_t i = 0; i < bh.ncomms; i++, q += sizeof(comm_rec)) {
            comm_rec *c = vec_push(&tr.mcomms);
            memcpy(c, q, sizeof *c);
            c->submit_us += bh.offset_us;
            c->posted_us += bh.offset_us;
            c->done_us += bh.offset_us;
            if (c->posted_us < origin) origin = c->posted_us;
        }
        for (int64_t i = 0; i < bh.nmarks; i++, q += sizeof(mark_rec)) {
            mark_rec *m = vec_push(&tr.mmarks);
            memcpy(m, q, sizeof *m);
            m->t_us += bh.offset_us;
        }
    }
    free(all);
    free(displs);
    /* Step marks are taken at submission and may precede the records (a
     * step is submitted before it runs); they do not set the origin. */
    if (origin > 1e299) origin = 0;
    double end = 0;
    task_rec *t = tr.mtasks.p;
    for (size_t i = 0; i < tr.mtasks.n; i++) {
        t[i].start_us -= origin;
        t[i].end_us -= origin;
        if (t[i].end_us > end) end = t[i].end_us;
    }
    comm_rec *c = tr.mcomms.p;
    for (size_t i = 0; i < tr.mcomms.n; i++) {
        c[i].submit_us -= origin;
        c[i].posted_us -= origin;
        c[i].done_us -= origin;
        if (c[i].done_us > end) end = c[i].done_us;
    }
    mark_rec *m = tr.mmarks.p;
    for (size_t i = 0; i < tr.mmarks.n; i++) m[i].t_us -= origin;
    tr.end_us = end;
    if (tr.mtasks.n) qsort(tr.mtasks.p, tr.mtasks.n, sizeof(task_rec), cmp_task);
    if (tr.mcomms.n) qsort(tr.mcomms.p, tr.mcomms.n, sizeof(comm_rec), cmp_comm);
    assign_lanes();
    return 0;
}

void sw_trace_counts(long *ntasks, long *ncomm, int *nranks)
{
    if (ntasks) *ntasks = (long)tr.mtasks.n;
    if (ncomm) *ncomm = (long)tr.mcomms.n;
    if (nranks) *nranks = tr.nranks;
}

/* ---------------- send/receive matching ---------------- */

typedef struct xfer {
    const comm_rec *send, *recv;
} xfer;

static int cmp_msg_key(const comm_rec *a, const comm_rec *b)
{
    /* (source, destination, group, tag), then posting order (MPI matches
     * messages of one (source, tag, communicator) in order) */
    int as = a->is_send ? a->rank : a->peer, ad = a->is_send ? a->peer : a->rank;
    int bs = b->is_send ? b->rank : b->peer, bd = b->is_send ? b->peer : b->rank;
    if (as != bs) return as < bs ? -1 : 1;
    if (ad != bd) return ad < bd ? -1 : 1;
    int g = strcmp(a->group, b->group);
    if (g) return g;
    if (a->tag != b->tag) return a->tag < b->tag ? -1 : 1;
    return 0;
}

static int cmp_msg(const void *x, const void *y)
{
    const comm_rec *a = *(const comm_rec *const *)x, *b = *(const comm_rec *const *)y;
    int k = cmp_msg_key(a, b);
    if (k) return k;
    return (a->posted_us > b->posted_us) - (a->posted_us < b->posted_us);
}

/* Pairs of (send, receive) among the n records c, ordered by (source,
 * destination, group, tag, send posting); *nx of them. */
static xfer *match_transfers(const comm_rec *c, size_t n, size_t *nx)
{
    size_t ns = 0, nr = 0;
    const comm_rec **s = malloc(sizeof *s * (n + 1)), **r = malloc(sizeof *r * (n + 1));
    xfer *x = malloc(sizeof *x * (n + 1));
    if (!s || !r || !x) sw_fail(__FILE__, __LINE__, "malloc(transfers)", -ENOMEM);
    for (size_t i = 0; i < n; i++) {
        if (c[i].is_send) s[ns++] = &c[i];
        else r[nr++] = &c[i];
    }
    qsort(s, ns, sizeof *s, cmp_msg);
    qsort(r, nr, sizeof *r, cmp_msg);
    size_t i = 0, j = 0, k = 0;
    while (i < ns && j < nr) {
        int d = cmp_msg_key(s[i], r[j]);
        if (d < 0) i++;
        else if (d > 0) j++;
        else x[k++] = (xfer){s[i++], r[j++]};
    }
    free(s);
    free(r);
    *nx = k;
    return x;
}

/* ---------------- Chrome / Perfetto JSON ---------------- */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

/* Microseconds printed from whole nanoseconds, so that one event's end and
 * the next one's start on a track, equal or ordered, stay so in the file. */
static long long ns_of(double us) { return llround(us * 1000.0); }
static void json_us(FILE *f, long long ns)
{
    if (ns < 0) {
        fputc('-', f);
        ns = -ns;
    }
    fprintf(f, "%lld.%03lld", ns / 1000, ns % 1000);
}

static void json_x(FILE *f, const char *name, const char *cat, double start, double end, int pid, int tid)
{
    long long a = ns_of(start), b = ns_of(end);
    if (b < a) b = a;
    fputs(",\n{\"name\":", f);
    json_str(f, name);
    fputs(",\"cat\":", f);
    json_str(f, cat);
    fputs(",\"ph\":\"X\",\"ts\":", f);
    json_us(f, a);
    fputs(",\"dur\":", f);
    json_us(f, b - a);
    fprintf(f, ",\"pid\":%d,\"tid\":%d,\"args\":{", pid, tid);
}

static void json_meta(FILE *f, int *first, const char *what, int pid, int tid, const char *name, int sort)
{
    fprintf(f, "%s\n{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", *first ? "" : ",",
            what, pid, tid);
    json_str(f, name);
    fputs("}}", f);
    fprintf(f, ",\n{\"name\":\"%s_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
            what[0] == 'p' ? "process" : "thread", pid, tid, sort);
    *first = 0;
}

#define SW_TRACE_COMM_TID 100000 /* comm lanes' thread ids: after any worker id */

static int nlanes_of_rank(int rank)
{
    int nl = 0;
    const comm_rec *c = tr.mcomms.p;
    for (size_t i = 0; i < tr.mcomms.n; i++)
        if (c[i].rank == rank && c[i].lane + 1 > nl) nl = c[i].lane + 1;
    return nl;
}

/* greedy lanes for the transfers (sorted by start) */
static int *transfer_lanes(const xfer *x, size_t nx, int *nlanes)
{
    int *lane = malloc(sizeof *lane * (nx + 1));
    double *end = malloc(sizeof *end * (nx + 1));
    if (!lane || !end) sw_fail(__FILE__, __LINE__, "malloc(transfer lanes)", -ENOMEM);
    int nl = 0;
    for (size_t i = 0; i < nx; i++) {
        double a = x[i].send->posted_us, b = x[i].recv->done_us > a ? x[i].recv->done_us : a;
        int l = 0;
        while (l < nl && end[l] > a) l++;
        if (l == nl) nl++;
        end[l] = b;
        lane[i] = l;
    }
    free(end);
    *nlanes = nl;
    return lane;
}

static int cmp_xfer(const void *x, const void *y)
{
    const xfer *a = x, *b = y;
    return (a->send->posted_us > b->send->posted_us) - (a->send->posted_us < b->send->posted_us);
}

int sw_trace_write_json(const char *path)
{
    if (tr.nranks == 0) return 0; /* not rank 0, or not collected */
    FILE *f = fopen(path, "w");
    if (!f) return -errno;
    size_t nx;
    xfer *x = match_transfers(tr.mcomms.p, tr.mcomms.n, &nx);
    if (nx) qsort(x, nx, sizeof *x, cmp_xfer);
    int nxl;
    int *xl = transfer_lanes(x, nx, &nxl);

    fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"starweave sw_trace\"},\"traceEvents\":[", f);
    int first = 1;
    char name[64];
    for (int r = 0; r < tr.nranks; r++) {
        snprintf(name, sizeof name, "rank %d", r);
        json_meta(f, &first, "process_name", r, 0, name, r);
        for (int w = 0; w < tr.nworkers[r]; w++) json_meta(f, &first, "thread_name", r, w, tr.wnames[tr.wname_first[r] + w], w);
        for (int l = 0, nl = nlanes_of_rank(r); l < nl; l++) {
            snprintf(name, sizeof name, "MPI requests %d", l);
            json_meta(f, &first, "thread_name", r, SW_TRACE_COMM_TID + l, name, SW_TRACE_COMM_TID + l);
        }
    }
    const int xpid = tr.nranks;
    if (nx) {
        json_meta(f, &first, "process_name", xpid, 0, "transfers", xpid);
        for (int l = 0; l < nxl; l++) {
            snprintf(name, sizeof name, "transfers %d", l);
            json_meta(f, &first, "thread_name", xpid, l, name, l);
        }
    }
    if (first) fputs("\n{\"name\":\"empty\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{}}", f);

    const task_rec *t = tr.mtasks.p;
    for (size_t i = 0; i < tr.mtasks.n; i++) {
        json_x(f, t[i].name, sw_phase_name((sw_phase)t[i].phase), t[i].start_us, t[i].end_us, t[i].rank, t[i].worker);
        fputs("\"op\":", f);
        json_str(f, t[i].name);
        fprintf(f, ",\"phase\":\"%s\",\"layer\":%d,\"step\":%d,\"bytes\":%.0f,\"flops\":%.0f}}",
                sw_phase_name((sw_phase)t[i].phase), t[i].layer, t[i].step, t[i].bytes, t[i].flops);
    }
    const comm_rec *c = tr.mcomms.p;
    for (size_t i = 0; i < tr.mcomms.n; i++) {
        snprintf(name, sizeof name, "%s %s %d", c[i].coll, c[i].is_send ? "send to" : "recv from", c[i].peer);
        json_x(f, name, "mpi", c[i].posted_us, c[i].done_us, c[i].rank, SW_TRACE_COMM_TID + c[i].lane);
        fputs("\"op\":", f);
        json_str(f, c[i].coll);
        fprintf(f, ",\"dir\":\"%s\",\"peer\":%d,\"chunk\":%d,\"bytes\":%.0f,\"tag\":%lld,\"group\":",
                c[i].is_send ? "send" : "recv", c[i].peer, c[i].chunk, c[i].bytes, (long long)c[i].tag);
        json_str(f, c[i].group);
        fprintf(f, ",\"phase\":\"%s\",\"layer\":%d,\"step\":%d,\"submitted_us\":%.3f}}",
                sw_phase_name((sw_phase)c[i].phase), c[i].layer, c[i].step, c[i].submit_us);
    }
    for (size_t i = 0; i < nx; i++) {
        const comm_rec *s = x[i].send, *q = x[i].recv;
        snprintf(name, sizeof name, "%s %d->%d", s->coll, s->rank, q->rank);
        json_x(f, name, "transfer", s->posted_us, q->done_us, xpid, xl[i]);
        fputs("\"op\":", f);
        json_str(f, s->coll);
        fprintf(f, ",\"src\":%d,\"dst\":%d,\"peer\":%d,\"chunk\":%d,\"bytes\":%.0f,\"tag\":%lld,\"group\":", s->rank,
                q->rank, q->rank, s->chunk, s->bytes, (long long)s->tag);
        json_str(f, s->group);
        fprintf(f, ",\"step\":%d}}", s->step);
    }
    const mark_rec *m = tr.mmarks.p;
    for (size_t i = 0; i < tr.mmarks.n; i++) {
        fprintf(f, ",\n{\"name\":\"step %d\",\"cat\":\"step\",\"ph\":\"i\",\"s\":\"p\",\"ts\":", m[i].step);
        json_us(f, ns_of(m[i].t_us));
        fprintf(f, ",\"pid\":%d,\"tid\":0,\"args\":{\"step\":%d}}", m[i].rank, m[i].step);
    }
    fputs("\n]}\n", f);
    free(x);
    free(xl);
    return fclose(f) == 0 ? 0 : -errno;
}

/* ---------------- Paje ---------------- */

typedef struct pj_ev {
    double t;
    size_t seq;
    char *line;
} pj_ev;

typedef struct pj_buf {
    pj_ev *ev;
    size_t n, cap;
} pj_buf;

static void pj_add(pj_buf *b, double t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void pj_add(pj_buf *b, double t, const char *fmt, ...)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 1024;
        pj_ev *p = realloc(b->ev, sizeof *p * cap);
        if (!p) sw_fail(__FILE__, __LINE__, "realloc(paje)", -ENOMEM);
        b->ev = p;
        b->cap = cap;
    }
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *line = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (!line) sw_fail(__FILE__, __LINE__, "malloc(paje line)", -ENOMEM);
    vsnprintf(line, (size_t)len + 1, fmt, ap2);
    va_end(ap2);
    b->ev[b->n] = (pj_ev){t, b->n, line};
    b->n++;
}

static int cmp_pj(const void *x, const void *y)
{
    const pj_ev *a = x, *b = y;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

/* distinct names -> entity value aliases */
typedef struct pj_vals {
    char (*name)[40];
    size_t n;
} pj_vals;

static size_t pj_val(pj_vals *v, const char *name)
{
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->name[i], name) == 0) return i;
    char(*p)[40] = realloc(v->name, sizeof *p * (v->n + 1));
    if (!p) sw_fail(__FILE__, __LINE__, "realloc(paje values)", -ENOMEM);
    v->name = p;
    copy_name(v->name[v->n], sizeof v->name[v->n], name);
    return v->n++;
}

/* Paje names are quoted strings: keep them free of quotes. */
static void pj_clean(char *s)
{
    for (; *s; s++)
        if (*s == '"' || *s == '\n' || *s == '\\') *s = '_';
}

static const char pj_header[] =
    "%EventDef PajeDefineContainerType 0\n%  Alias string\n%  Type string\n%  Name string\n%EndEventDef\n"
    "%EventDef PajeDefineStateType 1\n%  Alias string\n%  Type string\n%  Name string\n%EndEventDef\n"
    "%EventDef PajeDefineEntityValue 2\n%  Alias string\n%  Type string\n%  Name string\n%  Color color\n%EndEventDef\n"
    "%EventDef PajeDefineLinkType 3\n%  Alias string\n%  Type string\n%  StartContainerType string\n"
    "%  EndContainerType string\n%  Name string\n%EndEventDef\n"
    "%EventDef PajeDefineEventType 4\n%  Alias string\n%  Type string\n%  Name string\n%EndEventDef\n"
    "%EventDef PajeCreateContainer 5\n%  Time date\n%  Alias string\n%  Type string\n%  Container string\n"
    "%  Name string\n%EndEventDef\n"
    "%EventDef PajeDestroyContainer 6\n%  Time date\n%  Type string\n%  Name string\n%EndEventDef\n"
    "%EventDef PajePushState 7\n%  Time date\n%  Type string\n%  Container string\n%  Value string\n%EndEventDef\n"
    "%EventDef PajePopState 8\n%  Time date\n%  Type string\n%  Container string\n%EndEventDef\n"
    "%EventDef PajeStartLink 9\n%  Time date\n%  Type string\n%  Container string\n%  Value string\n"
    "%  StartContainer string\n%  Key string\n%EndEventDef\n"
    "%EventDef PajeEndLink 10\n%  Time date\n%  Type string\n%  Container string\n%  Value string\n"
    "%  EndContainer string\n%  Key string\n%EndEventDef\n"
    "%EventDef PajeNewEvent 11\n%  Time date\n%  Type string\n%  Container string\n%  Value string\n%EndEventDef\n";

static const char *pj_colors[] = {"0.12 0.47 0.71", "1.0 0.5 0.05", "0.17 0.63 0.17", "0.84 0.15 0.16",
                                  "0.58 0.4 0.74", "0.55 0.34 0.29", "0.89 0.47 0.76", "0.5 0.5 0.5",
                                  "0.74 0.74 0.13", "0.09 0.75 0.81"};

int sw_trace_write_paje(const char *path)
{
    if (tr.nranks == 0) return 0;
    FILE *f = fopen(path, "w");
    if (!f) return -errno;
    pj_buf b = {0};
    pj_vals tv = {0}, cv = {0};
    const task_rec *t = tr.mtasks.p;
    const comm_rec *c = tr.mcomms.p;
    /* Times in ms (StarPU's own Paje traces use ms). Containers exist from
     * 0 to the end of the trace; their creation sorts first (time 0, lowest
     * sequence numbers). */
    const double end_ms = tr.end_us / 1000.0;
    pj_add(&b, 0, "5 0.000000 p P 0 \"program\"\n");
    for (int r = 0; r < tr.nranks; r++) {
        pj_add(&b, 0, "5 0.000000 r%d R p \"rank %d\"\n", r, r);
        for (int w = 0; w < tr.nworkers[r]; w++) {
            char wn[SW_TRACE_NAME];
            copy_name(wn, sizeof wn, tr.wnames[tr.wname_first[r] + w]);
            pj_clean(wn);
            pj_add(&b, 0, "5 0.000000 r%dw%d W r%d \"%s\"\n", r, w, r, wn);
        }
        for (int l = 0, nl = nlanes_of_rank(r); l < nl; l++)
            pj_add(&b, 0, "5 0.000000 r%dc%d C r%d \"MPI requests %d\"\n", r, l, r, l);
    }
    for (size_t i = 0; i < tr.mtasks.n; i++) {
        size_t v = pj_val(&tv, t[i].name);
        pj_add(&b, t[i].start_us / 1000.0, "7 %.6f WS r%dw%d t%zu\n", t[i].start_us / 1000.0, t[i].rank, t[i].worker, v);
        pj_add(&b, t[i].end_us / 1000.0, "8 %.6f WS r%dw%d\n", t[i].end_us / 1000.0, t[i].rank, t[i].worker);
    }
    for (size_t i = 0; i < tr.mcomms.n; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "%s %s", c[i].coll, c[i].is_send ? "send" : "recv");
        size_t v = pj_val(&cv, nm);
        double a = c[i].posted_us / 1000.0, z = c[i].done_us / 1000.0;
        pj_add(&b, a, "7 %.6f CS r%dc%d c%zu\n", a, c[i].rank, c[i].lane, v);
        pj_add(&b, z, "8 %.6f CS r%dc%d\n", z, c[i].rank, c[i].lane);
    }
    /* links carry a plain name: ViTE accepts entity values of state types only */
    size_t nx;
    xfer *x = match_transfers(tr.mcomms.p, tr.mcomms.n, &nx);
    for (size_t i = 0; i < nx; i++) {
        const comm_rec *s = x[i].send, *q = x[i].recv;
        double a = s->posted_us / 1000.0, z = q->done_us / 1000.0;
        if (z < a) z = a; /* clock alignment error: a link may not end before it starts */
        pj_add(&b, a, "9 %.6f L p \"message\" r%dc%d k%zu\n", a, s->rank, s->lane, i);
        pj_add(&b, z, "10 %.6f L p \"message\" r%dc%d k%zu\n", z, q->rank, q->lane, i);
    }
    free(x);
    const mark_rec *m = tr.mmarks.p;
    for (size_t i = 0; i < tr.mmarks.n; i++) {
        double a = m[i].t_us / 1000.0 > 0 ? m[i].t_us / 1000.0 : 0; /* a mark may precede the first record */
        pj_add(&b, a, "11 %.6f E r%d \"step %d\"\n", a, m[i].rank, m[i].step);
    }
    /* destruction last: children before parents */
    for (int r = 0; r < tr.nranks; r++) {
        for (int w = 0; w < tr.nworkers[r]; w++) pj_add(&b, end_ms, "6 %.6f W r%dw%d\n", end_ms, r, w);
        for (int l = 0, nl = nlanes_of_rank(r); l < nl; l++) pj_add(&b, end_ms, "6 %.6f C r%dc%d\n", end_ms, r, l);
        pj_add(&b, end_ms, "6 %.6f R r%d\n", end_ms, r);
    }
    pj_add(&b, end_ms, "6 %.6f P p\n", end_ms);
    qsort(b.ev, b.n, sizeof *b.ev, cmp_pj);

    fputs(pj_header, f);
    fputs("0 P 0 \"Program\"\n0 R P \"Rank\"\n0 W R \"Worker\"\n0 C R \"Communication\"\n", f);
    fputs("1 WS W \"Task\"\n1 CS C \"MPI request\"\n3 L P C C \"Transfer\"\n4 E R \"Step\"\n", f);
    for (size_t i = 0; i < tv.n; i++) {
        pj_clean(tv.name[i]);
        fprintf(f, "2 t%zu WS \"%s\" \"%s\"\n", i, tv.name[i], pj_colors[i % (sizeof pj_colors / sizeof *pj_colors)]);
    }
    for (size_t i = 0; i < cv.n; i++) {
        pj_clean(cv.name[i]);
        fprintf(f, "2 c%zu CS \"%s\" \"%s\"\n", i, cv.name[i], strstr(cv.name[i], "send") ? "0.9 0.6 0.1" : "0.2 0.6 0.9");
    }
    for (size_t i = 0; i < b.n; i++) {
        fputs(b.ev[i].line, f);
        free(b.ev[i].line);
    }
    free(b.ev);
    free(tv.name);
    free(cv.name);
    return fclose(f) == 0 ? 0 : -errno;
}

/* ---------------- overlap report ---------------- */

typedef struct ival {
    double a, b;
} ival;

static int cmp_ival(const void *x, const void *y)
{
    const ival *p = x, *q = y;
    return (p->a > q->a) - (p->a < q->a);
}

/* sorts and merges v in place into disjoint intervals; returns the count */
static size_t ival_union(ival *v, size_t n)
{
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, cmp_ival);
    size_t k = 0;
    for (size_t i = 1; i < n; i++) {
        if (v[i].a <= v[k].b) {
            if (v[i].b > v[k].b) v[k].b = v[i].b;
        } else {
            v[++k] = v[i];
        }
    }
    return k + 1;
}

static double ival_len(const ival *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += v[i].b - v[i].a;
    return s;
}

/* measure of the intersection of two disjoint sorted lists */
static double ival_inter(const ival *x, size_t nx, const ival *y, size_t ny)
{
    double s = 0;
    size_t i = 0, j = 0;
    while (i < nx && j < ny) {
        double a = x[i].a > y[j].a ? x[i].a : y[j].a, b = x[i].b < y[j].b ? x[i].b : y[j].b;
        if (b > a) s += b - a;
        if (x[i].b < y[j].b) i++;
        else j++;
    }
    return s;
}

/* one row: rank, and step (or every step with step == -1); cv, mv, av:
 * scratch of one interval per record */
static sw_overlap overlap_row(int rank, int step, ival *cv, ival *mv, ival *av)
{
    sw_overlap o = {.rank = rank, .step = step};
    size_t nc = 0, nm = 0, na = 0;
    double lo = 1e300, hi = -1e300;
    const task_rec *t = tr.mtasks.p;
    for (size_t i = 0; i < tr.mtasks.n; i++) {
        if (t[i].rank != rank || (step != -1 && t[i].step != step)) continue;
        o.ntasks++;
        if (t[i].start_us < lo) lo = t[i].start_us;
        if (t[i].end_us > hi) hi = t[i].end_us;
        ival v = {t[i].start_us, t[i].end_us};
        av[na++] = v;
        /* a collective's own tasks (reductions) are part of its cost, not
         * computation that hides it */
        if (t[i].phase == SW_PHASE_COMM) mv[nm++] = v;
        else if (t[i].phase != SW_PHASE_OFFLOAD) cv[nc++] = v;
    }
    const comm_rec *c = tr.mcomms.p;
    for (size_t i = 0; i < tr.mcomms.n; i++) {
        if (c[i].rank != rank || (step != -1 && c[i].step != step)) continue;
        o.ncomm++;
        if (c[i].posted_us < lo) lo = c[i].posted_us;
        if (c[i].done_us > hi) hi = c[i].done_us;
        mv[nm++] = av[na++] = (ival){c[i].posted_us, c[i].done_us};
    }
    if (o.ntasks + o.ncomm == 0) return o;
    nc = ival_union(cv, nc);
    nm = ival_union(mv, nm);
    na = ival_union(av, na);
    o.wall_us = hi - lo;
    o.compute_us = ival_len(cv, nc);
    o.comm_us = ival_len(mv, nm);
    o.overlap_us = ival_inter(cv, nc, mv, nm);
    o.idle_us = o.wall_us - ival_len(av, na);
    if (o.idle_us < 0) o.idle_us = 0; /* rounding */
    o.overlap_share = o.comm_us > 0 ? o.overlap_us / o.comm_us : 0;
    return o;
}

static int cmp_int(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

int sw_trace_overlap(sw_overlap *out, int max)
{
    if (tr.nranks == 0) return 0;
    size_t nrec = tr.mtasks.n + tr.mcomms.n;
    ival *cv = malloc(sizeof *cv * (nrec + 1)), *mv = malloc(sizeof *mv * (nrec + 1));
    ival *av = malloc(sizeof *av * (nrec + 1));
    int *steps = malloc(sizeof *steps * (nrec + 1));
    if (!cv || !mv || !av || !steps) sw_fail(__FILE__, __LINE__, "malloc(overlap)", -ENOMEM);
    int rows = 0;
    for (int r = 0; r < tr.nranks; r++) {
        /* the steps this rank has records in */
        size_t ns = 0;
        const task_rec *t = tr.mtasks.p;
        const comm_rec *c = tr.mcomms.p;
        for (size_t i = 0; i < tr.mtasks.n; i++)
            if (t[i].rank == r && t[i].step >= 0) steps[ns++] = t[i].step;
        for (size_t i = 0; i < tr.mcomms.n; i++)
            if (c[i].rank == r && c[i].step >= 0) steps[ns++] = c[i].step;
        qsort(steps, ns, sizeof *steps, cmp_int);
        if (rows < max) out[rows] = overlap_row(r, -1, cv, mv, av);
        rows++;
        for (size_t i = 0; i < ns; i++) {
            if (i > 0 && steps[i] == steps[i - 1]) continue;
            if (rows < max) out[rows] = overlap_row(r, steps[i], cv, mv, av);
            rows++;
        }
    }
    free(cv);
    free(mv);
    free(av);
    free(steps);
    return rows;
}

int sw_trace_write_overlap_json(const char *path)
{
    if (tr.nranks == 0) return 0;
    int n = sw_trace_overlap(NULL, 0);
    sw_overlap *o = malloc(sizeof *o * (size_t)(n + 1));
    if (!o) sw_fail(__FILE__, __LINE__, "malloc(overlap rows)", -ENOMEM);
    sw_trace_overlap(o, n);
    FILE *f = fopen(path, "w");
    if (!f) {
        int e = errno;
        free(o);
        return -e;
    }
    fprintf(f, "{\"ranks\":%d,\"units\":\"us\",\"overlap\":[", tr.nranks);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\n{\"rank\":%d,\"step\":%d,\"tasks\":%ld,\"requests\":%ld,\"wall_us\":%.3f,\"compute_us\":%.3f,"
                   "\"comm_us\":%.3f,\"overlap_us\":%.3f,\"idle_us\":%.3f,\"overlap_share\":%.6f}",
                i ? "," : "", o[i].rank, o[i].step, o[i].ntasks, o[i].ncomm, o[i].wall_us, o[i].compute_us,
                o[i].comm_us, o[i].overlap_us, o[i].idle_us, o[i].overlap_share);
    fputs("\n]}\n", f);
    free(o);
    return fclose(f) == 0 ? 0 : -errno;
}

int sw_trace_write(const char *json_path, const char *paje_path, const char *overlap_json_path)
{
    int rc = sw_trace_collect();
    if (rc == 0 && json_path) rc = sw_trace_write_json(json_path);
    if (rc == 0 && paje_path) rc = sw_trace_write_paje(paje_path);
    if (rc == 0 && overlap_json_path) rc = sw_trace_write_overlap_json(overlap_json_path);
    /* every rank returns rank 0's verdict */
    SW_CHECK(MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD));
    return rc;
}

/* ---------------- task graph ---------------- */

void sw_trace_dag_enable(int on) { atomic_store(&tr.dag.on, on != 0); }
int sw_trace_dag_enabled(void) { return atomic_load(&tr.dag.on); }

static void dag_clear(void)
{
    pthread_mutex_lock(&tr.dag.lock);
    tr.dag.nodes.n = tr.dag.edges.n = tr.dag.comms.n = 0;
    for (size_t i = 0; i < tr.dag.cap; i++) vec_free(&tr.dag.data[i].acc);
    free(tr.dag.data);
    tr.dag.data = NULL;
    tr.dag.ndata = tr.dag.cap = 0;
    pthread_mutex_unlock(&tr.dag.lock);
}

static size_t dag_slot(const dag_datum *data, size_t cap, const void *key)
{
    uint64_t h = (uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ull;
    size_t i = (size_t)(h >> 32) & (cap - 1);
    while (data[i].key && data[i].key != key) i = (i + 1) & (cap - 1);
    return i;
}

/* the history of key (created empty); valid until the next call */
static dag_datum *dag_datum_of(const void *key)
{
    if (2 * (tr.dag.ndata + 1) > tr.dag.cap) {
        size_t cap = tr.dag.cap ? 2 * tr.dag.cap : 1024;
        dag_datum *d = calloc(cap, sizeof *d);
        if (!d) sw_fail(__FILE__, __LINE__, "calloc(task graph data)", -ENOMEM);
        for (size_t i = 0; i < tr.dag.cap; i++)
            if (tr.dag.data[i].key) d[dag_slot(d, cap, tr.dag.data[i].key)] = tr.dag.data[i];
        free(tr.dag.data);
        tr.dag.data = d;
        tr.dag.cap = cap;
    }
    dag_datum *d = &tr.dag.data[dag_slot(tr.dag.data, tr.dag.cap, key)];
    if (!d->key) {
        d->key = key;
        d->acc = (vec){.elem = sizeof(dag_acc)};
        tr.dag.ndata++;
    }
    return d;
}

/* user data of the temporaries seen: never written through */
static const char dag_temp_mark;

/* Where h lies: a tensor's block (src/tensor.c), keyed by the tensor; any
 * other handle, a temporary, is the whole of itself. StarPU may give a
 * new temporary the address of one unregistered before: the new one has
 * no user data yet, and its history starts afresh. */
static sw_block dag_block(starpu_data_handle_t h, const void **key)
{
    void *ud = starpu_data_get_user_data(h);
    if (ud && ud != (void *)&dag_temp_mark) {
        const sw_block *b = ud;
        *key = b->t;
        return *b;
    }
    if (!ud) {
        dag_datum_of(h)->acc.n = 0;
        starpu_data_set_user_data(h, (void *)&dag_temp_mark);
    }
    *key = h;
    return (sw_block){NULL, 0, 1, 0, 1};
}

static int32_t dag_begin(int kind, const char *name)
{
    dag_node *n = vec_push(&tr.dag.nodes);
    *n = (dag_node){.kind = kind, .phase = cur.phase, .layer = cur.layer, .step = cur.step, .msg = -1};
    copy_name(n->name, sizeof n->name, name);
    tr.dag.preds.n = 0;
    return (int32_t)(tr.dag.nodes.n - 1);
}

/* StarPU's sequential consistency, by blocks: the access depends on every
 * live access it overlaps of which one writes; a write drops the accesses
 * it covers (what overlaps them later overlaps the write, which depends on
 * them). */
static void dag_access(int32_t node, starpu_data_handle_t h, enum starpu_data_access_mode mode)
{
    int write = (mode & (STARPU_W | STARPU_REDUX)) != 0;
    if (!h || (!write && !(mode & STARPU_R))) return; /* SCRATCH: the task's own buffer */
    const void *key;
    sw_block b = dag_block(h, &key);
    dag_datum *d = dag_datum_of(key);
    dag_acc *a = d->acc.p;
    size_t k = 0;
    for (size_t i = 0; i < d->acc.n; i++) {
        int overlap = a[i].r0 < b.r1 && b.r0 < a[i].r1 && a[i].c0 < b.c1 && b.c0 < a[i].c1;
        if (overlap && (write || a[i].write) && a[i].node != node) *(int32_t *)vec_push(&tr.dag.preds) = a[i].node;
        int covered = write && b.r0 <= a[i].r0 && a[i].r1 <= b.r1 && b.c0 <= a[i].c0 && a[i].c1 <= b.c1;
        if (!covered) a[k++] = a[i];
    }
    d->acc.n = k;
    *(dag_acc *)vec_push(&d->acc) = (dag_acc){b.r0, b.r1, b.c0, b.c1, node, write};
}

static int cmp_i32(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

static void dag_end(int32_t node)
{
    int32_t *p = tr.dag.preds.p;
    size_t n = tr.dag.preds.n;
    if (n) qsort(p, n, sizeof *p, cmp_i32);
    for (size_t i = 0; i < n; i++)
        if (i == 0 || p[i] != p[i - 1]) *(dag_edge *)vec_push(&tr.dag.edges) = (dag_edge){p[i], node};
}

void sw_trace_dag_task(struct starpu_task *t)
{
    if (!atomic_load(&tr.dag.on)) return;
    pthread_mutex_lock(&tr.dag.lock);
    int32_t node = dag_begin(DAG_TASK, t->cl && t->cl->name ? t->cl->name : t->name);
    for (unsigned i = 0; i < STARPU_TASK_GET_NBUFFERS(t); i++)
        dag_access(node, STARPU_TASK_GET_HANDLE(t, i), STARPU_TASK_GET_MODE(t, i));
    dag_end(node);
    pthread_mutex_unlock(&tr.dag.lock);
}

void sw_trace_dag_copy(starpu_data_handle_t dst, starpu_data_handle_t src)
{
    if (!atomic_load(&tr.dag.on)) return;
    pthread_mutex_lock(&tr.dag.lock);
    int32_t node = dag_begin(DAG_COPY, "copy");
    dag_access(node, src, STARPU_R);
    dag_access(node, dst, STARPU_W);
    dag_end(node);
    pthread_mutex_unlock(&tr.dag.lock);
}

void sw_copy_then(starpu_data_handle_t dst, starpu_data_handle_t src, void (*done)(void *), void *arg)
{
    /* refused here rather than inside StarPU's copy: two matrices of one shape and element size */
    if (starpu_data_get_interface_id(dst) == STARPU_MATRIX_INTERFACE_ID &&
        starpu_data_get_interface_id(src) == STARPU_MATRIX_INTERFACE_ID) {
        const unsigned long dr = starpu_matrix_get_ny(dst), dc = starpu_matrix_get_nx(dst);
        const unsigned long sr = starpu_matrix_get_ny(src), sc = starpu_matrix_get_nx(src);
        const size_t de = starpu_matrix_get_elemsize(dst), se = starpu_matrix_get_elemsize(src);
        if (dr != sr || dc != sc || de != se)
            sw_failf(__FILE__, __LINE__, "sw_copy: dst [%lu,%lu] and src [%lu,%lu] differ in shape or element size "
                     "(%zu, %zu bytes)", dr, dc, sr, sc, de, se);
    }
    sw_trace_dag_copy(dst, src);
    SW_CHECK(starpu_data_cpy(dst, src, 1, done, arg));
}

void sw_copy(starpu_data_handle_t dst, starpu_data_handle_t src) { sw_copy_then(dst, src, NULL, NULL); }

/* StarPU-MPI orders a send as a reader of h, a receive as a writer */
static void dag_request(const char *collective, const char *group, int chunk, MPI_Comm comm, int peer, int is_send,
                        int64_t tag, starpu_data_handle_t h)
{
    comm_rec r;
    memset(&r, 0, sizeof r);
    comm_rec_fill(&r, collective, group, chunk, comm, peer, is_send, tag, h);
    pthread_mutex_lock(&tr.dag.lock);
    int32_t node = dag_begin(is_send ? DAG_SEND : DAG_RECV, collective);
    ((dag_node *)tr.dag.nodes.p)[node].msg = (int32_t)tr.dag.comms.n;
    *(comm_rec *)vec_push(&tr.dag.comms) = r;
    dag_access(node, h, is_send ? STARPU_R : STARPU_W);
    dag_end(node);
    pthread_mutex_unlock(&tr.dag.lock);
}

typedef struct dag_head {
    int32_t rank, reduced;
    int64_t nnodes, nedges, ncomms;
} dag_head;

#define SW_DAG_REDUCE_BYTES ((size_t)64 << 20) /* ancestor bitsets: up to 23170 nodes */

/* This rank's graph as drawn: copies contracted (their predecessors become
 * their successors'), nodes renumbered, edges implied by others dropped;
 * packed as head, nodes, edges, request records. Holds the lock. */
static char *dag_pack(int me, size_t *size)
{
    const size_t N = tr.dag.nodes.n, E = tr.dag.edges.n;
    const dag_node *nd = tr.dag.nodes.p;
    const dag_edge *ed = tr.dag.edges.p;
    /* predecessors among the drawn nodes: cp[cs[v] .. cs[v+1]) */
    size_t *cs = malloc(sizeof *cs * (N + 1));
    int32_t *id = malloc(sizeof *id * (N + 1));
    if (!cs || !id) sw_fail(__FILE__, __LINE__, "malloc(task graph)", -ENOMEM);
    vec cp = {.elem = sizeof(int32_t)};
    int32_t nv = 0;
    for (size_t v = 0, e = 0; v < N; v++) {
        cs[v] = cp.n;
        for (; e < E && (size_t)ed[e].to == v; e++) {
            size_t p = (size_t)ed[e].from;
            if (nd[p].kind != DAG_COPY) *(int32_t *)vec_push(&cp) = (int32_t)p;
            else
                for (size_t q = cs[p]; q < cs[p + 1]; q++) *(int32_t *)vec_push(&cp) = ((int32_t *)cp.p)[q];
        }
        size_t n = cp.n - cs[v], k = 0;
        int32_t *seg = n ? (int32_t *)cp.p + cs[v] : NULL;
        if (n) qsort(seg, n, sizeof *seg, cmp_i32);
        for (size_t i = 0; i < n; i++)
            if (i == 0 || seg[i] != seg[k - 1]) seg[k++] = seg[i];
        cp.n = cs[v] + k;
        cs[v + 1] = cp.n;
        id[v] = nd[v].kind == DAG_COPY ? -1 : nv++;
    }
    /* transitive reduction: with the predecessors in decreasing order, one
     * is implied when it is an ancestor of a later one; anc: the ancestors
     * of each drawn node, one bit per node */
    const size_t W = ((size_t)nv + 63) / 64;
    int reduce = (size_t)nv * W * 8 <= SW_DAG_REDUCE_BYTES;
    uint64_t *anc = reduce ? calloc((size_t)nv * W + 1, sizeof *anc) : NULL;
    if (reduce && !anc) sw_fail(__FILE__, __LINE__, "calloc(task graph ancestors)", -ENOMEM);
    vec out = {.elem = sizeof(dag_edge)};
    for (size_t v = 0; v < N; v++) {
        if (id[v] < 0) continue;
        size_t n = cs[v + 1] - cs[v];
        const int32_t *seg = n ? (int32_t *)cp.p + cs[v] : NULL;
        uint64_t *row = reduce ? anc + (size_t)id[v] * W : NULL;
        for (size_t i = n; i-- > 0;) {
            int32_t p = id[seg[i]];
            if (reduce) {
                if (row[p / 64] >> (p % 64) & 1) continue;
                const uint64_t *pr = anc + (size_t)p * W;
                for (size_t w = 0; w < W; w++) row[w] |= pr[w];
                row[p / 64] |= (uint64_t)1 << (p % 64);
            }
            *(dag_edge *)vec_push(&out) = (dag_edge){p, id[v]};
        }
    }
    free(anc);
    vec_free(&cp);
    free(cs);

    dag_head h = {me, reduce, nv, (int64_t)out.n, (int64_t)tr.dag.comms.n};
    *size = sizeof h + (size_t)nv * sizeof(dag_node) + out.n * sizeof(dag_edge) + tr.dag.comms.n * sizeof(comm_rec);
    char *blob = malloc(*size), *p = blob;
    if (!blob) sw_fail(__FILE__, __LINE__, "malloc(task graph blob)", -ENOMEM);
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    comm_rec *cr = tr.dag.comms.p;
    for (size_t v = 0; v < N; v++) {
        if (id[v] < 0) continue;
        dag_node x = nd[v];
        x.rank = me;
        if (x.msg >= 0) { /* the matching of sends with receives orders by posted_us */
            cr[x.msg].rank = me;
            cr[x.msg].posted_us = id[v];
        }
        memcpy(p, &x, sizeof x);
        p += sizeof x;
    }
    if (out.n) memcpy(p, out.p, out.n * sizeof(dag_edge));
    p += out.n * sizeof(dag_edge);
    if (tr.dag.comms.n) memcpy(p, cr, tr.dag.comms.n * sizeof(comm_rec));
    vec_free(&out);
    free(id);
    return blob;
}

/* bench/plot_trace.py's PHASE_COLORS, by sw_phase */
static const char *dag_colors[SW_PHASE_COUNT] = {"#b0b0b0", "#3b75af", "#d1495b", "#66a61e",
                                                 "#8e6c8a", "#7f7f7f", "#f0a202"};

static int dag_dot(const char *path, const char *all, const int *displs, int nranks)
{
    FILE *f = fopen(path, "w");
    if (!f) return -errno;
    long *cnt = tr.dag.counts;
    memset(tr.dag.counts, 0, sizeof tr.dag.counts);
    vec comms = {.elem = sizeof(comm_rec)};
    int lo = -1, hi = -1, reduced = 1;
    fputs("digraph starweave {\n"
          "// starweave task graph (sw_trace_dag_write): a cluster per rank; node r<rank>_<i> is the rank's i-th\n"
          "// submission (boxes: tasks, ellipses: MPI requests), filled by phase; solid edges: StarPU's implicit\n"
          "// data dependencies, dashed: a message, from its send to its matching receive\n"
          "node [style=filled, fontname=\"Helvetica\", fontsize=10];\n",
          f);
    for (int r = 0; r < nranks; r++) {
        const char *q = all + displs[r];
        dag_head h;
        memcpy(&h, q, sizeof h);
        q += sizeof h;
        long ntasks = 0;
        fprintf(f, "subgraph cluster_r%d {\nlabel=\"rank %d\";\n", r, r);
        for (int64_t i = 0; i < h.nnodes; i++, q += sizeof(dag_node)) {
            dag_node n;
            memcpy(&n, q, sizeof n);
            pj_clean(n.name);
            if (n.step >= 0 && (lo < 0 || n.step < lo)) lo = n.step;
            if (n.step > hi) hi = n.step;
            char layer[16] = "";
            if (n.layer >= 0) snprintf(layer, sizeof layer, "\\nL%d", n.layer);
            sw_phase ph = (unsigned)n.phase < SW_PHASE_COUNT ? (sw_phase)n.phase : SW_PHASE_NONE;
            if (n.kind == DAG_TASK) {
                ntasks++;
                fprintf(f, "r%d_%lld [label=\"%s%s\", shape=box, fillcolor=\"%s\", tooltip=\"%s (%s, layer %d, step %d)\"];\n",
                        r, (long long)i, n.name, layer, dag_colors[ph], n.name, sw_phase_name(ph), n.layer, n.step);
            } else {
                const char *dir = n.kind == DAG_SEND ? "send to" : "recv from";
                const comm_rec *c = (const comm_rec *)(all + displs[r] + sizeof h + h.nnodes * sizeof(dag_node) +
                                                       h.nedges * sizeof(dag_edge)) + n.msg;
                comm_rec cr;
                memcpy(&cr, c, sizeof cr);
                fprintf(f, "r%d_%lld [label=\"%s\\n%s %d%s\", shape=ellipse, fillcolor=\"%s\", "
                        "tooltip=\"%s %s %d, %s, tag %lld (%s, layer %d, step %d)\"];\n",
                        r, (long long)i, n.name, dir, cr.peer, layer, dag_colors[SW_PHASE_COMM], n.name, dir, cr.peer,
                        cr.group, (long long)cr.tag, sw_phase_name(ph), n.layer, n.step);
            }
        }
        fprintf(f, "}\n// rank %d: %ld tasks, %lld requests, %lld edges\n", r, ntasks, (long long)(h.nnodes - ntasks),
                (long long)h.nedges);
        cnt[0] += ntasks;
        cnt[1] += (long)(h.nnodes - ntasks);
        cnt[2] += (long)h.nedges;
        reduced &= h.reduced;
        for (int64_t i = 0; i < h.nedges; i++, q += sizeof(dag_edge)) {
            dag_edge e;
            memcpy(&e, q, sizeof e);
            fprintf(f, "r%d_%d -> r%d_%d;\n", r, e.from, r, e.to);
        }
        for (int64_t i = 0; i < h.ncomms; i++, q += sizeof(comm_rec)) memcpy(vec_push(&comms), q, sizeof(comm_rec));
    }
    size_t nx;
    xfer *x = match_transfers(comms.p, comms.n, &nx);
    for (size_t i = 0; i < nx; i++)
        fprintf(f, "r%d_%.0f -> r%d_%.0f [style=dashed, color=\"%s\"];\n", x[i].send->rank, x[i].send->posted_us,
                x[i].recv->rank, x[i].recv->posted_us, dag_colors[SW_PHASE_COMM]);
    cnt[3] = (long)nx;
    char steps[32];
    if (hi > lo) snprintf(steps, sizeof steps, "steps %d..%d", lo, hi);
    else snprintf(steps, sizeof steps, "step %d", lo);
    fprintf(f, "label=\"starweave task graph, %s: %ld tasks, %ld requests, %ld edges, %zu messages%s\";\n", steps,
            cnt[0], cnt[1], cnt[2], nx, reduced ? "" : " (edges implied by others kept)");
    fprintf(f, "// edges implied by others %s\n}\n", reduced ? "left out" : "kept: too many nodes to reduce");
    free(x);
    vec_free(&comms);
    return fclose(f) == 0 ? 0 : -errno;
}

int sw_trace_dag_write(const char *dot_path)
{
    int me, n;
    SW_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &me));
    SW_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &n));
    size_t sz;
    pthread_mutex_lock(&tr.dag.lock);
    char *blob = dag_pack(me, &sz);
    pthread_mutex_unlock(&tr.dag.lock);
    MPI_Comm comm; /* private, as in sw_trace_collect */
    SW_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    int *displs;
    char *all = gather_blobs(comm, me, n, blob, sz, &displs);
    SW_CHECK(MPI_Comm_free(&comm));
    free(blob);
    int rc = me == 0 ? dag_dot(dot_path, all, displs, n) : 0;
    free(all);
    free(displs);
    SW_CHECK(MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD));
    return rc;
}

void sw_trace_dag_counts(long *ntasks, long *nrequests, long *nedges, long *nmessages)
{
    if (ntasks) *ntasks = tr.dag.counts[0];
    if (nrequests) *nrequests = tr.dag.counts[1];
    if (nedges) *nedges = tr.dag.counts[2];
    if (nmessages) *nmessages = tr.dag.counts[3];
}
