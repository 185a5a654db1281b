/* sw_attn_fwd / sw_attn_bwd against a naive double-precision reference:
 * forward o and lse, backward dq/dk/dv against central finite differences
 * of the reference forward (loss = sum(o * r)). Batch 2, 3 heads, d = 8
 * and 16, s not a multiple of the kernel's key block, causal on and off,
 * dropout 0 and 0.2; q/k/v are strided column tiles of one [T, 3*nh*d]
 * tensor; two head groups (two tasks); the Ring case (keys in two blocks
 * via k_pos0, merge 0 then 1, backward accumulated over the blocks); fully
 * masked rows (lse -inf, merging them changes nothing); query blocks with
 * q_pos0 > 0. Grouped-query attention (nkv < nh K/V heads): the same checks,
 * query heads in tasks that hold whole K/V groups or share a K/V head
 * (kv_accumulate on the later ones), and the Ring case. Key padding
 * (key_len per batch element, lengths 1 and s among them, causal and not):
 * the reference, finite differences, padded keys' dk, dv exactly 0, the Ring
 * split (a block wholly padded for one sequence) and the saved-probabilities
 * path equal to one flash call, and padded keys perturbed change no output
 * bit while without key padding they change it. */
#include <string.h>

#include "philox.h"
#include "testutil.h"

enum { B = 2 };
static const uint64_t SEED = 0x5eedULL;
static const uint32_t STEP = 7;
static const uint16_t LAYER = 3, OP = 2;

/* ---------------- reference ---------------- */

/* The reference work runs on the host while StarPU's idle workers would
 * poll for tasks: pause them (nothing is in flight) so the test stays fast
 * on machines with few cores. */
static void host_begin(void)
{
    starpu_task_wait_for_all();
    starpu_pause();
}

static void host_end(void)
{
    starpu_resume();
}

typedef struct ref_cfg {
    int nh, d;          /* heads (all of them), head dim */
    int causal;
    double scale;
    float p;
    int64_t seq_total;
    int nkv;            /* K/V heads (grouped-query attention); 0 means nh */
} ref_cfg;

static int ref_nkv(const ref_cfg *c) { return c->nkv > 0 ? c->nkv : c->nh; }

/* key padding in the reference: batch element b sees the keys at positions
 * below ref_klen[b] (NULL: every key) */
static const int *ref_klen;

/* One (b, h) slice: queries i < nq at positions qp0 + i (rows i*B + b of Q
 * and R, columns h*d..), keys j < nk at kp0 + j (rows j*B + b of K, V,
 * columns of K/V head h / (nh / nkv)). ld = nh*d for Q, R and O, nkv*d for
 * K and V; lse is [nq*B, nh]. Writes O and lse when given; returns
 * sum(O * R) when R is given. */
static double ref_slice(const ref_cfg *c, const double *Q, const double *K, const double *V, const double *R,
                        int b, int h, int nq, int64_t qp0, int nk, int64_t kp0, double *O, double *lse)
{
    const int d = c->d, ld = c->nh * d, nkv = ref_nkv(c), ldkv = nkv * d;
    const int64_t kvcol = (int64_t)(h / (c->nh / nkv)) * d;
    double sc[512], o[64], loss = 0;
    for (int i = 0; i < nq; i++) {
        const int64_t qpos = qp0 + i;
        const double *qi = Q + ((int64_t)i * B + b) * ld + h * d;
        double mx = -INFINITY;
        int any = 0;
        for (int j = 0; j < nk; j++) {
            if ((c->causal && kp0 + j > qpos) || (ref_klen && kp0 + j >= ref_klen[b])) {
                sc[j] = -INFINITY;
                continue;
            }
            const double *kj = K + ((int64_t)j * B + b) * ldkv + kvcol;
            double s = 0;
            for (int x = 0; x < d; x++) s += qi[x] * kj[x];
            sc[j] = s * c->scale;
            mx = sc[j] > mx ? sc[j] : mx;
            any = 1;
        }
        for (int x = 0; x < d; x++) o[x] = 0;
        double l = -INFINITY;
        if (any) {
            double sum = 0;
            for (int j = 0; j < nk; j++) {
                sc[j] = sc[j] == -INFINITY ? 0.0 : exp(sc[j] - mx);
                sum += sc[j];
            }
            l = mx + log(sum);
            for (int j = 0; j < nk; j++) {
                if (sc[j] == 0.0) continue;
                double pj = sc[j] / sum;
                if (c->p > 0) {
                    uint64_t idx = (((uint64_t)b * (uint64_t)c->nh + (uint64_t)h) * (uint64_t)c->seq_total +
                                    (uint64_t)qpos) * (uint64_t)c->seq_total + (uint64_t)(kp0 + j);
                    pj = sw_dropout_keep(SEED, STEP, LAYER, OP, idx, c->p) ? pj / (1.0 - (double)c->p) : 0.0;
                }
                const double *vj = V + ((int64_t)j * B + b) * ldkv + kvcol;
                for (int x = 0; x < d; x++) o[x] += pj * vj[x];
            }
        }
        const int64_t row = (int64_t)i * B + b;
        if (O) for (int x = 0; x < d; x++) O[row * ld + h * d + x] = o[x];
        if (lse) lse[row * c->nh + h] = l;
        if (R) for (int x = 0; x < d; x++) loss += o[x] * R[row * ld + h * d + x];
    }
    return loss;
}

static void ref_fwd(const ref_cfg *c, const double *Q, const double *K, const double *V, int nq, int64_t qp0,
                    int nk, int64_t kp0, double *O, double *lse)
{
    host_begin();
    for (int b = 0; b < B; b++)
        for (int h = 0; h < c->nh; h++) ref_slice(c, Q, K, V, NULL, b, h, nq, qp0, nk, kp0, O, lse);
    host_end();
}

/* ---------------- helpers ---------------- */

static void *xmalloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
    if (!p) { perror("malloc"); exit(99); }
    return p;
}

/* lse: -inf exactly where the reference is -inf (tu_close's rule for
 * non-finite values), close elsewhere */
static void check_lse(const char *what, const float *got, const double *ref, int64_t n)
{
    tu_close(what, got, ref, n, 1e-5, 1e-5);
}

static void check_f(const char *what, const float *got, const double *ref, int64_t n, double rtol, double arel)
{
    tu_close(what, got, ref, n, rtol, 1e-6 + arel * tu_maxabs(ref, n));
}

/* float [rows, ld] columns c0..c0+w-1 -> double [rows, w] */
static double *cols_to_double(const float *x, int64_t rows, int64_t ld, int64_t c0, int64_t w)
{
    double *y = xmalloc(sizeof(double) * (size_t)(rows * w));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < w; c++) y[r * w + c] = x[r * ld + c0 + c];
    return y;
}

static double *to_double(const float *x, int64_t n)
{
    double *y = xmalloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) y[i] = x[i];
    return y;
}

static sw_attn_args make_args(int nh_tile, int d, int sq, int sk, int64_t qp0, int64_t kp0, int causal, float p,
                              int head0, int heads_total, int64_t seq_total, int merge, int accumulate)
{
    sw_attn_args a;
    memset(&a, 0, sizeof a);
    a.batch = B;
    a.nh = nh_tile;
    a.d = d;
    a.sq = sq;
    a.sk = sk;
    a.q_pos0 = qp0;
    a.k_pos0 = kp0;
    a.causal = causal;
    a.scale = 1.0f / sqrtf((float)d);
    a.dropout = p;
    a.key.seed = SEED;
    a.key.step = STEP;
    a.key.layer = LAYER;
    a.key.op = OP;
    a.head0 = head0;
    a.heads_total = heads_total;
    a.seq_total = seq_total;
    a.merge = merge;
    a.accumulate = accumulate;
    return a;
}

/* Central finite differences of the reference loss for a sample of
 * elements of X (one of Q, K, V: which = 0, 1, 2), compared with the
 * codelet's gradient (float, element (row, col) of X at
 * grad[row * ldg + gcol0 + col]). A K/V head feeds the nh/nkv query heads
 * of its group: their losses are summed. */
static void fd_check(const char *what, const ref_cfg *c, double *Q, double *K, double *V, const double *R, int s,
                     int which, const float *grad, int64_t ldg, int64_t gcol0)
{
    const int d = c->d, ld = c->nh * d, nkv = ref_nkv(c), grp = c->nh / nkv;
    const int ldx = which == 0 ? ld : nkv * d;
    double *X = which == 0 ? Q : which == 1 ? K : V;
    /* positions: every query row for dq (row-local, cheap); for dk/dv the
     * key rows around the block edges and a few others */
    int pos[16], np = 0;
    if (which == 0) {
        np = -1;
    } else {
        const int cand[] = {0, 1, 31, 32, 33, 63, 64, 65, s / 2, s - 2, s - 1};
        for (unsigned i = 0; i < sizeof cand / sizeof cand[0]; i++) {
            int dup = cand[i] < 0 || cand[i] >= s;
            for (int j = 0; j < np; j++) dup |= pos[j] == cand[i];
            if (!dup) pos[np++] = cand[i];
        }
    }
    /* dq: every element; dk, dv: the sampled positions, each with one batch
     * element and one K/V head (cycling through them) */
    const int nrows = which == 0 ? s : np, nb = which == 0 ? B : 1, ncol = which == 0 ? ld : d;
    const int64_t n = (int64_t)nrows * nb * ncol;
    float *got = xmalloc(sizeof(float) * (size_t)n);
    double *ref = xmalloc(sizeof(double) * (size_t)n);
    const double eps = 1e-4;
    int64_t e = 0;
    host_begin();
    for (int pi = 0; pi < nrows; pi++) {
        const int p = which == 0 ? pi : pos[pi];
        for (int bi = 0; bi < nb; bi++)
            for (int ci = 0; ci < ncol; ci++, e++) {
                const int b = which == 0 ? bi : pi % B;
                const int col = which == 0 ? ci : (pi % nkv) * d + ci;
                const int h = col / d; /* query head (dq) or K/V head (dk, dv) */
                const int64_t row = (int64_t)p * B + b;
                double *xp = X + row * ldx + col, x0 = *xp, lp = 0, lm = 0;
                if (which == 0) { /* only query row p changes */
                    const int64_t off = (int64_t)p * B * ld;
                    *xp = x0 + eps;
                    lp = ref_slice(c, Q + off, K, V, R + off, b, h, 1, p, s, 0, NULL, NULL);
                    *xp = x0 - eps;
                    lm = ref_slice(c, Q + off, K, V, R + off, b, h, 1, p, s, 0, NULL, NULL);
                } else {
                    for (int hq = h * grp; hq < (h + 1) * grp; hq++) {
                        *xp = x0 + eps;
                        lp += ref_slice(c, Q, K, V, R, b, hq, s, 0, s, 0, NULL, NULL);
                        *xp = x0 - eps;
                        lm += ref_slice(c, Q, K, V, R, b, hq, s, 0, s, 0, NULL, NULL);
                    }
                }
                *xp = x0;
                ref[e] = (lp - lm) / (2 * eps);
                got[e] = grad[row * ldg + gcol0 + col];
            }
    }
    host_end();
    /* worst err/limit 0.076 over 14 seeds; the same with eps 1e-3 or 1e-5, so
     * it is the kernels' fp32 rounding (sums over 70 keys), not the
     * differences; 10x tighter would leave less than a 10x margin */
    check_f(what, got, ref, n, 1e-5, 5e-6);
    free(got);
    free(ref);
}

/* ---------------- one full case ---------------- */

/* nh heads in G head groups (one task each), sequence s, batch B. */
static void run_case(int d, int nh, int G, int s, int causal, float p, uint64_t seed)
{
    const int64_t T = (int64_t)s * B, W = (int64_t)nh * d, C3 = 3 * W;
    char what[256], tag[128];
    snprintf(tag, sizeof tag, "d=%d nh=%d groups=%d s=%d causal=%d p=%.1f", d, nh, G, s, causal, p);
    float *qkv = xmalloc(sizeof(float) * (size_t)(T * C3)), *r = xmalloc(sizeof(float) * (size_t)(T * W));
    tu_rand(qkv, T * C3, seed, 1.5f);
    tu_rand(r, T * W, seed + 100, 1.0f);
    double *Q = cols_to_double(qkv, T, C3, 0, W), *K = cols_to_double(qkv, T, C3, W, W);
    double *V = cols_to_double(qkv, T, C3, 2 * W, W), *R = to_double(r, T * W);
    ref_cfg c = {nh, d, causal, 1.0 / sqrt((double)d), p, s, 0};
    /* the codelet gets scale in fp32 */
    c.scale = (double)(1.0f / sqrtf((float)d));
    double *Or = xmalloc(sizeof(double) * (size_t)(T * W)), *Lr = xmalloc(sizeof(double) * (size_t)(T * nh));
    ref_fwd(&c, Q, K, V, s, 0, s, 0, Or, Lr);

    sw_tensor *QKV = tu_tensor("qkv", T, C3, qkv), *O = tu_tensor("o", T, W, NULL), *L = tu_tensor("lse", T, nh, NULL);
    sw_tensor *DO = tu_tensor("dout", T, W, r), *DQKV = tu_tensor("dqkv", T, C3, NULL);
    sw_tensor_fill(O, NAN);
    sw_tensor_fill(L, NAN);
    sw_tensor_fill(DQKV, NAN);
    const int nht = nh / G;
    for (int g = 0; g < G; g++) {
        starpu_data_handle_t *t = sw_tensor_tiles(QKV, SW_COLS, 3 * G, STARPU_R);
        sw_attn_args a = make_args(nht, d, s, s, 0, 0, causal, p, g * nht, nh, s, 0, 0);
        sw_attn_fwd(t[g], t[G + g], t[2 * G + g], sw_tensor_tiles(O, SW_COLS, G, STARPU_W)[g],
                    sw_tensor_tiles(L, SW_COLS, G, STARPU_W)[g], &a);
    }
    for (int g = 0; g < G; g++) {
        starpu_data_handle_t *t = sw_tensor_tiles(QKV, SW_COLS, 3 * G, STARPU_R);
        starpu_data_handle_t *dt = sw_tensor_tiles(DQKV, SW_COLS, 3 * G, STARPU_W);
        sw_attn_args a = make_args(nht, d, s, s, 0, 0, causal, p, g * nht, nh, s, 0, 0);
        sw_attn_bwd(t[g], t[G + g], t[2 * G + g], sw_tensor_tiles(O, SW_COLS, G, STARPU_R)[g],
                    sw_tensor_tiles(L, SW_COLS, G, STARPU_R)[g], sw_tensor_tiles(DO, SW_COLS, G, STARPU_R)[g],
                    dt[g], dt[G + g], dt[2 * G + g], &a);
    }
    float *o = tu_read(O), *l = tu_read(L), *dqkv = tu_read(DQKV);
    snprintf(what, sizeof what, "attn fwd o (%s)", tag);
    check_f(what, o, Or, T * W, 1e-4, 1e-5);
    snprintf(what, sizeof what, "attn fwd lse (%s)", tag);
    check_lse(what, l, Lr, T * nh);
    static const char *nm[3] = {"dq", "dk", "dv"};
    for (int w = 0; w < 3; w++) {
        snprintf(what, sizeof what, "attn bwd %s vs finite differences (%s)", nm[w], tag);
        fd_check(what, &c, Q, K, V, R, s, w, dqkv, C3, w * W);
    }
    sw_tensor_free(QKV);
    sw_tensor_free(O);
    sw_tensor_free(L);
    sw_tensor_free(DO);
    sw_tensor_free(DQKV);
    free(qkv); free(r); free(Q); free(K); free(V); free(R); free(Or); free(Lr);
    free(o); free(l); free(dqkv);
}

/* ---------------- Ring: keys in two blocks ---------------- */

/* tensor [(k1-k0)*B, w] holding columns col0..col0+w-1 of the rows of
 * positions k0..k1-1 of x[T, ld] */
static sw_tensor *rows_block(const char *name, const float *x, int64_t ld, int64_t col0, int64_t w, int k0, int k1)
{
    const int64_t n = (int64_t)(k1 - k0) * B;
    float *y = xmalloc(sizeof(float) * (size_t)(n * w));
    for (int64_t r = 0; r < n; r++)
        memcpy(y + r * w, x + ((int64_t)k0 * B + r) * ld + col0, sizeof(float) * (size_t)w);
    sw_tensor *t = tu_tensor(name, n, w, y);
    free(y);
    return t;
}

/* kv tensor [(k1-k0)*B, 2W] holding k, v rows of positions k0..k1-1 */
static sw_tensor *kv_block(const char *name, const float *qkv, int64_t W, int k0, int k1)
{
    return rows_block(name, qkv, 3 * W, W, 2 * W, k0, k1);
}

static int all_equal(const float *a, const float *b, int64_t n)
{
    return memcmp(a, b, sizeof(float) * (size_t)n) == 0;
}

static void ring_case(int d, int s, int s1, int causal, float p, uint64_t seed)
{
    const int nh = 3;
    const int64_t T = (int64_t)s * B, W = (int64_t)nh * d, C3 = 3 * W;
    char what[256], tag[128];
    snprintf(tag, sizeof tag, "d=%d s=%d split=%d causal=%d p=%.1f", d, s, s1, causal, p);
    float *qkv = xmalloc(sizeof(float) * (size_t)(T * C3)), *r = xmalloc(sizeof(float) * (size_t)(T * W));
    tu_rand(qkv, T * C3, seed, 1.5f);
    tu_rand(r, T * W, seed + 100, 1.0f);
    double *Q = cols_to_double(qkv, T, C3, 0, W), *K = cols_to_double(qkv, T, C3, W, W);
    double *V = cols_to_double(qkv, T, C3, 2 * W, W);
    ref_cfg c = {nh, d, causal, (double)(1.0f / sqrtf((float)d)), p, s, 0};
    double *Or = xmalloc(sizeof(double) * (size_t)(T * W)), *Lr = xmalloc(sizeof(double) * (size_t)(T * nh));

    sw_tensor *QKV = tu_tensor("qkv", T, C3, qkv), *DO = tu_tensor("dout", T, W, r);
    sw_tensor *KV1 = kv_block("kv1", qkv, W, 0, s1), *KV2 = kv_block("kv2", qkv, W, s1, s);
    sw_tensor *Of = tu_tensor("o_full", T, W, NULL), *Lf = tu_tensor("lse_full", T, nh, NULL);
    sw_tensor *Oa = tu_tensor("o_ring", T, W, NULL), *La = tu_tensor("lse_ring", T, nh, NULL);
    sw_tensor *Ob = tu_tensor("o_ring2", T, W, NULL), *Lb = tu_tensor("lse_ring2", T, nh, NULL);
    sw_tensor_fill(Of, NAN); sw_tensor_fill(Lf, NAN);
    sw_tensor_fill(Oa, NAN); sw_tensor_fill(La, NAN);
    sw_tensor_fill(Ob, NAN); sw_tensor_fill(Lb, NAN);
#define QT(i) sw_tensor_tiles(QKV, SW_COLS, 3, STARPU_R)[i]
#define KV1T(i) sw_tensor_tiles(KV1, SW_COLS, 2, STARPU_R)[i]
#define KV2T(i) sw_tensor_tiles(KV2, SW_COLS, 2, STARPU_R)[i]
#define WH(t, m) sw_tensor_whole(t, m)
    sw_attn_args a;
    /* one call over all keys */
    a = make_args(nh, d, s, s, 0, 0, causal, p, 0, nh, s, 0, 0);
    sw_attn_fwd(QT(0), QT(1), QT(2), WH(Of, STARPU_W), WH(Lf, STARPU_W), &a);
    /* ring, first block first */
    a = make_args(nh, d, s, s1, 0, 0, causal, p, 0, nh, s, 0, 0);
    sw_attn_fwd(QT(0), KV1T(0), KV1T(1), WH(Oa, STARPU_W), WH(La, STARPU_W), &a);
    a = make_args(nh, d, s, s - s1, 0, s1, causal, p, 0, nh, s, 1, 0);
    sw_attn_fwd(QT(0), KV2T(0), KV2T(1), WH(Oa, STARPU_RW), WH(La, STARPU_RW), &a);
    /* ring, second block first (with causal its rows qpos < s1 are fully masked) */
    a = make_args(nh, d, s, s - s1, 0, s1, causal, p, 0, nh, s, 0, 0);
    sw_attn_fwd(QT(0), KV2T(0), KV2T(1), WH(Ob, STARPU_W), WH(Lb, STARPU_W), &a);
    float *o2 = tu_read(Ob), *l2 = tu_read(Lb);
    a = make_args(nh, d, s, s1, 0, 0, causal, p, 0, nh, s, 1, 0);
    sw_attn_fwd(QT(0), KV1T(0), KV1T(1), WH(Ob, STARPU_RW), WH(Lb, STARPU_RW), &a);

    float *of = tu_read(Of), *lf = tu_read(Lf), *oa = tu_read(Oa), *la = tu_read(La), *ob = tu_read(Ob),
          *lb = tu_read(Lb);
    /* the second block alone, against the reference over keys s1..s-1 */
    ref_fwd(&c, Q, K + (int64_t)s1 * B * W, V + (int64_t)s1 * B * W, s, 0, s - s1, s1, Or, Lr);
    snprintf(what, sizeof what, "ring: second key block alone, o (%s)", tag);
    check_f(what, o2, Or, T * W, 1e-4, 1e-5);
    snprintf(what, sizeof what, "ring: second key block alone, lse (%s)", tag);
    check_lse(what, l2, Lr, T * nh);
    if (causal) {
        int ok = 1;
        for (int64_t row = 0; row < (int64_t)s1 * B; row++) {
            for (int h = 0; h < nh; h++) ok &= l2[row * nh + h] == -INFINITY;
            for (int64_t x = 0; x < W; x++) ok &= o2[row * W + x] == 0.0f;
        }
        snprintf(what, sizeof what, "ring: fully masked rows have lse -inf and o 0 (%s)", tag);
        tu_true(what, ok);
    }
    ref_fwd(&c, Q, K, V, s, 0, s, 0, Or, Lr);
    snprintf(what, sizeof what, "ring: one call over all keys, o (%s)", tag);
    check_f(what, of, Or, T * W, 1e-4, 1e-5);
    snprintf(what, sizeof what, "ring: one call over all keys, lse (%s)", tag);
    check_lse(what, lf, Lr, T * nh);
    double *ofd = to_double(of, T * W), *lfd = to_double(lf, T * nh);
    snprintf(what, sizeof what, "ring: blocks 1 then 2 merged = one call, o (%s)", tag);
    check_f(what, oa, ofd, T * W, 2e-5, 2e-6);
    snprintf(what, sizeof what, "ring: blocks 1 then 2 merged = one call, lse (%s)", tag);
    check_lse(what, la, lfd, T * nh);
    snprintf(what, sizeof what, "ring: blocks 2 then 1 merged = one call, o (%s)", tag);
    check_f(what, ob, ofd, T * W, 2e-5, 2e-6);
    snprintf(what, sizeof what, "ring: blocks 2 then 1 merged = one call, lse (%s)", tag);
    check_lse(what, lb, lfd, T * nh);

    /* backward: one call, and the two key blocks (first accumulate 0, then
     * 1 on dq; dk2/dv2 start from random values and are accumulated) */
    sw_tensor *DQKV = tu_tensor("dqkv", T, C3, NULL), *DQ = tu_tensor("dq", T, W, NULL);
    sw_tensor *DKV1 = tu_tensor("dkv1", (int64_t)s1 * B, 2 * W, NULL);
    float *g2 = xmalloc(sizeof(float) * (size_t)((s - s1) * B * 2 * W));
    tu_rand(g2, (int64_t)(s - s1) * B * 2 * W, seed + 7, 1.0f);
    sw_tensor *DKV2 = tu_tensor("dkv2", (int64_t)(s - s1) * B, 2 * W, g2);
    sw_tensor_fill(DQKV, NAN);
    sw_tensor_fill(DQ, NAN);
    sw_tensor_fill(DKV1, NAN);
    starpu_data_handle_t *dt = sw_tensor_tiles(DQKV, SW_COLS, 3, STARPU_W);
    a = make_args(nh, d, s, s, 0, 0, causal, p, 0, nh, s, 0, 0);
    sw_attn_bwd(QT(0), QT(1), QT(2), WH(Of, STARPU_R), WH(Lf, STARPU_R), WH(DO, STARPU_R), dt[0], dt[1], dt[2], &a);
    a = make_args(nh, d, s, s1, 0, 0, causal, p, 0, nh, s, 0, 0);
    sw_attn_bwd(QT(0), KV1T(0), KV1T(1), WH(Oa, STARPU_R), WH(La, STARPU_R), WH(DO, STARPU_R), WH(DQ, STARPU_W),
                sw_tensor_tiles(DKV1, SW_COLS, 2, STARPU_W)[0], sw_tensor_tiles(DKV1, SW_COLS, 2, STARPU_W)[1], &a);
    a = make_args(nh, d, s, s - s1, 0, s1, causal, p, 0, nh, s, 0, 1);
    sw_attn_bwd(QT(0), KV2T(0), KV2T(1), WH(Oa, STARPU_R), WH(La, STARPU_R), WH(DO, STARPU_R), WH(DQ, STARPU_RW),
                sw_tensor_tiles(DKV2, SW_COLS, 2, STARPU_RW)[0], sw_tensor_tiles(DKV2, SW_COLS, 2, STARPU_RW)[1],
                &a);
    float *dqkv = tu_read(DQKV), *dq = tu_read(DQ), *dkv1 = tu_read(DKV1), *dkv2 = tu_read(DKV2);
    /* expected: one-call gradients (+ g2 for block 2) */
    double *e = cols_to_double(dqkv, T, C3, 0, W);
    snprintf(what, sizeof what, "ring bwd: dq over two key blocks = one call (%s)", tag);
    check_f(what, dq, e, T * W, 1e-4, 1e-5);
    free(e);
    e = cols_to_double(dqkv, (int64_t)s1 * B, C3, W, 2 * W);
    snprintf(what, sizeof what, "ring bwd: dk, dv of key block 1 = one call (%s)", tag);
    check_f(what, dkv1, e, (int64_t)s1 * B * 2 * W, 1e-4, 1e-5);
    free(e);
    e = cols_to_double(dqkv + (int64_t)s1 * B * C3, (int64_t)(s - s1) * B, C3, W, 2 * W);
    for (int64_t i = 0; i < (int64_t)(s - s1) * B * 2 * W; i++) e[i] += g2[i];
    snprintf(what, sizeof what, "ring bwd: dk, dv of key block 2 accumulated = start + one call (%s)", tag);
    check_f(what, dkv2, e, (int64_t)(s - s1) * B * 2 * W, 1e-4, 1e-5);
    free(e);
    /* both key blocks with accumulate=1, every gradient starting from random
     * values: start + one-call gradients */
    {
        const int64_t nq = T * W, n1 = (int64_t)s1 * B * 2 * W, n2 = (int64_t)(s - s1) * B * 2 * W;
        float *h0 = xmalloc(sizeof(float) * (size_t)nq), *h1 = xmalloc(sizeof(float) * (size_t)n1);
        tu_rand(h0, nq, seed + 21, 1.0f);
        tu_rand(h1, n1, seed + 22, 1.0f);
        sw_tensor_write_host(DQ, h0);
        sw_tensor_write_host(DKV1, h1);
        sw_tensor_write_host(DKV2, g2);
        a = make_args(nh, d, s, s1, 0, 0, causal, p, 0, nh, s, 0, 1);
        sw_attn_bwd(QT(0), KV1T(0), KV1T(1), WH(Oa, STARPU_R), WH(La, STARPU_R), WH(DO, STARPU_R),
                    WH(DQ, STARPU_RW), sw_tensor_tiles(DKV1, SW_COLS, 2, STARPU_RW)[0],
                    sw_tensor_tiles(DKV1, SW_COLS, 2, STARPU_RW)[1], &a);
        a = make_args(nh, d, s, s - s1, 0, s1, causal, p, 0, nh, s, 0, 1);
        sw_attn_bwd(QT(0), KV2T(0), KV2T(1), WH(Oa, STARPU_R), WH(La, STARPU_R), WH(DO, STARPU_R),
                    WH(DQ, STARPU_RW), sw_tensor_tiles(DKV2, SW_COLS, 2, STARPU_RW)[0],
                    sw_tensor_tiles(DKV2, SW_COLS, 2, STARPU_RW)[1], &a);
        float *x0 = tu_read(DQ), *x1 = tu_read(DKV1), *x2 = tu_read(DKV2);
        e = cols_to_double(dqkv, T, C3, 0, W);
        for (int64_t i = 0; i < nq; i++) e[i] += h0[i];
        snprintf(what, sizeof what, "ring bwd, accumulate=1 twice: dq = start + one call (%s)", tag);
        check_f(what, x0, e, nq, 1e-4, 1e-5);
        free(e);
        e = cols_to_double(dqkv, (int64_t)s1 * B, C3, W, 2 * W);
        for (int64_t i = 0; i < n1; i++) e[i] += h1[i];
        snprintf(what, sizeof what, "ring bwd, accumulate=1 twice: dk, dv of block 1 = start + one call (%s)", tag);
        check_f(what, x1, e, n1, 1e-4, 1e-5);
        free(e);
        e = cols_to_double(dqkv + (int64_t)s1 * B * C3, (int64_t)(s - s1) * B, C3, W, 2 * W);
        for (int64_t i = 0; i < n2; i++) e[i] += g2[i];
        snprintf(what, sizeof what, "ring bwd, accumulate=1 twice: dk, dv of block 2 = start + one call (%s)", tag);
        check_f(what, x2, e, n2, 1e-4, 1e-5);
        free(e);
        free(h0); free(h1); free(x0); free(x1); free(x2);
    }
    /* the one call's dq against finite differences (cheap: row-local; the
     * one-call dk/dv are checked the same way in run_case) */
    double *R = to_double(r, T * W);
    snprintf(what, sizeof what, "ring bwd: one-call dq vs finite differences (%s)", tag);
    fd_check(what, &c, Q, K, V, R, s, 0, dqkv, C3, 0);

    /* query block at q_pos0 = s1 (rows of positions s1..s-1) over all keys */
    {
        const int nq = s - s1;
        sw_tensor *Q2 = tu_tensor("q2", (int64_t)nq * B, W, NULL);
        float *q2 = xmalloc(sizeof(float) * (size_t)((int64_t)nq * B * W));
        for (int64_t row = 0; row < (int64_t)nq * B; row++)
            memcpy(q2 + row * W, qkv + ((int64_t)s1 * B + row) * C3, sizeof(float) * (size_t)W);
        sw_tensor_write_host(Q2, q2);
        sw_tensor *O2 = tu_tensor("o2", (int64_t)nq * B, W, NULL), *L2 = tu_tensor("l2", (int64_t)nq * B, nh, NULL);
        a = make_args(nh, d, nq, s, s1, 0, causal, p, 0, nh, s, 0, 0);
        sw_attn_fwd(WH(Q2, STARPU_R), QT(1), QT(2), WH(O2, STARPU_W), WH(L2, STARPU_W), &a);
        float *oq = tu_read(O2), *lq = tu_read(L2);
        snprintf(what, sizeof what, "query block at q_pos0=%d: o = rows of the one call (%s)", s1, tag);
        check_f(what, oq, Or + (int64_t)s1 * B * W, (int64_t)nq * B * W, 1e-4, 1e-5);
        snprintf(what, sizeof what, "query block at q_pos0=%d: lse (%s)", s1, tag);
        check_lse(what, lq, Lr + (int64_t)s1 * B * nh, (int64_t)nq * B * nh);
        free(q2); free(oq); free(lq);
        sw_tensor_free(Q2); sw_tensor_free(O2); sw_tensor_free(L2);
    }

    sw_tensor_free(QKV); sw_tensor_free(DO); sw_tensor_free(KV1); sw_tensor_free(KV2);
    sw_tensor_free(Of); sw_tensor_free(Lf); sw_tensor_free(Oa); sw_tensor_free(La);
    sw_tensor_free(Ob); sw_tensor_free(Lb);
    sw_tensor_free(DQKV); sw_tensor_free(DQ); sw_tensor_free(DKV1); sw_tensor_free(DKV2);
    free(qkv); free(r); free(Q); free(K); free(V); free(R); free(Or); free(Lr); free(ofd); free(lfd);
    free(o2); free(l2); free(of); free(lf); free(oa); free(la); free(ob); free(lb);
    free(g2); free(dqkv); free(dq); free(dkv1); free(dkv2);
}

/* Causal key blocks past every query: every row fully masked. */
static void masked_case(int d, int s, float p, uint64_t seed)
{
    const int nh = 3, sk = 13;
    const int64_t T = (int64_t)s * B, W = (int64_t)nh * d, C3 = 3 * W;
    char what[256];
    float *qkv = xmalloc(sizeof(float) * (size_t)(T * C3)), *r = xmalloc(sizeof(float) * (size_t)(T * W));
    tu_rand(qkv, T * C3, seed, 1.5f);
    tu_rand(r, T * W, seed + 100, 1.0f);
    float *kvx = xmalloc(sizeof(float) * (size_t)(sk * B * 2 * W));
    tu_rand(kvx, (int64_t)sk * B * 2 * W, seed + 5, 1.5f);
    sw_tensor *QKV = tu_tensor("qkv", T, C3, qkv), *DO = tu_tensor("dout", T, W, r);
    sw_tensor *KV = tu_tensor("kv_late", (int64_t)sk * B, 2 * W, kvx);
    sw_tensor *O = tu_tensor("o", T, W, NULL), *L = tu_tensor("lse", T, nh, NULL);
    sw_tensor *O0 = tu_tensor("o0", T, W, NULL), *L0 = tu_tensor("lse0", T, nh, NULL);
    sw_tensor_fill(O0, NAN);
    sw_tensor_fill(L0, NAN);
    /* an all-masked tile alone: o = 0, lse = -inf; merged with another: unchanged */
    sw_attn_args a = make_args(nh, d, s, sk, 0, s, 1, p, 0, nh, s + sk, 0, 0);
    sw_attn_fwd(QT(0), sw_tensor_tiles(KV, SW_COLS, 2, STARPU_R)[0], sw_tensor_tiles(KV, SW_COLS, 2, STARPU_R)[1],
                WH(O0, STARPU_W), WH(L0, STARPU_W), &a);
    a.merge = 1;
    sw_attn_fwd(QT(0), sw_tensor_tiles(KV, SW_COLS, 2, STARPU_R)[0], sw_tensor_tiles(KV, SW_COLS, 2, STARPU_R)[1],
                WH(O0, STARPU_RW), WH(L0, STARPU_RW), &a);
    float *o0 = tu_read(O0), *l0 = tu_read(L0);
    int ok = 1;
    for (int64_t i = 0; i < T * W; i++) ok &= o0[i] == 0.0f;
    for (int64_t i = 0; i < T * nh; i++) ok &= l0[i] == -INFINITY;
    tu_true("fully masked tile, merged with a fully masked tile: o = 0, lse = -inf, no NaN", ok);

    /* a real result, then merge the all-masked tile into it: bitwise unchanged */
    a = make_args(nh, d, s, s, 0, 0, 1, p, 0, nh, s + sk, 0, 0);
    sw_attn_fwd(QT(0), QT(1), QT(2), WH(O, STARPU_W), WH(L, STARPU_W), &a);
    float *o1 = tu_read(O), *l1 = tu_read(L);
    a = make_args(nh, d, s, sk, 0, s, 1, p, 0, nh, s + sk, 1, 0);
    sw_attn_fwd(QT(0), sw_tensor_tiles(KV, SW_COLS, 2, STARPU_R)[0], sw_tensor_tiles(KV, SW_COLS, 2, STARPU_R)[1],
                WH(O, STARPU_RW), WH(L, STARPU_RW), &a);
    float *o2 = tu_read(O), *l2 = tu_read(L);
    tu_true("merging a fully masked tile into o leaves it bitwise unchanged", all_equal(o1, o2, T * W));
    tu_true("merging a fully masked tile into lse leaves it bitwise unchanged", all_equal(l1, l2, T * nh));
    /* merging the real result into the all-masked one gives it exactly */
    a = make_args(nh, d, s, s, 0, 0, 1, p, 0, nh, s + sk, 1, 0);
    sw_attn_fwd(QT(0), QT(1), QT(2), WH(O0, STARPU_RW), WH(L0, STARPU_RW), &a);
    float *o3 = tu_read(O0), *l3 = tu_read(L0);
    tu_true("merging into a fully masked o/lse takes the tile's result (o)", all_equal(o1, o3, T * W));
    tu_true("merging into a fully masked o/lse takes the tile's result (lse)", all_equal(l1, l3, T * nh));

    /* backward over the all-masked key block: accumulate 1 leaves dq, dk, dv
     * unchanged; accumulate 0 writes zeros */
    float *g0 = xmalloc(sizeof(float) * (size_t)(T * W)), *g1 = xmalloc(sizeof(float) * (size_t)(sk * B * 2 * W));
    tu_rand(g0, T * W, seed + 9, 1.0f);
    tu_rand(g1, (int64_t)sk * B * 2 * W, seed + 10, 1.0f);
    sw_tensor *DQ = tu_tensor("dq", T, W, g0), *DKV = tu_tensor("dkv", (int64_t)sk * B, 2 * W, g1);
    a = make_args(nh, d, s, sk, 0, s, 1, p, 0, nh, s + sk, 0, 1);
    sw_attn_bwd(QT(0), sw_tensor_tiles(KV, SW_COLS, 2, STARPU_R)[0], sw_tensor_tiles(KV, SW_COLS, 2, STARPU_R)[1],
                WH(O, STARPU_R), WH(L, STARPU_R), WH(DO, STARPU_R), WH(DQ, STARPU_RW),
                sw_tensor_tiles(DKV, SW_COLS, 2, STARPU_RW)[0], sw_tensor_tiles(DKV, SW_COLS, 2, STARPU_RW)[1], &a);
    float *dq = tu_read(DQ), *dkv = tu_read(DKV);
    tu_true("bwd over a fully masked key block, accumulate=1: dq unchanged", all_equal(dq, g0, T * W));
    tu_true("bwd over a fully masked key block, accumulate=1: dk, dv unchanged",
            all_equal(dkv, g1, (int64_t)sk * B * 2 * W));
    sw_tensor_fill(DQ, NAN);
    sw_tensor_fill(DKV, NAN);
    a.accumulate = 0;
    sw_attn_bwd(QT(0), sw_tensor_tiles(KV, SW_COLS, 2, STARPU_R)[0], sw_tensor_tiles(KV, SW_COLS, 2, STARPU_R)[1],
                WH(O, STARPU_R), WH(L, STARPU_R), WH(DO, STARPU_R), WH(DQ, STARPU_W),
                sw_tensor_tiles(DKV, SW_COLS, 2, STARPU_W)[0], sw_tensor_tiles(DKV, SW_COLS, 2, STARPU_W)[1], &a);
    free(dq);
    free(dkv);
    dq = tu_read(DQ);
    dkv = tu_read(DKV);
    ok = 1;
    for (int64_t i = 0; i < T * W; i++) ok &= dq[i] == 0.0f;
    for (int64_t i = 0; i < (int64_t)sk * B * 2 * W; i++) ok &= dkv[i] == 0.0f;
    snprintf(what, sizeof what, "bwd over a fully masked key block, accumulate=0 (NaN before): dq = dk = dv = 0");
    tu_true(what, ok);
    sw_tensor_free(QKV); sw_tensor_free(DO); sw_tensor_free(KV); sw_tensor_free(O); sw_tensor_free(L);
    sw_tensor_free(O0); sw_tensor_free(L0); sw_tensor_free(DQ); sw_tensor_free(DKV);
    free(qkv); free(r); free(kvx); free(o0); free(l0); free(o1); free(l1); free(o2); free(l2); free(o3);
    free(l3); free(g0); free(g1); free(dq); free(dkv);
}

/* ---------------- grouped-query attention ---------------- */

/* Columns c0..c0+w-1 of a [rows, lda] and b [rows, ldb] checked close (b
 * as the reference). */
static void check_cols(const char *what, const float *a, int64_t lda, int64_t ca, const float *b, int64_t ldb,
                       int64_t cb, int64_t rows, int64_t w, double rtol, double arel)
{
    float *x = xmalloc(sizeof(float) * (size_t)(rows * w));
    for (int64_t r = 0; r < rows; r++) memcpy(x + r * w, a + r * lda + ca, sizeof(float) * (size_t)w);
    double *y = cols_to_double(b, rows, ldb, cb, w);
    check_f(what, x, y, rows * w, rtol, arel);
    free(x);
    free(y);
}

/* nh query heads, nkv K/V heads: qkv[T, (nh + 2 nkv) d] = [q | k | v], query
 * head j reads K/V head j / (nh / nkv). One task over all heads, checked
 * against the reference (forward) and finite differences (backward); then,
 * for G > 1, the heads in G tasks of nh/G query heads: a task covering
 * whole K/V groups gets its own K/V heads; tasks splitting a K/V group share
 * its K/V head, the later ones with kv_accumulate = 1; checked against the
 * one task (dk, dv also with kv_accumulate = 1 on every task, from random
 * starting values, while dq is written: accumulate = 0, NaN before). */
static void gqa_case(int d, int nh, int nkv, int G, int s, int causal, float p, uint64_t seed)
{
    const int64_t T = (int64_t)s * B, W = (int64_t)nh * d, Wkv = (int64_t)nkv * d, C = W + 2 * Wkv;
    const int nht = nh / G, grp = nh / nkv;
    const int nkvt = nht >= grp ? nht / grp : 1, NKV = nkv / nkvt; /* K/V heads per task, K/V tiles */
    if (nht % grp != 0 && grp % nht != 0) {
        fprintf(stderr, "gqa_case: %d query heads per task neither hold nor split whole K/V groups of %d\n", nht, grp);
        exit(99);
    }
    char what[256], tag[160];
    snprintf(tag, sizeof tag, "gqa d=%d nh=%d nkv=%d tasks=%d s=%d causal=%d p=%.1f", d, nh, nkv, G, s, causal, p);
    float *qkv = xmalloc(sizeof(float) * (size_t)(T * C)), *r = xmalloc(sizeof(float) * (size_t)(T * W));
    tu_rand(qkv, T * C, seed, 1.5f);
    tu_rand(r, T * W, seed + 100, 1.0f);
    double *Q = cols_to_double(qkv, T, C, 0, W), *K = cols_to_double(qkv, T, C, W, Wkv);
    double *V = cols_to_double(qkv, T, C, W + Wkv, Wkv), *R = to_double(r, T * W);
    ref_cfg c = {nh, d, causal, (double)(1.0f / sqrtf((float)d)), p, s, nkv};
    double *Or = xmalloc(sizeof(double) * (size_t)(T * W)), *Lr = xmalloc(sizeof(double) * (size_t)(T * nh));
    ref_fwd(&c, Q, K, V, s, 0, s, 0, Or, Lr);

    sw_tensor *QKV = tu_tensor("qkv", T, C, qkv), *DO = tu_tensor("dout", T, W, r);
    sw_tensor *O1 = tu_tensor("o_one", T, W, NULL), *L1 = tu_tensor("lse_one", T, nh, NULL);
    sw_tensor *D1 = tu_tensor("dqkv_one", T, C, NULL);
    sw_tensor_fill(O1, NAN);
    sw_tensor_fill(L1, NAN);
    sw_tensor_fill(D1, NAN);
    const int64_t sz1[3] = {W, Wkv, Wkv};
    /* one task over all heads */
    sw_attn_args a = make_args(nh, d, s, s, 0, 0, causal, p, 0, nh, s, 0, 0);
    a.nkv = nkv;
    starpu_data_handle_t *t = sw_tensor_split(QKV, SW_COLS, 3, sz1, STARPU_R);
    sw_attn_fwd(t[0], t[1], t[2], WH(O1, STARPU_W), WH(L1, STARPU_W), &a);
    starpu_data_handle_t *dt = sw_tensor_split(D1, SW_COLS, 3, sz1, STARPU_W);
    sw_attn_bwd(t[0], t[1], t[2], WH(O1, STARPU_R), WH(L1, STARPU_R), WH(DO, STARPU_R), dt[0], dt[1], dt[2], &a);
    float *o1 = tu_read(O1), *l1 = tu_read(L1), *d1 = tu_read(D1);
    snprintf(what, sizeof what, "attn fwd o (%s)", tag);
    check_f(what, o1, Or, T * W, 1e-4, 1e-5);
    snprintf(what, sizeof what, "attn fwd lse (%s)", tag);
    check_lse(what, l1, Lr, T * nh);
    static const char *nm[3] = {"dq", "dk", "dv"};
    const int64_t gcol[3] = {0, W, W + Wkv};
    for (int w = 0; w < 3; w++) {
        snprintf(what, sizeof what, "attn bwd %s vs finite differences (%s)", nm[w], tag);
        fd_check(what, &c, Q, K, V, R, s, w, d1, C, gcol[w]);
    }

    if (G > 1) {
        /* G query tiles, then the K tiles, then the V tiles */
        int64_t sizes[64];
        for (int g = 0; g < G; g++) sizes[g] = (int64_t)nht * d;
        for (int k = 0; k < 2 * NKV; k++) sizes[G + k] = (int64_t)nkvt * d;
        sw_tensor *O = tu_tensor("o", T, W, NULL), *L = tu_tensor("lse", T, nh, NULL);
        sw_tensor *DQKV = tu_tensor("dqkv", T, C, NULL);
        sw_tensor_fill(O, NAN);
        sw_tensor_fill(L, NAN);
        float *start = xmalloc(sizeof(float) * (size_t)(T * C));
        for (int pass = 0; pass < 2; pass++) {
            /* pass 0: dq, dk, dv NaN before, kv_accumulate on the tasks that
             * share a K/V tile with an earlier one; pass 1: dk, dv from
             * random values, kv_accumulate on every task */
            if (pass == 0) {
                sw_tensor_fill(DQKV, NAN);
            } else {
                tu_rand(start, T * C, seed + 200, 1.0f);
                for (int64_t row = 0; row < T; row++)
                    for (int64_t x = 0; x < W; x++) start[row * C + x] = NAN;
                sw_tensor_write_host(DQKV, start);
            }
            for (int g = 0; g < G; g++) {
                const int kvt = (g * nht / grp) / nkvt;
                t = sw_tensor_split(QKV, SW_COLS, G + 2 * NKV, sizes, STARPU_R);
                a = make_args(nht, d, s, s, 0, 0, causal, p, g * nht, nh, s, 0, 0);
                a.nkv = nkvt;
                if (pass == 0)
                    sw_attn_fwd(t[g], t[G + kvt], t[G + NKV + kvt], sw_tensor_tiles(O, SW_COLS, G, STARPU_W)[g],
                                sw_tensor_tiles(L, SW_COLS, G, STARPU_W)[g], &a);
                a.kv_accumulate = pass == 1 || (g * nht) % grp != 0;
                t = sw_tensor_split(QKV, SW_COLS, G + 2 * NKV, sizes, STARPU_R);
                dt = sw_tensor_split(DQKV, SW_COLS, G + 2 * NKV, sizes, STARPU_W);
                sw_attn_bwd(t[g], t[G + kvt], t[G + NKV + kvt], sw_tensor_tiles(O, SW_COLS, G, STARPU_R)[g],
                            sw_tensor_tiles(L, SW_COLS, G, STARPU_R)[g], sw_tensor_tiles(DO, SW_COLS, G, STARPU_R)[g],
                            dt[g], dt[G + kvt], dt[G + NKV + kvt], &a);
            }
            float *dg = tu_read(DQKV);
            if (pass == 0) {
                float *o = tu_read(O), *l = tu_read(L);
                snprintf(what, sizeof what, "%d tasks: fwd o vs reference (%s)", G, tag);
                check_f(what, o, Or, T * W, 1e-4, 1e-5);
                double *ld = to_double(l1, T * nh);
                snprintf(what, sizeof what, "%d tasks: fwd lse = one task (%s)", G, tag);
                check_lse(what, l, ld, T * nh);
                free(ld);
                free(o);
                free(l);
                snprintf(what, sizeof what, "%d tasks: dq = one task (%s)", G, tag);
                check_cols(what, dg, C, 0, d1, C, 0, T, W, 1e-5, 1e-6);
                snprintf(what, sizeof what, "%d tasks, later ones kv_accumulate=1: dk, dv = one task (%s)", G, tag);
                check_cols(what, dg, C, W, d1, C, W, T, 2 * Wkv, 1e-5, 1e-6);
            } else {
                snprintf(what, sizeof what, "%d tasks, all kv_accumulate=1, accumulate=0: dq written (%s)", G, tag);
                check_cols(what, dg, C, 0, d1, C, 0, T, W, 1e-5, 1e-6);
                float *e = xmalloc(sizeof(float) * (size_t)(T * C));
                for (int64_t i = 0; i < T * C; i++) e[i] = start[i] + d1[i];
                snprintf(what, sizeof what, "%d tasks, all kv_accumulate=1: dk, dv = start + one task (%s)", G, tag);
                check_cols(what, dg, C, W, e, C, W, T, 2 * Wkv, 1e-5, 1e-6);
                free(e);
            }
            free(dg);
        }
        free(start);
        sw_tensor_free(O);
        sw_tensor_free(L);
        sw_tensor_free(DQKV);
    }
    sw_tensor_free(QKV); sw_tensor_free(DO); sw_tensor_free(O1); sw_tensor_free(L1); sw_tensor_free(D1);
    free(qkv); free(r); free(Q); free(K); free(V); free(R); free(Or); free(Lr); free(o1); free(l1); free(d1);
}

/* GQA with the keys in two blocks (Ring): forward block 1 (merge 0) then
 * block 2 (merge 1) = one call = reference; backward block 1 (accumulate 0)
 * then block 2 (accumulate 1; its dk, dv start from random values) = one
 * call. */
static void gqa_ring_case(int d, int nh, int nkv, int s, int s1, int causal, float p, uint64_t seed)
{
    const int64_t T = (int64_t)s * B, W = (int64_t)nh * d, Wkv = (int64_t)nkv * d, C = W + 2 * Wkv;
    const int64_t n1 = (int64_t)s1 * B, n2 = (int64_t)(s - s1) * B;
    char what[256], tag[160];
    snprintf(tag, sizeof tag, "gqa ring d=%d nh=%d nkv=%d s=%d split=%d causal=%d p=%.1f", d, nh, nkv, s, s1, causal,
             p);
    float *qkv = xmalloc(sizeof(float) * (size_t)(T * C)), *r = xmalloc(sizeof(float) * (size_t)(T * W));
    tu_rand(qkv, T * C, seed, 1.5f);
    tu_rand(r, T * W, seed + 100, 1.0f);
    double *Q = cols_to_double(qkv, T, C, 0, W), *K = cols_to_double(qkv, T, C, W, Wkv);
    double *V = cols_to_double(qkv, T, C, W + Wkv, Wkv);
    ref_cfg c = {nh, d, causal, (double)(1.0f / sqrtf((float)d)), p, s, nkv};
    double *Or = xmalloc(sizeof(double) * (size_t)(T * W)), *Lr = xmalloc(sizeof(double) * (size_t)(T * nh));
    ref_fwd(&c, Q, K, V, s, 0, s, 0, Or, Lr);

    sw_tensor *QKV = tu_tensor("qkv", T, C, qkv), *DO = tu_tensor("dout", T, W, r);
    sw_tensor *KV1 = rows_block("kv1", qkv, C, W, 2 * Wkv, 0, s1), *KV2 = rows_block("kv2", qkv, C, W, 2 * Wkv, s1, s);
    sw_tensor *Of = tu_tensor("o_full", T, W, NULL), *Lf = tu_tensor("lse_full", T, nh, NULL);
    sw_tensor *Oa = tu_tensor("o_ring", T, W, NULL), *La = tu_tensor("lse_ring", T, nh, NULL);
    sw_tensor *DF = tu_tensor("dqkv_full", T, C, NULL), *DQ = tu_tensor("dq", T, W, NULL);
    float *g2 = xmalloc(sizeof(float) * (size_t)(n2 * 2 * Wkv));
    tu_rand(g2, n2 * 2 * Wkv, seed + 7, 1.0f);
    sw_tensor *DKV1 = tu_tensor("dkv1", n1, 2 * Wkv, NULL), *DKV2 = tu_tensor("dkv2", n2, 2 * Wkv, g2);
    sw_tensor_fill(Of, NAN); sw_tensor_fill(Lf, NAN); sw_tensor_fill(Oa, NAN); sw_tensor_fill(La, NAN);
    sw_tensor_fill(DF, NAN); sw_tensor_fill(DQ, NAN); sw_tensor_fill(DKV1, NAN);
    const int64_t sz[3] = {W, Wkv, Wkv};
#define GT(x, m) sw_tensor_split(x, SW_COLS, 3, sz, m)
#define KVT(x, m, i) sw_tensor_tiles(x, SW_COLS, 2, m)[i]
    sw_attn_args a = make_args(nh, d, s, s, 0, 0, causal, p, 0, nh, s, 0, 0);
    a.nkv = nkv;
    sw_attn_fwd(GT(QKV, STARPU_R)[0], GT(QKV, STARPU_R)[1], GT(QKV, STARPU_R)[2], WH(Of, STARPU_W),
                WH(Lf, STARPU_W), &a);
    a = make_args(nh, d, s, s1, 0, 0, causal, p, 0, nh, s, 0, 0);
    a.nkv = nkv;
    sw_attn_fwd(GT(QKV, STARPU_R)[0], KVT(KV1, STARPU_R, 0), KVT(KV1, STARPU_R, 1), WH(Oa, STARPU_W),
                WH(La, STARPU_W), &a);
    a = make_args(nh, d, s, s - s1, 0, s1, causal, p, 0, nh, s, 1, 0);
    a.nkv = nkv;
    sw_attn_fwd(GT(QKV, STARPU_R)[0], KVT(KV2, STARPU_R, 0), KVT(KV2, STARPU_R, 1), WH(Oa, STARPU_RW),
                WH(La, STARPU_RW), &a);
    /* backward: one call; block 1 (accumulate 0), block 2 (accumulate 1: dq) */
    a = make_args(nh, d, s, s, 0, 0, causal, p, 0, nh, s, 0, 0);
    a.nkv = nkv;
    starpu_data_handle_t *dt = GT(DF, STARPU_W);
    sw_attn_bwd(GT(QKV, STARPU_R)[0], GT(QKV, STARPU_R)[1], GT(QKV, STARPU_R)[2], WH(Of, STARPU_R), WH(Lf, STARPU_R),
                WH(DO, STARPU_R), dt[0], dt[1], dt[2], &a);
    a = make_args(nh, d, s, s1, 0, 0, causal, p, 0, nh, s, 0, 0);
    a.nkv = nkv;
    sw_attn_bwd(GT(QKV, STARPU_R)[0], KVT(KV1, STARPU_R, 0), KVT(KV1, STARPU_R, 1), WH(Oa, STARPU_R),
                WH(La, STARPU_R), WH(DO, STARPU_R), WH(DQ, STARPU_W), KVT(DKV1, STARPU_W, 0), KVT(DKV1, STARPU_W, 1),
                &a);
    a = make_args(nh, d, s, s - s1, 0, s1, causal, p, 0, nh, s, 0, 1);
    a.nkv = nkv;
    sw_attn_bwd(GT(QKV, STARPU_R)[0], KVT(KV2, STARPU_R, 0), KVT(KV2, STARPU_R, 1), WH(Oa, STARPU_R),
                WH(La, STARPU_R), WH(DO, STARPU_R), WH(DQ, STARPU_RW), KVT(DKV2, STARPU_RW, 0),
                KVT(DKV2, STARPU_RW, 1), &a);
#undef GT
#undef KVT
    float *of = tu_read(Of), *lf = tu_read(Lf), *oa = tu_read(Oa), *la = tu_read(La);
    snprintf(what, sizeof what, "one call, o (%s)", tag);
    check_f(what, of, Or, T * W, 1e-4, 1e-5);
    snprintf(what, sizeof what, "one call, lse (%s)", tag);
    check_lse(what, lf, Lr, T * nh);
    double *ofd = to_double(of, T * W), *lfd = to_double(lf, T * nh);
    snprintf(what, sizeof what, "blocks 1 then 2 merged = one call, o (%s)", tag);
    check_f(what, oa, ofd, T * W, 2e-5, 2e-6);
    snprintf(what, sizeof what, "blocks 1 then 2 merged = one call, lse (%s)", tag);
    check_lse(what, la, lfd, T * nh);
    float *df = tu_read(DF), *dq = tu_read(DQ), *dkv1 = tu_read(DKV1);
    snprintf(what, sizeof what, "bwd: dq over two key blocks = one call (%s)", tag);
    check_cols(what, dq, W, 0, df, C, 0, T, W, 1e-4, 1e-5);
    snprintf(what, sizeof what, "bwd: dk, dv of key block 1 = one call (%s)", tag);
    check_cols(what, dkv1, 2 * Wkv, 0, df, C, W, n1, 2 * Wkv, 1e-4, 1e-5);
    float *dkv2 = tu_read(DKV2);
    float *e = xmalloc(sizeof(float) * (size_t)(n2 * 2 * Wkv));
    for (int64_t row = 0; row < n2; row++)
        for (int64_t x = 0; x < 2 * Wkv; x++) e[row * 2 * Wkv + x] = g2[row * 2 * Wkv + x] + df[(n1 + row) * C + W + x];
    snprintf(what, sizeof what, "bwd: dk, dv of key block 2 accumulated = start + one call (%s)", tag);
    check_cols(what, dkv2, 2 * Wkv, 0, e, 2 * Wkv, 0, n2, 2 * Wkv, 1e-4, 1e-5);
    free(e); free(dkv2); free(g2);
    sw_tensor_free(QKV); sw_tensor_free(DO); sw_tensor_free(KV1); sw_tensor_free(KV2);
    sw_tensor_free(Of); sw_tensor_free(Lf); sw_tensor_free(Oa); sw_tensor_free(La);
    sw_tensor_free(DF); sw_tensor_free(DQ); sw_tensor_free(DKV1); sw_tensor_free(DKV2);
    free(qkv); free(r); free(Q); free(K); free(V); free(Or); free(Lr); free(ofd); free(lfd);
    free(of); free(lf); free(oa); free(la); free(df); free(dq); free(dkv1);
}

/* ---------------- key padding ---------------- */

/* Key padding, lengths len[b] (BERT-style: the keys of sequence b at
 * positions from len[b] on are masked, its queries all attend): one call
 * against the reference and finite differences, padded keys' dk, dv exactly
 * 0; the keys in two blocks (Ring: k_pos0 = s1, merged; accumulated
 * backward) equal to the one call; the saved-probabilities path equal to
 * the flash tile; padded keys perturbed change no output bit, while
 * without key padding they change the output. */
static void pad_case(int d, int s, int s1, int causal, float p, const int len[B], uint64_t seed)
{
    const int nh = 3;
    const int64_t T = (int64_t)s * B, W = (int64_t)nh * d, C3 = 3 * W;
    char what[256], tag[160];
    snprintf(tag, sizeof tag, "key padding, lengths %d %d: d=%d s=%d split=%d causal=%d p=%.1f", len[0], len[1], d,
             s, s1, causal, p);
    float *qkv = xmalloc(sizeof(float) * (size_t)(T * C3)), *r = xmalloc(sizeof(float) * (size_t)(T * W));
    tu_rand(qkv, T * C3, seed, 1.5f);
    tu_rand(r, T * W, seed + 100, 1.0f);
    double *Q = cols_to_double(qkv, T, C3, 0, W), *K = cols_to_double(qkv, T, C3, W, W);
    double *V = cols_to_double(qkv, T, C3, 2 * W, W), *R = to_double(r, T * W);
    ref_cfg c = {nh, d, causal, (double)(1.0f / sqrtf((float)d)), p, s, 0};
    double *Or = xmalloc(sizeof(double) * (size_t)(T * W)), *Lr = xmalloc(sizeof(double) * (size_t)(T * nh));
    ref_klen = len;
    ref_fwd(&c, Q, K, V, s, 0, s, 0, Or, Lr);

    sw_tensor *QKV = tu_tensor("qkv", T, C3, qkv), *DO = tu_tensor("dout", T, W, r);
    sw_tensor *O = tu_tensor("o", T, W, NULL), *L = tu_tensor("lse", T, nh, NULL);
    sw_tensor *DQKV = tu_tensor("dqkv", T, C3, NULL);
    sw_tensor_fill(O, NAN);
    sw_tensor_fill(L, NAN);
    sw_tensor_fill(DQKV, NAN);
#define PQ(i) sw_tensor_tiles(QKV, SW_COLS, 3, STARPU_R)[i]
#define PW(t, m) sw_tensor_whole(t, m)
    sw_attn_args a = make_args(nh, d, s, s, 0, 0, causal, p, 0, nh, s, 0, 0);
    a.key_padding = 1;
    for (int b = 0; b < B; b++) a.key_len[b] = len[b];
    sw_attn_fwd(PQ(0), PQ(1), PQ(2), PW(O, STARPU_W), PW(L, STARPU_W), &a);
    starpu_data_handle_t *dt = sw_tensor_tiles(DQKV, SW_COLS, 3, STARPU_W);
    sw_attn_bwd(PQ(0), PQ(1), PQ(2), PW(O, STARPU_R), PW(L, STARPU_R), PW(DO, STARPU_R), dt[0], dt[1], dt[2], &a);
    float *o = tu_read(O), *l = tu_read(L), *dqkv = tu_read(DQKV);
    snprintf(what, sizeof what, "attn fwd o (%s)", tag);
    check_f(what, o, Or, T * W, 1e-4, 1e-5);
    snprintf(what, sizeof what, "attn fwd lse (%s)", tag);
    check_lse(what, l, Lr, T * nh);
    static const char *nm[3] = {"dq", "dk", "dv"};
    for (int w = 0; w < 3; w++) {
        snprintf(what, sizeof what, "attn bwd %s vs finite differences (%s)", nm[w], tag);
        fd_check(what, &c, Q, K, V, R, s, w, dqkv, C3, w * W);
    }
    int zero = 1;
    for (int b = 0; b < B; b++)
        for (int64_t pos = len[b]; pos < s; pos++)
            for (int64_t x = W; x < C3; x++) zero &= dqkv[(pos * B + b) * C3 + x] == 0.0f;
    snprintf(what, sizeof what, "padded keys: dk, dv exactly 0 (%s)", tag);
    tu_true(what, zero);

    /* Ring: the keys in two blocks, merged forward, accumulated backward */
    sw_tensor *KV1 = kv_block("kv1", qkv, W, 0, s1), *KV2 = kv_block("kv2", qkv, W, s1, s);
    sw_tensor *Oa = tu_tensor("o_ring", T, W, NULL), *La = tu_tensor("lse_ring", T, nh, NULL);
    sw_tensor *DQ = tu_tensor("dq", T, W, NULL), *DKV1 = tu_tensor("dkv1", (int64_t)s1 * B, 2 * W, NULL);
    sw_tensor *DKV2 = tu_tensor("dkv2", (int64_t)(s - s1) * B, 2 * W, NULL);
    sw_tensor_fill(Oa, NAN);
    sw_tensor_fill(La, NAN);
    sw_tensor_fill(DQ, NAN);
    sw_tensor_fill(DKV1, NAN);
    sw_tensor_fill(DKV2, 0.0f);
    sw_attn_args a1 = a, a2 = a;
    a1.sk = s1;
    a2.sk = s - s1, a2.k_pos0 = s1, a2.merge = 1;
    starpu_data_handle_t *k1 = sw_tensor_tiles(KV1, SW_COLS, 2, STARPU_R), *k2 = sw_tensor_tiles(KV2, SW_COLS, 2, STARPU_R);
    sw_attn_fwd(PQ(0), k1[0], k1[1], PW(Oa, STARPU_W), PW(La, STARPU_W), &a1);
    sw_attn_fwd(PQ(0), k2[0], k2[1], PW(Oa, STARPU_RW), PW(La, STARPU_RW), &a2);
    a2.merge = 0, a2.accumulate = 1;
    starpu_data_handle_t *d1 = sw_tensor_tiles(DKV1, SW_COLS, 2, STARPU_W);
    sw_attn_bwd(PQ(0), k1[0], k1[1], PW(Oa, STARPU_R), PW(La, STARPU_R), PW(DO, STARPU_R), PW(DQ, STARPU_W), d1[0],
                d1[1], &a1);
    starpu_data_handle_t *d2 = sw_tensor_tiles(DKV2, SW_COLS, 2, STARPU_RW);
    sw_attn_bwd(PQ(0), k2[0], k2[1], PW(Oa, STARPU_R), PW(La, STARPU_R), PW(DO, STARPU_R), PW(DQ, STARPU_RW), d2[0],
                d2[1], &a2);
    float *oa = tu_read(Oa), *la = tu_read(La), *dq = tu_read(DQ), *dkv1 = tu_read(DKV1), *dkv2 = tu_read(DKV2);
    double *od = to_double(o, T * W), *ld = to_double(l, T * nh);
    snprintf(what, sizeof what, "ring: two key blocks merged = one call, o (%s)", tag);
    check_f(what, oa, od, T * W, 2e-5, 2e-6);
    snprintf(what, sizeof what, "ring: two key blocks merged = one call, lse (%s)", tag);
    check_lse(what, la, ld, T * nh);
    snprintf(what, sizeof what, "ring: dq accumulated over the blocks = one call (%s)", tag);
    check_cols(what, dq, W, 0, dqkv, C3, 0, T, W, 2e-5, 2e-6);
    snprintf(what, sizeof what, "ring: dk, dv of block 1 = one call (%s)", tag);
    check_cols(what, dkv1, 2 * W, 0, dqkv, C3, W, (int64_t)s1 * B, 2 * W, 2e-5, 2e-6);
    snprintf(what, sizeof what, "ring: dk, dv of block 2 = one call (%s)", tag);
    check_cols(what, dkv2, 2 * W, 0, dqkv + (int64_t)s1 * B * C3, C3, W, (int64_t)(s - s1) * B, 2 * W, 2e-5, 2e-6);

    /* the saved-probabilities path = the flash tile */
    sw_tensor *Op = tu_tensor("o_probs", T, W, NULL), *Lp = tu_tensor("lse_probs", T, nh, NULL);
    sw_tensor *P = tu_tensor("probs", (int64_t)B * nh * s, s, NULL), *DQKVp = tu_tensor("dqkv_probs", T, C3, NULL);
    sw_tensor_fill(Op, NAN);
    sw_tensor_fill(Lp, NAN);
    sw_tensor_fill(P, NAN);
    sw_tensor_fill(DQKVp, NAN);
    sw_attn_probs_fwd(PQ(0), PQ(1), PQ(2), PW(Op, STARPU_W), PW(Lp, STARPU_W), PW(P, STARPU_W), &a);
    starpu_data_handle_t *dp = sw_tensor_tiles(DQKVp, SW_COLS, 3, STARPU_W);
    sw_attn_probs_bwd(PQ(0), PQ(1), PQ(2), PW(P, STARPU_R), PW(DO, STARPU_R), dp[0], dp[1], dp[2], &a);
    float *op = tu_read(Op), *lp = tu_read(Lp), *pp = tu_read(P), *dqkvp = tu_read(DQKVp);
    snprintf(what, sizeof what, "saved probabilities = flash tile, o (%s)", tag);
    check_f(what, op, od, T * W, 2e-5, 2e-6);
    snprintf(what, sizeof what, "saved probabilities = flash tile, lse (%s)", tag);
    check_lse(what, lp, ld, T * nh);
    snprintf(what, sizeof what, "saved probabilities = flash tile, dq, dk, dv (%s)", tag);
    check_cols(what, dqkvp, C3, 0, dqkv, C3, 0, T, C3, 2e-5, 2e-6);
    zero = 1;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < nh; h++)
            for (int64_t i = 0; i < s; i++)
                for (int64_t j = len[b]; j < s; j++) zero &= pp[(((int64_t)b * nh + h) * s + i) * s + j] == 0.0f;
    snprintf(what, sizeof what, "saved probabilities: padded keys 0 (%s)", tag);
    tu_true(what, zero);

    /* padded keys perturbed: no output bit changes; without key padding the output changes */
    float *qkv2 = xmalloc(sizeof(float) * (size_t)(T * C3));
    memcpy(qkv2, qkv, sizeof(float) * (size_t)(T * C3));
    int padded = 0;
    for (int b = 0; b < B; b++)
        for (int64_t pos = len[b]; pos < s; pos++, padded++)
            for (int64_t x = W; x < C3; x++) qkv2[(pos * B + b) * C3 + x] += 3.0f;
    if (padded) {
        sw_tensor *QKV2 = tu_tensor("qkv_perturbed", T, C3, qkv2), *O2 = tu_tensor("o2", T, W, NULL);
        sw_tensor *L2 = tu_tensor("lse2", T, nh, NULL), *O3 = tu_tensor("o3", T, W, NULL), *O4 = tu_tensor("o4", T, W, NULL);
        starpu_data_handle_t *t2 = sw_tensor_tiles(QKV2, SW_COLS, 3, STARPU_R);
        sw_attn_fwd(t2[0], t2[1], t2[2], PW(O2, STARPU_W), PW(L2, STARPU_W), &a);
        float *o2 = tu_read(O2);
        snprintf(what, sizeof what, "padded keys perturbed: o unchanged, bit for bit (%s)", tag);
        tu_true(what, all_equal(o, o2, T * W));
        sw_attn_args u = a;
        u.key_padding = 0;
        sw_attn_fwd(PQ(0), PQ(1), PQ(2), PW(O3, STARPU_W), PW(L2, STARPU_W), &u);
        float *o3 = tu_read(O3);
        t2 = sw_tensor_tiles(QKV2, SW_COLS, 3, STARPU_R);
        sw_attn_fwd(t2[0], t2[1], t2[2], PW(O4, STARPU_W), PW(L2, STARPU_W), &u);
        float *o4 = tu_read(O4);
        snprintf(what, sizeof what, "without key padding the same keys perturbed change o (%s)", tag);
        tu_true(what, !all_equal(o3, o4, T * W));
        sw_tensor_free(QKV2); sw_tensor_free(O2); sw_tensor_free(L2); sw_tensor_free(O3); sw_tensor_free(O4);
        free(o2); free(o3); free(o4);
    }
#undef PQ
#undef PW
    ref_klen = NULL;
    sw_tensor_free(QKV); sw_tensor_free(DO); sw_tensor_free(O); sw_tensor_free(L); sw_tensor_free(DQKV);
    sw_tensor_free(KV1); sw_tensor_free(KV2); sw_tensor_free(Oa); sw_tensor_free(La); sw_tensor_free(DQ);
    sw_tensor_free(DKV1); sw_tensor_free(DKV2); sw_tensor_free(Op); sw_tensor_free(Lp); sw_tensor_free(P);
    sw_tensor_free(DQKVp);
    free(qkv); free(r); free(Q); free(K); free(V); free(R); free(Or); free(Lr); free(o); free(l); free(dqkv);
    free(oa); free(la); free(dq); free(dkv1); free(dkv2); free(od); free(ld); free(op); free(lp); free(pp);
    free(dqkvp); free(qkv2);
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    uint64_t seed = 11;
    /* 3 heads in one task; q/k/v = the 3 column tiles of qkv */
    for (int d = 8; d <= 16; d += 8)
        for (int causal = 0; causal < 2; causal++)
            for (int pi = 0; pi < 2; pi++) run_case(d, 3, 1, 70, causal, pi ? 0.2f : 0.0f, seed++);
    /* 6 heads in two head groups of 3 (two tasks, head0 = 3 for the second) */
    run_case(16, 6, 2, 70, 1, 0.2f, seed++);
    run_case(8, 6, 2, 70, 0, 0.0f, seed++);
    /* Ring: keys split in two blocks via k_pos0 */
    ring_case(16, 83, 29, 1, 0.0f, seed++);
    ring_case(8, 83, 29, 1, 0.2f, seed++);
    ring_case(16, 83, 67, 0, 0.2f, seed++);
    ring_case(8, 83, 41, 0, 0.0f, seed++);
    /* fully masked rows */
    masked_case(16, 37, 0.0f, seed++);
    masked_case(8, 37, 0.2f, seed++);
    /* grouped-query attention: nkv < nh; nkv == nh given explicitly */
    gqa_case(8, 4, 2, 1, 70, 1, 0.0f, seed++);
    gqa_case(16, 4, 1, 1, 70, 0, 0.2f, seed++);
    gqa_case(8, 4, 4, 2, 70, 1, 0.2f, seed++);
    /* query heads in tasks: whole K/V groups per task (4 heads, 2 K/V in 2
     * tasks; 6 heads, 3 K/V in 3 tasks), and K/V heads shared by tasks, the
     * later ones with kv_accumulate (4 heads, 1 K/V in 2 and in 4 tasks; 6
     * heads, 1 K/V in 3 tasks) */
    gqa_case(16, 4, 2, 2, 70, 1, 0.2f, seed++);
    gqa_case(8, 6, 3, 3, 70, 0, 0.0f, seed++);
    gqa_case(8, 4, 1, 2, 70, 1, 0.0f, seed++);
    gqa_case(16, 4, 1, 4, 70, 0, 0.2f, seed++);
    gqa_case(8, 6, 1, 3, 70, 1, 0.2f, seed++);
    /* GQA + Ring (merge forward, accumulate backward) */
    gqa_ring_case(16, 4, 2, 83, 29, 1, 0.0f, seed++);
    gqa_ring_case(8, 4, 1, 83, 41, 0, 0.2f, seed++);
    gqa_ring_case(8, 6, 3, 83, 67, 1, 0.2f, seed++);
    /* key padding: lengths 1 and s, across the key block (64), the second
     * Ring block wholly padded for one sequence; causal and not, dropout */
    pad_case(16, 70, 29, 0, 0.0f, (const int[B]){1, 70}, seed++);
    pad_case(8, 70, 41, 1, 0.0f, (const int[B]){66, 23}, seed++);
    pad_case(16, 70, 35, 1, 0.2f, (const int[B]){70, 1}, seed++);
    pad_case(8, 70, 64, 0, 0.2f, (const int[B]){40, 65}, seed++);
    return tu_finish();
}
