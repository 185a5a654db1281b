/* The ZeRO-2/3 pool (see params.h): the buffers units are gathered into,
 * their views, and the tasks that order a buffer's reuse. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codelet_util.h"
#include "core/check.h"
#include "train_internal.h"
#include "params_internal.h"
#include "starweave/ops.h"
#include "starweave/runtime.h"

/* ------------------------------------------------ the ZeRO-2/3 pool */

/* A view of `bytes` of a pool buffer from `offset`: a tensor of its own
 * handle over memory the pool owns (registered on main RAM, where the
 * buffer is). StarPU does not know that the views of different units in
 * one slot overlap: the slot's token orders them (claim and release below). */
static sw_tensor *view_new(const char *name, sw_dtype dt, int64_t rows, int64_t cols, sw_tensor *buf, size_t offset)
{
    sw_tensor *t = sw_xcalloc(1, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = 2, t->shape[0] = rows, t->shape[1] = cols;
    t->dtype = dt, t->rows = rows, t->cols = cols;
    t->rw_plan = -1;
    t->node = STARPU_MAIN_RAM;
    t->data = (char *)buf->data + offset;
    starpu_matrix_data_register(&t->handle, STARPU_MAIN_RAM, (uintptr_t)t->data, (uint32_t)cols, (uint32_t)cols,
                                (uint32_t)rows, sw_dtype_size(dt));
    starpu_data_set_name(t->handle, t->name);
    t->whole = (sw_block){t, 0, rows, 0, cols};
    starpu_data_set_user_data(t->handle, &t->whole);
    return t;
}

/* unregisters a view (its tilings first); the memory is the pool's */
static void view_free(sw_tensor *t)
{
    if (!t) return;
    sw_tensor_whole(t, STARPU_W); /* submits the unpartitioning of every tiling */
    for (int k = 0; k < t->nplans; k++) {
        sw_plan *pl = &t->plans[k];
        starpu_data_partition_clean(t->handle, (unsigned)(pl->nr * pl->nc), pl->children);
        free(pl->children), free(pl->blocks), free(pl->rb), free(pl->cb);
    }
    starpu_data_unregister(t->handle);
    free(t);
}

static int unit_index(const sw_params *p, int unit)
{
    return unit == SW_UNIT_BEFORE ? 0 : unit == SW_UNIT_AFTER ? p->nunits - 1 : unit + 1;
}

/* 64-byte aligned offsets in a slot */
static size_t align64(double b) { return ((size_t)b + 63) / 64 * 64; }

/* Lays out unit `unit`'s pooled parameters in one slot: [values fp32 |
 * values bf16 | gradients | gradient shards (micro-batches > 1: each
 * micro-batch's reduce-scatter lands there before it is added)]; returns
 * the slot bytes it needs. With u and a pool: makes the views of slot s. */
static double unit_layout(const sw_params *p, int unit, unit_pool *u, int s)
{
    size_t at = 0;
    for (int part = 0; part < 4; part++)
        for (int k = 0, j = 0; k < p->n; k++) {
            const entry *q = &p->p[k];
            if (!q->held || (q->unit != unit && q->also != unit)) continue;
            int pv = value_pooled(p, k), pg = grad_pooled(p, k);
            if (!pv && !pg) continue;
            int64_t rows, cols, first, mrows;
            sw_slice_shape(&q->d, &rows, &cols);
            sw_tile_range(rows, p->gn, p->gr, &first, &mrows);
            int want = part == 0 ? pv : part == 1 ? pv && p->c.dtype == SW_BF16 && q->d.gemm
                                   : part == 2 ? pg : pg && p->c.grad_accum > 1;
            int64_t vr = part == 3 ? mrows : rows, vc = part == 0 && gathered16(p, k) ? cols / 2 : cols;
            if (want && u && p->pool) {
                static const char *const what[4] = {"z3", "z3bf16", "z3d", "z3dshard"};
                char name[64];
                snprintf(name, sizeof name, "%s.%d.%s", vc < cols ? "z3pk" : what[part], s, q->d.name);
                sw_tensor *v = view_new(name, part == 1 ? SW_BF16 : SW_F32, vr, vc, p->pool[s], at);
                (part == 0 ? u->value : part == 1 ? u->w16 : part == 2 ? u->grad : u->tmp)[s][j] = v;
            }
            if (want) at = align64((double)at + (double)(vr * vc) * (part == 1 ? 2.0 : 4.0));
            j++;
        }
    return (double)at;
}

/* the pool's units and the bytes of one slot (the largest unit's layout) */
static double pool_slot_bytes(const sw_params *p, int *slots)
{
    double most = 0;
    int L = block_count(p);
    *slots = p->c.zero_pool > 0 ? p->c.zero_pool : 2;
    if (p->c.zero < 2 || p->gn < 2) return 0;
    for (int unit = SW_UNIT_AFTER; unit < L; unit++) {
        double b = unit_layout(p, unit, NULL, 0);
        most = b > most ? b : most;
    }
    return most;
}

double sw_params_pool_bytes(const sw_params *p)
{
    sw_params_place((sw_params *)p); /* only the units this stage holds (idempotent) */
    int slots;
    double slot = pool_slot_bytes(p, &slots);
    return slot > 0 ? slots * (4.0 * (double)(int64_t)(slot / 4) + 4.0) : 0; /* + each slot's token */
}

void sw_zero_pool_create(sw_params *p)
{
    int slots;
    double slot = pool_slot_bytes(p, &slots);
    p->nunits = block_count(p) + 2;
    if (slot <= 0) return;
    p->slots = slots;
    p->pool = sw_xcalloc((size_t)slots, sizeof *p->pool);
    p->token = sw_xcalloc((size_t)slots, sizeof *p->token);
    for (int s = 0; s < slots; s++) {
        char name[32];
        snprintf(name, sizeof name, "zero_pool%d", s);
        p->pool[s] = sw_tensor_new2d(name, SW_F32, 1, (int64_t)(slot / 4));
        snprintf(name, sizeof name, "zero_pool%d.token", s);
        p->token[s] = sw_tensor_new2d(name, SW_F32, 1, 1);
    }
    p->units = sw_xcalloc((size_t)p->nunits, sizeof *p->units);
    for (int i = 0; i < p->nunits; i++) {
        int unit = i == 0 ? SW_UNIT_BEFORE : i == p->nunits - 1 ? SW_UNIT_AFTER : i - 1;
        unit_pool *u = &p->units[i];
        u->slot = -1;
        u->param = sw_xcalloc((size_t)p->n, sizeof(int));
        for (int k = 0; k < p->n; k++) {
            const entry *q = &p->p[k];
            if (q->held && (q->unit == unit || q->also == unit) && (q->pooled_value || q->pooled_grad)) u->param[u->n++] = k;
        }
        sw_tensor ****parts[4] = {&u->value, &u->w16, &u->grad, &u->tmp};
        for (int part = 0; part < 4; part++) {
            *parts[part] = sw_xcalloc((size_t)slots, sizeof **parts[part]);
            for (int s = 0; s < slots; s++) (*parts[part])[s] = sw_xcalloc((size_t)u->n + 1, sizeof ***parts[part]);
        }
        for (int s = 0; s < slots && u->n; s++) u->bytes = unit_layout(p, unit, u, s);
    }
}

void sw_zero_pool_destroy(sw_params *p)
{
    for (int i = 0; p->units && i < p->nunits; i++) {
        unit_pool *u = &p->units[i];
        sw_tensor ***parts[4] = {u->value, u->w16, u->grad, u->tmp};
        for (int part = 0; part < 4; part++) {
            for (int s = 0; s < p->slots; s++) {
                for (int j = 0; j < u->n; j++) view_free(parts[part][s][j]);
                free(parts[part][s]);
            }
            free(parts[part]);
        }
        free(u->param);
    }
    free(p->units);
    for (int s = 0; s < p->slots; s++) sw_tensor_free(p->pool[s]), sw_tensor_free(p->token[s]);
    free(p->pool);
    free(p->token);
}

/* A task that does nothing but access its handles: orders a slot's claim
 * after the previous occupant's release (through the slot's token), and
 * that release after every task submitted on the occupant's views (it
 * writes them, so it waits for their readers). */
static void pool_fence_cpu(void *buffers[], void *cl_arg) { (void)buffers, (void)cl_arg; }
SW_PERFMODEL(pool_fence_model, "sw_zero_pool_fence");
static struct starpu_codelet pool_fence_cl = {
    .cpu_funcs = {pool_fence_cpu},
    .cpu_funcs_name = {"pool_fence_cpu"},
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &pool_fence_model,
    .name = "zero_pool_fence",
};

/* the token of slot s and every view of unit u in it: token RW, views `mode` */
static void pool_fence(sw_params *p, unit_pool *u, int s, enum starpu_data_access_mode mode)
{
    struct starpu_data_descr *d = sw_xcalloc((size_t)(4 * u->n + 1), sizeof *d);
    int n = 0;
    d[n].handle = sw_tensor_whole(p->token[s], STARPU_RW), d[n++].mode = STARPU_RW;
    sw_tensor ***parts[4] = {u->value, u->w16, u->grad, u->tmp};
    for (int part = 0; part < 4; part++)
        for (int j = 0; j < u->n; j++)
            if (parts[part][s][j]) d[n].handle = sw_tensor_whole(parts[part][s][j], mode), d[n++].mode = mode;
    SW_INSERT(&pool_fence_cl, STARPU_DATA_MODE_ARRAY, d, n);
    free(d);
}

void sw_params_gather_unit(sw_params *p, int unit, int backward)
{
    if (!p->units) return;
    unit_pool *u = &p->units[unit_index(p, unit)];
    int values = p->c.zero >= 3;
    if (!u->n || (!backward && !values)) return;
    if (u->slot >= 0)
        sw_usage_error("sw_params_gather_unit: unit %d is gathered already (release it first)", unit);
    int s = u->slot = p->next_slot;
    p->next_slot = (s + 1) % p->slots;
    pool_fence(p, u, s, STARPU_W); /* claim: after the slot's previous occupant is released */
    for (int j = 0; j < u->n; j++) {
        entry *q = &p->p[u->param[j]];
        if (u->value[s][j] && q->packed) { /* gathered16: this rank's rows cast, gathered packed, unpacked */
            sw_bf16_pack(sw_tensor_whole(q->value, STARPU_R), sw_tensor_whole(q->packed, STARPU_W));
            sw_allgather(p->comm, p->c.grad_group, q->packed, u->value[s][j]);
            q->cur_w16 = u->w16[s][j];
            sw_bf16_unpack(sw_tensor_whole(u->value[s][j], STARPU_R), sw_tensor_whole(q->cur_w16, STARPU_W));
        } else if (u->value[s][j]) {
            q->cur_value = u->value[s][j];
            sw_allgather(p->comm, p->c.grad_group, q->value, q->cur_value);
            q->cur_w16 = u->w16[s][j];
            if (q->cur_w16) sw_cast(sw_tensor_whole(q->cur_value, STARPU_R), sw_tensor_whole(q->cur_w16, STARPU_W));
        }
        if (backward && u->grad[s][j]) q->cur_grad = u->grad[s][j];
    }
}

void sw_params_release_unit(sw_params *p, int unit, int backward)
{
    if (!p->units) return;
    unit_pool *u = &p->units[unit_index(p, unit)];
    int s = u->slot;
    if (s < 0) return; /* nothing gathered (no pooled parameter, or ZeRO-2's forward) */
    for (int j = 0; j < u->n; j++) {
        entry *q = &p->p[u->param[j]];
        if (backward && u->grad[s][j]) {
            /* final for this micro-batch: its shard of the group's sum (from the
             * second micro-batch on, through the slot's shard part, added) */
            if (!u->reductions) {
                sw_reduce_scatter(p->comm, p->c.grad_group, u->grad[s][j], q->shard, SW_SUM);
            } else {
                sw_reduce_scatter(p->comm, p->c.grad_group, u->grad[s][j], u->tmp[s][j], SW_SUM);
                sw_copy_flat(sw_tensor_whole(u->tmp[s][j], STARPU_R), sw_tensor_whole(q->shard, STARPU_RW), 1);
            }
        }
        q->cur_value = q->cur_w16 = q->cur_grad = NULL;
    }
    if (backward) u->reductions++;
    pool_fence(p, u, s, STARPU_RW); /* release: after every task on the views */
    u->slot = -1;
}

void sw_params_gather_traffic(const sw_params *p, int unit, int backward, sw_traffic *t)
{
    if (p->c.zero < 3 || p->gn < 2) return;
    double *g = backward ? t->backward : t->forward;
    for (int k = 0; k < p->n; k++) {
        const entry *q = &p->p[k];
        int64_t rows, cols;
        if (!q->held || (q->unit != unit && q->also != unit) || !value_pooled(p, k)) continue;
        sw_slice_shape(&q->d, &rows, &cols);
        if (gathered16(p, k)) cols /= 2; /* bf16, packed */
        g[p->c.grad_group] += sw_comm_bytes(p->comm, p->c.grad_group, SW_COLL_ALLGATHER, rows, cols);
    }
}

int64_t sw_params_value_first_row(const sw_params *p, int i)
{
    int64_t rows, cols, first = 0, count;
    if (!p->p[i].pooled_value) return 0;
    sw_slice_shape(&p->p[i].d, &rows, &cols);
    sw_tile_range(rows, p->gn, p->gr, &first, &count);
    return first;
}

