/* A spatial-temporal video diffusion transformer (Open-Sora's STDiT) from the
 * public headers alone, trained on deterministic synthetic latents:
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
 * Every strategy comes from the layers and the step driver (sw_pipeline):
 *   mpirun -np 2 dit_train --ulysses 2     (spatial blocks on a frame split,
 *                                           temporal ones after the all-to-all)
 *   mpirun -np 4 dit_train --tp 2 --sp --ulysses 2 --micro 2 --recompute full
 *   mpirun -np 2 dit_train --pp 2 --micro 4  (pipeline stages: the driver sends
 *                                           sc from the first stage to the others
 *                                           and their parts of its gradient back)
 * Flags: --help. --export DIR (1 rank): the initial parameters, the batch,
 * the losses and the step-1 gradients for tests/torch_dit.py. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <starweave.h>
#include "cli.h"

enum { MAX_LAYERS = 16, MAX_MICRO = 64, FREQ = 256, CHUNKS = 12, BRANCHES = 4 };
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

typedef struct model {
    sw_ctx x;
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
} model;

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
    int64_t T = x->T, l = x->Tl, h = m->h, f = 4 * h / x->tp.t;
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
    sw_tensor *datt = sw_scratch(x, "dit_datt", x->T, ad);
    switch (i) {
    case SPATIAL:
    case TEMPORAL: {
        sw_grid_saved *g = i == SPATIAL ? &k->sa : &k->ta;
        sw_tensor *dqkv = sw_scratch(x, "dit_dqkv", x->T, 3 * ad);
        sw_linear_row_backward(x, i == SPATIAL ? &b->sproj : &b->tproj, dout, g->att, datt);
        sw_grid_attention_backward(x, i == SPATIAL ? m->spatial : m->temporal, g, datt, dqkv);
        return sw_linear_backward(x, i == SPATIAL ? &b->sqkv : &b->tqkv, dqkv, k->m[i], k->mg[i]);
    }
    case CROSS: {
        sw_tensor *dq = sw_scratch(x, "dit_dq", x->T, ad), *dkv = sw_scratch(x, "dit_dkv", k->ca.kv->rows, 2 * ad);
        sw_linear_row_backward(x, &b->cproj, dout, k->ca.att, datt);
        sw_cross_attention_backward(x, m->cross, &k->ca, datt, dq, dkv);
        /* dWkv: this rank's queries' part, summed by the registry; the conditioning is data (no dcond) */
        sw_cross_kv_backward(x, &b->kv, m->cond[x->micro], dkv, NULL);
        return sw_linear_backward(x, &b->q, dq, k->m[i], k->mg[i]);
    }
    default: {
        sw_tensor *dact = sw_scratch(x, "dit_dact", x->T, k->a->cols);
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
    sw_tensor *dbr = sw_scratch(x, "dit_dbranch", x->Tl, m->h), *dn = sw_scratch(x, "dit_dn", x->Tl, m->h);
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
    sw_tensor *dn = sw_scratch(x, "dit_dn", x->Tl, m->h), *dfmod = sw_scratch(x, "dit_dfmod", x->B, 2 * m->h);
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

/* ---- deterministic data: a counter-based normal generator (splitmix64, Box-Muller) ---- */
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
static float normal(uint64_t seed, uint64_t a, uint64_t b, uint64_t i)
{
    double u1 = uniform(seed, a, b, 2 * i), u2 = uniform(seed, a, b, 2 * i + 1);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
/* a_t of DDPM's linear schedule: prod_{s <= t} (1 - beta_s), beta_s = 1e-4 + (0.02 - 1e-4) s / 999 */
static double alpha_bar(int t)
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

/* ---- the memory report: the model's bytes beside StarPU's allocator ---- */
/* Main-RAM bytes StarPU's allocator counts once every submitted task has run:
 * the home buffer of every tensor is starpu_malloc'ed with STARPU_MALLOC_COUNT
 * (sw_init sets a main-RAM limit, under which StarPU counts; an offload budget
 * leaves the home buffers out), and StarPU's own buffers are counted too. */
static double ram_used(void)
{
    sw_node_memory ram;
    starpu_task_wait_for_all();
    return sw_memory_nodes(&ram, 1) == 1 ? ram.used : 0; /* node 0: main RAM */
}
/* the model's own tensors of main() (fp32), from their shapes: pos, emb, nf, fm [l, h], nf_rstd [l, 1],
 * pred [l, ppc]; per micro-batch tokens, target [l, ppc], t [B, 1], cond [cond_len B, cond_dim],
 * c, sc, dsc [B, h], fmod [B, 2 h] */
static double own_bytes(const sw_ctx *x, int64_t h, int64_t ppc, int64_t cond_len, int64_t cond_dim, int micro)
{
    const double l = (double)x->Tl, B = (double)x->B;
    return 4.0 * (l * (4.0 * h + 1 + ppc) + micro * (2.0 * l * ppc + B + cond_len * B * cond_dim + 5.0 * B * h));
}

/* ---- --export DIR (one rank): raw little-endian row-major files and an index ---- */
static FILE *xindex;
static const char *xdir;
static void export_raw(const char *kind, const char *name, int64_t rows, int64_t cols, const void *data)
{
    char file[128], path[1200];
    snprintf(file, sizeof file, "%s.%s.f32", kind, name);
    snprintf(path, sizeof path, "%s/%s", xdir, file);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, sizeof(float), (size_t)(rows * cols), f) != (size_t)(rows * cols) || fclose(f)) {
        fprintf(stderr, "dit_train: --export: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
    fprintf(xindex, "%s %s %lld %lld %s\n", kind, name, (long long)rows, (long long)cols, file);
}

/* the merged trace of every rank, its Paje twin, the overlap per rank and step (collective) */
static void write_trace(const char *path)
{
    char paje[1100], overlap[1100];
    snprintf(paje, sizeof paje, "%s.paje", path), snprintf(overlap, sizeof overlap, "%s.overlap.json", path);
    if (sw_trace_write(path, paje, overlap) != 0) {
        if (sw_rank() == 0) fprintf(stderr, "dit_train: could not write the trace %s\n", path);
        return;
    }
    sw_overlap rows[256];
    int n = sw_rank() == 0 ? sw_trace_overlap(rows, 256) : 0;
    for (int i = 0; i < n && i < 256; i++)
        printf("overlap: rank %d step %d wall %.1f ms compute %.1f ms comm %.1f ms overlap %.1f ms idle %.1f ms (comm hidden %.1f%%)\n",
               rows[i].rank, rows[i].step, rows[i].wall_us / 1e3, rows[i].compute_us / 1e3, rows[i].comm_us / 1e3,
               rows[i].overlap_us / 1e3, rows[i].idle_us / 1e3, 100 * rows[i].overlap_share);
    if (sw_rank() == 0) printf("dit_train: trace in %s (Chrome/Perfetto JSON), %s, %s\n", path, paje, overlap);
}

int main(int argc, char **argv)
{
    int F, H, W, C, P, hidden, heads, layers, cond_len, cond_dim, batch, steps, micro, tp, sp = 0, U, R, dp, every, pp, pp_virtual;
    int zero, rec, bf16, seed_flag, counters = 0, memory = 0, save_every, offload = 0, budget;
    float lr, adaln_std, std;
    const char *trace = NULL, *save = NULL, *resume = NULL;
    const cli_flag flags[] = {
        CLI_HEADING("model (the sequence: frames x patches, split over ulysses x ring ranks in whole frames)"),
        CLI_INT("--frames", &F, "4", 1, CLI_INT_MAX, "F", "latent frames"),
        CLI_INT("--height", &H, "8", 1, CLI_INT_MAX, "H", "latent height"),
        CLI_INT("--width", &W, "8", 1, CLI_INT_MAX, "W", "latent width"),
        CLI_INT("--channels", &C, "4", 1, CLI_INT_MAX, "C", "latent channels"),
        CLI_INT("--patch", &P, "2", 1, CLI_INT_MAX, "P", "patch size, must divide --height and --width"),
        CLI_INT("--hidden", &hidden, "32", 2, CLI_INT_MAX, "h", "hidden size, even, divisible by --heads"),
        CLI_INT("--heads", &heads, "4", 1, CLI_INT_MAX, "A", "attention heads"),
        CLI_INT("--layers", &layers, "2", 1, MAX_LAYERS, "L", "blocks"),
        CLI_INT("--cond-len", &cond_len, "6", 1, CLI_INT_MAX, "L", "conditioning positions (cross-attention's keys)"),
        CLI_INT("--cond-dim", &cond_dim, "16", 1, CLI_INT_MAX, "D", "conditioning features"),
        CLI_FLOAT("--init-std", &std, "0.02", 0, CLI_NO_MAX, "S", "the weights' N(0, S)"),
        CLI_FLOAT("--adaln-std", &adaln_std, "0", 0, CLI_NO_MAX, "S", "the adaLN weights N(0, S) instead of adaLN-Zero's zeros\n"
                  "(tests)"),
        CLI_CHOICE("--dtype", &bf16, "fp32", "fp32|bf16",
                   "bf16: the linears' GEMMs on bf16 operands (fp32 accumulation,\n"
                   "fp32 master weights)"),
        CLI_HEADING("training"),
        CLI_INT("--batch", &batch, "4", 1, CLI_INT_MAX, "B", "samples per step"),
        CLI_INT("--steps", &steps, "10", 1, CLI_INT_MAX, "N", "training steps; prints the loss per step, then the last\n"
                "step's gradients (grad NAME sumsq abssum)"),
        CLI_FLOAT("--lr", &lr, "1e-3", 0, CLI_NO_MAX, "LR", "AdamW learning rate"),
        CLI_INT("--seed", &seed_flag, "1234", 0, CLI_INT_MAX, "S", "seed of the init and the data"),
        CLI_HEADING("parallelism (launch with mpirun -np the product of the degrees)"),
        CLI_INT("--tp", &tp, "1", 1, CLI_INT_MAX, "T", "tensor-parallel degree, must divide --heads"),
        CLI_BOOL("--sp", &sp, "sequence parallelism (with --tp)"),
        CLI_INT("--ulysses", &U, "1", 1, CLI_INT_MAX, "U", "DeepSpeed-Ulysses degree"),
        CLI_INT("--ring", &R, "1", 1, CLI_INT_MAX, "R", "Ring attention degree"),
        CLI_INT("--dp", &dp, "1", 1, CLI_INT_MAX, "D", "data-parallel degree"),
        CLI_INT("--zero", &zero, "0", 0, 3, "N", "ZeRO stage over dp (and ulysses x ring)"),
        CLI_INT("--pp", &pp, "1", 1, CLI_INT_MAX, "P", "pipeline stages of layers / P blocks, 1F1B's in-flight quota over\n"
                "the --micro K micro-batches"),
        CLI_INT("--pp-virtual", &pp_virtual, "1", 1, CLI_INT_MAX, "V", "interleaved chunks per stage"),
        CLI_INT("--micro", &micro, "1", 1, CLI_INT_MAX, "K", "micro-batches per step; K x dp must divide --batch"),
        CLI_HEADING("activation memory"),
        CLI_CHOICE("--recompute", &rec, "selective", "none|selective|full", "what backward recomputes"),
        CLI_INT("--recompute-every", &every, "1", 1, CLI_INT_MAX, "K", "full: keep the input of every K-th block"),
        CLI_BOOL("--offload", &offload, "each block's saved set to the offload node after its forward, back\n"
                 "for its backward (with --recompute full: the kept block inputs,\n"
                 "Open-Sora's checkpoint offload)"),
        CLI_INT("--offload-budget-mb", &budget, "0", 0, CLI_INT_MAX, "N", "with --offload, the MiB of main RAM StarPU may fill\n"
                "(0: no limit)"),
        CLI_HEADING("reports, checkpoints"),
        CLI_BOOL("--counters", &counters, "the traffic model beside the bytes sent, and the counters of what ran"),
        CLI_BOOL("--memory-report", &memory, "per rank the whole model's bytes from the shapes beside what\n"
                 "StarPU's allocator counts in main RAM, at creation and what the steps\n"
                 "added (the layers' scratch); per rank and block the saved activations,\n"
                 "the memory model's and the registered tensors' bytes; the blocks', the\n"
                 "registry's and the scratch's bytes; per StarPU memory node the peak and\n"
                 "the bytes moved"),
        CLI_STRING("--trace", &trace, NULL, "FILE", "every task and request of every rank, FILE (Chrome/Perfetto\n"
                   "JSON), FILE.paje, FILE.overlap.json; prints the overlap of\n"
                   "communication with compute per rank and step"),
        CLI_STRING("--save", &save, NULL, "DIR", "a checkpoint after the last step (and every --save-every N steps)"),
        CLI_INT("--save-every", &save_every, "0", 0, CLI_INT_MAX, "N", "also every N steps (0: only at the end)"),
        CLI_STRING("--resume", &resume, NULL, "DIR", "continue after DIR's latest checkpoint (the same model; another\n"
                   "layout is re-sharded; bit for bit under the same one: the data are\n"
                   "functions of the seed and the step)"),
        CLI_STRING("--export", &xdir, NULL, "DIR", "(1 rank) what tests/torch_dit.py checks"),
        CLI_END};
    cli_parse("dit_train", "[mpirun -np N] dit_train [options]",
              "A spatial-temporal video diffusion transformer (Open-Sora's STDiT) on synthetic latents.\n", flags, argc, argv);
    const uint64_t seed = (uint64_t)seed_flag;
    sw_options opt;
    sw_options_default(&opt);
    opt.offload = offload; /* an offload memory node for the blocks' saved sets */
    opt.offload_budget_mb = budget; /* main RAM StarPU may fill (0: no limit) */
    if (sw_init(&argc, &argv, &opt) != 0) return 1;
    /* every rule before any collective, on every rank (exit 2) */
    const int recompute = sw_recompute_parse((const char *[]){"none", "selective", "full"}[rec]), cp = U * R;
    if (opt.offload_budget_mb && !offload) sw_usage_error("--offload-budget-mb needs --offload");
    if (H % P || W % P) sw_usage_error("--patch (%d) must divide --height (%d) and --width (%d)", P, H, W);
    const int S = (H / P) * (W / P); /* patches per frame */
    if (F % cp) sw_usage_error("--frames (%d) must be divisible by ulysses x ring (%d)", F, cp);
    if (S % cp) sw_usage_error("patches per frame ((%d/%d) x (%d/%d) = %d) must be divisible by ulysses x ring (%d)", H, P, W, P, S, cp);
    if (hidden % heads || hidden % 2) sw_usage_error("--heads (%d) must divide --hidden (%d), and --hidden be even", heads, hidden);
    if (heads % tp) sw_usage_error("--heads (%d) must be divisible by --tp (%d)", heads, tp);
    if (micro > MAX_MICRO || batch % (dp * micro))
        sw_usage_error("--micro (%d, at most %d) times --dp (%d) must divide --batch (%d)", micro, MAX_MICRO, dp, batch);
    if (xdir && sw_world_size() != 1) sw_usage_error("--export runs on one rank (%d)", sw_world_size());
    if (save_every && !save) sw_usage_error("--save-every N needs --save DIR and N >= 0 (%d)", save_every);
    if (xdir && resume) sw_usage_error("--export starts from the initial parameters: not with --resume");
    const int seq = F * S, ppc = P * P * C;
    sw_ctx_config xc = {.seq = seq, .batch = batch, .tp = tp, .sp = sp, .ulysses = U, .ring = R,
                        .zigzag = 0 /* grid attention: whole frames */, .dp = dp, .grad_accum = micro, .tiles = 2,
                        .seed = seed, .dropout = 0.0f};
    sw_mesh *mesh = sw_mesh_create(&(sw_mesh_dims){.tp = tp, .ulysses = U, .ring = R, .dp = dp, .pp = pp});
    sw_comm *world = sw_comm_create(mesh), *comm = sw_world_size() > 1 ? world : NULL; /* NULL: one rank */
    sw_params_config pc = {.seed = seed, .tiles = 2, .dtype = bf16 ? SW_BF16 : SW_F32, .grad_accum = micro, .bucket_mb = 25.0f,
                           .zero = zero, .grad_group = cp > 1 ? SW_GROUP_SP_DP : SW_GROUP_DP,
                           .lr = lr, .beta1 = 0.9f, .beta2 = 0.999f, .adam_eps = 1e-8f, .weight_decay = 0.01f,
                           .clip_grad = 1.0f, .pp_chunks = pp_virtual};
    const double ram_before = memory ? ram_used() : 0; /* what StarPU counts before the model */
    model *m = calloc(1, sizeof *m);
    if (!m) sw_usage_error("out of memory");
    m->h = hidden, m->ppc = ppc, m->cond_dim = cond_dim, m->heads = heads, m->layers = layers, m->cond_len = cond_len;
    m->p = sw_params_new(&pc, comm);
    sw_ctx_init(&m->x, &xc, comm, m->p);
    sw_ctx *x = &m->x;
    const int d = hidden / heads, t = x->tp.t, r = x->tp.rank, aq = heads / t;
    m->spatial = sw_grid_attention_create(x, SW_AXIS_SPATIAL, F, S, heads, d);
    m->temporal = sw_grid_attention_create(x, SW_AXIS_TEMPORAL, F, S, heads, d);
    m->cross = sw_cross_attention_create(x, heads, d, cond_len);
    /* a QKV weight [3h, h]: this TP rank's q, k and v heads */
    sw_shard qkv_shard = {0};
    if (t > 1)
        qkv_shard = (sw_shard){3, 0, {r * aq * d, hidden + r * aq * d, 2 * hidden + r * aq * d}, {aq * d, aq * d, aq * d}, {1, 1, 1}};
    /* before the blocks (the default unit): patch embedding, timestep embedder */
    m->patch_emb = sw_linear_add(x, "patch_emb", SW_LINEAR_REPLICATED, ppc, hidden, 1, std, NULL, 0, NULL);
    m->te = sw_timestep_embedder_create(x, "t_emb", FREQ, hidden, 10000.0f, std);
    for (int l = 0; l < layers; l++) {
        char n[14][24];
        static const char *what[14] = {"s_norm", "t_norm", "c_norm", "m_norm", "ada", "s_qkv", "s_proj", "t_qkv",
                                       "t_proj", "c_q", "c_kv", "c_proj", "fc1", "fc2"};
        for (int i = 0; i < 14; i++) snprintf(n[i], sizeof n[i], "h%d.%s", l, what[i]);
        sw_params_set_unit(m->p, l);
        block_params *b = &m->blk[l];
        for (int i = 0; i < BRANCHES; i++) b->norm[i] = sw_norm_add(x, n[i], hidden, 1, 1e-6f);
        b->ada = sw_adaln_add(x, n[4], hidden, hidden, CHUNKS);
        b->sqkv = sw_linear_add(x, n[5], SW_LINEAR_COLUMN, hidden, 3 * hidden, 0, std, &qkv_shard, 0, NULL);
        b->sproj = sw_linear_add(x, n[6], SW_LINEAR_ROW, hidden, hidden, 1, std, NULL, 0, NULL);
        b->tqkv = sw_linear_add(x, n[7], SW_LINEAR_COLUMN, hidden, 3 * hidden, 0, std, &qkv_shard, 0, NULL);
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
    m->mse = sw_row_mse_create(x, ppc);
    sw_params_allocate(m->p);
    if (adaln_std > 0) /* every adaLN weight N(0, adaln_std), the same on every rank (replicated) */
        for (int l = 0; l <= layers; l++) {
            const sw_adaln *a = l < layers ? &m->blk[l].ada : &m->final_ada;
            sw_tensor *v = sw_params_value(m->p, a->lin.w);
            if (!v) continue; /* another unit's, not held here */
            int64_t rows = (int64_t)a->chunks * hidden, first = sw_params_value_first_row(m->p, a->lin.w);
            float *w = malloc(sizeof(float) * (size_t)(rows * hidden));
            for (int64_t i = 0; i < rows * hidden; i++) w[i] = adaln_std * normal(seed, 7, (uint64_t)l, (uint64_t)i);
            sw_tensor_write_host(v, w + first * hidden);
            free(w);
        }
    sw_blocks_config bc = {.layers = layers, .rows = x->Tl, .cols = hidden, .recompute = recompute, .recompute_every = every,
                           .offload = offload};
    m->pipe = sw_pipeline_create(x, &bc, &ops, &model_ops, m, 0);
    const int64_t l = x->Tl, B = x->B;
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

    /* the data, global (every rank the same; the loads take each rank's part):
     * latents x0[b][f][i][j][c], a smooth pattern per sample; conditioning [cond_len batch, cond_dim]
     * in [s, b] order; per step the noise and t from the seed */
    const int64_t vol = (int64_t)F * H * W * C, ntok = (int64_t)seq * batch;
    float *x0 = malloc(sizeof(float) * (size_t)(vol * batch)), *eps = malloc(sizeof(float) * (size_t)(vol * batch));
    float *xt = malloc(sizeof(float) * (size_t)(vol * batch)), *tok = malloc(sizeof(float) * (size_t)(ntok * ppc));
    float *tgt = malloc(sizeof(float) * (size_t)(ntok * ppc)), *cond = malloc(sizeof(float) * (size_t)cond_len * batch * cond_dim);
    float *pos = calloc((size_t)(ntok * hidden), sizeof(float)), *tv = malloc(sizeof(float) * (size_t)batch);
    float *losses = malloc(sizeof(float) * (size_t)steps);
    if (!x0 || !eps || !xt || !tok || !tgt || !cond || !pos || !tv || !losses) sw_usage_error("out of memory");
    for (int b = 0; b < batch; b++)
        for (int64_t i = 0; i < vol; i++) {
            int c = (int)(i % C), j = (int)(i / C % W), y = (int)(i / C / W % H), f = (int)(i / C / W / H);
            x0[b * vol + i] = sinf(0.7f * (float)f + 0.5f * (float)y - 0.3f * (float)j + 1.3f * (float)c + 0.9f * (float)b) *
                              cosf(0.2f * (float)(y * j) + 0.1f * (float)b);
        }
    for (int s = 0; s < cond_len; s++)
        for (int b = 0; b < batch; b++)
            for (int c = 0; c < cond_dim; c++)
                cond[((int64_t)s * batch + b) * cond_dim + c] = sinf(0.37f * (float)(s + 1) * (float)(c + 1) + 1.1f * (float)b);
    for (int p = 0; p < seq; p++) /* position p = f S + s: the patch index s and the frame f */
        for (int b = 0; b < batch; b++) {
            sincos_add(pos + ((int64_t)p * batch + b) * hidden, hidden, (double)(p % S));
            sincos_add(pos + ((int64_t)p * batch + b) * hidden, hidden, (double)(p / S));
        }
    sw_ctx_load_floats(x, 0, pos, hidden, m->pos); /* the same for every micro-batch */
    const sw_patch_dims pd = {.frames = F, .height = H, .width = W, .channels = C, .patch = P};
    for (int k = 0; k < micro; k++) sw_ctx_load_cond(x, k, cond, cond_len, cond_dim, m->cond[k]);
    if (xdir) {
        if (mkdir(xdir, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "dit_train: --export: mkdir %s: %s\n", xdir, strerror(errno));
            return 1;
        }
        char path[1200];
        snprintf(path, sizeof path, "%s/index.txt", xdir);
        if (!(xindex = fopen(path, "w"))) return fprintf(stderr, "dit_train: --export: %s: %s\n", path, strerror(errno)), 1;
        fprintf(xindex, "# kind name rows cols file (raw little-endian float32, row-major)\n");
        fprintf(xindex, "config frames=%d height=%d width=%d channels=%d patch=%d hidden=%d heads=%d layers=%d "
                        "cond_len=%d cond_dim=%d batch=%d steps=%d freq=%d lr=%.9g weight_decay=0.01 clip=1 "
                        "beta1=0.9 beta2=0.999 eps=1e-8 norm_eps=1e-6\n",
                F, H, W, C, P, hidden, heads, layers, cond_len, cond_dim, batch, steps, FREQ, (double)lr);
        for (int i = 0; i < sw_params_count(m->p); i++) {
            const sw_param_desc *pdsc = sw_params_desc(m->p, i);
            float *v = malloc(sw_tensor_bytes(sw_params_value(m->p, i)));
            sw_tensor_read_host(sw_params_value(m->p, i), v);
            export_raw("param", pdsc->name, pdsc->rows, pdsc->cols, v);
            free(v);
        }
        export_raw("data", "latents", batch, vol, x0);
        export_raw("data", "cond", (int64_t)cond_len * batch, cond_dim, cond);
    }

    /* the whole model at creation: its bytes from the shapes alone, and what StarPU's allocator counts */
    const double model_created = sw_params_bytes(m->p) + sw_pipeline_blocks_bytes(x, &bc, &ops, m, 0) +
                                 own_bytes(x, hidden, ppc, cond_len, cond_dim, micro) +
                                 sw_timestep_embedder_bytes(x, FREQ, hidden) + sw_row_mse_bytes(x, ppc) +
                                 (sw_params_runs_unit(m->p, SW_UNIT_AFTER) ? 0 : 4.0); /* the loss the last stage sends */
    const double ram_created = memory ? ram_used() - ram_before : 0;

    /* checkpoints (checkpoint.h): the registry's parameters and AdamW moments, re-sharded when the
     * layout differs; the fields below must match (the tensors' global shapes are checked too) */
    const sw_ckpt_field fields[] = {{"frames", F}, {"height", H}, {"width", W}, {"patch", P}, {"channels", C},
                                    {"heads", heads}, {"layers", layers}, {"cond-len", cond_len}};
    const int nfields = (int)(sizeof fields / sizeof fields[0]);
    int step0 = 0; /* the last step already done */
    if (resume) {
        step0 = sw_checkpoint_load(m->p, fields, nfields, resume);
        if (step0 >= steps) sw_usage_error("the checkpoint is at step %d, nothing left of --steps %d", step0, steps);
        if (sw_rank() == 0) printf("dit_train: resumed from %s after step %d\n", resume, step0);
    }

    double total = 0;
    int timed = 0;
    if (trace) sw_trace_enable(1);
    if (memory) sw_memory_watch(1); /* the peak and bytes moved of StarPU's memory nodes, from the first step */
    for (int step = step0 + 1; step <= steps; step++) {
        sw_trace_mark_step(step);
        for (int b = 0; b < batch; b++) {
            int ti = (int)((mix(mix(seed ^ 0x7473ULL) ^ (uint64_t)step) ^ mix((uint64_t)b)) % 1000); /* t in 0 .. 999 */
            double a = alpha_bar(ti);
            tv[b] = (float)ti;
            for (int64_t i = 0; i < vol; i++) {
                eps[b * vol + i] = normal(seed, (uint64_t)step, (uint64_t)b, (uint64_t)i);
                xt[b * vol + i] = (float)(sqrt(a) * x0[b * vol + i] + sqrt(1.0 - a) * eps[b * vol + i]);
            }
        }
        if (xdir) {
            char n[32];
            snprintf(n, sizeof n, "noise_%d", step), export_raw("data", n, batch, vol, eps);
            snprintf(n, sizeof n, "t_%d", step), export_raw("data", n, batch, 1, tv);
        }
        sw_patchify(&pd, batch, xt, tok);
        sw_patchify(&pd, batch, eps, tgt); /* the target: the true noise, patchified like x_t */
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int k = 0; k < micro; k++) {
            sw_ctx_load_floats(x, k, tok, ppc, m->tokens[k]);
            sw_ctx_load_floats(x, k, tgt, ppc, m->target[k]);
            sw_ctx_load_seq_targets(x, k, tv, m->t[k]);
        }
        sw_pipeline_step(m->pipe, step);
        sw_tensor_read_host(sw_pipeline_loss(m->pipe), &losses[step - 1]);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = 1e3 * (double)(t1.tv_sec - t0.tv_sec) + 1e-6 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (step > step0 + 1) total += ms, timed++;
        if (sw_rank() == 0) printf("step %2d  loss %.7f  %.1f ms\n", step, losses[step - 1], ms);
        fflush(stdout); /* every step: a killed run's output keeps the steps it printed */
        if (xdir && step == 1) /* the step's gradients (clipped: clip_grad 1) */
            for (int i = 0; i < sw_params_count(m->p); i++) {
                int64_t first;
                sw_tensor *g = sw_params_reduced_grad(m->p, i, &first);
                float *v = malloc(sw_tensor_bytes(g));
                sw_tensor_read_host(g, v);
                export_raw("grad", sw_params_desc(m->p, i)->name, g->rows, g->cols, v);
                free(v);
            }
        if (save && (step == steps || (save_every && step % save_every == 0)))
            sw_checkpoint_save(m->p, fields, nfields, save, step);
    }
    /* the last step's reduced, clipped gradients, from the ranks holding distinct parts (the digests
     * of test_dit_model.sh, as encoder_regress prints them): TP rank 0 for a replicated one; the first
     * rank of the gradient group, or with ZeRO each rank its rows where it holds part of them */
    for (int i = 0; i < sw_params_count(m->p); i++) {
        int64_t first, rows, cols;
        if (!sw_params_held(m->p, i)) continue; /* another pipeline stage's */
        sw_tensor *g = sw_params_reduced_grad(m->p, i, &first);
        sw_shard_shape(sw_params_desc(m->p, i), &rows, &cols);
        if (g->rows == rows && (x->ur || x->rr || x->dp_rank)) continue; /* the whole of it: the first rank's */
        float *v = malloc(sw_tensor_bytes(g));
        double s2 = 0, s1 = 0;
        sw_tensor_read_host(g, v);
        for (int64_t j = 0; j < g->rows * g->cols; j++) s2 += (double)v[j] * v[j], s1 += fabs(v[j]);
        if (sw_params_desc(m->p, i)->shard.n || x->tp.rank == 0) printf("grad %s %.9e %.9e\n", sw_params_desc(m->p, i)->name, s2, s1);
        free(v);
    }
    if (sw_rank() == 0 && timed) printf("mean step time (steps %d .. %d): %.1f ms\n", step0 + 2, steps, total / timed);
    if (xdir) {
        export_raw("loss", "losses", steps, 1, losses);
        if (fclose(xindex)) return fprintf(stderr, "dit_train: --export: index.txt\n"), 1;
    }
    if (trace) write_trace(trace);
    if (memory) { /* on every rank: the whole model's bytes beside StarPU's allocator, at creation and after the steps */
        /* What a step adds that creation did not: the layers' scratch (sw_scratch_bytes, made on first use; the
         * ZeRO pools and buckets, the gradients and AdamW moments are the registry's, made at creation). The
         * collectives' temporaries are StarPU's, freed by the step's end. Not modelled: with offload, the
         * main-RAM copies StarPU still holds of the offload node's tensors (its cache, evicted on demand). */
        const double ram_after = ram_used() - ram_before, lazy = sw_scratch_bytes(x);
        printf("memory: rank %d created: allocator %.0f bytes, model %.0f bytes%s\n", sw_rank(), ram_created, model_created,
               opt.offload_budget_mb ? " (under an offload budget StarPU does not count the home buffers)" : "");
        printf("memory: rank %d after %d steps: allocator grew %.0f bytes, model %.0f bytes (the layers' scratch%s)\n",
               sw_rank(), steps, ram_after - ram_created, lazy,
               offload ? "; not modelled: the main-RAM copies StarPU keeps of the offloaded tensors" : "");
        /* each block's saved bytes, the library's model beside what it registered (0 and 0 on another stage) */
        for (int l = 0; l < layers; l++) {
            sw_block_memory r = sw_blocks_saved_bytes(sw_pipeline_chunk(m->pipe, sw_params_unit_chunk(m->p, l)), l);
            printf("memory: rank %d block %d saved model %.0f bytes registered %.0f bytes\n", sw_rank(), l, r.model_bytes,
                   r.registered_bytes);
        }
        printf("memory: rank %d blocks (residual stream, saved sets, gradient) model %.0f bytes; parameter state %.0f "
               "bytes; layers' scratch %.0f bytes\n", sw_rank(), sw_pipeline_blocks_bytes(x, &bc, &ops, m, 0),
               sw_params_bytes(m->p), sw_scratch_bytes(x));
        sw_node_memory nodes[8]; /* StarPU's memory nodes: peak use, and the bytes moved in and out */
        for (int k = 0, n = sw_memory_nodes(nodes, 8); k < n; k++)
            printf("memory: rank %d %s: peak %.2f MiB used (of %.0f), in %.2f MiB, out %.2f MiB\n", sw_rank(),
                   nodes[k].name, nodes[k].peak / SW_MIB, nodes[k].total / SW_MIB, nodes[k].bytes_in / SW_MIB,
                   nodes[k].bytes_out / SW_MIB);
    }
    if (counters) { /* the traffic model beside what the collectives counted, on every rank */
        sw_traffic tm;
        sw_pipeline_traffic(m->pipe, &tm);
        sw_comm_traffic_report(comm, &tm, steps, stdout);
        sw_counters_print(stdout);
    }
    free(x0), free(eps), free(xt), free(tok), free(tgt), free(cond), free(pos), free(tv), free(losses);
    for (int k = 0; k < micro; k++) {
        sw_tensor *all[] = {m->tokens[k], m->target[k], m->t[k], m->cond[k], m->c[k], m->sc[k], m->dsc[k], m->fmod[k]};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) sw_tensor_free(all[i]);
    }
    sw_tensor_free(m->pos), sw_tensor_free(m->emb), sw_tensor_free(m->nf), sw_tensor_free(m->nf_rstd);
    sw_tensor_free(m->fm), sw_tensor_free(m->pred);
    sw_row_mse_destroy(m->mse), sw_timestep_embedder_destroy(m->te), sw_pipeline_destroy(m->pipe);
    sw_grid_attention_destroy(m->spatial), sw_grid_attention_destroy(m->temporal), sw_cross_attention_destroy(m->cross);
    sw_ctx_destroy(x), sw_params_destroy(m->p), free(m), sw_comm_destroy(world), sw_mesh_destroy(mesh), sw_shutdown();
    return 0;
}
