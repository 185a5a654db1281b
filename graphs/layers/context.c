/* The layer context (layers.h): the rows of this rank, the row pieces of
 * its runs of positions, the groups, the scratch tensors every layer shares,
 * and the micro-batch's inputs. */
#include <math.h>
#include <string.h>

#include "layer_util.h"
#include "train/params_internal.h"
#include "starweave/mesh.h"
#include "starweave/runtime.h"

/* ------------------------------------------------------------- context */

struct sw_scratch {
    sw_tensor *t;
    int keep;                /* not invalidated at the end of a step */
    struct sw_scratch *next;
};

/* Positions of ring rank rr's block, in ring-block order: zigzag chunks
 * rr and 2R - 1 - rr of 2R, or block rr of R. Returns the number of runs. */
int sw_ctx_ring_runs(const sw_ctx *x, int rr, int64_t p0[2], int64_t n[2])
{
    int64_t s = x->c.seq;
    if (x->zigzag) {
        int64_t c = s / (2 * x->ring);
        p0[0] = rr * c, p0[1] = (2 * x->ring - 1 - rr) * c, n[0] = n[1] = c;
        return 2;
    }
    p0[0] = rr * (s / x->ring), n[0] = s / x->ring;
    return 1;
}

/* This rank's positions: piece ur of U of its ring block, as runs of
 * consecutive global positions; and the row pieces of the T rows (k = 0)
 * and of the local residual rows (k = 1, from T row row0): the P row tiles,
 * cut where a run ends, each with what its position-dependent ops need. */
static void position_runs(sw_ctx *x)
{
    int64_t rp[2], rn[2], S = x->c.seq / (x->ulysses * x->ring), lo = x->ulysses_rank * S, at = 0;
    int nr = sw_ctx_ring_runs(x, x->ring_rank, rp, rn);
    for (int k = 0; k < nr; at += rn[k++]) {
        int64_t a = at > lo ? at : lo, b = at + rn[k] < lo + S ? at + rn[k] : lo + S;
        if (a >= b) continue;
        x->lr_i0[x->nruns] = a - lo, x->lr_p0[x->nruns] = rp[k] + a - at, x->lr_n[x->nruns++] = b - a;
    }
    for (int k = 0; k < 2; k++) {
        int64_t n = k ? x->resid_rows : x->tokens, off = k ? x->row0 : 0;
        x->pc_size[k] = sw_xcalloc((size_t)x->row_tiles + 1, sizeof(int64_t));
        x->pc_key[k] = sw_xcalloc((size_t)x->row_tiles + 1, sizeof(int64_t));
        x->pc_off[k] = sw_xcalloc((size_t)x->row_tiles + 1, sizeof(int64_t));
        x->pc_pos[k] = sw_xcalloc((size_t)x->row_tiles + 1, sizeof(int64_t));
        for (int i = 0; i < x->row_tiles; i++) {
            int64_t first, count;
            sw_tile_range(n, x->row_tiles, i, &first, &count);
            for (int64_t r = off + first, end = r + count; r < end;) {
                int j = 0;
                while (j + 1 < x->nruns && r >= x->lr_i0[j + 1] * x->B) j++;
                int64_t run0 = x->lr_i0[j] * x->B, run_end = run0 + x->lr_n[j] * x->B;
                int64_t len = (end < run_end ? end : run_end) - r, pi = x->npieces[k]++;
                x->pc_size[k][pi] = len;
                x->pc_off[k][pi] = r - run0;
                x->pc_pos[k][pi] = x->lr_p0[j];
                x->pc_key[k][pi] = x->lr_p0[j] * x->B + r - run0; /* row in the [s, b] rows of the whole sequence */
                r += len;
            }
        }
    }
}

int sw_ctx_config_check(const sw_ctx_config *c, char *msg, size_t n)
{
    SW_RULE(c->seq > 0 && c->batch > 0, "seq (%d) and batch (%d) must be positive", c->seq, c->batch);
    SW_RULE(c->tp > 0 && c->ulysses > 0 && c->ring > 0 && c->dp > 0 && c->grad_accum > 0,
         "tp, ulysses, ring, dp and grad-accum must be at least 1 (%d, %d, %d, %d, %d)", c->tp, c->ulysses, c->ring,
         c->dp, c->grad_accum);
    int cp = c->ulysses * c->ring;
    SW_RULE(!(c->ring > 1 && c->zigzag) || c->seq % (2 * cp) == 0,
         "seq (%d) must be divisible by 2*ring*ulysses (2*%d*%d) with zigzag", c->seq, c->ring, c->ulysses);
    SW_RULE(c->seq % cp == 0, "seq (%d) must be divisible by ring*ulysses (%d*%d)", c->seq, c->ring, c->ulysses);
    SW_RULE(!c->sp || (c->seq / cp) % c->tp == 0,
         "seq/(ulysses*ring) (%d) must be divisible by tp (%d) with sequence parallelism", c->seq / cp, c->tp);
    SW_RULE(c->batch % (c->dp * c->grad_accum) == 0, "batch (%d) must be divisible by dp*grad-accum (%d*%d)", c->batch,
         c->dp, c->grad_accum);
    SW_RULE(!c->tp_recompute_allgather || c->sp, "tp-recompute-allgather needs sequence parallelism (--sp)");
    SW_RULE(c->dropout >= 0.0f && c->dropout < 1.0f, "dropout must be in [0, 1) (dropout = %g)", c->dropout);
    int rows = c->seq / cp * (c->batch / (c->dp * c->grad_accum)) / (c->sp ? c->tp : 1);
    SW_RULE(c->tiles > 0 && c->tiles <= rows, "tiles (%d) must be in 1 .. the rows of a rank (%d)", c->tiles, rows);
    return 0;
}

void sw_ctx_config_default(sw_ctx_config *c)
{
    memset(c, 0, sizeof *c);
    c->tp = c->ulysses = c->ring = c->dp = c->grad_accum = c->tiles = 1;
}

/* The registry against the first context given it (layers.h, sw_ctx_init):
 * the gradient group the context's, grad_accum, tiles and seed given once
 * (0 in the registry: the context's) or equal. Later contexts on the same
 * registry (generation's decode steps: other rows, one micro-batch) are
 * not the training step's and are not checked. */
static void bind_params(const sw_ctx *x, sw_params *p)
{
    sw_params_config *pc = &p->c;
    if (p->bound) return;
    p->bound = 1;
    if (pc->grad_group != x->grad_group)
        sw_usage_error("sw_ctx_init: sw_params_config.grad_group (%s) must be the context's gradient group, %s "
                       "(dp without ulysses and ring, sp_dp with them: sw_ctx.grad_group)",
                       sw_group_name(pc->grad_group), sw_group_name(x->grad_group));
    const struct { const char *name; long long ctx, *reg; } same[] = {
        {"grad_accum", x->c.grad_accum, NULL}, {"tiles", x->c.tiles, NULL}, {"seed", (long long)x->c.seed, NULL}};
    long long reg[3] = {pc->grad_accum, pc->tiles, (long long)pc->seed};
    for (int i = 0; i < 3; i++)
        if (reg[i] != 0 && reg[i] != same[i].ctx)
            sw_usage_error("sw_ctx_init: %s: sw_params_config's (%lld) must equal sw_ctx_config's (%lld), or be 0 "
                           "(the context's)", same[i].name, reg[i], same[i].ctx);
    if (!pc->grad_accum) pc->grad_accum = x->c.grad_accum;
    if (!pc->tiles) pc->tiles = x->c.tiles;
    if (!pc->seed) pc->seed = x->c.seed;
}

void sw_ctx_init(sw_ctx *x, const sw_ctx_config *c, sw_comm *comm, sw_params *params)
{
    char msg[256];
    sw_check_ptr("sw_ctx_init", "c", c);
    if (sw_ctx_config_check(c, msg, sizeof msg) != 0) sw_usage_error("%s", msg);
    memset(x, 0, sizeof *x);
    x->c = *c;
    x->comm = comm;
    x->params = params;
    const sw_mesh *mesh = comm ? sw_comm_mesh(comm) : NULL;
    static const struct { sw_group g; const char *name; } degrees[] = {
        {SW_GROUP_TP, "tp"}, {SW_GROUP_ULYSSES, "ulysses"}, {SW_GROUP_RING, "ring"}, {SW_GROUP_DP, "dp"}};
    const int want[] = {c->tp, c->ulysses, c->ring, c->dp};
    for (int i = 0; i < 4; i++) {
        int have = mesh ? sw_mesh_size(mesh, degrees[i].g) : 1;
        if (have != want[i])
            sw_usage_error("%s (%d) must equal the %s degree of the mesh (%d)", degrees[i].name, want[i],
                           degrees[i].name, have);
    }
    x->tp = (sw_tp){c->tp > 1 ? comm : NULL, c->tp, mesh ? sw_mesh_rank(mesh, SW_GROUP_TP) : 0, c->sp};
    x->dp_rank = mesh ? sw_mesh_rank(mesh, SW_GROUP_DP) : 0;
    x->ulysses = c->ulysses, x->ring = c->ring, x->zigzag = c->ring > 1 && c->zigzag;
    x->ulysses_rank = mesh ? sw_mesh_rank(mesh, SW_GROUP_ULYSSES) : 0;
    x->ring_rank = mesh ? sw_mesh_rank(mesh, SW_GROUP_RING) : 0;
    x->grad_group = x->ulysses * x->ring > 1 ? SW_GROUP_SP_DP : SW_GROUP_DP;
    x->grad_size = c->dp * x->ulysses * x->ring;
    x->grad_rank = mesh ? sw_mesh_rank(mesh, x->grad_group) : 0;
    x->B = c->batch / (c->dp * c->grad_accum);
    x->tokens = c->seq / (x->ulysses * x->ring) * x->B;
    x->resid_rows = c->sp ? x->tokens / c->tp : x->tokens;
    x->row0 = c->sp ? x->tp.rank * x->resid_rows : 0;
    x->attn_rows = x->ulysses * x->tokens;
    x->row_tiles = c->tiles;
    x->col_tiles = c->col_tiles > 0 ? c->col_tiles : c->tiles;
    position_runs(x);
    if (params) bind_params(x, params);
    x->log = sw_xcalloc(1, sizeof *x->log);
}

void sw_ctx_destroy(sw_ctx *x)
{
    for (struct sw_scratch *s = x->scratch, *next; s; s = next) {
        next = s->next;
        sw_tensor_free(s->t);
        free(s);
    }
    for (int k = 0; k < 2; k++) {
        free(x->pc_size[k]);
        free(x->pc_key[k]);
        free(x->pc_off[k]);
        free(x->pc_pos[k]);
    }
    free(x->key_len);
    if (x->log) free(x->log->rows);
    free(x->log);
    memset(x, 0, sizeof *x);
}

sw_tensor *sw_scratch_typed(sw_ctx *x, const char *name, sw_dtype dt, int64_t rows, int64_t cols, int keep)
{
    for (struct sw_scratch *s = x->scratch; s; s = s->next)
        if (!strcmp(s->t->name, name) && s->t->dtype == dt && s->t->rows == rows && s->t->cols == cols) return s->t;
    struct sw_scratch *s = sw_xcalloc(1, sizeof *s);
    s->t = sw_tensor_new2d(name, dt, rows, cols);
    s->keep = keep;
    s->next = x->scratch;
    x->scratch = s;
    return s->t;
}

int sw_is_scratch(const sw_ctx *x, const sw_tensor *t)
{
    for (const struct sw_scratch *s = x->scratch; s; s = s->next)
        if (s->t == t) return 1;
    return 0;
}

sw_tensor *sw_scratch_keep(sw_ctx *x, const char *name, int64_t rows, int64_t cols, int keep)
{
    return sw_scratch_typed(x, name, SW_F32, rows, cols, keep);
}

sw_tensor *sw_scratch(sw_ctx *x, const char *name, int64_t rows, int64_t cols)
{
    return sw_scratch_keep(x, name, rows, cols, 0);
}

void sw_scratch_invalidate(sw_ctx *x)
{
    for (struct sw_scratch *s = x->scratch; s; s = s->next)
        if (!s->keep) sw_tensor_invalidate(s->t);
}

double sw_scratch_bytes(const sw_ctx *x)
{
    double bytes = 0;
    for (const struct sw_scratch *s = x->scratch; s; s = s->next)
        bytes += (double)(s->t->rows * s->t->cols) * sw_dtype_size(s->t->dtype);
    return bytes;
}

int64_t sw_ctx_position(const sw_ctx *x, int64_t i)
{
    int j = 0;
    while (j + 1 < x->nruns && i >= x->lr_i0[j + 1]) j++;
    return x->lr_p0[j] + i - x->lr_i0[j];
}

void sw_ctx_set_first_position(sw_ctx *x, int64_t pos)
{
    sw_check_ptr("sw_ctx_set_first_position", "x", x);
    if (x->ulysses * x->ring > 1 || x->c.sp || x->nruns != 1 || pos < 0)
        sw_usage_error("sw_ctx_set_first_position: a context whose rank holds whole sequences (ulysses %d, ring %d, "
                       "sp %d) and a position >= 0 (%lld)", x->ulysses, x->ring, x->c.sp, (long long)pos);
    const int64_t delta = pos - x->lr_p0[0];
    x->lr_p0[0] = pos;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < x->npieces[k]; i++) x->pc_pos[k][i] += delta, x->pc_key[k][i] += delta * x->B;
}

int sw_ctx_micro_batch_first(const sw_ctx *x, int k) { return (x->dp_rank * x->c.grad_accum + k) * x->B; }

void sw_ctx_set_micro_batch(sw_ctx *x, int k)
{
    if (k < 0 || k >= x->c.grad_accum) sw_fail(__FILE__, __LINE__, "sw_ctx_set_micro_batch: k out of range", -22);
    x->micro = k;
}

void sw_ctx_load_tokens(sw_ctx *x, int k, const int32_t *tok, const int32_t *tgt, sw_tensor *tokens,
                        sw_tensor *targets)
{
    if (!tok || !tokens) sw_usage_error("sw_ctx_load_tokens: %s: must not be NULL", tok ? "tokens" : "tok");
    if (!tgt != !targets)
        sw_usage_error("sw_ctx_load_tokens: tgt and targets: both or neither (no targets: a model without them)");
    sw_check_tensor("sw_ctx_load_tokens", "tokens", tokens, x->tokens, 1);
    if (targets) sw_check_tensor("sw_ctx_load_tokens", "targets", targets, x->tokens, 1);
    int64_t n = x->tokens, B = x->B, first = sw_ctx_micro_batch_first(x, k);
    int32_t *mt = sw_xcalloc((size_t)n, sizeof(int32_t)), *mg = sw_xcalloc((size_t)n, sizeof(int32_t));
    for (int64_t i = 0; i < n / B; i++) /* this rank's positions */
        for (int64_t b = 0, pos = sw_ctx_position(x, i); b < B; b++) {
            mt[i * B + b] = tok[pos * x->c.batch + first + b];
            if (tgt) mg[i * B + b] = tgt[pos * x->c.batch + first + b];
        }
    sw_tensor_write_host(tokens, mt);
    if (targets) sw_tensor_write_host(targets, mg);
    free(mt);
    free(mg);
    sw_ctx_set_micro_batch(x, k);
}

void sw_ctx_load_key_lengths(sw_ctx *x, int k, const int32_t *len)
{
    static const char *fn = "sw_ctx_load_key_lengths";
    if (!len) sw_usage_error("%s: len: must not be NULL", fn);
    if (k < 0 || k >= x->c.grad_accum)
        sw_usage_error("%s: k: must be in 0 .. grad-accum - 1 (%d, %d)", fn, k, x->c.grad_accum);
    for (int b = 0; b < x->c.batch; b++)
        if (len[b] < 1 || len[b] > x->c.seq)
            sw_usage_error("%s: len: every length must be in [1, seq] (len[%d] = %d, seq %d)", fn, b, (int)len[b],
                           x->c.seq);
    if (!x->key_len) x->key_len = sw_xcalloc((size_t)x->c.grad_accum * (size_t)x->B, sizeof(int32_t));
    memcpy(x->key_len + (size_t)k * x->B, len + sw_ctx_micro_batch_first(x, k), sizeof(int32_t) * (size_t)x->B);
}

sw_rng_key sw_ctx_drop_key(const sw_ctx *x, int step, unsigned layer, unsigned op, int i, int64_t cols)
{
    sw_rng_key k = {x->c.seed, (uint32_t)step, (uint16_t)layer, (uint16_t)op, x->pc_key[1][i], 0, cols, 0, 0, 0};
    batch_of_key(x, &k);
    return k;
}

/* They are the row tiles unless a tile holds two runs of positions (zigzag). */
starpu_data_handle_t sw_ctx_piece(const sw_ctx *x, int k, sw_tensor *t, int i, enum starpu_data_access_mode mode)
{
    if (x->npieces[k] == x->row_tiles) return sw_tensor_tiles(t, SW_ROWS, x->row_tiles, mode)[i];
    return sw_tensor_split(t, SW_ROWS, x->npieces[k], x->pc_size[k], mode)[i];
}
