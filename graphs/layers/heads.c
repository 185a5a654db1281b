/* Heads and losses on one row per sequence (see heads.h): pooling, a
 * replicated head on the pooled rows, MSE or cross-entropy over classes,
 * and the loaders of float inputs and per-sequence targets. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layer_util.h"
#include "starweave/heads.h"
#include "starweave/runtime.h"

/* ------------------------------------------------------------- pooling */

/* the ranks holding the other positions of this rank's sequences: TP with
 * sp (the l rows are a slice of the positions), Ulysses and Ring; 0: none */
static int pool_group(const sw_ctx *x, sw_group *g)
{
    const int by_tp = tp_on(x) && x->c.sp, by_cp = x->ulysses * x->ring > 1;
    if (!by_tp && !by_cp) return 0;
    *g = by_tp && by_cp ? SW_GROUP_TP_SP : by_tp ? SW_GROUP_TP : SW_GROUP_SP;
    return 1;
}

/* this rank's positions in its l rows that the pooling reads: all of them
 * (mean), or the one of global position 0 if this rank holds it (first) */
static void pool_range(const sw_ctx *x, sw_pool_mode mode, int64_t *p0, int64_t *np)
{
    const int64_t first = x->row0 / x->B, n = x->resid_rows / x->B; /* the l rows' positions among the T rows' */
    *p0 = 0, *np = n;
    if (mode == SW_POOL_MEAN) return;
    *np = 0;
    for (int64_t i = first; i < first + n; i++)
        if (sw_ctx_position(x, i) == 0) *p0 = i - first, *np = 1;
}

/* with key lengths loaded (sw_ctx_load_key_lengths), mean pooling averages
 * each sequence's positions below its length: the current micro-batch's
 * lengths and the global positions of the l rows' positions as runs; 0:
 * none loaded (every position, 1/seq) or first-token pooling (position 0
 * is always valid) */
static int pool_lengths(const sw_ctx *x, const char *fn, sw_pool_mode mode, sw_pool_lengths *L)
{
    if (mode != SW_POOL_MEAN || !x->key_len) return 0;
    const int32_t *len = x->key_len + (size_t)x->micro * x->B;
    if (len[0] < 1)
        sw_usage_error("%s: key lengths: those of micro-batch %d must be loaded (sw_ctx_load_key_lengths) before its "
                       "step is submitted, once any are",
                       fn, x->micro);
    if (x->B > SW_ATTN_MAX_SEQS)
        sw_usage_error("%s: key lengths: at most %d sequences per micro-batch (%d)", fn, SW_ATTN_MAX_SEQS, x->B);
    memset(L, 0, sizeof *L);
    const int64_t first = x->row0 / x->B, n = x->resid_rows / x->B;
    for (int64_t i = 0; i < n; i++) {
        const int64_t pos = sw_ctx_position(x, first + i);
        if (i > 0 && pos == L->pos0[L->nruns - 1] + i - L->i0[L->nruns - 1]) continue;
        if (L->nruns == SW_POOL_MAX_RUNS) sw_fail(__FILE__, __LINE__, "pool_lengths: too many runs of positions", -22);
        L->i0[L->nruns] = i, L->pos0[L->nruns] = pos, L->nruns++;
    }
    memcpy(L->len, len, sizeof(int32_t) * (size_t)x->B);
    return 1;
}

/* sw_check_tensor, with the shape named where the tensor is missing (its columns may come from it) */
static void require_tensor(const char *fn, const char *what, const sw_tensor *t, int64_t rows, int64_t cols,
                           const char *shape)
{
    if (!t) sw_usage_error("%s: %s: must be a tensor %s (NULL)", fn, what, shape);
    sw_check_tensor(fn, what, t, rows, cols);
}

static void require_mode(const char *fn, sw_pool_mode mode)
{
    if (mode != SW_POOL_MEAN && mode != SW_POOL_FIRST)
        sw_usage_error("%s: mode: must be SW_POOL_MEAN or SW_POOL_FIRST (%d)", fn, (int)mode);
}

void sw_pool_forward(sw_ctx *x, sw_pool_mode mode, sw_tensor *in, sw_tensor *pooled)
{
    require_mode("sw_pool_forward", mode);
    require_tensor("sw_pool_forward", "pooled", pooled, x->B, pooled ? pooled->cols : 0, "[B, h]");
    require_tensor("sw_pool_forward", "in", in, x->resid_rows, pooled->cols, "[l, h]");
    int64_t p0, np;
    pool_range(x, mode, &p0, &np);
    sw_pool_lengths L;
    if (pool_lengths(x, "sw_pool_forward", mode, &L))
        sw_pool_fwd_len(whole_r(in), whole_w(pooled), p0, np, 1.0f, &L); /* 1/len[b] over the valid positions */
    else
        sw_pool_fwd(whole_r(in), whole_w(pooled), p0, np, mode == SW_POOL_MEAN ? 1.0f / (float)x->c.seq : 1.0f);
    sw_group g;
    if (pool_group(x, &g)) sw_allreduce(x->comm, g, pooled, SW_SUM); /* the other positions' partial sums */
}

/* the loss is computed alike on every rank sharing the sequences, so each
 * rank's rows get dpooled itself: the all-reduce's backward is the identity */
void sw_pool_backward(sw_ctx *x, sw_pool_mode mode, sw_tensor *dpooled, sw_tensor *din)
{
    require_mode("sw_pool_backward", mode);
    require_tensor("sw_pool_backward", "dpooled", dpooled, x->B, dpooled ? dpooled->cols : 0, "[B, h]");
    require_tensor("sw_pool_backward", "din", din, x->resid_rows, dpooled->cols, "[l, h]");
    int64_t p0, np;
    pool_range(x, mode, &p0, &np);
    sw_pool_lengths L;
    if (pool_lengths(x, "sw_pool_backward", mode, &L))
        sw_pool_bwd_len(whole_r(dpooled), whole_w(din), p0, np, 1.0f, &L);
    else
        sw_pool_bwd(whole_r(dpooled), whole_w(din), p0, np, mode == SW_POOL_MEAN ? 1.0f / (float)x->c.seq : 1.0f);
}

void sw_pool_traffic(const sw_ctx *x, int64_t h, sw_traffic *t)
{
    sw_group g;
    if (pool_group(x, &g)) traffic_add(x, t, 0, g, sw_comm_bytes(x->comm, g, SW_COLL_ALLREDUCE, x->B, h));
}

/* ------------------------------------------------------ the pooled head */

struct sw_seq_head {
    sw_seq_head_config c;
    sw_linear lin;                               /* SW_LINEAR_REPLICATED */
    sw_tensor *pooled;                           /* [B,h] */
    sw_tensor *out, *dout;                       /* [B,n]: predictions or logits (dlogits in place), dpred */
    sw_tensor *ce_max, *ce_tgt, *ce_sumexp, *ce_rows; /* [B,1] (classes) */
    sw_tensor *loss, *loss_sum;                  /* [1,1]; the step's, when dp or grad-accum > 1 */
};

void sw_seq_head_config_default(sw_seq_head_config *c)
{
    sw_check_ptr("sw_seq_head_config_default", "c", c);
    memset(c, 0, sizeof *c);
    c->pool = SW_POOL_MEAN, c->loss = SW_LOSS_MSE, c->std = 0.02f;
}

sw_seq_head *sw_seq_head_create(sw_ctx *x, const sw_seq_head_config *c)
{
    static const char *fn = "sw_seq_head_create";
    if (!c) sw_usage_error("%s: config: must not be NULL", fn);
    if (!c->name || !c->name[0]) sw_usage_error("%s: name: must be a non-empty string", fn);
    require_mode(fn, c->pool);
    if (c->loss != SW_LOSS_MSE && c->loss != SW_LOSS_CLASSES)
        sw_usage_error("%s: loss: must be SW_LOSS_MSE or SW_LOSS_CLASSES (%d)", fn, (int)c->loss);
    if (c->hidden < x->row_tiles) sw_usage_error("%s: hidden: must be at least the tiles (%ld < %d)", fn, (long)c->hidden, x->row_tiles);
    if (c->outputs < (c->loss == SW_LOSS_CLASSES ? 2 : 1))
        sw_usage_error("%s: outputs: must be at least %d for %s (%d)", fn, c->loss == SW_LOSS_CLASSES ? 2 : 1,
                       c->loss == SW_LOSS_CLASSES ? "classes" : "MSE", c->outputs);
    sw_seq_head *hd = sw_xcalloc(1, sizeof *hd);
    hd->c = *c;
    hd->lin = sw_linear_add(x, c->name, SW_LINEAR_REPLICATED, c->hidden, c->outputs, c->bias, c->std, NULL,
                            1, NULL);
    int64_t B = x->B, n = c->outputs;
    hd->pooled = sw_tensor_new2d("pooled", SW_F32, B, c->hidden);
    hd->out = sw_tensor_new2d(c->loss == SW_LOSS_MSE ? "head_pred" : "head_logits", SW_F32, B, n);
    if (c->loss == SW_LOSS_MSE) {
        hd->dout = sw_tensor_new2d("head_dpred", SW_F32, B, n);
    } else {
        hd->ce_max = sw_tensor_new2d("cls_max", SW_F32, B, 1);
        hd->ce_tgt = sw_tensor_new2d("cls_target", SW_F32, B, 1);
        hd->ce_sumexp = sw_tensor_new2d("cls_sumexp", SW_F32, B, 1);
        hd->ce_rows = sw_tensor_new2d("cls_rows", SW_F32, B, 1);
    }
    hd->loss = sw_tensor_new2d("loss", SW_F32, 1, 1);
    if (x->c.dp * x->c.grad_accum > 1) hd->loss_sum = sw_tensor_new2d("loss_sum", SW_F32, 1, 1);
    return hd;
}

void sw_seq_head_destroy(sw_seq_head *hd)
{
    if (!hd) return;
    sw_tensor *t[] = {hd->pooled, hd->out, hd->dout, hd->ce_max, hd->ce_tgt, hd->ce_sumexp, hd->ce_rows, hd->loss,
                      hd->loss_sum};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) sw_tensor_free(t[i]);
    free(hd);
}

sw_tensor *sw_seq_head_loss(sw_seq_head *hd) { return !hd ? NULL : hd->loss_sum ? hd->loss_sum : hd->loss; }
sw_tensor *sw_seq_head_output(sw_seq_head *hd) { return hd->out; }
const sw_linear *sw_seq_head_linear(const sw_seq_head *hd) { return &hd->lin; }

static void require_ready(const char *fn, sw_ctx *x, sw_seq_head *hd, sw_tensor *in, sw_tensor *targets)
{
    if (!hd) sw_usage_error("%s: head: must not be NULL", fn);
    if (!sw_params_value(x->params, hd->lin.w))
        sw_usage_error("%s: parameters: must be allocated first (sw_params_allocate, on the stage that runs the head)",
                       fn);
    if (in) require_tensor(fn, "in", in, x->resid_rows, hd->c.hidden, "[l, h]");
    const int classes = hd->c.loss == SW_LOSS_CLASSES;
    require_tensor(fn, "targets", targets, x->B, classes ? 1 : hd->c.outputs, classes ? "[B, 1]" : "[B, outputs]");
    if (targets->dtype != (classes ? SW_I32 : SW_F32))
        sw_usage_error("%s: targets: must be %s for %s (dtype %d)", fn, classes ? "int32" : "fp32",
                       classes ? "classes" : "MSE", (int)targets->dtype);
}

/* the loss of the micro-batch, mean over its B sequences; then the step's:
 * micro-batches summed here, dp ranks after the last (the Ulysses/Ring/TP
 * ranks sharing the sequences computed the same) */
void sw_seq_head_forward(sw_ctx *x, sw_seq_head *hd, sw_tensor *in, sw_tensor *targets)
{
    require_ready("sw_seq_head_forward", x, hd, in, targets);
    if (!in) require_tensor("sw_seq_head_forward", "in", in, x->resid_rows, hd->c.hidden, "[l, h]");
    const int64_t B = x->B, n = hd->c.outputs;
    sw_pool_forward(x, hd->c.pool, in, hd->pooled);
    sw_linear_forward(x, &hd->lin, hd->pooled, hd->pooled, hd->out);
    if (hd->c.loss == SW_LOSS_MSE) {
        sw_mse_fwd(whole_r(hd->out), whole_r(targets), whole_w(hd->loss), 1.0f / (float)(B * n));
    } else {
        sw_ce_max(whole_r(hd->out), whole_w(hd->ce_max), 0, n);
        sw_ce_target(whole_r(hd->out), whole_r(targets), whole_w(hd->ce_tgt), 0);
        sw_ce_sumexp(whole_r(hd->out), whole_r(hd->ce_max), whole_w(hd->ce_sumexp), 0, n);
        sw_ce_loss(whole_r(hd->ce_max), whole_r(hd->ce_tgt), whole_r(hd->ce_sumexp), whole_w(hd->ce_rows));
        sw_colsum(whole_r(hd->ce_rows), whole_w(hd->loss), 1.0f / (float)B, 0.0f);
    }
    if (!hd->loss_sum) return;
    const float share = 1.0f / (float)(x->c.dp * x->c.grad_accum);
    sw_colsum(whole_r(hd->loss), sw_tensor_whole(hd->loss_sum, x->micro ? STARPU_RW : STARPU_W), share,
              x->micro ? 1.0f : 0.0f);
    if (x->micro == x->c.grad_accum - 1 && x->c.dp > 1) sw_allreduce(x->comm, SW_GROUP_DP, hd->loss_sum, SW_SUM);
}

/* d(loss)/d(output) scaled by 1/(global batch): the registry sums the
 * gradients over dp and micro-batches */
sw_tensor *sw_seq_head_backward(sw_ctx *x, sw_seq_head *hd, sw_tensor *targets)
{
    require_ready("sw_seq_head_backward", x, hd, NULL, targets);
    const int64_t n = hd->c.outputs;
    const float per_batch = 1.0f / (float)((int64_t)x->B * x->c.dp * x->c.grad_accum);
    sw_tensor *dout = hd->out;
    if (hd->c.loss == SW_LOSS_MSE) {
        sw_mse_bwd(whole_r(hd->out), whole_r(targets), whole_w(hd->dout), per_batch / (float)n);
        dout = hd->dout;
    } else {
        sw_ce_bwd(sw_tensor_whole(hd->out, STARPU_RW), whole_r(hd->ce_max), whole_r(hd->ce_sumexp), whole_r(targets), 0,
                  n, per_batch);
    }
    sw_tensor *dpooled = sw_linear_backward(x, &hd->lin, dout, hd->pooled, hd->pooled);
    sw_tensor *din = sw_scratch(x, "dpool_in", x->resid_rows, hd->c.hidden);
    sw_pool_backward(x, hd->c.pool, dpooled, din);
    return din;
}

void sw_seq_head_traffic(const sw_ctx *x, const sw_seq_head *hd, sw_traffic *t)
{
    sw_pool_traffic(x, hd->c.hidden, t);
    sw_linear_traffic(x, &hd->lin, t);
    if (x->c.dp > 1) /* the loss, once per step */
        t->forward[SW_GROUP_DP] += sw_comm_bytes(x->comm, SW_GROUP_DP, SW_COLL_ALLREDUCE, 1, 1);
}

/* ------------------------------------------------------ the per-row MSE */

struct sw_row_mse {
    int64_t n;                   /* outputs per row */
    sw_tensor *dpred;            /* [l, n] */
    sw_tensor *loss, *loss_sum;  /* [1,1]: the micro-batch's share; the step's, when summed or all-reduced */
};

/* the groups the partial sums are all-reduced over, once per step: the
 * ranks holding other rows of the same sequences (TP with sp, Ulysses,
 * Ring: pool_group) and dp -- never TP without sp, whose ranks hold the
 * same rows; returns their number (0 .. 2) */
static int row_loss_groups(const sw_ctx *x, sw_group g[2])
{
    int k = 0;
    sw_group pg;
    const int rows = pool_group(x, &pg);
    if (rows && pg == SW_GROUP_SP && x->c.dp > 1) {
        g[k++] = SW_GROUP_SP_DP;
    } else {
        if (rows) g[k++] = pg;
        if (x->c.dp > 1) g[k++] = SW_GROUP_DP;
    }
    return k;
}

/* whether the step's loss is a sum of partial ones (loss_sum): several
 * micro-batches, or rows of the sequences on other ranks */
static int row_mse_summed(const sw_ctx *x)
{
    sw_group g[2];
    return x->c.grad_accum > 1 || row_loss_groups(x, g);
}

/* the elements of the global batch the mean is over */
static double row_mse_count(const sw_ctx *x, const sw_row_mse *r) { return (double)x->c.seq * x->c.batch * r->n; }

sw_row_mse *sw_row_mse_create(sw_ctx *x, int64_t outputs)
{
    if (!x) sw_usage_error("sw_row_mse_create: x: must not be NULL");
    if (outputs < 1) sw_usage_error("sw_row_mse_create: outputs: must be at least 1 (%ld)", (long)outputs);
    sw_row_mse *r = sw_xcalloc(1, sizeof *r);
    r->n = outputs;
    r->dpred = sw_tensor_new2d("row_mse_dpred", SW_F32, x->resid_rows, outputs);
    r->loss = sw_tensor_new2d("loss", SW_F32, 1, 1);
    if (row_mse_summed(x)) r->loss_sum = sw_tensor_new2d("loss_sum", SW_F32, 1, 1);
    return r;
}

double sw_row_mse_bytes(const sw_ctx *x, int64_t outputs)
{
    if (!x) sw_usage_error("sw_row_mse_bytes: x: must not be NULL");
    return 4.0 * ((double)x->resid_rows * (double)outputs + 1.0 + row_mse_summed(x)); /* dpred, loss, loss_sum */
}

void sw_row_mse_destroy(sw_row_mse *r)
{
    if (!r) return;
    sw_tensor_free(r->dpred), sw_tensor_free(r->loss), sw_tensor_free(r->loss_sum);
    free(r);
}

sw_tensor *sw_row_mse_loss(sw_row_mse *r) { return !r ? NULL : r->loss_sum ? r->loss_sum : r->loss; }

static void require_rows(const char *fn, const sw_ctx *x, const sw_row_mse *r, sw_tensor *pred, sw_tensor *targets)
{
    if (!r) sw_usage_error("%s: loss: must not be NULL", fn);
    sw_check_tensor(fn, "pred", pred, x->resid_rows, r->n);
    sw_check_tensor(fn, "targets", targets, x->resid_rows, r->n);
    if (pred->dtype != SW_F32 || targets->dtype != SW_F32)
        sw_usage_error("%s: pred, targets: must be fp32 (dtypes %d, %d)", fn, (int)pred->dtype, (int)targets->dtype);
}

/* this rank's rows' sum of squares over the global count; the step's:
 * micro-batches summed here, the other rows' ranks after the last */
void sw_row_mse_forward(sw_ctx *x, sw_row_mse *r, sw_tensor *pred, sw_tensor *targets)
{
    require_rows("sw_row_mse_forward", x, r, pred, targets);
    sw_mse_fwd(whole_r(pred), whole_r(targets), whole_w(r->loss), (float)(1.0 / row_mse_count(x, r)));
    if (!r->loss_sum) return;
    sw_colsum(whole_r(r->loss), sw_tensor_whole(r->loss_sum, x->micro ? STARPU_RW : STARPU_W), 1.0f,
              x->micro ? 1.0f : 0.0f);
    sw_group g[2];
    const int ng = row_loss_groups(x, g);
    if (x->micro == x->c.grad_accum - 1)
        for (int k = 0; k < ng; k++) sw_allreduce(x->comm, g[k], r->loss_sum, SW_SUM);
}

/* 2 (pred - tgt) / (global count): the registry sums the gradients over
 * the gradient group and the micro-batches, a SW_LINEAR_REPLICATED before
 * it over TP with sp */
sw_tensor *sw_row_mse_backward(sw_ctx *x, sw_row_mse *r, sw_tensor *pred, sw_tensor *targets)
{
    require_rows("sw_row_mse_backward", x, r, pred, targets);
    sw_mse_bwd(whole_r(pred), whole_r(targets), whole_w(r->dpred), (float)(1.0 / row_mse_count(x, r)));
    return r->dpred;
}

void sw_row_mse_traffic(const sw_ctx *x, const sw_row_mse *r, sw_traffic *t)
{
    (void)r;
    sw_group g[2];
    const int ng = row_loss_groups(x, g);
    for (int k = 0; k < ng; k++) /* the loss, once per step */
        t->forward[g[k]] += sw_comm_bytes(x->comm, g[k], SW_COLL_ALLREDUCE, 1, 1);
}

/* ------------------------------------------------------------- loaders */

void sw_ctx_load_floats(sw_ctx *x, int k, const float *in, int64_t f, sw_tensor *inputs)
{
    static const char *fn = "sw_ctx_load_floats";
    if (!in) sw_usage_error("%s: in: must not be NULL", fn);
    if (k < 0 || k >= x->c.grad_accum) sw_usage_error("%s: k: must be in 0 .. grad-accum - 1 (%d, %d)", fn, k, x->c.grad_accum);
    if (!inputs || inputs->dtype != SW_F32 || inputs->cols != f || (inputs->rows != x->tokens && inputs->rows != x->resid_rows))
        sw_usage_error("%s: inputs: must be fp32 [T, f] = [%ld,%ld] or [l, f] = [%ld,%ld] (%s)", fn, (long)x->tokens,
                       (long)f, (long)x->resid_rows, (long)f, inputs ? "other shape or dtype" : "NULL");
    const int64_t B = x->B, first = sw_ctx_micro_batch_first(x, k), r0 = inputs->rows == x->tokens ? 0 : x->row0;
    float *m = sw_xcalloc((size_t)(inputs->rows * f), sizeof(float));
    for (int64_t r = 0; r < inputs->rows; r++) { /* row r0 + r of the T rows: local position i, sequence b */
        const int64_t i = (r0 + r) / B, b = (r0 + r) % B, pos = sw_ctx_position(x, i);
        memcpy(m + r * f, in + (pos * x->c.batch + first + b) * f, (size_t)f * sizeof(float));
    }
    sw_tensor_write_host(inputs, m);
    free(m);
    sw_ctx_set_micro_batch(x, k);
}

void sw_ctx_load_seq_targets(sw_ctx *x, int k, const void *tgt, sw_tensor *targets)
{
    static const char *fn = "sw_ctx_load_seq_targets";
    if (!tgt) sw_usage_error("%s: tgt: must not be NULL", fn);
    if (k < 0 || k >= x->c.grad_accum) sw_usage_error("%s: k: must be in 0 .. grad-accum - 1 (%d, %d)", fn, k, x->c.grad_accum);
    if (!targets || targets->rows != x->B || (targets->dtype != SW_F32 && targets->dtype != SW_I32))
        sw_usage_error("%s: targets: must be fp32 or int32 [B, n] with B = %d (%s)", fn, x->B,
                       targets ? "other rows or dtype" : "NULL");
    const size_t row = (size_t)targets->cols * sw_dtype_size(targets->dtype);
    sw_tensor_write_host(targets, (const char *)tgt + (size_t)sw_ctx_micro_batch_first(x, k) * row);
    sw_ctx_set_micro_batch(x, k);
}

/* ------------------------------------------------------------ sampling */

/* a uniform number in [0, 1) from (seed, position, sequence): splitmix64 */
static double uniform(uint64_t seed, uint64_t pos, uint64_t b)
{
    uint64_t z = seed ^ (pos * 0x9E3779B97F4A7C15ull) ^ (b * 0xD1B54A32D192ED03ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

/* (value, global index) pairs: larger value first, then smaller index */
static int by_value(const void *a, const void *b)
{
    const float *x = a, *y = b;
    if (x[0] != y[0]) return x[0] < y[0] ? 1 : -1;
    return (x[1] > y[1]) - (x[1] < y[1]);
}

void sw_lm_sample(sw_ctx *x, sw_tensor *logits_t, int vocab, float temperature, int top_k, uint64_t seed,
                  uint64_t position, int32_t *next)
{
    static const char *fn = "sw_lm_sample";
    sw_check_ptr(fn, "x", x);
    sw_check_ptr(fn, "logits", logits_t);
    sw_check_ptr(fn, "next", next);
    if (!(temperature >= 0.0f) || top_k < 0 || vocab < 1)
        sw_usage_error("%s: temperature (%g) and top_k (%d) must not be negative, vocab (%d) positive", fn, temperature,
                       top_k, vocab);
    const int vl = (int)logits_t->cols, tp = x->tp.t, B = (int)logits_t->rows;
    const int k = temperature == 0.0f ? 1 : top_k > 0 && top_k < vocab ? top_k : vocab;
    const int64_t v0 = (int64_t)x->tp.rank * vl;
    float *logits = sw_xcalloc((size_t)B * (size_t)vl, sizeof *logits);
    sw_tensor_read_host(logits_t, logits);
    /* this rank's best k of each sequence (the padded rows of the vocabulary left out) */
    const int kl = k < vl ? k : vl;
    float *mine = sw_xcalloc((size_t)B * 2 * (size_t)kl, sizeof *mine), *all = mine;
    float *pairs = sw_xcalloc((size_t)vl * 2, sizeof *pairs);
    for (int b = 0; b < B; b++) {
        int n = 0;
        for (int j = 0; j < vl && v0 + j < vocab; j++, n++)
            pairs[2 * n] = logits[(size_t)b * vl + j], pairs[2 * n + 1] = (float)(v0 + j);
        qsort(pairs, (size_t)n, 2 * sizeof(float), by_value);
        for (int j = 0; j < kl; j++) {
            mine[((size_t)b * kl + j) * 2] = j < n ? pairs[2 * j] : -INFINITY;
            mine[((size_t)b * kl + j) * 2 + 1] = j < n ? pairs[2 * j + 1] : -1.0f;
        }
    }
    if (tp > 1) { /* every rank's, the same on every rank */
        sw_tensor *cand = sw_tensor_new2d("candidates", SW_F32, tp, (int64_t)B * 2 * kl);
        all = sw_xcalloc((size_t)tp * B * 2 * kl, sizeof *all);
        memcpy(all + (size_t)x->tp.rank * B * 2 * kl, mine, sizeof *mine * (size_t)B * 2 * kl);
        sw_tensor_write_host(cand, all);
        sw_allgather_inplace(x->comm, SW_GROUP_TP, cand);
        sw_tensor_read_host(cand, all);
        sw_tensor_free(cand);
    }
    float *cand = sw_xcalloc((size_t)tp * kl * 2, sizeof *cand);
    for (int b = 0; b < B; b++) {
        int n = 0;
        for (int r = 0; r < tp; r++)
            for (int j = 0; j < kl; j++) {
                const float *e = all + (((size_t)r * B + b) * kl + j) * 2;
                if (e[1] >= 0) cand[2 * n] = e[0], cand[2 * n + 1] = e[1], n++;
            }
        qsort(cand, (size_t)n, 2 * sizeof(float), by_value);
        int pick = 0;
        if (temperature > 0.0f) { /* softmax over the best k at the temperature, then the inverse CDF */
            int m = k < n ? k : n;
            double sum = 0, acc = 0, u;
            for (int j = 0; j < m; j++) sum += exp((cand[2 * j] - cand[0]) / temperature);
            u = uniform(seed, position, (uint64_t)b) * sum;
            for (pick = 0; pick < m - 1; pick++)
                if ((acc += exp((cand[2 * pick] - cand[0]) / temperature)) > u) break;
        }
        next[b] = (int32_t)cand[2 * pick + 1];
    }
    if (all != mine) free(all);
    free(cand), free(pairs), free(mine), free(logits);
}
