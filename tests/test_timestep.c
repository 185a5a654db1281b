/* The timestep embedding (dit.h, codelets/timestep.c, codelets/silu.c):
 * the sinusoidal features of a per-sequence t, [cos(t f) | sin(t f)],
 * f_i = exp(-ln(10000) i / half) (DiT's TimestepEmbedder), against the
 * double-precision formula with the fp32 argument PyTorch forms (1e-6) and
 * against the exact formula (the fp32 argument's rounding: 2e-4 at t = 999);
 * an odd dim's zero column. SiLU against a reference and its backward
 * against finite differences, saturating for large |x|. Then the layer on
 * one rank: out = fc2(silu(fc1(features(t)))) and the gradients of the four
 * parameters against finite differences of sum(dout * out), and its bytes
 * at creation (sw_timestep_embedder_bytes) = what StarPU's allocator
 * counts; shapes refused at submission. */
#include <string.h>

#include "testutil.h"

enum { B = 3, FD = 8, H = 6 };

static const float tval[B] = {0.0f, 17.0f, 999.0f};

/* features as PyTorch forms them in fp32 (exact = 0), or the exact double formula */
static void ref_features(const float *t, int nb, int dim, int exact, double *y)
{
    const int half = dim / 2;
    for (int b = 0; b < nb; b++) {
        for (int i = 0; i < half; i++) {
            double arg;
            if (exact) arg = (double)t[b] * exp(-log(10000.0) * i / half);
            else {
                const float f = (float)exp((double)((float)-log(10000.0) * (float)i / (float)half));
                arg = (double)(t[b] * f);
            }
            y[b * dim + i] = cos(arg), y[b * dim + half + i] = sin(arg);
        }
        if (dim % 2) y[b * dim + dim - 1] = 0.0;
    }
}

static double silu(double a) { return a / (1.0 + exp(-a)); }

static double g_w1[H * FD], g_b1[H], g_w2[H * H], g_b2[H], g_feat[B * FD], g_dout[B * H], g_x[40], g_dy[40];

static void ref_forward(double *out)
{
    for (int b = 0; b < B; b++) {
        double a[H];
        for (int o = 0; o < H; o++) {
            double s = g_b1[o];
            for (int i = 0; i < FD; i++) s += g_feat[b * FD + i] * g_w1[o * FD + i];
            a[o] = silu(s);
        }
        for (int o = 0; o < H; o++) {
            double s = g_b2[o];
            for (int i = 0; i < H; i++) s += a[i] * g_w2[o * H + i];
            out[b * H + o] = s;
        }
    }
}

static double ref_loss(const void *unused)
{
    (void)unused;
    double out[B * H], l = 0;
    ref_forward(out);
    for (int i = 0; i < B * H; i++) l += g_dout[i] * out[i];
    return l;
}

static double silu_loss(const void *n)
{
    double l = 0;
    for (int i = 0; i < *(const int *)n; i++) l += g_dy[i] * silu(g_x[i]);
    return l;
}

static void refuse_dim(void *arg)
{
    (void)arg;
    tu_init_child();
    sw_tensor *t = tu_tensor("t", 3, 1, NULL), *y = tu_tensor("y", 3, 1, NULL);
    sw_timestep_fwd(sw_tensor_whole(t, STARPU_R), sw_tensor_whole(y, STARPU_W), 10000.0f);
}

static void refuse_rows(void *arg)
{
    (void)arg;
    tu_init_child();
    sw_tensor *t = tu_tensor("t", 2, 1, NULL), *y = tu_tensor("y", 3, 8, NULL);
    sw_timestep_fwd(sw_tensor_whole(t, STARPU_R), sw_tensor_whole(y, STARPU_W), 10000.0f);
}

static void features(void)
{
    char what[160];
    for (int dim = 8; dim <= 9; dim++) {
        double ref[B * 9], exact[B * 9];
        ref_features(tval, B, dim, 0, ref);
        ref_features(tval, B, dim, 1, exact);
        sw_tensor *T = tu_tensor("t", B, 1, tval), *Y = tu_tensor("y", B, dim, NULL);
        sw_tensor_fill(Y, NAN);
        sw_timestep_fwd(sw_tensor_whole(T, STARPU_R), sw_tensor_whole(Y, STARPU_W), 10000.0f);
        float *got = tu_read(Y);
        snprintf(what, sizeof what, "timestep features, dim %d, t = 0, 17, 999: PyTorch's fp32 argument", dim);
        tu_close(what, got, ref, B * dim, 1e-6, 1e-6);
        snprintf(what, sizeof what, "timestep features, dim %d: the exact formula within the fp32 argument's rounding", dim);
        tu_close(what, got, exact, B * dim, 0, 2e-4);
        if (dim % 2) {
            int zero = 1;
            for (int b = 0; b < B; b++) zero &= got[b * dim + dim - 1] == 0.0f;
            tu_true("timestep features, odd dim: the last column zero", zero);
        }
        free(got);
        sw_tensor_free(T), sw_tensor_free(Y);
    }
}

static void silu_op(void)
{
    int n = 40;
    static float x[40], dy[40];
    tu_rand(x, n, 101, 6.0f), tu_rand(dy, n, 102, 1.0f);
    x[0] = 100.0f, x[1] = -100.0f; /* exp saturates: silu 100 and -0, no NaN */
    tu_to_double(g_x, x, n), tu_to_double(g_dy, dy, n);
    double y_ref[40], dx_ref[40];
    for (int i = 0; i < n; i++) y_ref[i] = silu(g_x[i]);
    tu_fd_grad(silu_loss, &n, g_x, n, dx_ref);
    dx_ref[0] = g_dy[0], dx_ref[1] = 0.0; /* the limits, where differences of exp(-100) lose everything */
    sw_tensor *X = tu_tensor("x", 8, 5, x), *Y = tu_tensor("y", 8, 5, NULL), *G = tu_tensor("g", 8, 5, dy);
    sw_silu_fwd(sw_tensor_whole(X, STARPU_R), sw_tensor_whole(Y, STARPU_W));
    sw_silu_bwd(sw_tensor_whole(X, STARPU_R), sw_tensor_whole(G, STARPU_RW));
    float *got = tu_read(Y);
    tu_close("silu fwd (x = +-100 saturating)", got, y_ref, n, 1e-6, 1e-7);
    free(got);
    got = tu_read(G);
    tu_close("silu bwd vs finite differences", got, dx_ref, n, 1e-5, 1e-6);
    free(got);
    sw_tensor_free(X), sw_tensor_free(Y), sw_tensor_free(G);
}

/* bytes StarPU counts as allocated in main RAM (every tensor's home buffer is counted: tu_init) */
static double ram_used(void)
{
    starpu_task_wait_for_all();
    return (double)(starpu_memory_get_total(STARPU_MAIN_RAM) - starpu_memory_get_available(STARPU_MAIN_RAM));
}

static void layer(void)
{
    sw_params_config pc = {.seed = 1, .tiles = 2, .dtype = SW_F32, .grad_accum = 1, .bucket_mb = 25.0f, .grad_group = SW_GROUP_DP};
    sw_params *p = sw_params_new(&pc, NULL);
    sw_ctx x;
    sw_ctx_init(&x, &(sw_ctx_config){.seq = 4, .batch = B, .tp = 1, .ulysses = 1, .ring = 1, .dp = 1,
                                     .grad_accum = 1, .tiles = 2, .seed = 1}, NULL, p);
    const double before = ram_used();
    sw_timestep_embedder *te = sw_timestep_embedder_create(&x, "t_emb", FD, H, 10000.0f, 0.3f);
    const double made = ram_used() - before, model = sw_timestep_embedder_bytes(&x, FD, H);
    char line[200];
    snprintf(line, sizeof line, "timestep embedder at creation: StarPU's main-RAM bytes %.0f = sw_timestep_embedder_bytes "
             "%.0f", made, model);
    tu_true(line, made == model);
    sw_params_allocate(p);
    const sw_linear *l1 = sw_timestep_embedder_linear(te, 0), *l2 = sw_timestep_embedder_linear(te, 1);
    static float w1[H * FD], b1[H], w2[H * H], b2[H], dout[B * H];
    sw_tensor_read_host(sw_params_value(p, l1->w), w1), sw_tensor_read_host(sw_params_value(p, l2->w), w2);
    tu_rand(b1, H, 111, 0.5f), tu_rand(b2, H, 112, 0.5f), tu_rand(dout, B * H, 113, 1.0f);
    sw_tensor_write_host(sw_params_value(p, l1->b), b1), sw_tensor_write_host(sw_params_value(p, l2->b), b2);
    tu_to_double(g_w1, w1, H * FD), tu_to_double(g_b1, b1, H), tu_to_double(g_w2, w2, H * H);
    tu_to_double(g_b2, b2, H), tu_to_double(g_dout, dout, B * H);
    ref_features(tval, B, FD, 0, g_feat);
    double out_ref[B * H], dw1[H * FD], db1[H], dw2[H * H], db2[H];
    ref_forward(out_ref);
    tu_fd_grad(ref_loss, NULL, g_w1, H * FD, dw1), tu_fd_grad(ref_loss, NULL, g_b1, H, db1);
    tu_fd_grad(ref_loss, NULL, g_w2, H * H, dw2), tu_fd_grad(ref_loss, NULL, g_b2, H, db2);
    sw_tensor *T = tu_tensor("t", B, 1, tval), *O = tu_tensor("out", B, H, NULL), *DO = tu_tensor("dout", B, H, dout);
    sw_timestep_embedder_forward(&x, te, T, O);
    sw_timestep_embedder_backward(&x, te, DO);
    struct { sw_tensor *t; const double *ref; int n; const char *what; } chk[] = {
        {O, out_ref, B * H, "timestep embedder fwd: fc2(silu(fc1(features(t))))"},
        {sw_params_grad(p, l1->w), dw1, H * FD, "timestep embedder bwd: dW fc1 vs finite differences"},
        {sw_params_grad(p, l1->b), db1, H, "timestep embedder bwd: db fc1 vs finite differences"},
        {sw_params_grad(p, l2->w), dw2, H * H, "timestep embedder bwd: dW fc2 vs finite differences"},
        {sw_params_grad(p, l2->b), db2, H, "timestep embedder bwd: db fc2 vs finite differences"}};
    for (size_t i = 0; i < sizeof chk / sizeof chk[0]; i++) {
        float *got = tu_read(chk[i].t);
        tu_close(chk[i].what, got, chk[i].ref, chk[i].n, 1e-5, 1e-5);
        free(got);
    }
    sw_tensor_free(T), sw_tensor_free(O), sw_tensor_free(DO);
    sw_timestep_embedder_destroy(te);
    sw_ctx_destroy(&x);
    sw_params_destroy(p);
}

int main(int argc, char **argv)
{
    tu_expect_refusal("sw_timestep_fwd into one column", refuse_dim, NULL,
                      "sw_timestep_fwd: y [3,1] must have at least 2 columns");
    tu_expect_refusal("sw_timestep_fwd with a t per row missing", refuse_rows, NULL,
                      "sw_timestep_fwd: t [2,1] must hold one value per row of y [3,8]");
    tu_init(&argc, &argv);
    features();
    silu_op();
    layer();
    return tu_finish();
}
