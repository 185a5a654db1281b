/* The DiT layers (dit.h) under mpirun, against a double-precision
 * reference of the whole batch that every rank computes: run by
 * tests/test_dit.sh as test_dit_layers [--tp T [--sp]] [--ulysses U]
 * [--ring R [--zigzag]].
 *  - adaLN-Zero: out = res + gate (x (1 + scale) + shift) on this rank's l
 *    rows, mod = c W^T + b per sequence: out and dx on its rows; dmod's
 *    per-rank sums all-reduced by sw_adaln_backward over the ranks holding
 *    the other positions (TP with sp, Ulysses, Ring), so dc and the
 *    replicated weight gradients on B rows (times ulysses x ring, the registry's sum
 *    over the gradient group) equal the whole batch's on every rank;
 *  - cross-attention (tp 1): each rank's queries (its positions) against
 *    the whole conditioning: out and dq on its rows, dk | dv summed over the
 *    ranks equal to the whole batch's;
 *  - the K/V projection (sw_cross_kv, with bias) into cross-attention, every
 *    layout: kv of this TP rank's heads, the output on its positions and
 *    heads; dW and db, each rank's part, summed by the registry over the
 *    gradient group (sw_params_reduce_grads) = the whole batch's rows of
 *    this TP rank's heads; dcond summed over every rank (its heads, its
 *    queries) = the whole batch's; no byte sent by the layers;
 *  - spatial and temporal attention: this rank's positions and TP rank's
 *    heads, the temporal all-to-all over a split sequence and its bytes
 *    against the traffic model; with --refuse, its refusal of a zigzag
 *    split. */
#include <string.h>

#include "testutil.h"

enum { FR = 4, PA = 4, SEQ = FR * PA, NB = 2, H = 8, CD = 3, K = 3, A = 2, D = 4, AD = A * D, L = 3 };

static int flag(int argc, char **argv, const char *name, int dflt)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], name)) return i + 1 < argc && argv[i + 1][0] != '-' ? atoi(argv[i + 1]) : 1;
    return dflt;
}

static float *rnd(int64_t n, uint64_t seed, float scale)
{
    float *v = malloc(sizeof(float) * (size_t)n);
    tu_rand(v, n, seed, scale);
    return v;
}

/* the global row (position p, sample b) of row r of this rank's l rows (l = 1) or T rows (l = 0) */
static int64_t global_row(const sw_ctx *x, int64_t r, int l)
{
    const int64_t t = (l ? x->row0 : 0) + r, i = t / x->B, b = t % x->B;
    return sw_ctx_position(x, i) * NB + b;
}

/* rows of a [SEQ NB, n] global array that this rank holds, against got [rows, n] */
static void close_rows(const sw_ctx *x, const char *what, const float *got, const double *ref, int64_t rows, int n,
                       int l, double rtol, double atol)
{
    double *sel = malloc(sizeof(double) * (size_t)(rows * n));
    for (int64_t r = 0; r < rows; r++) memcpy(sel + r * n, ref + global_row(x, r, l) * n, sizeof(double) * n);
    char w[200];
    snprintf(w, sizeof w, "rank %d: %s", sw_rank(), what);
    tu_close(w, got, sel, rows * n, rtol, atol);
    free(sel);
}

static void adaln_case(sw_ctx *x, sw_params *p)
{
    float *xg = rnd(SEQ * NB * H, 1, 2.0f), *rg = rnd(SEQ * NB * H, 2, 1.0f), *dg = rnd(SEQ * NB * H, 3, 1.0f);
    float *cg = rnd(NB * CD, 4, 1.0f), *w = rnd(K * H * CD, 5, 0.5f), *bias = rnd(K * H, 6, 0.5f);
    /* reference: mod, out, dx, dmod, dc, dW, db of the whole batch */
    static double mod[NB * K * H], out[SEQ * NB * H], dx[SEQ * NB * H], dmod[NB * K * H], dc[NB * CD], dw[K * H * CD],
        db[K * H];
    memset(dmod, 0, sizeof dmod), memset(dc, 0, sizeof dc), memset(dw, 0, sizeof dw), memset(db, 0, sizeof db);
    for (int b = 0; b < NB; b++)
        for (int o = 0; o < K * H; o++) {
            double s = bias[o];
            for (int i = 0; i < CD; i++) s += (double)cg[b * CD + i] * w[o * CD + i];
            mod[b * K * H + o] = s;
        }
    for (int r = 0; r < SEQ * NB; r++)
        for (int c = 0; c < H; c++) {
            const double *m = mod + (r % NB) * K * H, xv = xg[r * H + c], d = dg[r * H + c];
            const double y = xv * (1 + m[H + c]) + m[c];
            out[r * H + c] = rg[r * H + c] + m[2 * H + c] * y;
            dx[r * H + c] = d * m[2 * H + c] * (1 + m[H + c]);
            double *dm = dmod + (r % NB) * K * H;
            dm[c] += d * m[2 * H + c], dm[H + c] += d * m[2 * H + c] * xv, dm[2 * H + c] += d * y;
        }
    for (int b = 0; b < NB; b++)
        for (int o = 0; o < K * H; o++) {
            db[o] += dmod[b * K * H + o];
            for (int i = 0; i < CD; i++) dw[o * CD + i] += dmod[b * K * H + o] * cg[b * CD + i], dc[b * CD + i] += dmod[b * K * H + o] * w[o * CD + i];
        }
    sw_adaln a = sw_adaln_add(x, "ada", CD, H, K);
    sw_params_allocate(p);
    sw_tensor_write_host(sw_params_value(p, a.lin.w), w), sw_tensor_write_host(sw_params_value(p, a.lin.b), bias);
    const int64_t l = x->resid_rows;
    sw_tensor *X = tu_tensor("x", l, H, NULL), *R = tu_tensor("res", l, H, NULL), *DO = tu_tensor("dout", l, H, NULL);
    sw_tensor *C = tu_tensor("c", x->B, CD, NULL), *M = tu_tensor("mod", x->B, K * H, NULL), *Y = tu_tensor("y", l, H, NULL);
    sw_tensor *O = tu_tensor("out", l, H, NULL), *DB = tu_tensor("dbr", l, H, NULL), *DX = tu_tensor("dx", l, H, NULL);
    sw_tensor *DM = tu_tensor("dmod", x->B, K * H, NULL);
    sw_ctx_load_floats(x, 0, xg, H, X), sw_ctx_load_floats(x, 0, rg, H, R), sw_ctx_load_floats(x, 0, dg, H, DO);
    sw_ctx_load_seq_targets(x, 0, cg, C);
    sw_adaln_forward(x, &a, C, M);
    sw_modulate_forward(x, X, M, 0, 1, Y);
    sw_gate_forward(x, R, Y, M, 2, O);
    sw_gate_backward(x, DO, Y, M, 2, DB, DM);
    sw_modulate_backward(x, DB, X, M, 0, 1, DX, DM);
    sw_tensor *DC = sw_adaln_backward(x, &a, DM, C);
    float *got = tu_read(O);
    close_rows(x, "adaLN out on this rank's l rows", got, out, l, H, 1, 1e-5, 1e-6);
    free(got), got = tu_read(DX);
    close_rows(x, "adaLN dx on this rank's l rows", got, dx, l, H, 1, 1e-5, 1e-6);
    free(got), got = tu_read(DC);
    char what[160];
    snprintf(what, sizeof what, "rank %d: adaLN dc, the whole sequences' (dmod all-reduced)", sw_rank());
    tu_close(what, got, dc, NB * CD, 1e-5, 1e-5);
    free(got);
    const float s = (float)(x->ulysses * x->ring); /* B rows: scaled by 1/(ulysses ring) for the registry's sum */
    float gw[K * H * CD], gb[K * H];
    sw_tensor_read_host(sw_params_grad(p, a.lin.w), gw), sw_tensor_read_host(sw_params_grad(p, a.lin.b), gb);
    for (int i = 0; i < K * H * CD; i++) gw[i] *= s;
    for (int i = 0; i < K * H; i++) gb[i] *= s;
    snprintf(what, sizeof what, "rank %d: adaLN dW x (ulysses ring) = the whole batch's", sw_rank());
    tu_close(what, gw, dw, K * H * CD, 1e-5, 1e-5);
    snprintf(what, sizeof what, "rank %d: adaLN db x (ulysses ring) = the whole batch's", sw_rank());
    tu_close(what, gb, db, K * H, 1e-5, 1e-5);
    sw_tensor *all[] = {X, R, DO, C, M, Y, O, DB, DX, DM};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) sw_tensor_free(all[i]);
    free(xg), free(rg), free(dg), free(cg), free(w), free(bias);
}

/* softmax attention of query row q (in qs, stride qc) against key rows keys[0..n) (k at ko, v at vo of kvs) */
static void attend(const float *qs, int64_t qc, int64_t q, const float *kvs, int64_t kc, const int64_t *keys, int n,
                   int h, int64_t ko, int64_t vo, const double *dout, double *out, double *dq, double *dkv)
{
    double sc[64], m = -INFINITY, z = 0, dp[64], sum = 0;
    for (int j = 0; j < n; j++) {
        sc[j] = 0;
        for (int c = 0; c < D; c++) sc[j] += (double)qs[q * qc + h * D + c] * kvs[keys[j] * kc + ko + h * D + c];
        sc[j] /= sqrt((double)D);
        if (sc[j] > m) m = sc[j];
    }
    for (int j = 0; j < n; j++) z += (sc[j] = exp(sc[j] - m));
    for (int j = 0; j < n; j++) sc[j] /= z;
    for (int c = 0; c < D; c++) {
        double o = 0;
        for (int j = 0; j < n; j++) o += sc[j] * kvs[keys[j] * kc + vo + h * D + c];
        out[c] = o;
    }
    for (int j = 0; j < n; j++) { /* dP = dout . v, dS = P (dP - sum P dP) */
        dp[j] = 0;
        for (int c = 0; c < D; c++) dp[j] += dout[c] * kvs[keys[j] * kc + vo + h * D + c];
        sum += sc[j] * dp[j];
    }
    for (int j = 0; j < n; j++) {
        const double ds = sc[j] * (dp[j] - sum) / sqrt((double)D);
        for (int c = 0; c < D; c++) {
            dq[c] += ds * kvs[keys[j] * kc + ko + h * D + c];
            dkv[keys[j] * kc + ko + h * D + c] += ds * qs[q * qc + h * D + c];
            dkv[keys[j] * kc + vo + h * D + c] += sc[j] * dout[c];
        }
    }
}

/* cross-attention of every query row (q [SEQ NB, AD]) to its sequence's L conditioning rows (kv
 * [L NB, 2 AD], k | v), the output's gradient dg: out, dq, dkv (added) */
static void cross_ref(const float *q, const float *kv, const float *dg, double *out, double *dq, double *dkv)
{
    for (int64_t r = 0; r < SEQ * NB; r++)
        for (int h = 0; h < A; h++) {
            int64_t keys[L];
            double dout[D];
            for (int j = 0; j < L; j++) keys[j] = j * NB + r % NB;
            for (int c = 0; c < D; c++) dout[c] = dg[r * AD + h * D + c];
            attend(q, AD, r, kv, 2 * AD, keys, L, h, 0, AD, dout, out + r * AD + h * D, dq + r * AD + h * D, dkv);
        }
}

static void cross_case(sw_ctx *x, sw_params *p)
{
    sw_params_allocate(p);
    float *qg = rnd(SEQ * NB * AD, 11, 1.5f), *kvg = rnd(L * NB * 2 * AD, 12, 1.5f), *dg = rnd(SEQ * NB * AD, 13, 1.0f);
    static double out[SEQ * NB * AD], dq[SEQ * NB * AD], dkv[L * NB * 2 * AD];
    memset(dq, 0, sizeof dq), memset(dkv, 0, sizeof dkv);
    cross_ref(qg, kvg, dg, out, dq, dkv);
    sw_cross_attention *a = sw_cross_attention_create(x, A, D, L);
    sw_saved s;
    memset(&s, 0, sizeof s);
    strcpy(s.prefix, "x");
    sw_cross_saved k;
    sw_cross_attention_keep(a, &s, &k);
    sw_tensor *DO = tu_tensor("dout", x->tokens, AD, NULL), *DQ = tu_tensor("dq", x->tokens, AD, NULL);
    sw_tensor *DKV = tu_tensor("dkv", L * x->B, 2 * AD, NULL);
    sw_ctx_load_floats(x, 0, qg, AD, k.q), sw_ctx_load_floats(x, 0, dg, AD, DO);
    sw_ctx_load_cond(x, 0, kvg, L, 2 * AD, k.kv);
    sw_cross_attention_forward(x, a, &k);
    sw_cross_attention_backward(x, a, &k, DO, DQ, DKV);
    float *got = tu_read(k.att);
    close_rows(x, "cross-attention out on this rank's positions", got, out, x->tokens, AD, 0, 1e-5, 1e-6);
    free(got), got = tu_read(DQ);
    close_rows(x, "cross-attention dq on this rank's positions", got, dq, x->tokens, AD, 0, 1e-5, 1e-6);
    free(got), got = tu_read(DKV);
    SW_CHECK(MPI_Allreduce(MPI_IN_PLACE, got, L * NB * 2 * AD, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
    char what[160];
    snprintf(what, sizeof what, "rank %d: cross-attention dk | dv summed over the ranks = the whole batch's", sw_rank());
    tu_close(what, got, dkv, L * NB * 2 * AD, 1e-5, 1e-6);
    free(got);
    sw_tensor_free(DO), sw_tensor_free(DQ), sw_tensor_free(DKV);
    for (int i = 0; i < s.n; i++) sw_tensor_free(s.t[i]);
    sw_cross_attention_destroy(a);
    free(qg), free(kvg), free(dg);
}

/* this TP rank's heads r0 .. r0 + aq - 1 of the K | V columns of a [rows, 2 AD] array */
static void kv_heads(const double *g, double *l, int64_t rows, int r0, int aq)
{
    for (int64_t r = 0; r < rows; r++)
        for (int part = 0; part < 2; part++)
            for (int c = 0; c < aq * D; c++) l[r * 2 * aq * D + part * aq * D + c] = g[r * 2 * AD + part * AD + r0 * D + c];
}

static void cross_kv_case(sw_ctx *x, sw_params *p)
{
    const int t = x->tp.t, aq = A / t, r0 = x->tp.rank * aq;
    const int64_t T = SEQ * NB, NK = L * NB, lc = 2 * aq * D;
    float *qg = rnd(T * AD, 31, 1.5f), *cg = rnd(NK * CD, 32, 1.5f), *w = rnd(2 * AD * CD, 33, 0.7f);
    float *bias = rnd(2 * AD, 34, 0.5f), *dg = rnd(T * AD, 35, 1.0f);
    /* reference: kv = cond W^T + b, the attention of every query, dkv, then dW, db, dcond of the whole batch */
    static double kv[L * NB * 2 * AD], out[SEQ * NB * AD], dq[SEQ * NB * AD], dkv[L * NB * 2 * AD];
    static double dw[2 * AD * CD], db[2 * AD], dc[L * NB * CD];
    static float kvf[L * NB * 2 * AD];
    memset(dkv, 0, sizeof dkv), memset(dw, 0, sizeof dw), memset(db, 0, sizeof db), memset(dc, 0, sizeof dc);
    for (int64_t r = 0; r < NK; r++)
        for (int o = 0; o < 2 * AD; o++) {
            double v = bias[o];
            for (int i = 0; i < CD; i++) v += (double)cg[r * CD + i] * w[o * CD + i];
            kvf[r * 2 * AD + o] = (float)(kv[r * 2 * AD + o] = v);
        }
    cross_ref(qg, kvf, dg, out, dq, dkv);
    for (int64_t r = 0; r < NK; r++)
        for (int o = 0; o < 2 * AD; o++) {
            db[o] += dkv[r * 2 * AD + o];
            for (int i = 0; i < CD; i++)
                dw[o * CD + i] += dkv[r * 2 * AD + o] * cg[r * CD + i], dc[r * CD + i] += dkv[r * 2 * AD + o] * w[o * CD + i];
        }
    sw_cross_kv l = sw_cross_kv_add(x, "c_kv", CD, AD, 1, 0.1f);
    sw_params_allocate(p);
    /* this TP rank's slice of W and b, its heads' columns of q, dout, the output and kv */
    float *lw = malloc(sizeof(float) * 2 * AD * CD), *lb = malloc(sizeof(float) * 2 * AD);
    sw_slice_extract(sw_params_desc(p, l.lin.w), w, lw), sw_slice_extract(sw_params_desc(p, l.lin.b), bias, lb);
    sw_tensor_write_host(sw_params_value(p, l.lin.w), lw), sw_tensor_write_host(sw_params_value(p, l.lin.b), lb);
    float *lq = malloc(sizeof(float) * (size_t)(T * aq * D)), *ld = malloc(sizeof(float) * (size_t)(T * aq * D));
    double *rout = malloc(sizeof(double) * (size_t)(T * aq * D)), *rkv = malloc(sizeof(double) * (size_t)(NK * lc));
    for (int64_t r = 0; r < T; r++)
        for (int c = 0; c < aq * D; c++)
            lq[r * aq * D + c] = qg[r * AD + r0 * D + c], ld[r * aq * D + c] = dg[r * AD + r0 * D + c],
                          rout[r * aq * D + c] = out[r * AD + r0 * D + c];
    kv_heads(kv, rkv, NK, r0, aq);
    /* dW, db: the rows of this rank's slice (k rows of its heads, then v rows) */
    int64_t wr, wc;
    sw_slice_shape(sw_params_desc(p, l.lin.w), &wr, &wc);
    double *rdw = malloc(sizeof(double) * (size_t)(wr * CD)), *rdb = malloc(sizeof(double) * (size_t)wr);
    for (int64_t i = 0; i < wr; i++) {
        const int64_t g = i < wr / 2 ? r0 * D + i : AD + r0 * D + (i - wr / 2);
        rdb[i] = db[g];
        for (int c = 0; c < CD; c++) rdw[i * CD + c] = dw[g * CD + c];
    }
    sw_cross_attention *a = sw_cross_attention_create(x, A, D, L);
    sw_saved s;
    memset(&s, 0, sizeof s);
    strcpy(s.prefix, "x");
    sw_cross_saved k;
    sw_cross_attention_keep(a, &s, &k);
    sw_tensor *C = tu_tensor("cond", NK, CD, NULL), *DO = tu_tensor("dout", x->tokens, aq * D, NULL);
    sw_tensor *DQ = tu_tensor("dq", x->tokens, aq * D, NULL), *DKV = tu_tensor("dkv", NK, lc, NULL);
    sw_tensor *DC = tu_tensor("dcond", NK, CD, NULL);
    sw_ctx_load_floats(x, 0, lq, aq * D, k.q), sw_ctx_load_floats(x, 0, ld, aq * D, DO);
    sw_ctx_load_cond(x, 0, cg, L, CD, C);
    static const sw_group groups[] = {SW_GROUP_TP, SW_GROUP_SP, SW_GROUP_TP_SP, SW_GROUP_SP_DP};
    double sent0 = 0, sent1 = 0, v;
    long calls;
    starpu_task_wait_for_all();
    for (size_t i = 0; x->comm && i < sizeof groups / sizeof groups[0]; i++)
        sw_comm_traffic(x->comm, groups[i], &v, &calls), sent0 += v;
    sw_cross_kv_forward(x, &l, C, k.kv);
    sw_cross_attention_forward(x, a, &k);
    sw_cross_attention_backward(x, a, &k, DO, DQ, DKV);
    sw_cross_kv_backward(x, &l, C, DKV, DC);
    starpu_task_wait_for_all();
    for (size_t i = 0; x->comm && i < sizeof groups / sizeof groups[0]; i++)
        sw_comm_traffic(x->comm, groups[i], &v, &calls), sent1 += v;
    sw_params_reduce_grads(p, 0);
    char what[200];
    float *got = tu_read(k.kv);
    snprintf(what, sizeof what, "rank %d: K/V projection kv = cond W^T + b, TP rank's %d head(s)", sw_rank(), aq);
    tu_close(what, got, rkv, NK * lc, 1e-5, 1e-6);
    free(got), got = tu_read(k.att);
    close_rows(x, "K/V projection into cross-attention: out on its positions and heads", got, rout, x->tokens, aq * D, 0,
               1e-5, 1e-6);
    free(got), got = tu_read(sw_params_grad(p, l.lin.w));
    snprintf(what, sizeof what, "rank %d: K/V projection dW, the registry's sum over the gradient group = the whole batch's (its heads' rows)", sw_rank());
    tu_close(what, got, rdw, wr * CD, 1e-5, 1e-5);
    free(got), got = tu_read(sw_params_grad(p, l.lin.b));
    snprintf(what, sizeof what, "rank %d: K/V projection db, the registry's sum = the whole batch's (its heads')", sw_rank());
    tu_close(what, got, rdb, wr, 1e-5, 1e-5);
    free(got), got = tu_read(DC);
    SW_CHECK(MPI_Allreduce(MPI_IN_PLACE, got, (int)(NK * CD), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
    snprintf(what, sizeof what, "rank %d: K/V projection dcond summed over the ranks (heads, queries) = the whole batch's", sw_rank());
    tu_close(what, got, dc, NK * CD, 1e-5, 1e-5);
    free(got);
    snprintf(what, sizeof what, "rank %d: the K/V projection and cross-attention sent nothing (%.0f bytes)", sw_rank(),
             sent1 - sent0);
    tu_true(what, sent1 == sent0);
    sw_tensor *all[] = {C, DO, DQ, DKV, DC};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) sw_tensor_free(all[i]);
    for (int i = 0; i < s.n; i++) sw_tensor_free(s.t[i]);
    sw_cross_attention_destroy(a);
    free(qg), free(cg), free(w), free(bias), free(dg), free(lw), free(lb), free(lq), free(ld), free(rout), free(rkv);
    free(rdw), free(rdb);
}

static void grid_case(sw_ctx *x, sw_params *p, sw_attn_axis axis)
{
    const int t = x->tp.t, aq = A / t, r0 = x->tp.rank * aq; /* this TP rank's heads r0 .. r0 + aq - 1 */
    const int64_t T = SEQ * NB, QC = 3 * AD, lc = 3 * aq * D;
    float *qkv = rnd(T * QC, 21, 1.5f), *dg = rnd(T * AD, 22, 1.0f);
    static double out[SEQ * NB * AD], dqkv[SEQ * NB * 3 * AD];
    memset(dqkv, 0, sizeof dqkv);
    for (int64_t r = 0; r < T; r++)
        for (int h = 0; h < A; h++) {
            int64_t keys[SEQ];
            int n = 0;
            const int64_t pr = r / NB, b = r % NB;
            for (int64_t j = 0; j < T; j++)
                if (j % NB == b && (axis == SW_AXIS_SPATIAL ? j / NB / PA == pr / PA : j / NB % PA == pr % PA)) keys[n++] = j;
            double dout[D], dq[D] = {0};
            for (int c = 0; c < D; c++) dout[c] = dg[r * AD + h * D + c];
            attend(qkv, QC, r, qkv, QC, keys, n, h, AD, 2 * AD, dout, out + r * AD + h * D, dq, dqkv);
            for (int c = 0; c < D; c++) dqkv[r * QC + h * D + c] += dq[c];
        }
    /* this TP rank's columns (q, k, v of its heads) of the whole batch, then its rows (T) of them */
    float *lq = malloc(sizeof(float) * (size_t)(T * lc)), *ld = malloc(sizeof(float) * (size_t)(T * aq * D));
    double *rout = malloc(sizeof(double) * (size_t)(T * aq * D)), *rd = malloc(sizeof(double) * (size_t)(T * lc));
    for (int64_t r = 0; r < T; r++)
        for (int part = 0; part < 3; part++)
            for (int c = 0; c < aq * D; c++) {
                lq[r * lc + part * aq * D + c] = qkv[r * QC + part * AD + r0 * D + c];
                rd[r * lc + part * aq * D + c] = dqkv[r * QC + part * AD + r0 * D + c];
                if (part == 0) ld[r * aq * D + c] = dg[r * AD + r0 * D + c], rout[r * aq * D + c] = out[r * AD + r0 * D + c];
            }
    sw_grid_attention *a = sw_grid_attention_create(x, axis, FR, PA, A, D);
    sw_saved s;
    memset(&s, 0, sizeof s);
    strcpy(s.prefix, "g");
    sw_grid_saved k;
    sw_grid_attention_keep(a, &s, &k);
    sw_tensor *DO = tu_tensor("dout", x->tokens, aq * D, NULL), *DQKV = tu_tensor("dqkv", x->tokens, lc, NULL);
    sw_ctx_load_floats(x, 0, lq, lc, k.qkv), sw_ctx_load_floats(x, 0, ld, aq * D, DO);
    double sent0 = 0, sent1 = 0;
    long calls;
    sw_traffic model;
    memset(&model, 0, sizeof model);
    sw_grid_attention_traffic(x, a, &model);
    if (x->comm) sw_comm_traffic(x->comm, SW_GROUP_SP, &sent0, &calls);
    sw_grid_attention_forward(x, a, &k);
    sw_grid_attention_backward(x, a, &k, DO, DQKV);
    starpu_task_wait_for_all();
    if (x->comm) sw_comm_traffic(x->comm, SW_GROUP_SP, &sent1, &calls);
    char what[200];
    const char *name = axis == SW_AXIS_SPATIAL ? "spatial" : "temporal";
    float *got = tu_read(k.att);
    snprintf(what, sizeof what, "%s attention out, this rank's positions and TP rank's %d head(s)", name, aq);
    close_rows(x, what, got, rout, x->tokens, aq * D, 0, 1e-5, 1e-6);
    free(got), got = tu_read(DQKV);
    snprintf(what, sizeof what, "%s attention dq | dk | dv of its positions and heads", name);
    close_rows(x, what, got, rd, x->tokens, lc, 0, 1e-5, 1e-6);
    free(got);
    const double m = model.forward[SW_GROUP_SP] + model.backward[SW_GROUP_SP];
    snprintf(what, sizeof what, "rank %d: %s attention sent %.0f bytes over the sequence-parallel group, model %.0f",
             sw_rank(), name, sent1 - sent0, m);
    tu_true(what, sent1 - sent0 == m && (axis == SW_AXIS_SPATIAL || x->ulysses * x->ring == 1 || m > 0));
    sw_tensor_free(DO), sw_tensor_free(DQKV);
    for (int i = 0; i < s.n; i++) sw_tensor_free(s.t[i]);
    sw_grid_attention_destroy(a);
    free(qkv), free(dg), free(lq), free(ld), free(rout), free(rd);
    (void)p;
}

int main(int argc, char **argv)
{
    const int tp = flag(argc, argv, "--tp", 1), U = flag(argc, argv, "--ulysses", 1), R = flag(argc, argv, "--ring", 1);
    sw_ctx_config xc = {.seq = SEQ, .batch = NB, .tp = tp, .sp = flag(argc, argv, "--sp", 0), .ulysses = U, .ring = R,
                        .zigzag = flag(argc, argv, "--zigzag", 0), .dp = 1, .grad_accum = 1, .tiles = 2, .seed = 1};
    tu_init(&argc, &argv);
    sw_mesh *mesh = sw_mesh_create(&(sw_mesh_dims){.tp = tp, .ulysses = U, .ring = R, .dp = 1, .pp = 1});
    sw_comm *world = sw_comm_create(mesh), *comm = sw_world_size() > 1 ? world : NULL;
    if (flag(argc, argv, "--refuse", 0)) { /* grid attention over a split sequence: exit 2 on every rank */
        sw_params_config pc = {.seed = 1, .tiles = 2, .dtype = SW_F32, .grad_accum = 1, .bucket_mb = 25.0f, .grad_group = U * R > 1 ? SW_GROUP_SP_DP : SW_GROUP_DP};
        sw_ctx x;
        sw_ctx_init(&x, &xc, comm, sw_params_new(&pc, comm));
        sw_grid_attention_create(&x, SW_AXIS_TEMPORAL, FR, PA, A, D);
    }
    for (int which = 0; which < 5; which++) {
        if (which == 1 && tp > 1) continue;     /* cross-attention: with tp the heads' columns, not tested here */
        if ((which == 2 || which == 3) && xc.zigzag && R > 1) continue; /* grid attention refuses a zigzag split (--refuse) */
        sw_params_config pc = {.seed = 1, .tiles = 2, .dtype = SW_F32, .grad_accum = 1, .bucket_mb = 25.0f,
                               .grad_group = U * R > 1 ? SW_GROUP_SP_DP : SW_GROUP_DP};
        sw_params *p = sw_params_new(&pc, comm);
        sw_ctx x;
        sw_ctx_init(&x, &xc, comm, p);
        if (which == 0) adaln_case(&x, p);
        else if (which == 1) cross_case(&x, p);
        else if (which == 4) cross_kv_case(&x, p);
        else grid_case(&x, p, which == 2 ? SW_AXIS_SPATIAL : SW_AXIS_TEMPORAL);
        starpu_task_wait_for_all();
        sw_scratch_invalidate(&x);
        sw_ctx_destroy(&x);
        sw_params_destroy(p);
    }
    sw_comm_destroy(world);
    sw_mesh_destroy(mesh);
    return tu_finish_all();
}
