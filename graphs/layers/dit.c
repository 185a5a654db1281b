/* Layers of a diffusion transformer (see dit.h): SiLU, adaLN-Zero
 * modulation and the gated residual, the timestep embedding, patchify and
 * un-patchify (host side), the conditioning loader, cross-attention and its
 * K/V projection, and spatial / temporal attention over a video's tokens. */
#include <math.h>
#include <string.h>

#include "layer_util.h"
#include "starweave/dit.h"
#include "starweave/runtime.h"

/* ---------------------------------------------------------------- SiLU */

void sw_silu_forward(sw_ctx *x, sw_tensor *in, sw_tensor *out)
{
    sw_check_ptr("sw_silu_forward", "in", in);
    sw_check_tensor("sw_silu_forward", "out", out, in->rows, in->cols);
    const int n = in->cols < x->row_tiles ? (int)in->cols : x->row_tiles;
    for (int i = 0; i < n; i++)
        sw_silu_fwd(sw_tensor_tiles(in, SW_COLS, n, STARPU_R)[i], sw_tensor_tiles(out, SW_COLS, n, STARPU_W)[i]);
}

void sw_silu_backward(sw_ctx *x, sw_tensor *in, sw_tensor *grad)
{
    sw_check_ptr("sw_silu_backward", "in", in);
    sw_check_tensor("sw_silu_backward", "grad", grad, in->rows, in->cols);
    const int n = in->cols < x->row_tiles ? (int)in->cols : x->row_tiles;
    for (int i = 0; i < n; i++)
        sw_silu_bwd(sw_tensor_tiles(in, SW_COLS, n, STARPU_R)[i], sw_tensor_tiles(grad, SW_COLS, n, STARPU_RW)[i]);
}

/* ------------------------------------------------------ adaLN-Zero */

/* the ranks holding the other positions of this rank's sequences (as the
 * pooling's, heads.c): TP with sp, Ulysses, Ring; 0: none */
static int seq_group(const sw_ctx *x, sw_group *g)
{
    const int by_tp = tp_on(x) && x->c.sp, by_cp = x->ulysses * x->ring > 1;
    if (!by_tp && !by_cp) return 0;
    *g = by_tp && by_cp ? SW_GROUP_TP_SP : by_tp ? SW_GROUP_TP : SW_GROUP_SP;
    return 1;
}

sw_adaln sw_adaln_add(sw_ctx *x, const char *name, int64_t cond, int64_t h, int chunks)
{
    if (cond < 1 || h < 1 || chunks < 1 || chunks > 64)
        sw_usage_error("sw_adaln_add: cond (%lld) and h (%lld) must be at least 1, chunks in 1 .. 64 (%d)",
                       (long long)cond, (long long)h, chunks);
    sw_adaln a;
    memset(&a, 0, sizeof a);
    a.lin = sw_linear_add(x, name, SW_LINEAR_REPLICATED, cond, (int64_t)chunks * h, 1, 0.0f, NULL, 0, NULL);
    a.chunks = chunks, a.h = h;
    return a;
}

static void check_adaln(const char *fn, const sw_ctx *x, const sw_adaln *a, const sw_tensor *mod)
{
    sw_check_ptr(fn, "x", x);
    sw_check_ptr(fn, "a", a);
    sw_check_tensor(fn, "mod", mod, x->B, (int64_t)a->chunks * a->h);
}

void sw_adaln_forward(sw_ctx *x, const sw_adaln *a, sw_tensor *c, sw_tensor *mod)
{
    check_adaln("sw_adaln_forward", x, a, mod);
    sw_check_tensor("sw_adaln_forward", "c", c, x->B, a->lin.in);
    sw_linear_forward(x, &a->lin, c, c, mod);
}

/* each rank summed dmod over its own positions: the other positions' sums
 * come from the ranks holding them, then every one of them holds the same
 * dmod, as the replicated linear's backward on B rows needs */
sw_tensor *sw_adaln_backward(sw_ctx *x, const sw_adaln *a, sw_tensor *dmod, sw_tensor *c)
{
    check_adaln("sw_adaln_backward", x, a, dmod);
    sw_check_tensor("sw_adaln_backward", "c", c, x->B, a->lin.in);
    sw_group g;
    if (seq_group(x, &g)) sw_allreduce(x->comm, g, dmod, SW_SUM);
    return sw_linear_backward(x, &a->lin, dmod, c, c);
}

void sw_adaln_traffic(const sw_ctx *x, const sw_adaln *a, sw_traffic *t)
{
    sw_group g;
    if (seq_group(x, &g))
        traffic_add(x, t, 1, g, sw_comm_bytes(x->comm, g, SW_COLL_ALLREDUCE, x->B, (int64_t)a->chunks * a->h));
    sw_linear_traffic(x, &a->lin, t);
}

/* mod [B, k h] and its chunks j, rows of whole positions [n, h] */
static int mod_chunks(const char *fn, const sw_ctx *x, const sw_tensor *rows, const sw_tensor *mod, const int *j,
                      int nj)
{
    sw_check_ptr(fn, "rows", rows);
    sw_check_ptr(fn, "mod", mod);
    if (rows->cols < 1 || mod->rows != x->B || mod->cols % rows->cols)
        sw_usage_error("%s: mod: must be [B, k h] = [%d, k * %lld] ([%lld, %lld] given)", fn, x->B,
                       (long long)rows->cols, (long long)mod->rows, (long long)mod->cols);
    if (rows->rows % x->B)
        sw_usage_error("%s: rows: must be whole positions of the B = %d sequences (%lld rows)", fn, x->B,
                       (long long)rows->rows);
    const int k = (int)(mod->cols / rows->cols);
    for (int i = 0; i < nj; i++)
        if (j[i] < 0 || j[i] >= k) sw_usage_error("%s: chunk %d outside mod's %d chunks", fn, j[i], k);
    return k;
}

static starpu_data_handle_t chunk(sw_tensor *mod, int k, int j, enum starpu_data_access_mode mode)
{
    return sw_tensor_tiles(mod, SW_COLS, k, mode)[j];
}

void sw_modulate_forward(sw_ctx *x, sw_tensor *in, sw_tensor *mod, int shift, int scale, sw_tensor *out)
{
    const int k = mod_chunks("sw_modulate_forward", x, in, mod, (int[]){shift, scale}, 2);
    sw_check_tensor("sw_modulate_forward", "out", out, in->rows, in->cols);
    sw_modulate_fwd(whole_r(in), chunk(mod, k, shift, STARPU_R), chunk(mod, k, scale, STARPU_R), whole_w(out));
}

void sw_modulate_backward(sw_ctx *x, sw_tensor *dout, sw_tensor *in, sw_tensor *mod, int shift, int scale,
                          sw_tensor *din, sw_tensor *dmod)
{
    const int k = mod_chunks("sw_modulate_backward", x, in, mod, (int[]){shift, scale}, 2);
    if (shift == scale) sw_usage_error("sw_modulate_backward: shift and scale must be different chunks (%d)", shift);
    sw_check_tensor("sw_modulate_backward", "dout", dout, in->rows, in->cols);
    sw_check_tensor("sw_modulate_backward", "din", din, in->rows, in->cols);
    sw_check_tensor("sw_modulate_backward", "dmod", dmod, mod->rows, mod->cols);
    starpu_data_handle_t *dm = sw_tensor_tiles(dmod, SW_COLS, k, STARPU_W);
    sw_modulate_bwd(whole_r(in), chunk(mod, k, scale, STARPU_R), whole_r(dout), whole_w(din), dm[shift], dm[scale]);
}

void sw_gate_forward(sw_ctx *x, sw_tensor *res, sw_tensor *branch, sw_tensor *mod, int gate, sw_tensor *out)
{
    const int k = mod_chunks("sw_gate_forward", x, res, mod, &gate, 1);
    sw_check_tensor("sw_gate_forward", "branch", branch, res->rows, res->cols);
    sw_check_tensor("sw_gate_forward", "out", out, res->rows, res->cols);
    sw_gate_fwd(whole_r(res), chunk(mod, k, gate, STARPU_R), whole_r(branch), whole_w(out));
}

void sw_gate_backward(sw_ctx *x, sw_tensor *dout, sw_tensor *branch, sw_tensor *mod, int gate, sw_tensor *dbranch,
                      sw_tensor *dmod)
{
    const int k = mod_chunks("sw_gate_backward", x, branch, mod, &gate, 1);
    sw_check_tensor("sw_gate_backward", "dout", dout, branch->rows, branch->cols);
    sw_check_tensor("sw_gate_backward", "dbranch", dbranch, branch->rows, branch->cols);
    sw_check_tensor("sw_gate_backward", "dmod", dmod, mod->rows, mod->cols);
    sw_gate_bwd(whole_r(branch), chunk(mod, k, gate, STARPU_R), whole_r(dout), whole_w(dbranch),
                chunk(dmod, k, gate, STARPU_W));
}

/* ------------------------------------------------- timestep embedding */

struct sw_timestep_embedder {
    sw_linear fc1, fc2;      /* [h, freq_dim], [h, h]: replicated, on B rows */
    int freq_dim;
    float max_period;
    int micro;               /* micro-batches of a step: each keeps its own features, u and a until its backward */
    sw_tensor **freq, **u, **a, *da; /* per micro-batch [B, freq_dim] features, [B, h] fc1's output, silu of it;
                                      * the gradient of a (the backward's working tensor) */
};

sw_timestep_embedder *sw_timestep_embedder_create(sw_ctx *x, const char *name, int freq_dim, int64_t h,
                                                  float max_period, float std)
{
    sw_timestep_embedder *te = sw_timestep_embedder_describe(x, name, freq_dim, h, max_period, std);
    te->micro = x->c.grad_accum > 1 ? x->c.grad_accum : 1;
    te->freq = sw_xcalloc((size_t)te->micro, sizeof *te->freq);
    te->u = sw_xcalloc((size_t)te->micro, sizeof *te->u);
    te->a = sw_xcalloc((size_t)te->micro, sizeof *te->a);
    for (int k = 0; k < te->micro; k++) {
        te->freq[k] = sw_tensor_new2d("ts_freq", SW_F32, x->B, freq_dim);
        te->u[k] = sw_tensor_new2d("ts_fc1", SW_F32, x->B, h);
        te->a[k] = sw_tensor_new2d("ts_act", SW_F32, x->B, h);
    }
    te->da = sw_tensor_new2d("ts_dact", SW_F32, x->B, h);
    return te;
}

/* the linears registered, no tensor made (micro 0: destroy frees none) */
sw_timestep_embedder *sw_timestep_embedder_describe(sw_ctx *x, const char *name, int freq_dim, int64_t h,
                                                    float max_period, float std)
{
    if (!name || strlen(name) > 40 || freq_dim < 2 || h < 1 || !(max_period > 1.0f) || !(std >= 0.0f))
        sw_usage_error("sw_timestep_embedder_create: a name of at most 40 characters, freq_dim >= 2 (%d), h >= 1 "
                       "(%lld), max_period > 1 (%g), std >= 0 (%g)",
                       freq_dim, (long long)h, (double)max_period, (double)std);
    sw_timestep_embedder *te = sw_xcalloc(1, sizeof *te);
    char n[64];
    snprintf(n, sizeof n, "%s_fc1", name);
    te->fc1 = sw_linear_add(x, n, SW_LINEAR_REPLICATED, freq_dim, h, 1, std, NULL, 0, NULL);
    snprintf(n, sizeof n, "%s_fc2", name);
    te->fc2 = sw_linear_add(x, n, SW_LINEAR_REPLICATED, h, h, 1, std, NULL, 0, NULL);
    te->freq_dim = freq_dim, te->max_period = max_period;
    return te;
}

double sw_timestep_embedder_bytes(const sw_ctx *x, int freq_dim, int64_t h)
{
    sw_check_ptr("sw_timestep_embedder_bytes", "x", x);
    const double micro = x->c.grad_accum > 1 ? x->c.grad_accum : 1;
    return 4.0 * (double)x->B * (micro * ((double)freq_dim + 2.0 * (double)h) + (double)h); /* freq, u, a per micro-batch; da */
}

void sw_timestep_embedder_destroy(sw_timestep_embedder *te)
{
    if (!te) return;
    for (int k = 0; k < te->micro; k++) sw_tensor_free(te->freq[k]), sw_tensor_free(te->u[k]), sw_tensor_free(te->a[k]);
    sw_tensor_free(te->da);
    free(te->freq), free(te->u), free(te->a), free(te);
}

const sw_linear *sw_timestep_embedder_linear(const sw_timestep_embedder *te, int which)
{
    return which == 0 ? &te->fc1 : &te->fc2;
}

void sw_timestep_embedder_forward(sw_ctx *x, sw_timestep_embedder *te, sw_tensor *t, sw_tensor *out)
{
    static const char *fn = "sw_timestep_embedder_forward";
    sw_check_ptr(fn, "te", te);
    sw_check_tensor(fn, "t", t, x->B, 1);
    sw_check_tensor(fn, "out", out, x->B, te->fc2.out);
    const int k = x->micro;
    sw_timestep_fwd(whole_r(t), whole_w(te->freq[k]), te->max_period);
    sw_linear_forward(x, &te->fc1, te->freq[k], te->freq[k], te->u[k]);
    sw_silu_forward(x, te->u[k], te->a[k]);
    sw_linear_forward(x, &te->fc2, te->a[k], te->a[k], out);
}

void sw_timestep_embedder_backward(sw_ctx *x, sw_timestep_embedder *te, sw_tensor *dout)
{
    static const char *fn = "sw_timestep_embedder_backward";
    sw_check_ptr(fn, "te", te);
    sw_check_tensor(fn, "dout", dout, x->B, te->fc2.out);
    /* fc2's dx is a scratch that fc1's backward may reuse for its own dx: a copy of our own */
    const int k = x->micro;
    sw_copy_flat(whole_r(sw_linear_backward(x, &te->fc2, dout, te->a[k], te->a[k])), whole_w(te->da), 0);
    sw_silu_backward(x, te->u[k], te->da);
    sw_linear_backward(x, &te->fc1, te->da, te->freq[k], te->freq[k]); /* no gradient to t: dx unused */
}

/* -------------------------------------------- patch embedding (host side) */

int64_t sw_patch_tokens(const sw_patch_dims *d, char *msg, size_t n)
{
    if (!d) return snprintf(msg, n, "dims: must not be NULL"), -1;
    SW_RULE(d->frames >= 1 && d->height >= 1 && d->width >= 1 && d->channels >= 1 && d->patch >= 1,
            "frames, height, width, channels and patch must be at least 1 (%d, %d, %d, %d, %d)", d->frames, d->height,
            d->width, d->channels, d->patch);
    SW_RULE(d->height % d->patch == 0 && d->width % d->patch == 0,
            "the patch size (%d) must divide height (%d) and width (%d)", d->patch, d->height, d->width);
    return (int64_t)d->frames * (d->height / d->patch) * (d->width / d->patch);
}

/* latent element (b, f, y, x, c) <-> token row s * batch + b, column (u p + v) C + c */
static void patch_map(const sw_patch_dims *d, int batch, const float *src, float *dst, int to_tokens, const char *fn)
{
    char msg[200];
    const int64_t N = sw_patch_tokens(d, msg, sizeof msg);
    if (N < 0) sw_usage_error("%s: %s", fn, msg);
    if (batch < 1 || !src || !dst) sw_usage_error("%s: batch must be at least 1 (%d), the arrays not NULL", fn, batch);
    const int64_t p = d->patch, C = d->channels, H = d->height, W = d->width, Hp = H / p, Wp = W / p, cols = p * p * C;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t f = 0; f < d->frames; f++)
            for (int64_t i = 0; i < Hp; i++)
                for (int64_t j = 0; j < Wp; j++) {
                    const int64_t s = (f * Hp + i) * Wp + j, row = s * batch + b;
                    for (int64_t u = 0; u < p; u++)
                        for (int64_t v = 0; v < p; v++)
                            for (int64_t c = 0; c < C; c++) {
                                const int64_t lat = (((b * d->frames + f) * H + i * p + u) * W + j * p + v) * C + c;
                                const int64_t tok = row * cols + (u * p + v) * C + c;
                                if (to_tokens) dst[tok] = src[lat];
                                else dst[lat] = src[tok];
                            }
                }
}

void sw_patchify(const sw_patch_dims *d, int batch, const float *latents, float *tokens)
{
    patch_map(d, batch, latents, tokens, 1, "sw_patchify");
}

void sw_unpatchify(const sw_patch_dims *d, int batch, const float *tokens, float *latents)
{
    patch_map(d, batch, tokens, latents, 0, "sw_unpatchify");
}

void sw_ctx_load_cond(sw_ctx *x, int k, const float *in, int64_t len, int64_t f, sw_tensor *cond)
{
    static const char *fn = "sw_ctx_load_cond";
    if (!in) sw_usage_error("%s: in: must not be NULL", fn);
    if (len < 1) sw_usage_error("%s: len: the conditioning length must be at least 1 (%lld)", fn, (long long)len);
    if (k < 0 || k >= x->c.grad_accum) sw_usage_error("%s: k: must be in 0 .. grad-accum - 1 (%d, %d)", fn, k, x->c.grad_accum);
    if (!cond || cond->dtype != SW_F32 || cond->rows != len * x->B || cond->cols != f)
        sw_usage_error("%s: cond: must be fp32 [len B, f] = [%lld, %lld] (%s)", fn, (long long)(len * x->B),
                       (long long)f, cond ? "other shape or dtype" : "NULL");
    const int64_t B = x->B, first = sw_ctx_micro_batch_first(x, k);
    float *m = sw_xcalloc((size_t)(len * B * f), sizeof(float));
    for (int64_t p = 0; p < len; p++)
        for (int64_t b = 0; b < B; b++)
            memcpy(m + (p * B + b) * f, in + (p * x->c.batch + first + b) * f, (size_t)f * sizeof(float));
    sw_tensor_write_host(cond, m);
    free(m);
    sw_ctx_set_micro_batch(x, k);
}

/* ------------------------------------------------------ cross-attention */

/* attention tasks: G query-head groups, the largest divisor of the local heads not above the tiles */
static int head_groups(const sw_ctx *x, int aq)
{
    int g = x->row_tiles < aq ? x->row_tiles : aq;
    while (aq % g) g--;
    return g;
}

static sw_attn_args tile_args(int batch, int nh, int d, int sq, int sk)
{
    sw_attn_args r;
    memset(&r, 0, sizeof r);
    r.batch = batch, r.nh = nh, r.d = d, r.sq = sq, r.sk = sk;
    r.causal = 0;
    r.scale = 1.0f / sqrtf((float)d);
    r.heads_total = nh, r.seq_total = sq > sk ? sq : sk;
    return r;
}

struct sw_cross_attention {
    sw_ctx *x;
    int aq, d, len, G;       /* local heads, head dim, conditioning length, head groups (tasks) */
};

sw_cross_attention *sw_cross_attention_create(sw_ctx *x, int heads, int head_dim, int cond_len)
{
    if (heads < 1 || head_dim < 1 || heads % x->tp.t)
        sw_usage_error("sw_cross_attention_create: heads (%d) must be a positive multiple of tp (%d), head_dim (%d) "
                       "at least 1",
                       heads, x->tp.t, head_dim);
    if (cond_len < 1)
        sw_usage_error("sw_cross_attention_create: the conditioning length must be at least 1 (%d)", cond_len);
    sw_cross_attention *a = sw_xcalloc(1, sizeof *a);
    a->x = x, a->aq = heads / x->tp.t, a->d = head_dim, a->len = cond_len;
    a->G = head_groups(x, a->aq);
    return a;
}

void sw_cross_attention_destroy(sw_cross_attention *a) { free(a); }

void sw_cross_attention_keep(sw_cross_attention *a, sw_saved *s, sw_cross_saved *k)
{
    const sw_ctx *x = a->x;
    const int64_t ad = (int64_t)a->aq * a->d;
    memset(k, 0, sizeof *k);
    k->q = sw_saved_new(s, "xq", x->tokens, ad);
    k->kv = sw_saved_new(s, "xkv", (int64_t)a->len * x->B, 2 * ad);
    k->att = sw_saved_new(s, "xatt", x->tokens, ad);
    k->lse = sw_saved_new(s, "xlse", x->tokens, a->aq);
}

static void check_cross(const char *fn, const sw_ctx *x, const sw_cross_attention *a, const sw_cross_saved *k)
{
    sw_check_ptr(fn, "a", a);
    sw_check_ptr(fn, "k", k);
    const int64_t ad = (int64_t)a->aq * a->d;
    sw_check_tensor(fn, "k->q", k->q, x->tokens, ad);
    sw_check_tensor(fn, "k->kv", k->kv, (int64_t)a->len * x->B, 2 * ad);
    sw_check_tensor(fn, "k->att", k->att, x->tokens, ad);
    sw_check_tensor(fn, "k->lse", k->lse, x->tokens, a->aq);
}

/* one task per head group j: q, att, lse column tile j; k tile j and v tile G + j of kv */
void sw_cross_attention_forward(sw_ctx *x, sw_cross_attention *a, const sw_cross_saved *k)
{
    check_cross("sw_cross_attention_forward", x, a, k);
    const int G = a->G;
    sw_attn_args r = tile_args(x->B, a->aq / G, a->d, (int)(x->tokens / x->B), a->len);
    for (int j = 0; j < G; j++) {
        r.head0 = j * r.nh;
        starpu_data_handle_t *kv = sw_tensor_tiles(k->kv, SW_COLS, 2 * G, STARPU_R);
        sw_attn_fwd(sw_tensor_tiles(k->q, SW_COLS, G, STARPU_R)[j], kv[j], kv[G + j],
                    sw_tensor_tiles(k->att, SW_COLS, G, STARPU_W)[j], sw_tensor_tiles(k->lse, SW_COLS, G, STARPU_W)[j],
                    &r);
    }
}

void sw_cross_attention_backward(sw_ctx *x, sw_cross_attention *a, const sw_cross_saved *k, sw_tensor *datt,
                                 sw_tensor *dq, sw_tensor *dkv)
{
    static const char *fn = "sw_cross_attention_backward";
    check_cross(fn, x, a, k);
    sw_check_tensor(fn, "datt", datt, k->att->rows, k->att->cols);
    sw_check_tensor(fn, "dq", dq, k->q->rows, k->q->cols);
    sw_check_tensor(fn, "dkv", dkv, k->kv->rows, k->kv->cols);
    const int G = a->G;
    sw_attn_args r = tile_args(x->B, a->aq / G, a->d, (int)(x->tokens / x->B), a->len);
    for (int j = 0; j < G; j++) {
        r.head0 = j * r.nh;
        starpu_data_handle_t *kv = sw_tensor_tiles(k->kv, SW_COLS, 2 * G, STARPU_R);
        starpu_data_handle_t *dk = sw_tensor_tiles(dkv, SW_COLS, 2 * G, STARPU_W);
        sw_attn_bwd(sw_tensor_tiles(k->q, SW_COLS, G, STARPU_R)[j], kv[j], kv[G + j],
                    sw_tensor_tiles(k->att, SW_COLS, G, STARPU_R)[j], sw_tensor_tiles(k->lse, SW_COLS, G, STARPU_R)[j],
                    sw_tensor_tiles(datt, SW_COLS, G, STARPU_R)[j], sw_tensor_tiles(dq, SW_COLS, G, STARPU_W)[j], dk[j],
                    dk[G + j], &r);
    }
}

/* ------------------------------------------- cross-attention's K/V projection */

sw_cross_kv sw_cross_kv_add(sw_ctx *x, const char *name, int64_t cond_dim, int64_t h, int bias, float std)
{
    const int t = x->tp.t, r = x->tp.rank;
    if (cond_dim < 1 || h < 1 || h % t)
        sw_usage_error("sw_cross_kv_add: cond_dim (%lld) must be at least 1, h (%lld) a positive multiple of tp (%d)",
                       (long long)cond_dim, (long long)h, t);
    /* this TP rank's K rows and V rows (its heads), stacked: its kv is k heads | v heads */
    sw_slice s = {0, 0, {0}, {0}, {0}};
    if (t > 1) s = (sw_slice){2, 0, {r * (h / t), h + r * (h / t)}, {h / t, h / t}, {1, 1}};
    sw_cross_kv l;
    memset(&l, 0, sizeof l);
    l.lin = sw_linear_add(x, name, SW_LINEAR_COLUMN, cond_dim, 2 * h, bias, std, &s, 0, NULL);
    l.h = h;
    return l;
}

/* the layer's weight (and bias) allocated, cond [n, cond_dim] and t [n, 2 h/t] */
static void check_cross_kv(const char *fn, const sw_ctx *x, const sw_cross_kv *l, const sw_tensor *cond,
                           const char *what, const sw_tensor *t)
{
    sw_check_ptr(fn, "l", l);
    sw_check_param(fn, x, l->lin.w);
    if (l->lin.b >= 0) sw_check_param(fn, x, l->lin.b);
    sw_check_ptr(fn, "cond", cond);
    sw_check_tensor(fn, "cond", cond, cond->rows, l->lin.in);
    sw_check_tensor(fn, what, t, cond->rows, 2 * l->h / x->tp.t);
}

/* kv's column tiles, W's row tiles: the linear's n, at most one a column */
static int kv_tiles(const sw_ctx *x, const sw_cross_kv *l)
{
    const int64_t c = 2 * l->h / x->tp.t;
    return l->lin.n < c ? l->lin.n : (int)c;
}

/* as sw_linear_forward on rows of its own: one task per column tile of kv (row tile of W) */
void sw_cross_kv_forward(sw_ctx *x, const sw_cross_kv *l, sw_tensor *cond, sw_tensor *kv)
{
    check_cross_kv("sw_cross_kv_forward", x, l, cond, "kv", kv);
    const int n = kv_tiles(x, l);
    starpu_data_handle_t *W = sw_tensor_tiles(gemm_w(x, l->lin.w), SW_ROWS, n, STARPU_R);
    starpu_data_handle_t *b = l->lin.b >= 0 ? sw_tensor_tiles(param(x, l->lin.b), SW_COLS, n, STARPU_R) : NULL;
    starpu_data_handle_t in = op16(x, whole_r(cond));
    for (int j = 0; j < n; j++) {
        starpu_data_handle_t kj = sw_tensor_tiles(kv, SW_COLS, n, STARPU_W)[j];
        if (b) sw_gemm_bias(in, 0, W[j], 1, b[j], kj);
        else sw_gemm(in, 0, W[j], 1, kj, 1.0f, 0.0f);
    }
    op_done(x, in);
}

/* dW = dkv^T cond, one task per row tile of dW (column tile of dkv); db = colsum(dkv) (one task, as
 * the linear's). Written, not added: the registry sums the micro-batches and the gradient group. */
static void cross_kv_dw(sw_ctx *x, const sw_cross_kv *l, sw_tensor *cond, sw_tensor *dkv)
{
    const int n = kv_tiles(x, l);
    starpu_data_handle_t c16 = op16(x, whole_r(cond));
    for (int j = 0; j < n; j++) {
        starpu_data_handle_t dj = op16(x, sw_tensor_tiles(dkv, SW_COLS, n, STARPU_R)[j]);
        sw_gemm(dj, 1, c16, 0, sw_tensor_tiles(grad(x, l->lin.w), SW_ROWS, n, STARPU_W)[j], 1.0f, 0.0f);
        op_done(x, dj);
    }
    op_done(x, c16);
    if (l->lin.b >= 0) sw_colsum(whole_r(dkv), whole_w(grad(x, l->lin.b)), 1.0f, 0.0f);
}

/* the order and priorities of sw_linear_backward's GEMMs: dcond (the chain the rest of the backward
 * may wait on) first at priority 1, unless the gradients are all-reduced (dW first, for its bucket to
 * be reduced meanwhile); with dw_last dW at -1 */
void sw_cross_kv_backward(sw_ctx *x, const sw_cross_kv *l, sw_tensor *cond, sw_tensor *dkv, sw_tensor *dcond)
{
    static const char *fn = "sw_cross_kv_backward";
    check_cross_kv(fn, x, l, cond, "dkv", dkv);
    if (dcond) sw_check_tensor(fn, "dcond", dcond, cond->rows, cond->cols);
    const int dx_first = x->grad_size == 1;
    const int prio = sw_set_task_priority(dx_first);
    if (!dx_first) cross_kv_dw(x, l, cond, dkv);
    if (dcond) { /* dcond [n, cond_dim] = dkv W, over its column tiles (W's) */
        const int nc = x->col_tiles < cond->cols ? x->col_tiles : (int)cond->cols;
        starpu_data_handle_t d16 = op16(x, whole_r(dkv));
        for (int j = 0; j < nc; j++)
            sw_gemm(d16, 0, sw_tensor_tiles(gemm_w(x, l->lin.w), SW_COLS, nc, STARPU_R)[j], 0,
                    sw_tensor_tiles(dcond, SW_COLS, nc, STARPU_W)[j], 1.0f, 0.0f);
        op_done(x, d16);
    }
    if (dx_first) {
        sw_set_task_priority(x->c.dw_last ? -1 : prio);
        cross_kv_dw(x, l, cond, dkv);
    }
    sw_set_task_priority(prio);
}

/* ------------------------------------- spatial and temporal attention */

struct sw_grid_attention {
    sw_ctx *x;
    sw_attn_axis axis;
    int frames, patches, aq, d, G;
    int N;                   /* ranks splitting the sequence (ulysses x ring, SW_GROUP_SP): each holds frames / N frames */
};

sw_grid_attention *sw_grid_attention_create(sw_ctx *x, sw_attn_axis axis, int frames, int patches, int heads,
                                            int head_dim)
{
    static const char *fn = "sw_grid_attention_create";
    if (axis != SW_AXIS_SPATIAL && axis != SW_AXIS_TEMPORAL)
        sw_usage_error("%s: axis: must be SW_AXIS_SPATIAL or SW_AXIS_TEMPORAL (%d)", fn, (int)axis);
    if (frames < 1 || patches < 1 || (int64_t)frames * patches != x->c.seq)
        sw_usage_error("%s: frames (%d) times patches (%d) must be the sequence length (%d)", fn, frames, patches,
                       x->c.seq);
    if (heads < 1 || head_dim < 1 || heads % x->tp.t)
        sw_usage_error("%s: heads (%d) must be a positive multiple of tp (%d), head_dim (%d) at least 1", fn, heads,
                       x->tp.t, head_dim);
    const int N = x->ulysses * x->ring;
    if (N > 1 && x->zigzag)
        sw_usage_error("%s: zigzag: the sequence must be split in contiguous blocks of frames (ring %d with zigzag)",
                       fn, x->ring);
    if (frames % N)
        sw_usage_error("%s: frames (%d) must be divisible by ulysses x ring (%d): each rank holds whole frames", fn,
                       frames, N);
    if (axis == SW_AXIS_TEMPORAL && patches % N)
        sw_usage_error("%s: patches (%d) must be divisible by ulysses x ring (%d): temporal attention splits them", fn,
                       patches, N);
    sw_grid_attention *a = sw_xcalloc(1, sizeof *a);
    a->x = x, a->axis = axis, a->frames = frames, a->patches = patches;
    a->aq = heads / x->tp.t, a->d = head_dim, a->N = N;
    a->G = head_groups(x, a->aq);
    return a;
}

void sw_grid_attention_destroy(sw_grid_attention *a) { free(a); }

/* spatial: the rows swapped; temporal: only over a split sequence (all-to-all) */
static int permuted(const sw_grid_attention *a) { return a->axis == SW_AXIS_SPATIAL || a->N > 1; }

void sw_grid_attention_keep(sw_grid_attention *a, sw_saved *s, sw_grid_saved *k)
{
    const sw_ctx *x = a->x;
    const int64_t ad = (int64_t)a->aq * a->d;
    memset(k, 0, sizeof *k);
    k->qkv = sw_saved_new(s, "gqkv", x->tokens, 3 * ad);
    k->qkv_g = permuted(a) ? sw_saved_new(s, "gqkv_g", x->tokens, 3 * ad) : k->qkv;
    k->att = sw_saved_new(s, "gatt", x->tokens, ad);
    k->att_g = permuted(a) ? sw_saved_new(s, "gatt_g", x->tokens, ad) : k->att;
    k->lse = sw_saved_new(s, "glse", x->tokens, a->aq);
}

static void check_grid(const char *fn, const sw_ctx *x, const sw_grid_attention *a, const sw_grid_saved *k)
{
    sw_check_ptr(fn, "a", a);
    sw_check_ptr(fn, "k", k);
    const int64_t ad = (int64_t)a->aq * a->d;
    sw_check_tensor(fn, "k->qkv", k->qkv, x->tokens, 3 * ad);
    sw_check_tensor(fn, "k->qkv_g", k->qkv_g, x->tokens, 3 * ad);
    sw_check_tensor(fn, "k->att", k->att, x->tokens, ad);
    sw_check_tensor(fn, "k->att_g", k->att_g, x->tokens, ad);
    sw_check_tensor(fn, "k->lse", k->lse, x->tokens, a->aq);
    if (permuted(a) && (k->qkv_g == k->qkv || k->att_g == k->att))
        sw_usage_error("%s: spatial attention, and temporal over a split sequence, need their own qkv_g and att_g "
                       "(sw_grid_attention_keep)", fn);
}

/* the grouping's sequences are the tile's batch: temporal, (patch, sample) of length frames (the
 * frame-major rows as they are, or this rank's patches of every frame after the all-to-all);
 * spatial, (frame, sample) of length patches (this rank's frames, rows swapped) */
static sw_attn_args grid_args(const sw_grid_attention *a)
{
    const int B = a->x->B, Fl = a->frames / a->N;
    return a->axis == SW_AXIS_SPATIAL ? tile_args(Fl * B, a->aq / a->G, a->d, a->patches, a->patches)
                                      : tile_args(a->patches / a->N * B, a->aq / a->G, a->d, a->frames, a->frames);
}

/* swaps the first two row axes of each of the n row tiles of src into dst */
static void swap_tiles(const sw_grid_attention *a, sw_tensor *src, sw_tensor *dst, int n, int64_t n1, int64_t n2)
{
    for (int i = 0; i < n; i++)
        sw_swap_rows(sw_tensor_tiles(src, SW_ROWS, n, STARPU_R)[i], sw_tensor_tiles(dst, SW_ROWS, n, STARPU_W)[i], n1,
                     n2, a->x->B);
}

/* this rank's frame-major rows [frame (F/N), patch (S), sample] to the grouping's order: spatial
 * [patch, frame, sample]; temporal over N ranks (Open-Sora's all-to-all, scatter patches and
 * gather frames): [patch, frame] swapped, part j (patches j S/N ..) to rank j, and the parts
 * received, [rank, patch (S/N), frame (F/N)], swapped to [frame (F), patch (S/N), sample] */
static void to_grouping(const sw_grid_attention *a, sw_tensor *src, sw_tensor *dst, const char *what)
{
    const int64_t Fl = a->frames / a->N, S = a->patches;
    if (a->axis == SW_AXIS_SPATIAL) {
        sw_swap_rows(whole_r(src), whole_w(dst), Fl, S, a->x->B);
        return;
    }
    char n1[32], n2[32];
    snprintf(n1, sizeof n1, "%s.send", what), snprintf(n2, sizeof n2, "%s.recv", what);
    sw_tensor *send = sw_scratch_keep(a->x, n1, src->rows, src->cols, 1);
    sw_tensor *recv = sw_scratch_keep(a->x, n2, src->rows, src->cols, 1);
    sw_swap_rows(whole_r(src), whole_w(send), Fl, S, a->x->B);
    sw_alltoall(a->x->comm, SW_GROUP_SP, send, recv, 0, 0);
    swap_tiles(a, recv, dst, a->N, S / a->N, Fl);
}

/* the inverse */
static void from_grouping(const sw_grid_attention *a, sw_tensor *src, sw_tensor *dst, const char *what)
{
    const int64_t Fl = a->frames / a->N, S = a->patches;
    if (a->axis == SW_AXIS_SPATIAL) {
        sw_swap_rows(whole_r(src), whole_w(dst), S, Fl, a->x->B);
        return;
    }
    char n1[32], n2[32];
    snprintf(n1, sizeof n1, "%s.send", what), snprintf(n2, sizeof n2, "%s.recv", what);
    sw_tensor *send = sw_scratch_keep(a->x, n1, src->rows, src->cols, 1);
    sw_tensor *recv = sw_scratch_keep(a->x, n2, src->rows, src->cols, 1);
    swap_tiles(a, src, send, a->N, Fl, S / a->N);
    sw_alltoall(a->x->comm, SW_GROUP_SP, send, recv, 0, 0);
    sw_swap_rows(whole_r(recv), whole_w(dst), S, Fl, a->x->B);
}

void sw_grid_attention_traffic(const sw_ctx *x, const sw_grid_attention *a, sw_traffic *t)
{
    if (!permuted(a) || a->axis == SW_AXIS_SPATIAL) return;
    const int64_t ad = (int64_t)a->aq * a->d;
    const double qkv = sw_comm_bytes(x->comm, SW_GROUP_SP, SW_COLL_ALLTOALL, x->tokens, 3 * ad),
                 att = sw_comm_bytes(x->comm, SW_GROUP_SP, SW_COLL_ALLTOALL, x->tokens, ad);
    traffic_add(x, t, 0, SW_GROUP_SP, qkv + att); /* qkv there, the output back */
    traffic_add(x, t, 1, SW_GROUP_SP, att + qkv); /* datt there, dqkv back */
}

void sw_grid_attention_forward(sw_ctx *x, sw_grid_attention *a, const sw_grid_saved *k)
{
    check_grid("sw_grid_attention_forward", x, a, k);
    if (permuted(a)) to_grouping(a, k->qkv, k->qkv_g, "gqkv");
    const int G = a->G;
    sw_attn_args r = grid_args(a);
    for (int j = 0; j < G; j++) {
        r.head0 = j * r.nh;
        starpu_data_handle_t *qkv = sw_tensor_tiles(k->qkv_g, SW_COLS, 3 * G, STARPU_R);
        sw_attn_fwd(qkv[j], qkv[G + j], qkv[2 * G + j], sw_tensor_tiles(k->att_g, SW_COLS, G, STARPU_W)[j],
                    sw_tensor_tiles(k->lse, SW_COLS, G, STARPU_W)[j], &r);
    }
    if (permuted(a)) from_grouping(a, k->att_g, k->att, "gatt");
}

void sw_grid_attention_backward(sw_ctx *x, sw_grid_attention *a, const sw_grid_saved *k, sw_tensor *datt,
                                sw_tensor *dqkv)
{
    static const char *fn = "sw_grid_attention_backward";
    check_grid(fn, x, a, k);
    sw_check_tensor(fn, "datt", datt, k->att->rows, k->att->cols);
    sw_check_tensor(fn, "dqkv", dqkv, k->qkv->rows, k->qkv->cols);
    sw_tensor *datt_g = datt, *dqkv_g = dqkv;
    if (permuted(a)) {
        datt_g = sw_scratch(x, "gdatt_g", datt->rows, datt->cols);
        dqkv_g = sw_scratch(x, "gdqkv_g", dqkv->rows, dqkv->cols);
        to_grouping(a, datt, datt_g, "gatt");
    }
    const int G = a->G;
    sw_attn_args r = grid_args(a);
    for (int j = 0; j < G; j++) {
        r.head0 = j * r.nh;
        starpu_data_handle_t *qkv = sw_tensor_tiles(k->qkv_g, SW_COLS, 3 * G, STARPU_R);
        starpu_data_handle_t *d = sw_tensor_tiles(dqkv_g, SW_COLS, 3 * G, STARPU_W);
        sw_attn_bwd(qkv[j], qkv[G + j], qkv[2 * G + j], sw_tensor_tiles(k->att_g, SW_COLS, G, STARPU_R)[j],
                    sw_tensor_tiles(k->lse, SW_COLS, G, STARPU_R)[j], sw_tensor_tiles(datt_g, SW_COLS, G, STARPU_R)[j],
                    d[j], d[G + j], d[2 * G + j], &r);
    }
    if (permuted(a)) from_grouping(a, dqkv_g, dqkv, "gqkv");
}
