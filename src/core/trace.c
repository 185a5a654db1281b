/* sw_trace: records from StarPU's profiling info and StarPU-MPI request
 * callbacks, merged on rank 0 (see trace.h); written out by trace_write.c
 * (Chrome JSON, Paje, overlap report) and trace_dag.c (the task graph).
 *
 * The recorder is a singleton like the runtime: callbacks arrive on worker
 * threads and on StarPU-MPI's progression thread, so appends take a lock;
 * the labels are per submitting thread. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "starweave/tensor.h"
#include "runtime_internal.h"
#include "trace_internal.h"

static struct {
    atomic_int on;
    pthread_mutex_t lock;
    vec tasks, comms, marks;   /* this rank's records (local clock) */
    atomic_long comm_pending;  /* requests begun whose record is not appended yet */
} tr = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .tasks = {.elem = sizeof(task_rec)}, .comms = {.elem = sizeof(comm_rec)}, .marks = {.elem = sizeof(mark_rec)},
};

sw_trace_merged sw_trace_m = {
    .mtasks = {.elem = sizeof(task_rec)}, .mcomms = {.elem = sizeof(comm_rec)}, .mmarks = {.elem = sizeof(mark_rec)},
};

static _Thread_local sw_trace_ctx cur = {SW_PHASE_NONE, -1, -1};

static const char *phase_names[SW_PHASE_COUNT] = {"none", "forward", "backward", "optimizer",
                                                  "recompute", "offload", "comm"};

const char *sw_phase_name(sw_phase p) { return (unsigned)p < SW_PHASE_COUNT ? phase_names[p] : "?"; }

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
    vec_free(&sw_trace_m.mtasks);
    vec_free(&sw_trace_m.mcomms);
    vec_free(&sw_trace_m.mmarks);
    free(sw_trace_m.nworkers);
    free(sw_trace_m.wnames);
    free(sw_trace_m.wname_first);
    free(sw_trace_m.offset_us);
    sw_trace_m.nworkers = NULL;
    sw_trace_m.wnames = NULL;
    sw_trace_m.wname_first = NULL;
    sw_trace_m.offset_us = NULL;
    sw_trace_m.nranks = 0;
    sw_trace_m.end_us = 0;
}


void sw_trace_reset(void)
{
    pthread_mutex_lock(&tr.lock);
    tr.tasks.n = tr.comms.n = tr.marks.n = 0;
    pthread_mutex_unlock(&tr.lock);
    merged_free();
    sw_trace_dag_clear();
}

void sw_trace_set_phase(sw_phase phase, int layer)
{
    cur.phase = phase;
    cur.layer = layer;
}

void sw_trace_mark_step(int step)
{
    sw_calibration_step();
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
    r.prio = t->priority;
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
void sw_trace_comm_rec_fill(comm_rec *r, const char *collective, const char *group, int chunk, MPI_Comm comm, int peer,
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


void *sw_trace_comm_begin(const char *collective, const char *group, int chunk, MPI_Comm comm, int peer,
                          int is_send, int64_t tag, starpu_data_handle_t h)
{
    if (sw_trace_dag_enabled()) sw_trace_dag_request(collective, group, chunk, comm, peer, is_send, tag, h);
    if (!atomic_load(&tr.on)) return NULL;
    struct comm_arg *a = calloc(1, sizeof *a);
    if (!a) sw_fail(__FILE__, __LINE__, "calloc(trace request)", -ENOMEM);
    comm_rec *r = &a->rec;
    r->submit_us = starpu_timing_now();
    r->posted_us = -1;
    sw_trace_comm_rec_fill(r, collective, group, chunk, comm, peer, is_send, tag, h);
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
    comm_rec *c = sw_trace_m.mcomms.p;
    size_t i = 0;
    double *lane_end = NULL;
    size_t nl = 0;
    while (i < sw_trace_m.mcomms.n) {
        int rank = c[i].rank;
        nl = 0;
        for (; i < sw_trace_m.mcomms.n && c[i].rank == rank; i++) {
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
char *sw_trace_gather_blobs(MPI_Comm comm, int me, int n, const char *blob, size_t sz, int **displs_out)
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
     * eager, on 2 cores, with tracing off and src/comm/comm.c unchanged too (one
     * rank's progression thread never entered the barrier); 0 in 25 since. */
    starpu_task_wait_for_all();
    for (int k = 0; k < 60000 && atomic_load(&tr.comm_pending) > 0; k++) {
#ifdef STARPU_SIMGRID
        /* simulated: a sleep on the simulated clock, which lets the other
         * actors (StarPU-MPI's, whose callbacks end the requests) run; a
         * real nanosleep stopped the whole simulation in one process for
         * the 60 s of this loop, rank after rank (a 64-rank run slept up to
         * an hour here, docs/simulation.md "Where the wall time goes") */
        starpu_usleep(1000);
#else
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
#endif
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
    char *all = sw_trace_gather_blobs(comm, me, n, blob, sz, &displs);
    SW_CHECK(MPI_Comm_free(&comm));
    free(blob);
    merged_free();
    if (me != 0) return 0;

    /* unpack onto rank 0's clock */
    sw_trace_m.nranks = n;
    sw_trace_m.nworkers = calloc((size_t)n, sizeof *sw_trace_m.nworkers);
    sw_trace_m.wname_first = calloc((size_t)n, sizeof *sw_trace_m.wname_first);
    sw_trace_m.offset_us = calloc((size_t)n, sizeof *sw_trace_m.offset_us);
    if (!sw_trace_m.nworkers || !sw_trace_m.wname_first || !sw_trace_m.offset_us) sw_fail(__FILE__, __LINE__, "calloc(merged)", -ENOMEM);
    int totw = 0;
    for (int r = 0; r < n; r++) totw += ((blob_head *)(all + displs[r]))->nworkers;
    sw_trace_m.wnames = calloc((size_t)(totw ? totw : 1), SW_TRACE_NAME);
    if (!sw_trace_m.wnames) sw_fail(__FILE__, __LINE__, "calloc(worker names)", -ENOMEM);
    double origin = 1e300;
    for (int r = 0, w0 = 0; r < n; r++) {
        const char *q = all + displs[r];
        blob_head bh;
        memcpy(&bh, q, sizeof bh);
        q += sizeof bh;
        sw_trace_m.nworkers[r] = bh.nworkers;
        sw_trace_m.wname_first[r] = w0;
        sw_trace_m.offset_us[r] = bh.offset_us;
        for (int w = 0; w < bh.nworkers; w++, q += SW_TRACE_NAME) {
            memcpy(sw_trace_m.wnames[w0 + w], q, SW_TRACE_NAME);
            sw_trace_m.wnames[w0 + w][SW_TRACE_NAME - 1] = 0;
        }
        w0 += bh.nworkers;
        for (int64_t i = 0; i < bh.ntasks; i++, q += sizeof(task_rec)) {
            task_rec *t = vec_push(&sw_trace_m.mtasks);
            memcpy(t, q, sizeof *t);
            t->start_us += bh.offset_us;
            t->end_us += bh.offset_us;
            if (t->start_us < origin) origin = t->start_us;
        }
        for (int64_t i = 0; i < bh.ncomms; i++, q += sizeof(comm_rec)) {
            comm_rec *c = vec_push(&sw_trace_m.mcomms);
            memcpy(c, q, sizeof *c);
            c->submit_us += bh.offset_us;
            c->posted_us += bh.offset_us;
            c->done_us += bh.offset_us;
            if (c->posted_us < origin) origin = c->posted_us;
        }
        for (int64_t i = 0; i < bh.nmarks; i++, q += sizeof(mark_rec)) {
            mark_rec *m = vec_push(&sw_trace_m.mmarks);
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
    task_rec *t = sw_trace_m.mtasks.p;
    for (size_t i = 0; i < sw_trace_m.mtasks.n; i++) {
        t[i].start_us -= origin;
        t[i].end_us -= origin;
        if (t[i].end_us > end) end = t[i].end_us;
    }
    comm_rec *c = sw_trace_m.mcomms.p;
    for (size_t i = 0; i < sw_trace_m.mcomms.n; i++) {
        c[i].submit_us -= origin;
        c[i].posted_us -= origin;
        c[i].done_us -= origin;
        if (c[i].done_us > end) end = c[i].done_us;
    }
    mark_rec *m = sw_trace_m.mmarks.p;
    for (size_t i = 0; i < sw_trace_m.mmarks.n; i++) m[i].t_us -= origin;
    sw_trace_m.end_us = end;
    if (sw_trace_m.mtasks.n) qsort(sw_trace_m.mtasks.p, sw_trace_m.mtasks.n, sizeof(task_rec), cmp_task);
    if (sw_trace_m.mcomms.n) qsort(sw_trace_m.mcomms.p, sw_trace_m.mcomms.n, sizeof(comm_rec), cmp_comm);
    assign_lanes();
    return 0;
}

void sw_trace_counts(long *ntasks, long *ncomm, int *nranks)
{
    if (ntasks) *ntasks = (long)sw_trace_m.mtasks.n;
    if (ncomm) *ncomm = (long)sw_trace_m.mcomms.n;
    if (nranks) *nranks = sw_trace_m.nranks;
}

/* ---------------- send/receive matching ---------------- */

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

xfer *sw_trace_match_transfers(const comm_rec *c, size_t n, size_t *nx)
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
