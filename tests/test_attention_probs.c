/* sw_attn_probs_fwd / sw_attn_probs_bwd (attention with saved probabilities)
 * against (1) a naive double-precision reference of the forward and of the
 * analytic backward, and (2) the flash tile sw_attn_fwd / sw_attn_bwd on the
 * same inputs, tiles and flags: o, lse, dq, dk, dv agree to 1e-5 relative
 * (max abs error / max abs value). The saved probs: equal to the reference,
 * each row sums to 1 over its unmasked keys, masked keys exactly 0, and
 * p = exp(scale q.k - lse) with the kernel's own lse. Batch 2, 4 heads,
 * d = 16, sq = sk = 37 (not a multiple of the query block), causal with
 * q_pos0 = k_pos0, dropout 0.1 and 0; grouped-query attention (nkv 2, 1);
 * dq/dk/dv accumulated (accumulate, kv_accumulate) onto known values; q/k/v
 * and dq/dk/dv strided column tiles of one qkv tensor, o/lse/probs column
 * tiles of wider tensors (ld > cols); two head groups (head0 > 0);
 * positions shifted (q_pos0 = k_pos0 = 11), keys after the first queries
 * (fully masked rows: lse -inf, o and probs 0), no causal mask, and a case
 * crossing the key block (s = 83, d = 32); d = 64, and d = 24, 72 (not
 * multiples of the kernels' vector width). */
#include <string.h>

#include "philox.h"
#include "testutil.h"

enum { B = 2 };
static const uint64_t SEED = 0x5eedULL;
static const uint32_t STEP = 7;
static const uint16_t LAYER = 3, OP = 2;

typedef struct pcase {
    int nh, nkv, d, s;       /* heads, K/V heads, head dim, sq = sk */
    int G;                   /* head groups: G tasks of nh/G query heads (whole K/V groups) */
    int causal;
    float p;
    int64_t q_pos0, k_pos0;
    int accumulate, kv_accumulate;
    int pad;                 /* o, lse, probs: column tiles of tensors pad columns wider */
} pcase;

/* worst relative errors over all cases, for the summary line */
static double worst_o, worst_lse, worst_grad, worst_probs;

/* ---------------- helpers ---------------- */

static void *xmalloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
    if (!p) { perror("malloc"); exit(99); }
    return p;
}

/* Reference work on the host: pause StarPU's idle workers (nothing is in
 * flight) so that they do not compete with it on small machines. */
static void host_begin(void)
{
    starpu_task_wait_for_all();
    starpu_pause();
}

static void host_end(void)
{
    starpu_resume();
}

/* max |got - ref| / max |ref| over the pairs that are both finite (the max
 * of |ref| over its finite entries); any other pair must satisfy
 * tu_nonfinite_match, else the error is infinite. */
static double check_rel(const char *what, const double *got, const double *ref, int64_t n, double tol, double *worst)
{
    double err = 0, mx = tu_maxabs(ref, n);
    int64_t wi = 0;
    for (int64_t i = 0; i < n; i++) {
        const double e = isfinite(got[i]) && isfinite(ref[i]) ? fabs(got[i] - ref[i])
                         : tu_nonfinite_match(got[i], ref[i]) ? 0 : INFINITY;
        if (e > err) { err = e; wi = i; }
    }
    const double rel = err / (mx > 0 ? mx : 1.0);
    const int ok = rel <= tol;
    if (worst && rel > *worst) *worst = rel;
    if (ok) tu_passed++; else tu_failed++;
    printf("%s %s: %lld values, max abs err %.3g / max abs %.3g = %.3g (tol %.0e; worst at %lld: got %.9g ref %.9g)\n",
           ok ? "PASS" : "FAIL", what, (long long)n, err, mx, rel, tol, (long long)wi, n ? got[wi] : 0.0,
           n ? ref[wi] : 0.0);
    return rel;
}

static double *f2d(const float *x, int64_t n)
{
    double *y = xmalloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) y[i] = x[i];
    return y;
}

/* columns c0..c0+w-1 of x[rows, ld] -> double [rows, w] */
static double *colsf(const float *x, int64_t rows, int64_t ld, int64_t c0, int64_t w)
{
    double *y = xmalloc(sizeof(double) * (size_t)(rows * w));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < w; c++) y[r * w + c] = x[r * ld + c0 + c];
    return y;
}

static int64_t seq_total(const pcase *c)
{
    return (c->q_pos0 > c->k_pos0 ? c->q_pos0 : c->k_pos0) + c->s;
}

static float scale_of(int d) { return 1.0f / sqrtf((float)d); }

/* ---------------- reference ---------------- */

/* Q, dO [T, nh*d], K, V [T, nkv*d] (T = s*B, rows in [s, b] order).
 * O [T, nh*d], L [T, nh], P [B*nh*s, s] (row (b*nh + h)*s + i),
 * dQ [T, nh*d], dK, dV [T, nkv*d]. */
static void reference(const pcase *c, const double *Q, const double *K, const double *V, const double *dO, double *O,
                      double *L, double *P, double *dQ, double *dK, double *dV)
{
    const int s = c->s, d = c->d, nh = c->nh, nkv = c->nkv, grp = nh / nkv;
    const int64_t T = (int64_t)s * B, W = (int64_t)nh * d, Wkv = (int64_t)nkv * d, st = seq_total(c);
    const double scale = scale_of(d), keep = 1.0 / (1.0 - (double)c->p);
    double *sc = xmalloc(sizeof(double) * (size_t)s), *z = xmalloc(sizeof(double) * (size_t)s);
    double *ds = xmalloc(sizeof(double) * (size_t)s);
    host_begin();
    memset(dK, 0, sizeof(double) * (size_t)(T * Wkv));
    memset(dV, 0, sizeof(double) * (size_t)(T * Wkv));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < nh; h++) {
            const int64_t kvcol = (int64_t)(h / grp) * d;
            for (int i = 0; i < s; i++) {
                const int64_t qpos = c->q_pos0 + i, row = (int64_t)i * B + b;
                const double *qi = Q + row * W + h * d, *gi = dO + row * W + h * d;
                double *pr = P + (((int64_t)b * nh + h) * s + i) * s, *oi = O + row * W + h * d;
                double *dqi = dQ + row * W + h * d;
                double mx = -INFINITY;
                for (int j = 0; j < s; j++) {
                    if (c->causal && c->k_pos0 + j > qpos) { sc[j] = -INFINITY; continue; }
                    const double *kj = K + ((int64_t)j * B + b) * Wkv + kvcol;
                    double t = 0;
                    for (int x = 0; x < d; x++) t += qi[x] * kj[x];
                    sc[j] = scale * t;
                    mx = sc[j] > mx ? sc[j] : mx;
                }
                for (int x = 0; x < d; x++) oi[x] = dqi[x] = 0;
                if (mx == -INFINITY) { /* fully masked */
                    for (int j = 0; j < s; j++) pr[j] = 0;
                    L[row * nh + h] = -INFINITY;
                    continue;
                }
                double sum = 0;
                for (int j = 0; j < s; j++) sum += sc[j] == -INFINITY ? 0.0 : exp(sc[j] - mx);
                L[row * nh + h] = mx + log(sum);
                for (int j = 0; j < s; j++) {
                    pr[j] = sc[j] == -INFINITY ? 0.0 : exp(sc[j] - mx) / sum;
                    z[j] = 1.0;
                    if (c->p > 0 && sc[j] != -INFINITY) {
                        uint64_t idx = (((uint64_t)b * (uint64_t)nh + (uint64_t)h) * (uint64_t)st + (uint64_t)qpos) *
                                           (uint64_t)st +
                                       (uint64_t)(c->k_pos0 + j);
                        z[j] = sw_dropout_keep(SEED, STEP, LAYER, OP, idx, c->p) ? keep : 0.0;
                    }
                }
                /* O = D(P) V; dP = D(dO V^T); dS = P (dP - rowsum(dP P)) */
                double r = 0;
                for (int j = 0; j < s; j++) {
                    const double *vj = V + ((int64_t)j * B + b) * Wkv + kvcol;
                    double dd = 0;
                    for (int x = 0; x < d; x++) {
                        oi[x] += pr[j] * z[j] * vj[x];
                        dd += gi[x] * vj[x];
                    }
                    ds[j] = z[j] * dd;
                    r += ds[j] * pr[j];
                }
                for (int j = 0; j < s; j++) {
                    const double dsj = pr[j] * (ds[j] - r);
                    const double *kj = K + ((int64_t)j * B + b) * Wkv + kvcol;
                    double *dkj = dK + ((int64_t)j * B + b) * Wkv + kvcol, *dvj = dV + ((int64_t)j * B + b) * Wkv + kvcol;
                    for (int x = 0; x < d; x++) {
                        dqi[x] += scale * dsj * kj[x];
                        dkj[x] += scale * dsj * qi[x];
                        dvj[x] += pr[j] * z[j] * gi[x];
                    }
                }
            }
        }
    host_end();
    free(sc);
    free(z);
    free(ds);
}

/* ---------------- one case ---------------- */

static sw_attn_args make_args(const pcase *c, int g)
{
    const int nht = c->nh / c->G;
    sw_attn_args a;
    memset(&a, 0, sizeof a);
    a.batch = B;
    a.nh = nht;
    a.nkv = c->nkv / c->G;
    a.d = c->d;
    a.sq = a.sk = c->s;
    a.q_pos0 = c->q_pos0;
    a.k_pos0 = c->k_pos0;
    a.causal = c->causal;
    a.scale = scale_of(c->d);
    a.dropout = c->p;
    a.key.seed = SEED;
    a.key.step = STEP;
    a.key.layer = LAYER;
    a.key.op = OP;
    a.head0 = g * nht;
    a.heads_total = c->nh;
    a.seq_total = seq_total(c);
    a.accumulate = c->accumulate;
    a.kv_accumulate = c->kv_accumulate;
    return a;
}

/* Tile g of G column tiles of width w (plus a pad column block when pad > 0). */
static starpu_data_handle_t col_tile(sw_tensor *t, int G, int64_t w, int pad, int g, enum starpu_data_access_mode m)
{
    if (G == 1 && pad == 0) return sw_tensor_whole(t, m);
    int64_t sz[16];
    int n = 0;
    for (; n < G; n++) sz[n] = w;
    if (pad > 0) sz[n++] = pad;
    return sw_tensor_split(t, SW_COLS, n, sz, m)[g];
}

/* q|k|v (or dq|dk|dv) column tiles: G query tiles, G K tiles, G V tiles */
static starpu_data_handle_t *qkv_tiles(sw_tensor *t, const pcase *c, enum starpu_data_access_mode m)
{
    int64_t sz[48];
    for (int g = 0; g < c->G; g++) {
        sz[g] = (int64_t)(c->nh / c->G) * c->d;
        sz[c->G + g] = sz[2 * c->G + g] = (int64_t)(c->nkv / c->G) * c->d;
    }
    return sw_tensor_split(t, SW_COLS, 3 * c->G, sz, m);
}

static void run_case(const pcase *c, uint64_t seed)
{
    const int s = c->s, d = c->d, nh = c->nh, nkv = c->nkv, G = c->G, nht = nh / G, pad = c->pad;
    const int64_t T = (int64_t)s * B, W = (int64_t)nh * d, Wkv = (int64_t)nkv * d, C = W + 2 * Wkv;
    const int64_t prow = (int64_t)B * nht * s; /* probs rows per task */
    if (nh % G || nkv % G || nh % nkv) {
        fprintf(stderr, "bad case: nh %d nkv %d G %d\n", nh, nkv, G);
        exit(99);
    }
    char tag[200], what[320];
    snprintf(tag, sizeof tag, "nh=%d nkv=%d d=%d s=%d tasks=%d causal=%d p=%.1f q_pos0=%lld k_pos0=%lld acc=%d kv_acc=%d%s",
             nh, nkv, d, s, G, c->causal, c->p, (long long)c->q_pos0, (long long)c->k_pos0, c->accumulate,
             c->kv_accumulate, pad ? " strided o/lse/probs" : "");

    /* inputs: qkv [T, C] = [q | k | v], dout [T, W]; gradient start values */
    float *qkv = xmalloc(sizeof(float) * (size_t)(T * C)), *dout = xmalloc(sizeof(float) * (size_t)(T * W));
    float *start = xmalloc(sizeof(float) * (size_t)(T * C));
    tu_rand(qkv, T * C, seed, 1.5f);
    tu_rand(dout, T * W, seed + 100, 1.0f);
    tu_rand(start, T * C, seed + 200, 1.0f);
    for (int64_t r = 0; r < T; r++)
        for (int64_t x = 0; x < C; x++) {
            const int is_q = x < W;
            if ((is_q && !c->accumulate) || (!is_q && !c->accumulate && !c->kv_accumulate)) start[r * C + x] = NAN;
        }

    /* reference */
    double *Q = colsf(qkv, T, C, 0, W), *K = colsf(qkv, T, C, W, Wkv), *V = colsf(qkv, T, C, W + Wkv, Wkv);
    double *dO = f2d(dout, T * W);
    double *Or = xmalloc(sizeof(double) * (size_t)(T * W)), *Lr = xmalloc(sizeof(double) * (size_t)(T * nh));
    double *Pr = xmalloc(sizeof(double) * (size_t)(B * nh * s * s));
    double *dQr = xmalloc(sizeof(double) * (size_t)(T * W)), *dKr = xmalloc(sizeof(double) * (size_t)(T * Wkv));
    double *dVr = xmalloc(sizeof(double) * (size_t)(T * Wkv));
    reference(c, Q, K, V, dO, Or, Lr, Pr, dQr, dKr, dVr);

    /* tensors: probs path (o, lse, probs maybe strided) and flash path */
    sw_tensor *QKV = tu_tensor("qkv", T, C, qkv), *DO = tu_tensor("dout", T, W, dout);
    sw_tensor *O = tu_tensor("o", T, W + pad, NULL), *L = tu_tensor("lse", T, nh + pad, NULL);
    sw_tensor *D = tu_tensor("dqkv", T, C, start);
    sw_tensor *Of = tu_tensor("o_flash", T, W, NULL), *Lf = tu_tensor("lse_flash", T, nh, NULL);
    sw_tensor *Df = tu_tensor("dqkv_flash", T, C, start);
    sw_tensor *PR[8];
    sw_tensor_fill(O, NAN);
    sw_tensor_fill(L, NAN);
    for (int g = 0; g < G; g++) {
        char nm[32];
        snprintf(nm, sizeof nm, "probs%d", g);
        PR[g] = tu_tensor(nm, prow, s + pad, NULL);
        sw_tensor_fill(PR[g], NAN);
    }
    for (int g = 0; g < G; g++) {
        sw_attn_args a = make_args(c, g);
        starpu_data_handle_t *t = qkv_tiles(QKV, c, STARPU_R);
        sw_attn_probs_fwd(t[g], t[G + g], t[2 * G + g], col_tile(O, G, nht * d, pad, g, STARPU_W),
                          col_tile(L, G, nht, pad, g, STARPU_W), col_tile(PR[g], 1, s, pad, 0, STARPU_W), &a);
        t = qkv_tiles(QKV, c, STARPU_R);
        sw_attn_fwd(t[g], t[G + g], t[2 * G + g], col_tile(Of, G, nht * d, 0, g, STARPU_W),
                    col_tile(Lf, G, nht, 0, g, STARPU_W), &a);
    }
    for (int g = 0; g < G; g++) {
        sw_attn_args a = make_args(c, g);
        enum starpu_data_access_mode mq = c->accumulate ? STARPU_RW : STARPU_W;
        starpu_data_handle_t *t = qkv_tiles(QKV, c, STARPU_R), *dt = qkv_tiles(D, c, mq);
        sw_attn_probs_bwd(t[g], t[G + g], t[2 * G + g], col_tile(PR[g], 1, s, pad, 0, STARPU_R),
                          col_tile(DO, G, nht * d, 0, g, STARPU_R), dt[g], dt[G + g], dt[2 * G + g], &a);
        t = qkv_tiles(QKV, c, STARPU_R);
        dt = qkv_tiles(Df, c, mq);
        sw_attn_bwd(t[g], t[G + g], t[2 * G + g], col_tile(Of, G, nht * d, 0, g, STARPU_R),
                    col_tile(Lf, G, nht, 0, g, STARPU_R), col_tile(DO, G, nht * d, 0, g, STARPU_R), dt[g],
                    dt[G + g], dt[2 * G + g], &a);
    }
    float *o = tu_read(O), *l = tu_read(L), *dg = tu_read(D), *of = tu_read(Of), *lf = tu_read(Lf), *df = tu_read(Df);
    float *pg[8];
    for (int g = 0; g < G; g++) pg[g] = tu_read(PR[g]);

    /* ---- forward: o, lse against the reference and the flash tile ---- */
    double *ov = colsf(o, T, W + pad, 0, W), *lv = colsf(l, T, nh + pad, 0, nh);
    double *ofv = f2d(of, T * W), *lfv = f2d(lf, T * nh);
    snprintf(what, sizeof what, "o vs reference (%s)", tag);
    check_rel(what, ov, Or, T * W, 1e-5, &worst_o);
    snprintf(what, sizeof what, "o vs sw_attn_fwd (%s)", tag);
    check_rel(what, ov, ofv, T * W, 1e-5, &worst_o);
    snprintf(what, sizeof what, "lse vs reference (%s)", tag);
    check_rel(what, lv, Lr, T * nh, 1e-5, &worst_lse);
    snprintf(what, sizeof what, "lse vs sw_attn_fwd (%s)", tag);
    check_rel(what, lv, lfv, T * nh, 1e-5, &worst_lse);
    if (pad) {
        int ok = 1;
        for (int64_t r = 0; r < T; r++) {
            for (int x = 0; x < pad; x++) ok &= isnan(o[r * (W + pad) + W + x]) && isnan(l[r * (nh + pad) + nh + x]);
        }
        for (int g = 0; g < G; g++)
            for (int64_t r = 0; r < prow; r++)
                for (int x = 0; x < pad; x++) ok &= isnan(pg[g][r * (s + pad) + s + x]);
        snprintf(what, sizeof what, "columns beside the o/lse/probs tiles untouched (%s)", tag);
        tu_true(what, ok);
    }

    /* ---- probs: reference, row sums, masked zeros, exp(scale q.k - lse) ---- */
    {
        const int64_t np = (int64_t)B * nh * s * s;
        double *pv = xmalloc(sizeof(double) * (size_t)np), *pe = xmalloc(sizeof(double) * (size_t)np);
        double *rs = xmalloc(sizeof(double) * (size_t)(B * nh * s)), *one = xmalloc(sizeof(double) * (size_t)(B * nh * s));
        const double scale = scale_of(d);
        int zeros_ok = 1, nrows = 0;
        for (int b = 0; b < B; b++)
            for (int h = 0; h < nh; h++) {
                const int g = h / nht, j = h % nht, kvh = h / (nh / nkv);
                for (int i = 0; i < s; i++) {
                    const int64_t gr = ((int64_t)b * nh + h) * s + i; /* reference row */
                    const float *pr = pg[g] + (((int64_t)b * nht + j) * s + i) * (s + pad);
                    const int64_t row = (int64_t)i * B + b, qpos = c->q_pos0 + i;
                    const double lse = l[row * (nh + pad) + h];
                    double sum = 0;
                    int any = 0;
                    for (int k = 0; k < s; k++) {
                        pv[gr * s + k] = pr[k];
                        if (c->causal && c->k_pos0 + k > qpos) {
                            zeros_ok &= pr[k] == 0.0f;
                            pe[gr * s + k] = 0.0;
                            continue;
                        }
                        any = 1;
                        sum += pr[k];
                        double t = 0;
                        for (int x = 0; x < d; x++)
                            t += (double)qkv[row * C + h * d + x] *
                                 (double)qkv[((int64_t)k * B + b) * C + W + (int64_t)kvh * d + x];
                        pe[gr * s + k] = exp(scale * t - lse);
                    }
                    if (!any) {
                        zeros_ok &= lse == -INFINITY;
                        continue;
                    }
                    rs[nrows] = sum;
                    one[nrows++] = 1.0;
                }
            }
        snprintf(what, sizeof what, "probs vs reference (%s)", tag);
        check_rel(what, pv, Pr, np, 1e-5, &worst_probs);
        snprintf(what, sizeof what, "probs = exp(scale q.k - lse) with the kernel's lse (%s)", tag);
        check_rel(what, pv, pe, np, 1e-5, &worst_probs);
        snprintf(what, sizeof what, "probs rows sum to 1 over unmasked keys, %d rows (%s)", nrows, tag);
        check_rel(what, rs, one, nrows, 1e-5, &worst_probs);
        snprintf(what, sizeof what, "probs of masked keys exactly 0; fully masked rows: lse -inf (%s)", tag);
        tu_true(what, zeros_ok);
        if (c->causal && c->k_pos0 > c->q_pos0) {
            int ok = 1;
            for (int i = 0; i < s && c->q_pos0 + i < c->k_pos0; i++)
                for (int b = 0; b < B; b++)
                    for (int64_t x = 0; x < W; x++) ok &= o[((int64_t)i * B + b) * (W + pad) + x] == 0.0f;
            snprintf(what, sizeof what, "fully masked rows: o = 0 (%s)", tag);
            tu_true(what, ok);
        }
        free(pv); free(pe); free(rs); free(one);
    }

    /* ---- backward: increments over the start values, against the reference and the flash tile ---- */
    {
        static const char *nm[3] = {"dq", "dk", "dv"};
        const int64_t c0[3] = {0, W, W + Wkv}, w[3] = {W, Wkv, Wkv};
        const double *ref[3] = {dQr, dKr, dVr};
        for (int x = 0; x < 3; x++) {
            double *gv = colsf(dg, T, C, c0[x], w[x]), *fv = colsf(df, T, C, c0[x], w[x]);
            double *sv = colsf(start, T, C, c0[x], w[x]);
            const int added = x == 0 ? c->accumulate : (c->accumulate || c->kv_accumulate);
            for (int64_t i = 0; i < T * w[x]; i++) {
                if (!added) continue;
                gv[i] -= sv[i];
                fv[i] -= sv[i];
            }
            snprintf(what, sizeof what, "%s%s vs reference (%s)", nm[x], added ? " - start" : "", tag);
            check_rel(what, gv, ref[x], T * w[x], 1e-5, &worst_grad);
            snprintf(what, sizeof what, "%s%s vs sw_attn_bwd (%s)", nm[x], added ? " - start" : "", tag);
            check_rel(what, gv, fv, T * w[x], 1e-5, &worst_grad);
            free(gv); free(fv); free(sv);
        }
    }

    sw_tensor_free(QKV); sw_tensor_free(DO); sw_tensor_free(O); sw_tensor_free(L); sw_tensor_free(D);
    sw_tensor_free(Of); sw_tensor_free(Lf); sw_tensor_free(Df);
    for (int g = 0; g < G; g++) {
        sw_tensor_free(PR[g]);
        free(pg[g]);
    }
    free(qkv); free(dout); free(start); free(Q); free(K); free(V); free(dO); free(Or); free(Lr); free(Pr);
    free(dQr); free(dKr); free(dVr); free(o); free(l); free(dg); free(of); free(lf); free(df);
    free(ov); free(lv); free(ofv); free(lfv);
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    uint64_t seed = 31;
    /*                     nh nkv  d   s  G causal p     q_pos0 k_pos0 acc kvacc pad */
    const pcase cases[] = {
        {4, 4, 16, 37, 1, 1, 0.1f, 0, 0, 0, 0, 0},   /* causal, dropout */
        {4, 4, 16, 37, 1, 1, 0.0f, 0, 0, 0, 0, 0},   /* causal, no dropout */
        {4, 2, 16, 37, 1, 1, 0.1f, 0, 0, 0, 0, 0},   /* GQA */
        {4, 1, 16, 37, 1, 1, 0.0f, 0, 0, 0, 0, 0},   /* MQA */
        {4, 4, 16, 37, 1, 1, 0.1f, 0, 0, 0, 0, 3},   /* strided o, lse, probs */
        {4, 2, 16, 37, 1, 1, 0.1f, 0, 0, 1, 0, 3},   /* accumulate: dq, dk, dv += */
        {4, 4, 16, 37, 1, 1, 0.0f, 0, 0, 1, 0, 0},
        {4, 2, 16, 37, 1, 1, 0.1f, 0, 0, 0, 1, 0},   /* kv_accumulate: dk, dv +=, dq written */
        {4, 4, 16, 37, 2, 1, 0.1f, 0, 0, 0, 0, 2},   /* two head groups (head0 = 2) */
        {4, 2, 16, 37, 2, 1, 0.1f, 0, 0, 0, 1, 0},   /* two head groups, one K/V head each */
        {4, 4, 16, 37, 1, 1, 0.1f, 11, 11, 0, 0, 0}, /* shifted positions */
        {4, 4, 16, 37, 1, 1, 0.1f, 0, 10, 0, 0, 1},  /* keys after the first queries: masked rows */
        {4, 2, 16, 37, 1, 0, 0.1f, 0, 0, 0, 0, 0},   /* no causal mask */
        {2, 2, 32, 83, 1, 1, 0.1f, 0, 0, 1, 0, 0},   /* crosses the key block */
        {2, 1, 64, 40, 1, 1, 0.1f, 0, 0, 0, 0, 0},   /* d = 64 */
        {2, 2, 24, 37, 1, 1, 0.1f, 0, 0, 0, 1, 0},   /* d not a multiple of 16 */
        {2, 2, 72, 37, 1, 1, 0.0f, 0, 0, 1, 0, 1},
    };
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], seed++);
    printf("worst relative errors: o %.3g, lse %.3g, dq/dk/dv %.3g, probs %.3g\n", worst_o, worst_lse, worst_grad,
           worst_probs);
    return tu_finish();
}
