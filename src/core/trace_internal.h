/* Private to the trace recorder (src/core/trace.c: records and their merge;
 * src/core/trace_write.c: Chrome JSON, Paje, overlap; src/core/trace_dag.c: the
 * task graph): the record types, which are also the wire format of the
 * gathers, and the merged trace on rank 0. */
#ifndef STARWEAVE_TRACE_INTERNAL_H
#define STARWEAVE_TRACE_INTERNAL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <starpu_mpi.h>

#include "starweave/runtime.h"
#include "starweave/trace.h"

#define SW_TRACE_HIDDEN __attribute__((visibility("hidden")))

typedef struct task_rec {
    double start_us, end_us, bytes, flops;
    int32_t rank, worker, phase, layer, step, prio; /* prio: StarPU's priority of the task */
    char name[40];
} task_rec;

typedef struct comm_rec {
    double submit_us, posted_us, done_us, bytes;
    int64_t tag;
    int32_t rank, peer, chunk, is_send, phase, layer, step, lane; /* lane: set on rank 0 */
    char coll[32], group[16];
} comm_rec;

typedef struct mark_rec {
    double t_us;
    int32_t rank, step;
} mark_rec;

#define SW_TRACE_NAME 32 /* worker name length on the wire */

/* growable array of fixed-size records */
typedef struct vec {
    void *p;
    size_t n, cap, elem;
} vec;

static inline void *vec_push(vec *v)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 256;
        void *p = realloc(v->p, cap * v->elem);
        if (!p) sw_fail(__FILE__, __LINE__, "realloc(trace records)", -ENOMEM);
        v->p = p;
        v->cap = cap;
    }
    return (char *)v->p + v->elem * v->n++;
}

static inline void vec_free(vec *v)
{
    free(v->p);
    v->p = NULL;
    v->n = v->cap = 0;
}

static inline void copy_name(char *dst, size_t n, const char *src) { snprintf(dst, n, "%s", src ? src : "?"); }

/* a message: a send and its matching receive */
typedef struct xfer {
    const comm_rec *send, *recv;
} xfer;

/* the merged trace, rank 0 (rank 0's clock, origin at the earliest
 * record), written by sw_trace_collect */
typedef struct sw_trace_merged {
    int nranks;
    int *nworkers;                 /* per rank */
    char (*wnames)[SW_TRACE_NAME]; /* worker names, rank-major */
    int *wname_first;              /* index of rank r's first worker name */
    vec mtasks, mcomms, mmarks;
    double *offset_us;             /* per rank: added to its clock */
    double end_us;                 /* last time in the merged trace */
} sw_trace_merged;
extern sw_trace_merged sw_trace_m SW_TRACE_HIDDEN;

/* a request's own fields: what it moves, between whom, and its labels */
SW_TRACE_HIDDEN void sw_trace_comm_rec_fill(comm_rec *r, const char *collective, const char *group, int chunk,
                                            MPI_Comm comm, int peer, int is_send, int64_t tag,
                                            starpu_data_handle_t h);
/* every rank's blob on rank 0 (*displs_out: where each starts; NULL elsewhere) */
SW_TRACE_HIDDEN char *sw_trace_gather_blobs(MPI_Comm comm, int me, int n, const char *blob, size_t sz,
                                            int **displs_out);
/* Pairs of (send, receive) among the n records c, ordered by (source,
 * destination, group, tag, send posting); *nx of them. */
SW_TRACE_HIDDEN xfer *sw_trace_match_transfers(const comm_rec *c, size_t n, size_t *nx);
/* a name fit for a quoted string in Paje or dot: quotes, backslashes and
 * newlines become _ */
SW_TRACE_HIDDEN void sw_trace_clean_name(char *s);
/* the task graph's side of sw_trace_reset and sw_trace_comm_begin */
SW_TRACE_HIDDEN void sw_trace_dag_clear(void);
SW_TRACE_HIDDEN void sw_trace_dag_request(const char *collective, const char *group, int chunk, MPI_Comm comm,
                                          int peer, int is_send, int64_t tag, starpu_data_handle_t h);

#endif
