/* Overlap of communication and compute through the task graph alone
 * (issue: mesh and collectives). On every rank: a chain of GEMM tasks
 * (each reads and updates the same C, so they run one after the other) and
 * an all-reduce of an independent tensor. Nothing orders the two but
 * StarPU. Two assertions:
 *
 * 1. Structure (holds on any machine, asserted everywhere): one round of
 *    both submitted together is traced (sw_trace: every task's start and
 *    end, every StarPU-MPI request of the all-reduce posted and completed),
 *    and on every rank the two ran interleaved, not one after the other:
 *    the all-reduce's first request was posted before the chain's last
 *    GEMM started, and the chain's first GEMM started before the
 *    all-reduce's last task (gate or reduction) ended -- not its last
 *    request: starpu_task_wait_for_all does not wait for detached requests,
 *    so that one completes after the chain even when serialised. A dependency between the two
 *    (or a wait between their submissions) makes one of the two false.
 *    The trace must hold every GEMM of the chain and at least one request
 *    per rank.
 *
 * 2. Time: timed three ways, interleaved, best of N rounds, slowest rank:
 *    the chain alone, the all-reduce alone, and both submitted together;
 *    together should take clearly less than one after the other.
 *    Communication between ranks of one node is CPU work: the receiving
 *    rank's StarPU-MPI thread copies the data (Open MPI's shared-memory
 *    transport), the reductions are tasks, and StarPU-MPI's progression
 *    loop polls without sleeping while a request is pending. A gain in time
 *    therefore needs a core for that besides the computing worker: with
 *    fewer than 2 cores per rank the times are printed with a "NOT ASSERTED"
 *    line giving the reason, and the test passes on the structure alone.
 *    (Measured on a 2-core VM, 2 ranks: one after the other the two ranks'
 *    copies run on both cores at once; together they share one core with
 *    nothing to gain -- together took 97-105 % of serial whatever the
 *    binding, idle policy or compute placement.) Where it is asserted the
 *    bound is deliberately loose (together < 0.95 x the sum, best of
 *    rounds) so it cannot flake on a noisy shared VM.
 *
 * The all-reduce's result (of the traced round) is checked against
 * MPI_Allreduce.
 *
 * usage: test_overlap [--gemms N] [--dim N] [--mib X] [--rounds N] [--trace FILE.json]   (under mpirun)
 *        --trace: where rank 0 writes the traced round (default: a temporary file, removed) */
#include <string.h>
#include <unistd.h>

#include "starweave/trace.h"
#include "testutil.h"

static int me;

static double now(void) { return MPI_Wtime(); }

/* wall time of the slowest rank */
static double slowest(double t)
{
    double m;
    SW_CHECK(MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    return m;
}

static void gemm_chain(sw_tensor *A, sw_tensor *B, sw_tensor *C, int n)
{
    for (int i = 0; i < n; i++)
        sw_gemm(sw_tensor_whole(A, STARPU_R), 0, sw_tensor_whole(B, STARPU_R), 0, sw_tensor_whole(C, STARPU_RW),
                1e-3f, 1.0f);
}

/* ---- the traced round, read back from the Chrome JSON (one event a line) ---- */

/* the number after "key": on line, or dflt */
static double json_num(const char *line, const char *key, double dflt)
{
    char k[32];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(line, k);
    return p ? strtod(p + strlen(k), NULL) : dflt;
}

/* the string after "key":" on line copied into out ("" when absent) */
static void json_str(const char *line, const char *key, char *out, size_t n)
{
    char k[32];
    snprintf(k, sizeof k, "\"%s\":\"", key);
    const char *p = strstr(line, k);
    size_t i = 0;
    if (p)
        for (p += strlen(k); *p && *p != '"' && i + 1 < n; p++) out[i++] = *p;
    out[i] = 0;
}

typedef struct span {
    long ngemm, nreq, nred;
    double gemm_first_start, gemm_last_start, gemm_last_end; /* us, rank 0's clock */
    double req_first_posted, req_last_done;
    double red_last_end; /* the all-reduce's tasks (phase comm: gates, reductions) */
} span;

/* Rank 0: per rank, the GEMMs' and the requests' times of the traced round.
 * Returns 0, or -1 if the file cannot be read. */
static int read_spans(const char *path, span *sp, int world)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    for (int r = 0; r < world; r++)
        sp[r] = (span){0, 0, 0, 1e300, -1e300, -1e300, 1e300, -1e300, -1e300};
    char line[1024], name[64], cat[32], ph[8];
    while (fgets(line, sizeof line, f)) {
        json_str(line, "ph", ph, sizeof ph);
        if (strcmp(ph, "X") != 0) continue;
        json_str(line, "name", name, sizeof name);
        json_str(line, "cat", cat, sizeof cat);
        int pid = (int)json_num(line, "pid", -1);
        double ts = json_num(line, "ts", -1), dur = json_num(line, "dur", -1);
        if (pid < 0 || pid >= world || ts < 0 || dur < 0) continue; /* the transfers process */
        span *s = &sp[pid];
        if (!strcmp(cat, "mpi")) {
            s->nreq++;
            if (ts < s->req_first_posted) s->req_first_posted = ts;
            if (ts + dur > s->req_last_done) s->req_last_done = ts + dur;
        } else if (!strcmp(cat, "comm")) {
            s->nred++;
            if (ts + dur > s->red_last_end) s->red_last_end = ts + dur;
        } else if (!strcmp(name, "gemm")) {
            s->ngemm++;
            if (ts < s->gemm_first_start) s->gemm_first_start = ts;
            if (ts > s->gemm_last_start) s->gemm_last_start = ts;
            if (ts + dur > s->gemm_last_end) s->gemm_last_end = ts + dur;
        }
    }
    fclose(f);
    return 0;
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    me = sw_rank();
    int gemms = 40, dim = 512, rounds = 3;
    const char *trace_path = NULL;
    double mib = 32;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--gemms")) gemms = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--dim")) dim = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--mib")) mib = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--trace")) trace_path = argv[i + 1];
    }
    if (sw_world_size() < 2) {
        if (me == 0) printf("SKIP: the overlap test needs at least 2 ranks (run under mpirun)\n");
        sw_shutdown();
        return 77;
    }
    sw_mesh *mesh = sw_mesh_create(NULL);
    sw_comm *comm = sw_comm_create(mesh);

    float *a = malloc(sizeof(float) * (size_t)dim * dim);
    int64_t cols = 1024, rows = (int64_t)(mib * SW_MIB / 4 / cols);
    float *x = malloc(sizeof(float) * (size_t)(rows * cols)), *ref = malloc(sizeof(float) * (size_t)(rows * cols));
    if (!a || !x || !ref) { perror("malloc"); return 99; }
    tu_rand(a, (int64_t)dim * dim, 1, 1.0f);
    tu_rand(x, rows * cols, 100 + (uint64_t)me, 1.0f);
    sw_tensor *A = tu_tensor("A", dim, dim, a), *B = tu_tensor("B", dim, dim, a), *C = tu_tensor("C", dim, dim, a);
    sw_tensor *X = tu_tensor("X", rows, cols, x);

    double best_gemm = 1e30, best_comm = 1e30, best_both = 1e30;
    for (int r = 0; r <= rounds; r++) { /* round 0 warms up (perf models, buffers) */
        SW_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        double t0 = now();
        gemm_chain(A, B, C, gemms);
        starpu_task_wait_for_all();
        double tg = slowest(now() - t0);

        sw_tensor_write_host(X, x);
        SW_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        t0 = now();
        sw_allreduce(comm, SW_GROUP_WORLD, X, SW_SUM);
        starpu_task_wait_for_all();
        double tc = slowest(now() - t0);

        sw_tensor_write_host(X, x);
        SW_CHECK(MPI_Barrier(MPI_COMM_WORLD));
        t0 = now();
        sw_allreduce(comm, SW_GROUP_WORLD, X, SW_SUM);
        gemm_chain(A, B, C, gemms);
        starpu_task_wait_for_all();
        double tb = slowest(now() - t0);
        if (me == 0)
            printf("round %d: gemm chain %.1f ms, all-reduce %.1f ms, together %.1f ms\n", r, tg * 1e3, tc * 1e3,
                   tb * 1e3);
        if (r > 0) {
            if (tg < best_gemm) best_gemm = tg;
            if (tc < best_comm) best_comm = tc;
            if (tb < best_both) best_both = tb;
        }
    }

    /* Structure: one more round of both together, traced (after the timed
     * rounds: tracing turns StarPU's profiling on). */
    char tmp_trace[256] = "";
    if (!trace_path) {
        if (me == 0) {
            const char *dir = getenv("TMPDIR");
            snprintf(tmp_trace, sizeof tmp_trace, "%s/test_overlap.XXXXXX", dir && *dir ? dir : "/tmp");
            int fd = mkstemp(tmp_trace);
            if (fd < 0) { perror("mkstemp"); return 99; }
            close(fd);
        }
        trace_path = tmp_trace; /* used by rank 0 only */
    }
    sw_tensor_write_host(X, x);
    starpu_task_wait_for_all();
    SW_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    sw_trace_enable(1);
    sw_trace_mark_step(0);
    sw_allreduce(comm, SW_GROUP_WORLD, X, SW_SUM);
    gemm_chain(A, B, C, gemms);
    sw_trace_enable(0);
    starpu_task_wait_for_all();
    int rc = sw_trace_write(trace_path, NULL, NULL);
    tu_check_ranks("the traced round: sw_trace_write returns 0", rc == 0);
    if (me == 0 && rc == 0) {
        int world = sw_world_size();
        span *sp = malloc(sizeof *sp * (size_t)world);
        if (!sp) { perror("malloc"); return 99; }
        if (tu_true("the traced round's JSON trace is readable", read_spans(trace_path, sp, world) == 0)) {
            for (int r = 0; r < world; r++) {
                const span *q = &sp[r];
                char what[512];
                int complete = q->ngemm == gemms && q->nreq > 0 && q->nred > 0;
                snprintf(what, sizeof what,
                         "rank %d, submitted together: %ld of %d GEMMs, %ld requests and %ld all-reduce tasks traced; "
                         "the all-reduce's first request posted at %.1f ms, before the chain's last GEMM started "
                         "(%.1f ms); the chain's first GEMM started at %.1f ms, before the all-reduce's last task "
                         "ended (%.1f ms; its last request completed at %.1f ms, the chain ended at %.1f ms): "
                         "not serialised",
                         r, q->ngemm, gemms, q->nreq, q->nred, q->req_first_posted / 1e3, q->gemm_last_start / 1e3,
                         q->gemm_first_start / 1e3, q->red_last_end / 1e3, q->req_last_done / 1e3,
                         q->gemm_last_end / 1e3);
                tu_true(what, complete && q->req_first_posted < q->gemm_last_start &&
                                  q->gemm_first_start < q->red_last_end);
            }
        }
        free(sp);
    }
    if (tmp_trace[0]) unlink(tmp_trace);

    /* the traced round's all-reduce result */
    float *got = tu_read(X);
    SW_CHECK(MPI_Allreduce(x, ref, (int)(rows * cols), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
    double worst = 0;
    for (int64_t i = 0; i < rows * cols; i++) {
        double e = fabs((double)got[i] - ref[i]) / (1e-6 + 1e-5 * sw_world_size());
        if (!(e <= worst)) worst = e;
    }
    char what[256];
    snprintf(what, sizeof what, "all-reduce of %.0f MiB beside the GEMM chain equals MPI_Allreduce (worst err/limit %.3g)",
             mib, worst);
    tu_check_ranks(what, worst <= 1.0);

    double serial = best_gemm + best_comm;
    snprintf(what, sizeof what,
             "%d GEMMs %dx%dx%d (%.1f ms) + all-reduce %.0f MiB over %d ranks (%.1f ms): one after the other %.1f ms, "
             "together %.1f ms (%.0f %% of serial; bound 95 %%)",
             gemms, dim, dim, dim, best_gemm * 1e3, mib, sw_world_size(), best_comm * 1e3, serial * 1e3,
             best_both * 1e3, 100 * best_both / serial);
    int enough_cores = cores >= 2 * sw_world_size();
    if (enough_cores) tu_check_ranks(what, best_both < 0.95 * serial);
    else if (me == 0)
        printf("NOT ASSERTED (timing): %s -- a gain in time needs 2 cores per rank (a computing worker and the "
               "communication), this node has %ld cores for %d ranks; the structure above is asserted\n",
               what, cores, sw_world_size());

    free(got); free(a); free(x); free(ref);
    sw_tensor_free(A); sw_tensor_free(B); sw_tensor_free(C); sw_tensor_free(X);
    sw_comm_destroy(comm);
    sw_mesh_destroy(mesh);
    return tu_finish_all();
}
