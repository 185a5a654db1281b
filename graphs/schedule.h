/* The pipeline's schedule (private to the library; graphs/pipeline.c and
 * tests/test_schedule.c): the order in which each stage submits its units
 * of work, computed -- not written down -- from the stages' in-flight
 * quotas, a priority (the latest chunk's forward first, then a backward)
 * and costs (a forward 1, a backward 2). A pure function: no StarPU, no
 * MPI. */
#ifndef STARWEAVE_SCHEDULE_H
#define STARWEAVE_SCHEDULE_H

/* one piece of a stage's work: micro-batch k's forward (fwd 1) or backward
 * through the stage's chunk `chunk`, started at simulated time `start` */
typedef struct sw_unit {
    int fwd, chunk, k;
    long start;
} sw_unit;

/* stage s's in-flight quota, in chunks' saved sets (a chunk's blocks for
 * one micro-batch): `inflight` micro-batches' chunks (inflight V), or by
 * default (inflight 0) (V - 1) pp + pp - s (1F1B's pp - s without
 * chunks); at most them all (K V) */
int sw_schedule_quota(int pp, int V, int K, int inflight, int s);

/* Every stage's order of work for pp stages of V chunks each and K
 * micro-batches under the quotas sw_schedule_quota(pp, V, K, inflight, s):
 * a dataflow execution of every stage is simulated, in which each stage,
 * whenever idle, starts a forward whose input is there if its quota has
 * room (the latest chunk first), else a backward whose output gradient is
 * there. orders: pp x 2 K V units, stage s's 2 K V from orders + s 2 K V,
 * in order of start. slots: pp x V, stage s's chunk c's micro slots at
 * slots[s V + c]: without chunks the quota, else the most micro-batches
 * of chunk c in flight at once in that order. Returns 0, or -1 when the
 * quotas let no order finish (*stuck: a stage that waited with its quota
 * full; the orders and slots are then partial). */
int sw_schedule(int pp, int V, int K, int inflight, sw_unit *orders, int *slots, int *stuck);

#endif
