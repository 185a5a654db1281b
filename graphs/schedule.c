/* The pipeline's schedule (see schedule.h): a list schedule computed from
 * quotas, priorities and costs. */
#include <stdio.h>
#include <stdlib.h>

#include "schedule.h"

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        fprintf(stderr, "starweave: sw_schedule: out of memory\n");
        abort();
    }
    return p;
}

int sw_schedule_quota(int pp, int V, int K, int inflight, int s)
{
    int q = inflight ? inflight * V : (V - 1) * pp + pp - s;
    return q < K * V ? q : K * V;
}

/* Why simulated: StarPU derives dependencies from the order of submission
 * on the shared handles (the layers' scratch, micro slots), so a quota
 * expressed by slot reuse holds only in an order that agrees with it --
 * this one does by construction, and as the simulated execution honours
 * every dependency between stages, the real one cannot wait in a cycle.
 * (The other road, explicit dependencies on handles without sequential
 * consistency, would need the same order to size the slots.) Without
 * chunks it is 1F1B's order for q = pp - s and GPipe's for q = K. */
int sw_schedule(int pp, int V, int K, int inflight, sw_unit *orders, int *slots, int *stuck)
{
    int J = pp * V, total = 2 * K * J, done = 0;
    int *n = xcalloc((size_t)pp, sizeof(int));
    int *fnext = xcalloc((size_t)J, sizeof(int)), *bnext = xcalloc((size_t)J, sizeof(int));
    long *fdone = xcalloc((size_t)J * (size_t)K, sizeof(long)), *bdone = xcalloc((size_t)J * (size_t)K, sizeof(long));
    long *busy = xcalloc((size_t)pp, sizeof(long));
    /* slot[j K + k]: the micro slot micro-batch k holds on virtual stage j; used[s q + i]: slot i of stage s
     * taken (q: the largest quota) */
    int *slot = xcalloc((size_t)J * (size_t)K, sizeof(int)), q = 0;
    for (int s = 0; s < pp; s++)
        if (sw_schedule_quota(pp, V, K, inflight, s) > q) q = sw_schedule_quota(pp, V, K, inflight, s);
    char *used = xcalloc((size_t)pp * (size_t)q, 1);
    const long never = -1;
    for (int i = 0; i < J * K; i++) fdone[i] = bdone[i] = never;
    for (int s = 0; s < pp; s++) slots[s] = 0;
#define READY(a, j, k) ((a)[(size_t)(j) * (size_t)K + (size_t)(k)] != never && (a)[(size_t)(j) * (size_t)K + (size_t)(k)] <= t)
    for (long t = 0; done < total; t++) {
        int progress = 0;
        for (int s = 0; s < pp; s++) {
            if (busy[s] > t) {
                progress = 1;
                continue;
            }
            int held = 0, pick = -1, fwd = 0;
            for (int c = 0; c < V; c++) held += fnext[c * pp + s] - bnext[c * pp + s];
            for (int c = V - 1; c >= 0 && held < sw_schedule_quota(pp, V, K, inflight, s); c--) {
                int j = c * pp + s, k = fnext[j];
                if (k < K && (j == 0 || READY(fdone, j - 1, k))) {
                    pick = c, fwd = 1;
                    break;
                }
            }
            for (int c = V - 1; c >= 0 && pick < 0; c--) {
                int j = c * pp + s, k = bnext[j];
                if (k < fnext[j] && READY(fdone, j, k) && (j == J - 1 || READY(bdone, j + 1, k))) pick = c;
            }
            if (pick < 0) continue;
            int j = pick * pp + s, k = fwd ? fnext[j]++ : bnext[j]++;
            busy[s] = t + (fwd ? 1 : 2);
            (fwd ? fdone : bdone)[(size_t)j * (size_t)K + (size_t)k] = busy[s];
            int *at = &slot[(size_t)j * (size_t)K + (size_t)k];
            if (fwd) { /* the lowest free slot (held < quota: there is one), the pool grown to it */
                for (*at = 0; used[s * q + *at]; ++*at) {}
                used[s * q + *at] = 1;
                if (*at + 1 > slots[s]) slots[s] = *at + 1;
            } else used[s * q + *at] = 0;
            orders[(size_t)s * (size_t)(2 * K * V) + (size_t)n[s]++] = (sw_unit){fwd, pick, k, *at, t};
            done++, progress = 1;
        }
        if (!progress) { /* every stage idle and nothing ready: the quotas let no order finish */
            for (int s = 0; s < pp; s++) {
                int held = 0;
                for (int c = 0; c < V; c++) held += fnext[c * pp + s] - bnext[c * pp + s];
                if (held >= sw_schedule_quota(pp, V, K, inflight, s)) *stuck = s;
            }
            break;
        }
    }
#undef READY
    free(n), free(fnext), free(bnext), free(fdone), free(bdone), free(busy), free(slot), free(used);
    return done == total ? 0 : -1;
}

int sw_schedule_channel(int pp, int j, int backward) { return SW_P2P_MODEL_CHANNELS + 2 * (j / pp) + backward; }
