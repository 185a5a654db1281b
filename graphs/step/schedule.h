/* The pipeline's schedule (private to the library; graphs/step/pipeline.c and
 * tests/test_schedule.c): the order in which each stage submits its units
 * of work, computed -- not written down -- from the stages' in-flight
 * quotas, a priority (the latest chunk's forward first, then a backward)
 * and costs (guessed: a forward 1, a backward 2; or measured per stage:
 * sw_schedule_costed). A pure function: no StarPU, no MPI. */
#ifndef STARWEAVE_SCHEDULE_H
#define STARWEAVE_SCHEDULE_H

#include <stddef.h>

#include "starweave/comm.h"

/* one piece of a stage's work: micro-batch k's forward (fwd 1) or backward
 * (fwd 0) through the stage's chunk `chunk`, in the stage's micro slot
 * `slot`, started at simulated time `start`. With Zero Bubble's split a
 * backward is two units: its input gradients (B: fwd 0, w 0) and its
 * weight gradients (W: fwd 0, w 1), which free the slot. */
typedef struct sw_unit {
    int fwd, chunk, k, slot;
    long start;
    int w;
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
 * in order of start. Each stage's chunks share one pool of micro slots
 * (a slot holds one chunk's saved sets for one micro-batch): a forward
 * takes the lowest free slot, its micro-batch's backward through the same
 * chunk frees it; slots[s] (pp of them): the most saved sets stage s
 * holds at once in its order, at most its quota. Returns 0, or -1 when
 * the quotas let no order finish (*stuck: a stage that waited with its
 * quota full; the orders and slots are then partial). */
int sw_schedule(int pp, int V, int K, int inflight, sw_unit *orders, int *slots, int *stuck);

/* Zero Bubble's ZB-H1 (split 1), or sw_schedule (split 0): the same
 * simulation with each backward split into B (input gradients: what the
 * previous stage waits for) and W (weight gradients: nothing waits for
 * them but the optimizer), each costing 1 like a forward. A micro-batch's
 * saved sets stay in its slot until its W has run (W reads them and its
 * kept output gradients), so the quota counts them until then; a stage
 * whenever idle starts a forward as above, else a B, else its oldest
 * pending W -- W fills the waits that a backward's inputs leave, the
 * cooldown's above all, at 1F1B's memory. orders: pp x 3 K V units (2 K V
 * without the split). */
int sw_schedule_split(int pp, int V, int K, int inflight, int split, sw_unit *orders, int *slots, int *stuck);
/* The pipeline's rules on its shape, one function for sw_pipeline_create
 * (graphs/step/pipeline.c refuses by it) and the planner (sw_plan_check judges
 * by it): the in-flight quota not negative, at most SW_PP_MAX_CHUNKS
 * chunks per stage, chunks only with stages, and an order of every
 * stage's work (with Zero Bubble's split when split) that fits the
 * quotas. 0, or -1 with the rule and the values in msg. */
int sw_schedule_check(int pp, int V, int K, int inflight, int split, char *msg, size_t n);

/* What a stage's units cost, in any unit of time (whole numbers, at
 * least 1; the pipeline uses microseconds): a forward f, input gradients b
 * and weight gradients w (with the split B and W units; without it a
 * backward costs b + w); h, the point-to-point hop between stage s and
 * stage s + 1 (mod pp) -- from a unit's end to its output's arrival on the
 * neighbour, an activation forward or an input gradient back -- 0 or more
 * (the guess: 0). Each stage its own: the last computes the head and the
 * loss in its B, the first the embedding. */
typedef struct sw_unit_costs {
    long f, b, w, h;
} sw_unit_costs;
/* the guess when nothing is measured: a forward 1, a backward 2 (B 1 and W 1 with the split), no hop */
#define SW_SCHEDULE_GUESS ((sw_unit_costs){1, 1, 1, 0})

/* sw_schedule_split with stage s's units costing costs[s] (pp of them;
 * NULL: SW_SCHEDULE_GUESS for every stage, which is sw_schedule_split),
 * and, where cap is not NULL, stage s starting a forward only while fewer
 * than cap[s] micro slots are taken (a pool already allocated: slots[s] <=
 * cap[s]; *stuck a stage that waited with its quota or its pool full).
 * A forward's input is there the hop after the previous virtual stage's
 * forward ends, a B's output gradient the hop after the next one's B.
 * Costs change the order (which stage waits for which unit), never a
 * chunk's micro-batch order in each direction. */
int sw_schedule_costed(int pp, int V, int K, int inflight, int split, const sw_unit_costs *costs, const int *cap,
                       sw_unit *orders, int *slots, int *stuck);
/* The makespan of per-stage orders (orders + s n, n = sw_schedule_units(V,
 * K, split)) replayed as fixed sequences -- what StarPU does with a
 * stage's units -- under costs (NULL: the guess): each unit starts when its
 * stage is free and its inputs are there (a forward after the previous
 * virtual stage's forward of its micro-batch, B after its forward and the
 * next virtual stage's B, W after its B; each input between stages the
 * hop later). -1 when they wait in a cycle. */
long sw_schedule_makespan(int pp, int V, int K, int split, const sw_unit_costs *costs, const sw_unit *orders);
/* The order of the steps after a measured one (sw_pipeline_replan): the
 * shortest, replayed under the measured costs and hops
 * (sw_schedule_makespan), of three: the simulation under the costs
 * (sw_schedule_costed, within the pools cap); the same simulation made
 * patient -- a stage starts a W only where it ends before every input
 * already on its way to the stage (sent by its neighbour, arriving after
 * the hop); and the guess's order (sw_schedule_split). The greedy
 * simulation starts a W the moment a stage idles, and under costs of
 * unequal F, B and W that W then holds back a B arriving during it, while
 * the guess's order (F = B = W) keeps ZB-H1's steady F B W pattern, whose
 * bubble is (p - 1)(F + B - W) at any costs with W <= F; the patient one
 * fills only the waits a W fits in (the last stage's longer B, the hops:
 * tests/test_schedule.c). *kept: 0 the greedy simulation's order, 1 the
 * guess's, 2 the patient simulation's (on a tie the first of greedy,
 * guess, patient).
 * Returns 0, or -1 when no order of the costs fits the quotas and pools
 * (*kept 0, the orders partial: the caller keeps the guess's). */
int sw_schedule_replan(int pp, int V, int K, int inflight, int split, const sw_unit_costs *costs, const int *cap,
                       sw_unit *orders, int *slots, int *kept);
/* the units per stage: 2 K V, or 3 K V with the split */
int sw_schedule_units(int V, int K, int split);
/* the W units of `order` (n units) after its last forward: the weight
 * gradients placed in the cooldown */
int sw_schedule_late_w(const sw_unit *order, int n);

/* The driver's point-to-point channels on the pp group (comm.h: channels
 * SW_P2P_MODEL_CHANNELS .. SW_P2P_CHANNELS - 1 are the driver's, so a
 * model's own sw_send/sw_send_on on that group never shifts its matching).
 * Numbered per pair of neighbours, not per global boundary: the messages
 * from stage s to stage s + 1 (mod pp) are the activations out of s's
 * chunks and the gradients into s + 1's, each chunk and direction on a
 * channel of its own, matched in call order on it; the boundary after
 * virtual stage j = c pp + s is chunk c of stage s's (its activations
 * forward, its gradients back). The loss, the conditioning and its
 * gradient have one channel each. */
enum {
    SW_PP_LOSS_CHANNEL = SW_P2P_CHANNELS - 1,
    SW_PP_COND_CHANNEL = SW_P2P_CHANNELS - 2,
    SW_PP_DCOND_CHANNEL = SW_P2P_CHANNELS - 3,
    /* chunks per stage: two channels each below the three above */
    SW_PP_MAX_CHUNKS = (SW_P2P_CHANNELS - 3 - SW_P2P_MODEL_CHANNELS) / 2
};
/* the channel of the boundary after virtual stage j (pp stages):
 * activations (backward 0) or gradients (backward 1) */
int sw_schedule_channel(int pp, int j, int backward);

#endif
