/* Block policies: recomputation and offload for any block (see blocks.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "train_internal.h"
#include "starweave/blocks.h"
#include "starweave/runtime.h"
#include "starweave/trace.h"

struct stash_ref {
    struct sw_blocks *b;
    int j, l; /* micro slot, block */
};

/* Block l of the model is block i = l - first of this stage. With several
 * micro-batches in flight (pipeline stages), each has a micro slot of its
 * own: its residual stream and saved sets (but the working sets of full
 * recomputation and offload, which are refilled before each backward). */
struct sw_blocks {
    sw_blocks_config c;
    sw_block_ops ops;
    void *model;
    int first, count;     /* the blocks of this stage */
    int nmicro, cur;      /* micro slots, and the one in use */
    sw_tensor ***x;       /* x[j][0] .. x[j][count] of micro slot j; with FULL, x[j][i] of a block inside a group
                           * aliases a working tensor */
    sw_tensor *dx;        /* [rows, cols] gradient of the residual stream */
    int K;                /* FULL: blocks per kept input, else 0 */
    int per_micro;        /* saved sets per micro slot: count, or shared working sets (FULL, offload) */
    int nslots;
    sw_saved *slots;
    sw_tensor ***stash;   /* offload: stash[j n + i][k] on the offload node holds micro slot j's block i's saved
                           * tensor k */
    sw_tensor *kin[2];    /* FULL with offload: the kept inputs' working tensors (group g's in kin[g % 2]) */
    sw_tensor **kstash;   /* FULL with offload: kstash[j G + g] on the offload node holds micro slot j's group g's
                           * kept input (G groups) */
    double set_bytes;     /* the memory model: what keep declares */
    struct stash_ref *sref; /* sref[j n + i] (FULL: [j G + g]): the prefetch callback's argument of micro slot j's
                             * block i (group g) */
    const sw_blocks *pool;  /* sw_blocks_create_pooled: the owner of every tensor above but dx, else NULL */
};

static const char *const recompute_names[] = {"none", "selective", "full"};

const char *sw_recompute_name(int mode) { return mode >= 0 && mode < 3 ? recompute_names[mode] : "?"; }

int sw_recompute_parse(const char *name)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(name, recompute_names[i])) return i;
    return -1;
}

sw_tensor *sw_saved_new(sw_saved *s, const char *what, int64_t rows, int64_t cols)
{
    if (s->declare) {
        s->bytes += 4.0 * (double)rows * (double)cols;
        return NULL;
    }
    char name[64];
    snprintf(name, sizeof name, "%s.%s", s->prefix, what);
    if (s->n == SW_SAVED_MAX) sw_fail(__FILE__, __LINE__, "sw_saved_new: more than SW_SAVED_MAX tensors", -12);
    return s->t[s->n++] = sw_tensor_new2d(name, SW_F32, rows, cols);
}

static int shared_sets(const sw_blocks *b) { return b->K || b->c.offload; }

/* the name of block l's tensor `what` in micro slot j */
static sw_tensor *stream(const sw_blocks *b, const char *what, int j, int l)
{
    char name[48];
    if (b->nmicro > 1) snprintf(name, sizeof name, "m%d.h%d.%s", j, l, what);
    else snprintf(name, sizeof name, "h%d.%s", l, what);
    return sw_tensor_new2d(name, SW_F32, b->c.rows, b->c.cols);
}

/* what keep declares for one block (written into the model's slot 0) */
static double declared_bytes(const sw_block_ops *ops, void *model)
{
    sw_saved s = {.declare = 1};
    void *state = ops->state_bytes ? sw_xcalloc(1, ops->state_bytes) : NULL;
    s.state = state;
    ops->keep(model, &s);
    free(state);
    return s.bytes;
}

/* the model of block i of a stage from the set's bytes */
static double saved_model(const sw_blocks_config *c, double set_bytes, int i)
{
    double input = 4.0 * (double)c->rows * (double)c->cols;
    if (c->recompute == SW_RECOMPUTE_FULL) return i % c->recompute_every == 0 ? input : 0;
    return input + set_bytes;
}

/* the stage's blocks: [first, first + count) */
static int stage_count(const sw_blocks_config *c) { return c->count ? c->count : c->layers - c->first; }

/* a block service's configuration and ops: what every call of it reads */
static void check_ops(const char *fn, const sw_blocks_config *c, const sw_block_ops *ops)
{
    sw_check_ptr(fn, "c", c);
    sw_check_ptr(fn, "ops", ops);
    if (!ops->keep || !ops->forward || !ops->backward)
        sw_usage_error("%s: ops->%s: must not be NULL (a block's keep, forward and backward)", fn,
                       !ops->keep ? "keep" : !ops->forward ? "forward" : "backward");
    if (c->layers < 1 || c->rows < 1 || c->cols < 1)
        sw_usage_error("%s: c: layers, rows and cols must be positive (%d, %lld, %lld)", fn, c->layers,
                       (long long)c->rows, (long long)c->cols);
    if (c->recompute == SW_RECOMPUTE_FULL && c->recompute_every < 1)
        sw_usage_error("%s: c: recompute_every must be at least 1 with full recomputation (%d)", fn, c->recompute_every);
}

double sw_blocks_saved_model(const sw_blocks_config *c, const sw_block_ops *ops, void *model, int layer)
{
    check_ops("sw_blocks_saved_model", c, ops);
    return saved_model(c, declared_bytes(ops, model), layer - c->first);
}

void sw_blocks_check_offload_budget(const sw_blocks_config *c, const sw_block_ops *ops, void *model)
{
    check_ops("sw_blocks_check_offload_budget", c, ops);
    const int budget = sw_offload_budget_mb();
    if (!c->offload || budget <= 0) return;
    const double block_mib = saved_model(c, declared_bytes(ops, model), 0) / SW_MIB;
    if (budget < 2 * block_mib)
        sw_usage_error("offload-budget-mb (%d) must hold two blocks' saved activations (2 x %.2f MiB)", budget,
                       block_mib);
}

double sw_blocks_bytes(const sw_blocks_config *c, const sw_block_ops *ops, void *model)
{
    check_ops("sw_blocks_bytes", c, ops);
    /* sw_blocks_create's residual stream x[j][0 .. n], with FULL only kept inputs (i % K == 0), the
     * output and, in micro slot 0, the working group's other inputs (i < K) */
    int n = stage_count(c), micro = c->inflight > 1 ? c->inflight : 1, streams = 0;
    int K = c->recompute == SW_RECOMPUTE_FULL ? c->recompute_every : 0, kin = K && c->offload;
    for (int j = 0; j < micro; j++)
        for (int i = 0; i <= n; i++) streams += !K || i == n || (i % K == 0 ? !kin : j == 0 && i < K);
    if (kin) streams += (n + K - 1) / K < 2 ? 1 : 2; /* the kept inputs' two working tensors */
    double row = 4.0 * (double)c->rows * (double)c->cols;
    return (streams + 1) * row + sw_blocks_slots(c) * declared_bytes(ops, model);
}

int sw_blocks_slots(const sw_blocks_config *c)
{
    int n = stage_count(c), micro = c->inflight > 1 ? c->inflight : 1;
    if (c->recompute == SW_RECOMPUTE_FULL) return c->recompute_every < n ? c->recompute_every : n;
    if (c->offload) return n < 2 ? n : 2;
    return n * micro;
}

void sw_blocks_config_default(sw_blocks_config *c)
{
    sw_check_ptr("sw_blocks_config_default", "c", c);
    memset(c, 0, sizeof *c);
    c->recompute = SW_RECOMPUTE_SELECTIVE, c->recompute_every = 1, c->inflight = 1;
}

sw_blocks *sw_blocks_create(const sw_blocks_config *c, const sw_block_ops *ops, void *model)
{
    check_ops("sw_blocks_create", c, ops);
    if (c->params) sw_params_check_units(c->params, "sw_blocks_create", c->layers);
    sw_blocks_check_offload_budget(c, ops, model);
    sw_blocks *b = sw_xcalloc(1, sizeof *b);
    b->c = *c;
    b->ops = *ops;
    b->model = model;
    b->first = c->first;
    b->count = stage_count(c);
    b->nmicro = c->inflight > 1 ? c->inflight : 1;
    int n = b->count, full = c->recompute == SW_RECOMPUTE_FULL;
    if (c->first < 0 || n < 1 || c->first + n > c->layers)
        sw_usage_error("sw_blocks_create: blocks %d .. %d of %d", c->first, c->first + n - 1, c->layers);
    b->set_bytes = declared_bytes(ops, model);
    /* block inputs of each micro slot: every one, or with full
     * recomputation those of the kept blocks (i % K == 0; the others are
     * the working set's, shared by the micro slots) */
    b->K = full ? c->recompute_every : 0;
    b->x = sw_xcalloc((size_t)b->nmicro, sizeof *b->x);
    const int G = full ? (n + b->K - 1) / b->K : 0; /* groups of K blocks */
    for (int g = 0; full && c->offload && g < (G < 2 ? G : 2); g++) b->kin[g] = stream(b, g ? "x_kept1" : "x_kept0", 0, b->first);
    for (int j = 0; j < b->nmicro; j++) {
        b->x[j] = sw_xcalloc((size_t)n + 1, sizeof **b->x);
        for (int i = 0; i <= n; i++)
            b->x[j][i] = !full || i == n ? stream(b, "x", j, b->first + i)
                         : i % b->K == 0 ? (b->kin[0] ? b->kin[i / b->K % 2] : stream(b, "x", j, b->first + i))
                         : j == 0 && i < b->K ? stream(b, "x_work", 0, b->first + i)
                                              : b->x[0][i % b->K];
    }
    b->dx = sw_tensor_new2d("dres", SW_F32, c->rows, c->cols);
    b->nslots = sw_blocks_slots(c);
    b->per_micro = shared_sets(b) ? b->nslots : n;
    b->slots = sw_xcalloc((size_t)b->nslots, sizeof *b->slots);
    for (int s = 0; s < b->nslots; s++) {
        sw_saved *a = &b->slots[s];
        int j = s / b->per_micro, l = b->first + s % b->per_micro;
        if (shared_sets(b) && b->nslots < n) snprintf(a->prefix, sizeof a->prefix, "work%d", s);
        else if (b->nmicro > 1) snprintf(a->prefix, sizeof a->prefix, "m%d.h%d", j, l);
        else snprintf(a->prefix, sizeof a->prefix, "h%d", l);
        a->slot = s;
        a->state = ops->state_bytes ? sw_xcalloc(1, ops->state_bytes) : NULL;
        ops->keep(model, a);
    }
    if (full && c->offload) { /* every micro slot's kept inputs on the offload node */
        b->kstash = sw_xcalloc((size_t)(b->nmicro * G), sizeof *b->kstash);
        b->sref = sw_xcalloc((size_t)(b->nmicro * G), sizeof *b->sref);
        for (int j = 0; j < b->nmicro; j++)
            for (int g = 0; g < G; g++) {
                char name[48];
                snprintf(name, sizeof name, "m%d.h%d.x_kept", j, b->first + g * b->K);
                b->kstash[j * G + g] = sw_tensor_new_offload(name, c->rows, c->cols);
                b->sref[j * G + g] = (struct stash_ref){b, j, g};
            }
    } else if (c->offload) { /* every micro slot's saved sets on the offload node; the working sets are shared */
        b->stash = sw_xcalloc((size_t)(b->nmicro * n), sizeof *b->stash);
        b->sref = sw_xcalloc((size_t)(b->nmicro * n), sizeof *b->sref);
        for (int j = 0; j < b->nmicro; j++)
            for (int i = 0; i < n; i++) {
                b->sref[j * n + i] = (struct stash_ref){b, j, i};
                sw_saved *a = &b->slots[i % b->nslots];
                sw_tensor **st = b->stash[j * n + i] = sw_xcalloc((size_t)a->n, sizeof(sw_tensor *));
                for (int k = 0; k < a->n; k++) {
                    char name[80], micro[16] = "";
                    if (b->nmicro > 1) snprintf(micro, sizeof micro, "m%d.", j);
                    snprintf(name, sizeof name, "%sh%d.%s", micro, b->first + i, strchr(a->t[k]->name, '.') + 1);
                    st[k] = sw_tensor_new_offload(name, a->t[k]->rows, a->t[k]->cols);
                }
            }
    }
    return b;
}

sw_blocks *sw_blocks_create_pooled(const sw_blocks_config *c, const sw_block_ops *ops, void *model, const sw_blocks *pool)
{
    check_ops("sw_blocks_create_pooled", c, ops);
    sw_check_ptr("sw_blocks_create_pooled", "pool", pool);
    int n = stage_count(c), micro = c->inflight > 1 ? c->inflight : 1;
    if (n != pool->count || micro != pool->nmicro || c->recompute != pool->c.recompute ||
        c->recompute_every != pool->c.recompute_every || c->offload != pool->c.offload || c->rows != pool->c.rows ||
        c->cols != pool->c.cols || ops->keep != pool->ops.keep)
        sw_usage_error("sw_blocks_create_pooled: blocks %d .. %d: their shapes, micro slots (%d) and policies must be "
                       "the pool's (blocks %d .. %d, %d micro slots)", c->first, c->first + n - 1, micro, pool->first,
                       pool->first + pool->count - 1, pool->nmicro);
    if (c->first < 0 || c->first + n > c->layers)
        sw_usage_error("sw_blocks_create_pooled: blocks %d .. %d of %d", c->first, c->first + n - 1, c->layers);
    sw_blocks *b = sw_xcalloc(1, sizeof *b);
    *b = *pool; /* the pool's residual streams, saved sets, working sets and stashes */
    b->c = *c;
    b->ops = *ops;
    b->model = model;
    b->first = c->first;
    b->cur = 0;
    b->pool = pool;
    b->dx = sw_tensor_new2d("dres", SW_F32, c->rows, c->cols);
    return b;
}

double sw_blocks_pooled_bytes(const sw_blocks_config *c) { return 4.0 * (double)c->rows * (double)c->cols; }

void sw_blocks_destroy(sw_blocks *b)
{
    if (!b) return;
    if (b->pool) { /* its gradient stream only: the rest is the pool's */
        sw_tensor_free(b->dx);
        free(b);
        return;
    }
    int n = b->count;
    const int K = b->K, G = K ? (n + K - 1) / K : 0;
    for (int j = 0; j < b->nmicro; j++) { /* the tensors of micro slot j's stream (not the aliases) */
        for (int i = 0; i <= n; i++)
            if (!K || i == n || (i % K == 0 ? !b->kin[0] : j == 0 && i < K)) sw_tensor_free(b->x[j][i]);
        free(b->x[j]);
    }
    sw_tensor_free(b->kin[0]);
    sw_tensor_free(b->kin[1]);
    for (int i = 0; b->kstash && i < b->nmicro * G; i++) sw_tensor_free(b->kstash[i]);
    free(b->kstash);
    for (int i = 0; b->stash && i < b->nmicro * n; i++) {
        for (int k = 0; k < b->slots[i % n % b->nslots].n; k++) sw_tensor_free(b->stash[i][k]);
        free(b->stash[i]);
    }
    free(b->stash);
    free(b->sref);
    for (int s = 0; s < b->nslots; s++) {
        for (int k = 0; k < b->slots[s].n; k++) sw_tensor_free(b->slots[s].t[k]);
        free(b->slots[s].state);
    }
    free(b->slots);
    sw_tensor_free(b->dx);
    free(b->x);
    free(b);
}

void sw_blocks_set_micro_slot(sw_blocks *b, int slot)
{
    sw_check_ptr("sw_blocks_set_micro_slot", "b", b);
    if (slot < 0 || slot >= b->nmicro)
        sw_usage_error("sw_blocks_set_micro_slot: slot %d of %d micro slots", slot, b->nmicro);
    b->cur = slot;
}

sw_tensor *sw_blocks_input(sw_blocks *b) { return b->x[b->cur][0]; }
sw_tensor *sw_blocks_output(sw_blocks *b) { return b->x[b->cur][b->count]; }
sw_tensor *sw_blocks_grad(sw_blocks *b) { return b->dx; }

/* the saved set of the stage's block i in the current micro slot */
static sw_saved *slot_of(sw_blocks *b, int i)
{
    return &b->slots[(shared_sets(b) ? 0 : b->cur * b->count) + i % b->per_micro];
}

/* block `layer`'s forward (y NULL: without its output) or backward,
 * between the registry's ZeRO-2/3 hooks: its parameters gathered into the
 * pool before, released after (its gradients reduce-scattered after a
 * backward) */
static void run_forward(sw_blocks *b, int step, int i, sw_tensor *x, sw_tensor *y)
{
    int layer = b->first + i;
    if (b->c.params) sw_params_gather_unit(b->c.params, layer, 0);
    b->ops.forward(b->model, step, layer, slot_of(b, i), x, y);
    if (b->c.params) sw_params_release_unit(b->c.params, layer, 0);
}

static void run_backward(sw_blocks *b, int step, int i, sw_tensor *x)
{
    int layer = b->first + i;
    if (b->c.params) sw_params_gather_unit(b->c.params, layer, 1);
    b->ops.backward(b->model, step, layer, slot_of(b, i), x, b->dx);
    if (b->c.params) sw_params_release_unit(b->c.params, layer, 1);
}

/* Offload, as tasks: the saved set of block i is copied into its tensors
 * on the offload node and marked "won't use"; in backward it is copied
 * back, and once that onload has run, block i - 1's are prefetched (to
 * sw_compute_node) while block i computes. (StarPU's prefetch does not
 * wait for the tasks submitted before it, so it is issued from the
 * onload's completion, when it is due, not at submission.) */
static void prefetch_block(void *arg)
{
    const struct stash_ref *r = arg;
    for (int k = 0; k < slot_of(r->b, r->l)->n; k++)
        starpu_data_prefetch_on_node(r->b->stash[r->j * r->b->count + r->l][k]->handle, (unsigned)sw_compute_node(), 1);
}

static void offload_block(sw_blocks *b, int i)
{
    sw_saved *a = slot_of(b, i);
    sw_trace_set_phase(SW_PHASE_OFFLOAD, b->first + i);
    sw_tensor **st = b->stash[b->cur * b->count + i];
    for (int k = 0; k < a->n; k++) {
        sw_copy(sw_tensor_whole(st[k], STARPU_W), sw_tensor_whole(a->t[k], STARPU_R));
        sw_tensor_wont_use(st[k]);
    }
}

static void onload_block(sw_blocks *b, int i)
{
    sw_saved *a = slot_of(b, i);
    sw_trace_set_phase(SW_PHASE_OFFLOAD, b->first + i);
    int at = b->cur * b->count + i;
    for (int k = 0; k < a->n; k++)
        sw_copy_then(sw_tensor_whole(a->t[k], STARPU_W), sw_tensor_whole(b->stash[at][k], STARPU_R),
                     k == 0 && i > 0 ? prefetch_block : NULL, i > 0 ? &b->sref[at - 1] : NULL);
}

/* Full recomputation with offload (Open-Sora's checkpoint offload): the
 * kept input of group g (of K blocks) goes to the offload node once the
 * group's first block has read it, and comes back before the group is
 * refilled, group g - 1's prefetched while group g computes. */
static int groups(const sw_blocks *b) { return (b->count + b->K - 1) / b->K; }

static void prefetch_kept(void *arg)
{
    const struct stash_ref *r = arg;
    starpu_data_prefetch_on_node(r->b->kstash[r->j * groups(r->b) + r->l]->handle, (unsigned)sw_compute_node(), 1);
}

static void offload_kept(sw_blocks *b, int g)
{
    sw_tensor *st = b->kstash[b->cur * groups(b) + g];
    sw_trace_set_phase(SW_PHASE_OFFLOAD, b->first + g * b->K);
    sw_copy(sw_tensor_whole(st, STARPU_W), sw_tensor_whole(b->x[b->cur][g * b->K], STARPU_R));
    sw_tensor_wont_use(st);
}

static void onload_kept(sw_blocks *b, int g)
{
    int at = b->cur * groups(b) + g;
    sw_trace_set_phase(SW_PHASE_OFFLOAD, b->first + g * b->K);
    sw_copy_then(sw_tensor_whole(b->x[b->cur][g * b->K], STARPU_W), sw_tensor_whole(b->kstash[at], STARPU_R),
                 g > 0 ? prefetch_kept : NULL, g > 0 ? &b->sref[at - 1] : NULL);
}

void sw_blocks_forward(sw_blocks *b, int step)
{
    sw_check_ptr("sw_blocks_forward", "b", b);
    sw_tensor **x = b->x[b->cur];
    for (int i = 0; i < b->count; i++) {
        sw_trace_set_phase(SW_PHASE_FORWARD, b->first + i);
        run_forward(b, step, i, x[i], x[i + 1]);
        if (b->stash) offload_block(b, i);
        if (b->kstash && i % b->K == 0) offload_kept(b, i / b->K);
    }
    sw_trace_set_phase(SW_PHASE_FORWARD, -1);
}

void sw_blocks_backward(sw_blocks *b, int step)
{
    sw_check_ptr("sw_blocks_backward", "b", b);
    /* blocks in reverse; with full recomputation each group of K blocks is
     * first refilled from its kept input (the group's last block without
     * its output: that is the next group's kept input) */
    sw_tensor **x = b->x[b->cur];
    for (int i = b->count - 1; i >= 0; i--) {
        if (b->stash) onload_block(b, i);
        if (b->kstash && ((i + 1) % b->K == 0 || i == b->count - 1)) onload_kept(b, i / b->K);
        if (b->K && ((i + 1) % b->K == 0 || i == b->count - 1))
            for (int r = i / b->K * b->K; r <= i; r++) {
                sw_trace_set_phase(SW_PHASE_RECOMPUTE, b->first + r);
                run_forward(b, step, r, x[r], r < i ? x[r + 1] : NULL);
            }
        sw_trace_set_phase(SW_PHASE_BACKWARD, b->first + i);
        run_backward(b, step, i, x[i]);
    }
    sw_trace_set_phase(SW_PHASE_BACKWARD, -1);
}

sw_block_memory sw_blocks_saved_bytes(const sw_blocks *b, int layer)
{
    double bytes = 0;
    int i = layer - b->first;
    if (i < 0 || i >= b->count) return (sw_block_memory){0, 0}; /* another stage's block */
    if (!b->K || i % b->K == 0) bytes += (double)sw_tensor_bytes(b->x[0][i]);
    const sw_saved *a = &b->slots[i % b->per_micro];
    for (int k = 0; k < a->n && !b->K; k++)
        bytes += (double)sw_tensor_bytes(b->stash ? b->stash[i][k] : a->t[k]);
    return (sw_block_memory){saved_model(&b->c, b->set_bytes, i), bytes};
}

void sw_blocks_traffic(const sw_blocks_config *c, const sw_block_ops *ops, void *model, sw_traffic *t)
{
    check_ops("sw_blocks_traffic", c, ops);
    sw_check_ptr("sw_blocks_traffic", "t", t);
    int n = stage_count(c), K = c->recompute == SW_RECOMPUTE_FULL ? c->recompute_every : 0;
    if (!ops->traffic) sw_usage_error("sw_blocks_traffic: the block ops give no traffic function (sw_block_ops.traffic)");
    for (int i = 0; i < n; i++) {
        ops->traffic(model, c->first + i, 1, t);
        /* ZeRO-3: the block's parameters gathered before its forward and backward, every micro-batch
         * (and before its forward again with full recomputation) */
        int gathers = c->params ? sw_params_get_config(c->params)->grad_accum : 0;
        for (int k = 0; k < gathers; k++) {
            sw_params_gather_traffic(c->params, c->first + i, 0, t);
            sw_params_gather_traffic(c->params, c->first + i, 1, t);
            if (K) sw_params_gather_traffic(c->params, c->first + i, 1, t); /* the refill, in backward */
        }
        if (!K) continue;
        sw_traffic again = {{0}, {0}};
        ops->traffic(model, c->first + i, (i + 1) % K != 0 && i != n - 1, &again); /* as sw_blocks_backward refills */
        for (int g = 0; g < SW_GROUP_COUNT; g++) t->backward[g] += again.forward[g];
    }
}
