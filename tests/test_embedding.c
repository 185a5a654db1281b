/* sw_embedding_fwd / sw_embedding_bwd against a double-precision reference:
 * a vocabulary slice (vocab0 > 0) with ids below, inside and above it, rows
 * in [s, b] order with row tiles whose first row is not a multiple of the
 * batch, pos0 > 0, tokens as a strided column tile of an int32 matrix;
 * backward against central finite differences of the reference forward
 * (loss = sum(x * r)), dwte accumulated (RW) or written (SW_EMB_ZERO_WTE),
 * dwpe written (SW_EMB_ZERO_WPE) or accumulated; without learned positions
 * (wpe, dwpe NULL). */
#include <string.h>

#include "testutil.h"

enum { S = 7, B = 3, T = S * B, C = 10, V = 20, P = 12 };
static const int64_t VOCAB0 = 15, POS0 = 2;

/* x = wte[tok - vocab0] (if in range) + wpe[pos0 + g / B] for rows g */
static void ref_fwd(const int32_t *tok, const double *wte, const double *wpe, double *x)
{
    for (int g = 0; g < T; g++) {
        int64_t id = tok[g] - VOCAB0, pos = POS0 + g / B;
        for (int c = 0; c < C; c++)
            x[g * C + c] = ((id >= 0 && id < V) ? wte[id * C + c] : 0.0) + wpe[pos * C + c];
    }
}

static double ref_loss(const int32_t *tok, const double *wte, const double *wpe, const double *r)
{
    double x[T * C], l = 0;
    ref_fwd(tok, wte, wpe, x);
    for (int i = 0; i < T * C; i++) l += x[i] * r[i];
    return l;
}

/* d loss / d w for every element of w (wte or wpe), central differences */
static void fd_grad(const int32_t *tok, double *wte, double *wpe, const double *r, double *w, int64_t n,
                    double *g)
{
    const double eps = 1e-3;
    for (int64_t i = 0; i < n; i++) {
        double w0 = w[i];
        w[i] = w0 + eps;
        double lp = ref_loss(tok, wte, wpe, r);
        w[i] = w0 - eps;
        double lm = ref_loss(tok, wte, wpe, r);
        w[i] = w0;
        g[i] = (lp - lm) / (2 * eps);
    }
}

/* fwd: one fp32 add per element; bwd: a few fp32 adds against central
 * differences of a linear loss (exact up to rounding): worst err/limit 0.082
 * over 8 seeds, so 10x tighter would leave less than a 10x margin */
static void check(const char *what, const float *got, const double *ref, int64_t n)
{
    tu_close(what, got, ref, n, 1e-6, 1e-7 * (1 + tu_maxabs(ref, n)));
}

/* sw_embedding_table_forward / _backward on one rank */
static void table_layer(void)
{
    enum { TS = 8, TB = 2, TT = TS * TB, TH = 12, TR = 3 };
    sw_params_config pc = {.seed = 7, .tiles = 2, .dtype = SW_F32, .grad_accum = 1, .grad_group = SW_GROUP_DP, .lr = 1e-3f};
    sw_params *p = sw_params_new(&pc, NULL);
    sw_ctx x;
    sw_ctx_init(&x, &(sw_ctx_config){.seq = TS, .batch = TB, .tp = 1, .ulysses = 1, .ring = 1, .dp = 1, .grad_accum = 1,
                                     .tiles = 2, .seed = 7}, NULL, p);
    sw_embedding_table e = sw_embedding_table_add(&x, "tte", TR, TH, 0.5f);
    sw_params_allocate(p);
    int32_t ids[TT];
    float x0[TT * TH], dx0[TT * TH];
    for (int g = 0; g < TT; g++) ids[g] = g == 5 ? TR : g == 9 ? -1 : (g * 7) % TR; /* two ids outside the table */
    tu_rand(x0, TT * TH, 31, 1.0f), tu_rand(dx0, TT * TH, 32, 1.0f);
    sw_tensor *I = sw_tensor_new2d("ids", SW_I32, TT, 1), *X0 = tu_tensor("x0", TT, TH, x0), *D = tu_tensor("dx0", TT, TH, dx0);
    sw_tensor_write_host(I, ids);
    float *w = tu_read(sw_params_value(p, e.w));
    sw_embedding_table_forward(&x, &e, I, X0);
    sw_embedding_table_backward(&x, &e, I, D);
    float *y = tu_read(X0), *dw = tu_read(sw_params_grad(p, e.w)), *dd = tu_read(D);
    double ry[TT * TH], rdw[TR * TH], rdd[TT * TH];
    memset(rdw, 0, sizeof rdw);
    for (int g = 0; g < TT; g++)
        for (int c = 0; c < TH; c++) {
            int in = ids[g] >= 0 && ids[g] < TR;
            ry[g * TH + c] = (double)x0[g * TH + c] + (in ? (double)w[ids[g] * TH + c] : 0.0);
            if (in) rdw[ids[g] * TH + c] += dx0[g * TH + c];
            rdd[g * TH + c] = dx0[g * TH + c];
        }
    tu_close("embedding table layer: x0 += table[ids]", y, ry, TT * TH, 1e-6, 1e-6);
    tu_close("embedding table layer: dtable = scatter(dx0)", dw, rdw, TR * TH, 1e-5, 1e-5);
    tu_close("embedding table layer: dx0 unchanged", dd, rdd, TT * TH, 0.0, 0.0);
    free(w), free(y), free(dw), free(dd);
    sw_tensor_free(I), sw_tensor_free(X0), sw_tensor_free(D);
    sw_ctx_destroy(&x);
    sw_params_destroy(p);
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    int32_t tok[T], tok2[T * 2];
    /* ids below the slice, in it (incl. both edges) and above it */
    const int32_t pick[] = {0, 14, 15, 16, 22, 33, 34, 35, 49, 20, 27, -1};
    for (int g = 0; g < T; g++) tok[g] = pick[(g * 7 + 3) % (int)(sizeof pick / sizeof pick[0])];
    tok[0] = 15;
    tok[T - 1] = 34;
    for (int g = 0; g < T; g++) {
        tok2[2 * g] = 1000 + g; /* the other column: garbage ids */
        tok2[2 * g + 1] = tok[g];
    }
    float wte[V * C], wpe[P * C], r[T * C], g0[V * C], gp0[P * C];
    tu_rand(wte, V * C, 1, 1.0f);
    tu_rand(wpe, P * C, 2, 1.0f);
    tu_rand(r, T * C, 3, 1.0f);
    tu_rand(g0, V * C, 4, 1.0f);
    tu_rand(gp0, P * C, 5, 1.0f);
    double wted[V * C], wped[P * C], rd[T * C], xref[T * C], gte[V * C], gpe[P * C], e[P * C > V * C ? P * C : V * C];
    for (int i = 0; i < V * C; i++) wted[i] = wte[i];
    for (int i = 0; i < P * C; i++) wped[i] = wpe[i];
    for (int i = 0; i < T * C; i++) rd[i] = r[i];
    ref_fwd(tok, wted, wped, xref);
    fd_grad(tok, wted, wped, rd, wted, V * C, gte);
    fd_grad(tok, wted, wped, rd, wped, P * C, gpe);

    sw_tensor *TOK = sw_tensor_new2d("tokens", SW_I32, T, 1), *TOK2 = sw_tensor_new2d("tokens2", SW_I32, T, 2);
    sw_tensor_write_host(TOK, tok);
    sw_tensor_write_host(TOK2, tok2);
    sw_tensor *WTE = tu_tensor("wte", V, C, wte), *WPE = tu_tensor("wpe", P, C, wpe);
    sw_tensor *X = tu_tensor("x", T, C, NULL), *R = tu_tensor("r", T, C, r);
    sw_tensor *DWTE = tu_tensor("dwte", V, C, g0), *DWPE = tu_tensor("dwpe", P, C, NULL);

    /* forward, whole */
    sw_tensor_fill(X, NAN);
    sw_embedding_fwd(sw_tensor_whole(TOK, STARPU_R), sw_tensor_whole(WTE, STARPU_R), sw_tensor_whole(WPE, STARPU_R),
                     sw_tensor_whole(X, STARPU_W), 0, B, POS0, VOCAB0, 1);
    float *x = tu_read(X);
    check("embedding fwd, whole (vocab0=15, ids outside the slice, pos0=2)", x, xref, T * C);
    free(x);
    /* forward, 3 row tiles of 7 rows (row0 = 0, 7, 14: not multiples of batch 3) */
    sw_tensor_fill(X, NAN);
    for (int i = 0; i < 3; i++) {
        int64_t first, count;
        sw_tile_range(T, 3, i, &first, &count);
        sw_embedding_fwd(sw_tensor_tiles(TOK, SW_ROWS, 3, STARPU_R)[i], sw_tensor_whole(WTE, STARPU_R),
                         sw_tensor_whole(WPE, STARPU_R), sw_tensor_tiles(X, SW_ROWS, 3, STARPU_W)[i], first, B, POS0,
                         VOCAB0, 1);
    }
    x = tu_read(X);
    check("embedding fwd, 3 row tiles (row0 = 0, 7, 14)", x, xref, T * C);
    free(x);
    /* forward, tokens as a strided column tile of an int32 [T, 2] */
    sw_tensor_fill(X, NAN);
    sw_embedding_fwd(sw_tensor_tiles(TOK2, SW_COLS, 2, STARPU_R)[1], sw_tensor_whole(WTE, STARPU_R),
                     sw_tensor_whole(WPE, STARPU_R), sw_tensor_whole(X, STARPU_W), 0, B, POS0, VOCAB0, 1);
    x = tu_read(X);
    check("embedding fwd, tokens a strided column tile", x, xref, T * C);
    free(x);
    /* forward, x as two strided column tiles: wte/wpe column tiles too */
    sw_tensor_fill(X, NAN);
    for (int j = 0; j < 2; j++)
        sw_embedding_fwd(sw_tensor_whole(TOK, STARPU_R), sw_tensor_tiles(WTE, SW_COLS, 2, STARPU_R)[j],
                         sw_tensor_tiles(WPE, SW_COLS, 2, STARPU_R)[j], sw_tensor_tiles(X, SW_COLS, 2, STARPU_W)[j], 0,
                         B, POS0, VOCAB0, 1);
    x = tu_read(X);
    check("embedding fwd, strided column tiles of wte, wpe and x", x, xref, T * C);
    free(x);
    /* forward without wpe (vocab-parallel ranks but one): x + wpe[pos] = the reference */
    sw_tensor_fill(X, NAN);
    sw_embedding_fwd(sw_tensor_whole(TOK, STARPU_R), sw_tensor_whole(WTE, STARPU_R), sw_tensor_whole(WPE, STARPU_R),
                     sw_tensor_whole(X, STARPU_W), 0, B, POS0, VOCAB0, 0);
    x = tu_read(X);
    for (int64_t row = 0; row < T; row++)
        for (int64_t j = 0; j < C; j++) x[row * C + j] += wpe[(POS0 + row / B) * C + j];
    check("embedding fwd without wpe, plus wpe[pos] afterwards", x, xref, T * C);
    free(x);

    /* backward, whole: dwte = g0 + grad (RW), dwpe = grad (zero_wpe 1, NaN before) */
    sw_tensor_fill(DWPE, NAN);
    sw_embedding_bwd(sw_tensor_whole(TOK, STARPU_R), sw_tensor_whole(R, STARPU_R), sw_tensor_whole(DWTE, STARPU_RW),
                     sw_tensor_whole(DWPE, STARPU_W), 0, B, POS0, VOCAB0, 1);
    float *dte = tu_read(DWTE), *dpe = tu_read(DWPE);
    for (int i = 0; i < V * C; i++) e[i] = g0[i] + gte[i];
    check("embedding bwd dwte += grad vs finite differences (whole)", dte, e, V * C);
    check("embedding bwd dwpe = grad vs finite differences (zero_wpe=1, whole)", dpe, gpe, P * C);
    free(dte);
    free(dpe);
    /* backward, row tiles: first tile zero_wpe 1, the others 0 (+=) */
    sw_tensor_write_host(DWTE, g0);
    sw_tensor_fill(DWPE, NAN);
    for (int i = 0; i < 3; i++) {
        int64_t first, count;
        sw_tile_range(T, 3, i, &first, &count);
        sw_embedding_bwd(sw_tensor_tiles(TOK, SW_ROWS, 3, STARPU_R)[i], sw_tensor_tiles(R, SW_ROWS, 3, STARPU_R)[i],
                         sw_tensor_whole(DWTE, STARPU_RW), sw_tensor_whole(DWPE, i ? STARPU_RW : STARPU_W), first, B,
                         POS0, VOCAB0, i == 0);
    }
    dte = tu_read(DWTE);
    dpe = tu_read(DWPE);
    for (int i = 0; i < V * C; i++) e[i] = g0[i] + gte[i];
    check("embedding bwd dwte, 3 row tiles", dte, e, V * C);
    check("embedding bwd dwpe, 3 row tiles (zero_wpe 1 then 0)", dpe, gpe, P * C);
    free(dte);
    free(dpe);
    /* backward, zero_wpe 0 on random dwpe, tokens strided */
    sw_tensor_write_host(DWTE, g0);
    sw_tensor_write_host(DWPE, gp0);
    sw_embedding_bwd(sw_tensor_tiles(TOK2, SW_COLS, 2, STARPU_R)[1], sw_tensor_whole(R, STARPU_R),
                     sw_tensor_whole(DWTE, STARPU_RW), sw_tensor_whole(DWPE, STARPU_RW), 0, B, POS0, VOCAB0, 0);
    dte = tu_read(DWTE);
    dpe = tu_read(DWPE);
    for (int i = 0; i < V * C; i++) e[i] = g0[i] + gte[i];
    check("embedding bwd dwte, tokens a strided column tile", dte, e, V * C);
    for (int i = 0; i < P * C; i++) e[i] = gp0[i] + gpe[i];
    check("embedding bwd dwpe += grad (zero_wpe=0)", dpe, e, P * C);
    free(dte);
    free(dpe);
    /* backward on strided column tiles of dx, dwte and dwpe, zero_wpe 1 */
    sw_tensor_write_host(DWTE, g0);
    sw_tensor_fill(DWPE, NAN);
    for (int j = 0; j < 2; j++)
        sw_embedding_bwd(sw_tensor_whole(TOK, STARPU_R), sw_tensor_tiles(R, SW_COLS, 2, STARPU_R)[j],
                         sw_tensor_tiles(DWTE, SW_COLS, 2, STARPU_RW)[j], sw_tensor_tiles(DWPE, SW_COLS, 2, STARPU_W)[j],
                         0, B, POS0, VOCAB0, 1);
    dte = tu_read(DWTE);
    dpe = tu_read(DWPE);
    for (int i = 0; i < V * C; i++) e[i] = g0[i] + gte[i];
    check("embedding bwd dwte, strided column tiles", dte, e, V * C);
    check("embedding bwd dwpe, strided column tiles (zero_wpe=1)", dpe, gpe, P * C);
    free(dte);
    free(dpe);

    /* no learned positions (wpe NULL): x = wte part; backward with
     * SW_EMB_ZERO_WTE writes dwte (NaN before), strided column tiles */
    sw_tensor_fill(X, NAN);
    sw_embedding_fwd(sw_tensor_whole(TOK, STARPU_R), sw_tensor_whole(WTE, STARPU_R), NULL,
                     sw_tensor_whole(X, STARPU_W), 0, B, POS0, VOCAB0, 1);
    x = tu_read(X);
    for (int64_t row = 0; row < T; row++)
        for (int64_t j = 0; j < C; j++) x[row * C + j] += wpe[(POS0 + row / B) * C + j];
    check("embedding fwd without a wpe buffer, plus wpe[pos] afterwards", x, xref, T * C);
    free(x);
    sw_tensor_fill(DWTE, NAN);
    for (int j = 0; j < 2; j++)
        sw_embedding_bwd(sw_tensor_whole(TOK, STARPU_R), sw_tensor_tiles(R, SW_COLS, 2, STARPU_R)[j],
                         sw_tensor_tiles(DWTE, SW_COLS, 2, STARPU_W)[j], NULL, 0, B, POS0, VOCAB0, SW_EMB_ZERO_WTE);
    dte = tu_read(DWTE);
    check("embedding bwd dwte = grad (SW_EMB_ZERO_WTE, no dwpe, NaN before, strided column tiles)", dte, gte, V * C);
    free(dte);

    /* the data has rows of wte that no id of the slice uses and the reference
     * gives them nothing, so the dwte checks above (= g0 + reference) also
     * show that the library leaves those rows at g0 */
    {
        int used[V] = {0};
        for (int g = 0; g < T; g++)
            if (tok[g] - VOCAB0 >= 0 && tok[g] - VOCAB0 < V) used[tok[g] - VOCAB0] = 1;
        int ok = 1, nused = 0;
        for (int v = 0; v < V; v++) {
            nused += used[v];
            if (!used[v])
                for (int c = 0; c < C; c++) ok &= gte[v * C + c] == 0.0;
        }
        tu_require("embedding: unused slice rows have zero gradient, some rows used", ok && nused > 2 && nused < V);
    }

    sw_tensor_free(TOK);
    sw_tensor_free(TOK2);
    sw_tensor_free(WTE);
    sw_tensor_free(WPE);
    sw_tensor_free(X);
    sw_tensor_free(R);
    sw_tensor_free(DWTE);
    sw_tensor_free(DWPE);
    table_layer();
    return tu_finish();
}
