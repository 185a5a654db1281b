/* Collectives as graph nodes under mpirun (through tests/test_comm.sh):
 * every collective against the plain MPI collective on the same data, over
 * the world, a group of one, and the tp and dp groups of a 2x2 mesh at 4
 * ranks; sizes not divisible by the group size, one element, both all-reduce
 * algorithms. Sums within 1e-6 of the sum of magnitudes (the order of the
 * additions differs from MPI's), max and data movement exactly; all-reduce
 * results bit-identical on every member. Ring shifts (by 1, -1, 0, 2, -3,
 * in place, a full turn) against MPI_Sendrecv and all-to-alls (every pair
 * of scatter and gather dims, there and back) against MPI_Alltoall, exactly.
 *
 *   test_comm            the checks above, then the stress test
 *   test_comm --stress   only the stress test: 100 all-reduces alternating
 *                        two communicators, interleaved with compute tasks
 *                        that feed them and consume their results, with
 *                        ring shifts and all-to-alls among them
 *   test_comm --bad-alltoall   an all-to-all whose scatter dim (p + 1
 *                        columns) is not divisible by the group size: must
 *                        stop every rank with a clear message
 *
 * The MPI references run on the main thread after starpu_mpi_wait_for_all,
 * when no StarPU-MPI request is in flight. */
#include <string.h>

#include <starpu_mpi.h>

#include "starweave/comm.h"
#include "testutil.h"

static int me, world;

static void quiesce(void)
{
    SW_CHECK(starpu_mpi_wait_for_all(MPI_COMM_WORLD));
}

static float *xmalloc_f(int64_t n)
{
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!p) { perror("malloc"); exit(99); }
    return p;
}

/* sum: |got - ref| <= 1e-6 * sum_k |x_k| (+ tiny); max: exact. */
static int compare(const float *got, const float *ref, const float *mag, int64_t n, sw_reduce_op op,
                   double *worst)
{
    int ok = 1;
    *worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - (double)ref[i]);
        if (op == SW_MAX) {
            if (got[i] != ref[i]) ok = 0;
            if (err > *worst) *worst = err;
        } else {
            double lim = 1e-6 * (double)mag[i] + 1e-30;
            if (!(err <= lim)) ok = 0;
            if (err / lim > *worst) *worst = err / lim;
        }
    }
    return ok;
}

static const char *algo_name(sw_comm_algo a)
{
    return a == SW_ALGO_RING ? "ring" : a == SW_ALGO_DIRECT ? "direct" : "auto";
}

static void test_allreduce(sw_comm *c, sw_group g, int64_t rows, int64_t cols, sw_reduce_op op,
                           sw_comm_algo algo, uint64_t seed)
{
    const sw_mesh *m = sw_comm_mesh(c);
    MPI_Comm comm = sw_mesh_comm(m, g);
    const int64_t n = rows * cols;
    float *x = xmalloc_f(n), *ref = xmalloc_f(n), *mag = xmalloc_f(n), *abs_x = xmalloc_f(n);
    float *first = xmalloc_f(n);
    tu_rand(x, n, seed * 1000 + (uint64_t)me, 1.0f);
    for (int64_t i = 0; i < n; i++) abs_x[i] = fabsf(x[i]);

    sw_tensor *t = tu_tensor("ar", rows, cols, x);
    sw_comm_set_algo(c, algo);
    /* what ran: a ring or direct exchange is made of send requests, AUTO's
     * small sizes are MPI's; the bytes sent (counted where they leave) are
     * the model's for that algorithm */
    const int64_t sends0 = sw_counter_get(SW_COUNT_P2P_SEND), mpi0 = sw_counter_get(SW_COUNT_MPI_COLLECTIVE);
    const double model = sw_comm_bytes(c, g, SW_COLL_ALLREDUCE, rows, cols);
    double sent0, sent1;
    long calls;
    sw_comm_traffic(c, g, &sent0, &calls);
    sw_allreduce(c, g, t, op);
    float *got = tu_read(t);
    sw_tensor_free(t);
    quiesce();
    sw_comm_traffic(c, g, &sent1, &calls);
    const int64_t sends = sw_counter_get(SW_COUNT_P2P_SEND) - sends0;
    const int64_t mpi = sw_counter_get(SW_COUNT_MPI_COLLECTIVE) - mpi0;
    const int alone = sw_mesh_size(m, g) == 1;
    const int path_ok = alone ? sends == 0 && mpi == 0 : algo == SW_ALGO_AUTO ? sends + mpi > 0 : sends > 0 && mpi == 0;
    const int bytes_ok = sent1 - sent0 == model;

    SW_CHECK(MPI_Allreduce(x, ref, (int)n, MPI_FLOAT, op == SW_MAX ? MPI_MAX : MPI_SUM, comm));
    SW_CHECK(MPI_Allreduce(abs_x, mag, (int)n, MPI_FLOAT, MPI_SUM, comm));
    double worst;
    int ok = compare(got, ref, mag, n, op, &worst);
    /* every member holds the same bits as the group's rank 0 */
    memcpy(first, got, sizeof(float) * (size_t)n);
    SW_CHECK(MPI_Bcast(first, (int)n, MPI_FLOAT, 0, comm));
    int same = memcmp(first, got, sizeof(float) * (size_t)n) == 0;
    char what[256];
    snprintf(what, sizeof what,
             "allreduce %s %s over %s (size %d) [%lld,%lld] %s: worst %s %.3g, identical on members %s; "
             "ran as %lld sends + %lld MPI calls%s, sent %.0f bytes (model %.0f)",
             op == SW_MAX ? "max" : "sum", algo_name(algo), sw_group_name(g), sw_mesh_size(m, g), (long long)rows,
             (long long)cols, ok ? "matches MPI_Allreduce" : "DIFFERS from MPI_Allreduce",
             op == SW_MAX ? "abs err" : "err/limit", worst, same ? "yes" : "NO", (long long)sends, (long long)mpi,
             path_ok ? "" : " (NOT the algorithm asked for)", sent1 - sent0, model);
    tu_check_ranks(what, ok && same && path_ok && bytes_ok);
    free(x); free(ref); free(mag); free(abs_x); free(first); free(got);
}

static void test_allgather(sw_comm *c, sw_group g, int64_t N, int64_t cols, uint64_t seed)
{
    const sw_mesh *m = sw_comm_mesh(c);
    MPI_Comm comm = sw_mesh_comm(m, g);
    const int p = sw_mesh_size(m, g), r = sw_mesh_rank(m, g);
    int64_t first, count;
    sw_tile_range(N, p, r, &first, &count);
    float *x = xmalloc_f(count * cols), *ref = xmalloc_f(N * cols);
    tu_rand(x, count * cols, seed * 1000 + (uint64_t)me, 1.0f);
    int *counts = malloc(sizeof(int) * (size_t)p), *displs = malloc(sizeof(int) * (size_t)p);
    if (!counts || !displs) { perror("malloc"); exit(99); }
    for (int i = 0; i < p; i++) {
        int64_t f, k;
        sw_tile_range(N, p, i, &f, &k);
        counts[i] = (int)(k * cols);
        displs[i] = (int)(f * cols);
    }
    sw_tensor *in = tu_tensor("ag_in", count, cols, x);
    sw_tensor *out = sw_tensor_new2d("ag_out", SW_F32, N, cols);
    sw_allgather(c, g, in, out);
    float *got = tu_read(out);
    sw_tensor_free(in);
    sw_tensor_free(out);
    quiesce();
    SW_CHECK(MPI_Allgatherv(x, (int)(count * cols), MPI_FLOAT, ref, counts, displs, MPI_FLOAT, comm));
    int ok = memcmp(got, ref, sizeof(float) * (size_t)(N * cols)) == 0;
    char what[256];
    snprintf(what, sizeof what, "allgather over %s (size %d) [%lld,%lld] (this rank %lld rows): %s", sw_group_name(g),
             p, (long long)N, (long long)cols, (long long)count,
             ok ? "equals MPI_Allgatherv" : "DIFFERS from MPI_Allgatherv");
    tu_check_ranks(what, ok);
    free(x); free(ref); free(counts); free(displs); free(got);
}

static void test_reduce_scatter(sw_comm *c, sw_group g, int64_t N, int64_t cols, sw_reduce_op op, uint64_t seed)
{
    const sw_mesh *m = sw_comm_mesh(c);
    MPI_Comm comm = sw_mesh_comm(m, g);
    const int p = sw_mesh_size(m, g), r = sw_mesh_rank(m, g);
    int64_t first, count;
    sw_tile_range(N, p, r, &first, &count);
    float *x = xmalloc_f(N * cols), *abs_x = xmalloc_f(N * cols);
    float *ref = xmalloc_f(count * cols), *mag = xmalloc_f(count * cols);
    tu_rand(x, N * cols, seed * 1000 + (uint64_t)me, 1.0f);
    for (int64_t i = 0; i < N * cols; i++) abs_x[i] = fabsf(x[i]);
    int *counts = malloc(sizeof(int) * (size_t)p);
    if (!counts) { perror("malloc"); exit(99); }
    for (int i = 0; i < p; i++) {
        int64_t f, k;
        sw_tile_range(N, p, i, &f, &k);
        counts[i] = (int)(k * cols);
    }
    sw_tensor *in = tu_tensor("rs_in", N, cols, x);
    sw_tensor *out = sw_tensor_new2d("rs_out", SW_F32, count, cols);
    sw_reduce_scatter(c, g, in, out, op);
    float *got = tu_read(out);
    float *in_after = tu_read(in);
    sw_tensor_free(in);
    sw_tensor_free(out);
    quiesce();
    SW_CHECK(MPI_Reduce_scatter(x, ref, counts, MPI_FLOAT, op == SW_MAX ? MPI_MAX : MPI_SUM, comm));
    SW_CHECK(MPI_Reduce_scatter(abs_x, mag, counts, MPI_FLOAT, MPI_SUM, comm));
    double worst;
    int ok = compare(got, ref, mag, count * cols, op, &worst);
    int untouched = memcmp(in_after, x, sizeof(float) * (size_t)(N * cols)) == 0;
    char what[256];
    snprintf(what, sizeof what, "reduce_scatter %s over %s (size %d) [%lld,%lld] (this rank %lld rows): %s, worst %.3g, input %s",
             op == SW_MAX ? "max" : "sum", sw_group_name(g), p, (long long)N, (long long)cols, (long long)count,
             ok ? "matches MPI_Reduce_scatter" : "DIFFERS from MPI_Reduce_scatter", worst,
             untouched ? "untouched" : "MODIFIED");
    tu_check_ranks(what, ok && untouched);
    free(x); free(abs_x); free(ref); free(mag); free(counts); free(got); free(in_after);
}

static void test_broadcast(sw_comm *c, sw_group g, int64_t rows, int64_t cols, int root, uint64_t seed)
{
    const sw_mesh *m = sw_comm_mesh(c);
    MPI_Comm comm = sw_mesh_comm(m, g);
    const int64_t n = rows * cols;
    float *x = xmalloc_f(n);
    tu_rand(x, n, seed * 1000 + (uint64_t)me, 1.0f);
    sw_tensor *t = tu_tensor("bc", rows, cols, x);
    sw_broadcast(c, g, t, root);
    float *got = tu_read(t);
    sw_tensor_free(t);
    quiesce();
    SW_CHECK(MPI_Bcast(x, (int)n, MPI_FLOAT, root, comm));
    int ok = memcmp(got, x, sizeof(float) * (size_t)n) == 0;
    char what[256];
    snprintf(what, sizeof what, "broadcast from %d over %s (size %d) [%lld,%lld]: %s", root, sw_group_name(g),
             sw_mesh_size(m, g), (long long)rows, (long long)cols, ok ? "equals MPI_Bcast" : "DIFFERS from MPI_Bcast");
    tu_check_ranks(what, ok);
    free(x); free(got);
}

/* Part j of x [R, C] split into p along dim (0 rows, 1 cols), copied to or
 * from a row-major [pr, pc] buffer. */
static void part_copy(float *x, int64_t R, int64_t C, int dim, int p, int j, float *buf, int to_buf)
{
    const int64_t pr = dim == 0 ? R / p : R, pc = dim == 1 ? C / p : C;
    const int64_t r0 = dim == 0 ? j * pr : 0, c0 = dim == 1 ? j * pc : 0;
    for (int64_t r = 0; r < pr; r++)
        for (int64_t k = 0; k < pc; k++) {
            float *e = &x[(r0 + r) * C + c0 + k];
            if (to_buf) buf[r * pc + k] = *e;
            else *e = buf[r * pc + k];
        }
}

static const char *dim_name(int d) { return d == 0 ? "rows" : "cols"; }

/* in [R, C] with parts [pr, pc] (scatter sd), out gathered along gd, then
 * back with the dims swapped, both submitted before any wait: the first
 * equals MPI_Alltoall on the packed parts, the second returns in. */
static void test_alltoall(sw_comm *c, sw_group g, int64_t pr, int64_t pc, int sd, int gd, uint64_t seed)
{
    const sw_mesh *m = sw_comm_mesh(c);
    MPI_Comm comm = sw_mesh_comm(m, g);
    const int p = sw_mesh_size(m, g);
    const int64_t R = sd == 0 ? pr * p : pr, C = sd == 1 ? pc * p : pc;
    const int64_t OR = gd == 0 ? pr * p : pr, OC = gd == 1 ? pc * p : pc, n = pr * pc * p, part = pr * pc;
    float *x = xmalloc_f(n), *sbuf = xmalloc_f(n), *rbuf = xmalloc_f(n), *ref = xmalloc_f(n);
    tu_rand(x, n, seed * 1000 + (uint64_t)me, 1.0f);
    sw_tensor *in = tu_tensor("a2a_in", R, C, x);
    sw_tensor *out = sw_tensor_new2d("a2a_out", SW_F32, OR, OC);
    sw_tensor *back = sw_tensor_new2d("a2a_back", SW_F32, R, C);
    sw_alltoall(c, g, in, out, sd, gd);
    sw_alltoall(c, g, out, back, gd, sd);
    float *got = tu_read(out), *got_back = tu_read(back), *in_after = tu_read(in);
    sw_tensor_free(in);
    sw_tensor_free(out);
    sw_tensor_free(back);
    quiesce();
    for (int j = 0; j < p; j++) part_copy(x, R, C, sd, p, j, sbuf + j * part, 1);
    SW_CHECK(MPI_Alltoall(sbuf, (int)part, MPI_FLOAT, rbuf, (int)part, MPI_FLOAT, comm));
    for (int j = 0; j < p; j++) part_copy(ref, OR, OC, gd, p, j, rbuf + j * part, 0);
    const size_t bytes = sizeof(float) * (size_t)n;
    int ok = memcmp(got, ref, bytes) == 0, round = memcmp(got_back, x, bytes) == 0;
    int untouched = memcmp(in_after, x, bytes) == 0;
    char what[256];
    snprintf(what, sizeof what, "alltoall over %s (size %d) [%lld,%lld] -> [%lld,%lld] (scatter %s, gather %s): %s; "
             "back: %s, input %s", sw_group_name(g), p, (long long)R, (long long)C, (long long)OR, (long long)OC,
             dim_name(sd), dim_name(gd), ok ? "equals MPI_Alltoall" : "DIFFERS from MPI_Alltoall",
             round ? "original" : "NOT the original", untouched ? "untouched" : "MODIFIED");
    tu_check_ranks(what, ok && round && untouched);
    free(x); free(sbuf); free(rbuf); free(ref); free(got); free(got_back); free(in_after);
}

/* send -> recv shifted by shift (in place when inplace), against
 * MPI_Sendrecv; then p shifts by shift through two buffers, submitted
 * together, return the original. */
static void test_ring_shift(sw_comm *c, sw_group g, int64_t rows, int64_t cols, int shift, int inplace,
                            uint64_t seed)
{
    const sw_mesh *m = sw_comm_mesh(c);
    MPI_Comm comm = sw_mesh_comm(m, g);
    const int p = sw_mesh_size(m, g), r = sw_mesh_rank(m, g);
    const int64_t n = rows * cols;
    float *x = xmalloc_f(n), *ref = xmalloc_f(n);
    tu_rand(x, n, seed * 1000 + (uint64_t)me, 1.0f);
    sw_tensor *a = tu_tensor("shift_a", rows, cols, x);
    sw_tensor *b = inplace ? a : sw_tensor_new2d("shift_b", SW_F32, rows, cols);
    sw_ring_shift(c, g, a, b, shift);
    float *got = tu_read(b), *a_after = tu_read(a);
    /* p more shifts: a full turn */
    sw_tensor *u = sw_tensor_new2d("shift_u", SW_F32, rows, cols);
    for (int k = 0; k < p; k++) sw_ring_shift(c, g, k % 2 ? u : b, k % 2 ? b : u, shift);
    float *turn = tu_read(p % 2 ? u : b);
    if (!inplace) sw_tensor_free(b);
    sw_tensor_free(a);
    sw_tensor_free(u);
    quiesce();
    const int k = ((shift % p) + p) % p;
    SW_CHECK(MPI_Sendrecv(x, (int)n, MPI_FLOAT, (r + k) % p, 0, ref, (int)n, MPI_FLOAT, (r - k + p) % p, 0, comm,
                          MPI_STATUS_IGNORE));
    const size_t bytes = sizeof(float) * (size_t)n;
    int ok = memcmp(got, ref, bytes) == 0, full = memcmp(turn, ref, bytes) == 0;
    int untouched = inplace || memcmp(a_after, x, bytes) == 0;
    const char *send_state = inplace ? "in place" : untouched ? "untouched" : "MODIFIED";
    char what[256];
    snprintf(what, sizeof what, "ring shift by %d%s over %s (size %d) [%lld,%lld]: %s, send %s, %d more shifts %s",
             shift, inplace ? " in place" : "", sw_group_name(g), p, (long long)rows, (long long)cols,
             ok ? "equals MPI_Sendrecv" : "DIFFERS from MPI_Sendrecv", send_state, p,
             full ? "come back" : "DO NOT come back");
    tu_check_ranks(what, ok && untouched && full);
    free(x); free(ref); free(got); free(a_after); free(turn);
}

/* Ring shifts and all-to-alls over g: full, every shape and pair of dims. */
static void test_moves(sw_comm *c, sw_group g, int full, uint64_t *seed)
{
    const int p = sw_mesh_size(sw_comm_mesh(c), g);
    static const int shifts[] = {1, -1, 0, 2, -3};
    const size_t nshifts = full ? sizeof shifts / sizeof shifts[0] : 2;
    static const int64_t sshapes[][2] = {{37, 101}, {1, 1}, {1031, 257}};
    for (size_t s = 0; s < (full ? 3u : 2u); s++)
        for (size_t i = 0; i < nshifts; i++) test_ring_shift(c, g, sshapes[s][0], sshapes[s][1], shifts[i], 0, ++*seed);
    test_ring_shift(c, g, 37, 101, 1, 1, ++*seed);
    test_ring_shift(c, g, 5, 3, -1, 1, ++*seed);
    /* part shapes [pr, pc]: one element, one column, odd, larger */
    static const int64_t parts[][2] = {{1, 1}, {5, 1}, {3, 7}, {64, 96}, {1, 40}};
    static const int dims[][2] = {{1, 0}, {0, 1}, {0, 0}, {1, 1}};
    const size_t nparts = full ? sizeof parts / sizeof parts[0] : 3, ndims = full ? 4 : 2;
    for (size_t i = 0; i < nparts; i++)
        for (size_t d = 0; d < ndims; d++) test_alltoall(c, g, parts[i][0], parts[i][1], dims[d][0], dims[d][1], ++*seed);
    (void)p;
}

/* full: every shape and algorithm; otherwise (sub-communicators, which
 * already run with the whole world's algorithms tested) a shorter list. */
static void test_group(sw_comm *c, sw_group g, int full, uint64_t *seed)
{
    const int p = sw_mesh_size(sw_comm_mesh(c), g);
    static const int64_t shapes[][2] = {{1, 1}, {3, 1}, {5, 3}, {257, 129}, {1, 5}, {7, 11}, {2, 1001}, {1, 40001}};
    static const sw_comm_algo algos[] = {SW_ALGO_RING, SW_ALGO_DIRECT, SW_ALGO_AUTO};
    const size_t nshapes = full ? sizeof shapes / sizeof shapes[0] : 4, nalgos = full ? 3 : 2;
    for (size_t s = 0; s < nshapes; s++)
        for (size_t a = 0; a < nalgos; a++)
            for (int op = SW_SUM; op <= SW_MAX; op++)
                test_allreduce(c, g, shapes[s][0], shapes[s][1], (sw_reduce_op)op, algos[a], ++*seed);
    sw_comm_set_algo(c, SW_ALGO_AUTO);
    const int64_t rowsets[] = {p, p + 1, 100, 2 * p + 1};
    const int64_t colsets[] = {1, 517, 3};
    const size_t nrows = full ? 4 : 3, ncols = full ? 3 : 2;
    for (size_t i = 0; i < nrows; i++)
        for (size_t j = 0; j < ncols; j++) {
            test_allgather(c, g, rowsets[i], colsets[j], ++*seed);
            for (int op = SW_SUM; op <= SW_MAX; op++)
                test_reduce_scatter(c, g, rowsets[i], colsets[j], (sw_reduce_op)op, ++*seed);
        }
    for (int root = 0; root < p; root += (p > 1 ? p - 1 : 1)) {
        test_broadcast(c, g, 1, 1, root, ++*seed);
        test_broadcast(c, g, 37, 101, root, ++*seed);
    }
}

/* Tags wrap below the bound: with the bound lowered to 2(p-1) + 1 a ring
 * all-reduce (2(p-1) tags) starts again at 0 every second call. The calls
 * are quiesced in between: a tag is reused only when its message is gone. */
static void test_tags(sw_comm *c, uint64_t *seed)
{
    const sw_group g = SW_GROUP_WORLD;
    const int p = sw_mesh_size(sw_comm_mesh(c), g);
    const int64_t ub = 2 * (p - 1) + 1;
    sw_comm_set_tag_ub(c, g, ub);
    int ok = sw_comm_next_tag(c, g) <= ub;
    for (int i = 0; i < 6; i++) {
        test_allreduce(c, g, 5, 7, SW_SUM, SW_ALGO_RING, ++*seed);
        int64_t next = sw_comm_next_tag(c, g);
        /* after a ring: its 2(p-1) tags were taken from 0 or from 2(p-1)... */
        ok &= next == 2 * (p - 1);
        test_allreduce(c, g, 5, 7, SW_MAX, SW_ALGO_DIRECT, ++*seed); /* 1 tag: 2(p-1) <= ub */
        ok &= sw_comm_next_tag(c, g) == 2 * (p - 1) + 1;
    }
    sw_comm_set_tag_ub(c, g, INT64_MAX); /* back to MPI_TAG_UB */
    int *mpi_ub = NULL, flag = 0;
    SW_CHECK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &mpi_ub, &flag));
    ok &= flag && mpi_ub && *mpi_ub >= 32767;
    char what[160];
    snprintf(what, sizeof what, "tags wrap below a lowered bound %lld and stay in [0, %lld]; MPI_TAG_UB is %d",
             (long long)ub, (long long)ub, flag && mpi_ub ? *mpi_ub : -1);
    tu_check_ranks(what, ok);
}

/* 100 all-reduces alternating groups g1 and g2, each fed by a compute task
 * (t_i += ones) and consumed by one (acc += t_i), all submitted before any
 * wait. Small integers: every sum is exact, so the check is equality. Every
 * fourth result is also ring-shifted (by 1 or -1) on its group and
 * the shifted copy consumed as well (acc += shifted); and between them an
 * all-to-all there and back (Ulysses' pair of exchanges) on the group. */
static void stress(sw_comm *c, sw_group g1, sw_group g2)
{
    enum { N = 100 };
    const sw_mesh *m = sw_comm_mesh(c);
    const int64_t R = 64, C = 33;
    sw_comm_set_algo(c, SW_ALGO_AUTO);
    /* MPI runs both sizes; without MPI_THREAD_MULTIPLE [64,33] rings, [3,5] goes direct */
    sw_comm_set_small_bytes(c, 1024);
    float *x[N];
    sw_tensor *t[N];
    int64_t rows[N], cols[N];
    for (int i = 0; i < N; i++) {
        rows[i] = (i / 2) % 2 ? R : 3;
        cols[i] = (i / 2) % 2 ? C : 5;
        x[i] = xmalloc_f(rows[i] * cols[i]);
        for (int64_t k = 0; k < rows[i] * cols[i]; k++) x[i][k] = (float)((me + 1) * (i % 7) + (k % 5));
        t[i] = tu_tensor("stress", rows[i], cols[i], x[i]);
    }
    sw_tensor *sh[N] = {NULL}, *al_in[N] = {NULL}, *al_mid[N] = {NULL}, *al_back[N] = {NULL};
    float *al_x[N] = {NULL};
    for (int i = 0; i < N; i++) {
        const int pg = sw_mesh_size(m, i % 2 ? g2 : g1);
        if (i % 8 == 1 || i % 8 == 4) sh[i] = sw_tensor_new2d("stress_shift", SW_F32, rows[i], cols[i]);
        if (i % 8 == 3 || i % 8 == 6) {
            al_x[i] = xmalloc_f(6 * pg * pg);
            for (int64_t k = 0; k < 6 * pg * pg; k++) al_x[i][k] = (float)(1000 * me + i + k);
            al_in[i] = tu_tensor("stress_a2a_in", 2 * pg, 3 * pg, al_x[i]);
            al_mid[i] = sw_tensor_new2d("stress_a2a_mid", SW_F32, 2 * pg * pg, 3);
            al_back[i] = sw_tensor_new2d("stress_a2a_back", SW_F32, 2 * pg, 3 * pg);
        }
    }
    sw_tensor *ones_s = sw_tensor_new2d("ones_s", SW_F32, 3, 5), *ones_l = sw_tensor_new2d("ones_l", SW_F32, R, C);
    sw_tensor *acc_s = sw_tensor_new2d("acc_s", SW_F32, 3, 5), *acc_l = sw_tensor_new2d("acc_l", SW_F32, R, C);
    sw_tensor_fill(ones_s, 1.0f);
    sw_tensor_fill(ones_l, 1.0f);
    sw_tensor_fill(acc_s, 0.0f);
    sw_tensor_fill(acc_l, 0.0f);
    double t0 = starpu_timing_now();
    for (int i = 0; i < N; i++) {
        int large = rows[i] == R;
        sw_axpy(1.0f, sw_tensor_whole(large ? ones_l : ones_s, STARPU_R), sw_tensor_whole(t[i], STARPU_RW));
        sw_allreduce(c, i % 2 ? g2 : g1, t[i], i % 3 == 0 ? SW_MAX : SW_SUM);
        sw_axpy(1.0f, sw_tensor_whole(t[i], STARPU_R), sw_tensor_whole(large ? acc_l : acc_s, STARPU_RW));
        if (sh[i]) {
            sw_ring_shift(c, i % 2 ? g2 : g1, t[i], sh[i], (i / 4) % 2 ? -1 : 1);
            sw_axpy(1.0f, sw_tensor_whole(sh[i], STARPU_R), sw_tensor_whole(large ? acc_l : acc_s, STARPU_RW));
        }
        if (al_in[i]) {
            sw_alltoall(c, i % 2 ? g2 : g1, al_in[i], al_mid[i], 1, 0);
            sw_alltoall(c, i % 2 ? g2 : g1, al_mid[i], al_back[i], 0, 1);
        }
    }
    float *got_acc_s = tu_read(acc_s), *got_acc_l = tu_read(acc_l);
    float *got[N];
    for (int i = 0; i < N; i++) got[i] = tu_read(t[i]);
    double ms = (starpu_timing_now() - t0) / 1000.0;
    quiesce();
    int ok = 1;
    float *ref_acc_s = calloc(15, sizeof(float)), *ref_acc_l = calloc((size_t)(R * C), sizeof(float));
    if (!ref_acc_s || !ref_acc_l) { perror("calloc"); exit(99); }
    for (int i = 0; i < N; i++) {
        int64_t n = rows[i] * cols[i];
        float *ref = xmalloc_f(n);
        for (int64_t k = 0; k < n; k++) x[i][k] += 1.0f;
        SW_CHECK(MPI_Allreduce(x[i], ref, (int)n, MPI_FLOAT, i % 3 == 0 ? MPI_MAX : MPI_SUM,
                               sw_mesh_comm(m, i % 2 ? g2 : g1)));
        if (memcmp(ref, got[i], sizeof(float) * (size_t)n) != 0) {
            ok = 0;
            printf("rank %d: stress all-reduce %d differs\n", me, i);
        }
        float *acc = rows[i] == R ? ref_acc_l : ref_acc_s;
        for (int64_t k = 0; k < n; k++) acc[k] += ref[k];
        const sw_group gi = i % 2 ? g2 : g1;
        const MPI_Comm ci = sw_mesh_comm(m, gi);
        const int pg = sw_mesh_size(m, gi), rg = sw_mesh_rank(m, gi);
        if (sh[i]) {
            const int k1 = (i / 4) % 2 ? pg - 1 : 1;
            float *shifted = xmalloc_f(n);
            SW_CHECK(MPI_Sendrecv(ref, (int)n, MPI_FLOAT, (rg + k1) % pg, 0, shifted, (int)n, MPI_FLOAT,
                                  (rg - k1 + pg) % pg, 0, ci, MPI_STATUS_IGNORE));
            float *g_sh = tu_read(sh[i]);
            if (memcmp(shifted, g_sh, sizeof(float) * (size_t)n) != 0) {
                ok = 0;
                printf("rank %d: stress ring shift %d differs\n", me, i);
            }
            for (int64_t k = 0; k < n; k++) acc[k] += shifted[k];
            free(shifted);
            free(g_sh);
            sw_tensor_free(sh[i]);
        }
        if (al_in[i]) {
            const int64_t na = 6 * pg * pg, part = 6 * pg;
            float *sb = xmalloc_f(na), *rb = xmalloc_f(na), *ra = xmalloc_f(na);
            for (int j = 0; j < pg; j++) part_copy(al_x[i], 2 * pg, 3 * pg, 1, pg, j, sb + j * part, 1);
            SW_CHECK(MPI_Alltoall(sb, (int)part, MPI_FLOAT, rb, (int)part, MPI_FLOAT, ci));
            for (int j = 0; j < pg; j++) part_copy(ra, 2 * pg * pg, 3, 0, pg, j, rb + j * part, 0);
            float *g_mid = tu_read(al_mid[i]), *g_back = tu_read(al_back[i]);
            if (memcmp(ra, g_mid, sizeof(float) * (size_t)na) != 0 ||
                memcmp(al_x[i], g_back, sizeof(float) * (size_t)na) != 0) {
                ok = 0;
                printf("rank %d: stress all-to-all %d differs\n", me, i);
            }
            free(sb); free(rb); free(ra); free(g_mid); free(g_back); free(al_x[i]);
            sw_tensor_free(al_in[i]); sw_tensor_free(al_mid[i]); sw_tensor_free(al_back[i]);
        }
        free(ref);
        free(got[i]);
        free(x[i]);
        sw_tensor_free(t[i]);
    }
    int acc_ok = memcmp(ref_acc_s, got_acc_s, 15 * sizeof(float)) == 0 &&
                 memcmp(ref_acc_l, got_acc_l, sizeof(float) * (size_t)(R * C)) == 0;
    char what[256];
    const char *sched = getenv("STARPU_SCHED");
    snprintf(what, sizeof what, "stress (sched %s): %d all-reduces, %d ring shifts, %d all-to-all pairs alternating %s and %s "
             "with compute tasks in %.0f ms: results %s, consumers %s", sched ? sched : "default", N, N / 4, N / 4, sw_group_name(g1), sw_group_name(g2), ms,
             ok ? "equal MPI_Allreduce" : "DIFFER", acc_ok ? "correct" : "WRONG");
    tu_check_ranks(what, ok && acc_ok);
    free(ref_acc_s); free(ref_acc_l); free(got_acc_s); free(got_acc_l);
    sw_tensor_free(ones_s); sw_tensor_free(ones_l); sw_tensor_free(acc_s); sw_tensor_free(acc_l);
    sw_comm_set_small_bytes(c, SW_COMM_SMALL_BYTES);
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    me = sw_rank();
    world = sw_world_size();
    int only_stress = argc == 2 && strcmp(argv[1], "--stress") == 0;

    sw_mesh *flat = sw_mesh_create(NULL); /* dp = world */
    sw_comm *cf = sw_comm_create(flat);
    sw_mesh *grid = NULL;
    sw_comm *cg = NULL;
    if (world == 4) {
        grid = sw_mesh_create(&(sw_mesh_dims){2, 1, 1, 2, 1});
        cg = sw_comm_create(grid);
    }

    if (argc == 2 && strcmp(argv[1], "--bad-alltoall") == 0) {
        sw_tensor *in = sw_tensor_new2d("bad_in", SW_F32, 2, world + 1);
        sw_tensor *out = sw_tensor_new2d("bad_out", SW_F32, 2 * world, 1);
        sw_alltoall(cf, SW_GROUP_WORLD, in, out, 1, 0); /* aborts */
        printf("rank %d: sw_alltoall accepted %lld columns over %d ranks\n", me, (long long)(world + 1), world);
        fflush(stdout);
        sw_shutdown();
        return 1;
    }

    uint64_t seed = 0;
    if (!only_stress) {
        test_group(cf, SW_GROUP_WORLD, 1, &seed);
        test_tags(cf, &seed);
        test_allreduce(cf, SW_GROUP_WORLD, 1031, 1024, SW_SUM, SW_ALGO_AUTO, ++seed); /* 4 MiB: ring */
        test_allreduce(cf, SW_GROUP_TP, 5, 3, SW_SUM, SW_ALGO_AUTO, ++seed); /* group of one */
        test_allgather(cf, SW_GROUP_TP, 5, 3, ++seed);
        test_reduce_scatter(cf, SW_GROUP_TP, 5, 3, SW_SUM, ++seed);
        test_broadcast(cf, SW_GROUP_TP, 5, 3, 0, ++seed);
        test_moves(cf, SW_GROUP_WORLD, 1, &seed);
        test_moves(cf, SW_GROUP_TP, 0, &seed); /* group of one */
        if (cg) {
            test_group(cg, SW_GROUP_TP, 0, &seed);
            test_group(cg, SW_GROUP_DP, 0, &seed);
            test_moves(cg, SW_GROUP_TP, 0, &seed);
            test_moves(cg, SW_GROUP_DP, 0, &seed);
        }
    }
    if (cg) stress(cg, SW_GROUP_TP, SW_GROUP_DP);
    else stress(cf, SW_GROUP_WORLD, SW_GROUP_DP);
    sw_counters_print(stdout); /* what ran: test_comm.sh reads the deferred ends */

    sw_comm_destroy(cf);
    sw_comm_destroy(cg);
    sw_mesh_destroy(grid);
    sw_mesh_destroy(flat);

    return tu_finish_all();
}
