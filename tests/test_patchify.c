/* Patch embedding and un-patchify (dit.h, graphs/layers/dit.c): latents
 * [batch][frames][height][width][channels] to tokens [frames (height/p)
 * (width/p) * batch, p p channels] in [s, b] order, against a reference
 * that walks the tokens (each element's pixel from its token and column);
 * un-patchify its exact inverse (bit for bit both ways); then the patch
 * embedding on one rank: the tokens loaded (sw_ctx_load_floats, and with
 * two micro-batches) through a replicated linear, the output against a
 * double-precision reference, and the gradient back to the latents
 * (the linear's dx un-patchified) and to the weight against finite
 * differences. Bad dims refused (exit 2) with the rule. */
#include <string.h>

#include "testutil.h"

enum { NB = 2, F = 2, HH = 4, WW = 6, CH = 3, PP = 2, HP = HH / PP, WP = WW / PP, NT = F * HP * WP, PC = PP * PP * CH,
       NL = NB * F * HH * WW * CH, E = 5 };

static const sw_patch_dims dims = {.frames = F, .height = HH, .width = WW, .channels = CH, .patch = PP};

/* latent index of token row `row`, column `col` */
static int64_t ref_latent_index(int64_t row, int64_t col)
{
    const int64_t s = row / NB, b = row % NB, f = s / (HP * WP), i = (s / WP) % HP, j = s % WP;
    const int64_t u = col / (PP * CH), v = (col / CH) % PP, c = col % CH;
    return (((b * F + f) * HH + i * PP + u) * WW + j * PP + v) * CH + c;
}

static double g_lat[NL], g_w[E * PC], g_dy[NT * NB * E];

static double ref_loss(const void *unused)
{
    (void)unused;
    double l = 0;
    for (int64_t r = 0; r < NT * NB; r++)
        for (int o = 0; o < E; o++) {
            double s = 0;
            for (int64_t c = 0; c < PC; c++) s += g_lat[ref_latent_index(r, c)] * g_w[o * PC + c];
            l += g_dy[r * E + o] * s;
        }
    return l;
}

static void refuse_patch(void *arg)
{
    (void)arg;
    sw_patch_dims d = dims;
    d.patch = 4; /* divides 4, not 6 */
    static float a[NL], b[NL];
    sw_patchify(&d, NB, a, b);
}

int main(int argc, char **argv)
{
    tu_expect_refusal("sw_patchify with a patch size that does not divide the width", refuse_patch, NULL,
                      "sw_patchify: the patch size (4) must divide height (4) and width (6)");
    char msg[200];
    tu_true("sw_patch_tokens: 2 frames of 4 x 6 in patches of 2: 12 tokens", sw_patch_tokens(&dims, msg, sizeof msg) == NT);
    sw_patch_dims bad = dims;
    bad.channels = 0;
    tu_true("sw_patch_tokens refuses 0 channels with the rule",
            sw_patch_tokens(&bad, msg, sizeof msg) == -1 && strstr(msg, "must be at least 1"));
    tu_init(&argc, &argv);
    static float lat[NL], tok[NT * NB * PC], back[NL], w[E * PC], dy[NT * NB * E];
    tu_rand(lat, NL, 121, 1.0f);
    sw_patchify(&dims, NB, lat, tok);
    int ok = 1;
    for (int64_t r = 0; r < NT * NB; r++)
        for (int64_t c = 0; c < PC; c++) ok &= !memcmp(&tok[r * PC + c], &lat[ref_latent_index(r, c)], sizeof(float));
    tu_true("patchify: every token element is its pixel (frame-major tokens, (u, v, c) columns), bit for bit", ok);
    memset(back, 0, sizeof back);
    sw_unpatchify(&dims, NB, tok, back);
    tu_true("un-patchify(patchify(latents)) = latents, bit for bit", !memcmp(back, lat, sizeof lat));

    /* the patch embedding: tokens through a replicated linear, loaded as 2 micro-batches of 1 sample */
    sw_params_config pc = {.seed = 1, .tiles = 2, .dtype = SW_F32, .grad_accum = 2, .bucket_mb = 25.0f, .grad_group = SW_GROUP_DP};
    sw_params *p = sw_params_new(&pc, NULL);
    sw_ctx x;
    sw_ctx_init(&x, &(sw_ctx_config){.seq = NT, .batch = NB, .tp = 1, .ulysses = 1, .ring = 1, .dp = 1,
                                     .grad_accum = 2, .tiles = 2, .seed = 1}, NULL, p);
    sw_linear emb = sw_linear_add(&x, "patch_embed", SW_LINEAR_REPLICATED, PC, E, 0, 0.3f, NULL, 0, NULL);
    sw_params_allocate(p);
    sw_tensor_read_host(sw_params_value(p, emb.w), w);
    tu_rand(dy, NT * NB * E, 122, 1.0f);
    tu_to_double(g_lat, lat, NL), tu_to_double(g_w, w, E * PC), tu_to_double(g_dy, dy, NT * NB * E);
    static double dlat_ref[NL], dw_ref[E * PC];
    tu_fd_grad(ref_loss, NULL, g_lat, NL, dlat_ref);
    tu_fd_grad(ref_loss, NULL, g_w, E * PC, dw_ref);
    static double dw_sum[E * PC];
    static float dtok[NT * NB * PC], dlat[NL];
    sw_tensor *T = tu_tensor("tokens", x.tokens, PC, NULL), *Y = tu_tensor("emb", x.tokens, E, NULL), *DY = tu_tensor("dy", x.tokens, E, NULL);
    for (int k = 0; k < 2; k++) { /* micro-batch k: sample k */
        sw_ctx_load_floats(&x, k, tok, PC, T);
        float dyk[NT * E], yk[NT * E], dtk[NT * PC], dwk[E * PC];
        for (int s = 0; s < NT; s++) memcpy(dyk + s * E, dy + (s * NB + k) * E, sizeof(float) * E);
        sw_tensor_write_host(DY, dyk);
        sw_linear_forward(&x, &emb, T, T, Y);
        sw_tensor *DT = sw_linear_backward(&x, &emb, DY, T, T);
        sw_tensor_read_host(Y, yk), sw_tensor_read_host(DT, dtk), sw_tensor_read_host(sw_params_grad(p, emb.w), dwk);
        double yref[NT * E];
        for (int s = 0; s < NT; s++)
            for (int o = 0; o < E; o++) {
                double acc = 0;
                for (int c = 0; c < PC; c++) acc += g_lat[ref_latent_index(s * NB + k, c)] * g_w[o * PC + c];
                yref[s * E + o] = acc;
            }
        snprintf(msg, sizeof msg, "patch embedding fwd, micro-batch %d: tokens loaded, W x", k);
        tu_close(msg, yk, yref, NT * E, 1e-5, 1e-6);
        for (int s = 0; s < NT; s++) memcpy(dtok + (s * NB + k) * PC, dtk + s * PC, sizeof(float) * PC);
        for (int i = 0; i < E * PC; i++) dw_sum[i] += dwk[i];
    }
    sw_unpatchify(&dims, NB, dtok, dlat);
    tu_close("patch embedding bwd: dlatents = un-patchify(dtokens) vs finite differences", dlat, dlat_ref, NL, 1e-5, 1e-6);
    float dws[E * PC];
    for (int i = 0; i < E * PC; i++) dws[i] = (float)dw_sum[i];
    tu_close("patch embedding bwd: dW summed over the micro-batches vs finite differences", dws, dw_ref, E * PC, 1e-5, 1e-5);
    sw_tensor_free(T), sw_tensor_free(Y), sw_tensor_free(DY);
    sw_ctx_destroy(&x);
    sw_params_destroy(p);
    return tu_finish();
}
