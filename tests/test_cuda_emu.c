/* The CUDA kernels (codelets/cuda/<op>.cu) run on the CPU through
 * tests/cuda_emu.h, against the CPU codelets run by StarPU on the same
 * inputs: GPU builds only, and no GPU needed, so that CI checks the
 * kernels' arithmetic and index math (strided tiles, partial blocks, grid
 * loops, masks, GQA, merge; the attention with saved probabilities) where
 * no kernel can run for real.
 *
 * The emulated launchers get host buffers with a leading dimension wider
 * than the matrix (and strided vectors); the padding holds a sentinel that
 * must survive. Tolerances: bitwise where both sides evaluate the same
 * expression without a multiply-add the compilers may fuse differently
 * (dropout, embedding, adds, copies, products); otherwise 1e-5 relative (5e-5 where
 * a reduction's order differs on long rows); the dropout masks of the
 * attention tiles are the CPU's exactly (the kept/dropped pattern is
 * checked through zeros; with saved probabilities, one-hot V and dO make o
 * and dv the dropped probabilities themselves, so every entry's bit shows).
 * Key padding (per-sequence key lengths) in both attention paths. */
#include <string.h>

#include "bf16.h"
#include "cuda/kernels.h"
#include "testutil.h"

#define PAD 5
#define SENTINEL 12345.0f

static void *xmalloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
    if (!p) {
        perror("calloc");
        exit(99);
    }
    return p;
}

/* ---- host matrices with padding (the emulated side) ---- */
typedef struct {
    float *p;
    int64_t R, C, ld;
} hmat;

static hmat hm_new(int64_t R, int64_t C, const float *src)
{
    hmat m = {xmalloc(sizeof(float) * (size_t)(R * (C + PAD) + 1)), R, C, C + PAD};
    for (int64_t i = 0; i < R * m.ld; i++) m.p[i] = SENTINEL;
    if (src)
        for (int64_t r = 0; r < R; r++) memcpy(m.p + r * m.ld, src + r * C, sizeof(float) * (size_t)C);
    return m;
}

static float *hm_get(hmat m)
{
    float *x = xmalloc(sizeof(float) * (size_t)(m.R * m.C));
    for (int64_t r = 0; r < m.R; r++) memcpy(x + r * m.C, m.p + r * m.ld, sizeof(float) * (size_t)m.C);
    return x;
}

static int hm_pad_ok(hmat m)
{
    for (int64_t r = 0; r < m.R; r++)
        for (int64_t c = m.C; c < m.ld; c++)
            if (m.p[r * m.ld + c] != SENTINEL) return 0;
    return 1;
}

/* a vector of n with element stride inc (sentinels between) */
static float *vec_new(int64_t n, int64_t inc, const float *src)
{
    float *v = xmalloc(sizeof(float) * (size_t)(n * inc + 1));
    for (int64_t i = 0; i < n * inc; i++) v[i] = SENTINEL;
    if (src)
        for (int64_t i = 0; i < n; i++) v[i * inc] = src[i];
    return v;
}

static float *vec_get(const float *v, int64_t n, int64_t inc)
{
    float *x = xmalloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) x[i] = v[i * inc];
    return x;
}

static int vec_gaps_ok(const float *v, int64_t n, int64_t inc)
{
    for (int64_t i = 0; i < n * inc; i++)
        if (i % inc && v[i] != SENTINEL) return 0;
    return 1;
}

/* ---- comparisons ---- */
/* tu_close against the CPU's float results */
static void close_f(const char *what, const float *got, const float *ref, int64_t n, double rtol, double atol)
{
    double *r = xmalloc(sizeof(double) * (size_t)n);
    tu_to_double(r, ref, n);
    tu_close(what, got, r, n, rtol, atol);
    free(r);
}

static void same_bits(const char *what, const float *got, const float *ref, int64_t n)
{
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&got[i], &ref[i], sizeof(float)) != 0) {
            if (first < 0) first = i;
            bad++;
        }
    char buf[400];
    if (bad)
        snprintf(buf, sizeof buf, "%s: bit-identical (%lld of %lld differ, first at %lld: %.9g vs %.9g)", what,
                 (long long)bad, (long long)n, (long long)first, got[first], ref[first]);
    else
        snprintf(buf, sizeof buf, "%s: bit-identical (%lld values)", what, (long long)n);
    tu_true(buf, bad == 0);
}

static void check_pad(const char *what, hmat m)
{
    char buf[400];
    snprintf(buf, sizeof buf, "%s: nothing written beyond the columns", what);
    tu_true(buf, hm_pad_ok(m));
}

/* ---- the CPU side: tensors, StarPU ---- */
static sw_tensor *T(const char *name, int64_t R, int64_t C, const float *x)
{
    sw_tensor *t = tu_tensor(name, R, C, NULL);
    if (x) sw_tensor_write_host(t, x);
    else sw_tensor_fill(t, 0.0f);
    return t;
}

static sw_tensor *TI(const char *name, int64_t n, const int32_t *x)
{
    sw_tensor *t = sw_tensor_new2d(name, SW_I32, n, 1);
    sw_tensor_write_host(t, x);
    return t;
}

#define W(t) sw_tensor_whole((t), STARPU_W)
#define RD(t) sw_tensor_whole((t), STARPU_R)
#define RW(t) sw_tensor_whole((t), STARPU_RW)

static float *rnd(int64_t n, uint64_t seed, float scale)
{
    float *x = xmalloc(sizeof(float) * (size_t)n);
    tu_rand(x, n, seed, scale);
    return x;
}

#define CHECK_LAUNCH(call) tu_true(#call " == cudaSuccess", (call) == cudaSuccess)

/* ================= GEMM bias rows ================= */
static void test_bias_rows(void)
{
    const int64_t m = 7, n = 300;
    float *bias = rnd(n, 1, 1.0f);
    float *bv = vec_new(n, 3, bias);
    hmat c = hm_new(m, n, NULL);
    CHECK_LAUNCH(sw_cuda_bias_rows(c.p, c.ld, bv, 3, m, n, NULL));
    float *got = hm_get(c), *ref = xmalloc(sizeof(float) * (size_t)(m * n));
    for (int64_t r = 0; r < m; r++) memcpy(ref + r * n, bias, sizeof(float) * (size_t)n);
    same_bits("bias_rows (strided bias)", got, ref, m * n);
    check_pad("bias_rows", c);
    free(bias), free(bv), free(c.p), free(got), free(ref);
}

/* ================= LayerNorm, RMSNorm ================= */
static void test_norms(void)
{
    const int64_t R = 37, C = 300;
    const float eps = 1e-5f;
    float *x = rnd(R * C, 2, 2.0f), *w = rnd(C, 3, 1.0f), *b = rnd(C, 4, 0.5f), *dy = rnd(R * C, 5, 1.0f);
    for (int64_t i = 0; i < C; i++) x[i] += 3.0f; /* a row with a large mean */
    float *dx0 = rnd(R * C, 6, 1.0f);

    /* CPU */
    sw_tensor *X = T("x", R, C, x), *Wt = T("w", 1, C, w), *Bt = T("b", 1, C, b), *Y = T("y", R, C, NULL);
    sw_tensor *M = T("mean", R, 1, NULL), *S = T("rstd", R, 1, NULL), *DY = T("dy", R, C, dy);
    sw_tensor *DX = T("dx", R, C, dx0), *DW = T("dw", 1, C, NULL), *DB = T("db", 1, C, NULL);
    sw_layernorm_fwd(RD(X), RD(Wt), RD(Bt), W(Y), W(M), W(S), eps);
    sw_layernorm_bwd(RD(DY), RD(X), RD(Wt), RD(M), RD(S), RW(DX), W(DW), W(DB), 1);
    float *y = tu_read(Y), *mean = tu_read(M), *rstd = tu_read(S), *dx = tu_read(DX), *dw = tu_read(DW),
          *db = tu_read(DB);

    /* emulated: strided w (2), b (3), mean (2), rstd (4), dw (3), db (2) */
    hmat hx = hm_new(R, C, x), hy = hm_new(R, C, NULL), hdy = hm_new(R, C, dy), hdx = hm_new(R, C, dx0);
    float *vw = vec_new(C, 2, w), *vb = vec_new(C, 3, b), *vm = vec_new(R, 2, NULL), *vs = vec_new(R, 4, NULL);
    float *vdw = vec_new(C, 3, NULL), *vdb = vec_new(C, 2, NULL);
    CHECK_LAUNCH(sw_cuda_layernorm_fwd(hx.p, hx.ld, vw, 2, vb, 3, hy.p, hy.ld, vm, 2, vs, 4, R, C, eps, NULL));
    float *gy = hm_get(hy), *gm = vec_get(vm, R, 2), *gs = vec_get(vs, R, 4);
    close_f("layernorm fwd y", gy, y, R * C, 1e-5, 1e-5);
    close_f("layernorm fwd mean", gm, mean, R, 1e-5, 1e-6);
    close_f("layernorm fwd rstd", gs, rstd, R, 1e-5, 1e-6);
    check_pad("layernorm fwd y", hy);
    tu_true("layernorm fwd: vector gaps untouched", vec_gaps_ok(vm, R, 2) && vec_gaps_ok(vs, R, 4));
    /* backward from the CPU's statistics, accumulate into dx */
    float *vm2 = vec_new(R, 2, mean), *vs2 = vec_new(R, 4, rstd);
    CHECK_LAUNCH(sw_cuda_layernorm_bwd(hdy.p, hdy.ld, hx.p, hx.ld, vw, 2, vm2, 2, vs2, 4, hdx.p, hdx.ld, vdw, 3, vdb,
                                       2, R, C, 1, NULL));
    float *gdx = hm_get(hdx), *gdw = vec_get(vdw, C, 3), *gdb = vec_get(vdb, C, 2);
    close_f("layernorm bwd dx (+=)", gdx, dx, R * C, 1e-5, 1e-5);
    close_f("layernorm bwd dw", gdw, dw, C, 1e-5, 1e-5);
    close_f("layernorm bwd db", gdb, db, C, 1e-5, 1e-5);
    check_pad("layernorm bwd dx", hdx);
    tu_true("layernorm bwd: vector gaps untouched", vec_gaps_ok(vdw, C, 3) && vec_gaps_ok(vdb, C, 2));
    free(gy), free(gm), free(gs), free(gdx), free(gdw), free(gdb), free(y), free(mean), free(rstd), free(dx),
        free(dw), free(db);
    free(vm2), free(vs2);

    /* RMSNorm: dx written (=) */
    sw_tensor *Sr = T("rstd_r", R, 1, NULL), *DXr = T("dx_r", R, C, NULL), *DWr = T("dw_r", 1, C, NULL);
    sw_rmsnorm_fwd(RD(X), RD(Wt), W(Y), W(Sr), eps);
    sw_rmsnorm_bwd(RD(DY), RD(X), RD(Wt), RD(Sr), W(DXr), W(DWr), 0);
    y = tu_read(Y), rstd = tu_read(Sr), dx = tu_read(DXr), dw = tu_read(DWr);
    hmat hy2 = hm_new(R, C, NULL), hdx2 = hm_new(R, C, NULL);
    float *vs3 = vec_new(R, 3, NULL);
    CHECK_LAUNCH(sw_cuda_rmsnorm_fwd(hx.p, hx.ld, vw, 2, hy2.p, hy2.ld, vs3, 3, R, C, eps, NULL));
    gy = hm_get(hy2), gs = vec_get(vs3, R, 3);
    close_f("rmsnorm fwd y", gy, y, R * C, 1e-5, 1e-5);
    close_f("rmsnorm fwd rstd", gs, rstd, R, 1e-5, 1e-6);
    check_pad("rmsnorm fwd y", hy2);
    float *vs4 = vec_new(R, 3, rstd), *vdw2 = vec_new(C, 2, NULL);
    CHECK_LAUNCH(sw_cuda_rmsnorm_bwd(hdy.p, hdy.ld, hx.p, hx.ld, vw, 2, vs4, 3, hdx2.p, hdx2.ld, vdw2, 2, R, C, 0,
                                     NULL));
    gdx = hm_get(hdx2), gdw = vec_get(vdw2, C, 2);
    close_f("rmsnorm bwd dx (=)", gdx, dx, R * C, 1e-5, 1e-5);
    close_f("rmsnorm bwd dw", gdw, dw, C, 1e-5, 1e-5);
    check_pad("rmsnorm bwd dx", hdx2);
    free(gy), free(gs), free(gdx), free(gdw), free(y), free(rstd), free(dx), free(dw);
    free(vs3), free(vs4), free(vdw2), free(hy2.p), free(hdx2.p);

    sw_tensor *all[] = {X, Wt, Bt, Y, M, S, DY, DX, DW, DB, Sr, DXr, DWr};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) sw_tensor_free(all[i]);
    free(x), free(w), free(b), free(dy), free(dx0);
    free(hx.p), free(hy.p), free(hdy.p), free(hdx.p), free(vw), free(vb), free(vm), free(vs), free(vdw), free(vdb);
}

/* ================= GeLU, softmax ================= */
static void test_gelu_softmax(void)
{
    const int64_t R = 9, C = 700;
    float *x = rnd(R * C, 7, 8.0f), *g = rnd(R * C, 8, 1.0f);
    x[3] = 30.0f, x[4] = -30.0f; /* the clamps */
    sw_tensor *X = T("x", R, C, x), *Y = T("y", R, C, NULL), *G = T("g", R, C, g);
    sw_gelu_fwd(RD(X), W(Y));
    sw_gelu_bwd(RD(X), RW(G));
    float *y = tu_read(Y), *gd = tu_read(G);
    hmat hx = hm_new(R, C, x), hy = hm_new(R, C, NULL), hg = hm_new(R, C, g);
    CHECK_LAUNCH(sw_cuda_gelu_fwd(hx.p, hx.ld, hy.p, hy.ld, R, C, NULL));
    CHECK_LAUNCH(sw_cuda_gelu_bwd(hx.p, hx.ld, hg.p, hg.ld, R, C, NULL));
    float *gy = hm_get(hy), *gg = hm_get(hg);
    close_f("gelu fwd", gy, y, R * C, 1e-5, 1e-6);
    close_f("gelu bwd", gg, gd, R * C, 1e-5, 1e-6);
    check_pad("gelu", hy);
    free(y), free(gd), free(gy), free(gg);

    /* softmax: row 2 all -inf (zeros), row 5 half -inf */
    for (int64_t c = 0; c < C; c++) x[2 * C + c] = -INFINITY;
    for (int64_t c = 0; c < C; c += 2) x[5 * C + c] = -INFINITY;
    sw_tensor_write_host(X, x);
    sw_tensor *DX = T("dx", R, C, NULL);
    sw_softmax_fwd(RD(X), W(Y));
    sw_softmax_bwd(RD(Y), RD(G), W(DX));
    y = tu_read(Y);
    float *dx = tu_read(DX), *gcpu = tu_read(G);
    hmat hx2 = hm_new(R, C, x), hy2 = hm_new(R, C, NULL), hy3 = hm_new(R, C, y), hg2 = hm_new(R, C, gcpu),
         hdx = hm_new(R, C, NULL);
    CHECK_LAUNCH(sw_cuda_softmax_fwd(hx2.p, hx2.ld, hy2.p, hy2.ld, R, C, NULL));
    CHECK_LAUNCH(sw_cuda_softmax_bwd(hy3.p, hy3.ld, hg2.p, hg2.ld, hdx.p, hdx.ld, R, C, NULL));
    gy = hm_get(hy2);
    float *gdx = hm_get(hdx);
    close_f("softmax fwd (an all -inf row, a half -inf row)", gy, y, R * C, 1e-5, 1e-7);
    close_f("softmax bwd", gdx, dx, R * C, 1e-5, 1e-7);
    check_pad("softmax", hy2);
    free(y), free(dx), free(gcpu), free(gy), free(gdx);
    sw_tensor_free(X), sw_tensor_free(Y), sw_tensor_free(G), sw_tensor_free(DX);
    free(hx.p), free(hy.p), free(hg.p), free(hx2.p), free(hy2.p), free(hy3.p), free(hg2.p), free(hdx.p), free(x),
        free(g);
}

/* ================= SwiGLU, element-wise product, RoPE (LLaMA) ================= */
static void test_llama_ops(void)
{
    const int64_t R = 9, C = 700;
    float *g = rnd(R * C, 50, 8.0f), *u = rnd(R * C, 51, 2.0f), *dy = rnd(R * C, 52, 1.0f);
    g[3] = 100.0f, g[4] = -100.0f; /* exp(-gate) over- and underflows */
    sw_tensor *G = T("gate", R, C, g), *U = T("up", R, C, u), *DY = T("dy", R, C, dy), *Y = T("y", R, C, NULL);
    sw_tensor *DG = T("dgate", R, C, NULL), *DU = T("dup", R, C, NULL), *Z = T("z", R, C, NULL);
    sw_swiglu_fwd(RD(G), RD(U), W(Y));
    sw_swiglu_bwd(RD(G), RD(U), RD(DY), W(DG), W(DU));
    sw_mul(RD(G), RD(U), W(Z));
    float *y = tu_read(Y), *dg = tu_read(DG), *du = tu_read(DU), *z = tu_read(Z);
    hmat hg = hm_new(R, C, g), hu = hm_new(R, C, u), hdy = hm_new(R, C, dy), hy = hm_new(R, C, NULL);
    hmat hdg = hm_new(R, C, NULL), hdu = hm_new(R, C, NULL), hz = hm_new(R, C, NULL);
    CHECK_LAUNCH(sw_cuda_swiglu_fwd(hg.p, hg.ld, hu.p, hu.ld, hy.p, hy.ld, R, C, NULL));
    CHECK_LAUNCH(sw_cuda_swiglu_bwd(hg.p, hg.ld, hu.p, hu.ld, hdy.p, hdy.ld, hdg.p, hdg.ld, hdu.p, hdu.ld, R, C, NULL));
    CHECK_LAUNCH(sw_cuda_mul(hg.p, hg.ld, hu.p, hu.ld, hz.p, hz.ld, R, C, NULL));
    float *gy = hm_get(hy), *gdg = hm_get(hdg), *gdu = hm_get(hdu), *gz = hm_get(hz);
    close_f("swiglu fwd", gy, y, R * C, 1e-5, 1e-6);
    close_f("swiglu bwd dgate", gdg, dg, R * C, 1e-5, 1e-6);
    close_f("swiglu bwd dup", gdu, du, R * C, 1e-5, 1e-6);
    same_bits("mul", gz, z, R * C);
    check_pad("swiglu fwd", hy);
    check_pad("swiglu bwd dgate", hdg);
    check_pad("swiglu bwd dup", hdu);
    check_pad("mul", hz);
    free(y), free(dg), free(du), free(z), free(gy), free(gdg), free(gdu), free(gz);
    free(hg.p), free(hu.p), free(hdy.p), free(hy.p), free(hdg.p), free(hdu.p), free(hz.p);
    sw_tensor *all[] = {G, U, DY, Y, DG, DU, Z};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) sw_tensor_free(all[i]);
    free(g), free(u), free(dy);

    /* RoPE: 300 rows (more than the kernel's 128 row blocks) from global
     * row 7 of a batch of 3 at positions from 1000, 3 heads of 64; the
     * forward, then the inverse of its result */
    const int64_t RR = 300, CC = 3 * 64, row0 = 7, pos0 = 1000;
    const int d = 64, batch = 3;
    const float theta = 10000.0f;
    float *x = rnd(RR * CC, 53, 1.0f);
    sw_tensor *X = T("x", RR, CC, x), *XI = T("xi", RR, CC, x);
    sw_rope(RW(X), d, theta, row0, batch, pos0, 0);
    float *xf = tu_read(X);
    sw_rope(RW(X), d, theta, row0, batch, pos0, 1);
    sw_rope(RW(XI), d, theta, row0, batch, pos0, 1);
    float *xr = tu_read(X), *xi = tu_read(XI);
    hmat hx = hm_new(RR, CC, x), hxi = hm_new(RR, CC, x);
    CHECK_LAUNCH(sw_cuda_rope(hx.p, hx.ld, RR, CC, d, theta, row0, batch, pos0, 0, NULL));
    float *gf = hm_get(hx);
    CHECK_LAUNCH(sw_cuda_rope(hx.p, hx.ld, RR, CC, d, theta, row0, batch, pos0, 1, NULL));
    CHECK_LAUNCH(sw_cuda_rope(hxi.p, hxi.ld, RR, CC, d, theta, row0, batch, pos0, 1, NULL));
    float *gr = hm_get(hx), *gi = hm_get(hxi);
    close_f("rope fwd (row0 7, batch 3, pos0 1000)", gf, xf, RR * CC, 1e-5, 1e-6);
    close_f("rope inverse of the forward", gr, xr, RR * CC, 1e-5, 1e-6);
    close_f("rope inverse", gi, xi, RR * CC, 1e-5, 1e-6);
    check_pad("rope", hx);
    tu_true("sw_cuda_rope refuses d = 50 on 192 columns (cudaErrorInvalidValue)",
            sw_cuda_rope(hx.p, hx.ld, RR, CC, 50, theta, row0, batch, pos0, 0, NULL) != cudaSuccess);
    float *after = hm_get(hx);
    same_bits("rope refused: x untouched", after, gr, RR * CC);
    free(after), free(xf), free(xr), free(xi), free(gf), free(gr), free(gi), free(hx.p), free(hxi.p), free(x);
    sw_tensor_free(X), sw_tensor_free(XI);
}

/* ================= dropout ================= */
static void test_dropout(void)
{
    const int64_t R = 23, C = 300;
    float *x = rnd(R * C, 9, 1.0f);
    sw_rng_key k;
    memset(&k, 0, sizeof k);
    k.seed = 0x1234567890abull, k.step = 5, k.layer = 2, k.op = 3;
    k.row0 = 40, k.col0 = 17, k.ld_global = 1000;
    k.batch0 = 1, k.batch_local = 2, k.batch_global = 4;
    const float p = 0.3f, scale = 1.0f / (1.0f - p);
    sw_tensor *X = T("x", R, C, x), *Y = T("y", R, C, NULL), *G = T("g", R, C, x);
    sw_dropout_fwd(RD(X), W(Y), p, &k);
    sw_dropout_bwd(RW(G), p, &k);
    float *y = tu_read(Y), *g = tu_read(G);
    sw_cuda_rng kk = {k.seed, k.step, k.layer, k.op, k.row0, k.col0, k.ld_global, k.batch0, k.batch_local,
                      k.batch_global};
    hmat hx = hm_new(R, C, x), hy = hm_new(R, C, NULL);
    CHECK_LAUNCH(sw_cuda_dropout(hx.p, hx.ld, hy.p, hy.ld, R, C, kk, p, scale, NULL));
    CHECK_LAUNCH(sw_cuda_dropout(hx.p, hx.ld, hx.p, hx.ld, R, C, kk, p, scale, NULL)); /* in place (bwd) */
    float *gy = hm_get(hy), *gg = hm_get(hx);
    same_bits("dropout fwd (batch-mapped rows, offset tile)", gy, y, R * C);
    same_bits("dropout bwd in place", gg, g, R * C);
    check_pad("dropout", hy);
    free(y), free(g), free(gy), free(gg), free(hx.p), free(hy.p), free(x);
    sw_tensor_free(X), sw_tensor_free(Y), sw_tensor_free(G);
}

/* ================= casts: fp32 <-> bf16, bitwise, padding kept ================= */
static void test_cast(void)
{
    const int64_t R = 9, C = 300, ld16 = C + 3;
    float *x = rnd(R * C, 12, 4.0f);
    x[0] = 1.00390625f, x[1] = -0.0f, x[2] = INFINITY, x[3] = 1e-40f, x[4] = 3.3895314e38f;
    hmat hx = hm_new(R, C, x), hy = hm_new(R, C, NULL);
    uint16_t *h = (uint16_t *)xmalloc(sizeof(uint16_t) * (size_t)(R * ld16));
    for (int64_t i = 0; i < R * ld16; i++) h[i] = 0xabcd;
    CHECK_LAUNCH(sw_cuda_cast_to_bf16(hx.p, hx.ld, h, ld16, R, C, NULL));
    CHECK_LAUNCH(sw_cuda_cast_from_bf16(h, ld16, hy.p, hy.ld, R, C, NULL));
    int64_t bad = 0, pad = 0;
    for (int64_t r = 0; r < R; r++) {
        for (int64_t c = 0; c < C; c++) bad += h[r * ld16 + c] != sw_bf16_from_f32(x[r * C + c]);
        for (int64_t c = C; c < ld16; c++) pad += h[r * ld16 + c] != 0xabcd;
    }
    char what[128];
    snprintf(what, sizeof what, "cast to bf16: %lld of %lld differ from bf16.h, %lld padding values touched",
             (long long)bad, (long long)(R * C), (long long)pad);
    tu_true(what, bad == 0 && pad == 0);
    float *want = (float *)xmalloc(sizeof(float) * (size_t)(R * C)), *gy = hm_get(hy);
    for (int64_t i = 0; i < R * C; i++) want[i] = sw_f32_from_bf16(sw_bf16_from_f32(x[i]));
    same_bits("cast back to fp32", gy, want, R * C);
    check_pad("cast", hy);
    free(x), free(h), free(want), free(gy), free(hx.p), free(hy.p);
}

/* ================= adds, colsum, copy_flat ================= */
static void test_adds(void)
{
    const int64_t R = 19, C = 600;
    float *x = rnd(R * C, 10, 1.0f), *y = rnd(R * C, 11, 1.0f), *b = rnd(C, 12, 1.0f), *s = rnd(C, 13, 1.0f);
    sw_tensor *X = T("x", R, C, x), *Y = T("y", R, C, y), *Z = T("z", R, C, NULL), *B = T("b", 1, C, b);
    sw_tensor *S0 = T("s0", 1, C, NULL), *S1 = T("s1", 1, C, s);
    sw_add(RD(X), RD(Y), W(Z));
    sw_axpy(0.75f, RD(X), RW(Y));
    sw_bias_add(RW(X), RD(B));
    sw_colsum(RD(Z), W(S0), 2.0f, 0.0f);
    sw_colsum(RD(Z), RW(S1), 1.0f, 0.5f);
    float *z = tu_read(Z), *y2 = tu_read(Y), *x2 = tu_read(X), *s0 = tu_read(S0), *s1 = tu_read(S1);
    hmat hx = hm_new(R, C, x), hy = hm_new(R, C, y), hz = hm_new(R, C, NULL);
    float *vb = vec_new(C, 2, b), *v0 = vec_new(C, 3, NULL), *v1 = vec_new(C, 2, s);
    CHECK_LAUNCH(sw_cuda_add(hx.p, hx.ld, hy.p, hy.ld, hz.p, hz.ld, R, C, NULL));
    CHECK_LAUNCH(sw_cuda_axpy(0.75f, hx.p, hx.ld, hy.p, hy.ld, R, C, NULL));
    CHECK_LAUNCH(sw_cuda_bias_add(hx.p, hx.ld, vb, 2, R, C, NULL));
    CHECK_LAUNCH(sw_cuda_colsum(hz.p, hz.ld, v0, 3, R, C, 2.0f, 0.0f, NULL));
    CHECK_LAUNCH(sw_cuda_colsum(hz.p, hz.ld, v1, 2, R, C, 1.0f, 0.5f, NULL));
    float *gz = hm_get(hz), *gy = hm_get(hy), *gx = hm_get(hx), *g0 = vec_get(v0, C, 3), *g1 = vec_get(v1, C, 2);
    same_bits("add", gz, z, R * C);
    close_f("axpy", gy, y2, R * C, 1e-6, 1e-7);
    same_bits("bias_add (strided bias)", gx, x2, R * C);
    close_f("colsum beta=0 (double sums in row order)", g0, s0, C, 1e-6, 1e-7);
    close_f("colsum beta=0.5", g1, s1, C, 1e-6, 1e-7);
    check_pad("add", hz);
    tu_true("colsum: vector gaps untouched", vec_gaps_ok(v0, C, 3) && vec_gaps_ok(v1, C, 2));
    free(z), free(y2), free(x2), free(s0), free(s1), free(gz), free(gy), free(gx), free(g0), free(g1);
    free(hx.p), free(hy.p), free(hz.p), free(vb), free(v0), free(v1);

    /* copy_flat: [6, 50] into [15, 20] and back, = then += */
    sw_tensor *A = T("a", 6, 50, x), *F = T("f", 15, 20, y);
    sw_copy_flat(RD(A), RW(F), 1);
    float *f1 = tu_read(F);
    sw_copy_flat(RD(F), W(A), 0);
    float *a1 = tu_read(A);
    hmat ha = hm_new(6, 50, x), hf = hm_new(15, 20, y);
    CHECK_LAUNCH(sw_cuda_copy_flat(ha.p, ha.ld, 6, 50, hf.p, hf.ld, 15, 20, 1, NULL));
    float *gf = hm_get(hf);
    CHECK_LAUNCH(sw_cuda_copy_flat(hf.p, hf.ld, 15, 20, ha.p, ha.ld, 6, 50, 0, NULL));
    float *ga = hm_get(ha);
    same_bits("copy_flat += into another shape", gf, f1, 300);
    same_bits("copy_flat = back", ga, a1, 300);
    check_pad("copy_flat", hf);
    free(f1), free(a1), free(gf), free(ga), free(ha.p), free(hf.p);
    sw_tensor *all[] = {X, Y, Z, B, S0, S1, A, F};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) sw_tensor_free(all[i]);
    free(x), free(y), free(b), free(s);
}

/* ================= embedding ================= */
static void test_embedding(void)
{
    const int64_t n = 24, c = 300, nv = 30, P = 12, vocab0 = 10, row0 = 6, pos0 = 2;
    const int batch = 3;
    int32_t tok[24];
    for (int i = 0; i < n; i++) tok[i] = (int32_t)((i * 7) % 50); /* some below vocab0, some above vocab0 + nv */
    float *wte = rnd(nv * c, 14, 1.0f), *wpe = rnd(P * c, 15, 1.0f), *dx = rnd(n * c, 16, 1.0f);
    float *dwte0 = rnd(nv * c, 17, 1.0f), *dwpe0 = rnd(P * c, 18, 1.0f);
    sw_tensor *TK = TI("tok", n, tok), *WTE = T("wte", nv, c, wte), *WPE = T("wpe", P, c, wpe);
    sw_tensor *X0 = T("x0", n, c, NULL), *X1 = T("x1", n, c, NULL), *DX = T("dx", n, c, dx);
    sw_tensor *DWTE = T("dwte", nv, c, dwte0), *DWPE = T("dwpe", P, c, dwpe0), *DWPE2 = T("dwpe2", P, c, dwpe0);
    sw_embedding_fwd(RD(TK), RD(WTE), RD(WPE), W(X1), row0, batch, pos0, vocab0, 1);
    sw_embedding_fwd(RD(TK), RD(WTE), RD(WPE), W(X0), row0, batch, pos0, vocab0, 0);
    sw_embedding_bwd(RD(TK), RD(DX), RW(DWTE), W(DWPE), row0, batch, pos0, vocab0, 1);
    sw_embedding_bwd(RD(TK), RD(DX), RW(DWTE), RW(DWPE2), row0, batch, pos0, vocab0, 0);
    float *x1 = tu_read(X1), *x0 = tu_read(X0), *dwte = tu_read(DWTE), *dwpe = tu_read(DWPE),
          *dwpe2 = tu_read(DWPE2);

    int32_t tk2[48]; /* tokens with stride 2 */
    for (int i = 0; i < n; i++) tk2[2 * i] = tok[i], tk2[2 * i + 1] = -99;
    hmat hte = hm_new(nv, c, wte), hpe = hm_new(P, c, wpe), hx1 = hm_new(n, c, NULL), hx0 = hm_new(n, c, NULL);
    hmat hdx = hm_new(n, c, dx), hdte = hm_new(nv, c, dwte0), hdpe = hm_new(P, c, dwpe0), hdpe2 = hm_new(P, c, dwpe0);
    sw_cuda_emb e1 = {row0, pos0, vocab0, batch, 0, 1, 0, 1}, e0 = {row0, pos0, vocab0, batch, 0, 0, 0, 1};
    sw_cuda_emb z1 = {row0, pos0, vocab0, batch, 1, 1, 0, 1}, z0 = {row0, pos0, vocab0, batch, 0, 1, 0, 1};
    CHECK_LAUNCH(sw_cuda_embedding_fwd(tk2, 2, hte.p, nv, hte.ld, hpe.p, hpe.ld, hx1.p, n, c, hx1.ld, e1, NULL));
    CHECK_LAUNCH(sw_cuda_embedding_fwd(tk2, 2, hte.p, nv, hte.ld, hpe.p, hpe.ld, hx0.p, n, c, hx0.ld, e0, NULL));
    CHECK_LAUNCH(sw_cuda_embedding_bwd(tk2, 2, hdx.p, n, c, hdx.ld, hdte.p, nv, hdte.ld, hdpe.p, P, c, hdpe.ld, z1,
                                       NULL));
    CHECK_LAUNCH(sw_cuda_embedding_bwd(tk2, 2, hdx.p, n, c, hdx.ld, hdte.p, nv, hdte.ld, hdpe2.p, P, c, hdpe2.ld, z0,
                                       NULL));
    float *g1 = hm_get(hx1), *g0 = hm_get(hx0), *gte = hm_get(hdte), *gpe = hm_get(hdpe), *gpe2 = hm_get(hdpe2);
    same_bits("embedding fwd with wpe (out-of-slice ids)", g1, x1, n * c);
    same_bits("embedding fwd without wpe", g0, x0, n * c);
    same_bits("embedding bwd dwte (+=, twice)", gte, dwte, nv * c);
    same_bits("embedding bwd dwpe (zeroed)", gpe, dwpe, P * c);
    same_bits("embedding bwd dwpe (+=)", gpe2, dwpe2, P * c);
    check_pad("embedding fwd", hx1);
    check_pad("embedding bwd dwte", hdte);
    free(x1), free(x0), free(dwte), free(dwpe), free(dwpe2), free(g1), free(g0), free(gte), free(gpe), free(gpe2);
    free(hte.p), free(hpe.p), free(hx1.p), free(hx0.p), free(hdx.p), free(hdte.p), free(hdpe.p), free(hdpe2.p);
    /* no learned positions: no wpe buffer, dwte written (SW_EMB_ZERO_WTE) over NaN */
    sw_tensor *X2 = T("x2", n, c, NULL), *DWTE3 = T("dwte3", nv, c, NULL);
    sw_tensor_fill(DWTE3, NAN);
    sw_embedding_fwd(RD(TK), RD(WTE), NULL, W(X2), row0, batch, pos0, vocab0, 1);
    sw_embedding_bwd(RD(TK), RD(DX), W(DWTE3), NULL, row0, batch, pos0, vocab0, SW_EMB_ZERO_WTE);
    float *x2 = tu_read(X2), *dwte3 = tu_read(DWTE3);
    hmat hx2 = hm_new(n, c, NULL), hdte3 = hm_new(nv, c, NULL), hte2 = hm_new(nv, c, wte), hdx2 = hm_new(n, c, dx);
    for (int64_t r = 0; r < nv; r++)
        for (int64_t j = 0; j < c; j++) hdte3.p[r * hdte3.ld + j] = NAN;
    sw_cuda_emb np1 = {row0, pos0, vocab0, batch, 0, 0, 0, 0}, npz = {row0, pos0, vocab0, batch, 0, 0, 1, 0};
    CHECK_LAUNCH(sw_cuda_embedding_fwd(tk2, 2, hte2.p, nv, hte2.ld, NULL, 0, hx2.p, n, c, hx2.ld, np1, NULL));
    CHECK_LAUNCH(sw_cuda_embedding_bwd(tk2, 2, hdx2.p, n, c, hdx2.ld, hdte3.p, nv, hdte3.ld, NULL, 0, 0, 0, npz, NULL));
    float *g2 = hm_get(hx2), *gte3 = hm_get(hdte3);
    same_bits("embedding fwd, no wpe buffer", g2, x2, n * c);
    same_bits("embedding bwd dwte written (SW_EMB_ZERO_WTE), no dwpe", gte3, dwte3, nv * c);
    check_pad("embedding bwd dwte written", hdte3);
    free(x2), free(dwte3), free(g2), free(gte3), free(hx2.p), free(hdte3.p), free(hte2.p), free(hdx2.p);
    sw_tensor *all[] = {TK, WTE, WPE, X0, X1, X2, DX, DWTE, DWPE, DWPE2, DWTE3};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) sw_tensor_free(all[i]);
    free(wte), free(wpe), free(dx), free(dwte0), free(dwpe0);
}

/* ================= cross-entropy ================= */
static void test_crossentropy(void)
{
    const int64_t n = 20, vb = 700, vocab0 = 100, vocab = 750, nv = 650; /* 50 padding columns */
    const float scale = 1.0f / 77.0f;
    float *x = rnd(n * vb, 19, 6.0f);
    int32_t t[20];
    for (int i = 0; i < n; i++) t[i] = (int32_t)(vocab0 - 20 + i * 40); /* below, inside, in the padding */
    sw_tensor *L = T("logits", n, vb, x), *TG = TI("t", n, t), *MX = T("mx", n, 1, NULL), *TT = T("tgt", n, 1, NULL);
    sw_tensor *SE = T("se", n, 1, NULL), *LO = T("loss", n, 1, NULL);
    sw_ce_max(RD(L), W(MX), vocab0, vocab);
    sw_ce_target(RD(L), RD(TG), W(TT), vocab0);
    sw_ce_sumexp(RD(L), RD(MX), W(SE), vocab0, vocab);
    sw_ce_loss(RD(MX), RD(TT), RD(SE), W(LO));
    float *mx = tu_read(MX), *tgt = tu_read(TT), *se = tu_read(SE), *loss = tu_read(LO);
    sw_ce_bwd(RW(L), RD(MX), RD(SE), RD(TG), vocab0, vocab, scale);
    float *dl = tu_read(L);

    hmat hl = hm_new(n, vb, x);
    int32_t t3[60];
    for (int i = 0; i < n; i++) t3[3 * i] = t[i], t3[3 * i + 1] = t3[3 * i + 2] = 7;
    float *vmx = vec_new(n, 2, NULL), *vtg = vec_new(n, 3, NULL), *vse = vec_new(n, 2, NULL);
    float *vlo = vec_new(n, 4, NULL);
    CHECK_LAUNCH(sw_cuda_ce_max(hl.p, n, hl.ld, nv, vmx, 2, NULL));
    CHECK_LAUNCH(sw_cuda_ce_target(hl.p, n, vb, hl.ld, t3, 3, vtg, 3, vocab0, NULL));
    float *cmx = vec_new(n, 2, mx); /* the next pieces from the CPU's values */
    CHECK_LAUNCH(sw_cuda_ce_sumexp(hl.p, n, hl.ld, nv, cmx, 2, vse, 2, NULL));
    float *ctg = vec_new(n, 3, tgt), *cse = vec_new(n, 2, se);
    CHECK_LAUNCH(sw_cuda_ce_loss(cmx, 2, ctg, 3, cse, 2, vlo, 4, n, NULL));
    CHECK_LAUNCH(sw_cuda_ce_bwd(hl.p, n, vb, hl.ld, nv, cmx, 2, cse, 2, t3, 3, NULL, 0, NULL, vocab0, scale, NULL));
    float *gmx = vec_get(vmx, n, 2), *gtg = vec_get(vtg, n, 3), *gse = vec_get(vse, n, 2), *glo = vec_get(vlo, n, 4);
    float *gdl = hm_get(hl);
    same_bits("ce_max (padding ignored)", gmx, mx, n);
    same_bits("ce_target", gtg, tgt, n);
    close_f("ce_sumexp", gse, se, n, 1e-5, 0);
    close_f("ce_loss", glo, loss, n, 1e-6, 1e-6);
    close_f("ce_bwd (padding 0, target column)", gdl, dl, n * vb, 1e-5, 1e-8);
    check_pad("ce_bwd", hl);
    free(mx), free(tgt), free(se), free(loss), free(dl), free(gmx), free(gtg), free(gse), free(glo), free(gdl);
    free(vmx), free(vtg), free(vse), free(vlo), free(cmx), free(ctg), free(cse), free(hl.p), free(x);
    sw_tensor *all[] = {L, TG, MX, TT, SE, LO};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) sw_tensor_free(all[i]);
}

/* ================= AdamW ================= */
static void test_adamw(void)
{
    const int64_t R = 13, C = 300;
    float *p = rnd(R * C, 20, 1.0f), *g = rnd(R * C, 21, 1.0f), *m = rnd(R * C, 22, 0.1f), *v = rnd(R * C, 23, 0.1f);
    for (int64_t i = 0; i < R * C; i++) v[i] = fabsf(v[i]);
    sw_adamw_args a = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 3};
    sw_tensor *P = T("p", R, C, p), *G = T("g", R, C, g), *M = T("m", R, C, m), *V = T("v", R, C, v);
    sw_adamw(RW(P), RD(G), RW(M), RW(V), &a);
    float *p1 = tu_read(P), *m1 = tu_read(M), *v1 = tu_read(V);
    double bc1 = 1.0 - pow(0.9, 3), bc2 = 1.0 - pow(0.95, 3);
    sw_cuda_adamw_scalars k = {a.beta1, a.beta2, 1.0f - a.beta1, 1.0f - a.beta2, a.eps,
                               (float)(1.0 - (double)a.lr * (double)a.weight_decay), (float)((double)a.lr / bc1),
                               (float)sqrt(bc2)};
    hmat hp = hm_new(R, C, p), hg = hm_new(R, C, g), hm = hm_new(R, C, m), hv = hm_new(R, C, v);
    CHECK_LAUNCH(sw_cuda_adamw(hp.p, hp.ld, hg.p, hg.ld, hm.p, hm.ld, hv.p, hv.ld, R, C, k, NULL));
    float *gp = hm_get(hp), *gm = hm_get(hm), *gv = hm_get(hv);
    close_f("adamw param", gp, p1, R * C, 1e-6, 1e-8);
    /* m = b1 m + (1 - b1) g cancels: the terms are about 0.1, fused or not they round apart */
    close_f("adamw m", gm, m1, R * C, 1e-6, 1e-8);
    close_f("adamw v", gv, v1, R * C, 1e-6, 1e-8);
    check_pad("adamw", hp);
    free(p1), free(m1), free(v1), free(gp), free(gm), free(gv), free(hp.p), free(hg.p), free(hm.p), free(hv.p);
    free(p), free(g), free(m), free(v);
    sw_tensor_free(P), sw_tensor_free(G), sw_tensor_free(M), sw_tensor_free(V);
}

/* ================= attention ================= */
typedef struct {
    const char *name;
    int B, nh, nkv, d, sq, sk;
    int64_t q_pos0, k_pos0;
    int causal;
    float p;
} att_case;

/* key padding: the key lengths of the batch elements (global positions), NULL: none */
static const int *att_klen;

static sw_attn_args att_args(const att_case *c, int sk, int64_t k_pos0, int merge, int accumulate, int kv_acc)
{
    sw_attn_args a;
    memset(&a, 0, sizeof a);
    a.batch = c->B, a.nh = c->nh, a.d = c->d, a.sq = c->sq, a.sk = sk;
    a.q_pos0 = c->q_pos0, a.k_pos0 = k_pos0, a.causal = c->causal;
    a.scale = 1.0f / sqrtf((float)c->d);
    a.dropout = c->p;
    a.key.seed = 77, a.key.step = 2, a.key.layer = 1, a.key.op = 9, a.key.batch0 = 1;
    a.head0 = 2, a.heads_total = c->nh + 4, a.seq_total = 4096;
    a.merge = merge, a.accumulate = accumulate, a.nkv = c->nkv, a.kv_accumulate = kv_acc;
    a.key_padding = att_klen != NULL;
    for (int b = 0; att_klen && b < c->B; b++) a.key_len[b] = att_klen[b];
    return a;
}

static sw_cuda_attn att_cuda(const sw_attn_args *a)
{
    sw_cuda_attn c;
    memset(&c, 0, sizeof c);
    c.batch = a->batch, c.nh = a->nh, c.nkv = a->nkv ? a->nkv : a->nh, c.d = a->d, c.sq = a->sq, c.sk = a->sk;
    c.q_pos0 = a->q_pos0, c.k_pos0 = a->k_pos0, c.causal = a->causal, c.scale = a->scale, c.dropout = a->dropout;
    c.inv_keep = a->dropout > 0.0f ? 1.0f / (1.0f - a->dropout) : 1.0f;
    c.seed = a->key.seed, c.step = a->key.step, c.layer = a->key.layer, c.op = a->key.op, c.batch0 = a->key.batch0;
    c.head0 = a->head0, c.heads_total = a->heads_total, c.seq_total = a->seq_total;
    c.merge = a->merge, c.accumulate = a->accumulate, c.kv_accumulate = a->kv_accumulate;
    c.key_padding = a->key_padding;
    memcpy(c.key_len, a->key_len, sizeof c.key_len);
    return c;
}

/* exact zeros (which: rows with every key masked, masked keys, dropped entries) at the same places */
static void same_zeros(const char *what, const char *which, const float *got, const float *ref, int64_t n)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += (got[i] == 0.0f) != (ref[i] == 0.0f);
    char buf[400];
    snprintf(buf, sizeof buf, "%s: zeros (%s) at the same places (%lld differ)", what, which, (long long)bad);
    tu_true(buf, bad == 0);
}

static void test_attention_case(const att_case *c)
{
    const int nkv = c->nkv ? c->nkv : c->nh;
    const int64_t rq = (int64_t)c->sq * c->B, rk = (int64_t)c->sk * c->B;
    const int64_t cq = (int64_t)c->nh * c->d, ck = (int64_t)nkv * c->d;
    float *q = rnd(rq * cq, 30, 1.5f), *k = rnd(rk * ck, 31, 1.5f), *v = rnd(rk * ck, 32, 1.0f);
    float *dout = rnd(rq * cq, 33, 1.0f), *dq0 = rnd(rq * cq, 34, 1.0f), *dk0 = rnd(rk * ck, 35, 1.0f),
          *dv0 = rnd(rk * ck, 36, 1.0f);
    char what[256];

    /* CPU: the keys in two blocks, merged (Ring attention's pattern), then the backward with the final o, lse */
    const int sk1 = c->sk / 3, sk2 = c->sk - sk1;
    sw_tensor *Q = T("q", rq, cq, q), *K = T("k", rk, ck, k), *V = T("v", rk, ck, v);
    sw_tensor *O = T("o", rq, cq, NULL), *LSE = T("lse", rq, c->nh, NULL), *O1 = T("o1", rq, cq, NULL),
              *LSE1 = T("lse1", rq, c->nh, NULL);
    sw_tensor *DO = T("dout", rq, cq, dout), *DQ = T("dq", rq, cq, dq0), *DK = T("dk", rk, ck, dk0),
              *DV = T("dv", rk, ck, dv0);
    starpu_data_handle_t *kt = sw_tensor_split(K, SW_ROWS, 2, (int64_t[]){(int64_t)sk1 * c->B, (int64_t)sk2 * c->B},
                                               STARPU_R);
    starpu_data_handle_t *vt = sw_tensor_split(V, SW_ROWS, 2, (int64_t[]){(int64_t)sk1 * c->B, (int64_t)sk2 * c->B},
                                               STARPU_R);
    sw_attn_args a1 = att_args(c, sk1, c->k_pos0, 0, 0, 0), a2 = att_args(c, sk2, c->k_pos0 + sk1, 1, 0, 0);
    sw_attn_fwd(RD(Q), kt[0], vt[0], W(O), W(LSE), &a1);
    sw_attn_fwd(RD(Q), kt[1], vt[1], RW(O), RW(LSE), &a2);
    sw_attn_args af = att_args(c, c->sk, c->k_pos0, 0, 0, 0);
    sw_attn_fwd(RD(Q), RD(K), RD(V), W(O1), W(LSE1), &af);
    float *o = tu_read(O), *lse = tu_read(LSE), *o1 = tu_read(O1), *lse1 = tu_read(LSE1);
    sw_attn_args ab = att_args(c, c->sk, c->k_pos0, 0, 1, 0); /* dq, dk, dv += */
    sw_attn_bwd(RD(Q), RD(K), RD(V), RD(O1), RD(LSE1), RD(DO), RW(DQ), RW(DK), RW(DV), &ab);
    float *dq = tu_read(DQ), *dk = tu_read(DK), *dv = tu_read(DV);

    /* emulated */
    hmat hq = hm_new(rq, cq, q), hk = hm_new(rk, ck, k), hv = hm_new(rk, ck, v), ho = hm_new(rq, cq, NULL),
         hl = hm_new(rq, c->nh, NULL), ho1 = hm_new(rq, cq, NULL), hl1 = hm_new(rq, c->nh, NULL);
    sw_cuda_attn e1 = att_cuda(&a1), e2 = att_cuda(&a2), ef = att_cuda(&af);
    CHECK_LAUNCH(sw_cuda_attn_fwd(hq.p, hq.ld, hk.p, hk.ld, hv.p, hv.ld, ho.p, ho.ld, hl.p, hl.ld, e1, NULL));
    CHECK_LAUNCH(sw_cuda_attn_fwd(hq.p, hq.ld, hk.p + (int64_t)sk1 * c->B * hk.ld, hk.ld,
                                  hv.p + (int64_t)sk1 * c->B * hv.ld, hv.ld, ho.p, ho.ld, hl.p, hl.ld, e2, NULL));
    CHECK_LAUNCH(sw_cuda_attn_fwd(hq.p, hq.ld, hk.p, hk.ld, hv.p, hv.ld, ho1.p, ho1.ld, hl1.p, hl1.ld, ef, NULL));
    float *go = hm_get(ho), *gl = hm_get(hl), *go1 = hm_get(ho1), *gl1 = hm_get(hl1);
    snprintf(what, sizeof what, "attn %s fwd o", c->name);
    close_f(what, go1, o1, rq * cq, 5e-5, 1e-6);
    snprintf(what, sizeof what, "attn %s fwd lse", c->name);
    close_f(what, gl1, lse1, rq * c->nh, 1e-5, 1e-6);
    snprintf(what, sizeof what, "attn %s fwd merged over two key blocks: o", c->name);
    close_f(what, go, o, rq * cq, 5e-5, 1e-6);
    snprintf(what, sizeof what, "attn %s fwd merged: lse", c->name);
    close_f(what, gl, lse, rq * c->nh, 1e-5, 1e-6);
    if (c->p > 0) {
        snprintf(what, sizeof what, "attn %s fwd", c->name);
        same_zeros(what, "fully masked rows", go1, o1, rq * cq);
    }
    snprintf(what, sizeof what, "attn %s fwd", c->name);
    check_pad(what, ho1);

    /* backward from the CPU's o, lse */
    hmat hoc = hm_new(rq, cq, o1), hlc = hm_new(rq, c->nh, lse1), hdo = hm_new(rq, cq, dout);
    hmat hdq = hm_new(rq, cq, dq0), hdk = hm_new(rk, ck, dk0), hdv = hm_new(rk, ck, dv0);
    sw_cuda_attn eb = att_cuda(&ab);
    CHECK_LAUNCH(sw_cuda_attn_bwd(hq.p, hq.ld, hk.p, hk.ld, hv.p, hv.ld, hoc.p, hoc.ld, hlc.p, hlc.ld, hdo.p, hdo.ld,
                                  hdq.p, hdq.ld, hdk.p, hdk.ld, hdv.p, hdv.ld, eb, NULL));
    float *gdq = hm_get(hdq), *gdk = hm_get(hdk), *gdv = hm_get(hdv);
    snprintf(what, sizeof what, "attn %s bwd dq (+=)", c->name);
    close_f(what, gdq, dq, rq * cq, 5e-5, 1e-5);
    snprintf(what, sizeof what, "attn %s bwd dk (+=, summed over the group)", c->name);
    close_f(what, gdk, dk, rk * ck, 5e-5, 1e-5);
    snprintf(what, sizeof what, "attn %s bwd dv (+=)", c->name);
    close_f(what, gdv, dv, rk * ck, 5e-5, 1e-5);
    snprintf(what, sizeof what, "attn %s bwd", c->name);
    check_pad(what, hdk);

    free(o), free(lse), free(o1), free(lse1), free(dq), free(dk), free(dv);
    free(go), free(gl), free(go1), free(gl1), free(gdq), free(gdk), free(gdv);
    hmat hs[] = {hq, hk, hv, ho, hl, ho1, hl1, hoc, hlc, hdo, hdq, hdk, hdv};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) free(hs[i].p);
    sw_tensor *all[] = {Q, K, V, O, LSE, O1, LSE1, DO, DQ, DK, DV};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) sw_tensor_free(all[i]);
    free(q), free(k), free(v), free(dout), free(dq0), free(dk0), free(dv0);
}

static void test_attention(void)
{
    /* name, B, nh, nkv, d, sq, sk, q_pos0, k_pos0, causal, p */
    const att_case cases[] = {
        {"full", 2, 2, 0, 16, 70, 90, 0, 0, 0, 0.0f},
        {"causal, offsets, GQA 4/2", 2, 4, 2, 16, 70, 90, 30, 5, 1, 0.0f},
        {"causal, fully masked rows, dropout", 1, 2, 1, 8, 40, 50, 0, 20, 1, 0.2f},
        {"d=100 (tiles of 60), GQA 3/1, dropout", 1, 3, 1, 100, 65, 61, 64, 0, 1, 0.1f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_attention_case(&cases[i]);
    /* key padding: keys 5..94 in blocks 5..34 and 35..94; sequence 0's keys end inside the first block
     * (the second wholly padded), sequence 1's inside the second; then every key padded for sequence 0
     * (fully masked rows) */
    const att_case padded[] = {
        {"key padding 30, 60, causal, offsets, GQA 4/2", 2, 4, 2, 16, 70, 90, 30, 5, 1, 0.0f},
        {"key padding 3, 70, dropout", 2, 2, 0, 16, 70, 90, 0, 5, 0, 0.2f},
    };
    att_klen = (const int[]){30, 60};
    test_attention_case(&padded[0]);
    att_klen = (const int[]){3, 70};
    test_attention_case(&padded[1]);
    att_klen = NULL;
}

/* ================= attention with saved probabilities ================= */
typedef struct {
    att_case c;
    int accumulate, kv_acc;
    int onehot; /* V[key j] = e_j, dO[query i] = e_i (d >= sk, sq; no GQA): o = D(P), dv = D(P)^T */
} probs_case;

/* x[(pos*B + b)*cols + h*d + c] = (c == pos) for every head h */
static float *one_hot(int n, int B, int heads, int d)
{
    float *x = xmalloc(sizeof(float) * (size_t)n * B * heads * d);
    for (int pos = 0; pos < n; pos++)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < heads; h++) x[((int64_t)pos * B + b) * heads * d + (int64_t)h * d + pos] = 1.0f;
    return x;
}

static void test_attention_probs_case(const probs_case *pc)
{
    const att_case *c = &pc->c;
    const int nkv = c->nkv ? c->nkv : c->nh;
    const int64_t rq = (int64_t)c->sq * c->B, rk = (int64_t)c->sk * c->B, rp = (int64_t)c->B * c->nh * c->sq;
    const int64_t cq = (int64_t)c->nh * c->d, ck = (int64_t)nkv * c->d;
    float *q = rnd(rq * cq, 40, 1.5f), *k = rnd(rk * ck, 41, 1.5f);
    float *v = pc->onehot ? one_hot(c->sk, c->B, nkv, c->d) : rnd(rk * ck, 42, 1.0f);
    float *dout = pc->onehot ? one_hot(c->sq, c->B, c->nh, c->d) : rnd(rq * cq, 43, 1.0f);
    float *dq0 = rnd(rq * cq, 44, 1.0f), *dk0 = rnd(rk * ck, 45, 1.0f), *dv0 = rnd(rk * ck, 46, 1.0f);
    char what[256];

    /* CPU: the forward, then the backward from its probs */
    sw_tensor *Q = T("q", rq, cq, q), *K = T("k", rk, ck, k), *V = T("v", rk, ck, v);
    sw_tensor *O = T("o", rq, cq, NULL), *LSE = T("lse", rq, c->nh, NULL), *P = T("probs", rp, c->sk, NULL);
    sw_tensor *DO = T("dout", rq, cq, dout), *DQ = T("dq", rq, cq, dq0), *DK = T("dk", rk, ck, dk0),
              *DV = T("dv", rk, ck, dv0);
    sw_attn_args af = att_args(c, c->sk, c->k_pos0, 0, 0, 0);
    sw_attn_args ab = att_args(c, c->sk, c->k_pos0, 0, pc->accumulate, pc->kv_acc);
    sw_attn_probs_fwd(RD(Q), RD(K), RD(V), W(O), W(LSE), W(P), &af);
    sw_attn_probs_bwd(RD(Q), RD(K), RD(V), RD(P), RD(DO), pc->accumulate ? RW(DQ) : W(DQ),
                      pc->accumulate || pc->kv_acc ? RW(DK) : W(DK), pc->accumulate || pc->kv_acc ? RW(DV) : W(DV),
                      &ab);
    float *o = tu_read(O), *lse = tu_read(LSE), *probs = tu_read(P), *dq = tu_read(DQ), *dk = tu_read(DK),
          *dv = tu_read(DV);

    /* emulated forward */
    hmat hq = hm_new(rq, cq, q), hk = hm_new(rk, ck, k), hv = hm_new(rk, ck, v), ho = hm_new(rq, cq, NULL),
         hl = hm_new(rq, c->nh, NULL), hp = hm_new(rp, c->sk, NULL);
    CHECK_LAUNCH(sw_cuda_attn_probs_fwd(hq.p, hq.ld, hk.p, hk.ld, hv.p, hv.ld, ho.p, ho.ld, hl.p, hl.ld, hp.p, hp.ld,
                                        att_cuda(&af), NULL));
    float *go = hm_get(ho), *gl = hm_get(hl), *gp = hm_get(hp);
    snprintf(what, sizeof what, "attn_probs %s fwd o", c->name);
    close_f(what, go, o, rq * cq, 1e-5, 1e-6);
    snprintf(what, sizeof what, "attn_probs %s fwd lse", c->name);
    close_f(what, gl, lse, rq * c->nh, 1e-5, 1e-6);
    snprintf(what, sizeof what, "attn_probs %s fwd probs", c->name);
    close_f(what, gp, probs, rp * c->sk, 1e-5, 1e-7);
    snprintf(what, sizeof what, "attn_probs %s fwd probs", c->name);
    same_zeros(what, "masked keys, fully masked rows", gp, probs, rp * c->sk);
    if (c->p > 0 && pc->onehot) {
        snprintf(what, sizeof what, "attn_probs %s fwd o = D(P)", c->name);
        same_zeros(what, "dropped and masked entries", go, o, rq * cq);
    }
    snprintf(what, sizeof what, "attn_probs %s fwd o", c->name);
    check_pad(what, ho);
    snprintf(what, sizeof what, "attn_probs %s fwd lse", c->name);
    check_pad(what, hl);
    snprintf(what, sizeof what, "attn_probs %s fwd probs", c->name);
    check_pad(what, hp);

    /* emulated backward from the CPU's probs */
    hmat hpc = hm_new(rp, c->sk, probs), hdo = hm_new(rq, cq, dout);
    hmat hdq = hm_new(rq, cq, dq0), hdk = hm_new(rk, ck, dk0), hdv = hm_new(rk, ck, dv0);
    CHECK_LAUNCH(sw_cuda_attn_probs_bwd(hq.p, hq.ld, hk.p, hk.ld, hv.p, hv.ld, hpc.p, hpc.ld, hdo.p, hdo.ld, hdq.p,
                                        hdq.ld, hdk.p, hdk.ld, hdv.p, hdv.ld, att_cuda(&ab), NULL));
    float *gdq = hm_get(hdq), *gdk = hm_get(hdk), *gdv = hm_get(hdv);
    snprintf(what, sizeof what, "attn_probs %s bwd dq (%s)", c->name, pc->accumulate ? "+=" : "=");
    close_f(what, gdq, dq, rq * cq, 1e-5, 1e-5);
    snprintf(what, sizeof what, "attn_probs %s bwd dk (%s, summed over the group)", c->name,
             pc->accumulate || pc->kv_acc ? "+=" : "=");
    close_f(what, gdk, dk, rk * ck, 1e-5, 1e-5);
    snprintf(what, sizeof what, "attn_probs %s bwd dv (%s)", c->name, pc->accumulate || pc->kv_acc ? "+=" : "=");
    close_f(what, gdv, dv, rk * ck, 1e-5, 1e-5);
    if (c->p > 0 && pc->onehot) {
        snprintf(what, sizeof what, "attn_probs %s bwd dv = D(P)^T", c->name);
        same_zeros(what, "dropped and masked entries", gdv, dv, rk * ck);
    }
    snprintf(what, sizeof what, "attn_probs %s bwd", c->name);
    check_pad(what, hdq);
    check_pad(what, hdk);
    check_pad(what, hdv);

    free(o), free(lse), free(probs), free(dq), free(dk), free(dv);
    free(go), free(gl), free(gp), free(gdq), free(gdk), free(gdv);
    hmat hs[] = {hq, hk, hv, ho, hl, hp, hpc, hdo, hdq, hdk, hdv};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) free(hs[i].p);
    sw_tensor *all[] = {Q, K, V, O, LSE, P, DO, DQ, DK, DV};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) sw_tensor_free(all[i]);
    free(q), free(k), free(v), free(dout), free(dq0), free(dk0), free(dv0);
}

static void test_attention_probs(void)
{
    /* {name, B, nh, nkv, d, sq, sk, q_pos0, k_pos0, causal, p}, accumulate, kv_accumulate, one-hot */
    const probs_case cases[] = {
        {{"full, 2 query and key tiles", 2, 2, 0, 16, 70, 90, 0, 0, 0, 0.0f}, 1, 0, 0},
        {{"causal, offsets, GQA 4/2, dropout", 2, 4, 2, 16, 70, 90, 30, 5, 1, 0.1f}, 0, 1, 0},
        {{"causal, fully masked rows, dropout", 1, 2, 1, 8, 40, 50, 0, 20, 1, 0.2f}, 1, 0, 0},
        {{"d=200 (tiles of 49), GQA 3/1, dropout", 1, 3, 1, 200, 65, 61, 64, 0, 1, 0.1f}, 0, 0, 0},
        {{"causal, one-hot V and dO, dropout", 2, 2, 0, 64, 50, 60, 10, 0, 1, 0.3f}, 0, 0, 1},
        {{"full, one-hot V and dO, dropout", 1, 2, 0, 64, 37, 64, 0, 0, 0, 0.5f}, 0, 0, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_attention_probs_case(&cases[i]);
    /* key padding: sequence 0's keys end inside the first key tile, sequence 1's inside the second */
    const probs_case padded[] = {
        {{"key padding 20, 75, causal, offsets, GQA 4/2, dropout", 2, 4, 2, 16, 70, 90, 30, 5, 1, 0.1f}, 0, 1, 0},
        {{"key padding 41, 1, one-hot V and dO, dropout", 2, 2, 0, 64, 37, 64, 0, 0, 0, 0.5f}, 1, 0, 1},
    };
    att_klen = (const int[]){20, 75};
    test_attention_probs_case(&padded[0]);
    att_klen = (const int[]){41, 1};
    test_attention_probs_case(&padded[1]);
    att_klen = NULL;
}

/* ================= gradient-norm clipping ================= */
static void test_clip(void)
{
    const int64_t R = 37, C = 300;
    float *x = rnd(R * C, 60, 2.0f), n0 = 5.0f;
    sw_tensor *X = T("x", R, C, x), *N2 = T("n2", 1, 1, &n0);
    sw_sumsq(RD(X), RW(N2), 0.5, 1);
    float *n2 = tu_read(N2);
    hmat hx = hm_new(R, C, x);
    float gn2 = n0;
    CHECK_LAUNCH(sw_cuda_sumsq(hx.p, hx.ld, R, C, &gn2, 0.5, 1, NULL));
    /* double sums in another order: the fp32 results within 1e-7 */
    close_f("sumsq (+= 0.5 sum x^2)", &gn2, n2, 1, 1e-7, 0.0);
    float max_norm = sqrtf(n2[0]) / 4.0f;
    sw_clip(RW(X), RD(N2), max_norm);
    float *y = tu_read(X);
    CHECK_LAUNCH(sw_cuda_clip(hx.p, hx.ld, R, C, n2, max_norm, NULL));
    float *gy = hm_get(hx);
    same_bits("clip (scaled by a quarter-ish)", gy, y, R * C);
    check_pad("clip", hx);
    free(n2), free(y), free(gy), free(hx.p), free(x);
    sw_tensor_free(X), sw_tensor_free(N2);
}

/* ================= DiT ops: modulation, gated residual, SiLU, timestep features, row swap ================= */
static void test_dit_ops(void)
{
    const int64_t B = 3, n = 7 * B, C = 300, K = 3;
    float *x = rnd(n * C, 70, 2.0f), *m = rnd(B * K * C, 71, 0.8f), *dy = rnd(n * C, 72, 1.0f);
    x[3] = 100.0f, x[4] = -100.0f; /* SiLU's exp over- and underflows */
    sw_tensor *X = T("x", n, C, x), *M = T("mod", B, K * C, m), *DY = T("dy", n, C, dy), *Y = T("y", n, C, NULL);
    sw_tensor *O = T("o", n, C, NULL), *DX = T("dx", n, C, NULL), *DB = T("db", n, C, NULL), *DM = T("dm", B, K * C, NULL);
    starpu_data_handle_t *mh = sw_tensor_tiles(M, SW_COLS, K, STARPU_R);
    sw_modulate_fwd(RD(X), mh[0], mh[1], W(Y));
    mh = sw_tensor_tiles(M, SW_COLS, K, STARPU_R);
    sw_gate_fwd(RD(X), mh[2], RD(Y), W(O));
    mh = sw_tensor_tiles(M, SW_COLS, K, STARPU_R);
    starpu_data_handle_t *dm = sw_tensor_tiles(DM, SW_COLS, K, STARPU_W);
    sw_modulate_bwd(RD(X), mh[1], RD(DY), W(DX), dm[0], dm[1]);
    mh = sw_tensor_tiles(M, SW_COLS, K, STARPU_R);
    sw_gate_bwd(RD(Y), mh[2], RD(DY), W(DB), sw_tensor_tiles(DM, SW_COLS, K, STARPU_W)[2]);
    float *y = tu_read(Y), *o = tu_read(O), *dx = tu_read(DX), *db = tu_read(DB), *dmv = tu_read(DM);
    hmat hx = hm_new(n, C, x), hm = hm_new(B, K * C, m), hdy = hm_new(n, C, dy), hy = hm_new(n, C, NULL);
    hmat ho = hm_new(n, C, NULL), hdx = hm_new(n, C, NULL), hdb = hm_new(n, C, NULL), hdm = hm_new(B, K * C, NULL);
    CHECK_LAUNCH(sw_cuda_modulate_fwd(hx.p, hx.ld, hm.p, hm.ld, hm.p + C, hm.ld, hy.p, hy.ld, n, C, B, NULL));
    CHECK_LAUNCH(sw_cuda_gate_fwd(hx.p, hx.ld, hm.p + 2 * C, hm.ld, hy.p, hy.ld, ho.p, ho.ld, n, C, B, NULL));
    CHECK_LAUNCH(sw_cuda_modulate_bwd(hx.p, hx.ld, hm.p + C, hm.ld, hdy.p, hdy.ld, hdx.p, hdx.ld, hdm.p, hdm.ld,
                                      hdm.p + C, hdm.ld, n, C, B, NULL));
    CHECK_LAUNCH(sw_cuda_gate_bwd(hy.p, hy.ld, hm.p + 2 * C, hm.ld, hdy.p, hdy.ld, hdb.p, hdb.ld, hdm.p + 2 * C, hdm.ld,
                                  n, C, B, NULL));
    float *gy = hm_get(hy), *go = hm_get(ho), *gdx = hm_get(hdx), *gdb = hm_get(hdb), *gdm = hm_get(hdm);
    close_f("modulate fwd (strided chunks of mod)", gy, y, n * C, 1e-6, 1e-7);
    close_f("gate fwd", go, o, n * C, 1e-6, 1e-6); /* res + g br: a multiply-add the compilers may fuse */
    close_f("modulate bwd dx", gdx, dx, n * C, 1e-6, 1e-7);
    close_f("gate bwd dbranch", gdb, db, n * C, 1e-6, 1e-7);
    close_f("modulate + gate bwd dshift | dscale | dgate (double sums, rows in order)", gdm, dmv, B * K * C, 1e-6, 1e-6);
    check_pad("modulate fwd", hy), check_pad("gate fwd", ho), check_pad("modulate bwd dx", hdx);
    check_pad("gate bwd", hdb), check_pad("dmod", hdm);
    free(y), free(o), free(dx), free(db), free(dmv), free(gy), free(go), free(gdx), free(gdb), free(gdm);

    /* SiLU */
    sw_silu_fwd(RD(X), W(Y));
    sw_tensor *G = T("g", n, C, dy);
    sw_silu_bwd(RD(X), RW(G));
    y = tu_read(Y), dx = tu_read(G);
    hmat hg = hm_new(n, C, dy);
    CHECK_LAUNCH(sw_cuda_silu_fwd(hx.p, hx.ld, hy.p, hy.ld, n, C, NULL));
    CHECK_LAUNCH(sw_cuda_silu_bwd(hx.p, hx.ld, hg.p, hg.ld, n, C, NULL));
    gy = hm_get(hy), gdx = hm_get(hg);
    close_f("silu fwd", gy, y, n * C, 1e-5, 1e-6);
    close_f("silu bwd", gdx, dx, n * C, 1e-5, 1e-6);
    check_pad("silu bwd", hg);
    free(y), free(dx), free(gy), free(gdx), free(hg.p);

    /* timestep features of t up to 1000, an odd dim (its zero column), t with a stride */
    const int64_t TB = 5, dim = 257;
    float tv[5] = {0.0f, 1.0f, 37.5f, 999.0f, 500.25f};
    sw_tensor *Tt = T("t", TB, 1, tv), *F = T("f", TB, dim, NULL);
    sw_timestep_fwd(RD(Tt), W(F), 10000.0f);
    float *f = tu_read(F);
    float *tvs = vec_new(TB, 3, tv);
    hmat hf = hm_new(TB, dim, NULL);
    CHECK_LAUNCH(sw_cuda_timestep(tvs, 3, hf.p, hf.ld, TB, dim, 10000.0, NULL));
    float *gf = hm_get(hf);
    same_bits("timestep features (fp32 arguments, cos/sin in double)", gf, f, TB * dim);
    check_pad("timestep features", hf);
    free(f), free(gf), free(hf.p), free(tvs);

    /* row swap [F, S, B] -> [S, F, B] and back */
    const int64_t F1 = 3, S2 = 7, NS = F1 * S2 * B;
    float *xs = rnd(NS * C, 73, 1.0f);
    sw_tensor *XS = T("xs", NS, C, xs), *YS = T("ys", NS, C, NULL), *ZS = T("zs", NS, C, NULL);
    sw_swap_rows(RD(XS), W(YS), F1, S2, B);
    sw_swap_rows(RD(YS), W(ZS), S2, F1, B);
    y = tu_read(YS), o = tu_read(ZS);
    hmat hxs = hm_new(NS, C, xs), hys = hm_new(NS, C, NULL);
    CHECK_LAUNCH(sw_cuda_swap_rows(hxs.p, hxs.ld, hys.p, hys.ld, F1, S2, B, C, NULL));
    gy = hm_get(hys);
    same_bits("swap rows [3,7,3] -> [7,3,3]", gy, y, NS * C);
    same_bits("swap rows back: the identity", o, xs, NS * C);
    check_pad("swap rows", hys);
    free(y), free(o), free(gy), free(xs), free(hxs.p), free(hys.p);
    sw_tensor_free(XS), sw_tensor_free(YS), sw_tensor_free(ZS);

    free(hx.p), free(hm.p), free(hdy.p), free(hy.p), free(ho.p), free(hdx.p), free(hdb.p), free(hdm.p);
    sw_tensor *all[] = {X, M, DY, Y, O, DX, DB, DM, G, Tt, F};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) sw_tensor_free(all[i]);
    free(x), free(m), free(dy);
}

int main(int argc, char **argv)
{
    sw_options opt;
    sw_options_default(&opt);
    opt.quiet = 1;
    opt.ncuda = 0; /* the reference runs on CPU workers only */
    if (sw_init(&argc, &argv, &opt) != 0) {
        printf("SKIP: StarPU could not start\n");
        return 77;
    }
    test_bias_rows();
    test_norms();
    test_gelu_softmax();
    test_llama_ops();
    test_dropout();
    test_cast();
    test_adds();
    test_embedding();
    test_crossentropy();
    test_adamw();
    test_clip();
    test_attention();
    test_attention_probs();
    test_dit_ops();
    return tu_finish();
}
