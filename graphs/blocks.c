/* Block policies: recomputation and offload for any block (see blocks.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer_util.h"
#include "starweave/blocks.h"
#include "starweave/runtime.h"
#include "starweave/trace.h"

struct stash_ref {
    struct sw_blocks *b;
    int l;
};

struct sw_blocks {
    sw_blocks_config c;
    sw_block_ops ops;
    void *model;
    sw_tensor **x;        /* x[0] .. x[L]; with FULL, x[l] of a block inside a group aliases a working tensor */
    sw_tensor *dx;        /* [rows, cols] gradient of the residual stream */
    int K;                /* FULL: blocks per kept input, else 0 */
    int nslots;
    sw_saved *slots;
    sw_tensor ***stash;   /* offload: stash[l][i] on the offload node holds slot (l)'s tensor i */
    double set_bytes;     /* the memory model: what keep declares */
    struct stash_ref *sref; /* sref[l]: the prefetch callback's argument of block l */
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
    snprintf(name, sizeof name, "%s%d.%s", s->prefix, s->slot, what);
    if (s->n == SW_SAVED_MAX) sw_fail(__FILE__, __LINE__, "sw_saved_new: more than SW_SAVED_MAX tensors", -12);
    return s->t[s->n++] = sw_tensor_new2d(name, SW_F32, rows, cols);
}

static sw_tensor *stream(const sw_blocks *b, const char *what, int l)
{
    char name[48];
    snprintf(name, sizeof name, "h%d.%s", l, what);
    return sw_tensor_new2d(name, SW_F32, b->c.rows, b->c.cols);
}

/* what keep declares for one block (written into the model's slot 0) */
static double declared_bytes(const sw_block_ops *ops, void *model)
{
    sw_saved s = {.declare = 1};
    ops->keep(model, &s);
    return s.bytes;
}

/* the model of block l from the set's bytes */
static double saved_model(const sw_blocks_config *c, double set_bytes, int l)
{
    double input = 4.0 * (double)c->rows * (double)c->cols;
    if (c->recompute == SW_RECOMPUTE_FULL) return l % c->recompute_every == 0 ? input : 0;
    return input + set_bytes;
}

double sw_blocks_saved_model(const sw_blocks_config *c, const sw_block_ops *ops, void *model, int layer)
{
    return saved_model(c, declared_bytes(ops, model), layer);
}

sw_blocks *sw_blocks_create(const sw_blocks_config *c, const sw_block_ops *ops, void *model)
{
    sw_blocks *b = sw_xcalloc(1, sizeof *b);
    b->c = *c;
    b->ops = *ops;
    b->model = model;
    int L = c->layers, full = c->recompute == SW_RECOMPUTE_FULL;
    if (full && c->offload) sw_usage_error("offload needs recompute none or selective (recompute = full keeps only block inputs)");
    b->set_bytes = declared_bytes(ops, model);
    /* block inputs: every one, or with full recomputation those of the
     * kept blocks (l % K == 0; the others are the working set's) */
    b->K = full ? c->recompute_every : 0;
    b->x = sw_xcalloc((size_t)L + 1, sizeof *b->x);
    for (int l = 0; l <= L; l++)
        b->x[l] = !full || l % b->K == 0 || l == L ? stream(b, "x", l) : l < b->K ? stream(b, "x_work", l) : b->x[l % b->K];
    b->dx = sw_tensor_new2d("dres", SW_F32, c->rows, c->cols);
    int n = full ? b->K : c->offload ? 2 : L;
    b->nslots = n < L ? n : L;
    b->slots = sw_xcalloc((size_t)b->nslots, sizeof *b->slots);
    for (int s = 0; s < b->nslots; s++) {
        snprintf(b->slots[s].prefix, sizeof b->slots[s].prefix, "%s", b->nslots < L ? "work" : "h");
        b->slots[s].slot = s;
        ops->keep(model, &b->slots[s]);
    }
    if (c->offload) {
        b->stash = sw_xcalloc((size_t)L, sizeof *b->stash);
        b->sref = sw_xcalloc((size_t)L, sizeof *b->sref);
        for (int l = 0; l < L; l++) {
            b->sref[l] = (struct stash_ref){b, l};
            sw_saved *a = &b->slots[l % b->nslots];
            b->stash[l] = sw_xcalloc((size_t)a->n, sizeof(sw_tensor *));
            for (int i = 0; i < a->n; i++) {
                char name[80];
                snprintf(name, sizeof name, "h%d.%s", l, strchr(a->t[i]->name, '.') + 1);
                b->stash[l][i] = sw_tensor_new_offload(name, a->t[i]->rows, a->t[i]->cols);
            }
        }
    }
    return b;
}

void sw_blocks_destroy(sw_blocks *b)
{
    if (!b) return;
    int L = b->c.layers;
    for (int l = 0; l <= L; l++)
        if (!b->K || l < b->K || b->x[l] != b->x[l % b->K]) sw_tensor_free(b->x[l]); /* not a working-set alias */
    for (int l = 0; b->stash && l < L; l++) {
        for (int i = 0; i < b->slots[l % b->nslots].n; i++) sw_tensor_free(b->stash[l][i]);
        free(b->stash[l]);
    }
    free(b->stash);
    free(b->sref);
    for (int s = 0; s < b->nslots; s++)
        for (int i = 0; i < b->slots[s].n; i++) sw_tensor_free(b->slots[s].t[i]);
    free(b->slots);
    sw_tensor_free(b->dx);
    free(b->x);
    free(b);
}

sw_tensor *sw_blocks_input(sw_blocks *b) { return b->x[0]; }
sw_tensor *sw_blocks_output(sw_blocks *b) { return b->x[b->c.layers]; }
sw_tensor *sw_blocks_grad(sw_blocks *b) { return b->dx; }

static sw_saved *slot_of(sw_blocks *b, int l) { return &b->slots[l % b->nslots]; }

/* Offload, as tasks: the saved set of block l is copied into its tensors
 * on the offload node and marked "won't use"; in backward it is copied
 * back, and once that onload has run, block l - 1's are prefetched (to
 * sw_compute_node) while block l computes. (StarPU's prefetch does not
 * wait for the tasks submitted before it, so it is issued from the
 * onload's completion, when it is due, not at submission.) */
static void prefetch_block(void *arg)
{
    const struct stash_ref *r = arg;
    for (int i = 0; i < slot_of(r->b, r->l)->n; i++)
        starpu_data_prefetch_on_node(r->b->stash[r->l][i]->handle, (unsigned)sw_compute_node(), 1);
}

static void offload_block(sw_blocks *b, int l)
{
    sw_saved *a = slot_of(b, l);
    sw_trace_set_phase(SW_PHASE_OFFLOAD, l);
    for (int i = 0; i < a->n; i++) {
        sw_copy(sw_tensor_whole(b->stash[l][i], STARPU_W), sw_tensor_whole(a->t[i], STARPU_R));
        sw_tensor_wont_use(b->stash[l][i]);
    }
}

static void onload_block(sw_blocks *b, int l)
{
    sw_saved *a = slot_of(b, l);
    sw_trace_set_phase(SW_PHASE_OFFLOAD, l);
    for (int i = 0; i < a->n; i++)
        sw_copy_then(sw_tensor_whole(a->t[i], STARPU_W), sw_tensor_whole(b->stash[l][i], STARPU_R),
                     i == 0 && l > 0 ? prefetch_block : NULL, l > 0 ? &b->sref[l - 1] : NULL);
}

void sw_blocks_forward(sw_blocks *b, int step)
{
    for (int l = 0; l < b->c.layers; l++) {
        sw_trace_set_phase(SW_PHASE_FORWARD, l);
        b->ops.forward(b->model, step, l, slot_of(b, l), b->x[l], b->x[l + 1]);
        if (b->stash) offload_block(b, l);
    }
    sw_trace_set_phase(SW_PHASE_FORWARD, -1);
}

void sw_blocks_backward(sw_blocks *b, int step)
{
    /* blocks in reverse; with full recomputation each group of K blocks is
     * first refilled from its kept input (the group's last block without
     * its output: that is the next group's kept input) */
    for (int l = b->c.layers - 1; l >= 0; l--) {
        if (b->stash) onload_block(b, l);
        if (b->K && ((l + 1) % b->K == 0 || l == b->c.layers - 1))
            for (int r = l / b->K * b->K; r <= l; r++) {
                sw_trace_set_phase(SW_PHASE_RECOMPUTE, r);
                b->ops.forward(b->model, step, r, slot_of(b, r), b->x[r], r < l ? b->x[r + 1] : NULL);
            }
        sw_trace_set_phase(SW_PHASE_BACKWARD, l);
        b->ops.backward(b->model, step, l, slot_of(b, l), b->x[l], b->dx);
    }
    sw_trace_set_phase(SW_PHASE_BACKWARD, -1);
}

sw_block_memory sw_blocks_saved_bytes(const sw_blocks *b, int layer)
{
    double bytes = 0;
    if (!b->K || layer % b->K == 0) bytes += (double)sw_tensor_bytes(b->x[layer]);
    const sw_saved *a = &b->slots[layer % b->nslots];
    for (int i = 0; i < a->n && !b->K; i++)
        bytes += (double)sw_tensor_bytes(b->stash ? b->stash[layer][i] : a->t[i]);
    return (sw_block_memory){saved_model(&b->c, b->set_bytes, layer), bytes};
}

void sw_blocks_traffic(const sw_blocks_config *c, const sw_block_ops *ops, void *model, sw_traffic *t)
{
    int L = c->layers, K = c->recompute == SW_RECOMPUTE_FULL ? c->recompute_every : 0;
    if (!ops->traffic) sw_usage_error("sw_blocks_traffic: the block ops give no traffic function (sw_block_ops.traffic)");
    for (int l = 0; l < L; l++) {
        ops->traffic(model, l, 1, t);
        if (!K) continue;
        sw_traffic again = {{0}, {0}};
        ops->traffic(model, l, (l + 1) % K != 0 && l != L - 1, &again); /* as sw_blocks_backward refills */
        for (int g = 0; g < SW_GROUP_COUNT; g++) t->backward[g] += again.forward[g];
    }
}
