/* The pipeline's schedule (see schedule.h): a list schedule computed from
 * quotas, priorities and costs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static int schedule_costed(int pp, int V, int K, int inflight, int split, const sw_unit_costs *costs, const int *cap,
                           int patient, sw_unit *orders, int *slots, int *stuck);

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
int sw_schedule_units(int V, int K, int split) { return (split ? 3 : 2) * K * V; }

int sw_schedule(int pp, int V, int K, int inflight, sw_unit *orders, int *slots, int *stuck)
{
    return sw_schedule_split(pp, V, K, inflight, 0, orders, slots, stuck);
}

int sw_schedule_split(int pp, int V, int K, int inflight, int split, sw_unit *orders, int *slots, int *stuck)
{
    return sw_schedule_costed(pp, V, K, inflight, split, NULL, NULL, orders, slots, stuck);
}

int sw_schedule_costed(int pp, int V, int K, int inflight, int split, const sw_unit_costs *costs, const int *cap,
                       sw_unit *orders, int *slots, int *stuck)
{
    return schedule_costed(pp, V, K, inflight, split, costs, cap, 0, orders, slots, stuck);
}

/* the hop into virtual stage j's forward (from j - 1) and into its B (from j + 1): the boundary's stage's h */
#define HOP_F(j) (costs && (j) > 0 ? costs[((j) - 1) % pp].h : 0)
#define HOP_B(j) (costs ? costs[(j) % pp].h : 0)

/* sw_schedule_costed; patient: a stage starts a W only where it ends before every input it knows to be
 * on its way (a forward's activation or a B's gradient sent, arriving after the hop) to a unit whose
 * output another stage waits for -- the greedy one starts it whenever idle, and a W cannot be
 * interrupted when that input arrives during it */
static int schedule_costed(int pp, int V, int K, int inflight, int split, const sw_unit_costs *costs, const int *cap,
                           int patient, sw_unit *orders, int *slots, int *stuck)
{
    const sw_unit_costs guess = SW_SCHEDULE_GUESS;
    int J = pp * V, per = sw_schedule_units(V, K, split), total = pp * per, done = 0;
    int *n = xcalloc((size_t)pp, sizeof(int));
    /* fnext, bnext, wnext[j]: virtual stage j's next micro-batch to start forward, B (the backward without the
     * split) and W; a micro-batch holds its slot from its forward to its W (its backward without the split) */
    int *fnext = xcalloc((size_t)J, sizeof(int)), *bnext = xcalloc((size_t)J, sizeof(int));
    int *wnext = split ? xcalloc((size_t)J, sizeof(int)) : bnext;
    long *fdone = xcalloc((size_t)J * (size_t)K, sizeof(long)), *bdone = xcalloc((size_t)J * (size_t)K, sizeof(long));
    long *busy = xcalloc((size_t)pp, sizeof(long));
    /* the split's pending W units of stage s, oldest first: wq[s K V + i], chunks, from whead[s] to wtail[s] */
    int *wq = xcalloc((size_t)pp * (size_t)(K * V), sizeof(int)), *whead = xcalloc((size_t)pp, sizeof(int));
    int *wtail = xcalloc((size_t)pp, sizeof(int));
    /* slot[j K + k]: the micro slot micro-batch k holds on virtual stage j; used[s q + i]: slot i of stage s
     * taken (q: the largest quota) */
    int *slot = xcalloc((size_t)J * (size_t)K, sizeof(int)), q = 0;
    for (int s = 0; s < pp; s++)
        if (sw_schedule_quota(pp, V, K, inflight, s) > q) q = sw_schedule_quota(pp, V, K, inflight, s);
    char *used = xcalloc((size_t)pp * (size_t)q, 1);
    const long never = -1;
    for (int i = 0; i < J * K; i++) fdone[i] = bdone[i] = never;
    for (int s = 0; s < pp; s++) slots[s] = 0;
    /* an input's arrival: the unit's end plus the hop (never: not started); READY: there by t */
#define ARRIVAL(a, j, k, hop) ((a)[(size_t)(j) * (size_t)K + (size_t)(k)] == never ? never \
                               : (a)[(size_t)(j) * (size_t)K + (size_t)(k)] + (hop))
#define READY(a, j, k, hop) (ARRIVAL(a, j, k, hop) != never && ARRIVAL(a, j, k, hop) <= t)
    /* the arrivals after a hop (h > 0), which are events as the units' ends are: arr[0 .. narr - 1] */
    long *arr = xcalloc((size_t)total + 1, sizeof *arr);
    int narr = 0;
    /* held: the stage's chunks' saved sets between a forward and its B (the quota's count), kept: ... and its W
     * (in the slots; held without the split) */
#define HELD(s, held, kept) do { held = kept = 0; for (int c_ = 0; c_ < V; c_++) held += fnext[c_ * pp + (s)] - bnext[c_ * pp + (s)], \
                                 kept += fnext[c_ * pp + (s)] - wnext[c_ * pp + (s)]; } while (0)
    /* event by event: a stage can only start something new when a unit ends (its own or a neighbour's) */
    for (long t = 0, next; done < total; t = next) {
        for (int s = 0; s < pp; s++) {
            if (busy[s] > t) continue;
            int held, kept, pick = -1, kind = 0; /* kind: 1 forward, 0 B (the backward), 2 W */
            HELD(s, held, kept);
            /* a forward within the stage's quota, its saved sets kept until their W within the largest (ZB-H1:
             * every stage at most the first stage's 1F1B memory) */
            int room = held < sw_schedule_quota(pp, V, K, inflight, s) && kept < q && (!cap || kept < cap[s]);
            for (int c = V - 1; c >= 0 && room; c--) {
                int j = c * pp + s, k = fnext[j];
                if (k < K && (j == 0 || READY(fdone, j - 1, k, HOP_F(j)))) {
                    pick = c, kind = 1;
                    break;
                }
            }
            for (int c = V - 1; c >= 0 && pick < 0; c--) {
                int j = c * pp + s, k = bnext[j];
                if (k < fnext[j] && READY(fdone, j, k, 0) && (j == J - 1 || READY(bdone, j + 1, k, HOP_B(j)))) pick = c;
            }
            long soon = -1; /* patient: the earliest input on its way to this stage (sent, not yet there) */
            for (int c = 0; c < V && patient && pick < 0 && split && whead[s] < wtail[s]; c++) {
                int j = c * pp + s, k = fnext[j];
                /* inputs of units whose outputs another stage waits for: a forward's but the last virtual
                 * stage's, a B's but the first's (stage 0's first chunk ends the chain) */
                long a = k < K && j > 0 && j < J - 1 && room ? ARRIVAL(fdone, j - 1, k, HOP_F(j)) : never;
                if (a > t && (soon < 0 || a < soon)) soon = a;
                k = bnext[j];
                a = k < fnext[j] && j > 0 && j < J - 1 ? ARRIVAL(bdone, j + 1, k, HOP_B(j)) : never;
                if (a > t && (soon < 0 || a < soon)) soon = a;
            }
            const sw_unit_costs *co = costs ? &costs[s] : &guess; /* a backward without the split: B + W */
            if (pick < 0 && split && whead[s] < wtail[s] && (soon < 0 || t + (co->w > 0 ? co->w : 1) <= soon))
                pick = wq[(size_t)s * (size_t)(K * V) + (size_t)whead[s]++], kind = 2; /* the oldest W: its B ran here */
            if (pick < 0) continue;
            int j = pick * pp + s, k = kind == 1 ? fnext[j]++ : kind == 0 ? bnext[j]++ : wnext[j]++;
            long d = kind == 1 ? co->f : kind == 2 ? co->w : split ? co->b : co->b + co->w;
            busy[s] = t + (d > 0 ? d : 1);
            if (kind < 2) (kind ? fdone : bdone)[(size_t)j * (size_t)K + (size_t)k] = busy[s];
            long hop = kind == 1 ? (j < J - 1 ? HOP_F(j + 1) : 0) : kind == 0 && j > 0 ? HOP_B(j - 1) : 0;
            if (hop > 0) arr[narr++] = busy[s] + hop; /* its output's arrival: an event */
            if (kind == 0 && split) wq[(size_t)s * (size_t)(K * V) + (size_t)wtail[s]++] = pick;
            int *at = &slot[(size_t)j * (size_t)K + (size_t)k];
            if (kind == 1) { /* the lowest free slot (held < quota: there is one), the pool grown to it */
                for (*at = 0; used[s * q + *at]; ++*at) {}
                used[s * q + *at] = 1;
                if (*at + 1 > slots[s]) slots[s] = *at + 1;
            } else if (split ? kind == 2 : 1) used[s * q + *at] = 0; /* freed by the unit that last reads it: W */
            orders[(size_t)s * (size_t)per + (size_t)n[s]++] = (sw_unit){kind == 1, pick, k, *at, t, kind == 2};
            done++;
        }
        next = -1;
        for (int s = 0; s < pp; s++)
            if (busy[s] > t && (next < 0 || busy[s] < next)) next = busy[s];
        for (int i = 0; i < narr; i++)
            if (arr[i] > t && (next < 0 || arr[i] < next)) next = arr[i];
        if (next < 0 && done < total) { /* every stage idle and nothing ready: the quotas let no order finish */
            for (int s = 0; s < pp; s++) {
                int held, kept;
                HELD(s, held, kept);
                if (held >= sw_schedule_quota(pp, V, K, inflight, s) || (cap && kept >= cap[s])) *stuck = s;
            }
            break;
        }
    }
#undef HELD
#undef READY
#undef ARRIVAL
    free(arr);
    if (split) free(wnext);
    free(n), free(fnext), free(bnext), free(fdone), free(bdone), free(busy), free(slot), free(used);
    free(wq), free(whead), free(wtail);
    return done == total ? 0 : -1;
}

long sw_schedule_makespan(int pp, int V, int K, int split, const sw_unit_costs *costs, const sw_unit *orders)
{
    const sw_unit_costs guess = SW_SCHEDULE_GUESS;
    const int J = pp * V, n = sw_schedule_units(V, K, split);
    long *fend = xcalloc((size_t)J * (size_t)K, sizeof *fend), *bend = xcalloc((size_t)J * (size_t)K, sizeof *bend);
    long *free_at = xcalloc((size_t)pp, sizeof *free_at), span = 0;
    int *next = xcalloc((size_t)pp, sizeof *next), left = pp * n;
    for (int i = 0; i < J * K; i++) fend[i] = bend[i] = -1;
    for (int progress = 1; progress && left;) { /* each stage as far as its next unit's inputs are there */
        progress = 0;
        for (int s = 0; s < pp; s++)
            for (; next[s] < n; next[s]++, left--, progress = 1) {
                const sw_unit *u = &orders[(size_t)s * (size_t)n + (size_t)next[s]];
                const int j = u->chunk * pp + s;
                const size_t at = (size_t)j * (size_t)K + (size_t)u->k;
                long dep = u->fwd ? (j ? (fend[at - (size_t)K] < 0 ? -1 : fend[at - (size_t)K] + HOP_F(j)) : 0)
                           : u->w ? bend[at] : fend[at];
                long grad = !u->fwd && !u->w && j < J - 1 ? bend[at + (size_t)K] : 0; /* B: and its output's gradient */
                if (grad >= 0 && !u->fwd && !u->w && j < J - 1) grad += HOP_B(j);
                if (dep >= 0) dep = grad < 0 ? -1 : grad > dep ? grad : dep;
                if (dep < 0) break;
                const sw_unit_costs *c = costs ? &costs[s] : &guess;
                long d = u->fwd ? c->f : u->w ? c->w : split ? c->b : c->b + c->w;
                free_at[s] = (dep > free_at[s] ? dep : free_at[s]) + (d > 0 ? d : 1);
                if (u->fwd) fend[at] = free_at[s];
                else if (!u->w) bend[at] = free_at[s];
                if (free_at[s] > span) span = free_at[s];
            }
    }
    free(fend), free(bend), free(free_at), free(next);
    return left ? -1 : span;
}

int sw_schedule_replan(int pp, int V, int K, int inflight, int split, const sw_unit_costs *costs, const int *cap,
                       sw_unit *orders, int *slots, int *kept)
{
    const size_t n = (size_t)pp * (size_t)sw_schedule_units(V, K, split);
    sw_unit *other = xcalloc(n, sizeof *other);
    int *oslots = xcalloc((size_t)pp, sizeof *oslots), stuck = -1;
    *kept = 0;
    if (sw_schedule_costed(pp, V, K, inflight, split, costs, cap, orders, slots, &stuck)) { /* no order fits */
        free(other), free(oslots);
        return -1;
    }
    long a = sw_schedule_makespan(pp, V, K, split, costs, orders); /* -1 only if it deadlocked: never taken */
    /* the candidates against the greedy one: the guess's order (within the pools), then the patient
     * simulation (a W only where it delays no input on its way); the shortest under the costs, the first on a
     * tie (the guess's keeps ZB-H1's F B W pattern where the patient one only equals it) */
    for (int cand = 1; cand <= 2; cand++) {
        int ok = cand == 2 ? !schedule_costed(pp, V, K, inflight, split, costs, cap, 1, other, oslots, &stuck)
                           : !sw_schedule_split(pp, V, K, inflight, split, other, oslots, &stuck);
        for (int s = 0; s < pp && ok && cap; s++) ok = oslots[s] <= cap[s];
        long b = ok ? sw_schedule_makespan(pp, V, K, split, costs, other) : -1;
        if (b >= 0 && (a < 0 || b < a)) {
            memcpy(orders, other, n * sizeof *orders), memcpy(slots, oslots, (size_t)pp * sizeof *slots);
            a = b, *kept = cand; /* 1 the guess's, 2 the patient one's */
        }
    }
    free(other), free(oslots);
    return a >= 0 ? 0 : -1;
}

int sw_schedule_late_w(const sw_unit *order, int n)
{
    int last = -1, late = 0;
    for (int i = 0; i < n; i++)
        if (order[i].fwd) last = i;
    for (int i = last + 1; i < n; i++) late += order[i].w;
    return late;
}

int sw_schedule_channel(int pp, int j, int backward) { return SW_P2P_MODEL_CHANNELS + 2 * (j / pp) + backward; }

int sw_schedule_check(int pp, int V, int K, int inflight, int split, char *msg, size_t n)
{
    if (inflight < 0) {
        snprintf(msg, n, "the micro-batches in flight per stage must be 0 (1F1B) or at least 1 (%d)", inflight);
        return -1;
    }
    if (V > SW_PP_MAX_CHUNKS) { /* two point-to-point channels each (schedule.h), whatever the stages */
        snprintf(msg, n, "interleaved chunks per stage (%d, pp %d) must be at most %d (two point-to-point channels "
                 "each)", V, pp, SW_PP_MAX_CHUNKS);
        return -1;
    }
    if (V > 1 && pp < 2) {
        snprintf(msg, n, "interleaved chunks (%d per stage) need pipeline stages (pp %d)", V, pp);
        return -1;
    }
    const int units = sw_schedule_units(V > 1 ? V : 1, K, split);
    sw_unit *all = xcalloc((size_t)pp * (size_t)units, sizeof *all);
    int *slots = xcalloc((size_t)pp, sizeof *slots), stuck = 0;
    int bad = sw_schedule_split(pp, V > 1 ? V : 1, K, inflight, split, all, slots, &stuck);
    free(all), free(slots);
    if (bad) {
        snprintf(msg, n, "no order of the pipeline's work fits the in-flight quotas: stage %d holds %d chunks' saved "
                 "sets (pp %d, %d chunks per stage, %d micro-batches, pp-inflight %d): raise the quota "
                 "(pp-inflight, in micro-batches; 0: the default)", stuck,
                 sw_schedule_quota(pp, V > 1 ? V : 1, K, inflight, stuck), pp, V > 1 ? V : 1, K, inflight);
        return -1;
    }
    return 0;
}
