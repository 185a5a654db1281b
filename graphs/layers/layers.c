/* The layers but the context (context.c), the linears (linear.c) and
 * attention (attention.c): norms, activations, residual, embedding and
 * extra tables, LM head + cross-entropy, and their traffic models (see
 * layers.h). */
#include <math.h>
#include <string.h>

#include "layer_util.h"
#include "train/params_internal.h"
#include "starweave/mesh.h"
#include "starweave/runtime.h"

/* -------------------------------------------------------------- checks */

/* a norm's handle and its parameters allocated; returns h */
static int64_t check_norm(const char *fn, const sw_ctx *x, const sw_norm *n)
{
    int64_t one, h;
    sw_check_ptr(fn, "n", n);
    sw_check_param(fn, x, n->w);
    if (n->b >= 0) sw_check_param(fn, x, n->b);
    param_shape(x, n->w, &one, &h);
    return h;
}

/* the embedding's handle, its tables allocated, tokens [T,1] int32; returns h */
static int64_t check_embedding(const char *fn, const sw_ctx *x, const sw_embedding *e, const sw_tensor *tokens)
{
    int64_t rows, h;
    sw_check_ptr(fn, "e", e);
    sw_check_param(fn, x, e->wte);
    if (e->wpe >= 0) sw_check_param(fn, x, e->wpe);
    sw_check_tensor(fn, "tokens", tokens, x->tokens, 1);
    if (tokens->dtype != SW_I32) sw_usage_error("%s: tokens: must be int32 (dtype %d)", fn, (int)tokens->dtype);
    param_shape(x, e->wte, &rows, &h);
    return h;
}

/* the LM head's weight allocated, targets [T,1] int32; returns h */
static int64_t check_head(const char *fn, const sw_ctx *x, int w, const sw_tensor *targets)
{
    int64_t rows, h;
    sw_check_param(fn, x, w);
    sw_check_tensor(fn, "targets", targets, x->tokens, 1);
    if (targets->dtype != SW_I32) sw_usage_error("%s: targets: must be int32 (dtype %d)", fn, (int)targets->dtype);
    param_shape(x, w, &rows, &h);
    return h;
}


/* --------------------------------------------------------------- norms */

sw_norm sw_norm_add(sw_ctx *x, const char *name, int64_t h, int rms, float eps)
{
    sw_norm n;
    n.w = sw_layer_add_param(x, name, "_w", 1, h, replicated, 0, 0.0f, 1.0f);
    n.b = rms ? -1 : sw_layer_add_param(x, name, "_b", 1, h, replicated, 0, 0.0f, 0.0f);
    n.eps = eps;
    return n;
}

void sw_norm_forward(sw_ctx *x, const sw_norm *n, sw_tensor *in, sw_tensor *y, sw_tensor *mean, sw_tensor *rstd)
{
    static const char *fn = "sw_norm_forward";
    const int64_t h = check_norm(fn, x, n);
    sw_check_tensor(fn, "in", in, x->resid_rows, h);
    sw_check_tensor(fn, "y", y, x->resid_rows, h);
    if (n->b >= 0) sw_check_tensor(fn, "mean", mean, x->resid_rows, 1);
    sw_check_tensor(fn, "rstd", rstd, x->resid_rows, 1);
    for (int i = 0; i < x->row_tiles; i++) {
        if (n->b >= 0)
            sw_layernorm_fwd(rows_r(x, in, i), whole_r(param(x, n->w)), whole_r(param(x, n->b)), rows_w(x, y, i),
                             rows_w(x, mean, i), rows_w(x, rstd, i), n->eps);
        else
            sw_rmsnorm_fwd(rows_r(x, in, i), whole_r(param(x, n->w)), rows_w(x, y, i), rows_w(x, rstd, i), n->eps);
    }
}

/* dx (+)= norm'(dy); d(w), d(b) = sums of per-tile partials */
void sw_norm_backward(sw_ctx *x, const sw_norm *n, sw_tensor *dy, sw_tensor *in, sw_tensor *mean, sw_tensor *rstd,
                      sw_tensor *dx, int accumulate)
{
    static const char *fn = "sw_norm_backward";
    const int64_t hn = check_norm(fn, x, n);
    sw_check_tensor(fn, "dy", dy, x->resid_rows, hn);
    sw_check_tensor(fn, "in", in, x->resid_rows, hn);
    if (n->b >= 0) sw_check_tensor(fn, "mean", mean, x->resid_rows, 1);
    sw_check_tensor(fn, "rstd", rstd, x->resid_rows, 1);
    sw_check_tensor(fn, "dx", dx, x->resid_rows, hn);
    int64_t h = in->cols;
    sw_tensor *part_w = sw_scratch(x, "ln_part_w", x->row_tiles, h), *part_b = n->b >= 0 ? sw_scratch(x, "ln_part_b", x->row_tiles, h) : NULL;
    for (int i = 0; i < x->row_tiles; i++) {
        starpu_data_handle_t dxi = accumulate ? rows_rw(x, dx, i) : rows_w(x, dx, i);
        if (n->b >= 0)
            sw_layernorm_bwd(rows_r(x, dy, i), rows_r(x, in, i), whole_r(param(x, n->w)), rows_r(x, mean, i),
                             rows_r(x, rstd, i), dxi, rows_w(x, part_w, i), rows_w(x, part_b, i), accumulate);
        else
            sw_rmsnorm_bwd(rows_r(x, dy, i), rows_r(x, in, i), whole_r(param(x, n->w)), rows_r(x, rstd, i), dxi,
                           rows_w(x, part_w, i), accumulate);
    }
    sw_colsum(whole_r(part_w), whole_w(grad(x, n->w)), 1.0f, 0.0f);
    if (part_b) sw_colsum(whole_r(part_b), whole_w(grad(x, n->b)), 1.0f, 0.0f);
    sw_tp_sum_replicated_grad(&x->tp, grad(x, n->w));
    if (part_b) sw_tp_sum_replicated_grad(&x->tp, grad(x, n->b));
}

/* ---------------------------------------------------------- activation */

void sw_gelu_forward(sw_ctx *x, sw_tensor *in, sw_tensor *out)
{
    sw_check_ptr("sw_gelu_forward", "x", x);
    sw_check_ptr("sw_gelu_forward", "in", in);
    sw_check_tensor("sw_gelu_forward", "out", out, in->rows, in->cols);
    for (int j = 0; j < x->col_tiles; j++) sw_gelu_fwd(cols_r(x, in, j), cols_w(x, out, j));
}

void sw_gelu_backward(sw_ctx *x, sw_tensor *in, sw_tensor *g)
{
    sw_check_ptr("sw_gelu_backward", "x", x);
    sw_check_ptr("sw_gelu_backward", "in", in);
    sw_check_tensor("sw_gelu_backward", "grad", g, in->rows, in->cols);
    for (int j = 0; j < x->col_tiles; j++) sw_gelu_bwd(cols_r(x, in, j), sw_tensor_tiles(g, SW_COLS, x->col_tiles, STARPU_RW)[j]);
}

/* column tiles of the gate and up halves of fc [T, 2F]: P of each */
static starpu_data_handle_t *gated_tiles(sw_ctx *x, sw_tensor *fc, enum starpu_data_access_mode mode)
{
    int64_t sizes[128], F = fc->cols / 2;
    if (2 * x->col_tiles > 128) sw_usage_error("swiglu: tiles (%d) must be at most 64", x->col_tiles);
    for (int j = 0; j < x->col_tiles; j++) {
        int64_t first;
        sw_tile_range(F, x->col_tiles, j, &first, &sizes[j]);
        sizes[x->col_tiles + j] = sizes[j];
    }
    return sw_tensor_split(fc, SW_COLS, 2 * x->col_tiles, sizes, mode);
}

void sw_swiglu_forward(sw_ctx *x, sw_tensor *fc, sw_tensor *act)
{
    sw_check_ptr("sw_swiglu_forward", "x", x);
    sw_check_ptr("sw_swiglu_forward", "fc", fc);
    sw_check_tensor("sw_swiglu_forward", "act", act, fc->rows, fc->cols / 2);
    for (int j = 0; j < x->col_tiles; j++) {
        starpu_data_handle_t *in = gated_tiles(x, fc, STARPU_R);
        sw_swiglu_fwd(in[j], in[x->col_tiles + j], cols_w(x, act, j));
    }
}

void sw_swiglu_backward(sw_ctx *x, sw_tensor *fc, sw_tensor *dact, sw_tensor *dfc)
{
    static const char *fn = "sw_swiglu_backward";
    sw_check_ptr(fn, "x", x);
    sw_check_ptr(fn, "fc", fc);
    sw_check_tensor(fn, "dact", dact, fc->rows, fc->cols / 2);
    sw_check_tensor(fn, "dfc", dfc, fc->rows, fc->cols);
    for (int j = 0; j < x->col_tiles; j++) {
        starpu_data_handle_t *in = gated_tiles(x, fc, STARPU_R);
        starpu_data_handle_t g = in[j], u = in[x->col_tiles + j];
        starpu_data_handle_t *d = gated_tiles(x, dfc, STARPU_W);
        sw_swiglu_bwd(g, u, cols_r(x, dact, j), d[j], d[x->col_tiles + j]);
    }
}

/* ------------------------------------------------------------ residual */

void sw_residual_forward(sw_ctx *x, int step, int layer, int op, sw_tensor *res, sw_tensor *branch, sw_tensor *out)
{
    static const char *fn = "sw_residual_forward";
    sw_check_ptr(fn, "x", x);
    sw_check_ptr(fn, "res", res);
    sw_check_tensor(fn, "res", res, x->resid_rows, res->cols);
    sw_check_tensor(fn, "branch", branch, x->resid_rows, res->cols);
    sw_check_tensor(fn, "out", out, x->resid_rows, res->cols);
    sw_tensor *tmp = x->c.dropout > 0.0f ? sw_scratch(x, "tmp", out->rows, out->cols) : NULL;
    for (int i = 0; i < x->npieces[1]; i++) {
        starpu_data_handle_t b = sw_ctx_piece(x, 1, branch, i, STARPU_R);
        if (tmp) {
            sw_rng_key k = sw_ctx_drop_key(x, step, (unsigned)layer, (unsigned)op, i, out->cols);
            sw_dropout_fwd(b, sw_ctx_piece(x, 1, tmp, i, STARPU_W), x->c.dropout, &k);
            b = sw_ctx_piece(x, 1, tmp, i, STARPU_R);
        }
        sw_add(sw_ctx_piece(x, 1, res, i, STARPU_R), b, sw_ctx_piece(x, 1, out, i, STARPU_W));
    }
}

/* dropout is diagonal, so its backward is its forward applied to the
 * gradient (same key, same mask) */
sw_tensor *sw_residual_backward(sw_ctx *x, int step, int layer, int op, sw_tensor *dout)
{
    sw_check_ptr("sw_residual_backward", "x", x);
    sw_check_ptr("sw_residual_backward", "dout", dout);
    sw_check_tensor("sw_residual_backward", "dout", dout, x->resid_rows, dout->cols);
    if (x->c.dropout == 0.0f) return dout;
    sw_tensor *dy = sw_scratch(x, "dy", dout->rows, dout->cols);
    for (int i = 0; i < x->npieces[1]; i++) {
        sw_rng_key k = sw_ctx_drop_key(x, step, (unsigned)layer, (unsigned)op, i, dout->cols);
        sw_dropout_fwd(sw_ctx_piece(x, 1, dout, i, STARPU_R), sw_ctx_piece(x, 1, dy, i, STARPU_W), x->c.dropout, &k);
    }
    return dy;
}

/* ----------------------------------------------------------- embedding */

int sw_vocab_padded(int vocab, int tp) { return (vocab + 128 * tp - 1) / (128 * tp) * (128 * tp); }

sw_embedding sw_embedding_add(sw_ctx *x, int vocab, int vocab_padded, int64_t h, int max_pos, float std)
{
    sw_embedding e = {-1, -1, vocab, vocab_padded, 0};
    sw_param_desc d;
    memset(&d, 0, sizeof d);
    snprintf(d.name, sizeof d.name, "wte");
    d.rows = vocab_padded, d.cols = h, d.gemm = 1, d.init_std = std, d.init_rows = vocab;
    d.fp32_reads = 1; /* the lookup reads fp32 rows; a tied LM head reads it as a GEMM weight */
    d.slice = sw_slice_even(0, vocab_padded, x->tp.t, x->tp.rank);
    e.wte = sw_params_add(x->params, &d);
    if (max_pos > 0) e.wpe = sw_layer_add_param(x, "wpe", "", max_pos, h, replicated, 0, std, 0.0f);
    return e;
}

/* x0[l,h] = dropout(wte[tokens] + wpe[pos]): the vocab-parallel lookup
 * over all T rows (wpe added by TP rank 0 only), reduced by g */
void sw_embedding_forward(sw_ctx *x, const sw_embedding *e, int step, sw_tensor *tokens, sw_tensor *x0)
{
    const int64_t he = check_embedding("sw_embedding_forward", x, e, tokens);
    sw_check_tensor("sw_embedding_forward", "x0", x0, x->resid_rows, he);
    int64_t h = x0->cols, vl = e->vocab_padded / x->tp.t;
    int drop = x->c.dropout > 0.0f;
    sw_tensor *emb = tp_on(x) ? sw_scratch(x, "emb", x->tokens, h) : drop ? sw_scratch(x, "tmp", x->resid_rows, h) : x0;
    for (int i = 0; i < x->npieces[0]; i++)
        sw_embedding_fwd(sw_ctx_piece(x, 0, tokens, i, STARPU_R), whole_r(param(x, e->wte)),
                         e->wpe >= 0 ? whole_r(param(x, e->wpe)) : NULL,
                         sw_ctx_piece(x, 0, emb, i, STARPU_W), x->pc_off[0][i], x->B, x->pc_pos[0][i],
                         (int64_t)x->tp.rank * vl, x->tp.rank == 0);
    sw_tensor *sum = tp_on(x) ? sw_tp_g_forward(&x->tp, emb, sw_scratch(x, "red", x->resid_rows, h)) : emb;
    for (int i = 0; i < x->npieces[1] && sum != x0; i++) {
        if (drop) {
            sw_rng_key k = sw_ctx_drop_key(x, step, SW_DROP_EMBED_LAYER, SW_DROP_EMBED, i, h);
            sw_dropout_fwd(sw_ctx_piece(x, 1, sum, i, STARPU_R), sw_ctx_piece(x, 1, x0, i, STARPU_W), x->c.dropout, &k);
        } else {
            sw_copy(sw_ctx_piece(x, 1, x0, i, STARPU_W), sw_ctx_piece(x, 1, sum, i, STARPU_R));
        }
    }
}

/* rows of the T rows' run of positions k */
static starpu_data_handle_t run_rows(const sw_ctx *x, sw_tensor *t, int k)
{
    int64_t sizes[2] = {x->lr_n[0] * x->B, x->lr_n[1] * x->B};
    return x->nruns == 1 ? whole_r(t) : sw_tensor_split(t, SW_ROWS, x->nruns, sizes, STARPU_R)[k];
}

/* dwte += scatter(dx0) over all T rows (g's backward gathers them), dwpe =
 * scatter(dx0) (full on every rank: wpe was added once); one scatter per
 * run of positions (dwpe written by the first) */
void sw_embedding_backward(sw_ctx *x, const sw_embedding *e, int step, sw_tensor *tokens, sw_tensor *dx0)
{
    const int64_t he = check_embedding("sw_embedding_backward", x, e, tokens);
    sw_check_tensor("sw_embedding_backward", "dx0", dx0, x->resid_rows, he);
    int64_t h = dx0->cols;
    sw_tensor *d = sw_residual_backward(x, step, SW_DROP_EMBED_LAYER, SW_DROP_EMBED, dx0);
    d = sw_tp_g_backward(&x->tp, d, sw_scratch(x, "dfull", x->tokens, h));
    for (int k = 0; k < x->nruns; k++) {
        /* a tied head on this stage wrote dwte first */
        int zero = k ? 0 : SW_EMB_ZERO_WPE | (e->tied && sw_params_runs_unit(x->params, SW_UNIT_AFTER) ? 0 : SW_EMB_ZERO_WTE);
        sw_embedding_bwd(run_rows(x, tokens, k), run_rows(x, d, k),
                         sw_tensor_whole(grad(x, e->wte), zero & SW_EMB_ZERO_WTE ? STARPU_W : STARPU_RW),
                         e->wpe >= 0 ? sw_tensor_whole(grad(x, e->wpe), k ? STARPU_RW : STARPU_W) : NULL, 0, x->B,
                         x->lr_p0[k], (int64_t)x->tp.rank * (e->vocab_padded / x->tp.t), zero);
    }
}

/* An extra table (token types): replicated rows, looked up on this rank's
 * l rows and added to x0; its gradient scattered from the same rows and,
 * with sp (other rows on each TP rank), summed over TP as a norm's. */
sw_embedding_table sw_embedding_table_add(sw_ctx *x, const char *name, int rows, int64_t h, float std)
{
    const char *fn = "sw_embedding_table_add";
    if (!x || !x->params) sw_usage_error("%s: x: must be an initialised context (sw_ctx_init)", fn);
    if (!name || !name[0] || strlen(name) >= sizeof(((sw_param_desc *)0)->name))
        sw_usage_error("%s: name: must be 1 to %d characters (%s)", fn, (int)sizeof(((sw_param_desc *)0)->name) - 1,
                       name ? name : "NULL");
    if (rows < 1) sw_usage_error("%s: rows: must be at least 1 (%d)", fn, rows);
    if (h < 1) sw_usage_error("%s: h: must be at least 1 (%ld)", fn, (long)h);
    if (!(std >= 0.0f)) sw_usage_error("%s: std: must be >= 0 (%g)", fn, (double)std);
    sw_embedding_table e = {sw_layer_add_param(x, name, "", rows, h, replicated, 0, std, 0.0f), rows, h};
    return e;
}

static void table_check(const char *fn, sw_ctx *x, const sw_embedding_table *e, sw_tensor *ids, sw_tensor *t,
                        const char *what)
{
    if (!e) sw_usage_error("%s: e: must not be NULL", fn);
    if (!sw_params_value(x->params, e->w)) sw_usage_error("%s: parameters: must be allocated first (sw_params_allocate)", fn);
    if (!ids) sw_usage_error("%s: ids: must be an int32 tensor [T, 1] (NULL)", fn);
    if (ids->rows != x->tokens || ids->cols != 1 || ids->dtype != SW_I32)
        sw_usage_error("%s: ids: must be an int32 tensor [T, 1] = [%ld,1] ([%ld,%ld], dtype %d)", fn, (long)x->tokens,
                       (long)ids->rows, (long)ids->cols, (int)ids->dtype);
    if (!t) sw_usage_error("%s: %s: must be a tensor [l, h] (NULL)", fn, what);
    if (t->rows != x->resid_rows || t->cols != e->h)
        sw_usage_error("%s: %s: must be [l, h] = [%ld,%ld] ([%ld,%ld])", fn, what, (long)x->resid_rows, (long)e->h,
                       (long)t->rows, (long)t->cols);
}

/* ids' rows of the l rows' piece i: a split of [T,1] at the l rows' pieces */
static starpu_data_handle_t table_ids(const sw_ctx *x, sw_tensor *ids, int i)
{
    if (x->resid_rows == x->tokens) return sw_ctx_piece(x, 1, ids, i, STARPU_R);
    int64_t sizes[130];
    int n = 0, lead = x->row0 > 0;
    if (x->npieces[1] + 2 > 130) sw_usage_error("sw_embedding_table: tiles: must be at most 128 (%d)", x->npieces[1]);
    if (lead) sizes[n++] = x->row0;
    for (int k = 0; k < x->npieces[1]; k++) sizes[n++] = x->pc_size[1][k];
    if (x->row0 + x->resid_rows < x->tokens) sizes[n++] = x->tokens - x->row0 - x->resid_rows;
    return sw_tensor_split(ids, SW_ROWS, n, sizes, STARPU_R)[lead + i];
}

void sw_embedding_table_forward(sw_ctx *x, const sw_embedding_table *e, sw_tensor *ids, sw_tensor *x0)
{
    table_check("sw_embedding_table_forward", x, e, ids, x0, "x0");
    sw_tensor *rows = sw_scratch(x, "tt", x->resid_rows, e->h);
    for (int i = 0; i < x->npieces[1]; i++) {
        sw_embedding_fwd(table_ids(x, ids, i), whole_r(param(x, e->w)), NULL, sw_ctx_piece(x, 1, rows, i, STARPU_W), 0,
                         x->B, 0, 0, 0);
        sw_axpy(1.0f, sw_ctx_piece(x, 1, rows, i, STARPU_R), sw_ctx_piece(x, 1, x0, i, STARPU_RW));
    }
}

void sw_embedding_table_backward(sw_ctx *x, const sw_embedding_table *e, sw_tensor *ids, sw_tensor *dx0)
{
    table_check("sw_embedding_table_backward", x, e, ids, dx0, "dx0");
    for (int i = 0; i < x->npieces[1]; i++)
        sw_embedding_bwd(table_ids(x, ids, i), sw_ctx_piece(x, 1, dx0, i, STARPU_R),
                         sw_tensor_whole(grad(x, e->w), i ? STARPU_RW : STARPU_W), NULL, 0, x->B, 0, 0,
                         i ? 0 : SW_EMB_ZERO_WTE);
    sw_tp_sum_replicated_grad(&x->tp, grad(x, e->w));
}

/* ------------------------------------------------ LM head, cross-entropy */

struct sw_lm_head {
    int w, vocab, Vl;
    sw_tensor *xg;                               /* [T,h] f's gathered input (sp), else NULL */
    sw_tensor *in;                               /* the input the forward read (kept for backward) */
    sw_tensor *logits;                           /* [T,Vl]; holds dlogits after backward */
    sw_tensor *ce_max, *ce_tgt, *ce_sumexp, *ce_rows; /* [T,1] */
    sw_tensor *loss, *loss_sum;                  /* [1,1]; over micro-batches and dp ranks, when either is > 1 */
    /* an ignore index or row weights (weighted): the mean over the counted
     * rows of the global batch, sum rw loss / count, in place of / (T gn K) */
    int weighted, counted, ignore, K;
    int64_t T;
    sw_tensor **rw, **win;                       /* per micro-batch [T,1]: row weights (0: ignored), loaded weights */
    sw_tensor *count;                            /* [1,1]: sum of rw over the step's global batch */
};

int sw_lm_head_add_weight(sw_ctx *x, const char *name, int vocab, int vocab_padded, int64_t h, float std)
{
    sw_param_desc d;
    memset(&d, 0, sizeof d);
    snprintf(d.name, sizeof d.name, "%s", name);
    d.rows = vocab_padded, d.cols = h, d.gemm = 1, d.init_std = std, d.init_rows = vocab;
    d.slice = sw_slice_even(0, vocab_padded, x->tp.t, x->tp.rank);
    return sw_params_add(x->params, &d);
}

sw_lm_head *sw_lm_head_create(sw_ctx *x, int weight, int vocab, int vocab_padded, int64_t h)
{
    sw_lm_head *hd = sw_xcalloc(1, sizeof *hd);
    int64_t T = x->tokens;
    hd->w = weight, hd->vocab = vocab, hd->Vl = vocab_padded / x->tp.t;
    hd->ignore = SW_CE_IGNORE_NONE, hd->K = x->c.grad_accum, hd->T = T;
    if (tp_on(x) && x->c.sp) hd->xg = sw_tensor_new2d("lnf_gathered", SW_F32, T, h);
    hd->logits = sw_tensor_new2d("logits", SW_F32, T, hd->Vl);
    hd->ce_max = sw_tensor_new2d("ce_max", SW_F32, T, 1);
    hd->ce_tgt = sw_tensor_new2d("ce_target", SW_F32, T, 1);
    hd->ce_sumexp = sw_tensor_new2d("ce_sumexp", SW_F32, T, 1);
    hd->ce_rows = sw_tensor_new2d("ce_rows", SW_F32, T, 1);
    hd->loss = sw_tensor_new2d("loss", SW_F32, 1, 1);
    if (x->grad_size * x->c.grad_accum > 1) hd->loss_sum = sw_tensor_new2d("loss_sum", SW_F32, 1, 1);
    return hd;
}

sw_lm_head *sw_lm_head_describe(sw_ctx *x, int weight, int vocab, int vocab_padded)
{
    sw_lm_head *hd = sw_xcalloc(1, sizeof *hd); /* sw_lm_head_create's figures, none of its tensors */
    hd->w = weight, hd->vocab = vocab, hd->Vl = vocab_padded / x->tp.t;
    hd->ignore = SW_CE_IGNORE_NONE, hd->K = x->c.grad_accum, hd->T = x->tokens;
    return hd;
}

double sw_lm_head_bytes(const sw_ctx *x, int vocab_padded, int64_t h, int ignore_index)
{
    double T = (double)x->tokens, xg = tp_on(x) && x->c.sp ? T * (double)h : 0;
    double weighted = ignore_index != SW_CE_IGNORE_NONE ? x->c.grad_accum * T + 1 : 0; /* weighted_on's */
    return 4.0 * (xg + T * (vocab_padded / x->tp.t) + 4 * T + 1 + (x->grad_size * x->c.grad_accum > 1) + weighted);
}

void sw_lm_head_destroy(sw_lm_head *hd)
{
    if (!hd) return;
    sw_tensor *t[] = {hd->xg, hd->logits, hd->ce_max, hd->ce_tgt, hd->ce_sumexp, hd->ce_rows, hd->loss, hd->loss_sum};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) sw_tensor_free(t[i]);
    for (int k = 0; hd->rw && k < hd->K; k++) sw_tensor_free(hd->rw[k]), sw_tensor_free(hd->win[k]);
    free(hd->rw);
    free(hd->win);
    sw_tensor_free(hd->count);
    free(hd);
}

sw_tensor *sw_lm_head_loss(sw_lm_head *hd) { return !hd ? NULL : hd->loss_sum ? hd->loss_sum : hd->loss; }

/* the weighted mean's tensors, once an ignore index or weights are set */
static void weighted_on(sw_lm_head *hd)
{
    if (hd->weighted) return;
    hd->weighted = 1;
    hd->rw = sw_xcalloc((size_t)hd->K, sizeof *hd->rw);
    hd->win = sw_xcalloc((size_t)hd->K, sizeof *hd->win);
    for (int k = 0; k < hd->K; k++) {
        char name[32];
        snprintf(name, sizeof name, "ce_row_weights%d", k);
        hd->rw[k] = sw_tensor_new2d(name, SW_F32, hd->T, 1);
    }
    hd->count = sw_tensor_new2d("ce_count", SW_F32, 1, 1);
}

void sw_lm_head_set_ignore_index(sw_lm_head *hd, int ignore_index)
{
    if (!hd) sw_usage_error("sw_lm_head_set_ignore_index: hd: must not be NULL");
    if (ignore_index >= 0 && ignore_index < hd->vocab)
        sw_usage_error("sw_lm_head_set_ignore_index: ignore_index: must be outside [0, vocab) (%d, vocab %d): "
                       "it would drop a real token",
                       ignore_index, hd->vocab);
    if (ignore_index == SW_CE_IGNORE_NONE && !hd->weighted) return; /* today's mean, exactly */
    weighted_on(hd);
    hd->ignore = ignore_index;
}

int sw_lm_head_ignore_index(const sw_lm_head *hd) { return hd->ignore; }

void sw_lm_head_load_weights(sw_ctx *x, sw_lm_head *hd, int k, const float *w)
{
    if (!hd || !w) sw_usage_error("sw_lm_head_load_weights: %s: must not be NULL", hd ? "w" : "hd");
    if (k < 0 || k >= hd->K)
        sw_usage_error("sw_lm_head_load_weights: k: micro-batch must be in [0, grad-accum %d) (%d)", hd->K, k);
    const int64_t n = (int64_t)x->c.seq * x->c.batch;
    for (int64_t i = 0; i < n; i++) /* the whole global batch, the same on every rank: all refuse alike */
        if (!(w[i] >= 0.0f) || isinf(w[i]))
            sw_usage_error("sw_lm_head_load_weights: w: row weights must be finite and >= 0 (%g at position %lld of "
                           "sequence %lld)",
                           (double)w[i], (long long)(i / x->c.batch), (long long)(i % x->c.batch));
    weighted_on(hd);
    if (!hd->win[k]) {
        char name[32];
        snprintf(name, sizeof name, "ce_weights%d", k);
        hd->win[k] = sw_tensor_new2d(name, SW_F32, hd->T, 1);
    }
    /* this rank's rows of micro-batch k, as sw_ctx_load_tokens picks them */
    int64_t B = x->B, first = sw_ctx_micro_batch_first(x, k);
    float *mw = sw_xcalloc((size_t)hd->T, sizeof(float));
    for (int64_t i = 0; i < hd->T / B; i++)
        for (int64_t b = 0, pos = sw_ctx_position(x, i); b < B; b++) mw[i * B + b] = w[pos * x->c.batch + first + b];
    sw_tensor_write_host(hd->win[k], mw);
    free(mw);
}

/* The count of the step's global batch: each micro-batch's row weights
 * (0 where the target is the ignore index), summed over the micro-batches
 * and the gradient group (dp, ulysses, ring: the ranks whose rows differ;
 * TP ranks hold the same rows), before the first backward scales by it */
void sw_lm_head_count(sw_ctx *x, sw_lm_head *hd, sw_tensor *const *targets)
{
    if (!hd || !targets) sw_usage_error("sw_lm_head_count: %s: must not be NULL", hd ? "targets" : "hd");
    if (!hd->weighted) return; /* today's mean over T gn K rows: nothing to count */
    for (int k = 0; k < hd->K; k++) {
        if (!targets[k])
            sw_usage_error("sw_lm_head_count: targets: micro-batch %d of grad-accum %d is NULL", k, hd->K);
        sw_ce_weights(whole_r(targets[k]), hd->win[k] ? whole_r(hd->win[k]) : NULL, whole_w(hd->rw[k]), hd->ignore);
        sw_colsum(whole_r(hd->rw[k]), sw_tensor_whole(hd->count, k ? STARPU_RW : STARPU_W), 1.0f, k ? 1.0f : 0.0f);
    }
    if (x->grad_size > 1) sw_allreduce(x->comm, x->grad_group, hd->count, SW_SUM);
    hd->counted = 1;
}

static void need_count(const sw_lm_head *hd, const char *fn)
{
    if (hd->weighted && !hd->counted)
        sw_usage_error("%s: hd: an ignore index or row weights need the step's count first (sw_lm_head_count before "
                       "the step's first micro-batch)",
                       fn);
}

/* The head's GEMMs split the local vocabulary into P x S tiles of at most
 * LM_TILE_COLS columns (S per row tile of the other ops): a large
 * vocabulary in P tiles makes tasks so long that the last of them leaves
 * a worker idle for most of a task's length at the end of the head's
 * forward and of its backward. */
enum { LM_TILE_COLS = 4096 };
static int lm_subtiles(const sw_ctx *x, const sw_lm_head *hd)
{
    const int64_t per = ((int64_t)hd->Vl + x->row_tiles - 1) / x->row_tiles;
    return (int)((per + LM_TILE_COLS - 1) / LM_TILE_COLS);
}

/* loss = mean cross-entropy of logits[T,Vl] = f(x) W^T: the vocabulary is
 * split over TP, so the row max, the target logit and the sum of exps are
 * all-reduced ([T,1] each); every rank gets the loss */
void sw_lm_head_forward(sw_ctx *x, sw_lm_head *hd, sw_tensor *in, sw_tensor *targets)
{
    sw_check_ptr("sw_lm_head_forward", "hd", hd);
    const int64_t h = check_head("sw_lm_head_forward", x, hd->w, targets);
    sw_check_tensor("sw_lm_head_forward", "in", in, x->resid_rows, h);
    int P = x->row_tiles, PV = P * lm_subtiles(x, hd);
    int64_t vocab0 = (int64_t)x->tp.rank * hd->Vl;
    need_count(hd, "sw_lm_head_forward");
    hd->in = sw_tp_f_forward(&x->tp, in, hd->xg);
    starpu_data_handle_t x16 = op16(x, whole_r(hd->in));
    for (int j = 0; j < PV; j++)
        sw_gemm(x16, 0, sw_tensor_tiles(gemm_w(x, hd->w), SW_ROWS, PV, STARPU_R)[j], 1,
                sw_tensor_tiles(hd->logits, SW_COLS, PV, STARPU_W)[j], 1.0f, 0.0f);
    op_done(x, x16);
    for (int i = 0; i < P; i++) {
        sw_ce_max(rows_r(x, hd->logits, i), rows_w(x, hd->ce_max, i), vocab0, hd->vocab);
        sw_ce_target(rows_r(x, hd->logits, i), rows_r(x, targets, i), rows_w(x, hd->ce_tgt, i), vocab0);
    }
    if (tp_on(x)) {
        sw_allreduce(x->tp.comm, SW_GROUP_TP, hd->ce_max, SW_MAX);
        sw_allreduce(x->tp.comm, SW_GROUP_TP, hd->ce_tgt, SW_SUM);
    }
    for (int i = 0; i < P; i++)
        sw_ce_sumexp(rows_r(x, hd->logits, i), rows_r(x, hd->ce_max, i), rows_w(x, hd->ce_sumexp, i), vocab0,
                     hd->vocab);
    if (tp_on(x)) sw_allreduce(x->tp.comm, SW_GROUP_TP, hd->ce_sumexp, SW_SUM);
    for (int i = 0; i < P; i++)
        sw_ce_loss(rows_r(x, hd->ce_max, i), rows_r(x, hd->ce_tgt, i), rows_r(x, hd->ce_sumexp, i),
                   rows_w(x, hd->ce_rows, i));
    /* weighted: this micro-batch's rows over the global count, already the
     * global batch's share */
    if (hd->weighted) sw_ce_mean(whole_r(hd->ce_rows), whole_r(hd->rw[x->micro]), whole_r(hd->count), whole_w(hd->loss));
    else sw_colsum(whole_r(hd->ce_rows), whole_w(hd->loss), 1.0f / (float)x->tokens, 0.0f);
    /* the global batch's mean: micro-batches summed here, dp ranks after the last */
    if (!hd->loss_sum) return;
    float share = hd->weighted ? 1.0f : 1.0f / (float)(x->grad_size * x->c.grad_accum);
    sw_colsum(whole_r(hd->loss), sw_tensor_whole(hd->loss_sum, x->micro ? STARPU_RW : STARPU_W), share,
              x->micro ? 1.0f : 0.0f);
    if (x->micro == x->c.grad_accum - 1 && x->grad_size > 1) sw_allreduce(x->comm, x->grad_group, hd->loss_sum, SW_SUM);
}

/* dlogits = (softmax - onehot) / T on the local vocabulary (no
 * communication); returns the gradient of the input ([l,h], through f) */
sw_tensor *sw_lm_head_backward(sw_ctx *x, sw_lm_head *hd, sw_tensor *targets)
{
    sw_check_ptr("sw_lm_head_backward", "hd", hd);
    check_head("sw_lm_head_backward", x, hd->w, targets);
    int P = x->row_tiles, S = lm_subtiles(x, hd), PV = P * S;
    int64_t vocab0 = (int64_t)x->tp.rank * hd->Vl, h = gemm_w(x, hd->w)->cols;
    need_count(hd, "sw_lm_head_backward");
    for (int i = 0; i < P; i++) {
        if (hd->weighted) /* rw / count per row; ignored rows no gradient */
            sw_ce_bwd_weighted(rows_rw(x, hd->logits, i), rows_r(x, hd->ce_max, i), rows_r(x, hd->ce_sumexp, i),
                               rows_r(x, targets, i), rows_r(x, hd->rw[x->micro], i), whole_r(hd->count), vocab0,
                               hd->vocab);
        else
            sw_ce_bwd(rows_rw(x, hd->logits, i), rows_r(x, hd->ce_max, i), rows_r(x, hd->ce_sumexp, i),
                      rows_r(x, targets, i), vocab0, hd->vocab, 1.0f / ((float)x->tokens * x->grad_size * x->c.grad_accum));
    }
    if (x->micro == x->c.grad_accum - 1) hd->counted = 0; /* the next step counts its own batch */
    /* per vocabulary tile j (its dlogits cast to bf16 once for both):
     * dW_j = dlogits_j^T x; and dx = dlogits W, split over the vocabulary
     * (the reduction dimension: neither large operand is re-packed):
     * partial sum i accumulates the S tiles of vocabulary part i in order,
     * then the P partials are added */
    starpu_data_handle_t x16 = op16(x, whole_r(hd->in));
    sw_tensor *part = sw_scratch(x, "part", x->tokens, h);
    sw_tensor *lm_part = P > 1 ? sw_scratch(x, "lm_part", (int64_t)P * x->tokens, h) : NULL;
    for (int j = 0; j < PV; j++) {
        const int i = j / S, first = j % S == 0;
        starpu_data_handle_t d16 = op16(x, sw_tensor_tiles(hd->logits, SW_COLS, PV, STARPU_R)[j]);
        sw_gemm(d16, 1, x16, 0, sw_tensor_tiles(grad(x, hd->w), SW_ROWS, PV, STARPU_W)[j], 1.0f, 0.0f);
        starpu_data_handle_t out = P > 1 ? sw_tensor_tiles(lm_part, SW_ROWS, P, first ? STARPU_W : STARPU_RW)[i]
                                         : sw_tensor_whole(part, first ? STARPU_W : STARPU_RW);
        int prio = sw_set_task_priority(1); /* the chains the rest of the backward waits on, before dW */
        sw_gemm(d16, 0, sw_tensor_tiles(gemm_w(x, hd->w), SW_ROWS, PV, STARPU_R)[j], 0, out, 1.0f, first ? 0.0f : 1.0f);
        sw_set_task_priority(prio);
        op_done(x, d16);
    }
    op_done(x, x16);
    if (P > 1) {
        starpu_data_handle_t *lp = sw_tensor_tiles(lm_part, SW_ROWS, P, STARPU_R);
        sw_add(lp[0], lp[1], whole_w(part));
        for (int j = 2; j < P; j++) sw_axpy(1.0f, lp[j], sw_tensor_whole(part, STARPU_RW));
    }
    sw_tensor_invalidate(hd->logits);
    return sw_tp_f_backward(&x->tp, part, sw_scratch(x, "dln", x->resid_rows, h));
}

/* ------------------------------------------------------- traffic model */

static void tp_add(const sw_ctx *x, sw_traffic *t, int backward, sw_tp_op op, int64_t rows, int64_t cols)
{
    traffic_add(x, t, backward, SW_GROUP_TP, sw_tp_bytes(&x->tp, op, rows, cols));
}

/* a replicated parameter's gradient from the local rows, summed over TP */
static void sum_grad_add(const sw_ctx *x, sw_traffic *t, int i)
{
    int64_t rows, cols;
    if (i < 0) return;
    param_shape(x, i, &rows, &cols);
    tp_add(x, t, 1, SW_TP_SUM_GRAD, rows, cols);
}

void sw_linear_traffic(const sw_ctx *x, const sw_linear *l, sw_traffic *t)
{
    switch (l->mode) {
    case SW_LINEAR_COLUMN: /* f; with tp_recompute_allgather the input gathered again in backward */
        tp_add(x, t, 0, SW_TP_F_FORWARD, x->tokens, l->in);
        if (x->c.tp_recompute_allgather) tp_add(x, t, 1, SW_TP_F_FORWARD, x->tokens, l->in);
        tp_add(x, t, 1, SW_TP_F_BACKWARD, x->tokens, l->in);
        break;
    case SW_LINEAR_ROW: /* g; the bias gradient from the local rows */
        tp_add(x, t, 0, SW_TP_G_FORWARD, x->tokens, l->out);
        tp_add(x, t, 1, SW_TP_G_BACKWARD, x->tokens, l->out);
        sum_grad_add(x, t, l->b);
        break;
    case SW_LINEAR_REPLICATED: /* summed over TP on the l rows under sp (the rows of its last forward; before
                                * any, counted as l rows), nothing on rows every TP rank holds */
        if (x->log && l->w < x->log->nrows && x->log->rows[l->w] && x->log->rows[l->w] != RULE_SUM_TP) break;
        sum_grad_add(x, t, l->w);
        sum_grad_add(x, t, l->b);
        break;
    }
}

void sw_norm_traffic(const sw_ctx *x, const sw_norm *n, sw_traffic *t)
{
    sum_grad_add(x, t, n->w);
    sum_grad_add(x, t, n->b);
}

void sw_embedding_traffic(const sw_ctx *x, const sw_embedding *e, sw_traffic *t)
{
    int64_t rows, h;
    param_shape(x, e->wte, &rows, &h);
    tp_add(x, t, 0, SW_TP_G_FORWARD, x->tokens, h);
    tp_add(x, t, 1, SW_TP_G_BACKWARD, x->tokens, h);
}

void sw_embedding_table_traffic(const sw_ctx *x, const sw_embedding_table *e, sw_traffic *t) { sum_grad_add(x, t, e->w); }

void sw_lm_head_traffic(const sw_ctx *x, const sw_lm_head *hd, sw_traffic *t)
{
    int64_t rows, h;
    param_shape(x, hd->w, &rows, &h);
    tp_add(x, t, 0, SW_TP_F_FORWARD, x->tokens, h);
    /* the cross-entropy's row max, target logit and sum of exps */
    traffic_add(x, t, 0, SW_GROUP_TP, 3 * sw_comm_bytes(x->tp.comm, SW_GROUP_TP, SW_COLL_ALLREDUCE, x->tokens, 1));
    tp_add(x, t, 1, SW_TP_F_BACKWARD, x->tokens, h);
    if (x->grad_size > 1) /* the loss, once per step; weighted: its count too */
        t->forward[x->grad_group] += (hd->weighted ? 2 : 1) * sw_comm_bytes(x->comm, x->grad_group, SW_COLL_ALLREDUCE, 1, 1);
}
