/* Private to graphs/: the parameter registry's state, shared by the
 * registry (params.c) and its ZeRO-2/3 pool (zero.c). */
#ifndef STARWEAVE_PARAMS_INTERNAL_H
#define STARWEAVE_PARAMS_INTERNAL_H

#include "starweave/params.h"

enum { NO_UNIT = -3 }; /* entry.also: no second unit */

typedef struct entry { /* one parameter */
    sw_param_desc d;
    int unit, also;   /* the unit it belongs to, and a second unit that reads it (tied; NO_UNIT: none) */
    int held;         /* this rank's stage runs one of them: it has the tensors below */
    int ends;         /* held by both end stages (a tied weight over pp > 1): gradients summed over pp_ends */
    sw_tensor *value, *grad, *m, *v;
    sw_tensor *w16;   /* bf16 copy (dtype bf16, GEMM weights), else NULL */
    sw_tensor *shard; /* ZeRO-1/2/3: this rank's rows of the summed gradient, else NULL */
    sw_tensor *packed; /* ZeRO-3 with bf16, gathered16: this rank's rows [m, c] cast to bf16, packed two
                          per fp32 element [m, c/2] (the all-gather's input) */
    /* ZeRO-3: the value lives sharded at rest (value holds this rank's rows)
     * and is all-gathered into the pool around each use; ZeRO-2/3: the
     * gradient lives in the pool during its unit's backward and only its
     * shard stays (reduce-scattered at the unit's release) */
    int pooled_value, pooled_grad;
    /* while its unit is gathered (between sw_params_gather_unit and
     * sw_params_release_unit, in submission order): the pool's views the
     * accessors return; NULL otherwise */
    sw_tensor *cur_value, *cur_grad, *cur_w16;
} entry;

/* A unit's place in the ZeRO-2/3 pool: its pooled parameters and, for
 * every slot of the pool, views of that slot's buffer laid out as
 * [values fp32 (gathered16: bf16 packed, [r, c/2]) | values bf16 |
 *  gradients fp32 | gradient shards fp32]. */
typedef struct unit_pool {
    int n;            /* parameters read by the unit with a pooled value or gradient */
    int *param;       /* their indices */
    sw_tensor ***value, ***w16, ***grad, ***tmp; /* [slot][j] views (NULL where that part is not pooled) */
    double bytes;     /* of one slot's layout */
    int reductions;   /* reduce-scatters of its gradients this step (0: write the shards, else accumulate) */
    int slot;         /* the slot it holds (-1: none) */
} unit_pool;

struct sw_params {
    sw_params_config c;
    int bound;     /* checked against the first context given it (sw_ctx_init: grad_group, grad_accum, tiles, seed) */
    sw_comm *comm;
    int tp_rank;
    int gn, gr; /* size of the gradient group and this rank's place */
    int pp, stage; /* pipeline stages, this rank's */
    int unit;      /* the unit of the parameters added next */
    int n, cap;
    entry *p;
    /* gradient buckets: flat [1, n] tensors of consecutive parameters in
     * reverse order (first, first - 1, ... count of them) */
    int nbuckets;
    sw_tensor **bucket;
    int *bucket_first, *bucket_count;
    int *bucket_done; /* members whose last micro-batch's gradient is in the bucket (this step) */
    int64_t **bucket_sizes;
    sw_tensor *norm2;     /* [1,1] squared global gradient norm (clip_grad > 0) */
    /* ZeRO-2/3: the pool of `slots` buffers (zero_prefetch + 1) units are
     * gathered into, each with a [1,1] token that orders a slot's claim
     * after the release of its previous occupant; units[u + 1]: unit u
     * (SW_UNIT_BEFORE is 0, block l is l + 1, SW_UNIT_AFTER the last) */
    int slots, next_slot, nunits;
    sw_tensor **pool, **token;
    unit_pool *units;
};

/* the blocks of the registry: one more than the highest block unit */
static inline int block_count(const sw_params *p)
{
    int L = 0;
    for (int k = 0; k < p->n; k++) L = p->p[k].unit + 1 > L ? p->p[k].unit + 1 : L;
    return L;
}

/* ZeRO shards the rows of parameters that have at least one per rank */
static inline int zero_sharded(const sw_params *p, int64_t rows) { return p->c.zero && p->gn > 1 && rows >= p->gn; }

/* ZeRO-2/3: parameter k's gradient lives in the pool during its unit's
 * backward (not a weight shared by two units: its gradient is the sum of
 * both units' backward, kept whole until the update); ZeRO-3: its value is
 * sharded at rest and gathered into the pool */
static inline int grad_pooled(const sw_params *p, int k)
{
    if (p->c.zero < 2) return 0;
    int64_t rows, cols;
    sw_slice_shape(&p->p[k].d, &rows, &cols);
    return p->c.zero >= 2 && zero_sharded(p, rows) && p->p[k].also == NO_UNIT;
}
static inline int value_pooled(const sw_params *p, int k)
{
    int64_t rows, cols;
    sw_slice_shape(&p->p[k].d, &rows, &cols);
    return p->c.zero >= 3 && zero_sharded(p, rows);
}

/* ZeRO-3 with bf16: a GEMM weight no other op reads in fp32 is gathered as
 * its bf16 copy only (half the bytes of fp32; the cast of this rank's rows
 * before the gather rounds each element as the cast of the whole would),
 * packed two bf16 per fp32 element for the collectives (an even number of
 * columns) */
static inline int gathered16(const sw_params *p, int k)
{
    int64_t rows, cols;
    sw_slice_shape(&p->p[k].d, &rows, &cols);
    return value_pooled(p, k) && p->c.dtype == SW_BF16 && p->p[k].d.gemm && !p->p[k].d.fp32_reads && cols % 2 == 0;
}

/* zero.c: the pool of sw_params_config.zero_pool buffers that ZeRO-2/3
 * units are gathered into (nothing below ZeRO-2 or on one rank) */
void sw_params_place(sw_params *p);
void sw_zero_pool_create(sw_params *p);
void sw_zero_pool_destroy(sw_params *p);

/* sw_params_reduce_grads_chunk for the parameters k with !mask[k] == !want
 * (mask NULL: all; mask: sw_params_count(p) entries) */
void sw_params_reduce_grads_some(sw_params *p, int micro, int chunk, const unsigned char *mask, int want);

#endif
