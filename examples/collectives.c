/* collectives: starweave's task-graph collectives against plain MPI, under
 * mpirun. For each message size: sw_allreduce (StarPU-MPI detached requests
 * + reduction tasks), sw_allreduce_mpi (one task calling MPI_Allreduce, the
 * comparison backend) and MPI_Allreduce from the main thread; then
 * sw_allgather / sw_reduce_scatter / sw_alltoall against MPI_Allgather /
 * MPI_Reduce_scatter_block / MPI_Alltoall. Results are checked against the plain MPI
 * collective's; prints the median time per call and the bus bandwidth.
 * Every flag is validated before any communication; bad input exits with 2. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <starpu_mpi.h>

#include "starweave.h"
#include "starweave/comm_mpi.h"
#include "cli.h"

#define MAX_SIZES 32

typedef struct opts {
    double sizes_mib[MAX_SIZES];
    int nsizes;
    int iters;
    int tp;
    sw_group group;
    int ncpus;
    int no_gather;
    int algo;            /* -1: library default, else sw_comm_algo */
    double small_kib;    /* < 0: library default */
} opts;

static double parse_mib(const char *flag, const char *v)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || *end || end == v || !isfinite(x))
        sw_usage_error("%s expects a size in MiB, got '%s'", flag, v);
    if (x <= 0 || x > 4096) sw_usage_error("%s: size must be in (0, 4096] MiB, got %s", flag, v);
    return x;
}

static void parse_sizes(const char *flag, const char *v, opts *o)
{
    char buf[1024];
    if (strlen(v) >= sizeof buf) sw_usage_error("%s: list too long", flag);
    strcpy(buf, v);
    o->nsizes = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (o->nsizes == MAX_SIZES) sw_usage_error("%s: at most %d sizes", flag, MAX_SIZES);
        o->sizes_mib[o->nsizes++] = parse_mib(flag, tok);
    }
    if (o->nsizes == 0) sw_usage_error("%s expects a comma-separated list of sizes in MiB, got '%s'", flag, v);
}

static void parse_args(int argc, char **argv, opts *o)
{
    const char *sizes = NULL;
    double size_mib;
    int algo, group;
    const cli_flag flags[] = {
        CLI_DOUBLE_ABOVE("--size-mib", &size_mib, "64", 0, 4096, "X", "one message size in MiB"),
        CLI_STRING("--sizes", &sizes, NULL, "LIST", "comma-separated sizes in MiB, e.g. 0.001,1,64 (each in (0, 4096])"),
        CLI_INT("--iters", &o->iters, "5", 1, 100000, "K", "measured calls per size and method; one warm-up"),
        CLI_INT("--tp", &o->tp, "1", 1, CLI_INT_MAX, "N", "mesh: tensor-parallel degree N, dp = ranks / N"),
        CLI_CHOICE("--group", &group, "world", "world|tp|dp", "the group the collectives run on"),
        CLI_BOOL("--no-gather", &o->no_gather, "all-reduce only"),
        CLI_CHOICE("--algo", &algo, "auto", "auto|ring|direct", "all-reduce algorithm"),
        CLI_DOUBLE("--small-kib", &o->small_kib, NULL, 0, 4194304, "X", "AUTO's threshold in KiB (default: the library's)"),
        CLI_INT("--ncpus", &o->ncpus, NULL, 1, CLI_INT_MAX, "N", "CPU workers per rank (default: StarPU's / $STARPU_NCPU)"),
        CLI_END};
    o->ncpus = -1;
    o->no_gather = 0;
    o->small_kib = -1;
    cli_parse("collectives", "mpirun -np N collectives [options]",
              "Times starweave's collectives (task graphs of StarPU-MPI detached requests\n"
              "and reduction tasks) against plain MPI on the same data in the same run:\n"
              "  all-reduce:     sw_allreduce, sw_allreduce_mpi (one task calling\n"
              "                  MPI_Allreduce), MPI_Allreduce from the main thread\n"
              "  all-gather:     sw_allgather vs MPI_Allgather\n"
              "  reduce-scatter: sw_reduce_scatter vs MPI_Reduce_scatter_block\n"
              "  all-to-all:     sw_alltoall (row blocks) vs MPI_Alltoall\n"
              "checks starweave's results against MPI's (relative 1e-6 of sum |x|), and\n"
              "prints the median time per call and the bus bandwidth: 2(p-1)/p * bytes / time\n"
              "for all-reduce, (p-1)/p * bytes / time for the others (bytes: the full\n"
              "buffer). Each measured call is preceded by MPI_Barrier and timed with\n"
              "MPI_Wtime around submission until the result is readable on the host.\n"
              "Oversubscribed launches: see tests/mpi_launch.sh (one unbound worker per rank).\n\n",
              flags, argc, argv);
    o->sizes_mib[0] = size_mib;
    o->nsizes = 1;
    if (sizes) parse_sizes("--sizes", sizes, o); /* the list wins over --size-mib, whichever came last */
    o->algo = (int[]){SW_ALGO_AUTO, SW_ALGO_RING, SW_ALGO_DIRECT}[algo];
    o->group = (sw_group[]){SW_GROUP_WORLD, SW_GROUP_TP, SW_GROUP_DP}[group];
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) sw_fail(__FILE__, __LINE__, "malloc", -ENOMEM);
    return p;
}

/* Deterministic data of world rank `rank`, offset `seed`. */
static void fill(float *x, int64_t n, int rank, int seed)
{
    uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(rank + 1) + (uint64_t)seed;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
    }
}

/* Wait until t's contents are readable on the host: the result's detached
 * receives have landed and every task on it has run. */
static void wait_result(sw_tensor *t)
{
    starpu_data_handle_t h = sw_tensor_whole(t, STARPU_R);
    SW_CHECK(starpu_data_acquire(h, STARPU_R));
    starpu_data_release(h);
    starpu_task_wait_for_all();
}

/* No StarPU-MPI request in flight (before the main thread calls MPI). */
static void quiesce(void) { SW_CHECK(starpu_mpi_wait_for_all(MPI_COMM_WORLD)); }

/* Worst |got - ref| / (1e-6 * mag) over n elements (<= 1: pass). */
static double rel_err(const float *got, const float *ref, const float *mag, int64_t n)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - (double)ref[i]) / (1e-6 * (double)mag[i] + 1e-30);
        if (!(e <= worst)) worst = e; /* NaN propagates */
    }
    return worst;
}

typedef struct result {
    double t, bw; /* median seconds per call, bus bandwidth GB/s */
} result;

static result summarize(double *times, int n, double bus_bytes)
{
    result r;
    r.t = median(times, n);
    /* every rank reports the slowest rank's median */
    SW_CHECK(MPI_Allreduce(MPI_IN_PLACE, &r.t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    r.bw = r.t > 0 ? bus_bytes / r.t / 1e9 : 0;
    return r;
}

static void print_row(int me, const char *coll, const char *method, double bytes, result r, double ratio)
{
    if (me != 0) return;
    char rs[32] = "";
    if (ratio > 0) snprintf(rs, sizeof rs, "%.3f", ratio);
    printf("%-15s %-22s %12.0f %12.3f %10.4f %8s\n", coll, method, bytes, r.t * 1e3, r.bw, rs);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    opts o;
    parse_args(argc, argv, &o);
    sw_options so;
    sw_options_default(&so);
    so.ncpus = o.ncpus;
    so.quiet = 1;
    if (sw_init(&argc, &argv, &so) != 0) return 1;
    const int me = sw_rank(), world = sw_world_size();
    if (world % o.tp != 0)
        sw_usage_error("tp (%d) must divide the number of ranks (%d)", o.tp, world);
    sw_mesh_dims d = {o.tp, 1, 1, world / o.tp, 1};
    sw_mesh *mesh = sw_mesh_create(&d);
    sw_comm *c = sw_comm_create(mesh);
    if (o.algo >= 0) sw_comm_set_algo(c, (sw_comm_algo)o.algo);
    if (o.small_kib >= 0) sw_comm_set_small_bytes(c, (size_t)(o.small_kib * 1024.0));
    const sw_group g = o.group;
    const int p = sw_mesh_size(mesh, g), gr = sw_mesh_rank(mesh, g);
    const MPI_Comm comm = sw_mesh_comm(mesh, g);
    const int K = o.iters;
    double *times = xmalloc(sizeof(double) * (size_t)K);
    int failed = 0;

    if (me == 0) {
        printf("collectives: %d ranks, mesh tp=%d dp=%d, group %s (p = %d), %d CPU worker(s) per rank, "
               "%d iterations (median)\n",
               world, o.tp, world / o.tp, sw_group_name(g), p, sw_ncpus(), K);
        printf("%-15s %-22s %12s %12s %10s %8s\n", "collective", "method", "bytes", "ms/call", "busbw_GB/s",
               "sw/MPI");
        fflush(stdout);
    }

    for (int si = 0; si < o.nsizes; si++) {
        /* shape [rows, cols]: rows a multiple of p (equal blocks for the
         * MPI all-gather / reduce-scatter), cols <= 1024 floats */
        int64_t want = (int64_t)(o.sizes_mib[si] * SW_MIB / sizeof(float) + 0.5);
        if (want < p) want = p;
        int64_t cols = 1024;
        while (cols > 1 && want / cols < p) cols /= 2;
        int64_t rows = want / cols / p * p;
        const int64_t n = rows * cols, nb = n / p;
        const double bytes = (double)n * sizeof(float);
        const double ar_bus = p > 1 ? 2.0 * (p - 1) / p * bytes : 0, ag_bus = p > 1 ? (double)(p - 1) / p * bytes : 0;

        float *x = xmalloc(sizeof(float) * (size_t)n), *ref = xmalloc(sizeof(float) * (size_t)n);
        float *got = xmalloc(sizeof(float) * (size_t)n), *mag = xmalloc(sizeof(float) * (size_t)n);
        fill(x, n, me, si);
        for (int64_t i = 0; i < n; i++) mag[i] = fabsf(x[i]);
        SW_CHECK(MPI_Allreduce(MPI_IN_PLACE, mag, (int)n, MPI_FLOAT, MPI_SUM, comm));
        SW_CHECK(MPI_Allreduce(x, ref, (int)n, MPI_FLOAT, MPI_SUM, comm));
        sw_tensor *t = sw_tensor_new2d("x", SW_F32, rows, cols);
        result r_sw, r_task, r_mpi;

        /* ---- all-reduce: the three methods interleaved call by call, so
         * that machine noise (on an oversubscribed node) hits them alike:
         * 0 starweave graph, 1 one task calling MPI_Allreduce, 2
         * MPI_Allreduce on the main thread ---- */
        double *tm[3] = {times, xmalloc(sizeof(double) * (size_t)K), xmalloc(sizeof(double) * (size_t)K)};
        for (int it = -1; it < K; it++)
            for (int m = 0; m < 3; m++) {
                if (m < 2) {
                    sw_tensor_write_host(t, x);
                    quiesce();
                } else {
                    memcpy(got, x, sizeof(float) * (size_t)n);
                }
                SW_CHECK(MPI_Barrier(comm));
                double t0 = MPI_Wtime();
                if (m == 0) sw_allreduce(c, g, t, SW_SUM);
                else if (m == 1) sw_allreduce_mpi(comm, t);
                else SW_CHECK(MPI_Allreduce(MPI_IN_PLACE, got, (int)n, MPI_FLOAT, MPI_SUM, comm));
                if (m < 2) wait_result(t);
                double t1 = MPI_Wtime();
                if (it >= 0) tm[m][it] = t1 - t0;
                if (m < 2 && it == K - 1) {
                    sw_tensor_read_host(t, got);
                    quiesce();
                    double e = rel_err(got, ref, mag, n);
                    if (!(e <= 1)) {
                        failed = 1;
                        fprintf(stderr, "collectives: rank %d: %s of %.0f bytes differs from MPI_Allreduce "
                                "(error %.3g x 1e-6 sum|x|)\n", me, m ? "sw_allreduce_mpi" : "sw_allreduce",
                                bytes, e);
                    }
                }
            }
        r_sw = summarize(tm[0], K, ar_bus);
        r_task = summarize(tm[1], K, ar_bus);
        r_mpi = summarize(tm[2], K, ar_bus);
        free(tm[1]), free(tm[2]);
        print_row(me, "allreduce", "starweave (graph)", bytes, r_sw, r_mpi.bw > 0 ? r_sw.bw / r_mpi.bw : 0);
        print_row(me, "allreduce", "task+MPI_Allreduce", bytes, r_task, r_mpi.bw > 0 ? r_task.bw / r_mpi.bw : 0);
        print_row(me, "allreduce", "MPI_Allreduce", bytes, r_mpi, 0);

        if (!o.no_gather && p > 1) {
            /* ---- all-gather: in = my block [nb] of x, out [n] ---- */
            sw_tensor *in = sw_tensor_new2d("in", SW_F32, rows / p, cols);
            float *blk = x + (int64_t)gr * nb;
            SW_CHECK(MPI_Allgather(blk, (int)nb, MPI_FLOAT, ref, (int)nb, MPI_FLOAT, comm));
            for (int it = -1; it < K; it++) {
                sw_tensor_write_host(in, blk);
                quiesce();
                SW_CHECK(MPI_Barrier(comm));
                double t0 = MPI_Wtime();
                sw_allgather(c, g, in, t);
                wait_result(t);
                double t1 = MPI_Wtime();
                if (it >= 0) times[it] = t1 - t0;
            }
            sw_tensor_read_host(t, got);
            quiesce();
            if (memcmp(got, ref, sizeof(float) * (size_t)n) != 0) {
                failed = 1;
                fprintf(stderr, "collectives: rank %d: sw_allgather differs from MPI_Allgather\n", me);
            }
            r_sw = summarize(times, K, ag_bus);
            for (int it = -1; it < K; it++) {
                SW_CHECK(MPI_Barrier(comm));
                double t0 = MPI_Wtime();
                SW_CHECK(MPI_Allgather(blk, (int)nb, MPI_FLOAT, got, (int)nb, MPI_FLOAT, comm));
                double t1 = MPI_Wtime();
                if (it >= 0) times[it] = t1 - t0;
            }
            r_mpi = summarize(times, K, ag_bus);
            print_row(me, "allgather", "starweave (graph)", bytes, r_sw, r_mpi.bw > 0 ? r_sw.bw / r_mpi.bw : 0);
            print_row(me, "allgather", "MPI_Allgather", bytes, r_mpi, 0);

            /* ---- reduce-scatter: in = x [n], out = my block [nb] ---- */
            float *rref = xmalloc(sizeof(float) * (size_t)nb);
            SW_CHECK(MPI_Reduce_scatter_block(x, rref, (int)nb, MPI_FLOAT, MPI_SUM, comm));
            for (int it = -1; it < K; it++) {
                sw_tensor_write_host(t, x);
                quiesce();
                SW_CHECK(MPI_Barrier(comm));
                double t0 = MPI_Wtime();
                sw_reduce_scatter(c, g, t, in, SW_SUM);
                wait_result(in);
                double t1 = MPI_Wtime();
                if (it >= 0) times[it] = t1 - t0;
            }
            sw_tensor_read_host(in, got);
            quiesce();
            if (!(rel_err(got, rref, mag + (int64_t)gr * nb, nb) <= 1)) {
                failed = 1;
                fprintf(stderr, "collectives: rank %d: sw_reduce_scatter differs from MPI_Reduce_scatter_block\n",
                        me);
            }
            r_sw = summarize(times, K, ag_bus);
            for (int it = -1; it < K; it++) {
                SW_CHECK(MPI_Barrier(comm));
                double t0 = MPI_Wtime();
                SW_CHECK(MPI_Reduce_scatter_block(x, rref, (int)nb, MPI_FLOAT, MPI_SUM, comm));
                double t1 = MPI_Wtime();
                if (it >= 0) times[it] = t1 - t0;
            }
            r_mpi = summarize(times, K, ag_bus);
            print_row(me, "reduce_scatter", "starweave (graph)", bytes, r_sw, r_mpi.bw > 0 ? r_sw.bw / r_mpi.bw : 0);
            print_row(me, "reduce_scatter", "MPI_Reduce_scatter_blk", bytes, r_mpi, 0);
            free(rref);

            /* ---- all-to-all: row block j of x to rank j; out [n] ---- */
            sw_tensor *a2a = sw_tensor_new2d("a2a", SW_F32, rows, cols);
            SW_CHECK(MPI_Alltoall(x, (int)nb, MPI_FLOAT, ref, (int)nb, MPI_FLOAT, comm));
            for (int it = -1; it < K; it++) {
                sw_tensor_write_host(t, x);
                quiesce();
                SW_CHECK(MPI_Barrier(comm));
                double t0 = MPI_Wtime();
                sw_alltoall(c, g, t, a2a, 0, 0);
                wait_result(a2a);
                double t1 = MPI_Wtime();
                if (it >= 0) times[it] = t1 - t0;
            }
            sw_tensor_read_host(a2a, got);
            quiesce();
            if (memcmp(got, ref, sizeof(float) * (size_t)n) != 0) {
                failed = 1;
                fprintf(stderr, "collectives: rank %d: sw_alltoall differs from MPI_Alltoall\n", me);
            }
            r_sw = summarize(times, K, ag_bus);
            for (int it = -1; it < K; it++) {
                SW_CHECK(MPI_Barrier(comm));
                double t0 = MPI_Wtime();
                SW_CHECK(MPI_Alltoall(x, (int)nb, MPI_FLOAT, got, (int)nb, MPI_FLOAT, comm));
                double t1 = MPI_Wtime();
                if (it >= 0) times[it] = t1 - t0;
            }
            r_mpi = summarize(times, K, ag_bus);
            print_row(me, "alltoall", "starweave (graph)", bytes, r_sw, r_mpi.bw > 0 ? r_sw.bw / r_mpi.bw : 0);
            print_row(me, "alltoall", "MPI_Alltoall", bytes, r_mpi, 0);
            sw_tensor_free(a2a);
            sw_tensor_free(in);
        }
        sw_tensor_free(t);
        free(x), free(ref), free(got), free(mag);
    }

    SW_CHECK(MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (me == 0) printf("check: %s (starweave results vs the plain MPI collectives)\n", failed ? "FAILED" : "ok");
    free(times);
    sw_comm_destroy(c);
    sw_mesh_destroy(mesh);
    sw_shutdown();
    return failed ? 1 : 0;
}
