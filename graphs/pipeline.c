/* The step driver and pipeline stages (see pipeline.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer_util.h"
#include "starweave/pipeline.h"
#include "starweave/runtime.h"
#include "starweave/trace.h"

struct sw_pipeline {
    sw_ctx *x;
    sw_model_ops mops;
    void *model;
    sw_blocks_config bc;
    sw_block_ops ops;
    sw_blocks *blocks;
    int pp, stage, first, last; /* stages, this one, and whether it is the first or the last */
    int quota;                  /* micro-batches in flight on this stage */
    sw_tensor *loss;            /* [1,1] the loss received from the last stage (the others) */
};

int sw_pipeline_stage_of(int layer, int layers, int pp)
{
    return pp > 1 && layers >= pp ? layer / (layers / pp) : 0;
}

sw_pipeline *sw_pipeline_create(sw_ctx *x, const sw_blocks_config *c, const sw_block_ops *ops,
                                const sw_model_ops *mops, void *model, int inflight)
{
    static const char *fn = "sw_pipeline_create";
    sw_check_ptr(fn, "x", x);
    sw_check_ptr(fn, "x->params", x->params);
    sw_check_ptr(fn, "c", c);
    sw_check_ptr(fn, "ops", ops);
    sw_check_ptr(fn, "mops", mops);
    const char *missing = !mops->embed_forward ? "embed_forward" : !mops->embed_backward ? "embed_backward"
                          : !mops->head_forward ? "head_forward" : !mops->head_backward ? "head_backward"
                          : !mops->loss ? "loss" : NULL;
    if (missing) sw_usage_error("%s: mops->%s: must not be NULL", fn, missing);
    const sw_mesh *mesh = x->comm ? sw_comm_mesh(x->comm) : NULL;
    int pp = mesh ? sw_mesh_size(mesh, SW_GROUP_PP) : 1, stage = mesh ? sw_mesh_stage(mesh) : 0;
    int K = x->c.grad_accum;
    if (c->layers % pp)
        sw_usage_error("the blocks (%d) must be divisible by the pipeline stages (pp %d)", c->layers, pp);
    if (inflight < 0) sw_usage_error("the micro-batches in flight per stage must be 0 (1F1B) or at least 1 (%d)", inflight);
    sw_pipeline *s = sw_xcalloc(1, sizeof *s);
    s->x = x;
    s->mops = *mops;
    s->model = model;
    s->ops = *ops;
    s->pp = pp, s->stage = stage, s->first = stage == 0, s->last = stage == pp - 1;
    s->quota = inflight ? inflight : pp - stage;
    if (s->quota > K) s->quota = K;
    s->bc = *c;
    s->bc.first = stage * (c->layers / pp);
    s->bc.count = c->layers / pp;
    s->bc.inflight = s->quota;
    s->bc.params = x->params; /* the blocks' ZeRO-2/3 hooks */
    s->blocks = sw_blocks_create(&s->bc, ops, model);
    if (!s->last) s->loss = sw_tensor_new2d("loss", SW_F32, 1, 1);
    return s;
}

void sw_pipeline_destroy(sw_pipeline *s)
{
    if (!s) return;
    sw_blocks_destroy(s->blocks);
    sw_tensor_free(s->loss);
    free(s);
}

sw_blocks *sw_pipeline_blocks(sw_pipeline *s) { return s->blocks; }
sw_tensor *sw_pipeline_loss(sw_pipeline *s) { return s->last ? s->mops.loss(s->model) : s->loss; }
int sw_pipeline_inflight(const sw_pipeline *s) { return s->quota; }
int sw_pipeline_stage(const sw_pipeline *s, int *stages)
{
    if (stages) *stages = s->pp;
    return s->stage;
}

/* micro-batch k's forward on this stage: its input (the embedding, or the
 * previous stage's output), its blocks into micro slot k mod quota, its
 * output to the next stage (the last stage keeps it for the head, which
 * runs with the backward) */
static void forward(sw_pipeline *s, int step, int k)
{
    sw_ctx_set_micro_batch(s->x, k);
    sw_blocks_set_micro_slot(s->blocks, k % s->quota);
    sw_trace_set_phase(SW_PHASE_FORWARD, -1);
    if (s->first) {
        sw_params_gather_unit(s->x->params, SW_UNIT_BEFORE, 0); /* ZeRO-3 */
        s->mops.embed_forward(s->model, step, sw_blocks_input(s->blocks));
        sw_params_release_unit(s->x->params, SW_UNIT_BEFORE, 0);
    } else sw_recv(s->x->comm, SW_GROUP_PP, sw_blocks_input(s->blocks), s->stage - 1);
    sw_blocks_forward(s->blocks, step);
    if (!s->last) sw_send(s->x->comm, SW_GROUP_PP, sw_blocks_output(s->blocks), s->stage + 1);
}

/* micro-batch k's backward: the gradient of its output (the head and loss,
 * forward and backward, on the last stage; else from the next stage), its
 * blocks, then the gradient of its input to the previous stage or into the
 * embedding; its gradients into the registry's buckets */
static void backward(sw_pipeline *s, int step, int k)
{
    sw_ctx *x = s->x;
    sw_tensor *dx = sw_blocks_grad(s->blocks);
    sw_ctx_set_micro_batch(x, k);
    sw_blocks_set_micro_slot(s->blocks, k % s->quota);
    if (s->last) {
        sw_params_gather_unit(x->params, SW_UNIT_AFTER, 1); /* ZeRO-2/3: for the head's forward and backward */
        sw_trace_set_phase(SW_PHASE_FORWARD, -1);
        s->mops.head_forward(s->model, step, sw_blocks_output(s->blocks));
        sw_trace_set_phase(SW_PHASE_BACKWARD, -1);
        s->mops.head_backward(s->model, step, sw_blocks_output(s->blocks), dx);
        sw_params_release_unit(x->params, SW_UNIT_AFTER, 1);
    } else {
        sw_recv(x->comm, SW_GROUP_PP, dx, s->stage + 1);
    }
    sw_blocks_backward(s->blocks, step);
    sw_trace_set_phase(SW_PHASE_BACKWARD, -1);
    if (s->first) {
        sw_params_gather_unit(x->params, SW_UNIT_BEFORE, 1);
        s->mops.embed_backward(s->model, step, dx);
        sw_params_release_unit(x->params, SW_UNIT_BEFORE, 1);
    } else sw_send(x->comm, SW_GROUP_PP, dx, s->stage - 1);
    sw_params_reduce_grads(x->params, k);
}

void sw_pipeline_step(sw_pipeline *s, int step)
{
    sw_check_ptr("sw_pipeline_step", "s", s);
    int K = s->x->c.grad_accum, next = 0;
    sw_params_cast_bf16(s->x->params); /* bf16: the GEMMs' weights, as they are now */
    /* the order the quota allows: micro-batch k + quota's forward after
     * micro-batch k's backward (they share a micro slot) */
    for (int k = 0; k < K; k++) {
        while (next < K && next < k + s->quota) forward(s, step, next++);
        backward(s, step, k);
    }
    /* The scratch is dead until the next step: StarPU may drop every copy
     * instead of keeping (or writing back) it. Once per step, not after
     * each micro-batch's backward: the next micro-batch's tasks then ran
     * beside the invalidation and read garbage (deterministically with tp
     * 2 + sp and 4 micro-batches, tests/test_tp), and the gradient of the
     * blocks' input is not invalidated at all where it was just sent (a
     * detached send's read is not waited for: the previous stage received
     * garbage once in five runs of --pp 2 --grad-accum 4). */
    sw_scratch_invalidate(s->x);
    sw_params_update(s->x->params, step);
    /* the loss, from the last stage to every other */
    for (int r = 0; r < s->pp - 1 && s->last; r++) sw_send(s->x->comm, SW_GROUP_PP, sw_pipeline_loss(s), r);
    if (!s->last) sw_recv(s->x->comm, SW_GROUP_PP, s->loss, s->pp - 1);
}

void sw_pipeline_traffic(sw_pipeline *s, sw_traffic *t)
{
    sw_check_ptr("sw_pipeline_traffic", "s", s);
    memset(t, 0, sizeof *t);
    sw_comm *c = s->x->comm;
    int K = s->x->c.grad_accum;
    if (s->first && s->mops.embed_traffic) s->mops.embed_traffic(s->model, t);
    for (int k = 0; k < K; k++) { /* ZeRO-3's gathers around what comes before and after the blocks */
        if (s->first) sw_params_gather_traffic(s->x->params, SW_UNIT_BEFORE, 0, t);
        if (s->first) sw_params_gather_traffic(s->x->params, SW_UNIT_BEFORE, 1, t);
        if (s->last) sw_params_gather_traffic(s->x->params, SW_UNIT_AFTER, 1, t);
    }
    sw_blocks_traffic(&s->bc, &s->ops, s->model, t);
    if (s->last && s->mops.head_traffic) s->mops.head_traffic(s->model, t);
    double boundary = sw_comm_bytes(c, SW_GROUP_PP, SW_COLL_SEND, s->bc.rows, s->bc.cols);
    if (!s->last) t->forward[SW_GROUP_PP] += K * boundary;
    if (!s->first) t->backward[SW_GROUP_PP] += K * boundary;
    if (s->last) t->backward[SW_GROUP_PP] += (s->pp - 1) * sw_comm_bytes(c, SW_GROUP_PP, SW_COLL_SEND, 1, 1);
    sw_params_traffic(s->x->params, t);
}
