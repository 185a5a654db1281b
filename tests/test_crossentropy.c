/* Cross-entropy pieces (sw_ce_max, sw_ce_target, sw_ce_sumexp, sw_ce_loss,
 * sw_ce_bwd) against a double-precision reference: padding columns (ids >=
 * vocab) ignored even when they hold huge values; a closed-form case (all
 * logits equal: loss = log(vocab)); two vocabulary blocks combined (max of
 * the block maxes, sumexp with the combined max, target summed) equal one
 * block; a block of padding only (max -inf, sumexp 0); the backward
 * against central finite differences of the reference loss.
 *
 * The weighted mean of the LM head's ignore index and row weights
 * (sw_ce_weights, sw_ce_mean, sw_ce_bwd_weighted): rows whose target is
 * the ignore index (-100) count for nothing, the loss is sum w ce / sum w
 * against the double-precision reference, the backward against central
 * differences of that loss (ignored rows exactly 0), the count summed over
 * two "micro-batches" of rows; every target ignored gives NaN and zero
 * gradients. With SW_CE_DUMP=FILE the -100 cases' logits, targets,
 * weights, loss and gradient go to FILE for tests/test_ce_torch.sh
 * (PyTorch's cross_entropy(ignore_index=-100)). */
#include <string.h>

#include "testutil.h"

enum { N = 6, VP = 48 }; /* rows, padded vocabulary (columns) */

/* loss of row r over the first vocab columns */
static double ref_row_loss(const double *x, int vocab, int target)
{
    double mx = -INFINITY, s = 0;
    for (int c = 0; c < vocab; c++) mx = x[c] > mx ? x[c] : mx;
    for (int c = 0; c < vocab; c++) s += exp(x[c] - mx);
    return log(s) + mx - x[target];
}

static void check(const char *what, const float *got, const double *ref, int64_t n, double rtol)
{
    tu_close(what, got, ref, n, rtol, 1e-6 * (1 + tu_maxabs(ref, n)));
}

/* The backward vs central differences: worst err/limit 0.027 over 8 seeds.
 * That is the kernel's fp32 rounding (a few ulps of exp(x - max) / sumexp):
 * eps 1e-4 to 1e-6 give the same figure; rtol 1e-6 with atol 1e-7 max|ref|
 * already leaves less than a 10x margin. */
static void check_bwd(const char *what, const float *got, const double *ref, int64_t n)
{
    tu_close(what, got, ref, n, 1e-6, 1e-6 * tu_maxabs(ref, n));
}

typedef struct ce_t {
    sw_tensor *L, *T, *mx, *tgt, *se, *loss;
} ce_t;

static starpu_data_handle_t wr(sw_tensor *t) { return sw_tensor_whole(t, STARPU_R); }
static starpu_data_handle_t ww(sw_tensor *t) { return sw_tensor_whole(t, STARPU_W); }

/* One case: logits x[N, VP] (padding columns hold junk), vocab, targets. */
static void run(const char *tag, const float *x, int vocab, const int32_t *tg, float scale)
{
    char what[256];
    double xd[N * VP], mx[N], tgt[N], se[N], loss[N], g[N * VP];
    for (int i = 0; i < N * VP; i++) xd[i] = x[i];
    for (int r = 0; r < N; r++) {
        const double *row = xd + r * VP;
        mx[r] = -INFINITY;
        for (int c = 0; c < vocab; c++) mx[r] = row[c] > mx[r] ? row[c] : mx[r];
        tgt[r] = row[tg[r]];
        se[r] = 0;
        for (int c = 0; c < vocab; c++) se[r] += exp(row[c] - mx[r]);
        loss[r] = log(se[r]) + mx[r] - tgt[r];
    }
    /* d (scale * sum_r loss_r) / d x, central differences; padding: 0 */
    const double eps = 1e-4;
    for (int r = 0; r < N; r++)
        for (int c = 0; c < VP; c++) {
            double *row = xd + r * VP, x0 = row[c];
            row[c] = x0 + eps;
            double lp = ref_row_loss(row, vocab, tg[r]);
            row[c] = x0 - eps;
            double lm = ref_row_loss(row, vocab, tg[r]);
            row[c] = x0;
            g[r * VP + c] = scale * (lp - lm) / (2 * eps);
        }

    sw_tensor *L = tu_tensor("logits", N, VP, x), *T = sw_tensor_new2d("targets", SW_I32, N, 1);
    sw_tensor_write_host(T, tg);
    sw_tensor *MX = tu_tensor("mx", N, 1, NULL), *TG = tu_tensor("tgt", N, 1, NULL), *SE = tu_tensor("se", N, 1, NULL);
    sw_tensor *LOSS = tu_tensor("loss", N, 1, NULL);
    sw_tensor_fill(MX, NAN);
    sw_tensor_fill(TG, NAN);
    sw_tensor_fill(SE, NAN);
    sw_tensor_fill(LOSS, NAN);

    /* one block */
    sw_ce_max(wr(L), ww(MX), 0, vocab);
    sw_ce_target(wr(L), wr(T), ww(TG), 0);
    sw_ce_sumexp(wr(L), wr(MX), ww(SE), 0, vocab);
    sw_ce_loss(wr(MX), wr(TG), wr(SE), ww(LOSS));
    float *gmx = tu_read(MX), *gtg = tu_read(TG), *gse = tu_read(SE), *gl = tu_read(LOSS);
    snprintf(what, sizeof what, "ce one block: max (%s)", tag);
    check(what, gmx, mx, N, 1e-6);
    snprintf(what, sizeof what, "ce one block: target logit (%s)", tag);
    check(what, gtg, tgt, N, 1e-6);
    snprintf(what, sizeof what, "ce one block: sumexp (%s)", tag);
    check(what, gse, se, N, 1e-5);
    snprintf(what, sizeof what, "ce one block: loss (%s)", tag);
    check(what, gl, loss, N, 1e-5);
    sw_ce_bwd(sw_tensor_whole(L, STARPU_RW), wr(MX), wr(SE), wr(T), 0, vocab, scale);
    float *gg = tu_read(L);
    snprintf(what, sizeof what, "ce one block: bwd vs finite differences, padding 0 (%s)", tag);
    check_bwd(what, gg, g, N * VP);
    free(gmx); free(gtg); free(gse); free(gl); free(gg);

    /* two vocabulary blocks of VP/2 columns (strided column tiles); the
     * per-block pieces go to strided column tiles of [N, 2] tensors */
    sw_tensor_write_host(L, x);
    sw_tensor *MXP = tu_tensor("mx_parts", N, 2, NULL), *TGP = tu_tensor("tgt_parts", N, 2, NULL);
    sw_tensor *SEP = tu_tensor("se_parts", N, 2, NULL);
    sw_tensor_fill(MXP, NAN);
    sw_tensor_fill(TGP, NAN);
    sw_tensor_fill(SEP, NAN);
    const int64_t vb = VP / 2;
    for (int j = 0; j < 2; j++) {
        starpu_data_handle_t lj = sw_tensor_tiles(L, SW_COLS, 2, STARPU_R)[j];
        sw_ce_max(lj, sw_tensor_tiles(MXP, SW_COLS, 2, STARPU_W)[j], j * vb, vocab);
        sw_ce_target(lj, wr(T), sw_tensor_tiles(TGP, SW_COLS, 2, STARPU_W)[j], j * vb);
    }
    float *pm = tu_read(MXP), *pt = tu_read(TGP);
    /* combine on the host: max of maxes, sum of targets */
    float cm[N], ct[N];
    double bm[2 * N];
    for (int r = 0; r < N; r++) {
        cm[r] = pm[2 * r] > pm[2 * r + 1] ? pm[2 * r] : pm[2 * r + 1];
        ct[r] = pt[2 * r] + pt[2 * r + 1];
        for (int j = 0; j < 2; j++) {
            double m = -INFINITY;
            for (int c = (int)(j * vb); c < (int)((j + 1) * vb) && c < vocab; c++)
                m = xd[r * VP + c] > m ? xd[r * VP + c] : m;
            bm[2 * r + j] = m;
        }
    }
    {
        int ok = 1;
        for (int i = 0; i < 2 * N; i++) ok &= bm[i] == -INFINITY ? pm[i] == -INFINITY : pm[i] == (float)bm[i];
        snprintf(what, sizeof what, "ce two blocks: block maxes (-inf for a block of padding only) (%s)", tag);
        tu_true(what, ok);
        ok = 1;
        for (int r = 0; r < N; r++)
            for (int j = 0; j < 2; j++) {
                int in = tg[r] >= j * vb && tg[r] < (j + 1) * vb;
                ok &= pt[2 * r + j] == (in ? x[r * VP + tg[r]] : 0.0f);
            }
        snprintf(what, sizeof what, "ce two blocks: block target logits (0 outside the block) (%s)", tag);
        tu_true(what, ok);
    }
    sw_tensor_write_host(MX, cm);
    sw_tensor_write_host(TG, ct);
    for (int j = 0; j < 2; j++)
        sw_ce_sumexp(sw_tensor_tiles(L, SW_COLS, 2, STARPU_R)[j], wr(MX), sw_tensor_tiles(SEP, SW_COLS, 2, STARPU_W)[j],
                     j * vb, vocab);
    float *ps = tu_read(SEP), cs[N];
    for (int r = 0; r < N; r++) cs[r] = ps[2 * r] + ps[2 * r + 1];
    if (vocab <= vb) {
        int ok = 1;
        for (int r = 0; r < N; r++) ok &= ps[2 * r + 1] == 0.0f;
        snprintf(what, sizeof what, "ce two blocks: sumexp of a block of padding only is 0 (%s)", tag);
        tu_true(what, ok);
    }
    sw_tensor_write_host(SE, cs);
    sw_ce_loss(wr(MX), wr(TG), wr(SE), ww(LOSS));
    gl = tu_read(LOSS);
    snprintf(what, sizeof what, "ce two blocks combined: loss = one block (%s)", tag);
    check(what, gl, loss, N, 1e-5);
    for (int j = 0; j < 2; j++)
        sw_ce_bwd(sw_tensor_tiles(L, SW_COLS, 2, STARPU_RW)[j], wr(MX), wr(SE), wr(T), j * vb, vocab, scale);
    gg = tu_read(L);
    snprintf(what, sizeof what, "ce two blocks: bwd vs finite differences, padding 0 (%s)", tag);
    check_bwd(what, gg, g, N * VP);
    free(pm); free(pt); free(ps); free(gl); free(gg);

    sw_tensor_free(L); sw_tensor_free(T); sw_tensor_free(MX); sw_tensor_free(TG); sw_tensor_free(SE);
    sw_tensor_free(LOSS); sw_tensor_free(MXP); sw_tensor_free(TGP); sw_tensor_free(SEP);
}

/* sum_r rw_r loss_r / sum_r rw_r of the reference (rw 0: ignored) */
static double ref_weighted(const double *xd, int vocab, const int32_t *tg, const double *rw)
{
    double num = 0, den = 0;
    for (int r = 0; r < N; r++) {
        if (rw[r] == 0) continue;
        num += rw[r] * ref_row_loss(xd + r * VP, vocab, tg[r]);
        den += rw[r];
    }
    return num / den;
}

static FILE *dump; /* SW_CE_DUMP */

/* One weighted case: targets with ignore rows, weights (NULL: 1). The
 * count comes from two halves of the rows, summed as micro-batches are. */
static void run_weighted(const char *tag, const float *x, int vocab, const int32_t *tg, const float *w, int32_t ignore)
{
    char what[256];
    double xd[N * VP], rw[N], g[N * VP], count = 0;
    for (int i = 0; i < N * VP; i++) xd[i] = x[i];
    for (int r = 0; r < N; r++) rw[r] = tg[r] == ignore ? 0.0 : w ? w[r] : 1.0, count += rw[r];
    double loss = count > 0 ? ref_weighted(xd, vocab, tg, rw) : NAN;
    const double eps = 1e-4;
    for (int r = 0; r < N; r++)
        for (int c = 0; c < VP; c++) {
            if (rw[r] == 0 || count == 0) { g[r * VP + c] = 0; continue; } /* no gradient, exactly */
            double *row = xd + r * VP, x0 = row[c];
            row[c] = x0 + eps;
            double lp = ref_weighted(xd, vocab, tg, rw);
            row[c] = x0 - eps;
            double lm = ref_weighted(xd, vocab, tg, rw);
            row[c] = x0;
            g[r * VP + c] = (lp - lm) / (2 * eps);
        }

    sw_tensor *L = tu_tensor("logits", N, VP, x), *T = sw_tensor_new2d("targets", SW_I32, N, 1);
    sw_tensor_write_host(T, tg);
    sw_tensor *W = w ? tu_tensor("weights", N, 1, w) : NULL, *RW = tu_tensor("rw", N, 1, NULL);
    sw_tensor *MX = tu_tensor("mx", N, 1, NULL), *TG = tu_tensor("tgt", N, 1, NULL), *SE = tu_tensor("se", N, 1, NULL);
    sw_tensor *LOSS = tu_tensor("loss", N, 1, NULL), *CNT = tu_tensor("count", 1, 1, NULL), *OUT = tu_tensor("out", 1, 1, NULL);
    sw_tensor_fill(RW, NAN);
    sw_tensor_fill(CNT, NAN);
    sw_ce_weights(wr(T), W ? wr(W) : NULL, ww(RW), ignore);
    /* the count over two halves of the rows, as over two micro-batches */
    for (int k = 0; k < 2; k++)
        sw_colsum(sw_tensor_tiles(RW, SW_ROWS, 2, STARPU_R)[k], sw_tensor_whole(CNT, k ? STARPU_RW : STARPU_W), 1.0f,
                  k ? 1.0f : 0.0f);
    sw_ce_max(wr(L), ww(MX), 0, vocab);
    sw_ce_target(wr(L), wr(T), ww(TG), 0);
    sw_ce_sumexp(wr(L), wr(MX), ww(SE), 0, vocab);
    sw_ce_loss(wr(MX), wr(TG), wr(SE), ww(LOSS));
    sw_ce_mean(wr(LOSS), wr(RW), wr(CNT), ww(OUT));
    float *grw = tu_read(RW), *gcnt = tu_read(CNT), *gout = tu_read(OUT);
    snprintf(what, sizeof what, "ce weighted: row weights (0 where ignored) (%s)", tag);
    check(what, grw, rw, N, 0);
    snprintf(what, sizeof what, "ce weighted: count summed over two halves = sum of weights %g (%s)", count, tag);
    check(what, gcnt, &count, 1, 1e-7);
    snprintf(what, sizeof what, "ce weighted: loss = sum w ce / sum w = %.6f (%s)", loss, tag);
    check(what, gout, &loss, 1, 1e-6);
    sw_ce_bwd_weighted(sw_tensor_whole(L, STARPU_RW), wr(MX), wr(SE), wr(T), wr(RW), wr(CNT), 0, vocab);
    float *gg = tu_read(L);
    snprintf(what, sizeof what, "ce weighted: bwd vs finite differences, ignored rows and padding 0 (%s)", tag);
    check_bwd(what, gg, g, N * VP);
    int zero = 1;
    for (int r = 0; r < N; r++)
        for (int c = 0; c < VP; c++) zero &= rw[r] != 0 || gg[r * VP + c] == 0.0f;
    snprintf(what, sizeof what, "ce weighted: ignored rows' gradient exactly 0 (%s)", tag);
    tu_true(what, zero);
    /* two vocabulary blocks: the weighted backward per block = one block */
    sw_tensor_write_host(L, x);
    for (int j = 0; j < 2; j++)
        sw_ce_bwd_weighted(sw_tensor_tiles(L, SW_COLS, 2, STARPU_RW)[j], wr(MX), wr(SE), wr(T), wr(RW), wr(CNT),
                           j * (VP / 2), vocab);
    float *g2 = tu_read(L);
    snprintf(what, sizeof what, "ce weighted two blocks: bwd vs finite differences (%s)", tag);
    check_bwd(what, g2, g, N * VP);
    if (dump && ignore == -100) {
        fprintf(dump, "case %s\n%d %d %d %d\n", tag, N, VP, vocab, w != NULL);
        for (int i = 0; i < N * VP; i++) fprintf(dump, "%.9g%c", x[i], i % VP == VP - 1 ? '\n' : ' ');
        for (int r = 0; r < N; r++) fprintf(dump, "%d%c", tg[r], r == N - 1 ? '\n' : ' ');
        for (int r = 0; r < N; r++) fprintf(dump, "%.9g%c", w ? w[r] : 1.0f, r == N - 1 ? '\n' : ' ');
        fprintf(dump, "%.9g\n", gout[0]);
        for (int i = 0; i < N * VP; i++) fprintf(dump, "%.9g%c", gg[i], i % VP == VP - 1 ? '\n' : ' ');
    }
    free(grw); free(gcnt); free(gout); free(gg); free(g2);
    sw_tensor *all[] = {L, T, W, RW, MX, TG, SE, LOSS, CNT, OUT};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) sw_tensor_free(all[i]);
}

/* every target ignored: NaN (PyTorch's mean over no row), gradients 0 */
static void run_all_ignored(const float *x)
{
    int32_t tg[N];
    for (int r = 0; r < N; r++) tg[r] = -100;
    sw_tensor *L = tu_tensor("logits", N, VP, x), *T = sw_tensor_new2d("targets", SW_I32, N, 1);
    sw_tensor_write_host(T, tg);
    sw_tensor *RW = tu_tensor("rw", N, 1, NULL), *MX = tu_tensor("mx", N, 1, NULL), *TG = tu_tensor("tgt", N, 1, NULL);
    sw_tensor *SE = tu_tensor("se", N, 1, NULL), *LOSS = tu_tensor("loss", N, 1, NULL);
    sw_tensor *CNT = tu_tensor("count", 1, 1, NULL), *OUT = tu_tensor("out", 1, 1, NULL);
    sw_ce_weights(wr(T), NULL, ww(RW), -100);
    sw_colsum(wr(RW), ww(CNT), 1.0f, 0.0f);
    sw_ce_max(wr(L), ww(MX), 0, VP);
    sw_ce_target(wr(L), wr(T), ww(TG), 0);
    sw_ce_sumexp(wr(L), wr(MX), ww(SE), 0, VP);
    sw_ce_loss(wr(MX), wr(TG), wr(SE), ww(LOSS));
    sw_ce_mean(wr(LOSS), wr(RW), wr(CNT), ww(OUT));
    sw_ce_bwd_weighted(sw_tensor_whole(L, STARPU_RW), wr(MX), wr(SE), wr(T), wr(RW), wr(CNT), 0, VP);
    float *gout = tu_read(OUT), *gcnt = tu_read(CNT), *gg = tu_read(L);
    tu_true("ce weighted, every target ignored: count 0, loss NaN (PyTorch's mean over no row)",
            gcnt[0] == 0.0f && isnan(gout[0]));
    int zero = 1;
    for (int i = 0; i < N * VP; i++) zero &= gg[i] == 0.0f;
    tu_true("ce weighted, every target ignored: every gradient 0 (not NaN)", zero);
    free(gout); free(gcnt); free(gg);
    sw_tensor *all[] = {L, T, RW, MX, TG, SE, LOSS, CNT, OUT};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) sw_tensor_free(all[i]);
}

int main(int argc, char **argv)
{
    tu_init(&argc, &argv);
    float x[N * VP];
    int32_t tg[N];

    /* closed form: all (valid) logits equal -> loss = log(vocab); padding huge */
    {
        const int vocab = 45;
        for (int r = 0; r < N; r++)
            for (int c = 0; c < VP; c++) x[r * VP + c] = c < vocab ? 0.7f : 1e4f;
        for (int r = 0; r < N; r++) tg[r] = (r * 11) % vocab;
        tg[N - 1] = vocab - 1;
        sw_tensor *L = tu_tensor("logits", N, VP, x), *T = sw_tensor_new2d("targets", SW_I32, N, 1);
        sw_tensor_write_host(T, tg);
        sw_tensor *MX = tu_tensor("mx", N, 1, NULL), *TG = tu_tensor("tgt", N, 1, NULL);
        sw_tensor *SE = tu_tensor("se", N, 1, NULL), *LOSS = tu_tensor("loss", N, 1, NULL);
        sw_ce_max(wr(L), ww(MX), 0, vocab);
        sw_ce_target(wr(L), wr(T), ww(TG), 0);
        sw_ce_sumexp(wr(L), wr(MX), ww(SE), 0, vocab);
        sw_ce_loss(wr(MX), wr(TG), wr(SE), ww(LOSS));
        float *gl = tu_read(LOSS);
        double e[N];
        for (int r = 0; r < N; r++) e[r] = log(45.0);
        check("ce closed form: all logits equal, 3 padding columns of 1e4: loss = log(45)", gl, e, N, 1e-6);
        sw_ce_bwd(sw_tensor_whole(L, STARPU_RW), wr(MX), wr(SE), wr(T), 0, vocab, 0.5f);
        float *gg = tu_read(L);
        double ge[N * VP];
        for (int r = 0; r < N; r++)
            for (int c = 0; c < VP; c++)
                ge[r * VP + c] = c < vocab ? 0.5 * (1.0 / 45.0 - (c == tg[r])) : 0.0;
        check("ce closed form: bwd = 0.5 (1/45 - onehot), padding 0", gg, ge, N * VP, 1e-5);
        free(gl);
        free(gg);
        sw_tensor_free(L); sw_tensor_free(T); sw_tensor_free(MX); sw_tensor_free(TG); sw_tensor_free(SE);
        sw_tensor_free(LOSS);
    }

    /* random logits, padding columns holding values that would dominate */
    tu_rand(x, N * VP, 7, 4.0f);
    for (int r = 0; r < N; r++)
        for (int c = 45; c < VP; c++) x[r * VP + c] = 1e4f;
    for (int r = 0; r < N; r++) tg[r] = (r * 13 + 5) % 45;
    tg[0] = 0;
    tg[1] = 44;
    tg[2] = 23;
    tg[3] = 24;
    run("vocab 45 in 48 columns, blocks of 24", x, 45, tg, 1.0f / N);
    /* vocabulary smaller than a block: the second block is padding only */
    tu_rand(x, N * VP, 8, 3.0f);
    for (int r = 0; r < N; r++)
        for (int c = 20; c < VP; c++) x[r * VP + c] = 50.0f + (float)c;
    for (int r = 0; r < N; r++) tg[r] = (r * 7 + 2) % 20;
    run("vocab 20 in 48 columns: block 2 is padding only", x, 20, tg, 0.25f);
    /* no padding at all */
    tu_rand(x, N * VP, 9, 2.0f);
    for (int r = 0; r < N; r++) tg[r] = (r * 17 + 3) % VP;
    tg[0] = VP - 1;
    run("vocab 48, no padding", x, VP, tg, 1.0f);

    /* the weighted mean: ignore rows (-100, and an index past the vocabulary), weights */
    const char *dp = getenv("SW_CE_DUMP");
    if (dp && !(dump = fopen(dp, "w"))) {
        perror(dp);
        return 99;
    }
    tu_rand(x, N * VP, 10, 4.0f);
    for (int r = 0; r < N; r++)
        for (int c = 45; c < VP; c++) x[r * VP + c] = 1e4f;
    const int32_t tgi[N] = {3, -100, 44, -100, 0, 17};
    run_weighted("vocab 45, rows 1 and 3 ignored (-100)", x, 45, tgi, NULL, -100);
    const float wts[N] = {0.5f, 3.0f, 1.0f, 2.0f, 0.0f, 1.25f};
    run_weighted("vocab 45, rows 1 and 3 ignored, row weights (one 0)", x, 45, tgi, wts, -100);
    const int32_t tgv[N] = {3, 50, 44, 50, 0, 17};
    run_weighted("vocab 45, ignore index 50 (past the vocabulary), row weights", x, 45, tgv, wts, 50);
    const int32_t tga[N] = {3, 8, 44, 9, 0, 17};
    run_weighted("vocab 45, no row ignored: the plain mean", x, 45, tga, NULL, -100);
    run_all_ignored(x);
    if (dump) fclose(dump);
    return tu_finish();
}
