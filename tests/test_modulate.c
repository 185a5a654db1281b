/* adaLN-Zero (dit.h, codelets/modulate.c): the modulation
 * y = x (1 + scale[b]) + shift[b] and the gated residual out = res +
 * gate[b] branch, per-sequence vectors broadcast over rows in [s, b] order.
 * The codelets against a double-precision reference, the chunks of the
 * modulation as strided column blocks of [B, 3h]; their backward against
 * finite differences of the reference loss sum(dy * out). Then the layers on
 * one rank: mod = c W^T + b (sw_adaln: zero at registration, so a fresh
 * block is the identity on the residual), out = res + gate (x (1 + scale)
 * + shift), every gradient (x, res, c, W, b) against finite differences;
 * shapes refused at submission. */
#include <string.h>

#include "testutil.h"

enum { P = 4, B = 3, H = 5, N = P * B, K = 3, CD = 4 };

/* ---------------------------------------------------------- reference */
/* mod [B, K H]: chunk j of sequence b is mod[b*K*H + j*H + c] */
static void ref_out(const double *x, const double *res, const double *mod, double *out)
{
    for (int r = 0; r < N; r++)
        for (int c = 0; c < H; c++) {
            const double *m = mod + (r % B) * K * H;
            const double y = x[r * H + c] * (1 + m[H + c]) + m[c];
            out[r * H + c] = res[r * H + c] + m[2 * H + c] * y;
        }
}

static void ref_mod(const double *cv, const double *w, const double *bias, double *mod)
{
    for (int b = 0; b < B; b++)
        for (int o = 0; o < K * H; o++) {
            double s = bias[o];
            for (int i = 0; i < CD; i++) s += cv[b * CD + i] * w[o * CD + i];
            mod[b * K * H + o] = s;
        }
}

static double g_x[N * H], g_res[N * H], g_mod[B * K * H], g_c[B * CD], g_w[K * H * CD], g_b[K * H], g_dy[N * H];
static int g_from_c; /* the loss through mod = c W^T + b */

static double ref_loss(const void *unused)
{
    (void)unused;
    double out[N * H], mod[B * K * H], l = 0;
    if (g_from_c) ref_mod(g_c, g_w, g_b, mod);
    else memcpy(mod, g_mod, sizeof mod);
    ref_out(g_x, g_res, mod, out);
    for (int i = 0; i < N * H; i++) l += g_dy[i] * out[i];
    return l;
}

static void refuse_rows(void *arg)
{
    (void)arg;
    tu_init_child();
    sw_tensor *x = tu_tensor("x", 7, 4, NULL), *s = tu_tensor("s", 3, 4, NULL), *y = tu_tensor("y", 7, 4, NULL);
    sw_modulate_fwd(sw_tensor_whole(x, STARPU_R), sw_tensor_whole(s, STARPU_R), sw_tensor_whole(s, STARPU_R),
                    sw_tensor_whole(y, STARPU_W));
}

static void refuse_chunk(void *arg)
{
    (void)arg;
    tu_init_child();
    sw_params_config pc = {.seed = 1, .tiles = 2, .dtype = SW_F32, .grad_accum = 1, .bucket_mb = 25.0f, .grad_group = SW_GROUP_DP};
    sw_params *p = sw_params_new(&pc, NULL);
    sw_ctx x;
    sw_ctx_init(&x, &(sw_ctx_config){.seq = P, .batch = B, .tp = 1, .ulysses = 1, .ring = 1, .dp = 1,
                                     .grad_accum = 1, .tiles = 2, .seed = 1}, NULL, p);
    sw_tensor *in = tu_tensor("in", N, H, NULL), *mod = tu_tensor("mod", B, K * H, NULL), *out = tu_tensor("o", N, H, NULL);
    sw_modulate_forward(&x, in, mod, 0, 3, out);
}

/* the codelets on strided chunks of mod */
static void codelets(void)
{
    static float x[N * H], res[N * H], mod[B * K * H], dy[N * H];
    tu_rand(x, N * H, 81, 2.0f), tu_rand(res, N * H, 82, 1.0f), tu_rand(mod, B * K * H, 83, 0.8f), tu_rand(dy, N * H, 84, 1.0f);
    tu_to_double(g_x, x, N * H), tu_to_double(g_res, res, N * H), tu_to_double(g_mod, mod, B * K * H);
    tu_to_double(g_dy, dy, N * H);
    g_from_c = 0;
    double out_ref[N * H], dx_ref[N * H], dmod_ref[B * K * H];
    ref_out(g_x, g_res, g_mod, out_ref);
    tu_fd_grad(ref_loss, NULL, g_x, N * H, dx_ref);
    tu_fd_grad(ref_loss, NULL, g_mod, B * K * H, dmod_ref);
    sw_tensor *X = tu_tensor("x", N, H, x), *R = tu_tensor("res", N, H, res), *M = tu_tensor("mod", B, K * H, mod);
    sw_tensor *Y = tu_tensor("y", N, H, NULL), *O = tu_tensor("out", N, H, NULL), *DY = tu_tensor("dy", N, H, dy);
    sw_tensor *DB = tu_tensor("dbranch", N, H, NULL), *DX = tu_tensor("dx", N, H, NULL), *DM = tu_tensor("dmod", B, K * H, NULL);
    sw_tensor_fill(Y, NAN), sw_tensor_fill(O, NAN), sw_tensor_fill(DB, NAN), sw_tensor_fill(DX, NAN), sw_tensor_fill(DM, NAN);
    starpu_data_handle_t *m = sw_tensor_tiles(M, SW_COLS, K, STARPU_R);
    sw_modulate_fwd(sw_tensor_whole(X, STARPU_R), m[0], m[1], sw_tensor_whole(Y, STARPU_W));
    m = sw_tensor_tiles(M, SW_COLS, K, STARPU_R);
    sw_gate_fwd(sw_tensor_whole(R, STARPU_R), m[2], sw_tensor_whole(Y, STARPU_R), sw_tensor_whole(O, STARPU_W));
    m = sw_tensor_tiles(M, SW_COLS, K, STARPU_R);
    sw_gate_bwd(sw_tensor_whole(Y, STARPU_R), m[2], sw_tensor_whole(DY, STARPU_R), sw_tensor_whole(DB, STARPU_W),
                sw_tensor_tiles(DM, SW_COLS, K, STARPU_W)[2]);
    m = sw_tensor_tiles(M, SW_COLS, K, STARPU_R);
    starpu_data_handle_t *dm = sw_tensor_tiles(DM, SW_COLS, K, STARPU_W);
    sw_modulate_bwd(sw_tensor_whole(X, STARPU_R), m[1], sw_tensor_whole(DB, STARPU_R), sw_tensor_whole(DX, STARPU_W),
                    dm[0], dm[1]);
    float *got = tu_read(O);
    tu_close("gate(modulate(x)) fwd, chunks of mod as strided column blocks", got, out_ref, N * H, 1e-6, 1e-6);
    free(got);
    got = tu_read(DX);
    tu_close("modulate + gate bwd: dx vs finite differences", got, dx_ref, N * H, 1e-5, 1e-6);
    free(got);
    got = tu_read(DM);
    tu_close("modulate + gate bwd: dshift | dscale | dgate per sequence vs finite differences", got, dmod_ref, B * K * H,
             1e-5, 1e-6);
    free(got);
    sw_tensor *all[] = {X, R, M, Y, O, DY, DB, DX, DM};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) sw_tensor_free(all[i]);
}

/* the layers on one rank, through the adaLN linear */
static void layers(void)
{
    sw_params_config pc = {.seed = 1, .tiles = 2, .dtype = SW_F32, .grad_accum = 1, .bucket_mb = 25.0f, .grad_group = SW_GROUP_DP,
                           .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .adam_eps = 1e-8f};
    sw_params *p = sw_params_new(&pc, NULL);
    sw_ctx x;
    sw_ctx_init(&x, &(sw_ctx_config){.seq = P, .batch = B, .tp = 1, .ulysses = 1, .ring = 1, .dp = 1,
                                     .grad_accum = 1, .tiles = 2, .seed = 1}, NULL, p);
    sw_adaln a = sw_adaln_add(&x, "ada", CD, H, K);
    sw_params_allocate(p);
    float zw[K * H * CD], zb[K * H];
    sw_tensor_read_host(sw_params_value(p, a.lin.w), zw), sw_tensor_read_host(sw_params_value(p, a.lin.b), zb);
    int zero = 1;
    for (int i = 0; i < K * H * CD; i++) zero &= zw[i] == 0.0f;
    for (int i = 0; i < K * H; i++) zero &= zb[i] == 0.0f;
    tu_true("adaLN-Zero: the modulation's weight and bias are zero at registration", zero);

    static float xv[N * H], res[N * H], cv[B * CD], w[K * H * CD], bias[K * H], dy[N * H];
    tu_rand(xv, N * H, 91, 2.0f), tu_rand(res, N * H, 92, 1.0f), tu_rand(cv, B * CD, 93, 1.0f);
    tu_rand(w, K * H * CD, 94, 0.5f), tu_rand(bias, K * H, 95, 0.5f), tu_rand(dy, N * H, 96, 1.0f);
    sw_tensor *X = tu_tensor("x", N, H, xv), *R = tu_tensor("res", N, H, res), *C = tu_tensor("c", B, CD, cv);
    sw_tensor *M = tu_tensor("mod", B, K * H, NULL), *Y = tu_tensor("y", N, H, NULL), *O = tu_tensor("out", N, H, NULL);
    sw_tensor *DY = tu_tensor("dy", N, H, dy), *DB = tu_tensor("dbranch", N, H, NULL), *DX = tu_tensor("dx", N, H, NULL);
    sw_tensor *DM = tu_tensor("dmod", B, K * H, NULL);
    /* a fresh block: out = res exactly */
    sw_adaln_forward(&x, &a, C, M);
    sw_modulate_forward(&x, X, M, 0, 1, Y);
    sw_gate_forward(&x, R, Y, M, 2, O);
    float *got = tu_read(O);
    int same = !memcmp(got, res, sizeof res);
    free(got);
    tu_true("adaLN-Zero: with the zero modulation the gated residual is the identity (out = res, bit for bit)", same);

    sw_tensor_write_host(sw_params_value(p, a.lin.w), w), sw_tensor_write_host(sw_params_value(p, a.lin.b), bias);
    tu_to_double(g_x, xv, N * H), tu_to_double(g_res, res, N * H), tu_to_double(g_c, cv, B * CD);
    tu_to_double(g_w, w, K * H * CD), tu_to_double(g_b, bias, K * H), tu_to_double(g_dy, dy, N * H);
    g_from_c = 1;
    double mod[B * K * H], out_ref[N * H], dx_ref[N * H], dc_ref[B * CD], dw_ref[K * H * CD], db_ref[K * H];
    ref_mod(g_c, g_w, g_b, mod);
    ref_out(g_x, g_res, mod, out_ref);
    tu_fd_grad(ref_loss, NULL, g_x, N * H, dx_ref);
    tu_fd_grad(ref_loss, NULL, g_c, B * CD, dc_ref);
    tu_fd_grad(ref_loss, NULL, g_w, K * H * CD, dw_ref);
    tu_fd_grad(ref_loss, NULL, g_b, K * H, db_ref);

    sw_adaln_forward(&x, &a, C, M);
    sw_modulate_forward(&x, X, M, 0, 1, Y);
    sw_gate_forward(&x, R, Y, M, 2, O);
    sw_gate_backward(&x, DY, Y, M, 2, DB, DM);
    sw_modulate_backward(&x, DB, X, M, 0, 1, DX, DM);
    sw_tensor *DC = sw_adaln_backward(&x, &a, DM, C);
    struct { sw_tensor *t; const double *ref; int n; const char *what; } chk[] = {
        {O, out_ref, N * H, "layers fwd: out = res + gate (x (1 + scale) + shift), mod = c W^T + b"},
        {DX, dx_ref, N * H, "layers bwd: dx vs finite differences"},
        {DC, dc_ref, B * CD, "layers bwd: dc (sw_adaln_backward) vs finite differences"},
        {sw_params_grad(p, a.lin.w), dw_ref, K * H * CD, "layers bwd: dW of the modulation vs finite differences"},
        {sw_params_grad(p, a.lin.b), db_ref, K * H, "layers bwd: db of the modulation vs finite differences"}};
    for (size_t i = 0; i < sizeof chk / sizeof chk[0]; i++) {
        got = tu_read(chk[i].t);
        tu_close(chk[i].what, got, chk[i].ref, chk[i].n, 1e-5, 1e-5);
        free(got);
    }
    sw_tensor *all[] = {X, R, C, M, Y, O, DY, DB, DX, DM};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) sw_tensor_free(all[i]);
    sw_ctx_destroy(&x);
    sw_params_destroy(p);
}

int main(int argc, char **argv)
{
    tu_expect_refusal("sw_modulate_fwd with rows not whole positions", refuse_rows, NULL,
                      "sw_modulate_fwd: x [7,4] must be whole positions of the per-sequence shift [3,4]");
    tu_expect_refusal("sw_modulate_forward with a chunk outside mod", refuse_chunk, NULL,
                      "sw_modulate_forward: chunk 3 outside mod's 3 chunks");
    tu_init(&argc, &argv);
    codelets();
    layers();
    return tu_finish();
}
