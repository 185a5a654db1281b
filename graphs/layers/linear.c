/* The linear layers (layers.h): column-, row-parallel and replicated,
 * their forward and backward, Zero Bubble's deferred weight gradients, and
 * the parameters every layer registers (sw_layer_add_param). */
#include <math.h>
#include <string.h>

#include "layer_util.h"
#include "starweave/runtime.h"

/* -------------------------------------------------------------- params */

int sw_layer_add_param(sw_ctx *x, const char *name, const char *suffix, int64_t rows, int64_t cols, sw_slice slice,
                       int gemm, float std, float value)
{
    sw_param_desc d;
    memset(&d, 0, sizeof d);
    snprintf(d.name, sizeof d.name, "%s%s", name, suffix);
    d.rows = rows, d.cols = cols, d.slice = slice, d.gemm = gemm, d.init_std = std, d.init_value = value;
    return sw_params_add(x->params, &d);
}

/* argument checks of the layers (sw_check_tensor, sw_check_param of layer_util.h) */
/* a linear's handle, its weight allocated, and W's local shape: its rows
 * are this rank's output features (y's columns), its columns its input
 * features */
static void check_linear(const char *fn, const sw_ctx *x, const sw_linear *l, int64_t *out_l, int64_t *in_l)
{
    sw_check_ptr(fn, "l", l);
    sw_check_param(fn, x, l->w);
    if (l->b >= 0) sw_check_param(fn, x, l->b);
    param_shape(x, l->w, out_l, in_l);
}
/* f's gathered input: [T, in] with TP and sp, not read otherwise */
static int gathers(const sw_ctx *x, const sw_linear *l) { return l->mode == SW_LINEAR_COLUMN && tp_on(x) && x->c.sp; }
/* the rows a column/replicated linear reads from x_local: the residual
 * stream's l rows (column), any rows (replicated: the caller's) */
static void check_linear_in(const char *fn, const sw_ctx *x, const sw_linear *l, const sw_tensor *x_local,
                            const sw_tensor *x_gathered, int64_t in_l)
{
    sw_check_ptr(fn, "x_local", x_local);
    sw_check_tensor(fn, "x_local", x_local, l->mode == SW_LINEAR_COLUMN ? x->resid_rows : x_local->rows, in_l);
    if (gathers(x, l)) sw_check_tensor(fn, "x_gathered", x_gathered, x->tokens, in_l);
}

/* -------------------------------------------------------------- linear */

sw_linear sw_linear_add(sw_ctx *x, const char *name, sw_linear_mode mode, int64_t in, int64_t out, int bias, float std,
                        const sw_slice *out_slice, int n_tiles, const int64_t *tile_sizes)
{
    sw_linear l;
    memset(&l, 0, sizeof l);
    l.mode = mode, l.in = in, l.out = out;
    int t = x->tp.t, r = x->tp.rank;
    sw_slice ws = replicated, bs = replicated;
    if (mode == SW_LINEAR_COLUMN) {
        ws = out_slice ? *out_slice : sw_slice_even(0, out, t, r);
        bs = ws, bs.dim = 1;
    } else if (mode == SW_LINEAR_ROW) {
        ws = sw_slice_even(1, in, t, r);
    }
    l.w = sw_layer_add_param(x, name, "_w", out, in, ws, 1, std, 0.0f);
    l.b = bias ? sw_layer_add_param(x, name, "_b", 1, out, bs, 0, 0.0f, 0.0f) : -1;
    l.n = n_tiles > 0 ? n_tiles : x->row_tiles;
    if (l.n > (int)(sizeof l.sizes / sizeof l.sizes[0])) sw_usage_error("%s: %d output tiles (at most 64)", name, l.n);
    l.sized = tile_sizes != NULL;
    for (int i = 0; tile_sizes && i < l.n; i++) l.sizes[i] = tile_sizes[i];
    return l;
}

sw_linear sw_linear_add_gated(sw_ctx *x, const char *name, int64_t in, int64_t out, float std)
{
    int t = x->tp.t, r = x->tp.rank;
    sw_slice s = {0, 0, {0}, {0}, {0}};
    if (t > 1) s = (sw_slice){2, 0, {r * (out / t), out + r * (out / t)}, {out / t, out / t}, {1, 1}};
    return sw_linear_add(x, name, SW_LINEAR_COLUMN, in, 2 * out, 0, std, &s, 0, NULL);
}

static const int64_t *tile_sizes(const sw_linear *l) { return l->sized ? l->sizes : NULL; }

/* A replicated linear's gradient rule, from the rows it is given
 * (layers.h): this rank's l rows under sp (summed over TP), T rows or l
 * without sp (as they are), B rows with ulysses or ring (scaled by
 * 1/(ulysses ring)). fn NULL: rows known to be valid (no refusal). */
static int replicated_rule(const char *fn, const sw_ctx *x, int64_t rows)
{
    static const char *what[] = {"", "l rows: summed over TP", "T rows: not summed", "B rows: scaled by 1/(ulysses*ring)"};
    int cand[3], n = 0;
    if (rows == x->resid_rows) cand[n++] = tp_on(x) && x->c.sp ? RULE_SUM_TP : RULE_PLAIN;
    if (rows == x->tokens) cand[n++] = RULE_PLAIN;
    if (rows == x->B) cand[n++] = x->ulysses * x->ring > 1 ? RULE_SEQ : RULE_PLAIN;
    if (n == 0 && fn)
        sw_usage_error("%s: x_local: a replicated linear's rows must be l (%lld: this rank's residual rows), T (%lld: "
                       "all of its tokens) or B (%d: one per sequence) (%lld given)",
                       fn, (long long)x->resid_rows, (long long)x->tokens, x->B, (long long)rows);
    for (int i = 1; i < n && fn; i++)
        if (cand[i] != cand[0])
            sw_usage_error("%s: x_local: %lld rows are ambiguous for a replicated linear's gradient (%s, or %s): l = "
                           "%lld, T = %lld, B = %d (seq = tp*ulysses*ring with sp, or seq = ulysses*ring)",
                           fn, (long long)rows, what[cand[0]], what[cand[i]], (long long)x->resid_rows, (long long)x->tokens, x->B);
    return n ? cand[0] : RULE_PLAIN;
}

/* the context's record: l wrote y (layer_util.h) */
static void log_output(sw_ctx *x, const sw_linear *l, const sw_tensor *y, int rule)
{
    struct sw_ctx_log *g = x->log;
    if (!g) return;
    int i = 0;
    while (i < SW_LOG_OUTS && g->out[i].y != y) i++;
    if (i == SW_LOG_OUTS) i = g->next, g->next = (g->next + 1) % SW_LOG_OUTS;
    g->out[i].y = y, g->out[i].l = *l;
    if (!rule) return;
    if (l->w >= g->nrows) {
        int n = l->w + 64;
        g->rows = realloc(g->rows, (size_t)n);
        if (!g->rows) sw_usage_error("out of memory");
        memset(g->rows + g->nrows, 0, (size_t)(n - g->nrows));
        g->nrows = n;
    }
    g->rows[l->w] = (signed char)rule;
}

const sw_linear *sw_ctx_writer(const sw_ctx *x, const sw_tensor *y)
{
    for (int i = 0; x->log && y && i < SW_LOG_OUTS; i++)
        if (x->log->out[i].y == y) return &x->log->out[i].l;
    return NULL;
}

/* a row-parallel linear goes through the _row_ functions, the others not */
static void require_mode(const char *fn, const sw_linear *l, int row)
{
    if ((l->mode == SW_LINEAR_ROW) != row)
        sw_failf(__FILE__, __LINE__, "%s: %s linear (parameter %d); use sw_linear%s_forward/backward", fn,
                 l->mode == SW_LINEAR_ROW ? "a row-parallel" : "a column-parallel or replicated", l->w,
                 l->mode == SW_LINEAR_ROW ? "_row" : "");
}

/* GEMM tiling: OpenBLAS packs both operands of every call, so a task split
 * along one output dimension re-packs the whole other operand. Activations
 * ([T, *], T = seq*batch, small) are re-packed; weights never are: every
 * task gets its own slice of the weight. Output features are split into n
 * tiles.
 *
 * Column-parallel y[T,out] = x[T,in] W^T + b. With sp, x is being
 * all-gathered: row block i of y is computed from rank i's chunk as soon
 * as that chunk is there, this rank's own chunk first, straight from
 * x_local (no wait on the gather). */
void sw_linear_forward(sw_ctx *x, const sw_linear *l, sw_tensor *x_local, sw_tensor *x_gathered, sw_tensor *y)
{
    int64_t out_l, in_l;
    sw_check_ptr("sw_linear_forward", "l", l);
    require_mode("sw_linear_forward", l, 0);
    check_linear("sw_linear_forward", x, l, &out_l, &in_l);
    check_linear_in("sw_linear_forward", x, l, x_local, x_gathered, in_l);
    sw_check_tensor("sw_linear_forward", "y", y, gathers(x, l) ? x->tokens : x_local->rows, out_l);
    log_output(x, l, y, l->mode == SW_LINEAR_REPLICATED ? replicated_rule("sw_linear_forward", x, x_local->rows) : 0);
    int n = l->n;
    const int64_t *sizes = tile_sizes(l);
    sw_tensor *x_full = l->mode == SW_LINEAR_COLUMN ? sw_tp_f_forward(&x->tp, x_local, x_gathered) : x_local;
    starpu_data_handle_t *W = sw_tensor_split(gemm_w(x, l->w), SW_ROWS, n, sizes, STARPU_R);
    starpu_data_handle_t *B = l->b >= 0 ? sw_tensor_split(param(x, l->b), SW_COLS, n, sizes, STARPU_R) : NULL;
    if (x_full == x_local) {
        starpu_data_handle_t in = op16(x, whole_r(x_full));
        for (int j = 0; j < n; j++) {
            starpu_data_handle_t yj = sw_tensor_split(y, SW_COLS, n, sizes, STARPU_W)[j];
            if (B) sw_gemm_bias(in, 0, W[j], 1, B[j], yj);
            else sw_gemm(in, 0, W[j], 1, yj, 1.0f, 0.0f);
        }
        op_done(x, in);
        return;
    }
    int t = x->tp.t;
    for (int k = 0; k < t; k++) {
        int i = (x->tp.rank - k + t) % t; /* the ring all-gather's arrival order */
        starpu_data_handle_t src =
            op16(x, i == x->tp.rank ? whole_r(x_local) : sw_tensor_tiles(x_full, SW_ROWS, t, STARPU_R)[i]);
        for (int j = 0; j < n; j++) {
            starpu_data_handle_t yij = sw_tensor_grid(y, t, NULL, n, sizes, STARPU_W)[i * n + j];
            if (B) sw_gemm_bias(src, 0, W[j], 1, B[j], yij);
            else sw_gemm(src, 0, W[j], 1, yij, 1.0f, 0.0f);
        }
        op_done(x, src);
    }
}

/* B rows, the same on every rank sharing the sequences: the gradient
 * group's sum counts them once per Ulysses/Ring rank (layers.h) */
static float grad_scale(const sw_ctx *x, const sw_linear *l, const sw_tensor *in)
{
    return l->mode == SW_LINEAR_REPLICATED && replicated_rule(NULL, x, in->rows) == RULE_SEQ
               ? 1.0f / (float)(x->ulysses * x->ring)
               : 1.0f;
}

/* dW[out,in] = dy^T x, from dyg (dy, or its bf16 copy), split over out;
 * db = colsum(dy) (with_bias; one task: a column tile's sum is too small a
 * task, and each column's sum is the same over any column split) */
static void gemm_backward_dw(sw_ctx *x, const sw_linear *l, sw_tensor *dy, sw_tensor *dyg, sw_tensor *in, int with_bias,
                             int n, const int64_t *sizes)
{
    const float scale = grad_scale(x, l, in);
    starpu_data_handle_t x16 = op16(x, whole_r(in));
    for (int j = 0; j < n; j++)
        sw_gemm(sw_tensor_split(dyg, SW_COLS, n, sizes, STARPU_R)[j], 1, x16, 0,
                sw_tensor_split(grad(x, l->w), SW_ROWS, n, sizes, STARPU_W)[j], scale, 0.0f);
    op_done(x, x16);
    if (with_bias) sw_colsum(whole_r(dy), whole_w(grad(x, l->b)), scale, 0.0f);
}

/* dW and db (above), dx[T,in] = dy W (split over in, P tiles). bf16: dy
 * is cast once, into a scratch beside dy's (reused as dy's is), whose
 * column tiles the dW GEMMs read and the dx GEMMs the whole. dx, the chain
 * the rest of the backward waits on, goes first, at priority 1, ahead of
 * dW; but where the gradients are all-reduced (dp, ulysses, ring) dW goes
 * first, for its bucket to be reduced during the rest of the backward
 * (BENCHMARKS.md, "dx before dW"). With dw_last dW drops to -1, below
 * forward work too (Zero Bubble). */
static void gemm_backward(sw_ctx *x, const sw_linear *l, sw_tensor *dy, sw_tensor *in, int with_bias, sw_tensor *dx,
                          int n, const int64_t *sizes)
{
    const int dx_first = x->grad_size == 1;
    int prio = sw_set_task_priority(dx_first);
    sw_tensor *dyg = dy;
    if (bf16_gemms(x)) {
        char name[sizeof dy->name + 8];
        snprintf(name, sizeof name, "%s.bf16", dy->name);
        name[sizeof dy->name - 1] = '\0'; /* as the tensor will hold it */
        dyg = sw_scratch_typed(x, name, SW_BF16, dy->rows, dy->cols, 0);
        sw_cast(whole_r(dy), whole_w(dyg));
    }
    if (!dx_first) gemm_backward_dw(x, l, dy, dyg, in, with_bias, n, sizes);
    for (int j = 0; j < x->col_tiles; j++)
        sw_gemm(whole_r(dyg), 0, sw_tensor_tiles(gemm_w(x, l->w), SW_COLS, x->col_tiles, STARPU_R)[j], 0, cols_w(x, dx, j),
                1.0f, 0.0f);
    sw_tensor *keep = x->wdy;
    x->wdy = NULL;
    if (dx_first && x->wdefer && keep) { /* Zero Bubble's split: dW (and db) in the W unit, from dy kept */
        struct sw_wdefer *d = x->wdefer;
        if (keep->rows != dy->rows || keep->cols != dy->cols || keep->dtype != SW_F32)
            sw_usage_error("sw_linear_defer_weight_grads: keep [%lld, %lld] must be fp32 of dy's shape [%lld, %lld]",
                           (long long)keep->rows, (long long)keep->cols, (long long)dy->rows, (long long)dy->cols);
        if (sw_is_scratch(x, in))
            sw_usage_error("sw_linear_defer_weight_grads: the linear's input %s is a scratch tensor, rewritten before "
                           "the W unit (Zero Bubble's split needs the saved input: tp 1)", in->name);
        /* a task of the unit's priority: starpu_data_cpy's runs at 0 (StarPU 1.3: "FIXME: priority!!"), after
         * every ready task of a higher one, and the rest of B, which overwrites dy, waited on it while the
         * stage ran W and the next forward's tasks instead (docs/simulation.md, "Zero Bubble's bubble") */
        sw_copy_flat(whole_r(dy), whole_w(keep), 0);
        if (d->n == d->cap) d->cap = d->cap ? 2 * d->cap : 8, d->item = sw_xrealloc(d->item, (size_t)d->cap * sizeof *d->item);
        d->item[d->n++] = (sw_wgrad){l, keep, in, with_bias, n, sizes};
    } else if (dx_first) {
        sw_set_task_priority(x->c.dw_last ? -1 : prio);
        gemm_backward_dw(x, l, dy, dyg, in, with_bias, n, sizes);
    }
    sw_set_task_priority(prio);
}

void sw_linear_defer_weight_grads(sw_ctx *x, sw_tensor *keep)
{
    sw_check_ptr("sw_linear_defer_weight_grads", "x", x);
    x->wdy = keep;
}

void sw_linear_weight_grads(sw_ctx *x, struct sw_wdefer *d)
{
    for (int i = 0; i < d->n; i++) {
        const sw_wgrad *w = &d->item[i];
        sw_tensor *dyg = w->dy;
        if (bf16_gemms(x)) { /* dy cast again, as the B unit did, into the scratch beside the kept copy */
            dyg = sw_scratch_typed(x, "wdy.bf16", SW_BF16, w->dy->rows, w->dy->cols, 0);
            sw_cast(whole_r(w->dy), whole_w(dyg));
        }
        gemm_backward_dw(x, w->l, w->dy, dyg, w->in, w->with_bias, w->n, w->sizes);
    }
    d->n = 0;
}

sw_tensor *sw_linear_backward(sw_ctx *x, const sw_linear *l, sw_tensor *dy, sw_tensor *x_local, sw_tensor *x_gathered)
{
    int64_t out_l, in_l;
    sw_check_ptr("sw_linear_backward", "l", l);
    require_mode("sw_linear_backward", l, 0);
    check_linear("sw_linear_backward", x, l, &out_l, &in_l);
    check_linear_in("sw_linear_backward", x, l, x_local, x_gathered, in_l);
    sw_check_tensor("sw_linear_backward", "dy", dy, gathers(x, l) ? x->tokens : x_local->rows, out_l);
    if (l->mode == SW_LINEAR_REPLICATED) { /* the gradient's rule from the rows (layers.h) */
        const int rule = replicated_rule("sw_linear_backward", x, x_local->rows);
        sw_tensor *dx = sw_scratch(x, "dln", x_local->rows, l->in);
        gemm_backward(x, l, dy, x_local, l->b >= 0, dx, l->n, tile_sizes(l));
        if (rule == RULE_SUM_TP) { /* this rank's l rows under sp: the parameter gradients are partial */
            sw_tp_sum_replicated_grad(&x->tp, grad(x, l->w));
            if (l->b >= 0) sw_tp_sum_replicated_grad(&x->tp, grad(x, l->b));
        }
        return dx;
    }
    sw_tensor *x_full = x_gathered; /* what the forward read */
    if (x->c.tp_recompute_allgather) x_full = sw_tp_f_forward(&x->tp, x_local, x_gathered); /* gather again */
    sw_tensor *part = sw_scratch(x, "part", x->tokens, l->in);
    gemm_backward(x, l, dy, x_full, l->b >= 0, part, l->n, tile_sizes(l));
    return sw_tp_f_backward(&x->tp, part, sw_scratch(x, "dln", x->resid_rows, l->in));
}

/* row-parallel y[l,h] = g(x[T,in] W^T) + b: the bias is added once, after
 * the reduction; returns the tensor holding y */
sw_tensor *sw_linear_row_forward(sw_ctx *x, const sw_linear *l, sw_tensor *in)
{
    int64_t out_l, in_l;
    sw_check_ptr("sw_linear_row_forward", "l", l);
    require_mode("sw_linear_row_forward", l, 1);
    check_linear("sw_linear_row_forward", x, l, &out_l, &in_l);
    sw_check_tensor("sw_linear_row_forward", "in", in, x->tokens, in_l);
    int P = x->col_tiles; /* column tiles of the output */
    sw_tensor *part = sw_scratch(x, "part", x->tokens, l->out);
    starpu_data_handle_t x16 = op16(x, whole_r(in));
    if (!tp_on(x) && l->b >= 0) {
        for (int j = 0; j < P; j++)
            sw_gemm_bias(x16, 0, sw_tensor_tiles(gemm_w(x, l->w), SW_ROWS, P, STARPU_R)[j], 1,
                         cols_r(x, param(x, l->b), j), cols_w(x, part, j));
        op_done(x, x16);
        return part;
    }
    for (int j = 0; j < P; j++)
        sw_gemm(x16, 0, sw_tensor_tiles(gemm_w(x, l->w), SW_ROWS, P, STARPU_R)[j], 1, cols_w(x, part, j), 1.0f, 0.0f);
    op_done(x, x16);
    sw_tensor *y = sw_tp_g_forward(&x->tp, part, sw_scratch(x, "red", x->resid_rows, l->out));
    for (int i = 0; i < x->row_tiles && l->b >= 0; i++) sw_bias_add(rows_rw(x, y, i), whole_r(param(x, l->b)));
    return y;
}

/* dy [l,h] local: the bias gradient from the local rows (summed over TP
 * with sp), the rest from dy gathered by g's backward */
void sw_linear_row_backward(sw_ctx *x, const sw_linear *l, sw_tensor *dy, sw_tensor *in, sw_tensor *dx)
{
    static const char *fn = "sw_linear_row_backward";
    int64_t out_l, in_l;
    sw_check_ptr(fn, "l", l);
    require_mode(fn, l, 1);
    check_linear(fn, x, l, &out_l, &in_l);
    sw_check_tensor(fn, "dy", dy, x->resid_rows, out_l);
    sw_check_tensor(fn, "in", in, x->tokens, in_l);
    sw_check_tensor(fn, "dx", dx, x->tokens, in_l);
    if (!tp_on(x)) {
        gemm_backward(x, l, dy, in, l->b >= 0, dx, x->row_tiles, NULL);
        return;
    }
    if (l->b >= 0) {
        sw_colsum(whole_r(dy), whole_w(grad(x, l->b)), 1.0f, 0.0f);
        sw_tp_sum_replicated_grad(&x->tp, grad(x, l->b));
    }
    gemm_backward(x, l, sw_tp_g_backward(&x->tp, dy, sw_scratch(x, "dfull", x->tokens, l->out)), in, 0, dx, x->row_tiles, NULL);
}

