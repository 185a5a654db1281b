/* Spatial and temporal attention over a video's tokens (dit.h,
 * graphs/layers/dit.c, codelets/permute.c): frame-major tokens (position f S + s
 * for patch s of frame f), rows in [s, b] order. Spatial: each token
 * attends to the tokens of its frame (and sample); temporal: to the tokens
 * of its patch position across frames. On one rank, both axes, with 1 and
 * 2 head-group tasks: the output against a double-precision reference that
 * forms each token's group from its position, dqkv against finite
 * differences of sum(dout * out); the row swap (its inverse the identity)
 * bit for bit against its index formula; frames x patches other than the
 * sequence refused (exit 2). */
#include <string.h>

#include "testutil.h"

enum { F = 3, S = 4, B = 2, A = 2, D = 4, AD = A * D, T = F * S * B, QC = 3 * AD };

static double g_qkv[T * QC], g_dout[T * AD];
static int g_axis;

/* row r = (f S + s) B + b; same group: spatial same f and b, temporal same s and b */
static int same_group(int r1, int r2)
{
    const int p1 = r1 / B, p2 = r2 / B;
    if (r1 % B != r2 % B) return 0;
    return g_axis == SW_AXIS_SPATIAL ? p1 / S == p2 / S : p1 % S == p2 % S;
}

static void ref_att(const double *qkv, double *out)
{
    for (int r = 0; r < T; r++)
        for (int h = 0; h < A; h++) {
            double sc[T], m = -INFINITY, z = 0;
            for (int j = 0; j < T; j++) {
                if (!same_group(r, j)) continue;
                sc[j] = 0;
                for (int c = 0; c < D; c++) sc[j] += qkv[r * QC + h * D + c] * qkv[j * QC + AD + h * D + c];
                sc[j] /= sqrt((double)D);
                if (sc[j] > m) m = sc[j];
            }
            for (int j = 0; j < T; j++)
                if (same_group(r, j)) z += (sc[j] = exp(sc[j] - m));
            for (int c = 0; c < D; c++) {
                double o = 0;
                for (int j = 0; j < T; j++)
                    if (same_group(r, j)) o += sc[j] / z * qkv[j * QC + 2 * AD + h * D + c];
                out[r * AD + h * D + c] = o;
            }
        }
}

static double ref_loss(const void *unused)
{
    (void)unused;
    double out[T * AD], l = 0;
    ref_att(g_qkv, out);
    for (int i = 0; i < T * AD; i++) l += g_dout[i] * out[i];
    return l;
}

static void make_ctx(sw_ctx *x, sw_params **p, int tiles)
{
    sw_params_config pc = {.seed = 1, .tiles = tiles, .dtype = SW_F32, .grad_accum = 1, .bucket_mb = 25.0f, .grad_group = SW_GROUP_DP};
    *p = sw_params_new(&pc, NULL);
    sw_ctx_init(x, &(sw_ctx_config){.seq = F * S, .batch = B, .tp = 1, .ulysses = 1, .ring = 1, .dp = 1,
                                    .grad_accum = 1, .tiles = tiles, .seed = 1}, NULL, *p);
}

static void refuse_grid(void *arg)
{
    (void)arg;
    tu_init_child();
    sw_ctx x;
    sw_params *p;
    make_ctx(&x, &p, 1);
    sw_grid_attention_create(&x, SW_AXIS_TEMPORAL, F, S + 1, A, D);
}

int main(int argc, char **argv)
{
    tu_expect_refusal("sw_grid_attention_create with frames x patches other than the sequence", refuse_grid, NULL,
                      "sw_grid_attention_create: frames (3) times patches (5) must be the sequence length (12)");
    tu_init(&argc, &argv);
    /* the row swap against its formula, and back */
    static float v[T * 3], sw[T * 3], back[T * 3];
    tu_rand(v, T * 3, 140, 1.0f);
    sw_tensor *X = tu_tensor("x", T, 3, v), *Y = tu_tensor("y", T, 3, NULL), *Z = tu_tensor("z", T, 3, NULL);
    sw_swap_rows(sw_tensor_whole(X, STARPU_R), sw_tensor_whole(Y, STARPU_W), F, S, B);
    sw_swap_rows(sw_tensor_whole(Y, STARPU_R), sw_tensor_whole(Z, STARPU_W), S, F, B);
    sw_tensor_read_host(Y, sw), sw_tensor_read_host(Z, back);
    int ok = 1;
    for (int f = 0; f < F; f++)
        for (int s = 0; s < S; s++)
            for (int b = 0; b < B; b++) ok &= !memcmp(sw + ((s * F + f) * B + b) * 3, v + ((f * S + s) * B + b) * 3, 12);
    tu_true("swap rows [frame, patch, sample] -> [patch, frame, sample], bit for bit", ok);
    tu_true("swap rows back: the identity, bit for bit", !memcmp(back, v, sizeof v));
    sw_tensor_free(X), sw_tensor_free(Y), sw_tensor_free(Z);

    static float qkv[T * QC], dout[T * AD];
    tu_rand(qkv, T * QC, 141, 1.5f), tu_rand(dout, T * AD, 142, 1.0f);
    tu_to_double(g_qkv, qkv, T * QC), tu_to_double(g_dout, dout, T * AD);
    char what[200];
    for (int axis = SW_AXIS_SPATIAL; axis <= SW_AXIS_TEMPORAL; axis++) {
        const char *name = axis == SW_AXIS_SPATIAL ? "spatial (the patches of a frame)" : "temporal (a patch across frames)";
        g_axis = axis;
        static double out_ref[T * AD], dqkv_ref[T * QC];
        ref_att(g_qkv, out_ref);
        tu_fd_grad(ref_loss, NULL, g_qkv, T * QC, dqkv_ref);
        for (int tiles = 1; tiles <= 2; tiles++) {
            sw_ctx x;
            sw_params *p;
            make_ctx(&x, &p, tiles);
            sw_params_allocate(p);
            sw_grid_attention *a = sw_grid_attention_create(&x, (sw_attn_axis)axis, F, S, A, D);
            sw_saved s;
            memset(&s, 0, sizeof s);
            strcpy(s.prefix, "g");
            sw_grid_saved k;
            sw_grid_attention_keep(a, &s, &k);
            sw_tensor_write_host(k.qkv, qkv);
            sw_tensor *DO = tu_tensor("dout", T, AD, dout), *DQKV = tu_tensor("dqkv", T, QC, NULL);
            sw_tensor_fill(DQKV, NAN);
            sw_grid_attention_forward(&x, a, &k);
            sw_grid_attention_backward(&x, a, &k, DO, DQKV);
            float *got = tu_read(k.att);
            snprintf(what, sizeof what, "%s attention fwd, %d head-group task(s)", name, tiles);
            tu_close(what, got, out_ref, T * AD, 1e-5, 1e-6);
            free(got);
            got = tu_read(DQKV);
            snprintf(what, sizeof what, "%s attention bwd, %d task(s): dq | dk | dv vs finite differences", name, tiles);
            tu_close(what, got, dqkv_ref, T * QC, 1e-5, 1e-6);
            free(got);
            sw_tensor_free(DO), sw_tensor_free(DQKV);
            for (int i = 0; i < s.n; i++) sw_tensor_free(s.t[i]);
            sw_grid_attention_destroy(a);
            sw_scratch_invalidate(&x);
            sw_ctx_destroy(&x);
            sw_params_destroy(p);
        }
    }
    return tu_finish();
}
