/* The attention layer: local, Ulysses, Ring (zigzag) and USP as one layer
 * whose parallel mode comes from the context (see layers.h). */
#include <math.h>
#include <string.h>

#include "layer_util.h"
#include "starweave/blocks.h"
#include "starweave/runtime.h"

struct sw_attention {
    sw_attention_config c;
    int aq, ak, kv0, d;     /* local query heads, local K/V heads, first global K/V head, head dim */
    int hq, hk;             /* attention-space heads: aq/U, ak/U */
    int kv_replicated;      /* K/V heads replicated over tp / kv_heads ranks */
    int G, Gk;              /* attention tasks per run (query-head groups) and K/V column tiles */
    int64_t *qkv_sizes;     /* G + 2 Gk column sizes of qkv_u: q groups | k tiles | v tiles */
    int nqkv;               /* column blocks of the QKV GEMM: G + 2 Gk, or 3 U with Ulysses */
    int64_t *gemm_sizes;    /* their sizes (qkv_sizes, or q | k | v heads of each Ulysses member) */
    sw_ctx *x;
    double flops;           /* attention FLOPs of the last forward */
};

/* first global K/V head used by TP rank r, and how many it holds */
static void kv_range(const sw_attention_config *c, int t, int r, int *kv0, int *ak)
{
    int aq = c->heads / t;
    if (c->kv_heads >= t) *ak = c->kv_heads / t, *kv0 = r * *ak;
    else *ak = 1, *kv0 = r * aq / (c->heads / c->kv_heads); /* replicated: the head of my query heads */
}

/* Attention tasks: G query-head groups, G the largest divisor of the
 * attention-space query heads not above the number of tiles such that every
 * group reads one K/V column tile (G divides the K/V heads, or they divide
 * G). The QKV GEMM writes the G + 2 Gk column blocks, or with Ulysses the
 * q, k and v heads of each member (the all-to-all's parts). */
sw_attention *sw_attention_create(sw_ctx *x, const sw_attention_config *c)
{
    if (c->key_padding && x->B > SW_ATTN_MAX_SEQS)
        sw_usage_error("sw_attention_create: key_padding: sequences per micro-batch must be at most "
                       "SW_ATTN_MAX_SEQS (%d, %d)", x->B, SW_ATTN_MAX_SEQS);
    sw_attention *a = sw_xcalloc(1, sizeof *a);
    a->c = *c;
    if (a->c.kv_heads == 0) a->c.kv_heads = c->heads;
    a->x = x;
    int t = x->tp.t, U = x->ulysses;
    a->d = c->head_dim;
    a->aq = c->heads / t;
    kv_range(&a->c, t, x->tp.rank, &a->kv0, &a->ak);
    a->kv_replicated = a->c.kv_heads < t;
    a->hq = a->aq / U, a->hk = a->ak / U;
    int g = x->row_tiles < a->hq ? x->row_tiles : a->hq;
    while (a->hq % g || (a->hk % g && g % a->hk)) g--;
    a->G = g;
    a->Gk = g < a->hk ? g : a->hk;
    a->qkv_sizes = sw_xcalloc((size_t)(a->G + 2 * a->Gk), sizeof(int64_t));
    for (int i = 0; i < a->G; i++) a->qkv_sizes[i] = (int64_t)a->hq * a->d / a->G;
    for (int i = 0; i < 2 * a->Gk; i++) a->qkv_sizes[a->G + i] = (int64_t)a->hk * a->d / a->Gk;
    a->nqkv = U > 1 ? 3 * U : a->G + 2 * a->Gk;
    a->gemm_sizes = sw_xcalloc((size_t)a->nqkv, sizeof(int64_t));
    for (int i = 0; i < a->nqkv; i++)
        a->gemm_sizes[i] = U == 1 ? a->qkv_sizes[i] : (int64_t)(i < U ? a->hq : a->hk) * a->d;
    return a;
}

void sw_attention_destroy(sw_attention *a)
{
    if (!a) return;
    free(a->qkv_sizes);
    free(a->gemm_sizes);
    free(a);
}

sw_slice sw_attention_qkv_slice(const sw_attention *a, int dim)
{
    sw_slice s = {0, 0, {0}, {0}, {0}};
    int t = a->x->tp.t, r = a->x->tp.rank;
    if (t == 1) return s;
    int64_t d = a->d, h = (int64_t)a->c.heads * d, kvd = (int64_t)a->c.kv_heads * d;
    int kv_share = a->kv_replicated ? t / a->c.kv_heads : 1; /* the ranks sharing this rank's K/V head */
    return (sw_slice){3, dim, {r * a->aq * d, h + a->kv0 * d, h + kvd + a->kv0 * d}, {a->aq * d, a->ak * d, a->ak * d},
                      {1, kv_share, kv_share}};
}

int sw_attention_qkv_tiles(const sw_attention *a, const int64_t **sizes)
{
    *sizes = a->gemm_sizes;
    return a->nqkv;
}

void sw_attention_config_default(sw_attention_config *c)
{
    sw_check_ptr("sw_attention_config_default", "c", c);
    memset(c, 0, sizeof *c);
}

sw_linear sw_attention_qkv_add(sw_ctx *x, const sw_attention *a, const char *name, int64_t in, int bias, float std)
{
    sw_check_ptr("sw_attention_qkv_add", "x", x);
    sw_check_ptr("sw_attention_qkv_add", "a", a);
    if (a->x != x) sw_usage_error("sw_attention_qkv_add: x: must be the attention's context");
    sw_slice s = sw_attention_qkv_slice(a, 0);
    const int64_t *sizes;
    int n = sw_attention_qkv_tiles(a, &sizes);
    return sw_linear_add(x, name, SW_LINEAR_COLUMN, in, (int64_t)(a->c.heads + 2 * a->c.kv_heads) * a->d, bias, std,
                         &s, n, sizes);
}

/* a slice as blocks of rows of [rows, *]: a replicated one as one block of all */
static int slice_blocks(const sw_slice *s, int64_t rows, int64_t start[3], int64_t count[3], int share[3])
{
    if (s->n == 0) {
        start[0] = 0, count[0] = rows, share[0] = 1;
        return 1;
    }
    for (int i = 0; i < s->n && i < 3; i++) start[i] = s->start[i], count[i] = s->count[i], share[i] = s->share[i] > 1 ? s->share[i] : 1;
    return s->n;
}

/* "rows [a, b) [c, d) ..." of a slice */
static void slice_text(char *buf, size_t n, const sw_slice *s, int64_t rows)
{
    int64_t st[3], ct[3];
    int sh[3], k = slice_blocks(s, rows, st, ct, sh);
    int w = snprintf(buf, n, "rows");
    for (int i = 0; i < k && w > 0 && (size_t)w < n; i++)
        w += snprintf(buf + w, n - (size_t)w, " [%lld, %lld)", (long long)st[i], (long long)(st[i] + ct[i]));
}

/* The QKV linear l against the attention (layers.h, sw_attention_qkv_add):
 * a column-parallel linear of the attention's slice (its q, k and v heads
 * on this TP rank) and output tiles; exit 2 otherwise. */
static void check_qkv(const char *fn, const sw_ctx *x, const sw_attention *a, const sw_linear *l)
{
    sw_check_ptr(fn, "qkv", l);
    if (l->w < 0 || l->w >= sw_params_count(x->params))
        sw_usage_error("%s: qkv: parameter index %d is out of range [0, %d)", fn, l->w, sw_params_count(x->params));
    const sw_param_desc *d = sw_params_desc(x->params, l->w);
    sw_slice want = sw_attention_qkv_slice(a, 0);
    int64_t rows = (int64_t)(a->c.heads + 2 * a->c.kv_heads) * a->d;
    int64_t s1[3], c1[3], s2[3], c2[3];
    int h1[3], h2[3];
    int n1 = l->mode == SW_LINEAR_COLUMN && d->rows == rows ? slice_blocks(&d->slice, rows, s1, c1, h1) : -1;
    int n2 = slice_blocks(&want, rows, s2, c2, h2), same = n1 == n2 && (n1 == 1 || d->slice.dim == 0);
    for (int i = 0; same && i < n2; i++) same = s1[i] == s2[i] && c1[i] == c2[i] && h1[i] == h2[i];
    if (!same) {
        char got[160], exp[160];
        slice_text(got, sizeof got, &d->slice, d->rows);
        slice_text(exp, sizeof exp, &want, rows);
        sw_usage_error("%s: the QKV linear %s must be registered with the attention's slice and tiles "
                       "(sw_attention_qkv_add): this TP rank's q, k and v heads are %s of its [%lld, %lld] weight, "
                       "%s holds %s", fn, d->name, exp, (long long)rows, (long long)d->cols, d->name, got);
    }
    const int64_t *sizes;
    int n = sw_attention_qkv_tiles(a, &sizes), tiles_same = l->n == n;
    int64_t cols = sw_attention_qkv_cols(a);
    for (int i = 0; tiles_same && i < n; i++) { /* sized, or StarPU's equal split (tensor.h) */
        int64_t first = 0, count = l->sized ? l->sizes[i] : 0;
        if (!l->sized) sw_tile_range(cols, n, i, &first, &count);
        tiles_same = count == sizes[i];
    }
    if (!tiles_same)
        sw_usage_error("%s: the QKV linear %s must be registered with the attention's slice and tiles "
                       "(sw_attention_qkv_add): its output has %d column tiles, the attention's %d "
                       "(sw_attention_qkv_tiles)", fn, d->name, l->n, n);
}

int64_t sw_attention_qkv_cols(const sw_attention *a) { return (int64_t)(a->aq + 2 * a->ak) * a->d; }
int64_t sw_attention_out_cols(const sw_attention *a) { return (int64_t)a->aq * a->d; }
double sw_attention_flops(const sw_attention *a) { return a->flops; }

void sw_attention_keep(sw_attention *a, sw_saved *s, sw_attn_saved *k)
{
    const sw_ctx *x = a->x;
    memset(k, 0, sizeof *k);
    /* with Ulysses the QKV GEMM writes a shared scratch, sent to the head split qkv_u */
    k->qkv = x->ulysses > 1 ? sw_scratch_keep(a->x, "qkv", x->tokens, sw_attention_qkv_cols(a), 1)
                      : sw_saved_new(s, "qkv", x->tokens, sw_attention_qkv_cols(a));
    k->qkv_u = x->ulysses > 1 ? sw_saved_new(s, "qkv_u", x->attn_rows, (int64_t)(a->hq + 2 * a->hk) * a->d) : k->qkv;
    k->att = sw_saved_new(s, "att", x->tokens, sw_attention_out_cols(a));
    k->att_u = x->ulysses > 1 ? sw_saved_new(s, "att_u", x->attn_rows, (int64_t)a->hq * a->d) : k->att;
    k->lse = sw_saved_new(s, "lse", x->attn_rows, a->hq);
    if (a->c.keep_probs) /* ring = 1: the attention space holds the whole sequence */
        k->probs = sw_saved_new(s, "probs", (int64_t)x->attn_rows * a->hq, x->c.seq);
}

/* Attention task arguments for query-head group `group` of the attention
 * space: sq query rows from position q_pos0 against sk key rows from k_pos0
 * (per batch element). */
static sw_attn_args attn_args(const sw_attention *a, int step, int layer, int group, int64_t q_pos0, int64_t sq,
                              int64_t k_pos0, int64_t sk)
{
    const sw_ctx *x = a->x;
    sw_attn_args r;
    memset(&r, 0, sizeof r);
    r.batch = x->B;
    r.nh = a->hq / a->G;
    r.nkv = a->hk / a->Gk;
    r.d = a->d;
    r.sq = (int)sq, r.sk = (int)sk;
    r.q_pos0 = q_pos0, r.k_pos0 = k_pos0;
    r.causal = a->c.causal;
    r.scale = 1.0f / sqrtf((float)r.d);
    r.dropout = a->c.dropout;
    r.key = (sw_rng_key){x->c.seed, (uint32_t)step, (uint16_t)layer, SW_DROP_ATTN_PROBS, 0, 0,
                         (int64_t)a->c.heads * a->d, 0, 0, 0};
    batch_of_key(x, &r.key);
    r.head0 = x->tp.rank * a->aq + x->ulysses_rank * a->hq + group * r.nh;
    r.heads_total = a->c.heads;
    r.seq_total = x->c.seq;
    if (a->c.key_padding) { /* the current micro-batch's sequences, whatever positions the tile holds */
        const int32_t *len = x->key_len ? x->key_len + (size_t)x->micro * x->B : NULL;
        if (!len || len[0] < 1)
            sw_usage_error("sw_attention: key_padding: the key lengths of micro-batch %d must be loaded "
                           "(sw_ctx_load_key_lengths) before its step is submitted", x->micro);
        r.key_padding = 1;
        memcpy(r.key_len, len, sizeof(int32_t) * (size_t)x->B);
    }
    return r;
}

/* Ulysses all-to-all between the sequence-split qkv [T,(aq+2ak)d] (column
 * blocks: the q heads of each member, then their k, then their v heads)
 * and the head-split qkv_u [U T,(hq+2hk)d] (row block j from member j,
 * columns q | k | v): to_heads 1 forward, 0 for the gradients. */
static void ulysses_qkv(const sw_attention *a, sw_tensor *seq_split, sw_tensor *head_split, int to_heads)
{
    const sw_ctx *x = a->x;
    int U = x->ulysses;
    int64_t hs[3] = {(int64_t)a->hq * a->d, (int64_t)a->hk * a->d, (int64_t)a->hk * a->d};
    starpu_data_handle_t *cols = sw_tensor_split(seq_split, SW_COLS, 3 * U, a->gemm_sizes, to_heads ? STARPU_R : STARPU_W);
    starpu_data_handle_t *rows = sw_tensor_grid(head_split, U, NULL, 3, hs, to_heads ? STARPU_W : STARPU_R);
    starpu_data_handle_t *s = sw_xcalloc(3 * (size_t)U, sizeof *s);
    for (int j = 0; j < U; j++)
        for (int k = 0; k < 3; k++) s[j * 3 + k] = cols[k * U + j]; /* member j's q, k, v heads */
    if (to_heads) sw_alltoall_parts(x->comm, SW_GROUP_ULYSSES, 3, s, rows);
    else sw_alltoall_parts(x->comm, SW_GROUP_ULYSSES, 3, rows, s);
    free(s);
}

/* Ulysses all-to-all of the attention output [U T, hq d] <-> [T, aq d]
 * (row block j <-> column block j of member j) */
static void ulysses_out(const sw_ctx *x, sw_tensor *head_split, sw_tensor *seq_split, int to_seq)
{
    int U = x->ulysses;
    starpu_data_handle_t *rows = sw_tensor_tiles(head_split, SW_ROWS, U, to_seq ? STARPU_R : STARPU_W);
    starpu_data_handle_t *cols = sw_tensor_tiles(seq_split, SW_COLS, U, to_seq ? STARPU_W : STARPU_R);
    if (to_seq) sw_alltoall_parts(x->comm, SW_GROUP_ULYSSES, 1, rows, cols);
    else sw_alltoall_parts(x->comm, SW_GROUP_ULYSSES, 1, cols, rows);
}

/* the ring's double-buffered K/V blocks and their gradients, [Tr, 2 hk d] */
static sw_tensor *kv_buffer(const sw_attention *a, int grad, int i)
{
    static const char *names[2][2] = {{"kv_block0", "kv_block1"}, {"dkv_block0", "dkv_block1"}};
    return sw_scratch_keep(a->x, names[grad][i], a->x->attn_rows, 2 * (int64_t)a->hk * a->d, 1);
}

/* The K/V blocks of ring step s (the block of ring rank rr - s): 0 the
 * rank's own (columns of qkv_u), else the ring buffer s % 2. */
static starpu_data_handle_t kv_block(const sw_attention *a, sw_tensor *qkv_u, int s)
{
    int64_t split[2] = {(int64_t)a->hq * a->d, 2 * (int64_t)a->hk * a->d};
    if (s == 0) return sw_tensor_split(qkv_u, SW_COLS, 2, split, STARPU_R)[1];
    return whole_r(kv_buffer(a, 0, s % 2));
}

/* Tile pairs (query run a, key run b) of a ring step, in submission order:
 * the diagonal ones first (at step 0 those of the rank's own positions), so
 * that the first tile touching a query run's output (or a key run's
 * gradient) is the one that writes it. */
static int ring_pairs(int nq, int pa[4], int pb[4])
{
    int n = 0;
    for (int a = 0; a < nq; a++) pa[n] = a, pb[n++] = a;
    for (int a = 0; a < nq; a++)
        for (int b = 0; b < nq; b++)
            if (a != b) pa[n] = a, pb[n++] = b;
    return n;
}

/* a tile is skipped when causal and every key comes after every query */
static int masked(const sw_attention *a, int64_t qp, int64_t qn, int64_t kp) { return a->c.causal && kp > qp + qn - 1; }

/* Attention in the attention space, qkv_u -> o [Tr, hq d], lse [Tr, hq]:
 * Ring attention over the ring group (R steps; the K/V block of step s + 1
 * travels while step s computes, double-buffered; partial outputs merged by
 * log-sum-exp), one task per (query run, key run, head group), fully
 * masked tiles skipped. R = 1: one step on the rank's own K/V. */
static void ring_forward(sw_attention *A, int step, int layer, sw_tensor *qkv_u, sw_tensor *o, sw_tensor *lse,
                         sw_tensor *probs)
{
    const sw_ctx *x = A->x;
    int G = A->G, Gk = A->Gk, ncol = G + 2 * Gk, R = x->ring;
    int64_t qp[2] = {0, 0}, qn[2] = {0, 0}, kp[2] = {0, 0}, kn[2] = {0, 0};
    int nq = sw_ctx_ring_runs(x, x->ring_rank, qp, qn);
    int64_t rs[2] = {qn[0] * x->B, qn[1] * x->B};
    int written[2] = {0, 0}, pa[4], pb[4];
    A->flops = 0;
    for (int s = 0; s < R; s++) {
        if (s + 1 < R) /* the next block travels while this one is used */
            sw_ring_shift_handles(x->comm, SW_GROUP_RING, kv_block(A, qkv_u, s),
                                  sw_tensor_whole(kv_buffer(A, 0, (s + 1) % 2), STARPU_W), 1);
        sw_ctx_ring_runs(x, (x->ring_rank - s + R) % R, kp, kn);
        starpu_data_handle_t *Q = sw_tensor_grid(qkv_u, nq, rs, ncol, A->qkv_sizes, STARPU_R);
        starpu_data_handle_t *KV =
            s == 0 ? Q + G : sw_tensor_grid(kv_buffer(A, 0, s % 2), nq, rs, 2 * Gk, A->qkv_sizes + G, STARPU_R);
        int kstride = s == 0 ? ncol : 2 * Gk;
        int np = ring_pairs(nq, pa, pb);
        for (int t = 0; t < np; t++) {
            int a = pa[t], b = pb[t];
            if (masked(A, qp[a], qn[a], kp[b])) continue;
            A->flops += 4.0 * x->B * A->hq * A->d * sw_attn_visible_pairs(qp[a], qn[a], kp[b], kn[b], A->c.causal);
            starpu_data_handle_t *O = sw_tensor_grid(o, nq, rs, G, NULL, STARPU_RW);
            starpu_data_handle_t *L = sw_tensor_grid(lse, nq, rs, G, NULL, STARPU_RW);
            for (int g = 0; g < G; g++) {
                int kv = g * Gk / G;
                sw_attn_args at = attn_args(A, step, layer, g, qp[a], qn[a], kp[b], kn[b]);
                at.merge = written[a];
                if (probs) /* recompute none (R = 1): the probabilities kept for backward */
                    sw_attn_probs_fwd(Q[a * ncol + g], KV[b * kstride + kv], KV[b * kstride + Gk + kv], O[a * G + g],
                                      L[a * G + g], sw_tensor_tiles(probs, SW_ROWS, G, STARPU_W)[g], &at);
                else
                    sw_attn_fwd(Q[a * ncol + g], KV[b * kstride + kv], KV[b * kstride + Gk + kv], O[a * G + g],
                                L[a * G + g], &at);
            }
            written[a] = 1;
        }
    }
}

/* Backward of ring_forward: dq accumulates here (columns of dqkv_u); the
 * gradient of each K/V block travels around the ring with the block
 * (dkv buffers), gathering every rank's contribution, and comes back to
 * its owner after R shifts, into dqkv_u's k | v columns. */
static void ring_backward(sw_attention *A, int step, int layer, sw_tensor *qkv_u, sw_tensor *o, sw_tensor *lse,
                          sw_tensor *probs, sw_tensor *dout, sw_tensor *dqkv_u)
{
    const sw_ctx *x = A->x;
    int G = A->G, Gk = A->Gk, ncol = G + 2 * Gk, R = x->ring;
    int64_t qp[2] = {0, 0}, qn[2] = {0, 0}, kp[2] = {0, 0}, kn[2] = {0, 0};
    int64_t split[2] = {(int64_t)A->hq * A->d, 2 * (int64_t)A->hk * A->d};
    int nq = sw_ctx_ring_runs(x, x->ring_rank, qp, qn);
    int64_t rs[2] = {qn[0] * x->B, qn[1] * x->B};
    int dq_done[2] = {0, 0}, pa[4], pb[4];
    for (int s = 0; s < R; s++) {
        if (s + 1 < R)
            sw_ring_shift_handles(x->comm, SW_GROUP_RING, kv_block(A, qkv_u, s),
                                  sw_tensor_whole(kv_buffer(A, 0, (s + 1) % 2), STARPU_W), 1);
        sw_ctx_ring_runs(x, (x->ring_rank - s + R) % R, kp, kn);
        starpu_data_handle_t *Q = sw_tensor_grid(qkv_u, nq, rs, ncol, A->qkv_sizes, STARPU_R);
        starpu_data_handle_t *KV =
            s == 0 ? Q + G : sw_tensor_grid(kv_buffer(A, 0, s % 2), nq, rs, 2 * Gk, A->qkv_sizes + G, STARPU_R);
        int kstride = s == 0 ? ncol : 2 * Gk;
        /* the block's gradient: written at the owner (step 0), accumulated on the way */
        starpu_data_handle_t *dKV =
            R > 1 ? sw_tensor_grid(kv_buffer(A, 1, s % 2), nq, rs, 2 * Gk, A->qkv_sizes + G, STARPU_RW) : NULL;
        int dstride = R == 1 ? ncol : 2 * Gk, dkv_done[2] = {s > 0, s > 0};
        int np = ring_pairs(nq, pa, pb);
        for (int t = 0; t < np; t++) {
            int a = pa[t], b = pb[t];
            if (masked(A, qp[a], qn[a], kp[b])) continue;
            starpu_data_handle_t *O = sw_tensor_grid(o, nq, rs, G, NULL, STARPU_R);
            starpu_data_handle_t *L = sw_tensor_grid(lse, nq, rs, G, NULL, STARPU_R);
            starpu_data_handle_t *dO = sw_tensor_grid(dout, nq, rs, G, NULL, STARPU_R);
            starpu_data_handle_t *dQ = sw_tensor_grid(dqkv_u, nq, rs, ncol, A->qkv_sizes, STARPU_RW);
            if (R == 1) dKV = dQ + G;
            /* a key run's gradient is written first by the diagonal tile, which precedes every tile
             * that accumulates into its query run's dq (ring_pairs' order) */
            if (dq_done[a] && !dkv_done[b]) sw_fail(__FILE__, __LINE__, "ring attention: tile order", -22);
            for (int g = 0; g < G; g++) {
                int kv = g * Gk / G;
                sw_attn_args at = attn_args(A, step, layer, g, qp[a], qn[a], kp[b], kn[b]);
                at.accumulate = dq_done[a];
                /* groups sharing a K/V tile add their dk, dv after the first one */
                at.kv_accumulate = dkv_done[b] || g % (G / Gk) != 0;
                if (probs)
                    sw_attn_probs_bwd(Q[a * ncol + g], KV[b * kstride + kv], KV[b * kstride + Gk + kv],
                                      sw_tensor_tiles(probs, SW_ROWS, G, STARPU_R)[g], dO[a * G + g], dQ[a * ncol + g],
                                      dKV[b * dstride + kv], dKV[b * dstride + Gk + kv], &at);
                else
                    sw_attn_bwd(Q[a * ncol + g], KV[b * kstride + kv], KV[b * kstride + Gk + kv], O[a * G + g],
                                L[a * G + g], dO[a * G + g], dQ[a * ncol + g], dKV[b * dstride + kv],
                                dKV[b * dstride + Gk + kv], &at);
            }
            dq_done[a] = dkv_done[b] = 1;
        }
        if (R > 1) /* the gradient goes on with its block; after the last step, home */
            sw_ring_shift_handles(x->comm, SW_GROUP_RING, whole_r(kv_buffer(A, 1, s % 2)),
                                  s + 1 < R ? sw_tensor_whole(kv_buffer(A, 1, (s + 1) % 2), STARPU_W)
                                            : sw_tensor_split(dqkv_u, SW_COLS, 2, split, STARPU_W)[1],
                                  1);
    }
}

/* Rotary positions on the q and k columns of qkv [T, (aq+2ak)d] (or of its
 * gradient, inverse), in the sequence space: one task per row piece (a
 * run of consecutive positions inside a tile). */
static void rope(sw_ctx *x, const sw_attention *a, sw_tensor *qkv, int inverse)
{
    int64_t cols[2] = {(int64_t)(a->aq + a->ak) * a->d, (int64_t)a->ak * a->d};
    for (int i = 0; i < x->npieces[0]; i++)
        sw_rope(sw_tensor_grid(qkv, x->npieces[0], x->pc_size[0], 2, cols, STARPU_RW)[2 * i], a->d, a->c.rope_theta,
                x->pc_off[0][i], x->B, x->pc_pos[0][i], inverse);
}

/* the layer and the saved set of sw_attention_keep: each tensor its shape */
static void check_saved(const char *fn, const sw_ctx *x, const sw_attention *a, const sw_attn_saved *k)
{
    sw_check_ptr(fn, "x", x);
    sw_check_ptr(fn, "a", a);
    sw_check_ptr(fn, "k", k);
    const int64_t d = a->d;
    sw_check_tensor(fn, "k->qkv", k->qkv, x->tokens, sw_attention_qkv_cols(a));
    sw_check_tensor(fn, "k->qkv_u", k->qkv_u, x->attn_rows, (int64_t)(a->hq + 2 * a->hk) * d);
    sw_check_tensor(fn, "k->att", k->att, x->tokens, sw_attention_out_cols(a));
    sw_check_tensor(fn, "k->att_u", k->att_u, x->attn_rows, (int64_t)a->hq * d);
    sw_check_tensor(fn, "k->lse", k->lse, x->attn_rows, a->hq);
    if (a->c.keep_probs) sw_check_tensor(fn, "k->probs", k->probs, (int64_t)x->attn_rows * a->hq, x->c.seq);
}

/* att = attention of qkv: with Ulysses the heads are exchanged for the
 * sequence around it */
void sw_attention_forward(sw_ctx *x, sw_attention *a, int step, int layer, const sw_attn_saved *k)
{
    check_saved("sw_attention_forward", x, a, k);
    const sw_linear *qkv = sw_ctx_writer(x, k->qkv); /* the linear that wrote it, where one did */
    if (qkv) check_qkv("sw_attention_forward", x, a, qkv);
    if (a->c.rope_theta > 0.0f) rope(x, a, k->qkv, 0);
    if (x->ulysses > 1) ulysses_qkv(a, k->qkv, k->qkv_u, 1);
    ring_forward(a, step, layer, k->qkv_u, k->att_u, k->lse, k->probs);
    if (x->ulysses > 1) ulysses_out(x, k->att_u, k->att, 1);
}

void sw_attention_backward(sw_ctx *x, sw_attention *a, int step, int layer, const sw_attn_saved *k, sw_tensor *datt,
                           sw_tensor *dqkv)
{
    static const char *fn = "sw_attention_backward";
    check_saved(fn, x, a, k);
    sw_check_tensor(fn, "datt", datt, x->tokens, sw_attention_out_cols(a));
    sw_check_tensor(fn, "dqkv", dqkv, x->tokens, sw_attention_qkv_cols(a));
    sw_tensor *datt_u = datt, *dqkv_u = dqkv;
    if (x->ulysses > 1) {
        datt_u = sw_scratch_keep(x, "datt_u", x->attn_rows, (int64_t)a->hq * a->d, 1);
        dqkv_u = sw_scratch_keep(x, "dqkv_u", x->attn_rows, (int64_t)(a->hq + 2 * a->hk) * a->d, 1);
        ulysses_out(x, datt_u, datt, 0);
    }
    ring_backward(a, step, layer, k->qkv_u, k->att_u, k->lse, k->probs, datt_u, dqkv_u);
    if (x->ulysses > 1) ulysses_qkv(a, dqkv, dqkv_u, 0);
    if (a->c.rope_theta > 0.0f) rope(x, a, dqkv, 1);
}

/* K/V heads replicated over tp / kv_heads ranks: each rank's K/V weight
 * gradients cover only its own query heads. Gather every rank's over TP and
 * add up those of the ranks sharing this rank's K/V head, in rank order, so
 * that the sharers hold the same bits. */
void sw_attention_sum_kv_grads(sw_ctx *x, sw_attention *a, const sw_linear *qkv)
{
    check_qkv("sw_attention_sum_kv_grads", x, a, qkv);
    if (!a->kv_replicated) return;
    int t = x->tp.t, per = t / a->c.kv_heads, first = a->kv0 * per;
    int64_t h = grad(x, qkv->w)->cols, wsz[2] = {(int64_t)a->aq * a->d, 2 * (int64_t)a->d};
    sw_tensor *grads[2] = {grad(x, qkv->w), qkv->b >= 0 ? grad(x, qkv->b) : NULL};
    sw_tensor *mine[2] = {sw_scratch(x, "kv_grad_w", 2 * a->d, h), sw_scratch(x, "kv_grad_b", 1, 2 * a->d)};
    sw_tensor *all[2] = {sw_scratch(x, "kv_grad_w_all", (int64_t)t * 2 * a->d, h),
                         sw_scratch(x, "kv_grad_b_all", t, 2 * a->d)};
    for (int k = 0; k < 2 && grads[k]; k++) {
        sw_split split = k == 0 ? SW_ROWS : SW_COLS;
        sw_copy(whole_w(mine[k]), sw_tensor_split(grads[k], split, 2, wsz, STARPU_R)[1]);
        sw_allgather(x->tp.comm, SW_GROUP_TP, mine[k], all[k]);
        starpu_data_handle_t *from = sw_tensor_tiles(all[k], SW_ROWS, t, STARPU_R);
        sw_copy(sw_tensor_split(grads[k], split, 2, wsz, STARPU_W)[1], from[first]);
        for (int s = first + 1; s < first + per; s++)
            sw_axpy(1.0f, from[s], sw_tensor_split(grads[k], split, 2, wsz, STARPU_RW)[1]);
    }
}

void sw_attention_traffic(const sw_ctx *x, const sw_attention *a, const sw_linear *qkv, sw_traffic *t)
{
    check_qkv("sw_attention_traffic", x, a, qkv);
    /* Ulysses: q, k, v to the heads and the output back, forward and backward */
    double u = sw_comm_bytes(x->comm, SW_GROUP_ULYSSES, SW_COLL_ALLTOALL, x->tokens, sw_attention_qkv_cols(a)) +
               sw_comm_bytes(x->comm, SW_GROUP_ULYSSES, SW_COLL_ALLTOALL, x->tokens, sw_attention_out_cols(a));
    traffic_add(x, t, 0, SW_GROUP_ULYSSES, u);
    traffic_add(x, t, 1, SW_GROUP_ULYSSES, u);
    /* Ring: R - 1 K/V block shifts forward, R - 1 backward and R of their gradients */
    double kv = sw_comm_bytes(x->comm, SW_GROUP_RING, SW_COLL_RING_SHIFT, x->attn_rows, 2 * (int64_t)a->hk * a->d);
    traffic_add(x, t, 0, SW_GROUP_RING, (x->ring - 1) * kv);
    traffic_add(x, t, 1, SW_GROUP_RING, (2 * x->ring - 1) * kv);
    if (!a->kv_replicated) return;
    /* replicated K/V heads: every TP rank's K/V weight (and bias) gradient gathered */
    int64_t rows, h;
    param_shape(x, qkv->w, &rows, &h);
    double g = sw_comm_bytes(x->tp.comm, SW_GROUP_TP, SW_COLL_ALLGATHER, (int64_t)x->tp.t * 2 * a->d, h);
    if (qkv->b >= 0) g += sw_comm_bytes(x->tp.comm, SW_GROUP_TP, SW_COLL_ALLGATHER, x->tp.t, 2 * (int64_t)a->d);
    traffic_add(x, t, 1, SW_GROUP_TP, g);
}

/* ----------------------------------------------------------- generation */

struct sw_kv_cache {
    sw_tensor *k, *v; /* [max_len B, ak d], rows in [s, b] order */
    int B, max_len;
};

sw_kv_cache *sw_kv_cache_create(const sw_attention *a, int batch, int max_len)
{
    sw_check_ptr("sw_kv_cache_create", "a", a);
    if (batch < 1 || max_len < 1)
        sw_usage_error("sw_kv_cache_create: batch (%d) and max_len (%d) must be positive", batch, max_len);
    sw_kv_cache *kv = sw_xcalloc(1, sizeof *kv);
    kv->B = batch, kv->max_len = max_len;
    kv->k = sw_tensor_new2d("kv_cache.k", SW_F32, (int64_t)max_len * batch, (int64_t)a->ak * a->d);
    kv->v = sw_tensor_new2d("kv_cache.v", SW_F32, (int64_t)max_len * batch, (int64_t)a->ak * a->d);
    /* positions not written yet are masked (causal), but must not hold NaNs */
    sw_tensor_fill(kv->k, 0.0f);
    sw_tensor_fill(kv->v, 0.0f);
    return kv;
}

void sw_kv_cache_destroy(sw_kv_cache *kv)
{
    if (!kv) return;
    sw_tensor_free(kv->k);
    sw_tensor_free(kv->v);
    free(kv);
}

void sw_attention_cached_forward(sw_ctx *x, const sw_attention *a, sw_kv_cache *kv, sw_tensor *qkv, sw_tensor *att)
{
    static const char *fn = "sw_attention_cached_forward";
    sw_check_ptr(fn, "x", x);
    sw_check_ptr(fn, "a", a);
    sw_check_ptr(fn, "kv", kv);
    const int64_t L = x->c.seq, p0 = x->lr_p0[0], d = a->d;
    if (x->ulysses * x->ring > 1 || x->c.sp || x->tp.t != a->x->tp.t || x->B != kv->B)
        sw_usage_error("%s: x must hold whole sequences (ulysses %d, ring %d, sp %d) of tp %d (the layer's %d), %d "
                       "per rank (the cache's %d)", fn, x->ulysses, x->ring, x->c.sp, x->tp.t, a->x->tp.t, x->B, kv->B);
    if (p0 + L > kv->max_len)
        sw_usage_error("%s: positions %lld .. %lld beyond the cache's %d", fn, (long long)p0, (long long)(p0 + L - 1),
                       kv->max_len);
    sw_check_tensor(fn, "qkv", qkv, x->tokens, sw_attention_qkv_cols(a));
    sw_check_tensor(fn, "att", att, x->tokens, sw_attention_out_cols(a));
    if (a->c.rope_theta > 0.0f) rope(x, a, qkv, 0);
    /* the new positions' k and v into the cache's rows of those positions (the cache stays one handle:
     * a partition per position would cost a partition and an unpartition per layer and step) */
    int64_t cols[3] = {(int64_t)a->aq * d, (int64_t)a->ak * d, (int64_t)a->ak * d};
    starpu_data_handle_t *part = sw_tensor_split(qkv, SW_COLS, 3, cols, STARPU_R);
    sw_copy_rows(part[1], sw_tensor_whole(kv->k, STARPU_RW), p0 * x->B);
    sw_copy_rows(part[2], sw_tensor_whole(kv->v, STARPU_RW), p0 * x->B);
    sw_attn_args r;
    memset(&r, 0, sizeof r);
    r.batch = x->B, r.nh = a->aq, r.nkv = a->ak, r.d = (int)d;
    r.sq = (int)L, r.sk = kv->max_len, r.q_pos0 = p0, r.k_pos0 = 0, r.causal = 1;
    r.scale = 1.0f / sqrtf((float)d);
    r.head0 = x->tp.rank * a->aq, r.heads_total = a->c.heads, r.seq_total = kv->max_len;
    sw_tensor *lse = sw_scratch(x, "cached_lse", x->tokens, a->aq);
    sw_attn_fwd(part[0], sw_tensor_whole(kv->k, STARPU_R),
                sw_tensor_whole(kv->v, STARPU_R), sw_tensor_whole(att, STARPU_W), sw_tensor_whole(lse, STARPU_W), &r);
}
