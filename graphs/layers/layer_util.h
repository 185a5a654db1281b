/* Private helpers of the layers: tiles of the context's tiling, and the
 * GEMM operands of --dtype bf16. */
#ifndef STARWEAVE_LAYER_UTIL_H
#define STARWEAVE_LAYER_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include "starweave/blocks.h"
#include "starweave/layers.h"
#include "starweave/runtime.h"
#include "starweave/trace.h"
#include "core/check.h"
#include "train/train_internal.h"

static inline starpu_data_handle_t rows_r(const sw_ctx *x, sw_tensor *t, int i) { return sw_tensor_tiles(t, SW_ROWS, x->row_tiles, STARPU_R)[i]; }
static inline starpu_data_handle_t rows_w(const sw_ctx *x, sw_tensor *t, int i) { return sw_tensor_tiles(t, SW_ROWS, x->row_tiles, STARPU_W)[i]; }
static inline starpu_data_handle_t rows_rw(const sw_ctx *x, sw_tensor *t, int i) { return sw_tensor_tiles(t, SW_ROWS, x->row_tiles, STARPU_RW)[i]; }
static inline starpu_data_handle_t cols_r(const sw_ctx *x, sw_tensor *t, int i) { return sw_tensor_tiles(t, SW_COLS, x->col_tiles, STARPU_R)[i]; }
static inline starpu_data_handle_t cols_w(const sw_ctx *x, sw_tensor *t, int i) { return sw_tensor_tiles(t, SW_COLS, x->col_tiles, STARPU_W)[i]; }
static inline starpu_data_handle_t whole_r(sw_tensor *t) { return sw_tensor_whole(t, STARPU_R); }
static inline starpu_data_handle_t whole_w(sw_tensor *t) { return sw_tensor_whole(t, STARPU_W); }

/* the context x and its registry, and parameter i of it allocated on
 * this rank (a layer called before sw_params_allocate, or of another
 * pipeline stage, would read a NULL tensor) */
static inline void sw_check_param(const char *fn, const sw_ctx *x, int i)
{
    sw_check_ptr(fn, "x", x);
    sw_check_ptr(fn, "x->params", x->params);
    const int n = sw_params_count(x->params);
    if (i < 0 || i >= n)
        sw_usage_error("%s: parameter index %d is out of range [0, %d) (a layer of another registry?)", fn, i, n);
    if (!sw_params_allocated(x->params, i))
        sw_usage_error("%s: parameters: must be allocated first (sw_params_allocate; parameter %d '%s' is not held "
                       "on this rank's pipeline stage or not allocated yet)",
                       fn, i, sw_params_desc(x->params, i)->name);
    if (sw_params_value_sharded(x->params, i))
        sw_usage_error("%s: parameter %d '%s' is not gathered: under ZeRO-3 a block reads only its own unit's "
                       "parameters (register block l's after sw_params_set_unit(p, l), what follows the blocks "
                       "after sw_params_set_unit(p, SW_UNIT_AFTER))",
                       fn, i, sw_params_desc(x->params, i)->name);
}

/* a scratch that sw_scratch_invalidate leaves alone (keep != 0): the
 * buffers of point-to-point transfers (ring K/V blocks, Ulysses layouts) */
sw_tensor *sw_scratch_keep(sw_ctx *x, const char *name, int64_t rows, int64_t cols, int keep);

static inline int tp_on(const sw_ctx *x) { return x->tp.t > 1; }

/* sw_ctx.log, the layers' private record of a context (layers.h) */
enum { SW_LOG_OUTS = 256 };
struct sw_ctx_log {
    /* the linear whose sw_linear_forward wrote tensor y last (a ring of the last SW_LOG_OUTS outputs;
     * sw_attention_forward checks its QKV linear by it) */
    struct {
        const sw_tensor *y;
        sw_linear l;
    } out[SW_LOG_OUTS];
    int next;
    /* per weight parameter index: a replicated linear's rows rule at its last forward (0: none yet;
     * sw_linear_traffic's) */
    signed char *rows;
    int nrows;
};
/* a parameter every TP rank holds whole (norms, embeddings' positions, biases) */
static const sw_slice replicated = {0, 0, {0}, {0}, {0}};
/* a replicated linear's rows rule (linear.c's replicated_rule, sw_ctx_log.rows, the traffic model) */
enum { RULE_SUM_TP = 1, RULE_PLAIN = 2, RULE_SEQ = 3 };
/* context.c: the scratch tensor (name, dt, shape) of x, created on first use
 * (sw_scratch: fp32; keep: sw_scratch_invalidate leaves it), and whether t
 * is one of x's scratch tensors */
sw_tensor *sw_scratch_typed(sw_ctx *x, const char *name, sw_dtype dt, int64_t rows, int64_t cols, int keep);
int sw_is_scratch(const sw_ctx *x, const sw_tensor *t);
/* linear.c: registers parameter name+suffix [rows, cols] of this TP rank's slice in the
 * context's registry (every layer's parameters); returns its index */
int sw_layer_add_param(sw_ctx *x, const char *name, const char *suffix, int64_t rows, int64_t cols, sw_slice slice,
                       int gemm, float std, float value);
/* the linear whose sw_linear_forward wrote y last; NULL: none recorded */
const sw_linear *sw_ctx_writer(const sw_ctx *x, const sw_tensor *y);
static inline sw_tensor *param(const sw_ctx *x, int i) { return sw_params_value(x->params, i); }
static inline sw_tensor *grad(const sw_ctx *x, int i) { return sw_params_grad(x->params, i); }

/* --dtype bf16: the weight a GEMM reads (the bf16 copy), and a GEMM
 * operand from an fp32 handle: a bf16 temporary cast from it, released by
 * op_done once its GEMMs are submitted. fp32: the same handle. */
static inline int bf16_gemms(const sw_ctx *x) { return sw_params_get_config(x->params)->dtype == SW_BF16; }
static inline sw_tensor *gemm_w(const sw_ctx *x, int w) { return sw_params_gemm_weight(x->params, w); }
static inline starpu_data_handle_t op16(const sw_ctx *x, starpu_data_handle_t h) { return bf16_gemms(x) ? sw_cast_bf16_temp(h) : h; }
static inline void op_done(const sw_ctx *x, starpu_data_handle_t h)
{
    if (bf16_gemms(x)) starpu_data_unregister_submit(h);
}

/* the traffic model: bytes sent per micro-batch on g, forward or
 * backward, counted for every micro-batch of a step */
static inline void traffic_add(const sw_ctx *x, sw_traffic *t, int backward, sw_group g, double bytes)
{
    (backward ? t->backward : t->forward)[g] += bytes * x->c.grad_accum;
}
/* this rank's shape of parameter i */
static inline void param_shape(const sw_ctx *x, int i, int64_t *rows, int64_t *cols)
{
    sw_slice_shape(sw_params_desc(x->params, i), rows, cols);
}

/* the micro-batch's place in the global batch, for the dropout masks */
static inline void batch_of_key(const sw_ctx *x, sw_rng_key *k)
{
    if (x->B == x->c.batch) return;
    k->batch0 = sw_ctx_micro_batch_first(x, x->micro);
    k->batch_local = x->B;
    k->batch_global = x->c.batch;
}

/* Zero Bubble's split (layers.h, sw_linear_defer_weight_grads): the
 * weight gradients a B unit left, in its order: linear l's dW (and db with
 * bias) from dy (kept) and in (the saved input), computed by the driver's
 * W unit. One list per micro slot (the driver's). */
typedef struct sw_wgrad {
    const struct sw_linear *l;
    sw_tensor *dy, *in;
    int with_bias, n;
    const int64_t *sizes;
} sw_wgrad;
struct sw_wdefer {
    sw_wgrad *item;
    int n, cap;
};
/* the W unit: the list's weight gradients submitted in its order, the list emptied */
void sw_linear_weight_grads(sw_ctx *x, struct sw_wdefer *d);

#endif
