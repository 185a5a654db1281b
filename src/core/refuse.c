/* Errors and refusals: sw_fail (a StarPU or MPI call failed), and
 * sw_usage_error / sw_failf (a rule broken): one message, exit 2 on every
 * rank wherever the rule was seen, no hang (below). */
#include "config.h"

#include "runtime_internal.h"
#include "starweave/runtime.h"
#include "starweave/trace.h"
#include "p2p.h"
#include "sim_smpi.h"

#include <dirent.h>
#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <starpu_mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void abort_all(int status) __attribute__((noreturn));
static void abort_all(int status)
{
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited && !finalized && sw_rt.size > 1) MPI_Abort(MPI_COMM_WORLD, status);
    exit(status);
}

void sw_fail(const char *file, int line, const char *call, long code)
{
    fprintf(stderr, "starweave: rank %d: %s:%d: %s failed with code %ld%s%s\n", sw_rt.rank, file,
            line, call, code, code < 0 ? ": " : "", code < 0 ? strerror((int)-code) : "");
    fflush(stderr);
    abort_all(1);
}

/* ---- refusals: one message, exit 2 on every rank, wherever detected ----
 *
 * A rule checked on every rank (a configuration, a layer's arguments under
 * data parallelism) is broken on every rank at about the same moment; a
 * rule only some ranks can see (one pipeline stage's parameters, one data-parallel
 * rank's tokens) is broken on those alone while the others wait for them
 * in a collective. A refusal cannot tell which from where it stands, so it
 * asks: the refusing rank tells every other rank, on a communicator of its
 * own, and waits for theirs (SW_REFUSE_WAIT_S at most; never a barrier).
 *   - every rank refused: rank 0 has printed the message; the ranks shut
 *     down together (StarPU-MPI's barrier, MPI_Finalize: each rank exits 2
 *     on its own, as a launcher or a wrapper sees it);
 *   - some did not: the lowest refusing rank prints and sends "end" to
 *     every rank; each rank's watcher thread (which polls the communicator
 *     every SW_REFUSE_POLL_MS) ends its process with exit 2 -- also the one
 *     waiting in a receive from a stage that will never send.
 * Nothing StarPU prints at shutdown (the handles a refused model leaves
 * registered) follows the message. Without MPI_THREAD_MULTIPLE (no
 * watcher thread) the refusing rank prints and MPI_Abort(2)s. */
#define SW_REFUSE_WAIT_S 2.0
#define SW_REFUSE_POLL_MS 20
enum { REFUSE_TAG_REFUSING = 1, REFUSE_TAG_END = 2 };
static struct {
    MPI_Comm comm; /* MPI_COMM_NULL: no watcher */
    pthread_t watcher;
    volatile int watching;
    volatile int refusing; /* this rank is in the refusal path */
    int heard;             /* ranks whose refusal notice arrived */
    int lowest;            /* the lowest of them (size: none) */
    pthread_mutex_t lock;
} rf = {.comm = MPI_COMM_NULL, .lock = PTHREAD_MUTEX_INITIALIZER};

/* StarPU's own warnings at shutdown (handles still registered): a refused
 * model leaves its tensors registered, and the warning would bury the
 * rule. _starpu_silent is StarPU's switch (STARPU_SILENT, read at init);
 * weak, so that a StarPU without it only costs the warning. */
extern int _starpu_silent __attribute__((weak));

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* the out-of-core directory, its files included (a process that ends
 * without StarPU's shutdown leaves them) */
static void remove_offload_dir(void)
{
    if (sw_rt.offload_node <= STARPU_MAIN_RAM || !sw_rt.offload_dir[0]) return;
    DIR *d = opendir(sw_rt.offload_dir);
    if (d) {
        struct dirent *e;
        char path[sizeof sw_rt.offload_dir + 256];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                snprintf(path, sizeof path, "%s/%s", sw_rt.offload_dir, e->d_name);
                unlink(path);
            }
        closedir(d);
    }
    rmdir(sw_rt.offload_dir);
}

/* ends this process with exit 2 now: what it printed is flushed; no
 * destructor runs (StarPU's workers may still be running tasks) */
static void end_now(void) __attribute__((noreturn));
static void end_now(void)
{
    fflush(stdout);
    fflush(stderr);
    remove_offload_dir();
    _exit(2);
}

/* the clean end of a refusal (sw_shutdown) waits for the tasks submitted
 * so far; ranks that refused at different points of their graphs (a
 * receive submitted whose send never was) would wait forever: after
 * SW_REFUSE_SHUTDOWN_S the process ends anyway, with the same exit 2 */
#define SW_REFUSE_SHUTDOWN_S 10
static void *shutdown_watchdog(void *arg)
{
    (void)arg;
    sleep_ms(SW_REFUSE_SHUTDOWN_S * 1000L);
    end_now();
}

static void clean_end(void) __attribute__((noreturn));
static void clean_end(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, shutdown_watchdog, NULL) == 0) pthread_detach(t);
    if (&_starpu_silent) _starpu_silent = 1;
    sw_shutdown();
    exit(2);
}

static void *refuse_watch(void *arg)
{
    (void)arg;
    int buf = 0;
    MPI_Request req;
    MPI_Status st;
    double first = 0;
    MPI_Irecv(&buf, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, rf.comm, &req);
    while (rf.watching) {
        int done = 0;
        MPI_Test(&req, &done, &st);
        if (done) {
            if (st.MPI_TAG == REFUSE_TAG_END) end_now(); /* the refusing rank printed the rule */
            pthread_mutex_lock(&rf.lock);
            rf.heard++;
            if (st.MPI_SOURCE < rf.lowest) rf.lowest = st.MPI_SOURCE;
            pthread_mutex_unlock(&rf.lock);
            if (first == 0) first = now_s();
            MPI_Irecv(&buf, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, rf.comm, &req);
            continue;
        }
        /* another rank refused, this one did not: the refusing rank ends
         * it; should its "end" never come, the job ends anyway */
        if (first > 0 && !rf.refusing && now_s() - first > 4 * SW_REFUSE_WAIT_S) end_now();
        sleep_ms(SW_REFUSE_POLL_MS);
    }
    MPI_Cancel(&req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    return NULL;
}

void sw_refuse_watch_start(int thread_level)
{
    /* simulated: SMPI knows only its actors, a thread of ours may not call
     * MPI (a refusal then MPI_Aborts, which ends the simulation) */
    if (sw_rt.size < 2 || thread_level < MPI_THREAD_MULTIPLE || sw_simulated()) return;
    SW_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &rf.comm));
    rf.heard = 0;
    rf.lowest = sw_rt.size;
    rf.watching = 1;
    if (pthread_create(&rf.watcher, NULL, refuse_watch, NULL) != 0) {
        rf.watching = 0;
        MPI_Comm_free(&rf.comm);
        rf.comm = MPI_COMM_NULL;
    }
}

void sw_refuse_watch_stop(void)
{
    if (rf.comm == MPI_COMM_NULL) return;
    rf.watching = 0;
    pthread_join(rf.watcher, NULL);
    MPI_Comm_free(&rf.comm);
    rf.comm = MPI_COMM_NULL;
}

static void print_refusal(const char *msg)
{
    fprintf(stderr, "starweave: error: %s\n", msg);
    fflush(stderr);
}

/* the refusal path of sw_usage_error and sw_failf: msg printed once, exit 2
 * on every rank */
static void refuse(const char *msg) __attribute__((noreturn));
static void refuse(const char *msg)
{
    static int entered;
    if (__atomic_exchange_n(&entered, 1, __ATOMIC_SEQ_CST)) /* another thread of this rank refuses: it ends us */
        for (;;) sleep_ms(1000);
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    if (inited) MPI_Finalized(&finalized);
    const int mpi = sw_rt.started && inited && !finalized;
    if (!mpi || sw_rt.size == 1) {
        /* one rank, or before sw_init (where every rank checks the same
         * arguments: rank 0 speaks for all) */
        if ((sw_rt.started ? sw_rt.rank : sw_env_int("OMPI_COMM_WORLD_RANK", 0)) == 0) print_refusal(msg);
        if (sw_rt.started && starpu_worker_get_id() < 0) clean_end();
        if (sw_rt.started) end_now();
        exit(2);
    }
    const int rank = sw_rt.rank, size = sw_rt.size;
    if (rf.comm == MPI_COMM_NULL) { /* no watcher thread: rank 0 speaks at once, another rank after a wait */
        if (rank != 0) sleep_ms((long)(SW_REFUSE_WAIT_S * 1000));
        print_refusal(msg);
        MPI_Abort(MPI_COMM_WORLD, 2);
        end_now();
    }
    rf.refusing = 1;
    MPI_Request *req = calloc((size_t)size, sizeof *req);
    for (int r = 0; req && r < size; r++)
        if (r == rank) req[r] = MPI_REQUEST_NULL;
        else MPI_Isend(&sw_rt.rank, 1, MPI_INT, r, REFUSE_TAG_REFUSING, rf.comm, &req[r]);
    if (rank == 0) print_refusal(msg);
    const double t0 = now_s();
    int heard = 0, lowest = size;
    for (;;) {
        pthread_mutex_lock(&rf.lock);
        heard = rf.heard, lowest = rf.lowest;
        pthread_mutex_unlock(&rf.lock);
        if (heard == size - 1 || now_s() - t0 > SW_REFUSE_WAIT_S) break;
        sleep_ms(5);
    }
    if (req) {
        int done = 0;
        for (int k = 0; k < 200 && !done; k++) { /* sends to ranks that refused are received; the others' may wait */
            MPI_Testall(size, req, &done, MPI_STATUSES_IGNORE);
            if (!done) sleep_ms(5);
        }
    }
    if (heard == size - 1 && starpu_worker_get_id() < 0) { /* every rank refused: shut down together */
        sw_refuse_watch_stop();
        clean_end();
    }
    /* some ranks did not refuse: the lowest refusing rank speaks and ends
     * every rank; a higher one waits for it to (and ends all if it does not) */
    if (lowest < rank) sleep_ms((long)(2 * SW_REFUSE_WAIT_S * 1000));
    if (rank != 0) print_refusal(msg);
    for (int r = 0; req && r < size; r++)
        if (r == rank) req[r] = MPI_REQUEST_NULL;
        else MPI_Isend(&sw_rt.rank, 1, MPI_INT, r, REFUSE_TAG_END, rf.comm, &req[r]);
    int done = 0;
    for (int k = 0; req && k < 100 && !done; k++) { /* delivered before this process ends */
        MPI_Testall(size, req, &done, MPI_STATUSES_IGNORE);
        if (!done) sleep_ms(5);
    }
    end_now();
}

static void vrefuse(const char *fmt, va_list ap) __attribute__((noreturn));
static void vrefuse(const char *fmt, va_list ap)
{
    char msg[4096];
    vsnprintf(msg, sizeof msg, fmt, ap);
    refuse(msg);
}

void sw_failf(const char *file, int line, const char *fmt, ...)
{
    (void)file, (void)line; /* the message names the call and its arguments */
    va_list ap;
    va_start(ap, fmt);
    vrefuse(fmt, ap);
}

void sw_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vrefuse(fmt, ap);
}
