/* The NCCL collectives (comm_nccl.h) under mpirun (tests/test_nccl.sh):
 * every collective against values computed on the host (exact: with two
 * ranks a sum is one fp32 addition), equal and uneven row splits, int32
 * sums, groups of one rank, the all-to-all both ways, ring shifts and the
 * all-to-all of parts on strided tiles, sw_comm routed to NCCL, the CPU backend's
 * result on the same input, and 60 collectives on two communicators
 * interleaved with compute (the token handles keep the order).
 * Skipped (exit 77, a "SKIP" line from every rank, rank 0's with the
 * reason) in builds without CUDA, or when a rank has no CUDA worker, or the
 * ranks of a node outnumber its GPUs (NCCL wants a device per rank);
 * test_nccl.sh counts the lines, so a rank that dies instead is a failure. */
#include "config.h"

#ifndef STARWEAVE_USE_CUDA
#include <stdio.h>
int main(void)
{
    printf("SKIP: built without CUDA (configure --enable-cuda)\n");
    return 77;
}
#else
#include <string.h>

#include "starweave/comm_nccl.h"
#include "testutil.h"

static int me, np;

/* value of element i of rank r's input number k */
static float val(int k, int r, int64_t i) { return (float)((k * 131 + r * 17 + i * 7) % 1000) * 0.01f - 5.0f; }

static sw_tensor *input(const char *name, int64_t R, int64_t C, int k, int r)
{
    sw_tensor *t = sw_tensor_new2d(name, SW_F32, R, C);
    float *x = malloc(sizeof(float) * (size_t)(R * C));
    if (!x) exit(99);
    for (int64_t i = 0; i < R * C; i++) x[i] = val(k, r, i);
    sw_tensor_write_host(t, x);
    free(x);
    return t;
}

/* got == want element by element (bitwise for two ranks; 1e-6 of the value otherwise) */
static void expect(const char *what, sw_tensor *t, const float *want, int exact)
{
    float *got = tu_read(t);
    const int64_t n = sw_tensor_numel(t);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad += exact ? memcmp(&got[i], &want[i], sizeof(float)) != 0
                     : !(fabsf(got[i] - want[i]) <= 1e-6f * (1.0f + fabsf(want[i])));
    char buf[256];
    snprintf(buf, sizeof buf, "%s (%lld of %lld values differ)", what, (long long)bad, (long long)n);
    tu_check_ranks(buf, bad == 0);
    free(got);
}

static float *want_sum(int k, int64_t first, int64_t n)
{
    float *w = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!w) exit(99);
    for (int64_t i = 0; i < n; i++) {
        float s = val(k, 0, first + i);
        for (int r = 1; r < np; r++) s += val(k, r, first + i); /* rank order, as the ring does at p = 2 */
        w[i] = s;
    }
    return w;
}

static void test_allreduce(sw_nccl *c, sw_group g)
{
    const int64_t R = 37, C = 129;
    sw_tensor *t = input("t", R, C, 1, me), *m = input("m", R, C, 2, me);
    sw_nccl_allreduce(c, g, t, SW_SUM);
    sw_nccl_allreduce(c, g, m, SW_MAX);
    float *w = want_sum(1, 0, R * C), *wm = malloc(sizeof(float) * (size_t)(R * C));
    if (!wm) exit(99);
    for (int64_t i = 0; i < R * C; i++) {
        wm[i] = val(2, 0, i);
        for (int r = 1; r < np; r++) wm[i] = val(2, r, i) > wm[i] ? val(2, r, i) : wm[i];
    }
    expect("allreduce sum", t, w, np == 2);
    expect("allreduce max", m, wm, 1);
    /* int32 */
    sw_tensor *ti = sw_tensor_new2d("ti", SW_I32, 5, 3);
    int32_t xi[15], gi[15];
    for (int i = 0; i < 15; i++) xi[i] = i * 1000 + me;
    sw_tensor_write_host(ti, xi);
    sw_nccl_allreduce(c, g, ti, SW_SUM);
    sw_tensor_read_host(ti, gi);
    int ok = 1;
    for (int i = 0; i < 15; i++) ok &= gi[i] == i * 1000 * np + np * (np - 1) / 2;
    tu_check_ranks("allreduce int32 sum", ok);
    free(w), free(wm);
    sw_tensor_free(t), sw_tensor_free(m), sw_tensor_free(ti);
}

static void test_gather_scatter(sw_nccl *c, sw_group g, int64_t N)
{
    const int64_t C = 33;
    int64_t first, n;
    sw_tile_range(N, np, me, &first, &n);
    char what[128];
    /* all-gather: member r's rows are val(3, r, .) at their global place */
    sw_tensor *in = sw_tensor_new2d("in", SW_F32, n, C), *out = sw_tensor_new2d("out", SW_F32, N, C);
    float *x = malloc(sizeof(float) * (size_t)(N * C)), *w = malloc(sizeof(float) * (size_t)(N * C));
    if (!x || !w) exit(99);
    for (int r = 0; r < np; r++) {
        int64_t f, k;
        sw_tile_range(N, np, r, &f, &k);
        for (int64_t i = f * C; i < (f + k) * C; i++) w[i] = val(3, r, i);
    }
    sw_tensor_write_host(in, w + first * C);
    sw_nccl_allgather(c, g, in, out);
    snprintf(what, sizeof what, "allgather N=%lld", (long long)N);
    expect(what, out, w, 1);
    /* in place: only this member's rows are valid on entry */
    for (int64_t i = 0; i < N * C; i++) x[i] = (i >= first * C && i < (first + n) * C) ? w[i] : NAN;
    sw_tensor_write_host(out, x);
    sw_nccl_allgather_inplace(c, g, out);
    snprintf(what, sizeof what, "allgather in place N=%lld", (long long)N);
    expect(what, out, w, 1);
    /* reduce-scatter: this member gets the sums of its rows */
    sw_tensor *full = input("full", N, C, 4, me), *part = sw_tensor_new2d("part", SW_F32, n, C);
    sw_nccl_reduce_scatter(c, g, full, part, SW_SUM);
    float *ws = want_sum(4, first * C, n * C);
    snprintf(what, sizeof what, "reduce_scatter N=%lld", (long long)N);
    expect(what, part, ws, np == 2);
    free(x), free(w), free(ws);
    sw_tensor_free(in), sw_tensor_free(out), sw_tensor_free(full), sw_tensor_free(part);
}

static void test_broadcast_alltoall(sw_nccl *c, sw_group g)
{
    const int root = np - 1;
    sw_tensor *t = input("t", 17, 40, 5, me);
    sw_nccl_broadcast(c, g, t, root);
    float *w = malloc(sizeof(float) * 17 * 40);
    if (!w) exit(99);
    for (int64_t i = 0; i < 17 * 40; i++) w[i] = val(5, root, i);
    expect("broadcast from the last rank", t, w, 1);
    free(w);

    /* Ulysses exchange [s/p, h] -> [s, h/p] (scatter cols, gather rows) and back */
    const int64_t sl = 6, h = 8 * np;
    sw_tensor *a = input("a", sl, h, 6, me), *b = sw_tensor_new2d("b", SW_F32, sl * np, h / np);
    sw_tensor *back = sw_tensor_new2d("back", SW_F32, sl, h);
    sw_nccl_alltoall(c, g, a, b, 1, 0);
    sw_nccl_alltoall(c, g, b, back, 0, 1);
    /* b row (j * sl + i), col cc = member j's a[i, me * h/p + cc] */
    float *wb = malloc(sizeof(float) * (size_t)(sl * h));
    if (!wb) exit(99);
    for (int j = 0; j < np; j++)
        for (int64_t i = 0; i < sl; i++)
            for (int64_t cc = 0; cc < h / np; cc++)
                wb[(j * sl + i) * (h / np) + cc] = val(6, j, i * h + me * (h / np) + cc);
    expect("alltoall scatter cols, gather rows", b, wb, 1);
    float *wa = malloc(sizeof(float) * (size_t)(sl * h));
    if (!wa) exit(99);
    for (int64_t i = 0; i < sl * h; i++) wa[i] = val(6, me, i);
    expect("alltoall back (scatter rows, gather cols)", back, wa, 1);
    free(wb), free(wa);
    sw_tensor_free(t), sw_tensor_free(a), sw_tensor_free(b), sw_tensor_free(back);
}

/* Ring shifts (tensor to tensor, and in place on a strided column tile) and
 * the all-to-all of parts on strided column tiles: bitwise. */
static void test_shift_parts(sw_nccl *c, sw_group g)
{
    const int64_t R = 5, C = 7;
    const int left = (me - 1 + np) % np;
    sw_tensor *a = input("a", R, C, 12, me), *b = sw_tensor_new2d("b", SW_F32, R, C);
    double before = sw_nccl_sent_bytes(c, g);
    sw_nccl_ring_shift(c, g, a, b, 1);
    float *w = malloc(sizeof(float) * (size_t)(R * 3 * C));
    if (!w) exit(99);
    for (int64_t i = 0; i < R * C; i++) w[i] = val(12, left, i);
    expect("ring shift by 1: the left neighbour's value", b, w, 1);
    tu_check_ranks("ring shift counted as one buffer sent", sw_nccl_sent_bytes(c, g) - before == (double)(R * C * 4));

    /* in place on the middle column tile of t [R, 3C] */
    sw_tensor *t = input("t", R, 3 * C, 13, me);
    sw_nccl_ring_shift_handles(c, g, sw_tensor_tiles(t, SW_COLS, 3, STARPU_RW)[1], NULL, -1);
    const int right = (me + 1) % np;
    for (int64_t i = 0; i < R * 3 * C; i++) w[i] = val(13, (i % (3 * C)) / C == 1 ? right : me, i);
    expect("ring shift by -1 in place on a strided tile: the right neighbour's columns, the rest kept", t, w, 1);
    free(w);

    /* n = 2 parts per member, column tiles of [R, 2 np C] */
    const int n = 2, np2 = n * np;
    sw_tensor *s = input("s", R, np2 * C, 14, me), *r = sw_tensor_new2d("r", SW_F32, R, np2 * C);
    sw_nccl_alltoall_parts(c, g, n, sw_tensor_tiles(s, SW_COLS, np2, STARPU_R),
                           sw_tensor_tiles(r, SW_COLS, np2, STARPU_W));
    /* r's tile j*n + i = member j's s tile me*n + i */
    float *wr = malloc(sizeof(float) * (size_t)(R * np2 * C));
    if (!wr) exit(99);
    for (int64_t row = 0; row < R; row++)
        for (int64_t col = 0; col < np2 * C; col++) {
            const int k = (int)(col / C), j = k / n, i = k % n;
            wr[row * np2 * C + col] = val(14, j, row * np2 * C + (me * n + i) * C + col % C);
        }
    expect("all-to-all of 2 parts per member on strided tiles", r, wr, 1);
    free(wr);
    sw_tensor_free(a), sw_tensor_free(b), sw_tensor_free(t), sw_tensor_free(s), sw_tensor_free(r);
}

/* A sw_comm handed the NCCL context: comm.h's calls become NCCL tasks. */
static void test_routed(sw_nccl *c, sw_comm *cc, sw_group g)
{
    const long calls = sw_nccl_calls(c, g);
    double bytes0, bytes1;
    long n0, n1;
    sw_comm_traffic(cc, g, &bytes0, &n0);
    sw_comm_use_nccl(cc, c);
    sw_tensor *a = input("a", 33, 10, 15, me);
    sw_allreduce(cc, g, a, SW_SUM);
    float *w = want_sum(15, 0, 330);
    expect("sw_allreduce through sw_comm_use_nccl", a, w, np == 2);
    sw_comm_traffic(cc, g, &bytes1, &n1);
    sw_comm_use_nccl(cc, NULL);
    tu_check_ranks("the routed all-reduce ran on NCCL and is in sw_comm_traffic",
                   sw_nccl_calls(c, g) == calls + 1 && n1 == n0 + 1 && bytes1 > bytes0);
    free(w);
    sw_tensor_free(a);
}

/* The CPU backend on the same input: the same sums (two ranks: bitwise). */
static void test_vs_cpu(sw_nccl *c, sw_comm *cc, sw_group g)
{
    sw_tensor *a = input("a", 64, 100, 7, me), *b = input("b", 64, 100, 7, me);
    sw_nccl_allreduce(c, g, a, SW_SUM);
    sw_allreduce(cc, g, b, SW_SUM);
    float *x = tu_read(b);
    expect("allreduce: NCCL equals the CPU backend", a, x, np == 2);
    free(x);
    sw_tensor_free(a), sw_tensor_free(b);
}

/* 60 collectives alternating between two communicators, each fed by a
 * compute task and feeding the next: t_k = allreduce(t_{k-1} * 0.5 + x) */
static void test_order(sw_nccl *c, sw_group g1, sw_group g2)
{
    sw_tensor *t1 = input("t1", 20, 50, 8, 0), *t2 = input("t2", 20, 50, 9, 0); /* the same on every rank */
    sw_tensor *x = input("x", 20, 50, 10, me);
    float *w1 = malloc(sizeof(float) * 1000), *w2 = malloc(sizeof(float) * 1000);
    if (!w1 || !w2) exit(99);
    for (int64_t i = 0; i < 1000; i++) {
        w1[i] = val(8, 0, i);
        w2[i] = val(9, 0, i);
    }
    for (int k = 0; k < 30; k++) {
        sw_axpy(0.5f, sw_tensor_whole(x, STARPU_R), sw_tensor_whole(t1, STARPU_RW));
        sw_nccl_allreduce(c, g1, t1, SW_MAX);
        sw_axpy(0.25f, sw_tensor_whole(x, STARPU_R), sw_tensor_whole(t2, STARPU_RW));
        sw_nccl_allreduce(c, g2, t2, SW_MAX);
    }
    /* the same on the host: max over ranks of (w + a x_r) */
    for (int k = 0; k < 30; k++)
        for (int64_t i = 0; i < 1000; i++) {
            float m1 = -INFINITY, m2 = -INFINITY;
            for (int r = 0; r < np; r++) {
                float a = w1[i] + 0.5f * val(10, r, i), b = w2[i] + 0.25f * val(10, r, i);
                m1 = a > m1 ? a : m1;
                m2 = b > m2 ? b : m2;
            }
            w1[i] = m1, w2[i] = m2;
        }
    expect("60 collectives on two communicators, interleaved with compute: first", t1, w1, 0);
    expect("60 collectives on two communicators, interleaved with compute: second", t2, w2, 0);
    free(w1), free(w2);
    sw_tensor_free(t1), sw_tensor_free(t2), sw_tensor_free(x);
}

int main(int argc, char **argv)
{
    sw_options opt;
    sw_options_default(&opt);
    opt.quiet = 1;
    opt.ncuda = 1; /* one GPU per rank, whatever $STARPU_NCUDA says (make check sets 0) */
    if (sw_init(&argc, &argv, &opt) != 0) {
        printf("SKIP: StarPU could not start\n");
        return 77;
    }
    me = sw_rank(), np = sw_world_size();
    char why[256] = "";
    int ok = sw_nccl_check(why, sizeof why) == 0;
    if (ok && np < 2) snprintf(why, sizeof why, "needs 2 ranks or more (mpirun -np 2)"), ok = 0;
    if (!tu_all_ranks_can(ok, why)) {
        sw_shutdown();
        return 77;
    }
    /* tp = every rank: TP and WORLD are two communicators over the same
     * ranks, DP is a group of one */
    sw_mesh *mesh = sw_mesh_create(&(sw_mesh_dims){np, 1, 1, 1, 1});
    sw_nccl *c = sw_nccl_create(mesh);
    sw_comm *cc = sw_comm_create(mesh);
    test_allreduce(c, SW_GROUP_TP);
    test_gather_scatter(c, SW_GROUP_TP, 4 * np);
    test_gather_scatter(c, SW_GROUP_WORLD, 4 * np + 1);
    test_broadcast_alltoall(c, SW_GROUP_TP);
    test_vs_cpu(c, cc, SW_GROUP_TP);
    test_shift_parts(c, SW_GROUP_TP);
    test_routed(c, cc, SW_GROUP_TP);
    test_order(c, SW_GROUP_TP, SW_GROUP_WORLD);
    /* a group of one: nothing to exchange */
    sw_tensor *t = input("t", 9, 9, 11, me), *o = sw_tensor_new2d("o", SW_F32, 9, 9);
    sw_nccl_allreduce(c, SW_GROUP_DP, t, SW_SUM);
    sw_nccl_allgather(c, SW_GROUP_DP, t, o);
    float *w = tu_read(t);
    expect("group of one: allgather copies, allreduce keeps", o, w, 1);
    free(w);
    sw_tensor_free(t), sw_tensor_free(o);
    tu_check_ranks("collectives counted on TP, none on the group of one",
                   sw_nccl_calls(c, SW_GROUP_TP) > 0 && sw_nccl_calls(c, SW_GROUP_DP) == 0);
    sw_comm_destroy(cc);
    sw_nccl_destroy(c);
    sw_mesh_destroy(mesh);
    return tu_finish_all();
}
#endif
