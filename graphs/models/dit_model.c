/* The DiT model (dit.h: sw_dit_create): a spatial-temporal video diffusion
 * transformer (Open-Sora's STDiT) built from the public layers alone, the way
 * examples/dit_train trains it on deterministic synthetic latents:
 *
 *   latents x0 [frames, height, width, channels] per sample, noise eps ~ N(0, 1),
 *   a diffusion step t per sample and step, x_t = sqrt(a_t) x0 + sqrt(1 - a_t) eps
 *   (a_t: DDPM's linear betas 1e-4 .. 0.02 over 1000 steps, cumulated);
 *   tokens = patchify(x_t) [N = frames (height/p) (width/p), p p channels];
 *   x = tokens Wpe^T + bpe + pos (fixed sin-cos of the patch index and of the frame);
 *   c = fc2(silu(fc1(sincos(t)))) [B, h] (DiT's timestep embedder), sc = silu(c);
 *   each block, mod = sc Wada^T + bada [B, 12 h] (adaLN-Zero: zero at init),
 *   four branches in turn, branch i with shift, scale, gate = chunks 3i, 3i+1, 3i+2:
 *       x = x + gate * branch_i(rms_i(x) (1 + scale) + shift),
 *     branch 0: spatial attention (the patches of one frame),
 *     branch 1: temporal attention (one patch position across frames),
 *     branch 2: cross-attention to a conditioning sequence [cond_len, cond_dim]
 *               (queries from the tokens, keys and values from the conditioning),
 *     branch 3: MLP (GeLU, 4 h);
 *   final: pred = (rms(x) (1 + scale) + shift) Wout^T + bout [N, p p channels],
 *          shift, scale from sc (a 2-chunk adaLN);
 *   loss = mean((pred - patchify(eps))^2) (sw_row_mse).
 * RMSNorm is T5LayerNorm (eps 1e-6). Unlike Open-Sora, which leaves its
 * cross-attention unnormalised and unmodulated, every branch here is
 * modulated alike (issue 33's model).
 *
 * The step driver (sw_pipeline) runs it in every layout: the blocks through
 * sw_block_ops, the embedding and the head through sw_model_ops, and with
 * pipeline stages the driver moves the timestep embedding between stages. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer_util.h"
#include "step/schedule.h"
#include "starweave/dit_model.h"
#include "starweave/heads.h"
#include "starweave/mesh.h"
#include "starweave/runtime.h"

enum { MAX_LAYERS = SW_DIT_MAX_LAYERS, MAX_MICRO = SW_DIT_MAX_MICRO, FREQ = SW_DIT_FREQ, CHUNKS = 12, BRANCHES = 4 };
enum { SPATIAL, TEMPORAL, CROSS, MLP };

typedef struct {
    sw_norm norm[BRANCHES];  /* RMSNorm before each branch */
    sw_adaln ada;            /* [12 h, h]: shift, scale, gate of each branch */
    sw_linear sqkv, sproj, tqkv, tproj, q, cproj, fc1, fc2;
    sw_cross_kv kv;          /* [2h, cond_dim]: K | V of the conditioning */
} block_params;
/* what a block keeps: the modulation, per branch the norm's output and rstd,
 * the modulated input (and its all-gather with sp) and the branch's output
 * (the gate's backward reads it), the layers' own, and the MLP's hidden */
typedef struct {
    sw_tensor *mod, *n[BRANCHES], *rstd[BRANCHES], *m[BRANCHES], *mg[BRANCHES], *out[BRANCHES], *res[BRANCHES];
    sw_tensor *u, *a;
    sw_grid_saved sa, ta;
    sw_cross_saved ca;
} block_saved;

struct sw_dit {
    sw_ctx x;
    sw_dit_config cfg;         /* as created */
    sw_blocks_config bc;       /* the blocks' (the memory model reads it) */
    sw_params *p;
    int64_t h, ppc, cond_dim;  /* hidden, p p channels, conditioning features */
    int heads, layers, cond_len;
    sw_grid_attention *spatial, *temporal;
    sw_cross_attention *cross;
    block_params blk[MAX_LAYERS];
    sw_linear patch_emb, final_lin;
    sw_timestep_embedder *te;
    sw_norm final_norm;
    sw_adaln final_ada;
    sw_row_mse *mse;
    sw_pipeline *pipe;
    sw_tensor *pos;            /* [l, h] the fixed position embedding */
    sw_tensor *emb, *nf, *nf_rstd, *fm, *pred; /* [l, h] x3, [l, 1], [l, ppc] */
    /* per micro-batch: the patchified x_t [l, ppc], the target eps [l, ppc], t [B, 1], the
     * conditioning [cond_len B, cond_dim]; c = the timestep embedding [B, h], sc = silu(c),
     * dsc: the gradient of sc, accumulated over the blocks (below), fmod the final modulation */
    sw_tensor *tokens[MAX_MICRO], *target[MAX_MICRO], *t[MAX_MICRO], *cond[MAX_MICRO];
    sw_tensor *c[MAX_MICRO], *sc[MAX_MICRO], *dsc[MAX_MICRO], *fmod[MAX_MICRO];
};
typedef struct sw_dit model;

/* How the model carries c and its gradient: the block interface passes only the
 * residual stream x, so the conditioning lives in the model and the step driver
 * moves it (sw_model_ops.conditioning). embed_forward makes c and sc = silu(c) of
 * the micro-batch (sc[k], kept until its backward: a forward again under full
 * recomputation reads it too); every block reads sc[k] for its modulation, and
 * with pipeline stages the driver sends sc[k] from the first stage to the
 * others. In backward the driver zeroes dsc[k], head_backward and each block's
 * backward *add* their adaLN's gradient into it (sw_copy_flat, accumulate 1),
 * the driver sums the stages' dsc[k] into the first stage's, and
 * embed_backward, after every block, takes dsc[k] through silu and the
 * timestep embedder. StarPU orders these by their access to dsc[k]; one
 * tensor per micro-batch keeps micro-batches in flight apart. */

static void keep(void *mp, sw_saved *s)
{
    model *m = mp;
    block_saved *k = s->state;
    const sw_ctx *x = &m->x;
    int64_t T = x->tokens, l = x->resid_rows, h = m->h, f = 4 * h / x->tp.t;
    int sp = x->tp.t > 1 && x->c.sp;
    static const char *names[BRANCHES] = {"s", "t", "c", "m"};
    char w[32];
    k->mod = sw_saved_new(s, "mod", x->B, CHUNKS * h);
    for (int i = 0; i < BRANCHES; i++) {
        snprintf(w, sizeof w, "%s_norm", names[i]), k->n[i] = sw_saved_new(s, w, l, h);
        snprintf(w, sizeof w, "%s_rstd", names[i]), k->rstd[i] = sw_saved_new(s, w, l, 1);
        snprintf(w, sizeof w, "%s_mod", names[i]), k->m[i] = sw_saved_new(s, w, l, h);
        snprintf(w, sizeof w, "%s_modg", names[i]), k->mg[i] = sp ? sw_saved_new(s, w, T, h) : k->m[i];
        snprintf(w, sizeof w, "%s_out", names[i]), k->out[i] = sw_saved_new(s, w, l, h);
        /* the residual stream after branches 0..2 (the block's input is the service's) */
        snprintf(w, sizeof w, "%s_res", names[i]), k->res[i] = i < BRANCHES - 1 ? sw_saved_new(s, w, l, h) : NULL;
    }
    k->u = sw_saved_new(s, "fc1", T, f), k->a = sw_saved_new(s, "act", T, f);
    sw_grid_attention_keep(m->spatial, s, &k->sa);
    sw_grid_attention_keep(m->temporal, s, &k->ta);
    sw_cross_attention_keep(m->cross, s, &k->ca);
}

/* branch i's body: from the modulated rows m (gathered mg) into out [l, h] */
static void branch_forward(model *m, block_params *b, block_saved *k, int i)
{
    sw_ctx *x = &m->x;
    sw_tensor *y = NULL;
    switch (i) {
    case SPATIAL:
    case TEMPORAL: {
        sw_grid_saved *g = i == SPATIAL ? &k->sa : &k->ta;
        sw_linear_forward(x, i == SPATIAL ? &b->sqkv : &b->tqkv, k->m[i], k->mg[i], g->qkv);
        sw_grid_attention_forward(x, i == SPATIAL ? m->spatial : m->temporal, g);
        y = sw_linear_row_forward(x, i == SPATIAL ? &b->sproj : &b->tproj, g->att);
        break;
    }
    case CROSS: /* K/V: this TP rank's K and V heads of the conditioning rows */
        sw_linear_forward(x, &b->q, k->m[i], k->mg[i], k->ca.q);
        sw_cross_kv_forward(x, &b->kv, m->cond[x->micro], k->ca.kv);
        sw_cross_attention_forward(x, m->cross, &k->ca);
        y = sw_linear_row_forward(x, &b->cproj, k->ca.att);
        break;
    case MLP:
        sw_linear_forward(x, &b->fc1, k->m[i], k->mg[i], k->u);
        sw_gelu_forward(x, k->u, k->a);
        y = sw_linear_row_forward(x, &b->fc2, k->a);
        break;
    }
    sw_copy_flat(sw_tensor_whole(y, STARPU_R), sw_tensor_whole(k->out[i], STARPU_W), 0); /* y is a scratch */
}

static void forward(void *mp, int step, int l, sw_saved *s, sw_tensor *in, sw_tensor *y)
{
    model *m = mp;
    sw_ctx *x = &m->x;
    block_params *b = &m->blk[l];
    block_saved *k = s->state;
    (void)step;
    sw_adaln_forward(x, &b->ada, m->sc[x->micro], k->mod);
    sw_tensor *r = in;
    for (int i = 0; i < BRANCHES; i++) {
        sw_norm_forward(x, &b->norm[i], r, k->n[i], NULL, k->rstd[i]);
        sw_modulate_forward(x, k->n[i], k->mod, 3 * i, 3 * i + 1, k->m[i]);
        branch_forward(m, b, k, i);
        sw_tensor *next = i < BRANCHES - 1 ? k->res[i] : y;
        if (next) sw_gate_forward(x, r, k->out[i], k->mod, 3 * i + 2, next); /* y NULL: recomputing, not needed */
        r = next;
    }
}

/* branch i's backward: dout [l, h] the gradient of out; returns the gradient of m [l, h] (a scratch) */
static sw_tensor *branch_backward(model *m, block_params *b, block_saved *k, int i, sw_tensor *dout)
{
    sw_ctx *x = &m->x;
    int64_t ad = m->h / x->tp.t; /* this TP rank's heads times head_dim */
    sw_tensor *datt = sw_scratch(x, "dit_datt", x->tokens, ad);
    switch (i) {
    case SPATIAL:
    case TEMPORAL: {
        sw_grid_saved *g = i == SPATIAL ? &k->sa : &k->ta;
        sw_tensor *dqkv = sw_scratch(x, "dit_dqkv", x->tokens, 3 * ad);
        sw_linear_row_backward(x, i == SPATIAL ? &b->sproj : &b->tproj, dout, g->att, datt);
        sw_grid_attention_backward(x, i == SPATIAL ? m->spatial : m->temporal, g, datt, dqkv);
        return sw_linear_backward(x, i == SPATIAL ? &b->sqkv : &b->tqkv, dqkv, k->m[i], k->mg[i]);
    }
    case CROSS: {
        sw_tensor *dq = sw_scratch(x, "dit_dq", x->tokens, ad), *dkv = sw_scratch(x, "dit_dkv", k->ca.kv->rows, 2 * ad);
        sw_linear_row_backward(x, &b->cproj, dout, k->ca.att, datt);
        sw_cross_attention_backward(x, m->cross, &k->ca, datt, dq, dkv);
        /* dWkv: this rank's queries' part, summed by the registry; the conditioning is data (no dcond) */
        sw_cross_kv_backward(x, &b->kv, m->cond[x->micro], dkv, NULL);
        return sw_linear_backward(x, &b->q, dq, k->m[i], k->mg[i]);
    }
    default: {
        sw_tensor *dact = sw_scratch(x, "dit_dact", x->tokens, k->a->cols);
        sw_linear_row_backward(x, &b->fc2, dout, k->a, dact);
        sw_gelu_backward(x, k->u, dact);
        return sw_linear_backward(x, &b->fc1, dact, k->m[i], k->mg[i]);
    }
    }
}

/* dres: the block output's gradient in, its input's out */
static void backward(void *mp, int step, int l, sw_saved *s, sw_tensor *in, sw_tensor *dres)
{
    model *m = mp;
    sw_ctx *x = &m->x;
    block_params *b = &m->blk[l];
    block_saved *k = s->state;
    (void)step;
    sw_tensor *dmod = sw_scratch(x, "dit_dmod", x->B, CHUNKS * m->h); /* every chunk written below */
    sw_tensor *dbr = sw_scratch(x, "dit_dbranch", x->resid_rows, m->h), *dn = sw_scratch(x, "dit_dn", x->resid_rows, m->h);
    for (int i = BRANCHES - 1; i >= 0; i--) { /* dres: the gradient of branch i's output residual */
        sw_tensor *r = i ? k->res[i - 1] : in;
        sw_gate_backward(x, dres, k->out[i], k->mod, 3 * i + 2, dbr, dmod);
        sw_tensor *dm = branch_backward(m, b, k, i, dbr);
        sw_modulate_backward(x, dm, k->n[i], k->mod, 3 * i, 3 * i + 1, dn, dmod);
        sw_norm_backward(x, &b->norm[i], dn, r, NULL, k->rstd[i], dres, 1); /* + the residual's dres */
    }
    /* the adaLN's gradient of sc, added to the micro-batch's dsc (the blocks' sum) */
    sw_tensor *dsc = sw_adaln_backward(x, &b->ada, dmod, m->sc[x->micro]);
    sw_copy_flat(sw_tensor_whole(dsc, STARPU_R), sw_tensor_whole(m->dsc[x->micro], STARPU_RW), 1);
}

/* what a block sends (the traffic model); the same with or without output: the
 * last gate sends nothing. The K/V projection sends nothing (its gradient's
 * sum over the gradient group is the registry's). */
static void traffic(void *mp, int l, int output, sw_traffic *t)
{
    model *m = mp;
    const sw_ctx *x = &m->x;
    block_params *b = &m->blk[l];
    (void)output;
    for (int i = 0; i < BRANCHES; i++) sw_norm_traffic(x, &b->norm[i], t);
    sw_adaln_traffic(x, &b->ada, t);
    const sw_linear *lin[] = {&b->sqkv, &b->sproj, &b->tqkv, &b->tproj, &b->q, &b->cproj, &b->fc1, &b->fc2};
    for (size_t i = 0; i < sizeof lin / sizeof lin[0]; i++) sw_linear_traffic(x, lin[i], t);
    sw_grid_attention_traffic(x, m->spatial, t);
    sw_grid_attention_traffic(x, m->temporal, t);
}
static const sw_block_ops ops = {keep, forward, backward, traffic, sizeof(block_saved)};

/* before the blocks: the patch embedding plus the positions, and c, sc */
static void embed(void *mp, int step, sw_tensor *x0)
{
    model *m = mp;
    sw_ctx *x = &m->x;
    int k = x->micro;
    (void)step;
    sw_linear_forward(x, &m->patch_emb, m->tokens[k], m->tokens[k], m->emb);
    sw_add(sw_tensor_whole(m->emb, STARPU_R), sw_tensor_whole(m->pos, STARPU_R), sw_tensor_whole(x0, STARPU_W));
    sw_timestep_embedder_forward(x, m->te, m->t[k], m->c[k]);
    sw_silu_forward(x, m->c[k], m->sc[k]);
}
static void embed_backward(void *mp, int step, sw_tensor *dx0)
{
    model *m = mp;
    sw_ctx *x = &m->x;
    int k = x->micro;
    (void)step;
    sw_linear_backward(x, &m->patch_emb, dx0, m->tokens[k], m->tokens[k]); /* its dx (the tokens') unused */
    sw_silu_backward(x, m->c[k], m->dsc[k]); /* dsc[k]: every block's and the final adaLN's, now dc */
    sw_timestep_embedder_backward(x, m->te, m->dsc[k]);
}
/* after the blocks: the final modulated norm, the linear to p p channels, the MSE against eps */
static void head(void *mp, int step, sw_tensor *xL)
{
    model *m = mp;
    sw_ctx *x = &m->x;
    int k = x->micro;
    (void)step;
    sw_norm_forward(x, &m->final_norm, xL, m->nf, NULL, m->nf_rstd);
    sw_adaln_forward(x, &m->final_ada, m->sc[k], m->fmod[k]);
    sw_modulate_forward(x, m->nf, m->fmod[k], 0, 1, m->fm);
    sw_linear_forward(x, &m->final_lin, m->fm, m->fm, m->pred);
    sw_row_mse_forward(x, m->mse, m->pred, m->target[k]);
}
static void head_backward(void *mp, int step, sw_tensor *xL, sw_tensor *dxL)
{
    model *m = mp;
    sw_ctx *x = &m->x;
    int k = x->micro;
    (void)step;
    sw_tensor *dfm = sw_linear_backward(x, &m->final_lin, sw_row_mse_backward(x, m->mse, m->pred, m->target[k]), m->fm, m->fm);
    sw_tensor *dn = sw_scratch(x, "dit_dn", x->resid_rows, m->h), *dfmod = sw_scratch(x, "dit_dfmod", x->B, 2 * m->h);
    sw_modulate_backward(x, dfm, m->nf, m->fmod[k], 0, 1, dn, dfmod);
    /* the final adaLN's part of dsc[k] (zeroed by the driver; the blocks add theirs) */
    sw_copy_flat(sw_tensor_whole(sw_adaln_backward(x, &m->final_ada, dfmod, m->sc[k]), STARPU_R),
                 sw_tensor_whole(m->dsc[k], STARPU_RW), 1);
    sw_norm_backward(x, &m->final_norm, dn, xL, NULL, m->nf_rstd, dxL, 0);
}
static sw_tensor *loss(void *mp) { return sw_row_mse_loss(((model *)mp)->mse); }
static void embed_traffic(void *mp, sw_traffic *t)
{
    model *m = mp;
    sw_linear_traffic(&m->x, &m->patch_emb, t);
    for (int i = 0; i < 2; i++) sw_linear_traffic(&m->x, sw_timestep_embedder_linear(m->te, i), t);
}
static void head_traffic(void *mp, sw_traffic *t)
{
    model *m = mp;
    sw_norm_traffic(&m->x, &m->final_norm, t);
    sw_adaln_traffic(&m->x, &m->final_ada, t);
    sw_linear_traffic(&m->x, &m->final_lin, t);
    sw_row_mse_traffic(&m->x, m->mse, t);
}
/* sc[k] and its gradient, which the driver moves between pipeline stages */
static sw_tensor *conditioning(void *mp, int k, int grad) { return grad ? ((model *)mp)->dsc[k] : ((model *)mp)->sc[k]; }
static const sw_model_ops model_ops = {embed, embed_backward, head, head_backward, loss, embed_traffic, head_traffic,
                                       conditioning};

/* ---- deterministic numbers: a counter-based normal generator (splitmix64, Box-Muller) ---- */
static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static double uniform(uint64_t seed, uint64_t a, uint64_t b, uint64_t i) /* in (0, 1) */
{
    return ((double)(mix(mix(mix(seed ^ a) ^ b) ^ i) >> 11) + 0.5) / 9007199254740992.0;
}
float sw_dit_normal(uint64_t seed, uint64_t a, uint64_t b, uint64_t i)
{
    double u1 = uniform(seed, a, b, 2 * i), u2 = uniform(seed, a, b, 2 * i + 1);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
/* a_t of DDPM's linear schedule: prod_{s <= t} (1 - beta_s), beta_s = 1e-4 + (0.02 - 1e-4) s / 999 */
double sw_dit_alpha_bar(int t)
{
    double a = 1.0;
    for (int s = 0; s <= t; s++) a *= 1.0 - (1e-4 + (0.02 - 1e-4) * s / 999.0);
    return a;
}
/* sin-cos features of a position into h columns: [sin(p w_i) | cos(p w_i)], w_i = 10000^(-i / (h/2)) */
static void sincos_add(float *dst, int64_t h, double pos)
{
    int64_t half = h / 2;
    for (int64_t i = 0; i < half; i++) {
        double w = pow(10000.0, -(double)i / (double)half);
        dst[i] += (float)sin(pos * w), dst[half + i] += (float)cos(pos * w);
    }
}

/* the model's own tensors of main() (fp32), from their shapes: pos, emb, nf, fm [l, h], nf_rstd [l, 1],
 * pred [l, ppc]; per micro-batch tokens, target [l, ppc], t [B, 1], cond [cond_len B, cond_dim],
 * c, sc, dsc [B, h], fmod [B, 2 h] */
static double own_bytes(const sw_ctx *x, int64_t h, int64_t ppc, int64_t cond_len, int64_t cond_dim, int micro)
{
    const double l = (double)x->resid_rows, B = (double)x->B;
    return 4.0 * (l * (4.0 * h + 1 + ppc) + micro * (2.0 * l * ppc + B + cond_len * B * cond_dim + 5.0 * B * h));
}


void sw_dit_config_default(sw_dit_config *c)
{
    *c = (sw_dit_config){.frames = 4, .height = 8, .width = 8, .channels = 4, .patch = 2, .hidden = 32, .heads = 4,
                         .layers = 2, .cond_len = 6, .cond_dim = 16, .batch = 4, .micro = 1, .tp = 1, .ulysses = 1,
                         .ring = 1, .dp = 1, .pp_virtual = 1, .recompute = SW_RECOMPUTE_SELECTIVE,
                         .recompute_every = 1, .dtype = SW_F32, .lr = 1e-3f, .init_std = 0.02f, .seed = 1234};
}

/* the DiT's layer context and parameter registry, from its config */
static sw_ctx_config ctx_config(const sw_dit_config *c)
{
    const int S = (c->height / c->patch) * (c->width / c->patch);
    return (sw_ctx_config){.seq = c->frames * S, .batch = c->batch, .tp = c->tp, .sp = c->sp, .ulysses = c->ulysses,
                           .ring = c->ring, .zigzag = 0 /* grid attention: whole frames */, .dp = c->dp,
                           .grad_accum = c->micro, .tiles = 2, .seed = c->seed, .dropout = 0.0f};
}

int sw_dit_config_check(const sw_dit_config *c, int pp, char *msg, size_t n)
{
    SW_RULE(c->frames > 0 && c->height > 0 && c->width > 0 && c->channels > 0 && c->patch > 0 && c->heads > 0 &&
            c->layers > 0 && c->cond_len > 0 && c->cond_dim > 0 && c->batch > 0 && c->micro > 0 && pp > 0,
            "frames (%d), height (%d), width (%d), channels (%d), patch (%d), heads (%d), layers (%d), cond-len (%d), "
            "cond-dim (%d), batch (%d), micro (%d) and pp (%d) must be positive", c->frames, c->height, c->width,
            c->channels, c->patch, c->heads, c->layers, c->cond_len, c->cond_dim, c->batch, c->micro, pp);
    SW_RULE(c->tp > 0 && c->ulysses > 0 && c->ring > 0 && c->dp > 0 && c->pp_virtual > 0,
            "tp (%d), ulysses (%d), ring (%d), dp (%d) and pp-virtual (%d) must be at least 1", c->tp, c->ulysses,
            c->ring, c->dp, c->pp_virtual);
    const int cp = c->ulysses * c->ring, H = c->height, W = c->width, P = c->patch, S = (H / P) * (W / P);
    SW_RULE(H % P == 0 && W % P == 0, "--patch (%d) must divide --height (%d) and --width (%d)", P, H, W);
    SW_RULE(c->frames % cp == 0, "--frames (%d) must be divisible by ulysses x ring (%d)", c->frames, cp);
    SW_RULE(S % cp == 0, "patches per frame ((%d/%d) x (%d/%d) = %d) must be divisible by ulysses x ring (%d)", H, P, W,
            P, S, cp);
    SW_RULE(c->hidden % c->heads == 0 && c->hidden % 2 == 0, "--heads (%d) must divide --hidden (%d), and --hidden be even",
            c->heads, c->hidden);
    SW_RULE(c->heads % c->tp == 0, "--heads (%d) must be divisible by --tp (%d)", c->heads, c->tp);
    SW_RULE(c->micro <= MAX_MICRO && c->batch % (c->dp * c->micro) == 0,
            "--micro (%d, at most %d) times --dp (%d) must divide --batch (%d)", c->micro, MAX_MICRO, c->dp, c->batch);
    SW_RULE(c->layers <= MAX_LAYERS, "the DiT holds at most %d blocks (layers = %d)", MAX_LAYERS, c->layers);
    SW_RULE(c->zero >= 0 && c->zero <= 3, "--zero must be 0, 1, 2 or 3 (zero = %d)", c->zero);
    SW_RULE(c->recompute >= SW_RECOMPUTE_NONE && c->recompute <= SW_RECOMPUTE_FULL,
            "recompute must be none, selective or full (recompute = %d)", c->recompute);
    SW_RULE(c->recompute_every > 0, "--recompute-every must be at least 1 (recompute-every = %d)", c->recompute_every);
    /* the layer context's rules (its rows, tiles and sp), as sw_ctx_init judges them */
    sw_ctx_config xc = ctx_config(c);
    if (sw_ctx_config_check(&xc, msg, n) != 0) return -1;
    /* the pipeline's: whole chunks of blocks per stage, a 1F1B schedule that fits (sw_pipeline_create's) */
    const int V = c->pp_virtual > 1 ? c->pp_virtual : 1;
    SW_RULE(c->layers % (pp * V) == 0,
            "the blocks (%d) must be divisible by the pipeline stages times their chunks (pp %d x %d)", c->layers, pp, V);
    if (sw_schedule_check(pp, V, c->micro, 0, 0, msg, n) != 0) return -1;
    return 0;
}

/* The model described -- registry filled, layers configured, the blocks' config -- nothing allocated (create:
 * 0, no tensor is made: the memory model of a layout, sw_dit_plan_rank); create 1: the timestep embedder's
 * tensors made (sw_dit_create, which allocates the rest). */
static model *described(const sw_dit_config *c, sw_comm *comm, int create)
{
    const int H = c->height, W = c->width, C = c->channels, P = c->patch, hidden = c->hidden;
    const int heads = c->heads, layers = c->layers, cond_len = c->cond_len, cond_dim = c->cond_dim, micro = c->micro;
    const int S = (H / P) * (W / P), ppc = P * P * C, cp = c->ulysses * c->ring;
    const float std = c->init_std;
    const uint64_t seed = c->seed;
    if (layers > MAX_LAYERS || micro > MAX_MICRO)
        sw_usage_error("the DiT holds at most %d blocks (layers = %d) and %d micro-batches (micro = %d)", MAX_LAYERS,
                       layers, MAX_MICRO, micro);
    sw_ctx_config xc = ctx_config(c);
    sw_params_config pc = {.seed = seed, .tiles = 2, .dtype = c->dtype, .grad_accum = micro, .bucket_mb = 25.0f,
                           .zero = c->zero, .grad_group = cp > 1 ? SW_GROUP_SP_DP : SW_GROUP_DP,
                           .lr = c->lr, .beta1 = 0.9f, .beta2 = 0.999f, .adam_eps = 1e-8f, .weight_decay = 0.01f,
                           .clip_grad = 1.0f, .pp_chunks = c->pp_virtual};
    model *m = calloc(1, sizeof *m);
    if (!m) sw_usage_error("out of memory");
    m->cfg = *c;
    m->h = hidden, m->ppc = ppc, m->cond_dim = cond_dim, m->heads = heads, m->layers = layers, m->cond_len = cond_len;
    m->p = sw_params_new(&pc, comm);
    sw_ctx_init(&m->x, &xc, comm, m->p);
    sw_ctx *x = &m->x;
    const int d = hidden / heads, t = x->tp.t, r = x->tp.rank, aq = heads / t;
    m->spatial = sw_grid_attention_create(x, SW_AXIS_SPATIAL, c->frames, S, heads, d);
    m->temporal = sw_grid_attention_create(x, SW_AXIS_TEMPORAL, c->frames, S, heads, d);
    m->cross = sw_cross_attention_create(x, heads, d, cond_len);
    /* a QKV weight [3h, h]: this TP rank's q, k and v heads */
    sw_slice qkv_slice = {0};
    if (t > 1)
        qkv_slice = (sw_slice){3, 0, {r * aq * d, hidden + r * aq * d, 2 * hidden + r * aq * d}, {aq * d, aq * d, aq * d}, {1, 1, 1}};
    /* before the blocks (the default unit): patch embedding, timestep embedder */
    m->patch_emb = sw_linear_add(x, "patch_emb", SW_LINEAR_REPLICATED, ppc, hidden, 1, std, NULL, 0, NULL);
    m->te = create ? sw_timestep_embedder_create(x, "t_emb", FREQ, hidden, 10000.0f, std)
                   : sw_timestep_embedder_describe(x, "t_emb", FREQ, hidden, 10000.0f, std);
    for (int l = 0; l < layers; l++) {
        char n[14][24];
        static const char *what[14] = {"s_norm", "t_norm", "c_norm", "m_norm", "ada", "s_qkv", "s_proj", "t_qkv",
                                       "t_proj", "c_q", "c_kv", "c_proj", "fc1", "fc2"};
        for (int i = 0; i < 14; i++) snprintf(n[i], sizeof n[i], "h%d.%s", l, what[i]);
        sw_params_set_unit(m->p, l);
        block_params *b = &m->blk[l];
        for (int i = 0; i < BRANCHES; i++) b->norm[i] = sw_norm_add(x, n[i], hidden, 1, 1e-6f);
        b->ada = sw_adaln_add(x, n[4], hidden, hidden, CHUNKS);
        b->sqkv = sw_linear_add(x, n[5], SW_LINEAR_COLUMN, hidden, 3 * hidden, 0, std, &qkv_slice, 0, NULL);
        b->sproj = sw_linear_add(x, n[6], SW_LINEAR_ROW, hidden, hidden, 1, std, NULL, 0, NULL);
        b->tqkv = sw_linear_add(x, n[7], SW_LINEAR_COLUMN, hidden, 3 * hidden, 0, std, &qkv_slice, 0, NULL);
        b->tproj = sw_linear_add(x, n[8], SW_LINEAR_ROW, hidden, hidden, 1, std, NULL, 0, NULL);
        b->q = sw_linear_add(x, n[9], SW_LINEAR_COLUMN, hidden, hidden, 0, std, NULL, 0, NULL);
        /* K | V of the conditioning [2h, cond_dim]: each TP rank its 1/t of K and of V (its heads) */
        b->kv = sw_cross_kv_add(x, n[10], cond_dim, hidden, 0, std);
        b->cproj = sw_linear_add(x, n[11], SW_LINEAR_ROW, hidden, hidden, 1, std, NULL, 0, NULL);
        b->fc1 = sw_linear_add(x, n[12], SW_LINEAR_COLUMN, hidden, 4 * hidden, 1, std, NULL, 0, NULL);
        b->fc2 = sw_linear_add(x, n[13], SW_LINEAR_ROW, 4 * hidden, hidden, 1, std, NULL, 0, NULL);
    }
    sw_params_set_unit(m->p, SW_UNIT_AFTER);
    m->final_norm = sw_norm_add(x, "final_norm", hidden, 1, 1e-6f);
    m->final_ada = sw_adaln_add(x, "final_ada", hidden, hidden, 2);
    m->final_lin = sw_linear_add(x, "final", SW_LINEAR_REPLICATED, hidden, ppc, 1, std, NULL, 0, NULL);
    m->bc = (sw_blocks_config){.layers = layers, .rows = x->resid_rows, .cols = hidden, .recompute = c->recompute,
                               .recompute_every = c->recompute_every, .offload = c->offload};
    return m;
}

sw_dit *sw_dit_create(const sw_dit_config *c, sw_comm *comm)
{
    const int hidden = c->hidden, layers = c->layers, cond_len = c->cond_len, cond_dim = c->cond_dim, micro = c->micro;
    const int S = (c->height / c->patch) * (c->width / c->patch), seq = c->frames * S, batch = c->batch;
    const float adaln_std = c->adaln_std;
    const uint64_t seed = c->seed;
    model *m = described(c, comm, 1);
    sw_ctx *x = &m->x;
    const int64_t ppc = m->ppc;
    m->mse = sw_row_mse_create(x, ppc);
    sw_params_allocate(m->p);
    if (adaln_std > 0) /* every adaLN weight N(0, adaln_std), the same on every rank (replicated) */
        for (int l = 0; l <= layers; l++) {
            const sw_adaln *a = l < layers ? &m->blk[l].ada : &m->final_ada;
            sw_tensor *v = sw_params_value(m->p, a->lin.w);
            if (!v) continue; /* another unit's, not held here */
            int64_t rows = (int64_t)a->chunks * hidden, first = sw_params_value_first_row(m->p, a->lin.w);
            float *w = malloc(sizeof(float) * (size_t)(rows * hidden));
            if (!w) sw_usage_error("out of memory");
            for (int64_t i = 0; i < rows * hidden; i++) w[i] = adaln_std * sw_dit_normal(seed, 7, (uint64_t)l, (uint64_t)i);
            sw_tensor_write_host(v, w + first * hidden);
            free(w);
        }
    m->pipe = sw_pipeline_create(x, &m->bc, &ops, &model_ops, m, 0);
    const int64_t l = x->resid_rows, B = x->B;
    m->pos = sw_tensor_new2d("pos", SW_F32, l, hidden);
    m->emb = sw_tensor_new2d("patch_embedded", SW_F32, l, hidden);
    m->nf = sw_tensor_new2d("final_norm_out", SW_F32, l, hidden), m->nf_rstd = sw_tensor_new2d("final_norm_rstd", SW_F32, l, 1);
    m->fm = sw_tensor_new2d("final_mod", SW_F32, l, hidden), m->pred = sw_tensor_new2d("pred", SW_F32, l, ppc);
    for (int k = 0; k < micro; k++) {
        m->tokens[k] = sw_tensor_new2d("tokens", SW_F32, l, ppc), m->target[k] = sw_tensor_new2d("eps", SW_F32, l, ppc);
        m->t[k] = sw_tensor_new2d("t", SW_F32, B, 1), m->cond[k] = sw_tensor_new2d("cond", SW_F32, (int64_t)cond_len * B, cond_dim);
        m->c[k] = sw_tensor_new2d("c", SW_F32, B, hidden), m->sc[k] = sw_tensor_new2d("silu_c", SW_F32, B, hidden);
        m->dsc[k] = sw_tensor_new2d("dsilu_c", SW_F32, B, hidden), m->fmod[k] = sw_tensor_new2d("final_mod_c", SW_F32, B, 2 * hidden);
    }
    /* the fixed position embedding, global rows [s, b]: position p = f S + s, the patch index s and the frame f */
    float *pos = calloc((size_t)((int64_t)seq * batch * hidden), sizeof(float));
    if (!pos) sw_usage_error("out of memory");
    for (int p = 0; p < seq; p++)
        for (int b = 0; b < batch; b++) {
            sincos_add(pos + ((int64_t)p * batch + b) * hidden, hidden, (double)(p % S));
            sincos_add(pos + ((int64_t)p * batch + b) * hidden, hidden, (double)(p / S));
        }
    sw_ctx_load_floats(x, 0, pos, hidden, m->pos); /* the same for every micro-batch */
    free(pos);
    return m;
}

void sw_dit_load_cond(sw_dit *m, const float *cond)
{
    for (int k = 0; k < m->cfg.micro; k++) sw_ctx_load_cond(&m->x, k, cond, m->cond_len, m->cond_dim, m->cond[k]);
}

void sw_dit_load_micro_batch(sw_dit *m, int k, const float *tokens, const float *target, const float *t)
{
    sw_ctx_load_floats(&m->x, k, tokens, m->ppc, m->tokens[k]);
    sw_ctx_load_floats(&m->x, k, target, m->ppc, m->target[k]);
    sw_ctx_load_seq_targets(&m->x, k, t, m->t[k]);
}

void sw_dit_noise(uint64_t seed, int step, int batch, int64_t vol, const float *x0, float *eps, float *xt, float *t)
{
    for (int b = 0; b < batch; b++) {
        int ti = (int)((mix(mix(seed ^ 0x7473ULL) ^ (uint64_t)step) ^ mix((uint64_t)b)) % 1000); /* t in 0 .. 999 */
        double a = sw_dit_alpha_bar(ti);
        t[b] = (float)ti;
        for (int64_t i = 0; i < vol; i++) {
            eps[b * vol + i] = sw_dit_normal(seed, (uint64_t)step, (uint64_t)b, (uint64_t)i);
            xt[b * vol + i] = (float)(sqrt(a) * x0[b * vol + i] + sqrt(1.0 - a) * eps[b * vol + i]);
        }
    }
}

void sw_dit_step(sw_dit *m, int step) { sw_pipeline_step(m->pipe, step); }
sw_tensor *sw_dit_loss(sw_dit *m) { return sw_pipeline_loss(m->pipe); }
sw_params *sw_dit_params(sw_dit *m) { return m->p; }
sw_ctx *sw_dit_ctx(sw_dit *m) { return &m->x; }
sw_pipeline *sw_dit_pipeline(sw_dit *m) { return m->pipe; }

int sw_dit_checkpoint_fields(const sw_dit *m, sw_ckpt_field *f)
{
    const sw_dit_config *c = &m->cfg;
    const sw_ckpt_field all[] = {{"frames", c->frames}, {"height", c->height}, {"width", c->width}, {"patch", c->patch},
                                 {"channels", c->channels}, {"heads", c->heads}, {"layers", c->layers},
                                 {"cond-len", c->cond_len}};
    memcpy(f, all, sizeof all);
    return (int)(sizeof all / sizeof all[0]);
}

double sw_dit_blocks_bytes(sw_dit *m) { return sw_pipeline_blocks_bytes(&m->x, &m->bc, &ops, m, 0); }

double sw_dit_bytes(sw_dit *m)
{
    const sw_ctx *x = &m->x;
    return sw_params_bytes(m->p) + sw_dit_blocks_bytes(m) + own_bytes(x, m->h, m->ppc, m->cond_len, m->cond_dim, m->cfg.micro) +
           sw_timestep_embedder_bytes(x, FREQ, m->h) + sw_row_mse_bytes(x, m->ppc) +
           (sw_params_runs_unit(m->p, SW_UNIT_AFTER) ? 0 : 4.0); /* the loss the last stage sends */
}

double sw_dit_plan_rank(const sw_dit_config *c, int pp, int rank, double *state, double *buckets, sw_traffic *t)
{
    sw_mesh_dims d = {c->tp, c->ulysses, c->ring, c->dp, pp};
    const int world = c->tp * c->ulysses * c->ring * c->dp * pp;
    sw_mesh *mesh = sw_mesh_virtual(&d, rank);
    /* one rank: no comm, as dit_train creates it */
    sw_comm *comm = world > 1 ? sw_comm_virtual(mesh) : NULL;
    model *m = described(c, comm, 0);
    const double bytes = sw_dit_bytes(m); /* what sw_dit_create would allocate (reads only the description) */
    if (state) *state = sw_params_bytes(m->p);
    if (buckets) *buckets = sw_params_buckets_bytes(m->p);
    if (t) { /* sw_pipeline_traffic's sum for this rank's stage, on the described model */
        memset(t, 0, sizeof *t);
        const int stage = sw_mesh_stage(mesh), V = c->pp_virtual > 1 ? c->pp_virtual : 1, K = c->micro;
        const int first = stage == 0, last = stage == pp - 1;
        if (first) embed_traffic(m, t);
        for (int k = 0; k < K; k++) {
            if (first) sw_params_gather_traffic(m->p, SW_UNIT_BEFORE, 0, t);
            if (first) sw_params_gather_traffic(m->p, SW_UNIT_BEFORE, 1, t);
            if (last) sw_params_gather_traffic(m->p, SW_UNIT_AFTER, 1, t);
        }
        const double boundary = sw_comm_bytes(comm, SW_GROUP_PP, SW_COLL_SEND, m->bc.rows, m->bc.cols);
        for (int v = 0; v < V; v++) {
            const int j = v * pp + stage;
            sw_blocks_config b = m->bc;
            b.count = c->layers / (pp * V);
            b.first = j * b.count;
            b.params = m->p;
            sw_blocks_traffic(&b, &ops, m, t);
            if (j < pp * V - 1) t->forward[SW_GROUP_PP] += K * boundary;
            if (j > 0) t->backward[SW_GROUP_PP] += K * boundary;
        }
        if (last) head_traffic(m, t), t->backward[SW_GROUP_PP] += (pp - 1) * sw_comm_bytes(comm, SW_GROUP_PP, SW_COLL_SEND, 1, 1);
        /* the conditioning sc [B, h] to every other stage, its gradient back (sw_model_ops.conditioning) */
        const double cond = pp > 1 ? sw_comm_bytes(comm, SW_GROUP_PP, SW_COLL_SEND, m->x.B, m->h) : 0;
        for (int k = 0; k < K && pp > 1; k++) {
            if (first) t->forward[SW_GROUP_PP] += (pp - 1) * cond;
            else t->backward[SW_GROUP_PP] += cond;
        }
        sw_params_traffic(m->p, t);
    }
    sw_timestep_embedder_destroy(m->te);
    sw_grid_attention_destroy(m->spatial), sw_grid_attention_destroy(m->temporal), sw_cross_attention_destroy(m->cross);
    sw_ctx_destroy(&m->x), sw_params_destroy(m->p), free(m);
    sw_comm_destroy(comm);
    sw_mesh_destroy(mesh);
    return bytes;
}

sw_block_memory sw_dit_saved_bytes(sw_dit *m, int l)
{
    return sw_blocks_saved_bytes(sw_pipeline_chunk(m->pipe, sw_params_unit_chunk(m->p, l)), l);
}

void sw_dit_destroy(sw_dit *m)
{
    if (!m) return;
    for (int k = 0; k < m->cfg.micro; k++) {
        sw_tensor *all[] = {m->tokens[k], m->target[k], m->t[k], m->cond[k], m->c[k], m->sc[k], m->dsc[k], m->fmod[k]};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) sw_tensor_free(all[i]);
    }
    sw_tensor_free(m->pos), sw_tensor_free(m->emb), sw_tensor_free(m->nf), sw_tensor_free(m->nf_rstd);
    sw_tensor_free(m->fm), sw_tensor_free(m->pred);
    sw_row_mse_destroy(m->mse), sw_timestep_embedder_destroy(m->te), sw_pipeline_destroy(m->pipe);
    sw_grid_attention_destroy(m->spatial), sw_grid_attention_destroy(m->temporal), sw_cross_attention_destroy(m->cross);
    sw_ctx_destroy(&m->x), sw_params_destroy(m->p), free(m);
}
